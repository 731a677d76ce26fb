"""A decoder transformer's layer workloads at a batch and context: prefill and one decode step.

Torch-free: the suite's own definitions (`linear`, `gqa_attention`, `rms_norm`, `residual_add`,
`embedding`) at a model's shapes, so a projection (`reviewkit project --model`) prices the same
FLOPs and bytes the suite measures. One device holds the whole model (tensor parallelism 1)
unless `tp` shards it, as `reviewkit shortlist` does: the workloads are then one rank's.
What a layer holds: two RMSNorms, the fused QKV projection, grouped-query attention (causal over
the prompt when prefilling; one query per sequence against the KV cache when decoding), the
output projection, two residual adds, the fused gate/up and the down projection (a mixture of
experts: the router and each expert's gate/up and down over its share of the tokens, routed
evenly as suite/serving.py assumes); then a final norm and the LM head over each sequence's last
token (what a serving stack computes; the logits of the other prompt tokens are never used).
Left out, and said in `OMITTED`: SwiGLU's activation (no suite workload measures silu x up),
rotary embeddings, sampling.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from reviewkit.common.errors import InputError, UsageError
from reviewkit.suite.definitions import ModelDims, WorkloadSpec, linear
from reviewkit.suite.serving import ServedModel, gqa_attention
from reviewkit.suite.workloads import embedding, residual_add, rms_norm

PREFILL, DECODE = "prefill", "decode"
PHASES = (PREFILL, DECODE)
OMITTED = "SwiGLU's activation (no suite workload measures it), rotary embeddings, sampling"


@dataclass(frozen=True)
class DecoderConfig:
    """A decoder-only transformer's shape: the fields a HuggingFace config.json names."""

    name: str
    hidden: int  # hidden_size
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads
    ffn: int  # intermediate_size (each expert's, for a mixture of experts)
    layers: int  # num_hidden_layers
    vocab: int  # vocab_size
    experts: int = 1  # num_local_experts (1: a dense FFN)
    top_k: int = 1  # num_experts_per_tok

    def served(self, tp: int = 1) -> ServedModel:
        dims = ModelDims(self.name, self.hidden, self.heads, self.ffn, self.vocab)
        return ServedModel(dims, kv_heads=self.kv_heads, tp=tp)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def parameters(self) -> int:
        """Every weight: the embedding, each layer's QKV, output, FFN (each expert's) and router
        projections and two norms, the final norm, and the LM head counted apart from the
        embedding (untied, as in Llama-3 and Mixtral). Llama-3-70B: 70,553,706,496."""
        h, d = self.hidden, self.head_dim
        attention = h * (self.heads + 2 * self.kv_heads) * d + self.heads * d * h
        ffn = 3 * h * self.ffn * self.experts + (h * self.experts if self.experts > 1 else 0)
        return 2 * self.vocab * h + self.layers * (attention + ffn + 2 * h) + h


# The configurations suite/serving.py already measures shapes of (Meta's and Mistral's
# config.json: Llama-3-8B 32 layers, Llama-3-70B 80, Mixtral-8x7B 32 with 8 experts, top-2).
BUILT_IN = {
    "Llama-3-8B": DecoderConfig("Llama-3-8B", 4096, 32, 8, 14336, 32, 128256),
    "Llama-3-70B": DecoderConfig("Llama-3-70B", 8192, 64, 8, 28672, 80, 128256),
    "Mixtral-8x7B": DecoderConfig("Mixtral-8x7B", 4096, 32, 8, 14336, 32, 32000, 8, 2),
}
# (config.json key, DecoderConfig field) of the fields a config must give.
REQUIRED_FIELDS = (
    ("hidden_size", "hidden"), ("num_attention_heads", "heads"),
    ("num_key_value_heads", "kv_heads"), ("intermediate_size", "ffn"),
    ("num_hidden_layers", "layers"), ("vocab_size", "vocab"),
)  # fmt: skip
CONFIG_REMEDY = (
    "give the field as HuggingFace's config.json does, or pass a built-in model: "
    + ", ".join(BUILT_IN)
)


def _positive_int(doc: dict, key: str, path: Path) -> int:
    value = doc.get(key)
    if key not in doc:
        raise InputError(f"{path}: field {key!r} is missing; expected a positive integer. "
                         f"Remedy: {CONFIG_REMEDY}")  # fmt: skip
    if type(value) is not int or value <= 0:
        raise InputError(f"{path}: field {key!r} is {value!r}; expected a positive integer. "
                         f"Remedy: {CONFIG_REMEDY}")  # fmt: skip
    return value


def read_config(path: Path) -> DecoderConfig:
    """A HuggingFace-style config.json as a DecoderConfig; InputError names the file, the field,
    what was expected and what to do."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read the model config ({exc.strerror}); pass a "
            f"config.json or a built-in model: {', '.join(BUILT_IN)}"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc}); pass a HuggingFace config.json") \
            from None  # fmt: skip
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a JSON object (a HuggingFace config.json)")
    values = {field: _positive_int(doc, key, path) for key, field in REQUIRED_FIELDS}
    if values["hidden"] % values["heads"] or values["heads"] % values["kv_heads"]:
        raise InputError(
            f"{path}: hidden_size {values['hidden']}, num_attention_heads {values['heads']}, "
            f"num_key_value_heads {values['kv_heads']}: expected the heads to divide "
            "hidden_size and the KV heads to divide the heads; check the config"
        )
    head_dim = doc.get("head_dim")
    if head_dim is not None and head_dim != values["hidden"] // values["heads"]:
        raise InputError(
            f"{path}: field 'head_dim' is {head_dim!r}; expected hidden_size / "
            f"num_attention_heads = {values['hidden'] // values['heads']} (a head dimension "
            "apart from the hidden size is not modelled yet): project a built-in model instead"
        )
    experts = _positive_int(doc, "num_local_experts", path) if "num_local_experts" in doc else 1
    top_k = _positive_int(doc, "num_experts_per_tok", path) if experts > 1 else 1
    if top_k > experts:
        raise InputError(f"{path}: num_experts_per_tok {top_k} exceeds num_local_experts "
                         f"{experts}; expected at most as many as there are experts")  # fmt: skip
    name = doc.get("_name_or_path") or doc.get("model_type") or path.parent.name or path.stem
    return DecoderConfig(name=str(name).rsplit("/", 1)[-1] or path.stem, **values,
                         experts=experts, top_k=top_k)  # fmt: skip


def decoder_config(model: str) -> DecoderConfig:
    """A built-in model by name (case-insensitive), or a config.json by path."""
    by_lower = {name.lower(): cfg for name, cfg in BUILT_IN.items()}
    if model.lower() in by_lower:
        return by_lower[model.lower()]
    path = Path(model)
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if path.is_file():
        return read_config(path)
    raise UsageError(
        f"--model {model!r} is neither a built-in model nor a config.json file; choose one of "
        f"{', '.join(BUILT_IN)}, or pass the path of a HuggingFace config.json"
    )


@dataclass(frozen=True)
class PhaseWorkload:
    """One workload of a phase, run `count` times per forward pass (per layer x layers)."""

    spec: WorkloadSpec
    count: int
    phase: str


def phase_workloads(
    cfg: DecoderConfig, batch: int, context: int, dtype: str, tp: int = 1
) -> list[PhaseWorkload]:
    """Prefill (batch sequences of `context` tokens) and one decode step (batch sequences, one
    new token each, against a KV cache of `context` tokens), workload by workload, on one of
    `tp` tensor-parallel ranks (Megatron's sharding, suite/serving.py's ServedModel: the heads,
    the FFN, each expert's FFN and the LM head's vocabulary divided by tp; the norms, residual
    adds, router and embedding whole on every rank)."""
    if batch < 1 or context < 1:
        raise UsageError(f"--batch {batch} --context {context}: expected positive integers")
    if tp < 1 or cfg.heads % tp or cfg.ffn % tp:
        raise UsageError(f"{cfg.name}: tensor-parallel degree {tp}; expected one that divides "
                         f"its {cfg.heads} heads and FFN width {cfg.ffn}")  # fmt: skip
    model = cfg.served(tp)
    dims, h, n_layers = model.dims, cfg.hidden, cfg.layers
    out = []
    for phase in PHASES:
        seq = context if phase == PREFILL else 1
        tokens = batch * seq

        def add(spec: WorkloadSpec, count: int, phase: str = phase) -> None:
            out.append(PhaseWorkload(spec, count, phase))

        add(embedding(dims, batch, seq, dtype), 1)
        add(rms_norm(dims, tokens, dtype), 2 * n_layers + 1)
        # each GEMM by its unsharded name: (its name on a rank, with "-tpN" past TP 1; k; n)
        parts = {name.split("-tp")[0]: (name, k, n) for name, k, n in model.projections()}
        shard = f"-tp{tp}" if tp > 1 else ""
        for part in ("attn-qkv", "attn-o"):
            add(linear(dims, parts[part][0], batch, seq, *parts[part][1:], dtype), n_layers)
        if phase == PREFILL:
            add(gqa_attention(model, PREFILL, batch, context, context, dtype), n_layers)
        else:
            add(gqa_attention(model, DECODE, batch, 1, context, dtype), n_layers)
        add(residual_add(dims, tokens, dtype), 2 * n_layers)
        if cfg.experts > 1:
            # even routing: each expert gets tokens x top-k / experts rows (at least one)
            rows = max(1, math.ceil(tokens * cfg.top_k / cfg.experts))
            add(linear(dims, "moe-router", batch, seq, h, cfg.experts, dtype), n_layers)
            f = cfg.ffn // tp
            add(linear(dims, f"expert-gate-up{shard}", 1, rows, h, 2 * f, dtype),
                n_layers * cfg.experts)  # fmt: skip
            add(linear(dims, f"expert-down{shard}", 1, rows, f, h, dtype),
                n_layers * cfg.experts)  # fmt: skip
        else:
            for part in ("mlp-gate-up", "mlp-down"):
                add(linear(dims, parts[part][0], batch, seq, *parts[part][1:], dtype), n_layers)
        vocab = -(-cfg.vocab // tp)  # column-parallel: each rank's share of the vocabulary
        add(linear(dims, f"lm-head{shard}", batch, 1, h, vocab, dtype), 1)
    return out
