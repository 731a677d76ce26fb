"""Capturing one call of a workload into a CUDA graph, to replay it without its host cost."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch

from reviewkit.measure.device import first_line

# Calls run on a side stream before the capture. The first calls pay one-off costs (allocator
# growth, cuBLAS handle and workspace creation, lazy kernel loading, autotuning) that are
# illegal during a capture or would be baked into the graph; PyTorch's own CUDA-graph recipe
# warms up with three.
WARMUP_CALLS = 3


class GraphCaptureError(RuntimeError):
    """The call could not be captured into a CUDA graph; the message is the cause's first line."""


class GraphReplay:
    """A captured call: calling it replays the graph on the current stream.

    It holds the graph (and with it the graph's private memory pool), the captured callable
    (and with it the buffers the graph reads and writes, which the graph knows only by address)
    and the captured call's output, so none is freed while a replay can still run."""

    __slots__ = ("fn", "graph", "output")

    def __init__(self, graph: torch.cuda.CUDAGraph, fn: Callable[[], object], output: object):
        self.graph = graph
        self.fn = fn
        self.output = output

    def __call__(self) -> None:
        self.graph.replay()


def capture(
    fn: Callable[[], object],
    device: torch.device | None = None,
    *,
    warmup_calls: int = WARMUP_CALLS,
) -> Callable[[], None]:
    """Warm fn up on a side stream, capture one call of it into a CUDA graph on `device` (None:
    the current device) and return a callable that replays it: the same kernels on the same
    buffers, launched with one host call. Raises GraphCaptureError when any of it fails (a call
    that synchronises, reads a value to the host or allocates pinned memory cannot be captured;
    nor can anything on a build or machine without CUDA)."""
    failure: BaseException | None = None
    graph = None
    try:
        # torch.cuda.graph synchronises, empties the cache and makes its side stream on the
        # current device: for cuda:1 that device must be current, not cuda:0.
        with torch.cuda.device(device):
            graph = torch.cuda.CUDAGraph()
            side = torch.cuda.Stream()
            # The side stream starts after the work already queued (the inputs' fills) and the
            # default stream resumes after the warm-up: no call reads a half-written buffer.
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(warmup_calls):
                    fn()
            torch.cuda.current_stream().wait_stream(side)
            # thread_local: only this thread's unsafe calls (the call's own) break the capture,
            # not a sensor thread that happens to touch CUDA meanwhile.
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                try:
                    output = fn()
                except Exception as exc:
                    failure = exc  # the call's own error, not the "capture invalidated" after it
                    raise
    except Exception as exc:
        cause = failure or exc
        if graph is not None:
            # An interrupted capture may still hold its private pool: give it back.
            with contextlib.suppress(Exception):
                graph.reset()
        raise GraphCaptureError(first_line(cause)) from cause
    return GraphReplay(graph, fn, output)
