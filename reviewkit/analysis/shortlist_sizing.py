"""A model on a platform by the figures: policy, memory fit, tensor-parallel degree, link time."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reviewkit.common.errors import InputError
from reviewkit.common.numbers import finite_number
from reviewkit.common.tomlfile import closest, read_toml
from reviewkit.suite.definitions import ELEMENT_BYTES
from reviewkit.suite.model_targets import DecoderConfig
from reviewkit.suite.platform_table import BIDIRECTIONAL, Figure, Platform

# The risk items a rubric's [shortlist.risk_weights] must weigh, in the order they are shown.
RISK_KEYS = (
    "no_backend",
    "dtype_emulated",
    "never_measured",
    "kernels_unmeasured",
    "figures_missing",
    "fit_pooled_dtypes",
    "wide_interval",
    "power_cap_unverified",
)
POLICY_KEYS = ("memory_headroom_fraction", "wide_interval_factor", "risk_weights")
POLICY_REMEDY = ("copy the [shortlist] table of reviewkit's default rubric "
                 "(rubrics/default.toml) into yours and change its values")  # fmt: skip
# A [shortlist] headroom of half a device or more would leave the weights no room on any part.
MAX_HEADROOM_FRACTION = 0.5
GB = 1e9  # memory is shown in the vendors' GB (10^9 bytes), as the table records capacity


@dataclass(frozen=True)
class ShortlistPolicy:
    """The rubric's [shortlist] table: what the shortlist takes as policy, not physics."""

    path: str
    memory_headroom_fraction: float
    wide_interval_factor: float
    risk_weights: dict[str, float]

    def to_json(self) -> dict:
        return {"rubric": self.path, "memory_headroom_fraction": self.memory_headroom_fraction,
                "wide_interval_factor": self.wide_interval_factor,
                "risk_weights": dict(self.risk_weights)}  # fmt: skip


def _bad(path: Path, key: str, value: object, expected: str) -> InputError:
    return InputError(f"{path}: [shortlist] {key} = {value!r}: expected {expected}. Remedy: "
                      f"{POLICY_REMEDY}")  # fmt: skip


def read_policy(path: Path) -> ShortlistPolicy:
    """The [shortlist] table of the rubric at `path`; an error names the file, the key, what was
    expected and what to do."""
    table = read_toml(path).get("shortlist")
    if not isinstance(table, dict):
        raise InputError(f"{path}: no [shortlist] table; expected one with "
                         f"{', '.join(POLICY_KEYS)}. Remedy: {POLICY_REMEDY}")  # fmt: skip
    for key in table:
        if key not in POLICY_KEYS:
            raise _bad(path, key, table[key], f"one of {', '.join(POLICY_KEYS)}"
                       f"{closest(key, POLICY_KEYS)}")  # fmt: skip
    headroom = table.get("memory_headroom_fraction")
    if not (finite_number(headroom) and 0 <= headroom < MAX_HEADROOM_FRACTION):
        raise _bad(path, "memory_headroom_fraction", headroom,
                   f"a share from 0 to under {MAX_HEADROOM_FRACTION} (0.1: a tenth kept for "
                   "activations and the runtime)")  # fmt: skip
    factor = table.get("wide_interval_factor")
    if not (finite_number(factor) and factor > 1):
        raise _bad(path, "wide_interval_factor", factor, "a factor above 1 (4.0: high / low)")
    weights = table.get("risk_weights")
    if not isinstance(weights, dict) or set(weights) != set(RISK_KEYS):
        got = sorted(weights) if isinstance(weights, dict) else weights
        raise _bad(path, "risk_weights", got, f"a table weighing each of {', '.join(RISK_KEYS)}")
    for key, w in weights.items():
        if not (finite_number(w) and w >= 0):
            raise _bad(path, f"risk_weights.{key}", w, "a weight of 0 or more")
    return ShortlistPolicy(str(path), float(headroom), float(factor),
                           {k: float(weights[k]) for k in RISK_KEYS})  # fmt: skip


def dtype_bytes(dtype: str) -> int:
    return ELEMENT_BYTES[dtype]


def weights_bytes(cfg: DecoderConfig, dtype: str) -> int:
    """Every parameter at the dtype's width: Llama-3-70B in bf16, 70,553,706,496 x 2 B."""
    return cfg.parameters() * dtype_bytes(dtype)


def kv_heads_per_rank(cfg: DecoderConfig, tp: int) -> int:
    """KV heads on one rank; replicated, one a rank, once tp exceeds them (suite/serving.py)."""
    return max(1, cfg.kv_heads // tp)


def kv_cache_bytes(cfg: DecoderConfig, batch: int, context: int, dtype: str, tp: int = 1) -> int:
    """One rank's KV cache: keys and values (2) of every layer, sequence and cached token, for
    its KV heads of head_dim elements."""
    return (2 * cfg.layers * batch * context * kv_heads_per_rank(cfg, tp) * cfg.head_dim
            * dtype_bytes(dtype))  # fmt: skip


def degrees(cfg: DecoderConfig, domain: int) -> list[int]:
    """The tensor-parallel degrees tried: powers of two up to the scale-up domain that divide
    the heads and the FFN width (a rank holds whole heads)."""
    out, tp = [], 1
    while tp <= domain:
        if cfg.heads % tp == 0 and cfg.ffn % tp == 0:
            out.append(tp)
        tp *= 2
    return out


@dataclass(frozen=True)
class MemoryFit:
    """Weights and KV cache against one device's capacity, at the smallest degree that fits."""

    weights_bytes: int  # the whole model
    kv_cache_bytes: int  # the whole batch's, one copy of each KV head
    capacity_bytes: float | None  # one device's, from the table
    usable_bytes: float | None  # capacity less the rubric's headroom
    max_tp: int  # the largest degree tried (the scale-up domain's, or 1)
    tp: int | None  # the smallest degree that fits; None: none does
    per_device_bytes: float  # weights / tp + one rank's KV cache, at tp (or at max_tp)
    reason: str  # in words: what fits where, or what is needed

    @property
    def fits(self) -> bool:
        return self.tp is not None

    def to_json(self) -> dict:
        return {"weights_bytes": self.weights_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "capacity_bytes": self.capacity_bytes, "usable_bytes": self.usable_bytes,
                "max_tp": self.max_tp, "tp": self.tp, "fits": self.fits,
                "per_device_bytes": self.per_device_bytes, "reason": self.reason}  # fmt: skip


def _gb(nbytes: float) -> str:
    return f"{nbytes / GB:.1f} GB"


def domain_of(platform: Platform) -> tuple[int, str]:
    """The scale-up domain (devices one link joins) and, when the table has none, why TP stays 1."""
    fig = platform.figures.get("scale_up_domain")
    if fig is None or not isinstance(fig.value, int | float):
        why = platform.missing.get("scale_up_domain", "not in the table")
        return 1, f"no scale-up domain in the platform table ({why}): TP 1 only"
    return max(1, int(fig.value)), ""


def memory_fit(
    cfg: DecoderConfig, batch: int, context: int, dtype: str, platform: Platform, headroom: float
) -> MemoryFit:
    """The smallest power-of-two tensor-parallel degree, up to the platform's scale-up domain,
    whose per-device share (weights divided evenly by tp, and one rank's KV cache) fits the
    device's capacity less the headroom fraction."""
    weights = weights_bytes(cfg, dtype)
    kv = kv_cache_bytes(cfg, batch, context, dtype)
    domain, domain_note = domain_of(platform)
    tried = degrees(cfg, domain) or [1]

    def need(tp: int) -> float:
        return weights / tp + kv_cache_bytes(cfg, batch, context, dtype, tp)

    cap_fig = platform.figures.get("memory_capacity_bytes")
    if cap_fig is None or not isinstance(cap_fig.value, int | float):
        why = platform.missing.get("memory_capacity_bytes", "not in the table")
        return MemoryFit(weights, kv, None, None, tried[-1], None, need(tried[-1]),
                         f"no memory capacity in the platform table ({why})")  # fmt: skip
    capacity = float(cap_fig.value)
    usable = capacity * (1 - headroom)
    for tp in tried:
        if need(tp) <= usable:
            how = "on one device" if tp == 1 else f"at TP {tp}"
            return MemoryFit(weights, kv, capacity, usable, tried[-1], tp, need(tp),
                             f"fits {how}: {_gb(need(tp))} a device of {_gb(usable)} usable "
                             f"({_gb(capacity)} less {headroom:.0%} headroom)")  # fmt: skip
    top = tried[-1]
    note = f"; {domain_note}" if domain_note else ""
    return MemoryFit(weights, kv, capacity, usable, top, None, need(top),
                     f"does not fit: needs {_gb(need(top))} a device at TP {top} (weights "
                     f"{_gb(weights)} + KV cache {_gb(kv)} in all), has {_gb(usable)} usable "
                     f"({_gb(capacity)} less {headroom:.0%} headroom){note}")  # fmt: skip


def link_bytes_per_s_per_direction(link: Figure) -> float:
    """A link's bandwidth one way: a bidirectional figure (both directions summed, as NVLink
    and Infinity Fabric are printed) halved."""
    value = float(link.value)  # type: ignore[arg-type]
    return value / 2 if link.direction == BIDIRECTIONAL else value


def ring_allreduce_s(message_bytes: float, tp: int, bytes_per_s_per_direction: float) -> float:
    """A ring all-reduce's bandwidth term: each rank sends and receives 2 (tp - 1) / tp of the
    message (nccl-tests' bus-bandwidth convention, suite/collectives.py) over its link one way.
    No per-message latency: the table has none, so this is a lower bound."""
    if tp <= 1:
        return 0.0
    return 2 * (tp - 1) / tp * message_bytes / bytes_per_s_per_direction


# Megatron's tensor parallelism all-reduces a layer's activations twice: after the attention's
# row-parallel output projection and after the FFN's down projection.
ALLREDUCES_PER_LAYER = 2


def tp_communication_s(
    cfg: DecoderConfig, batch: int, tokens: int, dtype: str, tp: int, link: Figure
) -> float:
    """A pass's tensor-parallel communication: two all-reduces a layer of batch x tokens x
    hidden activations at the dtype's width, over the scale-up link."""
    message = batch * tokens * cfg.hidden * dtype_bytes(dtype)
    one = ring_allreduce_s(message, tp, link_bytes_per_s_per_direction(link))
    return ALLREDUCES_PER_LAYER * cfg.layers * one
