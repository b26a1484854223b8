// backend_via_unrel.cc -- via-unrel's reliable request/reply protocol over unreliable VIs
// (the paper's 5.5, with the part it left unfinished). Per channel, requests and replies
// are numbered separately (Flow); every message carries, for both classes, the next
// number this side expects, i.e. what it has processed:
//
// - Credits are request acknowledgements: at most k requests unacknowledged. A request is
//   acknowledged once it has been processed, so a reply (or anything sent later) carries
//   its acknowledgement; after n = k/4 reply-free requests with nothing sent back, the
//   receiver sends an unnumbered K_ACK (the paper's no-op reply), and the rest once its
//   polls go quiet.
// - Processing is in order. A message ahead of the next expected one waits in its receive
//   buffer (held) and the receiver asks at once for the missing one (a K_ACK with a NACK
//   flag); an older one is a duplicate: dropped, and acknowledged again (our
//   acknowledgement may be what was lost). A copy of a request (processed, or held for
//   want of a reply slot) also makes the owner send its oldest unacknowledged reply again
//   at once: the requester may be missing it.
// - Every numbered message stays in its send slot until acknowledged. A channel whose
//   acknowledgements do not advance for the retransmission timeout (rto: starts at
//   rto_min, doubles per expiry up to kRtoMax, back to rto_min on progress) sends the
//   oldest unacknowledged message of each class again; a NACK sends the one named at
//   once.
// - A channel that makes no progress for SPLITC_PEER_TIMEOUT_MS ends the job, naming the
//   process. A process waiting on a peer that is silent (a reply, the barrier) sends it a
//   PING (backend_via.cc, liveness), which the timer then covers.
//
// A request that would need a reply while the reply window is full (k replies
// unacknowledged, only after losses) is not processed yet: it waits, held, until
// acknowledgements of our replies make room. Acknowledgements from any message are used,
// in order or not: they are cumulative.
#include <algorithm>
#include <cstdio>

#include "backend_via.h"

namespace splitc {
namespace via {
namespace {

constexpr uint64_t kRtoMaxNs = 64000000ull;  // 64 ms

inline int outstanding(const Flow& f) { return uint8_t(f.next_seq - f.acked); }
inline Slot* flow_slot(Chan* c, const Flow& f, uint8_t seq) { return &c->slots[size_t(f.base) + (seq & (c->k - 1))]; }

void list_ack(Chan* c) {
    if (!c->in_ack_list) {
        c->in_ack_list = true;
        V.ack_list.push_back(c);
    }
}
void list_dirty(Chan* c) {
    c->ack_dirty = true;
    if (!c->in_dirty_list) {
        c->in_dirty_list = true;
        V.dirty_list.push_back(c);
    }
}

void start_timer(Chan* c) {
    if (!c->in_timed) {
        c->in_timed = true;
        c->mark_ns = 0;
        V.timed.push_back(c);
    }
}

// A numbered message's immediate data, with the current acknowledgements.
inline uint32_t stamp(Chan* c, uint8_t seq) {
    c->ack_dirty = false;
    c->quiet_ack = false;
    c->unreplied = 0;
    return imm_of(UHdr{seq, c->req.expect, c->rep.expect, 0});
}

// An unnumbered acknowledgement (flags: NACK). Skipped if no K_ACK slot is free: the
// next one, or the sender's timer, makes up for it.
void send_ack(Chan* c, uint8_t flags) {
    if (c->peer->gone) return;
    Slot* s = &c->slots[size_t(2 * c->k + c->ack_next)];
    if (s->busy) reap(c, false);
    if (s->busy) {
        list_dirty(c);
        return;
    }
    if (++c->ack_next == kAckSlots) c->ack_next = 0;
    Hdr h{K_ACK, 0, 0};
    memcpy(s->buf, &h, sizeof h);
    c->ack_dirty = false;
    c->ack_now = false;
    c->unreplied = 0;
    V.ctr.acks_sent++;
    if (flags) V.ctr.nacks++;
    post_slot(c, s, uint32_t(sizeof h), imm_of(UHdr{0, c->req.expect, c->rep.expect, flags}));
}

// Sends a numbered message of ours again, with fresh acknowledgements. One still in the
// NIC's send queue has not left yet: nothing to do.
void resend(Chan* c, Flow& f, uint8_t seq) {
    Slot* s = flow_slot(c, f, seq);
    if (s->busy) reap(c, false);  // sends are taken back lazily: it may be done by now
    if (s->busy) return;
    V.ctr.retransmits++;
    post_slot(c, s, s->len, stamp(c, seq));
}

// A message is missing before held ones (not: the next request waits for a reply slot).
inline bool gap(Chan* c, const Flow& f) { return f.nheld && f.held[size_t(f.expect & (c->k - 1))] < 0; }

// Our oldest unacknowledged reply, at once (the requester's copies and NACKs tell us it
// is missing; the timer would take up to kRtoMax). At most once per rto_min.
void resend_oldest_reply(Chan* c) {
    if (!outstanding(c->rep)) return;
    const uint64_t now = now_ns();
    if (now - c->rep_kick_ns < V.rto_min_ns) return;
    c->rep_kick_ns = now;
    resend(c, c->rep, c->rep.acked);
}

void on_ack(Chan* c, const UHdr& u) {
    // Cumulative and monotonic: only a number inside the window moves it.
    if (uint8_t(u.ack_req - c->req.acked) <= outstanding(c->req)) c->req.acked = u.ack_req;
    if (uint8_t(u.ack_rep - c->rep.acked) <= outstanding(c->rep)) c->rep.acked = u.ack_rep;
}

// Delivers an in-order message; false if a request found no room for a reply (then it is
// neither processed nor acknowledged yet).
bool deliver_in_order(Chan* c, int slot, uint32_t len, bool request) {
    Flow& f = request ? c->req : c->rep;
    if (request && outstanding(c->rep) >= c->k) {
        V.ctr.no_reply_slot++;
        return false;
    }
    f.expect++;  // before the handler: its reply acknowledges this request
    const int rc = deliver(c, len, slot);
    if (request && !(rc & kReplied)) {
        if (++c->unreplied >= c->k / 4) {
            c->ack_now = true;
            list_ack(c);
        } else {
            list_dirty(c);
        }
    } else if (!request) {
        list_dirty(c);  // the next request carries it, else the quiet flush
    }
    if (c->ack_now) list_ack(c);  // a PING
    return true;
}

void drop(Chan* c, int slot) {
    if (post_recv(c, slot) != VIP_SUCCESS) peer_failed(c->peer, "reposting a receive failed");
}

}  // namespace

Slot* unrel_request_slot(Chan* c) {
    // A quarter of the window out: look at what has come (a NACK after a loss is then
    // answered while the window still has room, so the stream does not stall).
    if (outstanding(c->req) >= c->k / 4) take_arrived();
    while (outstanding(c->req) >= c->k) {  // no credit: wait for acknowledgements
        if (c->peer->gone) fatal("via-unrel back end: process %d is gone", c->peer->proc);
        poll_once();
    }
    if (!V.reposts.empty()) flush_reposts();
    Slot* s = flow_slot(c, c->req, c->req.next_seq);
    while (s->busy) reap(c, true);
    return s;
}

Slot* unrel_reply_slot(Chan* c) {
    Slot* s = flow_slot(c, c->rep, c->rep.next_seq);
    while (s->busy) reap(c, true);
    return s;
}

void unrel_post(Chan* c, Slot* s, uint32_t len, bool request) {
    Flow& f = request ? c->req : c->rep;
    post_slot(c, s, len, stamp(c, f.next_seq++));
    start_timer(c);
}

namespace {
// Delivers the held messages of f from its next number on, as far as they go in order;
// asks again (NACK) at a gap behind which messages wait. A request that finds no room
// for its reply stays held until acknowledgements make room (unrel_receive).
void drain_held(Chan* c, Flow& f, bool request) {
    while (f.nheld) {
        int& h_slot = f.held[size_t(f.expect & (c->k - 1))];
        if (h_slot < 0) {
            if (f.nacked != f.expect) {  // a gap (not a request waiting for room)
                f.nacked = f.expect;
                send_ack(c, request ? kNackReq : kNackRep);
            }
            return;
        }
        const int s2 = h_slot;
        if (!deliver_in_order(c, s2, recv_desc(c, s2)->CS.Length, request)) return;
        h_slot = -1;
        f.nheld--;
    }
    f.nacked = -1;  // no gap: a later one (numbers wrap) is asked for again
}
}  // namespace

void unrel_receive(Chan* c, VIP_DESCRIPTOR* d, int slot) {
    const uint32_t len = d->CS.Length;
    const char* buf = recv_buf(c, slot);
    if (len < sizeof(Hdr) || !(d->CS.Status & VIP_STATUS_IMMEDIATE))
        fatal("via-unrel back end: malformed message from process %d (%u bytes)", c->peer->proc, len);
    const uint8_t kind = static_cast<uint8_t>(buf[0]);
    const UHdr u = uhdr_of(d->CS.ImmediateData);
    const uint8_t rep_acked = c->rep.acked;
    on_ack(c, u);
    // Our replies acknowledged: requests held for want of a reply slot may go on.
    if (c->rep.acked != rep_acked && c->req.nheld) drain_held(c, c->req, true);
    if (kind == K_ACK) {
        // A NACK: the receiver holds later messages; send the missing one now.
        if ((u.flags & kNackReq) && u.ack_req == c->req.acked && outstanding(c->req)) resend(c, c->req, u.ack_req);
        if ((u.flags & kNackRep) && u.ack_rep == c->rep.acked && outstanding(c->rep)) resend(c, c->rep, u.ack_rep);
        return drop(c, slot);
    }
    const bool request = is_request(kind);
    Flow& f = request ? c->req : c->rep;
    const int ahead = int8_t(uint8_t(u.seq - f.expect));
    c->quiet_ack = true;  // see unrel_idle_acks
    if (!c->in_dirty_list) {
        c->in_dirty_list = true;
        V.dirty_list.push_back(c);
    }
    if (ahead < 0) {  // processed already: a copy we sent again, or acknowledged late
        V.ctr.duplicates++;
        c->ack_now = true;
        list_ack(c);
        // The requester sends a request again: perhaps it misses one of our replies.
        if (request) resend_oldest_reply(c);
        return drop(c, slot);
    }
    int& h_slot = f.held[size_t(u.seq & (c->k - 1))];
    if (ahead >= c->k || h_slot >= 0) {  // too far, or a copy of one held
        // A copy of a request held for want of a reply slot: the requester has not
        // acknowledged our replies, so it misses one; send the oldest again.
        if (request && ahead == 0) resend_oldest_reply(c);
        return drop(c, slot);
    }
    if (ahead > 0) {  // a gap before it: keep it until the gap is filled, and ask
        h_slot = slot;
        f.nheld++;
        V.ctr.held++;
        if (f.nacked != f.expect) {
            f.nacked = f.expect;
            send_ack(c, request ? kNackReq : kNackRep);
        }
        return;
    }
    if (!deliver_in_order(c, slot, len, request)) {  // no reply slot: hold it
        h_slot = slot;
        f.nheld++;
        return;
    }
    drain_held(c, f, request);
}

// End of a poll: duplicates and PINGs are acknowledged, and n reply-free requests.
void unrel_send_acks() {
    std::vector<Chan*> now;
    now.swap(V.ack_list);
    for (Chan* c : now) {
        c->in_ack_list = false;
        if (c->ack_now) send_ack(c, 0);
    }
    now.clear();
    if (V.ack_list.empty()) now.swap(V.ack_list);  // keep the capacity
}

// The polls went quiet: whatever is still unacknowledged is acknowledged.
// The polls went quiet. Each channel that received numbered messages since it last sent
// a numbered message or a quiet acknowledgement acknowledges once more, even if its last
// K_ACK said the same: that one may have been lost while the sender waits with a full
// window (it would wait for its retransmission timeout); and one that still holds
// messages behind a gap asks again for the missing one (the NACK or the copy may have
// been lost). One per quiet spell, and an acknowledgement never causes another. A channel whose K_ACK slots are all still in the
// NIC lists itself again (send_ack): hence the list is taken out first.
void unrel_idle_acks() {
    if (V.dirty_list.empty()) return;
    std::vector<Chan*> now;
    now.swap(V.dirty_list);
    for (Chan* c : now) {
        c->in_dirty_list = false;
        if (c->ack_dirty || c->quiet_ack) {
            send_ack(c, uint8_t((gap(c, c->req) ? kNackReq : 0) | (gap(c, c->rep) ? kNackRep : 0)));
            c->quiet_ack = false;
        }
    }
    now.clear();
    if (V.dirty_list.empty()) now.swap(V.dirty_list);
}

// Retransmission and the peer timeout, for channels with unacknowledged messages; idle:
// the poll that runs this found nothing (a timeout is declared only then, so that
// acknowledgements already waiting in the completion queue are counted first).
void unrel_timers(uint64_t now, bool idle) {
    for (size_t i = 0; i < V.timed.size();) {
        Chan* c = V.timed[i];
        if ((!outstanding(c->req) && !outstanding(c->rep)) || c->peer->gone) {
            c->in_timed = false;
            c->rto_ns = V.rto_min_ns;
            V.timed[i] = V.timed.back();
            V.timed.pop_back();
            continue;
        }
        i++;
        if (c->mark_ns == 0 || c->req.acked != c->mark_req || c->rep.acked != c->mark_rep) {
            if (c->mark_ns) c->rto_ns = V.rto_min_ns;  // progress
            c->mark_ns = c->stall_ns = now;
            c->mark_req = c->req.acked;
            c->mark_rep = c->rep.acked;
            continue;
        }
        if (idle && now - c->stall_ns > V.peer_timeout_ns) {
            if (V.ending) {
                c->peer->gone = true;
                continue;
            }
            char what[160];
            snprintf(what, sizeof what,
                     "it has not acknowledged anything for %llu ms (SPLITC_PEER_TIMEOUT_MS): it died, stopped, or "
                     "has not called the runtime for that long",
                     static_cast<unsigned long long>((now - c->stall_ns) / 1000000));
            peer_failed(c->peer, what);
        }
        if (now - c->mark_ns >= c->rto_ns) {
            // The oldest of each class only: a peer that was merely slow (it lost its core
            // for a while) costs one copy, not a window; after a loss the receiver holds
            // what came behind it and asks for the next gap itself (NACK).
            if (outstanding(c->req)) resend(c, c->req, c->req.acked);
            if (outstanding(c->rep)) resend(c, c->rep, c->rep.acked);
            c->rto_ns = std::min(2 * c->rto_ns, kRtoMaxNs);
            c->mark_ns = now;
        }
    }
}

bool unrel_all_acked() {
    for (Peer* p : V.peers) {
        if (!p || p->gone) continue;
        for (Chan& c : p->ch)
            if (outstanding(c.req) || outstanding(c.rep)) return false;
    }
    return true;
}

// Are you there? A numbered request the peer must acknowledge (its timer covers the
// rest); skipped when the window is full, since then the timer already runs.
void unrel_ping(Peer* p) {
    Chan* c = &p->ch[C_SHORT];
    if (outstanding(c->req) >= c->k) return;
    Slot* s = flow_slot(c, c->req, c->req.next_seq);
    if (s->busy) reap(c, false);
    if (s->busy) return;
    Hdr h{K_PING, kInternal, 0};
    memcpy(s->buf, &h, sizeof h);
    unrel_post(c, s, uint32_t(sizeof h), true);
}

}  // namespace via
}  // namespace splitc
