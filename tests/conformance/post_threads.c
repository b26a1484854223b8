/*
 * post_threads: two threads post sends on one VI at the same time while a third takes
 * the receives, on each reliable level: every message arrives once, and each thread's
 * messages arrive in the order that thread posted them (VIA orders a queue's
 * descriptors by post; two posters' interleaving is theirs to choose). Send completions
 * are taken by whichever poster asks, in post order. With inline progress every caller
 * steps the NIC, so posts are handed over directly (the NIC free) and through the
 * doorbell queue (another thread stepping it) in one stream (docs/architecture.md).
 */
#include <stdatomic.h>

#include "helpers.h"

enum { POSTERS = 2, MSGS = 5000, WIN = 32, RECVS = 64 };

static VIP_VI_HANDLE g_a;
static VIP_MEM_HANDLE g_mh;
static VIP_DESCRIPTOR *g_sd[POSTERS][WIN];
static atomic_int g_free[POSTERS][WIN];  /* 1: the poster may use that descriptor again */
static atomic_uint g_reserved;           /* messages posters have claimed a receive for */
static atomic_uint g_received;           /* receives taken (and posted again) */
static atomic_uint g_send_done;
static atomic_int g_failed;

/* Takes whatever send completions are there; each frees its poster's descriptor. */
static void reap_sends(void) {
    VIP_DESCRIPTOR *d;
    while (VipSendDone(g_a, &d) == VIP_SUCCESS) {
        if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
            TH_FAILMSG("send completed with status 0x%x", d->CS.Status);
            atomic_store(&g_failed, 1);
        }
        int found = 0;
        for (int t = 0; t < POSTERS && !found; t++)
            for (int k = 0; k < WIN && !found; k++)
                if (g_sd[t][k] == d) {
                    atomic_store(&g_free[t][k], 1);
                    found = 1;
                }
        if (!found) {
            TH_FAILMSG("VipSendDone returned a descriptor nobody posted: %p", (void *)d);
            atomic_store(&g_failed, 1);
        }
        atomic_fetch_add(&g_send_done, 1);
    }
}

static void *poster(void *arg) {
    const uint32_t t = (uint32_t)(uintptr_t)arg;
    const uint64_t end = th_now_ms() + 40000;
    for (uint32_t seq = 0; seq < MSGS && !atomic_load(&g_failed); seq++) {
        const int k = (int)(seq % WIN);
        /* the descriptor is ours again, and a receive is posted for this message */
        for (;;) {
            if (th_now_ms() > end) {
                TH_FAILMSG("poster %u stalled at message %u", t, seq);
                atomic_store(&g_failed, 1);
                return NULL;
            }
            if (atomic_load(&g_free[t][k])) {
                unsigned r = atomic_load(&g_reserved);
                if (r - atomic_load(&g_received) < RECVS &&
                    atomic_compare_exchange_weak(&g_reserved, &r, r + 1))
                    break;
            }
            reap_sends();
        }
        atomic_store(&g_free[t][k], 0);
        VIP_DESCRIPTOR *d = g_sd[t][k];
        memset(&d->CS, 0, sizeof d->CS);
        d->CS.Control = VIP_CONTROL_IMMEDIATE;
        d->CS.ImmediateData = t << 24 | seq;
        VIP_RETURN rc = VipPostSend(g_a, d, g_mh);
        if (rc != VIP_SUCCESS) {
            TH_FAILMSG("poster %u: VipPostSend of message %u -> %s", t, seq, th_rs(rc));
            atomic_store(&g_failed, 1);
            return NULL;
        }
    }
    return NULL;
}

int main(void) {
    th_init("post_threads", 0);
    th_env e;
    th_open_env(&e, NULL, (POSTERS * WIN + RECVS) * 256 + 65536);
    g_mh = e.mh;
    VIP_DESCRIPTOR *rd[RECVS];
    for (int t = 0; t < POSTERS; t++)
        for (int k = 0; k < WIN; k++) g_sd[t][k] = th_desc(&e, 0);
    for (int i = 0; i < RECVS; i++) rd[i] = th_desc(&e, 0);
    for (int li = 1; li < 3; li++) {  /* the reliable levels: nothing may be lost */
        th_phase(th_rel_name(th_levels[li]));
        VIP_VI_HANDLE b;
        th_pair(&e, th_levels[li], &g_a, &b, "post_threads");
        for (int i = 0; i < RECVS; i++) {
            memset(&rd[i]->CS, 0, sizeof rd[i]->CS);
            CHECK(VipPostRecv(b, rd[i], e.mh));
        }
        for (int t = 0; t < POSTERS; t++)
            for (int k = 0; k < WIN; k++) atomic_store(&g_free[t][k], 1);
        atomic_store(&g_reserved, 0);
        atomic_store(&g_received, 0);
        atomic_store(&g_send_done, 0);
        pthread_t th[POSTERS];
        for (int t = 0; t < POSTERS; t++)
            if (pthread_create(&th[t], NULL, poster, (void *)(uintptr_t)t) != 0) FATAL("pthread_create");
        uint32_t next[POSTERS] = {0}, got = 0;
        const uint64_t end = th_now_ms() + 40000;
        while (got < POSTERS * MSGS && !atomic_load(&g_failed)) {
            if (th_now_ms() > end) {
                TH_FAILMSG("receiver stalled: %u of %u messages", got, POSTERS * MSGS);
                atomic_store(&g_failed, 1);
                break;
            }
            VIP_DESCRIPTOR *d;
            if (VipRecvDone(b, &d) != VIP_SUCCESS) continue;
            const uint32_t imm = d->CS.ImmediateData, t = imm >> 24, seq = imm & 0xFFFFFF;
            if ((d->CS.Status & VIP_STATUS_ERROR_MASK) || !(d->CS.Status & VIP_STATUS_IMMEDIATE) || t >= POSTERS ||
                seq != next[t]) {
                TH_FAILMSG("receive %u: status 0x%x, poster %u message %u (want message %u)", got, d->CS.Status, t, seq,
                           t < POSTERS ? next[t] : 0);
                atomic_store(&g_failed, 1);
                break;
            }
            next[t]++;
            got++;
            memset(&d->CS, 0, sizeof d->CS);
            CHECK(VipPostRecv(b, d, e.mh));
            atomic_fetch_add(&g_received, 1);
        }
        for (int t = 0; t < POSTERS; t++) pthread_join(th[t], NULL);
        while (!atomic_load(&g_failed) && atomic_load(&g_send_done) < POSTERS * MSGS) {
            reap_sends();
            if (th_now_ms() > end + 5000) {
                TH_FAILMSG("send completions: %u of %u", atomic_load(&g_send_done), POSTERS * MSGS);
                atomic_store(&g_failed, 1);
            }
        }
        printf("post_threads: %s: %u messages from %d posting threads, each in its order\n",
               th_rel_name(th_levels[li]), got, POSTERS);
        CHECK(VipDisconnect(g_a));
        th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS);
        CHECK(VipDisconnect(b));
        th_drain(g_a, 1000);
        th_drain(b, 1000);
        CHECK(VipDestroyVi(g_a));
        CHECK(VipDestroyVi(b));
        if (atomic_load(&g_failed)) {
            th_failures++;
            break;
        }
    }
    th_close_env(&e);
    return th_result();
}
