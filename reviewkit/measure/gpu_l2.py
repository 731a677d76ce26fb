"""The GPU L2 ceiling: streams held in the L2 at 1/4 and 1/2 its size, checked by a 4x stream.

A copy of half the L2 (what calibration does for a large CPU cache) is one launch of a few
microseconds on a datacenter GPU: the launch, not the L2, sets its time, and the figure came out
under HBM's and was raised to it (samples/gpu-quick-h200). Here one launch reads a level-resident
buffer many times over: calibration's read stream, `buffer.expand(passes, n).sum()`, whose rows
are all the same memory (stride 0). A full reduction walks its elements in order, every thread
a grid-stride apart, so at any moment the running threads read a window of a few MiB that slides
through the passes: an address comes round again only after the whole buffer has, which a
buffer within the L2 survives and one four times its size does not. The launch moves 4 GiB, so
its fixed cost is a percent of it. The same stream over four times the L2 must therefore fall to
HBM's rate: if it does not, the stream was served nearer than the L2 (reads shared or cached
on the SMs) and its figures are not the L2's, and the level is not measured. (The row-wise
`sum(dim=1)` was not taken: it gives each row to its own blocks, which run side by side over the
same addresses, so even the 4x buffer would be read once from HBM and many times from L2.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import torch

from reviewkit.common.format import binary_size
from reviewkit.measure.hierarchy import MemoryLevel
from reviewkit.measure.trials import TrialRates

Maker = Callable[[], Callable[[], float]]
StreamMaker = Callable[[int, int, torch.device], tuple[Maker, int]]

# Working sets as shares of the L2: a quarter leaves room for the partitioned L2s of recent
# GPUs (an H100's 50 MiB is two halves, each SM nearest one), a half is calibration's usual fill
# (hierarchy.CALIBRATION_FILL) and keeps the level's own name in the plan.
FRACTIONS = (0.25, 0.5)
CHECK_MULTIPLE = 4
# One launch reads this much: 0.4 ms at an L2's 10 TB/s, 1.3 ms at HBM's 3.3 TB/s, so a launch's
# few microseconds of fixed cost are at most 1-2% of the call.
BYTES_PER_CALL = 4 << 30
# HBM is calibrated with a copy (read + write); a read-only stream runs somewhat faster (no
# write turnaround on the bus), so the check may exceed the copy's rate by this much and still
# be HBM's. More than that and the stream was served from nearer than the L2.
HBM_CHECK_TOLERANCE = 1.25
ELEMENT_BYTES = 4  # float32


def probe_name(level: str, fraction: float) -> str:
    """The memory plan's name for the stream at `fraction` of the level (the half keeps the
    level's own name, so the level's trials are found as every other level's are)."""
    return level if fraction == 0.5 else f"{level}@{fraction:g}"


def check_name(level: str) -> str:
    return f"{level}@{CHECK_MULTIPLE}x"


def plan(
    level: MemoryLevel, device: torch.device, stream: StreamMaker
) -> dict[str, tuple[Maker, float, str]]:
    """The L2's streams, name -> (maker, bytes per call, method): one per fraction, and the
    check at CHECK_MULTIPLE times the level; `stream(working set, bytes per call, device)` is
    calibration's read stream."""
    assert level.capacity_bytes, "the L2 plan needs the L2's size"
    size = level.capacity_bytes
    out: dict[str, tuple[Maker, float, str]] = {}
    for fraction in (*FRACTIONS, CHECK_MULTIPLE):
        ws = int(size * fraction)
        maker, nbytes = stream(ws, BYTES_PER_CALL, device)
        passes = nbytes // max(1, ws // ELEMENT_BYTES * ELEMENT_BYTES)
        if fraction == CHECK_MULTIPLE:
            name = check_name(level.name)
        else:
            name = probe_name(level.name, fraction)
        method = (
            f"read stream in one launch: a {binary_size(ws)} buffer ({fraction:g}x the "
            f"{binary_size(size)} L2) summed whole as {passes} stride-0 rows, "
            f"{binary_size(nbytes)} read per call"
        )
        out[name] = (maker, float(nbytes), method)
    return out


@dataclass(frozen=True)
class L2Judgement:
    """What the probes say of the L2: the trials its ceiling is (None when not measured), the
    method's addition, and the probes' figures as the level record keeps them (flat: a level
    record holds plain values and lists of them)."""

    basis: TrialRates | None
    working_set_bytes: int | None
    note: str
    fields: dict


def judge(
    level: MemoryLevel, trials: Mapping[str, TrialRates], hbm_peak: float | None
) -> L2Judgement | None:
    """The L2 level's ceiling from its probes among `trials`, checked against HBM's `hbm_peak`
    (bytes/s); None when the plan had no L2 probes (a CPU's L2)."""
    check = trials.get(check_name(level.name))
    if check is None or not level.capacity_bytes:
        return None
    names = {f: probe_name(level.name, f) for f in FRACTIONS}
    probes = {f: trials[name] for f, name in names.items() if name in trials}
    best_fraction = max(probes, key=lambda f: probes[f].peak)
    best = probes[best_fraction]
    fell = hbm_peak is not None and check.peak <= HBM_CHECK_TOLERANCE * hbm_peak
    fields = {
        "probe_fractions": list(probes),
        "probe_peaks": [t.peak for t in probes.values()],
        "check_multiple": CHECK_MULTIPLE,
        "check_peak": check.peak,
        "check_tolerance": HBM_CHECK_TOLERANCE,
        "check_fell_to_hbm": fell,
    }
    unmeasured = L2Judgement(basis=None, working_set_bytes=None, note="", fields=fields)
    if hbm_peak is None:
        note = "; not measured: no HBM figure to check the 4x stream against"
        return replace(unmeasured, note=note)
    check_gbs, hbm_gbs = check.peak / 1e9, hbm_peak / 1e9
    if not fell:
        note = (
            f"; not measured: the {CHECK_MULTIPLE}x stream read {check_gbs:.4g} GB/s, over "
            f"{HBM_CHECK_TOLERANCE:g}x HBM's {hbm_gbs:.4g} GB/s, so the streams were served "
            "nearer than the L2 and their figures are not its"
        )
        return replace(unmeasured, note=note)
    tried = ", ".join(f"{f:g}x" for f in probes)
    note = (
        f"; the best of {tried} ({best_fraction:g}x, {best.peak / 1e9:.4g} GB/s); the "
        f"{CHECK_MULTIPLE}x check read {check_gbs:.4g} GB/s, within {HBM_CHECK_TOLERANCE:g}x "
        f"HBM's {hbm_gbs:.4g}"
    )
    size = int(level.capacity_bytes * best_fraction)
    return replace(unmeasured, basis=best, working_set_bytes=size, note=note)
