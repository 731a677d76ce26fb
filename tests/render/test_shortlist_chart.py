"""The platform trade curve: valid and offline, its data the candidates' own numbers with their
intervals, and a platform without a priced latency listed in words, never drawn."""

from __future__ import annotations

import json

from chartspecs import datasets

from reviewkit.render import charts

FONT = "DejaVu Sans"


def rows() -> list[dict]:
    return [
        {"platform": "mi300x", "status": "shortlisted", "rank": 1, "tp": 1,
         "latency_s": 1.5, "latency_low_s": 0.9, "latency_high_s": 4.0,
         "decode_tokens_per_s": 350.0, "energy_j": 2.6, "energy_low_j": 1.0,
         "energy_high_j": 12.0, "risk": 1.25},
        {"platform": "b200", "status": "misses the SLA", "rank": 2, "tp": 2,
         "latency_s": 3.3, "latency_low_s": 1.0, "latency_high_s": 27.0,
         "decode_tokens_per_s": 360.0, "energy_j": None, "energy_low_j": None,
         "energy_high_j": None, "risk": 1.75},
        {"platform": "mi355x", "status": "not available", "rank": 3, "tp": None,
         "latency_s": None, "latency_low_s": None, "latency_high_s": None,
         "decode_tokens_per_s": None, "energy_j": None, "energy_low_j": None,
         "energy_high_j": None, "risk": 0.0},
    ]  # fmt: skip


def test_the_trade_curve_is_valid_offline_and_draws_the_candidates_numbers():
    spec = charts.trade_curve(rows(), 2.0)
    charts.validate(spec)
    text = json.dumps(spec, allow_nan=False)
    assert '"url"' not in text and spec["config"]["font"] == FONT
    drawn = [r for values in datasets(spec) for r in values if "platform" in r]
    by = {r["platform"]: r for r in drawn}
    # the two priced platforms, with their intervals; mi355x (no latency) is not drawn
    assert set(by) == {"mi300x", "b200"}
    assert (by["mi300x"]["latency_low_s"], by["mi300x"]["latency_high_s"]) == (0.9, 4.0)
    assert (by["mi300x"]["energy_low_j"], by["mi300x"]["energy_high_j"]) == (1.0, 12.0)
    # b200 has no energy figure: said in words, never drawn as 0 J
    assert by["b200"]["energy_j"] is None
    assert by["b200"]["energy_text"] == "not available (no TDP)"
    # the SLA is a rule at 2 s (its one row drawn by the rule and by its label)
    sla = [r for values in datasets(spec) for r in values if "sla_s" in r]
    assert sla and all(r == {"sla_s": 2.0, "text": "SLA 2 s"} for r in sla)
    subtitle = " ".join(spec["title"]["subtitle"])
    assert "mi355x: not available" in subtitle and "not a p99 under load" in subtitle
    svg = charts.to_svg(spec)
    assert svg.startswith("<svg") and ">mi300x<" in svg and ">SLA 2 s<" in svg


def test_nothing_priced_is_a_no_data_chart_that_says_why():
    spec = charts.trade_curve(rows()[2:], 2.0)
    charts.validate(spec)
    meta = spec["usermeta"]
    assert meta["reviewkit_no_data"] is True and "mi355x: not available" in meta["reason"]


def test_fourteen_platforms_print_at_7_pt_or_more():
    import re

    from reviewkit.render.charts import base

    many = []
    for i in range(14):  # the platform table's accelerators, with the longest key
        r = dict(rows()[0], platform=f"a100-sxm4-80gb-{i}", rank=i + 1)
        many.append(r)
    svg = charts.to_svg(charts.trade_curve(many, 2.0))
    w, h = map(float, re.search(r'<svg[^>]*width="([\d.]+)" height="([\d.]+)"', svg).groups())
    smallest = min(float(s) for s in re.findall(r'font-size="([\d.]+)px"', svg))
    # the chart is laid at the text column's width: at most 710 px keeps 10 px text at 7 pt
    assert w <= base.MAX_CHART_WIDTH_PX and h <= base.MAX_CHART_HEIGHT_PX
    assert smallest * base.print_scale(w, h) >= base.MIN_PRINT_PT


def test_a_name_that_would_cover_a_better_ranked_one_is_left_to_the_panels():
    # mi300x (rank 1) at 350 tokens/s and 1.5 s; a platform at 351 tokens/s and 1.51 s lands on
    # the same pixels: its name would print over mi300x's, so only mi300x is named there. One a
    # decade away in throughput (35 tokens/s) is far enough to keep its own.
    near = dict(rows()[0], platform="near", rank=2, decode_tokens_per_s=351.0, latency_s=1.51)
    far = dict(rows()[0], platform="far", rank=3, decode_tokens_per_s=35.0, latency_s=1.5)
    spec = charts.trade_curve([rows()[0], near, far], 2.0)
    labels = {r["platform"]: r["label"] for values in datasets(spec) for r in values
              if "label" in r}  # fmt: skip
    assert labels == {"mi300x": "mi300x", "near": "", "far": "far"}
