/*
 * mp_names: client/server across two processes, addresses through the name service.
 * Each rank publishes its NIC address as "rank<r>" (sv_boot_publish_name); after
 * VipNSInit(nic, NULL) each resolves the other by name and by address. Then rank 1
 * asks for a discriminator nobody waits on (VIP_NO_MATCH from the other process),
 * connects to rank 0's server ("mp-svc": VipConnectWait + VipConnectAccept), data goes
 * both ways, and a second request is rejected (VIP_REJECT).
 *
 *   softvia-run -n 2 mp_names --progress inline|thread
 */
#include "mp_common.h"

enum { N = 50 };

/* Steps this rank's NIC (inline mode) until key appears in the job's kv store. */
static void progress_until(th_env *e, const char *key) {
    uint64_t end = th_now_ms() + MP_BOOT_MS;
    char v[8];
    while (sv_boot_get(key, v, sizeof v, NULL, 0) != 0) {
        VipExtProgress(e->nic);
        if (th_now_ms() > end) FATAL("the other rank never set '%s'", key);
        sched_yield();
    }
}

static VIP_DESCRIPTOR *done_poll(VIP_VI_HANDLE vi, int recv, const char *what) {
    VIP_RETURN r;
    uint64_t end = th_now_ms() + 10000;
    VIP_DESCRIPTOR *d = NULL;
    while (!(d = th_done_poll(vi, recv, &r)) && r == VIP_TIMEOUT && th_now_ms() < end) {
    }
    if (!d) FATAL("%s: %s", what, th_rs(r));
    return d;
}

int main(int argc, char **argv) {
    const char *progress = argc > 2 && !strcmp(argv[1], "--progress") ? argv[2] : "inline";
    mp_init("mp_names", 2, 110);
    th_env e;
    mp_open(&e, progress, 1 << 20);
    int peer = 1 - mp_rank;
    char me[32], other[32];
    snprintf(me, sizeof me, "rank%d", mp_rank);
    snprintf(other, sizeof other, "rank%d", peer);

    th_phase("publish and resolve");
    if (sv_boot_publish_name(me, e.na.LocalNicAddress, e.na.NicAddressLen) != 0) FATAL("publish %s", me);
    mp_addrs ad; /* the truth, to compare the name service with */
    mp_exchange(&e, &ad);
    CHECK(VipNSInit(e.nic, NULL));
    th_addr a;
    memset(&a, 0, sizeof a);
    CHECK(VipNSGetHostByName(e.nic, other, &a.a, 0));
    EXPECT(a.a.HostAddressLen == ad.alen && memcmp(a.a.HostAddress, ad.addr[peer], ad.alen) == 0,
           "%s resolved to %u bytes that are not rank %d's address", other, a.a.HostAddressLen, peer);
    CHECK(VipNSGetHostByName(e.nic, me, &a.a, 0));
    EXPECT(memcmp(a.a.HostAddress, e.na.LocalNicAddress, e.na.NicAddressLen) == 0, "%s is not my address", me);
    char name[64];
    VIP_ULONG len = sizeof name;
    th_addr pa;
    mp_mkaddr(&pa, ad.addr[peer], ad.alen, "");
    EXPECT_RC(VipNSGetHostByAddr(e.nic, &pa.a, name, &len), VIP_SUCCESS);
    EXPECT(strcmp(name, other) == 0, "rank %d's address is named '%s'", peer, name);
    EXPECT_RC(VipNSGetHostByName(e.nic, "rank99", &a.a, 0), VIP_ERROR_NAMESERVICE);
    EXPECT_RC(VipNSGetHostByName(e.nic, other, &a.a, 1), VIP_ERROR_NAMESERVICE);
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier");

    VIP_VI_HANDLE vi = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    VIP_DESCRIPTOR *rd[N], *sd = th_desc(&e, 1);
    char *rb = th_alloc(&e, 64 * N), *sb = th_alloc(&e, 64);
    for (int i = 0; i < N; i++) {
        rd[i] = th_desc(&e, 1);
        th_set1(rd[i], e.mh, rb + 64 * i, 64);
        CHECK(VipPostRecv(vi, rd[i], e.mh)); /* posted before the connection exists */
    }

    if (mp_rank == 1) {
        th_phase("nobody waits on the other process: VIP_NO_MATCH");
        th_addr srv, cl;
        CHECK(VipNSGetHostByName(e.nic, other, &srv.a, 0));
        srv.a.DiscriminatorLen = 6;
        memcpy(srv.a.HostAddress + srv.a.HostAddressLen, "nobody", 6);
        mp_mkaddr(&cl, e.na.LocalNicAddress, e.na.NicAddressLen, "client");
        uint64_t t0 = th_now_ms();
        VIP_RETURN r = VipConnectRequest(vi, &cl.a, &srv.a, 3000, NULL);
        EXPECT(r == VIP_NO_MATCH, "request to a discriminator nobody waits on in rank 0 -> %s after %llu ms", th_rs(r),
               (unsigned long long)(th_now_ms() - t0));
        EXPECT(th_state(vi) == VIP_STATE_IDLE, "client VI %s", th_state_name(th_state(vi)));
        sv_boot_put("nomatch-done", "1", 1);

        th_phase("connect to rank 0's server by name");
        CHECK(VipNSGetHostByName(e.nic, other, &srv.a, 0));
        srv.a.DiscriminatorLen = 6;
        memcpy(srv.a.HostAddress + srv.a.HostAddressLen, "mp-svc", 6);
        char v[8];
        if (sv_boot_get("listening", v, sizeof v, NULL, MP_BOOT_MS) != 0) FATAL("server never listened");
        VIP_VI_ATTRIBUTES ra;
        r = th_connect_request(vi, &cl.a, &srv.a, 5000, &ra, 20000);
        if (r != VIP_SUCCESS) FATAL("VipConnectRequest to rank 0's server -> %s", th_rs(r));
        EXPECT(ra.ReliabilityLevel == VIP_SERVICE_RELIABLE_DELIVERY, "server's level %u", ra.ReliabilityLevel);
    } else {
        th_phase("answering for rank 1's unmatched request");
        progress_until(&e, "nomatch-done");
        th_phase("server: wait and accept");
        th_addr l, from;
        mp_mkaddr(&l, e.na.LocalNicAddress, e.na.NicAddressLen, "mp-svc");
        VIP_VI_ATTRIBUTES ra;
        VIP_CONN_HANDLE conn;
        sv_boot_put("listening", "1", 1); /* a request made before the wait gets NO_MATCH and retries */
        VIP_RETURN r = VipConnectWait(e.nic, &l.a, 20000, &from.a, &ra, &conn);
        if (r != VIP_SUCCESS) FATAL("VipConnectWait -> %s", th_rs(r));
        EXPECT(from.a.HostAddressLen == ad.alen && memcmp(from.a.HostAddress, ad.addr[1], ad.alen) == 0,
               "the request does not come from rank 1's address");
        len = sizeof name;
        EXPECT_RC(VipNSGetHostByAddr(e.nic, &from.a, name, &len), VIP_SUCCESS);
        EXPECT(strcmp(name, "rank1") == 0, "the client's address is named '%s'", name);
        r = VipConnectAccept(conn, vi);
        if (r != VIP_SUCCESS) FATAL("VipConnectAccept -> %s", th_rs(r));
    }

    th_phase("data both ways");
    for (int i = 0; i < N; i++) {
        snprintf(sb, 64, "from %d #%d", mp_rank, i);
        th_set1(sd, e.mh, sb, (uint32_t)strlen(sb) + 1);
        CHECK(VipPostSend(vi, sd, e.mh));
        VIP_DESCRIPTOR *d = done_poll(vi, 0, "send");
        if (d->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("send %d: status 0x%x", i, d->CS.Status);
    }
    for (int i = 0; i < N; i++) {
        VIP_DESCRIPTOR *d = done_poll(vi, 1, "receive");
        char want[64];
        snprintf(want, sizeof want, "from %d #%d", peer, i);
        EXPECT(d == rd[i] && (d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && !strcmp(rb + 64 * i, want),
               "message %d: status 0x%x '%s'", i, d->CS.Status, rb + 64 * i);
    }
    /* Both NICs keep stepping until both ranks are done: on a lossy wire a lost ACK is
     * repaired only while the receiver's NIC still runs, and with inline progress it runs
     * only inside our calls (a plain barrier here left the peer's last send unanswered
     * until its retry timeout). */
    char key[32];
    snprintf(key, sizeof key, "data-done.%d", mp_rank);
    sv_boot_put(key, "1", 1);
    snprintf(key, sizeof key, "data-done.%d", peer);
    progress_until(&e, key);
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier");
    CHECK(VipDisconnect(vi));
    th_drain(vi, 1000);
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier");
    /* the peer's disconnect may have put the VI in the error state: back to idle */
    CHECK(VipDisconnect(vi));

    th_phase("rejected");
    if (mp_rank == 1) {
        char v[8];
        if (sv_boot_get("listening2", v, sizeof v, NULL, MP_BOOT_MS) != 0) FATAL("server never listened");
        th_addr srv, cl;
        CHECK(VipNSGetHostByName(e.nic, other, &srv.a, 0));
        srv.a.DiscriminatorLen = 6;
        memcpy(srv.a.HostAddress + srv.a.HostAddressLen, "mp-svc", 6);
        mp_mkaddr(&cl, e.na.LocalNicAddress, e.na.NicAddressLen, "client");
        VIP_RETURN r = th_connect_request(vi, &cl.a, &srv.a, 5000, NULL, 20000);
        EXPECT(r == VIP_REJECT, "request to a rejecting server -> %s", th_rs(r));
        sv_boot_put("rejected", "1", 1);
    } else {
        th_addr l, from;
        mp_mkaddr(&l, e.na.LocalNicAddress, e.na.NicAddressLen, "mp-svc");
        VIP_CONN_HANDLE conn;
        sv_boot_put("listening2", "1", 1);
        VIP_RETURN r = VipConnectWait(e.nic, &l.a, 20000, &from.a, NULL, &conn);
        if (r != VIP_SUCCESS) FATAL("second VipConnectWait -> %s", th_rs(r));
        EXPECT_RC(VipConnectReject(conn), VIP_SUCCESS);
        progress_until(&e, "rejected");
    }
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier");
    CHECK(VipNSShutdown(e.nic));
    CHECK(VipCloseNic(e.nic));
    free(e.mem);
    return th_result();
}
