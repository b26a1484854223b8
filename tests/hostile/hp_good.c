/*
 * hp_good -- rank 1 of the hostile-peer test: the well-behaved peer (docs/hostile-peer.md).
 *
 * Streams to the owner over three VIs (unreliable, reliable delivery, reliable
 * reception) for as long as the hostile peer attacks and a while after: messages of
 * random sizes carrying a header (VI, sequence number, length), a pattern and their
 * checksum in the immediate data; on the reliable VIs every third operation is an RDMA
 * write with immediate data into a slot of the owner's region GW; and on the RD VI RDMA
 * reads of the owner's region GR, checked against its pattern. The owner returns credits
 * (hp_credit), so no message ever finds it without a receive. Every send must complete
 * successfully and the VIs must still be CONNECTED at the end.
 */
#include "../multiproc/mp_common.h"
#include "hp_arena.h"

#define G_RECVS 48
#define G_SENDQ 32
#define G_READ_MAX 8192u
#define G_AFTER 200 /* operations per VI after the hostile peer stopped */

enum { K_MSG = 1, K_WRITE, K_READ };

typedef struct {
    VIP_DESCRIPTOR *d;
    uint8_t *buf;
    uint32_t cap, kind, off, len;
} g_slot;

typedef struct {
    VIP_VI_HANDLE vi;
    g_slot r[G_RECVS], s[G_SENDQ];
    uint32_t s_head, s_tail;
    uint32_t msgs, writes, ops;  /* sent */
    uint32_t credits_seen, reads_out, after;
} g_vi;

static struct {
    VIP_NIC_HANDLE nic;
    VIP_NIC_ATTRIBUTES na;
    VIP_PROTECTION_HANDLE ptag;
    hp_reg desc, gpr;
    uint32_t gpr_seed;
    g_vi v[HP_NVI];
    hp_owner_info owner;
    uint32_t taken[HP_NVI], u_next, u_writeoff;
    uint64_t u_change_ms;
    uint32_t reads_ok;
    int hostile_done;
} G;

static uint32_t g_rand_state = 0xC0FFEEu;
static uint32_t g_rand(void) {
    g_rand_state = g_rand_state * 1664525u + 1013904223u;
    return g_rand_state >> 8;
}

static void post_recv(g_vi *g, int k) {
    th_set1(g->r[k].d, G.desc.mh, g->r[k].buf, g->r[k].cap);
    CHECK(VipPostRecv(g->vi, g->r[k].d, G.desc.mh));
}

static void setup(const mp_addrs *ad) {
    hp_arena_init(4u << 20);
    hp_region_carve(&G.desc, HP_NVI * (G_RECVS * (64 + 64 + 2 * HP_BUF_GUARD) +
                                       G_SENDQ * (64 + HP_MAXMSG + sizeof(hp_msg_hdr) + 2 * HP_BUF_GUARD)) + 8192);
    hp_region_carve(&G.gpr, HP_GPR_BYTES);
    G.gpr_seed = hp_mix(0x47500000u, (uint32_t)getpid());
    hp_fill(G.gpr.p, G.gpr.len, G.gpr_seed, 0);
    hp_region_register(G.nic, &G.desc, G.ptag, 0, 0);
    hp_region_register(G.nic, &G.gpr, G.ptag, 0, 1);
    static const VIP_RELIABILITY_LEVEL rel[HP_NVI] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY,
                                                      VIP_SERVICE_RELIABLE_RECEPTION};
    for (int v = 0; v < HP_NVI; v++) {
        g_vi *g = &G.v[v];
        VIP_VI_ATTRIBUTES va;
        memset(&va, 0, sizeof va);
        va.ReliabilityLevel = rel[v];
        va.Ptag = G.ptag;
        va.EnableRdmaWrite = VIP_TRUE;
        va.EnableRdmaRead = v != HP_VI_U;
        CHECK(VipCreateVi(G.nic, &va, NULL, NULL, &g->vi));
        for (int k = 0; k < G_RECVS; k++) {
            g->r[k].d = hp_alloc(&G.desc, 64);
            g->r[k].cap = 64;
            g->r[k].buf = hp_alloc(&G.desc, 64);
            post_recv(g, k);
        }
        for (int k = 0; k < G_SENDQ; k++) {
            g->s[k].d = hp_alloc(&G.desc, 64);
            g->s[k].cap = HP_MAXMSG + sizeof(hp_msg_hdr);
            g->s[k].buf = hp_alloc(&G.desc, g->s[k].cap);
        }
        char tag[32];
        snprintf(tag, sizeof tag, "%s%d", HP_DISC_GOOD, v);
        mp_peer_request(g->vi, ad, 0, tag);
    }
    for (int v = 0; v < HP_NVI; v++) mp_peer_finish(G.v[v].vi, 0);
}

/* Credit messages from the owner. */
static void reap_recvs(int v) {
    g_vi *g = &G.v[v];
    VIP_DESCRIPTOR *d;
    while (VipRecvDone(g->vi, &d) == VIP_SUCCESS) {
        int k = 0;
        while (k < G_RECVS && g->r[k].d != d) k++;
        if (k == G_RECVS) FATAL("VI %d: a receive completion for descriptor %p, not ours", v, (void *)d);
        if (d->CS.Status & VIP_STATUS_ERROR_MASK) FATAL("VI %d: a receive completed with status 0x%x", v, d->CS.Status);
        hp_credit c;
        if (v == HP_VI_U || d->CS.Length != sizeof c) FATAL("VI %d: a %u-byte message, not a credit", v, d->CS.Length);
        memcpy(&c, g->r[k].buf, sizeof c);
        if (c.magic != HP_CREDIT_MAGIC) FATAL("VI %d: a credit message with magic 0x%x", v, c.magic);
        if (!hp_buf_guard_ok(g->r[k].buf, g->r[k].cap)) FATAL("VI %d: a receive wrote past its buffer", v);
        for (int i = 0; i < HP_NVI; i++)
            if (c.taken[i] > G.taken[i]) G.taken[i] = c.taken[i];
        if (c.u_next > G.u_next) {
            G.u_next = c.u_next;
            G.u_change_ms = th_now_ms();
        }
        g->credits_seen++;
        post_recv(g, k);
    }
}

static void reap_sends(int v) {
    g_vi *g = &G.v[v];
    VIP_DESCRIPTOR *d;
    while (VipSendDone(g->vi, &d) == VIP_SUCCESS) {
        g_slot *s = &g->s[g->s_head % G_SENDQ];
        if (g->s_head == g->s_tail || s->d != d) FATAL("VI %d: send completions out of post order", v);
        g->s_head++;
        if (d->CS.Status & VIP_STATUS_ERROR_MASK)
            FATAL("VI %d: a %s completed with status 0x%x (VI %s)", v,
                  s->kind == K_READ ? "RDMA read" : s->kind == K_WRITE ? "RDMA write" : "send", d->CS.Status,
                  th_state_name(th_state(g->vi)));
        if (s->kind == K_READ) {
            long at = hp_diff(s->buf, s->len, G.owner.gr_seed, s->off);
            if (at >= 0) FATAL("RDMA read of the owner's region GR [%u, +%u): wrong byte at +%ld", s->off, s->len, at);
            if (!hp_buf_guard_ok(s->buf, s->cap)) FATAL("an RDMA read wrote past its buffer");
            G.reads_ok++;
            g->reads_out--;
        }
    }
}

/* Operations sent on v that may still need a receive at the owner. */
static uint32_t in_flight(int v) {
    const g_vi *g = &G.v[v];
    if (v != HP_VI_U) return g->msgs + g->writes - G.taken[v];
    uint32_t base = G.u_next > G.u_writeoff ? G.u_next : G.u_writeoff;
    return g->msgs - base;
}

static void post_msg(int v, uint32_t seq) {
    g_vi *g = &G.v[v];
    g_slot *s = &g->s[g->s_tail % G_SENDQ];
    hp_msg_hdr h;
    memset(&h, 0, sizeof h);
    h.magic = HP_MSG_MAGIC;
    h.vi = (uint32_t)v;
    h.seq = seq;
    h.credits_seen = g->credits_seen;
    if (seq == HP_END_SEQ) {
        h.len = sizeof h;
        h.sent_msgs = g->msgs;
        h.sent_writes = g->writes;
        h.u_sent = G.v[HP_VI_U].msgs;
    } else {
        h.len = hp_msg_len((uint32_t)v, seq);
        hp_fill(s->buf + sizeof h, h.len - sizeof h, hp_msg_seed((uint32_t)v, seq), 0);
    }
    memcpy(s->buf, &h, sizeof h);
    th_set1(s->d, G.desc.mh, s->buf, h.len);
    s->d->CS.Control = VIP_CONTROL_IMMEDIATE;
    s->d->CS.ImmediateData = hp_fnv(s->buf, h.len);
    s->kind = K_MSG;
    CHECK(VipPostSend(g->vi, s->d, G.desc.mh));
    g->s_tail++;
}

static void post_write(int v) {
    g_vi *g = &G.v[v];
    g_slot *s = &g->s[g->s_tail % G_SENDQ];
    uint32_t wseq = g->writes;
    uint32_t len = hp_write_len((uint32_t)v, wseq);
    hp_fill(s->buf, len, hp_write_seed((uint32_t)v, wseq), 0);
    uint64_t at = G.owner.gw.addr + (uint64_t)hp_write_slot((uint32_t)v, wseq) * HP_GW_SLOT;
    th_set_rdma(s->d, VIP_CONTROL_OP_RDMAWRITE, (void *)(uintptr_t)at, G.owner.gw.memh, G.desc.mh, s->buf, len, 1);
    s->d->CS.Control |= VIP_CONTROL_IMMEDIATE;
    s->d->CS.ImmediateData = wseq;
    s->kind = K_WRITE;
    CHECK(VipPostSend(g->vi, s->d, G.desc.mh));
    g->s_tail++;
}

static void post_read(void) {
    g_vi *g = &G.v[HP_VI_RD];
    g_slot *s = &g->s[g->s_tail % G_SENDQ];
    s->len = 1 + g_rand() % G_READ_MAX;
    s->off = g_rand() % (HP_GR_BYTES - s->len + 1);
    memset(s->buf, 0, s->len);
    th_set_rdma(s->d, VIP_CONTROL_OP_RDMAREAD, (void *)(uintptr_t)(G.owner.gr.addr + s->off), G.owner.gr.memh,
                G.desc.mh, s->buf, s->len, 1);
    s->kind = K_READ;
    CHECK(VipPostSend(g->vi, s->d, G.desc.mh));
    g->s_tail++;
    g->reads_out++;
}

/* One operation on each VI that has credit and send room. */
static int stream_step(void) {
    int did = 0;
    uint64_t now = th_now_ms();
    for (int v = 0; v < HP_NVI; v++) {
        g_vi *g = &G.v[v];
        reap_recvs(v);
        reap_sends(v);
        if (g->s_tail - g->s_head >= G_SENDQ - 2) continue;
        if (v == HP_VI_RD && g->reads_out < 2) post_read();
        if (in_flight(v) >= HP_WIN) {
            /* unreliable on a lossy wire: a tail that never arrived is written off */
            if (v == HP_VI_U && th_wire_lossy() && now - G.u_change_ms > 20) {
                G.u_writeoff = g->msgs;
                G.u_change_ms = now;
            }
            continue;
        }
        if (v != HP_VI_U && g->ops % 3 == 1) post_write(v), g->writes++;
        else post_msg(v, g->msgs), g->msgs++;
        g->ops++;
        if (G.hostile_done) g->after++;
        did = 1;
    }
    return did;
}

int main(int argc, char **argv) {
    const char *progress = "inline";
    unsigned seconds = 8;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = (unsigned)atoi(argv[++i]);
        else if (i + 1 < argc && (!strcmp(argv[i], "--progress") || !strcmp(argv[i], "--seed") ||
                                  !strcmp(argv[i], "--attacks"))) i++; /* the owner's, the hostile peer's */
        else FATAL("unknown argument '%s'", argv[i]);
    }
    (void)progress;
    mp_init("hp_good", 3, seconds + 100);
    th_phase("set-up");
    VIP_EXT_NIC_OPTIONS o = {VIP_EXT_PROGRESS_INLINE};
    CHECK(VipExtOpenNic(NULL, &o, &G.nic));
    CHECK(VipQueryNic(G.nic, &G.na));
    mp_log_errors(&(th_env){.nic = G.nic});
    CHECK(VipCreatePtag(G.nic, &G.ptag));
    mp_addrs ad;
    th_env e = {.nic = G.nic, .na = G.na};
    mp_exchange(&e, &ad);
    setup(&ad);
    hp_good_info info;
    memset(&info, 0, sizeof info);
    for (int v = 0; v < HP_NVI; v++) CHECK(VipExtQueryViId(G.v[v].vi, &info.vi[v]));
    info.gpr = hp_pub(&G.gpr);
    info.gpr_seed = G.gpr_seed;
    if (sv_boot_put(HP_KEY_GOOD, &info, sizeof info) != 0) FATAL("publishing the good peer's layout");
    if (sv_boot_get(HP_KEY_OWNER, &G.owner, sizeof G.owner, NULL, HP_BOOT_MS) != 0) FATAL("no layout from the owner");
    if (sv_boot_barrier(HP_BOOT_MS) != 0) FATAL("start barrier");

    th_phase("stream");
    uint64_t start = th_now_ms(), last_done = start, deadline = start + (uint64_t)(seconds + 50) * 1000;
    G.u_change_ms = start;
    for (;;) {
        stream_step();
        uint64_t now = th_now_ms();
        if (!G.hostile_done && now - last_done >= 10) {
            hp_hostile_report rep;
            G.hostile_done = sv_boot_get(HP_KEY_HOSTILE_DONE, &rep, sizeof rep, NULL, 0) == 0;
            last_done = now;
        }
        if (G.hostile_done && G.v[0].after >= G_AFTER && G.v[1].after >= G_AFTER && G.v[2].after >= G_AFTER) break;
        if (now > deadline) FATAL("the hostile peer did not finish within %u s", seconds + 50);
    }
    th_phase("end of stream");
    for (int v = 0; v < HP_NVI; v++) {
        VIP_VI_STATE st = th_state(G.v[v].vi);
        EXPECT(st == VIP_STATE_CONNECTED, "VI %d is %s after the stream, not CONNECTED", v, th_state_name(st));
    }
    for (int v = 0; v < HP_NVI; v++) {
        while (G.v[v].s_tail - G.v[v].s_head >= G_SENDQ - 1) reap_recvs(v), reap_sends(v);
        post_msg(v, HP_END_SEQ);
    }
    uint64_t end = th_now_ms() + 20000;
    for (int v = 0; v < HP_NVI; v++)
        while (G.v[v].s_head != G.v[v].s_tail) {
            for (int w = 0; w < HP_NVI; w++) reap_recvs(w), reap_sends(w);
            if (th_now_ms() > end) FATAL("VI %d: sends did not complete", v);
        }
    th_phase("waiting for the owner's verdict");
    int verdict = -1;
    while (sv_boot_get(HP_KEY_VERDICT, &verdict, sizeof verdict, NULL, 0) != 0) {
        for (int v = 0; v < HP_NVI; v++) reap_recvs(v), reap_sends(v);
        if (th_now_ms() > end + 60000) FATAL("no verdict from the owner");
        sched_yield();
    }
    printf("%s: sent U %u msgs, RD %u msgs + %u writes, RR %u msgs + %u writes; %u RDMA reads checked; "
           "owner's verdict: %d failures\n", th_prog, G.v[0].msgs, G.v[1].msgs, G.v[1].writes, G.v[2].msgs,
           G.v[2].writes, G.reads_ok, verdict);
    EXPECT(G.reads_ok > 0, "no RDMA read of the owner's region completed");
    int fails = th_failures;
    sv_boot_put(HP_KEY_GOOD_DONE, &fails, sizeof fails);
    for (int v = 0; v < HP_NVI; v++) VipDisconnect(G.v[v].vi);
    CHECK(VipCloseNic(G.nic));
    return th_result();
}
