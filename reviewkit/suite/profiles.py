"""Suite profiles: how the suite is measured (smoke, quick, full; serving), one record each.

Torch-free. A suite profile is everything that changes between a smoke, a quick and a full
measurement: the workloads' shapes, the sampling windows, the rounds, the calibration's sizes
and trials, the collectives' messages, and the soak's and the sweep's defaults. It is looked up
once by name (`suite_profile`). `serving` is not a fourth level of thoroughness but another
workload set (suite/serving.py: prefill, decode against a KV cache, MoE experts, fp8 GEMMs at
the shapes an accelerator serves), with the sampling its long calls need. Not to be confused
with a device profile (bundle/profile.py): the calibrated ceilings of one device, which records
the suite profile it was calibrated at.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reviewkit.common.errors import UsageError

MIB = 1 << 20


@dataclass(frozen=True)
class SamplingPolicy:
    # The first calls pay one-off costs (allocator growth, oneDNN primitive creation, kernel
    # autotuning); two warm-up calls plus a short warm-up time drain them on every backend seen.
    warmup_calls: int = 2
    warmup_s: float = 0.05
    # Enough samples for a p99 that is not just the max, and enough time to see the tail.
    min_samples: int = 20
    min_time_s: float = 0.2
    max_samples: int = 2000
    # Hard wall budget for one workload, warm-up included: a pathological slow path
    # (fp16 matmul on a CPU runs ~1000x slower than bf16) must not stall the run.
    budget_s: float = 3.0
    # The warm-up's own limit when it differs from the budget (a round's sampling budget is a
    # share of the workload's, but its warm-up may take the whole of it): None is budget_s.
    # A warm-up that ends within it is always followed by at least one measured call.
    warmup_budget_s: float | None = None


@dataclass(frozen=True)
class Validity:
    """A level is valid only when it ran at least this long and completed this many queries."""

    min_duration_s: float
    min_queries: int
    max_level_s: float  # hard wall budget of one level: an overloaded level stops here


@dataclass(frozen=True)
class ProfileShapes:
    seqs: tuple[int, ...]  # gemm and attention sweep: sequence lengths
    batches: tuple[int, ...]  # gemm and attention sweep: batch = concurrent sequences
    tokens: int  # token count for vector ops and blocks
    model_layers: int
    # (batch, seq) cells of the end-to-end model, the primary one first: one request of the
    # profile's prompt length, which SLAs, sweeps and soaks use by default. The others show
    # whether a win on it holds for a quarter of the prompt, alone and 4 at once (the same
    # tokens as the primary cell, so the profile's time budget still buys enough samples).
    model_shapes: tuple[tuple[int, int], ...]
    conv_stages: tuple[str, ...]
    smoke: bool = False
    # A second token count for the memory-bound vector ops (norms, GELU, residual add, row sum),
    # 0 for none. quick's own 512 tokens keep their working sets (3-23 MB) in a CPU's last-level
    # cache, so a quick run never measured one streaming from main memory, while a model's at a
    # real prompt (67-180 MB at 4096 Llama-2-7B tokens) does: on the 2-core EPYC the bf16
    # RMSNorm streams from main memory at about half its cache-resident rate, which no 512-token
    # call shows; with them the held-out `full` shapes' worst tenth went from 31-35% to 20-33%
    # (docs/benchmarks.md, "Projection error").
    main_memory_tokens: int = 0


@dataclass(frozen=True)
class SuiteProfile:
    """One suite profile's every setting; the reasons for the values are beside the instances."""

    name: str
    shapes: ProfileShapes  # the suite's workloads (suite/workloads.py)
    sampling: SamplingPolicy  # one workload's window in `run`, `soak` and `distributed`
    floor_sampling: SamplingPolicy  # one dispatch floor's window (measure/overhead.py)
    rounds: int  # `run`'s rounds unless --rounds
    ab_rounds: int  # `ab`'s paired rounds unless --rounds
    ab_min_time_s: float  # `ab`'s target window per workload and side (budget as `sampling`)
    ab_min_samples: int
    # calibration (measure/calibration.py): CPU GEMM sizes screened, dense convolutions
    # screened as (channels in = out, image side), trials per ceiling, bytes per memory-stream
    # call, the smallest main-memory copy
    calibration_gemm_sizes: tuple[int, ...]
    calibration_conv_shapes: tuple[tuple[int, int], ...]
    calibration_trials: int
    stream_bytes_per_call: int
    dram_copy_min_bytes: int
    collective_tokens: int  # batch x seq of the collectives' activations (suite/collectives.py)
    link_message_bytes: int  # the in-run link ceiling's broadcast
    soak_window_s: float  # `soak`'s window unless --window-s
    sweep_validity: Validity  # a `sweep` level's rules unless given
    # Which workload set (suite/workloads.py `_profile_workloads`): "core" or "serving".
    workload_set: str = "core"
    # The suite profile whose device profile (calibrated ceilings) a run divides by: its own
    # name (None) or a core profile's, so a serving run reuses a cached quick or full calibration.
    calibrate_as: str | None = None
    # A run projected (measure/projection.py) above this many seconds asks for `--yes` first;
    # None: never asks.
    confirm_above_s: float | None = None


# Default sampling of quick and full floors. A floor call takes microseconds: 40 samples and
# 5 ms each for the floor and its double give their medians to well under a microsecond, and
# keep the phase under 15% of a quick run (9.7-13% measured, docs/benchmarks.md). The warm-up
# may take a whole second: a floor's first call creates its oneDNN primitives.
FLOOR_POLICY = SamplingPolicy(warmup_calls=3, warmup_s=0.002, min_samples=40, min_time_s=0.005,
                              max_samples=2000, budget_s=1.25, warmup_budget_s=1.0)  # fmt: skip

# Why the values are what they are, field by field:
# - sampling: smoke proves the pipeline in seconds; quick fits ~3 minutes on a 2-core CPU; full
#   buys tighter tails with longer windows.
# - floor_sampling: FLOOR_POLICY above; the smoke profile, floor-sized itself, takes fewer
#   samples.
# - rounds, from A/A measurements on a 2-core VM (docs/benchmarks.md, "Rounds"): smoke only
#   proves the pipeline, so two rounds show the machinery at no cost; quick takes five, the
#   fewest whose round-to-round bootstrap stays usable (with three, one slow round decides the
#   interval) within the same time budget as one window; full takes ten.
# - ab_min_time_s, ab_min_samples: an A/B verdict must resolve a few percent: on a shared 2-core
#   VM one call of a gemm or a model varies by 10-20%, so each side needs ~100 samples for a
#   +/-2% interval of its median (docs/benchmarks.md, "A/A false alarms"). `ab` keeps the
#   profile's budget per workload and side but samples towards a longer target than `run`,
#   which only characterises one mapping.
# - ab_rounds: more, shorter rounds than `run`: a paired round costs no rebuild of a kept
#   workload and its two sides share one warm-up window, and with 10 rounds the t interval has
#   9 degrees of freedom instead of 4 (t = 2.26 against 2.78): the interval narrows by a fifth
#   for the same time (measured: noise floor 4.3% against 5.6% with 5 rounds,
#   docs/benchmarks.md).
# - calibration_gemm_sizes: square GEMM sizes from where per-call cost stops mattering to where
#   one call still fits the screen's budget several times on a 2-core CPU.
# - calibration_conv_shapes: a ceiling is the best rate any dense kernel reaches, and oneDNN's
#   direct 3x3 convolution runs a little faster than MKL's GEMM on the project's Zen 4 (202
#   against 201 GFLOP/s fp32: without it, ResNet convs "beat the roofline"); one cache-sized
#   shape, and larger ones.
# - calibration_trials: with n trials, [lowest, highest] covers the median trial with
#   probability 1 - 2 x 0.5^n (99.6% at 9), and the best of 9 comes from the best quarter of the
#   machine's states with probability 1 - 0.75^9 (92%). On the project's 2-core VM a
#   neighbour's memory traffic held DRAM bandwidth 50% high for the first 5 of 9 trials of one
#   calibration: 5 trials would have taken that state as the median, 9 outvote it
#   (docs/benchmarks.md, "Calibration reproducibility"). smoke keeps 3 for the tests.
# - stream_bytes_per_call: large enough that the fixed cost of a torch call (a few
#   microseconds) is under 1% of it even at L1 speed, small enough for trials to stay short.
# - dram_copy_min_bytes: main memory is read with a copy of a buffer several times the
#   last-level cache, so no pass finds it resident; at least this much.
# - collective_tokens: a Llama-2-7B layer's activation at the profile's batch x seq; smoke keeps
#   the messages small.
# - link_message_bytes: a broadcast (bus factor 1: busbw = algbw) large enough that the
#   per-call latency is a few percent of the transfer.
# - soak_window_s: long enough to heat a package and let a boost budget run out: a minute shows
#   a turbo window ending on most CPUs and GPUs; ten minutes reach thermal steady state. Smoke
#   proves the path.
# - sweep_validity: p99 needs >= 100 queries to be more than the maximum; full follows LoadGen's
#   spirit of long windows within a sweep that still ends in minutes.
SMOKE = SuiteProfile(
    name="smoke",
    shapes=ProfileShapes(
        (16, 32), (1, 2), 64, 2, ((1, 32), (1, 8), (4, 8)), ("stage3",), smoke=True
    ),
    sampling=SamplingPolicy(
        warmup_calls=1, warmup_s=0.0, min_samples=5, min_time_s=0.01, max_samples=200, budget_s=0.5
    ),
    floor_sampling=SamplingPolicy(
        warmup_calls=2,
        warmup_s=0.0,
        min_samples=10,
        min_time_s=0.0,
        max_samples=200,
        budget_s=0.5,
        warmup_budget_s=0.4,
    ),
    rounds=2,
    ab_rounds=2,
    ab_min_time_s=0.02,
    ab_min_samples=5,
    calibration_gemm_sizes=(128, 256, 512),
    calibration_conv_shapes=((64, 28),),
    calibration_trials=3,
    stream_bytes_per_call=8 * MIB,
    dram_copy_min_bytes=32 * MIB,
    collective_tokens=16,
    link_message_bytes=4 * MIB,
    soak_window_s=2.0,
    sweep_validity=Validity(min_duration_s=0.05, min_queries=20, max_level_s=2.0),
)
QUICK = SuiteProfile(
    name="quick",
    shapes=ProfileShapes(
        (128, 512), (1, 4), 512, 2, ((1, 256), (1, 64), (4, 64)), ("stage1", "stage3"),
        main_memory_tokens=4096,
    ),
    sampling=SamplingPolicy(
        warmup_calls=2,
        warmup_s=0.02,
        min_samples=20,
        min_time_s=0.2,
        max_samples=1000,
        budget_s=3.0,
    ),
    floor_sampling=FLOOR_POLICY,
    rounds=5,
    ab_rounds=10,
    ab_min_time_s=1.5,
    ab_min_samples=60,
    calibration_gemm_sizes=(256, 384, 512, 768, 1024, 1536, 2048),
    calibration_conv_shapes=((128, 28), (256, 14)),
    calibration_trials=9,
    stream_bytes_per_call=32 * MIB,
    dram_copy_min_bytes=256 * MIB,
    collective_tokens=512,
    link_message_bytes=64 * MIB,
    soak_window_s=60.0,
    sweep_validity=Validity(min_duration_s=1.0, min_queries=100, max_level_s=60.0),
)
FULL = SuiteProfile(
    name="full",
    shapes=ProfileShapes(
        (128, 512, 2048),
        (1, 4, 16),
        2048,
        4,
        ((1, 1024), (1, 256), (4, 256)),
        ("stage1", "stage2", "stage3", "stage4"),
    ),
    sampling=SamplingPolicy(
        warmup_calls=3,
        warmup_s=0.1,
        min_samples=50,
        min_time_s=1.0,
        max_samples=5000,
        budget_s=15.0,
    ),
    floor_sampling=FLOOR_POLICY,
    rounds=10,
    ab_rounds=10,
    ab_min_time_s=5.0,
    ab_min_samples=200,
    calibration_gemm_sizes=(256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096),
    calibration_conv_shapes=((128, 56), (256, 28), (512, 14)),
    calibration_trials=15,
    stream_bytes_per_call=64 * MIB,
    dram_copy_min_bytes=512 * MIB,
    collective_tokens=2048,
    link_message_bytes=256 * MIB,
    soak_window_s=600.0,
    sweep_validity=Validity(min_duration_s=10.0, min_queries=1000, max_level_s=600.0),
)

# Why the serving profile's values are what they are:
# - sampling: an accelerator call of the serving shapes takes 0.1-50 ms (a decode step to a
#   16k-token prefill GEMM); 10 samples and 0.25 s give a median and a p90 at both ends (2,500
#   samples of a 0.1 ms call are capped at 500), and the 6 s budget bounds a CPU, where the
#   same calls take seconds: the slow-path guard skips a cell whose warm-up and one call
#   cannot fit it.
# - rounds: three, the fewest that show round-to-round drift, each a third of the budget.
# - calibrate_as: the ceilings are the device's, not the workloads': a quick or full device
#   profile serves (quick's sizes when it must calibrate).
# - calibration_*, stream/dram bytes, collective_tokens, link bytes, soak, sweep: quick's
#   (the serving profile has no distributed part, soak or sweep of its own).
# - confirm_above_s: half an hour is more than a serving run takes on any accelerator (a few
#   minutes at 6 s per cell), so a longer projection means a CPU grinding through it: ask.
SERVING = replace(
    QUICK,  # its calibration, collectives, soak and sweep settings are quick's
    name="serving",
    sampling=replace(
        QUICK.sampling, min_samples=10, min_time_s=0.25, max_samples=500, budget_s=6.0
    ),
    rounds=3,
    ab_min_samples=30,
    workload_set="serving",
    calibrate_as=QUICK.name,
    confirm_above_s=30 * 60.0,
)

# Least thorough first. A device profile calibrated at a more thorough suite profile serves a
# lighter run (one calibrated at `full` serves a `quick` run), never the other way round.
SUITE_PROFILES = (SMOKE, QUICK, FULL)
SUITE_PROFILE_NAMES = tuple(p.name for p in SUITE_PROFILES)
# Profiles of another workload set, outside the thoroughness order (and the distributed part).
WORKLOAD_SET_PROFILES = (SERVING,)
ALL_PROFILE_NAMES = (*SUITE_PROFILE_NAMES, *(p.name for p in WORKLOAD_SET_PROFILES))
DEFAULT_SUITE_PROFILE = QUICK.name
_BY_NAME = {p.name: p for p in (*SUITE_PROFILES, *WORKLOAD_SET_PROFILES)}


def suite_profile(name: str) -> SuiteProfile:
    """The suite profile called `name`; UsageError naming the suite profiles if none is."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UsageError(
            f"--profile {name!r} is unknown; choose one of {', '.join(ALL_PROFILE_NAMES)}"
        ) from None
