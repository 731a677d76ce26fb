"""Main memory's ceiling on a CPU: copy buffers on 2 MiB pages, and each core's rate added up.

On the project's 2-core VM a 256 MiB copy read 33 or 52 GB/s from one calibration to the next,
and two things outside the calibration's statistic decided which (docs/benchmarks.md, "DRAM
bandwidth: one figure (issue 30, item 2)"):
- the buffer's pages. Fresh 4 KiB pages come from whatever the kernel's free lists hold: on
  one thread a buffer on scattered frames copied at 25.7-29.5 GB/s, one on contiguous frames
  at 32-39, one on 2 MiB pages at 34-36. So the calibration asks for 2 MiB pages (madvise)
  and writes every page before timing: the layout no longer depends on what ran before;
- where the host put the two vCPUs. Under one L3 (a cache line's round trip 53-60 ns) the
  2-thread copy stayed at 36-39 GB/s on 2 MiB pages; apart (320-345 ns) it reached 60-63,
  0.90-0.98 of the two cores' one-thread rates added. The host moves them every 10-40 s and the
  guest cannot choose, but a one-thread copy reads the same either way. So the ceiling a run
  divides by is the one-thread rate times the threads ("cores added"), with the all-threads
  trials recorded beside it in the two modes they fell into. Only from three threads up can the
  all-threads copy replace it ("all threads", PAIRED_FLOOR); at two threads it never does.
  What remains between calibrations is the one-thread rate moving with the host's load over
  tens of seconds (a few percent).
"""

from __future__ import annotations

import contextlib
import mmap
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from reviewkit.measure.trials import MEDIAN, TrialRates, median

# x86-64's huge page (a PMD): the buffer is aligned to it so that every 2 MiB of it can be one.
HUGE_PAGE_BYTES = 2 << 20
THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")
SMAPS = Path("/proc/self/smaps")
# An all-threads trial at this share of the cores' added one-thread rates had every thread on a
# path of its own: on the VM such trials read 0.92-0.98 of it, those with both vCPUs on one CCD
# 0.56-0.60 (2 MiB pages) and 0.66-0.71 (4 KiB pages). The modes are recorded, not used.
UNSHARED_SHARE = 0.8
# From PAIRED_FLOOR_MIN_THREADS threads up, the added one-thread rates are the ceiling only when
# the all-threads copy's best trial reached at least this share of them. Threads placed two to a
# shared path still draw at least one core's rate per pair (the VM's one-CCD placement:
# 0.56-0.71), so below half something all threads share holds them: the memory controllers of a
# many-core host, whose measured all-threads rate (its median trial) is then the ceiling.
PAIRED_FLOOR = 0.5
# Two threads are one pair: half their added rates is one core's own rate, which the one-thread
# copy has just drawn through the same memory system, so no shared path can hold the pair under
# it. Only a thread waiting for its core can, as on the VM while CI ran beside a calibration (the
# floor's first version, applied at two threads, set a ceiling at 23.6 GB/s from such trials), so
# at two threads the ceiling is always the cores added.
PAIRED_FLOOR_MIN_THREADS = 3
ONE_THREAD_OF = " on one thread of "  # the plan's name for it: "dram on one thread of 2"


def one_thread_name(level: str, threads: int) -> str:
    """The memory plan's name for a level's one-thread copy, carrying the thread count its
    bytes are counted over (the trials come back under it)."""
    return f"{level}{ONE_THREAD_OF}{threads}"


def one_thread_trials(
    trials: Mapping[str, TrialRates], level: str
) -> tuple[TrialRates | None, int]:
    """The level's one-thread copy among `trials` and its thread count, or (None, 0)."""
    prefix = f"{level}{ONE_THREAD_OF}"
    for name, rates in trials.items():
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            return rates, int(name[len(prefix) :])
    return None, 0


def thp_mode(path: Path = THP_ENABLED) -> str:
    """The kernel's transparent huge page mode (always, madvise, never), or "unavailable"."""
    try:
        found = re.search(r"\[(\w+)\]", path.read_text())
    except OSError:
        return "unavailable"
    return found.group(1) if found else "unavailable"


def page_buffer(nbytes: int, value: float, huge: bool) -> torch.Tensor:
    """A float32 CPU tensor of `nbytes` holding `value`, its every page written here (the first
    touch), so no timed call faults a page in. With `huge`, its memory is an anonymous mapping
    advised MADV_HUGEPAGE, aligned to 2 MiB; where the kernel grants none (THP "never", no
    MADV_HUGEPAGE on this OS) it stays on small pages, which huge_page_share then reports."""
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if not huge or advice is None:
        return torch.full((nbytes // 4,), value, dtype=torch.float32)
    mapping = mmap.mmap(-1, nbytes + HUGE_PAGE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    # a kernel built without THP refuses the advice: small pages then, as torch's own
    with contextlib.suppress(OSError):
        mapping.madvise(advice)
    raw = torch.frombuffer(mapping, dtype=torch.uint8)  # the tensor keeps the mapping alive
    start = (-raw.data_ptr()) % HUGE_PAGE_BYTES
    buffer = raw[start : start + nbytes].view(torch.float32)
    buffer.fill_(value)
    return buffer


def huge_page_share(ptr: int, nbytes: int, smaps: str | None = None) -> float | None:
    """Share of the `nbytes` at `ptr` on huge pages: the AnonHugePages of the mapping holding
    `ptr` in /proc/self/smaps, over nbytes (at most 1); None where smaps cannot be read."""
    if smaps is None:
        try:
            smaps = SMAPS.read_text()
        except OSError:
            return None
    inside = False
    for line in smaps.splitlines():
        head = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
        if head:
            inside = int(head.group(1), 16) <= ptr < int(head.group(2), 16)
        elif inside and line.startswith("AnonHugePages:"):
            return min(1.0, int(line.split()[1]) * 1024 / nbytes)
    return None


def pages_label(share: float | None) -> str:
    if share is None:
        return "pages unknown"
    if share >= 1.0:
        return "2 MiB pages"
    return "4 KiB pages" if share == 0 else f"{share:.0%} on 2 MiB pages"


@dataclass(frozen=True)
class MainMemory:
    """Main memory's ceiling from two copies measured in the same trials: every calibration
    thread together (`all_threads`, rates as measured) and one thread alone, its rate counted
    once per calibration thread (`cores_added`: each core's own rate, added up)."""

    all_threads: TrialRates
    cores_added: TrialRates
    threads: int

    @property
    def added(self) -> float:
        """The cores' added one-thread rates: the median trial, as for the level's other
        figure (one thread still crosses the memory system shared with other tenants; in two
        sets of processes its median spread 3.9% and 2.6%, its best trial 5.3% and 2.2%)."""
        return median(self.cores_added.rates)

    @property
    def basis(self) -> str:
        """Which figure is the ceiling a run divides by: "cores added" (`added`), or, from
        PAIRED_FLOOR_MIN_THREADS threads up when even the best all-threads trial stayed under
        PAIRED_FLOOR of it, "all threads" (the all-threads copy's median trial)."""
        if (
            self.threads >= PAIRED_FLOOR_MIN_THREADS
            and self.all_threads.high < PAIRED_FLOOR * self.added
        ):
            return "all threads"
        return "cores added"

    @property
    def peak(self) -> float:
        return self.added if self.basis == "cores added" else self.all_threads.peak

    def modes(self) -> dict:
        """The all-threads trials in two modes, each mode's median and count of trials: every
        thread at its core's own rate ("unshared"), or held below it by a path the threads
        shared ("shared"). Flat plain values, as every ceiling field is (run.schema.json)."""
        unshared = [r for r in self.all_threads.rates if r >= UNSHARED_SHARE * self.added]
        shared = [r for r in self.all_threads.rates if r < UNSHARED_SHARE * self.added]
        return {
            "unshared_median": median(unshared) if unshared else None,
            "unshared_trials": len(unshared),
            "shared_median": median(shared) if shared else None,
            "shared_trials": len(shared),
        }

    def fields(self) -> dict:
        return {
            "basis": self.basis,
            "cores_added": self.added,
            "cores_added_trials": list(self.cores_added.rates),
            **self.modes(),
        }

    def method(self) -> str:
        """In words: which figure the ceiling is (what a run divides by), and the other one,
        recorded beside it and not divided by."""
        m = self.modes()
        modes = ", ".join(
            f"{m[f'{mode}_trials']} {mode} ({why})"
            + ("" if m[f"{mode}_median"] is None else f" at {m[f'{mode}_median'] / 1e9:.3g} GB/s")
            for mode, why in (("unshared", "every thread on a path of its own"),
                              ("shared", "threads sharing a path; on the VM: one CCD"))
        )  # fmt: skip
        added = (
            f"the one-thread copy's median trial x {self.threads} threads = "
            f"{self.added / 1e9:.3g} GB/s"
        )
        every = f"the all-threads copy's median trial, {self.all_threads.peak / 1e9:.3g} GB/s"
        if self.basis == "cores added":
            return (
                f"the ceiling, which a run divides by: cores added, {added} (each core's own "
                f"path, which no placement of the threads changes); recorded beside it, not "
                f"divided by: all threads, {every} (`measured`), its trials {modes}"
            )
        return (
            f"the ceiling, which a run divides by: all threads, {every}: their best trial "
            f"({self.all_threads.high / 1e9:.3g} GB/s) is under {PAIRED_FLOOR:.0%} of the cores "
            f"added, so the memory system's own limit holds the threads; its trials {modes}; "
            f"recorded beside it, not divided by: cores added, {added}"
        )


def main_memory(all_threads: TrialRates, cores_added: TrialRates, threads: int) -> MainMemory:
    median_trial = TrialRates(cores_added.config, cores_added.rates, MEDIAN)
    return MainMemory(all_threads, median_trial, threads)
