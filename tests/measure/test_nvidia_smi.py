"""What a GPU run reads from nvidia-smi and torch.distributed's backend string, checked against a
fake nvidia-smi on PATH that prints what the H200 lent to this project printed."""

from __future__ import annotations

import os
import stat

import pytest

torch = pytest.importorskip("torch")

from reviewkit.measure import device as dev  # noqa: E402
from reviewkit.measure import distributed as dmeasure  # noqa: E402
from reviewkit.measure import rank_kernels  # noqa: E402

# `nvidia-smi topo -m` on the H200 (driver 580.159.04), piped: the header row comes underlined
# with terminal escapes even though stdout is not a terminal.
H200_TOPO = (
    "\x1b[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \t0-15\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n"
)


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """Puts an nvidia-smi on PATH that logs its arguments and prints $FAKE_SMI_OUT."""
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    log = tmp_path / "args.log"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\nprintf "%b" "$FAKE_SMI_OUT"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return log


def test_topology_matrix_loses_the_terminal_escapes(fake_smi, monkeypatch):
    monkeypatch.setenv("FAKE_SMI_OUT", H200_TOPO.replace("\x1b", "\\033"))
    doc = rank_kernels.topology(torch.device("cuda"), "nccl")
    assert doc["available"] is True
    assert "\x1b" not in doc["matrix"]
    assert doc["matrix"].startswith("GPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X ")


def test_query_reads_the_named_gpu_by_uuid(fake_smi, monkeypatch):
    monkeypatch.setenv("FAKE_SMI_OUT", "580.159.04, 1980\\n")
    got = dev.nvidia_smi_query(("driver_version", "clocks.max.sm"), "4f8e0c1a-0000")
    assert got == {"driver_version": "580.159.04", "clocks.max.sm": "1980"}
    args = fake_smi.read_text()
    assert "--query-gpu=driver_version,clocks.max.sm" in args and "nounits" in args
    assert "--id=GPU-4f8e0c1a-0000" in args
    assert dev._mhz(got["clocks.max.sm"]) == 1980
    assert dev._mhz("[N/A]") is None


def test_query_without_nvidia_smi_or_with_a_short_line_is_none(fake_smi, monkeypatch):
    monkeypatch.setenv("FAKE_SMI_OUT", "580.159.04\\n")  # one value for two fields
    assert dev.nvidia_smi_query(("driver_version", "clocks.max.sm")) is None
    monkeypatch.setenv("PATH", "/nonexistent")
    assert dev.nvidia_smi_query(("driver_version",)) is None
    assert dev.nvidia_driver() is None


def test_nccl_runs_carry_their_cpu_bookkeeping_over_gloo():
    # On the H200, a one-rank NCCL run failed its first CPU broadcast ("No backend type
    # associated with device type cpu") until CPU tensors were given gloo.
    from torch.distributed.distributed_c10d import BackendConfig

    spec = dmeasure.process_group_backend("nccl")
    assert BackendConfig(spec).get_device_backend_map() == {"cpu": "gloo", "cuda": "nccl"}
    assert dmeasure.process_group_backend("gloo") == "gloo"
