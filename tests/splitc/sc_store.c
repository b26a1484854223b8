/* sc_store -- signalling stores and their synchronisation:
 *  - splitc_poll: a process spins on a flag that another's store sets (and answers it);
 *  - store_sync(bytes): waits for stores that are sent only after it started waiting,
 *    counts bulk_store bytes and a process's own stores, and takes what it waited for off
 *    the count (a second store_sync waits for new bytes);
 *  - reset_store_sync: bytes stored before it do not count after it;
 *  - all_store_sync: every process stores into every other (scalars and bulk, uneven
 *    counts); when it returns everything has landed, everywhere.
 * Each process stores to its right neighbour (itself when alone). */
#include <time.h>

#include "sc_test.h"

#define K 50
volatile int flag_g;  /* set by the left neighbour's store */
volatile int reply_g; /* set by the right neighbour's store, the answer */
int box_g[4 * K];     /* the left neighbour's stores land here */
long grid_g[64][8];   /* all_store_sync: [writer][k] */

static void pause_ms(int ms) {
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

int splitc_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    const int right = (MYPROC + 1) % PROCS, left = (MYPROC + PROCS - 1) % PROCS;
    CHECK(PROCS <= 64, "at most 64 processes");

    /* splitc_poll: a ring of flags; each process spins until its left neighbour's store
     * has set its flag, then answers with a store into the neighbour's reply. */
    for (int round = 1; round <= 5; round++) {
        if (MYPROC == 0) store_int(toglobal(right, (void *)&flag_g), round);
        while (flag_g != round) splitc_poll();
        if (MYPROC != 0) store_int(toglobal(right, (void *)&flag_g), round);
        store_int(toglobal(left, (void *)&reply_g), -round);
        while (reply_g != -round) splitc_poll();
    }
    barrier();
    reset_store_sync(); /* the flags' stores are not counted below */
    barrier();

    /* store_sync waits: the neighbour stores only after a pause, well after we wait. */
    for (int i = 0; i < 4 * K; i++) box_g[i] = -1;
    barrier();
    pause_ms(30);
    for (int i = 0; i < K; i++) store_int(toglobal(right, &box_g[i]), 1000 * MYPROC + i);
    store_sync(K * sizeof(int));
    for (int i = 0; i < K; i++)
        CHECK(box_g[i] == 1000 * left + i, "store_sync returned before store %d landed: %d", i, box_g[i]);

    /* bulk stores count by bytes; a second store_sync waits for new bytes only */
    int chunk[K];
    for (int i = 0; i < K; i++) chunk[i] = 2000 * MYPROC + i;
    barrier();
    pause_ms(20);
    bulk_store(toglobal(right, &box_g[K]), chunk, sizeof chunk);
    store_sync(sizeof chunk);
    for (int i = 0; i < K; i++)
        CHECK(box_g[K + i] == 2000 * left + i, "store_sync (bulk_store) returned early: box[%d] = %d", K + i,
              box_g[K + i]);
    barrier();
    pause_ms(20);
    store_int(toglobal(right, &box_g[2 * K]), 31337 + MYPROC);
    store_sync(sizeof(int)); /* had the count not dropped the bytes above, this returns at once */
    CHECK(box_g[2 * K] == 31337 + left, "second store_sync did not wait: %d", box_g[2 * K]);

    /* reset_store_sync: stores that landed before it no longer count. The neighbour
     * stores K ints; we see them land (polling), reset, and then store_sync must wait
     * for the next batch, which comes after a pause. */
    barrier();
    for (int i = 0; i < K; i++) store_int(toglobal(right, &box_g[3 * K + i]), 4000 + i);
    for (int i = 0; i < K; i++)
        while (*(volatile int *)&box_g[3 * K + i] != 4000 + i) splitc_poll();
    reset_store_sync();
    barrier();
    pause_ms(30);
    for (int i = 0; i < K; i++) store_int(toglobal(right, &box_g[3 * K + i]), 5000 + MYPROC * 10 + i);
    store_sync(K * sizeof(int));
    for (int i = 0; i < K; i++)
        CHECK(box_g[3 * K + i] == 5000 + left * 10 + i,
              "reset_store_sync did not forget earlier stores: store_sync returned with box[%d] = %d", 3 * K + i,
              box_g[3 * K + i]);

    /* all_store_sync: every process stores (q + 1) longs into every process q, half as
     * scalars, half as one bulk store, then all wait for everything. */
    barrier();
    for (int w = 0; w < 64; w++)
        for (int k = 0; k < 8; k++) grid_g[w][k] = -1;
    barrier();
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < PROCS; i++) {
            const int q = (MYPROC + i) % PROCS;
            const int cnt = (q + r) % 8 + 1;
            long vals[8];
            for (int k = 0; k < cnt; k++) vals[k] = 100000L * r + 1000L * MYPROC + 10L * q + k;
            const int half = cnt / 2;
            for (int k = 0; k < half; k++) store_long(toglobal(q, &grid_g[MYPROC][k]), vals[k]);
            bulk_store(toglobal(q, &grid_g[MYPROC][half]), &vals[half], sizeof(long) * (size_t)(cnt - half));
        }
        all_store_sync();
        for (int w = 0; w < PROCS; w++) {
            const int cnt = (MYPROC + r) % 8 + 1;
            for (int k = 0; k < cnt; k++)
                CHECK(grid_g[w][k] == 100000L * r + 1000L * w + 10L * MYPROC + k,
                      "all_store_sync round %d returned before %d's store %d landed: %ld", r, w, k, grid_g[w][k]);
        }
        barrier(); /* nobody stores the next round into a grid still being checked */
    }
    /* all_store_sync starts the count from 0: one more store, one store_sync. */
    store_int(toglobal(right, &box_g[0]), 777 + MYPROC);
    store_sync(sizeof(int));
    CHECK(box_g[0] == 777 + left, "store_sync after all_store_sync: %d", box_g[0]);
    barrier();
    return sc_done("sc_store");
}
