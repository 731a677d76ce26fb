"""A fake powercap tree for the RAPL tests: zones with name, energy_uj and max_energy_range_uj."""

from __future__ import annotations

from pathlib import Path

# A typical package counter range (about 262 kJ), as Intel RAPL zones report it.
DEFAULT_MAX_UJ = 262_143_328_850


def rapl_zone(root: Path, name: str, folder: str, energy_uj: int, max_uj: int = DEFAULT_MAX_UJ):
    zone = root / folder
    zone.mkdir(parents=True)
    (zone / "name").write_text(name + "\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return zone
