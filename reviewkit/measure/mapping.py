"""A mapping of the suite onto this device: the knob settings that hold while its workloads are
built and measured, applied to torch, and the knobs a run records for them (torch)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from reviewkit.bundle import knobs as knob_registry
from reviewkit.measure import weights as weight_maps
from reviewkit.measure.compiled import EAGER, Compiler
from reviewkit.suite import kernels
from reviewkit.suite.workloads import CEILING_DTYPES, WorkloadSpec

# Knobs a run records as the settings give them (torch holds the rest, read back from it).
RECORDED_AS_SET = (
    "attention_backend", "memory_format", "sparsity", "quantization", "compile_mode",
    "l2_flush",
)


@dataclass
class KnobMapping:
    """The settings of one mapping (`run --knob`, one side of `ab`), checked by
    bundle/knobs.parse_settings."""

    settings: dict = field(default_factory=dict)
    dtypes: tuple[str, ...] = ()
    # A benchmark's seam (benchmarks/aa_false_alarms.py injects a known slowdown through it);
    # no command sets it, so no real run measures anything but the suite's kernels.
    wrap: Callable[[Callable[[], object]], Callable[[], object]] | None = None
    # Set when the mapping compiles (compile_mode other than eager): what each compile cost.
    compiler: Compiler | None = field(default=None, init=False, repr=False)
    # Per workload id, what the weight knobs did to its weights (measure/weights.py's record),
    # filled as the workloads are built.
    weights: dict[str, dict] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        mode = str(self.settings.get("compile_mode", EAGER))
        self.compiler = Compiler(mode) if mode != EAGER else None

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        s = self.settings
        threads, precision = torch.get_num_threads(), torch.get_float32_matmul_precision()
        with contextlib.ExitStack() as stack:
            if self.compiler is not None:
                stack.enter_context(self.compiler.configured())
            if "threads" in s:
                torch.set_num_threads(int(s["threads"]))
            if "float32_matmul_precision" in s:
                torch.set_float32_matmul_precision(str(s["float32_matmul_precision"]))
            if "mkldnn_enabled" in s:
                stack.enter_context(torch.backends.mkldnn.flags(enabled=bool(s["mkldnn_enabled"])))
            if s.get("attention_backend", "default") != "default":
                from torch.nn.attention import SDPBackend, sdpa_kernel

                member = knob_registry.ATTENTION_BACKENDS[str(s["attention_backend"])]
                stack.enter_context(sdpa_kernel(getattr(SDPBackend, member)))
            try:
                yield
            finally:
                torch.set_num_threads(threads)
                torch.set_float32_matmul_precision(precision)

    def build(self, spec: WorkloadSpec, device: torch.device) -> Callable[[], object]:
        fn = self.eager_build(spec, device)
        if self.compiler is not None:
            fn = self.compiler.compile(spec.id, fn)
        return self.wrap(fn) if self.wrap is not None else fn

    def eager_build(self, spec: WorkloadSpec, device: torch.device) -> Callable[[], object]:
        """The workload under this mapping's settings, not compiled."""
        transform = weight_maps.transform_for(self.settings, spec, device)
        channels_last = self.settings.get("memory_format") == "channels_last"
        if transform is None and not channels_last:  # the suite's own build, as `run` had it
            return kernels.build(spec, device)
        fn = kernels.build(spec, device, transform, channels_last=channels_last)
        if transform is not None and transform.record is not None:
            self.weights[spec.id] = transform.record.to_json()
        return fn

    def record_weights(self, records: list[dict]) -> None:
        """Each workload record whose weights this mapping mapped gets its `weights` table."""
        for record in records:
            if record["id"] in self.weights:
                record["weights"] = self.weights[record["id"]]

    def ceiling_dtypes(
        self, specs: list[WorkloadSpec], device: torch.device
    ) -> tuple[str, ...]:
        """The dtypes whose ceilings these workloads divide by under this mapping: its dtypes,
        and the GEMM dtype a quantization computes in (int8, fp8) where a workload takes it."""
        computed = {knob_registry.compute_dtype(self.settings, s.kernel, s.dtype, device.type)
                    for s in specs}  # fmt: skip
        return tuple(sorted({*self.dtypes, *computed}, key=CEILING_DTYPES.index))

    def knobs(self, base: dict) -> dict:
        """The run's knobs as this mapping sets them (read back from torch where torch holds
        them)."""
        out = dict(base)
        with self.active():
            out["threads"] = torch.get_num_threads()
            out["float32_matmul_precision"] = torch.get_float32_matmul_precision()
            out["mkldnn_enabled"] = bool(torch.backends.mkldnn.enabled)
        out["dtypes"] = list(self.dtypes)
        for knob in RECORDED_AS_SET:
            if knob in self.settings:
                out[knob] = self.settings[knob]
        return out

    def not_applicable(self, spec: WorkloadSpec, device: torch.device) -> dict[str, str]:
        """The knobs set here that do not change how `spec` runs, each with why not."""
        return knob_registry.not_applicable(self.settings, spec.kernel, spec.dtype, device.type)

