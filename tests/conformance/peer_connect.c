/*
 * peer_connect: peer-to-peer connections. Crossed discriminators connect (polled with
 * VipConnectPeerDone or waited with VipConnectPeerWait), remote attributes come back,
 * uncrossed ones and a lonely request time out (VIP_TIMEOUT) and leave the VI idle,
 * Done/Wait without a request are VIP_INVALID_STATE, VipDisconnect withdraws a pending
 * request and flushes the VI's receives (so it can be destroyed), a mismatched reliability level
 * never connects, many pairs at once.
 */
#include "helpers.h"

static VIP_VI_HANDLE mkvi(th_env *e, VIP_RELIABILITY_LEVEL rel, VIP_ULONG mts, VIP_BOOLEAN rdmaw) {
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = rel;
    va.Ptag = e->ptag;
    va.MaxTransferSize = mts;
    va.EnableRdmaWrite = rdmaw;
    VIP_VI_HANDLE vi;
    CHECK(VipCreateVi(e->nic, &va, NULL, NULL, &vi));
    return vi;
}

int main(void) {
    th_init("peer_connect", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 16);
    th_addr la, ra, lb, rb;
    VIP_VI_ATTRIBUTES at, bt;

    th_phase("PeerDone polling");
    for (int li = 0; li < 3; li++) {
        VIP_VI_HANDLE a = mkvi(&e, th_levels[li], 1000, VIP_FALSE), b = mkvi(&e, th_levels[li], 2000, VIP_TRUE);
        uint64_t t0 = th_now_ms();
        CHECK(VipConnectPeerRequest(a, th_mkaddr(&la, &e.na, "poll.a"), th_mkaddr(&ra, &e.na, "poll.b"), 60000));
        EXPECT(th_now_ms() - t0 < 1000, "VipConnectPeerRequest blocked for %llu ms",
               (unsigned long long)(th_now_ms() - t0));
        EXPECT(th_state(a) == VIP_STATE_CONNECT_PENDING, "a: %s", th_state_name(th_state(a)));
        /* nobody to meet yet */
        for (int i = 0; i < 100; i++) EXPECT_RC(VipConnectPeerDone(a, &at), VIP_NOT_DONE);
        /* a second request on a pending VI is refused */
        EXPECT_RC(VipConnectPeerRequest(a, &la.a, &ra.a, 1000), VIP_INVALID_STATE);
        CHECK(VipConnectPeerRequest(b, th_mkaddr(&lb, &e.na, "poll.b"), th_mkaddr(&rb, &e.na, "poll.a"), 60000));
        VIP_RETURN r1 = VIP_NOT_DONE, r2 = VIP_NOT_DONE;
        uint64_t end = th_now_ms() + TH_WAIT_MS;
        memset(&at, 0, sizeof at);
        memset(&bt, 0, sizeof bt);
        while ((r1 == VIP_NOT_DONE || r2 == VIP_NOT_DONE) && th_now_ms() < end) {
            if (r1 == VIP_NOT_DONE) r1 = VipConnectPeerDone(a, &at);
            if (r2 == VIP_NOT_DONE) r2 = VipConnectPeerDone(b, &bt);
        }
        EXPECT(r1 == VIP_SUCCESS && r2 == VIP_SUCCESS, "%s: a %s, b %s", th_rel_name(th_levels[li]), th_rs(r1),
               th_rs(r2));
        EXPECT(at.ReliabilityLevel == th_levels[li] && at.MaxTransferSize == 2000 && at.EnableRdmaWrite == VIP_TRUE,
               "a sees b as rel %u mts %llu w %u", at.ReliabilityLevel, (unsigned long long)at.MaxTransferSize,
               at.EnableRdmaWrite);
        EXPECT(bt.ReliabilityLevel == th_levels[li] && bt.MaxTransferSize == 1000 && bt.EnableRdmaWrite == VIP_FALSE,
               "b sees a as rel %u mts %llu w %u", bt.ReliabilityLevel, (unsigned long long)bt.MaxTransferSize,
               bt.EnableRdmaWrite);
        EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "states %s %s",
               th_state_name(th_state(a)), th_state_name(th_state(b)));
        EXPECT_RC(VipConnectPeerRequest(a, &la.a, &ra.a, 1000), VIP_INVALID_STATE);
        CHECK(VipDisconnect(a));
        th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(b));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_phase("PeerWait");
    {
        VIP_VI_HANDLE a = mkvi(&e, VIP_SERVICE_RELIABLE_RECEPTION, 0, VIP_FALSE);
        VIP_VI_HANDLE b = mkvi(&e, VIP_SERVICE_RELIABLE_RECEPTION, 4096, VIP_FALSE);
        CHECK(VipConnectPeerRequest(a, th_mkaddr(&la, &e.na, "w.a"), th_mkaddr(&ra, &e.na, "w.b"), TH_WAIT_MS));
        CHECK(VipConnectPeerRequest(b, th_mkaddr(&lb, &e.na, "w.b"), th_mkaddr(&rb, &e.na, "w.a"), TH_WAIT_MS));
        EXPECT_RC(VipConnectPeerWait(a, &at), VIP_SUCCESS);
        EXPECT_RC(VipConnectPeerWait(b, NULL), VIP_SUCCESS);
        EXPECT(at.MaxTransferSize == 4096, "a sees b's MaxTransferSize %llu", (unsigned long long)at.MaxTransferSize);
        CHECK(VipDisconnect(b));
        th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(a));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_phase("no request outstanding");
    {
        VIP_VI_HANDLE a = mkvi(&e, VIP_SERVICE_UNRELIABLE, 0, VIP_FALSE);
        EXPECT_RC(VipConnectPeerDone(a, &at), VIP_INVALID_STATE);
        EXPECT_RC(VipConnectPeerWait(a, &at), VIP_INVALID_STATE);
        CHECK(VipDestroyVi(a));
    }

    th_phase("lonely request times out");
    {
        VIP_VI_HANDLE a = mkvi(&e, VIP_SERVICE_RELIABLE_DELIVERY, 0, VIP_FALSE);
        uint64_t t0 = th_now_ms();
        CHECK(VipConnectPeerRequest(a, th_mkaddr(&la, &e.na, "alone.a"), th_mkaddr(&ra, &e.na, "alone.b"), 200));
        EXPECT_RC(VipConnectPeerWait(a, &at), VIP_TIMEOUT);
        uint64_t dt = th_now_ms() - t0;
        EXPECT(dt >= 190 && dt < 3000, "200 ms request ended after %llu ms", (unsigned long long)dt);
        EXPECT(th_state(a) == VIP_STATE_IDLE, "after timeout: %s", th_state_name(th_state(a)));
        /* polled the same way */
        CHECK(VipConnectPeerRequest(a, &la.a, &ra.a, 100));
        VIP_RETURN r;
        uint64_t end = th_now_ms() + TH_WAIT_MS;
        while ((r = VipConnectPeerDone(a, NULL)) == VIP_NOT_DONE && th_now_ms() < end) {
        }
        EXPECT(r == VIP_TIMEOUT, "polled lonely request -> %s", th_rs(r));
        /* the VI is reusable: now with a partner */
        VIP_VI_HANDLE b = mkvi(&e, VIP_SERVICE_RELIABLE_DELIVERY, 0, VIP_FALSE);
        th_connect_peer(&e, a, b, "again");
        CHECK(VipDisconnect(a));
        th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(b));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_phase("a withdrawn request leaves an idle VI with its receives flushed");
    {
        VIP_VI_HANDLE a = mkvi(&e, VIP_SERVICE_RELIABLE_DELIVERY, 0, VIP_FALSE);
        VIP_DESCRIPTOR *rd = th_desc(&e, 1);
        th_set1(rd, e.mh, th_alloc(&e, 64), 64);
        CHECK(VipPostRecv(a, rd, e.mh));
        CHECK(VipConnectPeerRequest(a, th_mkaddr(&la, &e.na, "gone.a"), th_mkaddr(&ra, &e.na, "gone.b"), 10000));
        CHECK(VipDisconnect(a));
        EXPECT_RC(VipConnectPeerDone(a, NULL), VIP_TIMEOUT);
        EXPECT(th_state(a) == VIP_STATE_IDLE, "after withdrawing: %s", th_state_name(th_state(a)));
        VIP_DESCRIPTOR *d = th_recv_done_must(a, rd, "receive posted before the request");
        EXPECT(d && th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR), "receive status 0x%x, want flushed",
               d ? d->CS.Status : 0);
        EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
    }

    th_phase("uncrossed discriminators do not connect");
    {
        VIP_VI_HANDLE a = mkvi(&e, VIP_SERVICE_UNRELIABLE, 0, VIP_FALSE), b = mkvi(&e, VIP_SERVICE_UNRELIABLE, 0, VIP_FALSE);
        CHECK(VipConnectPeerRequest(a, th_mkaddr(&la, &e.na, "u.x"), th_mkaddr(&ra, &e.na, "u.y"), 300));
        CHECK(VipConnectPeerRequest(b, th_mkaddr(&lb, &e.na, "u.x"), th_mkaddr(&rb, &e.na, "u.y"), 300));
        EXPECT_RC(VipConnectPeerWait(a, NULL), VIP_TIMEOUT);
        EXPECT_RC(VipConnectPeerWait(b, NULL), VIP_TIMEOUT);
        /* discriminators that differ only in length */
        CHECK(VipConnectPeerRequest(a, th_mkaddr(&la, &e.na, "len.a"), th_mkaddr(&ra, &e.na, "len.b"), 300));
        CHECK(VipConnectPeerRequest(b, th_mkaddr(&lb, &e.na, "len.bb"), th_mkaddr(&rb, &e.na, "len.a"), 300));
        EXPECT_RC(VipConnectPeerWait(a, NULL), VIP_TIMEOUT);
        EXPECT_RC(VipConnectPeerWait(b, NULL), VIP_TIMEOUT);
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_phase("mismatched reliability never connects");
    {
        VIP_VI_HANDLE a = mkvi(&e, VIP_SERVICE_UNRELIABLE, 0, VIP_FALSE);
        VIP_VI_HANDLE b = mkvi(&e, VIP_SERVICE_RELIABLE_DELIVERY, 0, VIP_FALSE);
        CHECK(VipConnectPeerRequest(a, th_mkaddr(&la, &e.na, "m.a"), th_mkaddr(&ra, &e.na, "m.b"), 500));
        CHECK(VipConnectPeerRequest(b, th_mkaddr(&lb, &e.na, "m.b"), th_mkaddr(&rb, &e.na, "m.a"), 500));
        VIP_RETURN r1 = VipConnectPeerWait(a, NULL), r2 = VipConnectPeerWait(b, NULL);
        EXPECT(r1 != VIP_SUCCESS && r2 != VIP_SUCCESS, "mismatched levels connected: %s %s", th_rs(r1), th_rs(r2));
        EXPECT(r1 == VIP_INVALID_RELIABILITY_LEVEL || r2 == VIP_INVALID_RELIABILITY_LEVEL,
               "neither side was told the levels differ: %s %s", th_rs(r1), th_rs(r2));
        EXPECT((r1 == VIP_INVALID_RELIABILITY_LEVEL || r1 == VIP_TIMEOUT) &&
                   (r2 == VIP_INVALID_RELIABILITY_LEVEL || r2 == VIP_TIMEOUT),
               "results %s %s", th_rs(r1), th_rs(r2));
        EXPECT(th_state(a) == VIP_STATE_IDLE && th_state(b) == VIP_STATE_IDLE, "states %s %s",
               th_state_name(th_state(a)), th_state_name(th_state(b)));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_phase("bad arguments");
    {
        VIP_VI_HANDLE a = mkvi(&e, VIP_SERVICE_UNRELIABLE, 0, VIP_FALSE);
        th_mkaddr(&la, &e.na, "bad.a");
        th_mkaddr(&ra, &e.na, "bad.b");
        ra.a.HostAddressLen = 0;
        EXPECT_RC(VipConnectPeerRequest(a, &la.a, &ra.a, 100), VIP_INVALID_PARAMETER);
        th_mkaddr(&ra, &e.na, "bad.b");
        ra.a.HostAddress[0] ^= 0xff;
        EXPECT_RC(VipConnectPeerRequest(a, &la.a, &ra.a, 100), VIP_INVALID_PARAMETER);
        th_mkaddr(&ra, &e.na, "bad.b");
        la.a.DiscriminatorLen = (VIP_UINT16)(e.na.MaxDiscriminatorLen + 1);
        EXPECT_RC(VipConnectPeerRequest(a, &la.a, &ra.a, 100), VIP_INVALID_PARAMETER);
        EXPECT(th_state(a) == VIP_STATE_IDLE, "state %s", th_state_name(th_state(a)));
        CHECK(VipDestroyVi(a));
    }

    /* docs/vipl-reference.md, fixed deviation 5 (thread mode) */
    th_phase("PeerDone polled hard: never VIP_INVALID_STATE while a request is outstanding");
    {
        int bad = 0, rounds = 3000 / (int)th_slow();
        VIP_RETURN first_bad = VIP_SUCCESS;
        VIP_VI_STATE bad_state = VIP_STATE_IDLE;
        for (int i = 0; i < rounds && !bad; i++) { /* stops at the first wrong answer */
            VIP_VI_HANDLE a = mkvi(&e, VIP_SERVICE_RELIABLE_DELIVERY, 0, VIP_FALSE);
            VIP_VI_HANDLE b = mkvi(&e, VIP_SERVICE_RELIABLE_DELIVERY, 0, VIP_FALSE);
            CHECK(VipConnectPeerRequest(a, th_mkaddr(&la, &e.na, "hard.a"), th_mkaddr(&ra, &e.na, "hard.b"), TH_WAIT_MS));
            CHECK(VipConnectPeerRequest(b, th_mkaddr(&lb, &e.na, "hard.b"), th_mkaddr(&rb, &e.na, "hard.a"), TH_WAIT_MS));
            VIP_RETURN r1 = VIP_NOT_DONE, r2 = VIP_NOT_DONE;
            uint64_t end = th_now_ms() + 2 * TH_WAIT_MS;
            while ((r1 != VIP_SUCCESS || r2 != VIP_SUCCESS) && th_now_ms() < end) {
                VIP_RETURN x = r1 == VIP_SUCCESS ? r1 : VipConnectPeerDone(a, NULL);
                VIP_RETURN y = r2 == VIP_SUCCESS ? r2 : VipConnectPeerDone(b, NULL);
                if ((x != VIP_SUCCESS && x != VIP_NOT_DONE) || (y != VIP_SUCCESS && y != VIP_NOT_DONE)) {
                    if (!bad++) {
                        first_bad = x != VIP_SUCCESS && x != VIP_NOT_DONE ? x : y;
                        bad_state = th_state(x != VIP_SUCCESS && x != VIP_NOT_DONE ? a : b);
                    }
                }
                if (x == VIP_SUCCESS) r1 = x;
                if (y == VIP_SUCCESS) r2 = y;
            }
            if (r1 != VIP_SUCCESS || r2 != VIP_SUCCESS) FATAL("round %d never connected", i);
            CHECK(VipDisconnect(a));
            th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS);
            CHECK(VipDisconnect(b));
            CHECK(VipDestroyVi(a));
            CHECK(VipDestroyVi(b));
        }
        EXPECT(bad == 0,
               "a poll answered something other than NOT_DONE/SUCCESS while connecting "
               "(%s, VI state then %s)",
               th_rs(first_bad), th_state_name(bad_state));
    }

    th_phase("many pairs at once");
    {
        enum { K = 32 };
        VIP_VI_HANDLE a[K], b[K];
        th_addr l[K], r[K];
        char d1[32], d2[32];
        for (int i = 0; i < K; i++) {
            a[i] = mkvi(&e, th_levels[i % 3], 0, VIP_FALSE);
            b[i] = mkvi(&e, th_levels[i % 3], 0, VIP_FALSE);
        }
        /* all a's first, then all b's in reverse order */
        for (int i = 0; i < K; i++) {
            snprintf(d1, sizeof d1, "many%d.a", i);
            snprintf(d2, sizeof d2, "many%d.b", i);
            CHECK(VipConnectPeerRequest(a[i], th_mkaddr(&l[i], &e.na, d1), th_mkaddr(&r[i], &e.na, d2), TH_WAIT_MS));
        }
        for (int i = K - 1; i >= 0; i--) {
            snprintf(d1, sizeof d1, "many%d.a", i);
            snprintf(d2, sizeof d2, "many%d.b", i);
            th_addr x, y;
            CHECK(VipConnectPeerRequest(b[i], th_mkaddr(&x, &e.na, d2), th_mkaddr(&y, &e.na, d1), TH_WAIT_MS));
        }
        for (int i = 0; i < K; i++) {
            EXPECT_RC(VipConnectPeerWait(a[i], NULL), VIP_SUCCESS);
            EXPECT_RC(VipConnectPeerWait(b[i], NULL), VIP_SUCCESS);
        }
        /* each a is connected to its own b: a message from a[i] lands on b[i] */
        uint32_t *rbuf = th_alloc(&e, 64 * K), *sbuf = th_alloc(&e, 64);
        VIP_DESCRIPTOR *sd = th_desc(&e, 1), *rd[K];
        for (int i = 0; i < K; i++) {
            rd[i] = th_desc(&e, 1);
            th_set1(rd[i], e.mh, rbuf + 16 * i, 64);
            CHECK(VipPostRecv(b[i], rd[i], e.mh));
        }
        for (int i = 0; i < K; i++) {
            *sbuf = 0x1000u + (uint32_t)i;
            th_set1(sd, e.mh, sbuf, 4);
            CHECK(VipPostSend(a[i], sd, e.mh));
            th_send_done_must(a[i], sd, "send");
            VIP_DESCRIPTOR *d = th_recv_done_must(b[i], rd[i], "recv");
            EXPECT(d->CS.Length == 4 && rbuf[16 * i] == 0x1000u + (uint32_t)i, "pair %d got 0x%x (%u bytes)", i,
                   rbuf[16 * i], d->CS.Length);
        }
    }

    th_close_env(&e);
    return th_result();
}
