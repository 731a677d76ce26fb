"""Shared fixtures: a smoke run measured once per test session (seconds on a 2-core CPU)."""

from __future__ import annotations

import logging
import signal

import pytest


def pytest_configure(config):
    # A test run started in the background (nohup, `cmd &` in a script) inherits SIGINT as
    # ignored, and an ignored signal stays ignored across exec: the Ctrl-C tests' children
    # would never see their interrupt. A handled signal is reset to the default on exec, so
    # handling it here gives every child the default, as in a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """An analysed smoke run of fp32 and bf16, written as a bundle; returns (run, folder)."""
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.records import Run
    from reviewkit.bundle.run import write_run
    from reviewkit.measure import runner as measure

    doc = measure.run(measure.RunRequest(profile="smoke", dtypes=("fp32", "bf16")))
    run = analyse_run(Run.from_json(doc))
    out = tmp_path_factory.mktemp("smoke")
    write_run(out, run)
    return run, out


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """Chart SVGs and the Vega bundle are cached per user; tests start from an empty cache."""
    import os

    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    # In this process every chart is built for real, so a test of a builder tests the builder
    # and not a spec an earlier test left on disk (tests/render/test_charts.py tests the disk
    # cache itself; commands run in subprocesses keep it).
    from reviewkit.render.charts import base

    base.SPEC_DISK_CACHE = False
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture
def weasyprint_warnings_fail(caplog):
    """Any WeasyPrint record at WARNING or above fails the test (it logs instead of raising)."""
    caplog.set_level(logging.WARNING, logger="weasyprint")
    yield
    bad = [r for r in caplog.records if r.name.startswith("weasyprint")
           and r.levelno >= logging.WARNING]  # fmt: skip
    assert not bad, [r.getMessage() for r in bad]
