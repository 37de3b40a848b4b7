/* device.c — --device: picking the CPU or CUDA backend (see device.h). */
#include "device.h"

#include <stdlib.h>
#include <string.h>

#include "../backend/cpu.h"
#ifdef SV_HAVE_CUDA
#include "../backend/cuda.h"
#endif

/* The N of "cuda:N" (0 for "cuda"), or -1 when device is not a CUDA name. */
static int cuda_index(const char *device) {
    if (!strcmp(device, "cuda"))
        return 0;
    if (strncmp(device, "cuda:", 5) || !device[5])
        return -1;
    char *end;
    long n = strtol(device + 5, &end, 10);
    if (*end || n < 0 || n > 1023 || device[5] < '0' || device[5] > '9')
        return -1;
    return (int)n;
}

bool sv_cli_device_valid(const char *device) {
    return device &&
           (!strcmp(device, "cpu") || !strcmp(device, "auto") || cuda_index(device) >= 0);
}

uint32_t sv_cli_default_prefetch_threads(const sv_backend_t *be) {
    return be && be->ops->name && !strcmp(be->ops->name, "cpu") ? 0 : 1;
}

bool sv_cli_parse_cpu_kernels(const char *s, sv_cpu_kernels *out) {
    if (!strcmp(s, "ref")) *out = SV_CPU_KERNELS_REF;
    else if (!strcmp(s, "int8")) *out = SV_CPU_KERNELS_INT8;
    else return false;
    return true;
}

static sv_status make_cpu(int threads, sv_cpu_kernels kernels, sv_backend_t **out, sv_error_t *err) {
    sv_cpu_config_t cc = {.n_threads = threads, .kernels = kernels};
    return sv_cpu_backend_create(&cc, out, err);
}

sv_status sv_cli_backend_create(const char *device, int threads, sv_cpu_kernels kernels, bool cuda_fp32,
                                sv_backend_t **out, sv_error_t *err) {
    if (!device)
        device = "auto";
    if (!sv_cli_device_valid(device))
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "--device: '%s' is not cpu, cuda, cuda:N or auto", device);
    if (!strcmp(device, "cpu"))
        return make_cpu(threads, kernels, out, err);
#ifdef SV_HAVE_CUDA
    int n = sv_cuda_device_count();
    sv_cuda_config_t cfg = {.device = 0, .bf16 = !cuda_fp32};
    if (!strcmp(device, "auto"))
        return n > 0 ? sv_cuda_backend_create(&cfg, out, err) : make_cpu(threads, kernels, out, err);
    int idx = cuda_index(device);
    if (idx >= n)
        return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                            "--device %s: %d CUDA device%s present", device, n,
                            n == 1 ? "" : "s");
    cfg.device = idx;
    return sv_cuda_backend_create(&cfg, out, err);
#else
    (void)cuda_fp32;
    if (!strcmp(device, "auto"))
        return make_cpu(threads, kernels, out, err);
    return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                        "--device %s: this build of sieve has no CUDA backend (configure with "
                        "-DSV_CUDA=ON on a machine with the CUDA toolkit)",
                        device);
#endif
}
