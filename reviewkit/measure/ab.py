"""Interleaved A/B: baseline and candidate mappings measured turn about, in one process.

Two runs measured one after the other see different machines: a neighbour arrives, the clock
drifts, pages land elsewhere (Abedi & Brecht, ICPE 2017). Here each round visits the workloads
in a seeded random order and measures every workload under both mappings in one window, call
by call (A B, B A, ...; the side that warms up first alternating by round), so a drift hits
both sides alike and the rounds pair. The result is two ordinary run bundles sharing one
calibration (one denominator) and a pairing record that `compare` reads to resample the rounds
in pairs.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from reviewkit.analysis.ceilings import moved_settings
from reviewkit.analysis.compare import shape_key
from reviewkit.analysis.energy import energy_absent
from reviewkit.analysis.pairing import CALLS_ALTERNATED
from reviewkit.bundle import knobs
from reviewkit.bundle.records import Run
from reviewkit.bundle.run import STATUS_ERROR, STATUS_OK, STATUS_TIMEOUT
from reviewkit.common.errors import UsageError
from reviewkit.measure import allocator, compiled, device_time, overhead, runner, sensors
from reviewkit.measure import rounds as rounds_mod
from reviewkit.measure.device import device_timed, resolve_device
from reviewkit.measure.device_profile import obtain
from reviewkit.measure.mapping import KnobMapping
from reviewkit.measure.timing import collect_alternating
from reviewkit.suite import production_slice
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import DEFAULT_SUITE_PROFILE, suite_profile
from reviewkit.suite.workloads import WorkloadSpec

BASELINE, CANDIDATE = "baseline", "candidate"
PAIRING_KIND = "reviewkit.ab_pairing"
PAIRING_FILE = "pairing.json"



def parse_settings(text: str, option: str) -> dict[str, object]:
    """One side's `KNOB=VALUE[,KNOB=VALUE]`: the knobs `ab` can switch in one process."""
    return knobs.parse_settings(text, option, in_process=True)


@dataclass
class Side(KnobMapping):
    """One side of an A/B: its mapping (the settings that hold while its workloads are built
    and measured), its label and the workloads it measures."""

    label: str = ""
    specs: list[WorkloadSpec] = field(default_factory=list)


@dataclass(frozen=True)
class AbRequest:
    baseline: dict
    candidate: dict
    profile: str = DEFAULT_SUITE_PROFILE
    device: str = "cpu"
    dtypes: tuple[str, ...] = ("fp32",)
    only: str | None = None
    rounds: int | None = None
    round_seed: int = rounds_mod.ROUND_SEED
    device_profile: str | None = None
    recalibrate: bool = False
    slice_path: str | None = None  # a production slice's workloads instead of the profile's


def ab_policy(profile: str):
    """The suite profile's sampling policy with `ab`'s longer target (its budget is unchanged):
    `ab_min_time_s` and `ab_min_samples` (suite/profiles.py says why)."""
    record = suite_profile(profile)
    return replace(record.sampling, min_time_s=record.ab_min_time_s,
                   min_samples=record.ab_min_samples)  # fmt: skip


def _sides(request: AbRequest) -> tuple[Side, Side]:
    sides = []
    for label, settings in ((BASELINE, request.baseline), (CANDIDATE, request.candidate)):
        dtypes = (str(settings["dtype"]),) if "dtype" in settings else request.dtypes
        specs = (production_slice.plan_slice(Path(request.slice_path), dtypes, request.only)
                 if request.slice_path else suite.plan_specs(request.profile, dtypes,
                                                             request.only))  # fmt: skip
        sides.append(Side(settings=dict(settings), dtypes=dtypes, label=label, specs=specs))
    base, cand = sides
    if base.dtypes != cand.dtypes and (len(base.dtypes) != 1 or len(cand.dtypes) != 1):
        raise UsageError(
            "--baseline/--candidate: when the sides' dtypes differ each side measures one dtype "
            f"(got {', '.join(base.dtypes)} against {', '.join(cand.dtypes)}); pass --dtype D"
        )
    return base, cand


def _pairs(base: Side, cand: Side) -> list[tuple[int | None, int | None]]:
    """(baseline index, candidate index) of each workload measured: by shape when the dtypes
    differ, else by id; a workload only one side has is measured alone."""
    by_shape = base.dtypes != cand.dtypes
    key = (lambda s: shape_key(s.id, s.dtype)) if by_shape else (lambda s: s.id)
    cand_index = {key(s): i for i, s in enumerate(cand.specs)}
    pairs = [(i, cand_index.pop(key(s), None)) for i, s in enumerate(base.specs)]
    return pairs + [(None, j) for j in cand_index.values()]


def ab(
    request: AbRequest,
    on_progress: Callable[[str, int, int], None] | None = None,
    candidate_wrap: Callable[[Callable[[], object]], Callable[[], object]] | None = None,
) -> tuple[dict, dict, dict]:
    """Measure both sides interleaved; (baseline doc, candidate doc, pairing record).
    `candidate_wrap` is the benchmarks' seam for a known injected effect (no command has it)."""
    base, cand = _sides(request)
    cand.wrap = candidate_wrap
    device = resolve_device(request.device)
    policy = ab_policy(request.profile)
    pairs = _pairs(base, cand)
    plan = rounds_mod.plan_rounds(
        len(pairs), request.rounds or suite_profile(request.profile).ab_rounds, request.round_seed
    )
    progress = on_progress or (lambda *_: None)
    energy = runner.energy_source(device, sensors.POWERCAP)
    started = time.time()
    pairing_id = uuid.uuid4().hex
    identical = request.baseline == request.candidate
    pairing = {
        "kind": PAIRING_KIND,
        "id": pairing_id,
        "design": "interleaved: each round a seeded random workload order; each workload "
        "measured under both mappings back to back, the first side alternating by round",
        "rounds": plan.rounds,
        "seed": plan.seed,
        # within each round the two sides' calls alternate A B, B A, ... (timing.py): the i-th
        # calls of the two sides are neighbours, which compare pairs
        "calls": CALLS_ALTERNATED,
        "aa": identical,
        "settings": {BASELINE: request.baseline, CANDIDATE: request.candidate},
    }
    docs = {}
    with (compiled.session() if base.compiler or cand.compiler else contextlib.nullcontext(),
          allocator.steady_heap(device.type) as heap):
        _measure_sides(request, base, cand, docs, device, policy, pairs, plan, energy, started,
                       pairing, progress)
    for doc in docs.values():
        doc["environment"]["cpu_allocator"] = heap
    return docs[BASELINE], docs[CANDIDATE], pairing


def _measure_sides(request, base, cand, docs, device, policy, pairs, plan, energy, started,
                   pairing, progress) -> None:
    """Both sides' documents: ceilings, the interleaved rounds, each side's floors and t_device
    (each side on its own, not paired), and a compiling side's compile costs last."""
    for side in (base, cand):
        run_request = runner.RunRequest(request.profile, request.device, side.dtypes, request.only,
                                        slice_path=request.slice_path)  # fmt: skip
        doc = runner.new_run_doc(
            run_request, device, energy, sensors.POWERCAP, policy, plan, started
        )
        doc["knobs"] = side.knobs(doc["knobs"])
        doc["pairing"] = {**pairing, "side": side.label}
        threads = doc["knobs"]["threads"]
        doc["workloads"] = [
            runner.base_record(
                s, runner.reproduce_command(s, request.profile, device, threads, side.settings,
                                            request.slice_path),
                side.not_applicable(s, device),
            )
            for s in side.specs
        ]
        docs[side.label] = doc
    try:
        # with a quantization's int8 or fp8 GEMM ceiling where a side's workloads compute in it
        dtypes = sorted({*base.ceiling_dtypes(base.specs, device),
                         *cand.ceiling_dtypes(cand.specs, device)},
                        key=suite.CEILING_DTYPES.index)  # fmt: skip
        # Each side divides by the ceilings of its own settings: where the two differ in a
        # setting that moves a ceiling (threads, float32 matmul precision) each side's profile
        # is obtained under its own settings; else both share the baseline's.
        own = moved_settings(Run.from_json(docs[BASELINE]), Run.from_json(docs[CANDIDATE]))
        for side in (base, cand) if own else (base,):
            with side.active():
                obtained = obtain(
                    device, dtypes, request.profile,
                    Path(request.device_profile) if request.device_profile else None,
                    request.recalibrate, lambda step: progress(step, 0, len(pairs)),
                ).ceilings()  # fmt: skip
            for label in (side.label,) if own else docs:
                docs[label]["ceilings"] = obtained
        builders = _measure(pairs, (base, cand), docs, plan, policy, device, energy, progress)
        measured_s = time.time() - started
        for side in (base, cand):  # each side's floors under its own settings
            begun = time.time()
            doc = docs[side.label]
            with side.active():
                doc["overhead_probe"] = overhead.measure_overheads(
                    side.specs, doc["workloads"], device, builders[side.label], progress,
                    suite_profile(request.profile).floor_sampling,
                    side.eager_build if side.compiler is not None else None,
                )  # fmt: skip
            doc["phases_s"] = {"ceilings_and_workloads": round(measured_s, 3),
                               "overhead": round(time.time() - begun, 3)}  # fmt: skip
            begun = time.time()
            with side.active():  # t_device of each side's workloads, as `run` has it
                device_time.measure_device_times(side.specs, doc["workloads"], device,
                                                 builders[side.label], progress)  # fmt: skip
            doc["phases_s"]["device_time"] = round(time.time() - begun, 3)
        # last: measuring a warm compile resets dynamo, which drops both sides' compiled calls
        for side in (base, cand):
            if side.compiler is not None:
                begun = time.time()
                with side.active():
                    compiled.record_compiles(side.specs, docs[side.label]["workloads"], device,
                                           side, progress)  # fmt: skip
                docs[side.label]["phases_s"]["compile_warm"] = round(time.time() - begun, 3)
        for doc in docs.values():
            doc["complete"] = True
    except KeyboardInterrupt:
        for doc in docs.values():
            runner.mark_interrupted(doc)
    for side in (base, cand):  # what each side's weight knobs did to its workloads' weights
        side.record_weights(docs[side.label]["workloads"])
    for doc in docs.values():
        doc["wall_s"] = round(time.time() - started, 3)


def _measure(pairs, sides, docs, plan, policy, device, energy, progress) -> dict:
    """Every round: the plan's workload order, each workload under both mappings back to
    back; a pair that failed or spent its budget on either side sits out later rounds. Returns
    each side's build cache, which the overhead phase reuses."""
    total = plan.rounds * len(pairs)
    builders = {side.label: rounds_mod.BuildCache(side.build, keep_all=side.compiler is not None)
                for side in sides}  # fmt: skip
    for r, order in enumerate(plan.orders):
        one_round = rounds_mod.round_policy(policy, plan.rounds, first=r == 0)
        turn = sides if r % 2 == 0 else sides[::-1]  # ABBA over rounds: no side always first
        for step, p in enumerate(order):
            indices = dict(zip((BASELINE, CANDIDATE), pairs[p], strict=True))
            records = [docs[s.label]["workloads"][indices[s.label]] for s in sides
                       if indices[s.label] is not None]  # fmt: skip
            name = (sides[0].specs[indices[BASELINE]] if indices[BASELINE] is not None
                    else sides[1].specs[indices[CANDIDATE]]).id  # fmt: skip
            progress(f"round {r + 1}/{plan.rounds}: {name}", r * len(pairs) + step, total)
            if r > 0 and any(
                rec["status"] != STATUS_OK or rounds_mod.budget_spent(rec, policy)
                for rec in records
            ):
                continue
            both = None
            if None not in indices.values():
                both = _measure_pair(turn, indices, docs, builders, device, one_round, policy)
            for side in turn:
                i = indices[side.label]
                if i is None:
                    continue
                workloads = docs[side.label]["workloads"]
                measured = both[side.label] if both is not None else runner.measure_workload(
                    side.specs[i], device, one_round, docs[side.label]["ceilings"],
                    workloads[i]["reproduce"],
                    energy, whole_budget=policy, mapping=side, builder=builders[side.label],
                )  # fmt: skip
                workloads[i] = rounds_mod.merge_round(workloads[i], measured, r)
    progress("done", total, total)
    return builders


# Energy is metered per window, and alternating calls share one: neither side's is its own.
ALTERNATING_ENERGY = (
    "not metered: `ab` alternates the two sides' calls in one window, so neither side's energy "
    "can be read apart; measure energy with `reviewkit run`"
)


def _measure_pair(turn, indices, docs, builders, device, policy, whole) -> dict | None:
    """One round of one workload under both mappings, call by call (timing.collect_alternating).
    None when a side cannot take part (predicted over budget, or its build or a call fails):
    the caller then measures each side on its own, which records why."""
    specs = [side.specs[indices[side.label]] for side in turn]
    calls_needed = whole.warmup_calls + 1
    for side, spec in zip(turn, specs, strict=True):
        bound = runner.predicted_call_s(spec, docs[side.label]["ceilings"])
        if bound is not None and bound * calls_needed > whole.budget_s:
            return None
    try:
        calls = []
        for side, spec in zip(turn, specs, strict=True):
            with side.active():
                fn = builders[side.label](spec, device)
            calls.append(device_timed(fn, device))
        # the two sides share the window: each keeps its own share of the budget
        limit = policy.budget_s if policy.warmup_budget_s is None else policy.warmup_budget_s
        shared = replace(policy, budget_s=2 * policy.budget_s, warmup_budget_s=2 * limit)
        frames = compiled.frames_compiled()
        with torch.inference_mode():
            results = collect_alternating(calls, [side.active for side in turn], shared)
        recompiled = compiled.recompiled_reason(frames)
    except Exception:  # a failure is data: measured on its own, the side records it
        return None
    out = {}
    for side, spec, result in zip(turn, specs, results, strict=True):
        before = docs[side.label]["workloads"][indices[side.label]]
        record = runner.base_record(spec, before["reproduce"], before.get("knobs_not_applicable"))
        digits = runner.SAMPLE_RESOLUTION_DIGITS
        record.update(
            samples_s=[round(x, digits) for x in result.samples_s],
            warmup_samples_s=[round(x, digits) for x in result.warmup_samples_s],
            stopped_by=result.stopped_by,
            round_wall_s=result.wall_s / 2,  # the window was shared by the two sides
            energy=energy_absent(ALTERNATING_ENERGY),
        )
        if recompiled and side.compiler is not None:
            # which compiling side recompiled cannot be told apart: neither keeps its samples
            record.update(samples_s=[], warmup_samples_s=[], status=STATUS_ERROR,
                          reason=recompiled)  # fmt: skip
        elif result.samples_s:
            record["status"] = STATUS_OK
        else:
            record["status"] = STATUS_TIMEOUT
            record["reason"] = f"warm-up alone used the {whole.budget_s:g} s budget"
        out[side.label] = record
    return out


def write_pairing(
    out_dir: Path,
    pairing: dict,
    baseline: str = f"{BASELINE}/run.json",
    candidate: str = f"{CANDIDATE}/run.json",
) -> Path:
    """The pairing beside the two bundles (their paths relative to it): which sides, which
    settings, which design."""
    from reviewkit.bundle.run import write_json_atomic

    path = Path(out_dir) / PAIRING_FILE
    write_json_atomic(path, {**pairing, "baseline": baseline, "candidate": candidate})
    return path
