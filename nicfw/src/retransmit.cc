// retransmit.cc -- reliable VIs on a lossy wire: go-back-N retransmission, the
// retransmit and retry timers, and the receiver's GAP acknowledgements.
//
// The sender keeps every request in Vi::pending until the target acknowledges it
// (cumulative ACK: seq = the next request it expects) or, for an RDMA read, answers it.
// The receiver takes exactly the next sequence number. Once kGapFramesBeforeNak frames
// beyond it have arrived (one reordered frame is not a loss), it sends an ACK flagged
// NICFW_FF_GAP and the sender resends from there at once, at most once per RTO for the
// same request. Otherwise the retransmit timer (measured from ACK round trips) resends
// from the oldest unanswered request, doubling up to kRtoMaxNs; no progress for the VI's
// retry timeout loses the connection. docs/reliability.md has the whole protocol.
#include <algorithm>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include "nicfw/engine.h"
#include "datapath.h"

namespace softvia::nicfw {

// Every request of a reliable VI on a lossy wire is timestamped when sent and when
// acknowledged, two clock reads per message on the latency path: read the TSC (invariant
// TSCs only, CPUID 0x80000007 EDX bit 8) and scale it, once it has been calibrated
// against CLOCK_MONOTONIC over 10 ms; until then, and without such a TSC, now_ns().
//
// Each end of the calibration is a (clock, TSC) pair whose clock read lies between two
// close TSC reads: a pair with a preemption inside skews the scale. Unbracketed, one
// process lost its core for 145 ms between its clock read and TSC read (a CPUID, a 20 us
// VM exit here, sat in between), scaled by 334 ns/tick instead of 0.41, and its VIs hit
// the 5 s retry timeout after 6 ms (multihost am_getput4 under ASan, 1 run in 35).
constexpr uint64_t kTscPairMaxTicks = 100000;  // ~40 us at 2.4 GHz; a pair takes 84 ticks here

uint64_t Engine::rtx_clock() {
#if defined(__x86_64__)
    if (tsc_calibrated_) {
        uint64_t ticks = __rdtsc() - tsc0_;
        return tsc_ns0_ + static_cast<uint64_t>(static_cast<double>(ticks) * ns_per_tick_);
    }
    if (!tsc_probed_) {
        unsigned a, b, c, d;
        tsc_usable_ = __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8));
        tsc_probed_ = true;
    }
    if (!tsc_usable_) return now_ns();
    uint64_t t0 = __rdtsc();
    uint64_t now = now_ns();
    uint64_t t1 = __rdtsc();
    if (t1 - t0 > kTscPairMaxTicks) return now;  // interrupted between the reads: not a pair
    uint64_t tsc = t0 + (t1 - t0) / 2;
    if (tsc0_ == 0) {
        tsc0_ = tsc;
        tsc_ns0_ = now;
    } else if (now - tsc_ns0_ >= 10000000) {
        double scale = tsc > tsc0_ ? static_cast<double>(now - tsc_ns0_) / static_cast<double>(tsc - tsc0_) : 0;
        if (scale > 0.05 && scale < 20) {  // 50 MHz .. 20 GHz, else start over
            ns_per_tick_ = scale;
            tsc_calibrated_ = true;
        } else {
            tsc0_ = tsc;
            tsc_ns0_ = now;
        }
    }
    return now;
#else
    return now_ns();
#endif
}

int Engine::set_retry_timeout(Vi* vi, uint64_t ms) {
    if (ms == 0 || ms > kMaxRetryTimeoutMs) return -EINVAL;
    CtlGuard g(lock_, ctl_waiters_);
    uint64_t old = vi->retry_ns;
    vi->retry_ns = ms * 1000000ull;
    if (vi->rto_at) vi->give_up_at = vi->give_up_at - old + vi->retry_ns;  // a running clock keeps its start
    return 0;
}

// The retransmit timeout from the round trip estimate (RFC 6298's srtt + 4 rttvar),
// floored so a process that loses its core for a moment is not taken for a loss.
static uint64_t base_rto(const Vi& vi) {
    if (vi.srtt_ns == 0) return kRtoInitialNs;
    return std::clamp(vi.srtt_ns + 4 * vi.rttvar_ns, kRtoMinNs, kRtoMaxNs);
}

void Engine::rtt_sample(Vi& vi, uint64_t rtt) {
    if (vi.srtt_ns == 0) {
        vi.srtt_ns = rtt;
        vi.rttvar_ns = rtt / 2;
        return;
    }
    uint64_t dev = rtt > vi.srtt_ns ? rtt - vi.srtt_ns : vi.srtt_ns - rtt;
    vi.rttvar_ns = (3 * vi.rttvar_ns + dev) / 4;
    vi.srtt_ns = (7 * vi.srtt_ns + rtt) / 8;
}

// Starts (or restarts) both timers of vi: requests are in flight and answers came.
void Engine::arm_rtx(Vi& vi, uint64_t now) {
    vi.rto_ns = base_rto(vi);
    vi.rto_at = now + vi.rto_ns;
    vi.give_up_at = now + vi.retry_ns;
    if (!vi.rtx_listed) {
        vi.rtx_listed = true;
        rtx_timed_.push_back(&vi);
    }
}

// A request was answered (acknowledged, or its read data arrived in full).
void Engine::tx_progress(Vi& vi, uint64_t now) {
    if (vi.pending.empty())
        vi.rto_at = 0;  // nothing in flight: the timers stop (rtx_timers drops the listing)
    else
        arm_rtx(vi, now);
}

// Go-back-N: every unanswered request from seq on goes again, in order. A new request
// being transmitted finishes first.
void Engine::go_back(Vi& vi, uint32_t seq) {
    if (vi.pending.empty()) return;
    uint32_t first = vi.pending.front().seq;
    if (static_cast<int32_t>(seq - first) < 0) seq = first;
    vi.rtx_next = seq;
    vi.rtx_end = vi.tx_seq;
    list_tx(vi);
}

// The peer reported a hole at seq (GAP ACK), or a read's answer skipped a fragment.
void Engine::on_gap(Vi& vi, uint32_t seq) {
    uint64_t now = rtx_clock();
    // The frames already on the wire behind the hole report it too: go back once.
    if (seq == vi.gap_seq && now - vi.gap_ns < vi.rto_ns) return;
    vi.gap_seq = seq;
    vi.gap_ns = now;
    go_back(vi, seq);
}

// No progress for the retry timeout: the connection is lost. What was in flight
// completes with a transport error, the rest is flushed, and the error callback hears
// VIP_ERROR_CONN_LOST.
void Engine::give_up(Vi& vi) {
    for (TxEntry& e : vi.pending) {
        if (e.done) continue;
        e.status = VIP_STATUS_TRANSPORT_ERROR;
        e.done = true;
    }
    flush_vi(vi, VIP_STATE_ERROR, true, VIP_ERROR_CONN_LOST);
}

bool Engine::rtx_timers() {
    bool did = false;
    const uint64_t now = rtx_clock();  // the timers' own clock (their deadlines come from it)
    for (size_t i = 0; i < rtx_timed_.size();) {
        Vi* vi = rtx_timed_[i];
        bool drop = vi->rto_at == 0 || vi->pending.empty() ||
                    vi->state.load(std::memory_order_relaxed) != VIP_STATE_CONNECTED;
        if (!drop && static_cast<int64_t>(now - vi->give_up_at) >= 0) {
            give_up(*vi);
            did = drop = true;
        }
        if (drop) {
            vi->rtx_listed = false;
            vi->rto_at = 0;
            rtx_timed_[i] = rtx_timed_.back();
            rtx_timed_.pop_back();
            continue;
        }
        if (static_cast<int64_t>(now - vi->rto_at) >= 0) {
            go_back(*vi, vi->pending.front().seq);
            vi->rto_ns = std::min(vi->rto_ns * 2, kRtoMaxNs);
            vi->rto_at = now + vi->rto_ns;
            did = true;
        }
        i++;
    }
    return did;
}

// Receiver: a frame beyond the next expected request arrived (so something before it
// was lost, or overtaken). Enough of them and the ACK owed asks for a resend.
void Engine::owe_gap_ack(Vi& vi) {
    if (++vi.rx_gap_frames < kGapFramesBeforeNak) return;
    vi.rx_gap_frames = 0;
    vi.ack_gap = true;
    owe_ack(vi);
}

}  // namespace softvia::nicfw
