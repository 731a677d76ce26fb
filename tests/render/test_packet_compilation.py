"""The packet's "Compilation" section: a compiled run's cold-start cost, apart from its
samples, and no section at all for eager runs."""

from __future__ import annotations

import json
from types import SimpleNamespace

from runfactory import make_run

from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import load_run
from reviewkit.render.packet.html import jinja_environment
from reviewkit.render.packet.sections import SECTIONS
from reviewkit.render.packet.sections.compilation import compilation_fields


def _compiled_run(tmp_path, records: dict):
    folder = make_run(tmp_path / "c", knobs={"compile_mode": "default"})
    path = folder / "run.json"
    doc = json.loads(path.read_text())
    for w in doc["workloads"]:
        name = w["id"].rsplit(".", 1)[0]
        if name in records:
            w["compile"] = records[name]
    path.write_text(json.dumps(doc))
    return analyse_run(load_run(folder))


def _record(cold_s, warm_s, graphs=1, breaks=0, eager=False):
    return {"mode": "default", "cold_s": cold_s, "warm_s": warm_s, "graphs": graphs,
            "graph_breaks": breaks, "fell_back_to_eager": eager, "reused": False}


def test_the_section_sums_cold_and_warm_starts_and_names_what_ran_eager(tmp_path):
    eager = analyse_run(load_run(make_run(tmp_path / "b")))
    names = [w.id.rsplit(".", 1)[0] for w in eager.workloads]
    a, b, c = names[:3]
    run = _compiled_run(tmp_path, {a: _record(12.0, 1.5, breaks=2), b: _record(3.0, None),
                                   c: _record(0.5, 0.25, graphs=0, eager=True)})  # fmt: skip
    (row,) = compilation_fields(SimpleNamespace(runs=[("baseline", eager),
                                                      ("candidate", run)]))["compilation"]
    # cold: 12 + 3 + 0.5 = 15.5 s; warm measured for two of three: 1.5 + 0.25 = 1.75 s
    assert row["run"] == "candidate" and row["workloads"] == 3
    assert row["cold_s"] == 15.5 and row["warm_s"] == 1.75 and row["warm_workloads"] == 2
    assert (row["graphs"], row["graph_breaks"]) == (2, 2)
    assert row["ran_eager"] == [f"{c}.fp32"]
    assert [s["id"] for s in row["slowest"]] == [f"{a}.fp32", f"{b}.fp32", f"{c}.fp32"]
    section = next(s for s in SECTIONS if s.id == "compilation")
    assert section.shown({"compilation": [row]}) and not section.shown({"compilation": []})
    html = jinja_environment().get_template(section.partial).render(
        m={"compilation": [row]}, section=section)  # fmt: skip
    assert "15.5 s" in html and "1.75 s (2 workloads)" in html and "2 / 2" in html


def test_eager_runs_have_no_compilation_section(tmp_path):
    eager = analyse_run(load_run(make_run(tmp_path / "e")))
    assert compilation_fields(SimpleNamespace(runs=[("baseline", eager)])) == {"compilation": []}


def test_a_workload_id_reaches_the_page_escaped(tmp_path):
    section = next(s for s in SECTIONS if s.id == "compilation")
    row = {"run": "candidate", "mode": "default", "workloads": 1, "cold_s": 1.0, "warm_s": None,
           "warm_workloads": 0, "graphs": 0, "graph_breaks": 0,
           "ran_eager": ["<script>x</script>"], "reused": [],
           "slowest": [{"id": "<b>w</b>", "cold_s": 1.0, "warm_s": None, "graphs": 0,
                        "graph_breaks": 0}]}  # fmt: skip
    html = jinja_environment().get_template(section.partial).render(
        m={"compilation": [row]}, section=section)  # fmt: skip
    assert "<script>" not in html and "&lt;script&gt;" in html and "<b>w" not in html
