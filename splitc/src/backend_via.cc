// backend_via.cc -- the two VIA back ends' common part (backend_via.h): the operations,
// the poll routine with its handler switch, and the barrier. What differs between
// via-rel and via-unrel is how a message gets a send slot and what its header carries
// (backend_via_rel.cc, backend_via_unrel.cc); the handlers are the same.
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "backend_via.h"

namespace splitc {
namespace via {

// Never destroyed: a process that calls exit() in the middle of the job (the program may)
// keeps its peers reachable for the leak check that runs after static destructors.
Via& V = *new Via;

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

namespace {

constexpr unsigned kQuietPolls = 16;     // polls that found nothing: the stream has stopped
constexpr unsigned kPeriodicPolls = 64;  // timers and liveness every this many polls
constexpr uint64_t kProbeQuietNs = 250000000ull;  // a peer we wait on, silent this long: probe it

}  // namespace

[[noreturn]] void malformed(Chan* c, const Hdr& h, uint32_t len) {
    fatal("via back end: malformed message from process %d (handler %u, %u bytes)", c->peer->proc, h.kind, len);
}

// The owner refuses a request whose memory is not global here; the requester stops. A
// store, or an entry of a K_GATHER (h is then the entry's), has no FIFO entry to name the
// call: its refusal carries address, length and call.
void refuse(Chan* c, const Hdr& h, uint64_t addr) {
    if (h.kind == K_STORE || h.kind == K_GATHER) {
        Out o = begin_reply(c, K_ENTRY_REFUSED, h.n);
        store64(o.body, addr);
        o.body[8] = static_cast<char>(h.x);  // the call
        end_reply(o, 9);
    } else {
        Out o = begin_reply(c, K_REFUSED, 0);
        end_reply(o, 0);
    }
}

// A request that gets no reply: via-rel owes its credit (given back in batches), via-unrel
// counts it for the no-op acknowledgement.
void reply_free(Chan* c) {
    if (V.reliable) rel_owe_credit(c);
}

// Runs the handler of one message (the switch of the paper's merged library) and gives
// its receive buffer back. Returns kWasRequest / kReplied for via-unrel's bookkeeping.
int deliver(Chan* c, uint32_t len, int slot) {
    char* buf = recv_buf(c, slot);
    Hdr h;
    memcpy(&h, buf, sizeof h);
    const char* body = buf + sizeof(Hdr);
    if (len < sizeof(Hdr)) malformed(c, h, len);
    const size_t blen = len - sizeof(Hdr);
    const size_t max_n = c->idx == C_SHORT ? kMaxShortValue : kMedPayload;
    Peer* p = c->peer;
    int rc = 0;
    switch (h.kind) {
        // ---- requests: the owner's side. Every one checks its memory before touching it.
        case K_GET: {
            rc = kWasRequest | kReplied;
            if (blen < 8 || h.n > max_n) malformed(c, h, len);
            const uint64_t a = load64(body);
            if (!is_global(a, h.n)) {
                refuse(c, h, a);
                break;
            }
            Out o = begin_reply(c, K_GET_R, h.n);
            memcpy(o.body, reinterpret_cast<const void*>(a), h.n);
            end_reply(o, h.n);
            break;
        }
        case K_PUT:
        case K_STORE: {
            rc = kWasRequest;
            if (blen < 8 + size_t(h.n) || h.n > max_n) malformed(c, h, len);
            const uint64_t a = load64(body);
            if (!is_global(a, h.n)) {
                refuse(c, h, a);
                rc |= kReplied;
                break;
            }
            memcpy(reinterpret_cast<void*>(a), body + 8, h.n);
            if (h.kind == K_STORE) {
                landed_store(h.n);
                reply_free(c);
            } else {
                Out o = begin_reply(c, K_PUT_R, 0);
                end_reply(o, 0);
                rc |= kReplied;
            }
            break;
        }
        case K_ATOMIC: {
            rc = kWasRequest | kReplied;
            if (blen < sizeof(AtomicBody) || h.n > uint16_t(AtomicKind::kCswap)) malformed(c, h, len);
            AtomicBody b;
            memcpy(&b, body, sizeof b);
            const AtomicReq r{static_cast<AtomicKind>(h.n), b.addr, b.a, b.b, b.fn};
            if (!atomic_ok(r)) {
                refuse(c, h, b.addr);
                break;
            }
            const int64_t res = run_atomic(r);
            Out o = begin_reply(c, K_ATOMIC_R, 0);
            store64(o.body, static_cast<uint64_t>(res));
            end_reply(o, 8);
            break;
        }
        case K_BAR_UP:
            rc = kWasRequest;
            V.bar_up[h.n & 1]++;
            reply_free(c);
            break;
        case K_BAR_DOWN:
            rc = kWasRequest;
            V.bar_released = h.n;
            reply_free(c);
            break;
        case K_EXIT:
            end_process(h.n);
        case K_GATHER:
            rc = owner_gather(c, h, body, blen, len);
            break;
        case K_PING:
            rc = kWasRequest;
            reply_free(c);
            if (!V.reliable) c->ack_now = true;  // unrel_receive lists it
            break;
        // ---- replies: the requester's side, matched to the FIFO in order.
        case K_GET_R: {
            Pend& e = front_pend(c, h.kind);
            if (e.op != PendOp::kGet || h.n != e.n || blen < e.n) malformed(c, h, len);
            memcpy(e.dst, body, e.n);
            counter(e.w)--;
            c->p_head++;
            break;
        }
        case K_PUT_R: {
            Pend& e = front_pend(c, h.kind);
            if (e.op != PendOp::kPut) malformed(c, h, len);
            counter(e.w)--;
            c->p_head++;
            break;
        }
        case K_GATHER_R:
            requester_gather_reply(c, h, body, blen, len);
            break;
        case K_ATOMIC_R: {
            Pend& e = front_pend(c, h.kind);
            if (e.op != PendOp::kAtomic || blen < 8) malformed(c, h, len);
            V.atomic_result = static_cast<int64_t>(load64(body));
            counter(e.w)--;
            c->p_head++;
            break;
        }
        case K_REFUSED: {
            Pend& e = front_pend(c, h.kind);
            bad_gptr(e.call, p->proc, e.addr, e.n,
                     e.op == PendOp::kAtomic ? "not global memory of that process (or, for atomic_call, a function "
                                               "outside the program)"
                                             : "not global memory of that process");
        }
        case K_ENTRY_REFUSED:
            if (blen < 9) malformed(c, h, len);
            bad_gptr(static_cast<uint8_t>(body[8]), p->proc, load64(body), h.n, "not global memory of that process");
        case K_CREDIT:
        case K_ACK:
            break;
        default:
            malformed(c, h, len);
    }
    // A request's buffer goes back at once (the +1 of 2k+1 covers the moment between its
    // reply and this); a reply's at the next call (flush_reposts), so that a requester
    // that has just seen its reply returns at once.
    if (rc & kWasRequest) {
        if (post_recv(c, slot) != VIP_SUCCESS) peer_failed(p, "reposting a receive failed");
    } else {
        V.reposts.emplace_back(c, slot);
    }
    return rc;
}

void flush_reposts() {
    for (auto& r : V.reposts)
        if (!r.first->peer->gone && post_recv(r.first, r.second) != VIP_SUCCESS)
            peer_failed(r.first->peer, "reposting a receive failed");
    V.reposts.clear();
}

namespace {

// A receive completed with an error: the connection is gone (the peer exited, closed its
// NIC, or the VI broke).
void connection_broke(Chan* c, VIP_DESCRIPTOR* d) {
    Peer* p = c->peer;
    if (V.ending) {
        p->gone = true;
        return;
    }
    char what[96];
    snprintf(what, sizeof what, "the connection broke (receive status %#x)", d->CS.Status);
    peer_failed(p, what);
}

void receive(Chan* c, VIP_DESCRIPTOR* d) {
    const uint32_t status = d->CS.Status;
    if (status & VIP_STATUS_ERROR_MASK) return connection_broke(c, d);
    c->peer->rx++;
    V.ctr.received++;
    const int slot = recv_index(c, d);
    if ((status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_REMOTE_RDMA_WRITE) {  // via-rel: a zero-copy bulk_store landed
        landed_store(d->CS.Length);
        rel_owe_credit(c);
        if (post_recv(c, slot) != VIP_SUCCESS) peer_failed(c->peer, "reposting a receive failed");
        return;
    }
    if (V.reliable) {
        const uint8_t kind = static_cast<uint8_t>(recv_buf(c, slot)[0]);
        if (!is_request(kind)) rel_got_credits(c, static_cast<uint8_t>(recv_buf(c, slot)[1]));
        deliver(c, d->CS.Length, slot);
        return;
    }
    unrel_receive(c, d, slot);
}

// Liveness: a peer we are waiting on (a reply, an RDMA transfer, the barrier) that has
// sent nothing for kProbeQuietNs is asked whether it is there. On via-rel the probe is a
// 0-byte RDMA write that its NIC must acknowledge (else the VI breaks after its retry
// timeout); on via-unrel a PING that it must acknowledge (else the peer timeout).
void liveness(uint64_t now) {
    for (Peer* p : V.peers) {
        if (!p || p->gone) continue;
        const bool waiting = p->awaited || p->rdma_out || p->ch[0].p_head != p->ch[0].p_tail ||
                             p->ch[1].p_head != p->ch[1].p_tail;
        if (!waiting || p->rx != p->rx_seen || p->quiet_ns == 0) {
            p->rx_seen = p->rx;
            p->quiet_ns = now;
        } else if (now - p->quiet_ns >= kProbeQuietNs) {
            p->quiet_ns = now;
            V.ctr.probes++;
            if (V.reliable) rel_probe(p);
            else unrel_ping(p);
        }
    }
}

int poll_count() {
    if (!V.batches.empty()) flush_batches();
    if (!V.reposts.empty()) flush_reposts();
    int n = 0;
    VIP_VI_HANDLE vi;
    VIP_BOOLEAN rq;
    for (; n < 64; n++) {
        // The first look steps the NIC (inline progress); the rest take what it brought.
        VIP_RETURN r = n == 0 ? VipCQDone(V.cq, &vi, &rq) : VipExtCQTake(V.cq, &vi, &rq);
        if (r == VIP_NOT_DONE) break;
        if (r != VIP_SUCCESS) fatal("via back end: polling the completion queue: %s", VipExtReturnString(r));
        Chan* c = chan_of(vi);
        VIP_DESCRIPTOR* d;
        if (!c || VipRecvDone(vi, &d) != VIP_SUCCESS) continue;
        receive(c, d);
    }
    if (!V.reliable && !V.ack_list.empty()) unrel_send_acks();
    if (!V.rdma_peers.empty()) rdma_reap_all();
    if (n) {
        V.quiet_polls = 0;
    } else if (++V.quiet_polls >= kQuietPolls) {
        if (V.reliable) rel_flush_owed();
        else unrel_idle_acks();
    }
    if (++V.polls % kPeriodicPolls == 0) {
        const uint64_t now = now_ns();
        if (!V.reliable) unrel_timers(now, n == 0);
        liveness(now);
    }
    return n;
}

unsigned g_idle = 0;

}  // namespace

// Handles what the last NIC step (a post steps it, inline progress) has already put in
// the completion queue, without stepping the NIC again: a sender in a stream sees a NACK
// or an acknowledgement while it is still sending, not only once its window is full.
void take_arrived() {
    VIP_VI_HANDLE vi;
    VIP_BOOLEAN rq;
    for (int n = 0; n < 64 && VipExtCQTake(V.cq, &vi, &rq) == VIP_SUCCESS; n++) {
        Chan* c = chan_of(vi);
        VIP_DESCRIPTOR* d;
        if (c && VipRecvDone(vi, &d) == VIP_SUCCESS) receive(c, d);
    }
    if (!V.reliable && !V.ack_list.empty()) unrel_send_acks();
}

void poll_once() {
    // Waiting loops give the core away only after 256 polls in a row found nothing: a
    // process handling a stream never yields; one waiting for a process that shares its
    // core lets it run.
    if (poll_count()) g_idle = 0;
    else if ((++g_idle & 255) == 0) sched_yield();
}

namespace {

// Every operation that is not gathered sends what is gathered first, so that it waits at
// most until the program's next call into the back end, and stays in order with it.
inline void before_op() {
    if (!V.batches.empty()) flush_batches();
}

class ViaBackend final : public Backend {
public:
    explicit ViaBackend(bool reliable) : reliable_(reliable) {}
    const char* name() const override { return reliable_ ? "via-rel" : "via-unrel"; }

    bool start() override {
        V.reliable = reliable_;
        return setup();
    }

    void stop() override { teardown_wait(); }

    void get(void* dst, int proc, uint64_t addr, size_t n, Wait w, uint8_t call) override {
        if (n == 0) return;
        Peer* p = V.peers[size_t(proc)];
        if (n <= kMaxShortValue && w == Wait::kSync && V.gather) return gather(p, G_GET, addr, nullptr, dst, n, w, call);
        before_op();
        if (n <= kMaxShortValue) {
            Chan* c = &p->ch[C_SHORT];
            counter(w)++;
            Out o = begin_request(c, K_GET, call, uint16_t(n));
            store64(o.body, addr);
            push_pend(c, Pend{dst, addr, uint32_t(n), call, PendOp::kGet, w});
            end_request(o, 8);
            return;
        }
        if (V.rdma_min && n >= V.rdma_min) {
            VIP_MEM_HANDLE lmh;
            uint32_t rmh;
            if (rdma_local(dst, n, &lmh) && rdma_remote(proc, addr, n, &rmh))
                return rdma_get(p, dst, lmh, addr, rmh, n, w);
        }
        Chan* c = &p->ch[C_MED];
        for (size_t off = 0; off < n; off += kMedPayload) {
            const size_t piece = std::min(kMedPayload, n - off);
            counter(w)++;
            Out o = begin_request(c, K_GET, call, uint16_t(piece));
            store64(o.body, addr + off);
            push_pend(c, Pend{static_cast<char*>(dst) + off, addr + off, uint32_t(piece), call, PendOp::kGet, w});
            end_request(o, 8);
        }
    }

    // A blocking read or write (Wait::kBlocking) is never gathered: it sends what is
    // gathered, then its own message, so that it does not wait for a gather to fill.
    void put(int proc, uint64_t addr, const void* src, size_t n, Wait w, uint8_t call) override {
        if (n && n <= kMaxShortValue && w == Wait::kSync && V.gather)
            return gather(V.peers[size_t(proc)], G_PUT, addr, src, nullptr, n, w, call);
        send_data(K_PUT, proc, addr, src, n, w, call);
    }

    void store(int proc, uint64_t addr, const void* src, size_t n, uint8_t call) override {
        if (n && n <= kMaxShortValue && V.store_batch)
            return gather(V.peers[size_t(proc)], G_STORE, addr, src, nullptr, n, Wait::kSync, call);
        send_data(K_STORE, proc, addr, src, n, Wait::kSync, call);
    }

    int64_t atomic(int proc, const AtomicReq& r, uint8_t call) override {
        before_op();
        Chan* c = &V.peers[size_t(proc)]->ch[C_SHORT];
        st.blocking++;
        Out o = begin_request(c, K_ATOMIC, call, uint16_t(r.kind));
        const AtomicBody b{r.addr, r.a, r.b, r.fn};
        memcpy(o.body, &b, sizeof b);
        push_pend(c, Pend{nullptr, r.addr, r.kind == AtomicKind::kCall ? 1u : uint32_t(sizeof(long)), call,
                          PendOp::kAtomic, Wait::kBlocking});
        end_request(o, sizeof b);
        while (st.blocking) poll_once();
        return V.atomic_result;
    }

    void poll() override { poll_once(); }

    // Two phases over a binary tree (as the am back end): arrivals go up to process 0,
    // the release comes down. Barrier messages are reply-free requests.
    void barrier() override {
        before_op();
        const int gen = ++V.bar_gen;
        const int me = MYPROC, P = PROCS;
        const int parent = (me - 1) / 2;
        const int kids = (2 * me + 1 < P) + (2 * me + 2 < P);
        for (int k = 2 * me + 1; k <= 2 * me + 2 && k < P; k++) V.peers[size_t(k)]->awaited++;
        while (V.bar_up[gen & 1] < kids) poll_once();
        V.bar_up[gen & 1] -= kids;
        for (int k = 2 * me + 1; k <= 2 * me + 2 && k < P; k++) V.peers[size_t(k)]->awaited--;
        if (me != 0) {
            Peer* up = V.peers[size_t(parent)];
            up->awaited++;
            Out o = begin_request(&up->ch[C_SHORT], K_BAR_UP, kInternal, uint16_t(gen));
            end_request(o, 0);
            while (V.bar_released != (gen & 0xffff)) poll_once();
            up->awaited--;
        }
        for (int k = 2 * me + 1; k <= 2 * me + 2 && k < P; k++) {
            Out o = begin_request(&V.peers[size_t(k)]->ch[C_SHORT], K_BAR_DOWN, kInternal, uint16_t(gen));
            end_request(o, 0);
        }
    }

    // Every other process gets K_EXIT and exits with code at once; this one waits (up to
    // 2 s) until their connections are gone, so that none of them sees this process end
    // first and stops with an error instead of code. A peer with no credit or window place
    // left (it has not polled for a while) gets its K_EXIT as soon as one comes back.
    void broadcast_exit(int code) override {
        before_op();
        V.ending = true;
        std::vector<Peer*> todo;
        for (Peer* p : V.peers)
            if (p && !p->gone) todo.push_back(p);
        const uint64_t end = now_ns() + 2000000000ull;
        for (;;) {
            for (size_t i = 0; i < todo.size();) {
                Chan* c = &todo[i]->ch[C_SHORT];
                const bool room = V.reliable ? c->credits > 0 : uint8_t(c->req.next_seq - c->req.acked) < c->k;
                if (!todo[i]->gone && !room) {
                    i++;
                    continue;
                }
                if (!todo[i]->gone) {
                    Out o = begin_request(c, K_EXIT, kInternal, uint16_t(code & 0xff));
                    end_request(o, 0);
                }
                todo[i] = todo.back();
                todo.pop_back();
            }
            bool all = todo.empty();
            for (Peer* p : V.peers) all = all && (!p || p->gone);
            if (all || now_ns() > end) break;
            poll_once();
        }
    }

private:
    // put and store: values of up to 8 bytes in a short message; bulk in medium pieces,
    // or (via-rel, large enough, registered memory at both ends) one RDMA write.
    void send_data(uint8_t kind, int proc, uint64_t addr, const void* src, size_t n, Wait w, uint8_t call) {
        if (n == 0) return;
        before_op();
        Peer* p = V.peers[size_t(proc)];
        const bool put = kind == K_PUT;
        if (n <= kMaxShortValue) {
            Chan* c = &p->ch[C_SHORT];
            if (put) counter(w)++;
            Out o = begin_request(c, kind, call, uint16_t(n));
            store64(o.body, addr);
            memcpy(o.body + 8, src, n);
            if (put) push_pend(c, Pend{nullptr, addr, uint32_t(n), call, PendOp::kPut, w});
            end_request(o, 8 + n);
            return;
        }
        if (V.rdma_min && n >= V.rdma_min) {
            VIP_MEM_HANDLE lmh;
            uint32_t rmh;
            if (rdma_local(src, n, &lmh) && rdma_remote(proc, addr, n, &rmh)) {
                if (put) rdma_put(p, addr, rmh, src, lmh, n, w);
                else rdma_store(p, addr, rmh, src, lmh, n, call);
                return;
            }
        }
        Chan* c = &p->ch[C_MED];
        for (size_t off = 0; off < n; off += kMedPayload) {
            const size_t piece = std::min(kMedPayload, n - off);
            if (put) counter(w)++;
            Out o = begin_request(c, kind, call, uint16_t(piece));
            store64(o.body, addr + off);
            memcpy(o.body + 8, static_cast<const char*>(src) + off, piece);
            if (put) push_pend(c, Pend{nullptr, addr + off, uint32_t(piece), call, PendOp::kPut, w});
            end_request(o, 8 + piece);
        }
    }

    bool reliable_;
};

}  // namespace
}  // namespace via

Backend* make_via_backend(bool reliable) {
    static via::ViaBackend rel(true), unrel(false);
    return reliable ? static_cast<Backend*>(&rel) : &unrel;
}

}  // namespace splitc
