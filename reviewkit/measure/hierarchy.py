"""The memory hierarchy a device profile measures: its levels, their sizes, and the calibration
working set of each (torch-free, from the fingerprint's cache sizes)."""

from __future__ import annotations

from dataclasses import dataclass

# Level names as profiles, bundles and charts spell them, innermost first.
L1, L2, LLC, DRAM = "l1", "l2", "llc", "dram"
GPU_L2, HBM = "l2", "hbm"

# A calibration kernel's working set is half the level's capacity: the other half leaves room
# for what else the core touches (stack, the runtime, the output, the other thread's lines) and
# for set conflicts, so the stream stays resident in that level and does not spill outwards.
CALIBRATION_FILL = 0.5


@dataclass(frozen=True)
class MemoryLevel:
    name: str
    # Bytes the level holds, as the OS (or the GPU's properties) reports it for one core / one
    # device; None for main memory, which holds every working set.
    capacity_bytes: int | None
    # Bandwidth drawn from a pool shared with other tenants (a cloud CPU's DRAM: the memory
    # controllers serve every core of the socket), so it moves with the neighbours' load both
    # ways (measure/trials.py says what that changes). A cache's bandwidth is each core's own
    # path to it; neighbours reach it only through its capacity (evicting our lines), which
    # only ever slows us: not shared in this sense, even for the LLC.
    shared: bool = False

    @property
    def calibration_bytes(self) -> int | None:
        if self.capacity_bytes is None:
            return None
        return int(self.capacity_bytes * CALIBRATION_FILL)


def cpu_levels(caches_bytes: dict[str, int]) -> list[MemoryLevel]:
    """L1 (data), L2 and the last-level cache from sysfs's cpu0 view, then DRAM. A level the
    OS does not report is left out (its workloads fall to the next level out)."""
    levels = []
    if caches_bytes.get("L1d"):
        levels.append(MemoryLevel(L1, caches_bytes["L1d"]))
    if caches_bytes.get("L3"):
        if caches_bytes.get("L2"):
            levels.append(MemoryLevel(L2, caches_bytes["L2"]))
        levels.append(MemoryLevel(LLC, caches_bytes["L3"]))
    elif caches_bytes.get("L2"):  # no L3 (many ARM parts): the L2 is the last level
        levels.append(MemoryLevel(LLC, caches_bytes["L2"]))
    levels.append(MemoryLevel(DRAM, None, shared=True))
    return levels


def gpu_levels(l2_bytes: int | None) -> list[MemoryLevel]:
    levels = [MemoryLevel(GPU_L2, l2_bytes)] if l2_bytes else []
    return [*levels, MemoryLevel(HBM, None)]
