"""The analysed run as frozen records: each workload's statistics, roofline and class, the
layer-type aggregates and a multi-rank run's skew, stragglers and scaling (docs/bundle.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from reviewkit.analysis.bottleneck import Decomposition
from reviewkit.analysis.device_time import DeviceTiming
from reviewkit.analysis.stats import SampleStats
from reviewkit.bundle.records import Run, Workload
from reviewkit.bundle.run import STATUS_OK


@dataclass(frozen=True)
class LayerAggregate:
    """Time-weighted aggregate of one layer type: every fraction is sum(fraction_i x t_i) / sum t;
    MFU = sum t_c / sum t."""

    workloads: int
    time_s: float
    mfu: float
    memory_stall_fraction: float
    overhead_fraction: float | None  # None when a workload's overhead was not measured
    compute_fraction: float
    time_share: float
    bottleneck: str
    # Workloads whose time beat the roofline: an MFU above 100% here comes from them.
    faster_than_roofline: int = 0
    communication_fraction: float = 0.0
    inefficiency_fraction: float | None = None
    unattributed_fraction: float = 0.0
    roof_share: float | None = None  # sum t_roof / sum t_k (sum t when overhead is unknown)
    below_roof: bool = False
    overhead_fraction_low: float | None = None
    lever: str = ""

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Skew:
    """Each rank's median, its ratio to the other ranks' and the slowest rank (1.0: no skew)."""

    rank_median_s: tuple[float, ...]
    rank_over_others: tuple[float, ...]
    max_over_median: float | None
    slowest_rank: int

    def to_json(self) -> dict:
        return {
            "rank_median_s": list(self.rank_median_s),
            "rank_over_others": list(self.rank_over_others),
            "max_over_median": self.max_over_median,
            "slowest_rank": self.slowest_rank,
        }


@dataclass(frozen=True)
class CollectiveBandwidth:
    """nccl-tests' algbw and busbw at the median and the p99 step, and busbw over the link."""

    op: str
    message_bytes: int
    world_size: int
    algbw_p50_bytes_per_s: float
    busbw_p50_bytes_per_s: float
    algbw_p99_bytes_per_s: float
    busbw_p99_bytes_per_s: float
    link_fraction: float | None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class FlaggedRank:
    rank: int
    host: str | None
    ratio: float


@dataclass(frozen=True)
class Stragglers:
    """Ranks whose probes take `ratio_threshold` or more of the other ranks' median."""

    ratio_threshold: float
    rank_ratio: tuple[float, ...]
    flagged: tuple[FlaggedRank, ...]
    reason: str

    def to_json(self) -> dict:
        return {"ratio_threshold": self.ratio_threshold, "rank_ratio": list(self.rank_ratio),
                "flagged": [asdict(f) for f in self.flagged], "reason": self.reason}  # fmt: skip


@dataclass(frozen=True)
class ScalingEfficiency:
    """The tensor-parallel layer at tp = N against the unsharded layer: speed-up t1 / tN and
    efficiency speed-up / N."""

    dtype: str
    tp: int
    workload: str
    reference: str
    speedup: float
    efficiency: float
    communication_fraction: float | None

    def to_json(self) -> dict:
        return asdict(self)


# The analysed keys of a workload's JSON, in the order they are written after its measured ones.
ANALYSED_ORDER = (
    "stats", "mfu", "bandwidth_util", "achieved_flops_per_s", "arithmetic_intensity",
    "compute_time_s", "memory_time_s", "fractions", "bottleneck", "memory_level", "decomposition",
    "overhead_method", "lever", "fusion_headroom_fraction", "device_timing", "flags",
)  # fmt: skip


@dataclass(frozen=True)
class AnalysedWorkload(Workload):
    """A workload with what the analysis derived from its samples and the run's ceilings. Every
    derived value is None when the workload was not measured (or, past `stats`, when its dtype
    has no ceiling: flag `no-ceiling`)."""

    stats: SampleStats | None = None
    mfu: float | None = None  # t_c / t
    bandwidth_util: float | None = None  # t_m / t
    achieved_flops_per_s: float | None = None
    arithmetic_intensity: float | None = None  # FLOP per byte
    compute_time_s: float | None = None  # t_c = F / P
    memory_time_s: float | None = None  # t_m = B / W at the level the working set fits
    bottleneck: str | None = None
    memory_level: str | None = None
    decomposition: Decomposition | None = None
    overhead_method: str | None = None
    lever: str | None = None
    fusion_headroom_fraction: float | None = None
    # t_device beside t (analysis/device_time.py); None where it was not measured.
    device_timing: DeviceTiming | None = None
    flags: tuple[str, ...] = ()
    skew: Skew | None = None  # multi-rank runs only
    collective: CollectiveBandwidth | None = None  # a multi-rank run's collectives only
    # Whether skew and collective are part of its JSON (a multi-rank run's workloads).
    multi_rank: bool = field(default=False, repr=False, compare=False)

    @property
    def measured(self) -> bool:
        """Measured normally: status ok, with samples."""
        return self.status == STATUS_OK and bool(self.samples_s)

    @property
    def p50_s(self) -> float | None:
        return self.stats.p50_s if self.stats else None

    @property
    def fractions(self) -> dict[str, float | None] | None:
        return self.decomposition.fractions() if self.decomposition else None

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        for key in ANALYSED_ORDER:
            value = getattr(self, key)
            if key in ("stats", "decomposition", "device_timing") and value is not None:
                value = value.to_json()
            out[key] = list(value) if key == "flags" else value
        if self.multi_rank:
            out["skew"] = self.skew.to_json() if self.skew else None
            out["collective"] = self.collective.to_json() if self.collective else None
        return out


@dataclass(frozen=True)
class AnalysedRun(Run):
    """A run with its workloads analysed, its ceilings as the analysis used them (a workload
    faster than a calibrated peak raises it), the layer-type aggregates (all dtypes pooled, and
    per dtype), perf per watt by layer type, and a multi-rank run's stragglers and scaling."""

    workloads: tuple[AnalysedWorkload, ...] = ()
    layer_types: Mapping[str, LayerAggregate] = field(default_factory=dict)
    layer_types_by_dtype: Mapping[str, Mapping[str, LayerAggregate]] = field(default_factory=dict)
    layer_energy: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    layer_energy_by_dtype: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(
        default_factory=dict
    )
    stragglers: Stragglers | None = None  # multi-rank runs only
    scaling: tuple[ScalingEfficiency, ...] = ()  # multi-rank runs only

    @cached_property
    def measured_workloads(self) -> tuple[AnalysedWorkload, ...]:
        """The workloads measured normally (status ok, with samples), in run order."""
        return tuple(w for w in self.workloads if w.measured)

    @cached_property
    def workload_by_id(self) -> dict[str, AnalysedWorkload]:  # type: ignore[override]
        return {w.id: w for w in self.workloads}

    def distributed_json(self) -> dict[str, Any] | None:
        """The `distributed` document as written: the setup with its stragglers and scaling."""
        if not self.distributed:
            return self.distributed
        return {
            **self.distributed,
            "stragglers": self.stragglers.to_json() if self.stragglers else None,
            "scaling": [s.to_json() for s in self.scaling],
        }

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["layer_types"] = {k: v.to_json() for k, v in self.layer_types.items()}
        out["layer_types_by_dtype"] = {
            dtype: {k: v.to_json() for k, v in table.items()}
            for dtype, table in self.layer_types_by_dtype.items()
        }
        out["layer_energy"] = dict(self.layer_energy)
        out["layer_energy_by_dtype"] = dict(self.layer_energy_by_dtype)
        if self.distributed:
            out["distributed"] = self.distributed_json()
        return out
