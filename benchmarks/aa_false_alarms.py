"""Benchmark 10: A/A false alarms, a known effect and an injected slowdown, before and after rounds.

An A/A comparison (the same settings twice) must say "no difference". This measures, on this
machine, how often it does not:

1. separate processes: consecutive `reviewkit run --profile P --dtype fp32 --only SUBSET` runs
   compared pairwise, with one window per workload and no margin (`--rounds 1`, the behaviour
   before rounds) and with the profile's rounds and the default rubric's margin (after);
2. interleaved: `reviewkit ab` with the same mapping on both sides;
3. a known effect: `ab --baseline threads=1 --candidate threads=2` on the gemm workloads;
4. an injected 10% slowdown: `ab` in-process with the candidate's calls followed by a busy
   wait of 10% of their median (the seam `ab(..., candidate_wrap=...)`, which no command has).

For each pair: workloads called faster or slower (directional), and whether
`compare --fail-on-regression` would fire. Targets (issue 14): directional verdicts <= 5% of
the workloads per A/A pair; the gate silent in >= 19 of 20 pairs; threads 1 -> 2 faster on
every gemm of 1 ms or more; the 10% slowdown found on >= 90% of the workloads.

    .venv/bin/python benchmarks/aa_false_alarms.py [--pairs 20] [--before-pairs 5]
        [--profile quick] [--only SUBSET] [--parts separate,interleaved,threads,slowdown]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reviewkit.analysis.compare import FASTER, SLOWER, STATISTICAL_ONLY, compare
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import load_run
from reviewkit.review.checks import CHECKS
from reviewkit.review.gate import margins_of
from reviewkit.review.rubric import load_rubric

# A fixed subset of the quick suite, one to three workloads per layer type, so 20 pairs fit in
# minutes on 2 cores: fast and slow, compute- and memory-bound, and the end-to-end model.
SUBSET = ",".join([
    "gemm.bert-base-ffn-up.b1s128.*", "gemm.bert-base-ffn-up.b1s512.*",
    "gemm.llama-3-8b-attn-q.b1s128.*", "gemm.bert-base-attn-scores-bmm.b1s512.*",
    "attention.gpt-2-small-sdpa-causal.b1s512.*", "attention.gpt-2-small-sdpa-full.b1s128.*",
    "conv.resnet-50-stage1-conv3x3.n1.*", "norm.bert-base-layernorm.512x768.*",
    "softmax.gpt-2-small-attn-softmax.1x12x512x512.*", "elementwise.bert-base-mlp-gelu.512x3072.*",
    "elementwise.llama-2-7b-residual-add.512x4096.*", "embedding.*",
    "block.gpt-2-small-mlp-block.t512.*", "model.gpt-2-small-decoder-2l.b1s64.*",
])  # fmt: skip
SLOWDOWN = 0.10


def _reviewkit(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "reviewkit", *args], check=True, capture_output=True)


def _verdicts(comp) -> tuple[int, int, bool]:
    """(directional workloads, compared workloads, gate fired)."""
    compared = [w for w in comp.workloads if w.median_ratio is not None]
    directional = sum(w.verdict in (FASTER, SLOWER) for w in compared)
    return directional, len(compared), bool(comp.p99_regressions)


def _line(name: str, rows: list[tuple[int, int, bool]], wall_s: float) -> dict:
    shares = [d / n for d, n, _ in rows if n]
    fired = sum(f for *_, f in rows)
    out = {
        "part": name,
        "pairs": len(rows),
        "workloads": rows[0][1] if rows else 0,
        "directional_mean_pct": 100 * statistics.mean(shares) if shares else None,
        "directional_max_pct": 100 * max(shares) if shares else None,
        "gate_fired": fired,
        "wall_s": round(wall_s, 1),
    }
    print(
        f"| {name} | {out['pairs']} | {out['workloads']} | {out['directional_mean_pct']:.1f}% | "
        f"{out['directional_max_pct']:.1f}% | {fired} of {len(rows)} | {wall_s:.0f} s |",
        flush=True,
    )
    return out


def separate(tmp: Path, pairs: int, rounds: int | None, profile: str, only: str, margins):
    started = time.perf_counter()
    docs = []
    for i in range(pairs + 1):
        out = tmp / f"sep-{rounds}-{i}"
        extra = ["--rounds", str(rounds)] if rounds else []
        _reviewkit("run", "--profile", profile, "--dtype", "fp32", "--only", only, "--out",
                   str(out), *extra)  # fmt: skip
        docs.append(analyse_run(load_run(out)))
    rows = [_verdicts(compare(a, b, margins=margins)) for a, b in itertools.pairwise(docs)]
    label = "separate runs, 1 round, no margin (before)" if rounds == 1 else (
        "separate runs, rounds, margin (after)")  # fmt: skip
    return _line(label, rows, time.perf_counter() - started)


def interleaved(tmp: Path, pairs: int, profile: str, only: str, margins):
    started = time.perf_counter()
    rows = []
    for i in range(pairs):
        out = tmp / f"aa-{i}"
        _reviewkit("ab", "--baseline", "", "--candidate", "", "--profile", profile, "--dtype",
                   "fp32", "--only", only, "--seed", str(i), "--out", str(out))  # fmt: skip
        comp = compare(analyse_run(load_run(out / "baseline")),
                       analyse_run(load_run(out / "candidate")), margins=margins)  # fmt: skip
        rows.append(_verdicts(comp))
    return _line("interleaved `ab` A/A (after)", rows, time.perf_counter() - started)


def threads(tmp: Path, profile: str, margins) -> dict:
    started = time.perf_counter()
    out = tmp / "threads"
    _reviewkit("ab", "--baseline", "threads=1", "--candidate", "threads=2", "--profile", profile,
               "--dtype", "fp32", "--only", "gemm.*", "--out", str(out))  # fmt: skip
    base = analyse_run(load_run(out / "baseline"))
    comp = compare(base, analyse_run(load_run(out / "candidate")), margins=margins)
    p50 = {w["id"]: (w.get("stats") or {}).get("p50_s") or 0.0 for w in base["workloads"]}
    big = [w for w in comp.workloads if p50.get(w.baseline_id, 0.0) >= 1e-3]
    found = sum(w.verdict == FASTER for w in big)
    print(f"| threads 1 -> 2, gemm >= 1 ms | {len(big)} | faster on {found} of {len(big)} | "
          f"{time.perf_counter() - started:.0f} s |", flush=True)  # fmt: skip
    return {"part": "threads", "gemm_over_1ms": len(big), "found_faster": found}


def slowdown(profile: str, only: str, margins) -> dict:
    from reviewkit.measure import ab as ab_mod

    def slower(fn):
        def call():  # each call followed by a busy wait of 10% of its own duration
            start = time.perf_counter()
            fn()
            end = time.perf_counter() + SLOWDOWN * (time.perf_counter() - start)
            while time.perf_counter() < end:  # measured work the baseline does not do
                pass

        return call

    started = time.perf_counter()
    request = ab_mod.AbRequest({}, {}, profile, "cpu", ("fp32",), only)
    base, cand, _ = ab_mod.ab(request, candidate_wrap=slower)
    comp = compare(analyse_run(base), analyse_run(cand), margins=margins)
    compared = [w for w in comp.workloads if w.median_ratio is not None]
    found = sum(w.verdict == SLOWER for w in compared)
    ratios = statistics.median(w.median_ratio for w in compared)
    print(f"| injected {SLOWDOWN:.0%} slowdown | {len(compared)} | slower on {found} of "
          f"{len(compared)} (median ratio {ratios:.3f}) | {time.perf_counter() - started:.0f} s |",
          flush=True)  # fmt: skip
    return {"part": "slowdown", "workloads": len(compared), "found_slower": found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--ab-pairs", type=int, default=10)
    parser.add_argument("--before-pairs", type=int, default=5)
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--only", default=SUBSET)
    parser.add_argument("--parts", default="separate,interleaved,threads,slowdown")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    margins = margins_of(load_rubric(None, CHECKS))
    print(
        "| part | pairs | workloads | directional (mean) | directional (max) | gate fired | wall |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if "separate" in parts:
            results.append(separate(tmp, args.before_pairs, 1, args.profile, args.only,
                                    STATISTICAL_ONLY))  # fmt: skip
            results.append(separate(tmp, args.pairs, None, args.profile, args.only, margins))
        if "interleaved" in parts:
            results.append(interleaved(tmp, args.ab_pairs, args.profile, args.only, margins))
        if "threads" in parts:
            results.append(threads(tmp, args.profile, margins))
        if "slowdown" in parts:
            results.append(slowdown(args.profile, args.only, margins))
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
