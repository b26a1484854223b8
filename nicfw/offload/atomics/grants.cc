// grants.cc -- the same-host shortcut's grants (grants.h).
#include "grants.h"

#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "nicfw/hostmem.h"
#include "nicfw/clock.h"
#include "nicfw/memfd.h"

namespace softvia::nicfw::atomics {
namespace {

constexpr uint64_t kPageBytes = GrantPage::kSlots * 2 * sizeof(uint64_t);
// A slot's two words: the target's state and the initiator's busy flag (grants.h).
inline std::atomic<uint64_t>& state_word(std::atomic<uint64_t>* page, uint32_t slot) { return page[2 * slot]; }
inline std::atomic<uint64_t>& busy_word(std::atomic<uint64_t>* page, uint32_t slot) { return page[2 * slot + 1]; }
// An initiator holds a grant's word for a few instructions; one that has not left after
// this long was killed inside (or is stopped: the grant's slot is then never reused).
constexpr uint64_t kDrainLimitNs = 1000000000;
// The memfds' names (shared_mem.cc names the NIC's memory).
constexpr const char* kPageName = "softvia-grants";
constexpr const char* kMemName = "softvia-nicmem";
// Grants one VI keeps mapped.
constexpr size_t kMaxHeld = 64;
constexpr uint64_t kMaxMapped = uint64_t{1} << 40;  // bytes of regions, all grants of a VI

// Opens memfd fd of process pid: one a NIC made under that name (never another of the
// process's files, such as its NIC's rings), sealed (open_peer_memfd), of at least
// min_len bytes. The descriptor, or a negative errno.
int open_nic_memfd(uint32_t pid, uint32_t fd, const char* name, uint64_t min_len) {
    char path[64], link[96], want[96];
    snprintf(path, sizeof path, "/proc/%u/fd/%u", pid, fd);
    const ssize_t n = readlink(path, link, sizeof link - 1);
    if (n < 0) return -errno;
    link[n] = 0;
    snprintf(want, sizeof want, "/memfd:%s (deleted)", name);
    if (strcmp(link, want) != 0) return -ENOTRECOVERABLE;
    uint64_t size = 0;
    int f = open_peer_memfd(pid, fd, &size);
    if (f >= 0 && size < min_len) {
        close(f);
        return -ENOTRECOVERABLE;
    }
    return f;
}

}  // namespace

// ---------------------------------------------------------------- target side
GrantPage::~GrantPage() {
    if (!words_) return;
    revoke(0);
    munmap(words_, kPageBytes);
    close(fd_);
}

bool GrantPage::make_page() {
    void* p;
    if (make_sealed_memfd(kPageName, kPageBytes, &fd_, &p) != 0) return false;
    words_ = static_cast<std::atomic<uint64_t>*>(p);
    return true;
}

bool GrantPage::grant(uint32_t memh, uint64_t base, uint64_t len, int mem_fd, uint64_t off, nicfw_atomic_grant* g) {
    if (!words_ && !make_page()) return false;
    for (uint32_t i = 0; i < kSlots; i++) {
        Slot& s = slots_[i];
        if (s.memh != 0 || s.stuck) continue;
        if (i >= used_) used_ = i + 1;
        if (++s.gen == 0) s.gen = 1;
        s.memh = memh;
        busy_word(words_, i).store(0, std::memory_order_relaxed);
        state_word(words_, i).store(static_cast<uint64_t>(s.gen) << 32 | kOpen, std::memory_order_release);
        *g = nicfw_atomic_grant{base, len, off, static_cast<uint32_t>(mem_fd), static_cast<uint32_t>(fd_),
                                memh, i, s.gen, 0};
        return true;
    }
    return false;
}

bool GrantPage::granted(uint32_t memh) const {
    for (uint32_t i = 0; i < used_; i++)
        if (slots_[i].memh == memh) return true;
    return false;
}

void GrantPage::close_slot(uint32_t i) {
    // No initiator enters from here on (entering needs the open bit); wait for one inside.
    // Both sides' locked instructions order the store before the load (grants.h).
    state_word(words_, i).fetch_and(~kOpen, std::memory_order_seq_cst);
    std::atomic<uint64_t>& busy = busy_word(words_, i);
    uint64_t deadline = 0;
    for (uint32_t spins = 0; busy.load(std::memory_order_seq_cst) != 0; spins++) {
        if (spins < 64) continue;
        const uint64_t t = now_ns();
        if (deadline == 0) deadline = t + kDrainLimitNs;
        if (t > deadline) {
            slots_[i].stuck = true;  // the initiator never left: the slot is never given again
            break;
        }
        sched_yield();  // the initiator may be waiting for this core
    }
    slots_[i].memh = 0;
}

void GrantPage::revoke(uint32_t memh) {
    if (!words_) return;
    for (uint32_t i = 0; i < used_; i++)
        if (slots_[i].memh != 0 && (memh == 0 || slots_[i].memh == memh)) close_slot(i);
}

// ---------------------------------------------------------------- initiator side
GrantCache::~GrantCache() {
    while (!grants_.empty()) drop(grants_.size() - 1);
    if (words_) munmap(words_, kPageBytes);
}

void GrantCache::drop(size_t i) {
    munmap(grants_[i].map, grants_[i].map_len);
    mapped_ -= grants_[i].map_len;
    grants_[i] = grants_.back();
    grants_.pop_back();
}

int GrantCache::add(uint32_t pid, const nicfw_atomic_grant& g) {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    if (g.memh == 0 || g.len < sizeof(uint64_t) || g.slot >= GrantPage::kSlots || g.gen == 0 ||
        g.file_off > UINT64_MAX - g.len || g.base > UINT64_MAX - g.len)
        return -EINVAL;
    for (size_t i = 0; i < grants_.size(); i++)
        if (grants_[i].memh == g.memh) drop(i--);  // a newer grant of the same region
    // A peer cannot make us map without end (address space is ours to keep).
    if (grants_.size() >= kMaxHeld || mapped_ >= kMaxMapped || g.len > kMaxMapped - mapped_) return -ENOSPC;
    // The grant page: mapped once per target page.
    if (!words_ || page_pid_ != pid || page_fd_ != g.page_fd) {
        int f = open_nic_memfd(pid, g.page_fd, kPageName, kPageBytes);
        if (f < 0) return f;
        void* p = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
        close(f);
        if (p == MAP_FAILED) return -ENOMEM;
        // Grants on the old page are void with it (the target made a new page for a new
        // connection, and the old one is all closed).
        while (!grants_.empty()) drop(grants_.size() - 1);
        if (words_) munmap(words_, kPageBytes);
        words_ = static_cast<std::atomic<uint64_t>*>(p);
        page_pid_ = pid;
        page_fd_ = g.page_fd;
    }
    // The region's pages.
    const uint64_t lead = g.file_off % page;
    const uint64_t start = g.file_off - lead;
    const uint64_t map_len = (lead + g.len + page - 1) / page * page;
    int f = open_nic_memfd(pid, g.mem_fd, kMemName, start + map_len);
    if (f < 0) return f;
    void* p = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, f, static_cast<off_t>(start));
    close(f);
    if (p == MAP_FAILED) return -ENOMEM;
    grants_.push_back(Grant{g.memh, g.base, g.len, static_cast<uint8_t*>(p), map_len, lead, g.slot, g.gen});
    mapped_ += map_len;
    return 0;
}

bool GrantCache::apply(uint32_t memh, uint64_t raddr, uint32_t op, uint64_t a0, uint64_t a1, uint64_t* old) {
    for (size_t i = 0; i < grants_.size(); i++) {
        const Grant& g = grants_[i];
        if (g.memh != memh) continue;
        if (raddr < g.base || raddr - g.base > g.len - sizeof(uint64_t)) return false;  // the target refuses it
        std::atomic<uint64_t>& busy = busy_word(words_, g.slot);
        busy.exchange(1, std::memory_order_seq_cst);  // visible before state is read
        const uint64_t cur = state_word(words_, g.slot).load(std::memory_order_seq_cst);
        if ((cur >> 32) != g.gen || !(cur & kOpen)) {
            busy.store(0, std::memory_order_release);
            drop(i);  // revoked: the target decides again
            return false;
        }
        uint64_t* word = reinterpret_cast<uint64_t*>(g.map + g.lead + (raddr - g.base));
        const int rc = op == NICFW_OFFLOAD_OP_FETCH_ADD ? hostmem::fetch_add64(word, a0, old)
                                                        : hostmem::cas64(word, a0, a1, old);
        busy.store(0, std::memory_order_release);  // after the locked operation: nothing passes it
        return rc == 0;
    }
    return false;
}

}  // namespace softvia::nicfw::atomics
