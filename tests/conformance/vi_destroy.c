/*
 * vi_destroy: VipDestroyVi refuses (VIP_INVALID_STATE) while descriptors are outstanding
 * (posted, or completed but not yet taken back) and while the VI is connected or has a
 * connection pending; it succeeds once the VI is idle with empty queues.
 */
#include "helpers.h"

int main(void) {
    th_init("vi_destroy", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 16);
    char *sbuf = th_alloc(&e, 256), *rbuf = th_alloc(&e, 256);
    VIP_DESCRIPTOR *sd = th_desc(&e, 1), *rd = th_desc(&e, 1);

    th_phase("idle VI with a receive posted");
    VIP_VI_HANDLE x = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    th_set1(rd, e.mh, rbuf, 256);
    CHECK(VipPostRecv(x, rd, e.mh));
    EXPECT_RC(VipDestroyVi(x), VIP_INVALID_STATE);
    VIP_BOOLEAN se, re;
    CHECK(VipQueryVi(x, NULL, NULL, &se, &re));
    EXPECT(se == VIP_TRUE && re == VIP_FALSE, "queue flags: send %u recv %u", se, re);
    /* let a message consume it */
    VIP_VI_HANDLE y = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    th_connect_peer(&e, y, x, "d1");
    EXPECT_RC(VipDestroyVi(x), VIP_INVALID_STATE);
    EXPECT_RC(VipDestroyVi(y), VIP_INVALID_STATE); /* connected, queues empty */
    th_set1(sd, e.mh, sbuf, 100);
    CHECK(VipPostSend(y, sd, e.mh));
    th_send_done_must(y, sd, "send");
    /* completed but not taken back: still outstanding */
    VIP_DESCRIPTOR *d;
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    while (!(__atomic_load_n(&rd->CS.Status, __ATOMIC_ACQUIRE) & VIP_STATUS_DONE) && th_now_ms() < end)
        VipQueryVi(x, NULL, NULL, NULL, NULL);
    EXPECT(rd->CS.Status & VIP_STATUS_DONE, "receive never completed");

    th_phase("disconnect, then destroy");
    CHECK(VipDisconnect(y));
    EXPECT_RC(VipDestroyVi(y), VIP_SUCCESS);
    EXPECT(th_wait_state(x, VIP_STATE_ERROR, TH_WAIT_MS), "x state %s", th_state_name(th_state(x)));
    EXPECT_RC(VipDestroyVi(x), VIP_INVALID_STATE); /* rd still not taken back */
    EXPECT_RC(VipRecvDone(x, &d), VIP_SUCCESS);
    EXPECT(d == rd, "RecvDone gave %p", (void *)d);
    CHECK(VipDisconnect(x));
    EXPECT(th_state(x) == VIP_STATE_IDLE, "after disconnect %s", th_state_name(th_state(x)));
    EXPECT_RC(VipDestroyVi(x), VIP_SUCCESS);

    th_phase("connect pending");
    x = th_vi(&e, VIP_SERVICE_UNRELIABLE, NULL, NULL);
    th_addr l, r;
    CHECK(VipConnectPeerRequest(x, th_mkaddr(&l, &e.na, "lonely.a"), th_mkaddr(&r, &e.na, "lonely.b"), 60000));
    EXPECT_RC(VipDestroyVi(x), VIP_INVALID_STATE);
    CHECK(VipDisconnect(x));
    EXPECT_RC(VipDestroyVi(x), VIP_SUCCESS);

    th_phase("send outstanding on a connected VI");
    {
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_UNRELIABLE, &a, &b, "d2");
        th_set1(rd, e.mh, rbuf, 256);
        CHECK(VipPostRecv(b, rd, e.mh));
        th_set1(sd, e.mh, sbuf, 10);
        CHECK(VipPostSend(a, sd, e.mh));
        EXPECT_RC(VipDestroyVi(a), VIP_INVALID_STATE);
        th_send_done_must(a, sd, "send");
        th_recv_done_must(b, rd, "recv");
        EXPECT_RC(VipDestroyVi(a), VIP_INVALID_STATE); /* still connected */
        CHECK(VipDisconnect(a));
        CHECK(VipDisconnect(b));
        th_drain(a, 1000);
        th_drain(b, 1000);
        EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
        EXPECT_RC(VipDestroyVi(b), VIP_SUCCESS);
    }

    th_phase("the slot of a destroyed VI is reused cleanly");
    for (int i = 0; i < 20; i++) {
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_RELIABLE_DELIVERY, &a, &b, "reuse");
        th_set1(rd, e.mh, rbuf, 256);
        CHECK(VipPostRecv(b, rd, e.mh));
        th_set1(sd, e.mh, sbuf, 8);
        CHECK(VipPostSend(a, sd, e.mh));
        th_send_done_must(a, sd, "send");
        d = th_recv_done_must(b, rd, "recv");
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "round %d: recv status 0x%x", i, d->CS.Status);
        CHECK(VipDisconnect(a));
        CHECK(VipDisconnect(b));
        th_drain(a, 1000);
        th_drain(b, 1000);
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_close_env(&e);
    return th_result();
}
