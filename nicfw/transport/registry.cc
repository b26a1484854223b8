// registry.cc -- device names to transports.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nicfw/device.h"
#include "fault/fault_transport.h"
#include "local/local_shortcut.h"
#include "shm/shm_transport.h"
#ifdef SOFTVIA_WITH_VERBS
#include "verbs/verbs_transport.h"
#endif
#ifdef SOFTVIA_WITH_DPDK
#include "dpdk/dpdk_transport.h"
#endif
#ifdef SOFTVIA_WITH_UDP
#include "udp/udp_transport.h"
#endif

namespace softvia::nicfw {

const char* DeviceSpec::get(const char* key) const {
    for (const auto& [k, v] : opts)
        if (k == key) return v.c_str();
    return nullptr;
}

int parse_device_name(const std::string& name, DeviceSpec* out, std::string* why) {
    DeviceSpec s;
    size_t colon = name.find(':');
    s.kind = name.substr(0, colon);
    if (s.kind.empty()) {
        *why = "empty device kind";
        return -EINVAL;
    }
    if (colon != std::string::npos) {
        std::string rest = name.substr(colon + 1);
        size_t pos = 0;
        while (pos <= rest.size()) {
            size_t end = rest.find(',', pos);
            if (end == std::string::npos) end = rest.size();
            std::string kv = rest.substr(pos, end - pos);
            size_t eq = kv.find('=');
            if (eq == std::string::npos || eq == 0) {
                *why = "option '" + kv + "' is not key=value";
                return -EINVAL;
            }
            std::string k = kv.substr(0, eq);
            if (s.get(k.c_str())) {
                *why = "option '" + k + "' given twice";
                return -EINVAL;
            }
            s.opts.emplace_back(k, kv.substr(eq + 1));
            pos = end + 1;
        }
    }
    *out = std::move(s);
    return 0;
}

bool common_device_option(const std::string& k) {
    return k == "progress" || k == "local" || k == "txbatch" || k == "rxspin";
}

namespace {

int create_shm(const DeviceSpec& spec, std::unique_ptr<Transport>* out, std::string* why) {
    uint32_t max_peers = ShmTransport::kMaxPeers;
    for (const auto& kv : spec.opts) {
        if (common_device_option(kv.first)) continue;
        if (kv.first == "peers") {
            char* end = nullptr;
            errno = 0;
            unsigned long v = strtoul(kv.second.c_str(), &end, 10);
            if (kv.second.empty() || kv.second[0] == '-' || *end || errno || v < 1 || v > ShmTransport::kMaxPeers) {
                *why = "shm option peers must be 1.." + std::to_string(ShmTransport::kMaxPeers) + ", not '" +
                       kv.second + "'";
                return -EINVAL;
            }
            max_peers = static_cast<uint32_t>(v);
            continue;
        }
        *why = "shm takes no option '" + kv.first + "' (only peers=N)";
        return -EINVAL;
    }
    std::unique_ptr<ShmTransport> t;
    int rc = ShmTransport::create(&t, max_peers);
    if (rc < 0) {
        *why = std::string("shm: ") + strerror(-rc);
        return rc;
    }
    *out = std::move(t);
    return 0;
}

// Every network wire opens in two steps: read its options (a bad one is -EINVAL), then
// start the device. A device that cannot start is never reported as -EINVAL/-ENODEV,
// which VipOpenNic takes for a bad name.
template <class Wire, class Options, int (*Parse)(const DeviceSpec&, Options*, std::string*)>
int create_wire(const DeviceSpec& spec, std::unique_ptr<Transport>* out, std::string* why) {
    Options o;
    int rc = Parse(spec, &o, why);
    if (rc < 0) return rc;
    std::unique_ptr<Wire> t;
    rc = Wire::create(o, &t, why);
    if (rc < 0) return rc == -EINVAL || rc == -ENODEV ? -EIO : rc;
    *out = std::move(t);
    return 0;
}

struct Kind {
    const char* name;
    int (*create)(const DeviceSpec&, std::unique_ptr<Transport>*, std::string*);
};
// One line per wire; a wire whose library was not found at build time is left out.
const Kind kKinds[] = {
    {"shm", create_shm},
#ifdef SOFTVIA_WITH_UDP
    {"udp", create_wire<UdpTransport, UdpOptions, &UdpTransport::parse_options>},
#endif
#ifdef SOFTVIA_WITH_DPDK
    {"dpdk", create_wire<DpdkTransport, DpdkOptions, &parse_dpdk_options>},
#endif
#ifdef SOFTVIA_WITH_VERBS
    {"verbs", create_wire<VerbsTransport, VerbsOptions, &parse_verbs_options>},
#endif
};
}  // namespace

int create_transport(const DeviceSpec& spec, std::unique_ptr<Transport>* out, std::string* why) {
    const Kind* kind = nullptr;
    for (const Kind& k : kKinds)
        if (spec.kind == k.name) kind = &k;
    if (!kind) {
        *why = "no device kind '" + spec.kind + "' in this build";
        return -ENODEV;
    }
    const char* local = spec.get("local");
    if (local && strcmp(local, "shm") != 0 && strcmp(local, "wire") != 0) {
        *why = "local must be shm or wire";
        return -EINVAL;
    }
    std::unique_ptr<Transport> wire;
    int rc = kind->create(spec, &wire, why);
    if (rc < 0) return rc;
    if (spec.kind == "shm" || (local && strcmp(local, "wire") == 0)) {
        *out = std::move(wire);
        return 0;
    }
    // A network wire: peers on this host go through shm (NIC-level loopback).
    std::unique_ptr<Transport> shm;
    rc = create_shm(DeviceSpec{"shm", {}}, &shm, why);
    if (rc < 0) return rc;
    *out = std::make_unique<LocalShortcut>(std::move(wire), std::move(shm), host_identity());
    return 0;
}

int compose_transport(const std::string& device, const std::string& faults, std::unique_ptr<Transport>* out,
                      FaultTransport** injector, std::string* why) {
    *injector = nullptr;
    DeviceSpec dev;
    int rc = parse_device_name(device, &dev, why);
    if (rc < 0) return rc;
    std::unique_ptr<Transport> tr;
    rc = create_transport(dev, &tr, why);
    if (rc < 0) return rc;
    if (!faults.empty()) {
        FaultSpec spec;
        if (!parse_fault_spec(faults, &spec)) {
            *why = "bad fault spec '" + faults + "'";
            return -EINVAL;
        }
        auto ft = std::make_unique<FaultTransport>(std::move(tr), spec);
        *injector = ft.get();
        tr = std::move(ft);
    }
    *out = std::move(tr);
    return 0;
}

uint64_t host_identity() {
    char buf[96] = {};
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, 64);
        (void)n;
        close(fd);
    }
    struct stat st {};
    if (stat("/proc/self/ns/net", &st) == 0) memcpy(buf + 64, &st.st_ino, sizeof st.st_ino);
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (char c : buf) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    return h;
}

}  // namespace softvia::nicfw
