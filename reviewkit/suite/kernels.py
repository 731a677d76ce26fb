"""Turn a workload definition into a torch callable on a device (imports torch).

A change to what a builder computes must bump `definitions.KERNEL_REVISION`, so the suite hash
records it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from reviewkit.suite import kernels_flex
from reviewkit.suite.workloads import WorkloadSpec

TORCH_DTYPES = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "int64": torch.int64,
    "fp8": torch.float8_e4m3fn,  # suite/serving.py's fp8 GEMM operands
}
# Inputs are drawn from a fixed seed so every run measures the same data.
INPUT_SEED = 0


def _tensor(shape, dtype: str, device: torch.device, gen: torch.Generator) -> torch.Tensor:
    if device.type == "meta":  # shapes only: lets tests count FLOPs of the full-size suite
        return torch.empty(tuple(shape), dtype=TORCH_DTYPES[dtype], device=device)
    t = torch.randn(tuple(shape), generator=gen, dtype=torch.float32)
    return t.to(device=device, dtype=TORCH_DTYPES[dtype])


def _inputs(spec: WorkloadSpec, device: torch.device, gen: torch.Generator):
    return [_tensor(t.shape, t.dtype, device, gen) for t in spec.inputs]


def _module(
    module: nn.Module,
    spec: WorkloadSpec,
    device: torch.device,
    transform: ModuleTransform | None = None,
) -> nn.Module:
    module = module.to(device=device, dtype=TORCH_DTYPES[spec.dtype]).eval()
    return transform(module) if transform else module


class GPTDecoder(nn.Module):
    """GPT-2-style decoder from torch.nn parts: pre-norm causal layers and an untied LM head."""

    def __init__(self, vocab: int, max_seq: int, hidden: int, heads: int, ffn: int, layers: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(max_seq, hidden)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                hidden,
                heads,
                ffn,
                dropout=0.0,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            for _ in range(layers)
        )
        self.norm = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        seq = ids.shape[1]
        pos = torch.arange(seq, device=ids.device)
        x = self.tokens(ids) + self.positions(pos)
        mask = nn.Transformer.generate_square_subsequent_mask(seq, device=ids.device, dtype=x.dtype)
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        return self.lm_head(self.norm(x))


ModuleTransform = Callable[[nn.Module], nn.Module]


def _swiglu(x: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    """An expert's FFN: x (rows, h) through gate/up (2f, h) and down (h, f), nn.Linear layout."""
    a, up = F.linear(x, gate_up).chunk(2, dim=-1)
    return F.linear(F.silu(a) * up, down)


def grouped_mm_kernel(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether torch has a grouped-GEMM kernel for `torch._grouped_mm` here: CUDA at compute
    capability 9.0 or 10.0 with bf16 operands (aten's _grouped_mm_cuda fast path); elsewhere
    it falls back to bmm (3-D operands) or a loop of mms (the offsets form)."""
    if device.type != "cuda" or dtype != torch.bfloat16:
        return False
    return torch.cuda.get_device_capability(device) in ((9, 0), (10, 0))


def _moe_experts(spec: WorkloadSpec, tensors: list, device: torch.device) -> Callable[[], object]:
    """The routed experts, looped or grouped (suite/moe.py), then the shared experts' SwiGLU
    over every token where the model has them."""
    p = spec.params
    x, gate_up, down = tensors[:3]
    e, rows, h = p["experts"], p["rows_per_expert"], p["hidden"]
    shared = tensors[3:]
    if p["dispatch"] == "looped":

        def routed() -> torch.Tensor:
            out = torch.empty_like(x)
            for i in range(e):  # looped: one expert's GEMMs after another
                mine = slice(i * rows, (i + 1) * rows)
                out[mine] = _swiglu(x[mine], gate_up[i], down[i])
            return out

    elif grouped_mm_kernel(device, x.dtype):
        # the flat rows with each expert's end offset, as a served MoE calls it
        offs = torch.arange(1, e + 1, device=device, dtype=torch.int32) * rows
        gu_t, down_t = gate_up.transpose(1, 2), down.transpose(1, 2)  # (e, k, n) views

        def routed() -> torch.Tensor:
            a, up = torch._grouped_mm(x, gu_t, offs=offs).chunk(2, dim=-1)
            return torch._grouped_mm(F.silu(a) * up, down_t, offs=offs)

    else:
        # equal groups: one bmm over (experts, rows, k) views is the grouped GEMM
        xs, gu_t, down_t = x.view(e, rows, h), gate_up.transpose(1, 2), down.transpose(1, 2)

        def routed() -> torch.Tensor:
            a, up = torch.bmm(xs, gu_t).chunk(2, dim=-1)
            return torch.bmm(F.silu(a) * up, down_t).view(e * rows, h)

    if not shared:
        return routed
    tokens, shared_gate_up, shared_down = shared
    return lambda: (routed(), _swiglu(tokens, shared_gate_up, shared_down))


def build(
    spec: WorkloadSpec,
    device: torch.device,
    module_transform: ModuleTransform | None = None,
    channels_last: bool = False,
) -> Callable[[], object]:
    """A zero-argument callable that runs the workload once (inference, no autograd).

    module_transform rewrites the nn.Module of a block or model workload after it is built
    (measure/weights.py maps its weight matrices, say); the linear kernel's weight is then
    held as an nn.Linear for it to rewrite (without one it stays the plain F.linear call);
    other functional kernels have no module and ignore it.
    channels_last stores a convolution's 4-D input and weight in NHWC order (the memory-format
    knob); other kernels have no 4-D operands and ignore it.
    """
    gen = torch.Generator().manual_seed(INPUT_SEED)
    p = spec.params
    k = spec.kernel
    if k in ("embedding", "gpt_decoder"):
        torch.manual_seed(INPUT_SEED)
    if k == "linear":
        x, w = _inputs(spec, device, gen)
        if module_transform is None:
            return lambda: F.linear(x, w)
        layer = nn.Linear(w.shape[1], w.shape[0], bias=False, device=device, dtype=w.dtype)
        layer.weight = nn.Parameter(w, requires_grad=False)  # F.linear(x, w): the same weight
        mapped = module_transform(layer.eval())
        return lambda: mapped(x)
    if k == "bmm":
        a, b = _inputs(spec, device, gen)
        return lambda: torch.bmm(a, b)
    if k == "sdpa":
        q, kk, v = _inputs(spec, device, gen)
        causal = bool(p["causal"])
        return lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=causal)
    if k == "sdpa_gqa":
        # grouped-query attention at torch's default backend dispatch; a decode step's single
        # query sees every cached key, so it has no mask
        q, kk, v = _inputs(spec, device, gen)
        causal = bool(p["causal"])
        return lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=causal,
                                                      enable_gqa=True)  # fmt: skip
    if k in ("flex_decode_gqa", "flex_decode_gqa_paged"):
        return kernels_flex.build_decode(spec, device, _inputs(spec, device, gen), gen)
    if k in ("moe_experts_looped", "moe_experts_grouped"):
        return _moe_experts(spec, _inputs(spec, device, gen), device)
    if k == "scaled_mm":
        a, w = _inputs(spec, device, gen)
        one = torch.ones((), device=device)  # per-tensor scales of 1: the data is in range
        out = TORCH_DTYPES[p["out_dtype"]]
        # _scaled_mm takes the second operand column-major: the (n, k) weight transposed
        return lambda: torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=out)
    if k == "conv2d":
        x, w = _inputs(spec, device, gen)
        if channels_last:
            x, w = (t.contiguous(memory_format=torch.channels_last) for t in (x, w))
        stride, pad = p["stride"], p["padding"]
        return lambda: F.conv2d(x, w, stride=stride, padding=pad)
    if k == "layer_norm":
        x, weight, bias = _inputs(spec, device, gen)
        shape = (x.shape[-1],)
        return lambda: F.layer_norm(x, shape, weight, bias)
    if k == "rms_norm":
        x, weight = _inputs(spec, device, gen)
        shape = (x.shape[-1],)
        return lambda: F.rms_norm(x, shape, weight)
    if k == "softmax":
        (x,) = _inputs(spec, device, gen)
        return lambda: torch.softmax(x, dim=-1)
    if k == "gelu":
        (x,) = _inputs(spec, device, gen)
        return lambda: F.gelu(x)
    if k == "add":
        x, y = _inputs(spec, device, gen)
        return lambda: torch.add(x, y)
    if k == "sum":
        (x,) = _inputs(spec, device, gen)
        return lambda: x.sum(dim=-1)
    if k == "transpose_copy":
        (x,) = _inputs(spec, device, gen)
        return lambda: x.transpose(1, 2).contiguous()
    if k == "embedding":
        table = _tensor(spec.inputs[1].shape, spec.dtype, device, gen)
        ids = torch.randint(0, p["vocab"], tuple(spec.inputs[0].shape), generator=gen).to(device)
        return lambda: F.embedding(ids, table)
    if k == "mlp_block":
        d, f = p["hidden"], p["ffn"]
        block = _module(
            nn.Sequential(nn.Linear(d, f), nn.GELU(), nn.Linear(f, d)),
            spec,
            device,
            module_transform,
        )
        (x,) = _inputs(spec, device, gen)
        return lambda: block(x)
    if k == "encoder_layer":
        layer = nn.TransformerEncoderLayer(
            p["hidden"], p["heads"], p["ffn"], dropout=0.0, activation="gelu", batch_first=True
        )
        layer = _module(layer, spec, device, module_transform)
        (x,) = _inputs(spec, device, gen)
        return lambda: layer(x)
    if k == "gpt_decoder":
        model = GPTDecoder(p["vocab"], p["seq"], p["hidden"], p["heads"], p["ffn"], p["layers"])
        model = _module(model, spec, device, module_transform)
        ids = torch.randint(0, p["vocab"], (p["batch"], p["seq"]), generator=gen).to(device)
        return lambda: model(ids)
    raise ValueError(f"no builder for kernel {k!r} (workload {spec.id})")
