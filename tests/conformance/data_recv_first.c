/*
 * data_recv_first: a receive that VipPostRecv has accepted takes the next message,
 * even when the message comes from another NIC and is sent right after the post
 * returned (the receiver's NIC must know about the receive before it can match a
 * message that was caused after it). Two NICs in one process; each round posts one
 * receive on NIC B, then one send on NIC A; up to 20,000 rounds or 2 s per level (10 s
 * in the long runs: th_probe_ms).
 * Unreliable: no
 * message may be dropped (the receiver's drop counter stays 0). Reliable: the
 * connection must not break.
 * (docs/vipl-reference.md, fixed deviation 2: thread mode used to drop such messages)
 */
#include "helpers.h"

enum { ROUNDS = 20000 };

int main(void) {
    th_init("data_recv_first", 0);
    th_env ea, eb;
    th_open_env(&ea, NULL, 1 << 16);
    th_open_env(&eb, NULL, 1 << 16);
    VIP_DESCRIPTOR *sd = th_desc(&ea, 1), *rd = th_desc(&eb, 1);
    uint32_t *sb = th_alloc(&ea, 64), *rb = th_alloc(&eb, 64);
    for (int li = 0; li < 3; li++) {
        th_phase(th_rel_name(th_levels[li]));
        VIP_VI_HANDLE a = th_vi(&ea, th_levels[li], NULL, NULL), b = th_vi(&eb, th_levels[li], NULL, NULL);
        th_connect_peer2(&ea, a, &eb, b, "rf");
        int i;
        uint64_t budget_end = th_now_ms() + th_probe_ms(2000);
        for (i = 0; i < ROUNDS && th_now_ms() < budget_end; i++) {
            th_set1(rd, eb.mh, rb, 64);
            CHECK(VipPostRecv(b, rd, eb.mh));
            *sb = (uint32_t)i;
            th_set1(sd, ea.mh, sb, 4);
            VIP_RETURN r = VipPostSend(a, sd, ea.mh);
            if (r != VIP_SUCCESS) {
                TH_FAILMSG("round %d: VipPostSend -> %s (sender VI %s)", i, th_rs(r), th_state_name(th_state(a)));
                th_failures++;
                break;
            }
            VIP_DESCRIPTOR *s = NULL, *d = NULL, *x;
            uint64_t end = th_now_ms() + TH_WAIT_MS;
            for (unsigned turn = 0; (!s || !d) && th_now_ms() < end; turn++) {
                if (!s && VipSendDone(a, &x) == VIP_SUCCESS) s = x;
                if (!d && VipRecvDone(b, &x) == VIP_SUCCESS) d = x;
                if (turn >= 64) sched_yield(); /* two firmware threads share 2 cores with us */
            }
            if (!d || (d->CS.Status & VIP_STATUS_ERROR_MASK) || *rb != (uint32_t)i) {
                VIP_EXT_COUNTERS c;
                CHECK(VipExtQueryViCounters(b, &c));
                TH_FAILMSG("round %d: the message for a receive posted before it was sent %s (receive status 0x%x, "
                           "receiver drops %llu, VIs %s/%s)",
                           i, d ? "failed" : "never arrived", d ? d->CS.Status : 0, (unsigned long long)c.Drops,
                           th_state_name(th_state(a)), th_state_name(th_state(b)));
                th_failures++;
                break;
            }
            if (!s) FATAL("round %d: send never completed", i);
        }
        printf("data_recv_first: %s: %d rounds\n", th_rel_name(th_levels[li]), i);
        VipDisconnect(a);
        VipDisconnect(b);
        th_drain(a, 500);
        th_drain(b, 500);
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }
    th_close_env(&ea);
    th_close_env(&eb);
    return th_result();
}
