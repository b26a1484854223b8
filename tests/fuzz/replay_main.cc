// tests/fuzz/replay_main.cc -- standalone driver for the frame_fuzzer harness, for
// compilers without libFuzzer (the regular gcc release and ASan builds run it as ctest
// test fuzz.replay).
//
//   frame_fuzz_replay [-n N] [-seed S] [PATH ...]
//
// Runs LLVMFuzzerTestOneInput over every file under each PATH (file or directory),
// then over N pseudo-random inputs from seed S (default 20000 and 1): structured records
// (fuzz_format.h) with random fields, and corpus files with random byte mutations.
// Exit status 0; an invariant violation or sanitizer report aborts the process.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fuzz_format.h"
#include "nicfw/abi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" void frame_fuzzer_print_stats();

namespace {

using Bytes = std::vector<uint8_t>;

Bytes read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class Gen {
public:
    explicit Gen(uint64_t seed) : rng_(seed) {}
    uint32_t r(uint32_t n) { return n ? static_cast<uint32_t>(rng_() % n) : 0; }
    bool p(uint32_t percent) { return r(100) < percent; }

    // Small values most of the time, anything sometimes.
    uint32_t field(uint32_t small) { return p(80) ? r(small) : static_cast<uint32_t>(rng_()); }

    Bytes structured() {
        Bytes in;
        uint32_t records = 1 + r(10);
        for (uint32_t i = 0; i < records; i++) {
            if (p(25)) {
                in.push_back(static_cast<uint8_t>(fuzzfmt::kAction | r(fuzzfmt::kNumTargets) | (r(8) << fuzzfmt::kOpShift)));
                in.push_back(static_cast<uint8_t>(r(256)));
                continue;
            }
            uint8_t ctl = static_cast<uint8_t>(p(90) ? r(fuzzfmt::kNumTargets) : r(16));
            if (p(80)) ctl |= fuzzfmt::kFixup;
            if (p(10)) ctl |= fuzzfmt::kRawSrc;
            if (p(8)) ctl |= fuzzfmt::kRawVersion;
            uint32_t payload = p(70) ? r(300) : (p(80) ? r(9000) : r(40));
            Bytes f(sizeof(nicfw_frame_hdr) + payload);
            for (auto& b : f) b = static_cast<uint8_t>(rng_());
            nicfw_frame_hdr h;
            memcpy(&h, f.data(), sizeof h);
            h.type = static_cast<uint8_t>(p(95) ? 1 + r(NICFW_F_TYPE_MAX) : r(256));
            h.flags = static_cast<uint8_t>(r(4));
            h.msg_len = field(payload + 64);
            h.offset = p(60) ? 0 : field(h.msg_len + 2);
            h.frag_len = field(payload + 8);
            h.imm = field(4);
            h.seq = field(8);
            memcpy(f.data(), &h, sizeof h);
            if (p(3)) f.resize(r(static_cast<uint32_t>(f.size())));  // truncated frame
            uint32_t len = static_cast<uint32_t>(f.size());
            in.push_back(ctl);
            in.push_back(static_cast<uint8_t>(len));
            in.push_back(static_cast<uint8_t>(len >> 8));
            in.insert(in.end(), f.begin(), f.end());
        }
        return in;
    }

    Bytes mutate(const Bytes& seed) {
        Bytes in = seed;
        if (in.empty()) return structured();
        uint32_t n = 1 + r(8);
        for (uint32_t i = 0; i < n; i++) {
            switch (r(4)) {
                case 0: in[r(static_cast<uint32_t>(in.size()))] ^= static_cast<uint8_t>(1u << r(8)); break;
                case 1: in[r(static_cast<uint32_t>(in.size()))] = static_cast<uint8_t>(rng_()); break;
                case 2: in.resize(r(static_cast<uint32_t>(in.size())) + 1); break;
                default: {
                    Bytes extra = structured();
                    in.insert(in.end(), extra.begin(), extra.end());
                    break;
                }
            }
        }
        return in;
    }

private:
    std::mt19937_64 rng_;
};

}  // namespace

int main(int argc, char** argv) {
    uint64_t n = 20000, seed = 1;
    std::vector<std::filesystem::path> paths;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            n = strtoull(argv[++i], nullptr, 0);
        } else if (!strcmp(argv[i], "-seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], nullptr, 0);
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [-n N] [-seed S] [PATH ...]\n", argv[0]);
            return 2;
        } else {
            paths.emplace_back(argv[i]);
        }
    }
    std::vector<Bytes> corpus;
    for (const auto& p : paths) {
        std::error_code ec;
        if (std::filesystem::is_directory(p, ec)) {
            std::vector<std::filesystem::path> files;
            for (const auto& ent : std::filesystem::directory_iterator(p))
                if (ent.is_regular_file()) files.push_back(ent.path());
            std::sort(files.begin(), files.end());
            for (const auto& f : files) corpus.push_back(read_file(f));
        } else if (std::filesystem::is_regular_file(p, ec)) {
            corpus.push_back(read_file(p));
        } else {
            fprintf(stderr, "frame_fuzz_replay: %s: no such file or directory\n", p.c_str());
            return 2;
        }
    }
    for (const Bytes& in : corpus) LLVMFuzzerTestOneInput(in.data(), in.size());
    printf("frame_fuzz_replay: %zu corpus inputs\n", corpus.size());
    Gen g(seed);
    for (uint64_t i = 0; i < n; i++) {
        Bytes in = (!corpus.empty() && g.p(30)) ? g.mutate(corpus[g.r(static_cast<uint32_t>(corpus.size()))])
                                                : g.structured();
        LLVMFuzzerTestOneInput(in.data(), in.size());
    }
    printf("frame_fuzz_replay: %llu generated inputs (seed %llu)\n", static_cast<unsigned long long>(n),
           static_cast<unsigned long long>(seed));
    frame_fuzzer_print_stats();
    return 0;
}
