"""The work a blocked causal attention kernel computes: whole key blocks, not the masked half."""

from __future__ import annotations

import math
from collections.abc import Mapping

from reviewkit.suite.definitions import attention_pairs

# torch's CPU flash attention (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp), which
# F.scaled_dot_product_attention runs on a CPU for a causal call without a mask: query blocks
# of 256 rows from 768 queries up, of 64 from 192, else of 32 (first match, as (queries at
# least, rows)); key blocks of 512. Under is_causal a query block starting at row m computes
# the key blocks that start before min(m + its rows, keys), each one whole.
CPU_QUERY_SPLITS = ((768, 256), (192, 64), (0, 32))
CPU_KEY_SPLIT = 512
# The device kinds whose causal kernel's blocks are known. A GPU's flash kernels skip blocks of
# 64-128 keys, so their waste is small and depends on the backend torch picks: not modelled,
# the counted pairs stand (a ratio of 1).
BLOCKED_KINDS = ("cpu",)
# The suite's kernels that call that causal path (sdpa_gqa's enable_gqa may take another).
CAUSAL_KERNELS = ("sdpa",)


def causal_seqs(kernel: str, params: object) -> tuple[int, int] | None:
    """(queries, keys) of a causal attention call whose kernel computes in blocks, else None."""
    if kernel not in CAUSAL_KERNELS or not isinstance(params, Mapping):
        return None
    seq = params.get("seq")
    if not params.get("causal") or not isinstance(seq, int) or seq < 1:
        return None
    return seq, seq


def cpu_flash_pairs(queries: int, keys: int) -> int:
    """Query-key pairs torch's CPU flash attention computes for a causal call."""
    rows = next(r for at_least, r in CPU_QUERY_SPLITS if queries >= at_least)
    pairs = 0
    for m in range(0, queries, rows):
        block = min(rows, queries - m)
        reached = min(m + block, keys)
        pairs += block * min(math.ceil(reached / CPU_KEY_SPLIT) * CPU_KEY_SPLIT, keys)
    return pairs


def work_ratio(seqs: tuple[int, int] | None, device_kind: str) -> float:
    """The FLOPs a causal call's kernel computes over those the suite counts (the masked half,
    queries x (queries + 1) / 2): 1 where the call is not causal or its blocks are not known."""
    if seqs is None or device_kind not in BLOCKED_KINDS:
        return 1.0
    queries, keys = seqs
    return cpu_flash_pairs(queries, keys) / attention_pairs(queries, causal=True)
