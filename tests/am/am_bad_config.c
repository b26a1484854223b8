/*
 * am_bad_config: AM_Init with a bad SOFTVIA_PROGRESS, SOFTVIA_FAULTS,
 * SOFTVIA_RETRY_TIMEOUT_MS or SOFTVIA_DEVICE returns AM_ERR_BAD_ARG (bad
 * configuration, not AM_ERR_RESOURCE), and the program's stderr names the setting, the
 * value and what is accepted. Each case is this program run again
 * (tests/bad_settings.h); its exit code is what AM_Init returned.
 */
#include "am_test.h"

#include "../bad_settings.h"

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--child") == 0) {
        int rc = AM_Init();
        if (rc == AM_OK) AM_Terminate();
        return rc;
    }
    at_init("am_bad_config", 0);
    for (size_t i = 0; i < sizeof bs_bad / sizeof *bs_bad; i++) bs_expect_refused(&bs_bad[i], AM_ERR_BAD_ARG, AMX_ErrorString);
    for (size_t i = 0; i < sizeof bs_good / sizeof *bs_good; i++) bs_expect_accepted(&bs_good[i], AM_OK, AMX_ErrorString);
    return th_result();
}
