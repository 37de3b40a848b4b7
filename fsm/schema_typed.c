/* schema_typed.c — a type beside a union, read off the union's first byte.
 *
 * {"type": "object", "anyOf": [{"$ref": "#/$defs/config"}]} is common in
 * generated schemas, where config names no type of its own. As a product of
 * the type's language and the union's, it turned calls off for the whole
 * union (products need flat automata): every part below it was inlined,
 * which cost some real schemas hundreds of milliseconds and some their
 * state budget. But the first byte of a JSON text tells its type: `{` an
 * object, `[` an array, `"` a string, `t` or `f` a boolean, `n` null, `-` or
 * a digit a number. So the intersection is the union's automaton with the
 * other first bytes cut from its start, and where the start calls a part,
 * that part's start cut the same way (a new part, the old one staying as it
 * is for its other callers). Integers are not told apart by their first
 * byte: "integer" without "number" keeps the product. */
#include <stdlib.h>
#include <string.h>

#include "util/memacct.h"
#include "fsm/internal/dfa_internal.h"
#include "fsm/internal/schema_internal.h"

/* Calls read at one start (beyond: the product path). */
#define FILTER_CALLS 64
/* Calls at a start that call parts whose starts call parts... */
#define FILTER_DEPTH 4

typedef struct {
    uint32_t id;  /* the callee's marker id */
    int32_t ret;  /* the state the call returns to */
} start_call_t;

static bool value_first(unsigned b) {
    return b == '{' || b == '[' || b == '"' || b == 't' || b == 'f' || b == 'n' || b == '-' || (b >= '0' && b <= '9');
}

/* The bytes a JSON text of a type in mask starts with (no T_INTEGER
 * without T_NUMBER: integers are not told by their first byte). */
static void type_first_bytes(int mask, bool allowed[256]) {
    memset(allowed, 0, 256 * sizeof *allowed);
    if (mask & T_OBJECT) allowed['{'] = true;
    if (mask & T_ARRAY) allowed['['] = true;
    if (mask & T_STRING) allowed['"'] = true;
    if (mask & T_BOOL) allowed['t'] = allowed['f'] = true;
    if (mask & T_NULL) allowed['n'] = true;
    if (mask & T_NUMBER) {
        allowed['-'] = true;
        for (unsigned b = '0'; b <= '9'; b++) allowed[b] = true;
    }
}

/* The marker paths from state s on (SV_CALL_DIGITS - level digits to go):
 * appends (id, return state) to m; -1 past cap. */
static int digit_paths(const sv_dfa_t *d, int32_t s, int level, uint32_t id, start_call_t *m, int n, int cap) {
    if (level == SV_CALL_DIGITS) {
        if (n >= cap) return -1;
        m[n++] = (start_call_t){id, s};
        return n;
    }
    for (unsigned k = 0; k < 10 && n >= 0; k++) {
        int32_t t = d->trans[(size_t)s * d->nclasses + d->classes[SV_CALL_DIGIT0 + k]];
        if (t >= 0) n = digit_paths(d, t, level + 1, id * 10 + k, m, n, cap);
    }
    return n;
}

static sv_status unsupported(sctx_t *c, const char *why) {
    /* the retry without calls takes the product path */
    c->calls_conflict = true;
    return sv_sc_fail(c, SV_ERR_UNSUPPORTED, "type", "the type beside this union %s (compiled again without calls)",
                      why);
}

/* The raw DFA of d with a new start: start's byte edges on allowed bytes,
 * and a call to ids[i] returning to calls[i].ret for each kept call. */
static sv_status rebuild(sctx_t *c, const sv_dfa_t *d, const bool allowed[256], const start_call_t *calls,
                         const uint32_t *ids, int ncalls, sv_dfa_t **out) {
    /* Classes: d's, split by allowed, and each marker byte its own (the
     * new start spells ids d's table may not). */
    int32_t key_class[2 * 256 + 256];
    for (size_t i = 0; i < sizeof key_class / sizeof *key_class; i++) key_class[i] = -1;
    sv_rawdfa_t raw = {0};
    uint8_t rep[256];
    uint32_t k2 = 0;
    for (unsigned b = 0; b < 256; b++) {
        unsigned key = b >= SV_CALL_DIGIT0 ? 512 + b : 2u * d->classes[b] + allowed[b];
        if (key_class[key] < 0) key_class[key] = (int32_t)k2, rep[k2++] = (uint8_t)b;
        raw.classes[b] = (uint8_t)key_class[key];
    }
    uint32_t n = d->nstates, S = n, rows = n + 1 + (uint32_t)ncalls * (1 + SV_CALL_DIGITS);
    raw.nstates = rows;
    raw.nclasses = k2;
    size_t bytes = (size_t)rows * k2 * sizeof *raw.trans + rows;
    sv_error_t e;
    sv_error_clear(&e);
    if (!sv_memacct_fits(bytes, sv_sc_lim(c)->max_memory) ||
        sv_dfa_minimize_budget(&raw, bytes, sv_sc_lim(c), &e))
        return sv_sc_fail(c, SV_ERR_BUDGET, "type", "cutting a union to its type needs more than what is left of the "
                          "compile's memory budget of %zu bytes", sv_sc_lim(c)->max_memory);
    raw.trans = malloc(bytes - rows);
    raw.accept = calloc(rows, 1);
    if (!raw.trans || !raw.accept) {
        free(raw.trans);
        free(raw.accept);
        return sv_sc_nomem(c);
    }
    for (size_t i = 0; i < (size_t)rows * k2; i++) raw.trans[i] = SV_DFA_DEAD;
    for (uint32_t s = 0; s < n; s++) {
        const int32_t *row = d->trans + (size_t)s * d->nclasses;
        for (uint32_t j = 0; j < k2; j++) raw.trans[(size_t)s * k2 + j] = row[d->classes[rep[j]]];
        raw.accept[s] = d->accept[s];
    }
    const int32_t *row0 = d->trans + (size_t)sv_dfa_start(d) * d->nclasses;
    for (uint32_t j = 0; j < k2; j++)
        if (rep[j] < SV_CALL_DIGIT0 && allowed[rep[j]]) raw.trans[(size_t)S * k2 + j] = row0[d->classes[rep[j]]];
    /* The kept calls: a trie of marker paths from the new start. */
    uint32_t next = n + 1;
    sv_status st = SV_OK;
    for (int i = 0; i < ncalls && !st; i++) {
        uint8_t path[1 + SV_CALL_DIGITS];
        path[0] = SV_CALL_MARK;
        sv_call_digits(ids[i], path + 1);
        uint32_t at = S;
        for (int l = 0; l <= SV_CALL_DIGITS; l++) {
            int32_t *cell = &raw.trans[(size_t)at * k2 + raw.classes[path[l]]];
            if (l == SV_CALL_DIGITS) {
                /* one callee, two returns: not a DFA */
                if (*cell >= 0 && *cell != calls[i].ret) st = unsupported(c, "calls one part at two places");
                else *cell = calls[i].ret;
            } else {
                if (*cell < 0) *cell = (int32_t)next++;
                at = (uint32_t)*cell;
            }
        }
    }
    raw.start = (int32_t)S;
    raw.nstates = next;
    sv_error_clear(&e);
    if (!st && (st = sv_dfa_minimize(&raw, out, &e))) st = sv_sc_fail(c, st, "type", "%s", e.message);
    sv_rawdfa_free(&raw);
    if (!st && !sv_arena_defer(c->arena, (sv_arena_cleanup_fn)sv_dfa_destroy, *out)) return sv_sc_nomem(c); /* destroyed */
    return st;
}

static sv_status resolve_typed(sctx_t *c, uint32_t k);

/* The entry of (part src, type mask) in c->typed, or a new one (state 1,
 * id 0): its index, or -1 out of memory. */
static int32_t typed_entry(sctx_t *c, uint32_t src, int mask, bool *found) {
    for (uint32_t k = 0; k < c->ntyped; k++)
        if (c->typed[k].src == src && c->typed[k].mask == mask) {
            *found = true;
            return (int32_t)k;
        }
    *found = false;
    if (c->ntyped == c->captyped) {
        uint32_t cap = c->captyped ? 2 * c->captyped : 8;
        struct sv_typed_part *v = sv_arena_alloc(c->arena, cap * sizeof *v);
        if (!v) return -1;
        if (c->ntyped) memcpy(v, c->typed, c->ntyped * sizeof *v);
        c->typed = v;
        c->captyped = cap;
    }
    c->typed[c->ntyped] = (struct sv_typed_part){0, src, mask, 1, false};
    return (int32_t)c->ntyped++;
}

/* *out: the strings of d whose first byte the type allows; d itself when
 * that is all of them, NULL when none is. The parts d's start calls are
 * cut once each (c->typed); one still open gets an id now and its cut at
 * the end (taken as not empty until then). */
static sv_status filter(sctx_t *c, const sv_dfa_t *d, int mask, int depth, const sv_dfa_t **out) {
    bool allowed[256];
    type_first_bytes(mask, allowed);
    int32_t s0 = sv_dfa_start(d);
    if (d->accept[s0]) return unsupported(c, "meets the empty string");
    const int32_t *row0 = d->trans + (size_t)s0 * d->nclasses;
    bool kept = false, cut = false;
    for (unsigned b = 0; b < SV_CALL_DIGIT0; b++) {
        if (row0[d->classes[b]] < 0) continue;
        if (!value_first(b)) return unsupported(c, "meets a string that is no JSON text");
        if (allowed[b]) kept = true;
        else cut = true;
    }
    for (unsigned b = SV_CALL_DIGIT0; b < SV_CALL_MARK; b++)
        if (row0[d->classes[b]] >= 0) return unsupported(c, "meets a string that is no JSON text");
    start_call_t calls[FILTER_CALLS];
    uint32_t ids[FILTER_CALLS];
    int ncalls = 0;
    int32_t m = row0[d->classes[SV_CALL_MARK]];
    if (m >= 0 && (ncalls = digit_paths(d, m, 0, 0, calls, 0, FILTER_CALLS)) < 0)
        return unsupported(c, "meets a union of more calls than it reads");
    int nkept = 0;
    for (int i = 0; i < ncalls; i++) {
        sv_status st;
        uint32_t p = calls[i].id;
        bool found;
        int32_t k = typed_entry(c, p, mask, &found);
        if (k < 0) return sv_sc_nomem(c);
        if (found && c->typed[k].state == 0 && c->typed_final && (st = resolve_typed(c, (uint32_t)k))) return st;
        if (found && c->typed[k].state == 1) return unsupported(c, "calls a part whose start calls itself");
        if (!found) {
            const sv_dfa_t *callee = sv_sc_part_dfa(c, p), *f;
            if (!callee && c->typed_final) {
                /* a part cut to a type itself, not filled yet */
                for (uint32_t j = 0; j < c->ntyped && !callee; j++)
                    if (c->typed[j].reserved && c->typed[j].id == p) {
                        if ((st = resolve_typed(c, j))) return st;
                        callee = sv_sc_part_dfa(c, p);
                    }
                if (!callee) return unsupported(c, "calls a part that never compiled");
            }
            if (!callee) {
                /* still open: an id now, the cut once it is compiled */
                uint32_t id;
                if ((st = sv_sc_part_id(c, NULL, &id))) return st;
                c->typed[k].id = id;
                c->typed[k].reserved = true;
                c->typed[k].state = 0;
            } else {
                if (depth == FILTER_DEPTH) return unsupported(c, "calls parts nested too deep at its start");
                if ((st = filter(c, callee, mask, depth + 1, &f))) return st;
                uint32_t id = 0;
                if (f == callee) id = p;
                else if (f && (st = sv_sc_part_id(c, (sv_dfa_t *)f, &id))) return st;
                c->typed[k].id = id;
                c->typed[k].state = 2;
            }
        }
        uint32_t id = c->typed[k].id;
        if (!id) {
            cut = true;
            continue;
        }
        kept = true;
        cut |= id != p;
        calls[nkept].ret = calls[i].ret;
        ids[nkept++] = id;
    }
    if (!kept) {
        *out = NULL;
        return SV_OK;
    }
    if (!cut) {
        *out = d;
        return SV_OK;
    }
    sv_dfa_t *r;
    sv_status st = rebuild(c, d, allowed, calls, ids, nkept, &r);
    if (st) return st;
    *out = r;
    return SV_OK;
}

/* Fills the reserved entry k: its source's cut, now that it is compiled. */
static sv_status resolve_typed(sctx_t *c, uint32_t k) {
    if (c->typed[k].state == 2) return SV_OK;
    if (c->typed[k].state == 1) return unsupported(c, "calls a part whose start calls itself");
    c->typed[k].state = 1;
    uint32_t src = c->typed[k].src;
    const sv_dfa_t *d = sv_sc_part_dfa(c, src), *f;
    for (uint32_t j = 0; !d && j < c->ntyped; j++) {
        sv_status st = c->typed[j].reserved && c->typed[j].id == src ? resolve_typed(c, j) : SV_OK;
        if (st) return st;
        d = sv_sc_part_dfa(c, src);
    }
    if (!d) return unsupported(c, "calls a part that never compiled");
    sv_status st = filter(c, d, c->typed[k].mask, 0, &f);
    if (st) return st;
    if (!f) return unsupported(c, "calls a part none of whose values has the type");
    c->parts[c->typed[k].id - SV_SCHEMA_PART_FIRST] = (sv_dfa_t *)f;
    c->typed[k].state = 2;
    return SV_OK;
}

sv_status sv_sc_type_filter_finish(sctx_t *c) {
    c->typed_final = true;
    sv_status st = SV_OK;
    /* (a cut made here reserves nothing: every part is compiled by now) */
    for (uint32_t k = 0; k < c->ntyped && !st; k++)
        if (c->typed[k].reserved) st = resolve_typed(c, k);
    c->typed_final = false;
    return st;
}

sv_status sv_sc_type_filter(sctx_t *c, sv_ast_t *a, int mask, sv_ast_t **out) {
    sv_dfa_t *d;
    sv_status st = sv_sc_to_dfa(c, a, &d);
    if (st) return st;
    const sv_dfa_t *f = NULL;
    if (d && (st = filter(c, d, mask, 0, &f))) return st;
    if (!f) return sv_sc_fail(c, SV_ERR_EMPTY, "type", "no branch of the union here has the type beside it");
    *out = f == d ? a : sv_ast_dfa(c->arena, f, false);
    return *out ? SV_OK : sv_sc_nomem(c);
}
