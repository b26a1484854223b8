/*
 * mp_peer_exit: the peer process exits (_exit, no clean-up, no disconnect) in the
 * middle of a transfer. The survivor (rank 0) must not hang: its outstanding
 * descriptors complete with VIP_STATUS_DESC_FLUSHED_ERROR and its VI goes to
 * VIP_STATE_ERROR within a few seconds.
 *
 *   --wait recvwait: rank 0 is blocked in VipRecvWait(VIP_INFINITE) with two receives
 *     posted; rank 1 starts a 4 MiB send to it and exits at once.
 *   --wait senddone: rank 0 streams 64 KiB messages on a reliable-reception VI (a send
 *     completes only when the receiver has placed it), spinning on VipSendDone; rank 1
 *     receives a few hundred of them and exits with receives still posted.
 *
 * The dying rank exits with status 0 (the launcher stops the job when a rank fails);
 * rank 0's exit status is the verdict.
 *
 *   softvia-run -n 2 mp_peer_exit --wait recvwait|senddone --progress inline|thread
 */
#include "mp_common.h"

enum { BIG = 4 << 20, MSG = 65536, W = 64, SINK_MSGS = 300 };
#define FEW_SECONDS_MS 5000

/* Receives posted before connecting (so they are in place before the peer can send
 * anything): the warm-up message, and on the streaming survivor the sink's "go". */
static VIP_DESCRIPTOR *warm_rd, *go_rd;

static void pre_post(th_env *e, VIP_VI_HANDLE vi, int want_go) {
    warm_rd = th_desc(e, 1);
    th_set1(warm_rd, e->mh, th_alloc(e, 64), 64);
    CHECK(VipPostRecv(vi, warm_rd, e->mh));
    if (want_go) {
        go_rd = th_desc(e, 1);
        th_set1(go_rd, e->mh, th_alloc(e, 64), 64);
        CHECK(VipPostRecv(vi, go_rd, e->mh));
    }
}

static void warm_up(th_env *e, VIP_VI_HANDLE vi) {
    /* one message each way proves the connection before anyone dies */
    VIP_DESCRIPTOR *sd = th_desc(e, 1), *rd = warm_rd;
    char *sb = th_alloc(e, 64);
    snprintf(sb, 64, "hello from %d", mp_rank);
    th_set1(sd, e->mh, sb, 64);
    CHECK(VipPostSend(vi, sd, e->mh));
    VIP_DESCRIPTOR *d = th_send_done_must(vi, sd, "warm-up send");
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("warm-up send status 0x%x", d->CS.Status);
    d = th_recv_done_must(vi, rd, "warm-up receive");
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("warm-up receive status 0x%x", d->CS.Status);
}

static char *big_buf;
static VIP_MEM_HANDLE big_mh;
static VIP_DESCRIPTOR *big_rd[2];

/* The survivor's two 4 MiB receives, posted before connecting. */
static void survivor_pre_post(th_env *e, VIP_VI_HANDLE vi) {
    big_buf = malloc(2 * (size_t)BIG);
    VIP_MEM_ATTRIBUTES ma = {e->ptag, 0, 0};
    CHECK(VipRegisterMem(e->nic, big_buf, 2 * (VIP_ULONG)BIG, &ma, &big_mh));
    for (int i = 0; i < 2; i++) {
        big_rd[i] = th_desc(e, 1);
        th_set1(big_rd[i], big_mh, big_buf + (size_t)i * BIG, BIG);
        CHECK(VipPostRecv(vi, big_rd[i], e->mh));
    }
}

static void survivor_recvwait(th_env *e, VIP_VI_HANDLE vi) {
    th_phase("survivor blocked in VipRecvWait(INFINITE)");
    VIP_DESCRIPTOR **rd = big_rd;
    char *buf = big_buf;
    VIP_MEM_HANDLE mh = big_mh;
    sv_boot_put("ready", "1", 1);
    uint64_t t0 = th_now_ms();
    int flushed = 0;
    for (int i = 0; i < 2; i++) {
        VIP_DESCRIPTOR *d = NULL;
        VIP_RETURN r = VipRecvWait(vi, VIP_INFINITE, &d);
        uint64_t dt = th_now_ms() - t0;
        printf("%s: VipRecvWait #%d -> %s after %llu ms, status 0x%x, length %u\n", th_prog, i, th_rs(r),
               (unsigned long long)dt, d ? d->CS.Status : 0, d ? d->CS.Length : 0);
        EXPECT(r == VIP_SUCCESS && d == rd[i], "RecvWait #%d -> %s, descriptor %p (want %p)", i, th_rs(r), (void *)d,
               (void *)rd[i]);
        if (!d) break;
        uint32_t err = d->CS.Status & VIP_STATUS_ERROR_MASK;
        /* the first one may have been filled before the peer died; nothing else may */
        if (i == 0 && err == 0) {
            EXPECT(d->CS.Length == BIG, "a partial message completed successfully (%u bytes)", d->CS.Length);
        } else {
            EXPECT(err == VIP_STATUS_DESC_FLUSHED_ERROR, "receive #%d: status 0x%x, want DESC_FLUSHED_ERROR", i,
                   d->CS.Status);
            flushed += err == VIP_STATUS_DESC_FLUSHED_ERROR;
        }
    }
    uint64_t dt = th_now_ms() - t0;
    EXPECT(flushed >= 1, "no receive was flushed");
    EXPECT(dt < 200 + FEW_SECONDS_MS, "the survivor took %llu ms to learn its peer was gone", (unsigned long long)dt);
    EXPECT(th_state(vi) == VIP_STATE_ERROR, "survivor VI %s, want ERROR", th_state_name(th_state(vi)));
    CHECK(VipDeregisterMem(e->nic, buf, mh));
    free(buf);
}

static void dier_recvwait(th_env *e, VIP_VI_HANDLE vi) {
    th_phase("dying rank: start a 4 MiB send, exit");
    char *buf = malloc(BIG);
    th_fill(buf, BIG, 7);
    VIP_MEM_ATTRIBUTES ma = {e->ptag, 0, 0};
    VIP_MEM_HANDLE mh;
    CHECK(VipRegisterMem(e->nic, buf, BIG, &ma, &mh));
    VIP_DESCRIPTOR *sd = th_desc(e, 1);
    th_set1(sd, mh, buf, BIG);
    char v[8];
    if (sv_boot_get("ready", v, sizeof v, NULL, MP_BOOT_MS) != 0) FATAL("survivor never got ready");
    th_sleep_ms(200); /* the survivor is inside VipRecvWait by now */
    CHECK(VipPostSend(vi, sd, e->mh));
    VIP_DESCRIPTOR *d;
    for (int i = 0; i < 50; i++) VipSendDone(vi, &d); /* a few steps: part of the message leaves */
    printf("%s: exiting mid-transfer\n", th_prog);
    fflush(stdout);
    _exit(0);
}

static void survivor_senddone(th_env *e, VIP_VI_HANDLE vi) {
    th_phase("survivor streaming, spinning on VipSendDone");
    VIP_DESCRIPTOR *sd[W];
    char *sb = th_alloc(e, MSG);
    th_fill(sb, MSG, 3);
    for (int i = 0; i < W; i++) sd[i] = th_desc(e, 1);
    /* A reliable VI breaks on a message that finds no receive: the sink says "go" over
     * the VI once its receives are posted (its NIC takes doorbells in order, so they are
     * in place before the "go" leaves). */
    VIP_DESCRIPTOR *g = th_recv_done_must(vi, go_rd, "the sink's go");
    if (g->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("go: status 0x%x", g->CS.Status);
    uint64_t t0 = th_now_ms(), t_err = 0;
    uint32_t posted = 0, done = 0, ok = 0, flushed = 0, other = 0;
    int stop_posting = 0;
    for (;;) {
        while (!stop_posting && posted - done < W) {
            VIP_DESCRIPTOR *d = sd[posted % W];
            th_set1(d, e->mh, sb, MSG);
            VIP_RETURN r = VipPostSend(vi, d, e->mh);
            if (r == VIP_INVALID_STATE) { /* the VI has gone to the error state */
                stop_posting = 1;
                break;
            }
            if (r != VIP_SUCCESS) FATAL("post %u: %s", posted, th_rs(r));
            posted++;
        }
        if (done == posted && stop_posting) break;
        VIP_DESCRIPTOR *d;
        VIP_RETURN r = VipSendDone(vi, &d);
        if (r == VIP_NOT_DONE) {
            if (th_now_ms() - t0 > 30000) FATAL("stuck: %u posted, %u done (%u ok, %u flushed)", posted, done, ok, flushed);
            continue;
        }
        if (r != VIP_SUCCESS) FATAL("VipSendDone -> %s", th_rs(r));
        if (d != sd[done % W]) FATAL("send completions out of order");
        uint32_t err = d->CS.Status & VIP_STATUS_ERROR_MASK;
        if (err == 0) {
            ok++;
        } else {
            if (!t_err) t_err = th_now_ms();
            stop_posting = 1;
            if (err == VIP_STATUS_DESC_FLUSHED_ERROR) flushed++;
            else other++;
        }
        done++;
    }
    uint64_t t_end = th_now_ms();
    printf("%s: %u sends: %u completed, %u flushed, %u other errors; error seen after %llu ms, all back %llu ms later\n",
           th_prog, posted, ok, flushed, other, (unsigned long long)(t_err - t0), (unsigned long long)(t_end - t_err));
    /* the sink took SINK_MSGS; its NIC may place (and acknowledge) up to the 2W receives
     * it still had posted before the process is gone */
    EXPECT(ok >= SINK_MSGS - W && ok <= SINK_MSGS + 2 * W, "%u sends completed successfully, the sink took %d", ok,
           SINK_MSGS);
    EXPECT(flushed >= 1 && other == 0, "%u flushed, %u with other errors", flushed, other);
    EXPECT(t_err && t_end - t0 < 10000, "took %llu ms in all", (unsigned long long)(t_end - t0));
    EXPECT(t_end - t_err < FEW_SECONDS_MS, "outstanding sends came back %llu ms after the first error",
           (unsigned long long)(t_end - t_err));
    EXPECT(th_state(vi) == VIP_STATE_ERROR, "survivor VI %s, want ERROR", th_state_name(th_state(vi)));
}

static void dier_senddone(th_env *e, VIP_VI_HANDLE vi) {
    th_phase("dying rank: sink, then exit");
    /* Every receive the sink can need is posted up front: its NIC may take frames faster
     * than the program could repost, and a reliable VI breaks on a missing receive. */
    enum { R = SINK_MSGS + 2 * W };
    VIP_DESCRIPTOR *rd[R];
    char *rb = malloc((size_t)R * MSG);
    VIP_MEM_ATTRIBUTES ma = {e->ptag, 0, 0};
    VIP_MEM_HANDLE mh;
    CHECK(VipRegisterMem(e->nic, rb, (VIP_ULONG)R * MSG, &ma, &mh));
    for (int i = 0; i < R; i++) {
        rd[i] = th_desc(e, 1);
        th_set1(rd[i], mh, rb + (size_t)i * MSG, MSG);
        CHECK(VipPostRecv(vi, rd[i], e->mh));
    }
    VIP_DESCRIPTOR *go = th_desc(e, 1);
    memset(&go->CS, 0, sizeof go->CS); /* an empty message */
    CHECK(VipPostSend(vi, go, e->mh));
    th_send_done_must(vi, go, "go");
    for (int n = 0; n < SINK_MSGS; n++) {
        VIP_DESCRIPTOR *d = th_recv_done_must(vi, NULL, "sink receive");
        if (d->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("sink receive %d: status 0x%x", n, d->CS.Status);
    }
    printf("%s: exiting with receives posted and sends in flight\n", th_prog);
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv) {
    const char *wait = "recvwait", *progress = "inline";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--wait")) wait = argv[i + 1];
        else if (!strcmp(argv[i], "--progress")) progress = argv[i + 1];
    }
    int senddone = !strcmp(wait, "senddone");
    if (!senddone && strcmp(wait, "recvwait")) FATAL("--wait recvwait|senddone");
    mp_init("mp_peer_exit", 2, 60);
    th_env e;
    mp_open(&e, progress, 8 << 20);
    mp_log_errors(&e);
    mp_addrs ad;
    mp_exchange(&e, &ad);
    VIP_VI_HANDLE vi =
        th_vi(&e, senddone ? VIP_SERVICE_RELIABLE_RECEPTION : VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
    th_phase("connect");
    pre_post(&e, vi, mp_rank == 0 && senddone);
    if (mp_rank == 0 && !senddone) survivor_pre_post(&e, vi);
    mp_peer_request(vi, &ad, 1 - mp_rank, "exit");
    mp_peer_finish(vi, 1 - mp_rank);
    warm_up(&e, vi);
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier");
    if (mp_rank == 0) {
        if (senddone) survivor_senddone(&e, vi);
        else survivor_recvwait(&e, vi);
    } else {
        if (senddone) dier_senddone(&e, vi);
        else dier_recvwait(&e, vi);
    }
    /* only the survivor gets here */
    th_phase("teardown");
    th_drain(vi, 2000);
    EXPECT_RC(VipDisconnect(vi), VIP_SUCCESS);
    EXPECT_RC(VipDestroyVi(vi), VIP_SUCCESS);
    CHECK(VipCloseNic(e.nic));
    return th_result();
}
