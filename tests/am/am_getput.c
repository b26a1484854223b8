/*
 * am_getput: word get and put through short messages (Split-C style). Every rank owns
 * an array of 64-bit words. Phase 1: each rank puts a value that names (writer, index)
 * into words of every rank (itself included) chosen by a seeded generator; a put's reply
 * acknowledges it. Barrier. Phase 2: each rank gets the words it wrote and checks them.
 *   softvia-run -n N am_getput [--ops N]
 */
#include "am_mp.h"

enum { WORDS = 4096 };
static long long words[WORDS];
static volatile int acks, gets_back;
static long long got_value;

static void put_req(void *token, int idx, int hi, int lo) {
    words[idx] = (long long)(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo);
    AM_Reply0(token, 2);
}
static void put_ack(void *token) { (void)token; acks++; }
static void get_req(void *token, int idx) {
    long long v = words[idx];
    AM_Reply2(token, 4, (int)(v >> 32), (int)(uint32_t)v);
}
static void get_rep(void *token, int hi, int lo) {
    (void)token;
    got_value = (long long)(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo);
    gets_back++;
}

static uint32_t rnd(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

int main(int argc, char **argv) {
    int ops = 1000;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--ops")) ops = atoi(argv[i + 1]);
    mp_start("am_getput", 0, 0, 100);
    AM_CHECK(AM_SetHandler(mp_ep, 1, put_req));
    AM_CHECK(AM_SetHandler(mp_ep, 2, put_ack));
    AM_CHECK(AM_SetHandler(mp_ep, 3, get_req));
    AM_CHECK(AM_SetHandler(mp_ep, 4, get_rep));
    AM_CHECK(AMX_SPMDBarrier());
    /* rank r writes only indexes i with i % size == r, so writers never collide */
    int per = WORDS / mp_size;
    if (ops > per) ops = per;
    th_phase("puts");
    uint32_t s = 12345u + (uint32_t)mp_rank;
    uint64_t t0 = at_now_ns();
    for (int k = 0; k < ops; k++) {
        int dest = (int)(rnd(&s) % (uint32_t)mp_size);
        int idx = k * mp_size + mp_rank;
        long long v = ((long long)mp_rank << 40) | ((long long)dest << 20) | idx;
        AM_CHECK(AM_Request3(mp_ep, dest, 1, idx, (int)(v >> 32), (int)(uint32_t)v));
    }
    mp_poll_until(&acks, ops, "put acknowledgements");
    double put_us = (double)(at_now_ns() - t0) / 1e3 / ops;
    AM_CHECK(AMX_SPMDBarrier());
    th_phase("gets");
    s = 12345u + (uint32_t)mp_rank;
    t0 = at_now_ns();
    int bad = 0;
    for (int k = 0; k < ops; k++) {
        int dest = (int)(rnd(&s) % (uint32_t)mp_size);
        int idx = k * mp_size + mp_rank;
        long long want = ((long long)mp_rank << 40) | ((long long)dest << 20) | idx;
        AM_CHECK(AM_Request1(mp_ep, dest, 3, idx));
        mp_poll_until(&gets_back, k + 1, "get reply"); /* blocking get: one at a time */
        if (got_value != want && bad++ < 5)
            EXPECT(got_value == want, "get of word %d at rank %d: %llx, want %llx", idx, dest,
                      (unsigned long long)got_value, (unsigned long long)want);
    }
    double get_us = (double)(at_now_ns() - t0) / 1e3 / ops;
    EXPECT(bad == 0, "%d gets returned wrong words", bad);
    printf("am_getput: %d puts (pipelined) %.3f us each, %d blocking gets %.3f us each\n", ops, put_us, ops, get_us);
    return mp_finish();
}
