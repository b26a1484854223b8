/*
 * mp_atomics: NIC atomics across processes (docs/offloads.md), run by the launcher:
 *   softvia-run -n N mp_atomics --op fadd|lock [--iters K] [--window W] [--rel RD|RR]
 *                               [--progress inline|thread] [--expect-replays]
 *                               [--nicmem [--expect-shortcut | --expect-no-shortcut]] [--now]
 *
 * Rank 0 owns the words; every other rank reaches them through its own reliable VI.
 *   fadd: every rank adds 1 to one counter K times: ranks > 0 with NIC fetch-adds (W in
 *         flight), rank 0 meanwhile with its own locked adds on the same word. The old
 *         values a rank sees rise strictly (the target applies a VI's requests in
 *         order), and the counter ends at exactly N * K.
 *   lock: a lock word taken with compare-and-swap guards a plain counter that every
 *         rank increments K times without atomics: ranks > 0 take the lock with NIC
 *         CAS, read the counter with RDMA read, write it back plus one with RDMA write,
 *         and release with NIC CAS (the write and the release go together: the target
 *         applies them in order); rank 0 takes the same lock with its own CAS. The
 *         counter ends at exactly N * K, the lock free.
 * Under the fault injector (SOFTVIA_FAULTS: drop, dup, reorder) the same must hold: a
 * retransmitted atomic is answered from the target's record, never applied twice;
 * --expect-replays also requires that this happened at least once (it shows the run
 * tested what it claims to).
 * --nicmem: rank 0's words are memory its NIC allocated (VipExtAllocMem): on one host the
 * initiators' NICs then apply most atomics themselves under rank 0's grant, beside rank
 * 0's NIC and rank 0's own CPU; the sums must stay exact, and every atomic is counted
 * once, by rank 0's NIC (applied) or an initiator's (shortcut). --expect-shortcut: the
 * shortcut must have served some (an shm wire); --expect-no-shortcut: none (a network).
 * --now: ranks > 0 apply each atomic with VipExtAtomicNow where it can, one at a time,
 * and post it as a descriptor when that answers VIP_NOT_DONE; with --expect-shortcut it
 * must have applied some, with --expect-no-shortcut none.
 */
#include "mp_common.h"

#define OP_STATUS(d) ((d)->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK))
enum { MAXW = 64, COUNTER = 0, LOCK = 1, PLAIN = 2 };

static th_env E;
static th_region W;  /* rank 0: the words */
static int nicmem;   /* --nicmem: W is memory of VipExtAllocMem */
static struct {
    uint64_t addr;
    uint32_t mh, pad;
} target;  /* rank 0's words, as every rank learns them */

static void set_atomic(VIP_EXT_ATOMIC_DESCRIPTOR *d, VIP_UINT16 which, int word, uint64_t operand, uint64_t swap,
                       uint64_t *result) {
    memset(d, 0, sizeof *d);
    d->CS.Control = VIP_EXT_CONTROL_OP_ATOMIC | which;
    d->CS.SegCount = 3;
    d->Remote.Data.Address = (void *)(uintptr_t)(target.addr + 8 * (uint64_t)word);
    d->Remote.Handle = target.mh;
    d->Args.Operand = operand;
    d->Args.Swap = swap;
    d->Result.Data.Address = result;
    d->Result.Handle = E.mh;
    d->Result.Length = 8;
}

static VIP_DESCRIPTOR *done_must(VIP_VI_HANDLE vi, VIP_DESCRIPTOR *want, uint32_t status, const char *what) {
    VIP_DESCRIPTOR *d = th_send_done_must(vi, want, what);
    if (OP_STATUS(d) != status) FATAL("%s: status 0x%x, want 0x%x", what, d->CS.Status, status);
    return d;
}

static int use_now;            /* --now */
static uint64_t now_applied;   /* ranks > 0: atomics VipExtAtomicNow applied */

/* One atomic on word, waited for: VipExtAtomicNow (--now), else descriptor d. */
static void atomic_one(VIP_VI_HANDLE vi, VIP_EXT_ATOMIC_DESCRIPTOR *d, VIP_UINT16 which, int word, uint64_t operand,
                       uint64_t swap, uint64_t *old, const char *what) {
    if (use_now) {
        VIP_RETURN rc = VipExtAtomicNow(vi, which, target.mh, target.addr + 8 * (uint64_t)word, operand, swap, old);
        if (rc == VIP_SUCCESS) {
            now_applied++;
            return;
        }
        if (rc != VIP_NOT_DONE) FATAL("%s: VipExtAtomicNow: %s", what, th_rs(rc));
    }
    set_atomic(d, which, word, operand, swap, old);
    CHECK(VipPostSend(vi, (VIP_DESCRIPTOR *)d, E.mh));
    done_must(vi, (VIP_DESCRIPTOR *)d, VIP_STATUS_DONE | VIP_EXT_STATUS_OP_ATOMIC, what);
}

/* Ranks > 0, fadd with --now: K fetch-adds of 1, one at a time. */
static void fadd_now_initiator(VIP_VI_HANDLE vi, int iters) {
    VIP_EXT_ATOMIC_DESCRIPTOR *d = th_alloc(&E, sizeof *d);
    uint64_t *res = th_alloc(&E, 8), last = 0;
    for (int i = 0; i < iters; i++) {
        atomic_one(vi, d, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, COUNTER, 1, 0, res, "fetch-add");
        if ((i > 0 && *res <= last) || *res >= (uint64_t)iters * (uint64_t)mp_size)
            FATAL("fetch-add %d returned %llu after %llu: not rising, or past the final sum", i,
                  (unsigned long long)*res, (unsigned long long)last);
        last = *res;
    }
}

/* Ranks > 0, fadd: K fetch-adds of 1, W in flight. */
static void fadd_initiator(VIP_VI_HANDLE vi, int iters, int window) {
    VIP_EXT_ATOMIC_DESCRIPTOR *d[MAXW];
    uint64_t *res = th_alloc(&E, MAXW * 8);
    for (int i = 0; i < window; i++) d[i] = th_alloc(&E, sizeof *d[i]);
    int posted = 0, done = 0;
    uint64_t last = 0;
    int have_last = 0;
    while (done < iters) {
        while (posted < iters && posted - done < window) {
            int s = posted % window;
            set_atomic(d[s], VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, COUNTER, 1, 0, &res[s]);
            CHECK(VipPostSend(vi, (VIP_DESCRIPTOR *)d[s], E.mh));
            posted++;
        }
        int s = done % window;
        done_must(vi, (VIP_DESCRIPTOR *)d[s], VIP_STATUS_DONE | VIP_EXT_STATUS_OP_ATOMIC, "fetch-add");
        if (have_last && res[s] <= last)
            FATAL("fetch-add %d returned %llu after %llu: not rising", done, (unsigned long long)res[s],
                  (unsigned long long)last);
        if (res[s] >= (uint64_t)iters * (uint64_t)mp_size)
            FATAL("fetch-add %d returned %llu, past the final sum", done, (unsigned long long)res[s]);
        last = res[s];
        have_last = 1;
        done++;
    }
}

/* Ranks > 0, lock: K increments of the plain counter under the lock. */
static void lock_initiator(VIP_VI_HANDLE vi, int iters) {
    VIP_EXT_ATOMIC_DESCRIPTOR *acq = th_alloc(&E, sizeof *acq), *rel = th_alloc(&E, sizeof *rel);
    VIP_DESCRIPTOR *rd = th_desc(&E, 2), *wr = th_desc(&E, 2);
    uint64_t *old = th_alloc(&E, 8), *old2 = th_alloc(&E, 8), *val = th_alloc(&E, 8);
    const uint64_t me = (uint64_t)mp_rank;
    void *plain = (void *)(uintptr_t)(target.addr + 8 * PLAIN);
    for (int i = 0; i < iters; i++) {
        for (unsigned spins = 0;; spins++) {
            atomic_one(vi, acq, VIP_EXT_CONTROL_ATOMIC_CMP_SWAP, LOCK, 0, me, old, "acquire");
            if (*old == 0) break;
            if (*old > (uint64_t)mp_size && *old != 1000) FATAL("lock word holds %llu", (unsigned long long)*old);
            if (spins % 8 == 7) sched_yield();  /* 2 cores: let the holder run */
        }
        th_set_rdma(rd, VIP_CONTROL_OP_RDMAREAD, plain, target.mh, E.mh, val, 8, 1);
        CHECK(VipPostSend(vi, rd, E.mh));
        done_must(vi, rd, VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ, "read");
        (*val)++;
        th_set_rdma(wr, VIP_CONTROL_OP_RDMAWRITE, plain, target.mh, E.mh, val, 8, 1);
        CHECK(VipPostSend(vi, wr, E.mh));
        if (use_now) { /* the release once the write completed (a Done call takes them in order) */
            done_must(vi, wr, VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE, "write");
            atomic_one(vi, rel, VIP_EXT_CONTROL_ATOMIC_CMP_SWAP, LOCK, me, 0, old2, "release");
        } else {
            set_atomic(rel, VIP_EXT_CONTROL_ATOMIC_CMP_SWAP, LOCK, me, 0, old2);
            CHECK(VipPostSend(vi, (VIP_DESCRIPTOR *)rel, E.mh));
            done_must(vi, wr, VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE, "write");
            done_must(vi, (VIP_DESCRIPTOR *)rel, VIP_STATUS_DONE | VIP_EXT_STATUS_OP_ATOMIC, "release");
        }
        if (*old2 != me) FATAL("release: the lock held %llu, not us (%llu)", (unsigned long long)*old2,
                               (unsigned long long)me);
    }
}

static void step(void) {
    VipExtProgress(E.nic);
}

/* Rank 0 at the final barrier: its NIC still answers (inline progress has no thread of
 * its own), so a done message whose ACK was lost is acknowledged when it comes again. */
static volatile int leaving;
static void *stepper(void *arg) {
    (void)arg;
    while (!__atomic_load_n(&leaving, __ATOMIC_ACQUIRE)) {
        step();
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *op = "fadd", *progress = "inline", *rel_s = "RD";
    int iters = 100000, window = 16, expect_replays = 0, expect_shortcut = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--op") && i + 1 < argc) op = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--window") && i + 1 < argc) window = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rel") && i + 1 < argc) rel_s = argv[++i];
        else if (!strcmp(argv[i], "--progress") && i + 1 < argc) progress = argv[++i];
        else if (!strcmp(argv[i], "--expect-replays")) expect_replays = 1;
        else if (!strcmp(argv[i], "--nicmem")) nicmem = 1;
        else if (!strcmp(argv[i], "--expect-shortcut")) expect_shortcut = 1;
        else if (!strcmp(argv[i], "--expect-no-shortcut")) expect_shortcut = -1;
        else if (!strcmp(argv[i], "--now")) use_now = 1;
        else FATAL("unknown argument '%s'", argv[i]);
    }
    const int lock = !strcmp(op, "lock");
    if (!lock && strcmp(op, "fadd")) FATAL("--op must be fadd or lock, not '%s'", op);
    if (iters <= 0 || window <= 0 || window > MAXW) FATAL("--iters must be > 0 and --window 1..%d", MAXW);
    VIP_RELIABILITY_LEVEL rel = mp_rel(rel_s);
    if (rel == VIP_SERVICE_UNRELIABLE) FATAL("atomics need a reliable level (RD or RR)");
    mp_init("mp_atomics", 0, 110);
    if (mp_size > 64) FATAL("at most 64 ranks");
    mp_open(&E, progress, 1 << 20);
    mp_log_errors(&E);
    if (mp_rank == 0 && nicmem) {
        VIP_MEM_ATTRIBUTES ma = {E.ptag, VIP_TRUE, VIP_TRUE};
        CHECK(VipExtAllocMem(E.nic, 4096, (VIP_PVOID *)&W.p));
        W.len = 4096;
        W.nic = E.nic;
        CHECK(VipRegisterMem(E.nic, W.p, W.len, &ma, &W.mh));
        CHECK(VipExtSetMemAtomics(E.nic, W.p, W.mh, VIP_TRUE));
        target.addr = (uint64_t)(uintptr_t)W.p;
        target.mh = W.mh;
    } else if (mp_rank == 0) {
        th_region_new(&E, &W, 4096, NULL, VIP_TRUE, VIP_TRUE);
        memset(W.p, 0, W.len);
        CHECK(VipExtSetMemAtomics(E.nic, W.p, W.mh, VIP_TRUE));
        target.addr = (uint64_t)(uintptr_t)W.p;
        target.mh = W.mh;
    }
    mp_addrs ad;
    mp_exchange(&E, &ad);
    mp_from_rank(0, &target, sizeof target);
    /* rank 0: a VI to every other rank, each with a receive for its "done"; the others:
     * one VI to rank 0 */
    VIP_VI_HANDLE vi[64] = {0};
    VIP_DESCRIPTOR *rdone[64] = {0};
    uint64_t *dbuf = th_alloc(&E, 64 * 8);
    for (int r = 0; r < mp_size; r++) {
        if (r == mp_rank || (mp_rank != 0 && r != 0)) continue;
        vi[r] = th_vi_rdma(&E, rel, VIP_TRUE, VIP_TRUE, NULL, NULL);
        if (mp_rank == 0) {
            rdone[r] = th_desc(&E, 1);
            th_set1(rdone[r], E.mh, &dbuf[r], 8);
            CHECK(VipPostRecv(vi[r], rdone[r], E.mh));
        }
        mp_peer_request(vi[r], &ad, r, "atomics");
    }
    for (int r = 0; r < mp_size; r++)
        if (vi[r]) mp_peer_finish(vi[r], r);

    uint64_t t0 = th_now_ms(), ms = 0;
    if (mp_rank == 0) {
        volatile uint64_t *w = (volatile uint64_t *)W.p;
        for (int i = 0; i < iters; i++) {
            if (lock) {
                uint64_t expect = 0;
                while (!__atomic_compare_exchange_n((uint64_t *)&w[LOCK], &expect, 1000, 0, __ATOMIC_ACQUIRE,
                                                    __ATOMIC_RELAXED)) {
                    expect = 0;
                    step();
                }
                w[PLAIN] = w[PLAIN] + 1; /* plain, under the lock */
                __atomic_store_n((uint64_t *)&w[LOCK], 0, __ATOMIC_RELEASE);
            } else {
                __atomic_fetch_add((uint64_t *)&w[COUNTER], 1, __ATOMIC_SEQ_CST);
            }
            step();
        }
        /* the others are done when their message comes */
        for (int r = 1; r < mp_size; r++) {
            VIP_RETURN rc;
            VIP_DESCRIPTOR *d = NULL;
            uint64_t end = th_now_ms() + 100000;
            while ((rc = VipRecvDone(vi[r], &d)) == VIP_NOT_DONE && th_now_ms() < end) sched_yield();
            if (rc != VIP_SUCCESS || d != rdone[r] || OP_STATUS(d) != (VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE))
                FATAL("rank %d never said it was done: %s", r, th_rs(rc));
        }
        ms = th_now_ms() - t0 + 1;
    } else {
        if (lock)
            lock_initiator(vi[0], iters);
        else if (use_now)
            fadd_now_initiator(vi[0], iters);
        else
            fadd_initiator(vi[0], iters, window);
        if (use_now && expect_shortcut > 0)
            EXPECT(now_applied > 0, "VipExtAtomicNow applied none of %d atomics", iters);
        if (use_now && expect_shortcut < 0)
            EXPECT(now_applied == 0, "VipExtAtomicNow applied %llu atomics without a grant",
                   (unsigned long long)now_applied);
        if (use_now) printf("mp_atomics[rank %d]: VipExtAtomicNow applied %llu\n", mp_rank, (unsigned long long)now_applied);
        /* tell rank 0 */
        VIP_DESCRIPTOR *sd = th_desc(&E, 1);
        uint64_t *one = th_alloc(&E, 8);
        *one = (uint64_t)iters;
        th_set1(sd, E.mh, one, 8);
        CHECK(VipPostSend(vi[0], sd, E.mh));
        done_must(vi[0], sd, VIP_STATUS_DONE, "done message");
    }
    /* everyone leaves together (rank 0's NIC answers until the others are done); on the
     * way, how many atomics each initiator's own NIC applied (the shortcut) */
    pthread_t t;
    if (mp_rank == 0 && pthread_create(&t, NULL, stepper, NULL) != 0) FATAL("pthread_create");
    VIP_EXT_ATOMIC_COUNTERS c;
    CHECK(VipExtQueryAtomicCounters(E.nic, &c));
    uint64_t mine = c.Shortcut, all[64] = {0}, shortcut = 0;
    if (sv_boot_allgather(&mine, sizeof mine, all, MP_BOOT_MS) != 0) FATAL("allgather failed");
    for (int r = 1; r < mp_size; r++) shortcut += all[r];
    if (mp_rank == 0) {
        volatile uint64_t *w = (volatile uint64_t *)W.p;
        const uint64_t want = (uint64_t)iters * (uint64_t)mp_size;
        const uint64_t got = lock ? w[PLAIN] : w[COUNTER];
        printf("mp_atomics: %s, %d ranks x %d: %llu (want %llu) in %llu ms; NIC applied %llu, replayed %llu, "
               "refused %llu; initiators applied %llu themselves%s\n",
               op, mp_size, iters, (unsigned long long)got, (unsigned long long)want, (unsigned long long)ms,
               (unsigned long long)c.Applied, (unsigned long long)c.Replayed, (unsigned long long)c.Refused,
               (unsigned long long)shortcut, nicmem ? " (NIC-allocated words)" : "");
        EXPECT(got == want, "%s: the counter ends at %llu, want %llu", op, (unsigned long long)got,
               (unsigned long long)want);
        if (lock) EXPECT(w[LOCK] == 0, "the lock is still held by %llu", (unsigned long long)w[LOCK]);
        EXPECT(c.Refused == 0, "the NIC refused %llu atomics", (unsigned long long)c.Refused);
        if (!lock)
            EXPECT(c.Applied + shortcut == (uint64_t)iters * (uint64_t)(mp_size - 1),
                   "the NIC applied %llu fetch-adds and the initiators %llu, want %llu in all",
                   (unsigned long long)c.Applied, (unsigned long long)shortcut,
                   (unsigned long long)iters * (unsigned long long)(mp_size - 1));
        if (!nicmem)
            EXPECT(shortcut == 0, "%llu atomics went by the shortcut on malloc'd memory", (unsigned long long)shortcut);
        if (expect_shortcut > 0) EXPECT(shortcut > 0, "no atomic went by the same-host shortcut");
        if (expect_shortcut < 0) EXPECT(shortcut == 0, "%llu atomics went by the shortcut", (unsigned long long)shortcut);
        if (expect_replays) EXPECT(c.Replayed > 0, "no atomic was answered from the record: the faults missed");
    }
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("final barrier failed");
    if (mp_rank == 0) {
        __atomic_store_n(&leaving, 1, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
    }
    return th_result();
}
