/*
 * rdma_protection: every check the target NIC makes before an RDMA write or read moves a
 * byte (docs/rdma.md): the remote handle names a live registration (a made-up handle,
 * handle 0, a stale handle whose region index was registered again), the range lies
 * inside the region (starts before it, ends after it, one byte over the whole region,
 * the whole region shifted by one), the region allows the operation (registered
 * without RDMA write / read, or with only the other one), the region has the target
 * VI's protection tag, and the target VI was created with EnableRdmaWrite /
 * EnableRdmaRead. Controls: the exact whole region is accepted, and the initiator VI's
 * own RDMA attributes do not matter.
 *
 * Reliable VIs (both levels, write and read): the initiator's descriptor completes
 * with VIP_STATUS_RDMA_PROT_ERROR (and its op bits, Length 0), both VIs end in
 * VIP_STATE_ERROR, the error callback sees VIP_ERROR_RDMAW_PROT / VIP_ERROR_RDMAR_PROT
 * for each of them, the target's posted receive is flushed and a send posted after the
 * refused request is not delivered (on reliable reception not reported successful
 * either).
 * Unreliable VIs (writes): the write is dropped at the target and counted in the target
 * VI's Errors counter; the initiator completes it without error (it is done when it is
 * on the wire); the connection stays up, no error callback is called, a write with
 * immediate data does not consume the target's receive, and the next send gets through.
 * In every refused case no byte of target memory changes (guard bytes around and inside
 * every region), and a refused read writes nothing locally.
 * A refusal in the middle of a burst of sends, writes and reads lands on the right
 * descriptor (the ones before it succeed, the ones after it are flushed, in post order;
 * the target receives no send posted after it). Bad local segments of an RDMA
 * descriptor are VIP_STATUS_PROTECTION_ERROR (with the RDMA op bits), at every level.
 */
#include "helpers.h"

enum { MAXREC = 256 };
static struct {
    pthread_mutex_t mu;
    int n;
    VIP_ERROR_DESCRIPTOR rec[MAXREC];
} R = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};

static void handler(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *ed) {
    (void)ctx;
    pthread_mutex_lock(&R.mu);
    if (R.n < MAXREC) R.rec[R.n++] = *ed;
    pthread_mutex_unlock(&R.mu);
}

static int record_count(void) {
    pthread_mutex_lock(&R.mu);
    int n = R.n;
    pthread_mutex_unlock(&R.mu);
    return n;
}

/* Whether a record for vi with code was made at index >= from (polling for up to ms). */
static int await_error(int from, VIP_VI_HANDLE vi, VIP_ERROR_CODE code, VIP_VI_HANDLE poll_vi, unsigned ms) {
    uint64_t end = th_now_ms() + ms;
    do {
        pthread_mutex_lock(&R.mu);
        for (int i = from; i < R.n; i++)
            if (R.rec[i].ViHandle == vi && R.rec[i].ErrorCode == code) {
                pthread_mutex_unlock(&R.mu);
                return 1;
            }
        pthread_mutex_unlock(&R.mu);
        VipQueryVi(poll_vi, NULL, NULL, NULL, NULL);
        sched_yield();
    } while (th_now_ms() < end);
    return 0;
}

static th_env E;
static VIP_PROTECTION_HANDLE PT2;
static uint32_t RL; /* length of the main region: several frames */
static th_region REG;        /* RDMA write + read, the VI's tag */
static th_region NONE;       /* no RDMA */
static th_region WONLY;      /* RDMA write only */
static th_region RONLY;      /* RDMA read only */
static th_region OTHER;      /* RDMA write + read, another protection tag */
static th_region STALE;      /* registered, deregistered, registered again */
static VIP_MEM_HANDLE stale_mh; /* the first registration's handle */
static th_region *ALL[] = {&REG, &NONE, &WONLY, &RONLY, &OTHER, &STALE};

enum kind {
    K_MADEUP,
    K_ZERO,
    K_STALE,
    K_BEFORE,
    K_AFTER,
    K_OVER,
    K_SHIFTED,
    K_NO_RDMA,
    K_OTHER_OP_ONLY,
    K_OTHER_PTAG,
    K_VI_NO_RDMA,
    K_OK_EXACT,
    K_OK_INITIATOR_NO_RDMA,
    K_COUNT
};
static const char *kind_name[K_COUNT] = {
    "made-up handle",
    "handle 0",
    "stale handle (region index registered again)",
    "range starts before the region",
    "range ends after the region",
    "whole region plus one byte",
    "whole region shifted by one byte",
    "region without RDMA",
    "region with only the other RDMA operation",
    "region of another protection tag",
    "target VI without the operation enabled",
    "exactly the whole region (accepted)",
    "initiator VI without RDMA attributes (accepted)",
};

typedef struct {
    char *raddr;
    VIP_MEM_HANDLE rmh;
    uint32_t len;
    VIP_BOOLEAN tw, tr; /* target VI attributes */
    VIP_BOOLEAN iw, ir; /* initiator VI attributes */
    int ok;
    th_region *written; /* accepted writes: the region written, from raddr */
} rcase;

static rcase make_case(enum kind k, int write, VIP_RELIABILITY_LEVEL rel) {
    rcase c;
    memset(&c, 0, sizeof c);
    VIP_BOOLEAN rd_ok = rel != VIP_SERVICE_UNRELIABLE;
    c.tw = c.iw = VIP_TRUE;
    c.tr = c.ir = rd_ok;
    c.raddr = REG.p + 100;
    c.rmh = REG.mh;
    c.len = 1000;
    switch (k) {
        case K_MADEUP: c.rmh = 0x7777u; break;
        case K_ZERO: c.rmh = 0; break;
        case K_STALE:
            c.raddr = STALE.p + 100;
            c.rmh = stale_mh;
            break;
        case K_BEFORE: c.raddr = REG.p - 1; c.len = 10; break;
        case K_AFTER: c.raddr = REG.p + RL - 5; c.len = 10; break;
        case K_OVER: c.raddr = REG.p; c.len = RL + 1; break;
        case K_SHIFTED: c.raddr = REG.p + 1; c.len = RL; break;
        case K_NO_RDMA: c.raddr = NONE.p + 10; c.rmh = NONE.mh; break;
        case K_OTHER_OP_ONLY:
            c.raddr = write ? RONLY.p + 10 : WONLY.p + 10;
            c.rmh = write ? RONLY.mh : WONLY.mh;
            break;
        case K_OTHER_PTAG: c.raddr = OTHER.p + 10; c.rmh = OTHER.mh; break;
        case K_VI_NO_RDMA:
            if (write) c.tw = VIP_FALSE;
            else c.tr = VIP_FALSE;
            break;
        case K_OK_EXACT:
            c.raddr = REG.p;
            c.len = RL;
            c.ok = 1;
            c.written = &REG;
            break;
        case K_OK_INITIATOR_NO_RDMA:
            c.iw = c.ir = VIP_FALSE;
            c.ok = 1;
            c.written = &REG;
            break;
        default: break;
    }
    return c;
}

/* Every byte of every region allocation is the guard byte, except, for an accepted
 * write, [raddr, raddr + len) which holds src. */
static void check_memory(const char *ph, const rcase *c, int write, const char *src) {
    for (size_t i = 0; i < sizeof ALL / sizeof *ALL; i++) {
        th_region *r = ALL[i];
        size_t total = r->len + 2 * TH_GUARD;
        if (write && c->ok && r == c->written) {
            size_t lo = (size_t)(c->raddr - r->base), hi = lo + c->len;
            EXPECT(th_guard_check(r->base, lo) < 0 && th_guard_check(r->base + hi, total - hi) < 0,
                   "%s: bytes around an accepted write changed", ph);
            EXPECT(memcmp(c->raddr, src, c->len) == 0, "%s: accepted write's data", ph);
        } else {
            long g = th_guard_check(r->base, total);
            EXPECT(g < 0, "%s: region %zu changed at byte %ld of its allocation (%ld from its start)", ph, i, g,
                   g - TH_GUARD);
        }
    }
}

static void reset_memory(void) {
    for (size_t i = 0; i < sizeof ALL / sizeof *ALL; i++) memset(ALL[i]->base, TH_GUARD_BYTE, ALL[i]->len + 2 * TH_GUARD);
}


static void reliable_case(VIP_RELIABILITY_LEVEL rel, enum kind k, int write) {
    char ph[160];
    snprintf(ph, sizeof ph, "%s, %s, %s", write ? "RDMA write" : "RDMA read", kind_name[k], th_rel_name(rel));
    th_phase(ph);
    rcase c = make_case(k, write, rel);
    size_t mark = E.used;
    reset_memory();
    VIP_VI_HANDLE a = th_vi_rdma(&E, rel, c.iw, c.ir, NULL, NULL);
    VIP_VI_HANDLE b = th_vi_rdma(&E, rel, c.tw, c.tr, NULL, NULL);
    th_connect_peer(&E, a, b, "prot");
    char *src = th_alloc(&E, RL + 8), *dst = th_alloc(&E, RL + 8), *rbuf = th_alloc(&E, 64), *nbuf = th_alloc(&E, 64);
    th_fill(src, RL + 8, 77);
    memset(rbuf, 0, 64);
    memset(dst, TH_GUARD_BYTE, RL + 8);
    VIP_DESCRIPTOR *sd = th_desc(&E, 2), *nd = th_desc(&E, 1), *rd = th_desc(&E, 1);
    th_set1(rd, E.mh, rbuf, 64);
    CHECK(VipPostRecv(b, rd, E.mh));
    int before = record_count();
    th_set_rdma(sd, write ? VIP_CONTROL_OP_RDMAWRITE : VIP_CONTROL_OP_RDMAREAD, c.raddr, c.rmh, E.mh,
                write ? src : dst, c.len, 1);
    CHECK(VipPostSend(a, sd, E.mh));
    /* a send right behind it */
    memcpy(nbuf, "next", 5);
    th_set1(nd, E.mh, nbuf, 5);
    CHECK(VipPostSend(a, nd, E.mh));
    uint32_t op = write ? VIP_STATUS_OP_RDMA_WRITE : VIP_STATUS_OP_RDMA_READ;
    VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "the RDMA request");
    if (c.ok) {
        EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) == op && d->CS.Length == c.len,
               "%s: status 0x%x length %u, want success", ph, d->CS.Status, d->CS.Length);
        d = th_send_done_must(a, nd, "the send after it");
        d = th_recv_done_must(b, rd, "the send after it");
        EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && !strcmp(rbuf, "next"), "%s: next send: 0x%x", ph,
               d->CS.Status);
        if (!write) EXPECT(memcmp(dst, c.raddr, c.len) == 0, "%s: accepted read's data", ph);
        check_memory(ph, &c, write, src);
        th_unpair(a, b, 1000);
        E.used = mark;
        return;
    }
    EXPECT((d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) ==
               (VIP_STATUS_DONE | VIP_STATUS_RDMA_PROT_ERROR | op),
           "%s: initiator status 0x%x, want DONE|RDMA_PROT_ERROR|0x%x", ph, d->CS.Status, op);
    EXPECT(d->CS.Length == 0, "%s: Length %u of a refused request", ph, d->CS.Length);
    EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS), "%s: initiator VI %s, want ERROR", ph,
           th_state_name(th_state(a)));
    EXPECT(th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS), "%s: target VI %s, want ERROR", ph,
           th_state_name(th_state(b)));
    VIP_ERROR_CODE code = write ? VIP_ERROR_RDMAW_PROT : VIP_ERROR_RDMAR_PROT;
    EXPECT(await_error(before, a, code, a, TH_WAIT_MS), "%s: no %s for the initiator VI", ph,
           write ? "VIP_ERROR_RDMAW_PROT" : "VIP_ERROR_RDMAR_PROT");
    EXPECT(await_error(before, b, code, b, TH_WAIT_MS), "%s: no %s for the target VI", ph,
           write ? "VIP_ERROR_RDMAW_PROT" : "VIP_ERROR_RDMAR_PROT");
    d = th_send_done_must(a, nd, "the send after the refused request");
    if (rel == VIP_SERVICE_RELIABLE_RECEPTION)
        EXPECT(d->CS.Status & VIP_STATUS_ERROR_MASK,
               "%s: reliable reception reported a send successful that the target never took (0x%x)", ph,
               d->CS.Status);
    d = th_recv_done_must(b, rd, "the target's receive");
    EXPECT(th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR), "%s: target's receive status 0x%x, want flushed", ph,
           d->CS.Status);
    EXPECT(strcmp(rbuf, "next") != 0, "%s: the send after the refused request was delivered", ph);
    if (!write) EXPECT(th_guard_check(dst, RL + 8) < 0, "%s: a refused read wrote local memory", ph);
    check_memory(ph, &c, write, src);
    th_set1(nd, E.mh, nbuf, 5);
    EXPECT_RC(VipPostSend(a, nd, E.mh), VIP_INVALID_STATE);
    th_unpair(a, b, 1000);
    E.used = mark;
}

static void unreliable_case(enum kind k, int imm) {
    char ph[160];
    snprintf(ph, sizeof ph, "RDMA write%s, %s, unreliable", imm ? " with immediate data" : "", kind_name[k]);
    th_phase(ph);
    rcase c = make_case(k, 1, VIP_SERVICE_UNRELIABLE);
    size_t mark = E.used;
    reset_memory();
    VIP_VI_HANDLE a = th_vi_rdma(&E, VIP_SERVICE_UNRELIABLE, c.iw, VIP_FALSE, NULL, NULL);
    VIP_VI_HANDLE b = th_vi_rdma(&E, VIP_SERVICE_UNRELIABLE, c.tw, VIP_FALSE, NULL, NULL);
    th_connect_peer(&E, a, b, "uprot");
    char *src = th_alloc(&E, RL + 8), *rbuf = th_alloc(&E, 64), *nbuf = th_alloc(&E, 64);
    th_fill(src, RL + 8, 78);
    memset(rbuf, 0, 64);
    char *rbuf2 = th_alloc(&E, 64);
    memset(rbuf2, 0, 64);
    VIP_DESCRIPTOR *sd = th_desc(&E, 2), *nd = th_desc(&E, 1), *rd = th_desc(&E, 1), *rd2 = th_desc(&E, 1);
    th_set1(rd, E.mh, rbuf, 64);
    CHECK(VipPostRecv(b, rd, E.mh));
    th_set1(rd2, E.mh, rbuf2, 64);
    CHECK(VipPostRecv(b, rd2, E.mh));
    VIP_EXT_COUNTERS c0;
    CHECK(VipExtQueryViCounters(b, &c0));
    int before = record_count();
    th_set_rdma(sd, VIP_CONTROL_OP_RDMAWRITE | (imm ? VIP_CONTROL_IMMEDIATE : 0), c.raddr, c.rmh, E.mh, src, c.len, 1);
    sd->CS.ImmediateData = 0xbad;
    CHECK(VipPostSend(a, sd, E.mh));
    VIP_DESCRIPTOR *d = th_send_done_must(a, sd, "the RDMA write");
    EXPECT((d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) ==
               (VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE),
           "%s: initiator status 0x%x, want DONE|OP_RDMA_WRITE (done once on the wire)", ph, d->CS.Status);
    /* the next send: with immediate data the refused write must not have taken rd */
    memcpy(nbuf, "next", 5);
    th_set1(nd, E.mh, nbuf, 5);
    CHECK(VipPostSend(a, nd, E.mh));
    th_send_done_must(a, nd, "the send after the write");
    d = th_recv_done_must(b, rd, "the target's receive");
    char *next_buf = rbuf;
    if (c.ok && imm) {
        /* the accepted write took rd, the send takes rd2 */
        EXPECT(d->CS.Status == (VIP_STATUS_DONE | VIP_STATUS_OP_REMOTE_RDMA_WRITE | VIP_STATUS_IMMEDIATE) &&
                   d->CS.ImmediateData == 0xbad,
               "%s: accepted write's receive status 0x%x", ph, d->CS.Status);
        d = th_recv_done_must(b, rd2, "the next send's receive");
        next_buf = rbuf2;
    }
    EXPECT((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK | VIP_STATUS_IMMEDIATE)) ==
                   VIP_STATUS_OP_RECEIVE &&
               !strcmp(next_buf, "next") && d->CS.Length == 5,
           "%s: the receive took status 0x%x length %u '%.8s', want the next send", ph, d->CS.Status, d->CS.Length,
           next_buf);
    VIP_DESCRIPTOR *x;
    if (!(c.ok && imm)) EXPECT_RC(VipRecvDone(b, &x), VIP_NOT_DONE); /* rd2 still waits */
    if (!c.ok) {
        VIP_EXT_COUNTERS c1 = th_vi_counters_at_least(b, offsetof(VIP_EXT_COUNTERS, Errors), c0.Errors + 1);
        EXPECT(c1.Errors == c0.Errors + 1, "%s: target VI Errors %llu -> %llu, want +1", ph,
               (unsigned long long)c0.Errors, (unsigned long long)c1.Errors);
    }
    check_memory(ph, &c, 1, src);
    EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "%s: states %s / %s", ph,
           th_state_name(th_state(a)), th_state_name(th_state(b)));
    for (int i = 0; i < 20; i++) VipQueryVi(b, NULL, NULL, NULL, NULL), VipQueryVi(a, NULL, NULL, NULL, NULL);
    EXPECT(record_count() == before, "%s: %d error callback calls on an unreliable VI", ph, record_count() - before);
    th_unpair(a, b, 1000);
    E.used = mark;
}

/* Initiator-side checks of an RDMA descriptor's local segments are memory protection
 * (VIP_STATUS_PROTECTION_ERROR, with the RDMA op bits), not RDMA protection. */
static VIP_DESCRIPTOR *local_bad(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)mh;
    int kind = (int)(uintptr_t)c;
    int write = kind & 1;
    char *local = th_alloc(e, 256);
    th_set_rdma(d, write ? VIP_CONTROL_OP_RDMAWRITE : VIP_CONTROL_OP_RDMAREAD, REG.p, REG.mh, e->mh, local, 100, 1);
    if (kind & 2) th_seg(d, 1)->Handle = 0x7777u;                 /* made-up local handle */
    else th_seg(d, 1)->Data.Address = e->mem + e->memsz - 50;      /* runs past the arena */
    return d;
}

/* A refused request in the middle of a burst: the target's verdict lands on the right
 * descriptor (earlier ones succeed, later ones are flushed, in post order). */
static void burst_with_refusal(VIP_RELIABILITY_LEVEL rel, int bad_is_read) {
    char ph[128];
    snprintf(ph, sizeof ph, "refused %s in the middle of a burst, %s", bad_is_read ? "read" : "write",
             th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    reset_memory();
    VIP_VI_HANDLE a, b;
    th_pair_rdma(&E, rel, &a, &b, "protburst");
    enum { N = 12, BAD = 7, LEN = 3000 };
    char *src = th_alloc(&E, (size_t)N * LEN), *dst = th_alloc(&E, (size_t)N * LEN);
    th_fill(src, (size_t)N * LEN, 99);
    VIP_DESCRIPTOR *sd[N], *rd[N];
    char *rb[N];
    int nrecv = 0;
    for (int i = 0; i < N; i++) {
        sd[i] = th_desc(&E, 2);
        if (i == BAD) {
            th_set_rdma(sd[i], bad_is_read ? VIP_CONTROL_OP_RDMAREAD : VIP_CONTROL_OP_RDMAWRITE, NONE.p, NONE.mh,
                        E.mh, (bad_is_read ? dst : src) + (size_t)i * LEN, 100, 1);
        } else if (i % 3 == 0) { /* a send */
            rd[nrecv] = th_desc(&E, 1);
            rb[nrecv] = th_alloc(&E, 64);
            th_set1(rd[nrecv], E.mh, rb[nrecv], 64);
            CHECK(VipPostRecv(b, rd[nrecv], E.mh));
            nrecv++;
            th_set1(sd[i], E.mh, src + (size_t)i * LEN, 64);
        } else if (i % 3 == 1) { /* a write */
            th_set_rdma(sd[i], VIP_CONTROL_OP_RDMAWRITE, REG.p + 200 * i, REG.mh, E.mh, src + (size_t)i * LEN, 200, 1);
        } else { /* a read */
            th_set_rdma(sd[i], VIP_CONTROL_OP_RDMAREAD, REG.p, REG.mh, E.mh, dst + (size_t)i * LEN, LEN, 1);
        }
    }
    /* (in inline mode the refusal may already have broken the VI while posting: a post
     * on a VI in the error state is refused, and what was posted is what completes) */
    int posted = 0;
    for (int i = 0; i < N; i++) {
        VIP_RETURN r = VipPostSend(a, sd[i], E.mh);
        if (r == VIP_INVALID_STATE && i > BAD) break;
        EXPECT(r == VIP_SUCCESS, "%s: post %d -> %s", ph, i, th_rs(r));
        if (r != VIP_SUCCESS) break;
        posted++;
    }
    for (int i = 0; i < posted; i++) {
        VIP_DESCRIPTOR *d = th_send_done_must(a, NULL, "burst");
        EXPECT(d == sd[i], "%s: completion %d is %p, want %p", ph, i, (void *)d, (void *)sd[i]);
        if (d != sd[i]) break;
        uint32_t err = d->CS.Status & VIP_STATUS_ERROR_MASK;
        if (i < BAD) {
            /* on reliable delivery a plain send is done once it left; the others must succeed */
            EXPECT(err == 0, "%s: descriptor %d (before the refused one) status 0x%x", ph, i, d->CS.Status);
        } else if (i == BAD) {
            EXPECT(err == VIP_STATUS_RDMA_PROT_ERROR, "%s: the refused descriptor's status 0x%x", ph, d->CS.Status);
        } else if (!(rel == VIP_SERVICE_RELIABLE_DELIVERY && i % 3 == 0)) {
            EXPECT(err == VIP_STATUS_DESC_FLUSHED_ERROR, "%s: descriptor %d (after the refused one) status 0x%x", ph,
                   i, d->CS.Status);
        }
    }
    EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS) && th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS),
           "%s: states %s / %s", ph, th_state_name(th_state(a)), th_state_name(th_state(b)));
    /* the target got the sends before the refused request, and none after it */
    int k = 0;
    for (int i = 0; i < N; i++) {
        if (i == BAD || i % 3 != 0) continue;
        VIP_DESCRIPTOR *d = th_recv_done_must(b, rd[k], "target receive");
        if (i < BAD)
            EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0, "%s: send %d's receive status 0x%x", ph, i,
                   d->CS.Status);
        else
            EXPECT(th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR), "%s: send %d (after the refusal) was received: 0x%x",
                   ph, i, d->CS.Status);
        k++;
    }
    th_unpair(a, b, 1000);
    E.used = mark;
}

int main(void) {
    th_init("rdma_protection", 0);
    th_open_env(&E, NULL, 4 << 20);
    CHECK(VipErrorCallback(E.nic, NULL, handler));
    CHECK(VipCreatePtag(E.nic, &PT2));
    RL = 4 * (uint32_t)E.na.NativeMTU + 100;
    th_region_new(&E, &REG, RL, NULL, VIP_TRUE, VIP_TRUE);
    th_region_new(&E, &NONE, 4096, NULL, VIP_FALSE, VIP_FALSE);
    th_region_new(&E, &WONLY, 4096, NULL, VIP_TRUE, VIP_FALSE);
    th_region_new(&E, &RONLY, 4096, NULL, VIP_FALSE, VIP_TRUE);
    th_region_new(&E, &OTHER, 4096, PT2, VIP_TRUE, VIP_TRUE);
    th_region_new(&E, &STALE, 4096, NULL, VIP_TRUE, VIP_TRUE);
    /* the stale handle: deregistered, and the same memory registered again */
    stale_mh = STALE.mh;
    CHECK(VipDeregisterMem(E.nic, STALE.p, STALE.mh));
    VIP_MEM_ATTRIBUTES ma = {E.ptag, VIP_TRUE, VIP_TRUE};
    CHECK(VipRegisterMem(E.nic, STALE.p, STALE.len, &ma, &STALE.mh));
    EXPECT(STALE.mh != stale_mh, "registering again gave the same handle 0x%x", stale_mh);

    for (int li = 1; li < 3; li++)
        for (int write = 1; write >= 0; write--)
            for (int k = 0; k < K_COUNT; k++) reliable_case(th_levels[li], (enum kind)k, write);
    for (int imm = 0; imm < 2; imm++)
        for (int k = 0; k < K_COUNT; k++) unreliable_case((enum kind)k, imm);

    for (int li = 1; li < 3; li++)
        for (int r = 0; r < 2; r++) burst_with_refusal(th_levels[li], r);
    for (int li = 0; li < 3; li++) {
        for (int kind = 0; kind < 4; kind++) {
            int write = kind & 1;
            if (!write && th_levels[li] == VIP_SERVICE_UNRELIABLE) continue;
            char what[96];
            snprintf(what, sizeof what, "RDMA %s with a %s local segment", write ? "write" : "read",
                     kind & 2 ? "made-up handle on its" : "out-of-region");
            /* the pair th_bad_case makes has no RDMA attributes: the local check comes first */
            th_bad_case_op(&E, th_levels[li], 0, local_bad, (void *)(uintptr_t)kind, VIP_STATUS_PROTECTION_ERROR,
                           write ? VIP_STATUS_OP_RDMA_WRITE : VIP_STATUS_OP_RDMA_READ, what);
        }
    }
    th_nic_healthy(&E);
    for (size_t i = 0; i < sizeof ALL / sizeof *ALL; i++) th_region_free(ALL[i]);
    th_close_env(&E);
    return th_result();
}
