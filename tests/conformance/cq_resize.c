/*
 * cq_resize: VipResizeCQ with completions pending. Smaller than the pending count:
 * VIP_ERROR_RESOURCE and nothing lost. Otherwise every pending entry survives, in
 * order, including after the ring has wrapped.
 */
#include "helpers.h"

enum { N = 6 };

int main(void) {
    th_init("cq_resize", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 16);
    VIP_CQ_HANDLE cq;
    CHECK(VipCreateCQ(e.nic, 8, &cq));
    /* a: sends unbound, b: receives on the CQ; and a second receiver c on the same CQ */
    VIP_VI_HANDLE a = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    VIP_VI_HANDLE b = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, cq);
    VIP_VI_HANDLE a2 = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    VIP_VI_HANDLE c = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, cq);
    th_connect_peer(&e, a, b, "r1");
    th_connect_peer(&e, a2, c, "r2");
    VIP_DESCRIPTOR *sd[N], *rd[N];
    char *buf = th_alloc(&e, 64 * N);
    for (int i = 0; i < N; i++) {
        sd[i] = th_desc(&e, 1);
        rd[i] = th_desc(&e, 1);
    }
    VIP_VI_HANDLE who;
    VIP_BOOLEAN rq;

    for (int round = 0; round < 4; round++) {
        char ph[64];
        snprintf(ph, sizeof ph, "round %d: fill", round);
        th_phase(ph);
        /* N receives complete: alternating b and c, so the order is checkable */
        for (int i = 0; i < N; i++) {
            VIP_VI_HANDLE rv = (i & 1) ? c : b, sv = (i & 1) ? a2 : a;
            th_set1(rd[i], e.mh, buf + 64 * i, 64);
            CHECK(VipPostRecv(rv, rd[i], e.mh));
            th_set1(sd[i], e.mh, buf + 64 * i, 8);
            CHECK(VipPostSend(sv, sd[i], e.mh));
            th_send_done_must(sv, sd[i], "send");
            uint64_t end = th_now_ms() + TH_WAIT_MS;
            while (!(__atomic_load_n(&rd[i]->CS.Status, __ATOMIC_ACQUIRE) & VIP_STATUS_DONE) && th_now_ms() < end)
                VipExtProgress(e.nic);
            if (!(rd[i]->CS.Status & VIP_STATUS_DONE)) FATAL("receive %d never completed", i);
        }
        snprintf(ph, sizeof ph, "round %d: resize", round);
        th_phase(ph);
        EXPECT_RC(VipResizeCQ(cq, N - 1), VIP_ERROR_RESOURCE);
        EXPECT_RC(VipResizeCQ(cq, 1), VIP_ERROR_RESOURCE);
        /* grow, then shrink to exactly the pending count, alternately */
        EXPECT_RC(VipResizeCQ(cq, round & 1 ? N : 3 * N + 1), VIP_SUCCESS);
        snprintf(ph, sizeof ph, "round %d: drain", round);
        th_phase(ph);
        for (int i = 0; i < N; i++) {
            /* polled with CQDone: CQWait has its own tests (cq_completions, wait_semantics) */
            VIP_RETURN r;
            uint64_t end = th_now_ms() + TH_WAIT_MS;
            while ((r = VipCQDone(cq, &who, &rq)) == VIP_NOT_DONE && th_now_ms() < end) {
            }
            EXPECT(r == VIP_SUCCESS, "entry %d: CQDone -> %s", i, th_rs(r));
            if (r != VIP_SUCCESS) break;
            VIP_VI_HANDLE want = (i & 1) ? c : b;
            EXPECT(who == want && rq == VIP_TRUE, "entry %d: vi %p recv %u, want %p recv 1", i, (void *)who, rq,
                   (void *)want);
            VIP_DESCRIPTOR *d;
            EXPECT_RC(VipRecvDone(who, &d), VIP_SUCCESS);
        }
        EXPECT_RC(VipCQDone(cq, &who, &rq), VIP_NOT_DONE);
    }

    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(a2));
    th_close_env(&e);
    return th_result();
}
