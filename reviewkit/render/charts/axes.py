"""Axes whose tick labels never collide: explicit tick values for log scales, chosen for the
axis's length in px, and one short label format ("0.01", "1", "100", "10k") for all of them.

Vega's own log ticks are 1..9 of each decade and its overlap check lets labels that touch
stand: a roofline printed "0.010.02" and a forest "0.0020.003". Here the ticks are picked so
that neighbours are at least a label's width plus LABEL_GAP_PX apart along the axis."""

from __future__ import annotations

import itertools
import math

from reviewkit.render.charts.base import CHAR_PX, LABEL_PX, alt

LABEL_GAP_PX = 10  # clear space between two neighbouring tick labels


# Tick sets tried on a log axis, densest first: the first whose labels fit is used.
LOG_STEPS = ((1, 2, 3, 5, 7), (1, 2, 5), (1, 3))


MAX_LINEAR_TICKS = 12  # an axis under a decade long gets evenly spaced ticks, at most this many


# (threshold, suffix): tick labels from a thousand up carry a suffix instead of digits, so a
# label is at most 4-5 characters ("100k", "0.001") and a decade needs ~40 px.
SUFFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def tick_label(value: float) -> str:
    """The label of a tick, as LABEL_EXPR draws it: 0.01 -> "0.01", 1 -> "1", 1e4 -> "10k"."""
    for threshold, suffix in SUFFIXES:
        if abs(value) >= threshold:
            return f"{value / threshold:.6g}" + suffix
    return f"{_round(value):.15f}".rstrip("0").rstrip(".") if value else "0"


# The same in Vega's expression language (d3-format's "~r": significant digits, no exponent,
# trailing zeros trimmed). Integers written out: the spec's text is checked for "e+".
LABEL_EXPR = (
    "".join(
        f"abs(datum.value) >= {int(threshold)} ? format(datum.value / {int(threshold)}, '~r') + "
        f"'{suffix}' : "
        for threshold, suffix in SUFFIXES
    )
    + "format(datum.value, '~r')"
)


def _round(x: float) -> float:
    return float(f"{x:.6g}")  # 0.30000000000000004 -> 0.3: the value the label names


def _linear_sets(low: float, high: float) -> list[list[float]]:
    """Evenly spaced ticks (steps of 1, 2 or 5 x 10^k), finest first, for a short span."""
    out = []
    for exponent in range(math.floor(math.log10(high - low)) - 2, math.ceil(math.log10(high)) + 1):
        for mult in (1, 2, 5):
            step = mult * 10.0**exponent
            first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)
            if 2 <= last - first + 1 <= MAX_LINEAR_TICKS:
                out.append([_round(k * step) for k in range(first, last + 1)])
    return out


def _log_sets(low: float, high: float, decades_only: bool) -> list[list[float]]:
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    out = []
    for steps in () if decades_only else LOG_STEPS:
        ticks = [_round(s * 10.0**e) for e in range(first, last + 1) for s in steps]
        out.append([t for t in ticks if low <= t <= high])
    # Powers of ten, then every second, third ... one (0.01, 1, 100): always a fitting set.
    for stride in range(1, last - first + 2):
        ticks = [_round(10.0**e) for e in range(first, last + 1) if e % stride == 0]
        out.append([t for t in ticks if low <= t <= high])
    return out


def _fits(ticks: list[float], low: float, high: float, length_px: float, along: bool) -> bool:
    """Whether neighbouring labels keep LABEL_GAP_PX apart: on a horizontal axis each label
    takes its width (CHAR_PX a character), on a vertical one its height (LABEL_PX)."""
    span = math.log10(high / low)
    for a, b in itertools.pairwise(ticks):
        gap = length_px * math.log10(b / a) / span
        if along:
            need = (len(tick_label(a)) + len(tick_label(b))) / 2 * CHAR_PX + LABEL_GAP_PX
        else:
            need = LABEL_PX + LABEL_GAP_PX / 2
        if gap < need:
            return False
    return True


def log_ticks(
    low: float,
    high: float,
    length_px: float,
    *,
    horizontal: bool = True,
    decades_only: bool = False,
) -> list[float]:
    """Tick values for a log axis over [low, high] drawn `length_px` long: the densest of
    evenly spaced ticks (spans under a decade), 1-2-3-5-7, 1-2-5, 1-3 of each decade, or
    powers of ten (every one, every second ...) whose labels keep apart. `decades_only`: powers
    of ten only (a roofline: its axes span many decades and read as orders of magnitude)."""
    if not (0 < low < high):
        raise ValueError(f"log_ticks: domain {low}..{high} is not positive and increasing")
    linear = _linear_sets(low, high) if math.log10(high / low) <= 1 else []
    if decades_only:
        # Under two powers of ten inside: the sparsest other set with two ticks that fit.
        sets = _log_sets(low, high, True) + _log_sets(low, high, False)[len(LOG_STEPS) - 1 :: -1]
        sets += linear[::-1]
    else:
        sets = linear + _log_sets(low, high, False)
    for ticks in sets:
        if len(ticks) >= 2 and _fits(ticks, low, high, length_px, horizontal):
            return ticks
    # Not even two ticks fit (a short axis over a short span): the roundest value inside, alone.
    inside = [t for ticks in sets for t in ticks]
    return [min(inside, key=lambda t: len(tick_label(t)))] if inside else [low]


def log_axis(
    low: float,
    high: float,
    length_px: float,
    *,
    horizontal: bool = True,
    decades_only: bool = False,
    **kwargs,
) -> alt.Axis:
    """An axis over [low, high] with the ticks of `log_ticks` and their short labels."""
    return alt.Axis(
        values=log_ticks(low, high, length_px, horizontal=horizontal, decades_only=decades_only),
        labelExpr=LABEL_EXPR,
        # Belt and braces: the values above keep apart, and Vega hides any that still touch.
        labelOverlap="greedy",
        labelSeparation=LABEL_GAP_PX // 2,
        **kwargs,
    )


def decade_domain(values: list[float], pad: float = 1.0) -> tuple[float, float]:
    """Whole decades around `values` (each end a factor `pad` clear of the outermost value)."""
    lo = 10.0 ** math.floor(math.log10(min(values) / pad))
    hi = 10.0 ** math.ceil(math.log10(max(values) * pad))
    return (lo, hi) if hi > lo else (lo, lo * 10)


SNAP = 3.0  # an axis end within this factor of a power of ten is taken out to it: a labelled end


def log_domain(values: list[float], pad: float = 2.0) -> tuple[float, float]:
    """A log axis's ends: `values` a factor `pad` clear, each end moved out to the next power
    of ten when that is within SNAP of it (so most axes end on a labelled decade, and a peak
    just under one does not get a decade of empty plot above it)."""
    lo, hi = min(values) / pad, max(values) * pad
    below, above = 10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(hi))
    return (below if lo / below <= SNAP else lo), (above if above / hi <= SNAP else hi)
