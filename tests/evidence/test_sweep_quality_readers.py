"""The one reading of sweep and quality results: what the gate and the packet both refuse."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import pytest
from evidencedocs import sweep_doc, sweep_workload
from runfactory import complete_review, quality_doc, write_review

from reviewkit.evidence.files import Loaded
from reviewkit.evidence.quality import QualityUnusable, read_quality
from reviewkit.evidence.sweep import SweepUnusable, best_under_sla, read_sweep
from reviewkit.review.gate import run_check


def test_a_sweep_reads_into_typed_levels():
    doc = sweep_doc(sweep_workload(call_s=0.1))
    sweep = read_sweep(Loaded(Path("s.json"), doc))
    (w,) = sweep.workloads
    raw = doc["workloads"][0]
    assert w.id == raw["id"] and w.measured
    assert len(w.server) == len(raw["server"])
    assert [lv.p99_s for lv in w.server] == [lv["latency"]["p99_s"] for lv in raw["server"]]
    assert w.offline.achieved_rate_per_s == raw["offline"]["achieved_rate_per_s"]


def test_best_under_sla_on_typed_levels_is_loadgens_answer():
    """One judgement: the typed levels give what loadgen gives on the raw dicts."""
    from reviewkit.evidence import loadgen

    doc = sweep_doc(sweep_workload(call_s=0.1))
    (w,) = read_sweep(Loaded(Path("s.json"), doc)).workloads
    for p99_s in (0.05, 0.15, 0.5, 5.0):
        assert best_under_sla(w.server, p99_s) == loadgen.best_under_sla(
            doc["workloads"][0]["server"], p99_s
        )


@pytest.mark.parametrize(
    ("damage", "key"),
    [
        (lambda d: d.update(workloads=[]), "`workloads` must be a non-empty list"),
        (lambda d: d["workloads"][0].pop("id"), "`workloads[0].id` must be a workload id"),
        (lambda d: d["workloads"][0]["server"][1].pop("valid"),
         "`workloads[0].server[1].valid` must be true or false"),
        (lambda d: d["workloads"][0]["server"][0]["latency"].pop("p99_s"),
         "`workloads[0].server[0].latency.p99_s` must be a number on a valid level"),
        (lambda d: d["workloads"][0]["server"][0].update(achieved_rate_per_s=math.nan),
         "`workloads[0].server[0].achieved_rate_per_s` must be a number >= 0"),
        (lambda d: d["workloads"][0].update(server="none"),
         "`workloads[0].server` must be a list of levels"),
        (lambda d: d.update(sla_p99_s=-1.0), "`sla_p99_s` must be a number > 0 or absent"),
    ],
)  # fmt: skip
def test_a_damaged_sweep_names_the_key(damage, key):
    doc = copy.deepcopy(sweep_doc(sweep_workload(call_s=0.1)))
    damage(doc)
    with pytest.raises(SweepUnusable, match=re.escape(key)):
        read_sweep(Loaded(Path("s.json"), doc))


def test_a_sweep_row_not_measured_needs_no_levels():
    doc = sweep_doc({"id": "conv.x.fp32", "status": "error", "reason": "out of memory"})
    (w,) = read_sweep(Loaded(Path("s.json"), doc)).workloads
    assert not w.measured and w.reason == "out of memory" and w.server == ()


@pytest.mark.parametrize(
    ("damage", "key"),
    [
        (lambda d: d["results"][0].pop("rel_error"), "`results[0].rel_error` must be a number"),
        (lambda d: d["results"][1].update(top1_agreement=1.5),
         "`results[1].top1_agreement` must be a number in [0, 1]"),
        (lambda d: d["results"][1].update(kl_divergence=-0.1),
         "`results[1].kl_divergence` must be a number in [0, inf]"),
        (lambda d: d["results"][0].pop("dtype"), "`results[0].dtype` must be a string"),
        (lambda d: d.update(results={}), "`results` must be a list of tables"),
    ],
)  # fmt: skip
def test_a_damaged_quality_result_names_the_key(damage, key):
    doc = copy.deepcopy(quality_doc())
    damage(doc)
    with pytest.raises(QualityUnusable, match=re.escape(key)):
        read_quality(Loaded(Path("q.json"), doc))


def _damage(folder: Path, name: str, damage) -> None:
    path = folder / "evidence" / name
    doc = json.loads(path.read_text())
    damage(doc)
    path.write_text(json.dumps(doc))


def test_a_damaged_sweep_is_refused_by_the_gate_and_the_packet_with_one_reason(tmp_path):
    """Before, the gate failed the SLA on "levels without latency or validity fields" while the
    packet wrote "not a usable sweep entry (KeyError)". Now both leave the file out and name
    the key; the gate judges the target per call instead, as with no sweep cited."""
    from reviewkit.render.packet.sweep import sweep_input

    path = write_review(tmp_path, complete_review())
    _damage(tmp_path, "sweep.json", lambda d: d["workloads"][0]["server"][2].pop("valid"))
    report = run_check(path)
    sla = next(f for f in report.findings if f.item.id == "sla-kpi")
    reason = "`workloads[0].server[2].valid` must be true or false"
    # judged per call, so unjudged under load: a warning that names the unused file
    assert sla.status == "warn" and f"cited sweep not used: evidence/sweep.json: {reason}" in (
        sla.summary
    )
    assert sla.evidence[0].kind == "workload"  # judged per call on the run
    panels, notes = sweep_input(report)
    assert panels == [] and any(f"evidence/sweep.json: not used: {reason}" in n for n in notes)


def test_a_measured_quality_row_without_its_error_is_refused_by_both_sides(tmp_path):
    """Before, the gate read a missing rel_error as infinite ("relative error inf > 0.016")
    and the packet drew the row with no error. Now both leave the file out and name the key."""
    from reviewkit.render.packet.quality import quality_input

    path = write_review(tmp_path, complete_review())
    _damage(tmp_path, "quality.json", lambda d: d["results"][0].pop("rel_error"))
    report = run_check(path)
    finding = next(f for f in report.findings if f.item.check == "precision-quality")
    reason = "`results[0].rel_error` must be a number in [0, inf]"
    assert finding.status == "warn" and reason in finding.summary
    rows, _, notes = quality_input(report)
    assert rows == [] and any(f"evidence/quality.json: not used: {reason}" in n for n in notes)
