/*
 * helpers.h -- shared helpers for the VIPL conformance tests (tests/conformance).
 *
 * Every test is a small C11 program against the public vipl.h only. Exit codes follow
 * liburing's tests: 0 pass, 1 fail, 77 skip (with the reason printed).
 *
 * Checks:
 *   CHECK(call)            call must return VIP_SUCCESS, else the test stops (setup).
 *   CHECK_RC(call, want)   call must return want, else the test stops.
 *   EXPECT_RC(call, want)  call must return want, else a failure is recorded and the
 *                          test goes on (so one bug does not hide the next check).
 *   EXPECT(cond, fmt, ...) a condition, recorded the same way.
 *   th_result()            what main returns: T_PASS if nothing was recorded.
 * Every message names file:line and the VIP_RETURN names (VipExtReturnString).
 *
 * Nothing here waits forever: every wait has a timeout (TH_WAIT_MS), and a watchdog
 * (alarm) names the phase a test was in if it hangs anyway.
 */
#ifndef SOFTVIA_CONF_HELPERS_H
#define SOFTVIA_CONF_HELPERS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <vipl.h>

#include "../test_core.h"

#define TH_WAIT_MS 5000 /* a completion that takes longer than this is a failure */

static inline const char *th_rs(VIP_RETURN r) { return VipExtReturnString(r); }

#define CHECK(call) TH_CHECK_CODE(VIP_RETURN, call, VIP_SUCCESS, th_rs, 1)
#define CHECK_RC(call, want) TH_CHECK_CODE(VIP_RETURN, call, want, th_rs, 1)
#define EXPECT_RC(call, want) TH_CHECK_CODE(VIP_RETURN, call, want, th_rs, 0)

/* The race probes (loops that repeat a narrow timing window until their budget runs
 * out) run SOFTVIA_PROBE_SCALE times their default budget (a whole number, 1-100;
 * default 1), and the watchdog stretches with them. The test list runs them at scale 1;
 * the long runs (ctest -L long, README.md) at 5. */
static inline uint64_t th_probe_scale(void) {
    const char *s = getenv("SOFTVIA_PROBE_SCALE");
    if (!s || !*s) return 1;
    char *end;
    long k = strtol(s, &end, 10);
    if (*end || k < 1 || k > 100) {
        fprintf(stderr, "SOFTVIA_PROBE_SCALE=%s: want a whole number from 1 to 100\n", s);
        exit(2);
    }
    return (uint64_t)k;
}

static inline uint64_t th_probe_ms(uint64_t default_ms) { return default_ms * th_probe_scale(); }

/* Call first in main: names the test, starts the watchdog, prints the progress mode
 * the environment asks for (SOFTVIA_PROGRESS). */
static inline void th_init(const char *prog, unsigned watchdog_s) {
    th_start(prog, (unsigned)((watchdog_s ? watchdog_s : 50) * th_probe_scale()));
    const char *p = getenv("SOFTVIA_PROGRESS");
    printf("%s: SOFTVIA_PROGRESS=%s\n", prog, p ? p : "(unset)");
    fflush(stdout);
}

static inline int th_skip(const char *why) {
    printf("%s: SKIP: %s\n", th_prog, why);
    return T_SKIP;
}

static inline uint64_t th_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void th_sleep_ms(unsigned ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- which wire ---------------------------------------------------------------------- */

/* Whether the NICs this test opens run on a lossy wire: udp (or any network wire), or
 * shm with the fault injector (SOFTVIA_FAULTS). There frames can be lost or duplicated,
 * reliable VIs retransmit (a spurious resend shows as a receiver drop) and complete
 * sends on acknowledgement, a send is not held back by a receiver that does not read,
 * and a frame reaches the peer in a later engine step than the one that sent it.
 * Checks that hold only on the lossless shm wire ask this. Decided from the same
 * environment VipOpenNic(NULL) reads. */
static inline int th_wire_lossy(void) {
    const char *f = getenv("SOFTVIA_FAULTS");
    if (f && *f) return 1;
    const char *d = getenv("SOFTVIA_DEVICE");
    if (!d || !*d) return 0;
    return !(strncmp(d, "shm", 3) == 0 && (d[3] == '\0' || d[3] == ':'));
}

/* ---- NIC, ptag, memory ------------------------------------------------------------ */

/* NICs open in this test, so that waits can step them all (inline progress: a frame
 * sent over a network wire is read by the receiving NIC's next step, which someone must
 * make). */
#define TH_MAX_NICS 8
static VIP_NIC_HANDLE th_nics[TH_MAX_NICS];

static inline void th_step_all(void) {
    for (int i = 0; i < TH_MAX_NICS; i++)
        if (th_nics[i]) VipExtProgress(th_nics[i]);
}

/* One NIC with a ptag and a registered arena; th_alloc carves 64-byte aligned pieces. */
typedef struct {
    VIP_NIC_HANDLE nic;
    VIP_NIC_ATTRIBUTES na;
    VIP_PROTECTION_HANDLE ptag;
    char *mem;
    size_t memsz, used;
    VIP_MEM_HANDLE mh;
} th_env;

static inline void th_open_env(th_env *e, const char *dev, size_t arena) {
    memset(e, 0, sizeof *e);
    CHECK(VipOpenNic(dev, &e->nic));
    for (int i = 0; i < TH_MAX_NICS; i++)
        if (!th_nics[i]) {
            th_nics[i] = e->nic;
            break;
        }
    CHECK(VipQueryNic(e->nic, &e->na));
    CHECK(VipCreatePtag(e->nic, &e->ptag));
    if (arena) {
        e->memsz = (arena + 4095) & ~(size_t)4095;
        e->mem = aligned_alloc(4096, e->memsz);
        if (!e->mem) FATAL("out of memory (%zu bytes)", e->memsz);
        memset(e->mem, 0, e->memsz);
        VIP_MEM_ATTRIBUTES ma = {e->ptag, VIP_FALSE, VIP_FALSE};
        CHECK(VipRegisterMem(e->nic, e->mem, e->memsz, &ma, &e->mh));
    }
}

/* Closes the NIC (which frees everything on it) and the arena. */
static inline void th_close_env(th_env *e) {
    for (int i = 0; i < TH_MAX_NICS; i++)
        if (th_nics[i] == e->nic) th_nics[i] = NULL;
    if (e->nic) CHECK(VipCloseNic(e->nic));
    free(e->mem);
    memset(e, 0, sizeof *e);
}

static inline void *th_alloc(th_env *e, size_t len) {
    size_t off = (e->used + 63) & ~(size_t)63;
    if (off + len > e->memsz) FATAL("arena exhausted (%zu + %zu > %zu)", off, len, e->memsz);
    e->used = off + len;
    return e->mem + off;
}

/* A descriptor with room for nseg data segments, zeroed, in the arena. */
static inline VIP_DESCRIPTOR *th_desc(th_env *e, unsigned nseg) {
    size_t len = sizeof(VIP_CONTROL_SEGMENT) + (nseg < 2 ? 2 : nseg) * sizeof(VIP_DESCRIPTOR_SEGMENT);
    VIP_DESCRIPTOR *d = th_alloc(e, len);
    memset(d, 0, len);
    return d;
}

/* Data segment i of a descriptor with room for more than the two segments that
 * VIP_DESCRIPTOR declares (the segments follow the control segment in memory). */
static inline VIP_DATA_SEGMENT *th_seg(VIP_DESCRIPTOR *d, unsigned i) {
    return (VIP_DATA_SEGMENT *)((char *)d + sizeof(VIP_CONTROL_SEGMENT) + i * sizeof(VIP_DESCRIPTOR_SEGMENT));
}

/* Sets d up as a one-segment send/receive of len bytes at buf (handle mh). */
static inline void th_set1(VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh, void *buf, uint32_t len) {
    memset(&d->CS, 0, sizeof d->CS);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = buf;
    d->DS[0].Local.Handle = mh;
    d->DS[0].Local.Length = len;
}

/* Fills buf with a pattern that depends on seed and position. */
static inline void th_fill(void *buf, size_t len, uint32_t seed) {
    uint8_t *p = buf;
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

/* Index of the first byte that differs from th_fill(seed), or -1. */
static inline long th_verify(const void *buf, size_t len, uint32_t seed) {
    const uint8_t *p = buf;
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        if (p[i] != (uint8_t)(x >> 16)) return (long)i;
    }
    return -1;
}

/* ---- addresses and connections -------------------------------------------------------- */

/* Storage for a VIP_NET_ADDRESS with a NIC address and a discriminator. */
typedef union {
    VIP_NET_ADDRESS a;
    uint8_t raw[sizeof(VIP_NET_ADDRESS) + 256];
} th_addr;

static inline VIP_NET_ADDRESS *th_mkaddr(th_addr *buf, const VIP_NIC_ATTRIBUTES *na, const char *disc) {
    memset(buf, 0, sizeof *buf);
    buf->a.HostAddressLen = na->NicAddressLen;
    memcpy(buf->a.HostAddress, na->LocalNicAddress, na->NicAddressLen);
    size_t dl = disc ? strlen(disc) : 0;
    buf->a.DiscriminatorLen = (VIP_UINT16)dl;
    if (dl) memcpy(buf->a.HostAddress + na->NicAddressLen, disc, dl);
    return &buf->a;
}

static inline VIP_VI_HANDLE th_vi(th_env *e, VIP_RELIABILITY_LEVEL rel, VIP_CQ_HANDLE scq, VIP_CQ_HANDLE rcq) {
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = rel;
    va.Ptag = e->ptag;
    va.MaxTransferSize = 0; /* the NIC's maximum */
    VIP_VI_HANDLE vi;
    CHECK(VipCreateVi(e->nic, &va, scq, rcq, &vi));
    return vi;
}

/* Set when VipConnectPeerDone said VIP_INVALID_STATE for a VI whose request was still
 * outstanding (a race, fixed; peer_connect.c fails on it). The helper below only reports
 * it, so that a return of that bug fails the one test about it and not every test that
 * needs a connection. */
static int th_peerdone_races;

/* One VipConnectPeerDone poll for the helper: VIP_INVALID_STATE while the VI is (or
 * just became) connected is the race above; it is reported and polled again. */
static inline VIP_RETURN th_peer_done_poll(VIP_VI_HANDLE vi) {
    VIP_RETURN r = VipConnectPeerDone(vi, NULL);
    if (r == VIP_INVALID_STATE) {
        VIP_VI_STATE st = (VIP_VI_STATE)-1;
        VipQueryVi(vi, &st, NULL, NULL, NULL);
        if (st == VIP_STATE_CONNECTED || st == VIP_STATE_CONNECT_PENDING) {
            if (th_peerdone_races++ == 0)
                fprintf(stderr, "%s: note: VipConnectPeerDone -> VIP_INVALID_STATE with a request outstanding "
                                "(state %d); that is a bug, and peer_connect fails on it\n", th_prog, st);
            return VIP_NOT_DONE;
        }
    }
    return r;
}

/* Connects a (on ea's NIC) and b (on eb's NIC, may be the same) peer-to-peer with the
 * discriminators "<tag>.a" and "<tag>.b". Works in both progress modes from one thread:
 * the peer requests are asynchronous and PeerDone steps the firmware. */
static inline void th_connect_peer2(th_env *ea, VIP_VI_HANDLE a, th_env *eb, VIP_VI_HANDLE b, const char *tag) {
    char da[96], db[96];
    snprintf(da, sizeof da, "%s.a", tag);
    snprintf(db, sizeof db, "%s.b", tag);
    th_addr la, ra, lb, rb;
    CHECK(VipConnectPeerRequest(a, th_mkaddr(&la, &ea->na, da), th_mkaddr(&ra, &eb->na, db), TH_WAIT_MS));
    CHECK(VipConnectPeerRequest(b, th_mkaddr(&lb, &eb->na, db), th_mkaddr(&rb, &ea->na, da), TH_WAIT_MS));
    VIP_RETURN ra_ = VIP_NOT_DONE, rb_ = VIP_NOT_DONE;
    uint64_t end = th_now_ms() + 2 * TH_WAIT_MS;
    while ((ra_ == VIP_NOT_DONE || rb_ == VIP_NOT_DONE) && th_now_ms() < end) {
        if (ra_ == VIP_NOT_DONE) ra_ = th_peer_done_poll(a);
        if (rb_ == VIP_NOT_DONE) rb_ = th_peer_done_poll(b);
    }
    if (ra_ != VIP_SUCCESS || rb_ != VIP_SUCCESS)
        FATAL("peer connect '%s': a -> %s, b -> %s", tag, th_rs(ra_), th_rs(rb_));
}

static inline void th_connect_peer(th_env *e, VIP_VI_HANDLE a, VIP_VI_HANDLE b, const char *tag) {
    th_connect_peer2(e, a, e, b, tag);
}

/* A connected pair of VIs on one NIC. */
static inline void th_pair(th_env *e, VIP_RELIABILITY_LEVEL rel, VIP_VI_HANDLE *a, VIP_VI_HANDLE *b, const char *tag) {
    *a = th_vi(e, rel, NULL, NULL);
    *b = th_vi(e, rel, NULL, NULL);
    th_connect_peer(e, *a, *b, tag);
}

static inline VIP_VI_STATE th_state(VIP_VI_HANDLE vi) {
    VIP_VI_STATE st = (VIP_VI_STATE)-1;
    CHECK(VipQueryVi(vi, &st, NULL, NULL, NULL));
    return st;
}

/* Polls until vi is in state want (true) or ms pass (false). */
static inline int th_wait_state(VIP_VI_HANDLE vi, VIP_VI_STATE want, unsigned ms) {
    uint64_t end = th_now_ms() + ms;
    for (;;) {
        if (th_state(vi) == want) return 1;
        if (th_now_ms() >= end) return 0;
        sched_yield();
    }
}

static inline const char *th_state_name(VIP_VI_STATE s) {
    switch (s) {
        case VIP_STATE_IDLE: return "IDLE";
        case VIP_STATE_CONNECTED: return "CONNECTED";
        case VIP_STATE_CONNECT_PENDING: return "CONNECT_PENDING";
        case VIP_STATE_ERROR: return "ERROR";
        default: return "?";
    }
}

static inline const char *th_rel_name(VIP_RELIABILITY_LEVEL r) {
    switch (r) {
        case VIP_SERVICE_UNRELIABLE: return "unreliable";
        case VIP_SERVICE_RELIABLE_DELIVERY: return "reliable-delivery";
        case VIP_SERVICE_RELIABLE_RECEPTION: return "reliable-reception";
        default: return "?";
    }
}

static const VIP_RELIABILITY_LEVEL th_levels[3] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY,
                                                   VIP_SERVICE_RELIABLE_RECEPTION};

/* ---- completions ------------------------------------------------------------------- */

/* Set by a program whose NIC has a firmware thread and whose peer process has one too
 * (the multi-process tests in thread mode: mp_open). Then th_done_poll, after its short
 * spin, sleeps 20 us per turn instead of yielding: the firmware threads of both processes
 * spin a while after each frame without yielding, and a poller that only yields gets a
 * core back when one of their time slices ends, milliseconds later (twice per round
 * trip: 7 ms per ping-pong over udp). A sleeper leaves the core to them and is woken
 * when its time is up. The same calls, the same deadline. */
static int th_poll_sleeps;

/* Polls (bounded) for the next completed send/receive descriptor with VipSendDone /
 * VipRecvDone; NULL after TH_WAIT_MS, with VIP_TIMEOUT (or the Done call's error) in
 * *rc. The Wait calls have their own test (wait_semantics.c); the helpers poll so that
 * a Wait bug fails that test and not every other one. Done steps the firmware in
 * inline mode, so this makes progress in both modes. */
static inline VIP_DESCRIPTOR *th_done_poll(VIP_VI_HANDLE vi, int recv, VIP_RETURN *rc) {
    VIP_DESCRIPTOR *d = NULL;
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    for (unsigned turn = 0;; turn++) {
        VIP_RETURN r = recv ? VipRecvDone(vi, &d) : VipSendDone(vi, &d);
        if (r != VIP_NOT_DONE) {
            if (rc) *rc = r;
            return r == VIP_SUCCESS ? d : NULL;
        }
        /* after a short spin give the core away each turn: on 2 cores a firmware thread
         * or the peer process may need it to produce this completion */
        if (turn >= 64 && th_poll_sleeps) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        } else if (turn >= 64) {
            sched_yield();
        }
        if ((turn & 255) == 255 && th_now_ms() >= end) break;
    }
    if (rc) *rc = VIP_TIMEOUT;
    return NULL;
}

static inline VIP_DESCRIPTOR *th_send_wait(VIP_VI_HANDLE vi, VIP_RETURN *rc) { return th_done_poll(vi, 0, rc); }
static inline VIP_DESCRIPTOR *th_recv_wait(VIP_VI_HANDLE vi, VIP_RETURN *rc) { return th_done_poll(vi, 1, rc); }

/* Like the above, but a timeout or a wrong descriptor stops the test. */
static inline VIP_DESCRIPTOR *th_send_done_must(VIP_VI_HANDLE vi, VIP_DESCRIPTOR *want, const char *what) {
    VIP_RETURN r;
    VIP_DESCRIPTOR *d = th_send_wait(vi, &r);
    if (!d) FATAL("%s: no send completion: %s", what, th_rs(r));
    if (want && d != want) FATAL("%s: VipSendDone returned %p, want %p", what, (void *)d, (void *)want);
    return d;
}

static inline VIP_DESCRIPTOR *th_recv_done_must(VIP_VI_HANDLE vi, VIP_DESCRIPTOR *want, const char *what) {
    VIP_RETURN r;
    VIP_DESCRIPTOR *d = th_recv_wait(vi, &r);
    if (!d) FATAL("%s: no receive completion: %s", what, th_rs(r));
    if (want && d != want) FATAL("%s: VipRecvDone returned %p, want %p", what, (void *)d, (void *)want);
    return d;
}

/* Reaps every descriptor left on both queues of vi (bounded), so it can be destroyed.
 * Returns how many it took. */
static inline int th_drain(VIP_VI_HANDLE vi, unsigned ms) {
    int n = 0;
    uint64_t end = th_now_ms() + ms;
    for (;;) {
        VIP_BOOLEAN se = VIP_TRUE, re = VIP_TRUE;
        CHECK(VipQueryVi(vi, NULL, NULL, &se, &re));
        if (se && re) return n;
        VIP_DESCRIPTOR *d;
        if (VipSendDone(vi, &d) == VIP_SUCCESS) n++;
        if (VipRecvDone(vi, &d) == VIP_SUCCESS) n++;
        if (th_now_ms() >= end) return n;
    }
}

/* Ends a connected pair: both sides disconnect, their queues are reaped (up to drain_ms
 * each), and both VIs must be destroyable. */
static inline void th_unpair(VIP_VI_HANDLE a, VIP_VI_HANDLE b, unsigned drain_ms) {
    VipDisconnect(a);
    VipDisconnect(b);
    th_drain(a, drain_ms);
    th_drain(b, drain_ms);
    EXPECT_RC(VipDestroyVi(a), VIP_SUCCESS);
    EXPECT_RC(VipDestroyVi(b), VIP_SUCCESS);
}

static inline int th_status_has(const VIP_DESCRIPTOR *d, uint32_t bit) { return (d->CS.Status & bit) == bit; }

/* Counters are updated by the NIC right after it publishes a descriptor's status, so a
 * read just after a completion may be a moment behind: these poll (bounded) until the
 * counter reaches want, and return the last value read. */
static inline VIP_EXT_COUNTERS th_vi_counters_at_least(VIP_VI_HANDLE vi, size_t field_off, uint64_t want) {
    VIP_EXT_COUNTERS c;
    uint64_t end = th_now_ms() + 1000;
    for (;;) {
        CHECK(VipExtQueryViCounters(vi, &c));
        uint64_t v;
        memcpy(&v, (const char *)&c + field_off, sizeof v);
        if (v >= want || th_now_ms() >= end) return c;
        th_step_all();
        sched_yield();
    }
}
static inline VIP_EXT_COUNTERS th_nic_counters_at_least(VIP_NIC_HANDLE nic, size_t field_off, uint64_t want) {
    VIP_EXT_COUNTERS c;
    uint64_t end = th_now_ms() + 1000;
    for (;;) {
        CHECK(VipExtQueryNicCounters(nic, &c));
        uint64_t v;
        memcpy(&v, (const char *)&c + field_off, sizeof v);
        if (v >= want || th_now_ms() >= end) return c;
        th_step_all();
        sched_yield();
    }
}


/* ---- RDMA ------------------------------------------------------------------------------ */

/* A VI with the RDMA attributes and MaxTransferSize asked for (0: the NIC's). */
static inline VIP_VI_HANDLE th_vi_rdma_mts(th_env *e, VIP_RELIABILITY_LEVEL rel, VIP_BOOLEAN rdmaw, VIP_BOOLEAN rdmar,
                                           VIP_ULONG mts, VIP_CQ_HANDLE scq, VIP_CQ_HANDLE rcq) {
    VIP_VI_ATTRIBUTES va;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = rel;
    va.Ptag = e->ptag;
    va.EnableRdmaWrite = rdmaw;
    va.EnableRdmaRead = rdmar;
    va.MaxTransferSize = mts;
    VIP_VI_HANDLE vi;
    CHECK(VipCreateVi(e->nic, &va, scq, rcq, &vi));
    return vi;
}

/* A VI with the RDMA attributes asked for (th_vi has neither). */
static inline VIP_VI_HANDLE th_vi_rdma(th_env *e, VIP_RELIABILITY_LEVEL rel, VIP_BOOLEAN rdmaw, VIP_BOOLEAN rdmar,
                                       VIP_CQ_HANDLE scq, VIP_CQ_HANDLE rcq) {
    return th_vi_rdma_mts(e, rel, rdmaw, rdmar, 0, scq, rcq);
}

/* A connected pair on one NIC, both VIs with RDMA write, and RDMA read where the level
 * has it (the reliable ones). */
static inline void th_pair_rdma(th_env *e, VIP_RELIABILITY_LEVEL rel, VIP_VI_HANDLE *a, VIP_VI_HANDLE *b,
                                const char *tag) {
    VIP_BOOLEAN rd = rel != VIP_SERVICE_UNRELIABLE;
    *a = th_vi_rdma(e, rel, VIP_TRUE, rd, NULL, NULL);
    *b = th_vi_rdma(e, rel, VIP_TRUE, rd, NULL, NULL);
    th_connect_peer(e, *a, *b, tag);
}

/* A memory region registered on its own: len bytes at the returned address, inside an
 * allocation with TH_GUARD bytes on either side that are not registered. The whole
 * allocation (guards included) is filled with TH_GUARD_BYTE. Free with th_region_free. */
#define TH_GUARD 256
#define TH_GUARD_BYTE 0xEE
typedef struct {
    char *base; /* the allocation */
    char *p;    /* the registered range [p, p + len) */
    size_t len;
    VIP_MEM_HANDLE mh;
    VIP_NIC_HANDLE nic;
} th_region;

static inline void th_region_new(th_env *e, th_region *r, size_t len, VIP_PROTECTION_HANDLE ptag, VIP_BOOLEAN rdmaw,
                                 VIP_BOOLEAN rdmar) {
    memset(r, 0, sizeof *r);
    size_t total = (len + 2 * TH_GUARD + 4095) & ~(size_t)4095;
    r->base = aligned_alloc(4096, total);
    if (!r->base) FATAL("out of memory (%zu bytes)", total);
    memset(r->base, TH_GUARD_BYTE, total);
    r->p = r->base + TH_GUARD;
    r->len = len;
    r->nic = e->nic;
    VIP_MEM_ATTRIBUTES ma = {ptag ? ptag : e->ptag, rdmaw, rdmar};
    CHECK(VipRegisterMem(e->nic, r->p, len, &ma, &r->mh));
}

static inline void th_region_free(th_region *r) {
    if (r->base) CHECK(VipDeregisterMem(r->nic, r->p, r->mh));
    free(r->base);
    memset(r, 0, sizeof *r);
}

/* Index of the first byte of [p, p + len) that is not TH_GUARD_BYTE, or -1. */
static inline long th_guard_check(const void *p, size_t len) {
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        if (b[i] != TH_GUARD_BYTE) return (long)i;
    return -1;
}

/* Sets d up as an RDMA descriptor (op VIP_CONTROL_OP_RDMAWRITE or _RDMAREAD): the
 * address segment names raddr under rmh, then nloc local segments splitting [lbuf,
 * lbuf + len) as evenly as possible (the last one takes the rest); nloc 0 makes a
 * descriptor with the address segment only. d needs room for 1 + nloc segments. */
static inline void th_set_rdma(VIP_DESCRIPTOR *d, VIP_UINT16 op, void *raddr, VIP_MEM_HANDLE rmh, VIP_MEM_HANDLE lmh,
                               void *lbuf, uint32_t len, unsigned nloc) {
    memset(&d->CS, 0, sizeof d->CS);
    d->CS.Control = op;
    d->CS.SegCount = (VIP_UINT16)(1 + nloc);
    VIP_ADDRESS_SEGMENT *a = (VIP_ADDRESS_SEGMENT *)th_seg(d, 0);
    memset(a, 0, sizeof *a);
    a->Data.Address = raddr;
    a->Handle = rmh;
    uint32_t off = 0;
    for (unsigned i = 0; i < nloc; i++) {
        uint32_t part = i + 1 == nloc ? len - off : len / nloc;
        th_seg(d, 1 + i)->Data.Address = (char *)lbuf + off;
        th_seg(d, 1 + i)->Handle = lmh;
        th_seg(d, 1 + i)->Length = part;
        off += part;
    }
}

/* ---- client/server connections -------------------------------------------------------- */

/* What the server thread does once VipConnectWait has a request. */
enum th_srv_action { TH_ACCEPT, TH_REJECT, TH_HOLD /* keep the handle, answer later */ };

typedef struct {
    /* in */
    VIP_NIC_HANDLE nic;
    const VIP_NIC_ATTRIBUTES *na;
    const char *disc;
    VIP_ULONG timeout;
    VIP_VI_HANDLE vi; /* accepts on this VI */
    enum th_srv_action action;
    /* out */
    VIP_RETURN wait_rc, answer_rc;
    VIP_CONN_HANDLE conn;
    th_addr remote;
    VIP_VI_ATTRIBUTES remote_attrs;
    pthread_t tid;
} th_server;

static void *th_server_main(void *arg) {
    th_server *s = arg;
    th_addr local;
    th_mkaddr(&local, s->na, s->disc);
    memset(&s->remote, 0, sizeof s->remote);
    s->wait_rc = VipConnectWait(s->nic, &local.a, s->timeout, &s->remote.a, &s->remote_attrs, &s->conn);
    s->answer_rc = VIP_NOT_DONE;
    if (s->wait_rc != VIP_SUCCESS) return NULL;
    if (s->action == TH_ACCEPT) s->answer_rc = VipConnectAccept(s->conn, s->vi);
    else if (s->action == TH_REJECT) s->answer_rc = VipConnectReject(s->conn);
    return NULL;
}

static inline void th_server_start(th_server *s) {
    if (pthread_create(&s->tid, NULL, th_server_main, s) != 0) FATAL("pthread_create failed");
}

static inline void th_server_join(th_server *s) { pthread_join(s->tid, NULL); }

/* VipConnectRequest, retried while nobody waits yet (VIP_NO_MATCH), for up to ms. */
static inline VIP_RETURN th_connect_request(VIP_VI_HANDLE vi, VIP_NET_ADDRESS *local, VIP_NET_ADDRESS *remote,
                                            VIP_ULONG timeout, VIP_VI_ATTRIBUTES *rattrs, unsigned ms) {
    uint64_t end = th_now_ms() + ms;
    for (;;) {
        VIP_RETURN r = VipConnectRequest(vi, local, remote, timeout, rattrs);
        if (r != VIP_NO_MATCH || th_now_ms() >= end) return r;
        th_sleep_ms(1);
    }
}

/* ---- device-side descriptor errors ------------------------------------------------------ */

/* Makes a bad descriptor: fills scratch (room for 64 segments, in e's arena, under
 * e->mh) or builds one elsewhere; returns the descriptor to post and sets *mh to the
 * memory handle to post it with. */
typedef VIP_DESCRIPTOR *(*th_mkbad_fn)(th_env *e, VIP_DESCRIPTOR *scratch, VIP_MEM_HANDLE *mh, void *ctx);

/* Waits for a specific descriptor to be done (bounded); its status, or 0 on timeout. */
static inline uint32_t th_await(VIP_DESCRIPTOR *d, VIP_VI_HANDLE poll_vi) {
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    while (!(__atomic_load_n(&d->CS.Status, __ATOMIC_ACQUIRE) & VIP_STATUS_DONE) && th_now_ms() < end)
        VipQueryVi(poll_vi, NULL, NULL, NULL, NULL); /* steps the firmware in inline mode */
    return __atomic_load_n(&d->CS.Status, __ATOMIC_ACQUIRE);
}

/* As th_await, stepping two VIs' NICs (a pair across two NICs in inline mode). */
static inline uint32_t th_await2(VIP_DESCRIPTOR *d, VIP_VI_HANDLE v1, VIP_VI_HANDLE v2) {
    uint64_t end = th_now_ms() + TH_WAIT_MS;
    while (!(__atomic_load_n(&d->CS.Status, __ATOMIC_ACQUIRE) & VIP_STATUS_DONE) && th_now_ms() < end) {
        VipQueryVi(v1, NULL, NULL, NULL, NULL);
        VipQueryVi(v2, NULL, NULL, NULL, NULL);
    }
    return __atomic_load_n(&d->CS.Status, __ATOMIC_ACQUIRE);
}

/* One bad descriptor on a fresh pair at level rel. recv_side 0: the bad one is a send;
 * 1: it is the receive that the next message meets. Checks that it completes with
 * exactly the error bits want (plus DONE and its op), that the process and the NIC go
 * on, and then the VIA rule for the level: unreliable VIs stay connected and the next
 * message gets through intact; reliable VIs both end in VIP_STATE_ERROR with their
 * other descriptors flushed (and on reliable reception the sender's descriptor of a
 * message the receiver could not take does not complete successfully). */
/* As th_bad_case, for a bad send descriptor whose completion names the operation
 * send_op (VIP_STATUS_OP_RDMA_WRITE / VIP_STATUS_OP_RDMA_READ for RDMA descriptors). */
static inline void th_bad_case_op(th_env *e, VIP_RELIABILITY_LEVEL rel, int recv_side, th_mkbad_fn mk, void *ctx,
                                  uint32_t want, uint32_t send_op, const char *what) {
    char ph[160];
    snprintf(ph, sizeof ph, "%s, %s side, %s", what, recv_side ? "receive" : "send", th_rel_name(rel));
    th_phase(ph);
    VIP_VI_HANDLE a, b;
    th_pair(e, rel, &a, &b, "bad");
    VIP_DESCRIPTOR *rgood = th_desc(e, 1), *sgood = th_desc(e, 1), *s1 = th_desc(e, 1);
    char *sbuf = th_alloc(e, 256), *rbuf = th_alloc(e, 256);
    memset(rbuf, 0, 256);
    VIP_MEM_HANDLE bad_mh = e->mh;
    VIP_DESCRIPTOR *bad = mk(e, th_desc(e, 64), &bad_mh, ctx);
    VIP_EXT_COUNTERS c0, c1;
    CHECK(VipExtQueryNicCounters(e->nic, &c0));
    uint32_t st, s1st = 0;
    if (!recv_side) {
        th_set1(rgood, e->mh, rbuf, 256);
        CHECK(VipPostRecv(b, rgood, e->mh));
        CHECK(VipPostSend(a, bad, bad_mh));
        st = th_await(bad, a);
    } else {
        CHECK(VipPostRecv(b, bad, bad_mh));
        th_set1(rgood, e->mh, rbuf, 256);
        CHECK(VipPostRecv(b, rgood, e->mh));
        memcpy(sbuf, "first", 6);
        th_set1(s1, e->mh, sbuf, 6);
        CHECK(VipPostSend(a, s1, e->mh));
        st = th_await(bad, b);
        s1st = th_await(s1, a);
    }
    uint32_t op = recv_side ? VIP_STATUS_OP_RECEIVE : send_op;
    EXPECT(st & VIP_STATUS_DONE, "%s: the bad descriptor never completed (status 0x%x)", ph, st);
    EXPECT((st & VIP_STATUS_ERROR_MASK) == want, "%s: status 0x%x, want error bits 0x%x", ph, st, want);
    EXPECT((st & VIP_STATUS_OP_MASK) == op, "%s: op bits 0x%x, want 0x%x", ph, st & VIP_STATUS_OP_MASK, op);
    c1 = th_nic_counters_at_least(e->nic, offsetof(VIP_EXT_COUNTERS, Errors), c0.Errors + 1);
    EXPECT(c1.Errors > c0.Errors, "%s: NIC error counter did not move", ph);
    /* the bad descriptor is the first the queue hands back */
    VIP_DESCRIPTOR *d = recv_side ? th_recv_wait(b, NULL) : th_send_wait(a, NULL);
    EXPECT(d == bad, "%s: Done returned %p, want the bad descriptor %p", ph, (void *)d, (void *)bad);
    if (rel == VIP_SERVICE_UNRELIABLE) {
        EXPECT(th_state(a) == VIP_STATE_CONNECTED && th_state(b) == VIP_STATE_CONNECTED,
               "%s: unreliable VIs left the connected state: %s / %s", ph, th_state_name(th_state(a)),
               th_state_name(th_state(b)));
        if (recv_side) {
            EXPECT((s1st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK)) == VIP_STATUS_DONE,
                   "%s: the sender's message status 0x%x", ph, s1st);
            th_send_wait(a, NULL);
        }
        memcpy(sbuf, "second", 7);
        th_set1(sgood, e->mh, sbuf, 7);
        CHECK(VipPostSend(a, sgood, e->mh));
        VIP_DESCRIPTOR *sd = th_send_wait(a, NULL);
        VIP_DESCRIPTOR *rd = th_recv_wait(b, NULL);
        EXPECT(sd == sgood && rd == rgood, "%s: next transfer: send %p recv %p", ph, (void *)sd, (void *)rd);
        if (rd == rgood)
            EXPECT((rd->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && rd->CS.Length == 7 && !strcmp(rbuf, "second"),
                   "%s: next message: status 0x%x len %u '%s'", ph, rd->CS.Status, rd->CS.Length, rbuf);
    } else {
        EXPECT(th_wait_state(a, VIP_STATE_ERROR, TH_WAIT_MS), "%s: a reliable VI with the error is %s, want ERROR",
               ph, th_state_name(th_state(a)));
        EXPECT(th_wait_state(b, VIP_STATE_ERROR, TH_WAIT_MS), "%s: its peer is %s, want ERROR", ph,
               th_state_name(th_state(b)));
        if (!recv_side) {
            d = th_recv_wait(b, NULL);
            EXPECT(d == rgood && th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR),
                   "%s: peer's receive not flushed (%p, status 0x%x)", ph, (void *)d, d ? d->CS.Status : 0);
        } else {
            d = th_recv_wait(b, NULL);
            EXPECT(d == rgood && th_status_has(d, VIP_STATUS_DESC_FLUSHED_ERROR),
                   "%s: the next receive not flushed (%p, status 0x%x)", ph, (void *)d, d ? d->CS.Status : 0);
            d = th_send_wait(a, NULL);
            EXPECT(d == s1, "%s: the sender's descriptor never came back", ph);
            if (d && rel == VIP_SERVICE_RELIABLE_RECEPTION)
                EXPECT(d->CS.Status & VIP_STATUS_ERROR_MASK,
                       "%s: reliable reception completed a send successfully that the receiver refused (0x%x)", ph,
                       d->CS.Status);
        }
        th_set1(sgood, e->mh, sbuf, 7);
        EXPECT_RC(VipPostSend(a, sgood, e->mh), VIP_INVALID_STATE);
    }
    th_unpair(a, b, 1000);
}

static inline void th_bad_case(th_env *e, VIP_RELIABILITY_LEVEL rel, int recv_side, th_mkbad_fn mk, void *ctx,
                               uint32_t want, const char *what) {
    th_bad_case_op(e, rel, recv_side, mk, ctx, want, VIP_STATUS_OP_SEND, what);
}

/* The NIC still connects and carries data after the errors above. */
static inline void th_nic_healthy(th_env *e) {
    th_phase("NIC still healthy");
    VIP_VI_HANDLE a, b;
    th_pair(e, VIP_SERVICE_RELIABLE_RECEPTION, &a, &b, "healthy");
    VIP_DESCRIPTOR *sd = th_desc(e, 1), *rd = th_desc(e, 1);
    char *sb = th_alloc(e, 64), *rb = th_alloc(e, 64);
    memcpy(sb, "ok", 3);
    th_set1(rd, e->mh, rb, 64);
    CHECK(VipPostRecv(b, rd, e->mh));
    th_set1(sd, e->mh, sb, 3);
    CHECK(VipPostSend(a, sd, e->mh));
    th_send_done_must(a, sd, "healthy send");
    VIP_DESCRIPTOR *d = th_recv_done_must(b, rd, "healthy recv");
    EXPECT((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0 && !strcmp(rb, "ok"), "healthy: status 0x%x", d->CS.Status);
    CHECK(VipDisconnect(a));
    CHECK(VipDisconnect(b));
}

#endif /* SOFTVIA_CONF_HELPERS_H */
