"""Benchmark 3: the calibrated GEMM ceiling against a brute-force sweep of GEMM shapes.

The calibration times a handful of square sizes; the sweep tries many square and rectangular
shapes in both operand layouts and keeps the best rate, each shape rated as a calibration
trial is (its fastest of ten calls). Target: calibrated >= 95% of the sweep's best.

    .venv/bin/python benchmarks/ceiling_vs_sweep.py [--profile quick] [--dtype fp32,bf16]
"""

from __future__ import annotations

import argparse

import torch

from reviewkit.measure.calibration import TRIAL_POLICY, calibrate
from reviewkit.measure.device import device_timed
from reviewkit.measure.fingerprint import cache_sizes
from reviewkit.measure.timing import collect_samples
from reviewkit.suite import kernels

SQUARE = (128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072)
MAX_CALL_S = 0.3
RECTANGULAR = (
    (512, 4096, 4096),
    (2048, 768, 3072),
    (128, 4096, 11008),
    (4096, 1024, 1024),
    (1024, 4096, 1024),
    (256, 2048, 8192),
)


def rate(m: int, k: int, n: int, dtype: str, layout: str) -> float:
    tdt = kernels.TORCH_DTYPES[dtype]
    a = torch.randn(m, k).to(tdt)
    b = torch.randn(k, n).to(tdt) if layout == "nn" else torch.randn(n, k).to(tdt).t()
    with torch.inference_mode():
        result = collect_samples(
            device_timed(lambda: torch.mm(a, b), torch.device("cpu")), TRIAL_POLICY
        )
    return 2 * m * k * n / min(result.samples_s or result.warmup_samples_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--dtype", default="fp32,bf16")
    args = parser.parse_args()
    print(f"threads: {torch.get_num_threads()}; torch {torch.__version__}")
    print(f"{'dtype':6s} {'calibrated':>12s} {'sweep best':>12s} {'best shape':>26s} {'ratio':>7s}")
    for dtype in args.dtype.split(","):
        profile = calibrate(torch.device("cpu"), [dtype], args.profile, cache_sizes())
        calibrated = profile["compute"][dtype]["peak"]
        shapes = [(s, s, s) for s in SQUARE] + list(RECTANGULAR)
        best, where = 0.0, ""
        # A slow layout (fp16 "nn" on some CPUs) would take minutes at large shapes: skip
        # shapes whose call would exceed MAX_CALL_S at that layout's small-size rate.
        probe = {layout: rate(256, 256, 256, dtype, layout) for layout in ("nn", "nt")}
        for m, k, n in shapes:
            for layout in ("nn", "nt"):
                if 2 * m * k * n / probe[layout] > MAX_CALL_S:
                    continue
                r = rate(m, k, n, dtype, layout)
                if r > best:
                    best, where = r, f"{m}x{k}x{n} {layout}"
        print(
            f"{dtype:6s} {calibrated / 1e9:8.1f} GF/s {best / 1e9:8.1f} GF/s {where:>26s} "
            f"{calibrated / best:7.3f}"
        )
    print("target: ratio >= 0.95")


if __name__ == "__main__":
    main()
