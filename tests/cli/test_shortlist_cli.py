"""`reviewkit shortlist` as a user meets it: --json and --out round trip on the committed samples,
and bad input (unknown platform or model, a model that fits nowhere, a dtype a platform lacks)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from reviewkit.cli.app import app

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
RUNS = ("--runs", SAMPLES / "cpu-quick-epyc-2core", "--runs", SAMPLES / "gpu-quick-h200")


def invoke(*args):
    return CliRunner().invoke(app, ["shortlist", *(str(a) for a in args)])


def test_json_and_out_round_trip(tmp_path):
    out = tmp_path / "shortlist"
    r = invoke("--model", "Llama-3-8B", "--batch", 1, "--context", 512, "--sla-p99-s", 30,
               "--output-tokens", 16, "--platforms", "h200-sxm,mi300x", *RUNS, "--out", out,
               "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc == json.loads((out / "shortlist.json").read_text())
    assert (doc["kind"], doc["schema_version"]) == ("reviewkit.shortlist", 1)
    assert doc["tool"]["name"] == "reviewkit" and doc["created_unix_s"] > 0
    assert doc["request"]["output_tokens"] == 16 and doc["request"]["parameters"] == 8030261248
    by = {c["key"]: c for c in doc["candidates"]}
    assert set(by) == {"h200-sxm", "mi300x"} and [c["rank"] for c in doc["candidates"]] == [1, 2]
    # the H200 sample measured the H200: its efficiency is its own; the MI300X's is borrowed
    assert by["h200-sxm"]["efficiency"] == "measured"
    assert by["mi300x"]["efficiency"].startswith("borrowed from")
    assert "never_measured" in {i["key"] for i in by["mi300x"]["risk_items"]}
    # an 8B model in bf16 (16.1 GB) fits either on one device
    assert by["h200-sxm"]["memory"]["tp"] == 1 and by["mi300x"]["memory"]["tp"] == 1
    assert "no queueing" in doc["method"]["latency"]
    # the chart: its spec holds the two candidates' numbers; its SVG is drawn offline
    spec = json.loads((out / "trade-curve.vl.json").read_text())
    drawn = {r["platform"]: r for rows in spec["datasets"].values() for r in rows
             if "platform" in r}  # fmt: skip
    assert drawn["mi300x"]["latency_s"] == by["mi300x"]["latency_s"]["value"]
    assert (out / "trade-curve.svg").read_text().startswith("<svg")
    table = invoke("--model", "Llama-3-8B", "--batch", 1, "--context", 512, "--sla-p99-s", 30,
                   "--platforms", "h200-sxm", *RUNS)  # fmt: skip
    assert table.exit_code == 0 and "Platform shortlist" in table.stdout


def test_unknown_platform_or_model_names_the_valid_ones():
    bad = invoke("--model", "Llama-3-8B", "--batch", 1, "--context", 512, "--sla-p99-s", 1,
                 "--platforms", "h100-sxn", *RUNS)  # fmt: skip
    assert bad.exit_code == 2
    assert "unknown platform 'h100-sxn'" in bad.stderr and "mi300x" in bad.stderr
    model = invoke("--model", "gpt-5", "--batch", 1, "--context", 512, "--sla-p99-s", 1, *RUNS)
    assert model.exit_code == 2 and "Llama-3-8B, Llama-3-70B, Mixtral-8x7B" in model.stderr
    runs = invoke("--model", "Llama-3-8B", "--batch", 1, "--context", 512, "--sla-p99-s", 1)
    assert runs.exit_code == 2 and "--runs RUN_DIR is required" in runs.stderr


def test_a_model_that_fits_nowhere_says_the_capacity_needed():
    r = invoke("--model", "Llama-3-70B", "--batch", 1, "--context", 2048, "--sla-p99-s", 1,
               "--platforms", "l4", *RUNS, "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["shortlist"] == [] and doc["candidates"][0]["status"] == "does not fit"
    # 141,107,412,992 B of weights + 671,088,640 of KV cache on one L4 (no NVLink): 141.8 GB
    assert ("the model fits no platform's memory: the closest, l4, does not fit: needs 141.8 GB "
            "a device at TP 1") in doc["summary"][1]


def test_a_dtype_the_platform_has_no_peak_for_is_not_available():
    r = invoke("--model", "Llama-3-8B", "--batch", 1, "--context", 512, "--sla-p99-s", 1,
               "--dtype", "fp16", "--platforms", "tpu-v5e", *RUNS, "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    (c,) = json.loads(r.stdout)["candidates"]
    assert c["status"] == "not available" and c["latency_s"]["value"] is None
    assert c["reason"].startswith("not available for fp16")
