"""Run bundles: round trip, atomic writes, and refusal of foreign or other-version files."""

import json

import pytest

from reviewkit.bundle import SCHEMA_VERSION, load_run, write_run
from reviewkit.errors import BundleError

MINIMAL = {
    "suite": {"name": "s", "version": "1", "hash": "h"},
    "environment": {},
    "knobs": {},
    "ceilings": {},
    "workloads": [{"id": "a", "p99": float("inf")}],
    "profile": "smoke",
}


def test_round_trip(tmp_path):
    path = write_run(tmp_path / "run1", MINIMAL)
    doc = load_run(tmp_path / "run1")
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["suite"] == MINIMAL["suite"]
    assert doc["workloads"][0]["p99"] is None  # JSON has no infinity: written as null
    assert load_run(path) == doc  # the folder or its run.json
    assert [p.name for p in (tmp_path / "run1").iterdir()] == ["run.json"]  # no temp file left


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    write_run(tmp_path, MINIMAL)
    before = (tmp_path / "run.json").read_text()
    with pytest.raises(TypeError):
        write_run(tmp_path, {**MINIMAL, "bad": object()})  # not serialisable

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.fsync", disk_full)
    with pytest.raises(OSError):
        write_run(tmp_path, {**MINIMAL, "profile": "quick"})
    assert (tmp_path / "run.json").read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # the temp file is gone


def test_refuses_other_schema_version(tmp_path):
    write_run(tmp_path, MINIMAL)
    doc = json.loads((tmp_path / "run.json").read_text())
    doc["schema_version"] = SCHEMA_VERSION + 1
    (tmp_path / "run.json").write_text(json.dumps(doc))
    with pytest.raises(BundleError, match=r"schema_version 2 .* version 1; re-measure"):
        load_run(tmp_path)


@pytest.mark.parametrize(
    "content,needle",
    [
        ("{not json", "not readable as JSON"),
        ('{"kind": "something-else"}', "not a reviewkit run bundle"),
        ("[1, 2]", "not a reviewkit run bundle"),
        ('{"kind": "reviewkit.run", "schema_version": 1}', "key 'suite' is missing"),
    ],
)
def test_refuses_foreign_files(tmp_path, content, needle):
    (tmp_path / "run.json").write_text(content)
    with pytest.raises(BundleError, match=needle):
        load_run(tmp_path)


def test_missing_bundle_names_the_path(tmp_path):
    with pytest.raises(BundleError, match="no run bundle here"):
        load_run(tmp_path / "nowhere")
