/*
 * mp_common.h -- helpers for the multi-process tests (tests/multiproc), which run
 * under the launcher: softvia-run -n N prog args. Builds on the conformance helpers
 * (CHECK/EXPECT, th_env, descriptors) and adds the launcher side: rank, address
 * exchange, peer-to-peer connects between ranks, checksums.
 *
 * A rank that fails exits 1; the launcher then stops the others and reports it.
 */
#ifndef SOFTVIA_MP_COMMON_H
#define SOFTVIA_MP_COMMON_H

#include "../conformance/helpers.h"
#include <softvia_boot.h>

#define MP_BOOT_MS 30000 /* bootstrap collectives: generous, the ranks start unevenly */

static int mp_rank, mp_size;

/* th_init plus sv_boot_init; the program name carries the rank. */
static inline void mp_init(const char *prog, int want_size, unsigned watchdog_s) {
    if (sv_boot_init(&mp_rank, &mp_size) != 0) {
        fprintf(stderr, "%s: sv_boot_init failed (not started by softvia-run?)\n", prog);
        exit(T_FAIL);
    }
    static char name[96];
    snprintf(name, sizeof name, "%s[rank %d/%d]", prog, mp_rank, mp_size);
    th_init(name, watchdog_s);
    if (want_size && mp_size != want_size) {
        fprintf(stderr, "%s: needs softvia-run -n %d\n", name, want_size);
        exit(T_FAIL);
    }
}

/* --progress inline|thread -> open options */
static inline VIP_EXT_NIC_OPTIONS mp_progress_opt(const char *s) {
    VIP_EXT_NIC_OPTIONS o = {VIP_EXT_PROGRESS_INLINE};
    if (s && strcmp(s, "thread") == 0) o.Progress = VIP_EXT_PROGRESS_THREAD;
    else if (s && strcmp(s, "inline") != 0) FATAL("--progress must be inline or thread, not '%s'", s);
    return o;
}

static inline VIP_RELIABILITY_LEVEL mp_rel(const char *s) {
    if (!strcmp(s, "U")) return VIP_SERVICE_UNRELIABLE;
    if (!strcmp(s, "RD")) return VIP_SERVICE_RELIABLE_DELIVERY;
    if (!strcmp(s, "RR")) return VIP_SERVICE_RELIABLE_RECEPTION;
    FATAL("reliability must be U, RD or RR, not '%s'", s);
}

/* Opens this rank's NIC (with its ptag and a registered arena) in the given mode. */
static inline void mp_open(th_env *e, const char *progress, size_t arena) {
    memset(e, 0, sizeof *e);
    VIP_EXT_NIC_OPTIONS o = mp_progress_opt(progress);
    CHECK(VipExtOpenNic(NULL, &o, &e->nic));
    VIP_EXT_PROGRESS_MODE m;
    CHECK(VipExtGetProgressMode(e->nic, &m));
    th_poll_sleeps = m == VIP_EXT_PROGRESS_THREAD; /* every rank runs the same mode */
    CHECK(VipQueryNic(e->nic, &e->na));
    CHECK(VipCreatePtag(e->nic, &e->ptag));
    if (arena) {
        e->memsz = (arena + 4095) & ~(size_t)4095;
        e->mem = aligned_alloc(4096, e->memsz);
        if (!e->mem) FATAL("out of memory");
        memset(e->mem, 0, e->memsz);
        VIP_MEM_ATTRIBUTES ma = {e->ptag, VIP_FALSE, VIP_FALSE};
        CHECK(VipRegisterMem(e->nic, e->mem, e->memsz, &ma, &e->mh));
    }
}

/* Asynchronous errors are logged (they explain a broken connection in a failure). */
static const char *mp_error_name(VIP_ERROR_CODE c) {
    static const char *n[] = {"POST_DESC", "CONN_LOST", "RECVQ_EMPTY", "VI_OVERRUN", "RDMAW_PROT", "RDMAW_DATA",
                              "RDMAW_ABORT", "RDMAR_PROT", "COMP_PROT", "RDMA_TRANSPORT", "CATASTROPHIC"};
    return (unsigned)c < sizeof n / sizeof *n ? n[c] : "?";
}
static void mp_error_logger(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *ed) {
    (void)ctx;
    fprintf(stderr, "%s: asynchronous error VIP_ERROR_%s on VI %p (resource %d, descriptor %p)\n", th_prog,
            mp_error_name(ed->ErrorCode), (void *)ed->ViHandle, ed->ResourceCode, (void *)ed->DescriptorPtr);
}
static inline void mp_log_errors(th_env *e) { CHECK(VipErrorCallback(e->nic, NULL, mp_error_logger)); }

/* Every rank's NIC address, by rank (addr[r], len *alen). */
typedef struct {
    uint8_t addr[64][64];
    VIP_UINT16 alen;
} mp_addrs;

static inline void mp_exchange(th_env *e, mp_addrs *out) {
    uint8_t mine[64] = {0};
    if (e->na.NicAddressLen > 64) FATAL("NIC address of %u bytes", e->na.NicAddressLen);
    memcpy(mine, e->na.LocalNicAddress, e->na.NicAddressLen);
    if (mp_size > 64) FATAL("more than 64 ranks");
    if (sv_boot_allgather(mine, 64, out->addr, MP_BOOT_MS) != 0) FATAL("address allgather failed");
    out->alen = e->na.NicAddressLen;
}

static inline VIP_NET_ADDRESS *mp_mkaddr(th_addr *buf, const uint8_t *nic, VIP_UINT16 alen, const char *disc) {
    memset(buf, 0, sizeof *buf);
    buf->a.HostAddressLen = alen;
    memcpy(buf->a.HostAddress, nic, alen);
    buf->a.DiscriminatorLen = (VIP_UINT16)strlen(disc);
    memcpy(buf->a.HostAddress + alen, disc, strlen(disc));
    return &buf->a;
}

/* Starts a peer-to-peer connect of vi to rank peer, discriminators "<tag>.<from>-<to>". */
static inline void mp_peer_request(VIP_VI_HANDLE vi, const mp_addrs *ad, int peer, const char *tag) {
    char ld[96], rd[96];
    snprintf(ld, sizeof ld, "%s.%d-%d", tag, mp_rank, peer);
    snprintf(rd, sizeof rd, "%s.%d-%d", tag, peer, mp_rank);
    th_addr l, r;
    CHECK(VipConnectPeerRequest(vi, mp_mkaddr(&l, ad->addr[mp_rank], ad->alen, ld),
                                mp_mkaddr(&r, ad->addr[peer], ad->alen, rd), 20000));
}

/* Polls VipConnectPeerDone until the connection is up (through th_peer_done_poll, which
 * reports a PeerDone race, should it come back, and leaves failing on it to
 * peer_connect). */
static inline void mp_peer_finish(VIP_VI_HANDLE vi, int peer) {
    VIP_RETURN r;
    uint64_t end = th_now_ms() + 25000;
    while ((r = th_peer_done_poll(vi)) == VIP_NOT_DONE && th_now_ms() < end) sched_yield();
    if (r != VIP_SUCCESS) FATAL("peer connect to rank %d: %s", peer, th_rs(r));
}

/* Every rank's *v (len bytes) becomes rank root's: a broadcast over the allgather. */
static inline void mp_from_rank(int root, void *v, size_t len) {
    uint8_t *all = malloc(len * (size_t)mp_size);
    if (!all) FATAL("out of memory");
    if (sv_boot_allgather(v, len, all, MP_BOOT_MS) != 0) FATAL("allgather failed");
    memcpy(v, all + len * (size_t)root, len);
    free(all);
}

/* FNV-1a over a buffer: the checksum a message carries in its immediate data. */
static inline uint32_t mp_fnv(const void *p, size_t n) {
    const uint8_t *b = p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

/* Deterministic pseudo-random numbers, the same on every rank. */
static inline uint32_t mp_rand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

#endif /* SOFTVIA_MP_COMMON_H */
