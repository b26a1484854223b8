/*
 * mp_stream: two processes, one VI pair connected peer-to-peer.
 *   1. ping-pong: rank 0 sends, rank 1 checks and echoes, rank 0 checks the echo;
 *   2. streaming 10,000 messages rank 0 -> rank 1, then rank 1 -> rank 0, with credits
 *      (a reliable VI breaks on a send that finds no receive, so the receiver returns
 *      credits in the immediate data of small messages);
 * every message has a random size (0..64 KiB, the same sequence on both ranks), a
 * sequence number, a pattern derived from it, and the FNV checksum of its payload in
 * its immediate data; all of it is checked on arrival. The receive counters must show
 * no drops and no errors at the end.
 *
 *   softvia-run -n 2 mp_stream --rel U|RD|RR --progress inline|thread [--msgs N] [--pingpong N]
 */
#include "mp_common.h"

enum { WIN = 64, MAXSZ = 65536 };
#define DONE_MARK 0xffffffffu

typedef struct {
    th_env e;
    VIP_VI_HANDLE vi;
    VIP_DESCRIPTOR *sd[WIN], *rd[WIN];
    char *sb[WIN], *rb[WIN];
} ctx_t;

static uint32_t msg_size(uint32_t seq, uint32_t salt) {
    uint32_t s = seq * 2654435761u ^ salt;
    uint32_t r = mp_rand(&s);
    if (r % 16 == 0) return 0;
    if (r % 16 == 1) return 1 + r % 64;
    return r % (MAXSZ + 1);
}

/* Fills a message: 4-byte sequence number (if it fits), then a pattern. */
static void make_msg(char *p, uint32_t len, uint32_t seq, uint32_t salt) {
    th_fill(p, len, seq ^ salt);
    if (len >= 4) memcpy(p, &seq, 4);
}

static int check_msg(const char *p, uint32_t len, uint32_t seq, uint32_t salt, uint32_t imm, const char *what) {
    if (imm != mp_fnv(p, len)) {
        TH_FAILMSG("%s %u: checksum 0x%x, payload hashes to 0x%x (len %u)", what, seq, imm, mp_fnv(p, len), len);
        return 0;
    }
    uint32_t got;
    if (len >= 4 && (memcpy(&got, p, 4), got != seq)) {
        TH_FAILMSG("%s: expected message %u, got %u", what, seq, got);
        return 0;
    }
    static char tmp[MAXSZ];
    make_msg(tmp, len, seq, salt);
    if (memcmp(tmp, p, len) != 0) {
        TH_FAILMSG("%s %u: payload differs from the pattern", what, seq);
        return 0;
    }
    return 1;
}

static void post_recv(ctx_t *c, int k) {
    th_set1(c->rd[k], c->e.mh, c->rb[k], MAXSZ);
    CHECK(VipPostRecv(c->vi, c->rd[k], c->e.mh));
}

static int slot_of(ctx_t *c, VIP_DESCRIPTOR *d) {
    for (int k = 0; k < WIN; k++)
        if (c->rd[k] == d) return k;
    FATAL("completion of a descriptor %p that is not ours", (void *)d);
}

static VIP_DESCRIPTOR *spin(ctx_t *c, int recv, const char *what) {
    VIP_RETURN r;
    VIP_DESCRIPTOR *d = th_done_poll(c->vi, recv, &r);
    if (!d) {
        VIP_VI_STATE st = th_state(c->vi);
        FATAL("%s: no %s completion (%s), VI %s", what, recv ? "receive" : "send", th_rs(r), th_state_name(st));
    }
    if (d->CS.Status & VIP_STATUS_ERROR_MASK)
        FATAL("%s: %s completed with status 0x%x", what, recv ? "receive" : "send", d->CS.Status);
    return d;
}

static void send_slot(ctx_t *c, int k, uint32_t len, uint32_t imm) {
    th_set1(c->sd[k], c->e.mh, c->sb[k], len);
    if (len == 0) c->sd[k]->CS.SegCount = 0;
    c->sd[k]->CS.Control = VIP_CONTROL_IMMEDIATE;
    c->sd[k]->CS.ImmediateData = imm;
    CHECK(VipPostSend(c->vi, c->sd[k], c->e.mh));
}

static void pingpong(ctx_t *c, int n) {
    th_phase("ping-pong");
    const uint32_t salt = 0x5050u;
    for (uint32_t i = 0; i < (uint32_t)n; i++) {
        uint32_t len = msg_size(i, salt);
        if (mp_rank == 0) {
            make_msg(c->sb[0], len, i, salt);
            send_slot(c, 0, len, mp_fnv(c->sb[0], len));
            spin(c, 0, "ping send");
            VIP_DESCRIPTOR *d = spin(c, 1, "pong");
            int k = slot_of(c, d);
            if (d->CS.Length != len) FATAL("pong %u: %u bytes, want %u", i, d->CS.Length, len);
            if (!check_msg(c->rb[k], len, i, salt, d->CS.ImmediateData, "pong")) exit(T_FAIL);
            post_recv(c, k);
        } else {
            VIP_DESCRIPTOR *d = spin(c, 1, "ping");
            int k = slot_of(c, d);
            if (d->CS.Length != len) FATAL("ping %u: %u bytes, want %u", i, d->CS.Length, len);
            if (!(d->CS.Status & VIP_STATUS_IMMEDIATE)) FATAL("ping %u: no immediate data", i);
            if (!check_msg(c->rb[k], len, i, salt, d->CS.ImmediateData, "ping")) exit(T_FAIL);
            memcpy(c->sb[0], c->rb[k], len); /* echo what arrived */
            uint32_t imm = d->CS.ImmediateData;
            post_recv(c, k);
            send_slot(c, 0, len, imm);
            spin(c, 0, "pong send");
        }
    }
    printf("%s: ping-pong: %d round trips checked\n", th_prog, n);
}

/* One direction of streaming: sender -> the other rank. */
static void stream(ctx_t *c, int sender, int msgs) {
    char ph[64];
    snprintf(ph, sizeof ph, "stream %d -> %d", sender, 1 - sender);
    th_phase(ph);
    const uint32_t salt = 0x57000u + (uint32_t)sender;
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier");
    uint64_t t0 = th_now_ms();
    uint64_t bytes = 0;
    if (mp_rank == sender) {
        int credits = WIN, inflight = 0;
        uint32_t oldest = 0;
        for (uint32_t i = 0; i < (uint32_t)msgs; i++) {
            VIP_DESCRIPTOR *d;
            /* credits that have come back */
            while (VipRecvDone(c->vi, &d) == VIP_SUCCESS) {
                if (d->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("credit message status 0x%x", d->CS.Status);
                credits += (int)d->CS.ImmediateData;
                post_recv(c, slot_of(c, d));
            }
            while (credits == 0) {
                d = spin(c, 1, "waiting for credits");
                credits += (int)d->CS.ImmediateData;
                post_recv(c, slot_of(c, d));
            }
            if (inflight == WIN) {
                d = spin(c, 0, "send");
                if (d != c->sd[oldest % WIN]) FATAL("send completions out of order");
                oldest++;
                inflight--;
            }
            int k = (int)(i % WIN);
            uint32_t len = msg_size(i, salt);
            make_msg(c->sb[k], len, i, salt);
            send_slot(c, k, len, mp_fnv(c->sb[k], len));
            bytes += len;
            inflight++;
            credits--;
        }
        while (inflight--) spin(c, 0, "final sends");
        for (;;) { /* the receiver's credits, then its "all arrived" */
            VIP_DESCRIPTOR *d = spin(c, 1, "waiting for the end mark");
            uint32_t imm = d->CS.ImmediateData;
            post_recv(c, slot_of(c, d));
            if (imm == DONE_MARK) break;
        }
    } else {
        int consumed = 0;
        for (uint32_t i = 0; i < (uint32_t)msgs; i++) {
            VIP_DESCRIPTOR *d = spin(c, 1, "stream receive");
            int k = slot_of(c, d);
            uint32_t len = msg_size(i, salt);
            if (d->CS.Length != len) FATAL("message %u: %u bytes, want %u", i, d->CS.Length, len);
            if (!check_msg(c->rb[k], len, i, salt, d->CS.ImmediateData, "message")) exit(T_FAIL);
            bytes += len;
            post_recv(c, k);
            if (++consumed == WIN / 2) {
                send_slot(c, 0, 0, (uint32_t)consumed);
                spin(c, 0, "credit send");
                consumed = 0;
            }
        }
        send_slot(c, 0, 0, DONE_MARK);
        spin(c, 0, "end mark send");
    }
    uint64_t dt = th_now_ms() - t0;
    printf("%s: %s: %d messages, %llu bytes in %llu ms\n", th_prog, ph, msgs, (unsigned long long)bytes,
           (unsigned long long)dt);
}

int main(int argc, char **argv) {
    const char *rel = "RD", *progress = "inline";
    int msgs = 10000, pp = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rel")) rel = argv[i + 1];
        else if (!strcmp(argv[i], "--progress")) progress = argv[i + 1];
        else if (!strcmp(argv[i], "--msgs")) msgs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--pingpong")) pp = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: mp_stream --rel U|RD|RR --progress inline|thread [--msgs N] [--pingpong N]\n");
            return T_FAIL;
        }
    }
    mp_init("mp_stream", 2, 110);
    static ctx_t c;
    mp_open(&c.e, progress, 2 * WIN * (MAXSZ + 256) + 65536);
    VIP_EXT_PROGRESS_MODE m;
    CHECK(VipExtGetProgressMode(c.e.nic, &m));
    printf("%s: reliability %s, progress %s\n", th_prog, rel, m == VIP_EXT_PROGRESS_THREAD ? "thread" : "inline");
    for (int k = 0; k < WIN; k++) c.rd[k] = th_desc(&c.e, 1);
    for (int k = 0; k < WIN; k++) {
        c.sd[k] = th_desc(&c.e, 1);
        c.sb[k] = th_alloc(&c.e, MAXSZ);
        c.rb[k] = th_alloc(&c.e, MAXSZ);
    }
    th_phase("connect");
    mp_addrs ad;
    mp_exchange(&c.e, &ad);
    c.vi = th_vi(&c.e, mp_rel(rel), NULL, NULL);
    for (int k = 0; k < WIN; k++) post_recv(&c, k); /* before the peer can send */
    mp_peer_request(c.vi, &ad, 1 - mp_rank, "stream");
    mp_peer_finish(c.vi, 1 - mp_rank);
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier");

    pingpong(&c, pp);
    stream(&c, 0, msgs);
    stream(&c, 1, msgs);

    th_phase("counters and teardown");
    VIP_EXT_COUNTERS vc;
    CHECK(VipExtQueryViCounters(c.vi, &vc));
    /* a lossy wire's spurious resends arrive twice: the second copy counts as a drop */
    EXPECT((vc.Drops == 0 || th_wire_lossy()) && vc.Errors == 0, "VI counters: %llu drops, %llu errors", (unsigned long long)vc.Drops,
           (unsigned long long)vc.Errors);
    EXPECT(th_state(c.vi) == VIP_STATE_CONNECTED, "VI state %s", th_state_name(th_state(c.vi)));
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier");
    CHECK(VipDisconnect(c.vi));
    th_drain(c.vi, 2000);
    CHECK(VipCloseNic(c.e.nic));
    free(c.e.mem);
    return th_result();
}
