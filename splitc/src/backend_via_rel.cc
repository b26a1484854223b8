// backend_via_rel.cc -- sending on a channel, and via-rel's credits (docs/am.md, "Credits
// and deadlock freedom", with the paper's reply-free requests).
//
// A request needs a credit of its channel (k: 64 short, 16 medium); a reply-class message
// carries credits back in its header (x): the reply's own one plus any owed for
// reply-free requests (stores, barrier messages), which otherwise go back in a K_CREDIT
// message as soon as n = k/4 are owed (the paper's 5.4), or once the polls go quiet. A
// sender out of credits has k requests outstanding, so at least n of them are, or will
// be, owed: it never waits on the rest. The receiver keeps 2k+1 buffers posted: k for
// requests, k for reply-class messages (each returns at least one credit, so at most k
// are on their way), one for a request that comes between a handler's reply and the
// re-posting of its buffer. A reply's buffer is posted again at the next call
// (flush_reposts): the m that wait gave back m credits, so at most k - m replies can come
// before another request is sent, and every poll and request posts them first.
#include <sched.h>

#include <cstdio>

#include "backend_via.h"

namespace splitc {
namespace via {

// ---- the send queue (both back ends) --------------------------------------------------------
void post_slot(Chan* c, Slot* s, uint32_t len, uint32_t imm) {
    VIP_DESCRIPTOR* d = s->d;
    if (V.reliable) {
        d->CS.Control = VIP_CONTROL_OP_SENDRECV;
    } else {
        d->CS.Control = VIP_CONTROL_OP_SENDRECV | VIP_CONTROL_IMMEDIATE;
        d->CS.ImmediateData = imm;
    }
    d->DS[0].Local.Length = len;
    s->len = len;
    if (VipPostSend(c->vi, d, c->peer->mh) != VIP_SUCCESS) {
        if (V.ending) {
            c->peer->gone = true;
            return;
        }
        peer_failed(c->peer, "posting a send failed (the connection is down)");
    }
    s->busy = true;
    uint32_t tail = c->sq_head + c->sq_n;
    if (tail >= c->sq.size()) tail -= uint32_t(c->sq.size());
    c->sq[tail] = d;
    c->sq_n++;
    V.ctr.sent++;
    reap(c, false);
}

void reap(Chan* c, bool wait) {
    unsigned turns = 0;
    uint64_t give_up = 0;
    while (c->sq_n) {
        VIP_DESCRIPTOR* head = c->sq[c->sq_head];
        // Acquire pairs with the firmware's release of Status (as VipSendDone's). Looking
        // first means VipSendDone never steps the NIC when nothing is done.
        if (!(__atomic_load_n(&head->CS.Status, __ATOMIC_ACQUIRE) & VIP_STATUS_DONE) && !wait) return;
        VIP_DESCRIPTOR* d = nullptr;
        VIP_RETURN r = VipSendDone(c->vi, &d);
        if (r == VIP_NOT_DONE) {
            // Only our own NIC (and, for RDMA and lossy wires, the peer's) has to act: a
            // broken connection flushes the queue, so this ends.
            if ((++turns & 1023) == 0) {
                if (c->peer->gone) return;
                if (!give_up) give_up = now_ns() + 60000000000ull;
                else if (now_ns() > give_up) peer_failed(c->peer, "a send did not complete in 60 s");
                sched_yield();
            }
            continue;
        }
        if (r != VIP_SUCCESS) peer_failed(c->peer, "taking back a send failed");
        if (++c->sq_head == c->sq.size()) c->sq_head = 0;
        c->sq_n--;
        const char* at = reinterpret_cast<const char*>(d);
        if (at >= c->sdesc_lo && at < c->sdesc_hi) c->slots[size_t(at - c->sdesc_lo) / kDescBytes].busy = false;
        if (d->CS.Status & VIP_STATUS_ERROR_MASK) check_send_status(c, d);
        if (!(at >= c->sdesc_lo && at < c->sdesc_hi)) rdma_done(c, d);
        wait = false;  // one came: take the rest that are done, without waiting
    }
}

// ---- via-rel ------------------------------------------------------------------------------------
namespace {

Slot* next_ring_slot(Chan* c) {
    Slot* s = &c->slots[c->s_next];
    while (s->busy) reap(c, true);  // in post order: the oldest of the ring
    if (++c->s_next == c->slots.size()) c->s_next = 0;
    return s;
}

void send_credit(Chan* c) {
    Slot* s = next_ring_slot(c);
    Hdr h{K_CREDIT, 0, 0};
    memcpy(s->buf, &h, sizeof h);
    rel_post_reply(c, s, sizeof h, 0);
    V.ctr.credit_msgs++;
}

}  // namespace

Slot* rel_request_slot(Chan* c) {
    // Waiting polls: requests that come meanwhile are served, so two processes flooding
    // each other cannot deadlock.
    while (c->credits == 0) {
        if (c->peer->gone) fatal("via-rel back end: process %d is gone", c->peer->proc);
        poll_once();
    }
    if (!V.reposts.empty()) flush_reposts();
    return next_ring_slot(c);
}

Slot* rel_reply_slot(Chan* c) { return next_ring_slot(c); }

void rel_post_request(Chan* c, Slot* s, uint32_t len) {
    post_slot(c, s, len, 0);
    c->credits--;
}

// x = the credits this reply-class message gives back: the answered request's and the
// ones owed.
void rel_post_reply(Chan* c, Slot* s, uint32_t len, int answered) {
    int give = c->owed + answered;
    if (give > 255) give = 255;
    s->buf[1] = static_cast<char>(give);
    post_slot(c, s, len, 0);
    c->owed -= give - answered;
}

void rel_owe_credit(Chan* c) {
    c->owed++;
    if (V.ending) return;  // nobody sends requests any more; a credit message could outlive us
    if (c->owed >= c->k / 4) return send_credit(c);
    if (!c->in_owed_list) {
        c->in_owed_list = true;
        V.owed_list.push_back(c);
    }
}

void rel_got_credits(Chan* c, int n) {
    c->credits += n;
    if (c->credits > c->k) fatal("via-rel back end: process %d gave back more credits than were used", c->peer->proc);
}

// The stream has stopped: every credit still owed goes back.
void rel_flush_owed() {
    if (V.owed_list.empty()) return;
    for (Chan* c : V.owed_list) {
        c->in_owed_list = false;
        if (c->owed > 0 && !V.ending && !c->peer->gone) send_credit(c);
    }
    V.owed_list.clear();
}

}  // namespace via
}  // namespace splitc
