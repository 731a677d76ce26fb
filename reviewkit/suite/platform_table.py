"""The platform table (rubrics/platforms.toml): each platform's published or measured figures.

Torch-free. Each figure carries its value, its unit (the field's own), the document it comes from
and where in it, its date, and its kind: `datasheet` (what the vendor publishes) or `measured`
(what reviewkit measured on the device). Dense peaks are what MFU may use; sparse peaks are kept
apart and never used for it. A measured device profile overrides the datasheet figures of its own
device (`overlay_measured`). docs/platforms.md describes the table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import NoReturn

from reviewkit import rubrics
from reviewkit.common.errors import InputError, UsageError
from reviewkit.common.numbers import finite_number
from reviewkit.common.tomlfile import closest, read_toml

DEFAULT_PLATFORMS = rubrics.FOLDER / "platforms.toml"
VERSION = 1

DATASHEET, MEASURED = "datasheet", "measured"
KINDS = (DATASHEET, MEASURED)
BIDIRECTIONAL, PER_DIRECTION = "bidirectional", "per direction"
DIRECTIONS = (BIDIRECTIONAL, PER_DIRECTION)
# Every dtype a peak may be given for (int8 in ops/s). fp32 is the non-tensor-core rate.
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")
# What kind of device a platform is: a GPU torch names through CUDA or HIP, another accelerator,
# a TPU, a CPU (whose figures are always measured: docs/platforms.md).
DEVICES = ("gpu", "accelerator", "tpu", "cpu")
CPU = "cpu"

DENSE, SPARSE = "peak_dense_flops_per_s", "peak_sparse_flops_per_s"
PEAK_TABLES = (DENSE, SPARSE)
# The single figures of a platform and their units (each field's name ends in its unit).
FIGURE_UNITS = {
    "memory_bytes_per_s": "B/s",
    "memory_capacity_bytes": "B",
    "l2_or_onchip_bytes": "B",
    "tdp_w": "W",
    "power_range_w": "W",
    "scale_up_link": "B/s",
    "scale_up_domain": "devices",
    "host_link": "B/s",
}
LINKS = ("scale_up_link", "host_link")
RANGES = ("power_range_w",)
TEXT_KEYS = ("name", "vendor", "device", "pattern", "fingerprint")
REQUIRED_KEYS = ("name", "vendor", "device", DENSE)
PLATFORM_KEYS = (*TEXT_KEYS, *PEAK_TABLES, *FIGURE_UNITS, "missing")
FILE_KEYS = ("version", "sources", "platforms")
FIGURE_KEYS = ("value", "source", "at", "kind", "date", "name", "direction")
SOURCE_KEYS = ("title", "date")
REMEDY = "fix the table (the comment at the top of rubrics/platforms.toml gives each field's form)"


def _flops_unit(dtype: str) -> str:
    return "ops/s" if dtype == "int8" else "FLOP/s"


@dataclass(frozen=True)
class Figure:
    """One published or measured value, with where it comes from."""

    value: float | tuple[float, float]  # a (low, high) pair for a range
    unit: str
    document: str  # the source's title
    at: str  # where in it
    date: str
    kind: str  # DATASHEET | MEASURED
    name: str = ""  # a link's name ("NVLink 4", "PCIe Gen5 x16")
    direction: str = ""  # a link's: BIDIRECTIONAL | PER_DIRECTION

    @property
    def source(self) -> str:
        """The document and where in it: what a reader looks the figure up by."""
        return f"{self.document}: {self.at}"


@dataclass(frozen=True)
class Platform:
    key: str  # the table's key: "h100-sxm"
    name: str
    vendor: str
    device: str  # one of DEVICES
    pattern: str | None  # regex over torch's device name; None when torch cannot name it
    peak_dense_flops_per_s: dict[str, Figure]  # what MFU may use
    peak_sparse_flops_per_s: dict[str, Figure]  # with structured sparsity: never for MFU
    figures: dict[str, Figure]  # the FIGURE_UNITS fields present
    missing: dict[str, str] = field(default_factory=dict)  # absent figure -> why
    fingerprint: str | None = None  # a measured platform's device fingerprint

    def figure(self, key: str) -> Figure | None:
        return self.figures.get(key)

    def kinds(self) -> set[str]:
        return {f.kind for f in self.all_figures().values()}

    def all_figures(self) -> dict[str, Figure]:
        """Every figure by its dotted path: `peak_dense_flops_per_s.bf16`, `tdp_w`."""
        out = {f"{DENSE}.{d}": f for d, f in self.peak_dense_flops_per_s.items()}
        out.update({f"{SPARSE}.{d}": f for d, f in self.peak_sparse_flops_per_s.items()})
        out.update(self.figures)
        return out


@dataclass(frozen=True)
class PlatformTable:
    path: Path
    version: int
    platforms: tuple[Platform, ...]  # in the file's order, the order patterns are tried in

    def platform_keys(self) -> list[str]:
        return [p.key for p in self.platforms]

    def platform(self, name: str) -> Platform:
        """The platform by its key or its name (case-insensitive); an unknown name is refused
        with the valid ones."""
        wanted = name.strip().lower()
        for p in self.platforms:
            if wanted in (p.key.lower(), p.name.lower()):
                return p
        raise UsageError(
            f"unknown platform {name!r}{closest(wanted, self.platform_keys())}; the platform table "
            f"({self.path}) has: {', '.join(self.platform_keys())}"
        )

    def for_device(self, device_name: str, *, cpu: bool = False) -> Platform | None:
        """The first platform whose pattern matches torch's device name (CPUs only when asked:
        their torch names a family, not a machine)."""
        for p in self.platforms:
            if p.pattern is None or (p.device == CPU and not cpu):
                continue
            if re.search(p.pattern, device_name, flags=re.IGNORECASE):
                return p
        return None


def _fail(
    path: Path, key: str, expected: str, got: object = None, *, show: bool = True
) -> NoReturn:
    got_text = f", got {got!r}" if show else ""
    raise InputError(f"{path}: `{key}` {expected}{got_text}; {REMEDY}")


def _number(value: object) -> bool:
    return not isinstance(value, bool) and finite_number(value) and value > 0


def _check_keys(path: Path, where: str, doc: Mapping, allowed: tuple[str, ...]) -> None:
    for key in doc:
        if key not in allowed:
            raise InputError(
                f"{path}: unknown key `{where}{key}`{closest(key, allowed)}; expected one of "
                f"{', '.join(allowed)}; {REMEDY}"
            )


def _sources(path: Path, doc: object) -> dict[str, tuple[str, str]]:
    if not isinstance(doc, dict) or not doc:
        _fail(path, "sources", "must be a table of documents ({title, date} each)", doc)
    assert isinstance(doc, dict)
    out = {}
    for key, src in doc.items():
        if not isinstance(src, dict):
            _fail(path, f"sources.{key}", 'must be a table {title = "...", date = "..."}', src)
        _check_keys(path, f"sources.{key}.", src, SOURCE_KEYS)
        for part in SOURCE_KEYS:
            if not isinstance(src.get(part), str) or not src[part].strip():
                _fail(path, f"sources.{key}.{part}", "must be a non-empty string", src.get(part))
        out[key] = (src["title"], src["date"])
    return out


def _figure(
    path: Path,
    where: str,
    doc: object,
    unit: str,
    sources: dict,
    *,
    link: bool = False,
    pair: bool = False,
) -> Figure:
    if not isinstance(doc, dict):
        _fail(
            path,
            where,
            "must be an inline table {value = ..., source = ..., at = ..., kind = ...}",
            doc,
        )
    assert isinstance(doc, dict)
    _check_keys(path, f"{where}.", doc, FIGURE_KEYS)
    for part in ("value", "source", "at", "kind"):
        if part not in doc:
            _fail(
                path,
                f"{where}.{part}",
                "is missing: every figure gives its value, source, "
                "where in the source (`at`) and kind",
                show=False,
            )
    value = doc["value"]
    if pair:
        if not (
            isinstance(value, list)
            and len(value) == 2
            and all(map(_number, value))
            and value[0] <= value[1]
        ):
            _fail(path, f"{where}.value", f"must be [low, high] in {unit}, low <= high", value)
        value = (float(value[0]), float(value[1]))
    elif not _number(value):
        _fail(path, f"{where}.value", f"must be a positive number ({unit})", value)
    else:
        value = float(value)
    if not isinstance(doc["source"], str) or doc["source"] not in sources:
        _fail(
            path,
            f"{where}.source",
            f"must name a document of [sources]{closest(doc['source'], sources)}"
            f" ({', '.join(sources)})",
            doc["source"],
        )
    if not isinstance(doc["at"], str) or not doc["at"].strip():
        _fail(path, f"{where}.at", "must say where in the source the figure is", doc["at"])
    if doc["kind"] not in KINDS:
        _fail(path, f"{where}.kind", f"must be one of {', '.join(KINDS)}", doc["kind"])
    title, date = sources[doc["source"]]
    date = doc.get("date", date)
    if not isinstance(date, str) or not date.strip():
        _fail(path, f"{where}.date", "must be a non-empty string", date)
    name = direction = ""
    if link:
        name, direction = doc.get("name"), doc.get("direction")
        if not isinstance(name, str) or not name.strip():
            _fail(path, f"{where}.name", 'must name the link ("NVLink 4", "PCIe Gen5 x16")', name)
        if direction not in DIRECTIONS:
            _fail(
                path,
                f"{where}.direction",
                f"must be one of {', '.join(map(repr, DIRECTIONS))}",
                direction,
            )
    else:
        for part in ("name", "direction"):
            if part in doc:
                _fail(
                    path,
                    f"{where}.{part}",
                    "is for links only (scale_up_link, host_link)",
                    doc[part],
                )
    return Figure(value, unit, title, doc["at"], date, doc["kind"], name or "", direction or "")


def _peaks(path: Path, where: str, doc: object, sources: dict) -> dict[str, Figure]:
    if not isinstance(doc, dict):
        _fail(path, where, f"must be a table of peaks by dtype ({', '.join(DTYPES)})", doc)
    assert isinstance(doc, dict)
    _check_keys(path, f"{where}.", doc, DTYPES)
    return {d: _figure(path, f"{where}.{d}", f, _flops_unit(d), sources) for d, f in doc.items()}


def _text(path: Path, where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        _fail(path, where, "must be a non-empty string", value)
    assert isinstance(value, str)
    return value


def _platform(path: Path, key: str, doc: object, sources: dict) -> Platform:
    where = f"platforms.{key}"
    if not isinstance(doc, dict):
        _fail(path, where, "must be a table", doc)
    assert isinstance(doc, dict)
    _check_keys(path, f"{where}.", doc, PLATFORM_KEYS)
    for required in REQUIRED_KEYS:
        if required not in doc:
            _fail(path, f"{where}.{required}", "is missing", show=False)
    name, vendor = (
        _text(path, f"{where}.name", doc["name"]),
        _text(path, f"{where}.vendor", doc["vendor"]),
    )
    if doc["device"] not in DEVICES:
        _fail(path, f"{where}.device", f"must be one of {', '.join(DEVICES)}", doc["device"])
    pattern = doc.get("pattern")
    if pattern is not None:
        try:
            re.compile(_text(path, f"{where}.pattern", pattern))
        except re.error as exc:
            _fail(path, f"{where}.pattern", f"must be a regular expression ({exc})", pattern)
    fingerprint = doc.get("fingerprint")
    if fingerprint is not None:
        _text(path, f"{where}.fingerprint", fingerprint)
    dense = _peaks(path, f"{where}.{DENSE}", doc[DENSE], sources)
    sparse = _peaks(path, f"{where}.{SPARSE}", doc.get(SPARSE, {}), sources)
    figures = {
        k: _figure(path, f"{where}.{k}", doc[k], unit, sources, link=k in LINKS, pair=k in RANGES)
        for k, unit in FIGURE_UNITS.items()
        if k in doc
    }
    domain = figures.get("scale_up_domain")
    if domain is not None and not float(domain.value).is_integer():
        _fail(
            path,
            f"{where}.scale_up_domain.value",
            "must be a whole number of devices",
            domain.value,
        )
    missing = doc.get("missing", {})
    if not isinstance(missing, dict) or not all(isinstance(v, str) and v for v in missing.values()):
        _fail(path, f"{where}.missing", "must map each absent figure to why it is absent", missing)
    present = set(figures) | {f"{DENSE}.{d}" for d in dense} | {f"{SPARSE}.{d}" for d in sparse}
    for absent in missing:
        if absent in present:
            _fail(
                path, f"{where}.missing.{absent}", "names a figure the platform gives", show=False
            )
    return Platform(
        key,
        name,
        vendor,
        doc["device"],
        pattern,
        dense,
        sparse,
        figures,
        dict(missing),
        fingerprint,
    )


def read_table(path: Path = DEFAULT_PLATFORMS) -> PlatformTable:
    """Read and check a platform table; a malformed one raises InputError naming the file, the
    key, what was expected and what to do."""
    doc = read_toml(path)
    _check_keys(path, "", doc, FILE_KEYS)
    if doc.get("version") != VERSION:
        raise InputError(
            f"{path}: `version` is {doc.get('version')!r}; this reviewkit reads platform tables of "
            f"version {VERSION}: set `version = {VERSION}` (or upgrade reviewkit for a newer table)"
        )
    sources = _sources(path, doc.get("sources"))
    platforms = doc.get("platforms")
    if not isinstance(platforms, dict) or not platforms:
        _fail(path, "platforms", "must hold one [platforms.<key>] table per platform", platforms)
    assert isinstance(platforms, dict)
    return PlatformTable(
        path, VERSION, tuple(_platform(path, k, p, sources) for k, p in platforms.items())
    )


@lru_cache(maxsize=1)
def default_table() -> PlatformTable:
    """The shipped table, read once per process."""
    return read_table(DEFAULT_PLATFORMS)


def platform(name: str, table: PlatformTable | None = None) -> Platform:
    return (table or default_table()).platform(name)


def for_device(device_name: str, table: PlatformTable | None = None) -> Platform | None:
    return (table or default_table()).for_device(device_name)


def _measured_value(entry: object) -> float | None:
    """What the calibration measured for one ceiling of a device profile or a bundle's
    `ceilings`: its `measured` value (a GPU's `peak` is the datasheet's), else the peak of a
    ceiling whose source is measured."""
    if not isinstance(entry, Mapping):
        return None
    value = entry.get("measured")
    if value is None and entry.get("source") == MEASURED:
        value = entry.get("peak")
    return float(value) if _number(value) else None


def overlay_measured(platform: Platform, ceilings: Mapping, source: str, date: str) -> Platform:
    """The platform with a measured device profile's figures over its datasheet ones: compute per
    dtype and main-memory bandwidth, each marked `measured`. `ceilings` is a device profile or a
    run bundle's `ceilings` (`compute.<dtype>`, `bandwidth`); `source` names it (the profile's
    file or hash) and `date` when it was measured. Figures it lacks stay as they were."""
    dense = dict(platform.peak_dense_flops_per_s)
    for dtype, entry in (ceilings.get("compute") or {}).items():
        value = _measured_value(entry)
        if dtype in DTYPES and value is not None:
            dense[dtype] = Figure(
                value, _flops_unit(dtype), source, f"compute.{dtype}.measured", date, MEASURED
            )
    figures = dict(platform.figures)
    bandwidth = _measured_value(ceilings.get("bandwidth"))
    if bandwidth is not None:
        figures["memory_bytes_per_s"] = Figure(
            bandwidth, "B/s", source, "bandwidth.measured", date, MEASURED
        )
    missing = {
        k: v
        for k, v in platform.missing.items()
        if k not in {f"{DENSE}.{d}" for d in dense} | set(figures)
    }
    return replace(platform, peak_dense_flops_per_s=dense, figures=figures, missing=missing)
