// tests/fuzz/gen_corpus.cc -- writes the seed inputs of frame_fuzzer (tests/fuzz/corpus).
//
//   frame_fuzz_gen_corpus DIR             seeds (tests/fuzz/corpus)
//   frame_fuzz_gen_corpus --crashes DIR   reproducers of known reports (tests/fuzz/crashes)
//
// Each seed is a short, valid conversation in the harness's input format
// (fuzz_format.h): well-formed frames of one kind aimed at the right targets, with the
// driver actions that make the answers meaningful (a pending RDMA read before a read
// response, an unacknowledged send before an ACK or NAK). The harness patches VI ids and
// (kFixup) request ids, so the seeds hold no run-specific values.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_format.h"
#include "nicfw/abi.h"

using namespace fuzzfmt;

namespace {

constexpr uint32_t kHdr = sizeof(nicfw_frame_hdr);
constexpr uint32_t kFixed = offsetof(nicfw_conn_payload, disc);

nicfw_frame_hdr hdr(uint8_t type, uint8_t flags = 0) {
    nicfw_frame_hdr h{};
    h.type = type;
    h.version = NICFW_ABI_VERSION;
    h.flags = flags;
    h.dst_vi = 0xFFFFFFFFu;
    return h;
}

// seq: the message's sequence number on its connection (each connection counts from 0;
// the harness re-creates used pairs, so every input starts at 0).
nicfw_frame_hdr data_hdr(uint8_t type, uint32_t seq, uint32_t msg_len, uint32_t offset, uint32_t frag_len,
                         uint8_t flags, uint32_t imm = 0) {
    nicfw_frame_hdr h = hdr(type, flags);
    h.seq = seq;
    h.msg_len = msg_len;
    h.offset = offset;
    h.frag_len = frag_len;
    h.imm = imm;
    return h;
}

struct Seed {
    std::string name;
    std::vector<uint8_t> bytes;

    void frame(uint8_t ctl, const nicfw_frame_hdr& h, const std::vector<uint8_t>& payload = {}) {
        uint32_t len = kHdr + static_cast<uint32_t>(payload.size());
        bytes.push_back(ctl);
        bytes.push_back(static_cast<uint8_t>(len));
        bytes.push_back(static_cast<uint8_t>(len >> 8));
        const uint8_t* p = reinterpret_cast<const uint8_t*>(&h);
        bytes.insert(bytes.end(), p, p + kHdr);
        bytes.insert(bytes.end(), payload.begin(), payload.end());
    }
    void raw_frame(uint8_t ctl, const std::vector<uint8_t>& f) {
        bytes.push_back(ctl);
        bytes.push_back(static_cast<uint8_t>(f.size()));
        bytes.push_back(static_cast<uint8_t>(f.size() >> 8));
        bytes.insert(bytes.end(), f.begin(), f.end());
    }
    void action(uint8_t target, uint8_t op, uint8_t arg) {
        bytes.push_back(static_cast<uint8_t>(kAction | target | (op << kOpShift)));
        bytes.push_back(arg);
    }
};

std::vector<uint8_t> fill(uint32_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (uint32_t i = 0; i < n; i++) v[i] = static_cast<uint8_t>(seed + i * 13);
    return v;
}

// RDMA extension (selector in reserved, see fuzz_format.h ExtSel) followed by data.
std::vector<uint8_t> rdma(ExtSel sel, uint64_t addr, uint32_t data_len, uint8_t seed = 0x40) {
    nicfw_rdma_ext x{addr, 0, sel};
    std::vector<uint8_t> v(reinterpret_cast<uint8_t*>(&x), reinterpret_cast<uint8_t*>(&x) + sizeof x);
    auto d = fill(data_len, seed);
    v.insert(v.end(), d.begin(), d.end());
    return v;
}

// Connection payload: discriminators chosen by the harness (sel), or the given ones.
std::vector<uint8_t> conn(uint16_t reliability, DiscSel sel, const char* src = "", const char* dst = "") {
    nicfw_conn_payload pl{};
    pl.reliability = reliability;
    pl.rdma_write = static_cast<uint8_t>(sel << 1);
    pl.max_transfer = NICFW_MAX_TRANSFER;
    size_t ls = strlen(src), ld = strlen(dst);
    pl.src_disc_len = static_cast<uint16_t>(ls);
    pl.dst_disc_len = static_cast<uint16_t>(ld);
    memcpy(pl.disc, src, ls);
    memcpy(pl.disc + ls, dst, ld);
    // Room for the longest discriminators the harness may substitute.
    size_t len = kFixed + std::max<size_t>(ls + ld, 32);
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&pl);
    return std::vector<uint8_t>(p, p + len);
}

std::vector<Seed> seeds() {
    std::vector<Seed> out;
    const uint8_t F = kFixup;
    {
        Seed s{"data_unreliable", {}};
        s.frame(kUnrelB, data_hdr(NICFW_F_DATA, 0, 100, 0, 100, NICFW_FF_LAST), fill(100, 1));
        s.frame(kUnrelA, data_hdr(NICFW_F_DATA, 0, 300, 0, 200, 0), fill(200, 2));
        s.frame(kUnrelA, data_hdr(NICFW_F_DATA, 0, 300, 200, 100, NICFW_FF_LAST | NICFW_FF_IMMEDIATE, 0x1234), fill(100, 3));
        out.push_back(s);
    }
    {
        // Fills receive slots 0..3 of a reliable VI in order: one segment, two segments
        // with a gap, a zero-length segment first, and one too small (breaks the VI).
        Seed s{"data_reliable_scatter", {}};
        s.frame(kRdB, data_hdr(NICFW_F_DATA, 0, 3000, 0, 2000, 0), fill(2000, 4));
        s.frame(kRdB, data_hdr(NICFW_F_DATA, 0, 3000, 2000, 1000, NICFW_FF_LAST | NICFW_FF_IMMEDIATE, 7), fill(1000, 5));
        s.frame(kRdB, data_hdr(NICFW_F_DATA, 1, 3000, 0, 3000, NICFW_FF_LAST), fill(3000, 6));
        s.frame(kRdB, data_hdr(NICFW_F_DATA, 2, 100, 0, 100, NICFW_FF_LAST), fill(100, 7));
        s.frame(kRdB, data_hdr(NICFW_F_DATA, 3, 20, 0, 20, NICFW_FF_LAST), fill(20, 8));
        out.push_back(s);
    }
    {
        Seed s{"data_reliable_reception_ack", {}};
        s.frame(kRrB, data_hdr(NICFW_F_DATA, 0, 64, 0, 64, NICFW_FF_LAST), fill(64, 9));
        s.action(kRrA, kOpSend, 0x81);  // 64 bytes with immediate data
        s.action(kRrA, kOpProgress, 0);
        nicfw_frame_hdr ack = hdr(NICFW_F_ACK);
        ack.imm = 1;
        s.frame(kRrA, ack);
        s.action(kRrA, kOpDrain, 0);
        out.push_back(s);
    }
    {
        Seed s{"rdma_write", {}};
        s.frame(kRdB | F, data_hdr(NICFW_F_RDMA_WRITE, 0, 512, 0, 512, NICFW_FF_LAST | NICFW_FF_IMMEDIATE, 9),
                rdma(kExtWindow, 0x1000, 512));
        s.frame(kUnrelB | F, data_hdr(NICFW_F_RDMA_WRITE, 0, 256, 0, 256, NICFW_FF_LAST), rdma(kExtWindow, 0x3000, 256));
        s.frame(kRrB | F, data_hdr(NICFW_F_RDMA_WRITE, 0, 128, 0, 128, NICFW_FF_LAST), rdma(kExtForeign, 0, 128));
        s.frame(kNoRdmaB | F, data_hdr(NICFW_F_RDMA_WRITE, 0, 128, 0, 128, NICFW_FF_LAST), rdma(kExtWindow, 0, 128));
        s.frame(kUnrelA | F, data_hdr(NICFW_F_RDMA_WRITE, 0, 64, 0, 64, NICFW_FF_LAST), rdma(kExtDesc, 64, 64));
        out.push_back(s);
    }
    {
        Seed s{"read_req", {}};
        nicfw_frame_hdr h = hdr(NICFW_F_READ_REQ);
        h.msg_len = 1024;
        h.seq = 3;
        s.frame(kRdB | F, h, rdma(kExtWindow, 0x2000, 0));
        s.frame(kRrB | F, h, rdma(kExtDesc, 0, 0));
        s.frame(kNoRdmaA | F, h, rdma(kExtForeign, 0, 0));
        out.push_back(s);
    }
    {
        // An RDMA read in flight (request sent, answer not yet back): a forged answer.
        Seed s{"read_resp", {}};
        s.action(kRdA, kOpRdmaRead, 0x04);  // 1 KiB from the window
        s.action(kRdA, kOpProgress, 0);
        s.frame(kRdA | F, data_hdr(NICFW_F_READ_RESP, 0, 1024, 0, 1024, NICFW_FF_LAST), fill(1024, 10));
        out.push_back(s);
    }
    {
        // NIC atomics: requests for the window (aligned and not) and for regions that
        // refuse them, then an atomic in flight and a forged answer for it.
        Seed s{"atomics", {}};
        nicfw_frame_hdr h = hdr(NICFW_F_ATOMIC_REQ);
        h.msg_len = 8;
        h.imm = NICFW_OFFLOAD_OP_FETCH_ADD;
        const nicfw_atomic_args args{{5, 0}};
        auto req = [&](ExtSel sel, uint64_t addr) {
            auto v = rdma(sel, addr, 0);
            v.insert(v.end(), reinterpret_cast<const uint8_t*>(&args),
                     reinterpret_cast<const uint8_t*>(&args) + sizeof args);
            return v;
        };
        s.frame(kRdB | F, h, req(kExtWindow, 0x100));
        h.seq = 1;
        h.imm = NICFW_OFFLOAD_OP_CMP_SWAP;
        s.frame(kRdB | F, h, req(kExtWindow, 0x104));
        s.frame(kRrB | F, h, req(kExtForeign, 0x8));
        s.frame(kUnrelB | F, h, req(kExtWindow, 0x8));
        s.action(kRdA, kOpRdmaRead, 0x2F);  // a fetch-add on word 1 of the window
        s.action(kRdA, kOpProgress, 0);
        nicfw_frame_hdr a = hdr(NICFW_F_ATOMIC_RESP);
        a.msg_len = 8;
        s.frame(kRdA | F, a, fill(8, 3));
        // A same-host grant naming descriptors of this process (none is a grant page).
        nicfw_frame_hdr g = hdr(NICFW_F_ATOMIC_GRANT);
        const nicfw_atomic_grant grant{0x1000, 4096, 0, 3, 4, 1, 0, 1, 0};
        g.msg_len = sizeof grant;
        s.frame(kRdA | F, g,
                std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&grant),
                                     reinterpret_cast<const uint8_t*>(&grant) + sizeof grant));
        out.push_back(s);
    }
    {
        // An RDMA write waiting for the target's verdict: a NAK for it.
        Seed s{"nak", {}};
        s.action(kRdA, kOpRdmaWrite, 0x02);  // 512 bytes
        s.action(kRdA, kOpProgress, 0);
        nicfw_frame_hdr nak = hdr(NICFW_F_NAK);
        nak.imm = NICFW_DS_RDMA_PROT_ERROR;
        s.frame(kRdA, nak);
        out.push_back(s);
    }
    {
        Seed s{"conn_req", {}};
        nicfw_frame_hdr h = hdr(NICFW_F_CONN_REQ);
        h.src_vi = 0x00010007;
        h.seq = 42;
        auto pl = conn(NICFW_REL_RELIABLE_DELIVERY, kDiscListen);
        h.msg_len = static_cast<uint32_t>(pl.size());
        s.frame(kRawIds | F, h, pl);
        auto other = conn(NICFW_REL_UNRELIABLE, kDiscClip, "", "nobody");
        h.msg_len = static_cast<uint32_t>(other.size());
        s.frame(kRawIds, h, other);
        out.push_back(s);
    }
    {
        // Answers to the pending client: accept (then data on the new connection),
        // reject, no match.
        Seed s{"conn_accept", {}};
        nicfw_frame_hdr h = hdr(NICFW_F_CONN_ACCEPT);
        h.src_vi = 0x00030002;
        auto pl = conn(NICFW_REL_RELIABLE_DELIVERY, kDiscClip);
        h.msg_len = static_cast<uint32_t>(pl.size());
        s.frame(kClient | F | kRawSrc, h, pl);
        s.frame(kClient, data_hdr(NICFW_F_DATA, 0, 48, 0, 48, NICFW_FF_LAST), fill(48, 11));
        out.push_back(s);
        Seed r{"conn_reject", {}};
        r.frame(kClient | F, hdr(NICFW_F_CONN_REJECT));
        out.push_back(r);
        Seed n{"conn_nomatch", {}};
        n.frame(kClient | F, hdr(NICFW_F_CONN_NOMATCH));
        out.push_back(n);
    }
    {
        // The waiting peer-to-peer request meets a forged request with crossed
        // discriminators, then takes data on the new connection.
        Seed s{"peer_req", {}};
        nicfw_frame_hdr h = hdr(NICFW_F_PEER_REQ);
        h.src_vi = 0x00020005;
        h.seq = 9;
        auto pl = conn(NICFW_REL_RELIABLE_RECEPTION, kDiscPeerWait);
        h.msg_len = static_cast<uint32_t>(pl.size());
        s.frame(kPeerWait | F | kRawSrc, h, pl);
        s.frame(kPeerWait, data_hdr(NICFW_F_DATA, 0, 32, 0, 32, NICFW_FF_LAST), fill(32, 12));
        s.action(kPeerWait, kOpDrain, 0);
        out.push_back(s);
        Seed a{"peer_ack", {}};
        nicfw_frame_hdr k = hdr(NICFW_F_PEER_ACK);
        k.src_vi = 0x00040001;
        a.frame(kPeerWait | F | kRawSrc, k, pl);
        out.push_back(a);
    }
    {
        // Steering (reliable-delivery pair): a reply-class message goes to the reply
        // receive queue, a request to the ordinary one; and the same from the driver.
        Seed s{"steering_reply", {}};
        s.frame(kRdB, data_hdr(NICFW_F_DATA, 0, 700, 0, 700, NICFW_FF_LAST | NICFW_FF_REPLY), fill(700, 14));
        s.frame(kRdB, data_hdr(NICFW_F_DATA, 1, 70, 0, 70, NICFW_FF_LAST), fill(70, 15));
        s.frame(kRdB | F, data_hdr(NICFW_F_RDMA_WRITE, 2, 64, 0, 64, NICFW_FF_LAST | NICFW_FF_IMMEDIATE | NICFW_FF_REPLY, 5),
                rdma(kExtWindow, 0x8000, 64));
        s.action(kRdA, kOpSend, 0xC4);  // 512 bytes, reply, immediate data
        s.action(kRdA, kOpRdmaWrite, 0x23);
        s.action(kRdA, kOpDrain, 0);
        out.push_back(s);
    }
    {
        // Malformed receive descriptors behind the four good ones: the fifth message meets
        // one (reserved control bit) on an unreliable VI; an RDMA write with immediate
        // data consumes one (stale segment handle: fine for it) on a reliable VI.
        Seed s{"bad_recv_desc", {}};
        s.action(kUnrelB, kOpProgress, 0x80);
        for (uint32_t seq = 0; seq < 5; seq++)
            s.frame(kUnrelB, data_hdr(NICFW_F_DATA, seq, 8, 0, 8, NICFW_FF_LAST), fill(8, static_cast<uint8_t>(seq)));
        s.action(kRrB, kOpProgress, 0x86);
        for (uint32_t seq = 0; seq < 4; seq++)
            s.frame(kRrB, data_hdr(NICFW_F_DATA, seq, 8, 0, 8, NICFW_FF_LAST), fill(8, static_cast<uint8_t>(seq)));
        s.frame(kRrB | F, data_hdr(NICFW_F_RDMA_WRITE, 4, 32, 0, 32, NICFW_FF_LAST | NICFW_FF_IMMEDIATE, 3),
                rdma(kExtWindow, 0x4000, 32));
        // ... and one the NIC cannot read at all (posted with a handle that does not hold
        // it), consumed by an RDMA write with immediate data on an unreliable VI.
        s.action(kUnrelA, kOpProgress, 0x84);
        for (uint32_t seq = 0; seq < 4; seq++)
            s.frame(kUnrelA, data_hdr(NICFW_F_DATA, seq, 8, 0, 8, NICFW_FF_LAST), fill(8, static_cast<uint8_t>(seq)));
        s.frame(kUnrelA | F, data_hdr(NICFW_F_RDMA_WRITE, 4, 32, 0, 32, NICFW_FF_LAST | NICFW_FF_IMMEDIATE, 4),
                rdma(kExtWindow, 0x5000, 32));
        out.push_back(s);
    }
    {
        Seed s{"disconnect", {}};
        s.frame(kRdB, hdr(NICFW_F_DISCONNECT));
        s.action(kRdB, kOpSend, 0x10);
        s.frame(kUnrelA, hdr(NICFW_F_DISCONNECT));
        s.action(kRrA, kOpDisconnect, 0);
        s.action(kRrA, kOpDrain, 0);
        out.push_back(s);
    }
    {
        // Header checks: short frame, bad version, bad types.
        Seed s{"bad_headers", {}};
        s.raw_frame(kUnrelB, {NICFW_F_DATA, NICFW_ABI_VERSION, 0, 0});
        nicfw_frame_hdr h = data_hdr(NICFW_F_DATA, 0, 8, 0, 8, NICFW_FF_LAST);
        h.version = 7;
        s.frame(kUnrelB | kRawVersion, h, fill(8, 13));
        h = hdr(0);
        s.frame(kUnrelB, h);
        h = hdr(NICFW_F_TYPE_MAX + 1);
        s.frame(kUnrelB, h);
        out.push_back(s);
    }
    {
        // Driver traffic alone: sends, fenced send behind a read, RDMA both ways, refused
        // remote buffers.
        Seed s{"driver_traffic", {}};
        s.action(kUnrelA, kOpSend, 0x7F);
        s.action(kRdA, kOpRdmaRead, 0x13);
        s.action(kRdA, kOpFencedSend, 0x81);
        s.action(kRrB, kOpRdmaWrite, 0x1F);
        s.action(kRdB, kOpBadRemote, 0x00);
        s.action(kRrA, kOpBadRemote, 0x03);
        s.action(kNoRdmaA, kOpRdmaWrite, 0x04);
        s.action(kUnrelA, kOpDrain, 0);
        out.push_back(s);
    }
    return out;
}

// Reproducers of reports the fuzzer found (tests/fuzz/crashes/README.md).
std::vector<Seed> crashes() {
    std::vector<Seed> out;
    {
        // Three messages to an unreliable VI: the third takes receive slot 2, whose
        // descriptor has three data segments; Engine::validate_segments reads DS[2] of a
        // nicfw_desc that declares DS[2] (UBSan array-bounds).
        Seed s{"ubsan-validate-segments-ds-index", {}};
        for (uint32_t seq = 0; seq < 3; seq++)
            s.frame(kUnrelB, data_hdr(NICFW_F_DATA, seq, 8, 0, 8, NICFW_FF_LAST), fill(8, static_cast<uint8_t>(seq)));
        out.push_back(s);
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    bool want_crashes = argc == 3 && !strcmp(argv[1], "--crashes");
    if (argc != 2 && !want_crashes) {
        fprintf(stderr, "usage: %s DIR          (seed corpus)\n       %s --crashes DIR (reproducers)\n", argv[0], argv[0]);
        return 2;
    }
    std::string dir = argv[argc - 1];
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        perror(dir.c_str());
        return 1;
    }
    for (const Seed& s : want_crashes ? crashes() : seeds()) {
        std::string path = dir + "/" + s.name;
        FILE* f = fopen(path.c_str(), "wb");
        if (!f || fwrite(s.bytes.data(), 1, s.bytes.size(), f) != s.bytes.size() || fclose(f) != 0) {
            perror(path.c_str());
            return 1;
        }
        printf("%s (%zu bytes)\n", path.c_str(), s.bytes.size());
    }
    return 0;
}
