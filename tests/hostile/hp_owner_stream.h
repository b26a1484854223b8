/*
 * hp_owner_stream.h -- the owner's side of the checked stream with the good peer, and
 * the main loop (included by hp_owner.c).
 *
 * Every receive on a good VI is checked in full: a message's header (magic, VI, length),
 * its checksum (immediate data), its sequence number (the next one on a reliable VI;
 * higher than the last, and on a lossless wire the next one, on the unreliable VI), its
 * length and its pattern; an RDMA write with immediate data is the next write, has its
 * length, and its slot of region GW holds its pattern (a shadow copy of GW follows the
 * writes, and GW is compared with it at the end). The owner's own RDMA reads of the good
 * peer's region are checked against its pattern. Credits go back to the good peer in
 * messages on the reliable VIs (hp_credit).
 */
#ifndef SOFTVIA_HP_OWNER_STREAM_H
#define SOFTVIA_HP_OWNER_STREAM_H

static void post_good_recv(hp_gvi *g, int k) {
    th_set1(g->r[k].d, O.gdesc.mh, g->r[k].buf, g->r[k].cap);
    CHECK(VipPostRecv(g->vi, g->r[k].d, O.gdesc.mh));
}

static void check_message(int v, hp_gvi *g, const hp_slot *s, const VIP_DESCRIPTOR *d) {
    uint32_t len = d->CS.Length;
    hp_msg_hdr h;
    if (len < sizeof h) {
        HP_FAIL("good VI %d: a %u-byte message, shorter than its header", v, len);
        return;
    }
    memcpy(&h, s->buf, sizeof h);
    if (!(d->CS.Status & VIP_STATUS_IMMEDIATE) || d->CS.ImmediateData != hp_fnv(s->buf, len))
        HP_FAIL("good VI %d: message seq %u (%u bytes): checksum 0x%x, the payload hashes to 0x%x", v, h.seq, len,
                d->CS.ImmediateData, hp_fnv(s->buf, len));
    if (h.magic != HP_MSG_MAGIC || h.vi != (uint32_t)v || h.len != len) {
        HP_FAIL("good VI %d: message header magic 0x%x vi %u len %u (%u bytes arrived)", v, h.magic, h.vi, h.len, len);
        return;
    }
    if (h.credits_seen > g->credits_seen) g->credits_seen = h.credits_seen;
    if (h.seq == HP_END_SEQ) {
        g->ended = 1;
        g->end_msgs = h.sent_msgs;
        g->end_writes = h.sent_writes;
        if (v == HP_VI_RD) O.u_sent = h.u_sent;
        return;
    }
    if (v == HP_VI_U) {
        if (h.seq < g->next_seq)
            HP_FAIL("unreliable VI: message %u after %u: duplicated or reordered", h.seq, g->next_seq - 1);
        else if (h.seq > g->next_seq && !th_wire_lossy())
            HP_FAIL("unreliable VI on a lossless wire: message %u arrived, %u expected", h.seq, g->next_seq);
    } else if (h.seq != g->next_seq) {
        HP_FAIL("good VI %d: message %u arrived, %u expected", v, h.seq, g->next_seq);
    }
    if (len != hp_msg_len((uint32_t)v, h.seq))
        HP_FAIL("good VI %d: message %u has %u bytes, it was sent with %u", v, h.seq, len, hp_msg_len((uint32_t)v, h.seq));
    long at = hp_diff(s->buf + sizeof h, len - sizeof h, hp_msg_seed((uint32_t)v, h.seq), 0);
    if (at >= 0) HP_FAIL("good VI %d: message %u differs from what was sent at byte %ld", v, h.seq, at + (long)sizeof h);
    if (h.seq >= g->next_seq) g->next_seq = h.seq + 1;
    g->msgs++;
    if (O.hostile_done) O.msgs_after++;
}

static void check_write(int v, hp_gvi *g, const VIP_DESCRIPTOR *d) {
    uint32_t wseq = d->CS.ImmediateData;
    if (v == HP_VI_U || !(d->CS.Status & VIP_STATUS_IMMEDIATE) || wseq != g->next_wseq) {
        HP_FAIL("good VI %d: RDMA write %u arrived, %u expected", v, wseq, g->next_wseq);
        return;
    }
    uint32_t len = hp_write_len((uint32_t)v, wseq);
    if (d->CS.Length != len) HP_FAIL("good VI %d: RDMA write %u of %u bytes, it was %u", v, wseq, d->CS.Length, len);
    size_t at = (size_t)hp_write_slot((uint32_t)v, wseq) * HP_GW_SLOT;
    long bad = hp_diff(O.gw.p + at, len, hp_write_seed((uint32_t)v, wseq), 0);
    if (bad >= 0) HP_FAIL("good VI %d: RDMA write %u: region GW differs at +%zu", v, wseq, at + (size_t)bad);
    hp_fill(O.gw_shadow + at, len, hp_write_seed((uint32_t)v, wseq), 0);
    g->next_wseq++;
    g->writes++;
}

static int good_recvs(int v) {
    hp_gvi *g = &O.g[v];
    VIP_DESCRIPTOR *d;
    int n = 0;
    while (VipRecvDone(g->vi, &d) == VIP_SUCCESS) {
        n++;
        int k = 0;
        while (k < (int)HP_GOOD_RECVS && g->r[k].d != d) k++;
        if (k == (int)HP_GOOD_RECVS) FATAL("good VI %d: a receive completion for descriptor %p, not ours", v, (void *)d);
        if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
            if (!g->broken) HP_FAIL("good VI %d: a receive completed with status 0x%x (VI %s)", v, d->CS.Status,
                                    th_state_name(th_state(g->vi)));
            g->broken = 1;
        } else if ((d->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_REMOTE_RDMA_WRITE) {
            check_write(v, g, d);
        } else {
            check_message(v, g, &g->r[k], d);
        }
        if (!hp_buf_guard_ok(g->r[k].buf, g->r[k].cap)) HP_FAIL("good VI %d: a receive wrote past its buffer", v);
        g->taken++;
        if (!(d->CS.Status & VIP_STATUS_ERROR_MASK)) post_good_recv(g, k);
    }
    return n;
}

static int good_sends(int v) {
    hp_gvi *g = &O.g[v];
    VIP_DESCRIPTOR *d;
    int n = 0;
    while (VipSendDone(g->vi, &d) == VIP_SUCCESS) {
        n++;
        hp_slot *s = &g->s[g->s_head % HP_SENDQ];
        if (g->s_head == g->s_tail || s->d != d) FATAL("good VI %d: send completions out of post order", v);
        g->s_head++;
        if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
            if (!g->broken)
                HP_FAIL("good VI %d: %s completed with status 0x%x", v, s->kind == HP_OP_READ ? "an RDMA read" : "a credit",
                        d->CS.Status);
            g->broken = 1;
        } else if (s->kind == HP_OP_READ) {
            long at = hp_diff(s->buf, s->len, O.good.gpr_seed, s->off);
            if (at >= 0) HP_FAIL("RDMA read of the good peer's region [%u, +%u): wrong byte at +%ld", s->off, s->len, at);
            else O.reads_ok++;
        }
        if (s->kind == HP_OP_READ) g->reads_out--;
        if (!hp_buf_guard_ok(s->buf, s->cap)) HP_FAIL("good VI %d: a send-queue operation wrote past its buffer", v);
    }
    return n;
}

static hp_slot *send_slot(hp_gvi *g) {
    return g->s_tail - g->s_head < HP_SENDQ ? &g->s[g->s_tail % HP_SENDQ] : NULL;
}

/* A credit message once enough receives were taken (or a millisecond passed), on
 * whichever reliable VI has room; never more unseen ones than the good peer posts. */
static void maybe_credit(uint64_t now) {
    uint32_t fresh = 0;
    for (int v = 0; v < HP_NVI; v++) fresh += O.g[v].taken - O.credit_taken[v];
    if (fresh == 0 || (fresh < 4 && now - O.credit_ms < 1)) return;
    for (int i = 0; i < 2; i++) {
        hp_gvi *g = &O.g[HP_VI_RD + (O.credit_rotor++ & 1)];
        hp_slot *s = send_slot(g);
        if (!s || g->broken || g->credits_sent - g->credits_seen >= 24) continue;
        hp_credit c;
        memset(&c, 0, sizeof c);
        c.magic = HP_CREDIT_MAGIC;
        for (int v = 0; v < HP_NVI; v++) c.taken[v] = O.credit_taken[v] = O.g[v].taken;
        c.u_next = O.g[HP_VI_U].next_seq;
        memcpy(s->buf, &c, sizeof c);
        th_set1(s->d, O.gdesc.mh, s->buf, sizeof c);
        s->kind = HP_OP_CREDIT;
        if (VipPostSend(g->vi, s->d, O.gdesc.mh) != VIP_SUCCESS) {
            HP_FAIL("good VI %d: VipPostSend refused a credit (VI %s)", HP_VI_RD + (int)((O.credit_rotor - 1) & 1),
                    th_state_name(th_state(g->vi)));
            g->broken = 1;
            return;
        }
        g->s_tail++;
        g->credits_sent++;
        O.credit_ms = now;
        return;
    }
}

/* RDMA reads of the good peer's region on the reliable-reception VI, two at a time. */
static void maybe_read(void) {
    hp_gvi *g = &O.g[HP_VI_RR];
    hp_slot *s = send_slot(g);
    if (!s || g->broken || g->reads_out >= 2 || g->s_tail - g->s_head >= HP_SENDQ - 4) return;  /* room for credits */
    s->len = 1 + hp_rand() % HP_READ_MAX;
    s->off = hp_rand() % (HP_GPR_BYTES - s->len + 1);
    memset(s->buf, 0, s->len);
    th_set_rdma(s->d, VIP_CONTROL_OP_RDMAREAD, (void *)(uintptr_t)(O.good.gpr.addr + s->off), O.good.gpr.memh,
                O.gdesc.mh, s->buf, s->len, 1);
    s->kind = HP_OP_READ;
    if (VipPostSend(g->vi, s->d, O.gdesc.mh) != VIP_SUCCESS) {
        g->broken = 1;
        return;
    }
    g->s_tail++;
    g->reads_out++;
}

static int stream_complete(void) {
    for (int v = 0; v < HP_NVI; v++)
        if (O.g[v].broken) return 1; /* no point waiting: final_checks says what is missing */
    if (!O.hostile_done || !O.g[HP_VI_RD].ended || !O.g[HP_VI_RR].ended) return 0;
    for (int v = HP_VI_RD; v <= HP_VI_RR; v++)
        if (O.g[v].msgs < O.g[v].end_msgs || O.g[v].writes < O.g[v].end_writes) return 0;
    return th_wire_lossy() || O.g[HP_VI_U].msgs >= O.u_sent;
}

/* The main loop: the stream, the hostile targets, guard checks, until the good peer
 * has ended its stream after the hostile peer stopped. */
static void hp_run(unsigned seconds) {
    uint64_t start = th_now_ms(), last_guard = start, last_done = start, lossy_end = 0;
    uint64_t deadline = start + (uint64_t)(seconds + 60) * 1000;
    for (;;) {
        uint64_t now = th_now_ms();
        int did = 0;
        for (int v = 0; v < HP_NVI; v++) did += good_recvs(v) + good_sends(v);
        maybe_credit(now);
        maybe_read();
        hp_hostile_poll(now);
        if (now - last_guard >= 100) {
            hp_guards_check("during the stream");
            last_guard = now;
        }
        if (!O.hostile_done && now - last_done >= 10) {
            hp_hostile_report rep;
            O.hostile_done = sv_boot_get(HP_KEY_HOSTILE_DONE, &rep, sizeof rep, NULL, 0) == 0;
            if (O.hostile_done)
                printf("%s: the hostile peer stopped (seed %llu, %llu frames, %llu connections)\n", th_prog,
                       (unsigned long long)rep.seed, (unsigned long long)rep.frames,
                       (unsigned long long)rep.connects);
            last_done = now;
        }
        if (stream_complete()) {
            /* on a lossy wire, unreliable stragglers may still come: a moment for them */
            if (!th_wire_lossy() || (lossy_end && now >= lossy_end)) break;
            if (!lossy_end) lossy_end = now + 50;
        }
        if (now > deadline) {
            HP_FAIL("the good stream did not end within %u s (RD ended %d, RR ended %d, hostile done %d)",
                    seconds + 60, O.g[1].ended, O.g[2].ended, O.hostile_done);
            break;
        }
        if (!did && O.thread_mode) sched_yield();
    }
}

#endif /* SOFTVIA_HP_OWNER_STREAM_H */
