"""Model-level MFU against the PaLM paper's published figure."""

import json

import pytest

from reviewkit.cli.app import app
from reviewkit.suite.mfu import model_mfu

# PaLM 540B (Chowdhery et al. 2022, Table 1 and section 4.1): N = 540.35e9, L = 118, H = 48,
# Q = 256, T = 2048, 238.3K tokens/s on 6144 TPU v4 chips of 275 TFLOP/s bf16 peak: 46.2% MFU.
# By hand: 6N = 3.2421e12, 12·L·H·Q·T = 3.5635e10, per token 3.2777e12 FLOPs;
# 238.3e3 * 3.2777e12 / (6144 * 275e12) = 0.4623.
PALM = dict(
    params=540.35e9,
    layers=118,
    heads=48,
    head_dim=256,
    seq=2048,
    tokens_per_s=238.3e3,
    peak_flops_per_s=275e12,
    devices=6144,
)


def test_palm_540b_published_mfu():
    r = model_mfu(**PALM)
    assert r.flops_per_token == pytest.approx(3.2777e12, rel=1e-4)
    assert round(r.mfu, 3) == 0.462


def test_inference_mode_uses_forward_flops():
    # infer: 2N + 4·L·H·Q·T, exactly a third of the training count.
    train = model_mfu(**PALM)
    infer = model_mfu(**PALM, mode="infer")
    assert infer.flops_per_token == pytest.approx(train.flops_per_token / 3)


def test_no_attention_term():
    r = model_mfu(**PALM, attention=False)
    assert r.flops_per_token == pytest.approx(6 * 540.35e9)


def test_cli_json(capsys):
    args = [
        "mfu",
        "--params",
        "540.35e9",
        "--layers",
        "118",
        "--heads",
        "48",
        "--head-dim",
        "256",
        "--seq",
        "2048",
        "--tokens-per-s",
        "238300",
        "--peak-flops-per-s",
        "275e12",
        "--devices",
        "6144",
        "--json",
    ]
    with pytest.raises(SystemExit) as exit_info:
        app(args=args, prog_name="reviewkit")
    assert exit_info.value.code in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert round(out["mfu"], 3) == 0.462


def test_cli_rejects_bad_mode(capsys):
    with pytest.raises(SystemExit) as exit_info:
        app(
            args=[
                "mfu",
                "--params",
                "1",
                "--layers",
                "1",
                "--heads",
                "1",
                "--head-dim",
                "1",
                "--seq",
                "1",
                "--tokens-per-s",
                "1",
                "--peak-flops-per-s",
                "1",
                "--mode",
                "serve",
            ],
            prog_name="reviewkit",
        )
    assert exit_info.value.code == 2
    assert "train, infer" in capsys.readouterr().err
