// hot_path.h -- keeping the code of one message on few pages.
#pragma once

// Functions that run for every message, or every poll of an idle NIC, are marked
// NICFW_HOT. GCC puts them in .text.hot, which the linker lays out as one block, so the
// per-message path spans a few code pages instead of thirty across the library. That
// matters where a system call empties the TLB (page-table isolation without PCID, as in
// the VMs this was measured on): after the recvmmsg that brings a datagram, every page
// the path touches costs a page walk before its first instruction runs
// (docs/transports.md, "What is left").
// The GNU form, as it may also follow a linkage specification (extern "C").
#define NICFW_HOT __attribute__((hot))
