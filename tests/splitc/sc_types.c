/* sc_types -- read, write, get, put and store of the seven basic types, to every process
 * (this one too: local memory), with values whose bytes all differ (a wrong byte order, a
 * truncation or a sign lost shows), guards around every target (a wrong size shows);
 * the global-pointer calls (toglobal, tolocal, toproc, toaddr, gptr_add, is_local,
 * gptr_eq); memory made global by hand (splitc_make_global / unmake); completion of
 * write and put+sync seen by a third process; sync() with <unistd.h> included before
 * splitc.h (here) and after it (sc_types_after.c). */
#include <unistd.h> /* before splitc.h on purpose: its sync() must still be Split-C's */

#include <limits.h>
#include <stdlib.h>

#include "sc_test.h"

#define SC_MAXP 16
#define NSLOT 6 /* dst slots per writer: 0 guard, 1 write, 2 put, 3 store, 4-5 guards */

int sc_get_after_sync(gptr_t src, int sentinel); /* sc_types_after.c */

/* Values: tag says who wrote it to whom (or whose source it is), k which slot. Even k
 * gives a positive value whose bytes differ, odd k a negative one with the top bits
 * set; every value needs all of its type's bytes. */
#define V_char(tag, k) ((char)((k) & 1 ? -100 + (tag) + (k) : 0x21 + (tag) * 3 + (k)))
#define V_short(tag, k) ((short)((k) & 1 ? -0x4321 - (tag) - (k) : 0x1234 + (tag) * 0x0101 + (k) * 0x1000))
#define V_int(tag, k) ((int)((k) & 1 ? INT_MIN + 7 + (tag) + (k) : 0x12345678 + (tag) * 0x01010101 + (k)))
#define V_long(tag, k) ((long)((k) & 1 ? LONG_MIN + (tag) + (k) : 0x0123456789ABCDEFL + (tag) * 0x0100000001L + (k)))
#define V_longlong(tag, k) \
    ((long long)((k) & 1 ? LLONG_MIN + 3 + (tag) + (k) : 0x7EDCBA9876543210LL - (tag) * 0x0100010001LL - (k)))
#define V_float(tag, k) ((float)((k) & 1 ? -(1.0f / 3.0f) * (float)((tag) + 1) * (float)((k) + 1) : 1.5f + (float)(tag) * 1024.25f + (float)(k)))
#define V_double(tag, k) ((double)((k) & 1 ? -1.0e300 / (double)((tag) + (k) + 1) : 1.0 / 3.0 + (double)(tag) * 1.0e10 + (double)(k)))

#define GUARD_TAG 99
#define TAG(w, q) ((w) * SC_MAXP + (q))

/* One test per type: every process reads and gets every process's sources, and writes,
 * puts and stores into its own slots at every process; each owner checks what landed. */
#define DEF_TYPE(name, T, fmt, cast)                                                                   \
    T src_##name[NSLOT];                                                                               \
    T dst_##name[SC_MAXP][NSLOT];                                                                      \
    static int same_##name(T a, T b) { return memcmp(&a, &b, sizeof a) == 0; }                         \
    static void test_##name(void) {                                                                    \
        for (int k = 0; k < NSLOT; k++) src_##name[k] = V_##name(MYPROC, k);                           \
        for (int w = 0; w < SC_MAXP; w++)                                                              \
            for (int k = 0; k < NSLOT; k++) dst_##name[w][k] = V_##name(GUARD_TAG, k);                 \
        barrier();                                                                                     \
        for (int i = 0; i < PROCS; i++) {                                                              \
            const int q = (MYPROC + i) % PROCS; /* start with the neighbour, end with ourselves */     \
            for (int k = 0; k < NSLOT; k++) {                                                          \
                T v = read_##name(toglobal(q, &src_##name[k]));                                        \
                CHECK(same_##name(v, V_##name(q, k)), "read_" #name " from %d slot %d: " fmt           \
                      " want " fmt, q, k, cast v, cast V_##name(q, k));                                \
            }                                                                                          \
            T got[NSLOT + 1];                                                                          \
            for (int k = 0; k <= NSLOT; k++) got[k] = V_##name(GUARD_TAG, k);                          \
            for (int k = 0; k < NSLOT; k++) get_##name(&got[k], toglobal(q, &src_##name[k]));          \
            sync();                                                                                    \
            for (int k = 0; k < NSLOT; k++)                                                            \
                CHECK(same_##name(got[k], V_##name(q, k)), "get_" #name " from %d slot %d: " fmt       \
                      " want " fmt, q, k, cast got[k], cast V_##name(q, k));                           \
            CHECK(same_##name(got[NSLOT], V_##name(GUARD_TAG, NSLOT)), "get_" #name " wrote past its " \
                  "destination");                                                                      \
            const gptr_t d = toglobal(q, &dst_##name[MYPROC][0]);                                      \
            write_##name(gptr_add(d, 1 * (ptrdiff_t)sizeof(T)), V_##name(TAG(MYPROC, q), 1));          \
            /* write returns once the value is there: read it straight back */                        \
            T back = read_##name(gptr_add(d, 1 * (ptrdiff_t)sizeof(T)));                               \
            CHECK(same_##name(back, V_##name(TAG(MYPROC, q), 1)), "write_" #name " to %d then read: "  \
                  fmt, q, cast back);                                                                  \
            put_##name(gptr_add(d, 2 * (ptrdiff_t)sizeof(T)), V_##name(TAG(MYPROC, q), 2));            \
            store_##name(gptr_add(d, 3 * (ptrdiff_t)sizeof(T)), V_##name(TAG(MYPROC, q), 3));          \
        }                                                                                              \
        sync();                                                                                        \
        all_store_sync();                                                                              \
        for (int w = 0; w < PROCS; w++) {                                                              \
            for (int k = 0; k < NSLOT; k++) {                                                          \
                const int tag = k >= 1 && k <= 3 ? TAG(w, MYPROC) : GUARD_TAG;                         \
                const T want = V_##name(tag, k);                                                       \
                CHECK(same_##name(dst_##name[w][k], want), "%s_" #name " from %d (slot %d): " fmt      \
                      " want " fmt, k == 1 ? "write" : k == 2 ? "put" : k == 3 ? "store" : "guard of", \
                      w, k, cast dst_##name[w][k], cast want);                                         \
            }                                                                                          \
        }                                                                                              \
        barrier();                                                                                     \
    }
DEF_TYPE(char, char, "%d", (int))
DEF_TYPE(short, short, "%d", (int))
DEF_TYPE(int, int, "%d", (int))
DEF_TYPE(long, long, "%#lx", (unsigned long))
DEF_TYPE(longlong, long long, "%#llx", (unsigned long long))
DEF_TYPE(float, float, "%a", (double))
DEF_TYPE(double, double, "%a", (double))

/* ---- the global-pointer calls ------------------------------------------------------- */
char gp_area[64];
#define gp_target gp_area[24]

static void test_gptr_calls(void) {
    for (int q = 0; q < PROCS; q++) {
        gptr_t g = toglobal(q, &gp_target);
        CHECK(toproc(g) == q, "toproc %d want %d", toproc(g), q);
        CHECK(toaddr(g) == (void *)&gp_target, "toaddr %p want %p", toaddr(g), (void *)&gp_target);
        CHECK(is_local(g) == (q == MYPROC), "is_local(proc %d) = %d", q, is_local(g));
        CHECK(tolocal(g) == (q == MYPROC ? (void *)&gp_target : NULL), "tolocal(proc %d) = %p", q, tolocal(g));
        gptr_t h = gptr_add(g, 12);
        CHECK(toproc(h) == q && (char *)toaddr(h) == (char *)&gp_target + 12, "gptr_add +12");
        h = gptr_add(h, -20);
        CHECK(toproc(h) == q && (char *)toaddr(h) == (char *)&gp_target - 8, "gptr_add -20");
        CHECK(gptr_eq(gptr_add(h, 8), g) && !gptr_eq(h, g), "gptr_eq");
        /* an address never carries into the process number */
        gptr_t top = toglobal(q, (void *)(uintptr_t)(SPLITC_ADDR_MASK - 3));
        CHECK(toproc(gptr_add(top, 8)) == q, "gptr_add carried into the process: %d", toproc(gptr_add(top, 8)));
        CHECK(toproc(gptr_add(toglobal(q, (void *)16), -32)) == q, "gptr_add borrowed from the process");
    }
    /* the largest process number round-trips */
    gptr_t big = toglobal(SPLITC_MAX_PROCS, &gp_target);
    CHECK(toproc(big) == SPLITC_MAX_PROCS && toaddr(big) == (void *)&gp_target, "toglobal(%d)", SPLITC_MAX_PROCS);
    CHECK(MYPROC >= 0 && MYPROC < PROCS, "MYPROC %d PROCS %d", MYPROC, PROCS);
}

/* ---- memory made global by hand: a stack array and a malloc'd one ------------------- */
long made_addr[SC_MAXP][2]; /* where process q's two ranges are (published by q) */

static void test_make_global(void) {
    long stack_arr[3 * SC_MAXP];
    long *heap_arr = malloc(sizeof(long) * 3 * SC_MAXP);
    CHECK(heap_arr != NULL, "malloc");
    for (int i = 0; i < 3 * SC_MAXP; i++) stack_arr[i] = heap_arr[i] = -1;
    splitc_make_global(stack_arr, sizeof stack_arr);
    splitc_make_global(heap_arr, sizeof(long) * 3 * SC_MAXP);
    for (int q = 0; q < PROCS; q++) {
        write_long(toglobal(q, &made_addr[MYPROC][0]), (long)(uintptr_t)stack_arr);
        write_long(toglobal(q, &made_addr[MYPROC][1]), (long)(uintptr_t)heap_arr);
    }
    barrier();
    for (int q = 0; q < PROCS; q++) {
        gptr_t s = toglobal(q, (void *)(uintptr_t)made_addr[q][0]);
        gptr_t h = toglobal(q, (void *)(uintptr_t)made_addr[q][1]);
        const ptrdiff_t slot = (ptrdiff_t)sizeof(long) * 3 * MYPROC;
        write_long(gptr_add(s, slot + 8), 1000L * MYPROC + q); /* the middle of our three */
        put_long(gptr_add(h, slot + 8), 2000L * MYPROC + q);
        long c[2] = {0, 0};
        bulk_get(c, gptr_add(s, slot + 8), sizeof c);
        sync();
        CHECK(c[0] == 1000L * MYPROC + q && c[1] == -1, "bulk_get from %d's stack: %ld %ld", q, c[0], c[1]);
    }
    barrier();
    for (int w = 0; w < PROCS; w++) {
        CHECK(stack_arr[3 * w] == -1 && stack_arr[3 * w + 1] == 1000L * w + MYPROC && stack_arr[3 * w + 2] == -1,
              "stack array, writer %d: %ld %ld %ld", w, stack_arr[3 * w], stack_arr[3 * w + 1], stack_arr[3 * w + 2]);
        CHECK(heap_arr[3 * w] == -1 && heap_arr[3 * w + 1] == 2000L * w + MYPROC && heap_arr[3 * w + 2] == -1,
              "malloc'd array, writer %d: %ld %ld %ld", w, heap_arr[3 * w], heap_arr[3 * w + 1], heap_arr[3 * w + 2]);
    }
    barrier(); /* nobody uses them any more */
    splitc_unmake_global(stack_arr);
    splitc_unmake_global(heap_arr);
    free(heap_arr);
}

/* ---- completion seen by a third process (4 processes and more) ----------------------- */
int cw_value, cw_flag;

static void test_completion(void) {
    if (PROCS < 3) return;
    cw_value = 0;
    cw_flag = 0;
    barrier();
    for (int round = 1; round <= 20; round++) {
        if (MYPROC == 0) {
            /* write (or put + sync) to 1, then tell 2: 2 must see the value at 1 */
            if (round & 1) {
                write_int(toglobal(1, &cw_value), round);
            } else {
                put_int(toglobal(1, &cw_value), round);
                sync();
            }
            store_int(toglobal(2, &cw_flag), round);
        } else if (MYPROC == 2) {
            while (*(volatile int *)&cw_flag != round) splitc_poll();
            int v = read_int(toglobal(1, &cw_value));
            CHECK(v == round, "round %d: %s by 0 into 1 not complete when 0 went on: 1 has %d", round,
                  round & 1 ? "write_int" : "put_int + sync", v);
        }
        barrier();
    }
}

int sync_target = 0x5eed;

int splitc_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    CHECK(PROCS <= SC_MAXP, "at most %d processes", SC_MAXP);
    test_gptr_calls();
    test_char();
    test_short();
    test_int();
    test_long();
    test_longlong();
    test_float();
    test_double();
    test_make_global();
    test_completion();
    /* sync() from a file that includes <unistd.h> after splitc.h */
    sync_target = 0x5eed + MYPROC;
    barrier();
    for (int q = 0; q < PROCS; q++) {
        int v = sc_get_after_sync(toglobal(q, &sync_target), -7);
        CHECK(v == 0x5eed + q, "get_int + sync() (unistd.h after splitc.h) from %d: %#x", q, v);
    }
    /* and here, where <unistd.h> came first */
    int v = -7;
    get_int(&v, toglobal((MYPROC + 1) % PROCS, &sync_target));
    sync();
    CHECK(v == 0x5eed + (MYPROC + 1) % PROCS, "get_int + sync() (unistd.h before splitc.h): %#x", v);
    barrier();
    return sc_done("sc_types");
}
