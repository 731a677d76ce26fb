"""Workload definitions' types, the model configurations, and the builders both workload sets use.

Torch-free. The core suite (suite/workloads.py) and the serving profile (suite/serving.py) both
build on this module, which imports neither: the GEMM (`linear`) and convolution (`conv2d`)
definitions, the causal-attention pair count, and the public model configurations live here so
that both sets describe them once. Counting conventions: suite/workloads.py's docstring.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from reviewkit.common.hashing import sha256_json

# Bump when a kernel's implementation in reviewkit/suite/kernels.py changes what it computes:
# the revision is part of every definition, so the suite hash changes with it.
KERNEL_REVISION = 1
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "int64": 8, "fp8": 1}


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * ELEMENT_BYTES[self.dtype]

    def to_json(self) -> dict:
        return {"shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class WorkloadSpec:
    """What is measured: identity only, no samples (torch's TaskSpec, not its Measurement)."""

    id: str
    layer_type: str
    kernel: str
    source_model: str
    dtype: str
    inputs: tuple[TensorSpec, ...]
    params: dict = field(default_factory=dict)
    matmul_flops: int = 0
    other_flops: int = 0
    bytes: int = 0

    @property
    def flops(self) -> int:
        return self.matmul_flops + self.other_flops

    def definition(self) -> dict:
        """The canonical definition that the suite hash covers."""
        d = asdict(self)
        d["inputs"] = [t.to_json() for t in self.inputs]
        d["kernel_revision"] = KERNEL_REVISION
        return d

    def definition_hash(self) -> str:
        return sha256_json(self.definition())[:16]


# --- model configurations the shapes come from -------------------------------------------
# Public configs: BERT-base (Devlin et al. 2019), GPT-2 small (Radford et al. 2019, HF config),
# Llama-2-7B (Touvron et al. 2023), Llama-3-8B (Meta's config.json), ResNet-50 (He et al. 2016).
@dataclass(frozen=True)
class ModelDims:
    name: str
    hidden: int
    heads: int
    ffn: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


BERT_BASE = ModelDims("BERT-base", 768, 12, 3072, 30522)
GPT2_SMALL = ModelDims("GPT-2 small", 768, 12, 3072, 50257)
LLAMA2_7B = ModelDims("Llama-2-7B", 4096, 32, 11008, 32000)
LLAMA3_8B = ModelDims("Llama-3-8B", 4096, 32, 14336, 128256)
# (channels, spatial size) of the 3x3 convolution in each ResNet-50 stage at 224x224 input.
RESNET50_STAGES = {"stage1": (64, 56), "stage2": (128, 28), "stage3": (256, 14), "stage4": (512, 7)}


def id_slug(text: str) -> str:
    return (
        text.lower()
        .replace(" (scaled to hidden ", "-s")
        .replace(" for smoke)", "")
        .replace(" ", "-")
        .replace(".", "")
    )


def make_workload_id(layer_type: str, name: str, shape_tag: str, dtype: str) -> str:
    return f"{layer_type}.{name}.{shape_tag}.{dtype}"


def linear(
    model: ModelDims, part: str, batch: int, seq: int, k: int, n: int, dtype: str
) -> WorkloadSpec:
    m = batch * seq
    x, w = TensorSpec((m, k), dtype), TensorSpec((n, k), dtype)
    return WorkloadSpec(
        id=make_workload_id("gemm", f"{id_slug(model.name)}-{part}", f"b{batch}s{seq}", dtype),
        layer_type="gemm",
        kernel="linear",
        source_model=model.name,
        dtype=dtype,
        inputs=(x, w),
        params={"batch": batch, "seq": seq, "m": m, "k": k, "n": n, "part": part},
        matmul_flops=2 * m * k * n,
        bytes=x.nbytes + w.nbytes + m * n * ELEMENT_BYTES[dtype],
    )


def attention_pairs(seq: int, causal: bool) -> int:
    """Query-key pairs a kernel must compute: all S*S, or S(S+1)/2 under a causal mask."""
    return seq * (seq + 1) // 2 if causal else seq * seq


def conv2d(
    stage: str, batch: int, channels: int, size: int, kernel: int, dtype: str
) -> WorkloadSpec:
    pad = kernel // 2
    x = TensorSpec((batch, channels, size, size), dtype)
    w = TensorSpec((channels, channels, kernel, kernel), dtype)
    out = batch * channels * size * size  # stride 1, "same" padding
    return WorkloadSpec(
        id=make_workload_id("conv", f"resnet-50-{stage}-conv{kernel}x{kernel}", f"n{batch}", dtype),
        layer_type="conv",
        kernel="conv2d",
        source_model="ResNet-50",
        dtype=dtype,
        inputs=(x, w),
        params={
            "batch": batch,
            "channels": channels,
            "size": size,
            "kernel": kernel,
            "stride": 1,
            "padding": pad,
        },
        matmul_flops=2 * out * channels * kernel * kernel,
        bytes=x.nbytes + w.nbytes + out * ELEMENT_BYTES[dtype],
    )
