// hp_hostile.h -- the hostile peer's state (hp_hostile.cc: set-up, connections, what
// comes back; hp_attacks.cc: the frames it sends; hp_rawudp.cc: datagrams that are not
// frames). It speaks the wire through a Transport of the owner's kind, as a NIC would,
// but it is not one: no engine, so it can send anything and answer anything.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hp_proto.h"
#include "nicfw/abi.h"
#include "nicfw/transport.h"

namespace hp {

constexpr uint32_t kHdr = sizeof(nicfw_frame_hdr);
constexpr uint32_t kExt = sizeof(nicfw_rdma_ext);
constexpr uint32_t kFixed = offsetof(nicfw_conn_payload, disc);
constexpr size_t kMaxReads = 65536;
constexpr int kListenConns = 4;                     // connections through the owner's listener
constexpr int kClientConn = kListenConns + HP_PEER_SLOTS;  // after one per owner peer request:
constexpr int kConns = kClientConn + 1;                   // the owner's client request we accepted

// A connection the owner made with us (or that we are making).
struct Conn {
    enum State { kFree, kRequested, kPeering, kConnected } st = kFree;
    uint32_t me = 0;        // our VI id: src_vi of what we send
    uint32_t owner_vi = 0;  // the owner's VI, once connected
    uint32_t req_id = 0;
    uint16_t rel = 0;
    uint32_t seq = 0;        // our next request number
    uint32_t owner_next = 0; // the owner's next request number we expect (for our ACKs)
    uint64_t since_ms = 0;
    uint32_t ops = 0;        // attacks made on it
};

// An RDMA read request we sent (whichever attack made it: commit() records each one): an
// answer must be region HR's bytes from where a request within HR under HR's handle
// asked, and nothing answers any other.
struct Read {
    uint32_t conn_me, seq, count;  // requests seq .. seq+count-1, all alike
    uint64_t addr;
    uint32_t len;
    bool allowed;
};

enum Attack {
    kGarbage, kBadHeader, kFuzzHeader, kForgeGood, kConnFuzz, kRdmaBounds, kFragChaos,
    kAckNak, kValidHostile, kReadFlood, kCtlFlood, kSpoofAddr, kScribble, kRawUdp, kPeerFlood, kOddAccept, kNumAttacks
};
extern const char* const kAttackNames[kNumAttacks];

struct Hostile {
    std::unique_ptr<softvia::nicfw::Transport> tr;
    int peer = -1;           // the owner
    bool udp = false;
    uint32_t max_frame = 0;  // header included
    hp_owner_info owner{};
    hp_good_info good{};
    uint8_t owner_addr[64]{}, good_addr[64]{}, my_addr[64]{};
    size_t alen = 0;
    std::mt19937_64 rng;
    uint64_t seed = 0;
    Conn conns[kConns];
    uint32_t next_me = 0x00017000;
    std::vector<Read> reads;  // the latest kMaxReads
    bool flooding = false;    // read_flood recorded its requests as one range
    bool enabled[kNumAttacks] = {};
    uint64_t count[kNumAttacks] = {};
    uint64_t frames = 0, full = 0, connects = 0, leaks = 0, resp_ok = 0, peer_reqs_seen = 0, flooded = 0;
    uint32_t owner_peer_rel[HP_PEER_SLOTS] = {};  // levels the owner's peer requests ask for
    uint32_t owner_peer_vi[HP_PEER_SLOTS] = {};
    uint32_t owner_peer_req[HP_PEER_SLOTS] = {};
    uint64_t client_answers[4] = {};  // to the owner's connect requests: accept, odd accept, refuse, none
    uint32_t fake_nics = 0;           // peer_flood: made-up NICs so far
    // raw udp (hp_rawudp.cc)
    int raw_fd = -1;
    sockaddr_in owner_sa{};
    uint32_t owner_nonce = 0;
    // shm: frames just committed that the scribble attack keeps changing
    uint8_t* scribble[8] = {};
    uint32_t scribble_len[8] = {};
    unsigned scribble_n = 8;  // 8: not recording

    uint64_t r64() { return rng(); }
    uint32_t r32() { return static_cast<uint32_t>(rng()); }
    uint32_t below(uint32_t n) { return n ? static_cast<uint32_t>(rng() % n) : 0; }
    bool chance(unsigned pct) { return below(100) < pct; }
};

// hp_hostile.cc
uint64_t now_ms();
uint8_t* reserve(Hostile& H, uint32_t len);  // nullptr: the link stays full
void commit(Hostile& H, uint8_t* f, uint32_t len);
nicfw_frame_hdr header(uint8_t type, uint32_t dst, uint32_t src);
Conn* some_conn(Hostile& H);                 // a connected one, or nullptr
void drain(Hostile& H);                      // what the owner sent us
void send_conn_req(Hostile& H, Conn& c, int spoof);

// hp_attacks.cc: malformed frames, forgeries, connection messages; the dispatcher
void attack(Hostile& H, Attack a);
uint32_t vi_guess(Hostile& H);   // a VI id at the owner, mostly one that exists
uint32_t src_guess(Hostile& H);  // a sender VI id: the good peer's, ours, anything
uint32_t pool32(Hostile& H);     // a 32-bit field value: boundaries, small, random
void fill_random(Hostile& H, uint8_t* p, uint32_t n);
const hp_region& region(Hostile& H, int i);  // HW, HR, GW, GR, gdesc, hdesc
nicfw_rdma_ext ext_guess(Hostile& H, uint32_t len, bool write);
void put_disc(nicfw_conn_payload& pl, const char* src, const char* dst);
void fuzz_header(Hostile& H);
void conn_fuzz(Hostile& H);

// hp_attacks_conn.cc: on a connection of ours
void rdma_bounds(Hostile& H);
void frag_chaos(Hostile& H);
void ack_nak(Hostile& H);
void valid_hostile(Hostile& H);
void read_flood(Hostile& H);
void ctl_flood(Hostile& H);
void scribble(Hostile& H);

// hp_rawudp.cc
int raw_udp_open(Hostile& H);
void raw_udp(Hostile& H);
void peer_flood(Hostile& H);

}  // namespace hp
