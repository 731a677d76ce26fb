"""Floor calls: each workload's smallest shape on the same kernels and parallel path (torch-free).

A floor call measures a workload's exposed overhead on a CPU (docs/metrics.md): the time of a
call whose work is as small as it can be while it still dispatches the same ops and splits
across as many threads as the workload does. Too small a floor leaves the kernel library's
path or drops to one thread (below ATen's grain size) and measures another call; the runner
checks the floor's op names against the workload's and refuses a floor that differs.

Floors are derived at run time from a definition and the thread count: they are not part of
the suite, so they never change its hash. FLOOR_RULES_VERSION names the rules a bundle used.
"""

from __future__ import annotations

import dataclasses
import math

from reviewkit.suite.workloads import TensorSpec, WorkloadSpec

FLOOR_RULES_VERSION = 2  # 2: grouped-query attention and the looped MoE experts
# ATen's at::internal::GRAIN_SIZE: at::parallel_for runs a range under this many elements on
# one thread, and otherwise splits it into min(threads, ceil(n / grain)) tasks. TensorIterator
# ops (add, gelu, copies, reductions) split their element count by it.
ATEN_GRAIN_SIZE = 32768
# The fewest elements a vector-op floor keeps: a whole number of AVX-512 registers of every
# dtype (16 fp32, 32 bf16 lanes), so the vectorised loop body runs rather than its scalar tail.
MIN_VECTOR_ELEMENTS = 64
# A GEMM-family floor's dimension: one 64 x 64 block per thread (about a oneDNN/MKL fp32 block
# on AVX-512; a 1-wide dimension would switch BLAS to a matrix-vector kernel). An assumption
# that the profiler's op names cannot check on a CPU (BLAS kernels are not profiler events):
# the sweep-intercept cross-check in benchmarks/overhead_crosscheck.py does.
GEMM_FLOOR_DIM = 64
# Attention's query block in ATen's CPU flash kernel for short sequences (32 under 192 tokens):
# one block per (batch, head) task.
ATTENTION_FLOOR_SEQ = 32
# A convolution's floor: one 16-channel block (oneDNN's AVX-512 channel block) in and out, on
# an 8 x 8 image (rows enough to split over the threads).
CONV_FLOOR_CHANNELS = 16
CONV_FLOOR_SIZE = 8
# ATen runs a one-image fp32 convolution through oneDNN only when its input has more than this
# many elements (ConvParams::use_mkldnn); under it, the slow thnn path (seen: a 16 x 8 x 8 floor
# ran aten::_slow_conv2d_forward where the workload ran aten::mkldnn_convolution).
MKLDNN_CONV_MIN_INPUT = 20480
# A model's floor keeps its layers (the ops a call dispatches grow with them) at a short prompt.
MODEL_FLOOR_SEQ = 16
# Row-parallel kernels (layer norm, softmax over the last dim) split rows over threads with a
# grain of one row: as many rows as threads keeps every thread busy.
ROW_PARALLEL = ("layer_norm", "softmax")
ELEMENT_PARALLEL = ("add", "gelu", "sum", "rms_norm", "transpose_copy")
# The serving profile's kernels without a floor rule, each for a reason the overhead record
# carries (on a GPU the overhead is measured by CUDA-graph replay and needs no floor).
NO_FLOOR_RULE = {
    "scaled_mm": "no floor rule for fp8 GEMMs: on a CPU they are emulated, so a floor would "
    "measure the emulation's overhead, not a device's",
    "moe_experts_grouped": "no floor rule for the grouped MoE experts yet: a floor must keep "
    "every expert's group, and how the batched GEMM splits them over threads is not modelled",
    "flex_decode_gqa": "no floor rule for FlexAttention yet: each shape compiles its own "
    "kernel, so a floor would be another compiled program, not the same ops at a smaller size",
    "flex_decode_gqa_paged": "no floor rule for paged FlexAttention yet: each shape compiles "
    "its own kernel, and a floor would need its own page table",
}


@dataclasses.dataclass(frozen=True)
class Floor:
    """A floor call's definition and the rule that chose its shape, in words."""

    spec: WorkloadSpec
    rule: str

    def to_json(self) -> dict:
        return {
            "inputs": [t.to_json() for t in self.spec.inputs],
            "params": self.spec.params,
            "rule": self.rule,
            "rules_version": FLOOR_RULES_VERSION,
        }


def parallel_tasks(extent: int, threads: int, grain: int = ATEN_GRAIN_SIZE) -> int:
    """How many tasks at::parallel_for splits `extent` units into at `threads` threads."""
    if extent < grain or threads <= 1:
        return 1
    return min(threads, math.ceil(extent / grain))


def same_tasks_extent(extent: int, threads: int, grain: int = ATEN_GRAIN_SIZE,
                      least: int = 1) -> int:  # fmt: skip
    """The smallest extent (at least `least`, at most `extent`) that splits into as many tasks
    as `extent` does."""
    tasks = parallel_tasks(extent, threads, grain)
    smallest = least if tasks == 1 else (tasks - 1) * grain + 1
    return min(extent, max(smallest, least))


def _rows_keeping_last(
    shape: tuple[int, ...], elements: int, keep: int = 1, least_rows: int = 1
) -> tuple[int, ...]:
    """`shape` with its last `keep` dims kept and the leading ones shrunk to one dim of rows, so
    the floor has at least `elements` elements (rank kept: outer dims become 1)."""
    suffix = shape[len(shape) - keep :]
    inner = math.prod(suffix)
    rows = max(least_rows, math.ceil(elements / inner))
    lead = len(shape) - keep
    return (1,) * (lead - 1) + (min(rows, math.prod(shape[:lead])),) + suffix


def _with(spec: WorkloadSpec, inputs: list[tuple[int, ...]], **params) -> WorkloadSpec:
    tensors = tuple(TensorSpec(tuple(s), t.dtype) for s, t in zip(inputs, spec.inputs,
                                                                    strict=True))  # fmt: skip
    return dataclasses.replace(
        spec, id=f"{spec.id}.floor", inputs=tensors, params={**spec.params, **params},
        matmul_flops=0, other_flops=0, bytes=0,
    )  # fmt: skip


def floor_of(spec: WorkloadSpec, threads: int) -> Floor | None:
    """The floor call of a workload at a thread count, or None for a kernel without a rule."""
    k, p, shapes = spec.kernel, spec.params, [t.shape for t in spec.inputs]
    if k in ELEMENT_PARALLEL:
        x = shapes[0]
        n = math.prod(x)
        want = same_tasks_extent(n, threads, least=MIN_VECTOR_ELEMENTS)
        # a transpose keeps the dims after the swapped pair, and two rows of the first: a swap
        # with a dim of one is already contiguous and copies nothing
        keep = 2 if k == "transpose_copy" else 1
        shape = _rows_keeping_last(x, want, keep, least_rows=2 if keep == 2 else 1)
        rest = [shape if len(s) == len(x) else s for s in shapes[1:]]
        kwargs = {"shape": list(shape)} if "shape" in p else {}
        tasks = parallel_tasks(math.prod(shape), threads)
        return Floor(_with(spec, [shape, *rest], **kwargs),
                     f"elements cut to {math.prod(shape)} (the last {keep} dim(s) kept): "
                     f"{tasks} task(s) of ATen's {ATEN_GRAIN_SIZE}-element grain, as the "
                     f"workload's {n} elements split into at {threads} thread(s)")  # fmt: skip
    if k in ROW_PARALLEL:
        x = shapes[0]
        rows = math.prod(x[:-1])
        shape = _rows_keeping_last(x, min(rows, threads) * x[-1])
        return Floor(_with(spec, [shape, *shapes[1:]], shape=list(shape)),
                     f"rows cut to {math.prod(shape[:-1])} of {x[-1]} (one row per thread, "
                     f"rows split with a grain of one)")  # fmt: skip
    g = GEMM_FLOOR_DIM
    if k == "linear":
        (m, kk), (n, _) = shapes
        m_f, n_f, k_f = min(m, g), min(n, g * threads), min(kk, g)
        return Floor(
            _with(spec, [(m_f, k_f), (n_f, k_f)], m=m_f, n=n_f, k=k_f),
            f"{m_f} x {k_f} @ {k_f} x {n_f}: a {g} x {g} block per thread",
        )
    if k == "bmm":
        (b, s, d), _ = shapes
        b_f, s_f, d_f = min(b, threads), min(s, g), min(d, g)
        return Floor(
            _with(spec, [(b_f, s_f, d_f), (b_f, d_f, s_f)]),
            f"{b_f} batch(es) of {s_f} x {d_f} @ {d_f} x {s_f}: a batch per thread",
        )
    if k == "sdpa":
        b, h, s, d = shapes[0]
        h_f, s_f = min(b * h, threads), min(s, ATTENTION_FLOOR_SEQ)
        shape = (1, h_f, s_f, d)
        return Floor(
            _with(spec, [shape] * 3, batch=1, heads=h_f, seq=s_f),
            f"1 x {h_f} head(s) x {s_f} tokens x head dim {d}: one query block per "
            "thread, the head dim kept (it picks the kernel's inner loops)",
        )
    if k == "sdpa_gqa":
        _, hq, q_len, d = shapes[0]
        hkv, kv_len = shapes[1][1], shapes[1][2]
        group = hq // hkv
        # whole groups of query heads per KV head (the grouping picks the kernel's path), enough
        # of them for a query head per thread; a decode step keeps its single query
        kv_f = min(hkv, math.ceil(threads / group))
        q_f = min(q_len, ATTENTION_FLOOR_SEQ)
        kv_len_f = q_f if p["causal"] else min(kv_len, ATTENTION_FLOOR_SEQ)
        q, kv = (1, kv_f * group, q_f, d), (1, kv_f, kv_len_f, d)
        return Floor(
            _with(spec, [q, kv, kv], batch=1, q_heads=kv_f * group, kv_heads=kv_f, q_len=q_f,
                  kv_len=kv_len_f),
            f"1 x {kv_f * group} query head(s) in groups of {group} per KV head, {q_f} "
            f"quer{'y' if q_f == 1 else 'ies'} against {kv_len_f} keys, head dim {d}: a query "
            "head per thread, the grouping and head dim kept (they pick the kernel's path)",
        )
    if k == "moe_experts_looped":
        e, h, f = p["experts"], p["hidden"], p["ffn"]
        rows_f, h_f, f_f = min(p["rows_per_expert"], g), min(h, g), min(f, g * threads)
        inputs = [(e * rows_f, h_f), (e, 2 * f_f, h_f), (e, h_f, f_f)]
        # tokens: those whose top-k assignments fill the rows kept (rows = tokens x top-k)
        shared, params = "", {"rows_per_expert": rows_f, "hidden": h_f, "ffn": f_f,
                              "tokens": e * rows_f // p["top_k"]}  # fmt: skip
        if p.get("shared_experts"):  # the shared experts' SwiGLU over every token: a GEMM pair
            t_f, fs_f = min(shapes[3][0], g), min(p["shared_ffn"], g * threads)
            inputs += [(t_f, h_f), (2 * fs_f, h_f), (h_f, fs_f)]
            params |= {"shared_ffn": fs_f}
            shared = f"; the shared experts over {t_f} token(s), ffn {fs_f}"
        return Floor(
            _with(spec, inputs, **params),
            f"all {e} experts (the loop's ops grow with them), {rows_f} row(s) each, hidden "
            f"{h_f}, ffn {f_f}{shared}: a {g} x {g} block per thread in each GEMM",
        )
    if k == "conv2d":
        (n, c, hh, ww), (kk, _, r, q) = shapes
        c_f, k_f = min(c, CONV_FLOOR_CHANNELS), min(kk, CONV_FLOOR_CHANNELS)
        # the smallest square image over ATen's oneDNN threshold for a one-image convolution
        side = math.isqrt(MKLDNN_CONV_MIN_INPUT // c_f) + 1
        h_f, w_f = min(hh, max(CONV_FLOOR_SIZE, side)), min(ww, max(CONV_FLOOR_SIZE, side))
        if c_f * h_f * w_f <= MKLDNN_CONV_MIN_INPUT:  # a small image: more channel blocks
            blocks = math.ceil((MKLDNN_CONV_MIN_INPUT + 1) / (h_f * w_f) / CONV_FLOOR_CHANNELS)
            c_f = min(c, blocks * CONV_FLOOR_CHANNELS)
        return Floor(_with(spec, [(1, c_f, h_f, w_f), (k_f, c_f, r, q)], batch=1,
                           channels=c_f, size=h_f),
                     f"1 x {c_f} x {h_f} x {w_f} input, {k_f} filters of {r} x {q}: the fewest "
                     f"{CONV_FLOOR_CHANNELS}-channel blocks and pixels over the "
                     f"{MKLDNN_CONV_MIN_INPUT}-element input ATen needs for oneDNN")  # fmt: skip
    if k == "embedding":
        (b, s), (vocab, hidden) = shapes
        ids = same_tasks_extent(b * s * hidden, threads, least=hidden) // hidden or 1
        ids = min(ids, b * s)
        v_f = min(vocab, max(ids, MIN_VECTOR_ELEMENTS))
        return Floor(
            _with(spec, [(1, ids), (v_f, hidden)], batch=1, seq=ids, vocab=v_f),
            f"{ids} ids into a {v_f}-row table of width {hidden}",
        )
    if k == "mlp_block":
        t, d, f = p["tokens"], p["hidden"], p["ffn"]
        t_f, d_f, f_f = min(t, g), min(d, g), min(f, g * threads)
        return Floor(
            _with(spec, [(t_f, d_f)], tokens=t_f, hidden=d_f, ffn=f_f),
            f"{t_f} tokens, hidden {d_f}, ffn {f_f}: a {g} x {g} block per thread",
        )
    if k in ("encoder_layer", "gpt_decoder"):
        heads, hidden = p["heads"], p["hidden"]
        h_f = min(heads, threads)
        d_f = h_f * min(hidden // heads, g)
        f_f = min(p["ffn"], 4 * d_f)
        if k == "encoder_layer":
            s_f = min(p["seq"], ATTENTION_FLOOR_SEQ)
            return Floor(_with(spec, [(1, s_f, d_f)], batch=1, seq=s_f, hidden=d_f, heads=h_f,
                               ffn=f_f),
                         f"1 x {s_f} tokens, {h_f} head(s), hidden {d_f}, ffn {f_f}")  # fmt: skip
        s_f, v_f = min(p["seq"], MODEL_FLOOR_SEQ), min(p["vocab"], g * threads)
        return Floor(_with(spec, [(1, s_f)], batch=1, seq=s_f, hidden=d_f, heads=h_f, ffn=f_f,
                           vocab=v_f),
                     f"1 x {s_f} tokens through all {p['layers']} layers, {h_f} head(s), "
                     f"hidden {d_f}, ffn {f_f}, vocab {v_f}")  # fmt: skip
    return None


# The params that name a kernel's first dimension, grown with it.
GROWN_PARAMS = {"gpt_decoder": ("batch",), "embedding": ("batch",), "mlp_block": ("tokens",),
                "sdpa_gqa": ("batch",), "moe_experts_looped": ("rows_per_expert", "tokens")}
# Kernels whose grown inputs are named, not found by rank and first dimension: the MoE's
# token rows (routed, and the shared experts' tokens) grow, and no weight may, even one whose
# first dimension happens to equal the rows.
GROWN_INPUTS = {"moe_experts_looped": (0, 3)}


def grown(spec: WorkloadSpec, factor: int) -> WorkloadSpec:
    """`spec` with its first dimension `factor` times as large: every input of the first's rank
    and first dimension grows (a GEMM's weights do not), and the params naming it follow."""
    first = spec.inputs[0].shape
    named = GROWN_INPUTS.get(spec.kernel)
    inputs = tuple(
        TensorSpec((t.shape[0] * factor, *t.shape[1:]), t.dtype)
        if (i in named if named else len(t.shape) == len(first) and t.shape[0] == first[0])
        else t
        for i, t in enumerate(spec.inputs)
    )
    params = dict(spec.params)
    for key in GROWN_PARAMS.get(spec.kernel, ()):
        if key in params:
            params[key] = params[key] * factor
    if "shape" in params:
        params["shape"] = list(inputs[0].shape)
    return dataclasses.replace(spec, inputs=inputs, params=params, id=f"{spec.id}.x{factor}")


def doubled(floor: Floor, threads: int) -> WorkloadSpec | None:
    """The floor with twice the work on the same path, or None where doubling would change the
    split (an element-wise floor still under one grain that doubling takes over it). The line
    through the floor and its double meets zero work at the call's fixed cost: the floor's own
    work is taken out."""
    double = grown(floor.spec, 2)
    if floor.spec.kernel in ELEMENT_PARALLEL:
        before = parallel_tasks(math.prod(floor.spec.inputs[0].shape), threads)
        if parallel_tasks(math.prod(double.inputs[0].shape), threads) != before:
            return None
    return double
