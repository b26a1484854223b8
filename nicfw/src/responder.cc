// responder.cc -- the receive engine: frame checks, dispatch, matching to receive
// descriptors, scatter, immediate data; the target side of RDMA write and read; and
// the initiator side of their answers (NAK, read data; ACKs are in reliability.cc).
//
// Frames come from the wire and are never trusted. Checks run in a fixed order before
// anything is touched: length, version, type, then field ranges, then the VI and its
// connection, then the receive descriptor or remote buffer against the memory table.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "nicfw/engine.h"
#include "datapath.h"
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

// The opcode table: per frame type, its name (tracing), the fewest bytes a frame of it
// can have (header, extension header, fixed payload), and the block that handles it.
// Handlers check the rest of their frame themselves.
constexpr uint32_t kHdrLen = sizeof(nicfw_frame_hdr);
constexpr uint32_t kConnLen = kHdrLen + offsetof(nicfw_conn_payload, disc);
// Plain function pointers (a lambda per handler): one indirect call, and nothing for
// the sanitizers to trip on, as pointers to members did with GCC's UBSan.
#define NICFW_OP(fn) [](Engine& e, const RxFrame& f, const nicfw_frame_hdr& h) { e.fn(f, h); }
const Engine::FrameOp Engine::kFrameOps[NICFW_F_CORE_MAX + 1] = {
    {"?", UINT32_MAX, nullptr},
    {"DATA", kHdrLen, NICFW_OP(on_data)},
    {"ACK", kHdrLen, NICFW_OP(on_ack)},  // reliability.cc
    {"CONN_REQ", kConnLen, NICFW_OP(on_control)},  // connection.cc, as the rest of the connection frames
    {"CONN_ACCEPT", kConnLen, NICFW_OP(on_control)},
    {"CONN_REJECT", kHdrLen, NICFW_OP(on_control)},
    {"CONN_NOMATCH", kHdrLen, NICFW_OP(on_control)},
    {"PEER_REQ", kConnLen, NICFW_OP(on_control)},
    {"PEER_ACK", kConnLen, NICFW_OP(on_control)},
    {"DISCONNECT", kHdrLen, NICFW_OP(on_control)},
    {"RDMA_WRITE", kHdrLen + sizeof(nicfw_rdma_ext), NICFW_OP(on_data)},
    {"READ_REQ", kHdrLen + sizeof(nicfw_rdma_ext), NICFW_OP(on_read_req)},
    {"READ_RESP", kHdrLen, NICFW_OP(on_read_resp)},
    {"NAK", kHdrLen, NICFW_OP(on_nak)},
};
#undef NICFW_OP

NICFW_HOT void Engine::handle_frame(const RxFrame& f) {
    bump(status_->nic.rx_frames);
    bump(status_->nic.rx_bytes, f.len);
    if (f.len < kHdrLen) {
        bump(status_->nic.drops);
        return;
    }
    nicfw_frame_hdr h;
    memcpy(&h, f.data, sizeof h);  // one snapshot: the sender may still scribble on the frame
    if (h.type > NICFW_F_CORE_MAX) [[unlikely]] {
        on_offload_frame(f, h);
        return;
    }
    if (h.version != NICFW_ABI_VERSION || h.type == 0 || f.len < kFrameOps[h.type].min_len) {
        bump(status_->nic.drops);
        return;
    }
    // Data is the hot path: called directly, so it inlines here; the rest via the table.
    if (h.type == NICFW_F_DATA || h.type == NICFW_F_RDMA_WRITE)
        on_data(f, h);
    else
        kFrameOps[h.type].handle(*this, f, h);
}

// Data for a VI that is not connected to its sender, on a lossy wire: the DISCONNECT
// that ended the connection was probably lost, so it goes again (at most once a
// millisecond). A VI still connecting is left alone: its answer may be on the way.
void Engine::answer_stale(const RxFrame& f, const nicfw_frame_hdr& h) {
    if (!tr_->lossy()) return;
    Vi* vi = vi_by_index(NICFW_VI_INDEX(h.dst_vi));
    if (vi && vi->state.load(std::memory_order_relaxed) == NICFW_VI_CONNECT_PENDING) return;
    if (vi && vi->id == h.dst_vi && vi->peer == f.peer && vi->remote_vi == h.src_vi &&
        vi->state.load(std::memory_order_relaxed) == NICFW_VI_CONNECTED)
        return;
    uint64_t now = now_ns();
    if (now - last_stale_ns_ < 1000000) return;
    last_stale_ns_ = now;
    send_control(f.peer, NICFW_F_DISCONNECT, h.src_vi, h.dst_vi, 0, nullptr);
}

// A remote access through vi (engine.h says what is checked).
uint32_t Engine::check_remote(Vi& vi, uint64_t addr, uint32_t memh, uint64_t len, bool write, uint8_t** host) {
    Region* r = mem_.find(memh);
    if (!r || r->ptag != vi.attrs.ptag) return NICFW_DS_RDMA_PROT_ERROR;
    bool allowed = write ? (r->rdma_write && vi.attrs.rdma_write) : (r->rdma_read && vi.attrs.rdma_read);
    if (!allowed || !MemTable::in_range(*r, addr, len)) return NICFW_DS_RDMA_PROT_ERROR;
    *host = reinterpret_cast<uint8_t*>(addr);
    return 0;
}

// First fragment of a send: take the head receive descriptor and check it.
// Returns false if the message is to be discarded (vi.rx_discard set accordingly).
HOT_INLINE bool Engine::begin_receive(Vi& vi, const nicfw_frame_hdr& h) {
    vi.rx_busy = true;
    vi.rx_discard = false;
    vi.rx_has_desc = false;
    vi.rx_write = false;
    vi.rx_len = h.msg_len;
    vi.rx_status = 0;
    WorkQueue& rq = recv_queue_for(vi, h.flags);
    vi.rx_alt = &rq == &vi.rq_alt;
    // A receive posted before the sender sent this message may still be a doorbell in
    // flight (rung after this step's doorbell pass): it is visible now, so take it.
    if (rq.empty()) service_doorbells();
    if (rq.empty()) {
        // No receive descriptor. Unreliable: the message is dropped. Reliable levels:
        // VIA says the connection breaks (that is why upper layers run credits).
        vi.rx_discard = true;
        bump(vi.st->c.drops);
        bump(status_->nic.drops);
        if (vi.attrs.reliability != NICFW_REL_UNRELIABLE) {
            raise(&vi, nullptr, nullptr, NICFW_RES_VI, NICFW_AE_RECVQ_EMPTY);
            flush_vi(vi, NICFW_VI_ERROR, true, NICFW_AE_CONN_LOST);
        }
        return false;
    }
    WorkItem& w = rq.front();
    vi.rx_has_desc = true;
    // Not zeroed: check_desc fills the fields read below whenever it returns 0 (a `{}`
    // here compiled to a `rep stosd`, a tenth of this function's time on every message).
    nicfw_desc_ctrl cs;
    const Region* reg = nullptr;
    uint32_t bad = check_desc(vi, w, &cs, &reg);
    if (bad == 0 && (cs.control & NICFW_DC_RESERVED & ~NICFW_DC_REPLY)) bad = NICFW_DS_FORMAT_ERROR;
    const uint16_t n = bad ? 0 : cs.seg_count;
    vi.rx_epoch = mem_.epoch();
    if (bad == 0) bad = validate_segments(vi, w.desc, 0, n, vi.rx_segs, &vi.rx_cap, w, reg);
    if (bad == 0 && h.msg_len > vi.rx_cap) bad = NICFW_DS_LENGTH_ERROR;
    vi.rx_nsegs = n;
    if (bad) {
        // The descriptor completes with the error; the message is consumed by it.
        vi.rx_status = bad;
        vi.rx_discard = true;
    }
    return !vi.rx_discard;
}

// First fragment of an RDMA write: check the remote buffer it names.
void Engine::begin_write(Vi& vi, const nicfw_frame_hdr& h, const nicfw_rdma_ext& x) {
    vi.rx_busy = true;
    vi.rx_write = true;
    vi.rx_has_desc = false;
    vi.rx_len = h.msg_len;
    vi.rx_raddr = x.addr;
    vi.rx_rmemh = x.memh;
    vi.rx_epoch = mem_.epoch();
    vi.rx_status = check_remote(vi, x.addr, x.memh, h.msg_len, true, &vi.rx_dst);
    vi.rx_discard = vi.rx_status != 0;
}

// Copies a fragment to message offset off of the current receive descriptor. False if
// the memory faulted (the program unmapped or write-protected it after registering it).
HOT_INLINE static bool scatter(const Seg* segs, uint32_t nsegs, uint32_t off, const uint8_t* src, uint32_t len) {
    uint32_t i = 0;
    while (i < nsegs && off >= segs[i].len) off -= segs[i++].len;
    while (len && i < nsegs) {
        uint32_t take = std::min(len, segs[i].len - off);
        // zero-length segments have no pointer
        if (take && hostmem::copy(segs[i].ptr + off, src, take) != 0) return false;
        src += take;
        len -= take;
        off = 0;
        i++;
    }
    return true;
}

// Whether the message in progress may still land where its first fragment was checked
// to go: only asked when the memory table changed since (MemTable::epoch).
bool Engine::rx_mem_ok(Vi& vi) {
    bool ok = vi.rx_write ? check_remote(vi, vi.rx_raddr, vi.rx_rmemh, vi.rx_len, true, &vi.rx_dst) == 0
                          : recheck_segs(vi, vi.rx_segs, vi.rx_nsegs) == 0;
    if (ok) vi.rx_epoch = mem_.epoch();
    return ok;
}

// The message in progress lost its memory half way (deregistered, permissions taken
// away, unmapped): nothing more of it lands, and it ends now with a protection error,
// as a bad buffer at its first fragment would have (finish_receive: a reliable VI
// refuses a write with a NAK, and breaks on a receive; unreliable, the rest is dropped).
void Engine::fail_receive(Vi& vi) {
    vi.rx_discard = true;
    finish_receive(vi, vi.rx_write ? NICFW_DS_RDMA_PROT_ERROR : NICFW_DS_PROTECTION_ERROR, nullptr);
}

// A refused request breaks a reliable connection (VIA 1.0): the initiator first learns
// which request failed (earlier ones are acknowledged before the NAK), then the
// connection goes.
void Engine::refuse(Vi& vi, uint32_t status, uint32_t seq, nicfw_async_code why) {
    send_ack_now(vi, seq);
    vi.refusing = true;
    vi.refuse_status = status;
    vi.refuse_seq = seq;
    vi.refuse_why = why;
    if (vi.serve.empty()) {
        finish_refusal(vi);
    } else {
        list_tx(vi);  // reads accepted earlier go out first (transmit())
    }
}

void Engine::finish_refusal(Vi& vi) {
    vi.refusing = false;
    send_nak(vi, vi.refuse_status, vi.refuse_seq);
    raise(&vi, nullptr, nullptr, NICFW_RES_VI, vi.refuse_why);
    flush_vi(vi, NICFW_VI_ERROR, true, NICFW_AE_CONN_LOST);
}

// Ends the message in progress: completes its receive descriptor (if one was taken)
// with status, and acknowledges it where the initiator waits for that.
HOT_INLINE void Engine::finish_receive(Vi& vi, uint32_t status, const nicfw_frame_hdr* last) {
    vi.rx_busy = false;
    vi.rx_seq = vi.rx_msg_seq + 1;
    vi.rx_gap_frames = 0;
    const bool reliable = vi.attrs.reliability != NICFW_REL_UNRELIABLE;
    if (vi.rx_write) {
        vi.rx_write = false;
        if (status & NICFW_DS_ERROR_MASK) {
            bump(vi.st->c.errors);
            bump(status_->nic.errors);
            if (reliable) refuse(vi, status & NICFW_DS_ERROR_MASK, vi.rx_msg_seq, NICFW_AE_RDMAW_PROT);
            return;  // unreliable: the write is dropped, and counted
        }
        if (last && (last->flags & NICFW_FF_IMMEDIATE)) {
            // RDMA write with immediate data consumes a receive descriptor.
            WorkQueue& rq = recv_queue_for(vi, last->flags);
            const uint32_t qk = &rq == &vi.rq_alt ? NICFW_ALTQ : NICFW_RECVQ;
            if (rq.empty()) service_doorbells();  // a receive posted just before (see begin_receive)
            if (rq.empty()) {
                bump(vi.st->c.drops);
                bump(status_->nic.drops);
                if (reliable) refuse(vi, NICFW_DS_REMOTE_DESC_ERROR, last->seq, NICFW_AE_RECVQ_EMPTY);
                return;
            }
            WorkItem w = rq.front();
            rq.pop();
            nicfw_desc_ctrl cs;
            uint32_t bad = check_desc(vi, w, &cs);
            if (bad == 0 && (cs.control & NICFW_DC_RESERVED & ~NICFW_DC_REPLY))
                bad = NICFW_DS_FORMAT_ERROR;  // checked as any receive descriptor is
            complete_on(vi, qk, w, bad ? bad : NICFW_DS_OP_REMOTE_RDMA_WRITE | NICFW_DS_IMMEDIATE,
                        bad ? 0 : vi.rx_len, bad ? nullptr : &last->imm);
        }
        if (reliable) owe_ack(vi);
        return;
    }
    if (!vi.rx_has_desc) return;  // discarded for lack of a descriptor
    vi.rx_has_desc = false;
    WorkQueue& rq = vi.rx_alt ? vi.rq_alt : vi.rq;
    WorkItem w = rq.front();
    rq.pop();
    const bool imm = last && (last->flags & NICFW_FF_IMMEDIATE);
    if (imm) status |= NICFW_DS_IMMEDIATE;
    complete_on(vi, vi.rx_alt ? NICFW_ALTQ : NICFW_RECVQ, w, status,
                (status & NICFW_DS_ERROR_MASK) ? 0 : vi.rx_len, imm ? &last->imm : nullptr);
    if (status & NICFW_DS_ERROR_MASK) {
        // VIA: on a reliable VI a message the receive descriptor cannot take (too small,
        // bad segments) breaks the connection.
        if (reliable) flush_vi(vi, NICFW_VI_ERROR, true, NICFW_AE_CONN_LOST);
        return;
    }
    // Reliable reception waits for this ACK; so does every reliable level on a lossy wire.
    if (vi.attrs.reliability == NICFW_REL_RELIABLE_RECEPTION || vi.rel_proto) owe_ack(vi);
}

// Forgets the message in progress; its receive descriptor stays at the queue head. With
// retransmission (rel_proto) the sender resends the message whole and that descriptor
// takes it; unreliable, the next message does.
static void restart_receive(Vi& vi) {
    vi.rx_busy = false;
    vi.rx_has_desc = false;
    vi.rx_write = false;
    vi.rx_discard = false;
}

// rel_proto: a frame that is not the next one in order. Before rx_seq it is a duplicate
// (re-acknowledge: our ACK may have been lost); beyond it, evidence of a loss.
void Engine::out_of_order(Vi& vi, const nicfw_frame_hdr& h) {
    bump(vi.st->c.drops);
    bump(status_->nic.drops);
    int32_t ahead = static_cast<int32_t>(h.seq - vi.rx_seq);
    if (ahead < 0)
        owe_ack(vi);
    else if (ahead > 0 || !vi.rx_busy)
        owe_gap_ack(vi);
}

// DATA and RDMA_WRITE fragments.
HOT_INLINE void Engine::on_data(const RxFrame& f, const nicfw_frame_hdr& h) {
    const bool write = h.type == NICFW_F_RDMA_WRITE;
    const uint32_t ext = write ? static_cast<uint32_t>(sizeof(nicfw_rdma_ext)) : 0;
    // Field ranges: the fragment must fit the frame and the message.
    if (f.len < sizeof(nicfw_frame_hdr) + ext || h.frag_len > f.len - sizeof(nicfw_frame_hdr) - ext ||
        h.msg_len > NICFW_MAX_TRANSFER || h.offset > h.msg_len || h.frag_len > h.msg_len - h.offset) {
        bump(status_->nic.drops);
        return;
    }
    Vi* vip = connected_target(*this, f, h);
    if (!vip) {
        bump(status_->nic.drops);  // stale or stray: no connected VI for it
        answer_stale(f, h);
        return;
    }
    Vi& vi = *vip;
    bump(vi.st->c.rx_frames);
    bump(vi.st->c.rx_bytes, h.frag_len);
    nicfw_rdma_ext x{};
    if (write) memcpy(&x, f.data + sizeof(nicfw_frame_hdr), sizeof x);
    // A piggybacked acknowledgement follows the payload; it counts whatever the fragment's fate.
    if ((h.flags & NICFW_FF_ACKED) && vi.rel_proto) {
        size_t at = sizeof(nicfw_frame_hdr) + ext + h.frag_len;
        if (f.len < at + sizeof(uint32_t)) {
            bump(status_->nic.drops);
            return;
        }
        uint32_t ack;
        memcpy(&ack, f.data + at, sizeof ack);
        apply_ack(vi, ack, false);
        if (vi.state.load(std::memory_order_relaxed) != NICFW_VI_CONNECTED) return;
    }
    if (vi.rel_proto) {
        // Retransmission on: exactly the next request, fragments in order; anything else
        // is dropped and reported (out_of_order). A request's first fragment while it is
        // in progress means the sender went back: start it again.
        if (h.seq != vi.rx_seq || (h.offset != 0 && (!vi.rx_busy || h.offset != vi.rx_got))) {
            if (h.seq == vi.rx_seq && vi.rx_busy && h.offset > vi.rx_got) restart_receive(vi);  // lost fragment
            out_of_order(vi, h);
            return;
        }
        if (h.offset == 0 && vi.rx_busy) restart_receive(vi);
        if (vi.rx_busy && (h.msg_len != vi.rx_len || vi.rx_write != write)) {
            bump(status_->nic.drops);  // not the request in progress: a forged or broken frame
            return;
        }
    }
    if (h.offset == 0) {
        // At most once: a message older than one already seen is a duplicate (or was
        // overtaken on a reordering link) and is dropped. Lossless links never do that.
        if (static_cast<int32_t>(h.seq - vi.rx_seq) < 0 || (vi.rx_busy && h.seq == vi.rx_msg_seq)) {
            bump(vi.st->c.drops);
            bump(status_->nic.drops);
            return;
        }
        // A reliable VI takes exactly the next message: a gap is a lost message, and
        // without retransmission (docs/reliability.md) that breaks the connection.
        if (vi.attrs.reliability != NICFW_REL_UNRELIABLE && h.seq != vi.rx_seq) {
            if (vi.rx_busy) abandon_receive(vi);
            if (vi.state.load(std::memory_order_relaxed) == NICFW_VI_CONNECTED)
                flush_vi(vi, NICFW_VI_ERROR, true, NICFW_AE_CONN_LOST);
            return;
        }
        // A new message while one is unfinished: the old one lost its tail.
        if (vi.rx_busy) abandon_receive(vi);
        if (vi.state.load(std::memory_order_relaxed) != NICFW_VI_CONNECTED) return;  // that broke it
        vi.rx_msg_seq = h.seq;
        vi.rx_got = 0;
        if (write) {
            begin_write(vi, h, x);
        } else if (!begin_receive(vi, h) && vi.state.load(std::memory_order_relaxed) != NICFW_VI_CONNECTED) {
            return;  // the connection broke
        }
    } else if (!vi.rx_busy || h.seq != vi.rx_msg_seq || h.msg_len != vi.rx_len || vi.rx_write != write ||
               h.offset < vi.rx_got) {
        bump(status_->nic.drops);  // stray, stale or duplicate fragment
        return;
    } else if (h.offset > vi.rx_got) {
        abandon_receive(vi);   // a fragment went missing: the message cannot complete
        return;
    }
    const uint8_t* payload = f.data + sizeof(nicfw_frame_hdr) + ext;
    if (!vi.rx_discard) {
        // The memory was checked at the first fragment; if the table changed since, again.
        bool placed = (vi.rx_epoch == mem_.epoch() || rx_mem_ok(vi)) &&
                      (write ? hostmem::copy(vi.rx_dst + h.offset, payload, h.frag_len) == 0
                             : scatter(vi.rx_segs, vi.rx_nsegs, h.offset, payload, h.frag_len));
        if (!placed) [[unlikely]] {
            fail_receive(vi);
            return;
        }
    }
    vi.rx_got += h.frag_len;
    if (!(h.flags & NICFW_FF_LAST)) return;
    if (vi.rx_got != h.msg_len) {
        abandon_receive(vi);  // flagged last but short
        return;
    }
    finish_receive(vi, vi.rx_status, &h);
}

// The message in progress cannot complete (a fragment was lost). Unreliable: it is
// dropped and its receive descriptor waits for the next message. Reliable: without
// retransmission a loss is an error, and the connection breaks.
void Engine::abandon_receive(Vi& vi) {
    bump(vi.st->c.drops);
    bump(status_->nic.drops);
    if (vi.rel_proto) {
        restart_receive(vi);  // retransmission brings it again
        return;
    }
    if (vi.attrs.reliability == NICFW_REL_UNRELIABLE) {
        restart_receive(vi);
        vi.rx_seq = vi.rx_msg_seq + 1;  // lost for good: the next message may take its place
        return;
    }
    finish_receive(vi, NICFW_DS_PARTIAL_ERROR, nullptr);
}

// Target of an RDMA read: check the buffer, queue the answer for the requester.
void Engine::on_read_req(const RxFrame& f, const nicfw_frame_hdr& h) {
    if (f.len < sizeof(nicfw_frame_hdr) + sizeof(nicfw_rdma_ext) || h.msg_len > NICFW_MAX_TRANSFER) {
        bump(status_->nic.drops);
        return;
    }
    Vi* vi = connected_target(*this, f, h);
    if (!vi || vi->attrs.reliability == NICFW_REL_UNRELIABLE) {
        bump(status_->nic.drops);  // RDMA read exists on reliable VIs only
        if (!vi) answer_stale(f, h);
        return;
    }
    nicfw_rdma_ext x;
    memcpy(&x, f.data + sizeof(nicfw_frame_hdr), sizeof x);
    uint8_t* src = nullptr;
    const ReadService service{x.addr, x.memh, h.msg_len, 0, h.seq, mem_.epoch()};
    // A read request takes a sequence number like a message: a duplicate is dropped, a
    // gap means something before it was lost.
    bool repeat;
    if (!take_request(*vi, h, &repeat)) {
        // With retransmission on, the answer may be what was lost: reads are idempotent,
        // so a repeated request is served again (unless its answer is still queued; and
        // no more than a window's worth, whatever a peer sends).
        if (repeat && vi->serve.size() < kTxWindow &&
            check_remote(*vi, x.addr, x.memh, h.msg_len, false, &src) == 0 &&
            std::none_of(vi->serve.begin(), vi->serve.end(), [&](const ReadService& r) { return r.seq == h.seq; })) {
            vi->serve.push_back(service);
            list_tx(*vi);
        }
        return;
    }
    if (uint32_t bad = check_remote(*vi, x.addr, x.memh, h.msg_len, false, &src)) {
        bump(vi->st->c.errors);
        bump(status_->nic.errors);
        refuse(*vi, bad, h.seq, NICFW_AE_RDMAR_PROT);
        return;
    }
    // An initiator has at most a send queue's worth of reads outstanding; a peer that asks
    // for more is not one, and is not given memory for it.
    if (vi->serve.size() >= NICFW_MAX_DESC_PER_QUEUE) [[unlikely]] {
        bump(status_->nic.drops);
        flush_vi(*vi, NICFW_VI_ERROR, true, NICFW_AE_CONN_LOST);
        return;
    }
    vi->serve.push_back(service);
    list_tx(*vi);
}

// Initiator: data for the oldest outstanding RDMA read.
void Engine::on_read_resp(const RxFrame& f, const nicfw_frame_hdr& h) {
    Vi* vi = connected_target(*this, f, h);
    if (!vi || h.frag_len > f.len - sizeof(nicfw_frame_hdr)) {
        bump(status_->nic.drops);
        return;
    }
    auto it = std::find_if(vi->pending.begin(), vi->pending.end(),
                           [](const TxEntry& e) { return e.kind == TxEntry::kRead && !e.done; });
    // Reads are answered in order, in order fragments: anything else is not ours.
    if (it == vi->pending.end() || it->seq != h.seq || it->len != h.msg_len || it->got != h.offset ||
        h.frag_len > it->len - it->got) {
        bump(status_->nic.drops);
        // A fragment of the awaited answer went missing: ask for the read again.
        if (vi->rel_proto && it != vi->pending.end() && it->seq == h.seq && h.offset > it->got) on_gap(*vi, h.seq);
        return;
    }
    bump(vi->st->c.rx_frames);
    bump(vi->st->c.rx_bytes, h.frag_len);
    const Seg* segs = it->segs.data();
    const auto nsegs = static_cast<uint32_t>(it->segs.size());
    // The buffers were checked at post; if the memory table changed since, again.
    if ((it->epoch != mem_.epoch() && recheck_segs(*vi, segs, nsegs) != 0) ||
        !scatter(segs, nsegs, h.offset, f.data + sizeof(nicfw_frame_hdr), h.frag_len)) [[unlikely]] {
        // The read's own buffer went away under it: it fails, and the reliable VI breaks.
        it->status = NICFW_DS_PROTECTION_ERROR;
        it->done = true;
        vi->reads_out--;
        retire(*vi);
        flush_vi(*vi, NICFW_VI_ERROR, true, NICFW_AE_POST_DESC);
        return;
    }
    it->epoch = mem_.epoch();
    it->got += h.frag_len;
    if (it->got == it->len) {
        it->done = true;
        vi->reads_out--;
        retire(*vi);
        if (vi->rel_proto) tx_progress(*vi, rtx_clock());
    }
}

// NAK: the request with sequence number seq failed at the target with imm's status.
void Engine::on_nak(const RxFrame& f, const nicfw_frame_hdr& h) {
    Vi* vi = connected_target(*this, f, h);
    if (!vi) {
        bump(status_->nic.drops);
        return;
    }
    // The NAK names the refused request by its sequence number.
    auto it = std::find_if(vi->pending.begin(), vi->pending.end(), [&](const TxEntry& e) {
        return e.kind != TxEntry::kLocal && !e.done && e.seq == h.seq;
    });
    if (it == vi->pending.end()) {
        bump(status_->nic.drops);  // nothing of ours awaits that answer: a stray NAK
        return;
    }
    // Only error bits cross the wire: a peer cannot set our DONE or op bits.
    it->status = (h.imm & NICFW_DS_ERROR_MASK) ? (h.imm & NICFW_DS_ERROR_MASK) : NICFW_DS_TRANSPORT_ERROR;
    it->done = true;
    nicfw_async_code why = NICFW_AE_RDMAW_PROT;
    if (it->answered()) vi->reads_out--;
    if (it->kind == TxEntry::kRead) why = NICFW_AE_RDMAR_PROT;
    retire(*vi);  // invalidates it
    flush_vi(*vi, NICFW_VI_ERROR, false, why);
}

}  // namespace softvia::nicfw
