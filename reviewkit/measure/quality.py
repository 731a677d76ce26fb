"""Precision quality drift: each workload in lower precision against a float64 reference."""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Sequence

import torch

from reviewkit.common.errors import UsageError
from reviewkit.evidence import files as evidence
from reviewkit.evidence.files import STATUS_NOT_APPLICABLE, STATUS_OK
from reviewkit.measure import environment
from reviewkit.suite import kernels
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import DEFAULT_SUITE_PROFILE
from reviewkit.suite.workloads import TensorSpec, WorkloadSpec

KIND = evidence.QUALITY
SCHEMA_VERSION = evidence.SCHEMA_VERSIONS[KIND]
QUALITY_DTYPES = ("bf16", "fp16", "int8")
REFERENCE = "fp64"
# Independent seeded input sets for the model's top-1 agreement and KL: enough tokens that one
# flipped argmax moves agreement by well under a percent at the quick profile.
MODEL_INPUT_SETS = 4
STATUS_ERROR = "error"
# int8 dynamic quantisation replaces nn.Linear modules; functional kernels have none.
INT8_KERNELS = ("mlp_block", "encoder_layer", "gpt_decoder")

kernels.TORCH_DTYPES.setdefault(REFERENCE, torch.float64)


def _at(spec: WorkloadSpec, dtype: str) -> WorkloadSpec:
    """The same workload with every floating-point tensor in another dtype."""
    inputs = tuple(TensorSpec(t.shape, t.dtype if t.dtype == "int64" else dtype)
                   for t in spec.inputs)  # fmt: skip
    return dataclasses.replace(spec, dtype=dtype, inputs=inputs)


def _output(spec: WorkloadSpec, dtype: str, device: torch.device, seed: int) -> torch.Tensor:
    """Build and run once with the global RNG seeded, so module weights match across dtypes."""
    torch.manual_seed(seed)
    if dtype != "int8":
        with torch.inference_mode():
            return kernels.build(_at(spec, dtype), device)().to(torch.float64)
    # The fused TransformerEncoderLayer fast path reads .weight of its linears, which quantised
    # linears do not have: run the quantised modules on the regular path.
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.inference_mode():
            return _int8(spec, device, seed)().to(torch.float64)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


def _int8(spec: WorkloadSpec, device: torch.device, seed: int):
    """fp32 module with its nn.Linear layers dynamically quantised to int8."""
    from torch.ao.quantization import quantize_dynamic

    def quantise(module: torch.nn.Module) -> torch.nn.Module:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization announces a move to torchao
            return quantize_dynamic(module, {torch.nn.Linear}, dtype=torch.qint8)

    return kernels.build(_at(spec, "fp32"), device, module_transform=quantise)


def errors(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(norm(out - ref) / norm(ref), max abs(out - ref)), in float64."""
    diff = (out - ref).double()
    ref_norm = ref.double().norm().item()
    rel = diff.norm().item() / ref_norm if ref_norm > 0 else (0.0 if diff.norm() == 0 else math.inf)
    return rel, diff.abs().max().item()


def logit_agreement(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(top-1 agreement, mean KL(ref ‖ out) in nats) over every token position."""
    ref_logp = torch.log_softmax(ref.double(), dim=-1)
    out_logp = torch.log_softmax(out.double(), dim=-1)
    agree = (out.argmax(-1) == ref.argmax(-1)).double().mean().item()
    kl = (ref_logp.exp() * (ref_logp - out_logp)).sum(-1).mean().item()
    return agree, kl


def measure_quality(
    profile: str = DEFAULT_SUITE_PROFILE,
    device: str = "cpu",
    dtypes: Sequence[str] = QUALITY_DTYPES,
    only: str | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Relative and max-abs error of every workload per lower dtype, against float64."""
    from reviewkit.analysis.compare import shape_key
    from reviewkit.measure.device import resolve_device

    bad = [d for d in dtypes if d not in QUALITY_DTYPES]
    if bad or not dtypes:
        raise UsageError(f"--dtype {','.join(bad) or '(empty)'}: choose from "
                         f"{', '.join(QUALITY_DTYPES)}")  # fmt: skip
    specs = suite.plan_specs(profile, ("fp32",), only)
    dev = resolve_device(device)
    progress = on_progress or (lambda *_: None)
    results = []
    for i, spec in enumerate(specs):
        progress(spec.id, i, len(specs))
        key = shape_key(spec.id, spec.dtype)
        sets = MODEL_INPUT_SETS if spec.kernel == "gpt_decoder" else 1
        try:
            refs = [_output(spec, REFERENCE, dev, kernels.INPUT_SEED + s) for s in range(sets)]
        except Exception as exc:  # a failure is data
            results += [
                {
                    "id": key,
                    "layer_type": spec.layer_type,
                    "dtype": d,
                    "status": STATUS_ERROR,
                    "reason": f"reference: {exc}",
                }
                for d in dtypes
            ]
            continue
        for dtype in dtypes:
            row = {"id": key, "layer_type": spec.layer_type, "dtype": dtype}
            if dtype == "int8" and spec.kernel not in INT8_KERNELS:
                results.append(
                    {
                        **row,
                        "status": STATUS_NOT_APPLICABLE,
                        "reason": "int8 dynamic quantisation applies to nn.Linear modules",
                    }
                )
                continue
            try:
                outs = [_output(spec, dtype, dev, kernels.INPUT_SEED + s) for s in range(sets)]
            except Exception as exc:
                results.append(
                    {**row, "status": STATUS_ERROR, "reason": f"{type(exc).__name__}: {exc}"[:200]}
                )
                continue
            rel, max_abs = errors(torch.cat([o.flatten() for o in outs]),
                                  torch.cat([r.flatten() for r in refs]))  # fmt: skip
            row.update(status=STATUS_OK, rel_error=rel, max_abs_error=max_abs)
            if spec.kernel == "gpt_decoder":
                agree, kl = logit_agreement(torch.cat(outs), torch.cat(refs))
                row.update(top1_agreement=agree, kl_divergence=kl, input_sets=sets)
            results.append(row)
    progress("done", len(specs), len(specs))
    return {
        **evidence.header(KIND, time.time()),
        "profile": profile,
        "suite": suite.suite_identity().to_json(),
        "reference": REFERENCE,
        "device": str(dev),
        "environment": {**environment.host_facts(), "torch_version": torch.__version__},
        "results": results,
    }
