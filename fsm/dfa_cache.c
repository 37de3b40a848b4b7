/* dfa_cache.c — a process-wide memo of sv_dfa_from_ast and sv_dfa_product.
 *
 * Schema compilation builds the same automata again and again: the content
 * of a JSON string, numbers, free-form values nested a few levels, formats,
 * common patterns. Each is a small AST whose DFA costs milliseconds. The
 * memo keys a DFA by a serialization of its AST; an embedded DFA enters the
 * key by a fingerprint of its tables, so an automaton built on cached parts
 * is found again in the next compilation even though those parts are fresh
 * copies. Products are keyed by the fingerprints of their operands and the
 * operator: a schema's differences meet the same pieces at several places
 * (a `oneOf` under `dependencies` and again under a recursive `$ref`), and
 * one product of 12,000 states costs 13 ms, most of it minimizing.
 * Callers get their own DFA (they own and free it as before) over the
 * entry's tables, shared and reference-counted (sv_dfa_share: tables are
 * immutable once built), so entries can be evicted at any time and a hit
 * copies nothing: the memo is an LRU bounded in bytes, under one mutex. A
 * caller's DFA is charged its tables' size (sv_dfa_charge) unless another
 * DFA of the same compile holds them already: an entry evicted while
 * callers hold its tables is memory those callers keep alive, once. Keys longer than KEY_MAX bytes and DFAs over MAX_STATES states are
 * not cached. Failures are never cached. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/memacct.h"
#include "fsm/internal/dfa_internal.h"

#define KEY_MAX ((size_t)1 << 20)
#define MAX_STATES 65536
#define BUCKETS 1024

typedef struct entry {
    struct entry *prev, *next;   /* LRU, newest first */
    struct entry *chain;         /* hash bucket */
    uint64_t hash;
    uint8_t *key;
    size_t keylen, bytes;        /* bytes: all it keeps, for the LRU */
    sv_dfa_t *dfa;               /* charged as a DFA (sv_dfa_charge), the tables once */
    uint64_t acct;               /* the compile account charged for the rest (util/memacct.h) */
    size_t own;                  /* the rest: the entry and its key */
} entry_t;

static struct {
    pthread_mutex_t lock;
    entry_t *bucket[BUCKETS];
    entry_t *head, *tail;
    size_t bytes, max_bytes;
    uint64_t hits, misses;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .max_bytes = (size_t)64 << 20};

/* ---- fingerprints ---------------------------------------------------------- */

/* A fingerprint of the language: minimal BFS-numbered DFAs of one language
 * have identical tables (sv_dfa_fingerprint_of). Cached in the DFA
 * (immutable once built); the minimizer stores it as it builds the DFA. */
uint64_t sv_dfa_fingerprint(const sv_dfa_t *cd) {
    sv_dfa_t *d = (sv_dfa_t *)cd;
    uint64_t fp = atomic_load_explicit(&d->fp, memory_order_relaxed);
    if (fp) return fp;
    uint64_t colh[256];
    sv_dfa_column_hashes(d->trans, d->nstates, d->nclasses, colh);
    fp = sv_dfa_fingerprint_of(d, colh);
    atomic_store_explicit(&d->fp, fp, memory_order_relaxed);
    return fp;
}

/* ---- keys ----------------------------------------------------------------- */

/* A key grows as it is written, up to KEY_MAX bytes (full beyond). */
typedef struct {
    uint8_t *buf;
    size_t n, cap;
    bool full;
} key_t;

static void put(key_t *k, const void *p, size_t n) {
    if (k->full) return;
    if (k->n + n > k->cap) {
        size_t cap = k->cap ? k->cap : 256;
        while (cap < k->n + n) cap *= 2;
        uint8_t *b = cap <= KEY_MAX ? realloc(k->buf, cap) : NULL;
        if (!b) {
            k->full = true;
            return;
        }
        k->buf = b;
        k->cap = cap;
    }
    memcpy(k->buf + k->n, p, n);
    k->n += n;
}

static void put32(key_t *k, uint32_t v) { put(k, &v, sizeof v); }

static void ser(key_t *k, const sv_ast_t *a, int depth) {
    if (k->full) return;
    if (!a || depth > 200) {
        k->full = true;
        return;
    }
    put32(k, (uint32_t)a->kind);
    switch (a->kind) {
    case SV_AST_NONE:
    case SV_AST_EMPTY:
    case SV_AST_BOL:
    case SV_AST_EOL: break;
    case SV_AST_CLASS:
        put32(k, a->nranges);
        put(k, a->ranges, a->nranges * sizeof *a->ranges);
        break;
    case SV_AST_BYTES:
        put32(k, (uint32_t)a->lo << 8 | a->hi);
        break;
    case SV_AST_CAT:
    case SV_AST_ALT:
        put32(k, a->nkids);
        for (uint32_t i = 0; i < a->nkids; i++) ser(k, a->kids[i], depth + 1);
        break;
    case SV_AST_REPEAT:
        put32(k, a->min);
        put32(k, a->max);
        ser(k, a->kids[0], depth + 1);
        break;
    case SV_AST_DFA: {
        uint64_t fp = sv_dfa_fingerprint(a->dfa);
        put(k, &fp, sizeof fp);
        put32(k, a->dfa->nstates);
        put32(k, a->json_escape);
        break;
    }
    case SV_AST_GRAPH:
        put32(k, a->nnodes);
        put32(k, a->nedges);
        put(k, a->final, a->nnodes);
        for (uint32_t i = 0; i < a->nedges; i++) {
            put32(k, a->edges[i].from);
            put32(k, a->edges[i].to);
            if (a->edges[i].label) ser(k, a->edges[i].label, depth + 1);
            else put32(k, UINT32_MAX);
        }
        break;
    }
}

uint8_t *sv_ast_key(const sv_ast_t *ast, size_t *n) {
    key_t k = {0};
    ser(&k, ast, 0);
    if (k.full) {
        free(k.buf);
        return NULL;
    }
    *n = k.n;
    return k.buf;
}

/* ---- the memo ------------------------------------------------------------------ */

static void lru_unlink(entry_t *e) {
    if (e->prev) e->prev->next = e->next;
    else g.head = e->next;
    if (e->next) e->next->prev = e->prev;
    else g.tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_front(entry_t *e) {
    e->prev = NULL;
    e->next = g.head;
    if (g.head) g.head->prev = e;
    g.head = e;
    if (!g.tail) g.tail = e;
}

static void evict(entry_t *e) {
    lru_unlink(e);
    entry_t **pp = &g.bucket[e->hash % BUCKETS];
    while (*pp != e) pp = &(*pp)->chain;
    *pp = e->chain;
    g.bytes -= e->bytes;
    sv_memacct_release(e->acct, e->own);
    sv_dfa_destroy(e->dfa);
    free(e->key);
    free(e);
}

void sv_dfa_cache_configure(size_t max_bytes) {
    pthread_mutex_lock(&g.lock);
    g.max_bytes = max_bytes;
    while (g.tail && g.bytes > g.max_bytes) evict(g.tail);
    pthread_mutex_unlock(&g.lock);
}

void sv_dfa_cache_empty(void) {
    pthread_mutex_lock(&g.lock);
    while (g.tail) evict(g.tail);
    pthread_mutex_unlock(&g.lock);
}

void sv_dfa_cache_stats(uint64_t *hits, uint64_t *misses, size_t *bytes) {
    pthread_mutex_lock(&g.lock);
    if (hits) *hits = g.hits;
    if (misses) *misses = g.misses;
    if (bytes) *bytes = g.bytes;
    pthread_mutex_unlock(&g.lock);
}

/* The memo around build(ctx): a copy of the entry under key k when there
 * is one, else build's DFA, a copy of which is kept. Takes k's buffer. */
typedef sv_status (*build_fn)(const void *ctx, sv_dfa_t **out, sv_error_t *err);

static sv_status memoized(key_t *k, build_fn build, const void *ctx, sv_dfa_t **out, sv_error_t *err) {
    if (k->full) {
        free(k->buf);
        return build(ctx, out, err);
    }
    uint64_t h = sv_hash_words(k->buf, k->n);
    pthread_mutex_lock(&g.lock);
    for (entry_t *e = g.bucket[h % BUCKETS]; e; e = e->chain)
        if (e->hash == h && e->keylen == k->n && memcmp(e->key, k->buf, k->n) == 0) {
            sv_dfa_t *c = sv_dfa_share(e->dfa); /* the entry's tables, not a copy */
            if (c) {
                lru_unlink(e);
                lru_front(e);
                g.hits++;
                pthread_mutex_unlock(&g.lock);
                free(k->buf);
                sv_status st = sv_dfa_charge(c, err);
                if (st) {
                    sv_dfa_destroy(c);
                    return st;
                }
                *out = c;
                return SV_OK;
            }
            break;
        }
    g.misses++;
    pthread_mutex_unlock(&g.lock);
    sv_status st = build(ctx, out, err);
    if (st || (*out)->nstates > MAX_STATES) {
        free(k->buf);
        return st;
    }
    entry_t *e = calloc(1, sizeof *e);
    sv_dfa_t *c = e ? sv_dfa_share(*out) : NULL; /* the entry shares the result's tables */
    if (!c) {
        free(e);
        free(k->buf);
        return SV_OK;
    }
    uint8_t *key = realloc(k->buf, k->n ? k->n : 1); /* shrinks: cannot fail in practice */
    e->hash = h;
    e->key = key ? key : k->buf;
    e->keylen = k->n;
    e->dfa = c;
    e->own = sizeof *e + k->n;
    e->bytes = e->own + sv_dfa_memory(c);
    /* The copy is memory this compile made the process keep: charged to its
     * account (released if this compile evicts it), and not kept when it
     * does not fit what is left of the budget. Its tables are the result's,
     * charged once while either holds them (sv_dfa_charge). */
    sv_error_t ignored;
    if (!sv_memacct_charge(e->own, &e->acct)) {
        sv_dfa_destroy(e->dfa);
        free(e->key);
        free(e);
        return SV_OK;
    }
    if (sv_dfa_charge(e->dfa, &ignored)) {
        sv_memacct_release(e->acct, e->own);
        sv_dfa_destroy(e->dfa);
        free(e->key);
        free(e);
        return SV_OK;
    }
    pthread_mutex_lock(&g.lock);
    bool dup = false;
    for (entry_t *x = g.bucket[h % BUCKETS]; x; x = x->chain)
        if (x->hash == h && x->keylen == e->keylen && memcmp(x->key, e->key, e->keylen) == 0) dup = true;
    if (!dup && e->bytes <= g.max_bytes) {
        e->chain = g.bucket[h % BUCKETS];
        g.bucket[h % BUCKETS] = e;
        lru_front(e);
        g.bytes += e->bytes;
        while (g.tail && g.bytes > g.max_bytes) evict(g.tail);
        e = NULL;
    }
    pthread_mutex_unlock(&g.lock);
    if (e) {
        sv_memacct_release(e->acct, e->own);
        sv_dfa_destroy(e->dfa);
        free(e->key);
        free(e);
    }
    return SV_OK;
}

static sv_status compile_uncached(const sv_ast_t *ast, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err);

typedef struct {
    const sv_ast_t *ast;
    const sv_fsm_limits_t *lim;
} ast_job_t;

static sv_status build_ast(const void *ctx, sv_dfa_t **out, sv_error_t *err) {
    const ast_job_t *j = ctx;
    return compile_uncached(j->ast, j->lim, out, err);
}

sv_status sv_dfa_from_ast(const sv_ast_t *ast, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    if (ast->kind == SV_AST_DFA && !ast->json_escape && ast->dfa && !ast->dfa->call_off) {
        /* An AST that is one minimized DFA is that DFA: its tables, shared,
         * not a subset construction and a minimization that rebuild them
         * (a schema whose top level is a product ends that way). */
        sv_dfa_t *c = sv_dfa_share((sv_dfa_t *)ast->dfa);
        if (!c) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        sv_status st = sv_dfa_charge(c, err);
        if (st) {
            sv_dfa_destroy(c);
            return st;
        }
        *out = c;
        return SV_OK;
    }
    if (!g.max_bytes) return compile_uncached(ast, lim, out, err);
    key_t k = {0};
    ser(&k, ast, 0);
    ast_job_t j = {ast, lim};
    return memoized(&k, build_ast, &j, out, err);
}

/* Product keys start with a word no AST kind has. */
#define PRODUCT_TAG 0xFFFFFFF0u

typedef struct {
    const sv_dfa_t *a, *b;
    sv_dfa_op op;
    const sv_fsm_limits_t *lim;
} product_job_t;

static sv_status build_product(const void *ctx, sv_dfa_t **out, sv_error_t *err) {
    const product_job_t *j = ctx;
    return sv_dfa_product_uncached(j->a, j->b, j->op, j->lim, out, err);
}

sv_status sv_dfa_product(const sv_dfa_t *a, const sv_dfa_t *b, sv_dfa_op op, const sv_fsm_limits_t *lim,
                         sv_dfa_t **out, sv_error_t *err) {
    /* programs (call tables) never meet in products; plain DFAs only */
    if (!g.max_bytes || a->call_off || b->call_off) return sv_dfa_product_uncached(a, b, op, lim, out, err);
    key_t k = {0};
    uint64_t fa = sv_dfa_fingerprint(a), fb = sv_dfa_fingerprint(b);
    put32(&k, PRODUCT_TAG);
    put32(&k, (uint32_t)op);
    put(&k, &fa, sizeof fa);
    put32(&k, a->nstates);
    put(&k, &fb, sizeof fb);
    put32(&k, b->nstates);
    product_job_t j = {a, b, op, lim};
    return memoized(&k, build_product, &j, out, err);
}

/* Products of automata that call the free-form part (program_product.c):
 * keyed by the part's fingerprint too, since the expansions copy it. */
#define PRODUCT_CALLS_TAG 0xFFFFFFF1u

typedef struct {
    const sv_dfa_t *a, *b, *part;
    sv_dfa_op op;
    uint32_t id;
    const sv_fsm_limits_t *lim;
} calls_job_t;

static sv_status build_product_calls(const void *ctx, sv_dfa_t **out, sv_error_t *err) {
    const calls_job_t *j = ctx;
    return sv_dfa_product_calls_uncached(j->a, j->b, j->op, j->id, j->part, j->lim, out, err);
}

sv_status sv_dfa_product_calls(const sv_dfa_t *a, const sv_dfa_t *b, sv_dfa_op op, uint32_t id, const sv_dfa_t *part,
                               const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    if (!sv_dfa_has_markers(a) && !sv_dfa_has_markers(b)) return sv_dfa_product(a, b, op, lim, out, err);
    calls_job_t j = {a, b, part, op, id, lim};
    if (!g.max_bytes || !part || a->call_off || b->call_off) return build_product_calls(&j, out, err);
    key_t k = {0};
    uint64_t f[3] = {sv_dfa_fingerprint(a), sv_dfa_fingerprint(b), sv_dfa_fingerprint(part)};
    put32(&k, PRODUCT_CALLS_TAG);
    put32(&k, (uint32_t)op);
    put32(&k, id);
    put(&k, f, sizeof f);
    put32(&k, a->nstates);
    put32(&k, b->nstates);
    put32(&k, part->nstates);
    return memoized(&k, build_product_calls, &j, out, err);
}

/* Quoted string contents (json_quote.c), keyed by the content. */
#define QUOTED_TAG 0xFFFFFFF2u

typedef struct {
    const sv_dfa_t *content;
    const sv_fsm_limits_t *lim;
} quoted_job_t;

static sv_status build_quoted(const void *ctx, sv_dfa_t **out, sv_error_t *err) {
    const quoted_job_t *j = ctx;
    return sv_dfa_json_quoted_uncached(j->content, j->lim, out, err);
}

sv_status sv_dfa_json_quoted(const sv_dfa_t *content, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    quoted_job_t j = {content, lim};
    if (!g.max_bytes || content->call_off) return build_quoted(&j, out, err);
    key_t k = {0};
    uint64_t f = sv_dfa_fingerprint(content);
    put32(&k, QUOTED_TAG);
    put(&k, &f, sizeof f);
    put32(&k, content->nstates);
    return memoized(&k, build_quoted, &j, out, err);
}

/* ---- the pipeline ---------------------------------------------------------------- */

#include "util/clock.h"

static sv_status compile_uncached(const sv_ast_t *ast, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    sv_fsm_limits_t def;
    if (!lim) sv_fsm_limits_default(&def), lim = &def;
    uint64_t t0 = sv_now_ns();
    sv_nfa_t nfa;
    sv_status st = sv_nfa_build(ast, lim, &nfa, err);
    if (st) return st;
    /* The NFA stays alive through subset construction: its bytes are
     * charged for that while, so that construction's own check sees them. */
    size_t nfa_bytes = (size_t)nfa.cap * sizeof *nfa.s + (size_t)nfa.capembeds * sizeof *nfa.embeds;
    uint64_t nfa_acct;
    if (!sv_memacct_charge(nfa_bytes, &nfa_acct)) {
        sv_nfa_free(&nfa);
        return sv_error_set(err, SV_ERR_BUDGET, -1, "the constraint's NFA (%zu bytes) exceeds what is left of the "
                            "compile's memory budget of %zu bytes", nfa_bytes, lim->max_memory);
    }
    sv_rawdfa_t raw = {0};
    st = sv_dfa_determinize(&nfa, lim, t0, &raw, err);
    sv_memacct_release(nfa_acct, nfa_bytes);
    sv_nfa_free(&nfa);
    if (st) return st;
    if (!st) st = sv_dfa_minimize_budget(&raw, 0, lim, err);
    if (!st) st = sv_dfa_minimize(&raw, out, err);
    sv_rawdfa_free(&raw);
    return st;
}

/* Counted strings (json_quote.c), keyed by their bounds. */
#define COUNTED_TAG 0xFFFFFFF3u

typedef struct {
    uint32_t mn, mx;
    const sv_fsm_limits_t *lim;
} counted_job_t;

static sv_status build_counted(const void *ctx, sv_dfa_t **out, sv_error_t *err) {
    const counted_job_t *j = ctx;
    return sv_dfa_json_quoted_counted_uncached(j->mn, j->mx, j->lim, out, err);
}

sv_status sv_dfa_json_quoted_counted(uint32_t mn, uint32_t mx, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                                     sv_error_t *err) {
    counted_job_t j = {mn, mx, lim};
    if (!g.max_bytes) return build_counted(&j, out, err);
    key_t k = {0};
    put32(&k, COUNTED_TAG);
    put32(&k, mn);
    put32(&k, mx);
    return memoized(&k, build_counted, &j, out, err);
}
