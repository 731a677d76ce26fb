"""Holds glibc's malloc to a steady heap while a CPU run measures: no per-call page faults."""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
from collections.abc import Iterator

# glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
# glibc's defaults for the two (malloc/malloc.c: DEFAULT_MMAP_MAX, DEFAULT_TRIM_THRESHOLD),
# restored when the measuring is done.
DEFAULT_MMAP_MAX = 65536
DEFAULT_TRIM_THRESHOLD_BYTES = 128 * 1024
# Freed heap above this is not handed back to the kernel while measuring: larger than any
# tensor the suite makes on a CPU, so a freed output is the next call's, already faulted in.
KEPT_HEAP_BYTES = 1 << 30
# Environment settings of glibc's malloc a user may have made on purpose: then they stand.
USER_SETTINGS = ("MALLOC_MMAP_MAX_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                 "MALLOC_TOP_PAD_")  # fmt: skip
# Why the heap is held. By default glibc serves an allocation at or over its mmap threshold
# with fresh pages, returned on free: a call that makes a 32 MiB tensor faults in 8192 new
# pages each time. The threshold moves with what the process freed before (up to 32 MiB), so
# the same call measured 1.3 ms or 11 ms within one run on the 2-core EPYC, by which workload
# ran before it. A long-lived server reaches the steady state this holds, as torch's caching
# allocator does on a GPU.
WHY = (
    "freed memory is kept and reused (M_MMAP_MAX 0, M_TRIM_THRESHOLD 1 GiB), so a call does "
    "not fault in fresh pages and its time does not depend on what ran before it"
)


def _glibc() -> tuple[ctypes.CDLL | None, str]:
    """The C library when it is glibc, with its version; else None and what it is."""
    name, version = platform.libc_ver()
    if name != "glibc":
        return None, name or "an unknown C library"
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, glibc's among them
        libc.mallopt  # noqa: B018 - present in every glibc; absent means another library
    except (OSError, AttributeError):
        return None, f"glibc {version} (mallopt could not be loaded)"
    return libc, f"glibc {version}"


def user_settings(environ: dict[str, str] | None = None) -> list[str]:
    """The malloc settings the environment makes (MALLOC_*_ or glibc.malloc tunables)."""
    env = os.environ if environ is None else environ
    found = [name for name in USER_SETTINGS if name in env]
    if "glibc.malloc." in env.get("GLIBC_TUNABLES", ""):
        found.append("GLIBC_TUNABLES")
    return found


@contextlib.contextmanager
def steady_heap(device_type: str) -> Iterator[str]:
    """While measuring on a CPU, keep freed memory for reuse; yields what the run records
    (environment.cpu_allocator). On a GPU the tensors live in torch's caching allocator and
    nothing is changed; neither is a C library other than glibc, nor settings the user made."""
    if device_type != "cpu":
        yield "not changed: the workloads' tensors live in the device's caching allocator"
        return
    libc, what = _glibc()
    if libc is None:
        yield f"{what}: not changed (reviewkit holds glibc's heap only)"
        return
    chosen = user_settings()
    if chosen:
        yield f"{what}: as the environment sets it ({', '.join(chosen)})"
        return
    held = libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD,
                                                              KEPT_HEAP_BYTES) == 1  # fmt: skip
    try:
        yield f"{what}: {WHY}" if held else f"{what}: its defaults (mallopt refused the settings)"
    finally:
        libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD_BYTES)
