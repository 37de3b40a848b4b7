/* engine.c — the scheduler and the step loop (see engine.h for the
 * contract).
 *
 * A request lives in exactly one place: the waiting queue (no KV), the
 * running list (a KV sequence whose first n_computed positions hold the
 * keys and values of toks[0 .. n_computed)), or the output queue once
 * finished (no KV) until its last output is popped. Its token buffer holds
 * the prompt followed by the output; the tokens past n_computed are
 * "pending": the rest of the prompt, the last sampled token, or
 * jump-forward tokens. Every running request has at least one pending
 * token, and it samples exactly when a step computes its last pending one.
 *
 * The reference loop (cmd_generate.c) feeds a sampled token and then asks
 * the matcher for forced tokens, rolling the sampled token back when the
 * tokenizer would merge it with them. Here the matcher is asked right after
 * the token is accepted, before anything is fed, so a rollback only ever
 * drops a pending token: the token sequence, and so every position's KV and
 * the logits each sample sees, is the reference's. */
#include "src/engine/engine.h"

#include <stdlib.h>
#include <string.h>

#include "src/engine/radix.h"

#define FORCED_CAP 64 /* jump-forward tokens per matcher call */

typedef struct req {
    uint64_t id;
    int32_t *toks;         /* (cap) prompt, then output */
    uint32_t n_prompt, n_toks, cap;
    uint32_t n_computed;   /* positions with KV: the sequence's length */
    uint32_t budget;       /* output tokens allowed */
    uint32_t n_reported;   /* output tokens handed out */
    uint32_t n_cached;     /* prefix-cache tokens at the last admission */
    bool inserted;         /* prompt blocks given to the prefix cache since admission */
    bool in_outq;
    sv_finish_reason finish;
    bool budget_stop;
    sv_kv_seq_t *seq;      /* NULL unless running */
    sv_sampler_t *sampler;
    sv_matcher_t *matcher; /* NULL when unconstrained */
    int32_t *stop;         /* (n_stop) */
    uint32_t n_stop;
} req_t;

typedef struct place {
    req_t *r;
    uint32_t chunk; /* rows this step */
} place_t;

struct sv_engine {
    sv_llama_t *model;
    sv_engine_vocab_t vocab;
    sv_engine_config_t cfg;
    int32_t n_vocab;
    sv_kv_pool_t *pool;
    sv_radix_t *radix; /* NULL without the prefix cache */
    sv_llama_kv_t *kv;
    uint64_t next_id;

    req_t **running; /* (max_num_seqs) oldest first */
    uint32_t n_running;
    req_t **waiting; /* (max_queue + max_num_seqs) front first */
    uint32_t n_waiting, waiting_cap;
    req_t **outq;    /* FIFO, grown on demand */
    uint32_t outq_head, outq_n, outq_cap;
    req_t *retired;  /* popped with a finish; freed at the next call */

    /* step scratch, sized at create */
    place_t *places;  /* (max_num_seqs) */
    int32_t *b_tokens, *b_pos, *b_seq; /* (max_num_batched_tokens) */
    sv_llama_seq_t *b_seqs;            /* (max_num_seqs) */
    int32_t *b_logit_rows;             /* (max_num_seqs) */
    float *logits;                     /* (max_num_seqs, n_vocab) */
    uint32_t *match_blocks;            /* (max_ctx / 16 + 1) */

    sv_engine_stats_t st;
};

void sv_engine_config_default(sv_engine_config_t *c) {
    memset(c, 0, sizeof *c);
    c->max_num_seqs = 16;
    c->max_num_batched_tokens = 256;
    c->max_queue = 256;
    c->prefix_cache = true;
    c->jump_forward = true;
    c->prefetch_threads = 1;
}

static void req_free(req_t *r) {
    if (!r) return;
    sv_kv_seq_destroy(r->seq);
    sv_sampler_destroy(r->sampler);
    sv_matcher_destroy(r->matcher);
    free(r->toks);
    free(r->stop);
    free(r);
}

void sv_engine_destroy(sv_engine_t *e) {
    if (!e) return;
    for (uint32_t i = 0; i < e->n_running; i++) req_free(e->running[i]);
    for (uint32_t i = 0; i < e->n_waiting; i++) req_free(e->waiting[i]);
    for (uint32_t i = 0; i < e->outq_n; i++) req_free(e->outq[(e->outq_head + i) % e->outq_cap]);
    req_free(e->retired);
    if (e->pool) sv_kv_pool_set_evictor(e->pool, NULL, NULL);
    sv_radix_destroy(e->radix);
    sv_kv_pool_destroy(e->pool);
    sv_llama_kv_destroy(e->kv);
    free(e->running);
    free(e->waiting);
    free(e->outq);
    free(e->places);
    free(e->b_tokens);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_seqs);
    free(e->b_logit_rows);
    free(e->logits);
    free(e->match_blocks);
    free(e);
}

sv_status sv_engine_create(sv_llama_t *m, const sv_engine_vocab_t *vocab, const sv_engine_config_t *cfg,
                           sv_engine_t **out, sv_error_t *err) {
    *out = NULL;
    if (!m || !cfg) return sv_error_set(err, SV_ERR_ARG, -1, "engine: model and config are required");
    const sv_llama_config_t *mc = sv_llama_config(m);
    sv_engine_config_t c = *cfg;
    if (c.max_ctx == 0 || c.max_ctx > (uint32_t)mc->max_ctx) c.max_ctx = (uint32_t)mc->max_ctx;
    if (c.max_num_seqs == 0 || c.max_num_seqs > SV_KV_MAX_SEQS)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: max_num_seqs must be 1..%u", SV_KV_MAX_SEQS);
    if (c.max_num_batched_tokens == 0 || c.max_num_batched_tokens > (1u << 20))
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: max_num_batched_tokens must be 1..%u", 1u << 20);
    if (c.max_queue == 0 || c.max_queue > (1u << 24))
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: max_queue must be 1..%u", 1u << 24);
    if (c.max_ctx < 2) return sv_error_set(err, SV_ERR_ARG, -1, "engine: max_ctx must be at least 2");
    uint32_t min_blocks = (c.max_ctx + SV_KV_BLOCK - 1) / SV_KV_BLOCK;
    if (c.kv_blocks == 0) {
        uint64_t bb = sv_llama_kv_block_bytes(m);
        uint64_t nb = bb ? c.kv_bytes / bb : 0;
        if (nb > SV_KV_MAX_BLOCKS) nb = SV_KV_MAX_BLOCKS;
        c.kv_blocks = (uint32_t)nb;
    }
    if (c.kv_blocks < min_blocks)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "engine: KV memory holds %u blocks, one %u-token request needs %u",
                            c.kv_blocks, c.max_ctx, min_blocks);
    if (c.kv_blocks > SV_KV_MAX_BLOCKS || c.kv_blocks > INT32_MAX)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: too many KV blocks (%u)", c.kv_blocks);

    sv_engine_t *e = calloc(1, sizeof *e);
    if (!e) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    e->model = m;
    if (vocab) e->vocab = *vocab;
    e->cfg = c;
    e->n_vocab = mc->vocab_size;
    e->next_id = 1;
    sv_status st;
    sv_kv_pool_config_t pc = {.n_blocks = c.kv_blocks, .max_seqs = c.max_num_seqs, .max_ctx = c.max_ctx};
    if ((st = sv_kv_pool_create(&pc, &e->pool, err))) goto fail;
    if (c.prefix_cache) {
        if ((st = sv_radix_create(e->pool, NULL, &e->radix, err))) goto fail;
        sv_kv_pool_set_evictor(e->pool, sv_radix_evictor, e->radix);
    }
    if ((st = sv_llama_kv_create(m, (int32_t)c.kv_blocks, (int32_t)c.max_num_batched_tokens, &e->kv, err)))
        goto fail;
    e->waiting_cap = c.max_queue + c.max_num_seqs;
    size_t S = c.max_num_seqs, B = c.max_num_batched_tokens;
    e->running = calloc(S, sizeof *e->running);
    e->waiting = calloc(e->waiting_cap, sizeof *e->waiting);
    e->places = calloc(S, sizeof *e->places);
    e->b_tokens = calloc(B, sizeof(int32_t));
    e->b_pos = calloc(B, sizeof(int32_t));
    e->b_seq = calloc(B, sizeof(int32_t));
    e->b_seqs = calloc(S, sizeof *e->b_seqs);
    e->b_logit_rows = calloc(S, sizeof(int32_t));
    e->logits = calloc(S * (size_t)e->n_vocab, sizeof(float));
    e->match_blocks = calloc(min_blocks + 1, sizeof(uint32_t));
    if (!e->running || !e->waiting || !e->places || !e->b_tokens || !e->b_pos || !e->b_seq || !e->b_seqs ||
        !e->b_logit_rows || !e->logits || !e->match_blocks) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        goto fail;
    }
    *out = e;
    return SV_OK;
fail:
    sv_engine_destroy(e);
    return st;
}

/* ---- queues ------------------------------------------------------------------ */

static sv_status outq_push(sv_engine_t *e, req_t *r, sv_error_t *err) {
    if (r->in_outq) return SV_OK;
    if (e->outq_n == e->outq_cap) {
        uint32_t nc = e->outq_cap ? e->outq_cap * 2 : 64;
        req_t **q = malloc(nc * sizeof *q);
        if (!q) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        for (uint32_t i = 0; i < e->outq_n; i++) q[i] = e->outq[(e->outq_head + i) % e->outq_cap];
        free(e->outq);
        e->outq = q;
        e->outq_cap = nc;
        e->outq_head = 0;
    }
    e->outq[(e->outq_head + e->outq_n++) % e->outq_cap] = r;
    r->in_outq = true;
    return SV_OK;
}

static void remove_at(req_t **a, uint32_t *n, uint32_t i) {
    memmove(a + i, a + i + 1, (*n - i - 1) * sizeof *a);
    (*n)--;
}

static int index_of(req_t *const *a, uint32_t n, const req_t *r) {
    for (uint32_t i = 0; i < n; i++)
        if (a[i] == r) return (int)i;
    return -1;
}

/* Gives the full blocks of the computed tokens to the prefix cache. */
static void cache_blocks(sv_engine_t *e, req_t *r) {
    if (!e->radix || !r->seq || r->n_computed < SV_KV_BLOCK) return;
    uint32_t nb;
    const uint32_t *blocks = sv_kv_seq_blocks(r->seq, &nb);
    sv_error_t ignore;
    /* Cannot fail for blocks this sequence holds (see the header essay);
     * a refusal would only mean fewer cached blocks. */
    (void)sv_radix_insert(e->radix, r->toks, r->n_computed, blocks, NULL, &ignore);
}

/* Ends r: its KV goes (full blocks to the prefix cache unless aborted), it
 * leaves the running or waiting list and its final output is queued. */
static sv_status finish(sv_engine_t *e, req_t *r, sv_finish_reason why, bool budget_stop, sv_error_t *err) {
    r->finish = why;
    r->budget_stop = budget_stop;
    if (r->seq) {
        if (why != SV_FINISH_ABORT) cache_blocks(e, r);
        sv_kv_seq_destroy(r->seq);
        r->seq = NULL;
        r->n_computed = 0;
    }
    int i = index_of(e->running, e->n_running, r);
    if (i >= 0) remove_at(e->running, &e->n_running, (uint32_t)i);
    i = index_of(e->waiting, e->n_waiting, r);
    if (i >= 0) remove_at(e->waiting, &e->n_waiting, (uint32_t)i);
    return outq_push(e, r, err);
}

/* Frees the request whose last output was popped. */
static void retire(sv_engine_t *e) {
    req_free(e->retired);
    e->retired = NULL;
}

/* ---- advancing a request (the reference loop's decisions) --------------------- */

static bool is_eog(const sv_engine_t *e, int32_t id) {
    const sv_token_set_t *s = e->vocab.set;
    return s && (uint32_t)id < sv_token_set_size(s) && sv_token_set_kind(s, id) == SV_TOKKIND_EOG;
}

/* After the prompt or an accepted token: ends r on its budget or a finished
 * constraint, else takes forced paths (jump-forward) into the pending
 * tokens until the state is not forced. */
static sv_status advance(sv_engine_t *e, req_t *r, sv_error_t *err) {
    int32_t forced[FORCED_CAP];
    for (;;) {
        uint32_t n_out = r->n_toks - r->n_prompt;
        if (n_out >= r->budget) {
            bool acc = r->matcher && sv_matcher_is_accepting(r->matcher);
            return finish(e, r, acc ? SV_FINISH_STOP : SV_FINISH_LENGTH, acc, err);
        }
        if (!r->matcher) return SV_OK;
        if (sv_matcher_is_finished(r->matcher)) return finish(e, r, SV_FINISH_STOP, false, err);
        if (!e->vocab.tok) return SV_OK;
        uint32_t nf = 0, rb = 0;
        sv_status st = sv_matcher_forced(r->matcher, forced, FORCED_CAP, &nf, &rb, err);
        if (st) return st;
        if (nf == 0 || rb > n_out) return SV_OK;
        if (rb) {
            /* Only a token accepted in this step can be rolled back: it is
             * pending (no KV) and not yet output. */
            if (n_out - rb < r->n_reported || r->n_toks - rb < r->n_computed)
                return sv_error_set(err, SV_ERR_ARG, -1, "engine: internal: rollback past output or KV");
            if ((st = sv_matcher_rollback(r->matcher, rb, err))) return st;
            for (uint32_t i = 0; i < rb; i++)
                if ((st = sv_sampler_unaccept(r->sampler, r->toks[--r->n_toks], err))) return st;
            e->st.rollbacks++;
        }
        if (r->n_toks + nf > r->cap)
            return sv_error_set(err, SV_ERR_ARG, -1, "engine: internal: forced tokens past the request's buffer");
        for (uint32_t i = 0; i < nf; i++) {
            if (!sv_matcher_accept(r->matcher, forced[i]))
                return sv_error_set(err, SV_ERR_ARG, -1, "engine: internal: a forced token was refused");
            if ((st = sv_sampler_accept(r->sampler, forced[i], err))) return st;
            r->toks[r->n_toks++] = forced[i];
        }
        e->st.forced += nf;
    }
}

/* Samples r's next token from its logits row and advances. */
static sv_status sample(sv_engine_t *e, req_t *r, float *logits, sv_error_t *err) {
    const uint32_t *mask = NULL;
    sv_status st;
    if (r->matcher && (st = sv_matcher_mask(r->matcher, &mask, err))) return st;
    int32_t id;
    if ((st = sv_sampler_sample(r->sampler, logits, mask, &id, NULL, err))) return st;
    e->st.sampled++;
    if (is_eog(e, id)) {
        if (r->matcher) sv_matcher_accept(r->matcher, id);
        return finish(e, r, SV_FINISH_STOP, false, err);
    }
    if (!r->matcher)
        for (uint32_t i = 0; i < r->n_stop; i++)
            if (r->stop[i] == id) return finish(e, r, SV_FINISH_STOP, false, err);
    if (r->matcher && !sv_matcher_accept(r->matcher, id))
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: internal: sampled token %d is outside the mask", id);
    if ((st = sv_sampler_accept(r->sampler, id, err))) return st;
    r->toks[r->n_toks++] = id;
    if (r->matcher && sv_matcher_is_finished(r->matcher)) return finish(e, r, SV_FINISH_STOP, false, err);
    return advance(e, r, err);
}

/* ---- submit / cancel / outputs ----------------------------------------------- */

sv_status sv_engine_submit(sv_engine_t *e, const sv_engine_request_t *q, uint64_t *id, sv_error_t *err) {
    retire(e);
    if (!q || !q->prompt || q->n_prompt == 0) return sv_error_set(err, SV_ERR_ARG, -1, "engine: empty prompt");
    if (e->n_waiting >= e->cfg.max_queue)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "engine: the queue is full (%u waiting)", e->n_waiting);
    if (q->n_prompt >= e->cfg.max_ctx)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "engine: the prompt has %u tokens; the context is %u", q->n_prompt,
                            e->cfg.max_ctx);
    for (uint32_t i = 0; i < q->n_prompt; i++)
        if (q->prompt[i] < 0 || q->prompt[i] >= e->n_vocab)
            return sv_error_set(err, SV_ERR_ARG, -1, "engine: prompt id %d is outside the vocabulary (%d)",
                                q->prompt[i], e->n_vocab);
    uint32_t budget = e->cfg.max_ctx - q->n_prompt;
    if (q->max_tokens && q->max_tokens < budget) budget = q->max_tokens;
    /* The whole request must fit the pool alone, or preemption could not
     * make room for it. */
    uint64_t need = ((uint64_t)q->n_prompt + budget + SV_KV_BLOCK - 1) / SV_KV_BLOCK;
    if (need > sv_kv_pool_n_blocks(e->pool))
        return sv_error_set(err, SV_ERR_BUDGET, -1, "engine: %u + %u tokens need %llu KV blocks; the pool has %u",
                            q->n_prompt, budget, (unsigned long long)need, sv_kv_pool_n_blocks(e->pool));
    if (q->constraint &&
        sv_token_set_mask_bits(sv_token_index_tokens(q->constraint)) < (uint32_t)e->n_vocab)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: the constraint's masks are shorter than the vocabulary (%d)",
                            e->n_vocab);

    sv_status st;
    req_t *r = calloc(1, sizeof *r);
    if (!r) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    r->n_prompt = q->n_prompt;
    r->budget = budget;
    r->cap = q->n_prompt + budget + FORCED_CAP;
    r->toks = malloc(r->cap * sizeof *r->toks);
    if (q->n_stop_ids) r->stop = malloc(q->n_stop_ids * sizeof *r->stop);
    if (!r->toks || (q->n_stop_ids && !r->stop)) {
        st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        goto fail;
    }
    memcpy(r->toks, q->prompt, q->n_prompt * sizeof *r->toks);
    r->n_toks = q->n_prompt;
    if (q->n_stop_ids) memcpy(r->stop, q->stop_ids, q->n_stop_ids * sizeof *r->stop);
    r->n_stop = q->n_stop_ids;
    if ((st = sv_sampler_create((uint32_t)e->n_vocab, &q->sampling, &r->sampler, err))) goto fail;
    if ((st = sv_sampler_add_context(r->sampler, q->prompt, q->n_prompt, err))) goto fail;
    if (q->constraint && (st = sv_matcher_create(q->constraint, e->vocab.tok, budget, &r->matcher, err))) goto fail;
    r->id = e->next_id++;
    e->waiting[e->n_waiting++] = r;
    /* Forced tokens at the start join the prompt's pending tokens; a
     * constraint complete at the start finishes here. */
    if ((st = advance(e, r, err))) {
        remove_at(e->waiting, &e->n_waiting, (uint32_t)(e->n_waiting - 1));
        goto fail;
    }
    *id = r->id;
    return SV_OK;
fail:
    req_free(r);
    return st;
}

static req_t *find(const sv_engine_t *e, uint64_t id) {
    for (uint32_t i = 0; i < e->n_running; i++)
        if (e->running[i]->id == id) return e->running[i];
    for (uint32_t i = 0; i < e->n_waiting; i++)
        if (e->waiting[i]->id == id) return e->waiting[i];
    return NULL;
}

sv_status sv_engine_cancel(sv_engine_t *e, uint64_t id, sv_error_t *err) {
    retire(e);
    req_t *r = find(e, id);
    if (!r) return sv_error_set(err, SV_ERR_ARG, -1, "engine: no running or waiting request %llu",
                                (unsigned long long)id);
    return finish(e, r, SV_FINISH_ABORT, false, err);
}

bool sv_engine_next_output(sv_engine_t *e, sv_engine_output_t *out) {
    retire(e);
    if (e->outq_n == 0) return false;
    req_t *r = e->outq[e->outq_head];
    e->outq_head = (e->outq_head + 1) % e->outq_cap;
    e->outq_n--;
    r->in_outq = false;
    uint32_t n_out = r->n_toks - r->n_prompt;
    memset(out, 0, sizeof *out);
    out->id = r->id;
    out->tokens = r->toks + r->n_prompt + r->n_reported;
    out->n_tokens = n_out - r->n_reported;
    out->finish = r->finish;
    out->budget_stop = r->budget_stop;
    out->n_generated = n_out;
    out->n_cached = r->n_cached;
    r->n_reported = n_out;
    if (r->finish != SV_FINISH_NONE) e->retired = r;
    return true;
}

bool sv_engine_has_work(const sv_engine_t *e) { return e->n_running || e->n_waiting; }

/* ---- one step ------------------------------------------------------------------ */

/* Preempts the newest running request: full blocks to the prefix cache
 * (recompute may find them), the rest released, back to the front of the
 * waiting queue with all its tokens pending. */
static void preempt(sv_engine_t *e) {
    req_t *v = e->running[--e->n_running];
    cache_blocks(e, v);
    sv_kv_seq_destroy(v->seq);
    v->seq = NULL;
    v->n_computed = 0;
    memmove(e->waiting + 1, e->waiting, e->n_waiting * sizeof *e->waiting);
    e->waiting[0] = v;
    e->n_waiting++;
    e->st.preemptions++;
}

/* Appends chunk positions to r's sequence and makes any copy-on-write
 * copy. SV_ERR_BUDGET: out of blocks, nothing changed. */
static sv_status reserve(sv_engine_t *e, req_t *r, uint32_t chunk, sv_error_t *err) {
    sv_kv_copy_t cp;
    sv_status st = sv_kv_seq_append(r->seq, chunk, &cp, err);
    if (st) return st;
    if (cp.n_pos) return sv_llama_kv_copy_block(e->kv, (int32_t)cp.src, (int32_t)cp.dst, err);
    return SV_OK;
}

sv_status sv_engine_step(sv_engine_t *e, sv_error_t *err) {
    retire(e);
    if (!sv_engine_has_work(e)) return SV_OK;
    const uint32_t B = e->cfg.max_num_batched_tokens;
    uint32_t nt = 0, np = 0;
    bool preempted = false;
    sv_status st;

    /* Running requests, oldest first: their pending tokens within the budget. */
    for (uint32_t i = 0; i < e->n_running && nt < B;) {
        req_t *r = e->running[i];
        uint32_t need = r->n_toks - r->n_computed;
        if (need == 0) return sv_error_set(err, SV_ERR_ARG, -1, "engine: internal: a running request has no token to feed");
        uint32_t chunk = need < B - nt ? need : B - nt;
        for (;;) {
            st = reserve(e, r, chunk, err);
            if (st != SV_ERR_BUDGET) break;
            preempted = true;
            bool self = e->running[e->n_running - 1] == r;
            preempt(e);
            if (self) break;
        }
        if (st == SV_ERR_BUDGET) break; /* r itself was preempted */
        if (st) return st;
        e->places[np++] = (place_t){r, chunk};
        nt += chunk;
        i++;
    }

    /* Admissions, unless this step had to preempt. */
    while (!preempted && e->n_waiting && e->n_running < e->cfg.max_num_seqs && nt < B) {
        req_t *r = e->waiting[0];
        if ((st = sv_kv_seq_create(e->pool, &r->seq, err))) return st;
        uint32_t cached = 0;
        if (e->radix) {
            /* At least one token stays to compute: its row gives the logits. */
            cached = sv_radix_match(e->radix, r->toks, r->n_toks - 1, e->match_blocks,
                                    e->cfg.max_ctx / SV_KV_BLOCK + 1);
            if (cached && (st = sv_kv_seq_adopt(r->seq, e->match_blocks, cached, err))) {
                for (uint32_t b = 0; b < cached / SV_KV_BLOCK; b++) sv_kv_pool_decref(e->pool, e->match_blocks[b]);
                return st;
            }
        }
        r->n_computed = cached;
        uint32_t need = r->n_toks - cached;
        uint32_t chunk = need < B - nt ? need : B - nt;
        st = reserve(e, r, chunk, err);
        if (st) {
            sv_kv_seq_destroy(r->seq);
            r->seq = NULL;
            r->n_computed = 0;
            if (st == SV_ERR_BUDGET) break; /* wait for blocks */
            return st;
        }
        r->n_cached = cached;
        r->inserted = false;
        e->st.cached_tokens += cached;
        remove_at(e->waiting, &e->n_waiting, 0);
        e->running[e->n_running++] = r;
        e->places[np++] = (place_t){r, chunk};
        nt += chunk;
    }
    if (np == 0) {
        /* Nothing fit: only possible right after preempting everything,
         * and the next step admits the front request into an empty pool
         * (submit made sure that one request alone always fits). */
        if (!preempted) return sv_error_set(err, SV_ERR_ARG, -1, "engine: internal: a step made no progress");
        return SV_OK;
    }

    /* The ragged batch. */
    uint32_t row = 0, nl = 0;
    for (uint32_t j = 0; j < np; j++) {
        req_t *r = e->places[j].r;
        uint32_t c = e->places[j].chunk, nb;
        for (uint32_t k = 0; k < c; k++, row++) {
            e->b_tokens[row] = r->toks[r->n_computed + k];
            e->b_pos[row] = (int32_t)(r->n_computed + k);
            e->b_seq[row] = (int32_t)j;
        }
        const uint32_t *blocks = sv_kv_seq_blocks(r->seq, &nb);
        e->b_seqs[j] = (sv_llama_seq_t){.blocks = blocks, .n_blocks = (int32_t)nb,
                                        .len = (int32_t)(r->n_computed + c)};
        if (r->n_computed + c == r->n_toks) e->b_logit_rows[nl++] = (int32_t)(row - 1);
    }
    sv_llama_batch_t b = {.n_tokens = (int32_t)nt, .tokens = e->b_tokens, .positions = e->b_pos,
                          .seq = e->b_seq, .n_seqs = (int32_t)np, .seqs = e->b_seqs,
                          .n_logits = (int32_t)nl, .logit_rows = e->b_logit_rows};
    if ((st = sv_llama_forward_batch(e->model, e->kv, &b, e->logits, err))) return st;
    e->st.steps++;
    e->st.rows += nt;
    if (e->n_running > e->st.max_running) e->st.max_running = e->n_running;

    /* Advance: computed positions, prompt blocks to the cache, samples. */
    uint32_t li = 0;
    for (uint32_t j = 0; j < np; j++) {
        req_t *r = e->places[j].r;
        r->n_computed += e->places[j].chunk;
        if (!r->inserted && r->n_computed >= r->n_prompt) {
            cache_blocks(e, r);
            r->inserted = true;
        }
        if (r->n_computed == r->n_toks) {
            if ((st = sample(e, r, e->logits + (size_t)li++ * (size_t)e->n_vocab, err))) return st;
        }
        if (r->finish == SV_FINISH_NONE && r->n_toks - r->n_prompt > r->n_reported &&
            (st = outq_push(e, r, err)))
            return st;
    }
    return SV_OK;
}

/* ---- accounting ----------------------------------------------------------------- */

void sv_engine_stats(const sv_engine_t *e, sv_engine_stats_t *st) {
    *st = e->st;
    st->running = e->n_running;
    st->waiting = e->n_waiting;
}

const sv_kv_pool_t *sv_engine_pool(const sv_engine_t *e) { return e->pool; }

uint32_t sv_engine_free_blocks(const sv_engine_t *e) {
    uint32_t n = sv_kv_pool_free_blocks(e->pool);
    if (e->radix)
        for (uint32_t b = 0; b < sv_kv_pool_n_blocks(e->pool); b++)
            if (sv_kv_pool_refcount(e->pool, b) == 1 && sv_radix_holds(e->radix, b)) n++;
    return n;
}
