/*
 * cs_two_nics: two NICs in one process. Client/server (server on the second NIC,
 * driven from a thread) and peer-to-peer connections between them, with data both
 * ways, including a message larger than the link's frame ring (so it only gets through
 * if both NICs make progress while the caller polls them).
 */
#include "helpers.h"

/* A loopback pair per NIC, for fence() below. */
typedef struct {
    th_env *e;
    VIP_VI_HANDLE x, y;
    VIP_DESCRIPTOR *sd, *rd;
    char *buf;
} fence_t;
static fence_t fences[2];

static void fence_init(fence_t *f, th_env *e) {
    f->e = e;
    th_pair(e, VIP_SERVICE_UNRELIABLE, &f->x, &f->y, "fence");
    f->sd = th_desc(e, 1);
    f->rd = th_desc(e, 1);
    f->buf = th_alloc(e, 64);
}

/* Returns once e's NIC has taken in every doorbell rung before the call: a transfer on
 * a loopback pair of the same NIC completes only after the doorbells queued ahead of
 * it. Whether a message from another NIC finds a receive posted just before it was sent
 * is data_recv_first's business (it used to be a bug); this test is about connections,
 * so it does not depend on that. */
static void fence(th_env *e) {
    fence_t *f = fences[0].e == e ? &fences[0] : &fences[1];
    th_set1(f->rd, e->mh, f->buf, 64);
    CHECK(VipPostRecv(f->y, f->rd, e->mh));
    th_set1(f->sd, e->mh, f->buf, 1);
    CHECK(VipPostSend(f->x, f->sd, e->mh));
    th_send_done_must(f->x, f->sd, "fence send");
    th_recv_done_must(f->y, f->rd, "fence recv");
}

/* Moves len bytes from a (on ea) to b (on eb), polling both sides so that each NIC is
 * stepped in inline mode. */
static void exchange(th_env *ea, VIP_VI_HANDLE a, th_env *eb, VIP_VI_HANDLE b, uint32_t len, uint32_t seed) {
    char *sb = th_alloc(ea, len ? len : 1), *rb = th_alloc(eb, len + 64);
    VIP_DESCRIPTOR *sd = th_desc(ea, 1), *rd = th_desc(eb, 1);
    th_fill(sb, len, seed);
    th_set1(rd, eb->mh, rb, len + 64);
    CHECK(VipPostRecv(b, rd, eb->mh));
    fence(eb);
    th_set1(sd, ea->mh, sb, len);
    CHECK(VipPostSend(a, sd, ea->mh));
    VIP_DESCRIPTOR *ds = NULL, *dr = NULL, *d;
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    while ((!ds || !dr) && th_now_ms() < end) {
        if (!ds && VipSendDone(a, &d) == VIP_SUCCESS) ds = d;
        if (!dr && VipRecvDone(b, &d) == VIP_SUCCESS) dr = d;
    }
    if (!ds || !dr) FATAL("transfer of %u bytes: send %s, recv %s", len, ds ? "done" : "missing", dr ? "done" : "missing");
    EXPECT(ds == sd && (ds->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "send status 0x%x", ds->CS.Status);
    EXPECT(dr == rd && (dr->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "recv status 0x%x", dr->CS.Status);
    EXPECT(dr->CS.Length == len, "recv length %u want %u", dr->CS.Length, len);
    EXPECT(th_verify(rb, len, seed) < 0, "data differs at %ld", th_verify(rb, len, seed));
}

/* Steps a NIC from a thread (inline mode: otherwise nobody answers for it while the
 * main thread is blocked in a connection call on the other NIC). */
static int stepping; /* atomic: the main thread stops the stepper */
static void *stepper(void *arg) {
    VIP_NIC_HANDLE nic = arg;
    while (__atomic_load_n(&stepping, __ATOMIC_RELAXED))
        if (VipExtProgress(nic) == VIP_NOT_DONE) sched_yield();
    return NULL;
}

int main(void) {
    th_init("cs_two_nics", 0);
    th_env ea, eb;
    th_open_env(&ea, NULL, 4 << 20);
    th_open_env(&eb, NULL, 4 << 20);
    fence_init(&fences[0], &ea);
    fence_init(&fences[1], &eb);
    EXPECT(ea.na.NicAddressLen != eb.na.NicAddressLen ||
               memcmp(ea.na.LocalNicAddress, eb.na.LocalNicAddress, ea.na.NicAddressLen) != 0,
           "two NICs with one address");

    for (int li = 0; li < 3; li++) {
        VIP_RELIABILITY_LEVEL rel = th_levels[li];
        char ph[80];
        snprintf(ph, sizeof ph, "client/server %s", th_rel_name(rel));
        th_phase(ph);
        VIP_VI_HANDLE cv = th_vi(&ea, rel, NULL, NULL), sv = th_vi(&eb, rel, NULL, NULL);
        th_server s;
        memset(&s, 0, sizeof s);
        s.nic = eb.nic;
        s.na = &eb.na;
        s.disc = "two-nic-svc";
        s.timeout = TH_WAIT_MS;
        s.vi = sv;
        s.action = TH_ACCEPT;
        th_server_start(&s);
        th_addr cl, sa;
        th_mkaddr(&cl, &ea.na, "c");
        th_mkaddr(&sa, &eb.na, "two-nic-svc");
        VIP_RETURN r = th_connect_request(cv, &cl.a, &sa.a, TH_WAIT_MS, NULL, TH_WAIT_MS);
        th_server_join(&s);
        EXPECT(r == VIP_SUCCESS && s.wait_rc == VIP_SUCCESS && s.answer_rc == VIP_SUCCESS,
               "connect %s / wait %s / accept %s", th_rs(r), th_rs(s.wait_rc), th_rs(s.answer_rc));
        if (r != VIP_SUCCESS || s.answer_rc != VIP_SUCCESS) {
            VipDisconnect(cv);
            VipDisconnect(sv);
            continue;
        }
        EXPECT(s.remote.a.HostAddressLen == ea.na.NicAddressLen &&
                   memcmp(s.remote.a.HostAddress, ea.na.LocalNicAddress, ea.na.NicAddressLen) == 0,
               "server sees the wrong client NIC address");
        exchange(&ea, cv, &eb, sv, 4000, 10 + li);
        exchange(&eb, sv, &ea, cv, 4000, 20 + li);
        exchange(&ea, cv, &eb, sv, 1 << 20, 30 + li);
        CHECK(VipDisconnect(sv));
        uint64_t end = th_now_ms() + TH_WAIT_MS;
        while (th_state(cv) != VIP_STATE_ERROR && th_now_ms() < end) VipExtProgress(eb.nic);
        EXPECT(th_state(cv) == VIP_STATE_ERROR, "client after server disconnect: %s", th_state_name(th_state(cv)));
        CHECK(VipDisconnect(cv));
        CHECK(VipDestroyVi(cv));
        CHECK(VipDestroyVi(sv));
    }

    th_phase("server on the other NIC: nobody waits");
    {
        VIP_VI_HANDLE cv = th_vi(&ea, VIP_SERVICE_UNRELIABLE, NULL, NULL);
        th_addr cl, sa;
        pthread_t t;
        __atomic_store_n(&stepping, 1, __ATOMIC_RELAXED);
        if (pthread_create(&t, NULL, stepper, eb.nic) != 0) FATAL("pthread_create");
        EXPECT_RC(VipConnectRequest(cv, th_mkaddr(&cl, &ea.na, "c"), th_mkaddr(&sa, &eb.na, "none"), TH_WAIT_MS, NULL),
                  VIP_NO_MATCH);
        __atomic_store_n(&stepping, 0, __ATOMIC_RELAXED);
        pthread_join(t, NULL);
        CHECK(VipDestroyVi(cv));
    }

    th_phase("peer-to-peer across NICs");
    for (int li = 0; li < 3; li++) {
        VIP_VI_HANDLE a = th_vi(&ea, th_levels[li], NULL, NULL), b = th_vi(&eb, th_levels[li], NULL, NULL);
        th_connect_peer2(&ea, a, &eb, b, "x2");
        exchange(&ea, a, &eb, b, 100, 40 + li);
        exchange(&eb, b, &ea, a, 9000, 50 + li);
        CHECK(VipDisconnect(a));
        uint64_t end = th_now_ms() + TH_WAIT_MS;
        while (th_state(b) != VIP_STATE_ERROR && th_now_ms() < end) VipExtProgress(ea.nic);
        EXPECT(th_state(b) == VIP_STATE_ERROR, "b after a's disconnect: %s", th_state_name(th_state(b)));
        CHECK(VipDisconnect(b));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_phase("closing a NIC breaks its connections on the other");
    {
        VIP_VI_HANDLE a = th_vi(&ea, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        VIP_VI_HANDLE b = th_vi(&eb, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        th_connect_peer2(&ea, a, &eb, b, "close");
        char *rb = th_alloc(&ea, 64);
        VIP_DESCRIPTOR *rd = th_desc(&ea, 1);
        th_set1(rd, ea.mh, rb, 64);
        CHECK(VipPostRecv(a, rd, ea.mh));
        CHECK(VipCloseNic(eb.nic));
        eb.nic = NULL;
        VIP_DESCRIPTOR *d = th_recv_done_must(a, rd, "recv on a VI whose peer NIC closed");
        EXPECT(th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR), "status 0x%x", d->CS.Status);
        EXPECT(th_state(a) == VIP_STATE_ERROR, "a: %s", th_state_name(th_state(a)));
    }

    th_close_env(&ea);
    th_close_env(&eb);
    return th_result();
}
