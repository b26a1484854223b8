// nicfw/engine.h -- the emulated NIC: one engine per NIC instance.
//
// Split like a hardware NIC (and like soft-RoCE): the doorbell service (engine.cc)
// moves rung doorbells onto device queues; the requester (requester.cc) gathers,
// frames and transmits send descriptors; the responder (responder.cc) matches incoming
// frames to receive descriptors and scatters them; the connection manager
// (connection.cc) runs the connect/accept/peer/disconnect protocol; completions write
// descriptor status and CQ entries (completer.cc; the per-message part in datapath.h).
//
// Threading: every device field is touched only under the engine lock, held either by
// the firmware thread (progress=thread) or by whichever application call steps the
// engine (progress=inline). The driver reaches the device only through the doorbell
// queue, the CQ rings, Vi::state/conn_result, and the control calls below (which take
// the lock).
#pragma once

#include <atomic>
#include <algorithm>
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nicfw/abi.h"
#include "nicfw/hostmem.h"
#include "nicfw/memtable.h"
#include "nicfw/transport.h"

namespace softvia::nicfw {

enum class Progress { kInline, kThread };

// A spin lock: uncontended acquire is one atomic exchange.
class SpinLock {
public:
    void lock() {
        while (flag_.exchange(true, std::memory_order_acquire))
            while (flag_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
    bool try_lock() {
        return !flag_.load(std::memory_order_relaxed) &&
               !flag_.exchange(true, std::memory_order_acquire);
    }
    void unlock() { flag_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> flag_{false};
};

// Control calls take the engine lock through this guard; it tells the firmware thread
// someone is waiting so the thread lets go between steps.
class CtlGuard {
public:
    CtlGuard(SpinLock& l, std::atomic<uint32_t>& waiters) : l_(l) {
        waiters.fetch_add(1, std::memory_order_relaxed);
        l_.lock();
        waiters.fetch_sub(1, std::memory_order_relaxed);
    }
    ~CtlGuard() { l_.unlock(); }
    CtlGuard(const CtlGuard&) = delete;
    CtlGuard& operator=(const CtlGuard&) = delete;

private:
    SpinLock& l_;
};

// Segment i of a descriptor. nicfw_desc declares ds[2] but programs allocate as
// many as seg_count says, so index from the control segment, not the declared array.
inline nicfw_desc_seg* desc_segment(nicfw_desc* d, uint32_t i) {
    return reinterpret_cast<nicfw_desc_seg*>(reinterpret_cast<uint8_t*>(d) + sizeof(nicfw_desc_ctrl)) + i;
}

// The status op bits of a send-queue descriptor, from its control (for completions that
// happen before the descriptor was started, such as a flush). Unreadable: a send.
inline uint32_t send_op_status(const nicfw_desc* d) {
    uint16_t control = 0;
    hostmem::load(&d->cs.control, &control);
    switch (control & NICFW_DC_OP_MASK) {
        case NICFW_DC_OP_RDMA_WRITE: return NICFW_DS_OP_RDMA_WRITE;
        case NICFW_DC_OP_RDMA_READ: return NICFW_DS_OP_RDMA_READ;
        default: return NICFW_DS_OP_SEND;
    }
}

// Status-page counters (nicfw_counters): one writer, the firmware under the engine lock;
// readers in this process (VipExtQuery*Counters) and others (softvia-nicinfo) at any time.
// Relaxed atomic load and store: the same instructions as ++ on x86-64, and no data race.
[[gnu::always_inline]] inline void bump(uint64_t& c, uint64_t n = 1) {
    __atomic_store_n(&c, __atomic_load_n(&c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

struct WorkItem {
    nicfw_desc* desc;
    uint32_t memh;
};

// FIFO of descriptors, private to the device. Starts small and doubles up to its
// limit, so thousands of idle VIs cost little memory.
class WorkQueue {
public:
    explicit WorkQueue(uint32_t limit_pow2)
        : ring_(std::min(kInitial, limit_pow2)), mask_(std::min(kInitial, limit_pow2) - 1), limit_(limit_pow2) {}
    bool empty() const { return head_ == tail_; }
    uint32_t size() const { return tail_ - head_; }
    bool push(WorkItem w) {
        if (tail_ - head_ > mask_) {
            if (ring_.size() >= limit_) return false;
            grow();
        }
        ring_[tail_++ & mask_] = w;
        return true;
    }
    WorkItem& front() { return ring_[head_ & mask_]; }
    void pop() { head_++; }

private:
    static constexpr uint32_t kInitial = 64;
    __attribute__((noinline)) void grow() {  // rare: keeps push() small enough to inline
        std::vector<WorkItem> bigger(ring_.size() * 2);
        for (uint32_t i = head_; i != tail_; i++) bigger[i & (bigger.size() - 1)] = ring_[i & mask_];
        ring_.swap(bigger);
        mask_ = static_cast<uint32_t>(ring_.size() - 1);
    }
    std::vector<WorkItem> ring_;
    uint32_t mask_, limit_, head_ = 0, tail_ = 0;
};

// Completion queue: the device produces, the driver consumes.
struct Cq {
    void* user = nullptr;
    std::vector<nicfw_cqe> entries;
    std::atomic<uint64_t> prod{0};  // written by the firmware
    std::atomic<uint64_t> cons{0};  // written by the driver (under its own CQ lock)
    uint32_t bound = 0;             // VI queues bound to this CQ
    uint64_t overflows = 0;
};

// A checked piece of host memory: where, how long, and the region it was checked
// against (looked up again when the memory table has changed since: MemTable::epoch).
struct Seg {
    uint8_t* ptr;
    uint32_t len;
    uint32_t memh;
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

// A send-queue descriptor the NIC has transmitted but not completed. VIA completes a
// queue's descriptors in post order, while acked sends/writes and reads finish when the
// target answers, so completion goes through this FIFO.
// With retransmission on, every request stays here until acknowledged; a resend reads
// the descriptor again (the NIC owns it until it completes) and re-checks it.
struct TxEntry {
    enum Kind : uint8_t { kLocal, kAcked, kRead };
    Kind kind = kLocal;  // done at transmit / on ACK / on data
    bool done = false;
    nicfw_desc* desc = nullptr;
    uint32_t memh = 0;    // of the region holding desc
    uint32_t status = 0;  // completion status bits once done
    uint32_t len = 0;
    uint32_t op = 0;      // NICFW_DS_OP_*
    uint32_t seq = 0;     // the request's sequence number (READ_RESP frames carry it)
    bool resent = false;  // rel_proto: sent more than once (its ACK times nothing: Karn)
    uint64_t sent_ns = 0; // rel_proto: when it was first sent
    uint32_t got = 0;     // kRead: bytes placed so far
    uint32_t epoch = 0;   // kRead: MemTable::epoch when segs were checked
    std::vector<Seg> segs;  // kRead: where the data goes (checked at post)

    // Back to a fresh entry; segs keeps its storage for the next read in this slot.
    void reset() {
        kind = kLocal;
        done = false;
        desc = nullptr;
        memh = status = len = op = seq = got = epoch = 0;
        resent = false;
        sent_ns = 0;
        segs.clear();
    }
};

// The pending FIFO of a VI: a ring of entries reused in place (no allocation per
// request), doubling when full. It holds at most the VI's posted send descriptors, so it
// stops growing at the send queue's depth; it starts empty, so idle VIs cost nothing.
class TxRing {
public:
    bool empty() const { return head_ == tail_; }
    uint32_t size() const { return tail_ - head_; }
    TxEntry& front() { return ring_[head_ & mask_]; }
    TxEntry& operator[](uint32_t i) { return ring_[(head_ + i) & mask_]; }
    // A reset entry at the back.
    TxEntry& push() {
        if (tail_ - head_ == ring_.size()) grow();
        TxEntry& e = ring_[tail_++ & mask_];
        e.reset();
        return e;
    }
    void pop() { head_++; }

    // Oldest first, for range-for and std::find_if.
    class iterator {
    public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = TxEntry;
        using difference_type = std::ptrdiff_t;
        using pointer = TxEntry*;
        using reference = TxEntry&;
        iterator(TxRing* r, uint32_t i) : r_(r), i_(i) {}
        TxEntry& operator*() const { return r_->ring_[i_ & r_->mask_]; }
        TxEntry* operator->() const { return &**this; }
        iterator& operator++() {
            i_++;
            return *this;
        }
        bool operator==(const iterator& o) const { return i_ == o.i_; }
        bool operator!=(const iterator& o) const { return i_ != o.i_; }

    private:
        TxRing* r_;
        uint32_t i_;
    };
    iterator begin() { return iterator(this, head_); }
    iterator end() { return iterator(this, tail_); }

private:
    static constexpr uint32_t kInitial = 16;
    void grow() {
        std::vector<TxEntry> bigger(ring_.empty() ? kInitial : ring_.size() * 2);
        const uint32_t m = static_cast<uint32_t>(bigger.size() - 1);
        for (uint32_t i = head_; i != tail_; i++) bigger[i & m] = std::move(ring_[i & mask_]);
        ring_.swap(bigger);
        mask_ = m;
    }
    std::vector<TxEntry> ring_;
    uint32_t mask_ = 0, head_ = 0, tail_ = 0;
};

// An RDMA read this NIC serves as the target: the remote buffer as the request named
// it (checked again when the memory table changes while it is served) and how far it got.
struct ReadService {
    uint64_t addr;
    uint32_t memh, len, off, seq;
    uint32_t epoch;  // MemTable::epoch when it was checked
};

struct Vi {
    Vi() : sq(NICFW_MAX_DESC_PER_QUEUE), rq(NICFW_MAX_DESC_PER_QUEUE), rq_reply(NICFW_MAX_DESC_PER_QUEUE) {}
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
    WorkQueue rq_reply;        // steering: receive queue for reply-class messages
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
    bool steering = false;
    Cq* rcq_reply = nullptr;
    TxRing pending;               // transmitted, completing in post order
    uint32_t reads_out = 0;       // RDMA reads issued and not finished (QFENCE waits on them)
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

    // Retransmission (rel_proto: a reliable VI on a lossy wire; docs/reliability.md).
    bool rel_proto = false;
    uint32_t rtx_next = 0, rtx_end = 0;  // go-back-N: requests [rtx_next, rtx_end) go again
    uint32_t snd_acked = 0;              // the peer has every request before this one
    uint32_t gap_seq = 0;                // the last go-back a GAP ACK asked for, and when
    uint64_t gap_ns = 0;
    uint64_t rto_ns = 0, rto_at = 0;     // retransmit timer (rto_at 0: off)
    uint64_t srtt_ns = 0, rttvar_ns = 0; // round trip estimate from ACKs (0: no sample yet)
    uint64_t give_up_at = 0;             // no progress until then: the connection is lost
    uint64_t retry_ns = 0;               // the VI's retry timeout
    bool rtx_listed = false;

    // Message being received: a send filling a receive descriptor, or an RDMA write
    // landing in registered memory (rx_dst).
    bool rx_busy = false, rx_discard = false, rx_has_desc = false;
    bool rx_write = false;
    bool rx_reply = false;     // the message's descriptor comes from rq_reply
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
        srtt_ns = rttvar_ns = 0;  // a new peer, perhaps on another path: measure again
        rx_gap_frames = 0;
        ack_gap = false;
    }

    nicfw_vi_status* st = nullptr;  // this VI's line in the status page
};

class FaultTransport;
struct FaultCounters;

struct EngineConfig {
    Progress progress = Progress::kInline;
    std::string faults;  // fault injector spec (fault_transport.h); empty: none
    std::string device = "shm";
    uint64_t retry_timeout_ms = 5000;  // default of every VI (SOFTVIA_RETRY_TIMEOUT_MS)
    uint32_t tx_batch = 0;  // txbatch=: inline progress holds a post's frames for a batch (post_progress)
};
constexpr uint32_t kMaxTxBatch = 256;  // a dpdk NIC queues at most this many frames

// Retransmission parameters (docs/reliability.md).
constexpr uint32_t kTxWindow = 64;              // requests in flight per reliable VI
constexpr uint64_t kRtoInitialNs = 2000000;     // retransmit timeout before any RTT sample
constexpr uint64_t kRtoMinNs = 200000;          // floor of the measured one (srtt + 4 rttvar)
constexpr uint64_t kRtoMaxNs = 64000000;        // it doubles per retry up to this
constexpr uint32_t kGapFramesBeforeNak = 2;     // out-of-order frames before a GAP ACK
constexpr uint64_t kAckHoldNs = 20000;          // an ACK waits this long for a data frame to carry it
constexpr uint32_t kAckHoldMsgs = 4;            // unless it already covers this many messages
constexpr uint64_t kAckDenseNs = 2000;          // one-way stream: messages this close share an ACK,
constexpr uint32_t kAckStreamMsgs = 16;         // up to this many of them
constexpr uint64_t kAckStreamNs = 20000;        // and the oldest waits at most this long
constexpr uint64_t kMaxRetryTimeoutMs = 3600000;

class Engine {
public:
    // Creates the NIC: transport, status page, and (progress=thread) the firmware thread.
    // Negative errno on failure, with the reason in words in *why when given.
    static int create(const EngineConfig& cfg, std::unique_ptr<Engine>* out, std::string* why = nullptr);
    ~Engine();

    Progress progress_mode() const { return cfg_.progress; }
    Transport& transport() { return *tr_; }
    uint32_t mtu() const { return mtu_; }
    const nicfw_status_page* status() const { return status_; }
    // Fault injection (NICs opened with a spec only): new rates, and what it did so far.
    int set_faults(const std::string& spec);
    bool fault_counters(FaultCounters* out);

    // ---- control path (takes the engine lock) ----
    int create_ptag(uint32_t* ptag);
    int destroy_ptag(uint32_t ptag);
    // -EFAULT (and why, when asked) if the memory cannot be accessed as the attributes
    // allow: not mapped, not readable, or not writable with rdma_w.
    int register_mem(uint64_t va, uint64_t len, uint32_t ptag, bool rdma_w, bool rdma_r,
                     uint32_t* memh, std::string* why = nullptr);
    int deregister_mem(uint64_t va, uint32_t memh);
    int query_mem(uint64_t va, uint32_t memh, uint32_t* ptag, bool* rdma_w, bool* rdma_r);
    int set_mem_attrs(uint64_t va, uint32_t memh, uint32_t ptag, bool rdma_w, bool rdma_r,
                      std::string* why = nullptr);
    bool ptag_valid(uint32_t ptag);
    // The driver's pre-post check that a descriptor lies in registered memory (no lock).
    bool desc_in_registered_memory(uint32_t memh, const void* desc, uint64_t len) const {
        return mem_.probe(memh, reinterpret_cast<uint64_t>(desc), len);
    }

    Cq* create_cq(uint32_t entries, void* user);
    int destroy_cq(Cq* cq);  // -EBUSY while VI queues are bound
    int resize_cq(Cq* cq, uint32_t entries);

    int create_vi(const ViAttrs& a, Cq* scq, Cq* rcq, void* user, Vi** out);
    int destroy_vi(Vi* vi);  // -EBUSY unless idle with empty device queues
    int set_vi_attrs(Vi* vi, const ViAttrs& a);
    // The program's word for vi, carried by its later completion entries.
    void set_vi_context(Vi* vi, uint64_t ctx);
    int enable_steering(Vi* vi, Cq* reply_cq);  // -EBUSY unless idle
    // How long a reliable VI on a lossy wire retransmits without progress before its
    // connection is lost (1 ms .. kMaxRetryTimeoutMs; -EINVAL outside).
    int set_retry_timeout(Vi* vi, uint64_t ms);
    uint32_t vi_count();

    // Connections. Results arrive in vi->conn_result (nicfw_result) and vi->state.
    // disc: the server's discriminator (what it waits on); local_disc: the client's own,
    // which the server's VipConnectWait reports as the remote address's discriminator.
    int connect_request(Vi* vi, const uint8_t* addr, size_t alen, const uint8_t* disc, size_t dlen,
                        const uint8_t* local_disc = nullptr, size_t llen = 0);
    void connect_cancel(Vi* vi);  // client gave up waiting
    Listener* listen(const uint8_t* disc, size_t dlen);
    // Removes a listener; true (and *req filled) if a request had matched it.
    bool unlisten(Listener* l, ConnRequest* req);
    int accept(const ConnRequest& req, Vi* vi);
    int reject(const ConnRequest& req);
    int peer_request(Vi* vi, const uint8_t* addr, size_t alen, const uint8_t* local_disc,
                     size_t llen, const uint8_t* remote_disc, size_t rlen, uint64_t timeout_ms);
    int disconnect(Vi* vi);

    // ---- data path ----
    // Rings a doorbell. Never fails: while the queue is full it makes room (inline) or
    // waits for the firmware thread. Inline: the driver rings once per post.
    void ring(const nicfw_doorbell& db) {
        if (!try_ring(db)) ring_full(db);
    }
    // Inline progress after a send was posted: a step, so the send leaves now. With
    // transmit batching (txbatch=N) the step only takes the doorbell and builds the
    // frames; they leave with the next step that is not a post's (a poll, a wait) or
    // once N are queued, so a program posting a burst pays one system call for it on a
    // wire where a flush is one (udp, dpdk's af_packet). A program that posts and then
    // makes no call gets its frames sent by the guard thread within about 1 ms.
    void post_progress() {
        if (cfg_.tx_batch == 0) {
            progress();
            return;
        }
        if (cfg_.progress == Progress::kThread || !lock_.try_lock()) return;
        post_step_locked();
        lock_.unlock();
        if (errors_pending_.load(std::memory_order_relaxed)) deliver_errors();
    }
    // Inline progress: steps the engine once if no one else is. True if it did work.
    bool progress() {
        if (cfg_.progress == Progress::kThread) return false;
        if (!lock_.try_lock()) return false;
        bool did = step_locked();
        lock_.unlock();
        if (errors_pending_.load(std::memory_order_relaxed)) deliver_errors();
        return did;
    }
    // Inline progress: sends the ACKs that wait for a reply to carry them (the process is
    // about to exit without another call; vipl runs this at exit).
    void flush_owed_acks();

    // Thread mode: an application thread that has spun long enough sleeps here until the
    // firmware makes progress or about a millisecond passes, so only the firmware
    // threads poll (a 2-core host cannot run four pollers). cond is re-checked after
    // registering as a sleeper, so a completion is never missed. cond may consume what
    // it finds (a Done call does): true means it held, and the caller must not ask again.
    template <class Cond>
    bool block(Cond cond) {
        uint32_t ev = events_.load(std::memory_order_acquire);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        bool held = cond();
        if (!held) sleep_on_events(ev);
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        return held;
    }
    // Wakes every thread asleep in block() now, to look at its condition again (the
    // driver's VipCloseNic: its waiters must leave before the NIC goes).
    void wake_blocked();

    // Asynchronous errors (nicfw_async_event), delivered outside the engine lock.
    void set_error_handler(void* ctx, void (*fn)(void*, const nicfw_async_event*));
    Vi* vi_by_index(uint32_t idx) { return idx < vis_.size() ? vis_[idx].get() : nullptr; }

    // Feeds one frame to the receive path as if it came from transport peer `peer` (a
    // peer index this NIC knows). For fuzzing and tests; takes the engine lock.
    void inject_frame(int peer, const uint8_t* data, uint32_t len);

private:
    Engine() = default;
    bool try_ring(const nicfw_doorbell& db) {
        std::lock_guard<SpinLock> g(db_lock_);
        uint64_t tail = db_tail_.load(std::memory_order_relaxed);
        // Acquire pairs with the firmware's release of db_head_: the slot is free.
        if (tail - db_head_.load(std::memory_order_acquire) >= NICFW_DOORBELL_ENTRIES) return false;
        db_ring_[tail & (NICFW_DOORBELL_ENTRIES - 1)] = db;
        // Release: the firmware that sees the new tail sees the entry.
        db_tail_.store(tail + 1, std::memory_order_release);
        return true;
    }
    void ring_full(const nicfw_doorbell& db);
    bool step_locked();
    void post_step_locked();
    void start_guard();
    void deliver_errors();
    void firmware_thread();
    void sleep_on_events(uint32_t ev);
    void wake_sleepers();
    void slow_path(uint64_t now);
    void release_unused_peers();
    void forget_peer(int peer);
    bool peer_timer(Vi& vi, uint64_t now);
    void client_timer(Vi& vi, uint64_t now);
    void send_conn_req(Vi& vi);
    bool has_ptag(uint32_t ptag) const;  // under the lock

    // doorbells / requester
    bool service_doorbells();
    bool transmit();
    void transmit_vi(Vi& vi, bool* blocked);
    bool next_transmission(Vi& vi, bool* blocked);
    bool emit_frames(Vi& vi);
    uint32_t load_send(Vi& vi, const WorkItem& w, uint32_t* op);
    bool start_send(Vi& vi, const WorkItem& w);
    bool start_resend(Vi& vi);
    void finish_send(Vi& vi);
    TxEntry* pending_entry(Vi& vi, uint32_t seq);
    bool serve_reads(Vi& vi);
    void retire(Vi& vi);
    uint32_t check_remote(Vi& vi, uint64_t addr, uint32_t memh, uint64_t len, bool write, uint8_t** host);
    // reg: the region check_desc found for the descriptor (segments in it skip a lookup).
    uint32_t validate_segments(Vi& vi, nicfw_desc* d, uint32_t first, uint32_t count, Seg* out,
                               uint32_t* total, const WorkItem& w, const Region* reg);
    // Checks w's descriptor and takes one snapshot of its control segment into *cs.
    uint32_t check_desc(Vi& vi, const WorkItem& w, nicfw_desc_ctrl* cs, const Region** reg = nullptr);
    // Segments checked earlier, checked again against the memory table as it is now:
    // 0, or NICFW_DS_PROTECTION_ERROR if one lost its region (docs/memory-safety.md).
    uint32_t recheck_segs(const Vi& vi, const Seg* segs, uint32_t n);
    void abort_send(Vi& vi, uint32_t status);
    void fail_request(Vi& vi, const WorkItem& w, uint32_t status, uint32_t op);
    bool rx_mem_ok(Vi& vi);
    void fail_receive(Vi& vi);
    void refuse_read(Vi& vi, uint32_t seq);
    uint8_t* frame_reserve(int peer, uint32_t payload, nicfw_frame_hdr** hdr);
    // A header for a frame from vi to its peer VI: type set, every other field zero.
    static nicfw_frame_hdr frame_to(const Vi& vi, uint8_t type) {
        nicfw_frame_hdr h{};
        h.type = type;
        h.version = NICFW_ABI_VERSION;
        h.dst_vi = vi.remote_vi;
        h.src_vi = vi.id;
        return h;
    }
    void frame_commit(int peer, nicfw_frame_hdr* hdr, uint32_t payload);
    // Control frames never get lost to a full link: they wait in a per-peer backlog,
    // and data to that peer waits behind them so the order on the wire is kept.
    void send_control(int peer, uint8_t type, uint32_t dst_vi, uint32_t src_vi, uint32_t req_id,
                      const nicfw_conn_payload* pl);
    void queue_control(int peer, const nicfw_frame_hdr& h, const uint8_t* payload);
    bool try_control(int peer, const nicfw_frame_hdr& h, const uint8_t* payload);
    bool flush_backlog();
    bool flush_acks(bool now = false);
    bool hold_ack(const Vi& vi, uint64_t now);
    // An ACK goes to vi's peer at the end of this step (one frame for a burst).
    void owe_ack(Vi& vi) {
        if (vi.rel_proto) {
            if (rx_clock_ == 0) rx_clock_ = rtx_clock();  // one read per burst, not per message
            const uint64_t now = rx_clock_;
            vi.ack_dense = now - vi.ack_last_ns < kAckDenseNs;
            vi.ack_last_ns = now;
            if (vi.acks_owed == 0) vi.ack_since = now;
        }
        vi.acks_owed++;
        if (!vi.ack_listed) {
            vi.ack_listed = true;
            ack_owed_.push_back(&vi);
        }
    }
    void list_tx(Vi& vi) {
        if (!vi.tx_listed) {
            vi.tx_listed = true;
            tx_active_.push_back(&vi);
        }
    }

    // retransmission
    // Reliable VIs retransmit on a wire that can lose frames (docs/reliability.md).
    bool runs_rel_proto(const ViAttrs& a) const { return a.reliability != NICFW_REL_UNRELIABLE && tr_->lossy(); }
    uint64_t rtx_clock();  // nanoseconds, cheap: the per-request timestamps use it
    void go_back(Vi& vi, uint32_t seq);
    void on_gap(Vi& vi, uint32_t seq);
    void tx_progress(Vi& vi, uint64_t now);
    void rtt_sample(Vi& vi, uint64_t rtt);
    void arm_rtx(Vi& vi, uint64_t now);
    bool rtx_timers();
    void give_up(Vi& vi);
    void owe_gap_ack(Vi& vi);

    // responder
    struct FrameOp {
        const char* name;
        uint32_t min_len;
        void (Engine::*handle)(const RxFrame&, const nicfw_frame_hdr&);
    };
    static const FrameOp kFrameOps[NICFW_F_TYPE_MAX + 1];  // the opcode table (responder.cc)
    void handle_frame(const RxFrame& f);
    void on_data(const RxFrame& f, const nicfw_frame_hdr& h);
    void on_ack(const RxFrame& f, const nicfw_frame_hdr& h);
    void apply_ack(Vi& vi, uint32_t seq, bool gap);
    void on_read_req(const RxFrame& f, const nicfw_frame_hdr& h);
    void on_read_resp(const RxFrame& f, const nicfw_frame_hdr& h);
    void on_nak(const RxFrame& f, const nicfw_frame_hdr& h);
    void send_nak(Vi& vi, uint32_t status, uint32_t seq);
    void send_ack_now(Vi& vi, uint32_t next_seq);
    void on_control(const RxFrame& f, const nicfw_frame_hdr& h);
    void answer_stale(const RxFrame& f, const nicfw_frame_hdr& h);
    bool answer_repeat(int peer, const nicfw_frame_hdr& h);
    void forget_held(const ConnRequest& req);
    bool begin_receive(Vi& vi, const nicfw_frame_hdr& h);
    void begin_write(Vi& vi, const nicfw_frame_hdr& h, const nicfw_rdma_ext& x);
    void refuse(Vi& vi, uint32_t status, uint32_t seq, nicfw_async_code why);
    void finish_refusal(Vi& vi);
    void finish_receive(Vi& vi, uint32_t status, const nicfw_frame_hdr* last);
    void abandon_receive(Vi& vi);
    void out_of_order(Vi& vi, const nicfw_frame_hdr& h);

    // completer
    [[gnu::always_inline]] void complete(Vi& vi, bool recv, const WorkItem& w, uint32_t status, uint32_t len) {
        complete_on(vi, recv ? NICFW_RECVQ : NICFW_SENDQ, w, status, len);
    }
    // Writes w's length and status (and imm when given), if its memory is
    // still registered to the VI's protection tag and writable; otherwise the completion
    // is lost and reported (NICFW_AE_COMP_PROT).
    void complete_on(Vi& vi, uint32_t queue, const WorkItem& w, uint32_t status, uint32_t len,
                     const uint32_t* imm = nullptr);
    void cq_push(Cq* cq, Vi& vi, uint32_t queue);
    WorkQueue& recv_queue_for(Vi& vi, uint8_t frame_flags) {
        return (vi.steering && (frame_flags & NICFW_FF_REPLY)) ? vi.rq_reply : vi.rq;
    }
    void flush_vi(Vi& vi, uint32_t new_state, bool tell_peer, nicfw_async_code why);
    void raise(Vi* vi, Cq* cq, nicfw_desc* d, nicfw_async_resource res, nicfw_async_code code);
    void count_tx(Vi& vi, uint32_t bytes);

    EngineConfig cfg_;
    std::unique_ptr<Transport> tr_;
    FaultTransport* faults_ = nullptr;  // tr_ itself, when fault injection is on
    uint32_t mtu_ = 0;  // payload bytes per DATA frame
    MemTable mem_;

    SpinLock lock_;
    std::atomic<uint32_t> ctl_waiters_{0};  // control calls waiting for the lock

    // Doorbell queue: many driver threads produce (under db_lock_), the firmware consumes.
    SpinLock db_lock_;
    std::unique_ptr<nicfw_doorbell[]> db_ring_;
    std::atomic<uint64_t> db_tail_{0};  // written by producers under db_lock_
    std::atomic<uint64_t> db_head_{0};  // written by the firmware

    std::vector<std::unique_ptr<Vi>> vis_;  // slot = VI index; null when free
    std::vector<uint16_t> vi_gen_;
    std::vector<uint32_t> vi_free_;
    uint32_t vi_live_ = 0;
    std::vector<Vi*> tx_active_;   // VIs with send work: no scan of idle VIs
    std::vector<std::unique_ptr<Cq>> cqs_;
    std::vector<uint32_t> ptags_;  // live protection tags
    uint32_t next_ptag_ = 1;
    std::vector<std::unique_ptr<Listener>> listeners_;
    std::vector<Vi*> connecting_;  // VIs with a connect in progress (timers)
    // A connection request is answered once, and on a lossy wire the client resends it
    // until it hears the answer: the server knows a repeat by (peer, client VI, request id).
    struct ConnKey {
        int peer;
        uint32_t client_vi, req_id;
        bool operator==(const ConnKey& o) const {
            return peer == o.peer && client_vi == o.client_vi && req_id == o.req_id;
        }
    };
    static constexpr size_t kMaxConnKeys = 256;
    // Handed to the application, not yet accepted or rejected. Never trimmed: each one
    // keeps its peer's index from being reused under the application's handle.
    std::vector<ConnKey> held_reqs_;
    std::vector<ConnKey> rejected_;   // the latest rejections (answered again when repeated)
    std::vector<ConnKey> no_match_;   // the latest NO_MATCH answers (the same, so a late copy
                                      // of a request the client gave up on never matches)
    std::vector<Vi*> ack_owed_;    // VIs with acknowledgements to send
    std::vector<Vi*> rtx_timed_;   // reliable VIs on a lossy wire with requests in flight
    // rtx_clock: the TSC scaled to CLOCK_MONOTONIC nanoseconds once calibrated over 10 ms
    // (an invariant TSC reads in a third of clock_gettime's time).
    bool tsc_probed_ = false, tsc_usable_ = false, tsc_calibrated_ = false;
    uint64_t tsc0_ = 0, tsc_ns0_ = 0;
    double ns_per_tick_ = 0;

    struct PendingControl {
        int peer;
        nicfw_frame_hdr hdr;
        std::vector<uint8_t> payload;
    };
    static constexpr uint32_t kMaxBacklogPerPeer = 4096;
    std::vector<PendingControl> backlog_;      // in order of sending
    std::vector<uint32_t> backlog_per_peer_;   // entries per peer, indexed by peer

    // Status page (memfd) for softvia-nicinfo.
    int status_fd_ = -1;
    nicfw_status_page* status_ = nullptr;
    size_t status_len_ = 0;
    nicfw_vi_status* vi_status_ = nullptr;

    uint32_t next_req_id_ = 0;  // connection request ids
    uint32_t step_count_ = 0;
    // rtx_clock at this receive burst's first message of a reliable VI on a lossy wire
    // (owe_ack; 0 until one comes, so lossless wires never read the clock for it).
    uint64_t rx_clock_ = 0;
    uint64_t last_slow_ns_ = 0;
    uint64_t last_slow_tsc_ = 0;  // TSC at the last look at the slow path's clock
    uint32_t idle_looks_ = 0;     // idle steps that could have looked at it
    uint64_t last_stale_ns_ = 0;  // the last DISCONNECT answering a stale frame
    std::vector<TransportEvent> tr_events_;
    std::vector<uint8_t> peer_used_;  // release_unused_peers' scratch, by peer index
    uint32_t slow_turns_ = 0;

    // Asynchronous errors, queued under the lock and delivered outside it.
    SpinLock err_lock_;
    std::vector<nicfw_async_event> errors_;
    std::atomic<bool> errors_pending_{false};
    void* err_ctx_ = nullptr;
    void (*err_fn_)(void*, const nicfw_async_event*) = nullptr;

    // Futex word bumped by the firmware thread after productive steps while
    // application threads sleep in block().
    std::atomic<uint32_t> events_{0};
    std::atomic<uint32_t> sleepers_{0};

    std::thread fw_;
    // Inline progress: a held ACK (flush_acks) is sent by the program's next call, or by
    // this thread within about a millisecond if that call does not come (it waits
    // outside VIPL: a barrier of its own, a sleep). Started at the first held ACK.
    std::thread ack_guard_;
    std::atomic<bool> acks_held_{false};
    std::atomic<bool> tx_held_{false};  // txbatch: a post step left frames queued
    void ack_guard_thread();
    void send_acks_if_idle(bool now);
    std::atomic<bool> stop_{false};
};

uint64_t now_ns();

}  // namespace softvia::nicfw
