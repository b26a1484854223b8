// tests/unit/crc32c_test.cc -- the fault injector's frame checksum (CRC-32C): known
// answers, and the hardware path agreeing with a bit-at-a-time reference at every
// length and alignment.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "transport/fault/fault_transport.h"

using softvia::nicfw::crc32c;

namespace {

uint32_t crc32c_reference(const uint8_t* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0);
    }
    return ~c;
}

TEST(Crc32c, KnownAnswers) {
    const char* check = "123456789";  // the catalogue's check value for CRC-32C
    EXPECT_EQ(0xE3069283u, crc32c(reinterpret_cast<const uint8_t*>(check), 9));
    EXPECT_EQ(0u, crc32c(nullptr, 0));
    std::vector<uint8_t> zeros(32, 0);
    EXPECT_EQ(0x8A9136AAu, crc32c(zeros.data(), zeros.size()));  // RFC 3720, B.4
    std::vector<uint8_t> ones(32, 0xFF);
    EXPECT_EQ(0x62A8AB43u, crc32c(ones.data(), ones.size()));
}

TEST(Crc32c, MatchesReferenceAtEveryLengthAndAlignment) {
    std::mt19937 rng(7);
    std::vector<uint8_t> buf(9000 + 8);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    for (size_t align = 0; align < 8; align++)
        for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{63}, size_t{64},
                           size_t{4099}, size_t{9000}})
            EXPECT_EQ(crc32c_reference(buf.data() + align, len), crc32c(buf.data() + align, len))
                << "length " << len << " at offset " << align;
}

}  // namespace
