"""The serving profile's MoE experts: Mixtral-8x7B and DeepSeek-V2-Lite, looped and grouped.

Torch-free, like suite/serving.py, which lists these in its profile. Routing is even: each of
the tokens x top-k assignments lands on the experts in turn, so every expert gets
tokens x top_k / experts rows; the router and the gather/scatter of tokens are outside the
workload (its input is the tokens already sorted by expert). Two dispatches of the same work:
- looped: one expert's SwiGLU FFN (gate/up GEMM, SiLU x up, down GEMM) after another;
- grouped: each GEMM for all experts in one call. Under even routing every group has the same
  rows, so it is `torch.bmm` over an (experts, rows, k) view, exactly a grouped GEMM; on a CUDA
  device where torch has a grouped-GEMM kernel (`torch._grouped_mm`: compute capability 9.0
  or 10.0, bf16) the builder calls that instead, on the flat rows with per-expert offsets as a
  served MoE does (elsewhere `_grouped_mm`'s own fallback is bmm for 3-D operands and a loop
  of mms with a host sync per group for the offsets form, so bmm is what it would run). The
  op ran is in the run's op profile (aten::_grouped_mm or aten::bmm).
FLOPs and bytes are the same for both dispatches: every expert's weights read once.
"""

from __future__ import annotations

from dataclasses import dataclass

from reviewkit.suite.definitions import TensorSpec, WorkloadSpec, id_slug, make_workload_id

# SwiGLU's activation per element of the FFN width: silu(a) = a / (1 + exp(-a)) is an exp, an
# add and a divide (a transcendental counts as one FLOP), then one multiply by the up half.
SWIGLU_FLOPS_PER_ELEMENT = 4
DISPATCHES = ("looped", "grouped")


@dataclass(frozen=True)
class MoEConfig:
    """One MoE layer's routed experts (and shared experts, run on every token)."""

    name: str
    hidden: int
    ffn: int  # each routed expert's intermediate width
    experts: int
    top_k: int
    shared_experts: int = 0  # each of width `ffn`, fused into one SwiGLU of shared x ffn

    @property
    def shared_ffn(self) -> int:
        return self.shared_experts * self.ffn


# Mixtral-8x7B's config.json: hidden 4096, intermediate 14336, 8 local experts, top-2.
MIXTRAL_8X7B_MOE = MoEConfig("Mixtral-8x7B", 4096, 14336, 8, 2)
# DeepSeek-V2-Lite's config.json (huggingface.co/deepseek-ai/DeepSeek-V2-Lite; the same numbers
# in deepseek-ai/DeepSeek-V3's inference/configs/config_16B.json): hidden_size 2048,
# moe_intermediate_size 1408, n_routed_experts 64, num_experts_per_tok 6, n_shared_experts 2.
# Its modeling code runs the shared experts as one MLP of width 2 x 1408 over every token.
DEEPSEEK_V2_LITE_MOE = MoEConfig("DeepSeek-V2-Lite", 2048, 1408, 64, 6, shared_experts=2)


def moe_experts(
    config: MoEConfig, tokens: int, dtype: str, dispatch: str = "looped"
) -> WorkloadSpec:
    """One MoE layer's experts at `tokens` tokens: the routed experts' SwiGLU FFNs over the
    tokens routed to each, and the shared experts' SwiGLU over every token (where the model
    has them: their own GEMMs, the same in both dispatches)."""
    if dispatch not in DISPATCHES:
        raise ValueError(f"dispatch {dispatch!r}: choose from {DISPATCHES}")
    h, f, e, k = config.hidden, config.ffn, config.experts, config.top_k
    rows = tokens * k  # token-expert assignments, sorted by expert
    if rows % e:
        raise ValueError(f"{rows} assignments do not split evenly over {e} experts")
    x = TensorSpec((rows, h), dtype)
    inputs = [x, TensorSpec((e, 2 * f, h), dtype), TensorSpec((e, h, f), dtype)]
    # per assignment: h x 2f (gate and up) and f x h (down) multiply-adds
    matmul = 2 * rows * h * 2 * f + 2 * rows * f * h
    other = SWIGLU_FLOPS_PER_ELEMENT * rows * f
    out_bytes = x.nbytes  # each assignment's output row; the weighted combine is outside
    params = {"tokens": tokens, "experts": e, "top_k": k, "hidden": h, "ffn": f,
              "rows_per_expert": rows // e, "dispatch": dispatch}  # fmt: skip
    if config.shared_experts:
        fs = config.shared_ffn
        tok = TensorSpec((tokens, h), dtype)
        inputs += [tok, TensorSpec((2 * fs, h), dtype), TensorSpec((h, fs), dtype)]
        matmul += 2 * tokens * h * 2 * fs + 2 * tokens * fs * h
        other += SWIGLU_FLOPS_PER_ELEMENT * tokens * fs
        out_bytes += tok.nbytes
        params |= {"shared_experts": config.shared_experts, "shared_ffn": fs}
    shared = f", {config.shared_experts} shared" if config.shared_experts else ""
    return WorkloadSpec(
        id=make_workload_id(
            "block", f"{id_slug(config.name)}-moe-experts-{dispatch}", f"t{tokens}", dtype
        ),
        layer_type="block",
        kernel=f"moe_experts_{dispatch}",
        source_model=f"{config.name} ({e} experts, top-{k}{shared}, even routing, tp 1)",
        dtype=dtype,
        inputs=tuple(inputs),
        params=params,
        matmul_flops=matmul,
        other_flops=other,
        # tokens in, every expert's weights once, outputs out; the FFN activations stay on chip
        bytes=sum(t.nbytes for t in inputs) + out_bytes,
    )
