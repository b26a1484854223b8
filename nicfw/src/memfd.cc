// memfd.cc -- sealed, private memfds (nicfw/memfd.h).
#include "nicfw/memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace softvia::nicfw {

int make_sealed_memfd(const char* name, size_t len, int* fd_out, void** map) {
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    int rc = 0;
    // memfds are created 0777: only this user may open it (through /proc/<pid>/fd).
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
    *fd_out = fd;
    *map = p;
    return 0;
}

int open_peer_memfd(uint32_t pid, uint32_t fd, uint64_t* size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/fd/%u", pid, fd);
    // O_NONBLOCK: a number naming a FIFO must not block us in open().
    int f = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (f < 0) return -errno;
    struct stat st;
    int seals = fcntl(f, F_GET_SEALS);
    if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode) || seals < 0 || !(seals & F_SEAL_SHRINK)) {
        close(f);
        return -ENOTRECOVERABLE;
    }
    *size = static_cast<uint64_t>(st.st_size);
    return f;
}

}  // namespace softvia::nicfw
