/*
 * close_waiters: VipCloseNic while other threads wait in the NIC's blocking calls
 * (VipRecvWait, VipExtRecvReplyWait, VipCQWait, VipConnectWait, VipConnectRequest,
 * VipConnectPeerWait, all with VIP_INFINITE): every waiter returns VIP_INVALID_STATE,
 * the close returns VIP_SUCCESS once they have left, nothing crashes (run it under ASan
 * too), and a wait on another NIC of the process is not disturbed. In thread mode the
 * waiters are asleep in the firmware's futex by then; in inline mode they step the NIC.
 */
#include "helpers.h"

enum { W_RECV, W_REPLY, W_CQ, W_CONNWAIT, W_CONNREQ, W_PEER, W_COUNT };
static const char *const wname[W_COUNT] = {"VipRecvWait", "VipExtRecvReplyWait", "VipCQWait",
                                           "VipConnectWait", "VipConnectRequest", "VipConnectPeerWait"};

typedef struct {
    int which;
    th_env *e;
    VIP_VI_HANDLE vi;
    VIP_CQ_HANDLE cq;
    volatile int entering; /* set just before the call */
    volatile int returned;
    VIP_RETURN rc;
    pthread_t tid;
} waiter;

static void *waiter_main(void *arg) {
    waiter *w = arg;
    VIP_DESCRIPTOR *d;
    VIP_VI_HANDLE vi;
    VIP_BOOLEAN q;
    th_addr la, ra;
    VIP_CONN_HANDLE conn;
    switch (w->which) {
        case W_RECV:
            __atomic_store_n(&w->entering, 1, __ATOMIC_SEQ_CST);
            w->rc = VipRecvWait(w->vi, VIP_INFINITE, &d);
            break;
        case W_REPLY:
            __atomic_store_n(&w->entering, 1, __ATOMIC_SEQ_CST);
            w->rc = VipExtRecvReplyWait(w->vi, VIP_INFINITE, &d);
            break;
        case W_CQ:
            __atomic_store_n(&w->entering, 1, __ATOMIC_SEQ_CST);
            w->rc = VipCQWait(w->cq, VIP_INFINITE, &vi, &q);
            break;
        case W_CONNWAIT:
            th_mkaddr(&la, &w->e->na, "nobody-calls");
            __atomic_store_n(&w->entering, 1, __ATOMIC_SEQ_CST);
            w->rc = VipConnectWait(w->e->nic, &la.a, VIP_INFINITE, &ra.a, NULL, &conn);
            break;
        case W_CONNREQ: /* to a standing listener that never answers */
            th_mkaddr(&la, &w->e->na, "client");
            th_mkaddr(&ra, &w->e->na, "held");
            __atomic_store_n(&w->entering, 1, __ATOMIC_SEQ_CST);
            w->rc = VipConnectRequest(w->vi, &la.a, &ra.a, VIP_INFINITE, NULL);
            break;
        case W_PEER: /* the peer side is never asked */
            __atomic_store_n(&w->entering, 1, __ATOMIC_SEQ_CST);
            w->rc = VipConnectPeerWait(w->vi, NULL);
            break;
    }
    __atomic_store_n(&w->returned, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* Another NIC's CQ wait, which must time out normally while the first NIC closes. */
typedef struct {
    VIP_CQ_HANDLE cq;
    VIP_RETURN rc;
    pthread_t tid;
} other;

static void *other_main(void *arg) {
    other *o = arg;
    VIP_VI_HANDLE vi;
    VIP_BOOLEAN q;
    o->rc = VipCQWait(o->cq, 1500, &vi, &q);
    return NULL;
}

int main(void) {
    th_init("close_waiters", 30);
    th_env e, e2;
    th_open_env(&e, NULL, 1 << 16);
    th_open_env(&e2, NULL, 0);

    th_phase("set up the waiters");
    waiter w[W_COUNT];
    memset(w, 0, sizeof w);
    VIP_CQ_HANDLE cq;
    CHECK(VipCreateCQ(e.nic, 16, &cq));
    VIP_EXT_LISTEN_HANDLE ls;
    th_addr held;
    CHECK(VipExtListen(e.nic, th_mkaddr(&held, &e.na, "held"), &ls));
    for (int i = 0; i < W_COUNT; i++) {
        w[i].which = i;
        w[i].e = &e;
        w[i].rc = VIP_NOT_DONE;
        w[i].vi = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        w[i].cq = cq;
    }
    VIP_DESCRIPTOR *rd = th_desc(&e, 1), *rr = th_desc(&e, 1);
    char *buf = th_alloc(&e, 256);
    th_set1(rd, e.mh, buf, 128);
    CHECK(VipPostRecv(w[W_RECV].vi, rd, e.mh));
    CHECK(VipExtEnableSteering(w[W_REPLY].vi, NULL));
    th_set1(rr, e.mh, buf + 128, 128);
    CHECK(VipExtPostRecvReply(w[W_REPLY].vi, rr, e.mh));
    {
        th_addr la, ra;
        CHECK(VipConnectPeerRequest(w[W_PEER].vi, th_mkaddr(&la, &e.na, "p-one"), th_mkaddr(&ra, &e.na, "p-two"),
                                    VIP_INFINITE));
    }
    other o = {NULL, VIP_NOT_DONE, 0};
    CHECK(VipCreateCQ(e2.nic, 4, &o.cq));

    for (int i = 0; i < W_COUNT; i++)
        if (pthread_create(&w[i].tid, NULL, waiter_main, &w[i]) != 0) FATAL("pthread_create");
    for (int i = 0; i < W_COUNT; i++)
        while (!__atomic_load_n(&w[i].entering, __ATOMIC_SEQ_CST)) sched_yield();
    if (pthread_create(&o.tid, NULL, other_main, &o) != 0) FATAL("pthread_create");
    /* Long enough for every waiter to be inside its wait (thread mode: asleep). */
    th_sleep_ms(300 * th_slow());
    for (int i = 0; i < W_COUNT; i++)
        EXPECT(!__atomic_load_n(&w[i].returned, __ATOMIC_SEQ_CST), "%s returned before the close: %s", wname[i],
               th_rs(w[i].rc));

    th_phase("VipCloseNic with six waiters");
    uint64_t t0 = th_now_ms();
    VIP_NIC_HANDLE nic = e.nic;
    EXPECT_RC(VipCloseNic(nic), VIP_SUCCESS);
    uint64_t took = th_now_ms() - t0;
    EXPECT(took < 2000 * th_slow(), "VipCloseNic took %llu ms", (unsigned long long)took);
    for (int i = 0; i < W_COUNT; i++) {
        /* The close waits for the waiters to leave the NIC, not for their threads to run
         * the code after the call: a waiter may still be between its return and its flag
         * (ASan made that window visible). So each must finish within a bounded time. */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 5 * th_slow();
        int jr = pthread_timedjoin_np(w[i].tid, NULL, &dl);
        EXPECT(jr == 0, "%s had not returned 5 s after VipCloseNic did", wname[i]);
        if (jr != 0) FATAL("a waiter is stuck in a closed NIC");
        EXPECT(__atomic_load_n(&w[i].returned, __ATOMIC_SEQ_CST), "%s thread ended without returning", wname[i]);
        EXPECT(w[i].rc == VIP_INVALID_STATE, "%s -> %s, want VIP_INVALID_STATE", wname[i], th_rs(w[i].rc));
    }

    th_phase("after the close");
    VIP_NIC_ATTRIBUTES na;
    EXPECT_RC(VipQueryNic(nic, &na), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipCloseNic(nic), VIP_INVALID_PARAMETER);
    VIP_DESCRIPTOR *dp;
    EXPECT_RC(VipRecvWait(w[W_RECV].vi, 0, &dp), VIP_INVALID_PARAMETER);
    pthread_join(o.tid, NULL);
    EXPECT(o.rc == VIP_TIMEOUT, "a CQ wait on another NIC -> %s, want VIP_TIMEOUT", th_rs(o.rc));
    EXPECT_RC(VipDestroyCQ(o.cq), VIP_SUCCESS);
    for (int i = 0; i < TH_MAX_NICS; i++)
        if (th_nics[i] == nic) th_nics[i] = NULL;
    free(e.mem);
    th_close_env(&e2);
    return th_result();
}
