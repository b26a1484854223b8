/* shm_api -- libsoftvia_shm's API as a program uses it, in a real job of N processes
 * (softvia-run -n N), against softvia_shm.h only.
 *
 *   shm_api [all] [--adds K]   everything below; K fetch-adds per process (default 100000)
 *   shm_api dead               the last process of the host exits after start-up; the
 *                              others must get -ESRCH from every call that needs it
 *   shm_api config             (one process) bad configurations, each refused with the
 *                              argument named, then a good one
 *   shm_api startup            start-up only: the layout seen through every view, a barrier
 *   shm_api exitrace           a barrier, a few ms of work, a barrier, and out at once (no
 *                              finalize), as a Split-C job ends: with more processes than
 *                              cores, the first out must not make a slower one's last
 *                              barrier fail
 *   shm_api hold FILE          a victim job for shm_isolation.sh: each process exports a
 *                              stack range, writes FILE.<rank> (pid, segment ids, heap
 *                              address), then waits (polling) until FILE.done exists
 *   shm_api intrude FILE N     an intruder (another job, maybe another user): for each of
 *                              the N victims, attaching its segments must be refused; its
 *                              /proc/<pid>/fd must hold no memfd; prints what the kernel
 *                              lets it do besides (process_vm_readv), for the script
 *
 * "all": the layout invariant (a global variable and the heap at the same address in
 * every process, read through each peer's view); stores through views seen by the owner;
 * exports of stack, malloc'd and heap memory, reached by copy (process_vm) or attached;
 * read-only exports; withdrawn exports; bad segment ids (another job's, unknown, out of
 * range, another host's); atomics (exact sums of fetch-adds from every process, cswap,
 * swap, refusals); calls and sends (exact counts); barriers; finalize. Processes on other
 * hosts (softvia-run --hosts) are checked to be refused with -EREMOTE. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <softvia_shm.h>

static int me = -1;
static long checks;

#define CHECK(cond, ...)                                                                                 \
    do {                                                                                                 \
        checks++;                                                                                        \
        if (!(cond)) {                                                                                   \
            fprintf(stderr, "%s:%d: process %d: check failed: %s: ", __FILE__, __LINE__, me, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                                \
            fprintf(stderr, " (last error: %s)\n", sv_shm_last_error());                                 \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)
#define OK(call) CHECK((call) == 0, "%s", #call)
/* call must fail with -err, and the message must name what: */
#define REFUSED(call, err, what)                                                                         \
    do {                                                                                                 \
        int rc_ = (call);                                                                                \
        CHECK(rc_ == -(err), "%s gave %d, not -%s", #call, rc_, #err);                                   \
        CHECK(strstr(sv_shm_last_error(), what) != NULL, "%s: the error '%s' does not say '%s'", #call,  \
              sv_shm_last_error(), what);                                                                \
    } while (0)

long g_rank_word = -1;        /* .data: each process's rank, read by the others */
long g_counter;               /* .bss: counted by calls */
unsigned char g_bytes[10000]; /* .bss: written by the previous same-host process */
char g_big[256 << 20];        /* .bss: only two pages touched; moving the segment must not commit the rest */

/* Resident shared memory of this process (RssShmem), KiB. */
static long rss_shmem_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssShmem: %ld", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

static uint8_t pattern(size_t i, int seed) { return (uint8_t)(i * 131 + (size_t)seed * 7 + (i >> 8)); }

static int h_add(int src, const uint64_t args[SV_SHM_CALL_ARGS], int64_t *result, void *ctx) {
    (void)src;
    (void)ctx;
    *result = g_counter;
    g_counter += (long)args[0];
    return 0;
}

static int h_echo(int src, const uint64_t args[SV_SHM_CALL_ARGS], int64_t *result, void *ctx) {
    (void)ctx;
    if (args[1] == 77) return -EPERM; /* a refusal */
    *result = (int64_t)(args[0] + args[5]) * 1000 + src;
    return 0;
}

/* The segment ids each process publishes in its own heap for the others. */
struct published {
    sv_shm_segid_t stack, heap_sub, rdonly, gone;
    uint64_t stack_addr, malloc_addr;
    sv_shm_segid_t malloc_seg;
};

static void run_all(long adds) {
    const int n = sv_shm_size(), nl = sv_shm_local_size();
    sv_shm_segid_t heap_seg;
    OK(sv_shm_segid_of(me, SV_SHM_SEG_HEAP, &heap_seg));
    char *heap = (char *)SV_SHM_DEFAULT_HEAP_BASE;
    struct published *pub = (struct published *)heap;
    long *heap_words = (long *)(heap + 4096);
    char *heap_sub = heap + 65536;

    /* ---- who is where ---------------------------------------------------------------------- */
    {
        int sum = 0;
        for (int h = 0; h < sv_shm_host_count(); h++) {
            sum += sv_shm_host_size(h);
            CHECK(sv_shm_host_of(sv_shm_host_leader(h)) == h, "host %d's leader is on it", h);
            for (int q = 0; q < sv_shm_host_leader(h); q++) CHECK(sv_shm_host_of(q) != h, "the leader is the lowest rank");
        }
        CHECK(sum == n, "the hosts hold %d processes of %d", sum, n);
        CHECK(sv_shm_host_size(sv_shm_host_of(me)) == nl, "this host's size");
        for (int q = 0; q < n; q++)
            CHECK((sv_shm_host_of(q) == sv_shm_host_of(me)) == (sv_shm_local_index(q) >= 0), "host and local index agree");
        for (int k = 0; k < nl; k++) CHECK(sv_shm_is_alive(sv_shm_local_rank(k)) == 1, "alive");
    }

    /* ---- the layout invariant -------------------------------------------------------------- */
    g_rank_word = me;
    heap_words[0] = me * 100L;
    OK(sv_shm_barrier(NULL, NULL));
    CHECK(sv_shm_translate(me, (uint64_t)&g_rank_word, 8) == &g_rank_word, "own translation is the address itself");
    for (int q = 0; q < n; q++) {
        long *v = sv_shm_translate(q, (uint64_t)&g_rank_word, sizeof(long));
        long *h = sv_shm_translate(q, (uint64_t)&heap_words[0], sizeof(long));
        if (sv_shm_local_index(q) < 0) {
            CHECK(!v && !h, "process %d is on another host: no view", q);
            long x;
            REFUSED(sv_shm_read(q, &x, (uint64_t)&g_rank_word, 8), EREMOTE, "another host");
            continue;
        }
        CHECK(v && *v == q, "process %d's g_rank_word at &g_rank_word=%p reads %ld", q, (void *)&g_rank_word, v ? *v : -1);
        CHECK(h && *h == q * 100L, "process %d's heap word reads %ld", q, h ? *h : -1);
    }
    /* stores through the view of the next process of this host, seen by it */
    {
        const int li = sv_shm_local_index(me), next = sv_shm_local_rank((li + 1) % nl);
        unsigned char *dst = sv_shm_translate(next, (uint64_t)g_bytes, sizeof g_bytes);
        CHECK(dst != NULL, "view of process %d's g_bytes", next);
        for (size_t i = 0; i < sizeof g_bytes; i++) dst[i] = pattern(i, me);
        OK(sv_shm_barrier(NULL, NULL));
        const int prev = sv_shm_local_rank((li + nl - 1) % nl);
        for (size_t i = 0; i < sizeof g_bytes; i++)
            CHECK(g_bytes[i] == pattern(i, prev), "g_bytes[%zu] = %u, process %d wrote %u", i, g_bytes[i], prev,
                  pattern(i, prev));
    }

    /* ---- exports: stack, malloc'd and heap memory --------------------------------------------- */
    long stackv[512];
    for (int i = 0; i < 512; i++) stackv[i] = me * 1000000L + i;
    long *mal = malloc(8192 * sizeof(long));
    CHECK(mal != NULL, "malloc");
    for (int i = 0; i < 8192; i++) mal[i] = -(me * 1000000L + i);
    for (int i = 0; i < 4096; i++) heap_sub[i] = (char)pattern((size_t)i, me + 50);
    for (int i = 0; i < 4096; i++) heap_sub[65536 + i] = (char)pattern((size_t)i, me + 60);
    OK(sv_shm_export(stackv, sizeof stackv, 0, 11, &pub->stack));
    OK(sv_shm_export(mal, 8192 * sizeof(long), 0, 12, &pub->malloc_seg));
    OK(sv_shm_export(heap_sub, 65536, 0, 13, &pub->heap_sub));
    OK(sv_shm_export(heap_sub + 65536, 4096, SV_SHM_RDONLY, 14, &pub->rdonly));
    OK(sv_shm_export(heap_sub + 8 * 65536, 4096, 0, 15, &pub->gone));
    OK(sv_shm_unexport(pub->gone));
    REFUSED(sv_shm_unexport(pub->gone), ENOENT, "not exported");
    REFUSED(sv_shm_unexport(heap_seg), EINVAL, "stay exported");
    pub->stack_addr = (uint64_t)stackv;
    pub->malloc_addr = (uint64_t)mal;
    OK(sv_shm_barrier(NULL, NULL));
    for (int q = 0; q < n; q++) {
        if (sv_shm_local_index(q) < 0 || q == me) continue;
        const struct published *pq = sv_shm_translate(q, (uint64_t)pub, sizeof *pub);
        CHECK(pq != NULL, "process %d's published ids", q);
        sv_shm_export_info info;
        OK(sv_shm_find_export(q, pq->stack_addr + 8, 16, &info));
        CHECK(info.local == NULL && info.tag == 11 && info.segid == pq->stack && info.len == sizeof stackv,
              "the stack export as found: local %p tag %u len %llu", info.local, info.tag, (unsigned long long)info.len);
        OK(sv_shm_find_export(q, (uint64_t)heap_sub + 100, 100, &info));
        CHECK(info.local != NULL && info.tag == 13, "the heap export is mapped");
        /* reached by copy (process_vm): the peer's stack and malloc'd memory */
        long buf[512];
        OK(sv_shm_read(q, buf, pq->stack_addr, sizeof buf));
        /* (words from 256 on are being written by the others meanwhile) */
        for (int i = 0; i < 256; i++) CHECK(buf[i] == q * 1000000L + i, "stack word %d of %d: %ld", i, q, buf[i]);
        long big[8192];
        OK(sv_shm_read(q, big, pq->malloc_addr, sizeof big));
        for (int i = 0; i < 4096; i++) CHECK(big[i] == -(q * 1000000L + i), "malloc'd word %d of %d", i, q);
        const long mine = 7000 + me;
        OK(sv_shm_write(q, pq->stack_addr + (uint64_t)(256 + me) * 8, &mine, 8));
        OK(sv_shm_write(q, pq->malloc_addr + (uint64_t)(4096 + me) * 8, &mine, 8));
        REFUSED(sv_shm_read(q, buf, pq->stack_addr + sizeof stackv - 8, 16), ERANGE, "outside everything it exports");
        REFUSED(sv_shm_read(q, buf, 1 << 20, 4), ERANGE, "outside"); /* exported by no one */
        /* attaching: a new mapping of the peer's heap pages */
        void *a = NULL;
        OK(sv_shm_attach(pq->heap_sub, 100, 3000, 0, &a));
        for (int i = 0; i < 3000; i++)
            CHECK(((unsigned char *)a)[i] == pattern((size_t)i + 100, q + 50), "attached byte %d of %d", i, q);
        CHECK(a != sv_shm_translate(q, (uint64_t)heap_sub + 100, 1), "an attachment is a mapping of its own");
        OK(sv_shm_detach(a));
        REFUSED(sv_shm_detach(a), EINVAL, "not an address sv_shm_attach returned");
        REFUSED(sv_shm_attach(pq->heap_sub, 65000, 1000, 0, &a), ERANGE, "outside the segment");
        REFUSED(sv_shm_attach(pq->stack, 0, 8, 0, &a), ENOTSUP, "sv_shm_read");
        REFUSED(sv_shm_attach(pq->rdonly, 0, 8, 0, &a), EACCES, "read-only");
        OK(sv_shm_attach(pq->rdonly, 0, 4096, SV_SHM_RDONLY, &a));
        CHECK(((unsigned char *)a)[7] == pattern(7, q + 60), "read through a read-only mapping");
        OK(sv_shm_detach(a));
        REFUSED(sv_shm_write(q, (uint64_t)heap_sub + 65536, &mine, 8), EACCES, "read-only");
        REFUSED(sv_shm_attach(pq->gone, 0, 8, 0, &a), ENOENT, "withdrawn");
        REFUSED(sv_shm_attach(pq->heap_sub ^ (1ull << 50), 0, 8, 0, &a), EACCES, "another job");
        REFUSED(sv_shm_attach(pq->heap_sub | 0xfffffeull, 0, 8, 0, &a), ENOENT, "exports no segment");
        REFUSED(sv_shm_attach(pq->heap_sub, 0, 0, 0, &a), EINVAL, "len is 0");
        sv_shm_segid_t hs;
        OK(sv_shm_segid_of(q, SV_SHM_SEG_HEAP, &hs));
        OK(sv_shm_attach(hs, 4096, 8, 0, &a));
        CHECK(*(long *)a == q * 100L, "process %d's heap word through an attachment of its whole heap", q);
        OK(sv_shm_detach(a));
    }
    for (int q = 0; q < n; q++) {
        if (sv_shm_local_index(q) >= 0) continue;
        sv_shm_segid_t hs;
        void *a;
        OK(sv_shm_segid_of(q, SV_SHM_SEG_HEAP, &hs));
        REFUSED(sv_shm_attach(hs, 0, 8, 0, &a), EREMOTE, "another host");
    }
    REFUSED(sv_shm_segid_of(n, SV_SHM_SEG_HEAP, &heap_seg), EINVAL, "rank");
    REFUSED(sv_shm_segid_of(me, 7, &heap_seg), EINVAL, "which");
    OK(sv_shm_barrier(NULL, NULL));
    /* what the peers wrote into this process's stack and malloc'd memory */
    for (int q = 0; q < n; q++) {
        if (sv_shm_local_index(q) < 0 || q == me) continue;
        CHECK(stackv[256 + q] == 7000 + q, "stack word written by %d: %ld", q, stackv[256 + q]);
        CHECK(mal[4096 + q] == 7000 + q, "malloc'd word written by %d: %ld", q, mal[4096 + q]);
    }
    OK(sv_shm_unexport(pub->malloc_seg));
    OK(sv_shm_barrier(NULL, NULL));
    for (int q = 0; q < n; q++) {
        if (sv_shm_local_index(q) < 0 || q == me) continue;
        const struct published *pq = sv_shm_translate(q, (uint64_t)pub, sizeof *pub);
        long x;
        REFUSED(sv_shm_read(q, &x, pq->malloc_addr, 8), ERANGE, "outside everything it exports");
    }
    OK(sv_shm_unexport(pub->stack)); /* the stack frame ends with this function */
    OK(sv_shm_barrier(NULL, NULL));
    free(mal);

    /* ---- atomics: every process of the host adds into the first one's heap word ---------------- */
    const int first = sv_shm_local_rank(0);
    const uint64_t target = (uint64_t)&heap_words[16];
    int64_t old = 0;
    for (long i = 0; i < adds; i++) OK(sv_shm_fetch_add64(first, target, 1, &old));
    OK(sv_shm_barrier(NULL, NULL));
    OK(sv_shm_fetch_add64(first, target, 0, &old));
    CHECK(old == adds * nl, "%d processes x %ld fetch-adds gave %lld", nl, adds, (long long)old);
    /* cswap: exactly one process wins the swap from 0 */
    OK(sv_shm_cswap64(first, (uint64_t)&heap_words[24], 0, me + 1, &old));
    const long won = old == 0;
    OK(sv_shm_barrier(NULL, NULL));
    OK(sv_shm_fetch_add64(first, (uint64_t)&heap_words[32], won, &old));
    OK(sv_shm_barrier(NULL, NULL));
    if (me == first) {
        OK(sv_shm_swap64(first, (uint64_t)&heap_words[32], 0, &old));
        CHECK(old == 1, "one process won the cswap, %lld counted", (long long)old);
        OK(sv_shm_swap64(first, (uint64_t)&heap_words[32], 5, &old));
        CHECK(old == 0, "swap returns what the last swap left: %lld", (long long)old);
    }
    OK(sv_shm_barrier(NULL, NULL));
    OK(sv_shm_fetch_add64(first, (uint64_t)&heap_words[24], 0, &old));
    CHECK(old >= 1 && old <= n, "the cswap winner left its number: %lld", (long long)old);
    REFUSED(sv_shm_fetch_add64(first, target + 4, 1, &old), EINVAL, "aligned");
    {
        long w;
        sv_shm_segid_t s;
        OK(sv_shm_export(&w, sizeof w, 0, 0, &s));
        REFUSED(sv_shm_fetch_add64(me, (uint64_t)&w, 1, &old), ENOTSUP, "sv_shm_call");
        OK(sv_shm_unexport(s));
    }
    OK(sv_shm_barrier(NULL, NULL));

    /* ---- calls and sends: exact counts ---------------------------------------------------------- */
    OK(sv_shm_set_handler(3, h_add, NULL));
    OK(sv_shm_set_handler(4, h_echo, NULL));
    OK(sv_shm_barrier(NULL, NULL));
    const int calls = 2000;
    uint64_t args[SV_SHM_CALL_ARGS] = {1, 0, 0, 0, 0, 0};
    for (int i = 0; i < calls; i++)
        for (int k = 0; k < nl; k++) {
            int64_t r;
            OK(sv_shm_call(sv_shm_local_rank((sv_shm_local_index(me) + k) % nl), 3, args, &r));
        }
    for (int k = 0; k < nl; k++) {
        const int q = sv_shm_local_rank(k);
        uint64_t a2[SV_SHM_CALL_ARGS] = {5, 0, 0, 0, 0, 9};
        int64_t r;
        OK(sv_shm_call(q, 4, a2, &r));
        CHECK(r == 14 * 1000 + me, "echo from %d: %lld", q, (long long)r);
        REFUSED(sv_shm_call(q, 9, a2, &r), ENOENT, "no handler 9");
        a2[1] = 77;
        REFUSED(sv_shm_call(q, 4, a2, &r), EPERM, "refused");
        a2[1] = 0;
        REFUSED(sv_shm_call(q, SV_SHM_MAX_HANDLERS, a2, &r), EINVAL, "out of range");
        for (int i = 0; i < calls; i++) OK(sv_shm_send(q, 3, args, -1));
    }
    OK(sv_shm_barrier(NULL, NULL));
    sv_shm_poll(); /* sends queued before a peer arrived are all visible now */
    CHECK(g_counter == 2L * calls * nl, "calls and sends counted %ld, not %ld", g_counter, 2L * calls * nl);

    /* ---- barriers: each sees every process's count of the round ------------------------------- */
    long *round = &heap_words[64];
    for (long r = 1; r <= 2000; r++) {
        *round = r;
        OK(sv_shm_barrier(NULL, NULL));
        for (int k = 0; k < nl; k++) {
            const long *v = sv_shm_translate(sv_shm_local_rank(k), (uint64_t)round, 8);
            CHECK(*v >= r, "round %ld: process %d is at %ld after the barrier", r, sv_shm_local_rank(k), *v);
        }
        OK(sv_shm_barrier(NULL, NULL));
    }
    OK(sv_shm_check_peers());
    CHECK(sv_shm_lost_rank() == -1, "no process lost");
}

static void run_dead(void) {
    const int nl = sv_shm_local_size();
    CHECK(nl >= 2, "dead needs 2 processes on the host");
    const int last = sv_shm_local_rank(nl - 1);
    char *heap = (char *)SV_SHM_DEFAULT_HEAP_BASE;
    OK(sv_shm_barrier(NULL, NULL));
    if (me == last) _exit(0); /* without a word */
    const time_t until = time(NULL) + 20;
    while (sv_shm_check_peers() == 0) {
        CHECK(time(NULL) < until, "process %d's exit never seen", last);
        usleep(1000);
    }
    REFUSED(sv_shm_check_peers(), ESRCH, "has exited");
    CHECK(sv_shm_lost_rank() == last, "lost rank %d, not %d", sv_shm_lost_rank(), last);
    sv_shm_segid_t hs;
    void *a;
    OK(sv_shm_segid_of(last, SV_SHM_SEG_HEAP, &hs));
    REFUSED(sv_shm_attach(hs, 0, 8, 0, &a), ESRCH, "has exited");
    long x;
    REFUSED(sv_shm_read(last, &x, (uint64_t)heap, 8), ESRCH, "has exited");
    REFUSED(sv_shm_write(last, (uint64_t)heap, &x, 8), ESRCH, "has exited");
    uint64_t args[SV_SHM_CALL_ARGS] = {0};
    int64_t r;
    REFUSED(sv_shm_call(last, 3, args, &r), ESRCH, "has exited");
    REFUSED(sv_shm_barrier(NULL, NULL), ESRCH, "has exited");
    CHECK(sv_shm_is_alive(last) == 0, "is_alive of the dead");
    /* The survivors leave together: one that exits while another is still checking would
     * be a second lost process to it (its first lost rank may then be that one). A count
     * in the first process's heap, mapped by all and kept mapped after it exits. */
    long *done = sv_shm_translate(sv_shm_local_rank(0), (uint64_t)(heap + 8192), 8);
    CHECK(done != NULL, "translate the first process's heap");
    if (done) {
        __atomic_add_fetch(done, 1, __ATOMIC_SEQ_CST);
        const time_t end = time(NULL) + 20;
        while (__atomic_load_n(done, __ATOMIC_SEQ_CST) < nl - 1 && time(NULL) < end) usleep(1000);
    }
}

static void run_config(void) {
    sv_shm_config c;
    sv_shm_config_default(&c);
    c.heap_size = 0;
    REFUSED(sv_shm_init(&c), EINVAL, "heap_size is 0");
    sv_shm_config_default(&c);
    c.heap_size = (uint64_t)64 << 40; /* 64 TiB above 86 TiB: past 128 TiB */
    REFUSED(sv_shm_init(&c), EINVAL, "heap_size");
    sv_shm_config_default(&c);
    c.heap_base = SV_SHM_DEFAULT_HEAP_BASE + 100;
    REFUSED(sv_shm_init(&c), EINVAL, "heap_base");
    sv_shm_config_default(&c);
    c.flags = 0x80;
    REFUSED(sv_shm_init(&c), EINVAL, "flags");
    /* an address this process already uses */
    sv_shm_config_default(&c);
    c.heap_base = ((uint64_t)&g_counter) & ~4095ull;
    c.heap_size = 4096;
    REFUSED(sv_shm_init(&c), EEXIST, "already in use");
    REFUSED(sv_shm_finalize(), EINVAL, "not initialised");
    sv_shm_config_default(&c);
    c.heap_size = 1 << 20;
    OK(sv_shm_init(&c));
    REFUSED(sv_shm_init(&c), EALREADY, "already");
    CHECK(sv_shm_local_size() == 1 && sv_shm_rank() == 0, "a job of one");
    OK(sv_shm_set_handler(3, h_add, NULL));
    uint64_t args[SV_SHM_CALL_ARGS] = {4};
    int64_t r;
    OK(sv_shm_call(0, 3, args, &r));
    CHECK(g_counter == 4, "a call to oneself");
    OK(sv_shm_barrier(NULL, NULL));
    OK(sv_shm_finalize());
    CHECK(sv_shm_rank() == -1, "finalized");
    REFUSED(sv_shm_init(&c), EALREADY, "once per process");
}

static void run_hold(const char *file) {
    long stackv[64];
    for (int i = 0; i < 64; i++) stackv[i] = i;
    sv_shm_segid_t heap_seg, stack_seg;
    OK(sv_shm_segid_of(me, SV_SHM_SEG_HEAP, &heap_seg));
    OK(sv_shm_export(stackv, sizeof stackv, 0, 0, &stack_seg));
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s.%d", file, me);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    CHECK(f != NULL, "cannot write %s", tmp);
    fprintf(f, "%d %llx %llx %llx\n", (int)getpid(), (unsigned long long)heap_seg, (unsigned long long)stack_seg,
            (unsigned long long)SV_SHM_DEFAULT_HEAP_BASE);
    fclose(f);
    CHECK(rename(tmp, path) == 0, "rename %s", path);
    OK(sv_shm_barrier(NULL, NULL));
    snprintf(path, sizeof path, "%s.done", file);
    const time_t until = time(NULL) + 60;
    struct stat st;
    while (stat(path, &st) != 0) {
        CHECK(time(NULL) < until, "%s never appeared", path);
        sv_shm_poll();
        usleep(10000);
    }
    OK(sv_shm_barrier(NULL, NULL));
    OK(sv_shm_unexport(stack_seg));
}

static void run_intrude(const char *file, int n) {
    int refused = 0;
    for (int r = 0; r < n; r++) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", file, r);
        FILE *f = fopen(path, "r");
        CHECK(f != NULL, "cannot read %s", path);
        int pid;
        unsigned long long heap_seg, stack_seg, heap_addr;
        CHECK(fscanf(f, "%d %llx %llx %llx", &pid, &heap_seg, &stack_seg, &heap_addr) == 4, "malformed %s", path);
        fclose(f);
        void *a;
        REFUSED(sv_shm_attach(heap_seg, 0, 8, 0, &a), EACCES, "another job");
        REFUSED(sv_shm_attach(stack_seg, 0, 8, 0, &a), EACCES, "another job");
        printf("intruder: victim %d (pid %d): attach refused: %s\n", r, pid, sv_shm_last_error());
        refused++;
        /* No descriptor of the victim's memory is open: nothing to open through /proc. */
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
        DIR *d = opendir(dir);
        if (!d) {
            printf("intruder: victim %d: %s: %s\n", r, dir, strerror(errno));
        } else {
            int memfds = 0;
            for (struct dirent *e; (e = readdir(d));) {
                char link[512], target[512] = "";
                snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
                const ssize_t len = readlink(link, target, sizeof target - 1);
                if (len > 0 && strstr(target, "memfd:")) {
                    printf("intruder: victim %d: FOUND an open memfd: %s -> %s\n", r, link, target);
                    memfds++;
                }
            }
            closedir(d);
            CHECK(memfds == 0, "victim %d keeps %d memfd(s) open", r, memfds);
            printf("intruder: victim %d: %s holds no memfd\n", r, dir);
        }
        /* The kernel's own rule for reading another process's memory (ptrace access). */
        long word = 0;
        struct iovec l = {&word, sizeof word}, rm = {(void *)(uintptr_t)heap_addr, sizeof word};
        const ssize_t got = process_vm_readv(pid, &l, 1, &rm, 1, 0);
        printf("intruder: victim %d: process_vm_readv: %s\n", r, got < 0 ? strerror(errno) : "allowed (same user: the kernel's rule)");
    }
    CHECK(refused == n, "every victim refused");
}

/* sv_shm_copy: memcpy's result at every distance of dst past src modulo a page from 0 to
 * 80 (1..63 take its own loop), around its 64-byte turns, with the bytes either side
 * untouched. No job needed. */
static void run_copy(void) {
    const size_t page = 4096, len = 4 * page;
    unsigned char *src = aligned_alloc(page, len), *dst = aligned_alloc(page, len), *want = malloc(len);
    CHECK(src && dst && want, "buffers");
    for (size_t i = 0; i < len; i++) src[i] = (unsigned char)(i * 131 + 7);
    const size_t sizes[] = {0, 1, 63, 2047, 2048, 2049, 2111, 2112, 4096, 8704};
    const size_t offs[] = {0, 5, 16};
    long bad = 0;
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
        for (size_t b = 0; b < sizeof offs / sizeof *offs; b++)
            for (size_t delta = 0; delta <= 80; delta++) {
                size_t n = sizes[a], so = offs[b], at = page + so + delta;
                memset(dst, 0x5a, len);
                memset(want, 0x5a, len);
                memcpy(want + at, src + so, n);
                if (sv_shm_copy(dst + at, src + so, n) != dst + at || memcmp(dst, want, len) != 0) bad++;
            }
    CHECK(bad == 0, "sv_shm_copy differs from memcpy in %ld of %zu cases", bad,
          (sizeof sizes / sizeof *sizes) * (sizeof offs / sizeof *offs) * 81);
    free(src);
    free(dst);
    free(want);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 && argv[1][0] != '-' ? argv[1] : "all";
    long adds = 100000;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--adds") && i + 1 < argc) adds = atol(argv[++i]);
    if (!strcmp(mode, "copy")) {
        me = 0;
        run_copy();
        printf("shm_api copy: %ld checks passed\n", checks);
        return 0;
    }
    if (!strcmp(mode, "config")) {
        me = 0;
        run_config();
        printf("shm_api config: %ld checks passed\n", checks);
        return 0;
    }
    sv_shm_config cfg;
    sv_shm_config_default(&cfg);
    cfg.heap_size = 16 << 20;
    g_big[0] = 42;
    g_big[200 << 20] = 7;
    g_rank_word = -2;
    OK(sv_shm_init(&cfg));
    me = sv_shm_rank();
    /* The move kept the values, and copied only what was touched of the 256 MiB array. */
    CHECK(g_big[0] == 42 && g_big[200 << 20] == 7 && g_big[100 << 20] == 0 && g_rank_word == -2,
          "the data segment's values after the move");
    CHECK(rss_shmem_kb() < 32 * 1024, "the data segment's move committed %ld KiB of shared memory", rss_shmem_kb());
    if (!strcmp(mode, "startup")) {
        g_rank_word = me;
        OK(sv_shm_barrier(NULL, NULL));
        for (int k = 0; k < sv_shm_local_size(); k++) {
            const long *v = sv_shm_translate(sv_shm_local_rank(k), (uint64_t)&g_rank_word, sizeof(long));
            CHECK(v && *v == sv_shm_local_rank(k), "process %d's g_rank_word through the view", sv_shm_local_rank(k));
        }
    } else if (!strcmp(mode, "exitrace")) {
        OK(sv_shm_barrier(NULL, NULL));
        const struct timespec t = {0, 5 * 1000000L};
        nanosleep(&t, NULL);
        OK(sv_shm_barrier(NULL, NULL));
        printf("shm_api exitrace: process %d out\n", me);
        fflush(stdout);
        _exit(0);
    } else if (!strcmp(mode, "intrude") && argc == 4)
        run_intrude(argv[2], atoi(argv[3]));
    else if (!strcmp(mode, "all"))
        run_all(adds);
    else if (!strcmp(mode, "hold") && argc == 3)
        run_hold(argv[2]);
    else if (!strcmp(mode, "dead"))
        run_dead();
    else
        CHECK(0, "unknown mode '%s'", mode);
    const int n = sv_shm_size(), nl = sv_shm_local_size();
    if (strcmp(mode, "dead")) {
        OK(sv_shm_barrier(NULL, NULL));
        OK(sv_shm_finalize());
        CHECK(sv_shm_rank() == -1 && sv_shm_local_size() == 0, "finalized");
    }
    printf("shm_api %s: process %d of %d (%d on this host): %ld checks passed\n", mode, me, n, nl, checks);
    return 0;
}
