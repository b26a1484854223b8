// memory.cc -- Split-C's global memory: the program's data segment, the symmetric heap
// (all_malloc, all_spread_malloc), memory made global by hand, and the checks of
// addresses against them.
//
// Split-C programs rely on global variables and all_* allocations being at the same
// address in every process. The data segment is, in a non-PIE executable (the runtime
// compares every process's layout at start-up). The heap is a range reserved at the same
// fixed address in every process (mmap MAP_FIXED_NOREPLACE, not committed until used),
// carved by one deterministic allocator: the all_* calls are collectives, so every
// process makes the same sequence of them and gets the same addresses; each call checks
// that all processes agree.
#include <link.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "collectives.h"
#include "runtime.h"

namespace splitc {
namespace {

// 86 TiB: far from brk's area (a non-PIE program's is low) and below mmap's (near 128 TiB);
// also ordinary application memory under AddressSanitizer (whose shadow covers 16 TiB up to
// 0x10007fff7fff) and ThreadSanitizer (0x550000000000-0x568000000000), so the sanitizer
// builds run Split-C programs too.
constexpr uint64_t kHeapBase = 0x560000000000ull;
constexpr uint64_t kDefaultHeap = 256ull << 20;
constexpr uint64_t kAlign = 64;

Range g_data{0, 0}, g_text{0, 0}, g_heap{0, 0};
std::map<uint64_t, uint64_t> g_free;   // free runs of the heap: address -> bytes
std::map<uint64_t, uint64_t> g_used;   // all_* blocks: address -> bytes
std::vector<Range> g_made;             // splitc_make_global ranges
std::vector<Range> g_excluded;         // inside g_data, not global memory (exclude_dynamic)

void exclude(uint64_t lo, uint64_t hi) {
    if (hi <= lo || hi <= g_data.lo || lo >= g_data.hi) return;
    if (lo <= g_data.lo) {  // at the start: the data segment begins after it
        g_data.lo = std::min(hi, g_data.hi);
        return;
    }
    g_excluded.push_back(Range{lo, std::min(hi, g_data.hi)});
}

// What the data segment holds besides the program's variables, found through the
// program's dynamic section: .got.plt, writable under lazy binding (the default; with
// -z now it is in RELRO, left out above), whose slots a put would turn into a jump
// anywhere; and the copy relocations, variables of shared libraries that the program uses
// directly and that live in its .bss (the runtime's rank and size behind MYPROC and PROCS,
// libc's stdout...): a put there would change the owner's runtime or libc under it.
void exclude_dynamic(const dl_phdr_info* info) {
    const ElfW(Dyn)* dyn = nullptr;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn) return;  // a static program: no PLT slots written at run time, no copies
    uint64_t pltgot = 0, pltrelsz = 0, rela = 0, relasz = 0, relaent = sizeof(ElfW(Rela)), symtab = 0,
             syment = sizeof(ElfW(Sym));
    for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
            case DT_PLTGOT: pltgot = d->d_un.d_ptr; break;
            case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
            case DT_RELA: rela = d->d_un.d_ptr; break;
            case DT_RELASZ: relasz = d->d_un.d_val; break;
            case DT_RELAENT: relaent = d->d_un.d_val; break;
            case DT_SYMTAB: symtab = d->d_un.d_ptr; break;
            case DT_SYMENT: syment = d->d_un.d_val; break;
            default: break;
        }
    }
    // The loader may have relocated the pointers in place (a PIE), or not (non-PIE: 0).
    const uint64_t base = info->dlpi_addr;
    auto at = [base](uint64_t v) { return v >= base ? v : v + base; };
    if (pltgot) {  // three reserved words, then a slot per PLT relocation
        const uint64_t lo = at(pltgot);
        exclude(lo, lo + 8 * (3 + pltrelsz / sizeof(ElfW(Rela))));
    }
    if (!rela || !symtab || relaent < sizeof(ElfW(Rela)) || syment < sizeof(ElfW(Sym))) return;
    for (uint64_t off = 0; off + relaent <= relasz; off += relaent) {
        const auto* r = reinterpret_cast<const ElfW(Rela)*>(at(rela) + off);
        if (ELF64_R_TYPE(r->r_info) != R_X86_64_COPY) continue;
        const auto* sym = reinterpret_cast<const ElfW(Sym)*>(at(symtab) + ELF64_R_SYM(r->r_info) * syment);
        const uint64_t lo = base + r->r_offset;
        exclude(lo, lo + std::max<uint64_t>(sym->st_size, 1));
    }
}

int find_main_segments(struct dl_phdr_info* info, size_t, void*) {
    // The first object is the program itself.
    Range relro{0, 0};
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_GNU_RELRO)
            relro = Range{info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz};
        if (ph.p_type != PT_LOAD) continue;
        Range r{info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz};
        Range& into = (ph.p_flags & PF_W) ? g_data : (ph.p_flags & PF_X) ? g_text : r;
        if (&into == &r) continue;
        if (into.hi == 0) {
            into = r;
        } else {
            into.lo = std::min(into.lo, r.lo);
            into.hi = std::max(into.hi, r.hi);
        }
    }
    // The RELRO part (.got and the like) the loader made read-only after relocating, up to
    // the page its end falls in, is not global memory: a put there would kill the owner.
    if (relro.hi > g_data.lo && relro.lo < g_data.hi) g_data.lo = std::max(g_data.lo, relro.hi & ~uint64_t(4095));
    exclude_dynamic(info);
    return 1;  // stop after the first
}

uint64_t heap_size_setting() {
    const char* s = getenv("SPLITC_HEAP_SIZE");
    if (!s || !*s) return kDefaultHeap;
    char* end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    uint64_t mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mult = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mult = 1ull << 30, end++;
    if (errno || *end || *s == '-' || v == 0 || v > (64ull << 30) / mult)
        fatal("SPLITC_HEAP_SIZE='%s': accepted values are 1 to 64G bytes (suffix K, M or G)", s);
    return (v * mult + 4095) & ~4095ull;
}

bool inside(const Range& r, uint64_t addr, size_t n) {
    return addr >= r.lo && n <= r.hi - r.lo && addr - r.lo <= r.hi - r.lo - n;
}

}  // namespace

void (*g_global_range_hook)(uint64_t lo, uint64_t hi, bool add) = nullptr;

Range data_segment() { return g_data; }
Range text_segment() { return g_text; }
Range heap_range() { return g_heap; }

void memory_init() {
    dl_iterate_phdr(find_main_segments, nullptr);
    const uint64_t size = heap_size_setting();
    g_heap = Range{kHeapBase, kHeapBase + size};
    g_free.clear();
    g_free[kHeapBase] = size;
}

void memory_map_heap() {
    const uint64_t size = g_heap.hi - g_heap.lo;
    void* p = mmap(reinterpret_cast<void*>(g_heap.lo), size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED || reinterpret_cast<uint64_t>(p) != g_heap.lo)
        fatal("cannot reserve the symmetric heap (%llu bytes at %#llx): %s", static_cast<unsigned long long>(size),
              static_cast<unsigned long long>(g_heap.lo), p == MAP_FAILED ? strerror(errno) : "placed elsewhere");
}

bool in_global_data(uint64_t addr, size_t n) {
    if (!inside(g_data, addr, n)) return false;
    for (const Range& x : g_excluded)
        if (addr < x.hi && x.lo < addr + n) return false;
    return true;
}

bool is_symmetric(uint64_t addr, size_t n) { return inside(g_heap, addr, n) || in_global_data(addr, n); }

bool is_global(uint64_t addr, size_t n) {
    if (is_symmetric(addr, n)) return true;
    for (const Range& r : g_made)
        if (inside(r, addr, n)) return true;
    return false;
}

bool in_program_text(uint64_t fn) { return fn >= g_text.lo && fn < g_text.hi; }

namespace {
// First fit, in address order: the same calls give the same answers in every process.
uint64_t heap_alloc(uint64_t n) {
    if (n > g_heap.hi - g_heap.lo) return 0;  // also keeps the rounding below from wrapping
    n = std::max<uint64_t>((n + kAlign - 1) & ~(kAlign - 1), kAlign);
    for (auto it = g_free.begin(); it != g_free.end(); ++it) {
        if (it->second < n) continue;
        uint64_t at = it->first, left = it->second - n;
        g_free.erase(it);
        if (left) g_free[at + n] = left;
        g_used[at] = n;
        return at;
    }
    return 0;
}

void heap_free(uint64_t at) {
    auto u = g_used.find(at);
    uint64_t n = u->second;
    g_used.erase(u);
    auto next = g_free.lower_bound(at);
    if (next != g_free.end() && at + n == next->first) {  // join the run after
        n += next->second;
        next = g_free.erase(next);
    }
    if (next != g_free.begin()) {  // and the one before
        auto prev = std::prev(next);
        if (prev->first + prev->second == at) {
            prev->second += n;
            return;
        }
    }
    g_free[at] = n;
}

// The collective part of every all_* allocation: all processes got the same answer.
void* agreed(const char* call, uint64_t at, uint64_t per_proc) {
    if (!all_agree(at))
        fatal("%s: the processes got different addresses (they did not all make the same sequence of "
              "all_* calls)", call);
    if (at == 0) return nullptr;  // full everywhere
    memset(reinterpret_cast<void*>(at), 0, per_proc);
    internal_barrier();
    return reinterpret_cast<void*>(at);
}

void release(const char* call, void* base) {
    const uint64_t at = reinterpret_cast<uint64_t>(base);
    if (!all_agree(at)) fatal("%s: the processes freed different blocks", call);
    if (g_used.find(at) == g_used.end())
        fatal("%s: %p is not a block of all_malloc / all_spread_malloc", call, base);
    heap_free(at);  // every process is here (all_agree is a collective): none touches it any more
}
}  // namespace

void* alloc_internal(uint64_t n) {
    uint64_t at = heap_alloc(n);
    if (!at) fatal("the symmetric heap is full (SPLITC_HEAP_SIZE)");
    memset(reinterpret_cast<void*>(at), 0, n);
    return reinterpret_cast<void*>(at);
}

}  // namespace splitc

using namespace splitc;

extern "C" {

void* all_spread_malloc(size_t nblocks, size_t blocksize) {
    // Blocks per process, rounded up (without overflowing for huge nblocks). More than the
    // largest heap holds is a request the heap cannot hold: NULL everywhere, as for any
    // other full heap (splitc.h), never an overflowed size.
    const size_t P = static_cast<size_t>(PROCS);
    const size_t per = nblocks / P + (nblocks % P != 0);
    const bool fits = blocksize == 0 || per <= (64ull << 30) / blocksize;
    const uint64_t bytes = fits ? static_cast<uint64_t>(per) * blocksize : 0;
    return agreed("all_spread_malloc", fits ? heap_alloc(bytes) : 0, bytes);
}

void all_spread_free(void* base) { release("all_spread_free", base); }

void* all_malloc(size_t n) { return agreed("all_malloc", heap_alloc(n), n); }

void all_free(void* base) { release("all_free", base); }

void splitc_make_global(void* addr, size_t n) {
    const uint64_t a = reinterpret_cast<uint64_t>(addr);
    if (!addr || n == 0 || a + n < a) fatal("splitc_make_global(%p, %zu): not a range", addr, n);
    g_made.push_back(Range{a, a + n});
    if (g_global_range_hook) g_global_range_hook(a, a + n, true);
}

void splitc_unmake_global(void* addr) {
    const uint64_t a = reinterpret_cast<uint64_t>(addr);
    auto it = std::find_if(g_made.begin(), g_made.end(), [&](const Range& r) { return r.lo == a; });
    if (it == g_made.end()) fatal("splitc_unmake_global(%p): not a range made global", addr);
    if (g_global_range_hook) g_global_range_hook(it->lo, it->hi, false);
    g_made.erase(it);
}

}  // extern "C"
