"""Chart specs: valid Vega-Lite, inline data, one font, deterministic, and SVG that shows them."""

from __future__ import annotations

import copy
import itertools
import json
import re

import altair as alt
import pytest
import vl_convert
from chartspecs import datasets

from reviewkit.render import charts
from reviewkit.render.charts import base

FONT = "DejaVu Sans"
P_FP32, P_BF16, W = 19.5e12, 312e12, 2.0e12  # an A100-like device: FLOP/s per dtype, bytes/s


def roofline_runs() -> list[dict]:
    return [
        {
            "label": "baseline",
            "peak_flops_per_s": {"fp32": P_FP32, "bf16": P_BF16},
            "peak_bytes_per_s": W,
            "workloads": [
                {
                    "id": "matmul.4096.fp32",
                    "layer_type": "matmul",
                    "dtype": "fp32",
                    "arithmetic_intensity": 680.0,
                    "achieved_flops_per_s": 15e12,
                },
                {
                    "id": "layernorm.1024.fp32",
                    "layer_type": "norm",
                    "dtype": "fp32",
                    "arithmetic_intensity": 0.9,
                    "achieved_flops_per_s": 1.1e12,
                },
                # Three a log axis cannot show: zero FLOPs, no rate, infinite intensity.
                {
                    "id": "copy.zero",
                    "layer_type": "copy",
                    "dtype": "fp32",
                    "arithmetic_intensity": 0.0,
                    "achieved_flops_per_s": 0.0,
                },
                {
                    "id": "view.none",
                    "layer_type": "copy",
                    "dtype": "fp32",
                    "arithmetic_intensity": 1.0,
                    "achieved_flops_per_s": None,
                },
                {
                    "id": "reshape.inf",
                    "layer_type": "copy",
                    "dtype": "fp32",
                    "arithmetic_intensity": float("inf"),
                    "achieved_flops_per_s": 1e9,
                },
            ],
        },
        {
            "label": "candidate 1",
            "peak_flops_per_s": {"fp32": P_FP32, "bf16": P_BF16},
            "peak_bytes_per_s": W,
            "workloads": [
                {
                    "id": "matmul.4096.bf16",
                    "layer_type": "matmul",
                    "dtype": "bf16",
                    "arithmetic_intensity": 1360.0,
                    "achieved_flops_per_s": 230e12,
                },
                {
                    "id": "softmax.8192.bf16",
                    "layer_type": "softmax",
                    "dtype": "bf16",
                    "arithmetic_intensity": 1.2,
                    "achieved_flops_per_s": 1.5e12,
                },
            ],
        },
    ]


def layer_rows() -> list[dict]:
    return [
        {"run": "baseline", "layer_type": "matmul", "mfu": 0.72, "memory_stall_fraction": 0.10},
        {"run": "candidate 1", "layer_type": "matmul", "mfu": 1.08, "memory_stall_fraction": 0.05},
        {"run": "baseline", "layer_type": "attention", "mfu": 0.40, "memory_stall_fraction": 0.45},
        {"run": "candidate 1", "layer_type": "attention", "mfu": 0.5, "memory_stall_fraction": 0.3},
    ]


def decomposition_rows() -> list[dict]:
    """Overhead measured in every row: the five fractions sum to 1."""
    return [
        {"run": "baseline", "layer_type": "matmul", "compute": 0.7, "memory_stall": 0.1,
         "overhead": 0.1, "inefficiency": 0.1, "unattributed": 0.0},
        {"run": "candidate 1", "layer_type": "matmul", "compute": 0.85, "memory_stall": 0.05,
         "overhead": 0.04, "inefficiency": 0.06, "unattributed": 0.0},
        {"run": "baseline", "layer_type": "layernorm", "compute": 0.1, "memory_stall": 0.6,
         "overhead": 0.1, "inefficiency": 0.2, "unattributed": 0.0},
    ]  # fmt: skip


def unmeasured_rows() -> list[dict]:
    """A run recorded before overhead was measured (run.json schema 5, migrated): overhead and
    inefficiency None, the rest of the time `unattributed`."""
    return [
        {"run": "baseline", "layer_type": "matmul", "compute": 0.7, "memory_stall": 0.1,
         "overhead": None, "inefficiency": None, "unattributed": 0.2},
        {"run": "baseline", "layer_type": "layernorm", "compute": 0.1, "memory_stall": 0.6,
         "overhead": None, "inefficiency": None, "unattributed": 0.3},
    ]  # fmt: skip


def _latency_row(run: str, workload: str, base_s: float, n: int) -> dict:
    # Deterministic spread: base·(1 + i/n) for i in 0..n-1, shuffled so thinning must sort.
    samples = [base_s * (1 + ((i * 7919) % n) / n) for i in range(n)]
    ordered = sorted(samples)
    return {
        "run": run,
        "workload": workload,
        "samples_s": samples,
        "p50_s": ordered[n // 2],
        "p95_s": ordered[int(n * 0.95)],
        "p99_s": ordered[int(n * 0.99)],
    }


def latency_rows() -> list[dict]:
    return [
        _latency_row("baseline", "matmul 4096", 2e-3, 1000),
        _latency_row("candidate 1", "matmul 4096", 1.6e-3, 1000),
        _latency_row("baseline", "softmax 8192", 2e-4, 50),
        _latency_row("candidate 1", "softmax 8192", 2.4e-4, 50),
    ]


def forest_rows() -> list[dict]:
    return [
        {"workload": "softmax 8192", "ratio": 1.2, "low": 1.1, "high": 1.3, "verdict": "slower"},
        {"workload": "matmul 4096", "ratio": 0.8, "low": 0.78, "high": 0.82, "verdict": "faster"},
        {"workload": "layernorm", "ratio": 1.01, "low": 0.97, "high": 1.05,
         "verdict": "inconclusive"},
    ]  # fmt: skip


def risk_rows() -> list[dict]:
    return [
        {"description": "bf16 drift", "level": "high", "likelihood": "medium", "owner": "ana"},
        {"description": "driver upgrade", "level": "high", "likelihood": "medium", "owner": ""},
        {"description": "cold cache", "level": "low", "likelihood": "high", "owner": "bo"},
        {"description": "unknown vendor", "level": "", "likelihood": "", "owner": ""},
    ]


def trade_rows() -> list[dict]:
    return [
        {"candidate": "baseline", "throughput_per_s": 1200.0, "latency_p99_s": 0.012,
         "energy_j_per_call": 3.0, "engineering_risk": 0.1},
        {"candidate": "candidate 1", "throughput_per_s": 1500.0, "latency_p99_s": 0.010,
         "energy_j_per_call": None, "engineering_risk": 0.4},
    ]  # fmt: skip


def sweep_panels() -> list[dict]:
    # A 1 ms/query server: offline 1000/s; p99 bends at 900/s offered (the knee).
    levels = [
        {"target_rate_per_s": r, "load_fraction": r / 1000, "achieved_rate_per_s": r * 0.99,
         "p50_s": 1e-3, "p99_s": p99, "valid": r != 250.0,
         "invalid_reasons": [] if r != 250.0 else ["ran 0.5 s, shorter than the minimum 1 s"]}
        for r, p99 in ((250.0, 1.1e-3), (500.0, 1.3e-3), (750.0, 2e-3), (900.0, 6e-3))
    ]  # fmt: skip
    return [
        {
            "workload": "model.decoder.b1s256.fp32",
            "levels": levels,
            "offline_rate_per_s": 1000.0,
            "sla_p99_s": 5e-3,
            "sla_source": "review target model.*",
            "knee": {"found": True, "rate_per_s": 900.0, "rule": "2x",
                     "point": {"achieved_rate_per_s": 891.0, "p99_s": 6e-3}},
            "notes": ["knee at 900/s offered"],
        }
    ]  # fmt: skip


def shape_rows() -> list[dict]:
    return [
        {"panel": "gemm · ffn-up", "workload": f"gemm.ffn-up.b{b}s{s}", "seq": s, "batch": b,
         "ratio": ratio, "verdict": "faster" if ratio < 1 else "slower", "mfu": 0.4,
         "p99_ms": 2.0}
        for s, b, ratio in ((128, 1, 0.6), (512, 1, 0.7), (128, 4, 0.9), (512, 4, 1.3))
    ]  # fmt: skip


def soak_rows() -> list[dict]:
    windows = [{"index": i, "start_s": 3.0 * i, "end_s": 3.0 * (i + 1),
                "calls_per_s": 100.0 - i, "partial": i == 9} for i in range(10)]  # fmt: skip
    return [
        {
            "workload": "model.decoder.b1s256.fp32",
            "verdict": "drift",
            "reasons": ["throughput changed -8.0% over the window"],
            "trend": {"mean": 96.0, "slope_per_s": -1 / 3, "relative_change": -0.08,
                      "relative_change_ci": [-0.09, -0.07], "reason": ""},
            "throttling": {"status": "not available", "reason": "no thermal zones"},
            "subwindows": windows,
            "clocks": [{"time_s": w["end_s"], "series": "cpu_clocks_mhz:cpu0", "value": 3000.0}
                       for w in windows],
            "temperatures": [],
            "sensor_notes": ["temperatures: not available: no thermal zones"],
        }
    ]  # fmt: skip


def energy_rows() -> list[dict]:
    return [
        {"run": "baseline fp32", "layer_type": "gemm", "flops_per_joule": 2e9, "avg_watts": 60.0,
         "joules": 30.0, "window_s": 0.5, "confidence": "high"},
        {"run": "candidate bf16", "layer_type": "gemm", "flops_per_joule": 5e9,
         "avg_watts": 55.0, "joules": 12.0, "window_s": 0.2, "confidence": "low"},
    ]  # fmt: skip


def quality_rows() -> list[dict]:
    return [
        {"workload": "gemm.ffn-up.b1s128", "dtype": "bf16", "rel_error": 3e-3,
         "max_abs_error": 0.01},
        {"workload": "gemm.ffn-up.b1s128", "dtype": "fp16", "rel_error": 5e-3,
         "max_abs_error": 0.002},
        {"workload": "model.decoder.b1s256", "dtype": "bf16", "rel_error": 4e-3,
         "max_abs_error": 0.02, "top1_agreement": 0.98, "kl_divergence": 1e-4},
    ]  # fmt: skip


def quality_chart(rows: list[dict]) -> dict:
    return charts.quality_drift(rows, {"bf16": 0.01, "fp16": 0.002})


PLATFORMS = ["Test CPU · fp32", "A100-SXM4-80GB · fp32"]


def platform_cells() -> list[dict]:
    return [
        {"workload": "model.decoder.b1s256", "platform": PLATFORMS[0], "status": "measured",
         "mfu": 0.2, "p99_s": 0.3, "sla": "met", "peak_source": "measured"},
        {"workload": "model.decoder.b1s256", "platform": PLATFORMS[1], "status": "measured",
         "mfu": 0.45, "p99_s": 0.004, "sla": "met", "peak_source": "datasheet"},
        {"workload": "gemm.ffn-up.b4s512", "platform": PLATFORMS[0], "status": "measured",
         "mfu": 0.6, "p99_s": 0.09, "sla": "missed", "sla_reason": "p99 90 ms > 50 ms",
         "peak_source": "measured"},
        {"workload": "gemm.ffn-up.b4s512", "platform": PLATFORMS[1], "status": "not measured",
         "reason": "not in the run", "sla": "not measured"},
    ]  # fmt: skip


def platform_chart(cells: list[dict]) -> dict:
    return charts.platform_matrix(cells, PLATFORMS)


def fit_rows() -> list[dict]:
    """A production mix: GEMM 50% in 1e4-1e5 (40% covered), 20% in 1e6-1e7 (covered), 5% with
    no shape; attention 10% covered, 5% past the listed shapes; 10% unmapped."""

    def row(layer, band, low, share, covered, workloads=()):
        return {"layer_type": layer, "band": band, "numel_low": low,
                "numel_high": low * 10 if low else None, "share": share,
                "covered_share": covered, "workloads": list(workloads)}  # fmt: skip

    return [
        row("attention", "1e4-1e5 elements", 10**4, 0.10, 0.10, ["attention.sdpa.b1s128"]),
        row("attention", "other shapes", None, 0.05, 0.0),
        row("gemm", "1e4-1e5 elements", 10**4, 0.50, 0.40, ["gemm.ffn-up.b1s128"]),
        row("gemm", "1e6-1e7 elements", 10**6, 0.20, 0.20, ["gemm.ffn-up.b4s512"]),
        row("gemm", "shape not recorded", None, 0.05, 0.0),
        {**row("unmapped", "not mapped", None, 0.10, 0.0), "note": "custom ops"},
    ]  # fmt: skip


FIT_SUMMARY = {"score": 0.7, "min_coverage": 0.5, "layer_coverage": 0.9, "time_basis": "host",
               "shape_range_factor": 4.0}  # fmt: skip


def fit_chart(rows: list[dict]) -> dict:
    return charts.fit_matrix(rows, FIT_SUMMARY)


def collective_runs() -> list[dict]:
    """Two ranks over a 4 GB/s link: an 8 MiB all-reduce in 8 ms (the line is at 2.1 ms), a
    16 MiB all-to-all (8 MiB on the wire at 2 ranks) in 7.5 ms."""
    return [
        {
            "label": "candidate 1",
            "link_bytes_per_s": 4e9,
            "collectives": [
                {"id": "collective.tp-activation-all-reduce.8MiB.fp32", "op": "all_reduce",
                 "wire_bytes": 8 << 20, "p50_s": 0.008, "p99_s": 0.013,
                 "busbw_bytes_per_s": 1.05e9, "skew": 1.01},
                {"id": "collective.moe-token-all-to-all.16MiB.fp32", "op": "all_to_all",
                 "wire_bytes": 8 << 20, "p50_s": 0.0075, "p99_s": 0.010,
                 "busbw_bytes_per_s": 1.1e9, "skew": 1.0},
            ],
        }
    ]  # fmt: skip


def skew_rows() -> list[dict]:
    return [
        {"run": "candidate 1", "workload": "gemm.probe", "rank": rank, "ratio": ratio}
        for rank, ratio in ((0, 1.0), (1, 1.15))
    ]


# name, chart function, input builder, a label from the input that the SVG must show
CASES = [
    ("roofline", charts.roofline, roofline_runs, "softmax"),
    ("mfu_by_layer", charts.mfu_by_layer, layer_rows, "attention"),
    ("stall_by_layer", charts.stall_by_layer, layer_rows, "attention"),
    ("time_decomposition", charts.time_decomposition, decomposition_rows, "layernorm"),
    ("latency_distribution", charts.latency_distribution, latency_rows, "softmax 8192"),
    ("forest", charts.forest, forest_rows, "matmul 4096"),
    ("risk_map", charts.risk_map, risk_rows, "driver upgrade"),
    ("trade_view", charts.trade_view, trade_rows, "candidate 1"),
    ("latency_throughput", charts.latency_throughput, sweep_panels, "model.decoder.b1s256.fp32"),
    ("shape_heatmap", charts.shape_heatmap, shape_rows, "gemm · ffn-up"),
    ("stability", charts.stability, soak_rows, "Clocks"),
    ("perf_per_watt", charts.perf_per_watt, energy_rows, "candidate bf16"),
    ("quality_drift", quality_chart, quality_rows, "model.decoder.b1s256"),
    ("platform_matrix", platform_chart, platform_cells, "gemm.ffn-up.b4s512"),
    ("fit_matrix", fit_chart, fit_rows, "recorded"),  # "shape not / recorded": two lines
    ("collective_times", charts.collective_times, collective_runs, "all_reduce"),
    ("rank_skew", charts.rank_skew, skew_rows, "rank 1"),
]
IDS = [c[0] for c in CASES]


def values(spec: dict, node: dict) -> list[dict]:
    """The rows of one layer (or the top level), through a named dataset if need be."""
    data = node["data"]
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


def rows_with(spec: dict, key: str) -> list[dict]:
    return [row for values in datasets(spec) for row in values if key in row]


def test_chart_builders_are_memoised_on_their_input():
    rows = forest_rows()
    first = charts.forest(rows)
    assert charts.forest(forest_rows()) is first  # equal input: the stored spec
    rows[0]["ratio"] *= 1.5
    assert charts.forest(rows) is not first  # changed input: built again


@pytest.mark.parametrize(("name", "fn", "build", "label"), CASES, ids=IDS)
def test_spec_is_valid_inline_deterministic_and_renders(name, fn, build, label):
    spec = fn(build())
    charts.validate(spec)
    text = json.dumps(spec, allow_nan=False)  # plain JSON: no NaN, no objects
    assert '"url"' not in text
    assert datasets(spec), "data must be inline"
    assert spec["title"]
    config = spec["config"]
    assert config["font"] == FONT
    for section in ("axis", "legend"):
        assert config[section]["labelFont"] == FONT
        assert config[section]["titleFont"] == FONT
    assert config["title"]["font"] == FONT
    charts.base._SPEC_MEMO.clear()  # rebuild for real: the memo would hand back the same object
    again = fn(build())
    assert again == spec and again is not spec  # same input, same dict

    svg = charts.to_svg(spec)
    assert svg.startswith("<svg")
    assert "<text" in svg  # selectable text, not outlined paths
    assert f">{label}<" in svg
    assert set(re.findall(r'font-family="([^"]+)"', svg)) == {FONT}


@pytest.mark.parametrize(("name", "fn", "build", "label"), CASES, ids=IDS)
def test_empty_input_shows_no_data(name, fn, build, label):
    spec = fn([])
    charts.validate(spec)
    assert spec["mark"]["type"] == "text"
    assert values(spec, spec) == [{"message": "no data"}]
    assert ">no data<" in charts.to_svg(spec)


def test_collective_link_line_is_bytes_over_bandwidth():
    spec = charts.collective_times(collective_runs())
    line = rows_with(spec, "ceiling")
    # both points carry 8 MiB: the line spans 4 to 16 MiB, at t = bytes / 4e9 (ms)
    assert [r["wire_mib"] for r in line] == [4.0, 16.0]
    assert line[0]["ms"] == pytest.approx(4 * (1 << 20) / 4e9 * 1e3)
    assert line[0]["ceiling"] == "candidate 1 link 4 GB/s"


def ceiling_lines(spec: dict) -> dict[str, list[dict]]:
    """The roofline's ceiling rows by line name, in the order drawn."""
    out: dict[str, list[dict]] = {}
    for r in rows_with(spec, "ceiling"):
        out.setdefault(r["ceiling"], []).append(r)
    return out


def test_roofline_draws_one_peak_a_dtype_and_the_memory_slope_its_points_sit_under():
    spec = charts.roofline(roofline_runs())
    lines = ceiling_lines(spec)
    # Plotted dtypes fp32 and bf16: their peaks, 19.5 and 312 TFLOP/s. The norm (AI 0.9) and
    # the softmax (AI 1.2) sit under main memory's slope (2e12 x 0.9 = 1.8e12 < 19.5e12 and
    # 2e12 x 1.2 = 2.4e12 < 312e12): it is drawn, once, though both runs have it.
    assert list(lines) == ["bf16 peak 312 TFLOP/s", "fp32 peak 19.5 TFLOP/s",
                           "main memory 2 TB/s"]  # fmt: skip
    # Intensities: 680, 0.9, 1360, 1.2 and the ridges 19.5e12 / 2e12 = 9.75 and 312e12 / 2e12
    # = 156, in whole decades a factor of 2 clear: 0.9 / 2 = 0.45 -> 0.1, 1360 x 2 -> 1e4.
    # A peak runs flat from where the slope meets it to the right edge ...
    fp32 = lines["fp32 peak 19.5 TFLOP/s"]
    assert [r["arithmetic_intensity"] for r in fp32] == [9.75, 1e4]
    assert [r["gflops_per_s"] for r in fp32] == [19500.0, 19500.0]
    bf16 = lines["bf16 peak 312 TFLOP/s"]
    assert [r["arithmetic_intensity"] for r in bf16] == [156.0, 1e4]
    # ... and the slope rises from the left edge, 2e12 x 0.1 = 200 GFLOP/s, to the highest
    # peak, at 312e12 / 2e12 = 156 FLOP/byte.
    main = lines["main memory 2 TB/s"]
    assert [r["arithmetic_intensity"] for r in main] == [0.1, 156.0]
    assert [r["gflops_per_s"] for r in main] == [pytest.approx(200.0), pytest.approx(312000.0)]


def test_roofline_draws_every_cache_level_once_and_holds_points_to_their_own():
    """Two runs sharing one device profile (L2 at 7e12 bytes/s): one L2 line, not two. The
    norm (AI 0.9) lives in L2: its roofline is 7e12 x 0.9 = 6.3e12 FLOP/s, not DRAM's 1.8e12."""
    runs = roofline_runs()
    for run in runs:
        run["memory_levels"] = [{"level": "l2", "peak_bytes_per_s": 7e12}]
    norm = next(w for w in runs[0]["workloads"] if w["id"] == "layernorm.1024.fp32")
    norm["memory_level"] = "l2"
    spec = charts.roofline(runs)
    lines = ceiling_lines(spec)
    assert [name for name in lines if name.startswith("L2")] == ["L2 7 TB/s"]
    # From the left edge (0.1) up to where 7e12 x AI meets the highest peak, 312e12 (bf16):
    # 312 / 7 = 44.571 FLOP/byte; at 0.1 the slope reads 7e11 FLOP/s = 700 GFLOP/s.
    l2 = lines["L2 7 TB/s"]
    assert [r["arithmetic_intensity"] for r in l2] == pytest.approx([0.1, 312 / 7])
    assert [r["gflops_per_s"] for r in l2] == pytest.approx([700.0, 312000.0])
    # The peaks now start where the fastest slope drawn meets them: 19.5 / 7 = 2.786.
    fp32 = lines["fp32 peak 19.5 TFLOP/s"]
    assert fp32[0]["arithmetic_intensity"] == pytest.approx(19.5 / 7)
    point = next(r for r in rows_with(spec, "id") if r["id"] == "layernorm.1024.fp32")
    assert point["memory_level"] == "l2"
    assert point["attainable_gflops_per_s"] == pytest.approx(6300.0)
    gemm = next(r for r in rows_with(spec, "id") if r["id"] == "matmul.4096.fp32")
    assert gemm["memory_level"] == "main memory"  # none recorded: the one bandwidth


def test_roofline_points_skip_what_log_axes_cannot_show_and_say_so():
    spec = charts.roofline(roofline_runs())
    ids = {r["id"] for r in rows_with(spec, "id")}
    assert ids == {"matmul.4096.fp32", "layernorm.1024.fp32", "matmul.4096.bf16",
                   "softmax.8192.bf16"}  # fmt: skip
    assert spec["title"]["subtitle"][0].startswith("3 workloads with zero")
    point = next(r for r in rows_with(spec, "id") if r["id"] == "matmul.4096.fp32")
    assert point["gflops_per_s"] == 15000.0  # 15e12 FLOP/s
    assert point["mfu"] == pytest.approx(15e12 / P_FP32)


def test_roofline_with_only_plottable_points_has_no_subtitle():
    runs = roofline_runs()[1:]
    assert "subtitle" not in charts.roofline(runs)["title"]


def test_mfu_above_one_is_not_clipped_and_is_flagged():
    spec = charts.mfu_by_layer(layer_rows())
    assert max(r["mfu"] for r in rows_with(spec, "mfu")) == 1.08
    assert "domain" not in spec["encoding"]["x"].get("scale", {})
    assert "1 bar above 100 %" in spec["title"]["subtitle"][0]
    # Baseline beside candidate, in the caller's order.
    assert spec["encoding"]["yOffset"]["sort"] == ["baseline", "candidate 1"]
    assert "subtitle" not in charts.stall_by_layer(layer_rows())["title"]


def test_time_decomposition_stacks_in_fixed_order_and_colours():
    spec = charts.time_decomposition(decomposition_rows())
    colour = spec["spec"]["encoding"]["color"]["scale"]
    assert colour["domain"] == ["compute", "memory stall", "inefficiency", "overhead"]
    assert colour["range"] == ["#4C78A8", "#F58518", "#66CCEE", "#882255"]
    shares = [(r["component"], r["order"]) for r in rows_with(spec, "share")[:4]]
    assert shares == [("compute", 0), ("memory stall", 1), ("inefficiency", 2), ("overhead", 3)]
    assert spec["spec"]["encoding"]["color"]["legend"]["orient"] == "bottom"
    assert "subtitle" not in spec["title"]


def test_measured_overhead_and_inefficiency_are_two_segments_with_their_own_shares():
    spec = charts.time_decomposition(decomposition_rows())
    bars = {(r["run"], r["layer_type"], r["component"]): r["share"]
            for r in rows_with(spec, "component")}  # fmt: skip
    assert bars[("candidate 1", "matmul", "overhead")] == 0.04
    assert bars[("candidate 1", "matmul", "inefficiency")] == 0.06
    assert bars[("baseline", "layernorm", "inefficiency")] == 0.2
    for run, layer in {(run, layer) for run, layer, _ in bars}:
        stack = [v for (r, lt, _), v in bars.items() if (r, lt) == (run, layer)]
        assert sum(stack) == pytest.approx(1.0)
    assert not any("not measured" in c for _, _, c in bars)
    # inefficiency has its own colour and legend entry, apart from overhead's
    scale = spec["spec"]["encoding"]["color"]["scale"]
    colours = dict(zip(scale["domain"], scale["range"], strict=True))
    assert colours["inefficiency"] != colours["overhead"]


def test_unmeasured_overhead_is_one_grey_segment_never_called_overhead():
    spec = charts.time_decomposition(unmeasured_rows())
    names = {r["component"] for r in rows_with(spec, "component")}
    assert names == {"compute", "memory stall", "overhead + inefficiency (not measured apart)"}
    scale = spec["spec"]["encoding"]["color"]["scale"]
    assert "overhead" not in scale["domain"] and "inefficiency" not in scale["domain"]
    assert scale["range"][-1] == base.UNATTRIBUTED_COMPONENT[2]
    rest = {r["layer_type"]: r["share"] for r in rows_with(spec, "component")
            if r["component"].startswith("overhead +")}  # fmt: skip
    assert rest == {"matmul": 0.2, "layernorm": 0.3}
    assert "overhead not measured for baseline" in " ".join(spec["title"]["subtitle"])


def test_a_measured_run_beside_a_migrated_one_shows_both_splits_in_one_legend():
    rows = [*unmeasured_rows(), *(r for r in decomposition_rows() if r["run"] == "candidate 1")]
    spec = charts.time_decomposition(rows)
    by_run = {}
    for r in rows_with(spec, "component"):
        by_run.setdefault(r["run"], set()).add(r["component"])
    assert "overhead" in by_run["candidate 1"] and "inefficiency" in by_run["candidate 1"]
    assert not {"overhead", "inefficiency"} & by_run["baseline"]
    assert spec["spec"]["encoding"]["color"]["scale"]["domain"] == [
        "compute", "memory stall", "inefficiency", "overhead",
        "overhead + inefficiency (not measured apart)",
    ]  # fmt: skip


def test_unattributed_is_derived_when_absent_and_a_half_measured_row_is_dropped():
    derived = {"run": "baseline", "layer_type": "matmul", "compute": 0.5, "memory_stall": 0.2}
    # no inefficiency: where the other 20% goes is not said
    half = {"run": "candidate 1", "layer_type": "matmul", "compute": 0.5, "memory_stall": 0.2,
            "overhead": 0.1}  # fmt: skip
    spec = charts.time_decomposition([derived, half])
    rows = rows_with(spec, "component")
    assert {r["run"] for r in rows} == {"baseline"}
    rest = next(r for r in rows if r["component"].startswith("overhead +"))
    assert rest["share"] == pytest.approx(0.3)
    assert "1 row with a missing share not shown" in spec["title"]["subtitle"][0]


def _cvd_lab(colour: str, kind: str) -> list[float]:
    """CIELAB of a colour as seen under a full colour-vision deficiency (Machado et al. 2009)."""
    matrices = {
        "normal": ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
        "protan": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
        "deutan": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                   (-0.011820, 0.042940, 0.968881)),
        "tritan": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602),
                   (0.004733, 0.691367, 0.303900)),
    }  # fmt: skip
    srgb = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in srgb]
    rgb = [min(1.0, max(0.0, sum(m * c for m, c in zip(row, lin, strict=True))))
           for row in matrices[kind]]  # fmt: skip
    xyz_rows = ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505))
    x, y, z = (sum(m * c for m, c in zip(row, rgb, strict=True)) / white
               for row, white in zip(xyz_rows, (0.95047, 1.0, 1.08883), strict=True))  # fmt: skip
    fx, fy, fz = (t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z))
    return [116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)]


@pytest.mark.parametrize("kind", ["normal", "protan", "deutan", "tritan"])
def test_the_new_time_components_stay_apart_under_colour_vision_deficiencies(kind):
    """Inefficiency, overhead and the not-measured-apart grey against every other segment:
    a CIELAB distance of at least 20 under each full deficiency (the existing pairs reach 15)."""
    every = [*base.COMPONENTS, base.UNATTRIBUTED_COMPONENT, base.COMMUNICATION_COMPONENT]
    new = {"inefficiency", "overhead", "unattributed"}
    for (k1, _, c1), (k2, _, c2) in itertools.combinations(every, 2):
        if {k1, k2} & new:
            a, b = _cvd_lab(c1, kind), _cvd_lab(c2, kind)
            distance = sum((p - q) ** 2 for p, q in zip(a, b, strict=True)) ** 0.5
            assert distance >= 20, (kind, k1, k2, distance)


def test_latency_thinning_keeps_at_most_max_samples_with_both_ends():
    rows = latency_rows()
    spec = charts.latency_distribution(rows)
    samples = rows_with(spec, "latency_ms")
    kept = [
        r["latency_ms"]
        for r in samples
        if r["run"] == "baseline" and r["workload"] == "matmul 4096" and "percentile" not in r
    ]
    raw = rows[0]["samples_s"]
    assert len(kept) == charts.MAX_SAMPLES
    assert min(kept) == min(raw) * 1e3
    assert max(kept) == max(raw) * 1e3
    short = [r for r in samples if r["workload"] == "softmax 8192" and "percentile" not in r]
    assert len(short) == 100  # 50 + 50: nothing thinned below the limit
    ticks = {r["percentile"] for r in rows_with(spec, "percentile")}
    assert ticks == {"p50", "p95", "p99"}


def test_latency_keeps_the_slowest_workloads_by_p50_of_any_run():
    rows = [
        _latency_row("baseline", "fast", 1e-5, 10),
        _latency_row("baseline", "medium", 1e-3, 10),
        _latency_row("candidate 1", "medium", 1e-4, 10),
        _latency_row("baseline", "slow in candidate only", 1e-5, 10),
        _latency_row("candidate 1", "slow in candidate only", 1e-2, 10),
    ]
    spec = charts.latency_distribution(rows, max_workloads=2)
    shown = {r["workload"] for r in rows_with(spec, "latency_ms")}
    assert shown == {"medium", "slow in candidate only"}
    assert "the 2 slowest of 3 workloads" in spec["title"]["subtitle"][0]


def test_forest_sorts_by_ratio_and_marks_one():
    spec = charts.forest(forest_rows())
    one, _intervals, dots = spec["layer"]
    assert values(spec, one) == [{"ratio": 1.0}]
    assert dots["encoding"]["y"]["sort"] == ["matmul 4096", "layernorm", "softmax 8192"]
    colour = dots["encoding"]["color"]["scale"]
    assert dict(zip(colour["domain"], colour["range"], strict=True)) == charts.VERDICT_COLOURS
    assert dots["encoding"]["x"]["scale"]["type"] == "log"


def test_forest_accepts_layer_types_and_rejects_unknown_verdicts():
    spec = charts.forest(forest_rows(), item="layer type")
    assert spec["title"]["text"] == "Median latency ratio per layer type, candidate / baseline"
    assert spec["layer"][2]["encoding"]["y"]["title"] is None  # long labels need the room
    bad = forest_rows()
    bad[0]["verdict"] = "better"
    with pytest.raises(ValueError, match="verdict"):
        charts.forest(bad)


def test_risk_map_places_unrated_and_spreads_shared_cells():
    spec = charts.risk_map(risk_rows())
    points = {r["description"]: r for r in rows_with(spec, "description")}
    drift, driver = points["bf16 drift"], points["driver upgrade"]
    assert (drift["likelihood"], drift["level"]) == (driver["likelihood"], driver["level"])
    assert drift["y"] != driver["y"]  # same cell, separated
    assert abs(drift["y"] - driver["y"]) < 1  # and still inside it
    unrated = points["unknown vendor"]
    assert (unrated["likelihood"], unrated["level"]) == ("unrated", "unrated")
    assert drift["owner_status"] == "owner named"
    assert driver["owner_status"] == "no owner"
    with pytest.raises(ValueError, match="critical"):
        charts.risk_map([{"description": "x", "level": "critical", "likelihood": "low"}])


def test_trade_view_says_not_available_instead_of_zero():
    spec = charts.trade_view(trade_rows())
    energy = next(p for p in spec["concat"] if p["title"].startswith("Energy"))
    bars, missing = energy["layer"]
    assert [r["candidate"] for r in values(spec, bars)] == ["baseline"]
    assert values(spec, missing) == [{"candidate": "candidate 1", "label": "not available"}]
    assert missing["mark"]["type"] == "text"
    titles = [p["title"] for p in spec["concat"]]
    assert titles[0].endswith("higher is better")
    assert all(t.endswith("lower is better") for t in titles[1:])
    assert ">not available<" in charts.to_svg(spec)


def test_to_svg_caches_by_content():
    spec = charts.mfu_by_layer(layer_rows())
    first = charts.to_svg(spec)
    assert charts.to_svg(copy.deepcopy(spec)) is first  # an equal spec hits the cache
    other = charts.stall_by_layer(layer_rows())
    second = charts.to_svg(other)
    assert second.startswith("<svg")
    assert second != first


def test_validate_rejects_an_invalid_mark():
    spec = charts.mfu_by_layer(layer_rows())
    spec["mark"] = "nonsense"
    with pytest.raises(ValueError, match="mark"):
        charts.validate(spec)


def test_vegalite_version_matches_altair_and_vl_convert():
    assert charts.VEGALITE_VERSION in vl_convert.get_vegalite_versions()
    assert alt.SCHEMA_VERSION.startswith(f"v{charts.VEGALITE_VERSION}.")


def test_javascript_bundle_defines_vega_embed_once():
    bundle = charts.javascript_bundle()
    assert "vegaEmbed" in bundle
    assert charts.javascript_bundle() is bundle


def test_no_data_notes_carry_the_reason_wrapped_to_the_plot():
    reason = "evidence/sweep.json: not used: " + "a very long reason " * 30
    spec = charts.latency_throughput([], [reason])
    lines = spec["title"]["subtitle"]
    assert all(len(line) <= charts.NOTE_CHARS for line in lines)
    assert " ".join(lines).startswith("evidence/sweep.json: not used: a very long reason")
    assert len(" ".join(lines)) <= charts.NOTE_MAX_CHARS


def test_heatmap_colour_diverges_around_one_and_greys_missing_ratios():
    rows = [*shape_rows(), {**shape_rows()[0], "seq": 256, "ratio": None, "verdict": ""}]
    spec = charts.shape_heatmap(rows)
    colour = spec["concat"][0]["layer"][0]["encoding"]["color"]
    # Widest ratio 0.6 -> 1 / 0.6 = 1.667 either side of 1 on a log scale.
    low, mid, high = colour["scale"]["domain"]
    assert (mid, high) == (1.0, pytest.approx(1 / 0.6)) and low == pytest.approx(0.6)
    assert colour["condition"]["value"] == charts.MISSING_CELL
    assert "1 grey cell" in " ".join(spec["title"]["subtitle"])


def test_quality_flags_results_over_tolerance():
    spec = quality_chart(quality_rows())
    points = rows_with(spec, "within")
    over = {(p["workload"], p["dtype"]) for p in points if p["within"] == "over tolerance"}
    assert over == {("gemm.ffn-up.b1s128", "fp16")}  # 5e-3 > 0.002; bf16 rows under 0.01
    rules = {r["dtype"]: r["rel_error"] for r in rows_with(spec, "label") if "dtype" in r}
    assert rules == {"bf16": 0.01, "fp16": 0.002}


def test_fit_matrix_orders_rows_and_columns_and_outlines_uncovered_time():
    spec = fit_chart(fit_rows())
    rect, _line1, _line2, outline = spec["layer"]
    # Rows by share: gemm 0.75, attention 0.15; unmapped last whatever its share.
    assert rect["encoding"]["y"]["sort"] == ["gemm", "attention", "unmapped"]
    # Decades in order of size, then the bands without an element count.
    # Decades as counts are written (1e4-1e5 elements: "10k-100k").
    assert rect["encoding"]["x"]["sort"] == ["10k-100k", "1M-10M", "shape not recorded",
                                             "other shapes", "not mapped"]  # fmt: skip
    cells = {(c["layer_type"], c["band"]): c for c in values(spec, rect)}
    gemm = cells[("gemm", "1e4-1e5 elements")]
    assert (gemm["line1"], gemm["line2"]) == ("50.0%", "80% cov.")  # 0.40 / 0.50
    assert cells[("gemm", "1e6-1e7 elements")]["line2"] == "100% cov."
    assert gemm["workloads_text"] == "gemm.ffn-up.b1s128"
    assert cells[("unmapped", "not mapped")]["why"] == "custom ops"  # the caller's note wins
    assert "record_shapes=True" in cells[("gemm", "shape not recorded")]["why"]
    # Outlined, drawn over the cells: every cell with uncovered time, none without.
    outlined = {(c["layer_type"], c["band"]) for c in values(spec, outline)}
    assert outlined == {("gemm", "1e4-1e5 elements"), ("gemm", "shape not recorded"),
                        ("attention", "other shapes"), ("unmapped", "not mapped")}  # fmt: skip
    assert outline["mark"]["stroke"] == charts.UNCOVERED_COLOUR == "#D55E00"
    assert outline["mark"]["filled"] is False
    title = spec["title"]
    assert title["text"] == ("Production fit: the suite covers 70.0% of production time "
                             "(rubric: at least 50%, met)")  # fmt: skip
    subtitle = " ".join(title["subtitle"])
    assert "layer-type coverage 90.0%" in subtitle and "within 4x" in subtitle
    assert "4 cells outlined in vermillion" in subtitle and "host operator self time" in subtitle


def test_fit_matrix_below_threshold_and_rounding_is_not_uncovered():
    rows = [{"layer_type": "gemm", "band": "1e4-1e5 elements", "numel_low": 10**4,
             "numel_high": 10**5, "share": 0.3, "covered_share": 0.1 + 0.2, "workloads": ["g"]},
            {"layer_type": "gemm", "band": "1e5-1e6 elements", "numel_low": 10**5,
             "numel_high": 10**6, "share": 0.7, "covered_share": 0.0, "workloads": []}]  # fmt: skip
    spec = charts.fit_matrix(rows, {**FIT_SUMMARY, "score": 0.3})
    assert spec["title"]["text"].endswith("(rubric: at least 50%, NOT met)")
    cells = {c["band"]: c for c in values(spec, spec["layer"][0])}
    # 0.1 + 0.2 = 0.30000000000000004 > 0.3: covered, not a sliver of uncovered time.
    assert not cells["1e4-1e5 elements"]["uncovered"]
    assert cells["1e5-1e6 elements"]["line2"] == "0% cov."
    no_threshold = charts.fit_matrix(rows, {**FIT_SUMMARY, "min_coverage": None})
    assert no_threshold["title"]["text"].endswith("(the rubric sets no threshold)")


def test_no_rows_stay_pending_between_charts():
    """Each chart's rows travel inside its spec; the module keeps none of them afterwards, so
    a site build of many decisions does not accumulate every dataset it drew."""
    from reviewkit.render.charts import base

    base._SPEC_MEMO.clear()
    for name, fn, build, _ in CASES:
        spec = fn(build())
        assert datasets(spec), name  # the rows are in the spec ...
        assert base.PENDING == {}, f"{name} left rows pending"  # ... and nowhere else


def test_the_in_memory_svg_cache_is_bounded(monkeypatch):
    from reviewkit.render.charts import convert

    monkeypatch.setattr(convert, "_SVG_CACHE", {})
    nowhere = __import__("pathlib").Path("/nonexistent")
    monkeypatch.setattr(convert, "chart_cache_dir", lambda: nowhere)
    monkeypatch.setattr(convert, "write_cache", lambda path, text: None)
    import vl_convert

    monkeypatch.setattr(vl_convert, "vegalite_to_svg", lambda spec, **kw: "<svg/>")
    for i in range(convert.SVG_MEMO_ENTRIES + 10):
        convert.to_svg({"i": i})
    assert len(convert._SVG_CACHE) == convert.SVG_MEMO_ENTRIES


def test_time_decomposition_adds_communication_only_for_a_multi_rank_row():
    one = charts.time_decomposition(decomposition_rows())
    assert {r["component"] for r in rows_with(one, "component")} == {
        "compute",
        "memory stall",
        "inefficiency",
        "overhead",
    }
    # a collective: 0% compute, 7.6% stall, 8% overhead, 60% inefficiency, 24.4% communication
    row = {"run": "candidate fp32", "layer_type": "collective", "compute": 0.0,
           "memory_stall": 0.076, "overhead": 0.08, "inefficiency": 0.6,
           "communication": 0.244}  # fmt: skip
    spec = charts.time_decomposition([*decomposition_rows(), row])
    shares = {r["component"]: r["share"] for r in rows_with(spec, "component")
              if r["layer_type"] == "collective"}  # fmt: skip
    assert shares == {"compute": 0.0, "memory stall": 0.076, "overhead": 0.08,
                      "inefficiency": 0.6, "communication": 0.244}  # fmt: skip
    assert sum(shares.values()) == pytest.approx(1.0)
    # recorded before overhead was measured: the grey rest is what the wire leaves
    old = {"run": "baseline fp32", "layer_type": "collective", "compute": 0.0,
           "memory_stall": 0.076, "overhead": None, "inefficiency": None,
           "communication": 0.244}  # fmt: skip
    spec = charts.time_decomposition([old])
    shares = {r["component"]: r["share"] for r in rows_with(spec, "component")}
    assert shares["overhead + inefficiency (not measured apart)"] == pytest.approx(0.68)
    assert shares["communication"] == 0.244 and "overhead" not in shares


def test_shape_heatmap_legend_shows_rounded_ratios():
    """A 85.27x slower cell: the legend's ends read 0.012 and 85, never 85.265690453."""
    rows = shape_rows()
    rows[-1]["ratio"] = 85.265690453
    svg = charts.to_svg(charts.shape_heatmap(rows))
    assert ">85<" in svg and ">0.012<" in svg
    assert not re.search(r">\d+\.\d{4,}<", svg)  # no label with four decimals or more


def test_stability_title_is_short_when_sensors_are_missing():
    """A VM with no clock or temperature sensor: the chart's subtitle says so in one line and
    the reasons (a paragraph each) stay out of it."""
    rows = soak_rows()
    rows[0]["throttling"] = {"status": "not available", "reason": "x" * 300}
    rows[0]["sensor_notes"] = ["clocks: not available: " + "y" * 300,
                               "temperatures: not available: " + "z" * 300]  # fmt: skip
    spec = charts.stability(rows)
    panel = spec["vconcat"][0]
    subtitle = " ".join(panel["title"]["subtitle"])
    assert "throttling: not available" in subtitle
    assert "sensors not available: the reasons are given beside the chart" in subtitle
    assert "xxx" not in subtitle and "yyy" not in subtitle and "zzz" not in subtitle
    assert len(panel["title"]["subtitle"]) <= 6  # one line each: verdict, trend, reason, ...
    assert len(subtitle) < 400


def test_control_characters_in_a_label_do_not_abort_the_process():
    """vl-convert panics (and aborts the interpreter) on control characters in SVG text; the
    risk map of a risk described as 'd\\x19\\x06\\x12\\x95' took the whole packet down."""
    rows = risk_rows()
    rows[0]["description"] = "d\x19\x06\x12\x95 driver upgrade"
    svg = charts.to_svg(charts.risk_map(rows))
    assert svg.startswith("<svg") and "driver upgrade" in svg
    assert "\x19" not in svg


def test_forest_names_the_margin_the_noise_floor_and_the_run_to_run_allowance():
    lines = charts.forest(forest_rows(), margin=0.05, noise_floor=0.3, run_to_run_sd=0.08)["title"][
        "subtitle"
    ]
    said = " ".join(lines)
    assert "shaded: the rubric's margin ±5% (within it: equivalent)" in said
    assert "measured noise floor ±30.0%, with a run-to-run allowance of 8% per run" in said
    # the note is 110 characters: on one line it ran off the A4 page, so it wraps
    assert len(lines) >= 2 and max(map(len, lines)) <= base.NOTE_CHARS
    paired = json.dumps(charts.forest(forest_rows(), margin=0.05, noise_floor=0.02))
    assert "run-to-run" not in paired  # the sides of one A/B carry none


def test_forest_says_where_the_run_to_run_figure_came_from():
    """A quiet device's 1.2% is said as 1.2%, not rounded to 1%, with its origin."""
    spec = charts.forest(forest_rows(), margin=0.05, noise_floor=0.03, run_to_run_sd=0.012,
                         allowance_from="measured for this device: 4 runs of 5 workloads, "
                         "2026-05-28")  # fmt: skip
    said = " ".join(spec["title"]["subtitle"]).replace("- ", "-")  # wrapped after a hyphen
    assert ("a run-to-run allowance of 1.2% per run (from: measured for this device: 4 runs of "
            "5 workloads, 2026-05-28)") in said  # fmt: skip


def test_forest_log_axis_ticks_do_not_crowd_over_several_decades():
    # Drawn: a CPU-to-GPU review's ratios printed "0.0020.003" on its axis before
    ratios = [0.001, 0.0025, 0.005, 0.03, 1.0]
    rows = [{"workload": f"w{i}", "ratio": r, "low": r * 0.8, "high": r * 1.2,
             "verdict": "faster"} for i, r in enumerate(ratios)]  # fmt: skip
    spec = charts.forest(rows, margin=0.05, noise_floor=0.01)
    # The axis: 0.0008 / 1.1 .. 1.2 x 1.1, log10(1.32 / 0.000727) = 3.26 decades over a plot
    # of 710 - 47 - 13 (two-letter labels) = 650 px, 199 px a decade. 1-2-3-5-7 would put
    # "0.005" and "0.007" 0.146 x 199 = 29 px apart where they need 5 x 6.2 + 10 = 41; 1-2-5
    # keeps them 0.301 x 199 = 60 px apart or more.
    assert spec["layer"][0]["encoding"]["x"]["axis"]["values"] == [
        0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]  # fmt: skip
    svg = charts.to_svg(spec)
    labels = re.findall(r'translate\(([\d.]+),[\d.]+\)"[^>]*>(0\.\d+|1)</text>', svg)
    xs = sorted(float(x) for x, _ in labels)
    assert len(xs) == 10 and min(b - a for a, b in itertools.pairwise(xs)) > 55


def test_built_specs_are_kept_on_disk_for_the_next_process(tmp_path, monkeypatch):
    """A warm packet's specs come from disk (altair's copies were 0.6-0.9 s of it): the same
    arguments give the same spec without building, and other builder code does not see it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(base, "SPEC_DISK_CACHE", True)
    base._SPEC_MEMO.clear()
    rows = forest_rows()
    built = charts.forest(rows, margin=0.05)
    base._SPEC_MEMO.clear()  # a new process: nothing in memory

    def no_building(*_):
        raise AssertionError("built again instead of read from disk")

    monkeypatch.setattr(base, "_build_releasing_rows", no_building)
    again = charts.forest(rows, margin=0.05)
    assert again == built and again is not built
    # changed arguments are built (and here refused), never served another chart's spec
    base._SPEC_MEMO.clear()
    with pytest.raises(AssertionError, match="built again"):
        charts.forest(rows, margin=0.1)
    # other builder code (its source hash) keys another folder: nothing is served from here
    base._SPEC_MEMO.clear()
    monkeypatch.setattr(base, "_builders_hash", lambda: "another-version")
    with pytest.raises(AssertionError, match="built again"):
        charts.forest(rows, margin=0.05)
    # a torn file is rebuilt, not trusted
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(base, "SPEC_DISK_CACHE", True)
    for path in (tmp_path / "reviewkit").rglob("spec/*/*.json"):
        path.write_text('{"torn":')
    base._SPEC_MEMO.clear()
    assert charts.forest(rows, margin=0.05) == built
    base._SPEC_MEMO.clear()
