/* device.c — --device: picking the CPU or CUDA backend (see device.h). */
#include "device.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/backend/cpu.h"
#ifdef SV_HAVE_CUDA
#include "src/backend/cuda.h"
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

bool sv_cli_parse_utilization(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || !(v > 0.0 && v <= 1.0))
        return false;
    *out = v;
    return true;
}

/* The fraction frac of a CUDA device's memory, less what is in use and the reserve. */
static sv_status gpu_kv_bytes(sv_backend_t *be, double frac, uint64_t *kv_bytes, sv_error_t *err) {
#ifdef SV_HAVE_CUDA
    if (sv_backend_is_cuda(be)) {
        size_t free_b = 0, total_b = 0;
        sv_status st = sv_cuda_device_info(be, NULL, 0, &free_b, &total_b, err);
        if (st)
            return st;
        double used = (double)(total_b - free_b), want = frac * (double)total_b;
        double left = want - used - (double)((uint64_t)SV_CLI_GPU_RESERVE_MB << 20);
        if (left < (double)(1u << 20))
            return sv_error_set(err, SV_ERR_BUDGET, -1,
                                "--gpu-memory-utilization %.2f: %.2f of %.2f GiB are in use already "
                                "(the weights, scratch, other processes); nothing is left for the KV "
                                "cache after a %d MiB reserve",
                                frac, used / (1u << 30), (double)total_b / (1u << 30),
                                SV_CLI_GPU_RESERVE_MB);
        *kv_bytes = (uint64_t)left;
        return SV_OK;
    }
#endif
    (void)be;
    (void)frac;
    (void)kv_bytes;
    return sv_error_set(err, SV_ERR_UNSUPPORTED, -1,
                        "--gpu-memory-utilization applies to a CUDA device only (--device cuda)");
}

sv_status sv_cli_kv_bytes(sv_backend_t *be, uint64_t kv_mb, double gpu_util, uint64_t *kv_bytes,
                          sv_error_t *err) {
    if (kv_mb && gpu_util > 0.0)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "give --kv-memory-mb or --gpu-memory-utilization, not both");
    if (gpu_util > 0.0 || (!kv_mb && !strcmp(be->ops->name, "cuda")))
        return gpu_kv_bytes(be, gpu_util > 0.0 ? gpu_util : SV_CLI_GPU_UTILIZATION, kv_bytes, err);
    *kv_bytes = (kv_mb ? kv_mb : SV_CLI_KV_MB) << 20;
    return SV_OK;
}

#ifdef SV_HAVE_CUDA
typedef struct cli_dsampler {
    sv_engine_dsampler_t ds; /* first: the engine's view */
    sv_cuda_sampler_t *s;
} cli_dsampler_t;

static void ds_begin_step(void *ud) { sv_cuda_sampler_begin_step(((cli_dsampler_t *)ud)->s); }

static sv_status ds_mask_slot(void *ud, uint64_t key_hi, uint64_t key_lo, const uint32_t *mask,
                              int32_t *slot, sv_error_t *err) {
    return sv_cuda_sampler_mask_slot(((cli_dsampler_t *)ud)->s, key_hi, key_lo, mask, slot, err);
}

static sv_status ds_sample(void *ud, int32_t rows, const float *logits,
                           const sv_cuda_sample_params_t *params, sv_cuda_sample_out_t *out,
                           sv_error_t *err) {
    return sv_cuda_sample(((cli_dsampler_t *)ud)->s, rows, logits, params, out, err);
}
#endif

sv_status sv_cli_dsampler_create(sv_backend_t *be, int32_t vocab, sv_engine_dsampler_t **out,
                                 sv_error_t *err) {
    *out = NULL;
#ifdef SV_HAVE_CUDA
    if (!sv_backend_is_cuda(be))
        return SV_OK;
    cli_dsampler_t *d = calloc(1, sizeof *d);
    if (!d)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    /* 64 rows a call: the engine's logits come 64 rows a product
     * (src/model/llama.c), so a call is one product's rows. */
    sv_status st = sv_cuda_sampler_create(be, 64, vocab, SV_CLI_DSAMPLER_MASKS, &d->s, err);
    if (st) {
        free(d);
        return st;
    }
    d->ds = (sv_engine_dsampler_t){.ud = d, .max_rows = 64, .begin_step = ds_begin_step,
                                   .mask_slot = ds_mask_slot, .sample = ds_sample};
    *out = &d->ds;
#else
    (void)be;
    (void)vocab;
    (void)err;
#endif
    return SV_OK;
}

void sv_cli_dsampler_destroy(sv_engine_dsampler_t *d) {
#ifdef SV_HAVE_CUDA
    if (!d)
        return;
    cli_dsampler_t *c = (cli_dsampler_t *)d;
    sv_cuda_sampler_destroy(c->s);
    free(c);
#else
    (void)d;
#endif
}

bool sv_cli_graph_stats(const sv_backend_t *be, uint64_t *opened, uint64_t *replayed, uint64_t *captured) {
#ifdef SV_HAVE_CUDA
    if (sv_backend_is_cuda(be)) {
        sv_cuda_graph_stats_t g;
        sv_cuda_graph_stats(be, &g);
        *opened = g.opened, *replayed = g.replayed, *captured = g.captured;
        return true;
    }
#endif
    (void)be;
    *opened = *replayed = *captured = 0;
    return false;
}
