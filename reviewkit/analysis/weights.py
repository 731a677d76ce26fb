"""What a run's sparsity and quantization knobs did to its workloads, in words: each mapped
workload's compute dtype, the ceiling its MFU divides by, and a sparse kernel's own rate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reviewkit.common.format import pct

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun, AnalysedWorkload


def kernel_flops(w: AnalysedWorkload) -> float | None:
    """The FLOPs a sparse workload's kernels do: its dense FLOPs with the mapped linears' matmul
    FLOPs scaled by the density their weights keep (None: not sparse). For the linear kernel,
    whose FLOPs are all its one matmul's, it is dense FLOPs x density."""
    weights = w.weights or {}
    density, mapped = weights.get("density"), weights.get("mapped_flops")
    if density is None or mapped is None:
        return None
    return w.flops - mapped * (1 - density)


def kernel_rate(w: AnalysedWorkload) -> float | None:
    """A sparse workload's own rate: kernel_flops / median time (None: not sparse, or not
    measured)."""
    flops = kernel_flops(w)
    return flops / w.p50_s if flops is not None and w.p50_s else None


def _rate(x: float, dtype: str) -> str:
    # an integer GEMM counts operations, not floating-point ones
    return f"{x / 1e9:,.4g} {'GOP/s' if dtype == 'int8' else 'GFLOP/s'}"


def _mfu_text(w: AnalysedWorkload, ceilings: Mapping[str, Any]) -> str:
    dtype = w.compute_dtype
    mapped = (w.weights or {}).get("mapped_flops")
    if w.mfu is not None and dtype != w.dtype and mapped is not None and 0 < mapped < w.flops:
        # roofline.blended_peak: each part of the FLOPs at its own dtype's ceiling
        return (f"MFU {pct(w.mfu)} of the {dtype} and {w.dtype} ceilings blended "
                f"({pct(mapped / w.flops)} of its FLOPs in {dtype}), on the dense FLOPs")
    if w.mfu is not None:
        return f"MFU {pct(w.mfu)} of the {dtype} ceiling, on the dense FLOPs"
    if not w.measured:
        return f"not measured ({w.status})"
    entry = (ceilings.get("compute") or {}).get(dtype) or {}
    why = entry.get("reason") or entry.get("measured_method") or "the run has none"
    return f"no {dtype} ceiling, so no MFU ({why})"


def workload_line(w: AnalysedWorkload, ceilings: Mapping[str, Any]) -> str:
    """One mapped workload: what its weights became, how it multiplies and what its MFU is
    against."""
    m = w.weights or {}
    knob = (f"sparsity={m.get('sparsity')}" if m.get("sparsity") not in (None, "dense")
            else f"quantization={m.get('quantization')}")  # fmt: skip
    parts = [f"{w.id}: {knob}, computes in {w.compute_dtype} ({m.get('kernel')})",
             _mfu_text(w, ceilings)]  # fmt: skip
    if w.density is not None:
        parts.append(f"density {w.density:.3f}")
        rate = kernel_rate(w)
        if rate is not None:
            parts.append(f"the kernel's own rate {_rate(rate, w.compute_dtype)} (its FLOPs with "
                         "the mapped linears' at their density, over the median time)")  # fmt: skip
    parts.append(f"{m.get('linears_mapped')} linear(s) mapped")
    if m.get("linears_not_mapped"):
        parts.append(f"{m['linears_not_mapped']} left dense ({m.get('not_mapped_reason')})")
    if m.get("emulated"):
        parts.append(f"emulated: {m['emulated']}")
    return "; ".join(parts)


def weights_lines(run: AnalysedRun) -> list[str]:
    """A line per workload whose weights a knob mapped (none when no knob did)."""
    return [workload_line(w, run.ceilings or {}) for w in run.workloads if w.weights]
