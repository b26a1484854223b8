// completer.cc -- completions: descriptor status, CQ entries, flushing a VI.
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
    while (!vi.rq_reply.empty()) {
        complete_on(vi, NICFW_REPLYQ, vi.rq_reply.front(), NICFW_DS_FLUSHED, 0);
        vi.rq_reply.pop();
    }
    if (new_state == NICFW_VI_ERROR && old == NICFW_VI_CONNECTED)
        raise(&vi, nullptr, nullptr, NICFW_RES_VI, why);
}

}  // namespace softvia::nicfw
