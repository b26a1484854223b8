/*
 * mem_hostile: memory the NIC cannot access never kills the process (docs/memory-safety.md).
 *
 * Registration refuses, with VIP_INVALID_PARAMETER, memory the NIC could not access as the
 * attributes allow: an unmapped range, a range with a hole, PROT_NONE memory, read-only
 * memory with RDMA write enabled (VipRegisterMem, and VipSetMemAttributes turning RDMA write
 * on). Read-only memory without RDMA write registers (a program may send from it).
 *
 * And whatever the program does to registered memory afterwards (mprotect, munmap), an
 * operation that meets it fails with a protection error instead of a SIGSEGV:
 *   - a receive into read-only memory: VIP_STATUS_PROTECTION_ERROR on the receive;
 *   - an RDMA write into memory registered for RDMA write and then made read-only, or
 *     unmapped: reliable levels VIP_STATUS_RDMA_PROT_ERROR at the initiator, unreliable
 *     dropped and counted at the target;
 *   - an RDMA read from memory made PROT_NONE: VIP_STATUS_RDMA_PROT_ERROR at the initiator;
 *   - a send from a buffer unmapped after it was registered: VIP_STATUS_PROTECTION_ERROR;
 *   - a receive descriptor unmapped, made read-only or deregistered (still mapped) after
 *     it was posted: its completion is lost, the error callback says so
 *     (VIP_ERROR_COMP_PROT), and VipRecvDone hands it back with VIP_DESCRIPTOR_ERROR;
 *     posting a descriptor in memory that is unmapped or read-only is VIP_INVALID_PARAMETER.
 * Reliable VIs break after such an error (VIA); unreliable ones carry the next message.
 * With the firmware thread, the NIC is opened while the opening thread blocks SIGSEGV and
 * SIGBUS (as a program built around signalfd does): the firmware thread it starts would
 * inherit that mask, and a fault there would kill the process, had it not unblocked them
 * for itself.
 */
#include "helpers.h"

static th_env E;
static long PAGE;

static volatile int comp_prot; /* VIP_ERROR_COMP_PROT reports */
static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *ed) {
    (void)ctx;
    if (ed->ErrorCode == VIP_ERROR_COMP_PROT) __atomic_add_fetch(&comp_prot, 1, __ATOMIC_RELAXED);
}

static char *map_pages(size_t n, int prot) {
    void *p = mmap(NULL, n * (size_t)PAGE, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) FATAL("mmap: %s", strerror(errno));
    return p;
}

static VIP_RETURN reg(void *p, size_t len, VIP_BOOLEAN w, VIP_BOOLEAN r, VIP_MEM_HANDLE *mh) {
    VIP_MEM_ATTRIBUTES ma = {E.ptag, w, r};
    return VipRegisterMem(E.nic, p, len, &ma, mh);
}

static void registration(void) {
    th_phase("registration");
    VIP_MEM_HANDLE mh;
    char *none = map_pages(1, PROT_NONE);
    EXPECT_RC(reg(none, (size_t)PAGE, VIP_FALSE, VIP_FALSE, &mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(reg(none, 64, VIP_FALSE, VIP_TRUE, &mh), VIP_INVALID_PARAMETER);

    char *ro = map_pages(2, PROT_READ);
    EXPECT_RC(reg(ro, 2 * (size_t)PAGE, VIP_TRUE, VIP_FALSE, &mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(reg(ro + 100, 10, VIP_TRUE, VIP_TRUE, &mh), VIP_INVALID_PARAMETER);
    CHECK(reg(ro, 2 * (size_t)PAGE, VIP_FALSE, VIP_TRUE, &mh)); /* sending from it is fine */
    VIP_MEM_ATTRIBUTES on = {E.ptag, VIP_TRUE, VIP_TRUE}, got;
    EXPECT_RC(VipSetMemAttributes(E.nic, ro, mh, &on), VIP_INVALID_PARAMETER);
    CHECK(VipQueryMem(E.nic, ro, mh, &got));
    EXPECT(!got.EnableRdmaWrite && got.EnableRdmaRead, "a refused VipSetMemAttributes changed the region");
    CHECK(VipDeregisterMem(E.nic, ro, mh));

    char *gone = map_pages(1, PROT_READ | PROT_WRITE);
    munmap(gone, (size_t)PAGE);
    EXPECT_RC(reg(gone, 8, VIP_FALSE, VIP_FALSE, &mh), VIP_INVALID_PARAMETER);

    /* Three pages: read-write, a hole, read-write. */
    char *holed = map_pages(3, PROT_READ | PROT_WRITE);
    munmap(holed + PAGE, (size_t)PAGE);
    EXPECT_RC(reg(holed, 3 * (size_t)PAGE, VIP_FALSE, VIP_FALSE, &mh), VIP_INVALID_PARAMETER);
    EXPECT_RC(reg(holed + PAGE - 8, 16, VIP_FALSE, VIP_FALSE, &mh), VIP_INVALID_PARAMETER);
    CHECK(reg(holed + 2 * PAGE, (size_t)PAGE, VIP_TRUE, VIP_TRUE, &mh));
    CHECK(VipDeregisterMem(E.nic, holed + 2 * PAGE, mh));

    /* Read-write, read-only, read-write: readable throughout, not writable throughout. */
    char *mixed = map_pages(3, PROT_READ | PROT_WRITE);
    mprotect(mixed + PAGE, (size_t)PAGE, PROT_READ);
    EXPECT_RC(reg(mixed, 3 * (size_t)PAGE, VIP_TRUE, VIP_FALSE, &mh), VIP_INVALID_PARAMETER);
    CHECK(reg(mixed, 3 * (size_t)PAGE, VIP_FALSE, VIP_FALSE, &mh));
    CHECK(VipDeregisterMem(E.nic, mixed, mh));

    munmap(none, (size_t)PAGE);
    munmap(ro, 2 * (size_t)PAGE);
    munmap(holed, (size_t)PAGE);
    munmap(holed + 2 * PAGE, (size_t)PAGE);
    munmap(mixed, 3 * (size_t)PAGE);
}

/* After an error: a reliable pair is broken; an unreliable one still carries a message. */
static void after_error(VIP_RELIABILITY_LEVEL rel, VIP_VI_HANDLE a, VIP_VI_HANDLE b, const char *what) {
    if (rel != VIP_SERVICE_UNRELIABLE) {
        EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS) && th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS),
               "%s, %s: VIs %s / %s, want both in the error state", th_rel_name(rel), what,
               th_state_name(th_state(a)), th_state_name(th_state(b)));
        return;
    }
    char *buf = th_alloc(&E, 64), *src = th_alloc(&E, 64);
    th_fill(src, 64, 9);
    VIP_DESCRIPTOR *rd = th_desc(&E, 1), *sd = th_desc(&E, 1);
    th_set1(rd, E.mh, buf, 64);
    th_set1(sd, E.mh, src, 64);
    CHECK(VipPostRecv(b, rd, E.mh));
    CHECK(VipPostSend(a, sd, E.mh));
    uint32_t st = th_await(rd, b);
    EXPECT(st == (VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE) && th_verify(buf, 64, 9) < 0,
           "unreliable, after %s: the next message did not arrive intact (status 0x%x)", what, st);
}

static void pair_down(VIP_VI_HANDLE a, VIP_VI_HANDLE b) {
    th_drain(a, 1000);
    th_drain(b, 1000);
    VipDisconnect(a);
    VipDisconnect(b);
    th_drain(a, 1000);
    th_drain(b, 1000);
    CHECK(VipDestroyVi(a));
    CHECK(VipDestroyVi(b));
}

static void receive_into_readonly(VIP_RELIABILITY_LEVEL rel) {
    th_phase("receive into read-only memory");
    VIP_VI_HANDLE a, b;
    th_pair(&E, rel, &a, &b, rel == VIP_SERVICE_UNRELIABLE ? "ro-u" : rel == VIP_SERVICE_RELIABLE_DELIVERY ? "ro-d" : "ro-r");
    char *ro = map_pages(1, PROT_READ);
    VIP_MEM_HANDLE mh;
    CHECK(reg(ro, (size_t)PAGE, VIP_FALSE, VIP_FALSE, &mh));
    VIP_DESCRIPTOR *rd = th_desc(&E, 1), *sd = th_desc(&E, 1);
    th_set1(rd, mh, ro, 256);
    char *src = th_alloc(&E, 256);
    th_fill(src, 256, 1);
    th_set1(sd, E.mh, src, 256);
    CHECK(VipPostRecv(b, rd, E.mh));
    CHECK(VipPostSend(a, sd, E.mh));
    uint32_t st = th_await(rd, b);
    EXPECT(st == (VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE | VIP_STATUS_PROTECTION_ERROR),
           "%s: receive into read-only memory: status 0x%x, want the protection error", th_rel_name(rel), st);
    after_error(rel, a, b, "a receive into read-only memory");
    pair_down(a, b);
    CHECK(VipDeregisterMem(E.nic, ro, mh));
    munmap(ro, (size_t)PAGE);
}

enum spoil { MPROTECT_RO, MPROTECT_NONE, MUNMAP };
static const char *spoil_name[] = {"made read-only", "made PROT_NONE", "unmapped"};

/* An RDMA write (or read) to a region registered for it and then spoiled. */
static void rdma_into_spoiled(VIP_RELIABILITY_LEVEL rel, int read, enum spoil how) {
    th_phase(read ? "RDMA read from spoiled memory" : "RDMA write into spoiled memory");
    char tag[32];
    snprintf(tag, sizeof tag, "sp%d%d%d", rel, read, how);
    VIP_VI_HANDLE a, b;
    th_pair_rdma(&E, rel, &a, &b, tag);
    const size_t len = 3 * (size_t)PAGE; /* several frames */
    char *t = map_pages(3, PROT_READ | PROT_WRITE);
    VIP_MEM_HANDLE mh;
    CHECK(reg(t, len, read ? VIP_FALSE : VIP_TRUE, read ? VIP_TRUE : VIP_FALSE, &mh));
    if (how == MUNMAP)
        munmap(t, len);
    else
        mprotect(t, len, how == MPROTECT_RO ? PROT_READ : PROT_NONE);
    char *local = th_alloc(&E, len);
    th_fill(local, len, 2);
    VIP_DESCRIPTOR *d = th_desc(&E, 2);
    th_set_rdma(d, read ? VIP_CONTROL_OP_RDMAREAD : VIP_CONTROL_OP_RDMAWRITE, t, mh, E.mh, local, (uint32_t)len, 1);
    CHECK(VipPostSend(a, d, E.mh));
    uint32_t st = th_await(d, a);
    const char *what = read ? "RDMA read" : "RDMA write";
    if (rel == VIP_SERVICE_UNRELIABLE) {
        EXPECT(st == (VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE), "unreliable %s into memory %s: status 0x%x", what,
               spoil_name[how], st);
        th_vi_counters_at_least(b, offsetof(VIP_EXT_COUNTERS, Errors), 1);
    } else {
        uint32_t want = VIP_STATUS_DONE | VIP_STATUS_RDMA_PROT_ERROR |
                        (read ? VIP_STATUS_OP_RDMA_READ : VIP_STATUS_OP_RDMA_WRITE);
        EXPECT(st == want, "%s %s, memory %s: status 0x%x, want 0x%x", th_rel_name(rel), what, spoil_name[how], st,
               want);
    }
    after_error(rel, a, b, what);
    pair_down(a, b);
    CHECK(VipDeregisterMem(E.nic, t, mh));
    if (how != MUNMAP) munmap(t, len);
}

static void send_from_unmapped(VIP_RELIABILITY_LEVEL rel) {
    th_phase("send from unmapped memory");
    VIP_VI_HANDLE a, b;
    th_pair(&E, rel, &a, &b, rel == VIP_SERVICE_UNRELIABLE ? "su-u" : rel == VIP_SERVICE_RELIABLE_DELIVERY ? "su-d" : "su-r");
    char *s = map_pages(2, PROT_READ | PROT_WRITE);
    VIP_MEM_HANDLE mh;
    CHECK(reg(s, 2 * (size_t)PAGE, VIP_FALSE, VIP_FALSE, &mh));
    munmap(s, 2 * (size_t)PAGE);
    char *buf = th_alloc(&E, 2 * (size_t)PAGE);
    VIP_DESCRIPTOR *rd = th_desc(&E, 1), *sd = th_desc(&E, 1);
    th_set1(rd, E.mh, buf, 2 * (uint32_t)PAGE);
    th_set1(sd, mh, s, 2 * (uint32_t)PAGE);
    CHECK(VipPostRecv(b, rd, E.mh));
    CHECK(VipPostSend(a, sd, E.mh));
    uint32_t st = th_await(sd, a);
    EXPECT(st == (VIP_STATUS_DONE | VIP_STATUS_PROTECTION_ERROR), "%s: send from unmapped memory: status 0x%x",
           th_rel_name(rel), st);
    if (rel == VIP_SERVICE_UNRELIABLE) {
        /* The receive was not consumed by the failed send: the next message takes it. */
        char *src = th_alloc(&E, 64);
        th_fill(src, 64, 4);
        VIP_DESCRIPTOR *sd2 = th_desc(&E, 1);
        th_set1(sd2, E.mh, src, 64);
        CHECK(VipPostSend(a, sd2, E.mh));
        uint32_t rs = th_await(rd, b);
        EXPECT(rs == (VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE) && rd->CS.Length == 64 && th_verify(buf, 64, 4) < 0,
               "unreliable: after a failed send the next message did not arrive (status 0x%x)", rs);
    } else {
        EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS), "%s: sender VI not in the error state",
               th_rel_name(rel));
    }
    pair_down(a, b);
    CHECK(VipDeregisterMem(E.nic, s, mh));
}

enum desc_spoil { DESC_UNMAP, DESC_READONLY, DESC_DEREG };
static const char *desc_spoil_name[] = {"unmapped", "made read-only", "deregistered (still mapped)"};

/* A posted receive descriptor the program spoils before the message comes: its
 * completion is lost and reported (VIP_ERROR_COMP_PROT), and Done hands it back with
 * VIP_DESCRIPTOR_ERROR instead of leaving the queue stopped at it. */
static void descriptor_spoiled(VIP_RELIABILITY_LEVEL rel, enum desc_spoil how) {
    char phase[96];
    snprintf(phase, sizeof phase, "receive descriptor %s after post", desc_spoil_name[how]);
    th_phase(phase);
    VIP_VI_HANDLE a, b;
    char tag[16];
    snprintf(tag, sizeof tag, "ds%d%d", (int)rel, (int)how);
    th_pair(&E, rel, &a, &b, tag);
    char *dm = map_pages(1, PROT_READ | PROT_WRITE);
    VIP_MEM_HANDLE mh;
    CHECK(reg(dm, (size_t)PAGE, VIP_FALSE, VIP_FALSE, &mh));
    VIP_DESCRIPTOR *rd = (VIP_DESCRIPTOR *)dm;
    char *buf = th_alloc(&E, 64);
    th_set1(rd, E.mh, buf, 64);
    int before = __atomic_load_n(&comp_prot, __ATOMIC_RELAXED);
    CHECK(VipPostRecv(b, rd, mh));
    if (how == DESC_UNMAP) munmap(dm, (size_t)PAGE);
    if (how == DESC_READONLY && mprotect(dm, (size_t)PAGE, PROT_READ) != 0) FATAL("mprotect: %s", strerror(errno));
    if (how == DESC_DEREG) CHECK(VipDeregisterMem(E.nic, dm, mh));
    char *src = th_alloc(&E, 64);
    VIP_DESCRIPTOR *sd = th_desc(&E, 1);
    th_set1(sd, E.mh, src, 64);
    CHECK(VipPostSend(a, sd, E.mh));
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    while (__atomic_load_n(&comp_prot, __ATOMIC_RELAXED) == before && th_now_ms() < end) th_step_all();
    EXPECT(__atomic_load_n(&comp_prot, __ATOMIC_RELAXED) > before,
           "%s: no VIP_ERROR_COMP_PROT for a receive descriptor the program %s", th_rel_name(rel), desc_spoil_name[how]);
    /* Done hands it back with the error (the driver cannot read its status, or reads one
     * that will never say done). */
    VIP_DESCRIPTOR *got = NULL;
    VIP_RETURN r;
    end = th_now_ms() + TH_WAIT_MS;
    while ((r = VipRecvDone(b, &got)) == VIP_NOT_DONE && th_now_ms() < end) {
    }
    EXPECT(r == VIP_DESCRIPTOR_ERROR, "%s, descriptor %s: VipRecvDone %s, want VIP_DESCRIPTOR_ERROR", th_rel_name(rel),
           desc_spoil_name[how], th_rs(r));
    EXPECT(got == rd, "VipRecvDone returned %p, want the spoiled descriptor %p", (void *)got, (void *)rd);
    /* Posting a descriptor in memory that is registered but no longer mapped. */
    /* Only while the range is still a hole: another thread's mmap (the firmware thread's,
     * ASan's allocator) may have been given those addresses since, and then the
     * descriptor is readable again (seen once under ASan in thread mode). */
    unsigned char vec;
    if (how == DESC_UNMAP && mincore(dm, (size_t)PAGE, &vec) == -1 && errno == ENOMEM)
        EXPECT_RC(VipPostRecv(b, rd, mh), VIP_INVALID_PARAMETER);
    if (how == DESC_READONLY) EXPECT_RC(VipPostRecv(b, rd, mh), VIP_INVALID_PARAMETER);
    pair_down(a, b);
    if (how != DESC_DEREG) CHECK(VipDeregisterMem(E.nic, dm, mh));
    if (how != DESC_UNMAP) munmap(dm, (size_t)PAGE);
}

int main(void) {
    th_init("mem_hostile", 60);
    PAGE = sysconf(_SC_PAGESIZE);
    const char *progress = getenv("SOFTVIA_PROGRESS");
    sigset_t faults, old;
    sigemptyset(&faults);
    sigaddset(&faults, SIGSEGV);
    sigaddset(&faults, SIGBUS);
    const int thread_mode = progress && !strcmp(progress, "thread");
    if (thread_mode) pthread_sigmask(SIG_BLOCK, &faults, &old);
    th_open_env(&E, NULL, 1 << 20);
    if (thread_mode) pthread_sigmask(SIG_SETMASK, &old, NULL);
    CHECK(VipErrorCallback(E.nic, NULL, on_error));
    registration();
    for (int l = 0; l < 3; l++) {
        VIP_RELIABILITY_LEVEL rel = th_levels[l];
        receive_into_readonly(rel);
        for (int how = 0; how < 3; how++) {
            if (how != MPROTECT_NONE) rdma_into_spoiled(rel, 0, (enum spoil)how);
            if (rel != VIP_SERVICE_UNRELIABLE && how != MPROTECT_RO) rdma_into_spoiled(rel, 1, (enum spoil)how);
        }
        send_from_unmapped(rel);
        for (int how = DESC_UNMAP; how <= DESC_DEREG; how++) descriptor_spoiled(rel, (enum desc_spoil)how);
    }
    th_close_env(&E);
    return th_result();
}
