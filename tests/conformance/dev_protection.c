/*
 * dev_protection: memory protection is checked by the NIC when it processes a
 * descriptor, and a violation is VIP_STATUS_PROTECTION_ERROR in the descriptor's
 * status (never a return code of the post): a data segment running past its region or
 * starting before it, a stale or made-up memory handle, a region registered under
 * another protection tag, a descriptor that itself lies in another tag's region, a
 * descriptor whose segment array runs past its region. Send and receive side, every
 * reliability level (unreliable: the VI stays connected and the next message gets
 * through; reliable: both VIs go to VIP_STATE_ERROR).
 */
#include "helpers.h"

static struct {
    char *region; /* 4096 bytes registered alone, under the VI's ptag */
    VIP_MEM_HANDLE region_mh;
    char *stale;
    VIP_MEM_HANDLE stale_mh;
    char *other; /* registered under another ptag */
    VIP_MEM_HANDLE other_mh;
    char *tiny; /* 64 bytes registered: a control segment and 2 data segments fit */
    VIP_MEM_HANDLE tiny_mh;
} M;

static VIP_DESCRIPTOR *seg(VIP_DESCRIPTOR *d, void *p, VIP_MEM_HANDLE h, uint32_t len) {
    th_set1(d, h, p, len);
    return d;
}
static VIP_DESCRIPTOR *past_end(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)e, (void)mh, (void)c;
    return seg(d, M.region + 4000, M.region_mh, 200);
}
static VIP_DESCRIPTOR *before_start(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)e, (void)mh, (void)c;
    return seg(d, M.region - 64, M.region_mh, 100);
}
static VIP_DESCRIPTOR *second_seg_bad(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)mh, (void)c;
    seg(d, M.region, M.region_mh, 10);
    d->CS.SegCount = 2;
    th_seg(d, 1)->Data.Address = e->mem; /* e's arena under the region's handle */
    th_seg(d, 1)->Handle = M.region_mh;
    th_seg(d, 1)->Length = 10;
    return d;
}
static VIP_DESCRIPTOR *stale_handle(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)e, (void)mh, (void)c;
    return seg(d, M.stale, M.stale_mh, 100);
}
static VIP_DESCRIPTOR *madeup_handle(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)mh, (void)c;
    return seg(d, th_alloc(e, 128), 0x7777u, 100);
}
static VIP_DESCRIPTOR *zero_handle(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)mh, (void)c;
    return seg(d, th_alloc(e, 128), 0, 100);
}
static VIP_DESCRIPTOR *other_ptag(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)e, (void)mh, (void)c;
    return seg(d, M.other + 256, M.other_mh, 100);
}
static VIP_DESCRIPTOR *desc_in_other_ptag(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)c;
    VIP_DESCRIPTOR *x = (VIP_DESCRIPTOR *)M.other; /* the descriptor itself under the other tag */
    memset(x, 0, 256);
    seg(x, th_alloc(e, 128), e->mh, 100);
    *mh = M.other_mh;
    (void)d;
    return x;
}
static VIP_DESCRIPTOR *segments_past_region(th_env *e, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE *mh, void *c) {
    (void)c, (void)d;
    VIP_DESCRIPTOR *x = (VIP_DESCRIPTOR *)M.tiny; /* 64 bytes: control + 2 segments */
    memset(x, 0, 64);
    x->CS.SegCount = 3; /* the third segment lies past the region */
    for (int i = 0; i < 2; i++) {
        th_seg(x, i)->Data.Address = th_alloc(e, 64);
        th_seg(x, i)->Handle = e->mh;
        th_seg(x, i)->Length = 8;
    }
    *mh = M.tiny_mh;
    return x;
}

int main(void) {
    th_init("dev_protection", 0);
    th_env e;
    th_open_env(&e, NULL, 4 << 20);
    VIP_PROTECTION_HANDLE pt2;
    CHECK(VipCreatePtag(e.nic, &pt2));
    VIP_MEM_ATTRIBUTES ma = {e.ptag, 0, 0}, ma2 = {pt2, 0, 0};
    M.region = aligned_alloc(4096, 3 * 4096);
    memset(M.region, 0, 3 * 4096);
    M.region += 4096; /* mapped memory on both sides of the region */
    CHECK(VipRegisterMem(e.nic, M.region, 4096, &ma, &M.region_mh));
    M.stale = aligned_alloc(4096, 4096);
    CHECK(VipRegisterMem(e.nic, M.stale, 4096, &ma, &M.stale_mh));
    CHECK(VipDeregisterMem(e.nic, M.stale, M.stale_mh));
    M.other = aligned_alloc(4096, 4096);
    CHECK(VipRegisterMem(e.nic, M.other, 4096, &ma2, &M.other_mh));
    M.tiny = aligned_alloc(4096, 4096);
    CHECK(VipRegisterMem(e.nic, M.tiny, 64, &ma, &M.tiny_mh));

    static const struct {
        th_mkbad_fn fn;
        const char *name;
    } cases[] = {
        {past_end, "segment past its region"},
        {before_start, "segment before its region"},
        {second_seg_bad, "second segment outside its region"},
        {stale_handle, "deregistered handle"},
        {madeup_handle, "made-up handle"},
        {zero_handle, "handle 0"},
        {other_ptag, "region of another ptag"},
        {desc_in_other_ptag, "descriptor in another ptag's region"},
        {segments_past_region, "segment array past the descriptor's region"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int side = 0; side < 2; side++)
            for (int li = 0; li < 3; li++)
                th_bad_case(&e, th_levels[li], side, cases[i].fn, NULL, VIP_STATUS_PROTECTION_ERROR, cases[i].name);

    th_nic_healthy(&e);
    th_close_env(&e);
    return th_result();
}
