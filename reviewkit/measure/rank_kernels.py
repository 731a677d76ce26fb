"""What one rank runs and times under torch.distributed: the collectives, the sharded decoder
layer, lockstep sampling and the link ceiling."""

from __future__ import annotations

import math
import re
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F

from reviewkit.measure.device import synchroniser
from reviewkit.measure.timing import SamplingPolicy
from reviewkit.suite import collectives as coll
from reviewkit.suite import kernels
from reviewkit.suite.profiles import suite_profile
from reviewkit.suite.workloads import WorkloadSpec

# Per-direction NVLink bandwidth per GPU from NVIDIA's datasheets (NVLink 4: 900 GB/s total
# bidirectional on H100/H200 SXM; NVLink 3: 600 GB/s on A100 SXM), the figure nccl-tests'
# busbw is held against. PCIe parts: 4.0 x16 31.5 GB/s, 5.0 x16 63 GB/s per direction.
LINK_DATASHEET_BYTES_PER_S = {
    "H200": (450e9, "NVLink 4 (900 GB/s bidirectional), H200 SXM datasheet"),
    "H100 80GB HBM3": (450e9, "NVLink 4 (900 GB/s bidirectional), H100 SXM datasheet"),
    "A100-SXM": (300e9, "NVLink 3 (600 GB/s bidirectional), A100 SXM datasheet"),
    "H100 PCIe": (63e9, "PCIe 5.0 x16, 63 GB/s per direction"),
    "A100-PCIE": (31.5e9, "PCIe 4.0 x16, 31.5 GB/s per direction"),
}


# torch 2.13 renamed the single-tensor all-gather and reduce-scatter (the old names warn);
# earlier releases have only the old ones.
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int


# --- building the distributed workloads ------------------------------------------------------


def build(spec: WorkloadSpec, device: torch.device, info: RankInfo) -> Callable[[], object]:
    """The callable one rank runs for a workload of the distributed part."""
    if spec.layer_type == "collective":
        return _collective(spec, device, info)
    if spec.kernel == coll.TP_DECODER_KERNEL:
        return _tp_decoder_layer(spec, device)
    return kernels.build(spec, device)


def _collective(spec: WorkloadSpec, device: torch.device, info: RankInfo):
    dtype = kernels.TORCH_DTYPES[spec.dtype]
    return collective_call(spec.params["op"], spec.params["elements"], dtype, device, info)


def collective_call(
    op: str, n: int, dtype: torch.dtype, device: torch.device, info: RankInfo
) -> Callable[[], object]:
    """One call of collective `op` on a message of `n` elements (for all_gather and
    reduce_scatter the whole gathered buffer, n / world per rank): the suite's kernel, and the
    smallest message its latency is measured with."""
    world = info.world_size
    # zeros: repeated sums stay finite, so every call moves the same ordinary numbers
    x = torch.zeros(n, dtype=dtype, device=device)
    if op == coll.ALL_REDUCE:
        return lambda: dist.all_reduce(x)
    if op == coll.ALL_GATHER:
        part, out = x[: n // world], torch.empty(n, dtype=dtype, device=device)
        return lambda: _ALL_GATHER(out, part)
    if op == coll.REDUCE_SCATTER:
        out = torch.empty(n // world, dtype=dtype, device=device)
        return lambda: _REDUCE_SCATTER(out, x)
    if op == coll.ALL_TO_ALL:
        out = torch.empty(n, dtype=dtype, device=device)
        return lambda: dist.all_to_all_single(out, x)
    if op == coll.BROADCAST:
        return lambda: dist.broadcast(x, src=0)
    if op == coll.SEND_RECV:
        if world < 2:
            raise NotImplementedError("send/recv needs two ranks; not implemented for 1 rank")
        got = torch.empty(n, dtype=dtype, device=device)
        # a pipeline's stage boundary on every rank at once: send to the next, receive from the
        # previous (a ring), so every rank's link carries one message each way
        to, frm = (info.rank + 1) % world, (info.rank - 1) % world

        def send_recv():
            ops = [dist.P2POp(dist.isend, x, to), dist.P2POp(dist.irecv, got, frm)]
            for req in dist.batch_isend_irecv(ops):
                req.wait()

        return send_recv
    raise NotImplementedError(f"collective {op} not implemented")


def _tp_decoder_layer(spec: WorkloadSpec, device: torch.device):
    """Megatron-style shards of one pre-norm decoder layer (suite/collectives.py counts it)."""
    p = spec.params
    tp, d, heads, ffn = p["tp"], p["hidden"], p["heads"], p["ffn"]
    if heads % tp or ffn % tp:
        raise NotImplementedError(
            f"tensor parallel {tp} needs heads ({heads}) and ffn ({ffn}) divisible by it; "
            f"not implemented for this world size"
        )
    dtype = kernels.TORCH_DTYPES[spec.dtype]
    gen = torch.Generator().manual_seed(kernels.INPUT_SEED)

    def rand(*shape, scale=1.0):
        return (torch.randn(shape, generator=gen) * scale).to(device=device, dtype=dtype)

    b, s = p["batch"], p["seq"]
    local_heads, head_dim = heads // tp, d // heads
    x = rand(b, s, d)
    w_qkv = rand(d, 3 * d // tp, scale=d**-0.5)  # column-parallel: this rank's heads
    w_o = rand(d // tp, d, scale=d**-0.5)  # row-parallel: partial sums, then all-reduce
    w_up = rand(d, ffn // tp, scale=d**-0.5)
    w_down = rand(ffn // tp, d, scale=ffn**-0.5)
    ln = (torch.ones(d, dtype=dtype, device=device), torch.zeros(d, dtype=dtype, device=device))
    reduce = dist.all_reduce if tp > 1 else (lambda t: t)

    def layer():
        with torch.inference_mode():
            y = F.layer_norm(x, (d,), *ln)
            q, k, v = (y @ w_qkv).view(b, s, 3, local_heads, head_dim).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            o = a.transpose(1, 2).reshape(b, s, d // tp) @ w_o
            reduce(o)
            h = x + o
            z = F.gelu(F.layer_norm(h, (d,), *ln) @ w_up) @ w_down
            reduce(z)
            return h + z

    return layer


# --- lockstep sampling -----------------------------------------------------------------------


def _timed(fn: Callable[[], object], sync: Callable[[], None]) -> float:
    dist.barrier()  # every rank starts the call together: a call's time is the op, not the skew
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def lockstep_samples(
    fn: Callable[[], object], policy: SamplingPolicy, sync: Callable[[], None], rank: int
) -> tuple[list[float], list[float]]:
    """(warm-up, samples) of one round on this rank. Every rank must make the same number of
    calls, or the collectives deadlock: rank 0 picks the count from its warm-up (the policy's
    time target at the median warm-up call, within its sample and budget limits) and
    broadcasts it. Each call starts at a barrier."""
    warmup = [_timed(fn, sync) for _ in range(max(1, policy.warmup_calls))]
    count = torch.zeros(1, dtype=torch.int64)
    if rank == 0:
        per_call = max(statistics.median(warmup), 1e-9)
        wanted = max(policy.min_samples, math.ceil(policy.min_time_s / per_call))
        affordable = max(1, int(policy.budget_s / per_call))
        count[0] = max(1, min(wanted, affordable, policy.max_samples))
    dist.broadcast(count, src=0)
    return warmup, [_timed(fn, sync) for _ in range(int(count[0]))]


def step_samples(per_rank: list[list[float]]) -> list[float]:
    """Per call, the slowest rank's time: a step ends when its last rank finishes."""
    return [max(calls) for calls in zip(*per_rank, strict=True)]


# --- the interconnect ceiling -----------------------------------------------------------------


def collective_latency(ops, device: torch.device, world: int) -> dict[str, float]:
    """alpha of t_comm = alpha + wire bytes / beta, per op: its smallest message (one fp32
    element, or one per rank where the op splits into per-rank shards; the suite's own call,
    send/recv its ring), LATENCY_WARMUP_CALLS warm-up calls, then LATENCY_CALLS calls each
    after a barrier, in LATENCY_TRIALS trials; a trial's value is the slowest rank's median,
    alpha the best trial. Every rank must call this with the same ops, in the same order."""
    info = RankInfo(dist.get_rank(), world, 0, 1)
    sync = synchroniser(device)
    out = {}
    for op in ops:
        fn = collective_call(op, coll.latency_elements(op, world), torch.float32, device, info)
        for _ in range(coll.LATENCY_WARMUP_CALLS):
            _timed(fn, sync)
        trials = []
        for _ in range(coll.LATENCY_TRIALS):
            calls = coll.LATENCY_CALLS // coll.LATENCY_TRIALS
            median = statistics.median(_timed(fn, sync) for _ in range(calls))
            medians = [None] * world
            dist.all_gather_object(medians, median)
            trials.append(max(medians))
        out[op] = min(trials)
    return out


def latency_method(backend: str, world: int) -> str:
    return (
        f"{backend}, {world} ranks: each op's smallest message (1 fp32 element; 1 per rank, "
        f"{world} in all, for all_gather, reduce_scatter and all_to_all; send/recv a ring, each "
        f"rank to the next), {coll.LATENCY_WARMUP_CALLS} warm-up calls then "
        f"{coll.LATENCY_CALLS} calls each after a barrier, in {coll.LATENCY_TRIALS} trials, "
        f"{' and '.join(coll.LATENCY_SITTINGS)}; a trial is each rank's median, the slowest "
        "rank's (max over ranks); alpha the best trial"
    )


def remeasure_latency(link: dict, device: torch.device, world: int) -> None:
    """The second sitting of the latency trials, after the workloads: each op's alpha becomes
    the best trial of both sittings (a stall of the host can outlast one sitting's trials).
    Every rank must call this, after `link_ceiling`, with the same link table."""
    if not link.get("latency_s"):
        return
    again = collective_latency(tuple(link["latency_s"]), device, world)
    link["latency_s"] = {op: min(a, again[op]) for op, a in link["latency_s"].items()}


def link_ceiling(profile: str, device: torch.device, backend: str, world: int, ops=None) -> dict:
    """The link bandwidth beta t_comm divides by: a broadcast from rank 0 (busbw = algbw), best
    of LINK_TRIALS trials of three calls; on known GPUs the datasheet figure beside it. With it,
    each collective op's latency alpha (`latency_s`, by op; `ops`: the suite's, by default)."""
    if world < 2:
        return {"available": False, "reason": "one rank: nothing crosses a link"}
    if ops is None:
        ops = tuple(dict.fromkeys(m.op for m in coll.messages(profile)))
    size = suite_profile(profile).link_message_bytes
    x = torch.zeros(size // 4, dtype=torch.float32, device=device)
    sync = synchroniser(device)
    dist.broadcast(x, src=0)  # connect and warm the buffers
    trials = []
    for _ in range(coll.LINK_TRIALS):
        fastest = min(_timed(lambda: dist.broadcast(x, src=0), sync) for _ in range(3))
        # the trial's time is the slowest rank's: gather each rank's fastest call
        times = [None] * world
        dist.all_gather_object(times, fastest)
        trials.append(size / max(times))
    best = max(trials)
    doc = {
        "peak": best,
        "measured": best,
        "source": "measured",
        "measured_method": (
            f"{backend} broadcast of {size / coll.MIB:g} MiB from rank 0 to {world - 1} "
            f"rank(s), busbw = algbw (nccl-tests); {coll.LINK_TRIALS} trials of 3 calls, each "
            "trial its fastest call on the slowest rank, the ceiling the best trial"
        ),
        "trials_bytes_per_s": trials,
        "low": min(trials),
        "high": best,
        "datasheet": None,
        "datasheet_ref": "",
        "latency_s": collective_latency(ops, device, world),
        "latency_method": latency_method(backend, world),
    }
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, (bw, ref) in LINK_DATASHEET_BYTES_PER_S.items():
            if key in name:
                doc.update(datasheet=bw, datasheet_ref=ref)
                break
    else:
        doc["reason"] = (
            f"CPU ranks exchange data through {backend} (TCP loopback on one host, the network "
            "between hosts): no datasheet link figure"
        )
    return doc


TERMINAL_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def topology(device: torch.device, backend: str) -> dict:
    """What can be read about how the ranks' devices are linked."""
    if device.type != "cuda":
        return {
            "available": False,
            "reason": f"CPU ranks: {backend} over TCP (loopback on one host); NVLink/PCIe "
            "topology applies to GPUs",
        }
    try:
        out = subprocess.run(
            ["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return {"available": False, "reason": f"nvidia-smi topo -m not readable: {exc}"}
    # nvidia-smi underlines the header with terminal escapes even into a pipe (seen on an H200)
    return {"available": True, "method": "nvidia-smi topo -m",
            "matrix": TERMINAL_ESCAPE.sub("", out).strip()}  # fmt: skip
