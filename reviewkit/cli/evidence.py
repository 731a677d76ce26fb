"""Commands that write evidence a review cites: quality, sweep, soak, trace import, merge, diff."""

from __future__ import annotations

from pathlib import Path

import typer

from reviewkit.bundle import knobs
from reviewkit.cli.shared import progress_bar, save_evidence, user_errors
from reviewkit.common.errors import UsageError
from reviewkit.measure.loader_safety import INPUTS_LOADER, PROGRAM_LOADER
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import DEFAULT_SUITE_PROFILE, suite_profile


@user_errors
def quality(
    profile: str = typer.Option(DEFAULT_SUITE_PROFILE, help="suite profile: smoke | quick | full"),
    device: str = typer.Option("cpu", help="cpu | cuda | ..."),
    dtype: str | None = typer.Option(
        None,
        help="lower precisions to check, comma-separated: bf16, fp16, int8 (int8 is int8 "
        "dynamic quantization, --knob quantization=int8-dynamic); each one mapping, under "
        "--knob's settings when given (default: bf16,fp16,int8 without --knob)",
    ),
    knob: str = typer.Option(
        "",
        "--knob",
        help="the mapping to measure, spelt as `reviewkit run --knob` (dtype=... too; "
        "compile_mode is refused: quality measures eager numerics); KNOB=VALUE[,KNOB=VALUE]: "
        f"{knobs.help_text()}",
    ),
    only: str | None = typer.Option(None, help="glob(s) over workload ids (the suite only)"),
    model: Path | None = typer.Option(
        None,
        "--model",
        help="a team's torch.export program (.pt2) to measure instead of the suite, with "
        f"--inputs. Loaded with {PROGRAM_LOADER}",
    ),
    inputs: Path | None = typer.Option(
        None,
        "--inputs",
        help="--model's sample inputs: a torch.save file of a tensor, a tuple or list "
        f"(positional) or a dict (keyword inputs). Loaded with {INPUTS_LOADER}",
    ),
    logits: bool | None = typer.Option(
        None,
        "--logits/--no-logits",
        help="whether --model's first output is logits (top-1 and KL over its last dim); "
        "default: yes when that output has 2+ dims and a last dim of 2 or more",
    ),
    out: Path = typer.Option(Path("quality.json"), help="where to write the result"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Quality drift of a mapping (lower precision, quantization, knobs) against a float64
    reference: the suite's workloads, or a team's exported program."""
    from reviewkit.measure.quality import (
        measure_program_quality,
        measure_quality,
        quality_mappings,
    )

    mappings = quality_mappings(dtype, knob)
    if (model is None) != (inputs is None):
        given, missing = ("--model", "--inputs") if model else ("--inputs", "--model")
        raise UsageError(f"{given} without {missing}: a program is measured on its saved "
                         "sample inputs; pass both")  # fmt: skip
    if model is None and logits is not None:
        raise UsageError("--logits/--no-logits: only with --model (the suite's decoder is "
                         "the only suite workload with logits)")  # fmt: skip
    if model is not None and only is not None:
        raise UsageError("--only with --model: --only picks suite workloads; --model measures "
                         "the program alone")  # fmt: skip
    with progress_bar("quality") as on_progress:
        if model is not None:
            doc = measure_program_quality(model, inputs, device, mappings, logits, on_progress)
        else:
            doc = measure_quality(profile, device, mappings, only, on_progress)
    if save_evidence(doc, out, as_json):
        return
    from reviewkit.cli.console import quality_table, stdout_console

    stdout_console().print(quality_table(doc, out))


@user_errors
def sweep(
    profile: str = typer.Option(DEFAULT_SUITE_PROFILE, help="suite profile: smoke | quick | full"),
    device: str = typer.Option("cpu", help="cpu | cuda | ..."),
    dtype: str = typer.Option("fp32", help="one dtype: fp32 | bf16 | fp16"),
    only: str | None = typer.Option(
        None, help="glob(s) over workload ids (default: the profile's primary model cell)"
    ),
    sla_p99_s: float | None = typer.Option(
        None, "--sla-p99-s", help="search the highest load whose p99 meets this SLA (seconds)"
    ),
    min_queries: int | None = typer.Option(None, help="queries a level needs to be valid"),
    min_duration_s: float | None = typer.Option(None, help="seconds a level needs to be valid"),
    out: Path = typer.Option(Path("sweep.json"), help="where to write the result"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Latency-throughput sweep (single-stream, server with Poisson arrivals, offline)."""
    import dataclasses


    suite_profile(profile)
    if dtype not in suite.DTYPES:
        raise UsageError(f"--dtype {dtype!r}: choose one of {', '.join(suite.DTYPES)}")
    rules = suite_profile(profile).sweep_validity
    if min_queries is not None:
        if min_queries < 1:
            raise UsageError(f"--min-queries {min_queries}: expected a positive integer")
        rules = dataclasses.replace(rules, min_queries=min_queries)
    if min_duration_s is not None:
        if min_duration_s < 0:
            raise UsageError(f"--min-duration-s {min_duration_s}: expected seconds >= 0")
        rules = dataclasses.replace(rules, min_duration_s=min_duration_s)
    from reviewkit.measure.sweep import run_sweep

    with progress_bar("sweep") as on_progress:
        doc = run_sweep(profile, device, dtype, only, sla_p99_s, rules, on_progress)
    if save_evidence(doc, out, as_json):
        return
    from reviewkit.cli.console import stdout_console, sweep_table

    console = stdout_console()
    console.print(sweep_table(doc, out))
    for w in doc["workloads"]:
        knee = w.get("knee", {})
        line = (
            f"{w['id']}: knee at {knee['rate_per_s']:.3g} queries/s ({knee['rule']})"
            if knee.get("found")
            else f"{w['id']}: {knee.get('rule', w.get('reason', ''))}"
        )
        console.print(line, highlight=False, soft_wrap=True)
        if "sla" in w:
            s = w["sla"]
            console.print(
                f"  SLA p99 <= {s['p99_s'] * 1e3:.3g} ms: "
                + (
                    f"met up to {s['max_rate_per_s']:.3g} queries/s"
                    if s["met"]
                    else "not met at any valid level"
                )
                + (f" ({s['search_stopped']})" if s.get("search_stopped") else ""),
                highlight=False,
                soft_wrap=True,
            )


@user_errors
def soak(
    profile: str = typer.Option(DEFAULT_SUITE_PROFILE, help="suite profile: smoke | quick | full"),
    device: str = typer.Option("cpu", help="cpu | cuda | ..."),
    workload: str | None = typer.Option(
        None, help="one workload id (default: the profile's model workload at fp32)"
    ),
    window_s: float | None = typer.Option(
        None, "--window-s", help="seconds to run (default: smoke 2, quick 60, full 600)"
    ),
    subwindows: int | None = typer.Option(None, help="sub-windows to split it into (default 20)"),
    out: Path = typer.Option(Path("soak.json"), help="where to write the result"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Long-window stability: throughput per sub-window, clocks, temperatures, drift, throttling."""
    from reviewkit.measure.soak import run_soak

    suite_profile(profile)
    with progress_bar("soak") as on_progress:
        doc = run_soak(profile, device, workload, window_s, subwindows, on_progress)
    if save_evidence(doc, out, as_json):
        return
    from reviewkit.cli.console import soak_text, stdout_console

    stdout_console().print(soak_text(doc), end="", highlight=False, soft_wrap=True, markup=False)
    if not doc["complete"]:
        raise typer.Exit(130)


TRACE_SUMMARY_FILE = "trace_summary.json"


@user_errors
def trace_import(
    traces: list[Path] = typer.Argument(
        ..., help="PyTorch profiler traces (Chrome-trace .json or .json.gz), one per rank"
    ),
    out: Path = typer.Option(..., "--out", help="folder to write trace_summary.json into"),
    layer_map: list[Path] = typer.Option(
        [],
        "--layer-map",
        help="a team's layer-map TOML, tried before rubrics/layer_map.toml (repeatable)",
    ),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Summarise production traces: op mix by layer type, shapes, device idle, data quality."""
    from reviewkit.evidence.trace.layermap import load_layer_map
    from reviewkit.evidence.trace.summary import summarise

    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; pass a folder to write {TRACE_SUMMARY_FILE} in")
    seen: set[Path] = set()
    for p in traces:
        if not p.is_file():
            raise UsageError(f"{p}: no such trace file; pass .json or .json.gz profiler traces")
        if p.resolve() in seen:
            raise UsageError(f"{p}: given twice; pass each rank's trace once")
        seen.add(p.resolve())
    mapping = load_layer_map(layer_map)
    notes: list[str] = []
    with progress_bar("trace") as on_progress:
        doc = summarise(list(traces), mapping, on_progress, notes=notes)
    _write_trace_summary(doc, out / TRACE_SUMMARY_FILE, as_json, tuple(notes))


def _write_trace_summary(doc: dict, target: Path, as_json: bool, notes: tuple = ()) -> None:
    """Write a trace summary, show it (or its JSON), say each note and each trace that could
    not be summarised on stderr; exit 1 after writing when any could not."""
    from reviewkit.cli.shared import stderr

    if not save_evidence(doc, target, as_json):
        from reviewkit.cli.console import stdout_console, trace_summary_text

        console = stdout_console()
        text = trace_summary_text(doc)
        console.print(text, end="", highlight=False, soft_wrap=True, markup=False)
        console.print(f"wrote {target}", highlight=False, soft_wrap=True, markup=False)

    def say(line: str) -> None:
        stderr.print(line, highlight=False, soft_wrap=True, markup=False)

    for note in notes:
        say(f"reviewkit: note: {note}")
    failed = doc.get("failed_traces") or []
    for f in failed:
        say(f"reviewkit: error: {f['reason']}")
    if failed:
        total = len(failed) + len(doc["traces"])
        say(
            f"reviewkit: {len(failed)} of {total} traces could not be summarised (listed in "
            f"{target}'s failed_traces); the summary holds the rest"
        )
        raise typer.Exit(1)


@user_errors
def trace_merge(
    summaries: list[Path] = typer.Argument(
        ..., help="trace_summary.json files (`reviewkit trace import`) to merge, in this order"
    ),
    out: Path = typer.Option(..., "--out", help="folder to write the merged trace_summary.json"),
    as_json: bool = typer.Option(False, "--json", help="print the merged summary as JSON"),
) -> None:
    """Merge trace summaries (imported on the hosts where the traces lie) into one: the same
    summary as importing all their traces at once; a trace in two summaries counts once."""
    import time

    from reviewkit.evidence.trace.merge import merge

    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; pass a folder to write {TRACE_SUMMARY_FILE} in")
    merged = merge(list(summaries), time.time())
    _write_trace_summary(merged.doc, out / TRACE_SUMMARY_FILE, as_json, merged.notes)


@user_errors
def trace_diff(
    base: Path = typer.Argument(..., help="the base trace_summary.json (before the change)"),
    cand: Path = typer.Argument(..., help="the candidate trace_summary.json (after the change)"),
    out: Path | None = typer.Option(None, "--out", help="a file to write the diff (JSON) to"),
    as_json: bool = typer.Option(False, "--json", help="print the diff as JSON"),
) -> None:
    """Diff two trace summaries: time and count change per layer type and per op, ranked by
    contribution to the total change; device idle and host-overhead shares; new, vanished ops."""
    import shlex
    import sys
    import time

    from reviewkit.bundle.run import write_json_atomic
    from reviewkit.cli.shared import emit_json
    from reviewkit.evidence.trace.diff import diff

    if out is not None and out.is_dir():
        raise UsageError(f"--out {out}: is a folder; pass a file to write the diff to")
    doc = diff(base, cand).to_json(time.time())
    doc["command"] = shlex.join(["reviewkit", *sys.argv[1:]]) if sys.argv[1:] else None
    if out is not None:
        write_json_atomic(out, doc)
    if as_json:
        emit_json(doc)
        return
    from reviewkit.cli.console import stdout_console
    from reviewkit.cli.trace_diff_view import print_trace_diff

    console = stdout_console()
    print_trace_diff(doc, console)
    if out is not None:
        console.print(f"wrote {out}", highlight=False, soft_wrap=True, markup=False)


@user_errors
def trace_slice(
    summaries: list[Path] = typer.Argument(
        ..., help="trace_summary.json files (`reviewkit trace import`), recorded with shapes"
    ),
    out: Path = typer.Option(..., "--out", help="the slice file (JSON) to write"),
    cover: float = typer.Option(
        0.9, help="stop once the slice covers this share of the time it can reproduce"
    ),
    max_workloads: int = typer.Option(64, help="at most this many workloads"),
    as_json: bool = typer.Option(False, "--json", help="print the slice as JSON"),
) -> None:
    """Derive a production slice: production's own op shapes as workloads to measure
    (`reviewkit run --slice FILE`), by production time, and what is left out by reason."""
    import time

    from reviewkit.bundle.run import write_json_atomic
    from reviewkit.cli.shared import emit_json
    from reviewkit.evidence.trace.diff import load_summary
    from reviewkit.suite.production_slice import derive

    if out.is_dir():
        raise UsageError(f"--out {out}: is a folder; pass a file to write the slice to")
    docs = [(str(p), load_summary(p)) for p in summaries]
    doc = derive(docs, cover, max_workloads)
    doc["created_unix_s"] = round(time.time(), 3)
    if not doc["workloads"]:
        reasons = "; ".join(f"{r['reason']} ({r['share_of_production']:.0%})"
                            for r in doc["not_reproduced"][:3])  # fmt: skip
        raise UsageError(f"no op of {', '.join(map(str, summaries))} can be reproduced by the "
                         f"suite's kernels: {reasons or 'no mapped time'}")  # fmt: skip
    write_json_atomic(out, doc)
    if as_json:
        emit_json(doc)
        return
    from reviewkit.cli.console import stdout_console
    from reviewkit.cli.slice_view import print_slice

    console = stdout_console()
    print_slice(doc, console)
    console.print(f"wrote {out}; measure it with `reviewkit run --slice {out}`",
                  highlight=False, soft_wrap=True, markup=False)  # fmt: skip
