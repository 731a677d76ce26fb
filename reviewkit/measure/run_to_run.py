"""`calibrate --run-to-run`: short separate runs of a fixed subset, pooled into the device's figure.

The figure is how far a workload's median moves between separate processes beyond what their
rounds show, so it is measured the only way it can be: `reviewkit run` started afresh N times
(each its own process: allocator, page layout, thread placement, clocks drawn anew), on a fixed
subset of five workloads of five layer types, compute- and memory-bound, at the quick profile
(five rounds each, the comparison's statistic) in fp32. Runs already recorded on this device
(`--from`) pool into the same file, so the figure improves as runs accumulate.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from reviewkit.analysis import run_to_run as estimator
from reviewkit.bundle import run_to_run as store
from reviewkit.bundle.run import load_run
from reviewkit.common.errors import InputError, ReviewkitError, UsageError
from reviewkit.common.hashing import sha256_file
from reviewkit.suite import workloads as suite

# One workload of each of five layer types, from the A/A benchmark's subset
# (benchmarks/aa_false_alarms.py): a GEMM and an SDPA (compute), a layernorm, a softmax and a
# 24 MiB residual add (memory, the noisiest on the 2-core VM). A quick run of them takes about
# 20 s on that VM, so four runs with their process starts fit in about two minutes.
SUBSET = (
    "gemm.bert-base-ffn-up.b1s128.*",
    "attention.gpt-2-small-sdpa-full.b1s512.*",
    "norm.bert-base-layernorm.512x768.*",
    "softmax.gpt-2-small-attn-softmax.1x12x512x512.*",
    "elementwise.llama-2-7b-residual-add.512x4096.*",
)
PROFILE, DTYPE = "quick", "fp32"
# Four runs of five workloads: 15 degrees of freedom for the pooled variance (about 37%
# relative standard error), in about two minutes on the 2-core VM; `--runs` buys more.
DEFAULT_RUNS = 4
MEASURED = "measured by calibrate --run-to-run"
RECORDED = "recorded run (--from)"


class RunFailed(ReviewkitError):
    """One of the separate runs did not finish: nothing is stored."""


@dataclass(frozen=True)
class Pooled:
    """What one `calibrate --run-to-run` did: the stored file, and what went into it."""

    doc: dict
    path: Path
    measured: int  # separate runs measured now
    added: int  # runs pooled now (measured and recorded)
    repeated: int  # runs passed again that were pooled before (counted once)
    left_out: tuple[str, ...]  # workloads of a run left out (one round), as "run: id"
    notes: tuple[str, ...]
    commands: tuple[str, ...]
    wall_s: float

    def to_json(self) -> dict:
        return {"path": str(self.path), "figure": self.doc, "measured": self.measured,
                "added": self.added,
                "repeated": self.repeated, "left_out": list(self.left_out),
                "notes": list(self.notes), "commands": list(self.commands),
                "wall_s": round(self.wall_s, 1)}  # fmt: skip


def run_command(device: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "reviewkit", "run", "--profile", PROFILE, "--device", device,
            "--dtype", DTYPE, "--only", ",".join(SUBSET), "--out", str(out), "--json"]  # fmt: skip


def measure_runs(
    device: str, runs: int, folder: Path, on_progress: Callable[[str, int, int], None]
) -> list[Path]:
    """`runs` separate `reviewkit run` processes of the subset, one after another; their
    bundle folders. A run that fails stops the whole (nothing stored), naming its error."""
    out = []
    for i in range(runs):
        on_progress(f"run-to-run: separate run {i + 1} of {runs}", i, runs)
        bundle = folder / f"run-{i + 1}"
        proc = subprocess.run(run_command(device, bundle), capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            raise RunFailed(
                f"separate run {i + 1} of {runs} failed (exit code {proc.returncode}): {last}; "
                "nothing was stored"
            )
        out.append(bundle)
    on_progress("run-to-run: pooling", runs, runs)
    return out


def pool(
    device_kind: str,
    fingerprint: dict,
    device_name: str,
    torch_version: str,
    bundles: Sequence[tuple[Path, str]],
    fresh: bool = False,
) -> tuple[dict, Path, int, int, list[str], list[str]]:
    """The device's file with `bundles` ((folder, source)) pooled into what it held (nothing
    with `fresh`, or when it was measured under another suite), saved atomically: (document,
    path, added, repeated, left out, notes). A bundle of another device or suite, or not a
    separate run, is refused before anything is written."""
    fp_hash = fingerprint.get("hash") or device_kind
    suite_hash = suite.suite_identity().hash
    path = store.cache_path(device_kind, fp_hash)
    kept: list[dict] = []
    notes = []
    if path.exists() and not fresh:
        stored = store.load(path)
        why = store.refusal(stored, path, fp_hash)
        if why:
            raise store.RunToRunError(f"{why}, or pass --fresh to replace it")
        if stored["suite_hash"] != suite_hash:
            notes.append(f"the stored figure pooled runs of suite {stored['suite_hash']}; this "
                         f"suite is {suite_hash}, so it starts afresh")  # fmt: skip
        else:
            kept = stored["observations"]
    new, left_out = [], []
    for folder, source in bundles:
        doc = load_run(folder)
        why = estimator.refusal(doc, str(folder), fp_hash, suite_hash)
        if why:
            raise InputError(f"{why}; nothing was stored")
        run_id = sha256_file(Path(folder))[:16]
        obs, left = estimator.observation(doc, run_id, source)
        new.append(obs)
        left_out += [f"{folder}: {wid} (one round)" for wid in left]
    observations, repeated = estimator.merge(kept, new)
    try:
        figure = estimator.estimate(observations)
    except ValueError as exc:
        raise UsageError(f"cannot estimate the run-to-run figure: {exc}; pool more runs "
                         f"(--runs N, or --from RUN_DIR ...)") from None  # fmt: skip
    doc = store.build(
        device=device_kind, device_name=device_name, fingerprint=fingerprint,
        suite_hash=suite_hash, torch_version=torch_version, updated_unix_s=time.time(),
        estimate=figure.to_json(), method=estimator.METHOD, observations=observations,
    )  # fmt: skip
    store.save(doc, path)
    return doc, path, len(new) - repeated, repeated, left_out, notes


def calibrate_run_to_run(
    device: str,
    device_kind: str,
    fingerprint: dict,
    device_name: str,
    torch_version: str,
    runs: int,
    recorded: Sequence[Path],
    fresh: bool,
    on_progress: Callable[[str, int, int], None],
) -> Pooled:
    """Measure `runs` separate runs here (none: pool `recorded` only), pool them with the
    recorded ones into this device's file."""
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="reviewkit-run-to-run-") as scratch:
        measured = measure_runs(device, runs, Path(scratch), on_progress) if runs else []
        bundles = [(p, MEASURED) for p in measured] + [(p, RECORDED) for p in recorded]
        doc, path, added, repeated, left_out, notes = pool(
            device_kind, fingerprint, device_name, torch_version, bundles, fresh
        )
    commands = [" ".join(["reviewkit", *run_command(device, Path("RUN"))[3:]])] if runs else []
    return Pooled(doc, path, runs, added, repeated, tuple(left_out), tuple(notes),
                  tuple(commands), time.time() - started)  # fmt: skip


def summary_lines(pooled: Pooled) -> list[str]:
    """What the command prints: the figure, what it rests on, where it is kept."""
    d = pooled.doc
    per = sorted(d["per_workload_sd"].values())
    spread = f"; per workload {100 * per[0]:.1f}-{100 * per[-1]:.1f}%" if per else ""
    lines = [
        f"run-to-run figure of {d['device_name']} (fingerprint {d['fingerprint']['hash']}): "
        f"{100 * d['sd']:.2f}% per run (log-scale standard deviation of a workload's median "
        "between separate runs beyond their rounds)",
        f"pooled {d['runs']} separate runs of {d['workloads']} workloads ({pooled.added} added "
        f"now" + (f", {pooled.repeated} already pooled" if pooled.repeated else "") + ")"
        + spread,
    ]
    lines += [f"measured: {c}, {pooled.measured} times in separate processes "
              f"({pooled.wall_s:.0f} s)" for c in pooled.commands]  # fmt: skip
    lines += [f"note: {n}" for n in pooled.notes]
    if pooled.left_out:
        lines.append(f"left out: {len(pooled.left_out)} workload(s) measured in one round, e.g. "
                     f"{pooled.left_out[0]}")  # fmt: skip
    lines += [
        f"method: {d['method']}",
        f"stored: {pooled.path}",
        "runs on this device record it from now on, and a comparison between separate runs "
        "carries each run's recorded figure (never below the rubric's run_to_run_sd_floor); "
        "runs recorded before keep what they recorded",
    ]
    return lines
