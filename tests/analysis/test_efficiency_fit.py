"""The efficiency fit and the projection on synthetic runs of known share of roof, worked by hand,
and the fit's interval against the committed quick run, one point left out at a time."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from runfactory import analysed, square_gemm_doc

from reviewkit.analysis import efficiency_fit as fit
from reviewkit.analysis.project import (
    MEASURED,
    NOT_AVAILABLE,
    TargetWorkload,
    device_of_run,
    project_one,
    run_noise_sd,
    target_device,
)
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import load_run

SAMPLES = Path(__file__).parents[2] / "samples"
PEAK, BANDWIDTH = 1e12, 1e11  # FLOP/s and bytes/s of the synthetic device: ridge at 10 FLOP/B
SHARE, OVERHEAD_S = 0.5, 10e-6
SIZES = (128, 256, 512, 1024, 2048)  # square fp32 GEMMs measured


def square(n: int) -> tuple[float, float]:
    """(FLOPs, bytes) of an n x n x n fp32 GEMM: 2n^3, and three n x n fp32 matrices."""
    return 2.0 * n**3, 12.0 * n**2


def gemm_run(share: float = SHARE, overhead_s: float | None = OVERHEAD_S, sizes=SIZES,
             name: str = "Test CPU", fingerprint: str = "fp-a"):  # fmt: skip
    """An analysed run whose GEMMs all take t = t_roof / share + overhead: each is
    compute-bound (intensity n / 6 >= 21 FLOP/B, over the ridge), t_roof = 2n^3 / PEAK."""
    return analysed(square_gemm_doc(share, overhead_s, sizes, name, fingerprint, PEAK,
                                    BANDWIDTH))  # fmt: skip


def target(n: int, dtype: str = "fp32") -> TargetWorkload:
    flops, nbytes = square(n)
    return TargetWorkload(f"gemm.sq{n}.{dtype}", "gemm", dtype, flops, nbytes, "linear")


def test_each_point_is_its_roof_over_its_kernel_time():
    points = fit.points_of(gemm_run())
    assert [p.workload for p in points] == [f"gemm.sq{n}.fp32" for n in SIZES]
    for p, n in zip(points, SIZES, strict=True):
        # t_roof = 2n^3 / 1e12; t - t_o = t_roof / 0.5, so s = 0.5 exactly
        assert p.roof_time_s == pytest.approx(2 * n**3 / PEAK)
        assert p.overhead_s == pytest.approx(OVERHEAD_S)
        assert p.share == pytest.approx(0.5) and p.note == ""
        assert p.arithmetic_intensity == pytest.approx(n / 6)  # 2n^3 / 12n^2


def test_a_held_out_gemm_on_twice_the_peak_is_its_roof_over_the_share_plus_overhead():
    points = fit.points_of(gemm_run())
    twice = target_device("Twice", {"fp32": 2 * PEAK}, BANDWIDTH)
    r = project_one(target(768), twice, points, noise_sd=0.0)
    # 768: F = 2 x 768^3 = 905,969,664 FLOPs; on 2e12 FLOP/s t_roof = 452.98 us (intensity 128
    # FLOP/B, over that device's ridge of 20); every neighbour's s is 0.5, so t_kernel =
    # 905.97 us, and the median measured t_o of 10 us is added: 915.97 us
    assert r.roof_s == pytest.approx(452.984832e-6)
    assert r.share == pytest.approx(0.5)
    assert r.projected_s == pytest.approx(905.969664e-6 + 10e-6)
    assert r.low_s <= r.projected_s <= r.high_s
    assert r.label == "borrowed from Test CPU" and r.overhead_label == r.label


def test_the_interval_widens_with_distance_from_the_measured_shapes():
    run = gemm_run()
    points, own = fit.points_of(run), device_of_run(run, "runs/a")
    on_point, near, far = (project_one(target(n), own, points, noise_sd=0.0)
                           for n in (512, 768, 16384))  # fmt: skip
    # 512 was measured: distance 0. 768 sits between 512 and 1024 (intensity n / 6 = 128
    # against 85.3 and 170.7 FLOP/B, t_roof 0.906 ms against 0.268 and 2.147 ms): nearest is
    # 1024, hypot(log10 1.333, log10 2.370) = hypot(0.125, 0.375) = 0.395 decade. 16384 is 8x
    # past the largest (2048): hypot(log10 8, log10 512) = hypot(0.903, 2.709) = 2.856
    assert on_point.nearest_decades == pytest.approx(0.0, abs=1e-12)
    assert near.nearest_decades == pytest.approx(0.395, abs=1e-3)
    assert far.nearest_decades == pytest.approx(2.856, abs=1e-3)
    # every neighbour shares s = 0.5 and there is no noise: all the width is distance, so each
    # farther target's relative width is strictly wider
    widths = [r.high_s / r.low_s for r in (on_point, near, far)]
    assert widths[0] < widths[1] < widths[2]
    assert widths[0] == pytest.approx(1.0)  # measured there, no noise: no width at all


def test_the_source_device_is_measured_and_another_device_borrowed():
    run = gemm_run()
    points = fit.points_of(run)
    own = project_one(target(768), device_of_run(run, "runs/a"), points, noise_sd=0.0)
    assert own.label == MEASURED and own.overhead_label == MEASURED
    # on its own device t_roof = 905.97 us, over 0.5 plus 10 us
    assert own.projected_s == pytest.approx(2 * 905.969664e-6 + 10e-6)
    other = project_one(target(768), device_of_run(gemm_run(name="Other", fingerprint="fp-b"),
                                                   "runs/b"), points, noise_sd=0.0)  # fmt: skip
    assert other.label == "borrowed from Test CPU"
    # a borrowed efficiency's interval is wider than the measured one at the same point
    assert other.high_s / other.low_s > own.high_s / own.low_s


def test_a_dtype_without_a_peak_is_not_available_never_another_dtypes():
    points = fit.points_of(gemm_run())
    fp32_only = target_device("fp32 only", {"fp32": PEAK, "bf16": None}, BANDWIDTH)
    r = project_one(target(768, "bf16"), fp32_only, points, noise_sd=0.0)
    assert r.label == NOT_AVAILABLE and r.projected_s is None
    assert "no bf16 compute peak" in r.reason and "never used" in r.reason


def test_a_layer_type_never_measured_is_not_available():
    points = fit.points_of(gemm_run())
    dev = target_device("Twice", {"fp32": 2 * PEAK}, BANDWIDTH)
    row = TargetWorkload("attention.x.fp32", "attention", "fp32", 1e9, 1e7, "sdpa")
    r = project_one(row, dev, points, noise_sd=0.0)
    assert r.label == NOT_AVAILABLE and "no measured attention" in r.reason


def test_a_point_faster_than_its_roof_has_all_of_it_and_says_why():
    # t = t_roof / 2 + 10 us, under the roof once the overhead is out: the analysis raises the
    # fp32 ceiling to its rate, so its s is 1, and the point says the ceiling was its own
    (p,) = fit.points_of(gemm_run(share=2.0, sizes=(256,)))
    assert p.share == pytest.approx(1.0) and "set its dtype's ceiling" in p.note


def test_unmeasured_overhead_leaves_t_in_the_share_and_adds_none():
    points = fit.points_of(gemm_run(overhead_s=None))
    assert all(p.overhead_s is None and "overhead not measured" in p.note for p in points)
    dev = target_device("Twice", {"fp32": 2 * PEAK}, BANDWIDTH)
    r = project_one(target(768), dev, points, noise_sd=0.0)
    assert r.overhead_s == 0.0 and r.overhead_label.startswith("not measured")
    assert r.projected_s == pytest.approx(905.969664e-6)


def test_a_dtype_with_too_few_points_pools_and_prefers_its_own():
    points = fit.points_of(gemm_run())
    # one bf16 point (under MIN_DTYPE_POINTS): pooled with fp32, and said so
    bf16 = fit.EfficiencyPoint("gemm.b.bf16", "gemm", "bf16", "Test CPU", "fp-a", 128.0,
                               "linear", 1e-3, 2e-3, None, 0.9, "")  # fmt: skip
    chosen, pooled, note = fit.group([*points, bf16], "gemm", "bf16")
    assert pooled and "pooled over bf16, fp32" in note and len(chosen) == len(SIZES) + 1
    pred = fit.predict(chosen, 128.0, 1e-3, dtype="bf16", variant="linear", noise_sd=0.0)
    # the bf16 point sits at the target (distance 0, weight 1 / 0.1^2 = 100); the fp32 ones are
    # a decade away for their dtype alone (weight under 1 / 1.1^2 = 0.83 each): the
    # prediction stays near 0.9, not the fp32 points' 0.5
    assert pred.neighbours[0] == "gemm.b.bf16" and pred.share > 0.85


def test_the_noise_is_the_runs_recorded_run_to_run_sd():
    doc = square_gemm_doc(SHARE, OVERHEAD_S, SIZES)
    recorded = analysed({**doc, "run_to_run": {"available": True, "sd": 0.02}})
    quiet = analysed({**doc, "run_to_run": {"available": True, "sd": 0.0}})
    # the largest of the runs' figures; none recorded: the rubric default 8%; 0: the floor 1%
    assert run_noise_sd([recorded]) == 0.02
    assert run_noise_sd([recorded, analysed(doc)]) == 0.08
    assert run_noise_sd([quiet]) == 0.01


@pytest.mark.parametrize("sample,median_error", [("cpu-quick-epyc-2core", 0.25),
                                                 ("gpu-quick-h200", 0.45)])  # fmt: skip
def test_the_interval_covers_most_of_a_quick_run_left_one_out(sample, median_error):
    """WIDENING_PER_DECADE's calibration: each of a committed quick run's points predicted from
    the others; the 80% interval must cover 70-90% of them (80% and 80% when chosen: the
    H200's points have no measured overhead, OVERHEAD_UNMEASURED_WIDENING; without it 61%)."""
    points = fit.points_of(analyse_run(load_run(SAMPLES / sample)))
    covered = close = 0
    for p in points:
        chosen, _, _ = fit.group([q for q in points if q is not p], p.layer_type, p.dtype)
        pred = fit.predict(chosen, p.arithmetic_intensity, p.roof_time_s, dtype=p.dtype,
                           variant=p.variant, noise_sd=0.08)  # fmt: skip
        covered += pred.share_low <= p.share <= pred.share_high
        close += abs(pred.share / p.share - 1) < median_error
    assert len(points) == 96
    assert 0.7 <= covered / len(points) <= 0.9
    assert close / len(points) > 0.5  # median errors 12% and 23% when chosen


def _point(workload: str, intensity: float, roof_s: float, share: float, *,
           variant: str = "linear", bandwidth: float | None = None, memory_bound: bool = False,
           layer_type: str = "gemm") -> fit.EfficiencyPoint:  # fmt: skip
    return fit.EfficiencyPoint(workload, layer_type, "fp32", "Test CPU", "fp-a", intensity,
                               variant, roof_s, roof_s / share, 0.0, share, "", bandwidth,
                               memory_bound)  # fmt: skip


def test_the_trend_line_follows_a_share_that_grows_with_intensity(monkeypatch):
    # s x 1.25 for each 4x in intensity, one roof time: ln s is a line in log10 F/B, so at
    # 1024 FLOP/B, one step past the last point (256), s = 0.5 x 1.25 = 0.625. The neighbours'
    # mean cannot pass the largest share (0.5); the line, carried that far, comes within 8% of
    # 0.625, short of it by the ridge's small pull towards flat
    points = [_point(f"g{i}", 16.0 * 4**i, 1e-3, 0.32 * 1.25**i) for i in range(3)]
    monkeypatch.setattr(fit, "TREND_SPAN_MARGIN_DECADES", math.inf)
    carried = fit.predict(points, 1024.0, 1e-3, dtype="fp32", variant="linear", noise_sd=0.0)
    assert carried.trend_points == 3
    assert 0.575 < carried.share < 0.625
    assert carried.share_low < carried.share < carried.share_high
    # the line is carried 0.3 decades past its last point only: 1024 FLOP/B (0.6 past 256) and
    # 10^5 are both read at 256 x 10^0.3 = 511 FLOP/B, where the line is 0.5 x 1.25^(0.3 /
    # log10 4) = 0.5590 (less the ridge's pull)
    monkeypatch.undo()
    for intensity in (1024.0, 1e5):
        pred = fit.predict(points, intensity, 1e-3, dtype="fp32", variant="linear",
                           noise_sd=0.0)  # fmt: skip
        assert pred.trend_points == 3
        assert 0.54 < pred.share <= 0.5591
        assert pred.share < carried.share
    # two points are too few for a line: the mean of them, under the larger share
    two = fit.predict(points[:2], 1024.0, 1e-3, dtype="fp32", variant="linear", noise_sd=0.0)
    assert two.trend_points == 0 and two.share < 0.4


def test_a_line_of_another_variant_is_not_used():
    # three causal points and one of the target's own variant: the line needs three of its own
    points = [_point(f"c{i}", 16.0 * 4**i, 1e-3, 0.2 * 1.5**i, variant="sdpa+causal")
              for i in range(3)] + [_point("f", 256.0, 1e-3, 0.6, variant="sdpa")]  # fmt: skip
    pred = fit.predict(points, 1024.0, 1e-3, dtype="fp32", variant="sdpa", noise_sd=0.0)
    assert pred.trend_points == 0 and pred.neighbours[0] == "f"


def test_a_memory_bound_point_keeps_its_rate_in_another_level_of_its_device():
    # an add streaming at 0.9 of a 160 GB/s cache: 144 GB/s achieved
    p = _point("add", 0.083, 1e-4, 0.9, bandwidth=160e9, memory_bound=True)
    # in a 36 GB/s main memory that rate is past the roof: s = min(1, 144 / 36) = 1
    assert fit.share_at(p, fit.TargetMemory(36e9, True)) == 1.0
    # in a 320 GB/s level it is 144 / 320 = 0.45 of that roof
    assert fit.share_at(p, fit.TargetMemory(320e9, True)) == pytest.approx(0.45)
    # a compute-bound target, or another device's (None), takes the share as measured
    assert fit.share_at(p, fit.TargetMemory(36e9, False)) == 0.9
    assert fit.share_at(p, None) == 0.9


def test_a_large_add_on_its_own_device_projects_at_main_memory_and_elsewhere_at_its_share():
    # three adds measured in a 32 MiB cache at 160 GB/s, each at s = 0.9 with t_o = 0
    points = [_point(f"elementwise.add{i}", 1 / 12, n / 160e9, 0.9, variant="add",
                     bandwidth=160e9, memory_bound=True, layer_type="elementwise")
              for i, n in enumerate((4e6, 8e6, 16e6))]  # fmt: skip
    own = target_device("Test CPU", {"fp32": PEAK}, 36e9, [("llc", 32 * 2**20, 160e9)],
                        fingerprint="fp-a")  # fmt: skip
    add = TargetWorkload("elementwise.big-add.fp32", "elementwise", "fp32", 8e6, 96e6, "add")
    r = project_one(add, own, points, noise_sd=0.0)
    # 96 MB is past the cache: t_roof = 96e6 / 36e9 = 2.667 ms, and 0.9 x 160 GB/s (144 GB/s)
    # is past main memory's 36 GB/s, so s = 1: t = 2.667 ms
    assert r.label == MEASURED and r.memory_level == "main memory"
    assert r.share == pytest.approx(1.0) and r.projected_s == pytest.approx(96e6 / 36e9)
    other = target_device("Other", {"fp32": PEAK}, 36e9, fingerprint="fp-b")
    b = project_one(add, other, points, noise_sd=0.0)
    # borrowed: another device's cache rate says nothing of this one's memory; s stays 0.9
    assert b.label.startswith("borrowed") and b.share == pytest.approx(0.9)


def test_a_tiny_call_without_measured_overhead_is_floored_at_the_fastest_measured_call():
    # GEMMs of 128..2048 at s = 0.5 and no overhead measured: the fastest call is n = 128,
    # t = 2 x 128^3 / 1e12 / 0.5 = 8.389 us. A 16^3 GEMM on the same device would be
    # 2 x 16^3 / 1e12 / 0.5 = 16.4 ns at its share: under every measured call, with no launch
    # cost known to add, so it is taken at 8.389 us, and its overhead label says so
    run = gemm_run(overhead_s=None, sizes=(128, 256, 512, 1024, 2048))
    r = project_one(target(16), device_of_run(run, "runs/a"), fit.points_of(run), noise_sd=0.0)
    assert r.label == MEASURED
    assert r.projected_s == pytest.approx(2 * 128**3 / PEAK / 0.5)
    assert r.high_s >= r.projected_s and "floored at the fastest call" in r.overhead_label
    # a target above the fastest call is its share of roof as before: 768^3, 2 x 905.97 us
    big = project_one(target(768), device_of_run(run, "runs/a"), fit.points_of(run), 0.0)
    assert big.projected_s == pytest.approx(2 * 905.969664e-6)


def test_a_trend_lines_interval_is_its_own_leave_one_out_error():
    # Four points at the target's own shape, shares 0.4, 0.5, 0.5, 0.6: the line's slopes have
    # nothing to fit, so it reads the weighted mean of log s (equal weights), and each point's
    # leave-one-out residual is its log s less the mean of the other three's. The 80% interval
    # is their 10th and 90th weighted percentiles (with four equal weights, the least and the
    # greatest) about the centre; no noise and no distance add to it.
    shares = (0.4, 0.5, 0.5, 0.6)
    points = [_point(f"g{i}", 64.0, 1e-3, s) for i, s in enumerate(shares)]
    pred = fit.predict(points, 64.0, 1e-3, dtype="fp32", variant="linear", noise_sd=0.0)
    logs = [math.log(s) for s in shares]
    centre = sum(logs) / 4
    loo = [v - (sum(logs) - v) / 3 for v in logs]
    assert pred.trend_points == 4
    assert pred.share == pytest.approx(math.exp(centre))
    assert pred.share_low == pytest.approx(math.exp(centre + min(loo)))
    assert pred.share_high == pytest.approx(math.exp(centre + max(loo)))
    # by hand: e^centre = 0.4949; the others' geometric means 0.5313 (for 0.4) and 0.4642
    # (for 0.6), so 0.4949 x 0.4 / 0.5313 = 0.3726 and 0.4949 x 0.6 / 0.4642 = 0.6397
    assert (pred.share_low, pred.share_high) == (pytest.approx(0.3726, abs=1e-3),
                                                 pytest.approx(0.6397, abs=1e-3))  # fmt: skip


def test_a_kernel_or_roof_term_never_measured_says_so_and_widens_its_interval(monkeypatch):
    # The GEMMs measured (128..2048 at s = 0.5) are all compute-bound (intensity n / 6 >= 21
    # FLOP/B, past the ridge of 10). A GEMV, m = 1, n = k = 1024: F = 2 x 1024^2 = 2.1 MFLOP,
    # B = 4 x (1024^2 + 2 x 1024) = 4.2 MB, intensity 0.5 FLOP/B: memory-bound, a roof term no
    # point had. Its share is still the compute-bound points' (0.5), but its interval is 3x
    # wider on each side than the same target's without the note (UNMEASURED_KERNEL_WIDENING)
    import reviewkit.analysis.project as project_module

    run = gemm_run()
    own, points = device_of_run(run, "runs/a"), fit.points_of(run)
    gemv = TargetWorkload("gemm.gemv.fp32", "gemm", "fp32", 2.0 * 1024**2,
                          4.0 * (1024**2 + 2 * 1024), "linear")  # fmt: skip
    r = project_one(gemv, own, points, noise_sd=0.0)
    assert r.label == MEASURED and r.share == pytest.approx(0.5)
    assert "no memory-bound gemm was measured: the share is compute-bound kernels'" in r.unmeasured
    assert "widened 3x" in r.unmeasured and r.reason == ""  # nothing pooled
    monkeypatch.setattr(project_module, "UNMEASURED_KERNEL_WIDENING", 1.0)
    narrow = project_one(gemv, own, points, noise_sd=0.0)
    monkeypatch.undo()
    # the share interval's ends move by 3x each (the high end capped at s = 1): the time's low
    # end is t_roof / share_high + t_o, so compare the shares
    assert r.share_low == pytest.approx(narrow.share_low / 3)
    assert r.share_high == pytest.approx(min(1.0, narrow.share_high * 3))
    # a kernel variant no point ran (a bmm where only linear GEMMs were measured) says so too
    gqa = TargetWorkload("gemm.x.fp32", "gemm", "fp32", 2.0 * 768**3, 12.0 * 768**2, "bmm")
    v = project_one(gqa, own, points, noise_sd=0.0)
    assert "its kernel (bmm) was never measured: the share is linear's" in v.unmeasured
    # and a target of the measured kernel and roof term carries no such note
    assert project_one(target(768), own, points, 0.0).unmeasured == ""


def test_a_memory_bound_point_faster_than_its_roof_keeps_its_share():
    # n = 32: intensity 32 / 6 = 5.3 FLOP/B, under the ridge (10): t_m = 12 x 32^2 / 1e11 =
    # 122.88 ns over t_c = 2 x 32^3 / 1e12 = 65.54 ns. Taking t = t_m / 1.3 = 94.52 ns (share
    # argument 65.54 / 94.52), the point beats its memory roof by 1.3x: the memory roof is a
    # copy's rate, which a read stream can beat, so s = 1.3 is kept and said, not clamped
    t_c, t_m = 2 * 32**3 / PEAK, 12 * 32**2 / BANDWIDTH
    (p,) = fit.points_of(gemm_run(share=t_c / (t_m / 1.3), overhead_s=0.0, sizes=(32,)))
    assert p.memory_bound and p.share == pytest.approx(1.3)
    assert "faster than its memory roof (s = 1.3): kept" in p.note
    # a target in that level may be given up to 1.3; one in another level, or compute-bound,
    # or on another device (None), at most its roof
    level = fit.TargetMemory(BANDWIDTH, True, p.memory_level)
    assert fit.share_cap([p], level) == pytest.approx(1.3)
    assert fit.share_cap([p], fit.TargetMemory(BANDWIDTH, True, "llc")) == 1.0
    assert fit.share_cap([p], fit.TargetMemory(BANDWIDTH, False, p.memory_level)) == 1.0
    assert fit.share_cap([p], None) == 1.0


def test_shares_past_the_roof_measured_in_a_level_are_projected_past_it_there():
    # three adds streamed from main memory at 1.2, 1.25 and 1.3 of its copy-measured roof:
    # a fourth in the same level reads about 1.25 (the line through them, all at one shape),
    # never above the highest measured (1.3); the same points read by a target in the LLC
    # are carried at their rate and capped at that level's roof, 1
    points = [_point(f"elementwise.add{i}", 1 / 12, 1e-3, s, variant="add", bandwidth=36e9,
                     memory_bound=True, layer_type="elementwise")
              for i, s in enumerate((1.2, 1.25, 1.3))]  # fmt: skip
    points = [dataclasses.replace(p, memory_level="dram") for p in points]
    dram = fit.TargetMemory(36e9, True, "dram")
    pred = fit.predict(points, 1 / 12, 1e-3, dtype="fp32", variant="add", noise_sd=0.0,
                       memory=dram)  # fmt: skip
    assert pred.share == pytest.approx((1.2 * 1.25 * 1.3) ** (1 / 3), rel=1e-6)
    assert pred.share_high <= 1.3 and pred.share_low < pred.share
    llc = fit.TargetMemory(160e9, True, "llc")
    # 1.3 x 36 GB/s = 46.8 GB/s is 0.2925 of the LLC's 160 GB/s
    assert fit.share_at(points[2], llc) == pytest.approx(0.2925)
    cache = fit.TargetMemory(20e9, True, "llc")  # a level slower than the points' (as a test)
    assert fit.share_at(points[2], cache) == 1.0


def test_the_run_to_run_noise_adds_in_quadrature_and_unmeasured_overhead_widens():
    # the four points of the leave-one-out test above: the line's own error below the centre
    # is g_low = ln(0.4949 / 0.3726) and above it g_high = ln(0.6397 / 0.4949). A run-to-run
    # sd of 0.1 adds z = 1.2816 x 0.1 in quadrature: each side sqrt(g^2 + z^2), under the
    # g + z a linear sum would give
    shares = (0.4, 0.5, 0.5, 0.6)
    points = [_point(f"g{i}", 64.0, 1e-3, s) for i, s in enumerate(shares)]
    bare = fit.predict(points, 64.0, 1e-3, dtype="fp32", variant="linear", noise_sd=0.0)
    noisy = fit.predict(points, 64.0, 1e-3, dtype="fp32", variant="linear", noise_sd=0.1)
    centre, z = math.log(bare.share), 1.2816 * 0.1
    g_low, g_high = centre - math.log(bare.share_low), math.log(bare.share_high) - centre
    assert noisy.share == pytest.approx(bare.share)
    assert noisy.share_low == pytest.approx(math.exp(centre - math.hypot(g_low, z)), rel=1e-4)
    assert noisy.share_high == pytest.approx(math.exp(centre + math.hypot(g_high, z)), rel=1e-4)
    assert noisy.share_low > math.exp(centre - g_low - z)
    # the same points without a measured overhead: each side 1.15x wider, the centre unmoved
    unmeasured = [dataclasses.replace(p, overhead_s=None) for p in points]
    wide = fit.predict(unmeasured, 64.0, 1e-3, dtype="fp32", variant="linear", noise_sd=0.0)
    assert wide.share == pytest.approx(bare.share)
    assert wide.share_low == pytest.approx(bare.share_low / 1.15)
    assert wide.share_high == pytest.approx(bare.share_high * 1.15)
