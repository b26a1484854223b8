// backend_via_rdma.cc -- via-rel's zero-copy bulk transfers (the paper's "0-copy bulk
// gets, puts and stores"): bulk_get is an RDMA read, bulk_put an RDMA write, bulk_store
// an RDMA write with immediate data (which consumes a receive at the owner, so it takes a
// credit like any request, and tells the owner how many bytes landed).
//
// Both ends must be registered with the NIC: at start-up the runtime's symmetric memory
// (the data segment's writable part and the heap, at the same addresses everywhere, so
// the caller can tell whether a remote range is inside; every process announces its
// handles), and, on this side only, memory the program made global. Anything else goes
// in medium messages (backend_via.cc). SPLITC_RDMA_MIN sets the size from which RDMA is
// used (docs/splitc.md says why its default is what it is).
//
// Completions come on the medium VI's send queue in post order, with its messages
// (reap); a transfer counts as complete when its descriptor does: an RDMA write on a
// reliable VI completes once the target has placed the data and acknowledged it.
#include <link.h>

#include <algorithm>
#include <cstdio>

#include "backend_via.h"

namespace splitc {
namespace via {
namespace {

constexpr size_t kChunk = 1u << 20;  // bytes per RDMA descriptor

bool inside(const Range& r, uint64_t a, size_t n) { return a >= r.lo && n <= r.hi - r.lo && a - r.lo <= r.hi - r.lo - n; }

bool register_range(Range r, bool rdma, VIP_MEM_HANDLE* mh) {
    const VIP_BOOLEAN on = rdma ? VIP_TRUE : VIP_FALSE;
    VIP_MEM_ATTRIBUTES ma{V.ptag, on, on};
    return VipRegisterMem(V.nic, reinterpret_cast<void*>(r.lo), r.hi - r.lo, &ma, mh) == VIP_SUCCESS;
}

RdmaOp* take_op(Peer* p, bool wait) {
    Chan* c = &p->ch[C_MED];
    RdmaOp* op = &p->rdma[p->r_next];
    if (op->busy) reap(c, false);
    if (op->busy && !wait) return nullptr;
    while (op->busy) reap(c, true);  // in post order: this waits for the oldest
    if (++p->r_next == p->rdma.size()) p->r_next = 0;
    return op;
}

void post_op(Peer* p, RdmaOp* op, Wait w, bool counts) {
    Chan* c = &p->ch[C_MED];
    op->w = w;
    op->counts = counts;
    if (counts) counter(w)++;
    if (VipPostSend(c->vi, op->d, p->mh) != VIP_SUCCESS) peer_failed(p, "posting an RDMA transfer failed");
    op->busy = true;
    uint32_t tail = c->sq_head + c->sq_n;
    if (tail >= c->sq.size()) tail -= uint32_t(c->sq.size());
    c->sq[tail] = op->d;
    c->sq_n++;
    if (p->rdma_out++ == 0) V.rdma_peers.push_back(p);
}

void fill(VIP_DESCRIPTOR* d, uint16_t control, uint64_t raddr, uint32_t rmh, const void* local, VIP_MEM_HANDLE lmh,
          size_t n) {
    memset(d, 0, kDescBytes);
    d->CS.Control = control;
    d->CS.SegCount = 2;
    d->DS[0].Remote.Data.AddressBits = raddr;
    d->DS[0].Remote.Handle = rmh;
    d->DS[1].Local.Data.Address = const_cast<void*>(local);
    d->DS[1].Local.Handle = lmh;
    d->DS[1].Local.Length = static_cast<VIP_UINT32>(n);
}

}  // namespace

bool rdma_setup() {
    // The data segment (without its read-only RELRO part: memory.cc).
    const Range d = data_segment();
    V.pad = static_cast<char*>(aligned_alloc(64, 64));
    VIP_MEM_ATTRIBUTES ma{V.ptag, VIP_TRUE, VIP_FALSE};
    if (!V.pad || VipRegisterMem(V.nic, V.pad, 64, &ma, &V.pad_mh) != VIP_SUCCESS) {
        fprintf(stderr, "splitc: via-rel back end: cannot register the liveness pad; no RDMA\n");
        return false;
    }
    const Range h = heap_range();
    if (d.hi > d.lo && register_range(d, true, &V.data_mh)) {
        V.data_rw = d;
        V.local_regions.push_back(d);
        V.local_mh.push_back(V.data_mh);
    }
    if (!register_range(h, true, &V.heap_mh)) {
        fprintf(stderr, "splitc: via-rel back end: cannot register the heap for RDMA: bulk transfers go in messages\n");
        return true;
    }
    V.local_regions.push_back(h);
    V.local_mh.push_back(V.heap_mh);
    g_global_range_hook = made_global;
    return true;
}

// Memory made global on this side is usable as the local end of a transfer (the remote
// end must be symmetric memory: only its handles are known everywhere).
void made_global(uint64_t lo, uint64_t hi, bool add) {
    if (add) {
        VIP_MEM_HANDLE mh;
        if (register_range(Range{lo, hi}, false, &mh)) {
            V.local_regions.push_back(Range{lo, hi});
            V.local_mh.push_back(mh);
        }
        return;
    }
    for (size_t i = V.local_regions.size(); i-- > 0;)
        if (V.local_regions[i].lo == lo && V.local_mh[i] != V.data_mh && V.local_mh[i] != V.heap_mh) {
            VipDeregisterMem(V.nic, reinterpret_cast<void*>(lo), V.local_mh[i]);
            V.local_regions.erase(V.local_regions.begin() + long(i));
            V.local_mh.erase(V.local_mh.begin() + long(i));
            return;
        }
}

bool rdma_local(const void* p, size_t n, VIP_MEM_HANDLE* mh) {
    const uint64_t a = reinterpret_cast<uint64_t>(p);
    for (size_t i = 0; i < V.local_regions.size(); i++)
        if (inside(V.local_regions[i], a, n)) {
            *mh = V.local_mh[i];
            return true;
        }
    return false;
}

bool rdma_remote(int proc, uint64_t addr, size_t n, uint32_t* mh) {
    const Remote& r = V.remote[size_t(proc)];
    if (r.data_mh && inside(V.data_rw, addr, n) && in_global_data(addr, n)) *mh = r.data_mh;
    else if (r.heap_mh && V.heap_mh && inside(heap_range(), addr, n)) *mh = r.heap_mh;
    else return false;
    return true;
}

void rdma_get(Peer* p, void* dst, VIP_MEM_HANDLE lmh, uint64_t addr, uint32_t rmh, size_t n, Wait w) {
    for (size_t off = 0; off < n; off += kChunk) {
        const size_t piece = std::min(kChunk, n - off);
        RdmaOp* op = take_op(p, true);
        fill(op->d, VIP_CONTROL_OP_RDMAREAD, addr + off, rmh, static_cast<char*>(dst) + off, lmh, piece);
        post_op(p, op, w, true);
    }
}

void rdma_put(Peer* p, uint64_t addr, uint32_t rmh, const void* src, VIP_MEM_HANDLE lmh, size_t n, Wait w) {
    for (size_t off = 0; off < n; off += kChunk) {
        const size_t piece = std::min(kChunk, n - off);
        RdmaOp* op = take_op(p, true);
        fill(op->d, VIP_CONTROL_OP_RDMAWRITE, addr + off, rmh, static_cast<const char*>(src) + off, lmh, piece);
        post_op(p, op, w, true);
    }
}

// A store: the owner's receive of the immediate data counts the bytes (landed_store) and
// owes the credit back. The sender counts the write in sync()'s counter, so that sync()
// (and barrier, all_store_sync) return only once the source has been read.
void rdma_store(Peer* p, uint64_t addr, uint32_t rmh, const void* src, VIP_MEM_HANDLE lmh, size_t n, uint8_t) {
    Chan* c = &p->ch[C_MED];
    for (size_t off = 0; off < n; off += kChunk) {
        const size_t piece = std::min(kChunk, n - off);
        while (c->credits == 0) {
            if (p->gone) fatal("via-rel back end: process %d is gone", p->proc);
            poll_once();
        }
        // Like every request (rel_request_slot): receives handed back by the last poll are
        // posted again first, so the owner's credit message always finds one (the 2k+1).
        if (!V.reposts.empty()) flush_reposts();
        RdmaOp* op = take_op(p, true);
        fill(op->d, VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, addr + off, rmh,
             static_cast<const char*>(src) + off, lmh, piece);
        c->credits--;
        post_op(p, op, Wait::kSync, true);
    }
}

bool rdma_done(Chan* c, VIP_DESCRIPTOR* d) {
    Peer* p = c->peer;
    const char* at = reinterpret_cast<const char*>(d);
    if (!p->rdesc_lo || at < p->rdesc_lo || at >= p->rdesc_lo + p->rdma.size() * kDescBytes) return false;
    RdmaOp& op = p->rdma[size_t(at - p->rdesc_lo) / kDescBytes];
    op.busy = false;
    p->rdma_out--;
    V.ctr.rdma_ops++;
    if (op.counts) counter(op.w)--;
    return true;
}

void rdma_reap_all() {
    for (size_t i = 0; i < V.rdma_peers.size();) {
        Peer* p = V.rdma_peers[i];
        reap(&p->ch[C_MED], false);
        if (p->rdma_out == 0) {
            V.rdma_peers[i] = V.rdma_peers.back();
            V.rdma_peers.pop_back();
        } else {
            i++;
        }
    }
}

// Liveness (backend_via.cc): a 0-byte RDMA write to the peer's pad, which its NIC must
// acknowledge; a dead peer's VI then breaks after the retry timeout, also on a wire that
// cannot tell that a process died (dpdk).
void rel_probe(Peer* p) {
    const Remote& r = V.remote[size_t(p->proc)];
    if (!r.pad_mh) return;
    RdmaOp* op = take_op(p, false);
    if (!op) return;
    memset(op->d, 0, kDescBytes);
    op->d->CS.Control = VIP_CONTROL_OP_RDMAWRITE;
    op->d->CS.SegCount = 1;
    op->d->DS[0].Remote.Data.AddressBits = r.pad_addr;
    op->d->DS[0].Remote.Handle = r.pad_mh;
    post_op(p, op, Wait::kSync, false);
}

}  // namespace via
}  // namespace splitc
