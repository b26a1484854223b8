/* boot_app: links softvia::boot from the installed package; alone, it is a job of one. */
#include <softvia_boot.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    int rank = -1, size = -1;
    if (sv_boot_init(&rank, &size) != 0 || rank != 0 || size != 1 || strcmp(sv_boot_backend(), "none") != 0) {
        fprintf(stderr, "boot_app: rank %d size %d back end %s: %s\n", rank, size, sv_boot_backend(),
                sv_boot_last_error());
        return 1;
    }
    printf("boot_app: a job of one (%s)\nOK\n", sv_boot_backend());
    return 0;
}
