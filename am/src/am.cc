// am.cc -- Active Messages (AM-2) over VIPL: endpoints, MAP objects with three logical
// channels, credits, dispatch. docs/am.md explains the design and its rules.
#include "internal.h"

#include <sched.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#define AMX_API extern "C" __attribute__((visibility("default")))

using namespace amx;

namespace {

constexpr uint32_t kEpMagic = 0x41455031;  // "AEP1"
constexpr uint32_t kEbMagic = 0x41454231;
constexpr uint32_t kTokMagic = 0x41544b31;
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
    // Freed bundles and endpoints keep their (cleared) memory, so that a stale handle
    // fails its magic check with AM_ERR_BAD_ARG instead of reading freed memory.
    // (Heap vectors never destroyed: they must outlive the leak check at exit.)
    std::vector<Endpoint*>& dead_eps = *new std::vector<Endpoint*>;
    std::vector<Bundle*>& dead_bundles = *new std::vector<Bundle*>;
};
Global g;

// Handlers run one at a time (AM_SEQ); a handler may cause handler 0 to run (a reply
// that cannot be sent), so tokens nest a little. A token is valid while it is listed.
Token* g_active[8];
int g_nactive = 0;

bool in_handler() { return g_nactive > 0; }

struct TokenScope {
    explicit TokenScope(Token* t) {
        t->magic = kTokMagic;
        if (g_nactive < 8) g_active[g_nactive] = t;
        g_nactive++;
    }
    ~TokenScope() { g_nactive--; }
};

Token* token_of(void* p) {
    for (int i = 0; i < g_nactive && i < 8; i++)
        if (g_active[i] == p && g_active[i]->magic == kTokMagic) return g_active[i];
    return nullptr;
}

uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

// AM's own settings, read once by AM_Init: unset or empty takes the default; anything
// else must be a value we accept, or AM_Init says which and refuses (AM_ERR_BAD_ARG).
bool flag_setting(const char* name, int* out) {
    const char* s = getenv(name);
    if (!s || !*s) return true;
    if (strcmp(s, "0") == 0 || strcmp(s, "1") == 0) {
        *out = s[0] - '0';
        return true;
    }
    fprintf(stderr, "amvia: %s='%s': accepted values are 0 and 1\n", name, s);
    return false;
}

bool check_settings() {
    int steer = 1, listen = 1;
    bool ok = flag_setting("AMVIA_STEERING", &steer) && flag_setting("AMVIA_LISTEN", &listen);
    if (const char* s = getenv("AMVIA_CONNECT_TIMEOUT_MS"); ok && s && *s) {
        char* end = nullptr;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (*end || errno || v < 1 || v > 3600000) {
            fprintf(stderr, "amvia: AMVIA_CONNECT_TIMEOUT_MS='%s': accepted values are 1 to 3600000 (ms)\n", s);
            ok = false;
        }
    }
    return ok;
}

bool steering_default() {
    if (g.steering < 0) {
        const char* s = getenv("AMVIA_STEERING");
        g.steering = (s && s[0] == '0') ? 0 : 1;
    }
    return g.steering;
}

long connect_timeout() {
    if (g.connect_timeout_ms < 0) {
        const char* s = getenv("AMVIA_CONNECT_TIMEOUT_MS");
        long v = s && *s ? strtol(s, nullptr, 10) : 0;  // checked by AM_Init (check_settings)
        g.connect_timeout_ms = v > 0 ? v : 20000;
    }
    return g.connect_timeout_ms;
}

bool ep_ok(ep_t ep) { return ep && ep->magic == kEpMagic; }
bool eb_ok(eb_t eb) { return eb && eb->magic == kEbMagic; }

bool same_name(const en_t& a, const en_t& b) {
    return a.ep_id == b.ep_id && a.nic_addr_len == b.nic_addr_len &&
           memcmp(a.nic_addr, b.nic_addr, a.nic_addr_len) == 0;
}

bool name_ok(const en_t& n) {
    return n.magic == AMX_EN_MAGIC && n.nic_addr_len > 0 && n.nic_addr_len <= sizeof n.nic_addr && n.ep_id != 0;
}

// ---------------------------------------------------------------- returned messages
void default_returned(int status, op_t opcode, void* token) {
    (void)token;
    if (g.returned_printed++ < 16)
        fprintf(stderr, "amvia: message returned to handler 0: %s (opcode %d); set handler 0 to handle it\n",
                AMX_StatusString(status), opcode);
}

void call_returned(Endpoint* ep, Peer* peer, Channel* ch, int status, int opcode, tag_t tag) {
    ep->ctr.returned++;
    Token t{kTokMagic, false, true, ep, peer, ch, static_cast<uint8_t>(opcode), tag};
    TokenScope scope(&t);
    auto fn = reinterpret_cast<amx_returned_fn_t>(ep->handlers[0]);
    fn(status, opcode, &t);
}

// ---------------------------------------------------------------- descriptors
// The opcode handler 0 gets for a returned request, per channel.
constexpr int kRequestOp[C_COUNT] = {AM_REQUEST_M, AM_REQUEST_IM, AM_REQUEST_XFER_M};

VIP_DESCRIPTOR* recv_desc(Channel* c, int i) { return reinterpret_cast<VIP_DESCRIPTOR*>(c->rdesc + i * kRecvDescBytes); }
char* recv_buf(Channel* c, int i) { return c->rbuf + size_t(i) * kBufBytes[c->idx]; }
int recv_index(Channel* c, VIP_DESCRIPTOR* d) { return int((reinterpret_cast<char*>(d) - c->rdesc) / kRecvDescBytes); }

// Steering: the first k+1 receives take requests, the other k take replies.
bool is_reply_slot(Channel* c, int i) { return c->peer->ep->steering && i > c->k; }

VIP_RETURN post_recv(Channel* c, int i) {
    VIP_DESCRIPTOR* d = recv_desc(c, i);
    memset(&d->CS, 0, sizeof d->CS);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = recv_buf(c, i);
    d->DS[0].Local.Handle = c->peer->mh;
    d->DS[0].Local.Length = static_cast<VIP_UINT32>(kBufBytes[c->idx]);
    return is_reply_slot(c, i) ? VipExtPostRecvReply(c->vi, d, c->peer->mh) : VipPostRecv(c->vi, d, c->peer->mh);
}

void peer_dead(Peer* p);

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

// A slot's descriptors: the RDMA write (long payload, liveness probe) at offset 0, the
// header send at 64; slot_pending has bit kWritePending / kSendPending for each one
// posted and not yet taken back.
constexpr uint8_t kWritePending = 1, kSendPending = 2;

// Accounts for a send descriptor VipSendDone gave back; frees slots in ring order.
void took_send(Channel* c, VIP_DESCRIPTOR* d) {
    size_t off = size_t(reinterpret_cast<char*>(d) - c->sdesc);
    int slot = int(off / kSendSlotDescBytes);
    if (slot >= 0 && slot < c->nslots) c->slot_pending[slot] &= (off % kSendSlotDescBytes) ? ~kSendPending : ~kWritePending;
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) peer_dead(c->peer);
    while (c->s_used > 0 && c->slot_pending[c->s_head] == 0) {
        if (++c->s_head == c->nslots) c->s_head = 0;
        c->s_used--;
    }
}

// Takes back completed send descriptors (VipSendDone steps the NIC when the oldest is
// not done yet: this is the path for a full ring).
void reap_sends(Channel* c) {
    VIP_DESCRIPTOR* d;
    while (c->s_used > 0 && VipSendDone(c->vi, &d) == VIP_SUCCESS) took_send(c, d);
}

// Takes back the sends that are already done, looking at the oldest descriptor's status
// first so that VipSendDone never steps the NIC here. Called after every post: a send
// on a lossless wire is done once the post has stepped the NIC, so the ring is emptied
// one slot at a time while the message travels, instead of 2k slots at once (several
// microseconds) in the middle of a later send.
void reap_done_sends(Channel* c) {
    while (c->s_used > 0) {
        uint8_t pend = c->slot_pending[c->s_head];
        auto* d = reinterpret_cast<VIP_DESCRIPTOR*>(c->sdesc + size_t(c->s_head) * kSendSlotDescBytes +
                                                    ((pend & kWritePending) ? 0 : 64));
        // Acquire pairs with the firmware's release of Status (as VipSendDone's).
        if (!(__atomic_load_n(&d->CS.Status, __ATOMIC_ACQUIRE) & VIP_STATUS_DONE)) return;
        VIP_DESCRIPTOR* got;
        if (VipSendDone(c->vi, &got) != VIP_SUCCESS) return;
        took_send(c, got);
    }
}

// A free send slot, or -1 if none frees within a few seconds (the VI is broken). Only
// our own NIC has to act for a send to complete, so this never waits for the peer's
// handlers: it is safe inside a handler.
int get_slot(Channel* c) {
    if (c->s_used == c->nslots) {
        reap_sends(c);
        uint64_t end = 0;
        for (unsigned turn = 0; c->s_used == c->nslots; turn++) {
            reap_sends(c);
            if (c->peer->state == P_DEAD && c->s_used == c->nslots) return -1;
            if ((turn & 1023) == 1023) {
                if (!end) end = now_ms() + 5000;
                else if (now_ms() > end) return -1;
                sched_yield();
            }
        }
    }
    int slot = c->s_head + c->s_used;  // a ring: no division on the send path
    if (slot >= c->nslots) slot -= c->nslots;
    c->s_used++;
    return slot;
}

// Posts one message on channel c. For long messages, the payload goes first by RDMA
// write into the receiver's segment, then the header as a send on the same VI (a VI
// delivers in order, so the data is in place when the handler runs).
int post_message(Channel* c, uint8_t kind, handler_t handler, tag_t tag, int nargs, const int32_t* args,
                 const void* src, size_t nbytes, uint64_t offset, uint8_t credits) {
    Peer* p = c->peer;
    if (p->state == P_DEAD) return AM_ERR_NOT_SENT;
    int slot = get_slot(c);
    if (slot < 0) {
        peer_dead(p);
        return AM_ERR_NOT_SENT;
    }
    char* buf = c->sbuf + size_t(slot) * c->sbuf_bytes;
    Hdr* h = reinterpret_cast<Hdr*>(buf);
    h->kind = kind;
    h->handler = handler;
    h->nargs = static_cast<uint8_t>(nargs);
    h->credits = credits;
    h->nbytes = static_cast<uint32_t>(nbytes);
    h->tag = tag;
    h->offset = offset;
    for (int i = 0; i < nargs; i++) h->args[i] = args[i];  // a few words: no memcpy call
    size_t len = kHdrFixed + 4 * size_t(nargs);
    bool is_long = kind == K_REQ_LONG || kind == K_REP_LONG;
    if (kind == K_REQ_MEDIUM || kind == K_REP_MEDIUM) {
        size_t off = payload_offset(nargs);
        if (nbytes) memcpy(buf + off, src, nbytes);
        len = off + nbytes;
    }
    auto* wd = reinterpret_cast<VIP_DESCRIPTOR*>(c->sdesc + size_t(slot) * kSendSlotDescBytes);
    auto* hd = reinterpret_cast<VIP_DESCRIPTOR*>(c->sdesc + size_t(slot) * kSendSlotDescBytes + 64);
    c->slot_pending[slot] = 0;
    if (is_long && nbytes) {
        char* bounce = buf + kBufBytes[c->idx];
        memcpy(bounce, src, nbytes);
        memset(wd, 0, 64);
        wd->CS.Control = VIP_CONTROL_OP_RDMAWRITE;
        wd->CS.SegCount = 2;
        wd->DS[0].Remote.Data.AddressBits = p->rseg_addr + offset;
        wd->DS[0].Remote.Handle = p->rseg_memh;
        wd->DS[1].Local.Data.Address = bounce;
        wd->DS[1].Local.Handle = p->mh;
        wd->DS[1].Local.Length = static_cast<VIP_UINT32>(nbytes);
        if (VipPostSend(c->vi, wd, p->mh) != VIP_SUCCESS) {
            c->s_used--;  // the slot was the newest: give it back
            peer_dead(p);
            return AM_ERR_NOT_SENT;
        }
        c->slot_pending[slot] |= kWritePending;
    }
    memset(&hd->CS, 0, sizeof hd->CS);
    hd->CS.Control = is_reply_kind(kind) ? VIP_EXT_CONTROL_REPLY : 0;
    hd->CS.SegCount = 1;
    hd->DS[0].Local.Data.Address = buf;
    hd->DS[0].Local.Handle = p->mh;
    hd->DS[0].Local.Length = static_cast<VIP_UINT32>(len);
    if (VipPostSend(c->vi, hd, p->mh) != VIP_SUCCESS) {
        if (c->slot_pending[slot] == 0) c->s_used--;
        peer_dead(p);
        return AM_ERR_NOT_SENT;
    }
    c->slot_pending[slot] |= kSendPending;
    reap_done_sends(c);
    return AM_OK;
}

// Posts a request on c and takes its credit. A send completion that post_message takes
// back can report the peer's death (a flushed send): peer_dead then returned the requests
// it counted as outstanding (k - credits), which did not include this one yet. It comes
// back to handler 0 too, so that every request that returned AM_OK is answered or
// returned (am_peer_exit over udp lost one in ~30 runs). Internal requests (segment
// announcements, barrier; opcode < 0) never come back to handler 0.
int post_request(Channel* c, uint8_t kind, handler_t handler, tag_t tag, int nargs, const int32_t* args,
                 const void* src, size_t nbytes, uint64_t offset, int opcode) {
    int rc = post_message(c, kind, handler, tag, nargs, args, src, nbytes, offset, 0);
    if (rc != AM_OK) return rc;
    if (c->peer->state == P_DEAD) {
        if (opcode >= 0) call_returned(c->peer->ep, c->peer, c, EUNREACHABLE, opcode, tag);
        return AM_OK;
    }
    if (opcode < 0) c->internal_unanswered.push_back(c->requests_posted);
    c->requests_posted++;
    c->credits--;
    return AM_OK;
}

// Credits given back answer the oldest requests first.
static void credits_returned(Channel* c, int n) {
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
int post_reply(Channel* c, uint8_t kind, handler_t handler, tag_t tag, int nargs, const int32_t* args,
               const void* src, size_t nbytes, uint64_t offset, int answered) {
    int give = c->owed + answered;
    if (give > 255) give = 255;
    int rc = post_message(c, kind, handler, tag, nargs, args, src, nbytes, offset, static_cast<uint8_t>(give));
    if (rc == AM_OK) c->owed -= give - answered;
    return rc;
}

// Credits of reply-free requests go back in batches: at once when a quarter of the
// channel's credits is owed, so that a sender streaming reply-free requests never stalls
// for a whole window (Split-C over VIA's n = k/4), and the rest when the bundle's polls
// go quiet (poll_bundle) or the program waits (AM_WaitSema). A sender out of credits has
// all k outstanding, so at least a quarter will be owed: it never waits on the rest.
void owe_credit(Channel* c) {
    c->owed++;
    if (c->owed >= (c->k + 3) / 4 && c->peer->state != P_DEAD) {
        if (post_reply(c, K_CREDIT, 0, 0, 0, nullptr, nullptr, 0, 0, 0) == AM_OK) c->peer->ep->ctr.credit_msgs_sent++;
        return;
    }
    if (!c->in_owed_list) {
        c->in_owed_list = true;
        c->peer->ep->owed_list.push_back(c);
    }
}

// Implicit replies: one CREDIT message per channel gives back every credit owed.
void flush_owed(Endpoint* ep) {
    if (ep->owed_list.empty()) return;
    for (Channel* c : ep->owed_list) {
        c->in_owed_list = false;
        if (c->owed > 0 && c->peer->state != P_DEAD) {
            if (post_reply(c, K_CREDIT, 0, 0, 0, nullptr, nullptr, 0, 0, 0) == AM_OK) ep->ctr.credit_msgs_sent++;
        }
    }
    ep->owed_list.clear();
}

// ---------------------------------------------------------------- peers (MAP objects)
void peer_dead(Peer* p) {
    if (p->state == P_DEAD) return;
    bool was_up = p->state == P_UP;
    p->state = P_DEAD;
    Endpoint* ep = p->ep;
    for (size_t i = 0; i < ep->connecting.size(); i++)
        if (ep->connecting[i] == p) {
            ep->connecting.erase(ep->connecting.begin() + long(i));
            break;
        }
    if (!was_up || p->death_reported) return;
    p->death_reported = true;
    // Requests whose replies will never come go back to handler 0.
    for (int i = 0; i < C_COUNT; i++) {
        Channel* c = &p->ch[i];
        int lost = c->k - c->credits - int(c->internal_unanswered.size());
        c->credits = c->k;
        c->credits_back = c->requests_posted;
        c->internal_unanswered.clear();
        for (int n = 0; n < lost; n++) call_returned(ep, p, c, EUNREACHABLE, kRequestOp[i], 0);
    }
}

Channel* channel_of(Endpoint* ep, VIP_VI_HANDLE vi) {
    if (vi == ep->last_vi) return ep->last_ch;
    auto it = ep->vi_to_channel.find(vi);
    if (it == ep->vi_to_channel.end()) return nullptr;
    ep->last_vi = vi;
    ep->last_ch = it->second;
    return it->second;
}

// Discriminator of one channel's connection: "AM", channel, role, then the two endpoint
// ids (this side's first), so both sides of every pair compute crossed values.
size_t make_disc(uint8_t* out, int chan, int role, uint64_t first, uint64_t second) {
    out[0] = 'A';
    out[1] = 'M';
    out[2] = static_cast<uint8_t>(chan);
    out[3] = static_cast<uint8_t>(role);
    memcpy(out + 4, &first, 8);
    memcpy(out + 12, &second, 8);
    return 20;
}

union NetAddr {
    VIP_NET_ADDRESS a;
    uint8_t raw[sizeof(VIP_NET_ADDRESS) + 64 + 128];  // largest NIC address and discriminator
};

void fill_addr(NetAddr* n, const uint8_t* nic, uint16_t nic_len, const uint8_t* disc, size_t disc_len) {
    memset(n, 0, sizeof *n);
    n->a.HostAddressLen = nic_len;
    memcpy(n->a.HostAddress, nic, nic_len);
    n->a.DiscriminatorLen = static_cast<VIP_UINT16>(disc_len);
    memcpy(n->a.HostAddress + nic_len, disc, disc_len);
}

// Disconnects and destroys a peer's VIs and frees its region. A VI whose descriptors do
// not come back in time is left to VipCloseNic, and so is its memory.
void destroy_peer(Peer* p) {
    Endpoint* ep = p->ep;
    bool all_gone = true;
    auto& rp = ep->reposts;  // nothing may point at p once it is gone
    for (size_t i = 0; i < rp.size();)
        if (rp[i].first->peer == p) {
            rp[i] = rp.back();
            rp.pop_back();
        } else {
            i++;
        }
    for (int i = 0; i < C_COUNT; i++) {
        Channel* c = &p->ch[i];
        if (!c->vi) continue;
        VipDisconnect(c->vi);
        uint64_t end = now_ms() + 2000;
        VIP_RETURN r;
        for (;;) {
            VIP_DESCRIPTOR* d;
            while (VipRecvDone(c->vi, &d) == VIP_SUCCESS) {
            }
            while (ep->steering && VipExtRecvReplyDone(c->vi, &d) == VIP_SUCCESS) {
            }
            while (VipSendDone(c->vi, &d) == VIP_SUCCESS) {
            }
            r = VipDestroyVi(c->vi);
            if (r == VIP_SUCCESS || now_ms() > end) break;
            // A withdrawn connection request leaves the VI idle with its receives
            // posted; a disconnect of an idle VI flushes them.
            VipDisconnect(c->vi);
            VipExtProgress(g.nic);
            sched_yield();
        }
        ep->vi_to_channel.erase(c->vi);
        if (r != VIP_SUCCESS) all_gone = false;
        c->vi = nullptr;
    }
    ep->last_vi = nullptr;
    ep->last_ch = nullptr;
    if (all_gone && p->region) {
        VipDeregisterMem(g.nic, p->region, p->mh);
        free(p->region);
    }
    ep->recv_descs -= size_t(p->ch[0].nrecv + p->ch[1].nrecv + p->ch[2].nrecv);
    delete p;
}

int grow_cq(Endpoint* ep, size_t more) {
    size_t need = ep->recv_descs + more + 64;
    if (need <= ep->cq_entries) return AM_OK;
    size_t n = ep->cq_entries * 2;
    while (n < need) n *= 2;
    if (n > 65536) n = 65536;
    if (n < need) return AM_ERR_RESOURCE;
    if (VipResizeCQ(ep->cq, n) != VIP_SUCCESS) return AM_ERR_RESOURCE;
    ep->cq_entries = n;
    return AM_OK;
}

// Creates the MAP object for a remote endpoint: one registered region with every
// channel's descriptors and buffers, three VIs with their receives posted, and the
// three peer-to-peer connection requests under way (they complete in the background;
// the remote side completes them when it maps this endpoint).
int create_peer(Endpoint* ep, const en_t& name, int role, Peer** out) {
    auto* p = new (std::nothrow) Peer();
    if (!p) return AM_ERR_RESOURCE;
    p->ep = ep;
    p->name = name;
    p->role = role;
    size_t total = 0, nrecv_all = 0;
    for (int i = 0; i < C_COUNT; i++) {
        Channel* c = &p->ch[i];
        c->peer = p;
        c->idx = i;
        c->k = kCredits[i];
        c->credits = c->k;
        c->nrecv = 2 * c->k + 1;
        c->nslots = 2 * c->k;
        c->sbuf_bytes = kBufBytes[i] + (i == C_LONG ? kLongBounce : 0);
        c->slot_pending.assign(size_t(c->nslots), 0);
        total += size_t(c->nrecv) * (kRecvDescBytes + kBufBytes[i]) +
                 size_t(c->nslots) * (kSendSlotDescBytes + c->sbuf_bytes);
        nrecv_all += size_t(c->nrecv);
    }
    p->region_bytes = (total + 4095) & ~size_t(4095);
    p->region = static_cast<char*>(aligned_alloc(4096, p->region_bytes));
    if (!p->region) {
        delete p;
        return AM_ERR_RESOURCE;
    }
    memset(p->region, 0, p->region_bytes);
    VIP_MEM_ATTRIBUTES ma{g.ptag, VIP_FALSE, VIP_FALSE};
    if (VipRegisterMem(g.nic, p->region, p->region_bytes, &ma, &p->mh) != VIP_SUCCESS) {
        free(p->region);
        delete p;
        return AM_ERR_RESOURCE;
    }
    char* cur = p->region;
    for (int i = 0; i < C_COUNT; i++) {  // descriptors first: they need 64-byte alignment
        Channel* c = &p->ch[i];
        c->rdesc = cur;
        cur += size_t(c->nrecv) * kRecvDescBytes;
        c->sdesc = cur;
        cur += size_t(c->nslots) * kSendSlotDescBytes;
    }
    for (int i = 0; i < C_COUNT; i++) {
        Channel* c = &p->ch[i];
        c->rbuf = cur;
        cur += size_t(c->nrecv) * kBufBytes[i];
        c->sbuf = cur;
        cur += size_t(c->nslots) * c->sbuf_bytes;
    }
    ep->recv_descs += 0;  // counted below, once the VIs exist
    if (grow_cq(ep, nrecv_all) != AM_OK) {
        VipDeregisterMem(g.nic, p->region, p->mh);
        free(p->region);
        delete p;
        return AM_ERR_RESOURCE;
    }
    ep->recv_descs += nrecv_all;
    int peer_role = role == 1 ? 2 : role == 2 ? 1 : 0;
    int rc = AM_OK;
    for (int i = 0; i < C_COUNT && rc == AM_OK; i++) {
        Channel* c = &p->ch[i];
        VIP_VI_ATTRIBUTES va{};
        va.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
        va.MaxTransferSize = 0;
        va.Ptag = g.ptag;
        va.EnableRdmaWrite = VIP_TRUE;  // long messages land by RDMA write
        va.EnableRdmaRead = VIP_FALSE;
        if (VipCreateVi(g.nic, &va, nullptr, ep->cq, &c->vi) != VIP_SUCCESS) {
            c->vi = nullptr;
            rc = AM_ERR_RESOURCE;
            break;
        }
        ep->vi_to_channel[c->vi] = c;
        if (ep->steering && VipExtEnableSteering(c->vi, ep->cq) != VIP_SUCCESS) rc = AM_ERR_RESOURCE;
        for (int r = 0; r < c->nrecv && rc == AM_OK; r++)
            if (post_recv(c, r) != VIP_SUCCESS) rc = AM_ERR_RESOURCE;
        if (rc != AM_OK) break;
        uint8_t ld[32], rd[32];
        size_t ll = make_disc(ld, i, role, ep->name.ep_id, name.ep_id);
        size_t rl = make_disc(rd, i, peer_role, name.ep_id, ep->name.ep_id);
        NetAddr la, ra;
        fill_addr(&la, ep->name.nic_addr, ep->name.nic_addr_len, ld, ll);
        fill_addr(&ra, name.nic_addr, name.nic_addr_len, rd, rl);
        VIP_RETURN r = VipConnectPeerRequest(c->vi, &la.a, &ra.a, VIP_INFINITE);
        if (r != VIP_SUCCESS) rc = r == VIP_ERROR_RESOURCE ? AM_ERR_NOT_SENT : AM_ERR_RESOURCE;
    }
    if (rc != AM_OK) {
        destroy_peer(p);
        return rc;
    }
    ep->peers.push_back(p);
    ep->connecting.push_back(p);
    *out = p;
    return AM_OK;
}

int send_internal(Peer* p, uint8_t kind, int nargs, const int32_t* args);
int process_ep(Endpoint* ep, int budget);

void announce_segment(Peer* p) {
    Endpoint* ep = p->ep;
    uint64_t addr = reinterpret_cast<uintptr_t>(ep->seg), len = ep->seg_len;
    uint64_t pad = reinterpret_cast<uintptr_t>(g.probe_pad);
    int32_t a[8] = {int32_t(uint32_t(addr)), int32_t(uint32_t(addr >> 32)), int32_t(ep->seg_mh),
                    int32_t(uint32_t(len)),  int32_t(uint32_t(len >> 32)),  int32_t(uint32_t(pad)),
                    int32_t(uint32_t(pad >> 32)), int32_t(g.probe_mh)};
    if (send_internal(p, K_SEGINFO, 8, a) == AM_OK) p->seg_sent = true;
}

// Moves a connecting peer along; true once it is up (or dead).
bool check_connect(Peer* p) {
    if (p->state != P_CONNECTING) return true;
    bool all = true;
    for (int i = 0; i < C_COUNT; i++) {
        Channel* c = &p->ch[i];
        if (c->connected) continue;
        VIP_RETURN r = VipConnectPeerDone(c->vi, nullptr);
        if (r == VIP_SUCCESS) c->connected = true;
        else if (r == VIP_NOT_DONE) all = false;
        else {
            peer_dead(p);
            return true;
        }
    }
    if (!all) return false;
    p->state = P_UP;
    Endpoint* ep = p->ep;
    for (size_t i = 0; i < ep->connecting.size(); i++)
        if (ep->connecting[i] == p) {
            ep->connecting.erase(ep->connecting.begin() + long(i));
            break;
        }
    announce_segment(p);
    return true;
}

void check_connecting(Endpoint* ep) {
    for (size_t i = 0; i < ep->connecting.size();) {
        size_t before = ep->connecting.size();
        check_connect(ep->connecting[i]);
        if (ep->connecting.size() == before) i++;  // still connecting; else it left the list
    }
}

// ---------------------------------------------------------------- one-sided mapping
// A connection forms when both endpoints run the peer-to-peer requests of AM_Map. An
// endpoint B that was mapped by A but never maps A back learns of A by a knock: A sends
// a client/server connect request to the listening discriminator of B's process,
// carrying A's name and B's endpoint id in its own discriminator. B's NIC holds it in a
// standing listener; B's poll takes it, rejects the request (a knock never becomes a
// connection, so no connect can hang half-accepted) and creates an implicit MAP object
// for A (no translation entry), whose peer-to-peer requests meet A's, still pending.
// Replies travel on the request's channel, so B answers A through it.
constexpr char kListenDisc[] = "AMVIA-listen";
constexpr size_t kListenDiscLen = sizeof kListenDisc - 1;
constexpr size_t kKnockDiscLen = 2 + 8 + 8 + 1 + sizeof(en_t{}.nic_addr);

bool parse_knock(const VIP_NET_ADDRESS& ra, en_t* from, uint64_t* to) {
    const uint8_t* d = ra.HostAddress + ra.HostAddressLen;
    if (ra.DiscriminatorLen < 19 || d[0] != 'A' || d[1] != 'K') return false;
    unsigned alen = d[18];
    if (alen == 0 || alen > sizeof from->nic_addr || ra.DiscriminatorLen != 19 + alen) return false;
    *from = en_t{};
    from->magic = AMX_EN_MAGIC;
    memcpy(&from->ep_id, d + 2, 8);
    memcpy(to, d + 10, 8);
    from->nic_addr_len = static_cast<uint16_t>(alen);
    memcpy(from->nic_addr, d + 19, alen);
    return from->ep_id != 0;
}

// Knocks land in a standing listener (VipExtListen) that the NIC keeps on the listening
// discriminator, so a knock is taken whenever this process's NIC runs (inline progress:
// whenever the program calls AM; a firmware thread: always); the polls pick it up. No
// thread of ours: a listener thread on a core the program polls on cost the program most
// of its time (it spun on the NIC lock while the preempted poller held it).
void start_listener() {
    const char* on = getenv("AMVIA_LISTEN");
    if (on && on[0] == '0') return;
    NetAddr la;
    fill_addr(&la, g.na.LocalNicAddress, g.na.NicAddressLen, reinterpret_cast<const uint8_t*>(kListenDisc),
              kListenDiscLen);
    if (VipExtListen(g.nic, &la.a, &g.listen) != VIP_SUCCESS) {
        g.listen = nullptr;
        fprintf(stderr, "amvia: AM_Init: cannot listen for one-sided mappings; others reach an endpoint here "
                        "only once it maps them\n");
    }
}

void stop_listener() {
    if (g.listen) VipExtUnlisten(g.listen);
    g.listen = nullptr;
}

// The endpoint of this process with the given id, if any.
Endpoint* local_endpoint(uint64_t ep_id) {
    for (Bundle* b : g.bundles)
        for (Endpoint* ep : b->eps)
            if (ep->name.ep_id == ep_id) return ep;
    return nullptr;
}

// Endpoint ep was knocked at by from: an implicit MAP object for it, unless there is one.
void map_back(Endpoint* ep, const en_t& from) {
    for (Peer* p : ep->peers)
        if (same_name(p->name, from) && p->role != 2 && p->state != P_DEAD) return;
    Peer* p = nullptr;
    if (create_peer(ep, from, 0, &p) == AM_OK) p->implicit = true;
}

// Takes the knocks the listener holds: each is rejected (a knock never becomes a
// connection) and its endpoint gets an implicit MAP object for the knocker.
void take_knocks() {
    VIP_CONN_HANDLE conn;
    NetAddr ra;
    while (g.listen && VipExtListenDone(g.listen, &ra.a, nullptr, &conn) == VIP_SUCCESS) {
        en_t from;
        uint64_t to = 0;
        bool parsed = parse_knock(ra.a, &from, &to);
        VipConnectReject(conn);
        if (!parsed) continue;
        if (Endpoint* ep = local_endpoint(to)) map_back(ep, from);
    }
}

// Asks p's endpoint to map this one back. Knocks again at once if the knock was not
// taken (the listener held another knock: VIP_NO_MATCH; or the remote program did not
// poll within the knock's 20 ms), after a while if it was (the remote side may have
// dropped it: an endpoint id it does not have).
void knock(Peer* p) {
    Endpoint* ep = p->ep;
    if (p->name.nic_addr_len == ep->name.nic_addr_len &&
        memcmp(p->name.nic_addr, ep->name.nic_addr, ep->name.nic_addr_len) == 0) {
        // Our own NIC: the endpoint is in this process (or nowhere), no need to knock.
        if (Endpoint* there = local_endpoint(p->name.ep_id)) map_back(there, ep->name);
        p->next_knock_ms = now_ms() + 200;
        return;
    }
    if (!ep->knock_vi) {
        VIP_VI_ATTRIBUTES va{};
        va.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
        va.Ptag = g.ptag;
        if (VipCreateVi(g.nic, &va, nullptr, nullptr, &ep->knock_vi) != VIP_SUCCESS) {
            ep->knock_vi = nullptr;
            p->next_knock_ms = now_ms() + 100;
            return;
        }
    }
    uint8_t d[kKnockDiscLen] = {'A', 'K'};
    memcpy(d + 2, &ep->name.ep_id, 8);
    memcpy(d + 10, &p->name.ep_id, 8);
    d[18] = static_cast<uint8_t>(ep->name.nic_addr_len);
    memcpy(d + 19, ep->name.nic_addr, ep->name.nic_addr_len);
    NetAddr la, ra;
    fill_addr(&la, ep->name.nic_addr, ep->name.nic_addr_len, d, 19 + ep->name.nic_addr_len);
    fill_addr(&ra, p->name.nic_addr, p->name.nic_addr_len, reinterpret_cast<const uint8_t*>(kListenDisc),
              kListenDiscLen);
    VIP_RETURN r = VipConnectRequest(ep->knock_vi, &la.a, &ra.a, 20, nullptr);
    p->next_knock_ms = r == VIP_REJECT ? now_ms() + 200 : 0;
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

// SPMD barrier state (am_spmd.cc reads it).
}  // namespace
namespace amx {
int g_barrier_arrivals[2];
int g_barrier_released = 0;
}  // namespace amx
namespace {

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

// Sends an internal request (segment announcement, barrier) with a request credit,
// polling for one if needed.
int send_internal(Peer* p, uint8_t kind, int nargs, const int32_t* args) {
    Channel* c = &p->ch[C_SHORT];
    while (c->credits == 0) {
        if (p->state == P_DEAD) return AM_ERR_NOT_SENT;
        poll_bundle(p->ep->bundle);
    }
    if (!p->ep->reposts.empty()) flush_reposts(p->ep);
    return post_request(c, kind, 0, 0, nargs, args, nullptr, 0, 0, -1);
}

// Waits until the peer is connected; false on timeout or death.
// A remote endpoint that has not mapped this one back after a moment is knocked at (see
// knock()): one-sided mapping.
bool wait_up(Peer* p) {
    if (p->state == P_UP) return true;
    uint64_t start = now_ms(), end = start + uint64_t(connect_timeout());
    for (unsigned turn = 0; p->state == P_CONNECTING; turn++) {
        check_connect(p);
        if (p->state != P_CONNECTING) break;
        poll_bundle(p->ep->bundle);
        if ((turn & 63) == 63) {
            uint64_t now = now_ms();
            if (now > end) return false;
            if (p->role == 0 && now >= start + 2 && now >= p->next_knock_ms) knock(p);
            sched_yield();
        }
    }
    return p->state == P_UP;
}

// Opens the NIC SOFTVIA_DEVICE names (any transport). Nothing here depends on the wire:
// a message is one VIPL send (or RDMA write) that the NIC cuts to its NativeMTU, so the
// only requirement is that the largest one fits a VIPL transfer.
int open_nic() {
    VIP_RETURN r = VipOpenNic(nullptr, &g.nic);
    // VIP_INVALID_PARAMETER: a SOFTVIA_* setting or the device name is wrong, which vipl
    // has named on stderr already; that is bad configuration, not a lack of resources.
    if (r == VIP_INVALID_PARAMETER) return AM_ERR_BAD_ARG;
    if (r != VIP_SUCCESS) {
        fprintf(stderr, "amvia: AM_Init: cannot open the NIC: VipOpenNic -> %s\n", VipExtReturnString(r));
        return AM_ERR_RESOURCE;
    }
    const char* why = nullptr;
    if (VipQueryNic(g.nic, &g.na) != VIP_SUCCESS) why = "VipQueryNic failed";
    else if (g.na.NicAddressLen > sizeof(en_t{}.nic_addr)) why = "the NIC address does not fit an en_t";
    else if (g.na.MaxTransferSize < kBufBytes[C_MEDIUM] || g.na.MaxTransferSize < AMX_MAX_LONG)
        why = "the NIC's MaxTransferSize is below AM's largest message";
    else if (VipCreatePtag(g.nic, &g.ptag) != VIP_SUCCESS) why = "VipCreatePtag failed";
    else if (!(g.probe_pad = static_cast<char*>(aligned_alloc(64, 64)))) why = "out of memory";
    else {
        VIP_MEM_ATTRIBUTES ma{g.ptag, VIP_TRUE, VIP_FALSE};  // remote write: liveness probes
        if (VipRegisterMem(g.nic, g.probe_pad, 64, &ma, &g.probe_mh) != VIP_SUCCESS) why = "VipRegisterMem failed";
    }
    if (why) {
        free(g.probe_pad);
        g.probe_pad = nullptr;
        fprintf(stderr, "amvia: AM_Init: %s\n", why);
        VipCloseNic(g.nic);
        g.nic = nullptr;
        return AM_ERR_RESOURCE;
    }
    return AM_OK;
}

void free_endpoint(Endpoint* ep) {
    for (Peer* p : ep->peers) destroy_peer(p);
    ep->peers.clear();
    ep->connecting.clear();
    VIP_VI_HANDLE vi;
    VIP_BOOLEAN q;
    while (VipCQDone(ep->cq, &vi, &q) == VIP_SUCCESS) {
    }
    if (ep->knock_vi) VipDestroyVi(ep->knock_vi);
    VipDestroyCQ(ep->cq);  // refused if a VI outlived its drain; VipCloseNic frees it then
    if (ep->seg_mh) VipDeregisterMem(g.nic, ep->seg, ep->seg_mh);
    *ep = Endpoint{};  // magic 0
    g.dead_eps.push_back(ep);
}

void free_bundle(Bundle* b) {
    for (Endpoint* ep : b->eps) free_endpoint(ep);
    *b = Bundle{};  // magic 0
    g.dead_bundles.push_back(b);
}

}  // namespace

// ================================================================== API
AMX_API int AM_MaxShort(void) { return AMX_MAX_ARGS; }
AMX_API int AM_MaxMedium(void) { return AMX_MAX_MEDIUM; }
AMX_API int AM_MaxLong(void) { return AMX_MAX_LONG; }
AMX_API int AM_MaxNumHandlers(void) { return AMX_MAX_HANDLERS; }
AMX_API int AM_MaxNumTranslations(int* n) {
    if (!n) return AM_ERR_BAD_ARG;
    *n = AMX_MAX_TRANSLATIONS;
    return AM_OK;
}
AMX_API int AM_MaxSegLength(uintptr_t* nbytes) {
    if (!nbytes) return AM_ERR_BAD_ARG;
    if (!g.inited) return AM_ERR_NOT_INIT;
    *nbytes = static_cast<uintptr_t>(g.na.MaxRegisterBytes);
    return AM_OK;
}

AMX_API int AM_Init(void) {
    if (g.inited) return AM_OK;
    if (!check_settings()) return AM_ERR_BAD_ARG;
    int rc = open_nic();
    if (rc != AM_OK) return rc;
    g.inited = true;
    VIP_EXT_PROGRESS_MODE pm = VIP_EXT_PROGRESS_INLINE;
    g.inline_progress = VipExtGetProgressMode(g.nic, &pm) == VIP_SUCCESS && pm == VIP_EXT_PROGRESS_INLINE;
    start_listener();
    steering_default();
    connect_timeout();
    return AM_OK;
}

AMX_API int AM_Terminate(void) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (in_handler()) return AM_ERR_RESOURCE;
    stop_listener();
    for (Bundle* b : g.bundles) free_bundle(b);
    g.bundles.clear();
    VipDeregisterMem(g.nic, g.probe_pad, g.probe_mh);
    free(g.probe_pad);
    g.probe_pad = nullptr;
    VipCloseNic(g.nic);
    g.nic = nullptr;
    g.ptag = nullptr;
    g.inited = false;
    return AM_OK;
}

AMX_API int AM_AllocateBundle(int type, eb_t* out) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!out || (type != AM_SEQ && type != AM_PAR)) return AM_ERR_BAD_ARG;
    if (type == AM_PAR) return AM_ERR_RESOURCE;  // one thread per bundle only
    auto* b = new (std::nothrow) Bundle();
    if (!b) return AM_ERR_RESOURCE;
    b->magic = kEbMagic;
    g.bundles.push_back(b);
    *out = b;
    return AM_OK;
}

AMX_API int AM_FreeBundle(eb_t b) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!eb_ok(b)) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;
    for (size_t i = 0; i < g.bundles.size(); i++)
        if (g.bundles[i] == b) g.bundles.erase(g.bundles.begin() + long(i));
    free_bundle(b);
    return AM_OK;
}

AMX_API int AM_AllocateEndpoint(eb_t b, ep_t* out, en_t* name) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!eb_ok(b) || !out) return AM_ERR_BAD_ARG;
    auto* ep = new (std::nothrow) Endpoint();
    if (!ep) return AM_ERR_RESOURCE;
    ep->cq_entries = 1024;
    if (VipCreateCQ(g.nic, ep->cq_entries, &ep->cq) != VIP_SUCCESS) {
        delete ep;
        return AM_ERR_RESOURCE;
    }
    uint64_t id = 0;
    while (id == 0)
        if (getrandom(&id, sizeof id, 0) != sizeof id) id = uint64_t(now_ms()) * 0x9e3779b97f4a7c15ull ^ uint64_t(getpid());
    ep->magic = kEpMagic;
    ep->bundle = b;
    ep->name.magic = AMX_EN_MAGIC;
    ep->name.nic_addr_len = g.na.NicAddressLen;
    ep->name.ep_id = id;
    memcpy(ep->name.nic_addr, g.na.LocalNicAddress, g.na.NicAddressLen);
    ep->steering = steering_default();
    ep->trans.resize(AMX_DEFAULT_TRANSLATIONS);
    ep->handlers.assign(AMX_MAX_HANDLERS, nullptr);
    ep->handlers[0] = reinterpret_cast<amx_handler_fn_t>(default_returned);
    b->eps.push_back(ep);
    *out = ep;
    if (name) *name = ep->name;
    return AM_OK;
}

AMX_API int AM_FreeEndpoint(ep_t ep) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep)) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;
    Bundle* b = ep->bundle;
    for (size_t i = 0; i < b->eps.size(); i++)
        if (b->eps[i] == ep) b->eps.erase(b->eps.begin() + long(i));
    free_endpoint(ep);
    return AM_OK;
}

AMX_API int AM_MoveEndpoint(ep_t ep, eb_t from, eb_t to) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !eb_ok(from) || !eb_ok(to) || ep->bundle != from) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;
    for (size_t i = 0; i < from->eps.size(); i++)
        if (from->eps[i] == ep) from->eps.erase(from->eps.begin() + long(i));
    to->eps.push_back(ep);
    ep->bundle = to;
    return AM_OK;
}

AMX_API int AM_SetSeg(ep_t ep, void* addr, uintptr_t nbytes) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep)) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;
    if (!addr || nbytes == 0) {
        addr = nullptr;
        nbytes = 0;
    }
    if (nbytes > g.na.MaxRegisterBytes) return AM_ERR_BAD_ARG;
    VIP_MEM_HANDLE mh = 0;
    if (nbytes) {
        VIP_MEM_ATTRIBUTES ma{g.ptag, VIP_TRUE, VIP_FALSE};  // peers RDMA-write long payloads here
        if (VipRegisterMem(g.nic, addr, nbytes, &ma, &mh) != VIP_SUCCESS) return AM_ERR_BAD_ARG;
    }
    if (ep->seg_mh) VipDeregisterMem(g.nic, ep->seg, ep->seg_mh);
    ep->seg = addr;
    ep->seg_len = nbytes;
    ep->seg_mh = mh;
    // By index: announcing polls, and a poll may add an implicit MAP object (a knock).
    for (size_t i = 0; i < ep->peers.size(); i++)
        if (ep->peers[i]->state == P_UP) announce_segment(ep->peers[i]);
    return AM_OK;
}

AMX_API int AM_GetSeg(ep_t ep, void** addr, uintptr_t* nbytes) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !addr || !nbytes) return AM_ERR_BAD_ARG;
    *addr = ep->seg;
    *nbytes = ep->seg_len;
    return AM_OK;
}

AMX_API int AM_SetTag(ep_t ep, tag_t tag) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep)) return AM_ERR_BAD_ARG;
    ep->tag = tag;
    return AM_OK;
}

AMX_API int AM_GetTag(ep_t ep, tag_t* tag) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !tag) return AM_ERR_BAD_ARG;
    *tag = ep->tag;
    return AM_OK;
}

AMX_API int AM_Map(ep_t ep, int index, en_t name, tag_t tag) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || index < 0 || size_t(index) >= ep->trans.size() || !name_ok(name)) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;
    Translation& t = ep->trans[size_t(index)];
    if (t.used) return AM_ERR_RESOURCE;
    bool self = same_name(name, ep->name);
    Peer* peer = nullptr;
    for (Peer* p : ep->peers)
        if (same_name(p->name, name) && p->role != 2 && p->state != P_DEAD) peer = p;
    if (!peer) {
        int rc = create_peer(ep, name, self ? 1 : 0, &peer);
        if (rc != AM_OK) return rc;
        if (self) {
            Peer* twin = nullptr;
            rc = create_peer(ep, name, 2, &twin);
            if (rc != AM_OK) {
                ep->peers.pop_back();
                ep->connecting.pop_back();
                destroy_peer(peer);
                return rc;
            }
            peer->twin = twin;
            twin->twin = peer;
        }
    }
    t.used = true;
    t.name = name;
    t.tag = tag;
    t.peer = peer;
    return AM_OK;
}

AMX_API int AM_MapAny(ep_t ep, int* index, en_t name, tag_t tag) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !index) return AM_ERR_BAD_ARG;
    for (size_t i = 0; i < ep->trans.size(); i++)
        if (!ep->trans[i].used) {
            int rc = AM_Map(ep, int(i), name, tag);
            if (rc == AM_OK) *index = int(i);
            return rc;
        }
    return AM_ERR_RESOURCE;
}

// The connection stays: the remote endpoint may still send requests here.
AMX_API int AM_UnMap(ep_t ep, int index) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || index < 0 || size_t(index) >= ep->trans.size() || !ep->trans[size_t(index)].used)
        return AM_ERR_BAD_ARG;
    ep->trans[size_t(index)] = Translation{};
    return AM_OK;
}

AMX_API int AM_GetTranslationInuse(ep_t ep, int index) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || index < 0 || size_t(index) >= ep->trans.size()) return AM_ERR_BAD_ARG;
    return ep->trans[size_t(index)].used ? AM_OK : AM_ERR_RESOURCE;
}

AMX_API int AM_GetTranslationTag(ep_t ep, int index, tag_t* tag) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !tag || index < 0 || size_t(index) >= ep->trans.size() || !ep->trans[size_t(index)].used)
        return AM_ERR_BAD_ARG;
    *tag = ep->trans[size_t(index)].tag;
    return AM_OK;
}

AMX_API int AM_GetTranslationName(ep_t ep, int index, en_t* name) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !name || index < 0 || size_t(index) >= ep->trans.size() || !ep->trans[size_t(index)].used)
        return AM_ERR_BAD_ARG;
    *name = ep->trans[size_t(index)].name;
    return AM_OK;
}

AMX_API int AM_GetNumTranslations(ep_t ep, int* n) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !n) return AM_ERR_BAD_ARG;
    *n = int(ep->trans.size());
    return AM_OK;
}

AMX_API int AM_SetNumTranslations(ep_t ep, int n) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || n < 1 || n > AMX_MAX_TRANSLATIONS) return AM_ERR_BAD_ARG;
    for (size_t i = size_t(n); i < ep->trans.size(); i++)
        if (ep->trans[i].used) return AM_ERR_RESOURCE;  // would drop a mapping
    ep->trans.resize(size_t(n));
    return AM_OK;
}

AMX_API int AM_SetExpectedResources(ep_t ep, int n_endpoints, int n_outstanding_requests) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || n_endpoints < 0 || n_outstanding_requests < 0 || n_endpoints > AMX_MAX_TRANSLATIONS)
        return AM_ERR_BAD_ARG;
    // A hint only: credits per channel stay fixed (docs/am.md).
    ep->expected_endpoints = n_endpoints;
    ep->expected_requests = n_outstanding_requests;
    return AM_OK;
}

AMX_API int AM_SetHandler(ep_t ep, handler_t h, amx_handler_fn_t fn) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !fn || h >= ep->handlers.size()) return AM_ERR_BAD_ARG;
    ep->handlers[h] = fn;
    return AM_OK;
}

AMX_API int AM_SetHandlerAny(ep_t ep, handler_t* h, amx_handler_fn_t fn) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !fn || !h) return AM_ERR_BAD_ARG;
    for (size_t i = 1; i < ep->handlers.size(); i++)
        if (!ep->handlers[i]) {
            ep->handlers[i] = fn;
            *h = static_cast<handler_t>(i);
            return AM_OK;
        }
    return AM_ERR_RESOURCE;
}

AMX_API int AM_GetNumHandlers(ep_t ep, int* n) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !n) return AM_ERR_BAD_ARG;
    *n = int(ep->handlers.size());
    return AM_OK;
}

AMX_API int AM_SetNumHandlers(ep_t ep, int n) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || n < 1 || n > AMX_MAX_HANDLERS) return AM_ERR_BAD_ARG;
    ep->handlers.resize(size_t(n), nullptr);
    return AM_OK;
}

AMX_API int AM_GetEventMask(eb_t b, int* mask) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!eb_ok(b) || !mask) return AM_ERR_BAD_ARG;
    *mask = b->event_mask;
    return AM_OK;
}

AMX_API int AM_SetEventMask(eb_t b, int mask) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!eb_ok(b) || (mask != AM_NOEVENTS && mask != AM_NOTEMPTY)) return AM_ERR_BAD_ARG;
    b->event_mask = mask;
    return AM_OK;
}

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

// Checks a long message against what the destination announced of its segment; a
// message that would not fit is returned to handler 0 here, since the destination NIC
// would refuse the RDMA write and break the connection.
static int long_fits(Peer* p, uint64_t offset, size_t nbytes) {
    if (!p->rseg_known) {
        uint64_t end = now_ms() + uint64_t(connect_timeout());
        while (!p->rseg_known && p->state == P_UP && now_ms() < end) {
            poll_bundle(p->ep->bundle);
            sched_yield();
        }
    }
    if (!p->rseg_known || p->rseg_len == 0 || offset > p->rseg_len) return EBADSEGOFF;
    if (nbytes > p->rseg_len - offset) return EBADLENGTH;
    return 0;
}

AMX_API int AMX_Request(ep_t ep, int dest, handler_t handler, int kind, const void* src, size_t nbytes,
                        uintptr_t offset, int nargs, const int32_t* args) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || dest < 0 || size_t(dest) >= ep->trans.size() || nargs < 0 || nargs > AMX_MAX_ARGS ||
        (nargs && !args) || handler == 0 || kind < AMX_SHORT || kind > AMX_LONG_ASYNC)
        return AM_ERR_BAD_ARG;
    if (kind == AMX_MEDIUM && nbytes > AMX_MAX_MEDIUM) return AM_ERR_BAD_ARG;
    if (kind >= AMX_LONG && nbytes > AMX_MAX_LONG) return AM_ERR_BAD_ARG;
    if (kind != AMX_SHORT && nbytes && !src) return AM_ERR_BAD_ARG;
    if (in_handler()) return AM_ERR_RESOURCE;  // handlers may only reply
    Translation& t = ep->trans[size_t(dest)];
    if (!t.used) return AM_ERR_BAD_ARG;
    Peer* p = t.peer;
    if (!wait_up(p)) return AM_ERR_NOT_SENT;
    uint8_t wire_kind = kind == AMX_SHORT ? K_REQ_SHORT : kind == AMX_MEDIUM ? K_REQ_MEDIUM : K_REQ_LONG;
    Channel* c = &p->ch[kind == AMX_SHORT ? C_SHORT : kind == AMX_MEDIUM ? C_MEDIUM : C_LONG];
    if (wire_kind == K_REQ_LONG) {
        if (int status = long_fits(p, offset, nbytes)) {
            if (p->state != P_UP) return AM_ERR_NOT_SENT;
            call_returned(ep, p, c, status, AM_REQUEST_XFER_M, t.tag);
            return AM_OK;
        }
    }
    if (c->credits == 0) {
        poll_bundle(ep->bundle);
        if (kind == AMX_LONG_ASYNC && c->credits == 0) return p->state == P_DEAD ? AM_ERR_NOT_SENT : AM_ERR_IN_USE;
        IdleYield idle;
        while (c->credits == 0) {
            if (p->state == P_DEAD) return AM_ERR_NOT_SENT;
            idle.after(poll_bundle(ep->bundle));
        }
    }
    if (p->state == P_DEAD) return AM_ERR_NOT_SENT;
    // See flush_reposts: after the send only if the NIC cannot run meanwhile and, should
    // the buffer belong to this channel, fewer than k requests will be outstanding.
    bool repost_after = g.inline_progress && ep->reposts.size() == 1 &&
                        (ep->reposts[0].first != c || c->credits >= 2);
    if (!ep->reposts.empty() && !repost_after) flush_reposts(ep);
    int rc = post_request(c, wire_kind, handler, t.tag, nargs, args, src, nbytes, offset, kRequestOp[c->idx]);
    if (rc == AM_OK) ep->ctr.requests_sent++;
    if (repost_after) flush_reposts(ep);
    return rc;
}

AMX_API int AMX_Reply(void* token, handler_t handler, int kind, const void* src, size_t nbytes, uintptr_t offset,
                      int nargs, const int32_t* args) {
    Token* t = token_of(token);
    if (!t || !t->is_request || t->replied || nargs < 0 || nargs > AMX_MAX_ARGS || (nargs && !args) ||
        handler == 0 || kind < AMX_SHORT || kind > AMX_LONG)
        return AM_ERR_BAD_ARG;
    if (kind == AMX_MEDIUM && (nbytes > AMX_MAX_MEDIUM || t->ch->idx == C_SHORT)) return AM_ERR_BAD_ARG;
    if (kind == AMX_LONG && (nbytes > AMX_MAX_LONG || t->ch->idx != C_LONG)) return AM_ERR_BAD_ARG;
    if (kind != AMX_SHORT && nbytes && !src) return AM_ERR_BAD_ARG;
    Peer* p = t->peer;
    if (p->state == P_DEAD) return AM_ERR_NOT_SENT;
    uint8_t wire_kind = kind == AMX_SHORT ? K_REP_SHORT : kind == AMX_MEDIUM ? K_REP_MEDIUM : K_REP_LONG;
    if (wire_kind == K_REP_LONG) {
        int status = 0;
        if (!p->rseg_known || p->rseg_len == 0 || offset > p->rseg_len) status = EBADSEGOFF;
        else if (nbytes > p->rseg_len - offset) status = EBADLENGTH;
        if (status) {  // not sent: the request's credit goes back as an implicit reply
            call_returned(t->ep, p, t->ch, status, AM_REPLY_XFER_M, t->tag);
            return AM_OK;
        }
    }
    int rc = post_reply(t->ch, wire_kind, handler, t->tag, nargs, args, src, nbytes, offset, 1);
    if (rc == AM_OK) {
        t->replied = true;
        t->ep->ctr.replies_sent++;
    }
    return rc;
}

AMX_API int AMX_SetSteering(int on) {
    g.steering = on ? 1 : 0;
    return AM_OK;
}

AMX_API int AMX_GetSteering(ep_t ep, int* on) {
    if (!ep_ok(ep) || !on) return AM_ERR_BAD_ARG;
    *on = ep->steering;
    return AM_OK;
}

AMX_API int AMX_SetConnectTimeout(unsigned ms) {
    if (ms == 0) return AM_ERR_BAD_ARG;
    g.connect_timeout_ms = long(ms);
    return AM_OK;
}

AMX_API int AMX_GetCounters(ep_t ep, amx_counters_t* c) {
    if (!ep_ok(ep) || !c) return AM_ERR_BAD_ARG;
    *c = ep->ctr;
    return AM_OK;
}

AMX_API int AMX_Outstanding(ep_t ep, int* n) {
    if (!g.inited) return AM_ERR_NOT_INIT;
    if (!ep_ok(ep) || !n) return AM_ERR_BAD_ARG;
    int sum = 0;
    for (Peer* p : ep->peers)
        if (p->state != P_DEAD)
            for (const Channel& c : p->ch) sum += c.k - c.credits;
    *n = sum;
    return AM_OK;
}

AMX_API const char* AMX_ErrorString(int code) {
    switch (code) {
        case AM_OK: return "AM_OK";
        case AM_ERR_NOT_INIT: return "AM_ERR_NOT_INIT";
        case AM_ERR_BAD_ARG: return "AM_ERR_BAD_ARG";
        case AM_ERR_RESOURCE: return "AM_ERR_RESOURCE";
        case AM_ERR_NOT_SENT: return "AM_ERR_NOT_SENT";
        case AM_ERR_IN_USE: return "AM_ERR_IN_USE";
        default: return "AM_ERR_(unknown)";
    }
}

AMX_API const char* AMX_StatusString(int status) {
    switch (status) {
        case EBADARGS: return "EBADARGS";
        case EBADENTRY: return "EBADENTRY";
        case EBADTAG: return "EBADTAG";
        case EBADHANDLER: return "EBADHANDLER";
        case EBADSEGOFF: return "EBADSEGOFF";
        case EBADLENGTH: return "EBADLENGTH";
        case EBADENDPOINT: return "EBADENDPOINT";
        case ECONGESTION: return "ECONGESTION";
        case EUNREACHABLE: return "EUNREACHABLE";
        case EREPLYREJECTED: return "EREPLYREJECTED";
        default: return "E(unknown)";
    }
}

// ---------------------------------------------------------------- for am_spmd.cc
namespace amx {
void IdleYield::after(int handled) {
    if (handled) idle = 0;
    else if ((++idle & 255) == 0) sched_yield();
}
// AM_Poll for the SPMD waits, with what it took; -1 inside a handler (not allowed).
int poll_count(eb_t eb) { return in_handler() ? -1 : poll_bundle(eb); }
void flush_credits(ep_t ep) { flush_owed(ep); }
bool all_peers_ready(ep_t ep) {
    for (size_t i = 0; i < ep->peers.size(); i++) {  // by index: see AM_SetSeg
        Peer* p = ep->peers[i];
        if (p->state == P_CONNECTING) check_connect(p);
        if (p->state != P_UP || !p->rseg_known) return false;
    }
    return true;
}
bool any_peer_dead(ep_t ep) {
    for (Peer* p : ep->peers)
        if (p->state == P_DEAD) return true;
    return false;
}
bool peer_dead_at(ep_t ep, int index) {
    if (index < 0 || size_t(index) >= ep->trans.size() || !ep->trans[size_t(index)].used) return true;
    return ep->trans[size_t(index)].peer->state == P_DEAD;
}
// Gives back credits owed and waits until every message this endpoint posted has left
// (a disconnect would flush a send still queued), so a peer waiting for it gets it.
void quiesce(ep_t ep) {
    flush_reposts(ep);
    flush_owed(ep);
    uint64_t end = now_ms() + 2000;
    for (Peer* p : ep->peers)
        for (int i = 0; i < C_COUNT; i++) {
            Channel* c = &p->ch[i];
            while (c->s_used > 0 && p->state != P_DEAD && now_ms() < end) {
                reap_sends(c);
                if (c->s_used > 0) sched_yield();
            }
        }
}
int send_barrier(ep_t ep, int index, int phase, int gen) {
    if (index < 0 || size_t(index) >= ep->trans.size() || !ep->trans[size_t(index)].used) return AM_ERR_BAD_ARG;
    Peer* p = ep->trans[size_t(index)].peer;
    if (!wait_up(p)) return AM_ERR_NOT_SENT;
    int32_t a[2] = {phase, gen};
    return send_internal(p, K_BARRIER, 2, a);
}
}  // namespace amx
