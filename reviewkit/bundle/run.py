"""The run bundle on disk: a folder with run.json (versioned schema), written atomically."""

from __future__ import annotations

import json
import math
from pathlib import Path

from reviewkit.bundle import schema
from reviewkit.bundle.records import Run
from reviewkit.common.errors import BundleError
from reviewkit.common.files import write_text_atomic
from reviewkit.common.numbers import finite_number

# 2: every workload carries `energy` (metered over its measured window, or why not), and the
# run its `energy_meter`. Version 1 bundles load through migrate_v1_to_v2.
# 3: every workload is measured in rounds: `round_sizes` splits its `samples_s` (stored in
# round order) into rounds, and the run records its `rounds` plan. Version 2 bundles load
# through migrate_v2_to_v3 as one round.
# 4: ceilings come from a device profile (`ceilings.profile`, bandwidth per level in
# `ceilings.memory`); version 3 bundles keep their in-run ceilings (migrate_v3_to_v4).
# 5: a run measured under torch.distributed says so in `distributed` (world size, backend,
# hosts, ranks, topology; null for one process), its workloads carry each rank's samples
# (`rank_samples_s`) and bytes on the wire (`wire_bytes`), and `ceilings.interconnect` the link.
# 6: every workload carries its measured exposed overhead (`overhead`: method, the floor call's
# or graph replay's samples, or why not) and the ops one call dispatches (`op_profile`); the
# interconnect its collectives' latency (`ceilings.interconnect.latency_s`). Version 5 bundles
# load through migrate_v5_to_v6 with the overhead not measured. Within 6, `run_to_run` (the
# device's run-to-run figure when the run started, bundle/run_to_run.record) is optional: a
# bundle without it is read as recording none (a comparison takes the rubric's default, as
# before), and a reader that does not know the key loses nothing it used, so no version step.
SCHEMA_VERSION = 6
RUN_FILE = "run.json"
MAX_SAMPLE_S = 86_400.0  # one call's time: a day is past any benchmark call, and keeps sums finite
KIND = "reviewkit.run"
# A workload's `status` in a run bundle (and a row's in the evidence files): "ok" is the only
# one that carries measurements; every other status says why not (the runner defines them).
STATUS_OK = "ok"
# Why a workload carries no measurements (the runner sets them; readers name them in reasons).
STATUS_OVER_BUDGET = "over-budget"
STATUS_UNSUPPORTED = "unsupported"
STATUS_OOM = "out-of-memory"
STATUS_TIMEOUT = "timeout"
STATUS_ERROR = "error"
STATUS_NOT_RUN = "not-run"


def device_name(run: Run) -> str:
    """The run's device as recorded: the GPU's name, the CPU's model, else the device knob."""
    return run.device_label


def write_json_atomic(path: Path, document: dict) -> None:
    """The document as JSON, written atomically; readable by all, as a bundle is shared."""
    text = json.dumps(document, indent=1, sort_keys=False, allow_nan=False) + "\n"
    write_text_atomic(path, text, mode=0o644)


def write_run(out_dir: Path, run: Run | dict) -> Path:
    """The run (a record, or the runner's document) as out_dir/run.json, atomically."""
    doc = run.to_json() if isinstance(run, Run) else run
    doc = {**doc, "schema_version": SCHEMA_VERSION, "kind": KIND}
    path = Path(out_dir) / RUN_FILE
    write_json_atomic(path, _finite(doc))
    return path


def _finite(obj):
    """JSON has no inf/NaN: write them as null (an infinite tail ratio, say)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def load_run(path: Path | str) -> Run:
    """Read a run bundle (its folder or its run.json); refuse foreign or other-version files."""
    path = Path(path)
    file = path / RUN_FILE if path.is_dir() else path
    if not file.exists():
        raise BundleError(
            f"{file}: no run bundle here; pass a folder written by `reviewkit run --out DIR`"
        )
    try:
        text = file.read_text(encoding="utf-8")
        doc = schema.parse(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise BundleError(f"{file}: not readable as JSON ({exc}); re-run `reviewkit run`") from exc
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise BundleError(
            f'{file}: not a reviewkit run bundle (expected "kind": "{KIND}"); '
            "pass the run.json that `reviewkit run` wrote"
        )
    version = doc.get("schema_version")
    # type(...) is int: JSON's true would compare equal to 1, and 1.0 is no version we wrote
    if not (type(version) is int and (version in MIGRATIONS or version == SCHEMA_VERSION)):
        older = ", ".join(str(v) for v in sorted(MIGRATIONS))
        raise BundleError(
            f"{file}: schema_version {version!r} but this reviewkit reads version "
            f"{SCHEMA_VERSION} (and migrates version {older} on load); re-measure with "
            "`reviewkit run` or use the reviewkit release that wrote it"
        )
    for key in ("suite", "environment", "knobs", "ceilings", "workloads"):
        if key not in doc:
            raise BundleError(f"{file}: key {key!r} is missing; the bundle is damaged, re-run it")
    workloads = doc["workloads"]  # what the migrations walk
    _require(isinstance(workloads, list) and all(isinstance(w, dict) for w in workloads), file,
             "workloads", workloads, "a list of workload tables")  # fmt: skip
    while doc["schema_version"] != SCHEMA_VERSION:
        doc = MIGRATIONS[doc["schema_version"]](doc)
    schema.check_once(doc, text, file)
    check_values(doc, file)
    return Run.from_json(doc)


# --- values the analysis computes with, checked on load and named when wrong (issue 18) ------


def _require(ok: bool, file: Path, key: str, value: object, expected: str) -> None:
    if not ok:
        schema.refuse(file, key, value, expected)


def _times(values: object) -> bool:
    return isinstance(values, list) and all(
        finite_number(x) and 0 < x <= MAX_SAMPLE_S for x in values
    )


def check_values(doc: dict, file: Path) -> None:
    """What run.schema.json leaves to Python: the samples (thousands of numbers, ten times
    faster checked here) are times above 0 and at most a day, and each workload's rounds sum to
    its samples. A bundle edited by hand or written by something else fails here, naming the
    key, not later with a traceback."""
    for i, w in enumerate(doc["workloads"]):
        where = f"workloads[{i}]"
        for key in ("samples_s", "warmup_samples_s"):
            _require(_times(w.get(key, [])), file, f"{where}.{key}", w.get(key),
                     "a list of times in seconds above 0 and at most 86,400")  # fmt: skip
        for r, per_rank in enumerate(w.get("rank_samples_s") or []):
            _require(_times(per_rank), file, f"{where}.rank_samples_s[{r}]", per_rank,
                     "a list of times in seconds above 0 and at most 86,400")  # fmt: skip
        sizes, samples = w.get("round_sizes"), w["samples_s"]
        if sizes is not None:
            _require(sum(sizes) == len(samples), file, f"{where}.round_sizes", sizes,
                     f"counts of samples per round summing to {len(samples)}")  # fmt: skip


# --- migrations: an older bundle is read as the current schema, in memory (never rewritten) ----

V1_NO_ENERGY = "recorded with run.json schema 1, before energy was metered"
V1_NO_SENSORS = "recorded with run.json schema 1, before sensors were surveyed"


def migrate_v1_to_v2(doc: dict) -> dict:
    """Schema 1 -> 2: no workload of a v1 run was metered, so each gets `energy` absent, with
    that reason; `environment.sensors` (surveyed by later v1 runs) is kept, else absent with a
    reason; `energy_meter` likewise. Returns a new document with `migrated_from: 1`."""
    out = {**doc, "schema_version": 2, "migrated_from": doc.get("migrated_from", 1)}
    out["workloads"] = [
        w if "energy" in w else {**w, "energy": {"available": False, "reason": V1_NO_ENERGY}}
        for w in doc["workloads"]
    ]
    env = dict(doc.get("environment") or {})
    if "sensors" not in env:
        absent = {"available": False, "reason": V1_NO_SENSORS}
        env["sensors"] = {
            "rapl": {**absent, "domains": []},
            "nvml_energy": dict(absent),
            "thermal": {**absent, "celsius": {}},
            "cpu_clocks": {**absent, "mhz": {}},
        }
    out["environment"] = env
    out.setdefault("energy_meter", {"available": False, "reason": V1_NO_ENERGY})
    return out


def migrate_v2_to_v3(doc: dict) -> dict:
    """Schema 2 -> 3: a v2 run measured each workload in one window, so its samples are one
    round (`round_sizes` = [their count], [] when there are none) and the plan is one round
    with no seed. Returns a new document with `migrated_from` kept or set to 2."""
    out = {**doc, "schema_version": 3, "migrated_from": doc.get("migrated_from", 2)}
    out["workloads"] = [
        w if "round_sizes" in w
        else {**w, "round_sizes": [len(w["samples_s"])] if w.get("samples_s") else []}
        for w in doc["workloads"]
    ]  # fmt: skip
    out.setdefault("rounds", {"rounds": 1, "seed": None})
    return out


V3_IN_RUN_CALIBRATION = (
    "calibrated inside the run (run.json schema 3, before device profiles): one main-memory "
    "bandwidth for every working set"
)


def migrate_v3_to_v4(doc: dict) -> dict:
    """Schema 3 -> 4: v4 divides by a device profile (`ceilings.profile`, bandwidth per memory
    level in `ceilings.memory`). A v3 run calibrated its own ceilings, with one bandwidth: its
    ceilings are kept as they are, no `memory` levels (the roofline then holds every working
    set against that one bandwidth, as v3 did), and a `profile` record that says so."""
    out = {**doc, "schema_version": 4, "migrated_from": doc.get("migrated_from", 3)}
    ceilings = doc.get("ceilings")
    if isinstance(ceilings, dict) and ceilings and "profile" not in ceilings:
        out["ceilings"] = {
            **ceilings,
            "profile": {"hash": None, "source": "in-run", "reason": V3_IN_RUN_CALIBRATION},
        }
    return out


def migrate_v4_to_v5(doc: dict) -> dict:
    """Schema 4 -> 5: every run before it was one process: `distributed` is null."""
    out = {**doc, "schema_version": 5, "migrated_from": doc.get("migrated_from", 4)}
    out.setdefault("distributed", None)
    return out


V5_NO_OVERHEAD = (
    "recorded with run.json schema {version}, before overhead was measured: overhead and "
    "inefficiency are not told apart"
)


def migrate_v5_to_v6(doc: dict) -> dict:
    """Schema 5 -> 6: no workload's overhead was measured: each gets `overhead` not measured,
    with that reason, so the analysis never reinterprets the unexplained time as overhead."""
    out = {**doc, "schema_version": 6, "migrated_from": doc.get("migrated_from", 5)}
    absent = {"available": False, "method": "not-measured",
              "reason": V5_NO_OVERHEAD.format(version=out["migrated_from"])}  # fmt: skip
    out["workloads"] = [w if "overhead" in w else {**w, "overhead": dict(absent)}
                        for w in doc["workloads"]]  # fmt: skip
    return out


# schema_version -> the function that lifts a document of that version one step
MIGRATIONS = {1: migrate_v1_to_v2, 2: migrate_v2_to_v3, 3: migrate_v3_to_v4, 4: migrate_v4_to_v5,
              5: migrate_v5_to_v6}  # fmt: skip
