"""Benchmark: `reviewkit project`'s error on measured workloads the fit never saw.

    .venv/bin/python benchmarks/projection_error.py --fit RUN [--fit RUN ...]
        --held-out RUN [--held-out RUN ...] [--platform KEY | --onto fit|held-out] [--json]

Held out means the workload ids of a --held-out run that no --fit run measured; they are
listed (and counted) before the fit is made, and the fit sees only the --fit runs' points.
Several --held-out runs (the fp32 and the bf16 shapes, say) are one held-out set: the summary
and the targets are over all their workloads together, each run's own summary beside it (a
workload in two of them is refused: it would count twice).

- Same device (no --platform): the --held-out run must be on the fit runs' device fingerprint
  (refused otherwise); each held-out workload is projected onto that device and compared with
  its measured per-call median t. `--onto fit` (the default) takes the device's ceilings from
  the first fit run (as `reviewkit project --from FIT` does); `--onto held-out` from the
  held-out run, the device's calibration when the held-out shapes ran (as `reviewkit project
  --from FIT --device-profile NOW` does): a shared host's DRAM bandwidth moves between the two
  (36 and 60 GB/s on the committed EPYC samples), an error of the device's, not of the fit's.
  Issue 34's targets: median |error| <= 15% and p90 <= 35% over at least 20 held-out
  workloads, and the 80% intervals covering 70-90% of them.
- Across devices (--platform KEY): every measured workload of the --held-out run (another
  device) projected onto the platform table's datasheet figures for it, from the fit runs'
  efficiency (borrowed), and compared likewise; reported per layer type, without a target.

Error is projected / measured - 1; |error| its magnitude. Prints markdown tables (or --json).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from reviewkit.analysis.analysed import AnalysedRun
from reviewkit.analysis.causal_work import causal_seqs
from reviewkit.analysis.efficiency_fit import EfficiencyPoint, points_of, variant_of
from reviewkit.analysis.project import (
    TargetWorkload,
    device_of_platform,
    device_of_run,
    project,
    run_noise_sd,
)
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import load_run
from reviewkit.suite import platform_table

# Issue 34 item 4's targets on one device.
MIN_HELD_OUT = 20
MAX_MEDIAN_ABS_ERROR = 0.15
MAX_P90_ABS_ERROR = 0.35
COVERAGE_RANGE = (0.70, 0.90)  # an honest 80% interval covers about 80%: neither far over nor under


def _quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (k = ceil(q n)), the convention of the analysis's order statistics."""
    s = sorted(values)
    return s[max(1, math.ceil(q * len(s))) - 1]


def evaluate(fit_paths: Sequence[Path], held_paths: Path | Sequence[Path], platform: str | None,
             onto: str = "fit") -> dict:  # fmt: skip
    """Project every held-out workload of each held-out run and compare; the summary is over
    all of them together (one held-out set), with each run's own beside it."""
    held_paths = [held_paths] if isinstance(held_paths, Path) else list(held_paths)
    fits = [(str(p), analyse_run(load_run(p))) for p in fit_paths]
    fit_ids = {w.id for _, run in fits for w in run.workloads}
    fingerprints = {run.fingerprint.get("hash") for _, run in fits}
    # the fit sees the fit runs only: fitted once, before any held-out run is read
    points = [p for _, run in fits for p in points_of(run)]
    noise_sd = run_noise_sd(run for _, run in fits)
    rows: list[dict] = []
    held_ids: list[str] = []
    by_run = {}
    device_name = ""
    for held_path in held_paths:
        run_rows, ids, device_name = _compare(fits, fit_ids, fingerprints, points, noise_sd,
                                              held_path, platform, onto)  # fmt: skip
        twice = sorted(set(ids) & set(held_ids))
        if twice:
            raise SystemExit(f"{held_path}: workload {twice[0]} is also in an earlier --held-out "
                             "run; pass each held-out workload once")  # fmt: skip
        rows += run_rows
        held_ids += ids
        by_run[str(held_path)] = summarise(run_rows, platform is None)
    return {
        "fit": [p for p, _ in fits], "held_out_runs": [str(p) for p in held_paths],
        "mode": (f"same device, onto the {onto} run's ceilings" if platform is None
                 else f"across devices, onto {platform}"),
        "device": device_name, "held_out_ids": held_ids,
        "rows": rows, "summary": summarise(rows, platform is None),
        "by_held_out_run": by_run,
        "by_layer_type": {lt: summarise([r for r in rows if r["layer_type"] == lt], False)
                          for lt in sorted({r["layer_type"] for r in rows})},
    }  # fmt: skip


def _compare(fits: Sequence[tuple[str, AnalysedRun]], fit_ids: set[str],
             fingerprints: set[str | None], points: Sequence[EfficiencyPoint], noise_sd: float,
             held_path: Path, platform: str | None, onto: str
             ) -> tuple[list[dict], list[str], str]:  # fmt: skip
    """One held-out run's rows, its held-out ids and the device they were projected onto."""
    held = analyse_run(load_run(held_path))
    same_device = platform is None
    if same_device and held.fingerprint.get("hash") not in fingerprints:
        raise SystemExit(f"{held_path}: device fingerprint {held.fingerprint.get('hash')} is not "
                         f"the fit runs' ({', '.join(map(str, fingerprints))}); pass --platform "
                         "for a projection across devices")  # fmt: skip
    measured = {w.id: w for w in held.measured_workloads if w.p50_s}
    held_out = sorted(i for i in measured if i not in fit_ids) if same_device else sorted(measured)
    if platform:
        device = device_of_platform(platform_table.platform(platform))
    elif onto == "held-out":
        device = device_of_run(held, str(held_path))
    else:
        device = device_of_run(fits[0][1], fits[0][0])
    # each held-out workload as its own bundle records it: analytic FLOPs, bytes, kernel
    targets = [TargetWorkload(w.id, w.layer_type, w.dtype, w.flops, w.bytes,
                              variant_of(w.kernel, w.params),
                              causal_seqs=causal_seqs(w.kernel, w.params))
               for w in (measured[i] for i in held_out)]  # fmt: skip
    rows = []
    for r in project(targets, [device], points, noise_sd):
        t = measured[r.id].p50_s
        if r.projected_s is None:
            rows.append({"id": r.id, "layer_type": r.layer_type, "measured_s": t,
                         "projected_s": None, "label": r.label, "reason": r.reason})  # fmt: skip
            continue
        rows.append({"id": r.id, "layer_type": r.layer_type, "measured_s": t,
                     "projected_s": r.projected_s, "low_s": r.low_s, "high_s": r.high_s,
                     "error": r.projected_s / t - 1, "covered": r.low_s <= t <= r.high_s,
                     "label": r.label, "held_out_run": str(held_path)})  # fmt: skip
    return rows, held_out, device.name


def summarise(rows: Sequence[dict], with_targets: bool) -> dict:
    errors = [abs(r["error"]) for r in rows if r.get("projected_s") is not None]
    covered = [r["covered"] for r in rows if r.get("projected_s") is not None]
    out = {"n": len(errors), "not_available": len(rows) - len(errors)}
    if errors:
        out |= {"median_abs_error": statistics.median(errors),
                "p90_abs_error": _quantile(errors, 0.9),
                "coverage_80": sum(covered) / len(covered),
                "median_error": statistics.median(
                    r["error"] for r in rows if r.get("projected_s") is not None)}  # fmt: skip
    if with_targets and errors:
        lo, hi = COVERAGE_RANGE
        out["targets"] = {
            f"held-out workloads >= {MIN_HELD_OUT}": len(errors) >= MIN_HELD_OUT,
            f"median |error| <= {MAX_MEDIAN_ABS_ERROR:.0%}":
                out["median_abs_error"] <= MAX_MEDIAN_ABS_ERROR,
            f"p90 |error| <= {MAX_P90_ABS_ERROR:.0%}": out["p90_abs_error"] <= MAX_P90_ABS_ERROR,
            f"80% intervals cover {lo:.0%}-{hi:.0%}": lo <= out["coverage_80"] <= hi,
        }  # fmt: skip
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def markdown(doc: dict) -> str:
    s = doc["summary"]
    lines = [f"{doc['mode']}: {s['n']} held-out workloads of {', '.join(doc['held_out_runs'])} "
             f"projected onto {doc['device']} from {', '.join(doc['fit'])}"
             + (f" ({s['not_available']} not available)" if s["not_available"] else ""), "",
             "| layer type | n | median error | median abs error | p90 abs error | 80% coverage |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    runs = doc["by_held_out_run"] if len(doc["by_held_out_run"]) > 1 else {}
    for lt, row in [*doc["by_layer_type"].items(), *runs.items(), ("all", s)]:
        lines.append(f"| {lt} | {row['n']} | {_pct(row.get('median_error'))} | "
                     f"{_pct(row.get('median_abs_error'))} | {_pct(row.get('p90_abs_error'))} | "
                     f"{_pct(row.get('coverage_80'))} |")  # fmt: skip
    if "targets" in s:
        lines += ["", "| target | met |", "| --- | --- |"]
        lines += [f"| {name} | {'yes' if ok else 'no'} |" for name, ok in s["targets"].items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", type=Path, action="append", required=True,
                        help="a run the projection is fitted on (repeatable)")  # fmt: skip
    parser.add_argument("--held-out", type=Path, action="append", required=True,
                        help="a run whose workloads are projected and compared (repeatable: "
                        "the summary is over all of them together)")  # fmt: skip
    parser.add_argument("--platform", help="across devices: the platform table key to project onto")
    parser.add_argument("--onto", choices=("fit", "held-out"), default="fit",
                        help="same device: whose ceilings to project onto (default: the first "
                        "fit run's)")  # fmt: skip
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.platform and args.onto != "fit":
        parser.error("--onto is for the same device; --platform projects onto the table's")
    doc = evaluate(args.fit, args.held_out, args.platform, args.onto)
    print(json.dumps(doc, indent=1) if args.json else markdown(doc))


if __name__ == "__main__":
    main()
