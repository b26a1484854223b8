// frames.h -- frames on the link: the connected VI a frame is for, and reserving and
// committing a frame to a peer (data from the requester, ACKs from reliability.cc).
#pragma once

#include <cstring>

#include "hot_inline.h"
#include "nicfw/engine.h"
#include "transport/shm/shm_tx.h"

namespace softvia::nicfw {

// The VI a frame is addressed to, if it exists and is connected to the frame's sender.
HOT_INLINE Vi* connected_target(Engine& e, const RxFrame& f, const nicfw_frame_hdr& h) {
    Vi* vi = e.vi_by_index(NICFW_VI_INDEX(h.dst_vi));
    if (!vi || vi->id != h.dst_vi) return nullptr;
    if (vi->state.load(std::memory_order_relaxed) != NICFW_VI_CONNECTED) return nullptr;
    if (vi->peer != f.peer || vi->remote_vi != h.src_vi) return nullptr;
    if (vi->refusing) return nullptr;  // the connection is ending: nothing more is taken
    return vi;
}

// The link's send path: on the shm wire itself a direct, inline call (shm_tx.h; the
// class is final), elsewhere the transport's virtual one (a wire, the same-host
// composition, the fault injector).
HOT_INLINE uint8_t* Engine::link_reserve(int peer, uint32_t len) {
    return shm_ ? shm_->reserve_slot(peer, len) : tr_->tx_reserve(peer, len);
}

HOT_INLINE void Engine::link_commit(int peer, uint32_t len) {
    if (shm_)
        shm_->commit_slot(peer, len);
    else
        tr_->tx_commit(peer, len);
}

// A frame to peer: reserved on its link (null while control frames wait for it), then
// committed. Data and ACK frames both come this way (requester.cc, reliability.cc).
HOT_INLINE uint8_t* Engine::frame_reserve(int peer, uint32_t payload, nicfw_frame_hdr** hdr) {
    // Frames queue behind control frames waiting for this peer's link.
    if (static_cast<size_t>(peer) < backlog_per_peer_.size() && backlog_per_peer_[peer]) return nullptr;
    uint8_t* f = link_reserve(peer, static_cast<uint32_t>(sizeof(nicfw_frame_hdr)) + payload);
    if (!f) return nullptr;
    *hdr = reinterpret_cast<nicfw_frame_hdr*>(f);
    return f + sizeof(nicfw_frame_hdr);
}

HOT_INLINE void Engine::frame_commit(int peer, nicfw_frame_hdr* hdr, uint32_t payload) {
    (void)hdr;
    uint32_t len = static_cast<uint32_t>(sizeof(nicfw_frame_hdr)) + payload;
    link_commit(peer, len);
    bump(status_->nic.tx_frames);
    bump(status_->nic.tx_bytes, len);
}

HOT_INLINE void Engine::count_tx(Vi& vi, uint32_t bytes) {
    bump(vi.st->c.tx_frames);
    bump(vi.st->c.tx_bytes, bytes);
}

}  // namespace softvia::nicfw
