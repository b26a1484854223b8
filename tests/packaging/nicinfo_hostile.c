/*
 * nicinfo_hostile READY_FILE SEED: keeps fake NIC status pages open for
 * softvia-nicinfo to trip over, and changes them until killed:
 *   fd A  not sealed; a believable header (magic, ABI version, every VI slot in use)
 *         while its size flaps between full, a few bytes and zero: a reader that
 *         maps it and reads past the end gets SIGBUS;
 *   fd B  sealable but not sealed; random bytes, random sizes (up to 1 MiB);
 *   fd C  sealed against shrinking and growing at the real page's size; random bytes,
 *         now and then behind a valid magic and ABI version, with lying counts,
 *         lengths and unterminated strings;
 *   fd D  sealed, too small for a page header.
 * Writes "ready" to READY_FILE once all four exist. SEED makes runs repeatable.
 */
#define _GNU_SOURCE
#include <nicfw/abi.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t rng;
static uint64_t next(void) { /* xorshift64* */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}

static void fill_random(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)next();
}

static int make(unsigned flags) {
    int fd = memfd_create("softvia-nic", MFD_CLOEXEC | flags);
    if (fd < 0) {
        perror("memfd_create");
        exit(1);
    }
    return fd;
}

static void put(int fd, const void *p, size_t n, off_t off) {
    if (pwrite(fd, p, n, off) != (ssize_t)n) {
        perror("pwrite");
        exit(1);
    }
}

static void resize(int fd, off_t len) {
    if (ftruncate(fd, len) != 0) {
        perror("ftruncate");
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: nicinfo_hostile READY_FILE SEED\n");
        return 2;
    }
    rng = strtoull(argv[2], NULL, 0) | 1;
    const size_t full = sizeof(nicfw_status_page) + NICFW_MAX_VI * sizeof(nicfw_vi_status);
    static unsigned char buf[1 << 20];

    /* A: a header that claims every slot, each slot in use with huge counters. */
    nicfw_status_page hdr;
    memset(&hdr, 0x41, sizeof hdr); /* strings without a terminator */
    hdr.magic = NICFW_STATUS_MAGIC;
    hdr.abi_version = NICFW_ABI_VERSION;
    hdr.addr_len = 0xFFFFFFFFu;
    hdr.max_vi = NICFW_MAX_VI;
    hdr.vi_hwm = NICFW_MAX_VI;
    int a = make(0);
    resize(a, (off_t)full);
    memset(buf, 0, sizeof buf);
    for (size_t off = sizeof hdr; off + sizeof(nicfw_vi_status) <= full; off += sizeof(nicfw_vi_status))
        memset(buf + off - sizeof hdr, 1, sizeof(nicfw_vi_status)); /* state 0x01010101 */
    put(a, buf, full - sizeof hdr, sizeof hdr);
    put(a, &hdr, sizeof hdr, 0);

    int b = make(MFD_ALLOW_SEALING);

    int c = make(MFD_ALLOW_SEALING);
    resize(c, (off_t)full);
    if (fcntl(c, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
        perror("F_ADD_SEALS");
        return 1;
    }

    int d = make(MFD_ALLOW_SEALING);
    resize(d, 16);
    put(d, &hdr, 16, 0);
    if (fcntl(d, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        perror("F_ADD_SEALS");
        return 1;
    }

    FILE *f = fopen(argv[1], "w");
    if (!f || fprintf(f, "ready\n") < 0 || fclose(f) != 0) {
        perror(argv[1]);
        return 1;
    }
    for (unsigned long it = 0;; it++) {
        /* A: full with its header for a moment (a reader gets past the magic and starts
         * on the slots), then cut short and gone: the reader is inside it as it shrinks. */
        resize(a, (off_t)full);
        put(a, &hdr, sizeof hdr, 0); /* zero-filled after the shrink */
        usleep(20);
        resize(a, (off_t)(next() % full));
        resize(a, 0);
        if (it % 64) continue; /* the others change less often: filling them costs */

        size_t nb = next() % sizeof buf;
        fill_random(buf, nb);
        resize(b, (off_t)nb);
        put(b, buf, nb, 0);

        fill_random(buf, full);
        nicfw_status_page *p = (nicfw_status_page *)buf;
        if (next() % 2) { /* past the magic check: the lies must be caught after it */
            p->magic = NICFW_STATUS_MAGIC;
            p->abi_version = NICFW_ABI_VERSION;
            if (next() % 2) p->max_vi = NICFW_MAX_VI;
        }
        put(c, buf, full, 0);
    }
}
