// dpdk transport: options, EAL start-up failures, and raw frames on a real wire.
//
// The EAL can start only once per process, so every test that touches DPDK runs in a
// forked child (which exits 0 on success, 77 when the machine cannot run it). The wire
// tests need root: the child moves into a private network namespace with a veth pair,
// so nothing is left behind when it exits.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>

#include "transport/dpdk/dpdk_transport.h"

using namespace softvia::nicfw;

namespace {

DeviceSpec spec_of(const std::string& name) {
    DeviceSpec s;
    std::string why;
    EXPECT_EQ(parse_device_name(name, &s, &why), 0) << why;
    return s;
}

int parse(const std::string& name, DpdkOptions* o, std::string* why) {
    return parse_dpdk_options(spec_of(name), o, why);
}

bool has(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

// Runs body in a child process; its exit status is the verdict (77: skipped).
void in_child(const std::function<int()>& body) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        int rc = body();
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st)) << "child died with signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    if (WEXITSTATUS(st) == 77) GTEST_SKIP() << "the child could not run here (reason above)";
    EXPECT_EQ(WEXITSTATUS(st), 0) << "child failed (reasons above)";
}

int failures;
#define CHK(cond)                                                                   \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                             \
        }                                                                           \
    } while (0)

}  // namespace

// ---------------------------------------------------------------- options (no privileges)
TEST(DpdkOptions, VdevArgumentsUseSemicolons) {
    DpdkOptions o;
    std::string why;
    ASSERT_EQ(parse("dpdk:vdev=net_af_packet0;iface=veth0;qpairs=1,mtu=1400,rxd=1024,txd=256,progress=thread,local=wire",
                    &o, &why), 0) << why;
    EXPECT_EQ(o.vdev_name, "net_af_packet0");
    EXPECT_EQ(o.vdev_args, "iface=veth0,qpairs=1");
    EXPECT_EQ(o.port, -1);
    EXPECT_EQ(o.mtu, 1400u);
    EXPECT_EQ(o.rxd, 1024);
    EXPECT_EQ(o.txd, 256);
    EXPECT_FALSE(o.huge);
}

TEST(DpdkOptions, NicIndexInVdev) {
    DpdkOptions o;
    std::string why;
    ASSERT_EQ(parse("dpdk:vdev=net_af_packet%n;iface=svc%n,local=wire", &o, &why), 0) << why;
    EXPECT_EQ(o.vdev_name, "net_af_packet%n");
    EXPECT_EQ(substitute_nic_index(o.vdev_name, 1), "net_af_packet1");
    EXPECT_EQ(substitute_nic_index(o.vdev_args, 12), "iface=svc12");
    EXPECT_EQ(substitute_nic_index("a%%n%x%", 3), "a%3%x%");
    // %n in the arguments alone would give every NIC the same vdev name.
    EXPECT_EQ(parse("dpdk:vdev=net_af_packet0;iface=svc%n", &o, &why), -EINVAL);
    EXPECT_NE(why.find("%n"), std::string::npos) << why;
    EXPECT_EQ(parse("dpdk:vdev=net_%x", &o, &why), -EINVAL);
}

TEST(DpdkOptions, PortAndEalArguments) {
    DpdkOptions o;
    std::string why;
    ASSERT_EQ(parse("dpdk:port=1,eal=-a+0000:03:00.0;txq_inline=0 --socket-mem=512,huge=1", &o, &why), 0) << why;
    EXPECT_EQ(o.port, 1);
    EXPECT_TRUE(o.vdev_name.empty());
    EXPECT_TRUE(o.huge);
    ASSERT_EQ(o.eal_extra.size(), 3u);
    EXPECT_EQ(o.eal_extra[0], "-a");
    EXPECT_EQ(o.eal_extra[1], "0000:03:00.0,txq_inline=0");
    EXPECT_EQ(o.eal_extra[2], "--socket-mem=512");
}

TEST(DpdkOptions, BadOptionsAreRefusedWithAReason) {
    const char* bad[] = {
        "dpdk",                                    // neither vdev nor port
        "dpdk:vdev=net_null0,port=0",              // both
        "dpdk:vdev=",                              // no name
        "dpdk:vdev=net/null0",                     // not a driver instance name
        "dpdk:port=x",                             // not a number
        "dpdk:port=70000",                         // out of range
        "dpdk:port=0,mtu=64",                      // too small
        "dpdk:port=0,mtu=99999",                   // too large
        "dpdk:port=0,rxd=8",                       // too few descriptors
        "dpdk:port=0,huge=yes",                    // 0 or 1
        "dpdk:vdev=net_af_packet0,iface=veth0",    // vdev arguments written with ','
    };
    for (const char* name : bad) {
        DpdkOptions o;
        std::string why;
        EXPECT_EQ(parse(name, &o, &why), -EINVAL) << name;
        EXPECT_FALSE(why.empty()) << name;
    }
    DpdkOptions o;
    std::string why;
    parse("dpdk:vdev=net_af_packet0,iface=veth0", &o, &why);
    EXPECT_NE(why.find("';'"), std::string::npos) << why;  // says how to write it
}

TEST(DpdkOptions, RegistryRefusesBadNamesAsInvalid) {
    std::unique_ptr<Transport> t;
    std::string why;
    EXPECT_EQ(create_transport(spec_of("dpdk:vdev=net_null0,bogus=1"), &t, &why), -EINVAL);
    EXPECT_NE(why.find("bogus"), std::string::npos) << why;
    EXPECT_EQ(t, nullptr);
}

TEST(DpdkOptions, EalDefaultsAndOverrides) {
    DpdkOptions o;
    std::string why;
    ASSERT_EQ(parse("dpdk:vdev=net_null0", &o, &why), 0);
    auto a = dpdk_eal_args(o, 1, "tag");
    EXPECT_EQ(a[0], "softvia");
    EXPECT_TRUE(has(a, "-l") && has(a, "1"));
    EXPECT_TRUE(has(a, "--no-huge"));
    EXPECT_TRUE(has(a, "-m"));
    EXPECT_TRUE(has(a, "--no-shconf"));
    EXPECT_FALSE(has(a, "--in-memory"));  // DPDK refuses it together with --no-huge
    EXPECT_TRUE(has(a, "--file-prefix=tag"));
    EXPECT_TRUE(has(a, "--no-pci"));
    EXPECT_TRUE(has(a, "--no-telemetry"));

    ASSERT_EQ(parse("dpdk:vdev=net_null0,eal=--lcores=0@1 -m+128 --file-prefix=mine", &o, &why), 0);
    a = dpdk_eal_args(o, 1, "tag");
    EXPECT_FALSE(has(a, "-l"));
    EXPECT_EQ(std::count(a.begin(), a.end(), "-m"), 1);  // the user's only
    EXPECT_TRUE(has(a, "128"));
    EXPECT_FALSE(has(a, "--file-prefix=tag"));
    EXPECT_EQ(a.back(), "--file-prefix=mine");

    ASSERT_EQ(parse("dpdk:port=0,huge=1", &o, &why), 0);
    a = dpdk_eal_args(o, 0, "tag");
    EXPECT_FALSE(has(a, "--no-huge"));
    EXPECT_TRUE(has(a, "--in-memory"));
    EXPECT_FALSE(has(a, "--no-pci"));  // a bound port is found by the PCI scan
}

// ---------------------------------------------------------------- EAL start-up failures
TEST(DpdkEal, FailureIsReportedAndRemembered) {
    in_child([] {
        std::unique_ptr<Transport> t;
        std::string why;
        int rc = create_transport(spec_of("dpdk:vdev=net_null0,eal=--no-such-eal-option"), &t, &why);
        fprintf(stderr, "first open: %d, %s\n", rc, why.c_str());
        CHK(rc < 0 && rc != -EINVAL && rc != -ENODEV);  // VipOpenNic: VIP_ERROR_RESOURCE
        CHK(why.find("EAL could not start") != std::string::npos);
        CHK(t == nullptr);
        // The EAL cannot be retried in this process; later NICs get the same reason.
        std::string why2;
        int rc2 = create_transport(spec_of("dpdk:vdev=net_null1"), &t, &why2);
        CHK(rc2 == rc);
        CHK(why2.find("only once") != std::string::npos);
        return failures ? 1 : 0;
    });
}

TEST(DpdkEal, MissingDeviceIsReportedWithoutExiting) {
    in_child([] {
        std::unique_ptr<Transport> t;
        std::string why;
        // The EAL starts (net_null needs no privileges), but the port does not exist.
        int rc = create_transport(spec_of("dpdk:port=7,eal=--no-pci"), &t, &why);
        fprintf(stderr, "open: %d, %s\n", rc, why.c_str());
        if (rc < 0 && why.find("EAL could not start") != std::string::npos) {
            printf("SKIP: the EAL does not start here: %s\n", why.c_str());
            return 77;
        }
        CHK(rc < 0 && rc != -EINVAL && rc != -ENODEV);
        CHK(why.find("no port 7") != std::string::npos);
        // A driver that does not exist: a reason, no exit.
        rc = create_transport(spec_of("dpdk:vdev=net_nosuchdriver0"), &t, &why);
        fprintf(stderr, "open: %d, %s\n", rc, why.c_str());
        CHK(rc < 0 && why.find("cannot create vdev net_nosuchdriver0") != std::string::npos);
        // net_null works anywhere: the EAL and our port set-up are usable after failures.
        rc = create_transport(spec_of("dpdk:vdev=net_null0"), &t, &why);
        CHK(rc == 0);
        if (rc != 0) fprintf(stderr, "net_null0: %s\n", why.c_str());
        // The same vdev twice in one process: refused, not crashed.
        std::unique_ptr<Transport> t2;
        CHK(create_transport(spec_of("dpdk:vdev=net_null0"), &t2, &why) == -EBUSY);
        t.reset();
        CHK(create_transport(spec_of("dpdk:vdev=net_null0"), &t, &why) == 0);  // closed: reusable
        return failures ? 1 : 0;
    });
}

// ---------------------------------------------------------------- a real wire (root)
namespace {

// In a private network namespace: a veth pair svua/svub, both up.
int veth_in_private_netns() {
    if (geteuid() != 0) {
        printf("SKIP: needs root (a network namespace, raw packet sockets)\n");
        return 77;
    }
    if (unshare(CLONE_NEWNET) != 0) {
        printf("SKIP: cannot create a network namespace: %s\n", strerror(errno));
        return 77;
    }
    if (system("ip link add svua type veth peer name svub && ip link set svua up && ip link set svub up && "
               "ip addr add 198.18.202.1/24 dev svua && ip addr add 198.18.202.2/24 dev svub") != 0) {
        printf("SKIP: cannot create a veth pair (iproute2 missing?)\n");
        return 77;
    }
    return 0;
}

// The bare wire (local=wire: no same-host shortcut around it).
DpdkTransport* open_end(const char* name, std::unique_ptr<Transport>* keep) {
    std::string why;
    int rc = create_transport(spec_of(std::string(name) + ",local=wire"), keep, &why);
    if (rc != 0) {
        fprintf(stderr, "%s: %d %s\n", name, rc, why.c_str());
        return nullptr;
    }
    return static_cast<DpdkTransport*>(keep->get());
}

uint64_t now_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

// Receives up to want frames within a second.
int receive(Transport* t, RxFrame* out, int want) {
    int n = 0;
    for (uint64_t end = now_ms() + 1000; n < want && now_ms() < end;) n += t->rx_burst(out + n, want - n);
    return n;
}

bool send_to(Transport* t, int peer, const char* text) {
    uint32_t len = static_cast<uint32_t>(strlen(text));
    uint8_t* p = t->tx_reserve(peer, len);
    if (!p) return false;
    memcpy(p, text, len);
    t->tx_commit(peer, len);
    t->tx_flush();
    return true;
}

// Sends raw Ethernet bytes out of ifname.
void inject(const char* ifname, const std::vector<uint8_t>& frame) {
    int fd = socket(AF_PACKET, SOCK_RAW, 0);
    sockaddr_ll sa{};
    sa.sll_family = AF_PACKET;
    sa.sll_ifindex = static_cast<int>(if_nametoindex(ifname));
    sa.sll_halen = 6;
    memcpy(sa.sll_addr, frame.data(), 6);
    CHK(fd >= 0 && sendto(fd, frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa) ==
                       static_cast<ssize_t>(frame.size()));
    close(fd);
}

// A frame in our format from (src MAC, src nonce) to the NIC with address dst.
std::vector<uint8_t> our_frame(const uint8_t* dst_addr, const uint8_t src_mac[6], uint32_t src_nonce,
                               const char* payload) {
    std::vector<uint8_t> f(DpdkTransport::kHdrLen);
    memcpy(f.data(), dst_addr + 2, 6);
    memcpy(f.data() + 6, src_mac, 6);
    f[12] = 0x88;
    f[13] = 0xB5;
    f[14] = 1;
    memcpy(f.data() + 16, &src_nonce, 4);
    memcpy(f.data() + 20, dst_addr + 16, 4);
    uint64_t host = 0x1122334455667788ull;
    memcpy(f.data() + 24, &host, 8);
    size_t at = f.size();
    f.resize(at + strlen(payload));
    memcpy(f.data() + at, payload, strlen(payload));
    while (f.size() < 60) f.push_back(0);  // Ethernet minimum; the engine sees the padding
    return f;
}

}  // namespace

TEST(DpdkWire, FramesStrangersAndGarbage) {
    in_child([] {
        int rc = veth_in_private_netns();
        if (rc) return rc;
        std::unique_ptr<Transport> ka, kb;
        DpdkTransport* a = open_end("dpdk:vdev=net_af_packet0;iface=svua", &ka);
        DpdkTransport* b = open_end("dpdk:vdev=net_af_packet1;iface=svub", &kb);
        if (!a || !b) return 1;
        CHK(a->lossy() && a->max_frame() == 1500 - DpdkTransport::kShimLen);
        size_t alen, blen;
        const uint8_t* aa = a->local_addr(&alen);
        const uint8_t* ba = b->local_addr(&blen);
        CHK(alen == DpdkTransport::kAddrLen && aa[0] == DpdkTransport::kAddrKind);
        uint64_t host;
        memcpy(&host, aa + 8, 8);
        CHK(host == host_identity());  // bytes 8..15, as the same-host shortcut expects

        // Bad addresses.
        uint8_t bad[DpdkTransport::kAddrLen];
        memcpy(bad, ba, blen);
        CHK(a->resolve(ba, blen - 1) == -EINVAL);
        bad[0] = 1;
        CHK(a->resolve(bad, blen) == -EINVAL);
        memcpy(bad, ba, blen);
        memset(bad + 16, 0, 4);
        CHK(a->resolve(bad, blen) == -EINVAL);

        // a -> b: b has never heard of a and learns its full address from the frame.
        int pb = a->resolve(ba, blen);
        CHK(pb >= 0);
        CHK(a->tx_reserve(pb, a->max_frame() + 1) == nullptr);
        CHK(send_to(a, pb, "hello b"));
        RxFrame f[8];
        int n = receive(b, f, 1);
        CHK(n == 1);
        int pa = -1;
        if (n == 1) {
            CHK(f[0].len == 7 && memcmp(f[0].data, "hello b", 7) == 0);
            pa = f[0].peer;
            CHK(b->peer_addr(pa) == std::vector<uint8_t>(aa, aa + alen));
            b->rx_release();
        }
        // b answers the stranger; a sees it from the peer it resolved.
        if (pa >= 0) {
            CHK(send_to(b, pa, "hello a"));
            n = receive(a, f, 1);
            CHK(n == 1 && f[0].peer == pb && f[0].len == 7 && memcmp(f[0].data, "hello a", 7) == 0);
            if (n) a->rx_release();
            CHK(b->resolve(aa, alen) == pa);  // resolving it later finds the same peer
        }

        // Garbage from a: another EtherType, too short, for another nonce, a group source
        // MAC; then a well-formed frame from a MAC nobody knows (a stranger).
        const uint8_t nobody[6] = {0x02, 0x55, 0x55, 0x55, 0x55, 0x55};
        std::vector<uint8_t> ipv4 = our_frame(ba, nobody, 9, "x");
        ipv4[12] = 0x08;
        ipv4[13] = 0x00;
        inject("svua", ipv4);
        std::vector<uint8_t> shortf(ipv4.begin(), ipv4.begin() + 14);
        shortf[12] = 0x88;
        shortf[13] = 0xB5;
        shortf.resize(20, 0);  // the kernel pads nothing on veth: 20 bytes arrive
        inject("svua", shortf);
        std::vector<uint8_t> other = our_frame(ba, nobody, 9, "for someone else");
        other[20] ^= 0xff;
        inject("svua", other);
        const uint8_t group[6] = {0x03, 1, 2, 3, 4, 5};
        inject("svua", our_frame(ba, group, 9, "group"));
        inject("svua", our_frame(ba, nobody, 42, "stranger"));
        n = receive(b, f, 2);
        CHK(n == 1);
        if (n >= 1) {
            CHK(f[0].peer != pa && memcmp(f[0].data, "stranger", 8) == 0);
            const std::vector<uint8_t>& sa = b->peer_addr(f[0].peer);
            CHK(sa.size() == DpdkTransport::kAddrLen && memcmp(sa.data() + 2, nobody, 6) == 0);
            uint32_t nonce;
            memcpy(&nonce, sa.data() + 16, 4);
            CHK(nonce == 42);
            b->rx_release();
        }
        const auto& d = b->drops();
        fprintf(stderr, "b drops: foreign %lu short %lu not_ours %lu strangers %lu\n",
                (unsigned long)d.foreign, (unsigned long)d.short_, (unsigned long)d.not_ours,
                (unsigned long)d.strangers);
        CHK(d.foreign >= 1 && d.short_ == 1 && d.not_ours == 1 && d.strangers == 1);

        // A NIC sending to itself: looped back in software, never on the wire.
        int self = a->resolve(aa, alen);
        CHK(self >= 0 && self != pb);
        CHK(send_to(a, self, "me"));
        n = receive(a, f, 1);
        CHK(n == 1 && f[0].peer == self && f[0].len == 2);
        if (n) a->rx_release();

        // A burst larger than the port takes at once: nothing lost on a quiet link.
        int sent = 0, got = 0;
        for (int i = 0; i < 200; i++) {
            uint8_t* p = a->tx_reserve(pb, 1000);
            if (!p) {
                a->tx_flush();
                continue;
            }
            memset(p, i, 1000);
            a->tx_commit(pb, 1000);
            sent++;
            if (i % 16 == 15) a->tx_flush();
            int k;
            while ((k = b->rx_burst(f, 8)) > 0) {
                got += k;
                b->rx_release();
            }
        }
        a->tx_flush();
        for (uint64_t end = now_ms() + 2000; got < sent && now_ms() < end;) {
            int k = b->rx_burst(f, 8);
            if (k) {
                got += k;
                b->rx_release();
            }
        }
        fprintf(stderr, "burst: %d sent, %d received\n", sent, got);
        CHK(sent >= 190 && got == sent);
        return failures ? 1 : 0;
    });
}
