/* sc_coll -- the collectives on values, for int, long and double: reduce to one and to all
 * (add, max, min), broadcast, inclusive scan; several rounds in a row with values that
 * change every round (a slot reused too early shows), negative values (max/min), long
 * values beyond 32 bits and doubles with fractions (a truncation shows). */
#include "sc_test.h"

/* Process p's value in round r, per type. */
static int vi(int p, int r) { return (p % 2 ? -1 : 1) * (1000003 * (p + 1) + r * 7); }
static long vl(int p, int r) { return (p % 2 ? -1L : 1L) * ((1L << 40) * (p + 1) + r * 11L + 5); }
static double vd(int p, int r) { return (p % 2 ? -1.0 : 1.0) * (0.5 * (p + 1) + r * 0.25 + 1.0 / 1024); }

#define CHECK_COLL(T, fmt, v, name)                                                                          \
    do {                                                                                                     \
        T sum = 0, mx = v(0, r), mn = v(0, r), scan = 0;                                                     \
        for (int p = 0; p < PROCS; p++) {                                                                    \
            sum += v(p, r);                                                                                  \
            if (v(p, r) > mx) mx = v(p, r);                                                                  \
            if (v(p, r) < mn) mn = v(p, r);                                                                  \
            if (p <= MYPROC) scan += v(p, r);                                                                \
        }                                                                                                    \
        const T mine = v(MYPROC, r);                                                                         \
        T got = all_reduce_to_all_add_##name(mine);                                                         \
        CHECK(got == sum, "round %d all_reduce_to_all_add_" #name ": " fmt " want " fmt, r, got, sum);      \
        got = all_reduce_to_all_max_##name(mine);                                                            \
        CHECK(got == mx, "round %d all_reduce_to_all_max_" #name ": " fmt " want " fmt, r, got, mx);        \
        got = all_reduce_to_all_min_##name(mine);                                                            \
        CHECK(got == mn, "round %d all_reduce_to_all_min_" #name ": " fmt " want " fmt, r, got, mn);        \
        got = all_reduce_to_one_add_##name(mine);                                                            \
        if (MYPROC == 0) CHECK(got == sum, "round %d all_reduce_to_one_add_" #name ": " fmt, r, got);       \
        got = all_reduce_to_one_max_##name(mine);                                                            \
        if (MYPROC == 0) CHECK(got == mx, "round %d all_reduce_to_one_max_" #name ": " fmt, r, got);        \
        got = all_reduce_to_one_min_##name(mine);                                                            \
        if (MYPROC == 0) CHECK(got == mn, "round %d all_reduce_to_one_min_" #name ": " fmt, r, got);        \
        got = all_bcast_##name(mine);                                                                        \
        CHECK(got == v(0, r), "round %d all_bcast_" #name ": " fmt " want " fmt, r, got, v(0, r));          \
        got = all_scan_add_##name(mine);                                                                     \
        CHECK(got == scan, "round %d all_scan_add_" #name ": " fmt " want " fmt, r, got, scan);             \
    } while (0)

int splitc_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    for (int r = 0; r < 4; r++) {
        CHECK_COLL(int, "%d", vi, int);
        CHECK_COLL(long, "%ld", vl, long);
        CHECK_COLL(double, "%a", vd, double);
    }
    /* a collective right after remote traffic: no stale slot, no lost put */
    for (int r = 0; r < 3; r++) {
        int x = all_reduce_to_all_add_int(1);
        CHECK(x == PROCS, "count of processes: %d", x);
    }
    return sc_done("sc_coll");
}
