"""The shortlist's sizing by hand: a model's weights and KV cache against a device's memory, the
tensor-parallel degree that fits, the all-reduce time over a link, and the rubric's policy."""

from __future__ import annotations

import pytest

from reviewkit.analysis.shortlist_sizing import (
    kv_cache_bytes,
    link_bytes_per_s_per_direction,
    memory_fit,
    read_policy,
    ring_allreduce_s,
    tp_communication_s,
    weights_bytes,
)
from reviewkit.common.errors import InputError
from reviewkit.review.rubric import DEFAULT_RUBRIC
from reviewkit.suite import platform_table
from reviewkit.suite.model_targets import BUILT_IN, DecoderConfig
from reviewkit.suite.platform_table import BIDIRECTIONAL, PER_DIRECTION, Figure

# hidden 64 over 4 heads: head_dim 16; 2 KV heads; 2 layers
SMALL = DecoderConfig("small", hidden=64, heads=4, kv_heads=2, ffn=128, layers=2, vocab=1000)


def link(value: float, direction: str) -> Figure:
    return Figure(value, "B/s", "test", "here", "2026", "datasheet", "test link", direction)


def test_llama_3_70b_in_bf16_needs_tp_2_on_an_h100():
    policy = read_policy(DEFAULT_RUBRIC)
    assert policy.memory_headroom_fraction == 0.1
    cfg = BUILT_IN["Llama-3-70B"]
    # parameters: embedding and LM head 2 x 128,256 x 8,192 = 2,101,346,304; a layer's QKV
    # 8,192 x (64 + 16) x 128 = 83,886,080, output 67,108,864, FFN 3 x 8,192 x 28,672 =
    # 704,643,072, norms 16,384: 855,654,400 x 80 = 68,452,352,000; final norm 8,192
    assert cfg.parameters() == 70_553_706_496
    assert weights_bytes(cfg, "bf16") == 141_107_412_992  # x 2 B: 141 GB > 80 GB
    # KV cache at batch 1, context 2,048: 2 x 80 x 1 x 2,048 x 8 x 128 x 2 B = 671,088,640
    assert kv_cache_bytes(cfg, 1, 2048, "bf16") == 671_088_640
    fit = memory_fit(cfg, 1, 2048, "bf16", platform_table.platform("h100-sxm"), 0.1)
    # usable: 80e9 x (1 - 0.1) = 72e9. TP 1 needs 141.78 GB; TP 2: 70,553,706,496 of weights
    # and 4 KV heads a rank, 335,544,320: 70,889,250,816 <= 72e9
    assert fit.usable_bytes == pytest.approx(72e9)
    assert fit.tp == 2 and fit.per_device_bytes == pytest.approx(70_889_250_816)
    assert fit.max_tp == 8 and "fits at TP 2" in fit.reason


def test_the_kv_cache_of_a_small_config():
    # 2 (K and V) x 2 layers x batch 3 x context 5 x 2 KV heads x head_dim 16 x 2 B = 3,840
    assert kv_cache_bytes(SMALL, 3, 5, "bf16") == 3840
    assert kv_cache_bytes(SMALL, 3, 5, "fp32") == 7680
    # TP 2: one KV head a rank, half; TP 4: still one (replicated once tp exceeds them)
    assert kv_cache_bytes(SMALL, 3, 5, "bf16", tp=2) == 1920
    assert kv_cache_bytes(SMALL, 3, 5, "bf16", tp=4) == 1920


def test_a_ring_all_reduce_over_a_link():
    # 2 (tp - 1) / tp = 1.5 of 1 GB at 100 GB/s one way: 15 ms; nothing at TP 1
    assert ring_allreduce_s(1e9, 4, 100e9) == pytest.approx(0.015)
    assert ring_allreduce_s(1e9, 1, 100e9) == 0.0
    # NVLink's 900 GB/s is both directions summed: 450 GB/s one way
    assert link_bytes_per_s_per_direction(link(900e9, BIDIRECTIONAL)) == 450e9
    assert link_bytes_per_s_per_direction(link(900e9, PER_DIRECTION)) == 900e9
    # a pass: batch 2 x 8 tokens x hidden 64 x 2 B = 2,048 B a message; TP 2: 2 x 1 / 2 x 2,048
    # / 450e9 = 4.5511 ns an all-reduce; two a layer, 2 layers: 18.204 ns
    t = tp_communication_s(SMALL, 2, 8, "bf16", 2, link(900e9, BIDIRECTIONAL))
    assert t == pytest.approx(4 * 2048 / 450e9)


def test_a_model_that_fits_nowhere_says_what_it_needs():
    cfg = BUILT_IN["Llama-3-70B"]
    fit = memory_fit(cfg, 1, 2048, "bf16", platform_table.platform("l4"), 0.1)
    # the L4 has no NVLink (scale-up domain 1): TP 1, 141,107,412,992 + 671,088,640 B against
    # 24e9 x 0.9 = 21.6 GB usable
    assert fit.tp is None and fit.max_tp == 1
    assert fit.per_device_bytes == 141_778_501_632
    assert "needs 141.8 GB a device at TP 1" in fit.reason and "21.6 GB usable" in fit.reason


def test_the_policy_refuses_a_bad_rubric_naming_the_key(tmp_path):
    text = DEFAULT_RUBRIC.read_text().replace("memory_headroom_fraction = 0.1",
                                              "memory_headroom_fraction = 0.9")  # fmt: skip
    bad = tmp_path / "rubric.toml"
    bad.write_text(text)
    with pytest.raises(InputError, match=r"memory_headroom_fraction = 0\.9: expected a share"):
        read_policy(bad)
    bad.write_text(DEFAULT_RUBRIC.read_text().replace("never_measured = 0.5\n", ""))
    with pytest.raises(InputError, match=r"risk_weights.*never_measured.*Remedy"):
        read_policy(bad)
