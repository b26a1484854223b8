// softvia-nicinfo: list the softvia NICs open on this host, like ibv_devinfo, plus
// their counters.
//
// Every NIC publishes a status page: a memfd named "softvia-nic" laid out as a
// nicfw_status_page followed by max_vi nicfw_vi_status entries (nicfw/abi.h). We find
// those memfds through /proc/<pid>/fd, open them read-only through the same magic link
// and map them. The page is written by the NIC's firmware while we read it: counters
// may be a step apart from each other, which is fine for a status tool.
#include <nicfw/abi.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

constexpr const char* kProg = "softvia-nicinfo";
constexpr std::string_view kMemfdName = "/memfd:softvia-nic";
constexpr uint32_t kSlotUnused = 0xFFFFFFFFu;

struct Options {
    long pid = 0;  // 0: every process
    bool json = false;
    bool idle = false;
};

void usage(FILE* f) {
    fprintf(f,
            "usage: %s [--pid PID] [--json] [--idle] [-h]\n"
            "List the softvia NICs open on this host: device, transport, address, MTU,\n"
            "counters, and the VIs in use with their state and counters.\n"
            "\n"
            "  --pid PID  only the NICs of process PID\n"
            "  --json     machine-readable output on stdout ({\"nics\": [...]})\n"
            "  --idle     also list VIs with no traffic (by default VIs whose counters are\n"
            "             all zero are hidden; the number of open VIs is always shown)\n"
            "  -h, --help this text\n"
            "\n"
            "Processes whose file descriptors we may not read are skipped with a note on\n"
            "stderr. Exit status: 0 success (also when no NIC is open: \"no softvia NICs\n"
            "open\"), 1 --pid names no process, 2 bad usage.\n",
            kProg);
}

// ---------------------------------------------------------------- reading the page
// Relaxed atomic loads: one access per field, never torn on the 64-bit hosts we run
// on, and the compiler may not re-read or merge them.
template <class T>
T ld(const T* p) {
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

nicfw_counters load_counters(const nicfw_counters* c) {
    nicfw_counters r;
    r.tx_frames = ld(&c->tx_frames);
    r.tx_bytes = ld(&c->tx_bytes);
    r.rx_frames = ld(&c->rx_frames);
    r.rx_bytes = ld(&c->rx_bytes);
    r.sends_done = ld(&c->sends_done);
    r.recvs_done = ld(&c->recvs_done);
    r.drops = ld(&c->drops);
    r.errors = ld(&c->errors);
    r.retransmits = ld(&c->retransmits);
    return r;
}

bool all_zero(const nicfw_counters& c) {
    return (c.tx_frames | c.tx_bytes | c.rx_frames | c.rx_bytes | c.sends_done | c.recvs_done |
            c.drops | c.errors | c.retransmits) == 0;
}

// A fixed-size char field of the page as a string: stops at NUL or the field's end,
// replaces anything unprintable so the output (and the JSON) stays well formed.
std::string field_str(const char* f, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; i++) {
        char ch = ld(&f[i]);
        if (ch == '\0') break;
        s.push_back(ch >= 0x20 && ch < 0x7f ? ch : '?');
    }
    return s;
}

struct ViInfo {
    uint32_t index;
    uint32_t state;
    uint16_t reliability;
    uint16_t peer;
    uint32_t remote_vi;
    nicfw_counters c;
};

struct NicInfo {
    long pid;       // the process we found it in (our /proc's numbering)
    int fd;         // its descriptor number there
    uint32_t page_pid;  // what the page says (differs across PID namespaces, or after fork)
    std::string device, transport, progress, addr_hex;
    uint32_t mtu, max_vi, vi_hwm, peers;
    nicfw_counters nic;
    uint32_t vis_open = 0;
    std::vector<ViInfo> vis;  // every VI in use, shown or not
};

const char* state_name(uint32_t s) {
    switch (s) {
        case 0: return "IDLE";
        case 1: return "CONNECTED";
        case 2: return "CONNECT_PENDING";
        case 3: return "ERROR";
        default: return "UNKNOWN";
    }
}

const char* reliability_name(uint16_t r) {
    switch (r) {
        case 0x01: return "U";
        case 0x02: return "RD";
        case 0x04: return "RR";
        default: return "?";
    }
}

// Copies what we print out of a mapped page. len: bytes mapped (the memfd's size).
bool read_page(const void* base, size_t len, long pid, int fd, NicInfo* out, std::string* why) {
    auto* pg = static_cast<const nicfw_status_page*>(base);
    uint64_t magic = __atomic_load_n(&pg->magic, __ATOMIC_ACQUIRE);  // written last
    if (magic != NICFW_STATUS_MAGIC) {
        *why = magic == 0 ? "status page not initialised yet (NIC being opened)"
                          : "bad status page magic";
        return false;
    }
    uint32_t abi = ld(&pg->abi_version);
    if (abi != NICFW_ABI_VERSION) {
        *why = "status page ABI version " + std::to_string(abi) + ", this tool reads " +
               std::to_string(NICFW_ABI_VERSION);
        return false;
    }
    NicInfo n;
    n.pid = pid;
    n.fd = fd;
    n.page_pid = ld(&pg->pid);
    n.device = field_str(pg->device, sizeof pg->device);
    n.transport = field_str(pg->transport, sizeof pg->transport);
    n.progress = field_str(pg->progress, sizeof pg->progress);
    uint32_t alen = std::min<uint32_t>(ld(&pg->addr_len), NICFW_MAX_ADDR);
    n.addr_hex = "0x";
    for (uint32_t i = 0; i < alen; i++) {
        char b[3];
        snprintf(b, sizeof b, "%02x", ld(&pg->addr[i]));
        n.addr_hex += b;
    }
    n.mtu = ld(&pg->mtu);
    n.max_vi = ld(&pg->max_vi);
    n.vi_hwm = ld(&pg->vi_hwm);
    n.peers = ld(&pg->peers);
    n.nic = load_counters(&pg->nic);

    // Never read past what the memfd holds, whatever the header claims.
    size_t fit = (len - sizeof(nicfw_status_page)) / sizeof(nicfw_vi_status);
    uint32_t slots = std::min<uint32_t>(n.max_vi, static_cast<uint32_t>(std::min<size_t>(fit, UINT32_MAX)));
    uint32_t hwm = std::min(n.vi_hwm, slots);
    auto* vs = reinterpret_cast<const nicfw_vi_status*>(pg + 1);
    for (uint32_t i = 0; i < hwm; i++) {
        uint32_t st = ld(&vs[i].state);
        if (st == kSlotUnused) continue;
        ViInfo v;
        v.index = i;
        v.state = st;
        v.reliability = ld(&vs[i].reliability);
        v.peer = ld(&vs[i].peer);
        v.remote_vi = ld(&vs[i].remote_vi);
        v.c = load_counters(&vs[i].c);
        n.vis.push_back(v);
        n.vis_open++;
    }
    *out = std::move(n);
    return true;
}

// ---------------------------------------------------------------- scanning /proc
struct Scan {
    std::vector<NicInfo> nics;
    std::set<std::pair<dev_t, ino_t>> seen;  // one page may be reachable from several fds
    long unreadable = 0;                     // processes whose fd table we may not list
};

bool is_status_memfd(const char* link, ssize_t n) {
    std::string_view s(link, static_cast<size_t>(n));
    if (s.substr(0, kMemfdName.size()) != kMemfdName) return false;
    std::string_view rest = s.substr(kMemfdName.size());
    return rest.empty() || rest == " (deleted)";
}

void note(long pid, int fd, const char* what, const std::string& why) {
    if (fd >= 0)
        fprintf(stderr, "%s: pid %ld fd %d: %s: %s (skipped)\n", kProg, pid, fd, what, why.c_str());
    else
        fprintf(stderr, "%s: pid %ld: %s: %s (skipped)\n", kProg, pid, what, why.c_str());
}

void scan_fd(Scan* sc, long pid, int fdnum) {
    char path[64], link[256];
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, fdnum);
    ssize_t n = readlink(path, link, sizeof link);
    if (n <= 0 || n >= static_cast<ssize_t>(sizeof link)) return;  // gone, or not ours
    if (!is_status_memfd(link, n)) return;

    // The descriptor may be closed and its number reused between readlink and open:
    // O_NONBLOCK keeps a FIFO from blocking us, and we check what we got below.
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno != ENOENT) note(pid, fdnum, "cannot open status page", strerror(errno));
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return;
    }
    if (static_cast<size_t>(st.st_size) < sizeof(nicfw_status_page)) {
        note(pid, fdnum, "status page", "too small (" + std::to_string(st.st_size) + " bytes)");
        close(fd);
        return;
    }
    if (!sc->seen.insert({st.st_dev, st.st_ino}).second) {  // already listed
        close(fd);
        return;
    }
    size_t len = static_cast<size_t>(st.st_size);
    void* p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        note(pid, fdnum, "cannot map status page", strerror(errno));
        return;
    }
    NicInfo ni;
    std::string why;
    if (read_page(p, len, pid, fdnum, &ni, &why))
        sc->nics.push_back(std::move(ni));
    else
        note(pid, fdnum, "status page", why);
    munmap(p, len);
}

// Returns false if the process does not exist.
bool scan_pid(Scan* sc, long pid, bool explicit_pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/fd", pid);
    DIR* d = opendir(path);
    if (!d) {
        if (errno == ENOENT || errno == ESRCH) return false;  // gone (or a thread id)
        if (explicit_pid)
            note(pid, -1, "cannot read its file descriptors", strerror(errno));
        else
            sc->unreadable++;
        return true;
    }
    std::vector<int> fds;
    while (dirent* e = readdir(d)) {
        char* end;
        long v = strtol(e->d_name, &end, 10);
        if (*e->d_name && *end == '\0' && v >= 0 && v <= INT32_MAX) fds.push_back(static_cast<int>(v));
    }
    closedir(d);
    std::sort(fds.begin(), fds.end());
    for (int f : fds) scan_fd(sc, pid, f);
    return true;
}

bool parse_pid(const char* s, long* out) {
    if (!s || !*s) return false;
    char* end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v <= 0 || v > INT32_MAX) return false;
    *out = v;
    return true;
}

// ---------------------------------------------------------------- output
bool shown(const ViInfo& v, const Options& o) { return o.idle || !all_zero(v.c); }

// Generation 0 is never used, so 0 means "no remote VI yet"; so does 0xFFFFFFFF.
bool has_remote(uint32_t r) { return r != 0 && r != kSlotUnused; }

std::string remote_str(uint32_t r) {
    if (!has_remote(r)) return "-";
    char b[48];
    snprintf(b, sizeof b, "%u (gen %u)", NICFW_VI_INDEX(r), NICFW_VI_GEN(r));
    return b;
}

void print_text_counters(const nicfw_counters& c, const char* indent) {
    printf("%stx_frames %" PRIu64 "  tx_bytes %" PRIu64 "  rx_frames %" PRIu64 "  rx_bytes %" PRIu64 "\n",
           indent, c.tx_frames, c.tx_bytes, c.rx_frames, c.rx_bytes);
    printf("%ssends_done %" PRIu64 "  recvs_done %" PRIu64 "  drops %" PRIu64 "  errors %" PRIu64
           "  retransmits %" PRIu64 "\n",
           indent, c.sends_done, c.recvs_done, c.drops, c.errors, c.retransmits);
}

void print_text(const std::vector<NicInfo>& nics, const Options& o) {
    bool first = true;
    for (const NicInfo& n : nics) {
        if (!first) printf("\n");
        first = false;
        printf("pid %ld", n.pid);
        if (n.page_pid != static_cast<uint32_t>(n.pid)) printf(" (page pid %u)", n.page_pid);
        printf(", fd %d\n", n.fd);
        printf("\tdevice:\t\t%s\n", n.device.c_str());
        printf("\ttransport:\t%s\n", n.transport.c_str());
        printf("\tprogress:\t%s\n", n.progress.c_str());
        printf("\taddress:\t%s\n", n.addr_hex.c_str());
        printf("\tmtu:\t\t%u\n", n.mtu);
        printf("\tmax_vi:\t\t%u\n", n.max_vi);
        printf("\tpeers:\t\t%u\n", n.peers);
        size_t hidden = 0;
        for (const ViInfo& v : n.vis) hidden += !shown(v, o);
        printf("\tvis_open:\t%u", n.vis_open);
        if (hidden) printf(" (%zu without traffic not shown, --idle lists them)", hidden);
        printf("\n\tcounters:\n");
        print_text_counters(n.nic, "\t\t");
        for (const ViInfo& v : n.vis) {
            if (!shown(v, o)) continue;
            printf("\tvi %u:\t\t%s", v.index, state_name(v.state));
            if (v.state > 3) printf("(%u)", v.state);
            printf("  %s", reliability_name(v.reliability));
            if (!strcmp(reliability_name(v.reliability), "?")) printf("(%u)", v.reliability);
            printf("  remote_vi %s", remote_str(v.remote_vi).c_str());
            if (has_remote(v.remote_vi)) printf("  peer %u", v.peer);
            printf("\n");
            print_text_counters(v.c, "\t\t\t");
        }
    }
}

std::string json_str(const std::string& s) {  // field_str already removed control chars
    std::string r = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') r.push_back('\\');
        r.push_back(ch);
    }
    return r + "\"";
}

std::string json_counters(const nicfw_counters& c) {
    char b[512];
    snprintf(b, sizeof b,
             "{\"tx_frames\": %" PRIu64 ", \"tx_bytes\": %" PRIu64 ", \"rx_frames\": %" PRIu64
             ", \"rx_bytes\": %" PRIu64 ", \"sends_done\": %" PRIu64 ", \"recvs_done\": %" PRIu64
             ", \"drops\": %" PRIu64 ", \"errors\": %" PRIu64 ", \"retransmits\": %" PRIu64 "}",
             c.tx_frames, c.tx_bytes, c.rx_frames, c.rx_bytes, c.sends_done, c.recvs_done, c.drops,
             c.errors, c.retransmits);
    return b;
}

// One NIC field per line and one VI per line, so line tools can read it too.
void print_json(const std::vector<NicInfo>& nics, const Options& o) {
    printf("{\"nics\": [");
    for (size_t i = 0; i < nics.size(); i++) {
        const NicInfo& n = nics[i];
        printf("%s\n  {\n", i ? "," : "");
        printf("    \"pid\": %ld,\n", n.pid);
        printf("    \"page_pid\": %u,\n", n.page_pid);
        printf("    \"fd\": %d,\n", n.fd);
        printf("    \"device\": %s,\n", json_str(n.device).c_str());
        printf("    \"transport\": %s,\n", json_str(n.transport).c_str());
        printf("    \"progress\": %s,\n", json_str(n.progress).c_str());
        printf("    \"address\": %s,\n", json_str(n.addr_hex).c_str());
        printf("    \"mtu\": %u,\n", n.mtu);
        printf("    \"max_vi\": %u,\n", n.max_vi);
        printf("    \"vi_hwm\": %u,\n", n.vi_hwm);
        printf("    \"peers\": %u,\n", n.peers);
        printf("    \"vis_open\": %u,\n", n.vis_open);
        printf("    \"counters\": %s,\n", json_counters(n.nic).c_str());
        printf("    \"vis\": [");
        bool first = true;
        for (const ViInfo& v : n.vis) {
            if (!shown(v, o)) continue;
            // remote_vi is the peer's wire id (index + generation); null before any.
            std::string remote = "null", remote_index = "null";
            if (has_remote(v.remote_vi)) {
                remote = std::to_string(v.remote_vi);
                remote_index = std::to_string(NICFW_VI_INDEX(v.remote_vi));
            }
            printf("%s\n      {\"index\": %u, \"state\": \"%s\", \"state_value\": %u, "
                   "\"reliability\": \"%s\", \"reliability_value\": %u, \"remote_vi\": %s, "
                   "\"remote_vi_index\": %s, \"peer\": %u, \"counters\": %s}",
                   first ? "" : ",", v.index, state_name(v.state), v.state,
                   reliability_name(v.reliability), v.reliability, remote.c_str(),
                   remote_index.c_str(), v.peer, json_counters(v.c).c_str());
            first = false;
        }
        printf("%s]\n  }", first ? "" : "\n    ");
    }
    printf("%s]}\n", nics.empty() ? "" : "\n");
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string_view a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else if (a == "--json") {
            o.json = true;
        } else if (a == "--idle") {
            o.idle = true;
        } else if (a == "--pid" || a.substr(0, 6) == "--pid=") {
            const char* v = a == "--pid" ? (i + 1 < argc ? argv[++i] : nullptr) : argv[i] + 6;
            if (!parse_pid(v, &o.pid)) {
                fprintf(stderr, "%s: --pid needs a process id, got '%s'\n", kProg, v ? v : "");
                usage(stderr);
                return 2;
            }
        } else {
            fprintf(stderr, "%s: unknown argument '%s'\n", kProg, argv[i]);
            usage(stderr);
            return 2;
        }
    }

    Scan sc;
    if (o.pid) {
        if (!scan_pid(&sc, o.pid, true)) {
            fprintf(stderr, "%s: pid %ld: no such process\n", kProg, o.pid);
            return 1;
        }
    } else {
        DIR* d = opendir("/proc");
        if (!d) {
            fprintf(stderr, "%s: /proc: %s\n", kProg, strerror(errno));
            return 1;
        }
        std::vector<long> pids;
        long self = getpid();
        while (dirent* e = readdir(d)) {
            long pid;
            if (parse_pid(e->d_name, &pid) && pid != self) pids.push_back(pid);
        }
        closedir(d);
        std::sort(pids.begin(), pids.end());
        for (long pid : pids) scan_pid(&sc, pid, false);
        if (sc.unreadable)
            fprintf(stderr,
                    "%s: note: skipped %ld process%s whose file descriptors we may not read "
                    "(other users'?)\n",
                    kProg, sc.unreadable, sc.unreadable == 1 ? "" : "es");
    }

    if (o.json) {
        print_json(sc.nics, o);
        if (sc.nics.empty()) fprintf(stderr, "no softvia NICs open\n");
    } else if (sc.nics.empty()) {
        printf("no softvia NICs open\n");
    } else {
        print_text(sc.nics, o);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) return 1;
    return 0;
}
