"""benchmarks/serving_targets.py on a synthetic serving bundle whose verdicts are worked by hand.

The workloads are the serving profile's own definitions (reviewkit.suite.serving) with timings
chosen here; the device is an H200 as a real bundle records it: bf16 datasheet peak 989
TFLOP/s (calibrated 774), HBM datasheet 4.8 TB/s with 4.0 TB/s measured, 132 SMs. Every sample
of a workload is the same time t, so its median is t exactly; each one's exposed overhead is
1% of t (a kernel-busy record), so its class is its roof's.

By hand:
- gate/up GEMM of the 8B at 4096 tokens: F = 2 x 4096 x 4096 x 28672, timed at F / (0.75 x
  989e12): MFU against the datasheet 75%, compute-bound -> meets;
- the 8B's attention output GEMM at 8192 tokens at 50% -> compute-bound but under 60%: fails;
- the 8B's gate/up at 2048 tokens at 10%: under 4096 tokens, outside the target;
  so the GEMM target covers 2, 1 of 2 meets it, lowest 50.0% -> fail.
- decode attention (8 KV heads): batch 32 x 8 = 256 >= 132 SMs and context 4096 -> inside,
  B / t / 4.0e12 = 0.75 and memory-bound -> meets; batch 64 x context 8192 inside at
  `b64_share` (0.50: fails, 0.80: meets); batch 8 x 8 = 64 < 132: outside (30%); batch 64 x
  context 1024 under 4k: outside (20%); batch 1 x
  context 1024 (a 4 MiB KV cache, inside the 60 MiB L2) outside (40%, "(l2)"); batch 256 x
  context 32768 not run (memory fit, its reason recorded); the other 24 cells absent.
  The target covers 3 cells (b32 x 4k, b64 x 8k, b256 x 32k), 2 of them measured. With b64
  at 50%: lowest 50.0%, 1 of 2 -> fail; at 80%: 75.0%, 2 of 2 -> pass.
- 11 workloads measured (the 3 GEMMs, 5 decode cells, MoE, fp8 GEMM, conv): `noisy_ids` of
  them alternate 0.8 t and 1.2 t (IQR / median 0.4 > 0.10: noisy): 1 -> 9.1% -> pass, 2 ->
  18.2% -> fail. Energy on all but the conv (the counter did not advance): 10 of 11 = 90.9%
  -> pass; the not-run cell counts in neither.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from runfactory import analysed

from reviewkit.analysis.energy import energy_absent, workload_energy
from reviewkit.bundle.run import STATUS_NOT_RUN, STATUS_OK, write_run
from reviewkit.suite.serving import serving_workloads

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "serving_targets.py"
PEAK, BANDWIDTH, DATASHEET_BW = 989e12, 4.0e12, 4.8e12
N = 20
GEMM_UP_4K = "gemm.llama-3-8b-mlp-gate-up.b1s4096.bf16"
GEMM_O_8K = "gemm.llama-3-8b-attn-o.b1s8192.bf16"
GEMM_UP_2K = "gemm.llama-3-8b-mlp-gate-up.b1s2048.bf16"
DECODE = "attention.llama-3-8b-decode-sdpa-gqa.b{}ctx{}.bf16"
MOE = "block.mixtral-8x7b-moe-experts-looped.t512.bf16"
FP8 = "gemm.llama-3-8b-mlp-gate-up-scaled-mm.t4096.fp8"
CONV = "conv.resnet-50-stage1-conv3x3.n32.bf16"
NOT_FIT = ("not run: its working set of 51.5 GB (34.4 GB read and written, x1.5 headroom) "
           "does not fit the 44.5 GB free on this device (torch.cuda.mem_get_info)")  # fmt: skip


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("serving_targets", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(spec, t: float | None, noisy: bool = False, energy: bool = True) -> dict:
    """A workload record as the runner writes one, measured at median t (None: not run)."""
    w = {
        "id": spec.id, "layer_type": spec.layer_type, "kernel": spec.kernel,
        "source_model": spec.source_model, "dtype": spec.dtype, "status": STATUS_OK,
        "reason": "", "inputs": [x.to_json() for x in spec.inputs], "params": spec.params,
        "flops": spec.flops, "matmul_flops": spec.matmul_flops, "bytes": spec.bytes,
        "definition_hash": spec.definition_hash(), "warmup_samples_s": [],
        "stopped_by": "target", "reproduce": f"reviewkit run --only '{spec.id}'",
    }  # fmt: skip
    if t is None:
        why = "not measured: does not fit the device's memory"
        return {**w, "status": STATUS_NOT_RUN, "reason": NOT_FIT, "samples_s": [],
                "energy": energy_absent(why)}  # fmt: skip
    samples = [t * (0.8 if i % 2 else 1.2) for i in range(N)] if noisy else [t] * N
    w["samples_s"] = samples
    w["overhead"] = {"available": True, "method": "kernel-busy", "kernel_busy_s": 0.99 * t}
    w["energy"] = (workload_energy({"gpu-0": 700.0 * sum(samples)}, ["gpu-0"], sum(samples), N,
                                   spec.flops, "NVML (test)", 0.1e-3) if energy else
                   energy_absent("the energy counter did not advance over the window"))  # fmt: skip
    return w


def _serving_bundle(folder: Path, b64_share: float, noisy_ids: tuple[str, ...]) -> Path:
    specs = {s.id: s for s in serving_workloads("bf16")}

    def gemm_at(wid: str, mfu: float) -> float:  # t = F / (MFU x P)
        return specs[wid].flops / (mfu * PEAK)

    def decode_at(batch: int, context: int, share: float) -> float:  # t = B / (share x W)
        return specs[DECODE.format(batch, context)].bytes / (share * BANDWIDTH)

    times = {
        GEMM_UP_4K: gemm_at(GEMM_UP_4K, 0.75),
        GEMM_O_8K: gemm_at(GEMM_O_8K, 0.50),
        GEMM_UP_2K: gemm_at(GEMM_UP_2K, 0.10),
        DECODE.format(32, 4096): decode_at(32, 4096, 0.75),
        DECODE.format(64, 8192): decode_at(64, 8192, b64_share),
        DECODE.format(8, 4096): decode_at(8, 4096, 0.30),
        DECODE.format(64, 1024): decode_at(64, 1024, 0.20),
        DECODE.format(1, 1024): decode_at(1, 1024, 0.40),
        DECODE.format(256, 32768): None,
        MOE: 2e-3, FP8: 1e-3, CONV: 5e-4,
    }  # fmt: skip
    workloads = [_record(specs[wid], t, noisy=wid in noisy_ids, energy=wid != CONV)
                 for wid, t in times.items()]  # fmt: skip
    doc = {
        "tool": {"name": "reviewkit", "version": "test"}, "complete": True,
        "profile": "serving", "suite": {"name": "reviewkit-core", "version": "1.2", "hash": "h"},
        "environment": {"device_type": "cuda", "device_name": "NVIDIA H200",
                        "device_multiprocessors": 132},
        "knobs": {"device": "cuda", "device_name": "NVIDIA H200", "dtypes": ["bf16"]},
        "ceilings": {
            "compute": {"bf16": {"peak": PEAK, "source": "datasheet", "measured": 774e12,
                                 "datasheet": PEAK, "datasheet_ref": "H200 SXM (test)"}},
            "bandwidth": {"peak": DATASHEET_BW, "source": "datasheet", "measured": BANDWIDTH,
                          "datasheet": DATASHEET_BW, "level": "hbm"},
            "memory": [{"level": "l2", "capacity_bytes": 60 << 20, "peak": BANDWIDTH},
                       {"level": "hbm", "capacity_bytes": None, "peak": BANDWIDTH}],
        },
        "workloads": workloads,
    }  # fmt: skip
    write_run(folder, analysed(doc))
    return folder


def _report(script, folder: Path) -> dict:
    from reviewkit.analysis.roofline import analyse_run
    from reviewkit.bundle.run import load_run

    return script.report(analyse_run(load_run(folder)))


def _targets(doc: dict) -> dict[str, dict]:
    gemm, decode, noisy, energy = doc["targets"]
    return {"gemm": gemm, "decode": decode, "noisy": noisy, "energy": energy}


def test_the_targets_are_judged_as_worked_by_hand(script, tmp_path):
    t = _targets(_report(script, _serving_bundle(tmp_path, 0.50, (MOE,))))
    gemm, decode = t["gemm"], t["decode"]
    assert (gemm["workloads"], gemm["meeting"], gemm["verdict"]) == (2, 1, "fail")
    assert gemm["value"] == pytest.approx(0.50)
    # inside the target: b32 x 4k, b64 x 8k and the b256 x 32k cell not run (judged: 2)
    assert (decode["workloads"], decode["judged"], decode["meeting"]) == (3, 2, 1)
    assert decode["verdict"] == "fail"
    assert decode["value"] == pytest.approx(0.50)
    noisy = t["noisy"]
    assert (noisy["workloads"], noisy["meeting"], noisy["verdict"]) == (11, 1, "pass")
    assert noisy["value"] == pytest.approx(1 / 11)
    assert (t["energy"]["meeting"], t["energy"]["workloads"], t["energy"]["verdict"]) == (
        10, 11, "pass")  # fmt: skip


def test_the_verdicts_turn_with_the_timings(script, tmp_path):
    t = _targets(_report(script, _serving_bundle(tmp_path, 0.80, (MOE, CONV))))
    assert (t["decode"]["meeting"], t["decode"]["verdict"]) == (2, "pass")
    assert t["decode"]["value"] == pytest.approx(0.75)
    assert (t["noisy"]["meeting"], t["noisy"]["verdict"]) == (2, "fail")


def test_each_gemm_is_against_the_datasheet_peak(script, tmp_path):
    rows = {r["id"]: r for r in _report(script, _serving_bundle(tmp_path, 0.5, ()))["gemms"]}
    assert set(rows) == {GEMM_UP_4K, GEMM_O_8K}  # 2048 tokens is outside the target
    assert rows[GEMM_UP_4K]["mfu_datasheet"] == pytest.approx(0.75)
    assert (rows[GEMM_UP_4K]["bottleneck"], rows[GEMM_UP_4K]["meets"]) == ("compute-bound", True)
    assert (rows[GEMM_O_8K]["bottleneck"], rows[GEMM_O_8K]["meets"]) == ("compute-bound", False)


def test_the_decode_grid_shows_every_cell(script, tmp_path):
    doc = _report(script, _serving_bundle(tmp_path, 0.50, ()))
    grid = doc["decode_grid"]
    assert (grid["batches"], grid["contexts"]) == ([1, 8, 32, 64, 128, 256],
                                                   [1024, 4096, 8192, 16384, 32768])  # fmt: skip
    cells = {(c["batch"], c["context"]): c for c in grid["cells"]}
    assert len(cells) == 30
    assert cells[(32, 4096)]["bandwidth_share"] == pytest.approx(0.75)
    assert (cells[(32, 4096)]["class"], cells[(32, 4096)]["in_target"]) == ("M", True)
    assert cells[(8, 4096)]["bandwidth_share"] == pytest.approx(0.30)
    assert not cells[(8, 4096)]["in_target"]  # 8 x 8 KV heads = 64 < 132 SMs
    assert not cells[(64, 1024)]["in_target"]  # context under 4096
    assert cells[(1, 1024)]["memory_level"] == "l2"
    assert cells[(256, 32768)]["status"] == STATUS_NOT_RUN
    assert cells[(256, 32768)]["reason"] == NOT_FIT
    assert sum(c["status"] == "absent" for c in cells.values()) == 24
    table = script.markdown(doc)
    assert "| 32 | absent | **75% M** | absent | absent | absent |" in table
    # 30% of 4.0 TB/s is 25% of the 4.8 TB/s roof (datasheet): under the 50% below-roof share
    assert "| 8 | absent | 30% M\\* | absent | absent | absent |" in table
    assert "| 1 | 40% M\\* (l2) |" in table
    assert "| 256 | absent | absent | absent | absent | not run: does not fit |" in table
    assert "| 64 | 20% M\\* | absent | **50% M\\*** | absent | absent |" in table
    assert f"- batch 256 x context 32768, {NOT_FIT}" in table


def test_a_run_without_sm_count_or_datasheet_says_why(script, tmp_path, capsys):
    folder = _serving_bundle(tmp_path, 0.5, ())
    doc = json.loads((folder / "run.json").read_text())
    doc["environment"] = {"device_type": "cpu"}
    doc["knobs"]["device_name"] = "Test CPU"
    doc["ceilings"]["compute"]["bf16"] = {"peak": 4e11, "source": "measured", "datasheet": None}
    (folder / "run.json").write_text(json.dumps(doc))
    script.main([str(folder), "--json"])
    gemm, decode, _, _ = json.loads(capsys.readouterr().out)["targets"]
    assert gemm["verdict"] == decode["verdict"] == "not applicable"
    assert gemm["reason"] == "no datasheet bf16 peak for Test CPU"
    assert decode["reason"] == "SM count not recorded (cpu device)"
