"""The datasheet table and the rule that picks the peak MFU is measured against."""

import pytest

from reviewkit.analysis.roofline import roofline
from reviewkit.suite import ceilings


@pytest.mark.parametrize(
    "torch_name,entry",
    [
        ("NVIDIA H200", "NVIDIA H200 SXM"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB"),
        ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 40GB"),
        ("NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe 80GB"),
        ("NVIDIA L4", "NVIDIA L4"),
        ("AMD Instinct MI300X", "AMD Instinct MI300X"),
    ],
)
def test_known_devices_are_recognised(torch_name, entry):
    assert ceilings.lookup(torch_name).name == entry


@pytest.mark.parametrize("torch_name", ["NVIDIA L40S", "NVIDIA GeForce RTX 4090", "AMD EPYC"])
def test_unknown_devices_are_not_guessed(torch_name):
    assert ceilings.lookup(torch_name) is None


def test_datasheet_values_are_dense_figures():
    # H100 SXM datasheet: 1,979 TFLOPS bf16 "with sparsity"; the dense figure is half.
    h100 = ceilings.lookup("NVIDIA H100 80GB HBM3")
    assert h100.peak_flops_per_s["bf16"] == pytest.approx(1979e12 / 2, rel=1e-3)
    assert h100.peak_bytes_per_s == pytest.approx(3.35e12)
    a100 = ceilings.lookup("NVIDIA A100-SXM4-80GB")
    assert a100.peak_flops_per_s["bf16"] == 312e12 and a100.peak_flops_per_s["fp32"] == 19.5e12
    assert all(e.reference for e in ceilings.datasheet())


def test_datasheet_peak_is_used_with_the_measured_one_beside_it():
    c = ceilings.choose(700e12, "sweep", 989e12, "H100 datasheet")
    assert (c.peak, c.source, c.measured, c.datasheet) == (989e12, "datasheet", 700e12, 989e12)
    # The same 1 ms GEMM of 494.5 GFLOP reads 50% MFU against the datasheet peak.
    assert roofline(494.5e9, 1e6, 1e-3, c.peak, 3.35e12).mfu == pytest.approx(0.5)


def test_measured_peak_when_there_is_no_datasheet_entry():
    c = ceilings.choose(1.7e11, "sweep", None, "")
    assert (c.peak, c.source) == (1.7e11, "measured")
    assert "measured ceiling" in c.reason


def test_not_available_says_why():
    c = ceilings.choose(None, "sweep", None, "", failure="GEMM failed: unsupported dtype")
    assert c.peak is None and c.source == "not available"
    assert "unsupported dtype" in c.reason
