"""The record of suite versions: a suite change is caught until it is versioned and recorded,
and a bundle is checked against the version it was measured with."""

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from reviewkit.analysis.compare import compare
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import load_run
from reviewkit.suite import collectives, history
from reviewkit.suite import workloads as suite

SAMPLES = Path(__file__).parents[2] / "samples"
CPU = SAMPLES / "cpu-quick-epyc-2core" / "run.json"
TP2 = SAMPLES / "cpu-quick-tp2-gloo-2core" / "run.json"


def _change_layer_norm(monkeypatch):
    original = suite.layer_norm

    def changed(model, tokens, dtype):
        spec = original(model, tokens, dtype)
        return dataclasses.replace(spec, other_flops=spec.other_flops + 1)

    monkeypatch.setattr(suite, "layer_norm", changed)


@pytest.fixture
def records(tmp_path):
    """A copy of the committed records to write into."""
    folder = tmp_path / "recorded"
    shutil.copytree(history.FOLDER, folder)
    return folder


def test_the_committed_record_is_the_current_suite():
    assert history.check_current() == []
    assert suite.SUITE_VERSION in history.recorded_versions()


def test_a_changed_definition_without_a_version_bump_names_the_version_and_the_command(
    monkeypatch,
):
    _change_layer_norm(monkeypatch)
    (problem,) = history.check_current()
    assert f"recorded for suite {suite.SUITE_VERSION}" in problem
    assert "bump SUITE_VERSION" in problem and f"`{history.COMMAND}`" in problem
    assert "quick:norm.bert-base-layernorm." in problem  # which workloads changed


def test_a_changed_collective_is_caught_though_the_suite_hash_does_not_cover_it(monkeypatch):
    before = suite.suite_identity()
    original = collectives.collective_spec

    def changed(message, dtype, world_size):
        spec = original(message, dtype, world_size)
        return dataclasses.replace(spec, bytes=spec.bytes + 1)

    monkeypatch.setattr(collectives, "collective_spec", changed)
    assert suite.suite_identity() == before
    (problem,) = history.check_current()
    assert ":world1:collective." in problem and "bump SUITE_VERSION" in problem


def test_a_bumped_version_without_a_record_says_what_to_run(monkeypatch, records):
    _change_layer_norm(monkeypatch)
    monkeypatch.setattr(suite, "SUITE_VERSION", "99.0")
    (problem,) = history.check_current(records)
    assert "suite 99.0" in problem and "has no record" in problem
    assert f"run `{history.COMMAND}`" in problem
    path, said = history.write_current(records)
    assert path.name == "99.0.json" and "recorded suite 99.0" in said
    assert history.check_current(records) == []
    assert history.write_current(records)[1].startswith("suite 99.0 is already recorded")


def test_a_recorded_version_is_not_overwritten_with_other_definitions(monkeypatch, records):
    _change_layer_norm(monkeypatch)
    before = history.path_of(suite.SUITE_VERSION, records).read_text()
    with pytest.raises(SystemExit, match="bump SUITE_VERSION"):
        history.write_current(records)
    assert history.path_of(suite.SUITE_VERSION, records).read_text() == before
    history.write_current(records, replace=True)
    assert history.check_current(records) == []


@pytest.mark.parametrize("path", [CPU, TP2], ids=["single", "distributed"])
def test_a_sample_of_an_older_suite_version_still_checks_after_a_change(monkeypatch, records, path):
    """The change is versioned and recorded: the sample (suite 1.1) checks against 1.1's
    record, though its layer-norm definitions are no longer the current ones."""
    run = load_run(path)
    version = run.suite_version
    _change_layer_norm(monkeypatch)
    monkeypatch.setattr(suite, "SUITE_VERSION", "99.0")
    history.write_current(records)
    assert history.check_current(records) == []
    assert suite.suite_identity().to_json() != run.suite
    assert history.check_bundle(run, records) == []
    assert run.suite_version == version


def test_a_bundle_whose_definitions_are_not_its_versions_fails_naming_the_workload():
    run = load_run(CPU)
    first = dataclasses.replace(run.workloads[0], definition_hash="0" * 16)
    (problem,) = history.check_bundle(run.with_values(workloads=(first, *run.workloads[1:])))
    assert problem.startswith(first.id) and "suite 1.1 records" in problem
    run = run.with_values(suite={**run.suite, "hash": "f" * 16})
    assert "is not the recorded" in history.check_bundle(run)[0]
    run = run.with_values(suite={**run.suite, "version": "0.1"})
    assert "no record" in history.check_bundle(run)[0]
    tp2 = load_run(TP2)
    tp2 = tp2.with_values(distributed={**tp2.distributed, "world_size": 3})
    assert "world size 3" in history.check_bundle(tp2)[0]


def test_a_bundle_of_an_older_suite_still_analyses_and_compares_on_shared_workloads():
    """Analysis reads the bundle's own recorded FLOPs and bytes, never the current definitions;
    a comparison across suite versions warns and compares the workloads both runs share."""
    old = load_run(CPU)
    old = old.with_values(
        suite={"name": suite.SUITE_NAME, "version": "1.0", "hash": "0123456789abcdef"},
        workloads=tuple(dataclasses.replace(w, definition_hash="f" * 16) for w in old.workloads),
    )
    analysed = analyse_run(old)
    current = analyse_run(load_run(CPU))
    assert [w.mfu for w in analysed.workloads] == [w.mfu for w in current.workloads]
    comp = compare(analysed, current)
    assert any("suite hashes differ" in w for w in comp.warnings)
    assert len(comp.workloads) == len(current.workloads)


def test_the_record_is_plain_sorted_json():
    path = history.path_of(suite.SUITE_VERSION)
    text = path.read_text()
    assert text == json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"
