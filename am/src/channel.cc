// channel.cc -- the send side of a MAP object's channels: the ring of send slots, a
// message posted (header send; a long payload by RDMA write first), request credits and
// the credits owed back, and the calls that send: AMX_Request (every AM_Request*) and
// AMX_Reply (every AM_Reply*). A request's path from AMX_Request to VipPostSend is in
// this one file so that the compiler inlines it as it did when am/ was one file (the
// helpers the receive side shares, post_reply and credits_returned, are in internal.h).
#include "internal.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <utility>

using namespace softvia::am;

namespace softvia::am {
namespace {

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

// A memory handle for [src, src+n) to RDMA-write from, or 0 (then the bounce buffer).
// The endpoint's segment is registered already; other memory is registered on the fly as
// page-rounded spans, kept for the next message from the same buffer. A cached span is
// only ever read by a write that completed before its AM call returned, so replacing one
// never pulls memory from under the NIC; registrations follow addresses, so memory the
// program freed and reused is read as it is now, which is what the program asked to send.
VIP_MEM_HANDLE source_handle(Endpoint* ep, const void* src, size_t n) {
    auto lo = reinterpret_cast<uintptr_t>(src), hi = lo + n;
    auto seg = reinterpret_cast<uintptr_t>(ep->seg);
    if (ep->seg_mh && lo >= seg && hi <= seg + ep->seg_len) return ep->seg_mh;
    Global::SourceReg* victim = &g.source_regs[0];
    for (Global::SourceReg& r : g.source_regs) {
        if (r.mh && lo >= r.lo && hi <= r.hi) {
            r.used = ++g.source_uses;
            return r.mh;
        }
        if (r.used < victim->used) victim = &r;
    }
    if (victim->mh) VipDeregisterMem(g.nic, reinterpret_cast<void*>(victim->lo), victim->mh);
    victim->mh = 0;
    // The aligned 1 MiB around the source, or the 1 MiB from its first page, if all of it
    // is mapped (a program sending a large buffer in 64 KiB pieces then uses one or two
    // registrations), else its pages.
    VIP_MEM_ATTRIBUTES ma{g.ptag, VIP_FALSE, VIP_FALSE};  // local reads only
    VIP_MEM_HANDLE mh = 0;
    constexpr uintptr_t kMiB = uintptr_t(1) << 20, kPage = 4096;
    const uintptr_t first = lo & ~(kPage - 1), last = (hi + kPage - 1) & ~(kPage - 1);
    const std::pair<uintptr_t, uintptr_t> spans[] = {
        {lo & ~(kMiB - 1), (hi + kMiB - 1) & ~(kMiB - 1)}, {first, std::max(last, first + kMiB)}, {first, last}};
    for (auto [plo, phi] : spans) {
        if (VipRegisterMem(g.nic, reinterpret_cast<void*>(plo), phi - plo, &ma, &mh) == VIP_SUCCESS) {
            *victim = {plo, phi, mh, ++g.source_uses};
            return mh;
        }
    }
    return 0;
}

// Takes back sends (stepping our NIC) until done() holds: true then; false if the peer
// died first or a few seconds passed (the VI is broken). Gives the core away every 1024
// turns. Only our own NIC has to act for a send to complete, so this never waits for the
// peer's handlers: it is safe inside a handler.
template <class Done>
bool reap_until(Channel* c, Done done) {
    uint64_t end = 0;
    for (unsigned turn = 0; !done(); turn++) {
        reap_sends(c);
        if (done()) return true;
        if (c->peer->state == P_DEAD) return false;
        if ((turn & 1023) == 1023) {
            if (!end) end = now_ms() + 5000;
            else if (now_ms() > end) return false;
            sched_yield();
        }
    }
    return true;
}

// Waits until the NIC has read a zero-copy payload (the write of slot), so that the
// caller may reuse its memory when the AM call returns: the write's completion, or before
// it VIP_EXT_STATUS_SOURCE_READ (a lossless wire: the NIC built every frame and will not
// resend; the target's acknowledgement, which completes the write, is then still on its
// way, and the next message need not wait a round trip for it). A dead peer's write was
// flushed: the NIC reads it no more.
void wait_source_read(Channel* c, int slot) {
    auto* wd = reinterpret_cast<VIP_DESCRIPTOR*>(c->sdesc + size_t(slot) * kSendSlotDescBytes);
    auto read = [&] {
        return !(c->slot_pending[slot] & kWritePending) ||
               (__atomic_load_n(&wd->CS.Status, __ATOMIC_ACQUIRE) & VIP_EXT_STATUS_SOURCE_READ);
    };
    if (!reap_until(c, read) && c->peer->state != P_DEAD) peer_dead(c->peer);
}

}  // namespace

void drop_source_regs() {
    for (Global::SourceReg& r : g.source_regs) {
        if (r.mh) VipDeregisterMem(g.nic, reinterpret_cast<void*>(r.lo), r.mh);
        r = {};
    }
    g.source_uses = 0;
}

// A free send slot, or -1 if none frees within a few seconds (the VI is broken) or the
// peer died (reap_until: safe inside a handler).
int get_slot(Channel* c) {
    if (c->s_used == c->nslots && !reap_until(c, [c] { return c->s_used < c->nslots; })) return -1;
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
    bool zcopy = false;
    if (is_long && nbytes) {
        VIP_MEM_HANDLE mh = g.zero_copy_long ? source_handle(p->ep, src, nbytes) : 0;
        const void* from = src;
        if (mh) zcopy = true;
        else {
            char* bounce = buf + kBufBytes[c->idx];
            memcpy(bounce, src, nbytes);
            from = bounce;
            mh = p->mh;
        }
        memset(wd, 0, 64);
        wd->CS.Control = VIP_CONTROL_OP_RDMAWRITE;
        wd->CS.SegCount = 2;
        wd->DS[0].Remote.Data.AddressBits = p->rseg_addr + offset;
        wd->DS[0].Remote.Handle = p->rseg_memh;
        wd->DS[1].Local.Data.Address = const_cast<void*>(from);
        wd->DS[1].Local.Handle = mh;
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
    if (zcopy) wait_source_read(c, slot);
    reap_done_sends(c);
    return AM_OK;
}

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

// ---------------------------------------------------------------- for spmd.cc
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

}  // namespace softvia::am

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
