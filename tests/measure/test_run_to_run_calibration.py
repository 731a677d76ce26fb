"""`calibrate --run-to-run`: separate runs pooled into the device's file, runs recorded before
pooled into it too (refused when of another device or suite, or not separate runs), and the
command line with what `show` then says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from runfactory import separate_run

from reviewkit.analysis import run_to_run as estimator
from reviewkit.bundle import run_to_run as store
from reviewkit.bundle.run import load_run, write_run
from reviewkit.common.errors import InputError
from reviewkit.measure import run_to_run as measuring
from reviewkit.suite.profiles import suite_profile
from reviewkit.suite.workloads import suite_identity

FP = {"hash": "fp-test", "label": "Test CPU"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(store.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def bundle(folder: Path, rng, run_sd=0.05, fingerprint=FP, suite_hash=None, **extra) -> Path:
    """A separate run of this device and suite written as a bundle."""
    run = separate_run(rng, run_sd).with_values(
        suite={"name": "s", "version": "1", "hash": suite_hash or suite_identity().hash},
        environment={"fingerprint": fingerprint, "torch_version": "2.0"},
        suite_profile="quick",
    )
    write_run(folder, {**run.to_json(), **extra})  # `extra`: keys a record has no field for
    return folder


def _pool(bundles, fresh=False):
    return measuring.pool("cpu", FP, "Test CPU", "2.0", [(b, "test") for b in bundles], fresh)


def test_runs_pool_into_the_device_file_and_accumulate(cache, tmp_path):
    """Three runs, then three more: the file holds six, and its figure is the estimate over
    all six (a run passed again is counted once)."""
    rng = np.random.default_rng(7)
    first = [bundle(tmp_path / f"r{i}", rng) for i in range(3)]
    doc, path, added, repeated, _, _ = _pool(first)
    assert path == cache / "profiles" / "cpu-fp-test-run-to-run.json"
    assert (doc["runs"], doc["workloads"], added, repeated) == (3, 5, 3, 0)
    more = [bundle(tmp_path / f"s{i}", rng) for i in range(3)]
    doc, _, added, repeated, _, _ = _pool([*more, first[0]])
    assert (doc["runs"], added, repeated) == (6, 3, 1)
    assert store.load(path) == doc
    observations = [estimator.observation(load_run(b), str(i), "t")[0]
                    for i, b in enumerate([*first, *more])]  # fmt: skip
    assert doc["sd"] == pytest.approx(estimator.estimate(observations).sd)
    # --fresh: the file holds only what is pooled now
    doc, *_ = _pool(more[:2], fresh=True)
    assert doc["runs"] == 2


@pytest.mark.parametrize(
    "extra,needle",
    [
        ({"fingerprint": {"hash": "other", "label": "Other CPU"}},
         "recorded on another device (Other CPU, fingerprint other), but this is fingerprint "
         "fp-test"),
        ({"suite_hash": "oldsuite"}, "suite hash oldsuite, but this reviewkit's suite is"),
        ({"pairing": {"id": "p", "side": "baseline"}}, "one side of an interleaved"),
    ],
)  # fmt: skip
def test_a_run_of_another_device_or_suite_or_an_ab_side_is_refused(cache, tmp_path, extra,
                                                                   needle):  # fmt: skip
    rng = np.random.default_rng(1)
    good = [bundle(tmp_path / f"r{i}", rng) for i in range(2)]
    bad = bundle(tmp_path / "bad", rng, **extra)
    with pytest.raises(InputError) as info:
        _pool([*good, bad])
    assert str(info.value).startswith(f"{bad}: ") and needle in str(info.value)
    assert "nothing was stored" in str(info.value)
    assert not store.cache_path("cpu", "fp-test").exists()


def test_a_damaged_file_stops_the_pooling_and_says_fresh(cache, tmp_path):
    rng = np.random.default_rng(2)
    runs = [bundle(tmp_path / f"r{i}", rng) for i in range(2)]
    _, path, *_ = _pool(runs)
    path.write_text(path.read_text().replace('"runs": 2', '"runs": 3'))
    with pytest.raises(store.RunToRunError, match=r"`hash` must match .*--fresh"):
        _pool(runs)
    doc, *_ = _pool(runs, fresh=True)
    assert doc["runs"] == 2


def test_a_file_of_another_suite_starts_afresh(cache, tmp_path):
    rng = np.random.default_rng(3)
    _, path, *_ = _pool([bundle(tmp_path / f"r{i}", rng) for i in range(2)])
    old = json.loads(path.read_text())
    old["suite_hash"] = "oldsuite"
    old["hash"] = store.content_hash(old)
    path.write_text(json.dumps(old))
    doc, _, _, _, _, notes = _pool([bundle(tmp_path / f"s{i}", rng) for i in range(2)])
    assert doc["runs"] == 2 and "starts afresh" in notes[0]


def test_the_measuring_runs_are_separate_processes_of_the_subset(cache, tmp_path, monkeypatch):
    """Each run is its own `reviewkit run` of the fixed subset at quick fp32; a failed one
    stops the whole with its last line of error, nothing stored."""
    calls = []
    rng = np.random.default_rng(5)

    def fake_run(cmd, capture_output, text):
        calls.append(cmd)
        out = Path(cmd[cmd.index("--out") + 1])
        bundle(out, rng)
        return subprocess.CompletedProcess(cmd, 0, "{}", "")

    monkeypatch.setattr(measuring.subprocess, "run", fake_run)
    pooled = measuring.calibrate_run_to_run("cpu", "cpu", FP, "Test CPU", "2.0", 3, [], False,
                                            lambda *a: None, every_s=0)  # fmt: skip
    assert len(calls) == 3 and pooled.measured == 3 and pooled.doc["runs"] == 3
    for cmd in calls:
        assert cmd[1:4] == ["-m", "reviewkit", "run"]
        assert cmd[cmd.index("--profile") + 1] == "quick"
        assert cmd[cmd.index("--dtype") + 1] == "fp32"
        assert cmd[cmd.index("--only") + 1] == ",".join(measuring.SUBSET)
    assert len({c[c.index("--out") + 1] for c in calls}) == 3
    assert all(o["source"] == measuring.MEASURED for o in pooled.doc["observations"])
    lines = "\n".join(measuring.summary_lines(pooled))
    assert "pooled 3 separate runs of 5 workloads (3 added now)" in lines
    assert f"stored: {store.cache_path('cpu', 'fp-test')}" in lines

    def failing(cmd, capture_output, text):
        return subprocess.CompletedProcess(cmd, 2, "", "warming\nreviewkit: error: no device\n")

    monkeypatch.setattr(measuring.subprocess, "run", failing)
    with pytest.raises(measuring.RunFailed, match=r"separate run 1 of 2 failed \(exit code 2\): "
                       r"reviewkit: error: no device; nothing was stored"):  # fmt: skip
        measuring.calibrate_run_to_run("cpu", "cpu", FP, "Test CPU", "2.0", 2, [], False,
                                       lambda *a: None, every_s=0)  # fmt: skip


def reviewkit(*args, env):
    return subprocess.run([sys.executable, "-m", "reviewkit", *args], capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip


def test_the_command_pools_recorded_runs_and_show_says_so(tmp_path):
    """`calibrate --run-to-run --from ...` on runs of this machine, then a run bundle that
    records the figure: `show` says where its allowance comes from."""
    import os

    from reviewkit.measure.fingerprint import cpu_fingerprint

    env = {**os.environ, store.CACHE_ENV: str(tmp_path / "cache")}
    fp = cpu_fingerprint()
    rng = np.random.default_rng(9)
    runs = [bundle(tmp_path / f"r{i}", rng, run_sd=0.02, fingerprint=fp) for i in range(3)]
    args = ["calibrate", "--run-to-run"] + [a for r in runs for a in ("--from", str(r))]
    done = reviewkit(*args, "--json", env=env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["measured"] == 0 and out["added"] == 3 and out["figure"]["runs"] == 3
    name = f"cpu-{fp['hash']}-run-to-run.json"
    assert Path(out["path"]) == tmp_path / "cache" / "profiles" / name
    text = reviewkit(*args, env=env)  # again: each run counts once
    assert text.returncode == 0, text.stderr
    assert "pooled 3 separate runs of 5 workloads (0 added now, 3 already pooled)" in text.stdout
    # a bundle recording the figure, as a run on this device now would
    recorded = json.loads((runs[0] / "run.json").read_text())
    recorded["run_to_run"] = {"available": True, "sd": out["figure"]["sd"], "runs": 3,
                              "workloads": 5, "updated_unix_s": 1.78e9}  # fmt: skip
    (runs[0] / "run.json").write_text(json.dumps(recorded))
    shown = reviewkit("show", str(runs[0]), env=env)
    assert shown.returncode == 0, shown.stderr
    assert "run-to-run allowance from: measured for this device: 3 runs of 5 workloads, " \
           "2026-05-28" in " ".join(shown.stdout.split())  # fmt: skip
    summary = json.loads(reviewkit("show", str(runs[0]), "--json", env=env).stdout)
    assert summary["run_to_run"]["sd"] == out["figure"]["sd"]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--from", "x"], "--runs, --every-s, --from and --fresh go with --run-to-run"),
        (["--run-to-run", "--every-s", "-1"], "--every-s -1: expected seconds from 0 to 3600"),
        (["--run-to-run", "--runs", "1"], "one run shows no run-to-run variation"),
        (["--run-to-run", "--from", "nowhere"], "--from nowhere: no such run bundle"),
        (["--run-to-run", "--out", "p.json"], "drop --out"),
    ],
)  # fmt: skip
def test_bad_options_say_what_to_do(tmp_path, args, needle):
    import os

    env = {**os.environ, store.CACHE_ENV: str(tmp_path / "cache")}
    done = reviewkit("calibrate", *args, env=env)
    assert done.returncode == 2 and needle in done.stderr


def test_a_run_records_the_figure_its_device_has_when_it_starts(cache, tmp_path):
    """Before `calibrate --run-to-run`: none measured, and why; after: the figure, so a
    comparison of the bundle needs nothing from this machine's cache."""
    import time

    import torch

    from reviewkit.measure import rounds as rounds_mod
    from reviewkit.measure import runner, sensors
    from reviewkit.measure.device import device_fingerprint

    device = torch.device("cpu")
    request = runner.RunRequest(profile="smoke", dtypes=("fp32",))

    def new_doc():
        return runner.new_run_doc(request, device, runner.energy_source(device), sensors.POWERCAP,
                                  suite_profile("smoke").sampling, rounds_mod.plan_rounds(1, 2),
                                  time.time())  # fmt: skip

    before = new_doc()["run_to_run"]
    assert before["available"] is False and before["reason"].startswith("none measured")
    fp = device_fingerprint(device)
    rng = np.random.default_rng(11)
    runs = [(bundle(tmp_path / f"r{i}", rng, fingerprint=fp), "t") for i in range(3)]
    figure, *_ = measuring.pool("cpu", fp, "Test CPU", "2.0", runs)
    after = new_doc()["run_to_run"]
    assert after["available"] is True
    assert (after["sd"], after["runs"], after["workloads"]) == (figure["sd"], 3, 5)
    assert after["hash"] == figure["hash"] and after["fingerprint"] == fp["hash"]


def test_busy_cpu_time_and_the_neighbours_share(tmp_path):
    """/proc/stat's first line: user 100, nice 20, system 30, idle 1000, iowait 50, irq 5,
    softirq 5, steal 7 ticks: busy = 100 + 20 + 30 + 5 + 5 = 160 ticks. Over 10 s on 2 CPUs
    (20 CPU-seconds), 12 busy seconds of which 4 were ours leave 8 to others: 40%."""
    import os

    stat = tmp_path / "stat"
    stat.write_text("cpu  100 20 30 1000 50 5 5 7 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert measuring.busy_cpu_s(stat) == pytest.approx(160 / os.sysconf("SC_CLK_TCK"))
    assert measuring.busy_cpu_s(tmp_path / "absent") is None
    assert measuring.neighbour_share(12.0, 4.0, 10.0, 2) == pytest.approx(0.4)
    assert measuring.neighbour_share(3.0, 4.0, 10.0, 2) == 0.0


def test_a_busy_machine_is_said(cache, tmp_path, monkeypatch):
    rng = np.random.default_rng(6)

    def fake_run(cmd, capture_output, text):
        bundle(Path(cmd[cmd.index("--out") + 1]), rng)
        return subprocess.CompletedProcess(cmd, 0, "{}", "")

    busy = iter([0.0, 1e6])  # others kept every CPU busy
    monkeypatch.setattr(measuring.subprocess, "run", fake_run)
    monkeypatch.setattr(measuring, "busy_cpu_s", lambda: next(busy))
    pooled = measuring.calibrate_run_to_run("cpu", "cpu", FP, "Test CPU", "2.0", 2, [], False,
                                            lambda *a: None, every_s=0)  # fmt: skip
    assert any("of the CPUs busy while the runs measured" in n for n in pooled.notes)


def test_the_runs_are_spread_over_time(cache, tmp_path, monkeypatch):
    """One run started every 15 s at the soonest: runs of 5 s on a fake clock start at 0, 15
    and 30 s (10 s of waiting after each); runs of 20 s start back to back, at 0, 20, 40."""
    for run_s, starts in ((5.0, [0.0, 15.0, 30.0]), (20.0, [0.0, 20.0, 40.0])):
        clock, seen = [0.0], []
        rng = np.random.default_rng(8)

        def fake_run(cmd, capture_output, text, run_s=run_s, clock=clock, seen=seen, rng=rng):
            seen.append(clock[0])
            clock[0] += run_s
            bundle(Path(cmd[cmd.index("--out") + 1]), rng)
            return subprocess.CompletedProcess(cmd, 0, "{}", "")

        monkeypatch.setattr(measuring.subprocess, "run", fake_run)
        monkeypatch.setattr(measuring.time, "time", lambda clock=clock: clock[0])
        monkeypatch.setattr(measuring.time, "sleep",
                            lambda s, clock=clock: clock.__setitem__(0, clock[0] + s))  # fmt: skip
        measuring.measure_runs("cpu", 3, tmp_path / str(run_s), lambda *a: None, every_s=15.0)
        assert seen == pytest.approx(starts)
