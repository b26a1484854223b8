/*
 * mp_source_read: VIP_EXT_STATUS_SOURCE_READ (vipl.h), across two processes, inline
 * progress, run by the launcher:
 *   softvia-run -n 2 mp_source_read --rel RD|RR --expect early|late
 *
 * Rank 1 is the target: it registers a region with RDMA write enabled (and, for RR, posts
 * a receive), then stops driving its NIC for 400 ms (inline progress: nothing answers).
 * Rank 0 posts an RDMA write (and, for RR, a send) of 16 KiB and watches the descriptors'
 * status for 300 ms, while the target cannot acknowledge:
 *   early (a lossless wire): SOURCE_READ comes and DONE does not. Rank 0 then overwrites
 *         its source buffers, and the target must still get the original bytes: the NIC
 *         really had finished reading them.
 *   late  (a lossy wire, or the fault injector on): neither comes (a resend would read
 *         the buffers again); the buffers stay untouched.
 * Either way each descriptor then completes with exactly DONE | its op (the bit is not in
 * the final status), and the target checks what arrived.
 */
#include "mp_common.h"

enum { LEN = 16 * 1024, SEED_W = 71, SEED_S = 72, QUIET_MS = 400, WATCH_MS = 300 };
#define STATUS(d) __atomic_load_n(&(d)->CS.Status, __ATOMIC_ACQUIRE)

static th_env E;
static th_region REG; /* rank 1: the write's target */
static struct {
    uint64_t addr;
    uint32_t mh, pad;
} target;

/* Rank 0: drives its NIC for WATCH_MS and reports what each of d[0..n) showed before DONE. */
static void watch(VIP_DESCRIPTOR **d, int n, int *saw_read, int *saw_done) {
    for (int i = 0; i < n; i++) saw_read[i] = saw_done[i] = 0;
    uint64_t end = th_now_ms() + WATCH_MS;
    while (th_now_ms() < end) {
        VipExtProgress(E.nic);
        for (int i = 0; i < n; i++) {
            uint32_t s = STATUS(d[i]);
            if (s & VIP_STATUS_DONE) saw_done[i] = 1;
            else if (s & VIP_EXT_STATUS_SOURCE_READ) saw_read[i] = 1;
        }
    }
}

static volatile int leaving;
static void *stepper(void *arg) {
    (void)arg;
    while (!__atomic_load_n(&leaving, __ATOMIC_ACQUIRE)) {
        VipExtProgress(E.nic);
        sched_yield();
    }
    return NULL;
}

static void judge(const char *what, int early, int saw_read, int saw_done) {
    if (saw_done) FATAL("%s completed while the target's NIC could not acknowledge it", what);
    if (early) EXPECT(saw_read, "%s: no SOURCE_READ within %d ms on a lossless wire", what, WATCH_MS);
    else EXPECT(!saw_read, "%s: SOURCE_READ before DONE on a wire that resends", what);
}

int main(int argc, char **argv) {
    const char *rel_s = "RD", *expect = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rel") && i + 1 < argc) rel_s = argv[++i];
        else if (!strcmp(argv[i], "--expect") && i + 1 < argc) expect = argv[++i];
        else FATAL("unknown argument '%s'", argv[i]);
    }
    if (!expect || (strcmp(expect, "early") && strcmp(expect, "late"))) FATAL("--expect must be early or late");
    const int early = !strcmp(expect, "early");
    VIP_RELIABILITY_LEVEL rel = mp_rel(rel_s);
    if (rel == VIP_SERVICE_UNRELIABLE) FATAL("--rel must be RD or RR");
    const int rr = rel == VIP_SERVICE_RELIABLE_RECEPTION;
    mp_init("mp_source_read", 2, 60);
    mp_open(&E, "inline", 1 << 20);
    mp_log_errors(&E);
    if (mp_rank == 1) {
        th_region_new(&E, &REG, LEN, NULL, VIP_TRUE, VIP_FALSE);
        memset(REG.p, 0, LEN);
        target.addr = (uint64_t)(uintptr_t)REG.p;
        target.mh = REG.mh;
    }
    mp_addrs ad;
    mp_exchange(&E, &ad);
    mp_from_rank(1, &target, sizeof target);
    int peer = 1 - mp_rank;
    VIP_VI_HANDLE vi = th_vi_rdma(&E, rel, VIP_TRUE, VIP_FALSE, NULL, NULL);
    VIP_DESCRIPTOR *rd = th_desc(&E, 1), *md = th_desc(&E, 1);
    char *rbuf = th_alloc(&E, LEN), *mbuf = th_alloc(&E, 8);
    if (mp_rank == 1) {
        if (rr) {
            th_set1(rd, E.mh, rbuf, LEN);
            CHECK(VipPostRecv(vi, rd, E.mh));
        }
        th_set1(md, E.mh, mbuf, 8);
        CHECK(VipPostRecv(vi, md, E.mh));
    }
    mp_peer_request(vi, &ad, peer, "srcread");
    mp_peer_finish(vi, peer);
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier failed");

    if (mp_rank == 1) {
        usleep(QUIET_MS * 1000); /* the NIC answers nothing meanwhile */
        VIP_DESCRIPTOR *d;
        if (rr) {
            d = th_recv_done_must(vi, rd, "the send");
            EXPECT(d->CS.Length == LEN && th_verify(rbuf, LEN, SEED_S) < 0,
                   "the send arrived with %u bytes, or changed", d->CS.Length);
        }
        d = th_recv_done_must(vi, md, "the marker");
        EXPECT(th_verify(REG.p, LEN, SEED_W) < 0, "the RDMA write placed bytes the source held after SOURCE_READ");
    } else {
        char *src_w = th_alloc(&E, LEN), *src_s = th_alloc(&E, LEN);
        th_fill(src_w, LEN, SEED_W);
        th_fill(src_s, LEN, SEED_S);
        VIP_DESCRIPTOR *wd = th_desc(&E, 2), *sd = th_desc(&E, 1);
        th_set_rdma(wd, VIP_CONTROL_OP_RDMAWRITE, (void *)(uintptr_t)target.addr, target.mh, E.mh, src_w, LEN, 1);
        CHECK(VipPostSend(vi, wd, E.mh));
        if (rr) {
            th_set1(sd, E.mh, src_s, LEN);
            CHECK(VipPostSend(vi, sd, E.mh));
        }
        VIP_DESCRIPTOR *both[2] = {wd, sd};
        int saw_read[2], saw_done[2];
        watch(both, rr ? 2 : 1, saw_read, saw_done);  /* within the target's quiet time */
        judge("the RDMA write", early, saw_read[0], saw_done[0]);
        if (rr) judge("the send (reliable reception)", early, saw_read[1], saw_done[1]);
        if (early) { /* the NIC is done with them: the target must see the old bytes */
            memset(src_w, 0xEE, LEN);
            memset(src_s, 0xEE, LEN);
        }
        VIP_DESCRIPTOR *d = th_send_done_must(vi, wd, "the RDMA write");
        EXPECT(d->CS.Status == (VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE), "the RDMA write: final status 0x%x",
               d->CS.Status);
        if (rr) {
            d = th_send_done_must(vi, sd, "the send");
            EXPECT(d->CS.Status == (VIP_STATUS_DONE | VIP_STATUS_OP_SEND), "the send: final status 0x%x",
                   d->CS.Status);
        }
        th_set1(md, E.mh, mbuf, 8);
        CHECK(VipPostSend(vi, md, E.mh));
        th_send_done_must(vi, md, "the marker");
    }
    /* Rank 1 keeps its NIC answering through the final barrier (inline progress has no
     * thread of its own): the marker's acknowledgement must reach rank 0. */
    pthread_t t;
    if (mp_rank == 1 && pthread_create(&t, NULL, stepper, NULL) != 0) FATAL("pthread_create");
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("final barrier failed");
    if (mp_rank == 1) {
        __atomic_store_n(&leaving, 1, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
    }
    return th_result();
}
