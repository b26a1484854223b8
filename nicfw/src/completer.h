// completer.h -- the completer's per-message part: a descriptor's length, status and
// immediate data written back (fault-safe), and the CQ entry. Inline, since every
// message ends here; flushing a VI and asynchronous errors are in completer.cc.
#pragma once

#include <cstring>

#include "hot_inline.h"
#include "nicfw/engine.h"

namespace softvia::nicfw {

// Completions write the descriptor's status and, when the queue is bound to one, a CQ entry.
HOT_INLINE void Engine::complete_on(Vi& vi, uint32_t queue, const WorkItem& w, uint32_t status, uint32_t len,
                                    const uint32_t* imm) {
    const bool recv = queue != NICFW_SENDQ;
    nicfw_desc* d = w.desc;
    // status may name its operation (RDMA); otherwise the queue does.
    uint32_t op = (status & NICFW_DS_OP_MASK) ? 0 : (recv ? NICFW_DS_OP_RECEIVE : NICFW_DS_OP_SEND);
    uint32_t st = status | NICFW_DS_DONE | op;
    // The descriptor is written only while the region its doorbell named holds it (the
    // driver checked that at post; the program may have deregistered or unmapped it
    // since). That region may carry another protection tag: the descriptor check failed
    // then, and the program learns it from this status.
    const Region* r = mem_.find(w.memh);
    bool written = r &&
                   MemTable::in_range(*r, reinterpret_cast<uint64_t>(d), sizeof(nicfw_desc_ctrl)) &&
                   (!imm || hostmem::store32(&d->cs.imm, *imm) == 0) &&
                   // length and status in one 8-byte store (adjacent, 8-aligned), after the data and
                   // imm: a driver that sees DONE (acquire load in VipSendDone/VipRecvDone)
                   // sees them all (x86-64 keeps stores in order; hostmem.h).
                   hostmem::store64(&d->cs.length, uint64_t{len} | uint64_t{st} << 32) == 0;
    static_assert(offsetof(nicfw_desc_ctrl, status) == offsetof(nicfw_desc_ctrl, length) + 4 &&
                      offsetof(nicfw_desc_ctrl, length) % 8 == 0,
                  "length and status are written as one 8-byte store");
    if (!written) [[unlikely]] {
        // The completion is lost. Tell the program, which broke VIA's rule that posted
        // descriptors stay registered, and let the driver hand the descriptor back (Done:
        // as an error) instead of waiting for a status that never comes; a CQ
        // still gets its entry, so a program waiting on one goes to Done.
        bump(vi.st->c.errors);
        bump(status_->nic.errors);
        {
            std::lock_guard<SpinLock> g(vi.lost_lock);
            vi.lost.push_back(d);
        }
        vi.lost_n[queue].fetch_add(1, std::memory_order_release);
        raise(&vi, nullptr, d, NICFW_RES_DESCRIPTOR, NICFW_AE_COMP_PROT);
        Cq* cq = queue == NICFW_SENDQ ? vi.scq : queue == NICFW_RECVQ ? vi.rcq : vi.rcq_alt;
        if (cq) cq_push(cq, vi, queue);
        return;
    }
    if (status & NICFW_DS_ERROR_MASK) {
        bump(vi.st->c.errors);
        bump(status_->nic.errors);
    }
    if (recv) {
        bump(vi.st->c.recvs_done);
        bump(status_->nic.recvs_done);
    } else {
        bump(vi.st->c.sends_done);
        bump(status_->nic.sends_done);
    }
    Cq* cq = queue == NICFW_SENDQ ? vi.scq : queue == NICFW_RECVQ ? vi.rcq : vi.rcq_alt;
    if (cq) cq_push(cq, vi, queue);
}

HOT_INLINE void Engine::cq_push(Cq* cq, Vi& vi, uint32_t queue) {
    uint64_t prod = cq->prod.load(std::memory_order_relaxed);
    // Acquire pairs with the driver's release of cons: the entry slot is free again.
    uint64_t cons = cq->cons.load(std::memory_order_acquire);
    if (prod - cons >= cq->entries.size()) {
        // Overflow: the descriptor is still complete (Done finds it); the CQ entry is
        // lost and the consumer is told asynchronously.
        cq->overflows++;
        raise(&vi, cq, nullptr, NICFW_RES_CQ, NICFW_AE_CATASTROPHIC);
        return;
    }
    cq->entries[prod % cq->entries.size()] =
        nicfw_cqe{reinterpret_cast<uint64_t>(vi.user), vi.user_context, NICFW_VI_INDEX(vi.id), queue};
    // Release: the driver that sees prod sees the entry.
    cq->prod.store(prod + 1, std::memory_order_release);
}

}  // namespace softvia::nicfw
