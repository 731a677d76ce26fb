"""What two runs differ in besides their timings: the knob diff, read as a reviewer reads it (a
device change is one knob with the settings it implies), and the environment differences that
confound a comparison (framework and kernel-library versions, driver, interpreter, commit)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from reviewkit.bundle import knobs as knob_registry

if TYPE_CHECKING:
    from reviewkit.bundle.records import Run

# Knobs that follow from others rather than being mapping choices of their own.
DERIVED_KNOBS = ("device_name",)
DEVICE_KNOB = "device"
DEVICE_NAME_KNOB = "device_name"
# Knobs a run records that are not in the registry of settings (bundle/knobs.py): the dtypes a
# run measured (the registry's `dtype` is one side's setting), what follows the device, and the
# fixed shape sweeps and grad mode.
RECORDED_ONLY = (
    "device_name", "dtypes", "grad_mode", "seq_sweep", "batch_sweep",
    "cuda_matmul_allow_tf32", "cudnn_allow_tf32", "cudnn_benchmark",
)  # fmt: skip
# Every knob reviewkit's runner records (measure/runner.py `knobs`; a test holds the two
# together): the registry's and the recorded-only ones. A rubric naming another is refused,
# since a misspelt knob would silently imply nothing.
KNOWN_KNOBS = tuple(name for name in knob_registry.KNOBS if name != "dtype") + RECORDED_ONLY

# What an environment difference means for "one knob at a time".
KERNELS = "kernel source"  # the measured kernels come from it: the result is not the knob's alone
RUNTIME = "runtime"  # around the kernels (driver, interpreter): it can move timings
PROVENANCE = "provenance"  # which code measured: a reviewer must be able to rebuild it
FOLLOWS_DEVICE = "follows the device"  # serves one side's device only: part of a device change


@dataclass(frozen=True)
class KnobChange:
    knob: str
    baseline: object
    candidate: object


def knob_diff(base: Mapping[str, Any], cand: Mapping[str, Any]) -> list[KnobChange]:
    """The knobs whose settings differ (two runs' `knobs`), the baseline's order first."""
    keys = list(base) + [k for k in cand if k not in base]
    return [KnobChange(k, base.get(k), cand.get(k)) for k in keys if base.get(k) != cand.get(k)]


def device_type(device: object) -> str:
    """The kind of device, whatever its index: "cuda:0" -> "cuda"."""
    return str(device).split(":", 1)[0] if device else ""


@dataclass(frozen=True)
class KnobPolicy:
    """How the knob diff is read, from the rubric's single-knob-change params: `ignore`, knobs
    that are never mapping choices (the shape sweeps); `implied_by_device`, knobs torch sets per
    machine, which follow any device change (threads); `device_defaults`, torch's defaults of
    backend settings that one device type has and the other lacks (CUDA's TF32 switches): at
    that value they follow a change of device type, at any other they are a choice of their own.
    A one-sided setting the table does not list follows the device type, as before the table."""

    ignore: tuple[str, ...] = ()
    implied_by_device: tuple[str, ...] = ()
    device_defaults: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ImpliedKnob:
    knob: str
    baseline: object
    candidate: object
    why: str


@dataclass(frozen=True)
class KnobReading:
    """The knob diff as a reviewer reads it: `counted`, the changes someone chose (the device
    change among them); `implied`, those that came with the device change; `device`, that
    change (the `device` knob, else `device_name` for a move between two machines of one type)."""

    counted: tuple[KnobChange, ...]
    implied: tuple[ImpliedKnob, ...] = ()
    device: KnobChange | None = None

    def to_json(self) -> dict:
        return {
            "counted": [asdict(k) for k in self.counted],
            "implied": [asdict(k) for k in self.implied],
            "device": asdict(self.device) if self.device else None,
        }


def read_knobs(changes: tuple[KnobChange, ...], policy: KnobPolicy) -> KnobReading:
    """Split a knob diff into the changes a reviewer counts and those the device change implies.
    A move between two machines of one device type (two CPUs of different names) is a device
    change too: its thread counts follow the machine as much as a move to a GPU's do."""
    by_knob = {k.knob: k for k in changes}
    moved = by_knob.get(DEVICE_KNOB)
    named = by_knob.get(DEVICE_NAME_KNOB)
    device = moved or named
    new_type = moved is not None and device_type(moved.baseline) != device_type(moved.candidate)
    # A device index alone (cuda:0 -> cuda:1, one model) moves no machine: nothing follows it.
    new_machine = new_type or named is not None
    counted: list[KnobChange] = []
    implied: list[ImpliedKnob] = []
    for k in changes:
        if k.knob in policy.ignore or (k.knob in DERIVED_KNOBS and k is not device):
            continue
        why = _implied_why(k, policy, new_machine, new_type) if k is not device else None
        if why is None:
            counted.append(k)
        else:
            implied.append(ImpliedKnob(k.knob, k.baseline, k.candidate, why))
    return KnobReading(tuple(counted), tuple(implied), device)


def _implied_why(
    k: KnobChange, policy: KnobPolicy, new_machine: bool, new_type: bool
) -> str | None:
    """Why a change follows from the device change, or None when it is a choice of its own."""
    if new_machine and k.knob in policy.implied_by_device:
        return "torch sets it per machine (the rubric's implied_by_device)"
    if not new_type or (k.baseline is not None and k.candidate is not None):
        return None
    value = k.baseline if k.candidate is None else k.candidate
    if k.knob not in policy.device_defaults:
        return "a setting of one device type only, which the other does not have"
    if value == policy.device_defaults[k.knob] and type(value) is type(
        policy.device_defaults[k.knob]
    ):
        return f"a setting of one device type only, at torch's default ({shown_value(value)})"
    return None  # set away from its default: someone chose it


@dataclass(frozen=True)
class EnvironmentChange:
    """One difference of the recorded environments: what differs, both values as recorded, its
    kind (KERNELS, RUNTIME, PROVENANCE or FOLLOWS_DEVICE) and why it matters to a reviewer."""

    name: str
    baseline: object
    candidate: object
    kind: str
    why: str

    def to_json(self) -> dict:
        return asdict(self)


ALL_DEVICES = None
# (environment key, name, the device types whose kernels it serves, kind, why it matters).
# Versions are compared only where both runs serve kernels from it and both record it.
ENVIRONMENT_FIELDS = (
    ("torch_version", "torch", ALL_DEVICES, KERNELS,
     "the framework release picks the kernels, fusions and dispatch of every workload"),
    ("cuda", "CUDA runtime", ("cuda",), KERNELS, "cuBLAS and the CUDA kernels ship with it"),
    ("cudnn", "cuDNN", ("cuda",), KERNELS, "convolution and attention kernels on the GPU"),
    ("hip", "HIP (ROCm)", ("cuda",), KERNELS, "rocBLAS and the ROCm kernels ship with it"),
    ("onednn", "oneDNN", ("cpu",), KERNELS, "GEMM, convolution and bf16 kernels on the CPU"),
    ("mkl", "MKL", ("cpu",), KERNELS, "BLAS kernels on the CPU"),
    ("blas", "BLAS", ("cpu",), KERNELS, "the BLAS library behind CPU GEMMs"),
    ("driver", "GPU driver", ("cuda",), RUNTIME,
     "it can change clocks, launch latency and how PTX is compiled"),
    ("cpu_allocator", "CPU allocator", ("cpu",), RUNTIME,
     "whether a call faults in fresh pages: a 32 MiB output's 8192 faults cost a CPU add 7x"),
    ("python", "Python", ALL_DEVICES, RUNTIME,
     "the interpreter runs eager dispatch: overhead-bound workloads move with it"),
)  # fmt: skip
# The local build tag of a torch wheel names the device build (2.13.0+cpu, 2.13.0+cu130,
# 2.5.1+rocm6.2, 2.6.0+xpu), not the release: the CUDA and ROCm versions are compared on
# their own. Any other local tag (a source build's +git1a2b3c) names the build and is kept.
_DEVICE_BUILD_TAG = re.compile(r"\+(cpu|cu\d+|rocm[\d.]+|xpu)(\..*)?$")
DIRTY = "+dirty"


def release(version: object) -> object:
    """A framework version without its device build tag: "2.13.0+cu130" -> "2.13.0"."""
    return _DEVICE_BUILD_TAG.sub("", version) if isinstance(version, str) else version


def _device_of(run: Run) -> str:
    return device_type((run.knobs or {}).get(DEVICE_KNOB)) or str(run.device_type or "")


def environment_changes(base: Run, cand: Run) -> list[EnvironmentChange]:
    """The environment differences of two runs, in ENVIRONMENT_FIELDS order, the commit last.
    A library that serves only one side's device (cuDNN beside a CPU, oneDNN beside a GPU) is
    recorded as FOLLOWS_DEVICE: the device change brings it, whatever its version."""
    env_b, env_c = base.environment or {}, cand.environment or {}
    types = _device_of(base), _device_of(cand)
    out = []
    for key, name, serves, kind, why in ENVIRONMENT_FIELDS:
        b, c = env_b.get(key), env_c.get(key)
        used = [serves is ALL_DEVICES or t in serves for t in types]
        if all(used):
            if b is None or c is None or release(b) == release(c):
                continue  # one side records none: nothing to compare
            if key == "torch_version" and (b, c) != (release(b), release(c)):
                why = f"{why}; compared as {release(b)} vs {release(c)} (device build tags aside)"
            out.append(EnvironmentChange(name, b, c, kind, why))
        elif any(used) and b != c:
            side = types[used.index(True)] or "unknown"
            out.append(EnvironmentChange(
                name, b, c, FOLLOWS_DEVICE,
                f"serves the {side} side's kernels only",
            ))  # fmt: skip
    commit = _commit_change(env_b.get("git_commit"), env_c.get("git_commit"))
    return out + ([commit] if commit else [])


def _commit_change(base: object, cand: object) -> EnvironmentChange | None:
    """Different commits, or uncommitted changes on either side: the code that measured is
    not one recorded commit, so the comparison cannot be rebuilt from the record."""
    commits = [str(c) if c else None for c in (base, cand)]
    dirty = [c is not None and c.endswith(DIRTY) for c in commits]
    heads = [c.removesuffix(DIRTY) if c else None for c in commits]
    reasons = []
    if None not in heads and heads[0] != heads[1]:
        reasons.append("the runs were made from different commits")
    if any(dirty):
        which = "both runs" if all(dirty) else "the baseline" if dirty[0] else "the candidate"
        reasons.append(
            f"{which} ran with uncommitted changes (+dirty): that code is in no commit"
            + (", and the two working trees may differ" if all(dirty) else "")
        )
    if not reasons:
        return None
    return EnvironmentChange("git commit", base, cand, PROVENANCE, "; ".join(reasons))


# A diff row's role: what it counts as in "one knob at a time".
DEVICE_ROW, KNOB_ROW, IMPLIED_ROW = "device change", "knob", "implied by the device"
DERIVED_ROW, IGNORED_ROW, CONFOUNDER_ROW = "derived", "ignored", "confounder"


@dataclass(frozen=True)
class DiffRow:
    """One row of the knob diff as shown (terminal, packet): a knob or an environment entry,
    both values as recorded, its role (the *_ROW names) and how the review reads it."""

    what: str
    baseline: object
    candidate: object
    role: str
    reads_as: str


def diff_rows(
    changes: tuple[KnobChange, ...],
    reading: KnobReading,
    environment: tuple[EnvironmentChange, ...],
) -> list[DiffRow]:
    """Every knob change, then every environment difference, each with what it counts as."""
    implied = {k.knob: k.why for k in reading.implied}
    counted = {k.knob for k in reading.counted}
    rows = []
    for k in changes:
        if reading.device is not None and k.knob == reading.device.knob:
            role, reads = DEVICE_ROW, "the device change: one knob"
        elif k.knob in counted:
            role, reads = KNOB_ROW, "a knob"
        elif k.knob in implied:
            role, reads = IMPLIED_ROW, f"implied by the device change: {implied[k.knob]}"
        elif k.knob in DERIVED_KNOBS:
            role, reads = DERIVED_ROW, "follows the device knob"
        else:
            role, reads = IGNORED_ROW, "not a mapping choice (the rubric ignores it)"
        rows.append(DiffRow(k.knob, k.baseline, k.candidate, role, reads))
    for e in environment:
        if e.kind == FOLLOWS_DEVICE:
            role, reads = IMPLIED_ROW, f"implied by the device change: {e.why}"
        else:
            role, reads = CONFOUNDER_ROW, f"a confounder ({e.kind}): {e.why}"
        rows.append(DiffRow(f"environment: {e.name}", e.baseline, e.candidate, role, reads))
    return rows


def shown_value(value: object) -> str:
    """A recorded value for a person: a list as its items, a 40-hex commit cut to 12 characters
    (its +dirty kept), None as "none"."""
    if isinstance(value, bool):  # as TOML and JSON write it, not Python's True
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(map(shown_value, value)) or "none"
    text = str(value) if value is not None else "none"
    head = text.removesuffix(DIRTY)
    if len(head) == 40 and all(ch in "0123456789abcdef" for ch in head):
        return head[:12] + text[len(head) :]
    return text


def compile_line(run: Run) -> str | None:
    """A compiled run's cold-start cost, apart from its samples: compile time over its
    workloads, cold and warm, with graphs, breaks and fallbacks (None: not compiled)."""
    rows = [w.compile for w in run.workloads if w.compile]
    if not rows:
        return None
    cold = sum(r["cold_s"] for r in rows)
    warm = [r["warm_s"] for r in rows if r.get("warm_s") is not None]
    fell_back = sum(1 for r in rows if r["fell_back_to_eager"])
    reused = sum(1 for r in rows if r.get("reused"))
    return (
        f"compile_mode={rows[0]['mode']}: compiling {len(rows)} workloads took {cold:.3g} s "
        f"with an empty inductor cache (cold), "
        + (f"{sum(warm):.3g} s with warm caches ({len(warm)} workloads)" if warm else
           "warm not measured")
        + f"; {sum(r['graphs'] for r in rows)} graphs, "
        f"{sum(r['graph_breaks'] for r in rows)} graph breaks, {fell_back} ran eager"
        + (f", {reused} ran an entry compiled already (a cache hit)" if reused else "")
        + "; none of it is in the samples"
    )


def not_applicable_lines(run: Run) -> list[str]:
    """Per knob the run set, the workloads it does not change, with the first one's reason: a
    knob is never silently ignored."""
    by_knob: dict[str, list[tuple[str, str]]] = {}
    for w in run.workloads:
        for knob, why in (w.knobs_not_applicable or {}).items():
            by_knob.setdefault(knob, []).append((w.id, why))
    return [
        f"{knob}={shown_value(run.knobs.get(knob))} does not change {len(rows)} of "
        f"{len(run.workloads)} workloads (not applicable; {rows[0][0]}: {rows[0][1]})"
        for knob, rows in by_knob.items()
    ]
