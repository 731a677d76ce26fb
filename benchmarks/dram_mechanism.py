"""Benchmark 12: what decides a CPU's DRAM copy figure (issue 30, item 2: 33 or 52 GB/s).

Every part interleaves its variants (A, B, A, B ...) so a noisy minute of a shared machine hits
all of them, and prints min / median / max over rounds. Rates count bytes read + written.

1. `kernels`: copy_, clone, add, glibc memcpy (no write-allocate: non-temporal stores), sum
   (read only) and fill_ (write only) of 256 MiB at 1 and 2 threads, one process.
2. `pages`: the 1- and 2-thread copy on buffers whose 4 KiB pages are scattered or contiguous
   in physical memory, and on 2 MiB pages (madvise), one process; each buffer's share of pages
   followed by the next physical frame (/proc/self/pagemap, needs root) and of huge pages.
3. `age`: the copy on buffers built afresh before every round (as calibration builds them)
   against buffers built once, and the first touch inside or outside the timing.
4. `placement`: where the host put the two vCPUs, seen from inside: the round trip of a cache
   line between cpu0 and cpu1 beside a 2-thread and a 1-thread copy, every 0.2 s (a C probe,
   built with the system's cc; skipped without one).
5. `modes`: N processes, each 9 interleaved trials of the 1-thread and the 2-thread copy on
   fresh 2 MiB-page buffers (as calibration runs them); the spread between processes of the
   2-thread trials and of the one-thread rate added over 2 threads.

    .venv/bin/python benchmarks/dram_mechanism.py [--parts kernels,pages,age,placement,modes]
        [--rounds 6] [--n 6] [--seconds 60]
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

from reviewkit.measure import main_memory

MIB = 1 << 20
BYTES = 256 * MIB  # the quick profile's DRAM buffer: 8x the 32 MiB LLC
N = BYTES // 4


def _best_rate(fn: Callable[[], object], nbytes: float, calls: int = 5) -> float:
    fn()
    best = 0.0
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        best = max(best, nbytes / (time.perf_counter() - start) / 1e9)
    return best


def _at_threads(threads: int, fn: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return fn()
        finally:
            torch.set_num_threads(before)

    return run


def _table(results: dict[str, list[float]], unit: str = "GB/s") -> None:
    print(f"| variant | min | median | max ({unit}) | rounds |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, v in results.items():
        cells = " ".join(f"{x:.1f}" for x in v)
        print(f"| {name} | {min(v):.1f} | {statistics.median(v):.1f} | {max(v):.1f} | {cells} |")


def _interleave(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            out[name].append(variants[name]())
    return out


def kernels(rounds: int) -> None:
    libc = ctypes.CDLL(None)
    libc.memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    src, dst = torch.ones(N), torch.zeros(N)
    other = torch.zeros(N)

    def memcpy(threads: int) -> Callable[[], None]:
        part = BYTES // threads

        def run() -> None:
            jobs = [threading.Thread(target=libc.memcpy,  # ctypes releases the GIL
                                     args=(dst.data_ptr() + i * part, src.data_ptr() + i * part,
                                           part)) for i in range(threads)]  # fmt: skip
            for j in jobs:
                j.start()
            for j in jobs:
                j.join()

        return run

    variants = {}
    for t in (1, 2):
        ops = {
            "copy_": (lambda: dst.copy_(src), 2 * BYTES),
            "clone (a new output: page faults)": (lambda: src.clone(), 2 * BYTES),
            "add (2 read, 1 written)": (lambda: torch.add(src, other, out=dst), 3 * BYTES),
            "sum (read)": (lambda: src.sum(), BYTES),
            "fill_ (written)": (lambda: dst.fill_(2.0), BYTES),
        }
        for name, (fn, nbytes) in ops.items():
            variants[f"{t}T {name}"] = lambda f=_at_threads(t, fn), b=nbytes: _best_rate(f, b)
        variants[f"{t}T glibc memcpy"] = lambda f=memcpy(t): _best_rate(f, 2 * BYTES)
    print(f"\n`kernels`: 256 MiB, best of 5 calls per round, {rounds} rounds interleaved")
    _table(_interleave(variants, rounds))


def _pagemap_next_frame(ptr: int, nbytes: int) -> float | None:
    """Share of the buffer's 4 KiB pages whose successor is the next physical frame."""
    try:
        with open("/proc/self/pagemap", "rb") as f:
            f.seek(ptr // 4096 * 8)
            count = nbytes // 4096
            frames = [e & ((1 << 55) - 1) for e in struct.unpack(f"<{count}Q", f.read(count * 8))]
    except OSError:
        return None
    if not any(frames):  # not root: the kernel hides frame numbers
        return None
    return sum(b == a + 1 for a, b in itertools.pairwise(frames)) / (len(frames) - 1)


def pages(rounds: int) -> None:
    """Many 4 KiB buffers allocated one after another: the first take the pages the previous
    processes freed (scattered frames), the later ones fresh free blocks (contiguous)."""
    n = 64 * MIB // 4  # 64 MiB copied into 64 MiB: 4x the LLC, so 14 buffers fit any machine
    bufs = {f"4 KiB #{i}": torch.ones(2 * n) for i in range(8)}
    bufs.update({f"2 MiB #{i}": main_memory.page_buffer(8 * n, 1.0, huge=True) for i in range(3)})
    variants = {}
    for name, b in bufs.items():
        for t in (1, 2):
            copy = _at_threads(t, lambda b=b: b[n:].copy_(b[:n]))
            variants[f"{name} {t}T"] = lambda f=copy: _best_rate(f, 8 * n)
    results = _interleave(variants, rounds)
    print(f"\n`pages`: 64 MiB copied within a 128 MiB buffer, {rounds} rounds interleaved")
    print("| buffer | next-frame share | on 2 MiB pages | 1T median | 2T median (GB/s) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, b in bufs.items():
        frames = _pagemap_next_frame(b.data_ptr(), 8 * n)
        huge = main_memory.huge_page_share(b.data_ptr(), 8 * n)
        one, two = (statistics.median(results[f"{name} {t}T"]) for t in (1, 2))
        shown = "-" if frames is None else f"{frames:.0%}"
        print(f"| {name} | {shown} | {huge or 0:.0%} | {one:.1f} | {two:.1f} |")


def age(rounds: int) -> None:
    kept = (torch.ones(N), torch.zeros(N))

    def fresh(first_touch: bool) -> Callable[[], float]:
        def run() -> float:
            src = torch.ones(N)
            dst = torch.zeros(N) if first_touch else torch.empty(N)
            start = time.perf_counter()
            dst.copy_(src)  # the first call: faults dst's pages in unless they were written
            first = 2 * BYTES / (time.perf_counter() - start) / 1e9
            return first if not first_touch else _best_rate(lambda: dst.copy_(src), 2 * BYTES)

        return run

    variants = {
        "built once, 2T": lambda: _best_rate(lambda: kept[1].copy_(kept[0]), 2 * BYTES),
        "fresh, dst written before, 2T (best of 5)": fresh(True),
        "fresh, dst's first touch timed, 2T (that call)": fresh(False),
    }
    print(f"\n`age`: 256 MiB at 2 threads, {rounds} rounds interleaved")
    _table(_interleave(variants, rounds))


PROBE_C = Path(__file__).with_name("dram_placement.c")
# A round trip under this is two cores under one L3 (a CCD); Zen 4 measures 50-70 ns there and
# well over 150 ns between CCDs.
SAME_CCD_NS = 150


def placement(seconds: float) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        print("\n`placement`: skipped (no C compiler)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "probe"
        subprocess.run([cc, "-O2", "-march=native", "-pthread", "-o", str(exe), str(PROBE_C)],
                       check=True)  # fmt: skip
        out = subprocess.run([str(exe), str(seconds)], check=True, capture_output=True,
                             text=True).stdout  # fmt: skip
    rows = [tuple(map(float, line.split())) for line in out.splitlines()]
    print(f"\n`placement`: {len(rows)} rounds over {seconds:.0f} s (cpu0 <-> cpu1 round trip)")
    print("| cores | rounds | round trip (ns) | 2T copy min / median / max | 1T copy (GB/s) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, keep in (("one CCD (round trip < 150 ns)", lambda r: r[1] < SAME_CCD_NS),
                        ("two CCDs", lambda r: r[1] >= SAME_CCD_NS)):  # fmt: skip
        rs = [r for r in rows if keep(r)]
        if not rs:
            print(f"| {label} | 0 | | | |")
            continue
        rtt, two, one = ([r[i] for r in rs] for i in (1, 2, 3))
        print(
            f"| {label} | {len(rs)} | {statistics.median(rtt):.0f} | {min(two):.1f} / "
            f"{statistics.median(two):.1f} / {max(two):.1f} | {statistics.median(one):.1f} |"
        )
    print("sequence (t = one CCD, A = apart): "
          + "".join("t" if r[1] < SAME_CCD_NS else "A" for r in rows))  # fmt: skip


MODES_CHILD = r"""
import json, torch
from reviewkit.measure import calibration as c
from reviewkit.measure.trials import run_trials, MEDIAN
torch.set_num_threads(2)
makers = {"2T": c.copy_maker(256 << 20, torch.device("cpu"), huge_pages=True),
          "1T x 2": c.copy_maker(256 << 20, torch.device("cpu"), huge_pages=True, one_thread_of=2)}
r = run_trials({k: m for k, (m, _) in makers.items()}, {k: b for k, (_, b) in makers.items()},
               9, c.TRIAL_POLICY, quantiles=dict.fromkeys(makers, MEDIAN))
print(json.dumps({k: [x / 1e9 for x in v.rates] for k, v in r.items()}))
"""


def modes(n: int) -> None:
    runs = []
    for _ in range(n):
        out = subprocess.run([sys.executable, "-c", MODES_CHILD], check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
        runs.append(json.loads(out))
    print(f"\n`modes`: {n} processes, 9 interleaved trials each, 256 MiB on 2 MiB pages")
    estimators = {
        "2T median trial (the old statistic)": lambda r: statistics.median(r["2T"]),
        "2T best trial": lambda r: max(r["2T"]),
        "1T median trial x 2 (the ceiling)": lambda r: statistics.median(r["1T x 2"]),
        "1T best trial x 2": lambda r: max(r["1T x 2"]),
    }
    print(f"| estimator | {' | '.join(f'#{i + 1}' for i in range(n))} | max/min - 1 |")
    print(f"| --- | {' | '.join('---:' for _ in range(n))} | ---: |")
    for name, f in estimators.items():
        v = [f(r) for r in runs]
        print(f"| {name} | {' | '.join(f'{x:.1f}' for x in v)} | {max(v) / min(v) - 1:.1%} |")
    for i, r in enumerate(runs):
        print(f"#{i + 1} 2T trials: {' '.join(f'{x:.0f}' for x in r['2T'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="kernels,pages,age,placement,modes")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--n", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    torch.set_num_threads(2)
    cpu = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"model name\s*:\s*(.*)", cpu)
    print(f"{model.group(1) if model else 'cpu'}, {torch.get_num_threads()} threads, "
          f"transparent huge pages: {main_memory.thp_mode()}, "
          f"torch {torch.__version__}")  # fmt: skip
    parts = args.parts.split(",")
    if "kernels" in parts:
        kernels(args.rounds)
    if "pages" in parts:
        pages(args.rounds)
    if "age" in parts:
        age(args.rounds)
    if "placement" in parts:
        placement(args.seconds)
    if "modes" in parts:
        modes(args.n)


if __name__ == "__main__":
    main()
