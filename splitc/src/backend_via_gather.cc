// backend_via_gather.cc -- gathering (docs/splitc.md, "Gathering"): stores, split-phase
// puts and gets of up to 8 bytes to one process travel together in one K_GATHER message,
// and the owner answers the puts and gets of one such message with one K_GATHER_R. Over
// a wire where a frame costs a system call (udp) a stream's cost is its frames, not its
// bytes: a put or get stream then costs two frames per message instead of per operation.
// Stores, which need no reply and leave nothing at the sender, gather apart on the
// medium channel, in messages 16 times as large.
//
// A K_GATHER is one request of the protocol: it takes one credit (via-rel) or one window
// place and one number (via-unrel), is processed once and in order, and gets at most one
// reply, so every guarantee of the two back ends holds for it as for any request. The
// requester keeps one FIFO entry per put and get in it; the reply completes them in
// order. An entry the owner refuses stops the handling there: the refusal carries that
// entry's address, length and call (K_ENTRY_REFUSED), and the requester stops the job.
#include "backend_via.h"

#include <cstdio>

namespace splitc {
namespace via {

namespace {

// Sends what is gathered for c.
void send_batch(Chan* c) {
    Slot* s = c->batch;
    const uint16_t n = uint16_t(c->batch_n);
    const size_t body = c->batch_len;
    c->batch = nullptr;
    c->batch_n = 0;
    c->batch_len = 0;
    memcpy(s->buf + offsetof(Hdr, n), &n, sizeof n);
    V.ctr.gather_msgs++;
    end_request(Out{c, s, s->buf + sizeof(Hdr)}, body);
}

void unlist(Chan* c) {
    for (size_t i = 0; i < V.batches.size(); i++)
        if (V.batches[i] == c) {
            V.batches[i] = V.batches.back();
            V.batches.pop_back();
            return;
        }
}

}  // namespace

void flush_batches() {
    std::vector<Chan*> now;
    now.swap(V.batches);  // take them out first: nothing sent from here may see them listed
    for (Chan* c : now) send_batch(c);
    if (V.batches.empty()) {
        now.clear();
        V.batches.swap(now);
    }
}

void gather(Peer* p, GatherOp op, uint64_t addr, const void* src, void* dst, size_t n, Wait w, uint8_t call) {
    Chan* c = &p->ch[op == G_STORE ? C_MED : C_SHORT];
    if (!c->batch) {
        Out o = begin_request(c, K_GATHER, kInternal, 0);  // may poll: that sends other batches
        c->batch = o.s;
        V.batches.push_back(c);
    }
    char* at = c->batch->buf + sizeof(Hdr) + c->batch_len;
    store64(at, addr | uint64_t(n) << kLenShift | uint64_t(op) << kOpShift | uint64_t(call) << kCallShift);
    c->batch_len += 8;
    if (op != G_GET) {
        memcpy(at + 8, src, n);
        c->batch_len += uint32_t(n);
    }
    if (op != G_STORE) {
        counter(w)++;
        push_pend(c, Pend{dst, addr, uint32_t(n), call, op == G_GET ? PendOp::kGet : PendOp::kPut, w});
    }
    c->batch_n++;
    V.ctr.gathered++;
    if (kGatherCap[c->idx] - c->batch_len >= kMaxEntry) return;
    // Full: this one goes now; the others stay (round-robin operations to many processes
    // gather for each of them).
    unlist(c);
    send_batch(c);
}

int owner_gather(Chan* c, const Hdr& h, const char* body, size_t blen, uint32_t len) {
    const bool stores_only = c->idx == C_MED;  // puts and gets travel on the short channel
    if (h.n == 0 || h.n > (stores_only ? kMaxStoreEntries : kMaxEntries)) malformed(c, h, len);
    char vals[kGatherCap[C_SHORT]];  // the gets' values, for the reply (a get's word is 8 bytes of the request)
    size_t nv = 0, off = 0;
    int answered = 0;  // puts and gets
    for (int i = 0; i < h.n; i++) {
        if (off + 8 > blen) malformed(c, h, len);
        const uint64_t word = load64(body + off);
        off += 8;
        const uint64_t a = word & kAddrMask;
        const size_t n = (word >> kLenShift) & 0xf;
        const unsigned op = (word >> kOpShift) & 0xf;
        if (n == 0 || n > kMaxShortValue || op > G_GET || (stores_only && op != G_STORE) ||
            (op != G_GET && off + n > blen))
            malformed(c, h, len);
        if (!is_global(a, n)) {
            // The requester stops: the rest does not matter.
            refuse(c, Hdr{K_GATHER, static_cast<uint8_t>(word >> kCallShift), uint16_t(n)}, a);
            return kWasRequest | kReplied;
        }
        if (op == G_GET) {
            memcpy(vals + nv, reinterpret_cast<const void*>(a), n);
            nv += n;
        } else {
            memcpy(reinterpret_cast<void*>(a), body + off, n);
            off += n;
            if (op == G_STORE) landed_store(n);
        }
        answered += op != G_STORE;
    }
    if (!answered) {  // stores only: reply-free
        reply_free(c);
        return kWasRequest;
    }
    Out o = begin_reply(c, K_GATHER_R, uint16_t(answered));
    memcpy(o.body, vals, nv);
    end_reply(o, nv);
    return kWasRequest | kReplied;
}

void requester_gather_reply(Chan* c, const Hdr& h, const char* body, size_t blen, uint32_t len) {
    if (h.n == 0 || h.n > c->p_tail - c->p_head) malformed(c, h, len);
    size_t off = 0;
    for (int i = 0; i < h.n; i++) {
        Pend& e = c->pend[c->p_head & pend_mask(c)];
        if (e.op == PendOp::kGet) {
            if (off + e.n > blen) malformed(c, h, len);
            memcpy(e.dst, body + off, e.n);
            off += e.n;
        } else if (e.op != PendOp::kPut) {
            malformed(c, h, len);
        }
        counter(e.w)--;
        c->p_head++;
    }
}

}  // namespace via
}  // namespace splitc
