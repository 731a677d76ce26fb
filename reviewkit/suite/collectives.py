"""The suite's collectives (torch-free): operations, message sizes from real configurations, and
nccl-tests' bandwidth conventions, so a multi-rank workload's time has a communication bound.

Conventions: NVIDIA nccl-tests, doc/PERFORMANCE.md. For a message of S bytes (for all_gather
and reduce_scatter, S is the whole gathered buffer, n x each rank's part) taking t seconds on
n ranks, the algorithm bandwidth is S / t and the bus bandwidth is algbw x a factor that makes
it comparable to the link's peak, independent of n: all_reduce 2(n-1)/n (a ring reduce-scatter
then all-gather moves each byte 2(n-1)/n times over each link); all_gather, reduce_scatter and
all_to_all (n-1)/n; broadcast, reduce and send/recv 1. The bytes on the wire per rank are
S x that factor, so t_comm = S x factor / link bandwidth (design.md, "Communication").
"""

from __future__ import annotations

from dataclasses import dataclass

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


def comm_time_s(op: str, message_bytes: float, world_size: int, link_bytes_per_s: float) -> float:
    """design.md's t_comm: bytes on the wire over the interconnect's bandwidth."""
    if link_bytes_per_s <= 0:
        raise ValueError(f"link bandwidth must be positive, got {link_bytes_per_s}")
    return wire_bytes(op, message_bytes, world_size) / link_bytes_per_s


@dataclass(frozen=True)
class CollectiveMessage:
    """One collective at one message size, and the configuration it was taken from."""

    name: str
    op: str
    elements: int
    source: str

    def message_bytes(self, dtype: str) -> int:
        return self.elements * DTYPE_BYTES[dtype]


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
    tokens = {"smoke": 16, "quick": 512, "full": 2048}[profile]
    act = tokens * LLAMA2_7B_HIDDEN
    bucket = DDP_BUCKET_ELEMENTS if profile != "smoke" else 64 * 1024
    src = f"Llama-2-7B, batch x seq = {tokens} tokens x hidden {LLAMA2_7B_HIDDEN}"
    return (
        CollectiveMessage("tp-activation-all-reduce", ALL_REDUCE, act,
                          f"tensor-parallel all-reduce after a row-parallel linear; {src}"),
        CollectiveMessage("ddp-gradient-bucket", ALL_REDUCE, bucket,
                          "DDP gradient bucket (bucket_cap_mb = 25)" if profile != "smoke"
                          else "a 256 KiB gradient bucket (smoke)"),
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
