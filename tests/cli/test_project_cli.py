"""`reviewkit project` as a user meets it: --json and --out round trip, a device profile as the
target, a model's phases, and bad input, on a synthetic run of known share of roof."""

from __future__ import annotations

import json

import pytest
from runfactory import analysed, square_gemm_doc
from typer.testing import CliRunner

from reviewkit.bundle import profile as profiles
from reviewkit.bundle.run import write_run
from reviewkit.cli.app import app

BERT_FFN_UP = "gemm.bert-base-ffn-up.b1s128.fp32"


@pytest.fixture
def run_dir(tmp_path):
    """Square fp32 GEMMs at s = 0.5 and 10 us of measured overhead, on a 1e12 FLOP/s device."""
    folder = tmp_path / "run"
    write_run(folder, analysed(square_gemm_doc(0.5, 10e-6, (128, 256, 512, 1024, 2048))))
    return folder


def invoke(*args):
    return CliRunner().invoke(app, ["project", *(str(a) for a in args)])


def test_json_and_out_round_trip(run_dir, tmp_path):
    out = tmp_path / "projection.json"
    r = invoke("--from", run_dir, "--profile", "quick", "--only", "gemm.*", "--dtype", "fp32",
               "--out", out, "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc == json.loads(out.read_text())
    rows = {w["id"]: w for w in doc["workloads"]}
    assert set(rows) and all(w["id"].startswith("gemm.") for w in doc["workloads"])
    first = rows[BERT_FFN_UP]
    # F = 2 x 128 x 768 x 3072 = 603,979,776, B = 11,403,264 (53 FLOP/B, over the ridge of
    # 10): t_roof = 603.98 us on 1e12 FLOP/s; every measured GEMM is at s = 0.5, plus 10 us
    assert first["projected_s"] == pytest.approx(2 * 603.979776e-6 + 10e-6)
    assert first["low_s"] <= first["projected_s"] <= first["high_s"]
    assert first["label"] == "measured" and first["device"] == "Test CPU"
    assert doc["from"][0]["points"] == 5 and "not_built" not in doc["target"]
    assert {t["layer_type"] for t in doc["layer_types"]} == {"gemm"}


def _profile(tmp_path):
    """A device profile of another device with twice the peak and the same bandwidth."""
    doc = profiles.build(
        calibrated={"compute": {"fp32": {"peak": 2e12, "source": "measured"}},
                    "memory": [{"level": "dram", "capacity_bytes": None, "peak": 1e11}],
                    "bandwidth": {"peak": 1e11, "source": "measured", "level": "dram"},
                    "threads": 2,
                    "settings": {"threads": 2, "float32_matmul_precision": "highest"}},
        fingerprint={"hash": "fp-z", "label": "Profiled CPU"},
        torch_build={"torch_version": "2.13.0+cpu"}, device="cpu",
        device_name="Profiled CPU", calibration="quick", created_unix_s=1.0, wall_s=1.0,
    )  # fmt: skip
    return profiles.save(doc, tmp_path / "profile.json")


def test_a_device_profile_is_the_target_and_borrows(run_dir, tmp_path):
    r = invoke("--from", run_dir, "--profile", "quick", "--only", BERT_FFN_UP, "--dtype",
               "fp32", "--device-profile", _profile(tmp_path), "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["workloads"]
    # half the roof time of the run's own device: 301.99 us over 0.5, plus 10 us
    assert row["projected_s"] == pytest.approx(603.979776e-6 + 10e-6)
    assert row["device"] == "Profiled CPU" and row["label"] == "borrowed from Test CPU"


def test_a_model_projects_its_phases(run_dir, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "num_hidden_layers": 2, "vocab_size": 1000}))  # fmt: skip
    r = invoke("--from", run_dir, "--model", config, "--batch", 2, "--context", 8, "--dtype",
               "fp32", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert {p["phase"] for p in doc["phases"]} == {"prefill", "decode"}
    rows = doc["workloads"]
    # only GEMMs were measured: attention, norms and the rest are not available, and say why
    attention = next(w for w in rows if w["layer_type"] == "attention")
    assert attention["label"] == "not available" and "no measured attention" in attention["reason"]
    gemm = [w for w in rows if w["layer_type"] == "gemm"]
    assert gemm and all(w["label"] == "measured" and w["projected_s"] for w in gemm)
    prefill = next(p for p in doc["phases"] if p["phase"] == "prefill")
    # the phase's sum counts each GEMM per layer: QKV, O, gate/up, down x 2 layers + LM head
    expected = sum(w["projected_s"] * w["count"] for w in gemm if w["phase"] == "prefill")
    assert prefill["projected_s"] == pytest.approx(expected) and prefill["not_available"] > 0
    table = invoke("--from", run_dir, "--model", config, "--dtype", "fp32")
    assert table.exit_code == 0 and "(whole pass)" in table.stdout


def test_bad_input_names_what_to_do(run_dir, tmp_path):
    both = invoke("--from", run_dir, "--profile", "quick", "--model", "Llama-3-8B")
    assert both.exit_code == 2 and "pass one target" in both.stderr
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"hidden_size": 64}))
    missing = invoke("--from", run_dir, "--model", config)
    assert missing.exit_code == 2 and "'num_attention_heads' is missing" in missing.stderr
    unknown = invoke("--from", run_dir, "--model", "gpt-5")
    assert unknown.exit_code == 2 and "Llama-3-8B" in unknown.stderr
    shaped = invoke("--from", run_dir, "--profile", "quick", "--batch", 8)
    assert shaped.exit_code == 2 and "--batch and --context shape a --model" in shaped.stderr
    only = invoke("--from", run_dir, "--model", "Llama-3-8B", "--only", "gemm.*")
    assert only.exit_code == 2 and "--only selects --profile workloads" in only.stderr


def test_a_platform_target_divides_by_its_dense_datasheet_figures_and_borrows(run_dir):
    # The synthetic run's device is not an H100, so its efficiency is borrowed. The BERT FFN-up
    # GEMM at b1 s128 fp32 is 2 x 128 x 768 x 3072 = 603,979,776 FLOPs; the H100 SXM's dense
    # fp32 peak is 67 TFLOP/s (datasheet), so its roof is 603979776 / 67e12 = 9.01 us (its
    # bytes, (128 x 768 + 3072 x 768 + 128 x 3072) x 4 = 11.4 MB at 3.35 TB/s, take 3.4 us).
    r = invoke("--from", run_dir, "--profile", "quick", "--only", BERT_FFN_UP, "--dtype", "fp32",
               "--platform", "h100-sxm", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    (row,) = doc["workloads"]
    assert row["roof_s"] == pytest.approx(603979776 / 67e12, rel=1e-6)
    assert row["label"].startswith("borrowed from")
    (device,) = doc["devices"]
    assert device["peak_flops_per_s"]["fp32"] == 67e12
    assert "platform table: h100-sxm" in device["source"]


def test_a_platform_a_run_was_measured_on_takes_its_measured_ceilings_and_is_measured():
    # samples/gpu-quick-h200 ran on an H200: projecting its own GEMMs onto the h200-sxm platform
    # lays its measured ceilings over the datasheet's (fp32 measured, not the datasheet's 67
    # TFLOP/s) and labels the rows measured.
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "samples" / "gpu-quick-h200"
    r = invoke("--from", sample, "--profile", "quick", "--only", "gemm.*", "--dtype", "fp32",
               "--platform", "h200-sxm", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    run = json.loads((sample / "run.json").read_text())
    measured = run["ceilings"]["compute"]["fp32"]["measured"]
    assert doc["devices"][0]["peak_flops_per_s"]["fp32"] == pytest.approx(measured)
    assert {w["label"] for w in doc["workloads"]} == {"measured"}


def test_an_unknown_platform_names_the_valid_ones(run_dir):
    r = invoke("--from", run_dir, "--profile", "quick", "--only", "gemm.*", "--platform", "h300")
    assert r.exit_code != 0
    assert "h300" in r.output and "h100-sxm" in r.output


def test_a_share_past_the_roof_is_said_under_the_table():
    # samples/cpu-quick-fit-r4-epyc-2core measured its fp32 residual add at 4096 tokens 1.12x
    # faster than main memory's copy-measured roof (t_roof 3.247 ms, t 2.890 ms): the 2048-token
    # add in the same level may be projected past its roof, and the table says why
    from pathlib import Path

    from reviewkit.cli.projecting import SHARE_PAST_ROOF_NOTE

    sample = Path(__file__).resolve().parents[2] / "samples" / "cpu-quick-fit-r4-epyc-2core"
    args = ("--from", sample, "--profile", "full", "--only",
            "elementwise.llama-2-7b-residual-add.2048x4096.fp32", "--dtype", "fp32")  # fmt: skip
    doc = json.loads(invoke(*args, "--json").stdout)
    (row,) = doc["workloads"]
    assert 1.0 < row["share"] <= 3.247 / 2.890 + 1e-3
    text = " ".join(invoke(*args).output.split())
    assert " ".join(SHARE_PAST_ROOF_NOTE.split()) in text
