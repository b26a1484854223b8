/* sc_via_mix -- many mixed gets, puts, stores and atomic calls, every one checked: the
 * exactly-once test of the back ends (written for via-unrel under the fault injector,
 * docs/splitc.md; it runs on any back end and wire).
 *
 *   softvia-run -n N sc_via_mix [--ops K] [--seed S]
 *
 * Each process makes K operations (default 20000), chosen at random (seeded per
 * process), on memory at random processes (itself included). What each writes is known
 * only to it, so it keeps a mirror and can predict every answer:
 *   - put_long / write_long into cells only it writes; get_long / read_long of them must
 *     return its last value (after sync() for a put), and so must the final read-back
 *     (a second put to a place waits for sync(): Split-C does not order two puts);
 *   - atomic_fetch_add_long, atomic_call (x -> 3x + arg, so a lost or repeated call shows)
 *     and atomic_cswap_long (succeeding and failing) on cells only it uses: every result
 *     must be the mirror's value;
 *   - atomic_fetch_add_long on one cell per process that everybody adds to: the final
 *     value must be the sum of all adds;
 *   - store_int and bulk_store into store cells, each written exactly once: after
 *     all_store_sync every owner checks every cell of every writer, and that no cell
 *     beyond the last was written;
 *   - bulk_put / bulk_get / bulk_read of random sizes (up to 16 KiB, over the RDMA
 *     threshold) from and into global memory (RDMA on via-rel) and malloc'd memory;
 *   - first, streams (--stream K, default 20000): K put_int back to back to the next
 *     process while it only serves, then K get_int of what they wrote, checked: full
 *     windows of requests and of replies (a stall under loss shows as the peer timeout);
 *   - last, bursts (--bursts K, default ops/8): runs of 1 to 48 split-phase puts, gets
 *     and stores of every basic type (1, 2, 4 and 8 bytes) to random processes, back to
 *     back (the via back ends gather them: K_GATHER), each run ended by a sync, an atomic
 *     call, a blocking read, or nothing (the next run goes on gathering). Puts and gets
 *     use cells only this process writes (a cell with a put or a get outstanding is not
 *     used again before sync); each store goes to a fresh slot whose type and value its
 *     owner can work out, checked by the owner at the end with the rest below it zero.
 * A lost operation leaves an old value, a repeated one a wrong value or a wrong sum.
 * Exits 0 with one line per process, or 1 naming the first wrong value. */
#include <splitc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CELLS 64
#define BULK 16384
#define GMAX 256      /* gets outstanding before a sync */
#define STCAP (1 << 20) /* store cells per writer at each process */
#define SCELLS 4096     /* stream cells per writer */
#define BCELLS 1024     /* burst cells (8 bytes) per writer at each process */
#define BSTCAP (1 << 16) /* burst store slots (8 bytes) per writer at each process */
#define BGMAX 256       /* burst gets outstanding before a sync */

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A wrong value ends the whole job at once with status 1 (the others may be anywhere). */
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "sc_via_mix: process %d: ", MYPROC); \
            fprintf(stderr, __VA_ARGS__);                        \
            fputc('\n', stderr);                                 \
            splitc_exit(1);                                      \
        }                                                        \
    } while (0)

/* The area every process has at the same address (all_malloc), P writers: */
static size_t P_;
static char *area;
static size_t off_cell, off_ctr, off_chain, off_swap, off_shared, off_shexp, off_nst, off_bulk, off_st, off_stream,
    off_bcell, off_bnst, off_bst, area_len;

static long *cell(int w) { return (long *)(area + off_cell) + (size_t)w * CELLS; }
static long *ctr(int w) { return (long *)(area + off_ctr) + w; }
static long *chain(int w) { return (long *)(area + off_chain) + w; }
static long *swp(int w) { return (long *)(area + off_swap) + w; }
static long *shared_cell(void) { return (long *)(area + off_shared); }
static long *shared_expect(int w) { return (long *)(area + off_shexp) + w; }
static long *nstores(int w) { return (long *)(area + off_nst) + w; }
static char *bulk(int w) { return area + off_bulk + (size_t)w * BULK; }
static int *stcell(int w) { return (int *)(area + off_st) + (size_t)w * STCAP; }
static int *scell(int w) { return (int *)(area + off_stream) + (size_t)w * SCELLS; }
static uint64_t *bcell(int w) { return (uint64_t *)(area + off_bcell) + (size_t)w * BCELLS; }
static long *bnstores(int w) { return (long *)(area + off_bnst) + w; }
static uint64_t *bslot(int w) { return (uint64_t *)(area + off_bst) + (size_t)w * BSTCAP; }
static int stream_value(int w, long i) { return (int)(0x5e000000 ^ (w << 19) ^ (int)(i * 40503u)); }

int64_t chain_fn(void *addr, int64_t arg) {
    long *p = addr;
    long old = *p;
    *p = (long)((unsigned long)old * 3u + (unsigned long)arg);
    return old;
}

static int store_value(int w, int t, long k) { return (int)(0x51000000 ^ (w << 20) ^ (t << 16) ^ (int)(k * 2654435761u)); }

/* What this process expects at each target */
struct mirror {
    long cell[CELLS];
    unsigned char dirty[CELLS]; /* put, not synced */
    long ctr, chain, swp, shared_added;
    long nst; /* store cells used */
    uint64_t bcell[BCELLS];
    unsigned char bbusy[BCELLS]; /* a put or a get outstanding (until sync) */
    long bnst;                   /* burst store slots used */
    char bulk[BULK];
    int bulk_dirty;
};
static struct mirror *M;

struct pending_get {
    long *dst;
    long want;
    int t, i;
};
static struct pending_get G[GMAX];
static long gvals[GMAX];
static int ng;
static int src_busy; /* a bulk_put/bulk_store from gsrc may still read it (until sync) */

/* ---- bursts: every basic type, gathered by the via back ends ---- */
#define FOR_TYPES(X) X(0, char, char) X(1, short, short) X(2, int, int) X(3, long, long) \
    X(4, long long, longlong) X(5, float, float) X(6, double, double)
static const size_t tsize[7] = {1, 2, 4, 8, 8, 4, 8};
static const char *const tname[7] = {"char", "short", "int", "long", "longlong", "float", "double"};

/* The bytes of a value of type ty made from r, in the low bytes, the rest zero (floats
 * from integers, so that no NaN pattern has to survive the trip). */
static uint64_t tvalue(int ty, uint64_t r) {
    uint64_t v = 0;
    if (ty == 5) {
        const float f = (float)(int32_t)(r & 0xffffff) / 8.0f;
        memcpy(&v, &f, sizeof f);
    } else if (ty == 6) {
        const double d = (double)(int64_t)(r >> 11) / 16.0;
        memcpy(&v, &d, sizeof d);
    } else {
        memcpy(&v, &r, tsize[ty]); /* little-endian: the low bytes */
    }
    return v;
}
static void put_t(int ty, gptr_t g, uint64_t v) {
    switch (ty) {
#define X(i, T, n) case i: { T x; memcpy(&x, &v, sizeof x); put_##n(g, x); break; }
        FOR_TYPES(X)
#undef X
    }
}
static void store_t(int ty, gptr_t g, uint64_t v) {
    switch (ty) {
#define X(i, T, n) case i: { T x; memcpy(&x, &v, sizeof x); store_##n(g, x); break; }
        FOR_TYPES(X)
#undef X
    }
}
static void get_t(int ty, void *dst, gptr_t g) {
    switch (ty) {
#define X(i, T, n) case i: get_##n((T *)dst, g); break;
        FOR_TYPES(X)
#undef X
    }
}
/* Burst store slot k from writer w at process t: its type is k % 7. */
static uint64_t bstore_value(int w, int t, long k) {
    return tvalue((int)(k % 7), 0x6b00000000000000ull ^ ((uint64_t)w << 40) ^ ((uint64_t)t << 32) ^
                                    ((uint64_t)k * 0x9E3779B97F4A7C15ull >> 8));
}

static struct {
    uint64_t want;
    int ty, t, c;
} BG[BGMAX];
static uint64_t bgvals[BGMAX];
static int nbg;

static int do_sync(void) {
    sync();
    for (int j = 0; j < nbg; j++)
        CHECK(!memcmp(&bgvals[j], &BG[j].want, tsize[BG[j].ty]), "get_%s of burst cell %d at process %d: %#llx, want %#llx",
              tname[BG[j].ty], BG[j].c, BG[j].t, (unsigned long long)bgvals[j], (unsigned long long)BG[j].want);
    nbg = 0;
    for (int j = 0; j < ng; j++)
        CHECK(*G[j].dst == G[j].want, "get_long of cell %d at process %d: %ld, want %ld", G[j].i, G[j].t, *G[j].dst,
              G[j].want);
    ng = 0;
    src_busy = 0;
    for (size_t t = 0; t < P_; t++) {
        memset(M[t].dirty, 0, CELLS);
        memset(M[t].bbusy, 0, BCELLS);
        M[t].bulk_dirty = 0;
    }
    return 0;
}

/* Runs of split-phase puts, gets and stores of every type, ended in different ways;
 * returns how many operations it made. */
static long run_bursts(long bursts) {
    long nops = 0;
    for (long b = 0; b < bursts; b++) {
        const int len = 1 + (int)(rnd() % 48);
        for (int k = 0; k < len; k++) {
            const uint64_t r = rnd();
            const int t = (int)(r % P_);
            const int ty = (int)((r >> 8) % 7);
            const unsigned kind = (unsigned)((r >> 16) % 100);
            struct mirror *m = &M[t];
            if (kind < 65) {
                const int c = (int)((r >> 24) % BCELLS);
                if (m->bbusy[c] || (kind >= 30 && nbg == BGMAX)) continue;
                const gptr_t g = toglobal(t, &bcell(MYPROC)[c]);
                if (kind < 30) { /* put: its bytes replace the cell's first ones */
                    const uint64_t v = tvalue(ty, rnd());
                    put_t(ty, g, v);
                    memcpy(&m->bcell[c], &v, tsize[ty]);
                } else {
                    BG[nbg].want = m->bcell[c];
                    BG[nbg].ty = ty;
                    BG[nbg].t = t;
                    BG[nbg].c = c;
                    bgvals[nbg] = ~m->bcell[c];
                    get_t(ty, &bgvals[nbg], g);
                    nbg++;
                }
                m->bbusy[c] = 1;
            } else { /* store into a fresh slot */
                if (m->bnst == BSTCAP) continue;
                const long sl = m->bnst++;
                store_t((int)(sl % 7), toglobal(t, &bslot(MYPROC)[sl]), bstore_value(MYPROC, t, sl));
            }
            nops++;
        }
        const uint64_t r = rnd();
        const int t = (int)(r % P_);
        switch ((r >> 8) % 4) {
        case 0:
            if (do_sync()) return -1;
            break;
        case 1: { /* an atomic call: the gathered ones go first */
            const long v = (long)(r >> 40) % 1000 + 1;
            const long old = atomic_fetch_add_long(toglobal(t, ctr(MYPROC)), v);
            CHECK(old == M[t].ctr, "atomic_fetch_add_long at process %d returned %ld, want %ld", t, old, M[t].ctr);
            M[t].ctr += v;
            break;
        }
        case 2: { /* a blocking read of a cell with nothing outstanding */
            const int c = (int)((r >> 24) % BCELLS);
            if (M[t].bbusy[c]) break;
            const long v = read_long(toglobal(t, &bcell(MYPROC)[c]));
            CHECK(!memcmp(&v, &M[t].bcell[c], 8), "read_long of burst cell %d at process %d: %#lx, want %#llx", c, t,
                  v, (unsigned long long)M[t].bcell[c]);
            break;
        }
        default: /* nothing: the next run goes on gathering */
            break;
        }
    }
    return do_sync() ? -1 : nops;
}

int splitc_main(int argc, char **argv) {
    long ops = 20000, stream = 20000, bursts = -1;
    uint64_t seed = 1;
    for (int a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--ops")) ops = atol(argv[a + 1]);
        else if (!strcmp(argv[a], "--seed")) seed = strtoull(argv[a + 1], NULL, 10);
        else if (!strcmp(argv[a], "--stream")) stream = atol(argv[a + 1]);
        else if (!strcmp(argv[a], "--bursts")) bursts = atol(argv[a + 1]);
    }
    if (bursts == -1) bursts = ops / 8;
    if (ops < 1 || stream < 0 || bursts < 0) {
        fprintf(stderr, "usage: sc_via_mix [--ops K] [--seed S] [--stream K] [--bursts K]\n");
        return 2;
    }
    P_ = (size_t)PROCS;
    off_cell = 0;
    off_ctr = off_cell + P_ * CELLS * sizeof(long);
    off_chain = off_ctr + P_ * sizeof(long);
    off_swap = off_chain + P_ * sizeof(long);
    off_shared = off_swap + P_ * sizeof(long);
    off_shexp = off_shared + 64;
    off_nst = off_shexp + P_ * sizeof(long);
    off_bulk = (off_nst + P_ * sizeof(long) + 63) & ~(size_t)63;
    off_st = off_bulk + P_ * BULK;
    off_stream = off_st + P_ * STCAP * sizeof(int);
    off_bcell = (off_stream + P_ * SCELLS * sizeof(int) + 63) & ~(size_t)63;
    off_bnst = off_bcell + P_ * BCELLS * sizeof(uint64_t);
    off_bst = off_bnst + P_ * sizeof(long);
    area_len = off_bst + P_ * BSTCAP * sizeof(uint64_t);
    area = all_malloc(area_len);
    CHECK(area, "all_malloc(%zu) failed", area_len);
    M = calloc(P_, sizeof *M);
    char *gsrc = all_malloc(BULK); /* global memory: RDMA's local end on via-rel */
    char *gdst = all_malloc(BULK);
    char *msrc = malloc(BULK), *mdst = malloc(BULK);
    CHECK(M && gsrc && gdst && msrc && mdst, "memory");
    rng_state = seed * 1000003u + (uint64_t)MYPROC * 7919u;
    barrier();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    /* Streams to the next process, one way (even processes, then odd ones, while the
     * others serve in barrier): puts (a cell is put again only after a sync), then gets
     * of the last values. */
    const int next = (MYPROC + 1) % PROCS;
    static int sback[SCELLS];
    for (int turn = 0; turn < 2; turn++) {
        barrier();
        if (MYPROC % 2 != turn || PROCS == 1) continue;
        for (long i = 0; i < stream; i++) {
            if (i % SCELLS == 0) sync();
            put_int(toglobal(next, &scell(MYPROC)[i % SCELLS]), stream_value(MYPROC, i));
        }
        sync();
        for (long i = 0; i < stream; i++) {
            get_int(&sback[i % SCELLS], toglobal(next, &scell(MYPROC)[i % SCELLS]));
            if (i % SCELLS == SCELLS - 1 || i == stream - 1) {
                sync();
                for (long j = i - i % SCELLS; j <= i; j++) {
                    const long last = j + (stream - 1 - j) / SCELLS * SCELLS; /* the last put to cell j % SCELLS */
                    CHECK(sback[j % SCELLS] == stream_value(MYPROC, last),
                          "stream: get_int of cell %ld at process %d: %#x, want %#x", j % SCELLS, next, sback[j % SCELLS],
                          stream_value(MYPROC, last));
                }
            }
        }
    }
    barrier();

    long n_put = 0, n_get = 0, n_store = 0, n_atomic = 0, n_bulk = 0;
    for (long op = 0; op < ops; op++) {
        const uint64_t r = rnd();
        const int t = (int)(r % P_);
        const int i = (int)((r >> 8) % CELLS);
        const unsigned kind = (unsigned)((r >> 16) % 100);
        struct mirror *m = &M[t];
        const gptr_t gc = toglobal(t, &cell(MYPROC)[i]);
        if (kind < 20) { /* put (two outstanding puts to one place may land in either order) */
            if (m->dirty[i] && do_sync()) return 1;
            const long v = (long)rnd();
            put_long(gc, v);
            m->cell[i] = v;
            m->dirty[i] = 1;
            n_put++;
        } else if (kind < 28) { /* write */
            if (m->dirty[i] && do_sync()) return 1;
            const long v = (long)rnd();
            write_long(gc, v);
            m->cell[i] = v;
            m->dirty[i] = 0;
            n_put++;
        } else if (kind < 43) { /* get */
            if (m->dirty[i] || ng == GMAX)
                if (do_sync()) return 1;
            G[ng] = (struct pending_get){&gvals[ng], m->cell[i], t, i};
            gvals[ng] = ~m->cell[i];
            get_long(&gvals[ng], gc);
            ng++;
            n_get++;
        } else if (kind < 51) { /* read */
            if (m->dirty[i] && do_sync()) return 1;
            const long v = read_long(gc);
            CHECK(v == m->cell[i], "read_long of cell %d at process %d: %ld, want %ld", i, t, v, m->cell[i]);
            n_get++;
        } else if (kind < 71) { /* store */
            if (m->nst == STCAP) continue;
            store_int(toglobal(t, &stcell(MYPROC)[m->nst]), store_value(MYPROC, t, m->nst));
            m->nst++;
            n_store++;
        } else if (kind < 76) { /* fetch-add, own cell */
            const long v = (long)(r >> 40) % 1000 + 1;
            const long old = atomic_fetch_add_long(toglobal(t, ctr(MYPROC)), v);
            CHECK(old == m->ctr, "atomic_fetch_add_long at process %d returned %ld, want %ld", t, old, m->ctr);
            m->ctr += v;
            n_atomic++;
        } else if (kind < 80) { /* atomic_call */
            const long arg = (long)(r >> 44);
            const long old = (long)atomic_call(chain_fn, toglobal(t, chain(MYPROC)), arg);
            CHECK(old == m->chain, "atomic_call at process %d returned %ld, want %ld", t, old, m->chain);
            m->chain = (long)((unsigned long)m->chain * 3u + (unsigned long)arg);
            n_atomic++;
        } else if (kind < 84) { /* cswap: succeeds or (expected one off) fails */
            const int ok = (r >> 30) & 1;
            const long desired = (long)rnd();
            const long old = atomic_cswap_long(toglobal(t, swp(MYPROC)), ok ? m->swp : m->swp + 1, desired);
            CHECK(old == m->swp, "atomic_cswap_long at process %d returned %ld, want %ld", t, old, m->swp);
            if (ok) m->swp = desired;
            n_atomic++;
        } else if (kind < 88) { /* fetch-add on the cell everybody adds to */
            atomic_fetch_add_long(toglobal(t, shared_cell()), 1 + (long)(r >> 50) % 5);
            m->shared_added += 1 + (long)(r >> 50) % 5;
            n_atomic++;
        } else if (kind < 96) { /* bulk */
            const size_t n = 1 + (size_t)(rnd() % BULK);
            const size_t o = (size_t)(rnd() % (BULK - n + 1));
            const unsigned how = (unsigned)(rnd() % 6);
            const int global = how & 1; /* source / destination in global memory */
            char *src = global ? gsrc : msrc;
            if (how < 2) { /* bulk_put */
                if (((global && src_busy) || m->bulk_dirty) && do_sync()) return 1;
                for (size_t b = 0; b < n; b++) src[b] = (char)rnd();
                bulk_put(toglobal(t, bulk(MYPROC) + o), src, n);
                memcpy(m->bulk + o, src, n);
                m->bulk_dirty = 1;
                src_busy |= global;
            } else if (how < 4) { /* bulk_get or bulk_read, compared at once */
                if (m->bulk_dirty && do_sync()) return 1;
                char *dst = global ? gdst : mdst;
                memset(dst, 0x5a, n);
                if (how == 2) {
                    bulk_get(dst, toglobal(t, bulk(MYPROC) + o), n);
                    if (do_sync()) return 1;
                } else {
                    bulk_read(dst, toglobal(t, bulk(MYPROC) + o), n);
                }
                CHECK(!memcmp(dst, m->bulk + o, n), "%s of %zu bytes at offset %zu from process %d: wrong data",
                      how == 2 ? "bulk_get" : "bulk_read", n, o, t);
            } else { /* bulk_store into fresh store cells: mostly small, a quarter large */
                const size_t k = (rnd() % 4 ? n % 512 : n) / sizeof(int) + 1;
                if (m->nst + (long)k > STCAP) continue;
                if (global && src_busy && do_sync()) return 1;
                int *s = (int *)src;
                const size_t kk = k * sizeof(int) <= BULK ? k : BULK / sizeof(int);
                for (size_t b = 0; b < kk; b++) s[b] = store_value(MYPROC, t, m->nst + (long)b);
                bulk_store(toglobal(t, &stcell(MYPROC)[m->nst]), s, kk * sizeof(int));
                m->nst += (long)kk;
                src_busy |= global;
                n_store++;
            }
            n_bulk++;
        } else { /* sync now and then */
            if (do_sync()) return 1;
        }
    }
    if (do_sync()) return 1;
    const long n_burst = run_bursts(bursts);
    if (n_burst < 0) return 1;
    clock_gettime(CLOCK_MONOTONIC, &t1);

    /* Tell every owner how many store cells this process used there and what it added to
     * its shared cell; then every store must have landed. */
    for (size_t t = 0; t < P_; t++) {
        put_long(toglobal((int)t, nstores(MYPROC)), M[t].nst);
        put_long(toglobal((int)t, shared_expect(MYPROC)), M[t].shared_added);
        put_long(toglobal((int)t, bnstores(MYPROC)), M[t].bnst);
    }
    sync();
    all_store_sync();
    long total_added = 0;
    for (size_t w = 0; w < P_; w++) {
        const long n = *nstores((int)w);
        total_added += *shared_expect((int)w);
        for (long k = 0; k < n; k++)
            CHECK(stcell((int)w)[k] == store_value((int)w, MYPROC, k), "store cell %ld from process %zu: %#x, want %#x",
                  k, w, stcell((int)w)[k], store_value((int)w, MYPROC, k));
        for (size_t k = (size_t)n; k < STCAP; k++)
            CHECK(stcell((int)w)[k] == 0, "store cell %zu from process %zu written, but only %ld were stored", k, w, n);
    }
    for (size_t w = 0; w < P_; w++) {
        const long n = *bnstores((int)w);
        for (long k = 0; k < n; k++)
            CHECK(bslot((int)w)[k] == bstore_value((int)w, MYPROC, k), "burst store slot %ld (store_%s) from process %zu: %#llx, want %#llx",
                  k, tname[k % 7], w, (unsigned long long)bslot((int)w)[k], (unsigned long long)bstore_value((int)w, MYPROC, k));
        for (size_t k = (size_t)n; k < BSTCAP; k++)
            CHECK(bslot((int)w)[k] == 0, "burst store slot %zu from process %zu written, but only %ld were stored", k, w, n);
    }
    CHECK(*shared_cell() == total_added, "the shared counter is %ld, want %ld (an add lost or repeated)", *shared_cell(),
          total_added);
    /* Read back everything this process wrote anywhere. */
    for (size_t t = 0; t < P_; t++) {
        long back[CELLS];
        bulk_read(back, toglobal((int)t, cell(MYPROC)), sizeof back);
        for (int i = 0; i < CELLS; i++)
            CHECK(back[i] == M[t].cell[i], "cell %d at process %zu: %ld, want %ld", i, t, back[i], M[t].cell[i]);
        CHECK(read_long(toglobal((int)t, ctr(MYPROC))) == M[t].ctr, "counter at process %zu", t);
        CHECK(read_long(toglobal((int)t, chain(MYPROC))) == M[t].chain, "atomic_call cell at process %zu", t);
        CHECK(read_long(toglobal((int)t, swp(MYPROC))) == M[t].swp, "cswap cell at process %zu", t);
        uint64_t bback[BCELLS];
        bulk_read(bback, toglobal((int)t, bcell(MYPROC)), sizeof bback);
        for (int c = 0; c < BCELLS; c++)
            CHECK(bback[c] == M[t].bcell[c], "burst cell %d at process %zu: %#llx, want %#llx", c, t,
                  (unsigned long long)bback[c], (unsigned long long)M[t].bcell[c]);
        bulk_read(mdst, toglobal((int)t, bulk(MYPROC)), BULK);
        CHECK(!memcmp(mdst, M[t].bulk, BULK), "bulk area at process %zu differs", t);
    }
    barrier();
    free(msrc);
    free(mdst);
    free(M);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("sc_via_mix: process %d: ok: %ld operations on %s (%ld puts/writes, %ld gets/reads, %ld stores, %ld atomics, "
           "%ld bulk), then %ld in %ld bursts, in %.2f s\n",
           MYPROC, ops, splitc_backend(), n_put, n_get, n_store, n_atomic, n_bulk, n_burst, bursts, s);
    return 0;
}
