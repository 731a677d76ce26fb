"""The documentation against the code: docs/commands.md against every command's --help, the
README's length, and every relative link in the README and docs/ resolving."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from reviewkit.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
COMMANDS_DOC = ROOT / "docs" / "commands.md"
README = ROOT / "README.md"
README_MAX_LINES = 250
HEADING = re.compile(r"^## `(reviewkit(?: [a-z][a-z-]*)*)`", re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _commands() -> dict[str, list[str]]:
    """Every command and group `reviewkit --help` lists, by its full name, with the options its
    --help shows (the root's own options under `reviewkit`)."""
    found: dict[str, list[str]] = {}

    def walk(command, name: str) -> None:
        found[name] = [
            opt
            for param in command.params
            if param.param_type_name == "option" and not getattr(param, "hidden", False)
            for opt in (*param.opts, *param.secondary_opts)
            if opt != "--help"
        ]
        for sub_name, sub in getattr(command, "commands", {}).items():
            if not getattr(sub, "hidden", False):
                walk(sub, f"{name} {sub_name}")

    walk(typer.main.get_command(app), "reviewkit")
    return found


def _sections(text: str) -> dict[str, str]:
    """The reference's sections by command name: from a `## \\`reviewkit ...\\`` heading to the
    next `## ` heading."""
    sections = {}
    for head in HEADING.finditer(text):
        end = text.find("\n## ", head.end())
        sections[head.group(1)] = text[head.end() : end if end != -1 else len(text)]
    return sections


COMMANDS = _commands()


def test_the_walk_finds_the_command_line():
    # Guards the walk itself: a typer upgrade that hid the groups would pass every test below.
    assert {"reviewkit run", "reviewkit site build", "reviewkit trace import"} <= set(COMMANDS)
    assert "--threads" in COMMANDS["reviewkit run"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_and_option_is_in_the_reference(name):
    sections = _sections(COMMANDS_DOC.read_text())
    assert name in sections, f"docs/commands.md has no section `## \\`{name}\\``"
    missing = [
        opt
        for opt in COMMANDS[name]
        if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", sections[name])
    ]
    assert not missing, f"docs/commands.md's `{name}` section does not mention {missing}"


def test_the_reference_documents_no_command_that_does_not_exist():
    extra = set(_sections(COMMANDS_DOC.read_text())) - set(COMMANDS)
    assert not extra, f"docs/commands.md documents commands --help does not list: {extra}"


def test_the_readme_table_has_a_line_per_command():
    leaves = [name for name in COMMANDS if not any(n.startswith(name + " ") for n in COMMANDS)]
    rows = re.findall(r"^\| `(reviewkit[^`]*)` \|", README.read_text(), re.M)
    missing = sorted(set(leaves) - set(rows) - {"reviewkit"})
    assert not missing, f"README.md's command table has no line for {missing}"


def test_the_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md is {lines} lines; keep it to {README_MAX_LINES}"


def _markdown_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(doc):
    text = _without_code_blocks(doc)  # code blocks hold no links
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        resolved = (doc.parent / path).resolve() if path else doc
        if not resolved.exists() or (
            anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved)
        ):
            broken.append(target)
    assert not broken, f"{doc.name} links to what does not exist: {broken}"


def _anchors(doc: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", _without_code_blocks(doc), re.M)
    }


def _without_code_blocks(doc: Path) -> str:
    return re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)


def test_nothing_points_outside_the_repository():
    # The project owns its definitions: no doc sends the reader to ../shared or design notes a
    # clone does not have.
    for doc in _markdown_files():
        text = doc.read_text()
        assert "design.md" not in text, f"{doc.name} refers to design.md"
        assert "../shared" not in text, f"{doc.name} refers to ../shared"


# Where ../shared may appear: the files that really read the shared traces (the trace tests,
# the import benchmark) and the samples imported from them, which name their source.
READS_SHARED_TRACES = ("tests/", "benchmarks/trace_import.py", "samples/")


def test_no_code_rubric_or_template_points_outside_the_repository():
    """The package, its rubrics, templates, scripts and CI name nothing a clone lacks."""
    roots = ["reviewkit", "rubrics", "report_templates", "scripts", ".ci", "benchmarks"]
    offenders = []
    for root in roots:
        for path in sorted((ROOT / root).rglob("*")):
            rel = path.relative_to(ROOT).as_posix()
            if not path.is_file() or path.suffix in (".pyc", ".json", ".gz") or \
                    rel.startswith(READS_SHARED_TRACES):  # fmt: skip
                continue
            text = path.read_text(errors="replace")
            if "../shared" in text or "design.md" in text:
                offenders.append(rel)
    assert offenders == []
