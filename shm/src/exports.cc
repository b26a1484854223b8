// exports.cc -- what a process lets its peers reach: the export table in its control
// block (written by the owner under a sequence lock, read by peers), segment ids,
// attaching and detaching, and translation of a peer's address into a local one.
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "internal.h"

namespace svshm {
namespace {

constexpr uint64_t kTop = 1ull << 47;
constexpr uint32_t kIndexMask = 0xffffff;

inline bool inside(uint64_t lo, uint64_t hi, uint64_t addr, uint64_t len) {
    return addr >= lo && len <= hi - lo && addr - lo <= hi - lo - len;
}

// Owner side: the writer half of the sequence lock. The owner is the table's only
// writer; a reader that sees the count odd, or changed across its read, reads again.
void write_begin(ExportTable* t) {
    t->seq.v.store(t->seq.v.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // the odd count is seen before any slot changes
}
void write_end(ExportTable* t) {
    // Pairs with the reader's acquire load of seq: the slots are complete before it.
    t->seq.v.store(t->seq.v.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

int add_export(uint64_t lo, uint64_t hi, uint32_t index, uint32_t flags, uint32_t tag) {
    ExportTable* t = my_ctl().exports();
    uint32_t used = t->used.load(std::memory_order_relaxed), at = used;
    for (uint32_t i = 0; i < used; i++)
        if (t->slot[i].index.load(std::memory_order_relaxed) == 0) {
            at = i;
            break;
        }
    if (at == kMaxExports)
        return fail(ENOSPC, "sv_shm_export: %d ranges are exported already (SV_SHM_MAX_EXPORTS)", SV_SHM_MAX_EXPORTS);
    write_begin(t);
    ExportSlot& s = t->slot[at];
    s.lo.store(lo, std::memory_order_relaxed);
    s.hi.store(hi, std::memory_order_relaxed);
    s.flags.store(flags, std::memory_order_relaxed);
    s.tag.store(tag, std::memory_order_relaxed);
    s.index.store(index, std::memory_order_relaxed);
    if (at == used) t->used.store(used + 1, std::memory_order_relaxed);
    write_end(t);
    return 0;
}

bool own_mapped(uint64_t lo, uint64_t len) {
    return inside(S.heap_base, S.heap_base + S.heap_size, lo, len) || (S.data_hi > S.data_lo && inside(S.data_lo, S.data_hi, lo, len));
}

// Where [addr, addr+len) of p is in this process, when it lies in p's heap or data segment.
inline char* view_of(const Peer& p, uint64_t addr, uint64_t len) {
    if (inside(S.heap_base, S.heap_base + S.heap_size, addr, len)) return reinterpret_cast<char*>(addr + p.heap_off);
    if (p.data_hi > p.data_lo && inside(p.data_lo, p.data_hi, addr, len)) return reinterpret_cast<char*>(addr + p.data_off);
    return nullptr;
}

// The reader half; match picks the slot.
template <class Match>
bool read_table(const Peer& p, Match match, ExportView* out) {
    const ExportTable* t = p.ctl.exports();
    for (unsigned tries = 1;; tries++) {
        const uint64_t s1 = t->seq.v.load(std::memory_order_acquire);  // pairs with write_end
        if (s1 & 1) {
            // The owner is changing the table, and may have been preempted doing it: let
            // it run, and give up only once it is gone (its table is then no one's).
            if ((tries & 63) == 0) sched_yield();
            if ((tries & 4095) == 0 && p.rank != S.rank && (peers_alive(), is_gone(p))) return false;
            continue;
        }
        // Exports may nest (one inside the heap): the smallest that matches is the answer.
        bool found = false;
        ExportView best{};
        const uint32_t used = std::min(t->used.load(std::memory_order_relaxed), kMaxExports);
        for (uint32_t i = 0; i < used; i++) {
            const ExportSlot& s = t->slot[i];
            const ExportView v{s.lo.load(std::memory_order_relaxed), s.hi.load(std::memory_order_relaxed),
                               s.index.load(std::memory_order_relaxed), s.flags.load(std::memory_order_relaxed),
                               s.tag.load(std::memory_order_relaxed)};
            if (v.index == 0 || !match(v) || (found && v.hi - v.lo >= best.hi - best.lo)) continue;
            best = v;
            found = true;
        }
        std::atomic_thread_fence(std::memory_order_acquire);  // the slots were read before seq is read again
        if (t->seq.v.load(std::memory_order_relaxed) != s1) continue;
        if (found) *out = best;
        return found;
    }
}

// Decodes a segment id of this job into its owner (a live same-host process) and export.
int resolve(sv_shm_segid_t segid, Peer** owner, ExportView* e) {
    const uint32_t tag = static_cast<uint32_t>(segid >> 40);
    const int rank = static_cast<int>((segid >> 24) & 0xffff);
    const uint32_t index = static_cast<uint32_t>(segid & kIndexMask);
    if (tag != S.job_tag)
        return fail(EACCES, "segment id %#llx belongs to another job (job tag %#x; this process's job is %#x): only "
                    "processes of the same job attach each other's memory",
                    (unsigned long long)segid, tag, S.job_tag);
    if (rank >= S.size || index == 0)
        return fail(EINVAL, "segment id %#llx names no segment of this job (process %d, segment %u)", (unsigned long long)segid, rank, index);
    Peer* p = peer_of(rank);
    if (!p) return fail(EREMOTE, "segment id %#llx is process %d's, which runs on another host", (unsigned long long)segid, rank);
    peers_alive();
    if (is_gone(*p)) return fail(ESRCH, "segment id %#llx: process %d (pid %d) has exited", (unsigned long long)segid, rank, p->pid);
    if (!find_export_by_index(*p, index, e))
        return fail(ENOENT, "segment id %#llx: process %d exports no segment %u (never, or withdrawn)", (unsigned long long)segid, rank, index);
    *owner = p;
    return 0;
}

}  // namespace

void add_own_exports() {
    add_export(S.heap_base, S.heap_base + S.heap_size, SV_SHM_SEG_HEAP, kExpMapped, 0);
    if (S.data_hi > S.data_lo) add_export(S.data_lo, S.data_hi, SV_SHM_SEG_DATA, kExpMapped, 0);
}

bool find_export(const Peer& p, uint64_t addr, uint64_t len, ExportView* out) {
    return read_table(p, [&](const ExportView& v) { return inside(v.lo, v.hi, addr, len); }, out);
}

bool find_export_by_index(const Peer& p, uint32_t index, ExportView* out) {
    return read_table(p, [&](const ExportView& v) { return v.index == index; }, out);
}

}  // namespace svshm

using namespace svshm;

extern "C" {

int sv_shm_segid_of(int rank, int which, sv_shm_segid_t* segid) {
    clear_error();
    if (!S.up) return fail(EINVAL, "sv_shm_segid_of: not initialised");
    if (rank < 0 || rank >= S.size) return fail(EINVAL, "sv_shm_segid_of: rank %d is not a process of the job (0..%d)", rank, S.size - 1);
    if (which != SV_SHM_SEG_HEAP && which != SV_SHM_SEG_DATA)
        return fail(EINVAL, "sv_shm_segid_of: which %d is neither SV_SHM_SEG_HEAP nor SV_SHM_SEG_DATA", which);
    if (!segid) return fail(EINVAL, "sv_shm_segid_of: segid is NULL");
    const Info& in = S.infos[static_cast<size_t>(rank)];
    if (which == SV_SHM_SEG_DATA && in.data_hi <= in.data_lo)
        return fail(ENOENT, "sv_shm_segid_of: process %d did not move its data segment (SV_SHM_MOVE_DATA)", rank);
    *segid = make_segid(rank, static_cast<uint32_t>(which));
    return 0;
}

int sv_shm_export(const void* addr, size_t len, unsigned flags, uint32_t tag, sv_shm_segid_t* segid) {
    clear_error();
    if (!S.up) return fail(EINVAL, "sv_shm_export: not initialised");
    const uint64_t a = reinterpret_cast<uint64_t>(addr);
    if (!addr || len == 0 || a + len < a || a + len > kTop)
        return fail(EINVAL, "sv_shm_export: [%p, +%zu) is not a range of user memory", addr, len);
    if (flags & ~SV_SHM_RDONLY) return fail(EINVAL, "sv_shm_export: flags %#x: only SV_SHM_RDONLY is known", flags);
    if (!segid) return fail(EINVAL, "sv_shm_export: segid is NULL");
    // A fresh index, never one in use (the 24 bits wrap after 16 million exports).
    uint32_t index;
    ExportView v;
    do {
        index = S.next_export;
        S.next_export = S.next_export >= kIndexMask ? 3 : S.next_export + 1;
    } while (find_export_by_index(S.peers[static_cast<size_t>(S.my_local)], index, &v));
    const uint32_t f = (own_mapped(a, len) ? kExpMapped : 0) | ((flags & SV_SHM_RDONLY) ? kExpRdonly : 0);
    const int rc = add_export(a, a + len, index, f, tag);
    if (rc) return rc;
    *segid = make_segid(S.rank, index);
    return 0;
}

int sv_shm_unexport(sv_shm_segid_t segid) {
    clear_error();
    if (!S.up) return fail(EINVAL, "sv_shm_unexport: not initialised");
    const uint32_t index = static_cast<uint32_t>(segid & kIndexMask);
    if (static_cast<uint32_t>(segid >> 40) != S.job_tag || static_cast<int>((segid >> 24) & 0xffff) != S.rank)
        return fail(EINVAL, "sv_shm_unexport: segment id %#llx is not this process's", (unsigned long long)segid);
    if (index == SV_SHM_SEG_HEAP || index == SV_SHM_SEG_DATA)
        return fail(EINVAL, "sv_shm_unexport: the heap and the data segment stay exported for the job's life");
    if (index == 0) return fail(EINVAL, "sv_shm_unexport: segment id %#llx names no segment", (unsigned long long)segid);
    ExportTable* t = my_ctl().exports();
    const uint32_t used = t->used.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < used; i++) {
        if (t->slot[i].index.load(std::memory_order_relaxed) != index) continue;
        write_begin(t);
        t->slot[i].index.store(0, std::memory_order_relaxed);
        uint32_t u = used;
        while (u > 0 && t->slot[u - 1].index.load(std::memory_order_relaxed) == 0) u--;
        t->used.store(u, std::memory_order_relaxed);
        write_end(t);
        return 0;
    }
    return fail(ENOENT, "sv_shm_unexport: segment id %#llx is not exported (any more)", (unsigned long long)segid);
}

int sv_shm_find_export(int rank, uint64_t addr, size_t len, sv_shm_export_info* info) {
    clear_error();
    if (!S.up) return fail(EINVAL, "sv_shm_find_export: not initialised");
    Peer* p = peer_of(rank);
    if (!p) return fail(rank >= 0 && rank < S.size ? EREMOTE : EINVAL, "sv_shm_find_export: rank %d is not a process of this host", rank);
    ExportView v;
    if (!find_export(*p, addr, len, &v))
        return fail(ENOENT, "process %d exports nothing that holds %#llx + %zu bytes", rank, (unsigned long long)addr, len);
    if (info)
        *info = sv_shm_export_info{make_segid(rank, v.index), v.lo, v.hi - v.lo, (v.flags & kExpRdonly) ? SV_SHM_RDONLY : 0u,
                                   v.tag, (v.flags & kExpMapped) ? view_of(*p, v.lo, v.hi - v.lo) : nullptr};
    return 0;
}

int sv_shm_attach(sv_shm_segid_t segid, uint64_t offset, size_t len, unsigned flags, void** addr) {
    clear_error();
    if (!S.up) return fail(EINVAL, "sv_shm_attach: not initialised");
    if (!addr) return fail(EINVAL, "sv_shm_attach: addr is NULL");
    if (flags & ~SV_SHM_RDONLY) return fail(EINVAL, "sv_shm_attach: flags %#x: only SV_SHM_RDONLY is known", flags);
    if (len == 0) return fail(EINVAL, "sv_shm_attach: len is 0");
    Peer* p = nullptr;
    ExportView e;
    int rc = resolve(segid, &p, &e);
    if (rc) return rc;
    const uint64_t size = e.hi - e.lo;
    if (offset > size || len > size - offset)
        return fail(ERANGE, "sv_shm_attach: offset %llu + len %zu runs outside the segment (%llu bytes)", (unsigned long long)offset, len,
                    (unsigned long long)size);
    if (!(e.flags & kExpMapped))
        return fail(ENOTSUP, "sv_shm_attach: segment %#llx is not in shared memory (it is not in process %d's heap or data "
                    "segment): reach it with sv_shm_read and sv_shm_write", (unsigned long long)segid, p->rank);
    if ((e.flags & kExpRdonly) && !(flags & SV_SHM_RDONLY))
        return fail(EACCES, "sv_shm_attach: segment %#llx is exported read-only: attach it with SV_SHM_RDONLY", (unsigned long long)segid);
    char* src = view_of(*p, e.lo + offset, len);
    if (!src) return fail(EPROTO, "sv_shm_attach: segment %#llx is marked shared but lies outside the shared segments", (unsigned long long)segid);
    // A second mapping of the same pages (mremap of a shared mapping with old size 0).
    const uint64_t lo = reinterpret_cast<uint64_t>(src) & ~4095ull;
    const uint64_t hi = (reinterpret_cast<uint64_t>(src) + len + 4095) & ~4095ull;
    void* m = mremap(reinterpret_cast<void*>(lo), 0, hi - lo, MREMAP_MAYMOVE);
    if (m == MAP_FAILED) return fail(errno, "sv_shm_attach: cannot map the range: %s", strerror(errno));
    if ((flags & SV_SHM_RDONLY) && mprotect(m, hi - lo, PROT_READ) != 0) {
        const int err = errno;
        munmap(m, hi - lo);
        return fail(err, "sv_shm_attach: cannot make the mapping read-only: %s", strerror(err));
    }
    *addr = static_cast<char*>(m) + (reinterpret_cast<uint64_t>(src) - lo);
    S.attachments.push_back(Attachment{static_cast<char*>(m), hi - lo, *addr});
    return 0;
}

int sv_shm_detach(void* addr) {
    clear_error();
    auto it = std::find_if(S.attachments.begin(), S.attachments.end(), [addr](const Attachment& a) { return a.addr == addr; });
    if (!addr || it == S.attachments.end()) return fail(EINVAL, "sv_shm_detach: %p is not an address sv_shm_attach returned", addr);
    munmap(it->map_lo, it->map_len);
    S.attachments.erase(it);
    return 0;
}

void* sv_shm_translate(int rank, uint64_t addr, size_t len) {
    if (!S.up) return nullptr;
    const Peer* p = peer_of(rank);
    return p ? view_of(*p, addr, len) : nullptr;
}

}  // extern "C"
