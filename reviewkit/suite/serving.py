"""The serving profile's workloads: prefill, KV-cache decode, MoE experts, fp8 GEMMs, big convs.

Torch-free, like suite/workloads.py, whose counting conventions hold here too; it builds on
suite/definitions.py, below both. The shapes come
from public configurations of models served on accelerators:
- Llama-3-8B (Meta's config.json: hidden 4096, 32 query heads, 8 KV heads, head dim 128, FFN
  14336), unsharded (tp 1, one GPU holds it);
- Llama-3-70B (hidden 8192, 64 query heads, 8 KV heads, FFN 28672) as one rank of tensor
  parallelism 8 holds it (Megatron sharding: the QKV and gate/up projections split by columns,
  the output and down projections by rows, so each rank has 8 query heads and 1 KV head);
- Mixtral-8x7B (hidden 4096, FFN 14336, 8 experts, top-2 routing) and DeepSeek-V2-Lite (hidden
  2048, expert FFN 1408, 64 routed experts, top-6, 2 shared experts): their experts looped and
  grouped, suite/moe.py;
- ResNet-50's stage convolutions at batch 32-256 (suite/workloads.py RESNET50_STAGES).

Attention is grouped-query attention through `F.scaled_dot_product_attention(..., enable_gqa=
True)` at torch's default backend dispatch (flash, cuDNN or memory-efficient on a GPU, the math
path where none takes the shape). Causal prefill counts the S(S+1)/2 query-key pairs a causal
kernel computes (`attention_pairs`); FlopCounterMode counts the full square. A decode step is
one query per sequence against `context` cached keys, every pair computed (no mask). Its bytes
are the point: the whole KV cache is read each step, 2 x batch x context x kv_heads x head_dim
x element bytes, next to which the query and output are noise.

The same decode step also runs through FlexAttention (`flex_attention(..., enable_gqa=True)`,
compiled: suite/kernels_flex.py) on a subgrid of the decode cells, with the SDPA decode's
FLOPs and bytes, and at two cells over a paged KV cache (torch's experimental PagedAttention:
128-token pages, shuffled through one pool).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from reviewkit.suite.definitions import (
    ELEMENT_BYTES,
    LLAMA3_8B,
    RESNET50_STAGES,
    ModelDims,
    TensorSpec,
    WorkloadSpec,
    attention_pairs,
    conv2d,
    id_slug,
    linear,
    make_workload_id,
)
from reviewkit.suite.moe import DEEPSEEK_V2_LITE_MOE, MIXTRAL_8X7B_MOE, moe_experts

FP8 = "fp8"  # e4m3 operands (torch.float8_e4m3fn), bf16 output: what serving stacks run
FP8_OUT_DTYPE = "bf16"

# Shapes of the profile. Prompt lengths a serving deployment prefills (2k to 16k tokens).
PREFILL_TOKENS = (2048, 4096, 8192, 16384)
# Concurrent sequences of a decode step, from one user to a saturated server's batch.
DECODE_BATCHES = (1, 8, 32, 64, 128, 256)
# Tokens already in each sequence's KV cache when it decodes (1k to 32k).
DECODE_CONTEXTS = (1024, 4096, 8192, 16384, 32768)
# Tokens through the MoE layer at once: a decode batch, a short prompt, a long prefill.
MOE_TOKENS = (64, 512, 4096)
# The decode cells FlexAttention runs too (a subgrid of the SDPA decode's, so a GPU compares
# the two at the same cells), and the cells of its paged layout.
FLEX_DECODE_BATCHES = (8, 64, 256)
FLEX_DECODE_CONTEXTS = (4096, 32768)
PAGED_DECODE_CELLS = ((8, 4096), (64, 32768))
PAGE_SIZE = 128  # tokens per KV page: flex's default sparse block, one page a block-mask block
# How the flex kernels run: compiled in the builder whatever the run's compile_mode
# (suite/kernels_flex.py says why); in the definition, so every record of them carries it.
FLEX_COMPILED = "torch.compile(flex_attention, dynamic=False) in the builder"
CONV_BATCHES = (32, 128, 256)


@dataclass(frozen=True)
class ServedModel:
    """A transformer as one tensor-parallel rank holds it: heads and FFN divided by `tp`."""

    dims: ModelDims
    kv_heads: int
    tp: int = 1

    @property
    def head_dim(self) -> int:
        return self.dims.hidden // self.dims.heads

    @property
    def q_heads_per_rank(self) -> int:
        return self.dims.heads // self.tp

    @property
    def kv_heads_per_rank(self) -> int:
        return max(1, self.kv_heads // self.tp)  # KV heads are replicated once tp > kv_heads

    @property
    def ffn_per_rank(self) -> int:
        return self.dims.ffn // self.tp

    @property
    def tag(self) -> str:
        return id_slug(self.dims.name) + (f"-tp{self.tp}" if self.tp > 1 else "")

    def projections(self) -> tuple[tuple[str, int, int], ...]:
        """(part, in features k, out features n) of each GEMM of one layer on one rank."""
        h, d = self.dims.hidden, self.head_dim
        qkv = (self.q_heads_per_rank + 2 * self.kv_heads_per_rank) * d
        f = self.ffn_per_rank
        shard = f"-tp{self.tp}" if self.tp > 1 else ""
        return (
            (f"attn-qkv{shard}", h, qkv),  # column-parallel: fused Q, K, V of this rank's heads
            (f"attn-o{shard}", self.q_heads_per_rank * d, h),  # row-parallel
            (f"mlp-gate-up{shard}", h, 2 * f),  # column-parallel, gate and up fused
            (f"mlp-down{shard}", f, h),  # row-parallel
        )


LLAMA3_70B = ModelDims("Llama-3-70B", 8192, 64, 28672, 128256)
LLAMA3_8B_TP1 = ServedModel(LLAMA3_8B, kv_heads=8, tp=1)
LLAMA3_70B_TP8 = ServedModel(LLAMA3_70B, kv_heads=8, tp=8)


def gqa_attention(
    model: ServedModel, phase: str, batch: int, q_len: int, kv_len: int, dtype: str
) -> WorkloadSpec:
    """Grouped-query attention on one rank: causal prefill (q_len = kv_len) or one decode step
    (q_len 1 against a KV cache of kv_len tokens, no mask)."""
    hq, hkv, d = model.q_heads_per_rank, model.kv_heads_per_rank, model.head_dim
    causal = phase == "prefill"
    q = TensorSpec((batch, hq, q_len, d), dtype)
    kv = TensorSpec((batch, hkv, kv_len, d), dtype)
    pairs = attention_pairs(q_len, True) if causal else q_len * kv_len
    shape_tag = f"b{batch}s{q_len}" if causal else f"b{batch}ctx{kv_len}"
    name = f"{model.tag}-{phase}-sdpa-gqa" + ("-causal" if causal else "")
    return WorkloadSpec(
        id=make_workload_id("attention", name, shape_tag, dtype),
        layer_type="attention",
        kernel="sdpa_gqa",
        source_model=f"{model.dims.name} (tp {model.tp}: {hq} query / {hkv} KV heads per rank)",
        dtype=dtype,
        inputs=(q, kv, kv),
        params={"phase": phase, "batch": batch, "q_len": q_len, "kv_len": kv_len,
                "q_heads": hq, "kv_heads": hkv, "head_dim": d, "causal": causal,
                "tp": model.tp},
        # QK^T and PV: 2 FLOPs per multiply-add, d per query-key pair, two matmuls.
        matmul_flops=4 * batch * hq * d * pairs,
        # q read, K and V (the KV cache when decoding) read, the output (q's shape) written
        bytes=2 * q.nbytes + 2 * kv.nbytes,
    )


def kv_cache_bytes(model: ServedModel, batch: int, context: int, dtype: str) -> int:
    """The KV cache one decode step reads: keys and values of every cached token."""
    return 2 * batch * context * model.kv_heads_per_rank * model.head_dim * ELEMENT_BYTES[dtype]


def flex_decode(
    model: ServedModel, batch: int, context: int, dtype: str, paged: bool = False
) -> WorkloadSpec:
    """One decode step through FlexAttention (no score_mod, no mask; GQA): the same query, KV
    cache, FLOPs and bytes as the SDPA decode at this cell. Paged, the cache is one pool of
    128-token pages, (1, KV heads, batch x context, head dim), each sequence's pages shuffled
    through it (a long-running server's fragmented pool) and found through a page table; its
    bytes are the contiguous cache's (the page indices, 4 bytes per page, are not counted)."""
    sdpa = gqa_attention(model, "decode", batch, 1, context, dtype)
    q, kv, _ = sdpa.inputs
    params = {**sdpa.params, "compiled": FLEX_COMPILED}
    name = f"{model.tag}-decode-flex-gqa"
    if paged:
        kv = TensorSpec((1, kv.shape[1], batch * context, kv.shape[3]), dtype)  # the pool
        params |= {"page_size": PAGE_SIZE, "pages": "shuffled"}
        name += f"-paged{PAGE_SIZE}"
    return dataclasses.replace(
        sdpa,
        id=make_workload_id("attention", name, f"b{batch}ctx{context}", dtype),
        kernel="flex_decode_gqa_paged" if paged else "flex_decode_gqa",
        inputs=(q, kv, kv),
        params=params,
    )


def fp8_gemm(model: ServedModel, part: str, tokens: int, k: int, n: int) -> WorkloadSpec:
    """One projection as an fp8 GEMM: torch._scaled_mm of e4m3 activations and weights with
    per-tensor scales, bf16 out. Its ceiling is the device's fp8 one; a device without fp8
    units (a CPU, a GPU before compute capability 8.9) emulates it, and its run says so."""
    x, w = TensorSpec((tokens, k), FP8), TensorSpec((n, k), FP8)
    return WorkloadSpec(
        id=make_workload_id("gemm", f"{model.tag}-{part}-scaled-mm", f"t{tokens}", FP8),
        layer_type="gemm",
        kernel="scaled_mm",
        source_model=f"{model.dims.name} (tp {model.tp})",
        dtype=FP8,
        inputs=(x, w),
        params={"m": tokens, "k": k, "n": n, "part": part, "out_dtype": FP8_OUT_DTYPE,
                "scaling": "per-tensor"},
        matmul_flops=2 * tokens * k * n,
        bytes=x.nbytes + w.nbytes + tokens * n * ELEMENT_BYTES[FP8_OUT_DTYPE],
    )


def serving_workloads(dtype: str) -> Iterable[WorkloadSpec]:
    """The serving profile's workloads of one dtype, in suite order (the fp8 GEMMs come with
    bf16, their output dtype, once)."""
    models = (LLAMA3_8B_TP1, LLAMA3_70B_TP8)
    # prefill: every projection of a layer at each prompt length (batch 1: one prompt)
    for model in models:
        for part, k, n in model.projections():
            for s in PREFILL_TOKENS:
                yield linear(model.dims, part, 1, s, k, n, dtype)
    for model in models:
        for s in PREFILL_TOKENS:
            yield gqa_attention(model, "prefill", 1, s, s, dtype)
    # decode: one token per sequence through the 8B's projections, and against its KV cache
    for part, k, n in LLAMA3_8B_TP1.projections():
        for b in DECODE_BATCHES:
            yield linear(LLAMA3_8B, part, b, 1, k, n, dtype)
    for b in DECODE_BATCHES:
        for ctx in DECODE_CONTEXTS:
            yield gqa_attention(LLAMA3_8B_TP1, "decode", b, 1, ctx, dtype)
    for b in FLEX_DECODE_BATCHES:
        for ctx in FLEX_DECODE_CONTEXTS:
            yield flex_decode(LLAMA3_8B_TP1, b, ctx, dtype)
    for b, ctx in PAGED_DECODE_CELLS:
        yield flex_decode(LLAMA3_8B_TP1, b, ctx, dtype, paged=True)
    for config in (MIXTRAL_8X7B_MOE, DEEPSEEK_V2_LITE_MOE):
        for dispatch in ("looped", "grouped"):
            for t in MOE_TOKENS:
                yield moe_experts(config, t, dtype, dispatch)
    if dtype == FP8_OUT_DTYPE:
        parts = {p: (k, n) for p, k, n in LLAMA3_8B_TP1.projections()}
        yield fp8_gemm(LLAMA3_8B_TP1, "mlp-gate-up", 4096, *parts["mlp-gate-up"])
        yield fp8_gemm(LLAMA3_8B_TP1, "mlp-down", 4096, *parts["mlp-down"])
        parts70 = {p: (k, n) for p, k, n in LLAMA3_70B_TP8.projections()}
        yield fp8_gemm(LLAMA3_70B_TP8, "mlp-gate-up", 8192, *parts70["mlp-gate-up-tp8"])
    for stage, (channels, size) in RESNET50_STAGES.items():
        for b in CONV_BATCHES:
            yield conv2d(stage, b, channels, size, 3, dtype)
