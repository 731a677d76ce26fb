"""Charts that read on paper (issue 29, item 7): rooflines with only the ceilings their
workloads meet, named for their device; log-axis ticks that never collide; no raw floats,
Python reprs or backticks in any chart text; every label at 7 pt or more in the PDF; and a
marker on every "no data" chart."""

from __future__ import annotations

import itertools
import json
import math
import random
import re

import altair as alt
import pytest
import vl_convert
from chartspecs import datasets

from reviewkit.render import charts
from reviewkit.render.charts import axes, base

TIMES = base.TIMES  # the multiplication sign of 2.54 x 10^-5

# --- the roofline ------------------------------------------------------------------------------

# A CPU-like profile: three peaks, three cache levels and main memory (which the workloads call
# "dram"). Two workloads plotted, both bf16: one in the LLC, one streaming from DRAM.
PEAKS = {"fp32": 200e9, "bf16": 400e9, "fp16": 50e9}
LEVELS = [
    {"level": "l1", "peak_bytes_per_s": 300e9},
    {"level": "l2", "peak_bytes_per_s": 200e9},
    {"level": "llc", "peak_bytes_per_s": 180e9},
]


def two_workload_run(**extra) -> dict:
    return {
        "label": "candidate",
        "peak_flops_per_s": dict(PEAKS),
        "peak_bytes_per_s": 40e9,
        "memory_levels": [dict(lv) for lv in LEVELS],
        "workloads": [
            # In the LLC at 0.1 FLOP/byte: 180e9 x 0.1 = 18e9 < the bf16 peak, the LLC's slope
            # is its roof.
            {
                "id": "norm",
                "layer_type": "norm",
                "dtype": "bf16",
                "arithmetic_intensity": 0.1,
                "achieved_flops_per_s": 15e9,
                "memory_level": "llc",
            },
            # From DRAM at 100 FLOP/byte: 40e9 x 100 = 4e12 > 400e9, compute-bound: DRAM's
            # slope is not its roof.
            {
                "id": "gemm",
                "layer_type": "gemm",
                "dtype": "bf16",
                "arithmetic_intensity": 100.0,
                "achieved_flops_per_s": 300e9,
                "memory_level": "dram",
            },
        ],
        **extra,
    }


def ceilings(spec: dict, root: dict | None = None) -> dict[str, list[dict]]:
    """The ceiling rows of `spec` (a panel of `root`) by line name, in the order drawn."""
    out: dict[str, list[dict]] = {}
    for rows in datasets(spec, root):
        for r in rows:
            if "ceiling" in r:
                out.setdefault(r["ceiling"], []).append(r)
    return out


def layer_with(spec: dict, key: str) -> dict:
    """The first layer whose encoding has `key`."""
    return next(layer for layer in spec["layer"] if key in layer["encoding"])


def test_roofline_draws_exactly_the_ceilings_its_workloads_meet_and_names_its_device():
    spec = charts.roofline([two_workload_run(device="AMD EPYC")])
    lines = ceilings(spec)
    # The bf16 peak (the one dtype plotted; fp32 and fp16 are in the profile, not the chart)
    # and the LLC slope (the norm's roof). L1 and L2 hold no workload; DRAM holds the GEMM,
    # which is compute-bound: none of the three is drawn, and the note names them.
    assert list(lines) == ["bf16 peak 400 GFLOP/s", "LLC 180 GB/s"]
    assert [len(rows) for rows in lines.values()] == [2, 2]  # two ends a straight line
    assert spec["title"]["text"] == (
        "Roofline of the AMD EPYC: achieved throughput against arithmetic intensity"
    )
    assert spec["title"]["subtitle"] == [
        "memory levels that bound no plotted workload not drawn: L1 300 GB/s, L2 200 GB/s, "
        "DRAM 40 GB/s"
    ]
    # Intensities 0.1 and 100 and the ridge 400 / 180 = 2.22, in whole decades a factor of 2
    # clear: 0.05 -> 0.01, 200 -> 1000. The LLC slope: from 0.01 (180e9 x 0.01 = 1.8 GFLOP/s)
    # to where it meets the peak, 400 / 180 = 2.22 FLOP/byte; the peak from there to 1000.
    llc, peak = lines["LLC 180 GB/s"], lines["bf16 peak 400 GFLOP/s"]
    assert [r["arithmetic_intensity"] for r in llc] == pytest.approx([0.01, 400 / 180])
    assert [r["gflops_per_s"] for r in llc] == pytest.approx([1.8, 400.0])
    assert [r["arithmetic_intensity"] for r in peak] == pytest.approx([400 / 180, 1000.0])
    # Each line its own colour and its own dash, in one legend.
    line = layer_with(spec, "strokeDash")["encoding"]
    assert line["color"]["scale"]["domain"] == line["strokeDash"]["scale"]["domain"] == list(lines)
    colours, dashes = line["color"]["scale"]["range"], line["strokeDash"]["scale"]["range"]
    assert len(set(colours)) == 2 and len({tuple(d) for d in dashes}) == 2
    assert line["color"]["legend"]["title"] == "ceiling"


def test_roofline_log_axes_tick_at_powers_of_ten_with_short_labels():
    spec = charts.roofline([two_workload_run(device="AMD EPYC")])
    encoding = layer_with(spec, "strokeDash")["encoding"]
    # x: 0.01 .. 1000 (above). y: rates 15 and 300 GFLOP/s and the 400 GFLOP/s peak, a factor
    # of 2 clear, 7.5 .. 800, the top moved out to 1000 (within 3x of it): 10, 100, 1000.
    assert encoding["x"]["axis"]["values"] == [0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]
    assert encoding["y"]["scale"]["domain"] == [7.5, 1000.0]
    assert encoding["y"]["axis"]["values"] == [10.0, 100.0, 1000.0]
    svg = charts.to_svg(spec)
    x_labels = re.findall(r'translate\(([\d.]+),\d+(?:\.\d+)?\)"[^>]*>([^<]+)</text>', svg)
    ticks = [
        (float(x), text) for x, text in x_labels if text in ("0.01", "0.1", "1", "10", "100", "1k")
    ]
    # Today's Vega ticks printed "0.010.02": here six labels, 80 px apart (400 px, 5 decades).
    assert [t for _, t in ticks][-6:] == ["0.01", "0.1", "1", "10", "100", "1k"]
    xs = [x for x, _ in ticks][-6:]
    assert min(b - a for a, b in itertools.pairwise(xs)) == pytest.approx(80, abs=1)


def test_roofline_draws_a_panel_per_device_each_with_its_own_ceilings():
    cpu = {**two_workload_run(device="AMD EPYC"), "label": "baseline"}
    gpu = {
        **two_workload_run(device="NVIDIA H200"),
        "peak_flops_per_s": {"bf16": 989e12},
        "peak_bytes_per_s": 4.8e12,
        "memory_levels": [],
    }
    spec = charts.roofline([cpu, gpu])
    assert spec["title"]["text"].startswith("Rooflines, one per device")
    first, second = spec["vconcat"]
    assert first["title"]["text"] == "AMD EPYC: baseline"
    assert second["title"]["text"] == "NVIDIA H200: candidate"
    # The GPU's profile lists no cache level: both workloads are in main memory, under its
    # slope (4.8e12 x 0.1 and x 100 = 4.8e14, both under 989e12). They name it "llc" and
    # "dram", two names for one level: "main memory".
    assert list(ceilings(second, spec)) == ["bf16 peak 989 TFLOP/s", "main memory 4.8 TB/s"]
    # Without names, runs with one profile share a panel: one device, said as such.
    unnamed = charts.roofline(
        [{**cpu, "device": None}, {**cpu, "device": None, "label": "candidate"}]
    )
    assert "vconcat" not in unnamed and unnamed["title"]["text"].startswith("Roofline:")


def test_a_roofline_with_nothing_plottable_is_a_no_data_chart():
    run = two_workload_run()
    for w in run["workloads"]:
        w["achieved_flops_per_s"] = 0.0
    spec = charts.roofline([run])
    assert spec["usermeta"][charts.NO_DATA_KEY] is True
    assert spec["usermeta"]["reason"].startswith("2 workloads with zero, missing or infinite")


# --- ticks -----------------------------------------------------------------------------------


def test_log_ticks_by_hand():
    # 0.0008 .. 1.3 over 400 px: 3.21 decades, 125 px a decade. 1-2-3-5-7 puts "0.005" and
    # "0.007" 0.146 x 125 = 18 px apart and 1-2-5 "0.001" and "0.002" 0.301 x 125 = 38 px,
    # both under the 5 x 6.2 + 10 = 41 px two such labels need; 1-3 keeps 60 px or more.
    assert axes.log_ticks(0.0008, 1.3, 400) == [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0]
    # Under a decade: evenly spaced, 0.8 .. 1.25 in steps of 0.05 (1.2 to 1.25 is 0.0177 of
    # 0.194 decades, 36 px of 400; "1.25" needs 4 x 6.2 + 10 = 35).
    assert axes.log_ticks(0.8, 1.25, 400) == [0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2, 1.25]
    # Powers of ten only, and every third where 16 decades share 300 px (56 px apart).
    assert axes.log_ticks(1e-8, 1e8, 300, decades_only=True) == [1e-6, 1e-3, 1.0, 1e3, 1e6]
    # Fewer than two powers of ten inside: the sparsest of the other sets that has two.
    assert axes.log_ticks(25, 900, 300, horizontal=False, decades_only=True) == [30, 100, 300]


@pytest.mark.parametrize("seed", range(40))
def test_log_ticks_stay_inside_and_never_collide(seed):
    rnd = random.Random(seed)
    low = 10 ** rnd.uniform(-9, 6)
    high = low * 10 ** rnd.uniform(0.05, 14)
    length = rnd.uniform(150, 700)
    for horizontal, decades in itertools.product((True, False), (True, False)):
        ticks = axes.log_ticks(low, high, length, horizontal=horizontal, decades_only=decades)
        assert ticks and all(low <= t <= high for t in ticks)
        assert ticks == sorted(set(ticks))
        if len(ticks) >= 2:
            assert axes._fits(ticks, low, high, length, horizontal)
        exponents = [math.log10(t) for t in ticks]
        if (
            decades
            and sum(1 for e in range(math.ceil(math.log10(low)), math.floor(math.log10(high)) + 1))
            >= 2
        ):
            assert all(e == pytest.approx(round(e)) for e in exponents)  # powers of ten


def test_tick_labels_read_as_numbers_and_vega_draws_them_the_same():
    values = [1e-7, 0.001, 0.01, 0.3, 1.0, 1.5, 10.0, 100.0, 1e3, 1e4, 1.5e4, 1e6, 1e9]
    assert [axes.tick_label(v) for v in values] == [
        "0.0000001",
        "0.001",
        "0.01",
        "0.3",
        "1",
        "1.5",
        "10",
        "100",
        "1k",
        "10k",
        "15k",
        "1M",
        "1G",
    ]
    chart = (
        alt.Chart(alt.Data(values=[{"v": 1e-7}, {"v": 1e9}]))
        .mark_point()
        .encode(
            x=alt.X(
                "v:Q",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(values=values, labelExpr=axes.LABEL_EXPR, labelOverlap=False),
            )
        )
        .properties(width=2000)
    )
    svg = vl_convert.vegalite_to_svg(chart.to_dict())
    drawn = re.findall(r">([^<>]+)</text>", svg)
    assert [d for d in drawn if d != "v"] == [axes.tick_label(v) for v in values]


# --- text --------------------------------------------------------------------------------------

RAW = re.compile(r"\d[eE][-+]?\d|\[\s*'|'\s*\]|`|\bnan\b|\bNone\b|\binf\b")
NOT_TEXT = {
    *("field", "type", "scheme", "labelExpr", "test", "format", "name", "sort", "domain"),
    *("range", "values", "color", "fill", "stroke", "strokeDash", "shape", "value"),
}


def shown_text(spec: dict) -> list[str]:
    """Every text a chart shows: titles and subtitles, axis, legend and header titles, and the
    data fields an encoding draws as text, as a category or in a tooltip."""
    texts, fields = [], set()

    def walk(node, key=""):
        if isinstance(node, dict):
            encoding = node.get("encoding")
            if isinstance(encoding, dict):
                for channel in encoding.values():
                    for e in channel if isinstance(channel, list) else [channel]:
                        if isinstance(e, dict) and e.get("type") in ("nominal", "ordinal"):
                            fields.add(e.get("field"))
            for k, v in node.items():
                if k not in NOT_TEXT and k not in ("datasets", "data", "usermeta"):
                    walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and not node.startswith("#"):
            texts.append(node)

    walk(spec)
    for rows in datasets(spec):
        texts += [str(r[f]) for r in rows for f in fields if isinstance(r.get(f), str)]
    return texts


def test_no_chart_text_holds_raw_floats_python_reprs_or_backticks():
    cell = {
        "workload": "gemm.x",
        "platform": "H200 · bf16",
        "status": "measured",
        "mfu": 0.3,
        "p99_s": 2.5e-5,
        "sla": "met",
        "throughput_calls_per_s": 12351.0,
        "batch": 4,
        "flops_per_joule": 2.5e11,
        "avg_watts": 300.0,
        "peak_source": "datasheet",
    }
    quality = [
        {
            "workload": "gemm.x",
            "dtype": "bf16",
            "rel_error": 4.6e-6,
            "max_abs_error": 3e-7,
            "kl_divergence": 4.6e-6,
            "top1_agreement": 0.99,
        }
    ]
    specs = [
        # 12,351 calls/s printed "1.235e+04 calls/s" in the tooltip; p99 "0.025 ms"
        charts.platform_matrix([cell], ["H200 · bf16"]),
        # a tolerance of 1e-5 labelled "bf16 tolerance 1e-05", a note's "4.6e-06 nats"
        charts.quality_drift(quality, {"bf16": 1e-5}, ["gemm.x bf16: KL 4.6e-06 nats"]),
        # the packet's notes: markdown code and a repr of a list of dtypes
        charts.latency_throughput(
            [],
            ["run `reviewkit sweep --out s.json` and cite it", "measured dtypes ['bf16', 'fp16']"],
        ),
        charts.forest(
            [{"workload": "w", "ratio": 2.54e-05, "low": 2e-5, "high": 3e-5, "verdict": "faster"}]
        ),
    ]
    for spec in specs:
        bad = [t for t in shown_text(spec) if RAW.search(t)]
        assert bad == [], bad
    notes = specs[2]["title"]["subtitle"]
    assert notes == ["run “reviewkit sweep --out s.json” and cite it", "measured dtypes bf16, fp16"]
    assert f"gemm.x bf16: KL 4.6{TIMES}10⁻⁶ nats" in specs[1]["title"]["subtitle"]
    tooltip = {r["throughput_text"] for r in datasets(specs[0])[0]}
    assert tooltip == {"12,350 calls/s at batch 4"}  # four significant digits
    assert {r["line2"] for r in datasets(specs[0])[0]} == {"p99 25 µs"}


def test_no_tooltip_or_legend_formats_a_number_in_exponent_form():
    """d3's "e" and "g" formats print 4.600e-6 and 6.4e+3: every format a chart asks Vega for
    is one that writes numbers out ("r", "f", "%")."""
    from test_charts import CASES

    for _, fn, build, _ in CASES:
        formats = re.findall(r'"format": "([^"]*)"', json.dumps(fn(build())))
        assert not [f for f in formats if f.rstrip("~").endswith(("e", "g"))], fn.__name__


def test_the_heatmap_legend_writes_its_ends_out():
    rows = [
        {
            "panel": "gemm · x",
            "workload": f"gemm.x.b{b}",
            "seq": 128,
            "batch": b,
            "ratio": r,
            "verdict": "faster",
            "mfu": 0.1,
            "p99_ms": 1.0,
        }
        for b, r in ((1, 1 / 6400), (4, 0.5))
    ]
    svg = charts.to_svg(charts.shape_heatmap(rows))
    # ends 1/6400 = 0.00015625 -> 0.00016 and 6,400 -> "6.4k" (today "6.4e+3")
    assert ">0.00016<" in svg and ">6.4k<" in svg
    assert not re.search(r">[^<]*\de[-+]\d[^<]*<", svg)


def test_numbers_are_written_out():
    assert base.fmt_readable(12351.0) == "12,350"  # four significant digits, never "1.235e+04"
    assert base.fmt_readable(0.0736) == "0.0736"
    assert base.fmt_readable(2.54e-05) == f"2.54{TIMES}10⁻⁵"
    assert base.fmt_readable(1e-7) == f"1{TIMES}10⁻⁷"
    assert base.duration_text(6.25e-5) == "62.5 µs"
    assert base.duration_text(0.31) == "310 ms"
    assert base.duration_text(2.5) == "2.5 s"


# --- print size --------------------------------------------------------------------------------


def test_the_print_size_arithmetic():
    """The PDF lays a chart at the text column's width, 504.6 pt (A4, 16 mm margins), up to
    637.8 pt tall (225 mm): a chart W x H px prints at min(504.6 / W, 637.8 / H) pt a px."""
    assert pytest.approx((210 - 2 * 16) * 72 / 25.4, abs=0.05) == base.PRINT_WIDTH_PT
    assert pytest.approx(225 * 72 / 25.4, abs=0.05) == base.PRINT_HEIGHT_PT
    # The widest and tallest a chart may be: 10 px x 504.6 / 710 = 7.107 pt, x 637.8 / 900 =
    # 7.087 pt.
    assert base.LABEL_PX * base.print_scale(base.MAX_CHART_WIDTH_PX, 1) == pytest.approx(
        7.107, abs=1e-3
    )
    assert base.LABEL_PX * base.print_scale(1, base.MAX_CHART_HEIGHT_PX) == pytest.approx(
        7.087, abs=1e-3
    )
    # Today's forest of workloads, 885 x 792 px with 10 px labels: 5.70 pt.
    assert 10 * base.print_scale(885, 792) == pytest.approx(5.70, abs=0.01)
    # The landscape fit matrix: 10 x 751.2 / 1060 = 7.09 pt.
    assert base.LABEL_PX * base.print_scale(base.MAX_WIDE_WIDTH_PX, 1, wide=True) >= 7.0


def printed_pt(svg: str, wide: bool = False) -> float:
    """The size the smallest text of a chart's SVG prints at, in points."""
    w, h = map(float, re.search(r'<svg[^>]*width="([\d.]+)" height="([\d.]+)"', svg).groups())
    smallest = min(float(s) for s in re.findall(r'font-size="([\d.]+)px"', svg))
    return smallest * base.print_scale(w, h, wide=wide)


def long_id(i: int) -> str:
    return f"attention.gpt-2-small-sdpa-causal.b{i}s512.fp16"  # 45 characters, as the samples


def big_inputs() -> list[tuple[str, dict]]:
    """The largest each chart gets in the sample packets, or past it."""
    ids = [long_id(i) for i in range(48)]
    forest_rows = [
        {
            "workload": w,
            "ratio": 0.01 * (i + 1),
            "low": 0.008 * (i + 1),
            "high": 0.012 * (i + 1),
            "verdict": "faster",
        }
        for i, w in enumerate(ids)
    ]
    platforms = [f"{d} · {t}" for d in ("AMD EPYC", "H200") for t in ("fp32", "bf16", "fp16")]
    cells = [
        {
            "workload": w,
            "platform": p,
            "status": "measured",
            "mfu": 0.42,
            "p99_s": 6.25e-5,
            "sla": "missed",
            "peak_source": "datasheet",
        }
        for w in ids[:20]
        for p in platforms
    ]
    layers = [
        "attention",
        "block",
        "conv",
        "data-movement",
        "elementwise",
        "embedding",
        "gemm",
        "model",
        "norm",
        "reduction",
        "softmax",
    ]
    runs = [f"{r} {d}" for r in ("baseline", "candidate") for d in ("fp32", "bf16", "fp16")]
    decomposition = [
        {
            "run": r,
            "layer_type": t,
            "compute": 0.3,
            "memory_stall": 0.2,
            "inefficiency": 0.4,
            "overhead": 0.1,
        }
        for t in layers
        for r in runs
    ]
    layer_rows = [
        {"run": r, "layer_type": t, "mfu": 0.5, "memory_stall_fraction": 0.2}
        for t in layers
        for r in runs
    ]
    bands = [f"1e{k}-1e{k + 1} elements" for k in range(10)]
    fit_rows = [
        {
            "layer_type": t,
            "band": b,
            "numel_low": 10.0**k,
            "numel_high": 10.0 ** (k + 1),
            "share": 0.005,
            "covered_share": 0.0,
            "workloads": [],
        }
        for t in [*layers, "unmapped"]
        for k, b in enumerate(bands)
    ]
    fit_rows += [
        {
            "layer_type": "gemm",
            "band": b,
            "numel_low": None,
            "numel_high": None,
            "share": 0.01,
            "covered_share": 0.0,
            "workloads": [],
        }
        for b in ("empty tensor", "shape not recorded", "other shapes", "not mapped")
    ]
    heat = [
        {
            "panel": f"attention · gpt-2-small-sdpa-causal-{i} · fp16",
            "workload": f"w{i}.{s}.{b}",
            "seq": s,
            "batch": b,
            "ratio": 0.5,
            "verdict": "faster",
            "mfu": 0.41,
            "p99_ms": 0.0736,
        }
        for i in range(33)
        for s, b in ([(128, 1)] if i >= 12 else [(128, 1), (512, 1), (128, 4), (512, 4)])
    ]
    latency = [
        {
            "run": r,
            "workload": w,
            "samples_s": [1e-4 * (i + 1) * (1 + j / 100) for j in range(100)],
            "p50_s": 1e-4 * (i + 1),
            "p95_s": 1.1e-4 * (i + 1),
            "p99_s": 1.2e-4 * (i + 1),
        }
        for i, w in enumerate(ids[:12])
        for r in runs[:3]
    ]
    quality = [
        {"workload": w, "dtype": "bf16", "rel_error": 1e-3 * (1 + i / 40)}
        for i, w in enumerate(ids[:40])
    ]
    cpu = {**two_workload_run(device="AMD EPYC"), "label": "baseline"}
    gpu = {**two_workload_run(device="NVIDIA H200"), "peak_flops_per_s": {"bf16": 989e12}}
    return [
        (
            "forest",
            charts.forest(
                forest_rows, margin=0.05, noise_floor=0.3, run_to_run_sd=0.08, part=(1, 48, 96)
            ),
        ),
        ("platform_matrix", charts.platform_matrix(cells, platforms, ["a note"] * 2)),
        ("time_decomposition", charts.time_decomposition(decomposition)),
        ("mfu_by_layer", charts.mfu_by_layer(layer_rows)),
        (
            "fit_matrix",
            charts.fit_matrix(
                fit_rows,
                {
                    "score": 0.05,
                    "min_coverage": 0.5,
                    "layer_coverage": 0.3,
                    "time_basis": "device",
                    "shape_range_factor": 4.0,
                },
            ),
        ),
        ("shape_heatmap", charts.shape_heatmap(heat)),
        ("latency_distribution", charts.latency_distribution(latency)),
        ("quality_drift", charts.quality_drift(quality, {"bf16": 0.01})),
        ("roofline", charts.roofline([cpu, gpu])),
    ]


@pytest.mark.parametrize("name,spec", big_inputs(), ids=[n for n, _ in big_inputs()])
def test_the_largest_charts_print_their_smallest_text_at_7_pt_or_more(name, spec):
    assert printed_pt(charts.to_svg(spec), wide=name == "fit_matrix") >= base.MIN_PRINT_PT


def test_every_chart_kind_prints_its_smallest_text_at_7_pt_or_more():
    from test_charts import CASES

    for name, fn, build, _ in CASES:
        pt = printed_pt(charts.to_svg(fn(build())), wide=name == "fit_matrix")
        assert pt >= base.MIN_PRINT_PT, (name, pt)


def test_the_heatmap_draws_as_many_panels_as_a_page_holds_several_shapes_first():
    spec = dict(big_inputs())["shape_heatmap"]
    panels = [p["title"]["text"] for p in spec["concat"]]
    # Two sequence lengths a panel, 2 x 76 + 50 + 14 = 216 px: three a row in 710 - 20 px.
    # Two batches, 2 x 40 + 60 + 14 = 154 px a row of panels, in 900 - 120 - 15 x 3 = 735 px:
    # four rows. Twelve panels, the twelve with four shapes.
    assert len(panels) == 12
    assert all(p.split(" · ")[1].rsplit("-", 1)[1] in {str(i) for i in range(12)} for p in panels)
    said = " ".join(spec["title"]["subtitle"])
    assert "21 panels of a single shape not drawn" in said
    # Each panel draws its own rows, on its own axes.
    for panel in spec["concat"]:
        rows = spec["datasets"][panel["data"]["name"]]
        assert {r["panel"] for r in rows} == {panel["title"]["text"]}
        assert panel["layer"][0]["encoding"]["x"]["sort"] == [128, 512]


# --- no data -----------------------------------------------------------------------------------


def test_every_empty_chart_carries_the_no_data_marker_and_its_reason():
    from test_charts import CASES

    for name, fn, build, _ in CASES:
        empty, full = fn([]), fn(build())
        assert empty["usermeta"][charts.NO_DATA_KEY] is True, name
        assert isinstance(empty["usermeta"]["reason"], str) and empty["usermeta"]["reason"]
        assert "usermeta" not in full, name
    spec = charts.latency_throughput(
        [], ["evidence/sweep.json: not used: not a `reviewkit sweep` result"]
    )
    assert spec["usermeta"] == {
        charts.NO_DATA_KEY: True,
        "title": "Latency against throughput (server scenario, Poisson arrivals)",
        "reason": "evidence/sweep.json: not used: not a “reviewkit sweep” result",
    }
    # Rows, none drawable: no data too, with the reason the rows gave.
    forest = charts.forest([{"workload": "w", "ratio": None, "verdict": "inconclusive"}])
    assert forest["usermeta"]["reason"] == "1 workload without a positive ratio not shown"


def test_a_long_device_label_keeps_the_roofline_within_the_print_width():
    """A fingerprint label beside the title's words set the chart 819 px wide (6.4 pt text on
    A4); the title breaks into two lines instead and the chart stays within 710 px."""
    import re

    label = "AMD EPYC · Zen 4 · AVX-512 BF16 · 2 cores"
    spec = charts.roofline([two_workload_run(device=label)])
    lines = [f"Roofline of the {label}:", "achieved throughput against arithmetic intensity"]
    assert spec["title"]["text"] == lines
    width = float(re.search(r'<svg[^>]*\bwidth="([0-9.]+)"', charts.to_svg(spec)).group(1))
    assert width <= 710
