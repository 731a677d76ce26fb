"""The GPU L2 ceiling: its streams, their bytes, and the 4x check that must fall to HBM's rate."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from reviewkit.bundle import schema
from reviewkit.measure import calibration, gpu_l2, hierarchy
from reviewkit.measure.trials import BEST, TrialRates

TB = 1e12
L2_BYTES = 50 << 20  # an H100's or H200's L2, as torch's device properties report it
LEVELS = hierarchy.gpu_levels(L2_BYTES)


def _rates(name: str, *tbs: float) -> TrialRates:
    return TrialRates(name, tuple(x * TB for x in tbs), BEST)


def _trials(quarter: float, half: float, check: float, hbm: float = 3.0) -> dict[str, TrialRates]:
    return {
        "hbm": _rates("hbm", hbm - 0.1, hbm),
        "l2": _rates("l2", half - 0.2, half),
        "l2@0.25": _rates("l2@0.25", quarter - 0.2, quarter),
        "l2@4x": _rates("l2@4x", check - 0.1, check),
    }


def _records(trials: dict[str, TrialRates]) -> list[dict]:
    methods = {name: f"{name} stream" for name in trials}
    return calibration.memory_records(LEVELS, trials, methods, 2)


def test_the_plan_of_a_gpu_streams_the_l2_at_a_quarter_a_half_and_four_times_in_one_launch():
    # Planning builds no tensor, so a CUDA plan can be inspected on a machine without one.
    plan = calibration.memory_plan(torch.device("cuda"), "smoke", LEVELS)
    assert set(plan) == {"l2", "l2@0.25", "l2@4x", "hbm"}
    # 12.5 MiB = 3,276,800 floats; 4 GiB per call is 327 whole passes over them
    assert plan["l2@0.25"][1] == 327 * 3_276_800 * 4
    # 200 MiB: 20 passes
    assert plan["l2@4x"][1] == 20 * 52_428_800 * 4
    assert "summed whole as 327 stride-0 rows" in plan["l2@0.25"][2]
    assert gpu_l2.BYTES_PER_CALL == 4 << 30
    assert all(n >= 3.9 * (1 << 30) for _, n, _ in (plan["l2"], plan["l2@0.25"], plan["l2@4x"]))
    # a CPU's L2 keeps its own stream (no check): the GPU streams are the GPU's
    cpu = calibration.memory_plan(torch.device("cpu"), "smoke",
                                  hierarchy.cpu_levels({"L1d": 32 << 10, "L2": 1 << 20,
                                                        "L3": 32 << 20}))  # fmt: skip
    assert not any("@" in name for name in cpu)


def test_the_stream_reads_its_buffer_once_per_pass_and_times_the_call():
    # calibration's read stream: a 4 KiB buffer (1,024 floats) and 64 KiB per call give 16
    # passes, each the same memory (stride 0), reduced whole (the window that slides through
    # the passes is what lets a 4x buffer fall out of the L2 between passes).
    make, nbytes = calibration.stream_maker(4096, 65536, torch.device("cpu"))
    assert nbytes == 16 * 1024 * 4
    assert make()() > 0
    rows = torch.ones(1024).unsqueeze(0).expand(16, 1024)
    assert rows.stride() == (0, 1) and rows.sum().item() == 16 * 1024  # every pass read whole


def test_the_l2_is_the_best_stream_when_the_4x_check_falls_to_hbm():
    # quarter 9 TB/s, half 8, check 3.3 against HBM's 3.0: 3.3 <= 1.25 x 3.0 = 3.75, so the check
    # fell to HBM and the L2 is the quarter's 9 TB/s, measured over a 12.5 MiB working set.
    l2, hbm = _records(_trials(quarter=9.0, half=8.0, check=3.3))
    assert hbm["peak"] == pytest.approx(3.0 * TB)
    assert l2["peak"] == pytest.approx(9.0 * TB)
    assert l2["working_set_bytes"] == L2_BYTES // 4
    assert l2["trials"] == [8.8 * TB, 9.0 * TB]  # the quarter's trials, the figure's own
    assert l2["check_fell_to_hbm"] is True and l2["check_peak"] == pytest.approx(3.3 * TB)
    assert l2["probe_fractions"] == [0.25, 0.5]
    assert l2["probe_peaks"] == pytest.approx([9.0 * TB, 8.0 * TB])
    assert "(0.25x, 9000 GB/s)" in l2["method"] and "check read 3300 GB/s" in l2["method"]
    schema.check({"memory": [l2, hbm], "bandwidth": {"peak": hbm["peak"]}},
                 Path("profile.json"), part="ceilings")  # fmt: skip


def test_an_l2_whose_4x_check_stays_fast_is_not_measured_and_falls_to_hbm():
    # check 5 TB/s > 3.75: the streams were served from an L1, so 9 TB/s is not the L2's.
    l2, hbm = _records(_trials(quarter=9.0, half=8.0, check=5.0))
    assert l2["peak"] == pytest.approx(3.0 * TB) == hbm["peak"]
    assert l2["check_fell_to_hbm"] is False
    assert "not measured: the 4x stream read 5000 GB/s, over 1.25x HBM's 3000 GB/s" in l2["method"]
    assert l2["working_set_bytes"] == L2_BYTES // 2  # calibration's fill: no probe's set chosen


def test_an_l2_stream_slower_than_hbm_is_raised_to_it_as_any_level_is():
    l2, _ = _records(_trials(quarter=2.0, half=2.5, check=2.4))
    assert l2["peak"] == pytest.approx(3.0 * TB)
    assert "raised to its 3e+03 GB/s" in l2["method"]
