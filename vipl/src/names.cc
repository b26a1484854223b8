// names.cc -- the name service: host names to NIC addresses.
//
// Sources, in order: the launcher's names (sv_boot_publish_name: softvia-run's job
// directory or PMIx, through boot/), then a hosts file of "name hex-address" lines
// (VipNSInit's argument, else $SOFTVIA_HOSTS).
#include <softvia_boot.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "internal.h"

using namespace softvia;
using namespace softvia::vipl;

namespace softvia::vipl {
bool parse_hex(const std::string& s, std::vector<uint8_t>* out) {
    out->clear();
    if (s.empty() || s.size() % 2 || s.size() > 2 * NICFW_MAX_ADDR) return false;
    for (size_t i = 0; i < s.size(); i += 2) {
        // Two hex digits exactly: strtol alone would take " f", "+f" or "-f".
        if (!isxdigit(static_cast<unsigned char>(s[i])) || !isxdigit(static_cast<unsigned char>(s[i + 1])))
            return false;
        char b[3] = {s[i], s[i + 1], 0};
        out->push_back(static_cast<uint8_t>(strtol(b, nullptr, 16)));
    }
    return true;
}
}  // namespace softvia::vipl

namespace {
bool name_ok(const char* n) {
    if (!n || !*n || strlen(n) > 255) return false;
    for (const char* p = n; *p; p++)
        if (*p == '/' || *p == ' ' || *p == '\n') return false;
    return strcmp(n, ".") && strcmp(n, "..");
}

// A hosts file problem: one line on stderr naming the file (and line), and the code.
VIP_RETURN ns_fail(const char* path, unsigned line, const char* why) {
    if (line) fprintf(stderr, "softvia: VipNSInit: hosts file '%s' line %u: %s\n", path, line, why);
    else fprintf(stderr, "softvia: VipNSInit: hosts file '%s': %s\n", path, why);
    return VIP_ERROR_NAMESERVICE;
}

const char* file_kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

// Reads a regular file of at most limit bytes into *out; false with the reason in *why.
// O_NONBLOCK: opening a FIFO does not wait for a writer (fstat then refuses it, like
// any other file that is not a regular one).
bool read_regular_file(const char* path, size_t limit, std::string* out, std::string* why) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = strerror(errno);
        return false;
    }
    struct stat st;
    bool ok = fstat(fd, &st) == 0;
    if (!ok) *why = strerror(errno);
    else if (!S_ISREG(st.st_mode)) {
        *why = std::string(file_kind(st.st_mode)) + ", not a regular file";
        ok = false;
    }
    // The size may change after fstat: read one byte more than the bound to know.
    size_t got = 0;
    if (ok) out->assign(limit + 1, '\0');
    while (ok && got < out->size()) {
        ssize_t n = read(fd, &(*out)[got], out->size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            *why = strerror(errno);
            ok = false;
        }
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
    close(fd);
    if (ok && got > limit) {
        *why = "larger than " + std::to_string(limit) + " bytes";
        ok = false;
    }
    if (ok) out->resize(got);
    return ok;
}

// The launcher's entry for name, or false.
bool launcher_name(const char* name, std::vector<uint8_t>* out) {
    out->resize(NICFW_MAX_ADDR);
    size_t len = 0;
    if (sv_boot_lookup_name(name, out->data(), out->size(), &len) != 0) return false;
    out->resize(len);
    return true;
}

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// "name hexaddress" with blanks around and between; empty and '#' lines are skipped.
VIP_RETURN load_hosts(NicObj* nic, const char* path) {
    nic->hosts.clear();
    if (!path || !*path) return VIP_SUCCESS;
    std::string text, why;
    if (!read_regular_file(path, VIP_EXT_HOSTS_FILE_MAX_BYTES, &text, &why)) return ns_fail(path, 0, why.c_str());
    std::vector<std::pair<std::string, std::vector<uint8_t>>> hosts;
    unsigned lineno = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t nl = text.find('\n', pos);
        size_t end = nl == std::string::npos ? text.size() : nl;
        lineno++;
        if (end - pos > VIP_EXT_HOSTS_LINE_MAX) {
            std::string why = "longer than " + std::to_string(VIP_EXT_HOSTS_LINE_MAX) + " bytes";
            return ns_fail(path, lineno, why.c_str());
        }
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        if (line.find('\0') != std::string::npos) return ns_fail(path, lineno, "contains a NUL byte");
        std::vector<std::string> fields;
        for (size_t i = 0; i < line.size();) {
            while (i < line.size() && blank(line[i])) i++;
            size_t j = i;
            while (j < line.size() && !blank(line[j])) j++;
            if (j > i) fields.push_back(line.substr(i, j - i));
            i = j;
        }
        if (fields.empty() || fields[0][0] == '#') continue;
        if (fields.size() != 2) return ns_fail(path, lineno, "not 'name hexaddress'");
        if (!name_ok(fields[0].c_str()))
            return ns_fail(path, lineno, "bad name (1 to 255 bytes, no '/', not '.' or '..')");
        std::vector<uint8_t> a;
        if (!parse_hex(fields[1], &a)) {
            std::string why = "bad address (an even number of hex digits, 1 to " + std::to_string(NICFW_MAX_ADDR) +
                              " bytes)";
            return ns_fail(path, lineno, why.c_str());
        }
        hosts.emplace_back(fields[0], a);
    }
    nic->hosts.swap(hosts);
    return VIP_SUCCESS;
}
}  // namespace

VIPL_API VIP_RETURN VipNSInit(VIP_NIC_HANDLE h, VIP_PVOID info) {
    NicObj* nic = nic_of(h);
    if (!nic) return VIP_INVALID_PARAMETER;
    std::lock_guard<std::mutex> g(nic->ns_lock);
    const char* path = info ? static_cast<const char*>(info) : getenv("SOFTVIA_HOSTS");
    VIP_RETURN r = load_hosts(nic, path);
    nic->ns_up = r == VIP_SUCCESS;
    return r;
}

VIPL_API VIP_RETURN VipNSShutdown(VIP_NIC_HANDLE h) {
    NicObj* nic = nic_of(h);
    if (!nic) return VIP_INVALID_PARAMETER;
    std::lock_guard<std::mutex> g(nic->ns_lock);
    if (!nic->ns_up) return VIP_INVALID_STATE;
    nic->hosts.clear();
    nic->ns_up = false;
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipNSGetHostByName(VIP_NIC_HANDLE h, VIP_CHAR* name, VIP_NET_ADDRESS* addr,
                                       VIP_ULONG index) {
    NicObj* nic = nic_of(h);
    if (!nic || !name_ok(name) || !addr) return VIP_INVALID_PARAMETER;
    std::lock_guard<std::mutex> g(nic->ns_lock);
    if (!nic->ns_up) return VIP_INVALID_STATE;  // VipNSInit first
    // One NIC per name: NameIndex 0 is the only one there is.
    if (index != 0) return VIP_ERROR_NAMESERVICE;
    std::vector<uint8_t> a;
    bool found = launcher_name(name, &a);
    for (size_t i = 0; !found && i < nic->hosts.size(); i++)
        if (nic->hosts[i].first == name) {
            a = nic->hosts[i].second;
            found = true;
        }
    if (!found) return VIP_ERROR_NAMESERVICE;
    addr->HostAddressLen = static_cast<VIP_UINT16>(a.size());
    addr->DiscriminatorLen = 0;
    memcpy(addr->HostAddress, a.data(), a.size());
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipNSGetHostByAddr(VIP_NIC_HANDLE h, VIP_NET_ADDRESS* addr, VIP_CHAR* name,
                                       VIP_ULONG* len) {
    NicObj* nic = nic_of(h);
    if (!nic || !addr || !name || !len || addr->HostAddressLen == 0 ||
        addr->HostAddressLen > NICFW_MAX_ADDR)
        return VIP_INVALID_PARAMETER;
    std::lock_guard<std::mutex> g(nic->ns_lock);
    if (!nic->ns_up) return VIP_INVALID_STATE;
    std::vector<uint8_t> want(addr->HostAddress, addr->HostAddress + addr->HostAddressLen);
    std::string found;
    char launcher[SV_BOOT_KEY_MAX + 1];
    if (sv_boot_lookup_addr(want.data(), want.size(), launcher, sizeof launcher) == 0) found = launcher;
    for (size_t i = 0; found.empty() && i < nic->hosts.size(); i++)
        if (nic->hosts[i].second == want) found = nic->hosts[i].first;
    if (found.empty()) return VIP_ERROR_NAMESERVICE;
    if (*len < found.size() + 1) {
        *len = found.size() + 1;  // tells the caller how much room it needs
        return VIP_ERROR_RESOURCE;
    }
    memcpy(name, found.c_str(), found.size() + 1);
    *len = found.size() + 1;
    return VIP_SUCCESS;
}
