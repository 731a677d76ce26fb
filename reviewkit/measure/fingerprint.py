"""The device fingerprint: what decides kernel paths and ceilings, as a hash and a readable label.

Two machines both named "AMD EPYC" can be a Zen 3 with AVX2 only (bf16 GEMM 4-6x slower than
fp32) and a Zen 5 with AVX-512 BF16 (bf16 about 2x faster): a name is not a device. The
fingerprint reads the vendor, family/model/stepping (a microarchitecture name where known), the
ISA features that pick kernels, the cores, the cache sizes and the memory, and hashes them.
Torch-free: the runner passes a GPU's properties in.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
CPU_SYSFS = Path("/sys/devices/system/cpu")
MEMINFO = Path("/proc/meminfo")

# The ISA features that decide which kernels oneDNN, MKL, OpenBLAS and XNNPACK dispatch to, by
# the name /proc/cpuinfo gives them (x86 `flags`, ARM `Features`), and how the label says them.
X86_FEATURES = {
    "avx2": "AVX2",
    "avx512f": "AVX-512",
    "avx512_bf16": "AVX-512 BF16",
    "avx512_fp16": "AVX-512 FP16",
    "avx512_vnni": "AVX-512 VNNI",
    "amx_tile": "AMX",
    "amx_bf16": "AMX BF16",
    "amx_int8": "AMX INT8",
}
ARM_FEATURES = {"asimd": "NEON", "sve": "SVE", "sve2": "SVE2", "bf16": "BF16", "i8mm": "I8MM"}

# (family, first model, last model) -> microarchitecture, from AMD's and Intel's published
# family/model tables (AMD: "Processor Programming Reference" per family; Intel: SDM vol. 4,
# table 2-1). Only what this project's users run; anything else is labelled by its numbers.
AMD_MODELS = [
    (0x17, 0x00, 0x2F, "Zen / Zen+"),
    (0x17, 0x30, 0xFF, "Zen 2"),
    (0x19, 0x00, 0x0F, "Zen 3"),
    (0x19, 0x10, 0x1F, "Zen 4"),
    (0x19, 0x20, 0x5F, "Zen 3"),
    (0x19, 0x60, 0x7F, "Zen 4"),
    (0x19, 0xA0, 0xAF, "Zen 4c"),
    (0x1A, 0x00, 0xFF, "Zen 5"),
]
INTEL_MODELS = {
    (6, 0x55): "Skylake-SP / Cascade Lake",
    (6, 0x6A): "Ice Lake-SP",
    (6, 0x8F): "Sapphire Rapids",
    (6, 0xCF): "Emerald Rapids",
    (6, 0xAD): "Granite Rapids",
}
ARM_PARTS = {  # (implementer, part) from the Arm core technical reference manuals
    (0x41, 0xD0C): "Neoverse N1",
    (0x41, 0xD40): "Neoverse V1",
    (0x41, 0xD49): "Neoverse N2",
    (0x41, 0xD4F): "Neoverse V2",
}


def _cpuinfo(path: Path) -> dict[str, str]:
    """The first processor's fields (they repeat per core), and the count of processors."""
    fields: dict[str, str] = {}
    count = 0
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep:
            continue
        if key == "processor":
            count += 1
        fields.setdefault(key, value.strip())
    fields["_processors"] = str(count)
    return fields


def _int(text: str | None) -> int | None:
    try:
        return int(text, 0) if text else None
    except ValueError:
        return None


def microarchitecture(vendor: str, family: int | None, model: int | None) -> str | None:
    """A readable name for a known (vendor, family, model), else None."""
    if family is None or model is None:
        return None
    if vendor == "AuthenticAMD":
        return next((n for f, lo, hi, n in AMD_MODELS if f == family and lo <= model <= hi), None)
    if vendor == "GenuineIntel":
        return INTEL_MODELS.get((family, model))
    return ARM_PARTS.get((family, model))


def cache_sizes(root: Path = CPU_SYSFS) -> dict[str, int]:
    """Bytes per cache level of cpu0 as the OS reports them: {"L1d", "L1i", "L2", "L3"}."""
    out: dict[str, int] = {}
    for index in sorted((root / "cpu0" / "cache").glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        number = _int(size.rstrip("KMG"))
        if number is None:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        out[f"L{level}{suffix}"] = number * units.get(size[-1:], 1)
    return out


def memory_bytes(path: Path = MEMINFO) -> int | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gib(nbytes: int | None) -> int | None:
    return None if nbytes is None else round(nbytes / 2**30)


def cpu_fingerprint(
    cpuinfo: Path = CPUINFO, sysfs: Path = CPU_SYSFS, meminfo: Path = MEMINFO
) -> dict:
    """The CPU's identifying facts, its hash and its label."""
    info = _cpuinfo(cpuinfo)
    if "CPU implementer" in info:  # ARM
        vendor = "ARM"
        family, model = _int(info.get("CPU implementer")), _int(info.get("CPU part"))
        stepping = _int(info.get("CPU revision"))
        flags = set(info.get("Features", "").split())
        features = [label for flag, label in ARM_FEATURES.items() if flag in flags]
        name = microarchitecture("ARM", family, model) or "unknown ARM core"
    else:
        vendor = info.get("vendor_id", "unknown")
        family, model = _int(info.get("cpu family")), _int(info.get("model"))
        stepping = _int(info.get("stepping"))
        flags = set(info.get("flags", "").split())
        features = [label for flag, label in X86_FEATURES.items() if flag in flags]
        name = info.get("model name", "unknown CPU")
    cores = _int(info.get("_processors")) or os.cpu_count()
    facts = {
        "kind": "cpu",
        "vendor": vendor,
        "name": name,
        "family": family,
        "model": model,
        "stepping": stepping,
        "microarchitecture": microarchitecture(vendor, family, model),
        "features": features,
        "cores": cores,
        "caches_bytes": cache_sizes(sysfs),
        # whole GiB: MemTotal moves by a few MB between boots of one machine (kernel reserves)
        "memory_gib": _gib(memory_bytes(meminfo)),
    }
    return _finish(facts, _cpu_label(facts))


def _cpu_label(f: dict) -> str:
    arch = f["microarchitecture"] or (
        f"family {f['family']} model {f['model']}" if f["family"] is not None else None
    )
    isa = _headline_isa(f["features"])
    parts = [f["name"], arch if arch != f["name"] else None, isa,
             f"{f['cores']} cores" if f["cores"] else None]  # fmt: skip
    return " · ".join(p for p in parts if p)


def _headline_isa(features: list[str]) -> str:
    """The widest vector path and whether bf16 has hardware behind it, in a few words."""
    if "AMX BF16" in features:
        return "AMX BF16"
    if "AVX-512 BF16" in features:
        return "AVX-512 BF16"
    if "AVX-512" in features:
        return "AVX-512 (no BF16)"
    if "AVX2" in features:
        return "AVX2"
    if "SVE" in features:
        return "SVE" + (" BF16" if "BF16" in features else "")
    return "NEON" if "NEON" in features else "no wide vectors"


def gpu_fingerprint(props: dict) -> dict:
    """A GPU's identifying facts (name, compute capability, SMs, memory, clocks, driver) as the
    runner reads them from torch and NVML, its hash and its label."""
    keys = ("name", "compute_capability", "sm_count", "memory_bytes", "max_clock_mhz", "driver")
    facts = {"kind": "gpu", **{k: props.get(k) for k in keys}}
    memory = facts["memory_bytes"]
    label = " · ".join(
        str(p)
        for p in (
            facts["name"],
            f"sm_{facts['compute_capability']}" if facts["compute_capability"] else None,
            f"{facts['sm_count']} SMs" if facts["sm_count"] else None,
            f"{memory / 2**30:.0f} GiB" if memory else None,
        )
        if p
    )
    return _finish(facts, label)


def _finish(facts: dict, label: str) -> dict:
    canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    return {
        "hash": hashlib.sha256(canonical.encode()).hexdigest()[:16],
        "label": label,
        "facts": facts,
    }
