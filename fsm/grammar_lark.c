/* grammar_lark.c — the Lark-style EBNF that vLLM and llguidance accept, to
 * the rule trees of fsm/internal/grammar_internal.h (fsm/grammar.h says
 * what is accepted; docs/grammar.md what is refused and why).
 *
 * A statement starts a line: `name: expansions` defines a rule (lower-case
 * name) or a terminal (upper-case), `%ignore` and `%import` are directives.
 * A definition ends at a newline, unless the next line that is not blank
 * starts with `|`; inside ( ) and [ ] newlines are spaces. `//` comments.
 *
 * Meaning. Lark lexes, sieve reads bytes: a terminal is the regular
 * language of its body, and a rule the sequence of its parts with no
 * lexer in between, so each string Lark's dynamic (Earley) lexer can split
 * is accepted. `%ignore` is where the lexer shows: the ignored terminals
 * may come before the first terminal a rule reads and after every one, so
 * each terminal used inside a rule (a name, a "literal", a /regex/) is
 * followed here by a repetition of the ignored ones, and the start rule
 * is preceded by one. Rule modifiers (`?rule`, `!rule`, `_rule`), priorities
 * (`.2`) and aliases (`-> name`) shape Lark's tree, not its language: they
 * are read and dropped. */
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"
#include "fsm/regex.h"
#include "fsm/internal/grammar_internal.h"

/* The rule the ignored terminals repeat in, and the start rule with the
 * ignored text before it; '%' keeps both apart from any name a grammar
 * can spell. */
#define IGNORE_NAME "%ignore"
#define START_NAME "%start"
#define COMMON_PREFIX "COMMON__"

typedef struct {
    gp_t *p;
    uint32_t ignore;     /* the rule IGNORE_NAME */
    gnode_t **ignored;   /* the %ignore items */
    uint32_t nignored, capignored;
    bool in_terminal;    /* parsing a terminal's body: no ignores between its parts */
} lk_t;

/* ---- Lark's common.lark, written again for `%import common.NAME` ------------- *
 * Each body names its dependencies with COMMON_PREFIX, so they never meet
 * the grammar's own names; lk_resolve_common defines those on demand. */
static const struct {
    const char *name, *body;
} common_terminals[] = {
    {"DIGIT", "\"0\"..\"9\""},
    {"HEXDIGIT", "\"a\"..\"f\" | \"A\"..\"F\" | COMMON__DIGIT"},
    {"INT", "COMMON__DIGIT+"},
    {"SIGNED_INT", "[\"+\"|\"-\"] COMMON__INT"},
    {"DECIMAL", "COMMON__INT \".\" COMMON__INT? | \".\" COMMON__INT"},
    {"_EXP", "(\"e\"|\"E\") COMMON__SIGNED_INT"},
    {"FLOAT", "COMMON__INT COMMON___EXP | COMMON__DECIMAL COMMON___EXP?"},
    {"SIGNED_FLOAT", "[\"+\"|\"-\"] COMMON__FLOAT"},
    {"NUMBER", "COMMON__FLOAT | COMMON__INT"},
    {"SIGNED_NUMBER", "[\"+\"|\"-\"] COMMON__NUMBER"},
    {"ESCAPED_STRING", "/\"([^\"\\\\\\n]|\\\\[^\\n])*\"/"},
    {"LCASE_LETTER", "\"a\"..\"z\""},
    {"UCASE_LETTER", "\"A\"..\"Z\""},
    {"LETTER", "COMMON__UCASE_LETTER | COMMON__LCASE_LETTER"},
    {"WORD", "COMMON__LETTER+"},
    {"CNAME", "(\"_\"|COMMON__LETTER) (\"_\"|COMMON__LETTER|COMMON__DIGIT)*"},
    {"WS_INLINE", "(\" \"|/\\t/)+"},
    {"WS", "/[ \\t\\f\\r\\n]/+"},
    {"CR", "/\\r/"},
    {"LF", "/\\n/"},
    {"NEWLINE", "(COMMON__CR? COMMON__LF)+"},
    {"SH_COMMENT", "/#[^\\n]*/"},
    {"CPP_COMMENT", "/\\/\\/[^\\n]*/"},
    {"C_COMMENT", "/\\/\\*([^*]|\\*+[^*\\/])*\\*+\\//"},
    {"SQL_COMMENT", "/--[^\\n]*/"},
};

static int common_find(const char *s, size_t len) {
    for (size_t i = 0; i < sizeof common_terminals / sizeof *common_terminals; i++)
        if (strlen(common_terminals[i].name) == len && memcmp(common_terminals[i].name, s, len) == 0) return (int)i;
    return -1;
}

/* ---- reading ------------------------------------------------------------------ */

/* The status of the error gp_rule_of has just set. */
static sv_status failed(const gp_t *p) { return p->err ? p->err->code : SV_ERR_NOMEM; }

static char peek(const gp_t *p) { return p->pos < p->n ? p->s[p->pos] : '\0'; }
static char peek_at(const gp_t *p, size_t k) { return p->pos + k < p->n ? p->s[p->pos + k] : '\0'; }

static bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

/* A terminal's name is upper-case after its leading underscores. */
static bool is_terminal_name(const char *s, size_t len) {
    size_t i = 0;
    while (i < len && s[i] == '_') i++;
    return i < len && s[i] >= 'A' && s[i] <= 'Z';
}

/* Spaces, tabs and `//` comments; with newlines, line ends too. */
static void skip_space(gp_t *p, bool newlines) {
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\f' || (newlines && (c == '\r' || c == '\n'))) {
            p->pos++;
        } else if (c == '/' && peek_at(p, 1) == '/') {
            while (p->pos < p->n && p->s[p->pos] != '\n') p->pos++;
        } else {
            break;
        }
    }
}

static size_t read_name(gp_t *p) {
    size_t at = p->pos;
    if (!name_start(peek(p))) return 0;
    while (p->pos < p->n && name_char(p->s[p->pos])) p->pos++;
    return p->pos - at;
}

/* One character of a "string", as Python's string literals read it: the
 * escapes \n \t \r \f \v \a \b \0-\777 \xhh \uhhhh \Uhhhhhhhh \\ \" \', and
 * any other backslash kept as itself. *two is set when the escape stood for
 * two characters (a backslash and the one after it). */
static sv_status string_char(gp_t *p, uint32_t *cp, uint32_t *second) {
    size_t at = p->pos;
    *second = UINT32_MAX;
    char e;
    bool escaped = p->pos < p->n && p->s[p->pos] == '\\';
    sv_status st = gp_char(p, cp, &e);
    if (st) return st;
    if (!e) {
        if (!escaped && *cp == '\n') return gp_fail(p, SV_ERR_SYNTAX, at, "a string cannot span lines (write \\n)");
        if (escaped && *cp == 0) return gp_fail(p, SV_ERR_UNSUPPORTED, at, "a NUL character cannot be generated as text");
        return SV_OK;
    }
    if (e >= '0' && e <= '7') {
        uint32_t v = (uint32_t)(e - '0');
        for (int i = 0; i < 2 && peek(p) >= '0' && peek(p) <= '7'; i++) v = v * 8 + (uint32_t)(p->s[p->pos++] - '0');
        if (v == 0) return gp_fail(p, SV_ERR_UNSUPPORTED, at, "a NUL character cannot be generated as text");
        *cp = v;
        return SV_OK;
    }
    switch (e) {
    case 'n': *cp = '\n'; return SV_OK;
    case 't': *cp = '\t'; return SV_OK;
    case 'r': *cp = '\r'; return SV_OK;
    case 'f': *cp = '\f'; return SV_OK;
    case 'v': *cp = '\v'; return SV_OK;
    case 'a': *cp = '\a'; return SV_OK;
    case 'b': *cp = '\b'; return SV_OK;
    case '\\': case '"': case '\'': *cp = (uint8_t)e; return SV_OK;
    case '\n': return gp_fail(p, SV_ERR_SYNTAX, at, "a string cannot span lines");
    case 'N': return gp_fail(p, SV_ERR_UNSUPPORTED, at, "\\N{...} named characters are not supported");
    default:
        /* Python keeps an unknown escape as the backslash and the character. */
        p->pos--;
        *cp = '\\';
        return string_char(p, second, &(uint32_t){0});
    }
}

/* The code point and its other ASCII case (itself when it has none). */
static uint32_t other_case(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c >= 'A' && c <= 'Z') return c + 32;
    return c;
}

static sv_ast_t *char_ast(gp_t *p, uint32_t c, bool fold) {
    if (!fold || other_case(c) == c) return sv_ast_codepoint(p->a, c);
    sv_cpset_t set;
    sv_cpset_init(&set);
    sv_ast_t *x = NULL;
    if (!sv_cpset_add(&set, c, c) && !sv_cpset_add(&set, other_case(c), other_case(c)) && !sv_cpset_normalize(&set))
        x = sv_ast_class(p->a, &set);
    sv_cpset_free(&set);
    return x;
}

/* A "string" (with the `i` flag: ASCII letters either case), or a range
 * "a".."z" when one follows. */
static sv_status parse_string(gp_t *p, gnode_t **out) {
    size_t at = p->pos++;
    uint32_t *cps = NULL, n = 0, cap = 0;
    sv_status st = SV_OK;
    for (;;) {
        if (p->pos >= p->n) {
            st = gp_fail(p, SV_ERR_SYNTAX, at, "unterminated string");
            break;
        }
        if (p->s[p->pos] == '"') {
            p->pos++;
            break;
        }
        uint32_t c[2];
        if ((st = string_char(p, &c[0], &c[1]))) break;
        for (int k = 0; k < 2 && c[k] != UINT32_MAX; k++) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                uint32_t *v = realloc(cps, cap * sizeof *v);
                if (!v) { st = gp_nomem(p); break; }
                cps = v;
            }
            cps[n++] = c[k];
        }
        if (st) break;
    }
    bool fold = false;
    if (!st && peek(p) == 'i' && !name_char(peek_at(p, 1))) fold = true, p->pos++;
    gnode_t *g = NULL;
    if (!st && peek(p) == '.' && peek_at(p, 1) == '.') {
        /* A range: both ends one character. */
        p->pos += 2;
        skip_space(p, false);
        size_t hi_at = p->pos;
        gnode_t *hi_node;
        if (peek(p) != '"') st = gp_fail(p, SV_ERR_SYNTAX, hi_at, "expecting a string after '..'");
        else st = parse_string(p, &hi_node);
        if (!st) {
            const sv_ast_t *h = hi_node->leaf;
            if (n != 1 || h->kind != SV_AST_CLASS || h->nranges != 1 || h->ranges[0].lo != h->ranges[0].hi) {
                st = gp_fail(p, SV_ERR_SYNTAX, at, "a range \"a\"..\"z\" needs one character at each end");
            } else if (h->ranges[0].lo < cps[0]) {
                st = gp_fail(p, SV_ERR_SYNTAX, at, "a range whose end U+%04X is below its start U+%04X",
                             h->ranges[0].lo, cps[0]);
            } else {
                sv_cpset_t set;
                sv_cpset_init(&set);
                if (sv_cpset_add(&set, cps[0], h->ranges[0].lo) || sv_cpset_normalize(&set) ||
                    !(g = gp_node(p, G_LEAF, at)) || !(g->leaf = sv_ast_class(p->a, &set)))
                    st = gp_nomem(p);
                sv_cpset_free(&set);
            }
        }
    } else if (!st) {
        sv_ast_t **kids = n ? sv_arena_alloc(p->a, n * sizeof *kids) : NULL;
        if (n && !kids) st = gp_nomem(p);
        for (uint32_t i = 0; !st && i < n; i++)
            if (!(kids[i] = char_ast(p, cps[i], fold))) st = gp_nomem(p);
        if (!st && (!(g = gp_node(p, G_LEAF, at)) || !(g->leaf = n ? sv_ast_cat(p->a, kids, n) : sv_ast_empty(p->a))))
            st = gp_nomem(p);
    }
    free(cps);
    *out = st ? NULL : g;
    return st;
}

/* ---- regular expressions ------------------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
} buf_t;

static bool put(buf_t *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = realloc(b->s, cap);
        if (!v) return false;
        b->s = v;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
    return true;
}

/* Python's regex dialect, spelled in sieve's (fsm/regex.h): `.` is
 * anything but \n (with the s flag, anything); \d \w and their negations
 * are Unicode, as Python's are for text; `\/` is `/`; a `]` first in a
 * class is literal. What the two read alike is copied. */
static sv_status python_regex(gp_t *p, const char *re, size_t n, size_t at, bool dotall, buf_t *b) {
    bool in_class = false;
    size_t class_start = 0;
    for (size_t i = 0; i < n; i++) {
        char c = re[i];
        bool ok;
        if (c == '\\' && i + 1 < n) {
            char e = re[++i];
            if (e == 'd') ok = put(b, "\\p{Nd}", 6);
            else if (e == 'D') ok = put(b, "\\P{Nd}", 6);
            else if (e == 'w') ok = in_class ? put(b, "\\p{L}\\p{N}_", 11) : put(b, "[\\p{L}\\p{N}_]", 13);
            else if (e == 'W' && !in_class) ok = put(b, "[^\\p{L}\\p{N}_]", 14);
            else if (e == 'W') return gp_fail(p, SV_ERR_UNSUPPORTED, at + 1 + i - 1, "\\W inside a character class");
            else if (e == 'A' || e == 'Z' || e == 'b' || e == 'B')
                return gp_fail(p, SV_ERR_UNSUPPORTED, at + 1 + i - 1,
                               "the anchor \\%c inside a terminal (sieve matches terminals whole)", e);
            else ok = put(b, re + i - 1, 2);
        } else if (in_class) {
            if (c == ']' && i > class_start) in_class = false;
            ok = c == ']' && i == class_start ? put(b, "\\]", 2) : put(b, &c, 1);
        } else if (c == '[') {
            in_class = true;
            class_start = i + 1 + (i + 1 < n && re[i + 1] == '^');
            ok = put(b, re + i, class_start - i);
            i = class_start - 1;
        } else if (c == '(' && i + 3 < n && re[i + 1] == '?' && re[i + 2] == 'P' && re[i + 3] == '<') {
            ok = put(b, "(?<", 3); /* Python's named group */
            i += 3;
        } else if (c == '.') {
            ok = dotall ? put(b, "[\\s\\S]", 6) : put(b, "[^\\n]", 5);
        } else if (c == '^' || c == '$') {
            return gp_fail(p, SV_ERR_UNSUPPORTED, at + 1 + i,
                           "the anchor '%c' inside a terminal (sieve matches terminals whole)", c);
        } else {
            ok = put(b, &c, 1);
        }
        if (!ok) return gp_nomem(p);
    }
    return SV_OK;
}

/* x with every class widened by the other ASCII case of its letters (the
 * `i` flag). */
static sv_ast_t *fold_ast(gp_t *p, sv_ast_t *x) {
    switch (x->kind) {
    case SV_AST_CLASS: {
        sv_cpset_t set;
        sv_cpset_init(&set);
        bool bad = false;
        for (uint32_t i = 0; i < x->nranges && !bad; i++) {
            bad |= sv_cpset_add(&set, x->ranges[i].lo, x->ranges[i].hi) != SV_OK;
            uint32_t lo = x->ranges[i].lo, hi = x->ranges[i].hi;
            for (uint32_t c = lo < 'A' ? 'A' : lo; c <= hi && c <= 'z' && !bad; c++)
                if (other_case(c) != c) bad |= sv_cpset_add(&set, other_case(c), other_case(c)) != SV_OK;
        }
        sv_ast_t *y = !bad && !sv_cpset_normalize(&set) ? sv_ast_class(p->a, &set) : NULL;
        sv_cpset_free(&set);
        return y;
    }
    case SV_AST_CAT:
    case SV_AST_ALT:
    case SV_AST_REPEAT: {
        sv_ast_t **k = sv_arena_alloc(p->a, x->nkids * sizeof *k);
        if (!k) return NULL;
        for (uint32_t i = 0; i < x->nkids; i++)
            if (!(k[i] = fold_ast(p, x->kids[i]))) return NULL;
        return x->kind == SV_AST_CAT   ? sv_ast_cat(p->a, k, x->nkids)
               : x->kind == SV_AST_ALT ? sv_ast_alt(p->a, k, x->nkids)
                                       : sv_ast_repeat(p->a, k[0], x->min, x->max);
    }
    default: return x;
    }
}

/* A /regex/flags (flags: i s, and m u, which change nothing here). */
static sv_status parse_regex(gp_t *p, gnode_t **out) {
    size_t at = p->pos++;
    size_t start = p->pos;
    while (p->pos < p->n && p->s[p->pos] != '/' && p->s[p->pos] != '\n')
        p->pos += p->s[p->pos] == '\\' && p->pos + 1 < p->n && p->s[p->pos + 1] != '\n' ? 2 : 1;
    if (peek(p) != '/') return gp_fail(p, SV_ERR_SYNTAX, at, "unterminated regular expression");
    size_t end = p->pos++;
    bool fold = false, dotall = false;
    while (name_char(peek(p))) {
        char f = p->s[p->pos];
        if (f == 'i') fold = true;
        else if (f == 's') dotall = true;
        else if (f != 'm' && f != 'u')
            return gp_fail(p, SV_ERR_UNSUPPORTED, p->pos, "the regex flag '%c' (sieve takes i, s, m and u)", f);
        p->pos++;
    }
    buf_t b = {0};
    sv_status st = python_regex(p, p->s + start, end - start, at, dotall, &b);
    sv_ast_t *x = NULL;
    if (!st) {
        sv_error_t e;
        sv_error_clear(&e);
        st = sv_regex_parse(b.s ? b.s : "", b.n, p->a, &x, &e);
        if (st == SV_ERR_NOMEM) st = gp_nomem(p);
        else if (st) st = gp_fail(p, st, at, "in the regular expression: %s", e.message);
    }
    free(b.s);
    if (!st && fold && !(x = fold_ast(p, x))) st = gp_nomem(p);
    gnode_t *g = NULL;
    if (!st && !(g = gp_node(p, G_LEAF, at))) st = SV_ERR_NOMEM;
    if (g) g->leaf = x;
    *out = st ? NULL : g;
    return st;
}

/* ---- expansions ---------------------------------------------------------------- */

/* g followed by the ignored text, when g is a terminal read by a rule. */
static gnode_t *then_ignored(lk_t *k, gnode_t *g) {
    gp_t *p = k->p;
    if (k->in_terminal) return g;
    gnode_t *ign = gp_node(p, G_REF, g->off);
    if (!ign) return NULL;
    ign->rule = k->ignore;
    gnode_t *pair[2] = {g, ign};
    return gp_list(p, G_SEQ, pair, 2, g->off);
}

static sv_status parse_expansions(lk_t *k, bool nested, gnode_t **out);

static sv_status parse_group(lk_t *k, char close, gnode_t **out) {
    gp_t *p = k->p;
    size_t here = p->pos;
    if (++p->depth > SV_GRAMMAR_MAX_NESTING)
        return gp_fail(p, SV_ERR_BUDGET, here, "groups nest deeper than %u", SV_GRAMMAR_MAX_NESTING);
    p->pos++;
    skip_space(p, true);
    sv_status st = parse_expansions(k, true, out);
    p->depth--;
    if (!st && peek(p) != close) st = gp_fail(p, SV_ERR_SYNTAX, here, "unclosed '%c'", close == ')' ? '(' : '[');
    if (!st) p->pos++;
    return st;
}

/* One atom: a group, an optional [group], a string or range, a regex, or a
 * name. *out NULL (and SV_OK) when none starts here. */
static sv_status parse_atom(lk_t *k, gnode_t **out) {
    gp_t *p = k->p;
    size_t here = p->pos;
    char c = peek(p);
    *out = NULL;
    sv_status st = SV_OK;
    gnode_t *g = NULL;
    if (c == '(') {
        st = parse_group(k, ')', &g);
    } else if (c == '[') {
        gnode_t *body;
        if (!(st = parse_group(k, ']', &body))) {
            if (!(g = gp_node(p, G_REP, here)) || !(g->kids = sv_arena_alloc(p->a, sizeof *g->kids))) return gp_nomem(p);
            g->n = 1, g->kids[0] = body, g->min = 0, g->max = 1;
        }
    } else if (c == '"') {
        if (!(st = parse_string(p, &g)) && !(g = then_ignored(k, g))) st = SV_ERR_NOMEM;
    } else if (c == '/' && peek_at(p, 1) != '/') {
        if (!(st = parse_regex(p, &g)) && !(g = then_ignored(k, g))) st = SV_ERR_NOMEM;
    } else if (name_start(c)) {
        size_t len = read_name(p);
        if (peek(p) == '{')
            return gp_fail(p, SV_ERR_UNSUPPORTED, here, "template rules (%.*s{...}) are not supported", (int)len,
                           p->s + here);
        bool term = is_terminal_name(p->s + here, len);
        if (k->in_terminal && !term)
            return gp_fail(p, SV_ERR_SYNTAX, here, "a terminal cannot use the rule '%.*s' (terminals hold terminals)",
                           (int)len, p->s + here);
        uint32_t r = gp_rule_of(p, p->s + here, (uint32_t)len, here);
        if (r == UINT32_MAX) return failed(p);
        if (!(g = gp_node(p, G_REF, here))) return SV_ERR_NOMEM;
        g->rule = r;
        if (term && !(g = then_ignored(k, g))) return SV_ERR_NOMEM;
    } else if (c == '<') {
        return gp_fail(p, SV_ERR_UNSUPPORTED, here, "special tokens (<...>) are not supported; write the text");
    } else if (c == '%') {
        return gp_fail(p, SV_ERR_UNSUPPORTED, here, "llguidance's inline %%json and %%regex are not supported");
    }
    *out = g;
    return st;
}

/* A sequence of atoms with their operators; stops before '|', ')', ']',
 * '->', the end, or (not nested) a newline. */
static sv_status parse_sequence(lk_t *k, bool nested, gnode_t **out) {
    gp_t *p = k->p;
    size_t at = p->pos;
    gnode_t **items = NULL;
    uint32_t n = 0, cap = 0;
    sv_status st = SV_OK;
    for (;;) {
        size_t here = p->pos;
        char c = peek(p);
        gnode_t *g = NULL;
        if (c == '?' || c == '*' || c == '+' || c == '~') {
            if (n == 0) {
                st = gp_fail(p, SV_ERR_SYNTAX, here, "'%c' with nothing before it to repeat", c);
                break;
            }
            uint32_t min = c == '+' ? 1 : 0, max = c == '?' ? 1 : SV_AST_INF;
            p->pos++;
            if (c == '~') {
                skip_space(p, false);
                if ((st = gp_uint(p, &min))) break;
                max = min;
                skip_space(p, false);
                if (peek(p) == '.' && peek_at(p, 1) == '.') {
                    p->pos += 2;
                    skip_space(p, false);
                    if ((st = gp_uint(p, &max))) break;
                    if (max < min) {
                        st = gp_fail(p, SV_ERR_SYNTAX, here, "a repetition ~ %u..%u whose maximum is below its minimum",
                                     min, max);
                        break;
                    }
                }
            }
            if (!(g = gp_node(p, G_REP, here)) || !(g->kids = sv_arena_alloc(p->a, sizeof *g->kids))) {
                st = gp_nomem(p);
                break;
            }
            g->n = 1, g->kids[0] = items[--n], g->min = min, g->max = max;
        } else if ((st = parse_atom(k, &g)) || !g) {
            break; /* an error, or '|' ')' ']' '->' a newline, the end, or what the caller reports */
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            gnode_t **v = realloc(items, cap * sizeof *v);
            if (!v) { st = gp_nomem(p); break; }
            items = v;
        }
        items[n++] = g;
        skip_space(p, nested);
    }
    gnode_t *seq = NULL;
    if (!st) {
        if (n == 0) {
            if (!(seq = gp_node(p, G_SEQ, at))) st = SV_ERR_NOMEM;
        } else if (!(seq = gp_list(p, G_SEQ, items, n, at))) {
            st = SV_ERR_NOMEM;
        }
    }
    free(items);
    *out = seq;
    return st;
}

/* True when, past blank and comment lines, the next line starts with '|':
 * the definition goes on (the position is left there). */
static bool continues(gp_t *p) {
    size_t save = p->pos;
    skip_space(p, true);
    if (peek(p) == '|') return true;
    p->pos = save;
    return false;
}

static sv_status parse_expansions(lk_t *k, bool nested, gnode_t **out) {
    gp_t *p = k->p;
    size_t at = p->pos;
    gnode_t **alts = NULL;
    uint32_t n = 0, cap = 0;
    sv_status st = SV_OK;
    for (;;) {
        gnode_t *g;
        if ((st = parse_sequence(k, nested, &g))) break;
        if (peek(p) == '-' && peek_at(p, 1) == '>') {
            /* An alias names the tree node; the language is the same. */
            p->pos += 2;
            skip_space(p, false);
            if (!read_name(p)) {
                st = gp_fail(p, SV_ERR_SYNTAX, p->pos, "expecting a name after '->'");
                break;
            }
            skip_space(p, nested);
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 4;
            gnode_t **v = realloc(alts, cap * sizeof *v);
            if (!v) { st = gp_nomem(p); break; }
            alts = v;
        }
        alts[n++] = g; /* `name:` then `| x` on the next line: Lark reads an empty first alternative */
        if (!nested && (peek(p) == '\n' || peek(p) == '\r') && !continues(p)) break;
        if (peek(p) != '|') break;
        p->pos++;
        skip_space(p, nested);
    }
    gnode_t *alt = NULL;
    if (!st && n == 0 && !(alt = gp_node(p, G_SEQ, at))) st = SV_ERR_NOMEM;
    if (!st && n > 0 && !(alt = gp_list(p, G_ALT, alts, n, at))) st = SV_ERR_NOMEM;
    free(alts);
    *out = alt;
    return st;
}

/* ---- statements ---------------------------------------------------------------- */

/* The end of a statement: a newline or the end of the text. */
static sv_status end_of_statement(gp_t *p) {
    skip_space(p, false);
    if (p->pos >= p->n || peek(p) == '\n' || peek(p) == '\r') return SV_OK;
    char c = peek(p);
    if (c == ')' || c == ']') return gp_fail(p, SV_ERR_SYNTAX, p->pos, "'%c' without its opening", c);
    return gp_fail(p, SV_ERR_SYNTAX, p->pos, "unexpected '%c'", c);
}

static sv_status define(gp_t *p, uint32_t r, gnode_t *body, size_t at) {
    if (p->rules[r].body)
        return gp_fail(p, SV_ERR_SYNTAX, at, "'%.*s' is defined twice (first at offset %zu)", (int)p->rules[r].len,
                       p->rules[r].name, p->rules[r].def_off);
    p->rules[r].body = body;
    p->rules[r].def_off = at;
    return SV_OK;
}

/* Defines r as common.lark's terminal number i (its body parsed from the
 * table, whose names are COMMON_PREFIX's). */
static sv_status define_common(lk_t *k, uint32_t r, int i, size_t at) {
    gp_t *p = k->p;
    const char *s = p->s;
    size_t n = p->n, pos = p->pos;
    bool term = k->in_terminal;
    p->s = common_terminals[i].body;
    p->n = strlen(p->s);
    p->pos = 0;
    k->in_terminal = true;
    gnode_t *body;
    sv_status st = parse_expansions(k, true, &body);
    if (!st && p->pos != p->n) st = sv_error_set(p->err, SV_ERR_INTERNAL, -1, "internal: common.%s does not parse",
                                                 common_terminals[i].name);
    p->s = s, p->n = n, p->pos = pos;
    k->in_terminal = term;
    return st ? st : define(p, r, body, at);
}

/* %import common.NAME [-> ALIAS] or %import common (NAME, ...). */
static sv_status parse_import(lk_t *k, size_t at) {
    gp_t *p = k->p;
    skip_space(p, false);
    size_t mod = p->pos;
    size_t len = read_name(p);
    if (len != 6 || memcmp(p->s + mod, "common", 6) != 0) {
        while (p->pos < p->n && (name_char(peek(p)) || peek(p) == '.')) p->pos++;
        return gp_fail(p, SV_ERR_UNSUPPORTED, mod, "%%import from '%.*s': sieve has only Lark's common library",
                       (int)(p->pos - mod), p->s + mod);
    }
    bool list = false;
    if (peek(p) == '.') {
        p->pos++;
    } else {
        skip_space(p, false);
        if (peek(p) != '(') return gp_fail(p, SV_ERR_SYNTAX, p->pos, "expecting '.NAME' or '(NAME, ...)' after common");
        p->pos++;
        list = true;
    }
    for (;;) {
        skip_space(p, list);
        size_t name_at = p->pos;
        size_t nlen = read_name(p);
        if (!nlen) return gp_fail(p, SV_ERR_SYNTAX, name_at, "expecting a name to import");
        int i = common_find(p->s + name_at, nlen);
        if (i < 0)
            return gp_fail(p, SV_ERR_UNSUPPORTED, name_at, "common.%.*s: not one of the common terminals sieve has",
                           (int)nlen, p->s + name_at);
        const char *as = p->s + name_at;
        size_t as_len = nlen;
        skip_space(p, list);
        if (!list && peek(p) == '-' && peek_at(p, 1) == '>') {
            p->pos += 2;
            skip_space(p, false);
            size_t alias_at = p->pos;
            if (!(as_len = read_name(p))) return gp_fail(p, SV_ERR_SYNTAX, alias_at, "expecting a name after '->'");
            as = p->s + alias_at;
        }
        uint32_t r = gp_rule_of(p, as, (uint32_t)as_len, at);
        if (r == UINT32_MAX) return failed(p);
        sv_status st = define_common(k, r, i, at);
        if (st) return st;
        if (!list) return SV_OK;
        skip_space(p, true);
        if (peek(p) == ')') {
            p->pos++;
            return SV_OK;
        }
        if (peek(p) != ',') return gp_fail(p, SV_ERR_SYNTAX, p->pos, "expecting ',' or ')' in the import list");
        p->pos++;
    }
}

static sv_status parse_directive(lk_t *k) {
    gp_t *p = k->p;
    size_t at = p->pos++;
    size_t len = read_name(p);
    const char *w = p->s + at + 1;
    if (len == 6 && memcmp(w, "ignore", 6) == 0) {
        skip_space(p, false);
        bool term = k->in_terminal;
        k->in_terminal = true;
        gnode_t *g;
        sv_status st = parse_expansions(k, false, &g);
        k->in_terminal = term;
        if (st) return st;
        if (k->nignored == k->capignored) {
            uint32_t cap = k->capignored ? 2 * k->capignored : 4;
            gnode_t **v = realloc(k->ignored, cap * sizeof *v);
            if (!v) return gp_nomem(p);
            k->ignored = v;
            k->capignored = cap;
        }
        k->ignored[k->nignored++] = g;
        return SV_OK;
    }
    if (len == 6 && memcmp(w, "import", 6) == 0) return parse_import(k, at);
    return gp_fail(p, SV_ERR_UNSUPPORTED, at, "the directive %%%.*s is not supported (sieve takes %%ignore and %%import)",
                   (int)len, w);
}

static sv_status parse_definition(lk_t *k) {
    gp_t *p = k->p;
    size_t at = p->pos;
    if (peek(p) == '?' || peek(p) == '!') p->pos++;
    size_t name_at = p->pos;
    size_t len = read_name(p);
    if (!len) return gp_fail(p, SV_ERR_SYNTAX, at, "expecting a rule or terminal name");
    if (peek(p) == '{')
        return gp_fail(p, SV_ERR_UNSUPPORTED, at, "template rules (%.*s{...}) are not supported", (int)len,
                       p->s + name_at);
    if (peek(p) == '.') {
        /* A priority: Lark's lexer and parser order by it; the language is the same. */
        p->pos++;
        if (peek(p) == '-') p->pos++;
        uint32_t prio;
        sv_status st = gp_uint(p, &prio);
        if (st) return st;
    }
    skip_space(p, false);
    if (peek(p) != ':')
        return gp_fail(p, SV_ERR_SYNTAX, p->pos, "expecting ':' after the name '%.*s'", (int)len, p->s + name_at);
    p->pos++;
    skip_space(p, false);
    uint32_t r = gp_rule_of(p, p->s + name_at, (uint32_t)len, name_at);
    if (r == UINT32_MAX) return failed(p);
    k->in_terminal = is_terminal_name(p->s + name_at, len);
    gnode_t *body;
    sv_status st = parse_expansions(k, false, &body);
    k->in_terminal = false;
    if (st) return st;
    if ((st = define(p, r, body, name_at))) return st;
    return end_of_statement(p);
}

/* Defines every COMMON_PREFIX name the imported terminals use. */
static sv_status resolve_common(lk_t *k) {
    gp_t *p = k->p;
    size_t plen = strlen(COMMON_PREFIX);
    for (uint32_t r = 0; r < p->nrules; r++) { /* nrules grows as bodies name more */
        rule_t *x = &p->rules[r];
        if (x->body || x->len <= plen || memcmp(x->name, COMMON_PREFIX, plen) != 0) continue;
        int i = common_find(x->name + plen, x->len - plen);
        if (i < 0) continue; /* reported as undefined */
        sv_status st = define_common(k, r, i, x->use_off);
        if (st) return st;
    }
    return SV_OK;
}

sv_status sv_lark_parse(gp_t *p, uint32_t *root_out) {
    lk_t k = {.p = p};
    sv_status st = SV_OK;
    if ((k.ignore = gp_rule_of(p, IGNORE_NAME, sizeof IGNORE_NAME - 1, 0)) == UINT32_MAX) return failed(p);
    if (p->n >= 3 && memcmp(p->s, "\xEF\xBB\xBF", 3) == 0) p->pos = 3;
    for (;;) {
        skip_space(p, true);
        if (p->pos >= p->n) break;
        if (peek(p) == '%') st = parse_directive(&k);
        else if (name_start(peek(p)) || peek(p) == '?' || peek(p) == '!') st = parse_definition(&k);
        else if (peek(p) == '|') st = gp_fail(p, SV_ERR_SYNTAX, p->pos, "'|' with no definition before it");
        else if (peek(p) == '<') st = gp_fail(p, SV_ERR_UNSUPPORTED, p->pos, "special tokens (<...>) are not supported");
        else st = gp_fail(p, SV_ERR_SYNTAX, p->pos, "expecting a definition (name: ...) or a %%directive");
        if (st) break;
    }
    if (!st) st = resolve_common(&k);
    /* The ignored text: any number of the %ignore items, in any order. */
    gnode_t *ign = NULL, *body = NULL;
    if (!st) {
        gnode_t *any = k.nignored ? gp_list(p, G_ALT, k.ignored, k.nignored, 0) : NULL;
        if (k.nignored && !any) st = SV_ERR_NOMEM;
        else if (!(ign = gp_node(p, G_SEQ, 0))) st = SV_ERR_NOMEM;
        else if (any) {
            ign->kind = G_REP;
            if (!(ign->kids = sv_arena_alloc(p->a, sizeof *ign->kids))) st = gp_nomem(p);
            else ign->n = 1, ign->kids[0] = any, ign->min = 0, ign->max = SV_AST_INF;
        }
    }
    free(k.ignored);
    if (st) return st;
    p->rules[k.ignore].body = ign;
    uint32_t start = UINT32_MAX;
    for (uint32_t r = 0; r < p->nrules; r++)
        if (p->rules[r].len == 5 && memcmp(p->rules[r].name, "start", 5) == 0) start = r;
    if (start == UINT32_MAX || !p->rules[start].body)
        return sv_error_set(p->err, SV_ERR_SYNTAX, -1, "the grammar has no rule named start");
    uint32_t top = gp_rule_of(p, START_NAME, sizeof START_NAME - 1, 0);
    if (top == UINT32_MAX) return failed(p);
    gnode_t *refs[2];
    for (int i = 0; i < 2; i++) {
        if (!(refs[i] = gp_node(p, G_REF, 0))) return SV_ERR_NOMEM;
        refs[i]->rule = i ? start : k.ignore;
    }
    if (!(body = gp_list(p, G_SEQ, refs, 2, 0))) return SV_ERR_NOMEM;
    p->rules[top].body = body;
    *root_out = top;
    return SV_OK;
}
