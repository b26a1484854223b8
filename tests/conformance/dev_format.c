/*
 * dev_format: descriptors the NIC cannot execute complete with
 * VIP_STATUS_FORMAT_ERROR: SegCount over MaxSegmentsPerDesc, reserved control bits,
 * RDMA write / RDMA read / the reserved op (RDMA is not implemented yet), reserved
 * bits on a receive. Every reliability level, with the VIA rule for each (see
 * th_bad_case). The queue fence bit is not reserved: such a send works.
 */
#include "helpers.h"

static VIP_DESCRIPTOR *too_many_segments(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)mh;
    unsigned n = (unsigned)(uintptr_t)c;
    /* the segments themselves are fine and lie in registered memory (room for 64) */
    unsigned fill = n > 64 ? 64 : n;
    char *buf = th_alloc(e, 64);
    d->CS.SegCount = (VIP_UINT16)n;
    for (unsigned i = 0; i < fill; i++) {
        th_seg(d, i)->Data.Address = buf;
        th_seg(d, i)->Handle = e->mh;
        th_seg(d, i)->Length = 1;
    }
    return d;
}
static VIP_DESCRIPTOR *control_bits(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)mh;
    th_set1(d, e->mh, th_alloc(e, 64), 10);
    d->CS.Control = (VIP_UINT16)(uintptr_t)c;
    return d;
}

int main(void) {
    th_init("dev_format", 0);
    th_env e;
    th_open_env(&e, NULL, 4 << 20);
    uintptr_t maxseg = (uintptr_t)e.na.MaxSegmentsPerDesc;
    for (int li = 0; li < 3; li++) {
        VIP_RELIABILITY_LEVEL r = th_levels[li];
        for (int side = 0; side < 2; side++) {
            th_bad_case(&e, r, side, too_many_segments, (void *)(maxseg + 1), VIP_STATUS_FORMAT_ERROR,
                        "SegCount = MaxSegmentsPerDesc + 1");
            th_bad_case(&e, r, side, too_many_segments, (void *)(uintptr_t)0xffff, VIP_STATUS_FORMAT_ERROR,
                        "SegCount = 0xffff");
            th_bad_case(&e, r, side, control_bits, (void *)(uintptr_t)0x10, VIP_STATUS_FORMAT_ERROR,
                        "reserved control bit 0x10");
            th_bad_case(&e, r, side, control_bits, (void *)(uintptr_t)0x8000, VIP_STATUS_FORMAT_ERROR,
                        "reserved control bit 0x8000");
        }
        th_bad_case(&e, r, 0, control_bits, (void *)(uintptr_t)VIP_CONTROL_OP_RDMAWRITE, VIP_STATUS_FORMAT_ERROR,
                    "RDMA write");
        th_bad_case(&e, r, 0, control_bits, (void *)(uintptr_t)VIP_CONTROL_OP_RDMAREAD, VIP_STATUS_FORMAT_ERROR,
                    "RDMA read");
        th_bad_case(&e, r, 0, control_bits, (void *)(uintptr_t)VIP_CONTROL_OP_RESERVED, VIP_STATUS_FORMAT_ERROR,
                    "reserved op");
        th_bad_case(&e, r, 0, control_bits, (void *)(uintptr_t)(VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE),
                    VIP_STATUS_FORMAT_ERROR, "RDMA write with immediate data");
    }

    th_phase("queue fence is a valid control bit");
    for (int li = 0; li < 3; li++) {
        VIP_VI_HANDLE a, b;
        th_pair(&e, th_levels[li], &a, &b, "fence");
        VIP_DESCRIPTOR *sd = th_desc(&e, 1), *rd = th_desc(&e, 1);
        char *sb = th_alloc(&e, 64), *rb = th_alloc(&e, 64);
        memcpy(sb, "fenced", 7);
        th_set1(rd, e.mh, rb, 64);
        CHECK(VipPostRecv(b, rd, e.mh));
        th_set1(sd, e.mh, sb, 7);
        sd->CS.Control = VIP_CONTROL_QFENCE;
        CHECK(VipPostSend(a, sd, e.mh));
        VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "fenced send");
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%s: fenced send status 0x%x", th_rel_name(th_levels[li]),
               d->CS.Status);
        d = th_recv_done_must(b, rd, "fenced recv");
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && !strcmp(rb, "fenced"), "fenced recv status 0x%x",
               d->CS.Status);
        CHECK(VipDisconnect(a));
        CHECK(VipDisconnect(b));
        th_drain(b, 100);
    }
    th_nic_healthy(&e);
    th_close_env(&e);
    return th_result();
}
