/*
 * hp_arena.h -- guarded memory for the hostile-peer test programs (C, vipl.h).
 *
 * One arena per process, filled first with a guard pattern (hp_byte(HP_GUARD_SEED, arena
 * offset)). Regions are carved out of it with HP_GUARD guard bytes after each, and
 * buffers inside a region get a 64-byte guard after them. Every guard range is listed,
 * so hp_guards_check() can tell whether anything (the NIC, above all) wrote where
 * nothing may write.
 */
#ifndef SOFTVIA_HP_ARENA_H
#define SOFTVIA_HP_ARENA_H

#include "../conformance/helpers.h"
#include "hp_proto.h"

#define HP_GUARD_SEED 0x6A09E667u
#define HP_BUF_GUARD 64u
#define HP_MAX_GUARDS 4096

typedef struct {
    uint8_t *p;
    size_t len, used;
    VIP_MEM_HANDLE mh;
} hp_reg;

static uint8_t *hp_A;
static size_t hp_A_len, hp_A_used;
static struct {
    size_t off, len;
} hp_guards[HP_MAX_GUARDS];
static int hp_nguards;

static inline void hp_guard_add(size_t off, size_t len) {
    if (hp_nguards == HP_MAX_GUARDS) FATAL("too many guard ranges");
    hp_guards[hp_nguards].off = off;
    hp_guards[hp_nguards].len = len;
    hp_nguards++;
}

static inline void hp_arena_init(size_t len) {
    hp_A_len = (len + 4095) & ~(size_t)4095;
    hp_A = (uint8_t *)mmap(NULL, hp_A_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (hp_A == MAP_FAILED) FATAL("no memory for a %zu-byte arena", hp_A_len);
    hp_fill(hp_A, hp_A_len, HP_GUARD_SEED, 0);
    hp_guard_add(0, HP_GUARD);
    hp_A_used = HP_GUARD;
}

/* A region of len bytes (64-byte aligned) followed by HP_GUARD guard bytes. Its content
 * is left as the guard pattern: the caller fills it. */
static inline void hp_region_carve(hp_reg *r, size_t len) {
    size_t off = (hp_A_used + 63) & ~(size_t)63;
    if (off + len + HP_GUARD > hp_A_len) FATAL("arena exhausted");
    if (off > hp_A_used) hp_guard_add(hp_A_used, off - hp_A_used);
    r->p = hp_A + off;
    r->len = len;
    r->used = 0;
    hp_guard_add(off + len, HP_GUARD);
    hp_A_used = off + len + HP_GUARD;
}

static inline void hp_region_register(VIP_NIC_HANDLE nic, hp_reg *r, VIP_PROTECTION_HANDLE ptag, int rdmaw,
                                      int rdmar) {
    VIP_MEM_ATTRIBUTES ma = {ptag, rdmaw ? VIP_TRUE : VIP_FALSE, rdmar ? VIP_TRUE : VIP_FALSE};
    CHECK(VipRegisterMem(nic, r->p, r->len, &ma, &r->mh));
}

/* len zeroed bytes inside r, 64-byte aligned, with a guard after them. */
static inline void *hp_alloc(hp_reg *r, size_t len) {
    size_t off = (r->used + 63) & ~(size_t)63;
    if (off + len + HP_BUF_GUARD > r->len) FATAL("region exhausted");
    if (off > r->used) hp_guard_add((size_t)(r->p - hp_A) + r->used, off - r->used);
    memset(r->p + off, 0, len);
    hp_guard_add((size_t)(r->p - hp_A) + off + len, HP_BUF_GUARD);
    r->used = off + len + HP_BUF_GUARD;
    return r->p + off;
}

/* The guard after a buffer from hp_alloc: intact? */
static inline int hp_buf_guard_ok(const void *buf, size_t len) {
    size_t off = (size_t)((const uint8_t *)buf - hp_A) + len;
    return hp_diff(hp_A + off, HP_BUF_GUARD, HP_GUARD_SEED, off) < 0;
}

/* Every guard range; reports each damaged one. Returns how many were damaged. */
static inline int hp_guards_check(const char *when) {
    int bad = 0;
    for (int i = 0; i < hp_nguards; i++) {
        long at = hp_diff(hp_A + hp_guards[i].off, hp_guards[i].len, HP_GUARD_SEED, hp_guards[i].off);
        if (at >= 0) {
            TH_FAILMSG("%s: guard bytes at arena offset %zu (+%ld of a %zu-byte guard) changed: 0x%02x", when,
                       hp_guards[i].off, at, hp_guards[i].len, hp_A[hp_guards[i].off + (size_t)at]);
            th_failures++;
            bad++;
            /* take the damage into the pattern's place again so it is reported once */
            hp_fill(hp_A + hp_guards[i].off, hp_guards[i].len, HP_GUARD_SEED, hp_guards[i].off);
        }
    }
    return bad;
}

static inline hp_region hp_pub(const hp_reg *r) {
    hp_region o;
    o.addr = (uint64_t)(uintptr_t)r->p;
    o.memh = r->mh;
    o.len = (uint32_t)r->len;
    return o;
}

#endif /* SOFTVIA_HP_ARENA_H */
