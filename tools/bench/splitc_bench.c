/*
 * splitc_bench -- the Split-C micro-benchmarks of the paper's Figures 6-3 and 6-4, on
 * whatever back end SPLITC_BACKEND names (docs/splitc.md).
 *
 *   softvia-run -n 2 --pin splitc_bench [--iters N] [--sizes LIST] [--csv FILE] [--label L]
 *                                        [--only prim|bulk]
 *
 * Primitives on int, each repeated N times (default 10,000), time per operation:
 *   read   v = read_int(p)                      (blocking round trip)
 *   write  write_int(p, v)                      (blocking until it is in the remote memory)
 *   get    get_int(&v[i], p) N times, then sync()
 *   put    put_int(p, v) N times, then sync()
 *   store  store_int(p, v) N times, then all_store_sync() (the collective that says they
 *          all landed; the idle process takes part in it)
 *   fadd   atomic_fetch_add_long(p, 1) N times (blocking: the old value comes back)
 * one-way: process 0 issues to process 1, which only serves (it waits in a barrier or
 * all_store_sync, polling); two-way: both issue to each other at once.
 * barrier: the time of one barrier() of both processes.
 * Bulk (--sizes, default 4 B to 64 KiB in powers of 4): bulk_get, bulk_put, bulk_store
 * and bulk_read of that many bytes, one-way and two-way, as above. The local end is a
 * malloc'd buffer, or with --local-heap one in the symmetric heap (global memory, which
 * via-rel registers with its NIC: its bulk transfers can then go zero copy, by RDMA).
 *
 * Process 0 prints a table and, with --csv, appends lines
 *   splitc,<label>,<op>,<oneway|twoway>,<bytes>,<us per op>,<MB/s>
 * tools/bench/splitc_compare.sh runs it beside OpenSHMEM (shmem_peer.c) in rounds.
 */
#define _GNU_SOURCE
#include <splitc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int iters = 10000;
static const char *csv_path = NULL, *label = NULL;
static FILE *csv;
static int *prim;    /* all_malloc: the target of the primitives */
static char *bulk;   /* all_malloc: the target of the bulk operations */
static char *local;  /* a local buffer for bulk */
static size_t bulk_max = 65536;
static int local_heap;  /* --local-heap */

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

enum op { READ, WRITE, GET, PUT, STORE, FADD };
static const char *op_names[] = {"read", "write", "get", "put", "store", "fadd"};

/* Runs op n times against partner (when this process issues), returns us per op. */
static double run_prim(enum op op, int issue, int n) {
    const int partner = PROCS > 1 ? 1 - MYPROC : MYPROC;
    gptr_t p = toglobal(partner, &prim[0]);
    gptr_t pl = toglobal(partner, &prim[16]); /* a long on a cache line of its own */
    static int sink[64];
    static long lsink;
    barrier();
    double t0 = now_us();
    if (issue) {
        switch (op) {
            case READ:
                for (int i = 0; i < n; i++) sink[i & 63] += read_int(p);
                break;
            case WRITE:
                for (int i = 0; i < n; i++) write_int(p, i);
                break;
            case GET:
                for (int i = 0; i < n; i++) get_int(&sink[i & 63], p);
                sync();
                break;
            case PUT:
                for (int i = 0; i < n; i++) put_int(p, i);
                sync();
                break;
            case STORE:
                for (int i = 0; i < n; i++) store_int(p, i);
                break;
            case FADD:
                for (int i = 0; i < n; i++) lsink += atomic_fetch_add_long(pl, 1);
                break;
        }
    }
    if (op == STORE) all_store_sync();
    double t1 = now_us();
    barrier();
    return (t1 - t0) / n;
}

enum bop { BGET, BPUT, BSTORE, BREAD };
static const char *bop_names[] = {"bulk_get", "bulk_put", "bulk_store", "bulk_read"};

static double run_bulk(enum bop op, size_t bytes, int issue, int n) {
    const int partner = PROCS > 1 ? 1 - MYPROC : MYPROC;
    gptr_t p = toglobal(partner, bulk);
    barrier();
    double t0 = now_us();
    if (issue) {
        switch (op) {
            case BGET:
                for (int i = 0; i < n; i++) bulk_get(local, p, bytes);
                sync();
                break;
            case BPUT:
                for (int i = 0; i < n; i++) bulk_put(p, local, bytes);
                sync();
                break;
            case BSTORE:
                for (int i = 0; i < n; i++) bulk_store(p, local, bytes);
                break;
            case BREAD:
                for (int i = 0; i < n; i++) bulk_read(local, p, bytes);
                break;
        }
    }
    if (op == BSTORE) all_store_sync();
    double t1 = now_us();
    barrier();
    return (t1 - t0) / n;
}

static void report(const char *op, const char *mode, size_t bytes, double us) {
    if (MYPROC != 0) return;
    double mbps = us > 0 ? bytes / us : 0;
    printf("%-10s %-7s %7zu %10.3f %10.1f\n", op, mode, bytes, us, mbps);
    if (csv) fprintf(csv, "splitc,%s,%s,%s,%zu,%.4f,%.2f\n", label, op, mode, bytes, us, mbps);
}

static int parse_sizes(const char *s, size_t *out, int max) {
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) {
        char *end;
        unsigned long v = strtoul(t, &end, 10);
        if (*end || v == 0 || v > (1u << 20)) {
            fprintf(stderr, "splitc_bench: --sizes: '%s' is not a size of 1 to 1048576 bytes\n", t);
            exit(2);
        }
        out[n++] = v;
    }
    free(copy);
    return n;
}

int splitc_main(int argc, char **argv) {
    size_t sizes[32] = {4, 16, 64, 256, 1024, 4096, 16384, 65536};
    int nsizes = 8;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
            if (iters < 1) {
                fprintf(stderr, "splitc_bench: --iters must be at least 1\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = parse_sizes(argv[++i], sizes, 32);
        } else if (!strcmp(argv[i], "--csv") && i + 1 < argc) {
            csv_path = argv[++i];
        } else if (!strcmp(argv[i], "--label") && i + 1 < argc) {
            label = argv[++i];
        } else if (!strcmp(argv[i], "--local-heap")) {
            local_heap = 1;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
            if (strcmp(only, "prim") && strcmp(only, "bulk")) {
                fprintf(stderr, "splitc_bench: --only takes prim or bulk\n");
                return 2;
            }
        } else {
            fprintf(stderr,
                    "usage: softvia-run -n 2 splitc_bench [--iters N] [--sizes LIST] [--csv FILE] [--label L] "
                    "[--only prim|bulk] [--local-heap]\n");
            return 2;
        }
    }
    if (PROCS != 2) {
        if (MYPROC == 0) fprintf(stderr, "splitc_bench: run it with 2 processes (softvia-run -n 2), not %d\n", PROCS);
        return 2;
    }
    if (!label) label = splitc_backend();
    if (csv_path && MYPROC == 0 && !(csv = fopen(csv_path, "a"))) {
        perror(csv_path);
        return 2;
    }
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > bulk_max) bulk_max = sizes[i];
    prim = all_malloc(64 * sizeof(int));
    bulk = all_malloc(bulk_max);
    local = local_heap ? all_malloc(bulk_max) : malloc(bulk_max);
    memset(local, 7, bulk_max);
    if (MYPROC == 0)
        printf("# splitc_bench: back end %s, %d processes, label %s\n%-10s %-7s %7s %10s %10s\n", splitc_backend(),
               PROCS, label, "op", "mode", "bytes", "us_per_op", "MB/s");
    if (!only || !strcmp(only, "prim"))
        for (int op = READ; op <= FADD; op++) {
            const size_t bytes = op == FADD ? sizeof(long) : sizeof(int);
            run_prim((enum op)op, 1, iters / 10 + 1);  // warm up
            report(op_names[op], "oneway", bytes, run_prim((enum op)op, MYPROC == 0, iters));
            report(op_names[op], "twoway", bytes, run_prim((enum op)op, 1, iters));
        }
    if (!only || !strcmp(only, "prim")) {
        barrier();
        double t0 = now_us();
        for (int i = 0; i < iters; i++) barrier();
        report("barrier", "twoway", 0, (now_us() - t0) / iters);
    }
    if (!only || !strcmp(only, "bulk"))
        for (int s = 0; s < nsizes; s++) {
            // Fewer repetitions for large transfers: about 64 MiB moved per measurement.
            int n = (int)(((size_t)64 << 20) / sizes[s]);
            if (n > iters) n = iters;
            if (n < 20) n = 20;
            for (int op = BGET; op <= BREAD; op++) {
                run_bulk((enum bop)op, sizes[s], 1, n / 10 + 1);
                report(bop_names[op], "oneway", sizes[s], run_bulk((enum bop)op, sizes[s], MYPROC == 0, n));
                report(bop_names[op], "twoway", sizes[s], run_bulk((enum bop)op, sizes[s], 1, n));
            }
        }
    if (csv) fclose(csv);
    if (local_heap)
        all_free(local);
    else
        free(local);
    all_free(bulk);
    all_free(prim);
    return 0;
}
