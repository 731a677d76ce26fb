"""Vega-Lite chart specs (via altair) for packets and the site, and their conversion to SVG."""

from reviewkit.render.charts.base import (
    FONT,
    MAX_SAMPLES,
    MUTED_COLOUR,
    NO_DATA_KEY,
    NOTE_CHARS,
    NOTE_MAX_CHARS,
    VERDICT_COLOURS,
    WIDTH,
)
from reviewkit.render.charts.communication import collective_times, rank_skew
from reviewkit.render.charts.comparison import (
    MAX_PLATFORM_ROWS,
    MISSING_CELL,
    forest,
    platform_matrix,
    trade_view,
)
from reviewkit.render.charts.convert import VEGALITE_VERSION, javascript_bundle, svg_to_pdf, to_svg
from reviewkit.render.charts.fit import TIME_BASIS_WORDS, UNCOVERED_COLOUR, fit_matrix
from reviewkit.render.charts.heatmap import shape_heatmap
from reviewkit.render.charts.production import (
    latency_throughput,
    perf_per_watt,
    quality_drift,
    stability,
)
from reviewkit.render.charts.risks import risk_map
from reviewkit.render.charts.roofline import roofline
from reviewkit.render.charts.runs import (
    latency_distribution,
    mfu_by_layer,
    stall_by_layer,
    time_decomposition,
)
from reviewkit.render.charts.schema import validate
from reviewkit.render.charts.shortlist import trade_curve
from reviewkit.render.charts.trace_change import trace_change
from reviewkit.render.charts.trends import trend

__all__ = [
    "FONT",
    "MAX_PLATFORM_ROWS",
    "MAX_SAMPLES",
    "MISSING_CELL",
    "MUTED_COLOUR",
    "NOTE_CHARS",
    "NOTE_MAX_CHARS",
    "NO_DATA_KEY",
    "TIME_BASIS_WORDS",
    "UNCOVERED_COLOUR",
    "VEGALITE_VERSION",
    "VERDICT_COLOURS",
    "WIDTH",
    "collective_times",
    "fit_matrix",
    "forest",
    "javascript_bundle",
    "latency_distribution",
    "latency_throughput",
    "mfu_by_layer",
    "perf_per_watt",
    "platform_matrix",
    "quality_drift",
    "rank_skew",
    "risk_map",
    "roofline",
    "shape_heatmap",
    "stability",
    "stall_by_layer",
    "svg_to_pdf",
    "time_decomposition",
    "to_svg",
    "trace_change",
    "trade_curve",
    "trade_view",
    "trend",
    "validate",
]
