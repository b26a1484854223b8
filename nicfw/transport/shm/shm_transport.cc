// shm transport: creation, lanes and hellos, and the data path (reserve/commit, receive
// bursts). Peer lifetimes are in shm_peers.cc; the shared layout in shm_layout.h.
// Ordering rules: docs/memory-ordering.md; design and costs: docs/transports.md.
#include "shm_transport.h"

#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "nicfw/memfd.h"
#include "shm_layout.h"
#include "shm_tx.h"
#include "nicfw/hot_path.h"

namespace softvia::nicfw {

using namespace shm;

NICFW_HOT uint32_t ShmTransport::max_frame() const { return kSlotBytes - kSlotHdr; }

int ShmTransport::create(std::unique_ptr<ShmTransport>* out, uint32_t max_peers) {
    if (max_peers == 0 || max_peers > kMaxPeers) return -EINVAL;
    std::unique_ptr<ShmTransport> t(new ShmTransport());
    t->max_peers_ = max_peers;
    void* p;
    int rc = make_sealed_memfd("softvia-shm", sizeof(ShmSegment), &t->memfd_, &p);
    if (rc < 0) return rc;
    t->seg_ = static_cast<ShmSegment*>(p);
    t->epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (t->epfd_ < 0) return -errno;
    t->pid_ = static_cast<uint32_t>(getpid());
    if (getrandom(&t->nonce_, sizeof t->nonce_, 0) != sizeof t->nonce_) t->nonce_ = 0x9e3779b9u ^ t->pid_;
    if (t->nonce_ == 0) t->nonce_ = 1;
    t->host_id_ = host_id();
    t->now_ns_ = now_ns();
    ShmSegment* s = t->seg_;
    s->version = kVersion;
    s->pid = t->pid_;
    s->nonce = t->nonce_;
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
    for (auto& p : peers_) drop_links(p);
    if (seg_) munmap(seg_, sizeof(ShmSegment));
    if (memfd_ >= 0) close(memfd_);
    if (epfd_ >= 0) close(epfd_);
}

void ShmTransport::report(const char* fmt, ...) {
    // At most 5 lines a second per NIC: a flood of refused peers must not flood stderr.
    uint64_t now = now_ns();
    if (now - report_ns_ >= 1000000000ull) {
        if (muted_) fprintf(stderr, "softvia: shm: (%u more such messages not shown)\n", muted_);
        report_ns_ = now;
        reports_ = muted_ = 0;
    }
    if (reports_++ >= 5) {
        muted_++;
        return;
    }
    char line[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "softvia: shm: %s\n", line);
}

int ShmTransport::map_segment(uint32_t pid, uint32_t fd, uint32_t nonce, ShmSegment** seg) {
    void* p;
    int rc = map_remote(pid, fd, sizeof(ShmSegment), &p);
    if (rc < 0) return rc;
    auto* s = static_cast<ShmSegment*>(p);
    // Acquire pairs with the release fence in create(): fields are valid once magic is.
    uint64_t magic = __atomic_load_n(&s->magic, __ATOMIC_ACQUIRE);
    if (magic != kSegMagic || s->version != kVersion || s->nonce != nonce || s->pid != pid ||
        !s->alive.load(std::memory_order_acquire)) {
        munmap(p, sizeof(ShmSegment));
        return -EHOSTUNREACH;
    }
    *seg = s;
    return 0;
}

int ShmTransport::map_lane(const Peer& p, uint32_t fd, uint32_t serial, ShmLane** lane) {
    void* m;
    int rc = map_remote(p.pid, fd, sizeof(ShmLane), &m);
    if (rc < 0) return rc;
    auto* l = static_cast<ShmLane*>(m);
    if (__atomic_load_n(&l->magic, __ATOMIC_ACQUIRE) != kLaneMagic || l->version != kVersion ||
        l->nslots != kSlots || l->slot_bytes != kSlotBytes || l->serial != serial || l->src_pid != p.pid ||
        l->src_nonce != p.nonce || l->dst_pid != pid_ || l->dst_nonce != nonce_) {
        munmap(m, sizeof(ShmLane));
        return -ENOTRECOVERABLE;
    }
    prefault(m, sizeof(ShmLane));
    *lane = l;
    return 0;
}

// Makes our lane to p (its own memfd) and announces it with a hello. Called on the
// first send to a peer, whether we resolved it or it reached us first.
int ShmTransport::open_lane(Peer& p) {
    if (p.state != Peer::kLive) return -EHOSTUNREACH;
    int fd;
    void* m;
    int rc = make_sealed_memfd("softvia-lane", sizeof(ShmLane), &fd, &m);
    if (rc < 0) return rc;
    prefault(m, sizeof(ShmLane));
    auto* l = static_cast<ShmLane*>(m);  // fresh pages are zero: cons, attached, closed, every seq
    l->version = kVersion;
    l->nslots = kSlots;
    l->slot_bytes = kSlotBytes;
    l->serial = ++serial_;
    l->src_pid = pid_;
    l->src_nonce = nonce_;
    l->dst_pid = p.pid;
    l->dst_nonce = p.nonce;
    __atomic_store_n(&l->magic, kLaneMagic, __ATOMIC_RELEASE);
    p.tx = l;
    p.tx_fd = fd;
    p.tx_serial = l->serial;
    p.prod = p.cached_cons = 0;
    p.released = false;
    p.hello_pending = true;
    post_hello(p);  // if the mailbox is full, poll_slow retries; frames wait in the lane
    return 0;
}

bool ShmTransport::post_hello(Peer& p) {
    ShmSegment* s = p.seg;
    for (uint32_t i = 0; i < kMailbox; i++) {
        uint32_t expect = kMboxFree;
        // Claim a free mailbox slot; several processes may post hellos at once.
        if (!s->mbox[i].state.compare_exchange_strong(expect, kMboxBusy, std::memory_order_acquire))
            continue;
        s->mbox[i].lane_fd = static_cast<uint32_t>(p.tx_fd);
        s->mbox[i].serial = p.tx_serial;
        memcpy(s->mbox[i].from, addr_, kAddrLen);
        // Release: the receiver that sees READY sees the fields.
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
        uint32_t lane_fd = m.lane_fd, serial = m.serial;
        m.state.store(kMboxFree, std::memory_order_release);
        bool created;
        int id = peer_for(from, kAddrLen, &created);
        if (id >= 0) {
            attach(id, lane_fd, serial);
        } else if (id != -EINVAL && id != -EHOSTUNREACH) {
            // We cannot take this peer: it hears so at once rather than waiting in vain.
            uint32_t pid = get32(from + 4);
            post_notice(pid, get32(from + 12), -id);
            if (id == -EACCES || id == -ENOTRECOVERABLE)
                report("refused a link from the NIC of process %u: its segment /proc/%u/fd/%u: %s", pid, pid,
                       get32(from + 8), why(-id));
            else
                report("refused a link from the NIC of process %u: %s", pid, why(-id));
        }
    }
}

// Maps the lane a peer announced; its frames are read after those of its older lane.
void ShmTransport::attach(int id, uint32_t lane_fd, uint32_t serial) {
    Peer& p = peers_[id];
    ShmLane* l = nullptr;
    if (p.self) {
        if (p.tx == nullptr || serial != p.tx_serial || p.rx == p.tx) return;
        l = p.tx;  // our own lane to ourselves
    } else {
        int rc = map_lane(p, lane_fd, serial, &l);
        if (rc < 0) {
            cut(id, -rc, true, "cannot map its lane");
            return;
        }
    }
    p.released = false;
    l->attached.store(1, std::memory_order_release);
    if (p.rx == nullptr) {
        p.rx = l;
        p.head = l->cons.load(std::memory_order_relaxed);
        p.taken = 0;
        rx_active_.push_back(id);
    } else {
        p.rx_next.push_back(l);
    }
}

NICFW_HOT uint8_t* ShmTransport::tx_reserve(int peer, uint32_t len) { return reserve_slot(peer, len); }
NICFW_HOT void ShmTransport::tx_commit(int peer, uint32_t len) { commit_slot(peer, len); }

NICFW_HOT int ShmTransport::rx_burst(RxFrame* out, int max) {
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

NICFW_HOT void ShmTransport::rx_release() {
    for (int id : rx_active_) {
        Peer& p = peers_[id];
        if (p.taken == 0) continue;
        p.head += p.taken;
        p.taken = 0;
        p.released = false;  // a frame from it: the engine may hold the index again
        // Release: the producer that sees cons may reuse the slots we read.
        p.rx->cons.store(p.head, std::memory_order_release);
    }
}

}  // namespace softvia::nicfw
