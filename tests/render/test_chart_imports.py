"""altair is imported only when a chart spec is built: not for a warm packet, not by the worker."""

import subprocess
import sys
import textwrap

import pytest

from reviewkit.render.charts.lazy import import_lazily


def test_import_lazily_runs_the_module_at_its_first_use_only(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    (tmp_path / "lazyprobe_rk.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\nVALUE = 42\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazyprobe_rk", raising=False)
    try:
        module = import_lazily("lazyprobe_rk")
        assert not marker.exists() and sys.modules["lazyprobe_rk"] is module
        assert module.VALUE == 42 and marker.exists()
    finally:
        sys.modules.pop("lazyprobe_rk", None)


def test_import_lazily_keeps_an_imported_module_and_names_a_missing_one():
    import json

    assert import_lazily("json") is json
    with pytest.raises(ModuleNotFoundError, match="no_such_module_rk"):
        import_lazily("no_such_module_rk")


CHILD = textwrap.dedent(
    """
    import sys, types
    from reviewkit.render.charts import base
    base.SPEC_DISK_CACHE = True
    {body}
    print(type(sys.modules["altair"]) is types.ModuleType)
    """
)
RISKS = '[{"description": "drift", "level": "high", "likelihood": "low", "owner": "ana"}]'


def _altair_loaded(body: str, cache) -> bool:
    """Run `body` in a fresh interpreter; whether altair's code ran there (a LazyLoader
    module turns into a plain module on first use)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(body=body)],
        capture_output=True, text=True, check=True, env={"XDG_CACHE_HOME": str(cache),
                                                        "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return done.stdout.strip() == "True"


def test_altair_runs_only_when_a_spec_is_built(tmp_path):
    """What the PDF worker imports, and a builder whose spec is on disk (a warm packet), leave
    altair unloaded (0.2-0.3 s saved in each process); a cold build loads it and works."""
    worker = "from reviewkit.render.charts import convert\nfrom reviewkit.render import printing"
    assert not _altair_loaded(worker, tmp_path)
    build = f"from reviewkit.render import charts\nspec = charts.risk_map({RISKS})"
    assert _altair_loaded(build, tmp_path)  # cold: built through altair, kept on disk
    assert not _altair_loaded(build, tmp_path)  # warm: read from disk
