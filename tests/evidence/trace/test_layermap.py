"""The layer map: the default rules, a team's file tried first or replacing them, and bad
files refused with the file and the key named."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from reviewkit.cli.app import TRACE_SUMMARY_FILE, app
from reviewkit.common.errors import InputError
from reviewkit.common.tomlfile import read_toml
from reviewkit.evidence.trace.layermap import (
    DEFAULT_LAYER_MAP,
    MAPPABLE_LAYER_TYPES,
    load_layer_map,
)
from reviewkit.evidence.trace.summary import summarise_one


def team_file(tmp_path, body: str, name: str = "team.toml"):
    path = tmp_path / name
    path.write_text(body)
    return path


def trace_with(tmp_path, *names):
    """A host-only trace: each named op 10 us long, one after another."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": 1000 + 20 * i, "dur": 10}
        for i, n in enumerate(names)
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


# --- the default map ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "layer"),
    [
        ("aten::linear", "gemm"),
        ("aten::addmm", "gemm"),
        ("aten::scaled_dot_product_attention", "attention"),
        ("aten::conv2d", "conv"),
        ("aten::layer_norm", "norm"),
        ("aten::softmax", "softmax"),
        ("aten::embedding", "embedding"),
        ("nccl:all_reduce", "collective"),
        ("gloo:all_reduce", "collective"),
        ("aten::sum", "reduction"),
        ("aten::copy_", "data-movement"),
        ("aten::gelu", "elementwise"),
        ("aten::flatten", None),  # a view: no layer type, reported by name as unmapped
        ("aten::Linear", None),  # op patterns are case-sensitive
        ("ProfilerStep#3", None),
    ],
)
def test_default_op_rules(name, layer):
    assert load_layer_map().op_layer(name) == layer


@pytest.mark.parametrize(
    ("name", "layer"),
    [
        ("ampere_sgemm_128x64_tn", "gemm"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>", "gemm"),
        ("Cijk_Alik_Bljk_SB_MT64x64x16", "gemm"),  # rocBLAS / hipBLASLt on AMD
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "collective"),
        ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>", "attention"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernel>",
            "elementwise",
        ),
        ("Memcpy HtoD (Pageable -> Device)", "data-movement"),
        ("AMPERE_SGEMM_128X64_TN", "gemm"),  # kernel patterns ignore case
        ("void cudnn::ops::scalePackedTensor_kernel<float, float>", None),
    ],
)
def test_default_kernel_rules(name, layer):
    assert load_layer_map().kernel_layer(name) == layer


def test_default_map_covers_only_mappable_layer_types():
    m = load_layer_map()
    assert {r.layer_type for r in m.rules} == set(MAPPABLE_LAYER_TYPES)
    assert [s["path"] for s in m.sources] == ["rubrics/layer_map.toml"]
    assert read_toml(DEFAULT_LAYER_MAP)["schema_version"] == 1


def test_first_matching_rule_wins(tmp_path):
    # Two rules of one file match myteam::fused_mm: the earlier (broader) one decides.
    path = team_file(
        tmp_path,
        'schema_version = 1\n[[rules]]\nlayer_type = "softmax"\nops = ["myteam::*"]\n'
        '[[rules]]\nlayer_type = "gemm"\nops = ["myteam::fused_mm"]\n',
    )
    assert load_layer_map([path]).op_layer("myteam::fused_mm") == "softmax"


# --- a team's file --------------------------------------------------------------------------


def test_team_rule_overrides_a_default(tmp_path):
    path = team_file(
        tmp_path,
        'schema_version = 1\n[[rules]]\nlayer_type = "attention"\nops = ["aten::linear"]\n'
        'kernels = ["*my_fused_attn*"]\n',
    )
    m = load_layer_map([path])
    assert m.op_layer("aten::linear") == "attention"  # the team's rule is tried first
    assert m.op_layer("aten::addmm") == "gemm"  # the defaults still apply behind it
    assert m.kernel_layer("xx_MY_FUSED_ATTN_v2") == "attention"
    assert [s["path"] for s in m.sources] == [str(path), "rubrics/layer_map.toml"]
    assert m.sources[0]["rules"] == 1 and len(m.sources[0]["sha256"]) == 64
    # Through the importer: aten::linear's time (with the addmm inside it) is attention.
    summary = summarise_one(trace_with(tmp_path, "aten::linear", "aten::mm"), m)
    assert set(summary["op_mix"]["layer_types"]) == {"attention", "gemm"}
    assert summary["op_mix"]["layer_types"]["attention"]["time_s"] == pytest.approx(10e-6)


def test_replace_default_drops_the_default_rules(tmp_path):
    path = team_file(
        tmp_path,
        'schema_version = 1\nreplace_default = true\n[[rules]]\nlayer_type = "gemm"\n'
        'ops = ["aten::linear"]\n',
    )
    m = load_layer_map([path])
    assert m.op_layer("aten::linear") == "gemm"
    assert m.op_layer("aten::addmm") is None and m.op_layer("aten::softmax") is None
    assert [s["path"] for s in m.sources] == [str(path)]
    summary = summarise_one(trace_with(tmp_path, "aten::linear", "aten::softmax"), m)
    assert [u["name"] for u in summary["op_mix"]["unmapped"]["top"]] == ["aten::softmax"]


def test_team_files_apply_in_the_order_given(tmp_path):
    a = team_file(
        tmp_path, 'schema_version = 1\n[[rules]]\nlayer_type = "norm"\nops = ["x::op"]\n', "a.toml"
    )
    b = team_file(
        tmp_path, 'schema_version = 1\n[[rules]]\nlayer_type = "conv"\nops = ["x::op"]\n', "b.toml"
    )
    assert load_layer_map([a, b]).op_layer("x::op") == "norm"
    assert load_layer_map([b, a]).op_layer("x::op") == "conv"


# --- bad files ------------------------------------------------------------------------------

RULE = '[[rules]]\nlayer_type = "gemm"\nops = ["aten::mm"]\n'
BAD = {
    "unknown-top-key": ('schema_version = 1\n[[rule]]\nlayer_type = "gemm"\n',
                        ["unknown key 'rule'", "did you mean 'rules'?"]),
    "unknown-rule-key": ('schema_version = 1\n[[rules]]\nlayer_type = "gemm"\nop = ["x"]\n',
                         ["rules[0]", "unknown key 'op'", "did you mean 'ops'?"]),
    "bad-layer-type": ('schema_version = 1\n[[rules]]\nlayer_type = "gemn"\nops = ["x"]\n',
                       ["rules[0].layer_type", "'gemn'", "did you mean 'gemm'?"]),
    "composite-layer-type": ('schema_version = 1\n[[rules]]\nlayer_type = "block"\nops = ["x"]\n',
                             ["rules[0].layer_type", "'block'", "use one of gemm"]),
    "missing-layer-type": ('schema_version = 1\n[[rules]]\nops = ["x"]\n',
                           ["rules[0].layer_type", "None"]),
    "ops-not-a-list": ('schema_version = 1\n[[rules]]\nlayer_type = "gemm"\nops = "aten::mm"\n',
                       ["rules[0].ops", "must be a list"]),
    "kernels-not-strings": (
        'schema_version = 1\n[[rules]]\nlayer_type = "gemm"\nkernels = [1, 2]\n',
        ["rules[0].kernels", "must be a list of non-empty pattern strings"]),
    "empty-pattern": ('schema_version = 1\n[[rules]]\nlayer_type = "gemm"\nops = [""]\n',
                      ["rules[0].ops"]),
    "no-patterns": ('schema_version = 1\n[[rules]]\nlayer_type = "gemm"\n',
                    ["rules[0]", "neither ops nor kernels"]),
    "schema-version-2": ("schema_version = 2\n" + RULE, ["schema_version 2", "version 1"]),
    "schema-version-missing": (RULE, ["schema_version None", "schema_version = 1"]),
    "schema-version-string": ('schema_version = "1"\n' + RULE, ["schema_version '1'"]),
    "rules-not-array": ('schema_version = 1\nrules = "gemm"\n', ["`rules` must be an array"]),
    "rule-not-table": ("schema_version = 1\nrules = [1]\n", ["rules[0]", "must be a table"]),
    "replace-default-not-bool": ('schema_version = 1\nreplace_default = "yes"\n' + RULE,
                                 ["`replace_default` must be true or false"]),
    "malformed-toml": ("schema_version = 1\n[[rules]\n", ["malformed TOML", "line 2"]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_bad_layer_map_names_file_and_key(tmp_path, case):
    body, needles = BAD[case]
    path = team_file(tmp_path, body)
    with pytest.raises(InputError) as err:
        load_layer_map([path])
    message = str(err.value)
    assert message.startswith(str(path)), message
    for needle in needles:
        assert needle in message, (needle, message)


def test_missing_layer_map_file(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_layer_map([tmp_path / "nope.toml"])


def test_bad_layer_map_via_the_cli(tmp_path):
    path = team_file(tmp_path, BAD["bad-layer-type"][0])
    out = tmp_path / "out"
    r = CliRunner().invoke(
        app,
        ["trace", "import", str(trace_with(tmp_path, "aten::mm")), "--out", str(out),
         "--layer-map", str(path)],
    )  # fmt: skip
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert err.count("\n") == 0 and str(path) in err and "did you mean 'gemm'?" in err
    assert "Traceback" not in r.output
    assert not (out / TRACE_SUMMARY_FILE).exists()


def test_team_layer_map_via_the_cli_is_recorded(tmp_path):
    path = team_file(
        tmp_path, 'schema_version = 1\n[[rules]]\nlayer_type = "attention"\nops = ["aten::mm"]\n'
    )
    out = tmp_path / "out"
    r = CliRunner().invoke(
        app,
        ["trace", "import", str(trace_with(tmp_path, "aten::mm")), "--out", str(out),
         "--layer-map", str(path), "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads((out / TRACE_SUMMARY_FILE).read_text())
    assert [s["path"] for s in doc["layer_map"]] == [str(path), "rubrics/layer_map.toml"]
    assert set(doc["traces"][0]["op_mix"]["layer_types"]) == {"attention"}
