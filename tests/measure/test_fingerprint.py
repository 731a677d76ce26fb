"""The device fingerprint on fake /proc/cpuinfo and sysfs: Zen 3, Zen 5, Sapphire Rapids, ARM."""

from __future__ import annotations

from pathlib import Path

import pytest

from reviewkit.analysis.compare import compare
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.records import Run
from reviewkit.measure.fingerprint import cpu_fingerprint, gpu_fingerprint


def _x86(vendor, family, model, flags, name, cores=2):
    block = (f"processor\t: {{i}}\nvendor_id\t: {vendor}\ncpu family\t: {family}\n"
             f"model\t\t: {model}\nmodel name\t: {name}\nstepping\t: 1\n"
             f"flags\t\t: {flags}\n\n")  # fmt: skip
    return "".join(block.format(i=i) for i in range(cores))


ZEN3 = _x86("AuthenticAMD", 25, 1, "fpu sse avx avx2 fma", "AMD EPYC")
ZEN5 = _x86("AuthenticAMD", 26, 2, "avx avx2 avx512f avx512_bf16 avx512_vnni", "AMD EPYC")
SPR = _x86("GenuineIntel", 6, 143, "avx2 avx512f avx512_bf16 avx512_fp16 amx_tile amx_bf16 "
           "amx_int8", "Intel(R) Xeon(R) Platinum 8480+", cores=4)  # fmt: skip
NEOVERSE_V1 = "".join(
    f"processor\t: {i}\nFeatures\t: fp asimd sve bf16 i8mm\nCPU implementer\t: 0x41\n"
    f"CPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd40\nCPU revision\t: 1\n\n"
    for i in range(8)
)


def _machine(tmp_path: Path, cpuinfo: str, caches=(("1", "Data", "32K"), ("2", "Unified",
             "1024K"), ("3", "Unified", "32768K")), mem_kb=24683664):  # fmt: skip
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cpuinfo").write_text(cpuinfo)
    (tmp_path / "meminfo").write_text(f"MemTotal:       {mem_kb} kB\n")
    for i, (level, kind, size) in enumerate(caches):
        d = tmp_path / "cpu" / "cpu0" / "cache" / f"index{i}"
        d.mkdir(parents=True)
        (d / "level").write_text(level + "\n")
        (d / "type").write_text(kind + "\n")
        (d / "size").write_text(size + "\n")
    return cpu_fingerprint(tmp_path / "cpuinfo", tmp_path / "cpu", tmp_path / "meminfo")


@pytest.mark.parametrize(
    ("cpuinfo", "label", "features"),
    [
        (ZEN3, "AMD EPYC · Zen 3 · AVX2 · 2 cores", ["AVX2"]),
        (ZEN5, "AMD EPYC · Zen 5 · AVX-512 BF16 · 2 cores",
         ["AVX2", "AVX-512", "AVX-512 BF16", "AVX-512 VNNI"]),
        (SPR, "Intel(R) Xeon(R) Platinum 8480+ · Sapphire Rapids · AMX BF16 · 4 cores",
         ["AVX2", "AVX-512", "AVX-512 BF16", "AVX-512 FP16", "AMX", "AMX BF16", "AMX INT8"]),
        (NEOVERSE_V1, "Neoverse V1 · SVE BF16 · 8 cores",
         ["NEON", "SVE", "BF16", "I8MM"]),
    ],
)  # fmt: skip
def test_labels_and_features(tmp_path, cpuinfo, label, features):
    fp = _machine(tmp_path, cpuinfo)
    assert fp["label"] == label
    assert fp["facts"]["features"] == features
    assert fp["facts"]["caches_bytes"] == {"L1d": 32 << 10, "L2": 1 << 20, "L3": 32 << 20}
    assert fp["facts"]["memory_gib"] == 24  # 24,683,664 kB = 23.5 GiB, rounded


def test_two_machines_of_one_name_are_different_devices(tmp_path):
    zen3, zen5 = _machine(tmp_path / "a", ZEN3), _machine(tmp_path / "b", ZEN5)
    assert zen3["facts"]["name"] == zen5["facts"]["name"] == "AMD EPYC"
    assert zen3["hash"] != zen5["hash"]
    # the same machine a reboot later (MemTotal a few MB off) is the same device
    again = _machine(tmp_path / "c", ZEN3, mem_kb=24683664 - 3000)
    assert again["hash"] == zen3["hash"]


def _doc(fingerprint):
    return analyse_run(Run.from_json({
        "suite": {"hash": "h"}, "knobs": {"dtypes": ["fp32"], "device": "cpu"},
        "environment": {"device_name": "AMD EPYC", "fingerprint": fingerprint},
        "ceilings": {"compute": {"fp32": {"peak": 1e12}}, "bandwidth": {"peak": 1e11}},
        "workloads": [{"id": "gemm.a.fp32", "layer_type": "gemm", "dtype": "fp32",
                       "status": "ok", "flops": 1e6, "bytes": 1e6, "samples_s": [1e-3] * 9,
                       "round_sizes": [3, 3, 3], "params": {}, "reproduce": ""}],
    }))  # fmt: skip


def test_compare_says_different_devices_when_fingerprints_differ(tmp_path):
    zen3, zen5 = _machine(tmp_path / "a", ZEN3), _machine(tmp_path / "b", ZEN5)
    comp = compare(_doc(zen3), _doc(zen5))
    assert any(w.startswith("different devices under one name: AMD EPYC · Zen 3") for w in
               comp.warnings)  # fmt: skip
    assert comp.denominator.startswith("each run's own ceilings")
    same = compare(_doc(zen3), _doc(zen3))
    assert same.denominator.startswith("the baseline's ceilings")
    assert not any("different devices" in w for w in same.warnings)


def test_gpu_label():
    fp = gpu_fingerprint({"name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
                          "memory_bytes": 150 * 2**30, "driver": "570.1"})  # fmt: skip
    assert fp["label"] == "NVIDIA H200 · sm_9.0 · 132 SMs · 150 GiB"
    assert len(fp["hash"]) == 16
