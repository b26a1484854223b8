// engine.cc -- NIC creation, control path, doorbell service and the main loop.
#include "nicfw/engine.h"
#include "nicfw/memfd.h"
#include "transport/shm/shm_transport.h"
#include "datapath.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "../transport/fault/fault_transport.h"
#include "nicfw/device.h"
#include "nicfw/hot_path.h"

namespace softvia::nicfw {


int Engine::create(const EngineConfig& cfg, std::unique_ptr<Engine>* out, std::string* why) {
    std::string ignored;
    if (!why) why = &ignored;
    hostmem::install();  // before the first access to host memory (hostmem.h)
    std::unique_ptr<Engine> e(new Engine());
    e->cfg_ = cfg;
    // The transport stack (wire, same-host shortcut, fault injector) comes composed
    // from the registry (transport/registry.cc).
    int rc = compose_transport(cfg.device, cfg.faults, &e->tr_, &e->faults_, why);
    if (rc < 0) return rc;
    // The shm wire itself (no wrapper): its send path is called directly (frames.h).
    e->shm_ = dynamic_cast<ShmTransport*>(e->tr_.get());
    e->post_sends_only_ = e->tr_->rx_poll_syscall();
#ifdef NICFW_HAVE_TSC
    if (cfg.progress == Progress::kInline && e->post_sends_only_) e->rx_spin_ = std::min(cfg.rx_spin, kMaxRxSpin);
#endif
    // Payload per frame: what fits after the header, in whole cache lines.
    e->mtu_ = (e->tr_->max_frame() - static_cast<uint32_t>(sizeof(nicfw_frame_hdr))) & ~63u;

    e->db_ring_.reset(new nicfw_doorbell[NICFW_DOORBELL_ENTRIES]);

    // Status page: a memfd softvia-nicinfo reads through /proc/<pid>/fd. Mode 0600 (a
    // memfd is born 0777): this user and root only. Sealed at its size, so a reader
    // can trust the size it sees (and tell our pages from files that only share the name).
    e->status_len_ = sizeof(nicfw_status_page) + NICFW_MAX_VI * sizeof(nicfw_vi_status);
    void* p;
    if (int rc = make_sealed_memfd("softvia-nic", e->status_len_, &e->status_fd_, &p)) {
        *why = std::string("status page memfd: ") + strerror(-rc);
        return rc;
    }
    e->status_ = static_cast<nicfw_status_page*>(p);
    e->vi_status_ = reinterpret_cast<nicfw_vi_status*>(e->status_ + 1);
    nicfw_status_page* s = e->status_;
    s->abi_version = NICFW_ABI_VERSION;
    s->pid = static_cast<uint32_t>(getpid());
    snprintf(s->device, sizeof s->device, "%s", cfg.device.c_str());
    snprintf(s->transport, sizeof s->transport, "%s", e->tr_->name());
    snprintf(s->progress, sizeof s->progress, "%s",
             cfg.progress == Progress::kThread ? "thread" : "inline");
    size_t alen;
    const uint8_t* a = e->tr_->local_addr(&alen);
    s->addr_len = static_cast<uint32_t>(alen);
    memcpy(s->addr, a, std::min<size_t>(alen, NICFW_MAX_ADDR));
    s->mtu = e->mtu_;
    s->max_vi = NICFW_MAX_VI;
    // VI lines are written as slots come into use (create_vi): readers look only below
    // vi_hwm, and the untouched rest of the page costs no page faults.

    // One line per offload of the registry, its counters named.
    for (const Offload* o; (o = offload_at(s->offloads)) != nullptr; s->offloads++) {
        nicfw_offload_status& line = s->offload[s->offloads];
        snprintf(line.name, sizeof line.name, "%s", o->name);
        for (uint32_t c = 0; c < kMaxOffloadCounters; c++)
            if (o->counter_names[c])
                snprintf(line.counter_names[c], sizeof line.counter_names[c], "%s", o->counter_names[c]);
    }
    __atomic_store_n(&s->magic, NICFW_STATUS_MAGIC, __ATOMIC_RELEASE);  // readers check it last

    e->last_slow_ns_ = now_ns();
    if (cfg.progress == Progress::kThread) e->fw_ = std::thread([eng = e.get()] { eng->firmware_thread(); });
    *out = std::move(e);
    return 0;
}

Engine::~Engine() {
    stop_.store(true, std::memory_order_relaxed);
    if (fw_.joinable()) fw_.join();
    if (ack_guard_.joinable()) ack_guard_.join();
    if (tr_) {  // a NIC whose creation failed may have no wire
        flush_acks(true);  // what we received counts as delivered at the peer
        // Tell connected peers we are leaving so they fail their VIs at once.
        for (auto& v : vis_)
            if (v && v->state.load(std::memory_order_relaxed) == NICFW_VI_CONNECTED)
                send_control(v->peer, NICFW_F_DISCONNECT, v->remote_vi, v->id, 0, nullptr);
        flush_backlog();  // best effort: a peer that stopped reading learns from the liveness check
        tr_->tx_flush();
        tr_.reset();
    }
    if (status_) munmap(status_, status_len_);
    if (status_fd_ >= 0) close(status_fd_);
}

// ---------------------------------------------------------------- protection tags
int Engine::create_ptag(uint32_t* ptag) {
    CtlGuard g(lock_, ctl_waiters_);
    if (ptags_.size() >= NICFW_MAX_PTAGS) return -ENOSPC;
    *ptag = next_ptag_++;
    ptags_.push_back(*ptag);
    return 0;
}

int Engine::destroy_ptag(uint32_t ptag) {
    CtlGuard g(lock_, ctl_waiters_);
    auto it = std::find(ptags_.begin(), ptags_.end(), ptag);
    if (it == ptags_.end()) return -EINVAL;
    if (mem_.ptag_in_use(ptag)) return -EBUSY;
    for (auto& v : vis_)
        if (v && v->attrs.ptag == ptag) return -EBUSY;
    ptags_.erase(it);
    return 0;
}

bool Engine::ptag_valid(uint32_t ptag) {
    CtlGuard g(lock_, ctl_waiters_);
    return has_ptag(ptag);
}

bool Engine::has_ptag(uint32_t ptag) const {
    return std::find(ptags_.begin(), ptags_.end(), ptag) != ptags_.end();
}

// ---------------------------------------------------------------- memory
int Engine::register_mem(uint64_t va, uint64_t len, uint32_t ptag, bool rdma_w, bool rdma_r,
                         uint32_t* memh, std::string* why) {
    // The NIC must be able to do what the attributes allow: read any registered memory
    // (sends gather from it) and write memory open to RDMA write. Memory the program
    // makes inaccessible later is the device's fault handler's business (hostmem.h).
    if (int rc = hostmem::check_access(va, len, rdma_w, why)) return rc;
    CtlGuard g(lock_, ctl_waiters_);
    if (!has_ptag(ptag)) return -EPERM;
    return mem_.add(va, len, ptag, rdma_w, rdma_r, memh);
}

int Engine::deregister_mem(uint64_t va, uint32_t memh) {
    CtlGuard g(lock_, ctl_waiters_);
    Region* r = mem_.find(memh);
    if (!r || r->base.load(std::memory_order_relaxed) != va) return -EINVAL;
    mem_.remove(memh);
    offload_memory_changed(memh);
    return 0;
}

int Engine::alloc_mem(uint64_t len, void** out) {
    CtlGuard g(lock_, ctl_waiters_);
    return shared_.alloc(len, out);
}

int Engine::free_mem(const void* addr) {
    CtlGuard g(lock_, ctl_waiters_);
    return shared_.free(addr, mem_);
}

int Engine::query_mem(uint64_t va, uint32_t memh, uint32_t* ptag, bool* rdma_w, bool* rdma_r) {
    CtlGuard g(lock_, ctl_waiters_);
    Region* r = mem_.find(memh);
    if (!r || r->base.load(std::memory_order_relaxed) != va) return -EINVAL;
    *ptag = r->ptag;
    *rdma_w = r->rdma_write;
    *rdma_r = r->rdma_read;
    return 0;
}

int Engine::set_mem_attrs(uint64_t va, uint32_t memh, uint32_t ptag, bool rdma_w, bool rdma_r,
                          std::string* why) {
    CtlGuard g(lock_, ctl_waiters_);
    Region* r = mem_.find(memh);
    if (!r || r->base.load(std::memory_order_relaxed) != va) return -EINVAL;
    if (!has_ptag(ptag)) return -EPERM;
    // Opening it to RDMA write: it must be writable (register_mem).
    if (rdma_w && !r->rdma_write) {
        if (int rc = hostmem::check_access(va, r->len.load(std::memory_order_relaxed), true, why)) return rc;
    }
    mem_.set_attrs(r, ptag, rdma_w, rdma_r);
    offload_memory_changed(memh);
    return 0;
}

// ---------------------------------------------------------------- completion queues
Cq* Engine::create_cq(uint32_t entries, void* user) {
    CtlGuard g(lock_, ctl_waiters_);
    auto cq = std::make_unique<Cq>();
    cq->user = user;
    cq->entries.resize(entries);
    Cq* raw = cq.get();
    cqs_.push_back(std::move(cq));
    return raw;
}

int Engine::destroy_cq(Cq* cq) {
    CtlGuard g(lock_, ctl_waiters_);
    if (cq->bound) return -EBUSY;
    auto it = std::find_if(cqs_.begin(), cqs_.end(), [&](auto& p) { return p.get() == cq; });
    if (it == cqs_.end()) return -EINVAL;
    cqs_.erase(it);
    return 0;
}

int Engine::resize_cq(Cq* cq, uint32_t entries) {
    CtlGuard g(lock_, ctl_waiters_);
    // The caller holds the driver's CQ lock, so cons is stable here.
    uint64_t prod = cq->prod.load(std::memory_order_relaxed);
    uint64_t cons = cq->cons.load(std::memory_order_relaxed);
    if (prod - cons > entries) return -ENOSPC;  // pending entries would not fit
    std::vector<nicfw_cqe> fresh(entries);
    size_t old = cq->entries.size();
    for (uint64_t i = cons; i < prod; i++) fresh[i % entries] = cq->entries[i % old];
    cq->entries.swap(fresh);
    return 0;
}

// ---------------------------------------------------------------- VIs
int Engine::create_vi(const ViAttrs& a, Cq* scq, Cq* rcq, void* user, Vi** out) {
    CtlGuard g(lock_, ctl_waiters_);
    if (!has_ptag(a.ptag)) return -EPERM;
    uint32_t idx;
    if (!vi_free_.empty()) {
        idx = vi_free_.back();
        vi_free_.pop_back();
    } else if (vis_.size() < NICFW_MAX_VI) {
        idx = static_cast<uint32_t>(vis_.size());
        vis_.emplace_back();
        vi_gen_.push_back(0);
    } else {
        return -ENOSPC;
    }
    auto vi = std::make_unique<Vi>();
    if (++vi_gen_[idx] == 0) vi_gen_[idx] = 1;
    vi->id = NICFW_VI_MAKE(idx, vi_gen_[idx]);
    vi->attrs = a;
    vi->rel_proto = runs_rel_proto(a);
    vi->retry_ns = cfg_.retry_timeout_ms * 1000000ull;
    vi->scq = scq;
    vi->rcq = rcq;
    vi->user = user;
    if (scq) scq->bound++;
    if (rcq) rcq->bound++;
    vi->st = &vi_status_[idx];
    memset(vi->st, 0, sizeof *vi->st);
    vi->st->reliability = a.reliability;
    vi->st->state = NICFW_VI_IDLE;
    // Slots come in order, so this marks nothing; it keeps every line below vi_hwm valid
    // should that change.
    for (uint32_t i = status_->vi_hwm; i < idx; i++) vi_status_[i].state = 0xFFFFFFFFu;
    if (idx + 1 > status_->vi_hwm) status_->vi_hwm = idx + 1;
    *out = vi.get();
    vis_[idx] = std::move(vi);
    vi_live_++;
    return 0;
}

int Engine::destroy_vi(Vi* vi) {
    CtlGuard g(lock_, ctl_waiters_);
    uint32_t st = vi->state.load(std::memory_order_relaxed);
    if (st == NICFW_VI_CONNECTED || st == NICFW_VI_CONNECT_PENDING) return -EBUSY;
    if (!vi->sq.empty() || !vi->rq.empty() || !vi->rq_alt.empty() || !vi->pending.empty()) return -EBUSY;
    uint32_t idx = NICFW_VI_INDEX(vi->id);
    if (vi->scq) vi->scq->bound--;
    if (vi->rcq) vi->rcq->bound--;
    if (vi->rcq_alt) vi->rcq_alt->bound--;
    tx_active_.erase(std::remove(tx_active_.begin(), tx_active_.end(), vi), tx_active_.end());
    connecting_.erase(std::remove(connecting_.begin(), connecting_.end(), vi), connecting_.end());
    ack_owed_.erase(std::remove(ack_owed_.begin(), ack_owed_.end(), vi), ack_owed_.end());
    rtx_timed_.erase(std::remove(rtx_timed_.begin(), rtx_timed_.end(), vi), rtx_timed_.end());
    vi_status_[idx].state = 0xFFFFFFFFu;
    vis_[idx].reset();
    vi_free_.push_back(idx);
    vi_live_--;
    return 0;
}

int Engine::set_vi_attrs(Vi* vi, const ViAttrs& a) {
    CtlGuard g(lock_, ctl_waiters_);
    if (!has_ptag(a.ptag)) return -EPERM;
    if (vi->state.load(std::memory_order_relaxed) != NICFW_VI_IDLE) return -EBUSY;
    vi->attrs = a;
    vi->rel_proto = runs_rel_proto(a);
    vi->st->reliability = a.reliability;
    return 0;
}

int Engine::enable_offload(Vi* vi, uint32_t index, Cq* alt_cq) {
    const Offload* o = offload_at(index);
    if (!o || !o->route_flags) return -EINVAL;
    CtlGuard g(lock_, ctl_waiters_);
    if (vi->state.load(std::memory_order_relaxed) != NICFW_VI_IDLE) return -EBUSY;
    if (vi->alt_flags && vi->alt_owner != index) return -EBUSY;  // one router per VI
    if (vi->rcq_alt) vi->rcq_alt->bound--;
    vi->rcq_alt = alt_cq;
    if (alt_cq) alt_cq->bound++;
    vi->alt_flags = o->route_flags;
    vi->alt_owner = static_cast<uint8_t>(index);
    return 0;
}

void Engine::set_vi_context(Vi* vi, uint64_t ctx) {
    CtlGuard g(lock_, ctl_waiters_);
    vi->user_context = ctx;
}

uint32_t Engine::vi_count() {
    CtlGuard g(lock_, ctl_waiters_);
    return vi_live_;
}


// ---------------------------------------------------------------- doorbells
void Engine::ring_full(const nicfw_doorbell& db) {
    // Full: make room ourselves (inline) or let the firmware thread drain it.
    do {
        if (!progress()) sched_yield();
    } while (!try_ring(db));
}

NICFW_HOT bool Engine::service_doorbells() {
    uint64_t head = db_head_.load(std::memory_order_relaxed);
    // Acquire pairs with ring()'s release of db_tail_.
    uint64_t tail = db_tail_.load(std::memory_order_acquire);
    if (head == tail) return false;
    for (; head != tail; head++) take_doorbell(db_ring_[head & (NICFW_DOORBELL_ENTRIES - 1)]);
    // Release: producers that see the new head may overwrite the entries we read.
    db_head_.store(head, std::memory_order_release);
    return true;
}

NICFW_HOT void Engine::take_doorbell(const nicfw_doorbell& db) {
    Vi* vi = vi_by_index(db.vi_index);
    if (vi == nullptr) return;  // VI destroyed after posting: the driver refuses that
    WorkItem w{reinterpret_cast<nicfw_desc*>(db.desc), db.memh};
    uint32_t st = vi->state.load(std::memory_order_relaxed);
    if (db.queue == NICFW_RECVQ || db.queue == NICFW_ALTQ) {
        WorkQueue& q = db.queue == NICFW_ALTQ ? vi->rq_alt : vi->rq;
        if (st == NICFW_VI_ERROR || (db.queue == NICFW_ALTQ && !vi->alt_flags)) {
            complete_on(*vi, db.queue, w, NICFW_DS_FLUSHED, 0);
        } else if (!q.push(w)) {
            complete_on(*vi, db.queue, w, NICFW_DS_FORMAT_ERROR, 0);  // driver bounds it; never
        }
    } else {
        if (st != NICFW_VI_CONNECTED) {
            complete(*vi, false, w, NICFW_DS_FLUSHED | send_op_status(w.desc), 0);
        } else if (!vi->sq.push(w)) {
            complete(*vi, false, w, NICFW_DS_FORMAT_ERROR, 0);
        } else {
            list_tx(*vi);
        }
    }
}

NICFW_HOT bool Engine::ring_direct(const nicfw_doorbell& db) {
    if (cfg_.progress == Progress::kThread || !lock_.try_lock()) return false;
    service_doorbells();  // those rung before it first
    take_doorbell(db);
    if (db.queue == NICFW_SENDQ) post_step_locked();
    lock_.unlock();
    return true;
}

// ---------------------------------------------------------------- main loop
namespace {
// Whether to read the clock for the slow path: only once the TSC has moved on by 2^16
// cycles (some 20 us) since the last look. A program polling for completions steps the
// NIC idle over and over, and a clock read on each of those steps was a fifth of its
// polling loop. A TSC that goes backwards (another CPU) only makes us look sooner.
inline bool slow_clock_due(uint64_t* last_tsc) {
#ifdef NICFW_HAVE_TSC
    return tsc_passed(last_tsc, 1u << 16);
#else
    (void)last_tsc;
    return true;
#endif
}
}  // namespace

// An idle step of a program that does nothing but poll us has the wire read again at
// once, up to rx_spin_ times, when its receive poll is a system call (udp). Between two
// reads a datagram that has come waits for the next one, and the whole step between
// them (some 500 instructions through the driver and the engine) made an idle poll take
// 580-680 ns where the system call alone took 490-500 (docs/transports.md, receive
// spin); reads back to back leave the system call. It only costs time the program would
// spend polling: it is taken when the program came back within kSpinGapTicks (~0.4 us)
// of the last idle step's end, and a doorbell (a post from another thread) or a control
// call waiting for the lock ends it (spin_stop).
bool Engine::spin_stop(const void* ctx) {
    auto* e = static_cast<const Engine*>(ctx);
    return e->db_tail_.load(std::memory_order_relaxed) != e->db_head_.load(std::memory_order_relaxed) ||
           e->ctl_waiters_.load(std::memory_order_relaxed);
}

NICFW_HOT bool Engine::step_locked() {
#ifdef NICFW_HAVE_TSC
    constexpr uint64_t kSpinGapTicks = 1u << 10;
    const bool polling = idle_end_tsc_ && __rdtsc() - idle_end_tsc_ < kSpinGapTicks;  // (only with rx_spin_)
#else
    const bool polling = false;
#endif
    bool did = service_doorbells();
    if (!backlog_.empty()) did |= flush_backlog();
    if (!tx_active_.empty()) did |= transmit();
    RxFrame frames[32];
    int n = shm_                ? shm_->rx_burst(frames, 32)  // direct on the shm wire
            : polling && !did ? tr_->rx_burst_spin(frames, 32, rx_spin_, {&spin_stop, this})
                                : tr_->rx_burst(frames, 32);
    rx_clock_ = 0;
    for (int i = 0; i < n; i++) handle_frame(frames[i]);
    if (n) {
        if (shm_)
            shm_->rx_release();
        else
            tr_->rx_release();
        did = true;
    }
    if (!ack_owed_.empty()) did |= flush_acks();
    // Timers: retransmission (checked on these same steps), and the slow path (link
    // set-up, liveness, connection timers) about every 1 ms.
    if ((++step_count_ & 63) == 0 || !did) {
        if (!rtx_timed_.empty()) did |= rtx_timers();
        // Idle steps look at every 4th (a busy step at every 64th step of all).
        if ((did || (++idle_looks_ & 3) == 0) && slow_clock_due(&last_slow_tsc_)) {
            uint64_t now = now_ns();
            if (now - last_slow_ns_ >= 1000000) {
                last_slow_ns_ = now;
                slow_path(now);
            }
        }
    }
    // Batching wires send what this step committed, timers' resends too (the shm wire
    // publishes each frame at commit: nothing to flush).
    if (!shm_) tr_->tx_flush();
    tx_held_.store(false, std::memory_order_relaxed);
#ifdef NICFW_HAVE_TSC
    if (rx_spin_) idle_end_tsc_ = did ? 0 : __rdtsc();
#endif
    return did;
}

// The step after a send was posted: a whole one, unless the wire's receive poll is a
// system call or frames wait for a batch (post_progress says why).
NICFW_HOT void Engine::post_step_locked() {
    if (cfg_.tx_batch == 0 && !post_sends_only_) {
        step_locked();
        return;
    }
    service_doorbells();
    if (!backlog_.empty()) flush_backlog();
    if (!tx_active_.empty()) transmit();
    const uint32_t queued = shm_ ? 0 : tr_->tx_queued();
    if (queued >= cfg_.tx_batch) {
        tr_->tx_flush();
    } else if (queued && !tx_held_.load(std::memory_order_relaxed)) {
        tx_held_.store(true, std::memory_order_relaxed);
        start_guard();
    }
}


// Sends owed ACKs outside a step, unless someone is stepping (and so sends them).
void Engine::send_acks_if_idle(bool now) {
    if (!lock_.try_lock()) return;
    acks_held_.store(false, std::memory_order_relaxed);  // flush_acks sets it again if it holds
    if (!ack_owed_.empty()) flush_acks(now);
    tr_->tx_flush();
    tx_held_.store(false, std::memory_order_relaxed);
    lock_.unlock();
}

void Engine::flush_owed_acks() {
    if (cfg_.progress == Progress::kInline) send_acks_if_idle(true);  // else the thread sends them
}

// Inline progress only: a thread that wakes about every millisecond for what no call of
// the program may come for (held ACKs, frames held by txbatch). Started on first need.
void Engine::start_guard() {
    if (!ack_guard_.joinable()) ack_guard_ = std::thread([this] { ack_guard_thread(); });
}

void Engine::ack_guard_thread() {
    hostmem::unblock_faults_here();
    while (!stop_.load(std::memory_order_relaxed)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, nullptr);
        // Held ACKs past their hold, and frames a txbatch post left queued (send_acks_if_idle flushes).
        if (acks_held_.load(std::memory_order_relaxed) || tx_held_.load(std::memory_order_relaxed))
            send_acks_if_idle(false);
    }
}

void Engine::sleep_on_events(uint32_t ev) {
    struct timespec ts = {0, 1000000};  // a missed wake-up costs at most this
    syscall(SYS_futex, &events_, FUTEX_WAIT_PRIVATE, ev, &ts, nullptr, 0);
}

void Engine::wake_sleepers() {
    // Pairs with block(): our completions are published before we look for sleepers,
    // and a sleeper registers before it re-checks its condition.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_relaxed) == 0) return;
    events_.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, &events_, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

void Engine::wake_blocked() {
    events_.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, &events_, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

void Engine::firmware_thread() {
    hostmem::unblock_faults_here();
    uint32_t idle = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
        lock_.lock();
        bool did = step_locked();
        lock_.unlock();
        if (errors_pending_.load(std::memory_order_relaxed)) deliver_errors();
        if (ctl_waiters_.load(std::memory_order_relaxed)) sched_yield();  // let control calls in
        if (did) {
            wake_sleepers();
            idle = 0;
        } else if (++idle > 20000) {
            // Long idle: back off so a polling thread does not starve a 2-core host.
            // A busy NIC never sleeps; an idle one answers within ~50 us.
            struct timespec ts = {0, 20000};
            nanosleep(&ts, nullptr);
        } else {
            __builtin_ia32_pause();
        }
    }
}

void Engine::slow_path(uint64_t now) {
    tr_events_.clear();
    tr_->poll_slow(tr_events_);
    bool dead = false;
    for (const TransportEvent& ev : tr_events_) {
        if (ev.kind == PeerEvent::kFreed) {
            forget_peer(ev.peer);
            continue;
        }
        dead = true;
        flush_backlog();  // drops what was waiting for the dead peer
        for (auto& v : vis_) {
            if (!v || v->peer != ev.peer) continue;
            uint32_t st = v->state.load(std::memory_order_relaxed);
            if (st == NICFW_VI_CONNECTED || st == NICFW_VI_CONNECT_PENDING)
                flush_vi(*v, NICFW_VI_ERROR, false, NICFW_AE_CONN_LOST);
        }
    }
    // Peers nothing refers to go back to the transport: at once after a death, else
    // every 16th turn (about 16 ms).
    if (dead || (++slow_turns_ & 15) == 0) release_unused_peers();
    status_->peers = static_cast<uint32_t>(tr_->live_peers());
    // Connection timers: peer requests are resent until answered or expired.
    for (size_t i = 0; i < connecting_.size();) {
        Vi* vi = connecting_[i];
        if (vi->state.load(std::memory_order_relaxed) != NICFW_VI_CONNECT_PENDING) {
            connecting_[i] = connecting_.back();
            connecting_.pop_back();
            continue;
        }
        if (vi->op == ConnOp::kPeer && !peer_timer(*vi, now)) continue;  // expired: removed on the next turn
        if (vi->op == ConnOp::kClient) client_timer(*vi, now);
        i++;
    }
}

int Engine::set_faults(const std::string& text) {
    FaultSpec spec;
    if (!parse_fault_spec(text, &spec)) return -EINVAL;
    CtlGuard g(lock_, ctl_waiters_);
    if (!faults_) return -EBUSY;  // the checksum trailer is decided at open
    faults_->set_spec(spec);
    return 0;
}

bool Engine::fault_counters(FaultCounters* out) {
    CtlGuard g(lock_, ctl_waiters_);
    if (!faults_) return false;
    *out = faults_->counters();
    return true;
}

void Engine::inject_frame(int peer, const uint8_t* data, uint32_t len) {
    CtlGuard g(lock_, ctl_waiters_);
    if (peer < 0 || static_cast<size_t>(peer) >= tr_->peer_count()) return;
    rx_clock_ = 0;
    handle_frame(RxFrame{data, len, peer});
}

}  // namespace softvia::nicfw
