"""Benchmark: bottleneck classes before and after measured overhead, and the floors cross-checked.

Runs `reviewkit run --profile P --dtype D` for each dtype (or reads `--bundle DIR ...`), then
prints, per dtype:

1. every workload's class under the old definition (overhead = whatever the roofline does not
   explain) and the new one (overhead measured by a floor call), with t, the floor, the share of
   roof and the overhead phase's share of the run's wall time;
2. the measured overhead per layer type (sum of t_o over sum of t, and the median t_o);
3. two cross-checks of each floor (docs/metrics.md): the intercept at t_roof = 0 of a line through
   (t_roof, t) over a sweep of the floor's shape grown 1, 2, 4 and 8 times along its first
   dimension (roofs from the ops a dispatch mode counts), and the workload's ops per call times
   the run's per-op floor (ops counted by a dispatch mode, which sees a fused op such as the
   encoder layer's fast path as one, and by the profiler, which sees the aten ops nested in it).
   t_o agrees with a check when within 2x of it or within 5 us.

    .venv/bin/python benchmarks/overhead_crosscheck.py [--profile quick] [--dtype fp32,bf16]
        [--bundle DIR ...] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from reviewkit.analysis.roofline import analyse_run, measured, memory_level
from reviewkit.bundle.run import load_run
from reviewkit.suite import floors
from reviewkit.suite import workloads as suite

GROWTH = (1, 2, 4, 8)
AGREE_FACTOR = 2.0
AGREE_ABS_S = 5e-6


def old_class(w: dict, doc: dict) -> str:
    """The class before measured overhead: overhead = t - max(t_c, t_m) - t_comm, inferred."""
    t = w["stats"]["p50_s"]
    t_c, t_m = w["compute_time_s"], w["memory_time_s"]
    t_comm = (w.get("decomposition") or {}).get("communication_time_s") or 0.0
    if max(0.0, t - max(t_c, t_m) - t_comm) / t >= 0.5:
        return "overhead-bound"
    if t_comm > max(t_c, t_m):
        return "communication-bound"
    return "memory-bound" if t_m > t_c else "compute-bound"


def sweep_intercept(spec, threads: int, ceilings: dict):
    """(intercept_s, [(t_roof_s, t_s)]) over the grown floors, or None."""
    import torch

    from reviewkit.measure import overhead
    from reviewkit.measure.device import device_timed
    from reviewkit.measure.timing import collect_samples
    from reviewkit.suite import kernels

    floor = floors.floor_of(spec, threads)
    if floor is None:
        return None
    cpu = torch.device("cpu")
    points = []
    for k in GROWTH:
        s = floors.grown(floor.spec, k)
        fn = kernels.build(s, cpu)
        prof = overhead.op_profile(fn)
        roof = 0.0
        for op in prof["ops"]:
            peak = ceilings["compute"].get(op.get("dtype") or spec.dtype, {}).get("peak")
            _, bw = memory_level(ceilings, op["bytes"])
            roof += op["calls"] * max(op["flops"] / peak if peak else 0, op["bytes"] / bw)
        with torch.inference_mode():
            res = collect_samples(device_timed(fn, cpu), overhead.FLOOR_POLICY)
        points.append((roof, statistics.median(res.samples_s)))
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - slope * mx, points


def agrees(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "n/a"
    if abs(a - b) <= AGREE_ABS_S or (b > 0 and 1 / AGREE_FACTOR <= a / b <= AGREE_FACTOR):
        return "yes"
    return "NO"


def us(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1e6:.1f}"


def report(doc: dict, label: str, threads: int, sweep: bool) -> None:
    wall = doc.get("wall_s") or 0
    phases = doc.get("phases_s") or {}
    share = phases.get("overhead", 0) / wall if wall else 0
    probe = (doc.get("overhead_probe") or {}).get("median_s")
    parallel = (doc.get("overhead_probe") or {}).get("parallel_fixed_s")
    print(f"\n### {label}: {len(measured(doc))} workloads, {threads} thread(s)")
    print(f"run wall {wall:.1f} s; phases {phases}; overhead phase {share:.1%} of the wall time; "
          f"per-op floor {us(probe)} us ({(doc.get('overhead_probe') or {}).get('op')}); "
          f"a parallel add's fixed cost {us(parallel)} us\n")
    print("| workload | t (us) | floor (us) | t_o (us) | old class | new class | roof share | "
          "sweep intercept (us) | agrees | ops x per-op (us) | agrees | profiled ops x per-op "
          "(us) | agrees |")  # fmt: skip
    print("|" + " --- |" * 13)
    by_layer: dict[str, list[tuple[float, float]]] = {}
    specs = {s.id: s for s in suite.workloads(doc["profile"], tuple(doc["knobs"]["dtypes"]))}
    tally = {"sweep": [0, 0], "ops": [0, 0], "profiled": [0, 0]}
    for w in measured(doc):
        d = w["decomposition"] or {}
        t = w["stats"]["p50_s"]
        t_o = d.get("overhead_time_s") if w.get("overhead_method") == "floor-call" else None
        rec = w.get("overhead") or {}
        raw = statistics.median(rec["samples_s"]) if rec.get("samples_s") else None
        # the run's t_o before any clamp to the roof: 2 x floor - double (or the floor alone)
        floor_median = raw
        if raw is not None and rec.get("double_samples_s"):
            floor_median = max(0.0, 2 * raw - statistics.median(rec["double_samples_s"]))
        by_layer.setdefault(w["layer_type"], []).append((t, t_o or 0.0))
        intercept = None
        if sweep and floor_median is not None and w["id"] in specs:
            found = sweep_intercept(specs[w["id"]], threads, doc["ceilings"])
            intercept = found[0] if found else None
        ops = ((w.get("op_profile") or {}).get("ops_per_call") or 0) * probe if probe else None
        nested = sum(((rec.get("ops") or {}).get("workload") or {}).values())
        profiled = nested * probe if probe and nested else None
        a, b = agrees(floor_median, intercept), agrees(floor_median, ops)
        c = agrees(floor_median, profiled)
        for key, verdict in (("sweep", a), ("ops", b), ("profiled", c)):
            if verdict != "n/a":
                tally[key][0] += verdict == "yes"
                tally[key][1] += 1
        share_roof = d.get("roof_share")
        print(f"| {w['id']} | {us(t)} | {us(raw)} | {us(floor_median)} | {old_class(w, doc)} | "
              f"{w['bottleneck']}{' (below roof)' if d.get('below_roof') else ''} | "
              f"{'n/a' if share_roof is None else f'{share_roof:.0%}'} | {us(intercept)} | {a} | "
              f"{us(ops)} | {b} | {us(profiled)} | {c} |")  # fmt: skip
    print("\n| layer type | workloads | measured overhead (sum t_o / sum t) | median t_o (us) |")
    print("| --- | --- | --- | --- |")
    for layer, rows in by_layer.items():
        total = sum(t for t, _ in rows)
        print(f"| {layer} | {len(rows)} | {sum(o for _, o in rows) / total:.2%} | "
              f"{us(statistics.median(o for _, o in rows))} |")  # fmt: skip
    names = {"sweep": "the sweep intercept", "ops": "dispatch-mode ops x per-op floor",
             "profiled": "profiled ops x per-op floor"}  # fmt: skip
    for key, (yes, n) in tally.items():
        print(f"\nt_o agrees with {names[key]} on {yes} of {n} workloads")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--dtype", default="fp32,bf16")
    parser.add_argument("--bundle", type=Path, nargs="*", default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-sweep", action="store_true", help="skip the sweep cross-check")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        bundles = args.bundle or []
        if not bundles:
            for dtype in args.dtype.split(","):
                out = Path(tmp) / dtype
                subprocess.run([sys.executable, "-m", "reviewkit", "run", "--profile",
                                args.profile, "--dtype", dtype, "--threads", str(threads),
                                "--out", str(out)], check=True, capture_output=True)  # fmt: skip
                bundles.append(out)
        for bundle in bundles:
            doc = analyse_run(load_run(bundle))
            report(doc, f"{bundle} ({', '.join(doc['knobs']['dtypes'])})", threads,
                   not args.no_sweep)  # fmt: skip


if __name__ == "__main__":
    main()
