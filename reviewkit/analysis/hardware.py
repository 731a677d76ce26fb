"""Missing hardware support in one line: a dtype whose ceiling shows the device emulates it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reviewkit.bundle.records import Run

# A lower-precision GEMM ceiling under half of fp32's means the dtype gets no hardware support
# worth the name: where the ISA has it, bf16 GEMM runs at about 2x fp32 on these CPUs; where
# it is emulated (converted to fp32 and back) 0.15-0.25x (measured on this project's machines).
FAR_BELOW_FP32 = 0.5
# The fingerprint's features that give a dtype native arithmetic, and how a message names
# the ones missing.
NATIVE = {
    "bf16": ("AVX-512 BF16", "AMX BF16", "BF16"),
    "fp16": ("AVX-512 FP16", "AMX FP16"),
}
MISSING = {"bf16": "AVX-512 BF16 or AMX", "fp16": "AVX-512 FP16 or AMX-FP16"}


def _peak(run: Run, dtype: str) -> float | None:
    entry = ((run.ceilings or {}).get("compute") or {}).get(dtype) or {}
    return entry.get("peak")


def support_notes(run: Run) -> list[str]:
    """One sentence per lower-precision dtype whose GEMM ceiling is far below fp32's on this
    device, saying why where the device fingerprint tells: emulated (the ISA lacks it), or
    present in the ISA but not reached by the kernels. Only the dtypes the run measured
    (`knobs.dtypes`, where recorded): a profile may hold more, and a bf16 run told that fp16
    is emulated is told about a change nobody made."""
    fp32 = _peak(run, "fp32")
    if not fp32:
        return []
    facts = run.fingerprint.get("facts") or {}
    cpu = facts.get("kind") == "cpu"
    features = set(facts.get("features") or ())
    notes = []
    measured = (run.knobs or {}).get("dtypes")
    for dtype in ("bf16", "fp16"):
        if isinstance(measured, list) and dtype not in measured:
            continue
        peak = _peak(run, dtype)
        if not peak or peak / fp32 >= FAR_BELOW_FP32:
            continue
        ratio = f"{dtype} GEMM ceiling {peak / fp32:.2g}x fp32"
        if not facts:
            notes.append(f"{ratio} on this device (the run records no fingerprint to say why)")
        elif not cpu:
            notes.append(f"{ratio} on this device")
        elif not features & set(NATIVE[dtype]):
            notes.append(f"{dtype} is emulated on this CPU (no {MISSING[dtype]}): {ratio}")
        else:
            have = ", ".join(sorted(features & set(NATIVE[dtype])))
            notes.append(f"{ratio} although this CPU has {have}: the kernels do not reach it")
    return notes
