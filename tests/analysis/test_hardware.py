"""Missing hardware support said in one line, from the ceilings and the device fingerprint."""

from __future__ import annotations

from reviewkit.analysis.hardware import support_notes
from reviewkit.bundle.records import Run


def _run(doc):
    return Run.from_json({"suite": {}, "environment": {}, "knobs": {}, "workloads": [], **doc})


def _doc(bf16_peak, features, kind="cpu", fp16_peak=None):
    compute = {"fp32": {"peak": 200e9}, "bf16": {"peak": bf16_peak}}
    if fp16_peak:
        compute["fp16"] = {"peak": fp16_peak}
    facts = {"kind": kind, "features": features}
    return {"ceilings": {"compute": compute}, "environment": {"fingerprint": {"facts": facts}}}


def test_a_zen3_says_bf16_is_emulated():
    # Zen 3, AVX2 only: bf16 GEMM at 40 against 200 GFLOP/s, 0.2x fp32.
    assert support_notes(_run(_doc(40e9, ["AVX2"]))) == [
        "bf16 is emulated on this CPU (no AVX-512 BF16 or AMX): bf16 GEMM ceiling 0.2x fp32"
    ]


def test_a_cpu_with_bf16_says_nothing_when_it_is_fast_and_says_why_when_it_is_not():
    assert support_notes(_run(_doc(400e9, ["AVX2", "AVX-512", "AVX-512 BF16"]))) == []
    assert support_notes(_run(_doc(50e9, ["AVX-512", "AVX-512 BF16"]))) == [
        "bf16 GEMM ceiling 0.25x fp32 although this CPU has AVX-512 BF16: the kernels do not "
        "reach it"
    ]


def test_fp16_and_other_devices_and_missing_ceilings():
    notes = support_notes(_run(_doc(400e9, ["AVX-512 BF16"], fp16_peak=20e9)))
    assert notes == [
        "fp16 is emulated on this CPU (no AVX-512 FP16 or AMX-FP16): fp16 GEMM ceiling 0.1x fp32"
    ]
    assert support_notes(_run(_doc(40e9, [], kind="gpu"))) == [
        "bf16 GEMM ceiling 0.2x fp32 on this device"
    ]
    assert support_notes(_run({"ceilings": {}})) == []


def test_only_the_dtypes_the_run_measured():
    """Seen in the demo's claim: a fp32 -> bf16 review said fp16 is emulated, because the
    cached profile held an fp16 ceiling the bf16 run never used."""
    doc = _doc(400e9, ["AVX-512 BF16"], fp16_peak=20e9)
    assert support_notes(_run({**doc, "knobs": {"dtypes": ["bf16"]}})) == []
    assert support_notes(_run({**doc, "knobs": {"dtypes": ["fp32", "fp16"]}})) == [
        "fp16 is emulated on this CPU (no AVX-512 FP16 or AMX-FP16): fp16 GEMM ceiling 0.1x fp32"
    ]
