// nicfw/queues.h -- the device's queues of work: descriptors fed by doorbells
// (WorkQueue), the checked host ranges of a descriptor (Seg), and the per-VI FIFO of
// transmitted requests that complete in post order (TxRing); the counters' bump.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include "nicfw/abi.h"
#include "nicfw/hostmem.h"

namespace softvia::nicfw {

// Segment i of a descriptor. nicfw_desc declares ds[2] but programs allocate as
// many as seg_count says, so index from the control segment, not the declared array.
inline nicfw_desc_seg* desc_segment(nicfw_desc* d, uint32_t i) {
    return reinterpret_cast<nicfw_desc_seg*>(reinterpret_cast<uint8_t*>(d) + sizeof(nicfw_desc_ctrl)) + i;
}

// The status op bits of an offload descriptor with this control (nicfw/offload/registry.cc).
uint32_t offload_status_op(uint16_t control);

// The status op bits of a send-queue descriptor, from its control (for completions that
// happen before the descriptor was started, such as a flush). Unreadable: a send.
inline uint32_t send_op_status(const nicfw_desc* d) {
    uint16_t control = 0;
    hostmem::load(&d->cs.control, &control);
    switch (control & NICFW_DC_OP_MASK) {
        case NICFW_DC_OP_RDMA_WRITE: return NICFW_DS_OP_RDMA_WRITE;
        case NICFW_DC_OP_RDMA_READ: return NICFW_DS_OP_RDMA_READ;
        case NICFW_DC_OP_OFFLOAD: return offload_status_op(control);
        default: return NICFW_DS_OP_SEND;
    }
}

// Status-page counters (nicfw_counters): one writer, the firmware under the engine lock;
// readers in this process (VipExtQuery*Counters) and others (softvia-nicinfo) at any time.
// Relaxed atomic load and store: the same instructions as ++ on x86-64, and no data race.
[[gnu::always_inline]] inline void bump(uint64_t& c, uint64_t n = 1) {
    __atomic_store_n(&c, __atomic_load_n(&c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

struct WorkItem {
    nicfw_desc* desc;
    uint32_t memh;
};

// FIFO of descriptors, private to the device. Starts small and doubles up to its
// limit, so thousands of idle VIs cost little memory.
class WorkQueue {
public:
    explicit WorkQueue(uint32_t limit_pow2)
        : ring_(std::min(kInitial, limit_pow2)), mask_(std::min(kInitial, limit_pow2) - 1), limit_(limit_pow2) {}
    bool empty() const { return head_ == tail_; }
    uint32_t size() const { return tail_ - head_; }
    bool push(WorkItem w) {
        if (tail_ - head_ > mask_) {
            if (ring_.size() >= limit_) return false;
            grow();
        }
        ring_[tail_++ & mask_] = w;
        return true;
    }
    WorkItem& front() { return ring_[head_ & mask_]; }
    void pop() { head_++; }

private:
    static constexpr uint32_t kInitial = 64;
    __attribute__((noinline)) void grow() {  // rare: keeps push() small enough to inline
        std::vector<WorkItem> bigger(ring_.size() * 2);
        for (uint32_t i = head_; i != tail_; i++) bigger[i & (bigger.size() - 1)] = ring_[i & mask_];
        ring_.swap(bigger);
        mask_ = static_cast<uint32_t>(ring_.size() - 1);
    }
    std::vector<WorkItem> ring_;
    uint32_t mask_, limit_, head_ = 0, tail_ = 0;
};

// A checked piece of host memory: where, how long, and the region it was checked
// against (looked up again when the memory table has changed since: MemTable::epoch).
struct Seg {
    uint8_t* ptr;
    uint32_t len;
    uint32_t memh;
};

// A send-queue descriptor the NIC has transmitted but not completed. VIA completes a
// queue's descriptors in post order, while acked sends/writes and reads finish when the
// target answers, so completion goes through this FIFO.
// With retransmission on, every request stays here until acknowledged; a resend reads
// the descriptor again (the NIC owns it until it completes) and re-checks it.
struct TxEntry {
    enum Kind : uint8_t { kLocal, kAcked, kRead, kOffload };
    Kind kind = kLocal;  // done at transmit / on ACK / on data / on the offload's answer
    bool done = false;
    nicfw_desc* desc = nullptr;
    uint32_t memh = 0;    // of the region holding desc
    uint32_t status = 0;  // completion status bits once done
    uint32_t len = 0;
    uint32_t op = 0;      // NICFW_DS_OP_*
    uint32_t seq = 0;     // the request's sequence number (READ_RESP frames carry it)
    bool resent = false;  // rel_proto: sent more than once (its ACK times nothing: Karn)
    uint64_t sent_ns = 0; // rel_proto: when it was first sent
    uint32_t got = 0;     // kRead: bytes placed so far
    uint32_t epoch = 0;   // kRead: MemTable::epoch when segs were checked
    std::vector<Seg> segs;  // kRead: where the data goes (checked at post)
    uint8_t offload = 0;    // kOffload: registry index of its offload

    // Reads and offload requests complete when the target answers (Vi::reads_out).
    bool answered() const { return kind == kRead || kind == kOffload; }

    // Back to a fresh entry; segs keeps its storage for the next read in this slot.
    void reset() {
        kind = kLocal;
        done = false;
        desc = nullptr;
        memh = status = len = op = seq = got = epoch = 0;
        resent = false;
        sent_ns = 0;
        offload = 0;
        segs.clear();
    }
};

// The pending FIFO of a VI: a ring of entries reused in place (no allocation per
// request), doubling when full. It holds at most the VI's posted send descriptors, so it
// stops growing at the send queue's depth; it starts empty, so idle VIs cost nothing.
class TxRing {
public:
    bool empty() const { return head_ == tail_; }
    uint32_t size() const { return tail_ - head_; }
    TxEntry& front() { return ring_[head_ & mask_]; }
    TxEntry& operator[](uint32_t i) { return ring_[(head_ + i) & mask_]; }
    // A reset entry at the back.
    TxEntry& push() {
        if (tail_ - head_ == ring_.size()) grow();
        TxEntry& e = ring_[tail_++ & mask_];
        e.reset();
        return e;
    }
    void pop() { head_++; }

    // Oldest first, for range-for and std::find_if.
    class iterator {
    public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = TxEntry;
        using difference_type = std::ptrdiff_t;
        using pointer = TxEntry*;
        using reference = TxEntry&;
        iterator(TxRing* r, uint32_t i) : r_(r), i_(i) {}
        TxEntry& operator*() const { return r_->ring_[i_ & r_->mask_]; }
        TxEntry* operator->() const { return &**this; }
        iterator& operator++() {
            i_++;
            return *this;
        }
        bool operator==(const iterator& o) const { return i_ == o.i_; }
        bool operator!=(const iterator& o) const { return i_ != o.i_; }

    private:
        TxRing* r_;
        uint32_t i_;
    };
    iterator begin() { return iterator(this, head_); }
    iterator end() { return iterator(this, tail_); }

private:
    static constexpr uint32_t kInitial = 16;
    void grow() {
        std::vector<TxEntry> bigger(ring_.empty() ? kInitial : ring_.size() * 2);
        const uint32_t m = static_cast<uint32_t>(bigger.size() - 1);
        for (uint32_t i = head_; i != tail_; i++) bigger[i & m] = std::move(ring_[i & mask_]);
        ring_.swap(bigger);
        mask_ = m;
    }
    std::vector<TxEntry> ring_;
    uint32_t mask_ = 0, head_ = 0, tail_ = 0;
};

}  // namespace softvia::nicfw
