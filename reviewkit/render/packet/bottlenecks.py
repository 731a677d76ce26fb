"""A layer type's bottleneck as the packet, the brief and the walk show it: the class in words,
the share of its roof reached, its overhead (or that it was not measured), its inefficiency and
the lever the class points at. Plain text: the templates escape it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from reviewkit.analysis.bottleneck import class_label
from reviewkit.common.format import MISSING, pct

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun, LayerAggregate

OVERHEAD_NOT_MEASURED = "not measured"
INEFFICIENCY_NOT_MEASURED = "not measured apart"
# The brief names this many of a candidate's layer types (largest time share first); the
# bottleneck section shows them all.
BRIEF_LAYER_TYPES = 3
# What the packet's bottleneck table shows of a layer type's view, beside its classes.
BOTTLENECK_FIELDS = ("class_text", "roof_share", "roof_share_of", "below_roof",
                     "overhead_measured", "overhead", "inefficiency", "unattributed",
                     "lever")  # fmt: skip


def class_text(cls: str | None) -> str:
    """A class in words: "unclassified" says why in full; none is the missing marker."""
    return class_label(cls, missing=MISSING)


def layer_view(
    agg: LayerAggregate | None, comparison: object = None, side: str = "candidate"
) -> dict:
    """One side of a layer type: from the comparison's per-side fields where it has them
    (`overhead_candidate`, `roof_share_candidate`, ...), else from the run's layer aggregate.
    Overhead None means it was not measured: the inefficiency is then not told apart from it."""
    if comparison is not None and getattr(comparison, f"bottleneck_{side}", None) is None:
        comparison = None  # it holds no aggregate of this side: the run's own, throughout

    def of_agg(name: str):
        return getattr(agg, name) if agg is not None else None

    def pick(field: str, name: str):
        value = getattr(comparison, f"{field}_{side}", None) if comparison is not None else None
        return of_agg(name) if value in (None, "") else value

    cls = pick("bottleneck", "bottleneck")
    overhead = pick("overhead", "overhead_fraction")
    measured = overhead is not None
    return {
        "class": cls,
        "class_text": class_text(cls),
        "roof_share": pick("roof_share", "roof_share"),
        # t_roof / t_k where overhead was measured; t_roof / t (a lower bound) where it was not
        "roof_share_of": "kernel time" if measured else "whole time",
        # a comparison without the field says False: the aggregate's flag then decides
        "below_roof": bool(pick("below_roof", "below_roof") or of_agg("below_roof")),
        "overhead_measured": measured,
        "overhead": overhead,
        "inefficiency": pick("inefficiency", "inefficiency_fraction") if measured else None,
        "unattributed": None if measured else of_agg("unattributed_fraction"),
        "lever": str(pick("lever", "lever") or ""),
        "time_share": of_agg("time_share"),
        "mfu": of_agg("mfu"),
        "memory_stall": of_agg("memory_stall_fraction"),
    }


def roof_text(view: dict) -> str:
    """The share of roof reached, in words, with what it is a share of."""
    share = view["roof_share"]
    if share is None:
        return "no kernel time: the measured overhead is the whole time"
    if view["overhead_measured"]:
        text = f"roof {pct(share)} of the kernel time"
    else:
        text = f"roof {pct(share)} of the whole time (a lower bound)"
    return text + (", below roof" if view["below_roof"] else "")


def overhead_text(view: dict) -> str:
    if not view["overhead_measured"]:
        return f"overhead {OVERHEAD_NOT_MEASURED}"
    return f"overhead {pct(view['overhead'])}, inefficiency {pct(view['inefficiency'])}"


def describe(view: dict) -> str:
    """One line: class; share of roof; overhead (or not measured); lever."""
    parts = [view["class_text"], roof_text(view), overhead_text(view)]
    if view["lever"]:
        parts.append(f"lever: {view['lever']}")
    return "; ".join(parts)


def named_layer_types(texts: list[str], layer_types: list[str]) -> list[str]:
    """The layer types a finding names (as whole words in its summary or evidence labels)."""
    joined = "\n".join(texts)
    # "attention:" and "attention." at a sentence's end, not "model.toy-decoder" or "pre-model"
    return [lt for lt in layer_types
            if re.search(rf"(?<![\w.-]){re.escape(lt)}(?![\w-]|\.\w)", joined)]  # fmt: skip


def brief_layers(finding, candidates: list[tuple[str, AnalysedRun]]) -> tuple[list[dict], int]:
    """The layer types the bottleneck finding names, each with its class, share of roof,
    overhead and lever from the candidate run's layer aggregates: the largest time shares first,
    BRIEF_LAYER_TYPES per candidate; and how many more the bottleneck section shows."""
    if finding is None:
        return [], 0
    texts = [finding.summary] + [e.label for e in finding.evidence if e.kind != "artifact"]
    out, more = [], 0
    for label, run in candidates:
        aggs = run.layer_types
        named = named_layer_types(texts, list(aggs))
        named.sort(key=lambda lt: (-(aggs[lt].time_share or 0.0), lt))
        more += max(0, len(named) - BRIEF_LAYER_TYPES)
        for lt in named[:BRIEF_LAYER_TYPES]:
            view = layer_view(aggs[lt])
            out.append({"candidate": label, "layer_type": lt, **view, "roof_text": roof_text(view),
                        "overhead_text": overhead_text(view)})  # fmt: skip
    return out, more
