// hp_hostile -- rank 2 of the hostile-peer test: a process that speaks the wire protocol
// at the owner's NIC and sends it, for --seconds, every malformed, forged, out-of-order
// or protocol-valid-but-hostile frame and connection message it can make
// (docs/hostile-peer.md). Seeded: --seed N replays the same choices (0 or absent: a
// random seed, printed). --attacks a,b,... limits it to some classes (kAttackNames).
//
// It opens a Transport of the owner's kind (SOFTVIA_DEVICE) and uses resolve(),
// tx_reserve/tx_commit/tx_flush and rx_burst like a NIC, with no engine behind them.
// It also checks what comes back: an RDMA read answer must carry region HR's bytes and
// only for a read within HR under HR's handle; anything else is a leak, and a leak fails
// this rank.
#include "hp_hostile.h"

#include <sched.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "nicfw/device.h"
#include "softvia_boot.h"

namespace hp {

using namespace softvia::nicfw;

uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

uint8_t* reserve(Hostile& H, uint32_t len) {
    if (len == 0 && H.udp) len = 1;  // a datagram carries at least a byte
    for (int i = 0; i < 200; i++) {
        if (uint8_t* f = H.tr->tx_reserve(H.peer, len)) return f;
        H.tr->tx_flush();  // udp: the step's pacing allowance starts again
        drain(H);          // shm: the owner frees slots as it reads; meanwhile take its answers
        if (i > 2) sched_yield();
    }
    H.full++;
    return nullptr;
}

// A read request we send, whatever made it: what may answer it (on_read_resp).
static void record_read(Hostile& H, const uint8_t* f) {
    nicfw_frame_hdr h;
    nicfw_rdma_ext x;
    memcpy(&h, f, kHdr);
    memcpy(&x, f + kHdr, kExt);
    const hp_region& hr = H.owner.hr;
    bool allowed = x.memh == hr.memh && x.addr >= hr.addr && h.msg_len <= hr.len && x.addr - hr.addr <= hr.len - h.msg_len;
    if (H.reads.size() >= kMaxReads) H.reads.erase(H.reads.begin(), H.reads.begin() + kMaxReads / 4);
    H.reads.push_back(Read{h.src_vi, h.seq, 1, x.addr, h.msg_len, allowed});
}

void commit(Hostile& H, uint8_t* f, uint32_t len) {
    if (len == 0 && H.udp) len = 1;
    if (len >= kHdr + kExt && f[0] == NICFW_F_READ_REQ && !H.flooding) record_read(H, f);
    H.tr->tx_commit(H.peer, len);
    H.frames++;
    if (H.scribble_n < 8) {  // the scribble attack changes it after the commit (hp_attacks.cc)
        H.scribble[H.scribble_n] = f;
        H.scribble_len[H.scribble_n++] = len;
    }
}

nicfw_frame_hdr header(uint8_t type, uint32_t dst, uint32_t src) {
    nicfw_frame_hdr h{};
    h.type = type;
    h.version = NICFW_ABI_VERSION;
    h.dst_vi = dst;
    h.src_vi = src;
    return h;
}

Conn* some_conn(Hostile& H) {
    int live[kConns], n = 0;
    for (int i = 0; i < kConns; i++)
        if (H.conns[i].st == Conn::kConnected) live[n++] = i;
    return n ? &H.conns[live[H.below(n)]] : nullptr;
}

// ---------------------------------------------------------------- connection set-up
// spoof: 0 our own address, 1 none (the owner takes the wire's), 2 the good peer's,
// 3 NICFW_MAX_ADDR random bytes, 4 a length over NICFW_MAX_ADDR.
void send_conn_req(Hostile& H, Conn& c, int spoof) {
    nicfw_conn_payload pl{};
    pl.reliability = c.rel;
    pl.rdma_write = pl.rdma_read = 1;
    pl.max_transfer = H.chance(90) ? NICFW_MAX_TRANSFER : pool32(H);
    pl.src_disc_len = static_cast<uint16_t>(H.below(NICFW_MAX_DISCRIMINATOR + 1));
    for (unsigned i = 0; i < pl.src_disc_len; i++) pl.disc[i] = static_cast<uint8_t>(H.r32());
    const char* listen = H.chance(70) ? HP_DISC_LISTEN : HP_DISC_WAIT;  // the standing listener, or VipConnectWait
    pl.dst_disc_len = static_cast<uint16_t>(strlen(listen));
    memcpy(pl.disc + pl.src_disc_len, listen, pl.dst_disc_len);
    switch (spoof) {
        case 0: pl.src_addr_len = static_cast<uint16_t>(H.alen); memcpy(pl.src_addr, H.my_addr, H.alen); break;
        case 1: break;
        case 2: pl.src_addr_len = static_cast<uint16_t>(H.alen); memcpy(pl.src_addr, H.good_addr, H.alen); break;
        case 3:
            pl.src_addr_len = NICFW_MAX_ADDR;
            for (auto& b : pl.src_addr) b = static_cast<uint8_t>(H.r32());
            break;
        default: pl.src_addr_len = static_cast<uint16_t>(NICFW_MAX_ADDR + 1 + H.below(0xFFC0)); break;
    }
    uint32_t len = kFixed + pl.src_disc_len + pl.dst_disc_len;
    uint8_t* f = reserve(H, kHdr + len);
    if (!f) return;
    nicfw_frame_hdr h = header(NICFW_F_CONN_REQ, 0xFFFFFFFFu, c.me);
    h.msg_len = len;
    h.seq = c.req_id;
    memcpy(f, &h, kHdr);
    memcpy(f + kHdr, &pl, len);
    commit(H, f, kHdr + len);
}

static void send_peer(Hostile& H, Conn& c, int k, uint8_t type, uint32_t dst, uint32_t seq, uint16_t rel) {
    nicfw_conn_payload pl{};
    pl.reliability = rel;
    pl.rdma_write = pl.rdma_read = 1;
    pl.max_transfer = NICFW_MAX_TRANSFER;
    char src[32], want[32];
    snprintf(src, sizeof src, "%s%d", HP_DISC_PEER_H, k);
    snprintf(want, sizeof want, "%s%d", HP_DISC_PEER_O, k);
    pl.src_disc_len = static_cast<uint16_t>(strlen(src));
    pl.dst_disc_len = static_cast<uint16_t>(strlen(want));
    memcpy(pl.disc, src, pl.src_disc_len);
    memcpy(pl.disc + pl.src_disc_len, want, pl.dst_disc_len);
    uint32_t len = kFixed + pl.src_disc_len + pl.dst_disc_len;
    uint8_t* f = reserve(H, kHdr + len);
    if (!f) return;
    nicfw_frame_hdr h = header(type, dst, c.me);
    h.msg_len = len;
    h.seq = seq;
    memcpy(f, &h, kHdr);
    memcpy(f + kHdr, &pl, len);
    commit(H, f, kHdr + len);
}

static void connected(Hostile& H, Conn& c, uint32_t owner_vi, uint16_t rel) {
    c.st = Conn::kConnected;
    c.owner_vi = owner_vi;
    c.rel = rel;
    c.seq = c.owner_next = 0;
    c.ops = 0;
    c.since_ms = now_ms();
    H.connects++;
}

static void hang_up(Hostile& H, Conn& c) {
    if (uint8_t* f = reserve(H, kHdr)) {
        nicfw_frame_hdr h = header(NICFW_F_DISCONNECT, c.owner_vi, c.me);
        memcpy(f, &h, kHdr);
        commit(H, f, kHdr);
    }
    c.st = Conn::kFree;
}

// Keeps connections coming: through the listener, and by peer requests.
static void maintain(Hostile& H) {
    static const uint16_t kLevels[3] = {NICFW_REL_UNRELIABLE, NICFW_REL_RELIABLE_DELIVERY,
                                        NICFW_REL_RELIABLE_RECEPTION};
    static uint64_t last_peer[HP_PEER_SLOTS];
    uint64_t now = now_ms();
    for (int i = 0; i < kConns; i++) {
        Conn& c = H.conns[i];
        if ((c.st == Conn::kRequested || c.st == Conn::kPeering) && now - c.since_ms > 300) c.st = Conn::kFree;
        if (c.st == Conn::kConnected && (c.ops > 300 || now - c.since_ms > 700)) hang_up(H, c);
        if (c.st != Conn::kFree || i == kClientConn) continue;
        c.me = H.next_me++;
        if ((H.next_me & 0xFFFF) == 0) H.next_me = 0x00017000;
        c.since_ms = now;
        if (i < kListenConns) {
            c.rel = H.chance(95) ? kLevels[H.below(3)] : static_cast<uint16_t>(H.r32());
            c.req_id = H.r32();
            c.st = Conn::kRequested;
            send_conn_req(H, c, H.chance(50) ? 1 : 0);  // with our address, or none
        } else {
            int k = i - kListenConns;
            if (now - last_peer[k] < 20) continue;
            last_peer[k] = now;
            c.st = Conn::kPeering;
            uint16_t rel = H.owner_peer_rel[k] && H.chance(80) ? static_cast<uint16_t>(H.owner_peer_rel[k])
                                                              : kLevels[H.below(3)];
            c.rel = rel;
            send_peer(H, c, k, NICFW_F_PEER_REQ, 0xFFFFFFFFu, H.r32(), rel);
        }
    }
}

// ---------------------------------------------------------------- what comes back
static Conn* conn_of(Hostile& H, uint32_t me) {
    for (auto& c : H.conns)
        if (c.st != Conn::kFree && c.me == me) return &c;
    return nullptr;
}

static void leak(Hostile& H, const char* what, const nicfw_frame_hdr& h, const Read* r) {
    if (H.leaks++ < 10)
        fprintf(stderr, "hp_hostile: LEAK: %s: READ_RESP seq %u offset %u frag %u of %u; request %s addr 0x%llx len %u\n",
                what, h.seq, h.offset, h.frag_len, h.msg_len, r ? (r->allowed ? "allowed" : "to be refused") : "unknown",
                r ? static_cast<unsigned long long>(r->addr) : 0ull, r ? r->len : 0);
}

// An RDMA read answer: some request of ours with its sequence number, from that VI, must
// have asked within HR under HR's handle for exactly these bytes (several requests may
// share a sequence number: fuzzed ones the owner dropped, then the real one).
static void on_read_resp(Hostile& H, const uint8_t* f, uint32_t len, const nicfw_frame_hdr& h) {
    if (h.frag_len > len - kHdr || h.frag_len == 0) return;  // no bytes: nothing to leak
    const Read* seen = nullptr;
    for (auto it = H.reads.rbegin(); it != H.reads.rend(); ++it) {
        if (it->conn_me != h.dst_vi || h.seq - it->seq >= it->count) continue;
        seen = &*it;
        if (!it->allowed || h.offset > it->len || h.frag_len > it->len - h.offset) continue;
        if (hp_diff(f + kHdr, h.frag_len, H.owner.hr_seed, it->addr - H.owner.hr.addr + h.offset) < 0) {
            H.resp_ok++;
            return;
        }
    }
    leak(H, !seen ? "an answer to no read we asked for"
                  : seen->allowed ? "bytes that are not region HR's, or more than were asked for"
                                  : "bytes of a read the owner had to refuse",
         h, seen);
}

// The owner's VipConnectRequest to us: accept it properly, accept it with a VI of
// another reliability level or a zero transfer size, with the wrong request id, refuse
// it, or stay silent.
static void on_client_request(Hostile& H, const nicfw_frame_hdr& h, const nicfw_conn_payload& pl) {
    static const char want[] = HP_DISC_CLIENT;
    if (h.msg_len < kFixed || pl.dst_disc_len != sizeof want - 1 ||
        pl.src_disc_len + pl.dst_disc_len > 2 * NICFW_MAX_DISCRIMINATOR ||
        memcmp(pl.disc + pl.src_disc_len, want, sizeof want - 1))
        return;
    Conn& c = H.conns[kClientConn];
    if (c.st == Conn::kConnected) hang_up(H, c);
    c.me = H.next_me++;
    nicfw_conn_payload ans{};
    ans.reliability = pl.reliability;
    ans.rdma_write = ans.rdma_read = 1;
    ans.max_transfer = NICFW_MAX_TRANSFER;
    uint8_t type = NICFW_F_CONN_ACCEPT;
    uint32_t seq = h.seq;
    const unsigned pick = H.below(100);
    if (pick < 40) {
        H.client_answers[0]++;
    } else if (pick < 65) {
        H.client_answers[1]++;
        if (pick < 50 && H.enabled[kOddAccept])  // a VI of another level
            ans.reliability = static_cast<uint16_t>(pl.reliability == NICFW_REL_UNRELIABLE
                                                        ? NICFW_REL_RELIABLE_DELIVERY
                                                        : NICFW_REL_UNRELIABLE);
        else if (pick < 58) ans.max_transfer = H.below(2) ? 0 : 1 + H.below(64);
        else seq = h.seq + 1 + H.below(3);  // not the request the owner made
    } else if (pick < 85) {
        H.client_answers[2]++;
        type = pick < 75 ? NICFW_F_CONN_REJECT : NICFW_F_CONN_NOMATCH;
    } else {
        H.client_answers[3]++;
        return;
    }
    const uint32_t plen = type == NICFW_F_CONN_ACCEPT ? kFixed : 0;
    uint8_t* f = reserve(H, kHdr + plen);
    if (!f) return;
    nicfw_frame_hdr a = header(type, h.src_vi, c.me);
    a.msg_len = plen;
    a.seq = seq;
    memcpy(f, &a, kHdr);
    memcpy(f + kHdr, &ans, plen);
    commit(H, f, kHdr + plen);
    if (type == NICFW_F_CONN_ACCEPT && seq == h.seq) connected(H, c, h.src_vi, ans.reliability);
}

static void on_frame(Hostile& H, const uint8_t* f, uint32_t len) {
    if (len < kHdr) return;
    nicfw_frame_hdr h;
    memcpy(&h, f, kHdr);
    nicfw_conn_payload pl{};
    if (h.msg_len >= kFixed && h.msg_len <= sizeof pl && h.msg_len <= len - kHdr) memcpy(&pl, f + kHdr, h.msg_len);
    switch (h.type) {
        case NICFW_F_CONN_ACCEPT:
        case NICFW_F_CONN_REJECT:
        case NICFW_F_CONN_NOMATCH: {
            Conn* c = conn_of(H, h.dst_vi);
            if (!c || c->st != Conn::kRequested || c->req_id != h.seq) return;
            if (h.type == NICFW_F_CONN_ACCEPT) connected(H, *c, h.src_vi, c->rel);
            else c->st = Conn::kFree;
            return;
        }
        case NICFW_F_CONN_REQ:
            on_client_request(H, h, pl);
            return;
        case NICFW_F_PEER_REQ: {
            // The owner's peer request "hp.peer.o<k>" looking for "hp.peer.h<k>".
            H.peer_reqs_seen++;
            if (pl.src_disc_len < 1 || pl.src_disc_len > 32) return;
            int k = pl.disc[pl.src_disc_len - 1] - '0';
            if (k < 0 || k >= HP_PEER_SLOTS) return;
            H.owner_peer_rel[k] = pl.reliability;
            H.owner_peer_vi[k] = h.src_vi;
            H.owner_peer_req[k] = h.seq;
            Conn& c = H.conns[kListenConns + k];
            if (c.st == Conn::kConnected || H.chance(30)) return;  // answer only some of them
            if (c.st == Conn::kFree) c.me = H.next_me++;
            uint16_t rel = H.chance(90) ? pl.reliability : static_cast<uint16_t>(H.r32());
            send_peer(H, c, k, NICFW_F_PEER_ACK, h.src_vi, h.seq, rel);
            if (rel == pl.reliability) connected(H, c, h.src_vi, rel);
            return;
        }
        case NICFW_F_PEER_ACK: {
            Conn* c = conn_of(H, h.dst_vi);
            if (c && c->st == Conn::kPeering) connected(H, *c, h.src_vi, c->rel);
            return;
        }
        case NICFW_F_DISCONNECT: {
            Conn* c = conn_of(H, h.dst_vi);
            if (c && c->owner_vi == h.src_vi) c->st = Conn::kFree;
            return;
        }
        case NICFW_F_READ_RESP:
            on_read_resp(H, f, len, h);
            return;
        case NICFW_F_DATA: {
            // The owner's small messages to us: region HR's first 64 bytes.
            Conn* c = conn_of(H, h.dst_vi);
            if (!c || c->owner_vi != h.src_vi || h.frag_len > len - kHdr) return;
            if (h.offset + h.frag_len <= 64 && hp_diff(f + kHdr, h.frag_len, H.owner.hr_seed, h.offset) >= 0 &&
                H.leaks++ < 10)
                fprintf(stderr, "hp_hostile: LEAK: the owner sent bytes that are not its message\n");
            if ((h.flags & NICFW_FF_LAST) && H.chance(85)) {
                c->owner_next = h.seq + 1;
                if (uint8_t* a = reserve(H, kHdr)) {
                    nicfw_frame_hdr ack = header(NICFW_F_ACK, c->owner_vi, c->me);
                    ack.seq = c->owner_next;
                    ack.imm = 1;
                    memcpy(a, &ack, kHdr);
                    commit(H, a, kHdr);
                }
            }
            return;
        }
        default:
            return;
    }
}

void drain(Hostile& H) {
    static int depth;
    if (depth) return;  // reserve() inside on_frame may call us again
    depth++;
    for (int round = 0; round < 8; round++) {
        RxFrame fr[32];
        int n = H.tr->rx_burst(fr, 32);
        if (n <= 0) break;
        for (int i = 0; i < n; i++) on_frame(H, fr[i].data, fr[i].len);
        H.tr->rx_release();
    }
    depth--;
}

}  // namespace hp

using namespace hp;

// A NIC that comes after the attack: a fresh transport of the same kind asks the owner
// for a connection nobody listens for, and must get its NO_MATCH (the owner still takes
// new peers). Resent every 50 ms for 2 s.
static bool late_joiner(Hostile& H, const DeviceSpec& spec) {
    std::unique_ptr<Transport> t;
    std::string why;
    if (create_transport(spec, &t, &why) < 0) return false;
    int peer = t->resolve(H.owner_addr, H.alen);
    if (peer < 0) return false;
    nicfw_conn_payload pl{};
    pl.reliability = NICFW_REL_RELIABLE_DELIVERY;
    put_disc(pl, "", HP_DISC_NOBODY);
    nicfw_frame_hdr h = header(NICFW_F_CONN_REQ, 0xFFFFFFFFu, 0x00010001u);
    h.msg_len = kFixed + pl.dst_disc_len;
    h.seq = 77;
    std::vector<TransportEvent> ev;
    for (uint64_t end = now_ms() + 2000, next = 0; now_ms() < end;) {
        if (now_ms() >= next) {
            if (uint8_t* f = t->tx_reserve(peer, kHdr + h.msg_len)) {
                memcpy(f, &h, kHdr);
                memcpy(f + kHdr, &pl, h.msg_len);
                t->tx_commit(peer, kHdr + h.msg_len);
            }
            t->tx_flush();
            next = now_ms() + 50;
        }
        RxFrame fr[32];
        int n = t->rx_burst(fr, 32);
        bool answered = false;
        for (int i = 0; i < n; i++) {
            nicfw_frame_hdr a;
            if (fr[i].len < kHdr) continue;
            memcpy(&a, fr[i].data, kHdr);
            answered |= a.type == NICFW_F_CONN_NOMATCH && a.seq == 77;
        }
        if (n > 0) t->rx_release();
        if (answered) return true;
        t->poll_slow(ev);
        sched_yield();
    }
    return false;
}

static int fail(const char* what) {
    fprintf(stderr, "hp_hostile: %s\n", what);
    return 1;
}

int main(int argc, char** argv) {
    Hostile H;
    unsigned seconds = 8;
    const char* attacks = nullptr;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = static_cast<unsigned>(atoi(argv[++i]));
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) H.seed = strtoull(argv[++i], nullptr, 0);
        else if (!strcmp(argv[i], "--attacks") && i + 1 < argc) attacks = argv[++i];
        else if (!strcmp(argv[i], "--progress") && i + 1 < argc) i++;  // the owner's
        else return fail("unknown argument");
    }
    if (H.seed == 0 && getrandom(&H.seed, sizeof H.seed, 0) != sizeof H.seed) H.seed = static_cast<uint64_t>(getpid());
    H.rng.seed(H.seed);
    for (int a = 0; a < kNumAttacks; a++) {
        H.enabled[a] = !attacks;
        for (const char* p = attacks; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] ? 1 : 0))
            if (strcspn(p, ",") == strlen(kAttackNames[a]) && !strncmp(p, kAttackNames[a], strlen(kAttackNames[a])))
                H.enabled[a] = true;
    }
    printf("hp_hostile: seed %llu (replay: --seed %llu)\n", static_cast<unsigned long long>(H.seed),
           static_cast<unsigned long long>(H.seed));
    fflush(stdout);

    int rank, size;
    if (sv_boot_init(&rank, &size) != 0 || size != 3 || rank != 2) return fail("must run as rank 2 of softvia-run -n 3");
    const char* f = getenv("SOFTVIA_FAULTS");
    if (f && *f) {
        printf("hp_hostile: SKIP: SOFTVIA_FAULTS is set; the hostile peer speaks the plain wire\n");
        return 77;
    }
    const char* dev = getenv("SOFTVIA_DEVICE");
    std::string name = dev && *dev ? dev : "shm", why;
    DeviceSpec spec;
    if (parse_device_name(name, &spec, &why) < 0) return fail(why.c_str());
    int rc = create_transport(spec, &H.tr, &why);
    if (rc == -ENODEV) {
        printf("hp_hostile: SKIP: %s\n", why.c_str());
        return 77;
    }
    if (rc < 0) return fail(why.c_str());
    H.udp = !strcmp(H.tr->name(), "udp");  // the bare wire (raw datagrams know its preamble)
    H.max_frame = H.tr->max_frame();
    const uint8_t* mine = H.tr->local_addr(&H.alen);
    if (H.alen > 64) return fail("address over 64 bytes");
    memcpy(H.my_addr, mine, H.alen);
    static uint8_t all[3][64];
    if (sv_boot_allgather(H.my_addr, 64, all, HP_BOOT_MS) != 0) return fail("address allgather");
    memcpy(H.owner_addr, all[0], 64);
    memcpy(H.good_addr, all[1], 64);
    if (sv_boot_get(HP_KEY_OWNER, &H.owner, sizeof H.owner, nullptr, HP_BOOT_MS) != 0 ||
        sv_boot_get(HP_KEY_GOOD, &H.good, sizeof H.good, nullptr, HP_BOOT_MS) != 0)
        return fail("no layout from the owner or the good peer");
    H.peer = H.tr->resolve(H.owner_addr, H.alen);
    if (H.peer < 0) return fail("cannot reach the owner's NIC");
    if (H.udp && (H.enabled[kRawUdp] || H.enabled[kPeerFlood]) && raw_udp_open(H) != 0) return fail("raw udp socket");
    if (sv_boot_barrier(HP_BOOT_MS) != 0) return fail("start barrier");

    uint64_t start = now_ms(), end = start + seconds * 1000ull, last_slow = 0;
    std::vector<TransportEvent> events;
    std::vector<Attack> menu;
    for (int a = 0; a < kNumAttacks; a++)
        if (H.enabled[a] && !((a == kRawUdp || a == kPeerFlood) && !H.udp) && !(a == kScribble && H.udp) &&
            a != kOddAccept)
            menu.push_back(static_cast<Attack>(a));
    if (menu.empty()) return fail("no attack enabled for this wire");
    uint64_t turns = 0;
    for (uint64_t now = start; now < end; now = now_ms()) {
        maintain(H);
        Attack a = menu[H.below(static_cast<uint32_t>(menu.size()))];
        attack(H, a);
        H.count[a]++;
        H.tr->tx_flush();
        drain(H);
        if (now - last_slow >= 1) {
            H.tr->poll_slow(events);
            last_slow = now;
        }
        if ((++turns & 15) == 0) sched_yield();  // two cores for three busy processes
    }
    for (auto& c : H.conns)
        if (c.st == Conn::kConnected && H.chance(50)) hang_up(H, c);
    H.tr->tx_flush();
    for (int i = 0; i < 100; i++) drain(H);
    const bool joined = late_joiner(H, spec);
    if (!joined)
        fprintf(stderr, "hp_hostile: FAIL: a NIC that came after the attack got no answer from the owner%s\n",
                H.fake_nics ? " (after the made-up NICs of peerflood)" : "");

    printf("hp_hostile: %llu frames in %u s (%llu in floods, %llu given up on a full link), %llu connections, "
           "%llu read answers checked, %llu peer requests seen\n", static_cast<unsigned long long>(H.frames), seconds,
           static_cast<unsigned long long>(H.flooded), static_cast<unsigned long long>(H.full),
           static_cast<unsigned long long>(H.connects), static_cast<unsigned long long>(H.resp_ok),
           static_cast<unsigned long long>(H.peer_reqs_seen));
    printf("hp_hostile: the owner's connect requests: %llu accepted, %llu accepted oddly, %llu refused, %llu left "
           "unanswered; %u made-up NICs\n", static_cast<unsigned long long>(H.client_answers[0]),
           static_cast<unsigned long long>(H.client_answers[1]), static_cast<unsigned long long>(H.client_answers[2]),
           static_cast<unsigned long long>(H.client_answers[3]), H.fake_nics);
    for (int a = 0; a < kNumAttacks; a++)
        if (H.count[a]) printf("hp_hostile:   %-12s %llu\n", kAttackNames[a], static_cast<unsigned long long>(H.count[a]));
    hp_hostile_report rep{H.seed, H.frames, 0, H.connects, H.leaks};
    for (auto c : H.count) rep.attacks += c;
    sv_boot_put(HP_KEY_HOSTILE_DONE, &rep, sizeof rep);
    if (H.leaks || !joined) {
        fprintf(stderr, "hp_hostile: FAIL: %llu leaks%s (seed %llu)\n", static_cast<unsigned long long>(H.leaks),
                joined ? "" : ", a late NIC got no answer", static_cast<unsigned long long>(H.seed));
        return 1;
    }
    printf("hp_hostile: PASS (nothing leaked, a late NIC was answered)\n");
    return 0;
}
