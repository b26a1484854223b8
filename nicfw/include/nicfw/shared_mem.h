// shared_mem.h -- memory the NIC allocates for the program (VipExtAllocMem): each block
// is a memfd the NIC keeps open, mapped shared, so that the NIC of a same-host peer can
// map the same pages through /proc/<pid>/fd/<fd>. What makes the NIC-atomics shortcut
// possible (offload/atomics/grants.h), as UCX's shared-memory transports reach only the
// memory UCX allocated. Blocks are sealed against resizing (a peer that maps one cannot
// be made to fault by a truncation) and mode 0600 (only this user opens them).
#pragma once

#include <cstdint>
#include <vector>

#include "nicfw/memtable.h"

namespace softvia::nicfw {

class SharedMemory {
public:
    // Largest block: the offsets a grant carries are 64-bit, but a block is one memfd.
    static constexpr uint64_t kMaxBlock = uint64_t{1} << 40;
    // Blocks per NIC (each holds a file descriptor).
    static constexpr size_t kMaxBlocks = 4096;

    SharedMemory() = default;
    SharedMemory(const SharedMemory&) = delete;
    SharedMemory& operator=(const SharedMemory&) = delete;
    ~SharedMemory();  // unmaps and closes every block

    // A zeroed, page-aligned block of at least len bytes. -EINVAL (len 0 or above
    // kMaxBlock), -ENOSPC (kMaxBlocks), or the errno of memfd_create/ftruncate/mmap.
    int alloc(uint64_t len, void** out);
    // The block starting at addr goes away. -EINVAL if addr starts no block of this NIC,
    // -EBUSY while a registration of mem lies in it.
    int free(const void* addr, const MemTable& mem);
    // The block holding [va, va+len): its memfd, the offset of va in it and the memfd's
    // length. False if no block holds the whole range.
    bool find(uint64_t va, uint64_t len, int* fd, uint64_t* off, uint64_t* file_len) const;

private:
    struct Block {
        uint64_t base, len;
        int fd;
    };
    std::vector<Block> blocks_;
};

}  // namespace softvia::nicfw
