"""Platforms side by side: the workloads x platforms matrix (MFU, p99 against the SLA, perf per
watt), its chart and packet section, and a CPU-beside-CUDA review through check and packet.

Expected numbers are worked by hand from runfactory's workloads (FLOPs F) and ceilings (CPU
peak P = 2e11 FLOP/s, measured) and the A100 datasheet row of reviewkit/ceilings.py, with
constant samples so that p50 = p99 = mean = the sample.
"""

from __future__ import annotations

import json
import subprocess
import sys

import html5lib
import pypdfium2
import pytest
from chartspecs import datasets
from runfactory import WORKLOADS, complete_review, make_run, write_review

from reviewkit.analysis.compare import compare
from reviewkit.analysis.platforms import (
    MEASURED,
    NO_TARGET,
    NOT_IN_RUN,
    NOT_MEASURED,
    SLA_MET,
    SLA_MISSED,
    build_matrix,
    judge_sla,
    short_device,
)
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import load_run, write_run
from reviewkit.render import charts
from reviewkit.render.packet import build_model, write_packet
from reviewkit.render.packet.figures import trade_rows
from reviewkit.review.gate import run_check
from reviewkit.review.reviewfile import SlaTarget
from reviewkit.suite import ceilings

pytestmark = pytest.mark.usefixtures("weasyprint_warnings_fail")

PAYLOAD = '<script>alert(1)</script><img src=x onerror=alert(2)>"><svg onload=alert(3)>'
MODEL = "model.toy-decoder.b1s256"  # F = 2.7e10
GEMM = "gemm.toy-ffn-up.b4s512"  # F = 9.6e9
FLOPS = {name: flops for name, _, _, flops, *_ in WORKLOADS}
CPU_PEAK = 2e11  # runfactory's measured fp32 ceiling
CUDA_NAME = "NVIDIA A100-SXM4-80GB"
A100 = ceilings.lookup(CUDA_NAME)
A100_FP32_PEAK = 19.5e12  # the A100 datasheet's fp32 (non-tensor-core) rate, ceilings.py
# What a CUDA run records beside the CPU knobs (measure.knobs): settings a CPU does not have.
CUDA_KNOBS = {"device": "cuda:0", "device_name": CUDA_NAME, "cuda_matmul_allow_tf32": False,
              "cudnn_allow_tf32": True, "cudnn_benchmark": False}  # fmt: skip
# A100 SGEMM reaches ~95% of its 19.5 TFLOP/s; HBM2e copies ~1.6 of 2.039 TB/s. Only the
# datasheet values enter MFU: these sit beside them, as a real calibration would.
A100_MEASURED_FP32 = 18.5e12
A100_MEASURED_BYTES = 1.6e12
NO_RAPL = "no RAPL powercap interface (/sys/class/powercap does not exist)"
GPU_WATTS = 300.0


def constant(t_s: float, n: int = 200) -> list[float]:
    """n equal samples: every percentile and the mean are t_s."""
    return [t_s] * n


def cuda_run(folder, dtype: str = "fp32", **kw):
    """A runfactory run as a CUDA A100 records it: the datasheet peak is what MFU uses."""
    make_run(folder, dtype=dtype, knobs={**CUDA_KNOBS, **kw.pop("knobs", {})}, **kw)
    run = load_run(folder)
    run = run.with_values(ceilings={
        "compute": {dtype: ceilings.choose(A100_MEASURED_FP32, "test mm sweep",
                                           A100.peak_flops_per_s[dtype], A100.reference).to_json()},
        "bandwidth": ceilings.choose(A100_MEASURED_BYTES, "test copy", A100.peak_bytes_per_s,
                                     A100.reference).to_json(),
        "datasheet_entry": A100.name,
    }, environment={**run.environment, "device_type": "cuda",
                    "device_name": CUDA_NAME})  # fmt: skip
    write_run(folder, analyse_run(run))
    return folder


def analysed_bundle(folder):
    """The run bundle in `folder`, analysed (a bundle is read back as measured)."""
    return analyse_run(load_run(folder))


def cross_review() -> dict:
    """complete_review (model.* p99 <= 0.5 s, >= 2 calls/s) plus a per-shape GEMM target that
    names the slice key, no dtype: p99 <= 50 ms for the big FFN GEMM."""
    review = complete_review()
    review["runs"]["candidates"] = ["runs/cand", "runs/cand2"]
    review["sla"]["targets"].append({"workload": GEMM, "p99_s": 0.05})
    return review


def write_cross(folder):
    """Baseline on the test CPU without energy; candidate 1 the same suite on an A100 metered at
    300 W; candidate 2 the CPU again under a hostile name, with one thread."""
    no_energy = {name: NO_RAPL for name, *_ in WORKLOADS}
    path = write_review(
        folder, cross_review(),
        base_kw={"samples_for": {MODEL: constant(0.25), GEMM: constant(0.08)},
                 "energy_for": no_energy},
    )  # fmt: skip
    cuda_run(folder / "runs" / "cand", samples_for={MODEL: constant(4e-3), GEMM: constant(1e-3)},
             watts=GPU_WATTS, seed=1)  # fmt: skip
    make_run(folder / "runs" / "cand2", seed=2, knobs={"threads": 1, "device_name": PAYLOAD})
    return path


@pytest.fixture(scope="module")
def cross(tmp_path_factory):
    """(report, packet model, packet result) of the cross-device review, rendered once."""
    root = tmp_path_factory.mktemp("platforms")
    path = write_cross(root / "review")
    report = run_check(path)
    result = write_packet(path, root / "out")
    return report, json.loads(result.json.read_text()), result


def cell(model: dict, workload: str, platform: str) -> dict:
    [c] = [c for c in model["platforms"]["cells"]
           if c["workload"] == workload and c["platform"] == platform]  # fmt: skip
    return c


CPU, GPU = "Test CPU · fp32", "A100-SXM4-80GB · fp32"


# --- the matrix ------------------------------------------------------------------------------


def test_platform_labels_and_peaks(cross):
    _, model, _ = cross
    pl = model["platforms"]
    assert pl["multi_device"] and pl["devices"] == ["Test CPU", CUDA_NAME, PAYLOAD]
    labels = [p["label"] for p in pl["platforms"]]
    # "NVIDIA " dropped; the hostile name cut to 28 characters (27 and an ellipsis), escaped
    # wherever it is shown.
    assert labels == [CPU, GPU, PAYLOAD[:27] + "… · fp32"]
    by_label = {p["label"]: p for p in pl["platforms"]}
    assert by_label[GPU]["peak_flops_per_s"] == A100_FP32_PEAK
    assert by_label[GPU]["peak_source"] == "datasheet"
    assert by_label[CPU]["peak_flops_per_s"] == CPU_PEAK
    assert by_label[CPU]["peak_source"] == "measured"
    assert by_label[GPU]["device_type"] == "cuda" and by_label[CPU]["device_type"] == "cpu"
    # Rows: slice keys, the end-to-end model first.
    assert pl["workloads"][0] == MODEL and len(pl["workloads"]) == len(WORKLOADS)


def test_mfu_p99_throughput_by_hand(cross):
    _, model, _ = cross
    cpu, gpu = cell(model, MODEL, CPU), cell(model, MODEL, GPU)
    # CPU: t_c = F / P = 2.7e10 / 2e11 = 0.135 s; MFU = t_c / t = 0.135 / 0.25 = 0.54.
    assert cpu["mfu"] == pytest.approx(0.54)
    # A100: t_c = 2.7e10 / 19.5e12 = 1.3846e-3 s; MFU = 1.3846e-3 / 4e-3 = 0.34615.
    assert gpu["mfu"] == pytest.approx(2.7e10 / 19.5e12 / 4e-3)
    assert gpu["mfu"] == pytest.approx(0.34615, rel=1e-4)
    # Big GEMM on the A100: 9.6e9 / 19.5e12 / 1e-3 = 0.49231.
    assert cell(model, GEMM, GPU)["mfu"] == pytest.approx(0.49231, rel=1e-4)
    assert cpu["p99_s"] == pytest.approx(0.25) and gpu["p99_s"] == pytest.approx(4e-3)
    assert cpu["p99_ms"] == pytest.approx(250.0)
    # Throughput: 1 / mean per call at batch 1: 1 / 0.25 = 4/s and 1 / 4e-3 = 250/s.
    assert cpu["throughput_calls_per_s"] == pytest.approx(4.0)
    assert gpu["throughput_calls_per_s"] == pytest.approx(250.0)
    assert cpu["batch"] == 1 and cell(model, GEMM, CPU)["batch"] == 4


def test_sla_verdicts_against_the_review_targets(cross):
    _, model, _ = cross
    # model.*: p99 0.25 s <= 0.5 s and 4/s >= 2/s on the CPU; 4 ms and 250/s on the A100.
    assert cell(model, MODEL, CPU)["sla"] == SLA_MET
    assert cell(model, MODEL, GPU)["sla"] == SLA_MET
    assert cell(model, MODEL, CPU)["sla_p99_s"] == 0.5
    # The GEMM target names the slice key, no dtype: 80 ms > 50 ms on the CPU, 1 ms on the A100.
    cpu_gemm = cell(model, GEMM, CPU)
    assert cpu_gemm["sla"] == SLA_MISSED
    assert "p99 80 ms > 50 ms" in cpu_gemm["sla_reason"] and GEMM in cpu_gemm["sla_target"]
    assert cell(model, GEMM, GPU)["sla"] == SLA_MET
    # No target names the attention workloads.
    assert cell(model, "attention.toy-sdpa.b1s128", GPU)["sla"] == NO_TARGET


def test_perf_per_watt_only_where_energy_was_measured(cross):
    _, model, _ = cross
    gpu, cpu = cell(model, MODEL, GPU), cell(model, MODEL, CPU)
    # 300 W over every call of 4 ms: 1.2 J a call; F / J = 2.7e10 / 1.2 = 2.25e10 FLOP/J, the
    # same as achieved FLOP/s per watt: (2.7e10 / 4e-3) / 300.
    assert gpu["flops_per_joule"] == pytest.approx(2.25e10)
    assert gpu["joules_per_call"] == pytest.approx(1.2)
    assert gpu["avg_watts"] == pytest.approx(GPU_WATTS)
    assert gpu["energy_reason"] == ""
    # The CPU baseline metered nothing: no value, and the reason its run recorded.
    assert cpu["flops_per_joule"] is None and cpu["joules_per_call"] is None
    assert cpu["energy_reason"] == NO_RAPL
    by_label = {p["label"]: p for p in model["platforms"]["platforms"]}
    assert by_label[CPU]["energy"] == f"not measured: {NO_RAPL}"
    assert by_label[GPU]["energy"].startswith("metered for 5 of 5")


def test_trade_view_energy_is_the_model_joules_per_call(cross):
    report, model, _ = cross
    listed = trade_rows(report)
    # each row names the dtype of the workload it draws (the claim's, or the run's model)
    assert all(r["candidate"].endswith(" · " + r["workload"].rsplit(".", 1)[-1]) for r in listed)
    rows = {r["candidate"].split(" · ")[0]: r for r in listed}
    # Candidate 1's model: 300 W x 4 ms = 1.2 J per call. Candidate 2 metered nothing.
    assert rows["candidate 1"]["energy_j_per_call"] == pytest.approx(1.2)
    assert rows["candidate 2"]["energy_j_per_call"] is None
    bars = [row for values in datasets(model["charts"]["trade_view"]) for row in values
            if str(row.get("candidate")).startswith("candidate 1 · ")
            and "value" in row]  # fmt: skip
    assert pytest.approx(1.2) in [row["value"] for row in bars]  # drawn, not "not available"


def test_trade_view_across_devices_trades_the_baseline_too(cross):
    report, model, _ = cross
    rows = trade_rows(report, with_baseline=True)
    labels = [r["candidate"] for r in rows]
    # The CPU baseline is a platform of the shortlist; each label names its device.
    assert labels[0].startswith("baseline · ") and len(labels) == 3
    assert all(" · " in label for label in labels)
    # Staying on the baseline rolls nothing out; the candidates carry the review's risk.
    assert rows[0]["engineering_risk"] == 0.0
    assert rows[1]["engineering_risk"] == rows[2]["engineering_risk"] > 0
    drawn = {str(row.get("candidate")) for values in datasets(model["charts"]["trade_view"])
             for row in values}  # fmt: skip
    assert labels[0] in drawn


# --- cross-device review: check and packet ---------------------------------------------------


def test_device_change_is_one_knob_even_with_cuda_only_settings(cross):
    report, _, _ = cross
    single = next(f for f in report.findings if f.item.id == "single-knob")
    # Candidate 1 records three CUDA switches the CPU does not have, at torch's defaults: they
    # follow from the device, so the device is the one change. Candidate 2 is another CPU
    # (another device name) with one thread: a move between two machines is a device change
    # too, and the rubric lists threads among the settings a machine implies.
    assert single.status == "pass", single.summary
    assert (
        "candidate 1 changes one knob: device (cpu → cuda:0); the device brings "
        "cuda_matmul_allow_tf32, cudnn_allow_tf32, cudnn_benchmark with it" in single.summary
    )
    assert "candidate 2 changes one knob: device_name (Test CPU → " in single.summary
    assert single.summary.endswith("; the device brings threads with it (listed, not counted)")
    assert [k.knob for k in report.comparisons[0].mapping_knob_changes()] == ["device"]
    # The full diff still lists them for the packet's knob table.
    assert {"cuda_matmul_allow_tf32", "cudnn_benchmark"} <= {
        k.knob for k in report.comparisons[0].knob_changes
    }


def test_cuda_switches_count_when_both_runs_are_cuda(tmp_path):
    base = analysed_bundle(cuda_run(tmp_path / "a"))
    cand = analysed_bundle(cuda_run(tmp_path / "b", knobs={"cuda_matmul_allow_tf32": True}))
    assert [k.knob for k in compare(base, cand).mapping_knob_changes()] == [
        "cuda_matmul_allow_tf32"
    ]


def test_cli_check_and_packet_on_a_cross_device_review(tmp_path):
    path = write_cross(tmp_path / "review")
    checked = subprocess.run([sys.executable, "-m", "reviewkit", "check", str(path), "--json"],
                             capture_output=True, text=True)  # fmt: skip
    assert checked.returncode in (0, 1), checked.stderr  # a verdict, not bad input (2)
    doc = json.loads(checked.stdout)
    assert {f["id"]: f["status"] for f in doc["findings"]}["single-knob"] == "pass"
    assert [c["candidate"] for c in doc["comparisons"]] == ["runs/cand", "runs/cand2"]
    out = tmp_path / "packet"
    cmd = [sys.executable, "-m", "reviewkit", "packet", str(path), "--out", str(out), "--no-pdf"]
    packet = subprocess.run(cmd, capture_output=True, text=True)
    assert packet.returncode == 0, packet.stderr
    assert "platform_matrix" in json.loads((out / "packet.json").read_text())["charts"]


def test_packet_section_chart_and_pdf(cross):
    _, model, result = cross
    assert "platform_matrix" in model["charts"]
    spec = model["charts"]["platform_matrix"]
    charts.validate(spec)
    svg = (result.out_dir / "assets" / "charts" / "platform_matrix.svg").read_text()
    assert svg.startswith("<svg") and ">SLA missed<" in svg and ">MFU 34.6%<" in svg
    html = result.html.read_text()
    tree = html5lib.parse(html, namespaceHTMLElements=False)
    section = tree.find(".//section[@id='platforms']")
    assert section.find("h2").text == "Platforms side by side"
    assert section.find(".//figure[@id='chart-platform_matrix']") is not None
    rows = section.findall(".//table[@class='dense t-platform-cells']/tbody/tr")
    assert len(rows) == len(WORKLOADS) * 3  # every workload on every platform
    assert '<a class="toc-link" href="#platforms">' in html
    pages = pypdfium2.PdfDocument(str(result.pdf))
    text = "\n".join(pages[i].get_textpage().get_text_range() for i in range(len(pages)))
    assert "Platforms side by side: MFU and p99 by workload" in text  # the chart, as vector text
    assert "19,500 (datasheet)" in text  # the A100's fp32 peak in GFLOP/s


def test_hostile_device_name_is_escaped(cross):
    _, _, result = cross
    html = result.html.read_text()
    assert "<script>alert(1)</script>" not in html
    tree = html5lib.parse(html, namespaceHTMLElements=False)
    section = tree.find(".//section[@id='platforms']")
    # The name is text in the section's tables, never markup: no script, img or handler.
    assert PAYLOAD in "".join(section.itertext())
    assert all(s.get("type") == "application/json" for s in section.iter("script"))
    assert not [el for el in section.iter("img") if el.get("src") == "x"]
    for el in section.iter():
        assert not [a for a in el.attrib if a.lower().startswith("on")], el.tag
    svg = (result.out_dir / "assets" / "charts" / "platform_matrix.svg").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg and "<script" not in svg
    # In the embedded spec, jinja's tojson escapes < > & ': the string is there, as data.
    spec = json.loads(section.find(".//script[@id='spec-platform_matrix']").text)
    assert PAYLOAD in json.dumps(spec, ensure_ascii=False).replace('\\"', '"')
    pages = pypdfium2.PdfDocument(str(result.pdf))
    text = "\n".join(pages[i].get_textpage().get_text_range() for i in range(len(pages)))
    assert "<script>alert(1)</script>" in text  # shown as text in the PDF


def test_one_device_says_so_instead_of_a_chart(tmp_path):
    model = build_model(run_check(write_review(tmp_path / "review", complete_review())))
    pl = model["platforms"]
    assert not pl["multi_device"] and pl["devices"] == ["Test CPU"]
    assert "platform_matrix" not in model["charts"]
    assert pl["note"].startswith("All runs are on one device, Test CPU")
    # The two dtypes are still two platforms in packet.json.
    assert [p["label"] for p in pl["platforms"]] == ["Test CPU · fp32", "Test CPU · bf16"]


# --- build_matrix on its own -----------------------------------------------------------------


def test_labels_are_short_and_unique(tmp_path):
    xeon = "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz"
    docs = [
        ("baseline", analysed_bundle(make_run(tmp_path / "a", knobs={"device_name": xeon}))),
        ("candidate 1", analysed_bundle(make_run(tmp_path / "b", knobs={"threads": 8}))),
        ("candidate 2", analysed_bundle(make_run(tmp_path / "c", knobs={"threads": 16}))),
        ("candidate 3", analysed_bundle(make_run(tmp_path / "d", knobs={"threads": 16}))),
    ]
    labels = [p.label for p in build_matrix(docs).platforms]
    assert labels == [
        "Intel Xeon Platinum 8480+ · fp32",  # marks and the clock dropped
        "Test CPU · fp32 · threads=8",  # same device and dtype: the knob that differs
        "Test CPU · fp32 · threads=16 (candidate 2)",  # ... and the run when nothing else does
        "Test CPU · fp32 · threads=16 (candidate 3)",
    ]
    assert short_device("AMD EPYC 7763 64-Core Processor") == "AMD EPYC 7763"
    assert short_device("NVIDIA H100 80GB HBM3") == "H100 80GB HBM3"


def test_a_run_of_two_dtypes_is_two_platforms_lined_up_by_slice(tmp_path):
    fp32 = load_run(make_run(tmp_path / "a", dtype="fp32"))
    bf16 = load_run(make_run(tmp_path / "b", dtype="bf16", speedup=2.0))
    both = fp32.with_values(
        knobs={**fp32.knobs, "dtypes": ["fp32", "bf16"]},
        workloads=fp32.workloads + bf16.workloads,
        ceilings={"compute": {**fp32.ceilings["compute"], **bf16.ceilings["compute"]},
                  "bandwidth": fp32.ceilings["bandwidth"]})  # fmt: skip
    matrix = build_matrix([("baseline", analyse_run(both))])
    assert [p.label for p in matrix.platforms] == ["Test CPU · fp32", "Test CPU · bf16"]
    assert not matrix.multi_device
    c32, c16 = matrix.cell(MODEL, "Test CPU · fp32"), matrix.cell(MODEL, "Test CPU · bf16")
    assert (c32.workload_id, c16.workload_id) == (f"{MODEL}.fp32", f"{MODEL}.bf16")
    assert c32.status == c16.status == MEASURED
    assert len(matrix.cells) == 2 * len(WORKLOADS)


def test_missing_failed_and_ceiling_less_cells_say_why(tmp_path):
    base = analysed_bundle(make_run(tmp_path / "a"))
    partial = load_run(make_run(tmp_path / "b", only=(MODEL, GEMM), status_for={GEMM: "error"},
                                knobs=CUDA_KNOBS))  # fmt: skip
    partial = analyse_run(partial.with_values(
        ceilings={"compute": {}, "bandwidth": partial.ceilings["bandwidth"]}))
    targets = [SlaTarget(workload="gemm.*", p99_s=0.05)]
    m = build_matrix([("baseline", base), ("candidate", partial)], targets)
    gpu = "A100-SXM4-80GB · fp32"
    absent = m.cell("attention.toy-sdpa.b1s128", gpu)
    assert (absent.status, absent.reason, absent.workload_id) == (NOT_MEASURED, NOT_IN_RUN, None)
    assert absent.mfu is None and absent.flops_per_joule is None and absent.sla == NO_TARGET
    failed = m.cell(GEMM, gpu)
    assert failed.status == NOT_MEASURED and failed.reason.startswith("error: RuntimeError")
    assert failed.sla == NOT_MEASURED  # a target applies, but there is nothing to judge
    model = m.cell(MODEL, gpu)
    assert model.status == MEASURED and model.mfu is None
    assert model.mfu_reason == "no compute ceiling for fp32 on this device"
    assert model.energy_reason == "no energy recorded for this workload"


def test_judge_sla_rules():
    by_id = SlaTarget(workload="*.bf16", p99_s=0.1)
    rate = SlaTarget(workload="model.*", min_throughput_per_s=10.0)
    # p99 0.08 s meets 0.1 s, but 1 / mean = 8/s misses 10/s: missed, the miss said.
    verdict, why = judge_sla([by_id, rate], 0.08, 8.0)
    assert verdict == SLA_MISSED and why == "8 calls/s < 10/s (model.*)"
    assert judge_sla([by_id, rate], 0.08, 12.0)[0] == SLA_MET
    assert judge_sla([by_id], 0.1, 1.0)[0] == SLA_MET  # at the target is within it
    assert judge_sla([SlaTarget(workload="model.*")], 9.0, 0.1) == (NO_TARGET, "")


def test_id_glob_holds_only_the_matching_dtype(tmp_path):
    # "model.*.bf16" matches ids, not slice keys: only the bf16 platform is held to it.
    fp32 = analysed_bundle(make_run(tmp_path / "a", samples_for={MODEL: constant(0.2)}))
    bf16 = analysed_bundle(cuda_run(tmp_path / "b", dtype="bf16",
                                    samples_for={MODEL: constant(0.2)}))  # fmt: skip
    m = build_matrix([("baseline", fp32), ("candidate", bf16)],
                     [SlaTarget(workload="model.*.bf16", p99_s=0.1)])  # fmt: skip
    assert m.cell(MODEL, "Test CPU · fp32").sla == NO_TARGET
    # 0.2 s > 0.1 s on the bf16 platform; its MFU against the A100's 312 TFLOP/s bf16 peak.
    gpu = m.cell(MODEL, "A100-SXM4-80GB · bf16")
    assert gpu.sla == SLA_MISSED
    assert gpu.mfu == pytest.approx(2.7e10 / 312e12 / 0.2)


# --- the chart -------------------------------------------------------------------------------


def test_chart_cells_marks_and_missing(tmp_path):
    base = analysed_bundle(make_run(tmp_path / "a", samples_for={GEMM: constant(0.08)}))
    gpu_doc = analysed_bundle(cuda_run(tmp_path / "b", only=(MODEL, GEMM)))
    m = build_matrix([("baseline", base), ("candidate", gpu_doc)],
                     [SlaTarget(workload=GEMM, p99_s=0.05)])  # fmt: skip
    cells = [{**c.to_json(), "device_name": "x", "dtype": "fp32", "peak_source": "measured"}
             for c in m.cells]  # fmt: skip
    spec = charts.platform_matrix(cells, [p.label for p in m.platforms])
    charts.validate(spec)
    rows = [r for values in datasets(spec) for r in values if "line1" in r]
    by = {(r["workload"], r["platform"]): r for r in rows}
    assert by[(GEMM, CPU)]["missed"] and by[(GEMM, CPU)]["line3"] == "SLA missed"
    # 9.6e9 / 2e11 / 0.08 = 0.6: "MFU 60.0%"; p99 80 ms.
    assert by[(GEMM, CPU)]["line1"] == "MFU 60.0%" and by[(GEMM, CPU)]["line2"] == "p99 80 ms"
    gone = by[("attention.toy-sdpa.b1s128", GPU)]
    assert gone["line1"] == "not measured" and gone["mfu"] is None
    assert gone["status_text"] == f"not measured: {NOT_IN_RUN}"
    assert by[(MODEL, GPU)]["perf_w_text"] == "not measured: no energy recorded for this workload"
    svg = charts.to_svg(spec)
    assert ">not measured<" in svg and ">SLA missed<" in svg


def test_chart_caps_rows_and_says_so():
    cells = [
        {
            "workload": f"gemm.w{i:02d}",
            "platform": p,
            "status": "measured",
            "mfu": 0.5,
            "p99_s": 1e-3,
            "sla": "no target",
        }
        for i in range(30)
        for p in ("a", "b")
    ]
    spec = charts.platform_matrix(cells, ["a", "b"])
    rows = {r["workload"] for values in datasets(spec) for r in values if "line1" in r}
    assert len(rows) == charts.MAX_PLATFORM_ROWS
    assert f"the first {charts.MAX_PLATFORM_ROWS} of 30 workloads" in json.dumps(spec["title"])
    assert charts.platform_matrix([], [])["mark"]["type"] == "text"  # "no data", not empty
