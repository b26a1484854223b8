/*
 * atomics: NIC atomics (VIP_EXT_CONTROL_OP_ATOMIC, docs/offloads.md) on both reliable
 * levels.
 *
 * Fetch-add returns the old value into the local result buffer and adds (wrapping at
 * 2^64); compare-and-swap stores the swap value only when the word equals the compare
 * value and returns the old value either way. Each completes with DONE |
 * VIP_EXT_STATUS_OP_ATOMIC and Length 8, in post order with sends, RDMA writes and
 * reads around it (a burst of 200 atomics, more than a retransmission window, mixed
 * with them; a read with QFENCE sees every atomic posted before it); the bytes around
 * the word and the target's receive queue are not touched.
 *
 * Refused at the target, completing with VIP_STATUS_RDMA_PROT_ERROR | OP_ATOMIC and
 * both VIs in VIP_STATE_ERROR, the word unchanged: a region not opened to atomics (and
 * one opened, then closed again), a word outside the region, a region of another
 * protection tag, a stale handle, a target VI without EnableRdmaWrite. Refused at the
 * initiator: a misaligned word (FORMAT_ERROR), a result buffer that is not 8 bytes
 * (LENGTH_ERROR), a result buffer outside registered memory (PROTECTION_ERROR), the
 * wrong segment count, immediate data, an offload op nobody serves (FORMAT_ERROR);
 * an unreliable VI (FORMAT_ERROR, and the VI stays connected). VipExtSetMemAtomics
 * answers bad arguments with VIP_INVALID_PARAMETER; VipExtQueryAtomicCounters counts
 * what the target applied and refused.
 */
#include "helpers.h"

#define OP_STATUS(d) ((d)->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK))

static th_env E;
static th_region T;     /* the target words: RDMA write, atomics enabled */
static th_region NOAT;  /* RDMA write, atomics never enabled */
static th_region OTHER; /* another ptag, atomics enabled */
static VIP_PROTECTION_HANDLE PT2;

static VIP_EXT_ATOMIC_DESCRIPTOR *atomic_desc(void) {
    VIP_EXT_ATOMIC_DESCRIPTOR *d = th_alloc(&E, sizeof *d);
    memset(d, 0, sizeof *d);
    return d;
}

static void set_atomic(VIP_EXT_ATOMIC_DESCRIPTOR *d, VIP_UINT16 which, void *raddr, VIP_MEM_HANDLE rmh,
                       uint64_t operand, uint64_t swap, uint64_t *result) {
    memset(d, 0, sizeof *d);
    d->CS.Control = VIP_EXT_CONTROL_OP_ATOMIC | which;
    d->CS.SegCount = 3;
    d->Remote.Data.Address = raddr;
    d->Remote.Handle = rmh;
    d->Args.Operand = operand;
    d->Args.Swap = swap;
    d->Result.Data.Address = result;
    d->Result.Handle = E.mh;
    d->Result.Length = 8;
}

/* Posts d on a and waits for it; returns it. */
static VIP_EXT_ATOMIC_DESCRIPTOR *run(VIP_VI_HANDLE a, VIP_EXT_ATOMIC_DESCRIPTOR *d, const char *what) {
    CHECK(VipPostSend(a, (VIP_DESCRIPTOR *)d, E.mh));
    return (VIP_EXT_ATOMIC_DESCRIPTOR *)th_send_done_must(a, (VIP_DESCRIPTOR *)d, what);
}

static void pair(VIP_RELIABILITY_LEVEL rel, VIP_VI_HANDLE *a, VIP_VI_HANDLE *b, VIP_BOOLEAN target_rdmaw,
                 const char *tag) {
    VIP_BOOLEAN rd = rel != VIP_SERVICE_UNRELIABLE;
    *a = th_vi_rdma(&E, rel, VIP_TRUE, rd, NULL, NULL);
    *b = th_vi_rdma(&E, rel, target_rdmaw, rd, NULL, NULL);
    th_connect_peer(&E, *a, *b, tag);
}

static void basics(VIP_RELIABILITY_LEVEL rel) {
    char ph[96];
    snprintf(ph, sizeof ph, "fetch-add and compare-and-swap, %s", th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    pair(rel, &a, &b, VIP_TRUE, "at.basic");
    memset(T.p, 0x5A, T.len);
    uint64_t *w = (uint64_t *)(T.p + 64);
    *w = 1000;
    /* a receive at the target that atomics must leave alone */
    VIP_DESCRIPTOR *rd = th_desc(&E, 1);
    char *rbuf = th_alloc(&E, 64);
    th_set1(rd, E.mh, rbuf, 64);
    CHECK(VipPostRecv(b, rd, E.mh));

    uint64_t *res = th_alloc(&E, 8);
    VIP_EXT_ATOMIC_DESCRIPTOR *d = atomic_desc();
    const uint64_t adds[] = {1, 41, 0, UINT64_MAX /* -1 */, (uint64_t)1 << 63};
    uint64_t expect = 1000;
    for (unsigned i = 0; i < sizeof adds / sizeof adds[0]; i++) {
        *res = 0xDEADBEEF;
        set_atomic(d, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, w, T.mh, adds[i], 0, res);
        run(a, d, "fetch-add");
        EXPECT(OP_STATUS(d) == (VIP_STATUS_DONE | VIP_EXT_STATUS_OP_ATOMIC), "%s: add %u: status 0x%x", ph, i,
               d->CS.Status);
        EXPECT(d->CS.Length == 8, "%s: add %u: Length %u", ph, i, d->CS.Length);
        EXPECT(*res == expect, "%s: add %u: old value %llu, want %llu", ph, i, (unsigned long long)*res,
               (unsigned long long)expect);
        expect += adds[i];
        EXPECT(*w == expect, "%s: add %u: word %llu, want %llu", ph, i, (unsigned long long)*w,
               (unsigned long long)expect);
    }
    /* compare-and-swap: a miss changes nothing, a hit stores */
    *res = 0;
    set_atomic(d, VIP_EXT_CONTROL_ATOMIC_CMP_SWAP, w, T.mh, expect + 1, 7, res);
    run(a, d, "compare-and-swap (miss)");
    EXPECT(OP_STATUS(d) == (VIP_STATUS_DONE | VIP_EXT_STATUS_OP_ATOMIC) && *res == expect && *w == expect,
           "%s: CAS miss: status 0x%x old %llu word %llu", ph, d->CS.Status, (unsigned long long)*res,
           (unsigned long long)*w);
    set_atomic(d, VIP_EXT_CONTROL_ATOMIC_CMP_SWAP, w, T.mh, expect, 7, res);
    run(a, d, "compare-and-swap (hit)");
    EXPECT(OP_STATUS(d) == (VIP_STATUS_DONE | VIP_EXT_STATUS_OP_ATOMIC) && *res == expect && *w == 7,
           "%s: CAS hit: status 0x%x old %llu word %llu", ph, d->CS.Status, (unsigned long long)*res,
           (unsigned long long)*w);
    /* the first and last word of the region work too; nothing else changed */
    uint64_t *first = (uint64_t *)T.p, *last = (uint64_t *)(T.p + T.len - 8);
    uint64_t f0 = *first, l0 = *last;
    set_atomic(d, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, first, T.mh, 3, 0, res);
    run(a, d, "fetch-add on the first word");
    EXPECT(OP_STATUS(d) == (VIP_STATUS_DONE | VIP_EXT_STATUS_OP_ATOMIC) && *first == f0 + 3, "%s: first word", ph);
    set_atomic(d, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, last, T.mh, 5, 0, res);
    run(a, d, "fetch-add on the last word");
    EXPECT(OP_STATUS(d) == (VIP_STATUS_DONE | VIP_EXT_STATUS_OP_ATOMIC) && *last == l0 + 5, "%s: last word", ph);
    for (size_t i = 8; i < T.len - 8; i++)
        if (i < 64 || i >= 72) {
            if ((uint8_t)T.p[i] != 0x5A) {
                EXPECT(0, "%s: byte %zu of the target region changed", ph, i);
                break;
            }
        }
    EXPECT(th_guard_check(T.base, TH_GUARD) < 0 && th_guard_check(T.p + T.len, TH_GUARD) < 0,
           "%s: guard bytes around the target region changed", ph);
    VIP_DESCRIPTOR *x;
    EXPECT_RC(VipRecvDone(b, &x), VIP_NOT_DONE);
    EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED, "%s: states %s / %s", ph,
           th_state_name(th_state(a)), th_state_name(th_state(b)));
    th_unpair(a, b, 2000);
    E.used = mark;
}

/* 200 atomics posted at once, every fifth followed by a send, an RDMA write or a fenced
 * RDMA read of the word: all complete in post order; each atomic saw the ones before it. */
static void burst(VIP_RELIABILITY_LEVEL rel) {
    enum { N = 200 };
    char ph[96];
    snprintf(ph, sizeof ph, "burst of %d atomics mixed with sends, writes and fenced reads, %s", N, th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    pair(rel, &a, &b, VIP_TRUE, "at.burst");
    uint64_t *w = (uint64_t *)(T.p + 128);
    uint64_t *wbuf = (uint64_t *)(T.p + 256); /* where the RDMA writes go */
    *w = 0;
    enum { SENDS = N / 5 };
    VIP_DESCRIPTOR *rds[SENDS];
    char *rbuf = th_alloc(&E, SENDS * 16);
    for (int i = 0; i < SENDS; i++) {
        rds[i] = th_desc(&E, 1);
        th_set1(rds[i], E.mh, rbuf + i * 16, 16);
        CHECK(VipPostRecv(b, rds[i], E.mh));
    }
    uint64_t *res = th_alloc(&E, N * 8);
    uint64_t *readback = th_alloc(&E, N * 8);
    char *sbuf = th_alloc(&E, N * 16);
    VIP_DESCRIPTOR *posted[2 * N];
    int kinds[2 * N], np = 0, sends = 0;
    for (int i = 0; i < N; i++) {
        VIP_EXT_ATOMIC_DESCRIPTOR *d = atomic_desc();
        set_atomic(d, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, w, T.mh, 1, 0, &res[i]);
        CHECK(VipPostSend(a, (VIP_DESCRIPTOR *)d, E.mh));
        posted[np] = (VIP_DESCRIPTOR *)d;
        kinds[np++] = 0;
        if (i % 5 != 4) continue;
        VIP_DESCRIPTOR *o = th_desc(&E, 2);
        switch ((i / 5) % 3) {
            case 0:
                snprintf(sbuf + i * 16, 16, "m%d", i);
                th_set1(o, E.mh, sbuf + i * 16, 16);
                kinds[np] = 1;
                break;
            case 1:
                readback[i] = (uint64_t)i;
                th_set_rdma(o, VIP_CONTROL_OP_RDMAWRITE, wbuf, T.mh, E.mh, &readback[i], 8, 1);
                kinds[np] = 2;
                break;
            default:
                readback[i] = UINT64_MAX;
                th_set_rdma(o, VIP_CONTROL_OP_RDMAREAD, w, T.mh, E.mh, &readback[i], 8, 1);
                o->CS.Control |= VIP_CONTROL_QFENCE;
                kinds[np] = 3 + i; /* the read after atomic i sees i + 1 */
                break;
        }
        if (kinds[np] == 1) {
            /* sends take the receives in order; only SENDS of them */
            if (sends >= SENDS) continue;
            sends++;
        }
        CHECK(VipPostSend(a, o, E.mh));
        posted[np++] = o;
    }
    for (int k = 0; k < np; k++) {
        VIP_DESCRIPTOR *d = th_send_done_must(a, posted[k], "burst completion");
        EXPECT((d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK)) == VIP_STATUS_DONE,
               "%s: completion %d (kind %d): status 0x%x", ph, k, kinds[k], d->CS.Status);
        if (kinds[k] >= 3) {
            /* The fence makes the read wait for every atomic before it; atomics after it
             * carry no fence, so the target may apply some of them before it serves the
             * read (as on RDMA NICs: a request after a read waits for it only with QFENCE). */
            uint64_t want = (uint64_t)(kinds[k] - 3) + 1, got = readback[kinds[k] - 3];
            EXPECT(got >= want && got <= N, "%s: fenced read after atomic %d saw %llu, want %llu..%d", ph,
                   kinds[k] - 3, (unsigned long long)got, (unsigned long long)want, N);
        }
    }
    for (int i = 0; i < N; i++)
        if (res[i] != (uint64_t)i) {
            EXPECT(0, "%s: atomic %d returned %llu, want %d", ph, i, (unsigned long long)res[i], i);
            break;
        }
    EXPECT(*w == N, "%s: word %llu, want %d", ph, (unsigned long long)*w, N);
    for (int i = 0; i < sends; i++) th_recv_done_must(b, rds[i], "burst receive");
    th_unpair(a, b, 2000);
    E.used = mark;
}

/* A request the target refuses: RDMA_PROT_ERROR | OP_ATOMIC, both VIs in error, the word
 * unchanged. */
static void refused_at_target(VIP_RELIABILITY_LEVEL rel, const char *what, void *raddr, VIP_MEM_HANDLE rmh,
                              VIP_BOOLEAN target_rdmaw) {
    char ph[160];
    snprintf(ph, sizeof ph, "refused at the target: %s, %s", what, th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_EXT_ATOMIC_COUNTERS c0, c1;
    CHECK(VipExtQueryAtomicCounters(E.nic, &c0));
    VIP_VI_HANDLE a, b;
    pair(rel, &a, &b, target_rdmaw, "at.refuse");
    uint64_t before = 0;
    int readable = raddr && ((char *)raddr >= T.base && (char *)raddr + 8 <= T.p + T.len + TH_GUARD);
    if (readable) memcpy(&before, raddr, 8);
    uint64_t *res = th_alloc(&E, 8);
    *res = 12345;
    VIP_EXT_ATOMIC_DESCRIPTOR *d = atomic_desc();
    set_atomic(d, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, raddr, rmh, 1, 0, res);
    run(a, d, ph);
    EXPECT(OP_STATUS(d) == (VIP_STATUS_DONE | VIP_STATUS_RDMA_PROT_ERROR | VIP_EXT_STATUS_OP_ATOMIC),
           "%s: status 0x%x, want DONE|RDMA_PROT_ERROR|OP_ATOMIC", ph, d->CS.Status);
    EXPECT(d->CS.Length == 0 && *res == 12345, "%s: Length %u, result buffer %llu", ph, d->CS.Length,
           (unsigned long long)*res);
    if (readable) {
        uint64_t after;
        memcpy(&after, raddr, 8);
        EXPECT(after == before, "%s: the word changed", ph);
    }
    EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS) && th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS),
           "%s: states %s / %s, want ERROR / ERROR", ph, th_state_name(th_state(a)), th_state_name(th_state(b)));
    CHECK(VipExtQueryAtomicCounters(E.nic, &c1));
    EXPECT(c1.Refused == c0.Refused + 1 && c1.Applied == c0.Applied, "%s: counters refused %llu -> %llu", ph,
           (unsigned long long)c0.Refused, (unsigned long long)c1.Refused);
    th_unpair(a, b, 2000);
    E.used = mark;
}

typedef void (*mangle_fn)(VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *res);
static void m_misaligned(VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *res) {
    (void)res;
    d->Remote.Data.Address = T.p + 68;
}
static void m_result_len(VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *res) {
    (void)res;
    d->Result.Length = 4;
}
static void m_result_unregistered(VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *res) {
    (void)res;
    d->Result.Data.Address = E.mem + E.memsz; /* just past the arena */
}
static void m_segcount(VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *res) {
    (void)res;
    d->CS.SegCount = 2;
}
static void m_immediate(VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *res) {
    (void)res;
    d->CS.Control |= VIP_CONTROL_IMMEDIATE;
}
static void m_unknown_op(VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *res) {
    (void)res;
    d->CS.Control = VIP_EXT_CONTROL_OP_ATOMIC | 0x00F0;
}
static void m_no_op(VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *res) {
    (void)res;
    d->CS.Control = VIP_EXT_CONTROL_OP_ATOMIC;
}

/* A descriptor the initiator refuses before anything goes on the wire. want: the error
 * and op bits (an offload op nobody serves names no operation: OP_SEND's 0). */
static void refused_at_initiator(VIP_RELIABILITY_LEVEL rel, const char *what, mangle_fn mangle, uint32_t want) {
    char ph[160];
    snprintf(ph, sizeof ph, "refused at the initiator: %s, %s", what, th_rel_name(rel));
    th_phase(ph);
    size_t mark = E.used;
    VIP_VI_HANDLE a, b;
    pair(rel, &a, &b, VIP_TRUE, "at.local");
    uint64_t *w = (uint64_t *)(T.p + 64);
    *w = 77;
    uint64_t *res = th_alloc(&E, 8);
    *res = 4242;
    VIP_EXT_ATOMIC_DESCRIPTOR *d = atomic_desc();
    set_atomic(d, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, w, T.mh, 1, 0, res);
    mangle(d, res);
    run(a, d, ph);
    EXPECT(OP_STATUS(d) == (VIP_STATUS_DONE | want), "%s: status 0x%x, want 0x%x", ph, d->CS.Status,
           VIP_STATUS_DONE | want);
    EXPECT(*w == 77 && *res == 4242, "%s: word %llu result %llu changed", ph, (unsigned long long)*w,
           (unsigned long long)*res);
    if (rel == VIP_SERVICE_UNRELIABLE) {
        EXPECT(th_state(a) == VIP_STATE_CONNECTED, "%s: the unreliable VI is %s", ph, th_state_name(th_state(a)));
    } else {
        EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS), "%s: a reliable VI stays %s after a descriptor error",
               ph, th_state_name(th_state(a)));
    }
    th_unpair(a, b, 2000);
    E.used = mark;
}

static void mem_atomics_api(void) {
    th_phase("VipExtSetMemAtomics arguments");
    EXPECT_RC(VipExtSetMemAtomics(NULL, T.p, T.mh, VIP_TRUE), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtSetMemAtomics(E.nic, T.p + 8, T.mh, VIP_TRUE), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtSetMemAtomics(E.nic, T.p, 0, VIP_TRUE), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtSetMemAtomics(E.nic, T.p, T.mh ^ 0x10000u, VIP_TRUE), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtQueryAtomicCounters(E.nic, NULL), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtQueryAtomicCounters(NULL, NULL), VIP_INVALID_PARAMETER);
    /* read-only memory cannot be opened to atomics */
    char *ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ro == MAP_FAILED) FATAL("mmap");
    VIP_MEM_ATTRIBUTES ma = {E.ptag, VIP_FALSE, VIP_FALSE};
    VIP_MEM_HANDLE romh;
    CHECK(VipRegisterMem(E.nic, ro, 4096, &ma, &romh));
    if (mprotect(ro, 4096, PROT_READ) != 0) FATAL("mprotect");
    EXPECT_RC(VipExtSetMemAtomics(E.nic, ro, romh, VIP_TRUE), VIP_INVALID_PARAMETER);
    EXPECT_RC(VipExtSetMemAtomics(E.nic, ro, romh, VIP_FALSE), VIP_SUCCESS);
    CHECK(VipDeregisterMem(E.nic, ro, romh));
    munmap(ro, 4096);
}

int main(void) {
    th_init("atomics", 0);
    th_open_env(&E, NULL, 4 << 20);
    CHECK(VipCreatePtag(E.nic, &PT2));
    th_region_new(&E, &T, 4096, NULL, VIP_TRUE, VIP_TRUE);
    CHECK(VipExtSetMemAtomics(E.nic, T.p, T.mh, VIP_TRUE));
    th_region_new(&E, &NOAT, 4096, NULL, VIP_TRUE, VIP_TRUE);
    th_region_new(&E, &OTHER, 4096, PT2, VIP_TRUE, VIP_TRUE);
    CHECK(VipExtSetMemAtomics(E.nic, OTHER.p, OTHER.mh, VIP_TRUE));
    mem_atomics_api();

    for (int li = 1; li < 3; li++) {
        VIP_RELIABILITY_LEVEL rel = th_levels[li];
        basics(rel);
        burst(rel);
        refused_at_target(rel, "region not opened to atomics", NOAT.p, NOAT.mh, VIP_TRUE);
        refused_at_target(rel, "word past the region's end", T.p + T.len, T.mh, VIP_TRUE);
        refused_at_target(rel, "word before the region", T.p - 8, T.mh, VIP_TRUE);
        refused_at_target(rel, "region of another protection tag", OTHER.p, OTHER.mh, VIP_TRUE);
        refused_at_target(rel, "made-up handle", T.p, T.mh ^ 0x7770000u, VIP_TRUE);
        refused_at_target(rel, "target VI without EnableRdmaWrite", T.p, T.mh, VIP_FALSE);
        refused_at_initiator(rel, "misaligned word", m_misaligned, VIP_STATUS_FORMAT_ERROR | VIP_EXT_STATUS_OP_ATOMIC);
        refused_at_initiator(rel, "4-byte result buffer", m_result_len, VIP_STATUS_LENGTH_ERROR | VIP_EXT_STATUS_OP_ATOMIC);
        refused_at_initiator(rel, "unregistered result buffer", m_result_unregistered,
                             VIP_STATUS_PROTECTION_ERROR | VIP_EXT_STATUS_OP_ATOMIC);
        refused_at_initiator(rel, "two segments", m_segcount, VIP_STATUS_FORMAT_ERROR | VIP_EXT_STATUS_OP_ATOMIC);
        refused_at_initiator(rel, "immediate data", m_immediate, VIP_STATUS_FORMAT_ERROR | VIP_EXT_STATUS_OP_ATOMIC);
        refused_at_initiator(rel, "offload op nobody serves", m_unknown_op, VIP_STATUS_FORMAT_ERROR);
        refused_at_initiator(rel, "offload op 0", m_no_op, VIP_STATUS_FORMAT_ERROR);
    }
    refused_at_initiator(VIP_SERVICE_UNRELIABLE, "offload op 0 on an unreliable VI", m_no_op, VIP_STATUS_FORMAT_ERROR);
    {
        /* closed again: refused like a region never opened */
        CHECK(VipExtSetMemAtomics(E.nic, T.p, T.mh, VIP_FALSE));
        refused_at_target(VIP_SERVICE_RELIABLE_DELIVERY, "region closed to atomics again", T.p, T.mh, VIP_TRUE);
        CHECK(VipExtSetMemAtomics(E.nic, T.p, T.mh, VIP_TRUE));
        /* a stale handle: deregistered (the region index may be taken again) */
        th_region S;
        th_region_new(&E, &S, 4096, NULL, VIP_TRUE, VIP_TRUE);
        CHECK(VipExtSetMemAtomics(E.nic, S.p, S.mh, VIP_TRUE));
        VIP_MEM_HANDLE stale = S.mh;
        CHECK(VipDeregisterMem(E.nic, S.p, S.mh));
        VIP_MEM_ATTRIBUTES ma = {E.ptag, VIP_TRUE, VIP_TRUE};
        CHECK(VipRegisterMem(E.nic, S.p, S.len, &ma, &S.mh));
        refused_at_target(VIP_SERVICE_RELIABLE_RECEPTION, "stale handle", S.p, stale, VIP_TRUE);
        refused_at_target(VIP_SERVICE_RELIABLE_RECEPTION, "registered again, not opened", S.p, S.mh, VIP_TRUE);
        th_region_free(&S);
    }
    {
        th_phase("unreliable VI: fetch-add is a format error");
        size_t mark = E.used;
        VIP_VI_HANDLE a, b;
        pair(VIP_SERVICE_UNRELIABLE, &a, &b, VIP_TRUE, "at.unrel");
        uint64_t *w = (uint64_t *)(T.p + 64), *res = th_alloc(&E, 8);
        *w = 5;
        VIP_EXT_ATOMIC_DESCRIPTOR *d = atomic_desc();
        set_atomic(d, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, w, T.mh, 1, 0, res);
        run(a, d, "unreliable fetch-add");
        EXPECT(OP_STATUS(d) == (VIP_STATUS_DONE | VIP_STATUS_FORMAT_ERROR | VIP_EXT_STATUS_OP_ATOMIC) && *w == 5,
               "unreliable fetch-add: status 0x%x word %llu", d->CS.Status, (unsigned long long)*w);
        EXPECT(th_state(a) == VIP_STATE_CONNECTED, "unreliable VI is %s", th_state_name(th_state(a)));
        th_unpair(a, b, 2000);
        E.used = mark;
    }
    th_region_free(&T);
    th_region_free(&NOAT);
    th_region_free(&OTHER);
    th_close_env(&E);
    return th_result();
}
