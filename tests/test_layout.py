"""The layout holds: a stage imports only the stages below it; torch only where measuring."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from reviewkit.common.tomlfile import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "reviewkit"

# The stages from the bottom up (docs/architecture.md draws the same picture): each may import
# the stages before it in this list. `measure` sits above `evidence` because it writes the
# evidence files `evidence` reads; only the CLI imports `measure`, so torch never reaches the
# review, the packet or the site.
ORDER = ["common", "suite", "bundle", "analysis", "evidence", "measure", "review", "render",
         "site", "cli"]  # fmt: skip
NOT_IMPORTED_BY = {"measure": {"review", "render", "site"}}
ALLOWED: dict[str, set[str]] = {
    stage: {below for below in ORDER[:i] if stage not in NOT_IMPORTED_BY.get(below, set())}
    for i, stage in enumerate(ORDER)
}
# Data packages (mapped from the top-level rubrics/ and report_templates/), read by any stage.
DATA = {"rubrics", "templates"}
for allowed in ALLOWED.values():
    allowed |= DATA
# Only these modules may import torch (the suite's kernels and the measuring stage).
TORCH_ALLOWED_PREFIXES = ("reviewkit.measure", "reviewkit.suite.kernels")


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found.append((name, path))
    return found


def _imports(name: str, path: Path) -> set[str]:
    """Every module name `path` imports, at any depth (functions included), made absolute."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "reviewkit" else None


MODULES = _modules()
STAGES = set(ALLOWED) | DATA


def test_every_module_lives_in_a_stage_folder():
    """Nothing but the package's own entry points sits flat in reviewkit/."""
    flat = [n for n, _ in MODULES if n.count(".") == 1 and n.split(".")[1] not in STAGES]
    assert flat == ["reviewkit.__main__"]


@pytest.mark.parametrize("name,path", MODULES, ids=[n for n, _ in MODULES])
def test_stage_imports_only_the_stages_below_it(name, path):
    stage = _stage(name)
    if stage is None or stage not in ALLOWED:
        return  # reviewkit/__init__.py and __main__.py
    wrong = sorted(
        module
        for module in _imports(name, path)
        if (other := _stage(module)) in STAGES and other != stage and other not in ALLOWED[stage]
    )
    assert not wrong, f"{name} ({stage}) imports {wrong}; allowed: {sorted(ALLOWED[stage])}"


@pytest.mark.parametrize("name,path", MODULES, ids=[n for n, _ in MODULES])
def test_torch_is_imported_only_where_measuring_happens(name, path):
    torch_imports = {m for m in _imports(name, path) if m.split(".")[0] == "torch"}
    if name.startswith(TORCH_ALLOWED_PREFIXES):
        return
    assert not torch_imports, f"{name} imports {sorted(torch_imports)}"


def test_the_packages_pyproject_lists_are_the_package_folders():
    """pyproject.toml lists the packages (two are mapped folders): a new stage folder must be
    listed there, or the wheel would ship without it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {n for n, p in MODULES if p.name == "__init__.py"}
    assert set(config["packages"]) == folders | {"reviewkit.rubrics", "reviewkit.templates"}
    assert config["package-dir"] == {
        "reviewkit.rubrics": "rubrics",
        "reviewkit.templates": "report_templates",
    }


def test_no_code_climbs_out_of_the_package_for_its_files():
    """Templates, rubric and layer map are package data; nothing finds them by `parent.parent`."""
    climbing = re.compile(r"__file__\)(\.resolve\(\))?\.(parent\.parent|parents\[)")
    offenders = [str(p.relative_to(ROOT)) for _, p in MODULES if climbing.search(p.read_text())]
    assert offenders == []


# One responsibility a module: past ~600 lines a module has started doing two jobs (the
# issue that split charts, packet, checks, cli and the trace summary set this bound).
# suite/workloads.py is one table of workload definitions and may run a little over.
MAX_MODULE_LINES = 600
LONGER_ALLOWED = {"reviewkit.suite.workloads": 650}


@pytest.mark.parametrize("name,path", MODULES, ids=[n for n, _ in MODULES])
def test_no_module_has_grown_past_one_job(name, path):
    lines = len(path.read_text().splitlines())
    assert lines <= LONGER_ALLOWED.get(name, MAX_MODULE_LINES), f"{name}: {lines} lines"


# Display modules show the review stage's judgement: they may take the evidence package's
# constants (a fit matrix's caps, a trace's time bases), never read a cited file or a rubric
# threshold, or the brief and the gate could disagree (issue 29).
DISPLAYS = ("reviewkit.render", "reviewkit.site")
EVIDENCE_READERS = re.compile(r"\b(read_cited|read_all|read_sweep|read_soak|read_quality|"
                              r"load_rubric|evidence_files)\b|\b(item|ctx)\.params\b|rubric\.items\b")


@pytest.mark.parametrize(
    "name,path", [m for m in MODULES if m[0].startswith(DISPLAYS)], ids=lambda x: str(x)
)
def test_displays_never_read_evidence_or_rubric_thresholds(name, path):
    text = path.read_text(encoding="utf-8")
    # the site's rubric page shows the rubric itself, the one place it is content
    allowed = {"load_rubric"} if name == "reviewkit.site.build" else set()
    found = {m.group(0) for m in EVIDENCE_READERS.finditer(text)} - allowed
    assert not found, f"{name} reads evidence or rubric thresholds: {sorted(found)}"
    assert "reviewkit.evidence.files" not in _imports(name, path)


def _module_graph() -> dict[str, set[str]]:
    """reviewkit module -> the reviewkit modules it imports (functions included); a package
    import names the package's __init__, `from pkg import mod` the module."""
    modules = dict(_modules())
    return {
        name: {m for m in _imports(name, path) if m in modules and m != name}
        for name, path in modules.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as [a, b, ..., a], or [] when there is none (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_no_import_cycles():
    """A function-level import that breaks a cycle hides it: every import counts."""
    # the checker itself finds a cycle, and only a cycle
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
    # a module's edge to its own package (`from reviewkit.review import x` inside review/) is
    # the package's __init__, which imports nothing of it here; every other edge counts
    graph = {n: e - {n.rpartition(".")[0]} for n, e in _module_graph().items()}
    assert _cycle(graph) == [], "an import cycle: move what both need into a module below them"


def _private_uses(path: Path) -> list[str]:
    """Underscored names this file takes from another reviewkit module: imported by name, or
    read off a reviewkit module it imported (`runner._base_record`)."""
    tree = ast.parse(path.read_text(), str(path))
    modules: set[str] = set()  # local names bound to reviewkit modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reviewkit"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"from {node.module} import {alias.name}")
                modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("reviewkit") and alias.asname:
                    modules.add(alias.asname)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and node.attr.startswith("_")
                and not node.attr.startswith("__")):  # fmt: skip
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_private_names_stay_in_their_module(tmp_path):
    """A name another module needs is public (or the code moves): an underscored name is a
    promise that only its own module uses it."""
    # the finder finds both forms, and not a module's own or a dunder
    sample = tmp_path / "m.py"
    sample.write_text("from reviewkit.measure import runner\n"
                      "from reviewkit.suite.workloads import _wid, __all__\n"
                      "def f():\n    return runner._base_record, runner.run, _local\n")  # fmt: skip
    assert _private_uses(sample) == [
        "from reviewkit.suite.workloads import _wid", "runner._base_record"]  # fmt: skip
    offenders = {str(p.relative_to(ROOT)): u for _, p in _modules() if (u := _private_uses(p))}
    assert offenders == {}


# Keys only a run document holds. After bundle/, a run is read through its records
# (bundle/records.py, analysis/analysed.py), never as a dict: the stages that read runs index
# none of these by string key (records have no __getitem__, so a missed read fails the tests
# that reach it; this catches the ones no test reaches). measure/ composes the document
# write_run writes, and render/charts/ draws rows its callers built: neither reads a run.
RUN_DOCUMENT_KEYS = (
    "workloads", "stats", "layer_types", "layer_types_by_dtype", "layer_energy",
    "layer_energy_by_dtype", "samples_s", "round_sizes", "rank_samples_s", "decomposition",
    "fractions", "skew", "stragglers", "scaling",
)  # fmt: skip
RUN_KEY_READ = re.compile(r'(?:\[|\.get\()\s*"(' + "|".join(RUN_DOCUMENT_KEYS) + r')"\s*(?:\]|,|\))'
                          r"(?!\s*=[^=])")  # fmt: skip
RUN_READERS = ("reviewkit.analysis", "reviewkit.review", "reviewkit.render.packet",
               "reviewkit.site", "reviewkit.cli")  # fmt: skip
# Modules that read another document with one of those keys, and which document it is.
OTHER_DOCUMENTS = {
    "reviewkit.analysis.overhead": "a workload's overhead record (its floor call's samples_s)",
    "reviewkit.analysis.device_time": "a workload's device_time record (its batched samples_s)",
    "reviewkit.analysis.run_to_run": "the device's run-to-run record (how many workloads)",
    "reviewkit.cli.console": "a sweep document's workloads; a trace summary's layer types",
    "reviewkit.cli.evidence": "a sweep document's workloads",
    "reviewkit.cli.trace_diff_view": "a trace diff's layer types",
    "reviewkit.cli.slice_view": "a production slice's workloads",
    "reviewkit.cli.projecting": "a production slice's workloads (project --trace-summary)",
    "reviewkit.analysis.production_weighted": "a trace summary's layer types (its op mix)",
}


@pytest.mark.parametrize("name,path", MODULES, ids=[m for m, _ in MODULES])
def test_runs_are_read_through_their_records(name, path):
    if not name.startswith(RUN_READERS) or name in OTHER_DOCUMENTS:
        return
    reads = sorted({m.group(1) for m in RUN_KEY_READ.finditer(path.read_text())})
    assert not reads, (f"{path.relative_to(ROOT)} reads {reads} by string key: read the run "
                       "through its records (bundle/records.py, analysis/analysed.py)")  # fmt: skip
