/* sc_atomic -- atomic remote procedures, from every process at once, to every process
 * (itself too), with exact totals:
 *  - atomic_fetch_add_long: K increments from each process into a counter at each
 *    process; the old values one process gets from one counter rise strictly, the
 *    counter ends at PROCS*K, and the values every process got are all different (their
 *    sum is 0+1+...+(PROCS*K-1));
 *  - atomic_cswap_long: an increment loop (read, compare-and-swap, retry) from every
 *    process into one counter per process ends at the exact total; a swap that fails
 *    returns the current value and changes nothing;
 *  - atomic_call: the program's own function updates two fields at once (a pair whose
 *    sum must stay 0) and returns a value; and adds doubles (no lost update).
 * Plain puts to another word of the same owner run in between (atomic calls are atomic
 * with respect to every request handled there).
 *
 * usage: sc_atomic [--k N] */
#include "sc_test.h"

#include <stdlib.h>

/* Operations per process and target: 300 (60 with more processes than this machine's
 * two cores: every blocking round trip then waits for a scheduler slice); --k N. */
static int K;
long counter_g[2];          /* [0] fetch_add, [1] cswap */
struct pair { long a, b; } pair_g;
double dsum_g;
long noise_g[64];

static int64_t pair_add(void *addr, int64_t arg) {
    struct pair *p = addr;
    p->a += arg;
    p->b -= arg;
    return p->a + p->b; /* 0 unless someone else ran in the middle */
}

static int64_t dadd(void *addr, int64_t arg) {
    double *d = addr;
    double old = *d;
    *d = old + (double)arg * 0.5;
    return (int64_t)(old * 2);
}

int splitc_main(int argc, char **argv) {
    K = argc == 3 && !strcmp(argv[1], "--k") ? atoi(argv[2]) : PROCS > 2 ? 60 : 300;
    CHECK(K > 0, "--k must be positive");
    CHECK(PROCS <= 64, "at most 64 processes");
    /* fetch_add: owners in turn from each process, interleaved */
    long last[64];
    long sum_old = 0;
    for (int q = 0; q < PROCS; q++) last[q] = -1;
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < PROCS; i++) {
            const int q = (MYPROC + i) % PROCS;
            long old = atomic_fetch_add_long(toglobal(q, &counter_g[0]), 1);
            CHECK(old > last[q] && old < (long)PROCS * K, "fetch_add at %d returned %ld after %ld", q, old, last[q]);
            last[q] = old;
            sum_old += old;
            if (k % 16 == 0) put_long(toglobal(q, &noise_g[MYPROC]), k); /* requests in between */
        }
    }
    sync();
    barrier();
    CHECK(counter_g[0] == (long)PROCS * K, "fetch_add total at %d: %ld want %ld", MYPROC, counter_g[0], (long)PROCS * K);
    /* all old values from all processes for all counters: every 0..PROCS*K-1 once per counter */
    const long n = (long)PROCS * K;
    const long total = all_reduce_to_all_add_long(sum_old);
    CHECK(total == (long)PROCS * (n * (n - 1) / 2), "fetch_add old values: sum %ld want %ld (a value returned twice)",
          total, (long)PROCS * (n * (n - 1) / 2));
    /* fetch_add with a negative and a large value */
    barrier();
    if (MYPROC == 0) {
        long old = atomic_fetch_add_long(toglobal(PROCS - 1, &counter_g[0]), -(1L << 40));
        CHECK(old == n, "fetch_add(-2^40) old %ld", old);
        old = atomic_fetch_add_long(toglobal(PROCS - 1, &counter_g[0]), 1L << 40);
        CHECK(old == n - (1L << 40), "fetch_add(+2^40) old %ld", old);
    }
    barrier();

    /* cswap: a lock-free increment from everyone into everyone */
    long fails = 0;
    for (int k = 0; k < K / 3; k++) {
        for (int i = 0; i < PROCS; i++) {
            const gptr_t c = toglobal((MYPROC + i) % PROCS, &counter_g[1]);
            long seen = read_long(c);
            for (;;) {
                long old = atomic_cswap_long(c, seen, seen + 1);
                if (old == seen) break;
                fails++;
                seen = old; /* a failed swap tells the value */
            }
        }
    }
    barrier();
    CHECK(counter_g[1] == (long)PROCS * (K / 3), "cswap total at %d: %ld want %ld", MYPROC, counter_g[1],
          (long)PROCS * (K / 3));
    barrier();
    /* a swap that cannot succeed changes nothing and returns the current value */
    long old = atomic_cswap_long(toglobal((MYPROC + 1) % PROCS, &counter_g[1]), -5, 12345);
    CHECK(old == (long)PROCS * (K / 3), "failed cswap returned %ld", old);
    barrier();
    CHECK(counter_g[1] == (long)PROCS * (K / 3), "a failed cswap changed the value to %ld", counter_g[1]);
    barrier();

    /* atomic_call: two fields updated together, everyone at process 0 and at its neighbour */
    for (int k = 0; k < K; k++) {
        int64_t r = atomic_call(pair_add, toglobal(k & 1 ? 0 : (MYPROC + 1) % PROCS, &pair_g), MYPROC + 1);
        CHECK(r == 0, "atomic_call ran beside another (a + b = %lld)", (long long)r);
        (void)atomic_call(dadd, toglobal(0, &dsum_g), MYPROC + 1);
    }
    barrier();
    long want_a0 = 0; /* process 0 gets odd k from everyone, and even k from its left neighbour */
    for (int w = 0; w < PROCS; w++) want_a0 += (long)(K / 2) * (w + 1);
    want_a0 += (long)(K - K / 2) * ((PROCS - 1) + 1);
    long want_a = MYPROC == 0 ? want_a0 : (long)(K - K / 2) * MYPROC; /* even k from the left one, w = MYPROC-1 */
    if (PROCS == 1) want_a = (long)K * 1;
    CHECK(pair_g.a == want_a && pair_g.b == -want_a, "atomic_call pair at %d: a %ld b %ld want %ld", MYPROC, pair_g.a,
          pair_g.b, want_a);
    if (MYPROC == 0) {
        double want = 0;
        for (int w = 0; w < PROCS; w++) want += K * (w + 1) * 0.5;
        CHECK(dsum_g == want, "atomic_call double sum %a want %a", dsum_g, want);
    }
    barrier();
    return sc_done("sc_atomic");
}
