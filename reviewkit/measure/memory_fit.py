"""Whether a workload's working set fits the device's free memory, and why not (torch for CUDA).

A serving cell can need tens of gigabytes (a decode step of 256 sequences against 32k cached
tokens reads a 34 GB bf16 KV cache): one that cannot fit is skipped with the reason, before its
inputs are allocated, rather than run into an out-of-memory error (on a CUDA device a recorded
failure; on a CPU the kernel's OOM killer, which ends the whole run).
"""

from __future__ import annotations

from pathlib import Path

import torch

from reviewkit.measure.fingerprint import MEMINFO
from reviewkit.suite.workloads import WorkloadSpec

# Headroom over the analytic working set (inputs read and outputs written): the allocator's
# rounding, a kernel's workspace, the math attention path's score matrix, and the fp32 staging
# tensor `kernels._tensor` draws each input through. 1.5x keeps a cell that would only just
# fit, and then fail, out of the run.
WORKING_SET_HEADROOM = 1.5
GB = 1e9


def available_bytes(device: torch.device, meminfo: Path = MEMINFO) -> tuple[int | None, str]:
    """Free memory of the device now and where the figure comes from; None where unknown."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free), "torch.cuda.mem_get_info"
    if device.type == "cpu":
        try:
            for line in meminfo.read_text().splitlines():
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, f"MemAvailable in {meminfo}"
        except (OSError, ValueError, IndexError):
            pass
        return None, f"{meminfo} has no MemAvailable"
    return None, f"no free-memory query for a {device.type} device"


def working_set_bytes(spec: WorkloadSpec) -> int:
    """What a call holds at once: its inputs and outputs (the definition's bytes), with headroom."""
    return int(spec.bytes * WORKING_SET_HEADROOM)


def does_not_fit(spec: WorkloadSpec, available: int | None, source: str) -> str:
    """Why `spec` is skipped ("" when it fits, or when the free memory is unknown)."""
    need = working_set_bytes(spec)
    if available is None or need <= available:
        return ""
    return (f"not run: its working set of {need / GB:.3g} GB ({spec.bytes / GB:.3g} GB read "
            f"and written, x{WORKING_SET_HEADROOM:g} headroom) does not fit the "
            f"{available / GB:.3g} GB free on this device ({source})")  # fmt: skip
