// requester.cc -- the send engine: descriptor checks, gather, framing, transmit.
//
// The checks run in a fixed order (descriptor memory, control field, segment count,
// each data segment, total length) and every failure becomes a status bit on the
// descriptor, never a return code of the call that posted (VIA 1.0, section 6).
#include <algorithm>
#include <cstring>

#include "nicfw/engine.h"

namespace softvia::nicfw {

// The descriptor itself (control segment plus segcount segments) must lie in the region
// its memory handle names, with the VI's protection tag. Returns a status bit or 0.
uint32_t Engine::check_desc(Vi& vi, const WorkItem& w, uint16_t* segcount) {
    uint64_t d = reinterpret_cast<uint64_t>(w.desc);
    if (uint32_t bad = mem_.check(w.memh, d, sizeof(VIP_CONTROL_SEGMENT), vi.attrs.ptag)) return bad;
    // One read of the field the driver may still be scribbling on: use what we read.
    uint16_t n = __atomic_load_n(&w.desc->CS.SegCount, __ATOMIC_RELAXED);
    *segcount = n;
    if (n > NICFW_MAX_SEGMENTS) return VIP_STATUS_FORMAT_ERROR;
    uint64_t len = sizeof(VIP_CONTROL_SEGMENT) + uint64_t{n} * sizeof(VIP_DESCRIPTOR_SEGMENT);
    return mem_.check(w.memh, d, len, vi.attrs.ptag);
}

// Checks count data segments starting at d->DS[first] and resolves them to host ranges.
uint32_t Engine::validate_segments(Vi& vi, VIP_DESCRIPTOR* d, uint32_t count, Seg* out,
                                   uint32_t* total) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < count; i++) {
        VIP_DATA_SEGMENT s;
        memcpy(&s, &desc_segment(d, i)->Local, sizeof s);  // one snapshot of untrusted memory
        if (s.Length == 0) {
            out[i] = Seg{nullptr, 0};
            continue;
        }
        if (uint32_t bad = mem_.check(s.Handle, s.Data.AddressBits, s.Length, vi.attrs.ptag))
            return bad;
        out[i] = Seg{static_cast<uint8_t*>(s.Data.Address), s.Length};
        sum += s.Length;
    }
    if (sum > UINT32_MAX) return VIP_STATUS_LENGTH_ERROR;
    *total = static_cast<uint32_t>(sum);
    return 0;
}

// Validates the head send descriptor and loads it as the VI's current transmission.
// Returns false when it completed at once (with an error).
bool Engine::start_send(Vi& vi, const WorkItem& w) {
    uint16_t n = 0;
    uint32_t bad = check_desc(vi, w, &n);
    if (bad == 0) {
        uint16_t control = __atomic_load_n(&w.desc->CS.Control, __ATOMIC_RELAXED);
        if (control & VIP_CONTROL_RESERVED) {
            bad = VIP_STATUS_FORMAT_ERROR;
        } else if ((control & VIP_CONTROL_OP_MASK) != VIP_CONTROL_OP_SENDRECV) {
            // RDMA write/read arrive with the RDMA issue; until then the NIC says the
            // descriptor's format is one it does not execute.
            bad = VIP_STATUS_FORMAT_ERROR;
        } else {
            bad = validate_segments(vi, w.desc, n, vi.tx_segs, &vi.tx_len);
            if (bad == 0 && (vi.tx_len > vi.attrs.max_transfer || vi.tx_len > vi.remote.max_transfer))
                bad = VIP_STATUS_LENGTH_ERROR;
        }
    }
    if (bad) {
        vi.sq.pop();
        complete(vi, false, w.desc, bad, 0);
        // VIA: on a reliable VI a descriptor error breaks the connection.
        if (vi.attrs.reliability != VIP_SERVICE_UNRELIABLE)
            flush_vi(vi, VIP_STATE_ERROR, true, VIP_ERROR_POST_DESC);
        return false;
    }
    vi.tx_nsegs = n;
    vi.tx_busy = true;
    vi.tx_off = vi.tx_seg = vi.tx_seg_off = 0;
    return true;
}

uint8_t* Engine::frame_reserve(int peer, uint32_t payload, nicfw_frame_hdr** hdr) {
    // Frames queue behind control frames waiting for this peer's link.
    if (static_cast<size_t>(peer) < backlog_per_peer_.size() && backlog_per_peer_[peer]) return nullptr;
    uint8_t* f = tr_->tx_reserve(peer, static_cast<uint32_t>(sizeof(nicfw_frame_hdr)) + payload);
    if (!f) return nullptr;
    *hdr = reinterpret_cast<nicfw_frame_hdr*>(f);
    return f + sizeof(nicfw_frame_hdr);
}

void Engine::frame_commit(int peer, nicfw_frame_hdr* hdr, uint32_t payload) {
    (void)hdr;
    uint32_t len = static_cast<uint32_t>(sizeof(nicfw_frame_hdr)) + payload;
    tr_->tx_commit(peer, len);
    status_->nic.tx_frames++;
    status_->nic.tx_bytes += len;
}

bool Engine::try_control(int peer, const nicfw_frame_hdr& h, const uint8_t* payload) {
    uint8_t* f = tr_->tx_reserve(peer, static_cast<uint32_t>(sizeof h) + h.msg_len);
    if (!f) return false;
    memcpy(f, &h, sizeof h);
    if (h.msg_len) memcpy(f + sizeof h, payload, h.msg_len);
    frame_commit(peer, reinterpret_cast<nicfw_frame_hdr*>(f), h.msg_len);
    return true;
}

void Engine::send_control(int peer, uint8_t type, uint32_t dst_vi, uint32_t src_vi, uint32_t req_id,
                          const nicfw_conn_payload* pl) {
    if (peer < 0 || !tr_->peer_alive(peer)) return;  // a dead peer hears nothing
    nicfw_frame_hdr h{};
    h.type = type;
    h.version = NICFW_ABI_VERSION;
    h.dst_vi = dst_vi;
    h.src_vi = src_vi;
    h.seq = req_id;
    h.msg_len = pl ? static_cast<uint32_t>(offsetof(nicfw_conn_payload, disc)) + pl->src_disc_len +
                         pl->dst_disc_len
                   : 0;
    const uint8_t* payload = reinterpret_cast<const uint8_t*>(pl);
    if (static_cast<size_t>(peer) >= backlog_per_peer_.size()) backlog_per_peer_.resize(peer + 1, 0);
    if (backlog_per_peer_[peer] == 0 && try_control(peer, h, payload)) return;
    if (backlog_per_peer_[peer] >= kMaxBacklogPerPeer) {
        status_->nic.drops++;  // a live peer that stopped reading: its liveness is its problem
        return;
    }
    backlog_.push_back({peer, h, std::vector<uint8_t>(payload, payload + h.msg_len)});
    backlog_per_peer_[peer]++;
}

bool Engine::flush_backlog() {
    bool did = false;
    std::vector<bool> stuck(backlog_per_peer_.size(), false);  // keep per-peer order
    for (size_t i = 0; i < backlog_.size();) {
        PendingControl& c = backlog_[i];
        if (!tr_->peer_alive(c.peer) || (!stuck[c.peer] && try_control(c.peer, c.hdr, c.payload.data()))) {
            backlog_per_peer_[c.peer]--;
            backlog_.erase(backlog_.begin() + static_cast<std::ptrdiff_t>(i));
            did = true;
        } else {
            stuck[c.peer] = true;
            i++;
        }
    }
    return did;
}

// Reliable reception: one ACK per VI per step covers every message placed since the
// last one (acks_owed), so a burst of receives costs one frame back.
bool Engine::flush_acks() {
    bool did = false;
    for (size_t i = 0; i < ack_owed_.size();) {
        Vi* vi = ack_owed_[i];
        bool done = vi->state.load(std::memory_order_relaxed) != VIP_STATE_CONNECTED || vi->acks_owed == 0;
        if (!done) {
            nicfw_frame_hdr* a;
            if (frame_reserve(vi->peer, 0, &a)) {
                memset(a, 0, sizeof *a);
                a->type = NICFW_F_ACK;
                a->version = NICFW_ABI_VERSION;
                a->dst_vi = vi->remote_vi;
                a->src_vi = vi->id;
                a->imm = vi->acks_owed;
                a->seq = vi->rx_seq;
                frame_commit(vi->peer, a, 0);
                vi->acks_owed = 0;
                did = done = true;
            }
        }
        if (done) {
            vi->ack_listed = false;
            ack_owed_[i] = ack_owed_.back();
            ack_owed_.pop_back();
        } else {
            i++;  // link full: try again next step
        }
    }
    return did;
}

void Engine::count_tx(Vi& vi, uint32_t bytes) {
    vi.st->c.tx_frames++;
    vi.st->c.tx_bytes += bytes;
}

// Transmits as much of vi's send queue as the link takes. *blocked: the link is full.
void Engine::transmit_vi(Vi& vi, bool* blocked) {
    *blocked = false;
    while (!vi.sq.empty()) {
        if (vi.state.load(std::memory_order_relaxed) != VIP_STATE_CONNECTED) return;
        WorkItem w = vi.sq.front();
        if (!vi.tx_busy && !start_send(vi, w)) continue;
        // Frames: at least one (a zero-length send still carries immediate data).
        do {
            uint32_t frag = std::min(vi.tx_len - vi.tx_off, mtu_);
            nicfw_frame_hdr* h;
            uint8_t* p = frame_reserve(vi.peer, frag, &h);
            if (!p) {
                *blocked = true;
                return;
            }
            // Gather: copy segments straight into the frame.
            uint32_t done = 0;
            while (done < frag) {
                Seg& s = vi.tx_segs[vi.tx_seg];
                uint32_t take = std::min(frag - done, s.len - vi.tx_seg_off);
                if (take) memcpy(p + done, s.ptr + vi.tx_seg_off, take);  // zero-length: no pointer
                done += take;
                vi.tx_seg_off += take;
                if (vi.tx_seg_off == s.len) {
                    vi.tx_seg++;
                    vi.tx_seg_off = 0;
                }
            }
            while (vi.tx_seg < vi.tx_nsegs && vi.tx_segs[vi.tx_seg].len == 0) vi.tx_seg++;
            uint16_t control = w.desc->CS.Control;
            h->type = NICFW_F_DATA;
            h->version = NICFW_ABI_VERSION;
            h->flags = (control & VIP_CONTROL_IMMEDIATE) ? NICFW_FF_IMMEDIATE : 0;
            if (vi.tx_off + frag == vi.tx_len) h->flags |= NICFW_FF_LAST;
            h->reserved = 0;
            h->dst_vi = vi.remote_vi;
            h->src_vi = vi.id;
            h->msg_len = vi.tx_len;
            h->offset = vi.tx_off;
            h->frag_len = frag;
            h->imm = w.desc->CS.ImmediateData;
            h->seq = vi.tx_seq;
            frame_commit(vi.peer, h, frag);
            count_tx(vi, frag);
            vi.tx_off += frag;
        } while (vi.tx_off < vi.tx_len);
        // Whole message handed to the remote NIC.
        vi.tx_busy = false;
        vi.tx_seq++;
        vi.sq.pop();
        if (vi.attrs.reliability == VIP_SERVICE_RELIABLE_RECEPTION) {
            vi.unacked.push(w);  // completes when the receiver says the data is placed
        } else {
            // Unreliable and reliable delivery: done once the remote NIC has it. The shm
            // lane is the remote NIC's receive queue, so that is now.
            complete(vi, false, w.desc, 0, vi.tx_len);
        }
    }
}

bool Engine::transmit() {
    bool did = false;
    for (size_t i = 0; i < tx_active_.size();) {
        Vi* vi = tx_active_[i];
        bool blocked;
        uint32_t before = vi->sq.size();
        transmit_vi(*vi, &blocked);
        did |= vi->sq.size() != before || vi->tx_busy;
        if (vi->sq.empty() || vi->state.load(std::memory_order_relaxed) != VIP_STATE_CONNECTED) {
            vi->tx_listed = false;
            tx_active_[i] = tx_active_.back();
            tx_active_.pop_back();
        } else {
            i++;
        }
    }
    return did;
}

}  // namespace softvia::nicfw
