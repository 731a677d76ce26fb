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
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace

import torch

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
    fell_back_to_eager: bool  # no graph captured: the calls ran eager
    warm_s: float | None = None

    def to_json(self) -> dict:
        return asdict(self)


class Compiler:
    """Compiles a run's workloads in one mode and remembers what each compile cost."""

    def __init__(self, mode: str):
        self.mode = mode
        self.records: dict[str, CompileRecord] = {}

    @contextlib.contextmanager
    def configured(self) -> Iterator[None]:
        """Dynamo with one cache entry per workload and compile errors raised (a workload that
        cannot compile fails with the reason instead of running eager), and inductor writing to
        a fresh cache folder (so the first compiles are cold); restored after."""
        import torch._dynamo.config as dynamo_config

        saved = {k: getattr(dynamo_config, k) for k in (
            "cache_size_limit", "accumulated_cache_size_limit", "suppress_errors")}  # fmt: skip
        folder = tempfile.mkdtemp(prefix="reviewkit-inductor-")
        env_before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
        dynamo_config.cache_size_limit = CACHE_ENTRIES_PER_CODE
        dynamo_config.accumulated_cache_size_limit = CACHE_ENTRIES_PER_CODE
        dynamo_config.suppress_errors = False
        try:
            yield
        finally:
            for key, value in saved.items():
                setattr(dynamo_config, key, value)
            if env_before is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = env_before
            shutil.rmtree(folder, ignore_errors=True)

    def compile(self, workload_id: str, fn: Callable[[], object]) -> Callable[[], object]:
        """`fn` compiled (static shapes), its first call made here so no sample pays for it."""
        compiled = torch.compile(fn, mode=self.mode, dynamic=False)
        graphs, breaks = _counts()
        cold_s = _first_call_s(compiled)
        graphs_after, breaks_after = _counts()
        self.records[workload_id] = CompileRecord(
            self.mode, cold_s, graphs_after - graphs, breaks_after - breaks,
            fell_back_to_eager=graphs_after == graphs,
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
            warm_s = _first_call_s(torch.compile(build(), mode=self.mode, dynamic=False))
            self.records[workload_id] = replace(self.records[workload_id], warm_s=warm_s)
        torch._dynamo.reset()
