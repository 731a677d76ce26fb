"""Commands that measure or read runs: run, ab, show, suite, sensors, mfu."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from reviewkit.bundle import knobs
from reviewkit.cli.shared import (
    default_out,
    emit_json,
    parse_dtypes,
    progress_bar,
    stderr,
    user_errors,
)
from reviewkit.common.errors import UsageError
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import DEFAULT_SUITE_PROFILE, SUITE_PROFILE_NAMES

# run and ab take the same device-profile options
DEVICE_PROFILE_OPTION = typer.Option(
    None,
    "--device-profile",
    help="divide by this device profile (from `reviewkit calibrate --out`) instead of the "
    "cached one; refused when taken on another device or torch build",
)
RECALIBRATE_OPTION = typer.Option(
    False, "--recalibrate", help="measure the ceilings again and renew the cached profile"
)
# One spelling of the mapping knobs for `run --knob` and `ab --baseline/--candidate`.
KNOBS_HELP = f"KNOB=VALUE[,KNOB=VALUE]: {knobs.help_text()}"


@user_errors
def run(
    profile: str = typer.Option(
        DEFAULT_SUITE_PROFILE, help="suite profile: smoke | quick | full | serving (accelerators)"
    ),
    device: str = typer.Option("cpu", help="cpu | cuda | cuda:N | mps | xpu"),
    dtype: str | None = typer.Option(
        None, help="comma-separated: fp32,bf16,fp16 (default: all three; a slice's own)"
    ),
    only: str | None = typer.Option(None, help="glob(s) over workload ids, comma-separated"),
    slice_file: Path | None = typer.Option(
        None, "--slice", help="measure a production slice (`reviewkit trace slice --out`) "
        "instead of the profile's workloads, at the profile's sampling policy",
    ),
    threads: int | None = typer.Option(None, help="torch intra-op threads (default: torch's)"),
    knob: str = typer.Option(
        "", "--knob", help=f"the mapping, held for the whole run, ceilings included; {KNOBS_HELP}"
    ),
    rounds: int | None = typer.Option(
        None,
        help="rounds per workload, each in a seeded random order, spread over the run "
        "(default: smoke 2, quick 5, full 10, serving 3)",
    ),
    seed: int = typer.Option(0, help="seed of the rounds' workload orders"),
    device_profile: Path | None = DEVICE_PROFILE_OPTION,
    recalibrate: bool = RECALIBRATE_OPTION,
    out: Path | None = typer.Option(
        None, help="bundle folder (default: runs/<time>-<profile>-<device>)"
    ),
    yes: bool = typer.Option(
        False, "--yes",
        help="measure a serving run projected past 30 minutes (a CPU) without asking",
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON summary on stdout"),
    distributed: bool = typer.Option(
        False,
        "--distributed",
        help="measure the suite's distributed part on every rank of torch.distributed "
        "(launched by torchrun, or --nproc); rank 0 writes the bundle",
    ),
    backend: str | None = typer.Option(
        None, help="torch.distributed backend with --distributed (default: nccl on cuda, gloo)"
    ),
    nproc: int | None = typer.Option(
        None, help="with --distributed and no torchrun: spawn this many local ranks"
    ),
    timeout: float = typer.Option(
        300.0,
        help="with --distributed: seconds a rendezvous or collective may take before the run "
        "stops and keeps what it measured",
    ),
) -> None:
    """Measure the suite on this machine and write a run bundle (run.json)."""
    from reviewkit.measure import runner as measure
    from reviewkit.measure.rounds import MAX_ROUNDS

    if rounds is not None and not 1 <= rounds <= MAX_ROUNDS:
        raise UsageError(f"--rounds {rounds}: expected an integer from 1 to {MAX_ROUNDS}")
    settings = knobs.parse_settings(knob, "--knob")
    if "dtype" in settings:
        raise UsageError("--knob dtype=...: the dtypes of a run are --dtype (a list); use it")
    if "threads" in settings and threads is not None:
        raise UsageError("--threads and --knob threads=... both given; keep one")
    if settings and (distributed or nproc is not None):
        raise UsageError("--knob with --distributed: a distributed run measures at torch's "
                         "settings; set threads with --threads, or measure the knob in one "
                         "process")  # fmt: skip
    if slice_file is not None and (distributed or nproc is not None):
        raise UsageError("--slice with --distributed: a slice is measured in one process")
    if slice_file is not None and not slice_file.is_file():
        raise UsageError(f"--slice {slice_file}: no such file; derive one with "
                         "`reviewkit trace slice SUMMARY --out FILE`")  # fmt: skip
    dtypes = (parse_dtypes(dtype) if dtype else
              _slice_dtypes(slice_file) if slice_file else suite.DTYPES)  # fmt: skip
    request = measure.RunRequest(
        profile, device, dtypes, only, threads, rounds=rounds, round_seed=seed,
        device_profile=str(device_profile) if device_profile else None, recalibrate=recalibrate,
        settings=settings, yes=yes, slice_path=str(slice_file) if slice_file else None,
    )  # fmt: skip
    out_dir = out or default_out("slice" if slice_file else profile, device)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a folder; pick another path")
    if distributed or nproc is not None or backend is not None:
        _run_distributed(request, distributed, backend, nproc, timeout, out_dir, as_json)
        return
    measure.plan(request)  # fail on bad input before any device work
    if slice_file is not None:
        from reviewkit.suite.production_slice import identity_of

        kind = device.split(":", 1)[0]
        for note in identity_of(str(slice_file), kind, request.dtypes)["notes"]:
            stderr.print(f"note: {escape(note)}", highlight=False)

    with progress_bar() as on_progress:
        doc = measure.run(request, on_progress,
                          lambda text: stderr.print(escape(text), highlight=False))  # fmt: skip
    # The exact command line, so the whole run can be reproduced (each workload also carries
    # its own single-workload command).
    doc["command"] = shlex.join(["reviewkit", *sys.argv[1:]]) if sys.argv[1:] else None
    _analyse_write_print(doc, out_dir, as_json)
    if not doc["complete"]:
        raise typer.Exit(130)


def _slice_dtypes(path: Path) -> tuple[str, ...]:
    """The dtypes a slice's workloads run in, in the suite's order."""
    from reviewkit.suite.production_slice import load_slice

    found = {w.dtype for w in load_slice(path).specs}
    return tuple(d for d in suite.DTYPES if d in found)


def _analyse_write_print(doc: dict, out_dir: Path, as_json: bool) -> Path:
    """A measured run document as `run` ends: analysed, written, printed; its path."""
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.records import Run
    from reviewkit.bundle.run import write_run
    from reviewkit.cli.console import print_run, stdout_console, summary

    run = analyse_run(Run.from_json(doc))
    path = write_run(out_dir, run)
    if as_json:
        emit_json(summary(run, str(path)))
    else:
        print_run(run, stdout_console(), str(path))
    return path


def _run_distributed(request, distributed, backend, nproc, timeout, out_dir, as_json) -> None:
    import os

    from reviewkit.measure import distributed as dmeasure
    from reviewkit.measure import local_ranks

    if not distributed:
        raise UsageError("--backend and --nproc go with --distributed; add it")
    if not timeout > 0:
        raise UsageError(f"--timeout {timeout}: expected a positive number of seconds")
    under_torchrun = bool(os.environ.get("RANK") and os.environ.get("WORLD_SIZE"))
    if under_torchrun and nproc is not None:
        raise UsageError("--nproc spawns local ranks; under torchrun drop it (torchrun's "
                         "--nproc-per-node sets the ranks)")  # fmt: skip
    if not under_torchrun and nproc is None:
        dmeasure.rank_from_env()  # says how to launch
    world = nproc if nproc is not None else int(os.environ["WORLD_SIZE"])
    dmeasure.plan(request, world)  # fail on bad input before any rank starts
    drequest = dmeasure.DistributedRequest(request, backend, timeout)
    command = shlex.join(["reviewkit", *sys.argv[1:]]) if sys.argv[1:] else None
    if nproc is not None:
        code = local_ranks.spawn_local(nproc, distributed_rank, (drequest, out_dir, as_json,
                                                               command), timeout)  # fmt: skip
        raise typer.Exit(code)
    distributed_rank(drequest, out_dir, as_json, command)


def distributed_rank(drequest, out_dir: Path, as_json: bool, command: str | None) -> None:
    """One rank of `run --distributed` (torchrun's worker or a --nproc child): measure; rank 0
    analyses and writes the bundle, incomplete when a rank failed. Exits with the code."""
    import contextlib
    import os

    from reviewkit.common.errors import ReviewkitError
    from reviewkit.measure import distributed as dmeasure

    rank0 = os.environ.get("RANK") == "0"
    bar = progress_bar() if rank0 else contextlib.nullcontext(None)
    try:
        with bar as on_progress:
            doc = dmeasure.run(drequest, on_progress)
    except ReviewkitError as exc:
        stderr.print(
            f"[red]reviewkit: error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
        )
        sys.exit(exc.exit_code)
    if doc is None:
        return
    doc["command"] = command
    path = _analyse_write_print(doc, out_dir, as_json)
    if not doc["complete"]:
        why = (doc.get("distributed") or {}).get("incomplete") or doc.get("interrupted")
        stderr.print(
            f"[red]reviewkit: error:[/] {escape(str(why))}; the measured part is kept in "
            f"{escape(str(path))} (marked incomplete)",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
        sys.exit(dmeasure.RankFailure.exit_code)


@user_errors
def ab(
    baseline: str = typer.Option(
        "", "--baseline",
        help=f"the baseline mapping (empty: torch's defaults); {KNOBS_HELP}; dtype=fp32|bf16|fp16",
    ),
    candidate: str = typer.Option("", "--candidate", help="the candidate mapping, as --baseline"),
    profile: str = typer.Option(
        DEFAULT_SUITE_PROFILE, help="suite profile: smoke | quick | full | serving (accelerators)"
    ),
    device: str = typer.Option("cpu", help="cpu | cuda | cuda:N | mps | xpu"),
    dtype: str | None = typer.Option(
        None, help="dtype(s) of a side that does not set dtype (default fp32; a slice's own)"
    ),
    only: str | None = typer.Option(None, help="glob(s) over workload ids, comma-separated"),
    slice_file: Path | None = typer.Option(
        None, "--slice", help="measure a production slice (`reviewkit trace slice --out`): "
        "production's own shapes, each side in its dtype",
    ),
    rounds: int | None = typer.Option(None, help="rounds (default: smoke 2, quick 10, full 10)"),
    seed: int = typer.Option(0, help="seed of the rounds' workload orders"),
    device_profile: Path | None = DEVICE_PROFILE_OPTION,
    recalibrate: bool = RECALIBRATE_OPTION,
    out: Path = typer.Option(
        ..., help="folder for baseline/run.json, candidate/run.json and pairing.json"
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON summary on stdout"),
) -> None:
    """Interleaved A/B: both mappings measured turn about in one process, two bundles."""
    from reviewkit.analysis.compare import compare
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.records import Run
    from reviewkit.bundle.run import write_run
    from reviewkit.cli.console import print_comparison, stdout_console
    from reviewkit.measure import ab as ab_mod
    from reviewkit.measure.rounds import MAX_ROUNDS
    from reviewkit.review.checks import CHECKS
    from reviewkit.review.gate import margins_of
    from reviewkit.review.rubric import load_rubric

    if rounds is not None and not 1 <= rounds <= MAX_ROUNDS:
        raise UsageError(f"--rounds {rounds}: expected an integer from 1 to {MAX_ROUNDS}")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder; pick another path")
    if slice_file is not None and not slice_file.is_file():
        raise UsageError(f"--slice {slice_file}: no such file; derive one with "
                         "`reviewkit trace slice SUMMARY --out FILE`")  # fmt: skip
    dtypes = (parse_dtypes(dtype) if dtype else
              _slice_dtypes(slice_file) if slice_file else ("fp32",))  # fmt: skip
    request = ab_mod.AbRequest(
        ab_mod.parse_settings(baseline, "--baseline"),
        ab_mod.parse_settings(candidate, "--candidate"),
        profile, device, dtypes, only, rounds, seed,
        str(device_profile) if device_profile else None, recalibrate,
        str(slice_file) if slice_file else None,
    )  # fmt: skip
    if request.baseline == request.candidate:
        stderr.print(
            "A/A: the two sides are the same mapping; the comparison should say equivalent "
            "or inconclusive on every workload (anything else is noise called a change)"
        )
    with progress_bar() as on_progress:
        base_doc, cand_doc, pairing = ab_mod.ab(request, on_progress)
    command = shlex.join(["reviewkit", *sys.argv[1:]]) if sys.argv[1:] else None
    paths, runs = {}, {}
    for side, doc in ((ab_mod.BASELINE, base_doc), (ab_mod.CANDIDATE, cand_doc)):
        doc["command"] = command
        runs[side] = analyse_run(Run.from_json(doc))
        paths[side] = write_run(out / side, runs[side])
    pairing_path = ab_mod.write_pairing(out, pairing)
    comparison = compare(runs[ab_mod.BASELINE], runs[ab_mod.CANDIDATE],
                         str(paths["baseline"].parent), str(paths["candidate"].parent),
                         margins=margins_of(load_rubric(None, CHECKS)))  # fmt: skip
    if as_json:
        emit_json({"baseline": str(paths["baseline"]), "candidate": str(paths["candidate"]),
                    "pairing": str(pairing_path), "comparison": comparison.to_json()})  # fmt: skip
    else:
        print_comparison(comparison, stdout_console())
        Console().print(f"bundles: {paths['baseline']}, {paths['candidate']}; {pairing_path}")
    if not (base_doc["complete"] and cand_doc["complete"]):
        raise typer.Exit(130)


@user_errors
def calibrate(
    profile: str = typer.Option(
        "quick", help="suite profile: smoke | quick | full (sizes screened, trials)"
    ),
    device: str = typer.Option("cpu", help="cpu | cuda | cuda:N | mps | xpu"),
    dtype: str = typer.Option(
        ",".join(suite.DTYPES),
        help="comma-separated: fp32,bf16,fp16, and int8, fp8 for quantized kernels' ceilings",
    ),
    threads: int | None = typer.Option(
        None, help="intra-op threads to calibrate at (default: torch's, one per core); a run "
        "divides by the ceilings of its own --threads",
    ),
    float32_matmul_precision: str = typer.Option(
        "highest", help="highest | high | medium (torch.set_float32_matmul_precision): the "
        "precision fp32 GEMMs may use, which moves the fp32 ceiling",
    ),
    out: Path | None = typer.Option(
        None, help="also write the profile here (pin it later with --device-profile)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the profile as JSON"),
    run_to_run: bool = typer.Option(
        False,
        "--run-to-run",
        help="instead of the ceilings, measure this device's run-to-run figure: separate short "
        "runs of a fixed subset (quick, fp32), kept per fingerprint; runs then record it",
    ),
    runs: int | None = typer.Option(
        None, help="with --run-to-run: separate runs to measure (default 8; 0 with --from)"
    ),
    every_s: float | None = typer.Option(
        None,
        "--every-s",
        help="with --run-to-run: start a run every this many seconds at the soonest (default "
        "15), so the runs meet more than one state of the machine",
    ),
    from_: list[Path] | None = typer.Option(
        None,
        "--from",
        help="with --run-to-run: also pool this run bundle, recorded on this device "
        "(repeatable); a run pooled before counts once",
    ),
    fresh: bool = typer.Option(
        False, "--fresh", help="with --run-to-run: discard the runs pooled so far"
    ),
) -> None:
    """Measure this device's ceilings (GEMM per dtype, bandwidth per memory level) in repeated
    trials, at one thread count and float32 matmul precision, and cache them as its device
    profile for those settings, which run and ab then divide by; or, with --run-to-run,
    how far separate runs on it differ (the allowance between separate runs)."""
    from reviewkit.bundle import profile as profiles
    from reviewkit.cli.console import print_profile, stdout_console
    from reviewkit.measure import device_profile as obtaining
    from reviewkit.measure.device import resolve_device

    if run_to_run or from_ or runs is not None or fresh or every_s is not None:
        from reviewkit.cli.noise import calibrate_run_to_run

        calibrate_run_to_run(device, run_to_run, runs, list(from_ or []), fresh, out, as_json,
                             every_s)  # fmt: skip
        return
    if profile not in SUITE_PROFILE_NAMES:
        raise UsageError(f"--profile {profile!r}: expected one of {', '.join(SUITE_PROFILE_NAMES)}")
    dtypes = parse_dtypes(dtype)
    unknown = [d for d in dtypes if d not in suite.CEILING_DTYPES]
    if unknown or not dtypes:
        raise UsageError(
            f"--dtype {dtype!r}: expected a comma-separated list of "
            f"{', '.join(suite.CEILING_DTYPES)}"
        )
    if out is not None and out.exists() and out.is_dir():
        raise UsageError(f"--out {out}: is a folder; give a file name, e.g. {out / 'profile.json'}")
    if threads is not None and threads < 1:
        raise UsageError(f"--threads {threads}: expected a positive integer")
    if float32_matmul_precision not in profiles.FP32_MATMUL_PRECISIONS:
        raise UsageError(f"--float32-matmul-precision {float32_matmul_precision!r}: expected "
                         f"one of {', '.join(profiles.FP32_MATMUL_PRECISIONS)}")  # fmt: skip
    dev = resolve_device(device)
    with progress_bar("calibrating") as on_progress:
        doc = obtaining.new_profile_at(
            dev, dtypes, profile, threads, float32_matmul_precision, lambda s: on_progress(s, 0, 0)
        )
    fp = doc["fingerprint"]
    cached = profiles.save(
        doc, profiles.cache_path(dev.type, fp["hash"], profile, doc["settings"])
    )
    if out is not None:
        profiles.save(doc, out)
    if as_json:
        emit_json(doc)
    else:
        print_profile(doc, stdout_console(), [str(p) for p in (cached, out) if p])


@user_errors
def show(
    run_dir: Path = typer.Argument(..., help="a run bundle folder or its run.json"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON summary on stdout"),
) -> None:
    """Print a bundle's tables again, without importing torch."""
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.run import load_run
    from reviewkit.cli.console import print_run, stdout_console, summary

    run = analyse_run(load_run(run_dir))
    if as_json:
        emit_json(summary(run, str(run_dir)))
    else:
        print_run(run, stdout_console(), str(run_dir))


@user_errors
def suite_cmd(
    profile: str = typer.Option(
        DEFAULT_SUITE_PROFILE, help="suite profile: smoke | quick | full | serving"
    ),
    dtype: str = typer.Option(",".join(suite.DTYPES), help="comma-separated dtypes"),
    only: str | None = typer.Option(None, help="glob(s) over workload ids"),
    distributed: bool = typer.Option(
        False, "--distributed", help="list the part `run --distributed` measures on every rank"
    ),
    world_size: int = typer.Option(2, help="with --distributed: the ranks it is planned for"),
    as_json: bool = typer.Option(False, "--json", help="print the definitions as JSON"),
) -> None:
    """List the suite's workloads (ids, FLOPs, bytes) without measuring."""
    if distributed:
        from reviewkit.suite.collectives import distributed_specs

        if world_size < 1:
            raise UsageError(f"--world-size {world_size}: expected a positive number of ranks")
        suite.plan_specs(profile, parse_dtypes(dtype), None)  # validates profile and dtypes
        specs = distributed_specs(profile, parse_dtypes(dtype), world_size, only)
        if not specs:
            raise UsageError(f"--only {only!r} matches no workload of the distributed part")
    else:
        specs = suite.plan_specs(profile, parse_dtypes(dtype), only)
    ident = suite.suite_identity()
    if as_json:
        emit_json(
            {
                "suite": ident.to_json(),
                "profile": profile,
                "workloads": [s.definition() for s in specs],
            }
        )
        return
    from reviewkit.cli.console import stdout_console

    console = stdout_console()
    console.print(f"{ident.name} {ident.version} (hash {ident.hash}) · profile {profile}")
    for s in specs:
        console.print(
            f"{s.id}  [dim]{s.flops / 1e9:.3g} GFLOP · {s.bytes / 1e6:.3g} MB · {s.source_model}[/]"
        )


@user_errors
def sensors(
    as_json: bool = typer.Option(False, "--json", help="print the survey as JSON"),
) -> None:
    """What energy, temperature and clock counters this machine exposes, or why not."""
    from reviewkit.cli.console import stdout_console
    from reviewkit.measure.sensors import survey

    result = survey()
    if as_json:
        emit_json(result)
        return
    console = stdout_console()
    for name, entry in result.items():
        state = "available" if entry["available"] else f"not available: {entry['reason']}"
        console.print(f"{name:12s} {state}", highlight=False)


@user_errors
def mfu(
    params: float = typer.Option(..., help="model parameters N"),
    layers: int = typer.Option(..., help="layers L"),
    heads: int = typer.Option(..., help="attention heads H"),
    head_dim: int = typer.Option(..., help="head dimension Q"),
    seq: int = typer.Option(..., help="sequence length T"),
    tokens_per_s: float = typer.Option(..., help="observed tokens per second (all devices)"),
    peak_flops_per_s: float = typer.Option(..., help="peak FLOP/s of one device"),
    devices: int = typer.Option(1, help="number of devices D"),
    mode: str = typer.Option("train", help="train (6N + 12LHQT) | infer (2N + 4LHQT)"),
    no_attention: bool = typer.Option(False, "--no-attention", help="drop the attention term"),
    as_json: bool = typer.Option(False, "--json", help='print {"mfu": ...} as JSON'),
) -> None:
    """Model-level MFU after PaLM (Chowdhery et al. 2022, appendix B)."""
    from reviewkit.suite.mfu import MODES, model_mfu

    if mode not in MODES:
        raise UsageError(f"--mode {mode!r} is unknown; choose one of {', '.join(MODES)}")
    try:
        r = model_mfu(
            params,
            layers,
            heads,
            head_dim,
            seq,
            tokens_per_s,
            peak_flops_per_s,
            devices,
            mode,
            attention=not no_attention,
        )
    except ValueError as exc:
        raise UsageError(f"reviewkit mfu: {exc}") from exc
    if as_json:
        emit_json(r.to_json())
        return
    Console().print(
        f"MFU {100 * r.mfu:.1f}%  ({r.flops_per_token:.4g} FLOPs/token · "
        f"{r.achieved_flops_per_s:.4g} FLOP/s achieved of {r.peak_flops_per_s:.4g} peak)"
    )
