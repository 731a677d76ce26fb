"""The shortlist's judgement: a dtype a platform has no peak for, a platform priced from its own
measured run, and the ranking with the reason for each place, on hand-built candidates."""

from __future__ import annotations

from pathlib import Path

import pytest
from runfactory import analysed, square_gemm_doc

from reviewkit.analysis import efficiency_fit as fit
from reviewkit.analysis.project import device_of_platform, run_noise_sd
from reviewkit.analysis.roofline import analyse_run
from reviewkit.analysis.shortlist import (
    DOES_NOT_FIT,
    MISSES_SLA,
    NOT_AVAILABLE,
    SHORTLISTED,
    Candidate,
    Request,
    RiskItem,
    Span,
    assess,
    rank,
)
from reviewkit.analysis.shortlist_sizing import MemoryFit, read_policy
from reviewkit.bundle.run import load_run
from reviewkit.cli.projecting import platform_devices
from reviewkit.review.rubric import DEFAULT_RUBRIC
from reviewkit.suite import platform_table
from reviewkit.suite.model_targets import BUILT_IN, DecoderConfig

SAMPLES = Path(__file__).parents[2] / "samples"
SMALL = DecoderConfig("small", hidden=64, heads=4, kv_heads=2, ffn=128, layers=2, vocab=1000)
POLICY = read_policy(DEFAULT_RUBRIC)


def test_a_dtype_without_a_peak_is_not_available_and_never_priced_at_another():
    points = fit.points_of(analysed(square_gemm_doc(0.5, 10e-6, (128, 256, 512))))
    tpu = platform_table.platform("tpu-v5e")  # Google publishes bf16 and int8 peaks only
    req = Request(SMALL, 1, 16, "fp16", 8, 1.0)
    c = assess(req, tpu, device_of_platform(tpu), points, 0.08, POLICY)
    assert c.status == NOT_AVAILABLE and c.latency_s.value is None
    assert c.reason.startswith("not available for fp16: the platform table has no fp16 dense")
    assert "another dtype's peak is never used" in c.reason
    assert c.energy_j_per_output_token.value is None and c.tp is None


def test_a_platform_measured_in_the_runs_is_priced_from_its_own_efficiency():
    runs = [(str(SAMPLES / "gpu-quick-h200"), analyse_run(load_run(SAMPLES / "gpu-quick-h200")))]
    points = [p for _, run in runs for p in fit.points_of(run)]
    (device,) = platform_devices("h200-sxm", runs)
    h200 = platform_table.platform("h200-sxm")
    req = Request(BUILT_IN["Llama-3-8B"], 2, 512, "bf16", 16, 60.0)
    c = assess(req, h200, device, points, run_noise_sd(r for _, r in runs), POLICY)
    assert c.efficiency == "measured" and c.tp == 1 and c.status == SHORTLISTED
    assert "never_measured" not in {i.key for i in c.risk_items}
    # latency = prefill + 16 decode steps (each end of the interval alike)
    assert c.latency_s.value == pytest.approx(c.prefill_s.value + 16 * c.decode_step_s.value)
    assert c.latency_s.low == pytest.approx(c.prefill_s.low + 16 * c.decode_step_s.low)
    assert c.latency_s.low <= c.latency_s.value <= c.latency_s.high
    # throughput: 2 sequences a decode step; energy: 700 W TDP x 1 device x latency / (2 x 16)
    assert c.decode_tokens_per_s == pytest.approx(2 / c.decode_step_s.value)
    assert c.power_w == 700
    assert c.energy_j_per_output_token.value == pytest.approx(700 * c.latency_s.value / 32)
    assert c.communication_decode_step_s == 0.0  # TP 1: no all-reduce


FIT = MemoryFit(1, 1, 80e9, 72e9, 8, 1, 1.0, "fits on one device")
NO_FIT = MemoryFit(1, 1, 80e9, 72e9, 8, None, 90e9, "does not fit: needs 90.0 GB a device")


def cand(key: str, status: str, energy: float | None, risk: float, latency: float | None,
         low: float | None = None, tp: int = 1) -> Candidate:  # fmt: skip
    reason = {SHORTLISTED: "meets the SLA: 1 s <= 2 s", DOES_NOT_FIT: NO_FIT.reason}.get(
        status, f"misses the SLA: {latency} s > 2 s")  # fmt: skip
    high = None if latency is None else 2 * latency
    return Candidate(key, key, "NVIDIA", status, reason, NO_FIT if status == DOES_NOT_FIT
                     else FIT, tp=tp, latency_s=Span(latency, low or latency, high),
                     energy_j_per_output_token=Span(energy, energy, energy),
                     risk_items=(RiskItem("never_measured", risk, "borrowed"),),
                     backend="cuda")  # fmt: skip


def test_the_ranking_says_why_each_platform_is_where_it_is():
    req = Request(SMALL, 4, 128, "bf16", 8, 2.0)
    ranked = rank([
        cand("a", SHORTLISTED, 2.0, 1.0, 1.0),
        cand("b", SHORTLISTED, 1.0, 2.0, 1.0),
        cand("c", SHORTLISTED, 1.0, 0.5, 1.5, tp=2),
        cand("d", MISSES_SLA, 0.5, 0.0, 3.0, low=1.5),
        cand("e", MISSES_SLA, 0.5, 0.0, 2.5, low=2.2),
        cand("f", DOES_NOT_FIT, None, 0.0, None),
    ], req)  # fmt: skip
    # shortlisted by energy (c and b at 1 J before a at 2 J), c before b on risk; then the
    # near misses by latency (e 2.5 s before d 3 s); then the one that does not fit
    assert [c.key for c in ranked] == ["c", "b", "a", "e", "d", "f"]
    assert [c.rank for c in ranked] == [1, 2, 3, 4, 5, 6]
    by = {c.key: c for c in ranked}
    assert by["c"].rank_reason == ("meets the SLA: 1 s <= 2 s at TP 2, risk 0.5; the least "
                                   "energy per output token of those that meet it (1 J)")
    assert by["b"].rank_reason.endswith("as much energy as c, and more risk than c (2 vs 0.5)")
    assert by["a"].rank_reason.endswith("more energy per output token than b (2 J vs 1 J)")
    # d's interval reaches under the SLA: benchmarking it is listed; e's does not (2.2 s > 2 s)
    assert "its 80% interval reaches 1.5 s, within the SLA" in by["d"].rank_reason
    assert by["d"].commands and not by["e"].commands
    assert by["f"].rank_reason == "does not fit: needs 90.0 GB a device" and not by["f"].commands
    # the commands: the serving run, the link at TP 2, the sweep at the SLA
    assert by["c"].commands == (
        "reviewkit run --device cuda --profile serving --dtype bf16 --out runs/c-serving",
        "reviewkit run --device cuda --profile serving --dtype bf16 --distributed --nproc 2 "
        "--out runs/c-tp2",
        "reviewkit sweep --device cuda --profile full --dtype bf16 --sla-p99-s 2 "
        "--out runs/c-sweep.json",
    )
    assert by["a"].commands and len(by["a"].commands) == 2  # TP 1: no distributed run


def test_a_power_budget_excludes_a_board_that_cannot_run_under_it_and_caps_one_that_may():
    points = fit.points_of(analysed(square_gemm_doc(0.5, 10e-6, (128, 256, 512))))
    req = Request(SMALL, 1, 16, "bf16", 8, 1.0, power_w=250.0)
    pcie = platform_table.platform("h100-pcie")  # configurable 300-350 W: not down to 250 W
    c = assess(req, pcie, device_of_platform(pcie), points, 0.08, POLICY)
    assert c.status == "over the power budget"
    assert c.reason == ("its lowest configurable board power, 300 W (TDP 350 W), is above "
                        "--power-w 250 W")
    sxm = platform_table.platform("h100-sxm")  # "up to 700W (configurable)", no range printed
    c = assess(req, sxm, device_of_platform(sxm), points, 0.08, POLICY)
    assert c.status != "over the power budget"
    (item,) = [i for i in c.risk_items if i.key == "power_cap_unverified"]
    assert item.weight == 0.25 and "capped at --power-w 250 W under its TDP of 700 W" in item.reason
    # a budget at or over TDP caps nothing and is no risk
    roomy = Request(SMALL, 1, 16, "bf16", 8, 1.0, power_w=700.0)
    c = assess(roomy, sxm, device_of_platform(sxm), points, 0.08, POLICY)
    assert "power_cap_unverified" not in {i.key for i in c.risk_items}


def test_a_kernel_the_runs_never_measured_is_a_risk_item_of_its_own():
    # Llama-3-8B on the EPYC, priced from its own quick runs. Suite 1.3's quick measured only
    # compute-bound GEMMs and full-sequence sdpa: the decode step's memory-bound GEMVs and its
    # GQA attention (sdpa_gqa, and sdpa_gqa+causal in prefill) are kernels no point shares, one
    # risk item weighing the default rubric's 0.5, its reason naming each. Suite 1.4's quick
    # measures a decode step: only the causal GQA prefill kernel is left unmeasured.
    req = Request(BUILT_IN["Llama-3-8B"], 1, 512, "bf16", 16, 60.0)
    platform = platform_table.platform("cpu-epyc-zen4-2core-vm")

    def unmeasured(sample: str) -> RiskItem:
        runs = [(sample, analyse_run(load_run(SAMPLES / sample)))]
        points = [p for _, run in runs for p in fit.points_of(run)]
        (device,) = platform_devices("cpu-epyc-zen4-2core-vm", runs)
        c = assess(req, platform, device, points, run_noise_sd(r for _, r in runs), POLICY)
        assert c.efficiency == "measured"
        (item,) = [i for i in c.risk_items if i.key == "kernels_unmeasured"]
        return item

    old = unmeasured("cpu-quick-fit-epyc-2core")
    assert old.weight == POLICY.risk_weights["kernels_unmeasured"] == 0.5
    assert "no memory-bound gemm was measured" in old.reason
    assert "its kernel (sdpa_gqa) was never measured" in old.reason
    assert "its kernel (sdpa_gqa+causal) was never measured" in old.reason
    new = unmeasured("cpu-quick-decode-fit-epyc-2core")
    assert "its kernel (sdpa_gqa+causal) was never measured" in new.reason
    assert "memory-bound gemm" not in new.reason and "(sdpa_gqa)" not in new.reason
