/* sc_shm MODE -- the same-host path (SPLITC_SHM, docs/shm.md) as Split-C programs see it.
 *
 *   layout       a global variable, an all_spread_malloc and an all_malloc block are at
 *                the same address in every process; values stored, put and written by one
 *                process through the path are read by another; the back end is the one
 *                SPLITC_SHM asks for (shm, or shm+X across hosts; X alone when off)
 *   slow         memory outside the shared segments (the stack, malloc'd memory), made
 *                global: every call on it (reads, writes, gets, puts, stores, bulk of 1 B
 *                to 64 KiB, fetch-add, cswap, atomic_call) from every process, every value
 *                checked, store_sync counting those stores
 *   fadd [--k K] K fetch-adds (default 1,000,000) from every process into process 0's
 *                heap word, its data-segment word and an unaligned heap word (the owner
 *                runs those), and K/20 atomic_call increments into every process: exact sums */
#include <stdlib.h>
#include <string.h>

#include "sc_test.h"

#define MAXP 64
long global_g = 12345;
long counter_g;           /* fadd: the data-segment word */
long call_count_g;        /* fadd: counted by atomic_call */
long addr_g[MAXP][3];     /* slow: each process's stack buffer, malloc'd buffer and stack words */

static int64_t inc(void *addr, int64_t arg) {
    long *p = addr;
    long old = *p;
    *p = old + arg;
    return old;
}

static void layout(void) {
    const char *shm = getenv("SPLITC_SHM");
    const int on = !shm || !*shm || !strcmp(shm, "on") || !strcmp(shm, "1");
    const char *be = splitc_backend();
    if (PROCS > 1)
        CHECK(on == !strncmp(be, "shm", 3), "SPLITC_SHM=%s but the back end is %s", shm ? shm : "(unset)", be);
    long *spread = all_spread_malloc((size_t)PROCS * 4, sizeof(long));
    long *block = all_malloc(64 * sizeof(long));
    CHECK(spread && block, "allocations");
    const long addrs[3] = {(long)(uintptr_t)&global_g, (long)(uintptr_t)spread, (long)(uintptr_t)block};
    for (int i = 0; i < 3; i++) {
        CHECK(all_reduce_to_all_max_long(addrs[i]) == addrs[i] && all_reduce_to_all_min_long(addrs[i]) == addrs[i],
              "address %d (%#lx) differs between processes", i, (unsigned long)addrs[i]);
    }
    const int right = (MYPROC + 1) % PROCS, left = (MYPROC + PROCS - 1) % PROCS;
    /* store, then all_store_sync: the neighbour's value is here */
    store_long(toglobal(right, &block[0]), 1000 + MYPROC);
    all_store_sync();
    CHECK(block[0] == 1000 + left, "stored by %d: %ld", left, block[0]);
    /* put, sync, barrier */
    put_long(spread_gptr(spread, sizeof(long), (size_t)right), 2000 + MYPROC);
    sync();
    barrier();
    CHECK(spread[0] == 2000 + left, "put by %d into the spread array: %ld", left, spread[0]);
    /* write into the neighbour's global variable; it reads it after the barrier */
    write_long(toglobal(right, &global_g), 3000 + MYPROC);
    barrier();
    CHECK(global_g == 3000 + left, "written by %d into global_g: %ld", left, global_g);
    CHECK(read_long(toglobal(right, &global_g)) == 3000 + MYPROC, "read back from %d", right);
    barrier();
    all_free(block);
    all_spread_free(spread);
}

static void slow(void) {
    enum { N = 65536 };
    char stack_buf[N];
    char *mal = malloc(N);
    long stack_words[4 * MAXP];
    CHECK(mal != NULL && PROCS <= 8, "set-up (at most 8 processes)");
    memset(stack_buf, 0, N);
    memset(mal, 0, N);
    memset(stack_words, 0, sizeof stack_words);
    splitc_make_global(stack_buf, N);
    splitc_make_global(mal, N);
    splitc_make_global(stack_words, sizeof stack_words);
    addr_g[MYPROC][0] = (long)(uintptr_t)stack_buf;
    addr_g[MYPROC][1] = (long)(uintptr_t)mal;
    addr_g[MYPROC][2] = (long)(uintptr_t)stack_words;
    for (int q = 0; q < PROCS; q++)
        if (q != MYPROC) bulk_put(toglobal(q, addr_g[MYPROC]), addr_g[MYPROC], sizeof addr_g[MYPROC]);
    sync();
    barrier();
    /* Each process owns a slice of every other's buffers: [1024*w, 1024*(w+1)) for writer w
     * (bulk at the end of the buffer, 4096 B per writer). */
    const size_t slice = 1024;
    reset_store_sync();
    barrier();
    for (int q = 0; q < PROCS; q++) {
        if (q == MYPROC) continue;
        const gptr_t s = toglobal(q, (void *)(uintptr_t)addr_g[q][0]);
        const gptr_t m = toglobal(q, (void *)(uintptr_t)addr_g[q][1]);
        const ptrdiff_t at = (ptrdiff_t)(slice * (size_t)MYPROC);
        write_char(gptr_add(s, at), 'w');
        put_short(gptr_add(s, at + 2), (short)(100 + MYPROC));
        store_int(gptr_add(s, at + 4), 200 + MYPROC);
        write_double(gptr_add(m, at + 8), 0.5 + MYPROC);
        put_long(gptr_add(m, at + 16), 300L + MYPROC);
        store_longlong(gptr_add(m, at + 24), 400LL + MYPROC);
        sync();
        CHECK(read_char(gptr_add(s, at)) == 'w', "read_char from %d's stack", q);
        short sh = 0;
        long l = 0;
        get_short(&sh, gptr_add(s, at + 2));
        get_long(&l, gptr_add(m, at + 16));
        sync();
        CHECK(sh == 100 + MYPROC && l == 300L + MYPROC, "get from %d: %d %ld", q, sh, l);
        CHECK(read_double(gptr_add(m, at + 8)) == 0.5 + MYPROC, "read_double from %d's malloc'd memory", q);
        /* bulk: 1 B to 4 KiB, each written, read back, then stored */
        char out[4096], in[4096];
        for (size_t n = 1; n <= sizeof out; n *= 4) {
            const ptrdiff_t b = (ptrdiff_t)(N / 2 + 4096 * (size_t)MYPROC);
            sc_fill(out, n, (uint32_t)(MYPROC * 100 + q + n));
            bulk_put(gptr_add(s, b), out, n);
            sync();
            memset(in, 0, n);
            bulk_get(in, gptr_add(s, b), n);
            sync();
            CHECK(sc_mismatch(in, n, (uint32_t)(MYPROC * 100 + q + n)) == n, "bulk_put/get %zu B, %d's stack", n, q);
            bulk_write(gptr_add(m, b), out, n);
            memset(in, 0, n);
            bulk_read(in, gptr_add(m, b), n);
            CHECK(sc_mismatch(in, n, (uint32_t)(MYPROC * 100 + q + n)) == n, "bulk_write/read %zu B, %d's malloc'd", n, q);
        }
        bulk_store(gptr_add(m, (ptrdiff_t)(N / 2 + 4096 * (size_t)MYPROC)), out, sizeof out);
    }
    /* bytes stored here through the slow path, by every other process: 4 + 8 + 4096 each */
    store_sync((size_t)(PROCS - 1) * (4 + 8 + 4096));
    barrier();
    for (int wtr = 0; wtr < PROCS; wtr++) {
        if (wtr == MYPROC) continue;
        const size_t at = slice * (size_t)wtr;
        short sh;
        int i;
        double d;
        long l;
        long long ll;
        memcpy(&sh, stack_buf + at + 2, 2);
        memcpy(&i, stack_buf + at + 4, 4);
        memcpy(&d, mal + at + 8, 8);
        memcpy(&l, mal + at + 16, 8);
        memcpy(&ll, mal + at + 24, 8);
        CHECK(stack_buf[at] == 'w' && sh == 100 + wtr && i == 200 + wtr, "stack values from %d", wtr);
        CHECK(d == 0.5 + wtr && l == 300L + wtr && ll == 400LL + wtr, "malloc'd values from %d", wtr);
    }
    barrier();
    /* fetch-add, cswap and atomic_call on every process's stack words, from every process:
     * the owner runs them (a stack is not shared memory) */
    const int K = 200;
    for (int i = 0; i < K; i++)
        for (int q = 0; q < PROCS; q++) {
            const gptr_t sw = toglobal(q, (void *)(uintptr_t)addr_g[q][2]);
            atomic_fetch_add_long(sw, 1);
            long cur;
            do
                cur = read_long(gptr_add(sw, 8));
            while (atomic_cswap_long(gptr_add(sw, 8), cur, cur + 2) != cur);
            atomic_call(inc, gptr_add(sw, 16), 3);
        }
    barrier();
    CHECK(stack_words[0] == (long)K * PROCS, "fetch-adds on the stack: %ld", stack_words[0]);
    CHECK(stack_words[1] == 2L * K * PROCS, "cswap increments on the stack: %ld", stack_words[1]);
    CHECK(stack_words[2] == 3L * K * PROCS, "atomic_call on the stack: %ld", stack_words[2]);
    barrier();
    splitc_unmake_global(stack_buf);
    splitc_unmake_global(mal);
    splitc_unmake_global(stack_words);
    free(mal);
}

static void fadd(long k) {
    long *heap = all_malloc(4 * sizeof(long) + 1);
    CHECK(heap != NULL, "all_malloc");
    barrier();
    const gptr_t h = toglobal(0, &heap[0]);
    const gptr_t d = toglobal(0, &counter_g);
    const gptr_t u = toglobal(0, (char *)&heap[1] + 1); /* unaligned: the owner's queue runs it */
    long prev = -1;
    for (long i = 0; i < k; i++) {
        const long old = atomic_fetch_add_long(h, 1);
        CHECK(old > prev, "the old values one process gets rise: %ld after %ld", old, prev);
        prev = old;
        atomic_fetch_add_long(d, 1);
        if (i % 20 == 0) atomic_fetch_add_long(u, 1);
    }
    const long calls = k / 20;
    for (long i = 0; i < calls; i++)
        for (int q = 0; q < PROCS; q++) atomic_call(inc, toglobal(q, &call_count_g), 1);
    barrier();
    if (MYPROC == 0) {
        long un;
        memcpy(&un, (char *)&heap[1] + 1, sizeof un);
        CHECK(heap[0] == k * PROCS, "%d processes x %ld fetch-adds into the heap word: %ld", PROCS, k, heap[0]);
        CHECK(counter_g == k * PROCS, "into the data-segment word: %ld", counter_g);
        CHECK(un == ((k + 19) / 20) * PROCS, "into the unaligned word: %ld", un);
    }
    CHECK(call_count_g == calls * PROCS, "atomic_call increments: %ld, not %ld", call_count_g, calls * PROCS);
    barrier();
    all_free(heap);
}

int splitc_main(int argc, char **argv) {
    CHECK(argc >= 2, "usage: sc_shm layout|slow|fadd [--k K]");
    long k = 1000000;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--k") && i + 1 < argc) k = atol(argv[++i]);
    if (!strcmp(argv[1], "layout"))
        layout();
    else if (!strcmp(argv[1], "slow"))
        slow();
    else if (!strcmp(argv[1], "fadd"))
        fadd(k);
    else
        CHECK(0, "unknown mode '%s'", argv[1]);
    return sc_done("sc_shm");
}
