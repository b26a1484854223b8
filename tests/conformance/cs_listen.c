/*
 * cs_listen: standing listeners (VipExtListen, VipExtListenDone, VipExtUnlisten). A
 * request that comes while nobody calls in is held, not answered VIP_NO_MATCH; the
 * taken request is answered like one from VipConnectWait (accept, reject) and the
 * listener listens again; a second request while one is held gets VIP_NO_MATCH;
 * VipExtUnlisten rejects a held request and stops listening; bad input is refused;
 * VipCloseNic frees a listener still open.
 */
#include "helpers.h"

struct req {
    VIP_VI_HANDLE vi;
    th_addr *l, *r;
    VIP_RETURN rc;
    VIP_VI_ATTRIBUTES rattrs;
    pthread_t tid;
};

static void *request_thread(void *arg) {
    struct req *rq = arg;
    rq->rc = VipConnectRequest(rq->vi, &rq->l->a, &rq->r->a, TH_WAIT_MS, &rq->rattrs);
    return NULL;
}

static void request_start(struct req *rq, VIP_VI_HANDLE vi, th_addr *l, th_addr *r) {
    memset(rq, 0, sizeof *rq);
    rq->vi = vi;
    rq->l = l;
    rq->r = r;
    rq->rc = VIP_NOT_DONE;
    if (pthread_create(&rq->tid, NULL, request_thread, rq) != 0) FATAL("pthread_create failed");
}

/* Polls VipExtListenDone until it has a request (or TH_WAIT_MS passes). */
static VIP_RETURN take(VIP_EXT_LISTEN_HANDLE ls, th_addr *remote, VIP_VI_ATTRIBUTES *ra, VIP_CONN_HANDLE *conn) {
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    VIP_RETURN r;
    while ((r = VipExtListenDone(ls, &remote->a, ra, conn)) == VIP_NOT_DONE && th_now_ms() < end) sched_yield();
    return r;
}

int main(void) {
    th_init("cs_listen", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 16);
    th_addr la, cl, sa, rem;
    th_mkaddr(&la, &e.na, "standing");
    th_mkaddr(&cl, &e.na, "client-7");
    th_mkaddr(&sa, &e.na, "standing");
    VIP_EXT_LISTEN_HANDLE ls = NULL;
    VIP_CONN_HANDLE conn = NULL;
    VIP_VI_ATTRIBUTES ra;

    th_phase("bad input");
    EXPECT_RC(VipExtListen(NULL, &la.a, &ls), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtListen(e.nic, NULL, &ls), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtListen(e.nic, &la.a, NULL), VIP_INVALID_PARAMETER);
    th_addr big;
    th_mkaddr(&big, &e.na, "x");
    big.a.DiscriminatorLen = 129; /* over the limit of 128 */
    EXPECT_RC(VipExtListen(e.nic, &big.a, &ls), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtListenDone(NULL, &rem.a, &ra, &conn), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtUnlisten(NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtListenDone((VIP_EXT_LISTEN_HANDLE)e.nic, &rem.a, &ra, &conn), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtUnlisten((VIP_EXT_LISTEN_HANDLE)e.nic), VIP_INVALID_PARAMETER);

    th_phase("nothing waiting: VIP_NOT_DONE");
    CHECK(VipExtListen(e.nic, &la.a, &ls));
    EXPECT_RC(VipExtListenDone(ls, &rem.a, &ra, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtListenDone(ls, &rem.a, &ra, &conn), VIP_NOT_DONE);
    EXPECT_RC(VipExtListenDone(ls, NULL, NULL, &conn), VIP_NOT_DONE);

    th_phase("a request is held until taken, then accepted");
    VIP_VI_HANDLE sv = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    VIP_VI_HANDLE cv = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    struct req rq;
    request_start(&rq, cv, &cl, &sa);
    th_sleep_ms(50); /* nobody calls in on the listener meanwhile: the request waits */
    memset(&rem, 0, sizeof rem);
    memset(&ra, 0xee, sizeof ra);
    VIP_RETURN r = take(ls, &rem, &ra, &conn);
    EXPECT(r == VIP_SUCCESS, "VipExtListenDone -> %s", th_rs(r));
    if (r != VIP_SUCCESS) return th_result();
    EXPECT(rem.a.HostAddressLen == e.na.NicAddressLen &&
               memcmp(rem.a.HostAddress, e.na.LocalNicAddress, e.na.NicAddressLen) == 0 &&
               rem.a.DiscriminatorLen == 8 && memcmp(rem.a.HostAddress + rem.a.HostAddressLen, "client-7", 8) == 0,
           "remote address: %u address bytes, discriminator of %u bytes", rem.a.HostAddressLen,
           rem.a.DiscriminatorLen);
    EXPECT(ra.ReliabilityLevel == VIP_SERVICE_RELIABLE_DELIVERY, "remote attrs: reliability %u", ra.ReliabilityLevel);
    CHECK(VipConnectAccept(conn, sv));
    pthread_join(rq.tid, NULL);
    EXPECT(rq.rc == VIP_SUCCESS, "held then accepted request -> %s", th_rs(rq.rc));
    EXPECT(th_state(cv) == VIP_STATE_CONNECTED && th_state(sv) == VIP_STATE_CONNECTED, "states %s / %s",
           th_state_name(th_state(cv)), th_state_name(th_state(sv)));
    CHECK(VipDisconnect(cv));
    th_wait_state(sv, VIP_STATE_ERROR, TH_WAIT_MS);
    CHECK(VipDisconnect(sv));

    th_phase("it listens again: a second request, rejected");
    request_start(&rq, cv, &cl, &sa);
    r = take(ls, &rem, NULL, &conn);
    EXPECT(r == VIP_SUCCESS, "second VipExtListenDone -> %s", th_rs(r));
    if (r == VIP_SUCCESS) CHECK(VipConnectReject(conn));
    pthread_join(rq.tid, NULL);
    EXPECT(rq.rc == VIP_REJECT, "rejected request -> %s", th_rs(rq.rc));
    EXPECT(th_state(cv) == VIP_STATE_IDLE, "client after REJECT: %s", th_state_name(th_state(cv)));

    th_phase("one request held: the next gets VIP_NO_MATCH");
    VIP_VI_HANDLE cv2 = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    th_addr cl2;
    th_mkaddr(&cl2, &e.na, "client-8");
    /* a client that gives up while its request is held leaves it held */
    EXPECT_RC(VipConnectRequest(cv, &cl.a, &sa.a, 200, NULL), VIP_TIMEOUT);
    EXPECT_RC(VipConnectRequest(cv2, &cl2.a, &sa.a, TH_WAIT_MS, NULL), VIP_NO_MATCH);
    r = take(ls, &rem, NULL, &conn);
    EXPECT(r == VIP_SUCCESS, "VipExtListenDone after a timed-out request -> %s", th_rs(r));
    if (r == VIP_SUCCESS) {
        EXPECT(rem.a.DiscriminatorLen == 8 && memcmp(rem.a.HostAddress + rem.a.HostAddressLen, "client-7", 8) == 0,
               "the held request is not the first one");
        CHECK(VipConnectReject(conn));
    }
    EXPECT(th_state(cv) == VIP_STATE_IDLE, "client after a late REJECT: %s", th_state_name(th_state(cv)));

    th_phase("VipExtUnlisten rejects a held request and stops listening");
    /* the request must reach the NIC before VipExtUnlisten; if it came too late (a slow
     * thread: VIP_NO_MATCH), listen again and repeat */
    int rejected = 0;
    for (int attempt = 0; attempt < 5 && !rejected; attempt++) {
        request_start(&rq, cv, &cl, &sa);
        th_sleep_ms(50);
        CHECK(VipExtUnlisten(ls));
        pthread_join(rq.tid, NULL);
        EXPECT(rq.rc == VIP_REJECT || rq.rc == VIP_NO_MATCH, "request at VipExtUnlisten -> %s", th_rs(rq.rc));
        rejected = rq.rc == VIP_REJECT;
        CHECK(VipExtListen(e.nic, &la.a, &ls));
    }
    EXPECT(rejected, "no request was held at VipExtUnlisten in 5 attempts");
    CHECK(VipExtUnlisten(ls));
    EXPECT_RC(VipConnectRequest(cv, &cl.a, &sa.a, TH_WAIT_MS, NULL), VIP_NO_MATCH);

    th_phase("VipCloseNic frees an open listener");
    CHECK(VipExtListen(e.nic, &la.a, &ls));
    request_start(&rq, cv, &cl, &sa);
    r = take(ls, &rem, NULL, &conn);
    EXPECT(r == VIP_SUCCESS, "VipExtListenDone before close -> %s", th_rs(r));
    if (r == VIP_SUCCESS) CHECK(VipConnectReject(conn));
    pthread_join(rq.tid, NULL);
    CHECK(VipDestroyVi(cv));
    CHECK(VipDestroyVi(cv2));
    CHECK(VipDestroyVi(sv));
    th_close_env(&e);
    return th_result();
}
