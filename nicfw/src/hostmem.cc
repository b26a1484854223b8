// hostmem.cc -- the fault handler behind nicfw/hostmem.h, and the registration check.
#include "nicfw/hostmem.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

extern "C" char nicfw_hostmem_begin[];
extern "C" char nicfw_hostmem_end[];

namespace softvia::nicfw::hostmem {
namespace {

std::atomic<uint64_t> g_faults{0};
// What the handler hands a fault to when it is not the device's. Written only under
// g_install_lock before our handler goes in; read by the handler.
struct sigaction g_prev_segv {}, g_prev_bus{};
std::mutex g_install_lock;

void on_fault(int sig, siginfo_t* si, void* ctx) {
    auto* uc = static_cast<ucontext_t*>(ctx);
    greg_t* r = uc->uc_mcontext.gregs;
    const auto ip = static_cast<uintptr_t>(r[REG_RIP]);
    // A real fault (si_code > 0), not a signal someone sent, inside hostmem_x86_64.S.
    if (si->si_code > 0 && ip >= reinterpret_cast<uintptr_t>(nicfw_hostmem_begin) &&
        ip < reinterpret_cast<uintptr_t>(nicfw_hostmem_end)) {
        // A leaf of hostmem_x86_64.S faulted on host memory: return -EFAULT from it.
        r[REG_RAX] = -EFAULT;
        r[REG_RIP] = static_cast<greg_t>(*reinterpret_cast<const uint64_t*>(r[REG_RSP]));
        r[REG_RSP] += 8;
        g_faults.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    const struct sigaction& prev = sig == SIGBUS ? g_prev_bus : g_prev_segv;
    if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
        prev.sa_sigaction(sig, si, ctx);
        return;
    }
    if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
        prev.sa_handler(sig);
        return;
    }
    if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_IGN && si->si_code <= 0) return;  // sent, ignored
    // Not ours and nobody else's: the default action. A fault happens again when the
    // instruction restarts and the process dies of it as it would have without us; a
    // signal someone sent is raised again.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
    if (si->si_code <= 0) raise(sig);
}

bool is_ours(const struct sigaction& a) {
    return (a.sa_flags & SA_SIGINFO) && a.sa_sigaction == on_fault;
}

}  // namespace

void unblock_faults_here() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGSEGV);
    sigaddset(&s, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
}

// Once per process: a handler the program installs later and that chains back to ours
// must not find ours in front of it again (each would hand the other the fault).
void install() {
    std::lock_guard<std::mutex> g(g_install_lock);
    static bool installed = false;
    if (installed) return;
    installed = true;
    struct sigaction ours {};
    ours.sa_sigaction = on_fault;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    for (int sig : {SIGSEGV, SIGBUS}) {
        struct sigaction cur {};
        sigaction(sig, nullptr, &cur);
        if (is_ours(cur)) continue;
        (sig == SIGBUS ? g_prev_bus : g_prev_segv) = cur;
        sigaction(sig, &ours, nullptr);
    }
}

uint64_t faults() { return g_faults.load(std::memory_order_relaxed); }

namespace {

// The kernel's PROCMAP_QUERY ioctl on /proc/self/maps (Linux 6.11): the mapping that
// covers an address, without formatting the whole map as text. Layout and numbers are
// the kernel's ABI (include/uapi/linux/fs.h); Debian 12's headers predate it.
struct ProcmapQuery {
    uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kVmaReadable = 0x01, kVmaWritable = 0x02;

struct Span {
    uint64_t start, end;
    bool read, write;
};

// The mapping covering addr: 1 found, 0 none (a hole), -1 the ioctl is not there.
int query_ioctl(int fd, uint64_t addr, Span* out) {
    ProcmapQuery q{};
    q.size = sizeof q;
    q.query_addr = addr;
    if (ioctl(fd, kProcmapQuery, &q) != 0) return errno == ENOENT ? 0 : -1;
    *out = Span{q.vma_start, q.vma_end, (q.vma_flags & kVmaReadable) != 0, (q.vma_flags & kVmaWritable) != 0};
    return out->start <= addr && addr < out->end ? 1 : 0;
}

// The same from the text of /proc/self/maps (older kernels).
std::vector<Span> read_maps(int fd) {
    std::string text;
    char buf[16384];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        text.append(buf, static_cast<size_t>(n));
    }
    std::vector<Span> spans;
    size_t at = 0;
    while (at < text.size()) {
        size_t nl = text.find('\n', at);
        if (nl == std::string::npos) nl = text.size();
        uint64_t s, e;
        char perms[5] = {};
        if (sscanf(text.c_str() + at, "%" SCNx64 "-%" SCNx64 " %4s", &s, &e, perms) == 3)
            spans.push_back(Span{s, e, perms[0] == 'r', perms[1] == 'w'});
        at = nl + 1;
    }
    return spans;
}

}  // namespace

int check_access(uint64_t va, uint64_t len, bool write, std::string* why, bool text_maps) {
    const uint64_t end = va + len;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (why) *why = std::string("cannot read /proc/self/maps: ") + strerror(errno);
        return -EFAULT;
    }
    std::vector<Span> text;  // filled only if the ioctl is missing
    bool use_text = text_maps;
    if (use_text) text = read_maps(fd);
    uint64_t at = va;
    int rc = 0;
    char msg[160];
    while (at < end) {
        Span s{};
        int found;
        if (!use_text) {
            found = query_ioctl(fd, at, &s);
            if (found < 0) {
                use_text = true;
                text = read_maps(fd);
            }
        }
        if (use_text) {
            found = 0;
            for (const Span& t : text)
                if (t.start <= at && at < t.end) {
                    s = t;
                    found = 1;
                    break;
                }
        }
        const char* fault = !found ? "is not mapped" : !s.read ? "is not readable" : (write && !s.write) ? "is not writable" : nullptr;
        if (fault) {
            snprintf(msg, sizeof msg, "address 0x%" PRIx64 " %s", at, fault);
            rc = -EFAULT;
            break;
        }
        at = s.end;
    }
    close(fd);
    if (rc && why) *why = msg;
    return rc;
}

}  // namespace softvia::nicfw::hostmem
