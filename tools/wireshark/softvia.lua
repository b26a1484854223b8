-- softvia.lua -- Wireshark dissector for softvia's wire frames (docs/wireshark.md).
--
--   wireshark -X lua_script:tools/wireshark/softvia.lua capture.pcap
--   tshark -X lua_script:tools/wireshark/softvia.lua -r capture.pcap -V
--   or copy it to ~/.local/lib/wireshark/plugins/ (older Wireshark: ~/.config/wireshark/plugins/)
--
-- What it decodes, as the code writes it (every multi-byte field little-endian unless
-- said otherwise):
--
--  * The udp wire (nicfw/transport/udp/udp_transport.h): one frame per UDP datagram,
--    after a 24-byte preamble: [0..3] magic "SVU1", [4] type (1 frame, 2 liveness probe,
--    3 PORT, 4 PORT_ACK, 5 PORT_NAK: a per-peer send socket's announcement, its answer,
--    its refusal), [5] flags (1: a frame from the sender's per-peer send socket), [6..7]
--    a port, big-endian (such a frame: the sender's NIC socket; PORT*: the send socket;
--    else zero), [8..15] the sender's host identity, [16..19] the sender's nonce,
--    [20..23] the receiver's nonce. A probe or PORT* is the preamble alone. The udp wire binds an
--    ephemeral port unless the device says port=N, so datagrams are recognised by their
--    preamble (a heuristic on every UDP datagram, preference "heuristic") and on the UDP
--    ports of preference "udp_ports" (also "Decode As...").
--  * The dpdk wire (nicfw/transport/dpdk/dpdk_transport.h): Ethernet frames of EtherType
--    0x88B5 with an 18-byte shim after the Ethernet header: [0] shim version (1), [1]
--    kind (0 a frame, 1 BYE, 2 BYE-ACK), [2..5] the sender's nonce, [6..9] the
--    receiver's nonce, [10..17] the sender's host identity, then the frame.
--  * The NIC frame (nicfw/include/nicfw/abi.h, nicfw_frame_hdr, 32 bytes): type,
--    version, flags, reserved, dst_vi, src_vi, msg_len, offset, frag_len, imm, seq; then
--    per type: nicfw_rdma_ext (16 bytes: remote address, memory handle, reserved) for
--    RDMA_WRITE, READ_REQ and ATOMIC_REQ; frag_len payload bytes for DATA, RDMA_WRITE and
--    READ_RESP, followed by a 4-byte piggybacked ACK when flag ACKED is set;
--    nicfw_conn_payload (msg_len bytes: 80 fixed, then the discriminators) for CONN_REQ,
--    CONN_ACCEPT, PEER_REQ and PEER_ACK.
--  * The NIC atomics offload (nicfw/offload/atomics): ATOMIC_REQ (imm = the operation,
--    1 fetch-add, 2 compare-and-swap; msg_len 8) carries nicfw_rdma_ext and then
--    nicfw_atomic_args (two u64: the addend, or compare and swap); ATOMIC_RESP (seq = the
--    request's) carries the 8-byte old value. A refused atomic is answered by a NAK.
--  * The fault injector's trailer (nicfw/transport/fault/fault_transport.h,
--    SOFTVIA_FAULTS): a CRC-32C of the frame, 4 bytes after it; found by length and
--    checked (preference "fault_trailer").
--
-- Written from the softvia sources; field names are softvia.* (docs/wireshark.md lists
-- them). Tested with Wireshark 4.0 (Lua 5.2); written to load under Lua 5.1 to 5.4 (the
-- bit operations below pick what the interpreter has).

local NICFW_ABI_VERSION = 3
local HDR_LEN = 32          -- sizeof(nicfw_frame_hdr)
local RDMA_EXT_LEN = 16     -- sizeof(nicfw_rdma_ext)
local ATOMIC_ARGS_LEN = 16  -- sizeof(nicfw_atomic_args)
local ATOMIC_OLD_LEN = 8    -- ATOMIC_RESP: the old value
local ATOMIC_GRANT_LEN = 48 -- ATOMIC_GRANT: nicfw_atomic_grant (shown as bytes)
local CONN_FIXED = 80       -- offsetof(nicfw_conn_payload, disc)
local MAX_TRANSFER = 16 * 1024 * 1024
local MAX_DISC = 128
local MAX_ADDR = 64
local UDP_PREAMBLE = 24
local UDP_MAGIC = "SVU1"
local ETH_SHIM = 18
local ETHERTYPE = 0x88B5
local VI_NONE = 0xFFFFFFFF

-- ---------------------------------------------------------------- bit operations
-- bit32 (Lua 5.2), LuaBitOp "bit" (Wireshark's Lua 5.1), or the 5.3+ operators (compiled
-- at run time, since a 5.2 parser refuses them).
local band, bxor, rshift
if bit32 then
    band, bxor, rshift = bit32.band, bit32.bxor, bit32.rshift
elseif bit then
    band = function(a, b) return bit.band(a, b) % 4294967296 end
    bxor = function(a, b) return bit.bxor(a, b) % 4294967296 end
    rshift = function(a, n) return bit.rshift(a, n) % 4294967296 end
else
    band, bxor, rshift = load("return function(a, b) return a & b end, " ..
                              "function(a, b) return a ~ b end, " ..
                              "function(a, n) return (a & 0xFFFFFFFF) >> n end")()
end

-- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as nicfw's crc32c().
local crc_table = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then c = bxor(rshift(c, 1), 0x82F63B78) else c = rshift(c, 1) end
    end
    crc_table[i] = c
end
local function crc32c(bytes)  -- bytes: a ByteArray
    local c = 0xFFFFFFFF
    for i = 0, bytes:len() - 1 do
        c = bxor(crc_table[band(bxor(c, bytes:get_index(i)), 0xFF)], rshift(c, 8))
    end
    return bxor(c, 0xFFFFFFFF)
end

-- ---------------------------------------------------------------- value names
local T = {
    DATA = 1, ACK = 2, CONN_REQ = 3, CONN_ACCEPT = 4, CONN_REJECT = 5, CONN_NOMATCH = 6,
    PEER_REQ = 7, PEER_ACK = 8, DISCONNECT = 9, RDMA_WRITE = 10, READ_REQ = 11, READ_RESP = 12,
    NAK = 13, ATOMIC_REQ = 14, ATOMIC_RESP = 15,
    ATOMIC_GRANT = 16,  -- same host only (it goes through shared memory, never on a wire)
}
local type_names = {}
for k, v in pairs(T) do type_names[v] = k end
local TYPE_MAX = 16

-- ATOMIC_REQ's imm (NICFW_OFFLOAD_OP_*)
local OP_FETCH_ADD, OP_CMP_SWAP = 1, 2
local atomic_op_names = { [OP_FETCH_ADD] = "fetch-add", [OP_CMP_SWAP] = "cmp-swap" }

local FF_IMMEDIATE, FF_LAST, FF_REPLY, FF_GAP, FF_ACKED = 0x01, 0x02, 0x04, 0x08, 0x10
local FF_KNOWN = 0x1F

local reliability_names = { [1] = "Unreliable", [2] = "Reliable delivery", [4] = "Reliable reception" }
local udp_type_names = { [1] = "Frame", [2] = "Liveness probe", [3] = "PORT (send socket announced)",
                         [4] = "PORT_ACK (send socket known)", [5] = "PORT_NAK (send socket not known)" }
local UDP_FLAG_PEER_SOCKET = 1
local shim_kind_names = { [0] = "Frame", [1] = "BYE (memif close)", [2] = "BYE-ACK (memif close)" }
local addr_kind_names = { [1] = "shm", [2] = "udp", [3] = "dpdk", [4] = "verbs", [0x20] = "network + shm (same-host shortcut)" }

-- ---------------------------------------------------------------- protocol and fields
local softvia = Proto("softvia", "softvia NIC frame")

local f = {
    -- udp wire preamble
    udp_magic = ProtoField.string("softvia.udp.magic", "Magic"),
    udp_type = ProtoField.uint8("softvia.udp.type", "Datagram type", base.DEC, udp_type_names),
    udp_flags = ProtoField.uint8("softvia.udp.flags", "Flags", base.HEX),
    udp_flag_peer_socket = ProtoField.bool("softvia.udp.flags.peer_socket", "From the sender's send socket for this peer",
                                           8, nil, UDP_FLAG_PEER_SOCKET),
    udp_port = ProtoField.uint16("softvia.udp.port", "Port", base.DEC),
    udp_host = ProtoField.uint64("softvia.udp.host_id", "Sender host identity", base.HEX),
    udp_src_nonce = ProtoField.uint32("softvia.udp.src_nonce", "Sender NIC nonce", base.HEX),
    udp_dst_nonce = ProtoField.uint32("softvia.udp.dst_nonce", "Receiver NIC nonce", base.HEX),
    udp_train = ProtoField.uint32("softvia.udp.train", "Datagrams in this train", base.DEC),
    udp_train_index = ProtoField.uint32("softvia.udp.train_index", "Datagram of the train", base.DEC),
    -- dpdk wire shim
    eth_version = ProtoField.uint8("softvia.eth.version", "Shim version", base.DEC),
    eth_kind = ProtoField.uint8("softvia.eth.kind", "Shim kind", base.DEC, shim_kind_names),
    eth_src_nonce = ProtoField.uint32("softvia.eth.src_nonce", "Sender NIC nonce", base.HEX),
    eth_dst_nonce = ProtoField.uint32("softvia.eth.dst_nonce", "Receiver NIC nonce", base.HEX),
    eth_host = ProtoField.uint64("softvia.eth.host_id", "Sender host identity", base.HEX),
    wire = ProtoField.string("softvia.wire", "Wire"),
    -- nicfw_frame_hdr
    type = ProtoField.uint8("softvia.type", "Type", base.DEC, type_names),
    version = ProtoField.uint8("softvia.version", "Version", base.DEC),
    flags = ProtoField.uint8("softvia.flags", "Flags", base.HEX),
    flag_imm = ProtoField.bool("softvia.flags.immediate", "IMMEDIATE (imm carries immediate data)", 8, nil, FF_IMMEDIATE),
    flag_last = ProtoField.bool("softvia.flags.last", "LAST (last fragment of the message)", 8, nil, FF_LAST),
    flag_reply = ProtoField.bool("softvia.flags.reply", "REPLY (message class reply: steering)", 8, nil, FF_REPLY),
    flag_gap = ProtoField.bool("softvia.flags.gap", "GAP (resend from seq)", 8, nil, FF_GAP),
    flag_acked = ProtoField.bool("softvia.flags.acked", "ACKED (a piggybacked ACK follows the payload)", 8, nil, FF_ACKED),
    flag_unknown = ProtoField.uint8("softvia.flags.unknown", "Unknown flags", base.HEX, nil, 0xE0),
    reserved = ProtoField.uint8("softvia.reserved", "Reserved", base.HEX),
    dst_vi = ProtoField.uint32("softvia.dst_vi", "Destination VI", base.HEX),
    dst_vi_index = ProtoField.uint32("softvia.dst_vi.index", "Index", base.DEC, nil, 0x0000FFFF),
    dst_vi_gen = ProtoField.uint32("softvia.dst_vi.gen", "Generation", base.DEC, nil, 0xFFFF0000),
    src_vi = ProtoField.uint32("softvia.src_vi", "Source VI", base.HEX),
    src_vi_index = ProtoField.uint32("softvia.src_vi.index", "Index", base.DEC, nil, 0x0000FFFF),
    src_vi_gen = ProtoField.uint32("softvia.src_vi.gen", "Generation", base.DEC, nil, 0xFFFF0000),
    msg_len = ProtoField.uint32("softvia.msg_len", "Message length", base.DEC),
    payload_len = ProtoField.uint32("softvia.payload_len", "Payload length", base.DEC),
    offset = ProtoField.uint32("softvia.offset", "Fragment offset", base.DEC),
    frag_len = ProtoField.uint32("softvia.frag_len", "Fragment length", base.DEC),
    imm = ProtoField.uint32("softvia.imm", "Immediate data", base.HEX),
    ack_count = ProtoField.uint32("softvia.ack.count", "Messages acknowledged", base.DEC),
    nak_status = ProtoField.uint32("softvia.nak.status", "Status (VIP_STATUS_*)", base.HEX),
    nak_format = ProtoField.bool("softvia.nak.status.format", "FORMAT_ERROR", 32, nil, 0x2),
    nak_prot = ProtoField.bool("softvia.nak.status.protection", "PROTECTION_ERROR", 32, nil, 0x4),
    nak_length = ProtoField.bool("softvia.nak.status.length", "LENGTH_ERROR", 32, nil, 0x8),
    nak_partial = ProtoField.bool("softvia.nak.status.partial", "PARTIAL_ERROR", 32, nil, 0x10),
    nak_flushed = ProtoField.bool("softvia.nak.status.flushed", "DESC_FLUSHED_ERROR", 32, nil, 0x20),
    nak_transport = ProtoField.bool("softvia.nak.status.transport", "TRANSPORT_ERROR", 32, nil, 0x40),
    nak_rdma_prot = ProtoField.bool("softvia.nak.status.rdma_prot", "RDMA_PROT_ERROR", 32, nil, 0x80),
    nak_remote_desc = ProtoField.bool("softvia.nak.status.remote_desc", "REMOTE_DESC_ERROR", 32, nil, 0x100),
    seq = ProtoField.uint32("softvia.seq", "Sequence number", base.DEC),
    ack = ProtoField.uint32("softvia.ack", "ACK: next sequence number expected", base.DEC),
    req_id = ProtoField.uint32("softvia.req_id", "Request id", base.DEC),
    -- derived
    class = ProtoField.string("softvia.class", "Steering class"),
    frag_end = ProtoField.uint32("softvia.frag_end", "End of fragment in the message", base.DEC),
    retrans = ProtoField.bool("softvia.analysis.retransmission", "Retransmission or duplicate"),
    -- nicfw_rdma_ext
    rdma_addr = ProtoField.uint64("softvia.rdma.addr", "Remote address (offset 0 of the message)", base.HEX),
    rdma_memh = ProtoField.uint32("softvia.rdma.memh", "Remote memory handle", base.HEX),
    rdma_memh_index = ProtoField.uint32("softvia.rdma.memh.index", "Region index", base.DEC, nil, 0x0000FFFF),
    rdma_memh_gen = ProtoField.uint32("softvia.rdma.memh.gen", "Generation", base.DEC, nil, 0xFFFF0000),
    rdma_reserved = ProtoField.uint32("softvia.rdma.reserved", "Reserved", base.HEX),
    rdma_frag_addr = ProtoField.uint64("softvia.rdma.frag_addr", "Remote address of this fragment", base.HEX),
    -- NIC atomics: nicfw_atomic_args (ATOMIC_REQ), the old value (ATOMIC_RESP)
    atomic_op = ProtoField.uint32("softvia.atomic.op", "Atomic operation", base.DEC, atomic_op_names),
    atomic_add = ProtoField.uint64("softvia.atomic.add", "Addend (operand 0)", base.DEC),
    atomic_compare = ProtoField.uint64("softvia.atomic.compare", "Compare (operand 0)", base.DEC),
    atomic_swap = ProtoField.uint64("softvia.atomic.swap", "Swap (operand 1)", base.DEC),
    atomic_operand = ProtoField.uint64("softvia.atomic.operand", "Operand (unused by this operation)", base.HEX),
    atomic_old = ProtoField.uint64("softvia.atomic.old", "Old value", base.DEC),
    -- data
    payload = ProtoField.bytes("softvia.payload", "Payload"),
    -- nicfw_conn_payload
    conn_reliability = ProtoField.uint16("softvia.conn.reliability", "Reliability level", base.HEX, reliability_names),
    conn_rdma_write = ProtoField.uint8("softvia.conn.rdma_write", "RDMA write enabled", base.DEC),
    conn_rdma_read = ProtoField.uint8("softvia.conn.rdma_read", "RDMA read enabled", base.DEC),
    conn_max_transfer = ProtoField.uint32("softvia.conn.max_transfer", "Maximum transfer size", base.DEC),
    conn_src_disc_len = ProtoField.uint16("softvia.conn.src_disc_len", "Source discriminator length", base.DEC),
    conn_dst_disc_len = ProtoField.uint16("softvia.conn.dst_disc_len", "Destination discriminator length", base.DEC),
    conn_src_addr_len = ProtoField.uint16("softvia.conn.src_addr_len", "Source address length", base.DEC),
    conn_reserved = ProtoField.uint16("softvia.conn.reserved", "Reserved", base.HEX),
    conn_src_addr = ProtoField.bytes("softvia.conn.src_addr", "Source NIC address"),
    conn_src_addr_pad = ProtoField.bytes("softvia.conn.src_addr_pad", "Source address padding"),
    conn_src_disc = ProtoField.bytes("softvia.conn.src_disc", "Source discriminator"),
    conn_dst_disc = ProtoField.bytes("softvia.conn.dst_disc", "Destination discriminator"),
    -- NIC addresses (inside CONN_REQ)
    addr_kind = ProtoField.uint8("softvia.addr.kind", "Address kind", base.HEX, addr_kind_names),
    addr_version = ProtoField.uint8("softvia.addr.version", "Address version", base.DEC),
    addr_port = ProtoField.uint16("softvia.addr.port", "UDP port", base.DEC),
    addr_ipv4 = ProtoField.ipv4("softvia.addr.ipv4", "IPv4 address"),
    addr_mac = ProtoField.ether("softvia.addr.mac", "MAC address"),
    addr_host = ProtoField.uint64("softvia.addr.host_id", "Host identity", base.HEX),
    addr_nonce = ProtoField.uint32("softvia.addr.nonce", "Nonce", base.HEX),
    addr_pid = ProtoField.uint32("softvia.addr.pid", "Process id", base.DEC),
    addr_memfd = ProtoField.uint32("softvia.addr.memfd", "Segment memfd", base.DEC),
    addr_wire_len = ProtoField.uint8("softvia.addr.wire_len", "Wire address length", base.DEC),
    addr_shm_len = ProtoField.uint8("softvia.addr.shm_len", "shm address length", base.DEC),
    -- fault injector trailer
    fcs = ProtoField.uint32("softvia.fcs", "Fault-injector CRC-32C", base.HEX),
    fcs_good = ProtoField.bool("softvia.fcs.good", "CRC-32C good"),
    trailing = ProtoField.bytes("softvia.trailing", "Bytes after the frame"),
}
local field_list = {}
for _, v in pairs(f) do field_list[#field_list + 1] = v end
softvia.fields = field_list

local ef = {
    short = ProtoExpert.new("softvia.malformed.short", "Frame shorter than its 32-byte header",
                            expert.group.MALFORMED, expert.severity.ERROR),
    version = ProtoExpert.new("softvia.bad_version", "Frame of another ABI version: receivers drop it",
                              expert.group.PROTOCOL, expert.severity.WARN),
    type = ProtoExpert.new("softvia.bad_type", "Unknown frame type: receivers drop it",
                           expert.group.MALFORMED, expert.severity.ERROR),
    bounds = ProtoExpert.new("softvia.malformed.bounds", "Field out of range: receivers drop the frame",
                             expert.group.MALFORMED, expert.severity.ERROR),
    truncated = ProtoExpert.new("softvia.malformed.truncated", "Frame shorter than its fields say",
                                expert.group.MALFORMED, expert.severity.ERROR),
    trailing = ProtoExpert.new("softvia.trailing_bytes", "Bytes after the frame that no field explains",
                               expert.group.MALFORMED, expert.severity.WARN),
    reserved = ProtoExpert.new("softvia.reserved_nonzero", "Reserved field not zero",
                               expert.group.PROTOCOL, expert.severity.WARN),
    bad_crc = ProtoExpert.new("softvia.fcs.bad", "Bad CRC-32C: the receiving fault injector drops this frame",
                              expert.group.CHECKSUM, expert.severity.WARN),
    preamble = ProtoExpert.new("softvia.udp.malformed", "Not a softvia udp preamble: receivers drop the datagram",
                               expert.group.MALFORMED, expert.severity.ERROR),
    shim = ProtoExpert.new("softvia.eth.malformed", "Bad dpdk shim: receivers drop the frame",
                           expert.group.MALFORMED, expert.severity.ERROR),
    gap = ProtoExpert.new("softvia.gap", "GAP: the receiver asks for a resend from seq",
                          expert.group.SEQUENCE, expert.severity.NOTE),
    nak = ProtoExpert.new("softvia.nak", "Request refused by the target",
                          expert.group.RESPONSE_CODE, expert.severity.NOTE),
    retrans = ProtoExpert.new("softvia.retransmission", "Retransmission (or duplicate) of a request frame seen before",
                              expert.group.SEQUENCE, expert.severity.NOTE),
    atomic = ProtoExpert.new("softvia.atomic.refused", "Atomic the target refuses (NAK): unknown operation or unaligned word",
                             expert.group.PROTOCOL, expert.severity.WARN),
}
softvia.experts = { ef.short, ef.version, ef.type, ef.bounds, ef.truncated, ef.trailing, ef.reserved,
                    ef.bad_crc, ef.preamble, ef.shim, ef.gap, ef.nak, ef.retrans, ef.atomic }

softvia.prefs.udp_ports = Pref.range("UDP ports", "",
    "UDP ports whose datagrams are softvia frames (the udp wire's port=N). By default the wire " ..
    "binds an ephemeral port, and the heuristic finds its datagrams by their preamble.", 65535)
softvia.prefs.heuristic = Pref.bool("Find udp datagrams by their preamble", true,
    "Try every UDP datagram: a datagram starting with the 'SVU1' preamble is softvia's")
local TRAILER_AUTO, TRAILER_ALWAYS, TRAILER_NEVER = 0, 1, 2
softvia.prefs.fault_trailer = Pref.enum("Fault-injector CRC-32C trailer", TRAILER_AUTO,
    "Frames sent with SOFTVIA_FAULTS end with a 4-byte CRC-32C. auto: 4 bytes more than the " ..
    "frame's fields account for are the trailer", {
        { 1, "auto", TRAILER_AUTO },
        { 2, "always", TRAILER_ALWAYS },
        { 3, "never", TRAILER_NEVER },
    }, false)

-- ---------------------------------------------------------------- analysis state
-- First pass: whether a request frame (its sequence number and fragment offset, per
-- connection) was seen before. A connection is (sender NIC, sender VI, receiver NIC,
-- receiver VI); its state restarts at each CONN_ACCEPT / PEER_ACK, since every
-- connection counts from 0.
local seen, retrans_of
local function reset_state()
    seen, retrans_of = {}, {}
end
reset_state()
softvia.init = reset_state

local function hex32(v) return string.format("0x%08x", v) end

local function vi_text(v)
    if v == VI_NONE then return "none" end
    return string.format("%d/%d", band(v, 0xFFFF), rshift(v, 16))
end

local function add_vi(tree, tvb, off, fld, fidx, fgen)
    local v = tvb(off, 4):le_uint()
    local it = tree:add_le(fld, tvb(off, 4))
    if v == VI_NONE then
        it:append_text(" (none yet)")
    else
        it:append_text(string.format(" (index %d, generation %d)", band(v, 0xFFFF), rshift(v, 16)))
        it:add_le(fidx, tvb(off, 4))
        it:add_le(fgen, tvb(off, 4))
    end
    return v
end

local function printable(tvb)
    local s = tvb:raw()
    if s:match("^[%w%p ]*$") then return s end
    return nil
end

-- A NIC address (CONN_REQ's src_addr).
local function add_address(tree, tvb)
    local n = tvb:len()
    if n < 2 then return end
    local kind = tvb(0, 1):uint()
    tree:add(f.addr_kind, tvb(0, 1))
    if kind == 0x20 and n >= 12 then
        local wlen, slen = tvb(1, 1):uint(), tvb(2, 1):uint()
        tree:add(f.addr_wire_len, tvb(1, 1))
        tree:add(f.addr_shm_len, tvb(2, 1))
        tree:add_le(f.addr_host, tvb(4, 8))
        if wlen > 0 and 12 + wlen <= n then
            add_address(tree:add(tvb(12, wlen), "Wire address"), tvb(12, wlen):tvb())
        end
        if slen > 0 and 12 + wlen + slen <= n then
            add_address(tree:add(tvb(12 + wlen, slen), "shm address"), tvb(12 + wlen, slen):tvb())
        end
        return
    end
    tree:add(f.addr_version, tvb(1, 1))
    if (kind == 2 or kind == 4) and n >= 20 then  -- udp, verbs: port and IPv4 in network order
        tree:add(f.addr_port, tvb(2, 2))
        tree:add(f.addr_ipv4, tvb(4, 4))
        tree:add_le(f.addr_host, tvb(8, 8))
        tree:add_le(f.addr_nonce, tvb(16, 4))
        tree:append_text(string.format(" (%s %s:%d)", addr_kind_names[kind], tostring(tvb(4, 4):ipv4()), tvb(2, 2):uint()))
    elseif kind == 3 and n >= 20 then  -- dpdk
        tree:add(f.addr_mac, tvb(2, 6))
        tree:add_le(f.addr_host, tvb(8, 8))
        tree:add_le(f.addr_nonce, tvb(16, 4))
        tree:append_text(" (dpdk " .. tostring(tvb(2, 6):ether()) .. ")")
    elseif kind == 1 and n >= 24 then  -- shm
        tree:add_le(f.addr_pid, tvb(4, 4))
        tree:add_le(f.addr_memfd, tvb(8, 4))
        tree:add_le(f.addr_nonce, tvb(12, 4))
        tree:add_le(f.addr_host, tvb(16, 8))
        tree:append_text(string.format(" (shm, pid %d)", tvb(4, 4):le_uint()))
    end
end

-- Bytes of the frame after the header that its fields account for, or nil when the
-- type has no fixed layout (unknown type).
local function body_len(typ, flags, msg_len, frag_len)
    local acked = band(flags, FF_ACKED) ~= 0 and 4 or 0
    if typ == T.DATA then return frag_len + acked end
    if typ == T.RDMA_WRITE then return RDMA_EXT_LEN + frag_len + acked end
    if typ == T.READ_REQ then return RDMA_EXT_LEN end
    if typ == T.READ_RESP then return frag_len end
    if typ == T.ATOMIC_REQ then return RDMA_EXT_LEN + ATOMIC_ARGS_LEN end
    if typ == T.ATOMIC_RESP then return ATOMIC_OLD_LEN end
    if typ == T.ATOMIC_GRANT then return ATOMIC_GRANT_LEN end
    if typ == T.ACK or typ == T.NAK then return 0 end
    if typ >= T.CONN_REQ and typ <= T.DISCONNECT then return msg_len end  -- control: msg_len is the payload
    return nil
end

local function flags_text(flags)
    local t = {}
    if band(flags, FF_IMMEDIATE) ~= 0 then t[#t + 1] = "IMM" end
    if band(flags, FF_LAST) ~= 0 then t[#t + 1] = "LAST" end
    if band(flags, FF_REPLY) ~= 0 then t[#t + 1] = "REPLY" end
    if band(flags, FF_GAP) ~= 0 then t[#t + 1] = "GAP" end
    if band(flags, FF_ACKED) ~= 0 then t[#t + 1] = "ACKED" end
    if #t == 0 then return "" end
    return " [" .. table.concat(t, ",") .. "]"
end

-- Dissects one NIC frame: tvb holds it (and possibly the fault trailer after it).
-- nic_src and nic_dst name the sender's and the receiver's NIC (the nonces in the wire's
-- header), for the retransmission analysis. Returns the bytes consumed.
local function dissect_frame(tvb, pinfo, tree, nic_src, nic_dst)
    local avail = tvb:len()
    local ft = tree:add(softvia, tvb(), "softvia NIC frame")
    if avail < HDR_LEN then
        ft:add_proto_expert_info(ef.short, string.format("Frame of %d bytes, shorter than the %d-byte header", avail, HDR_LEN))
        pinfo.cols.info:append(string.format(" malformed (%d bytes)", avail))
        return avail
    end
    local typ = tvb(0, 1):uint()
    local version = tvb(1, 1):uint()
    local flags = tvb(2, 1):uint()
    local dst_vi = tvb(4, 4):le_uint()
    local src_vi = tvb(8, 4):le_uint()
    local msg_len = tvb(12, 4):le_uint()
    local offset = tvb(16, 4):le_uint()
    local frag_len = tvb(20, 4):le_uint()
    local imm = tvb(24, 4):le_uint()
    local seq = tvb(28, 4):le_uint()
    local tname = type_names[typ] or string.format("type %d", typ)
    -- A frame quoted by an ICMP error (a closed port): maybe cut short, never a retransmission.
    local quoted = pinfo.in_error_pkt

    -- How long the frame is by its fields, and whether a fault trailer follows.
    local blen = body_len(typ, flags, msg_len, frag_len)
    local frame_len, has_trailer = avail, false
    local pref = softvia.prefs.fault_trailer
    if pref == TRAILER_ALWAYS and avail >= HDR_LEN + 4 then
        frame_len, has_trailer = avail - 4, true
    elseif pref == TRAILER_AUTO and blen and avail == HDR_LEN + blen + 4 then
        frame_len, has_trailer = avail - 4, true
    end
    ft:set_len(frame_len)

    -- nicfw_frame_hdr
    local ht = ft:add(tvb(0, HDR_LEN), "Header")
    ht:add(f.type, tvb(0, 1))
    local vit = ht:add(f.version, tvb(1, 1))
    local flt = ht:add(f.flags, tvb(2, 1))
    flt:append_text(flags_text(flags))
    flt:add(f.flag_imm, tvb(2, 1))
    flt:add(f.flag_last, tvb(2, 1))
    flt:add(f.flag_reply, tvb(2, 1))
    flt:add(f.flag_gap, tvb(2, 1))
    flt:add(f.flag_acked, tvb(2, 1))
    if band(flags, 0xE0) ~= 0 then
        flt:add(f.flag_unknown, tvb(2, 1))
        flt:add_proto_expert_info(ef.reserved, "Unknown flag bits set")
    end
    local rit = ht:add(f.reserved, tvb(3, 1))
    if tvb(3, 1):uint() ~= 0 then rit:add_proto_expert_info(ef.reserved) end
    add_vi(ht, tvb, 4, f.dst_vi, f.dst_vi_index, f.dst_vi_gen)
    add_vi(ht, tvb, 8, f.src_vi, f.src_vi_index, f.src_vi_gen)
    local is_frag = typ == T.DATA or typ == T.RDMA_WRITE or typ == T.READ_RESP
    local is_atomic = typ == T.ATOMIC_REQ or typ == T.ATOMIC_RESP
    -- Requests and their answers: msg_len is the data's length, seq the request's number.
    local is_req = is_frag or typ == T.READ_REQ or is_atomic
    if is_req then
        ht:add_le(f.msg_len, tvb(12, 4))
    else
        ht:add_le(f.payload_len, tvb(12, 4))
    end
    ht:add_le(f.offset, tvb(16, 4))
    ht:add_le(f.frag_len, tvb(20, 4))
    if typ == T.ACK then
        ht:add_le(f.ack_count, tvb(24, 4))
    elseif typ == T.NAK then
        local st = ht:add_le(f.nak_status, tvb(24, 4))
        for _, b in ipairs({ f.nak_format, f.nak_prot, f.nak_length, f.nak_partial, f.nak_flushed,
                             f.nak_transport, f.nak_rdma_prot, f.nak_remote_desc }) do
            st:add_le(b, tvb(24, 4))
        end
    elseif typ == T.ATOMIC_REQ then
        ht:add_le(f.atomic_op, tvb(24, 4))
    else
        ht:add_le(f.imm, tvb(24, 4))
    end
    local seq_item
    if typ == T.ACK then
        seq_item = ht:add_le(f.ack, tvb(28, 4))
    elseif is_req or typ == T.NAK then
        seq_item = ht:add_le(f.seq, tvb(28, 4))
    else
        seq_item = ht:add_le(f.req_id, tvb(28, 4))
    end

    -- Summary line.
    local info = string.format("%s %s > %s", tname, vi_text(src_vi), vi_text(dst_vi))
    if is_req then info = info .. string.format(" seq=%d", seq) end
    if is_frag then info = info .. string.format(" off=%d len=%d/%d", offset, frag_len, msg_len) end
    if typ == T.READ_REQ then info = info .. string.format(" len=%d", msg_len) end
    if typ == T.ACK then info = info .. string.format(" ack=%d n=%d", seq, imm) end
    if typ == T.NAK then info = info .. string.format(" seq=%d status=%s", seq, hex32(imm)) end
    if typ == T.ATOMIC_REQ then
        info = info .. " op=" .. (atomic_op_names[imm] or tostring(imm))
        if avail >= HDR_LEN + RDMA_EXT_LEN + ATOMIC_ARGS_LEN then  -- (an ICMP quote may cut it)
            local a = HDR_LEN + RDMA_EXT_LEN
            info = info .. " addr=0x" .. tvb(HDR_LEN, 8):le_uint64():tohex()
            if imm == OP_FETCH_ADD then
                info = info .. " add=" .. tostring(tvb(a, 8):le_uint64())
            elseif imm == OP_CMP_SWAP then
                info = info .. " compare=" .. tostring(tvb(a, 8):le_uint64()) .. " swap=" .. tostring(tvb(a + 8, 8):le_uint64())
            end
        end
    end
    if typ == T.ATOMIC_RESP and avail >= HDR_LEN + ATOMIC_OLD_LEN then
        info = info .. " old=" .. tostring(tvb(HDR_LEN, 8):le_uint64())
    end
    if (typ >= T.CONN_REQ and typ <= T.DISCONNECT) then info = info .. string.format(" req=%d", seq) end
    if (typ == T.DATA or typ == T.RDMA_WRITE) and band(flags, FF_IMMEDIATE) ~= 0 then
        info = info .. " imm=" .. hex32(imm)
    end
    info = info .. flags_text(flags)
    ft:append_text(": " .. info)

    if version ~= NICFW_ABI_VERSION then
        vit:add_proto_expert_info(ef.version, string.format("ABI version %d, not %d: receivers drop the frame", version, NICFW_ABI_VERSION))
    end
    if typ == 0 or typ > TYPE_MAX then
        ft:add_proto_expert_info(ef.type, string.format("Unknown frame type %d: receivers drop it", typ))
        pinfo.cols.info:append(" " .. info)
        if avail > HDR_LEN then ft:add(f.trailing, tvb(HDR_LEN)) end
        return avail
    end

    -- Derived fields.
    if typ == T.DATA or typ == T.RDMA_WRITE then
        ft:add(f.class, band(flags, FF_REPLY) ~= 0 and "reply" or "request"):set_generated()
    end
    if is_frag then ft:add(f.frag_end, offset + frag_len):set_generated() end
    if typ == T.ACK and band(flags, FF_GAP) ~= 0 then
        seq_item:add_proto_expert_info(ef.gap, string.format("GAP: resend from seq %d", seq))
    end
    if typ == T.NAK then
        seq_item:add_proto_expert_info(ef.nak, string.format("Request %d refused, status %s", seq, hex32(imm)))
    end

    -- Retransmissions (first pass only; later passes reuse the answer).
    if quoted then
        -- no analysis
    elseif typ == T.DATA or typ == T.RDMA_WRITE or typ == T.READ_REQ or typ == T.ATOMIC_REQ then
        -- Per frame, not per packet: a captured train holds several.
        local here = pinfo.number .. "@" .. tvb:offset()
        if not pinfo.visited then
            local key = table.concat({ tostring(nic_src), src_vi, tostring(nic_dst), dst_vi }, "/")
            local s = seen[key]
            if not s then s = {}; seen[key] = s end
            local k = seq .. ":" .. offset .. ":" .. typ
            if s[k] then retrans_of[here] = true end
            s[k] = true
        end
        if retrans_of[here] then
            ft:add(f.retrans, true):set_generated()
            ft:add_proto_expert_info(ef.retrans)
            info = info .. " (retransmission)"
        end
    elseif (typ == T.CONN_ACCEPT or typ == T.PEER_ACK) and not pinfo.visited then
        seen[table.concat({ tostring(nic_src), src_vi, tostring(nic_dst), dst_vi }, "/")] = nil
        seen[table.concat({ tostring(nic_dst), dst_vi, tostring(nic_src), src_vi }, "/")] = nil
    end
    pinfo.cols.info:append(" " .. info)

    local pos = HDR_LEN
    local function need(n, what)
        if frame_len - pos < n then
            if quoted then  -- an ICMP error quotes only the start of a datagram
                ft:append_text(" [cut short in the ICMP quote]")
                return false
            end
            ft:add_proto_expert_info(ef.truncated, string.format("%s needs %d bytes, %d left", what, n, frame_len - pos))
            if frame_len > pos then ft:add(f.trailing, tvb(pos, frame_len - pos)) end
            return false
        end
        return true
    end

    -- Receiver checks (responder.cc on_data / on_read_req / on_read_resp, connection.cc
    -- on_control), in the same order, as expert info.
    if typ == T.DATA or typ == T.RDMA_WRITE then
        local ext = typ == T.RDMA_WRITE and RDMA_EXT_LEN or 0
        if msg_len > MAX_TRANSFER or offset > msg_len or frag_len > msg_len - offset then
            ft:add_proto_expert_info(ef.bounds, string.format(
                "Fragment [%d, %d) outside the message of %d bytes (at most %d)", offset, offset + frag_len, msg_len, MAX_TRANSFER))
        end
        if not quoted and (frame_len < HDR_LEN + ext or frag_len > frame_len - HDR_LEN - ext) then
            ft:add_proto_expert_info(ef.bounds, string.format(
                "frag_len %d exceeds the %d bytes the frame holds", frag_len, math.max(frame_len - HDR_LEN - ext, 0)))
        end
    elseif typ == T.READ_REQ then
        if msg_len > MAX_TRANSFER then
            ft:add_proto_expert_info(ef.bounds, string.format("Read of %d bytes, more than %d", msg_len, MAX_TRANSFER))
        end
    elseif typ == T.READ_RESP then
        if (not quoted and frag_len > frame_len - HDR_LEN) or offset > msg_len or frag_len > msg_len - offset then
            ft:add_proto_expert_info(ef.bounds, string.format(
                "Fragment [%d, %d) outside the frame or the read of %d bytes", offset, offset + frag_len, msg_len))
        end
    elseif typ == T.ATOMIC_RESP then
        if msg_len ~= ATOMIC_OLD_LEN then
            ft:add_proto_expert_info(ef.bounds, string.format("Answer of %d bytes, not %d: the initiator drops it", msg_len, ATOMIC_OLD_LEN))
        end
    end

    -- nicfw_rdma_ext
    if typ == T.RDMA_WRITE or typ == T.READ_REQ or typ == T.ATOMIC_REQ then
        if not need(RDMA_EXT_LEN, "RDMA extension header") then return avail end
        local xt = ft:add(tvb(pos, RDMA_EXT_LEN), "RDMA extension")
        xt:add_le(f.rdma_addr, tvb(pos, 8))
        local mh = tvb(pos + 8, 4):le_uint()
        local mit = xt:add_le(f.rdma_memh, tvb(pos + 8, 4))
        mit:append_text(string.format(" (region %d, generation %d)", band(mh, 0xFFFF), rshift(mh, 16)))
        mit:add_le(f.rdma_memh_index, tvb(pos + 8, 4))
        mit:add_le(f.rdma_memh_gen, tvb(pos + 8, 4))
        local rr = xt:add_le(f.rdma_reserved, tvb(pos + 12, 4))
        if tvb(pos + 12, 4):le_uint() ~= 0 then rr:add_proto_expert_info(ef.reserved) end
        if typ == T.RDMA_WRITE then
            xt:add(f.rdma_frag_addr, tvb(pos, 8):le_uint64() + offset):set_generated()
        end
        xt:append_text(string.format(": addr 0x%s, memh %s", tvb(pos, 8):le_uint64():tohex(), hex32(mh)))
        if typ == T.ATOMIC_REQ and tvb(pos, 4):le_uint() % 8 ~= 0 then
            xt:add_proto_expert_info(ef.atomic, "Remote word not 8-byte aligned: the target refuses it")
        end
        pos = pos + RDMA_EXT_LEN
    end

    -- nicfw_atomic_args: what operand[0] and operand[1] mean depends on the operation.
    if typ == T.ATOMIC_REQ then
        if not need(ATOMIC_ARGS_LEN, "Atomic operands") then return avail end
        local at = ft:add(tvb(pos, ATOMIC_ARGS_LEN), "Atomic operands")
        local o0, o1 = tvb(pos, 8), tvb(pos + 8, 8)
        if imm == OP_FETCH_ADD then
            at:add_le(f.atomic_add, o0)
            at:add_le(f.atomic_operand, o1)
            at:append_text(": fetch-add " .. tostring(o0:le_uint64()))
        elseif imm == OP_CMP_SWAP then
            at:add_le(f.atomic_compare, o0)
            at:add_le(f.atomic_swap, o1)
            at:append_text(string.format(": cmp-swap %s -> %s", tostring(o0:le_uint64()), tostring(o1:le_uint64())))
        else
            at:add_le(f.atomic_operand, o0)
            at:add_le(f.atomic_operand, o1)
            at:add_proto_expert_info(ef.atomic, string.format("Atomic operation %d: the target refuses it", imm))
        end
        pos = pos + ATOMIC_ARGS_LEN
    elseif typ == T.ATOMIC_RESP then
        if not need(ATOMIC_OLD_LEN, "Old value") then return avail end
        ft:add_le(f.atomic_old, tvb(pos, 8))
        pos = pos + ATOMIC_OLD_LEN
    end

    -- Payload and piggybacked ACK.
    if is_frag then
        if frag_len > 0 then
            local n = math.min(frag_len, frame_len - pos)
            if n > 0 then ft:add(f.payload, tvb(pos, n)) end
            if n < frag_len then
                if quoted then
                    ft:append_text(" [cut short in the ICMP quote]")
                    return avail
                end
                ft:add_proto_expert_info(ef.truncated, string.format("Payload of %d bytes, %d in the frame", frag_len, math.max(n, 0)))
                return avail
            end
            pos = pos + frag_len
        end
        if band(flags, FF_ACKED) ~= 0 and typ ~= T.READ_RESP then
            if not need(4, "Piggybacked ACK") then return avail end
            local a = ft:add_le(f.ack, tvb(pos, 4))
            a:prepend_text("Piggybacked ")
            pinfo.cols.info:append(string.format(" ack=%d", tvb(pos, 4):le_uint()))
            pos = pos + 4
        end
    end

    -- nicfw_conn_payload
    if typ == T.CONN_REQ or typ == T.CONN_ACCEPT or typ == T.PEER_REQ or typ == T.PEER_ACK then
        if msg_len < CONN_FIXED then
            ft:add_proto_expert_info(ef.bounds, string.format("Connection payload of %d bytes, less than %d", msg_len, CONN_FIXED))
        end
        if not need(math.min(msg_len, CONN_FIXED), "Connection payload") then return avail end
        if msg_len >= CONN_FIXED then
            local ct = ft:add(tvb(pos, msg_len <= frame_len - pos and msg_len or frame_len - pos), "Connection payload")
            local rel = tvb(pos, 2):le_uint()
            ct:add_le(f.conn_reliability, tvb(pos, 2))
            ct:add(f.conn_rdma_write, tvb(pos + 2, 1))
            ct:add(f.conn_rdma_read, tvb(pos + 3, 1))
            ct:add_le(f.conn_max_transfer, tvb(pos + 4, 4))
            local sdl, ddl, sal = tvb(pos + 8, 2):le_uint(), tvb(pos + 10, 2):le_uint(), tvb(pos + 12, 2):le_uint()
            ct:add_le(f.conn_src_disc_len, tvb(pos + 8, 2))
            ct:add_le(f.conn_dst_disc_len, tvb(pos + 10, 2))
            ct:add_le(f.conn_src_addr_len, tvb(pos + 12, 2))
            ct:add_le(f.conn_reserved, tvb(pos + 14, 2))
            if sdl > MAX_DISC or ddl > MAX_DISC or sal > MAX_ADDR or CONN_FIXED + sdl + ddl > msg_len then
                ct:add_proto_expert_info(ef.bounds, string.format(
                    "Discriminators %d + %d bytes or address %d bytes beyond the payload of %d (or the limits %d, %d)",
                    sdl, ddl, sal, msg_len, MAX_DISC, MAX_ADDR))
            end
            local a = pos + 16
            if sal > 0 and sal <= MAX_ADDR then
                local at = ct:add(f.conn_src_addr, tvb(a, sal))
                add_address(at, tvb(a, sal):tvb())
            end
            if sal < MAX_ADDR then ct:add(f.conn_src_addr_pad, tvb(a + math.min(sal, MAX_ADDR), MAX_ADDR - math.min(sal, MAX_ADDR))) end
            local d = pos + CONN_FIXED
            if CONN_FIXED + sdl + ddl <= msg_len and d + sdl + ddl <= frame_len then
                if sdl > 0 then
                    local it = ct:add(f.conn_src_disc, tvb(d, sdl))
                    local s = printable(tvb(d, sdl))
                    if s then it:append_text(' ("' .. s .. '")') end
                end
                if ddl > 0 then
                    local it = ct:add(f.conn_dst_disc, tvb(d + sdl, ddl))
                    local s = printable(tvb(d + sdl, ddl))
                    if s then it:append_text(' ("' .. s .. '")') end
                end
                if msg_len > CONN_FIXED + sdl + ddl then
                    ct:add(f.trailing, tvb(d + sdl + ddl, msg_len - CONN_FIXED - sdl - ddl))
                end
            end
            ct:append_text(string.format(": %s, max transfer %d", reliability_names[rel] or hex32(rel),
                                         tvb(pos + 4, 4):le_uint()))
            if msg_len > frame_len - pos then
                ct:add_proto_expert_info(ef.truncated, string.format("Payload of %d bytes, %d in the frame", msg_len, frame_len - pos))
                return avail
            end
        end
        pos = pos + msg_len
    elseif typ ~= T.ACK and typ ~= T.NAK and typ >= T.CONN_REQ and typ <= T.DISCONNECT and msg_len > 0 then
        -- REJECT, NOMATCH, DISCONNECT carry no payload; show what there is.
        if not need(msg_len, "Payload") then return avail end
        ft:add(f.trailing, tvb(pos, msg_len))
        pos = pos + msg_len
    end

    if pos < frame_len then
        local t = ft:add(f.trailing, tvb(pos, frame_len - pos))
        t:add_proto_expert_info(ef.trailing, string.format("%d bytes after the frame", frame_len - pos))
    end
    if has_trailer then
        local crc = tvb(frame_len, 4):le_uint()
        local good = crc32c(tvb(0, frame_len):bytes()) == crc
        local ct = tree:add_le(f.fcs, tvb(frame_len, 4))
        ct:append_text(good and " [good]" or " [bad]")
        ct:add(f.fcs_good, good):set_generated()
        if not good then
            ct:add_proto_expert_info(ef.bad_crc)
            pinfo.cols.info:append(" [bad CRC]")
        end
        return frame_len + 4
    end
    return frame_len
end

-- ---------------------------------------------------------------- udp wire
-- Whether bytes 5..7 are what the wire writes for datagram type t: a flag and a port on
-- a frame from a send socket, a port in PORT*, else zero.
local function udp_bytes_5_7_valid(tvb, t)
    local flags, port = tvb(5, 1):uint(), tvb(6, 2):uint()
    if t == 1 then return (flags == 0 and port == 0) or flags == UDP_FLAG_PEER_SOCKET end
    if t == 2 then return flags == 0 and port == 0 end
    return flags == 0
end

local function looks_like_udp(tvb)
    if tvb:len() < UDP_PREAMBLE or tvb(0, 4):string() ~= UDP_MAGIC then return false end
    local t = tvb(4, 1):uint()
    return t >= 1 and t <= 5 and udp_bytes_5_7_valid(tvb, t)
end

-- One datagram: the preamble, then a frame (or nothing, a liveness probe).
local function dissect_datagram(tvb, pinfo, tree, train, index)
    local n = tvb:len()
    local pt = tree:add(softvia, tvb(0, math.min(n, UDP_PREAMBLE)), "softvia udp preamble")
    if train > 1 then
        pt:add(f.udp_train, train):set_generated()
        pt:add(f.udp_train_index, index):set_generated()
        pt:append_text(string.format(" (datagram %d of a train of %d)", index, train))
    end
    pt:add(f.wire, "udp"):set_generated()
    if n < UDP_PREAMBLE or tvb(0, 4):string() ~= UDP_MAGIC then
        pt:add_proto_expert_info(ef.preamble, string.format("%d bytes without the %d-byte 'SVU1' preamble", n, UDP_PREAMBLE))
        pinfo.cols.info:append(" malformed")
        return n
    end
    local dtype = tvb(4, 1):uint()
    pt:add(f.udp_magic, tvb(0, 4))
    local tit = pt:add(f.udp_type, tvb(4, 1))
    local ft = pt:add(f.udp_flags, tvb(5, 1))
    ft:add(f.udp_flag_peer_socket, tvb(5, 1))
    pt:add(f.udp_port, tvb(6, 2))
    if dtype >= 1 and dtype <= 5 and not udp_bytes_5_7_valid(tvb, dtype) then
        ft:add_proto_expert_info(ef.preamble, string.format("Preamble bytes 5..7 not what datagram type %d carries", dtype))
    end
    pt:add_le(f.udp_host, tvb(8, 8))
    pt:add_le(f.udp_src_nonce, tvb(16, 4))
    pt:add_le(f.udp_dst_nonce, tvb(20, 4))
    local src_nonce, dst_nonce = tvb(16, 4):le_uint(), tvb(20, 4):le_uint()
    pt:append_text(string.format(", nonce %08x > %08x", src_nonce, dst_nonce))
    if dtype == 2 then
        pinfo.cols.info:append(" probe")
        if n > UDP_PREAMBLE then
            local t = pt:add(f.trailing, tvb(UDP_PREAMBLE))
            t:add_proto_expert_info(ef.trailing)
        end
        return n
    elseif dtype >= 3 and dtype <= 5 then
        pinfo.cols.info:append(string.format(" %s %d", ({ "PORT", "PORT_ACK", "PORT_NAK" })[dtype - 2], tvb(6, 2):uint()))
        if n > UDP_PREAMBLE then
            local t = pt:add(f.trailing, tvb(UDP_PREAMBLE))
            t:add_proto_expert_info(ef.trailing)
        end
        return n
    elseif dtype ~= 1 then
        tit:add_proto_expert_info(ef.preamble, string.format("Datagram type %d", dtype))
        return n
    end
    if n == UDP_PREAMBLE then  -- a frame datagram without a frame: receivers ignore it
        pt:add_proto_expert_info(ef.short, "Frame datagram without a frame")
        return n
    end
    local used = dissect_frame(tvb(UDP_PREAMBLE):tvb(), pinfo, tree, src_nonce, dst_nonce)
    if UDP_PREAMBLE + used < n then
        local t = tree:add(f.trailing, tvb(UDP_PREAMBLE + used))
        t:add_proto_expert_info(ef.trailing)
    end
    return n
end

-- The length of each datagram of a train in tvb, or nil when tvb holds one datagram.
-- The udp wire sends datagrams queued for one peer, all of one length but the last, as
-- one train (UDP_SEGMENT); a capture taken before the interface cuts it (a veth, a NIC
-- doing the segmentation) has the whole train in one packet. The first datagram's header
-- gives its length (and so every one's but the last); each must start with a preamble.
local function train_stride(tvb)
    local n = tvb:len()
    if n < UDP_PREAMBLE + HDR_LEN or tvb(4, 1):uint() ~= 1 then return nil end
    local h = UDP_PREAMBLE
    local blen = body_len(tvb(h, 1):uint(), tvb(h + 2, 1):uint(), tvb(h + 12, 4):le_uint(), tvb(h + 20, 4):le_uint())
    if not blen then return nil end
    local function starts_datagram(at)
        return at + UDP_PREAMBLE <= n and tvb(at, 4):string() == UDP_MAGIC and tvb(at + 4, 1):uint() == 1
    end
    for _, extra in ipairs({0, 4}) do  -- 4: the fault injector's CRC-32C after each frame
        local len = UDP_PREAMBLE + HDR_LEN + blen + extra
        if len < n and starts_datagram(len) then
            for at = 2 * len, n - 1, len do
                if not starts_datagram(at) then return nil end
            end
            return len
        end
    end
    return nil
end

local function dissect_udp(tvb, pinfo, tree)
    pinfo.cols.protocol = "softvia"
    pinfo.cols.info:clear()
    pinfo.cols.info:set("udp")
    local n = tvb:len()
    local stride = train_stride(tvb)
    if not stride then return dissect_datagram(tvb, pinfo, tree, 1, 1) end
    local train = math.ceil(n / stride)
    pinfo.cols.info:append(string.format(" train of %d:", train))
    for i = 1, train do
        local at = (i - 1) * stride
        dissect_datagram(tvb(at, math.min(stride, n - at)):tvb(), pinfo, tree, train, i)
    end
    return n
end

-- ---------------------------------------------------------------- dpdk wire (EtherType 0x88B5)
local function dissect_eth(tvb, pinfo, tree)
    pinfo.cols.protocol = "softvia"
    pinfo.cols.info:clear()
    pinfo.cols.info:set("dpdk")
    local n = tvb:len()
    local st = tree:add(softvia, tvb(0, math.min(n, ETH_SHIM)), "softvia dpdk shim")
    st:add(f.wire, "dpdk"):set_generated()
    if n < ETH_SHIM then
        st:add_proto_expert_info(ef.shim, string.format("%d bytes, shorter than the %d-byte shim", n, ETH_SHIM))
        pinfo.cols.info:append(" malformed")
        return n
    end
    local vit = st:add(f.eth_version, tvb(0, 1))
    local kit = st:add(f.eth_kind, tvb(1, 1))
    st:add_le(f.eth_src_nonce, tvb(2, 4))
    st:add_le(f.eth_dst_nonce, tvb(6, 4))
    st:add_le(f.eth_host, tvb(10, 8))
    local src_nonce, dst_nonce = tvb(2, 4):le_uint(), tvb(6, 4):le_uint()
    st:append_text(string.format(", nonce %08x > %08x", src_nonce, dst_nonce))
    if tvb(0, 1):uint() ~= 1 then
        vit:add_proto_expert_info(ef.shim, "Shim version not 1")
        return n
    end
    local kind = tvb(1, 1):uint()
    if kind ~= 0 then
        if kind > 2 then kit:add_proto_expert_info(ef.shim, string.format("Shim kind %d", kind)) end
        pinfo.cols.info:append(" " .. (kind == 1 and "BYE" or kind == 2 and "BYE-ACK" or "kind " .. kind))
        return ETH_SHIM  -- Ethernet padding after it is the Ethernet dissector's
    end
    if n == ETH_SHIM then
        st:add_proto_expert_info(ef.short, "Frame shim without a frame")
        return n
    end
    return ETH_SHIM + dissect_frame(tvb(ETH_SHIM):tvb(), pinfo, tree, src_nonce, dst_nonce)
end

-- ---------------------------------------------------------------- registration
-- The main dissector is the udp one (Decode As on a UDP port); the Ethernet one is its
-- own Dissector object for the EtherType table.
softvia.dissector = dissect_udp
local softvia_eth = Proto("softvia_eth", "softvia dpdk wire")
softvia_eth.dissector = dissect_eth

DissectorTable.get("ethertype"):add(ETHERTYPE, softvia_eth)

local udp_table = DissectorTable.get("udp.port")
udp_table:add_for_decode_as(softvia)
local registered_ports = ""
local function register_ports()
    if registered_ports ~= "" then udp_table:remove(registered_ports, softvia) end
    registered_ports = softvia.prefs.udp_ports and tostring(softvia.prefs.udp_ports) or ""
    if registered_ports ~= "" then udp_table:add(registered_ports, softvia) end
end
function softvia.prefs_changed()
    register_ports()
end
register_ports()

softvia:register_heuristic("udp", function(tvb, pinfo, tree)
    if not softvia.prefs.heuristic or not looks_like_udp(tvb) then return false end
    -- The rest of this UDP conversation comes straight here, ahead of any dissector that
    -- registered the ephemeral port by chance (the first datagram only reaches us before
    -- one when UDP's "Try heuristic sub-dissectors first" is on).
    if not pinfo.in_error_pkt then pinfo.conversation = softvia end
    dissect_udp(tvb, pinfo, tree)
    return true
end)
