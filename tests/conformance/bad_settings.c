/*
 * bad_settings: a NIC opened with a bad SOFTVIA_PROGRESS, SOFTVIA_FAULTS,
 * SOFTVIA_RETRY_TIMEOUT_MS or SOFTVIA_DEVICE fails with VIP_INVALID_PARAMETER and one
 * line on stderr that names the setting, the value and what is accepted; values at
 * the edge of the accepted range open quietly. Each case is this program run again
 * (tests/bad_settings.h) with the setting in its environment; its exit code is what
 * VipOpenNic(NULL) returned.
 */
#include "helpers.h"

#include "../bad_settings.h"

static const char *rs(int r) { return VipExtReturnString((VIP_RETURN)r); }

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--child") == 0) {
        VIP_NIC_HANDLE nic;
        VIP_RETURN r = VipOpenNic(NULL, &nic);
        if (r == VIP_SUCCESS) VipCloseNic(nic);
        return (int)r;
    }
    th_init("bad_settings", 0);
    for (size_t i = 0; i < sizeof bs_bad / sizeof *bs_bad; i++) {
        bs_expect_refused(&bs_bad[i], VIP_INVALID_PARAMETER, rs);
        /* exactly one line from vipl */
        char err[4096];
        bs_run(&bs_bad[i], err, sizeof err);
        EXPECT(strchr(err, '\n') == err + strlen(err) - 1, "%s=%s: want one line on stderr: '%s'", bs_bad[i].setting,
               bs_bad[i].value, err);
    }
    for (size_t i = 0; i < sizeof bs_good / sizeof *bs_good; i++) bs_expect_accepted(&bs_good[i], VIP_SUCCESS, rs);

    th_phase("a bad device name argument names the argument");
    {
        VIP_NIC_HANDLE nic;
        fflush(stderr);
        EXPECT_RC(VipOpenNic("shm:progress=bogus", &nic), VIP_INVALID_PARAMETER);
    }
    return th_result();
}
