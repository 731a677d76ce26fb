"""Device ceilings: the datasheet table, and the rule that picks the peak MFU is measured against.

docs/metrics.md: a GPU found in the datasheet table uses its datasheet dense peak for MFU (the
convention of published MFU figures) with the measured ceiling beside it; any other device
(most CPUs) uses the measured ceiling and says so.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

TERA = 1e12


@dataclass(frozen=True)
class DatasheetEntry:
    name: str
    pattern: str  # regex matched against torch's device name
    peak_flops_per_s: dict[str, float]  # dense (no structured sparsity), per dtype
    peak_bytes_per_s: float
    reference: str


# fp32 is the non-tensor-core rate: torch does not use TF32 for fp32 matmul unless asked
# (torch.backends.cuda.matmul.allow_tf32 is recorded among the knobs). Most specific first.
DATASHEET = (
    DatasheetEntry(
        "NVIDIA H200 SXM",
        r"H200",
        {"fp32": 67 * TERA, "bf16": 989 * TERA, "fp16": 989 * TERA},
        4.8 * TERA,
        "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column; "
        "tensor-core figures halved from the with-sparsity values",
    ),
    DatasheetEntry(
        "NVIDIA H100 PCIe",
        r"H100.*PCIe",
        {"fp32": 51 * TERA, "bf16": 756 * TERA, "fp16": 756 * TERA},
        2.0 * TERA,
        "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 PCIe column, dense",
    ),
    DatasheetEntry(
        "NVIDIA H100 SXM",
        r"H100",
        {"fp32": 67 * TERA, "bf16": 989.4 * TERA, "fp16": 989.4 * TERA},
        3.35 * TERA,
        "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM column, dense",
    ),
    DatasheetEntry(
        "NVIDIA A100 SXM4 80GB",
        r"A100-SXM4?-80GB",
        {"fp32": 19.5 * TERA, "bf16": 312 * TERA, "fp16": 312 * TERA},
        2.039 * TERA,
        "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM column, dense",
    ),
    DatasheetEntry(
        "NVIDIA A100 PCIe 80GB",
        r"A100.*PCIE.*80GB|A100 80GB PCIe",
        {"fp32": 19.5 * TERA, "bf16": 312 * TERA, "fp16": 312 * TERA},
        1.935 * TERA,
        "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB PCIe column, dense",
    ),
    DatasheetEntry(
        "NVIDIA A100 40GB",
        r"A100",
        {"fp32": 19.5 * TERA, "bf16": 312 * TERA, "fp16": 312 * TERA},
        1.555 * TERA,
        "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 40GB column, dense",
    ),
    DatasheetEntry(
        "NVIDIA L4",
        r"\bL4\b",
        {"fp32": 30.3 * TERA, "bf16": 121 * TERA, "fp16": 121 * TERA},
        0.3 * TERA,
        "NVIDIA L4 Tensor Core GPU datasheet (2023); tensor-core figures halved from the "
        "with-sparsity values",
    ),
    DatasheetEntry(
        "AMD Instinct MI300X",
        r"MI300X",
        {"fp32": 163.4 * TERA, "bf16": 1307.4 * TERA, "fp16": 1307.4 * TERA},
        5.3 * TERA,
        "AMD Instinct MI300X accelerator datasheet (2023), dense matrix figures",
    ),
)


def lookup(device_name: str) -> DatasheetEntry | None:
    for entry in DATASHEET:
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
