/* grammar.c — a grammar's rules to a program of parts (grammar.h says what
 * is accepted).
 *
 * Parse. A front end (fsm/grammar_gbnf.c, fsm/grammar_lark.c) reads the
 * text into rules whose bodies are small trees (fsm/internal/
 * grammar_internal.h): leaves are AST nodes, rule references are indices.
 *
 * Analyse. Over the rules reachable from the start rule: which derive some
 * string (productive), which derive the empty one (nullable), which are
 * recursive (in a cycle of references: Tarjan's strongly connected
 * components) and which are left-recursive (in a cycle of references that
 * can be reached before reading a byte, refused: a part would call itself
 * at its start).
 *
 * Lower. A rule that is not recursive is inlined (its AST built once and
 * shared). A recursive one becomes a part: its body's AST, with the empty
 * string taken out when the rule is nullable (a called part must read a
 * byte; its uses are then "the empty string or a call"), and every use of it
 * a call marker (fsm/program.c). Parts are compiled when the linker first
 * asks for them, and sv_program_link makes one program of root and them; it
 * also checks that every call is decided by the next byte, and refuses the
 * grammar when not. */
#include "grammar.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/hash.h"
#include "util/memacct.h"
#include "util/utf8.h"
#include "fsm/internal/dfa_internal.h"
#include "fsm/internal/grammar_internal.h"

/* ---- shared with the front ends ----------------------------------------------- */

sv_status gp_fail(gp_t *p, sv_status code, size_t off, const char *fmt, ...) {
    uint32_t line = 1, col = 1;
    for (size_t i = 0; i < off && i < p->n; i++) {
        if (p->s[i] == '\n') line++, col = 1;
        else if (((uint8_t)p->s[i] & 0xC0) != 0x80) col++;
    }
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sv_error_set(p->err, code, (long)off, "line %u, column %u: %s", line, col, msg);
}

sv_status gp_nomem(gp_t *p) { return sv_error_set(p->err, SV_ERR_NOMEM, -1, "out of memory"); }


uint32_t gp_rule_of(gp_t *p, const char *s, uint32_t len, size_t off) {
    if (p->htcap == 0 || 2 * (p->nrules + 1) > p->htcap) {
        uint32_t cap = p->htcap ? 2 * p->htcap : 64;
        uint32_t *ht = calloc(cap, sizeof *ht);
        if (!ht) return gp_nomem(p), UINT32_MAX;
        for (uint32_t i = 0; i < p->nrules; i++) {
            uint32_t h = (uint32_t)sv_hash_bytes(p->rules[i].name, p->rules[i].len) & (cap - 1);
            while (ht[h]) h = (h + 1) & (cap - 1);
            ht[h] = i + 1;
        }
        free(p->ht);
        p->ht = ht;
        p->htcap = cap;
    }
    uint32_t h = (uint32_t)sv_hash_bytes(s, len) & (p->htcap - 1);
    for (; p->ht[h]; h = (h + 1) & (p->htcap - 1)) {
        rule_t *r = &p->rules[p->ht[h] - 1];
        if (r->len == len && memcmp(r->name, s, len) == 0) return p->ht[h] - 1;
    }
    if (p->nrules == SV_GRAMMAR_MAX_RULES)
        return gp_fail(p, SV_ERR_BUDGET, off, "the grammar has more than %u rules", SV_GRAMMAR_MAX_RULES), UINT32_MAX;
    if (p->nrules == p->cap) {
        uint32_t cap = p->cap ? 2 * p->cap : 32;
        rule_t *r = realloc(p->rules, cap * sizeof *r);
        if (!r) return gp_nomem(p), UINT32_MAX;
        p->rules = r;
        p->cap = cap;
    }
    p->rules[p->nrules] = (rule_t){.name = s, .len = len, .use_off = off};
    p->ht[h] = p->nrules + 1;
    return p->nrules++;
}

gnode_t *gp_node(gp_t *p, gkind kind, size_t off) {
    gnode_t *g = sv_arena_alloc(p->a, sizeof *g);
    if (!g) return gp_nomem(p), NULL;
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->off = off;
    return g;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

sv_status gp_char(gp_t *p, uint32_t *cp, char *escape) {
    size_t at = p->pos;
    *escape = 0;
    if (p->pos >= p->n) return gp_fail(p, SV_ERR_SYNTAX, at, "unexpected end of the grammar");
    const uint8_t *u = (const uint8_t *)p->s + p->pos;
    if (u[0] != '\\') {
        int k = sv_utf8_decode(u, p->n - p->pos, cp);
        if (k == 0) return gp_fail(p, SV_ERR_SYNTAX, at, "invalid UTF-8");
        if (*cp == 0) return gp_fail(p, SV_ERR_SYNTAX, at, "a NUL byte (write \\x00)");
        p->pos += (size_t)k;
        return SV_OK;
    }
    if (p->pos + 1 >= p->n) return gp_fail(p, SV_ERR_SYNTAX, at, "unexpected end of the grammar after '\\'");
    char e = p->s[p->pos + 1];
    if (e == 0) return gp_fail(p, SV_ERR_SYNTAX, at + 1, "a NUL byte (write \\x00)");
    p->pos += 2;
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (!digits) {
        *escape = e;
        return SV_OK;
    }
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = p->pos < p->n ? hexval(p->s[p->pos]) : -1;
        if (h < 0) return gp_fail(p, SV_ERR_SYNTAX, at, "\\%c needs %d hex digits", e, digits);
        v = v * 16 + (uint32_t)h;
        p->pos++;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return gp_fail(p, SV_ERR_SYNTAX, at, "\\%c%0*X is not a Unicode scalar value", e, digits, v);
    *cp = v;
    return SV_OK;
}

sv_status gp_uint(gp_t *p, uint32_t *v) {
    size_t at = p->pos;
    uint64_t x = 0;
    if (p->pos >= p->n || p->s[p->pos] < '0' || p->s[p->pos] > '9')
        return gp_fail(p, SV_ERR_SYNTAX, at, "expecting a number");
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        x = x * 10 + (uint64_t)(p->s[p->pos++] - '0');
        if (x > SV_GRAMMAR_MAX_REPEAT)
            return gp_fail(p, SV_ERR_BUDGET, at, "a repetition bound above %u", SV_GRAMMAR_MAX_REPEAT);
    }
    *v = (uint32_t)x;
    return SV_OK;
}

gnode_t *gp_list(gp_t *p, gkind kind, gnode_t **kids, uint32_t n, size_t off) {
    if (n == 1) return kids[0];
    gnode_t *g = gp_node(p, kind, off);
    if (!g) return NULL;
    if (n && !(g->kids = sv_arena_alloc(p->a, n * sizeof *g->kids))) return gp_nomem(p), NULL;
    if (n) memcpy(g->kids, kids, n * sizeof *kids);
    g->n = n;
    return g;
}

/* The budgets for the next automaton a compile builds: p->lim, with only
 * the time left of the whole compile's budget, so that many rules, parts
 * or rounds (absorb_returns) cannot each take all of it. */
static const sv_fsm_limits_t *gp_lim(gp_t *p) {
    p->lim_now = *p->lim;
    uint64_t end = p->deadline_ns;
    if (p->absorb_end_ns && (!end || p->absorb_end_ns < end)) end = p->absorb_end_ns;
    if (end) {
        uint64_t now = sv_now_ns();
        p->lim_now.max_time_us = now >= end ? 1 : (end - now) / 1000 + 1;
        p->lim_now.time_budget_us = p->lim->time_budget_us ? p->lim->time_budget_us : p->lim->max_time_us;
    }
    return &p->lim_now;
}


/* ---- analysis ----------------------------------------------------------------- */

static bool ast_nullable(const sv_ast_t *x);

/* Whether g derives some string (what PRODUCTIVE) or the empty one
 * (NULLABLE), from the rules' current values: the same fixed point over
 * two properties of a leaf. */
typedef enum { PRODUCTIVE, NULLABLE } gprop;

static bool g_has(const gp_t *p, const gnode_t *g, gprop what) {
    switch (g->kind) {
    case G_LEAF: return what == PRODUCTIVE ? g->leaf->kind != SV_AST_NONE : ast_nullable(g->leaf);
    case G_REF: return what == PRODUCTIVE ? p->rules[g->rule].productive : p->rules[g->rule].nullable;
    case G_SEQ:
        for (uint32_t i = 0; i < g->n; i++)
            if (!g_has(p, g->kids[i], what)) return false;
        return true;
    case G_ALT:
        for (uint32_t i = 0; i < g->n; i++)
            if (g_has(p, g->kids[i], what)) return true;
        return false;
    case G_REP: return g->min == 0 || g_has(p, g->kids[0], what);
    }
    return false;
}

static bool g_productive(const gp_t *p, const gnode_t *g) { return g_has(p, g, PRODUCTIVE); }
static bool g_nullable(const gp_t *p, const gnode_t *g) { return g_has(p, g, NULLABLE); }

/* Adjacency lists of rules: all references (left false), or the ones that
 * can come before any byte is read (left true). */
typedef struct {
    uint32_t *to;
    uint32_t n, cap;
} adj_t;

static sv_status adj_add(gp_t *p, adj_t *a, uint32_t r) {
    if (a->n == a->cap) {
        uint32_t cap = a->cap ? 2 * a->cap : 8;
        uint32_t *t = realloc(a->to, cap * sizeof *t);
        if (!t) return gp_nomem(p);
        a->to = t;
        a->cap = cap;
    }
    a->to[a->n++] = r;
    return SV_OK;
}

/* Adds g's references to a (with left, only those that may come before
 * any byte is read). */
static sv_status refs(gp_t *p, const gnode_t *g, bool left, adj_t *a) {
    sv_status st = SV_OK;
    switch (g->kind) {
    case G_LEAF: break;
    case G_REF: st = p->rules[g->rule].productive ? adj_add(p, a, g->rule) : SV_OK; break;
    case G_SEQ:
        for (uint32_t i = 0; i < g->n && !st; i++) {
            if (!g_productive(p, g->kids[i])) break; /* the sequence is dead from here */
            st = refs(p, g->kids[i], left, a);
            if (left && !g_nullable(p, g->kids[i])) break;
        }
        break;
    case G_ALT:
        for (uint32_t i = 0; i < g->n && !st; i++) st = refs(p, g->kids[i], left, a);
        break;
    case G_REP:
        if (g->max > 0) st = refs(p, g->kids[0], left, a);
        break;
    }
    return st;
}

typedef struct {
    adj_t *adj;
    uint32_t *index, *low, *stack, *comp;
    bool *on;
    uint32_t next, sp, ncomp;
} tarjan_t;

static void strong(tarjan_t *t, uint32_t v) {
    t->index[v] = t->low[v] = ++t->next;
    t->stack[t->sp++] = v;
    t->on[v] = true;
    for (uint32_t i = 0; i < t->adj[v].n; i++) {
        uint32_t w = t->adj[v].to[i];
        if (!t->index[w]) {
            strong(t, w);
            if (t->low[w] < t->low[v]) t->low[v] = t->low[w];
        } else if (t->on[w] && t->index[w] < t->low[v]) {
            t->low[v] = t->index[w];
        }
    }
    if (t->low[v] == t->index[v]) {
        uint32_t w;
        do {
            w = t->stack[--t->sp];
            t->on[w] = false;
            t->comp[w] = t->ncomp;
        } while (w != v);
        t->ncomp++;
    }
}

/* cyclic[r]: r lies on a cycle of adj (a component of two or more, or an
 * edge to itself). */
static sv_status cycles(gp_t *p, adj_t *adj, bool *cyclic) {
    uint32_t n = p->nrules;
    tarjan_t t = {.adj = adj};
    t.index = calloc(n, sizeof *t.index);
    t.low = calloc(n, sizeof *t.low);
    t.stack = calloc(n, sizeof *t.stack);
    t.comp = calloc(n, sizeof *t.comp);
    t.on = calloc(n, sizeof *t.on);
    uint32_t *size = calloc(n, sizeof *size);
    sv_status st = SV_OK;
    if (!t.index || !t.low || !t.stack || !t.comp || !t.on || !size) {
        st = gp_nomem(p);
    } else {
        for (uint32_t r = 0; r < n; r++)
            if (p->rules[r].reachable && !t.index[r]) strong(&t, r);
        for (uint32_t r = 0; r < n; r++)
            if (p->rules[r].reachable) size[t.comp[r]]++;
        for (uint32_t r = 0; r < n; r++) {
            cyclic[r] = p->rules[r].reachable && size[t.comp[r]] > 1;
            for (uint32_t i = 0; i < adj[r].n && !cyclic[r]; i++) cyclic[r] = adj[r].to[i] == r;
        }
    }
    free(t.index);
    free(t.low);
    free(t.stack);
    free(t.comp);
    free(t.on);
    free(size);
    return st;
}

static void mark_reachable(gp_t *p, const gnode_t *g) {
    switch (g->kind) {
    case G_LEAF: break;
    case G_REF: {
        rule_t *r = &p->rules[g->rule];
        if (!r->reachable) {
            r->reachable = true;
            mark_reachable(p, r->body);
        }
        break;
    }
    default:
        for (uint32_t i = 0; i < g->n; i++) mark_reachable(p, g->kids[i]);
    }
}

static sv_status analyse(gp_t *p, uint32_t root) {
    for (uint32_t r = 0; r < p->nrules; r++)
        if (!p->rules[r].body)
            return gp_fail(p, SV_ERR_SYNTAX, p->rules[r].use_off, "rule '%.*s' is not defined", (int)p->rules[r].len,
                        p->rules[r].name);
    p->rules[root].reachable = true;
    mark_reachable(p, p->rules[root].body);
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < p->nrules; r++) {
            rule_t *x = &p->rules[r];
            if (!x->reachable) continue;
            if (!x->productive && g_productive(p, x->body)) x->productive = changed = true;
            if (!x->nullable && g_nullable(p, x->body)) x->nullable = changed = true;
        }
    }
    if (!p->rules[root].productive)
        return sv_error_set(p->err, SV_ERR_EMPTY, -1, "the grammar matches no string (root never finishes)");
    adj_t *all = calloc(p->nrules, sizeof *all), *left = calloc(p->nrules, sizeof *left);
    bool *rec = calloc(p->nrules, sizeof *rec), *lrec = calloc(p->nrules, sizeof *lrec);
    sv_status st = all && left && rec && lrec ? SV_OK : gp_nomem(p);
    for (uint32_t r = 0; r < p->nrules && !st; r++) {
        if (!p->rules[r].reachable || !p->rules[r].productive) continue;
        st = refs(p, p->rules[r].body, false, &all[r]);
        if (!st) st = refs(p, p->rules[r].body, true, &left[r]);
    }
    if (!st) st = cycles(p, all, rec);
    if (!st) st = cycles(p, left, lrec);
    for (uint32_t r = 0; r < p->nrules && !st; r++) {
        rule_t *x = &p->rules[r];
        if (lrec[r])
            st = gp_fail(p, SV_ERR_UNSUPPORTED, x->def_off,
                      "rule '%.*s' is left-recursive (it can reach itself before reading a character); rewrite it "
                      "with a repetition, e.g. `expr ::= term (\"+\" term)*`",
                      (int)x->len, x->name);
        x->recursive = rec[r] && x->productive;
    }
    for (uint32_t r = 0; r < p->nrules && all && left; r++) {
        free(all[r].to);
        free(left[r].to);
    }
    free(all);
    free(left);
    free(rec);
    free(lrec);
    return st;
}

/* ---- lowering ----------------------------------------------------------------- */

static bool ast_nullable(const sv_ast_t *x) {
    switch (x->kind) {
    case SV_AST_EMPTY: return true;
    case SV_AST_CAT:
        for (uint32_t i = 0; i < x->nkids; i++)
            if (!ast_nullable(x->kids[i])) return false;
        return true;
    case SV_AST_ALT:
        for (uint32_t i = 0; i < x->nkids; i++)
            if (ast_nullable(x->kids[i])) return true;
        return false;
    case SV_AST_REPEAT: return x->min == 0 || ast_nullable(x->kids[0]);
    default: return false;
    }
}

/* x without the empty string (exact): in a sequence, the first factor that
 * reads something is that factor without the empty string, and all before
 * it are empty; a repetition's first non-empty round likewise. */
static sv_ast_t *ast_nonempty(sv_arena_t *a, sv_ast_t *x) {
    switch (x->kind) {
    case SV_AST_EMPTY:
    case SV_AST_NONE: return sv_ast_none(a);
    case SV_AST_ALT: {
        sv_ast_t **k = sv_arena_alloc(a, x->nkids * sizeof *k);
        if (!k) return NULL;
        for (uint32_t i = 0; i < x->nkids; i++)
            if (!(k[i] = ast_nonempty(a, x->kids[i]))) return NULL;
        return sv_ast_alt(a, k, x->nkids);
    }
    case SV_AST_CAT: {
        sv_ast_t **alts = sv_arena_alloc(a, x->nkids * sizeof *alts);
        if (!alts) return NULL;
        uint32_t n = 0;
        for (uint32_t i = 0; i < x->nkids; i++) {
            sv_ast_t *first = ast_nonempty(a, x->kids[i]);
            if (!first) return NULL;
            if (i + 1 < x->nkids) {
                sv_ast_t *pair[2] = {first, sv_ast_cat(a, x->kids + i + 1, x->nkids - i - 1)};
                first = sv_ast_cat(a, pair, 2);
                if (!first) return NULL;
            }
            alts[n++] = first;
            if (!ast_nullable(x->kids[i])) break;
        }
        return sv_ast_alt(a, alts, n);
    }
    case SV_AST_REPEAT: {
        if (x->max == 0) return sv_ast_none(a);
        sv_ast_t *kid = x->kids[0];
        uint32_t min = ast_nullable(kid) || x->min == 0 ? 0 : x->min - 1;
        uint32_t max = x->max == SV_AST_INF ? SV_AST_INF : x->max - 1;
        sv_ast_t *pair[2] = {ast_nonempty(a, kid), sv_ast_repeat(a, kid, min, max)};
        return sv_ast_cat(a, pair, 2);
    }
    default: return x; /* a class, bytes (a call marker): never empty */
    }
}

static sv_ast_t *lower(gp_t *p, const gnode_t *g);

/* A use of rule r. */
/* Whether g, lowered, holds no call: every rule it uses is not recursive
 * and holds none. */
static bool g_plain(gp_t *p, const gnode_t *g) {
    switch (g->kind) {
    case G_LEAF: return true;
    case G_REF: {
        rule_t *x = &p->rules[g->rule];
        if (x->shared) return false; /* its use is a call */
        if (!x->plain) x->plain = x->recursive || !x->productive ? (x->recursive ? 2 : 1) : g_plain(p, x->body) ? 1 : 2;
        return x->plain == 1;
    }
    default:
        for (uint32_t i = 0; i < g->n; i++)
            if (!g_plain(p, g->kids[i])) return false;
        return true;
    }
}

/* The AST weight (fsm/ast.h) from which a rule without calls is compiled
 * once into a minimal DFA that its uses embed: its uses then cost their
 * users' determinization that DFA's states, not its NFA's, and its classes
 * are split into UTF-8 sequences once, not at every use. */
#define EMBED_WEIGHT 24u

static sv_ast_t *use_rule(gp_t *p, uint32_t r) {
    rule_t *x = &p->rules[r];
    if (!x->productive) return sv_ast_none(p->a);
    if (!x->recursive && !x->shared) {
        if (x->dfa) return sv_ast_dfa(p->a, x->dfa, false);
        if (!x->ast) x->ast = lower(p, x->body);
        if (x->ast && sv_ast_weight(x->ast, EMBED_WEIGHT) >= EMBED_WEIGHT && g_plain(p, x->body)) {
            sv_error_t e;
            sv_error_clear(&e);
            if (sv_dfa_from_ast(x->ast, gp_lim(p), &x->dfa, &e) == SV_OK) return sv_ast_dfa(p->a, x->dfa, false);
            x->dfa = NULL; /* an error shows again, with its context, where the whole is compiled */
        }
        return x->ast;
    }
    sv_ast_t *m = sv_call_marker(p->a, x->part);
    if (!m || !x->nullable) return m;
    sv_ast_t *k[2] = {sv_ast_empty(p->a), m};
    return sv_ast_alt(p->a, k, 2);
}

static sv_ast_t *lower(gp_t *p, const gnode_t *g) {
    switch (g->kind) {
    case G_LEAF: return g->leaf;
    case G_REF: return use_rule(p, g->rule);
    case G_REP: return sv_ast_repeat(p->a, lower(p, g->kids[0]), g->min, g->max);
    case G_SEQ:
    case G_ALT: {
        if (g->n == 0) return sv_ast_empty(p->a);
        sv_ast_t **k = sv_arena_alloc(p->a, g->n * sizeof *k);
        if (!k) return NULL;
        for (uint32_t i = 0; i < g->n; i++)
            if (!(k[i] = lower(p, g->kids[i]))) return NULL;
        return g->kind == G_SEQ ? sv_ast_cat(p->a, k, g->n) : sv_ast_alt(p->a, k, g->n);
    }
    }
    return NULL;
}

/* The linker's resolver: part id's DFA, compiled the first time. */
static const sv_dfa_t *resolve(void *ctx, uint32_t id, sv_error_t *err) {
    gp_t *p = ctx;
    if (id <= p->id_base || id > p->id_base + p->nparts) {
        sv_error_set(err, SV_ERR_INTERNAL, -1, "internal: call marker %u names no rule", id);
        return NULL;
    }
    rule_t *x = &p->rules[p->part_rule[id - p->id_base]];
    if (x->dfa) return x->dfa;
    if (!x->ast) {
        sv_ast_t *body = lower(p, x->body);
        x->ast = body && x->nullable ? ast_nonempty(p->a, body) : body;
        if (!x->ast) {
            sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
            return NULL;
        }
    }
    sv_error_t e;
    sv_error_clear(&e);
    sv_status st = sv_dfa_from_ast(x->ast, gp_lim(p), &x->dfa, &e);
    if (st) {
        sv_error_set(err, st, -1, "rule '%.*s': %s", (int)x->len, x->name, e.message);
        return NULL;
    }
    return x->dfa;
}

/* ---- returns absorbed by their callers' continuations ------------------------- */

/* The linker refuses a part that may go on, at a final state, with a byte
 * its caller may read after the call returns (arithmetic.gbnf: a term ends
 * in `ws`, which may take the newline `root` reads after it). Where a call
 * site `A rest` is such a conflict, the site becomes a call of a new rule
 * A' ::= (A's body) rest: the same strings, but the bytes that were a
 * return or a move are now one determinized automaton, which tells them
 * apart by what comes after. A' is recursive only when rest or A's body
 * leads back to the caller; otherwise it is inlined like any rule. */

typedef struct {
    uint64_t b[4];
} bset_t;

static void bset_range(bset_t *s, uint32_t lo, uint32_t hi) {
    for (uint32_t c = lo; c <= hi && c < 256; c++) s->b[c >> 6] |= 1ull << (c & 63);
}

static bool bset_meets(const bset_t *x, const bset_t *y) {
    for (int i = 0; i < 4; i++)
        if (x->b[i] & y->b[i]) return true;
    return false;
}

/* The first byte of a code point's UTF-8 encoding (monotonic in cp). */
static uint32_t utf8_lead(uint32_t cp) {
    if (cp < 0x80) return cp;
    if (cp < 0x800) return 0xC0 | (cp >> 6);
    if (cp < 0x10000) return 0xE0 | (cp >> 12);
    return 0xF0 | (cp >> 18);
}

/* Adds the bytes a string of x may start with to s (a superset where
 * exactness would cost more than it saves: a call may start with anything);
 * returns whether x derives the empty string. */
static bool ast_first(const sv_ast_t *x, bset_t *s) {
    switch (x->kind) {
    case SV_AST_NONE: return false;
    case SV_AST_EMPTY:
    case SV_AST_BOL:
    case SV_AST_EOL: return true;
    case SV_AST_CLASS:
        for (uint32_t i = 0; i < x->nranges; i++) bset_range(s, utf8_lead(x->ranges[i].lo), utf8_lead(x->ranges[i].hi));
        return false;
    case SV_AST_BYTES: bset_range(s, x->lo, x->hi); return false;
    case SV_AST_CAT:
        for (uint32_t i = 0; i < x->nkids; i++)
            if (!ast_first(x->kids[i], s)) return false;
        return true;
    case SV_AST_ALT: {
        bool e = false;
        for (uint32_t i = 0; i < x->nkids; i++) e |= ast_first(x->kids[i], s);
        return e;
    }
    case SV_AST_REPEAT: return (x->max > 0 && ast_first(x->kids[0], s)) || x->min == 0;
    case SV_AST_DFA:
        for (uint32_t c = 0; c < 256; c++)
            if (sv_dfa_next(x->dfa, 0, (uint8_t)c) != SV_DFA_DEAD) bset_range(s, c, c);
        return sv_dfa_is_accepting(x->dfa, 0);
    case SV_AST_GRAPH: bset_range(s, 0, 255); return true;
    }
    return true;
}

/* The same for a tree; depth bounds the rules followed (no left recursion
 * is left, so references end; the bound only caps the work). */
static bool g_first(gp_t *p, const gnode_t *g, bset_t *s, uint32_t depth) {
    switch (g->kind) {
    case G_LEAF: return ast_first(g->leaf, s);
    case G_REF: {
        const rule_t *x = &p->rules[g->rule];
        if (!x->productive) return false;
        if (depth > 64) {
            bset_range(s, 0, 255);
            return x->nullable;
        }
        g_first(p, x->body, s, depth + 1);
        return x->nullable;
    }
    case G_SEQ:
        for (uint32_t i = 0; i < g->n; i++)
            if (!g_first(p, g->kids[i], s, depth)) return false;
        return true;
    case G_ALT: {
        bool e = false;
        for (uint32_t i = 0; i < g->n; i++) e |= g_first(p, g->kids[i], s, depth);
        return e;
    }
    case G_REP: return (g->max > 0 && g_first(p, g->kids[0], s, depth)) || g->min == 0;
    }
    return true;
}

static const sv_dfa_t *resolve(void *ctx, uint32_t id, sv_error_t *err);

/* The bytes with which part rule r may go on from a final state (all of
 * them where it may go on with a call there). */
static sv_status part_goes_on(gp_t *p, uint32_t r, bset_t *s) {
    sv_error_t e;
    sv_error_clear(&e);
    const sv_dfa_t *d = resolve(p, p->rules[r].part, &e);
    if (!d) return sv_error_set(p->err, e.code ? e.code : SV_ERR_INTERNAL, -1, "%s", e.message);
    uint32_t n = sv_dfa_num_states(d);
    for (uint32_t q = 0; q < n; q++) {
        if (!sv_dfa_is_accepting(d, (int32_t)q)) continue;
        for (uint32_t c = 0; c < 256; c++)
            if (sv_dfa_next(d, (int32_t)q, (uint8_t)c) != SV_DFA_DEAD)
                bset_range(s, c == SV_CALL_MARK ? 0 : c, c == SV_CALL_MARK ? 255 : c);
    }
    return SV_OK;
}

/* part_goes_on of every reachable recursive rule, in a new (nrules) array. */
static sv_status all_goes_on(gp_t *p, bset_t **out) {
    uint32_t n = p->nrules;
    bset_t *g = *out = calloc(n ? n : 1, sizeof *g);
    if (!g) return gp_nomem(p);
    sv_status st = SV_OK;
    for (uint32_t r = 0; r < n && !st; r++)
        if (p->rules[r].reachable && p->rules[r].recursive) st = part_goes_on(p, r, &g[r]);
    return st;
}

typedef struct {
    uint32_t rule, to;
    const gnode_t *rest;
} absorb_memo_t;

typedef struct {
    bset_t *goes_on;  /* (nrules) for the recursive rules, this round */
    absorb_memo_t memo[64]; /* the A' made, by (A, rest) */
    uint32_t nmemo;
    uint32_t made;    /* rules added, over all rounds */
    uint32_t changed; /* sequences rewritten this round */
} absorb_t;

/* A new rule named after rule `like` (like'N) whose body is the sequence
 * kids[0..n) (set by the caller when n is 0), and a reference to it in
 * *ref (NULL past the bound on new rules). */
static sv_status new_rule(gp_t *p, absorb_t *ab, uint32_t like, gnode_t **kids, uint32_t n, size_t off,
                          gnode_t **ref) {
    *ref = NULL;
    if (ab->made >= 64) return SV_OK; /* bounded: the linker's refusal stands */
    const rule_t *base = &p->rules[like];
    char *name = sv_arena_alloc(p->a, base->len + 16);
    if (!name) return gp_nomem(p);
    int len = snprintf(name, base->len + 16, "%.*s'%u", (int)base->len, base->name, ++ab->made);
    uint32_t x = gp_rule_of(p, name, (uint32_t)len, off);
    if (x == UINT32_MAX) return p->err->code;
    if (n && !(p->rules[x].body = gp_list(p, G_SEQ, kids, n, off))) return p->err->code;
    p->rules[x].def_off = p->rules[like].def_off;
    if (!(*ref = gp_node(p, G_REF, off))) return p->err->code;
    (*ref)->rule = x;
    return SV_OK;
}

/* Whether g ends, in some derivation, with a call of a recursive rule that
 * may go on with a byte of f: what the linker refuses when f is what comes
 * after g. A rule without calls of its own is looked into. */
static bool tail_conflict(gp_t *p, const absorb_t *ab, const gnode_t *g, const bset_t *f, uint32_t depth) {
    if (depth > 64) return false;
    switch (g->kind) {
    case G_LEAF: return false;
    case G_REF: {
        const rule_t *x = &p->rules[g->rule];
        if (!x->productive) return false;
        if (x->recursive) return bset_meets(f, &ab->goes_on[g->rule]);
        return x->plain != 1 && tail_conflict(p, ab, x->body, f, depth + 1);
    }
    case G_ALT:
        for (uint32_t i = 0; i < g->n; i++)
            if (tail_conflict(p, ab, g->kids[i], f, depth + 1)) return true;
        return false;
    case G_SEQ: {
        bset_t after = *f;
        for (uint32_t i = g->n; i-- > 0;) {
            if (tail_conflict(p, ab, g->kids[i], &after, depth + 1)) return true;
            bset_t first = {{0}};
            if (!g_first(p, g->kids[i], &first, 0)) return false;
            for (int w = 0; w < 4; w++) after.b[w] |= first.b[w];
        }
        return false;
    }
    case G_REP: {
        if (g->max == 0) return false;
        bset_t after = *f;
        if (g->max > 1) g_first(p, g->kids[0], &after, 0);
        return tail_conflict(p, ab, g->kids[0], &after, depth + 1);
    }
    }
    return false;
}

/* The call of a recursive rule that ends an unbounded repetition's body
 * (`(γ A)*`), or NULL. */
static gnode_t *loop_tail(const gp_t *p, const gnode_t *rep) {
    if (rep->kind != G_REP || rep->max != SV_AST_INF) return NULL;
    gnode_t *body = rep->kids[0];
    gnode_t *last = body->kind == G_SEQ && body->n ? body->kids[body->n - 1] : body;
    return last->kind == G_REF && p->rules[last->rule].recursive ? last : NULL;
}

/* g's kids from `from` on, as one node (an empty sequence when none). */
static gnode_t *seq_from(gp_t *p, gnode_t *g, uint32_t from) {
    if (from >= g->n) return gp_node(p, G_SEQ, g->off);
    return gp_list(p, G_SEQ, g->kids + from, g->n - from, g->kids[from]->off);
}

/* The bytes with which g starts other than by a loop: what its automaton's
 * start reads into another state, or by a call (fsm/program.c: a caller that
 * reads a byte by a loop at the return state does not compete with a part
 * that reads it too). All bytes where g does not compile. */
static void hard_first(gp_t *p, const gnode_t *g, bset_t *s) {
    memset(s, 0, sizeof *s);
    sv_ast_t *x = lower(p, g);
    sv_dfa_t *d = NULL;
    sv_error_t e;
    sv_error_clear(&e);
    if (!x || sv_dfa_from_ast(x, gp_lim(p), &d, &e) != SV_OK) {
        bset_range(s, 0, 255);
        return;
    }
    for (uint32_t c = 0; c < 256; c++) {
        int32_t t = sv_dfa_next(d, 0, (uint8_t)c);
        if (t == SV_DFA_DEAD || t == 0) continue;
        if (c == SV_CALL_MARK) bset_range(s, 0, 255);
        else bset_range(s, c, c);
    }
    sv_dfa_destroy(d);
}

/* The rule A' ::= (A's body) rest for rule a and the node rest, made once. */
static sv_status absorbed(gp_t *p, absorb_t *ab, uint32_t a, gnode_t *rest, size_t off, gnode_t **ref) {
    for (uint32_t i = 0; i < ab->nmemo; i++)
        if (ab->memo[i].rule == a && ab->memo[i].rest == rest) {
            if (!(*ref = gp_node(p, G_REF, off))) return p->err->code;
            (*ref)->rule = ab->memo[i].to;
            return SV_OK;
        }
    gnode_t *kids[2] = {p->rules[a].body, rest};
    sv_status st = new_rule(p, ab, a, kids, 2, off, ref);
    if (st || !*ref) return st;
    if (ab->nmemo < sizeof ab->memo / sizeof *ab->memo)
        ab->memo[ab->nmemo++] = (absorb_memo_t){.rule = a, .rest = rest, .to = (*ref)->rule};
    return SV_OK;
}

/* Rewrites the first kid of sequence g whose ending conflicts with what
 * follows it (tail_conflict), so that what follows moves inside it, where
 * the next round, or the automaton, can tell the two apart:
 *   A rest            ->  A'          A' ::= (A's body) rest   (A recursive)
 *   B rest            ->  (B's body) rest                      (B without a part)
 *   (x | y) rest      ->  (x rest | y rest)
 *   (x y) rest        ->  x y rest
 *   (γ A)* rest       ->  T           T = rest | γ X,  X ::= (A's body) T
 *   (γ A)+ rest       ->  γ X
 * Each is the same language. The loop's X calls itself only at its end, so
 * the text after `\n` in `item ("\n" item)*` is read inside X. */
static sv_status absorb_seq(gp_t *p, absorb_t *ab, gnode_t *g) {
    for (uint32_t i = 0; i < g->n; i++) {
        gnode_t *k = g->kids[i];
        if (k->kind == G_REP) {
            gnode_t *body = k->kids[0], *last = loop_tail(p, k);
            if (!last || k->min > 1) continue;
            gnode_t *from = seq_from(p, g, i);
            if (!from) return p->err->code;
            bset_t f;
            hard_first(p, from, &f);
            if (!tail_conflict(p, ab, body, &f, 0)) continue;
            gnode_t *rest = seq_from(p, g, i + 1), *ref;
            if (!rest) return p->err->code;
            sv_status st = new_rule(p, ab, last->rule, NULL, 0, k->off, &ref);
            if (st || !ref) return st;
            uint32_t ng = body->kind == G_SEQ ? body->n : 1;
            gnode_t **loop = sv_arena_alloc(p->a, ng * sizeof *loop);
            if (!loop) return gp_nomem(p);
            memcpy(loop, body->kind == G_SEQ ? body->kids : &body, (ng - 1) * sizeof *loop);
            loop[ng - 1] = ref;
            gnode_t *alts[2] = {rest, gp_list(p, G_SEQ, loop, ng, k->off)};
            if (!alts[1]) return p->err->code;
            gnode_t *t = gp_list(p, G_ALT, alts, 2, k->off);
            if (!t) return p->err->code;
            gnode_t *xb[2] = {p->rules[last->rule].body, t};
            if (!(p->rules[ref->rule].body = gp_list(p, G_SEQ, xb, 2, k->off))) return p->err->code;
            if (ab->nmemo < sizeof ab->memo / sizeof *ab->memo)
                ab->memo[ab->nmemo++] = (absorb_memo_t){.rule = last->rule, .rest = t, .to = ref->rule};
            g->kids[i] = k->min == 0 ? t : alts[1];
            g->n = i + 1;
            ab->changed++;
            return SV_OK;
        }
        if (i + 1 == g->n || k->kind == G_LEAF) continue;
        gnode_t *rest = i + 2 == g->n ? g->kids[i + 1] : seq_from(p, g, i + 1);
        if (!rest) return p->err->code;
        bset_t next;
        hard_first(p, rest, &next);
        if (!tail_conflict(p, ab, k, &next, 0)) continue;
        switch (k->kind) {
        case G_REF:
            if (p->rules[k->rule].recursive) {
                gnode_t *ref;
                sv_status st = absorbed(p, ab, k->rule, rest, k->off, &ref);
                if (st || !ref) return st;
                g->kids[i] = ref;
                g->n = i + 1;
            } else {
                g->kids[i] = p->rules[k->rule].body;
            }
            break;
        case G_ALT: {
            gnode_t **alts = sv_arena_alloc(p->a, k->n * sizeof *alts);
            if (!alts) return gp_nomem(p);
            for (uint32_t j = 0; j < k->n; j++) {
                gnode_t *two[2] = {k->kids[j], rest};
                if (!(alts[j] = gp_list(p, G_SEQ, two, 2, k->kids[j]->off))) return p->err->code;
            }
            gnode_t *alt = gp_list(p, G_ALT, alts, k->n, k->off);
            if (!alt) return p->err->code;
            g->kids[i] = alt;
            g->n = i + 1;
            break;
        }
        case G_SEQ: {
            uint32_t n = i + k->n + (g->n - i - 1);
            gnode_t **kids = sv_arena_alloc(p->a, n * sizeof *kids);
            if (!kids) return gp_nomem(p);
            memcpy(kids, g->kids, i * sizeof *kids);
            memcpy(kids + i, k->kids, k->n * sizeof *kids);
            memcpy(kids + i + k->n, g->kids + i + 1, (g->n - i - 1) * sizeof *kids);
            g->kids = kids;
            g->n = n;
            break;
        }
        default: continue;
        }
        ab->changed++;
        return SV_OK;
    }
    return SV_OK;
}

static sv_status absorb_in(gp_t *p, absorb_t *ab, gnode_t *g, uint32_t depth) {
    if (depth > 256 || g->kind == G_LEAF || g->kind == G_REF) return SV_OK;
    for (uint32_t i = 0; i < g->n; i++) { /* a repetition's one kid too */
        sv_status st = absorb_in(p, ab, g->kids[i], depth + 1);
        if (st) return st;
    }
    /* and a repetition's body a second time: a site its first pass moved
     * into a new rule leaves the sites before it a rest that names a rule
     * not analysed yet, which counts as any byte, so they are absorbed in
     * the same round (arithmetic-like grammars under `( ... )+` need it) */
    if (g->kind == G_REP) return absorb_in(p, ab, g->kids[0], depth + 1);
    return g->kind == G_SEQ ? absorb_seq(p, ab, g) : SV_OK;
}

/* One round over the reachable rules (ab lives across rounds: the rules
 * it made and their memo); ab->changed counts the sequences it rewrote. */
static sv_status absorb_returns(gp_t *p, absorb_t *ab) {
    uint32_t n = p->nrules;
    ab->changed = 0;
    sv_status st = all_goes_on(p, &ab->goes_on);
    for (uint32_t r = 0; r < n && !st; r++) {
        rule_t *x = &p->rules[r];
        if (!x->reachable || !x->productive || !x->body || x->plain == 1) continue;
        if (x->body->kind == G_REP) { /* a sequence of one, so that a loop can be rewritten in place */
            gnode_t *one = gp_node(p, G_SEQ, x->body->off);
            gnode_t **k = one ? sv_arena_alloc(p->a, sizeof *k) : NULL;
            if (!k) {
                st = gp_nomem(p);
                break;
            }
            k[0] = x->body;
            one->kids = k;
            one->n = 1;
            x->body = one;
        }
        st = absorb_in(p, ab, x->body, 0);
    }
    free(ab->goes_on);
    ab->goes_on = NULL;
    return st;
}

/* Forgets what analyse and lowering derived, for another round. A rule
 * without calls keeps its AST and DFA: its language and its lowering do
 * not depend on part numbers. */
static void forget_lowering(gp_t *p) {
    for (uint32_t r = 0; r < p->nrules; r++) {
        rule_t *x = &p->rules[r];
        x->reachable = x->productive = x->nullable = x->recursive = false;
        x->part = 0;
        if (x->plain != 1) {
            x->plain = 0;
            x->ast = NULL;
            sv_dfa_destroy(x->dfa);
            x->dfa = NULL;
        }
    }
    free(p->part_rule);
    p->part_rule = NULL;
    p->nparts = 0;
}

/* ---- shared rules ---------------------------------------------------------------- */

/* A rule without recursion is inlined at each of its uses, so its states
 * are determinized, minimized and linked once per use: json.gbnf's `ws`
 * (23 states, for "\n" [ \t]{0,20}) is used 11 times, its `string` (with
 * a `ws` of its own) 3 times, which made 292 states. A first attempt
 * compiles such rules once, as parts their uses call, as a recursive
 * rule's are: the linked program holds each once (163 states). A call is
 * decided by the next byte where an inlined use is decided by the
 * determinization of its whole user, so some grammars link only inlined
 * (`word ws` where word ends in a `ws` of its own: a space may start
 * either call): when the attempt is refused, or does not finish in half of
 * what is left of the compile's time, the grammar is compiled again with
 * every such rule inlined (compile). A rule is shared when its uses would
 * copy at least SHARE_WEIGHT states more than the one part holds (weight ×
 * (uses − 1), weights as EMBED_WEIGHT's), it has at least SHARE_MIN_WEIGHT
 * (below that, the call and the return are most of what a use costs), and
 * it calls no recursive rule (a shared rule may call shared ones). */
#define SHARE_WEIGHT 48u
#define SHARE_MIN_WEIGHT 16u

/* The AST weight of g lowered with every non-recursive rule inlined, at
 * most cap; w[r] memoizes rule r's (UINT64_MAX: not known yet). */
static uint64_t g_weight(gp_t *p, const gnode_t *g, uint64_t cap, uint64_t *w) {
    uint64_t x = 0;
    switch (g->kind) {
    case G_LEAF: return sv_ast_weight(g->leaf, cap);
    case G_REF: {
        rule_t *r = &p->rules[g->rule];
        if (r->recursive || !r->productive) return 1;
        if (w[g->rule] == UINT64_MAX) w[g->rule] = g_weight(p, r->body, cap, w);
        return w[g->rule];
    }
    case G_SEQ:
    case G_ALT:
        for (uint32_t i = 0; i < g->n && x < cap; i++) x += g_weight(p, g->kids[i], cap, w);
        break;
    case G_REP: {
        uint64_t k = g_weight(p, g->kids[0], cap, w);
        uint64_t times = g->max == SV_AST_INF ? (uint64_t)g->min + 1 : g->max;
        x = k && times > cap / k ? cap : k * times;
        break;
    }
    }
    return x < cap ? x : cap;
}

static void count_uses(const gnode_t *g, uint32_t *uses) {
    if (g->kind == G_REF) uses[g->rule]++;
    else if (g->kind != G_LEAF)
        for (uint32_t i = 0; i < g->n; i++) count_uses(g->kids[i], uses);
}

/* Marks the shared rules (after analyse). */
static sv_status mark_shared(gp_t *p, uint32_t root) {
    uint32_t *uses = calloc(p->nrules, sizeof *uses);
    uint64_t *w = malloc(p->nrules * sizeof *w);
    bool *calls = calloc(p->nrules, sizeof *calls); /* it calls a recursive rule */
    if (!uses || !w || !calls) {
        free(uses);
        free(w);
        free(calls);
        return gp_nomem(p);
    }
    for (uint32_t r = 0; r < p->nrules; r++) {
        w[r] = UINT64_MAX;
        if (p->rules[r].reachable && p->rules[r].productive) count_uses(p->rules[r].body, uses);
    }
    /* (before any is shared: g_plain counts a use of a shared rule a call) */
    for (uint32_t r = 0; r < p->nrules; r++)
        if (p->rules[r].reachable && p->rules[r].productive) calls[r] = !g_plain(p, p->rules[r].body);
    const uint64_t cap = (uint64_t)1 << 32;
    for (uint32_t r = 0; r < p->nrules; r++) {
        rule_t *x = &p->rules[r];
        if (r == root || !x->reachable || !x->productive || x->recursive || uses[r] < 2 || calls[r])
            continue;
        if (w[r] == UINT64_MAX) w[r] = g_weight(p, x->body, cap, w);
        if (w[r] >= SHARE_MIN_WEIGHT && w[r] * (uses[r] - 1) >= SHARE_WEIGHT) x->shared = true;
    }
    for (uint32_t r = 0; r < p->nrules; r++) p->rules[r].plain = 0; /* a use of a shared rule is a call */
    free(uses);
    free(w);
    free(calls);
    return SV_OK;
}

/* Lowers the start rule of the analysed rules into *top: an AST whose
 * calls name parts p->id_base + 1 .. p->id_base + p->nparts (resolve). */
static sv_status lower_root(gp_t *p, uint32_t root, sv_ast_t **top) {
    for (uint32_t r = 0; r < p->nrules; r++)
        if (p->rules[r].recursive || p->rules[r].shared) p->nparts++;
    if (p->nparts > SV_CALL_MAX_ID - p->id_base)
        return sv_error_set(p->err, SV_ERR_BUDGET, -1, "the grammar has more than %u recursive rules",
                            SV_CALL_MAX_ID - p->id_base);
    p->part_rule = calloc(p->nparts + 1, sizeof *p->part_rule);
    if (!p->part_rule) return gp_nomem(p);
    uint32_t id = 0;
    for (uint32_t r = 0; r < p->nrules; r++)
        if (p->rules[r].recursive || p->rules[r].shared) {
            p->rules[r].part = p->id_base + ++id;
            p->part_rule[id] = r;
        }
    *top = use_rule(p, root);
    return *top ? SV_OK : gp_nomem(p);
}


/* The refusal of a grammar whose returns still compete after the rounds:
 * the first use of a recursive rule after which the next byte may continue
 * the rule or come after it, named with its position (the rules as
 * written: an absorbed rule A'N is A). SV_OK with *found false when no
 * such use shows directly (the linker's reason then stands alone). */
typedef struct {
    bool found;
    size_t off;       /* the use */
    uint32_t rule;    /* the rule used */
    uint32_t in;      /* the rule using it */
    int byte;         /* a byte that competes */
} conflict_t;

static void conflict_in(gp_t *p, const bset_t *goes_on, uint32_t in, gnode_t *g, uint32_t depth, conflict_t *cf) {
    if (cf->found || depth > 256 || g->kind == G_LEAF || g->kind == G_REF) return;
    for (uint32_t i = 0; i < g->n && !cf->found; i++) conflict_in(p, goes_on, in, g->kids[i], depth + 1, cf);
    if (g->kind != G_SEQ) return;
    for (uint32_t i = 0; i < g->n && !cf->found; i++) {
        if (p->absorb_end_ns && sv_now_ns() > p->absorb_end_ns) return; /* the message without it */
        gnode_t *k = g->kids[i], *use = NULL, *after = NULL;
        if (k->kind == G_REF && i + 1 < g->n && p->rules[k->rule].recursive) {
            use = k;
            after = seq_from(p, g, i + 1);
        } else if ((use = loop_tail(p, k)) != NULL) {
            after = seq_from(p, g, i);
        }
        if (!use || !after) continue;
        bset_t f;
        hard_first(p, after, &f);
        for (int j = 0; j < 256 && !cf->found; j++) {
            int b = (j + 0x21) & 255; /* a visible character first, then the others */
            if ((f.b[b >> 6] & goes_on[use->rule].b[b >> 6]) >> (b & 63) & 1)
                *cf = (conflict_t){.found = true, .off = use->off, .rule = use->rule, .in = in, .byte = b};
        }
    }
}

static sv_status find_conflict(gp_t *p, conflict_t *cf) {
    *cf = (conflict_t){0};
    uint32_t n = p->nrules;
    bset_t *goes_on;
    sv_status st = all_goes_on(p, &goes_on);
    for (uint32_t r = 0; r < n && !st && !cf->found; r++) {
        rule_t *x = &p->rules[r];
        if (x->reachable && x->productive && x->body && x->plain != 1) conflict_in(p, goes_on, r, x->body, 0, cf);
    }
    free(goes_on);
    return st;
}

/* A rule's name as written: without the 'N an absorbed copy adds. */
static int written_len(const rule_t *x) {
    const char *q = memchr(x->name, '\'', x->len);
    return (int)(q ? (uint32_t)(q - x->name) : x->len);
}

/* Rounds of absorbing returns (absorb_returns) before a refusal stands. */
#define ABSORB_ROUNDS 8

/* The first attempt, with shared rules (see there). True when it decided:
 * *st is SV_OK with *out, or an error of the analysis, which the grammar
 * has either way. False when the grammar is to be compiled with every
 * rule inlined: it has no shared rule, or their calls were refused. */
static bool compile_shared(gp_t *p, uint32_t root, sv_dfa_t **out, sv_status *st) {
    uint64_t now = sv_now_ns();
    if (p->deadline_ns) p->absorb_end_ns = now < p->deadline_ns ? now + (p->deadline_ns - now) / 2 : now;
    bool done = false, any = false;
    sv_ast_t *top;
    if ((*st = analyse(p, root)) || (*st = mark_shared(p, root))) {
        done = true; /* not defined, left-recursive, matches nothing, out of memory */
        goto out;
    }
    for (uint32_t r = 0; r < p->nrules; r++) any |= p->rules[r].shared;
    if (any && !(*st = lower_root(p, root, &top))) {
        sv_error_t e;
        sv_error_clear(&e);
        sv_dfa_t *raw = NULL;
        if (sv_dfa_from_ast(top, gp_lim(p), &raw, &e) == SV_OK) {
            if (!sv_dfa_has_markers(raw)) {
                *out = raw, done = true;
            } else {
                done = sv_program_link(raw, resolve, p, gp_lim(p), out, &e) == SV_OK;
                sv_dfa_destroy(raw);
            }
        }
    }
out:
    p->absorb_end_ns = 0;
    if (done) return true;
    for (uint32_t r = 0; r < p->nrules; r++) {
        rule_t *x = &p->rules[r];
        if (!x->shared) continue;
        x->shared = false; /* its part's AST and DFA (without the empty string) go */
        x->plain = 0;
        x->ast = NULL;
        sv_dfa_destroy(x->dfa);
        x->dfa = NULL;
    }
    forget_lowering(p);
    sv_error_clear(p->err);
    return false;
}

/* Parses, lowers and links the grammar into *out; with top, also the start
 * rule's AST as the last round lowered it (sv_grammar_lower). */
static sv_status compile(gp_t *p, sv_dfa_t **out, sv_ast_t **top_out) {
    uint32_t root;
    sv_status st = p->lark ? sv_lark_parse(p, &root) : sv_gbnf_parse(p, &root);
    if (st) return st;
    /* sv_grammar_lower's caller links the parts with what follows the
     * grammar: it gets the grammar's rules inlined, as it was compiled */
    if (!top_out && compile_shared(p, root, out, &st)) return st;
    sv_error_t first; /* the first refusal: it names the rules as written */
    sv_error_clear(&first);
    absorb_t ab = {0}; /* the rounds of absorb_returns */
    conflict_t cf = {0};
    uint64_t t0 = sv_now_ns();
    for (uint32_t round = 0;; round++) {
        /* A round after the first that cannot finish within the rounds'
         * own budget (or the compile's) is the end of the rounds, and the
         * first refusal stands: a rewritten grammar whose calls still
         * compete can send the linker's expansion (fsm/program.c) into a
         * long search. */
        bool gave_up = false;
        sv_ast_t *top;
        st = analyse(p, root);
        if (!st) st = lower_root(p, root, &top);
        if (st) return st;
        if (top_out) *top_out = top;
        sv_error_t e;
        sv_error_clear(&e);
        sv_dfa_t *raw = NULL;
        st = sv_dfa_from_ast(top, gp_lim(p), &raw, &e);
        if (st == SV_ERR_EMPTY) return sv_error_set(p->err, st, -1, "the grammar matches no string");
        if (st && round && (st == SV_ERR_TIMEOUT || st == SV_ERR_BUDGET)) {
            gave_up = true;
        } else if (st) {
            return sv_error_set(p->err, st, -1, "%s", e.message);
        } else if (!sv_dfa_has_markers(raw)) {
            *out = raw;
            p->absorb_end_ns = 0; /* later parts (sv_grammar_lowered_part) get the compile's budget */
            return SV_OK;
        } else {
            sv_error_clear(&e);
            st = sv_program_link(raw, resolve, p, gp_lim(p), out, &e);
            sv_dfa_destroy(raw);
            if (st && round && (st == SV_ERR_TIMEOUT || st == SV_ERR_BUDGET))
                gave_up = true;
            else if (st != SV_ERR_UNSUPPORTED) {
                p->absorb_end_ns = 0;
                return st ? sv_error_set(p->err, st, -1, "%s", e.message) : SV_OK;
            }
        }
        if (!round) {
            /* the search for the message and the rounds get twice what the
             * first attempt took, at least 20 ms */
            uint64_t took = sv_now_ns() - t0, cap = 2 * took > 20000000u ? 2 * took : 20000000u;
            p->absorb_end_ns = sv_now_ns() + cap;
            first = e; /* and where the grammar as written competes, for the message */
            if ((st = find_conflict(p, &cf))) return st;
        }
        ab.changed = 0; /* nothing rewritten unless a round runs */
        if (!gave_up && round + 1 < ABSORB_ROUNDS && p->absorb_end_ns > sv_now_ns()) {
            st = absorb_returns(p, &ab);
            if (st == SV_ERR_TIMEOUT || st == SV_ERR_BUDGET) ab.changed = 0; /* the rounds end */
            else if (st) return st;
        }
        if (!ab.changed) {
            if (cf.found) {
                const rule_t *a = &p->rules[cf.rule], *in = &p->rules[cf.in];
                char b[8];
                if (cf.byte >= 0x21 && cf.byte < 0x7F && cf.byte != '\'' && cf.byte != '\\')
                    snprintf(b, sizeof b, "'%c'", cf.byte);
                else if (cf.byte == '\n') snprintf(b, sizeof b, "'\\n'");
                else snprintf(b, sizeof b, "'\\x%02X'", (unsigned)cf.byte);
                return gp_fail(p, SV_ERR_UNSUPPORTED, cf.off,
                               "after this use of rule '%.*s' (in '%.*s') the byte %s may go on inside '%.*s' "
                               "or come after it, and sieve decides a grammar by its next character (%s); "
                               "rewrite the rules so that what follows a recursive rule cannot also continue "
                               "it",
                               written_len(a), a->name, written_len(in), in->name, b, written_len(a), a->name,
                               first.message);
            }
            return sv_error_set(p->err, SV_ERR_UNSUPPORTED, -1,
                                "the grammar's recursive rules cannot all be told apart by the next character, as "
                                "sieve needs (%s); rewrite the rules where two of them, or a rule and what follows "
                                "it, can start with the same character",
                                first.message);
        }
        forget_lowering(p);
    }
}

sv_grammar_format sv_grammar_detect(const char *text, size_t len) {
    for (size_t i = 0; i + 3 <= len; i++)
        if (text[i] == ':' && text[i + 1] == ':' && text[i + 2] == '=') return SV_GRAMMAR_GBNF;
    return SV_GRAMMAR_LARK;
}

sv_status sv_grammar_compile(const char *text, size_t len, const sv_fsm_limits_t *lim, sv_dfa_t **out,
                             sv_error_t *err) {
    return sv_grammar_compile_as(SV_GRAMMAR_AUTO, text, len, lim, out, err);
}

sv_status sv_grammar_compile_as(sv_grammar_format format, const char *text, size_t len, const sv_fsm_limits_t *lim,
                                sv_dfa_t **out, sv_error_t *err) {
    sv_error_clear(err);
    if (format == SV_GRAMMAR_AUTO) format = sv_grammar_detect(text, len);
    *out = NULL;
    sv_fsm_limits_t def;
    if (!lim) {
        sv_fsm_limits_default(&def);
        lim = &def;
    }
    sv_memacct_t acct; /* the whole compile within lim->max_memory (util/memacct.h) */
    bool own = sv_memacct_begin(&acct, sv_memacct_limit_for(lim->max_memory, len));
    gp_t p = {.s = text, .n = len, .err = err, .lim = lim, .lark = format == SV_GRAMMAR_LARK,
              .deadline_ns = lim->max_time_us ? sv_now_ns() + lim->max_time_us * 1000 : 0};
    p.a = sv_arena_create(0);
    sv_status st = p.a ? compile(&p, out, NULL) : gp_nomem(&p);
    if (!st && p.deadline_ns && sv_now_ns() > p.deadline_ns) {
        /* the budget bounds the whole compile: its last steps (the link)
         * check no clock, and a compile that ended past it is late too */
        sv_dfa_destroy(*out);
        *out = NULL;
        st = sv_error_set(err, SV_ERR_TIMEOUT, -1, "compiling the grammar exceeded the time budget of %llu ms",
                          (unsigned long long)(lim->max_time_us / 1000));
    }
    for (uint32_t r = 0; r < p.nrules; r++) sv_dfa_destroy(p.rules[r].dfa);
    free(p.rules);
    free(p.ht);
    free(p.part_rule);
    sv_arena_destroy(p.a);
    if (st == SV_ERR_NOMEM && own && acct.refused)
        st = sv_error_set(err, SV_ERR_BUDGET, -1, "compiling the grammar exceeds the memory budget of %zu bytes",
                          lim->max_memory);
    if (st && own) st = sv_memacct_outcome(st, &acct, err);
    if (own) {
        if (!st) sv_dfa_uncharge(*out);
        sv_memacct_end(&acct);
    }
    if (st) *out = NULL;
    return st;
}

/* ---- a grammar lowered for another compiler ------------------------------------ */

struct sv_grammar_lowered {
    gp_t p;
    sv_fsm_limits_t lim;
    sv_ast_t *top;
};

sv_status sv_grammar_lower(sv_grammar_format format, const char *text, size_t len, const sv_fsm_limits_t *lim,
                           uint32_t id_base, sv_grammar_lowered_t **out, sv_error_t *err) {
    sv_error_clear(err);
    *out = NULL;
    sv_grammar_lowered_t *g = calloc(1, sizeof *g);
    if (!g) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    if (lim) g->lim = *lim;
    else sv_fsm_limits_default(&g->lim);
    if (format == SV_GRAMMAR_AUTO) format = sv_grammar_detect(text, len);
    g->p = (gp_t){.s = text, .n = len, .err = err, .lim = &g->lim, .lark = format == SV_GRAMMAR_LARK,
                  .id_base = id_base,
                  .deadline_ns = g->lim.max_time_us ? sv_now_ns() + g->lim.max_time_us * 1000 : 0};
    g->p.a = sv_arena_create(0);
    /* Compiled and linked here too, so that returns are absorbed the way
     * sv_grammar_compile absorbs them (the parts stay compiled for the
     * embedding compiler's own link). */
    sv_dfa_t *whole = NULL;
    sv_status st = g->p.a ? compile(&g->p, &whole, &g->top) : sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_dfa_destroy(whole);
    if (st) {
        sv_grammar_lowered_free(g);
        return st;
    }
    g->p.err = NULL; /* the resolver reports through its own err */
    *out = g;
    return SV_OK;
}

sv_ast_t *sv_grammar_lowered_ast(const sv_grammar_lowered_t *g) { return g->top; }

uint32_t sv_grammar_lowered_parts(const sv_grammar_lowered_t *g) { return g->p.nparts; }

const sv_dfa_t *sv_grammar_lowered_part(sv_grammar_lowered_t *g, uint32_t id, sv_error_t *err) {
    return resolve(&g->p, id, err);
}

void sv_grammar_lowered_free(sv_grammar_lowered_t *g) {
    if (!g) return;
    for (uint32_t r = 0; r < g->p.nrules; r++) sv_dfa_destroy(g->p.rules[r].dfa);
    free(g->p.rules);
    free(g->p.ht);
    free(g->p.part_rule);
    sv_arena_destroy(g->p.a);
    free(g);
}
