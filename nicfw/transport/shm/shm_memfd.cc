// shm_memfd.cc -- making our memfds and opening a peer's (shm_layout.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "shm_layout.h"

namespace softvia::nicfw::shm {

namespace {
// Our memfds never change size: a peer cannot make our accesses fault by truncating them.
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
}  // namespace

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

uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int make_memfd(const char* name, size_t len, int* fd_out, void** map) {
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    int rc = 0;
    // memfds are created 0777: only this user may open it (through /proc/<pid>/fd).
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, static_cast<off_t>(len)) != 0 || fcntl(fd, F_ADD_SEALS, kSeals) != 0)
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
    *fd_out = fd;
    *map = p;
    return 0;
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
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/fd/%u", pid, fd);
    // O_NONBLOCK: a hostile address naming a FIFO must not block us in open().
    int f = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (f < 0) {
        int e = errno;
        if (e == EACCES || e == EPERM) return -EACCES;
        if (e == EMFILE || e == ENFILE || e == ENOMEM) return -e;
        return -EHOSTUNREACH;  // process or fd gone
    }
    struct stat st;
    int seals = fcntl(f, F_GET_SEALS);
    if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != len || seals < 0 ||
        !(seals & F_SEAL_SHRINK)) {
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
