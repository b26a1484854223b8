/* cg -- conjugate gradient: the NAS Parallel Benchmarks' CG kernel (an inverse power
 * method: each outer iteration solves A z = x with 25 CG iterations and estimates the
 * smallest eigenvalue, zeta = shift + 1 / (x . z)), on NPB's random sparse symmetric
 * matrix, checked against NPB's published zeta for classes S, W and A to 1e-10; and the
 * paper's 4096x4096 system from the same generator, checked against the same computation
 * done by process 0 alone.
 *
 * Rows are spread over the processes in blocks; every process generates the whole
 * matrix (NPB's makea: the same numbers from the same generator) and keeps its rows.
 * The vectors are spread the same way; before each product A p every process stores its
 * block of p into every other's copy of the whole vector (bulk_store, all_store_sync:
 * Split-C's stores, as the paper's CG uses them); dot products are all_reduce sums.
 *
 *   softvia-run -n P cg [--size S|small|W|A|paper] [--t1 S] [--reps N]
 *     paper: 4096 rows, 7 + 1 nonzeros a row vector, 15 iterations; small (the tests'):
 *     500 rows, 5 + 1, 3 iterations; both checked against process 0's own run */
#include <stdint.h>

#include "../common/app.h"

static const char *const sizes[] = {"paper", "small", "S", "W", "A", NULL};

typedef struct {
    int na, nonzer, niter;
    double shift, zeta_ref; /* zeta_ref 0: checked against process 0's own run */
} klass;
static const double rcond = 0.1;
static const double amult = 1220703125.0;

/* ---- NPB's matrix: makea (the row vectors), then the sum of their outer products --------- */
typedef struct {
    int n;
    int *rowstr; /* n + 1 */
    int *colidx;
    double *a;
} csr;

static double tran; /* the generator's state, shared by makea and sprnvc as in NPB */

/* nz distinct random positions in 1..n (from [0, nn1) by rejection) with random values. */
static void sprnvc(int n, int nz, int nn1, double *v, int *iv) {
    int nzv = 0;
    while (nzv < nz) {
        const double vecelt = npb_randlc(&tran, amult);
        const double vecloc = npb_randlc(&tran, amult);
        const int i = (int)(nn1 * vecloc) + 1;
        if (i > n) continue;
        int seen = 0;
        for (int k = 0; k < nzv && !seen; k++) seen = iv[k] == i;
        if (seen) continue;
        v[nzv] = vecelt;
        iv[nzv] = i;
        nzv++;
    }
}
/* Sets position i to val, adding it if absent. */
static void vecset(double *v, int *iv, int *nzv, int i, double val) {
    for (int k = 0; k < *nzv; k++)
        if (iv[k] == i) {
            v[k] = val;
            return;
        }
    v[*nzv] = val;
    iv[*nzv] = i;
    (*nzv)++;
}

typedef struct {
    int col;
    long seq; /* generation order: duplicates are summed in it */
    double v;
} entry;
static int by_col(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->col != y->col) return x->col < y->col ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A = sum_i size_i * v_i v_i^T + (rcond - shift) I, size_i = rcond^(i/n); rows r0..r1. */
static csr makea(const klass *k, int r0, int r1) {
    const int n = k->na, m = k->nonzer + 1;
    int nn1 = 1;
    while (nn1 < n) nn1 *= 2;
    int *arow = malloc(sizeof(int) * (size_t)n);
    int *acol = malloc(sizeof(int) * (size_t)n * (size_t)m);
    double *aelt = malloc(sizeof(double) * (size_t)n * (size_t)m);
    double vc[64];
    int ivc[64];
    for (int i = 0; i < n; i++) {
        int nzv = k->nonzer;
        sprnvc(n, nzv, nn1, vc, ivc);
        vecset(vc, ivc, &nzv, i + 1, 0.5);
        arow[i] = nzv;
        for (int e = 0; e < nzv; e++) {
            acol[(long)i * m + e] = ivc[e] - 1;
            aelt[(long)i * m + e] = vc[e];
        }
    }
    /* the triples of rows r0..r1, in NPB's order (row vector i, then its entries) */
    long *count = calloc((size_t)(r1 - r0 + 1), sizeof(long));
    for (int i = 0; i < n; i++)
        for (int e = 0; e < arow[i]; e++) {
            const int j = acol[(long)i * m + e];
            if (j >= r0 && j < r1) count[j - r0 + 1] += arow[i];
        }
    for (int j = 1; j <= r1 - r0; j++) count[j] += count[j - 1];
    entry *t = malloc(sizeof(entry) * (size_t)(count[r1 - r0] ? count[r1 - r0] : 1));
    long *fill = calloc((size_t)(r1 - r0), sizeof(long));
    const double ratio = pow(rcond, 1.0 / n);
    double size = 1.0;
    long seq = 0;
    for (int i = 0; i < n; i++) {
        for (int e = 0; e < arow[i]; e++) {
            const int j = acol[(long)i * m + e];
            const double scale = size * aelt[(long)i * m + e];
            for (int f = 0; f < arow[i]; f++, seq++) {
                if (j < r0 || j >= r1) continue;
                const int jcol = acol[(long)i * m + f];
                double va = aelt[(long)i * m + f] * scale;
                if (jcol == j && j == i) va = va + rcond - k->shift;
                t[count[j - r0] + fill[j - r0]++] = (entry){jcol, seq, va};
            }
        }
        size *= ratio;
    }
    csr A = {r1 - r0, malloc(sizeof(int) * (size_t)(r1 - r0 + 1)), NULL, NULL};
    long nnz = 0;
    for (int j = 0; j < r1 - r0; j++) { /* sort each row by column; sum duplicates in order */
        entry *row = t + count[j];
        qsort(row, (size_t)fill[j], sizeof(entry), by_col);
        long w = 0;
        for (long e = 0; e < fill[j]; e++) {
            if (w > 0 && row[w - 1].col == row[e].col)
                row[w - 1].v += row[e].v;
            else
                row[w++] = row[e];
        }
        fill[j] = w;
        nnz += w;
    }
    A.colidx = malloc(sizeof(int) * (size_t)(nnz ? nnz : 1));
    A.a = malloc(sizeof(double) * (size_t)(nnz ? nnz : 1));
    long at = 0;
    for (int j = 0; j < r1 - r0; j++) {
        A.rowstr[j] = (int)at;
        for (long e = 0; e < fill[j]; e++, at++) {
            A.colidx[at] = t[count[j] + e].col;
            A.a[at] = t[count[j] + e].v;
        }
    }
    A.rowstr[r1 - r0] = (int)at;
    free(t);
    free(fill);
    free(count);
    free(arow);
    free(acol);
    free(aelt);
    return A;
}

static void free_csr(csr *A) {
    free(A->rowstr);
    free(A->colidx);
    free(A->a);
}

/* ---- the solver, on rows r0..r1 of P processes (P = 1: process 0's own reference run) ---- */
typedef struct {
    int P, me, r0, r1, n;
    const csr *A;
    double *pfull;  /* the whole of p: all_malloc'd when P > 1 */
} part;

static int row_lo(int n, int P, int p) { return (int)((long)n * p / P); }

static double dot(const part *w, const double *a, const double *b) {
    double s = 0;
    for (int i = 0; i < w->r1 - w->r0; i++) s += a[i] * b[i];
    return w->P > 1 ? all_reduce_to_all_add_double(s) : s;
}

/* q = A v: v's blocks go to every process's copy of the whole vector first. */
static void matvec(const part *w, const double *v, double *q) {
    const int mine = w->r1 - w->r0;
    double *full = w->pfull;
    if (w->P > 1) {
        memcpy(full + w->r0, v, sizeof(double) * (size_t)mine);
        for (int p = 0; p < w->P; p++)
            if (p != w->me && mine) bulk_store(toglobal(p, full + w->r0), v, sizeof(double) * (size_t)mine);
        all_store_sync();
    } else {
        full = (double *)v;
    }
    for (int i = 0; i < mine; i++) {
        double s = 0;
        for (int k = w->A->rowstr[i]; k < w->A->rowstr[i + 1]; k++) s += w->A->a[k] * full[w->A->colidx[k]];
        q[i] = s;
    }
}

static double conj_grad(const part *w, const double *x, double *z, double *p, double *q, double *r) {
    const int mine = w->r1 - w->r0;
    for (int i = 0; i < mine; i++) {
        q[i] = 0;
        z[i] = 0;
        r[i] = x[i];
        p[i] = r[i];
    }
    double rho = dot(w, r, r);
    for (int cgit = 0; cgit < 25; cgit++) {
        matvec(w, p, q);
        const double alpha = rho / dot(w, p, q);
        const double rho0 = rho;
        for (int i = 0; i < mine; i++) {
            z[i] += alpha * p[i];
            r[i] -= alpha * q[i];
        }
        rho = dot(w, r, r);
        const double beta = rho / rho0;
        for (int i = 0; i < mine; i++) p[i] = r[i] + beta * p[i];
    }
    matvec(w, z, r); /* the residual ||x - A z|| */
    double s = 0;
    for (int i = 0; i < mine; i++) s += (x[i] - r[i]) * (x[i] - r[i]);
    return sqrt(w->P > 1 ? all_reduce_to_all_add_double(s) : s);
}

/* NPB's main loop: one untimed outer iteration, then niter timed; returns zeta. */
static double solve(const klass *k, const part *w, double *seconds, double *rnorm) {
    const int mine = w->r1 - w->r0;
    double *x = malloc(sizeof(double) * (size_t)(mine + 1)), *z = malloc(sizeof(double) * (size_t)(mine + 1));
    double *p = malloc(sizeof(double) * (size_t)(mine + 1)), *q = malloc(sizeof(double) * (size_t)(mine + 1));
    double *r = malloc(sizeof(double) * (size_t)(mine + 1));
    double zeta = 0;
    for (int warm = 1; warm >= 0; warm--) {
        for (int i = 0; i < mine; i++) x[i] = 1.0;
        zeta = 0;
        if (!warm && w->P > 1) barrier();
        const double t0 = app_now();
        for (int it = 0; it < (warm ? 1 : k->niter); it++) {
            *rnorm = conj_grad(w, x, z, p, q, r);
            const double t1 = dot(w, x, z), t2 = 1.0 / sqrt(dot(w, z, z));
            zeta = k->shift + 1.0 / t1;
            for (int i = 0; i < mine; i++) x[i] = t2 * z[i];
        }
        *seconds = app_now() - t0;
    }
    if (w->P > 1) *seconds = all_reduce_to_all_max_double(*seconds);
    free(x), free(z), free(p), free(q), free(r);
    return zeta;
}

int splitc_main(int argc, char **argv) {
    app_opts o = app_parse("cg", argc, argv, sizes, NULL);
    klass k = {1400, 7, 15, 10.0, 8.5971775078648}; /* S */
    if (!strcmp(o.size, "W")) k = (klass){7000, 8, 15, 12.0, 10.362595087124};
    if (!strcmp(o.size, "A")) k = (klass){14000, 11, 15, 20.0, 17.130235054029};
    if (!strcmp(o.size, "paper")) k = (klass){4096, 7, 15, 10.0, 0};
    if (!strcmp(o.size, "small")) k = (klass){500, 5, 3, 10.0, 0};
    const int P = PROCS, me = MYPROC;
    const int r0 = row_lo(k.na, P, me), r1 = row_lo(k.na, P, me + 1);
    tran = 314159265.0;
    npb_randlc(&tran, amult); /* NPB draws once before makea */
    csr A = makea(&k, r0, r1);
    double *pfull = NULL;
    if (P > 1 && !(pfull = all_malloc(sizeof(double) * (size_t)k.na)))
        app_die("cg", "the symmetric heap cannot hold a vector of %d doubles", k.na);
    const part w = {P, me, r0, r1, k.na, &A, pfull};
    double best = 0, rnorm = 0, zeta = 0;
    for (int r = 0; r < o.reps; r++) {
        double t;
        zeta = solve(&k, &w, &t, &rnorm);
        if (r == 0 || t < best) best = t;
    }
    double ref = k.zeta_ref;
    if (ref == 0) { /* process 0 alone, the whole matrix, then everyone hears the answer */
        double ref0 = 0;
        if (me == 0) {
            tran = 314159265.0;
            npb_randlc(&tran, amult);
            csr whole = makea(&k, 0, k.na);
            const part alone = {1, 0, 0, k.na, k.na, &whole, NULL};
            double t, rn;
            ref0 = solve(&k, &alone, &t, &rn);
            free_csr(&whole);
        }
        ref = all_bcast_double(ref0);
    }
    const double err = fabs(zeta - ref) / ref;
    const int ok = err <= 1e-10;
    if (me == 0)
        printf("cg: na %d, nonzer %d, %d iterations, shift %g: zeta %.13f, %s %.13f, relative error %.2e (at most 1e-10), "
               "residual %.3e\n",
               k.na, k.nonzer, k.niter, k.shift, zeta, k.zeta_ref ? "NPB" : "one process", ref, err, rnorm);
    free_csr(&A);
    if (pfull) all_free(pfull);
    const double mflops = 2.0 * k.niter * k.na *
                          (3.0 + k.nonzer * (k.nonzer + 1.0) + 25.0 * (5.0 + k.nonzer * (k.nonzer + 1.0)) + 3.0) / best / 1e6;
    return app_report(&o, best, mflops, "Mflop/s", ok);
}
