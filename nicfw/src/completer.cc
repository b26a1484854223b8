// completer.cc -- completions: descriptor status, CQ entries, flushing a VI.
#include <cstring>

#include "nicfw/engine.h"

namespace softvia::nicfw {

void Engine::complete_on(Vi& vi, uint32_t queue, VIP_DESCRIPTOR* d, uint32_t status, uint32_t len) {
    const bool recv = queue != NICFW_SENDQ;
    d->CS.Length = len;
    // status may name its operation (RDMA); otherwise the queue does.
    uint32_t op = (status & VIP_STATUS_OP_MASK) ? 0 : (recv ? VIP_STATUS_OP_RECEIVE : VIP_STATUS_OP_SEND);
    uint32_t st = status | VIP_STATUS_DONE | op;
    // Release: the driver that sees DONE (acquire load in VipSendDone/VipRecvDone) sees
    // Length, ImmediateData and the scattered data.
    __atomic_store_n(&d->CS.Status, st, __ATOMIC_RELEASE);
    if (status & VIP_STATUS_ERROR_MASK) {
        vi.st->c.errors++;
        status_->nic.errors++;
    }
    if (recv) {
        vi.st->c.recvs_done++;
        status_->nic.recvs_done++;
    } else {
        vi.st->c.sends_done++;
        status_->nic.sends_done++;
    }
    Cq* cq = queue == NICFW_SENDQ ? vi.scq : queue == NICFW_RECVQ ? vi.rcq : vi.rcq_reply;
    if (cq) cq_push(cq, vi, queue);
}

void Engine::cq_push(Cq* cq, Vi& vi, uint32_t queue) {
    uint64_t prod = cq->prod.load(std::memory_order_relaxed);
    // Acquire pairs with the driver's release of cons: the entry slot is free again.
    uint64_t cons = cq->cons.load(std::memory_order_acquire);
    if (prod - cons >= cq->entries.size()) {
        // Overflow: the descriptor is still complete (Done finds it); the CQ entry is
        // lost and the consumer is told asynchronously.
        cq->overflows++;
        raise(&vi, cq, nullptr, VIP_RESOURCE_CQ, VIP_ERROR_CATASTROPHIC);
        return;
    }
    cq->entries[prod % cq->entries.size()] = nicfw_cqe{reinterpret_cast<uint64_t>(vi.user), NICFW_VI_INDEX(vi.id), queue};
    // Release: the driver that sees prod sees the entry.
    cq->prod.store(prod + 1, std::memory_order_release);
}

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
        VIP_DESCRIPTOR* d = vi.sq.front().desc;
        complete(vi, false, d, VIP_STATUS_DESC_FLUSHED_ERROR | send_op_status(d), 0);
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
    vi.ack_hold = false;
    while (!vi.rq.empty()) {
        complete(vi, true, vi.rq.front().desc, VIP_STATUS_DESC_FLUSHED_ERROR, 0);
        vi.rq.pop();
    }
    while (!vi.rq_reply.empty()) {
        complete_on(vi, NICFW_REPLYQ, vi.rq_reply.front().desc, VIP_STATUS_DESC_FLUSHED_ERROR, 0);
        vi.rq_reply.pop();
    }
    if (new_state == VIP_STATE_ERROR && old == VIP_STATE_CONNECTED)
        raise(&vi, nullptr, nullptr, VIP_RESOURCE_VI, why);
}

}  // namespace softvia::nicfw
