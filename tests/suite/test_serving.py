"""The serving profile: its workloads' analytic FLOPs and bytes by hand and against torch."""

import json
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from reviewkit.common.errors import UsageError
from reviewkit.suite import collectives, history, kernels, serving
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import SUITE_PROFILE_NAMES, suite_profile

META = torch.device("meta")


def _spec(pattern: str) -> suite.WorkloadSpec:
    (spec,) = suite.select(suite.workloads("serving", ["bf16"]), pattern)
    return spec


def _counted(spec: suite.WorkloadSpec) -> int:
    """FlopCounterMode's count on the meta device (shapes only: full-size cells in
    milliseconds), attention through the math backend, whose matmuls it counts (it has no
    formula for CPU's fused attention kernel; test_suite.py does the same)."""
    fn = kernels.build(spec, META)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def test_decode_step_reads_the_whole_kv_cache():
    spec = _spec("attention.llama-3-8b-decode-sdpa-gqa.b8ctx4096.bf16")
    # KV cache: 2 (K, V) x 8 seqs x 4096 tokens x 8 KV heads x 128 x 2 bytes = 134,217,728;
    # q and the output: 8 x 32 heads x 1 x 128 x 2 bytes = 65,536 each.
    assert serving.kv_cache_bytes(serving.LLAMA3_8B_TP1, 8, 4096, "bf16") == 134_217_728
    assert spec.bytes == 134_217_728 + 2 * 65_536
    # every (query, cached key) pair: 4 x 8 x 32 x 128 x 4096 = 536,870,912
    assert spec.flops == 536_870_912
    assert spec.params["causal"] is False
    assert [t.shape for t in spec.inputs] == [(8, 32, 1, 128), (8, 8, 4096, 128),
                                              (8, 8, 4096, 128)]  # fmt: skip


def test_prefill_counts_the_causal_triangle_which_flop_counter_counts_full():
    spec = _spec("attention.llama-3-8b-prefill-sdpa-gqa-causal.b1s2048.bf16")
    # 2048 x 2049 / 2 = 2,098,176 pairs x 4 x 32 heads x 128 = 34,376,515,584
    assert spec.flops == 34_376_515_584
    # FlopCounterMode counts the full 2048^2 square: 4 x 32 x 128 x 2048^2 = 68,719,476,736
    full = _counted(spec)
    assert full == 68_719_476_736
    assert spec.flops == full * 2049 // (2 * 2048)


def test_tensor_parallel_shard_of_llama_3_70b():
    # tp 8: 64 / 8 = 8 query heads and 8 / 8 = 1 KV head per rank, head dim 8192 / 64 = 128;
    # FFN 28672 / 8 = 3584 per rank.
    parts = {p: (k, n) for p, k, n in serving.LLAMA3_70B_TP8.projections()}
    assert parts == {
        "attn-qkv-tp8": (8192, (8 + 2) * 128),  # 1280
        "attn-o-tp8": (1024, 8192),
        "mlp-gate-up-tp8": (8192, 7168),
        "mlp-down-tp8": (3584, 8192),
    }
    spec = _spec("gemm.llama-3-70b-attn-qkv-tp8.b1s16384.bf16")
    assert spec.flops == 2 * 16384 * 8192 * 1280  # 343,597,383,680
    attn = _spec("attention.llama-3-70b-tp8-prefill-sdpa-gqa-causal.b1s4096.bf16")
    assert [t.shape for t in attn.inputs] == [(1, 8, 4096, 128), (1, 1, 4096, 128),
                                              (1, 1, 4096, 128)]  # fmt: skip


def test_moe_experts_looped_by_hand():
    spec = _spec("block.mixtral-8x7b-moe-experts-looped.t512.bf16")
    # 512 tokens x top-2 = 1024 rows, 128 per expert; per row 4096 x 28672 (gate, up) and
    # 14336 x 4096 (down) multiply-adds: 3 x 2 x 1024 x 4096 x 14336 = 360,777,252,864
    assert spec.matmul_flops == 360_777_252_864
    assert spec.other_flops == 4 * 1024 * 14336  # SwiGLU: exp, add, divide, multiply
    # rows in and out 2 x 1024 x 4096 x 2 bytes = 16,777,216; weights 8 x 3 x 4096 x 14336 x 2
    assert spec.bytes == 16_777_216 + 2_818_572_288
    assert spec.params["dispatch"] == "looped" and spec.params["rows_per_expert"] == 128


@pytest.mark.parametrize(
    "pattern",
    [
        "attention.llama-3-8b-decode-sdpa-gqa.b256ctx32768.bf16",
        "attention.llama-3-8b-decode-sdpa-gqa.b1ctx1024.bf16",
        "block.mixtral-8x7b-moe-experts-looped.t4096.bf16",
        "gemm.llama-3-8b-mlp-gate-up-scaled-mm.t4096.fp8",
        "gemm.llama-3-70b-tp8-mlp-gate-up-scaled-mm.t8192.fp8",
        "gemm.llama-3-8b-mlp-down.b64s1.bf16",
        "gemm.llama-3-70b-mlp-down-tp8.b1s8192.bf16",
        "conv.resnet-50-stage2-conv3x3.n256.bf16",
    ],
)
def test_matmul_flops_match_torchs_counter_on_meta(pattern):
    spec = _spec(pattern)
    assert spec.matmul_flops == _counted(spec)


def test_fp8_gemm_counts():
    spec = _spec("gemm.llama-3-8b-mlp-gate-up-scaled-mm.t4096.fp8")
    # 4096 x 4096 @ 4096 x 28672: 2 x 4096 x 4096 x 28672 = 962,072,674,304 FLOPs;
    # bytes: 1-byte operands 4096 x 4096 + 28672 x 4096, bf16 out 4096 x 28672 x 2
    assert spec.flops == 962_072_674_304
    assert spec.bytes == 16_777_216 + 117_440_512 + 234_881_024
    assert spec.params["out_dtype"] == "bf16"


def test_the_profile_lists_every_kind_once_per_dtype():
    bf16 = suite.workloads("serving", ["bf16"])
    fp16 = suite.workloads("serving", ["fp16"])
    ids = [s.id for s in suite.workloads("serving")]
    assert len(ids) == len(set(ids))
    # prefill GEMMs 2 models x 4 parts x 4 lengths = 32, prefill attention 2 x 4 = 8, decode
    # GEMMs 4 x 6 = 24, decode attention 6 x 5 = 30, flex decode 3 x 2 = 6 and paged 2, MoE
    # 2 models x 2 dispatches x 3 token counts = 12, fp8 3 (bf16 only), convs 4 x 3 = 12
    assert len(bf16) == 32 + 8 + 24 + 30 + 6 + 2 + 12 + 3 + 12 == 129
    assert len(fp16) == 126
    assert {s.dtype for s in bf16} == {"bf16", "fp8"}
    assert {s.kernel for s in bf16} == {"linear", "sdpa_gqa", "flex_decode_gqa",
                                        "flex_decode_gqa_paged", "moe_experts_looped",
                                        "moe_experts_grouped", "scaled_mm", "conv2d"}  # fmt: skip
    decode = [s for s in bf16 if s.params.get("phase") == "decode"]
    assert {(s.params["batch"], s.params["kv_len"]) for s in decode} == {
        (b, c) for b in (1, 8, 32, 64, 128, 256) for c in (1024, 4096, 8192, 16384, 32768)
    }


def test_core_profiles_keep_the_definitions_recorded_for_1_1_and_add_servings_decode_step():
    # every 1.1 definition of smoke, quick and full is unchanged; 1.4 added to quick and full
    # only the decode step (3 cells x 3 dtypes), each the serving profile's own definition; 1.5
    # added to quick only its five vector ops at 4096 tokens (5 x 3 dtypes)
    recorded = json.loads((Path(history.FOLDER) / "1.1.json").read_text())["workloads"]
    main_memory = {"norm.bert-base-layernorm.4096x768", "norm.llama-2-7b-rmsnorm.4096x4096",
                   "elementwise.bert-base-mlp-gelu.4096x3072",
                   "elementwise.llama-2-7b-residual-add.4096x4096",
                   "reduction.llama-2-7b-mlp-row-sum.4096x11008"}  # fmt: skip
    serving = {s.id: s.definition_hash() for s in suite.workloads("serving")}
    decode = {"gemm.llama-3-8b-mlp-down.b1s1", "gemm.llama-3-8b-mlp-down.b8s1",
              "attention.llama-3-8b-decode-sdpa-gqa.b1ctx4096"}  # fmt: skip
    for profile in SUITE_PROFILE_NAMES:
        now = {s.id: s.definition_hash() for s in suite.workloads(profile)}
        added = {i: h for i, h in now.items() if i not in recorded[profile]}
        assert {i: h for i, h in now.items() if i in recorded[profile]} == recorded[profile]
        if profile == "smoke":
            assert added == {}
            continue
        vector = {i: h for i, h in added.items() if i.rsplit(".", 1)[0] in main_memory}
        assert len(vector) == (15 if profile == "quick" else 0)
        added = {i: h for i, h in added.items() if i not in vector}
        assert {i.rsplit(".", 1)[0] for i in added} == decode and len(added) == 9
        assert all(serving.get(i) == h for i, h in added.items())


def test_serving_is_outside_the_thoroughness_order_and_calibrates_as_quick():
    p = suite_profile("serving")
    assert "serving" not in SUITE_PROFILE_NAMES
    assert p.calibrate_as == "quick" and p.confirm_above_s == 1800.0
    with pytest.raises(UsageError, match="no distributed part"):
        collectives.distributed_specs("serving", ("bf16",), 2)
    with pytest.raises(UsageError, match="no end-to-end model"):
        suite.default_model("serving", "bf16")
