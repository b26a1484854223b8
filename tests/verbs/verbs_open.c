/*
 * verbs_open: VipOpenNic over the verbs transport, on any host. Bad names and options
 * are VIP_INVALID_PARAMETER; a host without an RDMA device (this kind of CI host) gets
 * VIP_ERROR_RESOURCE and a reason on stderr, never a crash; a host with one opens a NIC
 * whose address is a 20-byte verbs address.
 */
#include "../conformance/helpers.h" /* first: it sets _GNU_SOURCE */

#include <infiniband/verbs.h>

static int host_has_rdma_device(void) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list) ibv_free_device_list(list);
    return list && n > 0;
}

int main(void) {
    th_init("verbs_open", 60);
    VIP_NIC_HANDLE nic;

    th_phase("bad options");
    const char *bad[] = {"verbs:port=x",    "verbs:port=65536", "verbs:addr=1.2.3", "verbs:addr=",
                         "verbs:dev=",      "verbs:mtu=9000",   "verbs:port",       "verbs:port=1,port=2",
                         "verbs:progress=x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT(VipOpenNic(bad[i], &nic) == VIP_INVALID_PARAMETER, "VipOpenNic(\"%s\") is not VIP_INVALID_PARAMETER", bad[i]);

    th_phase("open");
    if (!host_has_rdma_device()) {
        printf("no RDMA device here: opening must fail cleanly\n");
        EXPECT_RC(VipOpenNic("verbs", &nic), VIP_ERROR_RESOURCE);
        EXPECT_RC(VipOpenNic("verbs:addr=198.18.0.1,port=7000", &nic), VIP_ERROR_RESOURCE);
        EXPECT_RC(VipOpenNic("verbs:dev=rxe0,progress=thread", &nic), VIP_ERROR_RESOURCE);
        return th_result();
    }
    EXPECT_RC(VipOpenNic("verbs:dev=softvia-no-such-dev", &nic), VIP_ERROR_RESOURCE);
    CHECK(VipOpenNic("verbs", &nic));
    VIP_NIC_ATTRIBUTES na;
    CHECK(VipQueryNic(nic, &na));
    EXPECT(na.NicAddressLen == 20, "NicAddressLen %u, want 20", na.NicAddressLen);
    EXPECT(na.LocalNicAddress[0] == 4, "address kind %u, want 4 (verbs)", na.LocalNicAddress[0]);
    CHECK(VipCloseNic(nic));
    return th_result();
}
