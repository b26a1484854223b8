/*
 * softvia_shm.h -- the same-host path (libsoftvia_shm): processes of one job on one host
 * reach each other's memory with plain loads, stores and hardware atomics, on an
 * unpatched Linux kernel. docs/shm.md has the design.
 *
 * At sv_shm_init every process of the job (started by softvia-run) puts a symmetric
 * heap at the same address in every process, backed by a memfd, and can move the
 * program's data segment (.data and .bss) onto a memfd in place, so global variables stay
 * where the program expects them. The processes of one host then hand each other these
 * memfds over UNIX sockets (SCM_RIGHTS, each end checking the other's credentials), map
 * each other's heap and data segment, and close every descriptor: after start-up no
 * memfd of the job is open anywhere, and none has a name another process could open.
 * A pointer into a same-host process's heap or data segment becomes a local address with
 * one addition (sv_shm_translate).
 *
 * Memory outside those segments (the stack, malloc'd memory) can be exported too; a
 * peer reaches it by copy through process_vm_readv/process_vm_writev (sv_shm_read and
 * sv_shm_write choose the path). A call queue per process carries small requests
 * (sv_shm_call) that the owner runs whenever it polls: what no peer can do with loads
 * and stores alone (running the owner's functions, atomics on unmapped memory).
 *
 * The model after XPMEM: an owner exports a range (sv_shm_export) and gets a segment id
 * that names the job, the process and the segment; a peer attaches a part of it
 * (sv_shm_attach: a new mapping of the same pages) and detaches it. The heap and the
 * data segment are exported by sv_shm_init (sv_shm_segid_of).
 *
 * Every call returns 0 (or a count) on success and a negative errno value on failure;
 * sv_shm_last_error() then says why in one line naming the argument or setting at fault.
 * Not thread-safe: one thread per process calls the library (sv_shm_translate and the
 * atomics may be called from any thread once sv_shm_init has returned).
 */
#ifndef SOFTVIA_SHM_H
#define SOFTVIA_SHM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

/* ---- the job -------------------------------------------------------------------------- */
#define SV_SHM_DEFAULT_HEAP_SIZE ((uint64_t)256 << 20)
/* 86 TiB: far from brk and from mmap's area, and ordinary application memory under
 * AddressSanitizer and ThreadSanitizer. */
#define SV_SHM_DEFAULT_HEAP_BASE ((uint64_t)0x560000000000)

/* sv_shm_config.flags */
#define SV_SHM_MOVE_DATA 1u /* move the executable's .data and .bss onto a memfd in place */

typedef struct sv_shm_config {
    uint64_t heap_size; /* bytes of address space per process, reserved, not committed
                           (rounded up to a page); at least one page */
    uint64_t heap_base; /* the heap's address, the same in every process; page-aligned */
    unsigned flags;     /* SV_SHM_MOVE_DATA */
    int timeout_ms;     /* bound on the start-up exchange; negative: none */
} sv_shm_config;

/* The defaults: 256 MiB at SV_SHM_DEFAULT_HEAP_BASE, SV_SHM_MOVE_DATA, 60 s. */
void sv_shm_config_default(sv_shm_config *cfg);

/* Collective over every process of the job (softvia-run's ranks; a process started alone
 * is a job of one): makes this process's heap (and moves its data segment), then maps
 * every same-host process's. Every process must pass the same heap_base and heap_size.
 * cfg NULL: the defaults. The data segment may be moved only while no other thread of
 * the process writes to it. Errors: -EINVAL (a bad argument, or the processes disagree),
 * -ENOMEM (the address space cannot hold the heaps), -EEXIST (heap_base is in use),
 * -EACCES (a same-host process of the job runs as another user), -ETIMEDOUT, -EALREADY
 * (once per process: a call that failed after making the heap, or one after
 * sv_shm_finalize, is refused too). */
int sv_shm_init(const sv_shm_config *cfg);
/* Unmaps this process's views of its peers and ends its part of the path. Its own heap
 * and data segment stay where they are (peers may still hold them mapped). Call it after
 * a barrier, so that no peer is still using the path towards this process. */
int sv_shm_finalize(void);

/* Why the last call of this thread failed: one line, or "" */
const char *sv_shm_last_error(void);

int sv_shm_rank(void);       /* this process, 0..size-1; -1 before sv_shm_init */
int sv_shm_size(void);       /* processes in the job; 0 before sv_shm_init */
int sv_shm_local_size(void); /* processes on this host, this one included */
/* rank's index among the processes of this host (0..local_size-1), or -1 when it runs on
 * another host (another kernel, network namespace or PID namespace) or is out of range. */
int sv_shm_local_index(int rank);
/* The rank of the index-th process of this host, or -1. */
int sv_shm_local_rank(int index);
/* Hosts of the job, numbered 0..count-1 in the order of their lowest rank. */
int sv_shm_host_count(void);
int sv_shm_host_of(int rank);     /* rank's host, or -1 */
int sv_shm_host_leader(int host); /* the lowest rank on host, or -1 */
int sv_shm_host_size(int host);   /* processes on host, or 0 */

/* ---- segments -------------------------------------------------------------------------- */
/* A segment id names the job, the owner and the segment: a process of another job that
 * is given one cannot use it. */
typedef uint64_t sv_shm_segid_t;
#define SV_SHM_SEG_HEAP 1 /* the symmetric heap */
#define SV_SHM_SEG_DATA 2 /* the data segment (only with SV_SHM_MOVE_DATA) */
/* The segment id of rank's heap or data segment (which: SV_SHM_SEG_HEAP or _DATA). */
int sv_shm_segid_of(int rank, int which, sv_shm_segid_t *segid);

/* sv_shm_export flags */
#define SV_SHM_RDONLY 1u /* sv_shm_write, the atomics and a writable attach refuse it. Not a
                            protection within the job: a heap or data-segment range stays
                            writable through sv_shm_translate (the job's processes trust
                            each other, as parts of one program) */

/* Exports [addr, addr+len) of this process: peers may then attach it (when it lies in
 * this process's heap or data segment: shared memory) or read and write it by copy
 * (anywhere else). tag is the caller's own word, returned by sv_shm_find_export. At most
 * SV_SHM_MAX_EXPORTS at a time. Not collective. */
#define SV_SHM_MAX_EXPORTS 1024
int sv_shm_export(const void *addr, size_t len, unsigned flags, uint32_t tag, sv_shm_segid_t *segid);
/* Withdraws an export of this process: no new attach or copy reaches it. Mappings peers
 * already made stay valid until they detach (the pages are shared; they cannot be taken
 * back from another process on an unpatched kernel). */
int sv_shm_unexport(sv_shm_segid_t segid);

typedef struct sv_shm_export_info {
    sv_shm_segid_t segid;
    uint64_t addr, len; /* in the owner */
    unsigned flags;     /* SV_SHM_RDONLY */
    uint32_t tag;
    void *local;        /* where the export is in this process's view of the owner, or NULL
                           when it is reachable only by copy */
} sv_shm_export_info;
/* The smallest export of rank that holds [addr, addr+len) (a same-host rank, or this
 * process); -ENOENT when none does. */
int sv_shm_find_export(int rank, uint64_t addr, size_t len, sv_shm_export_info *info);

/* Maps [offset, offset+len) of the segment into this process and returns its address in
 * *addr (SV_SHM_RDONLY: read-only). The segment must be shared memory (a heap, a data
 * segment or an export inside them: -ENOTSUP otherwise; use sv_shm_read/sv_shm_write)
 * of a live same-host process of this job (-ESRCH when it has exited, -EACCES for
 * another job's segment, -EREMOTE for one on another host); the range must lie inside
 * it (-ERANGE). */
int sv_shm_attach(sv_shm_segid_t segid, uint64_t offset, size_t len, unsigned flags, void **addr);
int sv_shm_detach(void *addr);

/* The local address of [addr, addr+len) in rank's heap or data segment (one addition:
 * addr itself for this process), or NULL (another host, or memory outside them). No check
 * of exports: the heap and data segment are always shared. */
void *sv_shm_translate(int rank, uint64_t addr, size_t len);

/* Copies between this process and [addr, addr+len) of rank, which must lie inside one
 * export of rank: by memcpy when it is mapped here, else by process_vm_readv/writev.
 * -EPERM when the kernel refuses the copy (kernel.yama.ptrace_scope), -ESRCH when rank
 * has exited, -EFAULT when rank's memory there is gone. */
int sv_shm_read(int rank, void *dst, uint64_t addr, size_t len);
int sv_shm_write(int rank, uint64_t addr, const void *src, size_t len);

/* memcpy for copies through the views of another process's memory (dst and src do not
 * overlap). The same as memcpy but in one case: where dst lies 1..63 bytes past src
 * modulo a page and the copy is long enough (2 KiB) for glibc to use the string move,
 * which on AMD Zen runs 20-40x slower there (4 KiB: some 5,000 cycles instead of 200); a
 * view's page offsets against the program's buffers land there by chance. That case
 * takes 16-byte moves. */
static inline void *sv_shm_copy(void *dst, const void *src, size_t n) {
#if defined(__x86_64__) && defined(__SSE2__)
    if (n >= 2048 && (((uintptr_t)dst - (uintptr_t)src) & 4095) - 1 < 63) {
        char *d = (char *)dst;
        const char *s = (const char *)src;
        size_t i = 0;
        for (; i + 64 <= n; i += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(s + i)), b = _mm_loadu_si128((const __m128i *)(s + i + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32)), e = _mm_loadu_si128((const __m128i *)(s + i + 48));
            _mm_storeu_si128((__m128i *)(d + i), a);
            _mm_storeu_si128((__m128i *)(d + i + 16), b);
            _mm_storeu_si128((__m128i *)(d + i + 32), c);
            _mm_storeu_si128((__m128i *)(d + i + 48), e);
        }
        if (i < n) memcpy(d + i, s + i, n - i); /* under 64 bytes: no string move */
        return dst;
    }
#endif
    return memcpy(dst, src, n);
}

/* Hardware atomic operations on an 8-byte aligned word of rank's shared memory (inside
 * an export that is mapped here and not read-only; -ENOTSUP for memory reachable only by
 * copy: use a call (sv_shm_call) that the owner runs). *old gets the previous value. */
int sv_shm_fetch_add64(int rank, uint64_t addr, int64_t v, int64_t *old);
int sv_shm_cswap64(int rank, uint64_t addr, int64_t expected, int64_t desired, int64_t *old);
int sv_shm_swap64(int rank, uint64_t addr, int64_t v, int64_t *old);

/* ---- calls: requests a same-host process runs when it polls ------------------------------ */
#define SV_SHM_CALL_ARGS 6
#define SV_SHM_MAX_HANDLERS 64
/* A handler runs in the owner, inside sv_shm_poll (or any wait of the library), one at a
 * time. It returns 0 and sets *result, or a negative errno value that sv_shm_call returns
 * to the caller (a refusal). It must not call sv_shm_call, sv_shm_send or sv_shm_barrier. */
typedef int (*sv_shm_handler_fn)(int src_rank, const uint64_t args[SV_SHM_CALL_ARGS], int64_t *result, void *ctx);
/* Installs fn as handler index (0..SV_SHM_MAX_HANDLERS-1) of this process. */
int sv_shm_set_handler(int index, sv_shm_handler_fn fn, void *ctx);
/* Called in every waiting loop of the library (calls, barrier), after its own polling:
 * for a layer that must keep another path moving (a network poll). NULL: none. */
void sv_shm_set_progress(void (*fn)(void *), void *arg);

/* Runs handler index at rank with args and waits for its result (this process's own
 * queue is served while it waits). -ENOENT: rank has no such handler; -ESRCH: rank
 * exited; -EDEADLK: called from a handler; else the handler's own refusal. rank may be
 * this process. */
int sv_shm_call(int rank, int index, const uint64_t args[SV_SHM_CALL_ARGS], int64_t *result);
/* The same without a result: returns once the request is queued (-EAGAIN if rank's
 * queue stays full for timeout_ms; a negative timeout waits as long as rank lives). */
int sv_shm_send(int rank, int index, const uint64_t args[SV_SHM_CALL_ARGS], int timeout_ms);
/* Runs the calls queued to this process; returns how many. */
int sv_shm_poll(void);

/* ---- barrier and liveness ------------------------------------------------------------ */
/* Returns once every process of this host has entered. When between is given, the
 * host's first process runs between(arg) after all have arrived and before any leaves:
 * the place for a barrier among the hosts (the paper's hierarchy). -ESRCH when a process
 * of this host has exited. */
int sv_shm_barrier(void (*between)(void *), void *arg);
/* 0 while every same-host process is alive; -ESRCH when one has exited (which one:
 * sv_shm_last_error, and sv_shm_lost_rank). Cheap enough to call every few milliseconds. */
int sv_shm_check_peers(void);
int sv_shm_lost_rank(void); /* the first same-host process found gone, or -1 */
/* 1 while same-host rank lives, 0 once it has exited; negative for a rank of another host. */
int sv_shm_is_alive(int rank);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif /* SOFTVIA_SHM_H */
