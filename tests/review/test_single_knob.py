"""The single-knob-change check: a device change is one knob with the settings it implies, and
environment confounders count (a torch release fails, a dirty commit warns); the rubric's new
knob params are validated with one clear error."""

from __future__ import annotations

import pytest
from runfactory import complete_review, make_run, write_review

from reviewkit.analysis.analysed import AnalysedRun
from reviewkit.analysis.compare import compare
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import load_run, write_run
from reviewkit.common.errors import InputError
from reviewkit.review.checks import CHECKS
from reviewkit.review.checks.registry import Context
from reviewkit.review.gate import run_check
from reviewkit.review.rubric import DEFAULT_RUBRIC, load_rubric

PARAMS = load_rubric(DEFAULT_RUBRIC, CHECKS).item("single-knob").params
# An H200 at torch's defaults beside runfactory's 2-thread test CPU.
H200 = {"device": "cuda", "device_name": "NVIDIA H200", "threads": 8, "interop_threads": 16,
        "cuda_matmul_allow_tf32": False, "cudnn_allow_tf32": True,
        "cudnn_benchmark": False}  # fmt: skip
DIRTY = "a" * 40 + "+dirty"


def bundle(folder, environment: dict, **kw) -> AnalysedRun:
    """A runfactory run (torch 2.13.0+cpu, mkl) with its environment updated, analysed."""
    run = load_run(make_run(folder, **kw))
    return analyse_run(run.with_values(environment={**run.environment, **environment}))


def single_knob(base: AnalysedRun, cand: AnalysedRun):
    ctx = Context(review=None, baseline=base, candidates=[], comparisons=[compare(base, cand)],
                  params=PARAMS, cited=object())  # fmt: skip
    return CHECKS["single-knob-change"](ctx)


CASES = {
    # CPU -> H200 at one torch release (the +cpu/+cu130 build tags aside): one knob, the device;
    # the threads it implies and the CUDA switches at their defaults are listed, not counted.
    "device, one release": (
        {}, {"torch_version": "2.13.0+cu130", "cuda": "13.0"}, H200, "pass",
        "candidate 1 changes one knob: device (cpu → cuda); the device brings threads, "
        "interop_threads, cuda_matmul_allow_tf32, cudnn_allow_tf32, cudnn_benchmark with it "
        "(listed, not counted)",
    ),
    "device and dtype": (
        {}, {"torch_version": "2.13.0+cu130"}, {**H200, "dtypes": ["bf16"]}, "fail",
        "candidate 1 changes 2 knobs at once (device, dtypes); the device brings threads, "
        "interop_threads, cuda_matmul_allow_tf32, cudnn_allow_tf32, cudnn_benchmark with it "
        "(listed, not counted)",
    ),
    # issue 32: torch.compile is a mapping knob like any other; with the dtype it is two
    "compile mode and dtype": (
        {}, {}, {"compile_mode": "default", "dtypes": ["bf16"]}, "fail",
        "candidate 1 changes 2 knobs at once (dtypes, compile_mode)",
    ),
    "compile mode alone": (
        {}, {}, {"compile_mode": "max-autotune"}, "pass",
        "candidate 1 changes one knob: compile_mode (eager → max-autotune)",
    ),
    "threads alone": (
        {}, {}, {"threads": 1}, "pass", "candidate 1 changes one knob: threads (2 → 1)",
    ),
    "threads and another torch": (
        {"torch_version": "2.13.0"}, {"torch_version": "2.11.0"}, {"threads": 1}, "fail",
        "candidate 1 changes one knob: threads (2 → 1); but torch 2.13.0 → 2.11.0 differs too: "
        "the measured kernels are different code, so the result cannot be attributed to the "
        "threads change; re-measure both runs on one release of torch",
    ),
    "an upgrade alone": (
        {"torch_version": "2.11.0+cpu"}, {}, {}, "warn",
        "candidate 1 changes no mapping knob; torch 2.11.0+cpu → 2.13.0+cpu differs: if that "
        "upgrade is the change under review, say so; else re-measure both runs on one release "
        "of torch",
    ),
    "threads from a dirty tree": (
        {"git_commit": DIRTY}, {"git_commit": DIRTY}, {"threads": 1}, "warn",
        "candidate 1 changes one knob: threads (2 → 1); git commit aaaaaaaaaaaa+dirty on both "
        "runs (uncommitted changes): the code that measured is not one recorded commit; re-run "
        "from a clean commit so the comparison can be rebuilt",
    ),
    "threads and another interpreter": (
        {"python": "3.11.7"}, {"python": "3.12.3"}, {"threads": 1}, "warn",
        "candidate 1 changes one knob: threads (2 → 1); also Python 3.11.7 → 3.12.3: a "
        "different driver or interpreter can move timings; confirm on one",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_single_knob_status_and_summary(tmp_path, case):
    base_env, cand_env, cand_knobs, status, summary = CASES[case]
    base = bundle(tmp_path / "base", base_env)
    dtype = cand_knobs.get("dtypes", ["fp32"])[0]
    cand = bundle(tmp_path / "cand", cand_env, dtype=dtype, knobs=cand_knobs, seed=1)
    result = single_knob(base, cand)
    assert (result.status, result.summary) == (status, summary)


def test_the_evidence_lists_what_the_device_implies_and_the_confounders(tmp_path):
    base = bundle(tmp_path / "base", {"git_commit": "b" * 40})
    cand = bundle(tmp_path / "cand", {"torch_version": "2.11.0+cu130", "cuda": "13.0",
                                      "git_commit": DIRTY}, knobs=H200, seed=1)  # fmt: skip
    result = single_knob(base, cand)
    evidence = {e.label: e.value for e in result.evidence}
    assert result.status == "fail"
    assert evidence["candidate 1 knob device"] == "cpu -> cuda"  # as written, not Python's repr
    assert evidence["candidate 1 knob threads, implied by the device change"] == (
        "2 -> 8: torch sets it per machine (the rubric's implied_by_device)")  # fmt: skip
    assert evidence["candidate 1 knob cudnn_allow_tf32, implied by the device change"] == (
        "none -> true: a setting of one device type only, at torch's default (true)")  # fmt: skip
    assert evidence["candidate 1 environment torch (kernel source), a confounder"].startswith(
        "2.13.0+cpu -> 2.11.0+cu130: ")  # fmt: skip
    assert evidence["candidate 1 environment git commit (provenance), a confounder"] == (
        "bbbbbbbbbbbb -> aaaaaaaaaaaa+dirty: the runs were made from different commits; the "
        "candidate ran with uncommitted changes (+dirty): that code is in no commit")  # fmt: skip
    assert evidence["candidate 1 environment CUDA runtime, implied by the device change"] == (
        "none -> 13.0: serves the cuda side's kernels only")  # fmt: skip


def test_a_torch_release_beside_the_knob_blocks_the_gate(tmp_path):
    """Through `check`: the complete review (fp32 -> bf16, one knob) passes until the
    candidate's torch is another release; then the blocking item fails and names it."""
    path = write_review(tmp_path, complete_review())
    cand = load_run(tmp_path / "runs" / "cand")
    environment = {**cand.environment, "torch_version": "2.11.0+cpu"}
    write_run(tmp_path / "runs" / "cand", cand.with_values(environment=environment))
    report = run_check(path)
    finding = next(f for f in report.findings if f.item.id == "single-knob")
    assert finding.status == "fail" and finding.blocks and report.verdict == "fail"
    assert finding.summary.startswith(
        "candidate 1 changes one knob: dtypes (fp32 → bf16); but torch 2.13.0+cpu → 2.11.0+cpu "
        "differs too")  # fmt: skip


# --- the rubric's knob params --------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ('implied_by_device = ["threads", "interop_threads"]\n', "",
         "item 'single-knob': check 'single-knob-change' needs params.implied_by_device (a knob "
         'list: a list of knob names the runs record, e.g. ["threads", "interop_threads"]); add '
         "it to the item's params"),
        ('implied_by_device = ["threads", ', 'implied_by_device = ["thread", ',
         "params.implied_by_device names 'thread', not a knob the runs record (did you mean "
         "'threads'?)"),
        ('implied_by_device = ["threads", "interop_threads"]', 'implied_by_device = "threads"',
         "params.implied_by_device must be a knob list: a list of knob names the runs record"),
        ('implied_by_device = ["threads", "interop_threads"]',
         'implied_by_device = ["threads", "threads"]',
         "params.implied_by_device names 'threads' twice; name it once"),
        ('ignore = ["seq_sweep", "batch_sweep"]', 'ignore = ["seq_sweep", 3]',
         "params.ignore names 3, not a knob the runs record"),
        ("cudnn_benchmark = false\n", "cudnn_benchmark = [false]\n",
         "params.device_defaults.cudnn_benchmark = [False]: expected torch's default of that "
         "setting, a boolean, string or finite number"),
        ("cudnn_benchmark = false\n", "cudnn_benchmrk = false\n",
         "params.device_defaults names 'cudnn_benchmrk', not a knob the runs record (did you "
         "mean 'cudnn_benchmark'?)"),
        ("[sections.items.params.device_defaults]\ncuda_matmul_allow_tf32 = false\n"
         "cudnn_allow_tf32 = true\ncudnn_benchmark = false\n", "device_defaults = false\n",
         "params.device_defaults must be a knob table: a table of knob names the runs record, "
         "each set to torch's default value"),
    ],
)  # fmt: skip
def test_the_knob_params_are_validated_naming_file_and_key(tmp_path, old, new, needle):
    text = DEFAULT_RUBRIC.read_text()
    assert old in text
    path = tmp_path / "team.toml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError) as info:
        load_rubric(path, CHECKS)
    message = str(info.value)
    assert message.startswith(f"{path}: item 'single-knob'") and needle in message
