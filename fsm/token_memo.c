/* token_memo.c — the memo of masks: each (state, whitespace bucket) walked
 * once, each distinct mask stored once.
 *
 * Masks are memoized per (state, whitespace bucket) in an array of atomic
 * pointers, with the largest distance among the allowed tokens' end states
 * beside each. A reader that finds a pointer uses it without locking (the
 * engine thread and the prefetch workers share an index:
 * src/engine/prefetch.c). A miss walks the state (token_index.c) outside
 * the lock, into a buffer of its own, then takes the lock and looks the
 * mask up in a hash set of the distinct masks before storing a copy; two
 * threads that walk the same state at once store it once, the first to
 * insert winning. A program's configurations (token_config.c) store their
 * masks in the same set.
 *
 * Many states share a mask (the states of string content allow the same
 * tokens), so the set is smaller than the memo; a Llama 3 mask is 16 KB,
 * hashed for every mask built, by four independent 64-bit lanes. The bytes of the
 * distinct masks are bounded by the index's max_mask_bytes: past it a new
 * mask is SV_ERR_BUDGET, and callers compute with sv_token_index_fill. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/dfa_internal.h"
#include "fsm/internal/token_index_internal.h"

/* Four independent lanes of 64 bits, so that the multiplies overlap: a
 * mask of Llama 3 (16 KB) hashes in about a quarter of one chain's time. */
static uint64_t hash_words(const uint32_t *w, uint32_t n) {
    uint64_t h[4] = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull, 0x27d4eb2f165667c5ull};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 4; l++) {
            uint64_t x;
            memcpy(&x, w + i + 2 * l, sizeof x);
            h[l] = (h[l] ^ x) * 0xff51afd7ed558ccdull;
            h[l] ^= h[l] >> 32;
        }
    for (; i < n; i++) h[0] = ((h[0] ^ w[i]) * 0xff51afd7ed558ccdull) ^ (h[0] >> 29);
    uint64_t r = h[0];
    for (int l = 1; l < 4; l++) r = ((r ^ h[l]) * 0xff51afd7ed558ccdull) ^ (r >> 32);
    return r ^ (r >> 29);
}

sv_status sv_ti_cons_insert(sv_token_index_t *ix, const uint32_t *m, const uint32_t **out) {
    uint32_t words = ix->ts->words;
    size_t bytes = (size_t)words * sizeof *m;
    uint64_t h = hash_words(m, words);
    uint32_t mask = ix->capcons - 1;
    for (uint32_t p = (uint32_t)h & mask;; p = (p + 1) & mask) {
        cons_slot_t *sl = &ix->cons[p];
        if (!sl->mask) break;
        if (sl->hash == h && memcmp(sl->mask, m, bytes) == 0) {
            *out = sl->mask;
            return SV_OK;
        }
    }
    if (ix->mask_bytes + bytes > ix->o.max_mask_bytes) return SV_ERR_BUDGET;
    if (2 * (ix->ncons + 1) > ix->capcons) {
        uint32_t ncap = ix->capcons * 2;
        cons_slot_t *nt = calloc(ncap, sizeof *nt);
        if (!nt) return SV_ERR_NOMEM;
        for (uint32_t i = 0; i < ix->capcons; i++) {
            if (!ix->cons[i].mask) continue;
            uint32_t q = (uint32_t)ix->cons[i].hash & (ncap - 1);
            while (nt[q].mask) q = (q + 1) & (ncap - 1);
            nt[q] = ix->cons[i];
        }
        free(ix->cons);
        ix->cons = nt;
        ix->capcons = ncap;
        mask = ncap - 1;
    }
    uint32_t *copy = malloc(bytes);
    if (!copy) return SV_ERR_NOMEM;
    memcpy(copy, m, bytes);
    uint32_t p = (uint32_t)h & mask;
    while (ix->cons[p].mask) p = (p + 1) & mask;
    ix->cons[p].hash = h;
    ix->cons[p].mask = copy;
    ix->ncons++;
    ix->mask_bytes += bytes;
    *out = copy;
    return SV_OK;
}

sv_status sv_ti_pure_mask(sv_token_index_t *ix, int32_t state, uint32_t ws_run, const uint32_t **mask,
                          uint32_t *max_dist) {
    size_t key = (size_t)state * ix->nbuckets + ws_run;
    uintptr_t p = atomic_load_explicit(&ix->memo[key], memory_order_acquire);
    if (p) {
        *mask = (const uint32_t *)p;
        if (max_dist) *max_dist = ix->maxd[key];
        return SV_OK;
    }
    /* The walk runs outside the lock (as sv_token_index_fill's does), into
     * a buffer of its own: a thread walking one state does not hold up
     * another that wants a different one (the engine thread and the
     * prefetch workers share an index; src/engine/prefetch.c). Two threads
     * may walk the same state at once; the first to insert wins. */
    uint32_t *buf = calloc(ix->ts->words, sizeof *buf);
    if (!buf) return SV_ERR_NOMEM;
    uint32_t md;
    atomic_fetch_add_explicit(&ix->walks, 1, memory_order_relaxed);
    sv_ti_walk(ix, state, ws_run, NULL, NULL, buf, &md);
    pthread_mutex_lock(&ix->lock);
    p = atomic_load_explicit(&ix->memo[key], memory_order_relaxed);
    if (!p) {
        const uint32_t *m;
        sv_status st = sv_ti_cons_insert(ix, buf, &m);
        if (st) {
            pthread_mutex_unlock(&ix->lock);
            free(buf);
            return st;
        }
        ix->maxd[key] = md;
        ix->known++;
        p = (uintptr_t)m;
        atomic_store_explicit(&ix->memo[key], p, memory_order_release);
    }
    pthread_mutex_unlock(&ix->lock);
    free(buf);
    *mask = (const uint32_t *)p;
    if (max_dist) *max_dist = ix->maxd[key];
    return SV_OK;
}

sv_status sv_token_index_mask(sv_token_index_t *ix, int32_t state, uint32_t ws_run, const uint32_t **mask,
                              uint32_t *max_dist) {
    if (ws_run > ix->o.ws_cap) ws_run = ix->o.ws_cap;
    if (ix->cfg) return sv_ti_cfg_mask(ix, state, ws_run, mask, max_dist);
    return sv_ti_pure_mask(ix, state, ws_run, mask, max_dist);
}

bool sv_token_index_mask_known(const sv_token_index_t *ix, int32_t state, uint32_t ws_run) {
    if (ix->cfg) return sv_ti_cfg_known(ix, state, ws_run);
    if (state < 0 || (uint32_t)state >= ix->dfa->nstates) return false;
    if (ws_run > ix->o.ws_cap) ws_run = ix->o.ws_cap;
    return atomic_load_explicit(&ix->memo[(size_t)state * ix->nbuckets + ws_run], memory_order_acquire) != 0;
}

void sv_token_index_stats(sv_token_index_t *ix, sv_token_index_stats_t *st) {
    pthread_mutex_lock(&ix->lock);
    st->distinct_masks = ix->ncons;
    st->known_entries = ix->known;
    st->mask_bytes = ix->mask_bytes + sv_ti_cfg_bytes(ix); /* a program's configurations count too */
    st->walks = atomic_load(&ix->walks);
    pthread_mutex_unlock(&ix->lock);
}

/* ---- notes ------------------------------------------------------------------ */

enum { NOTE_FILTERED = 2 };

static uint64_t note_key(const sv_token_index_t *ix, int kind, int32_t state, uint32_t ws_run) {
    if (ws_run > ix->o.ws_cap) ws_run = ix->o.ws_cap;
    /* 0 marks a free slot */
    return ((uint64_t)(uint32_t)state * ix->nbuckets + ws_run) * 4 + (uint64_t)(kind & 3) + 1;
}

static uint32_t note_slot(uint64_t key, uint32_t extra, uint32_t cap) {
    uint64_t h = (key ^ (uint64_t)extra << 40) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 32) & (cap - 1);
}

/* The slot of (key, extra) (under lock): its own, or the free one it would take. */
static uint32_t note_find(const sv_token_index_t *ix, uint64_t key, uint32_t extra) {
    uint32_t p = note_slot(key, extra, ix->capnotes);
    while (ix->notes[p].key && (ix->notes[p].key != key || ix->notes[p].extra != extra))
        p = (p + 1) & (ix->capnotes - 1);
    return p;
}

/* Under lock: the note of (key, extra), if this owner's table has it. */
static bool note_get_locked(const sv_token_index_t *ix, const void *owner, uint64_t key, uint32_t extra,
                            uint32_t *val) {
    if (!ix->notes || ix->note_owner != owner) return false;
    uint32_t p = note_find(ix, key, extra);
    if (!ix->notes[p].key) return false;
    *val = ix->notes[p].val;
    return true;
}

/* Under lock: a slot for a new note of (key, extra), growing the table
 * within max_mask_bytes; UINT32_MAX when there is none (another owner's
 * table, no memory, the budget). The note must not be there yet. */
static uint32_t note_new_locked(sv_token_index_t *ix, const void *owner, uint64_t key, uint32_t extra) {
    if (!ix->notes) ix->note_owner = owner;
    if (ix->note_owner != owner) return UINT32_MAX;
    if (2 * (ix->nnotes + 1) > ix->capnotes) {
        uint32_t cap = ix->capnotes ? 2 * ix->capnotes : 256;
        size_t bytes = (size_t)cap * sizeof *ix->notes, old = (size_t)ix->capnotes * sizeof *ix->notes;
        if (ix->mask_bytes - old + bytes > ix->o.max_mask_bytes) return UINT32_MAX;
        __typeof__(ix->notes) n = calloc(cap, sizeof *n);
        if (!n) return UINT32_MAX;
        for (uint32_t i = 0; i < ix->capnotes; i++)
            if (ix->notes[i].key) {
                uint32_t p = note_slot(ix->notes[i].key, ix->notes[i].extra, cap);
                while (n[p].key) p = (p + 1) & (cap - 1);
                n[p] = ix->notes[i];
            }
        free(ix->notes);
        ix->notes = n;
        ix->capnotes = cap;
        ix->mask_bytes = ix->mask_bytes - old + bytes;
    }
    uint32_t p = note_find(ix, key, extra);
    ix->notes[p].key = key;
    ix->notes[p].extra = extra;
    ix->nnotes++;
    return p;
}

bool sv_token_index_note_get(const sv_token_index_t *cix, const void *owner, int kind, int32_t state,
                             uint32_t ws_run, uint32_t *val) {
    sv_token_index_t *ix = (sv_token_index_t *)cix;
    if (state < 0 || kind < 0 || kind >= NOTE_FILTERED) return false;
    pthread_mutex_lock(&ix->lock);
    bool found = note_get_locked(ix, owner, note_key(ix, kind, state, ws_run), 0, val);
    pthread_mutex_unlock(&ix->lock);
    return found;
}

bool sv_token_index_note_set(sv_token_index_t *ix, const void *owner, int kind, int32_t state, uint32_t ws_run,
                             uint32_t val, uint32_t *stored) {
    if (state < 0 || kind < 0 || kind >= NOTE_FILTERED) return false;
    uint64_t key = note_key(ix, kind, state, ws_run);
    bool kept = true;
    pthread_mutex_lock(&ix->lock);
    if (!note_get_locked(ix, owner, key, 0, stored)) { /* else set before: that one stands */
        uint32_t p = note_new_locked(ix, owner, key, 0);
        if (p == UINT32_MAX) kept = false;
        else ix->notes[p].val = *stored = val;
    }
    pthread_mutex_unlock(&ix->lock);
    return kept;
}

bool sv_token_index_filtered_get(const sv_token_index_t *cix, const void *owner, int32_t state, uint32_t ws_run,
                                 uint32_t limit, uint32_t *dst) {
    sv_token_index_t *ix = (sv_token_index_t *)cix;
    if (state < 0) return false;
    uint32_t v;
    pthread_mutex_lock(&ix->lock);
    bool found = note_get_locked(ix, owner, note_key(ix, NOTE_FILTERED, state, ws_run), limit, &v);
    if (found) memcpy(dst, ix->fmasks[v], (size_t)ix->ts->words * sizeof *dst);
    pthread_mutex_unlock(&ix->lock);
    return found;
}

void sv_token_index_filtered_put(sv_token_index_t *ix, const void *owner, int32_t state, uint32_t ws_run,
                                 uint32_t limit, const uint32_t *mask) {
    if (state < 0) return;
    uint64_t key = note_key(ix, NOTE_FILTERED, state, ws_run);
    uint32_t v;
    const uint32_t *kept;
    pthread_mutex_lock(&ix->lock);
    if ((ix->notes && ix->note_owner != owner) || note_get_locked(ix, owner, key, limit, &v)) goto out;
    if (ix->nfmasks == ix->capfmasks) {
        uint32_t cap = ix->capfmasks ? 2 * ix->capfmasks : 16;
        size_t bytes = (size_t)(cap - ix->capfmasks) * sizeof *ix->fmasks;
        if (ix->mask_bytes + bytes > ix->o.max_mask_bytes) goto out;
        const uint32_t **f = realloc(ix->fmasks, (size_t)cap * sizeof *f);
        if (!f) goto out;
        ix->fmasks = f;
        ix->capfmasks = cap;
        ix->mask_bytes += bytes;
    }
    if (sv_ti_cons_insert(ix, mask, &kept)) goto out;
    uint32_t p = note_new_locked(ix, owner, key, limit);
    if (p == UINT32_MAX) goto out;
    ix->fmasks[ix->nfmasks] = kept;
    ix->notes[p].val = ix->nfmasks++;
out:
    pthread_mutex_unlock(&ix->lock);
}
