// offload_host.cc -- the engine's side of the offload interface (nicfw/offload.h): it
// hands offload descriptors and frames to the offload that owns them, and gives offloads
// the services they build on (request sequencing, answers that complete descriptors).
#include <cerrno>
#include <cstring>

#include "nicfw/engine.h"
#include "datapath.h"

namespace softvia::nicfw {

// A send descriptor with op NICFW_DC_OP_OFFLOAD: the offload its control names checks it
// and decodes it into vi.tx_offload. 0 or the status bits it fails with.
uint32_t Engine::load_offload(Vi& vi, const WorkItem& w, const nicfw_desc_ctrl& cs) {
    vi.tx_op = NICFW_DC_OP_OFFLOAD;
    vi.tx_w = w;
    vi.tx_len = vi.tx_nsegs = vi.tx_off = vi.tx_seg = vi.tx_seg_off = 0;
    vi.tx_epoch = mem_.epoch();
    vi.tx_offload = OffloadRequest{};
    vi.tx_status_op = NICFW_DS_OP_SEND;
    uint32_t index = 0;
    const uint32_t op = NICFW_DC_OFFLOAD_OP(cs.control);
    const Offload* o = offload_for_op(op, &index);
    if (!o) return NICFW_DS_FORMAT_ERROR;  // no offload serves that operation
    vi.tx_offload_index = static_cast<uint8_t>(index);
    vi.tx_status_op = o->status_op;
    if (cs.control & NICFW_DC_RESERVED & ~(NICFW_DC_OFFLOAD_MASK | NICFW_DC_REPLY)) return NICFW_DS_FORMAT_ERROR;
    vi.tx_offload.op = op;
    const uint32_t bad = o->load(*this, vi, w, cs, &vi.tx_offload);
    vi.tx_len = vi.tx_offload.result.len;
    return bad;
}

// Frame types above the core's: the offload that registered the type handles it.
void Engine::on_offload_frame(const RxFrame& f, const nicfw_frame_hdr& h) {
    const OffloadFrameOp* op = offload_frame_op(h.type);
    if (h.version != NICFW_ABI_VERSION || !op || f.len < op->min_len) {
        bump(status_->nic.drops);
        return;
    }
    op->handle(*this, f, h);
}

Vi* Engine::frame_target(const RxFrame& f, const nicfw_frame_hdr& h) { return connected_target(*this, f, h); }

bool Engine::take_request(Vi& vi, const nicfw_frame_hdr& h, bool* repeat) {
    *repeat = false;
    if (static_cast<int32_t>(h.seq - vi.rx_seq) < 0) {
        bump(status_->nic.drops);
        *repeat = vi.rel_proto;  // only retransmission repeats a request
        return false;
    }
    if (h.seq != vi.rx_seq || (vi.rel_proto && vi.rx_busy)) {
        if (vi.rel_proto)
            out_of_order(vi, h);
        else
            flush_vi(vi, NICFW_VI_ERROR, true, NICFW_AE_CONN_LOST);  // a loss on a lossless wire
        return false;
    }
    vi.rx_seq = h.seq + 1;
    vi.rx_gap_frames = 0;
    return true;
}

bool Engine::answer_offload(Vi& vi, uint32_t seq, const void* data, uint32_t len) {
    TxEntry* e = pending_entry(vi, seq);
    if (!e || e->kind != TxEntry::kOffload || e->done || e->segs.empty() || len != e->segs[0].len) {
        bump(status_->nic.drops);
        return false;
    }
    bump(vi.st->c.rx_frames);
    bump(vi.st->c.rx_bytes, len);
    // The result buffer was checked at post; if the memory table changed since, again.
    const Seg& r = e->segs[0];
    const bool placed = (e->epoch == mem_.epoch() || recheck_segs(vi, &r, 1) == 0) &&
                        (len == 0 || hostmem::copy(r.ptr, data, len) == 0);
    e->done = true;
    vi.reads_out--;
    if (!placed) [[unlikely]] {
        // The result buffer went away under the request: it fails, and the VI breaks.
        e->status = NICFW_DS_PROTECTION_ERROR;
        retire(vi);
        flush_vi(vi, NICFW_VI_ERROR, true, NICFW_AE_POST_DESC);
        return true;
    }
    e->len = len;
    retire(vi);
    if (vi.rel_proto) {
        tx_progress(vi, rtx_clock());
        // The target answers in sequence order: an earlier request still waiting for its
        // answer lost it (or its request) on the way. Go back now, not at the timeout
        // (on_gap goes back at most once per RTO for the same request; a repeated atomic
        // is answered from the target's record).
        for (TxEntry& p : vi.pending) {
            if (static_cast<int32_t>(p.seq - seq) >= 0) break;
            if (p.answered() && !p.done) {
                on_gap(vi, p.seq);
                break;
            }
        }
    }
    return true;
}

int Engine::set_mem_atomics(uint64_t va, uint32_t memh, bool enable) {
    CtlGuard g(lock_, ctl_waiters_);
    Region* r = mem_.find(memh);
    if (!r || r->base.load(std::memory_order_relaxed) != va) return -EINVAL;
    // Atomics write: the memory must be writable, as for RDMA write.
    if (enable && !r->atomics) {
        if (int rc = hostmem::check_access(va, r->len.load(std::memory_order_relaxed), true, nullptr)) return rc;
    }
    r->atomics = enable;
    if (!enable) offload_memory_changed(memh);
    return 0;
}

// A loaded offload request with nothing posted before it outstanding: the offload may
// serve it here (a same-host shortcut). True if it did; the descriptor has completed.
bool Engine::offload_shortcut(Vi& vi, const WorkItem& w) {
    const Offload* o = offload_at(vi.tx_offload_index);
    uint64_t answer[2];
    const Seg& r = vi.tx_offload.result;
    if (!o->shortcut || r.len > sizeof answer || !o->shortcut(*this, vi, vi.tx_offload, answer)) return false;
    if (r.len && hostmem::copy(r.ptr, answer, r.len) != 0) {
        // The result buffer was checked a moment ago; the program unmapped it since.
        fail_request(vi, w, NICFW_DS_PROTECTION_ERROR, NICFW_DC_OP_OFFLOAD);
        return true;
    }
    vi.sq.pop();
    complete(vi, false, w, vi.tx_status_op, r.len);
    return true;
}

bool Engine::offload_now(Vi* vi, const OffloadRequest& req, uint64_t answer[2]) {
    const Offload* o = offload_for_op(req.op);
    if (!o || !o->shortcut) return false;
    auto serve = [&] {
        service_doorbells();  // posts that went through the ring count as posted before it
        return vi->state.load(std::memory_order_relaxed) == NICFW_VI_CONNECTED && vi->sq.empty() &&
               vi->pending.empty() && !vi->tx_busy && o->shortcut(*this, *vi, req, answer);
    };
    bool served;
    if (cfg_.progress == Progress::kThread) {
        CtlGuard g(lock_, ctl_waiters_);  // the firmware thread lets go between steps
        served = serve();
    } else {
        lock_.lock();
        served = serve();
        lock_.unlock();
    }
    deliver_pending_errors();  // the doorbells taken may have flushed something
    return served;
}

void Engine::offload_memory_changed(uint32_t memh) {
    for (uint32_t i = 0; const Offload* o = offload_at(i); i++)
        if (o->memory_changed) o->memory_changed(*this, memh);
}

}  // namespace softvia::nicfw
