/*
 * dev_no_recv: a message that finds no receive descriptor. Unreliable: the receiving
 * NIC drops it (the receiver's VI counters show one drop per message), the send
 * completes normally, the VIs stay connected and the next message (also a multi-frame
 * one) is delivered intact. Reliable delivery / reliable reception: the connection
 * breaks, both VIs end in VIP_STATE_ERROR, every outstanding descriptor is flushed, and
 * on reliable reception the sender's descriptor does not complete successfully.
 */
#include "helpers.h"

static uint64_t drops(VIP_VI_HANDLE vi) {
    VIP_EXT_COUNTERS c;
    CHECK(VipExtQueryViCounters(vi, &c));
    return c.Drops;
}

int main(void) {
    th_init("dev_no_recv", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 20);
    uint32_t mtu = (uint32_t)e.na.NativeMTU;
    char *sb = th_alloc(&e, 4 * mtu), *rb = th_alloc(&e, 4 * mtu);
    VIP_DESCRIPTOR *sd = th_desc(&e, 1), *rd = th_desc(&e, 1), *ra = th_desc(&e, 1);

    th_phase("unreliable: dropped");
    {
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_UNRELIABLE, &a, &b, "nr-u");
        const uint32_t lens[] = {10, 3 * mtu + 5, 0};
        for (int k = 0; k < 3; k++) {
            uint32_t len = lens[k];
            uint64_t d0 = drops(b);
            th_fill(sb, len, 99);
            th_set1(sd, e.mh, sb, len);
            CHECK(VipPostSend(a, sd, e.mh));
            VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "send into nothing");
            EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%u bytes: unreliable send status 0x%x", len,
                   d->CS.Status);
            uint64_t end = th_now_ms() + TH_WAIT_MS;
            while (drops(b) == d0 && th_now_ms() < end) {
                th_step_all();
                th_sleep_ms(1);
            }
            EXPECT(drops(b) == d0 + 1, "%u bytes: receiver drops went %llu -> %llu, want +1", len,
                   (unsigned long long)d0, (unsigned long long)drops(b));
            EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "%u bytes: states %s %s",
                   len, th_state_name(th_state(a)), th_state_name(th_state(b)));
            /* the next message goes through whole */
            memset(rb, 0, 4 * mtu);
            th_set1(rd, e.mh, rb, 4 * mtu);
            CHECK(VipPostRecv(b, rd, e.mh));
            th_fill(sb, len + 7, 1000 + (uint32_t)k);
            th_set1(sd, e.mh, sb, len + 7);
            CHECK(VipPostSend(a, sd, e.mh));
            th_send_done_must(a, sd, "next send");
            d = th_recv_done_must(b, rd, "next recv");
            EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && d->CS.Length == len + 7 &&
                       th_verify(rb, len + 7, 1000 + (uint32_t)k) < 0,
                   "after a drop of %u bytes: status 0x%x len %u", len, d->CS.Status, d->CS.Length);
        }
        VIP_EXT_COUNTERS c;
        CHECK(VipExtQueryViCounters(b, &c));
        EXPECT(c.Errors == 0, "a drop counted as a descriptor error (%llu)", (unsigned long long)c.Errors);
        CHECK(VipDisconnect(a));
        CHECK(VipDisconnect(b));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    for (int li = 1; li < 3; li++) {
        VIP_RELIABILITY_LEVEL rel = th_levels[li];
        char ph[80];
        snprintf(ph, sizeof ph, "%s: connection breaks", th_rel_name(rel));
        th_phase(ph);
        VIP_VI_HANDLE a, b;
        th_pair(&e, rel, &a, &b, "nr-r");
        th_set1(ra, e.mh, rb, 64); /* outstanding on the sender's side */
        CHECK(VipPostRecv(a, ra, e.mh));
        uint64_t d0 = drops(b);
        th_set1(sd, e.mh, sb, 100);
        CHECK(VipPostSend(a, sd, e.mh));
        EXPECT(th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS), "%s: receiver %s", ph, th_state_name(th_state(b)));
        EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS), "%s: sender %s", ph, th_state_name(th_state(a)));
        EXPECT(drops(b) > d0, "%s: no drop counted", ph);
        VIP_DESCRIPTOR *d = th_send_wait(a, NULL);
        EXPECT(d == sd, "%s: send never completed", ph);
        if (d && rel == VIP_SERVICE_RELIABLE_RECEPTION)
            EXPECT(d->CS.Status & VIP_STATUS_ERROR_MASK, "%s: the undelivered send completed successfully (0x%x)", ph,
                   d->CS.Status);
        d = th_recv_wait(a, NULL);
        EXPECT(d == ra && th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR), "%s: sender's receive not flushed (0x%x)",
               ph, d ? d->CS.Status : 0);
        /* later posts: sends refused, receives flushed */
        EXPECT_RC(VipPostSend(a, sd, e.mh), VIP_INVALID_STATE);
        th_set1(rd, e.mh, rb, 64);
        CHECK(VipPostRecv(b, rd, e.mh));
        d = th_recv_wait(b, NULL);
        EXPECT(d == rd && th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR), "%s: receive on the broken VI: 0x%x", ph,
               d ? d->CS.Status : 0);
        CHECK(VipDisconnect(a));
        CHECK(VipDisconnect(b));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }
    th_nic_healthy(&e);
    th_close_env(&e);
    return th_result();
}
