"""A wheel built from the repository checks and renders on its own, away from the source tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "review-bf16-transformer"


def _run(args: list, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv holding only the wheel; its dependencies come from this venv's
    site-packages through a .pth line (a path so added is not scanned for .pth files, so this
    venv's editable hook for the source tree never runs there)."""
    base = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                  "--wheel-dir", base / "dist", ROOT], cwd=base)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (base / "dist").glob("reviewkit-*.whl")
    venv = base / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=base)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index"]
    done = _run([*pip, wheel], cwd=base)
    assert done.returncode == 0, done.stderr[-3000:]
    fresh_site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                      cwd=base).stdout.strip()  # fmt: skip
    (Path(fresh_site) / "_reviewkit_test_deps.pth").write_text(sysconfig.get_paths()["purelib"])
    return venv


def test_the_wheel_ships_the_templates_rubric_and_layer_map(installed):
    names = _run([installed / "bin" / "python", "-c",
                  "import json, reviewkit, reviewkit.rubrics as r, reviewkit.templates as t;"
                  "print(reviewkit.__file__);"
                  "print(json.dumps(sorted(p.name for p in r.FOLDER.iterdir())));"
                  "print(json.dumps(sorted(p.name for p in t.FOLDER.iterdir())))"],
                 cwd=installed)  # fmt: skip
    assert names.returncode == 0, names.stderr
    where, rubric_files, template_files = names.stdout.splitlines()
    assert where.startswith(str(installed)), f"imported {where}, not the wheel"
    assert {"default.toml", "layer_map.toml"} <= set(json.loads(rubric_files))
    assert {"packet.html.j2", "packet.css", "print.css", "screen.css", "packet.js", "site.js",
            "site_index.html.j2", "packet"} <= set(json.loads(template_files))  # fmt: skip


def test_the_installed_wheel_checks_and_renders_a_review_from_another_folder(installed, tmp_path):
    review_dir = tmp_path / "elsewhere" / "review"
    shutil.copytree(SAMPLE, review_dir)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["SOURCE_DATE_EPOCH"] = "1700000000"
    work = tmp_path / "cwd"
    work.mkdir()
    exe = installed / "bin" / "reviewkit"
    check = _run([exe, "check", review_dir / "review.toml", "--json"], cwd=work, env=env)
    # The sample's gate fails (exit 1) on its honest gaps; exit 2 would be a crash or bad input.
    assert check.returncode == 1, check.stderr
    from_tree = _run([sys.executable, "-m", "reviewkit", "check", review_dir / "review.toml",
                      "--json"], cwd=work, env=env)  # fmt: skip
    wheel_report, tree_report = json.loads(check.stdout), json.loads(from_tree.stdout)
    # The one expected difference: where the default rubric was read from.
    assert Path(wheel_report["rubric"].pop("path")).is_relative_to(installed)
    tree_report["rubric"].pop("path")
    assert wheel_report == tree_report
    packet = _run([exe, "packet", review_dir / "review.toml", "--out", work / "packet",
                   "--no-pdf"], cwd=work, env=env)  # fmt: skip
    assert packet.returncode == 0, packet.stderr
    html = (work / "packet" / "packet.html").read_text()
    assert "Transformer inference in bf16" in html
    assert (work / "packet" / "assets" / "packet.css").exists()
    # every section partial shipped: the packet has each section's heading
    for section in ("claim", "production-fit", "artifacts", "disproof"):
        assert f'<section id="{section}">' in html
    assert json.loads((work / "packet" / "packet.json").read_text())["charts"]
