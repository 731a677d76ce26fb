"""--nproc: local ranks spawned by reviewkit itself with torchrun's environment, running the same
code path as torchrun's workers."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

import torch

from reviewkit.common.errors import UsageError
from reviewkit.measure.calibration import default_threads


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_local(nproc: int, target: Callable, args: tuple, timeout_s: float) -> int:
    """Start `nproc` local ranks running `target(*args)` with torchrun's environment, wait for
    them, and return the exit code: rank 0's if it failed, else the first failing rank's. When
    one rank fails the others get the timeout to notice it (rank 0 writes what was measured),
    then are stopped."""
    if nproc < 1:
        raise UsageError(f"--nproc {nproc}: expected a positive number of ranks")
    ctx = torch.multiprocessing.get_context("spawn")
    port = free_port()
    # torch's own default (one thread per physical core) shared among the ranks
    threads = max(1, default_threads() // nproc)
    procs = []
    for rank in range(nproc):
        env = {
            "RANK": str(rank), "WORLD_SIZE": str(nproc), "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "REVIEWKIT_NPROC": str(nproc), "OMP_NUM_THREADS": str(threads),
        }  # fmt: skip
        proc = ctx.Process(target=_with_env, args=(env, target, args), daemon=False)
        proc.start()
        procs.append(proc)
    first_failure_at = None
    try:
        while any(p.is_alive() for p in procs):
            time.sleep(0.05)
            failed = [p for p in procs if p.exitcode not in (None, 0)]
            if failed and first_failure_at is None:
                first_failure_at = time.monotonic()
            if first_failure_at is not None and time.monotonic() - first_failure_at > timeout_s:
                break
    except KeyboardInterrupt:
        pass
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(10)
        if p.is_alive():
            p.kill()
            p.join()
    codes = [p.exitcode or 0 for p in procs]
    if codes[0] != 0:
        return codes[0] if codes[0] > 0 else 1
    return next((c if c > 0 else 1 for c in codes if c != 0), 0)


def _with_env(env: dict, target: Callable, args: tuple) -> None:
    os.environ.update(env)
    torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    target(*args)
