"""The precision-quality item reads rows by their mapping and source (issue 32): only a real
model's figures (`quality --model`) clear or fail it on top-1 and KL; the suite decoder's are a
smoke check; a sparsity or quantization change needs rows measured under that knob."""

import json

import pytest
from runfactory import complete_review, quality_doc, quality_doc_v1, write_review

from reviewkit.review.gate import run_check


def _finding(tmp_path, doc, cand_kw=None):
    path = write_review(tmp_path, complete_review(), cand_kw=cand_kw)
    (tmp_path / "evidence" / "quality.json").write_text(json.dumps(doc))
    report = run_check(path)
    return report, next(f for f in report.findings if f.item.id == "precision-quality")


def test_smoke_check_figures_below_the_limit_warn_and_do_not_fail(tmp_path):
    _, finding = _finding(tmp_path, quality_doc(top1=0.9, kl=0.01, source="suite"))
    assert finding.status == "warn", finding.summary
    assert "no real model's figures for bf16" in finding.summary
    assert "reviewkit quality --model FILE.pt2 --inputs FILE --dtype bf16" in finding.summary
    # reported, labelled, not counted
    assert "smoke check only" in finding.summary
    assert "top-1 agreement 0.900 < 0.99" in finding.summary
    assert not finding.blocks


def test_smoke_check_rows_still_fail_on_a_relative_error_over_tolerance(tmp_path):
    _, finding = _finding(tmp_path, quality_doc(rel_error=0.05, source="suite"))
    assert finding.status == "fail" and "relative error 5.00e-02 > 0.01" in finding.summary


@pytest.mark.parametrize(
    "doc,status,needle",
    [
        (quality_doc(), "pass", "a real model's among them"),
        (quality_doc(top1=0.98), "fail", "model.toy-decoder.b1s256 bf16: top-1 agreement 0.980"),
        (quality_doc(kl=2e-3), "fail", "KL 2.00e-03 > 0.001"),
    ],
    ids=["within", "top1-below", "kl-above"],
)
def test_a_real_models_figures_clear_or_fail_the_item(tmp_path, doc, status, needle):
    _, finding = _finding(tmp_path, doc)
    assert finding.status == status and needle in finding.summary, finding.summary


def test_a_schema_1_file_reads_as_the_suites_smoke_check(tmp_path):
    """The sample review's file: schema 1, its decoder row from the suite's random weights."""
    _, finding = _finding(tmp_path, quality_doc_v1(top1=0.977))
    assert finding.status == "warn" and "top-1 agreement 0.977 < 0.99" in finding.summary


def _rows(mapping, dtype, **figures):
    doc = quality_doc()
    for row in doc["results"]:
        row.update(mapping=mapping, dtype=dtype, **figures)
    return doc


def test_a_sparsity_change_needs_rows_measured_sparse(tmp_path):
    sparse = {"dtype": "fp32", "knobs": {"sparsity": "2:4"}}
    _, none = _finding(tmp_path / "a", quality_doc(), cand_kw=sparse)
    assert none.status == "fail" and "no sparsity=2:4 results" in none.summary
    # pruning changes the function on purpose: a 20% relative error is judged on the model's
    # top-1 and KL, not on a rounding tolerance
    ok = _rows({"sparsity": "2:4"}, "fp32", rel_error=0.2, top1_agreement=0.995)
    _, judged = _finding(tmp_path / "b", ok, cand_kw=sparse)
    assert judged.status == "pass", judged.summary
    low = _rows({"sparsity": "2:4"}, "fp32", rel_error=0.2, top1_agreement=0.95)
    _, failed = _finding(tmp_path / "c", low, cand_kw=sparse)
    assert failed.status == "fail" and "sparsity=2:4: top-1 agreement 0.950" in failed.summary


def test_quantization_is_matched_by_its_knob_not_by_dtype(tmp_path):
    quantised = {"dtype": "fp32", "knobs": {"quantization": "int8-dynamic"}}
    _, other = _finding(tmp_path / "a", quality_doc(), cand_kw=quantised)
    assert other.status == "fail" and "no quantization=int8-dynamic results" in other.summary
    # the int8 tolerance (5e-2) applies to an int8 row: 3e-2 passes
    rows = _rows({"quantization": "int8-dynamic"}, "int8", rel_error=0.03)
    _, ok = _finding(tmp_path / "b", rows, cand_kw=quantised)
    assert ok.status == "pass", ok.summary


def test_fp32_matmuls_in_bf16_need_rows_at_that_precision(tmp_path):
    medium = {"dtype": "fp32", "knobs": {"float32_matmul_precision": "medium"}}
    rows = _rows({"float32_matmul_precision": "medium"}, "bf16", rel_error=0.02)
    _, over = _finding(tmp_path, rows, cand_kw=medium)
    # matched by the knob, held to bf16's tolerance (1e-2) as its label says
    assert over.status == "fail"
    assert "float32_matmul_precision=medium: relative error" in over.summary


def test_the_packet_labels_the_smoke_check(tmp_path):
    from reviewkit.render.packet.quality import quality_input

    report, _ = _finding(tmp_path, quality_doc(top1=0.9, source="suite"))
    _, _, notes = quality_input(report)
    assert any("model.toy-decoder.b1s256 bf16 (smoke check: the suite's random weights): "
               "top-1 agreement 90.0%" in n for n in notes), notes  # fmt: skip


def test_a_bad_mapping_or_source_names_the_key(tmp_path):
    from pathlib import Path

    from reviewkit.evidence.files import Loaded
    from reviewkit.evidence.quality import QualityUnusable, read_quality

    for key, value, needle in [("mapping", ["bf16"], "results[0].mapping"),
                               ("source", "hearsay", "results[0].source"),
                               ("mapping", {"dtype": 1.5}, "results[0].mapping.dtype")]:
        doc = quality_doc()
        doc["results"][0][key] = value
        with pytest.raises(QualityUnusable, match=needle.replace("[", r"\[").replace("]", r"\]")):
            read_quality(Loaded(Path("q.json"), doc))
