/*
 * cq_completions: VipCQDone / VipCQWait name the VI and the queue (RecvQueue) of every
 * completion on a queue bound to the CQ, and nothing for unbound queues; one VI may
 * have one queue bound and the other not; several VIs share a CQ; error completions
 * (flushed descriptors) are reported too. VipExtCQTake takes what is there without
 * stepping the NIC.
 */
#include "helpers.h"

static int take(VIP_CQ_HANDLE cq, VIP_VI_HANDLE *vi, VIP_BOOLEAN *rq, int wait) {
    VIP_RETURN r = wait ? VipCQWait(cq, TH_WAIT_MS, vi, rq) : VipCQDone(cq, vi, rq);
    if (r == VIP_SUCCESS) return 1;
    if (wait) TH_FAILMSG("VipCQWait -> %s", th_rs(r));
    return 0;
}

/* m receives on b (64 bytes each at buf + 64 i), then m 1-byte sends from a to them. */
static void post_burst(th_env *e, VIP_VI_HANDLE a, VIP_VI_HANDLE b, char *buf, int m, VIP_DESCRIPTOR **s,
                       VIP_DESCRIPTOR **r) {
    for (int i = 0; i < m; i++) {
        s[i] = th_desc(e, 1);
        r[i] = th_desc(e, 1);
        th_set1(r[i], e->mh, buf + 64 * i, 64);
        CHECK(VipPostRecv(b, r[i], e->mh));
    }
    for (int i = 0; i < m; i++) {
        th_set1(s[i], e->mh, buf + 2048 + i, 1);
        CHECK(VipPostSend(a, s[i], e->mh));
    }
}

int main(void) {
    th_init("cq_completions", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 16);
    VIP_CQ_HANDLE scq, rcq;
    CHECK(VipCreateCQ(e.nic, 64, &scq));
    CHECK(VipCreateCQ(e.nic, 64, &rcq));
    /* a: both queues bound (to different CQs); b: receive bound, send unbound */
    VIP_VI_HANDLE a = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, scq, rcq);
    VIP_VI_HANDLE b = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, rcq);
    th_connect_peer(&e, a, b, "cq");
    char *buf = th_alloc(&e, 4096);
    VIP_DESCRIPTOR *sd = th_desc(&e, 1), *rd = th_desc(&e, 1), *sd2 = th_desc(&e, 1), *rd2 = th_desc(&e, 1);
    VIP_VI_HANDLE who;
    VIP_BOOLEAN rq;
    VIP_DESCRIPTOR *d;

    for (int wait = 0; wait < 2; wait++) {
        th_phase(wait ? "a -> b, CQWait" : "a -> b, CQDone");
        th_set1(rd, e.mh, buf, 1024);
        CHECK(VipPostRecv(b, rd, e.mh));
        th_set1(sd, e.mh, buf + 2048, 100);
        CHECK(VipPostSend(a, sd, e.mh));
        /* the send completion on scq names a's send queue */
        uint64_t end = th_now_ms() + TH_WAIT_MS;
        int got = 0;
        while (!(got = take(scq, &who, &rq, wait)) && th_now_ms() < end) {
        }
        EXPECT(got && who == a && rq == VIP_FALSE, "scq: got %d vi %p recv %u (a=%p)", got, (void *)who, rq, (void *)a);
        EXPECT_RC(VipSendDone(a, &d), VIP_SUCCESS);
        end = th_now_ms() + TH_WAIT_MS;
        while (!(got = take(rcq, &who, &rq, wait)) && th_now_ms() < end) {
        }
        EXPECT(got && who == b && rq == VIP_TRUE, "rcq: got %d vi %p recv %u (b=%p)", got, (void *)who, rq, (void *)b);
        EXPECT_RC(VipRecvDone(b, &d), VIP_SUCCESS);
        EXPECT(d == rd && d->CS.Length == 100, "recv desc %p len %u", (void *)d, d->CS.Length);

        th_phase(wait ? "b -> a, CQWait" : "b -> a, CQDone");
        th_set1(rd2, e.mh, buf, 1024);
        CHECK(VipPostRecv(a, rd2, e.mh));
        th_set1(sd2, e.mh, buf + 2048, 7);
        CHECK(VipPostSend(b, sd2, e.mh));
        th_send_done_must(b, sd2, "b's unbound send");
        end = th_now_ms() + TH_WAIT_MS;
        while (!(got = take(rcq, &who, &rq, wait)) && th_now_ms() < end) {
        }
        EXPECT(got && who == a && rq == VIP_TRUE, "rcq: got %d vi %p recv %u (a=%p)", got, (void *)who, rq, (void *)a);
        EXPECT_RC(VipRecvDone(a, &d), VIP_SUCCESS);
        EXPECT(d == rd2 && d->CS.Length == 7, "recv desc %p len %u", (void *)d, d->CS.Length);
        /* b's send queue is not bound: nothing about it may show up anywhere */
        EXPECT_RC(VipCQDone(scq, &who, &rq), VIP_NOT_DONE);
        EXPECT_RC(VipCQDone(rcq, &who, &rq), VIP_NOT_DONE);
    }

    /* A receive on a that no message will consume: flushed by the disconnect below.
     * Posted before the burst, so the NIC has surely seen it before the disconnect
     * (a receive posted just before VipDisconnect is disconnect.c's business). */
    th_set1(rd, e.mh, buf, 64);
    CHECK(VipPostRecv(a, rd, e.mh));

    th_phase("a burst: one entry per completion, in completion order");
    {
        enum { M = 20 };
        VIP_DESCRIPTOR *s[M], *r[M];
        post_burst(&e, a, b, buf, M, s, r);
        int sends = 0, recvs = 0;
        for (int i = 0; i < 2 * M; i++) {
            VIP_CQ_HANDLE q = i < M ? scq : rcq;
            if (VipCQWait(q, TH_WAIT_MS, &who, &rq) != VIP_SUCCESS) {
                TH_FAILMSG("entry %d missing", i);
                th_failures++;
                break;
            }
            if (who == a && !rq) {
                EXPECT_RC(VipSendDone(a, &d), VIP_SUCCESS);
                EXPECT(d == s[sends], "send %d: desc %p", sends, (void *)d);
                sends++;
            } else if (who == b && rq) {
                EXPECT_RC(VipRecvDone(b, &d), VIP_SUCCESS);
                EXPECT(d == r[recvs], "recv %d: desc %p", recvs, (void *)d);
                recvs++;
            } else {
                EXPECT(0, "unexpected entry vi %p recv %u", (void *)who, rq);
            }
        }
        EXPECT(sends == M && recvs == M, "sends %d recvs %d", sends, recvs);
    }

    th_phase("VipExtCQTake: entries already there, in order; none: VIP_NOT_DONE");
    {
        enum { M = 8 };
        VIP_DESCRIPTOR *s[M], *r[M];
        post_burst(&e, a, b, buf, M, s, r);
        int recvs = 0;
        uint64_t end = th_now_ms() + TH_WAIT_MS;
        while (recvs < M && th_now_ms() < end) {
            VIP_RETURN rc = VipExtCQTake(rcq, &who, &rq);
            if (rc == VIP_NOT_DONE) {
                th_step_all(); /* inline mode: someone must step the NIC */
                continue;
            }
            EXPECT(rc == VIP_SUCCESS && who == b && rq == VIP_TRUE, "VipExtCQTake -> %s", th_rs(rc));
            EXPECT_RC(VipRecvDone(b, &d), VIP_SUCCESS);
            EXPECT(d == r[recvs], "recv %d: desc %p", recvs, (void *)d);
            recvs++;
        }
        EXPECT(recvs == M, "VipExtCQTake took %d of %d receives", recvs, M);
        for (int i = 0; i < M; i++) {
            EXPECT_RC(VipCQWait(scq, TH_WAIT_MS, &who, &rq), VIP_SUCCESS);
            EXPECT_RC(VipSendDone(a, &d), VIP_SUCCESS);
        }
        EXPECT_RC(VipExtCQTake(rcq, &who, &rq), VIP_NOT_DONE);
        EXPECT_RC(VipExtCQTake(NULL, &who, &rq), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipExtCQTake(rcq, NULL, &rq), VIP_INVALID_PARAMETER);
        EXPECT_RC(VipExtCQTake(rcq, &who, NULL), VIP_INVALID_PARAMETER);
    }

    th_phase("VipExtCQTake does not step the NIC (inline mode, a second NIC)");
    {
        VIP_EXT_PROGRESS_MODE pm;
        CHECK(VipExtGetProgressMode(e.nic, &pm));
        th_env e2;
        th_open_env(&e2, NULL, 1 << 16);
        VIP_CQ_HANDLE cq2;
        CHECK(VipCreateCQ(e2.nic, 8, &cq2));
        VIP_VI_HANDLE x = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        VIP_VI_HANDLE y = th_vi(&e2, VIP_SERVICE_RELIABLE_DELIVERY, NULL, cq2);
        th_connect_peer2(&e, x, &e2, y, "take");
        VIP_DESCRIPTOR *xs = th_desc(&e, 1), *yr = th_desc(&e2, 1);
        char *b2 = th_alloc(&e2, 256);
        th_set1(yr, e2.mh, b2, 256);
        CHECK(VipPostRecv(y, yr, e2.mh));
        th_set1(xs, e.mh, buf, 16);
        CHECK(VipPostSend(x, xs, e.mh)); /* steps only the first NIC */
        if (pm == VIP_EXT_PROGRESS_INLINE && !th_wire_lossy()) {
            /* the frame waits in the second NIC's wire until that NIC steps */
            for (int i = 0; i < 100; i++) EXPECT_RC(VipExtCQTake(cq2, &who, &rq), VIP_NOT_DONE);
        }
        EXPECT_RC(VipCQWait(cq2, TH_WAIT_MS, &who, &rq), VIP_SUCCESS);
        EXPECT(who == y && rq == VIP_TRUE, "entry of vi %p queue %u", (void *)who, rq);
        EXPECT_RC(VipRecvDone(y, &d), VIP_SUCCESS);
        th_send_done_must(x, xs, "send to the second NIC");
        th_close_env(&e2);
        CHECK(VipDisconnect(x));
        CHECK(VipDestroyVi(x));
    }

    th_phase("flushed descriptors are reported on the CQ");
    th_set1(rd2, e.mh, buf, 64);
    CHECK(VipPostRecv(b, rd2, e.mh));
    CHECK(VipDisconnect(a));
    int seen_a = 0, seen_b = 0;
    for (int i = 0; i < 2; i++) {
        if (VipCQWait(rcq, TH_WAIT_MS, &who, &rq) != VIP_SUCCESS) break;
        EXPECT(rq == VIP_TRUE, "flush entry on the send side");
        if (who == a) seen_a++;
        if (who == b) seen_b++;
        EXPECT_RC(VipRecvDone(who, &d), VIP_SUCCESS);
        EXPECT(th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR), "flushed desc status 0x%x", d->CS.Status);
    }
    EXPECT(seen_a == 1 && seen_b == 1, "flush entries: a %d b %d", seen_a, seen_b);

    CHECK(VipDisconnect(b));
    CHECK(VipDestroyVi(a));
    CHECK(VipDestroyVi(b));
    EXPECT_RC(VipDestroyCQ(scq), VIP_SUCCESS);
    EXPECT_RC(VipDestroyCQ(rcq), VIP_SUCCESS);
    th_close_env(&e);
    return th_result();
}
