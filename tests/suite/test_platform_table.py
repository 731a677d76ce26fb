"""The platform table (rubrics/platforms.toml): dense apart from sparse, every figure sourced,
the required platforms present, known figures against their datasheets, bad tables refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reviewkit.common.errors import InputError, UsageError
from reviewkit.suite import ceilings
from reviewkit.suite import platform_table as pt

ROOT = Path(__file__).resolve().parents[2]
TABLE = pt.default_table()
SAMPLE = ROOT / "samples" / "cpu-quick-epyc-2core" / "run.json"
SAMPLE_SOURCE = "samples/cpu-quick-epyc-2core (measured by reviewkit calibrate, 2026-12-04)"

# Issue 34's list, each by the key it has in the table.
REQUIRED = {
    "A100": ["a100-sxm4-80gb", "a100-pcie-80gb", "a100-40gb"],
    "H100 SXM": ["h100-sxm"],
    "H100 PCIe": ["h100-pcie"],
    "H200": ["h200-sxm"],
    "B200": ["b200"],
    "MI300X": ["mi300x"],
    "MI325X": ["mi325x"],
    "MI355X": ["mi355x"],
    "Gaudi 3": ["gaudi3"],
    "L4": ["l4"],
    "TPU v5e": ["tpu-v5e"],
    "TPU v6e": ["tpu-v6e"],
}


def _all_figures():
    return [(p.key, path, f) for p in TABLE.platforms for path, f in p.all_figures().items()]


def test_every_required_platform_is_in_the_table():
    missing = {
        name: keys for name, keys in REQUIRED.items() if not set(keys) <= set(TABLE.platform_keys())
    }
    assert missing == {}
    # and a CPU class, whose figures are measured, never a datasheet's
    cpus = [p for p in TABLE.platforms if p.device == pt.CPU]
    assert cpus and all(p.kinds() == {pt.MEASURED} for p in cpus)


def _dense_over_half_sparse(table: pt.PlatformTable) -> tuple[int, list]:
    """How many dense/sparse pairs the table gives, and those whose dense figure is above half
    the sparse one."""
    pairs = [
        (p.key, d, dense.value, p.peak_sparse_flops_per_s[d].value)
        for p in table.platforms
        for d, dense in p.peak_dense_flops_per_s.items()
        if d in p.peak_sparse_flops_per_s
    ]
    return len(pairs), [pair for pair in pairs if pair[2] > pair[3] / 2 * (1 + 1e-12)]


def test_every_dense_figure_is_at_most_half_its_sparse_figure():
    pairs, over = _dense_over_half_sparse(TABLE)
    assert pairs >= 40  # the rule is exercised: NVIDIA, AMD and B200 give both
    assert over == [], "a dense figure above half its sparse one is a sparse figure mislabelled"


def test_the_rule_catches_a_sparse_figure_filed_as_dense(tmp_path):
    # The H200 datasheet's "1,979 TFLOPS" BF16 is with sparsity: filed as dense, the check fails.
    text = (ROOT / "rubrics" / "platforms.toml").read_text()
    dense = 'bf16 = { value = 989.5e12, source = "nv-h200-ds"'
    assert dense in text
    path = tmp_path / "platforms.toml"
    path.write_text(text.replace(dense, 'bf16 = { value = 1979e12, source = "nv-h200-ds"'))
    _, over = _dense_over_half_sparse(pt.read_table(path))
    assert over == [("h200-sxm", "bf16", 1979e12, 1979e12)]


def test_every_figure_has_its_source_date_and_kind():
    figures = _all_figures()
    assert len(figures) > 150
    for key, path, f in figures:
        assert f.document.strip() and f.at.strip(), (key, path)
        assert re.match(r"^\d{4}(-\d{2}){0,2}$", f.date), (key, path, f.date)
        assert f.kind in pt.KINDS, (key, path)
        assert f.unit, (key, path)


def test_every_field_is_given_or_its_absence_explained():
    """A figure left out is named in the platform's `missing` with why, never silently."""
    unexplained = []
    for p in TABLE.platforms:
        for name in pt.FIGURE_UNITS:
            if p.figure(name) is None and name not in p.missing:
                unexplained.append((p.key, name))
        for dtype in pt.DTYPES:
            path = f"{pt.DENSE}.{dtype}"
            if dtype not in p.peak_dense_flops_per_s and path not in p.missing:
                unexplained.append((p.key, path))
    assert unexplained == []


def test_links_say_their_direction():
    links = [(p.key, p.figure(k)) for p in TABLE.platforms for k in pt.LINKS if p.figure(k)]
    assert len(links) >= 15
    assert all(f.direction in pt.DIRECTIONS and f.name for _, f in links)


def test_units_are_sane():
    accelerators = [p for p in TABLE.platforms if p.device != pt.CPU]
    for p in accelerators:
        bf16 = p.peak_dense_flops_per_s.get("bf16")
        if bf16:  # FLOP/s, not TFLOP/s or GFLOP/s
            assert 1e13 <= bf16.value <= 1e16, (p.key, bf16.value)
    for p in TABLE.platforms:
        for f in p.peak_dense_flops_per_s.values():
            assert 1e10 <= f.value <= 1e17, p.key
        bandwidth = p.figure("memory_bytes_per_s")
        assert bandwidth and 1e10 <= bandwidth.value <= 1e13, p.key  # B/s
        capacity = p.figure("memory_capacity_bytes")
        assert capacity and 1e9 <= capacity.value <= 1e12, p.key  # bytes, not GB
        cache = p.figure("l2_or_onchip_bytes")
        assert cache is None or 1e6 <= cache.value <= 1e9, p.key
        tdp = p.figure("tdp_w")
        assert tdp is None or 10 <= tdp.value <= 5000, p.key
        domain = p.figure("scale_up_domain")
        assert domain is None or float(domain.value).is_integer(), p.key


@pytest.mark.parametrize(
    "key,path,value",
    [
        # NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), Table 3, H100 SXM5: peak
        # BF16 Tensor 989.4 TFLOPS dense (1,978.9 with sparsity).
        ("h100-sxm", "peak_dense_flops_per_s.bf16", 989.4e12),
        ("h100-sxm", "peak_sparse_flops_per_s.bf16", 1978.9e12),
        # NVIDIA H100 datasheet (2023), H100 SXM: GPU memory bandwidth 3.35 TB/s; up to 700 W.
        ("h100-sxm", "memory_bytes_per_s", 3.35e12),
        ("h100-sxm", "tdp_w", 700),
        # NVIDIA H200 datasheet (2024), H200 SXM: 141 GB at 4.8 TB/s, BF16 1,979 with sparsity.
        ("h200-sxm", "memory_bytes_per_s", 4.8e12),
        ("h200-sxm", "memory_capacity_bytes", 141e9),
        ("h200-sxm", "peak_sparse_flops_per_s.bf16", 1979e12),
        # NVIDIA A100 datasheet (2021), 80GB SXM: FP32 19.5 TFLOPS, BF16 312 | 624*, 2,039 GB/s.
        ("a100-sxm4-80gb", "peak_dense_flops_per_s.fp32", 19.5e12),
        ("a100-sxm4-80gb", "peak_dense_flops_per_s.bf16", 312e12),
        ("a100-sxm4-80gb", "memory_bytes_per_s", 2.039e12),
        # AMD Instinct MI300X datasheet (2023): FP16 1307.4 TFLOPs, 2614.9 with sparsity; 5.3 TB/s.
        ("mi300x", "peak_dense_flops_per_s.fp16", 1307.4e12),
        ("mi300x", "peak_sparse_flops_per_s.fp16", 2614.9e12),
        ("mi300x", "memory_bytes_per_s", 5.3e12),
        # Cloud TPU docs, TPU v6e: 918 TFLOPs bf16, 1836 TOPs int8 per chip, 32 GB at 1638 GBps.
        ("tpu-v6e", "peak_dense_flops_per_s.bf16", 918e12),
        ("tpu-v6e", "peak_dense_flops_per_s.int8", 1836e12),
        ("tpu-v6e", "memory_bytes_per_s", 1638e9),
        # Intel, Gaudi 3 (Hot Chips 2024): BF16 matrix 1835 TFLOPs, 128 GB HBM2e at 3.67 TB/s.
        ("gaudi3", "peak_dense_flops_per_s.bf16", 1835e12),
        ("gaudi3", "memory_bytes_per_s", 3.67e12),
    ],
)
def test_known_figures_match_their_datasheets(key, path, value):
    assert TABLE.platform(key).all_figures()[path].value == pytest.approx(value, rel=1e-6)


def test_the_cpu_entry_is_the_sample_bundles_measured_profile():
    """The CPU platform's figures are the committed sample's calibration, kind measured: the
    overlay of the sample's ceilings onto the entry changes no value."""
    ceilings_doc = json.loads(SAMPLE.read_text())["ceilings"]
    cpu = TABLE.platform("cpu-epyc-zen4-2core-vm")
    assert cpu.pattern is None and cpu.fingerprint == "1dc2a1d7c190d4ef"
    assert {f.document for f in cpu.all_figures().values()} == {SAMPLE_SOURCE}
    again = pt.overlay_measured(cpu, ceilings_doc, SAMPLE_SOURCE, "2026-12-04")
    for path, f in cpu.all_figures().items():
        assert again.all_figures()[path].value == pytest.approx(f.value, rel=1e-12), path


def test_a_measured_profile_overrides_the_datasheet_for_its_device():
    h100 = TABLE.platform("h100-sxm")
    # a GPU profile: `peak` is the datasheet's, `measured` what the calibration measured
    profile = {
        "compute": {
            "bf16": {"peak": 989.4e12, "source": "datasheet", "measured": 702e12},
            "fp32": {"peak": 67e12, "source": "datasheet", "measured": None},
        },
        "bandwidth": {"peak": 3.35e12, "source": "datasheet", "measured": 2.9e12},
    }
    out = pt.overlay_measured(h100, profile, "device profile 1234abcd", "2026-12-05")
    bf16 = out.peak_dense_flops_per_s["bf16"]
    assert (bf16.value, bf16.kind, bf16.date) == (702e12, pt.MEASURED, "2026-12-05")
    assert bf16.document == "device profile 1234abcd"
    bandwidth = out.figure("memory_bytes_per_s")
    assert (bandwidth.value, bandwidth.kind) == (2.9e12, pt.MEASURED)
    # what the profile did not measure keeps its datasheet figure; sparse is never touched
    assert out.peak_dense_flops_per_s["fp32"] == h100.peak_dense_flops_per_s["fp32"]
    assert out.peak_dense_flops_per_s["fp8"].kind == pt.DATASHEET
    assert out.peak_sparse_flops_per_s == h100.peak_sparse_flops_per_s
    # the table itself is unchanged
    assert TABLE.platform("h100-sxm").peak_dense_flops_per_s["bf16"].value == 989.4e12


def test_an_overlaid_figure_is_no_longer_listed_as_missing():
    cpu = TABLE.platform("cpu-epyc-zen4-2core-vm")
    assert "peak_dense_flops_per_s.int8" in cpu.missing
    out = pt.overlay_measured(
        cpu,
        {"compute": {"int8": {"peak": 9e11, "source": "measured", "measured": 9e11}}},
        "profile",
        "2026-12-05",
    )
    assert out.peak_dense_flops_per_s["int8"].kind == pt.MEASURED
    assert "peak_dense_flops_per_s.int8" not in out.missing


def test_an_unknown_platform_names_the_valid_ones():
    with pytest.raises(UsageError) as err:
        pt.platform("h300-sxm")
    message = str(err.value)
    assert "unknown platform 'h300-sxm'" in message and "did you mean 'h200-sxm'" in message
    assert all(key in message for key in TABLE.platform_keys())
    # by key or by name, in any case
    assert pt.platform("H100-SXM") is pt.platform("nvidia h100 sxm") is TABLE.platform("h100-sxm")


@pytest.mark.parametrize(
    "torch_name,key",
    [
        ("NVIDIA H200", "h200-sxm"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA L4", "l4"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI325X", "mi325x"),
        ("AMD Instinct MI355X", "mi355x"),
        ("NVIDIA L40S", None),
        ("AMD EPYC", None),  # a CPU family name: its figures come from its measured profile
    ],
)
def test_lookup_by_torch_device_name(torch_name, key):
    found = pt.for_device(torch_name)
    assert (found.key if found else None) == key


def test_mfu_uses_dense_datasheet_figures_never_sparse():
    for entry in ceilings.datasheet():
        p = next(p for p in TABLE.platforms if p.name == entry.name)
        for dtype, value in entry.peak_flops_per_s.items():
            assert value == p.peak_dense_flops_per_s[dtype].value
            sparse = p.peak_sparse_flops_per_s.get(dtype)
            assert sparse is None or value < sparse.value
        assert "platforms.toml" in entry.reference and p.key in entry.reference
    assert all(e.name != "AMD EPYC" for e in ceilings.datasheet())


# --- malformed tables ---------------------------------------------------------------------

GOOD = """version = 1
[sources]
ds = { title = "Some GPU datasheet", date = "2024" }
[platforms.gpu-x]
name = "Some GPU"
pattern = "GPU-X"
vendor = "Acme"
device = "gpu"
memory_bytes_per_s = { value = 1e12, source = "ds", at = "Memory", kind = "datasheet" }
[platforms.gpu-x.peak_dense_flops_per_s]
bf16 = { value = 1e14, source = "ds", at = "BF16 dense", kind = "datasheet" }
"""


def _table(tmp_path, text: str) -> pt.PlatformTable:
    path = tmp_path / "platforms.toml"
    path.write_text(text)
    return pt.read_table(path)


def test_a_good_table_reads(tmp_path):
    table = _table(tmp_path, GOOD)
    assert table.platform("gpu-x").peak_dense_flops_per_s["bf16"].value == 1e14
    assert table.for_device("Acme GPU-X").key == "gpu-x"


@pytest.mark.parametrize(
    "old,new,key,expected",
    [
        ("value = 1e14, ", "", "platforms.gpu-x.peak_dense_flops_per_s.bf16.value", "is missing"),
        ('name = "Some GPU"\n', "", "platforms.gpu-x.name", "is missing"),
        (
            "value = 1e12",
            'value = "1 TB/s"',
            "platforms.gpu-x.memory_bytes_per_s.value",
            "must be a positive number (B/s), got '1 TB/s'",
        ),
        (
            "value = 1e14",
            "value = -1e14",
            "platforms.gpu-x.peak_dense_flops_per_s.bf16.value",
            "must be a positive number (FLOP/s)",
        ),
        (
            'kind = "datasheet" }\n[platforms',
            'kind = "guess" }\n[platforms',
            "platforms.gpu-x.memory_bytes_per_s.kind",
            "must be one of datasheet, measured",
        ),
        (
            'source = "ds", at = "Memory"',
            'source = "dss", at = "Memory"',
            "platforms.gpu-x.memory_bytes_per_s.source",
            "must name a document of [sources]",
        ),
        ('device = "gpu"', 'device = "fpga"', "platforms.gpu-x.device", "must be one of"),
        ("bf16 =", "bfloat16 =", "platforms.gpu-x.peak_dense_flops_per_s.bfloat16", "unknown key"),
    ],
)
def test_a_malformed_table_says_the_file_key_and_what_was_expected(
    tmp_path, old, new, key, expected
):
    assert old in GOOD
    with pytest.raises(InputError) as err:
        _table(tmp_path, GOOD.replace(old, new, 1))
    message = str(err.value)
    assert str(tmp_path / "platforms.toml") in message
    assert f"`{key}`" in message and expected in message
    assert "fix the table" in message or "expected one of" in message


def test_another_version_is_refused_with_what_to_do(tmp_path):
    with pytest.raises(InputError, match=r"`version` is 2; .* set `version = 1`"):
        _table(tmp_path, GOOD.replace("version = 1", "version = 2"))


def test_a_link_must_say_its_direction(tmp_path):
    link = (
        'host_link = { name = "PCIe Gen5 x16", value = 128e9, source = "ds", at = "Host", '
        'kind = "datasheet" }\n'
    )
    text = GOOD.replace('device = "gpu"\n', 'device = "gpu"\n' + link)
    with pytest.raises(InputError, match=r"`platforms.gpu-x.host_link.direction` must be one of"):
        _table(tmp_path, text)
    fixed = _table(
        tmp_path,
        text.replace(
            'kind = "datasheet" }\n', 'kind = "datasheet", direction = "bidirectional" }\n', 1
        ),
    )
    assert fixed.platform("gpu-x").figure("host_link").direction == pt.BIDIRECTIONAL


def test_a_figure_listed_as_missing_and_given_is_refused(tmp_path):
    text = GOOD + '[platforms.gpu-x.missing]\nmemory_bytes_per_s = "not published"\n'
    with pytest.raises(InputError, match="names a figure the platform gives"):
        _table(tmp_path, text)


def test_malformed_toml_names_the_line(tmp_path):
    with pytest.raises(InputError, match=r"malformed TOML.*line"):
        _table(tmp_path, GOOD + "bf16 = {value = \n")
