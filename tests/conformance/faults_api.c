/*
 * faults_api: the fault injector's calls (docs/faults.md).
 *
 *  - A NIC opened without SOFTVIA_FAULTS (unset, or set to the empty string) has no
 *    injector: VipExtSetFaults and VipExtQueryFaultCounters -> VIP_INVALID_STATE.
 *    NULL NIC handle, NULL spec, NULL counters -> VIP_INVALID_PARAMETER.
 *  - A malformed SOFTVIA_FAULTS (unknown key, a probability outside [0, 1], a key without
 *    a value, no '=', not a number) makes VipOpenNic fail with VIP_INVALID_PARAMETER;
 *    the same specs given to VipExtSetFaults are refused with VIP_INVALID_PARAMETER and
 *    change nothing (traffic keeps flowing).
 *  - SOFTVIA_RETRY_TIMEOUT_MS (docs/reliability.md): 0, negative, not a number, trailing
 *    junk, over 3,600,000 or overflowing -> VipOpenNic fails with VIP_INVALID_PARAMETER;
 *    250 opens.
 *  - With the injector on (one NIC, an unreliable VI pair on it): counters start at 0;
 *    at drop=1.0 nothing arrives, the sends still complete, Dropped grows by (at least)
 *    one per frame sent and the connection stays up; after VipExtSetFaults("drop=0")
 *    traffic flows again and the next message takes the receive that waited. At dup=1.0
 *    every frame goes twice (Duplicated grows) and every message is received exactly
 *    once, in order. At corrupt=1.0 every frame is damaged, the receiving side detects
 *    it (BadChecksum grows) and nothing is delivered.
 */
#include "helpers.h"

static VIP_RETURN open_with(const char *spec, VIP_NIC_HANDLE *nic) {
    if (spec) setenv("SOFTVIA_FAULTS", spec, 1);
    else unsetenv("SOFTVIA_FAULTS");
    *nic = NULL;
    return VipOpenNic(NULL, nic);
}

static const char *const malformed[] = {
    "bogus=0.1",      /* unknown key */
    "drop=1.5",       /* probability over 1 */
    "drop=-0.1",      /* under 0 */
    "drop=",          /* no value */
    "drop",           /* no '=' */
    "drop=abc",       /* not a number */
    "drop=0.1x",      /* trailing junk */
    "dup=0.1,drop=2", /* one bad item among good ones */
    "seed=",          /* no value */
    "seed=x",         /* not a number */
};
enum { NMAL = sizeof malformed / sizeof *malformed };

static VIP_EXT_FAULT_COUNTERS counters(VIP_NIC_HANDLE nic) {
    VIP_EXT_FAULT_COUNTERS c;
    memset(&c, 0xff, sizeof c);
    CHECK(VipExtQueryFaultCounters(nic, &c));
    return c;
}

/* Sends n messages of len bytes (seeds seed..seed+n-1, immediate data = seed) on a and
 * waits for each send to complete without error. */
static void sends(th_env *e, VIP_VI_HANDLE a, int n, uint32_t len, uint32_t seed) {
    size_t mark = e->used;
    VIP_DESCRIPTOR *sd = th_desc(e, 1);
    char *buf = th_alloc(e, len);
    for (int i = 0; i < n; i++) {
        th_fill(buf, len, seed + (uint32_t)i);
        th_set1(sd, e->mh, buf, len);
        sd->CS.Control = VIP_CONTROL_IMMEDIATE;
        sd->CS.ImmediateData = seed + (uint32_t)i;
        CHECK(VipPostSend(a, sd, e->mh));
        VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "send");
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "send %d status 0x%x", i, d->CS.Status);
    }
    e->used = mark;
}

/* Polls the receive queue of b for ms; the number of receives that completed. */
static int receives_within(VIP_VI_HANDLE b, unsigned ms) {
    int n = 0;
    uint64_t end = th_now_ms() + ms;
    VIP_DESCRIPTOR *d;
    while (th_now_ms() < end) {
        if (VipRecvDone(b, &d) == VIP_SUCCESS) n++;
        else sched_yield();
    }
    return n;
}

int main(void) {
    th_init("faults_api", 0);
    VIP_NIC_HANDLE nic;
    VIP_EXT_FAULT_COUNTERS fc;

    th_phase("no injector: SOFTVIA_FAULTS unset");
    CHECK(open_with(NULL, &nic));
    EXPECT_RC(VipExtSetFaults(nic, "drop=0.5"), VIP_INVALID_STATE);
    EXPECT_RC(VipExtSetFaults(nic, "drop=0"), VIP_INVALID_STATE);
    EXPECT_RC(VipExtQueryFaultCounters(nic, &fc), VIP_INVALID_STATE);
    EXPECT_RC(VipExtSetFaults(NULL, "drop=0"), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtSetFaults(nic, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtQueryFaultCounters(NULL, &fc), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtQueryFaultCounters(nic, NULL), VIP_INVALID_PARAMETER);
    CHECK(VipCloseNic(nic));

    th_phase("no injector: SOFTVIA_FAULTS empty");
    CHECK(open_with("", &nic));
    EXPECT_RC(VipExtSetFaults(nic, "drop=0.5"), VIP_INVALID_STATE);
    EXPECT_RC(VipExtQueryFaultCounters(nic, &fc), VIP_INVALID_STATE);
    CHECK(VipCloseNic(nic));

    th_phase("malformed SOFTVIA_FAULTS at VipOpenNic");
    for (int i = 0; i < NMAL; i++) {
        VIP_RETURN r = open_with(malformed[i], &nic);
        EXPECT(r == VIP_INVALID_PARAMETER, "SOFTVIA_FAULTS='%s': VipOpenNic -> %s, want VIP_INVALID_PARAMETER",
               malformed[i], th_rs(r));
        if (r == VIP_SUCCESS) VipCloseNic(nic);
        else EXPECT(nic == NULL, "SOFTVIA_FAULTS='%s': a failed open set the handle", malformed[i]);
    }

    th_phase("SOFTVIA_RETRY_TIMEOUT_MS at VipOpenNic");
    {
        static const char *bad_timeouts[] = {"0", "-5", "abc", "10x", "3600001", "99999999999999999999999"};
        for (size_t i = 0; i < sizeof bad_timeouts / sizeof *bad_timeouts; i++) {
            setenv("SOFTVIA_RETRY_TIMEOUT_MS", bad_timeouts[i], 1);
            VIP_RETURN r = open_with(NULL, &nic);
            EXPECT(r == VIP_INVALID_PARAMETER, "SOFTVIA_RETRY_TIMEOUT_MS='%s': VipOpenNic -> %s, want "
                   "VIP_INVALID_PARAMETER", bad_timeouts[i], th_rs(r));
            if (r == VIP_SUCCESS) VipCloseNic(nic);
        }
        setenv("SOFTVIA_RETRY_TIMEOUT_MS", "250", 1);
        CHECK(open_with(NULL, &nic));
        CHECK(VipCloseNic(nic));
        unsetenv("SOFTVIA_RETRY_TIMEOUT_MS");
    }

    th_phase("injector on: open, counters start at 0");
    th_env e;
    setenv("SOFTVIA_FAULTS", "drop=0,seed=7", 1);
    th_open_env(&e, NULL, 1 << 20);
    fc = counters(e.nic);
    EXPECT(fc.Dropped == 0 && fc.Duplicated == 0 && fc.Reordered == 0 && fc.Corrupted == 0 && fc.Delayed == 0 &&
               fc.BadChecksum == 0,
           "fresh counters: dropped %llu dup %llu reorder %llu corrupt %llu delay %llu bad %llu",
           (unsigned long long)fc.Dropped, (unsigned long long)fc.Duplicated, (unsigned long long)fc.Reordered,
           (unsigned long long)fc.Corrupted, (unsigned long long)fc.Delayed, (unsigned long long)fc.BadChecksum);

    th_phase("injector on: malformed specs at VipExtSetFaults");
    for (int i = 0; i < NMAL; i++) {
        VIP_RETURN r = VipExtSetFaults(e.nic, malformed[i]);
        EXPECT(r == VIP_INVALID_PARAMETER, "VipExtSetFaults('%s') -> %s, want VIP_INVALID_PARAMETER", malformed[i],
               th_rs(r));
    }
    EXPECT_RC(VipExtSetFaults(e.nic, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtQueryFaultCounters(e.nic, NULL), VIP_INVALID_PARAMETER);

    th_phase("injector on: traffic flows at drop=0 (the refused specs changed nothing)");
    VIP_VI_HANDLE a, b;
    th_pair(&e, VIP_SERVICE_UNRELIABLE, &a, &b, "faults");
    enum { NR = 24, LEN = 200 };
    VIP_DESCRIPTOR *rd[NR];
    char *rb[NR];
    for (int i = 0; i < NR; i++) {
        rd[i] = th_desc(&e, 1);
        rb[i] = th_alloc(&e, LEN);
        th_set1(rd[i], e.mh, rb[i], LEN);
        CHECK(VipPostRecv(b, rd[i], e.mh));
    }
    int next = 0; /* the next receive descriptor in line */
    sends(&e, a, 3, LEN, 10);
    for (int i = 0; i < 3; i++, next++) {
        VIP_DESCRIPTOR *d = th_recv_done_must(b, rd[next], "receive at drop=0");
        EXPECT(d->CS.ImmediateData == 10u + (uint32_t)i && th_verify(rb[next], LEN, 10u + (uint32_t)i) < 0,
               "message %d: imm %u", i, d->CS.ImmediateData);
    }
    fc = counters(e.nic);
    EXPECT(fc.Dropped == 0 && fc.BadChecksum == 0, "drop=0: Dropped %llu BadChecksum %llu",
           (unsigned long long)fc.Dropped, (unsigned long long)fc.BadChecksum);

    th_phase("injector on: drop=1.0");
    EXPECT_RC(VipExtSetFaults(e.nic, "drop=1.0"), VIP_SUCCESS);
    VIP_EXT_FAULT_COUNTERS before = counters(e.nic);
    sends(&e, a, 8, LEN, 20);
    int got = receives_within(b, 100);
    EXPECT(got == 0, "drop=1.0: %d messages arrived", got);
    fc = counters(e.nic);
    EXPECT(fc.Dropped >= before.Dropped + 8, "drop=1.0: Dropped %llu -> %llu after 8 one-frame messages",
           (unsigned long long)before.Dropped, (unsigned long long)fc.Dropped);
    EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED,
           "drop=1.0: unreliable VIs left the connected state: %s / %s", th_state_name(th_state(a)),
           th_state_name(th_state(b)));

    th_phase("injector on: drop=0 again");
    EXPECT_RC(VipExtSetFaults(e.nic, "drop=0"), VIP_SUCCESS);
    before = counters(e.nic);
    sends(&e, a, 3, LEN, 30);
    for (int i = 0; i < 3; i++, next++) {
        VIP_DESCRIPTOR *d = th_recv_done_must(b, rd[next], "receive after drop=0");
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && d->CS.ImmediateData == 30u + (uint32_t)i &&
                   d->CS.Length == LEN && th_verify(rb[next], LEN, 30u + (uint32_t)i) < 0,
               "after drop=0: message %d: status 0x%x imm %u (want %u)", i, d->CS.Status, d->CS.ImmediateData,
               30u + (uint32_t)i);
    }
    fc = counters(e.nic);
    EXPECT(fc.Dropped == before.Dropped, "drop=0: Dropped moved %llu -> %llu", (unsigned long long)before.Dropped,
           (unsigned long long)fc.Dropped);

    th_phase("injector on: dup=1.0");
    EXPECT_RC(VipExtSetFaults(e.nic, "dup=1.0,seed=3"), VIP_SUCCESS);
    before = counters(e.nic);
    sends(&e, a, 4, LEN, 40);
    for (int i = 0; i < 4; i++, next++) {
        VIP_DESCRIPTOR *d = th_recv_done_must(b, rd[next], "receive at dup=1.0");
        EXPECT(d->CS.ImmediateData == 40u + (uint32_t)i && th_verify(rb[next], LEN, 40u + (uint32_t)i) < 0,
               "dup=1.0: message %d: imm %u (want %u)", i, d->CS.ImmediateData, 40u + (uint32_t)i);
    }
    got = receives_within(b, 50);
    EXPECT(got == 0, "dup=1.0: %d messages received twice", got);
    fc = counters(e.nic);
    EXPECT(fc.Duplicated >= before.Duplicated + 4, "dup=1.0: Duplicated %llu -> %llu",
           (unsigned long long)before.Duplicated, (unsigned long long)fc.Duplicated);

    th_phase("injector on: corrupt=1.0");
    EXPECT_RC(VipExtSetFaults(e.nic, "corrupt=1.0"), VIP_SUCCESS);
    before = counters(e.nic);
    sends(&e, a, 4, LEN, 50);
    got = receives_within(b, 100);
    EXPECT(got == 0, "corrupt=1.0: %d corrupted messages delivered", got);
    fc = counters(e.nic);
    EXPECT(fc.Corrupted >= before.Corrupted + 4 && fc.BadChecksum >= before.BadChecksum + 4,
           "corrupt=1.0: Corrupted %llu -> %llu, BadChecksum %llu -> %llu", (unsigned long long)before.Corrupted,
           (unsigned long long)fc.Corrupted, (unsigned long long)before.BadChecksum,
           (unsigned long long)fc.BadChecksum);

    th_phase("injector on: clean again");
    EXPECT_RC(VipExtSetFaults(e.nic, "drop=0"), VIP_SUCCESS);
    sends(&e, a, 1, LEN, 60);
    VIP_DESCRIPTOR *d = th_recv_done_must(b, rd[next], "receive after corrupt=1.0");
    EXPECT(d->CS.ImmediateData == 60 && th_verify(rb[next], LEN, 60) < 0, "last message: imm %u",
           d->CS.ImmediateData);
    next++;
    EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "end: %s / %s",
           th_state_name(th_state(a)), th_state_name(th_state(b)));
    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(b));
    th_drain(b, 500);
    th_close_env(&e);
    unsetenv("SOFTVIA_FAULTS");
    return th_result();
}
