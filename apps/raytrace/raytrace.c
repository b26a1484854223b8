/* raytrace -- a ray tracer in the spirit of pico-Ray: the Utah teapot (Newell's 32
 * bicubic Bezier patches, teapot_data.h) on a checkered floor, one light, shadows and
 * reflections; dynamic load balancing over the processes.
 *
 * The patches are tessellated into triangles under a bounding volume hierarchy, built the
 * same way in every process. A pixel's colour is a function of its coordinates only, so
 * any process computes it bit for bit the same.
 *
 * Work: bands of rows handed out by a counter at process 0 (atomic_fetch_add_long: each
 * process takes the next band as soon as it is done with one, so faster processes take
 * more). A finished band goes to process 0's image with bulk_put; process 0 renders too,
 * and polls between rows so that the others' requests are served promptly. Process 0
 * writes the image as PNG (libpng) and checks it against a render of its own, made alone
 * after the timed run: every byte must be the same.
 *
 *   softvia-run -n P raytrace [--size paper|small] [--out FILE.png] [--t1 S] [--reps N]
 *     paper: 512x512, small: 96x96 (each with a 12x12 tessellation per patch) */
#include <png.h>
#include <stdint.h>

#include "../common/app.h"
#include "teapot_data.h"

static const char *const sizes[] = {"paper", "small", NULL};
static const char *out_path = "teapot.png";

typedef struct {
    double x, y, z;
} vec;
static vec v3(double x, double y, double z) { return (vec){x, y, z}; }
static vec add(vec a, vec b) { return v3(a.x + b.x, a.y + b.y, a.z + b.z); }
static vec sub(vec a, vec b) { return v3(a.x - b.x, a.y - b.y, a.z - b.z); }
static vec mul(vec a, double s) { return v3(a.x * s, a.y * s, a.z * s); }
static double dot(vec a, vec b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static vec cross(vec a, vec b) { return v3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x); }
static vec norm(vec a) { return mul(a, 1.0 / sqrt(dot(a, a))); }

/* ---- the teapot: tessellated patches ----------------------------------------------------- */
typedef struct {
    vec p0, e1, e2, n0, n1, n2; /* vertex, edges, vertex normals (smooth shading) */
} tri;
static tri *tris;
static int ntris;

static double bern(int i, double t) {
    const double s = 1 - t;
    switch (i) {
        case 0: return s * s * s;
        case 1: return 3 * t * s * s;
        case 2: return 3 * t * t * s;
        default: return t * t * t;
    }
}
static double dbern(int i, double t) {
    const double s = 1 - t;
    switch (i) {
        case 0: return -3 * s * s;
        case 1: return 3 * s * s - 6 * t * s;
        case 2: return 6 * t * s - 3 * t * t;
        default: return 3 * t * t;
    }
}
/* The teapot's z axis is up; the scene's y is: (x, y, z) -> (x, z, -y). */
static vec cp(int patch, int k) {
    const double *v = teapot_vertices[teapot_patches[patch][k] - 1];
    return v3(v[0], v[2], -v[1]);
}
static void patch_point(int patch, double u, double w, vec *p, vec *n) {
    vec P = {0, 0, 0}, du = {0, 0, 0}, dw = {0, 0, 0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            const vec c = cp(patch, i * 4 + j);
            P = add(P, mul(c, bern(i, u) * bern(j, w)));
            du = add(du, mul(c, dbern(i, u) * bern(j, w)));
            dw = add(dw, mul(c, bern(i, u) * dbern(j, w)));
        }
    vec nn = cross(du, dw);
    const double len = sqrt(dot(nn, nn));
    /* At a degenerate corner (the lid's and the bottom's centres) the normal is the axis. */
    *n = len > 1e-12 ? mul(nn, 1.0 / len) : (P.y > 1.5 ? v3(0, 1, 0) : v3(0, -1, 0));
    *p = P;
}
static void tessellate(int steps) {
    ntris = 0;
    tris = malloc(sizeof(tri) * (size_t)TEAPOT_PATCHES * (size_t)steps * (size_t)steps * 2);
    vec *pts = malloc(sizeof(vec) * (size_t)(steps + 1) * (size_t)(steps + 1));
    vec *nrm = malloc(sizeof(vec) * (size_t)(steps + 1) * (size_t)(steps + 1));
    for (int p = 0; p < TEAPOT_PATCHES; p++) {
        for (int i = 0; i <= steps; i++)
            for (int j = 0; j <= steps; j++)
                patch_point(p, (double)i / steps, (double)j / steps, &pts[i * (steps + 1) + j], &nrm[i * (steps + 1) + j]);
        for (int i = 0; i < steps; i++)
            for (int j = 0; j < steps; j++) {
                const int a = i * (steps + 1) + j, b = a + 1, c = a + steps + 1, d = c + 1;
                const int q[2][3] = {{a, c, b}, {b, c, d}};
                for (int t = 0; t < 2; t++) {
                    tri T = {pts[q[t][0]], sub(pts[q[t][1]], pts[q[t][0]]), sub(pts[q[t][2]], pts[q[t][0]]),
                             nrm[q[t][0]], nrm[q[t][1]], nrm[q[t][2]]};
                    const vec c2 = cross(T.e1, T.e2);
                    if (dot(c2, c2) > 1e-20) tris[ntris++] = T; /* degenerate ones at the poles go */
                }
            }
    }
    free(pts);
    free(nrm);
}

/* ---- a bounding volume hierarchy over the triangles --------------------------------------- */
typedef struct {
    vec lo, hi;
    int left, right; /* children, or -1 for a leaf */
    int first, count;
} node;
static node *nodes;
static int nnodes;
static int *order;

static vec tri_centre(const tri *t) { return add(t->p0, mul(add(t->e1, t->e2), 1.0 / 3)); }
static int axis_of;
static int by_axis(const void *a, const void *b) {
    const vec ca = tri_centre(&tris[*(const int *)a]), cb = tri_centre(&tris[*(const int *)b]);
    const double x = axis_of == 0 ? ca.x : axis_of == 1 ? ca.y : ca.z, y = axis_of == 0 ? cb.x : axis_of == 1 ? cb.y : cb.z;
    if (x != y) return x < y ? -1 : 1;
    return *(const int *)a - *(const int *)b; /* the same order everywhere */
}
static int build(int first, int count) {
    const int me = nnodes++;
    node *nd = &nodes[me];
    nd->lo = v3(1e30, 1e30, 1e30);
    nd->hi = v3(-1e30, -1e30, -1e30);
    for (int i = first; i < first + count; i++) {
        const tri *t = &tris[order[i]];
        const vec p[3] = {t->p0, add(t->p0, t->e1), add(t->p0, t->e2)};
        for (int k = 0; k < 3; k++) {
            nd->lo = v3(fmin(nd->lo.x, p[k].x), fmin(nd->lo.y, p[k].y), fmin(nd->lo.z, p[k].z));
            nd->hi = v3(fmax(nd->hi.x, p[k].x), fmax(nd->hi.y, p[k].y), fmax(nd->hi.z, p[k].z));
        }
    }
    nd->first = first;
    nd->count = count;
    nd->left = nd->right = -1;
    if (count <= 4) return me;
    const vec ext = sub(nd->hi, nd->lo);
    axis_of = ext.x > ext.y && ext.x > ext.z ? 0 : ext.y > ext.z ? 1 : 2;
    qsort(order + first, (size_t)count, sizeof(int), by_axis);
    const int half = count / 2;
    const int l = build(first, half), r = build(first + half, count - half);
    nodes[me].left = l;
    nodes[me].right = r;
    return me;
}

static int box_hit(const node *nd, vec o, vec inv, double tmax) {
    double t0 = 0, t1 = tmax;
    const double lo[3] = {nd->lo.x, nd->lo.y, nd->lo.z}, hi[3] = {nd->hi.x, nd->hi.y, nd->hi.z};
    const double oo[3] = {o.x, o.y, o.z}, ii[3] = {inv.x, inv.y, inv.z};
    for (int a = 0; a < 3; a++) {
        double ta = (lo[a] - oo[a]) * ii[a], tb = (hi[a] - oo[a]) * ii[a];
        if (ta > tb) {
            const double t = ta;
            ta = tb;
            tb = t;
        }
        t0 = ta > t0 ? ta : t0;
        t1 = tb < t1 ? tb : t1;
        if (t0 > t1) return 0;
    }
    return 1;
}

/* Nearest triangle hit along o + t d, t in (eps, tmax): its index, t, and barycentrics. */
static int trace_tris(vec o, vec d, double tmax, double *t_out, double *bu, double *bv) {
    const vec inv = v3(1.0 / d.x, 1.0 / d.y, 1.0 / d.z);
    int stack[64], sp = 0, best = -1;
    double tbest = tmax;
    stack[sp++] = 0;
    while (sp) {
        const node *nd = &nodes[stack[--sp]];
        if (!box_hit(nd, o, inv, tbest)) continue;
        if (nd->left < 0) {
            for (int i = nd->first; i < nd->first + nd->count; i++) { /* Moller-Trumbore */
                const tri *t = &tris[order[i]];
                const vec p = cross(d, t->e2);
                const double det = dot(t->e1, p);
                if (fabs(det) < 1e-14) continue;
                const double id = 1.0 / det;
                const vec s = sub(o, t->p0);
                const double u = dot(s, p) * id;
                if (u < 0 || u > 1) continue;
                const vec q = cross(s, t->e1);
                const double v = dot(d, q) * id;
                if (v < 0 || u + v > 1) continue;
                const double tt = dot(t->e2, q) * id;
                if (tt > 1e-6 && tt < tbest) {
                    tbest = tt;
                    best = order[i];
                    *bu = u;
                    *bv = v;
                }
            }
        } else {
            stack[sp++] = nd->left;
            stack[sp++] = nd->right;
        }
    }
    *t_out = tbest;
    return best;
}

/* ---- shading -------------------------------------------------------------------------- */
static const vec light = {6, 9, 7};
static long rays; /* this process's */

static vec trace(vec o, vec d, int depth) {
    rays++;
    double t, u, v;
    const int hit = trace_tris(o, d, 1e30, &t, &u, &v);
    /* The floor is y = 0, out to the horizon (1000 away: its checks stay in range). */
    double floor_t = d.y < -1e-9 ? (0.0 - o.y) / d.y : 1e30;
    if (floor_t > 1000) floor_t = 1e30;
    vec colour, n, p;
    double reflect;
    if (hit < 0 && floor_t >= 1e30) return v3(0.55 + 0.3 * d.y, 0.65 + 0.2 * d.y, 0.85); /* sky */
    if (hit >= 0 && t < floor_t) {
        const tri *tr = &tris[hit];
        p = add(o, mul(d, t));
        n = norm(add(add(mul(tr->n0, 1 - u - v), mul(tr->n1, u)), mul(tr->n2, v)));
        if (dot(n, d) > 0) n = mul(n, -1); /* the inside of the spout and the lid */
        colour = v3(0.8, 0.25, 0.15);
        reflect = 0.25;
    } else {
        p = add(o, mul(d, floor_t));
        n = v3(0, 1, 0);
        const int check = ((int)floor(p.x * 0.8) + (int)floor(p.z * 0.8)) & 1;
        colour = check ? v3(0.9, 0.9, 0.85) : v3(0.2, 0.25, 0.3);
        reflect = 0.15;
    }
    const vec l = norm(sub(light, p));
    double diffuse = dot(n, l), spec = 0;
    if (diffuse > 0) { /* a shadow ray towards the light */
        double ts, su, sv;
        rays++;
        const vec lp = sub(light, p);
        if (trace_tris(add(p, mul(n, 1e-4)), l, sqrt(dot(lp, lp)), &ts, &su, &sv) >= 0) diffuse = 0;
    }
    if (diffuse < 0) diffuse = 0;
    if (diffuse > 0) {
        const vec h = norm(sub(l, d));
        const double hn = dot(h, n);
        spec = hn > 0 ? pow(hn, 40) : 0;
    }
    vec c = add(mul(colour, 0.15 + 0.85 * diffuse), v3(spec * 0.6, spec * 0.6, spec * 0.6));
    if (depth < 3) {
        const vec r = sub(d, mul(n, 2 * dot(d, n)));
        c = add(mul(c, 1 - reflect), mul(trace(add(p, mul(n, 1e-4)), norm(r), depth + 1), reflect));
    }
    return c;
}

static int W, H;
static void render_row(int y, uint8_t *rgb) {
    const vec eye = v3(1.5, 4.0, 7.5), at = v3(0.2, 1.3, 0);
    const vec fw = norm(sub(at, eye)), right = norm(cross(fw, v3(0, 1, 0))), up = cross(right, fw);
    for (int x = 0; x < W; x++) {
        const double sx = (2.0 * (x + 0.5) / W - 1) * 0.55, sy = (1 - 2.0 * (y + 0.5) / H) * 0.55 * H / W;
        const vec c = trace(eye, norm(add(fw, add(mul(right, sx), mul(up, sy)))), 0);
        const double ch[3] = {c.x, c.y, c.z};
        for (int k = 0; k < 3; k++) {
            const double g = ch[k] <= 0 ? 0 : ch[k] >= 1 ? 1 : pow(ch[k], 1 / 2.2);
            rgb[x * 3 + k] = (uint8_t)(g * 255 + 0.5);
        }
    }
}

static int write_png(const char *path, const uint8_t *img) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        return 0;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)W, (png_uint_32)H, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < H; y++) png_write_row(png, (png_const_bytep)(img + (size_t)y * W * 3));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return fclose(f) == 0;
}

static int extra(int i, int argc, char **argv) {
    if (!strcmp(argv[i], "--out") && i + 1 < argc) {
        out_path = argv[i + 1];
        return 2;
    }
    return 0;
}

long next_band; /* process 0's: the next band to hand out */

int splitc_main(int argc, char **argv) {
    app_opts o = app_parse("raytrace", argc, argv, sizes, extra);
    W = H = !strcmp(o.size, "small") ? 96 : 512;
    tessellate(12);
    nodes = malloc(sizeof(node) * (size_t)ntris * 2);
    order = malloc(sizeof(int) * (size_t)ntris);
    for (int i = 0; i < ntris; i++) order[i] = i;
    nnodes = 0;
    build(0, ntris);
    const int band = 4, bands = (H + band - 1) / band;
    uint8_t *image = all_malloc((size_t)W * H * 3); /* process 0's is the image */
    uint8_t *rows = malloc((size_t)W * band * 3);
    if (!image || !rows) app_die("raytrace", "no memory for a %dx%d image (SPLITC_HEAP_SIZE)", W, H);
    double best = 0;
    long total_rays = 0;
    for (int r = 0; r < o.reps; r++) {
        next_band = 0;
        rays = 0;
        if (MYPROC == 0) memset(image, 0, (size_t)W * H * 3); /* a band not rendered this time shows */
        barrier();
        const double t0 = app_now();
        for (;;) {
            const long b = atomic_fetch_add_long(toglobal(0, &next_band), 1);
            if (b >= bands) break;
            const int y0 = (int)b * band, y1 = y0 + band < H ? y0 + band : H;
            for (int y = y0; y < y1; y++) {
                render_row(y, rows + (size_t)(y - y0) * W * 3);
                if (MYPROC == 0) splitc_poll(); /* the others' requests for work */
            }
            bulk_put(toglobal(0, image + (size_t)y0 * W * 3), rows, (size_t)(y1 - y0) * W * 3);
            sync(); /* rows is reused for the next band */
        }
        barrier();
        const double t = all_reduce_to_all_max_double(app_now() - t0);
        total_rays = all_reduce_to_all_add_long(rays);
        if (r == 0 || t < best) best = t;
    }
    int ok = 1;
    if (MYPROC == 0) {
        printf("raytrace: %dx%d, %d triangles, %ld rays, %d bands of %d rows\n", W, H, ntris, total_rays, bands, band);
        if (!write_png(out_path, image)) {
            fprintf(stderr, "raytrace: cannot write %s\n", out_path);
            ok = 0;
        }
        uint8_t *alone = malloc((size_t)W * 3);
        for (int y = 0; y < H && ok; y++) {
            render_row(y, alone);
            if (memcmp(alone, image + (size_t)y * W * 3, (size_t)W * 3) != 0) {
                fprintf(stderr, "raytrace: row %d differs from the one-process render\n", y);
                ok = 0;
            }
        }
        free(alone);
    }
    ok = all_reduce_to_all_min_int(ok);
    all_free(image);
    free(rows), free(tris), free(nodes), free(order);
    return app_report(&o, best, (double)total_rays / best / 1e6, "Mrays/s", ok);
}
