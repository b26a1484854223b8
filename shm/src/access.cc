// access.cc -- reading, writing and atomic operations on a same-host process's exported
// memory: loads and stores through the views where the memory is shared, and
// process_vm_readv/process_vm_writev (a copy by the kernel) where it is not.
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "internal.h"

namespace svshm {
namespace {

// Finds what [addr, addr+len) of rank is: a local address (mapped), or only an export
// to copy through the kernel (*local = nullptr). write: the caller means to change it.
int locate(const char* call, int rank, uint64_t addr, size_t len, bool write, Peer** out, char** local) {
    if (!S.up) return fail(EINVAL, "%s: not initialised", call);
    Peer* p = peer_of(rank);
    if (!p)
        return fail(rank >= 0 && rank < S.size ? EREMOTE : EINVAL, "%s: rank %d is %s", call, rank,
                    rank >= 0 && rank < S.size ? "on another host" : "not a process of the job");
    if (is_gone(*p)) return fail(ESRCH, "%s: process %d (pid %d) has exited", call, rank, p->pid);
    ExportView e;
    if (!find_export(*p, addr, len, &e))
        return fail(ERANGE, "%s: %#llx + %zu bytes of process %d lie outside everything it exports", call,
                    (unsigned long long)addr, len, rank);
    if (write && (e.flags & kExpRdonly))
        return fail(EACCES, "%s: process %d exports %#llx + %zu bytes read-only", call, rank, (unsigned long long)addr, len);
    *out = p;
    *local = (e.flags & kExpMapped) ? static_cast<char*>(sv_shm_translate(rank, addr, len)) : nullptr;
    return 0;
}

int vm_error(const char* call, const Peer& p, int e) {
    if (e == EPERM)
        return fail(EPERM, "%s: the kernel refuses to copy to or from process %d (pid %d): its ptrace rules "
                    "(kernel.yama.ptrace_scope above 0, or a process that is not dumpable)", call, p.rank, p.pid);
    if (e == ESRCH) return fail(ESRCH, "%s: process %d (pid %d) has exited", call, p.rank, p.pid);
    return fail(e, "%s: process %d's memory is not there (%s)", call, p.rank, strerror(e));
}

// The kernel's copy, repeated over partial transfers. The pid's owner is checked first:
// a pid that outlived its process would name another one.
int vm_copy(const char* call, const Peer& p, void* local, uint64_t remote, size_t len, bool write) {
    if (p.rank != S.rank) {
        peers_alive();
        if (is_gone(p)) return fail(ESRCH, "%s: process %d (pid %d) has exited", call, p.rank, p.pid);
    }
    size_t done = 0;
    while (done < len) {
        iovec l{static_cast<char*>(local) + done, len - done};
        iovec r{reinterpret_cast<void*>(remote + done), len - done};
        const ssize_t n = write ? process_vm_writev(p.pid, &l, 1, &r, 1, 0) : process_vm_readv(p.pid, &l, 1, &r, 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return vm_error(call, p, n < 0 ? errno : EFAULT);
        done += static_cast<size_t>(n);
    }
    return 0;
}

template <class Op>
int atomic_op(const char* call, int rank, uint64_t addr, int64_t* old, Op op) {
    clear_error();
    if (addr & 7) return fail(EINVAL, "%s: address %#llx is not 8-byte aligned", call, (unsigned long long)addr);
    if (!old) return fail(EINVAL, "%s: old is NULL", call);
    Peer* p;
    char* local;
    int rc = locate(call, rank, addr, 8, true, &p, &local);
    if (rc) return rc;
    if (!local)
        return fail(ENOTSUP, "%s: %#llx of process %d is not shared memory (outside its heap and data segment): "
                    "the owner must run it (sv_shm_call)", call, (unsigned long long)addr, rank);
    *old = op(reinterpret_cast<int64_t*>(local));
    return 0;
}

}  // namespace
}  // namespace svshm

using namespace svshm;

extern "C" {

int sv_shm_read(int rank, void* dst, uint64_t addr, size_t len) {
    clear_error();
    if (!dst && len) return fail(EINVAL, "sv_shm_read: dst is NULL");
    if (len == 0) return 0;
    Peer* p;
    char* local;
    int rc = locate("sv_shm_read", rank, addr, len, false, &p, &local);
    if (rc) return rc;
    if (local) {
        sv_shm_copy(dst, local, len);
        return 0;
    }
    return vm_copy("sv_shm_read", *p, dst, addr, len, false);
}

int sv_shm_write(int rank, uint64_t addr, const void* src, size_t len) {
    clear_error();
    if (!src && len) return fail(EINVAL, "sv_shm_write: src is NULL");
    if (len == 0) return 0;
    Peer* p;
    char* local;
    int rc = locate("sv_shm_write", rank, addr, len, true, &p, &local);
    if (rc) return rc;
    if (local) {
        sv_shm_copy(local, src, len);
        return 0;
    }
    return vm_copy("sv_shm_write", *p, const_cast<void*>(src), addr, len, true);
}

// Sequentially consistent, as the hardware's locked instructions are on x86-64.
int sv_shm_fetch_add64(int rank, uint64_t addr, int64_t v, int64_t* old) {
    return atomic_op("sv_shm_fetch_add64", rank, addr, old,
                     [v](int64_t* w) { return __atomic_fetch_add(w, v, __ATOMIC_SEQ_CST); });
}

int sv_shm_cswap64(int rank, uint64_t addr, int64_t expected, int64_t desired, int64_t* old) {
    return atomic_op("sv_shm_cswap64", rank, addr, old, [expected, desired](int64_t* w) {
        int64_t e = expected;
        __atomic_compare_exchange_n(w, &e, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        return e;  // the old value whether or not it swapped
    });
}

int sv_shm_swap64(int rank, uint64_t addr, int64_t v, int64_t* old) {
    return atomic_op("sv_shm_swap64", rank, addr, old, [v](int64_t* w) { return __atomic_exchange_n(w, v, __ATOMIC_SEQ_CST); });
}

}  // extern "C"
