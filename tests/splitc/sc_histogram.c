/* sc_histogram -- the Split-C idiom of a histogram built with atomic calls: every process
 * draws keys (a deterministic generator per process), and for each adds one to its bin
 * in a spread array of bins (bin b on process b % PROCS) with atomic_call of the
 * program's own increment function; a second histogram is built with
 * atomic_fetch_add_long. Each owner recomputes every process's keys and checks its bins
 * exactly; the totals are checked with a reduction.
 *
 * usage: sc_histogram [--keys N]   (per process; 1000, or 150 with more than 2 processes) */
#include <stdlib.h>

#include "sc_test.h"

#define BINS 257

static uint64_t next_key(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static int64_t inc(void *addr, int64_t by) {
    long *bin = addr;
    *bin += by;
    return *bin;
}

int splitc_main(int argc, char **argv) {
    const long nkeys = argc == 3 && !strcmp(argv[1], "--keys") ? atol(argv[2]) : PROCS > 2 ? 150 : 1000;
    long *hist = all_spread_malloc(BINS, sizeof(long));
    long *hist2 = all_spread_malloc(BINS, sizeof(long));
    CHECK(hist && hist2, "all_spread_malloc");
    uint64_t s = 1000 + (uint64_t)MYPROC;
    for (long k = 0; k < nkeys; k++) {
        const size_t b = (size_t)(next_key(&s) % BINS);
        int64_t now = atomic_call(inc, spread_gptr(hist, sizeof(long), b), 1);
        CHECK(now >= 1, "atomic_call returned %lld", (long long)now);
        (void)atomic_fetch_add_long(spread_gptr(hist2, sizeof(long), b), 2);
    }
    barrier();
    long want[BINS] = {0};
    for (int p = 0; p < PROCS; p++) {
        uint64_t t = 1000 + (uint64_t)p;
        for (long k = 0; k < nkeys; k++) want[next_key(&t) % BINS]++;
    }
    long local = 0;
    for (size_t b = (size_t)MYPROC, j = 0; b < BINS; b += (size_t)PROCS, j++) {
        CHECK(hist[j] == want[b], "bin %zu: %ld want %ld", b, hist[j], want[b]);
        CHECK(hist2[j] == 2 * want[b], "bin %zu (fetch_add): %ld want %ld", b, hist2[j], 2 * want[b]);
        local += hist[j];
    }
    const long total = all_reduce_to_all_add_long(local);
    CHECK(total == nkeys * PROCS, "total %ld want %ld", total, nkeys * PROCS);
    barrier();
    all_spread_free(hist2);
    all_spread_free(hist);
    return sc_done("sc_histogram");
}
