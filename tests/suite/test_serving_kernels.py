"""The serving profile's FlexAttention decode and MoE experts: counts, and outputs on the CPU."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from reviewkit.bundle import knobs
from reviewkit.measure import compiled, memory_fit
from reviewkit.suite import floors, kernels, kernels_flex, moe, serving
from reviewkit.suite import workloads as suite
from reviewkit.suite.definitions import ModelDims

CPU, META = torch.device("cpu"), torch.device("meta")
GB = 10**9
BF16 = suite.workloads("serving", ["bf16"])
# A narrow GQA model for running the flex kernels on a CPU: 8 query heads of 32, 2 KV heads
# (4 query heads per KV head, a power of two like the Llama-3-8B's 32 / 8).
TINY = serving.ServedModel(ModelDims("tiny", 256, 8, 512, 100), kv_heads=2)
# A narrow MoE with shared experts: 8 experts, top-2, so 16 tokens are 4 rows per expert.
TINY_MOE = moe.MoEConfig("tiny-moe", 64, 48, 8, 2, shared_experts=2)


def _spec(workload_id: str) -> suite.WorkloadSpec:
    (spec,) = [s for s in BF16 if s.id == workload_id]
    return spec


def _counted(spec: suite.WorkloadSpec) -> int:
    """FlopCounterMode's count of a build on the meta device (shapes only)."""
    fn = kernels.build(spec, META)
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


# --- FlexAttention decode ------------------------------------------------------------------


def test_flex_decode_cells_are_a_subgrid_of_the_sdpa_decode_with_its_counts():
    flex_specs = [s for s in BF16 if s.kernel == "flex_decode_gqa"]
    cells = {(s.params["batch"], s.params["kv_len"]) for s in flex_specs}
    assert cells == {(b, c) for b in (8, 64, 256) for c in (4096, 32768)}
    for s in flex_specs:
        b, c = s.params["batch"], s.params["kv_len"]
        sdpa = _spec(f"attention.llama-3-8b-decode-sdpa-gqa.b{b}ctx{c}.bf16")
        assert (s.flops, s.bytes, s.inputs) == (sdpa.flops, sdpa.bytes, sdpa.inputs)
        assert s.params["compiled"] == serving.FLEX_COMPILED


def test_flex_decode_counts_by_hand():
    # FlopCounterMode has a formula for the flex HOP but cannot dispatch it (a TypeError under
    # the mode in torch 2.13) and flex refuses the meta device, so by hand: QK^T and PV, 2
    # FLOPs per multiply-add: 2 x 2 x 64 seqs x 32 heads x 32768 keys x 128 = 34,359,738,368,
    # which is what FlopCounterMode counts for the SDPA decode at this cell
    spec = _spec("attention.llama-3-8b-decode-flex-gqa.b64ctx32768.bf16")
    assert spec.flops == 34_359_738_368
    assert _counted(_spec("attention.llama-3-8b-decode-sdpa-gqa.b64ctx32768.bf16")) == spec.flops
    # bytes: the KV cache 2 x 64 x 32768 x 8 x 128 x 2 = 8,589,934,592; q and out 2 x 524,288
    assert spec.bytes == 8_589_934_592 + 2 * 64 * 32 * 128 * 2


def test_paged_decode_is_one_pool_of_pages_with_the_contiguous_counts():
    paged = [s for s in BF16 if s.kernel == "flex_decode_gqa_paged"]
    assert [s.id for s in paged] == [
        "attention.llama-3-8b-decode-flex-gqa-paged128.b8ctx4096.bf16",
        "attention.llama-3-8b-decode-flex-gqa-paged128.b64ctx32768.bf16",
    ]
    spec = paged[1]
    # 64 sequences x 32768 tokens in one pool of 16,384 pages of 128 tokens
    assert [t.shape for t in spec.inputs] == [(64, 32, 1, 128), (1, 8, 2_097_152, 128),
                                              (1, 8, 2_097_152, 128)]  # fmt: skip
    flat = _spec("attention.llama-3-8b-decode-flex-gqa.b64ctx32768.bf16")
    assert (spec.flops, spec.bytes) == (flat.flops, flat.bytes)
    assert spec.params["page_size"] == 128 and spec.params["pages"] == "shuffled"


def test_the_largest_flex_cell_is_skipped_where_it_does_not_fit():
    spec = _spec("attention.llama-3-8b-decode-flex-gqa.b256ctx32768.bf16")
    assert "does not fit the 20 GB free" in memory_fit.does_not_fit(spec, 20 * GB, "a figure")
    small = _spec("attention.llama-3-8b-decode-flex-gqa-paged128.b8ctx4096.bf16")
    assert memory_fit.does_not_fit(small, 20 * GB, "a figure") == ""


@pytest.mark.parametrize("dtype,tol", [("fp32", 1e-5), ("bf16", 2e-2)])
def test_flex_decode_matches_sdpa_and_compiles_in_its_build(dtype, tol):
    spec = serving.flex_decode(TINY, 2, 512, dtype)
    frames = compiled.frames_compiled()
    fn = kernels.build(spec, CPU)
    after_build = compiled.frames_compiled()
    assert after_build != frames  # the build compiled it, and ran it once
    with torch.inference_mode():
        out = fn()
    assert compiled.frames_compiled() == after_build  # so no sample compiles
    q, k, v = kernels._inputs(spec, CPU, torch.Generator().manual_seed(kernels.INPUT_SEED))
    ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert out.shape == (2, 8, 1, 32)
    torch.testing.assert_close(out.float(), ref.float(), atol=tol, rtol=tol)


def test_paged_flex_decode_matches_sdpa_over_its_shuffled_pages():
    spec = serving.flex_decode(TINY, 2, 512, "fp32", paged=True)
    out = kernels.build(spec, CPU)()
    # the same draws as the build: the inputs, then the shuffled free list
    gen = torch.Generator().manual_seed(kernels.INPUT_SEED)
    q, k_pool, v_pool = kernels._inputs(spec, CPU, gen)
    _, table = kernels_flex.page_table(spec, CPU, gen)  # (2 sequences, 4 pages each)
    assert table.shape == (2, 4)
    assert sorted(table.flatten().tolist()) == list(range(8))
    assert table.flatten().tolist() != list(range(8))  # shuffled, not in order
    rows = (table.unsqueeze(-1) * 128 + torch.arange(128)).reshape(2, 512)
    k, v = (pool[0][:, rows].transpose(0, 1) for pool in (k_pool, v_pool))
    ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_knobs_say_what_the_flex_kernels_ignore():
    why = knobs.not_applicable({"compile_mode": "eager"}, "flex_decode_gqa_paged", "bf16", "cuda")
    assert "compile flex_attention in their builder" in why["compile_mode"]
    assert knobs.not_applicable({"compile_mode": "eager"}, "sdpa_gqa", "bf16", "cuda") == {}
    assert knobs.not_applicable({"compile_mode": "default"}, "flex_decode_gqa", "bf16",
                                "cuda") == {}  # fmt: skip
    assert "not one of SDPA's backends" in knobs.not_applicable(
        {"attention_backend": "math"}, "flex_decode_gqa", "bf16", "cpu")["attention_backend"]
    # the SDPA decode goes through SDPA's dispatch, so the backend knob changes it
    assert knobs.not_applicable({"attention_backend": "math"}, "sdpa_gqa", "bf16", "cpu") == {}


# --- MoE experts ---------------------------------------------------------------------------


def test_deepseek_v2_lite_moe_by_hand():
    spec = _spec("block.deepseek-v2-lite-moe-experts-grouped.t512.bf16")
    # 512 tokens x top-6 = 3072 rows, 48 per expert of 64; per row 2048 x 2816 (gate, up) and
    # 1408 x 2048 (down): 6 x 3072 x 2048 x 1408 = 53,150,220,288; the 2 shared experts, one
    # SwiGLU of width 2816 over the 512 tokens: 6 x 512 x 2048 x 2816 = 17,716,740,096
    assert spec.matmul_flops == 53_150_220_288 + 17_716_740_096
    assert spec.other_flops == 4 * 3072 * 1408 + 4 * 512 * 2816
    # rows in and out 2 x 3072 x 2048 x 2; 64 experts' weights 64 x 3 x 2048 x 1408 x 2;
    # tokens in and out 2 x 512 x 2048 x 2; shared weights 3 x 2048 x 2816 x 2
    assert spec.bytes == 25_165_824 + 1_107_296_256 + 4_194_304 + 34_603_008
    assert spec.params["rows_per_expert"] == 48 and spec.params["shared_ffn"] == 2816
    looped = _spec("block.deepseek-v2-lite-moe-experts-looped.t512.bf16")
    assert (looped.flops, looped.bytes, looped.inputs) == (spec.flops, spec.bytes, spec.inputs)


@pytest.mark.parametrize("workload_id", [
    s.id for s in BF16 if s.kernel in ("moe_experts_looped", "moe_experts_grouped")
])  # fmt: skip
def test_moe_matmul_flops_match_torchs_counter_on_meta(workload_id):
    spec = _spec(workload_id)
    assert spec.matmul_flops == _counted(spec)


def test_grouped_mixtral_is_the_looped_definition_but_its_dispatch():
    looped = _spec("block.mixtral-8x7b-moe-experts-looped.t4096.bf16")
    grouped = _spec("block.mixtral-8x7b-moe-experts-grouped.t4096.bf16")
    params = {**grouped.params, "dispatch": "looped"}
    same = dataclasses.replace(grouped, id=looped.id, kernel=looped.kernel, params=params)
    assert same == looped


@pytest.mark.parametrize("dtype,tol", [("fp32", 1e-4), ("bf16", 5e-2)])
@pytest.mark.parametrize("grouped_mm", [False, True])
def test_grouped_experts_compute_what_the_looped_do(dtype, tol, grouped_mm, monkeypatch):
    # grouped_mm: the torch._grouped_mm call a CUDA device with its kernel makes, run here on
    # the CPU's implementation of the op (it takes fp32 and bf16)
    monkeypatch.setattr(kernels, "grouped_mm_kernel", lambda device, dt: grouped_mm)
    looped = kernels.build(moe.moe_experts(TINY_MOE, 16, dtype, "looped"), CPU)()
    grouped = kernels.build(moe.moe_experts(TINY_MOE, 16, dtype, "grouped"), CPU)()
    assert looped[0].shape == (32, 64) and looped[1].shape == (16, 64)
    for a, b in zip(looped, grouped, strict=True):
        torch.testing.assert_close(a.float(), b.float(), atol=tol, rtol=tol)
    assert looped[0].abs().sum() > 0


def test_grouped_mm_only_where_torch_has_its_kernel():
    assert not kernels.grouped_mm_kernel(CPU, torch.bfloat16)
    assert not kernels.grouped_mm_kernel(META, torch.bfloat16)


def test_uneven_routing_is_refused():
    with pytest.raises(ValueError, match="do not split evenly over 64 experts"):
        moe.moe_experts(moe.DEEPSEEK_V2_LITE_MOE, 10, "bf16")


# --- the profile ---------------------------------------------------------------------------


def test_new_kernels_have_a_no_floor_reason_and_no_floor():
    for kernel in ("flex_decode_gqa", "flex_decode_gqa_paged", "moe_experts_grouped"):
        assert floors.NO_FLOOR_RULE[kernel]
        spec = next(s for s in BF16 if s.kernel == kernel)
        assert floors.floor_of(spec, 2) is None
