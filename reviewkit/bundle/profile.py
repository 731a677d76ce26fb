"""Device profiles: the file a calibration writes, its validation, and the per-fingerprint cache.

Torch-free. A profile is what two runs on one device divide by: compute ceilings per dtype and
bandwidth per memory level, with the fingerprint and torch build they were taken under. Runs
reuse the cached profile of their device, so an A/A pair shares its denominators instead of
re-measuring them (two quick runs once read the same GEMM at 56% and 78% MFU).
"""

from __future__ import annotations

import json
from pathlib import Path

from reviewkit.bundle import schema
from reviewkit.common.cache import CACHE_ENV, cache_dir
from reviewkit.common.errors import InputError
from reviewkit.common.files import write_text_atomic
from reviewkit.common.hashing import content_hash
from reviewkit.common.numbers import finite_number
from reviewkit.suite.profiles import SUITE_PROFILE_NAMES

KIND = "reviewkit.device-profile"
VERSION = 1
# The calibration's kernels and statistics (measure/calibration.py, measure/trials.py): a
# profile measured by another method is stale even on the same device and torch build. Bump it
# with any change to what a ceiling means or how it is read from the trials. 4: ceilings taken at
# the run's own thread count and float32 matmul precision (before: every core torch would use by
# default, whatever the run's), so a 1-thread run divides by a 1-thread peak; a CPU's DRAM
# ceiling the one-thread copy on 2 MiB pages times the threads (before: the all-threads copy's
# median, which the host's placement of the vCPUs split 33 / 52 GB/s); int8 and fp8 ceilings.
CALIBRATION_METHOD = 4
# The settings a ceiling belongs to, the profile's cache key with the device: the intra-op
# threads (a 2-thread run on a 1-thread ceiling read 134% MFU) and float32 matmul precision
# (TF32 or bf16 passes for fp32 GEMMs). A GPU's ceilings do not move with the host's threads, so
# there only the precision keys the profile; its power limit and clocks are recorded beside it
# (`conditions`), and a change of them renews a cached profile.
SETTING_KEYS = ("threads", "float32_matmul_precision")
# torch.set_float32_matmul_precision's values
FP32_MATMUL_PRECISIONS = ("highest", "high", "medium")
GPU_SETTING_KEYS = ("float32_matmul_precision",)


class ProfileError(InputError):
    """A device profile that cannot be used here: corrupt, of another version, stale (another
    torch build) or taken on another device."""


def setting_keys(device_kind: str) -> tuple[str, ...]:
    return SETTING_KEYS if device_kind == "cpu" else GPU_SETTING_KEYS


def keyed_settings(device_kind: str, settings: dict) -> dict:
    """The settings that key a profile on this kind of device."""
    return {k: settings.get(k) for k in setting_keys(device_kind)}


def settings_slug(device_kind: str, settings: dict) -> str:
    """The settings as a file-name part: `t2-highest` (CPU), `highest` (GPU)."""
    parts = []
    for key, value in keyed_settings(device_kind, settings).items():
        parts.append(f"t{value}" if key == "threads" else str(value))
    return "-".join(parts)


def settings_text(settings: dict | None) -> str:
    """The settings a profile was calibrated at, in words ("" when it records none)."""
    if not settings:
        return ""
    words = []
    if settings.get("threads") is not None:
        n = settings["threads"]
        words.append(f"{n} thread{'s' if n != 1 else ''}")
    if settings.get("float32_matmul_precision"):
        words.append(f"float32 matmul precision {settings['float32_matmul_precision']}")
    return ", ".join(words)


def cache_path(device_kind: str, fingerprint_hash: str, suite_profile: str, settings: dict) -> Path:
    slug = settings_slug(device_kind, settings)
    name = f"{device_kind}-{fingerprint_hash}-{suite_profile}-{slug}.json"
    return cache_dir() / "profiles" / name


def candidates(
    device_kind: str, fingerprint_hash: str, suite_profile: str, settings: dict
) -> list[Path]:
    """Cache files that could serve a run of this suite profile at these settings, most thorough
    first: a device profile calibrated at a more thorough suite profile serves a lighter run (one
    calibrated at `full` serves a `quick` run), never the other way round."""
    at_least = SUITE_PROFILE_NAMES[SUITE_PROFILE_NAMES.index(suite_profile) :]
    return [cache_path(device_kind, fingerprint_hash, c, settings) for c in reversed(at_least)]


def build(
    *,
    calibrated: dict,
    fingerprint: dict,
    torch_build: dict,
    device: str,
    device_name: str,
    calibration: str,
    created_unix_s: float,
    wall_s: float,
) -> dict:
    doc = {
        "kind": KIND,
        "version": VERSION,
        "method": CALIBRATION_METHOD,
        "created_unix_s": round(created_unix_s, 3),
        "calibration": calibration,
        "wall_s": round(wall_s, 3),
        "device": device,
        "device_name": device_name,
        "fingerprint": fingerprint,
        "torch": torch_build,
        "threads": calibrated["threads"],
        # what the ceilings belong to (the cache key) and, on a GPU, what they were taken under
        "settings": calibrated["settings"],
        "conditions": calibrated.get("conditions"),
        "datasheet_entry": calibrated.get("datasheet_entry"),
        "compute": calibrated["compute"],
        "memory": calibrated["memory"],
        # the same ceilings keyed by level name, for a reader (or jq) that wants `dram` or `l2`
        "bandwidth_by_level_bytes_per_s": {
            level["level"]: level["peak"] for level in calibrated["memory"]
        },
        "bandwidth": calibrated["bandwidth"],
        "interconnect": calibrated.get("interconnect")
        or {
            "available": False,
            "reason": "not measured: a profile covers one device; the link between devices is "
            "measured by collectives under torchrun, which reviewkit does not run yet",
        },
    }
    doc["hash"] = content_hash(doc)
    return doc


PROFILE_REMEDY = (
    "this is not a usable device profile. Write a new one with `reviewkit calibrate`, or run "
    "with --recalibrate"
)


def _need(cond: bool, path: Path, key: str, expected: str) -> None:
    if not cond:
        raise ProfileError(f"{path}: `{key}` {expected}; {PROFILE_REMEDY}")


def _positive_or_null(value: object) -> bool:
    return value is None or (finite_number(value) and value > 0)


def validate(doc: object, path: Path) -> dict:
    """The profile, or a ProfileError naming the file, the key and what was expected."""
    _need(isinstance(doc, dict), path, "(top level)", "must be a JSON object")
    assert isinstance(doc, dict)
    _need(doc.get("kind") == KIND, path, "kind", f"must be {KIND!r}")
    _need(doc.get("version") == VERSION, path, "version",
          f"must be {VERSION} (the device-profile version this reviewkit reads)")  # fmt: skip
    fp = doc.get("fingerprint")
    _need(isinstance(fp, dict) and isinstance(fp.get("hash"), str), path, "fingerprint.hash",
          "must be a string")  # fmt: skip
    build_ = doc.get("torch")
    _need(isinstance(build_, dict) and isinstance(build_.get("torch_version"), str), path,
          "torch.torch_version", "must be a string")  # fmt: skip
    compute = doc.get("compute")
    _need(isinstance(compute, dict) and bool(compute), path, "compute",
          "must map each dtype to its ceiling")  # fmt: skip
    assert isinstance(compute, dict)
    for dtype, entry in compute.items():
        _need(isinstance(entry, dict) and _positive_or_null(entry.get("peak")), path,
              f"compute.{dtype}.peak", "must be a positive number (FLOP/s) or null")  # fmt: skip
    memory = doc.get("memory")
    _need(isinstance(memory, list) and bool(memory), path, "memory",
          "must list the memory levels, innermost first")  # fmt: skip
    assert isinstance(memory, list)
    for i, level in enumerate(memory):
        _need(isinstance(level, dict) and isinstance(level.get("level"), str), path,
              f"memory[{i}].level", "must be a level name (l1, l2, llc, dram, hbm)")  # fmt: skip
        _need(_positive_or_null(level.get("peak")) and level.get("peak") is not None, path,
              f"memory[{i}].peak", "must be a positive number (bytes/s)")  # fmt: skip
        cap = level.get("capacity_bytes")
        last = i == len(memory) - 1
        _need((cap is None) if last else (isinstance(cap, int) and cap > 0), path,
              f"memory[{i}].capacity_bytes",
              "must be null for main memory (the last level) and a positive integer for a "
              "cache")  # fmt: skip
    _need(isinstance(doc.get("bandwidth"), dict)
          and _positive_or_null(doc["bandwidth"].get("peak")), path, "bandwidth.peak",
          "must be a positive number (bytes/s) or null")  # fmt: skip
    settings = doc.get("settings")
    _need(isinstance(settings, dict)
          and all(isinstance(settings.get(k), str if k != "threads" else int)
                  for k in setting_keys(str(doc.get("device")))), path, "settings",
          "must give the threads (an integer) and float32_matmul_precision (a string) the "
          "ceilings were calibrated at")  # fmt: skip
    for key in ("wall_s", "created_unix_s"):
        value = doc.get(key)
        _need(value is None or (finite_number(value) and value >= 0), path, key,
              "must be a finite number of seconds, 0 or more, or null")  # fmt: skip
    # What becomes a run's `ceilings` is held to what a run bundle's ceilings must be.
    schema.check(ceilings_of(doc, "pinned", None), path, part="ceilings", error=ProfileError,
                 remedy=PROFILE_REMEDY)  # fmt: skip
    _need(doc.get("hash") == content_hash(doc), path, "hash",
          "must match the profile's content (the file was edited or damaged after it was "
          "written)")  # fmt: skip
    return doc


def load(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(
            f"{path}: no such device profile; write one with `reviewkit calibrate --out {path}`"
        ) from None
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read the device profile ({exc.strerror})") from None
    try:
        doc = schema.parse(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ProfileError(
            f"{path}: not valid JSON ({exc}); write a new profile with `reviewkit calibrate`, "
            "or run with --recalibrate"
        ) from None
    return validate(doc, path)


def refusal(doc: dict, path: Path, fingerprint: dict, torch_version: str) -> str:
    """Why this profile cannot serve a run here ("" when it can): another device, another
    torch build."""
    theirs = doc["fingerprint"]
    if theirs.get("hash") != fingerprint.get("hash"):
        return (
            f"{path}: taken on {theirs.get('label') or 'another device'} (fingerprint "
            f"{theirs.get('hash')}), but this is {fingerprint.get('label')} (fingerprint "
            f"{fingerprint.get('hash')}): its ceilings are not this device's. Calibrate here "
            "with `reviewkit calibrate`, or run with --recalibrate"
        )
    if doc.get("method") != CALIBRATION_METHOD:
        return (
            f"{path}: measured by calibration method {doc.get('method', 1)}, but this reviewkit "
            f"calibrates by method {CALIBRATION_METHOD} (its kernels or statistics changed). "
            "Calibrate again with `reviewkit calibrate`, or run with --recalibrate"
        )
    built = doc["torch"].get("torch_version")
    if built != torch_version:
        return (
            f"{path}: taken under torch {built}, older than this torch build ({torch_version}): "
            "kernels and so ceilings change with the build. Calibrate again with "
            "`reviewkit calibrate`, or run with --recalibrate"
        )
    return ""


def settings_refusal(doc: dict, path: Path, settings: dict) -> str:
    """Why this profile's ceilings are not those of a run at `settings` ("" when they are)."""
    kind = str(doc.get("device"))
    theirs = keyed_settings(kind, doc.get("settings") or {})
    ours = keyed_settings(kind, settings)
    if theirs == ours:
        return ""
    flags = []
    if "threads" in ours:
        flags.append(f"--threads {ours['threads']}")
    flags.append(f"--float32-matmul-precision {ours['float32_matmul_precision']}")
    return (
        f"{path}: calibrated at {settings_text(theirs)}, but this run uses "
        f"{settings_text(ours)}: a ceiling belongs to the settings that move it. Calibrate at "
        f"these with `reviewkit calibrate {' '.join(flags)}`, or run with --recalibrate"
    )


def conditions_refusal(doc: dict, path: Path, conditions: dict | None) -> str:
    """Why a GPU profile's ceilings were taken under other conditions than now (a power limit
    or application clocks changed since), "" when they match or either side could not read
    them."""
    theirs = doc.get("conditions") or {}
    if not conditions or not conditions.get("available") or not theirs.get("available"):
        return ""
    moved = [k for k in CONDITION_KEYS if theirs.get(k) != conditions.get(k)]
    if not moved:
        return ""
    said = ", ".join(f"{k} {theirs.get(k)} -> {conditions.get(k)}" for k in moved)
    return (
        f"{path}: calibrated under other GPU conditions ({said}): the ceilings move with the "
        "power limit and clocks. Calibrate again with `reviewkit calibrate`, or run with "
        "--recalibrate"
    )


# The GPU conditions a profile's ceilings were taken under that renew it when they change: the
# enforced power limit and the application clocks (the clocks a kernel runs at unless it is
# power- or thermally-limited); the current clocks move with load and are not compared.
CONDITION_KEYS = ("power_limit_w", "applications_sm_clock_mhz", "applications_memory_clock_mhz")


def missing_dtypes(doc: dict, dtypes: list[str]) -> list[str]:
    return [d for d in dtypes if d not in doc["compute"]]


def save(doc: dict, path: Path) -> Path:
    try:
        write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    except OSError as exc:
        raise ProfileError(
            f"{path}: cannot write the device profile ({exc.strerror}); choose another --out, "
            f"or set {CACHE_ENV} to a writable folder"
        ) from None
    return path


def ceilings_of(doc: dict, source: str, path: Path | None) -> dict:
    """A run bundle's `ceilings`: the profile's compute, main-memory bandwidth and levels, and
    which profile they came from."""
    return {
        "compute": doc["compute"],
        "bandwidth": doc["bandwidth"],
        "memory": doc["memory"],
        "threads": doc.get("threads"),
        "datasheet_entry": doc.get("datasheet_entry"),
        "profile": {
            "hash": doc["hash"],
            "source": source,  # "cached" | "calibrated" | "pinned"
            "path": str(path) if path else None,
            "calibration": doc.get("calibration"),
            "created_unix_s": doc.get("created_unix_s"),
            "fingerprint": doc["fingerprint"].get("hash"),
            "settings": doc.get("settings"),
            "conditions": doc.get("conditions"),
        },
    }
