"""The knob diff as a reviewer reads it (a device change is one knob with the settings it
implies) and the environment differences that confound a comparison, on hand-made runs."""

from __future__ import annotations

import inspect

import pytest

from reviewkit.analysis.compare import compare
from reviewkit.analysis.knobs import (
    CONFOUNDER_ROW,
    DERIVED_ROW,
    DEVICE_ROW,
    FOLLOWS_DEVICE,
    IGNORED_ROW,
    IMPLIED_ROW,
    KERNELS,
    KNOWN_KNOBS,
    PROVENANCE,
    RUNTIME,
    EnvironmentChange,
    KnobChange,
    KnobPolicy,
    diff_rows,
    environment_changes,
    read_knobs,
    release,
    shown_value,
)
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.records import Run

TORCH_WHY = "the framework release picks the kernels, fusions and dispatch of every workload"
# The default rubric's policy (rubrics/default.toml, item single-knob).
POLICY = KnobPolicy(
    ignore=("seq_sweep", "batch_sweep"),
    implied_by_device=("threads", "interop_threads"),
    device_defaults={"cuda_matmul_allow_tf32": False, "cudnn_allow_tf32": True,
                     "cudnn_benchmark": False},
)  # fmt: skip
CPU = {"device": "cpu", "device_name": "AMD EPYC", "dtypes": ["fp32"], "threads": 2,
       "interop_threads": 2, "float32_matmul_precision": "highest"}  # fmt: skip
# What torch records on an H200 at its defaults: 8 threads for 8 cores, the CUDA switches.
GPU = {**CPU, "device": "cuda", "device_name": "NVIDIA H200", "threads": 8,
       "interop_threads": 16, "cuda_matmul_allow_tf32": False, "cudnn_allow_tf32": True,
       "cudnn_benchmark": False}  # fmt: skip


def run(knobs: dict, **environment) -> Run:
    """A run with `knobs` and `environment`, as a bundle records them."""
    return Run.from_json({"suite": {}, "knobs": knobs, "environment": environment,
                          "ceilings": {}, "workloads": []})  # fmt: skip


def analysed(knobs: dict, **environment):
    dtype = knobs["dtypes"][0]
    return analyse_run(Run.from_json({
        "suite": {"hash": "h"}, "knobs": knobs, "environment": environment,
        "ceilings": {"compute": {dtype: {"peak": 1e12}}, "bandwidth": {"peak": 1e11}},
        "workloads": [{"id": f"gemm.a.{dtype}", "layer_type": "gemm", "dtype": dtype,
                       "status": "ok", "flops": 1e6, "bytes": 1e6, "samples_s": [1.0] * 5,
                       "params": {}, "reproduce": ""}],
    }))  # fmt: skip


# --- environment confounders -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [("2.13.0+cpu", "2.13.0"), ("2.13.0+cu130", "2.13.0"), ("2.6.0+rocm6.2.4", "2.6.0"),
     ("2.6.0+xpu", "2.6.0"), ("2.1.0+cpu.cxx11.abi", "2.1.0"), ("2.13.0", "2.13.0"),
     # a source build's local tag names the build, not the device: kept
     ("2.13.0a0+git1a2b3c4", "2.13.0a0+git1a2b3c4")],
)  # fmt: skip
def test_release_drops_the_device_build_tag_only(version, expected):
    assert release(version) == expected


def test_the_device_build_tag_is_not_a_confounder():
    # 2.13.0+cpu on the CPU, 2.13.0+cu130 on the GPU: one torch release, built for two devices.
    # What the GPU build adds (CUDA 13.0, cuDNN, the driver) serves the GPU only.
    base = run(CPU, torch_version="2.13.0+cpu", onednn="3.12.0", cuda=None, cudnn=None)
    cand = run(GPU, torch_version="2.13.0+cu130", onednn="3.12.0", cuda="13.0", cudnn=91900,
               driver="580.159.04")  # fmt: skip
    assert environment_changes(base, cand) == [
        EnvironmentChange("CUDA runtime", None, "13.0", FOLLOWS_DEVICE,
                          "serves the cuda side's kernels only"),
        EnvironmentChange("cuDNN", None, 91900, FOLLOWS_DEVICE,
                          "serves the cuda side's kernels only"),
        EnvironmentChange("GPU driver", None, "580.159.04", FOLLOWS_DEVICE,
                          "serves the cuda side's kernels only"),
    ]  # fmt: skip


def test_another_torch_release_is_a_kernel_confounder():
    base, cand = run(CPU, torch_version="2.13.0"), run(CPU, torch_version="2.11.0")
    assert environment_changes(base, cand) == [
        EnvironmentChange("torch", "2.13.0", "2.11.0", KERNELS, TORCH_WHY)
    ]
    # With the build tags on, the release is still what is compared, and the record says so.
    tagged = environment_changes(run(CPU, torch_version="2.13.0+cpu"),
                                 run(GPU, torch_version="2.11.0+cu130"))  # fmt: skip
    assert tagged == [
        EnvironmentChange("torch", "2.13.0+cpu", "2.11.0+cu130", KERNELS,
                          TORCH_WHY + "; compared as 2.13.0 vs 2.11.0 (device build tags aside)")
    ]  # fmt: skip


def test_a_kernel_library_confounds_only_where_both_devices_use_it():
    # oneDNN runs the CPU's kernels: between two CPU runs another version is a confounder;
    # beside a GPU it serves the CPU side only, and comes with the device change.
    base = run(CPU, onednn="3.12.0", python="3.11.7")
    assert environment_changes(base, run(CPU, onednn="3.10.2", python="3.11.7")) == [
        EnvironmentChange("oneDNN", "3.12.0", "3.10.2", KERNELS,
                          "GEMM, convolution and bf16 kernels on the CPU")
    ]  # fmt: skip
    assert environment_changes(base, run(GPU, onednn="3.10.2", python="3.12.3")) == [
        EnvironmentChange("oneDNN", "3.12.0", "3.10.2", FOLLOWS_DEVICE,
                          "serves the cpu side's kernels only"),
        EnvironmentChange("Python", "3.11.7", "3.12.3", RUNTIME,
                          "the interpreter runs eager dispatch: overhead-bound workloads move "
                          "with it"),
    ]  # fmt: skip
    # A version one side does not record is not compared (an older bundle, a build without it).
    assert environment_changes(run(CPU, onednn="3.12.0"), run(CPU, onednn=None)) == []


def test_a_cpu_heap_held_on_one_side_only_is_a_runtime_confounder():
    # one run faulted in a 32 MiB output's pages every call, the other reused its heap
    held, default = "glibc 2.36: freed memory is kept and reused", "glibc 2.36: its defaults"
    assert environment_changes(run(CPU, cpu_allocator=held), run(CPU, cpu_allocator=default)) == [
        EnvironmentChange("CPU allocator", held, default, RUNTIME,
                          "whether a call faults in fresh pages: a 32 MiB output's 8192 faults "
                          "cost a CPU add 7x")
    ]  # fmt: skip
    # an older bundle records none: not compared
    assert environment_changes(run(CPU, cpu_allocator=held), run(CPU)) == []


def test_two_gpu_drivers_are_a_runtime_confounder():
    base, cand = run(GPU, driver="570.86.15"), run(GPU, driver="580.159.04")
    assert environment_changes(base, cand) == [
        EnvironmentChange("GPU driver", "570.86.15", "580.159.04", RUNTIME,
                          "it can change clocks, launch latency and how PTX is compiled")
    ]  # fmt: skip


A, B = "a" * 40, "b" * 40


@pytest.mark.parametrize(
    ("base", "cand", "why"),
    [(A, A, None),
     (A + "+dirty", A + "+dirty",
      "both runs ran with uncommitted changes (+dirty): that code is in no commit, and the two "
      "working trees may differ"),
     (A, A + "+dirty",
      "the candidate ran with uncommitted changes (+dirty): that code is in no commit"),
     (A, B, "the runs were made from different commits"),
     (A + "+dirty", B,
      "the runs were made from different commits; the baseline ran with uncommitted changes "
      "(+dirty): that code is in no commit"),
     # not a git checkout on one side: no commit to compare, but a dirty one still counts
     (None, B, None),
     (None, B + "+dirty",
      "the candidate ran with uncommitted changes (+dirty): that code is in no commit")],
)  # fmt: skip
def test_a_dirty_or_different_commit_is_a_provenance_confounder(base, cand, why):
    changes = environment_changes(run(CPU, git_commit=base), run(CPU, git_commit=cand))
    expected = [] if why is None else [EnvironmentChange("git commit", base, cand, PROVENANCE, why)]
    assert changes == expected


def test_the_comparison_carries_and_serialises_them():
    base = analysed(CPU, torch_version="2.13.0+cpu", onednn="3.12.0")
    cand = analysed(GPU, torch_version="2.11.0+cu130", onednn="3.10.2")
    comp = compare(base, cand)
    assert [(c.name, c.kind) for c in comp.confounders] == [("torch", KERNELS)]
    assert [(c.name, c.kind) for c in comp.device_environment] == [("oneDNN", FOLLOWS_DEVICE)]
    doc = comp.to_json()
    assert [c["name"] for c in doc["confounders"]] == ["torch"]
    assert doc["confounders"][0]["baseline"] == "2.13.0+cpu"
    assert [c["name"] for c in doc["device_environment"]] == ["oneDNN"]
    # No policy given: only the CUDA switches (one device type only) follow the device.
    assert [k["knob"] for k in doc["knob_reading"]["counted"]] == [
        "device", "threads", "interop_threads"]  # fmt: skip


# --- the knob diff read ------------------------------------------------------------------------


def changes(base: dict, cand: dict) -> tuple[KnobChange, ...]:
    keys = list(base) + [k for k in cand if k not in base]
    return tuple(KnobChange(k, base.get(k), cand.get(k)) for k in keys
                 if base.get(k) != cand.get(k))  # fmt: skip


def test_a_device_change_with_the_threads_it_implies_is_one_knob():
    reading = read_knobs(changes(CPU, GPU), POLICY)
    assert reading.counted == (KnobChange("device", "cpu", "cuda"),)
    assert reading.device == KnobChange("device", "cpu", "cuda")
    assert [(k.knob, k.baseline, k.candidate) for k in reading.implied] == [
        ("threads", 2, 8), ("interop_threads", 2, 16), ("cuda_matmul_allow_tf32", None, False),
        ("cudnn_allow_tf32", None, True), ("cudnn_benchmark", None, False)]  # fmt: skip
    assert reading.implied[0].why == "torch sets it per machine (the rubric's implied_by_device)"
    assert reading.implied[2].why == (
        "a setting of one device type only, at torch's default (false)")  # fmt: skip
    # Without the rubric's list, the threads are knobs of their own: three changes.
    bare = read_knobs(changes(CPU, GPU), KnobPolicy())
    assert [k.knob for k in bare.counted] == ["device", "threads", "interop_threads"]


def test_a_device_change_plus_a_dtype_change_is_two_knobs():
    reading = read_knobs(changes(CPU, {**GPU, "dtypes": ["bf16"]}), POLICY)
    assert [k.knob for k in reading.counted] == ["device", "dtypes"]
    assert [k.knob for k in reading.implied][:2] == ["threads", "interop_threads"]


def test_a_backend_setting_away_from_its_default_is_a_choice():
    # TF32 matmuls on: a precision choice that came along with the move, not the device's.
    reading = read_knobs(changes(CPU, {**GPU, "cuda_matmul_allow_tf32": True}), POLICY)
    assert [k.knob for k in reading.counted] == ["device", "cuda_matmul_allow_tf32"]
    # float32_matmul_precision exists on both devices: changing it is always a knob.
    reading = read_knobs(changes(CPU, {**GPU, "float32_matmul_precision": "high"}), POLICY)
    assert [k.knob for k in reading.counted] == ["device", "float32_matmul_precision"]


def test_threads_count_when_the_device_does_not_change():
    reading = read_knobs(changes(CPU, {**CPU, "threads": 1}), POLICY)
    assert reading.counted == (KnobChange("threads", 2, 1),) and reading.implied == ()
    assert reading.device is None
    # Another GPU of one model (cuda:0 -> cuda:1) moves no machine: its threads still count.
    reading = read_knobs(changes({**GPU, "device": "cuda:0"},
                                 {**GPU, "device": "cuda:1", "threads": 4}), POLICY)  # fmt: skip
    assert [k.knob for k in reading.counted] == ["device", "threads"]


def test_two_machines_of_one_device_type_are_a_device_change():
    # EPYC to Xeon, both CPUs: the device knob stays "cpu", the machine (its name) changes,
    # and its core count sets torch's threads.
    xeon = {**CPU, "device_name": "Intel Xeon", "threads": 8, "interop_threads": 8}
    reading = read_knobs(changes(CPU, xeon), POLICY)
    assert reading.counted == (KnobChange("device_name", "AMD EPYC", "Intel Xeon"),)
    assert [k.knob for k in reading.implied] == ["threads", "interop_threads"]


def test_the_diff_rows_say_how_each_difference_reads():
    base = run(CPU, torch_version="2.13.0+cpu", git_commit=A)
    cand = run({**GPU, "seq_sweep": [64]}, torch_version="2.13.0+cu130", git_commit=A + "+dirty",
               cuda="13.0")  # fmt: skip
    diff = changes(base.knobs, cand.knobs)
    env = tuple(environment_changes(base, cand))
    table = diff_rows(diff, read_knobs(diff, POLICY), env)
    assert [(r.what, r.role) for r in table] == [
        ("device", DEVICE_ROW), ("device_name", DERIVED_ROW), ("threads", IMPLIED_ROW),
        ("interop_threads", IMPLIED_ROW), ("cuda_matmul_allow_tf32", IMPLIED_ROW),
        ("cudnn_allow_tf32", IMPLIED_ROW), ("cudnn_benchmark", IMPLIED_ROW),
        # only the candidate records a sweep here: ignored before it could follow the device
        ("seq_sweep", IGNORED_ROW), ("environment: CUDA runtime", IMPLIED_ROW),
        ("environment: git commit", CONFOUNDER_ROW)]  # fmt: skip
    rows = {r.what: r.reads_as for r in table}
    assert rows["device"] == "the device change: one knob"
    assert rows["device_name"] == "follows the device knob"
    assert rows["threads"].startswith("implied by the device change: torch sets it per machine")
    assert rows["seq_sweep"] == "not a mapping choice (the rubric ignores it)"
    assert rows["environment: git commit"].startswith("a confounder (provenance): the candidate")
    assert rows["environment: CUDA runtime"] == (
        "implied by the device change: serves the cuda side's kernels only")  # fmt: skip
    assert "environment: torch" not in rows  # one release


def test_values_are_shown_for_a_person():
    assert shown_value(A + "+dirty") == "a" * 12 + "+dirty"
    assert shown_value(["fp32", "bf16"]) == "fp32, bf16"
    assert shown_value(None) == "none" and shown_value(91900) == "91900"


def test_the_known_knobs_are_those_the_runner_records():
    torch = pytest.importorskip("torch")
    from reviewkit.measure import runner

    recorded = set(runner.knobs(torch.device("cpu"), ["fp32"], "quick"))
    # The CUDA switches are recorded on a CUDA device only: named in the runner's source.
    cuda_only = {k for k in KNOWN_KNOBS if k not in recorded}
    assert recorded <= set(KNOWN_KNOBS)
    assert cuda_only == {"cuda_matmul_allow_tf32", "cudnn_allow_tf32", "cudnn_benchmark",
                         "l2_flush"}  # fmt: skip
    source = inspect.getsource(runner.knobs)
    assert all(f'k["{name}"]' in source for name in cuda_only)
