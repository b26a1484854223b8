// nicfw/device.h -- device names and the transport registry.
//
// A NIC is opened by a device name "kind[:key=value,...]": the kind picks the wire
// (shm, udp, dpdk, verbs), the options configure it. Options every kind takes:
//   progress=inline|thread   who steps the firmware (read by vipl, not the transport)
//   local=shm|wire           for network wires: reach peers on this host through shm
//                            (the default, NIC-level loopback) or through the wire itself
//   txbatch=N                inline progress: a post's frames wait until N are queued
//                            or the next call that polls or waits (default 0: at once)
//   rxspin=N                 inline progress on a wire polled by system calls (udp): an
//                            idle step of a program that only polls reads the wire up to
//                            N more times (default 8; 0: off; Engine::spin_stop)
// Everything else is the transport's own (docs/transports.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nicfw/transport.h"

namespace softvia::nicfw {

struct DeviceSpec {
    std::string kind;
    std::vector<std::pair<std::string, std::string>> opts;  // in the order given

    // The value of key, or nullptr when absent.
    const char* get(const char* key) const;
};

// Options every kind takes (above), which a transport skips.
bool common_device_option(const std::string& key);

// Splits a device name. -EINVAL (with *why) for an empty kind, an option without '=',
// an empty key or a repeated key.
int parse_device_name(const std::string& name, DeviceSpec* out, std::string* why);

// Creates the wire a spec names. Options the engine or vipl own (progress) are skipped;
// any option the transport does not know is -EINVAL. -ENODEV for a kind that does not
// exist or was not built in. Other negative errnos come from the transport (a device
// that cannot start). *why says what went wrong in words.
int create_transport(const DeviceSpec& spec, std::unique_ptr<Transport>* out, std::string* why);

// The whole transport stack of a NIC, composed here and nowhere else: the wire a device
// name gives (create_transport: with the same-host shortcut beside a network wire), and
// around it the fault injector when faults is not empty. *injector is that injector
// (null without one), for changing its rates and reading its counters later. -EINVAL
// for a bad device name or fault spec; the rest as create_transport.
class FaultTransport;
int compose_transport(const std::string& device, const std::string& faults, std::unique_ptr<Transport>* out,
                      FaultTransport** injector, std::string* why);

// Which host this process is on, for the same-host shortcut: the kernel's boot id and
// the network namespace, so namespaces on one machine count as separate hosts (the
// launcher's --hosts mode relies on that).
uint64_t host_identity();

}  // namespace softvia::nicfw
