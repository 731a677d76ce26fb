"""`reviewkit site build`: incremental, atomic, broken decisions isolated, relative links only."""

import json
import re
import subprocess
import sys

import pytest
from runfactory import complete_review, write_review

from reviewkit.site.build import build_site


@pytest.fixture()
def log(tmp_path):
    root = tmp_path / "log"
    for slug, title in (("alpha", "Alpha change"), ("beta", "Beta change"), ("gamma", "Gamma")):
        review = complete_review()
        review["title"] = title
        write_review(root / "decisions" / slug, review)
    return root


def test_build_incremental_rebuild(log, tmp_path):
    out = tmp_path / "out"
    first = build_site(log, out, pdf=False)
    assert [d.status for d in first.decisions] == ["rendered"] * 3
    for page in ("index.html", "red-flags.html", "rubric.html", "questions.html"):
        assert (out / page).exists()
    assert (out / "trends" / "gemm.html").exists()
    # Decision pages are packets: the production-like evidence charts are on them too.
    page = json.loads((out / "decisions" / "alpha" / "packet.json").read_text())
    assert {"latency_throughput", "shape_portability", "stability", "perf_per_watt",
            "quality_drift"} <= set(page["charts"])  # fmt: skip
    assert 'id="chart-latency_throughput"' in (out / "decisions/alpha/packet.html").read_text()
    second = build_site(log, out, pdf=False)
    assert [d.status for d in second.decisions] == ["unchanged"] * 3
    # one decision changes: only it is rendered again
    review = log / "decisions" / "beta" / "review.toml"
    review.write_text(review.read_text().replace("Beta change", "Beta change, revised"))
    third = build_site(log, out, pdf=False)
    assert {d.slug: d.status for d in third.decisions} == {
        "alpha": "unchanged",
        "beta": "rendered",
        "gamma": "unchanged",
    }
    assert "Beta change, revised" in (out / "index.html").read_text()
    assert not list(tmp_path.glob(".out.*")), "temporary folders left behind"


@pytest.mark.parametrize(
    "changed",
    [
        "analysis/stats.py",
        "review/checks",
        "render/charts",
        "templates/packet.css",
        "suite/workloads.py",
    ],
)
def test_a_code_change_anywhere_a_page_depends_on_re_renders_an_unchanged_decision(
    log, tmp_path, monkeypatch, changed
):
    """The salt hashes whole packages: a new statistics function (or any check, chart, template or
    workload definition) must re-render a decision whose own folder did not change."""
    from reviewkit.site import build as site

    out = tmp_path / "out"
    build_site(log, out, pdf=False)
    assert [d.status for d in build_site(log, out, pdf=False).decisions] == ["unchanged"] * 3
    names = [name for name, _ in site.render_code_files()]
    assert any(name.startswith(changed) for name in names), f"{changed} is not hashed"
    real = site.sha256_file
    stand_in = {path for name, path in site.render_code_files() if name.startswith(changed)}
    monkeypatch.setattr(site, "sha256_file", lambda p: "edited" if p in stand_in else real(p))
    assert [d.status for d in build_site(log, out, pdf=False).decisions] == ["rendered"] * 3


def test_measuring_code_and_the_cli_are_not_render_inputs():
    """measure/ and cli/ never reach a page (tests/test_layout.py keeps the site from importing
    them), so editing them must not invalidate a built site."""
    from reviewkit.site import build as site

    names = [name for name, _ in site.render_code_files()]
    assert not [n for n in names if n.startswith(("measure/", "cli/"))]
    assert "analysis/stats.py" in names and "templates/packet.html.j2" in names


def test_worker_processes_build_the_same_site(log, tmp_path):
    (log / "decisions" / "beta" / "review.toml").write_text("schema_version = 1\ntitle = [\n")
    serial = build_site(log, tmp_path / "serial", pdf=False, jobs=1)
    parallel = build_site(log, tmp_path / "parallel", pdf=False, jobs=2)
    assert [(d.slug, d.status) for d in parallel.decisions] == [
        (d.slug, d.status) for d in serial.decisions
    ]
    assert [d.slug for d in parallel.failed] == ["beta"]
    for page in ("index.html", "decisions/alpha/packet.html", "decisions/gamma/packet.json"):
        assert (tmp_path / "serial" / page).read_bytes() == (
            tmp_path / "parallel" / page
        ).read_bytes()


def test_broken_decision_is_named_and_the_rest_build(log, tmp_path):
    (log / "decisions" / "beta" / "review.toml").write_text("schema_version = 1\ntitle = [\n")
    out = tmp_path / "out"
    result = build_site(log, out, pdf=False)
    assert [d.slug for d in result.failed] == ["beta"]
    assert "malformed TOML" in result.failed[0].error
    index = (out / "index.html").read_text()
    assert "Alpha change" in index and "Gamma" in index
    assert "1 decision(s) failed to build" in index and "beta" in index
    assert not (out / "decisions" / "beta").exists()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "reviewkit",
            "site",
            "build",
            str(log),
            "--out",
            str(tmp_path / "cli"),
            "--no-pdf",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "failed: beta" in r.stderr


def test_failed_build_keeps_the_previous_site(log, tmp_path, monkeypatch):
    out = tmp_path / "out"
    build_site(log, out, pdf=False)
    before = (out / "index.html").read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("disk full while writing pages")

    monkeypatch.setattr("reviewkit.site.build._write_pages", boom)
    with pytest.raises(RuntimeError):
        build_site(log, out, pdf=False)
    assert (out / "index.html").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log", "out"]


def test_only_relative_links(log, tmp_path):
    out = tmp_path / "out"
    build_site(log, out, pdf=False)
    for page in out.rglob("*.html"):
        text = page.read_text()
        for url in re.findall(r'(?:href|src)="([^"]*)"', text):
            assert not re.match(r"^(?:[a-z][a-z0-9+.-]*:|/)", url), (page, url)
            target = (page.parent / url.split("#")[0]).resolve() if url.split("#")[0] else page
            assert target.exists(), (page, url)
        assert str(tmp_path) not in text, f"{page} holds an absolute path"


def test_serve_refuses_an_unbuilt_folder(tmp_path):
    r = subprocess.run([sys.executable, "-m", "reviewkit", "site", "serve", str(tmp_path)],
                       capture_output=True, text=True, timeout=30)  # fmt: skip
    assert r.returncode == 2 and "no index.html" in r.stderr


def test_serve_binds_loopback(log, tmp_path):
    import time
    import urllib.request

    out = tmp_path / "out"
    build_site(log, out, pdf=False)
    proc = subprocess.Popen([sys.executable, "-m", "reviewkit", "site", "serve", str(out),
                             "--port", "0"], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line
        port = int(re.search(r"127\.0\.0\.1:(\d+)", line).group(1))
        deadline = time.time() + 10
        while True:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=2)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        assert b"Alpha change" in page.read()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_committed_log_has_three_real_decisions_not_all_go():
    from pathlib import Path

    from reviewkit.site.build import discover

    folders = discover(Path(__file__).parents[2] / "site")
    assert len(folders) >= 3
    statuses = []
    for folder in folders:
        text = (folder / "review.toml").read_text()
        statuses.append(re.search(r'^status = "([a-z-]+)"', text, re.M).group(1))
        runs = list(folder.rglob("run.json"))
        assert runs and all(json.loads(r.read_text())["kind"] == "reviewkit.run" for r in runs)
    assert len(set(statuses)) >= 2 and "no-go" in statuses


def test_the_bottleneck_summary_names_unclassified_layer_types_last_and_in_words():
    from reviewkit.site.build import bottleneck_summary

    rows = [
        {"layer_type": "attention", "candidate_class": "unclassified"},
        {"layer_type": "model", "candidate_class": "unclassified"},
        {"layer_type": "norm", "candidate_class": "unclassified"},
        {"layer_type": "gemm", "candidate_class": "compute-bound"},
        {"layer_type": "gemm", "candidate_class": "compute-bound"},  # a second candidate
        {"layer_type": "block", "candidate_class": None},
    ]
    # the class with most layer types leads only among classes given: three unclassified layer
    # types are never read as the dominant class
    assert bottleneck_summary(rows) == (
        "compute-bound: gemm; unclassified (overhead not measured): attention, model, norm; "
        "unknown: block"
    )
    assert bottleneck_summary([]) == ""


def test_a_site_of_migrated_runs_says_overhead_was_not_measured(tmp_path):
    """A decision whose runs were recorded before overhead was measured, its attention far
    below its roof: the index says the class could not be given, not a class."""
    from runfactory import samples

    root = tmp_path / "log"
    cand = {"speedup": 1.0, "samples_for": {"attention.toy-sdpa.b4s512": samples(0.08, seed=7)}}
    write_review(root / "decisions" / "old", complete_review(), cand_kw=cand)
    build_site(root, tmp_path / "site", pdf=False)
    index = (tmp_path / "site" / "index.html").read_text()
    assert "unclassified (overhead not measured): attention" in index


def test_a_site_that_cannot_be_written_is_one_line_and_the_old_site_stays(log, tmp_path,
                                                                        monkeypatch):
    import errno

    from reviewkit.common.errors import OutputError
    from reviewkit.site import build as build_mod

    out = tmp_path / "out"
    build_site(log, out, pdf=False)
    before = (out / "index.html").read_text()

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(out / "index.html"))

    monkeypatch.setattr(build_mod, "_write_pages", read_only)
    with pytest.raises(OutputError) as info:
        build_site(log, out, pdf=False)
    assert "\n" not in str(info.value) and "Read-only file system" in str(info.value)
    assert (out / "index.html").read_text() == before


def test_a_decision_citing_a_platform_shortlist_shows_it_on_the_site(tmp_path):
    from pathlib import Path

    from reviewkit.cli.shortlisting import build_shortlist, document

    samples = Path(__file__).resolve().parents[2] / "samples"
    review = complete_review()
    review["evidence"]["shortlist"] = "evidence/shortlist.json"
    folder = tmp_path / "log" / "decisions" / "pick"
    write_review(folder, review)
    sl = build_shortlist("Llama-3-8B", 1, 512, 30.0, [samples / "gpu-quick-h200"],
                         output_tokens=16, platforms="h200-sxm")  # fmt: skip
    (folder / "evidence" / "shortlist.json").write_text(json.dumps(document(sl)))
    out = tmp_path / "out"
    build_site(tmp_path / "log", out, pdf=False)
    index = (out / "index.html").read_text()
    # the index names the shortlist and links the packet's section; the packet has it
    assert 'href="decisions/pick/packet.html#shortlist"' in index
    assert "Platform shortlist</a> for Llama-3-8B: h200-sxm" in index
    page = (out / "decisions" / "pick" / "packet.html").read_text()
    assert '<section id="shortlist">' in page and "Platform shortlist" in page
