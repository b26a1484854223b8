/*
 * am_bulk: 2 ranks, both directions at once. Each rank sends the other medium messages
 * (every size class up to AM_MaxMedium) and long messages into the other's segment (up
 * to AM_MaxLong, at moving offsets), each carrying a checksum the handler verifies;
 * every long request is answered with a long reply that copies the data back into the
 * sender's segment, verified there too. Prints bandwidth.
 *   softvia-run -n 2 am_bulk [--rounds N]
 */
#include "am_mp.h"

enum { SEG = 4 << 20 };
static volatile int med_done, long_done, long_back, errors;

static uint32_t fnv(const void *p, size_t n) {
    const uint8_t *b = p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}
static void fill(void *p, size_t n, uint32_t seed) {
    uint8_t *b = p;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        b[i] = (uint8_t)(x >> 16);
    }
}
static void med_req(void *token, void *buf, size_t n, int sum, int want_n) {
    if ((int)n != want_n || (int)fnv(buf, n) != sum) {
        errors++;
        fprintf(stderr, "medium message of %zu bytes (want %d) failed its checksum\n", n, want_n);
    }
    med_done++;
    AM_Reply0(token, 3);
}
static void med_rep(void *token) { (void)token; }
static void long_req(void *token, void *buf, size_t n, int sum, int off) {
    char *seg = AMX_SPMDSegment();
    if ((char *)buf != seg + off || (int)fnv(buf, n) != sum) {
        errors++;
        fprintf(stderr, "long message of %zu bytes at %d failed its check\n", n, off);
    }
    long_done++;
    /* copy it back to the same offset of the sender's segment, in the other half */
    AM_ReplyXfer2(token, (uintptr_t)off + SEG / 2, 5, buf, n, sum, off + SEG / 2);
}
static void long_rep(void *token, void *buf, size_t n, int sum, int off) {
    (void)token;
    char *seg = AMX_SPMDSegment();
    if ((char *)buf != seg + off || (int)fnv(buf, n) != sum) {
        errors++;
        fprintf(stderr, "long reply of %zu bytes at %d failed its check\n", n, off);
    }
    long_back++;
}

int main(int argc, char **argv) {
    int rounds = 50;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    mp_start("am_bulk", 2, SEG, 100);
    AM_CHECK(AM_SetHandler(mp_ep, 1, med_req));
    AM_CHECK(AM_SetHandler(mp_ep, 3, med_rep));
    AM_CHECK(AM_SetHandler(mp_ep, 4, long_req));
    AM_CHECK(AM_SetHandler(mp_ep, 5, long_rep));
    AM_CHECK(AMX_SPMDBarrier());
    int peer = 1 - mp_rank;
    static char src[65536];
    size_t msizes[] = {1, 8, 100, 1000, 2048, 4095, 4096};
    int nm = (int)(sizeof msizes / sizeof *msizes);
    th_phase("medium messages, both directions");
    uint64_t t0 = at_now_ns();
    size_t mbytes = 0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < nm; i++) {
            size_t n = msizes[i];
            fill(src, n, (uint32_t)(r * 100 + i + mp_rank * 7));
            AM_CHECK(AM_RequestI2(mp_ep, peer, 1, src, n, (int)fnv(src, n), (int)n));
            mbytes += n;
        }
    mp_poll_until(&med_done, rounds * nm, "medium messages");
    double ms = (double)(at_now_ns() - t0) / 1e9;
    th_phase("long messages, both directions");
    size_t lsizes[] = {1, 4096, 8192, 30000, 65536};
    int nl = (int)(sizeof lsizes / sizeof *lsizes);
    t0 = at_now_ns();
    size_t lbytes = 0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < nl; i++) {
            size_t n = lsizes[i];
            /* apart from the destinations of the messages still in flight (up to the long
             * channel's credits, and as many replies): a long payload lands before the
             * handlers of earlier messages have run */
            int off = (int)(((size_t)(r * nl + i) * 65536) % (SEG / 2));
            fill(src, n, (uint32_t)(r * 1000 + i + mp_rank * 13));
            AM_CHECK(AM_RequestXfer2(mp_ep, peer, (uintptr_t)off, 4, src, n, (int)fnv(src, n), off));
            lbytes += n;
        }
    mp_poll_until(&long_done, rounds * nl, "long messages");
    mp_poll_until(&long_back, rounds * nl, "long replies");
    double ls = (double)(at_now_ns() - t0) / 1e9;
    AM_CHECK(AMX_SPMDBarrier());
    EXPECT(errors == 0, "%d messages failed their checks", errors);
    printf("am_bulk: medium %.1f MB/s, long %.1f MB/s (each direction, with checks)\n", mbytes / ms / 1e6,
           lbytes / ls / 1e6);
    return mp_finish();
}
