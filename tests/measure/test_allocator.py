"""The steady CPU heap: a 32 MiB tensor made each call faults no fresh pages while it is held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reviewkit.measure import allocator

# 2048 x 4096 fp32 = 32 MiB, at glibc's largest mmap threshold: by default every call maps it
# afresh and faults in 32 MiB / 4 KiB = 8192 pages (one more for the mapping's header page).
PAGES_PER_CALL = 2048 * 4096 * 4 // 4096
CALLS = 20

# Warm-up calls before counting: freed blocks are reused once the heap has a hole they fit in
# (posix_memalign asks for a little more than the block it freed), which took up to 8 calls.
WARM_UP = 10

PROBE = f"""
import json, resource, torch
from reviewkit.measure.allocator import steady_heap
x = torch.randn(2048, 4096); y = torch.randn(2048, 4096)
def faults_per_call():
    for _ in range({WARM_UP}):
        torch.add(x, y)
    out = []
    for _ in range({CALLS}):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        torch.add(x, y)
        out.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return sorted(out)[{CALLS} // 2]
default = faults_per_call()
with steady_heap("cpu") as said:
    held = faults_per_call()
print(json.dumps({{"default": default, "held": held, "said": said}}))
"""


def _probe(env: dict[str, str] | None = None) -> dict:
    # a fresh process: the test process's own heap has a history of its own
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          check=True, env=env, timeout=120)  # fmt: skip
    return json.loads(done.stdout)


def _thp_always() -> bool:
    path = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return path.exists() and "[always]" in path.read_text()


@pytest.mark.skipif(allocator._glibc()[0] is None, reason="glibc's malloc only")
def test_a_held_heap_faults_in_no_fresh_pages_per_call():
    # the median call's minor faults (getrusage), in a process that first ran the same calls
    # with glibc's defaults: the held heap does not depend on what ran before it
    seen = _probe()
    if not _thp_always():  # with transparent huge pages always on, 2 MiB pages: 16 faults
        assert seen["default"] >= PAGES_PER_CALL
    assert seen["held"] < 0.01 * PAGES_PER_CALL
    assert "freed memory is kept and reused" in seen["said"]


@pytest.mark.skipif(allocator._glibc()[0] is None, reason="glibc's malloc only")
def test_settings_the_environment_makes_are_left_alone_and_recorded():
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "131072"}
    seen = _probe(env)
    assert seen["said"].endswith("as the environment sets it (MALLOC_TRIM_THRESHOLD_)")
    if not _thp_always():  # nothing held: the pages are faulted in every call
        assert seen["held"] >= PAGES_PER_CALL


def test_user_settings_are_read_from_the_environment():
    assert allocator.user_settings({}) == []
    assert allocator.user_settings({"MALLOC_MMAP_MAX_": "0", "PATH": "/bin"}) == [
        "MALLOC_MMAP_MAX_"
    ]
    assert allocator.user_settings({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1"}) == [
        "GLIBC_TUNABLES"
    ]
    assert allocator.user_settings({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"}) == []


def test_a_gpu_run_changes_nothing():
    with allocator.steady_heap("cuda") as said:
        assert said.startswith("not changed")
