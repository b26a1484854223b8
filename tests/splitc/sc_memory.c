/* sc_memory -- global memory:
 *  - all_spread_malloc: the same address in every process, zeroed (also when reused
 *    after all_spread_free), and the layout rule: block i lives on process i % PROCS at
 *    local offset (i / PROCS) * blocksize, as spread_gptr says; every block written by a
 *    process other than its owner and checked by the owner in its local memory;
 *  - all_malloc / all_free: one block per process at the same address, zeroed;
 *  - a request the heap cannot hold: NULL in every process, and the heap still works;
 *  - global variables (data and bss) at the same address in every process. */
#include <stdlib.h>

#include "sc_test.h"

long data_var = 0x1122334455667788L; /* initialised: .data */
long bss_var;                        /* zero: .bss */

static void same_everywhere(const void *p, const char *what) {
    const long a = (long)(uintptr_t)p;
    CHECK(all_reduce_to_all_max_long(a) == a && all_reduce_to_all_min_long(a) == a,
          "%s: %p is not the address in every process", what, p);
}

static void test_spread(size_t nblocks, size_t bs, int round) {
    char *base = all_spread_malloc(nblocks, bs);
    CHECK(base != NULL, "all_spread_malloc(%zu, %zu) = NULL", nblocks, bs);
    same_everywhere(base, "all_spread_malloc");
    const size_t mine = (nblocks + (size_t)PROCS - 1 - (size_t)MYPROC) / (size_t)PROCS; /* blocks i with i % P == me */
    for (size_t j = 0; j < mine * bs; j++)
        CHECK(base[j] == 0, "all_spread_malloc(%zu, %zu) round %d: byte %zu not zeroed", nblocks, bs, round, j);
    for (size_t i = 0; i < nblocks; i++) {
        gptr_t g = spread_gptr(base, bs, i);
        CHECK(toproc(g) == (int)(i % (size_t)PROCS) && toaddr(g) == base + (i / (size_t)PROCS) * bs,
              "spread_gptr(block %zu of %zu, %zu bytes): process %d address %p", i, nblocks, bs, toproc(g), toaddr(g));
    }
    barrier();
    /* block i is written by process (i + 1) % PROCS, its owner's right neighbour */
    char *buf = malloc(bs + 1);
    for (size_t i = 0; i < nblocks; i++) {
        if ((int)((i + 1) % (size_t)PROCS) != MYPROC) continue;
        sc_fill(buf, bs, (uint32_t)(i * 131 + bs + (size_t)round));
        bulk_put(spread_gptr(base, bs, i), buf, bs);
    }
    sync();
    barrier();
    /* the owner finds block i = j * PROCS + MYPROC at local offset j * bs */
    for (size_t j = 0; j < mine; j++) {
        const size_t i = j * (size_t)PROCS + (size_t)MYPROC;
        size_t bad = sc_mismatch(base + j * bs, bs, (uint32_t)(i * 131 + bs + (size_t)round));
        CHECK(bad == bs, "block %zu of all_spread_malloc(%zu, %zu) is not at local offset %zu of process %d (byte %zu)",
              i, nblocks, bs, j * bs, MYPROC, bad);
    }
    free(buf);
    barrier();
    all_spread_free(base);
}

int splitc_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    same_everywhere(&data_var, "a global variable (.data)");
    same_everywhere(&bss_var, "a global variable (.bss)");
    CHECK(read_long(toglobal(PROCS - 1, &data_var)) == 0x1122334455667788L, "data_var at %d", PROCS - 1);
    write_long(toglobal((MYPROC + 1) % PROCS, &bss_var), 50 + MYPROC);
    barrier();
    CHECK(bss_var == 50 + (MYPROC + PROCS - 1) % PROCS, "bss_var = %ld", bss_var);

    /* layouts: one block per process, fewer blocks than processes, uneven tails, odd
     * block sizes, big blocks; twice each (the second time in reused, dirtied memory) */
    const size_t shapes[][2] = {{(size_t)PROCS, 8}, {1, 16}, {(size_t)PROCS * 3 + 1, 24}, {7, 4096},
                                {(size_t)PROCS * 5 + 2, 12}, {(size_t)PROCS * 2, 65536 + 8}, {3, 1}};
    for (int round = 0; round < 2; round++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) test_spread(shapes[s][0], shapes[s][1], round);

    /* all_malloc: each process writes its number into slot MYPROC of everyone's block */
    for (int round = 0; round < 2; round++) {
        const size_t n = 64 * sizeof(long) + (size_t)round * 1000;
        long *b = all_malloc(n);
        CHECK(b != NULL, "all_malloc(%zu)", n);
        same_everywhere(b, "all_malloc");
        for (size_t i = 0; i < n / sizeof(long); i++) CHECK(b[i] == 0, "all_malloc(%zu) round %d not zeroed at %zu", n, round, i);
        barrier();
        for (int q = 0; q < PROCS; q++) put_long(toglobal(q, &b[MYPROC]), 7000L * q + MYPROC + round);
        sync();
        barrier();
        for (int w = 0; w < PROCS; w++) CHECK(b[w] == 7000L * MYPROC + w + round, "all_malloc block: slot %d = %ld", w, b[w]);
        for (int k = PROCS; k < 64; k++) b[k] = -1; /* dirty: the next round must get zeroed memory */
        barrier();
        all_free(b);
    }

    /* more than the heap holds: NULL everywhere, and then the heap still works */
    void *huge = all_malloc((size_t)1 << 40);
    CHECK(huge == NULL, "all_malloc(1 TiB) = %p", huge);
    void *huge2 = all_spread_malloc((size_t)PROCS << 20, (size_t)1 << 20);
    CHECK(huge2 == NULL, "all_spread_malloc(1 TiB) = %p", huge2);
    void *huge3 = all_malloc(SIZE_MAX);
    CHECK(huge3 == NULL, "all_malloc(SIZE_MAX) = %p", huge3);
    void *huge4 = all_spread_malloc(SIZE_MAX, 16);
    CHECK(huge4 == NULL, "all_spread_malloc(SIZE_MAX, 16) = %p", huge4);
    long *after = all_malloc(sizeof(long));
    CHECK(after != NULL, "all_malloc after a refused one");
    all_free(after);
    return sc_done("sc_memory");
}
