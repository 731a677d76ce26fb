"""Collectives: nccl-tests' bandwidth conventions by hand, message sizes from real configurations,
t_comm = alpha + wire bytes / beta, and the communication fraction of docs/metrics.md's roofline."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewkit.analysis.overhead import IN_COLLECTIVE_LATENCY
from reviewkit.analysis.roofline import (
    BELOW_ROOF,
    COMMUNICATION_BOUND,
    COMPUTE_BOUND,
    OVERHEAD_BOUND,
    UNCLASSIFIED,
    aggregate,
    analyse_run,
    communication_time,
    roofline,
)
from reviewkit.bundle.records import Run, Workload
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
    # over a 25 GB/s link: 12582912 / 25e9 = 503.3 us (the bandwidth term alone: alpha 0)
    assert c.comm_time_s("all_reduce", 8 * c.MIB, 4, 25e9) == pytest.approx(503.31648e-6)
    # with a 20 us latency alpha: 20 + 503.31648 = 523.31648 us
    assert c.comm_time_s("all_reduce", 8 * c.MIB, 4, 25e9, latency_s=20e-6) == pytest.approx(
        523.31648e-6
    )
    # one rank: nothing on the wire, so no latency either
    assert c.comm_time_s("all_reduce", 8 * c.MIB, 1, 25e9, latency_s=20e-6) == 0.0


@pytest.mark.parametrize(
    ("op", "n", "elements"),
    [
        # one element, or one per rank where the op splits its buffer into per-rank shards
        ("all_reduce", 4, 1),
        ("broadcast", 4, 1),
        ("send_recv", 2, 1),
        ("all_gather", 4, 4),
        ("reduce_scatter", 8, 8),
        ("all_to_all", 2, 2),
    ],
)
def test_latency_is_measured_with_the_smallest_message(op, n, elements):
    assert c.latency_elements(op, n) == elements


LATENCY = {"all_reduce": 50e-6}  # alpha: 50 us
LINK = 1e9  # beta: 1 GB/s


def test_communication_time_is_latency_plus_wire_bytes_over_the_link_by_hand():
    """A 4 MiB all-reduce on 2 ranks: wire bytes = 2(2-1)/2 x 4 MiB = 4 MiB = 4194304 B; over
    1 GB/s that is 4.194304 ms; plus alpha 0.05 ms: t_comm = 4.244304 ms."""
    w = Workload(id="w", layer_type="collective", dtype="fp32", status="ok", kernel="all_reduce",
                 params={"op": "all_reduce"}, wire_bytes=4 * c.MIB)
    assert c.wire_bytes("all_reduce", 4 * c.MIB, 2) == 4 * c.MIB
    assert communication_time(w, LINK, LATENCY) == pytest.approx(4.244304e-3)
    assert c.comm_time_s("all_reduce", 4 * c.MIB, 2, LINK, 50e-6) == pytest.approx(4.244304e-3)
    # an op without a measured alpha (a bundle from before it was): the bandwidth term alone
    assert communication_time(w, LINK, {}) == pytest.approx(4.194304e-3)
    # no link (one rank) or nothing on the wire: no communication time, alpha included
    assert communication_time(w, None, LATENCY) == 0.0
    assert communication_time(replace(w, wire_bytes=0), LINK, LATENCY) == 0.0


def _fake_distributed_run(t_s: float) -> Run:
    """Two gloo ranks that each took `t_s` on every call of a 4 MiB fp32 all-reduce, on a host
    with an fp32 peak of 1e11 FLOP/s and 1e12 B/s of memory bandwidth, over the 1 GB/s link with
    alpha 50 us; the collective's host cost is inside alpha (t_o = 0)."""
    n = 21
    size = 4 * c.MIB
    w = {
        "id": "collective.tp-activation-all-reduce.4MiB.fp32", "layer_type": "collective",
        "kernel": "all_reduce", "source_model": "hand", "dtype": "fp32", "status": "ok",
        "reason": "", "inputs": [], "flops": 0, "matmul_flops": 0, "bytes": 2 * size,
        "params": {"op": "all_reduce", "elements": size // 4, "message_bytes": size,
                   "world_size": 2, "wire_bytes": c.wire_bytes("all_reduce", size, 2)},
        "wire_bytes": c.wire_bytes("all_reduce", size, 2),
        "samples_s": [t_s] * n, "rank_samples_s": [[t_s] * n, [t_s] * n],
        "warmup_samples_s": [], "round_sizes": [n], "stopped_by": "target",
        "definition_hash": "0" * 16, "reproduce": "",
        "overhead": {"available": True, "method": IN_COLLECTIVE_LATENCY,
                     "reason": "a collective's host cost is inside its latency alpha"},
    }  # fmt: skip
    return Run.from_json({
        "suite": {"hash": "h"},
        "environment": {},
        "knobs": {"dtypes": ["fp32"], "device": "cpu"},
        "ceilings": {
            "compute": {"fp32": {"peak": 1e11}},
            "bandwidth": {"peak": 1e12},
            "interconnect": {"peak": LINK, "latency_s": dict(LATENCY)},
        },
        "workloads": [w],
        "distributed": {"world_size": 2, "backend": "gloo",
                        "ranks": [{"rank": 0, "host": "a"}, {"rank": 1, "host": "a"}]},
    })  # fmt: skip


def test_a_slow_collective_is_communication_bound_below_its_roof_by_hand():
    """The 4 MiB all-reduce taking t = 40 ms. t_c = 0 (no FLOPs); t_m = 8 MiB read and written /
    1e12 B/s = 8388608 / 1e12 = 8.389 us; t_comm = 50 us + 4194304 / 1e9 = 4.244304 ms, above
    max(t_c, t_m): communication-bound. t_o = 0 (in-collective-latency), so t_k = t = 40 ms;
    t_roof = max(t_c, t_m) + t_comm = 0.008389 + 4.244304 = 4.252693 ms; the roof share
    t_roof / t_k = 4.252693 / 40 = 0.1063, under the rubric's below_roof_share of 0.5: below
    its roof. Fractions: communication 4.244304 / 40 = 0.1061, memory stall 8.389 us / 40 ms =
    0.00021, overhead 0, inefficiency the rest 1 - 0.1063 = 0.8937."""
    run = analyse_run(_fake_distributed_run(40e-3), below_roof_share=0.5)
    (w,) = run.workloads
    d = w.decomposition
    assert w.overhead_method == IN_COLLECTIVE_LATENCY
    assert d.memory_time_s == pytest.approx(8.388608e-6)
    assert d.communication_time_s == pytest.approx(4.244304e-3)
    assert d.roof_time_s == pytest.approx(4.252693e-3)
    assert d.overhead_time_s == 0 and d.kernel_time_s == pytest.approx(40e-3)
    assert d.roof_share == pytest.approx(0.10632, abs=5e-5)
    assert w.bottleneck == COMMUNICATION_BOUND
    assert d.below_roof and BELOW_ROOF in w.flags
    assert d.communication_fraction == pytest.approx(0.1061076)
    assert d.memory_stall_fraction == pytest.approx(2.097e-4, rel=1e-3)
    assert d.compute_fraction == 0 and d.overhead_fraction == 0
    assert d.inefficiency_fraction == pytest.approx(1 - 0.1063173, rel=1e-5)
    # the layer aggregate agrees: one workload, the same share and class
    agg = run.layer_types["collective"]
    assert agg.bottleneck == COMMUNICATION_BOUND and agg.below_roof
    assert agg.roof_share == pytest.approx(d.roof_share)
    # nccl-tests' view of the same call: 4 MiB / 40 ms = 104.9 MB/s busbw, 10.5% of the link
    assert w.collective.link_fraction == pytest.approx(4 * c.MIB / 40e-3 / LINK)


def test_a_collective_at_its_roof_is_not_flagged_below_it():
    """The same all-reduce at t = 5 ms: t_roof / t_k = 4.252693 / 5 = 0.8505 >= 0.5."""
    (w,) = analyse_run(_fake_distributed_run(5e-3), below_roof_share=0.5).workloads
    assert w.decomposition.roof_share == pytest.approx(0.850539, rel=1e-5)
    assert w.bottleneck == COMMUNICATION_BOUND and BELOW_ROOF not in w.flags
    assert w.decomposition.communication_fraction == pytest.approx(4.244304 / 5)


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
    """t = 10 ms, t_c = 2 ms, t_m = 1 ms, t_comm = 5 ms and a measured t_o = 0 (a collective:
    its host cost is in alpha): t_k = 10 ms; compute 0.2, stall 0 (t_m < t_c), communication
    0.5, overhead 0, inefficiency 1 - 0.7 = 0.3; t_comm > max(t_c, t_m) and the roof share
    (2 + 5) / 10 = 0.7 is over 0.5, so communication-bound and not below its roof."""
    r = roofline(2e9, 1e9, 10e-3, 1e12, 1e12, communication_time_s=5e-3, overhead_s=0.0)
    assert r.compute_fraction == pytest.approx(0.2)
    assert r.memory_stall_fraction == 0.0
    assert r.communication_fraction == pytest.approx(0.5)
    assert r.overhead_fraction == 0 and r.inefficiency_fraction == pytest.approx(0.3)
    assert r.decomposition.roof_share == pytest.approx(0.7)
    assert r.bottleneck == COMMUNICATION_BOUND and not r.faster_than_roofline
    assert not r.decomposition.below_roof
    # t_roof = 7 ms over t = 4 ms: compute 2 / 4, communication clamped to the 2 ms left,
    # flagged faster than the roofline, still summing to 1
    short = roofline(2e9, 1e9, 4e-3, 1e12, 1e12, communication_time_s=5e-3, overhead_s=0.0)
    assert short.compute_fraction == pytest.approx(0.5)
    assert short.communication_fraction == pytest.approx(0.5)
    assert short.inefficiency_fraction == 0 and short.faster_than_roofline
    # overhead not measured: the roof explains (2 + 5) / 10 = 0.7 of t, the rest unattributed
    unknown = roofline(2e9, 1e9, 10e-3, 1e12, 1e12, communication_time_s=5e-3)
    assert unknown.overhead_fraction is None and unknown.bottleneck == COMMUNICATION_BOUND
    assert unknown.decomposition.unattributed_fraction == pytest.approx(0.3)
    # a single-process workload with a measured 8 ms floor: t_k = 2 ms is all compute;
    # overhead 0.8 >= 0.5, overhead-bound
    single = roofline(2e9, 1e9, 10e-3, 1e12, 1e12, overhead_s=8e-3)
    assert single.communication_fraction == 0 and single.overhead_fraction == pytest.approx(0.8)
    assert single.bottleneck == OVERHEAD_BOUND
    # ... and without it, the roof explains 2 / 10 = 0.2 < 0.5: no class is given
    assert roofline(2e9, 1e9, 10e-3, 1e12, 1e12).bottleneck == UNCLASSIFIED
    agg = aggregate([("collective", r), ("collective", single)], below_roof_share=0.5)
    agg = agg["collective"]
    # communication (0.5 x 10 ms + 0) / 20 ms; overhead (0 + 0.8 x 10 ms) / 20 ms = 0.4 < 0.5;
    # the summed roof terms t_c 4 ms, t_m 2 ms, t_comm 5 ms: communication-bound, with
    # roof share (7 + 2) / (10 + 2) = 0.75 of the kernel time
    assert agg.communication_fraction == pytest.approx(0.25)
    assert agg.overhead_fraction == pytest.approx(0.4)
    assert agg.roof_share == pytest.approx(0.75)
    assert agg.bottleneck == COMMUNICATION_BOUND and not agg.below_roof
    assert roofline(8e9, 1e9, 10e-3, 1e12, 1e12, 5e-3, 0.0).bottleneck == COMPUTE_BOUND


@given(
    t=st.floats(1e-6, 1.0),
    t_c=st.floats(0, 2.0),
    t_m=st.floats(0, 2.0),
    t_comm=st.floats(0, 2.0),
    t_o=st.one_of(st.none(), st.floats(0, 2.0)),
)
def test_the_fractions_always_sum_to_one(t, t_c, t_m, t_comm, t_o):
    r = roofline(t_c * 1e12, t_m * 1e12, t, 1e12, 1e12, communication_time_s=t_comm,
                 overhead_s=t_o)  # fmt: skip
    parts = [v for v in r.decomposition.fractions().values() if v is not None]
    # measured overhead: compute, stall, communication, overhead and inefficiency; not
    # measured: compute, stall, communication and the unattributed rest
    assert len(parts) == (6 if t_o is not None else 4)
    assert sum(parts) == pytest.approx(1.0)
    assert min(parts) >= 0


def test_ddp_bucket_is_25_mib_of_gradients_in_any_dtype():
    # bucket_cap_mb = 25 caps the bucket's bytes: 6553600 fp32 or 13107200 bf16 gradients
    specs = {s.dtype: s for s in c.distributed_specs("quick", ("fp32", "bf16"), 2)
             if s.id.startswith("collective.ddp-gradient-bucket")}  # fmt: skip
    assert specs["fp32"].params["message_bytes"] == specs["bf16"].params["message_bytes"]
    assert specs["bf16"].params["elements"] == 25 * c.MIB // 2
