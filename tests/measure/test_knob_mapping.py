"""Each layout and backend knob is really applied while a mapping is active: channels-last
strides on a convolution's operands, the SDPA backend the call dispatches, oneDNN's switch."""

from __future__ import annotations

import pytest
import torch

from reviewkit.measure.mapping import KnobMapping
from reviewkit.measure.overhead import profiled_op_names
from reviewkit.suite import workloads as suite

CPU = torch.device("cpu")


def _spec(pattern: str):
    return suite.plan_specs("smoke", ("fp32",), pattern)[0]


def _closure_tensors(fn) -> list[torch.Tensor]:
    return [c.cell_contents for c in fn.__closure__ or ()
            if isinstance(c.cell_contents, torch.Tensor)]  # fmt: skip


def test_channels_last_stores_the_convolutions_operands_nhwc():
    spec = _spec("conv.*")
    plain = _closure_tensors(KnobMapping().build(spec, CPU))
    nhwc = _closure_tensors(KnobMapping({"memory_format": "channels_last"}).build(spec, CPU))
    four_d = [t for t in nhwc if t.dim() == 4]
    assert len(four_d) == 2  # the input and the weight
    # NHWC: the channel stride is 1 (an NCHW tensor's is H x W), yet the shape is unchanged
    assert all(t.is_contiguous(memory_format=torch.channels_last) and t.stride(1) == 1
               for t in four_d)  # fmt: skip
    assert all(not t.is_contiguous(memory_format=torch.channels_last)
               for t in plain if t.dim() == 4 and t.shape[1] > 1)  # fmt: skip
    assert [t.shape for t in plain] == [t.shape for t in nhwc]


@pytest.mark.parametrize("backend,op", [
    # torch's CPU SDPA: a fused flash kernel by default, the composite math path when forced
    ("default", "aten::_scaled_dot_product_flash_attention_for_cpu"),
    ("math", "aten::_scaled_dot_product_attention_math"),
])  # fmt: skip
def test_the_attention_backend_is_the_kernel_the_call_dispatches(backend, op):
    mapping = KnobMapping({"attention_backend": backend})
    fn = mapping.build(_spec("attention.*sdpa-full*"), CPU)
    with mapping.active(), torch.inference_mode():
        names = profiled_op_names(fn)
    assert op in names


def test_mkldnn_is_switched_off_only_while_the_mapping_is_active():
    mapping = KnobMapping({"mkldnn_enabled": False})
    before = torch.backends.mkldnn.enabled
    with mapping.active():
        assert torch.backends.mkldnn.enabled is False
    assert torch.backends.mkldnn.enabled == before
