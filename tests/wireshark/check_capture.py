#!/usr/bin/env python3
"""check_capture.py -- checks tools/wireshark/softvia.lua against a capture of a real run.

    check_capture.py --lua softvia.lua --capture capture.pcap --wire udp|dpdk
                     --scenario rdma|names|am|fault|nak|fadd|lock|atomic-nak
                     [--iters N] [--messages N] [--prefs NAME:VALUE]... [--bytes-only | --semantic-only]

Run by softvia_dissector.sh, once per capture. It decodes the capture with tshark and the
dissector (-T fields), and checks the decoded values two ways:

 1. Against the bytes: this script reads the pcap itself and decodes every softvia frame
    with the layouts of nicfw/include/nicfw/abi.h (struct.unpack of nicfw_frame_hdr,
    nicfw_rdma_ext, nicfw_atomic_args, nicfw_conn_payload), the udp preamble and the
    dpdk shim; every field the dissector shows must have the value that is at its offset, every frame must be
    accounted for to its last byte, and the fault injector's CRC-32C (computed here)
    must be what the dissector says; nothing in a softvia packet may be malformed,
    warned about or a Lua error.
 2. Against what the run did: sequence numbers start at 0 and grow by one per new
    request on each connection; fragments tile their message exactly; ACKs acknowledge
    requests that were sent; a read's answer matches its request; RDMA writes carry the
    remote buffer and the values the program wrote; connection requests carry the
    discriminators and NIC addresses the program used; steering classes; the fault
    injector's trailer; NIC atomics (check_atomics.py): operations, operands, the word
    they name, the old values the answers carry; the scenario's frame types all appear.

--prefs passes tshark -o settings (softvia's preferences); --bytes-only and
--semantic-only run one of the two. Exit 0 when everything holds, 1 with the failures
listed (the FAIL line counts them per part).
"""
import argparse
import collections
import resource
import struct
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree for the module below
import check_atomics  # noqa: E402

# ---------------------------------------------------------------- the wire format (abi.h)
HDR = struct.Struct("<BBBBIIIIIII")  # nicfw_frame_hdr: 32 bytes
RDMA_EXT = struct.Struct("<QII")     # nicfw_rdma_ext: 16 bytes
ATOMIC_ARGS = struct.Struct("<QQ")   # nicfw_atomic_args: 16 bytes
CONN_FIXED = struct.Struct("<HBBIHHHH")  # nicfw_conn_payload up to src_addr: 16 bytes
CONN_ADDR = 64                       # NICFW_MAX_ADDR
CONN_DISC_AT = 16 + CONN_ADDR        # offsetof(nicfw_conn_payload, disc) = 80
DATA, ACK, CONN_REQ, CONN_ACCEPT, CONN_REJECT, CONN_NOMATCH, PEER_REQ, PEER_ACK, DISCONNECT, \
    RDMA_WRITE, READ_REQ, READ_RESP, NAK, ATOMIC_REQ, ATOMIC_RESP = range(1, 16)
NAMES = {1: "DATA", 2: "ACK", 3: "CONN_REQ", 4: "CONN_ACCEPT", 5: "CONN_REJECT", 6: "CONN_NOMATCH",
         7: "PEER_REQ", 8: "PEER_ACK", 9: "DISCONNECT", 10: "RDMA_WRITE", 11: "READ_REQ", 12: "READ_RESP",
         13: "NAK", 14: "ATOMIC_REQ", 15: "ATOMIC_RESP"}
FF_IMM, FF_LAST, FF_REPLY, FF_GAP, FF_ACKED = 1, 2, 4, 8, 16
OP_FETCH_ADD, OP_CMP_SWAP = 1, 2     # ATOMIC_REQ's imm
REQUESTS = (DATA, RDMA_WRITE, READ_REQ, ATOMIC_REQ)
ANSWERS = (READ_RESP, ATOMIC_RESP)   # seq: the request's
WITH_MSG_LEN = (DATA, RDMA_WRITE, READ_RESP, READ_REQ, ATOMIC_REQ, ATOMIC_RESP)
FRAGMENTED = (DATA, RDMA_WRITE, READ_RESP)
CONTROL_WITH_PAYLOAD = (CONN_REQ, CONN_ACCEPT, PEER_REQ, PEER_ACK)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def fnv1a(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def read_pcap(path):
    """Every packet of a classic pcap file, as bytes, in order (frame 1 first)."""
    return read_pcap_records(path)[1]


def read_pcap_records(path):
    """A classic pcap file: its 24-byte header and (16-byte record header, packet) pairs."""
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 24:
        raise SystemExit(f"{path}: not a pcap file ({len(data)} bytes)")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise SystemExit(f"{path}: not a classic pcap file (magic {magic.hex()})")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    if linktype != 1:
        raise SystemExit(f"{path}: link type {linktype}, expected Ethernet (1)")
    recs, pos = [], 24
    while pos + 16 <= len(data):
        _, _, incl, orig = struct.unpack(endian + "IIII", data[pos:pos + 16])
        if incl != orig:
            raise SystemExit(f"{path}: packet {len(recs) + 1} truncated by the capture ({incl} of {orig} bytes)")
        recs.append((data[pos:pos + 16], data[pos + 16:pos + 16 + incl]))
        pos += 16 + incl
    return data[:24], [p for _, p in recs], endian, [h for h, _ in recs]


# ---------------------------------------------------------------- udp trains
def body_len(t, flags, msg_len, frag_len):
    """The bytes after a frame's header, by its fields (abi.h)."""
    acked = 4 if flags & FF_ACKED else 0
    return {DATA: frag_len + acked, RDMA_WRITE: RDMA_EXT.size + frag_len + acked, READ_REQ: RDMA_EXT.size,
            READ_RESP: frag_len, ATOMIC_REQ: RDMA_EXT.size + ATOMIC_ARGS.size, ATOMIC_RESP: 8,
            ACK: 0, NAK: 0}.get(t, msg_len if CONN_REQ <= t <= DISCONNECT else None)


def train_datagrams(pkt, trailer):
    """A udp packet holding a whole train (captured before the interface cut it): its
    datagrams' payloads, all as long as the first but the last. None for anything else."""
    if len(pkt) < 42 or struct.unpack(">H", pkt[12:14])[0] != 0x0800 or pkt[23] != 17:
        return None
    ihl = (pkt[14] & 15) * 4
    udp = pkt[14 + ihl:]
    payload = udp[8:struct.unpack(">H", udp[4:6])[0]]
    if len(payload) < 24 + HDR.size or payload[:4] != b"SVU1" or payload[4] != 1:
        return None
    h = HDR.unpack(payload[24:24 + HDR.size])
    blen = body_len(h[0], h[2], h[6], h[8])
    if blen is None:
        return None
    stride = 24 + HDR.size + blen + (4 if trailer else 0)
    if stride >= len(payload):
        return None
    chunks = [payload[at:at + stride] for at in range(0, len(payload), stride)]
    if any(c[:4] != b"SVU1" or len(c) < 5 or c[4] != 1 for c in chunks):
        return None
    return chunks


def ip_checksum(hdr):
    s = sum(struct.unpack(f">{len(hdr) // 2}H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def split_trains(path, out_path, trailer):
    """Writes the capture with every train cut into one packet per datagram, as the wire
    carries them (the IP and UDP lengths and the IP checksum redone; UDP checksum 0, which
    IPv4 allows). Returns how many datagrams each original packet became."""
    head, pkts, endian, rec_heads = read_pcap_records(path)
    counts, out = [], [head]
    for rh, pkt in zip(rec_heads, pkts):
        chunks = train_datagrams(pkt, trailer)
        if not chunks:
            counts.append(1)
            out += [rh, pkt]
            continue
        counts.append(len(chunks))
        ihl = (pkt[14] & 15) * 4
        for c in chunks:
            ip = bytearray(pkt[14:14 + ihl])
            ip[2:4] = struct.pack(">H", ihl + 8 + len(c))
            ip[10:12] = b"\0\0"
            ip[10:12] = struct.pack(">H", ip_checksum(bytes(ip)))
            udp = pkt[14 + ihl:14 + ihl + 4] + struct.pack(">HH", 8 + len(c), 0)
            p = pkt[:14] + bytes(ip) + udp + c
            ts_sec, ts_usec = struct.unpack(endian + "II", rh[:8])
            out += [struct.pack(endian + "IIII", ts_sec, ts_usec, len(p), len(p)), p]
    with open(out_path, "wb") as fh:
        fh.write(b"".join(out))
    return counts


def check_trains(ck, rows, split_rows, counts):
    """The dissector's view of each captured train is its view of the train's datagrams one
    by one: every softvia field, in order, and the train's size and position generated."""
    ck.expect(any(k > 1 for k in counts), "no train in the capture: nothing to check the splitting with")
    ck.expect(len(rows) == len(counts) and len(split_rows) == sum(counts),
              f"tshark shows {len(rows)} and {len(split_rows)} packets; the files hold {len(counts)} and {sum(counts)}")
    j = 0
    for i, (row, k) in enumerate(zip(rows, counts)):
        parts = split_rows[j:j + k]
        j += k
        where = f"frame {i + 1} ({k} datagrams)"
        want_train = [str(k)] * k if k > 1 else []
        ck.expect(row["softvia.udp.train"] == want_train, f"{where}: softvia.udp.train = {row['softvia.udp.train']}")
        ck.expect(row["softvia.udp.train_index"] == ([str(x) for x in range(1, k + 1)] if k > 1 else []),
                  f"{where}: softvia.udp.train_index = {row['softvia.udp.train_index']}")
        for fld in FIELDS:
            if not fld.startswith("softvia.") or fld.startswith("softvia.udp.train"):
                continue
            want = [v for p in parts for v in p[fld]]
            if row[fld] != want:
                ck.fail(f"{where}: {fld} = {row[fld]}, the datagrams one by one give {want}")
        sev = [num(x) for x in row["_ws.expert.severity"]]
        if row["softvia.wire"] and (row["_ws.lua.error"] or row["_ws.malformed"] or any(x >= PI_WARN for x in sev)):
            ck.fail(f"{where}: malformed or warned: {'; '.join(row['_ws.expert.message'])}")


def decode_raw(pkt, trailer):
    """The oracle: a softvia packet decoded from its bytes, or None for other traffic."""
    if len(pkt) < 14:
        return None
    ethertype = struct.unpack(">H", pkt[12:14])[0]
    r = {}
    if ethertype == 0x88B5:
        shim = pkt[14:32]
        r.update(wire="dpdk", eth_src=pkt[6:12], shim_version=shim[0], shim_kind=shim[1],
                 src_nonce=struct.unpack("<I", shim[2:6])[0], dst_nonce=struct.unpack("<I", shim[6:10])[0],
                 host=struct.unpack("<Q", shim[10:18])[0])
        frame = pkt[32:]
        if shim[1] != 0:
            r["frame"] = None
            return r
    elif ethertype == 0x0800 and len(pkt) >= 42 and pkt[23] == 1 and pkt[14 + (pkt[14] & 15) * 4] == 3:
        # An ICMP destination-unreachable quoting one of our datagrams (a port closed at
        # the end of a run): the dissector decodes the quote; no frame on the wire.
        q = pkt[14 + (pkt[14] & 15) * 4 + 8:]
        if len(q) < 20 or q[9] != 17:
            return None
        qudp = q[(q[0] & 15) * 4:]
        return {"wire": "udp", "quoted": True} if qudp[8:12] == b"SVU1" else None
    elif ethertype == 0x0800 and len(pkt) >= 34 and pkt[23] == 17:
        ihl = (pkt[14] & 15) * 4
        udp = pkt[14 + ihl:]
        sport, dport, ulen = struct.unpack(">HHH", udp[:6])
        payload = udp[8:ulen]
        if payload[:4] != b"SVU1":
            return None
        r.update(wire="udp", ip_src=pkt[26:30], sport=sport, dport=dport, udp_type=payload[4],
                 udp_flags=payload[5], udp_port=struct.unpack(">H", payload[6:8])[0], host=struct.unpack("<Q", payload[8:16])[0],
                 src_nonce=struct.unpack("<I", payload[16:20])[0], dst_nonce=struct.unpack("<I", payload[20:24])[0])
        frame = payload[24:]
        if payload[4] != 1:  # a probe, or a send socket's PORT / PORT_ACK / PORT_NAK
            r["frame"] = None
            return r
    else:
        return None
    if trailer:
        r["fcs"] = struct.unpack("<I", frame[-4:])[0]
        r["fcs_good"] = crc32c(frame[:-4]) == r["fcs"]
        frame = frame[:-4]
    r["frame"] = frame
    (r["type"], r["version"], r["flags"], r["reserved"], r["dst_vi"], r["src_vi"], r["msg_len"], r["offset"],
     r["frag_len"], r["imm"], r["seq"]) = HDR.unpack(frame[:32])
    t, pos = r["type"], 32
    if t in (RDMA_WRITE, READ_REQ, ATOMIC_REQ):
        r["rdma_addr"], r["rdma_memh"], r["rdma_reserved"] = RDMA_EXT.unpack(frame[pos:pos + 16])
        pos += 16
    if t == ATOMIC_REQ:
        r["operands"] = ATOMIC_ARGS.unpack(frame[pos:pos + 16])
        pos += 16
    elif t == ATOMIC_RESP:
        r["old"] = struct.unpack("<Q", frame[pos:pos + 8])[0]
        pos += 8
    elif t in FRAGMENTED:
        r["payload"] = frame[pos:pos + r["frag_len"]]
        pos += r["frag_len"]
        if t != READ_RESP and r["flags"] & FF_ACKED:
            r["piggy_ack"] = struct.unpack("<I", frame[pos:pos + 4])[0]
            pos += 4
    elif t in CONTROL_WITH_PAYLOAD:
        pl = frame[pos:pos + r["msg_len"]]
        (r["reliability"], r["rdma_write"], r["rdma_read"], r["max_transfer"], r["src_disc_len"],
         r["dst_disc_len"], r["src_addr_len"], r["conn_reserved"]) = CONN_FIXED.unpack(pl[:16])
        r["src_addr"] = pl[16:16 + r["src_addr_len"]]
        d = CONN_DISC_AT
        r["src_disc"] = pl[d:d + r["src_disc_len"]]
        r["dst_disc"] = pl[d + r["src_disc_len"]:d + r["src_disc_len"] + r["dst_disc_len"]]
        pos += r["msg_len"]
    elif t != READ_REQ:
        pos += r["msg_len"]  # ACK, NAK, REJECT, NOMATCH, DISCONNECT: 0
    r["accounted"] = pos
    return r


# ---------------------------------------------------------------- the dissector's view
FIELDS = [
    "frame.number", "softvia.wire", "softvia.udp.magic", "softvia.udp.type", "softvia.udp.flags", "softvia.udp.port",
    "softvia.udp.host_id", "softvia.udp.src_nonce", "softvia.udp.dst_nonce", "softvia.eth.version",
    "softvia.eth.kind", "softvia.eth.src_nonce", "softvia.eth.dst_nonce", "softvia.eth.host_id",
    "softvia.type", "softvia.version", "softvia.flags", "softvia.flags.immediate", "softvia.flags.last",
    "softvia.flags.reply", "softvia.flags.gap", "softvia.flags.acked", "softvia.reserved", "softvia.dst_vi",
    "softvia.dst_vi.index", "softvia.dst_vi.gen", "softvia.src_vi", "softvia.src_vi.index", "softvia.src_vi.gen",
    "softvia.msg_len", "softvia.payload_len", "softvia.offset", "softvia.frag_len", "softvia.imm",
    "softvia.ack.count", "softvia.nak.status", "softvia.nak.status.rdma_prot", "softvia.seq", "softvia.ack",
    "softvia.req_id", "softvia.class", "softvia.frag_end", "softvia.analysis.retransmission",
    "softvia.rdma.addr", "softvia.rdma.memh", "softvia.rdma.memh.index", "softvia.rdma.memh.gen",
    "softvia.rdma.reserved", "softvia.rdma.frag_addr", "softvia.atomic.op", "softvia.atomic.add",
    "softvia.atomic.compare", "softvia.atomic.swap", "softvia.atomic.operand", "softvia.atomic.old",
    "softvia.payload", "softvia.conn.reliability",
    "softvia.conn.rdma_write", "softvia.conn.rdma_read", "softvia.conn.max_transfer", "softvia.conn.src_disc_len",
    "softvia.conn.dst_disc_len", "softvia.conn.src_addr_len", "softvia.conn.reserved", "softvia.conn.src_addr",
    "softvia.conn.src_disc", "softvia.conn.dst_disc", "softvia.addr.kind", "softvia.addr.port",
    "softvia.addr.ipv4", "softvia.addr.mac", "softvia.addr.nonce", "softvia.fcs", "softvia.fcs.good",
    "softvia.trailing", "softvia.udp.train", "softvia.udp.train_index", "ip.src", "udp.srcport", "eth.src",
    "_ws.expert.severity", "_ws.expert.message", "_ws.lua.error", "_ws.malformed",
]
PI_WARN = 0x00600000  # expert severities from warnings up (errors, Lua errors, exceptions)


def tshark(lua, capture, args):
    # Heuristics first: an ephemeral port of the udp wire may be one that another
    # dissector registered (the preference is UDP's; the softvia heuristic is strict).
    cmd = ["tshark", "-n", "-X", "lua_script:" + lua, "-o", "udp.try_heuristic_first:TRUE", "-r", capture] + args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    err = "\n".join(l for l in p.stderr.splitlines() if "Running as user" not in l and "could be dangerous" not in l)
    if p.returncode != 0 or "Lua" in err:
        raise SystemExit(f"tshark failed (exit {p.returncode}): {' '.join(cmd)}\n{err}")
    return p.stdout


def decoded_rows(lua, capture, prefs):
    args = prefs + ["-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=|"]
    for f in FIELDS:
        args += ["-e", f]
    rows = []
    for line in tshark(lua, capture, args).splitlines():
        vals = line.split("\t")
        if len(vals) != len(FIELDS):
            raise SystemExit(f"tshark printed {len(vals)} columns, not {len(FIELDS)}: {line!r}")
        rows.append({k: (v.split("|") if v != "" else []) for k, v in zip(FIELDS, vals)})
    return rows


class Checker:
    def __init__(self, scenario, wire):
        self.scenario, self.wire = scenario, wire
        self.failures = []
        self.notes = []
        self.part = "bytes"  # which checks are running: "bytes", then "run"
        self.per_part = collections.Counter()

    def fail(self, msg):
        self.per_part[self.part] += 1
        if len(self.failures) < 60:
            self.failures.append(msg)
        elif len(self.failures) == 60:
            self.failures.append("(more failures not shown)")

    def expect(self, cond, msg):
        if not cond:
            self.fail(msg)
        return cond


def num(v):
    return int(v, 0) if v.startswith("0x") else int(v)


def one(row, field):
    """The single value of a field in a row (None when absent); two values are a failure."""
    v = row[field]
    if not v:
        return None
    if len(v) > 1:
        raise ValueError(f"{field} appears {len(v)} times: {v}")
    return v[0]


def check_against_bytes(ck, n, raw, row):
    """Every field the dissector shows against the bytes at its offset."""
    where = f"frame {n}"

    def eq(field, want, conv=num):
        try:
            got = one(row, field)
        except ValueError as e:
            ck.fail(f"{where}: {e}")
            return
        if want is None:
            ck.expect(got is None, f"{where}: {field} = {got}, the frame has no such field")
            return
        if got is None:
            ck.fail(f"{where}: {field} missing (want {want})")
            return
        g = conv(got) if conv else got
        ck.expect(g == want, f"{where}: {field} = {got}, the bytes say " +
                  (f"{want:#x}" if isinstance(want, int) and want > 9 else repr(want)))

    hexs = lambda s: s.replace(":", "").lower()
    ck.expect(one(row, "softvia.wire") == raw["wire"], f"{where}: softvia.wire = {row['softvia.wire']}, not {raw['wire']}")
    if raw["wire"] == "udp":
        eq("softvia.udp.magic", "SVU1", None)
        eq("softvia.udp.type", raw["udp_type"])
        eq("softvia.udp.flags", raw["udp_flags"])
        eq("softvia.udp.port", raw["udp_port"])
        eq("softvia.udp.host_id", raw["host"])
        eq("softvia.udp.src_nonce", raw["src_nonce"])
        eq("softvia.udp.dst_nonce", raw["dst_nonce"])
    else:
        eq("softvia.eth.version", raw["shim_version"])
        eq("softvia.eth.kind", raw["shim_kind"])
        eq("softvia.eth.src_nonce", raw["src_nonce"])
        eq("softvia.eth.dst_nonce", raw["dst_nonce"])
        eq("softvia.eth.host_id", raw["host"])
    if raw["frame"] is None:  # a probe, PORT*, or a memif BYE: no NIC frame
        eq("softvia.type", None)
        return
    t = raw["type"]
    eq("softvia.type", t)
    eq("softvia.version", raw["version"])
    eq("softvia.flags", raw["flags"])
    for name, bit in (("immediate", FF_IMM), ("last", FF_LAST), ("reply", FF_REPLY), ("gap", FF_GAP),
                      ("acked", FF_ACKED)):
        eq("softvia.flags." + name, 1 if raw["flags"] & bit else 0)
    eq("softvia.reserved", raw["reserved"])
    for side in ("dst_vi", "src_vi"):
        v = raw[side]
        eq("softvia." + side, v)
        eq(f"softvia.{side}.index", None if v == 0xFFFFFFFF else v & 0xFFFF)
        eq(f"softvia.{side}.gen", None if v == 0xFFFFFFFF else v >> 16)
    frag = t in FRAGMENTED
    eq("softvia.msg_len", raw["msg_len"] if t in WITH_MSG_LEN else None)
    eq("softvia.payload_len", None if t in WITH_MSG_LEN else raw["msg_len"])
    eq("softvia.offset", raw["offset"])
    eq("softvia.frag_len", raw["frag_len"])
    eq("softvia.frag_end", raw["offset"] + raw["frag_len"] if frag else None)
    eq("softvia.ack.count", raw["imm"] if t == ACK else None)
    eq("softvia.nak.status", raw["imm"] if t == NAK else None)
    eq("softvia.nak.status.rdma_prot", (1 if raw["imm"] & 0x80 else 0) if t == NAK else None)
    eq("softvia.imm", None if t in (ACK, NAK, ATOMIC_REQ) else raw["imm"])
    eq("softvia.atomic.op", raw["imm"] if t == ATOMIC_REQ else None)
    eq("softvia.seq", raw["seq"] if t in WITH_MSG_LEN or t == NAK else None)
    eq("softvia.req_id", raw["seq"] if CONN_REQ <= t <= DISCONNECT else None)
    eq("softvia.ack", raw["seq"] if t == ACK else raw.get("piggy_ack"))
    eq("softvia.class", ("reply" if raw["flags"] & FF_REPLY else "request") if t in (DATA, RDMA_WRITE) else None, None)
    if t in (RDMA_WRITE, READ_REQ, ATOMIC_REQ):
        eq("softvia.rdma.addr", raw["rdma_addr"])
        eq("softvia.rdma.memh", raw["rdma_memh"])
        eq("softvia.rdma.memh.index", raw["rdma_memh"] & 0xFFFF)
        eq("softvia.rdma.memh.gen", raw["rdma_memh"] >> 16)
        eq("softvia.rdma.reserved", raw["rdma_reserved"])
        eq("softvia.rdma.frag_addr", raw["rdma_addr"] + raw["offset"] if t == RDMA_WRITE else None)
    else:
        eq("softvia.rdma.addr", None)
    # nicfw_atomic_args: which field shows which operand depends on the operation
    o0, o1 = raw.get("operands", (None, None))
    op = raw["imm"] if t == ATOMIC_REQ else None
    eq("softvia.atomic.add", o0 if op == OP_FETCH_ADD else None)
    eq("softvia.atomic.compare", o0 if op == OP_CMP_SWAP else None)
    eq("softvia.atomic.swap", o1 if op == OP_CMP_SWAP else None)
    want_ops = []  # softvia.atomic.operand: the operands the operation leaves unused
    if op == OP_FETCH_ADD:
        want_ops = [o1]
    elif t == ATOMIC_REQ and op != OP_CMP_SWAP:
        want_ops = [o0, o1]
    ck.expect([num(x) for x in row["softvia.atomic.operand"]] == want_ops,
              f"{where}: softvia.atomic.operand = {row['softvia.atomic.operand']}, the bytes say {want_ops}")
    eq("softvia.atomic.old", raw.get("old"))
    eq("softvia.payload", raw["payload"].hex() if raw.get("payload") else None, hexs)
    if t in CONTROL_WITH_PAYLOAD:
        for k in ("reliability", "rdma_write", "rdma_read", "max_transfer", "src_disc_len", "dst_disc_len",
                  "src_addr_len"):
            eq("softvia.conn." + k, raw[k])
        eq("softvia.conn.reserved", raw["conn_reserved"])
        eq("softvia.conn.src_addr", raw["src_addr"].hex() if raw["src_addr"] else None, hexs)
        eq("softvia.conn.src_disc", raw["src_disc"].hex() if raw["src_disc"] else None, hexs)
        eq("softvia.conn.dst_disc", raw["dst_disc"].hex() if raw["dst_disc"] else None, hexs)
    else:
        eq("softvia.conn.reliability", None)
    if "fcs" in raw:
        eq("softvia.fcs", raw["fcs"])
        eq("softvia.fcs.good", 1 if raw["fcs_good"] else 0)
        ck.expect(raw["fcs_good"], f"{where}: the fault injector's CRC-32C does not match the frame")
    else:
        eq("softvia.fcs", None)
    ck.expect(raw["accounted"] == len(raw["frame"]),
              f"{where}: {NAMES.get(t, t)} of {len(raw['frame'])} bytes, its fields account for {raw['accounted']}")
    ck.expect(not row["softvia.trailing"], f"{where}: the dissector shows unexplained bytes {row['softvia.trailing']}")


def frames_of(rows, raws):
    """(frame number, dissector row, oracle) of every softvia NIC frame, in capture order."""
    out = []
    for i, (row, raw) in enumerate(zip(rows, raws)):
        if raw is not None and not raw.get("quoted") and raw["frame"] is not None:
            out.append((i + 1, row, raw))
    return out


def val(row, field):
    v = one(row, field)
    return None if v is None else num(v)


class Frame:
    """The dissector's values of one NIC frame, as the semantic checks use them."""

    def __init__(self, n, row, raw):
        self.n = n
        self.wire = one(row, "softvia.wire")
        w = "udp" if self.wire == "udp" else "eth"
        self.src_nic = val(row, f"softvia.{w}.src_nonce")
        self.dst_nic = val(row, f"softvia.{w}.dst_nonce")
        self.type = val(row, "softvia.type")
        self.flags = val(row, "softvia.flags")
        self.src_vi = val(row, "softvia.src_vi")
        self.dst_vi = val(row, "softvia.dst_vi")
        self.msg_len = val(row, "softvia.msg_len")
        self.offset = val(row, "softvia.offset")
        self.frag_len = val(row, "softvia.frag_len")
        self.imm = val(row, "softvia.imm")
        self.count = val(row, "softvia.ack.count")
        self.nak_status = val(row, "softvia.nak.status")
        self.seq = val(row, "softvia.seq")
        self.ack = val(row, "softvia.ack")
        self.req_id = val(row, "softvia.req_id")
        self.cls = one(row, "softvia.class")
        self.retrans = one(row, "softvia.analysis.retransmission") == "1"
        self.addr = val(row, "softvia.rdma.addr")
        self.memh = val(row, "softvia.rdma.memh")
        self.op = val(row, "softvia.atomic.op")
        self.add = val(row, "softvia.atomic.add")
        self.compare = val(row, "softvia.atomic.compare")
        self.swap = val(row, "softvia.atomic.swap")
        self.operands = [num(x) for x in row["softvia.atomic.operand"]]
        self.old = val(row, "softvia.atomic.old")
        p = one(row, "softvia.payload")
        self.payload = bytes.fromhex(p.replace(":", "")) if p else b""
        self.reliability = val(row, "softvia.conn.reliability")
        sd, dd = one(row, "softvia.conn.src_disc"), one(row, "softvia.conn.dst_disc")
        self.src_disc = bytes.fromhex(sd).decode("latin-1") if sd else ""
        self.dst_disc = bytes.fromhex(dd).decode("latin-1") if dd else ""
        self.addr_kinds = [num(x) for x in row["softvia.addr.kind"]]
        self.addr_ports = [num(x) for x in row["softvia.addr.port"]]
        self.addr_ipv4 = row["softvia.addr.ipv4"]
        self.addr_mac = [m.lower() for m in row["softvia.addr.mac"]]
        self.addr_nonces = [num(x) for x in row["softvia.addr.nonce"]]
        self.ip_src = one(row, "ip.src")
        # The sender's NIC socket: the datagram's source port, or the port a frame from its
        # per-peer send socket names (preamble flag 1, bytes 6..7).
        # (A train's datagrams all come from one socket: the first one's say it.)
        flags, port = row["softvia.udp.flags"][:1], row["softvia.udp.port"][:1]
        self.udp_sport = num(port[0]) if flags and num(flags[0]) == 1 else val(row, "udp.srcport")
        self.eth_src = (one(row, "eth.src") or "").lower()
        self.fcs_good = one(row, "softvia.fcs.good")

    @property
    def stream(self):  # the connection direction this frame travels
        return (self.src_nic, self.src_vi, self.dst_nic, self.dst_vi)

    @property
    def reverse(self):
        return (self.dst_nic, self.dst_vi, self.src_nic, self.src_vi)

    def __repr__(self):
        return f"frame {self.n} ({NAMES.get(self.type, self.type)})"


def semantic_checks(ck, frames, args):
    lossy_order = args.scenario == "fault"  # the injector reorders frames
    # A request that fails at its sender (rdma_protection's bad local buffers) takes a
    # sequence number and sends nothing: the next one on the wire skips it.
    local_errors = args.scenario in ("nak", "atomic-nak")
    counts = collections.Counter(f.type for f in frames)
    flags_seen = collections.Counter()
    for f in frames:
        for bit, name in ((FF_IMM, "IMMEDIATE"), (FF_LAST, "LAST"), (FF_REPLY, "REPLY"), (FF_GAP, "GAP"),
                          (FF_ACKED, "ACKED")):
            if f.flags & bit:
                flags_seen[(NAMES[f.type], name)] += 1

    # The capture is taken on host 0's interface. A frame host 0 sends is tapped when it
    # leaves; a frame it receives is tapped on its way in, and the NIC's packet socket may
    # get it (and answer) before tcpdump's copy is made. So a frame answering one that
    # came in may sit a little before it in the capture: "sent before" below allows the
    # answered frame up to SLACK frames later.
    SLACK = 32
    # The frames host 1 sends reach host 0's veth through the kernel's per-CPU backlog
    # queues: when the sending process moves to another CPU while a queue waits for its
    # turn, two of them can arrive swapped (the NICs see them so too). No wire reorders
    # more than that here.
    SWAP = 2
    # Every VI pair in these captures carries one connection (VIs are not reused: a new
    # VI in a slot has a new generation), so a connection direction is (sender NIC,
    # sender VI, receiver NIC, receiver VI).
    sent = collections.defaultdict(dict)  # stream -> seq -> (first frame number, type, msg_len)
    for f in frames:
        if f.type in REQUESTS and f.seq not in sent[f.stream]:
            sent[f.stream][f.seq] = (f.n, f.type, f.msg_len)

    def sent_by(stream, seq, n):
        r = sent[stream].get(seq)
        return r if r is not None and r[0] < n + SLACK else None

    def max_sent_by(stream, n):
        return max((q for q, r in sent[stream].items() if r[0] < n + SLACK), default=-1)

    # --- sequence numbers per connection direction; retransmissions as the dissector marks them
    max_seq = {}        # stream -> highest request seq so far
    seqs = collections.defaultdict(set)
    seen_frag = collections.defaultdict(set)  # the dissector's analysis: restarts at CONN_ACCEPT / PEER_ACK
    new_requests = collections.defaultdict(list)  # stream -> [frame] first transmissions, in order
    fragments = collections.defaultdict(dict)     # (stream, type, seq) -> offset -> Frame (first seen)
    last_ack = {}
    peer_reqs = {}
    my_retrans = 0
    for f in frames:
        if f.type in (CONN_ACCEPT, PEER_ACK):  # (as the dissector does)
            for st in (f.stream, f.reverse):
                seen_frag.pop(st, None)
        if f.type in REQUESTS:
            key = (f.type, f.seq, f.offset)
            again = key in seen_frag[f.stream]
            seen_frag[f.stream].add(key)
            my_retrans += again
            ck.expect(f.retrans == again, f"{f}: the dissector says retransmission={f.retrans}, "
                                          f"the capture says {again} (seq {f.seq} offset {f.offset})")
            m = max_seq.get(f.stream, -1)
            if lossy_order or local_errors:
                ck.expect(f.seq <= m + 64, f"{f}: seq {f.seq} jumps past {m} by more than the window")
            else:  # (frames coming in may swap places on a busy machine: SWAP)
                ck.expect(f.seq <= m + 1 + SWAP, f"{f}: seq {f.seq} after {m}: a new request must take {m + 1}")
            seqs[f.stream].add(f.seq)
            if f.seq > m:
                max_seq[f.stream] = f.seq
            first = sent[f.stream][f.seq]
            if first[0] == f.n:
                new_requests[f.stream].append(f)
            else:
                ck.expect(first[1:] == (f.type, f.msg_len),
                          f"{f}: seq {f.seq} was a {NAMES[first[1]]} of {first[2]} bytes, now {NAMES[f.type]} of {f.msg_len}")
        elif f.type in ANSWERS:
            ck.expect(f.retrans is False, f"{f}: an answer marked as retransmission")
            want = READ_REQ if f.type == READ_RESP else ATOMIC_REQ
            req = sent_by(f.reverse, f.seq, f.n)
            ck.expect(req is not None and req[1] == want,
                      f"{f}: answers seq {f.seq}, which is no {NAMES[want]} sent on the connection before it")
            if req:
                ck.expect(req[2] == f.msg_len, f"{f}: {f.msg_len} bytes for a {NAMES[want]} of {req[2]}")
        if f.type in FRAGMENTED:
            k = (f.stream, f.type, f.seq)
            old = fragments[k].get(f.offset)
            if old is None:
                fragments[k][f.offset] = f
            else:
                # A resent request carries the same bytes. A read asked again is served
                # again from the target's memory as it is then (reads are idempotent, the
                # initiator takes the first whole answer): only its shape must agree.
                same = lambda x: (x.frag_len, x.msg_len, x.flags & FF_LAST) + ((x.payload,) if f.type != READ_RESP else ())
                ck.expect(same(old) == same(f), f"{f}: differs from {old}, which carried the same fragment")
        # --- ACKs: standalone and piggybacked acknowledge requests sent the other way
        if f.ack is not None:
            m = max_sent_by(f.reverse, f.n)
            ck.expect(f.ack <= m + 1, f"{f}: acknowledges up to seq {f.ack}, but only {m} was sent")
            if f.type == ACK:
                ck.expect(f.ack >= 1 or f.flags & FF_GAP, f"{f}: ACK of nothing (next expected 0)")
                ck.expect(0 <= f.count <= 4096, f"{f}: acknowledges {f.count} messages")
                ck.expect(f.flags & ~FF_GAP == 0, f"{f}: ACK flags {f.flags:#x}")
            if not lossy_order:  # one sender's frames stay in order (but for SWAP)
                prev = last_ack.get(f.stream, 0)
                ck.expect(f.ack >= prev - SWAP, f"{f}: cumulative ACK goes back from {prev} to {f.ack}")
            last_ack[f.stream] = max(f.ack, last_ack.get(f.stream, 0))
        if f.type == NAK:
            req = sent_by(f.reverse, f.seq, f.n)
            ck.expect(req is not None and req[1] in (RDMA_WRITE, READ_REQ, ATOMIC_REQ),
                      f"{f}: refuses seq {f.seq}, which is no RDMA or atomic request sent on the connection")
            ck.expect(f.nak_status and f.nak_status & ~0x1FE == 0, f"{f}: status {f.nak_status:#x} is not error bits")
            ck.expect(last_ack.get(f.stream, 0) <= f.seq, f"{f}: refuses seq {f.seq}, already acknowledged")
        if f.type in (DATA, RDMA_WRITE):
            ck.expect(f.cls == ("reply" if f.flags & FF_REPLY else "request"), f"{f}: class {f.cls}, flags {f.flags:#x}")
        if f.type == PEER_REQ:
            ck.expect(f.req_id >= 1 and f.dst_vi == 0xFFFFFFFF, f"{f}: request id {f.req_id}, to VI {f.dst_vi:#x}")
    for f in frames:  # a PEER_ACK answers a PEER_REQ of the VI it goes to, by its request id
        if f.type == PEER_REQ:
            peer_reqs.setdefault((f.src_nic, f.src_vi, f.req_id), f.n)
    for f in frames:
        if f.type == PEER_ACK:
            ck.expect(peer_reqs.get((f.dst_nic, f.dst_vi, f.req_id), 1 << 62) < f.n + SLACK,
                      f"{f}: answers request {f.req_id} of VI {f.dst_vi:#x}, which asked for none")
    for f in frames:
        if f.wire is not None and args.scenario == "fault":
            ck.expect(f.fcs_good == "1", f"{f}: fault-injector trailer missing or bad ({f.fcs_good})")

    for st in new_requests:  # program order: by sequence number, whatever the capture's order
        new_requests[st].sort(key=lambda f: f.seq)
    for s, got in seqs.items():
        top = max(got)
        if local_errors:
            continue
        if top >= len(got) + 64:  # (no set of a garbage range: seq may be anything here)
            ck.fail(f"connection {s}: seqs up to {top}, {len(got)} of them seen")
        else:
            ck.expect(got == set(range(top + 1)), f"connection {s}: seqs {sorted(set(range(top + 1)) - got)} never seen")

    # --- fragments tile their message; only whole MTU-sized pieces before the last
    messages = {}
    for (stream, t, seq), frs in fragments.items():
        offs = sorted(frs)
        msg_len = frs[offs[0]].msg_len
        pos, ok = 0, True
        for o in offs:
            fr = frs[o]
            ok &= ck.expect(fr.msg_len == msg_len, f"{fr}: message length {fr.msg_len}, other fragments {msg_len}")
            ok &= ck.expect(o == pos, f"{fr}: fragment at {o}, the one before ended at {pos} (seq {seq})")
            last = o + fr.frag_len == msg_len
            ok &= ck.expect(bool(fr.flags & FF_LAST) == last, f"{fr}: LAST={bool(fr.flags & FF_LAST)} at [{o}, {o + fr.frag_len}) of {msg_len}")
            if not last:  # a whole frame's worth: the MTU in whole cache lines (less the RDMA extension)
                ext = 16 if t == RDMA_WRITE else 0
                ok &= ck.expect((fr.frag_len + ext) % 64 == 0 and fr.frag_len > 0,
                                f"{fr}: a non-last fragment of {fr.frag_len} bytes")
            pos = o + fr.frag_len
        ok &= ck.expect(pos == msg_len, f"{NAMES[t]} seq {seq} on {stream}: fragments add up to {pos} of {msg_len}")
        if ok:
            messages[(stream, t, seq)] = b"".join(frs[o].payload for o in offs)
    multi = sum(1 for (_, t, _), frs in fragments.items() if len(frs) > 1)

    need_types = {
        "rdma": {DATA, ACK, PEER_REQ, PEER_ACK, DISCONNECT, RDMA_WRITE, READ_REQ, READ_RESP},
        "names": {DATA, ACK, CONN_REQ, CONN_ACCEPT, CONN_REJECT, CONN_NOMATCH, DISCONNECT},
        "am": {DATA, PEER_REQ, PEER_ACK, DISCONNECT},
        "fault": {DATA, ACK, PEER_REQ, PEER_ACK, DISCONNECT},
        "nak": {NAK, RDMA_WRITE, READ_REQ, READ_RESP, ACK},
        "fadd": {PEER_REQ, PEER_ACK, ATOMIC_REQ, ATOMIC_RESP, DATA, ACK},
        "lock": {PEER_REQ, PEER_ACK, ATOMIC_REQ, ATOMIC_RESP, READ_REQ, READ_RESP, RDMA_WRITE, DATA, ACK},
        "atomic-nak": {ATOMIC_REQ, ATOMIC_RESP, NAK},
    }[args.scenario]
    for t in sorted(need_types):
        ck.expect(counts[t] > 0, f"no {NAMES[t]} frame in the capture")

    # --- per scenario: what the program did
    if args.scenario == "rdma":
        check_rdma(ck, frames, new_requests, messages, args)
        ck.expect(multi > 0, "no message of more than one fragment")
        # The written-to side answers a write with its own before its ACK hold runs out.
        ck.expect(flags_seen[("RDMA_WRITE", "ACKED")] > 0, "no RDMA write carries a piggybacked ACK")
    elif args.scenario == "names":
        check_names(ck, frames, new_requests)
    elif args.scenario == "am":
        check_am(ck, frames, new_requests, args)
    elif args.scenario in ("fadd", "lock"):
        check_atomics.check(ck, frames, new_requests, messages, args)
    elif args.scenario == "atomic-nak":
        check_atomics.check_refused(ck, frames)
    elif args.scenario == "fault":
        check_fault(ck, frames, new_requests, messages, args)
        ck.expect(multi > 0, "no message of more than one fragment")
        ck.expect(my_retrans > 0, "no retransmitted or duplicated frame under the fault injector")
        ck.expect(flags_seen[("ACK", "GAP")] > 0, "no ACK asks for a resend (GAP) under the fault injector")
    summary = ", ".join(f"{NAMES[t]} {counts[t]}" for t in sorted(counts))
    fl = ", ".join(f"{t}+{n} {c}" for (t, n), c in sorted(flags_seen.items()))
    ck.notes.append(f"{len(frames)} frames: {summary}; flags: {fl}; multi-fragment messages {multi}; "
                    f"retransmissions {my_retrans}")


def value64(b):
    return struct.unpack("<Q", b)[0]


def check_rdma(ck, frames, new_requests, messages, args):
    """vipl_bench --only rdma --sizes 8,4096 --iters N: each side RDMA-writes a counter
    k + (size << 40), k = 1, 2, ..., into the other's window, (N + N/10 + 10) times per
    size; then rank 0 reads size bytes of rank 1's window as often; then a zero-length
    send with immediate data 0xFFFFFFFF (DONE_MARK) ends each size."""
    rounds = args.iters + args.iters // 10 + 10
    readers = {f.src_nic for f in frames if f.type == READ_REQ}
    if not ck.expect(len(readers) == 1, f"READ_REQ from {len(readers)} NICs, expected rank 0's alone"):
        return
    rank0 = readers.pop()
    write_target = {}
    last_written = {}
    for stream, reqs in new_requests.items():
        writes = [f for f in reqs if f.type == RDMA_WRITE]
        per_size = collections.defaultdict(list)
        for w in writes:
            msg = messages.get((stream, RDMA_WRITE, w.seq))
            if msg is None:
                continue
            v = value64(msg[-8:])
            ck.expect(v >> 40 == w.msg_len, f"{w}: the counter {v:#x} names size {v >> 40}, the write has {w.msg_len}")
            per_size[w.msg_len].append(v & ((1 << 40) - 1))
        for size, ks in per_size.items():
            ck.expect(ks == list(range(1, rounds + 1)),
                      f"RDMA writes of {size} on {stream}: counters {ks[:5]}..., want 1..{rounds}")
            last_written[(stream, size)] = ks[-1] if ks else None
        ck.expect(sorted(per_size) == [8, 4096], f"RDMA write sizes {sorted(per_size)} on {stream}")
        # Every fragment of every write names the same remote window and handle.
        targets = {(f.addr, f.memh) for f in frames if f.type == RDMA_WRITE and f.stream == stream}
        if ck.expect(len(targets) == 1, f"RDMA writes on {stream} name {len(targets)} remote buffers"):
            addr, memh = targets.pop()
            write_target[stream] = (addr, memh)
            ck.expect(addr % 8 == 0 and 0 < addr < 1 << 47, f"RDMA write address {addr:#x} on {stream}")
            ck.expect(memh & 0xFFFF >= 1 and memh >> 16 >= 1, f"memory handle {memh:#x} on {stream}")
        dones = [f for f in reqs if f.type == DATA]
        if stream[0] == rank0:
            ck.expect([(d.msg_len, d.flags & FF_IMM, d.imm) for d in dones] == [(0, FF_IMM, 0xFFFFFFFF)] * 2,
                      f"rank 0's sends: {[(d.msg_len, d.flags, d.imm) for d in dones]}, want two DONE_MARKs")
            reads = [f for f in reqs if f.type == READ_REQ]
            ck.expect([r.msg_len for r in reads] == [8] * rounds + [4096] * rounds,
                      f"rank 0's reads: {len(reads)} of sizes {sorted(set(r.msg_len for r in reads))}")
            for r in reads:
                ck.expect((r.addr, r.memh) == write_target.get(stream),
                          f"{r}: reads {r.addr:#x}/{r.memh:#x}, rank 0 writes to {write_target.get(stream)}")
        else:
            ck.expect(not dones and not [f for f in reqs if f.type == READ_REQ], "rank 1 sent or read")
    # The answers carry what rank 0 wrote last into rank 1's window.
    for stream, reqs in new_requests.items():
        if stream[0] != rank0:
            continue
        for r in reqs:
            if r.type != READ_REQ:
                continue
            data = messages.get((r.reverse, READ_RESP, r.seq))
            if not ck.expect(data is not None and len(data) == r.msg_len, f"{r}: no whole answer"):
                continue
            want = last_written.get((stream, r.msg_len))
            v = value64(data[-8:])
            ck.expect(v == (r.msg_len << 40) + (want or 0),
                      f"{r}: read {v:#x} from rank 1's window, rank 0 last wrote {want} for size {r.msg_len}")


def check_names(ck, frames, new_requests):
    """mp_names: rank 1 asks for discriminator "nobody" (NOMATCH), connects to "mp-svc"
    (ACCEPT), both send "from R #i" for i < 50, disconnect, and a second request to
    "mp-svc" is rejected. Requests come from discriminator "client"."""
    reqs = [f for f in frames if f.type == CONN_REQ]
    for r in reqs:
        ck.expect(r.src_disc == "client" and r.dst_disc in ("nobody", "mp-svc"),
                  f"{r}: discriminators {r.src_disc!r} -> {r.dst_disc!r}")
        ck.expect(r.reliability == 2, f"{r}: reliability {r.reliability}, mp_names uses reliable delivery")
        # The sender's whole NIC address: the same-host wrapper (0x20) around the wire's.
        ck.expect(r.addr_kinds[:1] == [0x20], f"{r}: address kinds {r.addr_kinds}")
        if r.wire == "udp":
            ck.expect(2 in r.addr_kinds and r.addr_ports[:1] == [r.udp_sport] and r.addr_ipv4[:1] == [r.ip_src],
                      f"{r}: address {r.addr_ipv4}:{r.addr_ports}, the datagram came from {r.ip_src}:{r.udp_sport}")
        else:
            ck.expect(3 in r.addr_kinds and r.addr_mac[:1] == [r.eth_src],
                      f"{r}: address MAC {r.addr_mac}, the frame came from {r.eth_src}")
        ck.expect(r.src_nic in r.addr_nonces, f"{r}: address nonces {r.addr_nonces}, the sender's is {r.src_nic:#x}")

    for r in reqs:
        ck.expect(r.req_id >= 1, f"{r}: request id {r.req_id} (ids count from 1)")

    def answers(a, disc):
        return [r for r in reqs if r.dst_disc == disc and r.req_id == a.req_id and r.src_vi == a.dst_vi
                and r.src_nic == a.dst_nic and r.n < a.n + 32]  # (capture order: semantic_checks, SLACK)

    server = None
    for a in frames:
        if a.type == CONN_NOMATCH:
            ck.expect(answers(a, "nobody") and a.src_vi == 0, f"{a}: answers no request for 'nobody'")
        elif a.type == CONN_ACCEPT:
            ck.expect(answers(a, "mp-svc"), f"{a}: answers no request for 'mp-svc'")
            ck.expect(a.reliability == 2, f"{a}: reliability {a.reliability}")
            server = a.src_nic
        elif a.type == CONN_REJECT:
            ok = answers(a, "mp-svc")
            ck.expect(ok and a.src_vi == 0, f"{a}: answers no request for 'mp-svc'")
    if not ck.expect(server is not None, "no CONN_ACCEPT"):
        return
    accepted = {a.req_id for a in frames if a.type == CONN_ACCEPT}
    rejected = {a.req_id for a in frames if a.type == CONN_REJECT}
    ck.expect(accepted and rejected and not accepted & rejected, f"accepted requests {accepted}, rejected {rejected}")
    for stream, reqs in new_requests.items():
        data = [f for f in reqs if f.type == DATA]
        rank = 0 if stream[0] == server else 1
        texts = [f.payload for f in data]
        want = [f"from {rank} #{i}".encode() + b"\0" for i in range(50)]
        ck.expect(texts == want, f"rank {rank}'s messages: {texts[:3]}..., want 'from {rank} #0'..'#49'")
        for i, f in enumerate(data):
            ck.expect(f.seq == i and f.msg_len == len(want[i]) if i < len(want) else False,
                      f"{f}: seq {f.seq} carries message {f.payload!r}")


def check_am(ck, frames, new_requests, args):
    """am_pingpong with firmware steering: rank 0 sends requests (pings, then a pipeline
    of stream requests), rank 1 answers each with a reply, which goes with REPLY set."""
    by_nic = collections.defaultdict(collections.Counter)
    for stream, reqs in new_requests.items():
        for f in reqs:
            if f.type == DATA:
                by_nic[stream[0]][f.cls] += 1
    if not ck.expect(len(by_nic) == 2, f"DATA from {len(by_nic)} NICs"):
        return
    (a, ca), (b, cb) = sorted(by_nic.items(), key=lambda kv: kv[1]["reply"])
    need = args.iters + args.messages
    ck.expect(ca["request"] >= need, f"the pinging NIC sent {ca['request']} requests, want >= {need}")
    ck.expect(cb["reply"] >= need, f"the answering NIC sent {cb['reply']} replies, want >= {need}")
    ck.expect(ca["reply"] < cb["reply"] and cb["request"] < ca["request"], f"classes: {dict(ca)} and {dict(cb)}")
    ck.notes.append(f"AM messages: {dict(ca)} / {dict(cb)}")


def check_fault(ck, frames, new_requests, messages, args):
    """fault_stream MESSAGES RD: rank 0 sends messages s = 0, 1, ..., each starting with
    {seq = s, len, FNV-1a of the rest}; rank 1 returns credits: zero-length sends with
    immediate data 16, the last one 0xFFFFFFFF."""
    senders = [s for s, reqs in new_requests.items() if any(f.msg_len for f in reqs)]
    if not ck.expect(len(senders) == 1, f"{len(senders)} connections carry message data"):
        return
    s0 = senders[0]
    data = [f for f in new_requests[s0] if f.type == DATA]
    got = sorted(f.seq for f in data)  # (the injector reorders: capture order is not seq order)
    ck.expect(got == list(range(args.messages)), f"rank 0 sent seqs {got[:3]}..{got[-3:]}, want 0..{args.messages - 1}")
    for f in data:
        msg = messages.get((s0, DATA, f.seq))
        if msg is None:
            continue
        seq, ln, h = struct.unpack("<III", msg[:12])
        ck.expect(seq == f.seq and ln == f.msg_len == len(msg) and fnv1a(msg[12:]) == h,
                  f"{f}: message says seq {seq}, length {ln}, sum {h:#x}; frame {f.seq}/{f.msg_len}, sum {fnv1a(msg[12:]):#x}")
    credits = sorted((f for f in new_requests.get((s0[2], s0[3], s0[0], s0[1]), []) if f.type == DATA),
                     key=lambda f: f.seq)  # (in seq order: the injector reorders)
    imms = [f.imm for f in credits]
    ck.expect(credits and all(f.msg_len == 0 and f.flags & FF_IMM for f in credits) and
              imms[-1] == 0xFFFFFFFF and all(i == 16 for i in imms[:-1]),
              f"rank 1's credits: {imms[:4]}...{imms[-2:]}, want 16, ..., 0xffffffff")


def check_send_sockets(ck, raws):
    """udp: a frame from a per-peer send socket (flag 1) comes from a port its NIC announced
    (PORT, from the NIC socket it names in bytes 6..7) and the peer acknowledged (PORT_ACK)
    before it; every run here lasts long enough for both NICs to move to their send sockets."""
    announced, acked, flagged = {}, set(), 0
    for n, r in enumerate(raws, 1):
        if not r or r.get("wire") != "udp" or r.get("quoted"):
            continue
        t, ip = r["udp_type"], bytes(r["ip_src"])
        if t == 3:
            announced[(ip, r["udp_port"])] = r["sport"]
        elif t == 4:
            acked.add((r["dport"], r["udp_port"]))  # (the announcer's NIC port, its send socket)
        elif t == 1 and r["udp_flags"] == 1:
            flagged += 1
            nic = announced.get((ip, r["sport"]))
            ck.expect(nic is not None, f"frame {n}: from send socket port {r['sport']}, which no PORT announced")
            ck.expect(nic is None or nic == r["udp_port"],
                      f"frame {n}: names NIC port {r['udp_port']}, its PORT came from {nic}")
            ck.expect((r["udp_port"], r["sport"]) in acked,
                      f"frame {n}: by send socket {r['sport']} before the peer acknowledged it")
    ck.expect(flagged > 0, "no frame by a per-peer send socket (txsock=peer) in the capture")
    ck.notes.append(f"{flagged} frames by per-peer send sockets, {len(announced)} announced")


def main():
    # A dissector that reads garbage must make this script fail, not the machine swap.
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))
    ap = argparse.ArgumentParser()
    ap.add_argument("--lua", required=True)
    ap.add_argument("--capture", required=True)
    ap.add_argument("--wire", required=True, choices=["udp", "dpdk"])
    ap.add_argument("--scenario", required=True, choices=["rdma", "names", "am", "fault", "nak", "fadd", "lock",
                                                          "atomic-nak"])
    ap.add_argument("--iters", type=int, default=0)
    ap.add_argument("--messages", type=int, default=0)
    ap.add_argument("--prefs", action="append", default=[], help="extra tshark -o settings")
    ap.add_argument("--semantic-only", action="store_true", help="skip the comparison with the bytes")
    ap.add_argument("--bytes-only", action="store_true", help="skip the checks of what the run did")
    ap.add_argument("--trains", metavar="SPLIT_PCAP",
                    help="the capture has udp trains taken whole: write it cut into datagrams to SPLIT_PCAP, "
                         "check that one as usual and the trains against it")
    args = ap.parse_args()
    ck = Checker(args.scenario, args.wire)
    prefs = []
    for p in args.prefs:
        prefs += ["-o", p]

    if args.trains:
        counts = split_trains(args.capture, args.trains, args.scenario == "fault")
        ck.part = "trains"
        check_trains(ck, decoded_rows(args.lua, args.capture, prefs), decoded_rows(args.lua, args.trains, prefs), counts)
        ck.notes.append(f"{sum(k > 1 for k in counts)} trains of {max(counts)} datagrams at most, "
                        f"each decoded as its datagrams one by one")
        ck.part = "bytes"
        args.capture = args.trains
    pkts = read_pcap(args.capture)
    rows = decoded_rows(args.lua, args.capture, prefs)
    if len(rows) != len(pkts):
        raise SystemExit(f"tshark shows {len(rows)} packets, the file holds {len(pkts)}")
    raws = [decode_raw(p, args.scenario == "fault") for p in pkts]
    nsoft = 0
    for i, (row, raw) in enumerate(zip(rows, raws)):
        n = i + 1
        if args.semantic_only:
            nsoft += raw is not None
            continue
        if raw is None:
            ck.expect(not row["softvia.wire"], f"frame {n}: decoded as softvia, but it is not a softvia packet")
            continue
        nsoft += 1
        if raw["wire"] != args.wire:
            ck.fail(f"frame {n}: a {raw['wire']} packet in a {args.wire} capture")
        if not ck.expect(row["softvia.wire"], f"frame {n}: a softvia packet the dissector did not take"):
            continue
        if not raw.get("quoted"):
            check_against_bytes(ck, n, raw, row)
    ck.expect(nsoft > 0, "no softvia packet in the capture")

    # Nothing in a softvia packet is malformed, warned about, or a Lua error.
    for i, row in enumerate(rows):
        if not row["softvia.wire"]:
            continue
        sev = [num(x) for x in row["_ws.expert.severity"]]
        if row["_ws.lua.error"] or row["_ws.malformed"] or any(x >= PI_WARN for x in sev):
            ck.fail(f"frame {i + 1}: malformed or warned: {'; '.join(row['_ws.expert.message'])}")

    ck.part = "run"
    if not args.bytes_only:
        try:
            frames = [Frame(n, row, raw) for n, row, raw in frames_of(rows, raws)]
            semantic_checks(ck, frames, args)
            if args.wire == "udp":
                check_send_sockets(ck, raws)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, struct.error) as e:
            ck.fail(f"the decoded values do not add up at all: {type(e).__name__}: {e}")

    tag = f"{args.wire}/{args.scenario}"
    for note in ck.notes:
        print(f"check_capture {tag}: {note}")
    if ck.failures:
        trains = f"; trains: {ck.per_part['trains']} problems" if args.trains else ""
        print(f"check_capture {tag}: FAIL (against the bytes: {ck.per_part['bytes']} problems; "
              f"against the run: {ck.per_part['run']} problems{trains}):")
        for f in ck.failures:
            print("  " + f)
        return 1
    print(f"check_capture {tag}: PASS ({nsoft} softvia packets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
