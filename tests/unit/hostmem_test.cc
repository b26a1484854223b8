// hostmem: the device's fault-safe access to host memory (nicfw/hostmem.h). The copy is
// hand-written assembly with a branch per size class, so it is checked against memcpy
// at every size and alignment around those classes, and every kind of fault on either
// side must come back as -EFAULT with the process alive.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nicfw/hostmem.h"

namespace hm = softvia::nicfw::hostmem;

namespace {
const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

struct Pages {
    explicit Pages(size_t n, int prot = PROT_READ | PROT_WRITE) : len(n * kPage) {
        p = static_cast<uint8_t*>(mmap(nullptr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        EXPECT_NE(MAP_FAILED, static_cast<void*>(p));
    }
    ~Pages() { munmap(p, len); }
    uint8_t* p;
    size_t len;
};

class HostMem : public ::testing::Test {
protected:
    void SetUp() override { hm::install(); }
};

TEST_F(HostMem, CopyMatchesMemcpyAtEverySizeAndAlignment) {
    std::vector<uint8_t> src(9000), dst(9100), want(9100);
    std::mt19937 rng(7);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    std::vector<size_t> sizes;
    for (size_t n = 0; n <= 300; n++) sizes.push_back(n);
    for (size_t n : {511, 512, 513, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8704})
        sizes.push_back(n);
    for (size_t n : sizes)
        for (size_t so : {0, 1, 7, 8, 15})
            for (size_t dof : {0, 3, 16}) {
                memset(dst.data(), 0x5a, dst.size());
                memset(want.data(), 0x5a, want.size());
                memcpy(want.data() + dof, src.data() + so, n);
                ASSERT_EQ(0, hm::copy(dst.data() + dof, src.data() + so, n)) << n;
                ASSERT_EQ(0, memcmp(dst.data(), want.data(), dst.size()))
                    << "size " << n << " src+" << so << " dst+" << dof;
            }
}

// Large copies take a vector loop instead of `rep movsb` when the destination lies 1..63
// bytes past the source modulo a page (the string move's slow case on AMD): every such
// distance and its neighbours, at the sizes around the loop's 64-byte turns, and a fault
// inside that loop.
TEST_F(HostMem, CopyIsRightAtEveryPageDistanceNearTheSource) {
    Pages s(4), d(4);
    std::mt19937 rng(11);
    for (size_t i = 0; i < s.len; i++) s.p[i] = static_cast<uint8_t>(rng());
    for (size_t n : {2049, 2111, 2112, 4096, 4100, 8704})
        for (size_t so : {0, 5, 16})
            for (size_t delta = 0; delta <= 80; delta++) {
                uint8_t* dst = d.p + kPage + so + delta;  // dst - src = delta modulo a page
                memset(d.p, 0x5a, d.len);
                ASSERT_EQ(0, hm::copy(dst, s.p + so, n)) << n;
                ASSERT_EQ(0, memcmp(dst, s.p + so, n)) << "size " << n << " src+" << so << " dst-src " << delta;
                ASSERT_EQ(0x5a, dst[-1]);
                ASSERT_EQ(0x5a, dst[n]);
            }
    mprotect(d.p + 2 * kPage, kPage, PROT_NONE);
    EXPECT_EQ(-EFAULT, hm::copy(d.p + kPage + 16, s.p, 4096));  // dst-src 16: the vector loop
    EXPECT_EQ(-EFAULT, hm::copy(d.p + kPage + 100, s.p, 4096));  // the string move
}

TEST_F(HostMem, StoresWriteExactlyTheirBytes) {
    alignas(8) uint8_t buf[24];
    memset(buf, 0x11, sizeof buf);
    ASSERT_EQ(0, hm::store64(buf + 8, 0x0102030405060708ull));
    uint64_t v;
    memcpy(&v, buf + 8, 8);
    EXPECT_EQ(0x0102030405060708ull, v);
    EXPECT_EQ(0x11, buf[7]);
    EXPECT_EQ(0x11, buf[16]);
    ASSERT_EQ(0, hm::store32(buf, 0xdeadbeef));
    uint32_t w;
    memcpy(&w, buf, 4);
    EXPECT_EQ(0xdeadbeefu, w);
    EXPECT_EQ(0x11, buf[4]);
}

TEST_F(HostMem, FaultsOnEitherSideComeBackAsEfault) {
    Pages ok(2), none(1, PROT_NONE), ro(1, PROT_READ);
    Pages gone(1);
    uint8_t* hole = gone.p;
    munmap(gone.p, gone.len);
    gone.p = nullptr;  // (munmap of nullptr in the destructor fails harmlessly)
    const uint64_t before = hm::faults();
    // Every size class, reading from and writing to memory that is not there.
    for (size_t n : {1, 3, 4, 8, 16, 100, 2048, 4096}) {
        EXPECT_EQ(-EFAULT, hm::copy(ok.p, none.p, n)) << n;
        EXPECT_EQ(-EFAULT, hm::copy(none.p, ok.p, n)) << n;
        EXPECT_EQ(-EFAULT, hm::copy(ro.p, ok.p, n)) << n;  // read-only destination
        EXPECT_EQ(-EFAULT, hm::copy(ok.p, hole, n)) << n;
        EXPECT_EQ(-EFAULT, hm::copy(hole, ok.p, n)) << n;
    }
    EXPECT_EQ(0, hm::copy(ok.p, ro.p, 4096));  // reading read-only memory is fine
    EXPECT_EQ(-EFAULT, hm::store64(ro.p, 1));
    EXPECT_EQ(-EFAULT, hm::store32(hole, 1));
    EXPECT_EQ(0, hm::copy(hole, ok.p, 0));  // 0 bytes touch nothing
    uint32_t v = 7;
    EXPECT_FALSE(hm::load32_acquire(reinterpret_cast<const uint32_t*>(none.p), &v));
    EXPECT_FALSE(hm::load32_acquire(reinterpret_cast<const uint32_t*>(hole), &v));
    memcpy(ok.p, "\xff\xff\xff\xff", 4);  // all ones is a value, not a fault
    EXPECT_TRUE(hm::load32_acquire(reinterpret_cast<const uint32_t*>(ok.p), &v));
    EXPECT_EQ(0xffffffffu, v);
    EXPECT_GE(hm::faults() - before, 5u * 8 + 4);
}

// The NIC atomics' primitives: results, the value they saw, and faults that change nothing.
TEST_F(HostMem, AtomicsReturnThePreviousValueAndFaultCleanly) {
    Pages ok(1), ro(1, PROT_READ), none(1, PROT_NONE);
    auto* w = reinterpret_cast<uint64_t*>(ok.p);
    *w = 40;
    uint64_t old = 0;
    EXPECT_EQ(0, hm::fetch_add64(w, 2, &old));
    EXPECT_EQ(40u, old);
    EXPECT_EQ(42u, *w);
    EXPECT_EQ(0, hm::fetch_add64(w, ~uint64_t{0}, &old));  // adding -1 wraps like the hardware's
    EXPECT_EQ(42u, old);
    EXPECT_EQ(41u, *w);
    EXPECT_EQ(0, hm::cas64(w, 41, 7, &old));  // matches: swapped
    EXPECT_EQ(41u, old);
    EXPECT_EQ(7u, *w);
    EXPECT_EQ(0, hm::cas64(w, 41, 9, &old));  // does not match: unchanged, and says what it saw
    EXPECT_EQ(7u, old);
    EXPECT_EQ(7u, *w);
    const uint64_t before = hm::faults();
    old = 123;
    auto* r = reinterpret_cast<uint64_t*>(ro.p);
    EXPECT_EQ(-EFAULT, hm::fetch_add64(r, 1, &old));  // read-only: a write fault, nothing written
    EXPECT_EQ(-EFAULT, hm::cas64(r, 0, 1, &old));
    EXPECT_EQ(0u, *r);
    EXPECT_EQ(-EFAULT, hm::fetch_add64(reinterpret_cast<uint64_t*>(none.p), 1, &old));
    EXPECT_EQ(-EFAULT, hm::cas64(reinterpret_cast<uint64_t*>(none.p), 0, 1, &old));
    EXPECT_EQ(123u, old);
    EXPECT_EQ(4u, hm::faults() - before);
}

TEST_F(HostMem, AtomicsFromTwoThreadsLoseNothing) {
    Pages ok(1);
    auto* w = reinterpret_cast<uint64_t*>(ok.p);
    constexpr int kEach = 200000;
    auto adder = [&] {
        uint64_t old;
        for (int i = 0; i < kEach; i++) ASSERT_EQ(0, hm::fetch_add64(w, 1, &old));
    };
    auto casser = [&] {  // increments through compare-and-swap retries
        uint64_t old, seen = 0;
        for (int i = 0; i < kEach; i++) {
            for (;;) {
                ASSERT_EQ(0, hm::cas64(w, seen, seen + 1, &old));
                if (old == seen) break;
                seen = old;
            }
            seen++;
        }
    };
    std::thread a(adder), b(casser);
    a.join();
    b.join();
    EXPECT_EQ(2u * kEach, *w);
}

TEST_F(HostMem, CopyThatRunsIntoAHoleStopsThere) {
    Pages two(2);
    mprotect(two.p + kPage, kPage, PROT_NONE);
    std::vector<uint8_t> src(2 * kPage, 0x77);
    // The first page is written, then the copy faults at the boundary.
    EXPECT_EQ(-EFAULT, hm::copy(two.p + kPage - 100, src.data(), 300));
    EXPECT_EQ(-EFAULT, hm::copy(two.p, src.data(), 2 * kPage));
    mprotect(two.p + kPage, kPage, PROT_READ | PROT_WRITE);
    EXPECT_EQ(0, two.p[2 * kPage - 1]);
}

TEST_F(HostMem, SigbusFromATruncatedFileIsAFaultToo) {
    FILE* f = tmpfile();
    ASSERT_NE(nullptr, f);
    ASSERT_EQ(0, ftruncate(fileno(f), static_cast<off_t>(2 * kPage)));
    auto* m = static_cast<uint8_t*>(mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0));
    ASSERT_NE(MAP_FAILED, static_cast<void*>(m));
    ASSERT_EQ(0, ftruncate(fileno(f), 0));
    uint8_t buf[64];
    EXPECT_EQ(-EFAULT, hm::copy(buf, m + kPage, sizeof buf));
    EXPECT_EQ(-EFAULT, hm::copy(m, buf, sizeof buf));
    munmap(m, 2 * kPage);
    fclose(f);
}

// A fault that is not the device's still kills the process with the same signal, or goes
// to the handler that was there before (under ASan: its report, then exit 1).
bool died_of_segv(int status) {
    return (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
}
TEST_F(HostMem, OtherFaultsStillKill) {
    EXPECT_EXIT(
        {
            hm::install();
            Pages none(1, PROT_NONE);
            *reinterpret_cast<volatile int*>(none.p) = 1;
            _exit(0);
        },
        died_of_segv, "");
}

void check_access_both_ways(uint64_t va, uint64_t len, bool write, int want, const char* what) {
    std::string why;
    EXPECT_EQ(want, hm::check_access(va, len, write, &why)) << what << ": " << why;
    EXPECT_EQ(want, hm::check_access(va, len, write, &why, true)) << what << " (text maps): " << why;
    if (want) {
        EXPECT_NE(std::string::npos, why.find("0x")) << why;
    }
}

TEST_F(HostMem, CheckAccessReadsTheMappings) {
    Pages three(3);
    const auto va = reinterpret_cast<uint64_t>(three.p);
    check_access_both_ways(va, 3 * kPage, true, 0, "read-write");
    mprotect(three.p + kPage, kPage, PROT_READ);
    check_access_both_ways(va, 3 * kPage, true, -EFAULT, "a read-only page, write asked");
    check_access_both_ways(va, 3 * kPage, false, 0, "a read-only page, read asked");
    check_access_both_ways(va + kPage + 10, 20, true, -EFAULT, "inside the read-only page");
    mprotect(three.p + kPage, kPage, PROT_NONE);
    check_access_both_ways(va, 3 * kPage, false, -EFAULT, "a PROT_NONE page");
    check_access_both_ways(va, kPage, true, 0, "the page before it");
    munmap(three.p + kPage, kPage);
    check_access_both_ways(va + kPage - 1, 2, false, -EFAULT, "across a hole");
    check_access_both_ways(va + 2 * kPage, kPage, true, 0, "the page after the hole");
    // Reserved, never touched memory is registrable without being committed.
    Pages big(65536, PROT_READ | PROT_WRITE);
    check_access_both_ways(reinterpret_cast<uint64_t>(big.p), big.len, true, 0, "256 MiB reserved");
}

}  // namespace
