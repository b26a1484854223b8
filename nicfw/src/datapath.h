// datapath.h -- pieces of the per-message path that several parts of the firmware share:
// the checks of a descriptor taken from a work queue (requester: sends; responder:
// receives) and its completion (completer). Inline: each runs once per message.
#pragma once

#include <cstring>

#include "nicfw/engine.h"

namespace softvia::nicfw {

// The steps of one message, each with one caller or a few in its file: inlined so that
// a message does not pay a dozen call frames (-O2 would keep most of them).
#define HOT_INLINE [[gnu::always_inline]] inline

// The descriptor itself (control segment plus seg_count segments) must lie in the region
// its memory handle names, with the VI's protection tag. Returns a status bit or 0, the
// control segment as read in *cs, and the region in *reg. One lookup serves both checks
// (the table only changes under the engine lock, which we hold): the control segment
// first, since seg_count is read from it.
HOT_INLINE uint32_t Engine::check_desc(Vi& vi, const WorkItem& w, nicfw_desc_ctrl* cs, const Region** reg) {
    const uint64_t d = reinterpret_cast<uint64_t>(w.desc);
    const Region* r = mem_.find(w.memh);
    if (!r || r->ptag != vi.attrs.ptag || !MemTable::in_range(*r, d, sizeof(nicfw_desc_ctrl)))
        return NICFW_DS_PROTECTION_ERROR;
    // One snapshot of what the driver may still be scribbling on: use what we read. The
    // program may have unmapped it since it registered it: then it is a protection error.
    // Only the 16 bytes the NIC reads (next_memh .. imm): one 16-byte move.
    static_assert(offsetof(nicfw_desc_ctrl, imm) + 4 - offsetof(nicfw_desc_ctrl, next_memh) == 16);
    if (hostmem::copy(&cs->next_memh, &w.desc->cs.next_memh, 16) != 0) return NICFW_DS_PROTECTION_ERROR;
    const uint16_t n = cs->seg_count;
    if (n > NICFW_MAX_SEGMENTS) return NICFW_DS_FORMAT_ERROR;
    uint64_t len = sizeof(nicfw_desc_ctrl) + uint64_t{n} * sizeof(nicfw_desc_seg);
    if (!MemTable::in_range(*r, d, len)) return NICFW_DS_PROTECTION_ERROR;
    if (reg) *reg = r;
    return 0;
}

// Checks count data segments starting at segment first and resolves them to host ranges.
HOT_INLINE uint32_t Engine::validate_segments(Vi& vi, nicfw_desc* d, uint32_t first, uint32_t count,
                                              Seg* out, uint32_t* total, const WorkItem& w, const Region* reg) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < count; i++) {
        nicfw_desc_seg s;
        if (!hostmem::load(desc_segment(d, first + i), &s))  // one snapshot of untrusted memory
            return NICFW_DS_PROTECTION_ERROR;
        if (s.len == 0) {
            out[i] = Seg{nullptr, 0, 0};
            continue;
        }
        // Data in the descriptor's own region (the usual case) needs no second lookup.
        const Region* r = reg && s.memh == w.memh ? reg : mem_.find(s.memh);
        if (!r || r->ptag != vi.attrs.ptag || !MemTable::in_range(*r, s.addr, s.len))
            return NICFW_DS_PROTECTION_ERROR;
        out[i] = Seg{reinterpret_cast<uint8_t*>(s.addr), s.len, s.memh};
        sum += s.len;
    }
    if (sum > UINT32_MAX) return NICFW_DS_LENGTH_ERROR;
    *total = static_cast<uint32_t>(sum);
    return 0;
}

HOT_INLINE uint32_t Engine::recheck_segs(const Vi& vi, const Seg* segs, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        if (segs[i].len == 0) continue;
        const Region* r = mem_.find(segs[i].memh);
        if (!r || r->ptag != vi.attrs.ptag ||
            !MemTable::in_range(*r, reinterpret_cast<uint64_t>(segs[i].ptr), segs[i].len))
            return NICFW_DS_PROTECTION_ERROR;
    }
    return 0;
}

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
        Cq* cq = queue == NICFW_SENDQ ? vi.scq : queue == NICFW_RECVQ ? vi.rcq : vi.rcq_reply;
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
    Cq* cq = queue == NICFW_SENDQ ? vi.scq : queue == NICFW_RECVQ ? vi.rcq : vi.rcq_reply;
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

// The VI a frame is addressed to, if it exists and is connected to the frame's sender.
HOT_INLINE Vi* connected_target(Engine& e, const RxFrame& f, const nicfw_frame_hdr& h) {
    Vi* vi = e.vi_by_index(NICFW_VI_INDEX(h.dst_vi));
    if (!vi || vi->id != h.dst_vi) return nullptr;
    if (vi->state.load(std::memory_order_relaxed) != NICFW_VI_CONNECTED) return nullptr;
    if (vi->peer != f.peer || vi->remote_vi != h.src_vi) return nullptr;
    if (vi->refusing) return nullptr;  // the connection is ending: nothing more is taken
    return vi;
}

// A frame to peer: reserved on its link (null while control frames wait for it), then
// committed. Data and ACK frames both come this way (requester.cc, reliability.cc).
HOT_INLINE uint8_t* Engine::frame_reserve(int peer, uint32_t payload, nicfw_frame_hdr** hdr) {
    // Frames queue behind control frames waiting for this peer's link.
    if (static_cast<size_t>(peer) < backlog_per_peer_.size() && backlog_per_peer_[peer]) return nullptr;
    uint8_t* f = tr_->tx_reserve(peer, static_cast<uint32_t>(sizeof(nicfw_frame_hdr)) + payload);
    if (!f) return nullptr;
    *hdr = reinterpret_cast<nicfw_frame_hdr*>(f);
    return f + sizeof(nicfw_frame_hdr);
}

HOT_INLINE void Engine::frame_commit(int peer, nicfw_frame_hdr* hdr, uint32_t payload) {
    (void)hdr;
    uint32_t len = static_cast<uint32_t>(sizeof(nicfw_frame_hdr)) + payload;
    tr_->tx_commit(peer, len);
    bump(status_->nic.tx_frames);
    bump(status_->nic.tx_bytes, len);
}

}  // namespace softvia::nicfw
