"""The one knob registry: spelling, values, which workloads a knob changes, what may be set."""

from __future__ import annotations

import pytest

from reviewkit.bundle import knobs
from reviewkit.common.errors import UsageError


def test_run_and_ab_take_one_spelling():
    text = "threads=2, float32_matmul_precision=high, memory_format=channels_last"
    expected = {"threads": 2, "float32_matmul_precision": "high", "memory_format": "channels_last"}
    assert knobs.parse_settings(text, "--knob") == expected
    assert knobs.parse_settings(text, "--baseline", in_process=True) == expected
    assert knobs.parse_settings("mkldnn_enabled=off", "--knob") == {"mkldnn_enabled": False}


def test_a_knob_no_command_can_set_yet_says_why_in_both_commands():
    # ab keeps each side's compiled callables across its rounds, so compile mode switches in it
    assert knobs.parse_settings("compile_mode=default", "--knob") == {"compile_mode": "default"}
    assert knobs.parse_settings("compile_mode=default", "--candidate", in_process=True) == {
        "compile_mode": "default"}
    with pytest.raises(UsageError, match="interop_threads' cannot be set here: torch sizes"):
        knobs.parse_settings("interop_threads=2", "--knob")
    # ab does not send the user to `run` for a knob `run` cannot set either
    with pytest.raises(UsageError, match="`reviewkit run` cannot set it either: torch sizes"):
        knobs.parse_settings("interop_threads=2", "--candidate", in_process=True)
    with pytest.raises(UsageError, match="unknown knob 'precision'; choose from dtype, threads"):
        knobs.parse_settings("precision=high", "--knob")


def test_the_weight_knobs_are_set_by_run_and_switched_by_ab_but_never_together():
    # each side of `ab` builds its own workloads, so one process measures both mappings
    for text in ("sparsity=unstructured-90", "quantization=int8-weight-only", "sparsity=2:4"):
        name, _, value = text.partition("=")
        assert knobs.parse_settings(text, "--knob") == {name: value}
        assert knobs.parse_settings(text, "--candidate", in_process=True) == {name: value}
    with pytest.raises(UsageError, match="sparsity='unstructured-60': choose one of dense, 2:4, "
                       "unstructured-50, unstructured-75, unstructured-90"):
        knobs.parse_settings("sparsity=unstructured-60", "--knob")
    with pytest.raises(UsageError, match="sparsity=unstructured-50 and quantization=fp8 cannot "
                       "be set together"):
        knobs.parse_settings("sparsity=unstructured-50,quantization=fp8", "--knob")
    # the defaults go with anything
    assert knobs.parse_settings("sparsity=dense,quantization=fp8", "--knob")


def test_a_quantization_names_the_ceiling_its_gemms_divide_by():
    int8 = {"quantization": "int8-dynamic"}
    assert knobs.compute_dtype(int8, "mlp_block", "fp32", "cpu") == "int8"
    assert knobs.compute_dtype(int8, "mlp_block", "bf16", "cpu") == "bf16"  # does not apply
    assert knobs.compute_dtype({"quantization": "fp8"}, "linear", "bf16", "cpu") == "fp8"
    # int8 weights widened to the activations: the GEMM is the activations' dtype
    assert knobs.compute_dtype({"quantization": "int8-weight-only"}, "linear", "bf16",
                               "cpu") == "bf16"  # fmt: skip
    assert knobs.compute_dtype({"sparsity": "unstructured-50"}, "linear", "fp32", "cpu") == "fp32"
    assert knobs.target_density("unstructured-75") == 0.25 and knobs.target_density("2:4") == 0.5


@pytest.mark.parametrize("kernel,dtype,device,knob,value,why", [
    # a layer norm does no matmul, so float32 matmul precision cannot change it
    ("layer_norm", "fp32", "cpu", "float32_matmul_precision", "high", "does no matmul"),
    ("linear", "bf16", "cpu", "float32_matmul_precision", "high", "this workload is bf16"),
    ("linear", "fp32", "cpu", "float32_matmul_precision", "high", ""),
    ("linear", "fp32", "cpu", "memory_format", "channels_last", "no 4-D operands"),
    ("conv2d", "fp32", "cpu", "memory_format", "channels_last", ""),
    ("layer_norm", "fp32", "cpu", "attention_backend", "math", "has no attention"),
    ("encoder_layer", "fp32", "cpu", "attention_backend", "math", ""),
    ("linear", "fp32", "cuda", "mkldnn_enabled", False, "oneDNN is the CPU's"),
    ("linear", "bf16", "cuda", "threads", 2, ""),
    # the weight knobs: only kernels holding a weight matrix take them
    ("sdpa", "fp32", "cpu", "quantization", "int8-weight-only", "sdpa kernel holds no weight"),
    ("layer_norm", "fp32", "cpu", "sparsity", "unstructured-50", "holds no weight matrix"),
    ("linear", "fp32", "cpu", "quantization", "int8-dynamic", ""),
    ("mlp_block", "bf16", "cpu", "quantization", "int8-dynamic", "fp32 nn.Linear modules for"),
    ("mlp_block", "fp32", "cuda", "quantization", "int8-dynamic", "for the CPU"),
    ("gpt_decoder", "bf16", "cpu", "quantization", "int8-weight-only", ""),
    # fp8 runs on a CPU, emulated: applicable, and the workload's record says emulated
    ("encoder_layer", "bf16", "cpu", "quantization", "fp8", ""),
    # MKL's sparse addmm has no bf16 kernel: a CSR weight on the CPU is fp32 only
    ("linear", "bf16", "cpu", "sparsity", "unstructured-90", "in fp32 only"),
    ("linear", "fp32", "cpu", "sparsity", "unstructured-90", ""),
    ("linear", "bf16", "cuda", "sparsity", "unstructured-50", ""),
    ("mlp_block", "fp16", "cpu", "sparsity", "2:4", "runs on CUDA only"),
    ("mlp_block", "fp32", "cuda", "sparsity", "2:4", "takes fp16 or bf16 weights"),
    ("mlp_block", "bf16", "cuda", "sparsity", "2:4", ""),
    # the defaults change nothing anywhere, so there is nothing to say they do not apply to
    ("layer_norm", "bf16", "cpu", "sparsity", "dense", ""),
    ("sdpa", "bf16", "cpu", "quantization", "none", ""),
])  # fmt: skip
def test_a_knob_says_which_workloads_it_does_not_change(kernel, dtype, device, knob, value, why):
    found = knobs.not_applicable({knob: value}, kernel, dtype, device)
    assert (why in found.get(knob, "")) if why else found == {}


def test_help_lists_every_settable_knob_with_its_values_and_what_is_recorded_only():
    text = knobs.help_text()
    for name in knobs.SETTABLE:
        if name != "dtype":
            assert f"{name}=" in text
    assert "memory_format=contiguous | channels_last" in text
    assert "compile_mode=eager | default | reduce-overhead | max-autotune" in text
    assert "sparsity=dense | 2:4 | unstructured-50 | unstructured-75 | unstructured-90" in text
    assert "quantization=none | int8-dynamic | int8-weight-only | fp8" in text
    assert "not settable here yet: interop_threads, device" in text
