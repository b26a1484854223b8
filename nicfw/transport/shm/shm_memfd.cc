// shm_memfd.cc -- opening a peer's memfds (shm_layout.h); ours come from nicfw/memfd.h.
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "nicfw/memfd.h"
#include "shm_layout.h"

namespace softvia::nicfw::shm {

uint64_t host_id() {
    // The boot id tells hosts apart (network namespaces share it: same kernel, same host).
    char buf[64] = {};
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        (void)n;
        close(fd);
    }
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (char c : buf) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    return h;
}

void prefault(void* map, size_t len) {
#ifdef MADV_POPULATE_WRITE
    (void)madvise(map, len, MADV_POPULATE_WRITE);  // best effort: older kernels fault lazily
#else
    (void)map;
    (void)len;
#endif
}

int map_remote(uint32_t pid, uint32_t fd, size_t len, void** map) {
    uint64_t size = 0;
    int f = open_peer_memfd(pid, fd, &size);
    if (f == -ENOTRECOVERABLE) return f;
    if (f < 0) {
        if (f == -EACCES || f == -EPERM) return -EACCES;
        if (f == -EMFILE || f == -ENFILE || f == -ENOMEM) return f;
        return -EHOSTUNREACH;  // process or fd gone
    }
    if (size != len) {
        close(f);
        return -ENOTRECOVERABLE;
    }
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    int e = errno;
    close(f);
    if (p == MAP_FAILED) return e == ENOMEM ? -ENOMEM : -EHOSTUNREACH;
    *map = p;
    return 0;
}

const char* why(int err) {
    switch (err) {
        case EACCES: return "permission denied (only processes of the same user can connect over shm)";
        case EMFILE: return "out of file descriptors (raise the limit: ulimit -n)";
        case ENFILE: return "the system is out of file descriptors";
        case ENOMEM: return "out of memory";
        case ENOSPC: return "peer limit reached (device option shm:peers=)";
        case ENOTRECOVERABLE: return "not sealed against resizing, or of the wrong size (a memfd we cannot trust)";
        default: return strerror(err);
    }
}

}  // namespace softvia::nicfw::shm
