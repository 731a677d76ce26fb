"""The record of every released suite version: what a bundle recorded with it is checked against.

A run bundle records the suite identity it was measured with (name, version, hash) and each
workload's `definition_hash`. Changing a workload changes both, so a bundle recorded before the
change no longer matches the current definitions, and a committed sample recorded on a machine
at hand only for a few minutes (a GPU) cannot simply be re-recorded. Each suite version's
definition hashes are therefore kept in `recorded/<version>.json` (committed, shipped with the
package): a bundle is checked against the version it names, and the current suite must be
recorded under its own version, so a definition change without a version bump is caught.

    python -m reviewkit.suite.history           # record the current SUITE_VERSION
    python -m reviewkit.suite.history --check   # is the current suite recorded, unchanged?
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reviewkit.common.files import write_text_atomic
from reviewkit.suite import collectives
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import ALL_PROFILE_NAMES, SUITE_PROFILE_NAMES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


class RecordedRun(Protocol):
    """What the check reads of a run bundle (bundle/records.Run; the suite sits below bundle)."""

    suite: Mapping[str, Any]
    suite_profile: str | None
    distributed: Mapping[str, Any] | None
    workloads: Sequence[Any]

    @property
    def suite_version(self) -> str | None: ...

FOLDER = Path(__file__).with_name("recorded")
SLICE_ID_PART = ".slice-"  # in every production slice workload's id: layer.slice-op.shape.dtype
COMMAND = "python -m reviewkit.suite.history"
# The world sizes whose distributed definitions are recorded (a collective's definition holds
# the world size it runs on): a distributed bundle of another size cannot be checked.
WORLD_SIZES = (1, 2, 4, 8)


def current_record() -> dict:
    """This reviewkit's suite: its identity and every definition hash, per profile (and per
    world size for the distributed part, which the suite hash does not cover)."""
    return {
        "suite": suite.suite_identity().to_json(),
        "kernel_revision": suite.KERNEL_REVISION,
        "workloads": {
            p: {s.id: s.definition_hash() for s in suite.workloads(p)} for p in ALL_PROFILE_NAMES
        },
        # the serving profile has no distributed part (collectives.distributed_specs)
        "distributed": {p: _distributed(p) for p in SUITE_PROFILE_NAMES},
    }


def _distributed(profile: str) -> dict:
    return {
        str(n): {s.id: s.definition_hash()
                 for s in collectives.distributed_specs(profile, suite.DTYPES, n)}
        for n in WORLD_SIZES
    }  # fmt: skip


def path_of(version: str, folder: Path = FOLDER) -> Path:
    return folder / f"{version}.json"


def load(version: str, folder: Path = FOLDER) -> dict | None:
    """The record of suite `version`, or None where none was committed."""
    path = path_of(version, folder)
    return json.loads(path.read_text()) if path.exists() else None


def recorded_versions(folder: Path = FOLDER) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.json"))


def _changed(old: dict, new: dict) -> list[str]:
    """The workload ids (profile-qualified) whose definition hash differs, was added or went."""
    out = []
    for profile in sorted(set(old["workloads"]) | set(new["workloads"])):
        a, b = old["workloads"].get(profile, {}), new["workloads"].get(profile, {})
        out += [f"{profile}:{i}" for i in sorted(set(a) | set(b)) if a.get(i) != b.get(i)]
    for profile in sorted(set(old["distributed"]) | set(new["distributed"])):
        a, b = old["distributed"].get(profile, {}), new["distributed"].get(profile, {})
        for n in sorted(set(a) | set(b)):
            x, y = a.get(n, {}), b.get(n, {})
            out += [f"{profile}:world{n}:{i}" for i in sorted(set(x) | set(y))
                    if x.get(i) != y.get(i)]  # fmt: skip
    return out


def check_current(folder: Path = FOLDER) -> list[str]:
    """Why the current suite is not recorded as it is (empty when it is)."""
    now = current_record()
    version = now["suite"]["version"]
    stored = load(version, folder)
    where = "reviewkit/suite/workloads.py"
    if stored is None:
        return [f"suite {version} (SUITE_VERSION in {where}) has no record in "
                f"{path_of(version, folder)}: run `{COMMAND}` and commit the file"]  # fmt: skip
    if stored == now:
        return []
    changed = _changed(stored, now)
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return [
        f"the suite's definitions differ from those recorded for suite {version} "
        f"({path_of(version, folder)}): {shown or 'the suite hash'}. Bundles recorded with "
        f"{version} hold the old definitions, so bump SUITE_VERSION in {where} and run "
        f'`{COMMAND}` (docs/architecture.md, "Changing the suite")'
    ]


def check_bundle(run: RecordedRun, folder: Path = FOLDER) -> list[str]:
    """Why a run bundle's workloads are not those of the suite version it records (empty when
    they are): its identity and each workload's definition hash against that version's record."""
    version = run.suite_version
    stored = load(str(version), folder)
    if stored is None:
        return [f"recorded with suite {version}, of which {folder} has no record "
                f"(recorded: {', '.join(recorded_versions(folder)) or 'none'})"]  # fmt: skip
    if run.suite != stored["suite"]:
        return [f"its suite identity {run.suite} is not the recorded {stored['suite']}"]
    profile = run.suite_profile
    if run.distributed:
        world = str(run.distributed["world_size"])
        hashes = stored["distributed"].get(profile, {}).get(world)
        if hashes is None:
            return [f"world size {world} is not among the recorded ones ({WORLD_SIZES})"]
    else:
        hashes = stored["workloads"].get(profile, {})
    # a production slice's workloads (`run --slice`) are its file's, which its hash vouches
    # for (suite/production_slice.py), not the suite's
    return [
        f"{w.id}: definition {w.definition_hash}, suite {version} records "
        f"{hashes.get(w.id, 'no such workload')}"
        for w in run.workloads
        if hashes.get(w.id) != w.definition_hash and SLICE_ID_PART not in w.id
    ]


def write_current(folder: Path = FOLDER, replace: bool = False) -> tuple[Path, str]:
    """Record the current suite under its version: (path, what happened). A version already
    recorded with other definitions is kept unless `replace` (bundles may have been recorded
    with it: bump the version instead)."""
    now = current_record()
    version = now["suite"]["version"]
    path = path_of(version, folder)
    stored = load(version, folder)
    if stored == now:
        return path, f"suite {version} is already recorded as it is: {path}"
    if stored is not None and not replace:
        raise SystemExit("\n".join(check_current(folder)) + "\n(or pass --replace where no "
                         f"bundle was recorded with {version} yet)")  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(now, indent=1, sort_keys=True) + "\n")
    return path, f"recorded suite {version} ({now['suite']['hash']}) in {path}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="check, write nothing")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="overwrite the current version's record (no bundle uses it yet)",
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = check_current()
        print("\n".join(problems) or f"suite {suite.SUITE_VERSION} is recorded as it is")
        return 1 if problems else 0
    print(write_current(replace=args.replace)[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
