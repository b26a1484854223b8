// Unit tests of the verbs transport that need no RDMA device: option parsing, the
// address format, the crossed-connect order, and the clean error when there is no
// device (which is what this test host has). Device tests: tests/verbs.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "nicfw/device.h"
#include "nicfw/engine.h"
#include "transport/verbs/verbs_transport.h"

using namespace softvia::nicfw;

namespace {
int parse(const std::string& name, VerbsOptions* o, std::string* why) {
    DeviceSpec spec;
    int rc = parse_device_name(name, &spec, why);
    if (rc < 0) return rc;
    return parse_verbs_options(spec, o, why);
}

bool host_has_rdma_device() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list) ibv_free_device_list(list);
    return list && n > 0;
}

VerbsAddr sample(const char* ip, uint16_t port, uint32_t nonce) {
    VerbsAddr a;
    inet_pton(AF_INET, ip, &a.ip);
    a.port = port;
    a.host = 0x0102030405060708ull;
    a.nonce = nonce;
    return a;
}
}  // namespace

TEST(VerbsOptions, DefaultsWithoutOptions) {
    VerbsOptions o;
    std::string why;
    ASSERT_EQ(parse("verbs", &o, &why), 0) << why;
    EXPECT_EQ(o.ip, 0u);
    EXPECT_EQ(o.port, 0);
    EXPECT_TRUE(o.dev.empty());
}

TEST(VerbsOptions, EveryKey) {
    VerbsOptions o;
    std::string why;
    ASSERT_EQ(parse("verbs:addr=198.18.0.1,port=7000,dev=rxe0,progress=thread", &o, &why), 0) << why;
    in_addr want{};
    inet_pton(AF_INET, "198.18.0.1", &want);
    EXPECT_EQ(o.ip, want.s_addr);
    EXPECT_EQ(o.port, 7000);
    EXPECT_EQ(o.dev, "rxe0");
    ASSERT_EQ(parse("verbs:local=wire", &o, &why), 0) << why;  // the same-host wrapper's
    ASSERT_EQ(parse("verbs:port=65535", &o, &why), 0) << why;
    EXPECT_EQ(o.port, 65535);
    ASSERT_EQ(parse("verbs:port=0", &o, &why), 0) << why;
    EXPECT_EQ(o.port, 0);
}

TEST(VerbsOptions, BadValuesSayWhich) {
    struct Case {
        const char* name;
        const char* key;  // the reason must name it
    } cases[] = {
        {"verbs:addr=1.2.3", "addr"},       {"verbs:addr=::1", "addr"},
        {"verbs:addr=0.0.0.0", "addr"},     {"verbs:addr=", "addr"},
        {"verbs:addr=198.18.0.1x", "addr"}, {"verbs:addr=198.18.0.256", "addr"},
        {"verbs:port=65536", "port"},       {"verbs:port=-1", "port"},
        {"verbs:port=12a", "port"},         {"verbs:port=", "port"},
        {"verbs:port=+5", "port"},          {"verbs:port=99999999999", "port"},
        {"verbs:dev=", "dev"},              {"verbs:mtu=1500", "mtu"},
        {"verbs:addr=198.18.0.1,port=1,port=2", "port"},
    };
    for (const Case& c : cases) {
        VerbsOptions o;
        std::string why;
        EXPECT_EQ(parse(c.name, &o, &why), -EINVAL) << c.name;
        EXPECT_NE(why.find(c.key), std::string::npos) << c.name << ": reason '" << why << "'";
    }
    VerbsOptions o;
    std::string why;
    EXPECT_EQ(parse("verbs:dev=" + std::string(IBV_SYSFS_NAME_MAX, 'x'), &o, &why), -EINVAL);
}

// The registry knows the kind and hands bad options back as -EINVAL (VipOpenNic's
// VIP_INVALID_PARAMETER) before touching any device.
TEST(VerbsOptions, ThroughTheRegistry) {
    DeviceSpec spec;
    std::string why;
    ASSERT_EQ(parse_device_name("verbs:port=x", &spec, &why), 0);
    std::unique_ptr<Transport> t;
    EXPECT_EQ(create_transport(spec, &t, &why), -EINVAL);
    EXPECT_NE(why.find("port"), std::string::npos) << why;
    EXPECT_EQ(t, nullptr);
}

TEST(VerbsAddr, LayoutAndRoundTrip) {
    VerbsAddr a = sample("198.18.0.7", 0x1234, 0xdeadbeef);
    a.host = host_identity();
    uint8_t b[kVerbsAddrLen];
    encode_verbs_addr(a, b);
    EXPECT_EQ(b[0], kVerbsAddrKind);
    EXPECT_EQ(b[1], 1);
    EXPECT_EQ(b[2], 0x12);  // port big endian
    EXPECT_EQ(b[3], 0x34);
    EXPECT_EQ(memcmp(b + 4, &a.ip, 4), 0);
    uint64_t host;
    memcpy(&host, b + 8, 8);  // same offset as the udp and dpdk addresses
    EXPECT_EQ(host, host_identity());
    VerbsAddr d;
    ASSERT_TRUE(decode_verbs_addr(b, sizeof b, &d));
    EXPECT_EQ(d.ip, a.ip);
    EXPECT_EQ(d.port, a.port);
    EXPECT_EQ(d.host, a.host);
    EXPECT_EQ(d.nonce, a.nonce);
}

TEST(VerbsAddr, RejectsMalformed) {
    uint8_t good[kVerbsAddrLen];
    encode_verbs_addr(sample("198.18.0.7", 7000, 1), good);
    VerbsAddr d;
    EXPECT_FALSE(decode_verbs_addr(nullptr, kVerbsAddrLen, &d));
    EXPECT_FALSE(decode_verbs_addr(good, kVerbsAddrLen - 1, &d));
    uint8_t longer[kVerbsAddrLen + 1] = {};
    memcpy(longer, good, kVerbsAddrLen);
    EXPECT_FALSE(decode_verbs_addr(longer, sizeof longer, &d));
    auto with = [&](size_t at, uint8_t v) {
        uint8_t b[kVerbsAddrLen];
        memcpy(b, good, sizeof b);
        b[at] = v;
        return decode_verbs_addr(b, sizeof b, &d);
    };
    EXPECT_FALSE(with(0, 1));  // an shm address
    EXPECT_FALSE(with(1, 2));  // another version
    uint8_t b[kVerbsAddrLen];
    encode_verbs_addr(sample("198.18.0.7", 0, 1), b);
    EXPECT_FALSE(decode_verbs_addr(b, sizeof b, &d));  // port 0
    encode_verbs_addr(sample("0.0.0.0", 7000, 1), b);
    EXPECT_FALSE(decode_verbs_addr(b, sizeof b, &d));  // address 0
}

// Whatever bytes arrive (an address is untrusted input from the name service or a
// connect request), decoding never misreads: what decodes encodes back to the same bytes.
TEST(VerbsAddr, RandomBytesDecodeCanonically) {
    std::mt19937 rng(7);
    int decoded = 0;
    for (int i = 0; i < 20000; i++) {
        uint8_t b[kVerbsAddrLen];
        for (auto& x : b) x = static_cast<uint8_t>(rng());
        if (i % 2) {
            b[0] = kVerbsAddrKind;
            b[1] = 1;
        }
        VerbsAddr d;
        if (!decode_verbs_addr(b, sizeof b, &d)) continue;
        decoded++;
        uint8_t again[kVerbsAddrLen];
        encode_verbs_addr(d, again);
        EXPECT_EQ(memcmp(again, b, sizeof b), 0);
    }
    EXPECT_GT(decoded, 5000);
}

// Crossed connects are settled by this order on both sides, so it must be a strict total
// order on (IPv4, port, nonce), with addresses compared as numbers.
TEST(VerbsAddr, CrossedConnectOrderIsTotal) {
    VerbsAddr v[] = {sample("198.18.0.2", 7000, 5), sample("198.18.1.1", 7000, 5),
                     sample("198.18.0.2", 7001, 5), sample("198.18.0.2", 7000, 6),
                     sample("198.19.0.1", 1, 0)};
    for (auto& a : v) {
        EXPECT_FALSE(verbs_addr_before(a, a));
        for (auto& b : v) {
            if (&a == &b) continue;
            EXPECT_NE(verbs_addr_before(a, b), verbs_addr_before(b, a));
        }
    }
    EXPECT_TRUE(verbs_addr_before(v[0], v[1]));  // 198.18.0.2 < 198.18.1.1 as numbers
    EXPECT_TRUE(verbs_addr_before(v[0], v[2]));
    EXPECT_TRUE(verbs_addr_before(v[0], v[3]));
    EXPECT_TRUE(verbs_addr_before(v[1], v[4]));
}

// On a host without RDMA (this one, and CI) opening says so cleanly, whatever the
// options; on a host with a device the same names open, so this checks the other side.
TEST(VerbsOpen, NoDeviceIsACleanError) {
    if (host_has_rdma_device()) GTEST_SKIP() << "this host has an RDMA device: the no-device path cannot be reached";
    for (const char* name : {"verbs", "verbs:dev=rxe0", "verbs:addr=198.18.0.1,port=7000", "verbs:progress=thread"}) {
        DeviceSpec spec;
        std::string why;
        ASSERT_EQ(parse_device_name(name, &spec, &why), 0);
        std::unique_ptr<Transport> t;
        EXPECT_EQ(create_transport(spec, &t, &why), -ENXIO) << name;
        EXPECT_EQ(why.rfind("no RDMA device: ", 0), 0u) << name << ": '" << why << "'";
        EXPECT_EQ(t, nullptr);
    }
    // The same through the engine (what VipOpenNic does): an error, no crash, no wire.
    EngineConfig cfg;
    cfg.device = "verbs";
    std::unique_ptr<Engine> e;
    std::string why;
    EXPECT_EQ(Engine::create(cfg, &e, &why), -ENXIO);
    EXPECT_EQ(why.rfind("no RDMA device: ", 0), 0u) << why;
    EXPECT_EQ(e, nullptr);
}

// A device name that does not exist is "no RDMA device" on any host.
TEST(VerbsOpen, UnknownDeviceName) {
    DeviceSpec spec;
    std::string why;
    ASSERT_EQ(parse_device_name("verbs:dev=softvia-no-such-dev", &spec, &why), 0);
    std::unique_ptr<Transport> t;
    EXPECT_EQ(create_transport(spec, &t, &why), -ENXIO);
    EXPECT_EQ(why.rfind("no RDMA device: ", 0), 0u) << why;
    if (host_has_rdma_device()) {
        EXPECT_NE(why.find("softvia-no-such-dev"), std::string::npos) << why;
    }
}
