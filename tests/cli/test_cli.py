"""The command line as a user meets it: a smoke run end to end, `show`, and bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest


def reviewkit(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "reviewkit", *args], capture_output=True, text=True, timeout=timeout
    )


def test_smoke_run_end_to_end(tmp_path):
    out = tmp_path / "run"
    r = reviewkit("run", "--profile", "smoke", "--dtype", "fp32", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)  # stdout carries exactly one JSON document
    assert summary["run"] == str(out / "run.json")
    assert summary["complete"] and summary["profile"] == "smoke"
    assert set(summary["layer_types"]) >= {"gemm", "attention", "norm", "model"}
    assert all(w["status"] == "ok" for w in summary["workloads"])
    assert (out / "run.json").exists()

    # The tables again from the bundle, and the reproduce command of one workload.
    shown = reviewkit("show", str(out))
    assert shown.returncode == 0, shown.stderr
    assert "By layer type — fp32" in shown.stdout and "memory-stall" in shown.stdout
    # which profile the run divided by, and the settings its ceilings belong to
    threads = json.loads((out / "run.json").read_text())["knobs"]["threads"]
    at = f"at {threads} thread{'s' if threads != 1 else ''}, float32 matmul precision highest)"
    assert at in " ".join(shown.stdout.split())
    first = summary["workloads"][0]
    cmd = first["reproduce"].split()
    assert cmd[0] == "reviewkit"
    again = reviewkit(*[a.strip("'") for a in cmd[1:]], "--out", str(tmp_path / "again"), "--json")
    assert again.returncode == 0, again.stderr
    assert [w["id"] for w in json.loads(again.stdout)["workloads"]] == [first["id"]]


def test_ctrl_c_writes_an_incomplete_bundle(tmp_path):
    import signal
    import time

    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "reviewkit", "run", "--profile", "quick", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(8)  # past the imports, inside calibration or the first workloads (~75 s in all)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["complete"] is False and "Ctrl-C" in doc["interrupted"]
    not_run = [w for w in doc["workloads"] if w["status"] == "not-run"]
    assert not_run and all("interrupted" in w["reason"] for w in not_run)
    assert "INCOMPLETE" in stdout


def test_show_does_not_import_torch(tmp_path, smoke_run):
    _, bundle = smoke_run
    code = (
        "import sys; from reviewkit.cli.app import main\n"
        "try:\n    main(['show', sys.argv[1], '--json'])\nexcept SystemExit as e:\n"
        "    assert e.code in (0, None), e.code\n"
        "assert 'torch' not in sys.modules, 'show imported torch'\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(bundle)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["layer_types"]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "--profile", "medium"], "choose one of smoke, quick, full"),
        (["run", "--dtype", "fp8"], "choose from fp32, bf16, fp16"),
        (["run", "--profile", "smoke", "--only", "nothing.*"], "matches no workload"),
        (["run", "--profile", "smoke", "--device", "tpu"], "choose one of cpu, cuda, mps, xpu"),
        (["suite", "--profile", "huge"], "choose one of smoke, quick, full"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    r = reviewkit(*args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0  # one actionable line


def test_threads_knob_is_applied_and_recorded(tmp_path):
    out = tmp_path / "run"
    r = reviewkit(
        "run",
        "--profile",
        "smoke",
        "--dtype",
        "fp32",
        "--only",
        "norm.*",
        "--threads",
        "1",
        "--out",
        str(out),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["knobs"]["threads"] == 1
    doc = json.loads((out / "run.json").read_text())
    assert "--threads 1" in doc["command"]
    assert all("--threads 1" in w["reproduce"] for w in doc["workloads"])


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--threads", "0"], "--threads 0: expected a positive integer"),
        (["--out", "{file}"], "exists and is not a folder"),
    ],
)
def test_bad_run_options(tmp_path, args, needle):
    a_file = tmp_path / "taken"
    a_file.write_text("not a folder")
    args = [a.format(file=a_file) for a in args]
    r = reviewkit("run", "--profile", "smoke", "--only", "norm.*", *args)
    assert r.returncode == 2 and needle in r.stderr
    assert a_file.read_text() == "not a folder"


def test_absent_device_is_a_clear_error(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    r = reviewkit("run", "--profile", "smoke", "--device", "cuda", "--out", str(tmp_path / "x"))
    assert r.returncode == 2
    assert "no cuda device is available" in r.stderr and "--device cpu" in r.stderr
    assert not (tmp_path / "x").exists()  # nothing half-written


@pytest.mark.parametrize(
    "content,needle",
    [
        (None, "no run bundle here"),
        ('{"kind": "reviewkit.run", "schema_version": 99}', "schema_version 99"),
    ],
)
def test_show_refuses_bad_bundles(tmp_path, content, needle):
    if content is not None:
        (tmp_path / "run.json").write_text(content)
    r = reviewkit("show", str(tmp_path))
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_debug_shows_the_traceback(tmp_path):
    r = reviewkit("--debug", "show", str(tmp_path))
    assert r.returncode != 0 and "BundleError" in r.stderr


def test_suite_lists_ids_without_torch():
    code = (
        "import sys; from reviewkit.cli.app import main\n"
        "try:\n    main(['suite', '--profile', 'smoke', '--dtype', 'fp32', '--json'])\n"
        "except SystemExit as e:\n    assert e.code in (0, None)\n"
        "assert 'torch' not in sys.modules\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    # 8 gemm + 9 attention + 1 conv + 10 norm, vector, block and data-movement + 3 model cells
    assert len(doc["workloads"]) == 31 and doc["suite"]["hash"]


def test_help_lists_commands():
    r = reviewkit("--help")
    assert r.returncode == 0
    for cmd in ("run", "show", "suite", "mfu"):
        assert cmd in r.stdout


def test_text_from_a_bundle_is_printed_as_it_is_never_as_markup(tmp_path):
    """A workload id or a knob holding rich markup is shown literally; "[/]" used to raise
    rich's MarkupError out of `show` (found by the run.json fuzz, issue 18)."""
    import dataclasses
    import io

    from rich.console import Console
    from runfactory import make_run

    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.run import load_run, write_run
    from reviewkit.cli.console import print_run

    run = load_run(make_run(tmp_path / "run", status_for={"gemm.toy-ffn-up.b1s128": "error"}))
    first = dataclasses.replace(run.workloads[0], id="[/][red]gemm[/red]",
                                reason="[bold]boom[/] [/]")  # fmt: skip
    write_run(tmp_path / "run", run.with_values(workloads=(first, *run.workloads[1:]),
                                                suite_profile="[/]quick"))  # fmt: skip
    out = io.StringIO()
    print_run(analyse_run(load_run(tmp_path / "run")), Console(file=out, width=200), "x")
    text = out.getvalue()
    for literal in ("[/][red]gemm[/red]", "[bold]boom[/] [/]", "profile [/]quick"):
        assert literal in text, literal


def test_a_ceiling_raised_to_the_next_level_out_says_so():
    """The H200's L2 copy read 1.1-2.0 TB/s, under HBM's 4.18, and was raised to it: the table
    showed "4.18e+03 measured" beside those trials."""
    from rich.console import Console

    from reviewkit.cli.console import ceilings_table

    ceilings = {
        "memory": [
            {"level": "l2", "capacity_bytes": 60 << 20, "peak": 4.18e12, "measured": 1.99e12,
             "low": 1.13e12, "high": 1.99e12, "trials": [1.99e12] * 9},
            {"level": "hbm", "capacity_bytes": None, "peak": 4.18e12, "measured": 4.18e12},
        ],
        "bandwidth": {"peak": 4.8e12, "source": "datasheet", "datasheet": 4.8e12},
    }  # fmt: skip
    console = Console(record=True, width=160)
    console.print(ceilings_table(ceilings))
    text = console.export_text()
    l2_row = next(line for line in text.splitlines() if "memory l2" in line)
    assert "raised to hbm's" in l2_row and "4.18e+03" in l2_row
    ceilings["memory"][0].update(peak=1.99e12)  # measured as used: says measured
    console = Console(record=True, width=160)
    console.print(ceilings_table(ceilings))
    l2_row = next(line for line in console.export_text().splitlines() if "memory l2" in line)
    assert "measured" in l2_row and "raised" not in l2_row


def test_calibrate_at_a_thread_count_and_matmul_precision_keys_the_cached_profile(tmp_path):
    import os

    env = {**os.environ, "REVIEWKIT_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run(
        [sys.executable, "-m", "reviewkit", "calibrate", "--profile", "smoke", "--dtype", "fp32",
         "--threads", "1", "--float32-matmul-precision", "high", "--json"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["settings"] == {"threads": 1, "float32_matmul_precision": "high"}
    assert doc["threads"] == 1  # calibrated at the thread count asked for, not every core
    (cached,) = (tmp_path / "cache" / "profiles").iterdir()
    assert cached.name.endswith("-smoke-t1-high.json")
    bad = subprocess.run(
        [sys.executable, "-m", "reviewkit", "calibrate", "--float32-matmul-precision", "tf32"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert bad.returncode != 0
    assert "--float32-matmul-precision 'tf32': expected one of highest, high, medium" in bad.stderr


def test_dram_on_the_cores_added_shows_the_trials_its_ceiling_came_from():
    """The all-threads trials (36-38 GB/s, one CCD) sat wholly under the 64.6 GB/s used."""
    from rich.console import Console

    from reviewkit.cli.console import ceilings_table

    # as calibration records it on the cores added: low, high and trials the one-thread copy's
    # (x threads), the all-threads trials beside them
    dram = {"level": "dram", "capacity_bytes": None, "peak": 64.6e9, "measured": 37e9,
            "low": 63.8e9, "high": 65.6e9, "trials": [63.8e9, 64.6e9, 65.6e9],
            "basis": "cores added", "cores_added": 64.6e9,
            "cores_added_trials": [63.8e9, 64.6e9, 65.6e9],
            "all_threads_trials": [36e9, 37e9, 38e9]}  # fmt: skip
    ceilings = {"memory": [dram], "bandwidth": {"peak": 64.6e9, "source": "measured"}}
    console = Console(record=True, width=160)
    console.print(ceilings_table(ceilings))
    row = next(line for line in console.export_text().splitlines() if "memory dram" in line)
    # 63.8e9 / 1e9 and 65.6e9 / 1e9 at 3 significant figures; three trials.
    assert "measured, cores added" in row and "63.8-65.6 (3 trials)" in row
    assert "36-38" not in row
    # the all-threads median used: its own trials are the record's
    dram.update(basis="all threads", low=36e9, high=38e9, trials=[36e9, 37e9, 38e9])
    console = Console(record=True, width=160)
    console.print(ceilings_table(ceilings))
    row = next(line for line in console.export_text().splitlines() if "memory dram" in line)
    assert "measured, all threads" in row and "36-38 (3 trials)" in row


@pytest.mark.parametrize("args", [
    ["project", "--from", "samples/cpu-quick-epyc-2core", "--profile", "full", "--only",
     "gemm.*", "--dtype", "fp32", "--platform", "h100-sxm", "--json"],
    ["shortlist", "--model", "Llama-3-8B", "--batch", "8", "--context", "4096", "--sla-p99-s",
     "6", "--runs", "samples/cpu-quick-epyc-2core", "--out", "{out}", "--json"],
])  # fmt: skip
def test_project_and_shortlist_run_without_torch(tmp_path, args):
    root = Path(__file__).resolve().parents[2]
    argv = [a.replace("{out}", str(tmp_path / "sl")) for a in args]
    code = (
        "import sys, json; from reviewkit.cli.app import main\n"
        f"try:\n    main({argv!r})\n"
        "except SystemExit as e:\n    assert e.code in (0, None), e.code\n"
        "assert 'torch' not in sys.modules, 'imported torch'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kind"] in ("reviewkit.projection", "reviewkit.shortlist")
