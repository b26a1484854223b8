/* em3d -- electromagnetic wave propagation on a bipartite graph (the paper's EM3D, after
 * the Split-C EM3D of Culler et al.): E nodes and H nodes, each depending on some nodes of
 * the other kind through weighted edges; each step updates every E node from its H
 * neighbours, then every H node from its E neighbours:
 *     e.value -= sum_k w_k * h_k.value        h.value -= sum_k w_k * e_k.value
 *
 * Scaled as in the paper: a fixed number of nodes of each kind per process, each edge
 * remote (to a node of another process, chosen at random) with probability 30%. The
 * graph is a function of the node numbers and the process count only, so any run can be
 * recomputed on one process.
 *
 * Split-C's store version: each process keeps ghost copies of the remote nodes its own
 * nodes read; after each half-step the owners push the new values into their readers'
 * ghosts with bulk_store, one contiguous block per pair of processes, and all_store_sync
 * says they have landed. The nodes' own arrays and the ghosts are global memory
 * (all_malloc); an update reads through pointers set up once (local value or ghost).
 *
 * Checked: process 0 recomputes the whole graph on its own after the timed run and
 * compares every process's values with it, bit for bit (each node sums its edges in the
 * same order either way).
 *
 *   softvia-run -n P em3d [--size paper|small] [--t1 S] [--reps N]
 *     paper: 500 E and 500 H nodes per process, degree 10, 30% remote, 100 steps
 *     small: 60 and 60, degree 6, 30% remote, 20 steps */
#include <stdint.h>

#include "../common/app.h"

static const char *const sizes[] = {"paper", "small", NULL};

typedef struct {
    int n;       /* nodes of each kind per process */
    int degree;  /* edges per node */
    int steps;
    double remote;
} params;

/* ---- the graph, a pure function of (kind, global node, edge, P) -------------------------- */
static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
static double unit(int kind, long node, int edge, int what) {
    const uint64_t key = ((uint64_t)kind << 62) ^ ((uint64_t)node << 24) ^ ((uint64_t)edge << 4) ^ (uint64_t)what;
    return (double)(mix(key) >> 11) * 0x1p-53;
}
/* Edge k of node g (global number) of kind: the neighbour's global number (of the other
 * kind) and the weight. */
static long neighbour(const params *pa, int P, int kind, long g, int k, double *w) {
    const int owner = (int)(g / pa->n);
    int q = owner;
    if (P > 1 && unit(kind, g, k, 0) < pa->remote) q = (owner + 1 + (int)(unit(kind, g, k, 1) * (P - 1))) % P;
    const long local = (long)(unit(kind, g, k, 2) * pa->n);
    *w = (unit(kind, g, k, 3) - 0.5) / pa->degree;
    return (long)q * pa->n + local;
}
static double initial(int kind, long g) { return unit(kind, g, 0x7fff, 4); }

/* ---- one process's share --------------------------------------------------------------- */
typedef struct {
    double *val[2];       /* E and H values of this process's nodes: all_malloc'd */
    double *ghost[2];     /* ghost copies of remote E and H values: all_malloc'd (the largest share) */
    const double **src[2]; /* per node and edge of kind k: where the neighbour's value is */
    double *w[2];         /* the weights, in the same order */
    /* sending kind k's values: per reader process p, my node indices in the order of p's
     * ghost block for me, and where that block starts in p's ghost array */
    int *send_idx[2];
    long *send_from[2], *send_len[2], *send_at[2];
    double *sendbuf[2];
} share;

/* For reader process p, the ghost blocks it keeps of kind o (values of kind o that its
 * nodes of kind 1-o read from other processes): block of source q holds q's nodes in the
 * order p first reads them. Calls found(q, local node, slot in p's ghost array) for each. */
static void ghost_layout(const params *pa, int P, int p, int o, void (*found)(void *, int, long, long), void *ctx) {
    const int k_reader = 1 - o;
    long *first = malloc(sizeof(long) * (size_t)pa->n * (size_t)P); /* slot of each global node, or -1 */
    long **order = calloc((size_t)P, sizeof(long *));
    long *count = calloc((size_t)P, sizeof(long));
    for (long i = 0; i < (long)pa->n * P; i++) first[i] = -1;
    for (int q = 0; q < P; q++) order[q] = malloc(sizeof(long) * (size_t)pa->n * (size_t)pa->degree);
    for (long i = 0; i < pa->n; i++)
        for (int k = 0; k < pa->degree; k++) {
            double w;
            const long g = neighbour(pa, P, k_reader, (long)p * pa->n + i, k, &w);
            const int q = (int)(g / pa->n);
            if (q == p || first[g] >= 0) continue;
            first[g] = 0;
            order[q][count[q]++] = g;
        }
    long slot = 0;
    for (int q = 0; q < P; q++) {
        for (long j = 0; j < count[q]; j++) found(ctx, q, order[q][j] - (long)q * pa->n, slot++);
        free(order[q]);
    }
    free(order);
    free(count);
    free(first);
}

typedef struct {
    long *slot_of; /* global node -> slot, for this process's own layout */
    const params *pa;
    long total;
} own_layout;
static void note_own(void *c, int q, long local, long slot) {
    own_layout *l = c;
    l->slot_of[(long)q * l->pa->n + local] = slot;
    l->total = slot + 1;
}

typedef struct {
    int me;
    long at, len, first_slot;
    int *idx;
} reader_block;
static void note_reader(void *c, int q, long local, long slot) {
    reader_block *b = c;
    if (q != b->me) return;
    if (b->len == 0) b->first_slot = slot;
    b->idx[b->len++] = (int)local;
}

static long setup(const params *pa, share *s) {
    const int P = PROCS, me = MYPROC;
    long ghosts[2];
    long *slot_of[2];
    for (int o = 0; o < 2; o++) {
        own_layout l = {malloc(sizeof(long) * (size_t)pa->n * (size_t)P), pa, 0};
        ghost_layout(pa, P, me, o, note_own, &l);
        slot_of[o] = l.slot_of;
        ghosts[o] = l.total;
    }
    long most = all_reduce_to_all_max_long(ghosts[0] > ghosts[1] ? ghosts[0] : ghosts[1]);
    for (int k = 0; k < 2; k++) {
        s->val[k] = all_malloc(sizeof(double) * (size_t)pa->n);
        s->ghost[k] = all_malloc(sizeof(double) * (size_t)(most ? most : 1));
        if (!s->val[k] || !s->ghost[k]) app_die("em3d", "the symmetric heap cannot hold the graph (SPLITC_HEAP_SIZE)");
        for (long i = 0; i < pa->n; i++) s->val[k][i] = initial(k, (long)me * pa->n + i);
    }
    /* where each edge of my nodes reads from */
    for (int k = 0; k < 2; k++) {
        const int o = 1 - k;
        s->src[k] = malloc(sizeof(double *) * (size_t)pa->n * (size_t)pa->degree);
        s->w[k] = malloc(sizeof(double) * (size_t)pa->n * (size_t)pa->degree);
        for (long i = 0; i < pa->n; i++)
            for (int d = 0; d < pa->degree; d++) {
                double w;
                const long g = neighbour(pa, P, k, (long)me * pa->n + i, d, &w);
                const int q = (int)(g / pa->n);
                s->w[k][i * pa->degree + d] = w;
                s->src[k][i * pa->degree + d] = q == me ? &s->val[o][g - (long)me * pa->n] : &s->ghost[o][slot_of[o][g]];
            }
    }
    for (int o = 0; o < 2; o++) free(slot_of[o]);
    /* what I send to each reader: the blocks its layout keeps of me */
    long edges_out = 0;
    for (int o = 0; o < 2; o++) {
        s->send_idx[o] = malloc(sizeof(int) * (size_t)pa->n * (size_t)pa->degree * (size_t)P);
        s->send_from[o] = calloc((size_t)P, sizeof(long));
        s->send_len[o] = calloc((size_t)P, sizeof(long));
        s->send_at[o] = calloc((size_t)P, sizeof(long));
        long used = 0;
        for (int p = 0; p < P; p++) {
            if (p == me) continue;
            reader_block b = {me, 0, 0, 0, s->send_idx[o] + used};
            ghost_layout(pa, P, p, o, note_reader, &b);
            s->send_from[o][p] = used;
            s->send_len[o][p] = b.len;
            s->send_at[o][p] = b.first_slot;
            used += b.len;
        }
        s->sendbuf[o] = malloc(sizeof(double) * (size_t)(used ? used : 1));
        edges_out += used;
    }
    return edges_out;
}

/* The owners push kind o's values into their readers' ghosts; all landed on return. */
static void push(const share *s, int o) {
    for (int p = 0; p < PROCS; p++) {
        const long len = s->send_len[o][p];
        if (p == MYPROC || len == 0) continue;
        double *buf = s->sendbuf[o] + s->send_from[o][p];
        const int *idx = s->send_idx[o] + s->send_from[o][p];
        for (long j = 0; j < len; j++) buf[j] = s->val[o][idx[j]];
        bulk_store(toglobal(p, s->ghost[o] + s->send_at[o][p]), buf, sizeof(double) * (size_t)len);
    }
    all_store_sync();
}

static void update(const params *pa, share *s, int k) {
    const int D = pa->degree;
    for (long i = 0; i < pa->n; i++) {
        double acc = 0;
        for (int d = 0; d < D; d++) acc += s->w[k][i * D + d] * *s->src[k][i * D + d];
        s->val[k][i] -= acc;
    }
}

/* Process 0: the whole graph on its own, then every process's values compared. */
static int check(const params *pa, const share *s) {
    const int P = PROCS;
    const long N = (long)pa->n * P;
    int ok = 1;
    if (MYPROC == 0) {
        double *v[2];
        long *nb[2];
        double *w[2];
        for (int k = 0; k < 2; k++) {
            v[k] = malloc(sizeof(double) * (size_t)N);
            nb[k] = malloc(sizeof(long) * (size_t)N * (size_t)pa->degree);
            w[k] = malloc(sizeof(double) * (size_t)N * (size_t)pa->degree);
            for (long g = 0; g < N; g++) {
                v[k][g] = initial(k, g);
                for (int d = 0; d < pa->degree; d++) nb[k][g * pa->degree + d] = neighbour(pa, P, k, g, d, &w[k][g * pa->degree + d]);
            }
        }
        for (int t = 0; t < pa->steps; t++)
            for (int k = 0; k < 2; k++)
                for (long g = 0; g < N; g++) {
                    double acc = 0;
                    for (int d = 0; d < pa->degree; d++) acc += w[k][g * pa->degree + d] * v[1 - k][nb[k][g * pa->degree + d]];
                    v[k][g] -= acc;
                }
        double *got = malloc(sizeof(double) * (size_t)pa->n);
        for (int p = 0; p < P && ok; p++)
            for (int k = 0; k < 2 && ok; k++) {
                bulk_read(got, toglobal(p, s->val[k]), sizeof(double) * (size_t)pa->n);
                for (long i = 0; i < pa->n; i++)
                    if (memcmp(&got[i], &v[k][(long)p * pa->n + i], sizeof(double)) != 0) {
                        fprintf(stderr, "em3d: %s node %ld of process %d: %.17g, the one-process run has %.17g\n",
                                k ? "H" : "E", i, p, got[i], v[k][(long)p * pa->n + i]);
                        ok = 0;
                        break;
                    }
            }
        free(got);
        for (int k = 0; k < 2; k++) free(v[k]), free(nb[k]), free(w[k]);
    }
    return all_reduce_to_all_min_int(ok);
}

int splitc_main(int argc, char **argv) {
    app_opts o = app_parse("em3d", argc, argv, sizes, NULL);
    params pa = {500, 10, 100, 0.3};
    if (!strcmp(o.size, "small")) pa = (params){60, 6, 20, 0.3};
    share s;
    memset(&s, 0, sizeof s);
    const long edges_out = setup(&pa, &s);
    double best = 0;
    for (int r = 0; r < o.reps; r++) {
        if (r) { /* the same start again */
            for (int k = 0; k < 2; k++)
                for (long i = 0; i < pa.n; i++) s.val[k][i] = initial(k, (long)MYPROC * pa.n + i);
        }
        push(&s, 1); /* the ghosts hold the initial H values */
        barrier();
        const double t0 = app_now();
        for (int t = 0; t < pa.steps; t++) {
            update(&pa, &s, 0);
            push(&s, 0);
            update(&pa, &s, 1);
            push(&s, 1);
        }
        const double t = all_reduce_to_all_max_double(app_now() - t0);
        if (r == 0 || t < best) best = t;
    }
    const long total_edges = 2L * pa.n * pa.degree * PROCS;
    const double mflops = 2.0 * (double)total_edges * pa.steps / best / 1e6;
    const long remote = all_reduce_to_all_add_long(edges_out);
    if (MYPROC == 0)
        printf("em3d: %d E and %d H nodes per process, degree %d, %d steps; %ld ghost values pushed per half-step pair\n",
               pa.n, pa.n, pa.degree, pa.steps, remote);
    const int ok = check(&pa, &s);
    for (int k = 0; k < 2; k++) {
        free(s.src[k]), free(s.w[k]), free(s.send_idx[k]), free(s.send_from[k]), free(s.send_len[k]);
        free(s.send_at[k]), free(s.sendbuf[k]);
    }
    for (int k = 1; k >= 0; k--) all_free(s.ghost[k]), all_free(s.val[k]);
    return app_report(&o, best, mflops, "Mflop/s", ok);
}
