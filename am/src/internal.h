// internal.h -- AMVIA's objects (docs/am.md has the design), and what each file of am/src
// uses of the others (the end of this file; docs/am.md, "Source layout", says which
// file holds what).
#pragma once

#include <am.h>
#include <vipl.h>

#include <sched.h>
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#define AMX_API extern "C" __attribute__((visibility("default")))

// Everything below is internal to libamvia (the version script exports AM_* and AMX_*
// only). Declared hidden so that the files reach each other's data and functions
// directly, as when am/ was one file, not through the GOT.
#pragma GCC visibility push(hidden)

namespace softvia::am {

// Message kinds. The six user kinds equal the AM-2 opcodes handler 0 receives.
enum Kind : uint8_t {
    K_REQ_SHORT = AM_REQUEST_M,
    K_REQ_MEDIUM = AM_REQUEST_IM,
    K_REQ_LONG = AM_REQUEST_XFER_M,
    K_REP_SHORT = AM_REPLY_M,
    K_REP_MEDIUM = AM_REPLY_IM,
    K_REP_LONG = AM_REPLY_XFER_M,
    K_CREDIT = 7,   // reply class: returns credits of requests whose handler did not reply
    K_RETURN = 8,   // reply class: a request came back (args[0] status, args[1] opcode)
    K_SEGINFO = 9,  // request class, internal: the sender's segment (address, handle, length)
    K_BARRIER = 10, // request class, internal: SPMD barrier (args[0] phase, args[1] generation)
};
inline bool is_reply_kind(uint8_t k) { return k >= K_REP_SHORT && k <= K_RETURN; }

// Wire header. A message sends the first 24 bytes, its arguments, then (medium) the
// payload at an 8-byte aligned offset.
struct Hdr {
    uint8_t kind;
    uint8_t handler;
    uint8_t nargs;
    uint8_t credits;  // reply class: request credits this message gives back
    uint32_t nbytes;  // medium/long payload length
    uint64_t tag;
    uint64_t offset;  // long: destination offset in the receiver's segment
    int32_t args[AMX_MAX_ARGS];
};
static_assert(sizeof(Hdr) == 88, "wire header layout");
constexpr size_t kHdrFixed = 24;
inline size_t payload_offset(unsigned nargs) { return (kHdrFixed + 4 * nargs + 7) & ~size_t(7); }

enum ChanIdx { C_SHORT = 0, C_MEDIUM = 1, C_LONG = 2, C_COUNT = 3 };
constexpr int kCredits[C_COUNT] = {64, 8, 4};  // the paper's k per channel
// Receive (and header) buffer per channel: short fits 16 arguments; medium and long fit
// a medium payload (a medium reply may answer a long request).
constexpr size_t kBufBytes[C_COUNT] = {128, 4224, 4224};
constexpr size_t kLongBounce = AMX_MAX_LONG;  // per long-channel send slot
constexpr size_t kRecvDescBytes = 64;
constexpr size_t kSendSlotDescBytes = 128;  // two descriptors: RDMA write + header send

using Endpoint = ::amx_endpoint;
using Bundle = ::amx_bundle;
struct Peer;

struct Channel {
    Peer* peer = nullptr;
    int idx = 0;
    VIP_VI_HANDLE vi = nullptr;
    bool connected = false;
    int k = 0;
    int credits = 0;  // requests we may still send
    int owed = 0;     // credits of handled requests not yet given back
    // Credits come back in post order (the peer handles a channel's requests in order),
    // so request n is answered once credits_back > n. Internal requests (segment
    // announcement, barrier) are remembered by number: when the peer dies, only the user
    // requests among the unanswered ones go back to handler 0.
    uint64_t requests_posted = 0, credits_back = 0;
    std::vector<uint64_t> internal_unanswered;
    bool in_owed_list = false;
    // receive side
    int nrecv = 0;
    char* rdesc = nullptr;
    char* rbuf = nullptr;
    // send side: a ring of 2k slots, freed in post order as their descriptors complete
    int nslots = 0;
    char* sdesc = nullptr;
    char* sbuf = nullptr;
    size_t sbuf_bytes = 0;
    std::vector<uint8_t> slot_pending;  // descriptors of the slot not yet taken back (bits)
    int s_head = 0, s_used = 0;
};

enum PeerState { P_CONNECTING, P_UP, P_DEAD };

struct Peer {
    Endpoint* ep = nullptr;
    en_t name{};
    int role = 0;  // 0 ordinary; 1/2 the two halves of an endpoint mapped to itself
    PeerState state = P_CONNECTING;
    bool seg_sent = false;
    bool death_reported = false;
    Channel ch[C_COUNT];
    char* region = nullptr;
    size_t region_bytes = 0;
    VIP_MEM_HANDLE mh = 0;
    bool rseg_known = false;
    uint64_t rseg_addr = 0, rseg_len = 0;
    uint32_t rseg_memh = 0;
    Peer* twin = nullptr;  // self-mapping: the other half
    bool implicit = false;  // made for an endpoint that mapped us without our mapping it
    uint64_t next_knock_ms = 0;  // one-sided mapping: when to ask the remote side again
    // Liveness (see probe_quiet_peers): the remote's probe target, messages received so
    // far, and since when none came while requests were outstanding.
    uint64_t rprobe_addr = 0;
    uint32_t rprobe_memh = 0;
    bool rprobe_known = false;
    uint64_t rx_msgs = 0, seen_msgs = 0;
    uint64_t quiet_since_ms = 0;
};

struct Translation {
    bool used = false;
    en_t name{};
    tag_t tag = 0;
    Peer* peer = nullptr;
};

struct CqEntry {
    VIP_VI_HANDLE vi;
    VIP_BOOLEAN queue;
};

}  // namespace softvia::am

struct amx_endpoint {
    uint32_t magic = 0;
    softvia::am::Bundle* bundle = nullptr;
    en_t name{};
    tag_t tag = AM_NONE;
    bool steering = true;
    VIP_CQ_HANDLE cq = nullptr;
    size_t cq_entries = 0, recv_descs = 0;
    std::vector<softvia::am::Translation> trans;
    std::vector<amx_handler_fn_t> handlers;
    std::vector<softvia::am::Peer*> peers;
    std::vector<softvia::am::Peer*> connecting;
    std::unordered_map<VIP_VI_HANDLE, softvia::am::Channel*> vi_to_channel;
    VIP_VI_HANDLE last_vi = nullptr;
    softvia::am::Channel* last_ch = nullptr;
    void* seg = nullptr;
    uintptr_t seg_len = 0;
    VIP_MEM_HANDLE seg_mh = 0;
    std::vector<softvia::am::Channel*> owed_list;
    std::vector<softvia::am::CqEntry> stash;  // CQ entries AM_WaitSema took, handled by the next poll
    std::vector<std::pair<softvia::am::Channel*, int>> reposts;  // reply buffers to post again (defer_repost)
    amx_counters_t ctr{};
    VIP_VI_HANDLE knock_vi = nullptr;  // idle VI that carries knocks (one-sided mapping)
    int expected_endpoints = 0, expected_requests = 0;
};

namespace softvia::am {
struct Pending {
    Channel* ch;
    VIP_DESCRIPTOR* d;
};

}  // namespace softvia::am

struct amx_bundle {
    uint32_t magic = 0;
    std::vector<softvia::am::Endpoint*> eps;
    int event_mask = AM_NOEVENTS;
    std::vector<softvia::am::Pending> reqq, repq;  // host marshalling: requests and replies sorted
    unsigned polls = 0;  // liveness checks run every kLivenessPolls polls
    unsigned quiet_polls = 0;  // polls in a row that found nothing
};

namespace softvia::am {

// Waiting loops that poll give the core away (sched_yield) only after 256 polls in a
// row found nothing (some tens of microseconds): a loop that is handling a stream never
// yields, one that waits on a core shared with the rank it waits for lets it run.
struct IdleYield {
    unsigned idle = 0;
    void after(int handled);
};
inline void IdleYield::after(int handled) {
    if (handled) idle = 0;
    else if ((++idle & 255) == 0) sched_yield();
}

// A handler's view of its message. Live only while the handler runs.
struct Token {
    uint32_t magic;
    bool is_request;
    bool replied;
    Endpoint* ep;
    Peer* peer;
    Channel* ch;
    uint8_t kind;
    tag_t tag;
};

// ---------------------------------------------------------------- shared by the files
constexpr uint32_t kEpMagic = 0x41455031;  // "AEP1"
constexpr uint32_t kEbMagic = 0x41454231;
constexpr uint32_t kTokMagic = 0x41544b31;

struct Global {
    bool inited = false;
    VIP_NIC_HANDLE nic = nullptr;
    VIP_NIC_ATTRIBUTES na{};
    VIP_PROTECTION_HANDLE ptag = nullptr;
    // Target of liveness probes: 0-byte RDMA writes land here (nothing is ever written),
    // announced to every peer with the segment.
    char* probe_pad = nullptr;
    VIP_MEM_HANDLE probe_mh = 0;
    std::vector<Bundle*> bundles;
    int steering = -1;  // -1: from $AMVIA_STEERING at first use
    long connect_timeout_ms = -1;
    int returned_printed = 0;
    // One-sided mapping: the standing listener that takes knocks (see knock()).
    VIP_EXT_LISTEN_HANDLE listen = nullptr;
    bool inline_progress = true;  // the NIC steps only inside our own VIPL calls
    // Long payloads go by RDMA write straight from the caller's memory when our own NIC
    // completes a write as soon as it has read it (inline progress, lossless wire: AM
    // waits for that before the call returns); otherwise through a bounce buffer, so that
    // several are in flight while a lossy wire waits for acknowledgements.
    bool zero_copy_long = false;
    // Sources of long payloads registered on the fly (page-rounded spans, least recently
    // used replaced): see source_handle in channel.cc.
    struct SourceReg {
        uintptr_t lo = 0, hi = 0;
        VIP_MEM_HANDLE mh = 0;
        uint64_t used = 0;
    };
    SourceReg source_regs[8];
    uint64_t source_uses = 0;
    // Freed bundles and endpoints keep their (cleared) memory, so that a stale handle
    // fails its magic check with AM_ERR_BAD_ARG instead of reading freed memory.
    // (Heap vectors never destroyed: they must outlive the leak check at exit.)
    std::vector<Endpoint*>& dead_eps = *new std::vector<Endpoint*>;
    std::vector<Bundle*>& dead_bundles = *new std::vector<Bundle*>;
};
extern Global g;  // api.cc

// Handlers run one at a time (AM_SEQ); a handler may cause handler 0 to run (a reply
// that cannot be sent), so tokens nest a little. A token is valid while it is listed.
extern Token* g_active[8];  // dispatch.cc
extern int g_nactive;

inline bool in_handler() { return g_nactive > 0; }

inline Token* token_of(void* p) {
    for (int i = 0; i < g_nactive && i < 8; i++)
        if (g_active[i] == p && g_active[i]->magic == kTokMagic) return g_active[i];
    return nullptr;
}

inline uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

inline bool ep_ok(ep_t ep) { return ep && ep->magic == kEpMagic; }
inline bool eb_ok(eb_t eb) { return eb && eb->magic == kEbMagic; }

inline bool same_name(const en_t& a, const en_t& b) {
    return a.ep_id == b.ep_id && a.nic_addr_len == b.nic_addr_len &&
           memcmp(a.nic_addr, b.nic_addr, a.nic_addr_len) == 0;
}

// The opcode handler 0 gets for a returned request, per channel.
constexpr int kRequestOp[C_COUNT] = {AM_REQUEST_M, AM_REQUEST_IM, AM_REQUEST_XFER_M};

// A slot's descriptors: the RDMA write (long payload, liveness probe) at offset 0, the
// header send at 64; slot_pending has bit kWritePending / kSendPending for each one
// posted and not yet taken back.
constexpr uint8_t kWritePending = 1, kSendPending = 2;

// api.cc: AM's settings.
bool steering_default();
long connect_timeout();

// endpoint.cc
void free_endpoint(Endpoint* ep);

// peer.cc: MAP objects and one-sided mapping.
void peer_dead(Peer* p);
void destroy_peer(Peer* p);
int create_peer(Endpoint* ep, const en_t& name, int role, Peer** out);
void announce_segment(Peer* p);
bool check_connect(Peer* p);  // moves a connecting peer along; true once up (or dead)
void start_listener();
void stop_listener();
void take_knocks();
void knock(Peer* p);

// channel.cc: sending and credits.
int get_slot(Channel* c);
int post_message(Channel* c, uint8_t kind, handler_t handler, tag_t tag, int nargs, const int32_t* args,
                 const void* src, size_t nbytes, uint64_t offset, uint8_t credits);
void owe_credit(Channel* c);
void flush_owed(Endpoint* ep);
int send_internal(Peer* p, uint8_t kind, int nargs, const int32_t* args);
void drop_source_regs();  // before the NIC closes

// dispatch.cc: receiving, handlers, polling.
void call_returned(Endpoint* ep, Peer* peer, Channel* ch, int status, int opcode, tag_t tag);
VIP_RETURN post_recv(Channel* c, int i);
void flush_reposts(Endpoint* ep);
int poll_bundle(Bundle* b);

// On the message path of both channel.cc and dispatch.cc (a handler replies; replies
// bring credits back): inline here, so that neither file calls the other for them.

// Credits given back answer the oldest requests first.
inline void credits_returned(Channel* c, int n) {
    c->credits += n;
    if (c->credits > c->k) c->credits = c->k;
    c->credits_back += uint64_t(n);
    if (c->credits_back > c->requests_posted) c->credits_back = c->requests_posted;
    auto& iu = c->internal_unanswered;
    size_t answered = 0;
    while (answered < iu.size() && iu[answered] < c->credits_back) answered++;
    if (answered) iu.erase(iu.begin(), iu.begin() + long(answered));
}

// Reply-class message with the credits owed on this channel (plus one for the request
// being answered, if any).
inline int post_reply(Channel* c, uint8_t kind, handler_t handler, tag_t tag, int nargs, const int32_t* args,
                      const void* src, size_t nbytes, uint64_t offset, int answered) {
    int give = c->owed + answered;
    if (give > 255) give = 255;
    int rc = post_message(c, kind, handler, tag, nargs, args, src, nbytes, offset, static_cast<uint8_t>(give));
    if (rc == AM_OK) c->owed -= give - answered;
    return rc;
}

// For spmd.cc (SPMD start-up and collectives) from peer.cc, channel.cc and dispatch.cc.
int poll_count(eb_t eb);  // AM_Poll with what it took; -1 inside a handler
void flush_credits(ep_t ep);
bool all_peers_ready(ep_t ep);
bool any_peer_dead(ep_t ep);
bool peer_dead_at(ep_t ep, int index);
void quiesce(ep_t ep);
int send_barrier(ep_t ep, int index, int phase, int gen);
extern int g_barrier_arrivals[2];
extern int g_barrier_released;

}  // namespace softvia::am

#pragma GCC visibility pop
