"""The per-fingerprint run-to-run file: written and read back, refused with the file, the key,
what was expected and what to do when damaged, and the record a run bundle takes from it."""

from __future__ import annotations

import json

import pytest

from reviewkit.bundle import run_to_run as store
from reviewkit.bundle.run import load_run, write_run
from reviewkit.common.errors import BundleError

FP = {"hash": "abc123", "label": "Test CPU · 2 cores"}
MINIMAL_RUN = {
    "suite": {"name": "s", "version": "1", "hash": "h"}, "environment": {}, "knobs": {},
    "ceilings": {}, "profile": "smoke",
    "workloads": [{"id": "a", "layer_type": "gemm", "dtype": "fp32", "status": "ok",
                   "samples_s": [1.0, 2.0]}],
}  # fmt: skip


def _doc(sd=0.05, runs=2):
    observations = [
        {"run": f"r{i}", "source": "test", "created_unix_s": 1.0e9 + i, "setting": "s",
         "points": {"gemm.a.fp32": [0.01 * i, 1e-5]}}
        for i in range(runs)
    ]  # fmt: skip
    estimate = {"sd": sd, "runs": runs, "workloads": 1, "workload_ids": ["gemm.a.fp32"],
                "per_workload_sd": {"gemm.a.fp32": sd}}  # fmt: skip
    return store.build(device="cpu", device_name="Test CPU", fingerprint=FP, suite_hash="h",
                       torch_version="2.0", updated_unix_s=1.78e9, estimate=estimate,
                       method="words", observations=observations)  # fmt: skip


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(store.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_written_and_read_back(cache):
    path = store.save(_doc(), store.cache_path("cpu", "abc123"))
    assert path == cache / "profiles" / "cpu-abc123-run-to-run.json"
    assert store.load(path) == _doc()


def _rehash(d):
    d["hash"] = store.content_hash(d)


@pytest.mark.parametrize(
    "edit,key,expected",
    [
        (lambda d: (d.update(kind="x"), _rehash(d)), "kind", "must be 'reviewkit.run-to-run'"),
        (lambda d: (d.update(version=2), _rehash(d)), "version", "must be 1"),
        (lambda d: (d.update(sd=-0.1), _rehash(d)), "sd",
         "must be a log-scale standard deviation from 0 to 5"),
        (lambda d: (d.update(sd="5%"), _rehash(d)), "sd", "standard deviation"),
        (lambda d: (d.update(runs=1), _rehash(d)), "runs", "2 or more"),
        (lambda d: (d.update(workload_ids=[]), _rehash(d)), "workload_ids",
         "must list the 1 workload ids"),
        (lambda d: (d["observations"][1]["points"].update({"gemm.a.fp32": [0.0, -1.0]}),
                    _rehash(d)), "observations[1].points.gemm.a.fp32",
         "[log median, within-run variance]"),
        (lambda d: (d["fingerprint"].pop("hash"), _rehash(d)), "fingerprint.hash",
         "non-empty string"),
        (lambda d: d.update(sd=0.001), "hash", "edited or damaged"),  # not re-hashed
    ],
)  # fmt: skip
def test_a_damaged_file_names_itself_the_key_and_the_remedy(cache, edit, key, expected):
    path = store.cache_path("cpu", "abc123")
    doc = _doc()
    edit(doc)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    with pytest.raises(store.RunToRunError) as info:
        store.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: `{key}` ")
    assert expected in message
    assert "reviewkit calibrate --run-to-run --fresh" in message


def test_not_json_and_missing(cache):
    path = store.cache_path("cpu", "abc123")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(store.RunToRunError, match=r"not valid JSON .*--fresh"):
        store.load(path)
    with pytest.raises(store.RunToRunError, match="no run-to-run figure here"):
        store.load(path.with_name("other.json"))


def test_a_run_records_its_device_figure_or_why_there_is_none(cache):
    none = store.record("cpu", FP)
    assert none == {"available": False, "reason": "none measured for this device (fingerprint "
                    "abc123): `reviewkit calibrate --run-to-run` measures it"}  # fmt: skip
    store.save(_doc(sd=0.0123, runs=2), store.cache_path("cpu", "abc123"))
    rec = store.record("cpu", FP)
    assert rec["available"] and rec["sd"] == 0.0123 and rec["runs"] == 2
    assert rec["updated_unix_s"] == 1.78e9 and rec["workloads"] == 1
    # another device's fingerprint finds nothing of this one's
    assert not store.record("cpu", {"hash": "other"})["available"]


def test_a_damaged_file_costs_the_run_nothing_but_the_figure(cache):
    path = store.save(_doc(), store.cache_path("cpu", "abc123"))
    doc = json.loads(path.read_text())
    doc["sd"] = 0.001  # edited by hand: the hash no longer matches
    path.write_text(json.dumps(doc))
    rec = store.record("cpu", FP)
    assert rec["available"] is False
    assert "the cached run-to-run figure: `hash`" in rec["reason"]
    assert str(path) not in rec["reason"]  # the user's cache folder does not travel


def test_a_file_of_another_device_is_refused(cache):
    # the file of fingerprint abc123 copied under another device's name
    store.save(_doc(), store.cache_path("cpu", "zzz"))
    rec = store.record("cpu", {"hash": "zzz"})
    assert not rec["available"] and "measured on another device (fingerprint abc123)" in (
        rec["reason"])  # fmt: skip


@pytest.mark.parametrize(
    "record,needle",
    [
        ({"available": True, "sd": -1.0, "runs": 2, "workloads": 1, "updated_unix_s": 1.0},
         "key 'run_to_run.sd' is -1.0"),
        ({"available": True, "runs": 2, "workloads": 1, "updated_unix_s": 1.0},
         "key 'run_to_run.sd' is missing"),
        ({"available": "yes"}, "key 'run_to_run.available' is 'yes'"),
    ],
)  # fmt: skip
def test_the_bundle_record_is_checked_against_the_schema(tmp_path, record, needle):
    write_run(tmp_path, {**MINIMAL_RUN, "run_to_run": record})
    with pytest.raises(BundleError, match=needle.replace(".", r"\.")):
        load_run(tmp_path)


def test_a_bundle_with_and_without_a_record_loads(tmp_path):
    ok = {"available": True, "sd": 0.01, "runs": 4, "workloads": 5, "updated_unix_s": 1.78e9,
          "fingerprint": "abc123", "method": "words", "hash": "h", "torch_version": "2.0"}
    write_run(tmp_path / "a", {**MINIMAL_RUN, "run_to_run": ok})
    assert load_run(tmp_path / "a").run_to_run == ok
    write_run(tmp_path / "b", MINIMAL_RUN)
    without = load_run(tmp_path / "b")
    assert without.run_to_run is None and "run_to_run" not in without.to_json()
