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
    with pytest.raises(UsageError, match="sparsity' cannot be set here: the suite has no sparse"):
        knobs.parse_settings("sparsity=dense", "--knob")
    # ab does not send the user to `run` for a knob `run` cannot set either
    with pytest.raises(UsageError, match="`reviewkit run` cannot set it either: the suite has"):
        knobs.parse_settings("sparsity=dense", "--candidate", in_process=True)
    with pytest.raises(UsageError, match="unknown knob 'precision'; choose from dtype, threads"):
        knobs.parse_settings("precision=high", "--knob")


@pytest.mark.parametrize("kernel,dtype,device,knob,why", [
    # a layer norm does no matmul, so float32 matmul precision cannot change it
    ("layer_norm", "fp32", "cpu", "float32_matmul_precision", "does no matmul"),
    ("linear", "bf16", "cpu", "float32_matmul_precision", "this workload is bf16"),
    ("linear", "fp32", "cpu", "float32_matmul_precision", ""),
    ("linear", "fp32", "cpu", "memory_format", "no 4-D operands"),
    ("conv2d", "fp32", "cpu", "memory_format", ""),
    ("layer_norm", "fp32", "cpu", "attention_backend", "has no attention"),
    ("encoder_layer", "fp32", "cpu", "attention_backend", ""),
    ("linear", "fp32", "cpu", "quantization", "no nn.Linear to quantize"),
    ("mlp_block", "bf16", "cpu", "quantization", "fp32 nn.Linear modules for the CPU"),
    ("mlp_block", "fp32", "cpu", "quantization", ""),
    ("linear", "fp32", "cuda", "mkldnn_enabled", "oneDNN is the CPU's"),
    ("linear", "bf16", "cuda", "threads", ""),
])  # fmt: skip
def test_a_knob_says_which_workloads_it_does_not_change(kernel, dtype, device, knob, why):
    settings = {knob: "x"}
    found = knobs.not_applicable(settings, kernel, dtype, device)
    assert (why in found.get(knob, "")) if why else found == {}


def test_help_lists_every_settable_knob_with_its_values_and_what_is_recorded_only():
    text = knobs.help_text()
    for name in knobs.SETTABLE:
        if name != "dtype":
            assert f"{name}=" in text
    assert "memory_format=contiguous | channels_last" in text
    assert "compile_mode=eager | default | reduce-overhead | max-autotune" in text
    assert "not settable here yet: interop_threads, sparsity, device" in text
