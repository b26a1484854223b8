// shm transport implementation. Layout and ordering rules: docs/memory-ordering.md.
#include "shm_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace softvia::nicfw {

namespace {
constexpr uint64_t kSegMagic = 0x5356534d53454731ull;  // "SVSMSEG1"
constexpr uint32_t kSegVersion = 1;
constexpr uint32_t kLanes = 256;       // peers this NIC can send to
constexpr uint32_t kSlots = 64;        // frames in flight per lane, power of two
constexpr uint32_t kSlotBytes = 8256;  // 16-byte slot header + frame (8 KiB payload + header)
constexpr uint32_t kSlotHdr = 16;
constexpr uint32_t kMailbox = 64;

enum : uint32_t { kMboxFree = 0, kMboxBusy = 1, kMboxReady = 2 };

struct alignas(64) MboxSlot {
    std::atomic<uint32_t> state;
    uint32_t lane;      // the sender's lane carrying frames to us
    uint8_t from[ShmTransport::kAddrLen];
};

struct alignas(64) Slot {
    std::atomic<uint64_t> seq;  // index + 1 once the frame is published
    uint32_t len;
    uint32_t pad;
    uint8_t frame[kSlotBytes - kSlotHdr];
};
static_assert(sizeof(Slot) == kSlotBytes);
}  // namespace

struct alignas(64) ShmLane {
    uint32_t dst_pid, dst_nonce;    // who this lane is for (checked by the receiver)
    alignas(64) std::atomic<uint64_t> cons;  // frames consumed; written by the receiver only
    alignas(64) Slot slots[kSlots];
};

struct alignas(64) ShmSegment {
    uint64_t magic;
    uint32_t version, pid, nonce, lanes, slots, slot_bytes;
    std::atomic<uint32_t> alive;  // cleared at close; peers also check the pid
    alignas(64) std::atomic<uint64_t> mbox_posted;  // bumped after a hello is READY
    MboxSlot mbox[kMailbox];
    ShmLane lane[kLanes];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be address-free");

namespace {
uint64_t host_id() {
    // The boot id tells hosts apart (network namespaces share it: same kernel, same host).
    char buf[64] = {};
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        (void)n;
        close(fd);
    }
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (char c : buf) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    return h;
}

void put32(uint8_t* p, uint32_t v) { memcpy(p, &v, 4); }
uint32_t get32(const uint8_t* p) { uint32_t v; memcpy(&v, p, 4); return v; }
uint64_t get64(const uint8_t* p) { uint64_t v; memcpy(&v, p, 8); return v; }
}  // namespace

uint32_t ShmTransport::max_frame() const { return kSlotBytes - kSlotHdr; }

ShmLane* ShmTransport::lane(ShmSegment* seg, uint32_t i) const { return &seg->lane[i]; }

int ShmTransport::create(std::unique_ptr<ShmTransport>* out) {
    std::unique_ptr<ShmTransport> t(new ShmTransport());
    t->memfd_ = memfd_create("softvia-shm", MFD_CLOEXEC);
    if (t->memfd_ < 0) return -errno;
    // Make the memfd openable by peers of the same user only.
    fchmod(t->memfd_, 0600);
    t->seg_len_ = sizeof(ShmSegment);
    if (ftruncate(t->memfd_, static_cast<off_t>(t->seg_len_)) != 0) return -errno;
    void* p = mmap(nullptr, t->seg_len_, PROT_READ | PROT_WRITE, MAP_SHARED, t->memfd_, 0);
    if (p == MAP_FAILED) return -errno;
    t->seg_ = static_cast<ShmSegment*>(p);
    t->pid_ = static_cast<uint32_t>(getpid());
    if (getrandom(&t->nonce_, sizeof t->nonce_, 0) != sizeof t->nonce_) t->nonce_ = 0x9e3779b9u ^ t->pid_;
    if (t->nonce_ == 0) t->nonce_ = 1;
    t->host_id_ = host_id();
    ShmSegment* s = t->seg_;
    s->version = kSegVersion;
    s->pid = t->pid_;
    s->nonce = t->nonce_;
    s->lanes = kLanes;
    s->slots = kSlots;
    s->slot_bytes = kSlotBytes;
    s->alive.store(1, std::memory_order_relaxed);
    // Release: a peer that sees the magic sees the fields above.
    std::atomic_thread_fence(std::memory_order_release);
    s->magic = kSegMagic;

    uint8_t* a = t->addr_;
    a[0] = kAddrKind;
    a[1] = 1;
    put32(a + 4, t->pid_);
    put32(a + 8, static_cast<uint32_t>(t->memfd_));
    put32(a + 12, t->nonce_);
    memcpy(a + 16, &t->host_id_, 8);
    *out = std::move(t);
    return 0;
}

ShmTransport::~ShmTransport() {
    if (seg_) seg_->alive.store(0, std::memory_order_release);
    for (auto& p : peers_) {
        if (p.mapped_here && p.seg) munmap(p.seg, p.seg_len);
        if (p.pidfd >= 0) close(p.pidfd);
    }
    if (seg_) munmap(seg_, seg_len_);
    if (memfd_ >= 0) close(memfd_);
}

int ShmTransport::map_peer(uint32_t pid, uint32_t fd, uint32_t nonce, ShmSegment** seg,
                           size_t* len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/fd/%u", pid, fd);
    int f = open(path, O_RDWR | O_CLOEXEC);
    if (f < 0) return -EHOSTUNREACH;  // process gone, or not ours to open
    struct stat st;
    if (fstat(f, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(ShmSegment)) {
        close(f);
        return -EHOSTUNREACH;
    }
    void* p = mmap(nullptr, sizeof(ShmSegment), PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    close(f);
    if (p == MAP_FAILED) return -ENOMEM;
    auto* s = static_cast<ShmSegment*>(p);
    // Acquire pairs with the release fence in create(): fields are valid once magic is.
    uint64_t magic = __atomic_load_n(&s->magic, __ATOMIC_ACQUIRE);
    if (magic != kSegMagic || s->version != kSegVersion || s->nonce != nonce || s->pid != pid ||
        s->lanes != kLanes || s->slots != kSlots || s->slot_bytes != kSlotBytes ||
        !s->alive.load(std::memory_order_acquire)) {
        munmap(p, sizeof(ShmSegment));
        return -EHOSTUNREACH;
    }
    *seg = s;
    *len = sizeof(ShmSegment);
    return 0;
}

// Finds or creates the peer entry for an address (maps its segment, no lane yet).
int ShmTransport::peer_for(const uint8_t* addr, size_t len, bool* created) {
    *created = false;
    if (addr == nullptr || len != kAddrLen || addr[0] != kAddrKind || addr[1] != 1) return -EINVAL;
    uint32_t pid = get32(addr + 4), fd = get32(addr + 8), nonce = get32(addr + 12);
    if (get64(addr + 16) != host_id_) return -EHOSTUNREACH;  // another host: not reachable by shm
    uint64_t key = (static_cast<uint64_t>(pid) << 32) | nonce;
    auto it = by_key_.find(key);
    if (it != by_key_.end()) return it->second;
    Peer p;
    p.addr.assign(addr, addr + len);
    p.pid = pid;
    p.nonce = nonce;
    if (pid == pid_ && nonce == nonce_) {
        p.seg = seg_;  // a process talking to itself: our own segment
        p.seg_len = seg_len_;
    } else {
        int rc = map_peer(pid, fd, nonce, &p.seg, &p.seg_len);
        if (rc < 0) return rc;
        p.mapped_here = true;
        // A pidfd reports the exit of exactly this process, zombie or reaped, and never
        // a later process that reuses the pid. Without one we fall back to kill(pid, 0).
        p.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    }
    peers_.push_back(std::move(p));
    int id = static_cast<int>(peers_.size() - 1);
    by_key_[key] = id;
    *created = true;
    return id;
}

int ShmTransport::resolve(const uint8_t* addr, size_t len) {
    bool created;
    int id = peer_for(addr, len, &created);
    if (id < 0) return id;
    Peer& p = peers_[id];
    if (p.dead) return -EHOSTUNREACH;
    if (p.tx_lane < 0 && !open_lane(p)) return -ENOSPC;
    return id;
}

// Claims a lane in our segment for frames to p and announces it with a hello. Called on
// the first send to a peer, whether we resolved it or it reached us first.
bool ShmTransport::open_lane(Peer& p) {
    uint32_t l;
    if (!free_lanes_.empty()) {
        l = free_lanes_.back();
        free_lanes_.pop_back();
    } else if (next_lane_ < kLanes) {
        l = next_lane_++;
    } else {
        return false;  // more peers than lanes
    }
    ShmLane* ln = lane(seg_, l);
    ln->dst_pid = p.pid;
    ln->dst_nonce = p.nonce;
    ln->cons.store(0, std::memory_order_relaxed);
    for (auto& s : ln->slots) s.seq.store(0, std::memory_order_relaxed);
    p.tx_lane = static_cast<int>(l);
    p.prod = p.cached_cons = 0;
    p.hello_pending = true;
    post_hello(p);  // if the mailbox is full, poll_slow retries; frames wait in the lane
    return true;
}

bool ShmTransport::post_hello(Peer& p) {
    ShmSegment* s = p.seg;
    for (uint32_t i = 0; i < kMailbox; i++) {
        uint32_t expect = kMboxFree;
        // Claim a free mailbox slot; several processes may post hellos at once.
        if (!s->mbox[i].state.compare_exchange_strong(expect, kMboxBusy, std::memory_order_acquire))
            continue;
        s->mbox[i].lane = static_cast<uint32_t>(p.tx_lane);
        memcpy(s->mbox[i].from, addr_, kAddrLen);
        // Release: the receiver that sees READY sees lane and from.
        s->mbox[i].state.store(kMboxReady, std::memory_order_release);
        s->mbox_posted.fetch_add(1, std::memory_order_release);
        p.hello_pending = false;
        return true;
    }
    return false;
}

void ShmTransport::process_mailbox() {
    // Acquire pairs with the producer's fetch_add: the READY states are visible.
    mbox_seen_ = seg_->mbox_posted.load(std::memory_order_acquire);
    for (auto& m : seg_->mbox) {
        if (m.state.load(std::memory_order_acquire) != kMboxReady) continue;
        uint8_t from[kAddrLen];
        memcpy(from, m.from, kAddrLen);
        uint32_t l = m.lane;
        m.state.store(kMboxFree, std::memory_order_release);
        bool created;
        int id = peer_for(from, kAddrLen, &created);
        if (id < 0 || l >= kLanes) continue;  // a hello we cannot use
        Peer& p = peers_[id];
        ShmLane* ln = lane(p.seg, l);
        if (ln->dst_pid != pid_ || ln->dst_nonce != nonce_) continue;  // a lane not for us
        if (p.rx == nullptr) rx_active_.push_back(id);
        p.rx = ln;
        p.head = ln->cons.load(std::memory_order_relaxed);
        p.taken = 0;
    }
}

uint8_t* ShmTransport::tx_reserve(int peer, uint32_t len) {
    Peer& p = peers_[peer];
    if (p.dead || len > max_frame()) return nullptr;
    if (p.tx_lane < 0 && !open_lane(p)) return nullptr;  // a peer that reached us first
    if (p.prod - p.cached_cons >= kSlots) {
        // Acquire pairs with the consumer's release store of cons: the slot is free.
        p.cached_cons = lane(seg_, p.tx_lane)->cons.load(std::memory_order_acquire);
        if (p.prod - p.cached_cons >= kSlots) return nullptr;
    }
    return lane(seg_, p.tx_lane)->slots[p.prod & (kSlots - 1)].frame;
}

void ShmTransport::tx_commit(int peer, uint32_t len) {
    Peer& p = peers_[peer];
    Slot& s = lane(seg_, p.tx_lane)->slots[p.prod & (kSlots - 1)];
    s.len = len;
    // Release: the consumer that sees seq sees len and the frame bytes.
    s.seq.store(p.prod + 1, std::memory_order_release);
    p.prod++;
}

int ShmTransport::rx_burst(RxFrame* out, int max) {
    if (seg_->mbox_posted.load(std::memory_order_relaxed) != mbox_seen_) process_mailbox();
    const uint32_t np = static_cast<uint32_t>(rx_active_.size());
    if (np == 0) return 0;
    // The first peer looked at rotates, so one busy peer cannot starve the others.
    // (Indices wrap by comparison: this runs on every step, a division is not free.)
    uint32_t first = rx_rotor_;
    if (first >= np) first %= np;  // the list shrank since
    rx_rotor_ = first + 1 == np ? 0 : first + 1;
    int n = 0;
    uint32_t k = first;
    for (uint32_t left = np; left && n < max; left--) {
        const int id = rx_active_[k];
        if (++k == np) k = 0;
        Peer& p = peers_[id];
        ShmLane* ln = p.rx;
        if (ln == nullptr) continue;
        // The ring position in locals: the stores to out[] could otherwise alias it.
        const uint64_t head = p.head;
        uint32_t taken = p.taken;
        while (n < max && taken < kSlots) {
            const uint64_t idx = head + taken;
            Slot& s = ln->slots[idx & (kSlots - 1)];
            // Acquire pairs with tx_commit's release store of seq.
            if (s.seq.load(std::memory_order_acquire) != idx + 1) break;
            uint32_t len = s.len;
            taken++;
            if (len > max_frame()) continue;  // a peer that writes garbage costs it the frame
            out[n++] = RxFrame{s.frame, len, id};
        }
        p.taken = taken;
    }
    return n;
}

void ShmTransport::rx_release() {
    for (int id : rx_active_) {
        Peer& p = peers_[id];
        if (p.taken == 0) continue;
        p.head += p.taken;
        p.taken = 0;
        // Release: the producer that sees cons may reuse the slots we read.
        p.rx->cons.store(p.head, std::memory_order_release);
    }
}

void ShmTransport::poll_slow(std::vector<TransportEvent>& events) {
    process_mailbox();
    for (size_t i = 0; i < peers_.size(); i++) {
        Peer& p = peers_[i];
        if (p.dead) continue;
        if (p.hello_pending) post_hello(p);
        if (p.seg == seg_) continue;  // ourselves
        bool gone = !p.seg->alive.load(std::memory_order_acquire);
        if (!gone && p.pidfd >= 0) {
            pollfd pfd{p.pidfd, POLLIN, 0};
            gone = poll(&pfd, 1, 0) > 0;
        } else if (!gone) {
            gone = kill(static_cast<pid_t>(p.pid), 0) != 0 && errno == ESRCH;
        }
        if (!gone) continue;
        p.dead = true;
        if (p.tx_lane >= 0) free_lanes_.push_back(static_cast<uint32_t>(p.tx_lane));
        p.tx_lane = -1;
        events.push_back({PeerEvent::kDead, static_cast<int>(i)});
    }
    // Drop dead peers from the poll list; their frames are no longer read.
    for (size_t k = 0; k < rx_active_.size();) {
        Peer& p = peers_[rx_active_[k]];
        if (p.dead && p.taken == 0) {
            p.rx = nullptr;
            rx_active_[k] = rx_active_.back();
            rx_active_.pop_back();
        } else {
            k++;
        }
    }
}

}  // namespace softvia::nicfw
