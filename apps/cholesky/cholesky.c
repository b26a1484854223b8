/* cholesky -- blocked Cholesky factorisation A = L L^T of a dense symmetric positive
 * definite matrix (the paper's 1536x1536 in 16x16 blocks: 96x96 blocks).
 *
 * The lower triangle's blocks are spread over a grid of pr x pc processes, block (I,J) on
 * process (I mod pr, J mod pc) (2D block-cyclic). Right-looking, one block column at a
 * time; step k:
 *   1. the owner of (k,k) factors it (L_kk);
 *   2. the owners of the blocks below it read L_kk (bulk_read) and solve L_ik = A_ik L_kk^-T;
 *   3. every process gets the panel blocks its trailing blocks need (split-phase bulk_get,
 *      one sync) and updates A_ij -= L_ik L_jk^T for k < j <= i.
 * a barrier between the phases. Blocks live in global memory (all_malloc), at offsets
 * every process can compute for any owner.
 *
 * A is generated (a_ij in [-1, 1] symmetric, n on the diagonal: diagonally dominant, so
 * positive definite). Checked: process 0 gathers L and computes ||A - L L^T||_F / ||A||_F,
 * which must be below 1e-12.
 *
 *   softvia-run -n P cholesky [--size paper|small|medium] [--t1 S] [--reps N]
 *     paper 1536 (16x16 blocks), medium 768, small 192 */
#include <stdint.h>

#include "../common/app.h"

static const char *const sizes[] = {"paper", "small", "medium", NULL};
enum { B = 16 }; /* block size */

static int n, nb, pr, pc, myr, myc;
static double *store;   /* this process's blocks, all_malloc'd (the largest share's size) */
static long *offset;    /* nb x nb: block (I,J)'s index in its owner's store, or -1 */

static int owner(int I, int J) { return (I % pr) * pc + (J % pc); }
static double *mine(int I, int J) { return store + offset[(long)I * nb + J] * B * B; }
static gptr_t where(int I, int J) { return toglobal(owner(I, J), store + offset[(long)I * nb + J] * B * B); }

static double a_entry(long i, long j) { /* symmetric, in [-1, 1]; n on the diagonal */
    if (i == j) return (double)n;
    if (i < j) {
        const long t = i;
        i = j;
        j = t;
    }
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull ^ (uint64_t)j * 0xC2B2AE3D27D4EB4Full;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return (double)(x >> 11) * 0x1p-52 - 1.0;
}

static void layout(void) {
    offset = malloc(sizeof(long) * (size_t)nb * (size_t)nb);
    long *count = calloc((size_t)PROCS, sizeof(long));
    for (int I = 0; I < nb; I++)
        for (int J = 0; J < nb; J++) offset[(long)I * nb + J] = J <= I ? count[owner(I, J)]++ : -1;
    long most = 0;
    for (int p = 0; p < PROCS; p++) most = count[p] > most ? count[p] : most;
    free(count);
    store = all_malloc(sizeof(double) * B * B * (size_t)(most ? most : 1));
    if (!store) app_die("cholesky", "the symmetric heap cannot hold the matrix (SPLITC_HEAP_SIZE)");
}

static void fill(void) {
    for (int I = 0; I < nb; I++)
        for (int J = 0; J <= I; J++) {
            if (owner(I, J) != MYPROC) continue;
            double *blk = mine(I, J);
            for (int r = 0; r < B; r++)
                for (int c = 0; c < B; c++) blk[r * B + c] = a_entry((long)I * B + r, (long)J * B + c);
        }
}

/* ---- block kernels (row-major B x B) ------------------------------------------------------ */
static int potrf(double *a) { /* lower Cholesky in place; 0 if not positive definite */
    for (int j = 0; j < B; j++) {
        double d = a[j * B + j];
        for (int k = 0; k < j; k++) d -= a[j * B + k] * a[j * B + k];
        if (!(d > 0)) return 0;
        d = sqrt(d);
        a[j * B + j] = d;
        for (int i = j + 1; i < B; i++) {
            double s = a[i * B + j];
            for (int k = 0; k < j; k++) s -= a[i * B + k] * a[j * B + k];
            a[i * B + j] = s / d;
        }
        for (int c = j + 1; c < B; c++) a[j * B + c] = 0; /* the upper part is not L */
    }
    return 1;
}
static void trsm(double *x, const double *l) { /* x <- x L^-T */
    for (int r = 0; r < B; r++)
        for (int c = 0; c < B; c++) {
            double s = x[r * B + c];
            for (int k = 0; k < c; k++) s -= x[r * B + k] * l[c * B + k];
            x[r * B + c] = s / l[c * B + c];
        }
}
static void gemm_nt(double *c, const double *a, const double *b) { /* c -= a b^T */
    for (int r = 0; r < B; r++)
        for (int q = 0; q < B; q++) {
            double s = 0;
            for (int k = 0; k < B; k++) s += a[r * B + k] * b[q * B + k];
            c[r * B + q] -= s;
        }
}

static int factor(void) {
    double diag[B * B];
    double *panel = malloc(sizeof(double) * B * B * (size_t)nb); /* L_ik of this step, by i */
    int ok = 1;
    for (int k = 0; k < nb; k++) {
        if (owner(k, k) == MYPROC && !potrf(mine(k, k))) ok = 0;
        barrier();
        int need_diag = 0;
        for (int i = k + 1; i < nb; i++) need_diag |= owner(i, k) == MYPROC;
        if (need_diag) {
            if (owner(k, k) == MYPROC)
                memcpy(diag, mine(k, k), sizeof diag);
            else
                bulk_read(diag, where(k, k), sizeof diag);
            for (int i = k + 1; i < nb; i++)
                if (owner(i, k) == MYPROC) trsm(mine(i, k), diag);
        }
        barrier();
        /* the panel blocks my trailing blocks (i, j), k < j <= i, read: rows i of my grid row
         * and rows j of my grid column */
        for (int i = k + 1; i < nb; i++) {
            const int row_needed = i % pr == myr, col_needed = i % pc == myc;
            if (!row_needed && !col_needed) continue;
            if (owner(i, k) == MYPROC)
                memcpy(panel + (long)i * B * B, mine(i, k), sizeof(double) * B * B);
            else
                bulk_get(panel + (long)i * B * B, where(i, k), sizeof(double) * B * B);
        }
        sync();
        for (int i = k + 1; i < nb; i++) {
            if (i % pr != myr) continue;
            for (int j = k + 1; j <= i; j++)
                if (j % pc == myc) gemm_nt(mine(i, j), panel + (long)i * B * B, panel + (long)j * B * B);
        }
        barrier();
    }
    free(panel);
    return all_reduce_to_all_min_int(ok);
}

/* Process 0: ||A - L L^T||_F / ||A||_F over the lower triangle. */
static int check(void) {
    int ok = 1;
    if (MYPROC == 0) {
        double *L = calloc((size_t)n * (size_t)n, sizeof(double));
        double blk[B * B];
        for (int I = 0; I < nb; I++)
            for (int J = 0; J <= I; J++) {
                bulk_read(blk, where(I, J), sizeof blk);
                for (int r = 0; r < B; r++)
                    for (int c = 0; c < B; c++) L[((long)I * B + r) * n + (long)J * B + c] = blk[r * B + c];
            }
        double num = 0, den = 0;
        for (long i = 0; i < n; i++)
            for (long j = 0; j <= i; j++) {
                double s = 0;
                const double *li = L + i * n, *lj = L + j * n;
                for (long k = 0; k <= j; k++) s += li[k] * lj[k];
                const double a = a_entry(i, j), d = a - s;
                num += d * d;
                den += a * a;
            }
        const double rel = sqrt(num / den);
        printf("cholesky: ||A - L L^T||_F / ||A||_F = %.3e (at most 1e-12)\n", rel);
        ok = rel < 1e-12;
        free(L);
    }
    return all_reduce_to_all_min_int(ok);
}

int splitc_main(int argc, char **argv) {
    app_opts o = app_parse("cholesky", argc, argv, sizes, NULL);
    n = !strcmp(o.size, "small") ? 192 : !strcmp(o.size, "medium") ? 768 : 1536;
    nb = n / B;
    pr = 1;
    for (int d = 1; d * d <= PROCS; d++)
        if (PROCS % d == 0) pr = d;
    pc = PROCS / pr;
    myr = MYPROC / pc;
    myc = MYPROC % pc;
    layout();
    double best = 0;
    int ok = 1;
    for (int r = 0; r < o.reps; r++) {
        fill();
        barrier();
        const double t0 = app_now();
        ok = factor();
        const double t = all_reduce_to_all_max_double(app_now() - t0);
        if (r == 0 || t < best) best = t;
    }
    if (MYPROC == 0)
        printf("cholesky: n %d in %dx%d blocks of %dx%d, process grid %dx%d\n", n, nb, nb, B, B, pr, pc);
    if (!ok && MYPROC == 0) fprintf(stderr, "cholesky: a diagonal block is not positive definite\n");
    ok = ok && check();
    all_free(store);
    free(offset);
    return app_report(&o, best, (double)n * n * n / 3.0 / best / 1e6, "Mflop/s", ok);
}
