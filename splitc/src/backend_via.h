// backend_via.h -- Split-C directly on VIPL (docs/splitc.md, "The VIA back ends"): the
// paper's merged library (sections 5.4 and 5.5). Shared by the two back ends:
//
//   via-rel    reliable-delivery VIs; the AMVIA credit scheme (backend_via_rel.cc), and
//              RDMA read/write for large bulk transfers (backend_via_rdma.cc)
//   via-unrel  unreliable VIs; a reliable request/reply protocol of our own: numbered
//              requests and replies, acknowledgements of what was processed, in-order
//              processing, retransmission, duplicate suppression, a peer timeout
//              (backend_via_unrel.cc)
//
// Each pair of processes has two VIs (channels): short (values of up to 8 bytes, atomics,
// barrier) and medium (bulk pieces of up to kMedPayload bytes). Every message starts with
// a 4-byte header naming its handler (a small integer dispatched by a switch in the poll
// routine, backend_via.cc); via-unrel's sequence and acknowledgement numbers travel in
// the VIPL immediate data (in every frame's header anyway), so its messages are as small
// as via-rel's: on the shm wire a message of up to 16 bytes fits the lane slot's first
// cache line, and one of 17 or more costs about 0.08 us more. A request's reply comes back on its channel, in order, so the requester
// matches replies to a FIFO of what it is waiting for instead of carrying tokens.
#pragma once

#include <vipl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend.h"

namespace splitc {
namespace via {

// Handlers (message kinds). Requests take a credit; reply-class messages do not.
enum Kind : uint8_t {
    K_GET = 1,    // body: addr; n bytes wanted. Reply K_GET_R
    K_PUT,        // body: addr, n bytes. Reply K_PUT_R
    K_STORE,      // body: addr, n bytes. No reply (the credit comes back in batches)
    K_ATOMIC,     // body: AtomicBody; n = AtomicKind. Reply K_ATOMIC_R
    K_BAR_UP,     // n = barrier generation & 0xffff. No reply
    K_BAR_DOWN,   // the same
    K_EXIT,       // n = exit code. No reply
    K_PING,       // via-unrel: are you there? acknowledged at once. No reply
    K_GATHER,     // n gathered stores, puts and gets of up to 8 bytes (entries, below).
                  // Reply K_GATHER_R if it has a put or a get, else none
    K_GET_R,      // body: the n bytes
    K_PUT_R,      // no body: the smallest message, 4 bytes
    K_ATOMIC_R,   // body: int64 result
    K_GATHER_R,   // n = the K_GATHER's puts and gets; body: its gets' values, in order
    K_REFUSED,    // the request at the head of the FIFO was refused (not global memory)
    K_ENTRY_REFUSED,  // body: addr, call; n: a store, or an entry of a K_GATHER, was refused
    K_CREDIT,     // via-rel: gives back x credits of reply-free requests
    K_ACK,        // via-unrel, unnumbered: acknowledgements only (the paper's no-op reply)
    K_COUNT
};
inline bool is_request(uint8_t k) { return k < K_GET_R; }

// Every message starts with this. x: a request's API call (runtime.h, Call); a via-rel
// reply-class message's credits.
struct Hdr {
    uint8_t kind;
    uint8_t x;
    uint16_t n;
};
static_assert(sizeof(Hdr) == 4, "4-byte minimum message");
// via-unrel's numbers, the immediate data of every message: seq is the message's number
// in its class (requests and replies are numbered separately); ack_req / ack_rep say how
// many of the receiver's requests / replies have been processed (the next number
// expected). Eight bits are enough: a window is at most k <= 64 messages, and a VI never
// delivers a message after a later one (the NIC drops an overtaken frame), so a number
// is never more than k away from the one expected.
struct UHdr {
    uint8_t seq;
    uint8_t ack_req;
    uint8_t ack_rep;
    uint8_t flags;  // kNackReq / kNackRep: the acknowledged number is missing, send it now
};
static_assert(sizeof(UHdr) == 4, "via-unrel immediate data");
inline uint32_t imm_of(const UHdr& u) {
    uint32_t v;
    memcpy(&v, &u, 4);
    return v;
}
inline UHdr uhdr_of(uint32_t v) {
    UHdr u;
    memcpy(&u, &v, 4);
    return u;
}
constexpr uint8_t kNackReq = 1, kNackRep = 2;

// One entry of a K_GATHER message: a word with the address (bits 0-47), the length
// (48-51, 1 to 8), the operation (52-53, GatherOp) and the call (56-63), then, for a
// store or a put, its n bytes (a get's entry is the word alone). The owner handles the
// entries in order; the reply carries the gets' values back-to-back, in order.
enum GatherOp : unsigned { G_STORE = 0, G_PUT = 1, G_GET = 2 };
constexpr uint64_t kAddrMask = (1ull << 48) - 1;
constexpr int kLenShift = 48, kOpShift = 52, kCallShift = 56;

struct AtomicBody {
    uint64_t addr;
    int64_t a, b;
    uint64_t fn;
};

enum ChanIdx { C_SHORT = 0, C_MED = 1, C_COUNT = 2 };
constexpr int kCredits[C_COUNT] = {64, 16};  // k per channel (power of 2)
constexpr size_t kMaxShortValue = 8;
constexpr size_t kMedPayload = 4096;
// Receive and send buffer per channel: the largest message of the channel.
constexpr size_t kBufBytes[C_COUNT] = {256, kMedPayload + 64};
// Stores, split-phase puts and gets of up to 8 bytes to one process are sent together
// (K_GATHER; docs/splitc.md, "Gathering"): until the message is full (no room for one more
// entry of 16 bytes), the program makes any other call into the back end (a blocking
// read or write included), or a poll (every waiting loop polls). SPLITC_STORE_BATCH=0:
// a message per store; SPLITC_GATHER=0: a message per put and get.
// Puts and gets go on the short channel: each needs a FIFO entry, and one reply of the
// short channel answers them all. Stores need neither (reply-free, nothing kept at the
// sender), so they gather on the medium channel, up to about 340 int stores a message.
constexpr size_t kGatherCap[C_COUNT] = {kBufBytes[C_SHORT] - sizeof(Hdr),  // entry bytes
                                        kBufBytes[C_MED] - sizeof(Hdr)};   // per message
constexpr size_t kMaxEntry = 8 + kMaxShortValue;
constexpr int kMaxEntries = int(kGatherCap[C_SHORT] / 8);  // short channel: all gets, a word each
constexpr int kMaxStoreEntries = int(kGatherCap[C_MED] / 9);  // medium channel: stores of 1 byte
// The requester's FIFO per channel (a power of 2, as its index mask needs). Up to 2k
// requests may wait for replies: k unacknowledged, and on via-unrel k more that the owner
// has processed (acknowledged) while their replies are lost (its reply window); each may
// be a K_GATHER with up to kMaxEntries puts and gets.
constexpr uint32_t kPendCap[C_COUNT] = {2 * uint32_t(kCredits[C_SHORT]) * 32, 2 * uint32_t(kCredits[C_MED])};
static_assert(kMaxEntries <= 32, "kPendCap");
constexpr size_t kDescBytes = 64;  // a descriptor with up to two segments
constexpr int kAckSlots = 8;       // via-unrel: send slots for unnumbered K_ACK messages

// A request waiting for its reply (the requester's FIFO, one per channel).
enum class PendOp : uint8_t { kGet, kPut, kAtomic };
struct Pend {
    void* dst;  // get: where the bytes go
    uint64_t addr;
    uint32_t n;
    uint8_t call;
    PendOp op;
    Wait w;
};

struct Peer;

// A send slot: a descriptor and the buffer its message is built in. busy while the
// descriptor is posted and not yet taken back (VipSendDone).
struct Slot {
    VIP_DESCRIPTOR* d;
    char* buf;
    uint32_t len;
    bool busy;
};

// via-unrel's per-class state of a channel (requests, replies).
struct Flow {
    // sender: numbers acked .. next_seq-1 are not acknowledged yet; the channel's slot
    // base + seq % k keeps each until it is (the copy that is sent again).
    uint8_t next_seq = 0, acked = 0;
    int base = 0;
    // receiver: the next number to process; out-of-order arrivals wait in held[seq % k]
    // (receive slot indexes, -1: none) until the gap is filled.
    uint8_t expect = 0;
    int nacked = -1;  // the missing number last asked for (one NACK per gap)
    int nheld = 0;
    std::vector<int> held;
};

struct Chan {
    Peer* peer = nullptr;
    int idx = 0;
    int k = 0;
    VIP_VI_HANDLE vi = nullptr;
    size_t buf_bytes = 0;
    // receive buffers (descriptor i at rdesc + i*kDescBytes, buffer at rbuf + i*buf_bytes)
    int nrecv = 0;
    char* rdesc = nullptr;
    char* rbuf = nullptr;
    // requests waiting for replies, in order (a ring of kPendCap[idx], a power of 2)
    Pend* pend = nullptr;
    uint32_t p_head = 0, p_tail = 0;
    // send queue mirror: every posted send-queue descriptor in post order (they complete
    // in that order); sq_n of them outstanding
    std::vector<VIP_DESCRIPTOR*> sq;
    uint32_t sq_head = 0, sq_n = 0;
    char* sdesc_lo = nullptr;  // [sdesc_lo, sdesc_hi): the slots' descriptors, in order
    char* sdesc_hi = nullptr;
    // via-rel: a ring of 2k; via-unrel: k for requests, k for replies, kAckSlots for K_ACK
    std::vector<Slot> slots;
    uint32_t s_next = 0;
    // operations being gathered into one K_GATHER message (backend_via.cc): its slot (a
    // credit or window place is taken), nullptr when none; entries and their bytes
    Slot* batch = nullptr;
    int batch_n = 0;
    uint32_t batch_len = 0;
    // ---- via-rel credits (AMVIA): requests we may still send; credits of handled
    // reply-free requests not yet given back
    int credits = 0;
    int owed = 0;
    bool in_owed_list = false;
    // ---- via-unrel
    Flow req, rep;
    int unreplied = 0;       // reply-free requests processed since we last sent anything
    bool ack_dirty = false;  // something to acknowledge that no message has carried yet
    bool quiet_ack = false;  // numbered messages came since the last quiet acknowledgement
    bool ack_now = false;    // a duplicate or a PING came: acknowledge at the end of the poll
    bool in_ack_list = false;
    bool in_dirty_list = false;
    bool in_timed = false;
    int ack_next = 0;
    // retransmission timer: since when nothing we sent here has been acknowledged
    uint64_t mark_ns = 0;  // 0: not running
    uint64_t stall_ns = 0;
    uint64_t rto_ns = 0;
    uint8_t mark_req = 0, mark_rep = 0;
    uint64_t rep_kick_ns = 0;  // the last time a peer's copy made us resend a reply
};

// What an RDMA descriptor does when it completes (via-rel, backend_via_rdma.cc).
struct RdmaOp {
    VIP_DESCRIPTOR* d;
    Wait w;
    bool counts;  // takes one off counter(w) when it completes
    bool busy;
};

struct Peer {
    int proc = 0;
    Chan ch[C_COUNT];
    char* region = nullptr;
    size_t region_bytes = 0;
    VIP_MEM_HANDLE mh = 0;
    bool gone = false;        // its connection broke (or it exited) while we were ending
    bool drained = false;     // via-unrel stop(): it said it has nothing unacknowledged
    int awaited = 0;          // the barrier waits for a message from it
    uint64_t rx = 0;          // messages received from it (liveness)
    uint64_t rx_seen = 0;
    uint64_t quiet_ns = 0;    // since when nothing came while we waited on it
    // via-rel RDMA
    std::vector<RdmaOp> rdma;
    uint32_t r_next = 0;
    uint32_t rdma_out = 0;
    char* rdesc_lo = nullptr;
};

// The remote side of RDMA: the symmetric regions' handles at every process (the regions
// are at the same addresses everywhere: the layout is checked at start-up).
struct Remote {
    uint32_t data_mh, heap_mh, pad_mh;
    uint32_t pad;
    uint64_t pad_addr;
};

struct Via {
    bool reliable = true;
    VIP_NIC_HANDLE nic = nullptr;
    VIP_NIC_ATTRIBUTES na{};
    VIP_PROTECTION_HANDLE ptag = nullptr;
    VIP_CQ_HANDLE cq = nullptr;
    std::vector<Peer*> peers;  // indexed by process; nullptr at MYPROC
    // VI -> channel (a small table: 2(P-1) VIs), with the last hit first
    std::vector<std::pair<VIP_VI_HANDLE, Chan*>> vis;
    VIP_VI_HANDLE last_vi = nullptr;
    Chan* last_ch = nullptr;
    std::vector<Chan*> owed_list;   // via-rel: channels owing credits
    std::vector<Chan*> ack_list;    // via-unrel: channels that acknowledge at the end of the poll
    std::vector<Chan*> dirty_list;  // via-unrel: channels that acknowledge once the polls go quiet
    std::vector<Chan*> timed;       // via-unrel: channels with unacknowledged messages
    std::vector<std::pair<Chan*, int>> reposts;  // reply buffers to post again
    std::vector<Peer*> rdma_peers;  // via-rel: peers with RDMA operations outstanding
    std::vector<Chan*> batches;     // channels with operations gathered, not sent yet
    bool store_batch = true;        // SPLITC_STORE_BATCH
    bool gather = true;             // SPLITC_GATHER
    unsigned polls = 0;
    unsigned quiet_polls = 0;
    int64_t atomic_result = 0;
    bool atomic_done = false;
    int bar_up[2] = {0, 0};
    int bar_released = 0;
    int bar_gen = 0;
    bool ending = false;  // splitc_exit or stop(): a broken connection is no error now
    // settings
    uint64_t peer_timeout_ns = 0;
    uint64_t rto_min_ns = 0;
    size_t rdma_min = 0;  // via-rel: bulk transfers of at least this many bytes use RDMA
    // memory registered with the NIC (via-rel): symmetric regions and made-global ones
    std::vector<Range> local_regions;  // registered, usable as local RDMA buffers
    std::vector<VIP_MEM_HANDLE> local_mh;
    Range data_rw{0, 0};  // the data segment's writable part (registered)
    uint32_t data_mh = 0, heap_mh = 0;
    std::vector<Remote> remote;
    char* pad = nullptr;
    VIP_MEM_HANDLE pad_mh = 0;
    // counters (SPLITC_VIA_STATS=1 prints them at the end)
    struct {
        uint64_t sent, received, retransmits, duplicates, held, nacks, acks_sent, credit_msgs, rdma_ops, probes,
            no_reply_slot, gather_msgs, gathered;
    } ctr{};
};
extern Via& V;

// ---- backend_via_setup.cc ------------------------------------------------------------
bool setup();                      // NIC, memory, VIs, connections to every process
void teardown_wait();              // the end of the job (see stop())
[[noreturn]] void peer_failed(Peer* p, const char* what);  // a connection broke
void check_send_status(Chan* c, VIP_DESCRIPTOR* d);
void print_stats();  // SPLITC_VIA_STATS
inline Chan* chan_of(VIP_VI_HANDLE vi) {
    if (vi == V.last_vi) return V.last_ch;
    for (auto& e : V.vis)
        if (e.first == vi) {
            V.last_vi = vi;
            V.last_ch = e.second;
            return e.second;
        }
    return nullptr;
}
VIP_RETURN post_recv(Chan* c, int i);
inline VIP_DESCRIPTOR* recv_desc(Chan* c, int i) {
    return reinterpret_cast<VIP_DESCRIPTOR*>(c->rdesc + size_t(i) * kDescBytes);
}
inline char* recv_buf(Chan* c, int i) { return c->rbuf + size_t(i) * c->buf_bytes; }
inline int recv_index(Chan* c, VIP_DESCRIPTOR* d) {
    return int((reinterpret_cast<char*>(d) - c->rdesc) / kDescBytes);
}

// ---- sending (backend_via.cc) ----------------------------------------------------------
// Posts a slot's message (len bytes at s->buf) on c; via-unrel: with immediate data imm.
void post_slot(Chan* c, Slot* s, uint32_t len, uint32_t imm);
// Takes back send descriptors that are done; with wait, until the oldest one is.
void reap(Chan* c, bool wait);
void poll_once();
void take_arrived();  // what has arrived already, without stepping the NIC
void flush_reposts();
void flush_batches();  // sends the operations gathered so far

// ---- via-rel: credits (backend_via_rel.cc) ----------------------------------------------
Slot* rel_request_slot(Chan* c);   // waits (polling) for a credit, then a slot
Slot* rel_reply_slot(Chan* c);     // a slot (only our own NIC has to act)
void rel_post_request(Chan* c, Slot* s, uint32_t len);
void rel_post_reply(Chan* c, Slot* s, uint32_t len, int answered);
void rel_owe_credit(Chan* c);
void rel_got_credits(Chan* c, int n);
void rel_flush_owed();

// ---- via-rel: RDMA (backend_via_rdma.cc) ---------------------------------------------------
bool rdma_setup();       // registers the symmetric memory; false: say why, no RDMA
bool rdma_local(const void* p, size_t n, VIP_MEM_HANDLE* mh);
bool rdma_remote(int proc, uint64_t addr, size_t n, uint32_t* mh);
void rdma_get(Peer* p, void* dst, VIP_MEM_HANDLE lmh, uint64_t addr, uint32_t rmh, size_t n, Wait w);
void rdma_put(Peer* p, uint64_t addr, uint32_t rmh, const void* src, VIP_MEM_HANDLE lmh, size_t n, Wait w);
void rdma_store(Peer* p, uint64_t addr, uint32_t rmh, const void* src, VIP_MEM_HANDLE lmh, size_t n, uint8_t call);
bool rdma_done(Chan* c, VIP_DESCRIPTOR* d);  // a send-queue completion that was ours
void rdma_reap_all();
void rel_probe(Peer* p);
void made_global(uint64_t lo, uint64_t hi, bool add);

// ---- via-unrel: the reliability protocol (backend_via_unrel.cc) ------------------------
Slot* unrel_request_slot(Chan* c);  // waits (polling) for window room, then its slot
bool unrel_reply_room(Chan* c);     // a reply can be sent now (else: do not process)
Slot* unrel_reply_slot(Chan* c);
void unrel_post(Chan* c, Slot* s, uint32_t len, bool request);
// A received message: its acknowledgements, then in order, held (early), or dropped
// (a duplicate); what is in order is delivered, and what was held behind it.
void unrel_receive(Chan* c, VIP_DESCRIPTOR* d, int slot);
void unrel_send_acks();             // channels that must acknowledge now
void unrel_idle_acks();             // the stream stopped: acknowledge what is owed
void unrel_timers(uint64_t now, bool idle);
bool unrel_all_acked();
void unrel_ping(Peer* p);

// ---- building messages (backend_via.cc, backend_via_gather.cc) --------------------------
inline uint64_t load64(const void* p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
inline void store64(void* p, uint64_t v) { memcpy(p, &v, 8); }

struct Out {
    Chan* c;
    Slot* s;
    char* body;
};
inline Out begin(Chan* c, Slot* s, uint8_t kind, uint8_t x, uint16_t n) {
    Hdr h{kind, x, n};
    memcpy(s->buf, &h, sizeof h);
    return Out{c, s, s->buf + sizeof(Hdr)};
}
// A request: waits (polling) for a credit (via-rel) or room in the window (via-unrel).
inline Out begin_request(Chan* c, uint8_t kind, uint8_t call, uint16_t n) {
    return begin(c, V.reliable ? rel_request_slot(c) : unrel_request_slot(c), kind, call, n);
}
inline void end_request(const Out& o, size_t body) {
    const uint32_t len = uint32_t(sizeof(Hdr) + body);
    if (V.reliable) rel_post_request(o.c, o.s, len);
    else unrel_post(o.c, o.s, len, true);
}
inline Out begin_reply(Chan* c, uint8_t kind, uint16_t n) {
    return begin(c, V.reliable ? rel_reply_slot(c) : unrel_reply_slot(c), kind, 0, n);
}
inline void end_reply(const Out& o, size_t body) {
    const uint32_t len = uint32_t(sizeof(Hdr) + body);
    if (V.reliable) rel_post_reply(o.c, o.s, len, 1);
    else unrel_post(o.c, o.s, len, false);
}

// The FIFO of requests waiting for replies (a ring of kPendCap[channel]).
inline uint32_t pend_mask(const Chan* c) { return kPendCap[c->idx] - 1; }
inline void push_pend(Chan* c, const Pend& e) {
    if (c->p_tail - c->p_head > pend_mask(c))  // the bound above is wrong: never overwrite
        fatal("via back end: more than %u operations wait for replies from process %d", pend_mask(c) + 1, c->peer->proc);
    c->pend[c->p_tail++ & pend_mask(c)] = e;
}
inline Pend& front_pend(Chan* c, uint8_t kind) {
    if (c->p_head == c->p_tail)
        fatal("via back end: process %d sent a reply (handler %u) to no request", c->peer->proc, kind);
    return c->pend[c->p_head & pend_mask(c)];
}

[[noreturn]] void malformed(Chan* c, const Hdr& h, uint32_t len);
void refuse(Chan* c, const Hdr& h, uint64_t addr);
void reply_free(Chan* c);

// ---- gathering (backend_via_gather.cc) -----------------------------------------------------
// A store, put or get of 1 to 8 bytes joins the K_GATHER being built for p (a put or a get
// counts in counter(w) and takes a FIFO entry); the message goes when full.
void gather(Peer* p, GatherOp op, uint64_t addr, const void* src, void* dst, size_t n, Wait w, uint8_t call);
// The owner: handles a K_GATHER's entries in order; returns deliver()'s flags.
int owner_gather(Chan* c, const Hdr& h, const char* body, size_t blen, uint32_t len);
// The requester: a K_GATHER_R completes the n puts and gets at the head of the FIFO.
void requester_gather_reply(Chan* c, const Hdr& h, const char* body, size_t blen, uint32_t len);

// Runs one message's handler and gives its buffer back (backend_via.cc); kWasRequest,
// kReplied flags.
constexpr int kWasRequest = 1, kReplied = 2;
int deliver(Chan* c, uint32_t len, int slot);
uint64_t now_ns();

}  // namespace via
}  // namespace splitc
