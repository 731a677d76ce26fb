"""`reviewkit walk`: the senior questions asked in a terminal, answers kept in the review file."""

import copy
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from rich.console import Console
from runfactory import complete_review, write_review

from reviewkit.cli.walk import (
    ANSWER_PROMPT,
    EVIDENCE_PROMPT,
    INTERRUPTED,
    manual_items,
    record_answers,
    run_walk,
)
from reviewkit.common.errors import InputError
from reviewkit.common.tomlfile import tomllib
from reviewkit.review.gate import run_check
from reviewkit.review.reviewfile import Answer

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "review-bf16-transformer"
SENIOR_Q = "Which first-principles bottleneck class explains the symptom"
PRIMARY_Q = "Which one primary metric trend does the claim rest on"
REPR_Q = "Are the measured workloads representative of production"
POINTER = "runs/cand/run.json#model.toy-decoder.b1s256.bf16"


def decorated_review(folder: Path, answers: dict | None = None, drop_long_window=False) -> Path:
    """A review folder whose review.toml carries comments and hand-made spacing."""
    review = complete_review()
    del review["answers"]
    if drop_long_window:
        del review["evidence"]["long_window"]  # raises the long-window red flag
    path = write_review(folder, review)
    text = path.read_text()
    for old, new in [
        ('title = "', 'title   =   "'),
        ("[runs]\n", "# The two bundles compared; both measured on the same host.\n[runs]\n"),
        ("[decision]\n", "\n\n# Decided after the walk.\n[decision]\n"),
        ('status = "proposed"', 'status = "proposed"    # not yet signed'),
    ]:
        assert old in text
        text = text.replace(old, new, 1)
    text = "# Review: toy decoder in bf16.\n#   hand-written header, kept as is\n\n" + text
    if answers:
        text += "".join(
            f'\n[answers.{k}]\nanswer = "{v["answer"]}"\nevidence = "{v["evidence"]}"\n'
            for k, v in answers.items()
        )
    path.write_text(text)
    assert tomllib.loads(text)["title"] == review["title"]
    return path


def outside_answers(text: str) -> list[str]:
    """The lines that belong to no [answers...] table (the blank lines above one belong to it)."""
    kept, inside = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            inside = stripped.startswith(("[answers]", "[answers."))
            while inside and kept and not kept[-1].strip():
                kept.pop()
        if not inside:
            kept.append(line)
    return kept


def spawn(*args: str) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "reviewkit", "walk", *args],
        encoding="utf-8",
        timeout=60,
        env={**os.environ, "COLUMNS": "120"},
        dimensions=(40, 120),
    )
    child.logfile_read = io.StringIO()  # everything the person saw, for "not asked" checks
    return child


def answer(child: pexpect.spawn, text: str, *pointers: str) -> None:
    """Type an answer, then each pointer in turn at the evidence prompt."""
    child.expect_exact(ANSWER_PROMPT)
    child.sendline(text)
    for p in pointers:
        child.expect_exact(EVIDENCE_PROMPT)
        child.sendline(p)


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus is None, child.logfile_read.getvalue()
    return child.exitstatus


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "reviewkit", "walk", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


# --- through a pseudo-terminal, as a person types ---------------------------------------------


def test_walk_in_a_terminal_records_answers_and_keeps_the_layout(tmp_path):
    path = decorated_review(tmp_path, drop_long_window=True)
    original = path.read_text()
    cand_sha = hashlib.sha256((tmp_path / "runs" / "cand" / "run.json").read_bytes()).hexdigest()

    child = spawn(str(path))
    # The senior question comes first, with what the automatic checks found.
    child.expect_exact("Question 1 of 3 · senior-question")
    child.expect_exact(SENIOR_Q)
    child.expect_exact("candidate 1 gemm: compute-bound (MFU ")
    child.expect_exact("reproduce: reviewkit run --only 'model.toy-decoder.b1s256.bf16'")
    child.expect_exact("Red flags raised: 1")
    child.expect_exact("Thermal and long-window stability")
    child.expect_exact(f"runs/cand/run.json (sha256 {cand_sha[:12]})")
    answer(
        child, "Compute-bound: every gemm and the model run near the bf16 ceiling", "runs/nope.json"
    )
    child.expect_exact("Refused: 'runs/nope.json' does not exist")
    child.expect_exact(EVIDENCE_PROMPT)
    child.sendline(POINTER)
    child.expect_exact("recorded [answers.senior-question]")
    # Recorded at once, before the next question is asked.
    assert tomllib.loads(path.read_text())["answers"]["senior-question"]["evidence"] == POINTER

    child.expect_exact(PRIMARY_Q)
    answer(child, "p99 of model.toy-decoder.b1s256", "runs/cand/run.json")
    child.expect_exact(REPR_Q)
    # The trace's measured fit is shown before the question is answered: runfactory's
    # production mix is 90% covered (700 + 200 of 1000 us at the suite's own shapes).
    child.expect_exact("The production-shape-evidence check:")
    child.expect_exact("covers 90.0% of production time")
    answer(child, "matches the production trace", "evidence/trace.json#ops")
    child.expect_exact("Answered 3 of 3 question(s) asked")
    child.expect_exact("reviewkit check")
    assert finish(child) == 0

    text = path.read_text()
    assert tomllib.loads(text)["answers"] == {
        "senior-question": {
            "answer": "Compute-bound: every gemm and the model run near the bf16 ceiling",
            "evidence": POINTER,
        },
        "primary-metric": {
            "answer": "p99 of model.toy-decoder.b1s256",
            "evidence": "runs/cand/run.json",
        },
        "representativeness": {
            "answer": "matches the production trace",
            "evidence": "evidence/trace.json#ops",
        },
    }
    # Comments, spacing and order outside [answers] are byte for byte the same.
    assert outside_answers(text) == original.splitlines()
    assert text.startswith(original)  # the answers were appended after the last table
    assert not list(tmp_path.glob(".review.toml.*"))  # no temporary file left behind

    # The gate and the packet read the answers: the manual items now pass.
    report = run_check(path)
    manual = {f.item.id: f.status for f in report.findings if f.item.manual}
    assert manual == {
        "senior-question": "pass",
        "primary-metric": "pass",
        "representativeness": "pass",
    }
    senior = next(f for f in report.findings if f.item.id == "senior-question")
    assert [e.path for e in senior.evidence if e.kind == "artifact"] == ["runs/cand/run.json"]


def test_walk_resumes_and_all_asks_again(tmp_path):
    done = {"senior-question": {"answer": "compute-bound", "evidence": "runs/cand/run.json"}}
    path = decorated_review(tmp_path, answers=done)
    before = path.read_bytes()

    child = spawn(str(path))
    child.expect_exact("1 of 3 questions already answered (senior-question); use --all to revisit")
    child.expect_exact("Question 1 of 2 · primary-metric")
    answer(child, "")  # an empty answer skips
    child.expect_exact("skipped primary-metric")
    child.expect_exact(REPR_Q)
    answer(child, "")
    child.expect_exact("Unanswered: primary-metric, representativeness.")
    assert finish(child) == 0
    assert SENIOR_Q not in child.logfile_read.getvalue()
    assert path.read_bytes() == before  # nothing answered, nothing written

    child = spawn(str(path), "--all")
    child.expect_exact("Question 1 of 3 · senior-question")
    child.expect_exact(SENIOR_Q)
    child.expect_exact("Current answer: compute-bound")
    answer(child, "memory-bound after all", "")  # no pointer this time
    child.expect_exact("no evidence pointer: the check will warn")
    answer(child, "")
    answer(child, "")
    assert finish(child) == 0
    assert tomllib.loads(path.read_text())["answers"] == {
        "senior-question": {"answer": "memory-bound after all"}
    }
    assert outside_answers(path.read_text()) == outside_answers(before.decode())


def test_ctrl_c_keeps_the_answers_given(tmp_path):
    path = decorated_review(tmp_path)
    child = spawn(str(path))
    child.expect_exact(SENIOR_Q)
    answer(child, "compute-bound", POINTER)
    child.expect_exact("recorded [answers.senior-question]")
    child.expect_exact(PRIMARY_Q)
    child.expect_exact(ANSWER_PROMPT)
    child.sendintr()
    child.expect_exact("Stopped; kept 1 answer(s) recorded before: senior-question")
    assert finish(child) == INTERRUPTED
    answers = tomllib.loads(path.read_text())["answers"]
    assert answers == {"senior-question": {"answer": "compute-bound", "evidence": POINTER}}
    assert not list(tmp_path.glob(".review.toml.*"))


# --- --answers FILE, without asking -----------------------------------------------------------


def test_answers_file_records_without_asking(tmp_path):
    path = decorated_review(tmp_path / "r")
    original = path.read_text()
    answers = tmp_path / "answers.toml"
    answers.write_text(
        '[answers.senior-question]\nanswer = "compute-bound"\n'
        f'evidence = "{POINTER}"\n\n'
        '[answers.representativeness]\nanswer = "no trace yet"\n'
    )
    r = cli(str(path), "--answers", str(answers))
    assert r.returncode == 0, r.stderr
    assert "Recorded 2 answer(s)" in r.stdout
    text = path.read_text()
    assert tomllib.loads(text)["answers"] == {
        "senior-question": {"answer": "compute-bound", "evidence": POINTER},
        "representativeness": {"answer": "no trace yet"},
    }
    assert text.startswith(original)
    status = {f.item.id: f.status for f in run_check(path).findings}
    assert status["senior-question"] == "pass" and status["representativeness"] == "warn"


@pytest.mark.parametrize(
    "content,needles",
    [
        (
            '[answers.senior-questoin]\nanswer = "x"\n',
            ["names no manual question", "did you mean 'senior-question'"],
        ),
        (
            '[answers.primary-metric]\nanswer = "x"\nevidence = "runs/missing.json#a"\n',
            ["key 'answers.primary-metric.evidence'", "'runs/missing.json' does not exist"],
        ),
        (
            '[answers.bottleneck-per-layer]\nanswer = "x"\n',
            ["checked automatically", "senior-question, primary-metric, representativeness"],
        ),
        ('[answers.senior-question\nanswer = "x"\n', ["malformed TOML", "line 1"]),
        (
            '[answers.senior-question]\nanswer = "  "\n',
            ["'answers.senior-question.answer' is empty"],
        ),
        ('[answer.senior-question]\nanswer = "x"\n', ["unknown key 'answer'", "did you mean"]),
    ],
    ids=["unknown-id", "missing-evidence", "automatic-item", "malformed", "empty", "typo-table"],
)
def test_answers_file_errors_exit_2_and_change_nothing(tmp_path, content, needles):
    path = decorated_review(tmp_path / "r")
    before = path.read_bytes()
    answers = tmp_path / "answers.toml"
    answers.write_text(content)
    r = cli(str(path), "--answers", str(answers))
    assert r.returncode == 2, (r.stdout, r.stderr)
    message = " ".join(r.stderr.split())  # rich may wrap the error line
    assert str(answers) in message
    for needle in needles:
        assert needle in message, message
    assert path.read_bytes() == before


def test_an_invalid_review_fails_before_any_question(tmp_path):
    path = decorated_review(tmp_path)
    path.write_text(path.read_text().replace('baseline = "runs/base"', 'baseline = "runs/gone"'))
    r = cli(str(path))
    assert r.returncode == 2
    assert "'runs.baseline'" in r.stderr and "does not exist" in r.stderr
    assert "Answer:" not in r.stdout


# --- the same walk driven in-process ----------------------------------------------------------


def scripted(lines):
    """An input function that types the given lines, then hits Ctrl-D; records the prompts."""
    queue, prompts = list(lines), []

    def input_fn(prompt):
        prompts.append(prompt)
        if not queue:
            raise EOFError
        return queue.pop(0)

    return input_fn, prompts


def quiet_console() -> Console:
    return Console(file=io.StringIO(), width=120, color_system=None)


def test_senior_question_is_asked_first_then_rubric_order(tmp_path):
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(
        '[rubric]\nname = "ordered"\n\n[[sections]]\nid = "s"\n\n'
        + "".join(
            f'[[sections.items]]\nid = "{i}"\ntitle = "T {i}"\nquestion = "Q {i}?"\n'
            f'severity = "major"\ncheck = "{check}"\nevidence = "e"\n\n'
            for i, check in [
                ("zeta", "manual"),
                ("bottleneck-per-layer", "bottleneck-per-layer"),
                ("senior-question", "manual"),
                ("alpha", "manual"),
            ]
        )
    )
    path = decorated_review(tmp_path / "r")
    from reviewkit.review.checks import CHECKS
    from reviewkit.review.rubric import load_rubric

    assert [i.id for i in manual_items(load_rubric(rubric, CHECKS))] == [
        "senior-question",
        "zeta",
        "alpha",
    ]
    console = quiet_console()
    input_fn, prompts = scripted(["first", "", "second", "runs/base/run.json", "third", ""])
    assert run_walk(path, rubric, input_fn=input_fn, console=console) == 0
    out = console.file.getvalue()
    assert out.index("Q senior-question?") < out.index("Q zeta?") < out.index("Q alpha?")
    assert prompts == [ANSWER_PROMPT, EVIDENCE_PROMPT] * 3
    assert tomllib.loads(path.read_text())["answers"] == {
        "senior-question": {"answer": "first"},
        "zeta": {"answer": "second", "evidence": "runs/base/run.json"},
        "alpha": {"answer": "third"},
    }


def test_end_of_input_stops_like_ctrl_c(tmp_path):
    path = decorated_review(tmp_path)
    console = quiet_console()
    input_fn, _ = scripted(["compute-bound", POINTER, "p99"])  # EOF at the evidence prompt
    assert run_walk(path, input_fn=input_fn, console=console) == INTERRUPTED
    assert list(tomllib.loads(path.read_text())["answers"]) == ["senior-question"]
    assert "kept 1 answer(s) recorded before: senior-question" in console.file.getvalue()


def test_pointer_leaving_the_folder_is_refused_unless_allowed(tmp_path):
    path = decorated_review(tmp_path / "r")
    (tmp_path / "outside.json").write_text("{}\n")
    console = quiet_console()
    input_fn, prompts = scripted(["a", "../outside.json", "runs", "evidence", ""])
    assert run_walk(path, input_fn=input_fn, console=console) == INTERRUPTED
    out = " ".join(console.file.getvalue().split())
    assert "'../outside.json' leaves the review folder" in out and "--allow-outside" in out
    assert "'runs' is a folder without run.json" in out
    assert "'evidence' is a folder without run.json" in out
    assert prompts.count(EVIDENCE_PROMPT) == 4
    assert tomllib.loads(path.read_text())["answers"] == {"senior-question": {"answer": "a"}}

    input_fn, _ = scripted(["b", str(tmp_path / "outside.json")])
    code = run_walk(
        path, redo_all=True, allow_outside=True, input_fn=input_fn, console=quiet_console()
    )
    assert code == INTERRUPTED  # Ctrl-D at the second question
    assert tomllib.loads(path.read_text())["answers"]["senior-question"] == {
        "answer": "b",
        "evidence": str(tmp_path / "outside.json"),
    }
    assert run_check(path, allow_outside=True).verdict in ("pass", "fail")  # still loads


def test_absolute_pointer_inside_the_folder_is_stored_relative(tmp_path):
    path = decorated_review(tmp_path)
    absolute = f"{tmp_path / 'runs' / 'cand' / 'run.json'}#model.x"
    input_fn, _ = scripted(["a", absolute])
    run_walk(path, input_fn=input_fn, console=quiet_console())
    answers = tomllib.loads(path.read_text())["answers"]
    assert answers["senior-question"]["evidence"] == "runs/cand/run.json#model.x"


# --- recording keeps everything outside [answers] ---------------------------------------------

HEAD = (
    'schema_version = 1\n# why: a title\ntitle = "t"\n\n'
    '[runs]\nbaseline = "b"  # base\ncandidates = ["c"]\n'
)
LAYOUTS = {
    "no-answers": HEAD + "\n[decision]\nstatus = 'go'  # kept\n",
    "between-tables": HEAD + "\n[answers.senior-question]\nanswer = 'old'  # mine\n"
    "# trailing note\n\n[decision]\nstatus = 'go'\n",
    "super-table": HEAD + "\n[answers]\n# answers below\n\n[answers.primary-metric]\n"
    "answer = 'p99'\n\n[decision]\nstatus = 'go'\n",
    "out-of-order": HEAD + "[answers.primary-metric]\nanswer = 'p99'\n[decision]\nstatus = 'go'\n"
    "[answers.representativeness]\nanswer = 'yes'\n",
    "dotted": HEAD + "\n[answers]\nsenior-question.answer = 'old'\n\n[decision]\nstatus = 'go'\n",
    "inline": "answers = { primary-metric = { answer = 'p99' } }  # inline\n"
    + HEAD
    + "[decision]\n",
    "no-final-newline": HEAD + "\n[decision]\nstatus = 'go'",
    "crlf": (HEAD + "\n[decision]\nstatus = 'go'\n").replace("\n", "\r\n"),
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_record_answers_changes_only_the_answers(tmp_path, layout):
    for name in ("b", "c"):  # load_review needs run bundle folders that hold a run.json
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text("{}")
    (tmp_path / "e.json").write_text("{}")
    path = tmp_path / "review.toml"
    original = LAYOUTS[layout]
    path.write_bytes(original.encode())
    before = tomllib.loads(original)
    new = [Answer("senior-question", 'new "quoted" \\ answer', "e.json#k"), Answer("alpha", "x")]
    record_answers(path, new)
    text = path.read_bytes().decode()
    after = tomllib.loads(text)
    expected = copy.deepcopy(before)
    expected.setdefault("answers", {}).update(
        {
            "senior-question": {"answer": 'new "quoted" \\ answer', "evidence": "e.json#k"},
            "alpha": {"answer": "x"},
        }
    )
    assert after == expected
    if layout == "inline":  # the one line holding the answers changes, nothing else
        assert text.splitlines()[1:] == original.splitlines()[1:]
        assert text.splitlines()[0].endswith("}  # inline")
    else:
        assert outside_answers(text) == outside_answers(original)
    # A header keeps the blank line above it, also where a new answer now comes first.
    if "\n\n[decision]" in original.replace("\r", ""):
        assert "\n\n[decision]" in text.replace("\r", "")
    if layout == "between-tables":
        assert "answer = 'old'" not in text and "# mine" in text and "# trailing note" in text
    if layout == "crlf":
        assert "\n" not in text.replace("\r\n", "")
    if layout == "no-answers":
        assert text.startswith(original) and not text.endswith("\n\n")


def test_record_answers_on_the_sample_review_keeps_its_comments(tmp_path):
    folder = tmp_path / "sample"
    shutil.copytree(SAMPLE, folder)
    path = folder / "review.toml"
    original = path.read_text()
    record_answers(path, [Answer("representativeness", "no production trace yet")])
    text = path.read_text()
    assert outside_answers(text) == outside_answers(original)
    assert text.splitlines()[:3] == original.splitlines()[:3]  # the comment header
    answers = tomllib.loads(text)["answers"]
    assert answers["representativeness"] == {"answer": "no production trace yet"}
    assert answers["senior-question"] == tomllib.loads(original)["answers"]["senior-question"]


def test_a_failed_write_leaves_the_file_untouched(tmp_path, monkeypatch):
    path = decorated_review(tmp_path)
    before = path.read_bytes()
    # A pointer the folder lacks: the new text would not load, so the file is not replaced.
    with pytest.raises(InputError, match="the file was not changed"):
        record_answers(path, [Answer("senior-question", "a", "runs/none.json")])
    assert path.read_bytes() == before

    def broken_replace(src, dst):
        raise KeyboardInterrupt  # Ctrl-C at the worst moment

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(KeyboardInterrupt):
        record_answers(path, [Answer("senior-question", "a")])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evidence", "review.toml", "runs"]


def _walk_evidence(path: Path) -> str:
    """What the walk shows before its first question (input ends at once)."""
    console = quiet_console()
    input_fn, _ = scripted([])
    run_walk(path, input_fn=input_fn, console=console)
    return console.file.getvalue()


def test_the_walk_shows_each_layer_types_share_of_roof_overhead_and_lever(tmp_path):
    from runfactory import WORKLOADS, samples

    review = complete_review()
    del review["answers"]
    cand = {
        "speedup": 1.0,
        "overhead_for": {name: 0.1 * median for name, *_, median in WORKLOADS},
        "samples_for": {"attention.toy-sdpa.b4s512": samples(0.08, seed=7)},
    }
    out = _walk_evidence(write_review(tmp_path, review, cand_kw=cand))
    line = next(x for x in out.splitlines() if x.strip().startswith("candidate 1 attention:"))
    assert line.strip().startswith("candidate 1 attention: compute-bound (MFU ")
    assert "% of the kernel time, below roof" in line
    assert "; overhead " in line and "%, inefficiency " in line
    assert "lever: the kernel or the mapping" in line
    gemm = next(x for x in out.splitlines() if x.strip().startswith("candidate 1 gemm:"))
    assert "below roof" not in gemm and "lever: a faster kernel" in gemm


def test_the_walk_says_overhead_was_not_measured_where_it_was_not(tmp_path):
    from runfactory import samples

    review = complete_review()
    del review["answers"]
    cand = {"speedup": 1.0, "samples_for": {"attention.toy-sdpa.b4s512": samples(0.08, seed=7)}}
    out = _walk_evidence(write_review(tmp_path, review, cand_kw=cand))
    roof = [x.strip() for x in out.splitlines() if x.strip().startswith("candidate 1 ")]
    assert len(roof) == 3  # gemm, attention, model: one line each, with its slowest below
    assert all("; overhead not measured" in x for x in roof)
    assert not any(re.search(r"overhead \d", x) for x in roof)
    attention = next(x for x in roof if x.startswith("candidate 1 attention:"))
    assert attention.startswith("candidate 1 attention: unclassified: overhead not measured (MFU")
    assert "% of the whole time (a lower bound); overhead not measured;" in attention
    assert "lever: re-measure" in attention
