"""Quality of a team's exported program (`quality --model --inputs`): a tiny classifier exported
here, measured against float64, and every bad file refused before torch runs anything."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reviewkit.common.errors import UsageError  # noqa: E402
from reviewkit.measure import program  # noqa: E402
from reviewkit.measure.quality import measure_program_quality, quality_mappings  # noqa: E402

FEATURES, HIDDEN, CLASSES, BATCH = 32, 64, 10, 256


class Classifier(torch.nn.Module):
    """Two linear layers and a classification head: logits over CLASSES per example."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(FEATURES, HIDDEN), torch.nn.GELU(),
            torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU(),
        )  # fmt: skip
        self.head = torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.head(self.layers(x))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(program.pt2, inputs.pt): the classifier exported with a dynamic batch (so its archive
    holds shape expressions), and a batch of inputs saved as a one-tuple."""
    folder = tmp_path_factory.mktemp("program")
    torch.manual_seed(0)
    model = Classifier().eval()
    x = torch.randn(BATCH, FEATURES)
    batch = torch.export.Dim("batch")
    ep = torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    torch.export.save(ep, folder / "classifier.pt2")
    torch.save((x,), folder / "inputs.pt")
    return folder / "classifier.pt2", folder / "inputs.pt"


@pytest.fixture(scope="module")
def measured(exported):
    model, inputs = exported
    mappings = quality_mappings("bf16", "") + quality_mappings(None, "quantization=int8-dynamic")
    return measure_program_quality(model, inputs, mappings=mappings)


def _row(doc, **mapping):
    return next(r for r in doc["results"] if r["mapping"] == mapping)


def test_fp32_as_exported_is_float64_to_fp32_rounding(measured):
    base = _row(measured)
    assert measured["reference"] == "fp64" and base["role"] == "baseline"
    # fp32 keeps 24 significant bits (unit roundoff 2^-24 = 6e-8): three matmuls of K <= 64
    # terms stay far below 1e-5 of the logits' norm.
    assert 0 < base["rel_error"] < 1e-5
    assert base["top1_agreement"] == 1.0 and base["kl_divergence"] < 1e-9


def test_bf16_drift_is_within_a_few_unit_roundoffs(measured):
    row = _row(measured, dtype="bf16")
    assert row["status"] == "ok" and row["source"] == "model" and row["dtype"] == "bf16"
    # bf16 keeps 8 significant bits: unit roundoff 2^-8 = 3.9e-3 per rounding; weights, inputs
    # and each layer's output are rounded, so a few layers land at a few u, under 1e-2, never 0.
    assert 1e-4 < row["rel_error"] < 1e-2
    # The head's logits: BATCH positions of CLASSES each; a perturbation of relative size ~u
    # moves KL by ~u^2/2 ~ 1e-5 nats and flips an argmax only where two logits nearly tie.
    assert row["positions"] == BATCH
    assert row["top1_agreement"] >= 0.95 and 0 <= row["kl_divergence"] < 1e-3


def test_quantization_is_not_applicable_to_an_exported_program_and_says_why(measured):
    row = _row(measured, quantization="int8-dynamic")
    assert row["status"] == "not applicable" and row["dtype"] == "int8"
    # torch.export keeps aten.linear calls on parameters, no nn.Linear modules to rewrite
    assert "0 nn.Linear found" in row["reason"] and "export the int8-dynamic model" in row["reason"]


def test_the_file_records_the_program_its_inputs_and_the_loaders(measured, exported):
    model = measured["model"]
    assert model["sha256"] == program.sha256_file(exported[0])
    assert model["inputs"]["sha256"] == program.sha256_file(exported[1])
    assert model["logits"] == {"used": True, "rule": "auto"}
    assert "weights_only=True" in model["loaders"]["inputs"]
    assert "can run code" in model["loaders"]["model"]
    assert measured["source"].startswith("model classifier.pt2 (sha256 ")
    assert measured["mappings"] == [{"dtype": "bf16"}, {"quantization": "int8-dynamic"}]


def test_fp32_matmul_precision_runs_the_program_in_bf16_matmuls(exported):
    medium = quality_mappings(None, "float32_matmul_precision=medium")
    doc = measure_program_quality(*exported, mappings=medium)
    row = _row(doc, float32_matmul_precision="medium")
    assert row["dtype"] == "bf16" and row["status"] == "ok"
    # on a CPU without bf16 matmul support for fp32 "medium" changes nothing; where it does,
    # the error is bf16's; either way not above it
    assert 0 < row["rel_error"] < 1e-2


def test_a_pickled_object_in_the_inputs_is_refused(exported, tmp_path):
    bad = tmp_path / "inputs.pt"
    torch.save({"x": torch.randn(2, FEATURES), "why": Path("an arbitrary object")}, bad)
    with pytest.raises(UsageError) as err:
        program.load_inputs(bad, program.load_program(exported[0]))
    message = str(err.value)
    assert str(bad) in message and "weights-only unpickler refuses" in message


def test_inputs_of_another_count_are_a_clear_error(exported, tmp_path):
    two = tmp_path / "two.pt"
    torch.save((torch.randn(2, FEATURES), torch.randn(2, FEATURES)), two)
    with pytest.raises(UsageError) as err:
        program.load_inputs(two, program.load_program(exported[0]))
    assert "holds 2 positional input(s); the program takes 1 positional input(s)" in str(err.value)


def test_inputs_of_another_width_are_a_clear_error(exported, tmp_path):
    wide = tmp_path / "wide.pt"
    torch.save(torch.randn(4, FEATURES + 1), wide)  # a bare tensor is one positional input
    with pytest.raises(UsageError, match="the program did not run on them"):
        measure_program_quality(exported[0], wide, mappings=quality_mappings("bf16", ""))


def _rewritten(src: Path, dst: Path, edit=lambda name, data: data, extra=None) -> Path:
    """A copy of the archive with `edit(entry, bytes) -> bytes` applied, and `extra` (an
    (entry, bytes) pair) added."""
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, "w") as b:
        for name in a.namelist():
            b.writestr(name, edit(name, a.read(name)))
        if extra:
            b.writestr(*extra)
    return dst


def _eval_in_expression(name, data):
    if not name.endswith("models/model.json"):
        return data
    text = data.decode()
    assert "Symbol('s" in text  # the dynamic batch: the legitimate expressions pass
    return text.replace("Symbol(", "__import__('os').system('touch PWNED') or Symbol(", 1).encode()


def _pickled_weight(name, data):
    if not name.endswith("weights_config.json"):
        return data
    return data.replace(b'"use_pickle": false', b'"use_pickle": true', 1)


@pytest.mark.parametrize(
    "edit,extra,needle",
    [
        (_eval_in_expression, None, "not sympy arithmetic"),
        (None, ("classifier/data/aotinductor/model/x.so", b"ELF"), "not compiled packages"),
        (_pickled_weight, None, "full pickle"),
    ],
    ids=["eval-in-shape-expression", "aotinductor-library", "pickled-weight"],
)
def test_an_archive_torch_would_execute_is_refused_before_torch_reads_it(
    exported, tmp_path, monkeypatch, edit, extra, needle
):
    monkeypatch.chdir(tmp_path)
    bad = _rewritten(exported[0], tmp_path / "bad.pt2", edit or (lambda n, d: d), extra)
    loads = []
    monkeypatch.setattr(torch.export, "load", lambda *a, **k: loads.append(a))
    with pytest.raises(UsageError, match=needle) as err:
        program.load_program(bad)
    assert str(bad) in str(err.value)
    assert loads == [] and not (tmp_path / "PWNED").exists()


def test_a_graph_calling_python_is_refused(exported, tmp_path):
    def call_os(name, data):
        if not name.endswith("models/model.json"):
            return data
        doc = json.loads(data)
        node = doc["graph_module"]["graph"]["nodes"][0]
        node["target"], node["inputs"] = "torch.os.getcwd", []
        return json.dumps(doc).encode()

    bad = _rewritten(exported[0], tmp_path / "calls.pt2", call_os)
    # torch's own verifier refuses it while loading; reviewkit checks the graph again after
    with pytest.raises(UsageError, match=r"torch\.export\.load could not read it"):
        program.load_program(bad)


def test_not_a_program_or_missing_is_a_clear_error(tmp_path):
    text = tmp_path / "model.pt2"
    text.write_text("not a zip")
    with pytest.raises(UsageError, match=r"not a torch\.export program"):
        program.load_program(text)
    with pytest.raises(UsageError, match="no such file"):
        program.load_program(tmp_path / "absent.pt2")


def test_cli_measures_the_program_and_refuses_bad_input_without_writing(exported, tmp_path):
    model, inputs = exported
    out = tmp_path / "quality.json"
    ok = subprocess.run([sys.executable, "-m", "reviewkit", "quality", "--model", str(model),
                         "--inputs", str(inputs), "--dtype", "bf16", "--out", str(out)],
                        capture_output=True, text=True)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 2
    assert [r["mapping"] for r in doc["results"]] == [{}, {"dtype": "bf16"}]
    bad_inputs = tmp_path / "bad.pt"
    torch.save([Path("x")], bad_inputs)
    out2 = tmp_path / "never.json"
    bad = subprocess.run([sys.executable, "-m", "reviewkit", "quality", "--model", str(model),
                          "--inputs", str(bad_inputs), "--out", str(out2)],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and str(bad_inputs) in bad.stderr and not out2.exists()
    alone = subprocess.run([sys.executable, "-m", "reviewkit", "quality", "--model", str(model)],
                           capture_output=True, text=True)  # fmt: skip
    assert alone.returncode == 2 and "--model without --inputs" in alone.stderr
