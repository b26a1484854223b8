/* common.c - what the front (boot.c) and both back ends (jobdir.c, pmix.c) share: the
 * state, the reason of the last failure, clocks and hex. */
#define _GNU_SOURCE
#include "softvia_boot.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "internal.h"

struct sv_boot_state sv_boot_g;
static char last_error[512];

void sv_boot_clear_error(void) { last_error[0] = '\0'; }

int sv_boot_fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return rc;
}

const char *sv_boot_last_error(void) { return last_error; }

int64_t sv_boot_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t sv_boot_deadline(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : sv_boot_now_ns() + (int64_t)timeout_ms * 1000000;
}

void sv_boot_nap_ns(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
    /* An early wake-up is harmless: the caller just polls again sooner. */
    nanosleep(&ts, NULL);
}

void sv_boot_hex(const void *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 0xf];
    }
    out[2 * n] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long sv_boot_unhex(const char *s, size_t slen, void *out, size_t cap)
{
    unsigned char *o = out;
    if (slen == 0 || slen % 2 != 0 || slen / 2 > cap)
        return -1;
    for (size_t i = 0; i < slen; i += 2) {
        int hi = hexval(s[i]), lo = hexval(s[i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        o[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    return (long)(slen / 2);
}
