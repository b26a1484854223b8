// vipl/src/internal.h -- the driver's objects behind the VIPL handles.
//
// A handle is an opaque token (handles.h): the calls look it up in the process-wide
// table and get one of the objects below, or nothing (VIP_INVALID_PARAMETER). The
// handle types of vipl.h (struct vip_vi * and so on) name structs that are never
// defined, so no code here can dereference a handle by mistake.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "device.h"
#include "handles.h"
#include "nicfw/engine.h"
#include "vipl.h"

#define VIPL_API extern "C" __attribute__((visibility("default")))

namespace softvia::vipl {

using nicfw::SpinLock;

// The driver's copy of a work queue: descriptors in the order they were posted, so
// Done can return them in order once the NIC marks them done. Grows on demand up to
// the NIC's MaxDescriptorsPerQueue.
struct DriverQueue {
    std::vector<VIP_DESCRIPTOR*> ring = std::vector<VIP_DESCRIPTOR*>(64);
    uint32_t mask = 63;
    uint32_t head = 0, tail = 0;  // under lock
    SpinLock lock;
    // The descriptor at head, or null when the queue is empty: written under lock, read
    // without it by a poll that only wants to know that nothing is done yet (take_done).
    std::atomic<VIP_DESCRIPTOR*> front{nullptr};
    // The device VI and which of its queues this is: completions the device could not
    // write are handed back from there (nicfw::Vi::lost_n, take_lost); lost_seen counts
    // those this queue has handed back (under lock).
    nicfw::Vi* dev = nullptr;
    uint32_t kind = 0;  // nicfw_queue_kind
    std::atomic<uint32_t> lost_seen{0};  // written under lock; read by the lock-free peek
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

struct PtagObj;
struct ViObj;
struct CqObj;
struct ConnObj;
struct ListenObj;

struct NicObj {
    uint64_t handle = 0;  // its token
    std::unique_ptr<nicfw::Engine> eng;
    std::string device;
    std::vector<uint8_t> addr;
    std::mutex objs_lock;  // control path: the sets below (taken after Handles::lock())
    std::unordered_set<PtagObj*> ptags;
    std::unordered_set<ViObj*> vis;
    std::unordered_set<CqObj*> cqs;
    std::unordered_set<ConnObj*> conns;
    std::unordered_set<ListenObj*> listens;
    // VipCloseNic sets closing (under Handles::lock()) when it begins; blocking calls
    // that hold the NIC (NicHold) see it and leave, and the close waits for holds to end.
    std::atomic<bool> closing{false};
    std::atomic<uint32_t> holds{0};
    // name service
    std::mutex ns_lock;
    bool ns_up = false;
    std::vector<std::pair<std::string, std::vector<uint8_t>>> hosts;
    // The program's error handler (VipErrorCallback); the engine calls deliver_error,
    // which marks the thread as inside a callback of this NIC (VipCloseNic refuses there).
    std::mutex err_lock;
    VIP_PVOID err_ctx = nullptr;
    VIP_ERROR_HANDLER_FN err_fn = nullptr;
};

// Whether this thread is inside an error callback of nic (VipCloseNic from there would
// free the NIC under the call that delivers it, or join the firmware thread from itself).
bool in_error_callback(const NicObj* nic);

struct PtagObj {
    uint64_t handle = 0;
    NicObj* nic = nullptr;
    uint32_t id = 0;
};

struct CqObj {
    uint64_t handle = 0;
    NicObj* nic = nullptr;
    nicfw::Cq* dev = nullptr;
    SpinLock lock;  // consumers of the CQ
};

struct ViObj {
    uint64_t handle = 0;
    NicObj* nic = nullptr;
    nicfw::Vi* dev = nullptr;
    VIP_VI_ATTRIBUTES attrs{};
    CqObj* scq = nullptr;
    CqObj* rcq = nullptr;
    CqObj* reply_cq = nullptr;
    bool steering = false;
    // The VI's last connect was a peer request: a result is coming even when the state
    // has left CONNECT_PENDING before the firmware stored it (peer_done).
    std::atomic<bool> peer_requested{false};
    DriverQueue sq, rq;
    DriverQueue rq_reply;  // steering: replies land here
};

struct ConnObj {
    uint64_t handle = 0;
    NicObj* nic = nullptr;
    nicfw::ConnRequest req;
};

// A standing listener (VipExtListen): the firmware's listener, re-made after each take.
struct ListenObj {
    uint64_t handle = 0;
    NicObj* nic = nullptr;
    nicfw::Listener* l = nullptr;
    std::vector<uint8_t> disc;
    SpinLock lock;  // callers of VipExtListenDone
};

// Handle -> object, or null if the handle is not a live one of that kind.
inline NicObj* nic_of(VIP_NIC_HANDLE h) { return Handles::find<NicObj>(token_of(h), Kind::kNic); }
inline PtagObj* ptag_of(VIP_PROTECTION_HANDLE h) { return Handles::find<PtagObj>(token_of(h), Kind::kPtag); }
inline ViObj* vi_of(VIP_VI_HANDLE h) { return Handles::find<ViObj>(token_of(h), Kind::kVi); }
inline CqObj* cq_of(VIP_CQ_HANDLE h) { return Handles::find<CqObj>(token_of(h), Kind::kCq); }
inline ConnObj* conn_of(VIP_CONN_HANDLE h) { return Handles::find<ConnObj>(token_of(h), Kind::kConn); }
inline ListenObj* listen_of(VIP_EXT_LISTEN_HANDLE h) { return Handles::find<ListenObj>(token_of(h), Kind::kListen); }

inline NicObj* owner(NicObj* n) { return n; }
template <class T>
inline NicObj* owner(T* o) {
    return o->nic;
}

// Making an object visible takes two steps, since the device keeps the handle's value
// (CQ entries, error descriptors) and so needs it before the object is complete:
// reserve() gives obj a handle that finds nothing yet (false if the table is full;
// on a later failure, Handles::remove(obj->handle)); publish() makes the handle find
// obj and lists obj on its NIC. Lock order: Handles::lock(), then the NIC's objs_lock.
template <class T>
bool reserve(T* obj, Kind k) {
    std::lock_guard<std::mutex> g(Handles::lock());
    obj->handle = Handles::add_locked(k, nullptr);
    return obj->handle != 0;
}
template <class T>
void publish(T* obj, std::unordered_set<T*>& set) {
    std::lock_guard<std::mutex> g(Handles::lock());
    std::lock_guard<std::mutex> o(obj->nic->objs_lock);
    Handles::attach_locked(obj->handle, obj);
    set.insert(obj);
}

// Ends obj's handle and takes it off its NIC's list; the caller then frees it.
template <class T>
void unpublish(T* obj, std::unordered_set<T*>& set) {
    std::lock_guard<std::mutex> g(Handles::lock());
    std::lock_guard<std::mutex> o(obj->nic->objs_lock);
    Handles::remove_locked(obj->handle);
    set.erase(obj);
}

// A blocking call's hold on the NIC of the handle it was given: VipCloseNic waits until
// every hold has ended before it frees anything, and the waits leave once the NIC is
// closing. Taking a hold costs the table lock and an atomic add, so only the calls that
// can block take one (the Wait calls, the connection calls that wait), never post or Done.
class NicHold {
public:
    NicHold() = default;
    NicHold(const NicHold&) = delete;
    NicHold& operator=(const NicHold&) = delete;
    ~NicHold() {
        if (!nic_) return;
        if (pushed_) tl_count_--;  // holds end in the reverse order they were taken
        nic_->holds.fetch_sub(1, std::memory_order_release);  // the close may free it now
    }
    // Whether this thread holds nic (VipCloseNic from an error callback that runs inside
    // a wait on the same NIC would otherwise wait for itself).
    static bool held_here(const NicObj* nic) {
        for (uint32_t i = 0; i < tl_count_; i++)
            if (tl_held_[i] == nic) return true;
        return false;
    }
    // The object of handle h (kind k) with its NIC held, or null if h is not live.
    template <class T>
    T* take(const void* h, Kind k) {
        std::lock_guard<std::mutex> g(Handles::lock());
        T* o = Handles::find<T>(token_of(h), k);
        if (!o) return nullptr;
        // Not closing: the close ends every handle of the NIC under this lock.
        nic_ = owner(o);
        nic_->holds.fetch_add(1, std::memory_order_relaxed);
        if ((pushed_ = tl_count_ < kTlMax)) tl_held_[tl_count_++] = nic_;
        return o;
    }

private:
    static constexpr uint32_t kTlMax = 8;  // nesting: a wait in an error callback in a wait...
    static inline thread_local const NicObj* tl_held_[kTlMax] = {};
    static inline thread_local uint32_t tl_count_ = 0;
    NicObj* nic_ = nullptr;
    bool pushed_ = false;
};

enum class Waited { kHeld, kTimeout, kClosing };

// The wait loop of every Wait call: until cond() holds, timeout_ms passes, or the NIC
// starts closing (the caller holds it with a NicHold). Inline mode steps the firmware
// each turn. Thread mode spins briefly, then sleeps in Engine::block() so that only the
// firmware thread polls; VipCloseNic wakes it. cond may consume what it finds, so it is
// never asked again after it held.
template <class Cond>
Waited wait_until(NicObj* nic, VIP_ULONG timeout_ms, Cond cond) {
    if (cond()) return Waited::kHeld;
    nicfw::Engine* eng = nic->eng.get();
    const bool threaded = eng->progress_mode() == nicfw::Progress::kThread;
    const uint64_t deadline = timeout_ms == VIP_INFINITE ? 0 : nicfw::now_ns() + timeout_ms * 1000000ull;
    bool closing = false;
    auto check = [&] {
        if (nic->closing.load(std::memory_order_relaxed)) return closing = true;
        return cond();
    };
    for (uint32_t turn = 1;; turn++) {
        eng->progress();
        if (check() || (threaded && turn > 2000 && eng->block(check)))
            return closing ? Waited::kClosing : Waited::kHeld;
        if ((threaded || (turn & 255) == 0) && deadline && nicfw::now_ns() >= deadline)
            return check() ? (closing ? Waited::kClosing : Waited::kHeld) : Waited::kTimeout;
    }
}

VIP_RETURN from_errno(int rc);
bool parse_hex(const std::string& s, std::vector<uint8_t>* out);

}  // namespace softvia::vipl
