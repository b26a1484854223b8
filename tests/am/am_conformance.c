/*
 * am_conformance: every AM-2 call in one process, good and bad input.
 *
 *  - calls before AM_Init -> AM_ERR_NOT_INIT; limits; bundles (AM_PAR refused), endpoints,
 *    tags, segments, translation table, handlers, event masks, token queries;
 *  - an endpoint mapped to itself: short requests with 0..16 arguments (every value
 *    checked), medium and long requests and replies with data checks, RequestXferAsync,
 *    1,000 reply-free requests (implicit credit return);
 *  - bad input: unmapped index, handler 0, over-size messages, NULL data -> AM_ERR_BAD_ARG;
 *    unset handler, wrong tag, segment offset and length -> handler 0 with EBADHANDLER,
 *    EBADTAG, EBADSEGOFF, EBADLENGTH; two replies, a medium reply to a short request, a
 *    request or AM_Poll inside a handler, a token used after its handler -> errors;
 *  - two endpoints of one process in two bundles, AM_MoveEndpoint; a one-sided mapping
 *    (the other endpoint never maps back: requests delivered, replies come back); an
 *    endpoint that does not exist -> AM_ERR_NOT_SENT after the connect timeout.
 */
#include "am_test.h"

static eb_t eb;
static ep_t ep;
static en_t me;
enum { TAG = 0x5eed, SEG = 1 << 17 };
static char *seg;

/* ---- handler state ---- */
static volatile int n_short, n_rep, n_medium, n_long, n_noreply, n_returned;
static int last_args[16], last_nargs;
static int ret_status, ret_opcode;
static tag_t ret_tag;
static void *saved_token;
static int in_handler_rc[8];
static int bulk_ok;

#define ARGN(n) (1000 * (n) + 7)
#define DEF_SHORT(N, ...)                                                          \
    static void short##N(void *token, ##__VA_ARGS__)
static void check_args(void *token, int n, const int *v) {
    last_nargs = n;
    for (int i = 0; i < n; i++) last_args[i] = v[i];
    n_short++;
    AM_Reply1(token, 3, n);
}
static void s0(void *t) { check_args(t, 0, NULL); }
static void s1(void *t, int a0) { int v[] = {a0}; check_args(t, 1, v); }
static void s2(void *t, int a0, int a1) { int v[] = {a0, a1}; check_args(t, 2, v); }
static void s3(void *t, int a0, int a1, int a2) { int v[] = {a0, a1, a2}; check_args(t, 3, v); }
static void s4(void *t, int a0, int a1, int a2, int a3) { int v[] = {a0, a1, a2, a3}; check_args(t, 4, v); }
static void s8(void *t, int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7) {
    int v[] = {a0, a1, a2, a3, a4, a5, a6, a7};
    check_args(t, 8, v);
}
static void s15(void *t, int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7, int a8, int a9, int a10,
                int a11, int a12, int a13, int a14) {
    int v[] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14};
    check_args(t, 15, v);
}
static void s16(void *t, int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7, int a8, int a9, int a10,
                int a11, int a12, int a13, int a14, int a15) {
    int v[] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15};
    check_args(t, 16, v);
}
static void rep3(void *t, int n) {
    (void)t;
    EXPECT(n == last_nargs, "reply says %d arguments, handler saw %d", n, last_nargs);
    n_rep++;
}

static uint8_t pattern(size_t i, int seed) { return (uint8_t)(i * 131 + (size_t)seed * 17 + 3); }
static int check_pattern(const void *buf, size_t n, int seed) {
    const uint8_t *p = buf;
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern(i, seed)) return 0;
    return 1;
}

/* medium request: checks data and alignment, answers with a medium reply of the data reversed */
static char reply_buf[4096];
static void med_req(void *token, void *buf, size_t n, int seed, int want_n) {
    n_medium++;
    EXPECT(((uintptr_t)buf & 7) == 0, "medium buffer %p not 8-byte aligned", buf);
    EXPECT(n == (size_t)want_n, "medium length %zu, want %d", n, want_n);
    EXPECT(check_pattern(buf, n, seed), "medium data of %zu bytes (seed %d) corrupted", n, seed);
    for (size_t i = 0; i < n; i++) reply_buf[i] = (char)pattern(i, seed + 1);
    EXPECT(AMX_Reply(token, 5, AMX_MEDIUM, reply_buf, n, 0, 2, (int32_t[]){seed + 1, (int)n}) == AM_OK, "medium reply");
}
static void med_rep(void *token, void *buf, size_t n, int seed, int want_n) {
    (void)token;
    bulk_ok = n == (size_t)want_n && check_pattern(buf, n, seed);
    n_rep++;
}
/* long request: the data is in the segment at buf; answer with a long reply to offset 0 */
static void long_req(void *token, void *buf, size_t n, int seed, int off) {
    n_long++;
    EXPECT(buf == seg + off, "long buffer %p, want segment + %d = %p", buf, off, (void *)(seg + off));
    EXPECT(check_pattern(buf, n, seed), "long data of %zu bytes (seed %d) corrupted", n, seed);
    EXPECT(AM_ReplyXfer2(token, 0, 7, buf, n, seed, (int)n) == AM_OK, "long reply");
}
static void long_rep(void *token, void *buf, size_t n, int seed, int want_n) {
    (void)token;
    bulk_ok = buf == seg && n == (size_t)want_n && check_pattern(buf, n, seed);
    n_rep++;
}
static void noreply(void *token, int i) {
    (void)token;
    EXPECT(i == n_noreply, "reply-free request %d arrived as number %d", i, n_noreply);
    n_noreply++;
}
static void returned(int status, op_t opcode, void *token) {
    ret_status = status;
    ret_opcode = opcode;
    ret_tag = 0;
    AM_GetMsgTag(token, &ret_tag);
    n_returned++;
}
/* inside a handler: what is and is not allowed */
static void probe(void *token, int what) {
    en_t src;
    ep_t dst;
    tag_t tag;
    in_handler_rc[0] = AM_GetSourceEndpoint(token, &src);
    in_handler_rc[1] = memcmp(&src, &me, sizeof me) == 0 ? AM_OK : AM_ERR_BAD_ARG;
    in_handler_rc[2] = AM_GetDestEndpoint(token, &dst) == AM_OK && dst == ep ? AM_OK : AM_ERR_BAD_ARG;
    in_handler_rc[3] = AM_GetMsgTag(token, &tag) == AM_OK && tag == TAG ? AM_OK : AM_ERR_BAD_ARG;
    in_handler_rc[4] = AM_Request0(ep, 0, 1);
    in_handler_rc[5] = AM_Poll(eb);
    in_handler_rc[6] = what ? AM_ReplyI0(token, 3, reply_buf, 8) : AM_OK;
    in_handler_rc[7] = AM_Reply1(token, 3, 0);
    int second = AM_Reply1(token, 3, 0);
    EXPECT(second == AM_ERR_BAD_ARG, "second reply -> %s", AMX_ErrorString(second));
    saved_token = token;
    n_short++;
}

static void wait_for(volatile int *c, int want, const char *what) {
    if (!at_poll_until(eb, c, want, 5000)) FATAL("timed out waiting for %s (%d of %d)", what, *c, want);
}

/* A phase is over once every request it sent has been answered: a late reply must not
 * be counted by the next phase. */
static void end_phase(void) {
    int left = -1;
    uint64_t end = at_now_ns() + 5000000000ull;
    while (AMX_Outstanding(ep, &left) == AM_OK && left > 0 && at_now_ns() < end) AM_Poll(eb);
    if (left != 0) FATAL("%d requests still unanswered at the end of the phase", left);
}

static void before_init(void) {
    th_phase("before AM_Init");
    eb_t b;
    uintptr_t len;
    AM_EXPECT_RC(AM_AllocateBundle(AM_SEQ, &b), AM_ERR_NOT_INIT);
    AM_EXPECT_RC(AM_MaxSegLength(&len), AM_ERR_NOT_INIT);
    AM_EXPECT_RC(AM_Terminate(), AM_ERR_NOT_INIT);
    AM_EXPECT_RC(AM_Poll(NULL), AM_ERR_NOT_INIT);
    EXPECT(AM_MaxShort() == 16, "AM_MaxShort %d", AM_MaxShort());
    EXPECT(AM_MaxMedium() >= 4096, "AM_MaxMedium %d", AM_MaxMedium());
    EXPECT(AM_MaxLong() >= 65536, "AM_MaxLong %d", AM_MaxLong());
    EXPECT(AM_MaxNumHandlers() >= 256, "AM_MaxNumHandlers %d", AM_MaxNumHandlers());
}

static void setup_calls(void) {
    th_phase("set-up calls");
    AM_CHECK(AM_Init());
    AM_CHECK(AM_Init()); /* a second call is harmless */
    uintptr_t maxseg = 0;
    AM_CHECK(AM_MaxSegLength(&maxseg));
    EXPECT(maxseg >= (1u << 30), "AM_MaxSegLength %zu", (size_t)maxseg);
    AM_EXPECT_RC(AM_MaxSegLength(NULL), AM_ERR_BAD_ARG);
    eb_t b;
    AM_EXPECT_RC(AM_AllocateBundle(AM_PAR, &b), AM_ERR_RESOURCE);
    AM_EXPECT_RC(AM_AllocateBundle(7, &b), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_AllocateBundle(AM_SEQ, NULL), AM_ERR_BAD_ARG);
    AM_CHECK(AM_AllocateBundle(AM_SEQ, &eb));
    ep_t e;
    AM_EXPECT_RC(AM_AllocateEndpoint(NULL, &e, NULL), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_AllocateEndpoint((eb_t)&me, &e, NULL), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_AllocateEndpoint(eb, NULL, NULL), AM_ERR_BAD_ARG);
    AM_CHECK(AM_AllocateEndpoint(eb, &ep, &me));
    EXPECT(me.magic == AMX_EN_MAGIC && me.ep_id != 0 && me.nic_addr_len > 0, "endpoint name");
    /* tags */
    tag_t t = 1;
    AM_CHECK(AM_GetTag(ep, &t));
    EXPECT(t == AM_NONE, "a new endpoint's tag is AM_NONE, not %llu", (unsigned long long)t);
    AM_CHECK(AM_SetTag(ep, TAG));
    AM_CHECK(AM_GetTag(ep, &t));
    EXPECT(t == TAG, "tag %llu", (unsigned long long)t);
    AM_EXPECT_RC(AM_GetTag(ep, NULL), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_SetTag(NULL, 1), AM_ERR_BAD_ARG);
    /* segments */
    void *a;
    uintptr_t n;
    AM_CHECK(AM_GetSeg(ep, &a, &n));
    EXPECT(a == NULL && n == 0, "no segment at first");
    void *unmapped = mmap(NULL, 1 << 16, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(unmapped, 1 << 16);
    AM_EXPECT_RC(AM_SetSeg(ep, unmapped, 1 << 16), AM_ERR_BAD_ARG);
    seg = aligned_alloc(4096, SEG);
    memset(seg, 0, SEG);
    AM_CHECK(AM_SetSeg(ep, seg, SEG));
    AM_CHECK(AM_GetSeg(ep, &a, &n));
    EXPECT(a == seg && n == SEG, "segment %p/%zu", a, (size_t)n);
    AM_EXPECT_RC(AM_GetSeg(ep, NULL, &n), AM_ERR_BAD_ARG);
    /* handlers */
    int nh = 0;
    AM_CHECK(AM_GetNumHandlers(ep, &nh));
    EXPECT(nh >= 256, "%d handlers", nh);
    AM_EXPECT_RC(AM_SetNumHandlers(ep, 0), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_SetNumHandlers(ep, 257), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_SetHandler(ep, 1, NULL), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_SetHandler(NULL, 1, (amx_handler_fn_t)s0), AM_ERR_BAD_ARG);
    handler_t any = 0;
    AM_CHECK(AM_SetHandlerAny(ep, &any, s0));
    EXPECT(any == 1, "AM_SetHandlerAny picked %d, want 1", any);
    AM_EXPECT_RC(AM_SetHandlerAny(ep, NULL, s0), AM_ERR_BAD_ARG);
    AM_CHECK(AM_SetHandler(ep, 0, returned));
    AM_CHECK(AM_SetHandler(ep, 3, rep3));
    AM_CHECK(AM_SetHandler(ep, 4, med_req));
    AM_CHECK(AM_SetHandler(ep, 5, med_rep));
    AM_CHECK(AM_SetHandler(ep, 6, long_req));
    AM_CHECK(AM_SetHandler(ep, 7, long_rep));
    AM_CHECK(AM_SetHandler(ep, 8, noreply));
    AM_CHECK(AM_SetHandler(ep, 9, probe));
    AM_CHECK(AM_SetHandler(ep, 10, s1));
    AM_CHECK(AM_SetHandler(ep, 11, s2));
    AM_CHECK(AM_SetHandler(ep, 12, s3));
    AM_CHECK(AM_SetHandler(ep, 13, s4));
    AM_CHECK(AM_SetHandler(ep, 14, s8));
    AM_CHECK(AM_SetHandler(ep, 15, s15));
    AM_CHECK(AM_SetHandler(ep, 16, s16));
    AM_CHECK(AM_SetHandler(ep, 255, s0));
    /* translations */
    int nt = 0;
    AM_CHECK(AM_GetNumTranslations(ep, &nt));
    EXPECT(nt >= 1, "%d translations", nt);
    AM_CHECK(AM_MaxNumTranslations(&nt));
    AM_EXPECT_RC(AM_Map(ep, -1, me, TAG), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_Map(ep, 1 << 20, me, TAG), AM_ERR_BAD_ARG);
    en_t bad = me;
    bad.magic = 0;
    AM_EXPECT_RC(AM_Map(ep, 0, bad, TAG), AM_ERR_BAD_ARG);
    bad = me;
    bad.nic_addr_len = 200;
    AM_EXPECT_RC(AM_Map(ep, 0, bad, TAG), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_GetTranslationInuse(ep, 0), AM_ERR_RESOURCE);
    AM_CHECK(AM_Map(ep, 0, me, TAG));
    AM_EXPECT_RC(AM_Map(ep, 0, me, TAG), AM_ERR_RESOURCE);
    AM_EXPECT_RC(AM_GetTranslationInuse(ep, 0), AM_OK);
    AM_CHECK(AM_Map(ep, 1, me, 0x999)); /* the same endpoint with a wrong tag */
    int idx = -1;
    AM_CHECK(AM_MapAny(ep, &idx, me, TAG));
    EXPECT(idx == 2, "AM_MapAny picked %d, want 2", idx);
    tag_t tt;
    en_t nm;
    AM_CHECK(AM_GetTranslationTag(ep, 1, &tt));
    EXPECT(tt == 0x999, "translation tag");
    AM_CHECK(AM_GetTranslationName(ep, 2, &nm));
    EXPECT(memcmp(&nm, &me, sizeof me) == 0, "translation name");
    AM_EXPECT_RC(AM_GetTranslationTag(ep, 5, &tt), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_SetNumTranslations(ep, 2), AM_ERR_RESOURCE); /* index 2 is in use */
    AM_CHECK(AM_UnMap(ep, 2));
    AM_EXPECT_RC(AM_UnMap(ep, 2), AM_ERR_BAD_ARG);
    AM_CHECK(AM_SetNumTranslations(ep, 8));
    AM_CHECK(AM_GetNumTranslations(ep, &nt));
    EXPECT(nt == 8, "%d translations after setting 8", nt);
    AM_EXPECT_RC(AM_SetNumTranslations(ep, 0), AM_ERR_BAD_ARG);
    AM_CHECK(AM_SetExpectedResources(ep, 4, 64));
    AM_EXPECT_RC(AM_SetExpectedResources(ep, -1, 0), AM_ERR_BAD_ARG);
    /* events */
    int mask = -1;
    AM_CHECK(AM_GetEventMask(eb, &mask));
    EXPECT(mask == AM_NOEVENTS, "mask %d", mask);
    AM_EXPECT_RC(AM_SetEventMask(eb, 99), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_WaitSema(eb), AM_ERR_BAD_ARG); /* AM_NOEVENTS would never return */
    /* tokens outside handlers */
    en_t src;
    AM_EXPECT_RC(AM_GetSourceEndpoint(&src, &src), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_GetMsgTag(NULL, &tt), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_Reply0(&src, 3), AM_ERR_BAD_ARG);
}

static void short_messages(void) {
    th_phase("short requests, every arity");
    struct { int h, n; } cases[] = {{1, 0}, {10, 1}, {11, 2}, {12, 3}, {13, 4}, {14, 8}, {15, 15}, {16, 16}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int n = cases[c].n, before = n_rep;
        int32_t v[16];
        for (int i = 0; i < 16; i++) v[i] = i < n ? ARGN(i) * (i % 2 ? -1 : 1) : 0;
        switch (n) { /* through the macros, as programs call them */
            case 0: AM_CHECK(AM_Request0(ep, 0, 1)); break;
            case 1: AM_CHECK(AM_Request1(ep, 0, 10, v[0])); break;
            case 2: AM_CHECK(AM_Request2(ep, 0, 11, v[0], v[1])); break;
            case 3: AM_CHECK(AM_Request3(ep, 0, 12, v[0], v[1], v[2])); break;
            case 4: AM_CHECK(AM_Request4(ep, 0, 13, v[0], v[1], v[2], v[3])); break;
            case 8: AM_CHECK(AM_Request8(ep, 0, 14, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])); break;
            case 15:
                AM_CHECK(AM_Request15(ep, 0, 15, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11],
                                      v[12], v[13], v[14]));
                break;
            case 16:
                AM_CHECK(AM_Request16(ep, 0, 16, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11],
                                      v[12], v[13], v[14], v[15]));
                break;
        }
        wait_for(&n_rep, before + 1, "short reply");
        EXPECT(last_nargs == n, "handler of arity %d saw %d arguments", n, last_nargs);
        for (int i = 0; i < n; i++) EXPECT(last_args[i] == v[i], "arity %d argument %d: %d, want %d", n, i, last_args[i], v[i]);
    }
    /* handler 255 (the last of 256) */
    int before = n_rep;
    AM_CHECK(AM_Request0(ep, 0, 255));
    wait_for(&n_rep, before + 1, "handler 255");
}

static void bulk_messages(void) {
    th_phase("medium requests and replies");
    static char src[65536];
    size_t sizes[] = {0, 1, 7, 100, 4095, 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        for (size_t j = 0; j < n; j++) src[j] = (char)pattern(j, (int)i);
        int before = n_rep;
        bulk_ok = 0;
        AM_CHECK(AM_RequestI2(ep, 0, 4, src, n, (int)i, (int)n));
        memset(src, 0, n); /* the data was copied: the source is ours again */
        wait_for(&n_rep, before + 1, "medium reply");
        EXPECT(bulk_ok, "medium reply of %zu bytes", n);
    }
    th_phase("long requests and replies");
    size_t lsizes[] = {0, 8, 4096, 9000, 65536};
    int offs[] = {0, 8, 4096, 65536, 65536};
    for (size_t i = 0; i < sizeof lsizes / sizeof *lsizes; i++) {
        size_t n = lsizes[i];
        int seed = 40 + (int)i;
        for (size_t j = 0; j < n; j++) src[j] = (char)pattern(j, seed);
        int before = n_rep;
        bulk_ok = 0;
        if (i % 2) AM_CHECK(AM_RequestXfer2(ep, 0, (uintptr_t)offs[i], 6, src, n, seed, offs[i]));
        else {
            int r;
            while ((r = AM_RequestXferAsync2(ep, 0, (uintptr_t)offs[i], 6, src, n, seed, offs[i])) == AM_ERR_IN_USE)
                AM_Poll(eb);
            AM_CHECK(r);
        }
        wait_for(&n_rep, before + 1, "long reply");
        EXPECT(bulk_ok, "long reply of %zu bytes at offset %d", n, offs[i]);
    }
}

static void implicit_credits(void) {
    th_phase("1000 reply-free requests");
    for (int i = 0; i < 1000; i++) AM_CHECK(AM_Request1(ep, 0, 8, i));
    wait_for(&n_noreply, 1000, "reply-free requests");
    amx_counters_t c;
    AM_CHECK(AMX_GetCounters(ep, &c));
    EXPECT(c.credit_msgs_sent > 0 && c.credit_msgs_sent < 1000, "credit messages %llu (batched)",
              (unsigned long long)c.credit_msgs_sent);
}

static void bad_input(void) {
    th_phase("bad input to requests");
    static char big[AMX_MAX_LONG + 1];
    AM_EXPECT_RC(AM_Request0(ep, 5, 1), AM_ERR_BAD_ARG);   /* unmapped index */
    AM_EXPECT_RC(AM_Request0(ep, -1, 1), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_Request0(ep, 100, 1), AM_ERR_BAD_ARG); /* beyond the table */
    AM_EXPECT_RC(AM_Request0(ep, 0, 0), AM_ERR_BAD_ARG);   /* handler 0 is not a target */
    AM_EXPECT_RC(AM_Request0(NULL, 0, 1), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_RequestI0(ep, 0, 4, big, AMX_MAX_MEDIUM + 1), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_RequestI0(ep, 0, 4, NULL, 8), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AM_RequestXfer0(ep, 0, 0, 6, big, AMX_MAX_LONG + 1), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AMX_Request(ep, 0, 1, AMX_SHORT, NULL, 0, 0, 17, (int32_t[17]){0}), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AMX_Request(ep, 0, 1, 9, NULL, 0, 0, 0, NULL), AM_ERR_BAD_ARG);

    th_phase("returned messages");
    struct { const char *what; int status, opcode; } want[] = {
        {"unset handler", EBADHANDLER, AM_REQUEST_M}, {"wrong tag", EBADTAG, AM_REQUEST_M},
        {"segment offset", EBADSEGOFF, AM_REQUEST_XFER_M}, {"segment length", EBADLENGTH, AM_REQUEST_XFER_M},
        {"medium, unset handler", EBADHANDLER, AM_REQUEST_IM}};
    for (int i = 0; i < 5; i++) {
        int before = n_returned;
        ret_status = ret_opcode = 0;
        switch (i) {
            case 0: AM_CHECK(AM_Request1(ep, 0, 77, 1)); break;
            case 1: AM_CHECK(AM_Request0(ep, 1, 1)); break;
            case 2: AM_CHECK(AM_RequestXfer0(ep, 0, SEG + 1, 6, big, 8)); break;
            case 3: AM_CHECK(AM_RequestXfer0(ep, 0, SEG - 4, 6, big, 8)); break;
            case 4: AM_CHECK(AM_RequestI0(ep, 0, 200, big, 100)); break;
        }
        wait_for(&n_returned, before + 1, want[i].what);
        EXPECT(ret_status == want[i].status && ret_opcode == want[i].opcode, "%s: status %s opcode %d, want %s opcode %d",
                  want[i].what, AMX_StatusString(ret_status), ret_opcode, AMX_StatusString(want[i].status),
                  want[i].opcode);
        if (i == 1) EXPECT(ret_tag == 0x999, "returned message's tag %llx", (unsigned long long)ret_tag);
    }
    /* the credits of returned requests came back: 100 more requests still go through */
    int before = n_rep;
    for (int i = 0; i < 100; i++) AM_CHECK(AM_Request0(ep, 0, 1));
    wait_for(&n_rep, before + 100, "requests after returned ones");

    th_phase("inside a handler");
    int rep_before = n_rep;
    before = n_short;
    AM_CHECK(AM_Request1(ep, 0, 9, 1));
    wait_for(&n_short, before + 1, "probe handler");
    AM_EXPECT_RC(in_handler_rc[0], AM_OK);
    AM_EXPECT_RC(in_handler_rc[1], AM_OK);          /* source is this endpoint */
    AM_EXPECT_RC(in_handler_rc[2], AM_OK);          /* destination is this endpoint */
    AM_EXPECT_RC(in_handler_rc[3], AM_OK);          /* the tag */
    AM_EXPECT_RC(in_handler_rc[4], AM_ERR_RESOURCE); /* request from a handler */
    AM_EXPECT_RC(in_handler_rc[5], AM_ERR_RESOURCE); /* AM_Poll from a handler */
    AM_EXPECT_RC(in_handler_rc[6], AM_ERR_BAD_ARG);  /* medium reply to a short request */
    AM_EXPECT_RC(in_handler_rc[7], AM_OK);
    AM_EXPECT_RC(AM_Reply0(saved_token, 3), AM_ERR_BAD_ARG); /* the handler has returned */
    en_t src;
    AM_EXPECT_RC(AM_GetSourceEndpoint(saved_token, &src), AM_ERR_BAD_ARG);
    /* The probe replied: its reply belongs to this phase. With thread progress it may
     * not have arrived yet; left behind, it was counted by the next phase. */
    wait_for(&n_rep, rep_before + 1, "the probe's reply");
}

static void events(void) {
    th_phase("event mask and AM_WaitSema");
    AM_CHECK(AM_SetEventMask(eb, AM_NOTEMPTY));
    int before = n_rep, left = 0;
    AM_CHECK(AM_Request0(ep, 0, 1));
    /* its credit comes back only when a poll handles the reply */
    AM_CHECK(AMX_Outstanding(ep, &left));
    EXPECT(left >= 1, "%d requests outstanding right after a request", left);
    AM_EXPECT_RC(AMX_Outstanding(NULL, &left), AM_ERR_BAD_ARG);
    AM_EXPECT_RC(AMX_Outstanding(ep, NULL), AM_ERR_BAD_ARG);
    AM_CHECK(AM_WaitSema(eb));
    int mask = -1;
    AM_CHECK(AM_GetEventMask(eb, &mask));
    EXPECT(mask == AM_NOEVENTS, "mask after the event: %d", mask);
    wait_for(&n_rep, before + 1, "the reply after WaitSema");
}

/* Two endpoints, two bundles; then one that maps another that never maps it back. */
static volatile int b_got, b_replies;
static en_t b_name;
static void b_handler(void *token, int v) {
    b_got = v;
    AM_Reply1(token, 2, v);
}
static void b_reply(void *token, int v) {
    en_t src;
    EXPECT(AM_GetSourceEndpoint(token, &src) == AM_OK && src.ep_id == b_name.ep_id, "reply from %llx, want %llx",
              (unsigned long long)src.ep_id, (unsigned long long)b_name.ep_id);
    EXPECT(v == b_got, "reply carries %d, the request %d", v, b_got);
    b_replies++;
}
static void two_endpoints(void) {
    th_phase("two endpoints, two bundles");
    eb_t eb2, eb3;
    ep_t ep2;
    en_t n2;
    AM_CHECK(AM_AllocateBundle(AM_SEQ, &eb2));
    AM_CHECK(AM_AllocateEndpoint(eb2, &ep2, &n2));
    AM_CHECK(AM_SetTag(ep2, AM_ALL)); /* accepts every tag */
    AM_CHECK(AM_SetHandler(ep2, 1, b_handler));
    AM_CHECK(AM_SetHandler(ep, 2, b_reply));
    b_name = n2;
    AM_CHECK(AM_Map(ep, 3, n2, 12345));
    AM_CHECK(AM_Map(ep2, 0, me, TAG));
    AM_CHECK(AM_AllocateBundle(AM_SEQ, &eb3));
    AM_EXPECT_RC(AM_MoveEndpoint(ep2, eb, eb3), AM_ERR_BAD_ARG); /* not in eb */
    AM_CHECK(AM_MoveEndpoint(ep2, eb2, eb3));
    /* the connection needs both endpoints mapped; ep's request waits for it by polling
     * eb only, so ep2's bundle is polled in the same loop */
    /* bounded by time, not turns: with thread progress a poll does not step the NIC */
    uint64_t end = at_now_ns() + 5000000000ull;
    for (int turn = 0; b_got != 77 && at_now_ns() < end; turn++) {
        AM_Poll(eb3);
        AM_Poll(eb);
        if (turn == 10) AM_CHECK(AM_Request1(ep, 3, 1, 77));
    }
    EXPECT(b_got == 77, "the other endpoint got %d", b_got);
    for (end = at_now_ns() + 5000000000ull; b_replies == 0 && at_now_ns() < end;) AM_Poll(eb);
    EXPECT(b_replies == 1, "%d replies from the other endpoint, want 1", b_replies);
    AM_CHECK(AM_FreeBundle(eb2));
    AM_CHECK(AM_FreeEndpoint(ep2));
    AM_EXPECT_RC(AM_FreeBundle(eb2), AM_ERR_BAD_ARG);
    AM_CHECK(AM_FreeBundle(eb3));

    th_phase("one-sided mapping");
    /* lonely never maps ep: ep's request must still be delivered, and the reply reach ep */
    ep_t lonely;
    en_t ln;
    AM_CHECK(AM_AllocateEndpoint(eb, &lonely, &ln));
    AM_CHECK(AM_SetTag(lonely, 777));
    AM_CHECK(AM_SetHandler(lonely, 1, b_handler));
    AM_CHECK(AM_Map(ep, 4, ln, 777));
    b_name = ln;
    b_got = 0;
    b_replies = 0;
    for (int i = 1; i <= 3; i++) {
        AM_CHECK(AM_Request1(ep, 4, 1, 100 + i));
        wait_for(&b_replies, i, "the reply from an endpoint that did not map us");
        EXPECT(b_got == 100 + i, "the unmapping endpoint got %d, want %d", b_got, 100 + i);
    }
    AM_EXPECT_RC(AM_GetTranslationInuse(lonely, 0), AM_ERR_RESOURCE); /* nothing mapped there */
    end_phase();

    th_phase("mapping an endpoint that does not exist");
    ep_t ghost;
    en_t gn;
    AM_CHECK(AM_AllocateEndpoint(eb, &ghost, &gn));
    AM_CHECK(AM_FreeEndpoint(ghost));
    AM_CHECK(AM_Map(ep, 5, gn, 0));
    AM_CHECK(AMX_SetConnectTimeout(300));
    uint64_t t0 = at_now_ns();
    AM_EXPECT_RC(AM_Request0(ep, 5, 1), AM_ERR_NOT_SENT);
    uint64_t ms = (at_now_ns() - t0) / 1000000;
    EXPECT(ms >= 250 && ms < 5000, "gave up after %llu ms (timeout 300)", (unsigned long long)ms);
    AM_CHECK(AM_FreeEndpoint(lonely));
    AM_EXPECT_RC(AM_FreeEndpoint(lonely), AM_ERR_BAD_ARG);
}

int main(void) {
    at_init("am_conformance", 120);
    before_init();
    setup_calls();
    short_messages();
    end_phase();
    bulk_messages();
    end_phase();
    implicit_credits();
    end_phase();
    bad_input();
    end_phase();
    events();
    end_phase();
    two_endpoints();
    th_phase("teardown");
    AM_CHECK(AM_Terminate());
    AM_EXPECT_RC(AM_Poll(eb), AM_ERR_NOT_INIT);
    AM_EXPECT_RC(AM_Request0(ep, 0, 1), AM_ERR_NOT_INIT);
    free(seg);
    return th_result();
}
