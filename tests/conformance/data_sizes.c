/*
 * data_sizes: send/receive of 0 (immediate data only), 1, MTU-1, MTU, MTU+1, 2*MTU+1
 * bytes, 1 MiB and the largest transfer, on every reliability level; length, status
 * and content are checked, and receive buffers larger than the message are fine.
 */
#include "helpers.h"

int main(void) {
    th_init("data_sizes", 0);
    th_env e;
    th_open_env(&e, NULL, 0);
    const uint32_t mtu = (uint32_t)e.na.NativeMTU;
    const uint32_t maxt = (uint32_t)e.na.MaxTransferSize;
    printf("data_sizes: NativeMTU %u, MaxTransferSize %u\n", mtu, maxt);
    const uint32_t sizes[] = {0, 1, 2, 63, 64, mtu - 1, mtu, mtu + 1, 2 * mtu + 1, 1u << 20, maxt};
    const size_t nsizes = sizeof sizes / sizeof *sizes;

    /* separate send and receive buffers, registered once */
    char *sbuf = aligned_alloc(4096, maxt + 4096), *rbuf = aligned_alloc(4096, maxt + 4096);
    char *dmem = aligned_alloc(4096, 4096);
    if (!sbuf || !rbuf || !dmem) FATAL("out of memory");
    memset(dmem, 0, 4096);
    VIP_MEM_ATTRIBUTES ma = {e.ptag, 0, 0};
    VIP_MEM_HANDLE smh, rmh, dmh;
    CHECK(VipRegisterMem(e.nic, sbuf, maxt + 4096, &ma, &smh));
    CHECK(VipRegisterMem(e.nic, rbuf, maxt + 4096, &ma, &rmh));
    CHECK(VipRegisterMem(e.nic, dmem, 4096, &ma, &dmh));
    VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)dmem, *rd = (VIP_DESCRIPTOR *)(dmem + 256);

    for (int li = 0; li < 3; li++) {
        VIP_VI_HANDLE a, b;
        th_pair(&e, th_levels[li], &a, &b, "sz");
        for (size_t si = 0; si < nsizes; si++) {
            uint32_t len = sizes[si];
            for (int slack = 0; slack < 2; slack++) {
                if (slack && len == maxt) continue;
                char ph[96];
                snprintf(ph, sizeof ph, "%s: %u bytes%s", th_rel_name(th_levels[li]), len, slack ? " (+slack)" : "");
                th_phase(ph);
                uint32_t seed = (uint32_t)(li * 100 + si * 2 + slack);
                th_fill(sbuf, len, seed);
                memset(rbuf, 0xcc, len + 64);
                th_set1(rd, rmh, rbuf, len + (slack ? 4096 : 0));
                CHECK(VipPostRecv(b, rd, dmh));
                if (len == 0) {
                    /* immediate data only: no data segment at all */
                    memset(&sd->CS, 0, sizeof sd->CS);
                    sd->CS.SegCount = 0;
                    sd->CS.Control = VIP_CONTROL_IMMEDIATE;
                    sd->CS.ImmediateData = 0xfeed0000u + seed;
                } else {
                    th_set1(sd, smh, sbuf, len);
                }
                CHECK(VipPostSend(a, sd, dmh));
                VIP_DESCRIPTOR *s = NULL, *r = NULL, *d;
                uint64_t end = th_now_ms() + 4 * TH_WAIT_MS;
                while ((!s || !r) && th_now_ms() < end) {
                    if (!s && VipSendDone(a, &d) == VIP_SUCCESS) s = d;
                    if (!r && VipRecvDone(b, &d) == VIP_SUCCESS) r = d;
                }
                if (!s || !r) FATAL("%s: send %s, receive %s", ph, s ? "done" : "missing", r ? "done" : "missing");
                EXPECT(s == sd && (s->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_SEND &&
                           (s->CS.Status & VIP_STATUS_DONE),
                       "%s: send status 0x%x", ph, s->CS.Status);
                EXPECT(r == rd && (r->CS.Status & VIP_STATUS_ERROR_MASK) == 0 &&
                           (r->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_RECEIVE,
                       "%s: receive status 0x%x", ph, r->CS.Status);
                EXPECT(r->CS.Length == len, "%s: receive length %u", ph, r->CS.Length);
                if (len == 0) {
                    EXPECT((r->CS.Status & VIP_STATUS_IMMEDIATE) && r->CS.ImmediateData == 0xfeed0000u + seed,
                           "%s: immediate flag %u data 0x%x", ph, !!(r->CS.Status & VIP_STATUS_IMMEDIATE),
                           r->CS.ImmediateData);
                } else {
                    EXPECT(!(r->CS.Status & VIP_STATUS_IMMEDIATE), "%s: immediate flag without immediate data", ph);
                    long bad = th_verify(rbuf, len, seed);
                    EXPECT(bad < 0, "%s: data differs at byte %ld", ph, bad);
                    /* nothing written past the message */
                    EXPECT((uint8_t)rbuf[len] == 0xcc, "%s: byte after the message overwritten", ph);
                }
            }
        }
        /* a zero-length message with one empty data segment and no immediate data */
        th_phase("zero length, one empty segment");
        th_set1(rd, rmh, rbuf, 100);
        CHECK(VipPostRecv(b, rd, dmh));
        th_set1(sd, smh, sbuf, 0);
        CHECK(VipPostSend(a, sd, dmh));
        th_send_done_must(a, sd, "empty send");
        VIP_DESCRIPTOR *r = th_recv_done_must(b, rd, "empty recv");
        EXPECT((r->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_IMMEDIATE)) == 0 && r->CS.Length == 0,
               "empty message: status 0x%x len %u", r->CS.Status, r->CS.Length);
        /* a zero-length receive takes a zero-length message */
        th_set1(rd, rmh, rbuf, 0);
        rd->CS.SegCount = 0;
        CHECK(VipPostRecv(b, rd, dmh));
        th_set1(sd, smh, sbuf, 0);
        CHECK(VipPostSend(a, sd, dmh));
        th_send_done_must(a, sd, "empty send");
        r = th_recv_done_must(b, rd, "segmentless recv");
        EXPECT((r->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && r->CS.Length == 0, "segmentless receive: status 0x%x",
               r->CS.Status);
        /* The receiver drops nothing, unless the wire lost a frame: then the sender's resends
         * bring the frames behind the hole again, and the copies that arrived ahead of them
         * are dropped (go-back-N). Drops without any resend would be a real loss. */
        VIP_EXT_COUNTERS c, sc;
        CHECK(VipExtQueryViCounters(b, &c));
        CHECK(VipExtQueryViCounters(a, &sc));
        EXPECT(c.Errors == 0 && (c.Drops == 0 || (th_wire_lossy() && sc.Retransmits > 0)),
               "%s: receiver counted %llu errors %llu drops, sender %llu resends", th_rel_name(th_levels[li]),
               (unsigned long long)c.Errors, (unsigned long long)c.Drops, (unsigned long long)sc.Retransmits);
        CHECK(VipDisconnect(a));
        th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(b));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }
    th_close_env(&e);
    free(sbuf);
    free(rbuf);
    free(dmem);
    return th_result();
}
