// grants.h -- the same-host shortcut of NIC atomics: a target NIC lets the NIC of an
// initiator on its host apply atomics to a region itself, with its own locked
// instructions on a mapping of the same pages, and takes that back at once when the
// region or the connection changes.
//
// Only memory the target's NIC allocated (VipExtAllocMem: a memfd) can be shared this
// way, as UCX's shared-memory transports reach only memory UCX allocated. After the
// target has applied an initiator's atomic on such a region through the wire (every check
// of the wire path passed), it sends a grant: the region, its memfd and a word of its
// grant page, a memfd of 64-bit words, one per grant. The initiator maps both through
// /proc/<pid>/fd (the peer's pid as its shm link knows it, never as a frame says) and
// from then on applies atomics to the region without the wire while the grant is open.
// Each grant has two words on the page, one per side (Dekker's mutual exclusion, so the
// initiator's way out is a plain store):
//
//   state = generation << 32 | open bit      written by the target
//   busy  = 1 while the initiator is inside   written by the initiator
//
// An initiator enters by setting busy (a locked exchange: the store is visible before it
// reads state), reads state, and applies the operation only if state still holds its
// grant's generation with the open bit; it leaves by clearing busy. The target revokes a
// grant (deregistration, lost permission, the connection ends, the NIC closes) by
// clearing the open bit (a locked instruction too) and waiting until busy reads 0 (a few
// instructions; bounded, see GrantPage::revoke): once it returns no initiator touches the
// region through that grant, as once VipDeregisterMem returns no RDMA lands. A grant is
// held by one VI, whose NIC applies its atomics one at a time (the engine's lock), so busy
// is a flag, not a count.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "nicfw/abi.h"

namespace softvia::nicfw::atomics {

constexpr uint64_t kOpen = uint64_t{1} << 31;

// Target side: the grants one VI gave its peer.
class GrantPage {
public:
    static constexpr uint32_t kSlots = 256;  // one page of word pairs (state, busy)

    GrantPage() = default;
    GrantPage(const GrantPage&) = delete;
    GrantPage& operator=(const GrantPage&) = delete;
    ~GrantPage();  // revokes every grant

    // A grant of region memh ([base, base+len), at off in memfd mem_fd): fills g. False if
    // there is no room (or no page could be made).
    bool grant(uint32_t memh, uint64_t base, uint64_t len, int mem_fd, uint64_t off, nicfw_atomic_grant* g);
    bool granted(uint32_t memh) const;
    // Ends the grants of region memh (0: all). Returns once no initiator uses them.
    void revoke(uint32_t memh);

private:
    struct Slot {
        uint32_t memh = 0;  // 0: free
        uint32_t gen = 0;
        bool stuck = false;  // its users never left (a process killed inside): never reused
    };
    bool make_page();
    void close_slot(uint32_t i);
    std::atomic<uint64_t>* words_ = nullptr;
    int fd_ = -1;
    uint32_t used_ = 0;  // slots at and above this were never given (scans stop here)
    Slot slots_[kSlots];
};

// Initiator side: the grants one VI holds from its peer.
class GrantCache {
public:
    GrantCache() = default;
    GrantCache(const GrantCache&) = delete;
    GrantCache& operator=(const GrantCache&) = delete;
    ~GrantCache();  // unmaps everything

    // Maps what grant g (from the NIC of process pid) names. 0, or a negative errno: the
    // grant is then ignored and atomics keep going through the wire.
    int add(uint32_t pid, const nicfw_atomic_grant& g);
    bool empty() const { return grants_.empty(); }
    // Applies op (NICFW_OFFLOAD_OP_FETCH_ADD / _CMP_SWAP) to the target's word at raddr of
    // region memh under a grant that still holds. False if no grant covers it (a revoked
    // one is dropped): the request goes through the wire.
    bool apply(uint32_t memh, uint64_t raddr, uint32_t op, uint64_t a0, uint64_t a1, uint64_t* old);

private:
    struct Grant {
        uint32_t memh;
        uint64_t base, len;
        uint8_t* map;      // the region's pages here; base lies at map + lead
        uint64_t map_len;
        uint64_t lead;
        uint32_t slot, gen;
    };
    void drop(size_t i);
    std::vector<Grant> grants_;
    std::atomic<uint64_t>* words_ = nullptr;  // the target's grant page, mapped here (2 words a slot)
    uint32_t page_pid_ = 0, page_fd_ = 0;
    uint64_t mapped_ = 0;  // bytes mapped for grants_
};

}  // namespace softvia::nicfw::atomics
