// nicfw/memfd.h -- the memfds a NIC shares with other processes (the status page, the shm
// wire's segments and lanes, NIC-allocated memory, atomics' grant pages): mode 0600 (only
// this user opens them, through /proc/<pid>/fd), sealed at their size (a process that
// maps one can never be made to fault by a truncation), mapped shared.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softvia::nicfw {

// A new memfd called name of len bytes, mapped read-write at *map. 0, or -errno (nothing
// is left open).
int make_sealed_memfd(const char* name, size_t len, int* fd_out, void** map);
// Opens descriptor fd of process pid (/proc/<pid>/fd/<fd>, read-write; a FIFO does not
// block the open): a regular file sealed against shrinking, so our accesses to a mapping
// of it can never fault. The descriptor and its size, or -errno of the open, or
// -ENOTRECOVERABLE (not a sealed regular file).
int open_peer_memfd(uint32_t pid, uint32_t fd, uint64_t* size);

}  // namespace softvia::nicfw
