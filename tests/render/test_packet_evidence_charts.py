"""The packet's production-like evidence charts: latency-throughput, shape portability,
stability, perf per watt and quality drift, each from real documents (loadgen and drift on fake
clocks, analysed runs), with values worked out independently of the chart code."""

from __future__ import annotations

import json

import html5lib
import numpy as np
import pypdfium2
import pytest
from chartspecs import datasets
from evidencedocs import SWEEP_VALIDITY, soak_doc, sweep_doc, sweep_workload
from htmlsafety import parse_inert
from runfactory import WORKLOADS, complete_review, quality_doc, write_review

from reviewkit.evidence import loadgen
from reviewkit.evidence.loadgen import Validity
from reviewkit.render import charts
from reviewkit.render.packet import build_model, write_packet
from reviewkit.render.packet.sections import SECTIONS
from reviewkit.review.gate import run_check

PAYLOAD = '<script>alert(1)</script><img src=x onerror=alert(2)>"><svg onload=alert(3)>'
# the evidence section's charts, and the comparison's shape portability (drawn from the same
# sweep of shapes)
NEW_CHARTS = (*next(s for s in SECTIONS if s.id == "evidence").charts, "shape_portability")


def rows_with(spec: dict, *keys: str) -> list[dict]:
    """Distinct rows (by content) that carry all the keys, over every layer of the spec."""
    seen, out = set(), []
    for values in datasets(spec):
        for row in values:
            if all(k in row for k in keys):
                text = json.dumps(row, sort_keys=True)
                if text not in seen:
                    seen.add(text)
                    out.append(row)
    return out


def subtitles(spec: dict) -> str:
    """Every title and subtitle line of the spec and its panels, joined."""
    parts = []

    def walk(node):
        if isinstance(node, dict):
            title = node.get("title")
            if isinstance(title, dict):
                parts.append(str(title.get("text", "")))
                parts.extend(str(s) for s in title.get("subtitle") or [])
            elif isinstance(title, str):
                parts.append(title)
            for key, value in node.items():
                if key != "datasets":
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    return " ".join(parts)


def is_no_data(spec: dict) -> bool:
    return spec.get("mark", {}).get("type") == "text" and rows_with(spec, "message") == [
        {"message": "no data"}
    ]


def model_for(tmp_path, review: dict | None = None, **kw) -> dict:
    """The packet model of a review folder written by runfactory (no rendering: fast)."""
    path = write_review(tmp_path / "review", review or complete_review(), **kw)
    return build_model(run_check(path))


def write_evidence(tmp_path, name: str, doc: dict) -> None:
    (tmp_path / "review" / "evidence" / name).write_text(json.dumps(doc) + "\n")


# --- latency-throughput ----------------------------------------------------------------------


def test_sweep_knee_offline_and_sla_come_from_the_file_and_the_review(tmp_path):
    review = complete_review()
    path = write_review(tmp_path / "review", review)
    # A 1 ms/query server: offline throughput 1 / 1e-3 = 1000 queries/s.
    workload = sweep_workload(call_s=1e-3)
    write_evidence(tmp_path, "sweep.json", sweep_doc(workload))
    spec = build_model(run_check(path))["charts"]["latency_throughput"]
    charts.validate(spec)
    offline = rows_with(spec, "achieved_rate_per_s", "label")
    assert [r["achieved_rate_per_s"] for r in offline if r["label"].startswith("offline")] == [
        pytest.approx(1000.0)
    ]
    # The knee: what loadgen.find_knee says for the file's server levels.
    knee = loadgen.find_knee(workload["server"])
    assert knee["found"]
    [mark] = rows_with(spec, "knee_rate_per_s")
    assert mark["knee_rate_per_s"] == knee["rate_per_s"]
    level = next(lv for lv in workload["server"] if lv["target_rate_per_s"] == knee["rate_per_s"])
    assert mark["latency_ms"] == pytest.approx(level["latency"]["p99_s"] * 1e3)
    assert mark["achieved_rate_per_s"] == pytest.approx(level["achieved_rate_per_s"])
    # The review's target model.* p99 <= 0.5 s is the rule: 500 ms.
    [sla] = [r for r in rows_with(spec, "latency_ms", "label") if r["label"].startswith("SLA")]
    assert sla["latency_ms"] == pytest.approx(500.0)
    assert "review target model.*" in sla["label"]
    # ... and its min_throughput_per_s = 2 is the vertical rule beside the offline one.
    assert [r["achieved_rate_per_s"] for r in offline if r["label"].startswith("SLA")] == [2.0]
    # p50 and p99 points: two per server level, at the levels' achieved rates.
    points = rows_with(spec, "percentile", "achieved_rate_per_s")
    assert len(points) == 2 * len(workload["server"])
    svg = charts.to_svg(spec)
    assert ">model.toy-decoder.b1s256.bf16<" in svg


def test_sweep_uses_its_own_sla_when_the_review_has_none(tmp_path):
    review = complete_review()
    review["sla"]["targets"] = [{"workload": "gemm.*", "p99_s": 0.01}]  # matches no sweep id
    path = write_review(tmp_path / "review", review)
    swept = sweep_workload(call_s=1e-3, sla_p99_s=0.004)
    write_evidence(tmp_path, "sweep.json", sweep_doc(swept, sla_p99_s=0.004))
    spec = build_model(run_check(path))["charts"]["latency_throughput"]
    [sla] = [r for r in rows_with(spec, "latency_ms", "label") if r["label"].startswith("SLA")]
    assert sla["latency_ms"] == pytest.approx(4.0)
    assert "--sla-p99-s" in sla["label"]


def test_invalid_levels_are_hollow_grey_with_their_reasons():
    # 200 queries a level and a 0.5 s budget: at 250/s offered the 200 arrivals span ~0.8 s, so
    # that level stops at the budget and is invalid; at 500/s and above they fit.
    validity = Validity(min_duration_s=0.0, min_queries=200, max_level_s=0.5)
    workload = sweep_workload(call_s=1e-3, validity=validity)
    invalid = [lv for lv in workload["server"] if not lv["valid"]]
    assert invalid, "the budget must cut at least the lightest level"
    panel = {
        "workload": workload["id"],
        "levels": [
            {
                "achieved_rate_per_s": lv["achieved_rate_per_s"],
                "target_rate_per_s": lv["target_rate_per_s"],
                "load_fraction": lv["load_fraction"],
                "p50_s": lv["latency"]["p50_s"],
                "p99_s": lv["latency"]["p99_s"],
                "valid": lv["valid"],
                "invalid_reasons": lv["invalid_reasons"],
            }
            for lv in workload["server"]
        ],
        "offline_rate_per_s": workload["offline"]["achieved_rate_per_s"],
        "sla_p99_s": None,
        "knee": workload["knee"],
    }
    spec = charts.latency_throughput([panel])
    charts.validate(spec)
    hollow = [layer for layer in spec["vconcat"][0]["layer"]
              if layer["mark"].get("filled") is False and layer["mark"]["type"] == "point"
              and layer["mark"].get("color") == charts.MUTED_COLOUR]  # fmt: skip
    [layer] = hollow
    rows = spec["datasets"][layer["data"]["name"]]
    assert len(rows) == 2 * len(invalid)  # p50 and p99 of each invalid level
    assert all("stopped at the 0.5 s level budget" in r["reasons"] for r in rows)
    assert all(r["status"] == "invalid" for r in rows)


def test_no_sweep_cited_says_how_to_get_one(tmp_path):
    review = complete_review()
    del review["evidence"]["sweep"]
    spec = model_for(tmp_path, review)["charts"]["latency_throughput"]
    charts.validate(spec)
    assert is_no_data(spec)
    text = subtitles(spec)
    assert "reviewkit sweep --sla-p99-s S --out evidence/sweep.json" in text
    assert "[evidence].sweep" in text
    assert "reviewkit sweep --sla-p99-s S" in charts.to_svg(spec)


def test_a_cited_file_that_is_not_a_sweep_is_named_with_the_reason(tmp_path):
    review = complete_review()
    review["evidence"]["sweep"] = "evidence/trace.json"  # {"note": "test artifact"}
    spec = model_for(tmp_path, review)["charts"]["latency_throughput"]
    assert is_no_data(spec)
    text = subtitles(spec)
    assert "evidence/trace.json" in text
    # the reason as the chart prints it: a markdown code span as quoted words, no backticks
    assert "not a reviewkit result, not a “reviewkit sweep” result" in text


# --- shape portability -----------------------------------------------------------------------


def test_heatmap_has_a_cell_per_shape_coloured_by_the_comparison(tmp_path):
    model = model_for(tmp_path)
    spec = model["charts"]["shape_portability"]
    charts.validate(spec)
    cells = rows_with(spec, "seq", "batch", "ratio")
    # Every runfactory workload has seq and batch: one cell per (operator, seq, batch).
    shapes = {(name.rsplit(".", 1)[0], p["seq"], p["batch"]) for name, _, p, *_ in WORKLOADS}
    assert len(cells) == len(shapes) == 5
    assert {(c["workload"].rsplit(".", 1)[0], c["seq"], c["batch"]) for c in cells} == shapes
    # The candidate is 2.5x faster everywhere: each ratio near 1 / 2.5 = 0.4, as in the table.
    table = {r["key"]: r for r in model["workloads"][0]["rows"]}
    for c in cells:
        assert c["ratio"] == table[c["workload"]]["median_ratio"]
        assert c["ratio"] == pytest.approx(0.4, rel=0.05)
        assert c["p99_ms"] == table[c["workload"]]["candidate_p99_ms"]
        assert c["mfu"] == table[c["workload"]]["candidate_mfu"]
    assert {c["panel"] for c in cells} == {"gemm · toy-ffn-up", "attention · toy-sdpa",
                                           "model · toy-decoder"}  # fmt: skip
    colour = spec["concat"][0]["layer"][0]["encoding"]["color"]
    assert colour["field"] == "ratio" and colour["scale"]["type"] == "log"
    assert colour["scale"]["domain"][1] == 1.0  # diverging around 1
    svg = charts.to_svg(spec)
    assert ">gemm · toy-ffn-up<" in svg


def test_heatmap_without_a_comparison_colours_by_mfu():
    rows = [{"panel": "gemm · x", "workload": f"gemm.x.b{b}s{s}", "seq": s, "batch": b,
             "ratio": None, "mfu": 0.1 * (i + 1), "p99_ms": 1.0}
            for i, (s, b) in enumerate([(128, 1), (512, 1), (128, 4), (512, 4)])]  # fmt: skip
    spec = charts.shape_heatmap(rows)
    charts.validate(spec)
    colour = spec["concat"][0]["layer"][0]["encoding"]["color"]
    assert colour["field"] == "mfu"
    assert len(rows_with(spec, "seq", "batch")) == 4
    assert ">MFU 40.0%<" in charts.to_svg(spec)
    assert is_no_data(charts.shape_heatmap([]))


# --- stability -------------------------------------------------------------------------------


def test_stability_draws_the_fitted_trend_and_the_drift_verdict():
    rates = [100.0 - 1.5 * i for i in range(20)]  # falls by ~30% over the window
    doc = soak_doc(rates, clocks_mhz=[3000.0 - 20 * i for i in range(20)],
                   temperatures_c=[60.0 + i for i in range(20)])  # fmt: skip
    assert doc["analysis"]["verdict"] == "drift"
    soak = _soak_for_chart(doc)
    spec = charts.stability([soak])
    charts.validate(spec)
    assert "verdict: drift" in subtitles(spec)
    # The fitted line, worked out by numpy's least squares over the sub-window midpoints.
    t = np.array([(w["start_s"] + w["end_s"]) / 2 for w in doc["subwindows"]])
    v = np.array([w["calls_per_s"] for w in doc["subwindows"]])
    slope, intercept = np.polyfit(t, v, 1)
    fit = [r for r in rows_with(spec, "time_s", "calls_per_s", "label")]
    assert [r["time_s"] for r in fit] == [t[0], t[-1]]
    for r in fit:
        assert r["calls_per_s"] == pytest.approx(intercept + slope * r["time_s"], rel=1e-9)
    clocks = [r for r in rows_with(spec, "series", "value") if r["series"].startswith("cpu_")]
    assert [r["value"] for r in clocks] == [3000.0 - 20 * i for i in range(20)]
    assert "Clocks" in subtitles(spec) and "Temperatures" in subtitles(spec)


def test_stability_says_sensors_are_not_available_and_marks_partial_windows():
    doc = soak_doc()  # no clocks, no temperatures
    doc["subwindows"][-1]["partial"] = True
    soak = _soak_for_chart(doc)
    spec = charts.stability([soak])
    charts.validate(spec)
    text = subtitles(spec)
    why = "no thermal zones under /sys/class/thermal"
    # the chart says it in one line; the reasons go beside it (the packet's soak notes)
    assert "sensors not available: the reasons are given beside the chart" in text
    assert why not in text
    assert f"clocks: not available: cpu_clocks_mhz: {why}" in soak["sensor_notes"]
    assert any(n.startswith("temperatures: not available") for n in soak["sensor_notes"])
    partial = [r for r in rows_with(spec, "status", "calls_per_s") if r["partial"]]
    assert [r["index"] for r in partial] == [19]
    assert "1 partial sub-window" in text
    assert len(spec["vconcat"]) == 1  # no sensor panels without readings


def _soak_for_chart(doc: dict) -> dict:
    """The chart input packet.py builds from a soak document (through the packet code)."""
    from pathlib import Path

    from reviewkit.evidence.files import Loaded
    from reviewkit.evidence.soak import read_soak
    from reviewkit.render.packet.soak import one_soak

    soak = read_soak(Loaded(Path("evidence/soak.json"), doc))
    return one_soak(soak, "evidence/soak.json", several=False)


def test_no_soak_cited_says_how_to_get_one(tmp_path):
    review = complete_review()
    del review["evidence"]["long_window"]
    spec = model_for(tmp_path, review)["charts"]["stability"]
    assert is_no_data(spec)
    assert "reviewkit soak" in subtitles(spec) and "[evidence].long_window" in subtitles(spec)


# --- perf per watt ---------------------------------------------------------------------------


def test_perf_per_watt_from_metered_runs(tmp_path):
    # Every workload reads watts x its window (the sum of its samples): average power is
    # exactly that many watts, and work per joule is sum(F x calls) / sum(J) per layer type.
    model = model_for(tmp_path, base_kw={"watts": 40.0}, cand_kw={"watts": 25.0})
    spec = model["charts"]["perf_per_watt"]
    charts.validate(spec)
    assert not is_no_data(spec)
    bars = rows_with(spec, "gflops_per_joule", "avg_watts")
    assert {(b["run"], b["layer_type"]) for b in bars} == {
        (run, layer) for run in ("baseline fp32", "candidate bf16")
        for layer in ("gemm", "attention", "model")
    }  # fmt: skip
    base = json.loads((tmp_path / "review" / "runs" / "base" / "run.json").read_text())
    for b in bars:
        watts = 40.0 if b["run"].startswith("baseline") else 25.0
        assert b["avg_watts"] == pytest.approx(watts)
        if b["run"] == "baseline fp32" and b["layer_type"] == "gemm":
            ws = [w for w in base["workloads"] if w["layer_type"] == "gemm"]
            work = sum(w["flops"] * len(w["samples_s"]) for w in ws)
            joules = sum(watts * sum(w["samples_s"]) for w in ws)
            assert b["gflops_per_joule"] == pytest.approx(work / joules / 1e9)
    assert ">Work per joule (GFLOP/J)<" in charts.to_svg(spec)


def test_perf_per_watt_without_energy_quotes_the_recorded_reason(tmp_path):
    reason = "no RAPL powercap interface under /sys/class/powercap"
    names = {name: reason for name, *_ in WORKLOADS}
    model = model_for(tmp_path, base_kw={"energy_for": names}, cand_kw={"energy_for": names})
    spec = model["charts"]["perf_per_watt"]
    charts.validate(spec)
    assert is_no_data(spec)
    text = subtitles(spec)
    assert reason in text and "baseline" in text and "candidate" in text


def test_perf_per_watt_of_default_runs_says_nothing_was_recorded(tmp_path):
    spec = model_for(tmp_path)["charts"]["perf_per_watt"]
    assert is_no_data(spec)
    assert "no energy recorded for this workload" in subtitles(spec)


# --- quality drift ---------------------------------------------------------------------------


def test_quality_points_against_the_rubric_tolerance(tmp_path):
    path = write_review(tmp_path / "review", complete_review())
    write_evidence(tmp_path, "quality.json", quality_doc(rel_error=0.02, top1=0.97, kl=2e-3))
    report = run_check(path)
    spec = build_model(report)["charts"]["quality_drift"]
    charts.validate(spec)
    item = next(i for i in report.rubric.items if i.check == "precision-quality")
    tol = item.params["tolerances"]["bf16"]
    [rule] = [r for r in rows_with(spec, "rel_error", "label")]
    assert rule["rel_error"] == tol and rule["dtype"] == "bf16"
    points = rows_with(spec, "rel_error", "within")
    assert len(points) == 2
    # 0.02 is above the bf16 tolerance: both points are flagged.
    assert all(p["within"] == ("over tolerance" if tol < 0.02 else "within tolerance")
               for p in points)  # fmt: skip
    model_row = next(p for p in points if p["workload"].startswith("model."))
    assert (model_row["top1_agreement"], model_row["kl_divergence"]) == (0.97, 2e-3)
    assert "2 results over the rubric's tolerance" in subtitles(spec)
    # The PDF has no tooltips: the model's top-1 and KL are said against the rubric's limits
    # (min_top1_agreement 0.99, max_kl_divergence 1e-3).
    assert item.params["min_top1_agreement"] > 0.97 and item.params["max_kl_divergence"] < 2e-3
    text = subtitles(spec)
    assert "model.toy-decoder.b1s256 bf16: top-1 agreement 97.0% (BELOW the rubric's 99%)" in text
    assert "KL 0.002 nats (ABOVE the rubric's 0.001)" in text


def test_quality_within_tolerance_and_not_cited(tmp_path):
    spec = model_for(tmp_path)["charts"]["quality_drift"]  # runfactory: 3e-3 < 0.01
    assert {p["within"] for p in rows_with(spec, "rel_error", "within")} == {"within tolerance"}
    review = complete_review()
    del review["evidence"]["quality"]
    empty = model_for(tmp_path / "other", review)["charts"]["quality_drift"]
    assert is_no_data(empty)
    assert "reviewkit quality --dtype" in subtitles(empty)


# --- the whole packet: HTML, PDF, escaping ---------------------------------------------------


pytestmark = pytest.mark.usefixtures("weasyprint_warnings_fail")


def test_packet_shows_every_evidence_chart_in_html_and_pdf(tmp_path):
    path = write_review(tmp_path / "review", complete_review(), cand_kw={"watts": 30.0},
                        base_kw={"watts": 45.0})  # fmt: skip
    result = write_packet(path, tmp_path / "out")
    model = json.loads(result.json.read_text())
    for name in NEW_CHARTS:
        charts.validate(model["charts"][name])
        assert not is_no_data(model["charts"][name]), name
    tree = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(
        result.html.read_text()
    )
    ids = {el.get("id") for el in tree.iter() if el.get("id")}
    assert {"evidence"} | {f"chart-{n}" for n in NEW_CHARTS} <= ids
    assert {f"spec-{n}" for n in NEW_CHARTS} <= ids  # interactive specs for vega-embed
    pdf = pypdfium2.PdfDocument(str(result.pdf))
    text = "\n".join(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))
    for title in ("Production-like evidence", "Latency against throughput", "Shape portability",
                  "Throughput over the soak", "Perf per watt by layer type",
                  "Quality drift: relative error against float64"):  # fmt: skip
        assert title in text, title
    assert "Work per joule (GFLOP/J)" in text  # vector SVG: axis titles are text


def test_untrusted_strings_from_evidence_files_reach_the_html_escaped(tmp_path):
    review = complete_review()
    path = write_review(tmp_path / "review", review)
    validity = Validity(min_duration_s=0.0, min_queries=200, max_level_s=0.5)
    sweep = sweep_workload(workload_id=f"model.{PAYLOAD}.b1s256.bf16", call_s=1e-3,
                           validity=validity)  # fmt: skip
    for lv in sweep["server"]:
        lv["invalid_reasons"] = [f"reason {PAYLOAD}"]
        lv["valid"] = lv is not sweep["server"][0]
    error = {**sweep_workload(validity=SWEEP_VALIDITY), "id": f"gemm.{PAYLOAD}.x.fp32",
             "status": "error", "reason": f"RuntimeError {PAYLOAD}"}  # fmt: skip
    write_evidence(tmp_path, "sweep.json", sweep_doc(sweep, error))
    soak = soak_doc(workload_id=f"model.{PAYLOAD}.b1s256.bf16")
    soak["sensors"]["cpu_clocks_mhz"]["reason"] = f"sensor {PAYLOAD}"
    write_evidence(tmp_path, "soak.json", soak)
    quality = quality_doc()
    quality["results"][0]["id"] = f"gemm.{PAYLOAD}.b1s128"
    write_evidence(tmp_path, "quality.json", quality)
    result = write_packet(path, tmp_path / "out", pdf=False)
    html = result.html.read_text()
    model = json.loads(result.json.read_text())
    text = json.dumps([model["charts"][n] for n in NEW_CHARTS])
    assert text.count(PAYLOAD.replace('"', '\\"')) >= 4  # the strings are there, as data
    assert PAYLOAD not in html and "<script>alert" not in html
    tree = parse_inert(html)
    # The JSON specs parse back to the same strings (jinja's tojson escapes < > & ').
    spec = json.loads(tree.find(".//script[@id='spec-latency_throughput']").text)
    assert PAYLOAD in json.dumps(spec, ensure_ascii=False).replace('\\"', '"')


def test_invalid_levels_say_what_would_make_them_valid_here(tmp_path):
    # A 0.1 s/query server (offline 10 queries/s) under a 30 s level budget and 200 queries a
    # level: the 25% level offers 2.5 queries/s, so 200 queries take 200 / 2.5 = 80 s > 30 s.
    from reviewkit.evidence import loadgen

    tight = loadgen.Validity(min_duration_s=0.0, min_queries=200, max_level_s=30.0)
    path = write_review(tmp_path / "review", complete_review())
    doc = sweep_doc(sweep_workload(call_s=0.1, validity=tight))
    doc["validity"] = loadgen.validity_json(tight)
    write_evidence(tmp_path, "sweep.json", doc)
    spec = build_model(run_check(path))["charts"]["latency_throughput"]
    subtitle = " ".join(" ".join(p["title"]["subtitle"]) for p in spec["vconcat"])
    assert "level(s) invalid, hollow and grey" in subtitle
    # 2.5/s x 30 s x 0.9 = 67 queries fit in the budget with room to spare
    assert "at 2.5/s offered that takes 80 s" in subtitle
    assert "--min-queries 67" in subtitle
