"""The packet's environment names each run's power budget: the GPU's enforced power limit its
ceilings were calibrated under, or why it is not known; nothing for a run without one."""

from __future__ import annotations

import json

from runfactory import make_run

from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import load_run
from reviewkit.render.packet.fields import _environment


def _run_with(tmp_path, conditions):
    folder = make_run(tmp_path / "r")
    path = folder / "run.json"
    doc = json.loads(path.read_text())
    doc["ceilings"]["profile"] = {"hash": "h", "source": "calibrated", "fingerprint": "f",
                                  "conditions": conditions}  # fmt: skip
    path.write_text(json.dumps(doc))
    return analyse_run(load_run(folder))


def test_a_gpus_enforced_power_limit_is_its_power_budget(tmp_path):
    run = _run_with(tmp_path, {"available": True, "power_limit_w": 700.0,
                               "method": "NVML"})  # fmt: skip
    facts = dict(_environment("baseline", run)["facts"])
    assert facts["power budget"].startswith("700 W enforced power limit")


def test_an_unreadable_limit_says_why_and_a_cpu_run_says_nothing(tmp_path):
    run = _run_with(tmp_path, {"available": False, "reason": "NVML could not read it: denied"})
    facts = dict(_environment("baseline", run)["facts"])
    assert facts["power budget"] == "not available: NVML could not read it: denied"
    cpu = analyse_run(load_run(make_run(tmp_path / "cpu")))
    assert "power budget" not in dict(_environment("baseline", cpu)["facts"])
