// fault transport implementation.
#include "fault_transport.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "nicfw/clock.h"

namespace softvia::nicfw {

namespace {
// CRC-32C (Castagnoli), reflected, table-driven: only fault runs pay for it.
struct Crc32cTable {
    uint32_t t[256];
    Crc32cTable() {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0);
            t[i] = c;
        }
    }
};
const Crc32cTable kCrc;

uint64_t splitmix64(uint64_t& s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#if defined(__x86_64__)
// The SSE4.2 crc32 instruction computes the same CRC-32C, eight bytes per step: the
// checksum of a 4 KiB frame drops from microseconds to a fraction of one.
__attribute__((target("sse4.2"))) uint32_t crc32c_hw(const uint8_t* p, size_t n) {
    uint64_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
    }
    uint32_t c32 = static_cast<uint32_t>(c);
    for (; n; p++, n--) c32 = __builtin_ia32_crc32qi(c32, *p);
    return ~c32;
}
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif
}  // namespace

uint32_t crc32c(const uint8_t* p, size_t n) {
#if defined(__x86_64__)
    if (kHaveSse42) return crc32c_hw(p, n);
#endif
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = kCrc.t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return ~c;
}

bool parse_fault_spec(const std::string& text, FaultSpec* out) {
    FaultSpec s;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (item.empty()) continue;
        size_t eq = item.find('=');
        if (eq == std::string::npos) return false;
        std::string k = item.substr(0, eq), v = item.substr(eq + 1);
        char* end = nullptr;
        if (k == "seed" || k == "delay_us") {
            unsigned long long x = strtoull(v.c_str(), &end, 0);
            if (v.empty() || *end) return false;
            if (k == "seed") s.seed = x;
            else if (x > 10000000) return false;  // at most 10 s
            else s.delay_us = static_cast<uint32_t>(x);
            continue;
        }
        double p = strtod(v.c_str(), &end);
        if (v.empty() || *end || !(p >= 0 && p <= 1)) return false;
        if (k == "drop") s.drop = p;
        else if (k == "dup") s.dup = p;
        else if (k == "reorder") s.reorder = p;
        else if (k == "corrupt") s.corrupt = p;
        else if (k == "delay") s.delay = p;
        else return false;
    }
    *out = s;
    return true;
}

FaultTransport::FaultTransport(std::unique_ptr<Transport> inner, const FaultSpec& spec)
    : inner_(std::move(inner)), spec_(spec), rng_(spec.seed) {}

void FaultTransport::set_spec(const FaultSpec& spec) {
    spec_ = spec;
    rng_ = spec.seed;
}

bool FaultTransport::roll(double p) {
    if (p <= 0) return false;
    return static_cast<double>(splitmix64(rng_) >> 11) * 0x1.0p-53 < p;
}

uint8_t* FaultTransport::tx_reserve(int peer, uint32_t len) {
    if (held_.size() >= kMaxHeld || len > max_frame() || !inner_->peer_alive(peer)) return nullptr;
    // A frame the link had no room for goes first, and until it has gone the link is full
    // for the engine too: back-pressure, not a growing pile of copies.
    if (!held_.empty()) {
        flush_held(-1);
        for (const Held& h : held_)
            if (h.peer == peer && h.due_ns == 0) return nullptr;
    }
    stage_.resize(len + kTrailer);
    return stage_.data();
}

bool FaultTransport::send_now(int peer, const uint8_t* frame, size_t len) {
    uint8_t* p = inner_->tx_reserve(peer, static_cast<uint32_t>(len));
    if (!p) return false;
    memcpy(p, frame, len);
    inner_->tx_commit(peer, static_cast<uint32_t>(len));
    return true;
}

void FaultTransport::tx_commit(int peer, uint32_t len) {
    uint32_t crc = crc32c(stage_.data(), len);
    memcpy(stage_.data() + len, &crc, kTrailer);
    if (roll(spec_.drop)) {
        c_.dropped++;
        return;
    }
    const size_t size = len + kTrailer;
    if (roll(spec_.corrupt)) {
        // One flipped bit anywhere in the frame or its trailer, after the checksum.
        uint64_t bit = splitmix64(rng_) % (size * 8);
        stage_[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
        c_.corrupted++;
    }
    int copies = 1;
    if (roll(spec_.dup)) {
        copies = 2;
        c_.duplicated++;
    }
    // Only a frame that waits is copied; the rest go straight from the stage to the link.
    auto hold = [&](uint64_t due, bool reorder) {
        held_.push_back({peer, std::vector<uint8_t>(stage_.begin(), stage_.begin() + size), due, reorder});
    };
    for (int k = 0; k < copies; k++) {
        if (roll(spec_.delay)) {
            hold(now_ns() + spec_.delay_us * 1000ull, false);
            c_.delayed++;
        } else if (roll(spec_.reorder)) {
            // Goes out right after the next frame to this peer (or within 200 us).
            hold(now_ns() + 200000, true);
            c_.reordered++;
        } else {
            if (!send_now(peer, stage_.data(), size)) hold(0, false);  // link full: keep it
            flush_held(peer);
        }
    }
}

// Sends held frames that are due: delayed ones whose time has come, and frames held back
// for reordering once another frame to their peer has gone (after_peer), or on deadline.
void FaultTransport::flush_held(int after_peer) {
    if (held_.empty()) return;
    uint64_t now = 0;  // read the clock only for a frame that waits on it
    for (size_t i = 0; i < held_.size();) {
        Held& h = held_[i];
        bool due = h.due_ns == 0 || (h.reorder && h.peer == after_peer);
        if (!due) {
            if (!now) now = now_ns();
            due = now >= h.due_ns;
        }
        if (due && (!inner_->peer_alive(h.peer) || send_now(h.peer, h.frame.data(), h.frame.size()))) {
            held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
            i++;
        }
    }
}

int FaultTransport::rx_burst(RxFrame* out, int max) {
    flush_held(-1);
    int n = inner_->rx_burst(out, max);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        RxFrame f = out[i];
        uint32_t crc;
        if (f.len < kTrailer) {
            c_.bad_checksum++;
            continue;
        }
        memcpy(&crc, f.data + f.len - kTrailer, kTrailer);
        if (crc32c(f.data, f.len - kTrailer) != crc) {
            c_.bad_checksum++;  // corrupted on the way: as good as lost
            continue;
        }
        f.len -= kTrailer;
        out[kept++] = f;
    }
    if (n > 0 && kept == 0) inner_->rx_release();  // the engine releases only non-empty bursts
    return kept;
}

void FaultTransport::poll_slow(std::vector<TransportEvent>& events) {
    flush_held(-1);
    size_t first = events.size();
    inner_->poll_slow(events);
    // Frames held for a freed index must not reach whichever peer gets it next.
    for (size_t i = first; i < events.size(); i++)
        if (events[i].kind == PeerEvent::kFreed)
            for (auto it = held_.begin(); it != held_.end();)
                it = it->peer == events[i].peer ? held_.erase(it) : it + 1;
}

}  // namespace softvia::nicfw
