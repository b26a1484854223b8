/* A program on the same-host path (softvia_shm.h) built against an installed softvia: a
 * job of one process (not launched): its heap, an export of its stack, a call to itself,
 * a hardware fetch-add on its heap. Prints OK. */
#include <softvia_shm.h>
#include <stdio.h>

static int twice(int src, const uint64_t args[SV_SHM_CALL_ARGS], int64_t *result, void *ctx) {
    (void)src;
    (void)ctx;
    *result = (int64_t)args[0] * 2;
    return 0;
}

int main(void) {
    sv_shm_config cfg;
    sv_shm_config_default(&cfg);
    cfg.heap_size = 1 << 20;
    if (sv_shm_init(&cfg) != 0) {
        printf("shm_app: sv_shm_init: %s\n", sv_shm_last_error());
        return 1;
    }
    long stack_word = 5;
    sv_shm_segid_t seg;
    sv_shm_export_info info;
    uint64_t args[SV_SHM_CALL_ARGS] = {21};
    int64_t doubled = 0, old = -1;
    const uint64_t word = (uint64_t)sv_shm_translate(0, cfg.heap_base, 8);
    if (sv_shm_export(&stack_word, sizeof stack_word, 0, 7, &seg) || sv_shm_find_export(0, (uint64_t)&stack_word, 8, &info) ||
        info.tag != 7 || sv_shm_set_handler(0, twice, NULL) || sv_shm_call(0, 0, args, &doubled) || doubled != 42 ||
        word != cfg.heap_base || sv_shm_fetch_add64(0, word, 3, &old) || old != 0 || sv_shm_finalize()) {
        printf("shm_app: %s\n", sv_shm_last_error());
        return 1;
    }
    printf("shm_app: %d process(es)\nOK\n", sv_shm_size() == 0 ? 1 : sv_shm_size());
    return 0;
}
