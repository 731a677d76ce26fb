"""The charts' shared look and plumbing: fonts, colours, sizes, inline datasets, memo, no-data."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Iterable

from reviewkit.common.format import TIMES as READABLE_TIMES
from reviewkit.common.format import readable as fmt_readable
from reviewkit.common.numbers import finite_number
from reviewkit.render.charts.lazy import import_lazily

# altair costs 0.2-0.3 s to import and is needed only to build a spec the disk cache lacks: a
# warm packet and the PDF worker, which only converts, never touch it (docs/benchmarks.md).
# The builders take `alt` from here: an `import altair` statement would load it.
alt = import_lazily("altair")

# vl-convert lays text out with its own font set and WeasyPrint with fontconfig's: DejaVu Sans
# is on both sides, so the SVG in the PDF measures and draws with the same glyphs.
FONT = "DejaVu Sans"


# Print size. The PDF lays every chart image at the width of the A4 text column
# (print.css: `figure.chart img { width: 100%; max-height: 225mm }`, @page margins 16 mm
# left and right), so a chart W px wide and H px tall prints at the scale
#     s = min(PRINT_WIDTH_PT / W, PRINT_HEIGHT_PT / H) points per px
# and its f px text at f x s pt. No chart text may print under MIN_PRINT_PT.
PRINT_WIDTH_PT = 504.6  # 210 mm - 2 x 16 mm = 178 mm = 178 x 72 / 25.4 pt


PRINT_HEIGHT_PT = 637.8  # the image's max-height, 225 mm = 225 x 72 / 25.4 pt


MIN_PRINT_PT = 7.0  # the smallest text a reviewer reads on paper without strain


# The production fit matrix has a landscape page of its own (print.css `@page wide`): 297 mm -
# 2 x 16 mm = 265 mm = 751.2 pt wide; 210 mm - 22 mm - 20 mm = 168 mm = 476.2 pt tall, less its
# caption and the figure's margins (~55 pt).
WIDE_PRINT_WIDTH_PT = 751.2


WIDE_PRINT_HEIGHT_PT = 420.0


# Every chart's smallest text: axis, legend and header labels and the text marks.
LABEL_PX = 10


TITLE_PX = 11  # axis, legend and header titles, and the chart's subtitle lines


CHART_TITLE_PX = 13


# The widest and tallest a portrait chart may be with its LABEL_PX text at >= 7 pt in print:
#     W <= 504.6 x 10 / 7 = 720.9 px and H <= 637.8 x 10 / 7 = 911.1 px;
# 710 and 900 leave ~1.5 % for vl-convert's rounding of the SVG's size (10 px prints at
# 504.6 / 710 x 10 = 7.1 pt, or 637.8 / 900 x 10 = 7.09 pt).
MAX_CHART_WIDTH_PX = 710


MAX_CHART_HEIGHT_PX = 900


# Landscape (fit matrix): W <= 751.2 x 10 / 7 = 1,073 px, H <= 420 x 10 / 7 = 600 px.
MAX_WIDE_WIDTH_PX = 1060


MAX_WIDE_HEIGHT_PX = 590


# The plot of a chart with short axis labels and its legend to the right: 710 px less the
# left padding (14), a y axis of ~70 px and a legend of ~180 px.
WIDTH = 440


HEIGHT = 300


def print_scale(width_px: float, height_px: float, wide: bool = False) -> float:
    """Points per px of a chart `width_px` x `height_px` laid in the PDF's chart box."""
    box_w, box_h = (
        (WIDE_PRINT_WIDTH_PT, WIDE_PRINT_HEIGHT_PT) if wide else (PRINT_WIDTH_PT, PRINT_HEIGHT_PT)
    )
    return min(box_w / width_px, box_h / height_px)


NO_DATA_HEIGHT = 120  # a visible box for the "no data" message without wasting a page


CATEGORY_SCHEME = "tableau10"  # distinguishable under the common colour-vision deficiencies


GIGA = 1e9  # FLOP/s are shown as GFLOP/s: device rates sit between 1e9 and 1e15


MILLI = 1e3  # seconds shown as milliseconds: kernel latencies sit between 1e-6 s and 1 s


# 60 evenly spaced order statistics keep the shape and both ends of a distribution while a
# 12-workload, 2-run chart stays under 0.1 MB and quick to draw in the PDF (~0.3 s at 400).
MAX_SAMPLES = 60


MAX_WORKLOADS = 12


LABEL_LIMIT = 300  # px: full workload ids (up to ~48 characters at 10 px) instead of "gemm.bert-b…"


# DejaVu Sans at 10 px: digits and lower-case letters average ~0.62 em. Used to size a plot
# beside its labels before vl-convert measures them (an overestimate only narrows the plot).
CHAR_PX = 6.2


def label_px(labels: Iterable[str], limit: int = LABEL_LIMIT) -> int:
    """The width the longest of `labels` takes on an axis at LABEL_PX, at most `limit`."""
    longest = max((len(str(label)) for label in labels), default=0)
    return min(limit, math.ceil(longest * CHAR_PX))


# A workload-labelled chart (forest, latency, quality) shares the 710 px with its labels, their
# ticks (~8 px), the left and right padding (14 + 5 px) and the half of the last x tick label
# that overhangs the plot (up to ~20 px); its legends go below.
Y_LABELLED_CHROME_PX = 14 + 8 + 5 + 20


MIN_PLOT_PX = 300  # narrower, a log axis over several decades has room for too few ticks


def plot_width(labels: Iterable[str]) -> int:
    """The plot width that keeps a chart with these y labels and no legend beside it within
    MAX_CHART_WIDTH_PX."""
    return max(MIN_PLOT_PX, MAX_CHART_WIDTH_PX - Y_LABELLED_CHROME_PX - label_px(labels))


# Okabe-Ito bluish green / vermillion / grey: safe for deuteranopia and protanopia.
VERDICT_COLOURS = {
    "faster": "#009E73",
    "slower": "#D55E00",
    "equivalent": "#0072B2",
    "inconclusive": "#999999",
}


VERDICT_SHAPES = {  # shape repeats the colour so the verdict survives greyscale printing
    "faster": "triangle-left",
    "slower": "triangle-right",
    "equivalent": "square",
    "inconclusive": "circle",
}


# Time components in stack order (docs/metrics.md's decomposition), with fixed colours so every
# chart reads alike: compute and memory stall in tableau10's blue and orange; inefficiency (the
# kernel time below the roofs) in Paul Tol's cyan and measured overhead in his wine, apart from
# each other and from the rest under protanopia, deuteranopia and tritanopia (simulated
# CIELAB distance >= 20, tests/render/test_charts.py).
ROOF_COMPONENTS = (
    ("compute", "compute", "#4C78A8"),
    ("memory_stall", "memory stall", "#F58518"),
)
MEASURED_COMPONENTS = (
    ("inefficiency", "inefficiency", "#66CCEE"),
    ("overhead", "overhead", "#882255"),
)
COMPONENTS = ROOF_COMPONENTS + MEASURED_COMPONENTS
# A run recorded before overhead was measured: the time its roof leaves unexplained is overhead
# and inefficiency together, drawn as one neutral grey segment and never called overhead.
UNATTRIBUTED_COMPONENT = (
    "unattributed", "overhead + inefficiency (not measured apart)", "#BAB0AC",
)  # fmt: skip
# A multi-rank run's share on the wire (docs/metrics.md, "Communication"), drawn when a row has it.
COMMUNICATION_COMPONENT = ("communication", "communication", "#54A24B")


PERCENTILE_COLOURS = {"p50": "#000000", "p95": "#6A3D9A", "p99": "#C51B7D"}  # apart in lightness


CEILING_COLOUR = "#4D4D4D"  # neutral: the colour channel is taken by layer type


BAR_PX = 14  # one bar per run; thick enough for a 10 px label beside it


GROUP_GAP_PX = 10  # space between layer-type groups


def is_finite(x: object) -> bool:
    """A real number (numpy scalars included); None, NaN, inf and booleans are not."""
    return finite_number(x)


def is_positive(x: object) -> bool:
    """A number a log axis can show: finite and above zero."""
    return is_finite(x) and x > 0


def unique_in_order(values: Iterable[str]) -> list[str]:
    """First-seen order: the caller's order of runs (baseline first) is meaningful."""
    return list(dict.fromkeys(values))


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def chart_title(text: str | list[str], notes: list[str] | None = None) -> alt.TitleParams:
    # every subtitle wrapped to the plot's width here, not at each chart: a forest plot's
    # one-line note on margin, noise floor and allowance ran off the A4 page; a title given as
    # lines keeps them
    shown = [_plain(t) for t in text] if isinstance(text, list) else _plain(text)
    if notes:
        return alt.TitleParams(text=shown, subtitle=chart_notes(notes))
    return alt.TitleParams(text=shown)


# Charts reference their rows by name and the rows are attached to the finished spec as
# top-level "datasets" (still inline, no URL): altair deep-copies inline values at every
# layer and encoding, which cost ~0.6 s a packet for the latency samples alone.
# Rows of the chart being built, by name; empty between charts (see _build_releasing_rows).
PENDING: dict[str, list] = {}


def named_data(values: Iterable[dict]) -> alt.NamedData:
    rows = list(values)
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"), default=float)
    name = "rows-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    PENDING[name] = rows
    return alt.NamedData(name=name)


def _dataset_names(node: object, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        data = node.get("data")
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            found.add(data["name"])
        for value in node.values():
            _dataset_names(value, found)
    elif isinstance(node, list):
        for value in node:
            _dataset_names(value, found)
    return found


_SPEC_MEMO: dict[str, dict] = {}


SPEC_MEMO_ENTRIES = 256  # a site of many decisions repeats the same charts of shared runs


def _build_releasing_rows(fn, args: tuple, kwargs: dict) -> dict:
    """Build one chart, then drop the rows it registered: they are inside its finished spec,
    and keeping them would grow `PENDING` for a whole site build."""
    before = set(PENDING)
    try:
        return fn(*args, **kwargs)
    finally:
        for name in [n for n in PENDING if n not in before]:
            del PENDING[name]


# Built specs are also kept on disk: altair's deep copies cost a warm packet 0.6-0.9 s of its
# ~5 s (cProfile of the sample review's model, 13 charts), and a warm packet's inputs are
# unchanged. Tests that must build for real turn this off.
SPEC_DISK_CACHE = True


def memoised_chart(fn):
    """Memoise a chart builder on its JSON-encoded arguments, in memory and on disk: building
    through altair costs 20-90 ms a chart, and a decisions log draws the same runs' charts many
    times. The spec returned is shared: callers read it and never modify it."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        key = (
            fn.__name__
            + hashlib.sha256(
                json.dumps([args, kwargs], sort_keys=True, default=float).encode()
            ).hexdigest()
        )
        if key not in _SPEC_MEMO:
            if len(_SPEC_MEMO) >= SPEC_MEMO_ENTRIES:
                _SPEC_MEMO.pop(next(iter(_SPEC_MEMO)))
            spec = _disk_spec(key)
            if spec is None:
                spec = _build_releasing_rows(fn, args, kwargs)
                _keep_spec(key, spec)
            _SPEC_MEMO[key] = spec
        return _SPEC_MEMO[key]

    return wrapper


@functools.cache
def _builders_hash() -> str:
    """reviewkit's source and altair's version: a cached spec is served only to the code that
    built it. The whole package, since builders format with common/ and evidence/ helpers
    too (about a megabyte, read once per process)."""
    from importlib.metadata import version
    from pathlib import Path

    import reviewkit

    # altair's version from its metadata: reading alt.__version__ would import it (lazy).
    digest = hashlib.sha256(version("altair").encode())
    root = Path(reviewkit.__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _spec_path(key: str):
    from reviewkit.render.charts.convert import chart_cache_dir

    return chart_cache_dir() / "spec" / _builders_hash() / f"{key}.json"


def _disk_spec(key: str) -> dict | None:
    if not SPEC_DISK_CACHE:
        return None
    try:
        return json.loads(_spec_path(key).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent, or a torn or foreign file: build it again
        return None


def _keep_spec(key: str, spec: dict) -> None:
    if SPEC_DISK_CACHE:
        from reviewkit.render.charts.convert import write_cache

        write_cache(_spec_path(key), json.dumps(spec, separators=(",", ":")))


def finish_chart(chart: alt.TopLevelMixin) -> dict:
    """Apply the shared look and return the plain dict, with its rows attached."""
    # Every size set here, none left to Vega's defaults, so the print arithmetic above holds.
    configured = (
        chart.configure(font=FONT)
        .configure_axis(
            labelFont=FONT, titleFont=FONT, labelFontSize=LABEL_PX, titleFontSize=TITLE_PX
        )
        .configure_legend(
            labelFont=FONT, titleFont=FONT, labelFontSize=LABEL_PX, titleFontSize=TITLE_PX
        )
        .configure_title(
            font=FONT,
            subtitleFont=FONT,
            anchor="start",
            fontSize=CHART_TITLE_PX,
            subtitleFontSize=TITLE_PX,
        )
        .configure_header(
            labelFont=FONT, titleFont=FONT, labelFontSize=LABEL_PX, titleFontSize=TITLE_PX
        )
        .configure_text(font=FONT, fontSize=LABEL_PX)
        .configure_range(category={"scheme": CATEGORY_SCHEME})
    )
    # altair's own validation costs ~50 ms a chart; tests validate every chart kind instead.
    spec = configured.to_dict(validate=False)
    # Room on the left: WeasyPrint draws DejaVu a hair wider than vl-convert measures it, and
    # the first letters of long axis labels were clipped in the PDF.
    spec["padding"] = {"left": 14, "top": 5, "right": 5, "bottom": 5}
    names = sorted(_dataset_names(spec, set()))
    spec["datasets"] = {name: PENDING[name] for name in names}
    return spec


# The key of the `usermeta` that marks a "no data" chart: the packet shows one line of text
# (the reason) in its place. Vega-Lite keeps `usermeta` and draws nothing from it.
NO_DATA_KEY = "reviewkit_no_data"


def no_data_chart(title: str, notes: list[str] | None = None) -> dict:
    """A visible "no data" message: an empty plot would read as a rendering failure. Every
    builder returns this when it has nothing to draw, marked `usermeta[NO_DATA_KEY]` with the
    reason (the notes, unwrapped) so the packet can say it in a line of text instead."""
    chart = (
        alt.Chart(named_data([{"message": "no data"}]))
        .mark_text(fontSize=16, color="#555555")
        .encode(text="message:N")
        .properties(width=WIDTH, height=NO_DATA_HEIGHT, title=chart_title(title, notes))
    )
    spec = finish_chart(chart)
    reasons = [_plain(" ".join(str(n).split())) for n in notes or []]
    spec["usermeta"] = {
        NO_DATA_KEY: True,
        "title": _plain(" ".join(title) if isinstance(title, list) else title),
        "reason": "; ".join(r for r in reasons if r) or "nothing to draw",
    }
    return spec


NOTE_CHARS = 96  # a subtitle line wider than the plot runs off the A4 page: wrap it


NOTE_MAX_CHARS = 400  # a reason read from a file is shown, not a whole file pasted into a chart


MUTED_COLOUR = "#9E9E9E"  # invalid levels, partial sub-windows: present but not a result


RULE_COLOUR = "#333333"  # SLA, offline and tolerance rules: neutral against data colours


KNEE_COLOUR = "#E69F00"  # Okabe-Ito orange: apart from the p50/p99 and verdict colours


def chart_notes(lines: Iterable[str]) -> list[str]:
    """Subtitle lines, each cut to a sane length and wrapped to the plot width."""
    import textwrap

    out: list[str] = []
    for line in lines:
        text = _plain(" ".join(str(line).split()))
        if len(text) > NOTE_MAX_CHARS:
            text = text[: NOTE_MAX_CHARS - 1] + "…"
        out += textwrap.wrap(text, NOTE_CHARS) or [""]
    return out


_CODE_SPAN = re.compile(r"`([^`]*)`")


# A number in exponent notation as Python prints it (2.54e-05, 1.2e+04, and "2.54e-05x" with
# its unit), not inside an id: the sign Python always writes keeps "rows-1e4" and "1e0-1e1".
_EXPONENT = re.compile(r"(?<![\w.-])[-+]?\d+(?:\.\d+)?[eE][-+]\d+(?![\d.])")


_STR_LIST = re.compile(r"\[\s*'[^'\]]*'(?:\s*,\s*'[^'\]]*')*\s*\]")  # ['bf16', 'fp16']


def _plain(text: str) -> str:
    """Chart text as a reader sees it: markdown code spans as quoted words (a chart draws no
    markdown, and the backticks printed as they are), numbers in exponent notation written
    out, and Python's repr of a list of names as the names."""
    text = _CODE_SPAN.sub(lambda m: f"“{m.group(1)}”", str(text)).replace("`", "")
    text = _EXPONENT.sub(lambda m: fmt_readable(float(m.group(0))), text)
    return _STR_LIST.sub(lambda m: ", ".join(re.findall(r"'([^']*)'", m.group(0))), text)


# The one readable-number formatter (common/format.readable): never Python's exponent form.
TIMES = READABLE_TIMES


def duration_text(seconds: float) -> str:
    """A time to three significant digits in the largest unit that keeps it from 1 up:
    0.0000625 -> "62.5 µs", 0.31 -> "310 ms" (never "0.0000625 s" or "6.25e-05 s")."""
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(seconds) >= factor:
            return f"{fmt_readable(seconds / factor, 3)} {unit}"
    return f"{fmt_readable(seconds / 1e-9, 3)} ns"
