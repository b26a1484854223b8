/*
 * shmem_peer -- splitc_bench's operations in OpenSHMEM, the peer its figures are printed
 * beside (tools/bench/splitc_compare.sh builds it with oshcc and runs it with oshrun).
 *
 *   oshrun -np 2 shmem_peer [--iters N] [--sizes LIST] [--label L]
 *
 * The same loops and the same output lines as splitc_bench, with OpenSHMEM's nearest
 * calls (OpenSHMEM 1.4, Open MPI's oshmem):
 *   read   shmem_int_g                     write  shmem_int_p + shmem_quiet per op
 *   get    shmem_getmem_nbi N times, quiet  put    shmem_int_p N times, shmem_quiet
 *   store  shmem_int_p N times, then shmem_quiet and shmem_barrier_all (it has no
 *          signalling store: the barrier is how the target learns they landed)
 *   fadd   shmem_long_atomic_fetch_add (blocking: the old value comes back)
 *   bulk_get / bulk_put: shmem_getmem_nbi / shmem_putmem_nbi N times, then shmem_quiet;
 *   bulk_store: shmem_putmem_nbi N times, quiet, barrier; bulk_read: shmem_getmem.
 *   barrier: shmem_barrier_all.
 * Lines: shmem,<label>,<op>,<oneway|twoway>,<bytes>,<us per op>,<MB/s>
 */
#define _GNU_SOURCE
#include <shmem.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int iters = 10000;
static const char *label = "oshmem";
static int prim[64];
static long prim_long;
static char *bulk, *local;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void report(const char *op, const char *mode, size_t bytes, double us) {
    if (shmem_my_pe() != 0) return;
    printf("shmem,%s,%s,%s,%zu,%.4f,%.2f\n", label, op, mode, bytes, us, us > 0 ? bytes / us : 0);
}

enum op { READ, WRITE, GET, PUT, STORE, FADD };
static const char *op_names[] = {"read", "write", "get", "put", "store", "fadd"};

static double run_prim(enum op op, int issue, int n) {
    const int partner = 1 - shmem_my_pe();
    static int sink[64];
    static long lsink;
    shmem_barrier_all();
    double t0 = now_us();
    if (issue) {
        switch (op) {
            case READ:
                for (int i = 0; i < n; i++) sink[i & 63] += shmem_int_g(&prim[0], partner);
                break;
            case WRITE:
                for (int i = 0; i < n; i++) {
                    shmem_int_p(&prim[0], i, partner);
                    shmem_quiet();
                }
                break;
            case GET:
                for (int i = 0; i < n; i++) shmem_getmem_nbi(&sink[i & 63], &prim[0], sizeof(int), partner);
                shmem_quiet();
                break;
            case PUT:
            case STORE:
                for (int i = 0; i < n; i++) shmem_int_p(&prim[0], i, partner);
                shmem_quiet();
                break;
            case FADD:
                for (int i = 0; i < n; i++) lsink += shmem_long_atomic_fetch_add(&prim_long, 1, partner);
                break;
        }
    }
    if (op == STORE) shmem_barrier_all();
    double t1 = now_us();
    shmem_barrier_all();
    return (t1 - t0) / n;
}

enum bop { BGET, BPUT, BSTORE, BREAD };
static const char *bop_names[] = {"bulk_get", "bulk_put", "bulk_store", "bulk_read"};

static double run_bulk(enum bop op, size_t bytes, int issue, int n) {
    const int partner = 1 - shmem_my_pe();
    shmem_barrier_all();
    double t0 = now_us();
    if (issue) {
        switch (op) {
            case BGET:
                for (int i = 0; i < n; i++) shmem_getmem_nbi(local, bulk, bytes, partner);
                shmem_quiet();
                break;
            case BPUT:
            case BSTORE:
                for (int i = 0; i < n; i++) shmem_putmem_nbi(bulk, local, bytes, partner);
                shmem_quiet();
                break;
            case BREAD:
                for (int i = 0; i < n; i++) shmem_getmem(local, bulk, bytes, partner);
                break;
        }
    }
    if (op == BSTORE) shmem_barrier_all();
    double t1 = now_us();
    shmem_barrier_all();
    return (t1 - t0) / n;
}

int main(int argc, char **argv) {
    size_t sizes[32] = {4, 16, 64, 256, 1024, 4096, 16384, 65536};
    int nsizes = 8;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--label") && i + 1 < argc) {
            label = argv[++i];
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = 0;
            char *save = NULL, *copy = strdup(argv[++i]);
            for (char *t = strtok_r(copy, ",", &save); t && nsizes < 32; t = strtok_r(NULL, ",", &save))
                sizes[nsizes++] = strtoul(t, NULL, 10);
        } else {
            fprintf(stderr, "usage: oshrun -np 2 shmem_peer [--iters N] [--sizes LIST] [--label L] [--only prim|bulk]\n");
            return 2;
        }
    }
    if (iters < 1) return 2;
    shmem_init();
    if (shmem_n_pes() != 2) {
        if (shmem_my_pe() == 0) fprintf(stderr, "shmem_peer: run it with 2 PEs\n");
        shmem_finalize();
        return 2;
    }
    size_t max = 65536;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > max) max = sizes[i];
    bulk = shmem_malloc(max);
    local = malloc(max);
    memset(local, 7, max);
    const int me = shmem_my_pe();
    if (!only || !strcmp(only, "prim")) {
        for (int op = READ; op <= FADD; op++) {
            const size_t bytes = op == FADD ? sizeof(long) : sizeof(int);
            run_prim((enum op)op, 1, iters / 10 + 1);
            report(op_names[op], "oneway", bytes, run_prim((enum op)op, me == 0, iters));
            report(op_names[op], "twoway", bytes, run_prim((enum op)op, 1, iters));
        }
        shmem_barrier_all();
        double t0 = now_us();
        for (int i = 0; i < iters; i++) shmem_barrier_all();
        report("barrier", "twoway", 0, (now_us() - t0) / iters);
    }
    if (!only || !strcmp(only, "bulk"))
        for (int s = 0; s < nsizes; s++) {
            int n = (int)(((size_t)64 << 20) / sizes[s]);
            if (n > iters) n = iters;
            if (n < 20) n = 20;
            for (int op = BGET; op <= BREAD; op++) {
                run_bulk((enum bop)op, sizes[s], 1, n / 10 + 1);
                report(bop_names[op], "oneway", sizes[s], run_bulk((enum bop)op, sizes[s], me == 0, n));
                report(bop_names[op], "twoway", sizes[s], run_bulk((enum bop)op, sizes[s], 1, n));
            }
        }
    fflush(stdout);
    shmem_barrier_all();
    /* Debian's oshmem may crash in shmem_finalize after this; the figures are out by then. */
    shmem_finalize();
    return 0;
}
