/*
 * rdma_write: RDMA write (VIP_CONTROL_OP_RDMAWRITE), with and without immediate data, at
 * every reliability level: sizes 0, 1, around the MTU (and around an RDMA write
 * fragment's payload, which the remote address shortens), two MTUs and 300 KiB,
 * gathered from one or several local segments (from two registrations, with zero-length
 * segments among them), up to MaxSegmentsPerDesc segments; written at an unaligned
 * offset of a region registered with RDMA write enabled, and nothing around the written
 * range changes (guard bytes, inside and outside the region).
 *
 * The initiator's descriptor completes with VIP_STATUS_OP_RDMA_WRITE and Length = bytes
 * written (reliable levels: only once the data is placed, so it is checked right at
 * the completion). With immediate data the write consumes a receive descriptor at the
 * target: VIP_STATUS_OP_REMOTE_RDMA_WRITE | VIP_STATUS_IMMEDIATE, ImmediateData, Length =
 * bytes written, and its own data segments are not touched. Without immediate data the
 * target's receive queue is not touched (a send that follows the write on the same VI
 * takes the receive, and finds the data placed). A burst of writes completes in post
 * order; a pair across two NICs works too.
 * With immediate data and no receive posted, the data is placed and then unreliable
 * drops the notification (Drops, connection up) while reliable levels complete the
 * write with VIP_STATUS_REMOTE_DESC_ERROR and break. A write over the initiator's or the
 * target VI's MaxTransferSize is VIP_STATUS_LENGTH_ERROR (exactly the limit is fine).
 */
#include "helpers.h"

enum { BIG = 300 * 1024, OFF = 3 /* unaligned target offset */ };

static th_env E;
static th_region REG;   /* the target: RDMA write enabled */
static th_region LOCAL2; /* a second local registration to gather from */
static char *expect;    /* what the message should be */
static uint32_t mtu;

/* The target region is as it should be after writing expect[0, len) at OFF. */
static void check_target(const char *ph, uint32_t len) {
    long g;
    EXPECT((g = th_guard_check(REG.base, TH_GUARD)) < 0, "%s: guard before the region changed at %ld", ph, g);
    EXPECT((g = th_guard_check(REG.p, OFF)) < 0, "%s: region bytes before the target range changed at %ld", ph, g);
    long k = -1;
    for (uint32_t i = 0; i < len && k < 0; i++)
        if (REG.p[OFF + i] != expect[i]) k = (long)i;
    EXPECT(k < 0, "%s: written data differs from the source at byte %ld", ph, k);
    EXPECT((g = th_guard_check(REG.p + OFF + len, REG.len - OFF - len)) < 0,
           "%s: region bytes after the target range changed at +%ld", ph, g);
    EXPECT((g = th_guard_check(REG.p + REG.len, TH_GUARD)) < 0, "%s: guard after the region changed at %ld", ph, g);
}

/* Builds the write's local segments: nloc pieces of expect[0, len), alternately copied
 * to the arena and to LOCAL2, with a zero-length segment after the first when nloc > 2.
 * nloc 0: the address segment only (len must be 0). */
static void build_write(VIP_DESCRIPTOR *d, uint32_t len, unsigned nloc, int imm, uint32_t immv) {
    memset(&d->CS, 0, sizeof d->CS);
    d->CS.Control = VIP_CONTROL_OP_RDMAWRITE | (imm ? VIP_CONTROL_IMMEDIATE : 0);
    d->CS.ImmediateData = immv;
    d->CS.SegCount = (VIP_UINT16)(1 + nloc);
    VIP_ADDRESS_SEGMENT *a = (VIP_ADDRESS_SEGMENT *)th_seg(d, 0);
    memset(a, 0, sizeof *a);
    a->Data.Address = REG.p + OFF;
    a->Handle = REG.mh;
    size_t l2 = 0;
    uint32_t off = 0;
    unsigned data_segs = nloc > 2 ? nloc - 1 : nloc, k = 0;
    for (unsigned i = 0; i < nloc; i++) {
        VIP_DATA_SEGMENT *s = th_seg(d, 1 + i);
        if (nloc > 2 && i == 1) { /* zero-length: skipped, not checked */
            s->Data.Address = NULL;
            s->Handle = 0;
            s->Length = 0;
            continue;
        }
        uint32_t part = k + 1 == data_segs ? len - off : len / data_segs;
        char *buf;
        VIP_MEM_HANDLE mh;
        if (k & 1) {
            buf = LOCAL2.p + l2;
            l2 += part;
            mh = LOCAL2.mh;
        } else {
            buf = th_alloc(&E, part ? part : 1);
            mh = E.mh;
        }
        memcpy(buf, expect + off, part);
        s->Data.Address = buf;
        s->Handle = mh;
        s->Length = part;
        off += part;
        k++;
    }
}

/* One write on the connected pair a -> b; checks everything in the header. */
static void one_write(VIP_VI_HANDLE a, VIP_VI_HANDLE b, VIP_RELIABILITY_LEVEL rel, uint32_t len, unsigned nloc,
                      int imm, uint32_t seed) {
    char ph[128];
    snprintf(ph, sizeof ph, "%s, %u bytes, %u local segments, %s", th_rel_name(rel), len, nloc,
             imm ? "immediate" : "no immediate");
    th_phase(ph);
    size_t mark = E.used;
    th_fill(expect, len, seed);
    memset(REG.p, TH_GUARD_BYTE, REG.len);
    VIP_DESCRIPTOR *sd = th_desc(&E, 1 + nloc), *rd = th_desc(&E, 1), *ms = th_desc(&E, 1);
    char *rbuf = th_alloc(&E, 64), *mbuf = th_alloc(&E, 64);
    memset(rbuf, TH_GUARD_BYTE, 64);
    uint32_t immv = 0xC0DE0000u ^ seed;
    /* the receive an immediate write takes, or the marker send that follows a plain one */
    th_set1(rd, E.mh, rbuf, 64);
    CHECK(VipPostRecv(b, rd, E.mh));
    build_write(sd, len, nloc, imm, immv);
    CHECK(VipPostSend(a, sd, E.mh));
    VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "RDMA write");
    EXPECT((d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) ==
               (VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE),
           "%s: initiator status 0x%x, want DONE|OP_RDMA_WRITE", ph, d->CS.Status);
    EXPECT(d->CS.Length == len, "%s: initiator Length %u, want %u", ph, d->CS.Length, len);
    /* reliable levels complete the write only once the target placed it */
    if (rel != VIP_SERVICE_UNRELIABLE) check_target(ph, len);
    if (imm) {
        d = th_recv_done_must(b, rd, "immediate data's receive");
        EXPECT(d->CS.Status == (VIP_STATUS_DONE | VIP_STATUS_OP_REMOTE_RDMA_WRITE | VIP_STATUS_IMMEDIATE),
               "%s: target receive status 0x%x, want DONE|OP_REMOTE_RDMA_WRITE|IMMEDIATE", ph, d->CS.Status);
        EXPECT(d->CS.ImmediateData == immv, "%s: ImmediateData 0x%x, want 0x%x", ph, d->CS.ImmediateData, immv);
        EXPECT(d->CS.Length == len, "%s: target receive Length %u, want %u", ph, d->CS.Length, len);
        EXPECT(th_guard_check(rbuf, 64) < 0, "%s: the receive's own buffer was written", ph);
    } else {
        /* the write took no receive: a send after it takes rd, and the data is in place */
        memcpy(mbuf, "after", 6);
        th_set1(ms, E.mh, mbuf, 6);
        CHECK(VipPostSend(a, ms, E.mh));
        th_send_done_must(a, ms, "marker send");
        d = th_recv_done_must(b, rd, "marker receive");
        EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK | VIP_STATUS_IMMEDIATE)) ==
                       VIP_STATUS_OP_RECEIVE &&
                   d->CS.Length == 6 && !memcmp(rbuf, "after", 6),
               "%s: the send after the write: status 0x%x length %u (a write without immediate data took the "
               "receive?)",
               ph, d->CS.Status, d->CS.Length);
    }
    check_target(ph, len);
    EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "%s: states %s / %s", ph,
           th_state_name(th_state(a)), th_state_name(th_state(b)));
    E.used = mark; /* descriptors and buffers are free again */
}

static void burst(VIP_VI_HANDLE a, VIP_VI_HANDLE b, VIP_RELIABILITY_LEVEL rel) {
    enum { N = 24, LEN = 5000 };
    char ph[96];
    snprintf(ph, sizeof ph, "burst of %d writes, %s", N, th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    memset(REG.p, TH_GUARD_BYTE, REG.len);
    VIP_DESCRIPTOR *sd[N], *rd[N];
    char *src = th_alloc(&E, (size_t)N * LEN);
    int nimm = 0;
    for (int i = 0; i < N; i++) {
        th_fill(src + (size_t)i * LEN, LEN, 900 + (uint32_t)i);
        if (i % 3 != 1) {
            rd[nimm] = th_desc(&E, 1);
            th_set1(rd[nimm], E.mh, NULL, 0);
            rd[nimm]->CS.SegCount = 0;
            CHECK(VipPostRecv(b, rd[nimm], E.mh));
            nimm++;
        }
    }
    for (int i = 0; i < N; i++) {
        sd[i] = th_desc(&E, 2);
        th_set_rdma(sd[i], VIP_CONTROL_OP_RDMAWRITE | (i % 3 != 1 ? VIP_CONTROL_IMMEDIATE : 0),
                    REG.p + (size_t)i * LEN, REG.mh, E.mh, src + (size_t)i * LEN, LEN, 1);
        sd[i]->CS.ImmediateData = 7000u + (uint32_t)i;
        CHECK(VipPostSend(a, sd[i], E.mh));
    }
    for (int i = 0; i < N; i++) {
        VIP_DESCRIPTOR *d = th_send_done_must(a, NULL, "burst write");
        EXPECT(d == sd[i], "%s: completion %d is descriptor %p, want %p (post order)", ph, i, (void *)d,
               (void *)sd[i]);
        EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RDMA_WRITE,
               "%s: write %d status 0x%x", ph, i, d->CS.Status);
    }
    int k = 0;
    for (int i = 0; i < N; i++) {
        if (i % 3 == 1) continue;
        VIP_DESCRIPTOR *d = th_recv_done_must(b, rd[k], "burst immediate");
        EXPECT(d->CS.ImmediateData == 7000u + (uint32_t)i && d->CS.Length == LEN &&
                   d->CS.Status == (VIP_STATUS_DONE | VIP_STATUS_OP_REMOTE_RDMA_WRITE | VIP_STATUS_IMMEDIATE),
               "%s: immediate %d: imm %u length %u status 0x%x", ph, k, d->CS.ImmediateData, d->CS.Length,
               d->CS.Status);
        k++;
    }
    for (int i = 0; i < N; i++)
        EXPECT(th_verify(REG.p + (size_t)i * LEN, LEN, 900 + (uint32_t)i) < 0, "%s: write %d's data", ph, i);
    EXPECT(th_guard_check(REG.p + (size_t)N * LEN, REG.len - (size_t)N * LEN) < 0, "%s: past the last write", ph);
    E.used = mark;
}

/* The largest gather: MaxSegmentsPerDesc - 1 local segments after the address one. */
static void max_segments(VIP_VI_HANDLE a, VIP_VI_HANDLE b, VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    unsigned nloc = (unsigned)E.na.MaxSegmentsPerDesc - 1;
    uint32_t len = nloc * 301;
    snprintf(ph, sizeof ph, "%u local segments, %s", nloc, th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    memset(REG.p, TH_GUARD_BYTE, REG.len);
    char *src = th_alloc(&E, len);
    th_fill(src, len, 4242);
    memcpy(expect, src, len);
    VIP_DESCRIPTOR *sd = th_desc(&E, 1 + nloc), *rd = th_desc(&E, 1);
    th_set1(rd, E.mh, NULL, 0);
    rd->CS.SegCount = 0;
    CHECK(VipPostRecv(b, rd, E.mh));
    th_set_rdma(sd, VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, REG.p + OFF, REG.mh, E.mh, src, len, nloc);
    CHECK(VipPostSend(a, sd, E.mh));
    VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "max-segment write");
    EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RDMA_WRITE &&
               d->CS.Length == len,
           "%s: status 0x%x length %u", ph, d->CS.Status, d->CS.Length);
    d = th_recv_done_must(b, rd, "max-segment immediate");
    EXPECT(d->CS.Length == len && (d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%s: target status 0x%x length %u", ph,
           d->CS.Status, d->CS.Length);
    check_target(ph, len);
    E.used = mark;
}

/* A pair across two NICs of this process (in inline mode both NICs are stepped). */
static void two_nics(VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    snprintf(ph, sizeof ph, "two NICs, %s", th_rel_name(rel));
    th_phase(ph);
    th_env e2;
    th_open_env(&e2, NULL, 1 << 16);
    VIP_VI_HANDLE a = th_vi_rdma(&e2, rel, VIP_TRUE, VIP_FALSE, NULL, NULL);
    VIP_VI_HANDLE b = th_vi_rdma(&E, rel, VIP_TRUE, VIP_FALSE, NULL, NULL);
    th_connect_peer2(&e2, a, &E, b, "w2nic");
    size_t mark = E.used;
    memset(REG.p, TH_GUARD_BYTE, REG.len);
    char *src = th_alloc(&e2, 40000);
    th_fill(src, 40000, 31337);
    memcpy(expect, src, 40000);
    VIP_DESCRIPTOR *sd = th_desc(&e2, 3), *rd = th_desc(&E, 1);
    th_set1(rd, E.mh, NULL, 0);
    rd->CS.SegCount = 0;
    CHECK(VipPostRecv(b, rd, E.mh));
    th_set_rdma(sd, VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, REG.p + OFF, REG.mh, e2.mh, src, 40000, 2);
    sd->CS.ImmediateData = 0x2042;
    CHECK(VipPostSend(a, sd, e2.mh));
    uint32_t st = th_await2(sd, a, b);
    EXPECT((st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) ==
               (VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE),
           "%s: initiator status 0x%x", ph, st);
    st = th_await2(rd, b, a);
    EXPECT(st == (VIP_STATUS_DONE | VIP_STATUS_OP_REMOTE_RDMA_WRITE | VIP_STATUS_IMMEDIATE) &&
               rd->CS.ImmediateData == 0x2042 && rd->CS.Length == 40000,
           "%s: target status 0x%x imm 0x%x length %u", ph, st, rd->CS.ImmediateData, rd->CS.Length);
    check_target(ph, 40000);
    VIP_DESCRIPTOR *d;
    EXPECT_RC(VipSendDone(a, &d), VIP_SUCCESS);
    EXPECT_RC(VipRecvDone(b, &d), VIP_SUCCESS);
    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(b));
    th_drain(b, 200);
    CHECK(VipDestroyVi(b));
    th_close_env(&e2);
    E.used = mark;
}

/* RDMA write with immediate data and no receive posted at the target: the data is
 * placed; unreliable: the notification is dropped (and counted), the connection stays
 * up; reliable: the initiator gets VIP_STATUS_REMOTE_DESC_ERROR and the connection
 * breaks. */
static void imm_without_receive(VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    snprintf(ph, sizeof ph, "immediate data, no receive posted, %s", th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    th_pair_rdma(&E, rel, &a, &b, "noimmrecv");
    memset(REG.p, TH_GUARD_BYTE, REG.len);
    uint32_t len = 3 * mtu;
    char *src = th_alloc(&E, len);
    th_fill(src, len, 5150);
    memcpy(expect, src, len);
    VIP_DESCRIPTOR *sd = th_desc(&E, 2), *rd = th_desc(&E, 1), *ms = th_desc(&E, 1);
    VIP_EXT_COUNTERS c0;
    CHECK(VipExtQueryViCounters(b, &c0));
    th_set_rdma(sd, VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, REG.p + OFF, REG.mh, E.mh, src, len, 1);
    sd->CS.ImmediateData = 1;
    CHECK(VipPostSend(a, sd, E.mh));
    VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "RDMA write with immediate data");
    if (rel == VIP_SERVICE_UNRELIABLE) {
        EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RDMA_WRITE,
               "%s: initiator status 0x%x", ph, d->CS.Status);
        VIP_EXT_COUNTERS c1 = th_vi_counters_at_least(b, offsetof(VIP_EXT_COUNTERS, Drops), c0.Drops + 1);
        EXPECT(c1.Drops == c0.Drops + 1, "%s: target Drops %llu -> %llu, want +1", ph, (unsigned long long)c0.Drops,
               (unsigned long long)c1.Drops);
        check_target(ph, len);
        EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "%s: states %s / %s", ph,
               th_state_name(th_state(a)), th_state_name(th_state(b)));
        /* the connection carries the next message */
        char *rb = th_alloc(&E, 64), *mb = th_alloc(&E, 64);
        th_set1(rd, E.mh, rb, 64);
        CHECK(VipPostRecv(b, rd, E.mh));
        memcpy(mb, "still up", 9);
        th_set1(ms, E.mh, mb, 9);
        CHECK(VipPostSend(a, ms, E.mh));
        th_send_done_must(a, ms, "send");
        d = th_recv_done_must(b, rd, "receive");
        EXPECT(!strcmp(rb, "still up") && (d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%s: next message 0x%x", ph,
               d->CS.Status);
    } else {
        EXPECT((d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) ==
                   (VIP_STATUS_DONE | VIP_STATUS_REMOTE_DESC_ERROR | VIP_STATUS_OP_RDMA_WRITE),
               "%s: initiator status 0x%x, want DONE|REMOTE_DESC_ERROR|OP_RDMA_WRITE", ph, d->CS.Status);
        EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS) && th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS),
               "%s: states %s / %s, want ERROR", ph, th_state_name(th_state(a)), th_state_name(th_state(b)));
        /* nothing outside the target range was touched */
        EXPECT(th_guard_check(REG.base, TH_GUARD + OFF) < 0 && th_guard_check(REG.p + OFF + len, REG.len - OFF - len) < 0,
               "%s: bytes outside the target range changed", ph);
    }
    th_unpair(a, b, 200);
    E.used = mark;
}

/* An RDMA write longer than the initiator VI's MaxTransferSize, or the target VI's:
 * VIP_STATUS_LENGTH_ERROR with the write's op bits, nothing written; reliable VIs break. */
static void over_max_transfer(VIP_RELIABILITY_LEVEL rel, int target_side) {
    char ph[96];
    snprintf(ph, sizeof ph, "over the %s VI's MaxTransferSize, %s", target_side ? "target" : "initiator",
             th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a = th_vi_rdma_mts(&E, rel, VIP_TRUE, VIP_FALSE, target_side ? 0 : 1000, NULL, NULL);
    VIP_VI_HANDLE b = th_vi_rdma_mts(&E, rel, VIP_TRUE, VIP_FALSE, target_side ? 1000 : 0, NULL, NULL);
    th_connect_peer(&E, a, b, "wmts");
    memset(REG.p, TH_GUARD_BYTE, REG.len);
    char *src = th_alloc(&E, 1001);
    th_fill(src, 1001, 3);
    VIP_DESCRIPTOR *sd = th_desc(&E, 2), *rd = th_desc(&E, 1);
    /* exactly the limit is fine (with immediate data: its receive tells it was placed) */
    th_set1(rd, E.mh, NULL, 0);
    rd->CS.SegCount = 0;
    CHECK(VipPostRecv(b, rd, E.mh));
    th_set_rdma(sd, VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, REG.p, REG.mh, E.mh, src, 1000, 1);
    CHECK(VipPostSend(a, sd, E.mh));
    VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "write of MaxTransferSize bytes");
    EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RDMA_WRITE,
           "%s: a write of exactly MaxTransferSize: status 0x%x", ph, d->CS.Status);
    d = th_recv_done_must(b, rd, "its immediate data");
    EXPECT(d->CS.Length == 1000 && (d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%s: target status 0x%x", ph,
           d->CS.Status);
    memset(REG.p, TH_GUARD_BYTE, REG.len);
    th_set_rdma(sd, VIP_CONTROL_OP_RDMAWRITE, REG.p, REG.mh, E.mh, src, 1001, 1);
    CHECK(VipPostSend(a, sd, E.mh));
    d = th_send_done_must(a, sd, "write over MaxTransferSize");
    EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) ==
                   (VIP_STATUS_LENGTH_ERROR | VIP_STATUS_OP_RDMA_WRITE) &&
               d->CS.Length == 0,
           "%s: status 0x%x length %u, want LENGTH_ERROR|OP_RDMA_WRITE, 0", ph, d->CS.Status, d->CS.Length);
    for (int i = 0; i < 20; i++) VipQueryVi(b, NULL, NULL, NULL, NULL);
    EXPECT(th_guard_check(REG.p, REG.len) < 0, "%s: the refused write wrote", ph);
    if (rel == VIP_SERVICE_UNRELIABLE)
        EXPECT(th_state(a) == VIP_STATE_CONNECTED, "%s: state %s", ph, th_state_name(th_state(a)));
    else
        EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS) && th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS),
               "%s: states %s / %s, want ERROR", ph, th_state_name(th_state(a)), th_state_name(th_state(b)));
    th_unpair(a, b, 200);
    E.used = mark;
}

int main(void) {
    th_init("rdma_write", 0);
    th_open_env(&E, NULL, 8 << 20);
    mtu = (uint32_t)E.na.NativeMTU;
    th_region_new(&E, &REG, BIG + 64 * 1024, NULL, VIP_TRUE, VIP_FALSE);
    th_region_new(&E, &LOCAL2, BIG, NULL, VIP_FALSE, VIP_FALSE); /* local use needs no RDMA flags */
    expect = malloc(BIG + 64 * 1024);
    if (!expect) FATAL("out of memory");
    const uint32_t sizes[] = {0, 1, mtu - 17, mtu - 16, mtu - 15, mtu - 1, mtu, mtu + 1, 2 * mtu, BIG};
    uint32_t seed = 1;
    for (int li = 0; li < 3; li++) {
        VIP_RELIABILITY_LEVEL rel = th_levels[li];
        VIP_VI_HANDLE a, b;
        th_phase("connect");
        th_pair_rdma(&E, rel, &a, &b, "rdmaw");
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            for (int imm = 0; imm < 2; imm++) {
                if (sizes[si] == 0) one_write(a, b, rel, 0, 0, imm, seed++); /* address segment only */
                one_write(a, b, rel, sizes[si], 1, imm, seed++);
                one_write(a, b, rel, sizes[si], 5, imm, seed++);
            }
        }
        burst(a, b, rel);
        max_segments(a, b, rel);
        th_phase("teardown");
        CHECK(VipDisconnect(a));
        CHECK(VipDisconnect(b));
        th_drain(a, 200);
        th_drain(b, 200);
        EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
        EXPECT_RC(VipDestroyVi(b), VIP_SUCCESS);
        two_nics(rel);
        imm_without_receive(rel);
        over_max_transfer(rel, 0);
        over_max_transfer(rel, 1);
    }
    th_nic_healthy(&E);
    th_region_free(&REG);
    th_region_free(&LOCAL2);
    free(expect);
    th_close_env(&E);
    return th_result();
}
