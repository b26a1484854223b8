/*
 * mp_grants: the same-host shortcut of NIC atomics is taken back in time (docs/offloads.md),
 * 2 ranks on one host:  softvia-run -n 2 mp_grants [--progress inline|thread] [--now]
 *
 * Rank 0 owns a word in memory its NIC allocated (VipExtAllocMem), registered and open to
 * atomics; rank 1 fetch-adds it through a fresh reliable VI per case. After the first
 * fetch-add (through rank 0's NIC) rank 1's NIC must apply the rest itself (its shortcut
 * counter rises). Then rank 0 takes the permission away, and rank 1's next fetch-add must
 * fail and leave the word as it was:
 *   close   VipExtSetMemAtomics(FALSE)
 *   attrs   VipSetMemAttributes without RDMA write
 *   dereg   VipDeregisterMem
 *   disc    VipDisconnect of rank 0's VI (the connection ends)
 *   race    rank 1 fetch-adds without pause while rank 0 deregisters: from the moment
 *           VipDeregisterMem returns the word never changes again, and it ends at
 *           exactly the number of fetch-adds that completed successfully (none lost,
 *           none applied after being refused).
 * Rank 0 also checks VipExtAllocMem / VipExtFreeMem's answers to bad arguments.
 *
 * --now: rank 1 tries each fetch-add with VipExtAtomicNow first and posts a descriptor
 * only when that answers VIP_NOT_DONE. The first on a fresh VI must be VIP_NOT_DONE (no
 * grant yet), nearly all the rest VIP_SUCCESS, and none may succeed once the permission
 * is gone. Rank 1 also checks its answers to bad arguments, and (inline progress, where
 * rank 0's NIC answers only when rank 0 steps it) that it says VIP_NOT_DONE while an
 * RDMA write posted before it is unacknowledged, so it never passes an earlier post.
 */
#include "mp_common.h"

#include <pthread.h>

#define OP_STATUS(d) ((d)->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK))
#define WARM 200

static th_env E;
static uint64_t *word;      /* rank 0: the NIC-allocated page; word[0] is the target */
static VIP_MEM_HANDLE wmh;  /* its registration */
static struct {
    uint64_t addr;
    uint32_t mh, pad;
} target;

static void set_fadd(VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *result) {
    memset(d, 0, sizeof *d);
    d->CS.Control = VIP_EXT_CONTROL_OP_ATOMIC | VIP_EXT_CONTROL_ATOMIC_FETCH_ADD;
    d->CS.SegCount = 3;
    d->Remote.Data.Address = (void *)(uintptr_t)target.addr;
    d->Remote.Handle = target.mh;
    d->Args.Operand = 1;
    d->Result.Data.Address = result;
    d->Result.Handle = E.mh;
    d->Result.Length = 8;
}

static uint64_t shortcuts(void) {
    VIP_EXT_ATOMIC_COUNTERS c;
    CHECK(VipExtQueryAtomicCounters(E.nic, &c));
    return c.Shortcut;
}

static int use_now;         /* --now */
static int inline_mode;     /* --progress inline */
static uint64_t now_served; /* rank 1: fetch-adds VipExtAtomicNow applied */

/* Rank 1: one fetch-add; 1 if it completed successfully (then its old value is checked
 * against want), 0 if it failed (refused, flushed, or the VI was no longer connected). */
static int fadd_once(VIP_VI_HANDLE vi, VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *res, uint64_t want, const char *what) {
    if (use_now) {
        VIP_RETURN rc = VipExtAtomicNow(vi, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, target.mh, target.addr, 1, 0, res);
        if (rc == VIP_SUCCESS) {
            if (*res != want)
                FATAL("%s: VipExtAtomicNow: old value %llu, want %llu", what, (unsigned long long)*res,
                      (unsigned long long)want);
            now_served++;
            return 1;
        }
        if (rc == VIP_INVALID_STATE) return 0;
        if (rc != VIP_NOT_DONE) FATAL("%s: VipExtAtomicNow: %s", what, th_rs(rc));
    }
    set_fadd(d, res);
    VIP_RETURN rc = VipPostSend(vi, (VIP_DESCRIPTOR *)d, E.mh);
    if (rc == VIP_INVALID_STATE) return 0;
    if (rc != VIP_SUCCESS) FATAL("%s: VipPostSend: %s", what, th_rs(rc));
    VIP_DESCRIPTOR *x = th_send_done_must(vi, (VIP_DESCRIPTOR *)d, what);
    if (OP_STATUS(x) == (VIP_STATUS_DONE | VIP_EXT_STATUS_OP_ATOMIC)) {
        if (*res != want) FATAL("%s: old value %llu, want %llu", what, (unsigned long long)*res, (unsigned long long)want);
        return 1;
    }
    if (!(x->CS.Status & VIP_STATUS_ERROR_MASK)) FATAL("%s: status 0x%x", what, x->CS.Status);
    return 0;
}

static void arg_checks(void) {
    VIP_PVOID p = NULL;
    EXPECT(VipExtAllocMem(NULL, 4096, &p) == VIP_INVALID_PARAMETER, "VipExtAllocMem: a NULL NIC is accepted");
    EXPECT(VipExtAllocMem(E.nic, 0, &p) == VIP_INVALID_PARAMETER, "VipExtAllocMem: Length 0 is accepted");
    EXPECT(VipExtAllocMem(E.nic, 4096, NULL) == VIP_INVALID_PARAMETER, "VipExtAllocMem: a NULL Address is accepted");
    EXPECT(VipExtAllocMem(E.nic, (VIP_ULONG)1 << 41, &p) == VIP_INVALID_PARAMETER,
           "VipExtAllocMem: 2 TiB is accepted");
    CHECK(VipExtAllocMem(E.nic, 10000, &p));
    uint8_t *b = p;
    EXPECT(((uintptr_t)b & 4095) == 0, "VipExtAllocMem: %p is not page-aligned", p);
    for (int i = 0; i < 12288; i++)
        if (b[i] != 0) FATAL("VipExtAllocMem: byte %d is 0x%x, not zero", i, b[i]);
    memset(b, 0x77, 12288); /* the rounded-up length is usable */
    VIP_MEM_HANDLE mh;
    VIP_MEM_ATTRIBUTES ma = {E.ptag, VIP_TRUE, VIP_FALSE};
    CHECK(VipRegisterMem(E.nic, b + 4096, 100, &ma, &mh));
    EXPECT(VipExtFreeMem(E.nic, p) == VIP_INVALID_STATE, "VipExtFreeMem: freed while registered");
    EXPECT(VipExtFreeMem(E.nic, b + 4096) == VIP_INVALID_PARAMETER, "VipExtFreeMem: the middle of a block is freed");
    EXPECT(VipExtFreeMem(E.nic, E.mem) == VIP_INVALID_PARAMETER, "VipExtFreeMem: malloc'd memory is freed");
    EXPECT(VipExtFreeMem(NULL, p) == VIP_INVALID_PARAMETER, "VipExtFreeMem: a NULL NIC is accepted");
    CHECK(VipDeregisterMem(E.nic, b + 4096, mh));
    CHECK(VipExtFreeMem(E.nic, p));
    EXPECT(VipExtFreeMem(E.nic, p) == VIP_INVALID_PARAMETER, "VipExtFreeMem: freed twice");
}

/* Rank 0: a fresh registration of the word, open to atomics, published to rank 1. */
static void publish(void) {
    if (mp_rank == 0) {
        VIP_MEM_ATTRIBUTES ma = {E.ptag, VIP_TRUE, VIP_TRUE};
        if (wmh) CHECK(VipDeregisterMem(E.nic, word, wmh));
        CHECK(VipRegisterMem(E.nic, word, 4096, &ma, &wmh));
        CHECK(VipExtSetMemAtomics(E.nic, word, wmh, VIP_TRUE));
        __atomic_store_n(&word[0], 0, __ATOMIC_SEQ_CST);
        target.addr = (uint64_t)(uintptr_t)word;
        target.mh = wmh;
    }
    mp_from_rank(0, &target, sizeof target);
}

static void barrier(void) {
    if (sv_boot_barrier(MP_BOOT_MS) != 0) FATAL("barrier failed");
}

/* Rank 0 steps its NIC from a thread through each case (inline progress has no thread
 * of its own, and the main thread waits in the launcher's collectives): rank 1's
 * requests through it are answered, or refused, whenever they come. */
static volatile int stepping;
static void *stepper(void *arg) {
    (void)arg;
    while (__atomic_load_n(&stepping, __ATOMIC_ACQUIRE)) {
        VipExtProgress(E.nic);
        sched_yield();
    }
    return NULL;
}

/* Rank 1, --now: answers to bad arguments (vi connected, the grant held), and to words
 * beyond the grant (another handle, past the region: the target decides, not this NIC). */
static void now_arg_checks(VIP_VI_HANDLE vi, VIP_VI_HANDLE idle, uint64_t *res) {
    const VIP_ULONG fadd = VIP_EXT_CONTROL_ATOMIC_FETCH_ADD;
    const struct {
        VIP_VI_HANDLE vi;
        VIP_ULONG op;
        VIP_MEM_HANDLE mh;
        uint64_t addr;
        uint64_t *old;
        VIP_RETURN want;
        const char *what;
    } cases[] = {
        {NULL, fadd, target.mh, target.addr, res, VIP_INVALID_PARAMETER, "a NULL VI"},
        {vi, fadd, target.mh, target.addr, NULL, VIP_INVALID_PARAMETER, "a NULL Old"},
        {vi, fadd, target.mh, target.addr + 4, res, VIP_INVALID_PARAMETER, "a misaligned word"},
        {vi, 0x30, target.mh, target.addr, res, VIP_INVALID_PARAMETER, "Op 0x30"},
        {vi, VIP_EXT_CONTROL_OP_ATOMIC, target.mh, target.addr, res, VIP_INVALID_PARAMETER, "Op without an operation"},
        {idle, fadd, target.mh, target.addr, res, VIP_INVALID_STATE, "an unconnected VI"},
        {vi, fadd, target.mh, target.addr + 4096, res, VIP_NOT_DONE, "a word past the granted region"},
        {vi, fadd, target.mh + 1, target.addr, res, VIP_NOT_DONE, "a word under another memory handle"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        VIP_RETURN rc = VipExtAtomicNow(cases[i].vi, cases[i].op, cases[i].mh, cases[i].addr, 1, 0, cases[i].old);
        EXPECT(rc == cases[i].want, "VipExtAtomicNow, %s: %s, want %s", cases[i].what, th_rs(rc), th_rs(cases[i].want));
    }
}

/* Rank 1, --now with inline progress, while rank 0 does not step its NIC: an RDMA write
 * posted first waits for rank 0's acknowledgement, so VipExtAtomicNow must not pass it;
 * the descriptor posted instead completes after the write. want: the word's value. */
static uint64_t now_order_check(VIP_VI_HANDLE vi, VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *res, uint64_t want) {
    VIP_DESCRIPTOR *w = th_alloc(&E, sizeof(VIP_DESCRIPTOR));
    uint64_t *src = th_alloc(&E, 8);
    *src = 0x5eed;
    memset(w, 0, sizeof *w);
    w->CS.Control = VIP_CONTROL_OP_RDMAWRITE;
    w->CS.SegCount = 2;
    w->CS.Length = 8;
    w->DS[0].Remote.Data.Address = (void *)(uintptr_t)(target.addr + 8);
    w->DS[0].Remote.Handle = target.mh;
    w->DS[1].Local.Data.Address = src;
    w->DS[1].Local.Handle = E.mh;
    w->DS[1].Local.Length = 8;
    CHECK(VipPostSend(vi, w, E.mh));
    EXPECT(VipExtAtomicNow(vi, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, target.mh, target.addr, 1, 0, res) == VIP_NOT_DONE,
           "order: VipExtAtomicNow applied while an RDMA write posted before it was outstanding");
    set_fadd(d, res);
    CHECK(VipPostSend(vi, (VIP_DESCRIPTOR *)d, E.mh));
    barrier(); /* rank 0 steps again */
    VIP_DESCRIPTOR *x = th_send_done_must(vi, w, "order: the RDMA write");
    EXPECT(OP_STATUS(x) == (VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE), "order: RDMA write status 0x%x", x->CS.Status);
    x = th_send_done_must(vi, (VIP_DESCRIPTOR *)d, "order: the fetch-add posted instead");
    EXPECT(OP_STATUS(x) == (VIP_STATUS_DONE | VIP_EXT_STATUS_OP_ATOMIC) && *res == want,
           "order: fetch-add status 0x%x old %llu, want %llu", x->CS.Status, (unsigned long long)*res,
           (unsigned long long)want);
    EXPECT(VipExtAtomicNow(vi, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, target.mh, target.addr, 1, 0, res) == VIP_SUCCESS &&
               *res == want + 1,
           "order: VipExtAtomicNow not applied once nothing was outstanding (old %llu)", (unsigned long long)*res);
    now_served++;
    return want + 2;
}

static void run_case(const char *name, int round, const mp_addrs *ad, VIP_EXT_ATOMIC_DESCRIPTOR *d, uint64_t *res) {
    publish();
    char tag[32];
    snprintf(tag, sizeof tag, "%s%d", name, round);
    VIP_VI_HANDLE vi = th_vi_rdma(&E, VIP_SERVICE_RELIABLE_DELIVERY, VIP_TRUE, VIP_TRUE, NULL, NULL);
    mp_peer_request(vi, ad, 1 - mp_rank, tag);
    mp_peer_finish(vi, 1 - mp_rank);
    const int race = !strcmp(name, "race");
    uint64_t done = 0, after = 0;
    pthread_t t;
    if (mp_rank == 1) {
        /* The first goes through rank 0's NIC (which then grants); the rest by the shortcut. */
        uint64_t s0 = shortcuts(), n0 = now_served;
        if (use_now)
            EXPECT(VipExtAtomicNow(vi, VIP_EXT_CONTROL_ATOMIC_FETCH_ADD, target.mh, target.addr, 1, 0, res) == VIP_NOT_DONE,
                   "%s: VipExtAtomicNow applied before the target granted anything", name);
        for (int i = 0; i < WARM; i++)
            if (!fadd_once(vi, d, res, (uint64_t)i, name)) FATAL("%s: warm-up fetch-add %d failed", name, i);
        uint64_t s = shortcuts() - s0;
        EXPECT(s >= WARM - 2, "%s: only %llu of %d fetch-adds went by the shortcut", name, (unsigned long long)s, WARM);
        if (use_now)
            EXPECT(now_served - n0 >= WARM - 2, "%s: VipExtAtomicNow applied only %llu of %d", name,
                   (unsigned long long)(now_served - n0), WARM);
        done = WARM;
        if (use_now && round == 0) {
            VIP_VI_HANDLE idle = th_vi(&E, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL);
            now_arg_checks(vi, idle, res);
            CHECK(VipDestroyVi(idle));
        }
        if (use_now && inline_mode && round == 0) {
            barrier(); /* O */
            barrier(); /* rank 0 no longer steps its NIC */
            done = now_order_check(vi, d, res, done);
        }
        barrier(); /* A: warmed up */
        if (race) {
            while (fadd_once(vi, d, res, done, name)) done++;
        } else {
            barrier(); /* B: rank 0 took the permission away */
            EXPECT(!fadd_once(vi, d, res, done, name), "%s: a fetch-add succeeded after the permission was taken away",
                   name);
        }
    } else {
        __atomic_store_n(&stepping, 1, __ATOMIC_RELEASE);
        if (pthread_create(&t, NULL, stepper, NULL) != 0) FATAL("pthread_create");
        if (use_now && inline_mode && round == 0) {
            barrier(); /* O: rank 1 warmed up; this NIC falls silent (nothing else steps it) */
            __atomic_store_n(&stepping, 0, __ATOMIC_RELEASE);
            pthread_join(t, NULL);
            barrier();
            barrier(); /* rank 1 posted its RDMA write and the fetch-add; they may complete now */
            __atomic_store_n(&stepping, 1, __ATOMIC_RELEASE);
            if (pthread_create(&t, NULL, stepper, NULL) != 0) FATAL("pthread_create");
        }
        barrier(); /* A */
        if (race) { /* rank 1 adds by the shortcut meanwhile */
            const uint64_t end = th_now_ms() + 1 + (uint64_t)round % 4;
            while (th_now_ms() < end) sched_yield();
        }
        if (!strcmp(name, "close")) CHECK(VipExtSetMemAtomics(E.nic, word, wmh, VIP_FALSE));
        if (!strcmp(name, "attrs")) {
            VIP_MEM_ATTRIBUTES ma = {E.ptag, VIP_FALSE, VIP_TRUE};
            CHECK(VipSetMemAttributes(E.nic, word, wmh, &ma));
        }
        if (!strcmp(name, "dereg") || race) {
            CHECK(VipDeregisterMem(E.nic, word, wmh));
            wmh = 0;
        }
        if (!strcmp(name, "disc")) CHECK(VipDisconnect(vi));
        after = __atomic_load_n(&word[0], __ATOMIC_SEQ_CST);
        if (!race) barrier(); /* B */
    }
    /* Rank 1 is done trying; its count of successful fetch-adds must be the word's value,
     * and the word must not have moved since the permission was taken away. */
    uint64_t both[2] = {0, 0};
    if (sv_boot_allgather(&done, sizeof done, both, MP_BOOT_MS) != 0) FATAL("allgather failed");
    if (mp_rank == 0) {
        __atomic_store_n(&stepping, 0, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
        const uint64_t final = __atomic_load_n(&word[0], __ATOMIC_SEQ_CST);
        EXPECT(final == after, "%s: the word moved from %llu to %llu after the permission was taken away", name,
               (unsigned long long)after, (unsigned long long)final);
        EXPECT(final == both[1], "%s: %llu fetch-adds completed, the word says %llu", name, (unsigned long long)both[1],
               (unsigned long long)final);
        printf("mp_grants: %s: %llu fetch-adds, then refused; the word stayed at %llu\n", name,
               (unsigned long long)both[1], (unsigned long long)final);
    }
    (void)VipDisconnect(vi);
    VIP_RETURN rc;
    for (int i = 0; (rc = VipDestroyVi(vi)) == VIP_INVALID_STATE && i < 1000; i++) VipExtProgress(E.nic);
    if (rc != VIP_SUCCESS) FATAL("%s: VipDestroyVi: %s", name, th_rs(rc));
    barrier();
}

int main(int argc, char **argv) {
    const char *progress = "inline";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--progress") && i + 1 < argc) progress = argv[++i];
        else if (!strcmp(argv[i], "--now")) use_now = 1;
        else FATAL("unknown argument '%s'", argv[i]);
    }
    inline_mode = !strcmp(progress, "inline");
    mp_init("mp_grants", 2, 110);
    mp_open(&E, progress, 1 << 16);
    mp_log_errors(&E);
    if (mp_rank == 0) {
        arg_checks();
        CHECK(VipExtAllocMem(E.nic, 4096, (VIP_PVOID *)&word));
    }
    mp_addrs ad;
    mp_exchange(&E, &ad);
    VIP_EXT_ATOMIC_DESCRIPTOR *d = th_alloc(&E, sizeof *d);
    uint64_t *res = th_alloc(&E, 8);
    const char *cases[] = {"close", "attrs", "dereg", "disc", "race", "race", "race"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(cases[i], (int)i, &ad, d, res);
    if (mp_rank == 0) {
        if (wmh) CHECK(VipDeregisterMem(E.nic, word, wmh));
        CHECK(VipExtFreeMem(E.nic, word));
    }
    if (mp_rank == 1 && use_now) printf("mp_grants: VipExtAtomicNow applied %llu fetch-adds\n", (unsigned long long)now_served);
    barrier();
    return th_result();
}
