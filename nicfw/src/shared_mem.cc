// shared_mem.cc -- NIC-allocated memory in memfds (shared_mem.h).
#include "nicfw/shared_mem.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
    int fd = memfd_create("softvia-nicmem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    int rc = 0;
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, static_cast<off_t>(len)) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        rc = -errno;
    void* p = MAP_FAILED;
    if (rc == 0) {
        p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) rc = -errno;
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
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
