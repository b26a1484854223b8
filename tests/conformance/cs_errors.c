/*
 * cs_errors: the refusals of client/server connection set-up. Nobody waiting
 * (VIP_NO_MATCH), VipConnectReject (VIP_REJECT), VipConnectWait and VipConnectRequest
 * timeouts (VIP_TIMEOUT), accept with a mismatched reliability level
 * (VIP_INVALID_RELIABILITY_LEVEL, the request stays answerable), accept on a busy VI or
 * one of another NIC, malformed addresses. After every refusal the VIs are idle and
 * can connect again.
 */
#include "helpers.h"

static void server_init(th_server *s, th_env *e, const char *disc, VIP_VI_HANDLE vi, enum th_srv_action a) {
    memset(s, 0, sizeof *s);
    s->nic = e->nic;
    s->na = &e->na;
    s->disc = disc;
    s->timeout = TH_WAIT_MS;
    s->vi = vi;
    s->action = a;
}

struct req {
    VIP_VI_HANDLE vi;
    th_addr *l, *r;
    VIP_RETURN rc;
};

static void *request_thread(void *arg) {
    struct req *rq = arg;
    rq->rc = th_connect_request(rq->vi, &rq->l->a, &rq->r->a, TH_WAIT_MS, NULL, TH_WAIT_MS);
    return NULL;
}

int main(void) {
    th_init("cs_errors", 0);
    th_env e, e2;
    th_open_env(&e, NULL, 1 << 16);
    th_open_env(&e2, NULL, 0);
    VIP_VI_HANDLE cv = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    VIP_VI_HANDLE sv = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    th_addr cl, sa;
    th_mkaddr(&cl, &e.na, "cli");
    th_server s;

    th_phase("nobody waits: VIP_NO_MATCH");
    uint64_t t0 = th_now_ms();
    EXPECT_RC(VipConnectRequest(cv, &cl.a, th_mkaddr(&sa, &e.na, "nobody"), TH_WAIT_MS, NULL), VIP_NO_MATCH);
    EXPECT(th_now_ms() - t0 < TH_WAIT_MS, "NO_MATCH took the whole timeout");
    EXPECT(th_state(cv) == VIP_STATE_IDLE, "client after NO_MATCH: %s", th_state_name(th_state(cv)));
    /* the same but with an empty discriminator */
    EXPECT_RC(VipConnectRequest(cv, &cl.a, th_mkaddr(&sa, &e.na, NULL), TH_WAIT_MS, NULL), VIP_NO_MATCH);

    th_phase("reject: VIP_REJECT");
    server_init(&s, &e, "svc", sv, TH_REJECT);
    th_server_start(&s);
    VIP_RETURN r = th_connect_request(cv, &cl.a, th_mkaddr(&sa, &e.na, "svc"), TH_WAIT_MS, NULL, TH_WAIT_MS);
    th_server_join(&s);
    EXPECT(r == VIP_REJECT, "rejected request -> %s", th_rs(r));
    EXPECT(s.wait_rc == VIP_SUCCESS && s.answer_rc == VIP_SUCCESS, "server: wait %s reject %s", th_rs(s.wait_rc),
           th_rs(s.answer_rc));
    EXPECT(th_state(cv) == VIP_STATE_IDLE, "client after REJECT: %s", th_state_name(th_state(cv)));
    EXPECT(th_state(sv) == VIP_STATE_IDLE, "server VI after REJECT: %s", th_state_name(th_state(sv)));

    th_phase("after a reject the same VIs connect");
    server_init(&s, &e, "svc", sv, TH_ACCEPT);
    th_server_start(&s);
    r = th_connect_request(cv, &cl.a, th_mkaddr(&sa, &e.na, "svc"), TH_WAIT_MS, NULL, TH_WAIT_MS);
    th_server_join(&s);
    EXPECT(r == VIP_SUCCESS && s.answer_rc == VIP_SUCCESS, "connect %s / accept %s", th_rs(r), th_rs(s.answer_rc));
    if (r == VIP_SUCCESS) {
        CHECK(VipDisconnect(cv));
        th_wait_state(sv, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(sv));
    }

    th_phase("VipConnectWait timeout");
    {
        VIP_CONN_HANDLE conn;
        th_addr l, rem;
        VIP_VI_ATTRIBUTES ra;
        t0 = th_now_ms();
        EXPECT_RC(VipConnectWait(e.nic, th_mkaddr(&l, &e.na, "quiet"), 200, &rem.a, &ra, &conn), VIP_TIMEOUT);
        uint64_t dt = th_now_ms() - t0;
        EXPECT(dt >= 190 && dt < 3000, "ConnectWait(200 ms) took %llu ms", (unsigned long long)dt);
        EXPECT_RC(VipConnectWait(e.nic, &l.a, 0, &rem.a, &ra, &conn), VIP_TIMEOUT);
        /* after the timeout nobody listens on "quiet" any more */
        EXPECT_RC(VipConnectRequest(cv, &cl.a, th_mkaddr(&sa, &e.na, "quiet"), TH_WAIT_MS, NULL), VIP_NO_MATCH);
    }

    th_phase("VipConnectRequest timeout, late accept");
    {
        server_init(&s, &e, "slow", sv, TH_HOLD);
        th_server_start(&s);
        t0 = th_now_ms();
        r = th_connect_request(cv, &cl.a, th_mkaddr(&sa, &e.na, "slow"), 300, NULL, TH_WAIT_MS);
        uint64_t dt = th_now_ms() - t0;
        th_server_join(&s);
        EXPECT(r == VIP_TIMEOUT, "unanswered request -> %s", th_rs(r));
        EXPECT(dt >= 290 && dt < TH_WAIT_MS + 1000, "request(300 ms) took %llu ms", (unsigned long long)dt);
        EXPECT(th_state(cv) == VIP_STATE_IDLE, "client after timeout: %s", th_state_name(th_state(cv)));
        EXPECT(s.wait_rc == VIP_SUCCESS, "server wait %s", th_rs(s.wait_rc));
        if (s.wait_rc == VIP_SUCCESS) {
            /* The client gave up. Accepting now must not leave a half-open connection:
             * either the accept fails, or the server VI is torn down at once. */
            VIP_RETURN ar = VipConnectAccept(s.conn, sv);
            if (ar == VIP_SUCCESS) {
                uint64_t end = th_now_ms() + TH_WAIT_MS;
                while (th_state(sv) == VIP_STATE_CONNECTED && th_now_ms() < end) th_sleep_ms(1);
            }
            VIP_VI_STATE st = th_state(sv);
            EXPECT(st != VIP_STATE_CONNECTED, "late accept (%s) left the server VI connected", th_rs(ar));
            EXPECT(th_state(cv) == VIP_STATE_IDLE, "late accept connected the client that gave up: %s",
                   th_state_name(th_state(cv)));
            if (ar != VIP_SUCCESS) VipConnectReject(s.conn);
            VipDisconnect(sv);
            th_drain(sv, 100);
        }
    }

    th_phase("accept with mismatched reliability");
    {
        VIP_VI_HANDLE ucv = th_vi(&e, VIP_SERVICE_UNRELIABLE, NULL, NULL);
        server_init(&s, &e, "mis", sv, TH_HOLD);
        th_server_start(&s);
        /* The server answers from this thread once the request is in, so the client's
         * request runs on a helper thread. */
        th_mkaddr(&sa, &e.na, "mis");
        struct req rq = {ucv, &cl, &sa, VIP_NOT_DONE};
        pthread_t t;
        if (pthread_create(&t, NULL, request_thread, &rq) != 0) FATAL("pthread_create");
        th_server_join(&s);
        EXPECT(s.wait_rc == VIP_SUCCESS, "server wait %s", th_rs(s.wait_rc));
        if (s.wait_rc == VIP_SUCCESS) {
            EXPECT(s.remote_attrs.ReliabilityLevel == VIP_SERVICE_UNRELIABLE, "request carries level %u",
                   s.remote_attrs.ReliabilityLevel);
            EXPECT_RC(VipConnectAccept(s.conn, sv), VIP_INVALID_RELIABILITY_LEVEL);
            EXPECT(th_state(sv) == VIP_STATE_IDLE, "server VI after refused accept: %s", th_state_name(th_state(sv)));
            /* the handle is still good: refuse properly */
            EXPECT_RC(VipConnectAccept(s.conn, (VIP_VI_HANDLE)th_vi(&e2, VIP_SERVICE_UNRELIABLE, NULL, NULL)),
                      VIP_INVALID_PARAMETER);
            EXPECT_RC(VipConnectReject(s.conn), VIP_SUCCESS);
        }
        pthread_join(t, NULL);
        EXPECT(rq.rc == VIP_REJECT, "client of a refused accept -> %s", th_rs(rq.rc));
        EXPECT(th_state(ucv) == VIP_STATE_IDLE, "client state %s", th_state_name(th_state(ucv)));
        CHECK(VipDestroyVi(ucv));
    }

    th_phase("accept on a VI that is already connected");
    {
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_RELIABLE_DELIVERY, &a, &b, "busy");
        server_init(&s, &e, "svc2", a, TH_ACCEPT);
        th_server_start(&s);
        r = th_connect_request(cv, &cl.a, th_mkaddr(&sa, &e.na, "svc2"), 500, NULL, TH_WAIT_MS);
        th_server_join(&s);
        EXPECT(s.answer_rc == VIP_INVALID_STATE, "accept on a connected VI -> %s", th_rs(s.answer_rc));
        EXPECT(th_state(a) == VIP_STATE_CONNECTED, "the connected VI was disturbed: %s", th_state_name(th_state(a)));
        if (s.wait_rc == VIP_SUCCESS && s.answer_rc != VIP_SUCCESS) VipConnectReject(s.conn);
        EXPECT(r == VIP_TIMEOUT || r == VIP_REJECT, "client -> %s", th_rs(r));
        EXPECT(th_state(cv) == VIP_STATE_IDLE, "client state %s", th_state_name(th_state(cv)));
    }

    th_phase("malformed addresses");
    {
        th_addr bad;
        th_mkaddr(&bad, &e.na, "x");
        bad.a.HostAddressLen = 0;
        EXPECT_RC(VipConnectRequest(cv, &cl.a, &bad.a, 100, NULL), VIP_INVALID_PARAMETER);
        th_mkaddr(&bad, &e.na, "x");
        bad.a.HostAddress[0] ^= 0xff; /* not an address this NIC can parse */
        EXPECT_RC(VipConnectRequest(cv, &cl.a, &bad.a, 100, NULL), VIP_INVALID_PARAMETER);
        th_mkaddr(&bad, &e.na, "x");
        bad.a.HostAddressLen = (VIP_UINT16)(e.na.NicAddressLen - 1);
        EXPECT_RC(VipConnectRequest(cv, &cl.a, &bad.a, 100, NULL), VIP_INVALID_PARAMETER);
        th_mkaddr(&bad, &e.na, "x");
        bad.a.DiscriminatorLen = (VIP_UINT16)(e.na.MaxDiscriminatorLen + 1);
        EXPECT_RC(VipConnectRequest(cv, &cl.a, &bad.a, 100, NULL), VIP_INVALID_PARAMETER);
        VIP_CONN_HANDLE conn;
        EXPECT_RC(VipConnectWait(e.nic, &bad.a, 0, NULL, NULL, &conn), VIP_INVALID_PARAMETER);
        EXPECT(th_state(cv) == VIP_STATE_IDLE, "client state %s", th_state_name(th_state(cv)));
    }

    th_close_env(&e2);
    th_close_env(&e);
    return th_result();
}
