"""The suite's collectives (torch-free): operations, message sizes from real configurations, and
nccl-tests' bandwidth conventions, so a multi-rank workload's time has a communication bound.

Conventions: NVIDIA nccl-tests, doc/PERFORMANCE.md. For a message of S bytes (for all_gather
and reduce_scatter, S is the whole gathered buffer, n x each rank's part) taking t seconds on
n ranks, the algorithm bandwidth is S / t and the bus bandwidth is algbw x a factor that makes
it comparable to the link's peak, independent of n: all_reduce 2(n-1)/n (a ring reduce-scatter
then all-gather moves each byte 2(n-1)/n times over each link); all_gather, reduce_scatter and
all_to_all (n-1)/n; broadcast, reduce and send/recv 1. The bytes on the wire per rank are
S x that factor. A call also pays a fixed latency alpha whatever its size (the handshake, the
host's own issue cost, the backend's progress), so t_comm = alpha + S x factor / beta
(docs/metrics.md, "Communication"): beta the link's bandwidth, alpha the op's time at its
smallest message.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reviewkit.common.errors import UsageError
from reviewkit.suite.profiles import suite_profile

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER = "all_reduce", "all_gather", "reduce_scatter"
ALL_TO_ALL, BROADCAST, SEND_RECV = "all_to_all", "broadcast", "send_recv"
OPS = (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST, SEND_RECV)

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
MIB = 1 << 20


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' busbw / algbw for `op` on `world_size` ranks (doc/PERFORMANCE.md)."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; expected one of {', '.join(OPS)}")
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    n = world_size
    if op == ALL_REDUCE:
        return 2 * (n - 1) / n
    if op in (ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL):
        return (n - 1) / n
    return 1.0


def algbw_bytes_per_s(message_bytes: float, time_s: float) -> float:
    if time_s <= 0:
        raise ValueError(f"time must be positive, got {time_s}")
    return message_bytes / time_s


def busbw_bytes_per_s(op: str, message_bytes: float, time_s: float, world_size: int) -> float:
    return algbw_bytes_per_s(message_bytes, time_s) * bus_factor(op, world_size)


def wire_bytes(op: str, message_bytes: float, world_size: int) -> float:
    """Bytes each rank puts on its link for one call: what t_comm divides by the link's
    bandwidth (zero on one rank: nothing leaves the process)."""
    return message_bytes * bus_factor(op, world_size)


def comm_time_s(
    op: str,
    message_bytes: float,
    world_size: int,
    link_bytes_per_s: float,
    latency_s: float = 0.0,
) -> float:
    """docs/metrics.md's t_comm = alpha + wire bytes / beta: the op's smallest-message latency plus
    the bytes on the wire over the interconnect's bandwidth (alpha 0: the bandwidth term alone).
    Nothing leaves the process on one rank: no wire bytes, no latency."""
    if link_bytes_per_s <= 0:
        raise ValueError(f"link bandwidth must be positive, got {link_bytes_per_s}")
    if latency_s < 0:
        raise ValueError(f"latency must not be negative, got {latency_s}")
    wire = wire_bytes(op, message_bytes, world_size)
    return (latency_s if wire else 0.0) + wire / link_bytes_per_s


def latency_elements(op: str, world_size: int) -> int:
    """The smallest message of `op` alpha is measured with: one element, or one per rank where
    the op splits its buffer into per-rank shards (all_gather gathers one from each rank,
    reduce_scatter and all_to_all hand one to each)."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; expected one of {', '.join(OPS)}")
    return world_size if op in (ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL) else 1


@dataclass(frozen=True)
class CollectiveMessage:
    """One collective at one message size, and the configuration it was taken from."""

    name: str
    op: str
    elements: int  # at fp32; see `size_bytes`
    source: str
    # A message defined in bytes whatever the dtype (DDP's bucket cap is 25 MB of gradients,
    # in fp32 or bf16 alike); None: `elements` of the dtype.
    size_bytes: int | None = None

    def elements_of(self, dtype: str) -> int:
        if self.size_bytes is not None:
            return self.size_bytes // DTYPE_BYTES[dtype]
        return self.elements

    def message_bytes(self, dtype: str) -> int:
        return self.elements_of(dtype) * DTYPE_BYTES[dtype]


LLAMA2_7B_HIDDEN = 4096
# torch DistributedDataParallel's default bucket_cap_mb = 25: gradients are all-reduced in
# 25 MiB buckets (fp32 gradients: 25 MiB / 4 bytes elements).
DDP_BUCKET_ELEMENTS = 25 * MIB // 4


def messages(profile: str) -> tuple[CollectiveMessage, ...]:
    """The collectives a profile measures: the tensor-parallel all-reduce of one Llama-2-7B
    layer's activation (batch x seq x 4096, after the row-parallel projection), data parallel's
    gradient bucket, an MoE token all-to-all (top-2 routing of batch x seq tokens of 4096), the
    all-gather / reduce-scatter pair of sequence parallelism, a broadcast of the same
    activation, and a pipeline stage's send/recv of it. smoke keeps them small."""
    record = suite_profile(profile)
    smoke, tokens = record.shapes.smoke, record.collective_tokens
    act = tokens * LLAMA2_7B_HIDDEN
    bucket = 64 * 1024 if smoke else DDP_BUCKET_ELEMENTS
    src = f"Llama-2-7B, batch x seq = {tokens} tokens x hidden {LLAMA2_7B_HIDDEN}"
    return (
        CollectiveMessage("tp-activation-all-reduce", ALL_REDUCE, act,
                          f"tensor-parallel all-reduce after a row-parallel linear; {src}"),
        CollectiveMessage("ddp-gradient-bucket", ALL_REDUCE, bucket,
                          "a 256 KiB gradient bucket (smoke)" if smoke
                          else "DDP gradient bucket (bucket_cap_mb = 25)", size_bytes=bucket * 4),
        CollectiveMessage("moe-token-all-to-all", ALL_TO_ALL, 2 * act,
                          f"MoE dispatch, top-2 routing; {src}"),
        CollectiveMessage("sp-activation-all-gather", ALL_GATHER, act,
                          f"sequence-parallel all-gather of the activation; {src}"),
        CollectiveMessage("sp-activation-reduce-scatter", REDUCE_SCATTER, act,
                          f"sequence-parallel reduce-scatter of the activation; {src}"),
        CollectiveMessage("activation-broadcast", BROADCAST, act, f"broadcast; {src}"),
        CollectiveMessage("pipeline-send-recv", SEND_RECV, act,
                          f"pipeline stage boundary send/recv; {src}"),
    )  # fmt: skip


# --- the distributed part of the suite: what every rank measures under torchrun -------------

# A rank whose compute workloads take this much longer than the other ranks' median is a
# straggler (issue 16): a bad device, thermal throttling or a noisy neighbour, not run-to-run
# noise (the A/A spread of one workload's median on a shared 2-core VM is 1-2%,
# docs/benchmarks.md).
STRAGGLER_RATIO = 1.10
# The in-run link ceiling: a broadcast of the suite profile's `link_message_bytes`, best of
# several trials, as `calibrate` takes its compute peaks.
LINK_TRIALS = 5
# The in-run latency alpha of each op: its smallest message (`latency_elements`), a few warm-up
# calls (the first call of an op connects its buffers), then LATENCY_CALLS timed calls, each
# after a barrier; a trial is each rank's median, the slowest rank's. About 50 calls: the
# median of 50 lies between the 18th and 33rd sample with 97% confidence (order statistics),
# and the six ops
# take 0.2-0.4 s on gloo over loopback on a 2-core VM (a barrier plus a one-element call is
# 0.5-1 ms there). Run to run the medians there agree within about 25%, the VM's own noise:
# 200 calls narrowed that to about 10% at four times the cost (over a second).
LATENCY_WARMUP_CALLS = 5
# Taken in LATENCY_TRIALS trials, each the slowest rank's median of its calls, alpha the best
# trial: a stall of the shared VM during one trial (seen: a 1.04 ms send/recv median against
# 0.30 ms for its 256 KiB message in the same run) is not the link's latency, as the link
# ceiling takes its best trial too. The trials are taken twice, before the workloads and after
# them: a stall can outlast all three trials of one sitting (seen in CI: 2.85 ms for three
# back-to-back send/recv trials, right after rank 0's calibration, against 0.33 ms for the
# op's 256 KiB message later in the same run), and two sittings seconds apart rarely share one.
LATENCY_TRIALS = 3
LATENCY_CALLS = 48  # in all, per sitting: 3 trials of 16
LATENCY_SITTINGS = ("before the workloads", "after them")
# The compute workloads every rank also measures, to find stragglers: the suite's first gemm
# and its first norm (one compute-bound, one memory-bound): the first of each layer type.
STRAGGLER_PROBES = ("gemm", "norm")
TP_DECODER_KERNEL = "tp_decoder_layer"
PROBE = "straggler-probe"  # params["role"] of a compute workload measured to find stragglers


def _shard(elements: int, world_size: int) -> int:
    """Elements rounded down to a multiple of the world size (all_gather/reduce_scatter split
    the buffer evenly across ranks)."""
    return max(world_size, elements - elements % world_size)


def collective_spec(message: CollectiveMessage, dtype: str, world_size: int):
    """One collective as a suite workload: its message, the bytes each rank puts on the wire,
    and the local memory it touches (the message read and written once)."""
    from reviewkit.suite.workloads import TensorSpec, WorkloadSpec, make_workload_id

    elements = _shard(message.elements_of(dtype), world_size)
    size = elements * DTYPE_BYTES[dtype]
    return WorkloadSpec(
        id=make_workload_id("collective", message.name, f"{_size_tag(size)}", dtype),
        layer_type="collective",
        kernel=message.op,
        source_model=message.source,
        dtype=dtype,
        inputs=(TensorSpec((elements,), dtype),),
        params={
            "op": message.op,
            "elements": elements,
            "message_bytes": size,
            "world_size": world_size,
            "wire_bytes": wire_bytes(message.op, size, world_size),
        },
        bytes=2 * size,
    )


def _size_tag(size_bytes: int) -> str:
    if size_bytes >= MIB:
        return f"{size_bytes / MIB:g}MiB"
    return f"{size_bytes / 1024:g}KiB"


def tp_decoder_layer(model, batch: int, seq: int, tp: int, dtype: str):
    """One pre-norm GPT decoder layer sharded Megatron-style over `tp` ranks (Shoeybi et al.
    2019, section 3): the QKV projection column-parallel (each rank its heads / tp), the output
    projection row-parallel then an all-reduce; the MLP's up-projection column-parallel, its
    down-projection row-parallel then an all-reduce. Norms and residual adds are replicated.

    Counted per rank, as each rank runs it: matmul FLOPs / tp (attention over the full square,
    PaLM's convention, as the suite's decoder), weights / tp, and two all-reduces of the
    activation (batch x seq x hidden) on the wire. tp = 1 is the unsharded layer, the
    reference a scaling efficiency divides by."""
    from reviewkit.suite.workloads import (
        ELEMENT_BYTES,
        GELU_FLOPS_PER_ELEMENT,
        LAYER_NORM_FLOPS_PER_ELEMENT,
        SOFTMAX_FLOPS_PER_ELEMENT,
        TensorSpec,
        WorkloadSpec,
        id_slug,
        make_workload_id,
    )

    d, f, h, e = model.hidden, model.ffn, model.heads, ELEMENT_BYTES[dtype]
    m = batch * seq
    matmul = (2 * m * (3 * d * d + d * d + 2 * d * f) + 4 * batch * seq * seq * d) // tp
    other = (
        2 * LAYER_NORM_FLOPS_PER_ELEMENT * m * d
        + GELU_FLOPS_PER_ELEMENT * m * f // tp
        + SOFTMAX_FLOPS_PER_ELEMENT * batch * h * seq * seq // tp
        + 2 * m * d  # residual adds
    )
    weights = (3 * d * d + d * d + 2 * d * f) // tp + 4 * d
    x = TensorSpec((batch, seq, d), dtype)
    activation = x.nbytes
    return WorkloadSpec(
        id=make_workload_id(
            "model", f"{id_slug(model.name)}-tp-decoder-layer", f"tp{tp}-b{batch}s{seq}", dtype
        ),
        layer_type="model",
        kernel=TP_DECODER_KERNEL,
        source_model=f"{model.name}, one decoder layer, tensor-parallel {tp}",
        dtype=dtype,
        inputs=(x,),
        params={
            "batch": batch, "seq": seq, "hidden": d, "heads": h, "ffn": f, "tp": tp,
            "all_reduces": 2 if tp > 1 else 0,
            "wire_bytes": 2 * wire_bytes(ALL_REDUCE, activation, tp) if tp > 1 else 0,
        },
        matmul_flops=matmul,
        other_flops=other,
        bytes=2 * activation + weights * e,
    )  # fmt: skip


def distributed_specs(profile: str, dtypes, world_size: int, only: str | None = None) -> list:
    """The workloads a distributed run measures on every rank, in order: the collectives, the
    tensor-parallel decoder layer at tp = world size and at tp = 1 (the scaling reference), and
    the straggler probes (suite workloads, same ids as a single-process run's)."""
    from reviewkit.suite import workloads as suite

    if suite_profile(profile).workload_set != "core":
        raise UsageError(f"--profile {profile} has no distributed part; use smoke, quick or full")
    out = []
    for dtype in dtypes:
        out += [collective_spec(msg, dtype, world_size) for msg in messages(profile)]
        shapes = suite_profile(profile).shapes
        gpt2 = suite.smoke_dims(suite.GPT2_SMALL) if shapes.smoke else suite.GPT2_SMALL
        batch, seq = shapes.model_shapes[0]
        tps = (world_size, 1) if world_size > 1 else (1,)
        out += [tp_decoder_layer(gpt2, batch, seq, tp, dtype) for tp in tps]
        singles = suite.workloads(profile, (dtype,))
        for layer_type in STRAGGLER_PROBES:
            probe = next(s for s in singles if s.layer_type == layer_type)
            out.append(replace(probe, params={**probe.params, "role": PROBE}))
    return suite.select(out, only)
