"""Production slices: each op's workload worked by hand, the coverage sums, and bad input."""

from __future__ import annotations

import json

import pytest

from reviewkit.common.errors import InputError
from reviewkit.suite import production_slice as ps


def test_a_linear_is_the_suites_gemm_at_its_shapes():
    # aten::linear(x [4, 256, 384], w [1536, 384], bias [1536]): m = 4 x 256 = 1024 tokens,
    # k = 384, n = 1536; FLOPs 2mkn = 2 x 1024 x 384 x 1536 = 1,207,959,552; bytes (fp32)
    # x 1024x384 + w 1536x384 + out 1024x1536, 4 bytes each = 4 x (393,216 + 589,824 +
    # 1,572,864) = 10,223,616 (the bias is not measured, as the suite's linear has none)
    r = ps.reproduce("aten::linear", "gemm", [[4, 256, 384], [1536, 384], [1536]],
                     ["float", "float", "float"])  # fmt: skip
    w = r.spec
    assert w.kernel == "linear" and w.dtype == "fp32" and w.layer_type == "gemm"
    assert [t.shape for t in w.inputs] == [(1024, 384), (1536, 384)]
    assert w.flops == 1_207_959_552 and w.bytes == 10_223_616
    assert w.id == "gemm.slice-aten-linear.1024x384_1536x384.fp32"
    assert w.params["op"] == "aten::linear"


def test_addmm_bmm_and_attention_at_their_shapes():
    # addmm(bias [n], x [m, k], w [k, n]) in bf16: 2 x 8 x 16 x 32 = 8192 FLOPs
    addmm = ps.reproduce("aten::addmm", "gemm", [[32], [8, 16], [16, 32]],
                         ["c10::BFloat16"] * 3).spec  # fmt: skip
    assert addmm.dtype == "bf16" and addmm.flops == 8192
    assert [t.shape for t in addmm.inputs] == [(8, 16), (32, 16)]
    # matmul of [2, 6, 8, 16] x [2, 6, 16, 8]: a batched GEMM of 12, 2 x 12 x 8 x 16 x 8 FLOPs
    bmm = ps.reproduce("aten::matmul", "gemm", [[2, 6, 8, 16], [2, 6, 16, 8]], ["float"] * 2)
    assert bmm.spec.kernel == "bmm" and bmm.spec.flops == 2 * 12 * 8 * 16 * 8
    # SDPA on [b=2, h=4, s=128, d=64] q, k, v: QK^T and PV, 4 x b x h x d x s^2 FLOPs; its
    # mask is not recorded, so it is measured unmasked and says so
    sdpa = ps.reproduce("aten::scaled_dot_product_attention", "attention",
                        [[2, 4, 128, 64]] * 3, ["c10::Half"] * 3).spec  # fmt: skip
    assert sdpa.kernel == "sdpa" and sdpa.flops == 4 * 2 * 4 * 64 * 128 * 128
    assert sdpa.params["causal"] is False and "not recorded" in sdpa.params["mask"]
    # embedding(table [1000, 64], ids [4, 16]): the ids are 4 x 16 int64 = 512 bytes, the 64
    # rows gathered 64 x 64 fp32 = 16,384 bytes read and as many written: 33,280; no FLOPs
    emb = ps.reproduce("aten::embedding", "embedding", [[1000, 64], [4, 16]],
                       ["float", "long"]).spec  # fmt: skip
    assert emb.flops == 0 and emb.bytes == 33_280
    assert [t.shape for t in emb.inputs] == [(4, 16), (1000, 64)]


@pytest.mark.parametrize("op,layer,dims,types,reason", [
    ("c10d::allreduce_", "collective", [[1024]], ["float"], ps.COLLECTIVE),
    ("fbgemm::permute_2D_sparse_data", "gemm", [[8]], ["int"], ps.OUTSIDE_TORCH),
    ("aten::scatter_add_", "data-movement", [[8]], ["float"], ps.NO_REPRODUCER),
    ("aten::linear", "gemm", [[8, 16], [32, 16]], ["double", "double"], ps.UNSUPPORTED_DTYPE),
    ("aten::add", "elementwise", [[8, 16], []], ["float", "Scalar"], ps.SHAPE_MISMATCH),
    ("aten::linear", "gemm", [[8, 16], [32, 15]], ["float", "float"], ps.SHAPE_MISMATCH),
])  # fmt: skip
def test_what_cannot_be_reproduced_says_why(op, layer, dims, types, reason):
    r = ps.reproduce(op, layer, dims, types)
    assert r.spec is None and r.reason == reason and r.detail.startswith(op)


def _shape(op, dims, time_s, count=1, types=("float", "float")):
    # the device time its kernels took is the host time here, so both bases read the same
    return {"op": op, "dims": dims, "types": list(types), "count": count, "time_s": time_s,
            "device_time_s": time_s}


def summary(time_basis="host", record_shapes=True):
    """A host-basis trace of 100 ms: gemm 60 (two linears, 40 + 15, and 5 ms unshaped), softmax
    25 (one shape), collective 10 (one all-reduce), 5 ms in unmapped operators."""
    shapes = {
        "gemm": {"shapes": [_shape("aten::linear", [[64, 128], [256, 128]], 0.040, 4),
                            _shape("aten::linear", [[64, 128], [512, 128]], 0.015, 4)],
                 "unshaped_time_s": 0.005, "other_shapes": {"time_s": 0.0}},
        "softmax": {"shapes": [_shape("aten::softmax", [[8, 64, 64]], 0.025, 2, ("float",))],
                    "unshaped_time_s": 0.0, "other_shapes": {"time_s": 0.0}},
        "collective": {"shapes": [_shape("c10d::allreduce_", [[1024]], 0.010)],
                       "unshaped_time_s": 0.0, "other_shapes": {"time_s": 0.0}},
    }  # fmt: skip
    trace = {"path": "t.json", "sha256": "ab" * 32, "time_basis": time_basis,
             "record_shapes": record_shapes, "shapes": shapes, "device": {},
             "op_mix": {"time_s": 0.100, "layer_types": {}, "unmapped": {"time_s": 0.005}}}
    return {"traces": [trace]}


def test_the_slice_takes_shapes_by_time_and_accounts_for_all_of_it():
    doc = ps.derive([("s.json", summary())], cover=0.9)
    # reproducible: 40 + 25 + 15 = 80 ms; by time the 40 ms linear, then softmax (65 ms, 81%),
    # then the 15 ms linear (80 ms, 100%): 90% is reached only with all three
    assert [w["id"] for w in doc["workloads"]] == [
        "gemm.slice-aten-linear.64x128_256x128.fp32", "softmax.slice-aten-softmax.8x64x64.fp32",
        "gemm.slice-aten-linear.64x128_512x128.fp32"]  # fmt: skip
    c = doc["coverage"]
    assert c["reproducible_time_s"] == pytest.approx(0.080)
    assert c["share_of_reproducible"] == pytest.approx(1.0)
    assert c["share_of_production"] == pytest.approx(0.80)
    left = {r["reason"]: r["time_s"] for r in doc["not_reproduced"]}
    assert left == pytest.approx({ps.COLLECTIVE: 0.010, ps.NO_SHAPES: 0.005, ps.UNMAPPED: 0.005})
    # every millisecond of production is in the slice or in a reason: 80 + 20 = 100
    assert c["covered_time_s"] + sum(left.values()) == pytest.approx(0.100)
    prod = doc["workloads"][0]["production"]
    assert (prod["count"], prod["op"], prod["dims"]) == (4, "aten::linear", [[64, 128], [256, 128]])
    assert prod["time_s"] == pytest.approx(0.040)
    assert prod["share_of_production"] == pytest.approx(0.4)


def test_a_lower_cover_and_a_cap_stop_early_and_say_so():
    doc = ps.derive([("s.json", summary())], cover=0.5)
    # 40 ms is 50% of the reproducible 80 ms: one workload, the rest past the cover
    assert len(doc["workloads"]) == 1
    left = {r["reason"]: r["time_s"] for r in doc["not_reproduced"]}
    assert left[ps.UNDER_COVER] == pytest.approx(0.040)
    capped = ps.derive([("s.json", summary())], cover=0.9, max_workloads=2)
    assert len(capped["workloads"]) == 2
    assert {r["reason"]: r["time_s"] for r in capped["not_reproduced"]}[ps.OVER_CAP] == \
        pytest.approx(0.015)  # fmt: skip


def test_a_trace_without_shapes_names_the_remedy():
    with pytest.raises(InputError, match=r"s\.json: traces\[0\].*record_shapes=True"):
        ps.derive([("s.json", summary(record_shapes=False))])


def test_device_and_host_traces_are_not_mixed():
    with pytest.raises(InputError, match="mix device-basis and host-basis"):
        ps.derive([("a.json", summary("host")), ("b.json", summary("device"))])


def test_a_slice_file_round_trips_and_an_edit_is_refused(tmp_path):
    doc = ps.derive([("s.json", summary())])
    path = tmp_path / "slice.json"
    path.write_text(json.dumps(doc))
    loaded = ps.load_slice(path)
    assert [w.id for w in loaded.specs] == [w["id"] for w in doc["workloads"]]
    assert loaded.specs[0].flops == 2 * 64 * 128 * 256 and loaded.identity["hash"] == doc["hash"]
    assert [w.id for w in ps.plan_slice(path, ("fp32",), "softmax.*")] == [
        "softmax.slice-aten-softmax.8x64x64.fp32"]  # fmt: skip
    # in bf16: the same shapes re-made, 2 bytes an element: x 64x128 + w 256x128 + out 64x256
    # = 8192 + 32768 + 16384 elements, 114,688 bytes
    (bf16,) = ps.plan_slice(path, ("bf16",), "gemm.*256x128*")
    assert bf16.id == "gemm.slice-aten-linear.64x128_256x128.bf16" and bf16.bytes == 114_688
    doc["workloads"][0]["bytes"] = 1
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"slice\.json: `hash` must be"):
        ps.load_slice(path)
    path.write_text("{}")
    with pytest.raises(InputError, match="`kind` must be"):
        ps.load_slice(path)


def test_a_gpu_slice_measured_on_a_cpu_or_in_another_dtype_says_so(tmp_path):
    doc = ps.derive([("s.json", summary("device"))])
    path = tmp_path / "slice.json"
    path.write_text(json.dumps(doc))
    (gpu_on_cpu,) = ps.identity_of(str(path), "cpu", ("fp32",))["notes"]
    assert "trace on a GPU (device time)" in gpu_on_cpu and "this CPU's" in gpu_on_cpu
    assert ps.identity_of(str(path), "cuda", ("fp32",))["notes"] == []
    (lower,) = ps.identity_of(str(path), "cuda", ("bf16",))["notes"]
    assert lower.startswith("production ran fp32; measured in bf16")
