"""Benchmark 1: reviewkit's per-call median against torch.utils.benchmark's blocked_autorange.

Both timers measure the same callables, interleaved in one process at the same thread count,
several rounds each, so drift on a shared machine hits both alike. Target: median ratio
(reviewkit p50 / Timer median) within 0.95-1.05 on suite workloads of 1 ms or more.

    .venv/bin/python benchmarks/harness_vs_timer.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics

import torch
from torch.utils import benchmark as tb

from reviewkit.measure.device import device_timed
from reviewkit.measure.timing import collect_samples
from reviewkit.suite import kernels
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import suite_profile

WORKLOADS = [
    "gemm.bert-base-ffn-up.b1s512.fp32",
    "gemm.gpt-2-small-attn-qkv.b1s512.bf16",
    "attention.gpt-2-small-sdpa-full.b4s512.fp32",
    "conv.resnet-50-stage1-conv3x3.n1.fp32",
    "block.gpt-2-small-mlp-block.t512.fp32",
    "block.bert-base-encoder-layer.b1s128.bf16",
    "softmax.gpt-2-small-attn-softmax.1x12x512x512.fp32",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    threads = torch.get_num_threads()
    specs = {s.id: s for s in suite.workloads("quick")}
    device = torch.device("cpu")
    policy = suite_profile("quick").sampling
    rows = []
    for wid in WORKLOADS:
        fn = kernels.build(specs[wid], device)
        ours, theirs = [], []
        with torch.inference_mode():
            for _ in range(args.rounds):
                result = collect_samples(device_timed(fn, device), policy)
                ours.append(statistics.median(result.samples_s))
                timer = tb.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
                theirs.append(timer.blocked_autorange(min_run_time=policy.min_time_s).median)
        rows.append((wid, statistics.median(ours), statistics.median(theirs)))
    print(f"threads: {threads}; rounds: {args.rounds}; torch {torch.__version__}")
    print(f"{'workload':55s} {'reviewkit p50':>14s} {'Timer median':>13s} {'ratio':>7s}")
    ratios = []
    for wid, a, b in rows:
        ratios.append(a / b)
        print(f"{wid:55s} {a * 1e3:11.3f} ms {b * 1e3:10.3f} ms {a / b:7.3f}")
    print(f"median ratio: {statistics.median(ratios):.3f} (target 0.95-1.05)")


if __name__ == "__main__":
    main()
