/*
 * steering: request/reply steering (extension, docs/steering.md).
 *
 *  - API: VipExtPostRecvReply / VipExtRecvReplyDone / VipExtRecvReplyWait on a VI
 *    without steering -> VIP_INVALID_STATE; VipExtEnableSteering on a connected, a
 *    connecting or a broken VI -> VIP_INVALID_STATE (idle again after VipDisconnect:
 *    accepted); NULL and wrong-kind handles, a reply CQ of another NIC, NULL / misaligned
 *    / unregistered descriptors -> VIP_INVALID_PARAMETER, and a refused call changes
 *    nothing; the reply CQ is bound while the VI lives; a VI with reply descriptors
 *    outstanding is not destroyed; ReplyWait with nothing posted -> VIP_INVALID_STATE,
 *    with nothing arriving -> VIP_TIMEOUT.
 *  - At every reliability level, with steering: messages sent with VIP_EXT_CONTROL_REPLY
 *    land in the reply queue (and the reply CQ, RecvQueue = VIP_EXT_REPLY_QUEUE), the
 *    others in the receive queue (its CQ, RecvQueue = VIP_TRUE), each class in its own
 *    order, multi-fragment and empty messages included; an RDMA write with immediate
 *    data and the reply bit consumes a reply descriptor (without the bit: a receive).
 *    Without steering every message takes the receive queue, in send order. A reply
 *    CQ of NULL (no entries for replies) and one CQ shared by both queues work.
 *  - An empty queue of one class: unreliable drops the message (and counts it) even
 *    when the other queue has descriptors, and goes on; reliable levels break the
 *    connection. A reply descriptor too small for the reply completes with
 *    VIP_STATUS_LENGTH_ERROR. VipDisconnect flushes the reply queue.
 */
#include "helpers.h"

static th_env E;
static uint32_t mtu;

/* Sends one message (class: 1 reply, 0 request) of len bytes, filled with seed, with
 * immediate data imm, and waits for the send to complete: without error (must_ok 1),
 * with one (must_ok -1), either (0). */
static void send_msg2(VIP_VI_HANDLE a, int reply, uint32_t imm, uint32_t len, uint32_t seed, int must_ok) {
    size_t mark = E.used;
    VIP_DESCRIPTOR *sd = th_desc(&E, 1);
    char *buf = th_alloc(&E, len ? len : 1);
    th_fill(buf, len, seed);
    th_set1(sd, E.mh, buf, len);
    sd->CS.Control = VIP_CONTROL_IMMEDIATE | (reply ? VIP_EXT_CONTROL_REPLY : 0);
    sd->CS.ImmediateData = imm;
    CHECK(VipPostSend(a, sd, E.mh));
    VIP_DESCRIPTOR *d = th_send_done_must(a, sd, reply ? "reply send" : "request send");
    if (must_ok > 0)
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "send (%s, imm %u) status 0x%x",
               reply ? "reply" : "request", imm, d->CS.Status);
    if (must_ok < 0)
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) != 0,
               "reliable reception reported a send (%s, imm %u) successful that the receiver refused (0x%x)",
               reply ? "reply" : "request", imm, d->CS.Status);
    E.used = mark;
}

static void send_msg(VIP_VI_HANDLE a, int reply, uint32_t imm, uint32_t len, uint32_t seed) {
    send_msg2(a, reply, imm, len, seed, 1);
}

/* Polls the reply queue (bounded), like th_recv_wait. */
static VIP_DESCRIPTOR *reply_wait(VIP_VI_HANDLE vi, VIP_RETURN *rc) {
    VIP_DESCRIPTOR *d = NULL;
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    for (unsigned turn = 0;; turn++) {
        VIP_RETURN r = VipExtRecvReplyDone(vi, &d);
        if (r != VIP_NOT_DONE) {
            if (rc) *rc = r;
            return r == VIP_SUCCESS ? d : NULL;
        }
        if (turn >= 64) sched_yield();
        if ((turn & 255) == 255 && th_now_ms() >= end) break;
    }
    if (rc) *rc = VIP_TIMEOUT;
    return NULL;
}

/* Drains both receive queues of a steering VI (after a disconnect). */
static void drain_steer(VIP_VI_HANDLE vi) {
    VIP_DESCRIPTOR *d;
    uint64_t end = th_now_ms() + 1000;
    while (th_now_ms() < end && VipExtRecvReplyDone(vi, &d) == VIP_SUCCESS) {
    }
    th_drain(vi, 500);
}

static void api(void) {
    th_phase("API: calls on a VI without steering");
    VIP_VI_HANDLE vi = th_vi(&E, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    VIP_DESCRIPTOR *d = th_desc(&E, 1), *dp = NULL;
    th_set1(d, E.mh, th_alloc(&E, 64), 64);
    EXPECT_RC(VipExtPostRecvReply(vi, d, E.mh), VIP_INVALID_STATE);
    EXPECT_RC(VipExtRecvReplyDone(vi, &dp), VIP_INVALID_STATE);
    EXPECT_RC(VipExtRecvReplyWait(vi, 0, &dp), VIP_INVALID_STATE);
    EXPECT_RC(VipExtRecvReplyWait(vi, 10, &dp), VIP_INVALID_STATE);

    th_phase("API: NULL and wrong handles");
    th_env e2;
    th_open_env(&e2, NULL, 0);
    VIP_CQ_HANDLE cq, cq_other;
    CHECK(VipCreateCQ(E.nic, 16, &cq));
    CHECK(VipCreateCQ(e2.nic, 16, &cq_other));
    EXPECT_RC(VipExtEnableSteering(NULL, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtEnableSteering(NULL, cq), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtEnableSteering((VIP_VI_HANDLE)(void *)cq, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtEnableSteering((VIP_VI_HANDLE)(void *)E.nic, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtEnableSteering(vi, (VIP_CQ_HANDLE)(void *)vi), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtEnableSteering(vi, (VIP_CQ_HANDLE)(void *)E.nic), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtEnableSteering(vi, cq_other), VIP_INVALID_PARAMETER);
    /* none of that enabled steering or bound a CQ */
    EXPECT_RC(VipExtPostRecvReply(vi, d, E.mh), VIP_INVALID_STATE);
    EXPECT_RC(VipDestroyCQ(cq_other), VIP_SUCCESS);
    th_close_env(&e2);
    EXPECT_RC(VipExtPostRecvReply(NULL, d, E.mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtRecvReplyDone(NULL, &dp), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtRecvReplyWait(NULL, 0, &dp), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtPostRecvReply((VIP_VI_HANDLE)(void *)cq, d, E.mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtRecvReplyDone((VIP_VI_HANDLE)(void *)cq, &dp), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtRecvReplyWait((VIP_VI_HANDLE)(void *)cq, 0, &dp), VIP_INVALID_PARAMETER);

    th_phase("API: enable steering on an idle VI, then bad arguments");
    EXPECT_RC(VipExtEnableSteering(vi, cq), VIP_SUCCESS);
    EXPECT_RC(VipExtPostRecvReply(vi, NULL, E.mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtPostRecvReply(vi, (VIP_DESCRIPTOR *)((char *)d + 8), E.mh), VIP_INVALID_PARAMETER);
    VIP_DESCRIPTOR *unreg = aligned_alloc(64, 128);
    memset(unreg, 0, 128);
    EXPECT_RC(VipExtPostRecvReply(vi, unreg, E.mh), VIP_INVALID_PARAMETER);
    free(unreg);
    EXPECT_RC(VipExtRecvReplyDone(vi, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtRecvReplyWait(vi, 0, NULL), VIP_INVALID_PARAMETER);
    /* nothing posted: a wait could never end */
    EXPECT_RC(VipExtRecvReplyWait(vi, 10, &dp), VIP_INVALID_STATE);
    EXPECT_RC(VipExtRecvReplyDone(vi, &dp), VIP_NOT_DONE);
    /* the reply CQ is bound while the VI lives */
    EXPECT_RC(VipDestroyCQ(cq), VIP_INVALID_STATE);

    th_phase("API: a posted reply descriptor, nothing arriving");
    EXPECT_RC(VipExtPostRecvReply(vi, d, E.mh), VIP_SUCCESS);
    uint64_t t0 = th_now_ms();
    EXPECT_RC(VipExtRecvReplyWait(vi, 50, &dp), VIP_TIMEOUT);
    EXPECT(th_now_ms() - t0 >= 40, "ReplyWait(50 ms) returned after %llu ms", (unsigned long long)(th_now_ms() - t0));
    EXPECT_RC(VipExtRecvReplyDone(vi, &dp), VIP_NOT_DONE);
    /* the VI keeps a reply descriptor: not destroyed */
    EXPECT_RC(VipDestroyVi(vi), VIP_INVALID_STATE);

    th_phase("API: enable steering on a connected, broken, connecting VI");
    VIP_VI_HANDLE peer = th_vi(&E, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    th_connect_peer(&E, vi, peer, "steerapi");
    EXPECT_RC(VipExtEnableSteering(peer, NULL), VIP_INVALID_STATE);
    EXPECT_RC(VipExtEnableSteering(vi, NULL), VIP_INVALID_STATE);
    CHECK(VipDisconnect(vi));
    /* vi's reply descriptor is flushed by the disconnect */
    dp = reply_wait(vi, NULL);
    EXPECT(dp == d && th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR),
           "reply descriptor after VipDisconnect: %p status 0x%x", (void *)dp, d->CS.Status);
    EXPECT(th_wait_state(peer, VIP_STATE_ERROR, TH_WAIT_MS), "peer: %s", th_state_name(th_state(peer)));
    EXPECT_RC(VipExtEnableSteering(peer, NULL), VIP_INVALID_STATE); /* error state */
    CHECK(VipDisconnect(peer));
    EXPECT_RC(VipExtEnableSteering(peer, NULL), VIP_SUCCESS); /* idle again */
    th_addr la, ra;
    CHECK(VipConnectPeerRequest(peer, th_mkaddr(&la, &E.na, "pend.a"), th_mkaddr(&ra, &E.na, "pend.b"), 60000));
    EXPECT(th_state(peer) == VIP_STATE_CONNECT_PENDING, "state %s", th_state_name(th_state(peer)));
    EXPECT_RC(VipExtEnableSteering(peer, NULL), VIP_INVALID_STATE);
    CHECK(VipDisconnect(peer));
    EXPECT_RC(VipDestroyVi(peer), VIP_SUCCESS);
    EXPECT_RC(VipDestroyVi(vi), VIP_SUCCESS);
    EXPECT_RC(VipDestroyCQ(cq), VIP_SUCCESS); /* unbound with the VI */
}

/* The traffic pattern: class (1 reply) and length of each message. */
enum { NMSG = 14 };
static const int cls[NMSG] = {0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0};
static uint32_t msg_len(int i) {
    static const int kind[NMSG] = {0, 1, 2, 3, 4, 0, 2, 0, 3, 5, 1, 4, 1, 5};
    switch (kind[i]) {
        case 0: return 10 + (uint32_t)i;
        case 1: return 0;
        case 2: return mtu;
        case 3: return mtu + 1;
        case 4: return 3 * mtu + 17;
        default: return 1;
    }
}

/* mode 0: no steering; 1: steering with its own reply CQ; 2: reply CQ NULL; 3: one CQ
 * shared by the receive queue and the reply queue. */
static void traffic(VIP_RELIABILITY_LEVEL rel, int mode) {
    static const char *mname[] = {"no steering", "steering, reply CQ", "steering, no reply CQ",
                                  "steering, one CQ for both queues"};
    char ph[128];
    snprintf(ph, sizeof ph, "%s, %s", mname[mode], th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_CQ_HANDLE rcq, pcq = NULL;
    CHECK(VipCreateCQ(E.nic, 64, &rcq));
    if (mode == 1) CHECK(VipCreateCQ(E.nic, 64, &pcq));
    VIP_VI_HANDLE a = th_vi_rdma(&E, rel, VIP_FALSE, VIP_FALSE, NULL, NULL);
    VIP_VI_HANDLE b = th_vi_rdma(&E, rel, VIP_TRUE, VIP_FALSE, NULL, rcq);
    if (mode) CHECK(VipExtEnableSteering(b, mode == 1 ? pcq : mode == 3 ? rcq : NULL));
    th_region tgt;
    th_region_new(&E, &tgt, 4096, NULL, VIP_TRUE, VIP_FALSE);
    /* receives for everything, posted before connecting: NMSG + 2 RDMA writes each side */
    enum { NR = NMSG + 2 };
    VIP_DESCRIPTOR *rq[NR], *pq[NR];
    char *rb[NR], *pb[NR];
    uint32_t cap = 3 * mtu + 64;
    for (int i = 0; i < NR; i++) {
        rq[i] = th_desc(&E, 1);
        rb[i] = th_alloc(&E, cap);
        th_set1(rq[i], E.mh, rb[i], cap);
        CHECK(VipPostRecv(b, rq[i], E.mh));
        if (mode) {
            pq[i] = th_desc(&E, 1);
            pb[i] = th_alloc(&E, cap);
            th_set1(pq[i], E.mh, pb[i], cap);
            CHECK(VipExtPostRecvReply(b, pq[i], E.mh));
        }
    }
    th_connect_peer(&E, a, b, "steer");
    /* the messages, then an RDMA write with immediate data of each class */
    for (int i = 0; i < NMSG; i++) send_msg(a, cls[i], 100u + (uint32_t)i, msg_len(i), 300u + (uint32_t)i);
    VIP_DESCRIPTOR *wd = th_desc(&E, 2);
    char *wsrc = th_alloc(&E, 64);
    for (int r = 0; r < 2; r++) {
        th_fill(wsrc, 64, 77u + (uint32_t)r);
        th_set_rdma(wd, VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE | (r ? VIP_EXT_CONTROL_REPLY : 0),
                    tgt.p + 64 * r, tgt.mh, E.mh, wsrc, 64, 1);
        wd->CS.ImmediateData = 900u + (uint32_t)r;
        CHECK(VipPostSend(a, wd, E.mh));
        VIP_DESCRIPTOR *d = th_send_done_must(a, wd, "RDMA write with immediate data");
        EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RDMA_WRITE,
               "%s: RDMA write (%s) status 0x%x", ph, r ? "reply" : "request", d->CS.Status);
    }
    /* what each queue must hold, in order: index i < NMSG a message, NMSG + r a write */
    int want_rq[NR], want_pq[NR], nrq = 0, npq = 0;
    for (int i = 0; i < NMSG + 2; i++) {
        int reply = i < NMSG ? cls[i] : i == NMSG + 1;
        if (reply && mode) want_pq[npq++] = i;
        else want_rq[nrq++] = i;
    }
    for (int q = 0; q < 2; q++) {
        int n = q ? npq : nrq;
        int *want = q ? want_pq : want_rq;
        for (int k = 0; k < n; k++) {
            int i = want[k];
            VIP_RETURN rc;
            VIP_DESCRIPTOR *d = q ? reply_wait(b, &rc) : th_recv_wait(b, &rc);
            VIP_DESCRIPTOR *exp = q ? pq[k] : rq[k];
            char *buf = q ? pb[k] : rb[k];
            EXPECT(d == exp, "%s: %s queue entry %d: %p (%s), want %p", ph, q ? "reply" : "receive", k, (void *)d,
                   th_rs(rc), (void *)exp);
            if (d != exp) break;
            if (i < NMSG) {
                uint32_t len = msg_len(i);
                EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == VIP_STATUS_OP_RECEIVE &&
                           (d->CS.Status & VIP_STATUS_IMMEDIATE) && d->CS.ImmediateData == 100u + (uint32_t)i &&
                           d->CS.Length == len && th_verify(buf, len, 300u + (uint32_t)i) < 0,
                       "%s: %s queue entry %d: status 0x%x imm %u length %u, want message %d (%s, %u bytes)", ph,
                       q ? "reply" : "receive", k, d->CS.Status, d->CS.ImmediateData, d->CS.Length, i,
                       cls[i] ? "reply" : "request", len);
            } else {
                int r = i - NMSG;
                EXPECT(d->CS.Status == (VIP_STATUS_DONE | VIP_STATUS_OP_REMOTE_RDMA_WRITE | VIP_STATUS_IMMEDIATE) &&
                           d->CS.ImmediateData == 900u + (uint32_t)r && d->CS.Length == 64,
                       "%s: %s queue entry %d: status 0x%x imm %u length %u, want the RDMA write (%s)", ph,
                       q ? "reply" : "receive", k, d->CS.Status, d->CS.ImmediateData, d->CS.Length,
                       r ? "reply" : "request");
                EXPECT(th_verify(tgt.p + 64 * r, 64, 77u + (uint32_t)r) < 0, "%s: RDMA write %d data", ph, r);
            }
        }
    }
    VIP_DESCRIPTOR *x;
    EXPECT_RC(VipRecvDone(b, &x), VIP_NOT_DONE);
    if (mode) EXPECT_RC(VipExtRecvReplyDone(b, &x), VIP_NOT_DONE);
    /* completion queue entries */
    /* The firmware marks a descriptor done before it pushes its CQ entry (whoever takes
     * the entry must find the descriptor done), so with a firmware thread the last
     * entries may trail the descriptors the loops above took: drain until all are in. */
    int n_rcq_recv = 0, n_rcq_reply = 0, n_pcq = 0, other = 0;
    const int want = nrq + (mode == 1 || mode == 3 ? npq : 0);
    VIP_VI_HANDLE v;
    VIP_BOOLEAN q;
    for (int tries = 0; tries < 1000 && n_rcq_recv + n_rcq_reply + n_pcq + other < want; tries++) {
        if (tries) th_sleep_ms(1);
        while (VipCQDone(rcq, &v, &q) == VIP_SUCCESS) {
            if (v != b) other++;
            else if (q == VIP_TRUE) n_rcq_recv++;
            else if (q == VIP_EXT_REPLY_QUEUE) n_rcq_reply++;
            else other++;
        }
        if (pcq)
            while (VipCQDone(pcq, &v, &q) == VIP_SUCCESS) {
                if (v == b && q == VIP_EXT_REPLY_QUEUE) n_pcq++;
                else other++;
            }
    }
    EXPECT(n_rcq_recv == nrq, "%s: receive CQ has %d receive-queue entries, want %d", ph, n_rcq_recv, nrq);
    EXPECT(n_rcq_reply == (mode == 3 ? npq : 0), "%s: receive CQ has %d reply-queue entries, want %d", ph,
           n_rcq_reply, mode == 3 ? npq : 0);
    EXPECT(n_pcq == (mode == 1 ? npq : 0), "%s: reply CQ has %d entries, want %d", ph, n_pcq, mode == 1 ? npq : 0);
    EXPECT(other == 0, "%s: %d CQ entries of another VI or queue", ph, other);
    /* the rest is flushed by the disconnect; the reply queue too */
    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(b));
    int flushed = 0;
    for (int k = nrq; k < NR; k++) {
        VIP_DESCRIPTOR *d = th_recv_wait(b, NULL);
        flushed += d == rq[k] && th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR);
    }
    for (int k = npq; mode && k < NR; k++) {
        VIP_DESCRIPTOR *d = reply_wait(b, NULL);
        flushed += d == pq[k] && th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR);
    }
    EXPECT(flushed == (NR - nrq) + (mode ? NR - npq : 0), "%s: %d descriptors flushed, want %d", ph, flushed,
           (NR - nrq) + (mode ? NR - npq : 0));
    drain_steer(b);
    th_drain(a, 200);
    EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
    EXPECT_RC(VipDestroyVi(b), VIP_SUCCESS);
    EXPECT_RC(VipDestroyCQ(rcq), VIP_SUCCESS);
    if (pcq) EXPECT_RC(VipDestroyCQ(pcq), VIP_SUCCESS);
    th_region_free(&tgt);
    E.used = mark;
}

/* One class's queue is empty when a message of that class arrives. */
static void empty_class(VIP_RELIABILITY_LEVEL rel, int reply) {
    char ph[128];
    snprintf(ph, sizeof ph, "%s queue empty, the other one not, %s", reply ? "reply" : "receive", th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a = th_vi(&E, rel, NULL, NULL), b = th_vi(&E, rel, NULL, NULL);
    CHECK(VipExtEnableSteering(b, NULL));
    VIP_DESCRIPTOR *other = th_desc(&E, 1), *same = th_desc(&E, 1);
    char *ob = th_alloc(&E, 64), *sb = th_alloc(&E, 64);
    th_set1(other, E.mh, ob, 64);
    if (reply) CHECK(VipPostRecv(b, other, E.mh));
    else CHECK(VipExtPostRecvReply(b, other, E.mh));
    th_connect_peer(&E, a, b, "steerempty");
    VIP_EXT_COUNTERS c0;
    CHECK(VipExtQueryViCounters(b, &c0));
    /* reliable reception: the receiver refuses it, so the send does not succeed */
    /* On a lossy wire a reliable-delivery send completes on acknowledgement, which a
     * refused message does not get: either outcome is right there. */
    send_msg2(a, reply, 1, 20, 1,
              rel == VIP_SERVICE_RELIABLE_RECEPTION ? -1 : (rel == VIP_SERVICE_RELIABLE_DELIVERY && th_wire_lossy()) ? 0 : 1);
    if (rel == VIP_SERVICE_UNRELIABLE) {
        VIP_EXT_COUNTERS c1 = th_vi_counters_at_least(b, offsetof(VIP_EXT_COUNTERS, Drops), c0.Drops + 1);
        EXPECT(c1.Drops == c0.Drops + 1, "%s: Drops %llu -> %llu, want +1", ph, (unsigned long long)c0.Drops,
               (unsigned long long)c1.Drops);
        VIP_DESCRIPTOR *x;
        EXPECT_RC(reply ? VipRecvDone(b, &x) : VipExtRecvReplyDone(b, &x), VIP_NOT_DONE); /* other class untouched */
        EXPECT(th_state(b) == VIP_STATE_CONNECTED, "%s: state %s", ph, th_state_name(th_state(b)));
        /* post one of the right class: the next message of that class takes it */
        th_set1(same, E.mh, sb, 64);
        if (reply) CHECK(VipExtPostRecvReply(b, same, E.mh));
        else CHECK(VipPostRecv(b, same, E.mh));
        send_msg(a, reply, 2, 21, 2);
        VIP_DESCRIPTOR *d = reply ? reply_wait(b, NULL) : th_recv_wait(b, NULL);
        EXPECT(d == same && d->CS.ImmediateData == 2 && d->CS.Length == 21 && th_verify(sb, 21, 2) < 0,
               "%s: the next message of the class: %p imm %u", ph, (void *)d, d ? d->CS.ImmediateData : 0);
        /* and the other class still works */
        send_msg(a, !reply, 3, 22, 3);
        d = reply ? th_recv_wait(b, NULL) : reply_wait(b, NULL);
        EXPECT(d == other && d->CS.ImmediateData == 3 && th_verify(ob, 22, 3) < 0, "%s: the other class: %p", ph,
               (void *)d);
    } else {
        EXPECT(th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS), "%s: receiver %s, want ERROR", ph,
               th_state_name(th_state(b)));
        EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS), "%s: sender %s, want ERROR", ph,
               th_state_name(th_state(a)));
        VIP_DESCRIPTOR *d = reply ? th_recv_wait(b, NULL) : reply_wait(b, NULL);
        EXPECT(d == other && th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR),
               "%s: the other class's descriptor: %p status 0x%x, want flushed", ph, (void *)d, d ? d->CS.Status : 0);
    }
    VipDisconnect(a);
    VipDisconnect(b);
    drain_steer(b);
    th_drain(a, 200);
    EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
    EXPECT_RC(VipDestroyVi(b), VIP_SUCCESS);
    E.used = mark;
}

/* A reply descriptor too small for the reply; then VipExtRecvReplyWait. */
static void reply_errors(VIP_RELIABILITY_LEVEL rel) {
    char ph[128];
    snprintf(ph, sizeof ph, "reply descriptor too small, %s", th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a = th_vi(&E, rel, NULL, NULL), b = th_vi(&E, rel, NULL, NULL);
    CHECK(VipExtEnableSteering(b, NULL));
    VIP_DESCRIPTOR *small = th_desc(&E, 1), *good = th_desc(&E, 1);
    char *sbuf = th_alloc(&E, 64), *gbuf = th_alloc(&E, 256);
    th_set1(small, E.mh, sbuf, 8);
    th_set1(good, E.mh, gbuf, 256);
    CHECK(VipExtPostRecvReply(b, small, E.mh));
    CHECK(VipExtPostRecvReply(b, good, E.mh));
    th_connect_peer(&E, a, b, "steerlen");
    send_msg2(a, 1, 5, 100, 5,
              rel == VIP_SERVICE_RELIABLE_RECEPTION ? -1 : (rel == VIP_SERVICE_RELIABLE_DELIVERY && th_wire_lossy()) ? 0 : 1);
    VIP_DESCRIPTOR *d = NULL;
    EXPECT_RC(VipExtRecvReplyWait(b, TH_WAIT_MS, &d), VIP_SUCCESS);
    EXPECT(d == small && (d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) ==
                             (VIP_STATUS_LENGTH_ERROR | VIP_STATUS_OP_RECEIVE),
           "%s: small reply descriptor %p status 0x%x, want LENGTH_ERROR", ph, (void *)d, d ? d->CS.Status : 0);
    if (rel == VIP_SERVICE_UNRELIABLE) {
        send_msg(a, 1, 6, 100, 6);
        d = NULL;
        EXPECT_RC(VipExtRecvReplyWait(b, TH_WAIT_MS, &d), VIP_SUCCESS);
        EXPECT(d == good && (d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && d->CS.ImmediateData == 6 &&
                   th_verify(gbuf, 100, 6) < 0,
               "%s: the next reply: %p status 0x%x", ph, (void *)d, d ? d->CS.Status : 0);
    } else {
        EXPECT(th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS), "%s: receiver %s, want ERROR", ph,
               th_state_name(th_state(b)));
        d = NULL;
        EXPECT_RC(VipExtRecvReplyWait(b, TH_WAIT_MS, &d), VIP_SUCCESS);
        EXPECT(d == good && th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR), "%s: next reply descriptor 0x%x", ph,
               d ? d->CS.Status : 0);
    }
    VipDisconnect(a);
    VipDisconnect(b);
    drain_steer(b);
    th_drain(a, 200);
    EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
    EXPECT_RC(VipDestroyVi(b), VIP_SUCCESS);
    E.used = mark;
}

int main(void) {
    th_init("steering", 0);
    th_open_env(&E, NULL, 8 << 20);
    mtu = (uint32_t)E.na.NativeMTU;
    api();
    for (int li = 0; li < 3; li++) {
        for (int mode = 0; mode < 4; mode++) traffic(th_levels[li], mode);
        empty_class(th_levels[li], 1);
        empty_class(th_levels[li], 0);
        reply_errors(th_levels[li]);
    }
    th_nic_healthy(&E);
    th_close_env(&E);
    return th_result();
}
