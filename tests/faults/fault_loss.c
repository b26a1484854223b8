/*
 * fault_loss -- what each reliability level does when frames are lost (docs/faults.md,
 * "The receive rules that make loss safe" and "Reliable levels on a lossy link: not
 * yet"). One process, one NIC with the fault injector on (set here, before VipOpenNic),
 * VI pairs on that NIC; runs in both progress modes (SOFTVIA_PROGRESS).
 *
 *  - Unreliable, lossy link (drop=0.15, fixed seed), messages of one and of three
 *    frames: every receive that completes holds an intact message and no error bits
 *    (a message that lost a fragment is dropped, never completed with
 *    VIP_STATUS_PARTIAL_ERROR); receives complete in post order and messages in send
 *    order, each at most once; some are lost (the injector's Dropped counter moves).
 *  - Reliable delivery and reliable reception, one whole message lost (drop=1.0 for it,
 *    then drop=0): the next message must not take the lost one's place; the receiving
 *    VI ends in VIP_STATE_ERROR when it arrives (a loss breaks the connection, it is
 *    never skipped), and on reliable reception the lost message's send is never
 *    reported successful.
 *  - Reliable delivery, lossy link (drop=0.2, fixed seed), three-frame messages sent one
 *    at a time: what the receiver completes successfully is an unbroken prefix of the
 *    messages sent; once a frame is lost the receiving VI goes to VIP_STATE_ERROR.
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
    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(b));
    th_drain(a, 500);
    th_drain(b, 500);
    CHECK(VipDestroyVi(a));
    CHECK(VipDestroyVi(b));
    E.used = mark;
}

static void reliable_whole_message_lost(VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    snprintf(ph, sizeof ph, "%s, one message lost", th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    th_pair(&E, rel, &a, &b, "rloss");
    VIP_DESCRIPTOR *r1 = th_desc(&E, 1), *r2 = th_desc(&E, 1), *s0 = th_desc(&E, 1), *s1 = th_desc(&E, 1),
                   *s2 = th_desc(&E, 1), *r0 = th_desc(&E, 1);
    char *b0 = th_alloc(&E, 64), *b1 = th_alloc(&E, 64), *b2 = th_alloc(&E, 64), *m = th_alloc(&E, 3 * 64);
    th_set1(r0, E.mh, b0, 64);
    th_set1(r1, E.mh, b1, 64);
    th_set1(r2, E.mh, b2, 64);
    CHECK(VipPostRecv(b, r0, E.mh));
    CHECK(VipPostRecv(b, r1, E.mh));
    CHECK(VipPostRecv(b, r2, E.mh));
    /* message 0 goes through */
    post_send(a, s0, m, 20, 0);
    th_send_done_must(a, s0, "message 0");
    VIP_DESCRIPTOR *d = th_recv_done_must(b, r0, "message 0");
    EXPECT(d->CS.ImmediateData == 0 && (d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%s: message 0: 0x%x", ph,
           d->CS.Status);
    /* message 1 is lost on the wire */
    VIP_EXT_FAULT_COUNTERS f0 = fcount();
    CHECK(VipExtSetFaults(E.nic, "drop=1.0"));
    post_send(a, s1, m + 64, 20, 1);
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    while (fcount().Dropped == f0.Dropped && th_now_ms() < end) VipQueryVi(a, NULL, NULL, NULL, NULL);
    CHECK(VipExtSetFaults(E.nic, "drop=0"));
    EXPECT(fcount().Dropped > f0.Dropped, "%s: message 1 was not dropped", ph);
    /* message 2 arrives: it must not take message 1's place */
    post_send(a, s2, m + 128, 20, 2);
    VIP_RETURN rc;
    d = th_recv_wait(b, &rc);
    EXPECT(!(d == r1 && (d->CS.Status & VIP_STATUS_ERROR_MASK) == 0),
           "%s: message %u was delivered in place of the lost message 1 (status 0x%x): a reliable VI skipped a loss",
           ph, d ? d->CS.ImmediateData : 0, d ? d->CS.Status : 0);
    EXPECT(th_wait_state(b, VIP_STATE_ERROR, 1000), "%s: receiving VI %s after a lost message, want ERROR", ph,
           th_state_name(th_state(b)));
    if (rel == VIP_SERVICE_RELIABLE_RECEPTION) {
        d = th_send_wait(a, &rc);
        EXPECT(!(d == s1 && (d->CS.Status & VIP_STATUS_ERROR_MASK) == 0),
               "%s: the lost message's send was reported successful (placed) on reliable reception", ph);
    }
    VipDisconnect(a);
    VipDisconnect(b);
    th_drain(a, 1000);
    th_drain(b, 1000);
    EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
    EXPECT_RC(VipDestroyVi(b), VIP_SUCCESS);
    E.used = mark;
}

static void reliable_lossy(void) {
    th_phase("reliable delivery, drop=0.2");
    enum { N = 100 };
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    th_pair(&E, VIP_SERVICE_RELIABLE_DELIVERY, &a, &b, "rlossy");
    uint32_t len = 3 * mtu - 100;
    VIP_DESCRIPTOR *rd[N], *sd = th_desc(&E, 1);
    char *rb[N], *sb = th_alloc(&E, len);
    for (int i = 0; i < N; i++) {
        rd[i] = th_desc(&E, 1);
        rb[i] = th_alloc(&E, len);
        th_set1(rd[i], E.mh, rb[i], len);
        CHECK(VipPostRecv(b, rd[i], E.mh));
    }
    VIP_EXT_FAULT_COUNTERS f0 = fcount();
    CHECK(VipExtSetFaults(E.nic, "drop=0.2,seed=5"));
    int delivered = 0, sent = 0, broken = 0;
    for (int i = 0; i < N && !broken; i++) {
        if (th_state(a) != VIP_STATE_CONNECTED) break;
        post_send(a, sd, sb, len, (uint32_t)i);
        th_send_done_must(a, sd, "send");
        sent++;
        /* message i arrives, or the receiver breaks, or (lost whole) nothing happens */
        for (int spin = 0; spin < 300; spin++) {
            VIP_DESCRIPTOR *r;
            if (VipRecvDone(b, &r) == VIP_SUCCESS) {
                if (r->CS.Status & VIP_STATUS_ERROR_MASK) {
                    broken = 1;
                    break;
                }
                EXPECT(r == rd[delivered] && (int)r->CS.ImmediateData == delivered,
                       "message %u completed receive %d: the receiver skipped a lost message and stayed connected",
                       r->CS.ImmediateData, delivered);
                EXPECT(th_verify(rb[delivered], len, r->CS.ImmediateData) < 0, "message %u damaged",
                       r->CS.ImmediateData);
                delivered++;
                break;
            }
            if (th_state(b) != VIP_STATE_CONNECTED) {
                broken = 1;
                break;
            }
            sched_yield();
        }
    }
    CHECK(VipExtSetFaults(E.nic, "drop=0"));
    if (!broken && th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED && sent < N) {
        /* a message lost as a whole is noticed when the next one arrives: send one more */
        post_send(a, sd, sb, len, (uint32_t)sent);
        th_send_done_must(a, sd, "send");
        sent++;
        VIP_DESCRIPTOR *r;
        for (int spin = 0; spin < 1000 && th_state(b) == VIP_STATE_CONNECTED; spin++)
            if (VipRecvDone(b, &r) == VIP_SUCCESS) {
                if (!(r->CS.Status & VIP_STATUS_ERROR_MASK)) {
                    EXPECT(r == rd[delivered] && (int)r->CS.ImmediateData == delivered,
                           "message %u completed receive %d: the receiver skipped a lost message",
                           r->CS.ImmediateData, delivered);
                    delivered++;
                }
                break;
            }
    }
    VIP_EXT_FAULT_COUNTERS f1 = fcount();
    printf("%s: reliable delivery: %d sent, %d delivered, %llu frames dropped, receiver %s\n", th_prog, sent,
           delivered, (unsigned long long)(f1.Dropped - f0.Dropped), th_state_name(th_state(b)));
    EXPECT(f1.Dropped > f0.Dropped, "nothing was dropped at drop=0.2");
    if (f1.Dropped > f0.Dropped)
        EXPECT(th_wait_state(b, VIP_STATE_ERROR, 1000), "frames were lost and the receiving VI is %s, want ERROR",
               th_state_name(th_state(b)));
    VipDisconnect(a);
    VipDisconnect(b);
    th_drain(a, 1000);
    th_drain(b, 1000);
    EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
    EXPECT_RC(VipDestroyVi(b), VIP_SUCCESS);
    E.used = mark;
}

int main(void) {
    th_init("fault_loss", 100);
    setenv("SOFTVIA_FAULTS", "drop=0,seed=1", 1);
    th_open_env(&E, NULL, 8 << 20);
    VIP_EXT_FAULT_COUNTERS fc;
    if (VipExtQueryFaultCounters(E.nic, &fc) != VIP_SUCCESS) return th_skip("the fault injector did not come on");
    mtu = (uint32_t)E.na.NativeMTU;
    unreliable_lossy();
    reliable_whole_message_lost(VIP_SERVICE_RELIABLE_DELIVERY);
    reliable_whole_message_lost(VIP_SERVICE_RELIABLE_RECEPTION);
    reliable_lossy();
    th_close_env(&E);
    return th_result();
}
