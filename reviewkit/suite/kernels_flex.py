"""FlexAttention decode steps for kernels.build: contiguous and paged KV caches (imports torch).

`flex_attention` runs fast only compiled: called eagerly it is a reference implementation that
materialises the whole score matrix (torch warns so), which would measure the reference, not
the kernel. So each workload compiles its own copy
(`torch.compile(..., dynamic=False)`: static shapes) and makes its first call here, in the
build: the compile is never in a sample, and a recompile while it samples is a frame the
runner's check counts (fullgraph=True is not set: dynamo does not count its frames in 2.13).
This holds whatever the run's compile_mode (recorded in each definition's params, and
for compile_mode=eager in the record's knobs_not_applicable); another mode compiles the call
around this one again, in that mode.

What torch 2.13 runs (torch/_inductor/kernel/flex/): on CUDA, Triton's flex-decoding kernel,
chosen when the query is shorter than 128 tokens, batch and heads are static, the block mask
has one head, and query heads per KV head are a power of two (32 / 8 = 4 here), else the main
flex kernel; on an x86 CPU with AVX2, a C++ flash-attention template (inference only, no
decoding specialisation). torch.utils.flop_counter has a formula for the flex HOP, but
FlopCounterMode cannot dispatch it here (TypeError: no implementation under the mode), and the
meta device is refused: its FLOPs are checked by hand against the SDPA decode's.

The paged cache uses torch.nn.attention.experimental._paged_attention.PagedAttention (private
and experimental, evaluated in 2.13: it runs compiled on the CPU and matches SDPA over the
gathered pages): a pool of 128-token pages, each sequence's pages reserved from a shuffled free
list (INPUT_SEED), and a block mask of every block full, converted to physical pages, so flex
visits only the sequence's own pages and evaluates no mask element.
"""

from __future__ import annotations

import types
from collections.abc import Callable

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention, noop_mask

from reviewkit.suite.definitions import WorkloadSpec


def compiled_flex() -> Callable:
    """flex_attention compiled over its own code object: dynamo keeps its compiled entries per
    code object (8 by default, then it runs eager), so workloads sharing one would run past that
    limit or each other's entries."""
    fn = types.FunctionType(flex_attention.__code__.replace(), flex_attention.__globals__,
                            flex_attention.__name__, flex_attention.__defaults__,
                            flex_attention.__closure__)  # fmt: skip
    fn.__kwdefaults__ = flex_attention.__kwdefaults__
    return torch.compile(fn, dynamic=False)


def page_table(spec: WorkloadSpec, device: torch.device, gen: torch.Generator):
    """(PagedAttention, page table rows of the batch): each sequence's context reserved in
    pages taken from a free list shuffled by `gen`."""
    from torch.nn.attention.experimental._paged_attention import PagedAttention

    p = spec.params
    batch, context, page = p["batch"], p["kv_len"], p["page_size"]
    n_pages = batch * context // page
    paged = PagedAttention(n_pages, page, batch, device=str(device))
    paged.empty_pages = torch.randperm(n_pages, generator=gen).tolist()
    for b in range(batch):
        paged.reserve(torch.tensor(b, device=device), torch.tensor(context, device=device))
    return paged, paged.page_table[:, : context // page]


def build_decode(spec: WorkloadSpec, device: torch.device, tensors: list, gen: torch.Generator):
    """The zero-argument call of a flex decode workload over its input tensors, compiled and
    called once."""
    q, k, v = tensors
    call = compiled_flex()
    if spec.kernel == "flex_decode_gqa":
        def step():
            return call(q, k, v, enable_gqa=True)
    else:  # paged: a block mask over the logical pages, converted to the physical ones
        p = spec.params
        paged, _ = page_table(spec, device, gen)
        logical = create_block_mask(noop_mask, p["batch"], 1, 1, p["kv_len"], device=device,
                                    BLOCK_SIZE=(p["page_size"], p["page_size"]))  # fmt: skip
        mask = paged.convert_logical_block_mask(logical)

        def step():
            return call(q, k, v, block_mask=mask, enable_gqa=True)
    with torch.inference_mode():
        step()  # the compile: never in a sample
    return step
