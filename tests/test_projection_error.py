"""benchmarks/projection_error.py on synthetic runs whose errors are worked by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from runfactory import analysed, square_gemm_doc

from reviewkit.bundle.run import write_run

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "projection_error.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("projection_error", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(folder: Path, doc: dict) -> Path:
    write_run(folder, analysed(doc))
    return folder


def test_held_out_gemms_at_the_fitted_share_are_projected_without_error(script, tmp_path):
    # Fit: n = 256, 512, 1024, 2048 at s = 0.5 and 10 us of overhead; held out: 384 and 768
    # (ids the fit never saw) at the same share: t = 2n^3 / 1e12 / 0.5 + 10 us. The fit predicts
    # s = 0.5 everywhere, so the projection is exact (error 0) and inside its interval.
    fit = _write(tmp_path / "fit", square_gemm_doc(0.5, 10e-6, (256, 512, 1024, 2048)))
    held = _write(tmp_path / "held", square_gemm_doc(0.5, 10e-6, (256, 384, 768)))
    doc = script.evaluate([fit], held, None)
    assert doc["held_out_ids"] == ["gemm.sq384.fp32", "gemm.sq768.fp32"]  # 256 was fitted on
    assert [r["error"] for r in doc["rows"]] == pytest.approx([0.0, 0.0], abs=1e-9)
    assert all(r["covered"] for r in doc["rows"])
    s = doc["summary"]
    assert s["n"] == 2 and s["median_abs_error"] == pytest.approx(0.0, abs=1e-9)
    # 2 held-out workloads are under the 20 the target needs; 100% coverage is over 90%
    assert s["targets"]["held-out workloads >= 20"] is False
    assert s["targets"]["80% intervals cover 70%-90%"] is False
    assert s["targets"]["median |error| <= 15%"] is True


def test_a_held_out_run_slower_than_the_fit_reads_its_error(script, tmp_path):
    # Held out at s = 0.4 where the fit saw 0.5, no overhead: projected t_roof / 0.5, measured
    # t_roof / 0.4, so error = 0.4 / 0.5 - 1 = -20% for every held-out GEMM.
    fit = _write(tmp_path / "fit", square_gemm_doc(0.5, None, (256, 512, 1024)))
    held = _write(tmp_path / "held", square_gemm_doc(0.4, None, (384, 768, 1536)))
    doc = script.evaluate([fit], held, None)
    assert [r["error"] for r in doc["rows"]] == pytest.approx([-0.2] * 3, rel=1e-6)
    assert doc["summary"]["median_abs_error"] == pytest.approx(0.2, rel=1e-6)
    assert doc["summary"]["p90_abs_error"] == pytest.approx(0.2, rel=1e-6)
    assert "| gemm | 3 | -20.0% | 20.0% | 20.0% |" in script.markdown(doc)


def test_a_held_out_run_of_another_device_is_refused_without_a_platform(script, tmp_path):
    fit = _write(tmp_path / "fit", square_gemm_doc(0.5, None, (256, 512)))
    other = _write(tmp_path / "other", square_gemm_doc(0.5, None, (384,), fingerprint="fp-b"))
    with pytest.raises(SystemExit, match=r"fp-b.*pass --platform"):
        script.evaluate([fit], other, None)


def test_across_devices_every_measured_workload_is_projected_onto_the_platform(script, tmp_path):
    # onto the H100 SXM's datasheet fp32 67 TFLOP/s: a 1024^3 GEMM's roof 2 x 1024^3 / 67e12
    # = 32.05 us at the fitted s = 0.5: 64.1 us projected, borrowed from the fit's device
    fit = _write(tmp_path / "fit", square_gemm_doc(0.5, None, (256, 512, 1024, 2048)))
    held = _write(tmp_path / "held", square_gemm_doc(0.5, None, (1024,), fingerprint="fp-b"))
    doc = script.evaluate([fit], held, "h100-sxm")
    (row,) = doc["rows"]
    assert row["projected_s"] == pytest.approx(2 * 1024**3 / 67e12 / 0.5, rel=1e-6)
    assert row["label"].startswith("borrowed from")
    assert "targets" not in doc["summary"]  # across devices: reported, no target


def test_onto_the_held_out_calibration_prices_at_the_held_out_runs_peak(script, tmp_path):
    # the same device measured at a 1e12 fp32 peak for the fit and 2e12 for the held-out run
    # (its share of that roof 0.5): a 768^3 GEMM's roof is 2 x 768^3 / 2e12 = 452.98 us there,
    # so t = 905.97 us. Onto the fit's calibration the projection divides by 1e12 at the
    # fitted s = 0.5: 1.812 ms, error +100%; onto the held-out run's own, exact
    fit = _write(tmp_path / "fit", square_gemm_doc(0.5, None, (256, 512, 1024, 2048)))
    held = _write(tmp_path / "held", square_gemm_doc(0.5, None, (768,), peak=2e12))
    onto_fit = script.evaluate([fit], held, None)
    onto_held = script.evaluate([fit], held, None, "held-out")
    (a,), (b,) = onto_fit["rows"], onto_held["rows"]
    assert a["measured_s"] == pytest.approx(2 * 768**3 / 2e12 / 0.5)
    assert a["error"] == pytest.approx(1.0, rel=1e-6)
    assert b["error"] == pytest.approx(0.0, abs=1e-9)
    assert "onto the held-out run's ceilings" in onto_held["mode"]


def test_several_held_out_runs_are_one_held_out_set(script, tmp_path):
    # Fit at s = 0.5. Held out: 384 and 768 at s = 0.5 (error 0) in one run, 1536 at s = 0.4
    # in another (error 0.4 / 0.5 - 1 = -20%). Together: three workloads, |error| 0, 0, 0.2, so
    # the median is 0 and the nearest-rank p90 (k = ceil(0.9 x 3) = 3) is 0.2; each run's own
    # summary stands beside it.
    fit = _write(tmp_path / "fit", square_gemm_doc(0.5, None, (256, 512, 1024, 2048)))
    exact = _write(tmp_path / "exact", square_gemm_doc(0.5, None, (384, 768)))
    slow = _write(tmp_path / "slow", square_gemm_doc(0.4, None, (1536,)))
    doc = script.evaluate([fit], [exact, slow], None)
    assert doc["held_out_ids"] == ["gemm.sq384.fp32", "gemm.sq768.fp32", "gemm.sq1536.fp32"]
    assert [r["error"] for r in doc["rows"]] == pytest.approx([0.0, 0.0, -0.2], abs=1e-9)
    s = doc["summary"]
    assert s["n"] == 3 and s["median_abs_error"] == pytest.approx(0.0, abs=1e-9)
    assert s["p90_abs_error"] == pytest.approx(0.2, rel=1e-6)
    assert doc["by_held_out_run"][str(slow)]["median_abs_error"] == pytest.approx(0.2, rel=1e-6)
    assert f"| {slow} | 1 | -20.0% |" in script.markdown(doc)


def test_a_workload_held_out_in_two_runs_is_refused(script, tmp_path):
    fit = _write(tmp_path / "fit", square_gemm_doc(0.5, None, (256, 512, 1024)))
    a = _write(tmp_path / "a", square_gemm_doc(0.5, None, (384,)))
    b = _write(tmp_path / "b", square_gemm_doc(0.4, None, (384,)))
    with pytest.raises(SystemExit, match=r"gemm\.sq384\.fp32 is also in an earlier --held-out"):
        script.evaluate([fit], [a, b], None)
