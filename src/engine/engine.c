/* engine.c — the scheduler and the step loop (see engine.h for the
 * contract).
 *
 * A request is a group of n choices (req_t); each choice is scheduled on
 * its own and lives in exactly one place: the waiting queue (no KV), the
 * running list (a KV sequence whose first n_computed positions hold the
 * keys and values of toks[0 .. n_computed)), or the output queue once
 * finished (no KV) until its last output is popped. Its token buffer holds
 * the prompt followed by the output; the tokens past n_computed are
 * "pending": the rest of the prompt, the last sampled token, or
 * jump-forward tokens. Every running choice has at least one pending token.
 *
 * n > 1. Until the group forks, only choice 0 is scheduled: the others wait
 * in the group, with the same tokens (the prompt and any tokens forced at
 * the start). When choice 0 first has every token computed, the group
 * forks: each other choice takes a fork of choice 0's KV sequence (all its
 * blocks shared, the partial last one copied on the first write) and a
 * running slot, or, when the running list is full, goes to the front of
 * the waiting queue without KV (it recomputes, through the prefix cache
 * when there is one); then every choice samples, with its own sampler and
 * matcher, from its own copy of choice 0's last row of logits.
 *
 * The reference loop (cmd_generate.c) feeds a sampled token and then asks
 * the matcher for forced tokens, rolling the sampled token back when the
 * tokenizer would merge it with them. Here the matcher is asked right after
 * the token is accepted, before anything is fed, so a rollback only ever
 * drops a pending token: the token sequence, and so every position's KV and
 * the logits each sample sees, is the reference's.
 *
 * Logprobs. A sampled token's come from sv_sampler_sample. A forced token
 * is scored (sv_sampler_logprobs) on the logits of the row before it, under
 * the mask of the state it was forced from and the penalties of the tokens
 * before it: exactly what sampling it there would have reported. Those rows
 * are computed in a later step, when the matcher and the sampler have moved
 * past the forced tokens, so scoring rolls both back to the first unscored
 * token and walks forward again, taking each mask on the way (the matcher
 * keeps its whole history; the sampler's penalty state is a count per id).
 * The one row that is not computed later is the row a rolled-back token was
 * sampled from: a forced token that takes its place is scored at once on a
 * copy of that row (e->raw). Output (tokens, text, logprobs) only ever
 * covers scored tokens, and a choice whose last tokens are forced waits
 * ("ending") for one more forward to score them before it finishes.
 *
 * Text. Each choice's scored output tokens go through its detokenizer into
 * txt: [0, txt_ready) is ready to output, [txt_ready, txt_len) is held back
 * because it may still begin a stop string. The first occurrence of a stop
 * string (earliest start, then lowest index) is taken as soon as no stop
 * string that could still complete could start earlier (or at the same
 * place with a lower index), so the text is the full text cut at its first
 * occurrence, whatever the chunking. */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefetch.h"
#include "radix.h"
#include "src/tokenizer/detok.h"
#include "util/clock.h"
#include "util/hash.h"
#include "util/utf8.h"

#define FORCED_CAP 64 /* jump-forward tokens per matcher call */
/* Bytes beyond a reasoning's end tag that forcing its end may take: the
 * rest of a UTF-8 character the reasoning stopped inside (think_force). */
#define THINK_SLACK 3

typedef struct group group_t;

typedef struct req {
    group_t *g;
    uint32_t index;        /* the choice */
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
    int32_t stop_index, stop_id;
    /* the decided end of a choice waiting for its last tokens' logprobs */
    bool ending;
    sv_finish_reason end_why;
    int32_t end_stop_id;
    sv_kv_seq_t *seq;      /* NULL unless running */
    sv_sampler_t *sampler;
    sv_matcher_t *matcher; /* NULL when unconstrained (and, with a reasoning, until it ends) */
    /* A reasoning (engine.h, sv_engine_reasoning_t): its matcher, kept
     * after it ends so that scoring can replay its tokens; whether the
     * next token is still the reasoning's; its output tokens once it has
     * ended (end tag included); the output tokens after which the end tag
     * is forced (UINT32_MAX: never). */
    sv_matcher_t *think;   /* NULL without a reasoning */
    bool thinking;
    uint32_t n_think;
    uint32_t think_lim;
    /* Its text: txt[0 .. txt_think) is reasoning once think_text_done
     * (before that, all of txt is); open_checked: the opening tag at its
     * start is decided (stripped or absent). */
    size_t txt_think;
    bool think_text_done, open_checked;
    sv_logprobs_t *lp;     /* (lp_cap) per output token, when the group asks */
    uint32_t lp_cap, n_scored;
    sv_detok_t *detok;     /* NULL without a vocab */
    char *txt;
    size_t txt_len, txt_cap, txt_ready, txt_popped;
    uint32_t n_texted;     /* output tokens given to the detokenizer */
    bool text_done;
} req_t;

struct group {
    uint64_t id;
    uint32_t n, n_open;    /* choices; choices whose last output is not popped yet */
    uint32_t n_prompt;
    bool forked;           /* choices 1.. are scheduled on their own */
    bool batch;            /* batch priority: after online requests, preempted first */
    bool logprobs;
    sv_token_index_t *ix;
    sv_token_index_t *think_ix; /* the reasoning's constraint (engine.h), or NULL: no reasoning */
    int32_t think_end[SV_ENGINE_MAX_END];
    uint32_t n_think_end;
    char open_tag[SV_ENGINE_MAX_TAG + 1], end_tag[SV_ENGINE_MAX_TAG + 1];
    int32_t *stop_ids;
    uint32_t n_stop_ids;
    char **stop;
    size_t *stop_len;
    uint32_t n_stop;
    group_t *prev, *next;  /* every live group */
    req_t *ch[SV_ENGINE_MAX_N];
};

typedef struct place {
    req_t *r;
    uint32_t chunk;  /* rows this step */
    uint32_t logit0; /* its first logits row */
    uint32_t n_score, n_sample; /* logits rows that score forced tokens, then sample (0 or 1) */
} place_t;

struct sv_engine {
    sv_llama_t *model;
    sv_engine_vocab_t vocab;
    sv_engine_config_t cfg;
    int32_t n_vocab;
    sv_kv_pool_t *pool;
    sv_radix_t *radix; /* NULL without the prefix cache */
    sv_prefetch_t *pf; /* NULL without prefetch workers */
    sv_llama_kv_t *kv;
    uint64_t next_id;
    group_t *groups;   /* live groups */

    req_t **running;   /* (max_num_seqs) oldest first */
    uint32_t n_running;
    req_t **waiting;   /* front first, grown on demand */
    uint32_t n_waiting, waiting_cap;
    req_t **outq;      /* FIFO, grown on demand */
    uint32_t outq_head, outq_n, outq_cap;
    group_t *retired;  /* its last output popped; freed at the next call */
    req_t *popped;     /* its text handed out; compacted at the next call */

    /* step scratch */
    place_t *places;   /* (max_num_seqs) */
    int32_t *b_tokens, *b_pos, *b_seq, *b_logit_rows; /* (max_num_batched_tokens) */
    sv_llama_seq_t *b_seqs;                            /* (max_num_seqs) */
    float *logits;                                     /* (logit_cap, n_vocab), grown on demand */
    uint32_t logit_cap;
    /* device sampling (cfg.dsampler): per logits row of a step */
    uint32_t *lr_place;            /* (max_num_batched_tokens) its place */
    bool *lr_dev;                  /* (max_num_batched_tokens) sampled on the device */
    sv_cuda_sample_out_t *dout;    /* (logit_cap) the device's choice */
    sv_cuda_sample_params_t *dpar; /* (dsampler->max_rows) */
    sv_backend_t *be;              /* the model's (borrowed): downloads the other rows */
    uint64_t dev_masks;            /* names of budget-cut masks (key_hi 0) handed out */
    float *row, *raw;  /* (n_vocab): a choice's copy of a row; the row a rolled-back token came from */
    int32_t byte_tok[256]; /* the normal token of each single byte, or -1 */
    uint32_t *match_blocks; /* (max_ctx / 16 + 1) */

    sv_engine_stats_t st;
    uint64_t step_calls; /* sv_engine_step calls with work (cfg.fault_at_step) */
    bool (*interrupt)(void *ud); /* sv_engine_set_interrupt */
    void *interrupt_ud;
};

void sv_engine_config_default(sv_engine_config_t *c) {
    memset(c, 0, sizeof *c);
    c->max_num_seqs = 16;
    c->max_num_batched_tokens = 256;
    c->batch_step_tokens = 32;
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
    sv_matcher_destroy(r->think);
    sv_detok_destroy(r->detok);
    free(r->toks);
    free(r->lp);
    free(r->txt);
    free(r);
}

static void group_free(group_t *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->n; i++) req_free(g->ch[i]);
    for (uint32_t i = 0; i < g->n_stop; i++) free(g->stop[i]);
    free(g->stop);
    free(g->stop_len);
    free(g->stop_ids);
    free(g);
}

static void group_unlink(sv_engine_t *e, group_t *g) {
    if (g->prev) g->prev->next = g->next;
    else e->groups = g->next;
    if (g->next) g->next->prev = g->prev;
    g->prev = g->next = NULL;
}

void sv_engine_destroy(sv_engine_t *e) {
    if (!e) return;
    sv_prefetch_destroy(e->pf);
    while (e->groups) {
        group_t *g = e->groups;
        group_unlink(e, g);
        group_free(g);
    }
    group_free(e->retired);
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
    free(e->b_logit_rows);
    free(e->b_seqs);
    free(e->logits);
    free(e->lr_place);
    free(e->lr_dev);
    free(e->dout);
    free(e->dpar);
    free(e->row);
    free(e->raw);
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
    if (c.prefetch_threads > SV_PREFETCH_MAX_THREADS)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: prefetch_threads must be 0..%u", SV_PREFETCH_MAX_THREADS);
    if (c.max_ctx < 2) return sv_error_set(err, SV_ERR_ARG, -1, "engine: max_ctx must be at least 2");
    if (c.dsampler && (c.dsampler->max_rows < 1 || !c.dsampler->begin_step || !c.dsampler->mask_slot ||
                       !c.dsampler->sample))
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: an incomplete device sampler");
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
    /* single-byte tokens, for the rest of a character (think_force) */
    for (int b = 0; b < 256; b++) e->byte_tok[b] = -1;
    if (e->vocab.set)
        for (uint32_t id = sv_token_set_size(e->vocab.set); id-- > 0;) {
            uint32_t len;
            const uint8_t *p = sv_token_set_bytes(e->vocab.set, (int32_t)id, &len);
            if (p && len == 1 && sv_token_set_kind(e->vocab.set, (int32_t)id) == SV_TOKKIND_NORMAL)
                e->byte_tok[p[0]] = (int32_t)id;
        }
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
    if (c.prefetch_threads && (st = sv_prefetch_create(c.prefetch_threads, NULL, &e->pf, err))) goto fail;
    if ((st = sv_llama_kv_create(m, (int32_t)c.kv_blocks, (int32_t)c.max_num_batched_tokens, &e->kv, err)))
        goto fail;
    size_t S = c.max_num_seqs, B = c.max_num_batched_tokens, V = (size_t)e->n_vocab;
    e->waiting_cap = c.max_queue + c.max_num_seqs;
    e->running = calloc(S, sizeof *e->running);
    e->waiting = calloc(e->waiting_cap, sizeof *e->waiting);
    e->places = calloc(S, sizeof *e->places);
    e->b_tokens = calloc(B, sizeof(int32_t));
    e->b_pos = calloc(B, sizeof(int32_t));
    e->b_seq = calloc(B, sizeof(int32_t));
    e->b_logit_rows = calloc(B, sizeof(int32_t));
    e->b_seqs = calloc(S, sizeof *e->b_seqs);
    /* One row per running sequence to start with; extends that report
     * logprobs grow it (at most max_num_batched_tokens rows). */
    e->logit_cap = c.max_num_seqs < c.max_num_batched_tokens ? c.max_num_seqs : c.max_num_batched_tokens;
    e->logits = calloc((size_t)e->logit_cap * V, sizeof(float));
    e->lr_place = calloc(B, sizeof *e->lr_place);
    e->lr_dev = calloc(B, sizeof *e->lr_dev);
    e->be = sv_llama_backend(m);
    if (c.dsampler) {
        e->dout = calloc(e->logit_cap, sizeof *e->dout);
        e->dpar = calloc((size_t)c.dsampler->max_rows, sizeof *e->dpar);
    }
    e->row = calloc(V, sizeof(float));
    e->raw = calloc(V, sizeof(float));
    e->match_blocks = calloc(min_blocks + 1, sizeof(uint32_t));
    if (!e->running || !e->waiting || !e->places || !e->b_tokens || !e->b_pos || !e->b_seq || !e->b_seqs ||
        !e->b_logit_rows || !e->logits || !e->row || !e->raw || !e->match_blocks || !e->lr_place || !e->lr_dev ||
        (c.dsampler && (!e->dout || !e->dpar))) {
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

/* Priorities (sv_engine_request_t.priority). The waiting queue holds the
 * online requests first, then the batch ones, and so does the running list:
 * so admission takes online requests first and preemption, which takes the
 * newest running choice, takes a batch one first. Where a choice of
 * priority batch goes in the waiting queue: at the front of its class
 * (a preempted choice) or at its end (a new one). */
static uint32_t waiting_pos(const sv_engine_t *e, bool batch, bool front) {
    if (!batch && front) return 0;
    if (batch && !front) return e->n_waiting;
    uint32_t k = 0; /* the first batch choice */
    while (k < e->n_waiting && !e->waiting[k]->g->batch) k++;
    return k;
}

/* Appends r to the running list's end of its class. */
static void running_add(sv_engine_t *e, req_t *r) {
    uint32_t k = e->n_running;
    if (!r->g->batch)
        while (k > 0 && e->running[k - 1]->g->batch) k--;
    memmove(e->running + k + 1, e->running + k, (e->n_running - k) * sizeof *e->running);
    e->running[k] = r;
    e->n_running++;
}

/* Inserts r into the waiting queue at position at (0: the front). */
static sv_status waiting_insert(sv_engine_t *e, uint32_t at, req_t *r, sv_error_t *err) {
    if (e->n_waiting == e->waiting_cap) {
        uint32_t nc = e->waiting_cap * 2;
        req_t **w = realloc(e->waiting, nc * sizeof *w);
        if (!w) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        e->waiting = w;
        e->waiting_cap = nc;
    }
    memmove(e->waiting + at + 1, e->waiting + at, (e->n_waiting - at) * sizeof *e->waiting);
    e->waiting[at] = r;
    e->n_waiting++;
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

/* Output tokens that may be handed out: scored ones when the group asks
 * for logprobs. */
static uint32_t avail(const req_t *r) { return r->g->logprobs ? r->n_scored : r->n_toks - r->n_prompt; }

static sv_status lp_reserve(req_t *r, uint32_t n, sv_error_t *err) {
    if (n <= r->lp_cap) return SV_OK;
    uint32_t nc = r->lp_cap ? r->lp_cap : 16;
    while (nc < n) nc *= 2;
    if (nc > r->cap) nc = r->cap;
    SV_INVARIANT(nc >= n, err, "engine: internal: logprobs past the request's buffer");
    sv_logprobs_t *lp = realloc(r->lp, (size_t)nc * sizeof *lp);
    if (!lp) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    r->lp = lp;
    r->lp_cap = nc;
    return SV_OK;
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

/* ---- text -------------------------------------------------------------------- */

static sv_status txt_append(req_t *r, const char *s, size_t n, sv_error_t *err) {
    if (!n) return SV_OK;
    if (r->txt_len + n > r->txt_cap) {
        size_t nc = r->txt_cap ? r->txt_cap : 64;
        while (nc < r->txt_len + n) nc *= 2;
        char *t = realloc(r->txt, nc);
        if (!t) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        r->txt = t;
        r->txt_cap = nc;
    }
    memcpy(r->txt + r->txt_len, s, n);
    r->txt_len += n;
    return SV_OK;
}

/* ---- reasoning text (engine.h, sv_engine_reasoning_t) ---------------------------- */

/* Strips the opening tag from the start of the reasoning text once the
 * text is long enough to tell; until then nothing of it is ready (and so
 * nothing was handed out: txt still starts at the reasoning's start). */
static void think_open_check(req_t *r) {
    if (r->open_checked) return;
    size_t ol = strlen(r->g->open_tag);
    if (r->txt_len < ol && (r->txt_len == 0 || !memcmp(r->txt, r->g->open_tag, r->txt_len))) return;
    if (ol && !memcmp(r->txt, r->g->open_tag, ol)) {
        memmove(r->txt, r->txt + ol, r->txt_len - ol);
        r->txt_len -= ol;
    }
    r->open_checked = true;
}

/* How much of the reasoning text is ready: all but an undecided opening
 * tag and the longest end of it that may still become the end tag. */
static size_t think_ready(req_t *r) {
    think_open_check(r);
    if (!r->open_checked) return 0;
    const char *tag = r->g->end_tag;
    size_t el = strlen(tag), keep = 0;
    for (size_t k = el - 1; k > 0 && !keep; k--)
        if (k <= r->txt_len && !memcmp(r->txt + r->txt_len - k, tag, k)) keep = k;
    size_t ready = r->txt_len - keep;
    return ready > r->txt_ready ? ready : r->txt_ready;
}

/* The reasoning's last token has been detokenized: its text ends with the
 * end tag (think_ready held it back), which goes; the answer's text starts
 * here. */
static void think_text_end(req_t *r) {
    think_open_check(r);
    r->open_checked = true;
    size_t el = strlen(r->g->end_tag);
    if (r->txt_len >= el + r->txt_ready && !memcmp(r->txt + r->txt_len - el, r->g->end_tag, el)) r->txt_len -= el;
    r->think_text_done = true;
    r->txt_think = r->txt_ready = r->txt_len;
}

/* Runs the output tokens that may be handed out through the detokenizer
 * and moves txt_ready past the text no stop string can claim; final: the
 * choice ends (flush, and only complete occurrences count). *hit: a stop
 * string cut the text (r->stop_index says which). */
static sv_status text_feed(req_t *r, bool final, bool *hit, sv_error_t *err) {
    *hit = false;
    if (!r->detok || r->text_done) return SV_OK;
    const group_t *g = r->g;
    uint32_t upto = avail(r);
    const char *t;
    size_t tn;
    sv_status st;
    for (; r->n_texted < upto; r->n_texted++) {
        if ((st = sv_detok_push(r->detok, r->toks[r->n_prompt + r->n_texted], &t, &tn, err))) return st;
        if ((st = txt_append(r, t, tn, err))) return st;
        if (g->think_ix && !r->think_text_done && !r->thinking && r->n_texted + 1 == r->n_think) think_text_end(r);
    }
    if (final) {
        sv_detok_flush(r->detok, &t, &tn);
        if ((st = txt_append(r, t, tn, err))) return st;
        r->text_done = true;
        if (g->think_ix && !r->think_text_done) {
            /* ended inside the reasoning: all of its text is reasoning */
            think_open_check(r);
            r->think_text_done = true;
            r->txt_think = r->txt_ready = r->txt_len;
            return SV_OK;
        }
    }
    if (g->think_ix && !r->think_text_done) {
        r->txt_ready = think_ready(r);
        return SV_OK;
    }
    if (r->matcher || g->n_stop == 0) {
        r->txt_ready = r->txt_len;
        return SV_OK;
    }
    /* The first complete occurrence at or after txt_ready (nothing before
     * it can begin one), and the first place a stop string may still
     * begin. */
    size_t len = r->txt_len, best = SIZE_MAX, open = SIZE_MAX;
    int32_t best_i = -1;
    for (size_t q = r->txt_ready; q < len && q <= best; q++) {
        for (uint32_t i = 0; i < g->n_stop; i++) {
            size_t sl = g->stop_len[i];
            if (len - q >= sl) {
                if (q < best && !memcmp(r->txt + q, g->stop[i], sl)) {
                    best = q;
                    best_i = (int32_t)i;
                }
            } else if (!final && open == SIZE_MAX && !memcmp(r->txt + q, g->stop[i], len - q) &&
                       (q < best || (int32_t)i < best_i)) {
                open = q;
            }
        }
    }
    if (best_i >= 0 && (open == SIZE_MAX || open > best)) {
        r->txt_len = r->txt_ready = best;
        r->stop_index = best_i;
        r->text_done = true;
        *hit = true;
        return SV_OK;
    }
    r->txt_ready = open != SIZE_MAX ? open : best_i >= 0 ? best : len;
    return SV_OK;
}

/* ---- ending a choice ------------------------------------------------------------- */

/* Ends r: its KV goes (full blocks to the prefix cache unless aborted), it
 * leaves the running or waiting list and its final output is queued. When
 * r must still score forced tokens, the end is only recorded ("ending"):
 * r keeps running until they are scored. */
static sv_status finish(sv_engine_t *e, req_t *r, sv_finish_reason why, int32_t stop_id, sv_error_t *err) {
    if (why != SV_FINISH_ABORT && avail(r) < r->n_toks - r->n_prompt) {
        r->ending = true;
        r->end_why = why;
        r->end_stop_id = stop_id;
        return SV_OK;
    }
    bool hit;
    sv_status st = text_feed(r, true, &hit, err);
    if (st) return st;
    r->finish = why;
    /* A constrained stop with the whole budget used: the budget rule may
     * have closed the output (a string closed by force ends finished, not
     * merely accepting), so it counts as the budget's. */
    r->budget_stop = why == SV_FINISH_STOP && r->matcher && r->n_toks - r->n_prompt >= r->budget;
    r->stop_id = stop_id;
    if (hit && why != SV_FINISH_ABORT) {
        r->finish = SV_FINISH_STOP;
        r->budget_stop = false;
        r->stop_id = -1;
    } else if (hit) {
        r->stop_index = -1;
    }
    r->ending = false;
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

/* After tokens were accepted (r not finished): text, and a stop string may
 * end r. */
static sv_status settle(sv_engine_t *e, req_t *r, sv_error_t *err) {
    bool hit;
    sv_status st = text_feed(r, false, &hit, err);
    if (st) return st;
    if (hit) return finish(e, r, SV_FINISH_STOP, -1, err);
    return SV_OK;
}

/* Frees the group whose last output was popped and compacts the text of
 * the choice whose text was handed out. */
static void retire(sv_engine_t *e) {
    req_t *r = e->popped;
    if (r && r->txt_popped) {
        memmove(r->txt, r->txt + r->txt_popped, r->txt_len - r->txt_popped);
        r->txt_len -= r->txt_popped;
        r->txt_ready -= r->txt_popped;
        r->txt_think = r->txt_think > r->txt_popped ? r->txt_think - r->txt_popped : 0;
        r->txt_popped = 0;
    }
    e->popped = NULL;
    group_free(e->retired);
    e->retired = NULL;
}

/* ---- advancing a choice (the reference loop's decisions) --------------------- */

static bool is_eog(const sv_engine_t *e, int32_t id) {
    const sv_token_set_t *s = e->vocab.set;
    return s && (uint32_t)id < sv_token_set_size(s) && sv_token_set_kind(s, id) == SV_TOKKIND_EOG;
}

/* The matcher r's next token goes through (the reasoning's while it
 * lasts), or NULL: unconstrained; and its index. */
static sv_matcher_t *cur(const req_t *r) { return r->thinking ? r->think : r->matcher; }
static sv_token_index_t *cur_ix(const req_t *r) { return r->thinking ? r->g->think_ix : r->g->ix; }

/* Matcher m's mask (over ix), counting the first visits the engine thread
 * pays for (the index walked its trie during the call). */
static sv_status mask_of(sv_engine_t *e, sv_token_index_t *ix, sv_matcher_t *m, const uint32_t **mask,
                         sv_error_t *err) {
    uint64_t t0 = sv_now_ns();
    if (!sv_token_index_mask_known(ix, sv_matcher_state(m), sv_matcher_ws_run(m))) e->st.mask_waits++;
    sv_status st = sv_matcher_mask(m, mask, err);
    e->st.mask_ns += sv_now_ns() - t0;
    return st;
}

/* The mask of r's current matcher (cur). */
static sv_status get_mask(sv_engine_t *e, req_t *r, const uint32_t **mask, sv_error_t *err) {
    return mask_of(e, cur_ix(r), cur(r), mask, err);
}

/* Asks the prefetch workers for the masks r may need next: its state's and
 * its successors' (prefetch.h). */
static void prefetch(sv_engine_t *e, const req_t *r) {
    const sv_matcher_t *m = cur(r);
    if (e->pf && m && r->finish == SV_FINISH_NONE)
        sv_prefetch_post(e->pf, cur_ix(r), sv_matcher_state(m), sv_matcher_ws_run(m));
}

/* The reasoning's end tag was accepted: the answer's matcher starts, with
 * the budget that is left (submit kept room for its shortest output). */
static sv_status think_done(sv_engine_t *e, req_t *r, sv_error_t *err) {
    uint32_t n_out = r->n_toks - r->n_prompt;
    r->thinking = false;
    r->n_think = n_out;
    if (!r->g->ix) return SV_OK;
    uint32_t left = r->budget > n_out ? r->budget - n_out : 0;
    sv_error_t why;
    sv_error_clear(&why);
    /* left 0 (no budget for the matcher): the budget check in advance ends
     * the choice at once, STOP when the answer may be empty */
    if (sv_matcher_create(r->g->ix, e->vocab.tok, left, &r->matcher, &why))
        return sv_error_set(err, SV_ERR_INTERNAL, -1, "engine: internal: no room for the answer after the reasoning "
                            "(%u of %u tokens used): %s", n_out, r->budget, why.message);
    return SV_OK;
}

/* The reasoning ran out of tokens: the shortest way to its end is forced.
 * From a clean state that is the end tag (whose tokens the server checked);
 * inside a started tag it is the tag's rest (encoded); inside a character
 * (the reasoning's constraint takes valid UTF-8 only) the character's rest
 * comes first, as single-byte tokens. That is at most THINK_SLACK more
 * tokens than the tag (think_limit keeps the room). *done false: nothing
 * was forced, because the vocabulary has no single-byte token for a byte of
 * the character's rest; the model then writes on under the mask until the
 * character is whole. */
static sv_status think_force(sv_engine_t *e, req_t *r, bool *done, sv_error_t *err) {
    const group_t *g = r->g;
    uint8_t buf[SV_ENGINE_MAX_TAG + THINK_SLACK];
    int32_t ids[SV_ENGINE_MAX_TAG + THINK_SLACK];
    const int32_t *force = g->think_end;
    int n = (int)g->n_think_end;
    *done = false;
    uint32_t len = sv_token_index_completion(g->think_ix, sv_matcher_state(r->think), buf, sizeof buf);
    size_t el = strlen(g->end_tag);
    SV_INVARIANT(len != UINT32_MAX && len > 0, err, "engine: internal: the reasoning has no short way to its end");
    if (len != el || memcmp(buf, g->end_tag, el)) {
        uint32_t k = 0;
        for (; k < len && (buf[k] & 0xC0) == 0x80; k++) {
            if (e->byte_tok[buf[k]] < 0) return SV_OK;
            ids[k] = e->byte_tok[buf[k]];
        }
        int m = e->vocab.tok->encode(e->vocab.tok->ctx, buf + k, len - k, ids + k, (int)(sizeof ids / sizeof *ids - k));
        SV_INVARIANT(m > 0, err, "engine: internal: the reasoning's end does not encode");
        n = (int)k + m;
        force = ids;
    }
    *done = true;
    sv_status st;
    SV_INVARIANT(r->n_toks + (uint32_t)n <= r->cap, err, "engine: internal: the end tag past the request's buffer");
    for (int i = 0; i < n; i++) {
        SV_INVARIANT(sv_matcher_accept(r->think, force[i]), err,
                     "engine: internal: the reasoning's end was refused (token %d)", force[i]);
        if ((st = sv_sampler_accept(r->sampler, force[i], err))) return st;
        r->toks[r->n_toks++] = force[i];
    }
    SV_INVARIANT(sv_matcher_is_finished(r->think), err, "engine: internal: the end tag did not end the reasoning");
    e->st.forced += (uint64_t)n;
    return SV_OK;
}

/* After the prompt or an accepted token: ends r on its budget or a finished
 * constraint, else takes forced paths (jump-forward) into the pending
 * tokens until the state is not forced. raw_at: the output index whose
 * distribution e->raw holds (the sampled token's), or -1: a forced token
 * that replaces a rolled-back token there is scored at once. */
static sv_status advance(sv_engine_t *e, req_t *r, int64_t raw_at, sv_error_t *err) {
    int32_t forced[FORCED_CAP];
    sv_status st;
    for (;;) {
        uint32_t n_out = r->n_toks - r->n_prompt;
        if (r->thinking && sv_matcher_is_finished(r->think)) {
            if ((st = think_done(e, r, err))) return st;
            continue;
        }
        if (n_out >= r->budget) {
            bool acc = cur(r) && sv_matcher_is_accepting(cur(r));
            return finish(e, r, acc ? SV_FINISH_STOP : SV_FINISH_LENGTH, -1, err);
        }
        if (r->thinking) {
            bool forced_end = false;
            if (n_out >= r->think_lim && (st = think_force(e, r, &forced_end, err))) return st;
            if (!forced_end) break;
            continue;
        }
        if (!r->matcher) break;
        if (sv_matcher_is_finished(r->matcher)) return finish(e, r, SV_FINISH_STOP, -1, err);
        if (!e->vocab.tok || !e->cfg.jump_forward) break;
        uint32_t nf = 0, rb = 0;
        if ((st = sv_matcher_forced(r->matcher, forced, FORCED_CAP, &nf, &rb, err))) return st;
        if (nf == 0 || rb > n_out) break;
        if (rb) {
            /* Only a token accepted in this step can be rolled back: it is
             * pending (no KV) and not yet output. */
            SV_INVARIANT(n_out - rb >= r->n_reported && r->n_toks - rb >= r->n_computed, err, "engine: internal: rollback past output or KV");
            if ((st = sv_matcher_rollback(r->matcher, rb, err))) return st;
            for (uint32_t i = 0; i < rb; i++)
                if ((st = sv_sampler_unaccept(r->sampler, r->toks[--r->n_toks], err))) return st;
            n_out -= rb;
            if (r->n_scored > n_out) r->n_scored = n_out;
            e->st.rollbacks++;
        }
        SV_INVARIANT(r->n_toks + nf <= r->cap, err, "engine: internal: forced tokens past the request's buffer");
        if (r->g->logprobs && raw_at == (int64_t)n_out && r->n_scored == n_out) {
            /* forced[0] takes the place of the rolled-back sampled token:
             * its row is the one that token was sampled from. */
            const uint32_t *mask;
            if ((st = get_mask(e, r, &mask, err)) || (st = lp_reserve(r, n_out + 1, err))) return st;
            memcpy(e->row, e->raw, (size_t)e->n_vocab * sizeof *e->row);
            if ((st = sv_sampler_logprobs(r->sampler, e->row, mask, forced[0], &r->lp[n_out], err))) return st;
            r->n_scored++;
        }
        for (uint32_t i = 0; i < nf; i++) {
            SV_INVARIANT(sv_matcher_accept(r->matcher, forced[i]), err, "engine: internal: a forced token was refused");
            if ((st = sv_sampler_accept(r->sampler, forced[i], err))) return st;
            r->toks[r->n_toks++] = forced[i];
        }
        e->st.forced += nf;
    }
    return settle(e, r, err);
}

/* r's sampled token id (its logprobs in r->lp when lp): appends it and
 * advances (keep_raw: e->raw holds the row it came from). */
static sv_status took(sv_engine_t *e, req_t *r, int32_t id, bool lp, bool keep_raw, sv_error_t *err) {
    sv_status st;
    uint32_t n_out = r->n_toks - r->n_prompt;
    sv_matcher_t *m = cur(r);
    e->st.sampled++;
    if (is_eog(e, id)) {
        if (m) sv_matcher_accept(m, id);
        return finish(e, r, SV_FINISH_STOP, id, err);
    }
    if (!m)
        for (uint32_t i = 0; i < r->g->n_stop_ids; i++)
            if (r->g->stop_ids[i] == id) return finish(e, r, SV_FINISH_STOP, id, err);
    SV_INVARIANT(!m || sv_matcher_accept(m, id), err, "engine: internal: sampled token %d is outside the mask", id);
    if ((st = sv_sampler_accept(r->sampler, id, err))) return st;
    r->toks[r->n_toks++] = id;
    if (lp) r->n_scored++;
    if (!r->thinking && m && sv_matcher_is_finished(m)) return finish(e, r, SV_FINISH_STOP, -1, err);
    return advance(e, r, keep_raw ? (int64_t)n_out : -1, err);
}

/* Whether r's next token is sampled on the device (engine.h,
 * sv_engine_dsampler_t): no logprobs, nothing the device does not apply,
 * and not choice 0 at its group's fork (fork_group shares the row). */
static bool dev_sampled(const sv_engine_t *e, const req_t *r) {
    float t, p, mp;
    int32_t k;
    return e->cfg.dsampler && !r->g->logprobs && r->g->forked && sv_sampler_plain(r->sampler, &t, &k, &p, &mp);
}

/* The logits hook of a step with a device sampler (llama.h): rows
 * [first, first + k) of the step's logits in dev. Rows sampled here get
 * the device's choice in e->dout (the draw peeked, not taken: a step given
 * up later takes none); the others are downloaded into e->logits. The
 * masks come first: the device is still computing the step (nothing here
 * has waited for it yet), so their host work overlaps it, and their
 * uploads are asynchronous (src/backend/cuda.c). */
static sv_status dev_logits_run(sv_engine_t *e, int32_t first, int32_t k, const float *dev, sv_error_t *err);

static sv_status dev_logits(void *ud, int32_t first, int32_t k, const float *dev, sv_error_t *err) {
    sv_engine_t *e = ud;
    uint64_t t0 = sv_now_ns();
    sv_status st = dev_logits_run(e, first, k, dev, err);
    e->st.hook_ns += sv_now_ns() - t0;
    return st;
}

static sv_status dev_logits_run(sv_engine_t *e, int32_t first, int32_t k, const float *dev, sv_error_t *err) {
    const sv_engine_dsampler_t *ds = e->cfg.dsampler;
    const size_t V = (size_t)e->n_vocab;
    sv_status st;
    bool downloaded = false;
    for (int32_t i0 = 0; i0 < k; i0 += ds->max_rows) {
        int32_t n = k - i0 < ds->max_rows ? k - i0 : ds->max_rows, any = 0;
        ds->begin_step(ds->ud);
        for (int32_t i = 0; i < n; i++) {
            int32_t li = first + i0 + i;
            sv_cuda_sample_params_t *p = &e->dpar[i];
            *p = (sv_cuda_sample_params_t){.temperature = 0.0f, .top_p = 1.0f, .mask = -1};
            if (!e->lr_dev[li]) continue; /* greedy on its row, unused */
            any = 1;
            req_t *r = e->places[e->lr_place[li]].r;
            (void)sv_sampler_plain(r->sampler, &p->temperature, &p->top_k, &p->top_p, &p->min_p);
            p->draw = sv_sampler_peek_draw(r->sampler);
            if (cur(r)) {
                const uint32_t *mask;
                uint64_t key[2];
                if ((st = get_mask(e, r, &mask, err))) return st;
                if (!sv_matcher_mask_key(cur(r), mask, key)) key[0] = 0, key[1] = ++e->dev_masks;
                if ((st = ds->mask_slot(ds->ud, key[0], key[1], mask, &p->mask, err))) return st;
            }
        }
        if (!downloaded) {
            for (int32_t i = 0, j; i < k; i = j) {
                for (j = i; j < k && e->lr_dev[first + j] == e->lr_dev[first + i]; j++) {}
                if (!e->lr_dev[first + i] &&
                    (st = e->be->ops->download(e->be, e->logits + (size_t)(first + i) * V, dev + (size_t)i * V,
                                               (size_t)(j - i) * V * sizeof(float), err)))
                    return st;
            }
            downloaded = true;
        }
        if (any && (st = ds->sample(ds->ud, n, dev + (size_t)i0 * V, e->dpar, e->dout + first + i0, err))) return st;
    }
    return SV_OK;
}

/* r's token from the device sampler (o): takes the draw and advances. */
static sv_status take_dev(sv_engine_t *e, req_t *r, const sv_cuda_sample_out_t *o, sv_error_t *err) {
    if (o->status != SV_OK)
        return sv_error_set(err, (sv_status)o->status, -1, "%s",
                            o->status == SV_ERR_EMPTY
                                ? "sampler: no token is allowed (the mask is empty or every allowed logit is -inf)"
                                : "sampler: an allowed logit is NaN or +inf (device)");
    sv_sampler_take_draw(r->sampler);
    e->st.dev_sampled++;
    return took(e, r, o->id, false, false, err);
}

/* Samples r's next token from its logits row (modified) and advances. */
static sv_status sample(sv_engine_t *e, req_t *r, float *logits, sv_error_t *err) {
    const uint32_t *mask = NULL;
    sv_status st;
    uint32_t n_out = r->n_toks - r->n_prompt;
    if (cur(r) && (st = get_mask(e, r, &mask, err))) return st;
    sv_logprobs_t *lp = NULL;
    bool keep_raw = false;
    if (r->g->logprobs) {
        SV_INVARIANT(r->n_scored == n_out, err, "engine: internal: sampling past unscored tokens");
        if ((st = lp_reserve(r, n_out + 1, err))) return st;
        lp = &r->lp[n_out];
        keep_raw = cur(r) && e->vocab.tok && e->cfg.jump_forward;
        if (keep_raw) memcpy(e->raw, logits, (size_t)e->n_vocab * sizeof *e->raw);
    }
    int32_t id;
    uint64_t t0 = sv_now_ns();
    st = sv_sampler_sample(r->sampler, logits, mask, &id, lp, err);
    e->st.sample_ns += sv_now_ns() - t0;
    if (st) return st;
    return took(e, r, id, lp != NULL, keep_raw, err);
}

/* Scores the forced tokens at output indexes n_scored .. n_scored + n - 1
 * on rows[0 .. n) (the rows before them): the matcher and the sampler go
 * back to the first, take each token's mask and penalties, and come
 * forward again. */
static sv_status score_forced(sv_engine_t *e, req_t *r, const float *rows, uint32_t n, sv_error_t *err) {
    uint32_t n_out = r->n_toks - r->n_prompt, k0 = r->n_scored;
    SV_INVARIANT(k0 + n <= n_out, err, "engine: internal: scoring past the output");
    sv_status st;
    if ((st = lp_reserve(r, k0 + n, err))) return st;
    /* With a reasoning, output tokens before t are the reasoning's
     * matcher's, the others the answer's. */
    uint32_t t = !r->think ? 0 : r->thinking ? n_out : r->n_think;
    uint32_t from = k0 > t ? k0 : t;
    if (r->matcher && n_out > from && (st = sv_matcher_rollback(r->matcher, n_out - from, err))) return st;
    if (r->think && k0 < t && (st = sv_matcher_rollback(r->think, t - k0, err))) return st;
    for (uint32_t i = n_out; i-- > k0;)
        if ((st = sv_sampler_unaccept(r->sampler, r->toks[r->n_prompt + i], err))) return st;
    const size_t V = (size_t)e->n_vocab;
    for (uint32_t i = k0; i < n_out; i++) {
        int32_t id = r->toks[r->n_prompt + i];
        sv_matcher_t *m = i < t ? r->think : r->matcher;
        if (i < k0 + n) {
            const uint32_t *mask = NULL;
            if (m && (st = mask_of(e, i < t ? r->g->think_ix : r->g->ix, m, &mask, err))) return st;
            memcpy(e->row, rows + (i - k0) * V, V * sizeof *e->row);
            if ((st = sv_sampler_logprobs(r->sampler, e->row, mask, id, &r->lp[i], err))) return st;
        }
        SV_INVARIANT(!m || sv_matcher_accept(m, id), err, "engine: internal: a forced token was refused on replay");
        if ((st = sv_sampler_accept(r->sampler, id, err))) return st;
    }
    r->n_scored = k0 + n;
    return SV_OK;
}

/* ---- submit / cancel / outputs ----------------------------------------------- */

/* Choice i's RNG seed: the request's seed for choice 0, else splitmix64's
 * finalizer of seed + i * 0xd1b54a32d192ed03 (an odd constant unrelated to
 * splitmix64's own increment, so that no two choices' xoshiro states share
 * words). */
static uint64_t choice_seed(uint64_t seed, uint32_t i) {
    if (i == 0) return seed;
    return sv_hash_splitmix(seed + (uint64_t)i * 0xd1b54a32d192ed03ull);
}

static sv_status check_reasoning(const sv_engine_t *e, const sv_engine_reasoning_t *rs, sv_error_t *err) {
    if (!rs) return SV_OK;
    if (!e->vocab.tok) return sv_error_set(err, SV_ERR_ARG, -1, "engine: a reasoning needs the tokenizer's encoder");
    if (!rs->think || !rs->end || rs->n_end == 0 || rs->n_end > SV_ENGINE_MAX_END)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: a reasoning needs its constraint and 1..%d end tokens",
                            SV_ENGINE_MAX_END);
    if (sv_token_set_mask_bits(sv_token_index_tokens(rs->think)) < (uint32_t)e->n_vocab)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: the reasoning's masks are shorter than the vocabulary (%d)",
                            e->n_vocab);
    for (uint32_t i = 0; i < rs->n_end; i++)
        if (rs->end[i] < 0 || rs->end[i] >= e->n_vocab)
            return sv_error_set(err, SV_ERR_ARG, -1, "engine: end tag id %d is outside the vocabulary (%d)", rs->end[i],
                                e->n_vocab);
    size_t el = rs->end_tag ? strlen(rs->end_tag) : 0, ol = rs->open_tag ? strlen(rs->open_tag) : 0;
    if (el == 0 || el > SV_ENGINE_MAX_TAG || ol > SV_ENGINE_MAX_TAG)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: reasoning tags must have 1..%d bytes (the opening tag may be "
                            "empty)", SV_ENGINE_MAX_TAG);
    return SV_OK;
}

/* The output tokens after which a reasoning's end tag is forced: its own
 * limit, and for a constrained request what leaves room for the tag and the
 * answer's shortest output within budget. SV_ERR_BUDGET (keyword
 * max_tokens) when there is no such room. */
static sv_status think_limit(const sv_engine_t *e, const sv_engine_request_t *q, uint32_t budget, uint32_t *lim,
                             sv_error_t *err) {
    const sv_engine_reasoning_t *rs = q->reasoning;
    uint32_t need = 0;
    if (q->constraint) {
        sv_matcher_t *m;
        sv_status st = sv_matcher_create(q->constraint, e->vocab.tok, 0, &m, err);
        if (st) return st;
        need = sv_matcher_min_tokens(m);
        sv_matcher_destroy(m);
    }
    /* forcing the end takes at most the tag's tokens, or one a byte of
     * it and of a character's rest (think_force) */
    uint32_t el = (uint32_t)strlen(rs->end_tag);
    uint32_t end = (rs->n_end > el ? rs->n_end : el) + THINK_SLACK;
    if (!q->constraint) {
        /* only the reasoning's own limit, kept within max_tokens; without
         * room for the end it thinks until max_tokens */
        *lim = budget < end ? UINT32_MAX : rs->max_tokens < budget - end ? rs->max_tokens : budget - end;
        if (rs->max_tokens == UINT32_MAX) *lim = UINT32_MAX;
        return SV_OK;
    }
    if ((uint64_t)end + need > budget) {
        sv_error_set(err, SV_ERR_BUDGET, -1, "engine: max_tokens (%u) leaves no room for the reasoning's end (up to %u "
                     "tokens) and the answer (at least %u tokens)", budget, end, need);
        if (err) snprintf(err->keyword, sizeof err->keyword, "max_tokens");
        return SV_ERR_BUDGET;
    }
    *lim = budget - end - need;
    if (rs->max_tokens < *lim) *lim = rs->max_tokens;
    return SV_OK;
}

static sv_status check_request(const sv_engine_t *e, const sv_engine_request_t *q, sv_error_t *err) {
    if (!q || !q->prompt || q->n_prompt == 0) return sv_error_set(err, SV_ERR_ARG, -1, "engine: empty prompt");
    if (q->n > SV_ENGINE_MAX_N)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: n must be 1..%d, got %u", SV_ENGINE_MAX_N, q->n);
    if (q->n_stop_ids && !q->stop_ids) return sv_error_set(err, SV_ERR_ARG, -1, "engine: stop ids missing");
    if (q->n_stop) {
        if (!e->vocab.vocab)
            return sv_error_set(err, SV_ERR_ARG, -1, "engine: stop strings need a vocabulary (text)");
        if (q->n_stop > SV_ENGINE_MAX_STOP || !q->stop)
            return sv_error_set(err, SV_ERR_ARG, -1, "engine: at most %d stop strings, got %u", SV_ENGINE_MAX_STOP,
                                q->n_stop);
        for (uint32_t i = 0; i < q->n_stop; i++) {
            const char *s = q->stop[i];
            size_t n = s ? strnlen(s, SV_ENGINE_MAX_STOP_BYTES + 1) : 0;
            if (n == 0 || n > SV_ENGINE_MAX_STOP_BYTES)
                return sv_error_set(err, SV_ERR_ARG, -1, "engine: stop string %u must have 1..%d bytes", i,
                                    SV_ENGINE_MAX_STOP_BYTES);
            if (!sv_utf8_valid((const uint8_t *)s, n))
                return sv_error_set(err, SV_ERR_ARG, -1, "engine: stop string %u is not valid UTF-8", i);
        }
    }
    if (e->n_waiting >= e->cfg.max_queue)
        return sv_error_set(err, SV_ERR_CAPACITY, -1, "engine: the queue is full (%u waiting)", e->n_waiting);
    if (q->n_prompt >= e->cfg.max_ctx)
        return sv_error_set(err, SV_ERR_BUDGET, -1, "engine: the prompt has %u tokens; the context is %u", q->n_prompt,
                            e->cfg.max_ctx);
    for (uint32_t i = 0; i < q->n_prompt; i++)
        if (q->prompt[i] < 0 || q->prompt[i] >= e->n_vocab)
            return sv_error_set(err, SV_ERR_ARG, -1, "engine: prompt id %d is outside the vocabulary (%d)",
                                q->prompt[i], e->n_vocab);
    for (uint32_t i = 0; i < q->n_stop_ids; i++)
        if (q->stop_ids[i] < 0 || q->stop_ids[i] >= e->n_vocab)
            return sv_error_set(err, SV_ERR_ARG, -1, "engine: stop id %d is outside the vocabulary (%d)",
                                q->stop_ids[i], e->n_vocab);
    if (q->constraint &&
        sv_token_set_mask_bits(sv_token_index_tokens(q->constraint)) < (uint32_t)e->n_vocab)
        return sv_error_set(err, SV_ERR_ARG, -1, "engine: the constraint's masks are shorter than the vocabulary (%d)",
                            e->n_vocab);
    return check_reasoning(e, q->reasoning, err);
}

static sv_status choice_create(sv_engine_t *e, const sv_engine_request_t *q, group_t *g, uint32_t i,
                               uint32_t budget, uint32_t think_lim, req_t **out, sv_error_t *err) {
    req_t *r = calloc(1, sizeof *r);
    if (!r) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    *out = r;
    r->g = g;
    r->index = i;
    r->n_prompt = q->n_prompt;
    r->budget = budget;
    r->stop_index = r->stop_id = -1;
    r->cap = q->n_prompt + budget + FORCED_CAP;
    r->toks = malloc(r->cap * sizeof *r->toks);
    if (!r->toks) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    memcpy(r->toks, q->prompt, q->n_prompt * sizeof *r->toks);
    r->n_toks = q->n_prompt;
    sv_sample_params_t sp = q->sampling;
    sp.seed = choice_seed(q->sampling.seed, i);
    sv_status st;
    if ((st = sv_sampler_create((uint32_t)e->n_vocab, &sp, &r->sampler, err))) return st;
    if ((st = sv_sampler_add_context(r->sampler, q->prompt, q->n_prompt, err))) return st;
    if (g->think_ix) {
        /* the answer's matcher starts when the reasoning ends (think_done) */
        if ((st = sv_matcher_create(g->think_ix, e->vocab.tok, 0, &r->think, err))) return st;
        r->thinking = true;
        r->think_lim = think_lim;
    } else if (q->constraint && (st = sv_matcher_create(q->constraint, e->vocab.tok, budget, &r->matcher, err))) {
        return st;
    }
    if (e->vocab.vocab && (st = sv_detok_create(e->vocab.vocab, SV_DETOK_SKIP_SPECIAL, &r->detok, err))) return st;
    return SV_OK;
}

sv_status sv_engine_submit(sv_engine_t *e, const sv_engine_request_t *q, uint64_t *id, sv_error_t *err) {
    retire(e);
    sv_status st = check_request(e, q, err);
    if (st) return st;
    uint32_t budget = e->cfg.max_ctx - q->n_prompt;
    if (q->max_tokens && q->max_tokens < budget) budget = q->max_tokens;
    /* One choice alone must fit the pool, or preemption could not make
     * room for it. */
    uint64_t need = ((uint64_t)q->n_prompt + budget + SV_KV_BLOCK - 1) / SV_KV_BLOCK;
    if (need > sv_kv_pool_n_blocks(e->pool)) {
        sv_error_set(err, SV_ERR_BUDGET, -1, "engine: %u + %u tokens need %llu KV blocks; the pool has %u", q->n_prompt,
                     budget, (unsigned long long)need, sv_kv_pool_n_blocks(e->pool));
        if (err && q->max_tokens) snprintf(err->keyword, sizeof err->keyword, "max_tokens"); /* the parameter at fault */
        return SV_ERR_BUDGET;
    }

    uint32_t think_lim = UINT32_MAX;
    if (q->reasoning && (st = think_limit(e, q, budget, &think_lim, err))) return st;

    group_t *g = calloc(1, sizeof *g);
    if (!g) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    if (q->reasoning) {
        const sv_engine_reasoning_t *rs = q->reasoning;
        g->think_ix = rs->think;
        memcpy(g->think_end, rs->end, rs->n_end * sizeof *g->think_end);
        g->n_think_end = rs->n_end;
        snprintf(g->open_tag, sizeof g->open_tag, "%s", rs->open_tag ? rs->open_tag : "");
        snprintf(g->end_tag, sizeof g->end_tag, "%s", rs->end_tag);
    }
    g->n = q->n ? q->n : 1;
    g->n_prompt = q->n_prompt;
    g->logprobs = q->logprobs;
    g->ix = q->constraint;
    g->forked = g->n == 1;
    g->batch = q->priority == SV_PRIORITY_BATCH;
    if (q->n_stop_ids) {
        if (!(g->stop_ids = malloc(q->n_stop_ids * sizeof *g->stop_ids))) goto nomem;
        memcpy(g->stop_ids, q->stop_ids, q->n_stop_ids * sizeof *g->stop_ids);
        g->n_stop_ids = q->n_stop_ids;
    }
    if (q->n_stop) {
        g->stop = calloc(q->n_stop, sizeof *g->stop);
        g->stop_len = calloc(q->n_stop, sizeof *g->stop_len);
        if (!g->stop || !g->stop_len) goto nomem;
        for (uint32_t i = 0; i < q->n_stop; i++) {
            g->stop_len[i] = strlen(q->stop[i]);
            if (!(g->stop[i] = malloc(g->stop_len[i] + 1))) goto nomem;
            memcpy(g->stop[i], q->stop[i], g->stop_len[i] + 1);
            g->n_stop = i + 1;
        }
    }
    for (uint32_t i = 0; i < g->n; i++)
        if ((st = choice_create(e, q, g, i, budget, think_lim, &g->ch[i], err))) goto fail;
    g->n_open = g->n;
    g->id = e->next_id++;
    if ((st = waiting_insert(e, waiting_pos(e, g->batch, false), g->ch[0], err))) goto fail;
    /* Forced tokens at the start join the prompt's pending tokens (the
     * same for every choice); a constraint complete at the start finishes
     * here. */
    for (uint32_t i = 0; i < g->n; i++) {
        if ((st = advance(e, g->ch[i], -1, err))) goto undo;
        bool ended = g->ch[i]->finish != SV_FINISH_NONE, ended0 = g->ch[0]->finish != SV_FINISH_NONE;
        if (g->ch[i]->n_toks != g->ch[0]->n_toks || ended != ended0) {
            st = sv_error_set(err, SV_ERR_INTERNAL, -1, "engine: internal: choices differ at the start");
            goto undo;
        }
    }
    g->next = e->groups;
    if (e->groups) e->groups->prev = g;
    e->groups = g;
    /* The start state's masks are computed while the prompt prefills. */
    prefetch(e, g->ch[0]);
    *id = g->id;
    return SV_OK;
undo:
    /* Nothing was handed out: drop the group from every queue. */
    for (uint32_t i = 0; i < g->n; i++) {
        req_t *r = g->ch[i];
        int k = index_of(e->waiting, e->n_waiting, r);
        if (k >= 0) remove_at(e->waiting, &e->n_waiting, (uint32_t)k);
        for (uint32_t j = 0; r->in_outq && j < e->outq_n; j++) {
            uint32_t at = (e->outq_head + j) % e->outq_cap;
            if (e->outq[at] != r) continue;
            for (uint32_t m = j; m + 1 < e->outq_n; m++)
                e->outq[(e->outq_head + m) % e->outq_cap] = e->outq[(e->outq_head + m + 1) % e->outq_cap];
            e->outq_n--;
            break;
        }
    }
    goto fail;
nomem:
    st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
fail:
    group_free(g);
    return st;
}

static group_t *find(const sv_engine_t *e, uint64_t id) {
    for (group_t *g = e->groups; g; g = g->next)
        if (g->id == id) {
            for (uint32_t i = 0; i < g->n; i++)
                if (g->ch[i]->finish == SV_FINISH_NONE) return g;
            return NULL;
        }
    return NULL;
}

sv_status sv_engine_cancel(sv_engine_t *e, uint64_t id, sv_error_t *err) {
    retire(e);
    group_t *g = find(e, id);
    if (!g) return sv_error_set(err, SV_ERR_ARG, -1, "engine: no running or waiting request %llu",
                                (unsigned long long)id);
    for (uint32_t i = 0; i < g->n; i++) {
        if (g->ch[i]->finish != SV_FINISH_NONE) continue;
        sv_status st = finish(e, g->ch[i], SV_FINISH_ABORT, -1, err);
        if (st) return st;
    }
    return SV_OK;
}

bool sv_engine_next_output(sv_engine_t *e, sv_engine_output_t *out) {
    retire(e);
    if (e->outq_n == 0) return false;
    req_t *r = e->outq[e->outq_head];
    group_t *g = r->g;
    e->outq_head = (e->outq_head + 1) % e->outq_cap;
    e->outq_n--;
    r->in_outq = false;
    uint32_t n_av = avail(r);
    memset(out, 0, sizeof *out);
    out->id = g->id;
    out->index = r->index;
    out->tokens = r->toks + r->n_prompt + r->n_reported;
    out->n_tokens = n_av - r->n_reported;
    static const sv_logprobs_t no_logprobs;
    if (g->logprobs) out->logprobs = r->lp ? r->lp + r->n_reported : &no_logprobs;
    if (r->detok) {
        /* the reasoning's text first: all of it while it lasts */
        size_t split = !g->think_ix ? 0 : r->think_text_done ? r->txt_think : r->txt_ready;
        if (split > r->txt_ready) split = r->txt_ready;
        out->reasoning = r->txt ? r->txt : "";
        out->n_reasoning = split;
        out->text = r->txt ? r->txt + split : "";
        out->n_text = r->txt_ready - split;
        r->txt_popped = r->txt_ready;
        e->popped = r;
    }
    if (g->think_ix) out->n_reasoning_tokens = r->thinking || r->n_think > n_av ? n_av : r->n_think;
    out->finish = r->finish;
    out->budget_stop = r->budget_stop;
    out->stop_index = r->finish == SV_FINISH_STOP ? r->stop_index : -1;
    out->stop_id = r->finish == SV_FINISH_STOP ? r->stop_id : -1;
    out->n_generated = n_av;
    out->n_prompt = g->n_prompt;
    out->n_cached = r->n_cached;
    r->n_reported = n_av;
    if (r->finish != SV_FINISH_NONE && --g->n_open == 0) {
        out->request_done = true;
        group_unlink(e, g);
        e->retired = g;
        /* The caller may free the constraint after this output: no worker
         * may use it unless another live request holds it too. */
        if (e->pf && g->ix) {
            const group_t *o = e->groups;
            while (o && o->ix != g->ix) o = o->next;
            if (!o) sv_prefetch_forget(e->pf, g->ix);
        }
    }
    return true;
}

bool sv_engine_has_work(const sv_engine_t *e) { return e->n_running || e->n_waiting; }

/* ---- one step ------------------------------------------------------------------ */

/* Preempts the newest running choice: full blocks to the prefix cache
 * (recompute may find them), the rest released, back to the front of the
 * waiting queue with all its tokens pending. */
static sv_status preempt(sv_engine_t *e, sv_error_t *err) {
    req_t *v = e->running[--e->n_running];
    cache_blocks(e, v);
    sv_kv_seq_destroy(v->seq);
    v->seq = NULL;
    v->n_computed = 0;
    e->st.preemptions++;
    return waiting_insert(e, waiting_pos(e, v->g->batch, true), v, err);
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

/* Choice 0 of an unforked group has every token computed (and scored):
 * the other choices take their place (see the file comment), then, when
 * row is given, every choice samples from its own copy of it; otherwise
 * (the choices were ending) they finish. */
static sv_status fork_group(sv_engine_t *e, req_t *c0, float *row, sv_error_t *err) {
    group_t *g = c0->g;
    const size_t V = (size_t)e->n_vocab;
    sv_status st;
    g->forked = true;
    uint32_t at = waiting_pos(e, g->batch, true); /* the overflow keeps choice order at the front of its class */
    for (uint32_t i = 1; i < g->n; i++) {
        req_t *c = g->ch[i];
        if (c->finish != SV_FINISH_NONE) continue;
        SV_INVARIANT(c->n_toks == c0->n_toks && !memcmp(c->toks, c0->toks, c0->n_toks * sizeof *c->toks), err, "engine: internal: choices differ at the fork");
        if (g->logprobs && c0->n_scored) {
            if ((st = lp_reserve(c, c0->n_scored, err))) return st;
            memcpy(c->lp, c0->lp, c0->n_scored * sizeof *c->lp);
            c->n_scored = c0->n_scored;
        }
        c->n_cached = c0->n_cached;
        if (!row) {
            if ((st = finish(e, c, c->end_why, c->end_stop_id, err))) return st;
            continue;
        }
        bool forked = false;
        if (e->n_running < e->cfg.max_num_seqs) {
            st = sv_kv_seq_fork(c0->seq, &c->seq, err);
            if (st && st != SV_ERR_BUDGET) return st;
            forked = st == SV_OK;
        }
        if (forked) {
            c->n_computed = c0->n_computed;
            c->inserted = true;
            running_add(e, c);
        } else if ((st = waiting_insert(e, at++, c, err))) {
            return st;
        }
        /* Its own copy of the row (sample() copies it to e->raw before
         * sampling, and reuses e->row only after). */
        memcpy(e->row, row, V * sizeof *e->row);
        if ((st = sample(e, c, e->row, err))) return st;
        if (c->finish == SV_FINISH_NONE && avail(c) > c->n_reported && (st = outq_push(e, c, err))) return st;
    }
    if (!row) return finish(e, c0, c0->end_why, c0->end_stop_id, err);
    return sample(e, c0, row, err);
}

void sv_engine_set_interrupt(sv_engine_t *e, bool (*fn)(void *ud), void *ud) {
    e->interrupt = fn;
    e->interrupt_ud = ud;
}

/* The step's forward was interrupted: every placed choice forgets the
 * positions it reserved, as if the step had not been placed. (Admitted
 * ones stay running, their prompt still to compute; the blocks the
 * forward wrote are written again.) */
static sv_status unplace(sv_engine_t *e, uint32_t np, sv_error_t *err) {
    for (uint32_t j = 0; j < np; j++) {
        req_t *r = e->places[j].r;
        sv_status st = sv_kv_seq_truncate(r->seq, r->n_computed, err);
        if (st) return st;
    }
    e->st.interrupted_steps++;
    return SV_OK;
}

static sv_status step_once(sv_engine_t *e, sv_error_t *err);

sv_status sv_engine_step(sv_engine_t *e, sv_error_t *err) {
    uint64_t t0 = sv_now_ns(), steps = e->st.steps;
    sv_status st = step_once(e, err);
    if (e->st.steps != steps) e->st.step_ns += sv_now_ns() - t0;
    return st;
}

static sv_status step_once(sv_engine_t *e, sv_error_t *err) {
    retire(e);
    if (!sv_engine_has_work(e)) return SV_OK;
    if (e->cfg.fault_at_step && ++e->step_calls == e->cfg.fault_at_step)
        return sv_error_set(err, SV_ERR_INTERNAL, -1, "engine: internal: the fault injected at step %llu (a test)",
                            (unsigned long long)e->cfg.fault_at_step);
    const uint32_t B = e->cfg.max_num_batched_tokens;
    uint32_t nt = 0, np = 0;
    bool preempted = false;
    sv_status st;

    /* An online request waits and every sequence runs: the newest batch
     * choice makes room (before anything is placed in this step). */
    bool online_waits = e->n_waiting && !e->waiting[0]->g->batch;
    if (online_waits && e->n_running == e->cfg.max_num_seqs && e->running[e->n_running - 1]->g->batch)
        if ((st = preempt(e, err))) return st;
    /* While an online request waits or computes its prompt, batch choices
     * sit the step out: its first token comes as fast as if it were alone
     * (unless nothing else could run: the second pass below). */
    bool hold_batch = online_waits;
    for (uint32_t i = 0; i < e->n_running && !hold_batch; i++)
        hold_batch = !e->running[i]->g->batch && e->running[i]->n_computed < e->running[i]->n_prompt;
    uint32_t held = 0;
    /* Rows batch choices may still take in this step. */
    uint32_t batch_left = e->cfg.batch_step_tokens ? e->cfg.batch_step_tokens : B;

    /* Running choices, online ones first, oldest first: their pending
     * tokens within the budget. */
place_running:
    for (uint32_t i = 0; i < e->n_running && nt < B;) {
        req_t *r = e->running[i];
        if (r->g->batch && (hold_batch || !batch_left)) {
            held++;
            i++;
            continue;
        }
        uint32_t need = r->n_toks - r->n_computed;
        SV_INVARIANT(need > 0, err, "engine: internal: a running request has no token to feed");
        uint32_t chunk = need < B - nt ? need : B - nt;
        if (r->g->batch && chunk > batch_left) chunk = batch_left;
        for (;;) {
            st = reserve(e, r, chunk, err);
            if (st != SV_ERR_BUDGET) break;
            preempted = true;
            bool self = e->running[e->n_running - 1] == r;
            sv_status pst = preempt(e, err);
            if (pst) return pst;
            if (self) break;
        }
        if (st == SV_ERR_BUDGET) break; /* r itself was preempted */
        if (st) return st;
        e->places[np++] = (place_t){.r = r, .chunk = chunk};
        nt += chunk;
        if (r->g->batch) batch_left -= chunk;
        i++;
    }

    /* Admissions, unless this step had to preempt. */
    while (!preempted && e->n_waiting && e->n_running < e->cfg.max_num_seqs && nt < B) {
        req_t *r = e->waiting[0];
        /* Online ones come first in the queue: none is left, and a batch
         * choice sits this step out as those running do. */
        if (r->g->batch && (hold_batch || !batch_left)) break;
        if ((st = sv_kv_seq_create(e->pool, &r->seq, err))) return st;
        uint32_t cached = 0;
        if (e->radix) {
            /* At least one token stays to compute: its row gives the
             * logits; and every row that scores a forced token. */
            uint32_t upto = r->n_toks - 1;
            if (r->g->logprobs && r->n_prompt + r->n_scored - 1 < upto) upto = r->n_prompt + r->n_scored - 1;
            e->st.prefix_queries += upto;
            cached = sv_radix_match(e->radix, r->toks, upto, e->match_blocks, e->cfg.max_ctx / SV_KV_BLOCK + 1);
            if (cached && (st = sv_kv_seq_adopt(r->seq, e->match_blocks, cached, err))) {
                for (uint32_t b = 0; b < cached / SV_KV_BLOCK; b++) sv_kv_pool_decref(e->pool, e->match_blocks[b]);
                return st;
            }
        }
        r->n_computed = cached;
        uint32_t need = r->n_toks - cached;
        uint32_t chunk = need < B - nt ? need : B - nt;
        if (r->g->batch && chunk > batch_left) chunk = batch_left;
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
        running_add(e, r);
        e->places[np++] = (place_t){.r = r, .chunk = chunk};
        nt += chunk;
        if (r->g->batch) batch_left -= chunk;
    }
    if (np == 0 && held) {
        /* The online request could not start (no blocks): the batch runs. */
        hold_batch = false;
        held = 0;
        batch_left = B;
        goto place_running;
    }
    if (np == 0) {
        /* Nothing fit: only possible right after preempting everything,
         * and the next step admits the front request into an empty pool
         * (submit made sure that one request alone always fits). */
        SV_INVARIANT(preempted, err, "engine: internal: a step made no progress");
        return SV_OK;
    }

    /* The ragged batch. Logits for the row that samples and, with
     * logprobs, the rows before unscored (forced) tokens. */
    uint32_t row = 0, nl = 0;
    for (uint32_t j = 0; j < np; j++) {
        place_t *pl = &e->places[j];
        req_t *r = pl->r;
        uint32_t c = pl->chunk, nb;
        uint32_t first_unscored = r->n_prompt + r->n_scored; /* position */
        pl->logit0 = nl;
        pl->n_score = pl->n_sample = 0;
        for (uint32_t k = 0; k < c; k++, row++) {
            uint32_t p = r->n_computed + k;
            e->b_tokens[row] = r->toks[p];
            e->b_pos[row] = (int32_t)p;
            e->b_seq[row] = (int32_t)j;
            if (p + 1 == r->n_toks) {
                if (!r->ending) {
                    e->lr_place[nl] = j;
                    e->lr_dev[nl] = dev_sampled(e, r);
                    e->b_logit_rows[nl++] = (int32_t)row;
                    pl->n_sample = 1;
                }
            } else if (r->g->logprobs && p + 1 >= first_unscored) {
                SV_INVARIANT(pl->n_score > 0 || p + 1 == first_unscored, err, "engine: internal: a forced token's row was skipped");
                e->lr_place[nl] = j;
                e->lr_dev[nl] = false;
                e->b_logit_rows[nl++] = (int32_t)row;
                pl->n_score++;
            }
        }
        const uint32_t *blocks = sv_kv_seq_blocks(r->seq, &nb);
        e->b_seqs[j] = (sv_llama_seq_t){.blocks = blocks, .n_blocks = (int32_t)nb,
                                        .len = (int32_t)(r->n_computed + c)};
    }
    if (nl > e->logit_cap) {
        float *l = realloc(e->logits, (size_t)nl * (size_t)e->n_vocab * sizeof *l);
        if (!l) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        e->logits = l;
        if (e->dout) {
            sv_cuda_sample_out_t *d = realloc(e->dout, (size_t)nl * sizeof *d);
            if (!d) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
            e->dout = d;
        }
        e->logit_cap = nl;
    }
    sv_llama_batch_t b = {.n_tokens = (int32_t)nt, .tokens = e->b_tokens, .positions = e->b_pos,
                          .seq = e->b_seq, .n_seqs = (int32_t)np, .seqs = e->b_seqs,
                          .n_logits = (int32_t)nl, .logit_rows = e->b_logit_rows};
    if (e->cfg.dsampler) {
        b.logits_hook = dev_logits;
        b.logits_ud = e;
    }
    /* A step of batch rows alone may be given up for an online request. */
    bool all_batch = true;
    for (uint32_t j = 0; j < np && all_batch; j++) all_batch = e->places[j].r->g->batch;
    if (all_batch && e->interrupt) {
        b.interrupt = e->interrupt;
        b.interrupt_ud = e->interrupt_ud;
    }
    uint64_t tf = sv_now_ns();
    st = sv_llama_forward_batch(e->model, e->kv, &b, e->logits, err);
    e->st.forward_ns += sv_now_ns() - tf;
    if (st == SV_ERR_CANCELLED && b.interrupt) return unplace(e, np, err);
    if (st) return st;
    e->st.steps++;
    e->st.rows += nt;
    if (e->n_running > e->st.max_running) e->st.max_running = e->n_running;

    /* Advance: computed positions, prompt blocks to the cache, scores,
     * samples. */
    const size_t V = (size_t)e->n_vocab;
    for (uint32_t j = 0; j < np; j++) {
        place_t *pl = &e->places[j];
        req_t *r = pl->r;
        r->n_computed += pl->chunk;
        if (!r->inserted && r->n_computed >= r->n_prompt) {
            cache_blocks(e, r);
            r->inserted = true;
        }
        float *rows = e->logits + (size_t)pl->logit0 * V;
        if (pl->n_score && (st = score_forced(e, r, rows, pl->n_score, err))) return st;
        bool at_fork = !r->g->forked && r->index == 0 && r->n_computed == r->n_toks;
        if (pl->n_sample && e->lr_dev[pl->logit0 + pl->n_score]) {
            if ((st = take_dev(e, r, &e->dout[pl->logit0 + pl->n_score], err))) return st;
        } else if (pl->n_sample) {
            float *srow = rows + (size_t)pl->n_score * V;
            if ((st = at_fork ? fork_group(e, r, srow, err) : sample(e, r, srow, err))) return st;
        } else if (r->ending && avail(r) == r->n_toks - r->n_prompt) {
            st = at_fork ? fork_group(e, r, NULL, err) : finish(e, r, r->end_why, r->end_stop_id, err);
            if (st) return st;
        } else if (pl->n_score && r->finish == SV_FINISH_NONE && (st = settle(e, r, err))) {
            return st;
        }
        if (r->finish == SV_FINISH_NONE && avail(r) > r->n_reported && (st = outq_push(e, r, err))) return st;
    }
    /* While the host finishes this step and the next forward runs, the
     * workers compute the masks the next samples may need. */
    for (uint32_t i = 0; i < e->n_running; i++) prefetch(e, e->running[i]);
    return SV_OK;
}

/* ---- accounting ----------------------------------------------------------------- */

void sv_engine_stats(const sv_engine_t *e, sv_engine_stats_t *st) {
    *st = e->st;
    st->running = e->n_running;
    st->waiting = e->n_waiting;
    st->running_batch = st->waiting_batch = 0;
    for (uint32_t i = 0; i < e->n_running; i++) st->running_batch += e->running[i]->g->batch;
    for (uint32_t i = 0; i < e->n_waiting; i++) st->waiting_batch += e->waiting[i]->g->batch;
    if (e->pf) {
        sv_prefetch_stats_t ps;
        sv_prefetch_stats(e->pf, &ps);
        st->prefetched = ps.computed;
    }
}

const sv_kv_pool_t *sv_engine_pool(const sv_engine_t *e) { return e->pool; }

sv_status sv_engine_check(const sv_engine_t *e, sv_error_t *err) {
    if (e->n_running || sv_engine_has_work(e))
        return sv_error_set(err, SV_ERR_INTERNAL, -1, "engine: internal: requests remain after every one ended");
    sv_error_t why;
    sv_status st = sv_kv_pool_check(e->pool, &why);
    if (!st && e->radix) st = sv_radix_check(e->radix, &why);
    if (st) return sv_error_set(err, SV_ERR_INTERNAL, -1, "engine: internal: %s", why.message);
    if (sv_engine_free_blocks(e) != sv_kv_pool_n_blocks(e->pool))
        return sv_error_set(err, SV_ERR_INTERNAL, -1, "engine: internal: %u KV blocks held with no request",
                            sv_kv_pool_n_blocks(e->pool) - sv_engine_free_blocks(e));
    return SV_OK;
}

uint32_t sv_engine_free_blocks(const sv_engine_t *e) {
    uint32_t n = sv_kv_pool_free_blocks(e->pool);
    if (e->radix)
        for (uint32_t b = 0; b < sv_kv_pool_n_blocks(e->pool); b++)
            if (sv_kv_pool_refcount(e->pool, b) == 1 && sv_radix_holds(e->radix, b)) n++;
    return n;
}
