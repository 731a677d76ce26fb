"""Measure under torch.distributed: every rank times the suite's distributed part in lockstep,
and rank 0 gathers one bundle (torchrun's ranks, or local ones spawned for --nproc)."""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from reviewkit.analysis.energy import energy_absent
from reviewkit.analysis.overhead import IN_COLLECTIVE_LATENCY, NOT_MEASURED
from reviewkit.bundle.run import STATUS_ERROR, STATUS_NOT_RUN, STATUS_OK
from reviewkit.common.errors import ReviewkitError, UsageError
from reviewkit.common.hashing import sha256_json
from reviewkit.measure import allocator, runner
from reviewkit.measure import rounds as rounds_mod
from reviewkit.measure.device import (
    device_fingerprint,
    first_line,
    resolve_device,
    synchroniser,
)
from reviewkit.measure.device_profile import obtain
from reviewkit.measure.rank_kernels import (
    RankInfo,
    build,
    link_ceiling,
    lockstep_samples,
    remeasure_latency,
    step_samples,
    topology,
)
from reviewkit.suite import collectives as coll
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import suite_profile
from reviewkit.suite.workloads import WorkloadSpec

# A rendezvous or collective that has not completed in this long has lost a rank (torch's own
# default is 30 minutes for gloo, which reads as a hang). Long enough for rank 0 to calibrate
# a device profile while the others wait (the quick calibration takes <= 30 s).
DEFAULT_TIMEOUT_S = 300.0
# The environment torchrun sets for every worker (torch.distributed.run).
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
BACKENDS = ("gloo", "nccl", "mpi", "ucc", "xccl")
# Fault injection for the failure tests ("RANK:STEP": that rank kills itself with SIGKILL before
# its STEP-th workload step, as a real rank dies: no Python cleanup, no goodbye to its peers;
# "RANK:STEP:hang": it stops answering instead, as a rank stuck in a driver call does).
KILL_RANK_ENV = "REVIEWKIT_TEST_KILL_RANK_AT"

# A workload's `overhead` record under torch.distributed (analysis/overhead.py reads it). A
# collective's own host cost (its issue, the backend's progress) is part of its smallest-message
# latency alpha, which t_comm = alpha + wire bytes / beta already counts: no overhead apart.
COLLECTIVE_OVERHEAD = {
    "available": True,
    "method": IN_COLLECTIVE_LATENCY,
    "reason": (
        "a collective's host cost is inside its latency alpha (its smallest message, "
        "ceilings.interconnect.latency_s), counted in t_comm = alpha + wire bytes / beta: "
        "t_o = 0"
    ),
}
# On one rank nothing crosses a link and no alpha is measured: the host cost is nowhere counted.
ONE_RANK_COLLECTIVE_OVERHEAD = {
    "available": False,
    "method": NOT_MEASURED,
    "reason": "one rank: no link, so no latency alpha holds the collective's host cost",
}
COMPUTE_OVERHEAD = {
    "available": False,
    "method": NOT_MEASURED,
    "reason": (
        "a distributed run's compute workloads: overhead is measured by a single-process "
        "`reviewkit run`"
    ),
}


def overhead_record(spec: WorkloadSpec, world_size: int) -> dict:
    """The `overhead` record of one workload of the distributed part."""
    if spec.layer_type != "collective":
        return dict(COMPUTE_OVERHEAD)
    return dict(COLLECTIVE_OVERHEAD if world_size > 1 else ONE_RANK_COLLECTIVE_OVERHEAD)


class RankFailure(ReviewkitError):
    """A rank died, timed out or disagreed: the measured part is kept, the run is incomplete."""

    exit_code = 1


class _Terminated(Exception):
    """SIGTERM from the launcher (torchrun and --nproc stop the other ranks when one fails)."""


@dataclass(frozen=True)
class DistributedRequest:
    run: runner.RunRequest
    backend: str | None = None  # None: nccl on CUDA, gloo otherwise
    timeout_s: float = DEFAULT_TIMEOUT_S


def rank_from_env(environ: dict | None = None) -> RankInfo:
    env = os.environ if environ is None else environ
    missing = [k for k in TORCHRUN_ENV if not env.get(k)]
    if missing:
        raise UsageError(
            f"--distributed needs the environment torchrun sets ({', '.join(missing)} missing): "
            "launch with `torchrun --nproc-per-node N -m reviewkit run --distributed ...`, or "
            "add --nproc N to spawn N local ranks"
        )
    try:
        world = int(env["WORLD_SIZE"])
        rank = int(env["RANK"])
        local_rank = int(env.get("LOCAL_RANK", rank))
        local_world = int(env.get("LOCAL_WORLD_SIZE", world))
    except ValueError as exc:
        raise UsageError(f"torchrun's RANK/WORLD_SIZE are not integers: {exc}") from None
    return RankInfo(rank, world, local_rank, local_world)


def choose_backend(requested: str | None, device: torch.device) -> str:
    backend = requested or ("nccl" if device.type == "cuda" else "gloo")
    available = [b for b in BACKENDS if _available(b)]
    if backend not in available:
        raise UsageError(
            f"--backend {backend}: not available in this torch build "
            f"({torch.__version__}); available: {', '.join(available) or 'none'}"
        )
    if backend == "nccl" and device.type != "cuda":
        raise UsageError(f"--backend nccl needs CUDA devices, not {device}; use --backend gloo")
    return backend


def _available(backend: str) -> bool:
    check = getattr(dist, f"is_{backend}_available", None)
    try:
        return bool(check()) if check else False
    except Exception:
        return False


# --- ceilings a rank divides by ---------------------------------------------------------------


def share_ceilings(ceilings: dict, rank_threads: int, ranks_per_host: int) -> dict:
    """A CPU device profile is the whole host's; ranks on one host share it. Each rank's compute
    and private caches scale with its threads over the profile's, and the shared levels (LLC,
    DRAM) divide among the host's ranks. The bundle says so."""
    profile_threads = ceilings.get("threads") or rank_threads
    own = min(1.0, rank_threads / profile_threads)
    shared = 1.0 / ranks_per_host

    def scaled(entry: dict, factor: float) -> dict:
        out = dict(entry)
        for key in ("peak", "measured", "low", "high"):
            if isinstance(out.get(key), (int, float)):
                out[key] = out[key] * factor
        return out

    out = dict(ceilings)
    out["compute"] = {k: scaled(v, own) for k, v in ceilings["compute"].items()}
    out["memory"] = [
        scaled(level, shared if level.get("shared") or level is ceilings["memory"][-1] else own)
        for level in ceilings.get("memory") or []
    ]
    out["bandwidth"] = scaled(ceilings["bandwidth"], shared)
    out["rank_share"] = {
        "rank_threads": rank_threads,
        "profile_threads": profile_threads,
        "compute_scale": own,
        "shared_level_scale": shared,
        "reason": (
            f"{ranks_per_host} rank(s) share this host's CPU: each divides by {own:.3g} of the "
            f"profile's compute and private caches ({rank_threads} of {profile_threads} "
            f"threads) and {shared:.3g} of its shared levels"
        ),
    }
    return out


# --- the run ------------------------------------------------------------------------------------


def reproduce_command(spec: WorkloadSpec, request: DistributedRequest, world: int) -> str:
    r = request.run
    return (
        f"torchrun --nproc-per-node {world} -m reviewkit run --distributed --profile {r.profile} "
        f"--device {r.device} --dtype {spec.dtype} --only '{spec.id}'"
    )


def _identity(request: DistributedRequest, device: torch.device) -> dict:
    fp = device_fingerprint(device) or {}
    return {
        "suite_hash": suite.suite_identity().hash,
        "distributed_hash": _specs_hash(request, dist.get_world_size()),
        "reviewkit": runner.__version__,
        "torch": torch.__version__,
        "request": [request.run.profile, list(request.run.dtypes), request.run.only],
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "threads": torch.get_num_threads(),
        "device": str(device),
        "device_name": runner.device_name(device),
        "fingerprint": fp.get("hash"),
        "fingerprint_label": fp.get("label"),
    }


def _specs_hash(request: DistributedRequest, world: int) -> str:
    specs = plan(request.run, world)
    return sha256_json([s.definition() for s in specs])[:16]


def plan(request: runner.RunRequest, world_size: int) -> list[WorkloadSpec]:
    suite.plan_specs(request.profile, request.dtypes, None)  # validates profile and dtypes
    specs = coll.distributed_specs(request.profile, request.dtypes, world_size, request.only)
    if not specs:
        raise UsageError(
            f"--only {request.only!r} matches no workload of the distributed part; list them "
            f"with `reviewkit suite --profile {request.profile} --distributed --world-size "
            f"{world_size}`"
        )
    return specs


def _disagreement(identities: list[dict]) -> str:
    first = identities[0]
    for key in ("suite_hash", "distributed_hash", "reviewkit", "torch", "request"):
        for rank, other in enumerate(identities):
            if other[key] != first[key]:
                return (
                    f"ranks disagree on {key}: rank 0 has {first[key]!r}, rank {rank} "
                    f"{other[key]!r}; install the same reviewkit and torch on every host and "
                    "pass every rank the same arguments"
                )
    return ""


def _maybe_die(rank: int, step: int) -> None:
    spec = os.environ.get(KILL_RANK_ENV, "")
    if spec == f"{rank}:{step}":
        os.kill(os.getpid(), signal.SIGKILL)
    if spec == f"{rank}:{step}:hang":
        while True:
            time.sleep(3600)


def run(request: DistributedRequest, on_progress=None) -> dict | None:
    """Measure the distributed part on this rank; rank 0 returns the gathered run document
    (complete, or incomplete with the reason), the others None. A failure on another rank
    surfaces on rank 0 as an incomplete document; on the others as RankFailure."""
    info = rank_from_env()
    base = resolve_device(request.run.device)
    device = torch.device("cuda", info.local_rank) if base.type == "cuda" else base
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = choose_backend(request.backend, device)
    if request.run.threads is not None:
        if request.run.threads < 1:
            raise UsageError(f"--threads {request.run.threads}: expected a positive integer")
        torch.set_num_threads(request.run.threads)
    specs = plan(request.run, info.world_size)
    progress = on_progress or (lambda *_: None)
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        _init(backend, request.timeout_s, info)
    except Exception as exc:
        signal.signal(signal.SIGTERM, previous)
        raise RankFailure(
            f"rank {info.rank}: the rendezvous at {os.environ.get('MASTER_ADDR')}:"
            f"{os.environ.get('MASTER_PORT')} failed within {request.timeout_s:g} s "
            f"({first_line(exc)}); check that every rank was started and can reach it"
        ) from None
    try:
        with allocator.steady_heap(device.type) as heap:
            doc = _measure(request, info, device, backend, specs, progress)
        if doc is not None:
            doc["environment"]["cpu_allocator"] = heap
        return doc
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_terminated(signum, frame):
    raise _Terminated("stopped by the launcher (SIGTERM): another rank failed")


def process_group_backend(backend: str) -> str:
    """The backend string init_process_group gets. The harness's own bookkeeping (the call
    count it broadcasts, the samples and identities it gathers) moves CPU tensors, which NCCL
    cannot carry ("No backend type associated with device type cpu", seen on an H200): under
    NCCL those go through gloo, and the measured collectives, on CUDA tensors, through NCCL."""
    return "cpu:gloo,cuda:nccl" if backend == "nccl" else backend


def _init(backend: str, timeout_s: float, info: RankInfo) -> None:
    dist.init_process_group(
        process_group_backend(backend),
        rank=info.rank,
        world_size=info.world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )


def _measure(request, info, device, backend, specs, progress) -> dict | None:
    rank, world = info.rank, info.world_size
    r = request.run
    profile = suite_profile(r.profile)
    policy = profile.sampling
    plan_of_rounds = rounds_mod.plan_rounds(len(specs), r.rounds or profile.rounds, r.round_seed)
    started = time.time()
    doc = None
    records: list[dict] = []
    if rank == 0:
        energy = (None, runner.sensors.Availability(False, "not metered under --distributed"))
        doc = runner.new_run_doc(
            r, device, energy, runner.sensors.POWERCAP, policy, plan_of_rounds, started
        )
        doc["only"] = r.only
        doc["knobs"].update(world_size=world, backend=backend)
        records = [runner.base_record(s, reproduce_command(s, request, world)) for s in specs]
        for record, spec in zip(records, specs, strict=True):
            record["energy"] = energy_absent("not metered under --distributed")
            record["rank_samples_s"] = [[] for _ in range(world)]
            record["overhead"] = overhead_record(spec, world)
            if spec.params.get("wire_bytes") is not None:
                record["wire_bytes"] = spec.params["wire_bytes"]
        doc["workloads"] = records
    step = 0
    try:
        identities = [None] * world
        dist.all_gather_object(identities, _identity(request, device))
        hosts = [i["host"] for i in identities]
        if doc is not None:
            doc["distributed"] = _distributed_doc(request, info, backend, identities, device)
        why = _disagreement(identities)
        if why:
            raise RankFailure(why)
        ceilings = [None]
        if rank == 0:
            rank_threads, on_host = torch.get_num_threads(), hosts.count(hosts[0])
            # The ranks on a host run at once: the ceilings they share are the host's at all of
            # their threads together, each rank then taking its share (share_ceilings).
            if device.type == "cpu":
                torch.set_num_threads(rank_threads * on_host)
            try:
                obtained = obtain(
                    device, r.dtypes, r.profile,
                    Path(r.device_profile) if r.device_profile else None, r.recalibrate,
                    lambda s: progress(s, 0, len(specs)),
                )  # fmt: skip
            finally:
                torch.set_num_threads(rank_threads)
            ceilings = [obtained.ceilings()]
            if device.type == "cpu":
                ceilings = [share_ceilings(ceilings[0], rank_threads, on_host)]
        dist.broadcast_object_list(ceilings, src=0)
        progress("measuring the link", 0, len(specs))
        link = link_ceiling(r.profile, device, backend, world)
        if doc is not None:
            doc["ceilings"] = {**ceilings[0], "interconnect": link}
        sync = synchroniser(device)
        total = plan_of_rounds.rounds * len(specs)
        for round_index, order in enumerate(plan_of_rounds.orders):
            one_round = rounds_mod.round_policy(policy, plan_of_rounds.rounds,
                                                first=round_index == 0)  # fmt: skip
            for i in order:
                step += 1
                _maybe_die(rank, step)
                progress(f"round {round_index + 1}: {specs[i].id}", step - 1, total)
                _one_step(specs[i], i, round_index, one_round, policy, device, info, sync,
                          records)  # fmt: skip
        progress("measuring the link's latency again", total, total)
        remeasure_latency(link, device, world)
        dist.barrier()
        if doc is not None:
            doc["complete"] = True
    except (_Terminated, RankFailure, RuntimeError, ValueError, OSError) as exc:
        if doc is None:
            raise RankFailure(f"rank {rank}: {first_line(exc)}") from None
        _mark_incomplete(doc, exc, request.timeout_s)
    else:
        _close()
    if doc is not None:
        doc["wall_s"] = round(time.time() - started, 3)
    return doc


def _close() -> None:
    # already torn down by a failure: nothing to release
    with contextlib.suppress(Exception):
        dist.destroy_process_group()


def _one_step(spec, i, round_index, one_round, policy, device, info, sync, records) -> None:
    """One round of one workload on every rank: build, agree it built, sample in lockstep,
    gather to rank 0 (which merges it into the record)."""
    rank = info.rank
    if rank == 0:
        record = records[i]
        skip = round_index > 0 and (
            record["status"] != STATUS_OK or rounds_mod.budget_spent(record, policy)
        )
    else:
        skip = False
    decision = [skip]
    dist.broadcast_object_list(decision, src=0)
    if decision[0]:
        return
    status, reason, fn = STATUS_OK, "", None
    try:
        fn = build(spec, device, info)
    except Exception as exc:
        status = runner.failure_status(exc)
        reason = first_line(exc)
    built = [None] * info.world_size
    dist.all_gather_object(built, (status, reason))
    failed = [(k, s, why) for k, (s, why) in enumerate(built) if s != STATUS_OK]
    result = None
    if not failed:
        start = time.perf_counter()
        try:
            warmup, samples = lockstep_samples(fn, one_round, sync, rank)
            result = (warmup, samples, time.perf_counter() - start, "")
        except RuntimeError:
            raise  # a collective failed: another rank is gone; the run stops here
    gathered = [None] * info.world_size if rank == 0 else None
    dist.gather_object(result, gathered, dst=0)
    if rank != 0:
        return
    if failed:
        k, s, why = failed[0]
        measured = {**records[i], "status": s, "reason": f"rank {k}: {why}"}
        measured["samples_s"], measured["warmup_samples_s"] = [], []
        records[i] = rounds_mod.merge_round(records[i], measured, round_index)
        return
    per_rank = [g[1] for g in gathered]
    measured = {
        **records[i],
        "status": STATUS_OK,
        "reason": "",
        "samples_s": [round(t, runner.SAMPLE_RESOLUTION_DIGITS) for t in step_samples(per_rank)],
        "warmup_samples_s": [round(t, runner.SAMPLE_RESOLUTION_DIGITS) for t in gathered[0][0]],
        "stopped_by": "target",
        "round_wall_s": max(g[2] for g in gathered),
    }
    ranks_before = records[i]["rank_samples_s"] if round_index > 0 else [[] for _ in per_rank]
    merged = rounds_mod.merge_round(records[i], measured, round_index)
    merged["rank_samples_s"] = [
        before + [round(t, runner.SAMPLE_RESOLUTION_DIGITS) for t in now]
        for before, now in zip(ranks_before, per_rank, strict=True)
    ]
    records[i] = merged


def _distributed_doc(request, info, backend, identities, device) -> dict:
    hosts = [i["host"] for i in identities]
    per_host: dict[str, list[int]] = {}
    for rank, host in enumerate(hosts):
        per_host.setdefault(host, []).append(rank)
    return {
        "world_size": info.world_size,
        "backend": backend,
        "timeout_s": request.timeout_s,
        "launcher": "reviewkit --nproc" if os.environ.get("REVIEWKIT_NPROC") else "torchrun",
        "hosts": per_host,
        "ranks_per_host": {h: len(r) for h, r in per_host.items()},
        "ranks": [
            {
                "rank": k,
                "host": i["host"],
                "pid": i["pid"],
                "threads": i["threads"],
                "device": i["device"],
                "device_name": i["device_name"],
                "fingerprint": i["fingerprint"],
                "fingerprint_label": i["fingerprint_label"],
            }
            for k, i in enumerate(identities)
        ],
        "distributed_hash": identities[0]["distributed_hash"],
        "topology": topology(device, backend),
        "incomplete": None,
    }


def _backend_message(exc: BaseException) -> str:
    """gloo's error without its source path and its boilerplate advice."""
    text = re.sub(r"\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*", "", first_line(exc))
    return text.split(". This is typically caused")[0].strip()


def _mark_incomplete(doc: dict, exc: BaseException, timeout_s: float) -> None:
    """Rank 0 after a failure: the document keeps what was measured and says why the rest is
    missing. A collective that fails now has lost a peer: it died, hung past the timeout, or
    raised an error (its own output says which)."""
    if isinstance(exc, (RankFailure, _Terminated)):
        why = str(exc)
    else:
        why = (
            f"a collective with the other ranks failed ({_backend_message(exc)}): a rank died, "
            f"hung past the {timeout_s:g} s timeout, or raised an error (see its output)"
        )
    doc["complete"] = False
    dist_doc = doc.get("distributed")
    if dist_doc is not None:
        dist_doc["incomplete"] = why
    doc["interrupted"] = f"incomplete: {why}"
    for record in doc["workloads"]:
        if record["status"] == STATUS_NOT_RUN:
            record["reason"] = f"not measured: {why}"
        elif record["status"] == STATUS_OK and not record["samples_s"]:
            record.update(status=STATUS_ERROR, reason=f"not measured: {why}")
    if "ceilings" in doc and not doc["ceilings"]:
        doc["ceilings"] = {}
