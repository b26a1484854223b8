// shm_tx.h -- the shm wire's send path (reserve a slot of the lane, commit it), inline:
// the engine calls it directly, without a virtual call per frame, when its transport is
// the shm wire itself (nicfw/src/frames.h); other callers reach it through tx_reserve
// and tx_commit, the vtable's entries (shm_transport.cc).
// Ordering rules: docs/memory-ordering.md.
#pragma once

#include "shm_layout.h"
#include "shm_transport.h"

namespace softvia::nicfw {

inline uint8_t* ShmTransport::reserve_slot(int peer, uint32_t len) {
    Peer& p = peers_[peer];
    if (__builtin_expect(p.tx == nullptr, 0)) {  // a peer that reached us first, or a closed lane
        if (p.state != Peer::kLive) return nullptr;
        int rc = open_lane(p);
        if (rc < 0) {
            cut(peer, -rc, true, "cannot open a lane to it");
            return nullptr;
        }
    }
    if (len > shm::kSlotBytes - shm::kSlotHdr) return nullptr;  // max_frame()
    if (p.prod - p.cached_cons >= shm::kSlots) {
        // Acquire pairs with the consumer's release store of cons: the slot is free.
        p.cached_cons = p.tx->cons.load(std::memory_order_acquire);
        if (p.prod - p.cached_cons >= shm::kSlots) return nullptr;
    }
    return p.tx->slots[p.prod & (shm::kSlots - 1)].frame;
}

inline void ShmTransport::commit_slot(int peer, uint32_t len) {
    Peer& p = peers_[peer];
    shm::Slot& s = p.tx->slots[p.prod & (shm::kSlots - 1)];
    s.len = len;
    // Release: the consumer that sees seq sees len and the frame bytes.
    s.seq.store(p.prod + 1, std::memory_order_release);
    p.prod++;
}

}  // namespace softvia::nicfw
