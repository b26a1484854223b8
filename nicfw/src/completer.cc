// completer.cc -- the completer block beyond one message (completer.h has that part):
// flushing a VI (every outstanding descriptor completes, in order, with the flushed
// status) and the asynchronous errors the device reports (raised under the engine
// lock, delivered outside it to the driver's handler).
#include <cstring>

#include "nicfw/engine.h"
#include "datapath.h"

namespace softvia::nicfw {

// Moves vi to new_state and completes every outstanding descriptor with the flushed
// status (VIA: a VI in the error state, or a disconnected one, flushes its queues).
void Engine::flush_vi(Vi& vi, uint32_t new_state, bool tell_peer, nicfw_async_code why) {
    uint32_t old = vi.state.load(std::memory_order_relaxed);
    if (tell_peer && old == NICFW_VI_CONNECTED)
        send_control(vi.peer, NICFW_F_DISCONNECT, vi.remote_vi, vi.id, 0, nullptr);
    vi.state.store(new_state, std::memory_order_release);
    vi.st->state = new_state;
    vi.op = ConnOp::kNone;
    if (old == NICFW_VI_CONNECT_PENDING) vi.conn_result.store(NICFW_R_FLUSHED, std::memory_order_release);
    // In post order: the finished ones before the first unfinished one keep their status;
    // from there on everything is flushed, also a send already on the wire, since it may
    // not complete successfully after an earlier descriptor failed.
    bool cut = false;
    for (TxEntry& e : vi.pending) {
        cut |= !e.done;
        if (cut) e.status = NICFW_DS_FLUSHED;
        e.done = true;
    }
    retire(vi);
    vi.reads_out = 0;
    vi.serve.clear();
    vi.refusing = false;
    while (!vi.sq.empty()) {
        const WorkItem& w = vi.sq.front();
        complete(vi, false, w, NICFW_DS_FLUSHED | send_op_status(w.desc), 0);
        vi.sq.pop();
    }
    vi.tx_busy = false;
    vi.tx_resend = false;
    // What offloads kept for the connection (grants to a same-host peer among it) ends
    // with it.
    for (auto& o : vi.offload_state) o.reset();
    vi.rtx_next = vi.rtx_end;
    vi.rto_at = 0;  // rtx_timers drops the listing
    vi.rx_busy = false;
    vi.rx_has_desc = false;
    vi.rx_write = false;
    vi.acks_owed = 0;  // a later connection must not inherit them (flush_acks drops the listing)
    vi.ack_hold = vi.ack_dense = false;
    while (!vi.rq.empty()) {
        complete(vi, true, vi.rq.front(), NICFW_DS_FLUSHED, 0);
        vi.rq.pop();
    }
    while (!vi.rq_alt.empty()) {
        complete_on(vi, NICFW_ALTQ, vi.rq_alt.front(), NICFW_DS_FLUSHED, 0);
        vi.rq_alt.pop();
    }
    if (new_state == NICFW_VI_ERROR && old == NICFW_VI_CONNECTED)
        raise(&vi, nullptr, nullptr, NICFW_RES_VI, why);
}

// A descriptor whose data the device will not read again (NICFW_DS_SOURCE_READ).
void Engine::mark_source_read(const WorkItem& w) {
    const Region* r = mem_.find(w.memh);
    if (r && MemTable::in_range(*r, reinterpret_cast<uint64_t>(w.desc), sizeof(nicfw_desc_ctrl)))
        hostmem::store32(&w.desc->cs.status, NICFW_DS_SOURCE_READ);  // after the frames' reads (x86-64 order)
}

// ---------------------------------------------------------------- asynchronous errors
void Engine::set_error_handler(void* ctx, void (*fn)(void*, const nicfw_async_event*)) {
    CtlGuard g(lock_, ctl_waiters_);
    std::lock_guard<SpinLock> e(err_lock_);
    err_ctx_ = ctx;
    err_fn_ = fn;
}

void Engine::raise(Vi* vi, Cq* cq, nicfw_desc* d, nicfw_async_resource res, nicfw_async_code code) {
    nicfw_async_event e{};
    e.vi_context = vi ? vi->user : nullptr;
    e.cq_context = cq ? cq->user : nullptr;
    e.desc = reinterpret_cast<uint64_t>(d);
    uint16_t control = 0;
    if (d) hostmem::load(&d->cs.control, &control);  // the program may have unmapped it
    e.op = control & NICFW_DC_OP_MASK;
    e.resource = res;
    e.code = code;
    std::lock_guard<SpinLock> g(err_lock_);
    if (!err_fn_) return;  // nobody listens: the status bits and VI state still tell
    if (errors_.size() < 1024) errors_.push_back(e);
    errors_pending_.store(true, std::memory_order_relaxed);
}

void Engine::deliver_errors() {
    std::vector<nicfw_async_event> batch;
    void* ctx;
    void (*fn)(void*, const nicfw_async_event*);
    {
        std::lock_guard<SpinLock> g(err_lock_);
        batch.swap(errors_);
        errors_pending_.store(false, std::memory_order_relaxed);
        ctx = err_ctx_;
        fn = err_fn_;
    }
    // Called without any engine lock held, so the handler may call back into vipl.
    if (fn)
        for (auto& e : batch) fn(ctx, &e);
}

}  // namespace softvia::nicfw
