"""Collectives: nccl-tests' bandwidth conventions by hand, message sizes from real configurations,
and the communication fraction of design.md's roofline."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewkit.analysis.roofline import (
    COMMUNICATION_BOUND,
    COMPUTE_BOUND,
    OVERHEAD_BOUND,
    aggregate,
    roofline,
)
from reviewkit.suite import collectives as c


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        # nccl-tests doc/PERFORMANCE.md: all_reduce 2(n-1)/n, all_gather / reduce_scatter /
        # all_to_all (n-1)/n, broadcast and send/recv 1.
        ("all_reduce", 2, 1.0),
        ("all_reduce", 8, 1.75),
        ("all_gather", 4, 0.75),
        ("reduce_scatter", 8, 0.875),
        ("all_to_all", 2, 0.5),
        ("broadcast", 8, 1.0),
        ("send_recv", 2, 1.0),
        ("all_reduce", 1, 0.0),  # one rank: nothing on the wire
    ],
)
def test_bus_factor_by_hand(op, n, factor):
    assert c.bus_factor(op, n) == pytest.approx(factor)


def test_bandwidths_of_one_all_reduce_by_hand():
    # 8 MiB all-reduced on 4 ranks in 2 ms: algbw = 8388608 / 0.002 = 4.194 GB/s; busbw =
    # algbw x 2 x 3 / 4 = 6.291 GB/s; each rank puts 8 MiB x 1.5 = 12 MiB on its link.
    assert c.algbw_bytes_per_s(8 * c.MIB, 2e-3) == pytest.approx(4.194304e9)
    assert c.busbw_bytes_per_s("all_reduce", 8 * c.MIB, 2e-3, 4) == pytest.approx(6.291456e9)
    assert c.wire_bytes("all_reduce", 8 * c.MIB, 4) == 12 * c.MIB
    # over a 25 GB/s link: 12582912 / 25e9 = 503.3 us
    assert c.comm_time_s("all_reduce", 8 * c.MIB, 4, 25e9) == pytest.approx(503.31648e-6)


def test_bad_arguments_say_what_was_expected():
    with pytest.raises(ValueError, match="unknown collective 'gather'"):
        c.bus_factor("gather", 2)
    with pytest.raises(ValueError, match="world size must be at least 1"):
        c.bus_factor("all_reduce", 0)
    with pytest.raises(ValueError, match="time must be positive"):
        c.algbw_bytes_per_s(1, 0)


def test_message_sizes_come_from_the_configurations_they_name():
    quick = {m.name: m for m in c.messages("quick")}
    # Llama-2-7B's per-layer tensor-parallel all-reduce at 512 tokens: 512 x 4096 elements,
    # 4 MiB in bf16, 8 MiB in fp32.
    tp = quick["tp-activation-all-reduce"]
    assert tp.op == "all_reduce" and tp.elements == 512 * 4096
    assert tp.message_bytes("bf16") == 4 * c.MIB and tp.message_bytes("fp32") == 8 * c.MIB
    # DDP's default 25 MiB bucket of fp32 gradients
    assert quick["ddp-gradient-bucket"].message_bytes("fp32") == 25 * c.MIB
    # top-2 routing sends each token's activation to two experts
    assert quick["moe-token-all-to-all"].elements == 2 * 512 * 4096
    assert {m.op for m in quick.values()} == set(c.OPS)
    assert max(m.message_bytes("fp32") for m in c.messages("smoke")) <= 1 * c.MIB


def test_communication_fraction_by_hand():
    """t = 10 ms, t_c = 2 ms, t_m = 1 ms, t_comm = 5 ms: compute 0.2, stall 0 (t_m < t_c),
    communication 0.5, overhead (10 - 2 - 5) / 10 = 0.3; t_comm > max(t_c, t_m) and the
    overhead is under 0.5, so communication-bound."""
    r = roofline(2e9, 1e9, 10e-3, 1e12, 1e12, communication_time_s=5e-3)
    assert r.compute_fraction == pytest.approx(0.2)
    assert r.memory_stall_fraction == 0.0
    assert r.communication_fraction == pytest.approx(0.5)
    assert r.overhead_fraction == pytest.approx(0.3)
    assert r.bottleneck == COMMUNICATION_BOUND and not r.faster_than_roofline
    # t_comm longer than what is left after compute: clamped, flagged, still summing to 1
    short = roofline(2e9, 1e9, 4e-3, 1e12, 1e12, communication_time_s=5e-3)
    assert short.communication_fraction == pytest.approx(0.5) and short.overhead_fraction == 0
    assert short.faster_than_roofline
    # a single-process workload: the three-fraction table, unchanged
    single = roofline(2e9, 1e9, 10e-3, 1e12, 1e12)
    assert single.communication_fraction == 0 and single.overhead_fraction == pytest.approx(0.8)
    assert single.bottleneck == OVERHEAD_BOUND
    agg = aggregate([("collective", r), ("collective", single)])["collective"]
    # (0.5 x 10 ms + 0) / 20 ms
    assert agg.communication_fraction == pytest.approx(0.25)
    assert agg.bottleneck == OVERHEAD_BOUND  # (3 + 8) / 20 = 0.55 overhead
    assert roofline(8e9, 1e9, 10e-3, 1e12, 1e12, 5e-3).bottleneck == COMPUTE_BOUND


@given(
    t=st.floats(1e-6, 1.0),
    t_c=st.floats(0, 2.0),
    t_m=st.floats(0, 2.0),
    t_comm=st.floats(0, 2.0),
)
def test_the_four_fractions_always_sum_to_one(t, t_c, t_m, t_comm):
    r = roofline(t_c * 1e12, t_m * 1e12, t, 1e12, 1e12, communication_time_s=t_comm)
    total = (r.compute_fraction + r.memory_stall_fraction + r.communication_fraction
             + r.overhead_fraction)  # fmt: skip
    assert total == pytest.approx(1.0)
    assert min(r.compute_fraction, r.memory_stall_fraction, r.communication_fraction,
               r.overhead_fraction) >= 0  # fmt: skip


def test_ddp_bucket_is_25_mib_of_gradients_in_any_dtype():
    # bucket_cap_mb = 25 caps the bucket's bytes: 6553600 fp32 or 13107200 bf16 gradients
    specs = {s.dtype: s for s in c.distributed_specs("quick", ("fp32", "bf16"), 2)
             if s.id.startswith("collective.ddp-gradient-bucket")}  # fmt: skip
    assert specs["fp32"].params["message_bytes"] == specs["bf16"].params["message_bytes"]
    assert specs["bf16"].params["elements"] == 25 * c.MIB // 2
