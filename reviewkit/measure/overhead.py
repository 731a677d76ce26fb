"""A run's overhead phase: each workload's exposed overhead measured, its ops counted (torch).

On a CPU a workload's floor call (suite/floors.py) and the floor's double are timed turn about,
after the profiler has shown that they dispatch the workload's ops; on a GPU the call is
replayed from a CUDA graph (gpu_overhead.py). Every workload's ops per call are counted by a
dispatch mode, with their FLOPs and bytes, for a composite's per-op roof and the
ops-times-floor cross-check (benchmarks/overhead_crosscheck.py).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from reviewkit.analysis.overhead import FLOOR_CALL, NOT_MEASURED
from reviewkit.bundle.run import STATUS_OK
from reviewkit.measure.device import device_timed, first_line
from reviewkit.measure.timing import SamplingPolicy, collect_alternating, collect_samples
from reviewkit.suite import floors
from reviewkit.suite.profiles import FLOOR_POLICY  # the default floor window (quick, full)
from reviewkit.suite.workloads import WorkloadSpec

# Ops whose count follows the shapes, not the kernels (allocation and views): left out when the
# floor's op names are checked against the workload's, and when ops per call are counted.
METADATA_OPS = frozenset({
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::as_strided", "aten::view",
    "aten::_reshape_alias", "aten::reshape", "aten::expand", "aten::unsqueeze", "aten::squeeze",
    "aten::select", "aten::slice", "aten::alias", "aten::detach", "aten::lift_fresh",
    "aten::resize_", "aten::t", "aten::transpose", "aten::permute", "aten::_unsafe_view",
    "aten::contiguous", "aten::split", "aten::chunk", "aten::unbind", "aten::unflatten",
    "aten::flatten", "aten::expand_as", "aten::view_as", "aten::to", "aten::_to_copy",
    "aten::result_type", "aten::is_nonzero", "aten::item", "aten::_local_scalar_dense",
    "aten::dim", "aten::size", "aten::stride", "aten::numel",
})  # fmt: skip
# A tiny op timed once per run: the per-op floor the ops-per-call cross-check multiplies.
PROBE_ELEMENTS = 1

Progress = Callable[[str, int, int], None]
OpNames = Callable[[Callable[[], object]], collections.Counter]


# What the profiler names one call of an inductor-compiled graph ("## Call CompiledFxGraph
# <hash> ##"): its fused kernels are not aten ops, so a compiled call's op names are the aten
# ops it still dispatches (extern GEMMs) and how many compiled graphs it runs.
COMPILED_GRAPH_EVENT = "## Call CompiledFxGraph"
COMPILED_GRAPH = "compiled graph"


def profiled_op_names(fn: Callable[[], object]) -> collections.Counter:
    """The aten op names one call dispatches, from torch.profiler (metadata ops left out), and
    the compiled graphs it runs."""
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return collections.Counter(
        COMPILED_GRAPH if e.name.startswith(COMPILED_GRAPH_EVENT) else e.name
        for e in prof.events()
        if (e.name.startswith("aten::") and e.name not in METADATA_OPS)
        or e.name.startswith(COMPILED_GRAPH_EVENT)
    )


@contextlib.contextmanager
def _quiet_stderr():
    """Kineto prints a line to file descriptor 2 at every profiler start and stop, whatever its
    log level (seen with torch 2.13): hide it from the run's progress display."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class OpCounter(TorchDispatchMode):
    """Counts the ops a call dispatches, each with its FLOPs (torch's flop_registry, which
    counts matmul-class ops) and bytes (its distinct input and output tensors' storage)."""

    def __init__(self):
        super().__init__()
        self.ops: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = f"aten::{func.overloadpacket.__name__}"
        if name in METADATA_OPS or torch.Tag.view_copy in func.tags or func.is_view:
            return out
        flops = 0
        if func.overloadpacket in flop_registry:
            flops = int(flop_registry[func.overloadpacket](*args, **kwargs, out_val=out))
        tensors = [t for t in torch.utils._pytree.tree_leaves((args, kwargs, out))
                   if isinstance(t, torch.Tensor)]  # fmt: skip
        seen, nbytes, dtype = set(), 0, None
        for t in tensors:
            key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
            if key in seen:
                continue
            seen.add(key)
            nbytes += t.numel() * t.element_size()
            if t.is_floating_point() and dtype is None:
                dtype = DTYPE_NAMES.get(t.dtype)
        self.ops[(name, flops, nbytes, dtype)] += 1
        return out


DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def op_profile(fn: Callable[[], object]) -> dict:
    """One call's ops per kind, the `op_profile` record of the bundle. Under no_grad, not
    inference mode: in inference mode the dispatch mode sees composite ops (aten::linear) before
    they decompose into the ops that run (aten::mm), which the FLOP registry counts."""
    counter = OpCounter()
    with torch.no_grad(), counter:
        fn()
    return _op_record(counter)


def _op_record(counter: OpCounter) -> dict:
    ops = [{"op": name, "calls": calls, "flops": flops, "bytes": nbytes, "dtype": dtype}
           for (name, flops, nbytes, dtype), calls in sorted(counter.ops.items(),
                                                             key=lambda kv: kv[0][0])]  # fmt: skip
    return {"method": "TorchDispatchMode (ops per call; FLOPs by torch.utils.flop_counter)",
            "ops": ops, "ops_per_call": sum(o["calls"] for o in ops)}  # fmt: skip


def profile_call(fn: Callable[[], object]) -> tuple[collections.Counter, dict, int]:
    """One call profiled and its ops counted at once (a long workload is called once, not
    twice): (the profiler's op names, the op_profile record, the call's minor page faults).
    The dispatch mode re-dispatches each op it sees, which the profiler records a second time:
    those are taken off, so the names are what a call alone dispatches (profiled_op_names)."""
    from torch.profiler import ProfilerActivity, profile

    counter = OpCounter()
    before = minor_faults()
    with _quiet_stderr(), torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof, \
            counter:
        fn()
    faults = minor_faults() - before
    names = collections.Counter(
        e.name for e in prof.events() if e.name.startswith("aten::") and e.name not in METADATA_OPS
    )
    for (name, *_), calls in counter.ops.items():
        names[name] -= calls
    return +names, _op_record(counter), faults


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _differs(a: collections.Counter, b: collections.Counter) -> str:
    missing = sorted(set(a) - set(b))
    extra = sorted(set(b) - set(a))
    counts = sorted(n for n in set(a) & set(b) if a[n] != b[n])
    parts = []
    if missing:
        parts.append(f"the floor lacks {', '.join(missing[:4])}")
    if extra:
        parts.append(f"the floor adds {', '.join(extra[:4])}")
    if counts:
        parts.append("different counts of " + ", ".join(f"{n} ({a[n]} vs {b[n]})"
                                                         for n in counts[:4]))  # fmt: skip
    return "; ".join(parts)


def cpu_floor_record(
    spec: WorkloadSpec,
    fn: Callable[[], object],
    device: torch.device,
    threads: int,
    build: Callable[[WorkloadSpec, torch.device], Callable[[], object]],
    op_names: OpNames = profiled_op_names,
    policy: SamplingPolicy = FLOOR_POLICY,
    clock: Callable[[], float] = time.perf_counter,
    profiled: tuple[collections.Counter, int] | None = None,
) -> dict:
    """The workload's `overhead` record from its floor call and the floor's double, timed turn
    about (a drift of the machine reaches both alike), or why there is none.

    Each is checked against the workload's op names first. t_o is where the line through the
    two meets zero work (2 x floor - double, analysis/overhead.py): the floor's own work out."""
    floor = floors.floor_of(spec, threads)
    if floor is None:
        return _absent(floors.NO_FLOOR_RULE.get(spec.kernel,
                                                f"no floor rule for kernel {spec.kernel!r}"))
    double = floors.doubled(floor, threads)
    floor_fn = build(floor.spec, device)
    double_fn = build(double, device) if double is not None else None
    with torch.inference_mode():
        if profiled is None:
            before = minor_faults()
            ours = op_names(fn)
            workload_faults = minor_faults() - before
        else:  # the workload's names and faults from its one profiled call (profile_call)
            ours, workload_faults = profiled
        theirs = op_names(floor_fn)
        if ours != theirs:
            return {**_absent(
                f"the floor call ({floor.rule}) dispatches other ops than the workload: "
                f"{_differs(ours, theirs)}; a floor on another path measures another call"),
                "floor": floor.to_json(), "ops": {"workload": dict(ours), "floor": dict(theirs),
                                                  "match": False}}  # fmt: skip
        if double_fn is not None and op_names(double_fn) != ours:
            double_fn = None  # the double left the path: the floor alone, an upper bound
        calls = [device_timed(floor_fn, device)]
        calls += [device_timed(double_fn, device)] if double_fn is not None else []
        before = minor_faults()
        if len(calls) == 2:
            results = collect_alternating(calls, [contextlib.nullcontext] * 2, policy, clock)
        else:
            results = [collect_samples(calls[0], policy, clock)]
        floor_faults = (minor_faults() - before) / max(
            1, sum(len(r.samples_s) + len(r.warmup_samples_s) for r in results))
    if not results[0].samples_s:
        return _absent("the floor call's warm-up used its whole budget")
    record = {
        "available": True,
        "method": FLOOR_CALL,
        "reason": f"floor call at {threads} thread(s): {floor.rule}",
        "samples_s": [round(x, 9) for x in results[0].samples_s],
        "floor": floor.to_json(),
        "threads": threads,
        "ops": {"workload": dict(ours), "floor": dict(theirs), "match": True},
        "minor_faults_per_call": {"workload": workload_faults, "floor": floor_faults},
    }
    if len(results) == 2 and results[1].samples_s:
        record["double_samples_s"] = [round(x, 9) for x in results[1].samples_s]
        record["double_floor"] = {"inputs": [t.to_json() for t in double.inputs]}
        record["reason"] += (
            "; t_o = 2 x floor - its double (the same ops at twice the first dimension, "
            "timed turn about): the fixed cost, the floor's own work taken out"
        )
    else:
        record["reason"] += "; no double on the same path: t_o is the floor's time, an upper bound"
    return record


def _absent(reason: str) -> dict:
    return {"available": False, "method": NOT_MEASURED, "reason": reason}


def per_op_floor_s(device: torch.device, policy: SamplingPolicy = FLOOR_POLICY) -> dict:
    """What a call pays per op it dispatches, whatever the op: the median of an add of
    one-element tensors (one thread); and, at more than one thread, the fixed cost of an add
    split over every thread (2 x t(n) - t(2n) at the fewest elements that split n ways: the
    parallel region's fork and join, which a one-element op never pays)."""
    threads = torch.get_num_threads()
    x = torch.zeros(PROBE_ELEMENTS, device=device)
    with torch.inference_mode():
        result = collect_samples(device_timed(lambda: torch.add(x, x), device), policy)
        out = {"op": f"aten::add of {PROBE_ELEMENTS}-element fp32 tensors",
               "median_s": statistics.median(result.samples_s) if result.samples_s else None,
               "samples": len(result.samples_s), "threads": threads,
               "parallel_op": None, "parallel_fixed_s": None}  # fmt: skip
        if threads > 1:
            n = floors.same_tasks_extent(threads * floors.ATEN_GRAIN_SIZE, threads)
            a, b = torch.zeros(n, device=device), torch.zeros(2 * n, device=device)
            one, two = collect_alternating(
                [device_timed(lambda: torch.add(a, a), device),
                 device_timed(lambda: torch.add(b, b), device)],
                [contextlib.nullcontext] * 2, policy,
            )  # fmt: skip
            if one.samples_s and two.samples_s:
                out["parallel_op"] = f"aten::add of {n} and {2 * n} fp32 elements, {threads} tasks"
                out["parallel_fixed_s"] = max(0.0, 2 * statistics.median(one.samples_s)
                                              - statistics.median(two.samples_s))  # fmt: skip
    return out


def mark_not_measured(records: list[dict], reason: str) -> None:
    """Every workload's overhead record says it was not measured, and why, in place."""
    for record in records:
        record["overhead"] = _absent(reason)


# Why a compiled workload on a GPU carries no measured overhead.
COMPILED_ON_GPU = (
    "not measured for a compiled workload on a GPU: the overhead is measured there by replaying "
    "the call from a CUDA graph, and capturing inductor's compiled call is its own "
    "reduce-overhead mode's business"
)


def measure_overheads(
    specs: Sequence[WorkloadSpec],
    records: list[dict],
    device: torch.device,
    build: Callable[[WorkloadSpec, torch.device], Callable[[], object]],
    progress: Progress,
    policy: SamplingPolicy = FLOOR_POLICY,
    eager_build: Callable[[WorkloadSpec, torch.device], Callable[[], object]] | None = None,
) -> dict:
    """Fill each measured workload's `overhead` and `op_profile` records, in place; return the
    run's `overhead_probe` (the per-op floor).

    With `eager_build`, `build` compiles (a compile_mode): the floor and its double are compiled
    like the workload, the op names are compared under inference mode (as sampled: another grad
    mode would fail dynamo's guards and recompile), and the ops per call are counted on the
    eager call, since a dispatch mode around the compiled one would recompile it too."""
    if eager_build is not None and device.type == "cuda":
        mark_not_measured(records, COMPILED_ON_GPU)
        return per_op_floor_s(device, policy)
    threads = torch.get_num_threads()
    for i, (spec, record) in enumerate(zip(specs, records, strict=True)):
        progress(f"overhead: {spec.id}", i, len(specs))
        if record["status"] != STATUS_OK or not record["samples_s"]:
            record["overhead"] = _absent(f"not measured: the workload's status is "
                                         f"{record['status']}")  # fmt: skip
            continue
        samples = sorted(record["samples_s"])
        call_s = samples[len(samples) // 2]
        try:
            if eager_build is None:
                record["overhead"], record["op_profile"] = _measure_one(
                    spec, build(spec, device), call_s, device, threads, build, policy
                )
            else:
                record["overhead"], record["op_profile"] = _measure_compiled(
                    spec, build(spec, device), eager_build(spec, device), device, threads, build,
                    policy,
                )  # fmt: skip
        except Exception as exc:  # a failure is data: the workload keeps its measurement
            record["overhead"] = _absent(f"the overhead measurement failed: {first_line(exc)}")
    progress("overhead: per-op floor", len(specs), len(specs))
    return per_op_floor_s(device, policy)


def _measure_one(spec, fn, call_s, device, threads, build, policy) -> tuple[dict, dict]:
    """(overhead record, op_profile) of one workload on this device."""
    if device.type != "cuda":
        if floors.floor_of(spec, threads) is None:  # the rule's absence says why; no names needed
            return cpu_floor_record(spec, fn, device, threads, build), _op_profile_or_none(spec, fn)
        names, ops, faults = profile_call(fn)
        record = cpu_floor_record(spec, fn, device, threads, build, policy=policy,
                                  profiled=(names, faults))  # fmt: skip
        return record, ops
    from reviewkit.measure import gpu_overhead

    floor = floors.floor_of(spec, threads)
    # the capture has warmed the call up; a replay of a long call needs the time for as many
    # samples as a floor gets
    replay = dataclasses.replace(policy, warmup_calls=1, warmup_s=0.0,
                                 budget_s=max(policy.budget_s, 30 * call_s),
                                 warmup_budget_s=None)  # fmt: skip
    record = gpu_overhead.measure_gpu_overhead(
        fn, device, replay, (lambda f=floor: build(f.spec, device)) if floor else None
    )
    return record, _op_profile_or_none(spec, fn)


def _op_profile_or_none(spec: WorkloadSpec, fn: Callable[[], object]) -> dict | None:
    """The call's op profile, or None where the op counter cannot run it: a kernel compiled in
    its builder (FlexAttention) leaves the compiled program under a dispatch mode, to run
    torch 2.13's unfused reference or fail, so it is not counted; its overhead record stands
    without one."""
    if spec.params.get("compiled"):
        return None
    try:
        return op_profile(fn)
    except Exception:
        return None


def _measure_compiled(spec, fn, eager_fn, device, threads, build, policy) -> tuple[dict, dict]:
    """(overhead record, op_profile) of one compiled workload on a CPU: its compiled floor and
    double timed like an eager workload's; the record says what the names can and cannot see."""
    from reviewkit.measure import compiled

    ops = op_profile(eager_fn)
    ops["method"] += "; counted on the eager call: the compiled call fuses some of these ops"
    frames = compiled.frames_compiled()
    with torch.inference_mode():
        names = profiled_op_names(fn)
    if compiled.recompiled_reason(frames):
        return _absent("dynamo compiled the workload again under the profiler: its floor "
                       "check would compare another graph"), ops  # fmt: skip
    record = cpu_floor_record(spec, fn, device, threads, build, policy=policy,
                              profiled=(names, 0))  # fmt: skip
    if record["available"]:
        record["reason"] += (
            "; compiled: floor and double compiled in the workload's mode, and the names "
            "compared are the aten ops the compiled calls still dispatch and how many compiled "
            "graphs they run (inductor's fused kernels are not profiler ops)"
        )
        record.pop("minor_faults_per_call", None)  # the workload's was not counted apart here
    return record, ops
