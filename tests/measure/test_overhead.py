"""The overhead phase: floor calls checked against the workload's ops, ops counted per call."""

import collections
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from reviewkit.analysis.roofline import OVERHEAD_BOUND, analyse_run
from reviewkit.bundle.records import Run
from reviewkit.measure import overhead
from reviewkit.suite import floors, kernels
from reviewkit.suite import workloads as suite
from reviewkit.suite.definitions import TensorSpec
from reviewkit.suite.profiles import suite_profile

CPU = torch.device("cpu")


def _spec(prefix: str, profile: str = "smoke"):
    return next(s for s in suite.plan_specs(profile, ("fp32",), None) if s.id.startswith(prefix))


def test_a_floor_on_another_kernel_path_is_refused():
    # Fake profiler names: the workload runs the flash kernel, the floor the math fallback.
    names = iter([
        collections.Counter({"aten::scaled_dot_product_attention": 1,
                             "aten::_scaled_dot_product_flash_attention_for_cpu": 1}),
        collections.Counter({"aten::scaled_dot_product_attention": 1,
                             "aten::_scaled_dot_product_attention_math": 1, "aten::bmm": 2}),
    ])  # fmt: skip
    spec = _spec("attention.gpt-2-small-s64-sdpa-causal")
    rec = overhead.cpu_floor_record(spec, kernels.build(spec, CPU), CPU, 2, kernels.build,
                                    op_names=lambda fn: next(names))  # fmt: skip
    assert rec["available"] is False and rec["method"] == "not-measured"
    assert "lacks aten::_scaled_dot_product_flash_attention_for_cpu" in rec["reason"]
    assert "adds aten::_scaled_dot_product_attention_math, aten::bmm" in rec["reason"]
    assert rec["ops"]["match"] is False and "samples_s" not in rec


def test_a_real_floor_call_runs_the_workloads_ops():
    spec = _spec("elementwise.llama-2-7b-s64-residual-add")
    fn = kernels.build(spec, CPU)
    rec = overhead.cpu_floor_record(spec, fn, CPU, torch.get_num_threads(), kernels.build,
                                    policy=suite_profile("smoke").floor_sampling)  # fmt: skip
    assert rec["available"] and rec["method"] == "floor-call", rec["reason"]
    assert rec["ops"]["match"] and rec["ops"]["workload"] == {"aten::add": 1}
    assert len(rec["samples_s"]) >= suite_profile("smoke").floor_sampling.min_samples
    assert set(rec["minor_faults_per_call"]) == {"workload", "floor"}
    # 4,096 elements at any thread count: one task; the floor keeps 64, its double 128 (one
    # task still): both timed, so the floor's own work is taken out
    assert rec["double_samples_s"] and rec["double_floor"]["inputs"][0]["shape"] == [2, 64]
    assert rec["floor"]["inputs"][0]["shape"] != spec.inputs[0].shape or spec.inputs[0].numel <= 64


def test_op_profile_counts_a_gemm_like_flop_counter():
    # F.linear(x (128 x 768), w (3072 x 768)): one aten::mm of 2 x 128 x 768 x 3072 FLOPs
    # = 603,979,776, bytes = (128 x 768 + 3072 x 768 + 128 x 3072) x 4 = 11,403,264.
    x, w = torch.randn(128, 768), torch.randn(3072, 768)
    prof = overhead.op_profile(lambda: F.linear(x, w))
    assert prof["ops"] == [{"op": "aten::mm", "calls": 1, "flops": 603_979_776,
                            "bytes": 11_403_264, "dtype": "fp32"}]  # fmt: skip
    assert prof["ops_per_call"] == 1


def _wrapped(k: int):
    """A test-only builder: the workload followed by k tiny adds, in the floor too."""
    tiny = torch.zeros(1)

    def build(spec, device):
        fn = kernels.build(spec, device)

        def call():
            fn()
            for _ in range(k):
                torch.add(tiny, tiny)

        return call

    return build


def _floor_median(k: int) -> float:
    spec = _spec("gemm.llama-3-8b-s64-attn-q")
    build = _wrapped(k)
    rec = overhead.cpu_floor_record(spec, build(spec, CPU), CPU, torch.get_num_threads(),
                                    build)  # fmt: skip
    assert rec["available"], rec["reason"]
    samples = sorted(rec["samples_s"])
    return samples[len(samples) // 2]


def test_k_extra_tiny_ops_add_about_k_per_op_floors():
    # 64 extra one-element adds should add about 64 x the per-op floor to the floor call: within
    # a factor of 2 either way (the docs' cross-check tolerance), on any machine.
    # One thread: on a busy 2-core machine a second thread's wake-up costs milliseconds at
    # random and would drown the adds (seen: a 16 ms floor while another process ran).
    k = 64
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            base, wrapped = _floor_median(0), _floor_median(k)
        per_op = overhead.per_op_floor_s(CPU)["median_s"]
    finally:
        torch.set_num_threads(threads)
    gained = wrapped - base
    assert 0.5 * k * per_op <= gained <= 2 * k * per_op, (base, wrapped, per_op)


def test_a_recorded_floor_of_80_percent_makes_the_workload_overhead_bound():
    # The record as the runner writes it, on a fake clock: the call 100 us, its floor 80 us.
    doc = {
        "suite": {}, "environment": {}, "knobs": {},
        "ceilings": {"compute": {"fp32": {"peak": 1e12}}, "bandwidth": {"peak": 1e11}},
        "workloads": [{
            "id": "w", "layer_type": "elementwise", "dtype": "fp32", "status": "ok",
            "flops": 1e6, "bytes": 1e6, "samples_s": [100e-6] * 30,
            "overhead": {"available": True, "method": "floor-call", "samples_s": [80e-6] * 30},
        }],
    }  # fmt: skip
    (w,) = analyse_run(Run.from_json(doc), below_roof_share=0.5).workloads
    assert w.bottleneck == OVERHEAD_BOUND
    assert w.decomposition.overhead_fraction == pytest.approx(0.8)


def test_one_profiled_call_gives_the_names_a_call_alone_dispatches():
    # profile_call runs the profiler and the dispatch mode in one call; the mode's re-dispatch
    # is recorded twice by the profiler and taken off again: the names must equal a plain
    # profile's, for a GEMM (composite ops nested) and a whole decoder.
    for prefix in ("gemm.llama-3-8b-s64-attn-q", "model.gpt-2-small-s64-decoder-2l.b1s8"):
        spec = _spec(prefix)
        fn = kernels.build(spec, CPU)
        with torch.inference_mode():
            plain = overhead.profiled_op_names(fn)
        names, ops, faults = overhead.profile_call(fn)
        assert names == plain, prefix
        assert ops["ops_per_call"] >= 1 and faults >= 0


@pytest.mark.parametrize("threads", [1, 2])
def test_serving_floors_run_the_workloads_ops(threads):
    # A decode step of Llama-3-8B (a 1-token query, 4 query heads per KV head) and a cut-down
    # looped MoE (the real Mixtral weights are 1.9 GB in bf16): their floors must dispatch the
    # workload's aten ops, or the overhead phase refuses them.
    decode = next(s for s in suite.plan_specs("serving", ("bf16",), "*decode-sdpa-gqa.b1ctx1024*"))
    moe = next(s for s in suite.plan_specs("serving", ("bf16",), "*moe-experts-looped.t64*"))
    e, rows, h, f = 8, 16, 256, 512
    small_moe = dataclasses.replace(
        moe, inputs=(TensorSpec((e * rows, h), "bf16"), TensorSpec((e, 2 * f, h), "bf16"),
                     TensorSpec((e, h, f), "bf16")),
        params={**moe.params, "rows_per_expert": rows, "hidden": h, "ffn": f})  # fmt: skip
    t, fs = 16, 1024  # DeepSeek-style: a shared experts' SwiGLU over every token after them
    shared_moe = dataclasses.replace(
        small_moe, inputs=(*small_moe.inputs, TensorSpec((t, h), "bf16"),
                           TensorSpec((2 * fs, h), "bf16"), TensorSpec((h, fs), "bf16")),
        params={**small_moe.params, "shared_experts": 2, "shared_ffn": fs})  # fmt: skip
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for spec in (decode, small_moe, shared_moe):
            fn = kernels.build(spec, CPU)
            policy = suite_profile("smoke").floor_sampling
            rec = overhead.cpu_floor_record(spec, fn, CPU, threads, kernels.build, policy=policy)
            assert rec["available"] and rec["ops"]["match"], (spec.id, rec["reason"])
            assert rec["double_samples_s"], spec.id  # the double stayed on the path
    finally:
        torch.set_num_threads(before)
    # the MoE loop's ops grow with its experts: 8 of each expert's GEMM pair, and the shared pair
    assert rec["ops"]["workload"]["aten::linear"] == 2 * e + 2


def test_a_kernel_without_a_floor_rule_says_why_even_where_the_op_counter_cannot_run_it():
    # FlexAttention is compiled in its builder; under the op counter's dispatch mode it would
    # leave the compiled program (torch 2.13 fails or runs its unfused reference). The record
    # must carry the rule's reason, not a TypeError, and no op profile.
    spec = next(iter(suite.plan_specs("serving", ("bf16",), "*decode-flex-gqa.b8ctx4096*")))
    policy = suite_profile("smoke").floor_sampling
    record, ops = overhead._measure_one(spec, kernels.build(spec, CPU), 1e-3, CPU, 2,
                                        kernels.build, policy)  # fmt: skip
    assert record["available"] is False
    assert record["reason"] == floors.NO_FLOOR_RULE["flex_decode_gqa"]
    assert ops is None
