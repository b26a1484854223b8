/* sc_via_gather_bad CALL POS -- a refused operation inside a gathered message must name
 * its own call (docs/splitc.md, "Gathering"). Process 0 makes, back to back to process 1
 * (so that the via back ends gather them into one K_GATHER), split-phase puts, gets and
 * stores of other calls into valid global memory, with CALL aimed at an address that is
 * not global memory at process 1 among them: first, in the middle, or last (POS). Then it
 * syncs and polls for 5 s. The job must stop with the runtime's message naming CALL, the
 * process, the address and the length (sc_via_gather_bad.sh checks it, sc_expect.sh
 * compares it with the "sc-expect-line:" printed here); "went through" means it did not.
 *
 * CALL: put_T, get_T or store_T, T one of char short int long longlong float double. */
#include <stdlib.h>
#include <time.h>

#include "sc_test.h"

#define BAD_ADDR 0x300000001230ull /* nothing maps it (as sc_bad's "unmapped") */

static long cells[16]; /* global (data segment), at the same address everywhere */
static char gdst[16][8];

/* The valid operations around the bad one: other calls, other types. */
static void before(int t) {
    put_int(toglobal(t, &cells[0]), 11);
    get_long((long *)gdst[0], toglobal(t, &cells[1]));
    store_short(toglobal(t, &cells[2]), 12);
    put_double(toglobal(t, &cells[3]), 1.5);
    get_char(gdst[1], toglobal(t, &cells[4]));
}
static void after(int t) {
    store_longlong(toglobal(t, &cells[5]), 13);
    put_short(toglobal(t, &cells[6]), 14);
    get_float((float *)gdst[2], toglobal(t, &cells[7]));
    store_char(toglobal(t, &cells[8]), 15);
    put_long(toglobal(t, &cells[9]), 16);
}

#define TYPES(X) X(char, char) X(short, short) X(int, int) X(long, long) X(long long, longlong) X(float, float) X(double, double)

/* Makes CALL on g; returns its size, 0 if CALL is unknown. */
static size_t bad_call(const char *call, gptr_t g) {
    static char dst[8];
#define X(T, n)                                                 \
    if (!strcmp(call, "put_" #n)) return put_##n(g, (T)1), sizeof(T);     \
    if (!strcmp(call, "get_" #n)) return get_##n((T *)dst, g), sizeof(T);  \
    if (!strcmp(call, "store_" #n)) return store_##n(g, (T)1), sizeof(T);
    TYPES(X)
#undef X
    return 0;
}

int splitc_main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[2], "first") && strcmp(argv[2], "middle") && strcmp(argv[2], "last"))) {
        fprintf(stderr, "usage: sc_via_gather_bad CALL first|middle|last\n");
        return 2;
    }
    CHECK(PROCS == 2, "run with 2 processes");
    const char *call = argv[1], *pos = argv[2];
    barrier();
    if (MYPROC == 0) {
        const gptr_t g = toglobal(1, (void *)(uintptr_t)BAD_ADDR);
        size_t n = 0;
#define X(T, nm) if (!strcmp(call, "put_" #nm) || !strcmp(call, "get_" #nm) || !strcmp(call, "store_" #nm)) n = sizeof(T);
        TYPES(X)
#undef X
        if (!n) {
            fprintf(stderr, "sc_via_gather_bad: unknown call '%s'\n", call);
            splitc_exit(2);
        }
        printf("sc-expect-line: %s: global pointer to process 1, address %#llx (%zu bytes)\n", call,
               (unsigned long long)BAD_ADDR, n);
        fflush(stdout);
        if (strcmp(pos, "first")) before(1);
        bad_call(call, g);
        if (strcmp(pos, "last")) after(1);
        sync();
        /* A store's refusal comes when it comes: give it every chance to arrive (5 s). */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            splitc_poll();
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 5000000000L);
        printf("sc_via_gather_bad: %s (%s) went through\n", call, pos);
        fflush(stdout);
        splitc_exit(4);
    }
    for (;;) splitc_poll(); /* the owner serves until the job stops */
}
