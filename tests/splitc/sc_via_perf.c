/* sc_via_perf -- the figures docs/splitc.md gives for the VIA back ends (not a test: a
 * measurement; tools' splitc_bench is the full benchmark).
 *
 *   softvia-run -n 2 --pin sc_via_perf [--iters N] [--bulk BYTES]
 *
 * Process 0 issues, process 1 serves (it waits in barrier() or all_store_sync(), which
 * poll). One line per figure:
 *   read_int    median round trip of read_int, each timed alone (as vipl_bench times a
 *               ping-pong), microseconds
 *   put_int     N put_int then sync(), per operation
 *   store_int   N store_int then all_store_sync(), per operation
 *   get_int     N get_int then sync(), per operation
 *   bulk_put / bulk_get / bulk_store of BYTES (default 65536) from and to global memory,
 *               MB/s */
#include <splitc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int target[1024];
int sink[1024];

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int splitc_main(int argc, char **argv) {
    long iters = 20000;
    size_t bulk = 65536;
    const char *only = "";
    for (int a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--iters")) iters = atol(argv[a + 1]);
        else if (!strcmp(argv[a], "--bulk")) bulk = (size_t)atol(argv[a + 1]);
        else if (!strcmp(argv[a], "--only")) only = argv[a + 1];
    }
    const int all = !*only;
    if (PROCS != 2 || iters < 100) {
        if (MYPROC == 0) fprintf(stderr, "usage: softvia-run -n 2 sc_via_perf [--iters N >= 100] [--bulk BYTES]\n");
        return 2;
    }
    const gptr_t g = toglobal(1, &target[7]);
    double *t = malloc(sizeof(double) * (size_t)iters);
    char *buf = all_malloc(bulk), *local = all_malloc(bulk);
    barrier();
    if (MYPROC == 0 && (all || !strcmp(only, "read"))) {
        for (long i = 0; i < iters / 10; i++) (void)read_int(g); /* warm-up */
        for (long i = 0; i < iters; i++) {
            double t0 = now_us();
            (void)read_int(g);
            t[i] = now_us() - t0;
        }
        qsort(t, (size_t)iters, sizeof *t, cmp_d);
        printf("%-10s %8.3f us (median round trip; p90 %.3f, p99 %.3f)\n", "read_int", t[iters / 2], t[iters * 9 / 10],
               t[iters * 99 / 100]);
    }
    barrier();
    if (MYPROC == 0 && (all || !strcmp(only, "put"))) {
        double t0 = now_us();
        for (long i = 0; i < iters; i++) put_int(toglobal(1, &target[i & 1023]), (int)i);
        sync();
        printf("%-10s %8.3f us per operation\n", "put_int", (now_us() - t0) / (double)iters);
    }
    barrier();
    double t0 = now_us();
    if (MYPROC == 0 && (all || !strcmp(only, "store")))
        for (long i = 0; i < iters; i++) store_int(toglobal(1, &target[i & 1023]), (int)i);
    all_store_sync();
    if (MYPROC == 0 && (all || !strcmp(only, "store"))) printf("%-10s %8.3f us per operation\n", "store_int", (now_us() - t0) / (double)iters);
    barrier();
    if (MYPROC == 0 && all) {
        t0 = now_us();
        for (long i = 0; i < iters; i++) get_int(&sink[i & 1023], toglobal(1, &target[i & 1023]));
        sync();
        printf("%-10s %8.3f us per operation\n", "get_int", (now_us() - t0) / (double)iters);
    }
    barrier();
    /* bulk: --bulk BYTES, or with --only bulk every size from 1 KiB to 64 KiB */
    size_t lo = bulk, hi = bulk;
    if (!strcmp(only, "bulk")) lo = 1024, hi = 65536;
    if (!all && strcmp(only, "bulk")) return 0;
    for (size_t n = lo; n <= hi && n <= bulk; n *= 2) {
        const long reps = (long)(4000000 / n) + 20;
        barrier();
        if (MYPROC == 0) {
            t0 = now_us();
            for (long i = 0; i < reps; i++) bulk_put(toglobal(1, buf), local, n);
            sync();
            printf("%-10s %8.1f MB/s (%zu bytes)\n", "bulk_put", (double)n * reps / (now_us() - t0), n);
            t0 = now_us();
            for (long i = 0; i < reps; i++) bulk_get(local, toglobal(1, buf), n);
            sync();
            printf("%-10s %8.1f MB/s (%zu bytes)\n", "bulk_get", (double)n * reps / (now_us() - t0), n);
            t0 = now_us();
            for (long i = 0; i < reps; i++) bulk_read(local, toglobal(1, buf), n);
            printf("%-10s %8.3f us (%zu bytes)\n", "bulk_read", (now_us() - t0) / (double)reps, n);
        }
        barrier();
        t0 = now_us();
        if (MYPROC == 0)
            for (long i = 0; i < reps; i++) bulk_store(toglobal(1, buf), local, n);
        all_store_sync();
        if (MYPROC == 0) printf("%-10s %8.1f MB/s (%zu bytes)\n", "bulk_store", (double)n * reps / (now_us() - t0), n);
    }
    return 0;
}
