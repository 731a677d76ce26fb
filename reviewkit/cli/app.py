"""The `reviewkit` command line: run, show, suite, mfu. Heavy imports happen inside commands."""

from __future__ import annotations

import contextlib
import functools
import json
import shlex
import sys
import time
from pathlib import Path

import typer
from rich.console import Console

from reviewkit.common.errors import ReviewkitError, UsageError
from reviewkit.suite import workloads as suite

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Measure a fixed torch suite and turn MFU and memory-stall fractions into decisions.",
)
stderr = Console(stderr=True)
_state = {"debug": False}


@app.callback()
def _options(
    debug: bool = typer.Option(False, "--debug", help="show tracebacks for errors"),
) -> None:
    _state["debug"] = debug


@contextlib.contextmanager
def _progress(first: str = "starting"):
    """A transient progress bar on stderr; yields the (label, done, total) callback stages take."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task(first, total=None)
        yield lambda label, done, total: bar.update(
            task, description=label[:60], completed=done, total=total
        )


def _user_errors(command):
    """One actionable line and a non-zero exit for a ReviewkitError; --debug re-raises."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except ReviewkitError as exc:
            if _state["debug"]:
                raise
            stderr.print(f"[red]reviewkit: error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def _dtypes(text: str) -> tuple[str, ...]:
    return tuple(d.strip() for d in text.split(",") if d.strip())


def _emit_json(document: dict) -> None:
    sys.stdout.write(json.dumps(document, indent=1, allow_nan=False) + "\n")


def _save_evidence(doc: dict, out: Path, as_json: bool) -> bool:
    """Record the command line, write the evidence file atomically; True when JSON was printed."""
    from reviewkit.bundle.run import write_json_atomic

    doc["command"] = shlex.join(["reviewkit", *sys.argv[1:]]) if sys.argv[1:] else None
    write_json_atomic(out, doc)
    if as_json:
        _emit_json(doc)
    return as_json


def _default_out(profile: str, device: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path("runs") / f"{stamp}-{profile}-{device.replace(':', '')}"


@app.command()
@_user_errors
def run(
    profile: str = typer.Option(suite.DEFAULT_PROFILE, help="smoke | quick | full"),
    device: str = typer.Option("cpu", help="cpu | cuda | cuda:N | mps | xpu"),
    dtype: str = typer.Option(",".join(suite.DTYPES), help="comma-separated: fp32,bf16,fp16"),
    only: str | None = typer.Option(None, help="glob(s) over workload ids, comma-separated"),
    threads: int | None = typer.Option(None, help="torch intra-op threads (default: torch's)"),
    out: Path | None = typer.Option(
        None, help="bundle folder (default: runs/<time>-<profile>-<device>)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON summary on stdout"),
) -> None:
    """Measure the suite on this machine and write a run bundle (run.json)."""
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.run import write_run
    from reviewkit.cli.console import print_run, stdout_console, summary
    from reviewkit.measure import runner as measure

    request = measure.RunRequest(profile, device, _dtypes(dtype), only, threads)
    measure.plan(request)  # fail on bad input before any device work
    out_dir = out or _default_out(profile, device)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a folder; pick another path")

    with _progress() as on_progress:
        doc = measure.run(request, on_progress)
    # The exact command line, so the whole run can be reproduced (each workload also carries
    # its own single-workload command).
    doc["command"] = shlex.join(["reviewkit", *sys.argv[1:]]) if sys.argv[1:] else None
    analyse_run(doc)
    path = write_run(out_dir, doc)
    if as_json:
        _emit_json(summary(doc, str(path)))
    else:
        print_run(doc, stdout_console(), str(path))
    if not doc["complete"]:
        raise typer.Exit(130)


@app.command()
@_user_errors
def show(
    run_dir: Path = typer.Argument(..., help="a run bundle folder or its run.json"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON summary on stdout"),
) -> None:
    """Print a bundle's tables again, without importing torch."""
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.run import load_run
    from reviewkit.cli.console import print_run, stdout_console, summary

    doc = analyse_run(load_run(run_dir))
    if as_json:
        _emit_json(summary(doc, str(run_dir)))
    else:
        print_run(doc, stdout_console(), str(run_dir))


@app.command("suite")
@_user_errors
def suite_cmd(
    profile: str = typer.Option(suite.DEFAULT_PROFILE, help="smoke | quick | full"),
    dtype: str = typer.Option(",".join(suite.DTYPES), help="comma-separated dtypes"),
    only: str | None = typer.Option(None, help="glob(s) over workload ids"),
    as_json: bool = typer.Option(False, "--json", help="print the definitions as JSON"),
) -> None:
    """List the suite's workloads (ids, FLOPs, bytes) without measuring."""
    specs = suite.plan_specs(profile, _dtypes(dtype), only)
    ident = suite.suite_identity()
    if as_json:
        _emit_json(
            {
                "suite": ident.to_json(),
                "profile": profile,
                "workloads": [s.definition() for s in specs],
            }
        )
        return
    from reviewkit.cli.console import stdout_console

    console = stdout_console()
    console.print(f"{ident.name} {ident.version} (hash {ident.hash}) · profile {profile}")
    for s in specs:
        console.print(
            f"{s.id}  [dim]{s.flops / 1e9:.3g} GFLOP · {s.bytes / 1e6:.3g} MB · {s.source_model}[/]"
        )


@app.command("compare")
@_user_errors
def compare_cmd(
    base: Path = typer.Argument(..., help="baseline run bundle (folder or run.json)"),
    cand: Path = typer.Argument(..., help="candidate run bundle (folder or run.json)"),
    fail_on_regression: bool = typer.Option(
        False, "--fail-on-regression", help="exit 1 if any workload is significantly slower at p99"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the comparison as JSON"),
) -> None:
    """Compare two run bundles: knob diff, ratios with 95% CIs, verdicts (no torch)."""
    from reviewkit.analysis.compare import compare
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.run import load_run
    from reviewkit.cli.console import print_comparison, stdout_console

    comparison = compare(
        analyse_run(load_run(base)), analyse_run(load_run(cand)), str(base), str(cand)
    )
    if as_json:
        _emit_json(comparison.to_json())
    else:
        print_comparison(comparison, stdout_console())
    if fail_on_regression and comparison.p99_regressions:
        raise typer.Exit(1)


@app.command("check")
@_user_errors
def check_cmd(
    review: Path = typer.Argument(..., help="the review file (review.toml)"),
    rubric: Path | None = typer.Option(None, help="a rubric TOML (default: rubrics/default.toml)"),
    allow_outside: bool = typer.Option(
        False, "--allow-outside", help="allow paths that leave the review's folder"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the findings as JSON"),
) -> None:
    """Fill the rubric from the runs and the review file; exit 1 if a blocking item fails."""
    from reviewkit.cli.console import print_check, stdout_console
    from reviewkit.review.gate import GATE_FAIL, run_check

    report = run_check(review, rubric, allow_outside=allow_outside)
    if as_json:
        _emit_json(report.to_json())
    else:
        print_check(report, stdout_console())
    if report.verdict == GATE_FAIL:
        raise typer.Exit(1)


@app.command()
@_user_errors
def packet(
    review: Path = typer.Argument(..., help="the review file (review.toml)"),
    out: Path = typer.Option(..., "--out", help="folder for packet.html, packet.pdf, packet.json"),
    rubric: Path | None = typer.Option(None, help="a rubric TOML (default: rubrics/default.toml)"),
    no_pdf: bool = typer.Option(False, "--no-pdf", help="write the HTML and JSON only"),
    allow_outside: bool = typer.Option(
        False, "--allow-outside", help="allow paths that leave the review's folder"
    ),
    as_json: bool = typer.Option(False, "--json", help="print what was written as JSON"),
) -> None:
    """Render the review packet: offline HTML with interactive charts, and a paged PDF."""
    from rich.status import Status

    from reviewkit.render.packet import write_packet

    with Status("rendering the packet", console=stderr) as status:
        result = write_packet(
            review,
            out,
            rubric,
            allow_outside,
            pdf=not no_pdf,
            progress=lambda msg: status.update(msg),
        )
    if as_json:
        _emit_json(result.to_json())
        return
    console = Console()
    console.print(f"packet: {result.html}")
    if result.pdf:
        console.print(f"pdf:    {result.pdf}")
    timings = ", ".join(f"{k[:-2]} {v:.2f} s" for k, v in result.timings_s.items())
    console.print(f"[dim]{timings}[/]")


@app.command()
@_user_errors
def demo(
    out: Path = typer.Option(Path("reviewkit-demo"), help="folder for the runs, packet and site"),
    profile: str = typer.Option("quick", help="smoke | quick | full"),
    device: str = typer.Option("cpu", help="cpu | cuda | ..."),
    no_pdf: bool = typer.Option(False, "--no-pdf", help="skip the PDFs"),
    examples: Path | None = typer.Option(
        None,
        "--examples",
        help="a decisions log to publish beside the demo's decision "
        "(default: site/decisions, when run from a checkout)",
    ),
) -> None:
    """The embedded default: measure fp32 and bf16 here, review, check, render, publish."""

    from reviewkit.cli.console import stdout_console
    from reviewkit.cli.demo import DEFAULT_EXAMPLES, run_demo

    suite.plan_specs(profile, ("fp32", "bf16"), None)  # fail on a bad profile before measuring
    if examples is None:
        examples = DEFAULT_EXAMPLES if DEFAULT_EXAMPLES.is_dir() else None
    elif not examples.is_dir():
        raise UsageError(
            f"--examples {examples}: not a folder; give a decisions log (one folder per "
            "decision, as site/decisions) or leave it out"
        )
    console = stdout_console()
    console.soft_wrap = True  # paths and URLs stay on one line, whole and copyable

    with _progress() as on_progress:
        result = run_demo(
            out,
            profile,
            device,
            pdf=not no_pdf,
            say=lambda msg: stderr.print(msg, highlight=False),
            on_progress=on_progress,
            examples=examples,
        )
    console.print(f"review:  {result['review']}")
    console.print(
        f"gate:    {result['verdict']} ({len(result['red_flags'])} red flags: "
        f"{', '.join(result['red_flags']) or 'none'})"
    )
    console.print(f"packet:  {result['packet_html'].resolve().as_uri()}")
    if result["packet_pdf"]:
        console.print(f"pdf:     {result['packet_pdf'].resolve().as_uri()}")
    console.print(f"site:    {result['site_index'].resolve().as_uri()}")
    if result["site_failed"]:
        raise typer.Exit(1)


@app.command()
@_user_errors
def quality(
    profile: str = typer.Option(suite.DEFAULT_PROFILE, help="smoke | quick | full"),
    device: str = typer.Option("cpu", help="cpu | cuda | ..."),
    dtype: str = typer.Option("bf16,fp16,int8", help="lower precisions to check, comma-separated"),
    only: str | None = typer.Option(None, help="glob(s) over workload ids"),
    out: Path = typer.Option(Path("quality.json"), help="where to write the result"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Quality drift of every workload in lower precision against a float64 reference."""

    from reviewkit.measure.quality import measure_quality

    with _progress("quality") as on_progress:
        doc = measure_quality(
            profile,
            device,
            _dtypes(dtype),
            only,
            on_progress,
        )
    if _save_evidence(doc, out, as_json):
        return
    from rich.table import Table

    table = Table(title=f"Relative error against float64 ({out})", title_justify="left")
    for col in ("workload", "dtype", "status", "rel. error", "max abs error", "top-1", "KL"):
        table.add_column(col)
    for r in doc["results"]:
        table.add_row(
            r["id"],
            r["dtype"],
            r["status"],
            f"{r['rel_error']:.2e}" if "rel_error" in r else r.get("reason", "")[:40],
            f"{r['max_abs_error']:.2e}" if "max_abs_error" in r else "",
            f"{r['top1_agreement']:.3f}" if "top1_agreement" in r else "",
            f"{r['kl_divergence']:.2e}" if "kl_divergence" in r else "",
        )
    from reviewkit.cli.console import stdout_console

    stdout_console().print(table)


@app.command()
@_user_errors
def sweep(
    profile: str = typer.Option(suite.DEFAULT_PROFILE, help="smoke | quick | full"),
    device: str = typer.Option("cpu", help="cpu | cuda | ..."),
    dtype: str = typer.Option("fp32", help="one dtype: fp32 | bf16 | fp16"),
    only: str | None = typer.Option(
        None, help="glob(s) over workload ids (default: the profile's primary model cell)"
    ),
    sla_p99_s: float | None = typer.Option(
        None, "--sla-p99-s", help="search the highest load whose p99 meets this SLA (seconds)"
    ),
    min_queries: int | None = typer.Option(None, help="queries a level needs to be valid"),
    min_duration_s: float | None = typer.Option(None, help="seconds a level needs to be valid"),
    out: Path = typer.Option(Path("sweep.json"), help="where to write the result"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Latency-throughput sweep (single-stream, server with Poisson arrivals, offline)."""
    import dataclasses

    from reviewkit.evidence import loadgen

    suite.require_profile(profile)
    if dtype not in suite.DTYPES:
        raise UsageError(f"--dtype {dtype!r}: choose one of {', '.join(suite.DTYPES)}")
    rules = loadgen.VALIDITY[profile]
    if min_queries is not None:
        if min_queries < 1:
            raise UsageError(f"--min-queries {min_queries}: expected a positive integer")
        rules = dataclasses.replace(rules, min_queries=min_queries)
    if min_duration_s is not None:
        if min_duration_s < 0:
            raise UsageError(f"--min-duration-s {min_duration_s}: expected seconds >= 0")
        rules = dataclasses.replace(rules, min_duration_s=min_duration_s)
    from reviewkit.measure.sweep import render_rows, run_sweep

    with _progress("sweep") as on_progress:
        doc = run_sweep(profile, device, dtype, only, sla_p99_s, rules, on_progress)
    if _save_evidence(doc, out, as_json):
        return
    from rich.table import Table

    from reviewkit.cli.console import stdout_console

    table = Table(title=f"Latency-throughput sweep ({out})", title_justify="left")
    for col in ("workload", "scenario", "offered/s", "achieved/s", "p50", "p99", "max", "valid"):
        table.add_column(col)
    for row in render_rows(doc):
        table.add_row(*row)
    console = stdout_console()
    console.print(table)
    for w in doc["workloads"]:
        knee = w.get("knee", {})
        line = (
            f"{w['id']}: knee at {knee['rate_per_s']:.3g} queries/s ({knee['rule']})"
            if knee.get("found")
            else f"{w['id']}: {knee.get('rule', w.get('reason', ''))}"
        )
        console.print(line, highlight=False, soft_wrap=True)
        if "sla" in w:
            s = w["sla"]
            console.print(
                f"  SLA p99 <= {s['p99_s'] * 1e3:.3g} ms: "
                + (
                    f"met up to {s['max_rate_per_s']:.3g} queries/s"
                    if s["met"]
                    else "not met at any valid level"
                )
                + (f" ({s['search_stopped']})" if s.get("search_stopped") else ""),
                highlight=False,
                soft_wrap=True,
            )


@app.command()
@_user_errors
def soak(
    profile: str = typer.Option(suite.DEFAULT_PROFILE, help="smoke | quick | full"),
    device: str = typer.Option("cpu", help="cpu | cuda | ..."),
    workload: str | None = typer.Option(
        None, help="one workload id (default: the profile's model workload at fp32)"
    ),
    window_s: float | None = typer.Option(
        None, "--window-s", help="seconds to run (default: smoke 2, quick 60, full 600)"
    ),
    subwindows: int | None = typer.Option(None, help="sub-windows to split it into (default 20)"),
    out: Path = typer.Option(Path("soak.json"), help="where to write the result"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Long-window stability: throughput per sub-window, clocks, temperatures, drift, throttling."""
    from reviewkit.measure.soak import render_text, run_soak

    suite.require_profile(profile)
    with _progress("soak") as on_progress:
        doc = run_soak(profile, device, workload, window_s, subwindows, on_progress)
    if _save_evidence(doc, out, as_json):
        return
    from reviewkit.cli.console import stdout_console

    stdout_console().print(render_text(doc), end="", highlight=False, soft_wrap=True, markup=False)
    if not doc["complete"]:
        raise typer.Exit(130)


@app.command()
@_user_errors
def sensors(
    as_json: bool = typer.Option(False, "--json", help="print the survey as JSON"),
) -> None:
    """What energy, temperature and clock counters this machine exposes, or why not."""
    from reviewkit.cli.console import stdout_console
    from reviewkit.measure.sensors import survey

    result = survey()
    if as_json:
        _emit_json(result)
        return
    console = stdout_console()
    for name, entry in result.items():
        state = "available" if entry["available"] else f"not available: {entry['reason']}"
        console.print(f"{name:12s} {state}", highlight=False)


site_app = typer.Typer(no_args_is_help=True, help="Publish the decisions log as a static site.")
app.add_typer(site_app, name="site")


@site_app.command("build")
@_user_errors
def site_build(
    site_dir: Path = typer.Argument(Path("site"), help="the decisions log (default: site)"),
    out: Path = typer.Option(..., "--out", help="folder to build the site into"),
    rubric: Path | None = typer.Option(None, help="a rubric TOML (default: rubrics/default.toml)"),
    no_pdf: bool = typer.Option(False, "--no-pdf", help="skip the PDF of each packet"),
    jobs: int | None = typer.Option(
        None, help="processes rendering decisions (default: one per core when many PDFs)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print what was built as JSON"),
) -> None:
    """Build the static site: index, one packet per decision, red flags, trends, rubric."""
    from reviewkit.site.build import build_site

    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs {jobs}: expected a positive integer")
    with _progress("decisions") as on_progress:
        result = build_site(
            site_dir,
            out,
            pdf=not no_pdf,
            rubric=rubric,
            jobs=jobs,
            progress=on_progress,
        )
    if as_json:
        _emit_json(result.to_json())
    else:
        console = Console()
        counts = {
            s: sum(d.status == s for d in result.decisions)
            for s in ("rendered", "unchanged", "failed")
        }
        console.print(
            f"site: {result.out_dir / 'index.html'} ({counts['rendered']} rendered, "
            f"{counts['unchanged']} unchanged, {counts['failed']} failed, "
            f"{result.seconds:.1f} s)"
        )
        for d in result.failed:
            stderr.print(f"[red]failed:[/] {d.slug}: {d.error}", highlight=False)
    if result.failed:
        raise typer.Exit(1)


@site_app.command("serve")
@_user_errors
def site_serve(
    out: Path = typer.Argument(..., help="a built site folder"),
    port: int = typer.Option(8000, help="port on 127.0.0.1 (0 picks a free one)"),
) -> None:
    """Serve a built site on loopback only, for a local look."""
    from reviewkit.site.build import serve

    try:
        serve(out, port)
    except KeyboardInterrupt:
        stderr.print("stopped")


@app.command()
@_user_errors
def walk(
    review: Path = typer.Argument(..., help="the review file (review.toml) to answer into"),
    rubric: Path | None = typer.Option(None, help="a rubric TOML (default: rubrics/default.toml)"),
    redo_all: bool = typer.Option(False, "--all", help="ask answered questions again too"),
    answers: Path | None = typer.Option(
        None, "--answers", help="a TOML file of [answers.<item>] to record without asking"
    ),
    allow_outside: bool = typer.Option(
        False, "--allow-outside", help="allow paths that leave the review's folder"
    ),
) -> None:
    """Walk the senior review questions one at a time and record the answers in the review."""
    from reviewkit.cli.walk import run_walk

    code = run_walk(
        review, rubric, redo_all=redo_all, answers_file=answers, allow_outside=allow_outside
    )
    if code:
        raise typer.Exit(code)


@app.command()
@_user_errors
def mfu(
    params: float = typer.Option(..., help="model parameters N"),
    layers: int = typer.Option(..., help="layers L"),
    heads: int = typer.Option(..., help="attention heads H"),
    head_dim: int = typer.Option(..., help="head dimension Q"),
    seq: int = typer.Option(..., help="sequence length T"),
    tokens_per_s: float = typer.Option(..., help="observed tokens per second (all devices)"),
    peak_flops_per_s: float = typer.Option(..., help="peak FLOP/s of one device"),
    devices: int = typer.Option(1, help="number of devices D"),
    mode: str = typer.Option("train", help="train (6N + 12LHQT) | infer (2N + 4LHQT)"),
    no_attention: bool = typer.Option(False, "--no-attention", help="drop the attention term"),
    as_json: bool = typer.Option(False, "--json", help='print {"mfu": ...} as JSON'),
) -> None:
    """Model-level MFU after PaLM (Chowdhery et al. 2022, appendix B)."""
    from reviewkit.suite.mfu import MODES, model_mfu

    if mode not in MODES:
        raise UsageError(f"--mode {mode!r} is unknown; choose one of {', '.join(MODES)}")
    try:
        r = model_mfu(
            params,
            layers,
            heads,
            head_dim,
            seq,
            tokens_per_s,
            peak_flops_per_s,
            devices,
            mode,
            attention=not no_attention,
        )
    except ValueError as exc:
        raise UsageError(f"reviewkit mfu: {exc}") from exc
    if as_json:
        _emit_json(r.to_json())
        return
    Console().print(
        f"MFU {100 * r.mfu:.1f}%  ({r.flops_per_token:.4g} FLOPs/token · "
        f"{r.achieved_flops_per_s:.4g} FLOP/s achieved of {r.peak_flops_per_s:.4g} peak)"
    )


def main(argv: list[str] | None = None) -> None:
    app(args=argv, prog_name="reviewkit")


trace_app = typer.Typer(no_args_is_help=True, help="Bring production profiler traces in.")
app.add_typer(trace_app, name="trace")

TRACE_SUMMARY_FILE = "trace_summary.json"


@trace_app.command("import")
@_user_errors
def trace_import(
    traces: list[Path] = typer.Argument(
        ..., help="PyTorch profiler traces (Chrome-trace .json or .json.gz), one per rank"
    ),
    out: Path = typer.Option(..., "--out", help="folder to write trace_summary.json into"),
    layer_map: list[Path] = typer.Option(
        [],
        "--layer-map",
        help="a team's layer-map TOML, tried before rubrics/layer_map.toml (repeatable)",
    ),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Summarise production traces: op mix by layer type, shapes, device idle, data quality."""
    from reviewkit.evidence.trace.layermap import load_layer_map
    from reviewkit.evidence.trace.summary import render_text, summarise

    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; pass a folder to write {TRACE_SUMMARY_FILE} in")
    seen: set[Path] = set()
    for p in traces:
        if not p.is_file():
            raise UsageError(f"{p}: no such trace file; pass .json or .json.gz profiler traces")
        if p.resolve() in seen:
            raise UsageError(f"{p}: given twice; pass each rank's trace once")
        seen.add(p.resolve())
    mapping = load_layer_map(layer_map)
    with _progress("trace") as on_progress:
        doc = summarise(list(traces), mapping, on_progress)
    target = out / TRACE_SUMMARY_FILE
    if _save_evidence(doc, target, as_json):
        return
    from reviewkit.cli.console import stdout_console

    console = stdout_console()
    console.print(render_text(doc), end="", highlight=False, soft_wrap=True, markup=False)
    console.print(f"wrote {target}", highlight=False, soft_wrap=True)
