/* sc_bad CASE CALL -- one bad global pointer, given to one call; the job must stop with a
 * message that names the call, the process and the address, without any process dying
 * of a signal, and without the owner's memory changed. sc_bad.sh runs the cases and
 * checks the output.
 *
 * Process 0 makes the call; the owner is process 1 (process 0 itself when alone).
 * CASE, the address (at the owner unless said):
 *   proc      process PROCS (out of range)     procneg  process -1 (65535 in a gptr_t)
 *   null      NULL                              stack    a local variable of the owner
 *   unmapped  an address nothing maps           heapend  the first byte past the heap
 *   straddle  2 bytes before the heap's end (the access runs past it)
 *   dataend   the first byte past the data segment (_end)
 *   unmade    memory the owner made global, then took back (splitc_unmake_global)
 *   relro     the program's RELRO part (.got: in the data segment, read-only once loaded)
 *   gotplt    the first PLT slot of the owner's .got.plt (writable under lazy binding):
 *             where one of its calls into a shared library jumps
 *   copyrel   the owner's copy of the runtime's process count (the variable behind PROCS,
 *             in the program's .bss by a copy relocation)
 * CALL: any of the names in calls[] below.
 *
 * Before the call, process 0 prints "sc-expect-line: CALL: global pointer to process P,
 * address A"; sc_expect.sh checks that the runtime's message has it. The owner watches
 * the memory around every target (a pattern it wrote) after each poll, and when the
 * launcher stops it (SIGTERM) it says "owner memory intact" or what changed.
 *
 * Needs SPLITC_HEAP_SIZE=1M: the heap is then one 1 MiB-aligned MiB, whose end the
 * program works out from any heap address. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dl_iterate_phdr */
#endif
#include <link.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "sc_test.h"

#define HEAP 0x100000ul /* SPLITC_HEAP_SIZE=1M */
#define GUARD 64

extern char _end[]; /* the linker's end of the data segment (bss) */

struct published {
    uint64_t stack_addr, unmade_addr;
};
struct published pub; /* the owner's addresses, written into process 0's copy */
volatile int never;   /* the flag the owner spins on: nobody sets it */

/* What the owner watches, and the pattern it wrote there. */
static uint8_t *watch[4];
static size_t watch_n;
static uint8_t snapshot[4][GUARD];

static size_t first_change(void) {
    for (size_t w = 0; w < watch_n; w++)
        if (memcmp(watch[w], snapshot[w], GUARD) != 0) return w;
    return watch_n;
}

/* The start of the program's PT_GNU_RELRO range (0 if it has none). */
static int find_relro(struct dl_phdr_info *info, size_t size, void *out) {
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO)
            *(uint64_t *)out = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
    return 1;
}

/* The program's DT_PLTGOT (.got.plt: three reserved words, then the PLT slots), or 0. */
static int find_pltgot(struct dl_phdr_info *info, size_t size, void *out) {
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr); d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_PLTGOT) *(uint64_t *)out = d->d_un.d_ptr;
    }
    return 1;
}

static void say(const char *s) {
    if (write(2, s, strlen(s)) < 0) _exit(3);
}

static void on_term(int sig) {
    (void)sig;
    say(first_change() == watch_n ? "sc_bad: owner memory intact\n" : "sc_bad: owner memory CORRUPTED\n");
    _exit(0);
}

static int64_t add_fn(void *addr, int64_t arg) {
    int64_t old;
    memcpy(&old, addr, sizeof old);
    int64_t now = old + arg;
    memcpy(addr, &now, sizeof now);
    return old;
}

static const char *const calls[] = {
    "read_char", "write_short", "get_int", "put_long", "store_longlong", "read_float", "write_double",
    "get_double", "put_char", "store_float", "read_long", "store_int",
    "bulk_read", "bulk_write", "bulk_get", "bulk_put", "bulk_store",
    "atomic_call", "atomic_fetch_add_long", "atomic_cswap_long", NULL};

/* Makes the call; returns only if the runtime let it through. */
static void do_call(const char *call, gptr_t g) {
    char buf[64];
    memset(buf, 0x5a, sizeof buf);
    if (!strcmp(call, "read_char")) (void)read_char(g);
    else if (!strcmp(call, "write_short")) write_short(g, 0x1234);
    else if (!strcmp(call, "get_int")) { int v; get_int(&v, g); sync(); }
    else if (!strcmp(call, "put_long")) { put_long(g, 0x0102030405060708L); sync(); }
    else if (!strcmp(call, "store_longlong")) store_longlong(g, 0x0102030405060708LL);
    else if (!strcmp(call, "read_float")) (void)read_float(g);
    else if (!strcmp(call, "write_double")) write_double(g, 2.5);
    else if (!strcmp(call, "get_double")) { double v; get_double(&v, g); sync(); }
    else if (!strcmp(call, "put_char")) { put_char(g, 'x'); sync(); }
    else if (!strcmp(call, "store_float")) store_float(g, 1.5f);
    else if (!strcmp(call, "read_long")) (void)read_long(g);
    else if (!strcmp(call, "store_int")) store_int(g, 77);
    else if (!strcmp(call, "bulk_read")) bulk_read(buf, g, sizeof buf);
    else if (!strcmp(call, "bulk_write")) bulk_write(g, buf, sizeof buf);
    else if (!strcmp(call, "bulk_get")) { bulk_get(buf, g, sizeof buf); sync(); }
    else if (!strcmp(call, "bulk_put")) { bulk_put(g, buf, sizeof buf); sync(); }
    else if (!strcmp(call, "bulk_store")) bulk_store(g, buf, sizeof buf);
    else if (!strcmp(call, "atomic_call")) (void)atomic_call(add_fn, g, 5);
    else if (!strcmp(call, "atomic_fetch_add_long")) (void)atomic_fetch_add_long(g, 5);
    else if (!strcmp(call, "atomic_cswap_long")) (void)atomic_cswap_long(g, 0, 5);
    else {
        fprintf(stderr, "sc_bad: unknown call '%s'\n", call);
        splitc_exit(2);
    }
    /* A store's refusal comes when it comes: give it every chance to arrive (5 s). */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        splitc_poll();
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 5000000000L);
}

/* Rewrites the pattern of a watched area (the owner's side). */
static void watch_area(void *p) {
    watch[watch_n] = p;
    sc_fill(p, GUARD, (uint32_t)watch_n + 17);
    memcpy(snapshot[watch_n], p, GUARD);
    watch_n++;
}

int splitc_main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: sc_bad CASE CALL\n");
        return 2;
    }
    const char *kase = argv[1], *call = argv[2];
    const int owner = PROCS > 1 ? 1 : 0;
    uint8_t stack_area[GUARD];
    uint8_t *made = malloc(GUARD);
    char *heap = all_malloc(64);
    CHECK(heap != NULL && made != NULL, "allocation");
    const uint64_t heap_lo = (uint64_t)(uintptr_t)heap & ~(uint64_t)(HEAP - 1);
    const uint64_t heap_end = heap_lo + HEAP;
    CHECK(getenv("SPLITC_HEAP_SIZE") && !strcmp(getenv("SPLITC_HEAP_SIZE"), "1M"), "run with SPLITC_HEAP_SIZE=1M");

    if (MYPROC == owner) {
        watch_area(stack_area);
        watch_area((void *)(uintptr_t)(heap_end - GUARD)); /* the heap's last bytes (reserved, unused) */
        watch_area(made);
        watch_area(heap);
        splitc_make_global(made, GUARD);
        splitc_unmake_global(made);
        struct published mine = {(uint64_t)(uintptr_t)stack_area, (uint64_t)(uintptr_t)made};
        bulk_write(toglobal(0, &pub), &mine, sizeof mine);
        if (PROCS > 1) signal(SIGTERM, on_term);
    }
    barrier();

    int proc = owner;
    uint64_t addr = 0;
    if (!strcmp(kase, "proc")) proc = PROCS, addr = (uint64_t)(uintptr_t)heap;
    else if (!strcmp(kase, "procneg")) proc = -1, addr = (uint64_t)(uintptr_t)heap;
    else if (!strcmp(kase, "null")) addr = 0;
    else if (!strcmp(kase, "stack")) addr = pub.stack_addr;
    else if (!strcmp(kase, "unmapped")) addr = 0x300000000000ull + 0x1230;
    else if (!strcmp(kase, "heapend")) addr = heap_end;
    else if (!strcmp(kase, "straddle")) addr = heap_end - 2;
    else if (!strcmp(kase, "dataend")) addr = (uint64_t)(uintptr_t)_end;
    else if (!strcmp(kase, "unmade")) addr = pub.unmade_addr;
    else if (!strcmp(kase, "relro")) {
        dl_iterate_phdr(find_relro, &addr);
        CHECK(addr != 0, "the program has a RELRO range");
    }
    else if (!strcmp(kase, "gotplt")) {
        dl_iterate_phdr(find_pltgot, &addr);
        CHECK(addr != 0, "the program has a .got.plt");
        addr += 24; /* the first PLT slot */
    }
    else if (!strcmp(kase, "copyrel")) addr = (uint64_t)(uintptr_t)&splitc_procs_;
    else {
        fprintf(stderr, "sc_bad: unknown case '%s'\n", kase);
        return 2;
    }
    int known = 0;
    for (int i = 0; calls[i]; i++) known |= !strcmp(calls[i], call);
    if (!known) {
        fprintf(stderr, "sc_bad: unknown call '%s'\n", call);
        return 2;
    }

    if (MYPROC == 0) {
        const gptr_t g = toglobal(proc, (void *)(uintptr_t)addr);
        printf("sc-expect-line: %s: global pointer to process %d, address %#llx (\n", call, toproc(g),
               (unsigned long long)addr);
        fflush(stdout);
        do_call(call, g);
        printf("sc_bad: %s with case %s went through (process %d, address %#llx)\n", call, kase, toproc(g),
               (unsigned long long)addr);
        fflush(stdout);
        splitc_exit(4);
    }
    if (MYPROC == owner) {
        /* Serve until the launcher stops us, watching the memory around the targets. */
        while (!never) {
            splitc_poll();
            size_t w = first_change();
            if (w != watch_n) {
                fprintf(stderr, "sc_bad: owner memory CORRUPTED (area %zu, %s, case %s)\n", w, call, kase);
                splitc_exit(3);
            }
        }
    }
    for (;;) splitc_poll(); /* others: wait to be stopped */
}
