"""torch.compile as a rollout sees it: each workload compiled once with static shapes, its compile
time kept apart from its samples (cold, then warm), graphs and breaks counted, and a recompile
while it is sampled a failure, never a silent change of what is measured (torch)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace

import torch

from reviewkit.bundle.run import STATUS_OK

# dynamo keeps 8 compiled entries per code object, and every workload of one kernel is the same
# lambda over other tensors: past the 8th, a workload would silently run eager. One entry per
# workload (and per floor call) needs at most this many; a suite has a few hundred.
CACHE_ENTRIES_PER_CODE = 4096
EAGER = "eager"


def frames_compiled() -> int | None:
    """How many frames dynamo has compiled in this process (None: dynamo never loaded)."""
    if "torch._dynamo" not in sys.modules:
        return None
    from torch._dynamo.utils import counters

    return int(counters["frames"]["total"])


def own_code(fn: Callable[[], object]) -> Callable[[], object]:
    """`fn` over a copy of its code object. Dynamo keeps its compiled entries on the code
    object and guards on the tensors' properties, not their identity, so two workloads built
    from one lambda would share entries: the second (the other side of an A/A, say) would run
    the first's compiled code, and in an A/A here it read 2% slower than the side that
    compiled it. With its own code each workload compiles and runs its own entry, as a
    service compiling its model once does."""
    if not isinstance(fn, types.FunctionType):
        return fn
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)  # fmt: skip


def _first_call_s(compiled: Callable[[], object]) -> float:
    """Seconds of a compiled callable's first call: the compile, and one run."""
    started = time.perf_counter()
    with torch.inference_mode():
        compiled()
    return time.perf_counter() - started


def _counts() -> tuple[int, int]:
    """(graphs captured, graph breaks) so far in this process."""
    from torch._dynamo.utils import counters

    return (int(counters["stats"]["unique_graphs"]),
            int(sum(counters["graph_break"].values())))  # fmt: skip


# The compile session's state: entered once per process however many mappings compile in it
# (a run's one, or both sides of `ab`), so all of them share one inductor cache folder and a
# nested entry (each measured call enters its mapping's settings) costs nothing.
_SESSION: dict = {"depth": 0}


@contextlib.contextmanager
def session() -> Iterator[None]:
    """Dynamo with one cache entry per workload and compile errors raised (a workload that
    cannot compile fails with the reason instead of running eager), and inductor writing to a
    folder that starts empty (so the first compile of each graph is cold); restored, and the
    folder removed, when the outermost entry ends."""
    import torch._dynamo.config as dynamo_config

    if _SESSION["depth"]:
        _SESSION["depth"] += 1
        try:
            yield
        finally:
            _SESSION["depth"] -= 1
        return
    saved = {k: getattr(dynamo_config, k) for k in (
        "cache_size_limit", "accumulated_cache_size_limit", "suppress_errors")}  # fmt: skip
    folder = tempfile.mkdtemp(prefix="reviewkit-inductor-")
    env_before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    dynamo_config.cache_size_limit = CACHE_ENTRIES_PER_CODE
    dynamo_config.accumulated_cache_size_limit = CACHE_ENTRIES_PER_CODE
    dynamo_config.suppress_errors = False
    _SESSION["depth"] = 1
    try:
        yield
    finally:
        _SESSION["depth"] = 0
        for key, value in saved.items():
            setattr(dynamo_config, key, value)
        if env_before is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = env_before
        shutil.rmtree(folder, ignore_errors=True)


def recompiled_reason(frames_before: int | None) -> str:
    """Why a workload's samples are not kept when dynamo compiled while they were taken; ""
    when it did not."""
    after = frames_compiled()
    if after == frames_before:
        return ""
    return (f"torch.compile compiled {(after or 0) - (frames_before or 0)} frame(s) while this "
            "workload was sampled (a recompile): its samples mix compilation or another graph "
            "into the steady state, so none is kept")  # fmt: skip


@dataclass(frozen=True)
class CompileRecord:
    """One workload's compilation. `cold_s`: its first call (compile and one run) in a process
    whose inductor cache started empty (kernels this run compiled already are reused, as a
    service compiling its model once reuses them); `warm_s`: the same after dynamo is reset, with
    inductor's caches warm (a restart); None until measured."""

    mode: str
    cold_s: float
    graphs: int
    graph_breaks: int
    fell_back_to_eager: bool  # frames compiled but no graph captured: the calls ran eager
    warm_s: float | None = None
    # no frame compiled: dynamo ran an entry compiled already for an identical workload, so
    # `cold_s` is a cache hit, not a compile
    reused: bool = False

    def to_json(self) -> dict:
        return asdict(self)


class Compiler:
    """Compiles a run's workloads in one mode and remembers what each compile cost."""

    def __init__(self, mode: str):
        self.mode = mode
        self.records: dict[str, CompileRecord] = {}

    def configured(self) -> contextlib.AbstractContextManager:
        """This compiler's settings: the process's compile session (`session`)."""
        return session()

    def compile(self, workload_id: str, fn: Callable[[], object]) -> Callable[[], object]:
        """`fn` compiled (static shapes), its first call made here so no sample pays for it."""
        compiled = torch.compile(own_code(fn), mode=self.mode, dynamic=False)
        graphs, breaks = _counts()
        frames = frames_compiled() or 0
        cold_s = _first_call_s(compiled)
        graphs_after, breaks_after = _counts()
        # dynamo keys its cache on the code object and guards on the tensors' properties, not
        # their identity: a workload identical to one compiled before in this mode (the other
        # side of an A/A, say) runs that entry without compiling a frame
        reused = (frames_compiled() or 0) == frames
        self.records[workload_id] = CompileRecord(
            self.mode, cold_s, graphs_after - graphs, breaks_after - breaks,
            fell_back_to_eager=not reused and graphs_after == graphs, reused=reused,
        )  # fmt: skip
        return compiled

    def measure_warm(self, builds: dict[str, Callable[[], Callable[[], object]]]) -> None:
        """Each compiled workload compiled again after dynamo forgets it, with inductor's
        caches warm: what a restarted process pays. Only after sampling is over, since the
        reset drops every compiled entry."""
        for workload_id, build in builds.items():
            if workload_id not in self.records:
                continue
            torch._dynamo.reset()
            warm_s = _first_call_s(torch.compile(own_code(build()), mode=self.mode,
                                                 dynamic=False))  # fmt: skip
            self.records[workload_id] = replace(self.records[workload_id], warm_s=warm_s)
        torch._dynamo.reset()


def record_compiles(specs, records, device, mapping, progress) -> None:
    """Each compiled workload's compile record, its warm compile measured last (it resets
    dynamo, which would recompile anything sampled after it)."""
    compiler = mapping.compiler
    progress("compiling each workload again, caches warm", 0, len(specs))
    compiler.measure_warm({
        s.id: (lambda s=s: mapping.eager_build(s, device))
        for s, r in zip(specs, records, strict=True) if r["status"] == STATUS_OK
    })  # fmt: skip
    for record in records:
        if record["id"] in compiler.records:
            record["compile"] = compiler.records[record["id"]].to_json()
