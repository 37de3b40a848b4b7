/* sample.cu — the mask+sample kernel: for every row of a step's logits,
 * apply the row's vocabulary mask, then take the argmax or draw a token
 * after temperature, top-k, top-p and min-p, and report top logprobs.
 *
 * Why it exists: a constrained step must mask before it samples, and
 * copying every row's logits to the host for the CPU sampler moves
 * rows * vocab * 4 bytes per step (64 rows of a 128k vocabulary: 32 MB)
 * across PCIe; this kernel returns a few hundred bytes per row instead.
 * Masks live in a device table that holds each distinct mask once
 * (src/backend/cuda.c uploads a mask the first time a step uses it), and
 * each row names its slot.
 *
 * Semantics: src/engine/sample.h's steps 3-8 (mask, temperature, top-k,
 * top-p, min-p, draw) and its logprobs, with the same tie rules; the CPU
 * reference is sv_sampler_probs, which gives each token's probability, and
 * tests/gpu/test_sample.c compares the two (exact argmax and top lists,
 * the support of the distribution, and frequencies over many draws).
 *
 * How, without sorting. One block per row. Every candidate (allowed, finite
 * logit) gets a 64-bit key: the logit's bits made order-preserving in the
 * high half and ~id in the low half, so keys are distinct and key order is
 * the CPU's order (logit descending, lower id first on ties). Each
 * truncation keeps the keys at or above a threshold, and the threshold is
 * found bit by bit from the top: the largest t whose kept count (top-k) or
 * kept weight (top-p) still reaches the target. That is one pass over the
 * row per bit; after the 32 bits of the logit the search stops when one
 * token holds that logit (the usual case), so a truncation costs about 33
 * passes. min-p is a plain filter (weights are monotone in the logit). The
 * draw walks the survivors in id order: each thread sums a contiguous
 * segment, a scan over the segment sums finds the segment where the
 * running sum passes u * mass, and its thread walks it. All sums are in
 * double, in an order fixed by the block size.
 *
 * Costs and what is left: greedy rows take one pass (two with logprobs, plus
 * one per top logprob); a truncation ~33 passes over the row in L2. Fine
 * for correctness and for greedy or plain-temperature steps; a histogram
 * pre-pass narrowing the threshold's range is the next step for heavy
 * top-p use. */
#include "kernels/common.cuh"

#include <math.h>

#define ST 1024 /* threads per row */

/* ---- keys ------------------------------------------------------------------- */

static __device__ __forceinline__ unsigned long long key_of(float l, int32_t i) {
    l = l + 0.0f; /* -0 becomes +0: equal logits must be ties */
    unsigned u = __float_as_uint(l);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (unsigned long long)(0xFFFFFFFFu - (unsigned)i);
}

static __device__ __forceinline__ int32_t id_of(unsigned long long k) {
    return (int32_t)(0xFFFFFFFFu - (unsigned)(k & 0xFFFFFFFFull));
}

/* One row: its logits and its mask (NULL: everything allowed). */
struct row_t {
    const float *l;
    const uint32_t *m;
    int32_t V;
    /* The logit if token i is allowed, else -inf. */
    __device__ __forceinline__ float cl(int32_t i) const {
        if (m && !((m[i >> 5] >> (i & 31)) & 1u))
            return -INFINITY;
        return l[i];
    }
};

/* ---- block reductions (every thread gets the result) ------------------------------ */

struct reduce_shared {
    double d[32];
    unsigned long long u[32];
    int i[32];
};

static __device__ double sum_d(double v, reduce_shared *sh) {
    return sv_k_block_sum(v, sh->d);
}

static __device__ int sum_i(int v, reduce_shared *sh) { return sv_k_block_sum(v, sh->i); }

static __device__ unsigned long long max_u(unsigned long long v, reduce_shared *sh) {
    for (int o = 16; o > 0; o >>= 1) {
        unsigned long long w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        sh->u[warp] = v;
    __syncthreads();
    unsigned long long r = 0;
    for (int k = 0; k < ST / 32; k++)
        r = sh->u[k] > r ? sh->u[k] : r;
    return r;
}

static __device__ int min_i(int v, reduce_shared *sh) {
    for (int o = 16; o > 0; o >>= 1) {
        int w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w < v ? w : v;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        sh->i[warp] = v;
    __syncthreads();
    int r = sh->i[0];
    for (int k = 1; k < ST / 32; k++)
        r = sh->i[k] < r ? sh->i[k] : r;
    return r;
}

static __device__ int max_i(int v, reduce_shared *sh) { return -min_i(-v, sh); }

/* ---- the passes -------------------------------------------------------------------- */

/* What survives so far: candidates with key >= lo (and, after min-p, weight
 * >= wmin). */
struct filter_t {
    unsigned long long lo;
    double maxl, inv_t, wmin;
};

static __device__ __forceinline__ double weight(const filter_t &f, float l) {
    return exp(((double)l - f.maxl) * f.inv_t);
}

/* Kept count (count) or weight of the candidates with key >= max(t, f.lo). */
static __device__ double measure(const row_t &r, const filter_t &f, unsigned long long t,
                                 bool count, reduce_shared *sh) {
    if (t < f.lo)
        t = f.lo;
    double acc = 0.0;
    for (int32_t i = threadIdx.x; i < r.V; i += ST) {
        float l = r.cl(i);
        if (!(l > -INFINITY) || key_of(l, i) < t)
            continue;
        acc += count ? 1.0 : weight(f, l);
    }
    return sum_d(acc, sh);
}

/* The largest key t with measure(t) >= target: the kept set is then the
 * keys >= max(t, f.lo). Built bit by bit from the top; after the logit's
 * 32 bits, a value held by one candidate ends the search at its key. */
static __device__ unsigned long long select_key(const row_t &r, const filter_t &f, bool count,
                                                double target, reduce_shared *sh) {
    unsigned long long ans = 0;
    for (int bit = 63; bit >= 0; bit--) {
        unsigned long long c = ans | (1ull << bit);
        if (measure(r, f, c, count, sh) >= target)
            ans = c;
        if (bit == 32) {
            /* How many candidates (>= f.lo) hold the value ans's high half
             * names, and the largest such key. */
            unsigned hi = (unsigned)(ans >> 32);
            int n = 0;
            unsigned long long best = 0;
            for (int32_t i = threadIdx.x; i < r.V; i += ST) {
                float l = r.cl(i);
                if (!(l > -INFINITY))
                    continue;
                unsigned long long k = key_of(l, i);
                if (k >= f.lo && (unsigned)(k >> 32) == hi) {
                    n++;
                    best = k > best ? k : best;
                }
            }
            n = sum_i(n, sh);
            best = max_u(best, sh);
            if (n == 1)
                return best;
        }
    }
    return ans;
}

/* ---- the kernel ----------------------------------------------------------------------- */

static __global__ void __launch_bounds__(ST)
sample_kernel(int32_t vocab, const float *logits, const uint32_t *mask_table, int32_t n_masks,
              const sv_cuda_sample_params_t *params, sv_cuda_sample_out_t *outs) {
    __shared__ reduce_shared sh;
    __shared__ double seg_sum[ST];
    const int tid = threadIdx.x;
    const int32_t rowi = blockIdx.x;
    const sv_cuda_sample_params_t p = params[rowi];
    sv_cuda_sample_out_t *o = outs + rowi;
    const int32_t words = (vocab + 31) / 32;

    if (p.mask < -1 || p.mask >= n_masks || (p.mask >= 0 && !mask_table)) {
        if (tid == 0) {
            o->id = -1;
            o->status = SV_ERR_ARG;
            o->n_top = 0;
        }
        return;
    }
    row_t r;
    r.l = logits + (size_t)rowi * (size_t)vocab;
    r.m = p.mask >= 0 ? mask_table + (size_t)p.mask * (size_t)words : NULL;
    r.V = vocab;

    /* Pass 1: bad logits, the argmax key, the number of candidates. */
    int bad = 0, n = 0;
    unsigned long long kmax = 0;
    for (int32_t i = tid; i < vocab; i += ST) {
        float l = r.cl(i);
        if (isnan(l) || l == INFINITY) {
            bad = 1;
            continue;
        }
        if (l == -INFINITY)
            continue;
        n++;
        unsigned long long k = key_of(l, i);
        kmax = k > kmax ? k : kmax;
    }
    bad = sum_i(bad, &sh);
    n = sum_i(n, &sh);
    kmax = max_u(kmax, &sh);
    if (bad || n == 0) {
        if (tid == 0) {
            o->id = -1;
            o->status = bad ? SV_ERR_ARG : SV_ERR_EMPTY;
            o->n_top = 0;
        }
        return;
    }
    const int32_t arg = id_of(kmax);
    const float maxl = r.l[arg];

    /* Logprobs: log Z over the candidates, then the top list, one pass per
     * entry (the largest key below the previous one). */
    double log_z = 0.0;
    int n_top = p.n_logprobs < n ? p.n_logprobs : n;
    if (n_top > SV_CUDA_SAMPLE_MAX_LOGPROBS)
        n_top = SV_CUDA_SAMPLE_MAX_LOGPROBS;
    if (p.n_logprobs > 0) {
        double z = 0.0;
        for (int32_t i = tid; i < vocab; i += ST) {
            float l = r.cl(i);
            if (l > -INFINITY)
                z += exp((double)l - (double)maxl);
        }
        z = sum_d(z, &sh);
        log_z = (double)maxl + log(z);
        unsigned long long prev = ~0ull;
        for (int t = 0; t < n_top; t++) {
            unsigned long long best = 0;
            for (int32_t i = tid; i < vocab; i += ST) {
                float l = r.cl(i);
                if (!(l > -INFINITY))
                    continue;
                unsigned long long k = key_of(l, i);
                if (k < prev && k > best)
                    best = k;
            }
            best = max_u(best, &sh);
            if (tid == 0) {
                int32_t id = id_of(best);
                o->top_id[t] = id;
                o->top_logprob[t] = (float)((double)r.l[id] - log_z);
            }
            prev = best;
        }
    }

    int32_t chosen = arg;
    if (p.temperature > 0.0f) {
        filter_t f;
        f.lo = 0;
        f.maxl = (double)maxl;
        f.inv_t = 1.0 / (double)p.temperature;
        f.wmin = 0.0;
        if (p.top_k > 0 && p.top_k < n) /* step 5 */
            f.lo = select_key(r, f, true, (double)p.top_k, &sh);
        if (p.top_p < 1.0f) { /* step 6 */
            double mass = measure(r, f, 0, false, &sh);
            unsigned long long t = select_key(r, f, false, (double)p.top_p * mass, &sh);
            f.lo = t > f.lo ? t : f.lo;
        }
        if (p.min_p > 0.0f) /* step 7 */
            f.wmin = (double)p.min_p;

        /* Step 8: the survivors' weights in id order, each thread one
         * contiguous segment. */
        const int32_t L = (vocab + ST - 1) / ST;
        const int32_t b0 = tid * L < vocab ? tid * L : vocab;
        const int32_t b1 = b0 + L < vocab ? b0 + L : vocab;
        double seg = 0.0;
        int last_pos = -1; /* the last survivor with a weight, for rounding */
        for (int32_t i = b0; i < b1; i++) {
            float l = r.cl(i);
            if (!(l > -INFINITY) || key_of(l, i) < f.lo)
                continue;
            double w = weight(f, l);
            if (w >= f.wmin) {
                seg += w;
                if (w > 0.0)
                    last_pos = i;
            }
        }
        seg_sum[tid] = seg;
        __syncthreads();
        /* The mass, summed in segment order. */
        __shared__ double warp_base[ST / 32 + 1];
        if (tid < ST / 32) {
            double a = 0.0;
            for (int j = 0; j < 32; j++)
                a += seg_sum[tid * 32 + j];
            sh.d[tid] = a;
        }
        __syncthreads();
        if (tid == 0) {
            double b = 0.0;
            for (int w = 0; w < ST / 32; w++) {
                warp_base[w] = b;
                b += sh.d[w];
            }
            warp_base[ST / 32] = b;
        }
        __syncthreads();
        const double mass = warp_base[ST / 32];
        double excl = warp_base[tid / 32];
        for (int j = (tid / 32) * 32; j < tid; j++)
            excl += seg_sum[j];
        const double u = (double)(p.draw >> 11) * 0x1.0p-53;
        const double target = u * mass;
        int mine = (excl <= target && excl + seg > target) ? tid : ST;
        int first = min_i(mine, &sh);
        int fallback = max_i(last_pos, &sh);
        __shared__ int picked;
        if (tid == 0)
            picked = fallback;
        __syncthreads();
        if (first < ST && tid == first) {
            double s = 0.0;
            for (int32_t i = b0; i < b1; i++) {
                float l = r.cl(i);
                if (!(l > -INFINITY) || key_of(l, i) < f.lo)
                    continue;
                double w = weight(f, l);
                if (w >= f.wmin) {
                    s += w;
                    if (excl + s > target) { /* reached: excl + seg > target */
                        picked = i;
                        break;
                    }
                }
            }
        }
        __syncthreads();
        if (picked >= 0)
            chosen = picked;
    }
    if (tid == 0) {
        o->id = chosen;
        o->status = SV_OK;
        o->n_top = p.n_logprobs > 0 ? n_top : 0;
        o->logprob = p.n_logprobs > 0 ? (float)((double)r.l[chosen] - log_z) : 0.0f;
    }
}

extern "C" sv_status sv_k_sample(cudaStream_t stream, int32_t rows, int32_t vocab,
                                 const float *logits, const uint32_t *mask_table, int32_t n_masks,
                                 const sv_cuda_sample_params_t *params, sv_cuda_sample_out_t *out,
                                 sv_error_t *err) {
    if (rows < 0 || vocab < 1 || n_masks < 0 || (n_masks > 0 && !mask_table) ||
        (rows > 0 && (!logits || !params || !out)))
        return sv_error_set(err, SV_ERR_ARG, -1, "sample: bad arguments (rows %d, vocab %d)",
                            (int)rows, (int)vocab);
    if (rows == 0)
        return SV_OK;
    sample_kernel<<<(unsigned)rows, ST, 0, stream>>>(vocab, logits, mask_table, n_masks, params,
                                                      out);
    return sv_k_check_launch("sample", err);
}
