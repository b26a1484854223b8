// hp_attacks_conn.cc -- the hostile peer's attacks on a connection the owner accepted
// from it (or made with it by peer request): RDMA at and across region bounds, messages
// in chaotic fragments, ACK/NAK forgeries, protocol-valid but hostile sequences, floods
// of legal requests, frames that change after they were sent (docs/hostile-peer.md).
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "hp_hostile.h"

namespace hp {

// An RDMA write or read request at and across the bounds of the owner's regions. Only
// a read within HR under HR's handle may be answered (hp_hostile.cc checks the answer).
void rdma_bounds(Hostile& H) {
    Conn* c = some_conn(H);
    if (!c) return fuzz_header(H);
    c->ops++;
    static const uint32_t lens[] = {0, 1, 16, 64, 1000, HP_HW_BYTES - 1, HP_HW_BYTES, HP_HW_BYTES + 1,
                                    NICFW_MAX_TRANSFER, NICFW_MAX_TRANSFER + 1, 0xFFFFFFFFu};
    uint32_t len = H.chance(50) ? lens[H.below(sizeof lens / sizeof lens[0])] : H.below(HP_HW_BYTES + 2);
    const bool write = H.chance(50);
    nicfw_rdma_ext x = ext_guess(H, len, write);
    nicfw_frame_hdr h = header(write ? NICFW_F_RDMA_WRITE : NICFW_F_READ_REQ, c->owner_vi, c->me);
    h.msg_len = len;
    h.seq = c->seq++;
    if (!write) {  // (commit() records it for the answer's check)
        uint8_t* f = reserve(H, kHdr + kExt);
        if (!f) return;
        memcpy(f, &h, kHdr);
        memcpy(f + kHdr, &x, kExt);
        commit(H, f, kHdr + kExt);
        return;
    }
    // A write: every fragment if it is a few, else the first two.
    const uint32_t room = std::min<uint32_t>(H.max_frame - kHdr - kExt, 4096);
    uint32_t frames = len <= 4 * room ? std::max<uint32_t>(1, (len + room - 1) / room) : 2;
    if (H.chance(10)) h.flags |= NICFW_FF_IMMEDIATE;
    for (uint32_t i = 0; i < frames; i++) {
        h.offset = i * room;
        h.frag_len = h.offset >= len ? 0 : std::min(room, len - h.offset);
        h.flags = static_cast<uint8_t>((h.flags & ~NICFW_FF_LAST) | (h.offset + h.frag_len >= len ? NICFW_FF_LAST : 0));
        uint8_t* f = reserve(H, kHdr + kExt + h.frag_len);
        if (!f) return;
        memcpy(f, &h, kHdr);
        memcpy(f + kHdr, &x, kExt);
        fill_random(H, f + kHdr + kExt, h.frag_len);
        commit(H, f, kHdr + kExt + h.frag_len);
    }
}

// One message in fragments, sent out of order, twice, overlapping, with holes, with a
// LAST in the middle, changing its length, type or sequence number half way.
void frag_chaos(Hostile& H) {
    Conn* c = some_conn(H);
    if (!c) return fuzz_header(H);
    c->ops++;
    const bool write = H.chance(30);
    uint32_t L = H.chance(85) ? 1 + H.below(HP_HOSTILE_RECV) : HP_HOSTILE_RECV + 1 + H.below(6000);
    uint32_t F = 64 * (1 + H.below(16));
    F = std::min(F, H.max_frame - kHdr - kExt);
    struct Frag {
        uint32_t off, len;
        uint8_t flags;
        uint32_t msg_len, seq;
        uint8_t type;
    };
    std::vector<Frag> fr;
    const uint8_t type = write ? NICFW_F_RDMA_WRITE : NICFW_F_DATA;
    const uint32_t seq = c->seq++;
    for (uint32_t off = 0; off < L && fr.size() < 16; off += F) {
        uint32_t n = std::min(F, L - off);
        fr.push_back(Frag{off, n, 0, L, seq, type});
    }
    fr.back().flags |= NICFW_FF_LAST;
    if (H.chance(30)) fr.back().flags |= NICFW_FF_IMMEDIATE;
    const unsigned mode = H.below(11);
    auto pick = [&] { return static_cast<size_t>(H.below(static_cast<uint32_t>(fr.size()))); };
    switch (mode) {
        case 0: std::shuffle(fr.begin(), fr.end(), H.rng); break;
        case 1: for (int i = 0; i < 3; i++) fr.insert(fr.begin() + static_cast<long>(pick()), fr[pick()]); break;
        case 2: if (fr.size() > 1) fr.erase(fr.begin() + static_cast<long>(pick())); break;
        case 3: { Frag& g = fr[pick()]; g.off = g.off >= 32 ? g.off - 32 : g.off + 1; break; }
        case 4: fr[pick()].flags |= NICFW_FF_LAST; break;
        case 5: fr[pick()].msg_len = H.chance(50) ? L + 1 + H.below(64) : L / 2; break;
        case 6: fr[pick()].type = write ? NICFW_F_DATA : NICFW_F_RDMA_WRITE; break;
        case 7: fr[pick()].seq = seq + (H.chance(50) ? 1 : 0xFFFFFFFFu); break;
        case 8: fr[pick()].len += 1 + H.below(64); break;  // past the message's end
        case 9: fr.back().flags |= NICFW_FF_ACKED; break;   // an ACK trailer that may not be there
        default: break;                                       // in order: the control case
    }
    nicfw_rdma_ext x{H.owner.hw.addr + H.below(HP_HW_BYTES - std::min<uint32_t>(L, HP_HW_BYTES) + 1), H.owner.hw.memh, 0};
    for (const Frag& g : fr) {
        const uint32_t ext = g.type == NICFW_F_RDMA_WRITE ? kExt : 0;
        const uint32_t tail = (g.flags & NICFW_FF_ACKED) && H.chance(50) ? 4 : 0;
        const uint32_t body = std::min(g.len, H.max_frame - kHdr - ext - tail);
        nicfw_frame_hdr h = header(g.type, c->owner_vi, c->me);
        h.flags = g.flags;
        h.msg_len = g.msg_len;
        h.offset = g.off;
        h.frag_len = g.len;  // may claim more than the frame holds (mode 8)
        h.seq = g.seq;
        h.imm = H.r32();
        uint8_t* f = reserve(H, kHdr + ext + body + tail);
        if (!f) return;
        memcpy(f, &h, kHdr);
        if (ext) memcpy(f + kHdr, &x, kExt);
        fill_random(H, f + kHdr + ext, body + tail);
        commit(H, f, kHdr + ext + body + tail);
    }
}

// ACK and NAK forgeries: on our own connection (the owner has sends waiting for answers)
// and, as forgeries, on the good VIs.
void ack_nak(Hostile& H) {
    Conn* c = some_conn(H);
    const bool own = c && H.chance(60);
    static const uint8_t types[] = {NICFW_F_ACK, NICFW_F_ACK, NICFW_F_NAK, NICFW_F_READ_RESP};
    uint8_t type = types[H.below(4)];
    nicfw_frame_hdr h = own ? header(type, c->owner_vi, c->me)
                            : header(type, NICFW_VI_MAKE(H.owner.good_vi[H.below(HP_NVI)], 1),
                                     NICFW_VI_MAKE(H.good.vi[H.below(HP_NVI)], 1));
    uint32_t base = own ? c->owner_next : 0;
    switch (H.below(5)) {
        case 0: h.seq = base; break;
        case 1: h.seq = base + 1 + H.below(100); break;
        case 2: h.seq = base - 1 - H.below(4); break;
        default: h.seq = pool32(H); break;
    }
    if (H.chance(30)) h.flags = NICFW_FF_GAP;
    h.imm = H.chance(50) ? H.r32() : (NICFW_DS_RDMA_PROT_ERROR | NICFW_DS_DONE | NICFW_DS_OP_RDMA_READ);
    uint32_t pay = 0;
    if (type == NICFW_F_READ_RESP) {
        h.msg_len = pool32(H);
        h.offset = H.chance(50) ? 0 : pool32(H);
        pay = H.below(std::min<uint32_t>(H.max_frame - kHdr, 4096) + 1);
        h.frag_len = H.chance(80) ? pay : pool32(H);
    }
    if (own) c->ops++;
    uint8_t* f = reserve(H, kHdr + pay);
    if (!f) return;
    memcpy(f, &h, kHdr);
    fill_random(H, f + kHdr, pay);
    commit(H, f, kHdr + pay);
}

static void data(Hostile& H, Conn& c, uint32_t seq, uint32_t msg_len, uint32_t off, uint32_t frag, uint8_t flags) {
    nicfw_frame_hdr h = header(NICFW_F_DATA, c.owner_vi, c.me);
    h.seq = seq;
    h.msg_len = msg_len;
    h.offset = off;
    h.frag_len = frag;
    h.flags = flags;
    h.imm = H.r32();
    const uint32_t tail = (flags & NICFW_FF_ACKED) ? 4 : 0;
    uint8_t* f = reserve(H, kHdr + frag + tail);
    if (!f) return;
    memcpy(f, &h, kHdr);
    fill_random(H, f + kHdr, frag + tail);
    commit(H, f, kHdr + frag + tail);
}

// Protocol-valid, and hostile: more messages than receives, a 16 MiB message that never
// ends, a flood of legal RDMA reads, data after our own DISCONNECT, a repeated connect
// request, messages around the receive buffer's size, acknowledgements of what the
// owner never sent.
void valid_hostile(Hostile& H) {
    Conn* c = some_conn(H);
    if (!c) return conn_fuzz(H);
    c->ops++;
    const uint32_t room = H.max_frame - kHdr;
    switch (H.below(8)) {
        case 0:
            for (int i = 0; i < 12; i++) data(H, *c, c->seq++, 0, 0, 0, NICFW_FF_LAST | NICFW_FF_IMMEDIATE);
            break;
        case 1:
            for (uint32_t i = 0; i < 3; i++) data(H, *c, c->seq, NICFW_MAX_TRANSFER, i * room, room, 0);
            c->seq++;
            data(H, *c, c->seq++, 16, 0, 16, NICFW_FF_LAST);
            break;
        case 2:
            for (int i = 0; i < 32; i++) {
                nicfw_frame_hdr h = header(NICFW_F_READ_REQ, c->owner_vi, c->me);
                h.msg_len = H.owner.hr.len;
                h.seq = c->seq++;
                nicfw_rdma_ext x{H.owner.hr.addr, H.owner.hr.memh, 0};
                uint8_t* f = reserve(H, kHdr + kExt);
                if (!f) return;
                memcpy(f, &h, kHdr);
                memcpy(f + kHdr, &x, kExt);
                commit(H, f, kHdr + kExt);
            }
            break;
        case 3: {
            uint8_t* f = reserve(H, kHdr);
            if (!f) return;
            nicfw_frame_hdr h = header(NICFW_F_DISCONNECT, c->owner_vi, c->me);
            memcpy(f, &h, kHdr);
            commit(H, f, kHdr);
            for (int i = 0; i < 5; i++) data(H, *c, c->seq++, 64, 0, 64, NICFW_FF_LAST);
            c->st = Conn::kFree;
            break;
        }
        case 4:
            if (c->req_id && c - H.conns < kListenConns) send_conn_req(H, *c, 0);
            break;
        case 5: {
            const uint32_t sz[] = {HP_HOSTILE_RECV - 1, HP_HOSTILE_RECV, HP_HOSTILE_RECV + 1};
            uint32_t L = sz[H.below(3)];
            for (uint32_t off = 0; off < L; off += std::min(room, 1024u)) {
                uint32_t n = std::min({room, 1024u, L - off});
                data(H, *c, c->seq, L, off, n, off + n == L ? NICFW_FF_LAST : 0);
            }
            c->seq++;
            break;
        }
        case 6: {
            nicfw_frame_hdr h = header(NICFW_F_RDMA_WRITE, c->owner_vi, c->me);
            h.msg_len = h.frag_len = 256;
            h.flags = NICFW_FF_LAST | NICFW_FF_IMMEDIATE;
            h.seq = c->seq++;
            nicfw_rdma_ext x{H.owner.hw.addr + H.below(HP_HW_BYTES - 256), H.owner.hw.memh, 0};
            uint8_t* f = reserve(H, kHdr + kExt + 256);
            if (!f) return;
            memcpy(f, &h, kHdr);
            memcpy(f + kHdr, &x, kExt);
            fill_random(H, f + kHdr + kExt, 256);
            commit(H, f, kHdr + kExt + 256);
            break;
        }
        default: {
            data(H, *c, c->seq++, 32, 0, 32, NICFW_FF_LAST | NICFW_FF_ACKED);  // its ACK trailer is random
            break;
        }
    }
}

// Legal RDMA reads of part of HR, as fast as the link takes them, while not reading what
// comes back for a while: the owner cannot answer (its link to us is full) and must not
// grow without bound meanwhile.
// How long a flood lasts: 1-2 ms and at most 64-512 requests (more would crowd out every
// other attack), or HP_FLOOD_MS without a cap (to see what a long one does).
static uint64_t flood_ms(Hostile& H, uint32_t* cap) {
    const char* e = getenv("HP_FLOOD_MS");
    *cap = e && *e ? ~0u : 64u << H.below(4);
    return e && *e ? strtoull(e, nullptr, 10) : 1 + H.below(2);
}

void read_flood(Hostile& H) {
    Conn* c = some_conn(H);
    if (!c || c->rel == NICFW_REL_UNRELIABLE) return rdma_bounds(H);
    c->ops += 100;
    const uint32_t first = c->seq;
    uint32_t cap;
    const uint64_t until = now_ms() + flood_ms(H, &cap);
    const uint32_t len = 1 + H.below(4096);  // the cost is in the number of requests, not their size
    const nicfw_rdma_ext x{H.owner.hr.addr + H.below(H.owner.hr.len - len + 1), H.owner.hr.memh, 0};
    H.reads.push_back(Read{c->me, first, ~0u, x.addr, len, true});
    H.flooding = true;  // one record for them all (commit() records every other request)
    nicfw_frame_hdr h = header(NICFW_F_READ_REQ, c->owner_vi, c->me);
    h.msg_len = len;
    while (c->seq - first < cap && now_ms() < until) {
        uint8_t* f = H.tr->tx_reserve(H.peer, kHdr + kExt);  // not reserve(): it would read answers
        if (!f) {
            H.tr->tx_flush();
            sched_yield();
            continue;
        }
        h.seq = c->seq++;
        memcpy(f, &h, kHdr);
        memcpy(f + kHdr, &x, kExt);
        commit(H, f, kHdr + kExt);
        if (((c->seq - first) & 255) == 0) H.tr->tx_flush();
    }
    H.flooding = false;
    for (auto it = H.reads.rbegin(); it != H.reads.rend(); ++it)
        if (it->conn_me == c->me && it->seq == first) {
            it->count = c->seq - first;
            break;
        }
    H.flooded += c->seq - first;
}

// Connect requests nobody listens for, each answered with NO_MATCH, as fast as the link
// takes them, while not reading the answers: they wait in the owner's control backlog,
// and the owner's other peers must not wait with them.
void ctl_flood(Hostile& H) {
    uint32_t cap;
    const uint64_t until = now_ms() + flood_ms(H, &cap);
    nicfw_conn_payload pl{};
    pl.reliability = NICFW_REL_RELIABLE_DELIVERY;
    put_disc(pl, "", "hp.nobody");
    const uint32_t len = kFixed + pl.dst_disc_len;
    nicfw_frame_hdr h = header(NICFW_F_CONN_REQ, 0xFFFFFFFFu, H.next_me++);
    h.msg_len = len;
    unsigned sent = 0;
    while (sent < cap && now_ms() < until) {
        uint8_t* f = H.tr->tx_reserve(H.peer, kHdr + len);  // not reserve(): it would read answers
        if (!f) {
            H.tr->tx_flush();
            sched_yield();
            continue;
        }
        h.seq = H.r32();
        memcpy(f, &h, kHdr);
        memcpy(f + kHdr, &pl, len);
        commit(H, f, kHdr + len);
        if ((++sent & 255) == 0) H.tr->tx_flush();
    }
    H.flooded += sent;
}

// shm: frames keep changing after they were committed, while the owner reads them (the
// owner must take one snapshot of every field it checks).
void scribble(Hostile& H) {
    Conn* c = some_conn(H);
    H.scribble_n = 0;
    for (int i = 0; i < 4; i++) {
        if (c && H.chance(60)) data(H, *c, c->seq++, 512, 0, 512, NICFW_FF_LAST);
        else conn_fuzz(H);
    }
    const unsigned n = H.scribble_n;
    H.scribble_n = 8;
    timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (unsigned i = 0; i < n; i++) {
            uint32_t len = H.scribble_len[i];
            if (!len) continue;
            uint32_t at = H.chance(70) ? H.below(std::min<uint32_t>(len, kHdr + kFixed)) : H.below(len);
            __atomic_store_n(H.scribble[i] + at, static_cast<uint8_t>(H.r32()), __ATOMIC_RELAXED);
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 30000);
}

}  // namespace hp
