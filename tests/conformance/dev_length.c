/*
 * dev_length: length checks by the NIC. A message longer than the receive descriptor's
 * segments completes the receive with VIP_STATUS_LENGTH_ERROR; a send longer than the
 * VI's MaxTransferSize, or than the connected peer's, completes with
 * VIP_STATUS_LENGTH_ERROR on the send. Every reliability level (see th_bad_case).
 */
#include "helpers.h"

/* receive side: a receive of 3 bytes for the 6-byte message th_bad_case sends */
static VIP_DESCRIPTOR *short_receive(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)mh, (void)c;
    th_set1(d, e->mh, th_alloc(e, 64), 3);
    return d;
}
static VIP_DESCRIPTOR *short_receive_segments(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)mh, (void)c;
    char *p = th_alloc(e, 64);
    d->CS.SegCount = 3;
    for (int i = 0; i < 3; i++) {
        th_seg(d, i)->Data.Address = p + 8 * i;
        th_seg(d, i)->Handle = e->mh;
        th_seg(d, i)->Length = i == 1 ? 0 : 2; /* 4 bytes in all */
    }
    return d;
}
static VIP_DESCRIPTOR *no_room(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)e, (void)mh, (void)c;
    d->CS.SegCount = 0; /* takes only empty messages */
    return d;
}
/* send side: more than the VI's MaxTransferSize (the pair is created with the NIC's
 * maximum, so a segment list adding up to more than that) */
static VIP_DESCRIPTOR *over_max_transfer(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)mh;
    char *big = c;
    uint32_t half = (uint32_t)(e->na.MaxTransferSize / 2);
    d->CS.SegCount = 3;
    for (int i = 0; i < 3; i++) {
        th_seg(d, i)->Data.Address = big;
        th_seg(d, i)->Handle = e->mh;
        th_seg(d, i)->Length = i < 2 ? half : 1;
    }
    return d;
}

int main(void) {
    th_init("dev_length", 0);
    th_env e;
    th_open_env(&e, NULL, (size_t)(8 << 20) + (size_t)(16 << 20));
    /* MaxTransferSize/2 bytes in the arena for the over-size send */
    char *big = th_alloc(&e, (size_t)(e.na.MaxTransferSize / 2));
    for (int li = 0; li < 3; li++) {
        VIP_RELIABILITY_LEVEL r = th_levels[li];
        th_bad_case(&e, r, 1, short_receive, NULL, VIP_STATUS_LENGTH_ERROR, "receive too small");
        th_bad_case(&e, r, 1, short_receive_segments, NULL, VIP_STATUS_LENGTH_ERROR, "receive segments too small");
        th_bad_case(&e, r, 1, no_room, NULL, VIP_STATUS_LENGTH_ERROR, "receive without segments");
        th_bad_case(&e, r, 0, over_max_transfer, big, VIP_STATUS_LENGTH_ERROR, "send over MaxTransferSize");
    }

    /* the VI's own MaxTransferSize, and the peer's */
    for (int li = 0; li < 3; li++) {
        for (int whose = 0; whose < 2; whose++) {
            char ph[96];
            snprintf(ph, sizeof ph, "%s: send over the %s MaxTransferSize", th_rel_name(th_levels[li]),
                     whose ? "peer's" : "VI's own");
            th_phase(ph);
            VIP_VI_ATTRIBUTES va;
            memset(&va, 0, sizeof va);
            va.ReliabilityLevel = th_levels[li];
            va.Ptag = e.ptag;
            VIP_VI_HANDLE a, b;
            va.MaxTransferSize = whose ? 0 : 1000;
            CHECK(VipCreateVi(e.nic, &va, NULL, NULL, &a));
            va.MaxTransferSize = whose ? 1000 : 0;
            CHECK(VipCreateVi(e.nic, &va, NULL, NULL, &b));
            th_connect_peer(&e, a, b, "mts");
            char *rb = th_alloc(&e, 4096);
            VIP_DESCRIPTOR *sd = th_desc(&e, 1), *rd = th_desc(&e, 1);
            th_set1(rd, e.mh, rb, 4096);
            CHECK(VipPostRecv(b, rd, e.mh));
            /* exactly the limit is fine */
            th_set1(sd, e.mh, big, 1000);
            CHECK(VipPostSend(a, sd, e.mh));
            VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "send at the limit");
            EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%s: 1000 bytes: status 0x%x", ph, d->CS.Status);
            d = th_recv_done_must(b, rd, "recv at the limit");
            EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && d->CS.Length == 1000, "%s: recv 0x%x len %u", ph,
                   d->CS.Status, d->CS.Length);
            th_set1(rd, e.mh, rb, 4096);
            CHECK(VipPostRecv(b, rd, e.mh));
            th_set1(sd, e.mh, big, 1001);
            CHECK(VipPostSend(a, sd, e.mh));
            d = th_send_done_must(a, sd, "send over the limit");
            EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == VIP_STATUS_LENGTH_ERROR, "%s: 1001 bytes: status 0x%x", ph,
                   d->CS.Status);
            if (th_levels[li] == VIP_SERVICE_UNRELIABLE) {
                EXPECT(th_state(a) == VIP_STATE_CONNECTED, "%s: state %s", ph, th_state_name(th_state(a)));
                VIP_DESCRIPTOR *x;
                EXPECT_RC(VipRecvDone(b, &x), VIP_NOT_DONE); /* nothing was sent */
            } else {
                EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS), "%s: state %s", ph, th_state_name(th_state(a)));
                EXPECT(th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS), "%s: peer state %s", ph,
                       th_state_name(th_state(b)));
            }
            VipDisconnect(a);
            VipDisconnect(b);
            th_drain(a, 500);
            th_drain(b, 500);
            CHECK(VipDestroyVi(a));
            CHECK(VipDestroyVi(b));
        }
    }
    th_nic_healthy(&e);
    th_close_env(&e);
    return th_result();
}
