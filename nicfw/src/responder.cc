// responder.cc -- the receive engine: frame checks, dispatch, matching to receive
// descriptors, scatter, immediate data.
//
// Frames come from the wire and are never trusted. Checks run in a fixed order before
// anything is touched: length, version, type, then field ranges, then the VI and its
// connection, then the receive descriptor and its segments.
#include <algorithm>
#include <cstring>

#include "nicfw/engine.h"

namespace softvia::nicfw {

void Engine::handle_frame(const RxFrame& f) {
    status_->nic.rx_frames++;
    status_->nic.rx_bytes += f.len;
    if (f.len < sizeof(nicfw_frame_hdr)) {
        status_->nic.drops++;
        return;
    }
    nicfw_frame_hdr h;
    memcpy(&h, f.data, sizeof h);  // one snapshot: the sender may still scribble on the frame
    if (h.version != NICFW_ABI_VERSION || h.type == 0 || h.type > NICFW_F_TYPE_MAX) {
        status_->nic.drops++;
        return;
    }
    switch (h.type) {
        case NICFW_F_DATA:
            on_data(f, h);
            break;
        case NICFW_F_ACK:
            on_ack(f, h);
            break;
        default:
            on_control(f, h);
            break;
    }
}

// The VI a frame is addressed to, if it exists and is connected to the frame's sender.
static Vi* connected_target(Engine& e, const RxFrame& f, const nicfw_frame_hdr& h) {
    Vi* vi = e.vi_by_index(NICFW_VI_INDEX(h.dst_vi));
    if (!vi || vi->id != h.dst_vi) return nullptr;
    if (vi->state.load(std::memory_order_relaxed) != VIP_STATE_CONNECTED) return nullptr;
    if (vi->peer != f.peer || vi->remote_vi != h.src_vi) return nullptr;
    return vi;
}

// First fragment of a message: take the head receive descriptor and check it.
// Returns false if the message is to be discarded (vi.rx_discard set accordingly).
bool Engine::begin_receive(Vi& vi, const nicfw_frame_hdr& h) {
    vi.rx_busy = true;
    vi.rx_discard = false;
    vi.rx_has_desc = false;
    vi.rx_len = h.msg_len;
    vi.rx_status = 0;
    // A receive posted before the sender sent this message may still be a doorbell in
    // flight (rung after this step's doorbell pass): it is visible now, so take it.
    if (vi.rq.empty()) service_doorbells();
    if (vi.rq.empty()) {
        // No receive descriptor. Unreliable: the message is dropped. Reliable levels:
        // VIA says the connection breaks (that is why upper layers run credits).
        vi.rx_discard = true;
        vi.st->c.drops++;
        status_->nic.drops++;
        if (vi.attrs.reliability != VIP_SERVICE_UNRELIABLE) {
            raise(&vi, nullptr, nullptr, VIP_RESOURCE_VI, VIP_ERROR_RECVQ_EMPTY);
            flush_vi(vi, VIP_STATE_ERROR, true, VIP_ERROR_CONN_LOST);
        }
        return false;
    }
    WorkItem& w = vi.rq.front();
    vi.rx_has_desc = true;
    uint16_t n = 0;
    uint32_t bad = check_desc(vi, w, &n);
    if (bad == 0) {
        uint16_t control = __atomic_load_n(&w.desc->CS.Control, __ATOMIC_RELAXED);
        if (control & VIP_CONTROL_RESERVED) bad = VIP_STATUS_FORMAT_ERROR;
    }
    if (bad == 0) bad = validate_segments(vi, w.desc, n, vi.rx_segs, &vi.rx_cap);
    if (bad == 0 && h.msg_len > vi.rx_cap) bad = VIP_STATUS_LENGTH_ERROR;
    vi.rx_nsegs = n;
    if (bad) {
        // The descriptor completes with the error; the message is consumed by it.
        vi.rx_status = bad;
        vi.rx_discard = true;
    }
    return !vi.rx_discard;
}

// Copies a fragment to message offset off of the current receive descriptor.
static void scatter(Vi& vi, uint32_t off, const uint8_t* src, uint32_t len) {
    uint32_t i = 0;
    while (i < vi.rx_nsegs && off >= vi.rx_segs[i].len) off -= vi.rx_segs[i++].len;
    while (len && i < vi.rx_nsegs) {
        uint32_t take = std::min(len, vi.rx_segs[i].len - off);
        if (take) memcpy(vi.rx_segs[i].ptr + off, src, take);  // zero-length segments have no pointer
        src += take;
        len -= take;
        off = 0;
        i++;
    }
}

// Ends the message in progress: completes its receive descriptor (if one was taken)
// with status, and acknowledges placement on reliable-reception VIs.
void Engine::finish_receive(Vi& vi, uint32_t status, const nicfw_frame_hdr* last) {
    vi.rx_busy = false;
    vi.rx_seq++;
    if (!vi.rx_has_desc) return;  // discarded for lack of a descriptor
    vi.rx_has_desc = false;
    WorkItem w = vi.rq.front();
    vi.rq.pop();
    if (last && (last->flags & NICFW_FF_IMMEDIATE)) {
        w.desc->CS.ImmediateData = last->imm;
        status |= VIP_STATUS_IMMEDIATE;
    }
    complete(vi, true, w.desc, status, (status & VIP_STATUS_ERROR_MASK) ? 0 : vi.rx_len);
    if (status & VIP_STATUS_ERROR_MASK) {
        // VIA: on a reliable VI a message the receive descriptor cannot take (too small,
        // bad segments) breaks the connection.
        if (vi.attrs.reliability != VIP_SERVICE_UNRELIABLE)
            flush_vi(vi, VIP_STATE_ERROR, true, VIP_ERROR_CONN_LOST);
        return;
    }
    if (vi.attrs.reliability == VIP_SERVICE_RELIABLE_RECEPTION) {
        vi.acks_owed++;  // sent by flush_acks() at the end of this step
        if (!vi.ack_listed) {
            vi.ack_listed = true;
            ack_owed_.push_back(&vi);
        }
    }
}

void Engine::on_data(const RxFrame& f, const nicfw_frame_hdr& h) {
    // Field ranges: the fragment must fit the frame and the message.
    if (h.frag_len > f.len - sizeof(nicfw_frame_hdr) || h.msg_len > NICFW_MAX_TRANSFER ||
        h.offset > h.msg_len || h.frag_len > h.msg_len - h.offset) {
        status_->nic.drops++;
        return;
    }
    Vi* vip = connected_target(*this, f, h);
    if (!vip) {
        status_->nic.drops++;  // stale or stray: no connected VI for it
        return;
    }
    Vi& vi = *vip;
    vi.st->c.rx_frames++;
    vi.st->c.rx_bytes += h.frag_len;
    if (h.offset == 0) {
        // A new message while one is unfinished: the old one lost its tail.
        if (vi.rx_busy) finish_receive(vi, VIP_STATUS_PARTIAL_ERROR, nullptr);
        if (vi.state.load(std::memory_order_relaxed) != VIP_STATE_CONNECTED) return;  // that broke it
        if (!begin_receive(vi, h) && vi.state.load(std::memory_order_relaxed) != VIP_STATE_CONNECTED)
            return;  // the connection broke
    } else if (!vi.rx_busy || h.msg_len != vi.rx_len) {
        status_->nic.drops++;  // a middle fragment with no message started
        return;
    }
    if (!vi.rx_discard) scatter(vi, h.offset, f.data + sizeof(nicfw_frame_hdr), h.frag_len);
    if (!(h.flags & NICFW_FF_LAST)) return;
    uint32_t status = vi.rx_status;
    if (h.offset + h.frag_len != h.msg_len && status == 0) status = VIP_STATUS_PARTIAL_ERROR;
    finish_receive(vi, status, &h);
}

void Engine::on_ack(const RxFrame& f, const nicfw_frame_hdr& h) {
    Vi* vi = connected_target(*this, f, h);
    if (!vi) {
        status_->nic.drops++;
        return;
    }
    for (uint32_t k = 0; k < h.imm && !vi->unacked.empty(); k++) {
        WorkItem w = vi->unacked.front();
        vi->unacked.pop();
        uint32_t len = 0;
        // Length is what the descriptor asked to send; the segments were checked at send.
        for (uint16_t i = 0; i < w.desc->CS.SegCount && i < NICFW_MAX_SEGMENTS; i++)
            len += desc_segment(w.desc, i)->Local.Length;
        complete(*vi, false, w.desc, 0, len);
    }
}

}  // namespace softvia::nicfw
