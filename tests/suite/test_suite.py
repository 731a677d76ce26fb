"""The suite's definitions: coverage, identity, and analytic FLOPs checked against torch."""

import dataclasses

import pytest

from reviewkit.common.errors import UsageError
from reviewkit.suite import definitions
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import SUITE_PROFILE_NAMES, suite_profile


def test_linear_counts_by_hand():
    # x[2,3] @ W[4,3]^T: 2*2*3*4 = 48 FLOPs; bytes (6 + 12 + 8) * 4 = 104.
    dims = suite.ModelDims("toy", 3, 1, 4, 10)
    spec = suite.linear(dims, "p", 1, 2, 3, 4, "fp32")
    assert spec.flops == 48
    assert spec.bytes == 104
    assert [t.to_json() for t in spec.inputs] == [
        {"shape": [2, 3], "dtype": "fp32"},
        {"shape": [4, 3], "dtype": "fp32"},
    ]


def test_causal_attention_counts_the_lower_triangle():
    # S = 4: 10 of 16 query-key pairs; each pair costs 2 matmuls * 2 FLOPs * d.
    dims = suite.ModelDims("toy", 8, 2, 32, 10)  # head_dim 4
    full = suite.sdpa(dims, 1, 4, False, "bf16")
    causal = suite.sdpa(dims, 1, 4, True, "bf16")
    assert full.flops == 4 * 1 * 2 * 4 * 16  # 512
    assert causal.flops == 4 * 1 * 2 * 4 * 10  # 320
    assert full.bytes == causal.bytes == 4 * (1 * 2 * 4 * 4) * 2


def test_embedding_reads_only_gathered_rows():
    dims = suite.ModelDims("toy", 4, 1, 16, 1000)
    spec = suite.embedding(dims, 1, 3, "fp32")
    # ids 3 * 8 bytes, rows 3 * 4 * 4, output 3 * 4 * 4
    assert spec.bytes == 24 + 48 + 48


@pytest.mark.parametrize("profile", SUITE_PROFILE_NAMES)
def test_ids_unique_and_every_layer_type_covered(profile):
    specs = suite.workloads(profile)
    ids = [s.id for s in specs]
    assert len(ids) == len(set(ids))
    covered = {s.layer_type for s in specs}
    # collective needs several devices; every other layer type of the suite is in the suite.
    assert covered == set(suite.LAYER_TYPES) - {"collective"}
    kernels = {s.kernel for s in specs}
    assert {
        "linear",
        "bmm",
        "sdpa",
        "conv2d",
        "layer_norm",
        "rms_norm",
        "softmax",
        "gelu",
        "add",
        "embedding",
        "sum",
        "transpose_copy",
        "mlp_block",
        "encoder_layer",
        "gpt_decoder",
    } <= kernels
    assert all(s.source_model for s in specs)
    assert {s.dtype for s in specs} == set(suite.DTYPES)


@pytest.mark.parametrize("profile", SUITE_PROFILE_NAMES)
def test_sweeps_cover_several_shapes(profile):
    specs = suite.workloads(profile, ["fp32"])
    gemm = {
        (s.params["batch"], s.params["seq"])
        for s in specs
        if s.kernel == "linear" and s.params["part"] == "ffn-up"
    }
    attn = {
        (s.params["batch"], s.params["seq"], s.params["causal"])
        for s in specs
        if s.kernel == "sdpa"
    }
    shapes = suite_profile(profile).shapes
    assert len(gemm) == len(shapes.seqs) * len(shapes.batches) >= 4
    assert len({(b, s) for b, s, _ in attn}) >= 4 and {c for *_, c in attn} == {True, False}


def test_identity_changes_with_any_definition(monkeypatch):
    before = suite.suite_identity()
    assert before == suite.suite_identity()  # stable
    original = suite.layer_norm

    def changed(model, tokens, dtype):
        spec = original(model, tokens, dtype)
        return dataclasses.replace(spec, other_flops=spec.other_flops + 1)

    monkeypatch.setattr(suite, "layer_norm", changed)
    assert suite.suite_identity().hash != before.hash


def test_identity_changes_with_kernel_revision(monkeypatch):
    before = suite.suite_identity().hash
    # every definition carries the revision of the module that defines WorkloadSpec
    monkeypatch.setattr(definitions, "KERNEL_REVISION", definitions.KERNEL_REVISION + 1)
    assert suite.suite_identity().hash != before


def test_select_by_glob():
    specs = suite.workloads("smoke", ["fp32", "bf16"])
    picked = suite.select(specs, "attention.*causal*.bf16")
    assert picked and all(
        s.layer_type == "attention" and s.params["causal"] and s.dtype == "bf16" for s in picked
    )
    assert len(suite.select(specs, "norm.*,softmax.*")) == 3 * 2


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"profile": "medium", "dtypes": ["fp32"], "only": None}, "smoke, quick, full"),
        ({"profile": "quick", "dtypes": ["fp8"], "only": None}, "fp32, bf16, fp16"),
        ({"profile": "quick", "dtypes": ["fp32"], "only": "nothing.*"}, "reviewkit suite"),
    ],
)
def test_plan_errors_name_the_choices(kwargs, needle):
    with pytest.raises(UsageError, match=needle.replace(".", r"\.")):
        suite.plan_specs(**kwargs)


# --- FLOPs against torch.utils.flop_counter.FlopCounterMode ---------------------------------

torch = pytest.importorskip("torch")


def _torch_flops(spec, device="cpu"):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from reviewkit.suite import kernels

    fn = kernels.build(spec, torch.device(device))
    # FlopCounterMode has no formula for CPU's fused attention kernel or the fused
    # TransformerEncoderLayer fast path; the math backend decomposes attention into the
    # matmuls it does count. The arithmetic is the same; only the kernels differ.
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.inference_mode(), sdpa_kernel(SDPBackend.MATH):
            counter = FlopCounterMode(display=False)
            with counter:
                fn()
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    return counter.get_total_flops()


# smoke runs for real on the CPU; quick and full (real model sizes) on the meta device, which
# tracks shapes without computing, so the full-size suite is checked in seconds.
COUNTED = [
    (s, "cpu" if profile == "smoke" else "meta")
    for profile in SUITE_PROFILE_NAMES
    for s in suite.workloads(profile, ["fp32"])
    if s.matmul_flops > 0
]


@pytest.mark.parametrize("spec,device", COUNTED, ids=[f"{d}:{s.id}" for s, d in COUNTED])
def test_matmul_flops_agree_with_flop_counter(spec, device):
    counted = _torch_flops(spec, device)
    if spec.kernel == "sdpa" and spec.params["causal"]:
        # Our convention: S(S+1)/2 pairs; FlopCounterMode counts the full S*S square.
        s = spec.params["seq"]
        assert spec.matmul_flops * 2 * s == counted * (s + 1)
    else:
        assert spec.matmul_flops == counted


def test_vector_ops_are_not_counted_by_torch():
    # FlopCounterMode counts matmul-class ops only, so these have no torch cross-check; their
    # analytic counts are the per-element constants documented in reviewkit/suite.py.
    vector = [s for s in suite.workloads("smoke", ["fp32"]) if s.matmul_flops == 0]
    assert vector and all(_torch_flops(s) == 0 for s in vector)
