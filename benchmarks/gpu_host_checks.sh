#!/usr/bin/env bash
# The checks that need a GPU host, in one script so that one short lease runs them all.
#
#   [STEPS=name,name|serving] benchmarks/gpu_host_checks.sh OUT_DIR [DEADLINE_S]
#
# STEPS runs only the named steps (probe, gpu-serving-decode, gpu-serving-prefill,
# gpu-serving-other, gpu-serving-flex, gpu-serving-targets, gpu-calibrate, nccl-1rank, gpu-graphs, gpu-lowp,
# gpu-run, gpu-l2-flush, gpu-aa-mfu, gpu-probes, dist-overhead, cpu-calibrate); all by default.
# STEPS=serving runs issue 33's sample alone, in at most 300 s by default: the probe, then the
# serving profile in four runs (decode, prefill, the rest, FlexAttention), each its own bundle
# written as it finishes (a step cut off by its cap is interrupted with SIGINT, and `run`
# writes what it measured as an incomplete bundle), then the targets read from them.
# Two tracks run side by side on disjoint cores (taskset), each step under a timeout that
# keeps the whole script inside DEADLINE_S (default 540 s, 300 s for STEPS=serving):
#   GPU track, the first half of the cores: first the serving profile (issue 33: prefill,
#     decode against a KV cache, MoE experts, fp8 GEMMs and big convolutions at bf16, each
#     workload with t_device, its energy loop where NVML reads the board, and the calibration's
#     L2 streams; bundles OUT_DIR/files/gpu-serving-PART-DEVICE), and the targets table of
#     benchmarks/serving_targets.py over them; then five separate calibrations of cuda (issue 15: reproducibility of the
#     ceilings, datasheet beside measured), a quick `reviewkit run --device cuda` (a recorded
#     GPU bundle: the second device of issue 17's review, and with issue 28 each workload's
#     exposed overhead by eager against CUDA-graph replay, and issue 33's t_device: each call
#     timed as a CUDA graph of many launches, beside its per-call t), a smoke run with the L2
#     flushed before every t_device call (cold caches, knob l2_flush), the CUDA tests of the graph capture
#     and the kernel-busy fallback (tests/measure/test_gpu_overhead.py, skipped without a GPU),
#     the gemm MFU A/A on cuda, and a one-rank NCCL run (the NCCL code path of issue 16).
#   CPU track, the second half: the harness against a bare torch.distributed loop with a core per
#     rank (issue 16's 0.95-1.05 target, undecidable on a 2-core VM), then five calibrations of
#     the host CPU (issue 15's 5% target on a machine with cores to spare).
# The GPU track's host work is one launching thread; the two tracks share DRAM, which the CPU
# calibrations' DRAM figure may feel (said where the figures are quoted).
# Writes OUT_DIR/steps.txt (each step's exit status and time) and, as each step finishes,
# its log and what it recorded under OUT_DIR/files (nothing waits for the end of the script).
set -u
out=${1:?usage: $0 OUT_DIR [DEADLINE_S]}
if [ "${STEPS:-}" = serving ]; then
  STEPS=probe,gpu-serving-decode,gpu-serving-prefill,gpu-serving-other,gpu-serving-flex
  STEPS=$STEPS,gpu-serving-targets
  deadline_s=${2:-300}
else
  deadline_s=${2:-540}
fi
work=$out/files
mkdir -p "$work"
: >"$out/steps.txt"
t0=$(date +%s)
py=${PYTHON:-python3}
# the device's short name for the bundles' folders ("NVIDIA H100 80GB HBM3" -> h100)
dev=$($py -c "import re, torch; m = re.search(r'[A-Z]+[0-9]+[A-Z]?', \
  torch.cuda.get_device_name(0).replace('NVIDIA', '')); print(m.group(0).lower() if m else 'gpu')" \
  2>/dev/null || echo gpu)
# the two tracks' cores: the first and the second half of the host's
cores=$(nproc)
gpu_cores=0-$((cores / 2 - 1))
cpu_cores=$((cores / 2))-$((cores - 1))
export PYTHONUNBUFFERED=1

step() {  # step NAME CORES CAP_S COMMAND...: log to $work/NAME.log, status to steps.txt
  local name=$1 cores=$2 cap=$3 left started rc
  shift 3
  case ",${STEPS:-$name}," in *",$name,"*) ;; *) return ;; esac
  left=$((deadline_s - ($(date +%s) - t0)))
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -le 10 ]; then
    echo "$name: skipped (no time left)" >>"$out/steps.txt"
    return
  fi
  started=$(date +%s)
  # SIGINT first: `reviewkit run` stops and writes what it measured, an incomplete bundle that
  # says so (tried on the CPU: a quick run cut at 12 s kept its 32 measured workloads); the
  # kill 15 s later only if it does not stop
  timeout -s INT -k 15 "$cap" taskset -c "$cores" "$@" >"$work/$name.log" 2>&1
  rc=$?
  echo "$name: rc $rc in $(($(date +%s) - started)) s (cap $cap s)" >>"$out/steps.txt"
}

serving_run() {  # serving_run PART CAP GLOBS: one part of the serving profile, its own bundle
  step "gpu-serving-$1" "$gpu_cores" "$2" "$py" -m reviewkit run --device cuda \
    --profile serving --dtype bf16 --only "$3" --out "$work/gpu-serving-$1-$dev"
}

gpu_track() {
  step probe "$gpu_cores" 40 sh -c "nvidia-smi; nvidia-smi -q -d CLOCK | head -40; lscpu; free -g; \
    $py -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0))'"
  # decode first: the regime the issue is about, and the grid its targets read; FlexAttention
  # last, as each of its cells compiles (seconds each) before it is measured
  serving_run decode 150 '*decode-sdpa*,gemm.*s1.bf16'
  serving_run prefill 100 '*prefill*,gemm.*s2048.bf16,gemm.*s4096.bf16,gemm.*s8192.bf16,gemm.*s16384.bf16'
  serving_run other 70 'block.*,*.fp8,conv.*'
  serving_run flex 80 '*decode-flex*'
  step gpu-serving-targets "$gpu_cores" 20 sh -c "for d in $work/gpu-serving-*-$dev; do \
    [ -f \"\$d/run.json\" ] && $py benchmarks/serving_targets.py \"\$d\"; done"
  step gpu-calibrate "$gpu_cores" 150 "$py" benchmarks/calibration_reproducibility.py \
    --parts calibrate --device cuda --n 5
  step nccl-1rank "$gpu_cores" 60 "$py" -m reviewkit run --distributed --nproc 1 --device cuda \
    --profile smoke --out "$work/gpu-smoke-nccl-1rank"
  step gpu-graphs "$gpu_cores" 60 "$py" -m pytest -q -p no:randomly tests/measure/test_gpu_overhead.py \
    tests/measure/test_device_time.py -k "not cpu_run"
  # issue 30: the int8 and fp8 GEMM ceilings, and the power limit and clocks (`conditions`)
  step gpu-lowp "$gpu_cores" 90 "$py" -m reviewkit calibrate --device cuda --profile smoke \
    --dtype fp32,int8,fp8 --float32-matmul-precision high --out "$work/gpu-lowp-profile.json"
  step gpu-run "$gpu_cores" 200 "$py" -m reviewkit run --device cuda --profile quick \
    --out "$work/gpu-quick-h200"
  # issue 33: t_device with cold caches (a buffer twice the L2 written between calls)
  step gpu-l2-flush "$gpu_cores" 60 "$py" -m reviewkit run --device cuda --profile smoke \
    --knob l2_flush=on --out "$work/gpu-smoke-l2-flush"
  step gpu-aa-mfu "$gpu_cores" 120 "$py" benchmarks/calibration_reproducibility.py \
    --parts aa-mfu --device cuda
  step gpu-probes "$gpu_cores" 60 "$py" benchmarks/gpu_probes.py --device cuda
}

cpu_track() {
  step dist-overhead "$cpu_cores" 200 "$py" benchmarks/distributed_overhead.py --rounds 40
  step cpu-calibrate "$cpu_cores" 150 "$py" benchmarks/calibration_reproducibility.py \
    --parts calibrate --device cpu --n 5
}

gpu_track &
cpu_track &
wait
cat "$out/steps.txt"
for log in gpu-calibrate dist-overhead cpu-calibrate gpu-aa-mfu gpu-probes; do
  echo "== $log"
  grep '^|' "$work/$log.log" 2>/dev/null || tail -5 "$work/$log.log" 2>/dev/null
done
