// requester.cc -- the send engine: descriptor checks, gather, framing, transmit.
//
// The checks run in a fixed order (descriptor memory, control field, segment count,
// each data segment, total length) and every failure becomes a status bit on the
// descriptor, never a return code of the call that posted (VIA 1.0, section 6).
#include <algorithm>
#include <cstring>

#include "nicfw/engine.h"
#include "datapath.h"
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

// Reads and checks send descriptor w and loads it as the VI's current transmission
// (tx_op, remote buffer, gathered segments, length). Returns 0 or the status bit of the
// first check that failed; *op is the operation the descriptor asked for.
HOT_INLINE uint32_t Engine::load_send(Vi& vi, const WorkItem& w, uint32_t* op) {
    *op = 0;
    nicfw_desc_ctrl cs;
    const Region* reg = nullptr;
    uint32_t bad = check_desc(vi, w, &cs, &reg);
    if (bad) return bad;
    const uint16_t n = cs.seg_count;
    const uint16_t control = cs.control;
    *op = control & NICFW_DC_OP_MASK;
    uint32_t first = 0;
    if (*op == NICFW_DC_OP_OFFLOAD) [[unlikely]]
        return load_offload(vi, w, cs);
    if (control & NICFW_DC_RESERVED & ~NICFW_DC_REPLY) return NICFW_DS_FORMAT_ERROR;
    if (*op != NICFW_DC_OP_SEND) {
        // RDMA: segment 0 is the address segment naming the remote buffer.
        if (n < 1) return NICFW_DS_FORMAT_ERROR;
        if (*op == NICFW_DC_OP_RDMA_READ &&
            (vi.attrs.reliability == NICFW_REL_UNRELIABLE || (control & NICFW_DC_IMMEDIATE)))
            return NICFW_DS_FORMAT_ERROR;  // reads need a reliable VI and carry no immediate data
        nicfw_desc_seg a;
        if (!hostmem::load(desc_segment(w.desc, 0), &a)) return NICFW_DS_PROTECTION_ERROR;
        vi.tx_raddr = a.addr;
        vi.tx_rmemh = a.memh;
        first = 1;
    }
    // What every frame's header takes from the descriptor, read once here.
    vi.tx_hflags = static_cast<uint8_t>(((control & NICFW_DC_IMMEDIATE) ? NICFW_FF_IMMEDIATE : 0) |
                                        ((control & NICFW_DC_REPLY) ? NICFW_FF_REPLY : 0));
    vi.tx_imm = cs.imm;
    vi.tx_epoch = mem_.epoch();
    bad = validate_segments(vi, w.desc, first, n - first, vi.tx_segs, &vi.tx_len, w, reg);
    if (bad == 0 && (vi.tx_len > vi.attrs.max_transfer || vi.tx_len > vi.remote.max_transfer))
        bad = NICFW_DS_LENGTH_ERROR;
    vi.tx_op = *op;
    vi.tx_nsegs = n - first;
    vi.tx_off = vi.tx_seg = vi.tx_seg_off = 0;
    vi.tx_w = w;
    return bad;
}

// Starts the head send descriptor as a new request. Returns false when it completed at
// once (with an error, or served by an offload's shortcut).
HOT_INLINE bool Engine::start_send(Vi& vi, const WorkItem& w) {
    uint32_t op;
    uint32_t bad = load_send(vi, w, &op);
    if (bad) {
        fail_request(vi, w, bad, op);
        return false;
    }
    // Served without the wire (offload.h): ordered after everything posted before it.
    if (op == NICFW_DC_OP_OFFLOAD && vi.pending.empty() && offload_shortcut(vi, w)) [[unlikely]]
        return false;
    vi.tx_cur_seq = vi.tx_seq;
    vi.tx_resend = false;
    vi.tx_busy = true;
    return true;
}

// The head send descriptor w fails with status (op: what it asked for, NICFW_DC_OP_*):
// it takes a sequence number, so a receiver that saw part of it knows the next message
// is a new one, and completes in post order.
void Engine::fail_request(Vi& vi, const WorkItem& w, uint32_t status, uint32_t op) {
    vi.sq.pop();
    TxEntry& e = vi.pending.push();
    e.kind = TxEntry::kLocal;
    e.done = true;
    e.desc = w.desc;
    e.memh = w.memh;
    e.status = status;
    e.seq = vi.tx_seq++;
    // The status still names the operation, when the descriptor said which.
    e.op = op == NICFW_DC_OP_RDMA_WRITE  ? NICFW_DS_OP_RDMA_WRITE
           : op == NICFW_DC_OP_RDMA_READ ? NICFW_DS_OP_RDMA_READ
           : op == NICFW_DC_OP_OFFLOAD   ? vi.tx_status_op
                                           : NICFW_DS_OP_SEND;
    retire(vi);
    // VIA: on a reliable VI a descriptor error breaks the connection.
    if (vi.attrs.reliability != NICFW_REL_UNRELIABLE) flush_vi(vi, NICFW_VI_ERROR, true, NICFW_AE_POST_DESC);
}

// The request being transmitted lost its memory half way (deregistered, or unmapped by
// the program): nothing more of it is read, and it fails with status. Part of it may be
// at the target already: an unreliable receiver drops it when the next message starts,
// a reliable VI breaks (fail_request).
void Engine::abort_send(Vi& vi, uint32_t status) {
    vi.tx_busy = false;
    if (!vi.tx_resend) {
        fail_request(vi, vi.tx_w, status, vi.tx_op);
        return;
    }
    vi.tx_resend = false;
    if (TxEntry* e = pending_entry(vi, vi.tx_cur_seq); e && !e->done) {
        e->status = status;
        e->done = true;
        if (e->answered()) vi.reads_out--;
    }
    flush_vi(vi, NICFW_VI_ERROR, true, NICFW_AE_POST_DESC);  // a resend runs on a reliable VI
}

// Loads the next request of a go-back-N resend, skipping those already answered.
// False when there is none. A descriptor that no longer passes the checks (its memory
// was deregistered while the NIC owned it) completes with that error and breaks the VI.
bool Engine::start_resend(Vi& vi) {
    while (vi.rtx_next != vi.rtx_end) {
        TxEntry* e = pending_entry(vi, vi.rtx_next);
        if (!e || e->done) {
            vi.rtx_next++;
            continue;
        }
        uint32_t op;
        if (uint32_t bad = load_send(vi, WorkItem{e->desc, e->memh}, &op)) {
            e->status = bad;
            e->done = true;
            if (e->answered()) vi.reads_out--;
            flush_vi(vi, NICFW_VI_ERROR, true, NICFW_AE_POST_DESC);
            return false;
        }
        if (e->kind == TxEntry::kRead) e->got = 0;  // the answer comes again from offset 0
        e->resent = true;
        vi.tx_cur_seq = e->seq;
        vi.tx_resend = true;
        vi.tx_busy = true;
        vi.rtx_next++;
        bump(vi.st->c.retransmits);
        bump(status_->nic.retransmits);
        return true;
    }
    return false;
}

// The pending request with sequence number seq (they are consecutive, oldest first).
TxEntry* Engine::pending_entry(Vi& vi, uint32_t seq) {
    if (vi.pending.empty()) return nullptr;
    uint32_t i = seq - vi.pending.front().seq;
    if (i >= vi.pending.size()) return nullptr;
    TxEntry& e = vi.pending[i];
    return e.seq == seq ? &e : nullptr;
}

// The current request has left in full. A new one joins the pending FIFO: it completes
// now, or when the target answers, but always after every descriptor posted before it.
HOT_INLINE void Engine::finish_send(Vi& vi) {
    vi.tx_busy = false;
    if (vi.tx_resend) {
        vi.tx_resend = false;
        return;
    }
    const bool reliable = vi.attrs.reliability != NICFW_REL_UNRELIABLE;
    TxEntry::Kind kind;
    uint32_t op;
    switch (vi.tx_op) {
        case NICFW_DC_OP_RDMA_WRITE:
            op = NICFW_DS_OP_RDMA_WRITE;
            // Reliable VIs learn the target's verdict on the remote buffer (ACK or NAK).
            kind = reliable ? TxEntry::kAcked : TxEntry::kLocal;
            break;
        case NICFW_DC_OP_RDMA_READ:
            op = NICFW_DS_OP_RDMA_READ;
            kind = TxEntry::kRead;
            break;
        case NICFW_DC_OP_OFFLOAD:
            op = vi.tx_status_op;
            kind = TxEntry::kOffload;  // done when the offload answers (answer_offload)
            break;
        default:
            op = NICFW_DS_OP_SEND;
            // Unreliable, and reliable delivery on a lossless wire: done once the remote NIC
            // has it (the shm lane is the remote NIC's receive queue). Reliable reception,
            // and any reliable level on a lossy wire: when the target acknowledges it.
            kind = vi.attrs.reliability == NICFW_REL_RELIABLE_RECEPTION || vi.rel_proto ? TxEntry::kAcked
                                                                                        : TxEntry::kLocal;
            break;
    }
    const uint32_t seq = vi.tx_seq++;
    vi.sq.pop();
    // Every frame of it is built and none will be built again (no resends on a lossless
    // wire): its buffers are the program's again before the target's answer completes it.
    if (kind == TxEntry::kAcked && !vi.rel_proto) mark_source_read(vi.tx_w);
    // Done already and nothing posted before it is outstanding: it completes now, as
    // retire() would, without a trip through the FIFO (the common case on a lossless wire).
    if (kind == TxEntry::kLocal && vi.pending.empty() && !vi.rel_proto) {
        complete(vi, false, vi.tx_w, op, vi.tx_len);
        return;
    }
    TxEntry& e = vi.pending.push();
    e.kind = kind;
    e.done = kind == TxEntry::kLocal;
    e.desc = vi.tx_w.desc;
    e.memh = vi.tx_w.memh;
    e.len = vi.tx_len;
    e.seq = seq;
    e.op = op;
    if (kind == TxEntry::kRead) {
        e.segs.assign(vi.tx_segs, vi.tx_segs + vi.tx_nsegs);
        e.epoch = vi.tx_epoch;
        vi.reads_out++;
    } else if (kind == TxEntry::kOffload) {
        e.segs.assign(1, vi.tx_offload.result);
        e.offload = vi.tx_offload_index;
        e.epoch = vi.tx_epoch;
        vi.reads_out++;
    }
    if (vi.rel_proto) {
        e.sent_ns = rtx_clock();
        // A request soon after our last ACK frame could have carried it: hold the next.
        if (e.sent_ns - vi.ack_frame_ns < kAckHoldNs) vi.ack_hold = true;
        if (vi.rto_at == 0) arm_rtx(vi, e.sent_ns);
    }
    retire(vi);
}

// Completes the finished descriptors at the head of the VI's pending FIFO.
NICFW_HOT void Engine::retire(Vi& vi) {
    while (!vi.pending.empty() && vi.pending.front().done) {
        TxEntry& e = vi.pending.front();
        complete(vi, false, WorkItem{e.desc, e.memh}, e.status | e.op, (e.status & NICFW_DS_ERROR_MASK) ? 0 : e.len);
        vi.pending.pop();
    }
}

bool Engine::try_control(int peer, const nicfw_frame_hdr& h, const uint8_t* payload) {
    uint8_t* f = link_reserve(peer, static_cast<uint32_t>(sizeof h) + h.msg_len);
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
    queue_control(peer, h, reinterpret_cast<const uint8_t*>(pl));
}

void Engine::queue_control(int peer, const nicfw_frame_hdr& h, const uint8_t* payload) {
    if (static_cast<size_t>(peer) >= backlog_per_peer_.size()) backlog_per_peer_.resize(peer + 1, 0);
    if (backlog_per_peer_[peer] == 0 && try_control(peer, h, payload)) return;
    if (backlog_per_peer_[peer] >= kMaxBacklogPerPeer) {
        bump(status_->nic.drops);  // a live peer that stopped reading: its liveness is its problem
        return;
    }
    backlog_.push_back({peer, h, std::vector<uint8_t>(payload, payload + h.msg_len)});
    backlog_per_peer_[peer]++;
}

void Engine::send_nak(Vi& vi, uint32_t status, uint32_t seq) {
    nicfw_frame_hdr h = frame_to(vi, NICFW_F_NAK);
    h.imm = status;
    h.seq = seq;
    queue_control(vi.peer, h, nullptr);
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

// A read being served lost its memory half way: the requester gets a NAK for it and the
// connection breaks, as for a read refused at once (refuse). Reads after it go unanswered.
void Engine::refuse_read(Vi& vi, uint32_t seq) {
    vi.serve.clear();
    bump(vi.st->c.errors);
    bump(status_->nic.errors);
    refuse(vi, NICFW_DS_RDMA_PROT_ERROR, seq, NICFW_AE_RDMAR_PROT);
}

// Answers the RDMA reads this VI was asked for, oldest first. False if the link filled.
bool Engine::serve_reads(Vi& vi) {
    while (!vi.serve.empty()) {
        ReadService& r = vi.serve.front();
        uint8_t* src;
        // Checked when the request came; again if the memory table changed since.
        if (r.epoch != mem_.epoch()) {
            if (check_remote(vi, r.addr, r.memh, r.len, false, &src) != 0) [[unlikely]] {
                refuse_read(vi, r.seq);
                return true;
            }
            r.epoch = mem_.epoch();
        }
        src = reinterpret_cast<uint8_t*>(r.addr);
        do {
            uint32_t frag = std::min(r.len - r.off, mtu_);
            nicfw_frame_hdr* h;
            uint8_t* p = frame_reserve(vi.peer, frag, &h);
            if (!p) return false;
            if (hostmem::copy(p, src + r.off, frag) != 0) [[unlikely]] {
                // Unmapped by its owner since it was registered. The reserved frame must
                // still be committed: it goes as an ACK of what came before the read.
                *h = frame_to(vi, NICFW_F_ACK);
                h->imm = vi.acks_owed;
                h->seq = r.seq;
                vi.acks_owed = 0;
                frame_commit(vi.peer, h, 0);
                refuse_read(vi, r.seq);
                return true;
            }
            *h = frame_to(vi, NICFW_F_READ_RESP);
            h->msg_len = r.len;
            h->offset = r.off;
            h->frag_len = frag;
            h->seq = r.seq;
            if (r.off + frag == r.len) h->flags = NICFW_FF_LAST;
            frame_commit(vi.peer, h, frag);
            count_tx(vi, frag);
            r.off += frag;
        } while (r.off < r.len);
        vi.serve.pop_front();
    }
    return true;
}

// Picks what vi transmits next: a resend (go-back-N) first, then the head of the send
// queue. False when there is nothing to send now; *blocked when that is because of the
// window or a fence.
HOT_INLINE bool Engine::next_transmission(Vi& vi, bool* blocked) {
    if (vi.rtx_next != vi.rtx_end && start_resend(vi)) return true;
    while (!vi.sq.empty() && vi.state.load(std::memory_order_relaxed) == NICFW_VI_CONNECTED) {
        if (vi.rel_proto && vi.pending.size() >= kTxWindow) {
            *blocked = true;  // the window is full until the peer acknowledges
            return false;
        }
        WorkItem w = vi.sq.front();
        // NICFW_DC_QFENCE: wait until every earlier RDMA read has completed. (Unreadable:
        // no fence; start_send fails it.)
        uint16_t control = 0;
        if (vi.reads_out && hostmem::load(&w.desc->cs.control, &control) && (control & NICFW_DC_QFENCE)) {
            *blocked = true;
            return false;
        }
        if (start_send(vi, w)) return true;
    }
    return false;
}

// Sends the frames of the current request that are still to go. False if the link filled
// (the rest goes on a later step).
HOT_INLINE bool Engine::emit_frames(Vi& vi) {
    // The segments were checked when the request started; if the memory table changed
    // since (a multi-frame message, deregistration in between), again.
    if (vi.tx_epoch != mem_.epoch()) [[unlikely]] {
        if (uint32_t bad = recheck_segs(vi, vi.tx_segs, vi.tx_nsegs)) {
            abort_send(vi, bad);
            return true;
        }
        vi.tx_epoch = mem_.epoch();
    }
    if (vi.tx_op == NICFW_DC_OP_OFFLOAD) [[unlikely]]
        return offload_at(vi.tx_offload_index)->emit(*this, vi, vi.tx_offload, vi.tx_cur_seq);
    const bool rdma = vi.tx_op != NICFW_DC_OP_SEND;
    const uint32_t ext = rdma ? static_cast<uint32_t>(sizeof(nicfw_rdma_ext)) : 0;
    const nicfw_rdma_ext x{vi.tx_raddr, vi.tx_rmemh, 0};
    if (vi.tx_op == NICFW_DC_OP_RDMA_READ) {
        nicfw_frame_hdr* h;
        uint8_t* p = frame_reserve(vi.peer, ext, &h);
        if (!p) return false;
        *h = frame_to(vi, NICFW_F_READ_REQ);
        h->msg_len = vi.tx_len;
        h->seq = vi.tx_cur_seq;
        memcpy(p, &x, sizeof x);
        frame_commit(vi.peer, h, ext);
        count_tx(vi, 0);
        return true;
    }
    // Frames: at least one (a zero-length send still carries immediate data).
    do {
        uint32_t frag = std::min(vi.tx_len - vi.tx_off, mtu_ - ext);
        // The last fragment carries the ACK this VI owes its peer, if there is room
        // (a GAP ACK goes on its own): one frame less per request/reply exchange.
        const bool last = vi.tx_off + frag == vi.tx_len;
        const bool piggy = vi.rel_proto && last && vi.acks_owed && !vi.ack_gap &&
                           sizeof(nicfw_frame_hdr) + ext + frag + sizeof(uint32_t) <= tr_->max_frame();
        const uint32_t tail = piggy ? static_cast<uint32_t>(sizeof(uint32_t)) : 0;
        nicfw_frame_hdr* h;
        uint8_t* p = frame_reserve(vi.peer, ext + frag + tail, &h);
        if (!p) return false;
        if (rdma) {
            memcpy(p, &x, sizeof x);
            p += ext;
        }
        // Gather: copy segments straight into the frame (the position in locals: memcpy
        // would make the compiler reload and store the VI's fields around every call).
        uint32_t seg = vi.tx_seg, seg_off = vi.tx_seg_off;
        for (uint32_t done = 0; done < frag;) {
            const Seg s = vi.tx_segs[seg];
            uint32_t take = std::min(frag - done, s.len - seg_off);
            // zero-length: no pointer. A fault: the program unmapped the buffer it posted.
            if (take && hostmem::copy(p + done, s.ptr + seg_off, take) != 0) [[unlikely]] {
                // The reserved frame must be committed: it goes as a zero-length fragment
                // that no receiver takes (offset past the message), then the request fails.
                nicfw_frame_hdr hd = frame_to(vi, rdma ? NICFW_F_RDMA_WRITE : NICFW_F_DATA);
                hd.msg_len = vi.tx_len;
                hd.offset = vi.tx_len;
                hd.seq = vi.tx_cur_seq;
                memcpy(h, &hd, sizeof hd);  // (the RDMA extension is in place already)
                frame_commit(vi.peer, h, ext);
                abort_send(vi, NICFW_DS_PROTECTION_ERROR);
                return true;
            }
            done += take;
            seg_off += take;
            if (seg_off == s.len) {
                seg++;
                seg_off = 0;
            }
        }
        while (seg < vi.tx_nsegs && vi.tx_segs[seg].len == 0) seg++;
        vi.tx_seg = seg;
        vi.tx_seg_off = seg_off;
        // The header goes to the slot in one copy from a local: the slot's line is the one
        // the receiver last read, so no field is written (or read back) there one by one.
        nicfw_frame_hdr hd;
        hd.type = rdma ? NICFW_F_RDMA_WRITE : NICFW_F_DATA;
        hd.version = NICFW_ABI_VERSION;
        hd.flags = static_cast<uint8_t>(vi.tx_hflags | (last ? NICFW_FF_LAST : 0) | (piggy ? NICFW_FF_ACKED : 0));
        hd.reserved = 0;
        hd.dst_vi = vi.remote_vi;
        hd.src_vi = vi.id;
        hd.msg_len = vi.tx_len;
        hd.offset = vi.tx_off;
        hd.frag_len = frag;
        hd.imm = vi.tx_imm;
        hd.seq = vi.tx_cur_seq;
        memcpy(h, &hd, sizeof hd);
        if (piggy) {
            memcpy(p + frag, &vi.rx_seq, sizeof(uint32_t));
            vi.acks_owed = 0;  // flush_acks drops the VI from its list
        }
        frame_commit(vi.peer, h, ext + frag + tail);
        count_tx(vi, frag);
        vi.tx_off += frag;
    } while (vi.tx_off < vi.tx_len);
    return true;
}

// Transmits as much of vi's work as the link takes. *blocked: the link is full (or the
// window, or a fenced descriptor waiting for earlier RDMA reads).
HOT_INLINE void Engine::transmit_vi(Vi& vi, bool* blocked) {
    *blocked = false;
    if (!vi.serve.empty() && !serve_reads(vi)) {
        *blocked = true;
        return;
    }
    if (vi.refusing) {
        finish_refusal(vi);  // the reads accepted before the refused request are out
        return;
    }
    while (vi.state.load(std::memory_order_relaxed) == NICFW_VI_CONNECTED) {
        if (!vi.tx_busy && !next_transmission(vi, blocked)) return;
        if (!emit_frames(vi)) {
            *blocked = true;
            return;
        }
        if (vi.tx_busy) finish_send(vi);  // (not when emit_frames ended it with an error)
        // Nothing more to send (the usual case): return without another look for it.
        if (vi.sq.empty() && vi.rtx_next == vi.rtx_end) return;
    }
}

NICFW_HOT bool Engine::transmit() {
    bool did = false;
    for (size_t i = 0; i < tx_active_.size();) {
        Vi* vi = tx_active_[i];
        bool blocked;
        uint32_t before = vi->sq.size();
        uint32_t rtx_before = vi->rtx_next;
        transmit_vi(*vi, &blocked);
        did |= vi->sq.size() != before || vi->tx_busy || vi->rtx_next != rtx_before;
        bool idle = vi->sq.empty() && vi->serve.empty() && !vi->tx_busy && vi->rtx_next == vi->rtx_end;
        if (idle || vi->state.load(std::memory_order_relaxed) != NICFW_VI_CONNECTED) {
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
