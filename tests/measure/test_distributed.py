"""`run --distributed` on two gloo ranks of this CPU: spawned by --nproc and by torchrun, the
gathering of every rank's samples, bandwidths against an independent timing, and failures
(a killed rank, a rendezvous nobody joins, a backend this build lacks) that never hang."""

import json
import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from reviewkit.analysis.overhead import IN_COLLECTIVE_LATENCY, NOT_MEASURED  # noqa: E402
from reviewkit.analysis.roofline import analyse_run  # noqa: E402
from reviewkit.bundle.run import SCHEMA_VERSION, load_run  # noqa: E402
from reviewkit.measure import distributed as dmeasure  # noqa: E402
from reviewkit.measure import rank_kernels  # noqa: E402
from reviewkit.measure.local_ranks import free_port  # noqa: E402
from reviewkit.suite import collectives as coll  # noqa: E402

pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
    reason="this torch build has no gloo backend",
)

# Small but real: one collective of each kind the harness times differently (a ring of
# send/recv, an all-reduce), the tensor-parallel layer at tp 2 and its tp 1 reference, and
# both straggler probes.
ONLY = "collective.tp-activation-all-reduce.*,collective.pipeline-send-recv.*,model.*,gemm.*,norm.*"
# Every subprocess is bounded: a hang fails the test instead of stalling CI.
HANG_S = 240


def _reviewkit(*args, env=None, timeout=HANG_S):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "reviewkit", *args],
        capture_output=True, text=True, timeout=timeout, env=full_env,
    )  # fmt: skip


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist") / "run"
    started = time.monotonic()
    proc = _reviewkit(
        "run", "--distributed", "--nproc", "2", "--profile", "smoke", "--dtype", "fp32",
        "--only", ONLY, "--timeout", "60", "--out", str(out), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return analyse_run(load_run(out)), json.loads(proc.stdout), time.monotonic() - started


def test_rank_zero_gathers_every_ranks_samples(two_ranks):
    run, _, _ = two_ranks
    assert run.complete and run.schema_version == SCHEMA_VERSION
    d = run.distributed
    assert d["world_size"] == 2 and d["backend"] == "gloo" and d["launcher"] == "reviewkit --nproc"
    assert [r["rank"] for r in d["ranks"]] == [0, 1]
    assert d["ranks"][0]["pid"] != d["ranks"][1]["pid"]  # two processes, really
    assert sum(d["ranks_per_host"].values()) == 2
    assert d["topology"]["available"] is False and "GPU" in d["topology"]["reason"]
    ids = [w.id for w in run.workloads]
    assert any(i.startswith("collective.pipeline-send-recv") for i in ids)
    assert any(".tp2-" in i for i in ids) and any(".tp1-" in i for i in ids)
    for w in run.workloads:
        assert w.status == "ok", (w.id, w.reason)
        per_rank = w.rank_samples_s
        assert len(per_rank) == 2 and len(per_rank[0]) == len(per_rank[1]) == len(w.samples_s)
        # the step's time is the slowest rank's, call by call
        assert w.samples_s == tuple(max(a, b) for a, b in zip(*per_rank, strict=True))
        assert sum(w.round_sizes) == len(w.samples_s)
        # overhead and inefficiency are None where overhead was not measured (the compute
        # workloads), the rest then unattributed: the fractions given sum to 1 either way
        f = w.decomposition.fractions()
        assert sum(v for v in f.values() if v is not None) == pytest.approx(1)
        assert w.skew.slowest_rank in (0, 1) and w.skew.max_over_median >= 1


def test_collective_bandwidths_follow_nccl_tests(two_ranks):
    run, _, _ = two_ranks
    link = run.ceilings["interconnect"]
    assert link["peak"] == max(link["trials_bytes_per_s"]) > 0
    assert "broadcast" in link["measured_method"]
    for w in run.workloads:
        if w.layer_type != "collective":
            continue
        c, size, p50 = w.collective, w.params["message_bytes"], w.stats.p50_s
        assert size == w.params["elements"] * 4  # fp32
        # all_reduce on 2 ranks: busbw = algbw x 2(2-1)/2 = algbw; send/recv: x 1
        assert c.algbw_p50_bytes_per_s == pytest.approx(size / p50)
        assert c.busbw_p50_bytes_per_s == pytest.approx(size / p50)
        assert c.link_fraction == pytest.approx(size / p50 / link["peak"])
        # bytes on the wire per rank: the message x the bus factor (1 at 2 ranks)
        assert w.wire_bytes == size
        # t_comm = alpha + wire bytes / beta; a collective's t_o is 0 (its host cost is in
        # alpha), so t_k = p50 and the communication term gets what the memory term leaves
        t_comm = link["latency_s"][w.params["op"]] + size / link["peak"]
        assert w.decomposition.communication_time_s == pytest.approx(t_comm)
        assert w.decomposition.communication_fraction == pytest.approx(
            min(t_comm, p50 - min(w.memory_time_s, p50)) / p50
        )


def test_collective_latency_is_measured_per_op(two_ranks):
    """alpha of t_comm = alpha + wire bytes / beta: every op of the suite at its smallest
    message, the slowest rank's median; the collectives carry no overhead apart from it."""
    run, _, _ = two_ranks
    link = run.ceilings["interconnect"]
    latency = link["latency_s"]
    assert set(latency) == set(coll.OPS)  # the suite's ops (smoke measures all six)
    assert f"{coll.LATENCY_CALLS} calls" in link["latency_method"]
    assert "median" in link["latency_method"] and "max over ranks" in link["latency_method"]
    assert "before the workloads and after them" in link["latency_method"]  # two sittings
    largest = {}
    for w in run.workloads:
        if w.layer_type != "collective":
            assert w.overhead["method"] == NOT_MEASURED and not w.overhead["available"]
            assert "single-process `reviewkit run`" in w.overhead["reason"]
            continue
        op = w.params["op"]
        size = w.params["message_bytes"]
        if op not in largest or size > largest[op].params["message_bytes"]:
            largest[op] = w
        assert w.overhead["available"] is True
        assert w.overhead["method"] == IN_COLLECTIVE_LATENCY
        assert w.overhead_method == IN_COLLECTIVE_LATENCY and w.decomposition.overhead_fraction == 0
    assert set(largest) == {coll.ALL_REDUCE, coll.SEND_RECV}  # the ops ONLY measures
    for op, w in largest.items():
        # a one-element call is faster than the op's largest message (256 KiB at smoke)
        assert 0 < latency[op] < w.stats.p50_s, (op, latency[op], w.stats.p50_s)


def test_overhead_record_by_workload_kind():
    specs = {s.layer_type: s for s in coll.distributed_specs("smoke", ("fp32",), 2)}
    collective = dmeasure.overhead_record(specs["collective"], 2)
    assert collective["available"] and collective["method"] == IN_COLLECTIVE_LATENCY
    for kind in ("model", "gemm"):
        rec = dmeasure.overhead_record(specs[kind], 2)
        assert rec == {"available": False, "method": NOT_MEASURED, "reason": (
            "a distributed run's compute workloads: overhead is measured by a single-process "
            "`reviewkit run`")}  # fmt: skip
    # one rank: no link, no alpha to hold the collective's host cost
    alone = dmeasure.overhead_record(specs["collective"], 1)
    assert not alone["available"] and alone["method"] == NOT_MEASURED


def test_tensor_parallel_scaling_and_stragglers_are_reported(two_ranks):
    run, summary, _ = two_ranks
    (scaling,) = run.scaling
    tp2 = run.workload_by_id[scaling.workload]
    tp1 = run.workload_by_id[scaling.reference]
    assert scaling.speedup == pytest.approx(tp1.stats.p50_s / tp2.stats.p50_s)
    assert scaling.efficiency == pytest.approx(scaling.speedup / 2)
    # two all-reduces of the b1s32 x 64 fp32 activation on the wire, bus factor 1 at 2 ranks
    assert tp2.wire_bytes == 2 * 1 * 32 * 64 * 4
    assert len(run.stragglers.rank_ratio) == 2
    assert summary["complete"] is True


@pytest.fixture(scope="module")
def smoke_profile(tmp_path_factory):
    """A device profile to pin, so a quick-profile run here does not calibrate for 20 s."""
    path = tmp_path_factory.mktemp("profile") / "profile.json"
    proc = _reviewkit("calibrate", "--profile", "smoke", "--dtype", "fp32", "--out", str(path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return path


def test_independent_timing_of_an_all_reduce_agrees(smoke_profile, tmp_path):
    """A bare torch.distributed loop (no harness) times the same 8 MiB all-reduce as the
    quick profile: the harness's median lies within a factor of two of it (two processes on a
    shared 2-core VM; benchmarks/distributed_overhead.py holds it to 0.95-1.05). The bare loop
    runs before the harness and after it, and the harness must agree with one of the two: in
    one sitting of a full test run the machine's state moved 2.1x (bare 10.8 ms after a
    harness median of 5.1 ms; 5 ms both when run alone)."""
    script = tmp_path / "bare.py"
    script.write_text(BARE_LOOP)
    elements = (8 << 20) // 4  # 512 tokens x 4096 fp32

    def bare_s() -> float:
        proc = subprocess.run(
            [sys.executable, str(script), str(elements), str(free_port())],
            capture_output=True, text=True, timeout=HANG_S,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        return float(proc.stdout.split()[-1])

    before_s = bare_s()
    out = tmp_path / "run"
    proc = _reviewkit(
        "run", "--distributed", "--nproc", "2", "--profile", "quick", "--dtype", "fp32",
        "--only", "collective.tp-activation-all-reduce.*", "--device-profile",
        str(smoke_profile), "--timeout", "60", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (w,) = analyse_run(load_run(out)).workloads
    assert w.params["message_bytes"] == 8 << 20  # 512 tokens x 4096 x 4 bytes
    assert w.params["elements"] == elements
    ratios = [w.stats.p50_s / s for s in (before_s, bare_s())]
    assert any(0.5 <= r <= 2.0 for r in ratios), ratios


BARE_LOOP = """
import os, sys, time, statistics, torch, torch.distributed as dist, torch.multiprocessing as mp
def rank(r, n, port, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=r, world_size=2)
    x = torch.zeros(n)
    times = []
    for i in range(60):
        dist.barrier(); t = time.perf_counter(); dist.all_reduce(x)
        times.append(time.perf_counter() - t)
    out = [None, None]; dist.all_gather_object(out, times[10:])
    if r == 0: q.put(statistics.median(max(a, b) for a, b in zip(*out)))
    dist.destroy_process_group()
if __name__ == "__main__":
    ctx = mp.get_context("spawn"); q = ctx.SimpleQueue()
    mp.spawn(rank, args=(int(sys.argv[1]), sys.argv[2], q), nprocs=2)
    print(q.get())
"""


def test_torchrun_launches_the_same_code_path(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-port", str(free_port()), "-m", "reviewkit", "run", "--distributed",
         "--profile", "smoke", "--dtype", "fp32", "--only", "collective.tp-activation-*",
         "--timeout", "60", "--out", str(out)],
        capture_output=True, text=True, timeout=HANG_S,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = load_run(out)
    assert run.complete and run.distributed["launcher"] == "torchrun"
    (w,) = run.workloads
    assert len(w.rank_samples_s) == 2 and w.status == "ok"


def test_a_killed_rank_leaves_an_incomplete_bundle_not_a_hang(tmp_path):
    out = tmp_path / "run"
    started = time.monotonic()
    proc = _reviewkit(
        "run", "--distributed", "--nproc", "2", "--profile", "smoke", "--dtype", "fp32",
        "--only", ONLY, "--rounds", "1", "--timeout", "30", "--out", str(out),
        env={dmeasure.KILL_RANK_ENV: "1:3"},  # rank 1 dies (SIGKILL) before its third step
    )  # fmt: skip
    assert time.monotonic() - started < 120
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "measured part is kept" in proc.stderr
    run = load_run(out)
    assert run.complete is False
    assert run.distributed["incomplete"]
    statuses = [w.status for w in run.workloads]
    assert statuses.count("ok") == 2  # the two steps before rank 1 died
    for w in run.workloads:
        if w.status != "ok":
            assert w.reason.startswith("not measured: ")
            assert w.samples_s == ()


def test_a_rank_that_hangs_times_out_into_an_incomplete_bundle(tmp_path):
    out = tmp_path / "run"
    started = time.monotonic()
    proc = _reviewkit(
        "run", "--distributed", "--nproc", "2", "--profile", "smoke", "--dtype", "fp32",
        "--only", ONLY, "--rounds", "1", "--timeout", "5", "--out", str(out),
        env={dmeasure.KILL_RANK_ENV: "1:2:hang"},  # rank 1 stops answering at its 2nd step
    )  # fmt: skip
    # rank 0's collective gives up after 5 s; the hung rank is stopped 5 s after rank 0 exits
    assert time.monotonic() - started < 90
    assert proc.returncode == 1, proc.stderr[-3000:]
    run = load_run(out)
    assert run.complete is False and "5 s timeout" in run.distributed["incomplete"]
    assert [w.status for w in run.workloads].count("ok") == 1


def test_a_rendezvous_nobody_joins_times_out_with_a_clear_error(tmp_path):
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}  # fmt: skip
    started = time.monotonic()
    proc = _reviewkit(
        "run", "--distributed", "--profile", "smoke", "--dtype", "fp32", "--timeout", "3",
        "--out", str(tmp_path / "run"), env=env, timeout=60,
    )  # fmt: skip
    assert time.monotonic() - started < 50
    assert proc.returncode == 1
    assert "rendezvous" in proc.stderr and "within 3 s" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unavailable_backend_and_missing_launcher_are_usage_errors(tmp_path):
    proc = _reviewkit("run", "--distributed", "--nproc", "2", "--backend", "nccl",
                      "--profile", "smoke", "--out", str(tmp_path / "r"))  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "--backend nccl" in proc.stderr and "Traceback" not in proc.stderr
    env = {k: "" for k in dmeasure.TORCHRUN_ENV}
    proc = _reviewkit("run", "--distributed", "--profile", "smoke",
                      "--out", str(tmp_path / "r"), env=env)  # fmt: skip
    assert proc.returncode == 2
    assert "torchrun --nproc-per-node N" in proc.stderr and "--nproc N" in proc.stderr
    proc = _reviewkit("run", "--nproc", "2", "--profile", "smoke", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "add it" in proc.stderr


def test_ranks_that_disagree_are_named():
    same = {"suite_hash": "a", "distributed_hash": "d", "reviewkit": "1", "torch": "2",
            "request": ["smoke", ["fp32"], None]}  # fmt: skip
    assert dmeasure._disagreement([same, dict(same)]) == ""
    why = dmeasure._disagreement([same, {**same, "suite_hash": "b"}])
    assert "suite_hash" in why and "rank 0 has 'a', rank 1 'b'" in why
    assert "same reviewkit" in why


def test_step_time_is_the_slowest_rank_per_call():
    assert rank_kernels.step_samples([[1.0, 5.0, 2.0], [3.0, 1.0, 2.5]]) == [3.0, 5.0, 2.5]


def test_ranks_sharing_a_cpu_divide_its_ceilings():
    ceilings = {
        "threads": 2,
        "compute": {"fp32": {"peak": 100.0, "measured": 100.0}},
        "memory": [
            {"level": "l1", "peak": 80.0},
            {"level": "dram", "peak": 30.0, "shared": True},
        ],
        "bandwidth": {"peak": 30.0},
    }
    out = dmeasure.share_ceilings(ceilings, rank_threads=1, ranks_per_host=2)
    # one of two threads: half the compute and half a private cache's bandwidth; DRAM is one
    # pool shared by the two ranks: half each
    assert out["compute"]["fp32"]["peak"] == 50.0 and out["compute"]["fp32"]["measured"] == 50.0
    assert [lv["peak"] for lv in out["memory"]] == [40.0, 15.0]
    assert out["bandwidth"]["peak"] == 15.0
    assert "2 rank(s) share this host's CPU" in out["rank_share"]["reason"]
    assert ceilings["compute"]["fp32"]["peak"] == 100.0  # the profile itself is untouched


def test_tensor_parallel_layer_flops_match_torchs_counter():
    """The per-rank FLOPs of the sharded layer, counted by torch's FlopCounterMode on one rank
    of a one-process gloo group (its all-reduce is then a no-op)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from reviewkit.suite import workloads as suite

    store = torch.distributed.HashStore()
    torch.distributed.init_process_group("gloo", rank=0, world_size=1, store=store)
    try:
        info = rank_kernels.RankInfo(0, 1, 0, 1)
        dims = suite.smoke_dims(suite.GPT2_SMALL)
        for tp in (1, 2, 4):
            spec = coll.tp_decoder_layer(dims, 1, 32, tp, "fp32")
            layer = rank_kernels.build(spec, torch.device("cpu"), info)
            # no formula for CPU's fused attention: the math backend decomposes it into bmm's
            # over the full square (with the causal mask applied afterwards), as counted
            with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
                layer()
            # d 64, ffn 256, b 1, s 32: (2 x 32 x (3x64x64 + 64x64 + 2x64x256) + 4x32x32x64) / tp
            assert (
                spec.matmul_flops
                == (2 * 32 * (4 * 64 * 64 + 2 * 64 * 256) + 4 * 32 * 32 * 64) // tp
            )
            assert counter.get_total_flops() == spec.matmul_flops
    finally:
        torch.distributed.destroy_process_group()


def test_straggler_probes_are_the_suites_own_workloads():
    from reviewkit.suite import workloads as suite

    specs = coll.distributed_specs("quick", ("fp32",), 2)
    probes = [s for s in specs if s.params.get("role") == coll.PROBE]
    singles = {s.id for s in suite.workloads("quick", ("fp32",))}
    assert [p.layer_type for p in probes] == ["gemm", "norm"]
    assert all(p.id in singles for p in probes)  # comparable with a one-process run
