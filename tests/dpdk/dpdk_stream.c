/*
 * dpdk_stream: two ranks over a real lossy wire (the dpdk transport, tests/dpdk/run_pair.sh).
 *   1. peer-to-peer connect, then each rank steps its NIC until the other says it is up
 *      (a rank waiting outside VIPL would not answer a resent request whose answer was lost);
 *   2. ping-pong: rank 0 sends, rank 1 checks and echoes, rank 0 checks the echo;
 *   3. a reliable stream rank 0 -> rank 1 of --msgs messages of random sizes (0..16 KiB,
 *      so many span several frames), each carrying its sequence number, the pattern
 *      derived from it and its checksum in the immediate data; the receiver checks all
 *      of it, in order, and returns credits so the sender never finds it without a
 *      receive (a reliable VI would break).
 * Unlike mp_stream, the VI's drop counter may be non-zero: go-back-N discards the frames
 * behind a loss. Every message must still arrive exactly once, in order, intact.
 *
 *   dpdk_stream --rel RD|RR --progress inline|thread [--msgs N] [--pingpong N]
 */
#include "../multiproc/mp_common.h"

enum { WIN = 32, MAXSZ = 16384, CREDIT_EVERY = 8, SPIN_MS = 30000 };

static th_env e;
static VIP_VI_HANDLE vi;
static VIP_DESCRIPTOR *sd[WIN], *rd[WIN];
static char *sb[WIN], *rb[WIN];

static uint32_t msg_size(uint32_t seq) {
    uint32_t s = seq * 2654435761u ^ 0x77u;
    uint32_t r = mp_rand(&s);
    if (r % 8 == 0) return r % 5; /* empty and tiny messages too */
    return r % (MAXSZ + 1);
}

static void make_msg(char *p, uint32_t len, uint32_t seq) {
    th_fill(p, len, seq);
    if (len >= 4) memcpy(p, &seq, 4);
}

static void post_recv(int k) {
    th_set1(rd[k], e.mh, rb[k], MAXSZ);
    CHECK(VipPostRecv(vi, rd[k], e.mh));
}

static int recv_slot(VIP_DESCRIPTOR *d) {
    for (int k = 0; k < WIN; k++)
        if (rd[k] == d) return k;
    FATAL("completion of a descriptor %p that is not ours", (void *)d);
}

static void post_send(int k, uint32_t len, uint32_t imm) {
    th_set1(sd[k], e.mh, sb[k], len);
    if (len == 0) sd[k]->CS.SegCount = 0;
    sd[k]->CS.Control = VIP_CONTROL_IMMEDIATE;
    sd[k]->CS.ImmediateData = imm;
    CHECK(VipPostSend(vi, sd[k], e.mh));
}

static int threaded; /* --progress thread */

/* One completion; fails after SPIN_MS. Inline progress polls (Done steps the NIC). With a
 * firmware thread the program waits in VipRecvWait/VipSendWait, which sleep once they
 * have spun a while, as docs/architecture.md says a thread-mode program should: two
 * processes polling Done beside their firmware threads are four busy threads on this
 * 2-core machine, and every retransmit timer fires on scheduler time slices. */
static VIP_DESCRIPTOR *wait_done(int recv, const char *what) {
    uint64_t end = th_now_ms() + SPIN_MS;
    VIP_DESCRIPTOR *d;
    if (threaded) {
        VIP_RETURN r = recv ? VipRecvWait(vi, SPIN_MS, &d) : VipSendWait(vi, SPIN_MS, &d);
        if (r != VIP_SUCCESS) FATAL("%s: %s, VI %s", what, th_rs(r), th_state_name(th_state(vi)));
        if (d->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("%s: completed with status 0x%x", what, d->CS.Status);
        return d;
    }
    for (;;) {
        VIP_RETURN r = recv ? VipRecvDone(vi, &d) : VipSendDone(vi, &d);
        if (r == VIP_SUCCESS) break;
        if (r != VIP_NOT_DONE) FATAL("%s: %s", what, th_rs(r));
        if (th_now_ms() > end) FATAL("%s: nothing for %d ms, VI %s", what, SPIN_MS, th_state_name(th_state(vi)));
    }
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("%s: completed with status 0x%x", what, d->CS.Status);
    return d;
}

/* Steps our NIC until the other rank has stored key. */
static void step_until_key(const char *key) {
    uint64_t end = th_now_ms() + SPIN_MS;
    char v[8];
    while (sv_boot_get(key, v, sizeof v, NULL, 0) != 0) {
        VipExtProgress(e.nic);
        if (th_now_ms() > end) FATAL("the other rank never set '%s'", key);
    }
}

static void meet(const char *what) {
    char mine[64], theirs[64];
    snprintf(mine, sizeof mine, "%s.%d", what, mp_rank);
    snprintf(theirs, sizeof theirs, "%s.%d", what, 1 - mp_rank);
    if (sv_boot_put(mine, "1", 1) != 0) FATAL("sv_boot_put %s", mine);
    step_until_key(theirs);
}

static void pingpong(int n) {
    th_phase("ping-pong");
    for (uint32_t i = 0; i < (uint32_t)n; i++) {
        uint32_t len = 1 + i % 64;
        if (mp_rank == 0) {
            make_msg(sb[0], len, i);
            post_send(0, len, mp_fnv(sb[0], len));
            wait_done(0, "ping send");
        }
        VIP_DESCRIPTOR *d = wait_done(1, mp_rank ? "ping" : "pong");
        int k = recv_slot(d);
        if (d->CS.Length != len || d->CS.ImmediateData != mp_fnv(rb[k], len))
            FATAL("round %u: %u bytes (want %u) or a bad checksum", i, d->CS.Length, len);
        if (mp_rank == 1) {
            uint32_t imm = d->CS.ImmediateData; /* before post_recv clears the descriptor */
            memcpy(sb[0], rb[k], len);
            post_recv(k);
            post_send(0, len, imm);
            wait_done(0, "pong send");
        } else {
            post_recv(k);
        }
    }
    printf("%s: ping-pong: %d round trips checked\n", th_prog, n);
}

static void sender(uint32_t total) {
    uint32_t credits = WIN, sent = 0, done = 0;
    uint64_t bytes = 0, t0 = th_now_ms();
    while (done < total) {
        VIP_DESCRIPTOR *d;
        /* Credits back from the receiver: small messages whose immediate data is a count. */
        while (VipRecvDone(vi, &d) == VIP_SUCCESS) {
            if (d->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("credit receive: status 0x%x", d->CS.Status);
            credits += d->CS.ImmediateData;
            post_recv(recv_slot(d));
        }
        if (sent - done == WIN || (sent == total && done < total)) { /* slot reuse in order */
            wait_done(0, "stream send");
            done++;
            continue;
        }
        if (threaded && credits == 0) { /* sleep until the receiver gives credits back */
            d = wait_done(1, "credit receive");
            credits += d->CS.ImmediateData;
            post_recv(recv_slot(d));
            continue;
        }
        if (sent < total && credits > 0) {
            int k = (int)(sent % WIN);
            uint32_t len = msg_size(sent);
            make_msg(sb[k], len, sent);
            post_send(k, len, mp_fnv(sb[k], len));
            bytes += len;
            sent++;
            credits--;
        }
    }
    double s = (double)(th_now_ms() - t0 + 1) / 1e3;
    printf("%s: sent %u messages, %llu bytes, all completed, %.1f MB/s\n", th_prog, total,
           (unsigned long long)bytes, (double)bytes / s / 1e6);
}

static void receiver(uint32_t total) {
    static char want[MAXSZ];
    uint32_t consumed = 0, credit_slot = 0;
    for (uint32_t got = 0; got < total; got++) {
        VIP_DESCRIPTOR *d = wait_done(1, "stream receive");
        int k = recv_slot(d);
        uint32_t len = msg_size(got), seq = 0;
        if (d->CS.Length != len) FATAL("message %u: %u bytes, want %u (lost or out of order)", got, d->CS.Length, len);
        if (len >= 4 && (memcpy(&seq, rb[k], 4), seq != got)) FATAL("message %u where %u was due", seq, got);
        make_msg(want, len, got);
        if (memcmp(want, rb[k], len) != 0 || d->CS.ImmediateData != mp_fnv(rb[k], len))
            FATAL("message %u: payload or checksum differs", got);
        post_recv(k);
        if (++consumed == CREDIT_EVERY) {
            int c = (int)(credit_slot++ % WIN);
            post_send(c, 0, consumed);
            wait_done(0, "credit send");
            consumed = 0;
        }
    }
    printf("%s: received all %u messages exactly once, in order, intact\n", th_prog, total);
}

int main(int argc, char **argv) {
    const char *rel = "RD", *progress = "inline";
    int msgs = 20000, pp = 1000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rel") && i + 1 < argc) rel = argv[++i];
        else if (!strcmp(argv[i], "--progress") && i + 1 < argc) progress = argv[++i];
        else if (!strcmp(argv[i], "--msgs") && i + 1 < argc) msgs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pingpong") && i + 1 < argc) pp = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: dpdk_stream --rel RD|RR --progress inline|thread [--msgs N] [--pingpong N]\n");
            return T_FAIL;
        }
    }
    threaded = !strcmp(progress, "thread");
    mp_init("dpdk_stream", 2, 110);
    mp_open(&e, progress, (size_t)2 * WIN * (MAXSZ + 256) + 65536);
    mp_log_errors(&e);
    printf("%s: reliability %s, progress %s\n", th_prog, rel, progress);
    for (int k = 0; k < WIN; k++) {
        rd[k] = th_desc(&e, 1);
        sd[k] = th_desc(&e, 1);
        rb[k] = th_alloc(&e, MAXSZ);
        sb[k] = th_alloc(&e, MAXSZ);
    }
    th_phase("connect");
    mp_addrs ad;
    mp_exchange(&e, &ad);
    vi = th_vi(&e, mp_rel(rel), NULL, NULL);
    for (int k = 0; k < WIN; k++) post_recv(k);
    mp_peer_request(vi, &ad, 1 - mp_rank, "dpdk");
    mp_peer_finish(vi, 1 - mp_rank);
    meet("up");

    pingpong(pp);
    th_phase("stream");
    if (mp_rank == 0) sender((uint32_t)msgs);
    else receiver((uint32_t)msgs);
    meet("streamed");

    th_phase("counters and teardown");
    VIP_EXT_COUNTERS vc;
    CHECK(VipExtQueryViCounters(vi, &vc));
    printf("%s: VI counters: %llu drops (frames behind a loss), %llu retransmits, %llu errors\n", th_prog,
           (unsigned long long)vc.Drops, (unsigned long long)vc.Retransmits, (unsigned long long)vc.Errors);
    EXPECT(vc.Errors == 0, "VI counters: %llu errors", (unsigned long long)vc.Errors);
    EXPECT(th_state(vi) == VIP_STATE_CONNECTED, "VI state %s", th_state_name(th_state(vi)));
    meet("checked");
    CHECK(VipDisconnect(vi));
    CHECK(VipCloseNic(e.nic));
    free(e.mem);
    return th_result();
}
