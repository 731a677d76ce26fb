"""The work torch's CPU flash attention computes for a causal call, worked by hand, and the
projection pricing a causal call at it on a CPU and at the counted half elsewhere."""

from __future__ import annotations

import pytest

from reviewkit.analysis import efficiency_fit as fit
from reviewkit.analysis.causal_work import causal_seqs, cpu_flash_pairs, work_ratio
from reviewkit.analysis.project import TargetWorkload, project_one, target_device


@pytest.mark.parametrize(("seq", "pairs"), [
    # 128 queries: blocks of 32 rows, one key block of min(512, 128) = 128 keys each: all pairs
    (128, 128 * 128),
    # 512: blocks of 64 rows; each reaches at most key 512, inside the first key block of 512,
    # which is computed whole: all pairs
    (512, 512 * 512),
    # 1000: blocks of 256 rows at 0, 256, 512, 768 (the last 232 rows) reach keys 256, 512,
    # 768, 1000, so compute 512, 512, 1000 and 1000 keys (whole blocks of 512, the last cut at
    # 1000): 256 x 512 + 256 x 512 + 256 x 1000 + 232 x 1000 = 750,144
    (1000, 750_144),
    # 2048: eight blocks of 256 rows reach 256 ... 2048 and compute 512, 512, 1024, 1024,
    # 1536, 1536, 2048, 2048 keys: 10,240 x 256 = 2,621,440, 0.625 of all 2048^2 pairs
    (2048, 2_621_440),
])  # fmt: skip
def test_the_cpu_kernel_computes_whole_key_blocks(seq, pairs):
    assert cpu_flash_pairs(seq, seq) == pairs


def test_the_ratio_is_over_the_counted_half_on_a_cpu_only():
    # counted: 2048 x 2049 / 2 = 2,098,176 pairs
    assert work_ratio((2048, 2048), "cpu") == pytest.approx(2_621_440 / 2_098_176)
    assert work_ratio((512, 512), "cpu") == pytest.approx(512 * 512 / (512 * 513 / 2))
    assert work_ratio((2048, 2048), "cuda") == work_ratio((2048, 2048), "gpu") == 1.0
    assert work_ratio(None, "cpu") == 1.0


def test_only_a_causal_sdpa_call_has_its_seqs_taken():
    assert causal_seqs("sdpa", {"seq": 512, "causal": True}) == (512, 512)
    assert causal_seqs("sdpa", {"seq": 512, "causal": False}) is None
    assert causal_seqs("sdpa_gqa", {"seq": 512, "causal": True}) is None
    assert causal_seqs("sdpa", None) is None


def _causal_point(seq: int, share: float) -> fit.EfficiencyPoint:
    # a compute-bound causal point on a 1 TFLOP/s device whose kernel reaches `share` of the
    # roof of what it computes
    flops = 4.0 * 12 * 64 * seq * seq  # every pair, as computed at 128 and 512
    roof_s = flops / 1e12
    return fit.EfficiencyPoint(f"attention.c{seq}", "attention", "fp32", "CPU", "fp-c", 64.0,
                               "sdpa+causal", roof_s, roof_s / share, 0.0, share, "")  # fmt: skip


def test_a_causal_target_is_priced_at_the_work_its_device_computes():
    # Three points at one share, 0.6 of the computed work's roof. A causal s2048 target
    # (12 heads of 64, counted FLOPs 4 x 12 x 64 x 2,098,176) on a CPU computes 1.2494x that:
    # roof 1.2494 x 6.445 ms = 8.053 ms, time 8.053 / 0.6 = 13.42 ms. On a GPU its blocks are
    # not modelled: the counted roof, 6.445 / 0.6 = 10.74 ms.
    points = [_causal_point(s, 0.6) for s in (128, 256, 512)]
    counted = 4.0 * 12 * 64 * 2048 * 2049 / 2
    target = TargetWorkload("attention.c2048", "attention", "fp32", counted, 1e6, "sdpa+causal",
                            causal_seqs=(2048, 2048))  # fmt: skip
    cpu = target_device("CPU", {"fp32": 1e12}, 1e11, fingerprint="fp-c", kind="cpu")
    gpu = target_device("CPU", {"fp32": 1e12}, 1e11, fingerprint="fp-c", kind="gpu")
    on_cpu = project_one(target, cpu, points, noise_sd=0.0)
    on_gpu = project_one(target, gpu, points, noise_sd=0.0)
    assert on_cpu.roof_s == pytest.approx(counted * 2_621_440 / 2_098_176 / 1e12)
    assert on_cpu.share == pytest.approx(0.6, rel=1e-6)
    assert on_cpu.projected_s == pytest.approx(13.42e-3, rel=1e-3)
    assert on_gpu.projected_s == pytest.approx(10.74e-3, rel=1e-3)


def _causal_run(device_type: str):
    from runfactory import analysed, square_gemm_doc

    # one causal SDPA at sequence 2048 (12 heads of 64, 1 MB of q, k, v, o: compute-bound on a
    # 1 TFLOP/s, 100 GB/s device) that takes exactly the roof of the work the CPU kernel does
    doc = square_gemm_doc(0.5, None, ())
    doc["environment"]["device_type"] = device_type
    counted = 4.0 * 12 * 64 * 2048 * 2049 / 2
    t = counted * 2_621_440 / 2_098_176 / 1e12
    doc["workloads"] = [{
        "id": "attention.c2048.fp32", "layer_type": "attention", "kernel": "sdpa",
        "dtype": "fp32", "status": "ok", "flops": counted, "matmul_flops": counted,
        "bytes": 1e6, "samples_s": [t] * 40, "definition_hash": "0" * 16, "inputs": [],
        "warmup_samples_s": [], "params": {"batch": 1, "seq": 2048, "heads": 12,
                                           "head_dim": 64, "causal": True}}]  # fmt: skip
    return analysed(doc)


def test_a_measured_causal_call_on_a_cpu_is_its_kernels_share_of_what_it_computes():
    # at the roof of its computed work: share 1 on a CPU (not clamped), 0.80 = 2,098,176 /
    # 2,621,440 of the counted work's roof where its device's blocks are not modelled
    (on_cpu,) = fit.points_of(_causal_run("cpu"))
    (elsewhere,) = fit.points_of(_causal_run("cuda"))
    assert on_cpu.share == pytest.approx(1.0) and "computes 1.25x" in on_cpu.note
    assert elsewhere.share == pytest.approx(2_098_176 / 2_621_440)
    assert on_cpu.roof_time_s == pytest.approx(elsewhere.roof_time_s * 2_621_440 / 2_098_176)
