"""The packet's production fit: the cited trace summaries against each candidate's suite, as a
heatmap, tables and trace provenance, in packet.json, HTML, PDF and the site's decision pages.

Expected values are worked by hand from runfactory's toy suite (first-input elements: GEMMs
128 x 768 = 98,304 and 2048 x 768 = 1,572,864; SDPA 1 x 12 x 128 x 64 = 98,304 and
4 x 12 x 512 x 64 = 1,572,864) and evidencedocs.TOY_PRODUCTION_OPS (host time: linear 700 us,
SDPA 200 us, an unmapped custom op 100 us, all at 98,304 elements).
"""

from __future__ import annotations

import json
from pathlib import Path

import html5lib
import pypdfium2
import pytest
from chartspecs import datasets
from evidencedocs import TOY_PRODUCTION_OPS, trace_summary_doc
from htmlsafety import parse_inert
from runfactory import complete_review, make_run, write_review

from reviewkit.render import charts
from reviewkit.render.packet import NO_TRACE, build_model, render_html, write_packet
from reviewkit.review.gate import run_check
from reviewkit.review.rubric import DEFAULT_RUBRIC

pytestmark = pytest.mark.usefixtures("weasyprint_warnings_fail")

PAYLOAD = '<script>alert(1)</script><img src=x onerror=alert(2)>"><svg onload=alert(3)>'
GEMM_B1 = "gemm.toy-ffn-up.b1s128.bf16"
SDPA_B1 = "attention.toy-sdpa.b1s128.bf16"
GEMM_B4 = "gemm.toy-ffn-up.b4s512.bf16"
# 300 us of a GEMM at 64 x 4096 x 768 = 201,326,592 elements: 128x the big suite GEMM
# (1,572,864), far outside the 4x window; 100 us of layer norm, a type the suite lacks.
UNCOVERED_OPS = [
    ("aten::linear", 1000, 600, [[1, 128, 768], [3072, 768], [3072]]),
    ("aten::linear", 2000, 300, [[64, 4096, 768], [3072, 768], [3072]]),
    ("aten::layer_norm", 3000, 100, [[1, 128, 768], [768]]),
]  # fmt: skip


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """(packet model, result) of runfactory's complete review, rendered once with its PDF."""
    root = tmp_path_factory.mktemp("fit")
    path = write_review(root / "review", complete_review())
    result = write_packet(path, root / "out")
    return json.loads(result.json.read_text()), result


def write_summary(folder, ops, edit=None) -> None:
    """Replace the review's evidence/trace_summary.json by the importer's summary of `ops`."""
    doc = trace_summary_doc(folder / "evidence", ops)
    if edit:
        edit(doc)
    (folder / "evidence" / "trace_summary.json").write_text(json.dumps(doc) + "\n")


def fit_of(model: dict, i: int = 0) -> dict:
    return model["production_fit"]["candidates"][i]


def cells(spec: dict) -> dict:
    """The heatmap's cells by (layer type, band)."""
    rect = spec["layer"][0]
    return {(c["layer_type"], c["band"]): c for c in spec["datasets"][rect["data"]["name"]]}


def by_layer(fit: dict) -> dict:
    return {x["layer_type"]: x for x in fit["layers"]}


# --- values against hand calculations --------------------------------------------------------


def test_toy_mix_scores_ninety_percent(toy):
    model, _ = toy
    pf = model["production_fit"]
    assert pf["available"] and pf["note"] == ""
    # The rubric's production-shape item: min_coverage 0.5, shape_range_factor 4.
    assert (pf["min_coverage"], pf["shape_range_factor"]) == (0.5, 4.0)
    assert pf["finding"]["id"] == "production-shape" and pf["finding"]["status"] == "pass"
    [fit] = pf["candidates"]
    assert (fit["candidate"], fit["run"], fit["chart"]) == ("candidate", "runs/cand", "fit_matrix")
    # Covered: 700 + 200 of 1000 us; the layer types measured by the suite: the same 900 us.
    assert fit["score"] == pytest.approx(0.9)
    assert fit["layer_coverage"] == pytest.approx(0.9)
    assert fit["verdict"] == "pass" and fit["time_basis"] == "host"
    layers = by_layer(fit)
    assert [x["layer_type"] for x in fit["layers"]] == ["gemm", "attention", "unmapped"]
    gemm = layers["gemm"]
    assert (gemm["share"], gemm["covered_share"]) == (pytest.approx(0.7), pytest.approx(0.7))
    # Both GEMM workloads are of the type; only b1s128 (98,304 elements, ratio 1) is within 4x.
    assert gemm["suite_workloads"] == 2 and gemm["covering"] == [GEMM_B1]
    assert layers["attention"]["covering"] == [SDPA_B1]
    unmapped = layers["unmapped"]
    assert unmapped["share"] == pytest.approx(0.1) and unmapped["covered_share"] == 0.0
    assert "my_company::custom_op (10.0%)" in unmapped["note"]
    assert fit["outside"] == []


def test_toy_heatmap_cells_and_title(toy):
    model, _ = toy
    spec = model["charts"]["fit_matrix"]
    charts.validate(spec)
    got = cells(spec)
    # 98,304 elements: the 1e4-1e5 decade.
    assert set(got) == {("gemm", "1e4-1e5 elements"), ("attention", "1e4-1e5 elements"),
                        ("unmapped", "not mapped")}  # fmt: skip
    gemm = got[("gemm", "1e4-1e5 elements")]
    assert (gemm["line1"], gemm["line2"], gemm["uncovered"]) == ("70.0%", "100% cov.", False)
    assert gemm["workloads_text"] == GEMM_B1
    unmapped = got[("unmapped", "not mapped")]
    assert (unmapped["line1"], unmapped["line2"], unmapped["uncovered"]) == (
        "10.0%", "0% cov.", True)  # fmt: skip
    assert "my_company::custom_op" in unmapped["why"]
    assert spec["layer"][0]["encoding"]["y"]["sort"] == ["gemm", "attention", "unmapped"]
    # The outline layer holds the uncovered cells only.
    [outlined] = [rows for rows in datasets(spec) if rows and all(r.get("uncovered") for r in rows)]
    assert [(c["layer_type"], c["band"]) for c in outlined] == [("unmapped", "not mapped")]
    assert spec["title"]["text"] == (
        "Production fit: the suite covers 90.0% of production time (rubric: at least 50%, met)"
    )
    subtitle = " ".join(spec["title"]["subtitle"])
    assert "layer-type coverage 90.0%" in subtitle and "within 4x" in subtitle
    assert "time basis: host operator self time" in subtitle
    assert "1 trace: production-trace.json" in subtitle


def test_trace_provenance_from_the_summary(toy):
    model, result = toy
    [t] = model["production_fit"]["traces"]
    summary = json.loads((result.out_dir.parent / "review" / "evidence" /
                          "trace_summary.json").read_text())["traces"][0]  # fmt: skip
    assert t["summary"] == "evidence/trace_summary.json"
    assert (t["path"], t["sha256"], t["size_bytes"]) == (
        "production-trace.json", summary["sha256"], summary["size_bytes"])  # fmt: skip
    assert (t["rank"], t["world_size"], t["devices"]) == (0, None, [])
    assert t["rank_source"] == summary["rank_source"] != "distributedInfo"  # no distributedInfo
    assert t["clock"]["resolution"] == "1 us (integer)"
    assert t["quality"] == [] and t["events"] == len(TOY_PRODUCTION_OPS)
    # 1000 us to 3100 us: the first op's start to the last op's end.
    assert t["window_s"] == pytest.approx(2.1e-3)


def test_uncovered_shapes_are_listed_with_the_nearest_workload(tmp_path):
    folder = tmp_path / "review"
    path = write_review(folder, complete_review())
    write_summary(folder, UNCOVERED_OPS)
    model = build_model(run_check(path))
    fit = fit_of(model)
    # Covered: the 600 us GEMM at 98,304 elements only; layer types measured: GEMM's 900 us.
    assert fit["score"] == pytest.approx(0.6) and fit["layer_coverage"] == pytest.approx(0.9)
    layers = by_layer(fit)
    assert layers["gemm"]["covered_share"] == pytest.approx(0.6)
    assert layers["norm"]["suite_workloads"] == 0 and layers["norm"]["covered_share"] == 0.0
    big, norm = fit["outside"]  # largest share first
    assert (big["layer_type"], big["numel"], big["share"]) == ("gemm", 201_326_592,
                                                               pytest.approx(0.3))  # fmt: skip
    assert big["nearest_workload"] == GEMM_B4
    assert big["nearest_ratio"] == pytest.approx(201_326_592 / 1_572_864) == pytest.approx(128)
    assert big["dims_text"] == "[[64, 4096, 768], [3072, 768], [3072]]"
    assert (norm["layer_type"], norm["share"]) == ("norm", pytest.approx(0.1))
    assert norm["nearest_workload"] == "" and norm["nearest_ratio"] is None
    got = cells(model["charts"]["fit_matrix"])
    # 201,326,592 elements: the 1e8-1e9 decade, all of it uncovered.
    assert got[("gemm", "1e8-1e9 elements")]["line2"] == "0% cov."
    assert got[("gemm", "1e8-1e9 elements")]["uncovered"]
    assert "window" in got[("gemm", "1e8-1e9 elements")]["why"]
    assert "no operator-level workload" in got[("norm", "1e4-1e5 elements")]["why"]
    # GEMM 1e4-1e5 (600 us, covered) before norm; 0.6 + 0.3 = 0.9 of GEMM ranks it first.
    assert model["charts"]["fit_matrix"]["layer"][0]["encoding"]["y"]["sort"] == ["gemm", "norm"]


def test_the_rubric_params_are_the_packets(tmp_path):
    folder = tmp_path / "review"
    path = write_review(folder, complete_review())
    write_summary(folder, UNCOVERED_OPS)
    rubric = tmp_path / "strict.toml"
    text = Path(DEFAULT_RUBRIC).read_text()
    old = "params = { min_coverage = 0.5, shape_range_factor = 4.0 }"
    assert old in text
    # A factor of 200 covers the 128x GEMM too: 600 + 300 of 1000 us; 0.95 is still not met.
    rubric.write_text(text.replace(old, "params = { min_coverage = 0.95, shape_range_factor = "
                                        "200.0 }"))  # fmt: skip
    report = run_check(path, rubric)
    model = build_model(report)
    pf = model["production_fit"]
    assert (pf["min_coverage"], pf["shape_range_factor"]) == (0.95, 200.0)
    fit = fit_of(model)
    assert fit["score"] == pytest.approx(0.9) and fit["verdict"] == "fail"
    assert pf["finding"]["status"] == "fail"  # what the gate said, with the same params
    assert [o["layer_type"] for o in fit["outside"]] == ["norm"]
    assert model["charts"]["fit_matrix"]["title"]["text"].endswith(
        "(rubric: at least 95%, NOT met)"
    )


def test_without_the_rubric_item_the_fit_is_not_scored_and_no_threshold_is_invented(tmp_path):
    """The fit's thresholds live only in the rubric: a team rubric without the production-shape
    item gets a note saying so, not a matrix drawn with a factor the packet made up."""
    import re

    folder = tmp_path / "review"
    path = write_review(folder, complete_review())
    write_summary(folder, UNCOVERED_OPS)
    text = Path(DEFAULT_RUBRIC).read_text()
    items = re.split(r"(?=^\[\[sections\.items\]\])", text, flags=re.M)
    kept = [i for i in items if 'check = "production-shape-evidence"' not in i]
    assert len(kept) == len(items) - 1
    rubric = tmp_path / "no-fit.toml"
    rubric.write_text("".join(kept))
    model = build_model(run_check(path, rubric))
    pf = model["production_fit"]
    assert pf["shape_range_factor"] is None and pf["min_coverage"] is None
    assert pf["note"].startswith("The rubric has no `production-shape-evidence` item")
    assert pf["candidates"] == [] and "fit_matrix" not in model["charts"]


def test_several_candidates_each_scored_and_equal_fits_drawn_once(tmp_path):
    review = complete_review()
    review["runs"]["candidates"] = ["runs/cand", "runs/cand2", "runs/cand3"]
    folder = tmp_path / "review"
    path = write_review(folder, review)
    make_run(folder / "runs" / "cand2", dtype="bf16", speedup=2.0, seed=2)  # the same suite
    make_run(folder / "runs" / "cand3", dtype="bf16", seed=3,
             only=("gemm.toy-ffn-up.b4s512", "model.toy-decoder.b1s256"))  # fmt: skip
    model = build_model(run_check(path))
    one, two, three = model["production_fit"]["candidates"]
    assert [c["candidate"] for c in (one, two, three)] == ["candidate 1", "candidate 2",
                                                            "candidate 3"]  # fmt: skip
    assert (one["chart"], two["chart"], two["same_as"]) == ("fit_matrix", "", "candidate 1")
    assert two["score"] == pytest.approx(0.9)
    # Candidate 3 keeps only the big GEMM: 98,304 / 1,572,864 = 1/16, outside 4x; no SDPA.
    assert three["chart"] == "fit_matrix_3" and three["score"] == 0.0
    assert three["layer_coverage"] == pytest.approx(0.7)  # GEMM is still a measured type
    assert {o["layer_type"]: o["nearest_ratio"] for o in three["outside"]} == {
        "gemm": pytest.approx(1 / 16), "attention": None}  # fmt: skip
    assert {"fit_matrix", "fit_matrix_3"} <= set(model["charts"])
    assert "fit_matrix_2" not in model["charts"]
    subtitle = " ".join(model["charts"]["fit_matrix_3"]["title"]["subtitle"])
    assert "candidate 3: runs/cand3" in subtitle


# --- no trace, or a file that is not one -----------------------------------------------------


def test_no_trace_cited_says_what_to_run_and_draws_nothing(tmp_path):
    review = complete_review()
    del review["evidence"]["production_traces"]
    model = build_model(run_check(write_review(tmp_path / "review", review)))
    pf = model["production_fit"]
    assert not pf["available"] and pf["note"] == NO_TRACE
    assert "reviewkit trace import TRACE --out evidence/" in pf["note"]
    assert "[evidence].production_traces" in pf["note"]
    assert pf["candidates"] == [] and pf["traces"] == []
    assert not [name for name in model["charts"] if name.startswith("fit_matrix")]


def test_a_file_that_is_not_a_trace_summary_is_named_with_the_reason(tmp_path):
    review = complete_review()
    review["evidence"]["production_traces"] = ["evidence/soak.json", "evidence/trace.json"]
    model = build_model(run_check(write_review(tmp_path / "review", review)))
    pf = model["production_fit"]
    assert not pf["available"]
    assert "reviewkit trace import TRACE --out evidence/" in pf["note"]
    assert pf["notes"] == [
        "evidence/soak.json: not used: a 'reviewkit.soak' document, not a `reviewkit trace "
        "import` result",
        "evidence/trace.json: not used: not a reviewkit result, not a `reviewkit trace import` "
        "result",
    ]
    assert "fit_matrix" not in model["charts"]
    # The section says so in the page, with no chart (the other charts' SVGs stubbed: only the
    # template is under test).
    html = render_html(model, {name: "<svg></svg>" for name in model["charts"]}, "print")
    section = html5lib.parse(html, namespaceHTMLElements=False).find(
        ".//section[@id='production-fit']"
    )
    text = " ".join(" ".join(section.itertext()).split())
    assert "evidence/soak.json: not used" in text and "reviewkit trace import TRACE" in text
    assert section.find(".//figure") is None and section.find(".//table") is None


def test_a_damaged_trace_in_a_summary_is_left_out_with_a_note(tmp_path):
    folder = tmp_path / "review"
    path = write_review(folder, complete_review())
    f = folder / "evidence" / "trace_summary.json"
    doc = json.loads(f.read_text())
    good = doc["traces"][0]
    doc["traces"] = [{**good, "path": "bad.json", "op_mix": {"time_s": "x"}}, good]
    f.write_text(json.dumps(doc))
    report = run_check(path)
    # Changed after the gate read it: the packet shows what the gate judged, never a re-read.
    f.write_text("not json")
    model = build_model(report)
    pf = model["production_fit"]
    assert len(pf["notes"]) == 1
    assert pf["notes"][0].startswith(
        "evidence/trace_summary.json: bad.json: not used: a damaged trace (TypeError"
    )
    finding = next(x for x in report.findings if x.item.check == "production-shape-evidence")
    assert any(pf["notes"][0] == e.value for e in finding.evidence)  # one note, gate and packet
    assert [t["path"] for t in pf["traces"]] == ["production-trace.json"]
    assert fit_of(model)["score"] == pytest.approx(0.9)


def test_a_trace_cited_twice_counts_once_in_the_packet_as_in_the_gate(tmp_path):
    folder = tmp_path / "review"
    review = complete_review()
    review["evidence"]["production_traces"] = [
        "evidence/trace_summary.json",
        "evidence/again.json",
    ]
    path = write_review(folder, review)
    evidence = folder / "evidence"
    (evidence / "again.json").write_text((evidence / "trace_summary.json").read_text())
    report = run_check(path)
    model = build_model(report)
    pf = model["production_fit"]
    assert [t["path"] for t in pf["traces"]] == ["production-trace.json"]
    assert pf["notes"] == [
        "evidence/again.json: production-trace.json: cited again (same sha256): counted once"
    ]
    gate = next(f for f in report.findings if f.item.id == "production-shape")
    assert "90.0% of production time" in gate.summary
    assert fit_of(model)["score"] == pytest.approx(0.9)


# --- HTML, PDF, escaping, the site -----------------------------------------------------------


def test_the_section_is_in_the_html_and_the_pdf(toy):
    model, result = toy
    html = result.html.read_text()
    tree = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(html)
    ids = {el.get("id") for el in tree.iter() if el.get("id")}
    assert {"production-fit", "chart-fit_matrix", "spec-fit_matrix"} <= ids
    assert 'href="#production-fit"' in html
    section = tree.find(".//section[@id='production-fit']")
    text = " ".join(section.itertext())
    assert "90.0% of production time covered, threshold 50.0%" in " ".join(text.split())
    assert "my_company::custom_op" in text
    assert model["production_fit"]["traces"][0]["sha256"] in text
    pdf = pypdfium2.PdfDocument(str(result.pdf))
    pages = [pdf[i].get_textpage().get_text_range() for i in range(len(pdf))]
    joined = "\n".join(pages)
    contents = next(p for p in pages if "Contents" in p)  # after the decision brief
    assert "Production fit: traces against the suite" in contents
    for line in ("Production fit: the suite covers 90.0% of production time",
                 "Elements in the first input",  # vector SVG: axis titles are text
                 "Production shapes outside the suite", "The traces: provenance and data quality",
                 "no data-quality finding"):  # fmt: skip
        assert line in joined, line
    # The matrix is ~1,700 px wide: it gets a landscape page, where its 9 px cell text prints
    # at 5 px rather than 3 px on portrait (seen when looking at a review with a GPU trace).
    matrix = next(i for i, p in enumerate(pages) if "Elements in the first input" in p)
    width, height = pdf[matrix].get_size()
    assert width > height, (width, height)
    assert all(pdf[i].get_size()[0] < pdf[i].get_size()[1] for i in range(len(pdf)) if i != matrix)


def test_hostile_names_from_a_trace_are_escaped(tmp_path):
    folder = tmp_path / "review"
    path = write_review(folder, complete_review())
    ops = [
        *TOY_PRODUCTION_OPS,
        (PAYLOAD, 4000, 50, [[1, 128]]),  # unmapped: its name is shown
        (PAYLOAD, 5000, -5, [[1]]),  # negative duration: a data-quality example quotes it
    ]

    def hostile(doc):
        t = doc["traces"][0]
        t["path"] = f"trace-{PAYLOAD}.json"
        t["devices"] = [f"GPU {PAYLOAD}"]
        # A team layer map names the layer types: one is hostile too.
        for part in (t["op_mix"]["layer_types"], t["shapes"]):
            part[PAYLOAD] = part.pop("attention")

    write_summary(folder, ops, hostile)
    result = write_packet(path, tmp_path / "out", pdf=False)
    model = json.loads(result.json.read_text())
    pf = model["production_fit"]
    [t] = pf["traces"]
    assert any(PAYLOAD in e for q in t["quality"] for e in q["examples"])
    assert PAYLOAD in by_layer(fit_of(model)) and PAYLOAD in by_layer(fit_of(model))["unmapped"][
        "note"]  # fmt: skip
    spec_text = json.dumps(model["charts"]["fit_matrix"], ensure_ascii=False)
    assert spec_text.count(PAYLOAD.replace('"', '\\"')) >= 3  # layer type, unmapped name, file
    html = result.html.read_text()
    assert PAYLOAD not in html and "<script>alert" not in html
    tree = parse_inert(html)
    section = " ".join(tree.find(".//section[@id='production-fit']").itertext())
    assert PAYLOAD in section  # shown as text
    spec = json.loads(tree.find(".//script[@id='spec-fit_matrix']").text)
    assert PAYLOAD in json.dumps(spec, ensure_ascii=False).replace('\\"', '"')
    svg = (result.out_dir / "assets" / "charts" / "fit_matrix.svg").read_text()
    assert "<script" not in svg and "&lt;script&gt;alert(1)" in svg


def test_site_decision_pages_carry_the_section_and_rebuild_on_fitmatrix_changes(
    tmp_path, monkeypatch
):
    from reviewkit.site import build as site

    log = tmp_path / "log"
    write_review(log / "decisions" / "alpha", complete_review())
    site.build_site(log, tmp_path / "out", pdf=False)
    page = tmp_path / "out" / "decisions" / "alpha"
    assert "fit_matrix" in json.loads((page / "packet.json").read_text())["charts"]
    html = (page / "packet.html").read_text()
    assert 'id="production-fit"' in html and 'id="chart-fit_matrix"' in html
    before = site._render_salt(False, None)
    real = site.sha256_file
    monkeypatch.setattr(site, "sha256_file", lambda p: "changed" if p.name == "fit.py"
                        else real(p))  # fmt: skip
    assert site._render_salt(False, None) != before
