// job.cc -- sv_shm_init and sv_shm_finalize: who is in the job and on this host, the
// job's key, the order of start-up (segments, the exchange, the views), liveness of the
// same-host processes, and the library's errors.
#include <poll.h>
#include <softvia_boot.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <unordered_map>

#include "internal.h"

namespace svshm {

State S;

namespace {
thread_local char t_error[512];
constexpr uint64_t kInfoMagic = 0x6f666e696d687376ull;  // "vshminfo"
constexpr int kMaxRanks = 65535;                      // the 16 bits of a segment id

uint64_t fnv1a(uint64_t h, const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

// Processes map each other only when they share the kernel (its boot id), the network
// namespace (the start-up sockets are abstract, so per network namespace; softvia-run
// --hosts makes each namespace a host) and the PID namespace (the pids they exchange
// and check must mean the same process).
int host_identity(uint64_t* out) {
    char boot[64] = {0};
    FILE* f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (!f) return fail(errno, "cannot read /proc/sys/kernel/random/boot_id: %s", strerror(errno));
    const bool ok = fgets(boot, sizeof boot, f) != nullptr;
    fclose(f);
    if (!ok) return fail(EIO, "cannot read /proc/sys/kernel/random/boot_id");
    uint64_t h = fnv1a(0xcbf29ce484222325ull, boot, strlen(boot));
    for (const char* ns : {"/proc/self/ns/net", "/proc/self/ns/pid"}) {
        struct stat st {};
        if (stat(ns, &st) != 0) return fail(errno, "cannot stat %s: %s", ns, strerror(errno));
        h = fnv1a(h, &st.st_dev, sizeof st.st_dev);
        h = fnv1a(h, &st.st_ino, sizeof st.st_ino);
    }
    *out = h;
    return 0;
}

// The job's key: 16 random bytes of rank 0, passed through the launcher's job directory
// (mode 0700: no other user reads it). A process proves it belongs to the job with it.
int job_key(int timeout_ms) {
    if (S.size == 1) return getrandom(S.key, sizeof S.key, 0) == sizeof S.key ? 0 : fail(EIO, "getrandom failed");
    int rc;
    if (S.rank == 0) {
        if (getrandom(S.key, sizeof S.key, 0) != sizeof S.key) return fail(EIO, "getrandom failed");
        rc = sv_boot_put("key", S.key, sizeof S.key);
        if (rc != 0) return fail(-rc, "cannot publish the job's key through the launcher: %s", strerror(-rc));
    } else {
        size_t len = 0;
        rc = sv_boot_get("key", S.key, sizeof S.key, &len, timeout_ms);
        if (rc != 0 || len != sizeof S.key)
            return fail(rc ? -rc : EINVAL, "cannot read the job's key through the launcher: %s",
                        rc ? strerror(-rc) : "malformed");
    }
    return 0;
}

int check_config(const sv_shm_config& c) {
    if (c.heap_size == 0) return fail(EINVAL, "heap_size is 0: the heap needs at least one page");
    if (c.heap_base == 0 || (c.heap_base & 4095))
        return fail(EINVAL, "heap_base %#llx is not a page-aligned address", (unsigned long long)c.heap_base);
    constexpr uint64_t kTop = 1ull << 47;  // x86-64 user addresses lie below
    if (c.heap_base >= kTop || c.heap_size > kTop - c.heap_base || ((c.heap_size + 4095) & ~4095ull) > kTop - c.heap_base)
        return fail(EINVAL, "heap_size %llu at heap_base %#llx runs past the top of the user address space (%#llx)",
                    (unsigned long long)c.heap_size, (unsigned long long)c.heap_base, (unsigned long long)kTop);
    if (c.flags & ~SV_SHM_MOVE_DATA) return fail(EINVAL, "flags %#x: unknown bits (SV_SHM_MOVE_DATA is the only flag)", c.flags);
    return 0;
}

void undo_init() {
    for (Peer& p : S.peers) {
        if (&p - S.peers.data() != S.my_local) unmap_peer(p);
        if (p.pidfd >= 0) close(p.pidfd);
    }
    for (int* fd : {&S.heap_fd, &S.data_fd})
        if (*fd >= 0) close(*fd), *fd = -1;
    handoff_close();
    if (S.ctl_base) munmap(S.ctl_base, S.layout.size);
    S.ctl_base = nullptr;
    // The heap and a moved data segment stay: the program's variables live there now.
    S.peers.clear();
    S.up = false;
}

int start(const sv_shm_config& cfg) {
    int rc = check_config(cfg);
    if (rc) return rc;
    int rank = 0, size = 1;
    rc = sv_boot_init(&rank, &size);
    if (rc != 0) return fail(-rc, "the launcher's environment is not usable: %s", sv_boot_last_error());
    if (size > kMaxRanks) return fail(EINVAL, "%d processes: the same-host path takes at most %d", size, kMaxRanks);
    S.rank = rank;
    S.size = size;
    uint64_t host = 0;
    if ((rc = host_identity(&host)) || (rc = job_key(cfg.timeout_ms))) return rc;
    S.job_tag = static_cast<uint32_t>(fnv1a(0xcbf29ce484222325ull, S.key, sizeof S.key) & 0xffffff);
    if (S.job_tag == 0) S.job_tag = 1;
    if ((rc = make_heap(cfg))) return rc;
    S.made = true;  // from here on, what this process made shared stays so
    if ((cfg.flags & SV_SHM_MOVE_DATA) && (rc = move_data_segment())) return rc;

    // Listening before the allgather: a peer that hears of this process can reach it.
    if ((rc = handoff_listen())) return rc;
    Info mine{kInfoMagic, getpid(), S.sock_nonce, geteuid(), host, S.heap_base, S.heap_size, S.data_lo, S.data_hi, cfg.flags};
    S.infos.assign(static_cast<size_t>(size), Info{});
    rc = sv_boot_allgather(&mine, sizeof mine, S.infos.data(), cfg.timeout_ms);
    if (rc != 0)
        return fail(-rc, "cannot exchange start-up information through the launcher: %s (%s)", strerror(-rc),
                    sv_boot_last_error());
    S.local_of.assign(static_cast<size_t>(size), -1);
    S.host_of.assign(static_cast<size_t>(size), -1);
    S.host_leader.clear();
    S.host_size.clear();
    std::vector<int> locals;
    std::unordered_map<uint64_t, int> hosts;  // host identity -> number
    for (int r = 0; r < size; r++) {
        const Info& in = S.infos[static_cast<size_t>(r)];
        const auto [at, added] = hosts.emplace(in.host, static_cast<int>(S.host_leader.size()));
        if (added) {
            S.host_leader.push_back(r);
            S.host_size.push_back(0);
        }
        S.host_of[static_cast<size_t>(r)] = at->second;
        S.host_size[static_cast<size_t>(at->second)]++;
        if (in.magic != kInfoMagic) return fail(EINVAL, "process %d sent malformed start-up information", r);
        if (in.heap_base != S.heap_base || in.heap_size != S.heap_size)
            return fail(EINVAL,
                        "processes %d and %d disagree on the heap (%#llx + %llu bytes and %#llx + %llu): every "
                        "process must pass the same heap_base and heap_size",
                        S.rank, r, (unsigned long long)S.heap_base, (unsigned long long)S.heap_size,
                        (unsigned long long)in.heap_base, (unsigned long long)in.heap_size);
        if (in.host != host) continue;
        if (in.uid != mine.uid)
            return fail(EACCES,
                        "process %d (pid %lld) runs as user %llu and process %d as user %llu: the same-host path "
                        "joins only processes of one user",
                        r, (long long)in.pid, (unsigned long long)in.uid, S.rank, (unsigned long long)mine.uid);
        S.local_of[static_cast<size_t>(r)] = static_cast<int>(locals.size());
        locals.push_back(r);
    }
    S.my_local = S.local_of[static_cast<size_t>(rank)];
    S.layout = CtlLayout::for_count(static_cast<uint32_t>(locals.size()));
    S.peers.assign(locals.size(), Peer{});
    for (size_t i = 0; i < locals.size(); i++) {
        Peer& p = S.peers[i];
        p.rank = locals[i];
        p.pid = static_cast<pid_t>(S.infos[static_cast<size_t>(p.rank)].pid);
        if (p.rank == rank) continue;
        // A descriptor that becomes readable when the process exits: liveness without
        // the race of a recycled pid.
        p.pidfd = static_cast<int>(syscall(SYS_pidfd_open, p.pid, 0));
        if (p.pidfd < 0) {
            if (errno == ESRCH) return fail(ESRCH, "process %d (pid %d) exited during start-up", p.rank, p.pid);
            return fail(errno, "pidfd_open(%d) for process %d: %s", p.pid, p.rank, strerror(errno));
        }
    }
    if ((rc = make_ctl())) return rc;
    add_own_exports();
    if ((rc = handoff(cfg.timeout_ms))) return rc;
    // Every process has mapped every other of its host before any uses the path.
    rc = sv_boot_barrier(cfg.timeout_ms);
    if (rc != 0) return fail(-rc, "start-up barrier: %s", strerror(-rc));
    for (Peer& p : S.peers) {
        const CtlHeader* h = p.ctl.header();
        if (h->magic != kCtlMagic || h->version != kCtlVersion || h->rank != static_cast<uint32_t>(p.rank) ||
            h->pid != p.pid || h->job_tag != S.job_tag)
            return fail(EPROTO, "process %d's control block is not what it announced", p.rank);
    }
    S.last_check_ns = now_ns();
    S.up = true;
    return 0;
}

}  // namespace

int fail(int err, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_error, sizeof t_error, fmt, ap);
    va_end(ap);
    return -err;
}

void clear_error() { t_error[0] = 0; }

int64_t now_ns() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

bool peers_alive() {
    S.last_check_ns = now_ns();
    std::vector<pollfd> fds;
    fds.reserve(S.peers.size());
    for (const Peer& p : S.peers)
        if (p.pidfd >= 0 && !is_gone(p)) fds.push_back(pollfd{p.pidfd, POLLIN, 0});
    if (fds.empty()) return S.lost_rank < 0;
    if (poll(fds.data(), fds.size(), 0) <= 0) return S.lost_rank < 0;
    for (const pollfd& f : fds) {
        if (!(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        for (Peer& p : S.peers)
            if (p.pidfd == f.fd) {
                __atomic_store_n(&p.gone, true, __ATOMIC_RELAXED);
                if (S.lost_rank < 0) S.lost_rank = p.rank;
            }
    }
    return S.lost_rank < 0;
}

}  // namespace svshm

using namespace svshm;

extern "C" {

void sv_shm_config_default(sv_shm_config* cfg) {
    if (!cfg) return;
    *cfg = sv_shm_config{SV_SHM_DEFAULT_HEAP_SIZE, SV_SHM_DEFAULT_HEAP_BASE, SV_SHM_MOVE_DATA, 60000};
}

int sv_shm_init(const sv_shm_config* cfg) {
    clear_error();
    if (S.up || S.made)
        return fail(EALREADY, "sv_shm_init: this process %s: it runs once per process (its heap and data segment stay "
                    "shared for the process's life)", S.up ? "is initialised already" : "made its memory shared before");
    sv_shm_config d;
    sv_shm_config_default(&d);
    const int rc = start(cfg ? *cfg : d);
    if (rc) undo_init();
    return rc;
}

int sv_shm_finalize(void) {
    clear_error();
    if (!S.up) return fail(EINVAL, "sv_shm_finalize: not initialised");
    for (const Attachment& a : S.attachments) munmap(a.map_lo, a.map_len);
    S.attachments.clear();
    undo_init();
    return 0;
}

const char* sv_shm_last_error(void) { return t_error; }

int sv_shm_rank(void) { return S.up ? S.rank : -1; }
int sv_shm_size(void) { return S.up ? S.size : 0; }
int sv_shm_local_size(void) { return S.up ? static_cast<int>(S.peers.size()) : 0; }
int sv_shm_local_index(int rank) {
    return S.up && rank >= 0 && rank < S.size ? S.local_of[static_cast<size_t>(rank)] : -1;
}
int sv_shm_local_rank(int index) {
    return S.up && index >= 0 && static_cast<size_t>(index) < S.peers.size() ? S.peers[static_cast<size_t>(index)].rank
                                                                              : -1;
}

int sv_shm_check_peers(void) {
    if (!S.up) return fail(EINVAL, "sv_shm_check_peers: not initialised");
    if (peers_alive()) return 0;
    const Peer* p = peer_of(S.lost_rank);
    return fail(ESRCH, "process %d (pid %d) of this host has exited", S.lost_rank, p ? p->pid : 0);
}

int sv_shm_lost_rank(void) { return S.lost_rank; }

int sv_shm_is_alive(int rank) {
    if (!S.up) return fail(EINVAL, "sv_shm_is_alive: not initialised");
    const Peer* p = peer_of(rank);
    if (!p) return fail(EINVAL, "sv_shm_is_alive: rank %d is not a process of this host", rank);
    peers_alive();
    return is_gone(*p) ? 0 : 1;
}

int sv_shm_host_count(void) { return S.up ? static_cast<int>(S.host_leader.size()) : 0; }
int sv_shm_host_of(int rank) { return S.up && rank >= 0 && rank < S.size ? S.host_of[static_cast<size_t>(rank)] : -1; }
int sv_shm_host_leader(int host) {
    return S.up && host >= 0 && static_cast<size_t>(host) < S.host_leader.size() ? S.host_leader[static_cast<size_t>(host)] : -1;
}
int sv_shm_host_size(int host) {
    return S.up && host >= 0 && static_cast<size_t>(host) < S.host_size.size() ? S.host_size[static_cast<size_t>(host)] : 0;
}

}  // extern "C"
