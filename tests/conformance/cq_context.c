/*
 * cq_context: VipExtSetViContext gives a VI a word of the program's that its later
 * completion entries carry; VipExtCQDoneContext returns it beside the VI handle and the
 * queue. Several VIs on one CQ each bring their own word; a VI never given one brings
 * NULL; a word changed while entries wait in the CQ leaves those entries as they were
 * written. Bad handles and NULL outputs are refused.
 */
#include "helpers.h"

/* One completion from cq within the test's wait, else a failed check. */
static int take_ctx(VIP_CQ_HANDLE cq, VIP_VI_HANDLE *vi, VIP_BOOLEAN *rq, VIP_PVOID *ctx) {
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    VIP_RETURN r;
    while ((r = VipExtCQDoneContext(cq, vi, rq, ctx)) == VIP_NOT_DONE && th_now_ms() < end) {
    }
    EXPECT(r == VIP_SUCCESS, "VipExtCQDoneContext -> %s", th_rs(r));
    return r == VIP_SUCCESS;
}

/* n 8-byte messages from -> to, each received in buf + 64 i; their send completions on
 * the send CQ and receive completions on the receive CQ. */
static void exchange(th_env *e, VIP_VI_HANDLE from, VIP_VI_HANDLE to, char *buf, int n) {
    for (int i = 0; i < n; i++) {
        VIP_DESCRIPTOR *r = th_desc(e, 1), *s = th_desc(e, 1);
        th_set1(r, e->mh, buf + 64 * i, 64);
        CHECK(VipPostRecv(to, r, e->mh));
        th_set1(s, e->mh, buf + 2048 + 8 * i, 8);
        CHECK(VipPostSend(from, s, e->mh));
    }
}

int main(void) {
    th_init("cq_context", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 16);
    VIP_CQ_HANDLE scq, rcq;
    CHECK(VipCreateCQ(e.nic, 64, &scq));
    CHECK(VipCreateCQ(e.nic, 64, &rcq));
    VIP_VI_HANDLE a = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, scq, rcq);
    VIP_VI_HANDLE b = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, scq, rcq);
    th_connect_peer(&e, a, b, "ctx");
    char *buf = th_alloc(&e, 4096);
    static int obj_a, obj_b, obj_a2;
    VIP_VI_HANDLE who;
    VIP_BOOLEAN rq;
    VIP_PVOID ctx;
    VIP_DESCRIPTOR *d;

    th_phase("no word set: NULL");
    exchange(&e, a, b, buf, 1);
    if (take_ctx(scq, &who, &rq, &ctx))
        EXPECT(who == a && rq == VIP_FALSE && ctx == NULL, "scq: vi %p recv %u ctx %p", (void *)who, rq, ctx);
    if (take_ctx(rcq, &who, &rq, &ctx))
        EXPECT(who == b && rq == VIP_TRUE && ctx == NULL, "rcq: vi %p recv %u ctx %p", (void *)who, rq, ctx);
    th_send_done_must(a, NULL, "a's send");
    EXPECT_RC(VipRecvDone(b, &d), VIP_SUCCESS);

    th_phase("each VI brings its own word");
    CHECK(VipExtSetViContext(a, &obj_a));
    CHECK(VipExtSetViContext(b, &obj_b));
    exchange(&e, a, b, buf, 3);
    exchange(&e, b, a, buf + 512, 3);
    int seen_a = 0, seen_b = 0;
    for (int i = 0; i < 6; i++) {
        if (!take_ctx(scq, &who, &rq, &ctx)) break;
        EXPECT(rq == VIP_FALSE, "a send CQ entry says receive");
        EXPECT((who == a && ctx == &obj_a) || (who == b && ctx == &obj_b), "send: vi %p ctx %p", (void *)who, ctx);
        seen_a += who == a;
        seen_b += who == b;
    }
    for (int i = 0; i < 6; i++) {
        if (!take_ctx(rcq, &who, &rq, &ctx)) break;
        EXPECT(rq == VIP_TRUE, "a receive CQ entry says send");
        EXPECT((who == a && ctx == &obj_a) || (who == b && ctx == &obj_b), "recv: vi %p ctx %p", (void *)who, ctx);
        seen_a += who == a;
        seen_b += who == b;
    }
    EXPECT(seen_a == 6 && seen_b == 6, "entries of a %d, of b %d (want 6 each)", seen_a, seen_b);
    for (int i = 0; i < 3; i++) {
        EXPECT_RC(VipSendDone(a, &d), VIP_SUCCESS);
        EXPECT_RC(VipSendDone(b, &d), VIP_SUCCESS);
        EXPECT_RC(VipRecvDone(a, &d), VIP_SUCCESS);
        EXPECT_RC(VipRecvDone(b, &d), VIP_SUCCESS);
    }

    th_phase("a word changed while entries wait keeps those entries");
    exchange(&e, a, b, buf, 1);
    /* the send and the receive complete (steps through Done, which takes no CQ entry) */
    th_send_done_must(a, NULL, "a's send");
    th_recv_done_must(b, NULL, "b's receive");
    CHECK(VipExtSetViContext(a, &obj_a2));
    if (take_ctx(scq, &who, &rq, &ctx)) EXPECT(who == a && ctx == &obj_a, "old entry: ctx %p, want %p", ctx, (void *)&obj_a);
    if (take_ctx(rcq, &who, &rq, &ctx)) EXPECT(who == b && ctx == &obj_b, "b's entry: ctx %p", ctx);
    exchange(&e, a, b, buf, 1);
    if (take_ctx(scq, &who, &rq, &ctx)) EXPECT(who == a && ctx == &obj_a2, "new entry: ctx %p, want %p", ctx, (void *)&obj_a2);
    if (take_ctx(rcq, &who, &rq, &ctx)) EXPECT(who == b && ctx == &obj_b, "b's entry: ctx %p", ctx);
    th_send_done_must(a, NULL, "a's send");
    EXPECT_RC(VipRecvDone(b, &d), VIP_SUCCESS);

    th_phase("bad input");
    EXPECT_RC(VipExtSetViContext(NULL, &obj_a), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtSetViContext((VIP_VI_HANDLE)(uintptr_t)0x1234, &obj_a), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtCQDoneContext(NULL, &who, &rq, &ctx), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtCQDoneContext(scq, NULL, &rq, &ctx), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtCQDoneContext(scq, &who, NULL, &ctx), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtCQDoneContext(scq, &who, &rq, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtCQDoneContext(scq, &who, &rq, &ctx), VIP_NOT_DONE);

    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(b));
    CHECK(VipDestroyVi(a));
    CHECK(VipDestroyVi(b));
    EXPECT_RC(VipDestroyCQ(scq), VIP_SUCCESS);
    EXPECT_RC(VipDestroyCQ(rcq), VIP_SUCCESS);
    th_close_env(&e);
    return th_result();
}
