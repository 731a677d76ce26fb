"""The platform shortlist: a model's memory fit, service time, energy and risk on each platform."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from reviewkit.analysis.causal_work import causal_seqs
from reviewkit.analysis.efficiency_fit import EfficiencyPoint, variant_of
from reviewkit.analysis.hardware import FAR_BELOW_FP32
from reviewkit.analysis.project import (
    MEASURED,
    Projected,
    TargetDevice,
    TargetWorkload,
    project_one,
)
from reviewkit.analysis.shortlist_sizing import (
    RISK_KEYS,
    MemoryFit,
    ShortlistPolicy,
    memory_fit,
    tp_communication_s,
)
from reviewkit.suite.model_targets import (
    DECODE,
    OMITTED,
    PREFILL,
    DecoderConfig,
    phase_workloads,
)
from reviewkit.suite.platform_table import Platform

KIND = "reviewkit.shortlist"
VERSION = 1
SHORTLISTED = "shortlisted"
MISSES_SLA = "misses the SLA"
BELOW_THROUGHPUT = "below the throughput floor"
DOES_NOT_FIT = "does not fit"
NOT_AVAILABLE = "not available"
OVER_POWER = "over the power budget"
# Statuses in the order the ranking lists them: the shortlist, then the near misses (priced,
# but short of the SLA or the throughput floor), then those that cannot be priced or used.
STATUS_ORDER = (SHORTLISTED, MISSES_SLA, BELOW_THROUGHPUT, OVER_POWER, DOES_NOT_FIT, NOT_AVAILABLE)
# 128 output tokens: a short chat answer, and the output length of vLLM's and TensorRT-LLM's
# throughput benchmarks' common 128/128 case; pass --output-tokens for your traffic.
DEFAULT_OUTPUT_TOKENS = 128
SERVICE_TIME_NOTE = (
    "one request's service time with no queueing (prefill of the whole batch, then the output "
    "tokens one decode step each, the KV cache priced at --context throughout), not a p99 under "
    "load: the `reviewkit sweep` command listed for each platform measures that"
)
# The torch device `reviewkit run --device` drives each kind of platform on, by (vendor, kind):
# a ROCm build of torch names an AMD GPU `cuda`. None: reviewkit cannot run there, and why.
BACKENDS: dict[tuple[str, str], tuple[str | None, str]] = {
    ("NVIDIA", "gpu"): ("cuda", ""),
    ("AMD", "gpu"): ("cuda", ""),
    ("Intel", "accelerator"): (None, "Gaudi runs torch through its hpu bridge, which "
                               "`reviewkit run --device` (cpu | cuda | mps | xpu) cannot select"),
    ("Google", "tpu"): (None, "a TPU runs torch only through torch_xla, which `reviewkit run "
                        "--device` (cpu | cuda | mps | xpu) cannot select"),
}  # fmt: skip


def backend_of(platform: Platform) -> tuple[str | None, str]:
    if platform.device == "cpu":
        return "cpu", ""
    return BACKENDS.get((platform.vendor, platform.device),
                        (None, f"no reviewkit backend is known for {platform.vendor} "
                         f"{platform.device}s"))  # fmt: skip


@dataclass(frozen=True)
class Request:
    """What the shortlist is asked: the model, its shape, its dtype and the targets."""

    model: DecoderConfig
    batch: int
    context: int
    dtype: str
    output_tokens: int
    sla_p99_s: float
    min_throughput_per_s: float | None = None  # decode tokens/s of one replica (tp devices)
    power_w: float | None = None  # the budget per device (board power)


@dataclass(frozen=True)
class RiskItem:
    key: str  # one of RISK_KEYS
    weight: float  # the rubric's
    reason: str


@dataclass(frozen=True)
class Span:
    """A time or energy and its 80% interval (None: not available)."""

    value: float | None = None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Candidate:
    """One platform for the request: each number, its reason, and its place in the ranking."""

    key: str
    name: str
    vendor: str
    status: str  # one of STATUS_ORDER
    reason: str  # why this status, in words
    memory: MemoryFit
    tp: int | None = None
    efficiency: str = ""  # MEASURED, or "borrowed from <devices>"
    prefill_s: Span = field(default_factory=Span)  # compute and communication, whole batch
    decode_step_s: Span = field(default_factory=Span)
    communication_prefill_s: float | None = None  # the tensor-parallel all-reduces in it
    communication_decode_step_s: float | None = None
    latency_s: Span = field(default_factory=Span)  # prefill + output tokens x decode step
    decode_tokens_per_s: float | None = None  # batch / decode step, one replica of tp devices
    power_w: float | None = None  # per device, as priced
    power_note: str = ""
    energy_j_per_output_token: Span = field(default_factory=Span)
    risk_items: tuple[RiskItem, ...] = ()
    rank: int = 0
    rank_reason: str = ""
    commands: tuple[str, ...] = ()
    commands_note: str = ""
    backend: str | None = None  # the torch device `reviewkit run --device` drives it on
    backend_note: str = ""  # why there is none

    @property
    def risk(self) -> float:
        return sum(item.weight for item in self.risk_items)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["memory"] = self.memory.to_json()
        out["risk"] = self.risk
        out["risk_items"] = [asdict(i) for i in self.risk_items]
        out["commands"] = list(self.commands)
        return out


def _targets(req: Request, tp: int) -> list[TargetWorkload]:
    return [TargetWorkload(w.spec.id, w.spec.layer_type, w.spec.dtype, w.spec.flops,
                           w.spec.bytes, variant_of(w.spec.kernel, w.spec.params), w.count,
                           w.phase, causal_seqs(w.spec.kernel, w.spec.params))
            for w in phase_workloads(req.model, req.batch, req.context, req.dtype, tp)]  # fmt: skip


def _summed(rows: Sequence[Projected], phase: str, extra_s: float) -> Span:
    ok = [r for r in rows if r.phase == phase]
    return Span(*(sum(getattr(r, a) * r.count for r in ok) + extra_s
                  for a in ("projected_s", "low_s", "high_s")))  # fmt: skip


def _power(platform: Platform, budget_w: float | None) -> tuple[float | None, str, bool]:
    """Board power per device as priced, why, and whether it is over the budget outright.
    Power stays at TDP under a budget that allows it; a budget below TDP caps it there."""
    tdp = platform.figures.get("tdp_w")
    if tdp is None:
        why = platform.missing.get("tdp_w", "not in the table")
        return None, f"no TDP in the platform table ({why}): energy not available", False
    tdp_w = float(tdp.value)  # type: ignore[arg-type]
    if budget_w is None or tdp_w <= budget_w:
        return tdp_w, f"TDP {tdp_w:.0f} W (an upper bound on board power)", False
    span = platform.figures.get("power_range_w")
    if span is not None and float(span.value[0]) > budget_w:  # type: ignore[index]
        return None, (f"its lowest configurable board power, {float(span.value[0]):.0f} W "
                      f"(TDP {tdp_w:.0f} W), is above --power-w {budget_w:g} W"), True  # fmt: skip
    return budget_w, f"capped at --power-w {budget_w:g} W under its TDP of {tdp_w:.0f} W", False


def _missing(platform: Platform, tp_needed: bool) -> list[str]:
    keys = ["memory_capacity_bytes", "tdp_w"]
    if tp_needed:
        keys += ["scale_up_domain", "scale_up_link"]
    return [f"{k} ({platform.missing.get(k, 'not in the table')})" for k in keys
            if k not in platform.figures]  # fmt: skip


def assess(
    req: Request,
    platform: Platform,
    device: TargetDevice,
    points: Sequence[EfficiencyPoint],
    noise_sd: float,
    policy: ShortlistPolicy,
) -> Candidate:
    """One platform for the request, before ranking. The dtype is priced at its own dense peak
    or not at all: a platform without one is `not available` for it."""
    w = policy.risk_weights
    fit = memory_fit(req.model, req.batch, req.context, req.dtype, platform,
                     policy.memory_headroom_fraction)  # fmt: skip
    backend, why_none = backend_of(platform)
    base = {"key": platform.key, "name": platform.name, "vendor": platform.vendor, "memory": fit,
            "backend": backend, "backend_note": why_none}  # fmt: skip
    risks: list[RiskItem] = []
    if backend is None:
        risks.append(RiskItem("no_backend", w["no_backend"], why_none))
    missing = _missing(platform, tp_needed=fit.tp != 1)
    if missing:
        risks.append(RiskItem("figures_missing", w["figures_missing"],
                              "not in the platform table: " + "; ".join(missing)))  # fmt: skip
    peak = device.peak_flops_per_s.get(req.dtype)
    if not peak:
        why = platform.missing.get(f"peak_dense_flops_per_s.{req.dtype}", "not in the table")
        return Candidate(**base, status=NOT_AVAILABLE, reason=(
            f"not available for {req.dtype}: the platform table has no {req.dtype} dense peak "
            f"({why}); another dtype's peak is never used in its place"),
            risk_items=tuple(risks))  # fmt: skip
    fp32 = device.peak_flops_per_s.get("fp32")
    if req.dtype != "fp32" and fp32 and peak < FAR_BELOW_FP32 * fp32:
        risks.append(RiskItem("dtype_emulated", w["dtype_emulated"], (
            f"{req.dtype} dense peak {peak / fp32:.2g}x fp32's: emulated, or not reached by "
            "the kernels")))  # fmt: skip
    power_w, power_note, over = _power(platform, req.power_w)
    tdp = platform.figures.get("tdp_w")
    capped = tdp is not None and req.power_w is not None and float(tdp.value) > req.power_w
    if capped and not over and "power_range_w" not in platform.figures:
        risks.append(RiskItem("power_cap_unverified", w["power_cap_unverified"], (
            f"{power_note}; the table prints no configurable range to say the board runs "
            "there")))  # fmt: skip
    if over:
        return Candidate(**base, status=OVER_POWER, reason=power_note, power_note=power_note,
                         risk_items=tuple(risks))  # fmt: skip
    if not fit.fits:
        return Candidate(**base, status=DOES_NOT_FIT, reason=fit.reason, risk_items=tuple(risks))
    tp = fit.tp or 1
    link = platform.figures.get("scale_up_link")
    if tp > 1 and link is None:
        why = platform.missing.get("scale_up_link", "not in the table")
        return Candidate(**base, tp=tp, status=NOT_AVAILABLE, reason=(
            f"TP {tp} needs the scale-up link's bandwidth to price its all-reduces; the table "
            f"has none ({why})"), risk_items=tuple(risks))  # fmt: skip
    rows = [project_one(t, device, points, noise_sd) for t in _targets(req, tp)]
    unpriced = [r for r in rows if r.projected_s is None]
    if unpriced:
        reasons = sorted({r.reason for r in unpriced})
        return Candidate(**base, tp=tp, status=NOT_AVAILABLE, reason=(
            f"{len(unpriced)} workload(s) not projected: {'; '.join(reasons)}"),
            risk_items=tuple(risks))  # fmt: skip
    labels = sorted({r.label for r in rows})
    borrowed = sorted({d for r in rows if r.label != MEASURED
                       for d in r.label.removeprefix("borrowed from ").split(", ")})  # fmt: skip
    efficiency = MEASURED if labels == [MEASURED] else "borrowed from " + ", ".join(borrowed)
    if efficiency != MEASURED:
        risks.append(
            RiskItem(
                "never_measured",
                w["never_measured"],
                (f"no --runs run measured {platform.name}: its efficiency is {efficiency}"),
            )
        )
    unmeasured = sorted({r.unmeasured for r in rows if r.unmeasured})
    if unmeasured:
        risks.append(RiskItem("kernels_unmeasured", w["kernels_unmeasured"],
                              "; ".join(unmeasured)))  # fmt: skip
    pooled = sorted({r.reason for r in rows if r.reason})
    if pooled:
        risks.append(RiskItem("fit_pooled_dtypes", w["fit_pooled_dtypes"], "; ".join(pooled)))
    comm = {phase: tp_communication_s(req.model, req.batch, req.context if phase == PREFILL
                                      else 1, req.dtype, tp, link) if tp > 1 else 0.0
            for phase in (PREFILL, DECODE)}  # type: ignore[arg-type]  # fmt: skip
    prefill = _summed(rows, PREFILL, comm[PREFILL])
    step = _summed(rows, DECODE, comm[DECODE])
    n = req.output_tokens
    latency = Span(prefill.value + n * step.value, prefill.low + n * step.low,
                   prefill.high + n * step.high)  # type: ignore[operator]  # fmt: skip
    if latency.high > policy.wide_interval_factor * latency.low:  # type: ignore[operator]
        risks.append(RiskItem("wide_interval", w["wide_interval"], (
            f"the latency's 80% interval spans {latency.high / latency.low:.1f}x, over the "
            f"rubric's {policy.wide_interval_factor:g}x")))  # type: ignore[operator]  # fmt: skip
    tokens = req.batch * n

    def energy(seconds: float) -> float | None:
        return None if power_w is None else power_w * tp * seconds / tokens

    throughput = req.batch / step.value  # type: ignore[operator]
    status, reason = SHORTLISTED, ""
    if latency.value > req.sla_p99_s:  # type: ignore[operator]
        status, reason = MISSES_SLA, (f"misses the SLA: {latency.value:.3g} s > "
                                      f"{req.sla_p99_s:g} s")  # fmt: skip
    elif req.min_throughput_per_s is not None and throughput < req.min_throughput_per_s:
        status, reason = BELOW_THROUGHPUT, (
            f"{throughput:.4g} decode tokens/s < --min-throughput-per-s "
            f"{req.min_throughput_per_s:g}")  # fmt: skip
    return Candidate(
        **base, status=status, reason=reason or f"meets the SLA: {latency.value:.3g} s <= "
        f"{req.sla_p99_s:g} s", tp=tp, efficiency=efficiency, prefill_s=prefill,
        decode_step_s=step, communication_prefill_s=comm[PREFILL],
        communication_decode_step_s=comm[DECODE], latency_s=latency,
        decode_tokens_per_s=throughput, power_w=power_w, power_note=power_note,
        energy_j_per_output_token=Span(energy(latency.value), energy(latency.low),
                                       energy(latency.high)),  # type: ignore[arg-type]
        risk_items=tuple(sorted(risks, key=lambda i: RISK_KEYS.index(i.key))),
    )  # fmt: skip


def _order(c: Candidate) -> tuple:
    """Shortlisted: least energy per output token first (none last), then least risk, then
    shortest latency; near misses by latency; the rest by risk."""
    group = STATUS_ORDER.index(c.status)
    e = c.energy_j_per_output_token.value
    lat = c.latency_s.value if c.latency_s.value is not None else float("inf")
    if c.status == SHORTLISTED:
        return (group, e is None, e or 0.0, c.risk, lat, c.key)
    return (group, lat, c.risk, c.key)


def _why_after(c: Candidate, prev: Candidate) -> str:
    e, pe = c.energy_j_per_output_token.value, prev.energy_j_per_output_token.value
    if e is None and pe is not None:
        return f"no energy figure ({c.power_note}), so after {prev.key}, which has one"
    if e is not None and pe is not None and e > pe:
        return f"more energy per output token than {prev.key} ({e:.3g} J vs {pe:.3g} J)"
    same = "no energy figure either" if e is None else f"as much energy as {prev.key}"
    if c.risk > prev.risk:
        return f"{same}, and more risk than {prev.key} ({c.risk:g} vs {prev.risk:g})"
    return f"{same} and as much risk as {prev.key}; a longer latency"


def rank(candidates: Sequence[Candidate], req: Request) -> list[Candidate]:
    """The candidates in ranking order, each with its rank, the reason for it in words, and for a
    shortlisted one the commands that benchmark it under production-like load."""
    out: list[Candidate] = []
    for i, c in enumerate(sorted(candidates, key=_order), 1):
        if c.status == SHORTLISTED:
            prev = out[-1] if out and out[-1].status == SHORTLISTED else None
            e = c.energy_j_per_output_token.value
            lead = f"{c.reason} at TP {c.tp}, risk {c.risk:g}"
            why = (
                _why_after(c, prev)
                if prev
                else "the least energy per output token of those that meet it"
                + (f" ({e:.3g} J)" if e is not None else f" (none has one: {c.power_note})")
            )
            commands, note = commands_for(c, req)
            out.append(replace(c, rank=i, rank_reason=f"{lead}; {why}", commands=commands,
                               commands_note=note))  # fmt: skip
        else:
            said = c.reason if c.reason.startswith(c.status) else f"{c.status}: {c.reason}"
            low = c.latency_s.low
            if c.status == MISSES_SLA and low is not None and low <= req.sla_p99_s:
                # the projection cannot rule it out: a benchmark settles it
                commands, note = commands_for(c, req)
                said += (f"; its 80% interval reaches {low:.3g} s, within the SLA: only a "
                         "benchmark can settle it")  # fmt: skip
                out.append(replace(c, rank=i, rank_reason=said, commands=commands,
                                   commands_note=note))  # fmt: skip
                continue
            out.append(replace(c, rank=i, rank_reason=said))
    return out


def commands_for(c: Candidate, req: Request) -> tuple[tuple[str, ...], str]:
    """The commands that benchmark a shortlisted platform: the serving profile at the dtype,
    the scale-up link's collectives at the degree it needs, and a latency-throughput sweep with
    the SLA (queueing included), each writing under runs/."""
    if c.backend is None:
        return (), f"not measurable with reviewkit: {c.backend_note}"
    run = f"reviewkit run --device {c.backend} --profile serving --dtype {req.dtype}"
    cmds = [f"{run} --out runs/{c.key}-serving"]
    if (c.tp or 1) > 1:
        cmds.append(f"{run} --distributed --nproc {c.tp} --out runs/{c.key}-tp{c.tp}")
    cmds.append(f"reviewkit sweep --device {c.backend} --profile full --dtype {req.dtype} "
                f"--sla-p99-s {req.sla_p99_s:g} --out runs/{c.key}-sweep.json")  # fmt: skip
    link = (f"the distributed run measures the scale-up link's collectives at TP {c.tp}; "
            if (c.tp or 1) > 1 else "")  # fmt: skip
    return tuple(cmds), (
        "on the platform: the serving run makes its efficiency measured (pass it to --runs "
        f"again); {link}the sweep measures p99 under Poisson load (queueing included) on the "
        "suite's primary model cell, not on this model"
    )


def no_fit_summary(candidates: Sequence[Candidate]) -> str:
    """What a model that fits no platform's memory needs, per device, at the largest degree."""
    tried = [c for c in candidates if c.memory.capacity_bytes is not None]
    if not tried or any(c.memory.fits for c in tried):
        return ""
    least = min(tried, key=lambda c: c.memory.per_device_bytes / (c.memory.usable_bytes or 1))
    return f"the model fits no platform's memory: the closest, {least.key}, {least.memory.reason}"


def shortlist(
    req: Request,
    targets: Sequence[tuple[Platform, TargetDevice]],
    points: Sequence[EfficiencyPoint],
    noise_sd: float,
    policy: ShortlistPolicy,
    sources: Sequence[Mapping[str, Any]] = (),
) -> Shortlist:
    """Every platform assessed and ranked."""
    found = [assess(req, p, d, points, noise_sd, policy) for p, d in targets]
    return Shortlist(req, policy, tuple(sources), noise_sd, tuple(rank(found, req)))


@dataclass(frozen=True)
class Shortlist:
    request: Request
    policy: ShortlistPolicy
    sources: tuple[Mapping[str, Any], ...]
    noise_sd: float
    candidates: tuple[Candidate, ...]  # in ranking order

    @property
    def shortlisted(self) -> list[Candidate]:
        return [c for c in self.candidates if c.status == SHORTLISTED]

    def summary(self) -> list[str]:
        """The headline in words: what was shortlisted, or why nothing was."""
        lines = []
        if self.shortlisted:
            lines.append(
                f"{len(self.shortlisted)} of {len(self.candidates)} platform(s) "
                "shortlisted: " + ", ".join(c.key for c in self.shortlisted)
            )
        else:
            lines.append(f"no platform of the {len(self.candidates)} assessed is shortlisted")
            lines.append(no_fit_summary(self.candidates))
        lines.append(f"latency is {SERVICE_TIME_NOTE}")
        return [line for line in lines if line]

    def to_json(self) -> dict[str, Any]:
        r, cfg = self.request, self.request.model
        return {
            "kind": KIND, "schema_version": VERSION,
            "request": {
                "model": cfg.name, "config": {
                    "hidden_size": cfg.hidden, "num_attention_heads": cfg.heads,
                    "num_key_value_heads": cfg.kv_heads, "intermediate_size": cfg.ffn,
                    "num_hidden_layers": cfg.layers, "vocab_size": cfg.vocab,
                    "num_local_experts": cfg.experts, "num_experts_per_tok": cfg.top_k},
                "parameters": cfg.parameters(), "batch": r.batch, "context": r.context,
                "dtype": r.dtype, "output_tokens": r.output_tokens, "sla_p99_s": r.sla_p99_s,
                "min_throughput_per_s": r.min_throughput_per_s, "power_w": r.power_w},
            "from": [dict(s) for s in self.sources],
            "policy": self.policy.to_json(),
            "method": {
                "latency": SERVICE_TIME_NOTE,
                "memory": "weights (parameters x dtype bytes, divided evenly by tp) + one "
                "rank's KV cache (2 x layers x batch x context x KV heads a rank x head_dim x "
                "bytes) within capacity x (1 - memory_headroom_fraction); tp the smallest power "
                "of two up to the scale-up domain that fits",
                "projection": "each rank's own workloads at the tp shapes (heads, FFN and the LM "
                "head's vocabulary divided by tp; norms, residual adds and the embedding whole), "
                "projected onto the platform by `reviewkit project`'s fit, with its 80% interval",
                "communication": "two ring all-reduces a layer of batch x tokens x hidden x "
                "bytes, 2 (tp - 1) / tp of it over the scale-up link one way (a bidirectional "
                "figure halved); the bandwidth term only (the table has no link latency): a "
                "lower bound",
                "throughput": "decode tokens/s of one replica (tp devices): batch / decode step",
                "energy": "board power (TDP, or --power-w under it) x tp x latency / (batch x "
                "output tokens): TDP is an upper bound on what the board draws",
                "ranking": "shortlisted (fits, meets the SLA and the throughput floor, within "
                "the power budget) by least energy per output token, then least risk, then "
                "shortest latency; then the near misses by latency; then the rest",
                "run_to_run_sd": self.noise_sd, "interval": "80%",
                "not_modelled": "queueing, the KV cache's growth over the output tokens, "
                "per-message link latency, pipeline and expert parallelism, " + OMITTED,
            },
            "summary": self.summary(),
            "shortlist": [c.key for c in self.shortlisted],
            "candidates": [c.to_json() for c in self.candidates],
        }  # fmt: skip
