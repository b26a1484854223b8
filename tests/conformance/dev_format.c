/*
 * dev_format: descriptors the NIC cannot execute complete with
 * VIP_STATUS_FORMAT_ERROR: SegCount over MaxSegmentsPerDesc, reserved control bits (on a
 * send or a receive), the reserved operation, an RDMA descriptor without its address
 * segment (SegCount 0; the status still names the RDMA operation), an RDMA read on an
 * unreliable VI, an RDMA read with immediate data. Every reliability level, with the
 * VIA rule for each (see th_bad_case).
 * Not errors: the queue fence bit, VIP_EXT_CONTROL_REPLY (0x8000, the steering
 * extension's reply bit; without steering the message takes the receive queue), and
 * the RDMA operations, which are executed.
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
/* An RDMA descriptor (Control = c) with SegCount 0: no address segment. */
static VIP_DESCRIPTOR *rdma_no_segments(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)e, (void)mh;
    memset(&d->CS, 0, sizeof d->CS);
    d->CS.Control = (VIP_UINT16)(uintptr_t)c;
    d->CS.SegCount = 0;
    return d;
}
/* A well-formed RDMA read (Control = c | OP_RDMAREAD) of 100 bytes of e's arena. */
static VIP_DESCRIPTOR *rdma_read(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)mh;
    char *remote = th_alloc(e, 128), *local = th_alloc(e, 128);
    th_set_rdma(d, VIP_CONTROL_OP_RDMAREAD, remote, e->mh, e->mh, local, 100, 1);
    d->CS.Control |= (VIP_UINT16)(uintptr_t)c;
    return d;
}

int main(void) {
    th_init("dev_format", 0);
    th_env e;
    th_open_env(&e, NULL, 4 << 20);
    uintptr_t maxseg = (uintptr_t)e.na.MaxSegmentsPerDesc;
    /* reserved control bits: VIP_CONTROL_RESERVED without VIP_EXT_CONTROL_REPLY */
    const uintptr_t reserved[] = {0x10, 0x100, 0x4000, 0x7ff0, 0x8000 | 0x10};
    for (int li = 0; li < 3; li++) {
        VIP_RELIABILITY_LEVEL r = th_levels[li];
        for (int side = 0; side < 2; side++) {
            th_bad_case(&e, r, side, too_many_segments, (void *)(maxseg + 1), VIP_STATUS_FORMAT_ERROR,
                        "SegCount = MaxSegmentsPerDesc + 1");
            th_bad_case(&e, r, side, too_many_segments, (void *)(uintptr_t)0xffff, VIP_STATUS_FORMAT_ERROR,
                        "SegCount = 0xffff");
            for (size_t k = 0; k < sizeof reserved / sizeof *reserved; k++) {
                char what[64];
                snprintf(what, sizeof what, "reserved control bits 0x%lx", (unsigned long)reserved[k]);
                th_bad_case(&e, r, side, control_bits, (void *)reserved[k], VIP_STATUS_FORMAT_ERROR, what);
            }
        }
        th_bad_case(&e, r, 0, control_bits, (void *)(uintptr_t)VIP_CONTROL_OP_RESERVED, VIP_STATUS_FORMAT_ERROR,
                    "reserved op");
        th_bad_case(&e, r, 0, control_bits, (void *)(uintptr_t)(VIP_CONTROL_OP_RESERVED | VIP_CONTROL_IMMEDIATE),
                    VIP_STATUS_FORMAT_ERROR, "reserved op with immediate data");
        /* RDMA without its address segment: the status names the RDMA operation */
        th_bad_case_op(&e, r, 0, rdma_no_segments, (void *)(uintptr_t)VIP_CONTROL_OP_RDMAWRITE,
                       VIP_STATUS_FORMAT_ERROR, VIP_STATUS_OP_RDMA_WRITE, "RDMA write with SegCount 0");
        th_bad_case_op(&e, r, 0, rdma_no_segments, (void *)(uintptr_t)(VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE),
                       VIP_STATUS_FORMAT_ERROR, VIP_STATUS_OP_RDMA_WRITE, "RDMA write with immediate, SegCount 0");
        th_bad_case_op(&e, r, 0, rdma_no_segments, (void *)(uintptr_t)VIP_CONTROL_OP_RDMAREAD,
                       VIP_STATUS_FORMAT_ERROR, VIP_STATUS_OP_RDMA_READ, "RDMA read with SegCount 0");
        if (r == VIP_SERVICE_UNRELIABLE) {
            /* RDMA read needs a reliable VI: a well-formed one is a format error here */
            th_bad_case_op(&e, r, 0, rdma_read, (void *)(uintptr_t)0, VIP_STATUS_FORMAT_ERROR,
                           VIP_STATUS_OP_RDMA_READ, "RDMA read on an unreliable VI");
        } else {
            /* an RDMA read carries no immediate data */
            th_bad_case_op(&e, r, 0, rdma_read, (void *)(uintptr_t)VIP_CONTROL_IMMEDIATE, VIP_STATUS_FORMAT_ERROR,
                           VIP_STATUS_OP_RDMA_READ, "RDMA read with immediate data");
        }
    }

    th_phase("VIP_EXT_CONTROL_REPLY is accepted (no steering: the receive queue)");
    for (int li = 0; li < 3; li++) {
        for (int where = 0; where < 3; where++) { /* 0: on the send, 1: on the receive, 2: both */
            char ph[96];
            snprintf(ph, sizeof ph, "reply bit on the %s, %s", where == 0 ? "send" : where == 1 ? "receive" : "both",
                     th_rel_name(th_levels[li]));
            th_phase(ph);
            VIP_VI_HANDLE a, b;
            th_pair(&e, th_levels[li], &a, &b, "reply");
            VIP_DESCRIPTOR *sd = th_desc(&e, 1), *rd = th_desc(&e, 1);
            char *sb = th_alloc(&e, 64), *rb = th_alloc(&e, 64);
            memcpy(sb, "reply", 6);
            th_set1(rd, e.mh, rb, 64);
            if (where) rd->CS.Control = VIP_EXT_CONTROL_REPLY;
            CHECK(VipPostRecv(b, rd, e.mh));
            th_set1(sd, e.mh, sb, 6);
            sd->CS.Control = (where != 1 ? VIP_EXT_CONTROL_REPLY : 0) | VIP_CONTROL_IMMEDIATE;
            sd->CS.ImmediateData = 0x5eed0000u + (uint32_t)where;
            CHECK(VipPostSend(a, sd, e.mh));
            VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "send");
            EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_SEND,
                   "%s: send status 0x%x", ph, d->CS.Status);
            d = th_recv_done_must(b, rd, "receive");
            EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RECEIVE &&
                       d->CS.Length == 6 && !strcmp(rb, "reply") && (d->CS.Status & VIP_STATUS_IMMEDIATE) &&
                       d->CS.ImmediateData == 0x5eed0000u + (uint32_t)where,
                   "%s: receive status 0x%x len %u imm 0x%x '%s'", ph, d->CS.Status, d->CS.Length,
                   d->CS.ImmediateData, rb);
            EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "%s: state %s / %s", ph,
                   th_state_name(th_state(a)), th_state_name(th_state(b)));
            CHECK(VipDisconnect(a));
            CHECK(VipDisconnect(b));
            th_drain(a, 100);
            th_drain(b, 100);
            CHECK(VipDestroyVi(a));
            CHECK(VipDestroyVi(b));
        }
    }

    th_phase("RDMA operations are executed");
    {
        th_region reg;
        th_region_new(&e, &reg, 4096, NULL, VIP_TRUE, VIP_TRUE);
        for (int li = 0; li < 3; li++) {
            char ph[96];
            snprintf(ph, sizeof ph, "RDMA executed, %s", th_rel_name(th_levels[li]));
            th_phase(ph);
            VIP_VI_HANDLE a, b;
            th_pair_rdma(&e, th_levels[li], &a, &b, "rdmaexec");
            VIP_DESCRIPTOR *sd = th_desc(&e, 2), *rd = th_desc(&e, 1);
            char *src = th_alloc(&e, 256), *back = th_alloc(&e, 256);
            th_fill(src, 200, 40 + (uint32_t)li);
            memset(reg.p, TH_GUARD_BYTE, reg.len);
            /* a write with immediate data, so that the target's receive tells when it landed */
            th_set1(rd, e.mh, NULL, 0);
            rd->CS.SegCount = 0;
            CHECK(VipPostRecv(b, rd, e.mh));
            th_set_rdma(sd, VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, reg.p + 100, reg.mh, e.mh, src, 200, 1);
            sd->CS.ImmediateData = 77;
            CHECK(VipPostSend(a, sd, e.mh));
            VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "RDMA write");
            EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RDMA_WRITE,
                   "%s: RDMA write status 0x%x", ph, d->CS.Status);
            d = th_recv_done_must(b, rd, "RDMA write's immediate data");
            EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_REMOTE_RDMA_WRITE,
                   "%s: target status 0x%x", ph, d->CS.Status);
            EXPECT(th_verify(reg.p + 100, 200, 40 + (uint32_t)li) < 0 && th_guard_check(reg.p, 100) < 0 &&
                       th_guard_check(reg.p + 300, reg.len - 300) < 0,
                   "%s: the written region is not as expected", ph);
            if (th_levels[li] != VIP_SERVICE_UNRELIABLE) {
                memset(back, 0, 256);
                th_set_rdma(sd, VIP_CONTROL_OP_RDMAREAD, reg.p + 100, reg.mh, e.mh, back, 200, 1);
                CHECK(VipPostSend(a, sd, e.mh));
                d = th_send_done_must(a, sd, "RDMA read");
                EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RDMA_READ &&
                           d->CS.Length == 200,
                       "%s: RDMA read status 0x%x length %u", ph, d->CS.Status, d->CS.Length);
                EXPECT(th_verify(back, 200, 40 + (uint32_t)li) < 0, "%s: RDMA read data", ph);
            }
            CHECK(VipDisconnect(a));
            CHECK(VipDisconnect(b));
            th_drain(a, 100);
            th_drain(b, 100);
            CHECK(VipDestroyVi(a));
            CHECK(VipDestroyVi(b));
        }
        th_region_free(&reg);
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
