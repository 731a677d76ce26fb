"""Floor calls' shapes against ATen's parallel_for split, worked by hand."""

import math

import pytest

from reviewkit.suite import floors
from reviewkit.suite import workloads as suite


def _spec(kernel_id: str, profile: str = "quick", dtype: str = "fp32"):
    return next(s for s in suite.plan_specs(profile, (dtype,), None) if s.id.startswith(kernel_id))


@pytest.mark.parametrize(
    "extent,threads,tasks",
    [(32767, 8, 1),  # under one grain: serial
     (32768, 8, 1),  # ceil(32768 / 32768) = 1 task
     (32769, 8, 2),  # ceil(32769 / 32768) = 2
     (2_097_152, 2, 2),  # 64 grains, capped at 2 threads
     (2_097_152, 1, 1)],
)  # fmt: skip
def test_parallel_tasks_follows_atens_split(extent, threads, tasks):
    assert floors.parallel_tasks(extent, threads) == tasks


def test_same_tasks_extent_is_the_smallest_with_as_many_tasks():
    # 2,097,152 elements at 2 threads: 2 tasks; the smallest extent with 2 is 32,769.
    assert floors.same_tasks_extent(2_097_152, 2) == 32_769
    # at 8 threads: 8 tasks; the smallest is 7 x 32,768 + 1 = 229,377
    assert floors.same_tasks_extent(2_097_152, 8) == 229_377
    # one thread: one task, down to the vector minimum
    assert floors.same_tasks_extent(2_097_152, 1, least=64) == 64


def test_residual_add_floor_keeps_its_split_and_row_length():
    spec = _spec("elementwise.llama-2-7b-residual-add")  # 512 x 4096 fp32
    f = floors.floor_of(spec, 2)
    # 32,769 elements wanted in rows of 4096: ceil(32769 / 4096) = 9 rows = 36,864 elements
    assert [t.shape for t in f.spec.inputs] == [(9, 4096), (9, 4096)]
    assert floors.parallel_tasks(9 * 4096, 2) == floors.parallel_tasks(512 * 4096, 2) == 2
    assert f.spec.id.endswith(".floor") and f.spec.definition_hash() != spec.definition_hash()
    # at 8 threads: 229,377 / 4096 -> 57 rows, 8 tasks like the workload
    f8 = floors.floor_of(spec, 8)
    assert f8.spec.inputs[0].shape == (57, 4096)
    assert floors.parallel_tasks(57 * 4096, 8) == 8


def test_row_parallel_floor_has_a_row_per_thread():
    f = floors.floor_of(_spec("norm.bert-base-layernorm"), 2)  # 512 x 768, grain of one row
    assert f.spec.inputs[0].shape == (2, 768) and f.spec.inputs[1].shape == (768,)


def test_transpose_floor_keeps_a_swap_that_copies():
    # (1, 64, 4, 16) swapped on dims 1, 2: a floor of one row would swap a dim of 1 with 4 and
    # copy nothing; it keeps two rows.
    f = floors.floor_of(_spec("data-movement.gpt-2-small-s64-heads-transpose", "smoke"), 2)
    assert f.spec.inputs[0].shape == (1, 2, 4, 16)


def test_gemm_and_attention_floors():
    f = floors.floor_of(_spec("gemm.llama-2-7b-mlp-up"), 2)  # 128 x 4096 @ 4096 x 11008
    assert [t.shape for t in f.spec.inputs] == [(64, 64), (128, 64)]  # n: 64 per thread
    a = floors.floor_of(_spec("attention.llama-2-7b-sdpa-causal"), 2)  # 1 x 32 x 512 x 128
    assert a.spec.inputs[0].shape == (1, 2, 32, 128) and a.spec.params["causal"] is True


def test_model_floor_keeps_every_layer():
    spec = _spec("model.gpt-2-small-decoder-2l.b1s256")
    f = floors.floor_of(spec, 2)
    assert f.spec.params["layers"] == spec.params["layers"] == 2
    assert f.spec.params["seq"] == floors.MODEL_FLOOR_SEQ
    assert f.spec.params["hidden"] % f.spec.params["heads"] == 0


def test_every_suite_kernel_has_a_floor_no_larger_than_the_workload():
    for spec in suite.plan_specs("quick", suite.DTYPES, None):
        f = floors.floor_of(spec, 2)
        assert f is not None, spec.id
        for mine, theirs in zip(f.spec.inputs, spec.inputs, strict=True):
            assert math.prod(mine.shape) <= math.prod(theirs.shape), spec.id


def test_the_double_keeps_the_split_and_doubles_the_work():
    f = floors.floor_of(_spec("elementwise.llama-2-7b-residual-add"), 2)  # 9 x 4096: 2 tasks
    d = floors.doubled(f, 2)
    assert [t.shape for t in d.inputs] == [(18, 4096), (18, 4096)]  # still 2 tasks at 2 threads
    g = floors.floor_of(_spec("gemm.llama-2-7b-mlp-up"), 2)
    assert [t.shape for t in floors.doubled(g, 2).inputs] == [(128, 64), (128, 64)]  # m only
    model = floors.floor_of(_spec("model.gpt-2-small-decoder-2l.b1s256"), 2)
    assert floors.doubled(model, 2).params["batch"] == 2


def test_a_double_that_would_cross_a_grain_is_not_taken():
    # 4,096 elements at 2 threads: 1 task; the floor keeps 64 (one row of 64); a floor of
    # 20,000 elements would double past the 32,768 grain into 2 tasks: no double then.
    spec = _spec("elementwise.llama-2-7b-s64-residual-add", "smoke")
    f = floors.floor_of(spec, 2)
    assert floors.doubled(f, 2) is not None
    wide = floors.Floor(floors.grown(f.spec, 20_000 // 64 + 1), "test")
    assert floors.doubled(wide, 2) is None


def test_conv_floor_stays_over_atens_onednn_threshold():
    f = floors.floor_of(_spec("conv.resnet-50-stage3-conv3x3"), 2)  # 1 x 256 x 14 x 14
    (n, c, h, w), _ = (t.shape for t in f.spec.inputs)
    # 16 channels want sqrt(20480 / 16) = 35.8 -> 36 x 36, but the image is 14 x 14: the
    # channels grow instead, ceil(20481 / 196 / 16) = 7 blocks = 112: 112 x 196 = 21,952 > 20,480
    assert (n, c, h, w) == (1, 112, 14, 14)
    g = floors.floor_of(_spec("conv.resnet-50-stage1-conv3x3"), 2)  # 1 x 64 x 56 x 56
    assert g.spec.inputs[0].shape == (1, 16, 36, 36)  # 16 x 1,296 = 20,736 > 20,480


def test_gqa_floors_keep_whole_groups_and_a_decode_steps_single_query():
    # Llama-3-8B decode, 32 query / 8 KV heads: groups of 4, so one KV head already gives 4
    # query heads, more than 2 threads; the single query stays, the 4,096 keys fall to 32.
    f = floors.floor_of(_spec("attention.llama-3-8b-decode-sdpa-gqa.b64ctx4096", "serving",
                              "bf16"), 2)  # fmt: skip
    assert [t.shape for t in f.spec.inputs] == [(1, 4, 1, 128), (1, 1, 32, 128), (1, 1, 32, 128)]
    # 70B at tp 8: 8 query heads on 1 KV head per rank; a causal prefill floor is 32 x 32
    p = floors.floor_of(_spec("attention.llama-3-70b-tp8-prefill-sdpa-gqa-causal.b1s4096",
                              "serving", "bf16"), 2)  # fmt: skip
    assert [t.shape for t in p.spec.inputs][:2] == [(1, 8, 32, 128), (1, 1, 32, 128)]
    assert p.spec.params["causal"] is True
    # at 16 threads, groups of 4 need 4 KV heads for a query head per thread
    wide = floors.floor_of(_spec("attention.llama-3-8b-decode-sdpa-gqa.b64ctx4096", "serving",
                                 "bf16"), 16)  # fmt: skip
    assert wide.spec.inputs[0].shape == (1, 16, 1, 128) and wide.spec.params["kv_heads"] == 4
    # the double doubles the batch of every operand, and says so
    d = floors.doubled(f, 2)
    assert [t.shape[0] for t in d.inputs] == [2, 2, 2] and d.params["batch"] == 2


def test_moe_floor_keeps_every_expert_and_its_double_doubles_each_experts_rows():
    # Mixtral at 64 tokens: 128 assignments, 16 rows per expert; hidden 4096 -> 64, ffn
    # 14336 -> 64 x 2 threads = 128; the gate/up weight holds both halves: 2 x 128 rows.
    f = floors.floor_of(_spec("block.mixtral-8x7b-moe-experts-looped.t64", "serving", "bf16"), 2)
    assert [t.shape for t in f.spec.inputs] == [(128, 64), (8, 256, 64), (8, 64, 128)]
    assert f.spec.params["experts"] == 8 and f.spec.params["rows_per_expert"] == 16
    d = floors.doubled(f, 2)
    assert d.inputs[0].shape == (256, 64) and d.params["rows_per_expert"] == 32
    assert [t.shape for t in d.inputs[1:]] == [(8, 256, 64), (8, 64, 128)]  # weights unchanged


def test_every_serving_kernel_has_a_floor_or_says_why_not():
    for spec in suite.plan_specs("serving", ("bf16",), None):
        f = floors.floor_of(spec, 2)
        assert (f is not None) != (spec.kernel in floors.NO_FLOOR_RULE), spec.id
        if f is not None:
            for mine, theirs in zip(f.spec.inputs, spec.inputs, strict=True):
                assert math.prod(mine.shape) <= math.prod(theirs.shape), spec.id


def test_a_moe_floor_with_shared_experts_keeps_them_and_grows_only_the_token_rows():
    # DeepSeek-V2-Lite at 64 tokens: 64 experts x 6 rows (384 = 64 tokens x top-6), hidden 2048
    # -> 64, ffn 1408 -> 128; the shared SwiGLU (width 2 x 1408 = 2816 -> 128) over 64 tokens.
    spec = _spec("block.deepseek-v2-lite-moe-experts-looped.t64", "serving", "bf16")
    f = floors.floor_of(spec, 2)
    assert [t.shape for t in f.spec.inputs] == [
        (384, 64), (64, 256, 64), (64, 64, 128), (64, 64), (256, 64), (64, 128)]
    assert f.spec.params["tokens"] == 64 and f.spec.params["shared_ffn"] == 128
    d = floors.doubled(f, 2)
    # the routed rows and the shared tokens double, no weight does (the inputs that grow are
    # named for the MoE kernel, not found by their first dimension)
    assert [t.shape[0] for t in d.inputs] == [768, 64, 64, 128, 256, 64]
    assert d.params["rows_per_expert"] == 12 and d.params["tokens"] == 128
