// segments.cc -- the memory a process shares: its heap (a memfd mapped at the same
// address in every process, with the control block after it in the same memfd), its
// data segment (moved onto a memfd in place), and the views it maps of its peers'.
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "internal.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

namespace svshm {
namespace {

constexpr uint64_t kPage = 4096;
inline uint64_t page_down(uint64_t a) { return a & ~(kPage - 1); }
inline uint64_t page_up(uint64_t a) { return (a + kPage - 1) & ~(kPage - 1); }

// A memfd nobody can open by name: it has none. Sealed later against resizing, so a peer
// holding it cannot shrink it under the owner (which would turn the owner's accesses
// into SIGBUS).
int new_memfd(const char* name) {
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
    if (fd < 0 && errno == EINVAL) fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);  // before Linux 6.3
    return fd;
}

int seal(int fd) { return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL); }

// The executable's writable segment, less the part the loader makes read-only after
// relocation (RELRO): [lo, hi) in whole pages.
struct DataRange {
    uint64_t lo = 0, hi = 0;
    uint64_t file_hi = 0;  // end of the part loaded from the file (.data); .bss after it
};
int find_data(dl_phdr_info* info, size_t, void* out) {
    auto* r = static_cast<DataRange*>(out);
    uint64_t relro_end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        const uint64_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
        if (ph.p_type == PT_GNU_RELRO) relro_end = page_down(hi);  // what ld.so protects ends there
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_W) && ph.p_memsz) {
            r->lo = r->lo ? std::min(r->lo, page_down(lo)) : page_down(lo);
            r->hi = std::max(r->hi, page_up(hi));
            r->file_hi = std::max(r->file_hi, page_up(lo + ph.p_filesz));
        }
    }
    if (relro_end > r->lo && relro_end <= r->hi) r->lo = relro_end;
    return 1;  // the first object is the executable
}

// Copies [src, src+n) to offset at of fd without going through the sanitizers'
// interceptors: the data segment holds their redzones around globals, which they would
// report as read.
int raw_pwrite_all(int fd, const char* src, uint64_t n, uint64_t at) {
    uint64_t done = 0;
    while (done < n) {
        const long w = syscall(SYS_pwrite64, fd, src + done, n - done, at + done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        done += static_cast<uint64_t>(w);
    }
    return 0;
}

// Copies the segment into the memfd: the part loaded from the file whole; of .bss only
// the pages the process has touched, present in memory or swapped out (/proc/self/pagemap
// bits 63 and 62). A page never touched is zero, as the sparse memfd is already: a
// program with a large static array does not commit it by starting. Without pagemap,
// everything is copied.
int copy_segment(int fd, const DataRange& r) {
    const uint64_t file_hi = std::min(std::max(r.file_hi, r.lo), r.hi);
    if (raw_pwrite_all(fd, reinterpret_cast<const char*>(r.lo), file_hi - r.lo, 0) != 0) return -1;
    const uint64_t pages = (r.hi - file_hi) / kPage;
    if (pages == 0) return 0;
    std::vector<uint64_t> entry(pages);
    const int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    const ssize_t want = static_cast<ssize_t>(pages * sizeof(uint64_t));
    const bool known = pm >= 0 && pread(pm, entry.data(), static_cast<size_t>(want),
                                        static_cast<off_t>(file_hi / kPage * sizeof(uint64_t))) == want;
    if (pm >= 0) close(pm);
    if (!known) return raw_pwrite_all(fd, reinterpret_cast<const char*>(file_hi), r.hi - file_hi, file_hi - r.lo);
    constexpr uint64_t kTouched = (1ull << 63) | (1ull << 62);  // present, swapped
    for (uint64_t i = 0; i < pages;) {
        if (!(entry[i] & kTouched)) {
            i++;
            continue;
        }
        uint64_t j = i;
        while (j < pages && (entry[j] & kTouched)) j++;  // a run of touched pages, one write
        const uint64_t at = file_hi + i * kPage;
        if (raw_pwrite_all(fd, reinterpret_cast<const char*>(at), (j - i) * kPage, at - r.lo) != 0) return -1;
        i = j;
    }
    return 0;
}

}  // namespace

int make_heap(const sv_shm_config& cfg) {
    S.heap_base = cfg.heap_base;
    S.heap_size = page_up(cfg.heap_size);
    S.heap_fd = new_memfd("softvia-shm-heap");
    if (S.heap_fd < 0) return fail(errno, "memfd_create for the heap: %s", strerror(errno));
    if (ftruncate(S.heap_fd, static_cast<off_t>(S.heap_size)) != 0)
        return fail(errno, "heap_size %llu: cannot size the heap's memfd: %s", (unsigned long long)S.heap_size,
                    strerror(errno));
    void* p = mmap(reinterpret_cast<void*>(S.heap_base), S.heap_size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED_NOREPLACE, S.heap_fd, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        if (e == EEXIST)
            return fail(EEXIST, "heap_base %#llx: %llu bytes there are already in use in this process",
                        (unsigned long long)S.heap_base, (unsigned long long)S.heap_size);
        return fail(e, "heap_size %llu at heap_base %#llx: cannot map the heap: %s%s", (unsigned long long)S.heap_size,
                    (unsigned long long)S.heap_base, strerror(e),
                    e == ENOMEM ? " (larger than the address space allows)"
                    : e == EPERM ? " (heap_base below the lowest address a process may map, vm.mmap_min_addr)" : "");
    }
    if (reinterpret_cast<uint64_t>(p) != S.heap_base) {  // a kernel without MAP_FIXED_NOREPLACE
        munmap(p, S.heap_size);
        return fail(EEXIST, "heap_base %#llx: the kernel placed the heap elsewhere", (unsigned long long)S.heap_base);
    }
    return 0;
}

// Moves the executable's data segment onto a memfd in place: its bytes are copied into
// the memfd, which is then mapped over the same addresses (MAP_FIXED replaces the old
// pages in one step). Global variables keep their addresses and values. Nothing may write
// to the segment between the copy and the mapping: start-up runs on one thread.
int move_data_segment() {
    DataRange r;
    dl_iterate_phdr(find_data, &r);
    if (r.hi <= r.lo) return 0;  // nothing writable after RELRO
    const uint64_t n = r.hi - r.lo;
    S.data_fd = new_memfd("softvia-shm-data");
    if (S.data_fd < 0) return fail(errno, "memfd_create for the data segment: %s", strerror(errno));
    if (ftruncate(S.data_fd, static_cast<off_t>(n)) != 0 || copy_segment(S.data_fd, r) != 0)
        return fail(errno, "cannot copy the data segment (%#llx-%#llx) into its memfd: %s", (unsigned long long)r.lo,
                    (unsigned long long)r.hi, strerror(errno));
    const long m = syscall(SYS_mmap, r.lo, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, S.data_fd, 0);
    if (m == -1 || static_cast<uint64_t>(m) != r.lo)
        return fail(errno, "cannot map the data segment (%#llx-%#llx) onto its memfd: %s", (unsigned long long)r.lo,
                    (unsigned long long)r.hi, strerror(errno));
    S.data_lo = r.lo;
    S.data_hi = r.hi;
    return 0;
}

// This process's control block, after the heap in the heap's memfd; then both memfds are
// sealed at their final sizes.
int make_ctl() {
    const uint64_t total = S.heap_size + S.layout.size;
    if (ftruncate(S.heap_fd, static_cast<off_t>(total)) != 0)
        return fail(errno, "cannot size the control block: %s", strerror(errno));
    void* p = mmap(nullptr, S.layout.size, PROT_READ | PROT_WRITE, MAP_SHARED, S.heap_fd, static_cast<off_t>(S.heap_size));
    if (p == MAP_FAILED) return fail(errno, "cannot map the control block: %s", strerror(errno));
    S.ctl_base = static_cast<char*>(p);
    if (seal(S.heap_fd) != 0 || (S.data_fd >= 0 && seal(S.data_fd) != 0))
        return fail(errno, "cannot seal the memfds: %s", strerror(errno));
    Ctl c{S.ctl_base, &S.layout};
    // The memfd is new: every field is zero, which is each atomic's initial state, so
    // only the header and the ring's free marks are written.
    *c.header() = CtlHeader{kCtlMagic, kCtlVersion, static_cast<uint32_t>(S.rank), getpid(), S.layout.local_count,
                            S.job_tag, S.layout.size, S.heap_base, S.heap_size, S.data_lo, S.data_hi};
    for (uint32_t i = 0; i < S.layout.ring_cap; i++) c.ring()[i].seq.store(i, std::memory_order_relaxed);
    Peer& me = S.peers[static_cast<size_t>(S.my_local)];
    me.ctl = c;
    me.data_lo = S.data_lo;
    me.data_hi = S.data_hi;
    return 0;
}

int map_peer(Peer& p, int heap_fd, int data_fd, const Info& in) {
    const uint64_t view = in.heap_size + S.layout.size;
    void* h = mmap(nullptr, view, PROT_READ | PROT_WRITE, MAP_SHARED, heap_fd, 0);
    if (h == MAP_FAILED)
        return fail(errno, "cannot map process %d's heap (%llu bytes): %s%s", p.rank, (unsigned long long)view,
                    strerror(errno), errno == ENOMEM ? " (every process maps each same-host process's heap: a smaller heap_size)" : "");
    p.heap_view = static_cast<char*>(h);
    p.view_size = view;
    p.heap_off = static_cast<int64_t>(reinterpret_cast<uint64_t>(h) - in.heap_base);
    p.ctl = Ctl{p.heap_view + in.heap_size, &S.layout};
    if (in.data_hi > in.data_lo) {
        if (data_fd < 0) return fail(EPROTO, "process %d announced a data segment but sent no memfd for it", p.rank);
        void* d = mmap(nullptr, in.data_hi - in.data_lo, PROT_READ | PROT_WRITE, MAP_SHARED, data_fd, 0);
        if (d == MAP_FAILED) return fail(errno, "cannot map process %d's data segment: %s", p.rank, strerror(errno));
        p.data_view = static_cast<char*>(d);
        p.data_lo = in.data_lo;
        p.data_hi = in.data_hi;
        p.data_off = static_cast<int64_t>(reinterpret_cast<uint64_t>(d) - in.data_lo);
    }
    return 0;
}

void unmap_peer(Peer& p) {
    if (p.heap_view) munmap(p.heap_view, p.view_size);
    if (p.data_view) munmap(p.data_view, p.data_hi - p.data_lo);
    p.heap_view = p.data_view = nullptr;
    p.ctl.base = nullptr;
}

}  // namespace svshm
