// names.cc -- the name service: host names to NIC addresses.
//
// Sources, in order: the launcher's table ($SOFTVIA_JOB_DIR/names/<name>, one line of
// hex address bytes, written by softvia-run's bootstrap library), then a hosts file of
// "name hex-address" lines (VipNSInit's argument, else $SOFTVIA_HOSTS).
#include <dirent.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "internal.h"

using namespace softvia;
using namespace softvia::vipl;

namespace softvia::vipl {
bool parse_hex(const std::string& s, std::vector<uint8_t>* out) {
    out->clear();
    if (s.empty() || s.size() % 2 || s.size() > 2 * NICFW_MAX_ADDR) return false;
    for (size_t i = 0; i < s.size(); i += 2) {
        char b[3] = {s[i], s[i + 1], 0};
        char* end;
        long v = strtol(b, &end, 16);
        if (*end) return false;
        out->push_back(static_cast<uint8_t>(v));
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

bool read_job_name(const std::string& dir, const std::string& name, std::vector<uint8_t>* out) {
    std::ifstream f(dir + "/names/" + name);
    std::string line;
    return f && std::getline(f, line) && parse_hex(line, out);
}

VIP_RETURN load_hosts(vip_nic* nic, const char* path) {
    nic->hosts.clear();
    if (!path || !*path) return VIP_SUCCESS;
    std::ifstream f(path);
    if (!f) return VIP_ERROR_NAMESERVICE;
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        std::string name, hex;
        std::vector<uint8_t> a;
        if (!(ls >> name >> hex) || !parse_hex(hex, &a)) return VIP_ERROR_NAMESERVICE;
        nic->hosts.emplace_back(name, a);
    }
    return VIP_SUCCESS;
}
}  // namespace

VIPL_API VIP_RETURN VipNSInit(VIP_NIC_HANDLE nic, VIP_PVOID info) {
    if (!ok(nic)) return VIP_INVALID_PARAMETER;
    std::lock_guard<std::mutex> g(nic->ns_lock);
    const char* path = info ? static_cast<const char*>(info) : getenv("SOFTVIA_HOSTS");
    VIP_RETURN r = load_hosts(nic, path);
    nic->ns_up = r == VIP_SUCCESS;
    return r;
}

VIPL_API VIP_RETURN VipNSShutdown(VIP_NIC_HANDLE nic) {
    if (!ok(nic)) return VIP_INVALID_PARAMETER;
    std::lock_guard<std::mutex> g(nic->ns_lock);
    if (!nic->ns_up) return VIP_INVALID_STATE;
    nic->hosts.clear();
    nic->ns_up = false;
    return VIP_SUCCESS;
}

VIPL_API VIP_RETURN VipNSGetHostByName(VIP_NIC_HANDLE nic, VIP_CHAR* name, VIP_NET_ADDRESS* addr,
                                       VIP_ULONG index) {
    if (!ok(nic) || !name_ok(name) || !addr) return VIP_INVALID_PARAMETER;
    std::lock_guard<std::mutex> g(nic->ns_lock);
    if (!nic->ns_up) return VIP_INVALID_STATE;  // VipNSInit first
    // One NIC per name: NameIndex 0 is the only one there is.
    if (index != 0) return VIP_ERROR_NAMESERVICE;
    std::vector<uint8_t> a;
    const char* job = getenv("SOFTVIA_JOB_DIR");
    bool found = job && *job && read_job_name(job, name, &a);
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

VIPL_API VIP_RETURN VipNSGetHostByAddr(VIP_NIC_HANDLE nic, VIP_NET_ADDRESS* addr, VIP_CHAR* name,
                                       VIP_ULONG* len) {
    if (!ok(nic) || !addr || !name || !len || addr->HostAddressLen == 0 ||
        addr->HostAddressLen > NICFW_MAX_ADDR)
        return VIP_INVALID_PARAMETER;
    std::lock_guard<std::mutex> g(nic->ns_lock);
    if (!nic->ns_up) return VIP_INVALID_STATE;
    std::vector<uint8_t> want(addr->HostAddress, addr->HostAddress + addr->HostAddressLen);
    std::string found;
    const char* job = getenv("SOFTVIA_JOB_DIR");
    if (job && *job) {
        std::string dir = std::string(job) + "/names";
        if (DIR* d = opendir(dir.c_str())) {
            while (dirent* e = readdir(d)) {
                std::vector<uint8_t> a;
                if (e->d_name[0] != '.' && read_job_name(job, e->d_name, &a) && a == want) {
                    found = e->d_name;
                    break;
                }
            }
            closedir(d);
        }
    }
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
