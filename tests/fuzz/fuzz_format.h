// tests/fuzz/fuzz_format.h -- the input format of frame_fuzzer, shared by the harness
// (frame_fuzzer.cc), the seed generator (gen_corpus.cc) and the replay driver.
//
// An input is a sequence of records, read until the bytes run out:
//
//   frame record:  [ctl (bit 7 clear)] [len lo] [len hi] [len bytes of frame]
//   action record: [ctl (bit 7 set)]   [arg]
//
// A frame record hands its bytes (one frame: nicfw_frame_hdr, then payload) to
// Engine::inject_frame(0, ...): the engine's self link, so the frame looks like it came
// from the engine's own VIs. Before that the harness patches the header:
//   - ctl bits 0-3 pick a target (enum Target). For a real target, dst_vi becomes the
//     target VI's id and src_vi its connected partner's id (unless kRawSrc). Values
//     >= kNumTargets leave both ids as the input has them.
//   - version becomes NICFW_ABI_VERSION unless kRawVersion.
//   - kFixup makes the fields of the frame's type plausible (see fixup() in the harness):
//     fragment fields that fit the frame, RDMA extension naming a real region
//     (nicfw_rdma_ext.reserved & 3: enum ExtSel), read-response fields matching the
//     target's outstanding read, request ids matching the target's connect request,
//     connection payload discriminators (nicfw_conn_payload.rdma_write >> 1 & 3: enum
//     DiscSel).
// An action record makes the harness act as the driver on target ctl bits 0-3 (modulo
// kNumTargets): op = ctl bits 4-6 (enum Op), arg as documented there.
#pragma once

#include <cstdint>

namespace fuzzfmt {

constexpr uint8_t kAction = 0x80;
constexpr uint8_t kTargetMask = 0x0F;
constexpr uint8_t kFixup = 0x10;       // frame: make the type's fields plausible
constexpr uint8_t kRawSrc = 0x20;      // frame: keep src_vi from the input
constexpr uint8_t kRawVersion = 0x40;  // frame: keep version from the input
constexpr unsigned kOpShift = 4;

// The VIs frames and actions are aimed at. Four peer-to-peer pairs on the engine's self
// link, a client whose connect request waits at a listener, and a VI waiting in a
// peer-to-peer connect request nobody answers.
enum Target : uint8_t {
    kUnrelA = 0, kUnrelB = 1,  // unreliable, RDMA write
    kRdA = 2, kRdB = 3,        // reliable delivery, RDMA write + read, request/reply steering
    kRrA = 4, kRrB = 5,        // reliable reception, RDMA write + read
    kNoRdmaA = 6, kNoRdmaB = 7,  // reliable delivery, no RDMA, second protection tag
    kClient = 8,               // CONNECT_PENDING client (request matched by a listener)
    kPeerWait = 9,             // CONNECT_PENDING peer-to-peer request
    kNumTargets = 10,
    kRawIds = 15               // any value >= kNumTargets: ids untouched
};

// Action ops (ctl bits 4-6).
enum Op : uint8_t {
    kOpProgress = 0,    // one Engine::progress(); if arg & 0x80 instead post a malformed receive
                        //   descriptor (variant arg & 7, see Harness::post_bad_recv)
    kOpSend = 1,        // send: len = (arg & 0x3F) * 128, reply class (steering) if arg & 0x40,
                        //   immediate data if arg & 0x80
    kOpFencedSend = 2,  // as kOpSend, with VIP_CONTROL_QFENCE
    kOpRdmaWrite = 3,   // RDMA write to the 1 MiB window: imm if arg & 1, len = (arg >> 1 & 15) * 512,
                        //   offset = (arg >> 5) * 128 KiB; reply class if imm and arg & 0x20
    kOpRdmaRead = 4,    // RDMA read from the window: len = (arg & 15) * 256, offset = (arg >> 4) * 64 KiB;
                        //   (arg & 15) == 15: a NIC atomic on the window's word (arg >> 5)
                        //   instead, compare-and-swap if arg & 0x10, else fetch-add
    kOpBadRemote = 5,   // RDMA write (arg & 1 == 0) or read naming a buffer the target must
                        //   refuse: (arg >> 1 & 3) = other-ptag region, no-RDMA region,
                        //   bogus handle, window overrun
    kOpDisconnect = 6,  // Engine::disconnect(target)
    kOpDrain = 7        // progress until idle
};

// RDMA extension selector under kFixup (nicfw_rdma_ext.reserved & 3).
enum ExtSel : uint8_t {
    kExtWindow = 0,   // memh = the window, addr = window + addr % window length
    kExtDesc = 1,     // the target's own descriptor region (registered, RDMA off)
    kExtForeign = 2,  // a region with RDMA on under the other protection tag
    kExtRaw = 3       // addr and memh as the input has them
};

// Connection payload selector under kFixup ((nicfw_conn_payload.rdma_write >> 1) & 3).
enum DiscSel : uint8_t {
    kDiscClip = 0,      // discriminator lengths clipped to what the payload holds
    kDiscPeerWait = 1,  // crossed discriminators of kPeerWait (src = its remote, dst = its local)
    kDiscListen = 2,    // CONN_REQ discriminator of the harness's open listener
    kDiscServer = 3     // the discriminator kClient's request waits at (already matched)
};

inline constexpr char kPeerWaitLocal[] = "fz-q-local";
inline constexpr char kPeerWaitRemote[] = "fz-q-remote";
inline constexpr char kListenDisc[] = "fz-listen";
inline constexpr char kServerDisc[] = "fz-server";

constexpr uint32_t kWindowBytes = 1u << 20;  // the RDMA window (registered, RDMA write + read)

}  // namespace fuzzfmt
