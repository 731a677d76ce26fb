"""The mapping knobs a run records: their spelling, values, which workloads each applies to, and
which `run --knob` and `ab` can set. One registry for every command that takes a knob."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reviewkit.bundle.profile import FP32_MATMUL_PRECISIONS
from reviewkit.common.errors import UsageError
from reviewkit.suite.workloads import DTYPES

# knob value -> torch.nn.attention.SDPBackend member
ATTENTION_BACKENDS = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}
MEMORY_FORMATS = ("contiguous", "channels_last")
# How a workload's weight matrices are stored and multiplied (measure/weights.py maps them).
# unstructured-N: N percent of each weight row's entries (the smallest in magnitude) zeroed and
# the matrix stored CSR; 2:4: two of every four consecutive weights zeroed, stored semi-structured.
DENSE, SEMI_STRUCTURED = "dense", "2:4"
UNSTRUCTURED_PERCENTS = (50, 75, 90)
SPARSITIES = (DENSE, SEMI_STRUCTURED, *(f"unstructured-{p}" for p in UNSTRUCTURED_PERCENTS))
NO_QUANTIZATION, INT8_DYNAMIC, INT8_WEIGHT_ONLY, FP8 = (
    "none", "int8-dynamic", "int8-weight-only", "fp8")  # fmt: skip
QUANTIZATIONS = (NO_QUANTIZATION, INT8_DYNAMIC, INT8_WEIGHT_ONLY, FP8)
# The GEMM a quantization multiplies in, when not the activations' dtype: its MFU divides by
# that dtype's ceiling (int8-weight-only widens its int8 weights to the activations' dtype).
QUANTIZED_COMPUTE = {INT8_DYNAMIC: "int8", FP8: "fp8"}
BOOLEANS = {"true": True, "false": False, "on": True, "off": False, "1": True, "0": False}

# Suite kernels by what they hold (suite/kernels.py builds them).
MODULE_KERNELS = ("mlp_block", "encoder_layer", "gpt_decoder")  # nn.Modules with nn.Linear
ATTENTION_KERNELS = ("sdpa", "sdpa_gqa", "encoder_layer", "gpt_decoder")  # through SDPA
# FlexAttention: compiled in its builder whatever compile_mode (suite/kernels_flex.py), outside SDPA
FLEX_KERNELS = ("flex_decode_gqa", "flex_decode_gqa_paged")
MATMUL_KERNELS = ("linear", "bmm", "sdpa", "sdpa_gqa", "conv2d", "moe_experts_looped",
                  "moe_experts_grouped", *FLEX_KERNELS, *MODULE_KERNELS)  # fmt: skip
# The kernels holding a weight matrix: `linear` multiplies by one, the modules' nn.Linear do.
WEIGHT_KERNELS = ("linear", *MODULE_KERNELS)

# (kernel, dtype, device type, the knob's value) -> "" when the knob changes how the workload
# runs, else why not.
Applies = Callable[[str, str, str, object], str]


def _everywhere(kernel: str, dtype: str, device_type: str, value: object) -> str:
    return ""


def _fp32_matmuls(kernel: str, dtype: str, device_type: str, value: object) -> str:
    if dtype != "fp32":
        return f"float32 matmul precision only changes fp32 matmuls; this workload is {dtype}"
    if kernel not in MATMUL_KERNELS:
        return f"the {kernel} kernel does no matmul"
    return ""


def _onednn(kernel: str, dtype: str, device_type: str, value: object) -> str:
    return "" if device_type == "cpu" else "oneDNN is the CPU's kernel library"


def _attention(kernel: str, dtype: str, device_type: str, value: object) -> str:
    if kernel in FLEX_KERNELS:
        return "FlexAttention is its own compiled kernel, not one of SDPA's backends"
    return "" if kernel in ATTENTION_KERNELS else f"the {kernel} kernel has no attention"


def _compile(kernel: str, dtype: str, device_type: str, value: object) -> str:
    if value == "eager" and kernel in FLEX_KERNELS:
        return ("the flex kernels compile flex_attention in their builder whatever compile_mode "
                "says: its eager path is a reference that materialises the scores")
    return ""


def _convolutions(kernel: str, dtype: str, device_type: str, value: object) -> str:
    return "" if kernel == "conv2d" else f"the {kernel} kernel has no 4-D operands to lay out"


def _weights(kernel: str) -> str:
    if kernel not in WEIGHT_KERNELS:
        return f"the {kernel} kernel holds no weight matrix"
    return ""


def _sparsity(kernel: str, dtype: str, device_type: str, value: object) -> str:
    if value == DENSE:
        return ""  # how every workload runs anyway
    if why := _weights(kernel):
        return why
    if value == SEMI_STRUCTURED:
        if device_type != "cuda":
            return (f"2:4 semi-structured sparsity runs on CUDA only (torch.sparse."
                    f"to_sparse_semi_structured); this is {device_type}")  # fmt: skip
        if dtype not in ("fp16", "bf16"):
            return f"2:4 semi-structured sparsity takes fp16 or bf16 weights; this is {dtype}"
        return ""
    if device_type == "cpu" and dtype != "fp32":
        return (f"a CSR weight multiplies on the CPU in fp32 only (MKL's sparse addmm has no "
                f"{dtype} kernel)")  # fmt: skip
    return ""


def _quantization(kernel: str, dtype: str, device_type: str, value: object) -> str:
    if value == NO_QUANTIZATION:
        return ""
    if why := _weights(kernel):
        return why
    if value == INT8_DYNAMIC and (dtype != "fp32" or device_type != "cpu"):
        return "int8 dynamic quantization (torch.ao) rewrites fp32 nn.Linear modules for the CPU"
    return ""  # int8-weight-only and fp8 take any float activations (fp8 emulated on a CPU)


def _cuda_only(kernel: str, dtype: str, device_type: str, value: object) -> str:
    if not value or device_type == "cuda":
        return ""  # off is how every workload runs anyway
    return (f"the L2 flush between calls applies to t_device on CUDA only (measure/"
            f"device_time.py); this is {device_type}")  # fmt: skip


@dataclass(frozen=True)
class Knob:
    """One knob as a run records it (its `knobs` key) and as a command takes it (KEY=VALUE)."""

    name: str
    help: str
    values: tuple[str, ...] = ()  # the accepted spellings; () for a positive integer
    # "" when `ab` can switch it between two calls in one process, else why not
    not_in_process: str = ""
    # "" when `run --knob` and `ab` can set it, else why not (yet)
    not_settable: str = ""
    applies: Applies = _everywhere

    def parse(self, value: str, option: str) -> object:
        if not self.values:
            if not value.isdigit() or int(value) < 1:
                raise UsageError(f"{option}: {self.name}={value!r}: expected a positive integer")
            return int(value)
        if value not in self.values:
            raise UsageError(
                f"{option}: {self.name}={value!r}: choose one of {', '.join(self.values)}"
            )
        return BOOLEANS[value] if self.values == tuple(BOOLEANS) else value


KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("dtype", "the workloads' dtype", DTYPES),
    Knob("threads", "intra-op threads (torch.set_num_threads)"),
    Knob("float32_matmul_precision", "torch.set_float32_matmul_precision: high and medium let "
         "fp32 matmuls run in TF32 or bf16", FP32_MATMUL_PRECISIONS, applies=_fp32_matmuls),
    Knob("mkldnn_enabled", "oneDNN on the CPU (torch.backends.mkldnn)", tuple(BOOLEANS),
         applies=_onednn),
    Knob("attention_backend", "the SDPA backend (torch.nn.attention.sdpa_kernel)",
         ("default", *ATTENTION_BACKENDS), applies=_attention),
    Knob("memory_format", "a convolution's operands in NCHW or NHWC order", MEMORY_FORMATS,
         applies=_convolutions),
    Knob("quantization", "the weight matrices quantized: int8-dynamic (torch.ao, int8 x int8 "
         "GEMMs), int8-weight-only (int8 weights, per-output-channel scales, the activations' "
         "dtype), fp8 (e4m3 weights and activations, per-tensor scales)", QUANTIZATIONS,
         applies=_quantization),
    Knob("interop_threads", "inter-op threads (torch.set_num_interop_threads)",
         not_in_process="torch sizes its inter-op thread pool once, at the first parallel "
         "work, and refuses to change it after",
         not_settable="torch sizes its inter-op pool before reviewkit starts measuring"),
    Knob("compile_mode", "torch.compile's mode, static shapes, each workload compiled once "
         "before its samples", ("eager", "default", "reduce-overhead", "max-autotune"),
         applies=_compile),
    Knob("sparsity", "the weight matrices pruned by magnitude: 2:4 semi-structured (CUDA), or "
         "unstructured-N, N percent of each row's weights zeroed and stored CSR", SPARSITIES,
         applies=_sparsity),
    Knob("l2_flush", "a buffer twice the L2 written before each call of t_device (CUDA "
         "only), outside its timing: cold-cache device times", tuple(BOOLEANS),
         not_in_process="ab times per-call samples only; t_device is a phase of `run`",
         applies=_cuda_only),
    Knob("device", "the device measured",
         not_in_process="one process measures one device here; a comparison across devices "
         "is two runs",
         not_settable="a run's device is `reviewkit run --device`: measure one run per "
         "device and `reviewkit compare` them"),
)}  # fmt: skip
# What `run --knob` and `ab` set, in the order `--help` lists them.
SETTABLE = tuple(name for name, k in KNOBS.items() if not k.not_settable)


def parse_settings(text: str, option: str, *, in_process: bool = False) -> dict[str, object]:
    """`KNOB=VALUE[,KNOB=VALUE]` into checked settings; a clear error names the knob. With
    `in_process`, only knobs `ab` can switch between two calls of one process."""
    out: dict[str, object] = {}
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise UsageError(f"{option} {text!r}: expected KNOB=VALUE[,KNOB=VALUE], got {part!r}")
        knob = KNOBS.get(name)
        if knob is None:
            raise UsageError(f"{option}: unknown knob {name!r}; choose from {', '.join(SETTABLE)}")
        if in_process and knob.not_in_process:
            instead = (
                f"and `reviewkit run` cannot set it either: {knob.not_settable}"
                if knob.not_settable
                else f"measure two runs instead: `reviewkit run --knob {name}=... --rounds N "
                "--out A` with the baseline setting, then with the candidate's, and "
                "`reviewkit compare A B`"
            )
            raise UsageError(
                f"{option}: knob {name!r} cannot be switched in one process "
                f"({knob.not_in_process}); {instead}"
            )
        if knob.not_settable:
            raise UsageError(f"{option}: knob {name!r} cannot be set here: {knob.not_settable}")
        if name in out:
            raise UsageError(f"{option}: knob {name!r} is given twice")
        out[name] = knob.parse(value, option)
    check_weights(out, option)
    return out


def check_weights(settings: dict[str, object], option: str) -> None:
    """Refuse sparsity and quantization together: no mapping here prunes and quantizes one
    weight matrix (a CSR or 2:4 weight has no int8 or fp8 kernel to multiply it)."""
    sparsity = settings.get("sparsity", DENSE)
    quantization = settings.get("quantization", NO_QUANTIZATION)
    if sparsity != DENSE and quantization != NO_QUANTIZATION:
        raise UsageError(
            f"{option}: sparsity={sparsity} and quantization={quantization} cannot be set "
            "together: no mapping here both prunes and quantizes a weight matrix; set one "
            "of the two knobs"
        )


def maps_weights(settings: dict[str, object]) -> bool:
    """Whether these settings change how weight matrices are stored and multiplied."""
    return (settings.get("sparsity", DENSE) != DENSE
            or settings.get("quantization", NO_QUANTIZATION) != NO_QUANTIZATION)  # fmt: skip


def target_density(sparsity: object) -> float:
    """The share of weights a sparsity keeps: 0.5 for 2:4, 1 - N/100 for unstructured-N."""
    if sparsity == SEMI_STRUCTURED:
        return 0.5
    if isinstance(sparsity, str) and sparsity.startswith("unstructured-"):
        return 1 - int(sparsity.removeprefix("unstructured-")) / 100
    return 1.0


def compute_dtype(settings: dict[str, object], kernel: str, dtype: str, device_type: str) -> str:
    """The dtype a workload's GEMMs multiply in under these settings (its ceiling's dtype): an
    applicable int8-dynamic or fp8 quantization's, else the workload's own."""
    quantization = settings.get("quantization", NO_QUANTIZATION)
    if quantization in QUANTIZED_COMPUTE and not _quantization(
        kernel, dtype, device_type, quantization
    ):
        return QUANTIZED_COMPUTE[str(quantization)]
    return dtype


def not_applicable(
    settings: dict[str, object], kernel: str, dtype: str, device_type: str
) -> dict[str, str]:
    """The knobs set here that do not change how this workload runs, each with why not."""
    out = {}
    for name in settings:
        why = KNOBS[name].applies(kernel, dtype, device_type, settings[name])
        if why:
            out[name] = why
    return out


def help_text() -> str:
    """One line per settable knob and its values, for `--help`."""
    settable = "; ".join(
        f"{k.name}={' | '.join(k.values) if k.values else 'N'}"
        for k in KNOBS.values()
        if not k.not_settable and k.name != "dtype"
    )
    recorded = ", ".join(k.name for k in KNOBS.values() if k.not_settable)
    return f"{settable} (recorded, not settable here yet: {recorded})"
