/*
 * disconnect: VipDisconnect flushes every descriptor still on the local VI
 * (VIP_STATUS_DESC_FLUSHED_ERROR) and returns it to the idle state; the remote VI goes
 * to VIP_STATE_ERROR and its descriptors are flushed too; sends are refused afterwards,
 * receives posted on a VI in the error state complete flushed; both VIs can connect
 * again after disconnecting. Includes receives posted just before VipDisconnect, and a
 * send still being transmitted.
 */
#include "helpers.h"

enum { K = 8 };

/* Waits for n descriptors on vi's receive queue; each must be flushed. Returns how many
 * came back. */
static int reap_flushed(VIP_VI_HANDLE vi, int n, const char *who) {
    int got = 0;
    for (int i = 0; i < n; i++) {
        VIP_RETURN r;
        VIP_DESCRIPTOR *d = th_recv_wait(vi, &r);
        if (!d) {
            TH_FAILMSG("%s: receive %d of %d never completed (%s)", who, i, n, th_rs(r));
            th_failures++;
            break;
        }
        got++;
        EXPECT(th_status_has(d, VIP_STATUS_DONE | VIP_STATUS_DESC_FLUSHED_ERROR | VIP_STATUS_OP_RECEIVE) &&
                   d->CS.Length == 0,
               "%s: descriptor %d status 0x%x length %u", who, i, d->CS.Status, d->CS.Length);
    }
    return got;
}

int main(void) {
    th_init("disconnect", 0);
    th_env e;
    th_open_env(&e, NULL, 1 << 20);
    char *buf = th_alloc(&e, 4096);
    VIP_DESCRIPTOR *ra[K], *rb[K], *sd = th_desc(&e, 1);
    for (int i = 0; i < K; i++) {
        ra[i] = th_desc(&e, 1);
        rb[i] = th_desc(&e, 1);
    }

    for (int li = 0; li < 3; li++) {
        VIP_RELIABILITY_LEVEL rel = th_levels[li];
        char ph[96];
        snprintf(ph, sizeof ph, "%s: settled receives", th_rel_name(rel));
        th_phase(ph);
        VIP_VI_HANDLE a, b;
        th_pair(&e, rel, &a, &b, "dc");
        for (int i = 0; i < K; i++) {
            th_set1(ra[i], e.mh, buf, 64);
            CHECK(VipPostRecv(a, ra[i], e.mh));
            th_set1(rb[i], e.mh, buf, 64);
            CHECK(VipPostRecv(b, rb[i], e.mh));
        }
        /* a message from a to b: once it is in, the NIC has seen every receive above */
        th_set1(sd, e.mh, buf + 1024, 16);
        CHECK(VipPostSend(a, sd, e.mh));
        th_send_done_must(a, sd, "send");
        VIP_DESCRIPTOR *d = th_recv_done_must(b, rb[0], "first receive");
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "status 0x%x", d->CS.Status);

        EXPECT_RC(VipDisconnect(a), VIP_SUCCESS);
        EXPECT(th_state(a) == VIP_STATE_IDLE, "a after disconnect: %s", th_state_name(th_state(a)));
        reap_flushed(a, K, "local");
        EXPECT(th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS), "remote after disconnect: %s",
               th_state_name(th_state(b)));
        reap_flushed(b, K - 1, "remote");

        snprintf(ph, sizeof ph, "%s: after the disconnect", th_rel_name(rel));
        th_phase(ph);
        th_set1(sd, e.mh, buf, 16);
        EXPECT_RC(VipPostSend(a, sd, e.mh), VIP_INVALID_STATE);
        EXPECT_RC(VipPostSend(b, sd, e.mh), VIP_INVALID_STATE);
        /* a receive posted on the VI in the error state completes flushed */
        th_set1(rb[1], e.mh, buf, 64);
        CHECK(VipPostRecv(b, rb[1], e.mh));
        reap_flushed(b, 1, "posted in the error state");
        VIP_BOOLEAN se, re;
        CHECK(VipQueryVi(a, NULL, NULL, &se, &re));
        EXPECT(se && re, "a's queues not empty after the flush");

        snprintf(ph, sizeof ph, "%s: reconnect", th_rel_name(rel));
        th_phase(ph);
        EXPECT_RC(VipDisconnect(b), VIP_SUCCESS);
        EXPECT(th_state(b) == VIP_STATE_IDLE, "b after its disconnect: %s", th_state_name(th_state(b)));
        th_connect_peer(&e, a, b, "dc-again");
        th_set1(rb[0], e.mh, buf, 64);
        CHECK(VipPostRecv(b, rb[0], e.mh));
        memcpy(buf + 1024, "again", 6);
        th_set1(sd, e.mh, buf + 1024, 6);
        CHECK(VipPostSend(a, sd, e.mh));
        th_send_done_must(a, sd, "send after reconnect");
        d = th_recv_done_must(b, rb[0], "recv after reconnect");
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && d->CS.Length == 6 && !memcmp(buf, "again", 6),
               "after reconnect: status 0x%x len %u", d->CS.Status, d->CS.Length);

        /* docs/vipl-reference.md, fixed deviation 3 (thread mode) */
        snprintf(ph, sizeof ph, "%s: receives posted just before the disconnect", th_rel_name(rel));
        th_phase(ph);
        for (int i = 0; i < K; i++) {
            th_set1(ra[i], e.mh, buf, 64);
            CHECK(VipPostRecv(a, ra[i], e.mh));
        }
        EXPECT_RC(VipDisconnect(a), VIP_SUCCESS);
        reap_flushed(a, K, "posted just before");
        EXPECT(th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS), "b: %s", th_state_name(th_state(b)));
        CHECK(VipDisconnect(b));
        th_drain(a, 500);
        th_drain(b, 500);
        EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
        EXPECT_RC(VipDestroyVi(b), VIP_SUCCESS);
    }

    th_phase("sends posted just before the disconnect all complete");
    {
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_UNRELIABLE, &a, &b, "dcs");
        VIP_DESCRIPTOR *s[K];
        for (int i = 0; i < K; i++) {
            s[i] = th_desc(&e, 1);
            th_set1(s[i], e.mh, buf, 100);
            CHECK(VipPostSend(a, s[i], e.mh));
        }
        CHECK(VipDisconnect(a));
        for (int i = 0; i < K; i++) {
            VIP_RETURN r;
            VIP_DESCRIPTOR *d = th_send_wait(a, &r);
            if (!d) {
                TH_FAILMSG("send %d never completed (%s)", i, th_rs(r));
                th_failures++;
                break;
            }
            EXPECT(d == s[i], "send %d out of order", i);
            uint32_t err = d->CS.Status & VIP_STATUS_ERROR_MASK;
            EXPECT(err == 0 || err == VIP_STATUS_DESC_FLUSHED_ERROR, "send %d: status 0x%x", i, d->CS.Status);
        }
        CHECK(VipDisconnect(b));
        th_drain(b, 500);
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    th_phase("a send being transmitted is flushed");
    {
        VIP_EXT_PROGRESS_MODE m;
        CHECK(VipExtGetProgressMode(e.nic, &m));
        if (m != VIP_EXT_PROGRESS_INLINE) {
            printf("disconnect: (inline only) in-transmission flush: a firmware thread drains the link\n");
        } else {
            /* The receiver's NIC is never stepped, so a large send cannot leave the link
             * (lossless wire) or has not had the steps to (lossy). */
            th_env e2;
            th_open_env(&e2, NULL, 0);
            VIP_VI_HANDLE a = th_vi(&e, VIP_SERVICE_UNRELIABLE, NULL, NULL);
            VIP_VI_HANDLE b = th_vi(&e2, VIP_SERVICE_UNRELIABLE, NULL, NULL);
            th_connect_peer2(&e, a, &e2, b, "dct");
            char *m4 = malloc(4 << 20);
            VIP_MEM_ATTRIBUTES ma = {e.ptag, 0, 0};
            VIP_MEM_HANDLE mh;
            CHECK(VipRegisterMem(e.nic, m4, 4 << 20, &ma, &mh));
            VIP_DESCRIPTOR *s1 = th_desc(&e, 1), *s2 = th_desc(&e, 1);
            th_set1(s1, mh, m4, 4 << 20);
            th_set1(s2, mh, m4, 4 << 20);
            CHECK(VipPostSend(a, s1, e.mh));
            CHECK(VipPostSend(a, s2, e.mh));
            /* A lossy wire does not hold the sender back: one step starts the first
             * send without finishing it. */
            int steps = th_wire_lossy() ? 1 : 100;
            for (int i = 0; i < steps; i++) VipExtProgress(e.nic);
            VIP_DESCRIPTOR *d;
            EXPECT_RC(VipSendDone(a, &d), VIP_NOT_DONE);
            CHECK(VipDisconnect(a));
            for (int i = 0; i < 2; i++) {
                VIP_RETURN r;
                d = th_send_wait(a, &r);
                EXPECT(d != NULL, "send %d: %s", i, th_rs(r));
                if (d) EXPECT(th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR), "send %d status 0x%x", i, d->CS.Status);
            }
            th_close_env(&e2);
            CHECK(VipDestroyVi(a));
            CHECK(VipDeregisterMem(e.nic, m4, mh));
            free(m4);
        }
    }

    th_close_env(&e);
    return th_result();
}
