// nicfw/hostmem.h -- how the device touches host (application) memory: the NIC's DMA.
//
// Every byte the firmware reads from or writes to memory the application owns
// (descriptors, send and receive buffers, RDMA targets) goes through these calls, which
// never fault: memory the program has unmapped, made read-only or truncated since it
// registered it gives -EFAULT, and the operation fails with a protection error instead
// of killing the process. A real NIC gets this from pinned pages and the IOMMU; here a
// SIGSEGV/SIGBUS handler finishes a faulting access (hostmem_x86_64.S says how).
//
// Ordering: x86-64 keeps stores in program order and these are calls the compiler
// cannot move memory accesses across, so a store64 of a descriptor's Length+Status after
// the copies of its data publishes that data (the driver's acquire load pairs with it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" {
int nicfw_hm_copy(void* dst, const void* src, size_t n);
int nicfw_hm_store64(void* dst, uint64_t v);
int nicfw_hm_store32(void* dst, uint32_t v);
uint64_t nicfw_hm_load32(const void* src);
int nicfw_hm_fadd64(uint64_t* dst, uint64_t add, uint64_t* old);
int nicfw_hm_cas64(uint64_t* dst, uint64_t expect, uint64_t desired, uint64_t* old);
}

namespace softvia::nicfw::hostmem {

// Installs the fault handler (once per process, at the first NIC's open). A handler the
// program had before keeps every fault that is not the device's. A program that installs
// its own SIGSEGV/SIGBUS handler later must chain to the one it replaced, or the device's
// faults kill it again (docs/memory-safety.md).
void install();
// Unblocks SIGSEGV and SIGBUS in the calling thread. The kernel kills a process whose
// thread faults with the signal blocked, whatever handler is installed; the firmware's
// threads inherit the mask of the thread that opened the NIC (which may block every
// signal, as programs built around signalfd do), so they call this first.
void unblock_faults_here();

// 0, or -EFAULT when either side faulted (dst may then hold part of the data).
[[gnu::always_inline]] inline int copy(void* dst, const void* src, size_t n) { return nicfw_hm_copy(dst, src, n); }
[[gnu::always_inline]] inline int store64(void* dst, uint64_t v) { return nicfw_hm_store64(dst, v); }
[[gnu::always_inline]] inline int store32(void* dst, uint32_t v) { return nicfw_hm_store32(dst, v); }
// A 32-bit word with acquire ordering (a plain load on x86-64); false if it could not
// be read. For the driver's poll of a descriptor's Status.
[[gnu::always_inline]] inline bool load32_acquire(const uint32_t* src, uint32_t* out) {
    const uint64_t r = nicfw_hm_load32(src);
    *out = static_cast<uint32_t>(r);
    return (r >> 32) == 0;
}
// Atomic read-modify-writes on an 8-byte aligned word of host memory (the NIC's
// atomics): 0 with the previous value in *old, or -EFAULT with nothing changed. A
// compare-and-swap swapped when *old == expect. Alignment is the caller's check.
[[gnu::always_inline]] inline int fetch_add64(uint64_t* dst, uint64_t add, uint64_t* old) {
    return nicfw_hm_fadd64(dst, add, old);
}
[[gnu::always_inline]] inline int cas64(uint64_t* dst, uint64_t expect, uint64_t desired, uint64_t* old) {
    return nicfw_hm_cas64(dst, expect, desired, old);
}
// A snapshot of a T in host memory; false if it could not be read.
template <class T>
[[gnu::always_inline]] inline bool load(const void* src, T* out) {
    return nicfw_hm_copy(out, src, sizeof(T)) == 0;
}

// Faults the handler has turned into -EFAULT since the process started (for tests and
// softvia-nicinfo).
uint64_t faults();

// Whether [va, va+len) is mapped, readable, and writable too when write is set: what
// VipRegisterMem asks before the NIC accepts a region. 0, or -EFAULT with the first
// address that fails and why in *why. Reads the process's mappings (PROCMAP_QUERY where
// the kernel has it, /proc/self/maps otherwise, or always the latter with text_maps: for
// tests); never touches the memory itself.
int check_access(uint64_t va, uint64_t len, bool write, std::string* why, bool text_maps = false);

}  // namespace softvia::nicfw::hostmem
