// shm_layout.h -- what shm NICs share: the segment (hello mailbox, notice board), the
// lane (a ring of frame slots), and the memfd helpers that make and open them. Private
// to nicfw/transport/shm. Ordering rules: docs/memory-ordering.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "nicfw/clock.h"
#include "shm_transport.h"

namespace softvia::nicfw {

namespace shm {
inline constexpr uint64_t kSegMagic = 0x5356534d53454732ull;   // "SVSMSEG2"
inline constexpr uint64_t kLaneMagic = 0x5356534d4c414e31ull;  // "SVSMLAN1"
inline constexpr uint32_t kVersion = 2;
inline constexpr uint32_t kSlots = 64;        // frames in flight per lane, power of two
inline constexpr uint32_t kSlotBytes = 8256;  // 16-byte slot header + frame (8 KiB payload + header)
inline constexpr uint32_t kSlotHdr = 16;
inline constexpr uint32_t kMailbox = 64;
inline constexpr uint32_t kNotices = 64;
inline constexpr uint32_t kRemoteLooks = 64;  // peers whose shared memory one slow-path turn reads

enum : uint32_t { kMboxFree = 0, kMboxBusy = 1, kMboxReady = 2 };

// A hello: "frames for you come in my lane, memfd lane_fd of my process".
struct alignas(64) MboxSlot {
    std::atomic<uint32_t> state;
    uint32_t lane_fd, serial;
    uint8_t from[ShmTransport::kAddrLen];
};

// A notice: "I refused (or cut) the link from NIC (pid, nonce), errno err".
struct Notice {
    std::atomic<uint64_t> seq;  // index + 1 once written; 0 while being rewritten
    uint32_t pid, nonce;
    int32_t err;
    uint32_t pad;
};

struct alignas(64) Slot {
    std::atomic<uint64_t> seq;  // index + 1 once the frame is published
    uint32_t len;
    uint32_t pad;
    uint8_t frame[kSlotBytes - kSlotHdr];
};
static_assert(sizeof(Slot) == kSlotBytes);

uint64_t host_id();
inline void put32(uint8_t* p, uint32_t v) { memcpy(p, &v, 4); }
inline uint32_t get32(const uint8_t* p) { uint32_t v; memcpy(&v, p, 4); return v; }
inline uint64_t get64(const uint8_t* p) { uint64_t v; memcpy(&v, p, 8); return v; }

// Maps another process's memfd (/proc/<pid>/fd/<fd>), which must be exactly len bytes and
// sealed against shrinking: our reads of it can then never fault. -EACCES (not ours to
// open), -EMFILE/-ENFILE (out of fds), -ENOMEM, -ENOTRECOVERABLE (not sealed, wrong size:
// not a memfd we can trust), -EHOSTUNREACH (gone).
int map_remote(uint32_t pid, uint32_t fd, size_t len, void** map);
// Faults in every page of a lane's mapping now (MADV_POPULATE_WRITE), as a NIC allocates
// its rings before use: else the first pass of frames through a lane's 64 slots pays a
// page fault per page on each side (Split-C int stores in a 10,000-store stream of
// gathered 4 KiB messages: 0.022 us each with lazy faults, 0.014 prefaulted).
void prefault(void* map, size_t len);
// What a (positive) errno of the above means here, for a one-line message.
const char* why(int err);
}  // namespace shm

// A lane carries frames from its owner (the sender, which made the memfd) to one peer.
struct alignas(64) ShmLane {
    uint64_t magic;
    uint32_t version, nslots, slot_bytes, serial;
    uint32_t src_pid, src_nonce, dst_pid, dst_nonce;  // checked by the receiver at attach
    std::atomic<uint32_t> closed;  // producer: no frame follows those already published
    alignas(64) std::atomic<uint64_t> cons;  // frames consumed; written by the receiver only
    std::atomic<uint32_t> attached;          // receiver: mapped (the producer closes its fd)
    alignas(64) shm::Slot slots[shm::kSlots];
};

// A NIC's segment: who it is, and where peers post hellos and read its notices.
struct alignas(64) ShmSegment {
    uint64_t magic;
    uint32_t version, pid, nonce;
    std::atomic<uint32_t> alive;  // cleared at close; peers also watch the process
    alignas(64) std::atomic<uint64_t> mbox_posted;  // bumped after a hello is READY
    shm::MboxSlot mbox[shm::kMailbox];
    alignas(64) std::atomic<uint64_t> notices_posted;  // written by the owner only
    shm::Notice notices[shm::kNotices];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be address-free");

}  // namespace softvia::nicfw
