"""Model-level MFU after the PaLM paper (Chowdhery et al. 2022, appendix B)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

MODES = ("train", "infer")


@dataclass(frozen=True)
class ModelMFU:
    mode: str
    flops_per_token: float
    dense_flops_per_token: float  # the 6N (train) or 2N (infer) term
    attention_flops_per_token: float  # the 12·L·H·Q·T (train) or 4·L·H·Q·T (infer) term
    tokens_per_s: float
    achieved_flops_per_s: float
    peak_flops_per_s: float  # all devices together
    peak_tokens_per_s: float  # P / FLOPs per token
    mfu: float

    def to_json(self) -> dict:
        return asdict(self)


def model_mfu(
    params: float,
    layers: int,
    heads: int,
    head_dim: int,
    seq: int,
    tokens_per_s: float,
    peak_flops_per_s: float,
    devices: int = 1,
    mode: str = "train",
    attention: bool = True,
) -> ModelMFU:
    """MFU = observed tokens/s / (P / FLOPs per token).

    train: 6N + 12·L·H·Q·T FLOPs per token (forward and backward); infer: 2N + 4·L·H·Q·T
    (forward only). P is the per-device peak times the device count.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    for name, value in (
        ("params", params),
        ("tokens_per_s", tokens_per_s),
        ("peak_flops_per_s", peak_flops_per_s),
        ("devices", devices),
    ):
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    dense_factor, attn_factor = (6, 12) if mode == "train" else (2, 4)
    dense = dense_factor * params
    attn = attn_factor * layers * heads * head_dim * seq if attention else 0.0
    per_token = dense + attn
    peak = peak_flops_per_s * devices
    return ModelMFU(
        mode=mode,
        flops_per_token=per_token,
        dense_flops_per_token=dense,
        attention_flops_per_token=attn,
        tokens_per_s=tokens_per_s,
        achieved_flops_per_s=tokens_per_s * per_token,
        peak_flops_per_s=peak,
        peak_tokens_per_s=peak / per_token,
        mfu=tokens_per_s * per_token / peak,
    )
