// offload/atomics -- NIC atomics: remote fetch-add and compare-and-swap on 8-byte aligned
// words of registered memory, the first offload written against nicfw/offload.h.
//
// Descriptor (send queue, op NICFW_DC_OP_OFFLOAD, offload op FETCH_ADD or CMP_SWAP):
//   segment 0  address segment: the remote word (address, memory handle)
//   segment 1  nicfw_atomic_args: add, or compare and swap
//   segment 2  data segment: 8 bytes of local registered memory for the old value
// Wire: ATOMIC_REQ (seq, imm = op; nicfw_rdma_ext; nicfw_atomic_args), answered by
// ATOMIC_RESP (seq; the old value) or a NAK with the refusal's status.
//
// The target checks a request as it checks an RDMA write (handle, range, protection tag,
// the VI's RDMA write enable) and also the region's atomics enable bit and the word's
// alignment; it applies the operation with one locked instruction on host memory
// (hostmem::fetch_add64 / cas64: a fault refuses it, nothing changes).
//
// Exactly once: atomics need a reliable VI. On a lossy wire the initiator resends a
// request whose answer did not come; the target keeps the answers of the last kTxWindow
// requests it applied, by sequence number, and answers a repeat from there instead of
// applying it again (as RDMA NICs keep their responder resources). The initiator never
// has more than kTxWindow requests in flight, so a repeat is always still there.
//
// Same host (grants.h): when the region lies in memory the target's NIC allocated and the
// initiator's NIC shares the host, the target's answer is followed by an ATOMIC_GRANT, and
// the initiator then applies later atomics on that region itself, without the wire, while
// the grant holds (the target takes it back before any change to the region or the
// connection takes effect).
#include <cstring>

#include "grants.h"
#include "nicfw/engine.h"
#include "nicfw/offload.h"
#include "src/datapath.h"  // the inline frame and descriptor services

namespace softvia::nicfw {
namespace {

enum Counter : uint32_t { kApplied, kReplayed, kRefused, kShortcut };
constexpr uint32_t kReqPayload = sizeof(nicfw_rdma_ext) + sizeof(nicfw_atomic_args);
constexpr uint32_t kHdrLen = sizeof(nicfw_frame_hdr);

// The answers a VI's target side keeps for repeats.
struct AtomicsViState : OffloadViState {
    struct Answer {
        uint32_t seq;
        bool valid;
        uint64_t old;
    };
    Answer answers[kTxWindow] = {};
    std::unique_ptr<atomics::GrantPage> granted;  // target side: what this VI let its peer do
    atomics::GrantCache held;                     // initiator side: what the peer let us do
};

// This offload's registry index (its per-VI state slot and counters), looked up once.
uint32_t self_index() {
    static const uint32_t index = [] {
        uint32_t i = 0;
        offload_for_op(NICFW_OFFLOAD_OP_FETCH_ADD, &i);
        return i;
    }();
    return index;
}

AtomicsViState& vi_state(Vi& vi) {
    auto& slot = vi.offload_state[self_index()];
    if (!slot) slot = std::make_unique<AtomicsViState>();
    return static_cast<AtomicsViState&>(*slot);
}

AtomicsViState* vi_state_if(Vi& vi) { return static_cast<AtomicsViState*>(vi.offload_state[self_index()].get()); }

uint32_t load(Engine& e, Vi& vi, const WorkItem& w, const nicfw_desc_ctrl& cs, OffloadRequest* req) {
    // Exactly once needs sequence numbers the target keeps: reliable VIs only. No
    // immediate data, no reply class: an atomic consumes no receive descriptor.
    if (vi.attrs.reliability == NICFW_REL_UNRELIABLE || cs.seg_count != 3 ||
        (cs.control & (NICFW_DC_IMMEDIATE | NICFW_DC_REPLY)))
        return NICFW_DS_FORMAT_ERROR;
    nicfw_desc_seg remote;
    nicfw_atomic_args args;
    if (!hostmem::load(desc_segment(w.desc, 0), &remote) || !hostmem::load(desc_segment(w.desc, 1), &args))
        return NICFW_DS_PROTECTION_ERROR;
    if (remote.addr % 8) return NICFW_DS_FORMAT_ERROR;  // the target would refuse it too
    uint32_t total = 0;
    if (uint32_t bad = e.validate_segments(vi, w.desc, 2, 1, &req->result, &total, w, nullptr)) return bad;
    if (total != sizeof(uint64_t)) return NICFW_DS_LENGTH_ERROR;
    req->raddr = remote.addr;
    req->rmemh = remote.memh;
    req->arg[0] = args.operand[0];
    req->arg[1] = args.operand[1];
    return 0;
}

bool emit(Engine& e, Vi& vi, const OffloadRequest& req, uint32_t seq) {
    nicfw_frame_hdr* h;
    uint8_t* p = e.frame_reserve(vi.peer, kReqPayload, &h);
    if (!p) return false;
    *h = Engine::frame_to(vi, NICFW_F_ATOMIC_REQ);
    h->msg_len = sizeof(uint64_t);
    h->seq = seq;
    h->imm = req.op;
    const nicfw_rdma_ext x{req.raddr, req.rmemh, 0};
    const nicfw_atomic_args a{{req.arg[0], req.arg[1]}};
    memcpy(p, &x, sizeof x);
    memcpy(p + sizeof x, &a, sizeof a);
    e.frame_commit(vi.peer, h, kReqPayload);
    e.count_tx(vi, 0);
    return true;
}

void send_answer(Engine& e, Vi& vi, uint32_t seq, uint64_t old) {
    nicfw_frame_hdr h = Engine::frame_to(vi, NICFW_F_ATOMIC_RESP);
    h.msg_len = sizeof old;
    h.seq = seq;
    e.queue_control(vi.peer, h, reinterpret_cast<const uint8_t*>(&old));
}

// Target, after applying an atomic on region memh for vi's peer: if the peer shares this
// host and the region lies in NIC-allocated memory, let it apply the next ones itself.
void offer_grant(Engine& e, Vi& vi, AtomicsViState& st, uint32_t memh) {
    if (st.granted && st.granted->granted(memh)) return;
    if (e.peer_pid(vi) == 0) return;  // another host (or the fault injector's wire)
    const Region* r = e.region(memh);
    const uint64_t base = r->base.load(std::memory_order_relaxed), len = r->len.load(std::memory_order_relaxed);
    int fd;
    uint64_t off, file_len;
    if (!e.shared_file(base, len, &fd, &off, &file_len)) return;
    if (!st.granted) st.granted = std::make_unique<atomics::GrantPage>();
    nicfw_atomic_grant g;
    if (!st.granted->grant(memh, base, len, fd, off, &g)) return;
    nicfw_frame_hdr h = Engine::frame_to(vi, NICFW_F_ATOMIC_GRANT);
    h.msg_len = sizeof g;
    e.queue_control(vi.peer, h, reinterpret_cast<const uint8_t*>(&g));
}

// Target: check, apply once, answer.
void on_request(Engine& e, const RxFrame& f, const nicfw_frame_hdr& h) {
    Vi* vi = e.frame_target(f, h);
    if (!vi || vi->attrs.reliability == NICFW_REL_UNRELIABLE) {
        e.count_drop();  // atomics exist on reliable VIs only
        if (!vi) e.answer_stale(f, h);
        return;
    }
    nicfw_rdma_ext x;
    nicfw_atomic_args a;
    memcpy(&x, f.data + kHdrLen, sizeof x);
    memcpy(&a, f.data + kHdrLen + sizeof x, sizeof a);
    bool repeat;
    if (!e.take_request(*vi, h, &repeat)) {
        // Applied before, and its answer may be what was lost: the same answer again.
        // (The state is looked up only now: a loss on a lossless wire ends the connection,
        // and with it the state.)
        const AtomicsViState* st = repeat ? vi_state_if(*vi) : nullptr;
        const AtomicsViState::Answer* slot = st ? &st->answers[h.seq % kTxWindow] : nullptr;
        if (slot && slot->valid && slot->seq == h.seq) {
            send_answer(e, *vi, h.seq, slot->old);
            e.offload_count(self_index(), kReplayed);
        }
        return;
    }
    uint8_t* host = nullptr;
    uint32_t bad = e.check_remote(*vi, x.addr, x.memh, sizeof(uint64_t), true, &host);
    if (bad == 0) {
        const Region* r = e.region(x.memh);
        if (!r->atomics || x.addr % 8) bad = NICFW_DS_RDMA_PROT_ERROR;
    }
    if (bad == 0 && h.imm != NICFW_OFFLOAD_OP_FETCH_ADD && h.imm != NICFW_OFFLOAD_OP_CMP_SWAP)
        bad = NICFW_DS_FORMAT_ERROR;
    uint64_t old = 0;
    if (bad == 0) {
        auto* word = reinterpret_cast<uint64_t*>(host);
        const int rc = h.imm == NICFW_OFFLOAD_OP_FETCH_ADD ? hostmem::fetch_add64(word, a.operand[0], &old)
                                                           : hostmem::cas64(word, a.operand[0], a.operand[1], &old);
        if (rc != 0) bad = NICFW_DS_RDMA_PROT_ERROR;  // unmapped or made read-only since it was registered
    }
    if (bad) {
        e.count_error(*vi);
        e.offload_count(self_index(), kRefused);
        e.refuse(*vi, bad, h.seq, NICFW_AE_RDMAW_PROT);
        return;
    }
    AtomicsViState& st = vi_state(*vi);
    st.answers[h.seq % kTxWindow] = AtomicsViState::Answer{h.seq, true, old};
    e.offload_count(self_index(), kApplied);
    send_answer(e, *vi, h.seq, old);
    offer_grant(e, *vi, st, x.memh);
}

// Initiator: the old value for request seq.
void on_answer(Engine& e, const RxFrame& f, const nicfw_frame_hdr& h) {
    Vi* vi = e.frame_target(f, h);
    if (!vi || h.msg_len != sizeof(uint64_t)) {
        e.count_drop();
        return;
    }
    uint64_t old;
    memcpy(&old, f.data + kHdrLen, sizeof old);
    // The target took every request before this one: it acknowledges them too.
    e.apply_ack(*vi, h.seq, false);
    if (vi->state.load(std::memory_order_relaxed) != NICFW_VI_CONNECTED) return;
    e.answer_offload(*vi, h.seq, &old, sizeof old);
}

// Initiator: a same-host target's grant. Mapped if it can be (else ignored: the wire
// keeps working); the process is the one our link to the peer knows, never the frame's.
void on_grant(Engine& e, const RxFrame& f, const nicfw_frame_hdr& h) {
    Vi* vi = e.frame_target(f, h);
    const uint32_t pid = vi ? e.peer_pid(*vi) : 0;
    if (!vi || pid == 0 || h.msg_len != sizeof(nicfw_atomic_grant) ||
        vi->state.load(std::memory_order_relaxed) != NICFW_VI_CONNECTED) {
        e.count_drop();
        return;
    }
    nicfw_atomic_grant g;
    memcpy(&g, f.data + kHdrLen, sizeof g);
    if (vi_state(*vi).held.add(pid, g) != 0) e.count_drop();
}

// Initiator: a request the VI's grants cover is applied here, without the wire.
bool shortcut(Engine& e, Vi& vi, const OffloadRequest& req, uint64_t answer[2]) {
    AtomicsViState* st = vi_state_if(vi);
    if (!st || st->held.empty() || !e.peer_alive(vi)) return false;
    if (!st->held.apply(req.rmemh, req.raddr, req.op, req.arg[0], req.arg[1], &answer[0])) return false;
    e.offload_count(self_index(), kShortcut);
    return true;
}

// Target: region memh changed; every grant of it ends.
void memory_changed(Engine& e, uint32_t memh) {
    e.for_each_vi([memh](Vi& vi) {
        AtomicsViState* st = vi_state_if(vi);
        if (st && st->granted) st->granted->revoke(memh);
    });
}

const OffloadFrameOp kFrames[] = {
    {NICFW_F_ATOMIC_REQ, "ATOMIC_REQ", kHdrLen + kReqPayload, on_request},
    {NICFW_F_ATOMIC_RESP, "ATOMIC_RESP", kHdrLen + sizeof(uint64_t), on_answer},
    {NICFW_F_ATOMIC_GRANT, "ATOMIC_GRANT", kHdrLen + sizeof(nicfw_atomic_grant), on_grant},
};

}  // namespace

extern const Offload kAtomicsOffload;
const Offload kAtomicsOffload = {
    "atomics",
    (1u << NICFW_OFFLOAD_OP_FETCH_ADD) | (1u << NICFW_OFFLOAD_OP_CMP_SWAP),
    NICFW_DS_OP_ATOMIC,
    kFrames,
    sizeof kFrames / sizeof kFrames[0],
    {"applied", "replayed", "refused", "shortcut"},
    0,  // routes no messages
    load,
    emit,
    shortcut,
    memory_changed,
};

}  // namespace softvia::nicfw
