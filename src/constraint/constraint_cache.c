/* constraint_cache.c — a thread-safe, byte-bounded LRU of compiled
 * constraints. Entries live in a list ordered by last use (head = newest)
 * and are found by a linear scan of 64-bit key hashes, then a full key
 * compare (caches of compiled schemas hold hundreds of entries, not
 * millions). */
#include "constraint_cache.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/grammar.h"
#include "fsm/regex.h"
#include "fsm/structural_tag.h"
#include "util/clock.h"
#include "util/hash.h"

struct sv_constraint {
    struct sv_constraint *prev, *next;
    uint64_t hash;
    char *key;
    size_t keylen;
    sv_token_index_t *ix;     /* NULL while compiling */
    uint32_t refs;
    bool ready, failed;
    size_t bytes;             /* last accounted */
    uint64_t compile_us, index_us;
};

struct sv_constraint_cache {
    pthread_mutex_t lock;
    pthread_cond_t done;
    sv_constraint_t *head, *tail;
    uint32_t n;
    size_t max_bytes, bytes;
    uint64_t hits, misses, evictions, waits;
};

sv_status sv_ccache_create(size_t max_bytes, sv_constraint_cache_t **out, sv_error_t *err) {
    sv_constraint_cache_t *c = calloc(1, sizeof *c);
    if (!c) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->done, NULL);
    c->max_bytes = max_bytes;
    *out = c;
    return SV_OK;
}

static void free_entry(sv_constraint_t *e) {
    sv_token_index_destroy(e->ix);
    free(e->key);
    free(e);
}

void sv_ccache_destroy(sv_constraint_cache_t *c) {
    if (!c) return;
    for (sv_constraint_t *e = c->head, *nx; e; e = nx) {
        nx = e->next;
        free_entry(e);
    }
    pthread_cond_destroy(&c->done);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = sv_hash_bytes(s, n);
    return h ^ (h >> 29);
}

static void unlink_entry(sv_constraint_cache_t *c, sv_constraint_t *e) {
    if (e->prev) e->prev->next = e->next;
    else c->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(sv_constraint_cache_t *c, sv_constraint_t *e) {
    e->prev = NULL;
    e->next = c->head;
    if (c->head) c->head->prev = e;
    c->head = e;
    if (!c->tail) c->tail = e;
}

static size_t entry_bytes(sv_constraint_t *e) {
    size_t b = sizeof *e + e->keylen;
    if (e->ix) {
        sv_token_index_stats_t st;
        sv_token_index_stats(e->ix, &st);
        b += sv_dfa_memory(sv_token_index_dfa(e->ix)) + st.mask_bytes;
    }
    return b;
}

/* Re-accounts every entry and evicts unheld ones from the cold end until
 * the total fits. Under the lock. */
static void shrink(sv_constraint_cache_t *c) {
    size_t total = 0;
    for (sv_constraint_t *e = c->head; e; e = e->next) {
        if (e->ready) e->bytes = entry_bytes(e);
        total += e->bytes;
    }
    for (sv_constraint_t *e = c->tail, *pv; e && total > c->max_bytes; e = pv) {
        pv = e->prev;
        if (e->refs || !e->ready) continue;
        total -= e->bytes;
        unlink_entry(c, e);
        c->n--;
        c->evictions++;
        free_entry(e);
    }
    c->bytes = total;
}

/* text without the whitespace between JSON tokens (a string's own bytes
 * kept, and one space where two literals or numbers would otherwise meet,
 * so text that does not parse stays apart from text that does): schemas
 * that requests spell apart only by spacing share an entry. One pass: parsing
 * and printing the document took 2.6 ms of every request of a 158 KB
 * schema (Kubernetes' kb_233 in MaskBench), hits included. NULL when out
 * of memory. */
static bool structural(char ch) {
    return ch == '{' || ch == '}' || ch == '[' || ch == ']' || ch == ',' || ch == ':' || ch == '"';
}

static char *strip_ws(const char *text, size_t len, size_t *out_len) {
    char *o = malloc(len + 1);
    if (!o) return NULL;
    size_t n = 0;
    bool in = false, gap = false;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (in) {
            o[n++] = ch;
            if (ch == '\\' && i + 1 < len) o[n++] = text[++i];
            else if (ch == '"') in = false;
            continue;
        }
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
            gap = true;
            continue;
        }
        if (gap && n && !structural(o[n - 1]) && !structural(ch)) o[n++] = ' ';
        gap = false;
        o[n++] = ch;
        in = ch == '"';
    }
    o[n] = '\0';
    *out_len = n;
    return o;
}

/* The key: kind, token set, options that change the language (the
 * whitespace mode decides the cap), then the text without whitespace
 * between tokens (strip_ws). */
static char *make_key(sv_constraint_kind kind, const char *text, size_t len, const sv_schema_opts_t *o,
                      const sv_token_set_t *tokens, size_t *klen, sv_error_t *err) {
    char *canon = NULL;
    const char *body = text;
    size_t blen = len;
    if (kind == SV_CONSTRAINT_SCHEMA && (canon = strip_ws(text, len, &blen))) body = canon;
    else blen = len;
    char head[256];
    int h = snprintf(head, sizeof head, "%d|%p|%d|%d|%d|%u|%u|%u|%u|%u|%u|%d|%d|%d|%d|", (int)kind, (const void *)tokens,
                     (int)o->ws, (int)o->strict_properties, (int)o->unknown_formats_ok, o->max_ref_depth,
                     o->max_any_depth, o->any_depth_total, o->any_deep_levels, o->any_deep_arrays, o->max_string_length,
                     (int)o->any_calls, (int)o->key_order, (int)o->discriminator_annotation,
                     (int)o->extra_key_orders);
    char *key = malloc((size_t)h + blen + 1);
    if (!key) {
        free(canon);
        sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        return NULL;
    }
    memcpy(key, head, (size_t)h);
    memcpy(key + h, body, blen);
    key[h + blen] = 0;
    *klen = (size_t)h + blen;
    free(canon);
    return key;
}

uint32_t sv_constraint_ws_cap(sv_constraint_kind kind, const sv_schema_opts_t *opts) {
    return kind == SV_CONSTRAINT_SCHEMA && opts && opts->ws == SV_WS_FLEXIBLE ? SV_CONSTRAINT_WS_CAP : 0;
}

/* sv_constraint_get, or with compile false sv_constraint_find. */
static sv_status get(sv_constraint_cache_t *c, const sv_constraint_spec_t *spec, bool compile, sv_constraint_t **out,
                     bool *hit, sv_error_t *err) {
    sv_constraint_kind kind = spec->kind;
    const char *text = spec->text;
    size_t len = spec->len;
    const sv_schema_opts_t *opts = spec->opts;
    const sv_token_set_t *tokens = spec->tokens;
    *out = NULL;
    if (hit) *hit = false;
    sv_schema_opts_t def;
    if (!opts) {
        sv_schema_opts_default(&def);
        opts = &def;
    }
    size_t klen;
    char *key = make_key(kind, text, len, opts, tokens, &klen, err);
    if (!key) return SV_ERR_NOMEM;
    uint64_t h = hash_bytes(key, klen);

    pthread_mutex_lock(&c->lock);
    for (;;) {
        sv_constraint_t *e = c->head;
        while (e && !(e->hash == h && e->keylen == klen && memcmp(e->key, key, klen) == 0)) e = e->next;
        if (!e || (!compile && !e->ready)) break;
        if (!e->ready) { /* someone is compiling it: wait, then look again */
            c->waits++;
            e->refs++;
            while (!e->ready) pthread_cond_wait(&c->done, &c->lock);
            e->refs--;
            if (e->failed) {
                if (!e->refs) free_entry(e);
                continue; /* compile it ourselves, to get the error */
            }
        }
        e->refs++;
        unlink_entry(c, e);
        push_front(c, e);
        c->hits++;
        pthread_mutex_unlock(&c->lock);
        free(key);
        if (hit) *hit = true;
        *out = e;
        return SV_OK;
    }
    if (!compile) {
        pthread_mutex_unlock(&c->lock);
        free(key);
        return SV_OK;
    }
    /* a miss: publish a placeholder, compile outside the lock */
    sv_constraint_t *e = calloc(1, sizeof *e);
    if (!e) {
        pthread_mutex_unlock(&c->lock);
        free(key);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    e->hash = h;
    e->key = key;
    e->keylen = klen;
    e->refs = 1;
    push_front(c, e);
    c->n++;
    c->misses++;
    pthread_mutex_unlock(&c->lock);

    uint64_t t0 = sv_now_ns();
    sv_dfa_t *dfa = NULL;
    sv_status st = kind == SV_CONSTRAINT_SCHEMA    ? sv_schema_compile(text, len, opts, &dfa, NULL, err)
                   : kind == SV_CONSTRAINT_GRAMMAR ? sv_grammar_compile(text, len, &opts->lim, &dfa, err)
                   : kind == SV_CONSTRAINT_STRUCTURAL_TAG ? sv_structural_tag_compile(text, len, opts, &dfa, err)
                   : kind == SV_CONSTRAINT_FRAMED_SCHEMA  ? sv_constraint_framed_compile(text, len, opts, &dfa, err)
                                                   : sv_regex_compile(text, len, &opts->lim, &dfa, err);
    sv_token_index_t *ix = NULL;
    uint64_t t1 = sv_now_ns();
    if (!st) {
        sv_token_index_opts_t io;
        sv_token_index_opts_default(&io);
        io.ws_cap = sv_constraint_ws_cap(kind, opts);
        st = sv_token_index_create(dfa, tokens, &io, &ix, err);
        if (st) sv_dfa_destroy(dfa);
    }
    uint64_t t2 = sv_now_ns();
    uint64_t us = (t2 - t0) / 1000;

    pthread_mutex_lock(&c->lock);
    e->ready = true;
    e->compile_us = us;
    e->index_us = (t2 - t1) / 1000;
    if (st) {
        /* failures are not cached: unlink; waiters see `failed` and retry */
        e->failed = true;
        unlink_entry(c, e);
        c->n--;
        e->refs--;
        pthread_cond_broadcast(&c->done);
        bool last = e->refs == 0;
        pthread_mutex_unlock(&c->lock);
        if (last) free_entry(e);
        return st;
    }
    e->ix = ix;
    shrink(c);
    pthread_cond_broadcast(&c->done);
    pthread_mutex_unlock(&c->lock);
    *out = e;
    return SV_OK;
}

sv_status sv_constraint_framed_compile(const char *text, size_t len, const sv_schema_opts_t *opts, sv_dfa_t **out,
                                      sv_error_t *err) {
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    json_t *fr = json_object_get(root, "frame"), *schema = json_object_get(root, "schema");
    const char *trigger = json_string_value(json_object_get(fr, "trigger"));
    if (!json_is_object(fr) || !schema || !trigger || !trigger[0]) {
        json_decref(root);
        return sv_error_set(err, SV_ERR_INTERNAL, -1, "internal: a framed schema needs a frame with a trigger and a schema");
    }
    sv_schema_frame_t f = {.trigger = trigger,
                           .open = json_string_value(json_object_get(fr, "open")),
                           .close = json_string_value(json_object_get(fr, "close")),
                           .blocks = json_is_true(json_object_get(fr, "blocks")),
                           .repeat = json_is_true(json_object_get(fr, "repeat"))};
    sv_schema_opts_t o;
    if (opts) o = *opts;
    else sv_schema_opts_default(&o);
    o.frame = &f;
    char *st_text = json_dumps(schema, JSON_PRESERVE_ORDER | JSON_COMPACT | JSON_ENCODE_ANY);
    sv_status st = st_text ? sv_schema_compile(st_text, strlen(st_text), &o, out, NULL, err)
                           : sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    free(st_text);
    json_decref(root);
    return st;
}

sv_status sv_constraint_get(sv_constraint_cache_t *c, const sv_constraint_spec_t *spec, sv_constraint_t **out,
                            bool *hit, sv_error_t *err) {
    return get(c, spec, true, out, hit, err);
}

sv_status sv_constraint_find(sv_constraint_cache_t *c, const sv_constraint_spec_t *spec, sv_constraint_t **out,
                             sv_error_t *err) {
    return get(c, spec, false, out, NULL, err);
}

void sv_constraint_release(sv_constraint_cache_t *c, sv_constraint_t *e) {
    if (!e) return;
    pthread_mutex_lock(&c->lock);
    e->refs--;
    shrink(c);
    pthread_mutex_unlock(&c->lock);
}

sv_token_index_t *sv_constraint_index(sv_constraint_t *e) { return e->ix; }
uint64_t sv_constraint_compile_us(const sv_constraint_t *e) { return e->compile_us; }
uint64_t sv_constraint_index_us(const sv_constraint_t *e) { return e->index_us; }

void sv_ccache_stats(sv_constraint_cache_t *c, sv_ccache_stats_t *st) {
    pthread_mutex_lock(&c->lock);
    st->entries = c->n;
    st->bytes = c->bytes;
    st->hits = c->hits;
    st->misses = c->misses;
    st->evictions = c->evictions;
    st->waits = c->waits;
    pthread_mutex_unlock(&c->lock);
}
