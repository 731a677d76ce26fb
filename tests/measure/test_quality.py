"""Precision quality drift: the metrics by hand, the mappings `--dtype` and `--knob` give, and a
smoke measurement of the suite against float64."""

import json
import math
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from reviewkit.bundle import knobs  # noqa: E402
from reviewkit.common.errors import UsageError  # noqa: E402
from reviewkit.measure.quality import (  # noqa: E402
    errors,
    logit_agreement,
    measure_quality,
    precision_label,
    quality_mappings,
)


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
    # dynamic quantisation maps weight matrices: the nn.Linear of blocks and models, and the
    # `linear` GEMMs' weight (built as an nn.Linear under a weight knob); a bmm has none
    assert int8 == {"gemm", "block", "model"}
    int8_gemm = [r for r in rows if r["dtype"] == "int8" and r["layer_type"] == "gemm"]
    assert {r["status"] for r in int8_gemm if r["id"].startswith("gemm.") and ".bmm" in r["id"]
            } <= {"not applicable"}  # fmt: skip


def test_errors_follow_the_mantissa_width(smoke_quality):
    by = {(r["id"], r["dtype"]): r for r in smoke_quality["results"] if r["status"] == "ok"}
    for (wid, dtype), r in by.items():
        if dtype == "bf16":
            # bf16 keeps 8 significant bits: unit roundoff 2^-8 = 3.9e-3; fp16 keeps 11
            # (2^-11 = 4.9e-4), so fp16 must be several times closer to float64 on every workload.
            assert 1e-4 < r["rel_error"] < 1e-2, (wid, r["rel_error"])
            assert by[(wid, "fp16")]["rel_error"] < r["rel_error"] / 3, wid
    model = [r for r in smoke_quality["results"] if r["layer_type"] == "model"
             and r["status"] == "ok"]  # fmt: skip
    assert all("top1_agreement" in r and "kl_divergence" in r for r in model)
    # the decoder's weights are random: its top-1 and KL are labelled a smoke check
    assert all(r["smoke_check"] and r["source"] == "suite" for r in model)
    assert not any("smoke_check" in r for r in smoke_quality["results"] if r not in model)


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


def test_dtype_and_knob_give_the_mappings():
    # --dtype as it was: one mapping per dtype, int8 meaning int8 dynamic quantization
    assert quality_mappings(None, "") == [{"dtype": "bf16"}, {"dtype": "fp16"},
                                          {"quantization": "int8-dynamic"}]  # fmt: skip
    assert quality_mappings(None, "quantization=int8-dynamic") == [
        {"quantization": "int8-dynamic"}
    ]
    assert quality_mappings("bf16,fp16", "threads=1") == [{"dtype": "bf16", "threads": 1},
                                                          {"dtype": "fp16", "threads": 1}]
    assert quality_mappings(None, "compile_mode=eager,dtype=bf16") == [{"dtype": "bf16"}]
    for dtype, knob, needle in [
        ("int8", "quantization=int8-dynamic", "both set quantization"),
        ("bf16", "dtype=fp16", "both set dtype"),
        (None, "compile_mode=default", "eager mode"),
        (None, "interop_threads=2", "cannot be set here"),
        ("fp8", "", "choose from bf16, fp16, int8"),
    ]:
        with pytest.raises(UsageError, match=needle):
            quality_mappings(dtype, knob)


def test_precision_label_is_the_narrowest_format_computed_in():
    assert precision_label({"dtype": "bf16"}) == "bf16"
    assert precision_label({"quantization": "int8-dynamic"}) == "int8"
    assert precision_label({"float32_matmul_precision": "medium"}) == "bf16"
    assert precision_label({"float32_matmul_precision": "high"}) == "tf32"
    assert precision_label({"dtype": "fp16", "float32_matmul_precision": "medium"}) == "fp16"
    assert precision_label({"threads": 1}) == "fp32"


def test_knob_rows_record_their_mapping_and_the_registrys_reasons():
    from reviewkit.suite import workloads as suite

    mappings = quality_mappings(None, "quantization=int8-dynamic") + quality_mappings(
        None, "float32_matmul_precision=medium"
    )
    only = "gemm.*,norm.*,block.*"
    doc = measure_quality("smoke", mappings=mappings, only=only)
    rows = doc["results"]
    assert doc["mappings"] == mappings and {r["source"] for r in rows} == {"suite"}
    specs = suite.plan_specs("smoke", ("fp32",), only)
    kernels = {s.id.removesuffix(".fp32"): s.kernel for s in specs}
    assert len(rows) == 2 * len(kernels)
    not_applicable = [r for r in rows if r["status"] == "not applicable"]
    assert not_applicable
    for r in not_applicable:
        why = knobs.not_applicable(r["mapping"], kernels[r["id"]], "fp32", "cpu")
        assert why and r["reason"] == "; ".join(f"{k}: {v}" for k, v in why.items())
    quantised = [r for r in rows if r["mapping"] == {"quantization": "int8-dynamic"}
                 and r["status"] == "ok"]  # fmt: skip
    # the `linear` GEMMs' weight and the blocks' nn.Linear (a bmm holds no weight matrix)
    assert {r["layer_type"] for r in quantised} == {"gemm", "block"}
    assert all(r["dtype"] == "int8" for r in quantised)
    # int8 weights keep ~7 bits per tensor scale: error above bf16's, under the 5e-2 tolerance
    assert all(1e-3 < r["rel_error"] < 5e-2 for r in quantised)
    norms = [r for r in rows if r["layer_type"] == "norm"
             and r["mapping"] == {"float32_matmul_precision": "medium"}]  # fmt: skip
    assert norms and all(r["status"] == "not applicable" and "does no matmul" in r["reason"]
                         for r in norms)  # fmt: skip


def test_cli_knob_writes_rows_with_their_mapping(tmp_path):
    out = tmp_path / "quality.json"
    r = subprocess.run([sys.executable, "-m", "reviewkit", "quality", "--profile", "smoke",
                        "--only", "block.*mlp*", "--knob", "quantization=int8-dynamic",
                        "--out", str(out)], capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 2
    assert [(row["mapping"], row["dtype"], row["status"]) for row in doc["results"]] == [
        ({"quantization": "int8-dynamic"}, "int8", "ok")
    ]
