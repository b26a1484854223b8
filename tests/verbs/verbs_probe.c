/*
 * verbs_probe: exit 0 when this host has an RDMA device the verbs transport can try,
 * else print why and exit 77 (skip). run_on_rdma.sh runs it before a device test.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL || n == 0) {
        int e = errno;
        printf("SKIP: no RDMA device (kernel without rxe/siw)%s%s\n", list ? "" : ": ", list ? "" : strerror(e));
        if (list) ibv_free_device_list(list);
        return 77;
    }
    for (int i = 0; i < n; i++) printf("RDMA device: %s\n", ibv_get_device_name(list[i]));
    ibv_free_device_list(list);
    return 0;
}
