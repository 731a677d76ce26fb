"""A mapped workload's MFU against the ceiling of the dtype its GEMMs multiply in, on its dense
FLOPs; a sparse kernel's own rate beside it; an fp8 workload on a CPU without a ceiling."""

from __future__ import annotations

import pytest

from reviewkit.analysis.roofline import analyse_run
from reviewkit.analysis.weights import kernel_rate, weights_lines
from reviewkit.bundle.records import Run, Workload

FP32_PEAK, INT8_PEAK = 1e11, 4e11  # 100 GFLOP/s, 400 GOP/s
NO_FP8 = "no fp8 matrix units on a cpu device (torch emulates fp8 GEMMs there): no fp8 ceiling"


def weights(**kw) -> dict:
    return {"sparsity": "dense", "quantization": "none", "compute_dtype": "fp32",
            "kernel": "test", "linears_mapped": 1, "linears_not_mapped": 0,
            "mapped_weight_elements": 768 * 3072, "mapped_flops": 2e9, **kw}  # fmt: skip


def workload(wid: str, median_s: float, mapped: dict | None) -> dict:
    doc = {"id": wid, "layer_type": "gemm", "kernel": "linear", "dtype": "fp32",
           "status": "ok", "samples_s": [median_s] * 9, "flops": 2e9, "matmul_flops": 2e9,
           "bytes": 1e7}  # fmt: skip
    if mapped is not None:
        doc["weights"] = mapped
    return doc


def run(*workloads: dict) -> Run:
    return Run.from_json({
        "suite": {"name": "reviewkit-core", "version": "1.1", "hash": "h"},
        "environment": {}, "knobs": {"dtypes": ["fp32"]},
        "ceilings": {"compute": {
            "fp32": {"peak": FP32_PEAK, "source": "measured"},
            "int8": {"peak": INT8_PEAK, "source": "measured"},
            "fp8": {"peak": None, "source": "not available", "reason": NO_FP8},
        }, "bandwidth": {"peak": 1e12, "source": "measured"}},
        "workloads": list(workloads),
    })  # fmt: skip


def test_an_int8_dynamic_workload_divides_by_the_int8_ceiling():
    analysed = analyse_run(run(
        workload("dense", 0.04, None),
        workload("int8", 0.01, weights(quantization="int8-dynamic", compute_dtype="int8")),
    ))  # fmt: skip
    dense, int8 = analysed.workloads
    # by hand: 2e9 FLOPs in 0.04 s is 50 GFLOP/s, half the 100 GFLOP/s fp32 peak
    assert dense.mfu == pytest.approx(0.5)
    # 2e9 operations in 0.01 s is 200 GOP/s: half the 400 GOP/s int8 peak (on fp32's it would
    # read 200%, and raise the fp32 ceiling)
    assert int8.mfu == pytest.approx(0.5)
    assert analysed.ceilings["compute"]["fp32"]["peak"] == FP32_PEAK
    assert "MFU 50.0% of the int8 ceiling" in weights_lines(analysed)[0]


def test_a_workload_quantized_in_part_divides_by_the_blend_of_its_two_ceilings():
    # 2e9 FLOPs of which 1.5e9 are mapped to int8 (an encoder layer's FFN) and 0.5e9 stay fp32
    # (its attention projections): at their own peaks they take 1.5e9 / 4e11 + 0.5e9 / 1e11 =
    # 3.75 ms + 5 ms = 8.75 ms, a blended peak of 2e9 / 8.75e-3 = 228.6 GFLOP/s. In 17.5 ms the
    # workload runs at 114.3 GFLOP/s: MFU 0.5 (on the int8 peak alone it would read 0.286)
    partial = weights(quantization="int8-dynamic", compute_dtype="int8", mapped_flops=1.5e9,
                      linears_not_mapped=2)  # fmt: skip
    (w,) = analyse_run(run(workload("part", 0.0175, partial))).workloads
    assert w.mfu == pytest.approx(0.5)
    assert w.compute_time_s == pytest.approx(8.75e-3)
    line = weights_lines(analyse_run(run(workload("part", 0.0175, partial))))[0]
    assert "MFU 50.0% of the int8 and fp32 ceilings blended (75.0% of its FLOPs in int8)" in line


def test_an_fp8_workload_on_a_cpu_has_no_ceiling_and_says_why():
    analysed = analyse_run(run(
        workload("fp8", 0.01, weights(quantization="fp8", compute_dtype="fp8",
                                      emulated="no fp8 matrix units: emulated")),
    ))  # fmt: skip
    (w,) = analysed.workloads
    assert w.mfu is None and "no-ceiling" in w.flags  # never fp32's peak borrowed
    (line,) = weights_lines(analysed)
    assert f"no fp8 ceiling, so no MFU ({NO_FP8})" in line and "emulated" in line


def test_a_sparse_workload_counts_dense_flops_and_shows_its_own_rate():
    sparse = weights(sparsity="unstructured-90", density=0.1)
    analysed = analyse_run(run(workload("sparse", 0.01, sparse)))
    (w,) = analysed.workloads
    # MFU on the dense 2e9 FLOPs: 200 GFLOP/s over the 100 GFLOP/s peak, 200% ...
    assert w.mfu == pytest.approx(2.0)
    # ... and the kernel's own: 2e9 x 0.1 FLOPs in 0.01 s = 20 GFLOP/s
    assert kernel_rate(w) == pytest.approx(2e10)
    # its dense-FLOP rate is arithmetic it did not do: no ceiling is raised by it
    assert analysed.ceilings["compute"]["fp32"]["peak"] == FP32_PEAK
    (line,) = weights_lines(analysed)
    assert "density 0.100" in line and "own rate 20 GFLOP/s" in line


def test_a_composite_scales_only_its_mapped_linears_flops():
    # an MLP block of 5e9 FLOPs whose two linears do 4e9 of them, kept at density 0.25:
    # 5e9 - 4e9 x 0.75 = 2e9 FLOPs, in 0.02 s: 100 GFLOP/s
    doc = workload("block", 0.02, weights(sparsity="unstructured-75", density=0.25,
                                          mapped_flops=4e9))  # fmt: skip
    doc.update(flops=5e9, layer_type="block", kernel="mlp_block")
    (w,) = analyse_run(run(doc)).workloads
    assert kernel_rate(w) == pytest.approx(1e11)


def test_the_weights_table_round_trips_and_names_the_compute_dtype():
    doc = workload("int8", 0.01, weights(quantization="int8-dynamic", compute_dtype="int8"))
    w = Workload.from_json(doc)
    assert w.weights == doc["weights"] and w.compute_dtype == "int8" and w.density is None
    assert w.to_json() == doc
    assert Workload.from_json(workload("plain", 0.01, None)).compute_dtype == "fp32"
