"""Every terminal table and text summary the commands print (torch-free): runs, checks, evidence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from reviewkit.analysis.hardware import support_notes
from reviewkit.analysis.knobs import (
    CONFOUNDER_ROW,
    compile_line,
    diff_rows,
    not_applicable_lines,
    shown_value,
)
from reviewkit.analysis.weights import kernel_rate, weights_lines
from reviewkit.bundle.profile import settings_text
from reviewkit.bundle.run import STATUS_OK
from reviewkit.cli.bottleneck_view import (
    device_time_line,
    layer_table,
    levers_lines,
    slowest_table,
)
from reviewkit.cli.distributed_view import collectives_table, distributed_lines
from reviewkit.cli.tables import DataTable, rate_text
from reviewkit.common.format import MISSING, binary_size, change_ci, pct, points
from reviewkit.common.format import change as fmt_change
from reviewkit.evidence import loadgen

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun, AnalysedWorkload

PIPED_WIDTH = 150  # the longest workload id plus the numeric columns fit on one line


def _interval(v: dict, scale: float) -> str:
    if v.get("low") is None or v.get("high") is None:
        return MISSING
    return f"{v['low'] / scale:.3g}-{v['high'] / scale:.3g} ({len(v.get('trials') or [])} trials)"


def _capacity(nbytes: int | None) -> str:
    return "any size" if nbytes is None else f"≤ {binary_size(nbytes)}"


def _level_source(level: dict, outer: dict) -> str:
    """`measured`, or `raised to <outer>'s` (the H200's L2 read "measured" above its trials)."""
    raised = (level.get("peak") or 0) > (level.get("measured") or float("inf"))
    return f"raised to {outer.get('level')}'s" if raised else "measured"


def _main_level(level: dict, bw: dict) -> tuple[str, str]:
    """Main memory's source and trials: a CPU's DRAM names its basis (the trials shown are the
    basis's: on the cores added the one-thread copy's, not the all-threads trials recorded beside
    them, which can lie wholly under the ceiling)."""
    source = bw.get("source", "") + (f", {level['basis']}" if level.get("basis") else "")
    return source, _interval(level, 1e9)


def ceilings_table(c: dict, title: str = "Ceilings") -> Table:
    """Compute per dtype and bandwidth per memory level, each with the value used, its source
    and the spread of its trials (a bundle's `ceilings` or a device profile)."""
    t = DataTable(title=title, title_justify="left")
    for col in ("ceiling", "used", "source", "trials low-high", "datasheet"):
        t.add_column(col, justify="left" if col in ("ceiling", "source") else "right")
    for dtype, v in (c.get("compute") or {}).items():
        t.add_row(
            # an integer GEMM counts operations, not floating-point ones
            f"compute {dtype} ({'GOP/s' if dtype == 'int8' else 'GFLOP/s'})",
            rate_text(v.get("peak")),
            v.get("source", ""),
            _interval(v, 1e9),
            rate_text(v.get("datasheet")),
        )
    gb = lambda x: MISSING if x is None else f"{x / 1e9:.3g}"  # noqa: E731
    levels = c.get("memory") or []
    bw = c.get("bandwidth") or {}
    for i, level in enumerate(levels):
        main = i == len(levels) - 1
        source, trials = (
            _main_level(level, bw)
            if main
            else (_level_source(level, levels[i + 1]), _interval(level, 1e9))
        )
        t.add_row(
            f"memory {level['level']} (GB/s, {_capacity(level.get('capacity_bytes'))})",
            gb(bw.get("peak") if main else level.get("peak")),
            source,
            trials,
            gb(bw.get("datasheet")) if main else MISSING,
        )
    if not levels and bw:
        t.add_row(
            "memory (GB/s)",
            gb(bw.get("peak")),
            bw.get("source", ""),
            _interval(bw, 1e9),
            gb(bw.get("datasheet")),
        )
    return t


def print_profile(doc: dict, console: Console, paths: list[str]) -> None:
    """A device profile as `reviewkit calibrate` prints it."""
    fp = doc.get("fingerprint") or {}
    build = doc.get("torch") or {}
    console.print(
        f"[bold]device profile {escape(str(doc['hash']))}[/] · "
        + escape(
            f"{fp.get('label')} (fingerprint {fp.get('hash')}) · torch "
            f"{build.get('torch_version')} · at {settings_text(doc.get('settings'))} · "
            f"{doc.get('calibration')} calibration in {doc.get('wall_s') or 0:.1f} s"
        ),
        highlight=False,
    )
    title = "Ceilings (the best trial; the median trial for a level shared with neighbours)"
    console.print(ceilings_table(doc, title))
    for path in paths:
        console.print(f"written: {escape(path)}", highlight=False)


def review_layer_table(report) -> Table | None:
    """MFU / memory-stall per layer type of a review's runs (walk): one column per run and dtype."""
    runs = [("baseline", report.baseline)] + [
        (f"candidate {i + 1}", run) for i, (_, run) in enumerate(report.review_candidates)
    ]
    columns, layers = [], []
    for label, run in runs:
        for dtype, by_layer in run.layer_types_by_dtype.items():
            columns.append((f"{label} {dtype}", by_layer))
            layers += [lt for lt in by_layer if lt not in layers]
    if not columns:
        return None
    t = DataTable(box=None, pad_edge=False, show_edge=False, padding=(0, 2, 0, 0))
    t.add_column("layer type")
    for name, _ in columns:
        t.add_column(f"{name} MFU / stall", justify="right")
    for lt in layers:
        cells = []
        for _, by_layer in columns:
            agg = by_layer.get(lt)
            cells.append(f"{pct(agg.mfu)} / {pct(agg.memory_stall_fraction)}" if agg else "")
        t.add_row(lt, *cells)
    return t


def problems_table(run: AnalysedRun) -> Table | None:
    bad = [w for w in run.workloads if w.status != STATUS_OK or w.reason]
    if not bad:
        return None
    t = DataTable(title="Workloads not measured normally", title_justify="left")
    t.add_column("workload")
    t.add_column("status")
    t.add_column("reason", overflow="fold")
    for w in bad:
        t.add_row(w.id, w.status, w.reason or "")
    return t


def stdout_console() -> Console:
    """Piped output (a log, a CI artifact) gets room for full ids instead of 80 columns."""
    import sys

    return Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)


def print_run(run: AnalysedRun, console: Console, path: str | None = None) -> None:
    env = run.environment
    s = run.suite
    status = "complete" if run.complete else "INCOMPLETE (" + escape(run.interrupted or "") + ")"
    # the fingerprint's label ("AMD EPYC · Zen 4 · AVX-512 BF16 · 2 cores") where recorded
    device_label = run.fingerprint.get("label") or env.get("device_name")
    profile = MISSING if run.suite_profile is None else run.suite_profile
    console.print(
        f"[bold]{escape(s['name'])} {escape(s['version'])}[/] (hash {escape(s['hash'])}) · "
        + escape(
            f"profile {profile} · {run.knobs.get('device')} "
            f"({device_label}) · {run.knobs.get('threads')} threads · "
            f"{(run.rounds or {}).get('rounds', 1)} round(s) · "
            f"torch {env.get('torch_version')} · "
        )
        + status,
        highlight=False,
    )
    console.print(ceilings_table(run.ceilings or {}))
    device_profile = (run.ceilings or {}).get("profile")
    if device_profile and device_profile.get("hash"):
        console.print(
            escape(
                f"device profile {device_profile['hash']} ({device_profile.get('source')}, "
                f"{device_profile.get('calibration')} calibration"
                + (f", at {at}" if (at := settings_text(device_profile.get("settings"))) else "")
                + ")"
            ),
            highlight=False,
        )
    elif device_profile:
        console.print(f"ceilings {escape(str(device_profile.get('reason')))}", highlight=False)
    from reviewkit.analysis.run_to_run import recorded_text

    console.print(escape(recorded_text(run)), highlight=False)
    for note in support_notes(run):
        console.print(f"[yellow]hardware:[/] {escape(note)}")
    for line in not_applicable_lines(run):
        console.print(f"[yellow]knob:[/] {escape(line)}")
    if compiled := compile_line(run):
        console.print(f"[yellow]compile:[/] {escape(compiled)}")
    for line in weights_lines(run):
        console.print(f"[yellow]weights:[/] {escape(line)}", highlight=False)
    for dtype in run.knobs["dtypes"]:
        if dtype in run.layer_types_by_dtype:
            console.print(layer_table(run, dtype))
            for line in levers_lines(run, dtype):
                console.print(line, highlight=False)
    for line in distributed_lines(run):
        console.print(line, highlight=False)
    collectives = collectives_table(run)
    if collectives is not None:
        console.print(collectives)
    console.print(slowest_table(run))
    if timing := device_time_line(run):
        console.print(escape(timing), highlight=False)
    problems = problems_table(run)
    if problems is not None:
        console.print(problems)
    if path:
        console.print(f"run bundle: {escape(path)}", highlight=False)


# The fields `--json` keeps of each workload, in its order: everything but the raw samples.
SUMMARY_FIELDS = ("id", "layer_type", "dtype", "status", "reason", "flops", "bytes", "mfu",
                  "bandwidth_util", "fractions", "decomposition", "overhead_method", "bottleneck",
                  "lever", "fusion_headroom_fraction", "device_timing", "flags",
                  "reproduce")  # fmt: skip
SUMMARY_STATS = ("n", "p50_s", "p95_s", "p99_s", "mean_s")


def _json_of(value: object) -> object:
    """A field as JSON writes it: a nested record by its own JSON, a tuple as a list."""
    if hasattr(value, "to_json"):
        return value.to_json()
    return list(value) if isinstance(value, tuple) else value


def _workload_summary(w: AnalysedWorkload, multi_rank: bool) -> dict:
    row = {k: _json_of(getattr(w, k)) for k in SUMMARY_FIELDS}
    row.update({k: getattr(w.stats, k) if w.stats else None for k in SUMMARY_STATS})
    if multi_rank:
        row.update(collective=_json_of(w.collective), skew=_json_of(w.skew))
    if w.weights:  # a weight knob mapped it: how, and a sparse kernel's own rate
        row.update(weights=dict(w.weights), kernel_flops_per_s=kernel_rate(w))
    return row


def summary(run: AnalysedRun, path: str | None = None) -> dict:
    """The machine-readable view printed by `--json`: everything but the raw samples."""
    return {
        "run": path,
        "complete": run.complete,
        "profile": run.suite_profile,
        "suite": run.suite,
        "knobs": run.knobs,
        "ceilings": run.ceilings,
        # the device's run-to-run figure when the run started, or why there was none
        "run_to_run": run.run_to_run,
        "overhead_probe": run.overhead_probe,
        "phases_s": run.phases_s,
        "layer_types": {k: v.to_json() for k, v in run.layer_types.items()},
        "layer_types_by_dtype": {dtype: {k: v.to_json() for k, v in table.items()}
                                 for dtype, table in run.layer_types_by_dtype.items()},
        "distributed": run.distributed_json(),
        "workloads": [_workload_summary(w, bool(run.distributed)) for w in run.workloads],
    }


# --- compare and check ----------------------------------------------------------------------

VERDICT_STYLE = {
    "faster": "green",
    "slower": "red",
    "equivalent": "blue",
    "inconclusive": "dim",
    "not comparable": "yellow",
}
STATUS_STYLE = {"pass": "green", "warn": "yellow", "missing": "magenta", "fail": "red"}


def _ratio(x: float | None, ci: tuple[float, float] | None = None) -> str:
    if x is None:
        return MISSING
    return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def class_change(baseline: str | None, candidate: str | None, below_roof: bool) -> str:
    """The class change ("compute-bound → memory-bound") or the one class; "(below roof)" on
    the candidate's."""
    mark = " (below roof)" if below_roof else ""
    if baseline != candidate:
        return f"{baseline or MISSING} → {candidate or MISSING}{mark}"
    return f"{baseline or MISSING}{mark}"


def print_comparison(comp, console: Console) -> None:
    console.print(
        f"[bold]{escape(comp.baseline)}[/] → [bold]{escape(comp.candidate)}[/] "
        f"(paired by {comp.paired_by})"
    )
    # Knobs, then the environment differences (confounders, and what the device brings).
    rows = diff_rows(comp.knob_changes, comp.knob_reading(),
                     comp.confounders + comp.device_environment)  # fmt: skip
    if rows:
        t = DataTable(title="Knob diff", title_justify="left")
        for col in ("knob", "baseline", "candidate", "reads as"):
            t.add_column(col)
        for r in rows:
            style = "red" if r.role == CONFOUNDER_ROW else ""
            t.add_row(r.what, shown_value(r.baseline), shown_value(r.candidate),
                      Text(r.reads_as, style=style))  # fmt: skip
        console.print(t)
    else:
        console.print("Knob diff: none")
    for w in comp.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    console.print(escape(comp.basis()))
    t = DataTable(
        title="By layer type (ratio of summed medians, candidate / baseline, 95% CI)",
        title_justify="left",
    )
    for col in ("layer type", "workloads", "time ratio", "verdict", "MFU", "memory-stall",
                "overhead", "inefficiency", "roof share", "bottleneck"):  # fmt: skip
        t.add_column(col)
    for layer in comp.layer_types:
        t.add_row(
            layer.layer_type,
            str(layer.workloads),
            _ratio(layer.time_ratio, layer.time_ratio_ci),
            Text(layer.verdict, style=VERDICT_STYLE[layer.verdict]),
            f"{pct(layer.mfu_baseline)} → {pct(layer.mfu_candidate)}",
            f"{pct(layer.memory_stall_baseline)} → {pct(layer.memory_stall_candidate)}",
            f"{pct(layer.overhead_baseline)} → {pct(layer.overhead_candidate)}",
            f"{pct(layer.inefficiency_baseline)} → {pct(layer.inefficiency_candidate)}",
            f"{pct(layer.roof_share_baseline)} → {pct(layer.roof_share_candidate)}",
            class_change(layer.bottleneck_baseline, layer.bottleneck_candidate,
                         layer.below_roof_candidate),
        )  # fmt: skip
    console.print(t)
    t = DataTable(title="By workload (candidate / baseline)", title_justify="left")
    for col in (
        "workload",
        "median ratio [95% CI]",
        "verdict",
        "p95",
        "p99 [95% CI]",
        "ΔMFU",
        "Δstall",
        "Δoverhead",
        "Δineff.",
        "bottleneck",
    ):
        t.add_column(col, overflow="fold")
    for w in comp.workloads:
        t.add_row(
            w.key,
            _ratio(w.median_ratio, w.median_ratio_ci),
            Text(w.verdict, style=VERDICT_STYLE[w.verdict])
            + (f" ({w.reason})" if w.reason and w.verdict == "not comparable" else ""),
            _ratio(w.p95_ratio),
            _ratio(w.p99_ratio, w.p99_ratio_ci),
            points(w.mfu_delta, w.mfu_delta_ci),
            points(w.memory_stall_delta),
            points(w.fraction_deltas.get("overhead")),
            points(w.fraction_deltas.get("inefficiency")),
            class_change(w.bottleneck_baseline, w.bottleneck_candidate, w.below_roof_candidate),
        )
    console.print(t)
    counts = Counter(w.verdict for w in comp.workloads)
    console.print(
        "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.most_common())
        + (f". Inconclusive: {inconclusive_hint(comp)}" if counts.get("inconclusive") else "")
    )  # fmt: skip
    regressions = comp.p99_regressions
    fdr = (f"at a {pct(comp.margins.fdr, 0)} false discovery rate over {comp.p99_comparisons} "
           "p99 comparisons")  # fmt: skip
    if regressions:
        console.print(
            f"[red]{len(regressions)} workload(s) significantly slower at p99[/] (beyond the "
            f"margin, {fdr}): " + escape(", ".join(w.key for w in regressions[:6]))
        )
    else:
        console.print(f"No p99 regression beyond the margin ({fdr}).")


def inconclusive_hint(comp) -> str:
    """What would settle an inconclusive verdict, for this comparison's design."""
    from reviewkit.analysis.pairing import settle_hint

    return f"the interval crosses the margin; {settle_hint(comp.design.startswith('rounds'))}"


def print_check(report, console: Console) -> None:
    r = report.review
    console.print(
        f"[bold]{escape(r.title)}[/] · decision "
        f"{escape(str(r.decision.get('status', 'proposed')))} · owner "
        f"{escape(r.owner_name or 'NONE')} · rubric {escape(report.rubric.name)}"
    )
    for w in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    flags = report.red_flags
    console.print(f"\n[bold]Red flags: {len(flags)}[/]")
    for f in flags:
        console.print(
            f"  [{STATUS_STYLE[f.status]}]{f.status.upper()}[/] {f.item.title} "
            f"({f.item.severity}): {escape(f.summary)}"
        )
        console.print(f"      to clear: {escape(f.item.clears_with)}")
    t = DataTable(title="Findings", title_justify="left")
    for col in ("item", "severity", "status", "summary"):
        t.add_column(col, overflow="fold")
    for f in report.findings:
        t.add_row(
            f.item.id,
            f.item.severity,
            Text(f.status, style=STATUS_STYLE[f.status]),
            f.summary,
        )
    console.print(t)
    if report.disproof:
        console.print("[bold]Disproof criteria[/]")
        for d in report.disproof:
            console.print(f"  {d['status']}: {escape(d['statement'])} — {escape(d['why'])}")
    blocking = [f.item.id for f in report.findings if f.blocks]
    style = "green" if report.verdict == "pass" else "red"
    console.print(
        f"\nGate: [{style}]{report.verdict.upper()}[/]"
        + (f" — blocking: {', '.join(blocking)}" if blocking else "")
    )


# --- evidence commands: quality, sweep, soak, trace import -------------------------------------


def quality_table(doc: dict, out) -> Table:
    """`reviewkit quality`'s table: relative error (and a model's top-1 and KL) per workload and
    mapping; the suite decoder's top-1 and KL are marked a smoke check (random weights)."""
    title = f"Relative error against {doc['reference']}: {doc.get('source', '')} ({out})"
    table = DataTable(title=title, title_justify="left")
    for col in ("workload", "mapping", "status", "rel. error", "max abs error", "top-1", "KL"):
        table.add_column(col)
    for r in doc["results"]:
        mapping = ",".join(f"{k}={v}" for k, v in r.get("mapping", {}).items()) or "as exported"
        smoke = " (smoke)" if r.get("smoke_check") else ""
        table.add_row(
            r["id"],
            f"{mapping} [{r['dtype']}]",
            r["status"],
            f"{r['rel_error']:.2e}" if "rel_error" in r else r.get("reason", "")[:60],
            f"{r['max_abs_error']:.2e}" if "max_abs_error" in r else "",
            f"{r['top1_agreement']:.3f}{smoke}" if "top1_agreement" in r else "",
            f"{r['kl_divergence']:.2e}{smoke}" if "kl_divergence" in r else "",
        )
    return table


def sweep_table(doc: dict, out) -> Table:
    """`reviewkit sweep`'s table: one row per load level of every swept workload."""
    table = DataTable(title=f"Latency-throughput sweep ({out})", title_justify="left")
    for col in ("workload", "scenario", "offered/s", "achieved/s", "p50", "p99", "max", "valid"):
        table.add_column(col)
    for row in sweep_rows(doc):
        table.add_row(*row)
    return table


def sweep_rows(doc: dict) -> Sequence[tuple[str, ...]]:
    """(workload, scenario, offered/s, achieved/s, p50, p99, max, valid) per level, for a table."""
    rows = []
    for w in doc["workloads"]:
        if w["status"] != STATUS_OK:
            rows.append((w["id"], "error", "", "", "", "", "", w["reason"][:40]))
            continue
        levels = [w[loadgen.SINGLE_STREAM], w[loadgen.OFFLINE], *w[loadgen.SERVER]]
        for lv in levels:
            lat = lv["latency"]
            rows.append((
                w["id"],
                lv["scenario"],
                f"{lv['target_rate_per_s']:.3g}" if lv["target_rate_per_s"] else "",
                f"{lv['achieved_rate_per_s']:.3g}",
                f"{lat['p50_s'] * 1e3:.3g} ms" if lat else "",
                f"{lat['p99_s'] * 1e3:.3g} ms" if lat else "",
                f"{lat['max_s'] * 1e3:.3g} ms" if lat else "",
                "valid" if lv["valid"] else "INVALID: " + "; ".join(lv["invalid_reasons"]),
            ))  # fmt: skip
    return rows


def _pct_ci(ci) -> str:
    return change_ci(tuple(ci) if ci else None)


def soak_text(doc: dict) -> str:
    """`reviewkit soak`'s summary: verdict, trend, first -> last, throttling, sensors, energy."""
    a, w = doc["analysis"], doc["workload"]
    tr, fl, th = a["trend"], a["first_last"], a["throttling"]
    state = "complete" if doc["complete"] else "INCOMPLETE (interrupted)"
    lines = [
        f"soak: {w['id']} on {doc['device']} ({doc['profile']}), {doc['measured_window_s']:.3g} s"
        f" window, {len(doc['subwindows'])} sub-windows, {state}",
        f"verdict: {a['verdict']}: {'; '.join(a['reasons'])}",
    ]
    if tr["relative_change"] is not None:
        lines.append(
            f"throughput trend: {fmt_change(tr['relative_change'])} over {tr['span_s']:.3g} s "
            f"(95% CI {_pct_ci(tr['relative_change_ci'])}), mean {tr['mean']:.4g} calls/s"
        )
    else:
        lines.append(f"throughput trend: not computed: {tr['reason']}")
    if fl["ratio"] is not None:
        ci = fl["ratio_ci"]
        ci_text = f"{ci[0]:.3f} .. {ci[1]:.3f}" if ci else "no interval"
        lines.append(
            f"first -> last sub-window median per-call time: {fl['first_median_s'] * 1e3:.4g} ms"
            f" -> {fl['last_median_s'] * 1e3:.4g} ms, ratio {fl['ratio']:.3f}x "
            f"(95% CI {ci_text}){'; ' + fl['reason'] if fl['reason'] else ''}"
        )
    else:
        lines.append(f"first -> last: not computed: {fl['reason']}")
    lines.append(f"throttling: {th['status']}: {th['reason']}")
    lines.append("sensors:")
    for name, ok in doc["sensors"].items():
        state = "available" if ok["available"] else f"not available: {ok['reason']}"
        lines.append(f"  {name}: {state}")
    e = doc["energy"]
    if e["available"]:
        watts = e["mean_watts"]
        joules = ", ".join(
            f"{k} {j:.4g} J ({watts[k]:.3g} W)" if k in watts else f"{k} {j:.4g} J"
            for k, j in e["joules"].items()
        )
        lines.append(f"energy: {joules}")
    else:
        lines.append(f"energy: not available: {e['reason']}")
    lines.append(f"reproduce: {w['reproduce']}")
    return "\n".join(lines) + "\n"


def trace_summary_text(doc: dict) -> str:
    """`reviewkit trace import`'s summary: per trace op mix, device idle, unmapped, quality."""
    lines = []
    for t in doc["traces"]:
        head = f"{t['path']}: rank {t['rank']}"
        if t.get("world_size"):
            head += f" of {t['world_size']}"
        if t["devices"]:
            head += f", {t['devices'][0]}" + (
                f" (+{len(t['devices']) - 1})" if len(t["devices"]) > 1 else ""
            )
        head += f", {t['events']['total']} events, {t['window_s']:.3f} s window"
        lines.append(head)
        mix = t["op_mix"]
        lines.append(f"  op mix ({t['time_basis']} time, {mix['time_s'] * 1e3:.3f} ms):")
        for lt, v in mix["layer_types"].items():
            lines.append(f"    {lt:<14} {100 * v['share']:5.1f}%  {v['time_s'] * 1e3:10.3f} ms")
        u = mix["unmapped"]
        if u["time_s"] > 0:
            names = ", ".join(x["name"][:40] for x in u["top"][:3])
            lines.append(f"    {'unmapped':<14} {100 * u['share']:5.1f}%  (top: {names})")
        dev = t["device"]
        if dev["available"]:
            lines.append(
                f"  device idle {100 * dev['idle_share']:.1f}%, host overhead (device waits "
                f"on host) {100 * dev['host_overhead_share']:.1f}%"
            )
        else:
            lines.append(f"  device: not available: {dev['reason']}")
        if not t["record_shapes"]:
            lines.append("  shapes: not recorded (profile with record_shapes=True)")
        for q in t["quality"]:
            lines.append(f"  data quality: {q['rule']}: {q['count']} ({q['description']})")
    return "\n".join(lines) + "\n"
