/* Opens a softvia NIC, queries it, closes it and prints OK: proof that an installed
 * libvipl and vipl.h work from outside the source tree. */
#include <vipl.h>

#include <stdio.h>

int main(void) {
    VIP_NIC_HANDLE nic;
    VIP_RETURN r = VipOpenNic(NULL, &nic);
    if (r != VIP_SUCCESS) {
        printf("VipOpenNic: %s\n", VipExtReturnString(r));
        return 1;
    }
    VIP_NIC_ATTRIBUTES na;
    r = VipQueryNic(nic, &na);
    if (r != VIP_SUCCESS) {
        printf("VipQueryNic: %s\n", VipExtReturnString(r));
        return 1;
    }
    if (na.NicAddressLen == 0 || na.MaxTransferSize == 0) {
        printf("VipQueryNic: implausible attributes (address length %u, max transfer %lu)\n",
               (unsigned)na.NicAddressLen, (unsigned long)na.MaxTransferSize);
        return 1;
    }
    printf("nic %.64s: address length %u, max transfer %lu\n", na.Name, (unsigned)na.NicAddressLen,
           (unsigned long)na.MaxTransferSize);
    r = VipCloseNic(nic);
    if (r != VIP_SUCCESS) {
        printf("VipCloseNic: %s\n", VipExtReturnString(r));
        return 1;
    }
    printf("OK\n");
    return 0;
}
