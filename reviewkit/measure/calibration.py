"""Ceilings measured on this device: the best square-GEMM rate per dtype and the copy bandwidth."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from reviewkit.measure.device import device_name, device_timed, first_line
from reviewkit.measure.timing import SamplingPolicy, collect_samples
from reviewkit.suite import ceilings, kernels

# Calibration: square GEMM sizes tried per profile (largest that fits the budget wins), and
# the copy buffer size, large enough to spill every cache level of the machines we target.
GEMM_SIZES = {
    "smoke": (128, 256, 512),
    "quick": (256, 384, 512, 768, 1024, 1536, 2048),
    "full": (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096),
}
GPU_GEMM_SIZES = (2048, 4096, 8192)
COPY_BYTES = {"smoke": 32 << 20, "quick": 256 << 20, "full": 512 << 20}
GPU_COPY_BYTES = 1 << 30
# Enough warm-up to reach steady clocks and packed-weight caches, enough samples for a stable
# median; a slow path stops at the budget after a few calls.
CALIBRATION_POLICY = SamplingPolicy(
    warmup_calls=2, warmup_s=0.05, min_samples=5, min_time_s=0.1, max_samples=50, budget_s=2.0
)


def _median(samples: Sequence[float]) -> float:
    s = sorted(samples)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


# Both operand layouts: torch.mm(a, b) ("nn") and torch.mm(a, b.t()) ("nt", what nn.Linear
# runs). Some stacks have a slow path in one layout only (fp16 "nn" on this CPU runs ~10x
# slower than "nt"), and the ceiling is the best the device reaches, not the worst.
GEMM_LAYOUTS = ("nn", "nt")


def gemm_rate(
    n: int,
    dtype: str,
    device: torch.device,
    layout: str = "nn",
    policy: SamplingPolicy = CALIBRATION_POLICY,
) -> float:
    """Median FLOP/s of an n x n x n matmul in the given operand layout."""
    gen = torch.Generator().manual_seed(kernels.INPUT_SEED)
    tdt = kernels.TORCH_DTYPES[dtype]
    a = torch.randn(n, n, generator=gen).to(device=device, dtype=tdt)
    b = torch.randn(n, n, generator=gen).to(device=device, dtype=tdt)
    bt = b.t() if layout == "nt" else b
    with torch.inference_mode():
        result = collect_samples(device_timed(lambda: torch.mm(a, bt), device), policy)
    samples = result.samples_s or result.warmup_samples_s
    return 2 * n**3 / _median(samples)


def calibrate_compute(dtype: str, device: torch.device, profile: str) -> tuple[float | None, str]:
    """Best median rate over a sweep of square GEMMs in each layout.

    A layout stops growing once its own rate predicts that the next size's calls would not
    fit the calibration budget: a slow path is confirmed at small sizes, not waited out.
    """
    sizes = GPU_GEMM_SIZES if device.type != "cpu" else GEMM_SIZES[profile]
    calls = CALIBRATION_POLICY.warmup_calls + CALIBRATION_POLICY.min_samples
    best, best_at = None, None
    layout_rate: dict[str, float] = {}
    stopped: list[str] = []
    for n in sizes:
        for layout in GEMM_LAYOUTS:
            if layout in stopped:
                continue
            if layout in layout_rate and 2 * n**3 / layout_rate[layout] * calls > (
                CALIBRATION_POLICY.budget_s
            ):
                stopped.append(layout)
                continue
            try:
                rate = gemm_rate(n, dtype, device, layout)
            except (RuntimeError, NotImplementedError) as exc:
                return best, f"square GEMM sweep stopped at n={n} ({layout}): {first_line(exc)}"
            layout_rate[layout] = max(rate, layout_rate.get(layout, 0.0))
            if best is None or rate > best:
                best, best_at = rate, f"n={n}, layout {layout}"
    method = (
        f"best median rate of torch.mm over square sizes {list(sizes)} in layouts "
        f"{'/'.join(GEMM_LAYOUTS)}; best at {best_at}"
    )
    if stopped:
        method += f"; layout {'/'.join(stopped)} stopped early (too slow for the budget)"
    return best, method


def copy_rate(
    nbytes: int, device: torch.device, policy: SamplingPolicy = CALIBRATION_POLICY
) -> float:
    """Median bytes/s of a large copy, counting bytes read plus bytes written."""
    n = nbytes // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    with torch.inference_mode():
        result = collect_samples(device_timed(lambda: dst.copy_(src), device), policy)
    return 2 * nbytes / _median(result.samples_s or result.warmup_samples_s)


def calibrate(device: torch.device, dtypes: Sequence[str], profile: str) -> dict:
    entry = ceilings.lookup(device_name(device)) if device.type != "cpu" else None
    compute = {}
    for dtype in dtypes:
        measured, method = calibrate_compute(dtype, device, profile)
        compute[dtype] = ceilings.choose(
            measured,
            method,
            entry.peak_flops_per_s.get(dtype) if entry else None,
            entry.reference if entry else "",
        ).to_json()
    nbytes = GPU_COPY_BYTES if device.type != "cpu" else COPY_BYTES[profile]
    try:
        bw = copy_rate(nbytes, device)
        bw_method = f"median of tensor.copy_ over {nbytes >> 20} MiB, bytes read + written"
    except RuntimeError as exc:
        bw, bw_method = None, f"copy calibration failed: {first_line(exc)}"
    bandwidth = ceilings.choose(
        bw, bw_method, entry.peak_bytes_per_s if entry else None, entry.reference if entry else ""
    ).to_json()
    return {
        "compute": compute,
        "bandwidth": bandwidth,
        "datasheet_entry": entry.name if entry else None,
    }
