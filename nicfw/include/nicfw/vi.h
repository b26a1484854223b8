// nicfw/vi.h -- the device's objects: a VI (its queues, connection, the message being
// sent and the one being received, retransmission and ACK state), a CQ ring, a
// connection request and a standing listener. Device state only: the driver reads
// Vi::state, Vi::conn_result and the CQ ring, and nothing else (docs/abi.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "nicfw/abi.h"
#include "nicfw/offload.h"
#include "nicfw/queues.h"
#include "nicfw/spinlock.h"

namespace softvia::nicfw {

// Completion queue: the device produces, the driver consumes.
struct Cq {
    void* user = nullptr;
    std::vector<nicfw_cqe> entries;
    std::atomic<uint64_t> prod{0};  // written by the firmware
    std::atomic<uint64_t> cons{0};  // written by the driver (under its own CQ lock)
    uint32_t bound = 0;             // VI queues bound to this CQ
    uint64_t overflows = 0;
};

// Remote side of a connection request, as the server sees it (VipConnectWait).
struct ConnRequest {
    int peer = -1;
    uint32_t client_vi = 0;
    uint32_t req_id = 0;
    uint16_t reliability = 0;
    uint32_t max_transfer = 0;
    bool rdma_write = false, rdma_read = false;
    std::vector<uint8_t> disc;  // the client's own discriminator
    std::vector<uint8_t> addr;  // the client NIC's address
};

struct Listener {
    std::vector<uint8_t> disc;
    std::atomic<bool> matched{false};
    ConnRequest req;  // valid once matched
};

enum class ConnOp : uint8_t { kNone, kClient, kPeer };

struct ViAttrs {
    uint16_t reliability = NICFW_REL_UNRELIABLE;
    uint32_t ptag = 0;
    bool rdma_write = false, rdma_read = false;
    uint32_t max_transfer = 0;
};

// An RDMA read this NIC serves as the target: the remote buffer as the request named
// it (checked again when the memory table changes while it is served) and how far it got.
struct ReadService {
    uint64_t addr;
    uint32_t memh, len, off, seq;
    uint32_t epoch;  // MemTable::epoch when it was checked
};

struct Vi {
    Vi() : sq(NICFW_MAX_DESC_PER_QUEUE), rq(NICFW_MAX_DESC_PER_QUEUE), rq_alt(NICFW_MAX_DESC_PER_QUEUE) {}
    uint32_t id = 0;  // NICFW_VI_MAKE(index, generation)
    void* user = nullptr;
    uint64_t user_context = 0;  // the program's word, copied into each CQ entry (set_vi_context)
    ViAttrs attrs;
    Cq* scq = nullptr;
    Cq* rcq = nullptr;

    // Connection. state is written by the firmware and read by the driver.
    std::atomic<uint32_t> state{NICFW_VI_IDLE};
    int peer = -1;
    uint32_t remote_vi = 0;
    ViAttrs remote;  // the peer VI's attributes, learnt at connect
    ConnOp op = ConnOp::kNone;
    uint32_t req_id = 0;
    std::atomic<int> conn_result{-1};  // nicfw_result of the last connect; -1 while pending
    std::vector<uint8_t> local_disc, remote_disc;
    uint64_t deadline_ns = 0, resend_ns = 0;
    uint64_t resend_gap_ns = 0;  // doubles from 1 ms to 64 ms between resends (peer request;
                                 // client request on a lossy wire)

    // Device queues, fed by doorbells.
    WorkQueue sq, rq;
    // The alternate receive queue (NICFW_ALTQ) and its CQ: messages whose frame flags
    // meet alt_flags fill it. An offload routes them (Engine::enable_offload); 0: off.
    WorkQueue rq_alt;
    uint8_t alt_flags = 0;
    uint8_t alt_owner = 0;  // registry index of the offload that routes them
    Cq* rcq_alt = nullptr;
    // Completions the device could not write (complete_on: the descriptor was made
    // read-only, or left its region, after it was posted). The driver, whose Done sees
    // such a descriptor as not done, hands it back as an error when it heads
    // its queue (take_lost). lost_n counts them per queue kind (nicfw_queue_kind), so the
    // driver's not-done path looks only after one was added.
    std::atomic<uint32_t> lost_n[3] = {};
    SpinLock lost_lock;
    std::vector<const nicfw_desc*> lost;  // under lost_lock
    bool take_lost(const nicfw_desc* d) {
        std::lock_guard<SpinLock> g(lost_lock);
        for (size_t i = 0; i < lost.size(); i++)
            if (lost[i] == d) {
                lost[i] = lost.back();
                lost.pop_back();
                return true;
            }
        return false;
    }
    TxRing pending;               // transmitted, completing in post order
    uint32_t reads_out = 0;       // RDMA reads and offload requests (atomics) issued and not
                                  // answered (QFENCE waits on them)
    std::deque<ReadService> serve;  // RDMA reads we answer, oldest first
    // A refused request waits for the reads accepted before it to be served; then the
    // NAK goes and the connection breaks. Meanwhile nothing more is taken from the peer.
    bool refusing = false;
    uint32_t refuse_status = 0, refuse_seq = 0;
    nicfw_async_code refuse_why = NICFW_AE_RDMAW_PROT;
    bool tx_listed = false;

    // Send descriptor being transmitted (it may take several frames and steps).
    bool tx_busy = false;
    uint32_t tx_op = 0;  // NICFW_DC_OP_*
    uint32_t tx_len = 0, tx_off = 0, tx_nsegs = 0, tx_seg = 0, tx_seg_off = 0;
    uint64_t tx_raddr = 0;  // RDMA: remote buffer
    uint32_t tx_rmemh = 0;
    uint32_t tx_epoch = 0;  // MemTable::epoch when tx_segs were checked
    uint8_t tx_hflags = 0;  // NICFW_FF_IMMEDIATE / NICFW_FF_REPLY, from its Control
    uint32_t tx_imm = 0;    // its immediate data
    Seg tx_segs[NICFW_MAX_SEGMENTS];
    uint32_t tx_seq = 0;      // sequence number of the next new request
    WorkItem tx_w{};          // the descriptor being transmitted
    uint32_t tx_cur_seq = 0;  // and its sequence number
    bool tx_resend = false;   // it is a resend (already in pending)
    OffloadRequest tx_offload;    // op NICFW_DC_OP_OFFLOAD: the request its offload decoded
    uint8_t tx_offload_index = 0; // and that offload's registry index
    uint32_t tx_status_op = 0;    // its completions' NICFW_DS_OP_*

    // Offloads' own per-VI state (nicfw/offload.h), by registry index; a new connection
    // starts without it.
    std::unique_ptr<OffloadViState> offload_state[kMaxOffloads];

    // Retransmission (rel_proto: a reliable VI on a lossy wire; docs/reliability.md).
    bool rel_proto = false;
    uint32_t rtx_next = 0, rtx_end = 0;  // go-back-N: requests [rtx_next, rtx_end) go again
    uint32_t snd_acked = 0;              // the peer has every request before this one
    uint32_t gap_seq = 0;                // the last go-back a GAP ACK asked for, and when
    uint64_t gap_ns = 0;
    uint64_t rto_ns = 0, rto_at = 0;     // retransmit timer (rto_at 0: off)
    bool heard_since_rto = false;        // the peer reported a hole (on_gap) since the timer last expired
    uint64_t srtt_ns = 0, rttvar_ns = 0; // round trip estimate from ACKs (0: no sample yet)
    uint64_t give_up_at = 0;             // no progress until then: the connection is lost
    uint64_t retry_ns = 0;               // the VI's retry timeout
    bool rtx_listed = false;

    // Message being received: a send filling a receive descriptor, or an RDMA write
    // landing in registered memory (rx_dst).
    bool rx_busy = false, rx_discard = false, rx_has_desc = false;
    bool rx_write = false;
    bool rx_alt = false;       // the message's descriptor comes from rq_alt
    uint8_t* rx_dst = nullptr;
    uint64_t rx_raddr = 0;     // RDMA write: the buffer the request named, for re-checks
    uint32_t rx_rmemh = 0;
    uint32_t rx_epoch = 0;     // MemTable::epoch when rx_segs / rx_dst were checked
    uint32_t rx_len = 0, rx_cap = 0, rx_nsegs = 0, rx_status = 0;
    Seg rx_segs[NICFW_MAX_SEGMENTS];
    uint32_t rx_seq = 0;       // sequence number the next message may carry at least
    uint32_t rx_msg_seq = 0;   // the message in progress
    uint32_t rx_got = 0;       // bytes of it received, in order
    uint32_t acks_owed = 0;  // placed messages not yet acknowledged (or a gap to report)
    bool ack_listed = false;
    uint32_t rx_gap_frames = 0;  // rel_proto: frames beyond rx_seq since it last advanced
    bool ack_gap = false;        // the ACK owed asks for a resend (NICFW_FF_GAP)
    uint64_t ack_since = 0;      // rtx_clock when the ACK owed became due (rel_proto only)
    uint64_t ack_frame_ns = 0;   // rtx_clock when our last ACK frame (not piggybacked) went
    bool ack_hold = false;       // request/reply traffic: hold ACKs for a data frame (flush_acks)
    uint64_t ack_last_ns = 0;    // rtx_clock when the newest ACK owed became due (rel_proto only)
    bool ack_dense = false;      // it came within kAckDenseNs of the one before: a stream (flush_acks)

    // A new connection counts requests from 0 and has nothing in flight.
    void reset_sequence() {
        tx_seq = rx_seq = snd_acked = 0;
        rtx_next = rtx_end = 0;
        tx_resend = false;
        gap_seq = UINT32_MAX;
        rto_at = 0;
        heard_since_rto = false;
        srtt_ns = rttvar_ns = 0;  // a new peer, perhaps on another path: measure again
        rx_gap_frames = 0;
        ack_gap = false;
        for (auto& s : offload_state) s.reset();
    }

    nicfw_vi_status* st = nullptr;  // this VI's line in the status page
};

}  // namespace softvia::nicfw
