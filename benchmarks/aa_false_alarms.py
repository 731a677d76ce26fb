"""Benchmark 10: A/A false alarms, a known effect and an injected slowdown, before and after rounds.

An A/A comparison (the same settings twice) must say "no difference". This measures, on this
machine, how often it does not:

1. separate processes: consecutive `reviewkit run --profile P --dtype fp32 --only SUBSET` runs
   compared pairwise, with one window per workload and no margin (`--rounds 1`, the behaviour
   before rounds), and with the profile's rounds and the default rubric's margin: without a
   run-to-run allowance, with the rubric's `run_to_run_sd` on every run (issue 14), and with
   each run's recorded per-device figure (issue 30: what `compare` does, the figure
   `reviewkit calibrate --run-to-run` measured for this device, never below the rubric's
   floor; the rubric's default where a run recorded none). From the same runs, the machine's
   run-to-run standard deviation (analysis.run_to_run.estimate, the estimator `calibrate
   --run-to-run` uses: stats.run_to_run_variance pooled over the workloads);
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
        [--keep DIR]  (keep the run bundles there; `--reuse` reads them back instead of running)

Leave the machine otherwise idle: another process on two cores is exactly the neighbour whose
effect this measures, and a test suite run beside it roughly doubled a run's spread.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reviewkit.analysis import run_to_run
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
        # The per-pair target: at most 5% of a pair's workloads called faster or slower.
        "pairs_over_5pct": sum(share > 0.05 for share in shares),
        "gate_fired": fired,
        "wall_s": round(wall_s, 1),
    }
    print(
        f"| {name} | {out['pairs']} | {out['workloads']} | {out['directional_mean_pct']:.1f}% | "
        f"{out['directional_max_pct']:.1f}% | {out['pairs_over_5pct']} of {len(rows)} | "
        f"{fired} of {len(rows)} | {wall_s:.0f} s |",
        flush=True,
    )
    return out


def _separate_runs(tmp: Path, count: int, rounds: int | None, profile: str, only: str,
                   reuse: bool) -> list[dict]:  # fmt: skip
    docs = []
    for i in range(count):
        out = tmp / f"sep-{rounds}-{i}"
        if not reuse:
            extra = ["--rounds", str(rounds)] if rounds else []
            _reviewkit("run", "--profile", profile, "--dtype", "fp32", "--only", only, "--out",
                       str(out), *extra)  # fmt: skip
        docs.append(analyse_run(load_run(out)))
    return docs


def run_to_run_sd(docs: list[dict]) -> tuple[float, dict[str, float]]:
    """The pooled run-to-run standard deviation and each workload's, by the estimator
    `calibrate --run-to-run` uses: the variance of a workload's log median across the runs,
    less what each run's own rounds show, pooled over the workloads (weighted by runs - 1: the
    root mean square when every workload ran in every run)."""
    observations = [run_to_run.observation(d, str(i), "benchmark")[0] for i, d in enumerate(docs)]
    try:
        est = run_to_run.estimate(observations)
    except ValueError:
        return 0.0, {}
    return est.sd, dict(est.per_workload_sd)


def recorded_figures(docs: list[dict]) -> str:
    """What the runs recorded as their device's figure (they ran after `calibrate
    --run-to-run`, or recorded none)."""
    sds = sorted({round((d.get("run_to_run") or {}).get("sd", -1), 4) for d in docs})
    none = sum(not (d.get("run_to_run") or {}).get("available") for d in docs)
    shown = ", ".join(f"{s:g}" for s in sds if s >= 0) or "none"
    return f"recorded figure(s) {shown}" + (f", {none} run(s) with none" if none else "")


def separate(tmp: Path, pairs: int, rounds: int | None, profile: str, only: str, margins,
             reuse: bool = False) -> list[dict]:  # fmt: skip
    started = time.perf_counter()
    docs = _separate_runs(tmp, pairs + 1, rounds, profile, only, reuse)
    wall_s = time.perf_counter() - started
    if rounds == 1:
        rows = [_verdicts(compare(a, b, margins=margins)) for a, b in itertools.pairwise(docs)]
        return [_line("separate runs, 1 round, no margin (before)", rows, wall_s)]
    pooled, each = run_to_run_sd(docs)
    spread = f"{min(each.values()):.3f}-{max(each.values()):.3f}" if each else "-"
    print(
        f"run-to-run sd over these {len(docs)} runs: {pooled:.3f} pooled (per workload "
        f"{spread}); the rubric's run_to_run_sd is {margins.run_to_run_sd:g} (floor "
        f"{margins.run_to_run_sd_floor:g}); the runs' {recorded_figures(docs)}",
        flush=True,
    )
    out = []
    for label, m in (
        ("margin, no run-to-run allowance",
         dataclasses.replace(margins, run_to_run_sd=0.0, run_to_run_per_device=False)),
        (f"margin and run_to_run_sd = {margins.run_to_run_sd:g} on every run",
         dataclasses.replace(margins, run_to_run_per_device=False)),
        ("margin and each run's recorded per-device figure", margins),
    ):  # fmt: skip
        pairs = [compare(a, b, margins=m) for a, b in itertools.pairwise(docs)]
        if pairs and pairs[0].run_to_run and m.run_to_run_per_device:
            print(f"allowance from: {pairs[0].run_to_run.short()}", flush=True)
        rows = [_verdicts(c) for c in pairs]
        out.append(_line(f"separate runs, rounds, {label}", rows, wall_s))
    out.append({"part": "run_to_run_sd", "pooled": pooled, "per_workload": each})
    return out


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
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep the separate runs' bundles in this folder"
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="read the separate runs back from --keep instead of running them",
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    margins = margins_of(load_rubric(None, CHECKS))
    print(
        "| part | pairs | workloads | directional (mean) | directional (max) | pairs over 5% "
        "| gate fired | wall |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    results = []
    if args.reuse and not args.keep:
        parser.error("--reuse reads the runs from --keep DIR: name the folder")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        if "separate" in parts:
            if args.before_pairs:
                results += separate(tmp, args.before_pairs, 1, args.profile, args.only,
                                    STATISTICAL_ONLY, args.reuse)  # fmt: skip
            results += separate(tmp, args.pairs, None, args.profile, args.only, margins,
                                args.reuse)  # fmt: skip
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
