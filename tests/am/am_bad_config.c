/*
 * am_bad_config: AM_Init with a bad SOFTVIA_PROGRESS, SOFTVIA_FAULTS,
 * SOFTVIA_RETRY_TIMEOUT_MS, SOFTVIA_DEVICE, AMVIA_STEERING, AMVIA_LISTEN or
 * AMVIA_CONNECT_TIMEOUT_MS returns AM_ERR_BAD_ARG (bad
 * configuration, not AM_ERR_RESOURCE), and the program's stderr names the setting, the
 * value and what is accepted. Each case is this program run again
 * (tests/bad_settings.h); its exit code is what AM_Init returned.
 */
#include "am_test.h"

#include "../bad_settings.h"

/* AM's own settings (docs/am.md), refused by AM_Init alone. */
static const bs_case am_bad[] = {
    {"AMVIA_STEERING", "yes", "0 and 1"},
    {"AMVIA_STEERING", "2", "0 and 1"},
    {"AMVIA_LISTEN", "off", "0 and 1"},
    {"AMVIA_CONNECT_TIMEOUT_MS", "0", "1 to 3600000"},
    {"AMVIA_CONNECT_TIMEOUT_MS", "20s", "1 to 3600000"},
    {"AMVIA_CONNECT_TIMEOUT_MS", "-1", "1 to 3600000"},
};
static const bs_case am_good[] = {
    {"AMVIA_STEERING", "0", ""},
    {"AMVIA_LISTEN", "1", ""},
    {"AMVIA_CONNECT_TIMEOUT_MS", "3600000", ""},
};

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--child") == 0) {
        int rc = AM_Init();
        if (rc == AM_OK) AM_Terminate();
        return rc;
    }
    at_init("am_bad_config", 0);
    for (size_t i = 0; i < sizeof bs_bad / sizeof *bs_bad; i++) bs_expect_refused(&bs_bad[i], AM_ERR_BAD_ARG, AMX_ErrorString);
    for (size_t i = 0; i < sizeof bs_good / sizeof *bs_good; i++) bs_expect_accepted(&bs_good[i], AM_OK, AMX_ErrorString);
    for (size_t i = 0; i < sizeof am_bad / sizeof *am_bad; i++) bs_expect_refused(&am_bad[i], AM_ERR_BAD_ARG, AMX_ErrorString);
    for (size_t i = 0; i < sizeof am_good / sizeof *am_good; i++) bs_expect_accepted(&am_good[i], AM_OK, AMX_ErrorString);
    return th_result();
}
