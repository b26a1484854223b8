// handoff.cc -- the start-up exchange: each process hands its heap and data memfds to
// every other process of its host, which maps them.
//
// How, and why this way: on an unpatched kernel one process can get another's memfd by
// opening /proc/<pid>/fd/<n>, by pidfd_getfd(), or by being sent it over a UNIX socket
// (SCM_RIGHTS). The first two need only the same user (and pidfd_getfd a permissive
// kernel.yama.ptrace_scope): any process of the user could take the memory, and the
// owner would never know. With a socket the owner decides: it sends its memfds only to
// a listener whose credentials (SO_PEERCRED: pid and user) are those of a process of its
// job, and a receiver takes only a message from such a process, carrying the job's key.
// The sockets are abstract (no file to leave behind, gone with their process) and closed
// at the end of start-up, as are the memfds: afterwards nothing of the job can be opened.
//
// Every process listens before the allgather that tells the others it exists, on a name
// with a random part only the job knows (no one can take the name first); then it
// connects to each same-host peer and sends one datagram (SOCK_SEQPACKET: the message and
// its descriptors arrive whole), taking in what has arrived for it between sends; then it
// takes the rest. No one waits for an answer, so the exchange cannot deadlock; and since
// the kernel bounds the descriptors a user has in flight in sockets (by its soft
// RLIMIT_NOFILE, over all of its processes), receiving while sending keeps few in flight,
// and the soft limit is raised to the hard one for the exchange.
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "internal.h"

namespace svshm {
namespace {

constexpr uint64_t kHelloMagic = 0x6f6c6c65686d6873ull;  // "shmhello"
struct Hello {
    uint64_t magic;
    uint32_t version;
    uint32_t rank;
    uint8_t key[16];
    uint64_t heap_size, ctl_size;
    uint64_t data_lo, data_hi;
    uint32_t nfds;
    uint32_t pad;
};

int g_listener = -1;

socklen_t address_of(pid_t pid, uint64_t nonce, sockaddr_un* a) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    // Abstract: sun_path[0] is 0. Other processes of the network namespace can list the
    // name once it is bound, not guess it before (the nonce travels in the 0700 job
    // directory); the job's key travels inside the connection.
    const int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "softvia-shm.%d.%016llx", static_cast<int>(pid),
                           static_cast<unsigned long long>(nonce));
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

bool credentials(int s, ucred* c) {
    socklen_t len = sizeof *c;
    return getsockopt(s, SOL_SOCKET, SO_PEERCRED, c, &len) == 0 && len == sizeof *c;
}

// Connects to q and sends it this process's memfds. Whenever it cannot go on at once
// (q's backlog full, too many descriptors in flight), it takes in what has arrived for
// this process (drain) and tries again, until the deadline.
template <class Drain>
int send_to(const Peer& q, int64_t deadline, Drain drain) {
    sockaddr_un a;
    const socklen_t alen = address_of(q.pid, S.infos[static_cast<size_t>(q.rank)].sock_nonce, &a);
    auto again = [&](const char* what, int e) -> int {
        if (const int rc = drain()) return rc;
        if (!peers_alive() && is_gone(q)) return fail(ESRCH, "process %d (pid %d) exited during start-up", q.rank, q.pid);
        if (deadline >= 0 && now_ns() > deadline)
            return fail(ETIMEDOUT, "start-up: %s process %d (pid %d) failed until the deadline: %s", what, q.rank, q.pid,
                        strerror(e));
        usleep(200);
        return 0;
    };
    int s = -1;
    for (;;) {
        s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0) return fail(errno, "socket: %s", strerror(errno));
        if (connect(s, reinterpret_cast<sockaddr*>(&a), alen) == 0) break;
        const int e = errno;
        close(s);
        // It listens before the allgather that told us of it: a refusal means it is gone;
        // EAGAIN, that its backlog is full.
        if (e != ECONNREFUSED && e != EAGAIN && e != ENOENT)
            return fail(e, "cannot reach process %d (pid %d): %s", q.rank, q.pid, strerror(e));
        if (const int rc = again("connecting to", e)) return rc;
    }
    ucred c{};
    if (!credentials(s, &c) || c.pid != q.pid || c.uid != geteuid()) {
        close(s);
        return fail(EACCES,
                    "the start-up socket of process %d is held by pid %d (user %u), not by pid %d of this job and user "
                    "%u: this process's memory is not handed to it",
                    q.rank, static_cast<int>(c.pid), c.uid, q.pid, geteuid());
    }
    Hello h{kHelloMagic, kCtlVersion, static_cast<uint32_t>(S.rank), {}, S.heap_size, S.layout.size, S.data_lo,
            S.data_hi, S.data_fd >= 0 ? 2u : 1u, 0};
    memcpy(h.key, S.key, sizeof h.key);
    int fds[2] = {S.heap_fd, S.data_fd};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof fds)] = {};
    iovec iov{&h, sizeof h};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * h.nfds);
    cmsghdr* cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * h.nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * h.nfds);
    for (;;) {
        const ssize_t w = sendmsg(s, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w == static_cast<ssize_t>(sizeof h)) break;
        const int e = w < 0 ? errno : EIO;
        if (e != EAGAIN && e != ETOOMANYREFS && e != EINTR) {
            close(s);
            return fail(e, "cannot send process %d the memfds: %s", q.rank, strerror(e));
        }
        if (const int rc = again("sending the memfds to", e)) {
            close(s);
            return rc;
        }
    }
    close(s);
    return 0;
}

// Takes the datagram of an accepted connection. Returns 1 when it came from a peer of
// this job that had not sent yet (mapped now), 0 when it is refused (why: *refusal), 2
// when it has not arrived yet (the peer connected and has yet to send), or a negative
// error that ends start-up.
constexpr int kNotYet = 2;
int take_one(int s, std::vector<bool>& got, char* refusal, size_t cap) {
    ucred c{};
    if (!credentials(s, &c)) return snprintf(refusal, cap, "a connection without credentials"), 0;
    Peer* from = nullptr;
    for (Peer& p : S.peers)
        if (p.pid == c.pid && p.rank != S.rank) from = &p;
    if (!from || c.uid != geteuid()) {
        snprintf(refusal, cap, "pid %d (user %u) is not a process of this job on this host", static_cast<int>(c.pid), c.uid);
        return 0;
    }
    Hello h{};
    int fds[2] = {-1, -1};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof fds)] = {};
    iovec iov{&h, sizeof h};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf;
    m.msg_controllen = sizeof cbuf;
    const ssize_t r = recvmsg(s, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return kNotYet;
    size_t nfds = 0;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            if (nfds > 2) nfds = 2;
            memcpy(fds, CMSG_DATA(cm), nfds * sizeof(int));
        }
    auto refuse = [&](const char* why) {
        for (int fd : fds)
            if (fd >= 0) close(fd);
        snprintf(refusal, cap, "process %d (pid %d): %s", from->rank, from->pid, why);
        return 0;
    };
    const Info& in = S.infos[static_cast<size_t>(from->rank)];
    if (r != static_cast<ssize_t>(sizeof h) || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) return refuse("a malformed message");
    if (h.magic != kHelloMagic || h.version != kCtlVersion || h.rank != static_cast<uint32_t>(from->rank))
        return refuse("a message of another version or rank");
    if (memcmp(h.key, S.key, sizeof h.key) != 0) return refuse("the wrong job key (another job)");
    if (h.heap_size != in.heap_size || h.ctl_size != S.layout.size || h.data_lo != in.data_lo || h.data_hi != in.data_hi ||
        h.nfds != nfds || nfds != (in.data_hi > in.data_lo ? 2u : 1u))
        return refuse("segments other than it announced");
    if (got[static_cast<size_t>(S.local_of[static_cast<size_t>(from->rank)])]) return refuse("a second message");
    // The descriptors must be what they claim: memfds of the announced sizes, sealed
    // against resizing (so no one can shrink them under us later).
    for (size_t i = 0; i < nfds; i++) {
        struct stat st {};
        const uint64_t want = i == 0 ? h.heap_size + h.ctl_size : h.data_hi - h.data_lo;
        const int seals = fcntl(fds[i], F_GET_SEALS);
        if (fstat(fds[i], &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != want || seals < 0 ||
            !(seals & F_SEAL_SHRINK))
            return refuse("a descriptor that is not its sealed memfd");
    }
    const int rc = map_peer(*from, fds[0], fds[1], in);
    for (int fd : fds)
        if (fd >= 0) close(fd);
    if (rc) return rc;
    got[static_cast<size_t>(S.local_of[static_cast<size_t>(from->rank)])] = true;
    return 1;
}

}  // namespace

void handoff_close() {
    if (g_listener >= 0) close(g_listener);
    g_listener = -1;
}

int handoff_listen() {
    handoff_close();
    if (getrandom(&S.sock_nonce, sizeof S.sock_nonce, 0) != sizeof S.sock_nonce) return fail(EIO, "getrandom failed");
    g_listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (g_listener < 0) return fail(errno, "socket: %s", strerror(errno));
    sockaddr_un a;
    const socklen_t alen = address_of(getpid(), S.sock_nonce, &a);
    if (bind(g_listener, reinterpret_cast<sockaddr*>(&a), alen) != 0 || listen(g_listener, 4096) != 0) {
        const int e = errno;
        close(g_listener);
        g_listener = -1;
        return fail(e, "cannot listen on the start-up socket @%s: %s", a.sun_path + 1, strerror(e));
    }
    return 0;
}

int handoff(int timeout_ms) {
    const int64_t deadline = timeout_ms < 0 ? -1 : now_ns() + int64_t(timeout_ms) * 1000000;
    // Descriptors in flight count against the sender's soft RLIMIT_NOFILE (over all of
    // the user's processes): the hard limit for the exchange, the old one after.
    rlimit old{}, raised{};
    const bool lowered = getrlimit(RLIMIT_NOFILE, &old) == 0 && old.rlim_cur < old.rlim_max;
    if (lowered) {
        raised = rlimit{old.rlim_max, old.rlim_max};
        setrlimit(RLIMIT_NOFILE, &raised);
    }
    std::vector<bool> got(S.peers.size(), false);
    got[static_cast<size_t>(S.my_local)] = true;
    size_t missing = S.peers.size() - 1;
    char refusal[256] = "";
    // Takes every datagram that has arrived: on connections accepted earlier whose
    // sender had not sent yet, and on new ones. Never waits for one (a sender may itself
    // be waiting for descriptors in flight to be taken).
    std::vector<int> pending;
    auto drain = [&]() -> int {
        for (int s; (s = accept4(g_listener, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) pending.push_back(s);
        for (size_t i = 0; i < pending.size();) {
            const int r = take_one(pending[i], got, refusal, sizeof refusal);
            if (r == kNotYet) {
                i++;
                continue;
            }
            close(pending[i]);
            pending.erase(pending.begin() + static_cast<long>(i));
            if (r < 0) return r;
            missing -= static_cast<size_t>(r);
        }
        return 0;
    };
    int rc = 0;
    for (const Peer& q : S.peers)
        if (q.rank != S.rank && ((rc = send_to(q, deadline, drain)) || (rc = drain()))) break;
    // Ours are in the peers' sockets (or mapped there) now: no open descriptor of the
    // job's memory remains here. The mappings keep the memory.
    for (int* fd : {&S.heap_fd, &S.data_fd})
        if (*fd >= 0) close(*fd), *fd = -1;
    while (rc == 0 && missing > 0) {
        std::vector<pollfd> pf{pollfd{g_listener, POLLIN, 0}};
        for (int fd : pending) pf.push_back(pollfd{fd, POLLIN, 0});
        poll(pf.data(), pf.size(), 20);
        if ((rc = drain()) || missing == 0) break;
        peers_alive();
        for (size_t i = 0; i < got.size() && rc == 0; i++)
            if (!got[i] && is_gone(S.peers[i]))
                rc = fail(ESRCH, "process %d (pid %d) exited during start-up", S.peers[i].rank, S.peers[i].pid);
        if (rc == 0 && deadline >= 0 && now_ns() > deadline) {
            char who[128] = "";
            for (size_t i = 0, n = 0; i < got.size() && n < 8; i++)
                if (!got[i]) n++, snprintf(who + strlen(who), sizeof who - strlen(who), " %d", S.peers[i].rank);
            rc = fail(ETIMEDOUT, "start-up: no memfds from process(es)%s within %d ms%s%s", who, timeout_ms,
                      refusal[0] ? "; refused: " : "", refusal);
        }
    }
    for (int fd : pending) close(fd);
    if (lowered) setrlimit(RLIMIT_NOFILE, &old);
    handoff_close();
    return rc;
}

}  // namespace svshm
