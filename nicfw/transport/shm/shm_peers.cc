// shm_peers.cc -- peers of an shm NIC come and go: finding or making a peer entry,
// refusing one we cannot take (a notice on our board), noticing deaths, closing the
// links of released peers and freeing their indices (shm_transport.h, transport.h).
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "shm_layout.h"
#include "shm_transport.h"

namespace softvia::nicfw {

using namespace shm;

int ShmTransport::new_peer_index() {
    if (!free_ids_.empty()) {
        int id = free_ids_.back();
        free_ids_.pop_back();
        return id;
    }
    if (peers_.size() >= kMaxPeers) return -ENOSPC;
    peers_.emplace_back();
    return static_cast<int>(peers_.size() - 1);
}

// Finds the live peer entry for an address, or makes one: maps its segment and watches
// its process (no lane yet). A peer that died or was cut gets a fresh entry; the old one
// waits for the engine to release its index.
int ShmTransport::peer_for(const uint8_t* addr, size_t len, bool* created) {
    *created = false;
    if (addr == nullptr || len != kAddrLen || addr[0] != kAddrKind || addr[1] != 1) return -EINVAL;
    uint32_t pid = get32(addr + 4), fd = get32(addr + 8), nonce = get32(addr + 12);
    if (get64(addr + 16) != host_id_) return -EHOSTUNREACH;  // another host: not reachable by shm
    uint64_t key = (static_cast<uint64_t>(pid) << 32) | nonce;
    auto it = by_key_.find(key);
    if (it != by_key_.end() && peers_[it->second].state == Peer::kLive) return it->second;
    if (live_ >= max_peers_) return -ENOSPC;
    const bool self = pid == pid_ && nonce == nonce_;
    ShmSegment* s = seg_;  // a process talking to itself: our own segment
    int pidfd = -1;
    if (!self) {
        int rc = map_segment(pid, fd, nonce, &s);
        if (rc < 0) return rc;
        // A pidfd reports the exit of exactly this process, zombie or reaped, and never a
        // later process that reuses the pid. Without pidfds (old kernel) kill(pid, 0).
        pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
        if (pidfd < 0 && errno != ENOSYS) {
            int e = errno;
            munmap(s, sizeof(ShmSegment));
            return e == EMFILE || e == ENFILE || e == ENOMEM ? -e : -EHOSTUNREACH;
        }
    }
    int id = new_peer_index();
    if (id < 0) {
        if (pidfd >= 0) close(pidfd);
        if (!self) munmap(s, sizeof(ShmSegment));
        return id;
    }
    Peer& p = peers_[id];
    uint32_t gen = p.gen;
    p = Peer{};
    p.gen = gen;
    p.state = Peer::kLive;
    p.self = self;
    p.addr.assign(addr, addr + len);
    p.pid = pid;
    p.nonce = nonce;
    p.seg = s;
    p.notices_seen = s->notices_posted.load(std::memory_order_acquire);  // older ones are not about us
    p.pidfd = pidfd;
    if (pidfd >= 0) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = static_cast<uint32_t>(id) | (static_cast<uint64_t>(gen) << 32);
        if (epoll_ctl(epfd_, EPOLL_CTL_ADD, pidfd, &ev) != 0) {
            close(pidfd);  // watched by kill(pid, 0) then
            p.pidfd = -1;
        }
    }
    by_key_[key] = id;
    live_++;
    *created = true;
    return id;
}

int ShmTransport::resolve(const uint8_t* addr, size_t len) {
    bool created;
    int id = peer_for(addr, len, &created);
    if (id == -EACCES || id == -EMFILE || id == -ENFILE || id == -ENOMEM || id == -ENOSPC ||
        id == -ENOTRECOVERABLE) {
        uint32_t pid = get32(addr + 4);
        if (id == -EACCES || id == -ENOTRECOVERABLE)
            report("cannot link to the NIC of process %u: its segment /proc/%u/fd/%u: %s", pid, pid, get32(addr + 8),
                   why(-id));
        else
            report("cannot link to the NIC of process %u: %s", pid, why(-id));
        return id == -ENOTRECOVERABLE ? -EHOSTUNREACH : id;
    }
    if (id < 0) return id;
    Peer& p = peers_[id];
    p.released = false;
    if (p.tx == nullptr) {
        int rc = open_lane(p);
        if (rc < 0) {
            report("cannot open a lane to the NIC of process %u: %s", p.pid, why(-rc));
            return rc;  // the entry, unused, is released by the engine like any other
        }
    }
    return id;
}

int ShmTransport::open_link(int peer) {
    Peer& p = peers_[peer];
    if (p.state != Peer::kLive) return -EHOSTUNREACH;
    p.released = false;
    if (p.tx) return 0;
    int rc = open_lane(p);
    if (rc < 0) cut(peer, -rc, true, "cannot open a lane to it");
    return rc;
}

void ShmTransport::release_peer(int peer) {
    if (peer < 0 || static_cast<size_t>(peer) >= peers_.size()) return;
    Peer& p = peers_[peer];
    if (p.state == Peer::kFree || p.self || p.released) return;
    p.released = true;
    p.released_ns = now_ns_;
}

void ShmTransport::post_notice(uint32_t pid, uint32_t nonce, int err) {
    uint64_t n = seg_->notices_posted.load(std::memory_order_relaxed);
    Notice& x = seg_->notices[n % kNotices];
    x.seq.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // readers that see new fields see seq 0
    __atomic_store_n(&x.pid, pid, __ATOMIC_RELAXED);
    __atomic_store_n(&x.nonce, nonce, __ATOMIC_RELAXED);
    __atomic_store_n(&x.err, err, __ATOMIC_RELAXED);
    x.seq.store(n + 1, std::memory_order_release);
    seg_->notices_posted.store(n + 1, std::memory_order_release);
}

// Whether p has posted a notice refusing us since we last looked (its errno in *err).
// The board is the peer's memory: read as untrusted bytes.
bool ShmTransport::refused_by(Peer& p, int* err) {
    uint64_t posted = p.seg->notices_posted.load(std::memory_order_acquire);
    if (posted == p.notices_seen) return false;
    uint64_t k = posted - p.notices_seen > kNotices ? posted - kNotices : p.notices_seen;
    p.notices_seen = posted;
    for (; k < posted; k++) {
        Notice& x = p.seg->notices[k % kNotices];
        if (x.seq.load(std::memory_order_acquire) != k + 1) continue;
        uint32_t pid = __atomic_load_n(&x.pid, __ATOMIC_RELAXED);
        uint32_t nonce = __atomic_load_n(&x.nonce, __ATOMIC_RELAXED);
        int32_t e = __atomic_load_n(&x.err, __ATOMIC_RELAXED);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (x.seq.load(std::memory_order_relaxed) != k + 1) continue;  // rewritten meanwhile
        if (pid == pid_ && nonce == nonce_) {
            *err = e > 0 && e < 4096 ? e : EIO;
            return true;
        }
    }
    return false;
}

// Ends the link to a live peer we cannot serve (tell: and posts a notice so it knows at
// once). Its rx lanes stay mapped until poll_slow: frames of this burst may point there.
void ShmTransport::cut(int id, int err, bool tell, const char* what) {
    Peer& p = peers_[id];
    if (p.state != Peer::kLive || p.self) return;
    if (tell) {
        post_notice(p.pid, p.nonce, err);
        report("cut the link to the NIC of process %u (%s): %s", p.pid, what, why(err));
    } else {
        report("the NIC of process %u refused the link: %s", p.pid, why(err));
    }
    p.state = Peer::kDead;
    live_--;
    if (p.tx) unmap_lane(p.tx);
    if (p.tx_fd >= 0) close(p.tx_fd);
    p.tx = nullptr;
    p.tx_fd = -1;
    p.hello_pending = false;
    pending_.push_back({PeerEvent::kDead, id});
}

void ShmTransport::unmap_lane(ShmLane* l) { munmap(l, sizeof(ShmLane)); }

// Releases everything a peer entry holds (mappings, fds); outside a receive burst.
void ShmTransport::drop_links(Peer& p) {
    if (p.rx) {
        auto it = std::find(rx_active_.begin(), rx_active_.end(), static_cast<int>(&p - peers_.data()));
        if (it != rx_active_.end()) {
            *it = rx_active_.back();
            rx_active_.pop_back();
        }
        if (p.rx != p.tx) unmap_lane(p.rx);
        p.rx = nullptr;
    }
    for (ShmLane* l : p.rx_next) unmap_lane(l);
    p.rx_next.clear();
    if (p.tx) unmap_lane(p.tx);
    if (p.tx_fd >= 0) close(p.tx_fd);
    p.tx = nullptr;
    p.tx_fd = -1;
    for (auto& [l, fd] : p.closing) {
        unmap_lane(l);
        close(fd);
    }
    p.closing.clear();
    if (p.seg && !p.self) munmap(p.seg, sizeof(ShmSegment));
    p.seg = nullptr;
    if (p.pidfd >= 0) close(p.pidfd);  // also leaves the epoll set (its only reference)
    p.pidfd = -1;
    p.hello_pending = false;
}

// No frame will follow in our lane to p. The peer keeps reading what is in it; the
// memfd goes once both sides have unmapped it.
void ShmTransport::close_tx(Peer& p) {
    p.tx->closed.store(1, std::memory_order_release);  // after every frame's seq
    if (p.tx_fd < 0) {
        unmap_lane(p.tx);  // the peer has its own mapping
    } else {
        p.closing.push_back({p.tx, p.tx_fd});  // kept until the peer has mapped it
    }
    p.tx = nullptr;
    p.tx_fd = -1;
}

bool ShmTransport::lane_drained(const Peer& p) const {
    const Slot& s = p.rx->slots[p.head & (kSlots - 1)];
    return s.seq.load(std::memory_order_acquire) != p.head + 1;
}

void ShmTransport::free_peer(int id) {
    Peer& p = peers_[id];
    drop_links(p);
    uint64_t key = (static_cast<uint64_t>(p.pid) << 32) | p.nonce;
    auto it = by_key_.find(key);
    if (it != by_key_.end() && it->second == id) by_key_.erase(it);
    if (p.state == Peer::kLive) live_--;
    uint32_t gen = p.gen + 1;
    p = Peer{};
    p.gen = gen;
    free_ids_.push_back(id);
}

// A look at a live peer's shared memory: its notices to us, its alive flag (and its pid
// when we have no pidfd), whether the lane we read was closed and is empty.
void ShmTransport::check_remote(int id) {
    Peer& p = peers_[id];
    int err = 0;
    if (refused_by(p, &err)) {
        cut(id, err, false, "");
        return;
    }
    bool gone = !p.seg->alive.load(std::memory_order_acquire);
    if (!gone && p.pidfd < 0) gone = kill(static_cast<pid_t>(p.pid), 0) != 0 && errno == ESRCH;
    if (gone) {
        p.state = Peer::kDead;
        live_--;
        pending_.push_back({PeerEvent::kDead, id});
        return;
    }
    if (p.rx && p.rx_next.empty() && p.rx->closed.load(std::memory_order_acquire) && lane_drained(p)) {
        auto it = std::find(rx_active_.begin(), rx_active_.end(), id);
        if (it != rx_active_.end()) {
            *it = rx_active_.back();
            rx_active_.pop_back();
        }
        unmap_lane(p.rx);
        p.rx = nullptr;
    }
}

void ShmTransport::poll_slow(std::vector<TransportEvent>& events) {
    now_ns_ = now_ns();
    process_mailbox();
    // Deaths of peer processes: one epoll_wait for every pidfd.
    epoll_event evs[64];
    int n = epoll_wait(epfd_, evs, 64, 0);
    for (int i = 0; i < n; i++) {
        uint32_t id = static_cast<uint32_t>(evs[i].data.u64), gen = static_cast<uint32_t>(evs[i].data.u64 >> 32);
        if (id >= peers_.size() || peers_[id].gen != gen || peers_[id].state != Peer::kLive) continue;
        peers_[id].state = Peer::kDead;
        live_--;
        pending_.push_back({PeerEvent::kDead, static_cast<int>(id)});
    }
    // Shared memory of a slice of the peers (all of it in turn), and of every peer whose
    // lane is not mapped yet (a refusal is answered at once).
    const size_t np = peers_.size();
    if (remote_rotor_ >= np) remote_rotor_ = 0;
    uint32_t looks = 0;
    size_t i = remote_rotor_;
    for (size_t k = 0; k < np; k++, i = i + 1 == np ? 0 : i + 1) {
        Peer& p = peers_[i];
        if (p.state != Peer::kLive || p.self) continue;
        if (looks < kRemoteLooks || p.tx_fd >= 0) {
            if (looks++ < kRemoteLooks) remote_rotor_ = static_cast<uint32_t>(i + 1);  // next turn starts after
            check_remote(static_cast<int>(i));
        }
    }
    for (const TransportEvent& ev : pending_) {
        drop_links(peers_[ev.peer]);  // the dead: everything goes now (no burst is open)
        events.push_back(ev);
    }
    pending_.clear();
    for (size_t i = 0; i < np; i++) {
        Peer& p = peers_[i];
        if (p.state == Peer::kFree) continue;
        if (p.state == Peer::kDead) {
            if (p.released) {
                free_peer(static_cast<int>(i));
                events.push_back({PeerEvent::kFreed, static_cast<int>(i)});
            }
            continue;
        }
        if (p.hello_pending) post_hello(p);
        // The peer mapped our lane: its fd is no longer needed.
        if (p.tx_fd >= 0 && !p.hello_pending && p.tx->attached.load(std::memory_order_acquire)) {
            close(p.tx_fd);
            p.tx_fd = -1;
        }
        for (size_t c = 0; c < p.closing.size();) {
            auto [l, fd] = p.closing[c];
            if (l->attached.load(std::memory_order_acquire)) {
                unmap_lane(l);
                close(fd);
                p.closing[c] = p.closing.back();
                p.closing.pop_back();
            } else {
                c++;
            }
        }
        // The peer moved to a new lane: read it once the old one is closed and empty.
        if (p.rx && !p.rx_next.empty() && p.taken == 0 && p.rx->closed.load(std::memory_order_acquire) &&
            lane_drained(p)) {
            unmap_lane(p.rx);
            p.rx = p.rx_next.front();
            p.rx_next.erase(p.rx_next.begin());
            p.head = p.rx->cons.load(std::memory_order_relaxed);
        }
        if (!p.released || p.self || now_ns_ - p.released_ns < kLingerNs) continue;
        // Released and lingered: close our lane; free the entry once the peer closed its
        // lane too (its frames read) and has mapped what we sent.
        if (p.tx && !p.hello_pending) close_tx(p);
        if (p.tx == nullptr && p.closing.empty() && p.rx == nullptr && p.rx_next.empty()) {
            free_peer(static_cast<int>(i));
            events.push_back({PeerEvent::kFreed, static_cast<int>(i)});
        }
    }
}

}  // namespace softvia::nicfw
