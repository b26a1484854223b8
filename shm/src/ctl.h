// ctl.h -- the control block: the part of a process's heap memfd (after the heap) that
// its same-host peers write as well as read. Every process of a host computes the same
// layout from the number of processes on the host (CtlLayout), so each finds the fields
// of every other's block in its view of it.
//
// Ownership of each field (who writes it) is stated beside it; everything another
// process writes is a std::atomic, read and written with the orders named at each use.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace svshm {

constexpr uint64_t kCtlMagic = 0x31636d6873767373ull;  // "ssvshmc1"
constexpr uint32_t kCtlVersion = 1;
constexpr size_t kLine = 64;

// One cache line per word that another process writes, so that writers of different
// words never take lines from each other.
struct alignas(kLine) Line {
    std::atomic<uint64_t> v{0};
};
static_assert(sizeof(Line) == kLine);

// ---- the header: written by the owner at start-up, read-only for peers after ----------
struct CtlHeader {
    uint64_t magic;
    uint32_t version;
    uint32_t rank;
    int64_t pid;
    uint32_t local_count;
    uint32_t job_tag;
    uint64_t ctl_size;
    uint64_t heap_base, heap_size;
    uint64_t data_lo, data_hi;  // 0, 0 without a moved data segment
};
static_assert(sizeof(CtlHeader) <= 4096);

// ---- exports: written by the owner under a sequence lock, read by peers -----------------
constexpr uint32_t kExpMapped = 1u << 0;  // inside the heap or data segment: shared pages
constexpr uint32_t kExpRdonly = 1u << 1;  // SV_SHM_RDONLY
struct ExportSlot {
    std::atomic<uint64_t> lo, hi;
    std::atomic<uint32_t> index;  // 0: a free slot
    std::atomic<uint32_t> flags;
    std::atomic<uint32_t> tag;
    std::atomic<uint32_t> pad;
};
static_assert(sizeof(ExportSlot) == 32);
constexpr uint32_t kMaxExports = 1024 + 2;  // SV_SHM_MAX_EXPORTS, and the heap and data segment

struct ExportTable {
    Line seq;                   // odd while the owner changes the slots (a sequence lock)
    std::atomic<uint32_t> used; // slots [0, used) may be taken; the rest are free
    uint32_t pad[15];
    ExportSlot slot[kMaxExports];
};

// ---- calls: a ring of requests, many producers (peers), one consumer (the owner) --------
// A bounded queue after D. Vyukov's: cell i's seq is i when free for the producer that
// takes ticket i, i+1 once that producer has filled it, i+capacity once the owner has
// consumed it.
constexpr uint8_t kCallNoReply = 1;
struct alignas(kLine) CallCell {
    std::atomic<uint64_t> seq;
    uint16_t src;      // the caller's rank
    uint8_t handler;
    uint8_t flags;     // kCallNoReply
    uint32_t id;       // the caller's number for the call, echoed in the reply
    uint64_t args[6];  // SV_SHM_CALL_ARGS
};
static_assert(sizeof(CallCell) == kLine);

// A caller's reply slots, one per process of the host (in the caller's block; process i
// writes slot i, and only it): value and status, then ready = the call's id (release).
// A reply to a call the caller gave up on (its owner seemed gone) carries an old id and
// is never taken for a later call's; one writer per slot keeps the three words whole.
struct alignas(kLine) ReplySlot {
    std::atomic<uint32_t> ready;
    std::atomic<int32_t> status;
    std::atomic<int64_t> value;
};
static_assert(sizeof(ReplySlot) == kLine);

constexpr int kMaxRounds = 17;  // a dissemination barrier of up to 65535 processes

// Offsets of the parts of a block with local_count processes on the host.
struct CtlLayout {
    uint32_t local_count = 0;
    uint32_t ring_cap = 0;     // a power of two, at least twice the local processes
    size_t exports = 0;        // ExportTable
    size_t reply = 0;          // ReplySlot[local_count]
    size_t ring_tail = 0;      // Line: the producers' ticket counter
    size_t ring = 0;           // CallCell[ring_cap]
    size_t dissem = 0;         // Line[kMaxRounds]: round k's flag, written by one partner
    size_t arrive = 0;         // Line[local_count]: the hierarchical barrier's arrivals (the first process's block)
    size_t release = 0;        // Line: its release (the first process's block)
    size_t size = 0;           // the whole block, a multiple of the page size

    static CtlLayout for_count(uint32_t local_count) {
        CtlLayout l;
        l.local_count = local_count;
        l.ring_cap = 8;
        while (l.ring_cap < 2 * local_count) l.ring_cap *= 2;
        size_t at = 4096;  // CtlHeader
        auto take = [&at](size_t bytes) {
            const size_t here = at;
            at += (bytes + kLine - 1) & ~(kLine - 1);
            return here;
        };
        l.exports = take(sizeof(ExportTable));
        l.reply = take(sizeof(ReplySlot) * local_count);
        l.ring_tail = take(sizeof(Line));
        l.ring = take(sizeof(CallCell) * l.ring_cap);
        l.dissem = take(sizeof(Line) * kMaxRounds);
        l.arrive = take(sizeof(Line) * local_count);
        l.release = take(sizeof(Line));
        l.size = (at + 4095) & ~size_t{4095};
        return l;
    }
};

// A typed view of one process's block (the owner's own mapping, or a peer's view).
struct Ctl {
    char* base = nullptr;
    const CtlLayout* l = nullptr;

    CtlHeader* header() const { return reinterpret_cast<CtlHeader*>(base); }
    ExportTable* exports() const { return reinterpret_cast<ExportTable*>(base + l->exports); }
    ReplySlot* reply(uint32_t from) const { return reinterpret_cast<ReplySlot*>(base + l->reply) + from; }
    Line* ring_tail() const { return reinterpret_cast<Line*>(base + l->ring_tail); }
    CallCell* ring() const { return reinterpret_cast<CallCell*>(base + l->ring); }
    Line* dissem(int round) const { return reinterpret_cast<Line*>(base + l->dissem) + round; }
    Line* arrive(uint32_t i) const { return reinterpret_cast<Line*>(base + l->arrive) + i; }
    Line* release() const { return reinterpret_cast<Line*>(base + l->release); }
};

}  // namespace svshm
