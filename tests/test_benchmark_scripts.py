"""The scripts under benchmarks/ still find every reviewkit name they import after a move."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


def _reviewkit_imports(path: Path) -> list[tuple[str, str | None]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reviewkit"):
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.startswith("reviewkit")]
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_every_reviewkit_name_a_benchmark_imports_exists(script):
    # Scripts that time the command line import nothing of reviewkit and pass trivially.
    for module, name in _reviewkit_imports(script):
        loaded = importlib.import_module(module)
        if name is not None:
            assert hasattr(loaded, name) or importlib.util.find_spec(f"{module}.{name}"), (
                f"{script.name}: from {module} import {name}"
            )
