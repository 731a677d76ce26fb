"""Benchmark: a serving run against issue 33's targets, as markdown tables for a sample README.

Reads the bundle of `reviewkit run --device cuda --profile serving --out RUN_DIR` the way
rendering does (load_run, analyse_run; no torch) and prints:
- each target with its measured value, the workloads it covers and its verdict (pass, fail,
  or not applicable with why: no datasheet peak, no SM count recorded, nothing measured);
- the bf16 GEMMs of >= 4k tokens one by one (MFU against the datasheet peak, class);
- the whole decode-attention grid, batch rows x KV-context columns: each cell the achieved
  bandwidth B / t as a share of the measured main-memory (HBM) bandwidth and its bottleneck
  class, the cells inside the target in bold, the cells not run with the bundle's reason.

    .venv/bin/python benchmarks/serving_targets.py RUN_DIR [--dtype bf16] [--json]

The definitions are the analysis's (docs/metrics.md): t the per-call median, MFU = F / (P t)
with P here the datasheet peak the issue names (reviewkit/suite/ceilings.py's table, as the
run's ceilings record it), achieved bandwidth B / t, the bottleneck class and the `noisy` flag
as analyse_run gives them, energy as each workload's `energy` record has it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from reviewkit.analysis import device_time
from reviewkit.analysis.analysed import AnalysedRun, AnalysedWorkload
from reviewkit.analysis.bottleneck import (
    COMMUNICATION_BOUND,
    COMPUTE_BOUND,
    MEMORY_BOUND,
    OVERHEAD_BOUND,
    UNCLASSIFIED,
)
from reviewkit.analysis.energy import energy_reason
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import STATUS_OK, load_run
from reviewkit.common.format import MISSING, pct
from reviewkit.suite.ceilings import lookup
from reviewkit.suite.serving import DECODE_BATCHES, DECODE_CONTEXTS

# Issue 33's targets.
GEMM_DTYPE = "bf16"
GEMM_MIN_TOKENS = 4096
GEMM_MIN_MFU = 0.60
DECODE_MIN_CONTEXT = 4096
DECODE_MIN_BANDWIDTH = 0.60
NOISY_MAX_SHARE = 0.10
ENERGY_MIN_SHARE = 0.90

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "not applicable"
DECODE_KERNEL = "sdpa_gqa"
# One letter per class in the grid's cells; "*" after it in the table: below roof
# (docs/metrics.md).
CLASS_LETTER = {COMPUTE_BOUND: "C", MEMORY_BOUND: "M", OVERHEAD_BOUND: "O",
                COMMUNICATION_BOUND: "X", UNCLASSIFIED: "U"}  # fmt: skip
NOISY = "noisy"


def sm_count(run: AnalysedRun) -> int | None:
    """The GPU's streaming multiprocessors as the run recorded them (environment, else the
    device fingerprint's facts); None on a CPU or a bundle that does not say."""
    value = run.environment.get("device_multiprocessors") or (
        run.fingerprint.get("facts") or {}).get("sm_count")  # fmt: skip
    return int(value) if value else None


def datasheet_peak(run: AnalysedRun, dtype: str) -> tuple[float | None, str]:
    """(peak FLOP/s, which datasheet) of `dtype`: the run's ceiling records it where the device
    is in the datasheet table; a bundle without the field is looked up in that table."""
    entry = ((run.ceilings or {}).get("compute") or {}).get(dtype) or {}
    if "datasheet" in entry:
        return entry.get("datasheet"), entry.get("datasheet_ref") or ""
    found = lookup(run.device_label)
    if found is None or dtype not in found.peak_flops_per_s:
        return None, ""
    return found.peak_flops_per_s[dtype], found.reference


def measured_bandwidth(run: AnalysedRun) -> tuple[float | None, str]:
    """(bytes/s, level) of main memory as calibration measured it (not the datasheet figure
    the roofline divides by on a GPU in the table)."""
    main = (run.ceilings or {}).get("bandwidth") or {}
    return main.get("measured"), main.get("level") or "main memory"


def _class(w: AnalysedWorkload) -> str:
    return CLASS_LETTER.get(w.bottleneck, w.bottleneck) if w.bottleneck else MISSING


def _not_applicable(target: dict, reason: str) -> dict:
    return {**target, "value": None, "verdict": NOT_APPLICABLE, "reason": reason}


def _why_not(w: AnalysedWorkload) -> str:
    return w.reason or w.status


def gemm_target(run: AnalysedRun) -> tuple[dict, list[dict]]:
    """bf16 GEMMs of >= 4k tokens, compute-bound at >= 60% of the datasheet peak, each one."""
    peak, ref = datasheet_peak(run, GEMM_DTYPE)
    rows = []
    for w in run.workloads:
        tokens = (w.params or {}).get("m")
        if w.layer_type != "gemm" or w.dtype != GEMM_DTYPE or not isinstance(tokens, int):
            continue
        if tokens < GEMM_MIN_TOKENS:
            continue
        row = {"id": w.id, "tokens": tokens, "status": w.status, "mfu_datasheet": None,
               "bottleneck": w.bottleneck, "meets": None}  # fmt: skip
        if w.measured and w.achieved_flops_per_s is not None and peak:
            row["mfu_datasheet"] = w.achieved_flops_per_s / peak  # F / t / P
            row["meets"] = w.bottleneck == COMPUTE_BOUND and row["mfu_datasheet"] >= GEMM_MIN_MFU
        elif not w.measured:
            row["reason"] = _why_not(w)
        rows.append(row)
    name = (f"{GEMM_DTYPE} GEMMs of >= {GEMM_MIN_TOKENS} tokens compute-bound at >= "
            f"{GEMM_MIN_MFU:.0%} of the datasheet peak")  # fmt: skip
    judged = [r for r in rows if r["meets"] is not None]
    target = {"target": name, "workloads": len(rows), "judged": len(judged),
              "datasheet_peak_flops_per_s": peak, "datasheet": ref}  # fmt: skip
    if not peak:
        why = f"no datasheet {GEMM_DTYPE} peak for {run.device_label}"
        return _not_applicable(target, why), rows
    if not judged:
        why = f"no {GEMM_DTYPE} GEMM of >= {GEMM_MIN_TOKENS} tokens measured"
        return _not_applicable(target, why), rows
    mfus = [r["mfu_datasheet"] for r in judged]
    meeting = sum(r["meets"] for r in judged)
    return {**target, "value": min(mfus), "median": statistics.median(mfus), "meeting": meeting,
            "verdict": PASS if meeting == len(judged) else FAIL, "reason": ""}, rows  # fmt: skip


def decode_grid(run: AnalysedRun, dtype: str) -> tuple[dict, dict]:
    """The decode-attention cells (batch x context) of `dtype` and the target over those with
    batch x KV heads >= the SM count and context >= 4k: memory-bound at >= 60% of the
    measured main-memory bandwidth."""
    bandwidth, level = measured_bandwidth(run)
    sms = sm_count(run)
    cells: dict[tuple[int, int], dict] = {}
    for w in run.workloads:
        p = w.params or {}
        if w.kernel != DECODE_KERNEL or p.get("phase") != "decode" or w.dtype != dtype:
            continue
        batch, context, kv_heads = p["batch"], p["kv_len"], p["kv_heads"]
        cell = {"id": w.id, "batch": batch, "context": context, "kv_heads": kv_heads,
                "status": w.status, "bandwidth_share": None, "bottleneck": w.bottleneck,
                "class": _class(w), "memory_level": w.memory_level,
                "below_roof": w.decomposition is not None and w.decomposition.below_roof,
                "in_target": bool(sms) and batch * kv_heads >= sms
                and context >= DECODE_MIN_CONTEXT, "meets": None}  # fmt: skip
        if w.measured and bandwidth:
            cell["bandwidth_share"] = w.bytes / w.p50_s / bandwidth  # B / t / W_measured
            cell["meets"] = (w.bottleneck == MEMORY_BOUND
                             and cell["bandwidth_share"] >= DECODE_MIN_BANDWIDTH)  # fmt: skip
        elif not w.measured:
            cell["reason"] = _why_not(w)
        cells[(batch, context)] = cell
    batches = sorted(set(DECODE_BATCHES) | {b for b, _ in cells})
    contexts = sorted(set(DECODE_CONTEXTS) | {c for _, c in cells})
    grid = {"dtype": dtype, "level": level, "measured_bandwidth_bytes_per_s": bandwidth,
            "sm_count": sms, "batches": batches, "contexts": contexts,
            "cells": [cells.get((b, c)) or {"batch": b, "context": c, "status": "absent"}
                      for b in batches for c in contexts]}  # fmt: skip
    name = (f"{dtype} decode attention at batch x KV heads >= SM count and context >= "
            f"{DECODE_MIN_CONTEXT} memory-bound at >= {DECODE_MIN_BANDWIDTH:.0%} of the measured "
            f"{level} bandwidth")  # fmt: skip
    inside = [c for c in cells.values() if c["in_target"]]
    judged = [c for c in inside if c["meets"] is not None]
    target = {"target": name, "workloads": len(inside), "judged": len(judged), "sm_count": sms}
    reason = ""
    if not sms:
        reason = f"SM count not recorded ({run.device_type or 'unknown'} device)"
    elif not bandwidth:
        reason = f"no measured {level} bandwidth recorded"
    elif not judged:
        reason = "no decode cell inside the target was measured"
    if reason:
        return _not_applicable(target, reason), grid
    shares = [c["bandwidth_share"] for c in judged]
    meeting = sum(c["meets"] for c in judged)
    return {**target, "value": min(shares), "median": statistics.median(shares),
            "meeting": meeting, "verdict": PASS if meeting == len(judged) else FAIL,
            "reason": ""}, grid  # fmt: skip


def noisy_target(run: AnalysedRun) -> dict:
    """`noisy` (analysis/device_time.noisy: t_device's spread where it judges noise, else t's)
    on at most 10% of the measured workloads."""
    measured = run.measured_workloads
    noisy = [w for w in measured if device_time.noisy(w.stats, device_time.read(w, w.stats))]
    target = {"target": f"`{NOISY}` on <= {NOISY_MAX_SHARE:.0%} of workloads",
              "workloads": len(measured), "judged": len(measured),
              "meeting": len(noisy)}  # fmt: skip
    if not measured:
        return _not_applicable(target, "no workload measured")
    share = len(noisy) / len(measured)
    return {**target, "value": share, "verdict": PASS if share <= NOISY_MAX_SHARE else FAIL,
            "reason": ""}  # fmt: skip


def energy_target(run: AnalysedRun) -> dict:
    """Energy (perf per watt) available on at least 90% of the measured workloads; the most
    common reason where it is not."""
    measured = run.measured_workloads
    missing = Counter(energy_reason(w) for w in measured if energy_reason(w))
    have = len(measured) - sum(missing.values())
    target = {"target": f"energy (perf per watt) on >= {ENERGY_MIN_SHARE:.0%} of workloads",
              "workloads": len(measured), "judged": len(measured), "meeting": have,
              "missing_reason": missing.most_common(1)[0][0] if missing else ""}  # fmt: skip
    if not measured:
        return _not_applicable(target, "no workload measured")
    share = have / len(measured)
    return {**target, "value": share, "verdict": PASS if share >= ENERGY_MIN_SHARE else FAIL,
            "reason": ""}  # fmt: skip


def report(run: AnalysedRun, dtype: str = GEMM_DTYPE) -> dict:
    gemm, gemms = gemm_target(run)
    decode, grid = decode_grid(run, dtype)
    return {
        "device": run.device_label,
        "profile": run.suite_profile,
        "targets": [gemm, decode, noisy_target(run), energy_target(run)],
        "gemms": gemms,
        "decode_grid": grid,
    }


# --- markdown ---------------------------------------------------------------------------------


def _value_text(t: dict) -> str:
    if t["value"] is None:
        return MISSING
    if "median" in t:
        unmeasured = t["workloads"] - t["judged"]
        return (f"lowest {pct(t['value'])}, median {pct(t['median'])}; {t['meeting']} of "
                f"{t['judged']} measured meet it"
                + (f"; {unmeasured} not measured" if unmeasured else ""))  # fmt: skip
    return f"{pct(t['value'])} ({t['meeting']} of {t['judged']})"


def _verdict_text(t: dict) -> str:
    extra = t.get("missing_reason") if t["verdict"] == FAIL else ""
    why = t["reason"] or extra
    return f"{t['verdict']}: {why}" if why else t["verdict"]


def _cell_text(cell: dict, main_level: str) -> str:
    if cell["status"] == "absent":
        return "absent"
    if cell.get("bandwidth_share") is None:
        if cell["status"] == STATUS_OK:
            return f"{MISSING} {cell['class']}"
        return "not run: does not fit" if "does not fit" in cell.get("reason", "") else (
            cell["status"])  # fmt: skip
    below = "\\*" if cell["below_roof"] else ""  # escaped: a bold cell ends in **
    text = f"{pct(cell['bandwidth_share'], 0)} {cell['class']}{below}"
    if cell["memory_level"] and cell["memory_level"] != main_level:
        text += f" ({cell['memory_level']})"
    return f"**{text}**" if cell["in_target"] else text


def markdown(doc: dict) -> str:
    grid = doc["decode_grid"]
    bandwidth = grid["measured_bandwidth_bytes_per_s"]
    gemm = doc["targets"][0]
    peak = gemm["datasheet_peak_flops_per_s"]
    lines = [
        f"{doc['device']}, profile {doc['profile']}: SM count "
        f"{grid['sm_count'] or 'not recorded'}; measured {grid['level']} bandwidth "
        f"{f'{bandwidth / 1e9:.4g} GB/s' if bandwidth else 'not recorded'}; datasheet "
        f"{GEMM_DTYPE} peak {f'{peak / 1e12:.4g} TFLOP/s' if peak else 'none'}"
        + (f" ({gemm['datasheet']})" if gemm["datasheet"] else ""),
        "",
        "| target | measured | workloads | verdict |",
        "| --- | --- | ---: | --- |",
    ]
    for t in doc["targets"]:
        lines.append(f"| {t['target']} | {_value_text(t)} | {t['workloads']} | "
                     f"{_verdict_text(t)} |")  # fmt: skip
    lines += ["", f"{GEMM_DTYPE} GEMMs of >= {GEMM_MIN_TOKENS} tokens (MFU against the "
              "datasheet peak):", "", "| workload | tokens | MFU | class | meets |",
              "| --- | ---: | ---: | --- | --- |"]  # fmt: skip
    if not doc["gemms"]:
        lines.append(f"| none in this run | {MISSING} | {MISSING} | {MISSING} | {MISSING} |")
    for r in doc["gemms"]:
        meets = {True: "yes", False: "no", None: MISSING}[r["meets"]]
        mfu = pct(r["mfu_datasheet"]) if r["status"] == STATUS_OK else r.get("reason", r["status"])
        lines.append(f"| {r['id']} | {r['tokens']} | {mfu} | {r['bottleneck'] or MISSING} | "
                     f"{meets} |")  # fmt: skip
    main_level = grid["level"]
    lines += ["", f"{grid['dtype']} decode attention, B / t as a share of the measured "
              f"{main_level} bandwidth (rows batch, columns KV context; bold: inside the "
              "target; C compute-, M memory-, O overhead-bound, U unclassified, * below roof; "
              "an inner level in brackets where the KV cache fits it; absent: not in the run's "
              "selection):", "",
              "| batch | " + " | ".join(str(c) for c in grid["contexts"]) + " |",
              "| ---: | " + " | ".join("---:" for _ in grid["contexts"]) + " |"]  # fmt: skip
    by_cell = {(c["batch"], c["context"]): c for c in grid["cells"]}
    for b in grid["batches"]:
        lines.append(f"| {b} | " + " | ".join(_cell_text(by_cell[(b, c)], main_level)
                                             for c in grid["contexts"]) + " |")  # fmt: skip
    not_run = [c for c in grid["cells"] if c.get("reason")]
    if not_run:
        lines += ["", "Not run:"]
        lines += [f"- batch {c['batch']} x context {c['context']}, {c['reason']}"
                  if c["reason"].startswith("not run") else
                  f"- batch {c['batch']} x context {c['context']} ({c['status']}): {c['reason']}"
                  for c in not_run]  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a serving run bundle (folder or run.json)")
    parser.add_argument("--dtype", default=GEMM_DTYPE, help="decode attention's dtype")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    doc = report(analyse_run(load_run(args.run_dir)), args.dtype)
    print(json.dumps(doc, indent=1) if args.json else markdown(doc))


if __name__ == "__main__":
    main()
