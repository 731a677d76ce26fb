"""A decoder's prefill and decode workloads against hand counts, and config.json's bad input."""

from __future__ import annotations

import json

import pytest

from reviewkit.common.errors import InputError, UsageError
from reviewkit.suite.model_targets import (
    BUILT_IN,
    DECODE,
    PREFILL,
    DecoderConfig,
    decoder_config,
    phase_workloads,
)

SMALL = DecoderConfig("tiny", hidden=64, heads=4, kv_heads=2, ffn=128, layers=3, vocab=1000)
HF = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
      "intermediate_size": 128, "num_hidden_layers": 3, "vocab_size": 1000,
      "_name_or_path": "org/tiny"}  # fmt: skip


def by_part(rows, phase):
    return {(w.spec.params.get("part") or w.spec.layer_type): w for w in rows if w.phase == phase}


def test_prefill_and_decode_flops_match_a_hand_count():
    rows = phase_workloads(SMALL, batch=2, context=8, dtype="fp32")
    pre, dec = by_part(rows, PREFILL), by_part(rows, DECODE)
    # head dim 64 / 4 = 16; QKV out = (4 + 2 x 2) x 16 = 128 = 64 + 2 x 32
    # prefill: 2 x B x S x 64 x 128 = 2 x 2 x 8 x 64 x 128 = 262,144 FLOPs, once per layer
    assert pre["attn-qkv"].spec.flops == 262_144 and pre["attn-qkv"].count == 3
    # decode: one token per sequence, 2 x 2 x 64 x 128 = 32,768
    assert dec["attn-qkv"].spec.flops == 32_768
    # gate/up 64 -> 2 x 128 and down 128 -> 64 over 16 tokens: 2 x 16 x 64 x 256, 2 x 16 x 128 x 64
    assert pre["mlp-gate-up"].spec.flops == 524_288 and pre["mlp-down"].spec.flops == 262_144
    # causal prefill attention: 4 x B x heads x d x S(S+1)/2 = 4 x 2 x 4 x 16 x 36 = 18,432
    assert pre["attention"].spec.flops == 18_432
    # a decode step: 4 x B x heads x d x (1 x context) = 4 x 2 x 4 x 16 x 8 = 4,096; its bytes
    # are dominated by the KV cache: K and V, 2 x (2 x 2 kv heads x 8 tokens x 16 x 4 B) = 8 KiB
    assert dec["attention"].spec.flops == 4_096
    q_bytes = 2 * 4 * 1 * 16 * 4  # the query and the output: B x heads x 1 x d fp32 each
    assert dec["attention"].spec.bytes == 2 * q_bytes + 2 * (2 * 2 * 8 * 16 * 4)
    # the LM head over each sequence's last token: 2 x B x 64 x 1000, once per pass
    assert pre["lm-head"].spec.flops == dec["lm-head"].spec.flops == 256_000
    assert pre["lm-head"].count == 1
    # two norms a layer and the final one; two residual adds a layer
    assert pre["norm"].count == 7 and pre["elementwise"].count == 6


def test_a_mixture_of_experts_routes_tokens_evenly():
    moe = DecoderConfig("tiny-moe", 64, 4, 2, 128, 3, 1000, experts=4, top_k=2)
    pre = by_part(phase_workloads(moe, batch=2, context=8, dtype="fp32"), PREFILL)
    # 16 tokens x top-2 over 4 experts: 8 rows each; gate/up 2 x 8 x 64 x 256 per expert
    assert pre["expert-gate-up"].spec.params["m"] == 8
    assert pre["expert-gate-up"].spec.flops == 262_144 and pre["expert-gate-up"].count == 12
    assert "mlp-gate-up" not in pre and pre["moe-router"].spec.params["n"] == 4


def test_built_in_models_by_name_and_a_config_json(tmp_path):
    assert decoder_config("llama-3-8b") is BUILT_IN["Llama-3-8B"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(HF))
    assert decoder_config(str(path)) == DecoderConfig("tiny", 64, 4, 2, 128, 3, 1000)
    assert decoder_config(str(tmp_path)).name == "tiny"  # a folder holding config.json


@pytest.mark.parametrize("field", ["hidden_size", "num_key_value_heads", "vocab_size"])
def test_a_config_missing_a_field_names_it(tmp_path, field):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in HF.items() if k != field}))
    with pytest.raises(InputError) as err:
        decoder_config(str(path))
    message = str(err.value)
    assert str(path) in message and f"field {field!r} is missing" in message
    assert "positive integer" in message and "Llama-3-8B" in message  # expected, remedy


def test_bad_values_and_unknown_names_are_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**HF, "num_key_value_heads": 3}))
    with pytest.raises(InputError, match="KV heads to divide the heads"):
        decoder_config(str(path))
    path.write_text(json.dumps({**HF, "intermediate_size": "128"}))
    with pytest.raises(InputError, match="'intermediate_size' is '128'"):
        decoder_config(str(path))
    with pytest.raises(UsageError, match="Llama-3-70B, Mixtral-8x7B"):
        decoder_config("gpt-5")


def test_a_built_in_models_workloads_are_the_serving_profiles_definitions():
    # Llama-3-8B prefill of one 2048-token prompt is what the serving profile measures: the
    # same definitions (and hashes), so a serving run's points sit at distance 0
    from reviewkit.suite.serving import serving_workloads

    served = {s.id: s for s in serving_workloads("bf16")}
    rows = phase_workloads(BUILT_IN["Llama-3-8B"], batch=1, context=2048, dtype="bf16")
    shared = [w.spec for w in rows if w.spec.id in served]
    assert {s.params.get("part") or s.layer_type for s in shared} >= {
        "attn-qkv", "attn-o", "mlp-gate-up", "mlp-down", "attention"}  # fmt: skip
    assert all(s.definition_hash() == served[s.id].definition_hash() for s in shared)


def test_a_tensor_parallel_rank_holds_its_share_of_each_sharded_workload():
    cfg = BUILT_IN["Llama-3-70B"]
    one = {w.spec.id: w.spec for w in phase_workloads(cfg, 1, 16, "bf16")}
    two = {w.spec.id: w.spec for w in phase_workloads(cfg, 1, 16, "bf16", tp=2)}
    qkv1, qkv2 = one["gemm.llama-3-70b-attn-qkv.b1s16.bf16"], two[
        "gemm.llama-3-70b-attn-qkv-tp2.b1s16.bf16"]  # fmt: skip
    # column-parallel QKV: 64 query + 2 x 8 KV heads of 128 = 10,240 outputs; 5,120 a rank
    assert qkv1.flops == 2 * 16 * 8192 * 10240 and qkv2.flops == qkv1.flops / 2
    # the LM head's vocabulary, 128,256, split in two: 64,128 a rank
    assert two["gemm.llama-3-70b-lm-head-tp2.b1s1.bf16"].flops == 2 * 8192 * 64128
    # norms and residual adds stay whole on every rank, under their TP-1 ids
    norm = "norm.llama-3-70b-rmsnorm.16x8192.bf16"
    assert two[norm] == one[norm]
    assert "attention.llama-3-70b-tp2-prefill-sdpa-gqa-causal.b1s16.bf16" in two
    with pytest.raises(UsageError, match="tensor-parallel degree 3"):
        phase_workloads(cfg, 1, 16, "bf16", tp=3)
