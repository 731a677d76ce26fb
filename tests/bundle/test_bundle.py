"""Run bundles: round trip, atomic writes, and refusal of foreign or other-version files."""

import json

import pytest

from reviewkit.bundle.run import SCHEMA_VERSION, load_run, migrate_v1_to_v2, write_run
from reviewkit.common.errors import BundleError

# A workload's least: what every writer since schema 1 recorded (run.schema.json requires it).
W = {"layer_type": "gemm", "dtype": "fp32", "status": "ok", "samples_s": [1.0, 2.0]}
MINIMAL = {
    "suite": {"name": "s", "version": "1", "hash": "h"},
    "environment": {},
    "knobs": {},
    "ceilings": {},
    "workloads": [{**W, "id": "a", "p99": float("inf")}],
    "profile": "smoke",
}


def test_round_trip(tmp_path):
    path = write_run(tmp_path / "run1", MINIMAL)
    run = load_run(tmp_path / "run1")
    assert run.schema_version == SCHEMA_VERSION
    assert run.suite == MINIMAL["suite"]
    assert run.workloads[0].extra["p99"] is None  # JSON has no infinity: written as null
    assert load_run(path).to_json() == run.to_json()  # the folder or its run.json
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


@pytest.mark.parametrize("version", [7, 0, None, "5", True, 5.0])
def test_refuses_other_schema_versions_naming_file_and_remedy(tmp_path, version):
    write_run(tmp_path, MINIMAL)
    doc = json.loads((tmp_path / "run.json").read_text())
    doc["schema_version"] = version
    (tmp_path / "run.json").write_text(json.dumps(doc))
    with pytest.raises(BundleError) as info:
        load_run(tmp_path)
    message = str(info.value)
    assert message.startswith(str(tmp_path / "run.json"))  # names the file
    assert f"schema_version {version!r} but this reviewkit reads version 6" in message
    assert "migrates version 1, 2, 3, 4, 5 on load" in message
    assert "re-measure with `reviewkit run`" in message  # and what to do


def test_schema_version_is_6():
    assert SCHEMA_VERSION == 6


def test_v5_bundle_migrates_with_overhead_not_measured(tmp_path):
    """Before schema 6 no overhead was measured: each workload says so, and the analysis never
    reads its unexplained time as overhead (a roof under half of t is unclassified)."""
    from reviewkit.analysis.roofline import UNCLASSIFIED, analyse_run

    v5 = {**MINIMAL, "kind": "reviewkit.run", "schema_version": 5, "distributed": None,
          "ceilings": {"compute": {"fp32": {"peak": 1e12}}, "bandwidth": {"peak": 1e11}},
          "workloads": [{**W, "id": "a", "round_sizes": [3], "flops": 1e6, "bytes": 1e6,
                         "samples_s": [1e-4, 1e-4, 1e-4]}]}  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(v5))
    run = load_run(tmp_path)
    assert run.schema_version == 6 and run.migrated_from == 5
    record = run.workloads[0].overhead
    assert record["available"] is False and record["method"] == "not-measured"
    assert "schema 5" in record["reason"]
    w = analyse_run(run, below_roof_share=0.5).workloads[0]
    # t = 100 us, t_roof = max(1 us, 10 us) = 10 us: 10% of t, under 0.5
    assert w.bottleneck == UNCLASSIFIED and w.decomposition.overhead_fraction is None


def test_v4_bundle_migrates_to_one_process(tmp_path):
    """Every run before schema 5 was one process: `distributed` is null, the rest kept."""
    v4 = {**MINIMAL, "kind": "reviewkit.run", "schema_version": 4,
          "workloads": [{**W, "id": "a", "round_sizes": [2]}]}  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(v4))
    run = load_run(tmp_path)
    assert run.schema_version == 6 and run.migrated_from == 4
    assert run.distributed is None
    assert [{k: v for k, v in w.to_json().items() if k != "overhead"} for w in run.workloads] == \
        v4["workloads"]


def test_v3_bundle_migrates_to_its_own_ceilings(tmp_path):
    """A v3 run calibrated inside itself, one bandwidth: kept, no levels, and said so."""
    ceilings = {"compute": {"fp32": {"peak": 1e11}}, "bandwidth": {"peak": 3e10}}
    v3 = {**MINIMAL, "kind": "reviewkit.run", "schema_version": 3, "ceilings": ceilings,
          "workloads": [{**W, "id": "a", "round_sizes": [2]}]}  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(v3))
    run = load_run(tmp_path)
    assert run.schema_version == 6 and run.migrated_from == 3
    assert run.ceilings["compute"] == ceilings["compute"]
    assert run.ceilings["bandwidth"] == ceilings["bandwidth"]
    assert "memory" not in run.ceilings
    assert run.ceilings["profile"]["hash"] is None
    assert "before device profiles" in run.ceilings["profile"]["reason"]


def test_v6_round_trips_unchanged(tmp_path):
    energy = {"available": False, "reason": "no RAPL powercap interface"}
    doc = {**MINIMAL, "workloads": [{**W, "id": "a", "energy": energy, "round_sizes": [1, 1]}]}
    write_run(tmp_path, doc)
    loaded = load_run(tmp_path)
    assert loaded.to_json() == {**doc, "schema_version": 6, "kind": "reviewkit.run"}
    assert "migrated_from" not in loaded.extra  # written as 6: nothing migrated


def test_v2_bundle_migrates_to_one_round(tmp_path):
    """A v2 run measured each workload in one window: its samples are one round."""
    energy = {"available": False, "reason": "no RAPL powercap interface"}
    v2 = {**MINIMAL, "kind": "reviewkit.run", "schema_version": 2, "workloads": [
        {**W, "id": "a", "samples_s": [1.0, 2.0, 3.0], "energy": energy},
        {**W, "id": "b", "status": "unsupported", "samples_s": [], "energy": energy},
    ]}  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(v2))
    run = load_run(tmp_path)
    assert run.schema_version == 6 and run.migrated_from == 2
    assert [w.round_sizes for w in run.workloads] == [(3,), ()]
    assert run.rounds == {"rounds": 1, "seed": None}


V1_DOC = {
    "kind": "reviewkit.run",
    "schema_version": 1,
    "suite": {"name": "s", "version": "1", "hash": "h"},
    "environment": {"os": "Linux"},
    "knobs": {},
    "ceilings": {},
    "workloads": [{**W, "id": "a"}, {**W, "id": "b", "status": "unsupported", "samples_s": []}],
}


def test_v1_bundle_migrates_to_v2(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps(V1_DOC))
    before = (tmp_path / "run.json").read_text()
    run = load_run(tmp_path)
    assert run.schema_version == 6 and run.migrated_from == 1
    reason = "recorded with run.json schema 1, before energy was metered"
    # Every workload, measured or not, gets energy absent with the reason.
    assert [w.energy for w in run.workloads] == [
        {"available": False, "reason": reason},
        {"available": False, "reason": reason},
    ]
    assert [w.status for w in run.workloads] == ["ok", "unsupported"]  # kept
    sensors = run.environment["sensors"]
    assert run.environment["os"] == "Linux"
    for key in ("rapl", "nvml_energy", "thermal", "cpu_clocks"):
        assert sensors[key]["available"] is False
        assert sensors[key]["reason"] == (
            "recorded with run.json schema 1, before sensors were surveyed"
        )
    assert run.energy_meter == {"available": False, "reason": reason}
    assert (tmp_path / "run.json").read_text() == before  # migrated in memory, never rewritten


def test_v1_survey_is_kept_by_the_migration():
    survey = {"rapl": {"available": False, "reason": "no RAPL powercap interface", "domains": []}}
    v1 = {**V1_DOC, "environment": {"sensors": survey}}
    doc = migrate_v1_to_v2(v1)
    assert doc["environment"]["sensors"] == survey
    assert v1["schema_version"] == 1 and "energy" not in v1["workloads"][0]  # input untouched


def test_committed_v1_samples_load_migrated():
    from pathlib import Path

    # the decisions log keeps the v1 bundles its decisions were made on
    path = Path(__file__).parents[2] / "site" / "decisions" / "bf16-transformer" / "runs"
    path = path / "baseline-fp32" / "run.json"
    assert json.loads(path.read_text())["schema_version"] == 1  # committed as version 1
    run = load_run(path)
    assert run.schema_version == 6 and run.migrated_from == 1
    assert all(w.energy["available"] is False for w in run.workloads)
    assert all(w.overhead["method"] == "not-measured" and "schema 1" in w.overhead["reason"]
               for w in run.workloads)  # fmt: skip


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


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda w: w.update(flops=None),
         "key 'workloads[0].flops' is None; expected a count of FLOPs or bytes: a finite number "
         "from 0 to 1e30"),
        (lambda w: w.update(bytes=-4), "key 'workloads[0].bytes' is -4"),
        (lambda w: w.update(samples_s=[0.1, -1.0]), "key 'workloads[0].samples_s'"),
        (lambda w: w.update(samples_s=[0.1, "fast"]), "key 'workloads[0].samples_s'"),
        (lambda w: w.update(round_sizes=[5]),
         "key 'workloads[0].round_sizes' is [5]; expected counts of samples per round summing "
         "to 2"),
        (lambda w: w.update(id=7), "key 'workloads[0].id' is 7; expected text"),
        (lambda w: w.pop("status"), "key 'workloads[0].status' is missing"),
        (lambda w: w.update(flops=10**400), "key 'workloads[0].flops' is 1000000"),
    ],
)  # fmt: skip
def test_damaged_values_are_named_on_load(tmp_path, edit, needle):
    """A bundle edited by hand or truncated: the key, the value and what was expected, not a
    traceback from the analysis later (issue 18; found by a run.json fuzz: `flops: null`
    reached the roofline as a TypeError)."""
    workload = {"id": "a", "layer_type": "gemm", "dtype": "fp32", "status": "ok", "flops": 10,
                "bytes": 4, "samples_s": [0.1, 0.2], "round_sizes": [2]}  # fmt: skip
    write_run(tmp_path, {**MINIMAL, "workloads": [workload]})
    raw = json.loads((tmp_path / "run.json").read_text())
    edit(raw["workloads"][0])
    (tmp_path / "run.json").write_text(json.dumps(raw))
    with pytest.raises(BundleError) as info:
        load_run(tmp_path)
    assert needle in str(info.value) and "the bundle is damaged" in str(info.value)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        # reviewkit writes a non-finite value as null: a NaN token was put there by hand
        (lambda d: d["workloads"][0].update(samples_s=[0.1, float("nan")]),
         "key 'workloads[0].samples_s[1]' is 'NaN'; expected a finite number or null"),
        (lambda d: d["ceilings"].update(bandwidth={"peak": float("inf")}),
         "key 'ceilings.bandwidth.peak' is 'Infinity'"),
        # found by the run.json fuzz: a string reached the roofline's division as a TypeError
        (lambda d: d["ceilings"].update(compute={"fp32": {"peak": "<script>"}}),
         "key 'ceilings.compute.fp32.peak' is '<script>'; expected a rate per second above 0 "
         "and at most 1e30, or null"),
        (lambda d: d["ceilings"].update(memory=[{"level": "dram", "peak": -1.0}]),
         "key 'ceilings.memory[0].peak' is -1.0"),
        (lambda d: d.update(knobs={"threads": "two"}), "key 'knobs.threads' is 'two'"),
        (lambda d: d.update(distributed={"world_size": -2}),
         "key 'distributed.world_size' is -2; expected a whole number, 0 or more"),
        (lambda d: d.update(environment={"sensors": {"rapl": {"available": "yes"}}}),
         "key 'environment.sensors.rapl.available' is 'yes'"),
    ],
)  # fmt: skip
def test_a_bundle_is_checked_against_its_schema_naming_the_key(tmp_path, edit, needle):
    """run.schema.json on load (issue 18): every recorded value, not only the workloads'."""
    write_run(tmp_path, MINIMAL)
    raw = json.loads((tmp_path / "run.json").read_text())
    edit(raw)
    (tmp_path / "run.json").write_text(json.dumps(raw))  # Python writes NaN/Infinity tokens
    with pytest.raises(BundleError) as info:
        load_run(tmp_path)
    assert needle in str(info.value) and str(tmp_path / "run.json") in str(info.value)


def test_every_recorded_sample_bundle_meets_the_schema():
    """The schema describes what reviewkit writes: each committed bundle, v1 to v5, loads."""
    from pathlib import Path

    samples = Path(__file__).parents[2] / "samples"
    files = sorted(samples.glob("**/run.json"))
    assert len(files) >= 4
    for file in files:
        assert load_run(file).schema_version == SCHEMA_VERSION


def test_the_schema_check_runs_once_per_content(tmp_path, monkeypatch):
    """Bytes that passed the schema check are not walked again (a marker named by their hash
    and the schema's); other bytes, a damaged copy included, are checked as ever."""
    from reviewkit.bundle import schema

    path = write_run(tmp_path / "run", MINIMAL)
    load_run(path)  # checked, and remembered
    calls = []
    monkeypatch.setattr(schema, "check", lambda doc, file, **kw: calls.append(file))
    load_run(path)
    assert calls == []  # the same bytes: no second walk
    # the same bundle written with other whitespace: other bytes, so checked again
    path.write_text(json.dumps(json.loads(path.read_text()), indent=3))
    load_run(path)
    assert calls == [path]
