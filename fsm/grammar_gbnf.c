/* grammar_gbnf.c — llama.cpp's GBNF (fsm/grammar.h says what is accepted)
 * to the rule trees of fsm/internal/grammar_internal.h.
 *
 * A recursive-descent reader: leaves (a literal, a class, `.`) are AST
 * nodes at once; sequences, alternatives, repetitions and rule references
 * stay tree nodes until every rule is known. Whitespace follows llama.cpp:
 * spaces, tabs and comments anywhere, newlines only inside groups and after
 * `::=` or `|`. */
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"
#include "fsm/internal/grammar_internal.h"

static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* ---- parsing ------------------------------------------------------------------- */

static char peek(const gp_t *p) { return p->pos < p->n ? p->s[p->pos] : '\0'; }

static void skip_space(gp_t *p, bool newlines) {
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || (newlines && (c == '\r' || c == '\n'))) {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->n && p->s[p->pos] != '\r' && p->s[p->pos] != '\n') p->pos++;
        } else {
            break;
        }
    }
}


/* One character of a literal or a class: an escape or a UTF-8 sequence. */
static sv_status parse_char(gp_t *p, uint32_t *cp) {
    size_t at = p->pos;
    char e;
    sv_status st = gp_char(p, cp, &e);
    if (st || !e) return st;
    switch (e) {
    case 't': *cp = '\t'; return SV_OK;
    case 'r': *cp = '\r'; return SV_OK;
    case 'n': *cp = '\n'; return SV_OK;
    case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (uint8_t)e; return SV_OK;
    default: return gp_fail(p, SV_ERR_SYNTAX, at, "unknown escape '\\%c'", e);
    }
}

static sv_status parse_literal(gp_t *p, gnode_t **out) {
    size_t at = p->pos++;
    sv_ast_t **cps = NULL;
    uint32_t n = 0, cap = 0;
    sv_status st = SV_OK;
    while (!st) {
        if (p->pos >= p->n) {
            st = gp_fail(p, SV_ERR_SYNTAX, at, "unterminated literal");
            break;
        }
        if (p->s[p->pos] == '"') {
            p->pos++;
            break;
        }
        uint32_t cp;
        if ((st = parse_char(p, &cp))) break;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            sv_ast_t **g = realloc(cps, cap * sizeof *g);
            if (!g) { st = gp_nomem(p); break; }
            cps = g;
        }
        if (!(cps[n++] = sv_ast_codepoint(p->a, cp))) st = gp_nomem(p);
    }
    gnode_t *g = st ? NULL : gp_node(p, G_LEAF, at);
    if (g && !(g->leaf = n ? sv_ast_cat(p->a, cps, n) : sv_ast_empty(p->a))) st = gp_nomem(p);
    free(cps);
    if (!st && !g) st = SV_ERR_NOMEM;
    *out = g;
    return st;
}

static sv_status parse_class(gp_t *p, gnode_t **out) {
    size_t at = p->pos++;
    bool neg = peek(p) == '^';
    if (neg) p->pos++;
    sv_cpset_t set;
    sv_cpset_init(&set);
    sv_status st = SV_OK;
    while (!st) {
        if (p->pos >= p->n) {
            st = gp_fail(p, SV_ERR_SYNTAX, at, "unterminated character class");
            break;
        }
        if (p->s[p->pos] == ']') {
            p->pos++;
            break;
        }
        size_t lo_at = p->pos;
        uint32_t lo, hi;
        if ((st = parse_char(p, &lo))) break;
        hi = lo;
        if (peek(p) == '-' && p->pos + 1 < p->n && p->s[p->pos + 1] != ']') {
            p->pos++;
            if ((st = parse_char(p, &hi))) break;
            if (hi < lo) {
                st = gp_fail(p, SV_ERR_SYNTAX, lo_at, "a range whose end U+%04X is below its start U+%04X", hi, lo);
                break;
            }
        }
        if (sv_cpset_add(&set, lo, hi)) st = gp_nomem(p);
    }
    if (!st && (neg ? sv_cpset_negate(&set) : sv_cpset_normalize(&set))) st = gp_nomem(p);
    gnode_t *g = st ? NULL : gp_node(p, G_LEAF, at);
    if (g && !(g->leaf = set.n ? sv_ast_class(p->a, &set) : sv_ast_none(p->a))) st = gp_nomem(p);
    if (!st && !g) st = SV_ERR_NOMEM;
    sv_cpset_free(&set);
    *out = g;
    return st;
}

static sv_status parse_alternates(gp_t *p, bool nested, gnode_t **out);

/* A sequence of elements with their repetitions; stops before '|', ')',
 * the end, or (not nested) a newline. */
static sv_status parse_sequence(gp_t *p, bool nested, gnode_t **out) {
    size_t at = p->pos;
    gnode_t **items = NULL;
    uint32_t n = 0, cap = 0;
    sv_status st = SV_OK;
    while (!st && p->pos < p->n) {
        char c = p->s[p->pos];
        size_t here = p->pos;
        gnode_t *g = NULL;
        if (c == '"') {
            st = parse_literal(p, &g);
        } else if (c == '[') {
            st = parse_class(p, &g);
        } else if (c == '.') {
            p->pos++;
            sv_cpset_t all;
            sv_cpset_init(&all);
            if (sv_cpset_add(&all, 0, 0x10FFFF) || sv_cpset_normalize(&all) || !(g = gp_node(p, G_LEAF, here)) ||
                !(g->leaf = sv_ast_class(p->a, &all)))
                st = gp_nomem(p);
            sv_cpset_free(&all);
        } else if (word_char(c)) {
            while (p->pos < p->n && word_char(p->s[p->pos])) p->pos++;
            uint32_t r = gp_rule_of(p, p->s + here, (uint32_t)(p->pos - here), here);
            if (r == UINT32_MAX) st = p->err ? p->err->code : SV_ERR_NOMEM;
            else if (!(g = gp_node(p, G_REF, here))) st = SV_ERR_NOMEM;
            else g->rule = r;
        } else if (c == '(') {
            if (++p->depth > SV_GRAMMAR_MAX_NESTING) {
                st = gp_fail(p, SV_ERR_BUDGET, here, "groups nest deeper than %u", SV_GRAMMAR_MAX_NESTING);
                break;
            }
            p->pos++;
            skip_space(p, true);
            st = parse_alternates(p, true, &g);
            p->depth--;
            if (!st && peek(p) != ')') st = gp_fail(p, SV_ERR_SYNTAX, here, "unclosed '('");
            if (!st) p->pos++;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (n == 0) {
                st = gp_fail(p, SV_ERR_SYNTAX, here, "'%c' with nothing before it to repeat", c);
                break;
            }
            uint32_t min = c == '+' ? 1 : 0, max = c == '?' ? 1 : SV_AST_INF;
            p->pos++;
            if (c == '{') {
                skip_space(p, false);
                if ((st = gp_uint(p, &min))) break;
                skip_space(p, false);
                max = min;
                if (peek(p) == ',') {
                    p->pos++;
                    skip_space(p, false);
                    max = SV_AST_INF;
                    if (peek(p) >= '0' && peek(p) <= '9' && (st = gp_uint(p, &max))) break;
                    skip_space(p, false);
                }
                if (peek(p) != '}') {
                    st = gp_fail(p, SV_ERR_SYNTAX, here, "expecting '}' to close the repetition");
                    break;
                }
                p->pos++;
                if (max < min) {
                    st = gp_fail(p, SV_ERR_SYNTAX, here, "a repetition {%u,%u} whose maximum is below its minimum", min, max);
                    break;
                }
            }
            if (!(g = gp_node(p, G_REP, here)) || !(g->kids = sv_arena_alloc(p->a, sizeof *g->kids))) {
                st = gp_nomem(p);
                break;
            }
            g->n = 1;
            g->kids[0] = items[--n];
            g->min = min;
            g->max = max;
        } else if (c == '<') {
            st = gp_fail(p, SV_ERR_UNSUPPORTED, here, "token references (<...>) are not supported; write the text");
        } else {
            break; /* '|', ')', a newline, or something the caller reports */
        }
        if (st) break;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            gnode_t **v = realloc(items, cap * sizeof *v);
            if (!v) { st = gp_nomem(p); break; }
            items = v;
        }
        items[n++] = g;
        skip_space(p, nested);
    }
    gnode_t *seq = st ? NULL : gp_node(p, G_SEQ, at);
    if (seq && n && !(seq->kids = sv_arena_alloc(p->a, n * sizeof *seq->kids))) seq = NULL, st = gp_nomem(p);
    if (!st && !seq) st = SV_ERR_NOMEM;
    if (!st && n) memcpy(seq->kids, items, n * sizeof *items);
    if (!st) seq->n = n;
    free(items);
    *out = seq;
    return st;
}

static sv_status parse_alternates(gp_t *p, bool nested, gnode_t **out) {
    size_t at = p->pos;
    gnode_t **alts = NULL;
    uint32_t n = 0, cap = 0;
    sv_status st = SV_OK;
    for (;;) {
        gnode_t *g;
        if ((st = parse_sequence(p, nested, &g))) break;
        if (n == cap) {
            cap = cap ? 2 * cap : 4;
            gnode_t **v = realloc(alts, cap * sizeof *v);
            if (!v) { st = gp_nomem(p); break; }
            alts = v;
        }
        alts[n++] = g;
        if (peek(p) != '|') break;
        p->pos++;
        skip_space(p, true);
    }
    gnode_t *alt = NULL;
    if (!st && n == 1) alt = alts[0];
    else if (!st && (alt = gp_node(p, G_ALT, at)) && (alt->kids = sv_arena_alloc(p->a, n * sizeof *alt->kids))) {
        memcpy(alt->kids, alts, n * sizeof *alts);
        alt->n = n;
    } else if (!st) {
        st = gp_nomem(p);
    }
    free(alts);
    *out = alt;
    return st;
}

static sv_status parse_rule(gp_t *p) {
    size_t at = p->pos;
    while (p->pos < p->n && word_char(p->s[p->pos])) p->pos++;
    if (p->pos == at) {
        if (peek(p) == '<') return gp_fail(p, SV_ERR_UNSUPPORTED, at, "token references (<...>) are not supported");
        return gp_fail(p, SV_ERR_SYNTAX, at, "expecting a rule name");
    }
    uint32_t r = gp_rule_of(p, p->s + at, (uint32_t)(p->pos - at), at);
    if (r == UINT32_MAX) return p->err ? p->err->code : SV_ERR_NOMEM;
    if (p->rules[r].body)
        return gp_fail(p, SV_ERR_SYNTAX, at, "rule '%.*s' is defined twice (first at offset %zu)", (int)p->rules[r].len,
                    p->rules[r].name, p->rules[r].def_off);
    skip_space(p, false);
    if (p->pos + 3 > p->n || memcmp(p->s + p->pos, "::=", 3) != 0)
        return gp_fail(p, SV_ERR_SYNTAX, p->pos, "expecting '::=' after the rule name");
    p->pos += 3;
    skip_space(p, true);
    gnode_t *body;
    sv_status st = parse_alternates(p, false, &body);
    if (st) return st;
    if (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c == ')') return gp_fail(p, SV_ERR_SYNTAX, p->pos, "')' without a '('");
        if (c != '\n' && c != '\r') return gp_fail(p, SV_ERR_SYNTAX, p->pos, "unexpected '%c'", c);
    }
    p->rules[r].body = body;
    p->rules[r].def_off = at;
    skip_space(p, true);
    return SV_OK;
}

sv_status sv_gbnf_parse(gp_t *p, uint32_t *root_out) {
    skip_space(p, true);
    if (p->n >= 3 && memcmp(p->s, "\xEF\xBB\xBF", 3) == 0) p->pos = 3, skip_space(p, true);
    while (p->pos < p->n) {
        sv_status st = parse_rule(p);
        if (st) return st;
    }
    uint32_t root = UINT32_MAX;
    for (uint32_t r = 0; r < p->nrules; r++)
        if (p->rules[r].len == 4 && memcmp(p->rules[r].name, "root", 4) == 0) root = r;
    if (root == UINT32_MAX || !p->rules[root].body)
        return sv_error_set(p->err, SV_ERR_SYNTAX, -1, "the grammar has no rule named root");
    *root_out = root;
    return SV_OK;
}
