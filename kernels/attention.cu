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
 * Costs and what is left: every query head re-reads its kv head's keys
 * (GQA groups share them through L2: the blocks of one row's heads are
 * adjacent in the grid, so they run together), and one block walks a whole
 * context, so a long context with few rows uses few multiprocessors. The
 * next steps, once this is verified on a GPU, are one block per kv head
 * serving its whole group and split-K over the context with a combine
 * kernel. */
#include "kernels/common.cuh"

#include <math.h>

#define ATT_THREADS 128
#define ATT_TILE 64
#define ATT_PER_THREAD (SV_K_MAX_HEAD_DIM / ATT_THREADS)

/* One block per (row, query head), block b = row * n_heads + head: the
 * heads of one row, and so the query heads sharing a kv head (GQA), run
 * side by side and find that head's keys and values in L2.
 * group = n_heads / n_kv_heads. */
static __global__ void __launch_bounds__(ATT_THREADS)
attention_kernel(sv_kv_view_t kv, int32_t n_heads, int32_t group, int32_t hd, float scale,
                 const int32_t *pos, const float *q, float *out, int32_t *flag) {
    __shared__ float qs[SV_K_MAX_HEAD_DIM];
    __shared__ float sc[ATT_TILE];
    __shared__ float pr[ATT_TILE];
    __shared__ long long rowoff[ATT_TILE]; /* float offset of a tile row, or -1 */
    const int32_t r = (int32_t)(blockIdx.x / (unsigned)n_heads);
    const int32_t h = (int32_t)(blockIdx.x % (unsigned)n_heads);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = ATT_THREADS / 32;
    const size_t qoff = ((size_t)r * n_heads + h) * hd;
    float *o = out + qoff;

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
    if (code) {
        if (tid == 0)
            sv_k_flag(flag, code);
        for (int32_t d = tid; d < hd; d += ATT_THREADS)
            o[d] = 0.0f;
        return;
    }

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
    const int32_t n_ctx = p + 1;
    __syncthreads();

    for (int32_t t0 = 0; t0 < n_ctx; t0 += ATT_TILE) {
        const int32_t nt = n_ctx - t0 < ATT_TILE ? n_ctx - t0 : ATT_TILE;
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
                for (int32_t j = 0; j < nt; j++) {
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
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int k = 0; k < ATT_PER_THREAD; k++) {
        int32_t d = tid + k * ATT_THREADS;
        if (d < hd)
            o[d] = acc[k] * inv;
    }
}

extern "C" sv_status sv_k_attention(cudaStream_t stream, const sv_kv_view_t *kv,
                                    const sv_attn_shape_t *sh, int32_t rows, const int32_t *pos,
                                    const float *q, float *out, int32_t *flag, sv_error_t *err) {
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
    unsigned blocks = (unsigned)rows * (unsigned)sh->n_heads;
    attention_kernel<<<blocks, ATT_THREADS, 0, stream>>>(*kv, sh->n_heads,
                                                        sh->n_heads / sh->n_kv_heads,
                                                        sh->head_dim, sh->scale, pos, q, out,
                                                        flag);
    return sv_k_check_launch("attention", err);
}
