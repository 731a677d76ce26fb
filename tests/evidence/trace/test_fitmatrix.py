"""The workload fit matrix and the production-shape red flag, on traces the real importer read."""

import json

import pytest
from evidencedocs import TOY_PRODUCTION_OPS, trace_summary_doc
from runfactory import complete_review, make_run, write_review

from reviewkit.bundle.run import load_run
from reviewkit.evidence.trace import fit as fitmatrix
from reviewkit.evidence.trace.layermap import load_layer_map
from reviewkit.evidence.trace.summary import summarise
from reviewkit.review.gate import run_check

FACTOR = 4.0  # the default rubric's shape_range_factor


def _run(tmp_path):
    return load_run(make_run(tmp_path / "run", dtype="bf16"))


def _fit(tmp_path, ops, factor=FACTOR):
    doc = trace_summary_doc(tmp_path, ops)
    return fitmatrix.build(doc["traces"], _run(tmp_path), factor)


def test_toy_mix_is_covered_nine_tenths(tmp_path):
    fit = _fit(tmp_path, TOY_PRODUCTION_OPS)
    # 700 us GEMM + 200 us SDPA at the suite's own b1s128 element counts, of 1000 us.
    assert fit.score == pytest.approx(0.9)
    assert fit.layer_coverage == pytest.approx(0.9)
    by_layer = {x.layer_type: x for x in fit.layers}
    assert by_layer["gemm"].share == pytest.approx(0.7)
    assert by_layer["gemm"].suite_workloads == 2
    assert by_layer["unmapped"].covered_share == 0
    gemm_row = next(r for r in fit.rows if r.layer_type == "gemm")
    # [1, 128, 768] = 98,304 elements: the 1e4-1e5 decade.
    assert gemm_row.band == "1e4-1e5 elements"
    assert gemm_row.workloads == ("gemm.toy-ffn-up.b1s128.bf16",)
    assert fit.outside == ()


def test_shape_far_from_every_workload_is_listed_outside(tmp_path):
    ops = [
        ("aten::linear", 1000, 300, [[1, 128, 768], [3072, 768], [3072]]),
        # 8 x 4096 x 4096 = 134,217,728 elements; the largest suite GEMM input is
        # [2048, 768] = 1,572,864: 85.3x, beyond the 4x window.
        ("aten::linear", 2000, 700, [[8, 4096, 4096], [4096, 4096], [4096]]),
    ]
    fit = _fit(tmp_path, ops)
    assert fit.score == pytest.approx(0.3)
    assert fit.layer_coverage == pytest.approx(1.0)
    (outside,) = fit.outside
    assert outside.dims == [[8, 4096, 4096], [4096, 4096], [4096]]
    assert outside.share == pytest.approx(0.7)
    assert outside.nearest_workload == "gemm.toy-ffn-up.b4s512.bf16"
    assert outside.nearest_ratio == pytest.approx(134_217_728 / 1_572_864)


def test_window_edge_is_inclusive(tmp_path):
    # [512, 768] = 393,216 elements is exactly 4x the b1s128 input (98,304) and exactly a
    # quarter of the b4s512 input: covered with factor 4, not with factor 3.9.
    ops = [("aten::linear", 1000, 100, [[512, 768], [3072, 768], [3072]])]
    assert _fit(tmp_path, ops).score == pytest.approx(1.0)
    assert _fit(tmp_path, ops, factor=3.9).score == 0


def test_trace_without_shapes_covers_layer_types_only(tmp_path):
    ops = [(name, ts, dur, []) for name, ts, dur, _ in TOY_PRODUCTION_OPS]
    fit = _fit(tmp_path, ops)
    assert fit.score == 0
    assert fit.layer_coverage == pytest.approx(0.9)
    bands = {(r.layer_type, r.band) for r in fit.rows}
    assert ("gemm", "shape not recorded") in bands


def test_device_time_is_split_by_host_shape_time(tmp_path):
    # GPU trace: 600 us of GEMM kernels and 400 us of flash attention on the device. On the
    # host, aten::linear ran at a covered shape for 10 us and at an uncovered one for 30 us,
    # so the GEMM's 60% of device time splits 1:3 -> 15% covered. Attention at the suite's
    # shape covers its 40%. Score 0.15 + 0.40 = 0.55.
    def op(name, ts, dur, dims):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
                "dur": dur, "args": {"Input Dims": dims}}  # fmt: skip

    def kernel(name, ts, dur):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts,
                "dur": dur, "args": {"device": 0, "stream": 7}}  # fmt: skip

    events = [
        op("aten::linear", 100, 10, [[128, 768], [3072, 768]]),
        op("aten::linear", 200, 30, [[8, 4096, 4096], [4096, 4096]]),
        op("aten::scaled_dot_product_attention", 300, 20, [[1, 12, 128, 64]]),
        kernel("ampere_sgemm_128x64_tn", 1000, 600),
        kernel("flash_fwd_kernel", 2000, 400),
    ]
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps({"traceEvents": events}))
    doc = summarise([path], load_layer_map())
    assert doc["traces"][0]["time_basis"] == "device"
    fit = fitmatrix.build(doc["traces"], _run(tmp_path), FACTOR)
    assert fit.score == pytest.approx(0.55)
    assert fit.time_basis == "device"


def _check(tmp_path, review):
    path = write_review(tmp_path, review)
    report = run_check(path)
    return next(f for f in report.findings if f.item.id == "production-shape")


def test_check_passes_with_a_covering_trace(tmp_path):
    finding = _check(tmp_path, complete_review())
    assert finding.status == "pass"
    assert "90.0% of production time" in finding.summary
    labels = [e.label for e in finding.evidence]
    assert "production trace summary" in labels


def test_check_fails_below_the_threshold(tmp_path):
    review = complete_review()
    path = write_review(tmp_path, review)
    ops = [
        ("aten::linear", 1000, 300, [[1, 128, 768], [3072, 768], [3072]]),
        ("aten::linear", 2000, 700, [[8, 4096, 4096], [4096, 4096], [4096]]),
    ]
    summary = trace_summary_doc(tmp_path / "evidence", ops)
    (tmp_path / "evidence" / "trace_summary.json").write_text(json.dumps(summary))
    finding = next(f for f in run_check(path).findings if f.item.id == "production-shape")
    assert finding.status == "fail"
    assert "30.0% of production time" in finding.summary
    assert "threshold 50.0%" in finding.summary
    outside = [e for e in finding.evidence if e.label.startswith("production shape outside")]
    assert outside and "85.3x its elements" in outside[0].value


def test_check_refuses_a_file_that_is_not_a_trace_summary(tmp_path):
    review = complete_review()
    review["evidence"]["production_traces"] = ["evidence/trace.json"]  # {"note": ...}
    finding = _check(tmp_path, review)
    assert finding.status == "fail"
    assert "evidence/trace.json: not used" in finding.summary
    assert "reviewkit trace import" in finding.summary


def test_model_workload_alone_no_longer_clears_the_flag(tmp_path):
    review = complete_review()
    del review["evidence"]["production_traces"]
    finding = _check(tmp_path, review)
    assert finding.status == "fail"
    assert "model.toy-decoder.b1s256.bf16" in finding.summary
    assert "synthetic" in finding.summary


def test_rubric_threshold_is_the_policy(tmp_path):
    rubric_text = load_default_rubric_text().replace("min_coverage = 0.5", "min_coverage = 0.95")
    rubric = tmp_path / "strict.toml"
    rubric.write_text(rubric_text)
    path = write_review(tmp_path / "review", complete_review())
    report = run_check(path, rubric_path=rubric)
    finding = next(f for f in report.findings if f.item.id == "production-shape")
    assert finding.status == "fail"
    assert "threshold 95.0%" in finding.summary


def load_default_rubric_text():
    from reviewkit.review.rubric import DEFAULT_RUBRIC

    text = DEFAULT_RUBRIC.read_text()
    assert "min_coverage = 0.5" in text
    return text


def test_a_damaged_trace_summary_is_not_used_and_said_so(tmp_path):
    path = write_review(tmp_path, complete_review())
    summary_path = tmp_path / "evidence" / "trace_summary.json"
    doc = json.loads(summary_path.read_text())
    del doc["traces"][0]["op_mix"]  # the right kind and schema, but a body that does not add up
    summary_path.write_text(json.dumps(doc))
    finding = next(f for f in run_check(path).findings if f.item.id == "production-shape")
    assert finding.status == "fail"
    # the one note the gate and the packet share (review/cited.py): the file, the trace, why
    assert ("evidence/trace_summary.json: production-trace.json: not used: a damaged trace "
            "(KeyError") in finding.summary  # fmt: skip


def test_an_op_on_an_empty_tensor_is_kept_apart(tmp_path):
    # A [0, 768] input has no size on a log scale: its 100 us are neither matched nor lost.
    ops = [
        ("aten::linear", 1000, 300, [[1, 128, 768], [3072, 768], [3072]]),
        ("aten::linear", 2000, 100, [[0, 768], [3072, 768], [3072]]),
    ]
    fit = _fit(tmp_path, ops)
    assert fit.score == pytest.approx(0.75)
    empty = next(r for r in fit.rows if r.band == fitmatrix.EMPTY_TENSOR)
    assert empty.share == pytest.approx(0.25) and empty.covered_share == 0


def test_the_same_trace_cited_twice_counts_once(tmp_path):
    review = complete_review()
    path = write_review(tmp_path, review)
    evidence = tmp_path / "evidence"
    # A copy of the toy summary (same trace, same sha256) and a second rank whose 1000 us run
    # at a shape 85x the largest suite GEMM. Counted once: 900 covered of 2000 us = 45%, under
    # the 50% threshold; counted twice it would read 1800 of 3000 = 60% and pass.
    (evidence / "again.json").write_text((evidence / "trace_summary.json").read_text())
    other = tmp_path / "rank1"
    other.mkdir()
    far = [("aten::linear", 1000, 1000, [[8, 4096, 4096], [4096, 4096], [4096]])]
    (evidence / "rank1.json").write_text(json.dumps(trace_summary_doc(other, far)))
    text = path.read_text().replace(
        'production_traces = ["evidence/trace_summary.json"]',
        'production_traces = ["evidence/trace_summary.json", "evidence/again.json", '
        '"evidence/rank1.json"]',
    )
    path.write_text(text)
    finding = next(f for f in run_check(path).findings if f.item.id == "production-shape")
    assert "45.0% of production time" in finding.summary
    assert finding.status == "fail"
