// reliability.cc -- acknowledgements and retransmission, both directions in one place:
// the receiver's ACKs (owed per VI, held for a reply or a stream, sent one per burst;
// GAP ACKs after a loss) and the sender's side (applying ACKs, go-back-N resends, the
// retransmit and retry timers).
//
// The sender keeps every request in Vi::pending until the target acknowledges it
// (cumulative ACK: seq = the next request it expects) or, for an RDMA read, answers it.
// The receiver takes exactly the next sequence number. Once kGapFramesBeforeNak frames
// beyond it have arrived (one reordered frame is not a loss), it sends an ACK flagged
// NICFW_FF_GAP and the sender resends from there at once, and again if the same hole is
// still reported a round trip later (the resend was lost too). Otherwise the retransmit
// timer (measured from ACK round trips) resends from the oldest unanswered request,
// doubling up to kRtoMaxNs while the peer says nothing; no progress for the VI's retry
// timeout loses the connection. docs/reliability.md has the whole protocol.
#include <algorithm>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include "nicfw/engine.h"
#include "datapath.h"
#include "nicfw/hot_path.h"

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

NICFW_HOT uint64_t Engine::rtx_clock() {
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

// How long GAP reports of the hole a go-back filled are taken to come from frames sent
// before it: a round trip and its variation (the retransmit timeout before any sample).
static uint64_t gap_hold(const Vi& vi) {
    if (vi.srtt_ns == 0) return kRtoInitialNs;
    return std::max(vi.srtt_ns + 2 * vi.rttvar_ns, kGapHoldMinNs);
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
NICFW_HOT void Engine::arm_rtx(Vi& vi, uint64_t now) {
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
    vi.heard_since_rto = true;
    // The frames already on the wire behind the hole report it too: go back once for
    // them. A report of the same hole a round trip after the go-back comes from a frame
    // sent after the resend, so the resend was lost too: go back again.
    if (seq == vi.gap_seq && now - vi.gap_ns < gap_hold(vi)) return;
    vi.gap_seq = seq;
    vi.gap_ns = now;
    go_back(vi, seq);
}

// No progress for the retry timeout: the connection is lost. What was in flight
// completes with a transport error, the rest is flushed, and the error callback hears
// NICFW_AE_CONN_LOST.
void Engine::give_up(Vi& vi) {
    for (TxEntry& e : vi.pending) {
        if (e.done) continue;
        e.status = NICFW_DS_TRANSPORT_ERROR;
        e.done = true;
    }
    flush_vi(vi, NICFW_VI_ERROR, true, NICFW_AE_CONN_LOST);
}

NICFW_HOT bool Engine::rtx_timers() {
    bool did = false;
    const uint64_t now = rtx_clock();  // the timers' own clock (their deadlines come from it)
    for (size_t i = 0; i < rtx_timed_.size();) {
        Vi* vi = rtx_timed_[i];
        bool drop = vi->rto_at == 0 || vi->pending.empty() ||
                    vi->state.load(std::memory_order_relaxed) != NICFW_VI_CONNECTED;
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
            // Back off only when the peer has said nothing since the last expiry: GAP
            // ACKs coming in show a live path on which resends are being lost, where a
            // doubled timeout only stalls the stream longer.
            if (!vi->heard_since_rto) vi->rto_ns = std::min(vi->rto_ns * 2, kRtoMaxNs);
            vi->heard_since_rto = false;
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

// ---------------------------------------------------------------- acknowledgements
// Both directions: the receiver owes and sends ACKs, the sender applies them.

// The acknowledgements vi owes, now, for every request before next_seq (before a NAK
// for next_seq, so that ACK does not cover the refused request).
void Engine::send_ack_now(Vi& vi, uint32_t next_seq) {
    if (vi.acks_owed == 0) return;
    nicfw_frame_hdr h = frame_to(vi, NICFW_F_ACK);
    h.imm = vi.acks_owed;
    h.seq = next_seq;
    vi.acks_owed = 0;
    queue_control(vi.peer, h, nullptr);
}

// Whether vi's owed ACK may wait for a later step (flush_acks). Request/reply traffic
// (ack_hold): up to kAckHoldNs for a data frame to carry it. A one-way stream (its
// messages arrive within kAckDenseNs of each other, and the last one did so just now):
// up to kAckStreamMsgs messages or kAckStreamNs, so that a receiver answers a stream
// with one ACK frame per several messages rather than one per step. A message that
// comes alone, as in send-wait-send, is acknowledged at once.
bool Engine::hold_ack(const Vi& vi, uint64_t now) {
    if (vi.ack_hold && vi.acks_owed < kAckHoldMsgs && now - vi.ack_since < kAckHoldNs) return true;
    return vi.ack_dense && vi.acks_owed < kAckStreamMsgs && now - vi.ack_last_ns < kAckDenseNs &&
           now - vi.ack_since < kAckStreamNs;
}

// One ACK per VI per step covers every request placed since the last one (acks_owed),
// so a burst of receives costs one frame back.
NICFW_HOT bool Engine::flush_acks(bool now) {
    bool did = false;
    uint64_t clock = 0;  // read once, at the first VI that could hold
    for (size_t i = 0; i < ack_owed_.size();) {
        Vi* vi = ack_owed_[i];
        bool done = vi->state.load(std::memory_order_relaxed) != NICFW_VI_CONNECTED || vi->acks_owed == 0;
        // A held ACK (hold_ack) waits for a later step. On a wire where a frame costs a
        // system call (udp or af_packet over veth) a separate ACK ahead of a reply delays
        // the reply by a whole frame time, and one per step of a stream costs the
        // receiver a call per few messages. A GAP ACK goes at once. With inline
        // progress, steps come only with the program's calls: the guard thread sends a
        // held ACK that no call comes for, and disconnect, close and exit flush (now =
        // true).
        if (!done && !now && vi->rel_proto && !vi->ack_gap && hold_ack(*vi, clock ? clock : (clock = rtx_clock()))) {
            if (cfg_.progress == Progress::kInline) {
                acks_held_.store(true, std::memory_order_relaxed);
                start_guard();
            }
            i++;
            continue;
        }
        if (!done) {
            nicfw_frame_hdr* a;
            if (frame_reserve(vi->peer, 0, &a)) {
                *a = frame_to(*vi, NICFW_F_ACK);
                a->imm = vi->acks_owed;
                a->seq = vi->rx_seq;
                if (vi->ack_gap) a->flags = NICFW_FF_GAP;
                frame_commit(vi->peer, a, 0);
                if (vi->rel_proto && !vi->ack_gap) {
                    vi->ack_frame_ns = rtx_clock();
                    if (vi->ack_frame_ns - vi->ack_since >= kAckHoldNs) vi->ack_hold = false;  // no reply came
                }
                vi->acks_owed = 0;
                vi->ack_gap = false;
                did = done = true;
            }
        }
        if (done) {
            vi->ack_listed = false;
            ack_owed_[i] = ack_owed_.back();
            ack_owed_.pop_back();
        } else {
            i++;  // link full: try again next step
        }
    }
    return did;
}

// ACK: requests before sequence number seq succeeded at the target.
void Engine::on_ack(const RxFrame& f, const nicfw_frame_hdr& h) {
    Vi* vi = connected_target(*this, f, h);
    if (!vi) {
        bump(status_->nic.drops);
        return;
    }
    apply_ack(*vi, h.seq, (h.flags & NICFW_FF_GAP) != 0);
}

// An acknowledgement, in an ACK frame or carried by a data frame (NICFW_FF_ACKED).
NICFW_HOT void Engine::apply_ack(Vi& vi, uint32_t seq, bool gap) {
    // Cumulative: seq is the next message the target expects, so everything before it
    // has been placed (a lost ACK is covered by the next one).
    // The FIFO is in sequence order: the walk stops at the first request the ACK does not
    // cover, so a window of 64 costs a stream no more per ACK than a window of 8.
    uint64_t timed = 0;  // when the newest request this ACK answers was sent, if only once
    for (TxEntry& e : vi.pending) {
        if (static_cast<int32_t>(e.seq - seq) >= 0) break;
        if (e.kind == TxEntry::kAcked && !e.done) {
            e.done = true;
            timed = e.resent ? 0 : e.sent_ns;
        }
    }
    retire(vi);
    if (!vi.rel_proto) return;
    // Progress restarts the timers; an ACK beyond what we sent is forged and ignored.
    if (static_cast<int32_t>(seq - vi.snd_acked) > 0 && static_cast<int32_t>(seq - vi.tx_seq) <= 0) {
        const uint64_t now = rtx_clock();  // one clock read per ACK that moves
        if (timed && now > timed) rtt_sample(vi, now - timed);
        vi.snd_acked = seq;
        tx_progress(vi, now);
    }
    if (gap && static_cast<int32_t>(seq - vi.tx_seq) < 0) on_gap(vi, seq);
}

}  // namespace softvia::nicfw
