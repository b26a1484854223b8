/*
 * bad_settings.h -- the environment settings a NIC is opened with, each set to bad
 * values, for the tests that check how a program hears about them: the program runs
 * again (as a real process, /proc/self/exe) with one setting changed, and the test
 * checks its exit code and that its stderr names the setting and the value.
 * tests/conformance/bad_settings.c (VipOpenNic) and tests/am/am_bad_config.c (AM_Init).
 */
#ifndef SOFTVIA_BAD_SETTINGS_H
#define SOFTVIA_BAD_SETTINGS_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_core.h"

typedef struct {
    const char *setting, *value;
    const char *accepted; /* a piece of the message saying what is accepted */
} bs_case;

/* Every value here is refused; the message must name the setting and the value. */
static const bs_case bs_bad[] = {
    {"SOFTVIA_PROGRESS", "bogus", "inline or thread"},
    {"SOFTVIA_PROGRESS", "Thread", "inline or thread"},
    {"SOFTVIA_FAULTS", "drop=2", "probabilities 0 to 1"},
    {"SOFTVIA_FAULTS", "nosuch=1", "keys drop, dup"},
    {"SOFTVIA_FAULTS", "drop", "key=value"},
    {"SOFTVIA_RETRY_TIMEOUT_MS", "0", "1 to 3600000"},
    {"SOFTVIA_RETRY_TIMEOUT_MS", "abc", "1 to 3600000"},
    {"SOFTVIA_RETRY_TIMEOUT_MS", "3600001", "1 to 3600000"},
    {"SOFTVIA_RETRY_TIMEOUT_MS", "-5", "1 to 3600000"},
    {"SOFTVIA_RETRY_TIMEOUT_MS", "10ms", "1 to 3600000"},
    {"SOFTVIA_DEVICE", "nosuch", "no device kind"},
    {"SOFTVIA_DEVICE", "shm:progress=bogus", "inline or thread"},
    {"SOFTVIA_DEVICE", "shm:txbatch=999", "0 to 256"},
    {"SOFTVIA_DEVICE", "shm:nosuch=1", "no option"},
    {"SOFTVIA_DEVICE", "shm:", "key=value"},
};

/* Values at the edge of what is accepted: the open succeeds. */
static const bs_case bs_good[] = {
    {"SOFTVIA_RETRY_TIMEOUT_MS", "3600000", NULL},
    {"SOFTVIA_RETRY_TIMEOUT_MS", "1", NULL},
    {"SOFTVIA_PROGRESS", "thread", NULL},
    {"SOFTVIA_FAULTS", "", NULL},
};

static const char *const bs_settings[] = {"SOFTVIA_PROGRESS", "SOFTVIA_FAULTS", "SOFTVIA_RETRY_TIMEOUT_MS",
                                          "SOFTVIA_DEVICE"};

/* Runs this program again with "--child", the settings cleared but for c's, stderr in
 * err. Returns its exit code, or -1 if it did not exit (signal). */
static inline int bs_run(const bs_case *c, char *err, size_t errsz) {
    char path[] = "/tmp/softvia-bs-XXXXXX";
    int efd = mkstemp(path);
    if (efd < 0) FATAL("mkstemp: %s", strerror(errno));
    unlink(path);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) FATAL("fork: %s", strerror(errno));
    if (pid == 0) {
        for (size_t i = 0; i < sizeof bs_settings / sizeof *bs_settings; i++) unsetenv(bs_settings[i]);
        setenv(c->setting, c->value, 1);
        dup2(efd, 2);
        execl("/proc/self/exe", th_prog, "--child", (char *)NULL);
        _exit(126);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    ssize_t n = pread(efd, err, errsz - 1, 0);
    err[n > 0 ? n : 0] = 0;
    close(efd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Checks a refused case: exit code want, stderr names the setting and the value. */
static inline void bs_expect_refused(const bs_case *c, int want, const char *(*name_of)(int)) {
    char err[4096], ph[200];
    snprintf(ph, sizeof ph, "%s=%s", c->setting, c->value);
    th_phase(ph);
    int rc = bs_run(c, err, sizeof err);
    EXPECT(rc == want, "%s: exit code %d (%s), want %d (%s); stderr: '%s'", ph, rc, rc < 0 ? "signal" : name_of(rc),
           want, name_of(want), err);
    EXPECT(strstr(err, c->setting) != NULL, "%s: stderr does not name %s: '%s'", ph, c->setting, err);
    char quoted[160];
    snprintf(quoted, sizeof quoted, "'%s'", c->value);
    EXPECT(strstr(err, quoted) != NULL, "%s: stderr does not name the value %s: '%s'", ph, quoted, err);
    EXPECT(strstr(err, c->accepted) != NULL, "%s: stderr does not say what is accepted ('%s'): '%s'", ph, c->accepted,
           err);
}

/* Checks an accepted case: exit code want (success), nothing on stderr. */
static inline void bs_expect_accepted(const bs_case *c, int want, const char *(*name_of)(int)) {
    char err[4096], ph[200];
    snprintf(ph, sizeof ph, "%s=%s (accepted)", c->setting, c->value);
    th_phase(ph);
    int rc = bs_run(c, err, sizeof err);
    EXPECT(rc == want, "%s: exit code %d (%s), want %d (%s); stderr: '%s'", ph, rc, rc < 0 ? "signal" : name_of(rc),
           want, name_of(want), err);
    EXPECT(err[0] == 0, "%s: stderr: '%s'", ph, err);
}

#endif /* SOFTVIA_BAD_SETTINGS_H */
