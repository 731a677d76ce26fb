"""A device's run-to-run figure: the file kept per fingerprint, and what a run bundle records.

Torch-free. How far a workload's median moves between two separate runs beyond what their
rounds show belongs to the device (Kalibera & Jones 2013: estimated once per platform), so
`reviewkit calibrate --run-to-run` keeps it beside the device profile, in
`profiles/<kind>-<fingerprint>-run-to-run.json` under the cache. The file holds each pooled
run's per-workload observations (log median and within-run variance), not only the figure, so
runs recorded later pool into it and the estimate improves as they accumulate
(analysis/run_to_run.py computes it). A run records the figure its device had when it ran
(`record`), and a comparison reads it from the bundles alone.
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

KIND = "reviewkit.run-to-run"
VERSION = 1
# A log-scale standard deviation of 5 is a factor of 150 between two runs: past any device,
# so a larger one is a damaged file rather than a figure.
MAX_SD = 5.0
# What a run bundle says when its device has no usable figure (a comparison then takes the
# rubric's default).
NONE_MEASURED = "none measured for this device"
CACHED_FIGURE = "the cached run-to-run figure"
REMEDY = (
    "measure it again with `reviewkit calibrate --run-to-run --fresh` (the file is rewritten), "
    "or delete the file"
)


class RunToRunError(InputError):
    """A run-to-run file that cannot be used: corrupt, of another version or another device."""


def cache_path(device_kind: str, fingerprint_hash: str) -> Path:
    return cache_dir() / "profiles" / f"{device_kind}-{fingerprint_hash}-run-to-run.json"


def build(
    *,
    device: str,
    device_name: str,
    fingerprint: dict,
    suite_hash: str,
    torch_version: str,
    updated_unix_s: float,
    estimate: dict,
    method: str,
    observations: list[dict],
) -> dict:
    """The file's document. `estimate`: sd, runs, workloads, workload_ids, per_workload_sd and
    left_out, as analysis.run_to_run.estimate gives them (`Estimate.to_json`)."""
    doc = {
        "kind": KIND,
        "version": VERSION,
        "device": device,
        "device_name": device_name,
        "fingerprint": {"hash": fingerprint.get("hash"), "label": fingerprint.get("label")},
        "suite_hash": suite_hash,
        "torch_version": torch_version,
        "updated_unix_s": round(updated_unix_s, 3),
        "method": method,
        **estimate,
        "observations": observations,
    }
    doc["hash"] = content_hash(doc)
    return doc


def _need(cond: bool, path: Path, key: str, expected: str) -> None:
    if not cond:
        raise RunToRunError(f"{path}: `{key}` {expected}; {REMEDY}")


def _count(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _sd(value: object) -> bool:
    return finite_number(value) and 0 <= value <= MAX_SD


def _observation(obs: object, path: Path, where: str) -> None:
    _need(isinstance(obs, dict), path, where, "must be a table (one pooled run)")
    assert isinstance(obs, dict)
    for key in ("run", "setting", "source"):
        _need(isinstance(obs.get(key), str) and bool(obs[key]), path, f"{where}.{key}",
              "must be a non-empty string")  # fmt: skip
    created = obs.get("created_unix_s")
    _need(created is None or (finite_number(created) and created >= 0), path,
          f"{where}.created_unix_s", "must be a Unix time in seconds or null")  # fmt: skip
    points = obs.get("points")
    _need(isinstance(points, dict), path, f"{where}.points",
          "must map each workload id to [log median, within-run variance]")  # fmt: skip
    assert isinstance(points, dict)
    for wid, pair in points.items():
        ok = (isinstance(pair, list) and len(pair) == 2 and all(finite_number(x) for x in pair)
              and pair[1] >= 0)  # fmt: skip
        _need(ok, path, f"{where}.points.{wid}",
              "must be [log median, within-run variance]: two finite numbers, the second 0 or "
              "more")  # fmt: skip


def validate(doc: object, path: Path) -> dict:
    """The document, or a RunToRunError naming the file, the key, what was expected and what
    to do."""
    _need(isinstance(doc, dict), path, "(top level)", "must be a JSON object")
    assert isinstance(doc, dict)
    _need(doc.get("kind") == KIND, path, "kind", f"must be {KIND!r}")
    _need(doc.get("version") == VERSION, path, "version",
          f"must be {VERSION} (the run-to-run file version this reviewkit reads)")  # fmt: skip
    fp = doc.get("fingerprint")
    _need(isinstance(fp, dict) and isinstance(fp.get("hash"), str) and bool(fp["hash"]), path,
          "fingerprint.hash", "must be a non-empty string")  # fmt: skip
    for key in ("device", "suite_hash", "method"):
        _need(isinstance(doc.get(key), str) and bool(doc[key]), path, key,
              "must be a non-empty string")  # fmt: skip
    _need(_sd(doc.get("sd")), path, "sd",
          f"must be a log-scale standard deviation from 0 to {MAX_SD:g}")  # fmt: skip
    _need(_count(doc.get("runs"), 2), path, "runs",
          "must be a whole number of runs, 2 or more (one run shows no run-to-run "
          "variation)")  # fmt: skip
    _need(_count(doc.get("workloads"), 1), path, "workloads",
          "must be a whole number of workloads, 1 or more")  # fmt: skip
    ids = doc.get("workload_ids")
    _need(isinstance(ids, list) and len(ids) == doc["workloads"]
          and all(isinstance(i, str) for i in ids), path, "workload_ids",
          f"must list the {doc['workloads']} workload ids the figure pools")  # fmt: skip
    per = doc.get("per_workload_sd")
    _need(isinstance(per, dict) and all(_sd(v) for v in per.values()), path, "per_workload_sd",
          f"must map workload ids to standard deviations from 0 to {MAX_SD:g}")  # fmt: skip
    updated = doc.get("updated_unix_s")
    _need(finite_number(updated) and updated >= 0, path, "updated_unix_s",
          "must be a Unix time in seconds")  # fmt: skip
    observations = doc.get("observations")
    _need(isinstance(observations, list) and len(observations) >= 2, path, "observations",
          "must list the pooled runs, 2 or more")  # fmt: skip
    assert isinstance(observations, list)
    for i, obs in enumerate(observations):
        _observation(obs, path, f"observations[{i}]")
    _need(doc.get("hash") == content_hash(doc), path, "hash",
          "must match the file's content (it was edited or damaged after it was "
          "written)")  # fmt: skip
    return doc


def load(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunToRunError(
            f"{path}: no run-to-run figure here; measure one with `reviewkit calibrate "
            "--run-to-run`"
        ) from None
    except OSError as exc:
        raise RunToRunError(f"{path}: cannot read the run-to-run figure ({exc.strerror})") from None
    try:
        doc = schema.parse(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise RunToRunError(f"{path}: not valid JSON ({exc}); {REMEDY}") from None
    return validate(doc, path)


def save(doc: dict, path: Path) -> Path:
    try:
        write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    except OSError as exc:
        raise RunToRunError(
            f"{path}: cannot write the run-to-run figure ({exc.strerror}); set {CACHE_ENV} to a "
            "writable folder"
        ) from None
    return path


def refusal(doc: dict, path: Path, fingerprint_hash: str) -> str:
    """Why this file cannot be this device's figure ("" when it can)."""
    theirs = doc["fingerprint"]["hash"]
    if theirs != fingerprint_hash:
        return (
            f"{path}: measured on another device (fingerprint {theirs}), but this is "
            f"fingerprint {fingerprint_hash}; measure here with `reviewkit calibrate "
            "--run-to-run`"
        )
    return ""


def record(device_kind: str, fingerprint: dict | None) -> dict:
    """What a run bundle records as `run_to_run`: its device's figure when the run starts, with
    where it came from, or that none is usable and why (said without the cache's path, which
    is the user's folder; the bundle travels to reviewers). Never raises: a damaged file costs
    the comparison the rubric's default, never the run."""
    fp_hash = (fingerprint or {}).get("hash") or device_kind
    path = cache_path(device_kind, fp_hash)
    how = "`reviewkit calibrate --run-to-run` measures it"
    if not path.exists():
        return {"available": False, "reason": f"{NONE_MEASURED} (fingerprint {fp_hash}): {how}"}
    try:
        doc = load(path)
        why = refusal(doc, path, fp_hash)
    except RunToRunError as exc:
        why = str(exc)
    if why:
        return {"available": False,
                "reason": f"{NONE_MEASURED}: {why.replace(str(path), CACHED_FIGURE)}"}  # fmt: skip
    return {
        "available": True,
        "sd": doc["sd"],
        "runs": doc["runs"],
        "workloads": doc["workloads"],
        "updated_unix_s": doc["updated_unix_s"],
        "fingerprint": fp_hash,
        "torch_version": doc.get("torch_version"),
        "method": doc["method"],
        "hash": doc["hash"],
    }
