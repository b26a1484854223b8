// vipl/src/internal.h -- the driver's objects behind the VIPL handles.
//
// Every handle points to one of these structs; each starts with a magic word, so a
// handle of the wrong kind (or NULL) is refused with VIP_INVALID_PARAMETER instead of
// being used. A destroyed handle has its magic cleared before it is freed.
#pragma once

#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "nicfw/engine.h"
#include "vipl.h"

#define VIPL_API extern "C" __attribute__((visibility("default")))

namespace softvia::vipl {

using nicfw::SpinLock;

enum : uint32_t {
    kNicMagic = 0x4e494331,   // "NIC1"
    kPtagMagic = 0x50544731,  // "PTG1"
    kViMagic = 0x56494931,    // "VII1"
    kCqMagic = 0x43515131,    // "CQQ1"
    kConnMagic = 0x434f4e31,  // "CON1"
    kListenMagic = 0x4c534e31,  // "LSN1"
    kDead = 0xdeadbeef,
};

// The driver's copy of a work queue: descriptors in the order they were posted, so
// Done can return them in order once the NIC marks them done. Grows on demand up to
// the NIC's MaxDescriptorsPerQueue.
struct DriverQueue {
    std::vector<VIP_DESCRIPTOR*> ring = std::vector<VIP_DESCRIPTOR*>(64);
    uint32_t mask = 63;
    uint32_t head = 0, tail = 0;  // under lock
    SpinLock lock;
    bool empty() const { return head == tail; }
    // Room for one more (under lock); false at the NIC's limit.
    bool reserve() {
        if (tail - head <= mask) return true;
        if (ring.size() >= NICFW_MAX_DESC_PER_QUEUE) return false;
        std::vector<VIP_DESCRIPTOR*> bigger(ring.size() * 2);
        for (uint32_t i = head; i != tail; i++) bigger[i & (bigger.size() - 1)] = ring[i & mask];
        ring.swap(bigger);
        mask = static_cast<uint32_t>(ring.size() - 1);
        return true;
    }
};

struct vip_nic_impl;

}  // namespace softvia::vipl

struct vip_nic {
    uint32_t magic = softvia::vipl::kNicMagic;
    std::unique_ptr<softvia::nicfw::Engine> eng;
    std::string device;
    std::vector<uint8_t> addr;
    std::mutex objs_lock;  // control path: the sets below
    std::unordered_set<struct vip_ptag*> ptags;
    std::unordered_set<struct vip_vi*> vis;
    std::unordered_set<struct vip_cq*> cqs;
    std::unordered_set<struct vip_conn*> conns;
    std::unordered_set<struct vip_listen*> listens;
    // name service
    std::mutex ns_lock;
    bool ns_up = false;
    std::vector<std::pair<std::string, std::vector<uint8_t>>> hosts;
};

struct vip_ptag {
    uint32_t magic = softvia::vipl::kPtagMagic;
    vip_nic* nic = nullptr;
    uint32_t id = 0;
};

struct vip_cq {
    uint32_t magic = softvia::vipl::kCqMagic;
    vip_nic* nic = nullptr;
    softvia::nicfw::Cq* dev = nullptr;
    softvia::nicfw::SpinLock lock;  // consumers of the CQ
};

struct vip_vi {
    uint32_t magic = softvia::vipl::kViMagic;
    vip_nic* nic = nullptr;
    softvia::nicfw::Vi* dev = nullptr;
    VIP_VI_ATTRIBUTES attrs{};
    vip_cq* scq = nullptr;
    vip_cq* rcq = nullptr;
    vip_cq* reply_cq = nullptr;
    bool steering = false;
    softvia::vipl::DriverQueue sq, rq;
    softvia::vipl::DriverQueue rq_reply;  // steering: replies land here
};

struct vip_conn {
    uint32_t magic = softvia::vipl::kConnMagic;
    vip_nic* nic = nullptr;
    softvia::nicfw::ConnRequest req;
};

// A standing listener (VipExtListen): the firmware's listener, re-made after each take.
struct vip_listen {
    uint32_t magic = softvia::vipl::kListenMagic;
    vip_nic* nic = nullptr;
    softvia::nicfw::Listener* l = nullptr;
    std::vector<uint8_t> disc;
    softvia::nicfw::SpinLock lock;  // callers of VipExtListenDone
};

namespace softvia::vipl {

inline bool ok(const vip_nic* n) { return n && n->magic == kNicMagic; }
inline bool ok(const vip_vi* v) { return v && v->magic == kViMagic; }
inline bool ok(const vip_cq* c) { return c && c->magic == kCqMagic; }
inline bool ok(const vip_conn* c) { return c && c->magic == kConnMagic; }
inline bool ok(const vip_listen* l) { return l && l->magic == kListenMagic; }
inline bool ok(const vip_ptag* p) { return p && p->magic == kPtagMagic; }

// The wait loop of every Wait call: until cond() holds or timeout_ms passes. Inline
// mode steps the firmware each turn. Thread mode spins briefly, then sleeps in
// Engine::block() so that only the firmware thread polls. cond may consume what it
// finds, so it is never asked again after it held. Returns whether it held.
template <class Cond>
bool wait_until(vip_nic* nic, VIP_ULONG timeout_ms, Cond cond) {
    if (cond()) return true;
    nicfw::Engine* eng = nic->eng.get();
    const bool threaded = eng->progress_mode() == nicfw::Progress::kThread;
    const uint64_t deadline = timeout_ms == VIP_INFINITE ? 0 : nicfw::now_ns() + timeout_ms * 1000000ull;
    for (uint32_t turn = 1;; turn++) {
        eng->progress();
        if (cond()) return true;
        if (threaded && turn > 2000 && eng->block(cond)) return true;
        if ((threaded || (turn & 255) == 0) && deadline && nicfw::now_ns() >= deadline) return cond();
    }
}

VIP_RETURN from_errno(int rc);
bool parse_hex(const std::string& s, std::vector<uint8_t>* out);

}  // namespace softvia::vipl
