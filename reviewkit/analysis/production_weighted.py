"""A change's effect on production: each layer type's measured ratio weighted by production's time.

The suite's verdict weighs workloads as the suite has them; production spends its time
elsewhere (a GPU job idles on its host, a CPU server spends its time in small memory-bound
ops). With a production trace cited, each part of production's time is carried at the ratio
the comparison measured for it:
- a layer type's busy time at the layer type's measured ratio (summed medians, candidate over
  baseline), where the comparison measured that layer type;
- the device's idle time while its host works (host overhead) at the measured floor-call
  ratio: the candidate's summed per-call overhead t_o over the baseline's, over the workloads
  both measured it on;
- everything else at ratio 1, its share said: layer types the suite did not measure, unmapped
  ops, and idle time while the host idles too (data loading, waiting on another rank), which no
  kernel mapping moves.
The combined ratio's interval comes from the same hierarchical bootstrap draws as each layer
type's (runs and rounds resampled, never workloads one by one: a run's workloads err together),
with the run-to-run allowance of two separate runs added whole.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from reviewkit.analysis.analysed import AnalysedRun
from reviewkit.analysis.pairing import interval_of
from reviewkit.analysis.stats import three_way_verdict

HOST_OVERHEAD = "host overhead (device idle while the host works)"
OTHER_IDLE = "device idle while the host idles too"
UNMAPPED = "ops the layer map does not map"


@dataclass(frozen=True)
class ProductionMix:
    """Where production's time goes, as shares of it (they add up to 1)."""

    basis: str  # "device": a GPU trace's window; "host": a CPU trace's operator time
    time_s: float
    layers: Mapping[str, float]  # layer type -> share
    unmapped: float
    host_overhead: float  # device basis only (0 on a host basis)
    other_idle: float
    traces: tuple[str, ...]


def _num(x: object) -> float:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) and x > 0 else 0.0


def mix_of(traces: Iterable[Mapping]) -> ProductionMix | None:
    """Production's time split by layer type, unmapped ops and device idle, summed over the
    traces of one summary's `traces` (all of one basis); None without any time."""
    traces = list(traces)
    bases = {t.get("time_basis") for t in traces}
    if not traces or len(bases) != 1:
        return None
    basis = bases.pop()
    parts: dict[str, float] = {}
    unmapped = overhead = other_idle = total = 0.0

    def add(layer: str, s: float) -> None:
        parts[layer] = parts.get(layer, 0.0) + s

    for t in traces:
        mix = t.get("op_mix") or {}
        layers = mix.get("layer_types") or {}
        if basis == "device":
            device = t.get("device") or {}
            window = _num(device.get("window_s"))
            idle_share = min(1.0, _num(device.get("idle_share")))
            busy = window * (1 - idle_share)
            host_share = min(idle_share, _num(device.get("host_overhead_share")))
            for layer, v in layers.items():
                add(layer, busy * _num((v or {}).get("share")))
            unmapped += busy * _num((mix.get("unmapped") or {}).get("share"))
            overhead += window * host_share
            other_idle += window * (idle_share - host_share)
            total += window
        else:
            for layer, v in layers.items():
                add(layer, _num((v or {}).get("time_s")))
            unmapped += _num((mix.get("unmapped") or {}).get("time_s"))
            total += _num(mix.get("time_s"))
    if total <= 0:
        return None
    return ProductionMix(basis, total, {k: v / total for k, v in parts.items()}, unmapped / total,
                         overhead / total, other_idle / total,
                         tuple(str(t.get("path")) for t in traces))  # fmt: skip


@dataclass(frozen=True)
class Part:
    """One part of production's time: its share, the ratio it is carried at, and why."""

    name: str
    share: float
    ratio: float
    how: str


@dataclass(frozen=True)
class ProductionVerdict:
    """The change's effect on production's time: the weighted ratio, its 95% interval and
    verdict against the margin, each part, and how much was carried at 1."""

    ratio: float
    ci: tuple[float, float]
    verdict: str
    margin: float
    parts: tuple[Part, ...]
    carried_at_one: float  # the share carried at ratio 1 (not measured or not moved)
    basis: str
    traces: tuple[str, ...]

    def to_json(self) -> dict:
        return asdict(self)


def floor_call_ratio(pairs: Iterable[tuple[str, str]], base: AnalysedRun,
                     cand: AnalysedRun) -> float | None:  # fmt: skip
    """The candidate's summed measured per-call overhead over the baseline's, over the
    workloads (baseline id, candidate id) both measured it on; None where none did."""
    b_by, c_by = base.workload_by_id, cand.workload_by_id
    b_sum = c_sum = 0.0
    for b_id, c_id in pairs:
        b, c = b_by.get(b_id), c_by.get(c_id)
        bo = b.decomposition.overhead_time_s if b and b.decomposition else None
        co = c.decomposition.overhead_time_s if c and c.decomposition else None
        if bo is not None and co is not None and bo > 0:
            b_sum, c_sum = b_sum + bo, c_sum + co
    return c_sum / b_sum if b_sum > 0 else None


def production_verdict(
    layer_draws: Mapping[str, Sequence[tuple]],
    layer_ratios: Mapping[str, float],
    mix: ProductionMix,
    overhead_ratio: float | None,
    margin: float,
    run_to_run_variance: float = 0.0,
) -> ProductionVerdict | None:
    """The production-weighted ratio from a comparison's per-layer draws (compare's
    `layer_draws`: per workload its baseline and candidate draws, medians, rounds, pairing) and
    point ratios; None when the comparison measured none of production's layer types."""
    measured = [lt for lt in mix.layers if lt in layer_draws and lt in layer_ratios]
    if not measured:
        return None
    parts, draws, rounds, in_pairs = [], [], [], True
    point = 0.0  # the measured layer types' part
    fixed = 0.0  # the parts carried at a point ratio: the floor-call ratio, or 1
    for lt in measured:
        items = layer_draws[lt]
        base = np.sum([it[0] for it in items], axis=0)
        cand = np.sum([it[1] for it in items], axis=0)
        share = mix.layers[lt]
        draws.append(share * cand / base)
        point += share * layer_ratios[lt]
        rounds.append((min(it[4][0] for it in items), min(it[4][1] for it in items)))
        in_pairs = in_pairs and all(it[5] for it in items)
        parts.append(Part(lt, share, layer_ratios[lt], f"measured: {len(items)} workload(s)"))
    at_one = sum(v for lt, v in mix.layers.items() if lt not in measured)
    for lt, v in sorted(mix.layers.items(), key=lambda kv: -kv[1]):
        if lt not in measured and v > 0:
            parts.append(Part(lt, v, 1.0, "not measured by the comparison: carried at 1"))
    if mix.host_overhead > 0:
        if overhead_ratio is None:
            at_one += mix.host_overhead
            parts.append(Part(HOST_OVERHEAD, mix.host_overhead, 1.0,
                              "no floor call measured on both sides: carried at 1"))  # fmt: skip
        else:
            fixed += mix.host_overhead * overhead_ratio
            parts.append(Part(HOST_OVERHEAD, mix.host_overhead, overhead_ratio,
                              "the measured floor-call ratio"))  # fmt: skip
    for name, v in ((UNMAPPED, mix.unmapped), (OTHER_IDLE, mix.other_idle)):
        if v > 0:
            at_one += v
            parts.append(Part(name, v, 1.0, "no mapping of the change moves it: carried at 1"))
    fixed += at_one
    point += fixed
    size = min(len(d) for d in draws)
    combined = np.sum([d[:size] for d in draws], axis=0) + fixed
    r = (min(a for a, _ in rounds), min(b for _, b in rounds))
    ci = interval_of(point, np.ones(size), combined, r, in_pairs, run_to_run_variance).ci
    return ProductionVerdict(point, tuple(ci), three_way_verdict(ci, margin), margin,
                             tuple(parts), at_one, mix.basis, mix.traces)  # fmt: skip
