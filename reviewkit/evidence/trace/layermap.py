"""Map profiler operator and kernel names to the suite's layer types (rubrics/layer_map.toml)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from reviewkit import rubrics
from reviewkit.common.errors import InputError
from reviewkit.common.hashing import sha256_file
from reviewkit.common.tomlfile import closest, read_toml
from reviewkit.suite.workloads import LAYER_TYPES

DEFAULT_LAYER_MAP = rubrics.FOLDER / "layer_map.toml"
SCHEMA_VERSION = 1
# The suite's operator-level layer types: a trace's operators are single ops, so the
# composites the suite measures end to end ("block", "model") are not targets of a rule.
COMPOSITE_LAYER_TYPES = ("block", "model")
MAPPABLE_LAYER_TYPES = tuple(t for t in LAYER_TYPES if t not in COMPOSITE_LAYER_TYPES)
RULE_KEYS = ("layer_type", "ops", "kernels")
FILE_KEYS = ("schema_version", "rules", "replace_default")


@dataclass(frozen=True)
class Rule:
    layer_type: str
    ops: tuple[str, ...]
    kernels: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class LayerMap:
    """Ordered rules, first match wins; lookups are cached because trace names repeat."""

    rules: tuple[Rule, ...]
    sources: tuple[dict, ...]  # {"path", "sha256", "rules"} of each file read, in order
    _op_re: tuple = field(default=(), repr=False, compare=False)
    _kernel_re: tuple = field(default=(), repr=False, compare=False)
    _op_cache: dict = field(default_factory=dict, repr=False, compare=False)
    _kernel_cache: dict = field(default_factory=dict, repr=False, compare=False)

    def op_layer(self, name: str) -> str | None:
        return _first_match(name, self._op_re, self._op_cache)

    def kernel_layer(self, name: str) -> str | None:
        return _first_match(name, self._kernel_re, self._kernel_cache)


def _first_match(name: str, rules: tuple, cache: dict) -> str | None:
    try:
        return cache[name]
    except KeyError:
        hit = cache[name] = next((lt for lt, rx in rules if rx.match(name)), None)
        return hit


def _compile(patterns: tuple[str, ...], flags: int) -> re.Pattern | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns), flags)


def _rules_from(path: Path) -> tuple[list[Rule], bool]:
    doc = read_toml(path)
    for key in doc:
        if key not in FILE_KEYS:
            raise InputError(
                f"{path}: unknown key {key!r}{closest(key, FILE_KEYS)}; "
                f"a layer map has {', '.join(FILE_KEYS)}"
            )
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(
            f"{path}: schema_version {version!r}; this reviewkit reads layer maps of version "
            f"{SCHEMA_VERSION}: set `schema_version = {SCHEMA_VERSION}`"
        )
    rules_doc = doc.get("rules", [])
    if not isinstance(rules_doc, list):
        raise InputError(f"{path}: `rules` must be an array of tables ([[rules]])")
    replace = doc.get("replace_default", False)
    if not isinstance(replace, bool):
        raise InputError(f"{path}: `replace_default` must be true or false")
    rules = []
    for i, r in enumerate(rules_doc):
        where = f"{path}: rules[{i}]"
        if not isinstance(r, dict):
            raise InputError(f"{where}: must be a table with layer_type, ops and kernels")
        for key in r:
            if key not in RULE_KEYS:
                raise InputError(
                    f"{where}: unknown key {key!r}{closest(key, RULE_KEYS)}; "
                    f"a rule has {', '.join(RULE_KEYS)}"
                )
        lt = r.get("layer_type")
        if lt not in MAPPABLE_LAYER_TYPES:
            raise InputError(
                f"{where}.layer_type: {lt!r}{closest(str(lt), MAPPABLE_LAYER_TYPES)} is not a "
                f"layer type a trace op can map to; use one of {', '.join(MAPPABLE_LAYER_TYPES)}"
            )
        lists = {}
        for key in ("ops", "kernels"):
            value = r.get(key, [])
            if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
                raise InputError(f"{where}.{key}: must be a list of non-empty pattern strings")
            lists[key] = tuple(value)
        if not lists["ops"] and not lists["kernels"]:
            raise InputError(f"{where}: has neither ops nor kernels patterns; add one")
        rules.append(Rule(lt, lists["ops"], lists["kernels"], str(path)))
    return rules, replace


def load_layer_map(extra: tuple[Path, ...] | list[Path] = ()) -> LayerMap:
    """The team's files' rules (in the order given) before the default ones, unless a team
    file says `replace_default = true`."""
    rules: list[Rule] = []
    sources: list[dict] = []
    keep_default = True
    for path in extra:
        path = Path(path)
        own, replace = _rules_from(path)
        keep_default = keep_default and not replace
        rules += own
        sources.append({"path": str(path), "sha256": sha256_file(path), "rules": len(own)})
    if keep_default:
        own, _ = _rules_from(DEFAULT_LAYER_MAP)
        rules += own
        sources.append(
            {
                "path": "rubrics/layer_map.toml",
                "sha256": sha256_file(DEFAULT_LAYER_MAP),
                "rules": len(own),
            }
        )
    op_re = tuple((r.layer_type, rx) for r in rules if (rx := _compile(r.ops, 0)) is not None)
    kernel_re = tuple(
        (r.layer_type, rx) for r in rules if (rx := _compile(r.kernels, re.IGNORECASE)) is not None
    )
    return LayerMap(tuple(rules), tuple(sources), op_re, kernel_re)
