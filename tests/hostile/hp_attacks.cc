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
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hp_hostile.h"

namespace hp {

const char* const kAttackNames[kNumAttacks] = {"garbage",   "badheader",  "fuzzheader", "forgegood",
                                               "connfuzz",  "rdmabounds", "fragchaos",  "acknak",
                                               "validhostile", "readflood", "ctlflood", "spoofaddr", "scribble", "rawudp", "peerflood", "oddaccept"};

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
uint32_t src_guess(Hostile& H) {
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

void fill_random(Hostile& H, uint8_t* p, uint32_t n) {
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x = H.r64();
        memcpy(p + i, &x, 8);
    }
    for (; i < n; i++) p[i] = static_cast<uint8_t>(H.r32());
}

const hp_region& region(Hostile& H, int i) {
    const hp_region* r[] = {&H.owner.hw, &H.owner.hr, &H.owner.gw, &H.owner.gr, &H.owner.gdesc, &H.owner.hdesc};
    return *r[i];
}

// An RDMA extension naming some remote buffer of len bytes. write: for an RDMA write
// (else a read). A third of the time the buffer the hostile peer may use (HW to write,
// HR to read); a fifth a region it may not (the good VIs' tag, or no RDMA at all) under
// that region's own handle, within its bounds; otherwise anything at and across the
// bounds of any region, with that handle, a stale or neighbouring one, or none.
nicfw_rdma_ext ext_guess(Hostile& H, uint32_t len, bool write) {
    nicfw_rdma_ext x{};
    const unsigned mode = H.below(100);
    int w = mode < 35 ? (write ? 0 : 1) : mode < 55 ? (write ? 2 : 3) + (H.chance(30) ? 2 : 0) : static_cast<int>(H.below(6));
    const hp_region& r = region(H, w);
    x.memh = r.memh;
    if (mode < 55) {
        x.addr = r.addr + (len <= r.len ? H.below(r.len - len + 1) : 0);
        return x;
    }
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
        default: break;
    }
    if (H.chance(5)) x.reserved = H.r32();
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

void fuzz_header(Hostile& H) {
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
        nicfw_rdma_ext x = ext_guess(H, h.msg_len, type == NICFW_F_RDMA_WRITE);
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
        pl.reliability = NICFW_REL_RELIABLE_DELIVERY;
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

void put_disc(nicfw_conn_payload& pl, const char* src, const char* dst) {
    pl.src_disc_len = static_cast<uint16_t>(strlen(src));
    pl.dst_disc_len = static_cast<uint16_t>(strlen(dst));
    memcpy(pl.disc, src, pl.src_disc_len);
    memcpy(pl.disc + pl.src_disc_len, dst, pl.dst_disc_len);
}

void conn_fuzz(Hostile& H) {
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
            pl.reliability = NICFW_REL_RELIABLE_DELIVERY;
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

// A connect request at the listener that names another NIC as its sender (the good
// peer's address, or NICFW_MAX_ADDR random bytes, or a length over that): the owner must
// never be told that a request came from a NIC it did not come from, nor be handed more
// address bytes than its own NIC's addresses have.
static void spoof_addr(Hostile& H) {
    Conn c;
    c.me = H.next_me++;
    c.req_id = H.r32();
    c.rel = NICFW_REL_RELIABLE_DELIVERY;
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
        case kReadFlood: return read_flood(H);
        case kCtlFlood: return ctl_flood(H);
        case kScribble: return scribble(H);
        case kRawUdp: return raw_udp(H);
        case kPeerFlood: return peer_flood(H);
        case kOddAccept: return conn_fuzz(H);  // (what it enables happens in hp_hostile.cc)
        default: return;
    }
}

}  // namespace hp

