"""The run bundle as frozen records: what `load_run` returns and `write_run` writes.

JSON is read and written here only. Every other stage reads a run through these attributes;
the documents nested in a run whose keys are open by nature (a workload's shape `params`, the
environment fingerprint, the knob settings, the ceilings, the distributed setup) are read-only
mappings whose keys docs/bundle.md lists.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

# Keys a bundle written by an earlier reviewkit may hold that the analysis derives: they are
# dropped on reading (the analysis recomputes them from the samples) and never trusted.
ANALYSED_RUN_KEYS = frozenset(
    {"layer_types", "layer_types_by_dtype", "layer_energy", "layer_energy_by_dtype"}
)
ANALYSED_WORKLOAD_KEYS = frozenset({
    "stats", "mfu", "bandwidth_util", "achieved_flops_per_s", "arithmetic_intensity",
    "compute_time_s", "memory_time_s", "fractions", "bottleneck", "memory_level",
    "decomposition", "overhead_method", "lever", "fusion_headroom_fraction", "flags", "skew",
    "collective", "device_timing",
})  # fmt: skip
ANALYSED_DISTRIBUTED_KEYS = frozenset({"stragglers", "scaling"})
# A field whose JSON key is not its name (the suite profile is `profile` on disk).
JSON_KEY = "json_key"


def _json_key(f) -> str:
    return f.metadata.get(JSON_KEY, f.name)


def _to_json_value(value: object) -> object:
    if isinstance(value, tuple):
        return [_to_json_value(v) for v in value]
    return value


class _Record:
    """What the run's records share: built from a JSON table keeping its keys' order and any
    key this release does not know (so writing a bundle back loses nothing), and written back
    in that order."""

    key_order: tuple[str, ...]
    extra: Mapping[str, Any]

    @classmethod
    def _fields_by_key(cls) -> dict[str, Any]:
        return {_json_key(f): f for f in fields(cls) if f.name not in ("key_order", "extra")}

    @classmethod
    def _kwargs(cls, doc: Mapping[str, Any], skip: frozenset[str]) -> dict[str, Any]:
        known = cls._fields_by_key()
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        order = []
        for key, value in doc.items():
            if key in skip:
                continue
            order.append(key)
            if key in known:
                kwargs[known[key].name] = tuple(value) if isinstance(value, list) and known[
                    key].metadata.get("sequence") else value
            else:
                extra[key] = value
        kwargs["key_order"] = tuple(order)
        kwargs["extra"] = extra
        return kwargs

    def _json_items(self) -> Iterator[tuple[str, object]]:
        known = self._fields_by_key()
        for key in self.key_order:
            if key in known:
                yield key, _to_json_value(getattr(self, known[key].name))
            else:
                yield key, self.extra[key]


def _seq() -> dict:
    """Field metadata: a JSON list held as a tuple."""
    return {"sequence": True}


@dataclass(frozen=True)
class Workload(_Record):
    """One workload of a run as measured: its definition, status and samples (seconds)."""

    id: str
    layer_type: str
    dtype: str
    status: str
    samples_s: tuple[float, ...] = field(default=(), metadata=_seq())
    kernel: str = ""
    source_model: str = ""
    reason: str = ""
    reproduce: str | None = None
    definition_hash: str | None = None
    stopped_by: str | None = None
    inputs: tuple[Mapping[str, Any], ...] = field(default=(), metadata=_seq())
    params: Mapping[str, Any] = field(default_factory=dict)
    flops: float = 0.0
    matmul_flops: float | None = None
    bytes: float = 0.0
    wire_bytes: float | None = None
    warmup_samples_s: tuple[float, ...] = field(default=(), metadata=_seq())
    rank_samples_s: tuple[tuple[float, ...], ...] | None = field(default=None, metadata=_seq())
    round_sizes: tuple[int, ...] | None = field(default=None, metadata=_seq())
    round_wall_s: float | None = None
    energy: Mapping[str, Any] | None = None  # the metered reading, or why not (`available`)
    overhead: Mapping[str, Any] | None = None  # the measured exposed overhead, or why not
    op_profile: Mapping[str, Any] | None = None  # the ops one call dispatches
    # t_device: the call timed N launches to a window, or why not (measure/device_time.py).
    device_time: Mapping[str, Any] | None = None
    # The run's knobs that do not change how this workload runs, each with why (bundle/knobs.py).
    knobs_not_applicable: Mapping[str, str] | None = None
    # Under a compile_mode: what compiling it cost, apart from its samples (measure/compiled.py).
    compile: Mapping[str, Any] | None = None
    # Under a sparsity or quantization knob that maps its weights: how they were stored and
    # multiplied (measure/weights.py; docs/bundle.md lists the keys).
    weights: Mapping[str, Any] | None = None
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def compute_dtype(self) -> str:
        """The dtype its GEMMs multiply in, whose ceiling its MFU divides by: a quantization's
        (int8, fp8) where one mapped its weights, else its own dtype."""
        return str((self.weights or {}).get("compute_dtype") or self.dtype)

    @property
    def density(self) -> float | None:
        """The nonzero share of its mapped weights as stored (None: not sparse)."""
        return (self.weights or {}).get("density")

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Workload:
        kwargs = cls._kwargs(doc, ANALYSED_WORKLOAD_KEYS)
        if kwargs.get("rank_samples_s") is not None:
            kwargs["rank_samples_s"] = tuple(tuple(s) for s in kwargs["rank_samples_s"])
        return cls(**kwargs)

    def to_json(self) -> dict[str, Any]:
        return dict(self._json_items())


@dataclass(frozen=True)
class Run(_Record):
    """A run bundle as measured: the suite, the environment and knobs it ran under, the device's
    ceilings and its workloads. `suite_profile` is the suite profile (smoke, quick, full)."""

    suite: Mapping[str, Any]
    environment: Mapping[str, Any]
    knobs: Mapping[str, Any]
    ceilings: Mapping[str, Any]
    workloads: tuple[Workload, ...]
    schema_version: int | None = None
    migrated_from: int | None = None  # the schema_version it was written with, when older
    kind: str | None = None
    tool: Mapping[str, Any] | None = None
    created_unix_s: float | None = None
    complete: bool | None = None  # false after Ctrl-C; None in a bundle that does not say
    interrupted: str | None = None
    suite_profile: str | None = field(default=None, metadata={JSON_KEY: "profile"})
    only: str | None = None
    command: str | None = None
    wall_s: float | None = None
    energy_meter: Mapping[str, Any] | None = None
    sampling: Mapping[str, Any] | None = None
    rounds: Mapping[str, Any] | None = None
    run_to_run: Mapping[str, Any] | None = None
    pairing: Mapping[str, Any] | None = None  # `ab` only: which side, design, rounds, seed
    distributed: Mapping[str, Any] | None = None  # world size, backend, hosts, ranks; None: one
    overhead_probe: Mapping[str, Any] | None = None
    phases_s: Mapping[str, Any] | None = None
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Run:
        """The record of a run document (a validated, migrated bundle, or the runner's own)."""
        kwargs = cls._kwargs(doc, ANALYSED_RUN_KEYS)
        kwargs["workloads"] = tuple(Workload.from_json(w) for w in doc["workloads"])
        d = kwargs.get("distributed")
        if isinstance(d, Mapping) and ANALYSED_DISTRIBUTED_KEYS & set(d):
            kwargs["distributed"] = {k: v for k, v in d.items()
                                     if k not in ANALYSED_DISTRIBUTED_KEYS}  # fmt: skip
        return cls(**kwargs)

    def to_json(self) -> dict[str, Any]:
        out = dict(self._json_items())
        if "workloads" in out:
            out["workloads"] = [w.to_json() for w in self.workloads]
        return out

    def with_values(self, **changes: Any) -> Run:
        """A copy with `changes` (field names); a field the document lacked is added at its end."""
        order = list(self.key_order)
        for name in changes:
            key = next(_json_key(f) for f in fields(self) if f.name == name)
            if key not in order:
                order.append(key)
        return replace(self, key_order=tuple(order), **changes)

    # --- what the run says of itself ----------------------------------------------------------

    @cached_property
    def workload_by_id(self) -> dict[str, Workload]:
        return {w.id: w for w in self.workloads}

    @property
    def world_size(self) -> int:
        """Ranks the run was measured on (1: one process)."""
        return (self.distributed or {}).get("world_size") or 1

    @property
    def device_type(self) -> str | None:
        """cpu, cuda, mps, ... as the environment recorded it."""
        return self.environment.get("device_type")

    @property
    def suite_version(self) -> str | None:
        return self.suite.get("version")

    @property
    def fingerprint(self) -> Mapping[str, Any]:
        """The device fingerprint the environment recorded ({} before fingerprints)."""
        return self.environment.get("fingerprint") or {}

    @property
    def device_label(self) -> str:
        """The run's device as recorded: the GPU's name, the CPU's model, else the device knob."""
        knobs, env = self.knobs or {}, self.environment or {}
        for value in (knobs.get("device_name"), env.get("device_name"), env.get("cpu_model"),
                      knobs.get("device")):  # fmt: skip
            if isinstance(value, str) and value.strip():
                return " ".join(value.split())
        return "unknown device"


__all__ = ["ANALYSED_RUN_KEYS", "ANALYSED_WORKLOAD_KEYS", "Run", "Workload"]
