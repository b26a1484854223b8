// shared_mem.cc -- NIC-allocated memory in memfds (shared_mem.h).
#include "nicfw/shared_mem.h"

#include "nicfw/memfd.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace softvia::nicfw {

SharedMemory::~SharedMemory() {
    for (const Block& b : blocks_) {
        munmap(reinterpret_cast<void*>(b.base), b.len);
        close(b.fd);
    }
}

int SharedMemory::alloc(uint64_t len, void** out) {
    if (len == 0 || len > kMaxBlock) return -EINVAL;
    if (blocks_.size() >= kMaxBlocks) return -ENOSPC;
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    len = (len + page - 1) / page * page;
    // The name is checked by the peer that maps it (offload/atomics/grants.cc).
    int fd;
    void* p;
    if (int rc = make_sealed_memfd("softvia-nicmem", len, &fd, &p)) return rc;
    blocks_.push_back(Block{reinterpret_cast<uint64_t>(p), len, fd});
    *out = p;
    return 0;
}

int SharedMemory::free(const void* addr, const MemTable& mem) {
    const uint64_t a = reinterpret_cast<uint64_t>(addr);
    for (size_t i = 0; i < blocks_.size(); i++) {
        const Block b = blocks_[i];
        if (b.base != a) continue;
        if (mem.overlaps(b.base, b.len)) return -EBUSY;
        munmap(reinterpret_cast<void*>(b.base), b.len);
        close(b.fd);
        blocks_[i] = blocks_.back();
        blocks_.pop_back();
        return 0;
    }
    return -EINVAL;
}

bool SharedMemory::find(uint64_t va, uint64_t len, int* fd, uint64_t* off, uint64_t* file_len) const {
    for (const Block& b : blocks_) {
        if (va < b.base || len > b.len || va - b.base > b.len - len) continue;
        *fd = b.fd;
        *off = va - b.base;
        *file_len = b.len;
        return true;
    }
    return false;
}

}  // namespace softvia::nicfw
