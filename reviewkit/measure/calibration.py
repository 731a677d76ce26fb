"""Ceilings measured on this device: GEMM peaks per dtype and bandwidth per memory level (torch).

Each ceiling comes from repeated, interleaved trials (measure/trials.py): a screen over square
GEMM sizes in both operand layouts picks the finalists, the finalists are measured in trials,
and the ceiling is the best finalist's best trial (the median trial for a resource shared with
neighbours; measure/trials.py says why), with the lowest and highest trial beside it. Memory is
measured per level of the hierarchy with a stream whose working set fits that level.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from reviewkit.common.format import binary_size
from reviewkit.measure import gpu_l2, hierarchy, main_memory
from reviewkit.measure.device import (
    current_settings,
    device_conditions,
    device_name,
    device_timed,
    first_line,
)
from reviewkit.measure.timing import Clock, SamplingPolicy, collect_samples
from reviewkit.measure.trials import (
    BEST,
    MEDIAN,
    TrialRates,
    best,
    fastest_s,
    run_trials,
)
from reviewkit.suite import ceilings, kernels
from reviewkit.suite.profiles import suite_profile

Maker = Callable[[], Callable[[], float]]  # builds a configuration afresh, returns its timed call

# Square GEMM sizes screened: a CPU's are the suite profile's `calibration_gemm_sizes`.
GPU_GEMM_SIZES = (2048, 4096, 8192)
# Dense convolutions screened beside the GEMMs, (channels in = out, image side): a CPU's are
# the suite profile's `calibration_conv_shapes` (suite/profiles.py says why).
GPU_CONV_SHAPES = ((256, 56), (512, 28))
# Both operand layouts: torch.mm(a, b) ("nn") and torch.mm(a, b.t()) ("nt", what nn.Linear
# runs). Some stacks have a slow path in one layout only (fp16 "nn" on this CPU runs ~10x
# slower than "nt"), and the ceiling is the best the device reaches, not the worst.
GEMM_LAYOUTS = ("nn", "nt")
# Trials per ceiling: the suite profile's `calibration_trials`.
# The screen's configurations carried into the trials: the best three, because on a noisy
# machine the screen's single best is often a size that was merely lucky in its one pass.
FINALISTS = 3
# The screen: one short pass per (size, layout). A layout stops growing once its own rate
# predicts that the next size would not fit the budget: a slow path is confirmed at small
# sizes, not waited out.
SCREEN_POLICY = SamplingPolicy(
    warmup_calls=2, warmup_s=0.02, min_samples=3, min_time_s=0.03, max_samples=50, budget_s=1.0
)
# One trial: a warm-up call (fresh buffers fault their pages in), then a window of at least
# ten calls and 30 ms, so the fastest call is taken over comparable windows for cheap and dear
# configurations alike; fewer when a slow one (fp16 GEMM on a CPU without fp16 units) reaches
# the budget.
TRIAL_POLICY = SamplingPolicy(
    warmup_calls=1,
    warmup_s=0.0,
    min_samples=10,
    min_time_s=0.03,
    max_samples=1000,
    budget_s=0.25,
)
# Bytes one memory-stream call moves: the suite profile's `stream_bytes_per_call`.
# A level whose half holds at least this much is measured with a copy (read + write, like the
# elementwise ops that live there): one call then moves enough that a torch call's fixed cost
# (a few microseconds) is a few percent of it. On the project's Zen 4 a copy within half the
# 32 MiB LLC ran at 168 GB/s where the read stream read 115-145, and a residual add there beat
# the stream's figure. Smaller levels (L1, L2) need the stream, which loops inside one call.
COPY_MIN_WORKING_SET = 8 << 20
# Main memory: a copy of a buffer several times the last-level cache, so no pass finds it
# resident; at least the suite profile's `dram_copy_min_bytes`.
DRAM_OVER_LLC = 4
# What the DRAM method states about its pages: one small buffer asked for 2 MiB pages as the
# copy's are, its share of them read from smaps (a few huge pages; the copy's own buffers are
# rebuilt every trial, and reading smaps for each would time the parser).
DRAM_PAGE_PROBE_BYTES = 8 << 20
GPU_COPY_BYTES = 1 << 30


def default_threads() -> int:
    # torch's default intra-op pool is one thread per physical core; affinity may narrow it.
    try:
        return max(1, len(os.sched_getaffinity(0)) // _threads_per_core())
    except (AttributeError, OSError):
        return max(1, torch.get_num_threads())


def _threads_per_core() -> int:
    try:
        with open("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list") as f:
            text = f.read().strip()
    except OSError:
        return 1
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi) - int(lo) + 1 if hi else 1
    return max(1, count)


def gemm_maker(n: int, dtype: str, device: torch.device, layout: str) -> Maker:
    """Builds one timed n x n x n matmul in the given operand layout (fresh inputs per build)."""

    def make() -> Callable[[], float]:
        gen = _generator(device)
        tdt = kernels.TORCH_DTYPES[dtype]
        a = torch.randn(n, n, generator=gen, device=gen.device).to(device=device, dtype=tdt)
        b = torch.randn(n, n, generator=gen, device=gen.device).to(device=device, dtype=tdt)
        bt = b.t() if layout == "nt" else b

        def mm() -> None:
            with torch.inference_mode():
                torch.mm(a, bt)

        return device_timed(mm, device)

    return make


# The kernels that reach a low-precision GEMM ceiling in eager torch: integer (int8 x int8 ->
# int32) and fp8 (e4m3 x e4m3, per-tensor scales, bf16 out) matmuls. Neither has an eager 3x3
# convolution to screen beside it.
LOW_PRECISION_GEMMS = {"int8": "torch._int_mm", "fp8": "torch._scaled_mm"}
# fp8 matrix units arrived with compute capability 8.9 (Ada, Hopper); a CPU has none (torch
# emulates fp8 GEMMs there, which would be a ceiling of the emulation, not of the device).
FP8_MIN_CAPABILITY = (8, 9)


def low_precision_unavailable(dtype: str, device: torch.device) -> str:
    """Why this device has no `dtype` GEMM ceiling to measure ("" when it has one)."""
    if dtype != "fp8":
        return ""
    if device.type != "cuda":
        return (f"no fp8 matrix units on a {device.type} device (torch emulates fp8 GEMMs "
                "there): no fp8 ceiling")  # fmt: skip
    capability = torch.cuda.get_device_capability(device)
    if capability < FP8_MIN_CAPABILITY:
        need = ".".join(map(str, FP8_MIN_CAPABILITY))
        return (f"fp8 GEMMs need compute capability {need} or newer; this GPU is "
                f"{capability[0]}.{capability[1]}")  # fmt: skip
    return ""


def low_precision_gemm_maker(n: int, dtype: str, device: torch.device, layout: str) -> Maker:
    """Builds one timed n x n x n int8 or fp8 matmul (LOW_PRECISION_GEMMS) in the given operand
    layout, fresh inputs per build."""

    def make() -> Callable[[], float]:
        gen = _generator(device)
        a = torch.randn(n, n, generator=gen, device=gen.device).to(device)
        b = torch.randn(n, n, generator=gen, device=gen.device).to(device)
        if dtype == "int8":
            a8, b8 = (x.mul(32).clamp(-127, 127).to(torch.int8) for x in (a, b))
            bt = b8.t() if layout == "nt" else b8

            def mm() -> None:
                with torch.inference_mode():
                    torch._int_mm(a8, bt)

        else:
            a8, b8 = (x.to(torch.float8_e4m3fn) for x in (a, b))
            bt = b8.t() if layout == "nt" else b8
            one = torch.ones((), device=device)

            def mm() -> None:
                with torch.inference_mode():
                    torch._scaled_mm(a8, bt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return device_timed(mm, device)

    return make


@dataclass(frozen=True)
class Screen:
    """One dtype's screen: the finalists carried into the trials, and how they were found."""

    dtype: str
    finalists: dict[str, tuple[Maker, float]]  # config -> (maker, FLOPs per call)
    sizes: tuple[int, ...]
    stopped: tuple[str, ...] = ()
    failure: str = ""

    def method(self, trials: int, winner: str | None) -> str:
        if not self.sizes:  # never screened: the device has no such units
            return f"not measured: {self.failure.removeprefix('; ')}"
        kernel = LOW_PRECISION_GEMMS.get(self.dtype)
        what = (f"{kernel} over square sizes {list(self.sizes)} in layouts "
                f"{'/'.join(GEMM_LAYOUTS)} (no eager convolution in {self.dtype})" if kernel
                else f"torch.mm over square sizes {list(self.sizes)} in layouts "
                f"{'/'.join(GEMM_LAYOUTS)} and 3x3 convolutions (cuDNN's TF32 off)")  # fmt: skip
        text = (
            f"{what}: a screen, then {trials} interleaved "
            f"trials of the best {len(self.finalists)} "
            f"({', '.join(self.finalists) or '-'}), fresh buffers each trial; each trial's rate "
            f"at its fastest call, the ceiling the best trial; best at {winner or '-'}"
            f"{self.failure}"
        )
        if self.stopped:
            text += f"; layout {'/'.join(self.stopped)} stopped early (too slow for the budget)"
        return text


def screen_compute(
    dtype: str, device: torch.device, profile: str, clock: Clock = time.perf_counter
) -> Screen:
    """One short pass over square sizes in both layouts; the best FINALISTS go to the trials."""
    record = suite_profile(profile)
    sizes = record.calibration_gemm_sizes if device.type == "cpu" else GPU_GEMM_SIZES
    calls_per_screen = SCREEN_POLICY.warmup_calls + SCREEN_POLICY.min_samples
    screened: dict[str, float] = {}
    makers: dict[str, tuple[Maker, float]] = {}
    layout_rate: dict[str, float] = {}
    stopped: list[str] = []
    failure = ""
    low_precision = dtype in LOW_PRECISION_GEMMS
    if low_precision and (why := low_precision_unavailable(dtype, device)):
        return Screen(dtype, {}, (), (), f"; {why}")
    refused: set[str] = set()
    for n in sizes:
        for layout in GEMM_LAYOUTS:
            if layout in stopped or layout in refused:
                continue
            if layout in layout_rate and (
                2 * n**3 / layout_rate[layout] * calls_per_screen > SCREEN_POLICY.budget_s
            ):
                stopped.append(layout)
                continue
            config = f"n={n} {layout}"
            maker = (low_precision_gemm_maker if low_precision else gemm_maker)(
                n, dtype, device, layout
            )
            try:
                result = collect_samples(maker(), SCREEN_POLICY, clock)
            except (RuntimeError, NotImplementedError) as exc:
                if low_precision:  # a layout the kernel does not take: the other may
                    failure += f"; layout {layout} not screened: {first_line(exc)}"
                    refused.add(layout)
                    continue
                failure = f"; screen stopped at n={n} ({layout}): {first_line(exc)}"
                break
            rate = 2 * n**3 / fastest_s(result.samples_s or result.warmup_samples_s)
            screened[config] = rate
            makers[config] = (maker, 2.0 * n**3)
            layout_rate[layout] = max(rate, layout_rate.get(layout, 0.0))
        if failure:
            break
    convs = record.calibration_conv_shapes if device.type == "cpu" else GPU_CONV_SHAPES
    if low_precision:
        convs = ()
    for channels, side in convs:
        config = f"conv3x3 c={channels} {side}x{side}"
        flops = 2.0 * channels * channels * 9 * side * side
        maker = conv_maker(channels, side, dtype, device)
        try:
            result = collect_samples(maker(), SCREEN_POLICY, clock)
        except (RuntimeError, NotImplementedError) as exc:
            failure += f"; {config} not screened: {first_line(exc)}"
            break
        screened[config] = flops / fastest_s(result.samples_s or result.warmup_samples_s)
        makers[config] = (maker, flops)
    finalists = sorted(screened, key=screened.__getitem__, reverse=True)[:FINALISTS]
    return Screen(dtype, {c: makers[c] for c in finalists}, tuple(sizes), tuple(stopped), failure)


def conv_maker(channels: int, side: int, dtype: str, device: torch.device) -> Maker:
    """Builds one timed 3x3 convolution, `channels` in and out, on a side x side image."""

    def make() -> Callable[[], float]:
        gen = _generator(device)
        tdt = kernels.TORCH_DTYPES[dtype]
        x = torch.randn(1, channels, side, side, generator=gen, device=gen.device)
        w = torch.randn(channels, channels, 3, 3, generator=gen, device=gen.device)
        x, w = x.to(device=device, dtype=tdt), w.to(device=device, dtype=tdt)

        def conv() -> None:
            with torch.inference_mode():
                torch.nn.functional.conv2d(x, w, padding=1)

        if device.type != "cuda":
            return device_timed(conv, device)

        def ieee_conv() -> None:
            # cuDNN runs fp32 convolutions as TF32 unless told not to: an fp32 ceiling of 86
            # TFLOP/s on an H200 whose fp32 datasheet peak is 67 was a TF32 convolution
            before = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False
            try:
                conv()
            finally:
                torch.backends.cudnn.allow_tf32 = before

        return device_timed(ieee_conv, device)

    return make


def _generator(device: torch.device) -> torch.Generator:
    """The seeded generator a ceiling's inputs are drawn with: on the device itself where torch
    has one there. Drawn on the host, two 8192 x 8192 operands took about a second per build on
    the H200's host, and calibration rebuilds its finalists every trial: five quick
    calibrations of cuda outlasted 150 s."""
    kind = device.type if device.type in ("cuda", "xpu", "mps") else "cpu"
    return torch.Generator(device=kind).manual_seed(kernels.INPUT_SEED)


def stream_maker(
    working_set_bytes: int, bytes_per_call: int, device: torch.device
) -> tuple[Maker, int]:
    """A read stream over a level-resident buffer: one call sums a (reps, n) view whose every
    row is the same n floats (stride 0), so it reads the buffer reps times from the level that
    holds it, and the call's fixed cost is amortised over reps passes. Returns the timed call
    and the bytes it reads."""
    n = max(1024, working_set_bytes // 4)
    reps = max(1, bytes_per_call // (n * 4))

    def make() -> Callable[[], float]:
        view = torch.ones(n, dtype=torch.float32, device=device).unsqueeze(0).expand(reps, n)

        def read() -> None:
            with torch.inference_mode():
                view.sum()

        return device_timed(read, device)

    return make, reps * n * 4


def copy_maker(
    nbytes: int, device: torch.device, huge_pages: bool = False, one_thread_of: int = 0
) -> tuple[Maker, int]:
    """A copy of a buffer larger than every cache; bytes read plus bytes written. On a CPU,
    `huge_pages` puts both buffers on 2 MiB pages, written before the first timed call
    (measure/main_memory.py says why), and `one_thread_of` = T runs the copy on one thread and
    counts its bytes T times: each core's own rate, added over T cores."""
    n = nbytes // 4
    cpu = device.type == "cpu"

    def make() -> Callable[[], float]:
        if cpu and huge_pages:
            src = main_memory.page_buffer(n * 4, 1.0, huge=True)
            dst = main_memory.page_buffer(n * 4, 0.0, huge=True)
        else:
            src = torch.ones(n, dtype=torch.float32, device=device)
            dst = torch.empty_like(src)

        def copy() -> None:
            with torch.inference_mode():
                dst.copy_(src)

        if not (cpu and one_thread_of):
            return device_timed(copy, device)

        def one_thread() -> float:
            before = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                start = time.perf_counter()
                copy()
                return time.perf_counter() - start
            finally:
                torch.set_num_threads(before)

        return one_thread

    counted = one_thread_of if cpu and one_thread_of else 1
    return make, 2 * n * 4 * counted


def memory_levels(device: torch.device, caches_bytes: dict[str, int]) -> list:
    if device.type == "cuda":
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or None
        return hierarchy.gpu_levels(l2)
    if device.type == "cpu":
        return hierarchy.cpu_levels(caches_bytes)
    return [hierarchy.MemoryLevel(hierarchy.DRAM, None)]


def memory_plan(
    device: torch.device, profile: str, levels: Sequence[hierarchy.MemoryLevel]
) -> dict[str, tuple[Maker, float, str]]:
    """Each level's stream: level name -> (maker, bytes per call, method)."""
    record = suite_profile(profile)
    largest_cache = max((lv.capacity_bytes or 0 for lv in levels), default=0)
    plan: dict[str, tuple[Maker, float, str]] = {}
    for level in levels:
        ws = level.calibration_bytes
        if device.type == "cuda" and level.name == hierarchy.GPU_L2 and level.capacity_bytes:
            plan.update(gpu_l2.plan(level, device, stream_maker))  # gpu_l2.py: why
            continue
        if ws is not None and ws >= COPY_MIN_WORKING_SET:
            maker, nbytes = copy_maker(ws // 2, device)
            method = (
                f"tensor.copy_ of a {binary_size(ws // 2)} buffer into another "
                f"({binary_size(ws)}, half the {binary_size(level.capacity_bytes)} level), "
                "bytes read + written"
            )
        elif ws is not None:
            maker, nbytes = stream_maker(ws, record.stream_bytes_per_call, device)
            method = (
                f"read stream: sum over a {binary_size(ws)} buffer (half the "
                f"{binary_size(level.capacity_bytes)} level) re-read within each call, "
                f"{binary_size(nbytes)} per call"
            )
        elif device.type != "cpu":
            maker, nbytes = copy_maker(GPU_COPY_BYTES, device)
            method = f"tensor.copy_ of a {binary_size(GPU_COPY_BYTES)} buffer, bytes read + written"
        else:
            # main memory on a CPU: on 2 MiB pages, at every thread and at one (main_memory.py)
            size = max(record.dram_copy_min_bytes, DRAM_OVER_LLC * largest_cache)
            maker, nbytes = copy_maker(size, device, huge_pages=True)
            threads = torch.get_num_threads()
            method = (
                f"tensor.copy_ of a {binary_size(size)} buffer into another, both on "
                f"{main_memory.pages_label(_huge_page_probe())} (madvise; transparent huge "
                f"pages: {main_memory.thp_mode()}) and written before timing, bytes read + "
                f"written, at {threads} threads"
            )
            if threads > 1:
                one, counted = copy_maker(size, device, huge_pages=True, one_thread_of=threads)
                method += f", and on one thread, its rate counted {threads} times"
                name = main_memory.one_thread_name(level.name, threads)
                plan[name] = (one, float(counted), method)
        plan[level.name] = (maker, float(nbytes), method)
    return plan


def _huge_page_probe() -> float | None:
    """Share of a fresh 2 MiB-page buffer that the kernel put on huge pages (smaps)."""
    probe = main_memory.page_buffer(DRAM_PAGE_PROBE_BYTES, 0.0, huge=True)
    return main_memory.huge_page_share(probe.data_ptr(), DRAM_PAGE_PROBE_BYTES)


def memory_records(
    levels: Sequence[hierarchy.MemoryLevel],
    trials: dict[str, TrialRates],
    methods: dict[str, str],
    count: int,
) -> list[dict]:
    """Level records, innermost first. A level measured slower than the level outside it is
    raised to that level's figure (a cache is never slower than what backs it; the stream
    simply did not show the difference) and says so."""
    out: list[dict] = []
    outer: float | None = None
    for level in reversed(levels):
        t = trials[level.name]
        cores, threads = main_memory.one_thread_trials(trials, level.name)
        main = main_memory.main_memory(t, cores, threads) if cores else None
        method = (
            f"{methods[level.name]}; {count} interleaved trials, fresh buffers each, each at its "
            f"fastest call, "
            + (main.method() if main else "the ceiling the trials' "
               + ("median (a level shared with neighbours)" if level.shared else "best"))
        )  # fmt: skip
        peak = main.peak if main else t.peak
        l2 = gpu_l2.judge(level, trials, outer)
        if l2 is not None:
            method += l2.note
            t = l2.basis or t
            peak = l2.basis.peak if l2.basis else outer or t.peak
        if outer is not None and peak < outer:
            method += (
                f"; measured {peak / 1e9:.3g} GB/s, under the next level out, so raised to its "
                f"{outer / 1e9:.3g} GB/s"
            )
            peak = outer
        outer = peak
        # low, high and trials are those of the figure the ceiling is: on the cores-added
        # basis the one-thread trials (x threads), the all-threads ones kept beside them
        basis = main.cores_added if main and main.basis == "cores added" else t
        beside = {"all_threads_trials": list(t.rates)} if basis is not t else {}
        if l2 is not None:
            beside.update(l2.fields)
        out.append({"level": level.name, "capacity_bytes": level.capacity_bytes,
                    "working_set_bytes": l2.working_set_bytes if l2 and l2.basis
                    else level.calibration_bytes,
                    **basis.to_json(), "peak": peak, "measured": t.peak,
                    **(main.fields() if main else {}), **beside,
                    "method": method})  # fmt: skip
    return out[::-1]


def calibrate(
    device: torch.device,
    dtypes: Sequence[str],
    profile: str,
    caches_bytes: dict[str, int] | None = None,
    on_step: Callable[[str], None] = lambda _: None,
    clock: Clock = time.perf_counter,
) -> dict:
    """Compute ceilings per dtype and memory bandwidth per level, as a profile records them:
    {"compute": {dtype: Ceiling + trials}, "memory": [level records, innermost first],
    "bandwidth": the main-memory Ceiling, "threads", "datasheet_entry"}.

    Every dtype's finalists and every memory level share one loop of trials, so the trials of
    each ceiling are spread over the whole calibration rather than bunched in one second."""
    entry = ceilings.lookup(device_name(device)) if device.type != "cpu" else None
    count = suite_profile(profile).calibration_trials
    # At the caller's settings (the run's threads and float32 matmul precision): a ceiling
    # belongs to the settings that move it, and the profile is keyed by them.
    settings = current_settings(device)
    threads = torch.get_num_threads()
    screens = []
    for dtype in dtypes:
        on_step(f"screening {dtype} GEMM sizes")
        screens.append(screen_compute(dtype, device, profile, clock))
    levels = memory_levels(device, caches_bytes or {})
    mem = memory_plan(device, profile, levels)
    makers = {f"{s.dtype} {c}": m for s in screens for c, (m, _) in s.finalists.items()}
    work = {f"{s.dtype} {c}": w for s in screens for c, (_, w) in s.finalists.items()}
    makers.update({f"memory {name}": m for name, (m, _, _) in mem.items()})
    work.update({f"memory {name}": w for name, (_, w, _) in mem.items()})
    on_step(f"{count} trials of {len(makers)} ceilings")
    quantiles = dict.fromkeys(makers, BEST)
    quantiles.update({f"memory {lv.name}": MEDIAN for lv in levels if lv.shared})
    trials = run_trials(makers, work, count, TRIAL_POLICY, clock, quantiles=quantiles)
    compute = {}
    for screen in screens:
        own = {
            c: TrialRates(c, trials[f"{screen.dtype} {c}"].rates, BEST) for c in screen.finalists
        }
        winner = best(own)
        chosen = ceilings.choose(
            winner.peak if winner else None,
            screen.method(count, winner.config if winner else None),
            entry.peak_flops_per_s.get(screen.dtype) if entry else None,
            entry.reference if entry else "",
            f"square GEMM screen produced no rate{screen.failure}",
        ).to_json()
        compute[screen.dtype] = {**chosen, **_trial_fields(winner)}
    memory = memory_records(
        levels, {name: trials[f"memory {name}"] for name in mem},
        {name: method for name, (_, _, method) in mem.items()}, count,
    )  # fmt: skip
    main = memory[-1]
    bandwidth = ceilings.choose(
        main["peak"], main["method"], entry.peak_bytes_per_s if entry else None,
        entry.reference if entry else "",
    ).to_json()  # fmt: skip
    bandwidth.update(level=main["level"], **_trial_fields_of(main))
    return {
        "compute": compute,
        "bandwidth": bandwidth,
        "memory": memory,
        "threads": threads,
        "settings": settings,
        "conditions": device_conditions(device),
        "datasheet_entry": entry.name if entry else None,
    }


def _trial_fields(trial: TrialRates | None) -> dict:
    return _trial_fields_of(trial.to_json()) if trial else {}


def _trial_fields_of(record: dict) -> dict:
    keys = ("config", "low", "high", "confidence", "trial_spread", "trials")
    return {k: record[k] for k in keys if k in record}
