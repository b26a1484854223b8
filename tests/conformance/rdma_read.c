/*
 * rdma_read: RDMA read (VIP_CONTROL_OP_RDMAREAD) on the reliable levels (reliable
 * delivery and reliable reception; RDMAReadSupport names both): sizes 0, 1, around the
 * MTU, two MTUs and 300 KiB, read from an unaligned offset of a region registered with
 * RDMA read enabled, scattered into one or several local segments (from two
 * registrations, zero-length segments among them), up to MaxSegmentsPerDesc segments.
 *
 * The descriptor completes with VIP_STATUS_OP_RDMA_READ and Length = the bytes read (the
 * sum of the local segments), once all the data is in place; the local bytes around the
 * segments and the remote region are not changed; the target's receive queue is not
 * touched (a send after the read takes the receive posted before it). A burst of reads
 * completes in post order; a pair across two NICs works too. On an unreliable VI an RDMA
 * read is a format error (VIP_STATUS_OP_RDMA_READ, the VI stays connected). A read over
 * the initiator's or the target VI's MaxTransferSize is VIP_STATUS_LENGTH_ERROR (exactly
 * the limit is fine). A disconnect (either side) with reads outstanding completes them
 * in order, each successful or flushed, with its op bits.
 */
#include "helpers.h"

enum { BIG = 300 * 1024, OFF = 5, GAP = 40 };

static th_env E;
static th_region SRC;           /* the target: RDMA read enabled */
static th_region LOC1, LOC2;    /* local scatter buffers, two registrations */
static uint8_t *mask1, *mask2;  /* which bytes of LOC1/LOC2 a read may write */
static uint32_t mtu;

/* Builds a read of len bytes from SRC at OFF into nloc local segments, alternately in
 * LOC1 and LOC2, separated by GAP guard bytes; with nloc > 2 a zero-length segment
 * comes second. Marks the bytes the segments cover in mask1/mask2. */
static void build_read(VIP_DESCRIPTOR *d, uint32_t len, unsigned nloc) {
    memset(mask1, 0, LOC1.len);
    memset(mask2, 0, LOC2.len);
    memset(&d->CS, 0, sizeof d->CS);
    d->CS.Control = VIP_CONTROL_OP_RDMAREAD;
    d->CS.SegCount = (VIP_UINT16)(1 + nloc);
    VIP_ADDRESS_SEGMENT *a = (VIP_ADDRESS_SEGMENT *)th_seg(d, 0);
    memset(a, 0, sizeof *a);
    a->Data.Address = SRC.p + OFF;
    a->Handle = SRC.mh;
    size_t c1 = GAP, c2 = GAP;
    uint32_t off = 0;
    unsigned data_segs = nloc > 2 ? nloc - 1 : nloc, k = 0;
    for (unsigned i = 0; i < nloc; i++) {
        VIP_DATA_SEGMENT *s = th_seg(d, 1 + i);
        if (nloc > 2 && i == 1) {
            s->Data.Address = NULL;
            s->Handle = 0;
            s->Length = 0;
            continue;
        }
        uint32_t part = k + 1 == data_segs ? len - off : len / data_segs;
        th_region *r = (k & 1) ? &LOC2 : &LOC1;
        uint8_t *m = (k & 1) ? mask2 : mask1;
        size_t *c = (k & 1) ? &c2 : &c1;
        if (*c + part + GAP > r->len) FATAL("local buffers too small");
        s->Data.Address = r->p + *c;
        s->Handle = r->mh;
        s->Length = part;
        memset(m + *c, 1, part);
        *c += part + GAP;
        off += part;
        k++;
    }
}

/* The read's data, gathered back from its segments, equals SRC at OFF; the local bytes
 * outside the segments are untouched. */
static void check_local(const char *ph, VIP_DESCRIPTOR *d, uint32_t len) {
    uint32_t off = 0;
    for (unsigned i = 1; i < d->CS.SegCount; i++) {
        VIP_DATA_SEGMENT *s = th_seg(d, i);
        if (!s->Length) continue;
        long k = -1;
        const char *p = s->Data.Address;
        for (uint32_t j = 0; j < s->Length && k < 0; j++)
            if (p[j] != SRC.p[OFF + off + j]) k = (long)j;
        EXPECT(k < 0, "%s: segment %u differs from the remote data at byte %ld", ph, i, k);
        off += s->Length;
    }
    EXPECT(off == len, "%s: segments hold %u bytes, want %u", ph, off, len);
    for (int w = 0; w < 2; w++) {
        th_region *r = w ? &LOC2 : &LOC1;
        uint8_t *m = w ? mask2 : mask1;
        long bad = -1;
        for (size_t j = 0; j < r->len && bad < 0; j++)
            if (!m[j] && (uint8_t)r->p[j] != TH_GUARD_BYTE) bad = (long)j;
        EXPECT(bad < 0, "%s: local buffer %d written outside the segments at %ld", ph, w + 1, bad);
        EXPECT(th_guard_check(r->base, TH_GUARD) < 0 && th_guard_check(r->p + r->len, TH_GUARD) < 0,
               "%s: guard around local region %d written", ph, w + 1);
    }
}

static void one_read(VIP_VI_HANDLE a, VIP_VI_HANDLE b, VIP_RELIABILITY_LEVEL rel, uint32_t len, unsigned nloc,
                     uint32_t seed) {
    char ph[128];
    snprintf(ph, sizeof ph, "%s, %u bytes, %u local segments", th_rel_name(rel), len, nloc);
    th_phase(ph);
    size_t mark = E.used;
    th_fill(SRC.p, SRC.len, seed);
    memset(LOC1.p, TH_GUARD_BYTE, LOC1.len);
    memset(LOC2.p, TH_GUARD_BYTE, LOC2.len);
    VIP_DESCRIPTOR *sd = th_desc(&E, 1 + nloc), *rd = th_desc(&E, 1), *ms = th_desc(&E, 1);
    char *rbuf = th_alloc(&E, 64), *mbuf = th_alloc(&E, 64);
    /* a receive at the target that the read must leave alone */
    th_set1(rd, E.mh, rbuf, 64);
    CHECK(VipPostRecv(b, rd, E.mh));
    build_read(sd, len, nloc);
    CHECK(VipPostSend(a, sd, E.mh));
    VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "RDMA read");
    EXPECT((d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK | VIP_STATUS_IMMEDIATE)) ==
               (VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ),
           "%s: status 0x%x, want DONE|OP_RDMA_READ", ph, d->CS.Status);
    EXPECT(d->CS.Length == len, "%s: Length %u, want %u", ph, d->CS.Length, len);
    /* complete means in place */
    check_local(ph, sd, len);
    EXPECT(th_verify(SRC.p, SRC.len, seed) < 0, "%s: the read changed the remote region", ph);
    VIP_DESCRIPTOR *x;
    EXPECT_RC(VipRecvDone(b, &x), VIP_NOT_DONE);
    memcpy(mbuf, "after", 6);
    th_set1(ms, E.mh, mbuf, 6);
    CHECK(VipPostSend(a, ms, E.mh));
    th_send_done_must(a, ms, "marker send");
    d = th_recv_done_must(b, rd, "marker receive");
    EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RECEIVE &&
               d->CS.Length == 6 && !memcmp(rbuf, "after", 6),
           "%s: the send after the read: status 0x%x length %u", ph, d->CS.Status, d->CS.Length);
    EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "%s: states %s / %s", ph,
           th_state_name(th_state(a)), th_state_name(th_state(b)));
    E.used = mark;
}

static void burst(VIP_VI_HANDLE a, VIP_RELIABILITY_LEVEL rel) {
    enum { N = 24, LEN = 7000 };
    char ph[96];
    snprintf(ph, sizeof ph, "burst of %d reads, %s", N, th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    th_fill(SRC.p, SRC.len, 555);
    VIP_DESCRIPTOR *sd[N];
    char *dst = th_alloc(&E, (size_t)N * LEN);
    memset(dst, 0, (size_t)N * LEN);
    for (int i = 0; i < N; i++) {
        sd[i] = th_desc(&E, 2);
        /* each read from a different place: read i gets SRC[i * 1000, + LEN) */
        th_set_rdma(sd[i], VIP_CONTROL_OP_RDMAREAD, SRC.p + (size_t)i * 1000, SRC.mh, E.mh, dst + (size_t)i * LEN, LEN,
                    1);
        CHECK(VipPostSend(a, sd[i], E.mh));
    }
    for (int i = 0; i < N; i++) {
        VIP_DESCRIPTOR *d = th_send_done_must(a, NULL, "burst read");
        EXPECT(d == sd[i], "%s: completion %d is %p, want %p (post order)", ph, i, (void *)d, (void *)sd[i]);
        EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RDMA_READ &&
                   d->CS.Length == LEN,
               "%s: read %d status 0x%x length %u", ph, i, d->CS.Status, d->CS.Length);
        EXPECT(memcmp(dst + (size_t)i * LEN, SRC.p + (size_t)i * 1000, LEN) == 0, "%s: read %d's data", ph, i);
    }
    E.used = mark;
}

static void max_segments(VIP_VI_HANDLE a, VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    unsigned nloc = (unsigned)E.na.MaxSegmentsPerDesc - 1;
    uint32_t len = nloc * 257 + 3;
    snprintf(ph, sizeof ph, "%u local segments, %s", nloc, th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    th_fill(SRC.p, SRC.len, 808);
    memset(LOC1.p, TH_GUARD_BYTE, LOC1.len);
    memset(LOC2.p, TH_GUARD_BYTE, LOC2.len);
    VIP_DESCRIPTOR *sd = th_desc(&E, 1 + nloc);
    build_read(sd, len, nloc);
    CHECK(VipPostSend(a, sd, E.mh));
    VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "max-segment read");
    EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RDMA_READ &&
               d->CS.Length == len,
           "%s: status 0x%x length %u", ph, d->CS.Status, d->CS.Length);
    check_local(ph, sd, len);
    E.used = mark;
}

static void two_nics(VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    snprintf(ph, sizeof ph, "two NICs, %s", th_rel_name(rel));
    th_phase(ph);
    th_env e2;
    th_open_env(&e2, NULL, 1 << 17);
    VIP_VI_HANDLE a = th_vi_rdma(&e2, rel, VIP_FALSE, VIP_TRUE, NULL, NULL);
    VIP_VI_HANDLE b = th_vi_rdma(&E, rel, VIP_FALSE, VIP_TRUE, NULL, NULL);
    th_connect_peer2(&e2, a, &E, b, "r2nic");
    th_fill(SRC.p, SRC.len, 9191);
    char *dst = th_alloc(&e2, 50000);
    VIP_DESCRIPTOR *sd = th_desc(&e2, 3);
    th_set_rdma(sd, VIP_CONTROL_OP_RDMAREAD, SRC.p + OFF, SRC.mh, e2.mh, dst, 50000, 2);
    CHECK(VipPostSend(a, sd, e2.mh));
    uint32_t st = th_await2(sd, a, b);
    EXPECT((st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) ==
                   (VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ) &&
               sd->CS.Length == 50000,
           "%s: status 0x%x length %u", ph, st, sd->CS.Length);
    EXPECT(memcmp(dst, SRC.p + OFF, 50000) == 0, "%s: data", ph);
    VIP_DESCRIPTOR *d;
    EXPECT_RC(VipSendDone(a, &d), VIP_SUCCESS);
    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(b));
    CHECK(VipDestroyVi(b));
    th_close_env(&e2);
}

static void unreliable(void) {
    th_phase("RDMA read on an unreliable VI");
    size_t mark = E.used;
    VIP_VI_HANDLE a = th_vi_rdma(&E, VIP_SERVICE_UNRELIABLE, VIP_TRUE, VIP_FALSE, NULL, NULL);
    VIP_VI_HANDLE b = th_vi_rdma(&E, VIP_SERVICE_UNRELIABLE, VIP_TRUE, VIP_FALSE, NULL, NULL);
    th_connect_peer(&E, a, b, "runrel");
    memset(LOC1.p, TH_GUARD_BYTE, LOC1.len);
    VIP_DESCRIPTOR *sd = th_desc(&E, 2);
    th_set_rdma(sd, VIP_CONTROL_OP_RDMAREAD, SRC.p, SRC.mh, LOC1.mh, LOC1.p, 100, 1);
    CHECK(VipPostSend(a, sd, E.mh));
    VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "unreliable read");
    EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) ==
                   (VIP_STATUS_FORMAT_ERROR | VIP_STATUS_OP_RDMA_READ) &&
               d->CS.Length == 0,
           "unreliable RDMA read: status 0x%x length %u, want FORMAT_ERROR|OP_RDMA_READ, 0", d->CS.Status,
           d->CS.Length);
    EXPECT(th_guard_check(LOC1.p, LOC1.len) < 0, "unreliable RDMA read wrote local memory");
    EXPECT(th_state(a) == VIP_STATE_CONNECTED, "unreliable VI after a format error: %s", th_state_name(th_state(a)));
    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(b));
    CHECK(VipDestroyVi(a));
    CHECK(VipDestroyVi(b));
    E.used = mark;
}

/* A read longer than the initiator VI's or the target VI's MaxTransferSize:
 * VIP_STATUS_LENGTH_ERROR with the read's op bits, nothing read; the VIs break. */
static void over_max_transfer(VIP_RELIABILITY_LEVEL rel, int target_side) {
    char ph[96];
    snprintf(ph, sizeof ph, "read over the %s VI's MaxTransferSize, %s", target_side ? "target" : "initiator",
             th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a = th_vi_rdma_mts(&E, rel, VIP_FALSE, VIP_TRUE, target_side ? 0 : 1000, NULL, NULL);
    VIP_VI_HANDLE b = th_vi_rdma_mts(&E, rel, VIP_FALSE, VIP_TRUE, target_side ? 1000 : 0, NULL, NULL);
    th_connect_peer(&E, a, b, "rmts");
    th_fill(SRC.p, 2000, 17);
    memset(LOC1.p, TH_GUARD_BYTE, LOC1.len);
    VIP_DESCRIPTOR *sd = th_desc(&E, 2);
    th_set_rdma(sd, VIP_CONTROL_OP_RDMAREAD, SRC.p, SRC.mh, LOC1.mh, LOC1.p, 1000, 1);
    CHECK(VipPostSend(a, sd, E.mh));
    VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "read of MaxTransferSize bytes");
    EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RDMA_READ &&
               memcmp(LOC1.p, SRC.p, 1000) == 0,
           "%s: a read of exactly MaxTransferSize: status 0x%x", ph, d->CS.Status);
    memset(LOC1.p, TH_GUARD_BYTE, LOC1.len);
    th_set_rdma(sd, VIP_CONTROL_OP_RDMAREAD, SRC.p, SRC.mh, LOC1.mh, LOC1.p, 1001, 1);
    CHECK(VipPostSend(a, sd, E.mh));
    d = th_send_done_must(a, sd, "read over MaxTransferSize");
    EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) ==
                   (VIP_STATUS_LENGTH_ERROR | VIP_STATUS_OP_RDMA_READ) &&
               d->CS.Length == 0,
           "%s: status 0x%x length %u, want LENGTH_ERROR|OP_RDMA_READ, 0", ph, d->CS.Status, d->CS.Length);
    EXPECT(th_guard_check(LOC1.p, LOC1.len) < 0, "%s: the refused read wrote local memory", ph);
    EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS) && th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS),
           "%s: states %s / %s, want ERROR", ph, th_state_name(th_state(a)), th_state_name(th_state(b)));
    th_unpair(a, b, 200);
    E.used = mark;
}

/* VipDisconnect with reads outstanding: each read completes, successfully or flushed,
 * always with its op bits; a flushed one has Length 0. The peer sees the connection go. */
static void disconnect_outstanding(VIP_RELIABILITY_LEVEL rel, int from_target) {
    char ph[96];
    snprintf(ph, sizeof ph, "disconnect (%s) with reads outstanding, %s", from_target ? "target" : "initiator",
             th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    th_pair_rdma(&E, rel, &a, &b, "rdisc");
    enum { N = 4 };
    VIP_DESCRIPTOR *sd[N];
    for (int i = 0; i < N; i++) {
        sd[i] = th_desc(&E, 2);
        th_set_rdma(sd[i], VIP_CONTROL_OP_RDMAREAD, SRC.p, SRC.mh, LOC1.mh, LOC1.p, BIG, 1);
        CHECK(VipPostSend(a, sd[i], E.mh));
    }
    CHECK(VipDisconnect(from_target ? b : a));
    int flushed = 0;
    for (int i = 0; i < N; i++) {
        VIP_DESCRIPTOR *d = th_send_done_must(a, sd[i], "outstanding read");
        uint32_t err = d->CS.Status & VIP_STATUS_ERROR_MASK;
        EXPECT((d->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_RDMA_READ, "%s: read %d op bits 0x%x", ph, i,
               d->CS.Status);
        EXPECT(err == 0 ? d->CS.Length == BIG : (err == VIP_STATUS_DESC_FLUSHED_ERROR && d->CS.Length == 0),
               "%s: read %d status 0x%x length %u", ph, i, d->CS.Status, d->CS.Length);
        EXPECT(!(flushed && err == 0), "%s: read %d succeeded after an earlier one was flushed", ph, i);
        flushed += err != 0;
    }
    VIP_VI_HANDLE other = from_target ? a : b;
    EXPECT(th_wait_state(other, VIP_STATE_ERROR, TH_WAIT_MS), "%s: the other VI %s, want ERROR", ph,
           th_state_name(th_state(other)));
    th_unpair(a, b, 200);
    E.used = mark;
}

int main(void) {
    th_init("rdma_read", 0);
    th_open_env(&E, NULL, 8 << 20);
    mtu = (uint32_t)E.na.NativeMTU;
    EXPECT(E.na.RDMAReadSupport == (VIP_SERVICE_RELIABLE_DELIVERY | VIP_SERVICE_RELIABLE_RECEPTION),
           "RDMAReadSupport 0x%x", E.na.RDMAReadSupport);
    th_region_new(&E, &SRC, BIG + 64 * 1024, NULL, VIP_FALSE, VIP_TRUE);
    th_region_new(&E, &LOC1, BIG + 16 * GAP, NULL, VIP_FALSE, VIP_FALSE);
    th_region_new(&E, &LOC2, BIG / 2 + 16 * GAP, NULL, VIP_FALSE, VIP_FALSE);
    mask1 = malloc(LOC1.len);
    mask2 = malloc(LOC2.len);
    if (!mask1 || !mask2) FATAL("out of memory");
    const uint32_t sizes[] = {0, 1, mtu - 1, mtu, mtu + 1, 2 * mtu, BIG};
    uint32_t seed = 100;
    for (int li = 1; li < 3; li++) {
        VIP_RELIABILITY_LEVEL rel = th_levels[li];
        VIP_VI_HANDLE a, b;
        th_phase("connect");
        th_pair_rdma(&E, rel, &a, &b, "rdmar");
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            if (sizes[si] == 0) one_read(a, b, rel, 0, 0, seed++); /* address segment only */
            one_read(a, b, rel, sizes[si], 1, seed++);
            one_read(a, b, rel, sizes[si], 5, seed++);
        }
        burst(a, rel);
        max_segments(a, rel);
        th_phase("teardown");
        CHECK(VipDisconnect(a));
        CHECK(VipDisconnect(b));
        th_drain(a, 200);
        th_drain(b, 200);
        EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
        EXPECT_RC(VipDestroyVi(b), VIP_SUCCESS);
        two_nics(rel);
        over_max_transfer(rel, 0);
        over_max_transfer(rel, 1);
        disconnect_outstanding(rel, 0);
        disconnect_outstanding(rel, 1);
    }
    unreliable();
    th_nic_healthy(&E);
    th_region_free(&SRC);
    th_region_free(&LOC1);
    th_region_free(&LOC2);
    free(mask1);
    free(mask2);
    th_close_env(&E);
    return th_result();
}
