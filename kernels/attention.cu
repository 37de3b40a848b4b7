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
 * Layout of one block (one row, one query head; ATT_THREADS threads):
 * - the query (head_dim floats) in shared memory;
 * - scores: each warp takes every (ATT_THREADS/32)-th key of the tile, its
 *   lanes splitting the dot product over head_dim and a shuffle tree adding
 *   the lanes (so a score is computed in a fixed order whatever the batch);
 * - values: thread t owns output dimensions t, t + ATT_THREADS, ..., reads
 *   value rows coalesced across the block, and keeps its accumulators in
 *   registers (a compile-time count, SV_K_MAX_HEAD_DIM / ATT_THREADS).
 *
 * Split-K ("flash decoding"). One block walking a whole context leaves a
 * GPU idle when the rows are few (a decode step of one sequence has only
 * n_heads blocks). When the caller bounds the contexts (shape->max_ctx),
 * a row's context is cut into splits of ATT_SPLIT positions, one block
 * each (grid (rows * n_heads, splits)); a block writes its split's running
 * maximum, sum and unnormalised accumulators to a scratch buffer, and a
 * second kernel combines a row's splits in split order. The splits of a
 * row depend on its own context length only, never on the batch, so a row's
 * result is still the same whatever rows share the call. A row of one
 * split writes its output directly. The scratch (owned by the backend) is
 * used for as many rows at a time as fit (row groups, one launch pair
 * each).
 *
 * What is left: every query head re-reads its kv head's keys (GQA groups
 * share them through L2: the blocks of one row's heads are adjacent in the
 * grid, so they run together); one block per kv head serving its whole
 * group would read them once. */
#include "kernels/common.cuh"

#include <math.h>

#define ATT_THREADS 128
#define ATT_TILE 64
#define ATT_PER_THREAD (SV_K_MAX_HEAD_DIM / ATT_THREADS)
#define ATT_SPLIT 128 /* positions per split (a multiple of ATT_TILE) */

/* One block per (row, query head, split), blockIdx.x = row * n_heads + head:
 * the heads of one row, and so the query heads sharing a kv head (GQA), run
 * side by side and find that head's keys and values in L2.
 * group = n_heads / n_kv_heads. With gridDim.y == 1 a block takes the
 * row's whole context; else split blockIdx.y of the row (ATT_SPLIT
 * positions) and part holds, per (row, head, split), hd + 2 floats:
 * maximum, sum, accumulators. A row with more splits than gridDim.y is a
 * bad position (the caller's max_ctx was wrong). A bad row writes zeros
 * and marks its first split's sum -1 for the combine. */
static __global__ void __launch_bounds__(ATT_THREADS)
attention_kernel(sv_kv_view_t kv, int32_t n_heads, int32_t group, int32_t hd, float scale,
                 const int32_t *pos, const float *q, float *out, float *part, int32_t *flag) {
    __shared__ float qs[SV_K_MAX_HEAD_DIM];
    __shared__ float sc[ATT_TILE];
    __shared__ float pr[ATT_TILE];
    __shared__ long long rowoff[ATT_TILE]; /* float offset of a tile row, or -1 */
    const int32_t r = (int32_t)(blockIdx.x / (unsigned)n_heads);
    const int32_t h = (int32_t)(blockIdx.x % (unsigned)n_heads);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = ATT_THREADS / 32;
    const size_t qoff = ((size_t)r * n_heads + h) * hd;
    float *o = out + qoff;
    const int32_t split = (int32_t)blockIdx.y, n_split = (int32_t)gridDim.y;
    float *slot = n_split > 1 ? part + ((size_t)blockIdx.x * n_split + split) * (size_t)(hd + 2)
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
                o[d] = 0.0f;
            if (slot && tid == 0)
                slot[1] = -1.0f;
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
    float acc[ATT_PER_THREAD];
#pragma unroll
    for (int k = 0; k < ATT_PER_THREAD; k++)
        acc[k] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    __syncthreads();

    for (int32_t t0 = t_begin; t0 < t_end; t0 += ATT_TILE) {
        const int32_t nt = t_end - t0 < ATT_TILE ? t_end - t0 : ATT_TILE;
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
        }
        __syncthreads();
        /* Unrolled so that a warp has several keys' loads in flight (with
         * the value loads below, 2% of a 135M-shape decode step; the
         * kernel's time is mostly elsewhere: BENCHMARKS.md). */
#pragma unroll 4
        for (int32_t j = warp; j < nt; j += nw) {
            long long off = rowoff[j];
            float dsum = 0.0f;
            if (off >= 0) {
                const float *kr = kv.k + off + koff;
                for (int32_t d = lane; d < hd; d += 32)
                    dsum += qs[d] * kr[d];
            }
            for (int sh = 16; sh > 0; sh >>= 1)
                dsum += __shfl_xor_sync(0xffffffffu, dsum, sh);
            if (lane == 0)
                sc[j] = off >= 0 ? dsum * scale : -INFINITY;
        }
        __syncthreads();
        float tm = -INFINITY;
        for (int32_t j = 0; j < nt; j++)
            tm = fmaxf(tm, sc[j]);
        const float mn = fmaxf(m, tm);
        /* mn is -inf only when every key so far was unreadable (flagged). */
        const float corr = m == -INFINITY ? 0.0f : expf(m - mn);
        if (tid < nt)
            pr[tid] = mn == -INFINITY ? 0.0f : expf(sc[tid] - mn);
        __syncthreads();
        l *= corr;
        for (int32_t j = 0; j < nt; j++)
            l += pr[j];
#pragma unroll
        for (int k = 0; k < ATT_PER_THREAD; k++) {
            int32_t d = tid + k * ATT_THREADS;
            if (d < hd) {
                float a = acc[k] * corr;
                /* Loads first, eight rows at a time, then the sums in
                 * row order (the same order as one at a time). */
                int32_t j = 0;
                for (; j + 8 <= nt; j += 8) {
                    float vv[8];
#pragma unroll
                    for (int u = 0; u < 8; u++) {
                        long long off = rowoff[j + u];
                        vv[u] = off >= 0 ? kv.v[off + koff + d] : 0.0f;
                    }
#pragma unroll
                    for (int u = 0; u < 8; u++)
                        if (rowoff[j + u] >= 0)
                            a += pr[j + u] * vv[u];
                }
                for (; j < nt; j++) {
                    long long off = rowoff[j];
                    if (off >= 0)
                        a += pr[j] * kv.v[off + koff + d];
                }
                acc[k] = a;
            }
        }
        m = mn;
        __syncthreads(); /* the next tile rewrites rowoff, sc and pr */
    }
    if (row_splits > 1) {
        if (tid == 0)
            slot[0] = m, slot[1] = l;
#pragma unroll
        for (int k = 0; k < ATT_PER_THREAD; k++) {
            int32_t d = tid + k * ATT_THREADS;
            if (d < hd)
                slot[2 + d] = acc[k];
        }
        return;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int k = 0; k < ATT_PER_THREAD; k++) {
        int32_t d = tid + k * ATT_THREADS;
        if (d < hd)
            o[d] = acc[k] * inv;
    }
}

/* One block per (row, head): the row's splits combined in split order,
 * each weighted by exp(its maximum - the overall maximum). Rows of one
 * split (written directly) and bad rows (first sum -1) are left alone. */
static __global__ void __launch_bounds__(ATT_THREADS)
attention_combine_kernel(int32_t n_heads, int32_t hd, int32_t n_split, const int32_t *pos,
                         const float *part, float *out) {
    const int32_t r = (int32_t)(blockIdx.x / (unsigned)n_heads);
    const int32_t p = pos[r];
    if (p < 0)
        return;
    const int32_t row_splits = p / ATT_SPLIT + 1;
    const size_t stride = (size_t)(hd + 2);
    const float *base = part + (size_t)blockIdx.x * n_split * stride;
    if (row_splits <= 1 || row_splits > n_split || base[1] < 0.0f)
        return;
    float mx = -INFINITY;
    for (int32_t s = 0; s < row_splits; s++)
        mx = fmaxf(mx, base[s * stride]);
    float sum = 0.0f;
    for (int32_t s = 0; s < row_splits; s++) {
        float ms = base[s * stride];
        sum += ms == -INFINITY ? 0.0f : expf(ms - mx) * base[s * stride + 1];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    float *o = out + (size_t)blockIdx.x * hd;
    for (int32_t d = threadIdx.x; d < hd; d += ATT_THREADS) {
        float a = 0.0f;
        for (int32_t s = 0; s < row_splits; s++) {
            float ms = base[s * stride];
            if (ms != -INFINITY)
                a += expf(ms - mx) * base[s * stride + 2 + d];
        }
        o[d] = a * inv;
    }
}

extern "C" sv_status sv_k_attention(cudaStream_t stream, const sv_kv_view_t *kv,
                                    const sv_attn_shape_t *sh, int32_t rows, const int32_t *pos,
                                    const float *q, float *out, float *part, size_t part_floats,
                                    int32_t *flag, sv_error_t *err) {
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
     * of rows whose partial results fit the scratch; a single pass when
     * not even one row's fit. */
    const int32_t group = sh->n_heads / sh->n_kv_heads;
    int32_t n_split = 1, per_group = rows;
    if (sh->max_ctx > ATT_SPLIT && part) {
        n_split = (sh->max_ctx - 1) / ATT_SPLIT + 1;
        size_t per_row = (size_t)sh->n_heads * (size_t)n_split * (size_t)(sh->head_dim + 2);
        size_t fit = part_floats / per_row;
        if (fit == 0 || n_split > 65535)
            n_split = 1;
        else
            per_group = fit < (size_t)rows ? (int32_t)fit : rows;
    }
    for (int32_t r0 = 0; r0 < rows; r0 += per_group) {
        int32_t nr = rows - r0 < per_group ? rows - r0 : per_group;
        sv_kv_view_t v = *kv;
        if (v.seq_of_row)
            v.seq_of_row += r0;
        size_t qo = (size_t)r0 * (size_t)sh->n_heads * (size_t)sh->head_dim;
        dim3 grid((unsigned)nr * (unsigned)sh->n_heads, (unsigned)n_split);
        attention_kernel<<<grid, ATT_THREADS, 0, stream>>>(v, sh->n_heads, group, sh->head_dim,
                                                           sh->scale, pos + r0, q + qo, out + qo,
                                                           part, flag);
        sv_status st = sv_k_check_launch("attention", err);
        if (st)
            return st;
        if (n_split > 1) {
            attention_combine_kernel<<<grid.x, ATT_THREADS, 0, stream>>>(
                sh->n_heads, sh->head_dim, n_split, pos + r0, part, out + qo);
            if ((st = sv_k_check_launch("attention combine", err)))
                return st;
        }
    }
    return SV_OK;
}
