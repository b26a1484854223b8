// vipl/src/handles.h -- VIPL handles are opaque tokens, never pointers.
//
// A handle is an index into one process-wide table of live driver objects, plus the
// object's kind and the slot's generation:
//
//   bit 63: always 1 (no user-space pointer has it, so no pointer is ever a handle)
//   bits 32..62: generation of the slot (1 .. 2^31-1)
//   bits 24..31: kind (Kind below)       bits 20..23: 0       bits 0..19: slot index
//
// Checking a handle reads only the table, never the memory the value points to: a
// made-up value, a pointer to anything, or a handle of another kind fails the
// comparison with the slot's token. Destroying an object ends its token; the slot's
// next object gets the next generation, so an old handle never becomes valid again (a
// slot whose generation would wrap is retired instead). The check on the data path is
// three plain loads (chunk, token, object) and a compare.
//
// The table grows in chunks that are never freed, so a lookup can run while another
// thread adds or removes objects; adding and removing take the table lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>

namespace softvia::vipl {

static_assert(sizeof(void*) == 8, "a handle carries a 64-bit token in a pointer-sized type");

enum class Kind : uint8_t { kNic = 1, kPtag = 2, kVi = 3, kCq = 4, kConn = 5, kListen = 6 };

class Handles {
public:
    static constexpr uint32_t kIndexBits = 20;
    static constexpr uint32_t kChunkBits = 12;
    static constexpr uint32_t kChunkSlots = 1u << kChunkBits;
    static constexpr uint32_t kChunks = 1u << (kIndexBits - kChunkBits);
    static constexpr uint64_t kTop = 1ull << 63;
    static constexpr uint64_t kIndexMask = (1ull << kIndexBits) - 1;
    static constexpr uint64_t kFixedMask = kTop | 0xFFF00000ull;  // bit 63, kind, zero bits
    static constexpr uint32_t kMaxGen = 0x7FFFFFFFu;

    // The table lock: held to add or remove, and by whoever needs no handle to change
    // while it looks (VipCloseNic, the blocking calls' NIC hold).
    static std::mutex& lock() { return lock_; }

    // The object of handle h if h is a live handle of kind k, else null. Lock-free.
    template <class T>
    static T* find(uint64_t h, Kind k) {
        if ((h & kFixedMask) != (kTop | (uint64_t(k) << 24))) return nullptr;
        const uint32_t idx = static_cast<uint32_t>(h & kIndexMask);
        Slot* chunk = chunks_[idx >> kChunkBits].load(std::memory_order_acquire);
        if (!chunk) return nullptr;
        Slot& s = chunk[idx & (kChunkSlots - 1)];
        // Acquire pairs with add_locked()/attach_locked(): the object is complete.
        if (s.token.load(std::memory_order_acquire) != h) return nullptr;
        return static_cast<T*>(s.obj.load(std::memory_order_acquire));
    }

    // A new handle of kind k for obj (under lock()); 0 when the table is full.
    static uint64_t add_locked(Kind k, void* obj) {
        uint32_t idx;
        if (free_head_) {
            idx = free_head_ - 1;
            free_head_ = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(slot(idx).obj.load(std::memory_order_relaxed)));
        } else if (next_ < (1u << kIndexBits)) {
            idx = next_++;
            std::atomic<Slot*>& c = chunks_[idx >> kChunkBits];
            if (!c.load(std::memory_order_relaxed)) {
                Slot* fresh = new (std::nothrow) Slot[kChunkSlots];
                if (!fresh) {
                    next_--;
                    return 0;
                }
                c.store(fresh, std::memory_order_release);
            }
        } else {
            return 0;
        }
        Slot& s = slot(idx);
        // A free slot keeps its last token with the kind cleared (matches no handle).
        const uint32_t gen = static_cast<uint32_t>((s.token.load(std::memory_order_relaxed) >> 32) & kMaxGen) + 1;
        const uint64_t h = kTop | (uint64_t(gen) << 32) | (uint64_t(k) << 24) | idx;
        s.obj.store(obj, std::memory_order_relaxed);
        s.token.store(h, std::memory_order_release);
        return h;
    }

    // Points live handle h at obj (under lock()): a handle made with a null object (which
    // find() refuses) becomes usable once its object is complete.
    static void attach_locked(uint64_t h, void* obj) {
        Slot& s = slot(static_cast<uint32_t>(h & kIndexMask));
        if (s.token.load(std::memory_order_relaxed) == h) s.obj.store(obj, std::memory_order_release);
    }

    // Ends handle h (under lock()); a handle that is not live is ignored.
    static void remove_locked(uint64_t h) {
        if (!(h & kTop)) return;
        const uint32_t idx = static_cast<uint32_t>(h & kIndexMask);
        if (idx >= next_) return;
        Slot& s = slot(idx);
        if (s.token.load(std::memory_order_relaxed) != h) return;
        s.token.store(h & ~0xFF000000ull, std::memory_order_release);
        // A free slot's object field links the free list (index + 1; 0 ends it). A slot
        // whose generation is used up is retired for good.
        if (((h >> 32) & kMaxGen) < kMaxGen) {
            s.obj.store(reinterpret_cast<void*>(static_cast<uintptr_t>(free_head_)), std::memory_order_relaxed);
            free_head_ = idx + 1;
        } else {
            s.obj.store(nullptr, std::memory_order_relaxed);
        }
    }

    static uint64_t add(Kind k, void* obj) {
        std::lock_guard<std::mutex> g(lock_);
        return add_locked(k, obj);
    }
    static void remove(uint64_t h) {
        std::lock_guard<std::mutex> g(lock_);
        remove_locked(h);
    }

private:
    struct Slot {
        std::atomic<uint64_t> token{0};
        std::atomic<void*> obj{nullptr};
    };
    static Slot& slot(uint32_t idx) {
        return chunks_[idx >> kChunkBits].load(std::memory_order_relaxed)[idx & (kChunkSlots - 1)];
    }

    static inline std::atomic<Slot*> chunks_[kChunks] = {};
    static inline std::mutex lock_;
    // Everything below is constant-initialized and has no destructor, so handles work
    // from other libraries' static constructors and destructors too.
    static inline uint32_t free_head_ = 0;  // LIFO free list (index + 1): few chunks stay in use
    static inline uint32_t next_ = 0;       // slots ever used
};

// Handle <-> token: a handle type is a pointer to an incomplete struct (vipl.h); its
// value is the token, never dereferenced.
inline uint64_t token_of(const void* h) { return reinterpret_cast<uintptr_t>(h); }
template <class H>
inline H handle_of(uint64_t t) {
    return reinterpret_cast<H>(static_cast<uintptr_t>(t));
}

}  // namespace softvia::vipl
