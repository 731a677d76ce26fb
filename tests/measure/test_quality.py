"""Precision quality drift: the metrics by hand, and a smoke measurement against float64."""

import json
import math
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from reviewkit.measure.quality import errors, logit_agreement, measure_quality  # noqa: E402


def test_errors_by_hand():
    # diff = [0, 0, -1]: norm 1 against norm(ref) = sqrt(1 + 4 + 9) = sqrt(14); max |diff| = 1.
    rel, max_abs = errors(torch.tensor([1.0, 2.0, 2.0]), torch.tensor([1.0, 2.0, 3.0]))
    assert rel == pytest.approx(1 / math.sqrt(14))
    assert max_abs == 1.0


def test_logit_agreement_by_hand():
    # ref logits [0, ln 3] -> p = [1/4, 3/4]; out [ln 3, 0] -> q = [3/4, 1/4].
    # KL(p || q) = 1/4 ln(1/3) + 3/4 ln 3 = 1/2 ln 3 = 0.5493; the argmax flips.
    ln3 = math.log(3)
    agree, kl = logit_agreement(torch.tensor([[ln3, 0.0]]), torch.tensor([[0.0, ln3]]))
    assert agree == 0.0
    assert kl == pytest.approx(0.5 * ln3)
    same, zero = logit_agreement(torch.tensor([[1.0, 2.0]]), torch.tensor([[1.0, 2.0]]))
    assert (same, zero) == (1.0, pytest.approx(0.0, abs=1e-15))


@pytest.fixture(scope="module")
def smoke_quality():
    return measure_quality("smoke")


def test_every_workload_in_every_dtype(smoke_quality):
    rows = smoke_quality["results"]
    assert smoke_quality["kind"] == "reviewkit.quality" and smoke_quality["reference"] == "fp64"
    assert {r["dtype"] for r in rows} == {"bf16", "fp16", "int8"}
    assert all(r["status"] in ("ok", "not applicable") for r in rows), [
        r for r in rows if r["status"] not in ("ok", "not applicable")
    ]
    int8 = {r["layer_type"] for r in rows if r["dtype"] == "int8" and r["status"] == "ok"}
    assert int8 == {"block", "model"}  # dynamic quantisation rewrites nn.Linear modules only


def test_errors_follow_the_mantissa_width(smoke_quality):
    by = {(r["id"], r["dtype"]): r for r in smoke_quality["results"] if r["status"] == "ok"}
    for (wid, dtype), r in by.items():
        if dtype == "bf16":
            # bf16 keeps 8 significant bits: unit roundoff 2^-9 = 1.95e-3; fp16 keeps 11
            # (2^-12 = 2.4e-4), so fp16 must be several times closer to float64 on every workload.
            assert 1e-4 < r["rel_error"] < 1e-2, (wid, r["rel_error"])
            assert by[(wid, "fp16")]["rel_error"] < r["rel_error"] / 3, wid
    model = [r for r in smoke_quality["results"] if r["layer_type"] == "model"
             and r["status"] == "ok"]  # fmt: skip
    assert all("top1_agreement" in r and "kl_divergence" in r for r in model)


def test_cli_writes_evidence_that_check_reads(tmp_path):
    out = tmp_path / "quality.json"
    r = subprocess.run([sys.executable, "-m", "reviewkit", "quality", "--profile", "smoke",
                        "--only", "model.*.b1s32.*", "--dtype", "bf16", "--out", str(out)],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert [row["dtype"] for row in doc["results"]] == ["bf16"]
    bad = subprocess.run([sys.executable, "-m", "reviewkit", "quality", "--dtype", "fp8"],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and "bf16, fp16, int8" in bad.stderr
