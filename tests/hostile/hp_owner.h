/*
 * hp_owner.h -- the owner's state (hp_owner.c and the two parts it includes:
 * hp_owner_stream.h, the checked stream with the good peer; hp_owner_hostile.h, the
 * targets offered to the hostile peer). One translation unit: the test helpers keep
 * their failure count in a static.
 */
#ifndef SOFTVIA_HP_OWNER_H
#define SOFTVIA_HP_OWNER_H

#include "hp_arena.h"

#define HP_SENDQ 16u     /* owner send descriptors per good VI (credits, RDMA reads) */
#define HP_READ_MAX 8192u
#define HP_MAXH 7        /* hostile VIs at once: HP_PEER_SLOTS peer requests, a client, accepted ones */
#define HP_CLIENT_SLOT HP_PEER_SLOTS
#define HP_H_RECVS 8
#define HP_H_SENDS 4

typedef struct {
    VIP_DESCRIPTOR *d;
    uint8_t *buf;
    uint32_t cap;
    int kind;          /* send queue: HP_OP_* */
    uint32_t off, len; /* RDMA read: where in the good peer's region */
    int posted;
} hp_slot;

enum { HP_OP_CREDIT = 1, HP_OP_READ = 2 };

typedef struct {
    VIP_VI_HANDLE vi;
    hp_slot r[HP_GOOD_RECVS];
    hp_slot s[HP_SENDQ];
    uint32_t s_head, s_tail;      /* send ring: posted [head, tail), completing in that order */
    uint32_t next_seq, next_wseq; /* the next message / RDMA write expected */
    uint32_t taken, msgs, writes; /* receives completed: all, messages, writes with immediate */
    uint32_t credits_sent, credits_seen;
    uint32_t reads_out;
    int ended, broken;
    uint32_t end_msgs, end_writes;
} hp_gvi;

enum { HV_FREE = 0, HV_PENDING, HV_LIVE };

typedef struct {
    int state;
    VIP_VI_HANDLE vi;
    VIP_RELIABILITY_LEVEL rel;
    hp_slot r[HP_H_RECVS], s[HP_H_SENDS];
    uint64_t t_next;   /* free: when to arm again; live: when to send next */
    uint32_t rounds;
} hp_hvi;

typedef struct {
    VIP_NIC_HANDLE nic;
    VIP_NIC_ATTRIBUTES na;
    int thread_mode;
    VIP_PROTECTION_HANDLE ptag_g, ptag_h;
    hp_reg gdesc, gw, gr, hdesc, hw, hr;
    uint8_t *gw_shadow;
    uint32_t gr_seed, hr_seed;
    uint8_t own_addr[64], hostile_addr[64];
    VIP_UINT16 addr_len;
    hp_good_info good;
    hp_gvi g[HP_NVI];
    VIP_VI_HANDLE decoy;
    uint32_t u_sent;              /* unreliable messages the good peer says it sent */
    uint32_t credit_taken[HP_NVI];/* what the last credit message reported */
    uint64_t credit_ms;
    uint32_t credit_rotor;
    uint32_t reads_ok, msgs_after;
    int hostile_done;
    /* hostile targets */
    VIP_EXT_LISTEN_HANDLE listen;
    hp_hvi h[HP_MAXH];
    uint32_t h_accepted, h_peer_connected, h_client_connected, h_refused, h_torn, h_spoofed, h_errors;
    uint32_t good_errors;
    int good_error_code;
    uint8_t *raddr_buf;           /* RemoteAddr of VipExtListenDone: exactly as big as VIA says */
    size_t raddr_len;
} hp_owner_t;

static hp_owner_t O;

static uint32_t hp_rand_state = 0x12345u;
static uint32_t hp_rand(void) {
    hp_rand_state = hp_rand_state * 1664525u + 1013904223u;
    return hp_rand_state >> 8;
}

static int hp_report_budget = 20; /* detailed messages before only counting */
#define HP_FAIL(...)                                \
    do {                                            \
        if (hp_report_budget > 0) {                 \
            hp_report_budget--;                     \
            TH_FAILMSG(__VA_ARGS__);                \
        }                                           \
        th_failures++;                              \
    } while (0)


#endif /* SOFTVIA_HP_OWNER_H */
