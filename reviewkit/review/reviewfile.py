"""The review file (review.toml): validated into frozen records, paths kept inside its folder."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from reviewkit.common.errors import InputError
from reviewkit.common.format import shown
from reviewkit.common.numbers import finite_number
from reviewkit.common.tomlfile import closest, read_toml

SCHEMA_VERSION = 1
# What the claim says its primary metric shows: faster (an improvement), or no slower than the
# margin ("same latency, cheaper"). It decides which verdict settles the claim.
HYPOTHESES = ("improvement", "no-regression")
DECISION_STATUSES = ("proposed", "go", "no-go", "needs-evidence", "rolled-back", "superseded")
RISK_LEVELS = ("low", "medium", "high")
DISPROOF_METRICS = (
    "median_ratio",
    "mean_ratio",
    "p95_ratio",
    "p99_ratio",  # candidate / baseline
    "mfu",
    "memory_stall_fraction",
    "p50_s",
    "p99_s",  # candidate's own
)
COMPARISONS = ("<", "<=", ">", ">=")
# The sweep scenario an SLA target is judged in when a sweep is cited (after LoadGen):
# independent requests arriving at random (server), one at a time, or all at once.
SLA_SCENARIOS = ("server", "single-stream", "offline")
EVIDENCE_KINDS = (
    "production_traces", "trace_diff", "long_window", "quality", "power", "sweep", "shortlist"
)  # fmt: skip


@dataclass(frozen=True)
class Field:
    types: tuple[type, ...]
    required: bool = False
    choices: tuple[str, ...] = ()
    item: dict | None = None  # schema of a table, or of each table in an array of tables
    each: tuple[type, ...] = ()  # element types of a plain array
    # A value of the right type that is still wrong: (test, what is expected); the message
    # names the key, the value and the expectation.
    valid: tuple | None = None
    max_chars: int | None = None  # text: a cap, so no field can make a command slow


def _f(*types, required=False, choices=(), item=None, each=(), valid=None, max_chars=None):
    return Field(tuple(types), required, tuple(choices), item, tuple(each), valid, max_chars)


# Caps on free text (issue 18): a title is one line, a summary a page or two of Markdown; any
# other field a paragraph. Past them the terminal and the PDF spend seconds laying out one
# field, for text nobody reads in a review.
TITLE_MAX_CHARS = 300
SUMMARY_MAX_CHARS = 20_000
TEXT_MAX_CHARS = 4_000
ANSWER_MAX_CHARS = 20_000


def _finite(v) -> bool:
    return finite_number(v)


def _real_date(v) -> bool:
    if not isinstance(v, str):
        return True  # a TOML date or date-time is a date already
    try:
        dt.date.fromisoformat(v)
    except ValueError:
        return False
    return True


def valid_glob(pattern: str) -> bool:
    """A workload pattern fnmatch reads as meant: every [ closed, not empty or blank."""
    if not pattern.strip():
        return False
    depth = 0
    for ch in pattern:
        if ch == "[":
            if depth:
                return False
            depth = 1
        elif ch == "]" and depth:
            depth = 0
    return depth == 0


# Upper ends a real target never reaches, so every derived number stays finite (1e308 s in
# milliseconds is infinity): a p99 of at most a day, a rate of at most 1e12 per second, a
# threshold of magnitude at most 1e12.
MAX_TIME_S = 86_400.0
MAX_RATE_PER_S = 1e12
MAX_MAGNITUDE = 1e12
POSITIVE = (lambda v: _finite(v) and v > 0, "a finite number above 0")
FINITE = (
    lambda v: _finite(v) and abs(v) <= MAX_MAGNITUDE,
    f"a finite number within ±{MAX_MAGNITUDE:g}",
)
TIME_S = (
    lambda v: _finite(v) and 0 < v <= MAX_TIME_S,
    f"a time in seconds above 0 and at most {MAX_TIME_S:g} (a day)",
)
RATE = (
    lambda v: _finite(v) and 0 < v <= MAX_RATE_PER_S,
    f"a rate above 0 and at most {MAX_RATE_PER_S:g} per second",
)
DATE = (_real_date, "a real date, YYYY-MM-DD (e.g. 2026-12-04)")
GLOB = (valid_glob, "a workload id or glob with every [ closed, e.g. 'model.*'")
TEXT = _f(str, max_chars=TEXT_MAX_CHARS)
NUMBER = _f(int, float, valid=FINITE)
PATHS = _f(str, list, each=(str,))
SCHEMA = {
    "schema_version": _f(int, required=True),
    "title": _f(str, required=True, max_chars=TITLE_MAX_CHARS),
    "summary": _f(str, max_chars=SUMMARY_MAX_CHARS),
    "hypothesis": _f(str, choices=HYPOTHESES),
    "runs": _f(
        dict,
        required=True,
        item={
            "baseline": _f(str, required=True),
            "candidates": _f(list, required=True, each=(str,)),
            # one device profile (`reviewkit calibrate --out`) every run of this device
            # divides by, instead of each bundle's own
            "device_profile": _f(str),
        },
    ),
    "owner": _f(dict, item={"name": TEXT, "team": TEXT, "contact": TEXT}),
    "reviewers": _f(list, each=(str,)),
    "sla": _f(
        dict,
        item={
            "load": TEXT,
            "targets": _f(
                list,
                item={
                    "workload": _f(str, required=True, valid=GLOB, max_chars=TEXT_MAX_CHARS),
                    "p99_s": _f(int, float, valid=TIME_S),
                    "min_throughput_per_s": _f(int, float, valid=RATE),
                    "scenario": _f(str, choices=SLA_SCENARIOS),
                    "note": TEXT,
                },
            ),
        },
    ),
    "risks": _f(
        list,
        item={
            "description": _f(str, required=True, max_chars=TEXT_MAX_CHARS),
            "level": _f(str, choices=RISK_LEVELS),
            "likelihood": _f(str, choices=RISK_LEVELS),
            "owner": TEXT,
            "mitigation": TEXT,
        },
    ),
    "rollback": _f(
        dict,
        item={
            "boundary": TEXT,
            "trigger": TEXT,
            "procedure": TEXT,
            "fallback": TEXT,
        },
    ),
    "disproof": _f(
        list,
        item={
            "statement": _f(str, required=True, max_chars=TEXT_MAX_CHARS),
            "workload": _f(str, valid=GLOB, max_chars=TEXT_MAX_CHARS),
            "metric": _f(str, choices=DISPROOF_METRICS),
            "comparison": _f(str, choices=COMPARISONS),
            "threshold": NUMBER,
        },
    ),
    "evidence": _f(dict, item={k: PATHS for k in EVIDENCE_KINDS}),
    "answers": _f(dict),  # item ids -> {answer, evidence}; checked against the rubric later
    "decision": _f(
        dict,
        item={
            "status": _f(str, choices=DECISION_STATUSES),
            "date": _f(str, dt.date, dt.datetime, valid=DATE),
            "signed_off_by": TEXT,
            "supersedes": TEXT,
            "note": TEXT,
        },
    ),
}
ANSWER_SCHEMA = {"answer": _f(str, required=True, max_chars=ANSWER_MAX_CHARS), "evidence": TEXT}


@dataclass(frozen=True)
class SlaTarget:
    workload: str
    p99_s: float | None = None
    min_throughput_per_s: float | None = None
    scenario: str = "server"
    note: str = ""


@dataclass(frozen=True)
class Risk:
    description: str
    level: str = ""
    likelihood: str = ""
    owner: str = ""
    mitigation: str = ""


@dataclass(frozen=True)
class Disproof:
    statement: str
    workload: str = ""
    metric: str = ""
    comparison: str = ""
    threshold: float | None = None

    @property
    def machine_checkable(self) -> bool:
        return bool(self.workload and self.metric and self.comparison) and (
            self.threshold is not None
        )


@dataclass(frozen=True)
class Answer:
    item: str
    answer: str
    evidence: str = ""
    evidence_path: Path | None = None


@dataclass(frozen=True)
class Review:
    path: Path
    folder: Path
    title: str
    summary: str
    baseline: Path
    candidates: tuple[Path, ...]
    device_profile: Path | None = None
    owner_name: str = ""
    owner_team: str = ""
    reviewers: tuple[str, ...] = ()
    sla_load: str = ""
    sla_targets: tuple[SlaTarget, ...] = ()
    risks: tuple[Risk, ...] = ()
    rollback: dict = field(default_factory=dict)
    disproof: tuple[Disproof, ...] = ()
    evidence: dict = field(default_factory=dict)  # kind -> tuple of resolved paths
    answers: dict = field(default_factory=dict)  # item id -> Answer
    decision: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict)
    hypothesis: str = "improvement"

    def relative(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.folder).as_posix()
        except ValueError:
            return str(path)


def _type_names(types: tuple[type, ...]) -> str:
    names = {
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        list: "array",
        dict: "table",
        dt.date: "date",
        dt.datetime: "date-time",
    }
    return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types))


def validate_against(value: object, schema: dict, where: str, file: Path) -> None:
    if not isinstance(value, dict):
        raise InputError(f"{file}: {where or 'the file'} must be a table")
    for key in value:
        if key not in schema:
            raise InputError(
                f"{file}: unknown key {_join(where, key)!r}{closest(key, schema)}; "
                f"expected one of {', '.join(schema)}"
            )
    for key, spec in schema.items():
        name = _join(where, key)
        if key not in value:
            if spec.required:
                raise InputError(f"{file}: required key {name!r} is missing")
            continue
        v = value[key]
        # TOML booleans are ints in Python: never accept one where a number is expected.
        if (isinstance(v, bool) and bool not in spec.types) or not isinstance(v, spec.types):
            raise InputError(
                f"{file}: key {name!r} must be a {_type_names(spec.types)}, "
                f"got {type(v).__name__} {shown(v)}"
            )
        if spec.valid is not None and not spec.valid[0](v):
            raise InputError(f"{file}: key {name!r} is {shown(v)}; expected {spec.valid[1]}")
        if spec.max_chars is not None and isinstance(v, str) and len(v) > spec.max_chars:
            raise InputError(
                f"{file}: key {name!r} is {len(v):,} characters; the cap is "
                f"{spec.max_chars:,}: shorten it (or link to a document under the review's "
                "folder)"
            )
        if spec.choices and v not in spec.choices:
            raise InputError(
                f"{file}: key {name!r} is {shown(v)}{closest(str(v)[:200], spec.choices)}; "
                "expected one "
                f"of {', '.join(spec.choices)}"
            )
        if isinstance(v, list):
            for i, element in enumerate(v):
                if spec.item is not None:
                    validate_against(element, spec.item, f"{name}[{i}]", file)
                elif spec.each and not isinstance(element, spec.each):
                    raise InputError(
                        f"{file}: {name}[{i}] must be a {_type_names(spec.each)}, "
                        f"got {type(element).__name__}"
                    )
        elif isinstance(v, dict) and spec.item is not None:
            validate_against(v, spec.item, name, file)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


# What a disproof threshold can be, by the metric it is compared with: ratios and times are
# positive; the memory-stall fraction is a share of time; MFU is a share of the peak that a
# workload beating the roofline may exceed, so only its floor is fixed.
THRESHOLD_RANGES = {
    **{m: (POSITIVE[0], "above 0 (a ratio)") for m in DISPROOF_METRICS if m.endswith("_ratio")},
    "p50_s": (POSITIVE[0], "above 0 (seconds)"),
    "p99_s": (POSITIVE[0], "above 0 (seconds)"),
    "memory_stall_fraction": (lambda v: 0 <= v <= 1, "from 0 to 1 (a fraction of time)"),
    "mfu": (lambda v: v >= 0, "0 or more (a fraction of the peak)"),
}


def _threshold_in_range(d: dict, where: str, file: Path) -> None:
    metric, threshold = d.get("metric"), d.get("threshold")
    if metric in THRESHOLD_RANGES and threshold is not None:
        test, expected = THRESHOLD_RANGES[metric]
        if not test(threshold):
            raise InputError(
                f"{file}: key '{where}.threshold' is {threshold!r} for metric {metric!r}; "
                f"expected {expected}"
            )


def resolve_inside(
    folder: Path, relative: str, key: str, file: Path, allow_outside: bool, must_exist: bool = True
) -> Path:
    """Resolve a path given in the review file; refuse one that leaves the review's folder."""
    if not relative.strip():
        raise InputError(f"{file}: key {key!r} is an empty path")
    try:
        path = (folder / relative).resolve()
        exists = path.exists()
    except (OSError, ValueError) as exc:  # a NUL byte, a name too long, a loop of links
        raise InputError(
            f"{file}: key {key!r} = {shown(relative)} is not a usable path ({shown(str(exc), 160)})"
        ) from exc
    if not allow_outside and not path.is_relative_to(folder):
        raise InputError(
            f"{file}: key {key!r} = {shown(relative)} leaves the review's folder {folder}; "
            "move the "
            "artifact into the folder, or pass --allow-outside"
        )
    if must_exist and not exists:
        raise InputError(
            f"{file}: key {key!r} = {shown(relative)} does not exist (looked for "
            f"{shown(str(path), 160)}); fix the "
            "path, relative to the review file"
        )
    if must_exist and path.is_dir() and not (path / "run.json").is_file():
        raise InputError(
            f"{file}: key {key!r} = {shown(relative)} is a folder without a run.json; point "
            "at a run "
            "bundle folder or at a file"
        )
    return path


def load_review(path: Path | str, allow_outside: bool = False) -> Review:
    """Read and validate a review file. The file is only read, never modified."""
    path = Path(path)
    doc = read_toml(path)
    validate_against(doc, SCHEMA, "", path)
    if doc["schema_version"] != SCHEMA_VERSION:
        raise InputError(
            f"{path}: schema_version {doc['schema_version']} but this reviewkit reads version "
            f"{SCHEMA_VERSION}; convert the file or use the reviewkit release that wrote it"
        )
    folder = path.resolve().parent
    runs = doc["runs"]
    if not runs["candidates"]:
        raise InputError(f"{path}: key 'runs.candidates' is empty; name at least one run bundle")
    baseline = resolve_inside(folder, runs["baseline"], "runs.baseline", path, allow_outside)
    candidates = tuple(
        resolve_inside(folder, c, f"runs.candidates[{i}]", path, allow_outside)
        for i, c in enumerate(runs["candidates"])
    )
    device_profile = (
        resolve_inside(folder, runs["device_profile"], "runs.device_profile", path, allow_outside)
        if runs.get("device_profile")
        else None
    )
    evidence = {}
    for kind, value in doc.get("evidence", {}).items():
        values = [value] if isinstance(value, str) else value
        evidence[kind] = tuple(
            resolve_inside(folder, v, f"evidence.{kind}", path, allow_outside) for v in values
        )
    answers = {}
    for item_id, raw in doc.get("answers", {}).items():
        validate_against(raw, ANSWER_SCHEMA, f"answers.{item_id}", path)
        pointer = raw.get("evidence", "")
        target = None
        if pointer:
            file_part = pointer.split("#", 1)[0]
            target = resolve_inside(
                folder, file_part, f"answers.{item_id}.evidence", path, allow_outside
            )
        answers[item_id] = Answer(item_id, raw["answer"], pointer, target)
    for i, d in enumerate(doc.get("disproof", [])):
        _threshold_in_range(d, f"disproof[{i}]", path)
    decision = dict(doc.get("decision", {}))
    if isinstance(decision.get("date"), dt.date):
        decision["date"] = decision["date"].isoformat()
    sla = doc.get("sla", {})
    owner = doc.get("owner", {})
    return Review(
        path=path.resolve(),
        folder=folder,
        title=doc["title"],
        summary=doc.get("summary", ""),
        baseline=baseline,
        candidates=candidates,
        device_profile=device_profile,
        owner_name=owner.get("name", "").strip(),
        owner_team=owner.get("team", "").strip(),
        reviewers=tuple(doc.get("reviewers", [])),
        sla_load=sla.get("load", ""),
        sla_targets=tuple(SlaTarget(**t) for t in sla.get("targets", [])),
        risks=tuple(Risk(**r) for r in doc.get("risks", [])),
        rollback={k: v.strip() for k, v in doc.get("rollback", {}).items()},
        disproof=tuple(Disproof(**d) for d in doc.get("disproof", [])),
        evidence=evidence,
        answers=answers,
        decision=decision,
        raw=doc,
        hypothesis=doc.get("hypothesis", "improvement"),
    )
