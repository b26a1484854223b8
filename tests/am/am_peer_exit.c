/*
 * am_peer_exit: rank 1 dies (_exit, no clean-up) in the middle of a stream of requests
 * from rank 0. Rank 0 must not hang: within a few seconds its requests return
 * AM_ERR_NOT_SENT, and the requests that were in flight come back to handler 0 with
 * EUNREACHABLE. Rank 1 exits 0 (the launcher stops a job whose rank fails); rank 0's
 * status is the verdict.
 *   softvia-run -n 2 am_peer_exit [--mode short|long]
 */
#include "am_mp.h"

enum { SEG = 1 << 20 };
static volatile int served, replies, unreachable, other_returned;
static void req(void *token, int i) {
    served++;
    if (served == 500) _exit(0); /* die in the middle, replies owed */
    AM_Reply1(token, 2, i);
}
static void long_req(void *token, void *buf, size_t n, int i) {
    (void)buf;
    (void)n;
    served++;
    if (served == 50) _exit(0);
    AM_Reply1(token, 2, i);
}
static void rep(void *token, int i) { (void)token; (void)i; replies++; }
static void returned(int status, op_t opcode, void *token) {
    (void)opcode;
    (void)token;
    if (status == EUNREACHABLE) unreachable++;
    else other_returned++;
}

int main(int argc, char **argv) {
    const char *mode = "short";
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--mode")) mode = argv[i + 1];
    int is_long = !strcmp(mode, "long");
    mp_start("am_peer_exit", 2, SEG, 60);
    AM_CHECK(AM_SetHandler(mp_ep, 0, returned));
    AM_CHECK(AM_SetHandler(mp_ep, 1, req));
    AM_CHECK(AM_SetHandler(mp_ep, 2, rep));
    AM_CHECK(AM_SetHandler(mp_ep, 3, long_req));
    AM_CHECK(AMX_SPMDBarrier());
    if (mp_rank == 1) {
        th_phase("rank 1 serving until it dies");
        for (;;) AM_Poll(mp_eb);
    }
    th_phase("rank 0 sending to a rank that dies");
    static char buf[65536];
    uint64_t t0 = at_now_ns();
    int rc = AM_OK, sent = 0;
    while (rc == AM_OK) {
        rc = is_long ? AM_RequestXfer1(mp_ep, 1, 0, 3, buf, sizeof buf, sent) : AM_Request1(mp_ep, 1, 1, sent);
        if (rc == AM_OK) sent++;
        if (at_now_ns() - t0 > 20000000000ull) FATAL("still sending after 20 s: the death was not noticed");
    }
    double secs = (double)(at_now_ns() - t0) / 1e9;
    printf("am_peer_exit: %d requests sent, %d replies, then %s after %.2f s; %d came back EUNREACHABLE\n", sent, replies,
           AMX_ErrorString(rc), secs, unreachable);
    EXPECT(rc == AM_ERR_NOT_SENT, "the request after the death returned %s", AMX_ErrorString(rc));
    EXPECT(sent >= (is_long ? 49 : 499), "only %d requests went out before the death", sent);
    EXPECT(replies + unreachable == sent, "%d replies + %d returned != %d sent", replies, unreachable, sent);
    EXPECT(unreachable >= 1, "no request came back EUNREACHABLE");
    EXPECT(other_returned == 0, "%d returned with another status", other_returned);
    /* everything else about the dead rank answers at once, without hanging */
    AM_EXPECT_RC(AM_Request0(mp_ep, 1, 1), AM_ERR_NOT_SENT);
    AM_EXPECT_RC(AM_Poll(mp_eb), AM_OK);
    AM_EXPECT_RC(AMX_SPMDBarrier(), AM_ERR_NOT_SENT);
    AM_CHECK(AM_Terminate());
    return th_result();
}
