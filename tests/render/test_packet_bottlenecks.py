"""The packet's bottleneck classes: measured overhead apart from inefficiency in the chart, the
tables and the brief; a run recorded before overhead was measured says so, with no percentage."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import html5lib
import pypdfium2
import pytest
from chartspecs import datasets
from runfactory import WORKLOADS, complete_review, samples, write_review

from reviewkit.analysis.analysed import LayerAggregate
from reviewkit.common.format import pct
from reviewkit.render.packet import write_packet

NOT_APART = "overhead + inefficiency (not measured apart)"
# The candidate's slow attention: 80 ms where its roof is 16 ms, so its layer type is far below
# roof (a compute-bound kernel working at about a fifth of its peak).
SLOW_ATTENTION = "attention.toy-sdpa.b4s512"
# An overhead figure printed as a number: "overhead 10.0%", "Overhead 3.8 %".
OVERHEAD_PERCENT = re.compile(r"overhead\W{0,3}\d+(\.\d+)?\s?%", re.IGNORECASE)


def _text(el) -> str:
    return " ".join("".join(el.itertext()).split())


def _table(tree, cls: str) -> list[dict]:
    table = next(t for t in tree.iter("table") if cls in t.get("class", "").split())
    heads = [_text(th) for th in table.find("thead").iter("th")]
    return [dict(zip(heads, [_text(td) for td in tr.findall("td")], strict=True))
            for tr in table.find("tbody").iter("tr")]  # fmt: skip


def _parse(result):
    text = result.html.read_text()
    tree = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(text)
    return tree, json.loads(result.json.read_text())


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A candidate whose overhead was measured (a floor call of 10% of each median), beside a
    baseline that has none."""
    root = tmp_path_factory.mktemp("measured")
    cand = {
        "speedup": 1.0,
        "overhead_for": {name: 0.1 * median for name, *_, median in WORKLOADS},
        "samples_for": {SLOW_ATTENTION: samples(0.08, seed=7)},
    }
    review = write_review(root / "review", complete_review(), cand_kw=cand)
    return _parse(write_packet(review, root / "out", pdf=False))


def _migrate_to_v5(run_dir: Path) -> None:
    """Rewrite a bundle as run.json schema 5 wrote it: no overhead record on any workload."""
    path = run_dir / "run.json"
    doc = json.loads(path.read_text())
    doc["schema_version"] = 5
    for w in doc["workloads"]:
        w.pop("overhead", None)
    path.write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """Both runs recorded before overhead was measured (schema 5, migrated on load), the
    candidate's attention below half its roof: no class can be given to it."""
    root = tmp_path_factory.mktemp("migrated")
    cand = {"speedup": 1.0, "samples_for": {SLOW_ATTENTION: samples(0.08, seed=7)}}
    review = write_review(root / "review", complete_review(), cand_kw=cand)
    for side in ("base", "cand"):
        _migrate_to_v5(root / "review" / "runs" / side)
    result = write_packet(review, root / "out")
    return (*_parse(result), result)


def _segments(model: dict, run: str) -> dict[tuple[str, str], float]:
    spec = model["charts"]["time_decomposition"]
    return {(r["layer_type"], r["component"]): r["share"]
            for rows in datasets(spec) for r in rows
            if "component" in r and r["run"] == run}  # fmt: skip


def test_a_measured_run_draws_inefficiency_apart_from_overhead(measured):
    _, model = measured
    layers = {r["layer_type"]: r for r in model["layers"] if r["run"] == "candidate"}
    bars = _segments(model, "candidate bf16")
    for layer_type, agg in layers.items():
        assert agg["overhead_fraction"] is not None
        assert bars[(layer_type, "overhead")] == pytest.approx(agg["overhead_fraction"])
        assert bars[(layer_type, "inefficiency")] == pytest.approx(agg["inefficiency_fraction"])
        assert (layer_type, NOT_APART) not in bars
    # the slow attention's time is mostly the kernel below its roof, not the host
    assert bars[("attention", "inefficiency")] > 0.5 > bars[("attention", "overhead")]
    # the baseline has no overhead record: its rest is drawn as the two together
    base = _segments(model, "baseline fp32")
    assert (("gemm", NOT_APART) in base) and (("gemm", "overhead") not in base)
    scale = model["charts"]["time_decomposition"]["spec"]["encoding"]["color"]["scale"]
    colours = dict(zip(scale["domain"], scale["range"], strict=True))
    assert len({colours["inefficiency"], colours["overhead"], colours[NOT_APART]}) == 3


def test_the_bottleneck_table_shows_share_of_roof_overhead_inefficiency_and_lever(measured):
    tree, model = measured
    rows = {r["Layer type"]: r for r in _table(tree, "t-roof")}
    layers = {r["layer_type"]: r for r in model["layers"] if r["run"] == "candidate"}
    attention = rows["attention"]
    assert attention["Class"] == "compute-bound"
    assert attention["Share of roof"] == f"{pct(layers['attention']['roof_share'])} below roof"
    assert attention["Overhead"] == pct(layers["attention"]["overhead_fraction"])
    assert attention["Inefficiency"] == pct(layers["attention"]["inefficiency_fraction"])
    assert attention["Lever"].startswith("the kernel or the mapping")
    assert attention["Lever"] == layers["attention"]["lever"]
    gemm = rows["gemm"]
    assert "below roof" not in gemm["Share of roof"]
    assert gemm["Lever"] == "a faster kernel or lower precision with a higher compute peak"
    assert "not measured" not in " ".join(gemm.values())
    # the layers table beside it: the baseline says not measured, the candidate its numbers
    by_run = {(r["Run"], r["Layer type"]): r for r in _table(tree, "t-layers")}
    assert by_run[("baseline", "gemm")]["Overhead"] == "not measured"
    assert by_run[("candidate", "gemm")]["Overhead"] == pct(layers["gemm"]["overhead_fraction"])


def test_the_brief_cites_class_share_of_roof_and_lever_of_the_named_layer_types(measured):
    tree, model = measured
    brief = tree.find(".//section[@id='brief']")
    items = [_text(li) for li in brief.iter("li")]
    attention = next(i for i in items if i.startswith("attention:"))
    roof = model["brief"]["senior"]["layers"]
    share = next(x for x in roof if x["layer_type"] == "attention")["roof_share"]
    assert f"roof {pct(share)} of the kernel time, below roof" in attention
    assert attention.startswith("attention: compute-bound;")
    assert "lever: the kernel or the mapping" in attention
    # the largest time share first
    shares = [x["time_share"] for x in roof]
    assert shares == sorted(shares, reverse=True)


def test_a_migrated_run_says_not_measured_and_never_an_overhead_percentage(migrated):
    tree, model, result = migrated
    roof = {r["Layer type"]: r for r in _table(tree, "t-roof")}
    for row in roof.values():
        assert row["Overhead"] == "not measured"
        assert row["Inefficiency"] == "not measured apart"
        assert row["Share of roof"].startswith("≥ ")
    assert roof["attention"]["Class"] == "unclassified: overhead not measured"
    assert roof["attention"]["Lever"].startswith("re-measure")
    classes = {r["Layer type"]: r for r in _table(tree, "t-bottlenecks")}
    assert classes["attention"]["Candidate class"] == "unclassified: overhead not measured"
    for row in _table(tree, "t-layers"):
        assert row["Overhead"] == "not measured"
        assert row["Inefficiency"] == "not measured apart"
    for row in model["bottlenecks"]:
        assert row["overhead"] is None and row["inefficiency"] is None
    # the chart: the rest is the grey pair in every bar, never an overhead segment
    for run in ("baseline fp32", "candidate bf16"):
        components = {c for _, c in _segments(model, run)}
        assert NOT_APART in components
        assert not {"overhead", "inefficiency"} & components
    brief = _text(tree.find(".//section[@id='brief']"))
    assert "attention: unclassified: overhead not measured" in brief
    assert "overhead not measured" in brief
    main = _text(tree.find(".//main"))
    assert not OVERHEAD_PERCENT.search(main), OVERHEAD_PERCENT.search(main)
    pdf = pypdfium2.PdfDocument(str(result.pdf))
    text = " ".join(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))
    assert "unclassified: overhead not measured" in " ".join(text.split())
    assert not OVERHEAD_PERCENT.search(" ".join(text.split()))


def test_the_migrated_workload_table_names_the_class_in_full(migrated):
    tree, _, _ = migrated
    rows = _table(tree, "t-workloads")
    slow = next(r for r in rows if r["Workload"].startswith(SLOW_ATTENTION))
    assert "unclassified: overhead not measured" in slow["Bottleneck"]


# workloads, time_s and compute_fraction are not part of the view: any values do.
AGG = LayerAggregate(workloads=2, time_s=0.01, compute_fraction=0.05,
                     bottleneck="memory-bound", roof_share=0.4, below_roof=True,
                     overhead_fraction=0.1, inefficiency_fraction=0.5, unattributed_fraction=0.0,
                     lever="the kernel or the mapping", time_share=0.3, mfu=0.05,
                     memory_stall_fraction=0.35)  # fmt: skip


def test_a_layer_view_reads_the_comparison_then_the_runs_aggregate():
    from types import SimpleNamespace

    from reviewkit.render.packet.bottlenecks import describe, layer_view

    view = layer_view(AGG)
    assert describe(view) == (
        "memory-bound; roof 40.0% of the kernel time, below roof; overhead 10.0%, inefficiency "
        "50.0%; lever: the kernel or the mapping"
    )
    # a comparison from before the per-side fields: the aggregate fills each one
    old = SimpleNamespace(bottleneck_candidate="memory-bound")
    assert layer_view(AGG, old) == view
    # one that has them, lever and flags left empty where its aggregate had none
    new = SimpleNamespace(bottleneck_candidate="memory-bound", roof_share_candidate=0.45,
                          overhead_candidate=0.12, inefficiency_candidate=0.4,
                          below_roof_candidate=False, lever_candidate="")  # fmt: skip
    got = layer_view(AGG, new)
    assert (got["roof_share"], got["overhead"], got["inefficiency"]) == (0.45, 0.12, 0.4)
    assert got["below_roof"] and got["lever"] == "the kernel or the mapping"
    # no class on the comparison (a multi-dtype run paired by shape): the run's own, throughout
    none = SimpleNamespace(bottleneck_candidate=None, roof_share_candidate=0.9)
    assert layer_view(AGG, none) == view


def test_a_layer_view_without_measured_overhead_never_gives_a_percentage_for_it():
    from reviewkit.render.packet.bottlenecks import describe, layer_view

    old = replace(AGG, bottleneck="unclassified", overhead_fraction=None,
                  inefficiency_fraction=None, unattributed_fraction=0.6, below_roof=False,
                  lever="re-measure with this reviewkit")  # fmt: skip
    view = layer_view(old)
    assert view["inefficiency"] is None and view["unattributed"] == 0.6
    text = describe(view)
    assert text.startswith("unclassified: overhead not measured; roof 40.0% of the whole time")
    assert "overhead not measured" in text and not OVERHEAD_PERCENT.search(text)
