// nicfw/engine.h -- the emulated NIC: one engine per NIC instance.
//
// Split like a hardware NIC (and like soft-RoCE), one block per file: the doorbell
// service and main loop (engine.cc) move rung doorbells onto device queues; the
// requester (requester.cc) gathers, frames and transmits send descriptors; the
// responder (responder.cc, with the opcode table) matches incoming frames to receive
// descriptors and scatters them; the completer (completer.h per message, completer.cc
// for flushing and asynchronous errors) writes status and CQ entries; reliability.cc
// holds ACKs both ways and retransmission; the connection manager (connection.cc) runs
// the connect/accept/peer/disconnect protocol; the memory table (memtable.h) checks
// every access. The device's objects are in vi.h and queues.h; what the driver shares
// with the device is in abi.h.
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
#include "nicfw/clock.h"
#include "nicfw/hostmem.h"
#include "nicfw/memtable.h"
#include "nicfw/offload.h"
#include "nicfw/shared_mem.h"
#include "nicfw/queues.h"
#include "nicfw/spinlock.h"
#include "nicfw/transport.h"
#include "nicfw/vi.h"
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

class ShmTransport;  // transport/shm: its send path is called without a virtual call

enum class Progress { kInline, kThread };

class FaultTransport;
struct FaultCounters;

struct EngineConfig {
    Progress progress = Progress::kInline;
    std::string faults;  // fault injector spec (fault_transport.h); empty: none
    std::string device = "shm";
    uint64_t retry_timeout_ms = 5000;  // default of every VI (SOFTVIA_RETRY_TIMEOUT_MS)
    uint32_t tx_batch = 0;  // txbatch=: inline progress holds a post's frames for a batch (post_progress)
    uint32_t rx_spin = 8;   // rxspin=: extra wire reads of an idle step while the program only polls (spin_stop)
};
constexpr uint32_t kMaxTxBatch = 256;  // a dpdk NIC queues at most this many frames
constexpr uint32_t kMaxRxSpin = 64;

// Retransmission parameters (docs/reliability.md).
constexpr uint32_t kTxWindow = 64;              // requests in flight per reliable VI
constexpr uint64_t kRtoInitialNs = 2000000;     // retransmit timeout before any RTT sample
constexpr uint64_t kRtoMinNs = 200000;          // floor of the measured one (srtt + 4 rttvar)
constexpr uint64_t kRtoMaxNs = 64000000;        // it doubles per retry up to this
constexpr uint32_t kGapFramesBeforeNak = 2;     // out-of-order frames before a GAP ACK
constexpr uint64_t kGapHoldMinNs = 50000;       // floor of the time a go-back answers one hole
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
    // Memory the NIC allocates (shared_mem.h): same-host peers' NICs can map it, so NIC
    // atomics on it from them need no trip through this NIC. -EINVAL, -ENOSPC, -EBUSY
    // (free while registered) or an errno of the allocation.
    int alloc_mem(uint64_t len, void** out);
    int free_mem(const void* addr);
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
    // Turns on offload `index`'s routing of messages into vi's alternate receive queue
    // (Offload::route_flags), completing on alt_cq (null: none). -EBUSY unless the VI is
    // idle; -EINVAL if the offload routes nothing.
    int enable_offload(Vi* vi, uint32_t index, Cq* alt_cq);
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
    // Inline progress: hands the NIC a doorbell directly when no one else is stepping it
    // (one lock taken instead of two, and no trip through the doorbell ring), after the
    // doorbells already in the ring, so each queue's reach the NIC in post order as long
    // as the caller holds that queue's lock across ring_direct or ring. A send's doorbell
    // is followed by the step post_progress would make. False when the NIC is busy or
    // runs its own thread: ring and post_progress then. Errors the step raised wait for
    // deliver_pending_errors, which the caller makes once it holds no lock.
    bool ring_direct(const nicfw_doorbell& db);
    // An offload request served at once in the caller's thread, without a descriptor
    // (vipl's VipExtAtomicNow): only through the offload's same-host shortcut, and only
    // when everything vi's send queue was given has completed, so it is ordered after all
    // of it as a posted descriptor would be. True if served (answer holds the result);
    // false: nothing was done, post the request as a descriptor. Waits for the engine
    // lock (a step in another thread is short).
    bool offload_now(Vi* vi, const OffloadRequest& req, uint64_t answer[2]);
    void deliver_pending_errors() {
        if (errors_pending_.load(std::memory_order_relaxed)) deliver_errors();
    }
    // Inline progress after a send was posted: a step, so the send leaves now. On a wire
    // whose receive poll is a system call (udp: about a microsecond in a VM) the step
    // takes the doorbell, builds the frames and hands them to the wire, but does not look
    // for frames, which a stream of posts would pay once per message for nothing (the
    // next poll or wait looks; 4 KiB udp stream +30%). With transmit batching
    // (txbatch=N) the frames leave with the next step that is not a post's (a poll, a
    // wait) or once N are queued, so a program posting a burst pays one system call for
    // it on a wire where a flush is one (udp, dpdk's af_packet). A program that posts and
    // then makes no call gets its frames sent by the guard thread within about 1 ms.
    void post_progress() {
        if (cfg_.progress == Progress::kThread || !lock_.try_lock()) return;
        post_step_locked();
        lock_.unlock();
        deliver_pending_errors();
    }
    // Inline progress: steps the engine once if no one else is. True if it did work.
    // A control call waiting for the lock goes first: a thread that polls in a tight loop
    // took the lock again within nanoseconds of each step and could keep a thread of its
    // own program out of VipConnectWait or VipDisconnect for seconds on a loaded host.
    bool progress() {
        if (cfg_.progress == Progress::kThread) return false;
        if (ctl_waiters_.load(std::memory_order_relaxed) || !lock_.try_lock()) return false;
        bool did = step_locked();
        lock_.unlock();
        deliver_pending_errors();
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

    // ---- services for offloads (nicfw/offload.h; docs/offloads.md) ----
    // Called from an offload's hooks, under the engine lock.
    // A remote access to [addr, addr+len) of this NIC's memory through vi: the handle
    // must name a live region holding the range, with vi's protection tag, and both the
    // region and the VI must allow the operation. 0 (and the host address) or the status.
    uint32_t check_remote(Vi& vi, uint64_t addr, uint32_t memh, uint64_t len, bool write, uint8_t** host);
    // The live region a memory handle names (null: none).
    const Region* region(uint32_t memh) { return mem_.find(memh); }
    // Checks count data segments of descriptor d from segment first against the memory
    // table (the VI's tag) and resolves them to host ranges; 0 or the status bit.
    // reg: the region check_desc found for the descriptor (segments in it skip a lookup).
    uint32_t validate_segments(Vi& vi, nicfw_desc* d, uint32_t first, uint32_t count, Seg* out,
                               uint32_t* total, const WorkItem& w, const Region* reg);
    // A frame to peer: reserved on its link (null while it is full), then committed.
    uint8_t* frame_reserve(int peer, uint32_t payload, nicfw_frame_hdr** hdr);
    void frame_commit(int peer, nicfw_frame_hdr* hdr, uint32_t payload);
    // A header for a frame from vi to its peer VI: type set, every other field zero.
    static nicfw_frame_hdr frame_to(const Vi& vi, uint8_t type) {
        nicfw_frame_hdr h{};
        h.type = type;
        h.version = NICFW_ABI_VERSION;
        h.dst_vi = vi.remote_vi;
        h.src_vi = vi.id;
        return h;
    }
    // A small frame (header and h.msg_len bytes of payload) that is never lost to a full
    // link: it waits in the peer's backlog, ahead of later data.
    void queue_control(int peer, const nicfw_frame_hdr& h, const uint8_t* payload);
    // The VI a received frame is for, if it exists and is connected to the frame's sender.
    Vi* frame_target(const RxFrame& f, const nicfw_frame_hdr& h);
    // A frame for a VI that is not connected to its sender: tell the sender (lossy wires).
    void answer_stale(const RxFrame& f, const nicfw_frame_hdr& h);
    // A request the target takes in sequence (seq), as RDMA reads are; true if it is the
    // next one and is now taken (rx_seq moves past it). False: a repeat (*repeat set: it
    // was taken before, answer again if the answer may have been lost), or out of order
    // (reported to the sender, or the connection broken without retransmission).
    bool take_request(Vi& vi, const nicfw_frame_hdr& h, bool* repeat);
    // The target refuses request seq with status (NICFW_DS_* error bits): a NAK goes to
    // the initiator and the reliable connection breaks (VIA 1.0).
    void refuse(Vi& vi, uint32_t status, uint32_t seq, nicfw_async_code why);
    // The answer to this VI's offload request seq came: its result (len bytes from data)
    // goes to the request's result buffer and the descriptor completes, in post order.
    // False if no such request waits (a repeated or stray answer).
    bool answer_offload(Vi& vi, uint32_t seq, const void* data, uint32_t len);
    // An acknowledgement: every request of vi before seq was taken by the target.
    void apply_ack(Vi& vi, uint32_t seq, bool gap);
    void count_tx(Vi& vi, uint32_t bytes);
    void count_drop() { bump(status_->nic.drops); }
    void count_error(Vi& vi) {
        bump(vi.st->c.errors);
        bump(status_->nic.errors);
    }
    // An offload's counters (Offload::counter_names), by registry index.
    // They live on the status page (softvia-nicinfo shows them).
    void offload_count(uint32_t index, uint32_t counter, uint64_t n = 1) {
        bump(status_->offload[index].counter[counter], n);
    }
    uint64_t offload_counter(uint32_t index, uint32_t counter) const {
        return __atomic_load_n(&status_->offload[index].counter[counter], __ATOMIC_RELAXED);
    }
    // Opens or closes a registered region to NIC atomics (as set_mem_attrs does for RDMA).
    int set_mem_atomics(uint64_t va, uint32_t memh, bool enable);
    // Same host: the process id of vi's peer if its NIC can map memory of ours (and we
    // of its), else 0 (Transport::peer_pid). Whether that peer is still there.
    uint32_t peer_pid(const Vi& vi) const { return tr_->peer_pid(vi.peer); }
    bool peer_alive(const Vi& vi) const { return tr_->peer_alive(vi.peer); }
    // The memfd of NIC-allocated memory holding [va, va+len), with va's offset in it.
    bool shared_file(uint64_t va, uint64_t len, int* fd, uint64_t* off, uint64_t* file_len) const {
        return shared_.find(va, len, fd, off, file_len);
    }
    // Every VI of this NIC, in slot order.
    template <class F>
    void for_each_vi(F f) {
        for (auto& v : vis_)
            if (v) f(*v);
    }

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
    void take_doorbell(const nicfw_doorbell& db);
    bool step_locked();
    static bool spin_stop(const void* ctx);  // rx_spin_'s end: a doorbell or a control call waits
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
    // Control frames never get lost to a full link: they wait in a per-peer backlog,
    // and data to that peer waits behind them so the order on the wire is kept.
    void send_control(int peer, uint8_t type, uint32_t dst_vi, uint32_t src_vi, uint32_t req_id,
                      const nicfw_conn_payload* pl);
    bool try_control(int peer, const nicfw_frame_hdr& h, const uint8_t* payload);
    bool flush_backlog();
    bool flush_acks(bool now = false);
    bool hold_ack(const Vi& vi, uint64_t now);
    // An ACK goes to vi's peer at the end of this step (one frame for a burst).
    NICFW_HOT void owe_ack(Vi& vi) {
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
        void (*handle)(Engine&, const RxFrame&, const nicfw_frame_hdr&);
    };
    static const FrameOp kFrameOps[NICFW_F_CORE_MAX + 1];  // the opcode table (responder.cc);
                                                          // offload frames: nicfw/offload.h
    void handle_frame(const RxFrame& f);
    void on_data(const RxFrame& f, const nicfw_frame_hdr& h);
    void on_ack(const RxFrame& f, const nicfw_frame_hdr& h);
    void on_read_req(const RxFrame& f, const nicfw_frame_hdr& h);
    void on_read_resp(const RxFrame& f, const nicfw_frame_hdr& h);
    void on_nak(const RxFrame& f, const nicfw_frame_hdr& h);
    void send_nak(Vi& vi, uint32_t status, uint32_t seq);
    void send_ack_now(Vi& vi, uint32_t next_seq);
    void on_control(const RxFrame& f, const nicfw_frame_hdr& h);
    bool answer_repeat(int peer, const nicfw_frame_hdr& h);
    void forget_held(const ConnRequest& req);
    bool begin_receive(Vi& vi, const nicfw_frame_hdr& h);
    void begin_write(Vi& vi, const nicfw_frame_hdr& h, const nicfw_rdma_ext& x);
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
    // NICFW_DS_SOURCE_READ into w's status, if its memory still holds it (else nothing:
    // the program learns it from DONE).
    void mark_source_read(const WorkItem& w);
    WorkQueue& recv_queue_for(Vi& vi, uint8_t frame_flags) {
        return (frame_flags & vi.alt_flags) ? vi.rq_alt : vi.rq;
    }
    void flush_vi(Vi& vi, uint32_t new_state, bool tell_peer, nicfw_async_code why);
    void raise(Vi* vi, Cq* cq, nicfw_desc* d, nicfw_async_resource res, nicfw_async_code code);
    uint32_t load_offload(Vi& vi, const WorkItem& w, const nicfw_desc_ctrl& cs);
    bool offload_shortcut(Vi& vi, const WorkItem& w);
    uint8_t* link_reserve(int peer, uint32_t len);  // frames.h
    void link_commit(int peer, uint32_t len);
    void offload_memory_changed(uint32_t memh);
    void on_offload_frame(const RxFrame& f, const nicfw_frame_hdr& h);

    EngineConfig cfg_;
    std::unique_ptr<Transport> tr_;
    ShmTransport* shm_ = nullptr;  // tr_ when it is the shm wire itself: called directly
    bool post_sends_only_ = false;  // a post's inline step does not read the wire (post_progress)
    FaultTransport* faults_ = nullptr;  // tr_ itself, when fault injection is on
    uint32_t mtu_ = 0;  // payload bytes per DATA frame
    MemTable mem_;
    SharedMemory shared_;  // VipExtAllocMem's blocks

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
    // Inline progress on a wire whose receive poll is a system call: an idle step of a
    // program that only polls us reads the wire up to rx_spin_ more times (engine.cc,
    // spin_stop; 0 off).
    uint32_t rx_spin_ = 0;
    uint64_t idle_end_tsc_ = 0;   // TSC at the end of the last step if it was idle, else 0
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

}  // namespace softvia::nicfw
