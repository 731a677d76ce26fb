"""Load and validate a rubric (rubrics/*.toml): sections of items with severities and checks."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reviewkit import rubrics
from reviewkit.analysis.compare import Margins
from reviewkit.analysis.knobs import KNOWN_KNOBS
from reviewkit.common.errors import InputError
from reviewkit.common.format import shown
from reviewkit.common.tomlfile import closest, read_toml

SEVERITIES = ("blocking", "major", "minor")
MANUAL = "manual"
DEFAULT_RUBRIC = rubrics.FOLDER / "default.toml"
ITEM_KEYS = {
    "id": str,
    "title": str,
    "question": str,
    "severity": str,
    "check": str,
    "evidence": str,
    "clears_with": str,
    "red_flag": bool,
    "params": dict,
}
REQUIRED_ITEM_KEYS = ("id", "title", "question", "severity", "check", "evidence")


@dataclass(frozen=True)
class RubricItem:
    id: str
    section: str
    title: str
    question: str
    severity: str
    check: str
    evidence: str
    clears_with: str = ""
    red_flag: bool = False
    params: dict = field(default_factory=dict)

    @property
    def manual(self) -> bool:
        return self.check == MANUAL


@dataclass(frozen=True)
class Rubric:
    name: str
    version: str
    path: str
    sections: tuple[tuple[str, str], ...]  # (id, title)
    items: tuple[RubricItem, ...]
    # The [verdicts] table: the practical margin a comparison's verdicts need, the false
    # discovery rate over its p99 tests, the ceiling shift that is a finding. None when the
    # rubric has no such table: verdicts are then statistical only, and reports say so.
    margins: Margins | None = None
    # [roofline] below_roof_share: under this share of its kernel time at the roof, a workload is
    # flagged below-roof (None: the default rubric's).
    below_roof_share: float | None = None
    # [risk] severity_weights: how much a non-passing item of each severity adds to a
    # candidate's engineering risk (None: the rubric sets none, and no risk is drawn).
    severity_weights: dict[str, float] | None = None

    def item(self, item_id: str) -> RubricItem | None:
        return next((i for i in self.items if i.id == item_id), None)


# A param's kind (as a check declares it) -> the TOML values that are of it.
_PARAM_KINDS = {
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    "table": lambda v: isinstance(v, dict),
    "knob list": lambda v: isinstance(v, list),
    "knob table": lambda v: isinstance(v, dict),
}
# Param kinds that name knobs of a run bundle, and what each holds, for the error that refuses
# one: a misspelt knob would silently match nothing.
KNOB_LIST, KNOB_TABLE = "knob list", "knob table"
_KIND_HELP = {
    KNOB_LIST: 'a list of knob names the runs record, e.g. ["threads", "interop_threads"]',
    KNOB_TABLE: "a table of knob names the runs record, each set to torch's default value "
    "(a boolean, string or number), e.g. { cudnn_allow_tf32 = true }",
}


def _check_params(label: str, raw: dict, known_checks: Iterable[str]) -> None:
    """The thresholds a check reads live only in the rubric: each one it declares must be there,
    of its kind. `known_checks` maps a check's name to the function (see checks.check)."""
    if not isinstance(known_checks, Mapping) or raw["check"] not in known_checks:
        return
    required = getattr(known_checks[raw["check"]], "required_params", {})
    params = raw.get("params", {})
    for key, kind in required.items():
        a_kind = f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
        if kind in _KIND_HELP:
            a_kind += f": {_KIND_HELP[kind]}"
        if key not in params:
            raise InputError(
                f"{label}: check {shown(raw['check'])} needs params.{key} ({a_kind}); add it "
                "to the "
                f"item's params, as rubrics/default.toml does"
            )
        if not _PARAM_KINDS[kind](params[key]):
            raise InputError(
                f"{label}: params.{key} must be {a_kind}, got {type(params[key]).__name__}"
            )
        if kind == "table":
            for name, value in params[key].items():
                ok = isinstance(value, int | float) and not isinstance(value, bool)
                if not ok or not math.isfinite(value) or value < 0:
                    raise InputError(
                        f"{label}: params.{key}.{shown(name)} = {shown(value)}: expected a "
                        "finite number, 0 or more"
                    )
        if kind in _KIND_HELP:
            _check_knobs(label, key, kind, params[key])
        if kind in ("number", "integer") and not _in_range(key, params[key]):
            high = " and at most 1 (a share)" if _is_share(key) else ""
            raise InputError(
                f"{label}: params.{key} = {shown(params[key])}: expected a finite number, 0 or "
                f"more{high}"
            )


def _check_knobs(label: str, key: str, kind: str, value: list | dict) -> None:
    """Each name a knob the runs record, once; a knob table's values booleans, strings or
    finite numbers (torch's defaults)."""
    names = list(value)
    for name in names:
        if not isinstance(name, str) or name not in KNOWN_KNOBS:
            hint = closest(name, KNOWN_KNOBS) if isinstance(name, str) else ""
            raise InputError(
                f"{label}: params.{key} names {shown(name)}, not a knob the runs record{hint}; "
                f"expected {_KIND_HELP[kind]}; the knobs: {', '.join(KNOWN_KNOBS)}"
            )
        if names.count(name) > 1:
            raise InputError(f"{label}: params.{key} names {shown(name)} twice; name it once")
        if kind == KNOB_TABLE:
            v = value[name]
            scalar = isinstance(v, bool | str) or (isinstance(v, int | float) and math.isfinite(v))
            if not scalar:
                raise InputError(
                    f"{label}: params.{key}.{name} = {shown(v)}: expected torch's default of "
                    "that setting, a boolean, string or finite number (e.g. cudnn_allow_tf32 = "
                    "true)"
                )


def _is_share(key: str) -> bool:
    """A threshold that is a share of something (a coverage, an effect size, an efficiency,
    an MFU): past 1 it can never be met."""
    return key in ("min_coverage", "min_effect", "min_scaling_efficiency", "slow_path_mfu") or (
        key.endswith(("_fraction", "_share"))
    )


def _in_range(key: str, value: float) -> bool:
    return math.isfinite(value) and value >= 0 and (value <= 1 or not _is_share(key))


def load_rubric(path: Path | str | None, known_checks: Iterable[str]) -> Rubric:
    """Read a rubric; refuse unknown checks, duplicate ids, bad severities and missing or
    mistyped thresholds, naming the item."""
    path = Path(path) if path is not None else DEFAULT_RUBRIC
    doc = read_toml(path)
    known = sorted(set(known_checks) | {MANUAL})
    where = str(path)
    meta = doc.get("rubric")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        raise InputError(f"{where}: table [rubric] with a string `name` is required")
    sections_raw = doc.get("sections")
    if not isinstance(sections_raw, list) or not sections_raw:
        raise InputError(f"{where}: at least one [[sections]] table is required")
    sections: list[tuple[str, str]] = []
    items: list[RubricItem] = []
    seen: set[str] = set()
    for s_index, section in enumerate(sections_raw, 1):
        if not isinstance(section, dict) or not isinstance(section.get("id"), str):
            raise InputError(f"{where}: [[sections]] number {s_index} needs a string `id`")
        sid = section["id"]
        sections.append((sid, str(section.get("title", sid))))
        for i_index, raw in enumerate(section.get("items", []), 1):
            label = f"{where}: section {shown(sid)}, item {i_index}"
            if not isinstance(raw, dict):
                raise InputError(f"{label}: expected a table")
            if isinstance(raw.get("id"), str):
                label = f"{where}: item {shown(raw['id'])}"
            for key in raw:
                if key not in ITEM_KEYS:
                    hint = closest(key, ITEM_KEYS)
                    raise InputError(f"{label}: unknown key {shown(key)}{hint}")
            for key in REQUIRED_ITEM_KEYS:
                if key not in raw:
                    raise InputError(f"{label}: key {shown(key)} is required")
            for key, value in raw.items():
                if not isinstance(value, ITEM_KEYS[key]):
                    raise InputError(
                        f"{label}: key {shown(key)} must be a {ITEM_KEYS[key].__name__}, "
                        f"got {type(value).__name__}"
                    )
            if raw["id"] in seen:
                raise InputError(f"{label}: duplicate id {shown(raw['id'])}; ids must be unique")
            seen.add(raw["id"])
            if raw["severity"] not in SEVERITIES:
                raise InputError(
                    f"{label}: severity {shown(raw['severity'])} is not one of "
                    f"{', '.join(SEVERITIES)}"
                )
            if raw["check"] not in known:
                hint = closest(raw["check"], known)
                raise InputError(
                    f"{label}: unknown check {shown(raw['check'])}{hint}; known checks: "
                    f"{', '.join(known)}"
                )
            _check_params(label, raw, known_checks)
            items.append(RubricItem(section=sid, **raw))
    if not items:
        raise InputError(f"{where}: the rubric has no items")
    return Rubric(
        name=meta["name"],
        version=str(meta.get("version", "")),
        path=where,
        sections=tuple(sections),
        items=tuple(items),
        margins=_margins(where, doc.get("verdicts")),
        below_roof_share=_roofline(where, doc.get("roofline")),
        severity_weights=_risk(where, doc.get("risk")),
    )


def _one_key_table(where: str, table: str, key: str, raw: object) -> object:
    """The value of a rubric table that holds one key ([roofline], [risk]): a table, and no
    other key (a misspelt one is named with the closest)."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: [{table}] must be a table")
    for name in raw:
        if name != key:
            raise InputError(f"{where}: [{table}] unknown key {shown(name)}{closest(name, [key])}")
    return raw.get(key)


def _risk(where: str, raw: object) -> dict[str, float] | None:
    """The [risk] table: severity_weights, a weight from 0 to 1 for each severity."""
    if raw is None:
        return None
    weights = _one_key_table(where, "risk", "severity_weights", raw)
    expected = (f"a table with a weight from 0 to 1 for each of {', '.join(SEVERITIES)} "
                "(e.g. { blocking = 1.0, major = 0.5, minor = 0.0 })")  # fmt: skip
    if not isinstance(weights, dict) or set(weights) != set(SEVERITIES):
        raise InputError(
            f"{where}: [risk] severity_weights = {shown(weights)}: expected {expected}"
        )
    for name, w in weights.items():
        if not (isinstance(w, int | float) and not isinstance(w, bool) and 0 <= w <= 1):
            raise InputError(
                f"{where}: [risk] severity_weights.{name} = {shown(w)}: expected {expected}"
            )
    return {str(k): float(v) for k, v in weights.items()}


def _roofline(where: str, raw: object) -> float | None:
    """The [roofline] table: below_roof_share, a share above 0 and at most 1."""
    if raw is None:
        return None
    value = _one_key_table(where, "roofline", "below_roof_share", raw)
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not 0 < value <= 1:
        raise InputError(
            f"{where}: [roofline] below_roof_share = {shown(value)}: expected a share above 0 and "
            "at most 1 (0.5: flag a workload whose roof is under half its kernel time)"
        )
    return float(value)


# [verdicts] key -> (lowest, highest) it may take: a margin of half the baseline or more would
# call nothing faster; a false discovery rate of 0 or 1 controls nothing.
VERDICT_KEYS = {
    "min_effect": (0.0, 0.5),
    "fdr": (1e-6, 0.5),
    "max_ceiling_shift": (0.0, 1.0),
    # A log-scale standard deviation of 0.5 is a factor of 1.6 between two runs of one setting:
    # a machine that noisy cannot support a verdict between separate runs at all.
    "run_to_run_sd": (0.0, 0.5),
    # The least any run carries, its device's measured figure included (held at or below the
    # default, checked in _margins).
    "run_to_run_sd_floor": (0.0, 0.5),
}


def _fraction(where: str, key: str, value: object, low: float, high: float) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not low <= value <= high:
        raise InputError(
            f"{where}: [verdicts] {key} = {shown(value)}: expected a number from {low:g} to "
            f"{high:g}"
        )
    return float(value)


def _margins(where: str, raw: object) -> Margins | None:
    """The [verdicts] table, every key required and in range, or None when there is none."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InputError(f"{where}: [verdicts] must be a table")
    known = [*VERDICT_KEYS, "min_effect_by_layer_type"]
    for key in raw:
        if key not in known:
            raise InputError(f"{where}: [verdicts] unknown key {shown(key)}{closest(key, known)}")
    values = {}
    for key, (low, high) in VERDICT_KEYS.items():
        if key not in raw:
            raise InputError(f"{where}: [verdicts] key {shown(key)} is required")
        values[key] = _fraction(where, key, raw[key], low, high)
    if values["run_to_run_sd_floor"] > values["run_to_run_sd"]:
        raise InputError(
            f"{where}: [verdicts] run_to_run_sd_floor = {values['run_to_run_sd_floor']:g} is "
            f"above run_to_run_sd = {values['run_to_run_sd']:g}: expected a floor at or below "
            "the default for a device never measured"
        )
    by_layer = raw.get("min_effect_by_layer_type", {})
    if not isinstance(by_layer, dict):
        raise InputError(f"{where}: [verdicts] min_effect_by_layer_type must be a table")
    low, high = VERDICT_KEYS["min_effect"]
    layers = {
        str(k): _fraction(where, f"min_effect_by_layer_type.{k}", v, low, high)
        for k, v in by_layer.items()
    }
    return Margins(min_effect_by_layer_type=layers, **values)
