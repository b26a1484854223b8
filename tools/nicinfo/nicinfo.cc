// softvia-nicinfo: list the softvia NICs open on this host, like ibv_devinfo, plus
// their counters.
//
// Every NIC publishes a status page: a memfd named "softvia-nic" (mode 0600, sealed
// against shrinking and growing) laid out as a nicfw_status_page followed by max_vi
// nicfw_vi_status entries (nicfw/abi.h). We find those memfds through /proc/<pid>/fd,
// open them read-only through the same magic link and copy them out with pread. Any
// process can keep a file of that name, so nothing in it is trusted: we read only
// sealed memfds (never a mapping: a file that shrinks under a mapping is SIGBUS), and
// check every field against the page's size before printing it. The page is written
// by the NIC's firmware while we read it: counters may be a step apart from each
// other, which is fine for a status tool.
#include <nicfw/abi.h>

#include <dirent.h>
#include <fcntl.h>  // F_GET_SEALS (glibc 2.27+)
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
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
            "Whose NICs: a user's own processes only; root, every process (the owner's uid\n"
            "is shown). A status page is read only if it is a memfd sealed against\n"
            "shrinking, as softvia's NICs make them; it is copied out (never mapped) and\n"
            "every field is checked against its size, so a page another process fakes or\n"
            "changes under us is skipped with a note on stderr, never trusted. Processes\n"
            "whose file descriptors we may not read are skipped with a note on stderr.\n"
            "Exit status: 0 success (also when no NIC is open: \"no softvia NICs open\"),\n"
            "1 --pid names no process, 2 bad usage.\n",
            kProg);
}

// ---------------------------------------------------------------- reading the page
// The page is copied out with pread (a file that shrinks under a read gives a short
// read, never SIGBUS); fields are then read from that private copy only.

bool all_zero(const nicfw_counters& c) {
    return (c.tx_frames | c.tx_bytes | c.rx_frames | c.rx_bytes | c.sends_done | c.recvs_done |
            c.drops | c.errors | c.retransmits) == 0;
}

// A NUL-terminated char field of the page as a string; unprintable characters are
// replaced so the output (and the JSON) stays well formed. False: no NUL in the field.
bool field_str(const char* f, size_t n, std::string* out) {
    const char* end = static_cast<const char*>(memchr(f, '\0', n));
    if (!end) return false;
    out->clear();
    for (const char* p = f; p < end; p++) out->push_back(*p >= 0x20 && *p < 0x7f ? *p : '?');
    return true;
}

struct ViInfo {
    uint32_t index;
    uint32_t state;
    uint16_t reliability;
    uint16_t peer;
    uint32_t remote_vi;
    nicfw_counters c;
};

struct OffloadInfo {
    std::string name;
    std::vector<std::pair<std::string, uint64_t>> counters;  // the named ones
};

struct NicInfo {
    long pid;       // the process we found it in (our /proc's numbering)
    uid_t uid;      // that process's owner
    int fd;         // its descriptor number there
    uint32_t page_pid;  // what the page says (differs across PID namespaces, or after fork)
    std::string device, transport, progress, addr_hex;
    uint32_t mtu, max_vi, vi_hwm, peers;
    nicfw_counters nic;
    std::vector<OffloadInfo> offloads;
    uint32_t vis_open = 0;
    std::vector<ViInfo> vis;  // every VI in use, shown or not
};

const char* state_name(uint32_t s) { return nicfw_vi_state_name(s); }

const char* reliability_name(uint16_t r) {
    switch (r) {
        case 0x01: return "U";
        case 0x02: return "RD";
        case 0x04: return "RR";
        default: return "?";
    }
}

// Biggest page we read: a header and 65536 VI slots (a NIC has NICFW_MAX_VI today).
constexpr size_t kMaxPageBytes = sizeof(nicfw_status_page) + 65536 * sizeof(nicfw_vi_status);

// Checks every field of a page copy (buf, len bytes) before using it, and copies what
// we print. Nothing in the page is trusted: it may be anyone's file.
bool read_page(const unsigned char* buf, size_t len, long pid, uid_t uid, int fd, NicInfo* out,
               std::string* why) {
    nicfw_status_page pg;
    if (len < sizeof pg) {
        *why = "too small for a status page (" + std::to_string(len) + " bytes)";
        return false;
    }
    memcpy(&pg, buf, sizeof pg);
    if (pg.magic != NICFW_STATUS_MAGIC) {
        *why = pg.magic == 0                      ? "status page not initialised yet (NIC being opened)"
               : pg.magic == NICFW_STATUS_MAGIC_V1 ? "status page of an older softvia (layout 1), not read"
                                                   : "bad status page magic";
        return false;
    }
    if (pg.abi_version != NICFW_ABI_VERSION) {
        *why = "status page ABI version " + std::to_string(pg.abi_version) + ", this tool reads " +
               std::to_string(NICFW_ABI_VERSION);
        return false;
    }
    // The page is exactly a header and max_vi slots: the size the NIC made it.
    uint64_t want = sizeof pg + uint64_t{pg.max_vi} * sizeof(nicfw_vi_status);
    if (pg.max_vi == 0 || want != len) {
        *why = "max_vi " + std::to_string(pg.max_vi) + " does not match the page size (" +
               std::to_string(len) + " bytes)";
        return false;
    }
    if (pg.vi_hwm > pg.max_vi) {
        *why = "vi_hwm " + std::to_string(pg.vi_hwm) + " beyond max_vi " + std::to_string(pg.max_vi);
        return false;
    }
    if (pg.addr_len > NICFW_MAX_ADDR) {
        *why = "address length " + std::to_string(pg.addr_len) + " beyond " +
               std::to_string(NICFW_MAX_ADDR);
        return false;
    }
    NicInfo n;
    if (!field_str(pg.device, sizeof pg.device, &n.device) ||
        !field_str(pg.transport, sizeof pg.transport, &n.transport) ||
        !field_str(pg.progress, sizeof pg.progress, &n.progress)) {
        *why = "a name field (device, transport, progress) is not terminated";
        return false;
    }
    n.pid = pid;
    n.uid = uid;
    n.fd = fd;
    n.page_pid = pg.pid;
    n.addr_hex = "0x";
    for (uint32_t i = 0; i < pg.addr_len; i++) {
        char b[3];
        snprintf(b, sizeof b, "%02x", pg.addr[i]);
        n.addr_hex += b;
    }
    n.mtu = pg.mtu;
    n.max_vi = pg.max_vi;
    n.vi_hwm = pg.vi_hwm;
    n.peers = pg.peers;
    n.nic = pg.nic;
    if (pg.offloads > NICFW_STATUS_OFFLOADS) {
        *why = "offloads " + std::to_string(pg.offloads) + " beyond " + std::to_string(NICFW_STATUS_OFFLOADS);
        return false;
    }
    for (uint32_t k = 0; k < pg.offloads; k++) {
        const nicfw_offload_status& line = pg.offload[k];
        OffloadInfo o;
        bool ok = field_str(line.name, sizeof line.name, &o.name);
        for (uint32_t c = 0; ok && c < NICFW_STATUS_OFFLOAD_COUNTERS; c++) {
            std::string cname;
            ok = field_str(line.counter_names[c], sizeof line.counter_names[c], &cname);
            if (ok && !cname.empty()) o.counters.emplace_back(cname, line.counter[c]);
        }
        if (!ok) {
            *why = "a name field of offload line " + std::to_string(k) + " is not terminated";
            return false;
        }
        n.offloads.push_back(std::move(o));
    }
    for (uint32_t i = 0; i < pg.vi_hwm; i++) {  // vi_hwm <= max_vi: within len
        nicfw_vi_status vs;
        memcpy(&vs, buf + sizeof pg + size_t{i} * sizeof vs, sizeof vs);
        if (vs.state == kSlotUnused) continue;
        ViInfo v;
        v.index = i;
        v.state = vs.state;
        v.reliability = vs.reliability;
        v.peer = vs.peer;
        v.remote_vi = vs.remote_vi;
        v.c = vs.c;
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
    long others = 0;                         // other users' processes, not searched
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

struct Fd {  // closes on every return path
    int fd;
    explicit Fd(int f) : fd(f) {}
    ~Fd() {
        if (fd >= 0) close(fd);
    }
};

// Reads the whole file at fd into buf; false if it does not hold len bytes.
bool pread_all(int fd, unsigned char* buf, size_t len, off_t off) {
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, off + static_cast<off_t>(got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        got += static_cast<size_t>(r);
    }
    return true;
}

void scan_fd(Scan* sc, long pid, uid_t uid, int fdnum) {
    char path[64], link[256];
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, fdnum);
    ssize_t n = readlink(path, link, sizeof link);
    if (n <= 0 || n >= static_cast<ssize_t>(sizeof link)) return;  // gone, or not ours
    if (!is_status_memfd(link, n)) return;

    // The descriptor may be closed and its number reused between readlink and open. An
    // O_PATH open has no side effects (no FIFO or device is opened), and lets us check
    // that it is still a memfd (a regular file on the kernel's tmpfs) before opening it
    // for reading through our own descriptor.
    Fd pfd(open(path, O_PATH | O_CLOEXEC));
    if (pfd.fd < 0) {
        if (errno != ENOENT) note(pid, fdnum, "cannot open status page", strerror(errno));
        return;
    }
    struct stat st;
    struct statfs sfs;
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", pfd.fd);
    n = readlink(self, link, sizeof link);
    if (fstat(pfd.fd, &st) != 0 || !S_ISREG(st.st_mode) || fstatfs(pfd.fd, &sfs) != 0 ||
        (sfs.f_type != TMPFS_MAGIC && sfs.f_type != HUGETLBFS_MAGIC) || n <= 0 ||
        n >= static_cast<ssize_t>(sizeof link) || !is_status_memfd(link, n))
        return;  // replaced by something else since the readlink
    Fd fd(open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    if (fd.fd < 0) {
        note(pid, fdnum, "cannot open status page", strerror(errno));
        return;
    }
    // Sealed against shrinking: nobody can take bytes away while we read (softvia's
    // NICs seal their pages; a page that is not sealed is not one of theirs).
    int seals = fcntl(fd.fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
        note(pid, fdnum, "status page", "not sealed against shrinking");
        return;
    }
    if (fstat(fd.fd, &st) != 0) return;
    if (!sc->seen.insert({st.st_dev, st.st_ino}).second) return;  // already listed
    size_t len = static_cast<size_t>(st.st_size);
    if (st.st_size < static_cast<off_t>(sizeof(nicfw_status_page)) || len > kMaxPageBytes) {
        note(pid, fdnum, "status page", "size " + std::to_string(st.st_size) + " bytes is not a status page's");
        return;
    }
    // The magic first, in a read of its own: the NIC stores it last (release), so a
    // valid magic means the header was complete before the second read began.
    std::vector<unsigned char> buf(len);
    errno = 0;
    if (!pread_all(fd.fd, buf.data(), sizeof(uint64_t), 0) ||
        !pread_all(fd.fd, buf.data() + sizeof(uint64_t), len - sizeof(uint64_t), sizeof(uint64_t))) {
        note(pid, fdnum, "cannot read status page", errno ? strerror(errno) : "short read");
        return;
    }
    NicInfo ni;
    std::string why;
    if (read_page(buf.data(), len, pid, uid, fdnum, &ni, &why))
        sc->nics.push_back(std::move(ni));
    else
        note(pid, fdnum, "status page", why);
}

// Returns false if the process does not exist.
bool scan_pid(Scan* sc, long pid, bool explicit_pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld", pid);
    struct stat st;
    if (stat(path, &st) != 0) return false;  // gone
    // Only the calling user's processes, unless we are root (see usage()).
    uid_t me = geteuid();
    if (me != 0 && st.st_uid != me) {
        if (explicit_pid)
            note(pid, -1, "another user's process",
                 "owned by uid " + std::to_string(st.st_uid) + "; only root reads other users' NICs");
        else
            sc->others++;
        return true;
    }
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
    for (int f : fds) scan_fd(sc, pid, st.st_uid, f);
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
        printf(", fd %d, uid %u\n", n.fd, static_cast<unsigned>(n.uid));
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
        for (const OffloadInfo& ol : n.offloads) {
            printf("\toffload %s:", ol.name.c_str());
            for (const auto& [name, v] : ol.counters) printf("  %s %" PRIu64, name.c_str(), v);
            if (ol.counters.empty()) printf("  (no counters)");
            printf("\n");
        }
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
        printf("    \"uid\": %u,\n", static_cast<unsigned>(n.uid));
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
        printf("    \"offloads\": {");
        for (size_t k = 0; k < n.offloads.size(); k++) {
            const OffloadInfo& ol = n.offloads[k];
            printf("%s%s: {", k ? ", " : "", json_str(ol.name).c_str());
            for (size_t c = 0; c < ol.counters.size(); c++)
                printf("%s%s: %" PRIu64, c ? ", " : "", json_str(ol.counters[c].first).c_str(),
                       ol.counters[c].second);
            printf("}");
        }
        printf("},\n");
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
        if (sc.others)
            fprintf(stderr,
                    "%s: note: searched only this user's processes (%ld of other users "
                    "skipped; root sees all)\n",
                    kProg, sc.others);
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
