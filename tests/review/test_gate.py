"""`reviewkit check`: each red flag raised by a constructed pair of runs, cleared by evidence."""

import copy
import json
import subprocess
import sys

import pytest
from runfactory import complete_review, samples, write_review

from reviewkit.review.gate import run_check


def statuses(review_path):
    report = run_check(review_path)
    return report, {f.item.id: f.status for f in report.findings}


def test_complete_review_passes_every_item(tmp_path):
    report, status = statuses(write_review(tmp_path, complete_review()))
    assert set(status.values()) == {"pass"}, {k: v for k, v in status.items() if v != "pass"}
    assert report.red_flags == []
    assert report.verdict == "pass"
    assert [d["status"] for d in report.disproof] == ["not disproved"]


def _drop(review, *path):
    node = review
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return review


TAIL = [4e-3] * 188 + [1.5e-2] * 12

# (flag item, how to raise it: review mutation, baseline kwargs, candidate kwargs)
RED_FLAGS = {
    "single-knob": (None, {}, {"knobs": {"threads": 1}}),
    "production-shape": (
        lambda r: _drop(r, "evidence", "production_traces"),
        {"only": ("gemm.toy-ffn-up.b1s128", "gemm.toy-ffn-up.b4s512")},
        {"only": ("gemm.toy-ffn-up.b1s128", "gemm.toy-ffn-up.b4s512")},
    ),
    "precision-quality": (lambda r: _drop(r, "evidence", "quality"), {}, {}),
    "long-window": (lambda r: _drop(r, "evidence", "long_window"), {}, {}),
    "tail-latency": (
        None,
        {},
        {
            "samples_for": {
                # Baseline median 5 ms. Mean (188 * 4 + 12 * 15) / 200 = 4.66 ms < 5 ms, but
                # p99 lands on the 15 ms tail: a resample leaves it only with 2 or fewer of the
                # 12 tail samples, P(Binomial(200, 0.06) <= 2) ~ 5e-4, so the one-sided
                # p-value passes Benjamini-Hochberg at 5% over the 5 workloads (0.01).
                "gemm.toy-ffn-up.b1s128": TAIL
            }
        },
    ),
    "shape-portability": (
        None,
        {"only": ("gemm.toy-ffn-up.b1s128", "attention.toy-sdpa.b1s128")},
        {"only": ("gemm.toy-ffn-up.b1s128", "attention.toy-sdpa.b1s128")},
    ),
    "fallback": (lambda r: _drop(r, "rollback", "fallback"), {}, {}),
    "closure": (lambda r: _drop(r, "owner"), {}, {}),
}


# Too few workloads lack both the model and the sweep; a fallback claim needs quality evidence
# (the seed: "sparse or precision wins without fallback and quality evidence").
# Dropping the model workload also leaves the soak and the SLA target (`model.*`) without their
# workload in the candidate.
SHARED_CAUSE = {
    "production-shape": {"shape-portability", "long-window", "sla-kpi"},
    "shape-portability": {"production-shape", "long-window", "sla-kpi"},
    "precision-quality": {"fallback"},
}


@pytest.mark.parametrize("flag", RED_FLAGS)
def test_each_red_flag_is_raised_and_cleared(tmp_path, flag):
    mutate, base_kw, cand_kw = RED_FLAGS[flag]
    review = complete_review()
    if mutate:
        mutate(review)
    report, status = statuses(write_review(tmp_path / "raised", review, base_kw, cand_kw))
    raised = {f.item.id for f in report.red_flags}
    assert flag in raised and status[flag] == "fail"
    # This construction raises no other flag, except those that share its cause.
    assert raised - {flag} <= SHARED_CAUSE.get(flag, set())
    # The evidence that answers it clears it.
    _, cleared = statuses(write_review(tmp_path / "cleared", complete_review()))
    assert cleared[flag] == "pass"


def test_production_shape_clears_with_a_trace_alone(tmp_path):
    only = {"only": ("gemm.toy-ffn-up.b1s128", "gemm.toy-ffn-up.b4s512")}
    _, status = statuses(write_review(tmp_path, complete_review(), only, only))
    assert status["production-shape"] == "pass"  # the trace stands in for the model workload


def test_closure_names_every_missing_piece(tmp_path):
    review = complete_review()
    for key in ("owner", "disproof"):
        del review[key]
    del review["rollback"]["boundary"]
    report, _ = statuses(write_review(tmp_path, review))
    closure = next(f for f in report.findings if f.item.id == "closure")
    assert "owner" in closure.summary and "rollback boundary" in closure.summary
    assert "disproof" in closure.summary
    assert report.verdict == "fail"


@pytest.mark.parametrize(
    "doc,status,needle",
    [
        ({"rel_error": 0.05}, "fail", "relative error 5.00e-02 > 0.01"),  # bf16 tolerance 1e-2
        ({"top1": 0.9}, "fail", "top-1 agreement 0.900 < 0.99"),
        ({"kl": 0.01}, "fail", "KL 1.00e-02 > 0.001"),
        ({}, "pass", "within the rubric's tolerances"),
    ],
)
def test_quality_evidence_is_checked_against_the_rubric(tmp_path, doc, status, needle):
    from runfactory import quality_doc

    path = write_review(tmp_path, complete_review())
    (tmp_path / "evidence" / "quality.json").write_text(json.dumps(quality_doc(**doc)))
    report = run_check(path)
    finding = next(f for f in report.findings if f.item.id == "precision-quality")
    assert finding.status == status and needle in finding.summary


def test_quality_evidence_of_another_kind_only_warns(tmp_path):
    path = write_review(tmp_path, complete_review())
    (tmp_path / "evidence" / "quality.json").write_text('{"accuracy": 0.99}')
    _, status = statuses(path)
    assert status["precision-quality"] == "warn"


def test_quality_evidence_without_the_candidate_dtype_fails(tmp_path):
    from runfactory import quality_doc

    path = write_review(tmp_path, complete_review())
    doc = quality_doc()
    for row in doc["results"]:
        row["dtype"], row["mapping"] = "fp16", {"dtype": "fp16"}
    (tmp_path / "evidence" / "quality.json").write_text(json.dumps(doc))
    report = run_check(path)
    finding = next(f for f in report.findings if f.item.id == "precision-quality")
    assert finding.status == "fail" and "no bf16 results" in finding.summary


def test_tf32_counts_as_lowered_precision(tmp_path):
    review = _drop(complete_review(), "evidence", "quality")
    _, status = statuses(
        write_review(
            tmp_path, review, {}, {"dtype": "fp32", "knobs": {"float32_matmul_precision": "high"}}
        )
    )
    assert status["precision-quality"] == "fail"


def test_failed_workloads_are_named(tmp_path):
    cand = {"status_for": {"attention.toy-sdpa.b1s128": "unsupported"}}
    report, status = statuses(write_review(tmp_path, complete_review(), {}, cand))
    assert status["stack-maturity"] == "fail"
    assert any(
        "attention.toy-sdpa.b1s128.bf16" in w
        for w in report.warnings + tuple(f.summary for f in report.findings)
    )
    comparison = report.comparisons[0]
    row = next(w for w in comparison.workloads if w.key == "attention.toy-sdpa.b1s128")
    assert row.verdict == "not comparable" and "unsupported" in row.reason


def test_disproved_claim_fails_the_gate(tmp_path):
    review = complete_review()
    review["disproof"].append(
        {
            "statement": "gemm got slower",
            "workload": "gemm.*",
            "metric": "median_ratio",
            "comparison": ">=",
            "threshold": 0.1,
        }
    )
    review["disproof"].append({"statement": "words only"})
    report, status = statuses(write_review(tmp_path, review))
    assert [d["status"] for d in report.disproof] == ["not disproved", "disproved", "not evaluable"]
    assert status["disproof"] == "fail" and report.verdict == "fail"


def test_sla_miss_fails(tmp_path):
    review = complete_review()
    review["sla"]["targets"][0]["p99_s"] = 0.01  # the toy model takes ~0.1 s
    _, status = statuses(write_review(tmp_path, review))
    assert status["sla-kpi"] == "fail"


def test_unanswered_manual_item_is_missing_and_blocks(tmp_path):
    review = complete_review()
    del review["answers"]["senior-question"]
    report, status = statuses(write_review(tmp_path, review))
    assert status["senior-question"] == "missing"
    assert report.verdict == "fail"


def test_findings_carry_artifacts_with_sha256(tmp_path):
    import hashlib

    path = write_review(tmp_path, complete_review())
    report = run_check(path)
    quality = next(f for f in report.findings if f.item.id == "precision-quality")
    artifact = quality.evidence[0]
    expected = hashlib.sha256((tmp_path / "evidence" / "quality.json").read_bytes()).hexdigest()
    assert (artifact.path, artifact.sha256) == ("evidence/quality.json", expected)
    sla = next(f for f in report.findings if f.item.id == "sla-kpi")
    sweep = sla.evidence[0]
    expected = hashlib.sha256((tmp_path / "evidence" / "sweep.json").read_bytes()).hexdigest()
    assert (sweep.path, sweep.sha256) == ("evidence/sweep.json", expected)
    assert sweep.reproduce == (
        "reviewkit sweep --profile smoke --only 'model.toy-decoder.b1s256.bf16'"
    )
    # Without a sweep the SLA is judged per call on the run, and the run's command is cited.
    review = _drop(complete_review(), "evidence", "sweep")
    report = run_check(write_review(tmp_path / "per-call", review))
    sla = next(f for f in report.findings if f.item.id == "sla-kpi")
    # met one query at a time, unjudged under load without a sweep: a warning, never a pass
    assert sla.status == "warn" and "cite a `reviewkit sweep`" in sla.summary
    assert sla.evidence[0].reproduce == "reviewkit run --only 'model.toy-decoder.b1s256.bf16'"


def test_check_cli_exit_codes_and_json(tmp_path):
    good = write_review(tmp_path / "good", complete_review())
    bad = write_review(tmp_path / "bad", _drop(complete_review(), "evidence", "quality"))
    code = [sys.executable, "-m", "reviewkit", "check"]
    ok = subprocess.run([*code, str(good), "--json"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["verdict"] == "pass"
    failing = subprocess.run([*code, str(bad)], capture_output=True, text=True)
    assert failing.returncode == 1
    assert failing.stdout.index("Red flags") < failing.stdout.index("Findings")
    assert "to clear: Run `reviewkit quality" in failing.stdout
    usage = subprocess.run([*code, str(tmp_path / "nope.toml")], capture_output=True, text=True)
    assert usage.returncode == 2 and "file not found" in usage.stderr


def test_check_never_modifies_inputs(tmp_path):
    path = write_review(tmp_path, complete_review())
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    run_check(path)
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert before == after


def test_team_rubric(tmp_path):
    rubric = tmp_path / "team.toml"
    rubric.write_text(
        '[rubric]\nname = "team"\n[[sections]]\nid = "s"\n[[sections.items]]\nid = "only-closure"\n'
        'title = "t"\nquestion = "q"\nseverity = "blocking"\ncheck = "closure"\nevidence = "e"\n'
    )
    review = copy.deepcopy(complete_review())
    review["answers"] = {}
    report = run_check(write_review(tmp_path / "r", review), rubric)
    assert [f.item.id for f in report.findings] == ["only-closure"]
    assert report.verdict == "pass"


def test_tail_samples_construction_is_what_the_flag_needs():
    assert sum(TAIL) / len(TAIL) == pytest.approx(4.66e-3)
    assert len(samples(1.0)) == 200


def test_an_sla_target_named_by_shape_holds_every_dtype_in_the_gate_and_the_packet(tmp_path):
    """One matcher for gate and packet: a target naming the shape without its dtype
    (`model.toy-decoder.b1s256`) holds the candidate's bf16 workload on both sides. The gate
    used to match the id only and failed such a target as matching nothing."""
    from reviewkit.render.packet.sweep import sweep_input

    review = complete_review()
    review["sla"]["targets"][0]["workload"] = "model.toy-decoder.b1s256"
    report = run_check(write_review(tmp_path / "swept", review))
    sla = next(f for f in report.findings if f.item.id == "sla-kpi")
    assert sla.status == "pass", sla.summary
    assert sla.evidence[0].path == "evidence/sweep.json"  # judged on the sweep, under load
    panels, _ = sweep_input(report)
    assert [p["sla_source"] for p in panels] == ["review target model.toy-decoder.b1s256"]
    assert [p["sla_p99_s"] for p in panels] == [0.5]
    # Per call on the run (no sweep cited), the same target still finds the workload.
    report = run_check(write_review(tmp_path / "per-call", _drop(review, "evidence", "sweep")))
    sla = next(f for f in report.findings if f.item.id == "sla-kpi")
    assert sla.status == "warn" and sla.evidence[0].value == "model.toy-decoder.b1s256.bf16"


def test_a_quality_row_without_a_status_is_not_measured_for_the_gate_or_the_packet(tmp_path):
    """One rule for both readers: a row that does not say it was measured is not counted as
    measured. The gate fails it as a problem; the packet leaves it off the drift chart and says
    so (it used to read a missing status as "ok" and draw it)."""
    from reviewkit.render.packet.quality import quality_input

    path = write_review(tmp_path, complete_review())
    quality = json.loads((tmp_path / "evidence" / "quality.json").read_text())
    del quality["results"][0]["status"]  # the gemm row: numbers, but no status
    (tmp_path / "evidence" / "quality.json").write_text(json.dumps(quality))
    report = run_check(path)
    finding = next(f for f in report.findings if f.item.check == "precision-quality")
    assert finding.status == "fail"
    assert "gemm.toy-ffn-up.b1s128 bf16: no status recorded" in finding.summary
    rows, _, notes = quality_input(report)
    assert [r["workload"] for r in rows] == ["model.toy-decoder.b1s256"]
    assert any("gemm.toy-ffn-up.b1s128 bf16: no status recorded" in n for n in notes)


def _device_profile_review(tmp_path, run_fingerprint: dict):
    """A review whose runs were measured on `run_fingerprint`, naming one device profile."""
    from reviewkit.bundle import profile as profiles

    review = complete_review()
    review["runs"]["device_profile"] = "profiles/device.json"
    path = write_review(tmp_path, review)
    for run in ("base", "cand"):
        run_json = tmp_path / "runs" / run / "run.json"
        doc = json.loads(run_json.read_text())
        doc["environment"]["fingerprint"] = run_fingerprint
        run_json.write_text(json.dumps(doc))
    memory = [{"level": "l1", "capacity_bytes": 32 << 10, "peak": 3e11},
              {"level": "llc", "capacity_bytes": 32 << 20, "peak": 1.2e11},
              {"level": "dram", "capacity_bytes": None, "peak": 3e10}]  # fmt: skip
    calibrated = {
        "compute": {"fp32": {"peak": 4e11}, "bf16": {"peak": 8e11}},
        "memory": memory,
        "bandwidth": {"peak": 3e10},
        "threads": 2,
        "settings": {"threads": 2, "float32_matmul_precision": "highest"},
    }
    doc = profiles.build(
        calibrated=calibrated,
        fingerprint=PROFILE_DEVICE,
        torch_build={"torch_version": "2.13.0+cpu"},
        device="cpu",
        device_name="Test CPU",
        calibration="quick",
        created_unix_s=1.0,
        wall_s=20.0,
    )
    profiles.save(doc, tmp_path / "profiles" / "device.json")
    return path, doc


PROFILE_DEVICE = {"hash": "feedc0de", "label": "Test CPU · Zen 4 · AVX-512 BF16 · 2 cores"}


def test_a_review_device_profile_is_every_runs_denominator(tmp_path):
    path, profile = _device_profile_review(tmp_path, PROFILE_DEVICE)
    report = run_check(path)
    gemm = next(
        w for w in report.baseline.workloads if w.id.startswith("gemm.toy-ffn-up.b1s128")
    )
    # F = 6e8 FLOP at the profile's 4e11 FLOP/s: t_c = 1.5 ms; the bundle's own 2e11 gave 3 ms.
    assert gemm.compute_time_s == pytest.approx(1.5e-3)
    assert gemm.mfu == pytest.approx(1.5e-3 / gemm.stats.p50_s)
    # 1e7 bytes fit the 32 MiB LLC: t_m = 1e7 / 1.2e11 = 83.3 us.
    assert gemm.memory_level == "llc"
    assert gemm.memory_time_s == pytest.approx(1e7 / 1.2e11)
    assert report.baseline.ceilings["profile"]["hash"] == profile["hash"]
    assert report.baseline.ceilings["profile"]["source"] == "review"


def test_a_review_device_profile_of_another_device_is_refused(tmp_path):
    from reviewkit.common.errors import InputError

    other = {"hash": "0ther", "label": "Test CPU · Zen 3 · AVX2 · 2 cores"}
    path, _ = _device_profile_review(tmp_path, other)
    with pytest.raises(InputError) as info:
        run_check(path)
    message = str(info.value)
    assert "runs.baseline" in message and "Zen 3" in message and "Zen 4" in message
    assert "runs.device_profile" in message


def test_the_senior_question_is_read_beside_the_measured_classes(tmp_path):
    # The candidate's heaviest layer types (by time share) are cited beside the answer: class,
    # share of roof, overhead and lever. Overhead measured on the candidate's model workload.
    from runfactory import WORKLOADS

    model = next(name for name, layer_type, *_ in WORKLOADS if layer_type == "model")
    path = write_review(tmp_path, complete_review(),
                        cand_kw={"overhead_for": {model: 1e-4}})  # fmt: skip
    report = run_check(path)
    senior = next(f for f in report.findings if f.item.id == "senior-question")
    measured = [e for e in senior.evidence if e.label.startswith("measured, ")]
    assert 1 <= len(measured) <= 3
    heaviest = max(report.review_candidates[0][1].layer_types.items(),
                   key=lambda kv: kv[1].time_share)  # fmt: skip
    assert measured[0].value.startswith(f"candidate 1 {heaviest[0]}: ")
    assert "roof share" in measured[0].value and "lever: " in measured[0].value


def test_a_disproof_criterion_is_judged_on_the_interval_not_the_point(tmp_path):
    # The candidate is 2.5x faster: the model's median ratio is about 0.4 with an interval
    # around it. A threshold at the point estimate itself lies inside the interval: neither
    # disproved nor clear of it, "cannot rule out" (a warning); one far above is clear of it.
    review = complete_review()
    report = run_check(write_review(tmp_path / "a", review))
    row = next(w for w in report.comparisons[0].workloads if w.layer_type == "model")
    lo, hi = row.median_ratio_ci
    assert lo < row.median_ratio < hi
    review["disproof"] = [{"statement": "not faster than its own point", "workload": "model.*",
                           "metric": "median_ratio", "comparison": ">",
                           "threshold": row.median_ratio}]  # fmt: skip
    report, status = statuses(write_review(tmp_path / "b", review))
    (d,) = report.disproof
    assert d["status"] == "cannot rule out" and "straddles" in d["why"]
    assert status["disproof"] == "warn"
    review["disproof"][0]["threshold"] = hi * 1.5
    report, status = statuses(write_review(tmp_path / "c", review))
    assert report.disproof[0]["status"] == "not disproved"
    assert "interval clear of the threshold" in report.disproof[0]["why"]
    assert status["disproof"] == "pass"


def test_a_review_device_profile_of_other_settings_is_refused(tmp_path):
    """The factory's runs ran at 2 threads, float32 matmul precision highest (runfactory.py);
    a profile calibrated at 1 thread is not their denominator."""
    from reviewkit.bundle import profile as profiles
    from reviewkit.common.errors import InputError

    path, doc = _device_profile_review(tmp_path, PROFILE_DEVICE)
    one_thread = {**doc, "settings": {"threads": 1, "float32_matmul_precision": "highest"}}
    profiles.save({**one_thread, "hash": profiles.content_hash(one_thread)},
                  tmp_path / "profiles" / "device.json")  # fmt: skip
    with pytest.raises(InputError) as info:
        run_check(path)
    message = str(info.value)
    assert "ran at 2 threads, float32 matmul precision highest" in message
    assert "was calibrated at 1 thread, float32 matmul precision highest" in message
    assert "Drop runs.device_profile" in message
