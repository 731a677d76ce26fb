"""`calibrate --run-to-run`: short separate runs of a fixed subset, pooled into the device's figure.

The figure is how far a workload's median moves between separate processes beyond what their
rounds show, so it is measured the only way it can be: `reviewkit run` started afresh N times
(each its own process: allocator, page layout, thread placement, clocks drawn anew), on a fixed
subset of five workloads of five layer types, compute- and memory-bound, at the quick profile
(five rounds each, the comparison's statistic) in fp32, the runs spread over about two minutes:
a machine state can outlast a run (on the 2-core VM four consecutive A/A runs, about 40 s, were
20-28% faster on the GEMMs and SDPAs, 35% slower on the residual add, than the runs around
them), and runs back to back sample one state. Runs already recorded on this device
(`--from`) pool into the same file, so the figure improves as runs spread over hours and days
accumulate.
"""

from __future__ import annotations

import os
import resource
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
# Eight runs, one started every 15 s at the soonest: two minutes on the 2-core VM (a run of
# the subset takes about 5 s there), long enough to meet more than one machine state. Four runs
# back to back there took 20 s and read 1.8% while the A/A runs of the same hour read 8.2%
# (docs/benchmarks.md). A state moves every workload of a run at once, so the workloads are not
# independent evidence: the figure rests on about runs - 1 degrees of freedom.
DEFAULT_RUNS = 8
DEFAULT_EVERY_S = 15.0
# Other processes keeping more than this share of the CPUs busy while the runs measure make
# the figure theirs: on the 2-core VM a neighbour stretched every parallel call to the
# scheduler's tick (a 0.1 ms layernorm read 7.4 ms), so the runs agreed at the tick and read 0.
NEIGHBOUR_SHARE = 0.10
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


def busy_cpu_s(stat: Path = Path("/proc/stat")) -> float | None:
    """CPU seconds the whole machine has spent busy (user, nice, system, irq, softirq; not
    idle, iowait or steal), or None where /proc/stat is not there."""
    try:
        ticks = [int(x) for x in stat.read_text().splitlines()[0].split()[1:8]]
    except (OSError, ValueError, IndexError):
        return None
    return (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """CPU seconds of this process and its finished children."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def neighbour_share(busy_s: float, own_s: float, wall_s: float, cpus: int) -> float:
    """The share of the machine's CPU time that other processes used over `wall_s`."""
    if wall_s <= 0 or cpus < 1:
        return 0.0
    return min(1.0, max(0.0, busy_s - own_s) / (wall_s * cpus))


def measure_runs(
    device: str,
    runs: int,
    folder: Path,
    on_progress: Callable[[str, int, int], None],
    every_s: float = DEFAULT_EVERY_S,
) -> tuple[list[Path], float | None]:
    """`runs` separate `reviewkit run` processes of the subset, one started every `every_s`
    at the soonest (right after the last when it took longer): their bundle folders, and the
    share of the CPUs other processes used meanwhile (None where it cannot be read; the waits
    count, as a neighbour then moves the next run). A run that fails stops the whole (nothing
    stored), naming its error."""
    out = []
    started, busy, own = time.time(), busy_cpu_s(), own_cpu_s()
    for i in range(runs):
        wait = started + i * every_s - time.time()
        if wait > 0:
            on_progress(f"run-to-run: run {i + 1} of {runs} in {wait:.0f} s", i, runs)
            time.sleep(wait)
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
    now = busy_cpu_s()
    if busy is None or now is None:
        return out, None
    return out, neighbour_share(now - busy, own_cpu_s() - own, time.time() - started,
                                os.cpu_count() or 1)  # fmt: skip


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
        run = load_run(folder)
        why = estimator.refusal(run, str(folder), fp_hash, suite_hash)
        if why:
            raise InputError(f"{why}; nothing was stored")
        run_id = sha256_file(Path(folder))[:16]
        obs, left = estimator.observation(run, run_id, source)
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
    every_s: float = DEFAULT_EVERY_S,
) -> Pooled:
    """Measure `runs` separate runs here, one every `every_s` at the soonest (none: pool
    `recorded` only), pool them with the recorded ones into this device's file."""
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="reviewkit-run-to-run-") as scratch:
        measured, share = measure_runs(device, runs, Path(scratch), on_progress,
                                       every_s) if runs else ([], None)  # fmt: skip
        bundles = [(p, MEASURED) for p in measured] + [(p, RECORDED) for p in recorded]
        doc, path, added, repeated, left_out, notes = pool(
            device_kind, fingerprint, device_name, torch_version, bundles, fresh
        )
    if share is not None and share > NEIGHBOUR_SHARE:
        notes.append(
            f"other processes kept {share:.0%} of the CPUs busy while the runs measured: the "
            "figure includes them (a busy neighbour can stretch parallel calls to the "
            "scheduler's tick, where runs agree and read about 0); measure again on an idle "
            "machine (--fresh)"
        )
    commands = [" ".join(["reviewkit", *run_command(device, Path("RUN"))[3:]])] if runs else []
    return Pooled(doc, path, runs, added, repeated, tuple(left_out), tuple(notes),
                  tuple(commands), time.time() - started)  # fmt: skip


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


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
    created = [o["created_unix_s"] for o in d["observations"] if o.get("created_unix_s")]
    if len(created) > 1:
        lines.append(f"the pooled runs span {_span(max(created) - min(created))}: a state of the "
                     "machine that outlasts that is not in the figure; runs recorded later pool "
                     "in with --from")  # fmt: skip
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
