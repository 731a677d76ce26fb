"""`reviewkit project`: target workloads projected onto a device from measured efficiency."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from reviewkit.cli.shared import emit_json, parse_dtypes, user_errors
from reviewkit.cli.tables import DataTable, time_text
from reviewkit.common.errors import UsageError
from reviewkit.common.format import MISSING, pct

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun
    from reviewkit.analysis.project import Projected, Projection, TargetDevice, TargetWorkload

# A trace summary's target is every shape the suite's kernels reproduce, not a slice's first
# 90%: a projection of production's op mix leaves out only what it cannot price.
TRACE_COVER, TRACE_MAX_WORKLOADS = 1.0, 100_000
DEFAULT_MODEL_DTYPE = "bf16"  # what serving stacks run a decoder in
DEFAULT_BATCH = 1  # one request
DEFAULT_CONTEXT = 2048  # a prompt of 2k tokens, the shortest suite/serving.py prefills
DASH = "\u2013"  # the en dash between an interval's ends

# Said under a table with a share of roof over 100% (efficiency_fit.share_cap says why).
SHARE_PAST_ROOF_NOTE = (
    "a share of roof over 100%: memory-bound calls measured in the same memory level streamed "
    "faster than its bandwidth, a copy's rate (docs/metrics.md, the efficiency fit)"
)


def _trace_targets(summaries: list[Path]) -> tuple[list[TargetWorkload], dict]:
    """Production's op mix as targets: every shape of the summaries the suite's kernels
    reproduce, run as many times as production ran it; the rest named by reason."""
    from reviewkit.analysis.causal_work import causal_seqs
    from reviewkit.analysis.efficiency_fit import variant_of
    from reviewkit.analysis.project import TargetWorkload
    from reviewkit.evidence.trace.diff import load_summary
    from reviewkit.suite.production_slice import derive

    doc = derive([(str(p), load_summary(p)) for p in summaries], TRACE_COVER,
                 TRACE_MAX_WORKLOADS)  # fmt: skip
    rows = [TargetWorkload(w["id"], w["layer_type"], w["dtype"],
                           w["matmul_flops"] + w["other_flops"], w["bytes"],
                           variant_of(w["kernel"], w["params"]), w["production"]["count"],
                           causal_seqs=causal_seqs(w["kernel"], w["params"]))
            for w in doc["workloads"]]  # fmt: skip
    if not rows:
        raise UsageError(f"--trace-summary: no op of {', '.join(map(str, summaries))} can be "
                         "reproduced by the suite's kernels, so none can be projected")  # fmt: skip
    return rows, {"kind": "trace_summary", "summaries": [str(p) for p in summaries],
                  "time_basis": doc["time_basis"], "coverage": doc["coverage"],
                  "production_time_s": {w["id"]: w["production"]["time_s"]
                                        for w in doc["workloads"]},
                  "not_projected": doc["not_reproduced"]}  # fmt: skip


def _targets(
    profile: str | None, only: str | None, dtype: str | None, model: str | None,
    batch: int | None, context: int | None, measured_dtypes: list[str],
    trace_summary: list[Path] | None = None,
) -> tuple[list[TargetWorkload], dict]:  # fmt: skip
    from reviewkit.analysis.causal_work import causal_seqs
    from reviewkit.analysis.efficiency_fit import variant_of
    from reviewkit.analysis.project import TargetWorkload
    from reviewkit.suite import workloads as suite

    if sum(x is not None for x in (profile, model, trace_summary or None)) != 1:
        raise UsageError("pass one target: --profile P (suite workloads), --model NAME|"
                         "config.json (a decoder's prefill and decode) or --trace-summary "
                         "FILE (production's op mix)")  # fmt: skip
    if trace_summary:
        if only is not None or dtype is not None or batch is not None or context is not None:
            raise UsageError("--only, --dtype, --batch and --context do not apply to "
                             "--trace-summary: its shapes and dtypes are production's own")
        return _trace_targets(trace_summary)
    if profile is not None and (batch is not None or context is not None):
        raise UsageError("--batch and --context shape a --model target; a --profile's "
                         "workloads have their own shapes (narrow them with --only)")  # fmt: skip
    if model is not None and only is not None:
        raise UsageError("--only selects --profile workloads; a --model target is every "
                         "workload of its prefill and decode")  # fmt: skip
    if profile is not None:
        dtypes = parse_dtypes(dtype) if dtype else [
            d for d in suite.DTYPES if d in measured_dtypes] or list(suite.DTYPES)  # fmt: skip
        specs = suite.plan_specs(profile, dtypes, only)
        rows = [TargetWorkload(s.id, s.layer_type, s.dtype, s.flops, s.bytes,
                               variant_of(s.kernel, s.params),
                               causal_seqs=causal_seqs(s.kernel, s.params))
                for s in specs]  # fmt: skip
        return rows, {"kind": "profile", "profile": profile, "only": only, "dtypes": dtypes}
    from reviewkit.suite.model_targets import OMITTED, decoder_config, phase_workloads

    dtypes = parse_dtypes(dtype) if dtype else [DEFAULT_MODEL_DTYPE]
    if len(dtypes) != 1 or dtypes[0] not in suite.DTYPES:
        raise UsageError(f"--dtype {dtype!r} with --model: expected one of "
                         f"{', '.join(suite.DTYPES)}")  # fmt: skip
    cfg = decoder_config(model)
    batch = DEFAULT_BATCH if batch is None else batch
    context = DEFAULT_CONTEXT if context is None else context
    rows = [TargetWorkload(w.spec.id, w.spec.layer_type, w.spec.dtype, w.spec.flops,
                           w.spec.bytes, variant_of(w.spec.kernel, w.spec.params), w.count,
                           w.phase, causal_seqs(w.spec.kernel, w.spec.params))
            for w in phase_workloads(cfg, batch, context, dtypes[0])]  # fmt: skip
    return rows, {"kind": "model", "model": cfg.name, "config": {
        "hidden_size": cfg.hidden, "num_attention_heads": cfg.heads,
        "num_key_value_heads": cfg.kv_heads, "intermediate_size": cfg.ffn,
        "num_hidden_layers": cfg.layers, "vocab_size": cfg.vocab,
        "num_local_experts": cfg.experts, "num_experts_per_tok": cfg.top_k},
        "batch": batch, "context": context, "dtype": dtypes[0], "omitted": OMITTED,
        "tensor_parallel": 1}  # fmt: skip


def platform_devices(names: str, analysed: list[tuple[str, AnalysedRun]]) -> list[TargetDevice]:
    """Each named platform as a target device; where a --from run was measured on it (its
    torch name matches the platform's pattern, or its fingerprint is the platform's), that run's
    measured ceilings over the datasheet's and its fingerprint, so its efficiency is measured."""
    from reviewkit.analysis.project import device_of_platform
    from reviewkit.suite import platform_table

    devices = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        plat = platform_table.platform(name)
        fingerprint = None
        for path, run in analysed:
            hash_ = run.fingerprint.get("hash")
            on_it = platform_table.for_device(run.device_label)
            if (on_it is not None and on_it.key == plat.key) or hash_ == plat.fingerprint:
                when = time.strftime("%Y-%m-%d", time.gmtime(run.created_unix_s or 0))
                plat = platform_table.overlay_measured(plat, run.ceilings or {}, path, when)
                fingerprint = hash_
                break
        devices.append(device_of_platform(plat, fingerprint))
    return devices


def build_projection(
    runs: list[Path], profile: str | None, only: str | None, dtype: str | None,
    model: str | None, batch: int | None, context: int | None, device_profile: Path | None,
    platform: str | None = None, trace_summary: list[Path] | None = None,
) -> Projection:  # fmt: skip
    from reviewkit.analysis.efficiency_fit import points_of
    from reviewkit.analysis.project import (
        Projection,
        device_of_profile,
        device_of_run,
        project,
        run_noise_sd,
    )
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.run import load_run

    if not runs:
        raise UsageError("--from RUN_DIR is required: the measured runs to project from")
    analysed = [(str(p), analyse_run(load_run(p))) for p in runs]
    points, sources, devices = [], [], {}
    for path, run in analysed:
        found = points_of(run)
        points.extend(found)
        sources.append({"run": path, "device": run.device_label,
                        "fingerprint": run.fingerprint.get("hash"), "points": len(found),
                        "measured_workloads": len(run.measured_workloads)})  # fmt: skip
        dev = device_of_run(run, path)
        devices.setdefault(dev.fingerprint or dev.name, dev)
    if not points:
        raise UsageError(f"no measured workload with a ceiling in {', '.join(map(str, runs))}: "
                         "nothing to fit; pass runs recorded by `reviewkit run`")  # fmt: skip
    measured_dtypes = sorted({p.dtype for p in points})
    targets, target = _targets(profile, only, dtype, model, batch, context, measured_dtypes,
                               trace_summary)  # fmt: skip
    if platform and device_profile:
        raise UsageError("--platform and --device-profile both name the target device; pass one")
    if platform:
        chosen = platform_devices(platform, analysed)
    elif device_profile:
        chosen = [device_of_profile(device_profile)]
    else:
        chosen = list(devices.values())
    noise = run_noise_sd(run for _, run in analysed)
    rows = project(targets, chosen, points, noise)
    return Projection(tuple(sources), target, tuple(chosen), noise, rows)


def _interval(r: Projected) -> str:
    if r.low_s is None or r.high_s is None:
        return MISSING
    return f"{time_text(r.low_s)} {DASH} {time_text(r.high_s)}"


def print_projection(p: Projection, console: Console) -> None:
    from reviewkit.analysis.project import totals

    model = p.target.get("kind") == "model"
    counted = model or p.target.get("kind") == "trace_summary"
    if p.target.get("kind") == "trace_summary":
        c = p.target["coverage"]
        shapes = len(p.target["production_time_s"])
        console.print(
            f"production's op mix ({p.target['time_basis']} time): the {shapes} shapes the "
            f"suite's kernels reproduce, {pct(c['reproducible_share_of_production'])} of "
            f"{time_text(c['production_time_s'])}, each x its production count; the rest is "
            "not projected:", highlight=False, markup=False)  # fmt: skip
        for r in p.target["not_projected"]:
            console.print(f"  {pct(r['share_of_production'])} {r['reason']}", highlight=False,
                          markup=False)  # fmt: skip
    for dev in p.devices:
        rows = [r for r in p.workloads
                if (r.device, r.device_fingerprint) == (dev.name, dev.fingerprint)]  # fmt: skip
        console.print(f"[bold]Projected onto {escape(dev.name)}[/] ({escape(dev.source)})",
                      highlight=False)  # fmt: skip
        t = DataTable(title="Per workload (80% interval)", title_justify="left")
        cols = [
            "workload",
            *(["phase"] if model else []),
            *(["count"] if counted else []),
            "layer type",
            "roof",
            "share of roof",
            "overhead",
            "projected",
            "80% interval",
            "label",
            "nearest",
        ]
        for col in cols:
            left = col in ("workload", "phase", "layer type", "label")
            # an id is what a reader searches for: wrapped whole, never cut to an ellipsis
            t.add_column(col, justify="left" if left else "right",
                         overflow="fold" if col == "workload" else "ellipsis")  # fmt: skip
        for r in rows:
            t.add_row(
                r.id, *([r.phase] if model else []), *([str(r.count)] if counted else []),
                r.layer_type,
                time_text(r.roof_s), pct(r.share), time_text(r.overhead_s),
                time_text(r.projected_s), _interval(r),
                r.label if r.projected_s is not None else f"{r.label}: {r.reason}",
                MISSING if r.nearest_decades is None else f"{r.nearest_decades:.2f} dec",
            )  # fmt: skip
        console.print(t)
        lt = DataTable(title="Per layer type (count x time summed)", title_justify="left")
        recorded = p.target.get("production_time_s")  # a trace's: what production took
        extra = ["production (its device)"] if recorded else []
        for col in ("phase", "layer type", "workloads", "projected", "80% interval", *extra,
                    "not available"):  # fmt: skip
            lt.add_column(col, justify="left" if col in ("phase", "layer type") else "right")
        groups = [*totals(rows, by_layer=True), *(totals(rows, by_layer=False) if model else [])]
        for g in groups:
            span = (
                MISSING if g.low_s is None else f"{time_text(g.low_s)} {DASH} {time_text(g.high_s)}"
            )
            # production's time of the rows projected, so the two columns compare like for like
            took = [] if not recorded else [MISSING if g.projected_s is None else time_text(sum(
                recorded[r.id] for r in rows
                if r.layer_type == g.layer_type and r.projected_s is not None))]  # fmt: skip
            lt.add_row(g.phase or MISSING, g.layer_type or "(whole pass)", str(g.workloads),
                       time_text(g.projected_s), span, *took, str(g.not_available))  # fmt: skip
        console.print(lt)
    notes = sorted({text for r in p.workloads if r.projected_s is not None
                    for text in (r.reason, r.unmeasured) if text})  # fmt: skip
    if any(r.share is not None and r.share > 1 for r in p.workloads):
        notes.append(SHARE_PAST_ROOF_NOTE)
    for note in notes:
        console.print(f"  note: {note}", highlight=False, markup=False)


@user_errors
def project_cmd(
    from_: list[Path] = typer.Option(
        ..., "--from", help="a measured run bundle to fit efficiency on (repeatable)"
    ),
    profile: str | None = typer.Option(
        None, help="target: the suite profile's workloads (smoke | quick | full | serving)"
    ),
    only: str | None = typer.Option(None, help="with --profile: glob(s) over workload ids"),
    dtype: str | None = typer.Option(
        None,
        help="comma-separated dtypes (default: those the runs measured; one dtype with "
        f"--model, default {DEFAULT_MODEL_DTYPE})",
    ),
    model: str | None = typer.Option(
        None,
        help="target: Llama-3-8B | Llama-3-70B | Mixtral-8x7B, or a HuggingFace config.json: "
        "its prefill and one decode step",
    ),
    batch: int | None = typer.Option(
        None, help=f"with --model: sequences in the batch (default {DEFAULT_BATCH})"
    ),
    context: int | None = typer.Option(
        None,
        help="with --model: prompt tokens prefilled, and the KV cache a decode step reads "
        f"(default {DEFAULT_CONTEXT})",
    ),
    device_profile: Path | None = typer.Option(
        None,
        "--device-profile",
        help="project onto this device profile (default: each --from run's own device)",
    ),
    platform: str | None = typer.Option(
        None,
        help="project onto these platforms of the platform table (comma-separated keys, e.g. "
        "h100-sxm,mi300x: `reviewkit platforms` lists them); a --from run measured on one "
        "lends it its measured ceilings",
    ),
    trace_summary: list[Path] = typer.Option(
        [], "--trace-summary",
        help="target: production's op mix, every shape of this trace summary (`reviewkit trace "
        "import`, with shapes) the suite's kernels reproduce, x its count (repeatable)",
    ),
    out: Path | None = typer.Option(None, help="also write the JSON document here (atomic)"),
    as_json: bool = typer.Option(False, "--json", help="print the JSON document on stdout"),
) -> None:
    """Project suite workloads, a model's layers or production's op mix onto a device from
    measured efficiency: each layer type's share of roof fitted against arithmetic intensity,
    size and dtype, measured overhead kept apart, an 80% interval that widens away from the
    measured shapes, and a label (measured on that device, or borrowed from another)."""
    projection = build_projection(from_, profile, only, dtype, model, batch, context,
                                  device_profile, platform, trace_summary or None)  # fmt: skip
    doc = projection.to_json()
    if out is not None:
        from reviewkit.bundle.run import write_json_atomic
        from reviewkit.common.files import output_errors

        with output_errors(out, "projection"):
            write_json_atomic(out, doc)
    if as_json:
        emit_json(doc)
        return
    from reviewkit.cli.console import stdout_console

    print_projection(projection, stdout_console())
