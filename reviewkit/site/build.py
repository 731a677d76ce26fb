"""Publish the decisions log as a static site: index, one packet per decision, flags, trends."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reviewkit import __version__
from reviewkit.common.errors import InputError, ReviewkitError
from reviewkit.common.files import output_errors
from reviewkit.common.hashing import sha256_file
from reviewkit.render import charts
from reviewkit.render.packet.html import jinja_environment
from reviewkit.render.packet.write import render_into, swap_into_place, write_shared_assets
from reviewkit.render.printing import PdfError

MANIFEST = ".reviewkit-site.json"
MANIFEST_VERSION = 1
DECISIONS = "decisions"
REVIEW_FILE = "review.toml"
# Everything that shapes a rendered decision besides its own inputs: a change to any of these
# re-renders every decision.

Progress = Callable[[str, int, int], None]


@dataclass
class DecisionResult:
    slug: str
    status: str  # "rendered" | "unchanged" | "failed"
    summary: dict = field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0
    # What WeasyPrint warned about while printing a PDF that was kept (it was usable).
    pdf_warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SiteResult:
    out_dir: Path
    decisions: tuple[DecisionResult, ...]
    seconds: float

    @property
    def failed(self) -> list[DecisionResult]:
        return [d for d in self.decisions if d.status == "failed"]

    def to_json(self) -> dict:
        return {
            "out": str(self.out_dir),
            "seconds": round(self.seconds, 3),
            "decisions": [
                {
                    "slug": d.slug,
                    "status": d.status,
                    "error": d.error,
                    "pdf_warnings": list(d.pdf_warnings),
                    "seconds": round(d.seconds, 3),
                }
                for d in self.decisions
            ],
            "failed": [d.slug for d in self.failed],
        }


def discover(site_dir: Path) -> list[Path]:
    """Decision folders: SITE_DIR/decisions/<slug>/review.toml, in slug order."""
    root = site_dir / DECISIONS
    if not root.is_dir():
        raise InputError(
            f"{site_dir}: no {DECISIONS}/ folder; a decisions log holds one folder per decision "
            f"under {DECISIONS}/, each with its {REVIEW_FILE} and run bundles"
        )
    return sorted(p.parent for p in root.glob(f"*/{REVIEW_FILE}"))


# The parts of the package a page is built from: every stage the site imports, and the
# templates and default rubric. `measure` and `cli` are left out: the layering test keeps the
# site from importing them, and a bundle they wrote reaches a page through input_hash.
RENDER_PACKAGES = ("common", "suite", "bundle", "analysis", "evidence", "review", "render",
                   "site", "rubrics", "templates")  # fmt: skip


def render_code_files() -> list[tuple[str, Path]]:
    """Every file of the packages a page depends on, named by package and relative path."""
    files = [("__init__.py", Path(importlib.import_module("reviewkit").__file__).resolve())]
    for name in RENDER_PACKAGES:
        folder = Path(importlib.import_module(f"reviewkit.{name}").__file__).resolve().parent
        files += sorted(
            (f"{name}/{p.relative_to(folder).as_posix()}", p) for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        )  # fmt: skip
    return files


def _render_salt(pdf: bool, rubric: Path | None) -> str:
    """The code, templates and rubric a decision is rendered with, as a hash.

    Hashes whole packages rather than a list of modules, so a change to any code a page
    depends on (statistics included) re-renders every decision.
    """
    from reviewkit.review.rubric import DEFAULT_RUBRIC

    digest = hashlib.sha256(f"{__version__}|pdf={pdf}".encode())
    for name, path in render_code_files():
        digest.update(f"{name}={sha256_file(path)}".encode())
    digest.update(sha256_file(rubric or DEFAULT_RUBRIC).encode())
    return digest.hexdigest()


def input_hash(folder: Path, salt: str) -> str:
    """Content hash of a decision: every file in its folder (paths and bytes) plus the salt.

    A decision folder is self-contained (its review cites only files inside it), so hashing the
    folder covers the review, its runs and its evidence without parsing anything.
    """
    digest = hashlib.sha256(salt.encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode())
        digest.update(sha256_file(path).encode())
    return digest.hexdigest()


# How the index names a class that is not one: no class given (a run recorded before overhead
# was measured, whose roof explains too little of its time), or none recorded at all.
UNCLASSIFIED_SUMMARY = "unclassified (overhead not measured)"
NO_CLASS = "unknown"


def bottleneck_summary(bottlenecks: list[dict]) -> str:
    """The candidates' layer types by class, the class holding most first; layer types with no
    class ("unclassified", or none recorded) last, so they are never read as the dominant one."""
    from reviewkit.analysis.bottleneck import UNCLASSIFIED

    by_class: dict[str, list[str]] = {}
    for b in bottlenecks:
        cls = b["candidate_class"] or NO_CLASS
        name = UNCLASSIFIED_SUMMARY if cls == UNCLASSIFIED else cls
        layers = by_class.setdefault(name, [])
        if b["layer_type"] not in layers:  # several candidates: a layer type once per class
            layers.append(b["layer_type"])
    unsure = (UNCLASSIFIED_SUMMARY, NO_CLASS)
    dominant = sorted(by_class.items(), key=lambda kv: (kv[0] in unsure, -len(kv[1])))
    return "; ".join(f"{cls}: {', '.join(layers)}" for cls, layers in dominant)


def shortlist_summary(section: dict) -> dict | None:
    """The first cited platform shortlist as the index lists it (its model and the platforms
    it shortlisted), or None when the decision cites none."""
    shown = section.get("shortlists") or []
    if not shown:
        return None
    return {"model": shown[0]["model"], "shortlisted": list(shown[0]["shortlisted"])}


def _summary(slug: str, model: dict) -> dict:
    return {
        "slug": slug,
        "title": model["title"],
        "date": model["decision"].get("date", ""),
        "status": model["decision"].get("status", "proposed"),
        "owner": model["owner"]["name"],
        "team": model["owner"]["team"],
        "gate": model["gate"]["verdict"],
        "red_flags": model["gate"]["red_flags"],
        "red_flag_items": [
            {
                "title": f["title"],
                "status": f["status"],
                "severity": f["severity"],
                "clears_with": f["clears_with"],
            }
            for f in model["red_flags"]
        ],
        "bottleneck_summary": bottleneck_summary(model["bottlenecks"]),
        "shortlist": shortlist_summary(model.get("shortlist") or {}),
        "headline": model["headline"],
        "has_pdf": False,
    }


def _render_decision(
    folder: Path, target: Path, pdf: bool, rubric: Path | None
) -> tuple[dict, tuple[str, ...]]:
    """The decision's packet model and its PDF's warnings. A PDF that cannot be produced fails
    the decision (PdfError) as before: its page links a packet.pdf, and the manifest would
    otherwise keep it as built and never retry."""
    from reviewkit.review.gate import run_check

    report = run_check(folder / REVIEW_FILE, rubric)
    target.mkdir(parents=True)
    nav = {"index": "../../index.html", "pdf": "packet.pdf" if pdf else ""}
    rendered = render_into(report, target, pdf=pdf, asset_base="../../assets/", nav=nav)
    if rendered.pdf_error is not None:
        raise PdfError(rendered.pdf_error)
    return rendered.model, rendered.pdf_warnings


def _trend_rows(folders: list[Path]) -> dict[str, list[dict]]:
    """Per layer type, one point per (run, dtype) across every run bundle in the log."""
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.run import load_run

    seen: set[str] = set()
    rows: dict[str, list[dict]] = {}
    prints: dict[str, set] = {}
    for folder in folders:
        for run_file in sorted(folder.rglob("run.json")):
            try:
                digest = sha256_file(run_file)
                if digest in seen:
                    continue
                seen.add(digest)
                run = analyse_run(load_run(run_file))
            except (ReviewkitError, OSError):
                continue  # a broken decision is reported by its own build; trends skip it
            when = dt.datetime.fromtimestamp(run.created_unix_s or 0, dt.timezone.utc)
            # A series is one device by its fingerprint, under its label (a Zen 3 and a Zen 5
            # both named "AMD EPYC" are two series); runs recorded before fingerprints by name.
            fingerprint = run.fingerprint
            device = (
                fingerprint.get("label")
                or run.knobs.get("device_name")
                or run.knobs.get("device", "?")
            )
            prints.setdefault(device, set()).add(fingerprint.get("hash"))
            threads = run.knobs.get("threads")
            for dtype, layers in run.layer_types_by_dtype.items():
                for layer_type, agg in layers.items():
                    rows.setdefault(layer_type, []).append({
                        "time": when.strftime("%Y-%m-%dT%H:%M:%S"),
                        "device": device, "fingerprint": fingerprint.get("hash"),
                        "series": f"{device} · {dtype} · {threads} threads",
                        "mfu": agg.mfu, "stall": agg.memory_stall_fraction,
                        "run": run_file.parent.relative_to(folder).as_posix(),
                        "decision": folder.name,
                    })  # fmt: skip
    for series in rows.values():  # one label, several fingerprints: the hash tells them apart
        for row in series:
            device, fp = row.pop("device"), row.pop("fingerprint")
            if len(prints.get(device, ())) > 1 and fp:
                row["series"] = row["series"].replace(device, f"{device} [{fp[:6]}]", 1)
    return rows


def _slug_ok(slug: str) -> bool:
    return re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", slug) is not None


# PDFs cost ~5 s a decision; from this many to render, worker processes (one per core) pay
# for their ~2 s start-up. Spawned, not forked: vl-convert's V8 hangs in a forked child.
PARALLEL_FROM = 4


def _render_job(
    slug: str, folder: str, target: str, pdf: bool, rubric: str | None
) -> tuple[str, str, dict | None, str, float, tuple[str, ...]]:
    """Render one decision; a failure is returned as data so the others still build."""
    start = time.perf_counter()
    try:
        model, warnings = _render_decision(
            Path(folder), Path(target), pdf, Path(rubric) if rubric else None
        )
    except (ReviewkitError, OSError, ValueError) as exc:
        shutil.rmtree(target, ignore_errors=True)
        return slug, "failed", None, str(exc), time.perf_counter() - start, ()
    summary = {**_summary(slug, model), "has_pdf": pdf}
    return slug, "rendered", summary, "", time.perf_counter() - start, warnings


def _render_all(
    todo: list[tuple[str, Path, Path, str]], pdf: bool, rubric: Path | None, workers: int
):
    """Yield each decision's result as it completes, in one process or in several."""
    args = [(slug, str(folder), str(target), pdf, str(rubric) if rubric else None)
            for slug, folder, target, _ in todo]  # fmt: skip
    if workers <= 1 or len(args) <= 1:
        for a in args:
            yield _render_job(*a)
        return
    import concurrent.futures
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        futures = [pool.submit(_render_job, *a) for a in args]
        for future in concurrent.futures.as_completed(futures):
            yield future.result()


def build_site(
    site_dir: Path | str,
    out_dir: Path | str,
    pdf: bool = True,
    rubric: Path | str | None = None,
    progress: Progress | None = None,
    jobs: int | None = None,
) -> SiteResult:
    """Build into a temporary folder beside DIR and swap it in; unchanged decisions are reused.

    jobs: processes rendering decisions (default: one per core when many PDFs are due).
    """
    start = time.perf_counter()
    site_dir, out_dir = Path(site_dir), Path(out_dir)
    rubric = Path(rubric) if rubric else None
    say = progress or (lambda *_: None)
    folders = discover(site_dir)
    if site_dir.resolve().is_relative_to(out_dir.resolve()):
        raise InputError(f"--out {out_dir}: would replace the decisions log itself; pick another")
    previous = _read_manifest(out_dir)
    salt = _render_salt(pdf, rubric)
    with output_errors(out_dir, "site"):
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
        results: list[DecisionResult] = []
        manifest: dict = {"version": MANIFEST_VERSION, "decisions": {}}
        try:
            write_shared_assets(tmp / "assets")
            by_slug: dict[str, DecisionResult] = {}
            jobs_todo: list[tuple[str, Path, Path, str]] = []
            for folder in folders:
                slug = folder.name
                target = tmp / DECISIONS / slug
                if not _slug_ok(slug):
                    by_slug[slug] = DecisionResult(
                        slug, "failed",
                        error=f"folder name {slug!r}: use letters, digits, '.', '_' and '-' only",
                    )  # fmt: skip
                    continue
                digest = input_hash(folder, salt)
                old = previous.get(slug)
                old_dir = out_dir / DECISIONS / slug
                if old and old.get("hash") == digest and (old_dir / "packet.json").exists():
                    # Hard links: no bytes copied, and the old site stays intact until the swap.
                    shutil.copytree(old_dir, target, copy_function=os.link)
                    by_slug[slug] = DecisionResult(slug, "unchanged", old["summary"])
                    manifest["decisions"][slug] = {"hash": digest, "summary": old["summary"]}
                else:
                    jobs_todo.append((slug, folder, target, digest))
            if jobs is not None:
                workers = jobs
            elif pdf and len(jobs_todo) >= PARALLEL_FROM:
                workers = os.cpu_count() or 1
            else:
                workers = 1
            for done, (slug, status, summary, error, seconds, warnings) in enumerate(
                _render_all(jobs_todo, pdf, rubric, workers)
            ):
                say(slug, done + 1, len(jobs_todo))
                by_slug[slug] = DecisionResult(
                    slug, status, summary or {}, error, seconds, warnings
                )
                if status == "rendered":
                    digest = next(d for s_, _, _, d in jobs_todo if s_ == slug)
                    manifest["decisions"][slug] = {"hash": digest, "summary": summary}
            results = [by_slug[f.name] for f in folders]
            say("site pages", len(folders), len(folders))
            _write_pages(tmp, results, folders, rubric)
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
            os.chmod(tmp, 0o755)
            swap_into_place(tmp, out_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return SiteResult(out_dir, tuple(results), time.perf_counter() - start)


def _read_manifest(out_dir: Path) -> dict:
    try:
        doc = json.loads((out_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    if doc.get("version") != MANIFEST_VERSION:
        return {}
    return doc.get("decisions", {})


def _write_pages(
    tmp: Path, results: list[DecisionResult], folders: list[Path], rubric: Path | None
) -> None:
    from reviewkit.review.checks import CHECKS
    from reviewkit.review.rubric import load_rubric

    env = jinja_environment()
    rubric_doc = load_rubric(rubric, CHECKS)
    decisions = sorted(
        (r for r in results if r.status != "failed"),
        key=lambda r: (str(r.summary.get("date", "")), r.slug),
        reverse=True,
    )
    failed = [r for r in results if r.status == "failed"]
    trends = _trend_rows([f for f in folders if f.name not in {r.slug for r in failed}])
    layer_pages = []
    for layer_type in sorted(trends):
        rows = trends[layer_type]
        specs = {
            "mfu": charts.trend(
                [{**r, "value": r["mfu"]} for r in rows],
                "MFU",
                f"{layer_type}: MFU over time",
                "MFU (% of peak)",
            ),
            "stall": charts.trend(
                [{**r, "value": r["stall"]} for r in rows],
                "memory-stall",
                f"{layer_type}: memory-stall fraction over time",
                "Memory-stall fraction",
            ),
        }
        layer_pages.append({
            "layer_type": layer_type, "file": f"trends/{layer_type}.html", "points": len(rows),
            # embedded specs drop "$schema", a URL off the machine that nothing needs
            "specs": {k: {f: x for f, x in v.items() if f != "$schema"} for k, v in specs.items()},
            "svgs": {k: charts.to_svg(v) for k, v in specs.items()},
        })  # fmt: skip
    common = {
        "decisions": [r.summary for r in decisions],
        "failed": failed,
        "layer_pages": layer_pages,
        "generator": f"reviewkit {__version__}",
    }
    pages = {
        "index.html": ("site_index.html.j2", {"root": ""}),
        "red-flags.html": ("site_red_flags.html.j2", {"root": ""}),
        "rubric.html": ("site_rubric.html.j2", {"root": "", "rubric": rubric_doc}),
        "questions.html": ("site_questions.html.j2", {"root": "", "rubric": rubric_doc}),
    }
    for name, (template, extra) in pages.items():
        text = env.get_template(template).render(**common, **extra)
        (tmp / name).write_text(text, encoding="utf-8")
    (tmp / "trends").mkdir(exist_ok=True)
    from markupsafe import Markup

    for page in layer_pages:
        text = env.get_template("site_trend.html.j2").render(
            **common,
            root="../",
            page=page,
            svgs={k: Markup(v) for k, v in page["svgs"].items()},
        )
        (tmp / page["file"]).write_text(text, encoding="utf-8")


def serve(out_dir: Path, port: int) -> None:
    """Serve the built site on loopback only, until Ctrl-C."""
    import functools
    import http.server

    if not (out_dir / "index.html").exists():
        raise InputError(f"{out_dir}: no index.html; build it with `reviewkit site build`")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out_dir))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"serving {out_dir} at http://127.0.0.1:{httpd.server_address[1]}/ (Ctrl-C stops)")
        httpd.serve_forever()
