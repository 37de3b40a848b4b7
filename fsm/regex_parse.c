/* regex_parse.c — recursive-descent parser for the dialect in regex.h.
 *
 * Grammar (whitespace is significant, everything is bytes of UTF-8):
 *   alt    := concat ('|' concat)*
 *   concat := (atom quant?)*
 *   atom   := '(' group ')' | '[' class ']' | '.' | '^' | '$' | '\' escape | char
 *   quant  := ('*' | '+' | '?' | '{' m (',' n?)? '}') '?'?   (at most one per atom)
 * Nesting is bounded (SV_REGEX_MAX_DEPTH) so a hostile pattern cannot
 * exhaust the stack; repetition counts are bounded by SV_REGEX_MAX_COUNT. */
#include "regex.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SV_REGEX_MAX_DEPTH 256
#define SV_REGEX_MAX_COUNT 100000

typedef struct {
    const uint8_t *p;
    size_t len, pos;
    sv_arena_t *arena;
    sv_error_t *err;
    int depth;
} parser_t;

/* A growable array of AST pointers for the lists being built. */
typedef struct { sv_ast_t **v; uint32_t n, cap; } astvec_t;

static sv_status vec_push(astvec_t *v, sv_ast_t *x) {
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 8;
        sv_ast_t **nv = realloc(v->v, cap * sizeof *nv);
        if (!nv) return SV_ERR_NOMEM;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return SV_OK;
}

static sv_status nomem(parser_t *ps) {
    return sv_error_set(ps->err, SV_ERR_NOMEM, (long)ps->pos, "out of memory while parsing the regex");
}

static bool at_end(const parser_t *ps) { return ps->pos >= ps->len; }
static int peek(const parser_t *ps) { return at_end(ps) ? -1 : ps->p[ps->pos]; }
static int peek_at(const parser_t *ps, size_t k) { return ps->pos + k < ps->len ? ps->p[ps->pos + k] : -1; }

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads exactly n hex digits at pos; returns -1 (pos unchanged) if absent. */
static long read_hex(parser_t *ps, int n) {
    long v = 0;
    for (int i = 0; i < n; i++) {
        int h = hexval(peek_at(ps, (size_t)i));
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    ps->pos += (size_t)n;
    return v;
}

/* Reads one UTF-8 code point of the pattern itself. */
static sv_status read_char(parser_t *ps, uint32_t *cp) {
    uint32_t c;
    int n = sv_utf8_decode(ps->p + ps->pos, ps->len - ps->pos, &c);
    if (n == 0) return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)ps->pos, "invalid UTF-8 in the pattern at byte %zu", ps->pos);
    ps->pos += (size_t)n;
    *cp = c;
    return SV_OK;
}

/* What one escape denotes: a code point, or a set (\d, \p{..}, ...). */
typedef struct {
    bool is_set;
    uint32_t cp;
    sv_cpset_t set;
} escape_t;

/* \uHHHH, possibly followed by a low surrogate escape that completes a pair. */
static sv_status read_u_escape(parser_t *ps, size_t start, uint32_t *cp) {
    if (peek(ps) == '{') {
        size_t save = ps->pos++;
        long v = 0;
        int digits = 0;
        while (hexval(peek(ps)) >= 0) {
            v = v * 16 + hexval(peek(ps));
            ps->pos++;
            if (++digits > 8 || v > (long)SV_CP_MAX)
                return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "\\u{...} escape at offset %zu is beyond U+10FFFF", start);
        }
        if (digits == 0 || peek(ps) != '}') {
            ps->pos = save;
            return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "malformed \\u{...} escape at offset %zu", start);
        }
        ps->pos++;
        *cp = (uint32_t)v;
        return SV_OK;
    }
    long v = read_hex(ps, 4);
    if (v < 0) return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "\\u at offset %zu needs 4 hex digits", start);
    if (v >= 0xD800 && v <= 0xDBFF && peek(ps) == '\\' && peek_at(ps, 1) == 'u') {
        size_t save = ps->pos;
        ps->pos += 2;
        long lo = read_hex(ps, 4);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            *cp = 0x10000 + (((uint32_t)v - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            return SV_OK;
        }
        ps->pos = save;
    }
    *cp = (uint32_t)v; /* a lone surrogate: a code point no UTF-8 text contains */
    return SV_OK;
}

/* Parses the escape after a backslash (pos is just past it). in_class
 * selects class meanings (\b is backspace there). */
static sv_status parse_escape(parser_t *ps, bool in_class, escape_t *e) {
    size_t start = ps->pos - 1;
    e->is_set = false;
    sv_cpset_init(&e->set);
    if (at_end(ps)) return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "pattern ends with a lone backslash at offset %zu", start);
    int c = ps->p[ps->pos++];
    sv_status st = SV_OK;
    switch (c) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S': {
        sv_class_kind k = (c == 'd' || c == 'D') ? SV_CLASS_DIGIT : (c == 'w' || c == 'W') ? SV_CLASS_WORD : SV_CLASS_SPACE;
        e->is_set = true;
        st = sv_cpset_add_class(&e->set, k, c < 'a');
        return st ? nomem(ps) : SV_OK;
    }
    case 'p': case 'P': {
        if (peek(ps) != '{') {
            return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "\\%c at offset %zu must be followed by {property}", c, start);
        }
        size_t name = ps->pos + 1, end = name;
        while (end < ps->len && ps->p[end] != '}') end++;
        if (end >= ps->len) return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "unterminated \\%c{ at offset %zu", c, start);
        bool neg = c == 'P';
        size_t nstart = name;
        if (nstart < end && ps->p[nstart] == '^') { neg = !neg; nstart++; }
        e->is_set = true;
        st = sv_cpset_add_property(&e->set, (const char *)ps->p + nstart, end - nstart, neg);
        if (st == SV_ERR_UNSUPPORTED)
            return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start,
                                "unsupported Unicode property \\%c{%.*s} at offset %zu (general categories such as L, Lu, Nd are supported)",
                                c, (int)(end - name), (const char *)ps->p + name, start);
        if (st) return nomem(ps);
        ps->pos = end + 1;
        return SV_OK;
    }
    case 'n': e->cp = '\n'; return SV_OK;
    case 'r': e->cp = '\r'; return SV_OK;
    case 't': e->cp = '\t'; return SV_OK;
    case 'f': e->cp = '\f'; return SV_OK;
    case 'v': e->cp = '\v'; return SV_OK;
    case 'e': e->cp = 0x1B; return SV_OK;
    case 'a': e->cp = 0x07; return SV_OK;
    case '0':
        if (peek(ps) >= '0' && peek(ps) <= '9')
            return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "octal escape at offset %zu is not supported (use \\xHH)", start);
        e->cp = 0;
        return SV_OK;
    case 'x': {
        long v = read_hex(ps, 2);
        if (v < 0) return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "\\x at offset %zu needs 2 hex digits", start);
        e->cp = (uint32_t)v;
        return SV_OK;
    }
    case 'u':
        return read_u_escape(ps, start, &e->cp);
    case 'c': {
        int l = peek(ps);
        if ((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) {
            ps->pos++;
            e->cp = (uint32_t)(l % 32);
            return SV_OK;
        }
        return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "\\c at offset %zu must be followed by a letter", start);
    }
    case 'b':
        if (in_class) { e->cp = 0x08; return SV_OK; }
        return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "word boundary \\b at offset %zu is not supported", start);
    case 'B':
        return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "non-word-boundary \\B at offset %zu is not supported", start);
    case 'k':
        return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "back-reference \\k at offset %zu is not supported", start);
    case 'A': case 'z':
        if (in_class) break;
        /* Handled by the caller as assertions; reaching here means in_class. */
        break;
    default:
        if (c >= '1' && c <= '9')
            return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "back-reference \\%c at offset %zu is not supported", c, start);
        if (c < 0x80 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
            e->cp = (uint32_t)c; /* escaped punctuation, space or control: itself */
            return SV_OK;
        }
        if (c >= 0x80) {
            ps->pos--;
            return read_char(ps, &e->cp);
        }
        break;
    }
    return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "unknown escape \\%c at offset %zu", c, start);
}

/* Parses a bracket class; pos is just past '['. */
static sv_status parse_class(parser_t *ps, sv_ast_t **out) {
    size_t start = ps->pos - 1;
    bool neg = false;
    if (peek(ps) == '^') { neg = true; ps->pos++; }
    sv_cpset_t set;
    sv_cpset_init(&set);
    sv_status st = SV_OK;
    for (;;) {
        if (at_end(ps)) { st = sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "unterminated character class starting at offset %zu", start); break; }
        int c = peek(ps);
        if (c == ']') { ps->pos++; break; }
        if (c == '[' && (peek_at(ps, 1) == ':' || peek_at(ps, 1) == '=' || peek_at(ps, 1) == '.')) {
            /* PCRE reads [[:alpha:]] as a POSIX class, ECMA-262 as literals:
             * refuse rather than guess. */
            size_t k = ps->pos + 2;
            while (k < ps->len && ps->p[k] != ']') k++;
            if (k > ps->pos + 2 && ps->p[k - 1] == ps->p[ps->pos + 1]) {
                st = sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)ps->pos, "POSIX class at offset %zu is not ECMA-262 (use \\d, \\w, \\s or a range)", ps->pos);
                break;
            }
        }
        /* One endpoint: a code point or a set. */
        escape_t lo;
        size_t item = ps->pos;
        if (c == '\\') {
            ps->pos++;
            if ((st = parse_escape(ps, true, &lo))) break;
        } else {
            lo.is_set = false;
            sv_cpset_init(&lo.set);
            if ((st = read_char(ps, &lo.cp))) break;
        }
        if (!lo.is_set && peek(ps) == '-' && peek_at(ps, 1) != ']' && peek_at(ps, 1) != -1) {
            size_t dash = ps->pos++;
            escape_t hi;
            if (peek(ps) == '\\') {
                ps->pos++;
                if ((st = parse_escape(ps, true, &hi))) break;
            } else {
                hi.is_set = false;
                sv_cpset_init(&hi.set);
                if ((st = read_char(ps, &hi.cp))) break;
            }
            if (hi.is_set) {
                /* [a-\d]: PCRE and ECMA (without u) read the '-' literally. */
                if ((st = sv_cpset_add(&set, lo.cp, lo.cp)) || (st = sv_cpset_add(&set, '-', '-')) ||
                    (st = sv_cpset_add_set(&set, &hi.set))) { sv_cpset_free(&hi.set); st = nomem(ps); break; }
                sv_cpset_free(&hi.set);
                continue;
            }
            if (hi.cp < lo.cp) {
                st = sv_error_set(ps->err, SV_ERR_SYNTAX, (long)item, "range out of order in character class at offset %zu", item);
                break;
            }
            (void)dash;
            if ((st = sv_cpset_add(&set, lo.cp, hi.cp))) { st = nomem(ps); break; }
            continue;
        }
        if (lo.is_set) {
            st = sv_cpset_add_set(&set, &lo.set);
            sv_cpset_free(&lo.set);
            if (st) { st = nomem(ps); break; }
        } else if ((st = sv_cpset_add(&set, lo.cp, lo.cp))) {
            st = nomem(ps);
            break;
        }
    }
    if (!st) st = neg ? sv_cpset_negate(&set) : sv_cpset_normalize(&set);
    if (!st) {
        *out = sv_ast_class(ps->arena, &set);
        if (!*out) st = nomem(ps);
    } else if (st == SV_ERR_NOMEM) {
        st = nomem(ps);
    }
    sv_cpset_free(&set);
    return st;
}

static sv_status parse_alt(parser_t *ps, sv_ast_t **out);

/* Reads a decimal count for {m,n}; returns false if there are no digits. */
static bool read_count(parser_t *ps, uint32_t *v, bool *overflow) {
    size_t s = ps->pos;
    uint64_t x = 0;
    while (peek(ps) >= '0' && peek(ps) <= '9') {
        x = x * 10 + (uint64_t)(peek(ps) - '0');
        if (x > SV_REGEX_MAX_COUNT) *overflow = true, x = SV_REGEX_MAX_COUNT + 1;
        ps->pos++;
    }
    *v = (uint32_t)x;
    return ps->pos > s;
}

/* If a {m}, {m,}, {m,n} quantifier starts at pos, consumes it. Otherwise
 * leaves pos alone and returns false: the '{' is a literal. */
static sv_status try_brace(parser_t *ps, bool *is_quant, uint32_t *min, uint32_t *max) {
    size_t save = ps->pos, start = ps->pos;
    *is_quant = false;
    ps->pos++;
    bool overflow = false;
    if (!read_count(ps, min, &overflow)) { ps->pos = save; return SV_OK; }
    if (peek(ps) == '}') {
        *max = *min;
    } else if (peek(ps) == ',') {
        ps->pos++;
        if (peek(ps) == '}') *max = SV_AST_INF;
        else if (!read_count(ps, max, &overflow) || peek(ps) != '}') { ps->pos = save; return SV_OK; }
    } else {
        ps->pos = save;
        return SV_OK;
    }
    ps->pos++; /* '}' */
    if (overflow)
        return sv_error_set(ps->err, SV_ERR_BUDGET, (long)start, "repetition count at offset %zu exceeds the limit of %d", start, SV_REGEX_MAX_COUNT);
    if (*max < *min)
        return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "numbers out of order in {} quantifier at offset %zu", start);
    *is_quant = true;
    return SV_OK;
}

static bool is_quant_start(parser_t *ps) {
    int c = peek(ps);
    if (c == '*' || c == '+' || c == '?') return true;
    if (c == '{') {
        size_t save = ps->pos;
        bool q;
        uint32_t a, b;
        sv_error_t scratch;
        sv_error_t *keep = ps->err;
        ps->err = &scratch;
        sv_status st = try_brace(ps, &q, &a, &b);
        ps->err = keep;
        ps->pos = save;
        return q || st != SV_OK;
    }
    return false;
}

static sv_status parse_group(parser_t *ps, sv_ast_t **out) {
    size_t start = ps->pos - 1;
    if (peek(ps) == '?') {
        int c = peek_at(ps, 1);
        if (c == ':') {
            ps->pos += 2;
        } else if (c == '=' || c == '!') {
            return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "lookahead at offset %zu is not supported", start);
        } else if (c == '<' && (peek_at(ps, 2) == '=' || peek_at(ps, 2) == '!')) {
            return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "lookbehind at offset %zu is not supported", start);
        } else if (c == '<' || (c == 'P' && peek_at(ps, 2) == '<')) {
            /* Named group: (?<name>...) or (?P<name>...). */
            size_t k = ps->pos + (c == 'P' ? 3 : 2), n0 = k;
            while (k < ps->len && (ps->p[k] == '_' || (ps->p[k] >= '0' && ps->p[k] <= '9') ||
                                   ((ps->p[k] | 32) >= 'a' && (ps->p[k] | 32) <= 'z')))
                k++;
            if (k == n0 || k >= ps->len || ps->p[k] != '>' || (ps->p[n0] >= '0' && ps->p[n0] <= '9'))
                return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "malformed group name at offset %zu", start);
            ps->pos = k + 1;
        } else if (c == 'P' && (peek_at(ps, 2) == '=' || peek_at(ps, 2) == '>')) {
            return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "back-reference (?P=...) at offset %zu is not supported", start);
        } else if (c == '>' ) {
            return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "atomic group at offset %zu is not supported", start);
        } else if (c == '#') {
            return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "comment group at offset %zu is not supported", start);
        } else {
            return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "inline flags or special group (? at offset %zu are not supported", start);
        }
    }
    if (++ps->depth > SV_REGEX_MAX_DEPTH)
        return sv_error_set(ps->err, SV_ERR_BUDGET, (long)start, "groups nested deeper than %d at offset %zu", SV_REGEX_MAX_DEPTH, start);
    sv_status st = parse_alt(ps, out);
    ps->depth--;
    if (st) return st;
    if (peek(ps) != ')') return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "missing ) for the group opened at offset %zu", start);
    ps->pos++;
    return SV_OK;
}

static sv_status parse_atom(parser_t *ps, sv_ast_t **out, bool *repeatable) {
    size_t start = ps->pos;
    int c = peek(ps);
    *repeatable = true;
    switch (c) {
    case '(':
        ps->pos++;
        return parse_group(ps, out);
    case '[':
        ps->pos++;
        return parse_class(ps, out);
    case '.': {
        ps->pos++;
        sv_cpset_t s;
        sv_cpset_init(&s);
        sv_status st = sv_cpset_add_class(&s, SV_CLASS_DOT, false);
        if (!st) st = sv_cpset_normalize(&s);
        if (!st && !(*out = sv_ast_class(ps->arena, &s))) st = SV_ERR_NOMEM;
        sv_cpset_free(&s);
        return st ? nomem(ps) : SV_OK;
    }
    case '^': case '$':
        ps->pos++;
        *repeatable = false;
        *out = sv_ast_assert(ps->arena, c == '^' ? SV_AST_BOL : SV_AST_EOL);
        return *out ? SV_OK : nomem(ps);
    case '*': case '+': case '?':
        return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "quantifier '%c' at offset %zu has nothing to repeat", c, start);
    case '{':
        if (is_quant_start(ps))
            return sv_error_set(ps->err, SV_ERR_SYNTAX, (long)start, "quantifier '{' at offset %zu has nothing to repeat", start);
        ps->pos++;
        *out = sv_ast_codepoint(ps->arena, '{');
        return *out ? SV_OK : nomem(ps);
    case '\\': {
        int n = peek_at(ps, 1);
        if (n == 'A' || n == 'z') {
            ps->pos += 2;
            *repeatable = false;
            *out = sv_ast_assert(ps->arena, n == 'A' ? SV_AST_BOL : SV_AST_EOL);
            return *out ? SV_OK : nomem(ps);
        }
        if (n == 'Z' || n == 'G')
            return sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)start, "assertion \\%c at offset %zu is not supported (use $ or \\z)", n, start);
        ps->pos++;
        escape_t e;
        sv_status st = parse_escape(ps, false, &e);
        if (st) return st;
        if (e.is_set) {
            st = sv_cpset_normalize(&e.set);
            if (!st && !(*out = sv_ast_class(ps->arena, &e.set))) st = SV_ERR_NOMEM;
            sv_cpset_free(&e.set);
            return st ? nomem(ps) : SV_OK;
        }
        *out = sv_ast_codepoint(ps->arena, e.cp);
        return *out ? SV_OK : nomem(ps);
    }
    default: {
        uint32_t cp = 0;
        sv_status st = read_char(ps, &cp);
        if (st) return st;
        *out = sv_ast_codepoint(ps->arena, cp);
        return *out ? SV_OK : nomem(ps);
    }
    }
}

static sv_status parse_concat(parser_t *ps, sv_ast_t **out) {
    astvec_t v = {0};
    sv_status st = SV_OK;
    while (!at_end(ps) && peek(ps) != '|' && peek(ps) != ')') {
        sv_ast_t *atom;
        bool repeatable;
        if ((st = parse_atom(ps, &atom, &repeatable))) break;
        if (!st && is_quant_start(ps)) {
            size_t qpos = ps->pos;
            if (!repeatable) {
                st = sv_error_set(ps->err, SV_ERR_SYNTAX, (long)qpos, "quantifier at offset %zu follows an assertion, which cannot be repeated", qpos);
                break;
            }
            uint32_t min = 0, max = SV_AST_INF;
            int c = peek(ps);
            if (c == '{') {
                bool q;
                if ((st = try_brace(ps, &q, &min, &max))) break;
            } else {
                ps->pos++;
                if (c == '+') min = 1;
                if (c == '?') max = 1;
            }
            if (peek(ps) == '?') ps->pos++; /* lazy: same language */
            else if (peek(ps) == '+') {
                st = sv_error_set(ps->err, SV_ERR_UNSUPPORTED, (long)ps->pos, "possessive quantifier at offset %zu is not supported", ps->pos);
                break;
            }
            if (is_quant_start(ps)) { /* a{2}{3}, a** : refused by ECMA-262 and PCRE alike */
                st = sv_error_set(ps->err, SV_ERR_SYNTAX, (long)ps->pos, "quantifier '%c' at offset %zu has nothing to repeat", peek(ps), ps->pos);
                break;
            }
            atom = sv_ast_repeat(ps->arena, atom, min, max);
            if (!atom) { st = nomem(ps); break; }
        }
        if (st) break;
        if (vec_push(&v, atom)) { st = nomem(ps); break; }
    }
    if (!st) {
        *out = sv_ast_cat(ps->arena, v.v, v.n);
        if (!*out) st = nomem(ps);
    }
    free(v.v);
    return st;
}

static sv_status parse_alt(parser_t *ps, sv_ast_t **out) {
    astvec_t v = {0};
    sv_status st = SV_OK;
    for (;;) {
        sv_ast_t *c;
        if ((st = parse_concat(ps, &c))) break;
        if (vec_push(&v, c)) { st = nomem(ps); break; }
        if (peek(ps) != '|') break;
        ps->pos++;
    }
    if (!st) {
        *out = sv_ast_alt(ps->arena, v.v, v.n);
        if (!*out) st = nomem(ps);
    }
    free(v.v);
    return st;
}

sv_status sv_regex_parse(const char *pattern, size_t len, sv_arena_t *arena, sv_ast_t **out, sv_error_t *err) {
    parser_t ps = {.p = (const uint8_t *)pattern, .len = len, .arena = arena, .err = err};
    sv_ast_t *root;
    sv_status st = parse_alt(&ps, &root);
    if (st) return st;
    if (!at_end(&ps)) /* only a stray ')' stops parse_alt early */
        return sv_error_set(err, SV_ERR_SYNTAX, (long)ps.pos, "unmatched ) at offset %zu", ps.pos);
    *out = root;
    return SV_OK;
}
