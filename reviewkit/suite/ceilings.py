"""Device ceilings: a known GPU's datasheet figures, and the rule that picks the peak MFU is
measured against.

docs/metrics.md: a GPU found in the platform table (rubrics/platforms.toml, read by
`platform_table`) uses its datasheet dense peak for MFU (the convention of published MFU figures)
with the measured ceiling beside it; any other device (every CPU) uses the measured ceiling and
says so.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import lru_cache

from reviewkit.suite import platform_table
from reviewkit.suite.workloads import CEILING_DTYPES


@dataclass(frozen=True)
class DatasheetEntry:
    name: str
    pattern: str  # regex matched against torch's device name
    peak_flops_per_s: dict[str, float]  # dense (no structured sparsity), per dtype
    peak_bytes_per_s: float | None
    reference: str


def _entry(p: platform_table.Platform) -> DatasheetEntry:
    """A platform's datasheet figures as the calibration takes them: the dense peaks of the
    dtypes the suite calibrates (fp32 the non-tensor-core rate: torch does not use TF32 for an
    fp32 matmul unless asked, and `torch.backends.cuda.matmul.allow_tf32` is recorded among the
    knobs), main-memory bandwidth, and a reference naming every document they come from."""
    dense = {
        d: f
        for d, f in p.peak_dense_flops_per_s.items()
        if d in CEILING_DTYPES and f.kind == platform_table.DATASHEET
    }
    bandwidth = p.figure("memory_bytes_per_s")
    if bandwidth is not None and bandwidth.kind != platform_table.DATASHEET:
        bandwidth = None
    used = [*dense.values(), *([bandwidth] if bandwidth else [])]
    documents = dict.fromkeys(f"{f.document} ({f.date})" for f in used)
    reference = (
        f"{p.name}, dense figures from {'; '.join(documents)} (rubrics/platforms.toml `{p.key}`)"
    )
    return DatasheetEntry(
        p.name,
        p.pattern or "",
        {d: float(f.value) for d, f in dense.items()},
        float(bandwidth.value) if bandwidth else None,
        reference,
    )


@lru_cache(maxsize=1)
def datasheet() -> tuple[DatasheetEntry, ...]:
    """The platform table's accelerators torch can name, with datasheet dense peaks, in the
    table's order (most specific pattern first). CPUs are never here: their MFU uses the
    measured ceiling."""
    return tuple(
        _entry(p)
        for p in platform_table.default_table().platforms
        if p.pattern
        and p.device != platform_table.CPU
        and (p.peak_dense_flops_per_s or p.figure("memory_bytes_per_s"))
    )


def lookup(device_name: str) -> DatasheetEntry | None:
    for entry in datasheet():
        if re.search(entry.pattern, device_name, flags=re.IGNORECASE):
            return entry
    return None


@dataclass(frozen=True)
class Ceiling:
    """One ceiling: the value MFU uses, its source, and both candidates beside it."""

    peak: float | None  # FLOP/s or bytes/s; None when neither source has a value
    source: str  # "measured" | "datasheet" | "not available"
    measured: float | None
    measured_method: str
    datasheet: float | None
    datasheet_ref: str
    reason: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def choose(
    measured: float | None, method: str, datasheet: float | None, ref: str, failure: str = ""
) -> Ceiling:
    if datasheet is not None:
        return Ceiling(datasheet, "datasheet", measured, method, datasheet, ref)
    if measured is not None:
        return Ceiling(
            measured,
            "measured",
            measured,
            method,
            None,
            "",
            "no datasheet entry for this device: MFU uses the measured ceiling",
        )
    return Ceiling(
        None,
        "not available",
        None,
        method,
        None,
        "",
        failure or "no datasheet entry and the calibration did not produce a value",
    )
