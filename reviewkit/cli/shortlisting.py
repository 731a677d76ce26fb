"""`reviewkit shortlist`: the platforms a model's SLA, memory and power make worth benchmarking."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from reviewkit.cli.shared import emit_json, user_errors
from reviewkit.cli.tables import DataTable, time_text
from reviewkit.common.errors import UsageError
from reviewkit.common.format import MISSING

if TYPE_CHECKING:
    from reviewkit.analysis.shortlist import Candidate, Shortlist

DEFAULT_DTYPE = "bf16"  # what serving stacks run a decoder in (`reviewkit project`'s default)
SHORTLIST_FILE = "shortlist.json"
CHART_FILE = "trade-curve.vl.json"  # the Vega-Lite spec, data inline
CHART_SVG = "trade-curve.svg"  # drawn offline by vl-convert, as the packet's charts are
DASH = "\u2013"  # the en dash between an interval's ends


def _platforms(names: str | None) -> list:
    """The named platforms (an unknown one is refused with the valid ones), or every
    accelerator of the table: a CPU is a platform only when named."""
    from reviewkit.suite import platform_table

    table = platform_table.default_table()
    if names is None:
        return [p for p in table.platforms if p.device != platform_table.CPU]
    chosen = [table.platform(n) for n in names.split(",") if n.strip()]
    if not chosen:
        raise UsageError(f"--platforms {names!r}: expected comma-separated keys, from "
                         f"{', '.join(table.platform_keys())}")  # fmt: skip
    return list({p.key: p for p in chosen}.values())


def build_shortlist(
    model: str, batch: int, context: int, sla_p99_s: float, runs: list[Path],
    *, dtype: str = DEFAULT_DTYPE, output_tokens: int | None = None,
    min_throughput_per_s: float | None = None, power_w: float | None = None,
    platforms: str | None = None, rubric: Path | None = None,
) -> Shortlist:  # fmt: skip
    from reviewkit.analysis.efficiency_fit import points_of
    from reviewkit.analysis.project import run_noise_sd
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.analysis.shortlist import DEFAULT_OUTPUT_TOKENS, Request, shortlist
    from reviewkit.analysis.shortlist_sizing import read_policy
    from reviewkit.bundle.run import load_run
    from reviewkit.cli.projecting import platform_devices
    from reviewkit.review.rubric import DEFAULT_RUBRIC
    from reviewkit.suite import workloads as suite
    from reviewkit.suite.model_targets import decoder_config

    if not runs:
        raise UsageError("--runs RUN_DIR is required: the measured runs whose efficiency is "
                         "projected onto each platform (the repository's samples/ hold two: "
                         "--runs samples/cpu-quick-epyc-2core --runs samples/gpu-quick-h200)")
    if dtype not in suite.DTYPES:
        raise UsageError(f"--dtype {dtype!r}: expected one of {', '.join(suite.DTYPES)}")
    output_tokens = DEFAULT_OUTPUT_TOKENS if output_tokens is None else output_tokens
    for name, value in (("--batch", batch), ("--context", context),
                        ("--output-tokens", output_tokens)):  # fmt: skip
        if value < 1:
            raise UsageError(f"{name} {value}: expected a positive integer")
    for name, value in (("--sla-p99-s", sla_p99_s), ("--min-throughput-per-s",
                        min_throughput_per_s), ("--power-w", power_w)):  # fmt: skip
        if value is not None and not value > 0:
            raise UsageError(f"{name} {value}: expected a positive number")
    cfg = decoder_config(model)
    chosen = _platforms(platforms)
    policy = read_policy(rubric or DEFAULT_RUBRIC)
    analysed = [(str(p), analyse_run(load_run(p))) for p in runs]
    points, sources = [], []
    for path, run in analysed:
        found = points_of(run)
        points.extend(found)
        sources.append({"run": path, "device": run.device_label,
                        "fingerprint": run.fingerprint.get("hash"), "points": len(found)})
    if not points:
        raise UsageError(f"no measured workload with a ceiling in {', '.join(map(str, runs))}: "
                         "nothing to fit; pass runs recorded by `reviewkit run`")  # fmt: skip
    devices = platform_devices(",".join(p.key for p in chosen), analysed)
    req = Request(cfg, batch, context, dtype, output_tokens, sla_p99_s, min_throughput_per_s,
                  power_w)  # fmt: skip
    noise = run_noise_sd(run for _, run in analysed)
    return shortlist(req, list(zip(chosen, devices, strict=True)), points, noise, policy,
                     sources)  # fmt: skip


def chart_rows(sl: Shortlist) -> list[dict]:
    return [{"platform": c.key, "status": c.status, "rank": c.rank, "tp": c.tp,
             "latency_s": c.latency_s.value, "latency_low_s": c.latency_s.low,
             "latency_high_s": c.latency_s.high, "decode_tokens_per_s": c.decode_tokens_per_s,
             "energy_j": c.energy_j_per_output_token.value,
             "energy_low_j": c.energy_j_per_output_token.low,
             "energy_high_j": c.energy_j_per_output_token.high, "risk": c.risk}
            for c in sl.candidates]  # fmt: skip


def trade_chart(sl: Shortlist) -> dict:
    from reviewkit.render.charts import trade_curve

    return trade_curve(chart_rows(sl), sl.request.sla_p99_s)


def document(sl: Shortlist) -> dict:
    """The shortlist as the evidence file a review cites: the evidence header (kind, schema,
    tool, time) and the command line that wrote it."""
    import shlex
    import sys
    import time

    from reviewkit.evidence.files import SHORTLIST, header

    argv = sys.argv[1:]
    return {**header(SHORTLIST, time.time()), **sl.to_json(),
            "command": shlex.join(["reviewkit", *argv]) if argv else None}  # fmt: skip


def write_outputs(sl: Shortlist, doc: dict, out: Path) -> list[Path]:
    """shortlist.json, the chart's spec and its SVG, each written atomically into `out`."""
    from reviewkit.bundle.run import write_json_atomic
    from reviewkit.common.files import output_errors, write_text_atomic
    from reviewkit.render.charts import to_svg

    spec = trade_chart(sl)
    svg = to_svg(spec)
    paths = [out / SHORTLIST_FILE, out / CHART_FILE, out / CHART_SVG]
    with output_errors(out, "shortlist"):
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(paths[0], doc)
        write_json_atomic(paths[1], spec)
        write_text_atomic(paths[2], svg)
    return paths


def _span(value: float | None, low: float | None, high: float | None, unit: str = "") -> str:
    if value is None:
        return MISSING
    if unit:
        return f"{value:.3g} {unit} ({low:.3g}{DASH}{high:.3g})"
    return f"{time_text(value)} ({time_text(low)}{DASH}{time_text(high)})"


def _row(c: Candidate) -> list[str]:
    e = c.energy_j_per_output_token
    mem = c.memory
    need = f"{mem.per_device_bytes / 1e9:.1f}"
    usable = MISSING if mem.usable_bytes is None else f"{mem.usable_bytes / 1e9:.1f}"
    return [str(c.rank), c.key, c.status, MISSING if c.tp is None else str(c.tp),
            f"{need} / {usable} GB", _span(c.latency_s.value, c.latency_s.low, c.latency_s.high),
            MISSING if c.decode_tokens_per_s is None else f"{c.decode_tokens_per_s:.4g}",
            _span(e.value, e.low, e.high, "J"), f"{c.risk:g}", c.efficiency or MISSING]


def print_shortlist(sl: Shortlist, console: Console, out: Path | None) -> None:
    r = sl.request
    console.print(
        f"[bold]Platform shortlist[/] for {r.model.name} ({r.model.parameters() / 1e9:.1f}B "
        f"parameters, {r.dtype}), batch {r.batch}, context {r.context}, {r.output_tokens} "
        f"output tokens, SLA {r.sla_p99_s:g} s", highlight=False)  # fmt: skip
    t = DataTable(title="Ranked (80% intervals)", title_justify="left")
    for col in ("rank", "platform", "status", "TP", "memory a device", "latency",
                "decode tokens/s", "energy / output token", "risk", "efficiency"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("platform", "status", "efficiency")
                     else "right", overflow="fold")  # fmt: skip
    for c in sl.candidates:
        t.add_row(*_row(c))
    console.print(t)
    for c in sl.candidates:
        console.print(f"{c.rank}. {c.key}: {c.rank_reason}", highlight=False, markup=False)
        for item in c.risk_items:
            console.print(f"   risk {item.key} ({item.weight:g}): {item.reason}",
                          highlight=False, markup=False)  # fmt: skip
        for cmd in c.commands:
            console.print(f"   $ {cmd}", highlight=False, markup=False)
        if c.commands_note:
            console.print(f"   ({c.commands_note})", highlight=False, markup=False)
    for line in sl.summary():
        console.print(f"  note: {line}", highlight=False, markup=False)
    if out is not None:
        console.print(f"  wrote {out / SHORTLIST_FILE}, {out / CHART_FILE}, {out / CHART_SVG}",
                      highlight=False, markup=False)  # fmt: skip


@user_errors
def shortlist_cmd(
    model: str = typer.Option(..., help="Llama-3-8B | Llama-3-70B | Mixtral-8x7B, or a "
                              "HuggingFace config.json"),
    batch: int = typer.Option(..., help="sequences served together"),
    context: int = typer.Option(..., help="prompt tokens a sequence prefills, and the KV cache "
                                "each decode step reads"),
    sla_p99_s: float = typer.Option(..., "--sla-p99-s", help="the latency target (seconds), "
                                    "held against one request's projected service time"),
    output_tokens: int | None = typer.Option(None, help="tokens generated a sequence "
                                             "(default 128)"),
    min_throughput_per_s: float | None = typer.Option(
        None, "--min-throughput-per-s", help="the least decode tokens/s one replica must give"),
    power_w: float | None = typer.Option(None, "--power-w", help="board power budget per "
                                         "device (W); caps TDP, excludes a board that cannot "
                                         "run under it"),
    platforms: str | None = typer.Option(None, help="comma-separated platform-table keys "
                                         "(default: every accelerator in the table)"),
    runs: list[Path] = typer.Option(None, "--runs", help="a measured run bundle to fit "
                                    "efficiency on (repeatable; required)"),
    dtype: str = typer.Option(DEFAULT_DTYPE, help="the one dtype the model is served in"),
    rubric: Path | None = typer.Option(None, help="the rubric whose [shortlist] table gives the "
                                       "headroom and risk weights (default: reviewkit's)"),
    out: Path | None = typer.Option(None, help="write shortlist.json and the trade-curve chart "
                                    "(.vl.json and .svg) into this folder"),
    as_json: bool = typer.Option(False, "--json", help="print the JSON document on stdout"),
) -> None:  # fmt: skip
    """Rank platforms for a model by projected service time against an SLA, memory fit, energy
    per token and engineering risk, and list the commands that benchmark each shortlisted one."""
    sl = build_shortlist(model, batch, context, sla_p99_s, list(runs or []), dtype=dtype,
                         output_tokens=output_tokens, min_throughput_per_s=min_throughput_per_s,
                         power_w=power_w, platforms=platforms, rubric=rubric)  # fmt: skip
    doc = document(sl)
    if out is not None:
        write_outputs(sl, doc, out)
    if as_json:
        emit_json(doc)
        return
    from reviewkit.cli.console import stdout_console

    print_shortlist(sl, stdout_console(), out)
