// nicfw/memtable.h -- the NIC's registered memory table (the device side of
// VipRegisterMem). Every address the firmware touches on behalf of a VI is checked here
// first: handle valid, range inside the region, protection tag equal to the VI's.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <new>
#include <type_traits>
#include <vector>

#include "nicfw/abi.h"

namespace softvia::nicfw {

// Fields are written by the firmware under the engine lock. base, len and key are
// atomics because the driver probes them without that lock (see probe()).
struct Region {
    std::atomic<uint64_t> base{0};
    std::atomic<uint64_t> len{0};
    std::atomic<uint32_t> key{0};  // handle of the live registration, 0 when free
    uint32_t ptag = 0;
    uint16_t gen = 0;
    bool rdma_write = false;
    bool rdma_read = false;
    bool atomics = false;  // NIC atomics may target it (Engine::set_mem_atomics)
};

class MemTable {
public:
    // Slot 0 stays unused so handle 0 is never valid. Fixed size: never reallocated,
    // so a probe without the lock never reads freed memory. The 2 MiB table is a fresh
    // anonymous mapping rather than constructed objects: it reads as zeros, which is
    // every Region's initial state, and only the pages of slots in use are ever
    // touched (constructing it cost a NIC open 512 page faults, and under ASan a leak
    // scan of 2 MiB at every exit).
    MemTable() {
        void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        regions_ = static_cast<Region*>(p);
    }
    ~MemTable() { munmap(regions_, kBytes); }
    MemTable(const MemTable&) = delete;
    MemTable& operator=(const MemTable&) = delete;

    // Returns 0 and the handle, or -ENOSPC when the table is full.
    int add(uint64_t base, uint64_t len, uint32_t ptag, bool rdma_w, bool rdma_r, uint32_t* memh) {
        uint32_t idx;
        if (!free_.empty()) {
            idx = free_.back();
            free_.pop_back();
        } else if (next_ <= NICFW_MAX_REGIONS) {
            idx = next_++;
        } else {
            return -ENOSPC;
        }
        Region& r = regions_[idx];
        r.base.store(base, std::memory_order_relaxed);
        r.len.store(len, std::memory_order_relaxed);
        r.ptag = ptag;
        r.rdma_write = rdma_w;
        r.rdma_read = rdma_r;
        r.atomics = false;
        if (++r.gen == 0) r.gen = 1;  // generation 0 never appears in a handle
        *memh = NICFW_MEMH_MAKE(idx, r.gen);
        // Release pairs with probe()'s acquire: a matching key means base/len are set.
        r.key.store(*memh, std::memory_order_release);
        count_++;
        return 0;
    }

    // The region a handle names, or nullptr (stale, out of range, never issued).
    [[gnu::always_inline]] Region* find(uint32_t memh) {
        uint32_t idx = NICFW_MEMH_INDEX(memh);
        if (idx == 0 || idx >= next_) return nullptr;
        Region& r = regions_[idx];
        if (r.key.load(std::memory_order_relaxed) != memh) return nullptr;
        return &r;
    }

    void remove(uint32_t memh) {
        Region* r = find(memh);
        if (!r) return;
        r->key.store(0, std::memory_order_release);
        free_.push_back(NICFW_MEMH_INDEX(memh));
        count_--;
        epoch_++;
    }

    // Changes a region's protection tag and RDMA permissions.
    void set_attrs(Region* r, uint32_t ptag, bool rdma_w, bool rdma_r) {
        r->ptag = ptag;
        r->rdma_write = rdma_w;
        r->rdma_read = rdma_r;
        epoch_++;
    }

    // Moves whenever a region goes away or changes its permissions. An operation that
    // checked its memory at epoch e and goes on over several steps (a multi-frame
    // message, an RDMA read being served) checks it again before touching it if the
    // epoch is no longer e: once VipDeregisterMem or VipSetMemAttributes returns, no
    // byte of any operation lands in memory they took away.
    uint32_t epoch() const { return epoch_; }

    // 0 if [addr, addr+len) lies inside the region named by memh and the region carries
    // ptag; otherwise the VIA status bit for the violation.
    uint32_t check(uint32_t memh, uint64_t addr, uint64_t len, uint32_t ptag) {
        Region* r = find(memh);
        if (!r) return NICFW_DS_PROTECTION_ERROR;
        if (r->ptag != ptag) return NICFW_DS_PROTECTION_ERROR;
        return in_range(*r, addr, len) ? 0 : NICFW_DS_PROTECTION_ERROR;
    }

    // Driver-side probe, without the engine lock: does memh name a live region that
    // holds [addr, addr+len)? Used to refuse a post whose descriptor the NIC could not
    // even write a status into. Racing with deregistration of that region is the
    // caller's error; the probe itself never faults.
    bool probe(uint32_t memh, uint64_t addr, uint64_t len) const {
        uint32_t idx = NICFW_MEMH_INDEX(memh);
        if (idx == 0 || idx > NICFW_MAX_REGIONS) return false;
        const Region& r = regions_[idx];
        if (r.key.load(std::memory_order_acquire) != memh) return false;
        return in_range(r, addr, len);
    }

    [[gnu::always_inline]] static bool in_range(const Region& r, uint64_t addr, uint64_t len) {
        uint64_t base = r.base.load(std::memory_order_relaxed);
        uint64_t rlen = r.len.load(std::memory_order_relaxed);
        return addr >= base && len <= rlen && addr - base <= rlen - len;
    }

    // Whether a live region shares a byte with [va, va+len).
    bool overlaps(uint64_t va, uint64_t len) const {
        for (uint32_t i = 1; i < next_; i++) {
            const Region& r = regions_[i];
            if (r.key.load(std::memory_order_relaxed) == 0) continue;
            const uint64_t b = r.base.load(std::memory_order_relaxed), l = r.len.load(std::memory_order_relaxed);
            if (b < va + len && va < b + l) return true;
        }
        return false;
    }

    bool ptag_in_use(uint32_t ptag) const {
        for (uint32_t i = 1; i < next_; i++)
            if (regions_[i].key.load(std::memory_order_relaxed) != 0 && regions_[i].ptag == ptag)
                return true;
        return false;
    }
    uint32_t count() const { return count_; }

private:
    static_assert(std::is_trivially_destructible_v<Region>, "the table is unmapped, not destroyed");
    static constexpr size_t kBytes = sizeof(Region) * (NICFW_MAX_REGIONS + 1);
    Region* regions_;
    uint32_t next_ = 1;
    std::vector<uint32_t> free_;
    uint32_t count_ = 0;
    uint32_t epoch_ = 0;
};

}  // namespace softvia::nicfw
