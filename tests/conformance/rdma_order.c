/*
 * rdma_order: ordering on a VI's send queue with RDMA.
 *
 *  - Send-queue descriptors complete in post order, whatever finishes first: a large
 *    RDMA read followed by sends (which leave, and on the lower levels are done, long
 *    before the read's data is back), and mixes of reads, writes (with and without
 *    immediate data) and sends; the target sees the sends and the immediate data in
 *    post order, and the data of a write before the send that follows it.
 *  - VIP_CONTROL_QFENCE: a fenced descriptor is not started before every earlier RDMA
 *    read on the VI has completed. Checked by data dependency: read a large remote
 *    buffer into local memory, then a fenced send (or fenced RDMA write) of that same
 *    local memory: the target must receive the data the read brought, never the old
 *    contents; and when the fenced send arrives the read has already completed. Also
 *    with several reads before one fenced send that gathers all of their buffers.
 *  - Unreliable VIs (no reads): writes and sends complete in post order and a write's
 *    data is in place when the send after it arrives.
 *  - Both VIs of a pair reading from, writing to and sending to each other at once:
 *    each send queue completes in post order with the right data.
 *  - VipDisconnect with reads, writes and sends outstanding: all complete in post order,
 *    each with its own op bits, the successful ones before the flushed ones.
 */
#include "helpers.h"

enum { BIG = 300 * 1024 };

static th_env E;
static th_region SRC; /* the target's: RDMA read + write enabled */

enum opk { O_SEND, O_READ, O_WRITE, O_WRITE_IMM };

/* Posts ops[0..n) on a (the target b has receives for the sends and immediate writes)
 * and checks the send queue and the target's receive queue complete in post order. */
static void mix(VIP_RELIABILITY_LEVEL rel, const enum opk *ops, int n, const char *name) {
    char ph[160];
    snprintf(ph, sizeof ph, "post order: %s, %s", name, th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    th_pair_rdma(&E, rel, &a, &b, "mix");
    VIP_DESCRIPTOR *sd[16], *rd[16];
    char *buf[16], *rbuf[16];
    uint32_t len[16];
    int nrecv = 0;
    th_fill(SRC.p, SRC.len, 1234);
    for (int i = 0; i < n; i++) {
        len[i] = ops[i] == O_READ ? (i == 0 ? BIG : 20000 + 1000u * (uint32_t)i) : 100 + 10u * (uint32_t)i;
        buf[i] = th_alloc(&E, len[i]);
        sd[i] = th_desc(&E, 2);
        if (ops[i] == O_SEND || ops[i] == O_WRITE_IMM) {
            rd[nrecv] = th_desc(&E, 1);
            rbuf[nrecv] = th_alloc(&E, 256);
            th_set1(rd[nrecv], E.mh, rbuf[nrecv], 256);
            CHECK(VipPostRecv(b, rd[nrecv], E.mh));
            nrecv++;
        }
    }
    /* writes go to the upper half of SRC, reads come from the lower part */
    char *wdst = SRC.p + SRC.len / 2;
    for (int i = 0; i < n; i++) {
        memset(buf[i], 0, len[i]);
        switch (ops[i]) {
            case O_SEND:
                th_fill(buf[i], len[i], 50 + (uint32_t)i);
                th_set1(sd[i], E.mh, buf[i], len[i]);
                sd[i]->CS.Control = VIP_CONTROL_IMMEDIATE;
                break;
            case O_READ:
                th_set_rdma(sd[i], VIP_CONTROL_OP_RDMAREAD, SRC.p + i, SRC.mh, E.mh, buf[i], len[i], 1);
                break;
            case O_WRITE:
            case O_WRITE_IMM:
                th_fill(buf[i], len[i], 50 + (uint32_t)i);
                th_set_rdma(sd[i], VIP_CONTROL_OP_RDMAWRITE | (ops[i] == O_WRITE_IMM ? VIP_CONTROL_IMMEDIATE : 0),
                            wdst + 256 * i, SRC.mh, E.mh, buf[i], len[i], 1);
                break;
        }
        sd[i]->CS.ImmediateData = 600u + (uint32_t)i;
        CHECK(VipPostSend(a, sd[i], E.mh));
    }
    static const uint32_t opbits[] = {VIP_STATUS_OP_SEND, VIP_STATUS_OP_RDMA_READ, VIP_STATUS_OP_RDMA_WRITE,
                                      VIP_STATUS_OP_RDMA_WRITE};
    for (int i = 0; i < n; i++) {
        VIP_DESCRIPTOR *d = th_send_done_must(a, NULL, "send queue");
        EXPECT(d == sd[i], "%s: completion %d is %p, want descriptor %d (%p): not in post order", ph, i, (void *)d, i,
               (void *)sd[i]);
        if (d != sd[i]) break;
        EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == opbits[ops[i]] &&
                   d->CS.Length == len[i],
               "%s: descriptor %d status 0x%x length %u", ph, i, d->CS.Status, d->CS.Length);
        if (ops[i] == O_READ)
            EXPECT(memcmp(buf[i], SRC.p + i, len[i]) == 0, "%s: read %d's data (completed before placed?)", ph, i);
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (ops[i] != O_SEND && ops[i] != O_WRITE_IMM) continue;
        VIP_DESCRIPTOR *d = th_recv_done_must(b, rd[k], "target receive");
        EXPECT(d->CS.ImmediateData == 600u + (uint32_t)i, "%s: receive %d carries immediate %u, want %u", ph, k,
               d->CS.ImmediateData, 600u + (uint32_t)i);
        if (ops[i] == O_SEND)
            EXPECT(d->CS.Length == len[i] && th_verify(rbuf[k], len[i], 50 + (uint32_t)i) < 0,
                   "%s: send %d arrived with length %u", ph, i, d->CS.Length);
        else
            EXPECT((d->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_REMOTE_RDMA_WRITE, "%s: receive %d op 0x%x", ph,
                   k, d->CS.Status);
        /* every write posted before this message is in place */
        for (int j = 0; j < i; j++)
            if (ops[j] == O_WRITE || ops[j] == O_WRITE_IMM)
                EXPECT(th_verify(wdst + 256 * j, len[j], 50 + (uint32_t)j) < 0,
                       "%s: write %d not in place when message %d arrived", ph, j, i);
        k++;
    }
    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(b));
    th_drain(a, 200);
    th_drain(b, 200);
    CHECK(VipDestroyVi(a));
    CHECK(VipDestroyVi(b));
    E.used = mark;
}

/* nreads reads of len bytes each from SRC into local buffers, then one fenced
 * descriptor (a send gathering all the read buffers, or an RDMA write of them to the
 * upper half of SRC) that must carry the data the reads brought. */
static void fence(VIP_RELIABILITY_LEVEL rel, int nreads, uint32_t len, int fenced_write, int rounds) {
    char ph[160];
    snprintf(ph, sizeof ph, "QFENCE: %d read%s of %u bytes, then a fenced %s, %s", nreads, nreads > 1 ? "s" : "",
             len, fenced_write ? "RDMA write with immediate data" : "send", th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    th_pair_rdma(&E, rel, &a, &b, "fence");
    uint32_t total = (uint32_t)nreads * len;
    char *local = th_alloc(&E, total), *rbuf = th_alloc(&E, total);
    VIP_DESCRIPTOR *rdsc[4], *fd = th_desc(&E, 1 + nreads), *rd = th_desc(&E, 1);
    for (int i = 0; i < nreads; i++) rdsc[i] = th_desc(&E, 2);
    char *wdst = SRC.p + SRC.len / 2;
    for (int round = 0; round < rounds; round++) {
        uint32_t seed = 7000u + (uint32_t)round * 10u + (uint32_t)nreads;
        th_fill(SRC.p, total, seed);
        memset(local, 0x5a, total); /* the old contents a premature send would carry */
        memset(rbuf, 0, total);
        memset(wdst, 0, total);
        if (fenced_write) {
            th_set1(rd, E.mh, NULL, 0);
            rd->CS.SegCount = 0;
        } else {
            th_set1(rd, E.mh, rbuf, total);
        }
        CHECK(VipPostRecv(b, rd, E.mh));
        for (int i = 0; i < nreads; i++) {
            th_set_rdma(rdsc[i], VIP_CONTROL_OP_RDMAREAD, SRC.p + (size_t)i * len, SRC.mh, E.mh,
                        local + (size_t)i * len, len, 1);
            CHECK(VipPostSend(a, rdsc[i], E.mh));
        }
        if (fenced_write) {
            th_set_rdma(fd, VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, wdst, SRC.mh, E.mh, local, total,
                        (unsigned)nreads);
        } else {
            memset(&fd->CS, 0, sizeof fd->CS);
            fd->CS.SegCount = (VIP_UINT16)nreads;
            for (int i = 0; i < nreads; i++) {
                th_seg(fd, (unsigned)i)->Data.Address = local + (size_t)i * len;
                th_seg(fd, (unsigned)i)->Handle = E.mh;
                th_seg(fd, (unsigned)i)->Length = len;
            }
            fd->CS.Control = VIP_CONTROL_IMMEDIATE;
        }
        fd->CS.Control |= VIP_CONTROL_QFENCE;
        fd->CS.ImmediateData = seed;
        CHECK(VipPostSend(a, fd, E.mh));
        /* the fenced message's arrival: every read must have completed by then */
        VIP_RETURN r;
        VIP_DESCRIPTOR *d = th_recv_wait(b, &r);
        EXPECT(d == rd, "%s: round %d: target receive -> %s", ph, round, th_rs(r));
        if (d != rd) break;
        for (int i = 0; i < nreads; i++) {
            uint32_t st = __atomic_load_n(&rdsc[i]->CS.Status, __ATOMIC_ACQUIRE);
            EXPECT(st & VIP_STATUS_DONE, "%s: round %d: the fenced message arrived before read %d completed", ph,
                   round, i);
        }
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && d->CS.ImmediateData == seed && d->CS.Length == total,
               "%s: round %d: target status 0x%x imm %u length %u", ph, round, d->CS.Status, d->CS.ImmediateData,
               d->CS.Length);
        const char *got = fenced_write ? wdst : rbuf;
        long bad = th_verify(got, total, seed);
        EXPECT(bad < 0, "%s: round %d: the fenced %s carried other data than the reads brought (first at byte %ld: "
                        "0x%02x)", ph, round, fenced_write ? "write" : "send", bad,
               bad >= 0 ? (uint8_t)got[bad] : 0);
        for (int i = 0; i < nreads; i++) {
            d = th_send_done_must(a, rdsc[i], "read");
            EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RDMA_READ &&
                       d->CS.Length == len,
                   "%s: read %d status 0x%x length %u", ph, i, d->CS.Status, d->CS.Length);
        }
        d = th_send_done_must(a, fd, "fenced descriptor");
        EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) ==
                       (fenced_write ? VIP_STATUS_OP_RDMA_WRITE : VIP_STATUS_OP_SEND) &&
                   d->CS.Length == total,
               "%s: fenced descriptor status 0x%x length %u", ph, d->CS.Status, d->CS.Length);
    }
    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(b));
    th_drain(a, 200);
    th_drain(b, 200);
    CHECK(VipDestroyVi(a));
    CHECK(VipDestroyVi(b));
    E.used = mark;
}

/* Both VIs of a pair are initiator and target at once: each posts reads from the other,
 * writes to it and sends to it, interleaved. Each side's send queue completes in post
 * order with the right data. */
static void both_ways(VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    snprintf(ph, sizeof ph, "reads, writes and sends both ways at once, %s", th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE v[2];
    th_pair_rdma(&E, rel, &v[0], &v[1], "both");
    enum { N = 9, RLEN = 100 * 1024, SLEN = 3000 };
    /* side s reads from SRC half s, writes into SRC half 1 - s at +RLEN */
    size_t half = SRC.len / 2;
    th_fill(SRC.p, half, 11);
    th_fill(SRC.p + half, half, 12);
    VIP_DESCRIPTOR *sd[2][N], *rd[2][N];
    char *buf[2][N], *rb[2][N];
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < N; i++) {
            rd[s][i] = th_desc(&E, 1);
            rb[s][i] = th_alloc(&E, SLEN);
            th_set1(rd[s][i], E.mh, rb[s][i], SLEN);
            CHECK(VipPostRecv(v[s], rd[s][i], E.mh));
        }
    }
    for (int i = 0; i < N; i++) {
        for (int s = 0; s < 2; s++) {
            sd[s][i] = th_desc(&E, 2);
            char *other_half = SRC.p + (size_t)(1 - s) * half;
            if (i % 3 == 0) {
                buf[s][i] = th_alloc(&E, RLEN);
                th_set_rdma(sd[s][i], VIP_CONTROL_OP_RDMAREAD, other_half + 64 * i, SRC.mh, E.mh, buf[s][i], RLEN, 1);
            } else if (i % 3 == 1) {
                buf[s][i] = th_alloc(&E, SLEN);
                th_fill(buf[s][i], SLEN, 200u + 10u * (uint32_t)i + (uint32_t)s);
                th_set_rdma(sd[s][i], VIP_CONTROL_OP_RDMAWRITE, other_half + RLEN + 1024 + (size_t)SLEN * i, SRC.mh,
                            E.mh, buf[s][i], SLEN, 1);
            } else {
                buf[s][i] = th_alloc(&E, SLEN);
                th_fill(buf[s][i], SLEN, 400u + 10u * (uint32_t)i + (uint32_t)s);
                th_set1(sd[s][i], E.mh, buf[s][i], SLEN);
            }
            CHECK(VipPostSend(v[s], sd[s][i], E.mh));
        }
    }
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < N; i++) {
            VIP_DESCRIPTOR *d = th_send_done_must(v[s], NULL, "send queue");
            EXPECT(d == sd[s][i], "%s: side %d completion %d out of post order", ph, s, i);
            if (d != sd[s][i]) break;
            uint32_t op = i % 3 == 0 ? VIP_STATUS_OP_RDMA_READ : i % 3 == 1 ? VIP_STATUS_OP_RDMA_WRITE : VIP_STATUS_OP_SEND;
            EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == op, "%s: side %d desc %d status 0x%x",
                   ph, s, i, d->CS.Status);
            if (i % 3 == 0)
                EXPECT(memcmp(buf[s][i], SRC.p + (size_t)(1 - s) * half + 64 * i, RLEN) == 0,
                       "%s: side %d read %d data", ph, s, i);
        }
    }
    for (int s = 0; s < 2; s++) {
        int k = 0;
        for (int i = 2; i < N; i += 3) {
            VIP_DESCRIPTOR *d = th_recv_done_must(v[s], rd[s][k], "receive");
            EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 &&
                       th_verify(rb[s][k], SLEN, 400u + 10u * (uint32_t)i + (uint32_t)(1 - s)) < 0,
                   "%s: side %d receive %d", ph, s, k);
            k++;
        }
        for (int i = 1; i < N; i += 3)
            EXPECT(th_verify(SRC.p + (size_t)s * half + RLEN + 1024 + (size_t)SLEN * i, SLEN,
                             200u + 10u * (uint32_t)i + (uint32_t)(1 - s)) < 0,
                   "%s: write %d into side %d's memory", ph, i, s);
    }
    CHECK(VipDisconnect(v[0]));
    CHECK(VipDisconnect(v[1]));
    th_drain(v[0], 500);
    th_drain(v[1], 500);
    CHECK(VipDestroyVi(v[0]));
    CHECK(VipDestroyVi(v[1]));
    E.used = mark;
}

/* VipDisconnect with reads, writes and sends outstanding: every descriptor completes,
 * in post order, each with its own op bits (successful ones first, then flushed ones). */
static void disconnect_mix(VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    snprintf(ph, sizeof ph, "disconnect with a mix outstanding, %s", th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    th_pair_rdma(&E, rel, &a, &b, "dmix");
    enum { N = 8 };
    static const enum opk ops[N] = {O_READ, O_WRITE, O_SEND, O_READ, O_WRITE_IMM, O_SEND, O_READ, O_WRITE};
    VIP_DESCRIPTOR *sd[N];
    char *buf = th_alloc(&E, BIG);
    for (int i = 0; i < N; i++) {
        VIP_DESCRIPTOR *r = th_desc(&E, 1);
        th_set1(r, E.mh, th_alloc(&E, BIG), BIG);
        CHECK(VipPostRecv(b, r, E.mh));
    }
    int posted = 0;
    for (int i = 0; i < N; i++) {
        sd[i] = th_desc(&E, 2);
        if (ops[i] == O_SEND) th_set1(sd[i], E.mh, buf, BIG);
        else
            th_set_rdma(sd[i], ops[i] == O_READ ? VIP_CONTROL_OP_RDMAREAD
                                                : VIP_CONTROL_OP_RDMAWRITE |
                                                      (ops[i] == O_WRITE_IMM ? VIP_CONTROL_IMMEDIATE : 0),
                        SRC.p, SRC.mh, E.mh, buf, BIG, 1);
        if (VipPostSend(a, sd[i], E.mh) != VIP_SUCCESS) break;
        posted++;
    }
    CHECK(VipDisconnect(a));
    static const uint32_t opbits[] = {VIP_STATUS_OP_SEND, VIP_STATUS_OP_RDMA_READ, VIP_STATUS_OP_RDMA_WRITE,
                                      VIP_STATUS_OP_RDMA_WRITE};
    int flushed = 0;
    for (int i = 0; i < posted; i++) {
        VIP_DESCRIPTOR *d = th_send_done_must(a, NULL, "outstanding descriptor");
        EXPECT(d == sd[i], "%s: completion %d out of post order", ph, i);
        if (d != sd[i]) break;
        uint32_t err = d->CS.Status & VIP_STATUS_ERROR_MASK;
        EXPECT((d->CS.Status & VIP_STATUS_OP_MASK) == opbits[ops[i]],
               "%s: descriptor %d (%s) completed with op bits 0x%x, want 0x%x (status 0x%x)", ph, i,
               ops[i] == O_READ ? "RDMA read" : ops[i] == O_SEND ? "send" : "RDMA write",
               d->CS.Status & VIP_STATUS_OP_MASK, opbits[ops[i]], d->CS.Status);
        EXPECT(err == 0 || err == VIP_STATUS_DESC_FLUSHED_ERROR, "%s: descriptor %d status 0x%x", ph, i, d->CS.Status);
        EXPECT(!(flushed && err == 0), "%s: descriptor %d succeeded after an earlier one was flushed", ph, i);
        flushed += err != 0;
    }
    CHECK(VipDisconnect(b));
    th_drain(a, 500);
    th_drain(b, 500);
    CHECK(VipDestroyVi(a));
    CHECK(VipDestroyVi(b));
    E.used = mark;
}

int main(void) {
    th_init("rdma_order", 0);
    th_open_env(&E, NULL, 16 << 20);
    th_region_new(&E, &SRC, 2 * (BIG + 4096), NULL, VIP_TRUE, VIP_TRUE);
    static const enum opk read_then_sends[] = {O_READ, O_SEND, O_SEND, O_SEND, O_SEND};
    static const enum opk mixed[] = {O_SEND, O_READ, O_WRITE, O_SEND, O_READ, O_WRITE_IMM, O_SEND,
                                     O_READ, O_READ, O_WRITE, O_SEND, O_WRITE_IMM};
    static const enum opk writes_sends[] = {O_WRITE, O_SEND, O_WRITE_IMM, O_WRITE, O_WRITE, O_SEND, O_WRITE_IMM, O_SEND};
    for (int li = 0; li < 3; li++) {
        VIP_RELIABILITY_LEVEL rel = th_levels[li];
        if (rel != VIP_SERVICE_UNRELIABLE) {
            mix(rel, read_then_sends, 5, "a 300 KiB read, then sends");
            mix(rel, mixed, 12, "reads, writes and sends");
        }
        mix(rel, writes_sends, 8, "writes and sends");
    }
    for (int li = 1; li < 3; li++) {
        VIP_RELIABILITY_LEVEL rel = th_levels[li];
        fence(rel, 1, BIG, 0, 5);
        fence(rel, 3, 40000, 0, 3);
        fence(rel, 1, BIG, 1, 3);
        fence(rel, 1, 1, 0, 3);
    }
    for (int li = 1; li < 3; li++) both_ways(th_levels[li]);
    for (int li = 0; li < 3; li++) {
        if (th_levels[li] == VIP_SERVICE_UNRELIABLE) continue; /* (reads) */
        disconnect_mix(th_levels[li]);
    }
    th_nic_healthy(&E);
    th_region_free(&SRC);
    th_close_env(&E);
    return th_result();
}
