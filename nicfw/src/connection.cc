// connection.cc -- the connection manager: client/server (request, wait, accept,
// reject) and peer-to-peer set-up, matched by discriminator; disconnect; and which
// transport peers are still referred to (peer lifetimes, transport.h release_peer).
//
// Protocol (docs/wire-format.md): CONN_REQ -> CONN_ACCEPT | CONN_REJECT | CONN_NOMATCH.
// Peer-to-peer: each side resends PEER_REQ every millisecond until it meets the other
// side's request (or PEER_ACK) with crossed discriminators.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "nicfw/engine.h"
#include "datapath.h"

namespace softvia::nicfw {

namespace {

nicfw_conn_payload attrs_payload(const ViAttrs& a) {
    nicfw_conn_payload pl{};
    pl.reliability = a.reliability;
    pl.rdma_write = a.rdma_write;
    pl.rdma_read = a.rdma_read;
    pl.max_transfer = a.max_transfer;
    return pl;
}

// The request's discriminators: the sender's, then the one it wants (either may be empty,
// and an empty vector's data() may be null, which memcpy must not see).
void put_discs(nicfw_conn_payload* pl, const std::vector<uint8_t>& src, const std::vector<uint8_t>& dst) {
    pl->src_disc_len = static_cast<uint16_t>(src.size());
    pl->dst_disc_len = static_cast<uint16_t>(dst.size());
    if (!src.empty()) memcpy(pl->disc, src.data(), src.size());
    if (!dst.empty()) memcpy(pl->disc + src.size(), dst.data(), dst.size());
}

ViAttrs attrs_of(const nicfw_conn_payload& pl) {
    ViAttrs a;
    a.reliability = pl.reliability;
    a.rdma_write = pl.rdma_write;
    a.rdma_read = pl.rdma_read;
    a.max_transfer = pl.max_transfer;
    return a;
}

void set_state(Vi& vi, uint32_t s) {
    vi.state.store(s, std::memory_order_release);
    vi.st->state = s;
}

// Connect outcome for the driver: state first, then the result it waits on.
void connect_done(Vi& vi, uint32_t state, int result) {
    vi.op = ConnOp::kNone;
    if (state == NICFW_VI_CONNECTED) vi.reset_sequence();  // each connection counts from 0
    set_state(vi, state);
    // Release: the driver that sees the result sees state, peer and remote attributes.
    vi.conn_result.store(result, std::memory_order_release);
}
}  // namespace

int Engine::connect_request(Vi* vi, const uint8_t* addr, size_t alen, const uint8_t* disc, size_t dlen,
                            const uint8_t* local_disc, size_t llen) {
    CtlGuard g(lock_, ctl_waiters_);
    if (vi->state.load(std::memory_order_relaxed) != NICFW_VI_IDLE) return -EBUSY;
    int peer = tr_->resolve(addr, alen);
    if (peer < 0) return peer;
    vi->peer = peer;
    vi->op = ConnOp::kClient;
    vi->req_id = ++next_req_id_;
    vi->local_disc.assign(local_disc, local_disc + llen);  // no local address: no discriminator
    vi->remote_disc.assign(disc, disc + dlen);
    vi->conn_result.store(-1, std::memory_order_relaxed);
    set_state(*vi, NICFW_VI_CONNECT_PENDING);
    vi->st->peer = static_cast<uint16_t>(peer);
    send_conn_req(*vi);
    if (tr_->lossy()) {
        // The request or its answer may be lost: resend until answered (connect_cancel
        // or the answer ends it; the server answers a repeat again).
        vi->resend_gap_ns = 1000000;
        vi->resend_ns = now_ns() + vi->resend_gap_ns;
        connecting_.push_back(vi);
    }
    tr_->tx_flush();  // no engine step may follow soon (the caller may block on us)
    return 0;
}

void Engine::send_conn_req(Vi& vi) {
    nicfw_conn_payload pl = attrs_payload(vi.attrs);
    put_discs(&pl, vi.local_disc, vi.remote_disc);
    size_t alen;
    const uint8_t* a = tr_->local_addr(&alen);
    pl.src_addr_len = static_cast<uint16_t>(alen);
    memcpy(pl.src_addr, a, alen);
    send_control(vi.peer, NICFW_F_CONN_REQ, 0xFFFFFFFFu, vi.id, vi.req_id, &pl);
}

// Client request timer (slow path, lossy wires): resends CONN_REQ with backoff.
void Engine::client_timer(Vi& vi, uint64_t now) {
    bool queued = static_cast<size_t>(vi.peer) < backlog_per_peer_.size() && backlog_per_peer_[vi.peer];
    if (now < vi.resend_ns || queued) return;
    send_conn_req(vi);
    vi.resend_ns = now + vi.resend_gap_ns;
    vi.resend_gap_ns = std::min<uint64_t>(vi.resend_gap_ns * 2, 64000000);
}

void Engine::connect_cancel(Vi* vi) {
    CtlGuard g(lock_, ctl_waiters_);
    if (vi->state.load(std::memory_order_relaxed) != NICFW_VI_CONNECT_PENDING) return;
    // A late ACCEPT finds no pending request and is answered with DISCONNECT.
    connect_done(*vi, NICFW_VI_IDLE, NICFW_R_TIMEOUT);
}

Listener* Engine::listen(const uint8_t* disc, size_t dlen) {
    CtlGuard g(lock_, ctl_waiters_);
    auto l = std::make_unique<Listener>();
    l->disc.assign(disc, disc + dlen);
    Listener* raw = l.get();
    listeners_.push_back(std::move(l));
    return raw;
}

bool Engine::unlisten(Listener* l, ConnRequest* req) {
    CtlGuard g(lock_, ctl_waiters_);
    bool matched = l->matched.load(std::memory_order_acquire);
    if (matched) {
        *req = l->req;
        held_reqs_.push_back({req->peer, req->client_vi, req->req_id});
    }
    listeners_.erase(std::remove_if(listeners_.begin(), listeners_.end(),
                                    [&](auto& p) { return p.get() == l; }),
                     listeners_.end());
    return matched;
}

int Engine::accept(const ConnRequest& req, Vi* vi) {
    CtlGuard g(lock_, ctl_waiters_);
    if (vi->state.load(std::memory_order_relaxed) != NICFW_VI_IDLE) return -EBUSY;
    if (vi->attrs.reliability != req.reliability) return -EPROTO;
    // The answer must be able to reach the client before the VI is connected: a link
    // that cannot be opened (out of fds or memory) fails the accept, and the transport
    // tells the client, whose request then fails too. Never half-open.
    if (!tr_->peer_alive(req.peer) || tr_->open_link(req.peer) < 0) {
        forget_held(req);  // the handle is consumed (VIPL drops it on -EHOSTUNREACH)
        return -EHOSTUNREACH;
    }
    forget_held(req);
    vi->peer = req.peer;
    vi->op = ConnOp::kNone;
    vi->req_id = req.req_id;  // a repeat of this request is answered from the VI
    vi->remote_vi = req.client_vi;
    vi->remote.reliability = req.reliability;
    vi->remote.max_transfer = req.max_transfer;
    vi->remote.rdma_write = req.rdma_write;
    vi->remote.rdma_read = req.rdma_read;
    vi->st->peer = static_cast<uint16_t>(req.peer);
    vi->st->remote_vi = req.client_vi;
    nicfw_conn_payload pl = attrs_payload(vi->attrs);
    send_control(req.peer, NICFW_F_CONN_ACCEPT, req.client_vi, vi->id, req.req_id, &pl);
    connect_done(*vi, NICFW_VI_CONNECTED, NICFW_R_OK);
    tr_->tx_flush();
    return 0;
}

int Engine::reject(const ConnRequest& req) {
    CtlGuard g(lock_, ctl_waiters_);
    forget_held(req);
    if (rejected_.size() >= kMaxConnKeys) rejected_.erase(rejected_.begin());
    rejected_.push_back({req.peer, req.client_vi, req.req_id});
    send_control(req.peer, NICFW_F_CONN_REJECT, req.client_vi, 0, req.req_id, nullptr);
    tr_->tx_flush();
    return 0;
}

void Engine::forget_held(const ConnRequest& req) {
    ConnKey k{req.peer, req.client_vi, req.req_id};
    held_reqs_.erase(std::remove(held_reqs_.begin(), held_reqs_.end(), k), held_reqs_.end());
}

int Engine::peer_request(Vi* vi, const uint8_t* addr, size_t alen, const uint8_t* local_disc,
                         size_t llen, const uint8_t* remote_disc, size_t rlen, uint64_t timeout_ms) {
    CtlGuard g(lock_, ctl_waiters_);
    if (vi->state.load(std::memory_order_relaxed) != NICFW_VI_IDLE) return -EBUSY;
    int peer = tr_->resolve(addr, alen);
    if (peer < 0) return peer;
    vi->peer = peer;
    vi->op = ConnOp::kPeer;
    vi->req_id = ++next_req_id_;
    vi->local_disc.assign(local_disc, local_disc + llen);
    vi->remote_disc.assign(remote_disc, remote_disc + rlen);
    uint64_t now = now_ns();
    // Timeouts beyond a year are as good as infinite (and would overflow nanoseconds).
    constexpr uint64_t kMaxMs = 365ull * 24 * 3600 * 1000;
    vi->deadline_ns = timeout_ms >= kMaxMs ? 0 : now + timeout_ms * 1000000ull;
    vi->resend_ns = 0;  // the next slow-path pass sends the first request
    vi->resend_gap_ns = 1000000;
    vi->conn_result.store(-1, std::memory_order_relaxed);
    vi->st->peer = static_cast<uint16_t>(peer);
    set_state(*vi, NICFW_VI_CONNECT_PENDING);
    connecting_.push_back(vi);
    last_slow_ns_ = 0;  // run the slow path on the next step
    return 0;
}

// Peer-to-peer timer (slow path): expires the request, or resends PEER_REQ with
// backoff. False once the VI is no longer connecting.
bool Engine::peer_timer(Vi& vi, uint64_t now) {
    if (vi.deadline_ns && now >= vi.deadline_ns) {
        connect_done(vi, NICFW_VI_IDLE, NICFW_R_TIMEOUT);
        return false;
    }
    // A request still waiting in the backlog for a full link needs no company.
    bool queued = static_cast<size_t>(vi.peer) < backlog_per_peer_.size() && backlog_per_peer_[vi.peer];
    if (now < vi.resend_ns || queued) return true;
    nicfw_conn_payload pl = attrs_payload(vi.attrs);
    put_discs(&pl, vi.local_disc, vi.remote_disc);
    send_control(vi.peer, NICFW_F_PEER_REQ, 0xFFFFFFFFu, vi.id, vi.req_id, &pl);
    // Back off: a thousand VIs waiting for their partners must not flood the links
    // (and the control backlog) every millisecond.
    vi.resend_ns = now + vi.resend_gap_ns;
    vi.resend_gap_ns = std::min<uint64_t>(vi.resend_gap_ns * 2, 64000000);
    return true;
}

int Engine::disconnect(Vi* vi) {
    CtlGuard g(lock_, ctl_waiters_);
    // Descriptors posted before this call may still be doorbells in flight (thread
    // mode): move them onto the queues first, so the flush below completes them.
    service_doorbells();
    uint32_t st = vi->state.load(std::memory_order_relaxed);
    if (st == NICFW_VI_CONNECT_PENDING) {
        connect_done(*vi, NICFW_VI_IDLE, NICFW_R_TIMEOUT);
        // Now idle: its receives are flushed as on any idle VI, so it can be destroyed.
        flush_vi(*vi, NICFW_VI_IDLE, false, NICFW_AE_CONN_LOST);
        return 0;
    }
    // What we received before this call is acknowledged first: an ACK that waited for a
    // reply to carry it must not be dropped with the connection.
    if (st == NICFW_VI_CONNECTED) send_ack_now(*vi, vi->rx_seq);
    flush_vi(*vi, NICFW_VI_IDLE, true, NICFW_AE_CONN_LOST);
    tr_->tx_flush();  // the DISCONNECT goes now, not at the next step
    return 0;
}

// ---------------------------------------------------------------- peer lifetimes
// Hands every peer index the engine no longer refers to back to the transport
// (transport.h, release_peer). References are: a VI connected or connecting to the peer,
// a control frame queued for it, a connection request from it that a listener or the
// application holds. A VI that is idle or in the error state keeps its old peer number
// but never uses it (every use checks the state first); forget_peer clears it.
void Engine::release_unused_peers() {
    const size_t n = tr_->peer_count();
    peer_used_.assign(n, 0);
    auto use = [&](int p) {
        if (p >= 0 && static_cast<size_t>(p) < n) peer_used_[p] = 1;
    };
    for (auto& v : vis_) {
        if (!v) continue;
        uint32_t st = v->state.load(std::memory_order_relaxed);
        if (st == NICFW_VI_CONNECTED || st == NICFW_VI_CONNECT_PENDING) use(v->peer);
    }
    for (const PendingControl& c : backlog_) use(c.peer);
    for (auto& l : listeners_)
        if (l->matched.load(std::memory_order_relaxed)) use(l->req.peer);
    for (const ConnKey& k : held_reqs_) use(k.peer);
    for (size_t i = 0; i < n; i++)
        if (!peer_used_[i]) tr_->release_peer(static_cast<int>(i));
}

// A freed peer index may come back naming another peer: nothing of the old one may
// match it (answers remembered for repeated requests, idle VIs' peer numbers).
void Engine::forget_peer(int peer) {
    auto gone = [peer](const ConnKey& k) { return k.peer == peer; };
    rejected_.erase(std::remove_if(rejected_.begin(), rejected_.end(), gone), rejected_.end());
    no_match_.erase(std::remove_if(no_match_.begin(), no_match_.end(), gone), no_match_.end());
    held_reqs_.erase(std::remove_if(held_reqs_.begin(), held_reqs_.end(), gone), held_reqs_.end());
    for (auto& v : vis_)
        if (v && v->peer == peer) v->peer = -1;
}

// ---------------------------------------------------------------- incoming control frames
// A CONN_REQ we have seen before (the client resent it on a lossy wire): the same answer
// again, or none while the application still holds it. True if it was a repeat.
bool Engine::answer_repeat(int peer, const nicfw_frame_hdr& h) {
    ConnKey k{peer, h.src_vi, h.seq};
    for (auto& v : vis_) {
        if (v && v->op == ConnOp::kNone && v->peer == peer && v->remote_vi == h.src_vi && v->req_id == h.seq &&
            v->state.load(std::memory_order_relaxed) == NICFW_VI_CONNECTED) {
            nicfw_conn_payload pl = attrs_payload(v->attrs);
            send_control(peer, NICFW_F_CONN_ACCEPT, h.src_vi, v->id, h.seq, &pl);
            return true;
        }
    }
    if (std::find(rejected_.begin(), rejected_.end(), k) != rejected_.end()) {
        send_control(peer, NICFW_F_CONN_REJECT, h.src_vi, 0, h.seq, nullptr);
        return true;
    }
    if (std::find(no_match_.begin(), no_match_.end(), k) != no_match_.end()) {
        send_control(peer, NICFW_F_CONN_NOMATCH, h.src_vi, 0, h.seq, nullptr);
        return true;
    }
    if (std::find(held_reqs_.begin(), held_reqs_.end(), k) != held_reqs_.end()) return true;
    for (auto& l : listeners_)
        if (l->matched.load(std::memory_order_relaxed) && l->req.peer == peer && l->req.client_vi == h.src_vi &&
            l->req.req_id == h.seq)
            return true;
    return false;
}


void Engine::on_control(const RxFrame& f, const nicfw_frame_hdr& h) {
    constexpr uint32_t kFixed = offsetof(nicfw_conn_payload, disc);
    nicfw_conn_payload pl{};
    bool has_payload = h.type == NICFW_F_CONN_REQ || h.type == NICFW_F_CONN_ACCEPT ||
                       h.type == NICFW_F_PEER_REQ || h.type == NICFW_F_PEER_ACK;
    if (has_payload) {
        if (h.msg_len < kFixed || h.msg_len > f.len - sizeof(nicfw_frame_hdr) ||
            h.msg_len > sizeof(nicfw_conn_payload)) {
            bump(status_->nic.drops);
            return;
        }
        memcpy(&pl, f.data + sizeof(nicfw_frame_hdr), h.msg_len);
        if (pl.src_disc_len > NICFW_MAX_DISCRIMINATOR || pl.dst_disc_len > NICFW_MAX_DISCRIMINATOR ||
            pl.src_addr_len > NICFW_MAX_ADDR ||
            kFixed + pl.src_disc_len + pl.dst_disc_len > h.msg_len) {
            bump(status_->nic.drops);
            return;
        }
    }
    const uint8_t* src_disc = pl.disc;
    const uint8_t* dst_disc = pl.disc + pl.src_disc_len;
    Vi* vi = nullptr;
    if (h.dst_vi != 0xFFFFFFFFu) {
        vi = vi_by_index(NICFW_VI_INDEX(h.dst_vi));
        if (vi && vi->id != h.dst_vi) vi = nullptr;
    }

    switch (h.type) {
        case NICFW_F_CONN_REQ: {
            if (answer_repeat(f.peer, h)) return;
            for (auto& l : listeners_) {
                if (l->matched.load(std::memory_order_relaxed)) continue;
                if (l->disc.size() != pl.dst_disc_len || memcmp(l->disc.data(), dst_disc, pl.dst_disc_len))
                    continue;
                l->req.peer = f.peer;
                l->req.client_vi = h.src_vi;
                l->req.req_id = h.seq;
                l->req.reliability = pl.reliability;
                l->req.max_transfer = pl.max_transfer;
                l->req.rdma_write = pl.rdma_write;
                l->req.rdma_read = pl.rdma_read;
                l->req.disc.assign(src_disc, src_disc + pl.src_disc_len);
                // The client's whole address, when the wire agrees it is the NIC the request
                // came from; otherwise (a peer claiming another NIC's address, or a wire
                // that sees its peer under another IP) the address the wire knows it by.
                if (pl.src_addr_len && tr_->names_peer(f.peer, pl.src_addr, pl.src_addr_len))
                    l->req.addr.assign(pl.src_addr, pl.src_addr + pl.src_addr_len);
                else
                    l->req.addr = tr_->peer_addr(f.peer);
                // Release: the waiting driver that sees matched sees req.
                l->matched.store(true, std::memory_order_release);
                return;
            }
            if (tr_->lossy()) {  // only a lossy wire resends requests
                if (no_match_.size() >= kMaxConnKeys) no_match_.erase(no_match_.begin());
                no_match_.push_back({f.peer, h.src_vi, h.seq});
            }
            send_control(f.peer, NICFW_F_CONN_NOMATCH, h.src_vi, 0, h.seq, nullptr);
            return;
        }
        case NICFW_F_CONN_ACCEPT:
        case NICFW_F_CONN_REJECT:
        case NICFW_F_CONN_NOMATCH: {
            bool ours = vi && vi->op == ConnOp::kClient && vi->req_id == h.seq && vi->peer == f.peer &&
                        vi->state.load(std::memory_order_relaxed) == NICFW_VI_CONNECT_PENDING;
            if (!ours) {
                // A repeated ACCEPT (our request went twice) for the connection we have.
                if (vi && vi->peer == f.peer && vi->remote_vi == h.src_vi && vi->req_id == h.seq &&
                    vi->state.load(std::memory_order_relaxed) == NICFW_VI_CONNECTED)
                    return;
                // An answer to a request we gave up on: void the server's side.
                if (h.type == NICFW_F_CONN_ACCEPT)
                    send_control(f.peer, NICFW_F_DISCONNECT, h.src_vi, h.dst_vi, 0, nullptr);
                return;
            }
            if (h.type == NICFW_F_CONN_ACCEPT && pl.reliability != vi->attrs.reliability) {
                // A server VI of another level: our accept() refuses that, and so must a
                // client whatever the server did (VIA: both ends have one level).
                send_control(f.peer, NICFW_F_DISCONNECT, h.src_vi, h.dst_vi, 0, nullptr);
                connect_done(*vi, NICFW_VI_IDLE, NICFW_R_RELIABILITY);
                return;
            }
            if (h.type == NICFW_F_CONN_ACCEPT) {
                vi->remote_vi = h.src_vi;
                vi->remote = attrs_of(pl);
                vi->st->remote_vi = h.src_vi;
                connect_done(*vi, NICFW_VI_CONNECTED, NICFW_R_OK);
            } else {
                connect_done(*vi, NICFW_VI_IDLE, h.type == NICFW_F_CONN_REJECT ? NICFW_R_REJECTED : NICFW_R_NO_MATCH);
            }
            return;
        }
        case NICFW_F_PEER_REQ: {
            for (Vi* c : connecting_) {
                if (c->op != ConnOp::kPeer || c->peer != f.peer ||
                    c->state.load(std::memory_order_relaxed) != NICFW_VI_CONNECT_PENDING)
                    continue;
                if (c->local_disc.size() != pl.dst_disc_len || c->remote_disc.size() != pl.src_disc_len ||
                    memcmp(c->local_disc.data(), dst_disc, pl.dst_disc_len) ||
                    memcmp(c->remote_disc.data(), src_disc, pl.src_disc_len))
                    continue;
                if (pl.reliability != c->attrs.reliability) {
                    connect_done(*c, NICFW_VI_IDLE, NICFW_R_RELIABILITY);
                    return;
                }
                c->remote_vi = h.src_vi;
                c->remote = attrs_of(pl);
                c->st->remote_vi = h.src_vi;
                connect_done(*c, NICFW_VI_CONNECTED, NICFW_R_OK);
                nicfw_conn_payload ack = attrs_payload(c->attrs);
                send_control(f.peer, NICFW_F_PEER_ACK, h.src_vi, c->id, h.seq, &ack);
                return;
            }
            // Already connected to that VI (our ACK crossed its resend): answer again.
            for (auto& v : vis_) {
                if (v && v->peer == f.peer && v->remote_vi == h.src_vi &&
                    v->state.load(std::memory_order_relaxed) == NICFW_VI_CONNECTED) {
                    nicfw_conn_payload ack = attrs_payload(v->attrs);
                    send_control(f.peer, NICFW_F_PEER_ACK, h.src_vi, v->id, h.seq, &ack);
                    return;
                }
            }
            return;  // nobody asked yet: the sender keeps resending
        }
        case NICFW_F_PEER_ACK: {
            if (!vi || vi->op != ConnOp::kPeer || vi->peer != f.peer ||
                vi->state.load(std::memory_order_relaxed) != NICFW_VI_CONNECT_PENDING)
                return;  // duplicate or stale
            if (pl.reliability != vi->attrs.reliability) {
                connect_done(*vi, NICFW_VI_IDLE, NICFW_R_RELIABILITY);
                return;
            }
            vi->remote_vi = h.src_vi;
            vi->remote = attrs_of(pl);
            vi->st->remote_vi = h.src_vi;
            connect_done(*vi, NICFW_VI_CONNECTED, NICFW_R_OK);
            return;
        }
        case NICFW_F_DISCONNECT: {
            if (!vi || vi->peer != f.peer || vi->remote_vi != h.src_vi) return;
            if (vi->state.load(std::memory_order_relaxed) == NICFW_VI_CONNECTED)
                flush_vi(*vi, NICFW_VI_ERROR, false, NICFW_AE_CONN_LOST);
            return;
        }
        default:
            bump(status_->nic.drops);
            return;
    }
}

}  // namespace softvia::nicfw
