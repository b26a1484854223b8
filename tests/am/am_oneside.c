/*
 * am_oneside: one-sided mapping across processes (softvia-run -n N, N >= 2).
 *
 * Rank 0 maps nobody. Every other rank maps rank 0 only and sends it short, medium and
 * long requests; rank 0's handlers check what came (data, source endpoint) and reply,
 * so the replies travel over connections rank 0 never asked for. Rank 0 does not poll
 * for its first 200 ms: the others' first requests find it busy.
 */
#include <softvia_boot.h>

#include "am_test.h"

enum { TAG = 0x0e51de, SEG = 1 << 16, SHORTS = 300, MEDIUM = 1000, LONG = 4096, BOOT_MS = 30000 };

static eb_t eb;
static ep_t ep;
static en_t *names;
static int rank, size;
static char seg[SEG];
static volatile int got_short, got_medium, got_long, replies;

static uint8_t pattern(size_t i, int seed) { return (uint8_t)(i * 7 + (size_t)seed * 13 + 1); }

static int source_rank(void *token) {
    en_t src;
    if (AM_GetSourceEndpoint(token, &src) != AM_OK) return -1;
    for (int r = 0; r < size; r++)
        if (memcmp(&src, &names[r], sizeof src) == 0) return r;
    return -1;
}

/* rank 0 */
static void on_short(void *token, int from, int v) {
    EXPECT(source_rank(token) == from, "short request says rank %d, source is rank %d", from, source_rank(token));
    got_short++;
    AM_Reply2(token, 10, from, v + 1);
}
static void on_medium(void *token, void *buf, size_t n, int from) {
    int ok = n == MEDIUM && source_rank(token) == from;
    for (size_t i = 0; ok && i < n; i++) ok = ((uint8_t *)buf)[i] == pattern(i, from);
    EXPECT(ok, "medium request from rank %d: %zu bytes, data or source wrong", from, n);
    got_medium++;
    AM_ReplyI1(token, 11, buf, n, from);
}
static void on_long(void *token, void *buf, size_t n, int from) {
    int ok = n == LONG && buf == seg + (size_t)from * LONG;
    for (size_t i = 0; ok && i < n; i++) ok = ((uint8_t *)buf)[i] == pattern(i, from + 50);
    EXPECT(ok, "long request from rank %d: %zu bytes at %p, data or place wrong", from, n, buf);
    got_long++;
    AM_Reply1(token, 12, from);
}

/* ranks >= 1 */
static volatile int want_v;
static void short_reply(void *token, int from, int v) {
    (void)token;
    EXPECT(from == rank && v == want_v, "short reply %d/%d, want %d/%d", from, v, rank, want_v);
    replies++;
}
static void medium_reply(void *token, void *buf, size_t n, int from) {
    (void)token;
    int ok = n == MEDIUM && from == rank;
    for (size_t i = 0; ok && i < n; i++) ok = ((uint8_t *)buf)[i] == pattern(i, rank);
    EXPECT(ok, "medium reply of %zu bytes wrong", n);
    replies++;
}
static void long_reply(void *token, int from) {
    (void)token;
    EXPECT(from == rank, "long reply for rank %d", from);
    replies++;
}

static void wait_replies(int want, const char *what) {
    if (!at_poll_until(eb, &replies, want, 20000)) FATAL("timed out waiting for %s (%d of %d)", what, replies, want);
}

int main(void) {
    char prog[64];
    if (sv_boot_init(&rank, &size) != 0) return T_FAIL;
    snprintf(prog, sizeof prog, "am_oneside[rank %d/%d]", rank, size);
    at_init(prog, 100);
    if (size < 2) {
        printf("needs softvia-run -n 2 or more\n");
        return T_SKIP;
    }
    AM_CHECK(AM_Init());
    AM_CHECK(AM_AllocateBundle(AM_SEQ, &eb));
    en_t me;
    AM_CHECK(AM_AllocateEndpoint(eb, &ep, &me));
    AM_CHECK(AM_SetTag(ep, TAG));
    AM_CHECK(AM_SetSeg(ep, seg, SEG));
    names = calloc((size_t)size, sizeof *names);
    if (!names || sv_boot_allgather(&me, sizeof me, names, BOOT_MS) != 0) FATAL("exchanging endpoint names");

    if (rank == 0) {
        th_phase("serving ranks that mapped us (we map nobody)");
        AM_CHECK(AM_SetHandler(ep, 1, on_short));
        AM_CHECK(AM_SetHandler(ep, 2, on_medium));
        AM_CHECK(AM_SetHandler(ep, 3, on_long));
        usleep(200000); /* busy: the first knocks come while nobody polls */
        int others = size - 1;
        volatile int *counters[] = {&got_short, &got_medium, &got_long};
        int wants[] = {others * SHORTS, others, others};
        for (int c = 0; c < 3; c++)
            if (!at_poll_until(eb, counters[c], wants[c], 30000))
                FATAL("timed out: %d of %d requests of kind %d", *counters[c], wants[c], c);
        EXPECT(AM_GetTranslationInuse(ep, 1) == AM_ERR_RESOURCE, "rank 0 has a translation it never made");
        /* keep polling (replies must leave) until every rank has its replies */
        for (int r = 1; r < size; r++) {
            char key[32];
            snprintf(key, sizeof key, "oneside-done-%d", r);
            int flag = 0;
            uint64_t end = at_now_ns() + 30000000000ull;
            while (sv_boot_get(key, &flag, sizeof flag, NULL, 0) != 0) {
                AM_Poll(eb);
                if (at_now_ns() > end) FATAL("rank %d never finished", r);
            }
        }
    } else {
        th_phase("requests to a rank that never maps us");
        AM_CHECK(AM_SetHandler(ep, 10, short_reply));
        AM_CHECK(AM_SetHandler(ep, 11, medium_reply));
        AM_CHECK(AM_SetHandler(ep, 12, long_reply));
        AM_CHECK(AM_Map(ep, 0, names[0], TAG));
        uint64_t t0 = at_now_ns();
        for (int i = 0; i < SHORTS; i++) {
            want_v = rank * 1000 + i + 1;
            AM_CHECK(AM_Request2(ep, 0, 1, rank, rank * 1000 + i));
            wait_replies(i + 1, "a short reply");
            if (i == 0) printf("%s: first reply after %.1f ms\n", prog, (at_now_ns() - t0) / 1e6);
        }
        static uint8_t buf[LONG];
        for (size_t i = 0; i < MEDIUM; i++) buf[i] = pattern(i, rank);
        AM_CHECK(AM_RequestI1(ep, 0, 2, buf, MEDIUM, rank));
        wait_replies(SHORTS + 1, "the medium reply");
        for (size_t i = 0; i < LONG; i++) buf[i] = pattern(i, rank + 50);
        AM_CHECK(AM_RequestXfer1(ep, 0, (uintptr_t)rank * LONG, 3, buf, LONG, rank));
        wait_replies(SHORTS + 2, "the long reply");
        char key[32];
        snprintf(key, sizeof key, "oneside-done-%d", rank);
        int one = 1;
        if (sv_boot_put(key, &one, sizeof one) != 0) FATAL("sv_boot_put");
    }
    th_phase("teardown");
    if (sv_boot_barrier(BOOT_MS) != 0) FATAL("final barrier");
    AM_CHECK(AM_Terminate());
    free(names);
    return th_result();
}
