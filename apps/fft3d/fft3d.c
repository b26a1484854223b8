/* fft3d -- the 3D FFT (the paper's 128x128x128 transform) and the NAS Parallel Benchmarks'
 * FT kernel on it (classes S, W, A), checked against NPB's published checksums.
 *
 * Data: nx x ny x nz complex numbers, x fastest. Two layouts:
 *   A (z slabs)  process p holds the planes z in [z0(p), z1(p)), each ny x nx
 *   B (y slabs)  process p holds y in [y0(p), y1(p)), each row nz x nx
 * (block distributions; processes may hold unequal or empty slabs, so any process count
 * works). A forward transform does the x and y transforms of each plane in layout A,
 * transposes to layout B (all-to-all: one bulk_store per pair of processes into the
 * receiver's staging area, all_store_sync, unpacking), then the z transforms; the inverse
 * runs the other way. The 1D transforms are iterative radix-2 (powers of two), forward
 * exp(-2 pi i jk/n), inverse exp(+2 pi i jk/n), neither normalised.
 *
 * NPB FT (classes S, W, A): u = the NPB generator's numbers (seed 314159265, a = 5^13)
 * in layout A; U = FFT(u); each iteration t multiplies U by exp(-4 alpha pi^2 |k|^2)
 * (alpha 1e-6, k the signed frequencies), transforms back and sums 1024 elements (x = j
 * mod nx, y = 3j mod ny, z = 5j mod nz, j = 1..1024) divided by nx ny nz: the checksum,
 * compared with NPB's (|ours - NPB's| / |NPB's| at most 1e-12, NPB's own test).
 * The paper's transform (paper, and small for tests): one forward and one inverse
 * transform of the same data, timed; checked by the round trip (the inverse divided by
 * nx ny nz gives the data back to 1e-12) and by four coefficients of the forward
 * transform computed directly as sums (to 1e-9).
 *
 *   softvia-run -n P fft3d [--size paper|small|S|W|A] [--t1 S] [--reps N] */
#include <complex.h>
#include <stdint.h>

#include "../common/app.h"

static const char *const sizes[] = {"paper", "small", "S", "W", "A", NULL};

typedef double complex cplx;
static int nx, ny, nz, niter;
static long N;
static int P, me;

static int lo_of(int n, int p) { return (int)((long)n * p / P); } /* block distribution */
static int z0(int p) { return lo_of(nz, p); }
static int z1(int p) { return lo_of(nz, p + 1); }
static int y0_(int p) { return lo_of(ny, p); }
static int y1_(int p) { return lo_of(ny, p + 1); }

/* ---- 1D transforms -------------------------------------------------------------------------- */
typedef struct {
    int n, logn;
    cplx *w; /* exp(-2 pi i k / n), k < n/2 */
} plan;
static plan make_plan(int n) {
    plan pl = {n, 0, malloc(sizeof(cplx) * (size_t)(n / 2 + 1))};
    while ((1 << pl.logn) < n) pl.logn++;
    for (int k = 0; k < n / 2; k++) pl.w[k] = cexp(-2 * M_PI * I * k / n);
    return pl;
}
/* In place on a contiguous line; sign -1 forward, +1 inverse. */
static void fft1(const plan *pl, cplx *a, int sign) {
    const int n = pl->n;
    for (int i = 1, j = 0; i < n; i++) { /* bit reversal */
        int bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) {
            const cplx t = a[i];
            a[i] = a[j];
            a[j] = t;
        }
    }
    for (int len = 2; len <= n; len <<= 1) {
        const int step = n / len;
        for (int i = 0; i < n; i += len)
            for (int k = 0; k < len / 2; k++) {
                const cplx w = sign < 0 ? pl->w[k * step] : conj(pl->w[k * step]);
                const cplx u = a[i + k], v = a[i + k + len / 2] * w;
                a[i + k] = u + v;
                a[i + k + len / 2] = u - v;
            }
    }
}
/* count lines of length pl->n, element stride, line i starting at base + i * line_stride */
static void fft_lines(const plan *pl, cplx *base, long count, long line_stride, long stride, int sign, cplx *tmp) {
    for (long i = 0; i < count; i++) {
        cplx *l = base + i * line_stride;
        if (stride == 1) {
            fft1(pl, l, sign);
            continue;
        }
        for (int k = 0; k < pl->n; k++) tmp[k] = l[k * stride];
        fft1(pl, tmp, sign);
        for (int k = 0; k < pl->n; k++) l[k * stride] = tmp[k];
    }
}

/* ---- transposes ----------------------------------------------------------------------------- */
static cplx *stage_ab, *stage_ba; /* all_malloc'd receive areas, one per direction */
static cplx *sendbuf;
static plan px, py, pz;
static cplx *tmp;

/* Block of process p's slab in layout A destined for q: planes z0(p)..z1(p), rows
 * y0(q)..y1(q); it goes to q's staging area at offset z0(p) * (rows of q) * nx. */
static void a_to_b(const cplx *a, cplx *b) {
    const int zc = z1(me) - z0(me);
    long used = 0;
    for (int q = 0; q < P; q++) {
        const int yc = y1_(q) - y0_(q);
        const long n = (long)zc * yc * nx;
        if (n == 0) continue;
        cplx *out = sendbuf + used;
        for (int z = 0; z < zc; z++)
            for (int y = 0; y < yc; y++)
                memcpy(out + ((long)z * yc + y) * nx, a + ((long)z * ny + y0_(q) + y) * nx, sizeof(cplx) * (size_t)nx);
        if (q == me)
            memcpy(stage_ab + (long)z0(me) * yc * nx, out, sizeof(cplx) * (size_t)n);
        else
            bulk_store(toglobal(q, stage_ab + (long)z0(me) * yc * nx), out, sizeof(cplx) * (size_t)n);
        used += n;
    }
    all_store_sync();
    const int yc = y1_(me) - y0_(me);
    for (int p = 0; p < P; p++) /* staging: [z][y][x] per source -> layout B: [y][z][x] */
        for (int z = z0(p); z < z1(p); z++)
            for (int y = 0; y < yc; y++)
                memcpy(b + ((long)y * nz + z) * nx, stage_ab + ((long)z * yc + y) * nx, sizeof(cplx) * (size_t)nx);
}

static void b_to_a(const cplx *b, cplx *a) {
    const int yc = y1_(me) - y0_(me);
    long used = 0;
    for (int q = 0; q < P; q++) {
        const int zc = z1(q) - z0(q);
        const long n = (long)zc * yc * nx;
        if (n == 0) continue;
        cplx *out = sendbuf + used;
        for (int y = 0; y < yc; y++)
            for (int z = 0; z < zc; z++)
                memcpy(out + ((long)y * zc + z) * nx, b + ((long)y * nz + z0(q) + z) * nx, sizeof(cplx) * (size_t)nx);
        if (q == me)
            memcpy(stage_ba + (long)y0_(me) * zc * nx, out, sizeof(cplx) * (size_t)n);
        else
            bulk_store(toglobal(q, stage_ba + (long)y0_(me) * zc * nx), out, sizeof(cplx) * (size_t)n);
        used += n;
    }
    all_store_sync();
    const int zc = z1(me) - z0(me);
    for (int p = 0; p < P; p++) /* staging: [y][z][x] per source -> layout A: [z][y][x] */
        for (int y = y0_(p); y < y1_(p); y++)
            for (int z = 0; z < zc; z++)
                memcpy(a + ((long)z * ny + y) * nx, stage_ba + ((long)y * zc + z) * nx, sizeof(cplx) * (size_t)nx);
}

/* Forward: a (layout A, overwritten) -> b (layout B). Inverse: b (overwritten) -> a. */
static void forward(cplx *a, cplx *b) {
    const int zc = z1(me) - z0(me), yc = y1_(me) - y0_(me);
    fft_lines(&px, a, (long)zc * ny, nx, 1, -1, tmp);
    for (int z = 0; z < zc; z++) fft_lines(&py, a + (long)z * ny * nx, nx, 1, nx, -1, tmp);
    a_to_b(a, b);
    for (int y = 0; y < yc; y++) fft_lines(&pz, b + (long)y * nz * nx, nx, 1, nx, -1, tmp);
}
static void inverse(cplx *b, cplx *a) {
    const int zc = z1(me) - z0(me), yc = y1_(me) - y0_(me);
    for (int y = 0; y < yc; y++) fft_lines(&pz, b + (long)y * nz * nx, nx, 1, nx, +1, tmp);
    b_to_a(b, a);
    for (int z = 0; z < zc; z++) fft_lines(&py, a + (long)z * ny * nx, nx, 1, nx, +1, tmp);
    fft_lines(&px, a, (long)zc * ny, nx, 1, +1, tmp);
}

/* ---- the data ------------------------------------------------------------------------------ */
enum { SEED = 314159265 };
static const double A5 = 1220703125.0; /* 5^13 */

/* NPB's initial conditions, this process's planes: the generator's stream in x, y, z
 * order, real then imaginary part of each element. */
static void initial(cplx *a) {
    double start = SEED;
    npb_randlc(&start, npb_ipow46(A5, 2L * nx * ny * z0(me)));
    const double an = npb_ipow46(A5, 2L * nx * ny);
    double *plane = malloc(sizeof(double) * 2 * (size_t)nx * (size_t)ny);
    for (int z = z0(me); z < z1(me); z++) {
        double x0 = start;
        npb_vranlc(2L * nx * ny, &x0, A5, plane);
        for (long i = 0; i < (long)nx * ny; i++) a[(long)(z - z0(me)) * nx * ny + i] = plane[2 * i] + I * plane[2 * i + 1];
        npb_randlc(&start, an);
    }
    free(plane);
}

static int folded(int i, int n) { return (i + n / 2) % n - n / 2; }

/* NPB's verification values, (real, imaginary) per iteration. */
static const double check_S[6][2] = {{5.546087004964e+02, 4.845363331978e+02}, {5.546385409189e+02, 4.865304269511e+02},
                                     {5.546148406171e+02, 4.883910722336e+02}, {5.545423607415e+02, 4.901273169046e+02},
                                     {5.544255039624e+02, 4.917475857993e+02}, {5.542683411902e+02, 4.932597244941e+02}};
static const double check_W[6][2] = {{5.673612178944e+02, 5.293246849175e+02}, {5.631436885271e+02, 5.282149986629e+02},
                                     {5.594024089970e+02, 5.270996558037e+02}, {5.560698047020e+02, 5.260027904925e+02},
                                     {5.530898991250e+02, 5.249400845633e+02}, {5.504159734538e+02, 5.239212247086e+02}};
static const double check_A[6][2] = {{5.046735008193e+02, 5.114047905510e+02}, {5.059412319734e+02, 5.098809666433e+02},
                                     {5.069376896287e+02, 5.098144042213e+02}, {5.077892868474e+02, 5.101336130759e+02},
                                     {5.085233095391e+02, 5.104914655194e+02}, {5.091487099959e+02, 5.107917842803e+02}};

static cplx checksum(const cplx *a) {
    cplx sum = 0;
    for (long j = 1; j <= 1024; j++) {
        const int x = (int)(j % nx), y = (int)(3 * j % ny), z = (int)(5 * j % nz);
        if (z >= z0(me) && z < z1(me)) sum += a[((long)(z - z0(me)) * ny + y) * nx + x];
    }
    const double re = all_reduce_to_all_add_double(creal(sum)), im = all_reduce_to_all_add_double(cimag(sum));
    return (re + I * im) / (double)N;
}

static int run_npb(const app_opts *o, const double (*ref)[2], double *seconds) {
    const long mine_a = (long)(z1(me) - z0(me)) * ny * nx, mine_b = (long)(y1_(me) - y0_(me)) * nz * nx;
    cplx *u = malloc(sizeof(cplx) * (size_t)(mine_a ? mine_a : 1));
    cplx *U = malloc(sizeof(cplx) * (size_t)(mine_b ? mine_b : 1));
    cplx *V = malloc(sizeof(cplx) * (size_t)(mine_b ? mine_b : 1));
    double *tw = malloc(sizeof(double) * (size_t)(mine_b ? mine_b : 1));
    const double ap = -4.0 * 1e-6 * M_PI * M_PI;
    for (int y = y0_(me); y < y1_(me); y++) /* layout B: [y][z][x] */
        for (int z = 0; z < nz; z++)
            for (int x = 0; x < nx; x++) {
                const int kx = folded(x, nx), ky = folded(y, ny), kz = folded(z, nz);
                tw[((long)(y - y0_(me)) * nz + z) * nx + x] = exp(ap * (double)(kx * kx + ky * ky + kz * kz));
            }
    int ok = 1;
    cplx sums[6] = {0};
    for (int r = 0; r < o->reps; r++) {
        barrier();
        const double t0 = app_now();
        initial(u);
        forward(u, U);
        for (int it = 0; it < niter; it++) {
            for (long i = 0; i < mine_b; i++) {
                U[i] *= tw[i];
                V[i] = U[i];
            }
            inverse(V, u);
            sums[it] = checksum(u);
        }
        const double t = all_reduce_to_all_max_double(app_now() - t0);
        if (r == 0 || t < *seconds) *seconds = t;
    }
    for (int it = 0; it < niter; it++) {
        const cplx want = ref[it][0] + I * ref[it][1];
        const int good = cabs(sums[it] - want) / cabs(want) <= 1e-12; /* NPB's test */
        if (MYPROC == 0)
            printf("fft3d: iteration %d: checksum %.12e %+.12ei  NPB %.12e %+.12ei  %s\n", it + 1, creal(sums[it]),
                   cimag(sums[it]), ref[it][0], ref[it][1], good ? "ok" : "WRONG");
        ok &= good;
    }
    free(u);
    free(U);
    free(V);
    free(tw);
    return ok;
}

/* The paper's transform: forward then inverse, checked by the round trip and by four
 * coefficients computed directly. */
static int run_transform(const app_opts *o, double *seconds) {
    const long mine_a = (long)(z1(me) - z0(me)) * ny * nx, mine_b = (long)(y1_(me) - y0_(me)) * nz * nx;
    cplx *u = malloc(sizeof(cplx) * (size_t)(mine_a ? mine_a : 1));
    cplx *orig = malloc(sizeof(cplx) * (size_t)(mine_a ? mine_a : 1));
    cplx *U = malloc(sizeof(cplx) * (size_t)(mine_b ? mine_b : 1));
    initial(orig);
    const int probe[4][3] = {{0, 0, 0}, {1, 2, 3}, {nx / 2, 1, nz - 1}, {nx - 3, ny / 2 + 1, nz / 3}};
    cplx got[4] = {0}, want[4] = {0};
    double err = 0;
    for (int r = 0; r < o->reps; r++) {
        memcpy(u, orig, sizeof(cplx) * (size_t)mine_a);
        barrier();
        const double t0 = app_now();
        forward(u, U);
        for (int k = 0; k < 4; k++) { /* read the probes before the inverse overwrites U */
            const int y = probe[k][1];
            got[k] = y >= y0_(me) && y < y1_(me) ? U[((long)(y - y0_(me)) * nz + probe[k][2]) * nx + probe[k][0]] : 0;
        }
        inverse(U, u);
        const double t = all_reduce_to_all_max_double(app_now() - t0);
        if (r == 0 || t < *seconds) *seconds = t;
    }
    for (long i = 0; i < mine_a; i++) {
        const double e = cabs(u[i] / (double)N - orig[i]);
        err = e > err ? e : err;
    }
    err = all_reduce_to_all_max_double(err);
    for (int k = 0; k < 4; k++) { /* sum over this process's planes, then over all */
        cplx s = 0;
        for (int z = z0(me); z < z1(me); z++)
            for (int y = 0; y < ny; y++)
                for (int x = 0; x < nx; x++) {
                    const double ph = -2 * M_PI * ((double)probe[k][0] * x / nx + (double)probe[k][1] * y / ny +
                                                   (double)probe[k][2] * z / nz);
                    s += orig[((long)(z - z0(me)) * ny + y) * nx + x] * cexp(I * ph);
                }
        want[k] = all_reduce_to_all_add_double(creal(s)) + I * all_reduce_to_all_add_double(cimag(s));
        got[k] = all_reduce_to_all_add_double(creal(got[k])) + I * all_reduce_to_all_add_double(cimag(got[k]));
    }
    int ok = err < 1e-12;
    double worst = 0;
    for (int k = 0; k < 4; k++) {
        const double rel = cabs(got[k] - want[k]) / (cabs(want[k]) > 1 ? cabs(want[k]) : 1);
        worst = rel > worst ? rel : worst;
    }
    ok = ok && worst < 1e-9;
    if (MYPROC == 0)
        printf("fft3d: round trip max error %.2e (at most 1e-12), coefficients against direct sums %.2e (at most 1e-9)\n", err,
               worst);
    free(u);
    free(orig);
    free(U);
    return ok;
}

int splitc_main(int argc, char **argv) {
    app_opts o = app_parse("fft3d", argc, argv, sizes, NULL);
    P = PROCS;
    me = MYPROC;
    const double (*ref)[2] = NULL;
    niter = 0;
    if (!strcmp(o.size, "paper")) nx = ny = nz = 128;
    else if (!strcmp(o.size, "small")) nx = ny = nz = 32;
    else if (!strcmp(o.size, "S")) nx = ny = nz = 64, niter = 6, ref = check_S;
    else if (!strcmp(o.size, "W")) nx = ny = 128, nz = 32, niter = 6, ref = check_W;
    else nx = ny = 256, nz = 128, niter = 6, ref = check_A;
    N = (long)nx * ny * nz;
    px = make_plan(nx);
    py = make_plan(ny);
    pz = make_plan(nz);
    const int longest = nx > ny ? (nx > nz ? nx : nz) : (ny > nz ? ny : nz);
    tmp = malloc(sizeof(cplx) * (size_t)longest);
    /* the staging areas: as large as the largest slab of either layout */
    long most = 0;
    for (int p = 0; p < P; p++) {
        const long a = (long)(z1(p) - z0(p)) * ny * nx, b = (long)(y1_(p) - y0_(p)) * nz * nx;
        most = a > most ? a : most;
        most = b > most ? b : most;
    }
    /* Global memory only where others store into it: one process transposes in its own. */
    stage_ab = P > 1 ? all_malloc(sizeof(cplx) * (size_t)most) : malloc(sizeof(cplx) * (size_t)most);
    stage_ba = P > 1 ? all_malloc(sizeof(cplx) * (size_t)most) : malloc(sizeof(cplx) * (size_t)most);
    sendbuf = malloc(sizeof(cplx) * (size_t)most);
    if (!stage_ab || !stage_ba || !sendbuf)
        app_die("fft3d", "the symmetric heap cannot hold two slabs of %ld bytes (SPLITC_HEAP_SIZE)", (long)sizeof(cplx) * most);
    double seconds = 0;
    const int ok = ref ? run_npb(&o, ref, &seconds) : run_transform(&o, &seconds);
    const double transforms = ref ? 1.0 + niter : 2.0;
    const double flops = transforms * 5.0 * (double)N * log2((double)N) + (ref ? niter * 6.0 * (double)N : 0);
    if (MYPROC == 0) printf("fft3d: %dx%dx%d, %d process(es)\n", nx, ny, nz, P);
    if (P > 1) {
        all_free(stage_ba);
        all_free(stage_ab);
    } else {
        free(stage_ba);
        free(stage_ab);
    }
    free(sendbuf), free(tmp), free(px.w), free(py.w), free(pz.w);
    return app_report(&o, seconds, flops / seconds / 1e6, "Mflop/s", ok);
}
