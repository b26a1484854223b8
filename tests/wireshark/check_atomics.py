"""check_atomics.py -- check_capture.py's checks of the NIC atomics scenarios (mp_atomics).

    fadd  softvia-run -n 2 mp_atomics --op fadd --iters N: rank 1 fetch-adds 1 to a
          counter of rank 0's N times (16 in flight); rank 0 meanwhile adds 1 N times
          with its own CPU atomics.
    lock  softvia-run -n 2 mp_atomics --op lock --iters N, rank 1, N times: compare-and-
          swap 0 -> 1 on the lock word until the answer is 0 (rank 0 holds the lock with
          1000), an RDMA read of the plain counter (the next word), an RDMA write of it
          plus one, then compare-and-swap 1 -> 0 (answered 1).
Both end with rank 1's send of N (8 bytes) to rank 0.
    atomic-nak  conf_atomics in one process: both operations, and atomics the target
          refuses (check_refused).
Only the dissector's values are used here (check_capture.Frame); check_capture.py
compares them with the bytes.
"""
import collections
import struct

DATA, RDMA_WRITE, READ_REQ, READ_RESP, NAK, ATOMIC_REQ, ATOMIC_RESP = 1, 10, 11, 12, 13, 14, 15
RDMA_PROT_ERROR = 0x80
OP_FETCH_ADD, OP_CMP_SWAP = 1, 2
INITIATOR = 1      # mp_atomics -n 2: rank 1 sends the atomics; its lock value is its rank
OWNER_HOLD = 1000  # the lock word while rank 0 holds the lock


def u64(b):
    return struct.unpack("<Q", b)[0] if b is not None and len(b) == 8 else None


def check(ck, frames, new_requests, messages, args):
    # Every answer by its request: (the request's connection direction, seq) -> old values.
    answers = collections.defaultdict(list)
    for f in frames:
        if f.type == ATOMIC_RESP:
            ck.expect(f.old is not None and f.flags == 0 and f.imm == 0,
                      f"{f}: old {f.old}, flags {f.flags}, imm {f.imm}")
            answers[(f.reverse, f.seq)].append(f.old)
    # Exactly once: a request answered again (from the target's record) gets the same value.
    for (stream, seq), olds in answers.items():
        ck.expect(len(set(olds)) == 1, f"ATOMIC_RESP seq {seq} on {stream}: old values {olds}")
    # A resent request carries what it carried first.
    first = {}
    for f in frames:
        if f.type == ATOMIC_REQ:
            what = (f.op, f.addr, f.memh, f.add, f.compare, f.swap, f.operands)
            was = first.setdefault((f.stream, f.seq), what)
            ck.expect(was == what, f"{f}: seq {f.seq} again as {what}, first as {was}")

    initiators = [s for s, reqs in new_requests.items() if any(f.type == ATOMIC_REQ for f in reqs)]
    if not ck.expect(len(initiators) == 1, f"atomics on {len(initiators)} connection directions, want rank 1's alone"):
        return
    stream = initiators[0]
    reqs = new_requests[stream]  # in seq order
    atomics = [f for f in reqs if f.type == ATOMIC_REQ]
    for f in atomics:
        ck.expect(f.msg_len == 8 and f.offset == 0 and f.frag_len == 0 and f.flags == 0,
                  f"{f}: msg_len {f.msg_len}, offset {f.offset}, frag_len {f.frag_len}, flags {f.flags:#x}")
        ck.expect(f.addr is not None and f.addr % 8 == 0 and 0 < f.addr < 1 << 47, f"{f}: remote word {f.addr}")
        ck.expect(f.memh is not None and f.memh & 0xFFFF >= 1 and f.memh >> 16 >= 1, f"{f}: memory handle {f.memh}")
        ck.expect(answers.get((stream, f.seq)), f"{f}: seq {f.seq} never answered")
    words = {(f.addr, f.memh) for f in atomics}
    if not ck.expect(len(words) == 1, f"the atomics name {len(words)} words"):
        return
    word, memh = words.pop()
    done = reqs[-1]
    ck.expect(done.type == DATA and u64(messages.get((stream, DATA, done.seq))) == args.iters,
              f"{done}: rank 1's last request is not its 'done' send of {args.iters}")

    def old(f):
        a = answers.get((stream, f.seq))
        return a[0] if a else None

    if args.scenario == "fadd":
        check_fadd(ck, reqs, atomics, old, args.iters)
    else:
        check_lock(ck, stream, reqs[:-1], old, messages, word + 8, memh, args.iters)


def check_fadd(ck, reqs, atomics, old, n):
    ck.expect([f.type for f in reqs] == [ATOMIC_REQ] * n + [DATA],
              f"rank 1's requests: {len(atomics)} ATOMIC_REQ of {len(reqs)}, want {n} and its 'done' send")
    for f in atomics:
        ck.expect((f.op, f.add, f.operands, f.compare, f.swap) == (OP_FETCH_ADD, 1, [0], None, None),
                  f"{f}: op {f.op}, add {f.add}, unused {f.operands}, compare {f.compare}, swap {f.swap}: "
                  "want fetch-add 1")
    # The target applies one VI's requests in order: the old values rise; the k-th
    # (from 0) sees at least the initiator's k adds before it, and at most all 2n - 1.
    prev = -1
    olds = [old(f) for f in atomics]
    for k, (f, o) in enumerate(zip(atomics, olds)):
        if o is None:
            continue  # (reported: never answered)
        ck.expect(o > prev and k <= o < 2 * n, f"{f}: fetch-add {k} answered {o} after {prev} (want rising, in [{k}, {2 * n}))")
        prev = o
    got = [o for o in olds if o is not None]
    ck.notes.append(f"fetch-add: {len(atomics)} answered with old values {min(got, default=None)}..{max(got, default=None)}")


def check_lock(ck, stream, reqs, old, messages, plain, memh, n):
    """reqs: rank 1's requests before its 'done' send, in seq order: n times acquire
    (retried while rank 0 holds the lock), read, write, release."""
    state, got, tries, last = "acquire", 0, 0, -1
    for f in reqs:
        o = old(f) if f.type == ATOMIC_REQ else None
        cas = (f.type, f.op, f.compare, f.swap, f.add, f.operands) if f.type == ATOMIC_REQ else (f.type,)
        if state == "acquire":
            tries += 1
            ok = cas == (ATOMIC_REQ, OP_CMP_SWAP, 0, INITIATOR, None, []) and o in (0, OWNER_HOLD)
            want = f"cmp-swap 0 -> {INITIATOR} answered 0 or {OWNER_HOLD}"
            if o == 0:
                state = "read"
        elif state == "read":
            v = u64(messages.get((f.reverse, READ_RESP, f.seq)))
            ok = f.type == READ_REQ and f.msg_len == 8 and (f.addr, f.memh) == (plain, memh) and v is not None
            want = f"an 8-byte READ_REQ of {plain:#x}/{memh:#x} with its answer"
            state = "write"
        elif state == "write":
            w = u64(messages.get((stream, RDMA_WRITE, f.seq)))
            # The plain counter: rank 1 writes back what it read plus one; it only grows.
            ok = (f.type == RDMA_WRITE and (f.addr, f.memh) == (plain, memh) and w == v + 1 and last < w <= 2 * n
                  and w > got)
            want = f"an RDMA_WRITE of {v + 1} to {plain:#x}/{memh:#x} (the value read plus one), above {last}"
            last, state = w, "release"
        else:
            ok = cas == (ATOMIC_REQ, OP_CMP_SWAP, INITIATOR, 0, None, []) and o == INITIATOR
            want = f"cmp-swap {INITIATOR} -> 0 answered {INITIATOR}"
            got, state = got + 1, "acquire"
        if not ck.expect(ok, f"{f}: seq {f.seq} {cas} (old {o}): want {want}"):
            return
    ck.expect(state == "acquire" and got == n, f"rank 1 took and released the lock {got} times, want {n}")
    ck.notes.append(f"lock: {got} acquisitions in {tries} tries; the plain counter written up to {last}")


def check_refused(ck, frames):
    """conf_atomics: the target refuses atomics on a region not opened to them, outside
    a region, of another protection tag, by a stale handle, or to a VI without RDMA write:
    a NAK with RDMA_PROT_ERROR, and never an answer besides."""
    reqs, answered = {}, set()
    for f in frames:
        if f.type == ATOMIC_REQ:
            reqs.setdefault((f.stream, f.seq), f)
        elif f.type == ATOMIC_RESP:
            answered.add((f.reverse, f.seq))
    ops = collections.Counter(f.op for f in reqs.values())
    ck.expect(ops[OP_FETCH_ADD] > 0 and ops[OP_CMP_SWAP] > 0 and set(ops) <= {OP_FETCH_ADD, OP_CMP_SWAP},
              f"atomic operations {dict(ops)}, want fetch-add and cmp-swap")
    for f in reqs.values():
        ck.expect(f.msg_len == 8 and f.addr is not None and f.addr % 8 == 0 and f.memh is not None,
                  f"{f}: msg_len {f.msg_len}, word {f.addr}, handle {f.memh}")
        ck.expect((f.add is None) == (f.op == OP_CMP_SWAP) and (f.swap is None) == (f.op == OP_FETCH_ADD),
                  f"{f}: {f.op}: add {f.add}, compare {f.compare}, swap {f.swap}")
    refused = 0
    for f in frames:
        if f.type == NAK and (f.reverse, f.seq) in reqs:
            refused += 1
            ck.expect(f.nak_status is not None and f.nak_status & RDMA_PROT_ERROR,
                      f"{f}: refuses an atomic with status {f.nak_status}, want RDMA_PROT_ERROR")
            ck.expect((f.reverse, f.seq) not in answered, f"{f}: refuses seq {f.seq}, which an ATOMIC_RESP answers")
    ck.expect(refused > 0, "no NAK refuses an ATOMIC_REQ")
    ck.notes.append(f"atomics: {ops[OP_FETCH_ADD]} fetch-add, {ops[OP_CMP_SWAP]} cmp-swap; {len(answered)} answered, "
                    f"{refused} refused")
