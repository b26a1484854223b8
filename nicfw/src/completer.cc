// completer.cc -- completions: descriptor status, CQ entries, flushing a VI.
#include <cstring>

#include "nicfw/engine.h"
#include "datapath.h"

namespace softvia::nicfw {

// Moves vi to new_state and completes every outstanding descriptor with the flushed
// status (VIA: a VI in the error state, or a disconnected one, flushes its queues).
void Engine::flush_vi(Vi& vi, uint32_t new_state, bool tell_peer, VIP_ERROR_CODE why) {
    uint32_t old = vi.state.load(std::memory_order_relaxed);
    if (tell_peer && old == VIP_STATE_CONNECTED)
        send_control(vi.peer, NICFW_F_DISCONNECT, vi.remote_vi, vi.id, 0, nullptr);
    vi.state.store(new_state, std::memory_order_release);
    vi.st->state = new_state;
    vi.op = ConnOp::kNone;
    if (old == VIP_STATE_CONNECT_PENDING) vi.conn_result.store(VIP_ERROR_RESOURCE, std::memory_order_release);
    // In post order: the finished ones before the first unfinished one keep their status;
    // from there on everything is flushed, also a send already on the wire, since it may
    // not complete successfully after an earlier descriptor failed.
    bool cut = false;
    for (TxEntry& e : vi.pending) {
        cut |= !e.done;
        if (cut) e.status = VIP_STATUS_DESC_FLUSHED_ERROR;
        e.done = true;
    }
    retire(vi);
    vi.reads_out = 0;
    vi.serve.clear();
    vi.refusing = false;
    while (!vi.sq.empty()) {
        const WorkItem& w = vi.sq.front();
        complete(vi, false, w, VIP_STATUS_DESC_FLUSHED_ERROR | send_op_status(w.desc), 0);
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
        complete(vi, true, vi.rq.front(), VIP_STATUS_DESC_FLUSHED_ERROR, 0);
        vi.rq.pop();
    }
    while (!vi.rq_reply.empty()) {
        complete_on(vi, NICFW_REPLYQ, vi.rq_reply.front(), VIP_STATUS_DESC_FLUSHED_ERROR, 0);
        vi.rq_reply.pop();
    }
    if (new_state == VIP_STATE_ERROR && old == VIP_STATE_CONNECTED)
        raise(&vi, nullptr, nullptr, VIP_RESOURCE_VI, why);
}

}  // namespace softvia::nicfw
