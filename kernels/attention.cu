/* attention.cu — causal attention over the paged KV cache, for a ragged
 * batch (decode rows and prefill chunks of many sequences in one launch).
 *
 * The algorithm is the CPU backend's (src/backend/cpu.c): for each (row,
 * query head), a streaming ("flash") softmax over the row's positions
 * 0 .. pos[row] in tiles of ATT_TILE keys with a running maximum, so no
 * score buffer is needed and a row's result depends only on its query and
 * its own sequence's keys and values. Grouped-query attention maps query
 * head h to kv head h / (n_heads / n_kv_heads). The block table is read
 * once per tile: a tile's physical rows are resolved into shared memory
 * before any key is read, so paging changes where keys come from, never
 * the arithmetic.
 *
 * One block of ATT_THREADS threads per (row, query head, split); a tile is
 * one key per thread, so a tile costs a handful of barriers, not a loop per
 * key:
 * - scores: thread t computes key t's whole dot product with the query
 *   (in shared memory), reading the key row VEC floats at a time, the
 *   products added in dimension order;
 * - the tile's maximum and its sum of exponentials are block reductions
 *   (common.cuh: a fixed order);
 * - values: the threads form ATT_THREADS / T key groups of T threads, T =
 *   head_dim / VEC (at most ATT_THREADS): thread (g, i) owns dimensions
 *   i·VEC .. i·VEC + VEC - 1 and adds the tile's keys g, g + G, g + 2G, ...
 *   into registers; the groups' sums are added in group order at the end.
 * Every order above is fixed by the shape alone, so a row's result is the
 * same whatever rows share the launch. VEC is 4 (16-byte loads) when the
 * head size and the cache allow it, else 1.
 *
 * Split-K ("flash decoding"). One block walking a whole context leaves a
 * GPU idle when the rows are few (a decode step of one sequence has only
 * n_heads blocks). When the caller bounds the contexts (shape->max_ctx),
 * a row's context is cut into splits of ATT_SPLIT positions, one block
 * each (grid (rows * n_heads, splits)); a block writes its split's running
 * maximum, sum and unnormalised accumulators to a scratch buffer, then
 * counts itself done in a per-(row, head) counter; the block that
 * completes the count combines the row's splits (whichever block that is,
 * the arithmetic is the same: block reductions over the splits, then each
 * dimension in split order), writes the output and resets the counter for
 * the next launch. The splits of a row depend on
 * its own context length only, never on the batch. A row of one split
 * writes its output directly. The scratch and the counters (owned by the
 * backend) serve as many rows at a time as fit (row groups, one launch
 * each).
 *
 * The output may also be written rounded to bf16 (obf), the input of the
 * next product in the CUDA backend's bf16 mode (src/backend/cuda.c).
 *
 * What is left: every query head re-reads its kv head's keys (GQA groups
 * share them through L2: the blocks of one row's heads are adjacent in the
 * grid, so they run together); one block per kv head serving its whole
 * group would read them once. */
#include "kernels/common.cuh"

#include <math.h>

#define ATT_THREADS 128
#define ATT_TILE ATT_THREADS /* keys per tile: one per thread */
#define ATT_SPLIT 128        /* positions per split (a multiple of ATT_TILE) */
/* G key groups of head_dim accumulators: G * head_dim <= ATT_THREADS * VEC
 * when G > 1, head_dim <= SV_K_MAX_HEAD_DIM when G == 1. */
#define ATT_GSUM (SV_K_MAX_HEAD_DIM > ATT_THREADS * 4 ? SV_K_MAX_HEAD_DIM : ATT_THREADS * 4)

/* VEC consecutive floats from p (16-byte aligned when VEC is 4). */
template <int VEC> struct vecf {
    float v[VEC];
    static __device__ __forceinline__ vecf load(const float *p) {
        vecf r;
        if (VEC == 4) {
            float4 t = *reinterpret_cast<const float4 *>(p);
            r.v[0] = t.x, r.v[1] = t.y, r.v[2] = t.z, r.v[3] = t.w;
        } else {
#pragma unroll
            for (int i = 0; i < VEC; i++)
                r.v[i] = p[i];
        }
        return r;
    }
};

/* Dimension chunks per thread in the value phase: head_dim / VEC chunks
 * over min(head_dim / VEC, ATT_THREADS) threads. */
#define ATT_CHUNKS(VEC) ((SV_K_MAX_HEAD_DIM / (VEC) + ATT_THREADS - 1) / ATT_THREADS)

/* Writes a row head's output (and its bf16 rounding when obf). */
static __device__ __forceinline__ void att_store(float *o, uint16_t *obf, int32_t d, float v) {
    o[d] = v;
    if (obf)
        obf[d] = sv_k_bf16(v);
}

/* One block per (row, query head, split), blockIdx.x = row * n_heads + head:
 * the heads of one row, and so the query heads sharing a kv head (GQA), run
 * side by side and find that head's keys and values in L2.
 * group = n_heads / n_kv_heads. With gridDim.y == 1 a block takes the
 * row's whole context; else split blockIdx.y of the row (ATT_SPLIT
 * positions), part holds, per (row, head, split), hd + 2 floats (maximum,
 * sum, accumulators) and count one counter per (row, head). A row with
 * more splits than gridDim.y is a bad position (the caller's max_ctx was
 * wrong). A bad row writes zeros. */
template <int VEC>
static __global__ void __launch_bounds__(ATT_THREADS)
attention_kernel(sv_kv_view_t kv, int32_t n_heads, int32_t group, int32_t hd, float scale,
                 const int32_t *pos, const float *q, float *out, uint16_t *obf, float *part,
                 int32_t *count, int32_t *flag) {
    __shared__ float qs[SV_K_MAX_HEAD_DIM];
    __shared__ float pr[ATT_TILE];              /* the tile's probabilities */
    __shared__ long long rowoff[ATT_TILE];      /* float offset of a tile row, or -1 */
    __shared__ float red[32];
    __shared__ float gsum[ATT_GSUM];            /* the key groups' accumulators */
    __shared__ int last;
    const int32_t r = (int32_t)(blockIdx.x / (unsigned)n_heads);
    const int32_t h = (int32_t)(blockIdx.x % (unsigned)n_heads);
    const int tid = threadIdx.x;
    const size_t qoff = ((size_t)r * n_heads + h) * hd;
    float *o = out + qoff;
    uint16_t *ob = obf ? obf + qoff : NULL;
    const int32_t split = (int32_t)blockIdx.y, n_split = (int32_t)gridDim.y;
    const size_t stride = (size_t)(hd + 2);
    float *slot = n_split > 1 ? part + ((size_t)blockIdx.x * n_split + split) * stride
                              : NULL; /* this split's partial result */

    /* The row's sequence and table; every thread computes the same, so a
     * bad row returns from the whole block at once. */
    const int32_t p = pos[r];
    const int32_t *table = NULL;
    int32_t bs = 1, nb = 0, code = 0;
    if (!kv.tables) {
        if (p < 0 || p >= kv.capacity)
            code = SV_KFLAG_ATTN_POS;
    } else {
        int32_t s = kv.seq_of_row[r];
        if (s < 0 || s >= kv.n_seqs) {
            code = SV_KFLAG_KV_SEQ;
        } else {
            int32_t off = kv.table_off[s], end = kv.table_off[s + 1];
            if (off < 0 || end < off) {
                code = SV_KFLAG_KV_SEQ;
            } else {
                table = kv.tables + off;
                nb = end - off;
                bs = kv.block_size;
                if (p < 0 || p / bs >= nb)
                    code = SV_KFLAG_ATTN_POS;
            }
        }
    }
    /* The row's splits: its own context alone decides them. */
    const int32_t n_ctx = p + 1;
    const int32_t row_splits = n_split == 1 || code ? 1 : p / ATT_SPLIT + 1;
    if (!code && row_splits > n_split)
        code = SV_KFLAG_ATTN_POS;
    if (code) {
        if (split == 0) {
            if (tid == 0)
                sv_k_flag(flag, code);
            for (int32_t d = tid; d < hd; d += ATT_THREADS)
                att_store(o, ob, d, 0.0f);
        }
        return;
    }
    if (split >= row_splits)
        return;
    const int32_t t_begin = n_split == 1 ? 0 : split * ATT_SPLIT;
    const int32_t t_end = n_split == 1 || n_ctx - t_begin < ATT_SPLIT ? n_ctx
                                                                        : t_begin + ATT_SPLIT;

    for (int32_t d = tid; d < hd; d += ATT_THREADS)
        qs[d] = q[qoff + d];
    const size_t ld = (size_t)kv.kv_dim;
    const size_t koff = (size_t)(h / group) * hd;
    const int32_t n_blocks_cache = kv.tables ? kv.capacity / bs : 0;
    /* The value phase's geometry: T threads a key row, G key groups. */
    const int32_t nvec = hd / VEC;
    const int32_t T = nvec < ATT_THREADS ? nvec : ATT_THREADS;
    const int32_t G = ATT_THREADS / T;
    const int32_t kg = tid / T, ti = tid % T;
    float acc[ATT_CHUNKS(VEC)][VEC];
#pragma unroll
    for (int c = 0; c < ATT_CHUNKS(VEC); c++)
#pragma unroll
        for (int i = 0; i < VEC; i++)
            acc[c][i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    __syncthreads();

    for (int32_t t0 = t_begin; t0 < t_end; t0 += ATT_TILE) {
        const int32_t nt = t_end - t0 < ATT_TILE ? t_end - t0 : ATT_TILE;
        /* This thread's key: its physical row, then its score. */
        float sc = -INFINITY;
        if (tid < nt) {
            int32_t pp = t0 + tid;
            long long off;
            if (table) {
                int32_t b = table[pp / bs];
                if (b < 0 || b >= n_blocks_cache) {
                    sv_k_flag(flag, SV_KFLAG_KV_BLOCK);
                    off = -1;
                } else {
                    off = ((long long)b * bs + pp % bs) * (long long)ld;
                }
            } else {
                off = (long long)pp * (long long)ld;
            }
            rowoff[tid] = off;
            if (off >= 0) {
                const float *kr = kv.k + off + koff;
                float dsum = 0.0f;
                for (int32_t d = 0; d < hd; d += VEC) {
                    vecf<VEC> kk = vecf<VEC>::load(kr + d);
#pragma unroll
                    for (int i = 0; i < VEC; i++)
                        dsum += qs[d + i] * kk.v[i];
                }
                sc = dsum * scale;
            }
        }
        const float tm = sv_k_block_max(sc, red);
        const float mn = fmaxf(m, tm);
        /* mn is -inf only when every key so far was unreadable (flagged). */
        const float corr = m == -INFINITY ? 0.0f : expf(m - mn);
        const float pe = mn == -INFINITY || sc == -INFINITY ? 0.0f : expf(sc - mn);
        if (tid < nt)
            pr[tid] = pe;
        /* The barriers of the sum also publish pr and rowoff. */
        l = l * corr + sv_k_block_sum(pe, red);
        m = mn;
        if (kg < G) {
#pragma unroll
            for (int c = 0; c < ATT_CHUNKS(VEC); c++)
#pragma unroll
                for (int i = 0; i < VEC; i++)
                    acc[c][i] *= corr;
#pragma unroll
            for (int c = 0; c < ATT_CHUNKS(VEC); c++) {
                const int32_t d = (ti + c * T) * VEC;
                if (d >= hd)
                    break;
                const float *vb = kv.v + koff + d;
                int32_t j = kg;
                /* Eight rows' loads in flight, then their sums in row order. */
                for (; j + 7 * G < nt; j += 8 * G) {
                    vecf<VEC> vv[8];
                    float pj[8];
#pragma unroll
                    for (int u = 0; u < 8; u++) {
                        long long off = rowoff[j + u * G];
                        pj[u] = off >= 0 ? pr[j + u * G] : 0.0f;
                        vv[u] = vecf<VEC>::load(vb + (off >= 0 ? off : 0));
                    }
#pragma unroll
                    for (int u = 0; u < 8; u++)
#pragma unroll
                        for (int i = 0; i < VEC; i++)
                            acc[c][i] += pj[u] * vv[u].v[i];
                }
                for (; j < nt; j += G) {
                    long long off = rowoff[j];
                    if (off >= 0) {
                        vecf<VEC> vv = vecf<VEC>::load(vb + off);
#pragma unroll
                        for (int i = 0; i < VEC; i++)
                            acc[c][i] += pr[j] * vv.v[i];
                    }
                }
            }
        }
        __syncthreads(); /* the next tile rewrites rowoff and pr */
    }

    /* The key groups' accumulators, added in group order: gsum[g][d]. */
    if (kg < G) {
#pragma unroll
        for (int c = 0; c < ATT_CHUNKS(VEC); c++) {
            const int32_t d = (ti + c * T) * VEC;
            if (d < hd) {
#pragma unroll
                for (int i = 0; i < VEC; i++)
                    gsum[kg * hd + d + i] = acc[c][i];
            }
        }
    }
    __syncthreads();
    /* Thread t now takes dimensions t, t + ATT_THREADS, ... */
    float res[SV_K_MAX_HEAD_DIM / ATT_THREADS];
#pragma unroll
    for (int k = 0; k < SV_K_MAX_HEAD_DIM / ATT_THREADS; k++) {
        const int32_t d = tid + k * ATT_THREADS;
        res[k] = 0.0f;
        if (d < hd)
            for (int32_t g = 0; g < G; g++)
                res[k] += gsum[g * hd + d];
    }
    if (row_splits == 1) {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
        for (int k = 0; k < SV_K_MAX_HEAD_DIM / ATT_THREADS; k++) {
            const int32_t d = tid + k * ATT_THREADS;
            if (d < hd)
                att_store(o, ob, d, res[k] * inv);
        }
        return;
    }

    /* A split: the partial result, then the count; the last block of the
     * row's head combines. */
    if (tid == 0)
        slot[0] = m, slot[1] = l;
#pragma unroll
    for (int k = 0; k < SV_K_MAX_HEAD_DIM / ATT_THREADS; k++) {
        const int32_t d = tid + k * ATT_THREADS;
        if (d < hd)
            slot[2 + d] = res[k];
    }
    __threadfence(); /* the partial is visible before the count says so */
    __syncthreads();
    if (tid == 0)
        last = atomicAdd(&count[blockIdx.x], 1) == row_splits - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    if (tid == 0)
        count[blockIdx.x] = 0;
    /* The other splits' blocks wrote these: read through L2 (__ldcg). The
     * threads take the splits t, t + ATT_THREADS, ...: the maximum, then
     * each split's weight exp(m_s - max), written over its m_s, and the
     * weighted sum of the l_s (block reductions: a fixed order); then each
     * dimension's accumulators in split order. */
    float *base = part + (size_t)blockIdx.x * n_split * stride;
    float lm = -INFINITY;
    for (int32_t s = tid; s < row_splits; s += ATT_THREADS)
        lm = fmaxf(lm, __ldcg(base + s * stride));
    const float mx = sv_k_block_max(lm, red);
    float ls = 0.0f;
    for (int32_t s = tid; s < row_splits; s += ATT_THREADS) {
        const float ms = __ldcg(base + s * stride);
        const float w = ms == -INFINITY ? 0.0f : expf(ms - mx);
        ls += w * __ldcg(base + s * stride + 1);
        __stcg(base + s * stride, w); /* to L2, where the loads below look */
    }
    const float sum = sv_k_block_sum(ls, red); /* its barriers publish the weights */
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int32_t d = tid; d < hd; d += ATT_THREADS) {
        float a = 0.0f;
        for (int32_t s = 0; s < row_splits; s++)
            a += __ldcg(base + s * stride) * __ldcg(base + s * stride + 2 + d);
        att_store(o, ob, d, a * inv);
    }
}

extern "C" sv_status sv_k_attention(cudaStream_t stream, const sv_kv_view_t *kv,
                                    const sv_attn_shape_t *sh, int32_t rows, const int32_t *pos,
                                    const float *q, float *out, uint16_t *obf,
                                    const sv_k_attn_scratch_t *scratch, int32_t *flag,
                                    sv_error_t *err) {
    if (rows < 0 || !kv || !sh || sh->n_heads <= 0 || sh->n_kv_heads <= 0 ||
        sh->n_heads % sh->n_kv_heads || sh->head_dim <= 0 ||
        sh->head_dim > SV_K_MAX_HEAD_DIM || kv->kv_dim != sh->n_kv_heads * sh->head_dim)
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "attention: bad shape (heads %d, kv heads %d, head_dim %d, kv_dim %d)",
                            sh ? (int)sh->n_heads : 0, sh ? (int)sh->n_kv_heads : 0,
                            sh ? (int)sh->head_dim : 0, kv ? (int)kv->kv_dim : 0);
    if (kv->tables && (kv->block_size <= 0 || kv->capacity % kv->block_size ||
                       kv->n_seqs < 1 || !kv->seq_of_row || !kv->table_off))
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "attention: bad paged view (block size %d, capacity %d, %d sequences)",
                            (int)kv->block_size, (int)kv->capacity, (int)kv->n_seqs);
    if (rows == 0)
        return SV_OK;
    if (!pos || !q || !out || !kv->k || !kv->v)
        return sv_error_set(err, SV_ERR_ARG, -1, "attention: NULL pointer");
    if ((int64_t)rows * sh->n_heads > 0x7fffffff)
        return sv_error_set(err, SV_ERR_ARG, -1, "attention: %d rows of %d heads is too many",
                            (int)rows, (int)sh->n_heads);
    /* Splits when the caller bounds the contexts past one split, in groups
     * of rows whose partial results and counters fit the scratch; a single
     * pass when not even one row's fit. */
    const int32_t group = sh->n_heads / sh->n_kv_heads;
    int32_t n_split = 1, per_group = rows;
    if (sh->max_ctx > ATT_SPLIT && scratch && scratch->part && scratch->count) {
        n_split = (sh->max_ctx - 1) / ATT_SPLIT + 1;
        size_t per_row = (size_t)sh->n_heads * (size_t)n_split * (size_t)(sh->head_dim + 2);
        size_t fit = scratch->part_floats / per_row;
        size_t fit_c = scratch->n_count / (size_t)sh->n_heads;
        fit = fit_c < fit ? fit_c : fit;
        if (fit == 0 || n_split > 65535)
            n_split = 1;
        else
            per_group = fit < (size_t)rows ? (int32_t)fit : rows;
    }
    /* 16-byte loads when every key and value row starts on 16 bytes. */
    const bool v4 = sh->head_dim % 4 == 0 && ((uintptr_t)kv->k & 15) == 0 &&
                    ((uintptr_t)kv->v & 15) == 0;
    for (int32_t r0 = 0; r0 < rows; r0 += per_group) {
        int32_t nr = rows - r0 < per_group ? rows - r0 : per_group;
        sv_kv_view_t v = *kv;
        if (v.seq_of_row)
            v.seq_of_row += r0;
        size_t qo = (size_t)r0 * (size_t)sh->n_heads * (size_t)sh->head_dim;
        dim3 grid((unsigned)nr * (unsigned)sh->n_heads, (unsigned)n_split);
        float *part = n_split > 1 ? scratch->part : NULL;
        int32_t *count = n_split > 1 ? scratch->count : NULL;
        uint16_t *ob = obf ? obf + qo : NULL;
        if (v4)
            attention_kernel<4><<<grid, ATT_THREADS, 0, stream>>>(
                v, sh->n_heads, group, sh->head_dim, sh->scale, pos + r0, q + qo, out + qo, ob,
                part, count, flag);
        else
            attention_kernel<1><<<grid, ATT_THREADS, 0, stream>>>(
                v, sh->n_heads, group, sh->head_dim, sh->scale, pos + r0, q + qo, out + qo, ob,
                part, count, flag);
        sv_status st = sv_k_check_launch("attention", err);
        if (st)
            return st;
    }
    return SV_OK;
}
