"""Profile a small decoder LM's forward pass on this machine: the sample's production-like trace.

    python profile_lm.py --batch 4 --seq 256 --steps 5 --out lm-b4s256.json.gz

A 4-layer pre-norm decoder (hidden 384, 6 heads, FFN 1536, vocabulary 8000; GELU, causal SDPA,
untied LM head and a softmax over the vocabulary), eager fp32, no gradients, seeded, two
warm-up steps, then `--steps` steps under torch.profiler with record_shapes=True.
"""

from __future__ import annotations

import argparse
import gzip
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int = 384, heads: int = 6, ffn: int = 1536) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = torch.add(x, self.out(a.transpose(1, 2).reshape(b, t, d)))
        return torch.add(x, self.down(F.gelu(self.up(self.ln2(x)))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    emb, head = nn.Embedding(8000, 384), nn.Linear(384, 8000, bias=False)
    blocks = nn.Sequential(*[Block() for _ in range(4)])
    ids = torch.randint(0, 8000, (args.batch, args.seq))

    def step() -> torch.Tensor:
        with torch.no_grad():
            return F.softmax(head(blocks(emb(ids))), dim=-1)

    for _ in range(2):
        step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True) as prof:  # fmt: skip
        for _ in range(args.steps):
            step()
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as src, gzip.open(args.out, "wb") as dst:
            dst.write(src.read())


if __name__ == "__main__":
    main()
