"""Which device profile a measurement divides by: the pinned one, the cached one, or a new one."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from reviewkit.bundle import profile as profiles
from reviewkit.measure.calibration import calibrate, default_threads
from reviewkit.measure.device import (
    current_settings,
    device_conditions,
    device_fingerprint,
    device_name,
    torch_build,
)
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import suite_profile as suite_profile_record

CACHED, CALIBRATED, PINNED = "cached", "calibrated", "pinned"
CACHED_PROFILE = "the cached device profile"


@dataclass(frozen=True)
class Obtained:
    doc: dict
    source: str  # cached | calibrated | pinned
    path: Path | None
    # Why a cached profile was passed over and re-measured ("" when it was not).
    renewed_because: str = ""

    def ceilings(self) -> dict:
        # A cached profile's path is the user's cache folder: not worth recording in a bundle
        # that travels to reviewers (the hash names the profile).
        path = self.path if self.source == PINNED else None
        doc = profiles.ceilings_of(self.doc, self.source, path)
        if self.renewed_because:
            doc["profile"]["renewed_because"] = self.renewed_because
        return doc


def new_profile(
    device: torch.device,
    dtypes: Sequence[str],
    suite_profile: str,
    on_step: Callable[[str], None] = lambda _: None,
) -> dict:
    """Calibrate this device now and return the profile document (not yet saved)."""
    fp = device_fingerprint(device) or {"hash": device.type, "label": device.type, "facts": {}}
    started = time.time()
    calibrated = calibrate(
        device, dtypes, suite_profile, fp["facts"].get("caches_bytes") or {}, on_step
    )
    return profiles.build(
        calibrated=calibrated,
        fingerprint=fp,
        torch_build={k: v for k, v in torch_build().items() if k != "config"},
        device=device.type,
        device_name=device_name(device),
        calibration=suite_profile,  # the profile's JSON key: the suite profile calibrated at
        created_unix_s=started,
        wall_s=time.time() - started,
    )


def new_profile_at(
    device: torch.device,
    dtypes: Sequence[str],
    suite_profile: str,
    threads: int | None,
    float32_matmul_precision: str,
    on_step: Callable[[str], None] = lambda _: None,
) -> dict:
    """`new_profile` at these settings (threads None: torch's default, one per core), the
    process's own restored afterwards."""
    before = torch.get_num_threads(), torch.get_float32_matmul_precision()
    torch.set_num_threads(threads or default_threads())
    torch.set_float32_matmul_precision(float32_matmul_precision)
    try:
        return new_profile(device, dtypes, suite_profile, on_step)
    finally:
        torch.set_num_threads(before[0])
        torch.set_float32_matmul_precision(before[1])


def _pinned_remedy(message: str) -> str:
    return message.replace(", or run with --recalibrate", ", or drop --device-profile")


def obtain(
    device: torch.device,
    dtypes: Sequence[str],
    suite_profile: str,
    pinned: Path | None = None,
    recalibrate: bool = False,
    on_step: Callable[[str], None] = lambda _: None,
) -> Obtained:
    """The profile a run divides by, at the settings this process holds now (the run's threads
    and float32 matmul precision: set them before calling).

    `pinned` (--device-profile) must be this device's and this torch build's, taken at these
    settings, and cover every dtype, or it is refused. Otherwise the cache is read (the most
    thorough suite profile at least `suite_profile`, at these settings), unless `recalibrate`; a
    cached profile that is corrupt, stale or another device's, taken under other GPU
    conditions, or lacks a dtype, is measured again (for every dtype it had and every dtype
    asked for) and the cache rewritten. A combination of settings never calibrated on this
    device is calibrated on first use and cached like any other. A suite profile that
    calibrates as another (serving as quick) reads and writes that one's cache."""
    suite_profile = suite_profile_record(suite_profile).calibrate_as or suite_profile
    fp = device_fingerprint(device) or {"hash": device.type, "label": device.type}
    version = torch.__version__
    settings = current_settings(device)
    conditions = device_conditions(device)
    wanted = sorted(set(dtypes), key=suite.CEILING_DTYPES.index)
    if pinned is not None:
        # --recalibrate does not apply to a pinned profile: the remedy is another file, or none.
        try:
            doc = profiles.load(pinned)
        except profiles.ProfileError as exc:
            raise profiles.ProfileError(_pinned_remedy(str(exc))) from None
        why = (profiles.refusal(doc, pinned, fp, version)
               or profiles.settings_refusal(doc, pinned, settings)
               or profiles.conditions_refusal(doc, pinned, conditions))  # fmt: skip
        if why:
            raise profiles.ProfileError(_pinned_remedy(why))
        missing = profiles.missing_dtypes(doc, wanted)
        if missing:
            raise profiles.ProfileError(
                f"{pinned}: has no {', '.join(missing)} ceiling; calibrate with "
                f"`reviewkit calibrate --dtype "
                f"{','.join(sorted({*doc['compute'], *missing}, key=suite.CEILING_DTYPES.index))} "
                f"--out {pinned}`, or drop --device-profile"
            )
        return Obtained(doc, PINNED, pinned)
    renewed = ""
    keep: list[str] = []
    if not recalibrate:
        for path in profiles.candidates(device.type, fp["hash"], suite_profile, settings):
            if not path.exists():
                continue
            # Said without the path: it is the user's cache folder, and the reason travels in
            # the bundle to reviewers.
            try:
                doc = profiles.load(path)
            except profiles.ProfileError as exc:
                renewed = str(exc).replace(str(path), CACHED_PROFILE)
                continue
            why = (profiles.refusal(doc, path, fp, version)
                   or profiles.settings_refusal(doc, path, settings)
                   or profiles.conditions_refusal(doc, path, conditions))  # fmt: skip
            if why:
                renewed = why.replace(str(path), CACHED_PROFILE)
                continue
            missing = profiles.missing_dtypes(doc, wanted)
            if missing:
                keep = list(doc["compute"])
                renewed = f"{CACHED_PROFILE}: has no {', '.join(missing)} ceiling"
                continue
            return Obtained(doc, CACHED, path)
    else:
        renewed = "--recalibrate"
    everything = sorted({*wanted, *keep}, key=suite.CEILING_DTYPES.index)
    doc = new_profile(device, everything, suite_profile, on_step)
    try:
        path = profiles.save(
            doc, profiles.cache_path(device.type, fp["hash"], suite_profile, doc["settings"])
        )
    except profiles.ProfileError as exc:
        # A cache that cannot be written costs the next run a calibration, never this run.
        on_step(f"device profile not cached: {exc}")
        return Obtained(doc, CALIBRATED, None, renewed)
    return Obtained(doc, CALIBRATED, path, renewed)
