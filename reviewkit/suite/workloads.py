"""The fixed, versioned benchmark suite: workload definitions with analytic FLOPs and minimum bytes.

Nothing here imports torch: a definition is pure data, so analysis, reviews and tests can
reason about the suite on any machine. `reviewkit.kernels` turns a definition into a callable.

Counting conventions (each is tested against torch's FlopCounterMode where it counts the op):
- A multiply-add is 2 FLOPs. Matmul-class FLOPs (`matmul_flops`) are what FlopCounterMode
  counts (mm, addmm, bmm, convolution, scaled_dot_product_attention).
- Causal attention at kernel level counts only the S(S+1)/2 query-key pairs a causal kernel
  must compute (FlashAttention-2's convention), so it is FlopCounterMode's full-square count
  times (S+1)/(2S). The end-to-end model instead follows PaLM appendix B and counts full
  attention, so its MFU is comparable with published figures.
- Vector ops count the arithmetic of their reference formula per element (constants below);
  a transcendental counts as one FLOP. Per-row work (a reciprocal square root) is ignored.
- Minimum bytes: every input read once, every output written once, intermediates of a
  composite block kept on chip. An embedding lookup reads only the rows it gathers, not the
  whole table (reading the table is not required to produce the output).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from reviewkit.common.errors import UsageError
from reviewkit.common.hashing import sha256_json
from reviewkit.suite import serving
from reviewkit.suite.definitions import (  # noqa: F401 (re-exported: the suite's vocabulary)
    BERT_BASE,
    ELEMENT_BYTES,
    GPT2_SMALL,
    KERNEL_REVISION,
    LLAMA2_7B,
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
from reviewkit.suite.profiles import ALL_PROFILE_NAMES, suite_profile

SUITE_NAME = "reviewkit-core"
# A changed definition is a new SUITE_VERSION: `python -m reviewkit.suite.history` records it.
# A kernel whose implementation changes bumps definitions.KERNEL_REVISION.
# 1.1: the model at three (batch, seq) cells; 1.2: the serving profile; 1.3: serving gains
# FlexAttention decode (contiguous and paged KV), grouped MoE experts and DeepSeek-V2-Lite's MoE;
# 1.4: quick and full gain a decode step (DECODE_GEMM_BATCHES, DECODE_ATTENTION_CELLS); 1.5:
# quick measures its vector ops at a second token count too (ProfileShapes.main_memory_tokens)
SUITE_VERSION = "1.5"
# A decode step in quick and full (not smoke: its weights alone are 117 MB), at shapes of the
# serving profile (the same ids): Llama-3-8B's MLP down-projection at batch 1 (1 FLOP/B: the
# weights streamed once, memory-bound) and 8 (just past a CPU's bf16 ridge), and its GQA decode
# attention over a 4k-token cache at batch 1. Without them every GEMM a quick run measured was
# compute-bound and every attention call a full-sequence `sdpa`, so a projected decode step
# came from kernels that were not its own: on the 2-core EPYC its GEMMs 2.3-3.2x fast and its
# attention 11-18x (docs/benchmarks.md, "Projection error").
DECODE_GEMM_BATCHES = (1, 8)
DECODE_ATTENTION_CELLS = ((1, 4096),)  # (batch, KV-cache tokens)

DTYPES = ("fp32", "bf16", "fp16")
# The dtypes a device profile can hold a compute ceiling for: the suite's, and the integer and
# fp8 GEMMs a quantized mapping runs on (a ceiling belongs to its dtype: an int8 kernel divided
# by the fp32 peak reads above 100%). Calibrated on request (`calibrate --dtype int8,fp8`).
CEILING_DTYPES = (*DTYPES, "int8", "fp8")

LAYER_TYPES = (
    "gemm",
    "attention",
    "conv",
    "norm",
    "softmax",
    "elementwise",
    "embedding",
    "reduction",
    "data-movement",
    "collective",
    "block",
    "model",
)

# Arithmetic per element in each op's reference formula.
LAYER_NORM_FLOPS_PER_ELEMENT = (
    8  # mean (add), variance (sub, mul, add), normalise (sub, mul), affine (mul, add)
)
RMS_NORM_FLOPS_PER_ELEMENT = 4  # square, add, scale by rsqrt, scale by weight
SOFTMAX_FLOPS_PER_ELEMENT = 5  # max, subtract, exp, sum, divide
GELU_FLOPS_PER_ELEMENT = 5  # 0.5 * x * (1 + erf(x / sqrt(2))): div, erf, add, mul, mul
ADD_FLOPS_PER_ELEMENT = 1
SUM_FLOPS_PER_ELEMENT = 1


SMOKE_HIDDEN = 64  # small enough that the whole smoke profile runs in seconds on a laptop
SMOKE_HEADS = 4


def smoke_dims(dims: ModelDims) -> ModelDims:
    """A narrow copy for the smoke profile, keeping the FFN ratio; its name says it is scaled."""
    ffn = round(dims.ffn * SMOKE_HIDDEN / dims.hidden / 8) * 8
    return ModelDims(
        f"{dims.name} (scaled to hidden {SMOKE_HIDDEN} for smoke)",
        SMOKE_HIDDEN,
        SMOKE_HEADS,
        ffn,
        dims.vocab // 64,
    )


# --- one builder per kernel: shapes in, definition with FLOPs and bytes out --------------


def bmm(model: ModelDims, batch: int, seq: int, dtype: str) -> WorkloadSpec:
    b, d = batch * model.heads, model.head_dim
    q, kt = TensorSpec((b, seq, d), dtype), TensorSpec((b, d, seq), dtype)
    return WorkloadSpec(
        id=make_workload_id(
            "gemm", f"{id_slug(model.name)}-attn-scores-bmm", f"b{batch}s{seq}", dtype
        ),
        layer_type="gemm",
        kernel="bmm",
        source_model=model.name,
        dtype=dtype,
        inputs=(q, kt),
        params={"batch": batch, "seq": seq, "heads": model.heads, "head_dim": d},
        matmul_flops=2 * b * seq * d * seq,
        bytes=q.nbytes + kt.nbytes + b * seq * seq * ELEMENT_BYTES[dtype],
    )


def sdpa(model: ModelDims, batch: int, seq: int, causal: bool, dtype: str) -> WorkloadSpec:
    h, d = model.heads, model.head_dim
    qkv = TensorSpec((batch, h, seq, d), dtype)
    tag = "causal" if causal else "full"
    return WorkloadSpec(
        id=make_workload_id(
            "attention", f"{id_slug(model.name)}-sdpa-{tag}", f"b{batch}s{seq}", dtype
        ),
        layer_type="attention",
        kernel="sdpa",
        source_model=model.name,
        dtype=dtype,
        inputs=(qkv, qkv, qkv),
        params={"batch": batch, "seq": seq, "heads": h, "head_dim": d, "causal": causal},
        # QK^T and PV: 2 FLOPs per multiply-add, d per pair, two matmuls.
        matmul_flops=4 * batch * h * d * attention_pairs(seq, causal),
        bytes=4 * qkv.nbytes,
    )


def _vector_op(
    layer_type: str,
    kernel: str,
    name: str,
    model: ModelDims,
    shape: tuple[int, ...],
    dtype: str,
    flops_per_element: int,
    extra_inputs: tuple[TensorSpec, ...] = (),
    out_numel: int | None = None,
    params: dict | None = None,
) -> WorkloadSpec:
    x = TensorSpec(shape, dtype)
    out_numel = x.numel if out_numel is None else out_numel
    inputs = (x, *extra_inputs)
    return WorkloadSpec(
        id=make_workload_id(
            layer_type, f"{id_slug(model.name)}-{name}", "x".join(map(str, shape)), dtype
        ),
        layer_type=layer_type,
        kernel=kernel,
        source_model=model.name,
        dtype=dtype,
        inputs=inputs,
        params={"shape": list(shape), **(params or {})},
        other_flops=flops_per_element * x.numel,
        bytes=sum(t.nbytes for t in inputs) + out_numel * ELEMENT_BYTES[dtype],
    )


def layer_norm(model: ModelDims, tokens: int, dtype: str) -> WorkloadSpec:
    d = model.hidden
    affine = (TensorSpec((d,), dtype), TensorSpec((d,), dtype))
    return _vector_op("norm", "layer_norm", "layernorm", model, (tokens, d), dtype,
                      LAYER_NORM_FLOPS_PER_ELEMENT, extra_inputs=affine)  # fmt: skip


def rms_norm(model: ModelDims, tokens: int, dtype: str) -> WorkloadSpec:
    d = model.hidden
    weight = (TensorSpec((d,), dtype),)
    return _vector_op("norm", "rms_norm", "rmsnorm", model, (tokens, d), dtype,
                      RMS_NORM_FLOPS_PER_ELEMENT, extra_inputs=weight)  # fmt: skip


def softmax(model: ModelDims, batch: int, seq: int, dtype: str) -> WorkloadSpec:
    shape = (batch, model.heads, seq, seq)
    return _vector_op(
        "softmax", "softmax", "attn-softmax", model, shape, dtype, SOFTMAX_FLOPS_PER_ELEMENT
    )


def gelu(model: ModelDims, tokens: int, dtype: str) -> WorkloadSpec:
    shape = (tokens, model.ffn)
    return _vector_op(
        "elementwise", "gelu", "mlp-gelu", model, shape, dtype, GELU_FLOPS_PER_ELEMENT
    )


def residual_add(model: ModelDims, tokens: int, dtype: str) -> WorkloadSpec:
    shape = (tokens, model.hidden)
    return _vector_op("elementwise", "add", "residual-add", model, shape, dtype,
                      ADD_FLOPS_PER_ELEMENT, extra_inputs=(TensorSpec(shape, dtype),))  # fmt: skip


def row_sum(model: ModelDims, tokens: int, dtype: str) -> WorkloadSpec:
    shape = (tokens, model.ffn)
    return _vector_op(
        "reduction",
        "sum",
        "mlp-row-sum",
        model,
        shape,
        dtype,
        SUM_FLOPS_PER_ELEMENT,
        out_numel=tokens,
        params={"dim": -1},
    )


def transpose_copy(model: ModelDims, batch: int, seq: int, dtype: str) -> WorkloadSpec:
    shape = (batch, seq, model.heads, model.head_dim)
    return _vector_op(
        "data-movement",
        "transpose_copy",
        "heads-transpose",
        model,
        shape,
        dtype,
        0,
        params={"dims": [1, 2]},
    )


def embedding(model: ModelDims, batch: int, seq: int, dtype: str) -> WorkloadSpec:
    ids = TensorSpec((batch, seq), "int64")
    table = TensorSpec((model.vocab, model.hidden), dtype)
    gathered = batch * seq * model.hidden * ELEMENT_BYTES[dtype]
    return WorkloadSpec(
        id=make_workload_id(
            "embedding", f"{id_slug(model.name)}-token-embedding", f"b{batch}s{seq}", dtype
        ),
        layer_type="embedding",
        kernel="embedding",
        source_model=model.name,
        dtype=dtype,
        inputs=(ids, table),
        params={"batch": batch, "seq": seq, "vocab": model.vocab, "hidden": model.hidden},
        bytes=ids.nbytes + gathered + gathered,  # ids + rows read + output written
    )


def mlp_block(model: ModelDims, tokens: int, dtype: str) -> WorkloadSpec:
    """GPT-2's MLP: Linear(d, 4d) -> GELU -> Linear(4d, d), both with bias, from torch.nn."""
    d, f, e = model.hidden, model.ffn, ELEMENT_BYTES[dtype]
    x = TensorSpec((tokens, d), dtype)
    weights_bytes = (d * f + f + f * d + d) * e
    return WorkloadSpec(
        id=make_workload_id("block", f"{id_slug(model.name)}-mlp-block", f"t{tokens}", dtype),
        layer_type="block",
        kernel="mlp_block",
        source_model=model.name,
        dtype=dtype,
        inputs=(x,),
        params={"tokens": tokens, "hidden": d, "ffn": f},
        matmul_flops=2 * tokens * d * f * 2,
        other_flops=tokens * (f + d) + GELU_FLOPS_PER_ELEMENT * tokens * f,  # biases, GELU
        bytes=x.nbytes + weights_bytes + x.nbytes,
    )


def _encoder_layer_counts(
    model: ModelDims, batch: int, seq: int, causal: bool
) -> tuple[int, int, int]:
    """FLOPs and weight bytes of one torch.nn.TransformerEncoderLayer (post- or pre-norm)."""
    d, f, h = model.hidden, model.ffn, model.heads
    m = batch * seq
    pairs = attention_pairs(seq, causal)
    matmul = 2 * m * d * 3 * d + 4 * batch * h * model.head_dim * pairs + 2 * m * d * d
    matmul += 2 * m * d * f * 2
    other = (
        2 * LAYER_NORM_FLOPS_PER_ELEMENT * m * d
        + GELU_FLOPS_PER_ELEMENT * m * f
        + 2 * ADD_FLOPS_PER_ELEMENT * m * d  # two residual adds
        + SOFTMAX_FLOPS_PER_ELEMENT * batch * h * pairs
        + m * (3 * d + d + f + d)  # biases of in-proj, out-proj and both FFN linears
    )
    weights = (3 * d * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d) + 4 * d
    return matmul, other, weights


def encoder_layer(model: ModelDims, batch: int, seq: int, dtype: str) -> WorkloadSpec:
    """BERT-base's layer as torch.nn.TransformerEncoderLayer (post-norm, GELU, no mask)."""
    e = ELEMENT_BYTES[dtype]
    matmul, other, weights = _encoder_layer_counts(model, batch, seq, causal=False)
    x = TensorSpec((batch, seq, model.hidden), dtype)
    return WorkloadSpec(
        id=make_workload_id(
            "block", f"{id_slug(model.name)}-encoder-layer", f"b{batch}s{seq}", dtype
        ),
        layer_type="block",
        kernel="encoder_layer",
        source_model=model.name,
        dtype=dtype,
        inputs=(x,),
        params={
            "batch": batch,
            "seq": seq,
            "hidden": model.hidden,
            "heads": model.heads,
            "ffn": model.ffn,
        },
        matmul_flops=matmul,
        other_flops=other,
        bytes=2 * x.nbytes + weights * e,
    )


def gpt_decoder(model: ModelDims, layers: int, batch: int, seq: int, dtype: str) -> WorkloadSpec:
    """A GPT-style decoder: token + position embeddings, pre-norm causal layers, LM head.

    FLOPs follow PaLM appendix B (full attention counted, as published MFU figures do):
    forward = 2 * N_matmul * tokens + 4 * L * d * S per token.
    """
    d, e, m = model.hidden, ELEMENT_BYTES[dtype], batch * seq
    matmul, other, weights = _encoder_layer_counts(model, batch, seq, causal=False)
    ids = TensorSpec((batch, seq), "int64")
    lm_head = 2 * m * d * model.vocab
    final_norm = LAYER_NORM_FLOPS_PER_ELEMENT * m * d
    embed_add = m * d
    weight_bytes = (layers * weights + 2 * d + d * model.vocab) * e
    gathered = 2 * m * d * e  # token rows + position rows
    return WorkloadSpec(
        id=make_workload_id(
            "model", f"{id_slug(model.name)}-decoder-{layers}l", f"b{batch}s{seq}", dtype
        ),
        layer_type="model",
        kernel="gpt_decoder",
        source_model=f"{model.name} ({layers} layers)",
        dtype=dtype,
        inputs=(ids,),
        params={
            "batch": batch,
            "seq": seq,
            "layers": layers,
            "hidden": d,
            "heads": model.heads,
            "ffn": model.ffn,
            "vocab": model.vocab,
            "causal": True,
        },
        matmul_flops=layers * matmul + lm_head,
        other_flops=layers * other + final_norm + embed_add,
        bytes=ids.nbytes + gathered + weight_bytes + m * model.vocab * e,
    )


# --- the workloads of a suite profile ------------------------------------------------------


def _profile_workloads(profile: str, dtype: str) -> Iterable[WorkloadSpec]:
    if suite_profile(profile).workload_set == "serving":
        yield from serving.serving_workloads(dtype)
        return
    p = suite_profile(profile).shapes
    scale = smoke_dims if p.smoke else (lambda dims: dims)
    bert, gpt2, llama2, llama3 = map(scale, (BERT_BASE, GPT2_SMALL, LLAMA2_7B, LLAMA3_8B))
    t = p.tokens
    # gemm: the FFN up-projection swept over shapes; other projections at one shape.
    for b in p.batches:
        for s in p.seqs:
            yield linear(bert, "ffn-up", b, s, bert.hidden, bert.ffn, dtype)
    s_mid = p.seqs[-1] if len(p.seqs) < 3 else p.seqs[1]
    yield linear(gpt2, "attn-qkv", 1, s_mid, gpt2.hidden, 3 * gpt2.hidden, dtype)
    yield linear(llama2, "mlp-up", 1, p.seqs[0], llama2.hidden, llama2.ffn, dtype)
    yield linear(llama3, "attn-q", 1, p.seqs[0], llama3.hidden, llama3.hidden, dtype)
    yield bmm(bert, 1, s_mid, dtype)
    if not p.smoke:
        k, n = next((k, n) for part, k, n in serving.LLAMA3_8B_TP1.projections()
                    if part == "mlp-down")  # fmt: skip
        for b in DECODE_GEMM_BATCHES:
            yield linear(llama3, "mlp-down", b, 1, k, n, dtype)
    # attention swept over sequence length, batch, and the causal mask.
    for b in p.batches:
        for s in p.seqs:
            for causal in (False, True):
                yield sdpa(gpt2, b, s, causal, dtype)
    yield sdpa(llama2, 1, s_mid, True, dtype)
    if not p.smoke:
        for b, ctx in DECODE_ATTENTION_CELLS:
            yield serving.gqa_attention(serving.LLAMA3_8B_TP1, "decode", b, 1, ctx, dtype)
    for stage in p.conv_stages:
        channels, size = RESNET50_STAGES[stage]
        if p.smoke:
            channels, size = channels // 8, size
        yield conv2d(stage, 1, channels, size, 3, dtype)
    yield layer_norm(bert, t, dtype)
    yield rms_norm(llama2, t, dtype)
    yield softmax(gpt2, 1, s_mid, dtype)
    yield gelu(bert, t, dtype)
    yield residual_add(llama2, t, dtype)
    yield embedding(gpt2, 1, t, dtype)
    yield row_sum(llama2, t, dtype)
    yield transpose_copy(gpt2, 1, t, dtype)
    if p.main_memory_tokens:
        yield layer_norm(bert, p.main_memory_tokens, dtype)
        yield rms_norm(llama2, p.main_memory_tokens, dtype)
        yield gelu(bert, p.main_memory_tokens, dtype)
        yield residual_add(llama2, p.main_memory_tokens, dtype)
        yield row_sum(llama2, p.main_memory_tokens, dtype)
    yield mlp_block(gpt2, t, dtype)
    yield encoder_layer(bert, 1, p.seqs[0], dtype)
    for batch, seq in p.model_shapes:
        yield gpt_decoder(gpt2, p.model_layers, batch, seq, dtype)


def default_model(profile: str, dtype: str) -> WorkloadSpec:
    """The profile's primary end-to-end model cell: what sweeps and soaks run by default."""
    model = next((s for s in _profile_workloads(profile, dtype) if s.layer_type == "model"), None)
    if model is None:
        raise UsageError(f"--profile {profile} has no end-to-end model; use smoke, quick or full")
    return model


def workloads(profile: str, dtypes: Iterable[str] = DTYPES) -> list[WorkloadSpec]:
    """The profile's workloads for the given dtypes, in suite order."""
    return [spec for dtype in dtypes for spec in _profile_workloads(profile, dtype)]


def select(specs: Iterable[WorkloadSpec], pattern: str | None) -> list[WorkloadSpec]:
    """Workloads whose id matches a shell-style glob (comma-separated globs allowed)."""
    specs = list(specs)
    if not pattern:
        return specs
    globs = [g.strip() for g in pattern.split(",") if g.strip()]
    return [s for s in specs if any(fnmatch.fnmatchcase(s.id, g) for g in globs)]


@dataclass(frozen=True)
class SuiteIdentity:
    name: str
    version: str
    hash: str

    def to_json(self) -> dict:
        return {"name": self.name, "version": self.version, "hash": self.hash}


def suite_identity() -> SuiteIdentity:
    """Name, version and a hash over every definition of every profile and dtype."""
    definitions = {
        spec.id: spec.definition()
        for profile in ALL_PROFILE_NAMES
        for spec in workloads(profile, DTYPES)
    }
    digest = sha256_json({"name": SUITE_NAME, "version": SUITE_VERSION, "defs": definitions})
    return SuiteIdentity(SUITE_NAME, SUITE_VERSION, digest[:16])


def plan_specs(profile: str, dtypes: Iterable[str], only: str | None) -> list[WorkloadSpec]:
    """The workloads a request selects; UsageError names the valid choices on bad input."""
    dtypes = tuple(dtypes)
    suite_profile(profile)
    bad = [d for d in dtypes if d not in DTYPES]
    if bad or not dtypes:
        raise UsageError(
            f"--dtype {','.join(bad) or '(empty)'} is not supported; choose from "
            f"{', '.join(DTYPES)} (comma-separated)"
        )
    specs = select(workloads(profile, dtypes), only)
    if not specs:
        raise UsageError(
            f"--only {only!r} matches no workload of profile {profile} with dtypes "
            f"{','.join(dtypes)}; list the ids with `reviewkit suite --profile {profile}`"
        )
    return specs
