// Where the host put two vCPUs, seen from inside the guest (benchmarks/dram_mechanism.py,
// part `placement`). Every 0.2 s for argv[1] seconds: the round trip of one cache line between
// a thread on cpu0 and one on cpu1 (20k ping-pongs; under one L3, a Zen 4 CCD, 50-70 ns),
// then the best of 3 two-thread and of 3 one-thread copies of 256 MiB with plain 64-byte
// vector stores, as aten's copy loop does. Prints: seconds, round trip ns, 2T GB/s, 1T GB/s.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N ((size_t)256 << 20)
#define PINGS 20000

static char *src, *dst;
static _Atomic int flag, cmd, seq, ack;
static int gen;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void copy(size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i += 64) __builtin_memcpy(dst + i, src + i, 64);
}

static void *worker(void *arg) {
    (void)arg;
    pin(1);
    int seen = 0;
    for (;;) {
        int s;
        while ((s = atomic_load(&seq)) == seen) {
        }
        seen = s;
        int c = atomic_load(&cmd);
        if (c == 9) return 0;
        if (c == 1)
            for (int k = 0; k < PINGS; k++) {
                while (atomic_load(&flag) != 2 * k + 1) {
                }
                atomic_store(&flag, 2 * k + 2);
            }
        if (c == 2) copy(N / 2, N);
        atomic_store(&ack, seen);
    }
}

static void post(int c) {
    atomic_store(&cmd, c);
    atomic_store(&seq, ++gen);
}

static void wait_ack(void) {
    while (atomic_load(&ack) != gen) {
    }
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 60;
    src = aligned_alloc(4096, N);
    dst = aligned_alloc(4096, N);
    memset(src, 1, N);
    memset(dst, 0, N);
    pin(0);
    pthread_t th;
    pthread_create(&th, 0, worker, 0);
    double t0 = now();
    while (now() - t0 < secs) {
        atomic_store(&flag, 0);
        post(1);
        double t = now();
        for (int k = 0; k < PINGS; k++) {
            atomic_store(&flag, 2 * k + 1);
            while (atomic_load(&flag) != 2 * k + 2) {
            }
        }
        double rtt = (now() - t) / PINGS * 1e9, two = 0, one = 0;
        wait_ack();
        for (int k = 0; k < 3; k++) {
            t = now();
            post(2);
            copy(0, N / 2);
            wait_ack();
            double r = 2.0 * N / (now() - t) / 1e9;
            if (r > two) two = r;
        }
        for (int k = 0; k < 3; k++) {
            t = now();
            copy(0, N);
            double r = 2.0 * N / (now() - t) / 1e9;
            if (r > one) one = r;
        }
        printf("%.1f %.1f %.2f %.2f\n", now() - t0, rtt, two, one);
        fflush(stdout);
        usleep(200000);
    }
    post(9);
    pthread_join(th, 0);
    return 0;
}
