/*
 * wait_semantics: VipRecvWait / VipSendWait / VipCQWait. A timeout ends the wait with
 * VIP_TIMEOUT after about that long (0 checks once); completions that arrive while a
 * waiter is spinning or blocked (sent from another thread, in bursts with pauses, or
 * one at a time after the NIC has gone idle) are each returned exactly once and in
 * order, for the VI queue and for a CQ, and a send that completed is never reported as
 * a timeout.
 * (docs/vipl-reference.md, fixed deviation 4: thread mode used to lose completions)
 */
#include "helpers.h"

enum { K = 1500, W = 1024, BURST = 3 };

typedef struct {
    VIP_VI_HANDLE vi;
    VIP_DESCRIPTOR *sd;
    uint32_t *sbuf;
    VIP_MEM_HANDLE mh;
    int n, after_idle;
    int fails;
} sender_t;

/* Sends n numbered 4-byte messages: BURST at a time with 3 ms pauses, or one at a
 * time after a 2 ms pause. After a pause an idle firmware thread answers with a delay
 * of the same order as a waiter's spin before it goes to sleep, which is when a
 * completion can meet a waiter on its way into the sleep. Every send is waited for
 * with VipSendWait. */
static void *sender(void *arg) {
    sender_t *s = arg;
    for (uint32_t i = 0; i < (uint32_t)s->n; i++) {
        if (s->after_idle)
            th_sleep_ms(2);
        else if (i % BURST == 0)
            th_sleep_ms(3);
        *s->sbuf = i;
        th_set1(s->sd, s->mh, s->sbuf, 4);
        VIP_RETURN r = VipPostSend(s->vi, s->sd, s->mh);
        if (r != VIP_SUCCESS) {
            TH_FAILMSG("sender: post %u -> %s", i, th_rs(r));
            s->fails++;
            return NULL;
        }
        VIP_DESCRIPTOR *d = NULL;
        r = VipSendWait(s->vi, TH_WAIT_MS, &d);
        if (r != VIP_SUCCESS || d != s->sd) {
            TH_FAILMSG("sender: VipSendWait for send %u -> %s (descriptor %p, status 0x%x)", i, th_rs(r), (void *)d,
                       s->sd->CS.Status);
            s->fails++;
            return NULL;
        }
    }
    return NULL;
}

int main(void) {
    th_init("wait_semantics", 0);
    th_env e;
    th_open_env(&e, NULL, 4 << 20);
    /* W receives posted at a time, reposted as they complete: message i lands in slot
     * i % W */
    static VIP_DESCRIPTOR *rd[W];
    uint32_t *rb = th_alloc(&e, 64 * W);
    for (int i = 0; i < W; i++) rd[i] = th_desc(&e, 1);
    VIP_DESCRIPTOR *d;

    th_phase("timeouts");
    {
        VIP_VI_HANDLE a, b;
        th_pair(&e, VIP_SERVICE_RELIABLE_DELIVERY, &a, &b, "wt");
        th_set1(rd[0], e.mh, rb, 64);
        CHECK(VipPostRecv(b, rd[0], e.mh));
        uint64_t t0 = th_now_ms();
        EXPECT_RC(VipRecvWait(b, 150, &d), VIP_TIMEOUT);
        uint64_t dt = th_now_ms() - t0;
        EXPECT(dt >= 140 && dt < 3000, "RecvWait(150 ms) took %llu ms", (unsigned long long)dt);
        t0 = th_now_ms();
        EXPECT_RC(VipRecvWait(b, 0, &d), VIP_TIMEOUT);
        EXPECT(th_now_ms() - t0 < 1000, "RecvWait(0) took %llu ms", (unsigned long long)(th_now_ms() - t0));
        /* the descriptor is still there and completes normally */
        VIP_DESCRIPTOR *sd = th_desc(&e, 1);
        th_set1(sd, e.mh, rb + 1000, 4);
        CHECK(VipPostSend(a, sd, e.mh));
        EXPECT_RC(VipSendWait(a, TH_WAIT_MS, &d), VIP_SUCCESS);
        EXPECT_RC(VipRecvWait(b, TH_WAIT_MS, &d), VIP_SUCCESS);
        EXPECT(d == rd[0], "RecvWait returned %p", (void *)d);
        CHECK(VipDisconnect(a));
        th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(b));
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
    }

    /* Thread mode sleeps in the Wait calls once they have spun a while; the after-idle
     * rounds probe the moment a completion lands as a waiter goes to sleep, a narrow
     * window, so in thread mode they repeat (VI and CQ in turn) for about 4 s (20 s in
     * the long runs: th_probe_ms). */
    VIP_EXT_PROGRESS_MODE pm;
    CHECK(VipExtGetProgressMode(e.nic, &pm));
    uint64_t budget_end = 0;
    for (int round = 0; round < 4;) {
        int use_cq = round & 1, after_idle = round >> 1;
        if (after_idle && !budget_end) budget_end = th_now_ms() + th_probe_ms(4000);
        /* inline mode has no sleep path (the waiter steps the NIC itself), and a waiter
         * that spins delays the sleeping sender's wake-ups: a short after-idle round */
        const int n = !after_idle ? 300 : pm == VIP_EXT_PROGRESS_THREAD ? K : 200;
        static const char *names[] = {"RecvWait, bursts", "CQWait, bursts", "RecvWait, after idle",
                                      "CQWait, after idle"};
        th_phase(names[round]);
        uint64_t t_round = th_now_ms();
        VIP_CQ_HANDLE cq = NULL;
        if (use_cq) CHECK(VipCreateCQ(e.nic, 2 * W, &cq));
        VIP_VI_HANDLE a = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
        VIP_VI_HANDLE b = th_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY, NULL, cq);
        th_connect_peer(&e, a, b, use_cq ? "wcq" : "wvi");
        for (int i = 0; i < W && i < n; i++) {
            th_set1(rd[i], e.mh, rb + 16 * i, 64);
            CHECK(VipPostRecv(b, rd[i], e.mh));
        }
        sender_t s = {a, th_desc(&e, 1), th_alloc(&e, 64), e.mh, n, after_idle, 0};
        pthread_t t;
        if (pthread_create(&t, NULL, sender, &s) != 0) FATAL("pthread_create");
        int got = 0;
        for (int i = 0; i < n; i++) {
            VIP_RETURN r;
            if (use_cq) {
                VIP_VI_HANDLE who;
                VIP_BOOLEAN rq;
                r = VipCQWait(cq, TH_WAIT_MS, &who, &rq);
                if (r == VIP_SUCCESS) {
                    EXPECT(who == b && rq == VIP_TRUE, "entry %d: vi %p recv %u", i, (void *)who, rq);
                    r = VipRecvDone(b, &d);
                    EXPECT(r == VIP_SUCCESS, "entry %d: CQ said done, RecvDone -> %s", i, th_rs(r));
                }
            } else {
                r = VipRecvWait(b, TH_WAIT_MS, &d);
            }
            if (r != VIP_SUCCESS) {
                TH_FAILMSG("completion %d of %d: %s", i, n, th_rs(r));
                th_failures++;
                break;
            }
            int k = i % W;
            if (d != rd[k] || rb[16 * k] != (uint32_t)i) {
                TH_FAILMSG("completion %d: descriptor %p (want %p), message in slot %d: %u", i, (void *)d,
                           (void *)rd[k], k, rb[16 * k]);
                th_failures++;
                break;
            }
            got++;
            if (i + W < n) {
                th_set1(rd[k], e.mh, rb + 16 * k, 64);
                CHECK(VipPostRecv(b, rd[k], e.mh));
            }
        }
        pthread_join(t, NULL);
        EXPECT(s.fails == 0, "the sender failed");
        EXPECT(got == n, "%d of %d completions", got, n);
        if (use_cq) {
            VIP_VI_HANDLE who;
            VIP_BOOLEAN rq;
            EXPECT_RC(VipCQDone(cq, &who, &rq), VIP_NOT_DONE);
        }
        EXPECT_RC(VipRecvDone(b, &d), VIP_NOT_DONE);
        CHECK(VipDisconnect(a));
        th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(b));
        th_drain(a, 1000);
        th_drain(b, 1000);
        CHECK(VipDestroyVi(a));
        CHECK(VipDestroyVi(b));
        if (cq) CHECK(VipDestroyCQ(cq));
        printf("wait_semantics: %s: %d messages in %llu ms\n", names[round], got, (unsigned long long)(th_now_ms() - t_round));
        if (after_idle && pm == VIP_EXT_PROGRESS_THREAD && !th_failures && th_now_ms() < budget_end)
            round = round == 2 ? 3 : 2;
        else
            round++;
    }
    th_close_env(&e);
    return th_result();
}
