// hp_attacks.cc -- the frames the hostile peer sends (docs/hostile-peer.md lists them).
//
// Every attack draws from the seeded generator only, so a seed replays the same choices
// (what the owner does in between is timing, and may differ). Field values come from
// pools of boundaries (0, 1, around the MTU, the 16 MiB message limit, the sign bit,
// all ones) mixed with random ones; VI ids from what the hostile peer knows (the good
// VIs on both sides, the decoy, the owner's VIs connected to it) mixed with guesses.
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "hp_hostile.h"

namespace hp {

const char* const kAttackNames[kNumAttacks] = {"garbage",   "badheader",  "fuzzheader", "forgegood",
                                               "connfuzz",  "rdmabounds", "fragchaos",  "acknak",
                                               "validhostile", "spoofaddr", "scribble", "rawudp"};

uint32_t pool32(Hostile& H) {
    static const uint32_t p[] = {0, 1, 2, 3, 31, 32, 33, 63, 64, 65, 1407, 1408, 1409, 1447, 1448, 2047, 2048,
                                 2049, 4095, 4096, 8159, 8160, 8191, 8192, 8193, 0xFFFF, 0x10000,
                                 NICFW_MAX_TRANSFER - 1, NICFW_MAX_TRANSFER, NICFW_MAX_TRANSFER + 1, 0x7FFFFFFF,
                                 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
    if (H.chance(20)) return H.r32();
    if (H.chance(10)) return H.below(16);
    return p[H.below(sizeof p / sizeof p[0])];
}

// A VI id at the owner: mostly one that exists there.
uint32_t vi_guess(Hostile& H) {
    const uint32_t gen = H.chance(80) ? 1 : H.below(4);
    switch (H.below(8)) {
        case 0:
        case 1: return NICFW_VI_MAKE(H.owner.good_vi[H.below(HP_NVI)], gen);
        case 2: return NICFW_VI_MAKE(H.owner.decoy_vi, gen);
        case 3: {
            Conn* c = some_conn(H);
            return c ? c->owner_vi : H.r32();
        }
        case 4: return H.owner_peer_vi[H.below(HP_PEER_SLOTS)];
        case 5: return NICFW_VI_MAKE(H.below(16), gen);
        case 6: return 0xFFFFFFFFu;
        default: return H.chance(50) ? H.r32() : NICFW_VI_MAKE(4095 + H.below(3), 1);
    }
}

// A sender VI id: the good peer's (a forgery), one of ours, or anything.
static uint32_t src_guess(Hostile& H) {
    switch (H.below(4)) {
        case 0: return NICFW_VI_MAKE(H.good.vi[H.below(HP_NVI)], 1);
        case 1: {
            Conn* c = some_conn(H);
            return c ? c->me : H.next_me;
        }
        case 2: return pool32(H);
        default: return H.r32();
    }
}

static void fill_random(Hostile& H, uint8_t* p, uint32_t n) {
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x = H.r64();
        memcpy(p + i, &x, 8);
    }
    for (; i < n; i++) p[i] = static_cast<uint8_t>(H.r32());
}

static const hp_region& region(Hostile& H, int i) {
    const hp_region* r[] = {&H.owner.hw, &H.owner.hr, &H.owner.gw, &H.owner.gr, &H.owner.gdesc, &H.owner.hdesc};
    return *r[i];
}

// An RDMA extension naming some remote buffer: often a real region (and its handle), at
// and across its bounds; otherwise anything.
static nicfw_rdma_ext ext_guess(Hostile& H, uint32_t len, int* which) {
    int w = H.chance(40) ? static_cast<int>(H.below(2)) : static_cast<int>(H.below(6));
    const hp_region& r = region(H, w);
    nicfw_rdma_ext x{};
    switch (H.below(12)) {
        case 0: x.addr = r.addr; break;
        case 1: x.addr = r.addr - 1; break;
        case 2: x.addr = r.addr + r.len - (len < r.len ? len : 0); break;
        case 3: x.addr = r.addr + r.len - (len < r.len ? len : 0) + 1; break;
        case 4: x.addr = r.addr + r.len; break;
        case 5: x.addr = ~0ull - H.below(64); break;
        case 6: x.addr = H.owner.guard_lo + H.below(64); break;
        case 7: x.addr = H.r64(); break;
        default: x.addr = r.addr + (len < r.len ? H.below(r.len - len + 1) : 0); break;
    }
    switch (H.below(10)) {
        case 0: x.memh = region(H, static_cast<int>(H.below(6))).memh; break;
        case 1: x.memh = r.memh + 0x10000; break;  // the next generation
        case 2: x.memh = r.memh - 0x10000; break;
        case 3: x.memh = r.memh + 1; break;        // the next region index
        case 4: x.memh = H.chance(50) ? 0 : H.r32(); break;
        default: x.memh = r.memh; break;
    }
    if (H.chance(5)) x.reserved = H.r32();
    *which = w;
    return x;
}

// ---------------------------------------------------------------- malformed frames
static void garbage(Hostile& H) {
    uint32_t len = H.chance(50) ? H.below(kHdr + 17) : H.below(H.max_frame + 1);
    uint8_t* f = reserve(H, len);
    if (!f) return;
    fill_random(H, f, len);
    if (len >= 2 && H.chance(50)) {
        f[0] = static_cast<uint8_t>(1 + H.below(NICFW_F_TYPE_MAX));
        f[1] = NICFW_ABI_VERSION;
    }
    commit(H, f, len);
}

static void bad_header(Hostile& H) {
    nicfw_frame_hdr h = header(static_cast<uint8_t>(1 + H.below(NICFW_F_TYPE_MAX)), vi_guess(H), src_guess(H));
    if (H.chance(50)) {
        do h.version = static_cast<uint8_t>(H.r32()); while (h.version == NICFW_ABI_VERSION);
    } else {
        h.type = H.chance(30) ? 0 : static_cast<uint8_t>(NICFW_F_TYPE_MAX + 1 + H.below(256 - NICFW_F_TYPE_MAX - 1));
    }
    h.msg_len = pool32(H);
    h.frag_len = pool32(H);
    uint32_t pay = H.below(std::min<uint32_t>(512, H.max_frame - kHdr) + 1);
    uint8_t* f = reserve(H, kHdr + pay);
    if (!f) return;
    memcpy(f, &h, kHdr);
    fill_random(H, f + kHdr, pay);
    commit(H, f, kHdr + pay);
}

static void fuzz_header(Hostile& H) {
    uint8_t type = H.chance(95) ? static_cast<uint8_t>(1 + H.below(NICFW_F_TYPE_MAX)) : static_cast<uint8_t>(H.r32());
    nicfw_frame_hdr h = header(type, vi_guess(H), src_guess(H));
    h.flags = H.chance(50) ? static_cast<uint8_t>(H.below(32)) : static_cast<uint8_t>(H.r32());
    if (H.chance(10)) h.reserved = static_cast<uint8_t>(H.r32());
    h.msg_len = pool32(H);
    h.offset = H.chance(50) ? 0 : pool32(H);
    h.frag_len = pool32(H);
    h.imm = H.r32();
    h.seq = H.chance(50) ? H.below(64) : pool32(H);
    const uint32_t room = H.max_frame - kHdr;
    uint32_t pay = H.chance(50) ? std::min(h.frag_len + (H.chance(50) ? kExt : 0), room) : H.below(std::min(room, 2048u) + 1);
    uint8_t* f = reserve(H, kHdr + pay);
    if (!f) return;
    memcpy(f, &h, kHdr);
    fill_random(H, f + kHdr, pay);
    if ((type == NICFW_F_RDMA_WRITE || type == NICFW_F_READ_REQ) && pay >= kExt && H.chance(60)) {
        int w;
        nicfw_rdma_ext x = ext_guess(H, h.msg_len, &w);
        memcpy(f + kHdr, &x, kExt);
    }
    commit(H, f, kHdr + pay);
}

// Frames that would be valid if they came from the good peer's NIC: they name the good
// VIs on both sides with their real ids and plausible sequence numbers, and the real
// regions of the good VIs' protection tag. The owner must drop every one.
static void forge_good(Hostile& H) {
    int v = static_cast<int>(H.below(HP_NVI));
    static const uint8_t types[] = {NICFW_F_DATA,      NICFW_F_RDMA_WRITE, NICFW_F_READ_REQ,   NICFW_F_READ_RESP,
                                    NICFW_F_ACK,       NICFW_F_NAK,        NICFW_F_DISCONNECT, NICFW_F_CONN_ACCEPT,
                                    NICFW_F_PEER_ACK,  NICFW_F_DATA};
    uint8_t type = types[H.below(sizeof types)];
    nicfw_frame_hdr h = header(type, NICFW_VI_MAKE(H.owner.good_vi[v], 1), NICFW_VI_MAKE(H.good.vi[v], 1));
    h.seq = H.chance(70) ? H.below(100000) : pool32(H);
    uint32_t len = 1 + H.below(std::min<uint32_t>(H.max_frame - kHdr - kExt, HP_GW_SLOT));
    uint32_t pay = 0;
    nicfw_rdma_ext x{};
    switch (type) {
        case NICFW_F_DATA:
        case NICFW_F_READ_RESP:
            h.msg_len = len;
            h.frag_len = len;
            h.flags = NICFW_FF_LAST | (H.chance(50) ? NICFW_FF_IMMEDIATE : 0);
            pay = len;
            break;
        case NICFW_F_RDMA_WRITE:
            x.addr = H.owner.gw.addr + static_cast<uint64_t>(H.below(2 * HP_GW_SLOTS)) * HP_GW_SLOT;
            x.memh = H.owner.gw.memh;
            h.msg_len = h.frag_len = len;
            h.flags = NICFW_FF_LAST | (H.chance(50) ? NICFW_FF_IMMEDIATE : 0);
            pay = kExt + len;
            break;
        case NICFW_F_READ_REQ:
            x.addr = H.owner.gr.addr;
            x.memh = H.owner.gr.memh;
            h.msg_len = len;
            pay = kExt;
            break;
        case NICFW_F_ACK:
        case NICFW_F_NAK:
            h.imm = H.r32();
            break;
        default:
            if (type != NICFW_F_DISCONNECT) {
                h.msg_len = kFixed;
                pay = kFixed;
            }
            break;
    }
    uint8_t* f = reserve(H, kHdr + pay);
    if (!f) return;
    memcpy(f, &h, kHdr);
    uint32_t at = kHdr;
    if (type == NICFW_F_RDMA_WRITE || type == NICFW_F_READ_REQ) {
        memcpy(f + at, &x, kExt);
        at += kExt;
    }
    if (type == NICFW_F_CONN_ACCEPT || type == NICFW_F_PEER_ACK) {
        nicfw_conn_payload pl{};
        pl.reliability = VIP_SERVICE_RELIABLE_DELIVERY;
        pl.max_transfer = NICFW_MAX_TRANSFER;
        memcpy(f + at, &pl, kFixed);
    } else {
        fill_random(H, f + at, kHdr + pay - at);
    }
    commit(H, f, kHdr + pay);
}

// ---------------------------------------------------------------- connection messages
static uint16_t len16(Hostile& H) {
    static const uint16_t p[] = {0, 1, 10, 127, 128, 129, 255, 256, 0xFFFF};
    return H.chance(70) ? p[H.below(sizeof p / sizeof p[0])] : static_cast<uint16_t>(H.r32());
}

static void put_disc(nicfw_conn_payload& pl, const char* src, const char* dst) {
    pl.src_disc_len = static_cast<uint16_t>(strlen(src));
    pl.dst_disc_len = static_cast<uint16_t>(strlen(dst));
    memcpy(pl.disc, src, pl.src_disc_len);
    memcpy(pl.disc + pl.src_disc_len, dst, pl.dst_disc_len);
}

static void conn_fuzz(Hostile& H) {
    static const uint8_t types[] = {NICFW_F_CONN_REQ, NICFW_F_CONN_ACCEPT, NICFW_F_CONN_REJECT, NICFW_F_CONN_NOMATCH,
                                    NICFW_F_PEER_REQ, NICFW_F_PEER_ACK,    NICFW_F_DISCONNECT};
    uint8_t type = types[H.below(sizeof types)];
    nicfw_conn_payload pl{};
    pl.reliability = H.chance(80) ? static_cast<uint16_t>(1u << H.below(3)) : static_cast<uint16_t>(H.r32());
    pl.rdma_write = static_cast<uint8_t>(H.below(3));
    pl.rdma_read = static_cast<uint8_t>(H.below(3));
    pl.max_transfer = pool32(H);
    fill_random(H, pl.disc, sizeof pl.disc);
    fill_random(H, pl.src_addr, sizeof pl.src_addr);
    nicfw_frame_hdr h = header(type, vi_guess(H), src_guess(H));
    h.seq = H.chance(50) ? H.below(200) : pool32(H);  // the owner's request ids count from 1
    switch (H.below(5)) {
        case 0:  // the decoy: only the good peer's NIC may complete it
            put_disc(pl, HP_DISC_DECOY_G, HP_DISC_DECOY_O);
            pl.reliability = VIP_SERVICE_RELIABLE_DELIVERY;
            if (H.chance(50)) h.type = type = NICFW_F_PEER_REQ, h.dst_vi = 0xFFFFFFFFu;
            else h.type = type = NICFW_F_PEER_ACK, h.dst_vi = NICFW_VI_MAKE(H.owner.decoy_vi, 1);
            break;
        case 1:  // lengths at and past every bound
            pl.src_disc_len = len16(H);
            pl.dst_disc_len = len16(H);
            pl.src_addr_len = len16(H);
            break;
        case 2:  // the listener, with a forged sender
            put_disc(pl, "", HP_DISC_LISTEN);
            h.type = type = NICFW_F_CONN_REQ;
            h.dst_vi = H.chance(50) ? 0xFFFFFFFFu : vi_guess(H);
            pl.src_addr_len = H.enabled[kSpoofAddr] && H.chance(50) ? len16(H) : 0;
            break;
        default:
            pl.src_disc_len = static_cast<uint16_t>(H.below(NICFW_MAX_DISCRIMINATOR + 1));
            pl.dst_disc_len = static_cast<uint16_t>(H.below(NICFW_MAX_DISCRIMINATOR + 1));
            pl.src_addr_len = static_cast<uint16_t>(H.chance(50) ? 0 : H.below(NICFW_MAX_ADDR + 1));
            break;
    }
    uint32_t exact = kFixed + std::min<uint32_t>(pl.src_disc_len + pl.dst_disc_len, 2 * NICFW_MAX_DISCRIMINATOR);
    switch (H.below(6)) {
        case 0: h.msg_len = kFixed - 1; break;
        case 1: h.msg_len = sizeof pl + H.below(2); break;
        case 2: h.msg_len = pool32(H); break;
        default: h.msg_len = exact; break;
    }
    if (type == NICFW_F_DISCONNECT || type == NICFW_F_CONN_REJECT || type == NICFW_F_CONN_NOMATCH)
        h.msg_len = H.chance(70) ? 0 : h.msg_len;
    uint32_t pay = std::min<uint32_t>(H.chance(80) ? std::min<uint32_t>(h.msg_len, sizeof pl) : H.below(sizeof pl + 1),
                                      H.max_frame - kHdr);
    uint8_t* f = reserve(H, kHdr + pay);
    if (!f) return;
    memcpy(f, &h, kHdr);
    memcpy(f + kHdr, &pl, pay);
    commit(H, f, kHdr + pay);
}

// ---------------------------------------------------------------- on our own connection
// An RDMA write or read request at and across the bounds of the owner's regions. Only
// a read within HR under HR's handle may be answered (hp_hostile.cc checks the answer).
static void rdma_bounds(Hostile& H) {
    Conn* c = some_conn(H);
    if (!c) return fuzz_header(H);
    c->ops++;
    static const uint32_t lens[] = {0, 1, 16, 64, 1000, HP_HW_BYTES - 1, HP_HW_BYTES, HP_HW_BYTES + 1,
                                    NICFW_MAX_TRANSFER, NICFW_MAX_TRANSFER + 1, 0xFFFFFFFFu};
    uint32_t len = H.chance(70) ? lens[H.below(sizeof lens / sizeof lens[0])] : H.below(HP_HW_BYTES + 2);
    int w;
    nicfw_rdma_ext x = ext_guess(H, len, &w);
    const bool write = H.chance(50);
    nicfw_frame_hdr h = header(write ? NICFW_F_RDMA_WRITE : NICFW_F_READ_REQ, c->owner_vi, c->me);
    h.msg_len = len;
    h.seq = c->seq++;
    if (!write) {
        const hp_region& hr = H.owner.hr;
        bool allowed = x.memh == hr.memh && x.addr >= hr.addr && len <= hr.len && x.addr - hr.addr <= hr.len - len &&
                       c->rel != VIP_SERVICE_UNRELIABLE;
        if (H.reads.size() > 4096) H.reads.erase(H.reads.begin(), H.reads.begin() + 1024);
        H.reads.push_back(Read{c->me, h.seq, x.addr, len, allowed});
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
static void frag_chaos(Hostile& H) {
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
static void ack_nak(Hostile& H) {
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
    h.imm = H.chance(50) ? H.r32() : (VIP_STATUS_RDMA_PROT_ERROR | VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_READ);
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
static void valid_hostile(Hostile& H) {
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
                H.reads.push_back(Read{c->me, h.seq, x.addr, h.msg_len, c->rel != VIP_SERVICE_UNRELIABLE});
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

// shm: frames keep changing after they were committed, while the owner reads them (the
// owner must take one snapshot of every field it checks).
static void scribble(Hostile& H) {
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

// A connect request at the listener that names another NIC as its sender (the good
// peer's address, or NICFW_MAX_ADDR random bytes, or a length over that): the owner must
// never be told that a request came from a NIC it did not come from, nor be handed more
// address bytes than its own NIC's addresses have.
static void spoof_addr(Hostile& H) {
    Conn c;
    c.me = H.next_me++;
    c.req_id = H.r32();
    c.rel = VIP_SERVICE_RELIABLE_DELIVERY;
    send_conn_req(H, c, 2 + static_cast<int>(H.below(3)));
}

void attack(Hostile& H, Attack a) {
    switch (a) {
        case kGarbage: return garbage(H);
        case kBadHeader: return bad_header(H);
        case kFuzzHeader: return fuzz_header(H);
        case kForgeGood: return forge_good(H);
        case kConnFuzz: return conn_fuzz(H);
        case kRdmaBounds: return rdma_bounds(H);
        case kFragChaos: return frag_chaos(H);
        case kAckNak: return ack_nak(H);
        case kValidHostile: return valid_hostile(H);
        case kSpoofAddr: return spoof_addr(H);
        case kScribble: return scribble(H);
        case kRawUdp: return raw_udp(H);
        default: return;
    }
}

}  // namespace hp
