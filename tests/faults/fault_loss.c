/*
 * fault_loss -- what each reliability level does when frames are lost (docs/faults.md,
 * docs/reliability.md). One process, one NIC with the fault injector on (set here,
 * before VipOpenNic), VI pairs on that NIC; runs in both progress modes
 * (SOFTVIA_PROGRESS).
 *
 *  - Unreliable, lossy link (drop=0.15, fixed seed), messages of one and of three
 *    frames: every receive that completes holds an intact message and no error bits
 *    (a message that lost a fragment is dropped, never completed with
 *    VIP_STATUS_PARTIAL_ERROR); receives complete in post order and messages in send
 *    order, each at most once; some are lost (the injector's Dropped counter moves).
 *  - Reliable delivery and reliable reception, each:
 *    - one whole message lost (drop=1.0 for it, then drop=0): the firmware resends it;
 *      it arrives once, in its place, every send succeeds, Retransmits counts it;
 *    - drop=0.2 + dup + reorder: 200 three-frame messages with up to 8 in flight, then
 *      40 RDMA write + read pairs of three frames: everything exactly once, in order,
 *      intact, every descriptor successful, both VIs still connected;
 *    - the peer stops answering (drop=1.0 for good): after the 200 ms retry timeout set
 *      by VipExtSetRetryTimeout the sender is in VIP_STATE_ERROR, its sends in flight
 *      completed with VIP_STATUS_TRANSPORT_ERROR, the error callback called once with
 *      VIP_ERROR_CONN_LOST.
 *
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include "../conformance/helpers.h"

static th_env E;
static uint32_t mtu;

static VIP_EXT_FAULT_COUNTERS fcount(void) {
    VIP_EXT_FAULT_COUNTERS c;
    CHECK(VipExtQueryFaultCounters(E.nic, &c));
    return c;
}

/* Posts a send of len bytes filled with seed and immediate data imm; returns it. */
static VIP_DESCRIPTOR *post_send(VIP_VI_HANDLE a, VIP_DESCRIPTOR *sd, char *buf, uint32_t len, uint32_t imm) {
    th_fill(buf, len, imm);
    th_set1(sd, E.mh, buf, len);
    sd->CS.Control = VIP_CONTROL_IMMEDIATE;
    sd->CS.ImmediateData = imm;
    CHECK(VipPostSend(a, sd, E.mh));
    return sd;
}

/* Ends a phase: both VIs disconnected, their flushed descriptors taken back, both
 * destroyed, the phase's arena space returned. */
static void unpair(VIP_VI_HANDLE a, VIP_VI_HANDLE b, size_t mark) {
    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(b));
    th_drain(a, 1000);
    th_drain(b, 1000);
    CHECK(VipDestroyVi(a));
    CHECK(VipDestroyVi(b));
    E.used = mark;
}

static void unreliable_lossy(void) {
    th_phase("unreliable, drop=0.15");
    enum { N = 300 };
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    th_pair(&E, VIP_SERVICE_UNRELIABLE, &a, &b, "uloss");
    uint32_t cap = 3 * mtu;
    VIP_DESCRIPTOR *rd[N], *sd = th_desc(&E, 1);
    char *rb[N], *sb = th_alloc(&E, cap);
    for (int i = 0; i < N; i++) {
        rd[i] = th_desc(&E, 1);
        rb[i] = th_alloc(&E, cap);
        th_set1(rd[i], E.mh, rb[i], cap);
        CHECK(VipPostRecv(b, rd[i], E.mh));
    }
    VIP_EXT_FAULT_COUNTERS f0 = fcount();
    CHECK(VipExtSetFaults(E.nic, "drop=0.15,seed=21"));
    int next = 0, last = -1, bad = 0;
    for (int i = 0; i < N && !bad; i++) {
        uint32_t len = i % 2 ? 3 * mtu - 100 : 100; /* three frames or one */
        post_send(a, sd, sb, len, (uint32_t)i);
        VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "send");
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "send %d status 0x%x", i, d->CS.Status);
        /* take what arrived */
        for (int spin = 0; spin < 200; spin++) {
            VIP_DESCRIPTOR *r;
            if (VipRecvDone(b, &r) != VIP_SUCCESS) {
                sched_yield();
                continue;
            }
            int imm = (int)r->CS.ImmediateData;
            uint32_t want_len = imm % 2 ? 3 * mtu - 100 : 100;
            if (r != rd[next]) {
                EXPECT(0, "receive %d completed out of post order", next);
                bad = 1;
                break;
            }
            if (r->CS.Status & VIP_STATUS_ERROR_MASK) {
                EXPECT(0, "receive %d completed with status 0x%x (a lossy message must be dropped, not completed "
                          "with an error, on an unreliable VI)", next, r->CS.Status);
            } else {
                EXPECT(imm > last && imm <= i, "receive %d holds message %d after message %d (sent up to %d)", next,
                       imm, last, i);
                EXPECT(r->CS.Length == want_len && th_verify(rb[next], want_len, (uint32_t)imm) < 0,
                       "message %d arrived damaged (length %u)", imm, r->CS.Length);
                last = imm;
            }
            next++;
        }
    }
    CHECK(VipExtSetFaults(E.nic, "drop=0"));
    VIP_EXT_FAULT_COUNTERS f1 = fcount();
    printf("%s: unreliable: %d of %d messages arrived, %llu frames dropped\n", th_prog, next, N,
           (unsigned long long)(f1.Dropped - f0.Dropped));
    EXPECT(f1.Dropped > f0.Dropped, "nothing was dropped at drop=0.15");
    EXPECT(next > 0 && next < N, "%d of %d messages arrived", next, N);
    EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "states %s / %s",
           th_state_name(th_state(a)), th_state_name(th_state(b)));
    unpair(a, b, mark);
}

/* Takes the next send completion of a, which must be want, successful. */
static void send_ok(VIP_VI_HANDLE a, VIP_DESCRIPTOR *want, const char *what, int i) {
    VIP_DESCRIPTOR *d = th_send_done_must(a, want, what);
    EXPECT(d && (d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%s %d: status 0x%x", what, i, d ? d->CS.Status : 0);
}

static void reliable_message_resent(VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    snprintf(ph, sizeof ph, "%s, one message lost", th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    th_pair(&E, rel, &a, &b, "rloss");
    VIP_DESCRIPTOR *rd[3], *sd[3];
    char *rb[3], *m = th_alloc(&E, 3 * 64);
    for (int i = 0; i < 3; i++) {
        rd[i] = th_desc(&E, 1);
        sd[i] = th_desc(&E, 1);
        rb[i] = th_alloc(&E, 64);
        th_set1(rd[i], E.mh, rb[i], 64);
        CHECK(VipPostRecv(b, rd[i], E.mh));
    }
    VIP_EXT_COUNTERS c0;
    CHECK(VipExtQueryViCounters(a, &c0));
    post_send(a, sd[0], m, 20, 0);
    send_ok(a, sd[0], "message", 0);
    /* message 1 is lost on the wire: drop everything until the injector has dropped it */
    VIP_EXT_FAULT_COUNTERS f0 = fcount();
    CHECK(VipExtSetFaults(E.nic, "drop=1.0"));
    post_send(a, sd[1], m + 64, 20, 1);
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    while (fcount().Dropped == f0.Dropped && th_now_ms() < end) VipQueryVi(a, NULL, NULL, NULL, NULL);
    CHECK(VipExtSetFaults(E.nic, "drop=0"));
    EXPECT(fcount().Dropped > f0.Dropped, "%s: message 1 was not dropped", ph);
    post_send(a, sd[2], m + 128, 20, 2);
    /* the firmware resends it: every message arrives once, in its place */
    for (int i = 0; i < 3; i++) {
        VIP_DESCRIPTOR *d = th_recv_done_must(b, rd[i], "receive");
        EXPECT(d && (d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && d->CS.ImmediateData == (uint32_t)i &&
                   th_verify(rb[i], 20, (uint32_t)i) < 0,
               "%s: receive %d: status 0x%x, message %u", ph, i, d ? d->CS.Status : 0, d ? d->CS.ImmediateData : 0);
    }
    send_ok(a, sd[1], "message", 1);
    send_ok(a, sd[2], "message", 2);
    VIP_EXT_COUNTERS c1;
    CHECK(VipExtQueryViCounters(a, &c1));
    EXPECT(c1.Retransmits > c0.Retransmits, "%s: no retransmission counted", ph);
    EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "%s: states %s / %s", ph,
           th_state_name(th_state(a)), th_state_name(th_state(b)));
    unpair(a, b, mark);
}

/* Messages of three frames, up to W in flight, then RDMA writes and reads of three frames,
 * on a link that drops, duplicates and reorders: everything arrives exactly once, in
 * order, intact, and every descriptor completes successfully in post order. */
static void reliable_lossy(VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    snprintf(ph, sizeof ph, "%s, drop=0.2 dup=0.05 reorder=0.05", th_rel_name(rel));
    th_phase(ph);
    enum { N = 200, W = 8, RDMA = 40 };
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    th_pair_rdma(&E, rel, &a, &b, "rlossy");
    uint32_t len = 3 * mtu - 100;
    VIP_DESCRIPTOR *rd[N], *sd[W];
    char *rb[N], *sb[W];
    for (int i = 0; i < N; i++) {
        rd[i] = th_desc(&E, 1);
        rb[i] = th_alloc(&E, len);
        th_set1(rd[i], E.mh, rb[i], len);
        CHECK(VipPostRecv(b, rd[i], E.mh));
    }
    for (int i = 0; i < W; i++) {
        sd[i] = th_desc(&E, 2);
        sb[i] = th_alloc(&E, len);
    }
    VIP_EXT_FAULT_COUNTERS f0 = fcount();
    VIP_EXT_COUNTERS c0;
    CHECK(VipExtQueryViCounters(a, &c0));
    CHECK(VipExtSetFaults(E.nic, "drop=0.2,dup=0.05,reorder=0.05,seed=5"));
    int got = 0;
    for (int i = 0; i < N; i++) {
        if (i >= W) send_ok(a, sd[i % W], "send", i - W);
        post_send(a, sd[i % W], sb[i % W], len, (uint32_t)i);
        VIP_DESCRIPTOR *r;
        while (got < N && VipRecvDone(b, &r) == VIP_SUCCESS) {
            EXPECT(r == rd[got] && (r->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && r->CS.ImmediateData == (uint32_t)got &&
                       r->CS.Length == len && th_verify(rb[got], len, (uint32_t)got) < 0,
                   "receive %d: status 0x%x, message %u, length %u", got, r->CS.Status, r->CS.ImmediateData,
                   r->CS.Length);
            got++;
        }
    }
    for (int i = N - W; i < N; i++) send_ok(a, sd[i % W], "send", i);
    for (; got < N; got++) {
        VIP_DESCRIPTOR *r = th_recv_done_must(b, rd[got], "receive");
        EXPECT(r && (r->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && r->CS.ImmediateData == (uint32_t)got &&
                   th_verify(rb[got], len, (uint32_t)got) < 0,
               "receive %d: status 0x%x, message %u", got, r ? r->CS.Status : 0, r ? r->CS.ImmediateData : 0);
    }
    /* RDMA: write a pattern into b's region, read it back into another buffer */
    th_region reg;
    th_region_new(&E, &reg, len, 0, VIP_TRUE, VIP_TRUE);
    char *back = th_alloc(&E, len);
    for (int i = 0; i < RDMA; i++) {
        th_fill(sb[0], len, 1000u + (uint32_t)i);
        memset(back, 0, len);
        th_set_rdma(sd[0], VIP_CONTROL_OP_RDMAWRITE, reg.p, reg.mh, E.mh, sb[0], len, 1);
        th_set_rdma(sd[1], VIP_CONTROL_OP_RDMAREAD, reg.p, reg.mh, E.mh, back, len, 1);
        CHECK(VipPostSend(a, sd[0], E.mh));
        CHECK(VipPostSend(a, sd[1], E.mh)); /* in order after the write on a reliable VI */
        send_ok(a, sd[0], "rdma write", i);
        send_ok(a, sd[1], "rdma read", i);
        EXPECT(th_verify(reg.p, len, 1000u + (uint32_t)i) < 0, "rdma write %d: target memory differs", i);
        EXPECT(th_verify(back, len, 1000u + (uint32_t)i) < 0, "rdma read %d: data read back differs", i);
    }
    CHECK(VipExtSetFaults(E.nic, "drop=0"));
    VIP_EXT_FAULT_COUNTERS f1 = fcount();
    VIP_EXT_COUNTERS c1;
    CHECK(VipExtQueryViCounters(a, &c1));
    printf("%s: %s: %d messages and %d RDMA write+read pairs exactly once; %llu frames dropped, "
           "%llu duplicated, %llu reordered; %llu requests resent\n",
           th_prog, th_rel_name(rel), N, RDMA, (unsigned long long)(f1.Dropped - f0.Dropped),
           (unsigned long long)(f1.Duplicated - f0.Duplicated), (unsigned long long)(f1.Reordered - f0.Reordered),
           (unsigned long long)(c1.Retransmits - c0.Retransmits));
    EXPECT(f1.Dropped > f0.Dropped && c1.Retransmits > c0.Retransmits, "nothing was dropped or resent");
    EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "states %s / %s",
           th_state_name(th_state(a)), th_state_name(th_state(b)));
    unpair(a, b, mark);
    th_region_free(&reg);
}

static VIP_VI_HANDLE lost_vi;
static volatile int lost_calls;
static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e) {
    (void)ctx;
    if (e->ViHandle == lost_vi && e->ResourceCode == VIP_RESOURCE_VI && e->ErrorCode == VIP_ERROR_CONN_LOST)
        __atomic_add_fetch(&lost_calls, 1, __ATOMIC_SEQ_CST);
}

/* A peer that stops answering (from now on every frame is lost): after the VI's retry
 * timeout it goes to VIP_STATE_ERROR, the sends in flight complete with
 * VIP_STATUS_TRANSPORT_ERROR, and the error callback hears VIP_ERROR_CONN_LOST. */
static void peer_stops_answering(VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    snprintf(ph, sizeof ph, "%s, peer stops answering", th_rel_name(rel));
    th_phase(ph);
    enum { TIMEOUT_MS = 200 };
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    th_pair(&E, rel, &a, &b, "rgone");
    EXPECT_RC(VipExtSetRetryTimeout(a, 0), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtSetRetryTimeout(a, 3600001), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtSetRetryTimeout(NULL, 100), VIP_INVALID_PARAMETER);
    CHECK(VipExtSetRetryTimeout(a, TIMEOUT_MS));
    lost_vi = a;
    lost_calls = 0;
    CHECK(VipErrorCallback(E.nic, NULL, on_error));
    VIP_DESCRIPTOR *sd[3], *rd = th_desc(&E, 1);
    char *m = th_alloc(&E, 3 * 64);
    th_set1(rd, E.mh, th_alloc(&E, 64), 64);
    CHECK(VipPostRecv(b, rd, E.mh));
    CHECK(VipExtSetFaults(E.nic, "drop=1.0"));
    uint64_t t0 = th_now_ms();
    for (int i = 0; i < 3; i++) post_send(a, sd[i] = th_desc(&E, 1), m + 64 * i, 20, (uint32_t)i);
    EXPECT(th_wait_state(a, VIP_STATE_ERROR, TIMEOUT_MS + 3000), "%s: sender %s, want ERROR", ph,
           th_state_name(th_state(a)));
    uint64_t took = th_now_ms() - t0;
    EXPECT(took + 20 >= TIMEOUT_MS && took <= TIMEOUT_MS + 1000, "%s: ERROR after %llu ms, retry timeout %d ms", ph,
           (unsigned long long)took, TIMEOUT_MS);
    for (int i = 0; i < 3; i++) {
        VIP_DESCRIPTOR *d = th_send_done_must(a, sd[i], "send in flight");
        EXPECT(d && th_status_has(d, VIP_STATUS_TRANSPORT_ERROR), "%s: send %d status 0x%x, want TRANSPORT_ERROR",
               ph, i, d ? d->CS.Status : 0);
    }
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    while (!lost_calls && th_now_ms() < end) VipQueryVi(a, NULL, NULL, NULL, NULL);
    EXPECT(lost_calls == 1, "%s: %d VIP_ERROR_CONN_LOST calls for the VI, want 1", ph, lost_calls);
    CHECK(VipExtSetFaults(E.nic, "drop=0"));
    CHECK(VipErrorCallback(E.nic, NULL, NULL));
    unpair(a, b, mark);
}

int main(void) {
    th_init("fault_loss", 100);
    setenv("SOFTVIA_FAULTS", "drop=0,seed=1", 1);
    th_open_env(&E, NULL, 8 << 20);
    VIP_EXT_FAULT_COUNTERS fc;
    if (VipExtQueryFaultCounters(E.nic, &fc) != VIP_SUCCESS) return th_skip("the fault injector did not come on");
    mtu = (uint32_t)E.na.NativeMTU;
    unreliable_lossy();
    for (VIP_RELIABILITY_LEVEL rel = VIP_SERVICE_RELIABLE_DELIVERY; rel <= VIP_SERVICE_RELIABLE_RECEPTION; rel <<= 1) {
        reliable_message_resent(rel);
        reliable_lossy(rel);
        peer_stops_answering(rel);
    }
    th_close_env(&E);
    return th_result();
}
