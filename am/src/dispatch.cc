// dispatch.cc -- the receive side of the message path: receive buffers posted (again),
// a message's checks and its handler's call (tokens; handler 0 for returned messages),
// the poll of a bundle (completion queues, connections under way, knocks, liveness
// probes, credits owed back) and the calls that poll or wait: AM_Poll, AM_WaitSema, and
// the token queries of handlers. What a poll runs per message is in this one file so
// that the compiler inlines it into poll_bundle as it did when am/ was one file.
#include "internal.h"

#include <sched.h>

#include <cstdio>
#include <cstring>

using namespace softvia::am;

namespace softvia::am {

// The tokens of the handlers running now (in_handler, token_of in internal.h).
Token* g_active[8];
int g_nactive = 0;

// SPMD barrier state (spmd.cc reads it).
int g_barrier_arrivals[2];
int g_barrier_released = 0;

namespace {

constexpr int kPollBudget = 64;
// Liveness: a peer that owes replies and has sent nothing for kProbeQuietMs gets a probe
// (a 0-byte RDMA write) at most that often; checked every kLivenessPolls polls.
constexpr uint64_t kProbeQuietMs = 250;
constexpr unsigned kLivenessPolls = 4096;
// Knocks (one-sided mapping) are looked for every kKnockPolls polls (a power of 2): the
// look steps the NIC when none is held, which a poll has just done.
constexpr unsigned kKnockPolls = 64;
// Credits of reply-free requests go back in quarter-window batches while requests keep
// coming; the rest once this many polls in a row found nothing (see owe_credit).
constexpr unsigned kQuietPolls = 16;

struct TokenScope {
    explicit TokenScope(Token* t) {
        t->magic = kTokMagic;
        if (g_nactive < 8) g_active[g_nactive] = t;
        g_nactive++;
    }
    ~TokenScope() { g_nactive--; }
};

// ---------------------------------------------------------------- descriptors
VIP_DESCRIPTOR* recv_desc(Channel* c, int i) { return reinterpret_cast<VIP_DESCRIPTOR*>(c->rdesc + i * kRecvDescBytes); }
char* recv_buf(Channel* c, int i) { return c->rbuf + size_t(i) * kBufBytes[c->idx]; }
int recv_index(Channel* c, VIP_DESCRIPTOR* d) { return int((reinterpret_cast<char*>(d) - c->rdesc) / kRecvDescBytes); }

// Steering: the first k+1 receives take requests, the other k take replies.
bool is_reply_slot(Channel* c, int i) { return c->peer->ep->steering && i > c->k; }

}  // namespace

VIP_RETURN post_recv(Channel* c, int i) {
    VIP_DESCRIPTOR* d = recv_desc(c, i);
    memset(&d->CS, 0, sizeof d->CS);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = recv_buf(c, i);
    d->DS[0].Local.Handle = c->peer->mh;
    d->DS[0].Local.Length = static_cast<VIP_UINT32>(kBufBytes[c->idx]);
    return is_reply_slot(c, i) ? VipExtPostRecvReply(c->vi, d, c->peer->mh) : VipPostRecv(c->vi, d, c->peer->mh);
}

// Buffers of handled reply-class messages are posted again at the next AM call rather
// than right after their handler: a requester that has just seen its reply returns at
// once, and its next request posts the buffer while that request travels. Safe: the m
// replies whose buffers wait gave back at least m credits, so at most k - m replies can
// come until another request is sent; every poll posts the buffers before it steps the
// NIC, and a request posts them before it is sent, or right after when the NIC cannot
// run in between (inline progress: only our calls step it), one buffer waits, and the
// request leaves at most k - 1 outstanding on that buffer's channel.
void flush_reposts(Endpoint* ep) {
    for (auto& r : ep->reposts)
        if (r.first->peer->state != P_DEAD && post_recv(r.first, r.second) != VIP_SUCCESS) peer_dead(r.first->peer);
    ep->reposts.clear();
}

// ---------------------------------------------------------------- returned messages
void call_returned(Endpoint* ep, Peer* peer, Channel* ch, int status, int opcode, tag_t tag) {
    ep->ctr.returned++;
    Token t{kTokMagic, false, true, ep, peer, ch, static_cast<uint8_t>(opcode), tag};
    TokenScope scope(&t);
    auto fn = reinterpret_cast<amx_returned_fn_t>(ep->handlers[0]);
    fn(status, opcode, &t);
}

namespace {

Channel* channel_of(Endpoint* ep, VIP_VI_HANDLE vi) {
    if (vi == ep->last_vi) return ep->last_ch;
    auto it = ep->vi_to_channel.find(vi);
    if (it == ep->vi_to_channel.end()) return nullptr;
    ep->last_vi = vi;
    ep->last_ch = it->second;
    return it->second;
}

void check_connecting(Endpoint* ep) {
    for (size_t i = 0; i < ep->connecting.size();) {
        size_t before = ep->connecting.size();
        check_connect(ep->connecting[i]);
        if (ep->connecting.size() == before) i++;  // still connecting; else it left the list
    }
}

// ---------------------------------------------------------------- dispatch
#define AMX_T0
#define AMX_T1 AMX_T0, int
#define AMX_T2 AMX_T1, int
#define AMX_T3 AMX_T2, int
#define AMX_T4 AMX_T3, int
#define AMX_T5 AMX_T4, int
#define AMX_T6 AMX_T5, int
#define AMX_T7 AMX_T6, int
#define AMX_T8 AMX_T7, int
#define AMX_T9 AMX_T8, int
#define AMX_T10 AMX_T9, int
#define AMX_T11 AMX_T10, int
#define AMX_T12 AMX_T11, int
#define AMX_T13 AMX_T12, int
#define AMX_T14 AMX_T13, int
#define AMX_T15 AMX_T14, int
#define AMX_T16 AMX_T15, int
#define AMX_V0
#define AMX_V1 AMX_V0, a[0]
#define AMX_V2 AMX_V1, a[1]
#define AMX_V3 AMX_V2, a[2]
#define AMX_V4 AMX_V3, a[3]
#define AMX_V5 AMX_V4, a[4]
#define AMX_V6 AMX_V5, a[5]
#define AMX_V7 AMX_V6, a[6]
#define AMX_V8 AMX_V7, a[7]
#define AMX_V9 AMX_V8, a[8]
#define AMX_V10 AMX_V9, a[9]
#define AMX_V11 AMX_V10, a[10]
#define AMX_V12 AMX_V11, a[11]
#define AMX_V13 AMX_V12, a[12]
#define AMX_V14 AMX_V13, a[13]
#define AMX_V15 AMX_V14, a[14]
#define AMX_V16 AMX_V15, a[15]
#define AMX_CALL_SHORT(N) \
    case N: reinterpret_cast<void (*)(void* AMX_T##N)>(fn)(tok AMX_V##N); break;
#define AMX_CALL_BULK(N) \
    case N: reinterpret_cast<void (*)(void*, void*, size_t AMX_T##N)>(fn)(tok, buf, n AMX_V##N); break;
#define AMX_ALL_ARITIES(M) \
    M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15) M(16)

// The arguments are read straight from the header (4-byte aligned in the receive
// buffer); only the first nargs are touched.
void call_short(amx_handler_fn_t fn, void* tok, int nargs, const int32_t* a) {
    switch (nargs) { AMX_ALL_ARITIES(AMX_CALL_SHORT) }
}

void call_bulk(amx_handler_fn_t fn, void* tok, void* buf, size_t n, int nargs, const int32_t* a) {
    switch (nargs) { AMX_ALL_ARITIES(AMX_CALL_BULK) }
}

bool handler_ok(Endpoint* ep, handler_t h) {
    return h != 0 && h < ep->handlers.size() && ep->handlers[h] != nullptr;
}

// Handles one received message and posts its descriptor again.
void handle(Endpoint* ep, Channel* c, VIP_DESCRIPTOR* d) {
    Peer* p = c->peer;
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) {  // flushed: the connection is gone
        peer_dead(p);
        return;
    }
    p->rx_msgs++;
    int slot = recv_index(c, d);
    Hdr* h = reinterpret_cast<Hdr*>(recv_buf(c, slot));
    uint32_t len = d->CS.Length;
    uint8_t kind = h->kind;
    bool sane = len >= kHdrFixed && h->nargs <= AMX_MAX_ARGS && len >= kHdrFixed + 4u * h->nargs;
    if (sane && (kind == K_REQ_MEDIUM || kind == K_REP_MEDIUM))
        sane = h->nbytes <= AMX_MAX_MEDIUM && len >= payload_offset(h->nargs) + h->nbytes;
    if (!sane || kind < K_REQ_SHORT || kind > K_BARRIER) {
        fprintf(stderr, "amvia: malformed message (kind %u, %u bytes) dropped\n", kind, len);
        if (post_recv(c, slot) != VIP_SUCCESS) peer_dead(p);
        return;
    }
    if (is_reply_kind(kind)) credits_returned(c, h->credits);
    switch (kind) {
        case K_CREDIT:
            break;
        case K_RETURN:
            call_returned(ep, p, c, h->args[0], h->args[1], h->tag);
            break;
        case K_SEGINFO:
            p->rseg_addr = uint64_t(uint32_t(h->args[0])) | uint64_t(uint32_t(h->args[1])) << 32;
            p->rseg_memh = uint32_t(h->args[2]);
            p->rseg_len = uint64_t(uint32_t(h->args[3])) | uint64_t(uint32_t(h->args[4])) << 32;
            p->rseg_known = true;
            if (h->nargs >= 8) {
                p->rprobe_addr = uint64_t(uint32_t(h->args[5])) | uint64_t(uint32_t(h->args[6])) << 32;
                p->rprobe_memh = uint32_t(h->args[7]);
                p->rprobe_known = true;
            }
            owe_credit(c);
            break;
        case K_BARRIER:
            if (h->args[0] == 0) g_barrier_arrivals[h->args[1] & 1]++;
            else if (h->args[1] > g_barrier_released) g_barrier_released = h->args[1];
            owe_credit(c);
            break;
        case K_REQ_SHORT:
        case K_REQ_MEDIUM:
        case K_REQ_LONG: {
            int status = 0;
            if (ep->tag == AM_NONE || (ep->tag != AM_ALL && h->tag != ep->tag)) status = EBADTAG;
            else if (!handler_ok(ep, h->handler)) status = EBADHANDLER;
            else if (kind == K_REQ_LONG && (h->offset > ep->seg_len || !ep->seg)) status = EBADSEGOFF;
            else if (kind == K_REQ_LONG && h->nbytes > ep->seg_len - h->offset) status = EBADLENGTH;
            if (status) {
                int32_t a[2] = {status, kind};
                post_reply(c, K_RETURN, 0, h->tag, 2, a, nullptr, 0, 0, 1);
                break;
            }
            ep->ctr.requests_handled++;
            Token t{kTokMagic, true, false, ep, p, c, kind, h->tag};
            {
                TokenScope scope(&t);
                amx_handler_fn_t fn = ep->handlers[h->handler];
                if (kind == K_REQ_SHORT) call_short(fn, &t, h->nargs, h->args);
                else if (kind == K_REQ_MEDIUM)
                    call_bulk(fn, &t, reinterpret_cast<char*>(h) + payload_offset(h->nargs), h->nbytes, h->nargs,
                              h->args);
                else call_bulk(fn, &t, static_cast<char*>(ep->seg) + h->offset, h->nbytes, h->nargs, h->args);
            }
            if (!t.replied) owe_credit(c);  // the implicit reply
            break;
        }
        default: {  // replies
            int status = 0;
            if (!handler_ok(ep, h->handler)) status = EBADHANDLER;
            else if (kind == K_REP_LONG && (h->offset > ep->seg_len || !ep->seg)) status = EBADSEGOFF;
            else if (kind == K_REP_LONG && h->nbytes > ep->seg_len - h->offset) status = EBADLENGTH;
            if (status) {  // a reply cannot come back: the receiving side hears of it
                call_returned(ep, p, c, status, kind, h->tag);
                break;
            }
            ep->ctr.replies_handled++;
            Token t{kTokMagic, false, false, ep, p, c, kind, h->tag};
            TokenScope scope(&t);
            amx_handler_fn_t fn = ep->handlers[h->handler];
            if (kind == K_REP_SHORT) call_short(fn, &t, h->nargs, h->args);
            else if (kind == K_REP_MEDIUM)
                call_bulk(fn, &t, reinterpret_cast<char*>(h) + payload_offset(h->nargs), h->nbytes, h->nargs, h->args);
            else call_bulk(fn, &t, static_cast<char*>(ep->seg) + h->offset, h->nbytes, h->nargs, h->args);
            break;
        }
    }
    if (p->state == P_DEAD) return;
    if (is_reply_kind(kind)) ep->reposts.emplace_back(c, slot);  // see flush_reposts
    else if (post_recv(c, slot) != VIP_SUCCESS) peer_dead(p);
}

// The first look of a poll may step the NIC (VipCQDone); the later ones only take what
// that step (or a handler's send) produced, so a poll that handled a message returns at
// once instead of stepping an idle NIC once more.
bool next_entry(Endpoint* ep, CqEntry* e, bool first) {
    if (!ep->stash.empty()) {
        *e = ep->stash.front();
        ep->stash.erase(ep->stash.begin());
        return true;
    }
    return (first ? VipCQDone(ep->cq, &e->vi, &e->queue) : VipExtCQTake(ep->cq, &e->vi, &e->queue)) ==
           VIP_SUCCESS;
}

// Takes up to budget messages of one endpoint. Steering: the firmware already put
// requests and replies in separate queues, so each is handled as it comes. Host
// marshalling: every message is read and sorted first (the paper's AM_Poll), then
// replies run before requests.
int process_ep(Endpoint* ep, int budget) {
    Bundle* b = ep->bundle;
    CqEntry e;
    int n = 0;
    for (; n < budget && next_entry(ep, &e, n == 0); n++) {
        Channel* c = channel_of(ep, e.vi);
        if (!c) continue;  // a VI destroyed since
        VIP_DESCRIPTOR* d = nullptr;
        VIP_RETURN r = e.queue == VIP_EXT_REPLY_QUEUE ? VipExtRecvReplyDone(e.vi, &d) : VipRecvDone(e.vi, &d);
        if (r != VIP_SUCCESS) continue;
        if (ep->steering) {
            handle(ep, c, d);
            continue;
        }
        // A flushed receive (the connection is gone) queues behind the replies read
        // before it: their credits must be counted before the loss of the rest is.
        const Hdr* h = reinterpret_cast<const Hdr*>(recv_buf(c, recv_index(c, d)));
        bool reply_class = (d->CS.Status & VIP_STATUS_ERROR_MASK) || is_reply_kind(h->kind);
        (reply_class ? b->repq : b->reqq).push_back({c, d});
    }
    if (!ep->steering) {
        for (size_t i = 0; i < b->repq.size(); i++) handle(ep, b->repq[i].ch, b->repq[i].d);
        b->repq.clear();
        for (size_t i = 0; i < b->reqq.size(); i++) handle(ep, b->reqq[i].ch, b->reqq[i].d);
        b->reqq.clear();
    }
    return n;
}

// Liveness. A dead peer is noticed when its NIC's VIs fail: at once on shm, but on a
// wire that cannot tell (dpdk; udp where ICMP is filtered) only when a reliable transfer
// to it goes unacknowledged for the retry timeout. A requester whose requests were all
// acknowledged before the peer died would wait for their replies forever; so a peer
// that owes replies and has been silent for kProbeQuietMs gets a 0-byte RDMA write,
// which its NIC must acknowledge: if it is dead, the VI fails after the retry timeout
// and its requests come back EUNREACHABLE. A live peer costs one frame and its ACK.
void post_probe(Peer* p) {
    Channel* c = &p->ch[C_SHORT];
    int slot = get_slot(c);
    if (slot < 0) {
        peer_dead(p);
        return;
    }
    auto* wd = reinterpret_cast<VIP_DESCRIPTOR*>(c->sdesc + size_t(slot) * kSendSlotDescBytes);
    c->slot_pending[slot] = 0;
    memset(wd, 0, 64);
    wd->CS.Control = VIP_CONTROL_OP_RDMAWRITE;
    wd->CS.SegCount = 1;
    wd->DS[0].Remote.Data.AddressBits = p->rprobe_addr;
    wd->DS[0].Remote.Handle = p->rprobe_memh;
    if (VipPostSend(c->vi, wd, p->mh) != VIP_SUCCESS) {
        c->s_used--;  // the slot was the newest: give it back
        peer_dead(p);
        return;
    }
    c->slot_pending[slot] |= kWritePending;
    p->ep->ctr.probes_sent++;
}

void probe_quiet_peers(Endpoint* ep) {
    uint64_t now = now_ms();
    for (size_t i = 0; i < ep->peers.size(); i++) {
        Peer* p = ep->peers[i];
        if (p->state != P_UP || !p->rprobe_known) continue;
        bool owes = false;
        for (int k = 0; k < C_COUNT; k++) owes = owes || p->ch[k].credits < p->ch[k].k;
        if (!owes || p->rx_msgs != p->seen_msgs || p->quiet_since_ms == 0) {  // 0: never looked
            p->seen_msgs = p->rx_msgs;
            p->quiet_since_ms = now;
        } else if (now - p->quiet_since_ms >= kProbeQuietMs) {
            p->quiet_since_ms = now;
            post_probe(p);
        }
    }
}

}  // namespace

// One poll of every endpoint of the bundle; how many completion entries it took.
int poll_bundle(Bundle* b) {
    unsigned polls = ++b->polls;
    if ((polls & (kKnockPolls - 1)) == 0) take_knocks();
    bool liveness = polls % kLivenessPolls == 0;
    int got = 0;
    for (size_t i = 0; i < b->eps.size(); i++) {
        Endpoint* ep = b->eps[i];
        if (!ep->reposts.empty()) flush_reposts(ep);  // before the poll steps the NIC
        if (!ep->connecting.empty()) check_connecting(ep);
        got += process_ep(ep, kPollBudget);
        if (liveness) probe_quiet_peers(ep);
    }
    // Credits owed below the quarter-window batch go back once the stream has stopped.
    if (got) b->quiet_polls = 0;
    else if (++b->quiet_polls >= kQuietPolls)
        for (size_t i = 0; i < b->eps.size(); i++) flush_owed(b->eps[i]);
    return got;
}

// ---------------------------------------------------------------- for spmd.cc
// AM_Poll for the SPMD waits, with what it took; -1 inside a handler (not allowed).
int poll_count(eb_t eb) { return in_handler() ? -1 : poll_bundle(eb); }
void flush_credits(ep_t ep) { flush_owed(ep); }

}  // namespace softvia::am

// ================================================================== API
AMX_API int AM_WaitSema(eb_t b) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!eb_ok(b) || b->event_mask == AM_NOEVENTS) return AM_ERR_BAD_ARG;  // it would never return
    if (in_handler()) return AM_ERR_RESOURCE;
    for (unsigned turn = 0;; turn++) {
        if ((turn & (kKnockPolls - 1)) == kKnockPolls - 1) take_knocks();
        for (Endpoint* ep : b->eps) {
            if (!ep->reposts.empty()) flush_reposts(ep);
            flush_owed(ep);  // waiting: a good moment to give back what is owed
            if (!ep->connecting.empty()) check_connecting(ep);
            CqEntry e;
            if (ep->stash.empty() && VipCQDone(ep->cq, &e.vi, &e.queue) == VIP_SUCCESS) ep->stash.push_back(e);
            if (!ep->stash.empty()) {
                b->event_mask = AM_NOEVENTS;  // AM-2: the mask resets when the event fires
                return AM_OK;
            }
        }
        if (turn >= 256) sched_yield();
    }
}

AMX_API int AM_GetSourceEndpoint(void* token, en_t* out) {
    Token* t = token_of(token);
    if (!t || !out) return AM_ERR_BAD_ARG;
    *out = t->peer->name;
    return AM_OK;
}

AMX_API int AM_GetDestEndpoint(void* token, ep_t* out) {
    Token* t = token_of(token);
    if (!t || !out) return AM_ERR_BAD_ARG;
    *out = t->ep;
    return AM_OK;
}

AMX_API int AM_GetMsgTag(void* token, tag_t* out) {
    Token* t = token_of(token);
    if (!t || !out) return AM_ERR_BAD_ARG;
    *out = t->tag;
    return AM_OK;
}

AMX_API int AM_Poll(eb_t b) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!eb_ok(b)) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;
    poll_bundle(b);
    return AM_OK;
}
