"""`calibrate --run-to-run`: the options checked, the measurement run, its figure printed."""

from __future__ import annotations

from pathlib import Path

from reviewkit.cli.shared import emit_json, progress_bar
from reviewkit.common.errors import UsageError

MAX_RUNS = 100


def calibrate_run_to_run(
    device: str,
    run_to_run: bool,
    runs: int | None,
    recorded: list[Path],
    fresh: bool,
    out: Path | None,
    as_json: bool,
    every_s: float | None = None,
) -> None:
    from rich.markup import escape

    from reviewkit.cli.console import stdout_console
    from reviewkit.measure import run_to_run as measuring
    from reviewkit.measure.device import (
        device_fingerprint,
        device_name,
        resolve_device,
        torch_build,
    )

    if not run_to_run:
        raise UsageError("--runs, --every-s, --from and --fresh go with --run-to-run; add it")
    if out is not None:
        raise UsageError("--out writes a device profile; the run-to-run figure is kept in the "
                         "cache beside it (its path is printed): drop --out")  # fmt: skip
    count = runs if runs is not None else (0 if recorded else measuring.DEFAULT_RUNS)
    if not 0 <= count <= MAX_RUNS:
        raise UsageError(f"--runs {count}: expected a whole number from 0 to {MAX_RUNS}")
    if count < 2 and not recorded:
        raise UsageError(f"--runs {count}: one run shows no run-to-run variation; measure 2 or "
                         "more (8 by default)")  # fmt: skip
    spacing = measuring.DEFAULT_EVERY_S if every_s is None else every_s
    if not 0 <= spacing <= 3600:
        raise UsageError(f"--every-s {spacing:g}: expected seconds from 0 to 3600")
    missing = [p for p in recorded if not p.exists()]
    if missing:
        raise UsageError(f"--from {missing[0]}: no such run bundle folder or run.json")
    dev = resolve_device(device)
    fp = device_fingerprint(dev) or {"hash": dev.type, "label": dev.type}
    with progress_bar("run-to-run") as on_progress:
        pooled = measuring.calibrate_run_to_run(
            device, dev.type, fp, device_name(dev), torch_build()["torch_version"], count,
            recorded, fresh, on_progress, spacing,
        )  # fmt: skip
    if as_json:
        emit_json(pooled.to_json())
        return
    console = stdout_console()
    for line in measuring.summary_lines(pooled):
        console.print(escape(line), highlight=False, soft_wrap=True)
