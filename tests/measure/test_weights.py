"""The weight knobs really applied: CSR weights at their density, int8 and fp8 GEMMs against
references worked out apart from the code, and the mapped linears the ones a layer calls."""

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from reviewkit.common.errors import UsageError  # noqa: E402
from reviewkit.measure import weights  # noqa: E402
from reviewkit.measure.mapping import KnobMapping  # noqa: E402
from reviewkit.suite import kernels  # noqa: E402
from reviewkit.suite import workloads as suite  # noqa: E402

CPU = torch.device("cpu")


class OpLog(TorchDispatchMode):
    """The aten ops a call dispatches, by name. A forward hook would not do: torch's encoder
    layer declines its fused path whenever any hook is attached, so a hook counter would pass
    even for a mapping the fused path bypasses."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []
        self.on_csr: list[str] = []  # the ops given a CSR tensor

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket))
        if any(isinstance(a, torch.Tensor) and a.layout == torch.sparse_csr for a in args):
            self.on_csr.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def logged(fn) -> OpLog:
    with torch.inference_mode(), OpLog() as log:
        fn()
    return log


def ops_of(fn) -> list[str]:
    return logged(fn).ops


def spec_of(kernel: str, dtype: str = "fp32", profile: str = "smoke"):
    return next(s for s in suite.plan_specs(profile, (dtype,), None) if s.kernel == kernel)


def seeded_linear(k: int, n: int, bias: bool = True) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(k, n, bias=bias).eval()


@pytest.mark.parametrize("sparsity,target", [
    ("unstructured-50", 0.50), ("unstructured-75", 0.25), ("unstructured-90", 0.10),
])  # fmt: skip
def test_unstructured_sparsity_stores_a_csr_weight_at_its_density(sparsity, target):
    linear = seeded_linear(768, 256)
    dense_w = linear.weight.detach().clone()
    mapped, record = weights.map_weights(linear, sparsity, "none", rows=32)
    assert isinstance(mapped, weights.CsrLinear)
    csr = mapped.weight_csr
    assert csr.layout == torch.sparse_csr
    # measured on what is multiplied: stored nonzeros over the matrix's 256 x 768 entries
    density = int(csr.values().count_nonzero()) / (256 * 768)
    assert density == pytest.approx(target, rel=0.01)
    assert record.density == pytest.approx(density)
    # magnitude pruning: in every row, each kept weight is at least as large as any zeroed one
    pruned = csr.to_dense()
    kept = pruned != 0
    assert torch.equal(pruned[kept], dense_w[kept])
    smallest_kept = dense_w.abs().where(kept, float("inf")).amin(dim=1)
    largest_zeroed = dense_w.abs().where(~kept, 0.0).amax(dim=1)
    assert bool((smallest_kept >= largest_zeroed).all())
    # the CSR product is torch's dense product on the pruned weight
    x = torch.randn(32, 768)
    assert logged(lambda: mapped(x)).on_csr == ["aten.addmm"]
    with torch.inference_mode():
        y = mapped(x)
    expected = x.double() @ pruned.double().T + linear.bias.detach().double()
    assert torch.allclose(y.double(), expected, rtol=1e-4, atol=1e-4)
    assert record.compute_dtype == "fp32" and record.linears_mapped == 1
    # 2 FLOPs per multiply-add, 32 rows x 768 x 256 entries
    assert record.mapped_flops == 2 * 32 * 768 * 256


def test_two_of_four_pruning_keeps_the_two_largest_of_every_four():
    w = torch.tensor([[0.1, -0.4, 0.3, 0.2, 5.0, -6.0, 0.0, 1.0]])
    # by hand: group 1 keeps -0.4 and 0.3, group 2 keeps 5.0 and -6.0
    assert torch.equal(weights.prune_2_4(w),
                       torch.tensor([[0.0, -0.4, 0.3, 0.0, 5.0, -6.0, 0.0, 0.0]]))  # fmt: skip
    with pytest.raises(ValueError, match="divisible by 4"):
        weights.prune_2_4(torch.ones(2, 6))


def test_int8_weight_only_matches_the_dequantized_weights_in_float64():
    linear = nn.Linear(4, 2, bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([[1.27, -0.5, 0.0, 0.013], [0.2, 0.1, -0.254, 0.0]]))
    mapped, record = weights.map_weights(linear, "dense", "int8-weight-only", rows=3)
    # by hand: row 0's scale is 1.27 / 127 = 0.01, so 1.27 -> 127, -0.5 -> -50, 0.013 -> 1;
    # row 1's is 0.254 / 127 = 0.002, so 0.2 -> 100, 0.1 -> 50, -0.254 -> -127
    assert torch.equal(mapped.weight_int8, torch.tensor([[127, -50, 0, 1], [100, 50, -127, 0]],
                                                        dtype=torch.int8))  # fmt: skip
    assert mapped.scales.tolist() == pytest.approx([0.01, 0.002])
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 0.25, 2.0], [-2.0, 0.0, 1.0, 1.0]])
    with torch.inference_mode():
        y = mapped(x)
    # the dequantized weights, written out: 0.013 became 1 x 0.01
    dequantized = torch.tensor([[1.27, -0.5, 0.0, 0.01], [0.2, 0.1, -0.254, 0.0]],
                               dtype=torch.float64)  # fmt: skip
    # e.g. row 0 of x against row 0: 1.27 - 1.0 + 0 + 0.04 = 0.31
    assert float(y[0, 0]) == pytest.approx(0.31, rel=1e-6)
    assert torch.allclose(y.double(), x.double() @ dequantized.T, rtol=1e-6, atol=1e-6)
    assert record.compute_dtype == "fp32" and record.density is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int8_weight_only_runs_torchs_int8_pack_kernel_with_a_bias_and_3d_input(dtype):
    linear = seeded_linear(64, 48).to(dtype)
    mapped, _ = weights.map_weights(linear, "dense", "int8-weight-only", rows=8)
    x = torch.randn(2, 4, 64).to(dtype)
    assert "aten._weight_int8pack_mm" in ops_of(lambda: mapped(x))
    with torch.inference_mode():
        y = mapped(x)
    q, s = mapped.weight_int8.double(), mapped.scales.double()
    expected = x.double() @ (q * s[:, None]).T + linear.bias.detach().double()
    tol = 1e-5 if dtype == torch.float32 else 2e-2  # bf16 out: 8 bits of mantissa
    assert y.dtype == dtype and y.shape == (2, 4, 48)
    assert torch.allclose(y.double(), expected, rtol=tol, atol=tol)


def test_int8_dynamic_swaps_in_torch_ao_dynamic_linears_and_leaves_attention_dense():
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    block = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)).eval()
    mapped, record = weights.map_weights(block, "dense", "int8-dynamic", rows=16)
    assert isinstance(mapped[0], DynamicLinear) and isinstance(mapped[2], DynamicLinear)
    assert record.compute_dtype == "int8" and record.linears_mapped == 2
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).eval()
    mapped, record = weights.map_weights(layer, "dense", "int8-dynamic", rows=16)
    assert isinstance(mapped.linear1, DynamicLinear)
    assert type(mapped.self_attn.out_proj) is nn.modules.linear.NonDynamicallyQuantizableLinear
    # one attention: its packed in-projection and its out-projection stay dense
    assert record.linears_not_mapped == 2 and "MultiheadAttention" in record.not_mapped_reason


def test_fp8_is_within_fp8_error_of_fp32_and_exact_on_its_own_operands():
    linear = seeded_linear(256, 128)
    mapped, record = weights.map_weights(linear, "dense", "fp8", rows=64)
    assert mapped.weight_fp8.dtype == torch.float8_e4m3fn
    x = torch.randn(64, 256)
    assert "aten._scaled_mm" in ops_of(lambda: mapped(x))
    with torch.inference_mode():
        y = mapped(x)
    w, b = linear.weight.detach().double(), linear.bias.detach().double()
    fp32 = x.double() @ w.T + b
    # e4m3 keeps 3 mantissa bits: each operand is off by at most 2^-4 of itself, a product by
    # at most 2 x 2^-4 + 2^-8 ~ 12.9%; random signs cancel much of it, but never to bf16's 2^-9
    error = float((y.double() - fp32).norm() / fp32.norm())
    assert 2**-9 < error < 2 * 2**-4 + 2**-8
    # on the operands it multiplied, decoded by torch to float64, the GEMM is exact to fp32
    scale_x = x.abs().amax().double() / 448
    x8 = (x.double() / scale_x).float().to(torch.float8_e4m3fn).double() * scale_x
    w8 = mapped.weight_fp8.double() * mapped.scale_w.double()
    assert torch.allclose(y.double(), x8 @ w8.T + b, rtol=1e-5, atol=1e-5)
    assert record.compute_dtype == "fp8"
    assert "emulates" in record.emulated  # a CPU has no fp8 units


def test_the_encoder_layer_runs_its_mapped_linears_not_the_fused_dense_path():
    spec = spec_of("encoder_layer")
    dense = ops_of(kernels.build(spec, CPU))
    # the dense layer runs torch's fused layer, which reads linear1/linear2.weight itself
    assert dense == ["aten._transformer_encoder_layer_fwd"]
    mapping = KnobMapping({"quantization": "int8-weight-only"}, ("fp32",))
    ops = ops_of(mapping.eager_build(spec, CPU))
    assert "aten._transformer_encoder_layer_fwd" not in ops
    assert ops.count("aten._weight_int8pack_mm") == 2  # linear1 and linear2
    assert ops.count("aten._native_multi_head_attention") == 1  # MHA keeps its fused kernel
    record = mapping.weights[spec.id]
    assert record["linears_mapped"] == 2 and record["fused_layers_off"] == 1


def test_the_decoder_maps_its_ffn_linears_and_lm_head():
    spec = spec_of("gpt_decoder")
    layers = spec.params["layers"]
    mapping = KnobMapping({"sparsity": "unstructured-75"}, ("fp32",))
    log = logged(mapping.eager_build(spec, CPU))
    assert "aten._transformer_encoder_layer_fwd" not in log.ops
    # two FFN linears a layer (with their biases) and the LM head (without), each one product
    # of its CSR weight
    assert log.on_csr == ["aten.addmm", "aten.addmm"] * layers + ["aten.mm"]
    record = mapping.weights[spec.id]
    assert record["linears_mapped"] == 2 * layers + 1
    assert record["linears_not_mapped"] == 2 * layers
    assert record["density"] == pytest.approx(0.25, rel=0.01)


def test_the_linear_kernel_takes_the_knobs_and_its_plain_build_is_unchanged():
    spec = spec_of("linear")
    assert ops_of(kernels.build(spec, CPU)) == ["aten.linear"]
    mapping = KnobMapping({"quantization": "int8-weight-only"}, ("fp32",))
    assert ops_of(mapping.eager_build(spec, CPU)) .count("aten._weight_int8pack_mm") == 1
    record = mapping.weights[spec.id]
    # the suite's own count of the GEMM: 2 x m x k x n
    assert record["mapped_flops"] == spec.matmul_flops
    assert record["linears_mapped"] == 1 and record["linears_not_mapped"] == 0
    # a knob that does not apply builds the suite's own workload and records nothing
    plain = KnobMapping({"quantization": "int8-dynamic"}, ("bf16",))
    bf16 = spec_of("linear", "bf16")
    assert ops_of(plain.eager_build(bf16, CPU)) == ["aten.linear"] and not plain.weights


def test_weight_knobs_that_do_not_apply_map_nothing_and_together_are_refused():
    assert weights.transform_for({"sparsity": "2:4"}, spec_of("linear", "bf16"), CPU) is None
    assert weights.transform_for({"sparsity": "unstructured-50"}, spec_of("sdpa"), CPU) is None
    with pytest.raises(UsageError, match="sparsity=unstructured-50 and quantization=fp8"):
        weights.map_weights(seeded_linear(8, 8), "unstructured-50", "fp8", rows=1)


def test_a_run_records_the_weights_and_divides_by_the_compute_dtypes_ceiling():
    from reviewkit.measure import runner

    request = runner.RunRequest(
        profile="smoke", dtypes=("fp32",), only="gemm.bert-base-s64-ffn-up.b1s16*,norm.bert*",
        rounds=1, settings={"quantization": "fp8"},
    )  # fmt: skip
    doc = runner.run(request)
    assert doc["complete"] and doc["knobs"]["quantization"] == "fp8"
    # a CPU has no fp8 ceiling, and the bundle says why rather than borrowing fp32's
    fp8 = doc["ceilings"]["compute"]["fp8"]
    assert fp8["peak"] is None and "no fp8 matrix units" in fp8["reason"]
    gemm, norm = doc["workloads"]
    assert gemm["status"] == "ok" and gemm["weights"]["compute_dtype"] == "fp8"
    assert "emulates" in gemm["weights"]["emulated"]
    assert "weights" not in norm and "holds no weight" in norm["knobs_not_applicable"][
        "quantization"]
    assert "--knob 'quantization=fp8'" in gemm["reproduce"]


def test_run_with_int8_dynamic_end_to_end_divides_by_a_calibrated_int8_ceiling(tmp_path):
    import json
    import subprocess
    import sys

    def reviewkit(*args):
        return subprocess.run([sys.executable, "-m", "reviewkit", *args], capture_output=True,
                              text=True, timeout=300)  # fmt: skip

    out = tmp_path / "run"
    r = reviewkit("run", "--profile", "smoke", "--dtype", "fp32", "--only",
                  "gemm.bert-base-s64-ffn-up.b1s16*", "--knob", "quantization=int8-dynamic",
                  "--rounds", "1", "--out", str(out), "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "run.json").read_text())
    int8 = doc["ceilings"]["compute"]["int8"]
    assert int8["peak"] and "torch._int_mm" in int8["measured_method"]
    (w,) = json.loads(r.stdout)["workloads"]
    (recorded,) = doc["workloads"]
    assert recorded["weights"]["compute_dtype"] == "int8" and w["weights"] == recorded["weights"]
    # MFU = FLOPs / median / the int8 peak, worked out from the bundle's own numbers
    median = sorted(recorded["samples_s"])[len(recorded["samples_s"]) // 2]
    assert w["mfu"] == pytest.approx(recorded["flops"] / median / int8["peak"], rel=0.05)
    shown = reviewkit("show", str(out))
    assert shown.returncode == 0, shown.stderr
    assert "computes in int8" in " ".join(shown.stdout.split())
