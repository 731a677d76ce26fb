"""Quality drift of a mapping: the suite's workloads, or a team's exported program, under the
mapping's knobs against a float64 reference."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch

from reviewkit.bundle import knobs
from reviewkit.common.errors import UsageError
from reviewkit.evidence import files as evidence
from reviewkit.evidence.files import STATUS_NOT_APPLICABLE, STATUS_OK
from reviewkit.evidence.quality import SOURCE_MODEL, SOURCE_SUITE
from reviewkit.measure import environment
from reviewkit.measure.loader_safety import INPUTS_LOADER, PROGRAM_LOADER
from reviewkit.suite import kernels
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import DEFAULT_SUITE_PROFILE
from reviewkit.suite.workloads import TensorSpec, WorkloadSpec

KIND = evidence.QUALITY
SCHEMA_VERSION = evidence.SCHEMA_VERSIONS[KIND]
REFERENCE = "fp64"
STATUS_ERROR = "error"
# `--dtype` as it always was: each lower precision one mapping; int8 is int8 dynamic
# quantisation of the fp32 nn.Linear modules (`--knob quantization=int8-dynamic`).
DTYPE_MAPPINGS = {"bf16": {"dtype": "bf16"}, "fp16": {"dtype": "fp16"},
                  "int8": {"quantization": "int8-dynamic"}}  # fmt: skip
QUALITY_DTYPES = tuple(DTYPE_MAPPINGS)
# The fp32 matmul precisions in the narrower format torch runs them in: the tolerance key.
FP32_MATMUL_AS = {"high": "tf32", "medium": "bf16"}
SOURCE_TEXT = {SOURCE_SUITE: "suite random weights", SOURCE_MODEL: "model"}
COMPILE_REFUSED = (
    "quality measures a mapping's numerics in eager mode: torch.compile's fused kernels round "
    "differently again, and compiling every workload once per mapping costs minutes; drop "
    "compile_mode (the eager figures are the mapping's precision drift)"
)

kernels.TORCH_DTYPES.setdefault(REFERENCE, torch.float64)


def quality_mappings(dtype_text: str | None, knob_text: str) -> list[dict]:
    """The mappings a `quality` call measures: each `--dtype` (default bf16,fp16,int8 without
    `--knob`) under the `--knob` settings, or the `--knob` settings alone."""
    settings = knobs.parse_settings(knob_text, "--knob")
    mode = settings.pop("compile_mode", "eager")
    if mode != "eager":
        raise UsageError(f"--knob compile_mode={mode}: {COMPILE_REFUSED}")
    if dtype_text is None:
        dtypes = () if settings else QUALITY_DTYPES
    else:
        dtypes = tuple(d.strip() for d in dtype_text.split(",") if d.strip())
        bad = [d for d in dtypes if d not in DTYPE_MAPPINGS]
        if bad or not dtypes:
            raise UsageError(f"--dtype {','.join(bad) or '(empty)'}: choose from "
                             f"{', '.join(QUALITY_DTYPES)}")  # fmt: skip
    if not dtypes:
        return [settings]
    out = []
    for d in dtypes:
        both = sorted(set(DTYPE_MAPPINGS[d]) & set(settings))
        if both:
            raise UsageError(f"--dtype {d} and --knob {both[0]}=... both set {both[0]}; keep one")
        out.append({**DTYPE_MAPPINGS[d], **settings})
    return out


def precision_label(settings: dict) -> str:
    """The narrowest precision a mapping computes in: the rubric's tolerance key."""
    quantization = str(settings.get("quantization", "none"))
    if quantization != "none":  # int8-dynamic, int8-weight-only -> int8; fp8 -> fp8
        m = re.match(r"(int|fp)\d+", quantization)
        return m.group(0) if m else quantization
    dtype = str(settings.get("dtype", "fp32"))
    if dtype == "fp32":
        return FP32_MATMUL_AS.get(str(settings.get("float32_matmul_precision")), "fp32")
    return dtype


def errors(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(norm(out - ref) / norm(ref), max abs(out - ref)), in float64."""
    diff = (out - ref).double()
    ref_norm = ref.double().norm().item()
    rel = diff.norm().item() / ref_norm if ref_norm > 0 else (0.0 if diff.norm() == 0 else math.inf)
    return rel, diff.abs().max().item()


def logit_agreement(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(top-1 agreement, mean KL(ref ‖ out) in nats) over every position of the last dim."""
    ref_logp = torch.log_softmax(ref.double(), dim=-1)
    out_logp = torch.log_softmax(out.double(), dim=-1)
    agree = (out.argmax(-1) == ref.argmax(-1)).double().mean().item()
    kl = (ref_logp.exp() * (ref_logp - out_logp)).sum(-1).mean().item()
    return agree, kl


def _figures(outs: list[torch.Tensor], refs: list[torch.Tensor], logits: bool) -> dict:
    rel, max_abs = errors(torch.cat([o.flatten() for o in outs]),
                          torch.cat([r.flatten() for r in refs]))  # fmt: skip
    row = {"status": STATUS_OK, "rel_error": rel, "max_abs_error": max_abs}
    if logits:
        agree, kl = logit_agreement(outs[0], refs[0])
        row.update(top1_agreement=agree, kl_divergence=kl,
                   positions=refs[0].numel() // refs[0].shape[-1])  # fmt: skip
    return row


def _failed(exc: BaseException, where: str = "") -> dict:
    return {"status": STATUS_ERROR, "reason": f"{where}{type(exc).__name__}: {exc}"[:200]}


def _not_applicable(why: dict[str, str]) -> dict:
    return {"status": STATUS_NOT_APPLICABLE,
            "reason": "; ".join(f"{k}: {v}" for k, v in why.items())}  # fmt: skip


@contextlib.contextmanager
def _quantisable(settings: dict) -> Iterator[None]:
    """The fused TransformerEncoderLayer fast path reads .weight of its linears, which
    quantised linears do not have: a quantised mapping runs the regular path."""
    if settings.get("quantization", "none") == "none":
        yield
        return
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization announces a move to torchao
            yield
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


def _at(spec: WorkloadSpec, dtype: str) -> WorkloadSpec:
    """The same workload with every floating-point tensor in another dtype."""
    inputs = tuple(TensorSpec(t.shape, t.dtype if t.dtype == "int64" else dtype)
                   for t in spec.inputs)  # fmt: skip
    return dataclasses.replace(spec, dtype=dtype, inputs=inputs)


def _suite_output(spec: WorkloadSpec, settings: dict | None, device) -> torch.Tensor:
    """One call of the workload in float64: the reference (settings None: the plain float64
    build), or under a mapping built by KnobMapping.eager_build, as `run --knob` builds it.
    The global RNG is seeded first, so module weights match across mappings."""
    from reviewkit.measure.mapping import KnobMapping

    torch.manual_seed(kernels.INPUT_SEED)
    if settings is None:
        with torch.inference_mode():
            return kernels.build(_at(spec, REFERENCE), device)().to(torch.float64)
    dtype = str(settings.get("dtype", "fp32"))
    mapping = KnobMapping(settings=dict(settings), dtypes=(dtype,))
    with _quantisable(settings), mapping.active(), torch.inference_mode():
        return mapping.eager_build(_at(spec, dtype), device)().to(torch.float64)


def _header(device, rows: list[dict], mappings: Sequence[dict], reference: str = REFERENCE,
            **fields) -> dict:  # fmt: skip
    return {
        **evidence.header(KIND, time.time()),
        **fields,
        "reference": reference,
        "device": str(device),
        "mappings": [dict(m) for m in mappings],
        "environment": {**environment.host_facts(), "torch_version": torch.__version__},
        "results": rows,
    }


def measure_quality(
    profile: str = DEFAULT_SUITE_PROFILE,
    device: str = "cpu",
    mappings: Sequence[dict] = tuple(DTYPE_MAPPINGS.values()),
    only: str | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Relative and max-abs error of every suite workload under each mapping, against float64.
    The decoder's top-1 and KL are a smoke check: its weights are random, its logits near
    uniform, so they say how fragile an argmax is, not how a trained model fares."""
    from reviewkit.analysis.compare import shape_key
    from reviewkit.measure.device import resolve_device

    specs = suite.plan_specs(profile, ("fp32",), only)
    dev = resolve_device(device)
    progress = on_progress or (lambda *_: None)
    results = []
    for i, spec in enumerate(specs):
        progress(spec.id, i, len(specs))
        model = spec.kernel == "gpt_decoder"
        rows = [{"id": shape_key(spec.id, spec.dtype), "layer_type": spec.layer_type,
                 "dtype": precision_label(m), "mapping": dict(m), "source": SOURCE_SUITE,
                 **({"smoke_check": True} if model else {})} for m in mappings]  # fmt: skip
        try:
            ref = _suite_output(spec, None, dev)
        except Exception as exc:  # a failure is data
            results += [{**row, **_failed(exc, "reference: ")} for row in rows]
            continue
        for row, settings in zip(rows, mappings, strict=True):
            dtype = str(settings.get("dtype", "fp32"))
            why = knobs.not_applicable(settings, spec.kernel, dtype, dev.type)
            if why:
                results.append({**row, **_not_applicable(why)})
                continue
            try:
                out = _suite_output(spec, settings, dev)
            except Exception as exc:
                results.append({**row, **_failed(exc)})
                continue
            results.append({**row, **_figures([out], [ref], logits=model)})
    progress("done", len(specs), len(specs))
    return _header(dev, results, mappings, profile=profile, source=SOURCE_TEXT[SOURCE_SUITE],
                   suite=suite.suite_identity().to_json())  # fmt: skip


def measure_program_quality(
    model: Path,
    inputs: Path,
    device: str = "cpu",
    mappings: Sequence[dict] = tuple(DTYPE_MAPPINGS.values()),
    logits: bool | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """A team's exported program under its baseline (as exported) and each mapping, against a
    float64 run of the same program (the fp32 baseline where float64 cannot run it)."""
    from reviewkit.common.hashing import sha256_file
    from reviewkit.measure import program as prog
    from reviewkit.measure.device import resolve_device

    dev = resolve_device(device)
    progress = on_progress or (lambda *_: None)
    progress("loading the program", 0, len(mappings) + 2)
    loaded = prog.load_program(model)
    args, kwargs = prog.load_inputs(inputs, loaded)
    try:
        base = prog.run(loaded, args, kwargs, None, {}, dev)
    except Exception as exc:  # the inputs are checked by running them once, as exported
        raise UsageError(f"--inputs {inputs}: the program did not run on them "
                         f"({type(exc).__name__}: {str(exc)[:160]}); save inputs of the shapes "
                         "and dtypes it was exported with") from None  # fmt: skip
    if not base:
        raise UsageError(f"--model {model}: its outputs hold no floating-point tensor to compare")
    progress("float64 reference", 1, len(mappings) + 2)
    reference, note = REFERENCE, "every op of the graph in float64, its fixed dtypes included"
    try:
        refs = prog.run(loaded, args, kwargs, REFERENCE, {}, dev, whole_graph=True)
        if [r.shape for r in refs] != [b.shape for b in base]:
            raise ValueError("its outputs differ in number or shape from the program's own")
    except Exception as exc:  # said in the file: the run as exported stands in
        reference, refs = loaded.exported_dtype, base
        note = (f"float64 could not run the program ({type(exc).__name__}: {str(exc)[:120]}): "
                f"the reference is the program as exported ({reference})")  # fmt: skip
    is_logits = prog.looks_like_logits(refs) if logits is None else logits
    name = f"model:{model.name}"
    rows = []
    if reference == REFERENCE:
        rows.append({"id": name, "layer_type": "model", "dtype": loaded.exported_dtype,
                     "mapping": {}, "source": SOURCE_MODEL, "role": "baseline",
                     **_figures(base, refs, is_logits)})  # fmt: skip
    for i, settings in enumerate(mappings):
        progress(f"mapping {i + 1}", i + 2, len(mappings) + 2)
        row = {"id": name, "layer_type": "model", "dtype": precision_label(settings),
               "mapping": dict(settings), "source": SOURCE_MODEL, "role": "candidate"}  # fmt: skip
        why = prog.not_applicable(settings, loaded, dev.type)
        if why:
            rows.append({**row, **_not_applicable(why)})
            continue
        try:
            dtype = settings.get("dtype")
            outs = prog.run(loaded, args, kwargs, dtype and str(dtype), settings, dev)
        except Exception as exc:
            rows.append({**row, **_failed(exc)})
            continue
        rows.append({**row, **_figures(outs, refs, is_logits)})
    progress("done", len(mappings) + 2, len(mappings) + 2)
    sha = loaded.sha256
    block = {
        "path": str(model), "sha256": sha,
        "inputs": {"path": str(inputs), "sha256": sha256_file(inputs)},
        "exported_dtype": loaded.exported_dtype,
        "fixed_dtype_ops": loaded.fixed_dtype_ops,
        "reference": reference, "reference_note": note,
        "logits": {"used": is_logits, "rule": "auto" if logits is None else "--logits"
                   if logits else "--no-logits"},
        "cast": "parameters, buffers and floating inputs in the mapping's dtype; the "
                f"{loaded.fixed_dtype_ops} op(s) whose dtype the graph fixes keep it",
        "loaders": {"model": PROGRAM_LOADER, "inputs": INPUTS_LOADER},
    }  # fmt: skip
    return _header(dev, rows, mappings, reference, profile=None,
                   source=f"{SOURCE_TEXT[SOURCE_MODEL]} {model.name} (sha256 {sha[:12]})",
                   model=block)  # fmt: skip
