"""`reviewkit walk`: ask the rubric's manual questions, record each answer in the review file."""

from __future__ import annotations

import contextlib
import re
import shlex
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

import tomlkit
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from tomlkit.items import InlineTable

from reviewkit.cli.console import review_layer_table
from reviewkit.common.errors import InputError, ReviewkitError
from reviewkit.common.files import write_text_atomic
from reviewkit.common.tomlfile import closest, read_toml, tomllib
from reviewkit.review.checks import CHECKS, Context, Evidence
from reviewkit.review.gate import Finding, Report, run_check
from reviewkit.review.reviewfile import ANSWER_SCHEMA, Answer, Review, load_review, validate_against
from reviewkit.review.rubric import Rubric, RubricItem

INTERRUPTED = 130  # the shell's code for a run stopped by SIGINT, as `reviewkit run` uses
FIRST_ITEM = "senior-question"
ANSWER_PROMPT = "Answer: "
EVIDENCE_PROMPT = "Evidence pointer (path in the review folder, optional #anchor; empty for none): "
SHORT_SHA = 12
STATUS_STYLE = {"pass": "green", "warn": "yellow", "missing": "magenta", "fail": "red"}
# Manual questions an automatic check informs: its finding is shown before the question, so
# the representativeness answer starts from the trace's measured fit, not from memory.
RELATED_CHECKS = {"representativeness": "production-shape-evidence"}

InputFn = Callable[[str], str]


def manual_items(rubric: Rubric) -> list[RubricItem]:
    """The questions a person answers: `senior-question` first, then rubric order."""
    items = [i for i in rubric.items if i.manual]
    return sorted(items, key=lambda i: i.id != FIRST_ITEM)  # sorted() is stable


def pointer_problem(review: Review, pointer: str, allow_outside: bool = False) -> str | None:
    """Why an evidence pointer cannot be recorded, or None when its artifact is usable.

    Mirrors what load_review accepts, so a recorded pointer never breaks the next check; a
    folder must be a run bundle (hold run.json), because the gate fingerprints the file.
    """
    file_part = pointer.split("#", 1)[0].strip()
    if not file_part:
        return f"{pointer!r} has no path before '#'"
    try:
        path = (review.folder / file_part).resolve()
        exists = path.exists()
        bundle = path.is_dir() and (path / "run.json").is_file()
    except (OSError, ValueError) as exc:  # a NUL byte, a name too long, a loop of links
        return f"{file_part!r} is not a usable path ({exc})"
    if not allow_outside and not path.is_relative_to(review.folder):
        return (
            f"{file_part!r} leaves the review folder {review.folder}; point at an artifact "
            "inside it, or re-run with --allow-outside"
        )
    if not exists:
        return f"{file_part!r} does not exist (looked for {path})"
    if path.is_dir() and not bundle:
        return f"{file_part!r} is a folder without run.json; point at a file in it"
    return None


def normalise_pointer(review: Review, pointer: str) -> str:
    """Strip blanks; an absolute path inside the review folder becomes relative to it."""
    pointer = pointer.strip()
    file_part, sep, anchor = pointer.partition("#")
    path = Path(file_part.strip())
    if path.is_absolute():
        # Outside the folder (--allow-outside) it stays as given.
        with contextlib.suppress(OSError, ValueError):
            file_part = path.resolve().relative_to(review.folder).as_posix()
    return f"{file_part.strip()}{sep}{anchor}"


def read_answers_file(
    path: Path, review: Review, rubric: Rubric, allow_outside: bool = False
) -> list[Answer]:
    """Validate an answers file ([answers.<item-id>] tables) against the rubric and folder."""
    path = Path(path)
    doc = read_toml(path)
    for key in doc:
        if key != "answers":
            raise InputError(
                f"{path}: unknown key {key!r}{closest(key, ['answers'])}; an answers file "
                "holds only [answers.<item-id>] tables"
            )
    raw_answers = doc.get("answers")
    if not isinstance(raw_answers, dict) or not raw_answers:
        raise InputError(
            f"{path}: no [answers.<item-id>] tables; add one per question to record, with "
            "`answer` and an optional `evidence` pointer"
        )
    manual = [i.id for i in manual_items(rubric)]
    answers = []
    for item_id, raw in raw_answers.items():
        if item_id not in manual:
            item = rubric.item(item_id)
            why = (
                f"is checked automatically (check {item.check!r}), not asked"
                if item is not None
                else f"names no manual question of rubric {rubric.path}"
            )
            raise InputError(
                f"{path}: [answers.{item_id}] {why}{closest(item_id, manual)}; the questions "
                f"are {', '.join(manual)}"
            )
        validate_against(raw, ANSWER_SCHEMA, f"answers.{item_id}", path)
        text = raw["answer"].strip()
        if not text:
            raise InputError(
                f"{path}: key 'answers.{item_id}.answer' is empty; write the answer or remove "
                f"[answers.{item_id}]"
            )
        pointer = raw.get("evidence", "").strip()
        if pointer:
            problem = pointer_problem(review, pointer, allow_outside)
            if problem:
                raise InputError(
                    f"{path}: key 'answers.{item_id}.evidence': {problem}; the path is relative "
                    f"to the review file {review.path}"
                )
            pointer = normalise_pointer(review, pointer)
        answers.append(Answer(item_id, text, pointer))
    return answers


def _edit(original: str, answers: Sequence[Answer]) -> str:
    """The review text with the answers set; everything outside [answers] kept as written."""
    doc = tomlkit.parse(original)
    if "answers" not in doc:
        # A super-table prints only its [answers.<id>] children, the form the samples use.
        doc.add("answers", tomlkit.table(is_super_table=True))
    container = doc["answers"]
    inline = isinstance(container, InlineTable)
    for a in answers:
        if a.item in container:
            # Update in place so comments inside the answer's table survive a revisit.
            table = container[a.item]
            table["answer"] = a.answer
            if a.evidence:
                table["evidence"] = a.evidence
            elif "evidence" in table:
                del table["evidence"]
            continue
        table = tomlkit.inline_table() if inline else tomlkit.table()
        table.add("answer", a.answer)
        if a.evidence:
            table.add("evidence", a.evidence)
        if not inline:
            # tomlkit adds no blank line after a new table: keep the one before the next header.
            table.add(tomlkit.nl())
        container[a.item] = table
    text = tomlkit.dumps(doc)
    if text.endswith("\n\n") and not original.endswith("\n\n"):
        text = text[:-1]  # the blank line above was the file's last: no new trailing blank
    if "\r\n" in original and not re.search(r"(?<!\r)\n", original):
        text = re.sub(r"(?<!\r)\n", "\r\n", text)  # a CRLF file stays CRLF throughout
    return text


def record_answers(
    review_path: Path | str, answers: Sequence[Answer], allow_outside: bool = False
) -> None:
    """Write answers into [answers.<id>] of the review file, atomically; nothing else changes.

    The file is read again each time, so edits made in an editor between two questions stay.
    The new text must parse to exactly the old content plus the answers, and load as a review,
    before it replaces the file; a failure leaves the file as it was.
    """
    path = Path(review_path).resolve()  # write through a link to its target, not over it
    try:
        original = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot be read to record the answers ({exc})") from exc
    try:
        expected = tomllib.loads(original)
        text = _edit(original, answers)
        for a in answers:
            expected.setdefault("answers", {})[a.item] = {"answer": a.answer} | (
                {"evidence": a.evidence} if a.evidence else {}
            )
        ok = tomllib.loads(text) == expected
    except Exception as exc:  # tomlkit raises several types for shapes it cannot edit
        raise InputError(
            f"{path}: cannot record the answers ({type(exc).__name__}: {exc}); write "
            "[answers] as [answers.<item-id>] tables and re-run"
        ) from exc
    if not ok:
        raise ReviewkitError(
            f"{path}: recording the answers would change more than [answers]; the file was not "
            "changed (please report this with the file)"
        )

    def still_valid(tmp: Path) -> None:
        try:
            load_review(tmp, allow_outside=allow_outside)  # same folder: same relative paths
        except InputError as exc:
            raise InputError(
                f"{path}: the answers would leave an invalid review ({exc}); the file was not "
                "changed"
            ) from exc

    try:
        write_text_atomic(path, text, mode=stat.S_IMODE(path.stat().st_mode), check=still_valid)
    except OSError as exc:
        raise InputError(
            f"{path}: cannot write next to the review file ({exc}); check the folder's permissions"
        ) from exc


# --- what the automatic checks found ----------------------------------------------------------


def _check_result(report: Report, name: str) -> tuple[str, str, tuple[Evidence, ...]]:
    """A check's (status, summary, evidence): the rubric's finding, or the check run directly."""
    found: Finding | None = next((f for f in report.findings if f.item.check == name), None)
    if found is not None:
        return found.status, found.summary, found.evidence
    ctx = Context(
        report.review, report.baseline, list(report.review_candidates), list(report.comparisons),
        primary=report.primary, cited=report.cited,
    )  # fmt: skip
    r = CHECKS[name](ctx)
    return r.status, r.summary, r.evidence


def _example_pointer(report: Report) -> str:
    """A pointer to suggest: the first candidate's run.json at its model (or slowest) workload."""
    if not report.review_candidates:
        return ""
    path, run = report.review_candidates[0]
    file = report.review.relative(path / "run.json" if path.is_dir() else path)
    timed = [w for w in run.workloads if w.stats]
    models = [w for w in timed if w.layer_type == "model"] or timed
    if not models:
        return file
    slowest = max(models, key=lambda w: w.stats.p50_s)
    return f"{file}#{slowest.id}"


def _show_evidence(report: Report, console: Console) -> None:
    say = _sayer(console)
    say("[bold]What the automatic checks found[/]")
    status, summary, evidence = _check_result(report, "bottleneck-per-layer")
    say("  Bottleneck class per layer type:")
    if status != "pass":
        say(f"    [{STATUS_STYLE.get(status, 'red')}]{status.upper()}[/] {escape(summary)}")
    views = _layer_views(report)
    for e in evidence:
        if e.kind == "workload":
            # the layer type's class with its share of roof, overhead and lever, in the words
            # the packet uses; the check's own label where the run has no such layer type
            say(f"    {escape(_layer_line(e.label, views))}")
            if e.value:
                say(f"      [dim]slowest {escape(e.value)} · reproduce: {escape(e.reproduce)}[/]")
    table = review_layer_table(report)
    if table is not None:
        say("  MFU / memory-stall fraction per layer type:")
        console.print(table, highlight=False)
    flags = report.red_flags
    say(f"  Red flags raised: {len(flags) or 'none'}")
    for f in flags:
        say(
            f"    [{STATUS_STYLE.get(f.status, 'red')}]{f.status.upper()}[/] {escape(f.item.title)}"
        )
    artifacts = [e for e in evidence if e.kind == "artifact"]
    if artifacts:
        say("  Artifacts:")
        for e in artifacts:
            say(f"    {escape(e.label)}: {escape(e.path)} (sha256 {e.sha256[:SHORT_SHA]})")


def _layer_views(report: Report) -> dict[str, dict]:
    """Each candidate layer type's class, share of roof, overhead (or that it was not measured)
    and lever, from the run's layer aggregates, by the "candidate N layer-type" the check's
    evidence names it with."""
    from reviewkit.render.packet.bottlenecks import layer_view

    return {
        f"candidate {i + 1} {layer_type}": layer_view(agg)
        for i, (_, run) in enumerate(report.review_candidates)
        for layer_type, agg in run.layer_types.items()
    }


def _layer_line(label: str, views: dict[str, dict]) -> str:
    """One layer type's line: `candidate 1 gemm: compute-bound (MFU, memory-stall); roof ..% of
    the kernel time; overhead ..%, inefficiency ..%; lever: ..`, else the check's own label."""
    from reviewkit.common.format import pct
    from reviewkit.render.packet.bottlenecks import overhead_text, roof_text

    name = label.split(":", 1)[0]
    view = views.get(name)
    if view is None:
        return label
    parts = [
        f"{view['class_text']} (MFU {pct(view['mfu'])}, memory-stall {pct(view['memory_stall'])})",
        roof_text(view),
        overhead_text(view),
    ]
    if view["lever"]:
        parts.append(f"lever: {view['lever']}")
    return f"{name}: {'; '.join(parts)}"


def _show_related(report: Report, name: str, say: Callable[..., None]) -> None:
    status, summary, evidence = _check_result(report, name)
    say(f"  The {name} check:")
    say(f"    [{STATUS_STYLE.get(status, 'red')}]{status.upper()}[/] {escape(summary)}")
    for e in evidence:
        if e.kind in ("number", "text"):
            say(f"    {escape(e.label)}: {escape(e.value)}")


# --- the walk ---------------------------------------------------------------------------------


def _sayer(console: Console) -> Callable[..., None]:
    # No highlighting, and styles only around whole phrases: rich would colour digits and paths
    # mid-text, and a phrase should reach the terminal in one piece, as a test matches it.
    # Lines are soft-wrapped (no newline inserted) so a path or a command stays copyable; only
    # prose (wrap=True) is wrapped at word boundaries by rich.
    def say(text: str, wrap: bool = False) -> None:
        console.print(text, highlight=False, soft_wrap=not wrap)

    return say


def _ask_question(
    item: RubricItem,
    number: int,
    total: int,
    report: Report,
    current: Answer | None,
    allow_outside: bool,
    input_fn: InputFn,
    console: Console,
) -> Answer | None:
    """Show one question with its evidence and read an answer; None when it is skipped."""
    say = _sayer(console)
    console.rule(Text(f"Question {number} of {total} · {item.id} ({item.severity})"))
    say(f"[bold]{escape(item.title)}[/]")
    say(escape(item.question), wrap=True)
    say(f"[dim]Needs:[/] {escape(item.evidence)}", wrap=True)
    say("")
    _show_evidence(report, console)
    related = RELATED_CHECKS.get(item.id)
    if related in CHECKS:
        _show_related(report, related, say)
    say("")
    if current is not None:
        say(f"Current answer: {escape(current.answer)}", wrap=True)
        say(f"Current evidence: {escape(current.evidence or 'none')}")
        say("[dim](an empty answer keeps the current one)[/]")
    else:
        say("[dim](an empty answer skips this question)[/]")
    text = input_fn(ANSWER_PROMPT).strip()
    if not text:
        return None
    example = _example_pointer(report)
    if example:
        say(f"[dim]e.g. {escape(example)}[/]")
    review = report.review
    while True:
        pointer = input_fn(EVIDENCE_PROMPT).strip()
        if not pointer:
            return Answer(item.id, text)
        problem = pointer_problem(review, pointer, allow_outside)
        if problem is None:
            return Answer(item.id, text, normalise_pointer(review, pointer))
        say(f"[red]Refused: {escape(problem)}[/]; try again, or leave it empty for none")


def _walk_from_file(
    review_path: Path, report: Report, answers_file: Path, allow_outside: bool, console: Console
) -> int:
    review = report.review
    answers = read_answers_file(answers_file, review, report.rubric, allow_outside)
    record_answers(review_path, answers, allow_outside)
    say = _sayer(console)
    for a in answers:
        say(f"recorded {escape(f'[answers.{a.item}]')} (evidence: {escape(a.evidence or 'none')})")
    replaced = [a.item for a in answers if a.item in review.answers]
    say(
        f"Recorded {len(answers)} answer(s) from {escape(str(answers_file))} into "
        f"{escape(str(review_path))}"
        + (f" ({len(replaced)} replaced an earlier answer)" if replaced else "")
        + "."
    )
    say(f"Next: run `reviewkit check {escape(shlex.quote(str(review_path)))}` to see the gate.")
    return 0


def run_walk(
    review_path: Path | str,
    rubric_path: Path | str | None = None,
    *,
    redo_all: bool = False,
    answers_file: Path | str | None = None,
    allow_outside: bool = False,
    input_fn: InputFn = input,
    console: Console | None = None,
) -> int:
    """Ask the unanswered manual questions (all with redo_all) and record each answer at once.

    With answers_file, record its answers without asking. Returns 0, or 130 when stopped by
    Ctrl-C or end of input (the answers given before stay recorded). Bad input raises InputError.
    """
    if console is None:
        from reviewkit.cli.console import stdout_console

        console = stdout_console()
    say = _sayer(console)
    review_path = Path(review_path)
    # The same loading as `reviewkit check`, so a broken review fails with its usual message.
    report = run_check(review_path, rubric_path, allow_outside=allow_outside)
    if answers_file is not None:
        return _walk_from_file(review_path, report, Path(answers_file), allow_outside, console)

    review = report.review
    items = manual_items(report.rubric)
    shown_path = escape(shlex.quote(str(review_path)))
    if not items:
        say(f"Rubric {escape(report.rubric.name)} has no manual questions; nothing to ask.")
        return 0
    answered_before = [i.id for i in items if i.id in review.answers]
    say(f"[bold]{escape(review.title)}[/] · {len(items)} senior review question(s)")
    say(
        f"Each answer is written to {escape(str(review_path))} as it is given; Ctrl-C stops "
        "and keeps them."
    )
    if redo_all:
        todo = items
        if answered_before:
            say(f"Asking all {len(items)} questions again (--all).")
    else:
        todo = [i for i in items if i.id not in review.answers]
        if answered_before:
            say(
                f"{len(answered_before)} of {len(items)} questions already answered "
                f"({', '.join(answered_before)}); use --all to revisit"
            )
    recorded: list[str] = []
    try:
        for n, item in enumerate(todo, 1):
            answer = _ask_question(
                item,
                n,
                len(todo),
                report,
                review.answers.get(item.id),
                allow_outside,
                input_fn,
                console,
            )
            if answer is None:
                say(f"[dim]skipped {escape(item.id)}[/]")
                continue
            record_answers(review_path, [answer], allow_outside)
            recorded.append(item.id)
            say(
                f"[green]recorded {escape(f'[answers.{item.id}]')}[/] in {escape(str(review_path))}"
                + ("" if answer.evidence else " (no evidence pointer: the check will warn)")
            )
    except (KeyboardInterrupt, EOFError):
        say("")
        kept = (
            f"kept {len(recorded)} answer(s) recorded before: {', '.join(recorded)}"
            if recorded
            else "nothing was recorded in this walk"
        )
        say(f"[yellow]Stopped; {kept}.[/] Run `reviewkit walk {shown_path}` to continue.")
        return INTERRUPTED
    have = len(set(answered_before) | set(recorded))
    console.rule()
    say(
        f"Answered {len(recorded)} of {len(todo)} question(s) asked; {have} of {len(items)} "
        "now have an answer."
    )
    missing = [i.id for i in items if i.id not in answered_before and i.id not in recorded]
    if missing:
        say(f"Unanswered: {', '.join(missing)}.")
    say(f"Next: run `reviewkit check {shown_path}` to see the gate.")
    return 0
