/*
 * cs_connect: client/server connection in one process, server side driven from a
 * second thread. VipConnectWait returns the client's address and VI attributes,
 * VipConnectRequest returns the server VI's attributes; both VIs end up connected and
 * carry data both ways; the server may serve several clients on one discriminator.
 */
#include "helpers.h"

static void exchange(th_env *e, VIP_VI_HANDLE a, VIP_VI_HANDLE b, uint32_t len, uint32_t seed) {
    char *sb = th_alloc(e, len ? len : 1), *rb = th_alloc(e, len + 64);
    VIP_DESCRIPTOR *sd = th_desc(e, 1), *rd = th_desc(e, 1);
    th_fill(sb, len, seed);
    th_set1(rd, e->mh, rb, len + 64);
    CHECK(VipPostRecv(b, rd, e->mh));
    th_set1(sd, e->mh, sb, len);
    CHECK(VipPostSend(a, sd, e->mh));
    th_send_done_must(a, sd, "send");
    VIP_DESCRIPTOR *d = th_recv_done_must(b, rd, "recv");
    EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "recv status 0x%x", d->CS.Status);
    EXPECT(d->CS.Length == len, "recv length %u want %u", d->CS.Length, len);
    EXPECT(th_verify(rb, len, seed) < 0, "data differs at %ld", th_verify(rb, len, seed));
}

int main(void) {
    th_init("cs_connect", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 20);

    for (int li = 0; li < 3; li++) {
        VIP_RELIABILITY_LEVEL rel = th_levels[li];
        th_phase(th_rel_name(rel));
        /* server VI: RDMA write enabled, small MaxTransferSize; client: defaults */
        VIP_VI_ATTRIBUTES sva;
        memset(&sva, 0, sizeof sva);
        sva.ReliabilityLevel = rel;
        sva.Ptag = e.ptag;
        sva.MaxTransferSize = 65536;
        sva.EnableRdmaWrite = VIP_TRUE;
        VIP_VI_HANDLE srv_vi, cli_vi;
        CHECK(VipCreateVi(e.nic, &sva, NULL, NULL, &srv_vi));
        VIP_VI_ATTRIBUTES cva = sva;
        cva.MaxTransferSize = 32768;
        cva.EnableRdmaWrite = VIP_FALSE;
        CHECK(VipCreateVi(e.nic, &cva, NULL, NULL, &cli_vi));

        th_server s;
        memset(&s, 0, sizeof s);
        s.nic = e.nic;
        s.na = &e.na;
        s.disc = "service-1";
        s.timeout = TH_WAIT_MS;
        s.vi = srv_vi;
        s.action = TH_ACCEPT;
        th_server_start(&s);
        th_addr cl, sa;
        th_mkaddr(&cl, &e.na, "client-x");
        th_mkaddr(&sa, &e.na, "service-1");
        VIP_VI_ATTRIBUTES rattrs;
        memset(&rattrs, 0xee, sizeof rattrs);
        VIP_RETURN r = th_connect_request(cli_vi, &cl.a, &sa.a, TH_WAIT_MS, &rattrs, TH_WAIT_MS);
        th_server_join(&s);
        EXPECT(r == VIP_SUCCESS, "VipConnectRequest -> %s", th_rs(r));
        EXPECT(s.wait_rc == VIP_SUCCESS, "VipConnectWait -> %s", th_rs(s.wait_rc));
        EXPECT(s.answer_rc == VIP_SUCCESS, "VipConnectAccept -> %s", th_rs(s.answer_rc));
        if (r != VIP_SUCCESS || s.answer_rc != VIP_SUCCESS) return th_result();

        /* what each side learnt about the other */
        EXPECT(rattrs.ReliabilityLevel == rel && rattrs.MaxTransferSize == 65536 &&
                   rattrs.EnableRdmaWrite == VIP_TRUE && rattrs.EnableRdmaRead == VIP_FALSE,
               "client sees server attrs: rel %u mts %llu w %u r %u", rattrs.ReliabilityLevel,
               (unsigned long long)rattrs.MaxTransferSize, rattrs.EnableRdmaWrite, rattrs.EnableRdmaRead);
        EXPECT(s.remote_attrs.ReliabilityLevel == rel && s.remote_attrs.MaxTransferSize == 32768 &&
                   s.remote_attrs.EnableRdmaWrite == VIP_FALSE,
               "server sees client attrs: rel %u mts %llu w %u", s.remote_attrs.ReliabilityLevel,
               (unsigned long long)s.remote_attrs.MaxTransferSize, s.remote_attrs.EnableRdmaWrite);
        EXPECT(s.remote.a.HostAddressLen == e.na.NicAddressLen &&
                   memcmp(s.remote.a.HostAddress, e.na.LocalNicAddress, e.na.NicAddressLen) == 0,
               "server sees a client NIC address of %u bytes that is not the client's", s.remote.a.HostAddressLen);

        EXPECT(th_state(cli_vi) == VIP_STATE_CONNECTED, "client state %s", th_state_name(th_state(cli_vi)));
        EXPECT(th_state(srv_vi) == VIP_STATE_CONNECTED, "server state %s", th_state_name(th_state(srv_vi)));
        VIP_VI_ATTRIBUTES q;
        CHECK(VipQueryVi(cli_vi, NULL, &q, NULL, NULL));
        EXPECT(q.MaxTransferSize == 32768 && q.Ptag == e.ptag, "client's own attrs changed by connecting");

        th_phase("data over a client/server connection");
        exchange(&e, cli_vi, srv_vi, 1000, 1 + li);
        exchange(&e, srv_vi, cli_vi, 20000, 7 + li);
        /* a connected VI cannot be accepted onto or requested from again */
        th_addr x;
        th_mkaddr(&x, &e.na, "service-1");
        EXPECT_RC(VipConnectRequest(cli_vi, &cl.a, &x.a, 100, NULL), VIP_INVALID_STATE);

        CHECK(VipDisconnect(cli_vi));
        EXPECT(th_wait_state(srv_vi, VIP_STATE_ERROR, TH_WAIT_MS), "server after client disconnect: %s",
               th_state_name(th_state(srv_vi)));
        CHECK(VipDisconnect(srv_vi));
        CHECK(VipDestroyVi(cli_vi));
        CHECK(VipDestroyVi(srv_vi));
    }

    th_phase("client's discriminator reaches the server");
    {
        VIP_VI_HANDLE sv = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        VIP_VI_HANDLE cv = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        th_server s;
        memset(&s, 0, sizeof s);
        s.nic = e.nic;
        s.na = &e.na;
        s.disc = "svc-disc";
        s.timeout = TH_WAIT_MS;
        s.vi = sv;
        s.action = TH_ACCEPT;
        th_server_start(&s);
        th_addr cl, sa;
        th_mkaddr(&cl, &e.na, "client-disc-42");
        th_mkaddr(&sa, &e.na, "svc-disc");
        VIP_RETURN r = th_connect_request(cv, &cl.a, &sa.a, TH_WAIT_MS, NULL, TH_WAIT_MS);
        th_server_join(&s);
        EXPECT(r == VIP_SUCCESS && s.answer_rc == VIP_SUCCESS, "connect %s / accept %s", th_rs(r),
               th_rs(s.answer_rc));
        /* VipConnectWait's RemoteAddr is the requesting endpoint: the client NIC's
         * address followed by the discriminator of the client's LocalAddr.
         * (docs/vipl-reference.md, fixed deviation 1) */
        const char *want = "client-disc-42";
        const uint8_t *disc = s.remote.a.HostAddress + s.remote.a.HostAddressLen;
        EXPECT(s.remote.a.DiscriminatorLen == strlen(want) && memcmp(disc, want, strlen(want)) == 0,
               "server sees remote discriminator '%.*s' (%u bytes), want '%s'", (int)s.remote.a.DiscriminatorLen,
               (const char *)disc, s.remote.a.DiscriminatorLen, want);
        if (r == VIP_SUCCESS) CHECK(VipDisconnect(cv));
        th_wait_state(sv, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(sv));
        CHECK(VipDestroyVi(cv));
        CHECK(VipDestroyVi(sv));
    }

    th_phase("one discriminator, several clients in turn");
    {
        enum { K = 5 };
        VIP_VI_HANDLE sv[K], cv[K];
        for (int i = 0; i < K; i++) {
            sv[i] = th_vi(&e, VIP_SERVICE_UNRELIABLE, NULL, NULL);
            cv[i] = th_vi(&e, VIP_SERVICE_UNRELIABLE, NULL, NULL);
            th_server s;
            memset(&s, 0, sizeof s);
            s.nic = e.nic;
            s.na = &e.na;
            s.disc = "multi";
            s.timeout = TH_WAIT_MS;
            s.vi = sv[i];
            s.action = TH_ACCEPT;
            th_server_start(&s);
            th_addr cl, sa;
            th_mkaddr(&cl, &e.na, "c");
            th_mkaddr(&sa, &e.na, "multi");
            VIP_RETURN r = th_connect_request(cv[i], &cl.a, &sa.a, TH_WAIT_MS, NULL, TH_WAIT_MS);
            th_server_join(&s);
            EXPECT(r == VIP_SUCCESS && s.answer_rc == VIP_SUCCESS, "client %d: %s / %s", i, th_rs(r),
                   th_rs(s.answer_rc));
        }
        /* each pair is its own connection */
        for (int i = 0; i < K; i++) exchange(&e, cv[i], sv[i], 64, 100 + i);
    }

    th_close_env(&e);
    return th_result();
}
