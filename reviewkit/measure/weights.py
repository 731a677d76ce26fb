"""How a mapping stores and multiplies a workload's weight matrices: the sparsity and
quantization knobs applied to the nn.Linear modules the workload calls (torch)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from reviewkit.bundle import knobs
from reviewkit.common.errors import UsageError
from reviewkit.suite.workloads import WorkloadSpec

FP8_MAX = 448.0  # float8_e4m3fn's largest finite value: a per-tensor scale maps max|x| to it
INT8_MAX = 127  # symmetric int8 (-127..127): zero stays exactly zero, no zero point
# A scale is never zero: an all-zero row or activation would otherwise divide 0 by 0.
SMALLEST_SCALE = 1e-12
# The weight matrices each nn.MultiheadAttention multiplies by itself: its packed q/k/v
# in-projection and its out-projection, read as tensors by F.multi_head_attention_forward (or
# the fused kernel), never through an nn.Linear's forward, so a mapped module there would not run.
MHA_MATRICES = 2
MHA_NOT_MAPPED = (
    "nn.MultiheadAttention multiplies by its in-projection and out-projection weights itself "
    "(never through nn.Linear.forward): they stay dense"
)
# Warnings torch gives for what a mapping uses on purpose: a run's log is no place for them.
SILENCED = (
    r"torch\.ao\.quantization is deprecated",
    r"torch\.quantize_per_tensor, torch\.quantize_per_channel",
    r"Sparse CSR tensor support is in beta",
)
TORCH_DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        for message in SILENCED:
            warnings.filterwarnings("ignore", message=message)
        yield


# --- the mapped linears ------------------------------------------------------------------------


def _rows(x: torch.Tensor) -> torch.Tensor:
    """The activations as one (tokens, features) matrix: the sparse and low-precision GEMMs
    take 2-D operands."""
    return x.reshape(-1, x.shape[-1])



class CsrLinear(nn.Module):
    """y = x W^T + b with W stored CSR (torch.sparse), computed as (b + W x^T)^T: one sparse
    addmm with the CSR matrix on the left. F.linear(x, W_csr) transposes the sparse weight, and
    under inference_mode (where workloads are measured) torch 2.13 refuses that transpose
    ("Cannot set version_counter for inference tensor")."""

    def __init__(self, weight_csr: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.weight_csr = weight_csr
        self.bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = _rows(x).t()
        if self.bias is None:
            y = torch.mm(self.weight_csr, rows)
        else:
            y = torch.addmm(self.bias[:, None], self.weight_csr, rows)
        return y.t().reshape(*x.shape[:-1], y.shape[0])


class SemiStructuredLinear(nn.Module):
    """y = x W^T + b with W 2:4-pruned and compressed (torch.sparse.to_sparse_semi_structured)."""

    def __init__(self, weight_2_4: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.weight_2_4 = weight_2_4
        self.bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight_2_4, self.bias)


class Int8WeightOnlyLinear(nn.Module):
    """y = x (s * Q)^T + b: int8 weights Q with one scale per output channel, widened to the
    activations' dtype inside torch._weight_int8pack_mm; the bias added after it."""

    def __init__(self, weight_int8: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.weight_int8 = weight_int8
        self.scales = scales  # in the activations' dtype, as the kernel takes them
        self.bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch._weight_int8pack_mm(_rows(x), self.weight_int8, self.scales)
        y = y.reshape(*x.shape[:-1], y.shape[-1])
        return y if self.bias is None else y + self.bias


class Fp8Linear(nn.Module):
    """y = (s_x X8)(s_w W8)^T + b: e4m3 weights with one static scale, the activations scaled
    per call by their own max (dynamic per-tensor), through torch._scaled_mm, out in the
    activations' dtype; the bias added after it."""

    def __init__(self, weight_fp8: torch.Tensor, scale_w: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.weight_fp8 = weight_fp8
        self.scale_w = scale_w  # float32, 0-d
        self.bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = _rows(x)
        scale_x = rows.abs().amax().float().clamp(min=SMALLEST_SCALE) / FP8_MAX
        x8 = (rows / scale_x.to(rows.dtype)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        # _scaled_mm takes its second operand column-major: the row-major (out, in) weight's .t()
        y = torch._scaled_mm(x8, self.weight_fp8.t(), scale_a=scale_x, scale_b=self.scale_w,
                             out_dtype=x.dtype)  # fmt: skip
        y = y.reshape(*x.shape[:-1], y.shape[-1])
        return y if self.bias is None else y + self.bias


# --- pruning and quantizing one weight matrix ---------------------------------------------------


def prune_rows(weight: torch.Tensor, fraction_zeroed: float) -> torch.Tensor:
    """The weight with the `fraction_zeroed` smallest-magnitude entries of each row set to 0
    (rounded to whole entries per row), so every output channel keeps the same share."""
    zeroed = round(fraction_zeroed * weight.shape[1])
    out = weight.detach().clone()
    if zeroed:
        smallest = out.abs().topk(zeroed, dim=1, largest=False).indices
        out.scatter_(1, smallest, 0)
    return out


def prune_2_4(weight: torch.Tensor) -> torch.Tensor:
    """The weight with the two smaller-magnitude entries of every four consecutive ones in a
    row set to 0 (the 2:4 pattern semi-structured kernels take)."""
    rows, cols = weight.shape
    if cols % 4:
        raise ValueError(f"2:4 sparsity needs in_features divisible by 4, got {cols}")
    groups = weight.detach().reshape(rows, cols // 4, 4).clone()
    smallest = groups.abs().topk(2, dim=-1, largest=False).indices
    return groups.scatter_(-1, smallest, 0).reshape(rows, cols)


def int8_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(Q, s): symmetric int8 weights and one float32 scale per output row, s = max|w_row| / 127,
    Q = round(w / s) in -127..127, so s * Q is the weight a kernel multiplies by."""
    w = weight.detach().float()
    scales = w.abs().amax(dim=1).clamp(min=SMALLEST_SCALE) / INT8_MAX
    q = torch.round(w / scales[:, None]).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scales


def fp8_per_tensor(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(W8, s): e4m3 weights and one float32 scale, s = max|W| / 448, W8 = W / s."""
    w = weight.detach().float()
    scale = w.abs().amax().clamp(min=SMALLEST_SCALE) / FP8_MAX
    return (w / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def _bias(linear: nn.Linear) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias.detach()


def map_linear(linear: nn.Linear, sparsity: str, quantization: str) -> tuple[nn.Module, int]:
    """The mapped module standing in for `linear`, and the nonzero entries its stored weight
    keeps (measured on what it multiplies by)."""
    w = linear.weight.detach()
    if sparsity == knobs.SEMI_STRUCTURED:
        pruned = prune_2_4(w)
        sparse = torch.sparse.to_sparse_semi_structured(pruned)
        return SemiStructuredLinear(sparse, _bias(linear)), int(pruned.count_nonzero())
    if sparsity != knobs.DENSE:
        pruned = prune_rows(w, 1 - knobs.target_density(sparsity))
        csr = pruned.to_sparse_csr()
        return CsrLinear(csr, _bias(linear)), int(csr.values().count_nonzero())
    if quantization == knobs.INT8_WEIGHT_ONLY:
        q, scales = int8_per_channel(w)
        return Int8WeightOnlyLinear(q, scales.to(w.dtype), _bias(linear)), int(q.count_nonzero())
    if quantization == knobs.FP8:
        w8, scale = fp8_per_tensor(w)
        return Fp8Linear(w8, scale, _bias(linear)), w.numel()
    if quantization == knobs.INT8_DYNAMIC:
        import torch.ao.nn.quantized.dynamic as nnqd
        from torch.ao.quantization import default_dynamic_qconfig

        linear.qconfig = default_dynamic_qconfig  # what quantize_dynamic sets before from_float
        return nnqd.Linear.from_float(linear), w.numel()
    raise ValueError(f"no weight mapping for sparsity={sparsity}, quantization={quantization}")


# --- a workload's module -----------------------------------------------------------------------


@dataclass(frozen=True)
class WeightsRecord:
    """What a mapping did to one workload's weights: the `weights` table of its record."""

    sparsity: str
    quantization: str
    compute_dtype: str  # the GEMMs' dtype: int8, fp8, or the activations'
    kernel: str  # how a mapped linear multiplies, in words
    linears_mapped: int
    linears_not_mapped: int
    not_mapped_reason: str
    mapped_weight_elements: int  # entries of the mapped weight matrices, zeros included
    # dense FLOPs of the mapped linears' matmuls per call (2 x tokens x entries)
    mapped_flops: float
    density: float | None  # nonzero share of the mapped weights as stored (sparsity only)
    fused_layers_off: int  # encoder layers taken off torch's fused path (map_weights: why)
    emulated: str  # why the GEMM's time is an emulation's ("" when the device runs it)

    def to_json(self) -> dict:
        out = asdict(self)
        if self.density is None:
            del out["density"]
        for key in ("not_mapped_reason", "emulated"):
            if not out[key]:
                del out[key]
        if not self.fused_layers_off:
            del out["fused_layers_off"]
        return out


KERNEL_WORDS = {
    knobs.SEMI_STRUCTURED: "F.linear on a 2:4 semi-structured weight (torch.sparse)",
    "unstructured": "a CSR weight times the activations (torch.addmm, torch.sparse)",
    knobs.INT8_DYNAMIC: "torch.ao dynamic int8 Linear (int8 x int8 GEMM, activations "
    "quantized per call)",
    knobs.INT8_WEIGHT_ONLY: "torch._weight_int8pack_mm (int8 weights, per-output-channel "
    "scales, the activations' dtype)",
    knobs.FP8: "torch._scaled_mm (e4m3 weights and activations, per-tensor scales)",
}


def _kernel_words(sparsity: str, quantization: str) -> str:
    if sparsity == knobs.DENSE:
        return KERNEL_WORDS[quantization]
    return KERNEL_WORDS[knobs.SEMI_STRUCTURED if sparsity == knobs.SEMI_STRUCTURED
                        else "unstructured"]  # fmt: skip


def _replace(root: nn.Module, name: str, new: nn.Module) -> nn.Module:
    if not name:
        return new
    parent, _, child = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, child, new)
    return root


def tokens(spec: WorkloadSpec) -> int:
    """Rows each mapped linear multiplies per call (the workload's tokens)."""
    p = spec.params
    if spec.kernel == "linear":
        return int(p["m"])
    if spec.kernel == "mlp_block":
        return int(p["tokens"])
    return int(p["batch"]) * int(p["seq"])


def map_weights(
    module: nn.Module, sparsity: str, quantization: str, rows: int
) -> tuple[nn.Module, WeightsRecord]:
    """The module with every nn.Linear it calls replaced by its mapped version, and the record
    of it. `rows`: the tokens each linear multiplies per call (for the mapped FLOPs). Linears
    inside nn.MultiheadAttention are left dense and counted as not mapped."""
    knobs.check_weights({"sparsity": sparsity, "quantization": quantization}, "weights")
    if not knobs.maps_weights({"sparsity": sparsity, "quantization": quantization}):
        raise UsageError("map_weights: sparsity=dense and quantization=none map nothing")
    attention = [m for m in module.modules() if isinstance(m, nn.MultiheadAttention)]
    inside = {id(m) for a in attention for m in a.modules()}
    chosen = [(name, m) for name, m in module.named_modules()
              if isinstance(m, nn.Linear) and id(m) not in inside]  # fmt: skip
    if not chosen:
        raise ValueError(f"{type(module).__name__} calls no nn.Linear to map")
    first = chosen[0][1].weight
    dtype = TORCH_DTYPE_NAMES.get(first.dtype, str(first.dtype))
    nonzero = elements = 0
    with _quiet():
        for name, linear in chosen:
            mapped, kept = map_linear(linear, sparsity, quantization)
            nonzero += kept
            elements += linear.weight.numel()
            module = _replace(module, name, mapped)
    fused_off = 0
    for layer in module.modules():
        # TransformerEncoderLayer's fused path (torch._transformer_encoder_layer_fwd) reads
        # linear1.weight and linear2.weight itself, so a mapped FFN would never run in it. torch
        # reads this flag only to choose (and configure) that path: 0 declines it, and the
        # layer's attention keeps MHA's own fused kernel (MHA checks its own conditions).
        if (isinstance(layer, nn.TransformerEncoderLayer) and layer.activation_relu_or_gelu
                and not isinstance(layer.linear1, nn.Linear)):  # fmt: skip
            layer.activation_relu_or_gelu = 0
            fused_off += 1
    on = first.device.type
    record = WeightsRecord(
        sparsity=sparsity,
        quantization=quantization,
        compute_dtype=knobs.QUANTIZED_COMPUTE.get(quantization, dtype),
        kernel=_kernel_words(sparsity, quantization),
        linears_mapped=len(chosen),
        linears_not_mapped=MHA_MATRICES * len(attention),
        not_mapped_reason=MHA_NOT_MAPPED if attention else "",
        mapped_weight_elements=elements,
        mapped_flops=2.0 * rows * elements,
        density=nonzero / elements if sparsity != knobs.DENSE else None,
        fused_layers_off=fused_off,
        emulated=(f"no fp8 matrix units on a {on} device: torch emulates the fp8 GEMM, so the "
                  "time is the emulation's" if quantization == knobs.FP8 and on != "cuda"
                  else ""),
    )  # fmt: skip
    return module, record


class WeightTransform:
    """A module transform (suite/kernels.ModuleTransform) mapping a workload's weights, keeping
    the record of what it did (None until it has run)."""

    def __init__(self, sparsity: str, quantization: str, rows: int):
        self.sparsity, self.quantization, self.rows = sparsity, quantization, rows
        self.record: WeightsRecord | None = None

    def __call__(self, module: nn.Module) -> nn.Module:
        module, self.record = map_weights(module, self.sparsity, self.quantization, self.rows)
        return module


def transform_for(
    settings: dict, spec: WorkloadSpec, device: torch.device
) -> WeightTransform | None:
    """The weight transform these settings give `spec` on `device`, or None when they leave its
    weights alone (no weight knob set, or one that does not apply to it: knobs_not_applicable
    records why)."""
    if not knobs.maps_weights(settings):
        return None
    own = {k: settings[k] for k in ("sparsity", "quantization") if k in settings}
    if knobs.not_applicable(own, spec.kernel, spec.dtype, device.type):
        return None
    sparsity = str(own.get("sparsity", knobs.DENSE))
    return WeightTransform(sparsity, str(own.get("quantization", knobs.NO_QUANTIZATION)),
                           tokens(spec))  # fmt: skip
