/*
 * hp_proto.h -- what the three programs of the hostile-peer test share (C and C++):
 * the bootstrap keys, the owner's published layout, discriminators, message formats and
 * the byte patterns every checked byte is compared with.
 *
 * Ranks (softvia-run -n 3 hp_run.sh): 0 the owner (hp_owner.c), 1 the well-behaved peer
 * (hp_good.c), 2 the hostile peer (hp_hostile.cc). docs/hostile-peer.md has the design.
 */
#ifndef SOFTVIA_HP_PROTO_H
#define SOFTVIA_HP_PROTO_H

#include <stdint.h>
#include <string.h>

#define HP_BOOT_MS 30000

/* kv keys (softvia_boot.h) */
#define HP_KEY_OWNER "hp.owner"     /* hp_owner_info, once the owner is set up */
#define HP_KEY_GOOD "hp.good"       /* hp_good_info */
#define HP_KEY_HOSTILE_DONE "hp.hostile.done" /* hp_hostile_report, when its attack ends */
#define HP_KEY_VERDICT "hp.verdict" /* int: the owner's failure count, after its checks */
#define HP_KEY_GOOD_DONE "hp.good.done" /* int: the good peer's; the owner disconnects after it */

/* Discriminators. The hostile peer knows them all: discriminators are not secrets. */
#define HP_DISC_GOOD "hp.good"       /* the good VIs: "hp.good.<vi>.o" (owner) <-> ".g" (good) */
#define HP_DISC_LISTEN "hp.listen"   /* the owner's standing listener for the hostile peer */
#define HP_DISC_WAIT "hp.wait"       /* the owner's VipConnectWait for it (now and then) */
#define HP_DISC_PEER_O "hp.peer.o"   /* owner's peer requests to the hostile: "hp.peer.o<k>" ... */
#define HP_DISC_PEER_H "hp.peer.h"   /* ... waiting for the hostile's "hp.peer.h<k>" */
#define HP_DISC_DECOY_O "hp.decoy.o" /* owner's peer request to the GOOD peer's NIC ... */
#define HP_DISC_DECOY_G "hp.decoy.g" /* ... that the good peer never answers */
#define HP_DISC_CLIENT "hp.client"  /* the owner's connect requests to the hostile's NIC */
#define HP_DISC_NOBODY "hp.nobody"  /* nobody listens: the answer is NO_MATCH */
#define HP_PEER_SLOTS 2

enum { HP_VI_U = 0, HP_VI_RD = 1, HP_VI_RR = 2, HP_NVI = 3 };

/* Sizes of the checked stream. */
#define HP_MAXMSG 16384u        /* largest good message payload (several frames on udp) */
#define HP_WIN 16u              /* good operations in flight per VI that take a receive */
#define HP_GOOD_RECVS 32u       /* receives the owner keeps posted per good VI */
#define HP_GW_SLOTS 32u         /* RDMA write slots per reliable good VI */
#define HP_GW_SLOT 4096u
#define HP_GR_BYTES 65536u      /* owner region the good peer reads */
#define HP_GPR_BYTES 65536u     /* good-peer region the owner reads */
#define HP_HW_BYTES 65536u      /* owner regions open to the hostile peer */
#define HP_HR_BYTES 65536u
#define HP_HOSTILE_RECV 2048u   /* receive buffer per descriptor on a hostile VI */
#define HP_GUARD 256u           /* guard bytes around every region and buffer */
#define HP_END_SEQ 0xFFFFFFFFu  /* a good message with this seq ends its VI's stream */

typedef struct {
    uint64_t addr;
    uint32_t memh, len;
} hp_region;

/* What the owner publishes (HP_KEY_OWNER). VI ids are the slot index (VipExtQueryViId);
 * generations are guessed by the hostile peer. */
typedef struct {
    uint32_t good_vi[HP_NVI];
    uint32_t decoy_vi;
    uint32_t thread_mode;
    uint32_t pad;
    hp_region gw, gr;     /* protection tag of the good VIs */
    hp_region gdesc;      /* good receive buffers and descriptors (no RDMA) */
    hp_region hw, hr;     /* protection tag of the hostile VIs */
    hp_region hdesc;      /* hostile receive buffers and descriptors (no RDMA) */
    uint64_t guard_lo, guard_hi; /* the whole arena, guards included */
    uint32_t gr_seed, hr_seed;
} hp_owner_info;

/* What the good peer publishes (HP_KEY_GOOD). */
typedef struct {
    uint32_t vi[HP_NVI];
    hp_region gpr;
    uint32_t gpr_seed, pad;
} hp_good_info;

/* What the hostile peer reports when it stops (HP_KEY_HOSTILE_DONE). */
typedef struct {
    uint64_t seed, frames, attacks, connects, leaks;
} hp_hostile_report;

/* A good message (good -> owner send): header then hp_pattern(seed of vi/seq). The
 * immediate data is hp_fnv over the whole payload. */
#define HP_MSG_MAGIC 0x44475048u /* "HPGD" */
typedef struct {
    uint32_t magic, vi, seq, len;  /* len: whole payload, header included */
    uint32_t credits_seen;         /* credit messages of the owner this VI took so far */
    uint32_t sent_msgs, sent_writes; /* HP_END_SEQ only: the totals of the stream ... */
    uint32_t u_sent;                 /* ... and, on the RD VI, of the unreliable one */
} hp_msg_hdr;

/* A credit message (owner -> good, on the reliable VIs): receives the owner took per VI
 * (messages and RDMA writes with immediate data), cumulative. */
#define HP_CREDIT_MAGIC 0x44524348u /* "HCRD" */
typedef struct {
    uint32_t magic, pad;
    uint32_t taken[HP_NVI];
    uint32_t u_next; /* one past the highest unreliable seq received */
} hp_credit;

/* The byte at position i of a pattern: a hash, so any range can be checked alone. */
static inline uint8_t hp_byte(uint32_t seed, uint64_t i) {
    uint32_t x = seed ^ (uint32_t)(i * 0x9E3779B1u) ^ (uint32_t)(i >> 32);
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    x *= 0x297A2D39u;
    x ^= x >> 15;
    return (uint8_t)x;
}
static inline void hp_fill(uint8_t *p, uint64_t len, uint32_t seed, uint64_t at) {
    for (uint64_t i = 0; i < len; i++) p[i] = hp_byte(seed, at + i);
}
/* Index of the first byte of p that differs from the pattern at offset at, or -1. */
static inline long hp_diff(const uint8_t *p, uint64_t len, uint32_t seed, uint64_t at) {
    for (uint64_t i = 0; i < len; i++)
        if (p[i] != hp_byte(seed, at + i)) return (long)i;
    return -1;
}
static inline uint32_t hp_fnv(const void *p, size_t n) {
    const uint8_t *b = (const uint8_t *)p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}
static inline uint32_t hp_mix(uint32_t a, uint32_t b) {
    uint32_t x = a * 0x85EBCA6Bu ^ (b + 0x9E3779B9u + (a << 6) + (a >> 2));
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    return x;
}
/* Pattern seeds: good messages, good RDMA writes. */
static inline uint32_t hp_msg_seed(uint32_t vi, uint32_t seq) { return hp_mix(0x11110000u + vi, seq); }
static inline uint32_t hp_write_seed(uint32_t vi, uint32_t wseq) { return hp_mix(0x22220000u + vi, wseq); }
/* Length of good message seq on vi: 0..HP_MAXMSG beyond the header, mostly small. */
static inline uint32_t hp_msg_len(uint32_t vi, uint32_t seq) {
    uint32_t r = hp_mix(0x33330000u + vi, seq);
    uint32_t extra = (r & 3) == 0 ? (r >> 8) % (HP_MAXMSG + 1) : (r >> 8) % 512;
    return (uint32_t)sizeof(hp_msg_hdr) + extra;
}
/* RDMA write wseq on vi: its slot in the owner's GW region and its length. */
static inline uint32_t hp_write_len(uint32_t vi, uint32_t wseq) { return 1 + hp_mix(0x44440000u + vi, wseq) % HP_GW_SLOT; }
static inline uint32_t hp_write_slot(uint32_t vi, uint32_t wseq) {
    return (vi == HP_VI_RD ? 0 : HP_GW_SLOTS) + wseq % HP_GW_SLOTS;
}

#endif /* SOFTVIA_HP_PROTO_H */
