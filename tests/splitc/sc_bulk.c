/* sc_bulk -- bulk_put, bulk_write and bulk_store into every process (this one too), at
 * sizes around the back ends' piece sizes (0, 1, 7, 8, 9, 4095, 4096, 4097, 64 KiB,
 * 1 MiB, and a few odd ones), at misaligned addresses; each owner checks every byte of
 * what landed and the guards around it; then bulk_get (several outstanding, one sync) and
 * bulk_read bring every slot back, checked against the pattern and local guards.
 * A pattern that differs at every scale shows a misplaced, repeated or lost piece.
 *
 * usage: sc_bulk [--max BYTES]   (sizes above BYTES are left out) */
#include <stdlib.h>

#include "sc_test.h"

#define G 64 /* guard bytes around every slot and buffer */
static const size_t sizes[] = {0, 1, 7, 8, 9, 63, 4095, 4096, 4097, 8191, 8193, 12345, 65536, 65537, 1048576};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define GUARD_SEED 0xABCDu

enum { OP_PUT, OP_WRITE, OP_STORE, NOPS };
static const char *const op_names[NOPS] = {"bulk_put", "bulk_write", "bulk_store"};

static uint32_t seed_of(int w, int q, size_t n, int op) {
    return (uint32_t)w * 1000003u + (uint32_t)q * 7919u + (uint32_t)n * 31u + (uint32_t)op;
}

int splitc_main(int argc, char **argv) {
    size_t max = 1048576;
    if (argc == 3 && !strcmp(argv[1], "--max")) max = (size_t)strtoull(argv[2], NULL, 10);
    const size_t stride = max + 2 * G + 8; /* one writer's slot at each owner */
    uint8_t *region = all_malloc(stride * (size_t)PROCS);
    uint8_t **src = malloc(sizeof(uint8_t *) * (size_t)PROCS);  /* one source per target */
    uint8_t **back = malloc(sizeof(uint8_t *) * (size_t)PROCS); /* and one destination */
    CHECK(region && src && back, "allocation of %zu bytes", stride * (size_t)PROCS);
    for (int q = 0; q < PROCS; q++) {
        src[q] = malloc(max + 8);
        back[q] = malloc(max + 2 * G + 8);
        CHECK(src[q] && back[q], "malloc");
    }

    for (size_t si = 0; si < NSIZES; si++) {
        const size_t n = sizes[si];
        if (n > max) continue;
        const size_t off = si % 4; /* remote and source misalignment: 0..3 bytes */
        for (int op = 0; op < NOPS; op++) {
            sc_fill(region, stride * (size_t)PROCS, GUARD_SEED);
            barrier();
            for (int i = 0; i < PROCS; i++) {
                const int q = (MYPROC + 1 + i) % PROCS;
                const gptr_t dst = toglobal(q, region + (size_t)MYPROC * stride + G + off);
                sc_fill(src[q] + off, n, seed_of(MYPROC, q, n, op));
                if (op == OP_PUT) bulk_put(dst, src[q] + off, n);
                else if (op == OP_WRITE) bulk_write(dst, src[q] + off, n);
                else bulk_store(dst, src[q] + off, n);
            }
            /* all in flight at once; the sources stay untouched until the end */
            if (op == OP_PUT) sync();
            if (op == OP_STORE) all_store_sync();
            barrier();
            for (int w = 0; w < PROCS; w++) {
                const uint8_t *slot = region + (size_t)w * stride;
                size_t bad = sc_mismatch(slot + G + off, n, seed_of(w, MYPROC, n, op));
                CHECK(bad == n, "%s of %zu bytes (+%zu) from %d: byte %zu wrong (%#x)", op_names[op], n, off, w, bad,
                      slot[G + off + bad]);
                /* the guards: the pattern GUARD_SEED was laid over the whole region */
                for (size_t b = 0; b < stride; b++) {
                    if (b >= G + off && b < G + off + n) continue;
                    const size_t at = (size_t)w * stride + b;
                    CHECK(region[at] == sc_pattern(at, GUARD_SEED),
                          "%s of %zu bytes (+%zu) from %d wrote outside its slot: byte %zd from the slot's start",
                          op_names[op], n, off, w, (ssize_t)b - (ssize_t)(G + off));
                }
            }
            /* Back: bulk_get from every process at once (one sync), then bulk_read. */
            const size_t boff = (si + 1) % 4;
            for (int read = 0; read < 2; read++) {
                for (int q = 0; q < PROCS; q++) {
                    memset(back[q], 0xEE, max + 2 * G + 8);
                    const gptr_t from = toglobal(q, region + (size_t)MYPROC * stride + G + off);
                    if (read) bulk_read(back[q] + G + boff, from, n);
                    else bulk_get(back[q] + G + boff, from, n);
                }
                if (!read) sync();
                for (int q = 0; q < PROCS; q++) {
                    size_t bad = sc_mismatch(back[q] + G + boff, n, seed_of(MYPROC, q, n, op));
                    CHECK(bad == n, "%s of %zu bytes from %d (written by %s): byte %zu wrong", read ? "bulk_read" : "bulk_get",
                          n, q, op_names[op], bad);
                    for (size_t b = 0; b < G + boff; b++)
                        CHECK(back[q][b] == 0xEE, "%s of %zu bytes wrote before its destination", read ? "bulk_read" : "bulk_get", n);
                    for (size_t b = G + boff + n; b < max + 2 * G + 8; b++)
                        CHECK(back[q][b] == 0xEE, "%s of %zu bytes wrote past its destination (byte %zu)",
                              read ? "bulk_read" : "bulk_get", n, b - (G + boff + n));
                }
            }
            barrier();
        }
    }
    all_free(region);
    for (int q = 0; q < PROCS; q++) {
        free(src[q]);
        free(back[q]);
    }
    free(src);
    free(back);
    return sc_done("sc_bulk");
}
