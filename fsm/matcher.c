/* matcher.c — per-sequence state over a token index: masks under the budget
 * rule, accept, rollback, jump-forward. */
#include "matcher.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/grow.h"
#include "fsm/internal/dfa_internal.h"

#define U_UNKNOWN UINT32_MAX
#define U_INF (UINT32_MAX - 1)
#define MAX_COMPLETION (1u << 16)   /* longest shortest-completion encoded for U */
#define FORCED_MAX 4096u            /* forced bytes taken at once */

typedef struct {
    int32_t state;   /* before the token */
    uint32_t ws;     /* whitespace run before the token */
    int32_t tok;
} step_t;

struct sv_matcher {
    sv_token_index_t *ix;
    const sv_tokenizer_iface_t *tok;
    const sv_token_set_t *ts;
    int64_t max_tokens;       /* <= 0: none */
    int32_t state;
    uint32_t ws;
    bool finished;
    step_t *hist;
    uint32_t nhist, caphist;
    uint32_t *buf;            /* a budget-filtered mask */
    uint32_t *u;              /* U memo by state (sv_token_index_num_states grows for programs) */
    uint32_t ucap;
    bool u_private;           /* some U of u is this matcher's own (u_set) */
    /* scratch for encoding completions */
    uint8_t *text;
    int32_t *ids;
    uint32_t textcap, idscap;
};

static bool bytes_bound(const sv_matcher_t *m) { return sv_token_index_bytes_bound(m->ix); }

sv_status sv_matcher_create(sv_token_index_t *ix, const sv_tokenizer_iface_t *tok, int64_t max_tokens,
                            sv_matcher_t **out, sv_error_t *err) {
    *out = NULL;
    sv_matcher_t *m = calloc(1, sizeof *m);
    if (!m) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    m->ix = ix;
    m->tok = tok && tok->encode ? tok : NULL;
    m->ts = sv_token_index_tokens(ix);
    m->max_tokens = max_tokens > 0 ? max_tokens : 0;
    m->state = 0;
    m->buf = malloc((size_t)sv_token_set_mask_words(m->ts) * sizeof *m->buf);
    if (!m->buf) {
        sv_matcher_destroy(m);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    if (m->max_tokens && !m->tok && !bytes_bound(m)) {
        sv_matcher_destroy(m);
        return sv_error_set(err, SV_ERR_ARG, -1,
                            "a token budget needs a tokenizer or a vocabulary with a token for every byte");
    }
    if (m->max_tokens) {
        uint32_t need = sv_matcher_min_tokens(m);
        if (need == U_INF || (int64_t)need > m->max_tokens) {
            sv_matcher_destroy(m);
            m = NULL;
            if (need == U_INF)
                return sv_error_set(err, SV_ERR_BUDGET, -1, "the constraint's shortest completion cannot be tokenized");
            sv_error_set(err, SV_ERR_BUDGET, -1, "the constraint needs at least %u tokens, more than max_tokens (%lld)",
                         need, (long long)max_tokens);
            if (err) snprintf(err->keyword, sizeof err->keyword, "max_tokens"); /* the parameter at fault */
            return SV_ERR_BUDGET;
        }
    }
    *out = m;
    return SV_OK;
}

void sv_matcher_destroy(sv_matcher_t *m) {
    if (!m) return;
    free(m->hist);
    free(m->buf);
    free(m->u);
    free(m->text);
    free(m->ids);
    free(m);
}

sv_status sv_matcher_clone(const sv_matcher_t *m, sv_matcher_t **out, sv_error_t *err) {
    *out = NULL;
    sv_matcher_t *c = calloc(1, sizeof *c);
    if (!c) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    *c = *m;
    c->hist = NULL;
    c->caphist = 0;
    c->u = NULL;
    c->ucap = 0;
    c->u_private = false; /* its own values stay with m */
    c->text = NULL;
    c->ids = NULL;
    c->textcap = c->idscap = 0;
    c->buf = malloc((size_t)sv_token_set_mask_words(m->ts) * sizeof *c->buf);
    if (m->nhist) {
        c->hist = malloc(m->nhist * sizeof *c->hist);
        c->caphist = m->nhist;
    }
    if (!c->buf || (m->nhist && !c->hist)) {
        sv_matcher_destroy(c);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    if (m->nhist) memcpy(c->hist, m->hist, m->nhist * sizeof *c->hist);
    *out = c;
    return SV_OK;
}

/* ---- U: the budget distance ------------------------------------------------ */


/* The shortest completion from x, into m->text. */
static bool shortest_completion(sv_matcher_t *m, int32_t x, uint32_t *len) {
    uint32_t n = sv_token_index_distance(m->ix, x);
    if (n > MAX_COMPLETION || !sv_grow((void **)&m->text, &m->textcap, n + 1, 1)) return false;
    uint32_t got = sv_token_index_completion(m->ix, x, m->text, n + 1);
    if (got != n) return false;
    *len = n;
    return true;
}

/* The U memo entry of state x, growing the memo as states appear. */
static uint32_t *u_slot(sv_matcher_t *m, int32_t x) {
    if ((uint32_t)x >= m->ucap) {
        uint32_t n = m->ucap ? m->ucap : 64;
        while (n <= (uint32_t)x) n *= 2;
        uint32_t *q = realloc(m->u, (size_t)n * sizeof *q);
        if (!q) return NULL;
        memset(q + m->ucap, 0xff, (size_t)(n - m->ucap) * sizeof *q);
        m->u = q;
        m->ucap = n;
    }
    return &m->u[x];
}

/* U of x as this matcher knows it, or as the index's notes have it (then
 * copied here); U_UNKNOWN when neither does. Only with a tokenizer. */
static uint32_t u_known(sv_matcher_t *m, int32_t x) {
    uint32_t *ux = u_slot(m, x), v;
    if (!ux) return U_UNKNOWN;
    if (*ux != U_UNKNOWN) return *ux; /* no lock taken */
    if (!sv_token_index_note_get(m->ix, m->tok->ctx, SV_NOTE_U, x, 0, &v)) return U_UNKNOWN;
    *ux = v;
    return v;
}

/* Records U(x) = v, unless the index has a note for x already: that one
 * stands, since a note is set once, so that every matcher of the index
 * counts with the same U. Returns the U that holds. A matcher whose value
 * the index could not keep counts with values of its own from then on
 * (u_private): consistent among themselves, but not to be mixed with the
 * shared notes of the largest U (sv_matcher_mask). */
static uint32_t u_set(sv_matcher_t *m, int32_t x, uint32_t v) {
    uint32_t stored;
    if (sv_token_index_note_set(m->ix, m->tok->ctx, SV_NOTE_U, x, 0, v, &stored)) v = stored;
    else m->u_private = true;
    uint32_t *ux = u_slot(m, x);
    if (ux) *ux = v;
    return v;
}

static uint32_t u_of(sv_matcher_t *m, int32_t x) {
    const sv_token_index_t *ix = m->ix;
    if (m->tok) {
        uint32_t k = u_known(m, x);
        if (k != U_UNKNOWN) return k;
    }
    if (sv_token_index_accepting(ix, x)) return m->tok ? u_set(m, x, 0) : 0;
    uint32_t bytes = bytes_bound(m) ? sv_token_index_distance(ix, x) : U_INF;
    if (!m->tok || !u_slot(m, x)) return bytes;
    uint32_t len;
    int n = -1;
    if (shortest_completion(m, x, &len)) {
        uint32_t need = len + 8;
        if (sv_grow((void **)&m->ids, &m->idscap, need, sizeof *m->ids))
            n = m->tok->encode(m->tok->ctx, m->text, len, m->ids, (int)m->idscap);
    }
    if (n <= 0) return u_set(m, x, bytes);
    /* Follow the plan: x_0 = x, x_{i+1} = δ(x_i, e_i), stopping at an
     * accepting or known state; then U(x_i) = min(bytes(x_i), 1 + U(x_{i+1}))
     * backwards, each through u_set (whose value holds). */
    int32_t *chain = malloc((size_t)(n + 1) * sizeof *chain);
    if (!chain) return bytes;
    int k = 0;
    int32_t y = x;
    chain[k++] = y;
    bool y_acc = false;
    uint32_t y_u = U_UNKNOWN;
    for (int i = 0; i < n; i++) {
        y = sv_token_index_next(m->ix, y, m->ids[i]);
        if (y < 0) break;
        y_acc = sv_token_index_accepting(ix, y);
        y_u = y_acc ? U_UNKNOWN : u_known(m, y);
        if (y_acc || y_u != U_UNKNOWN) break;
        chain[k++] = y;
    }
    uint32_t tail;
    if (y < 0) tail = U_INF;
    else tail = y_acc ? 0 : y_u;
    if (y >= 0 && !y_acc && y_u == U_UNKNOWN) tail = U_INF; /* the plan ran out (cannot happen) */
    for (int i = k - 1; i >= 0; i--) {
        int32_t s = chain[i];
        uint32_t b = bytes_bound(m) ? sv_token_index_distance(ix, s) : U_INF;
        uint32_t via = tail >= U_INF ? U_INF : tail + 1;
        tail = u_set(m, s, b < via ? b : via);
    }
    free(chain);
    return tail; /* chain[0] is x */
}

uint32_t sv_matcher_min_tokens(sv_matcher_t *m) { return u_of(m, 0); }

/* ---- masks -------------------------------------------------------------------- */

int64_t sv_matcher_tokens_left(const sv_matcher_t *m) {
    if (!m->max_tokens) return INT64_MAX;
    return m->max_tokens - (int64_t)m->nhist;
}

typedef struct {
    sv_matcher_t *m;
    uint32_t limit;
    uint32_t max_u; /* the largest U the filter saw */
} budget_ctx_t;

static bool budget_filter(void *ctx, int32_t next) {
    budget_ctx_t *b = ctx;
    uint32_t u = u_of(b->m, next);
    if (u > b->max_u) b->max_u = u;
    return u <= b->limit;
}

sv_status sv_matcher_mask(sv_matcher_t *m, const uint32_t **mask, sv_error_t *err) {
    uint32_t words = sv_token_set_mask_words(m->ts);
    if (m->finished) {
        memset(m->buf, 0, (size_t)words * sizeof *m->buf);
        *mask = m->buf;
        return SV_OK;
    }
    int64_t left = sv_matcher_tokens_left(m);
    if (left <= 0) {
        memset(m->buf, 0, (size_t)words * sizeof *m->buf);
        *mask = m->buf;
        return SV_OK;
    }
    uint32_t maxd = 0;
    sv_status st = sv_token_index_mask(m->ix, m->state, m->ws, mask, &maxd);
    if (st == SV_ERR_BUDGET) {
        *mask = NULL;
    } else if (st) {
        return sv_error_set(err, st, -1, "out of memory computing a token mask");
    }
    /* (without a memoized mask maxd is unknown, and the filter decides) */
    bool need_filter = m->max_tokens && !(*mask && bytes_bound(m) && (int64_t)maxd <= left - 1);
    budget_ctx_t bc = {m, left - 1 > (int64_t)U_INF ? U_INF : (uint32_t)(left - 1), 0};
    /* The bytes do not settle it, but the tokens may: the largest U among
     * the successors, left in the index by the first matcher that filtered
     * this mask (every matcher of a constraint shares it), is enough when
     * it fits. */
    uint32_t max_u, stored;
    const void *owner = m->tok ? m->tok->ctx : NULL;
    bool shared = !m->u_private;
    if (need_filter && *mask && shared &&
        sv_token_index_note_get(m->ix, owner, SV_NOTE_MAX_U, m->state, m->ws, &max_u) && max_u <= bc.limit)
        need_filter = false;
    if (*mask && !need_filter) return SV_OK;
    /* A mask filtered for this budget before (near the end of a budget,
     * requests of one constraint meet the same states with the same
     * tokens left). */
    if (need_filter && *mask && shared &&
        sv_token_index_filtered_get(m->ix, owner, m->state, m->ws, bc.limit, m->buf)) {
        *mask = m->buf;
        return SV_OK;
    }
    sv_token_index_fill(m->ix, m->state, m->ws, need_filter ? budget_filter : NULL, &bc, m->buf);
    if (need_filter && shared && !m->u_private) {
        sv_token_index_note_set(m->ix, owner, SV_NOTE_MAX_U, m->state, m->ws, bc.max_u, &stored);
        if (*mask) sv_token_index_filtered_put(m->ix, owner, m->state, m->ws, bc.limit, m->buf);
    }
    *mask = m->buf;
    return SV_OK;
}

bool sv_matcher_mask_key(const sv_matcher_t *m, const uint32_t *mask, uint64_t key[2]) {
    if (!mask || mask == m->buf) return false;
    key[0] = sv_token_index_serial(m->ix);
    key[1] = (uint64_t)(uint32_t)m->state << 32 | m->ws;
    return true;
}

static bool push(sv_matcher_t *m, int32_t id) {
    if (!sv_grow((void **)&m->hist, &m->caphist, m->nhist + 1, sizeof *m->hist)) return false;
    m->hist[m->nhist++] = (step_t){m->state, m->ws, id};
    return true;
}

bool sv_matcher_accept(sv_matcher_t *m, int32_t id) {
    if (m->finished) return false;
    int64_t left = sv_matcher_tokens_left(m);
    if (left <= 0) return false;
    uint8_t kind = sv_token_set_kind(m->ts, id);
    if (kind == SV_TOKKIND_EOG) {
        if (!sv_token_index_accepting(m->ix, m->state) || !push(m, id)) return false;
        m->finished = true;
        return true;
    }
    if (kind != SV_TOKKIND_NORMAL) return false;
    int32_t ns = sv_token_index_next(m->ix, m->state, id);
    if (ns < 0) return false;
    uint32_t wa;
    if (!sv_token_index_ws_after(m->ix, m->ws, id, &wa)) return false;
    if (m->max_tokens && (int64_t)u_of(m, ns) > left - 1) return false;
    if (!push(m, id)) return false;
    m->state = ns;
    m->ws = wa;
    return true;
}

sv_status sv_matcher_rollback(sv_matcher_t *m, uint32_t n, sv_error_t *err) {
    if (n > m->nhist)
        return sv_error_set(err, SV_ERR_ARG, -1, "cannot roll back %u tokens: only %u were accepted", n, m->nhist);
    if (!n) return SV_OK;
    m->nhist -= n;
    m->state = m->hist[m->nhist].state;
    m->ws = m->hist[m->nhist].ws;
    m->finished = false;
    return SV_OK;
}

bool sv_matcher_is_accepting(const sv_matcher_t *m) { return sv_token_index_accepting(m->ix, m->state); }

bool sv_matcher_is_finished(const sv_matcher_t *m) {
    return m->finished || sv_token_index_final(m->ix, m->state);
}

int32_t sv_matcher_state(const sv_matcher_t *m) { return m->state; }
uint32_t sv_matcher_ws_run(const sv_matcher_t *m) { return m->ws; }
uint32_t sv_matcher_num_tokens(const sv_matcher_t *m) { return m->nhist; }

/* ---- jump-forward ---------------------------------------------------------------- */

/* Encodes text[0..len) and keeps the tokens that end at or before cut;
 * returns how many, or -1. The token bytes must spell text exactly. */
static int encode_cut(sv_matcher_t *m, uint32_t len, uint32_t cut, uint32_t *end) {
    if (!sv_grow((void **)&m->ids, &m->idscap, len + 8, sizeof *m->ids)) return -1;
    int n = m->tok->encode(m->tok->ctx, m->text, len, m->ids, (int)m->idscap);
    if (n <= 0) return -1;
    uint32_t off = 0;
    int keep = 0;
    for (int i = 0; i < n; i++) {
        uint32_t tl;
        const uint8_t *tb = sv_token_set_bytes(m->ts, m->ids[i], &tl);
        if (!tb || off + tl > len || memcmp(tb, m->text + off, tl) != 0) return -1;
        off += tl;
        if (off <= cut) keep = i + 1, *end = off;
    }
    if (off != len) return -1;
    return keep;
}

sv_status sv_matcher_forced(sv_matcher_t *m, int32_t *ids, uint32_t cap, uint32_t *n, uint32_t *rollback,
                            sv_error_t *err) {
    *n = 0;
    *rollback = 0;
    if (!m->tok || m->finished) return SV_OK;
    bool ends;
    uint8_t f[FORCED_MAX];
    uint32_t flen = sv_token_index_forced(m->ix, m->state, f, FORCED_MAX, &ends);
    if (!flen) return SV_OK;
    /* free text follows unless the forced path ends the string */
    bool free_after = !ends;
    /* two attempts: merged with the previous token, then alone */
    for (int attempt = 0; attempt < 2; attempt++) {
        uint32_t plen = 0;
        const uint8_t *pb = NULL;
        int32_t prev = -1;
        if (attempt == 0) {
            if (!m->nhist) continue;
            prev = m->hist[m->nhist - 1].tok;
            pb = sv_token_set_bytes(m->ts, prev, &plen);
            if (!pb) continue;
        }
        uint32_t len = plen + flen;
        if (!sv_grow((void **)&m->text, &m->textcap, len + 1, 1))
            return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        if (plen) memcpy(m->text, pb, plen);
        memcpy(m->text + plen, f, flen);
        uint32_t cut = len;
        if (free_after) {
            if (m->tok->last_piece) {
                size_t lp = m->tok->last_piece(m->tok->ctx, m->text, len);
                cut = lp < len ? (uint32_t)lp : len;
            } else {
                cut = UINT32_MAX; /* decided below: all but the last token */
            }
        }
        uint32_t end = 0;
        int keep;
        if (cut == UINT32_MAX) {
            keep = encode_cut(m, len, len, &end);
            if (keep > 0) {
                keep--;
                end = 0;
                for (int i = 0; i < keep; i++) {
                    uint32_t tl;
                    sv_token_set_bytes(m->ts, m->ids[i], &tl);
                    end += tl;
                }
            }
        } else {
            keep = encode_cut(m, len, cut, &end);
        }
        if (keep < 0) continue;
        if (end <= plen) {
            if (attempt == 0) continue;
            return SV_OK;
        }
        int first = 0;
        uint32_t rb = 0;
        if (attempt == 0) {
            uint32_t l0;
            const uint8_t *b0 = sv_token_set_bytes(m->ts, m->ids[0], &l0);
            if (l0 == plen && memcmp(b0, pb, plen) == 0) first = 1; /* prev stays */
            else rb = 1;
        }
        uint32_t cnt = (uint32_t)(keep - first);
        if (cnt == 0) return SV_OK;
        if (cnt > cap) cnt = cap;
        /* Walk them under the budget rule from where they start (u_of
         * reuses m->ids, so copy them out first). */
        for (uint32_t i = 0; i < cnt; i++) ids[i] = m->ids[first + (int)i];
        int32_t s = rb ? m->hist[m->nhist - 1].state : m->state;
        uint32_t ws = rb ? m->hist[m->nhist - 1].ws : m->ws;
        int64_t left = m->max_tokens ? sv_matcher_tokens_left(m) + rb : INT64_MAX;
        bool ok = true;
        for (uint32_t i = 0; i < cnt && ok; i++) {
            int32_t id = ids[i];
            s = sv_token_index_next(m->ix, s, id);
            if (s < 0 || !sv_token_index_ws_after(m->ix, ws, id, &ws)) ok = false;
            else if (m->max_tokens && (int64_t)u_of(m, s) > left - 1 - (int64_t)i) ok = false;
        }
        if (!ok) {
            if (attempt == 0) continue;
            return SV_OK;
        }
        *n = cnt;
        *rollback = rb;
        return SV_OK;
    }
    return SV_OK;
}
