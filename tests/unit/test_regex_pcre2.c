/* test_regex_pcre2.c — differential test of the regex → DFA compiler against PCRE2.
 *
 * RE2's tester runs every implementation against every other on the same
 * strings. Here there are two: ours (fsm/regex.h, a minimized byte DFA) and
 * PCRE2 (a backtracker written by other people for other reasons), and the
 * question put to both for each (pattern, string) pair is "is the whole string
 * matched?".
 *
 * PCRE2 is configured to read patterns as close to ECMA-262 as it can: UTF,
 * anchored at both ends with `$` only at the very end, ALT_BSUX (\uHHHH and
 * \xHH), ALLOW_EMPTY_CLASS ([] and [^]), and no UCP (\d and \w stay ASCII).
 * Where the dialects still differ the pattern text is translated before PCRE2
 * sees it (translate()): `.`, `\s` and `\S` are spelled out as explicit
 * classes, `\v` becomes \x0b (PCRE2's \v is a class), surrogate pairs and
 * \u{..} become the code point they name, long property names become short
 * ones, and a `-` next to a class escape inside [...] is escaped (ECMA-262
 * Annex B reads it as a literal, PCRE2 as an error). Three bugs of PCRE2
 * 10.42 are steered around, each where it is handled: a quantified empty
 * class ([]* never matches, translate_class), a negated class holding both a
 * property and \D or \W (translate_class), and auto-possessification of
 * \P{L}* before \P{N} (pcre_compile). What cannot be translated (a lone
 * surrogate escape) is checked against hand-written expectations instead
 * (check_expectations()), as are invalid UTF-8 inputs and the constructs we
 * refuse.
 *
 * The candidate strings for a pattern come from three sources: our DFA's
 * sampler (accepted by construction, so PCRE2 must accept them too),
 * mutations of accepted strings (a byte or a code point away, where the bugs
 * live), and random strings over an alphabet made of the pattern's own code
 * points, their neighbours, and a few interesting characters. A candidate
 * that is not valid UTF-8 never goes to PCRE2; the DFA must reject it.
 *
 * With `--patterns FILE` (one JSON string literal per line, written by
 * tests/extended/extract_patterns.py) the same comparison runs over the
 * real-world patterns of the benchmark schemas (tests/extended/
 * run_regex_corpus.sh). With `--generated N --seed S` it runs N generated
 * patterns from another seed: a cheap fuzzer. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "fsm/dfa.h"
#include "fsm/regex.h"
#include "util/clock.h"
#include "util/rng.h"
#include "test.h"

enum {
    BUILTIN_STRINGS = 4000,  /* candidates per built-in pattern */
    CORPUS_STRINGS = 2000,   /* candidates per corpus pattern (--strings N to change) */
    MAX_CANDIDATE = 4096,    /* bytes; longer mutations are cut */
    SAMPLE_CAP = 1 << 16,    /* sampler buffer, bytes */
    POOL = 32,               /* accepted strings kept as mutation seeds */
    PRINT_PER_PATTERN = 5,   /* disagreements printed per pattern */
    GRAMMAR_PATTERNS = 300,  /* generated from a small grammar */
    RANGE_PATTERNS = 100,    /* generated classes of multi-byte ranges */
};
#define PCRE2_MATCH_LIMIT 1000000u
#define CORPUS_TIME_US 2000000u

/* ---- byte buffers ---------------------------------------------------------- */

typedef struct { uint8_t *p; size_t n, cap; } buf_t; /* p is NUL-terminated past n */

static void buf_reserve(buf_t *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + extra + 1) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) { fprintf(stderr, "test_regex_pcre2: out of memory\n"); exit(2); }
    b->p = p;
    b->cap = cap;
}
static void buf_add(buf_t *b, const void *s, size_t n) {
    buf_reserve(b, n);
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void buf_str(buf_t *b, const char *s) { buf_add(b, s, strlen(s)); }
static void buf_set(buf_t *b, const void *s, size_t n) { b->n = 0; buf_add(b, s, n); }
static void buf_fmt(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_fmt(buf_t *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    buf_add(b, tmp, (size_t)k);
}
static void buf_free(buf_t *b) { free(b->p); *b = (buf_t){0}; }

/* A C-style escaped copy of s for messages: printable ASCII as is, the rest
 * as \n, \r, \t or \xHH. The result is borrowed from one of four rotating
 * buffers, so up to four can appear in one printf. */
static const char *esc(const uint8_t *s, size_t n) {
    static buf_t ring[4];
    static int k;
    buf_t *b = &ring[k++ & 3];
    b->n = 0;
    buf_str(b, "\"");
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == '"' || c == '\\') buf_fmt(b, "\\%c", c);
        else if (c == '\n') buf_str(b, "\\n");
        else if (c == '\r') buf_str(b, "\\r");
        else if (c == '\t') buf_str(b, "\\t");
        else if (c < 0x20 || c >= 0x7f) buf_fmt(b, "\\x%02X", c);
        else buf_add(b, &c, 1);
    }
    buf_str(b, "\"");
    return (const char *)b->p;
}
static const char *escs(const char *s) { return esc((const uint8_t *)s, strlen(s)); }

/* ---- UTF-8 (written apart from fsm/cpset.c on purpose) ------------------- */

static int utf8_enc(uint32_t cp, uint8_t o[4]) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | cp >> 6); o[1] = (uint8_t)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | cp >> 12); o[1] = (uint8_t)(0x80 | (cp >> 6 & 63)); o[2] = (uint8_t)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | cp >> 18); o[1] = (uint8_t)(0x80 | (cp >> 12 & 63));
    o[2] = (uint8_t)(0x80 | (cp >> 6 & 63)); o[3] = (uint8_t)(0x80 | (cp & 63));
    return 4;
}

/* Strict: no overlong forms, surrogates or values past U+10FFFF. Returns the
 * length of the scalar value at s, or 0 if s does not start with one. */
static int utf8_dec(const uint8_t *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    uint8_t c = s[0];
    int len;
    uint32_t v, min;
    if (c < 0x80) { *cp = c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, v = c & 0x07, min = 0x10000;
    else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

static bool utf8_valid(const uint8_t *s, size_t n) {
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        int k = utf8_dec(s + i, n - i, &cp);
        if (!k) return false;
        i += (size_t)k;
    }
    return true;
}

static void buf_cp(buf_t *b, uint32_t cp) {
    uint8_t u[4];
    buf_add(b, u, (size_t)utf8_enc(cp, u));
}

/* ---- translation of our dialect into PCRE2's --------------------------- */

/* ECMA-262 \s: WhiteSpace (TAB VT FF SP NBSP ZWNBSP and Zs) and LineTerminator. */
#define SPACES "\\t\\n\\x0b\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
#define SPACE_CLASS "[" SPACES "]"
#define NONSPACE_CLASS "[^" SPACES "]"
/* ECMA-262 `.`: anything but the four line terminators. */
#define DOT_CLASS "[^\\n\\r\\u2028\\u2029]"

typedef struct {
    buf_t out;          /* the PCRE2 pattern */
    uint32_t *cp;       /* code points the pattern names: the random-string alphabet */
    size_t ncp, capcp;
    bool property;      /* uses \p{..}: the alphabet gets random code points */
    const char *why;    /* non-NULL when PCRE2 cannot be given an equivalent */
} xlat_t;

static void note_cp(xlat_t *x, uint32_t cp) {
    if (x->ncp == x->capcp) {
        x->capcp = x->capcp ? 2 * x->capcp : 32;
        x->cp = realloc(x->cp, x->capcp * sizeof *x->cp);
        if (!x->cp) { fprintf(stderr, "test_regex_pcre2: out of memory\n"); exit(2); }
    }
    x->cp[x->ncp++] = cp;
}

/* The edges of a class escape's set, for the alphabet (build_alphabet adds
 * the neighbours). */
static void note_class(xlat_t *x, uint8_t e) {
    static const uint32_t spaces[] = {9, 10, 11, 12, 13, 32, 0xA0, 0x1680, 0x2000, 0x2005, 0x200A,
                                      0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF};
    static const uint32_t word[] = {'0', '9', 'A', 'Z', '_', 'a', 'z'}; /* \d: the first two */
    static const uint32_t dot[] = {'\n', '\r', 0x2028, 0x2029};
    const uint32_t *v;
    size_t n;
    switch (e) {
    case 's': case 'S': v = spaces, n = sizeof spaces / sizeof *spaces; break;
    case 'w': case 'W': v = word, n = sizeof word / sizeof *word; break;
    case 'd': case 'D': v = word, n = 2; break;
    case '.': v = dot, n = sizeof dot / sizeof *dot; break;
    default: return;
    }
    for (size_t i = 0; i < n; i++) note_cp(x, v[i]);
}

/* The points inside a range where its UTF-8 byte ranges split: the ends of
 * each 64-, 4096- and 262144-code-point block the range crosses. */
static void note_range(xlat_t *x, uint32_t lo, uint32_t hi) {
    if (hi < lo) return;
    for (int k = 6; k <= 18; k += 6) {
        uint32_t m = (1u << k) - 1, a = lo | m, b = hi & ~m;
        if (a < hi) note_cp(x, a), note_cp(x, a + 1);
        if (b > lo) note_cp(x, b), note_cp(x, b - 1);
    }
    note_cp(x, lo + (hi - lo) / 3);
    note_cp(x, lo + (hi - lo) / 3 * 2);
}

static void emit_cp(xlat_t *x, uint32_t cp) {
    note_cp(x, cp);
    if (cp >= 0xD800 && cp <= 0xDFFF) x->why = "lone surrogate escape (PCRE2 refuses it; with us it matches nothing)";
    else if (cp < 0x100) buf_fmt(&x->out, "\\x%02x", cp);
    else if (cp < 0x10000) buf_fmt(&x->out, "\\u%04x", cp);
    else buf_cp(&x->out, cp); /* PCRE2 with ALT_BSUX has no \x{..}: the character itself */
}

static int hexv(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
static long hexn(const uint8_t *p, size_t n, size_t i, int k) {
    long v = 0;
    for (int j = 0; j < k; j++) {
        if (i + (size_t)j >= n || hexv(p[i + j]) < 0) return -1;
        v = v * 16 + hexv(p[i + j]);
    }
    return v;
}

/* Length of the pattern character at p[i] (1 for a stray byte). */
static size_t char_len(const uint8_t *p, size_t n, size_t i, uint32_t *cp) {
    int k = utf8_dec(p + i, n - i, cp);
    if (k) return (size_t)k;
    *cp = p[i];
    return 1;
}

/* *i is just past "\u". Returns the code point, combining a surrogate pair
 * into one as ECMA-262 does with the u flag, or -1 for a malformed escape
 * (left as it is: we refuse it, PCRE2 reads a literal `u`). */
static long read_u(const uint8_t *p, size_t n, size_t *i) {
    size_t j = *i;
    if (j < n && p[j] == '{') {
        long v = 0;
        size_t k = j + 1;
        while (k < n && hexv(p[k]) >= 0 && v <= 0x10FFFF) v = v * 16 + hexv(p[k++]);
        if (k == j + 1 || k >= n || p[k] != '}' || v > 0x10FFFF) return -1;
        *i = k + 1;
        return v;
    }
    long v = hexn(p, n, j, 4);
    if (v < 0) return -1;
    j += 4;
    if (v >= 0xD800 && v <= 0xDBFF && j + 1 < n && p[j] == '\\' && p[j + 1] == 'u') {
        long lo = hexn(p, n, j + 2, 4);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            *i = j + 6;
            return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        }
    }
    *i = j;
    return v;
}

/* Loose property-name comparison (UAX44-LM3): case, ' ', '-', '_' ignored. */
static bool loose_eq(const uint8_t *a, size_t alen, const char *b) {
    size_t i = 0, j = 0, blen = strlen(b);
    for (;;) {
        while (i < alen && (a[i] == ' ' || a[i] == '_' || a[i] == '-')) i++;
        while (j < blen && (b[j] == ' ' || b[j] == '_' || b[j] == '-')) j++;
        if (i == alen || j == blen) return i == alen && j == blen;
        int x = a[i] | 32, y = b[j] | 32;
        if (x != y) return false;
        i++, j++;
    }
}

/* PCRE2 10.42 knows general categories by their short names only. */
static const struct { const char *shortn, *longn; } categories[] = {
    {"L", "Letter"}, {"M", "Mark"}, {"N", "Number"}, {"P", "Punctuation"}, {"S", "Symbol"},
    {"Z", "Separator"}, {"C", "Other"}, {"L&", "Cased_Letter"},
    {"Lu", "Uppercase_Letter"}, {"Ll", "Lowercase_Letter"}, {"Lt", "Titlecase_Letter"},
    {"Lm", "Modifier_Letter"}, {"Lo", "Other_Letter"}, {"Mn", "Nonspacing_Mark"},
    {"Mc", "Spacing_Mark"}, {"Me", "Enclosing_Mark"}, {"Nd", "Decimal_Number"},
    {"Nl", "Letter_Number"}, {"No", "Other_Number"}, {"Pc", "Connector_Punctuation"},
    {"Pd", "Dash_Punctuation"}, {"Ps", "Open_Punctuation"}, {"Pe", "Close_Punctuation"},
    {"Pi", "Initial_Punctuation"}, {"Pf", "Final_Punctuation"}, {"Po", "Other_Punctuation"},
    {"Sm", "Math_Symbol"}, {"Sc", "Currency_Symbol"}, {"Sk", "Modifier_Symbol"},
    {"So", "Other_Symbol"}, {"Zs", "Space_Separator"}, {"Zl", "Line_Separator"},
    {"Zp", "Paragraph_Separator"}, {"Cc", "Control"}, {"Cf", "Format"}, {"Cs", "Surrogate"},
    {"Co", "Private_Use"}, {"Cn", "Unassigned"},
};

/* p[*i] is the backslash of \p{..} or \P{..}. */
static void translate_property(const uint8_t *p, size_t n, size_t *i, xlat_t *x) {
    size_t s = *i;
    bool neg = p[s + 1] == 'P';
    size_t end = s + 3;
    while (end < n && p[end] != '}') end++;
    if (s + 2 >= n || p[s + 2] != '{' || end >= n) { /* malformed: both sides refuse */
        buf_add(&x->out, p + s, 2);
        *i = s + 2;
        return;
    }
    const uint8_t *name = p + s + 3;
    size_t len = end - (s + 3);
    if (len && name[0] == '^') neg = !neg, name++, len--;
    for (size_t k = 0; k < len; k++) {
        if (name[k] != '=') continue;
        if (loose_eq(name, k, "gc") || loose_eq(name, k, "General_Category")) name += k + 1, len -= k + 1;
        break;
    }
    x->property = true;
    buf_str(&x->out, neg ? "\\P{" : "\\p{");
    size_t c = 0;
    while (c < sizeof categories / sizeof categories[0] && !loose_eq(name, len, categories[c].longn)) c++;
    if (c < sizeof categories / sizeof categories[0]) buf_str(&x->out, categories[c].shortn);
    else buf_add(&x->out, name, len);
    buf_str(&x->out, "}");
    *i = end + 1;
}

/* p[*i] is a backslash that does not start a class escape. Escapes that
 * denote one code point are decoded here (independently of fsm/) and
 * re-emitted in a spelling PCRE2 reads the same way; the rest (\b, \1, \k,
 * \0 followed by a digit, unknown letters) are passed through for PCRE2 to
 * interpret, since we refuse them anyway. */
static void translate_escape(const uint8_t *p, size_t n, size_t *i, xlat_t *x) {
    size_t s = *i;
    if (s + 1 >= n) { buf_add(&x->out, p + s, 1); *i = s + 1; return; }
    uint8_t e = p[s + 1];
    long cp = -1;
    size_t next = s + 2;
    switch (e) {
    case 'n': cp = '\n'; break;
    case 'r': cp = '\r'; break;
    case 't': cp = '\t'; break;
    case 'f': cp = '\f'; break;
    case 'v': cp = 0x0B; break;
    case 'e': cp = 0x1B; break;
    case 'a': cp = 0x07; break;
    case '0': if (s + 2 >= n || p[s + 2] < '0' || p[s + 2] > '9') cp = 0; break;
    case 'x': if ((cp = hexn(p, n, s + 2, 2)) >= 0) next = s + 4; break;
    case 'u': cp = read_u(p, n, &next); break;
    case 'c':
        if (s + 2 < n && ((p[s + 2] | 32) >= 'a' && (p[s + 2] | 32) <= 'z')) cp = p[s + 2] % 32, next = s + 3;
        break;
    default:
        if (e >= 0x80) { uint32_t c; next = s + 1 + char_len(p, n, s + 1, &c); cp = c; }
        else if (!((e | 32) >= 'a' && (e | 32) <= 'z') && !(e >= '0' && e <= '9')) cp = e;
        break;
    }
    if (cp < 0) {
        buf_add(&x->out, p + s, 2);
        *i = s + 2;
        return;
    }
    emit_cp(x, (uint32_t)cp);
    *i = next;
}

static bool is_class_escape(const uint8_t *p, size_t n, size_t i) {
    return i + 1 < n && p[i] == '\\' && p[i + 1] && strchr("dDwWsSpP", p[i + 1]);
}

/* Writes [items] or [^items]. A leading '^' is escaped so that it cannot
 * read as a negation, and a leading ':', '.' or '=' so that PCRE2 cannot
 * read [:x:], [.x.] or [=x=] as a POSIX construct (ECMA-262 has none). */
static void put_class(buf_t *o, bool neg, const buf_t *items) {
    buf_str(o, neg ? "[^" : "[");
    if (items->n && strchr("^:.=", items->p[0])) buf_str(o, "\\");
    buf_add(o, items->p, items->n);
    buf_str(o, "]");
}

/* p[*i] is '['. \s is inlined; \S cannot be (no class holds "not a space"
 * as an item), so [X\S] becomes (?:[X]|[^spaces]) and [^X\S], which is
 * "neither X nor a non-space", becomes (?:(?![X])[spaces]). */
static void translate_class(const uint8_t *p, size_t n, size_t *pi, xlat_t *x) {
    size_t i = *pi + 1;
    bool neg = false, nonspace = false, prev_set = false, property = false, wide = false;
    long last = -1, range_lo = -1; /* for the alphabet: the last single code point, a pending range */
    if (i < n && p[i] == '^') neg = true, i++;
    buf_t outer = x->out; /* the items go to a buffer of their own */
    x->out = (buf_t){0};
    buf_str(&x->out, "");
    for (;;) {
        if (i >= n) { x->why = "unterminated class"; break; }
        uint8_t c = p[i];
        if (c == ']') { i++; break; }
        if (c == '\\') {
            bool set = is_class_escape(p, n, i);
            size_t before = x->ncp;
            if (set) note_class(x, p[i + 1]);
            property |= set && (p[i + 1] == 'p' || p[i + 1] == 'P');
            wide |= set && (p[i + 1] == 'D' || p[i + 1] == 'W');
            if (!set) translate_escape(p, n, &i, x);
            else if (p[i + 1] == 's') buf_str(&x->out, SPACES), i += 2;
            else if (p[i + 1] == 'S') nonspace = true, i += 2;
            else if (p[i + 1] == 'p' || p[i + 1] == 'P') translate_property(p, n, &i, x);
            else buf_add(&x->out, p + i, 2), i += 2;
            prev_set = set;
            last = !set && x->ncp > before ? (long)x->cp[x->ncp - 1] : -1;
            if (last >= 0 && range_lo >= 0) note_range(x, (uint32_t)range_lo, (uint32_t)last), last = -1;
            range_lo = -1;
            continue;
        }
        if (c == '-') {
            /* Next to a class escape it cannot be a range: a literal in ECMA-262 Annex B. */
            bool literal = prev_set || is_class_escape(p, n, i + 1);
            buf_str(&x->out, literal ? "\\-" : "-");
            note_cp(x, '-');
            range_lo = !literal && i + 1 < n && p[i + 1] != ']' ? last : -1;
            last = range_lo >= 0 ? -1 : '-';
            i++;
            prev_set = false;
            continue;
        }
        uint32_t cp;
        size_t k = char_len(p, n, i, &cp);
        buf_add(&x->out, p + i, k);
        note_cp(x, cp);
        i += k;
        prev_set = false;
        last = cp;
        if (range_lo >= 0) note_range(x, (uint32_t)range_lo, cp), last = -1;
        range_lo = -1;
    }
    buf_t items = x->out;
    x->out = outer;
    buf_t *o = &x->out;
    if (nonspace && !neg) {
        buf_str(o, "(?:" NONSPACE_CLASS);
        if (items.n) buf_str(o, "|"), put_class(o, false, &items);
        buf_str(o, ")");
    } else if (nonspace) {
        buf_str(o, "(?:");
        if (items.n) buf_str(o, "(?!"), put_class(o, false, &items), buf_str(o, ")");
        buf_str(o, SPACE_CLASS ")");
    } else if (!neg && !items.n) {
        /* PCRE2 10.42 compiles [] to *FAIL and then fails [] quantified with
         * a minimum of 0 too ([]*x never matches "x"; PCRE2Project/pcre2
         * issue 509, fixed in 10.45). A quantifier applies to the group. */
        buf_str(o, "(?:[])");
    } else if (neg && property && wide) {
        /* PCRE2 10.42 drops the code points above U+00FF of a non-UCP \D or
         * \W from a negated class that also holds a property: [^\p{L}\D]
         * matches U+2014 (PCRE2Project/pcre2 issue 497, fixed in 10.45).
         * The positive class is right, so negate it with a lookahead. */
        buf_str(o, "(?:(?!");
        put_class(o, false, &items);
        buf_str(o, ")[^])");
    } else {
        put_class(o, neg, &items);
    }
    buf_free(&items);
    *pi = i;
}

/* Translates pattern p[0..n) into x->out; sets x->why if it cannot. */
static void translate(const uint8_t *p, size_t n, xlat_t *x) {
    x->out.n = 0;
    x->ncp = 0;
    x->property = false;
    x->why = NULL;
    buf_str(&x->out, "");
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        if (c == '[') {
            translate_class(p, n, &i, x);
        } else if (c == '.') {
            note_class(x, '.');
            buf_str(&x->out, DOT_CLASS);
            i++;
        } else if (c == '\\' && i + 1 < n && (p[i + 1] == 's' || p[i + 1] == 'S')) {
            note_class(x, 's');
            buf_str(&x->out, p[i + 1] == 's' ? SPACE_CLASS : NONSPACE_CLASS);
            i += 2;
        } else if (c == '\\' && i + 1 < n && (p[i + 1] == 'p' || p[i + 1] == 'P')) {
            translate_property(p, n, &i, x);
        } else if (c == '\\' && i + 1 < n && p[i + 1] && strchr("dDwWAzbBkZG123456789", p[i + 1])) {
            note_class(x, p[i + 1]);
            buf_add(&x->out, p + i, 2); /* same meaning in PCRE2, or refused by us */
            i += 2;
        } else if (c == '\\') {
            translate_escape(p, n, &i, x);
        } else {
            uint32_t cp;
            size_t k = char_len(p, n, i, &cp);
            buf_add(&x->out, p + i, k);
            if (!strchr("()|*+?^$", c)) note_cp(x, cp);
            i += k;
        }
    }
}

/* ---- PCRE2 ------------------------------------------------------------------ */

typedef struct {
    pcre2_code *code;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
} pcre_t;

/* Returns true on success; on failure writes PCRE2's message to msg. */
static bool pcre_compile(const buf_t *pat, pcre_t *r, pcre2_match_context *mctx, char *msg, size_t cap) {
    int ec;
    PCRE2_SIZE off;
    /* NO_AUTO_POSSESS: PCRE2 10.42 wrongly makes \P{L}* possessive before
     * \P{N} (as if the two sets were disjoint), so \P{L}*\P{N} fails on "--".
     * A reference should not optimize anyway. */
    uint32_t flags = PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_BSUX |
                     PCRE2_ALLOW_EMPTY_CLASS | PCRE2_NO_AUTO_POSSESS;
    r->code = pcre2_compile((PCRE2_SPTR)pat->p, pat->n, flags, &ec, &off, NULL);
    if (!r->code) {
        PCRE2_UCHAR m[256];
        pcre2_get_error_message(ec, m, sizeof m);
        snprintf(msg, cap, "%s at offset %zu", (const char *)m, (size_t)off);
        return false;
    }
    r->md = pcre2_match_data_create_from_pattern(r->code, NULL);
    r->mctx = mctx;
    return r->md != NULL;
}

static void pcre_free(pcre_t *r) {
    pcre2_match_data_free(r->md);
    pcre2_code_free(r->code);
}

/* 1 = whole string matched, 0 = not, -1 = PCRE2 gave up (match, depth or
 * heap limit), -2 = any other error (*rc holds it). */
static int pcre_full_match(const pcre_t *r, const uint8_t *s, size_t n, int *rc) {
    *rc = pcre2_match(r->code, (PCRE2_SPTR)s, n, 0, 0, r->md, r->mctx);
    if (*rc >= 0) return 1;
    if (*rc == PCRE2_ERROR_NOMATCH) return 0;
    if (*rc == PCRE2_ERROR_MATCHLIMIT || *rc == PCRE2_ERROR_DEPTHLIMIT || *rc == PCRE2_ERROR_HEAPLIMIT) return -1;
    return -2;
}

/* ---- candidate strings -------------------------------------------------- */

static uint32_t random_scalar(sv_rng_t *r) {
    for (;;) {
        uint32_t cp;
        switch (sv_rng_below(r, 4)) {
        case 0: cp = sv_rng_below(r, 0x80); break;
        case 1: cp = 0x80 + sv_rng_below(r, 0x800 - 0x80); break;
        case 2: cp = 0x800 + sv_rng_below(r, 0x10000 - 0x800); break;
        default: cp = 0x10000 + sv_rng_below(r, 0x100000); break;
        }
        if (cp < 0xD800 || cp > 0xDFFF) return cp;
    }
}

/* The alphabet: the pattern's code points and their neighbours (range ends
 * ±1 are where UTF-8 byte ranges split), and characters that separate ECMA
 * from other dialects. */
static const uint32_t interesting[] = {
    '\n', '\r', 0x2028, 0x2029, 0xA0, 'a', 'b', 'A', '0', '9', '_', ' ', '-', '\t', 0x0B, 0xE9, 0xC9,
    0x4E2D, 0x1F600, 0xFEFF, 0x3000, 0x85, 0x180E, 0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF,
};

typedef struct { uint32_t *v; size_t n; } alpha_t;

static void build_alphabet(const xlat_t *x, sv_rng_t *r, alpha_t *a) {
    size_t ni = sizeof interesting / sizeof interesting[0], nrand = x->property ? 64 : 0;
    a->v = malloc((ni + 3 * x->ncp + nrand) * sizeof *a->v);
    if (!a->v) { fprintf(stderr, "test_regex_pcre2: out of memory\n"); exit(2); }
    a->n = 0;
    for (size_t i = 0; i < ni; i++) a->v[a->n++] = interesting[i];
    for (size_t i = 0; i < x->ncp; i++) {
        for (int d = -1; d <= 1; d++) {
            int64_t c = (int64_t)x->cp[i] + d;
            if (c < 0 || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) continue;
            a->v[a->n++] = (uint32_t)c;
        }
    }
    for (size_t i = 0; i < nrand; i++) a->v[a->n++] = random_scalar(r);
}

static uint32_t alpha_pick(sv_rng_t *r, const alpha_t *a) {
    return sv_rng_below(r, 8) == 0 ? random_scalar(r) : a->v[sv_rng_below(r, (uint32_t)a->n)];
}

static void random_string(sv_rng_t *r, const alpha_t *a, buf_t *s) {
    uint32_t len = sv_rng_below(r, 4) == 0 ? sv_rng_below(r, 24) : sv_rng_below(r, 8);
    s->n = 0;
    buf_str(s, "");
    for (uint32_t k = 0; k < len; k++) buf_cp(s, alpha_pick(r, a));
}

/* A random code-point boundary of s (invalid bytes count as one each). */
static size_t random_boundary(sv_rng_t *r, const buf_t *s) {
    size_t count = 1, pick, i = 0;
    uint32_t cp;
    for (size_t k = 0; k < s->n; count++) { int l = utf8_dec(s->p + k, s->n - k, &cp); k += l ? (size_t)l : 1; }
    pick = sv_rng_below(r, (uint32_t)count);
    while (pick-- && i < s->n) { int l = utf8_dec(s->p + i, s->n - i, &cp); i += l ? (size_t)l : 1; }
    return i;
}
static size_t next_boundary(const buf_t *s, size_t i) {
    uint32_t cp;
    if (i >= s->n) return s->n;
    int l = utf8_dec(s->p + i, s->n - i, &cp);
    return i + (l ? (size_t)l : 1);
}

static void splice(buf_t *s, size_t at, size_t del, const uint8_t *ins, size_t nins) {
    buf_reserve(s, nins);
    memmove(s->p + at + nins, s->p + at + del, s->n - at - del);
    if (nins) memcpy(s->p + at, ins, nins);
    s->n = s->n - del + nins;
    s->p[s->n] = 0;
}

/* One to three edits: code-point edits keep the string valid UTF-8, byte
 * edits usually do not (the DFA must then reject it). */
static void mutate(sv_rng_t *r, const alpha_t *a, buf_t *s, buf_t *tmp) {
    int rounds = 1 + (int)sv_rng_below(r, 3);
    for (int k = 0; k < rounds; k++) {
        size_t i = random_boundary(r, s), j = next_boundary(s, i);
        uint8_t u[4], byte = (uint8_t)sv_rng_next(r);
        size_t bi = s->n ? sv_rng_below(r, (uint32_t)s->n) : 0;
        switch (sv_rng_below(r, 16)) {
        case 0: case 1: case 2: splice(s, i, 0, u, (size_t)utf8_enc(alpha_pick(r, a), u)); break; /* insert */
        case 3: case 4: splice(s, i, j - i, NULL, 0); break;                                        /* delete */
        case 5: case 6: case 7: splice(s, i, j - i, u, (size_t)utf8_enc(alpha_pick(r, a), u)); break; /* replace */
        case 8: splice(s, bi, 0, &byte, 1); break;                                                /* insert a byte */
        case 9: if (s->n) splice(s, bi, 1, NULL, 0); break;                                       /* delete a byte */
        case 10: if (s->n) s->p[bi] = sv_rng_below(r, 2) ? byte : (uint8_t)(s->p[bi] ^ (1u << sv_rng_below(r, 8))); break;
        case 11: case 12: { /* duplicate a slice */
            size_t e = random_boundary(r, s);
            if (e < i) { size_t t = e; e = i; i = t; }
            buf_set(tmp, s->p + i, e - i);
            splice(s, e, 0, tmp->p, tmp->n);
            break;
        }
        case 13: case 14: { /* swap two neighbouring code points */
            size_t l = next_boundary(s, j);
            if (j >= s->n) break;
            buf_set(tmp, s->p + j, l - j);
            buf_add(tmp, s->p + i, j - i);
            memcpy(s->p + i, tmp->p, tmp->n);
            break;
        }
        default: s->n = i, s->p[i] = 0; break; /* truncate */
        }
        if (s->n > MAX_CANDIDATE) s->n = MAX_CANDIDATE, s->p[s->n] = 0;
    }
}

/* ---- one pattern ---------------------------------------------------------- */

typedef struct {
    long patterns, compiled, empty, compared, untranslatable, pcre_refused;
    long refused[SV_ERR_ARG + 1];
    long strings, agree, matched, disagree, giveups, invalid_rejected, invalid_accepted, pcre_errors;
    long bad_patterns; /* patterns with at least one disagreement */
} stats_t;

typedef struct {
    int nstrings;
    const sv_fsm_limits_t *lim; /* NULL for the defaults */
    bool strict;                /* built-in set: both sides must compile it */
    bool list_refusals;         /* print each pattern we refuse, or that matches nothing */
    pcre2_match_context *mctx;
    sv_rng_t rng;
    xlat_t x;
    buf_t cand, tmp, pool[POOL];
    size_t npool;
    uint8_t *sample;
} runner_t;

static void report(runner_t *R, const char *pat, size_t plen, const uint8_t *s, size_t n, bool ours, int theirs,
                   int *printed) {
    if ((*printed)++ >= PRINT_PER_PATTERN) return;
    fprintf(stderr, "DISAGREE pattern %s (PCRE2: %s) string %s: ours %s, PCRE2 %s\n", esc((const uint8_t *)pat, plen),
            esc(R->x.out.p, R->x.out.n), esc(s, n), ours ? "match" : "no match",
            theirs < 0 ? "invalid UTF-8" : theirs ? "match" : "no match");
}

static void keep(runner_t *R, const buf_t *s) {
    size_t k = R->npool < POOL ? R->npool++ : sv_rng_below(&R->rng, POOL);
    buf_set(&R->pool[k], s->p, s->n);
}

static void compare_pattern(runner_t *R, stats_t *st, const char *pat, size_t plen) {
    st->patterns++;
    sv_dfa_t *dfa = NULL;
    sv_error_t err;
    sv_error_clear(&err);
    sv_status rc = sv_regex_compile(pat, plen, R->lim, &dfa, &err);
    if (rc != SV_OK && rc != SV_ERR_EMPTY) {
        st->refused[rc <= SV_ERR_ARG ? rc : SV_ERR_ARG]++;
        CHECK(!R->strict, "built-in pattern %s refused: %s", esc((const uint8_t *)pat, plen), err.message);
        if (R->list_refusals) {
            translate((const uint8_t *)pat, plen, &R->x);
            pcre_t pc;
            char msg[300];
            bool theirs = !R->x.why && pcre_compile(&R->x.out, &pc, R->mctx, msg, sizeof msg);
            printf("  note: we refuse %s (%s: %s); PCRE2 %s\n", esc((const uint8_t *)pat, plen), sv_status_name(rc),
                   err.message, theirs ? "compiles it" : "refuses it too");
            if (theirs) pcre_free(&pc);
        }
        return;
    }
    st->compiled++;
    if (rc == SV_ERR_EMPTY) st->empty++;
    if (rc == SV_ERR_EMPTY && R->list_refusals)
        printf("  note: %s matches no string (PCRE2 must reject every candidate)\n", esc((const uint8_t *)pat, plen));
    translate((const uint8_t *)pat, plen, &R->x);
    if (R->x.why) {
        st->untranslatable++;
        CHECK(!R->strict, "built-in pattern %s cannot be translated for PCRE2: %s", esc((const uint8_t *)pat, plen), R->x.why);
        sv_dfa_destroy(dfa);
        return;
    }
    pcre_t pc;
    char msg[300];
    if (!pcre_compile(&R->x.out, &pc, R->mctx, msg, sizeof msg)) {
        st->pcre_refused++;
        printf("  note: we compile %s but PCRE2 refuses its translation %s: %s\n", esc((const uint8_t *)pat, plen),
               esc(R->x.out.p, R->x.out.n), msg);
        CHECK(!R->strict, "built-in pattern %s: PCRE2 refuses %s: %s", esc((const uint8_t *)pat, plen),
              esc(R->x.out.p, R->x.out.n), msg);
        sv_dfa_destroy(dfa);
        return;
    }
    st->compared++;
    alpha_t a;
    build_alphabet(&R->x, &R->rng, &a);
    R->npool = 0;
    int printed = 0;
    long bad = 0;
    for (int k = 0; k < R->nstrings; k++) {
        buf_t *s = &R->cand;
        int kind = dfa ? k % 3 : 1 + k % 2;
        if (kind == 0) {
            size_t len;
            uint32_t soft = sv_rng_below(&R->rng, 4) == 0 ? sv_rng_below(&R->rng, 64) : sv_rng_below(&R->rng, 12);
            if (sv_dfa_sample(dfa, &R->rng, soft, R->sample, SAMPLE_CAP, &len) != SV_OK) { kind = 2; goto random; }
            buf_set(s, R->sample, len);
            CHECK(sv_dfa_matches(dfa, s->p, s->n), "pattern %s: sampled string %s is not accepted by the DFA",
                  esc((const uint8_t *)pat, plen), esc(s->p, s->n));
        } else if (kind == 1) {
            if (R->npool) {
                const buf_t *seed = &R->pool[sv_rng_below(&R->rng, (uint32_t)R->npool)];
                buf_set(s, seed->p, seed->n);
            } else {
                random_string(&R->rng, &a, s);
            }
            mutate(&R->rng, &a, s, &R->tmp);
        } else {
        random:
            random_string(&R->rng, &a, s);
        }
        st->strings++;
        bool ours = dfa && sv_dfa_matches(dfa, s->p, s->n);
        if (!utf8_valid(s->p, s->n)) {
            if (ours) {
                st->invalid_accepted++, bad++;
                report(R, pat, plen, s->p, s->n, ours, -1, &printed);
            } else {
                st->invalid_rejected++;
            }
            continue;
        }
        int prc, theirs = pcre_full_match(&pc, s->p, s->n, &prc);
        if (theirs == -1) { st->giveups++; continue; }
        if (theirs == -2) {
            st->pcre_errors++, bad++;
            fprintf(stderr, "PCRE2 error %d on pattern %s string %s\n", prc, esc((const uint8_t *)pat, plen), esc(s->p, s->n));
            continue;
        }
        if (ours == (theirs == 1)) {
            st->agree++;
            st->matched += ours;
        } else {
            st->disagree++, bad++;
            report(R, pat, plen, s->p, s->n, ours, theirs, &printed);
        }
        if (ours || theirs == 1) keep(R, s);
    }
    if (printed > PRINT_PER_PATTERN)
        fprintf(stderr, "DISAGREE pattern %s: %d more not shown\n", esc((const uint8_t *)pat, plen), printed - PRINT_PER_PATTERN);
    CHECK(bad == 0, "pattern %s: %ld of %d strings disagree with PCRE2 (or are invalid UTF-8 we accept)",
          esc((const uint8_t *)pat, plen), bad, R->nstrings);
    if (bad) st->bad_patterns++;
    free(a.v);
    pcre_free(&pc);
    sv_dfa_destroy(dfa);
}

static void runner_init(runner_t *R, int nstrings, const sv_fsm_limits_t *lim, bool strict, uint64_t seed) {
    memset(R, 0, sizeof *R);
    R->nstrings = nstrings;
    R->lim = lim;
    R->strict = strict;
    R->mctx = pcre2_match_context_create(NULL);
    pcre2_set_match_limit(R->mctx, PCRE2_MATCH_LIMIT);
    sv_rng_seed(&R->rng, seed);
    R->sample = malloc(SAMPLE_CAP);
    if (!R->mctx || !R->sample) { fprintf(stderr, "test_regex_pcre2: out of memory\n"); exit(2); }
}

static void runner_free(runner_t *R) {
    pcre2_match_context_free(R->mctx);
    free(R->sample);
    free(R->x.cp);
    buf_free(&R->x.out);
    buf_free(&R->cand);
    buf_free(&R->tmp);
    for (int i = 0; i < POOL; i++) buf_free(&R->pool[i]);
}

/* ---- the built-in patterns ------------------------------------------------ */

/* Every construct of the dialect, each on its own and in company. */
static const char *const handwritten[] = {
    /* literals, multi-byte literals */
    "abc", "", "é", "中文", "😀", "a😀b", "héllo wörld", " ", "a b#c", ",:;'\"<>=!@%&~`/", "]", "}", "a]b}",
    "Ωμέγα", "\x7f", "日本語テキスト", "👍🏽", "e\xcc\x81",
    /* escapes */
    "\\n", "\\r\\n", "\\t", "\\f", "\\v", "\\0", "a\\0b", "\\x41", "\\x7f", "\\xe9", "\\xFF", "\\x00",
    "\\u0041", "\\u00e9", "\\u4e2d", "\\uffff", "\\uFEFF", "\\uD83D\\uDE00", "a\\uD83D\\uDE00+",
    "\\uD800\\uDC00", "\\uDBFF\\uDFFF", "\\u{1F600}", "\\u{41}", "\\u{10FFFF}", "\\u{0}", "\\u{00000041}",
    "\\cJ", "\\cj", "\\ca\\cZ", "\\e\\a", "\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\^\\$\\\\\\/\\-",
    "\\ ", "\\é", "\\,\\\"\\'\\#\\&\\~\\<\\>\\=\\!\\@\\%\\:",
    "[\\n\\r\\t\\v\\f]", "[\\b]", "[\\x41-\\x5a]+", "[\\u0041-\\u005A]", "[\\cA-\\cZ]", "[\\]\\[\\-\\^\\\\]",
    "[\\.]", "[\\u{1F600}-\\u{1F64F}]", "[\\uD83D\\uDE00-\\uD83D\\uDE4F]+", "[\\0]", "[\\e\\a]",
    /* classes */
    "[abc]", "[^abc]", "[a-z]", "[^a-z]", "[a-zA-Z0-9_]+", "[-a]", "[a-]", "[a-b-c]", "[--a]", "[^-a]",
    "[]", "[^]", "a[]", "[]|b", "[^]*", "[]]", "[]a]", "[^]a]", "[é-ë]", "[α-ω]+", "[一-龥]", "[😀-🙏]",
    "[^😀]", "[a-é]", "[^a-é]", "[\\^]", "[a^]", "[^^]", "[.]", "[$]", "[(|)]", "[*+?{}]", "[[]", "[a[]",
    /* ranges across UTF-8 length boundaries */
    "[\\u007f-\\u0800]", "[\\u07ff-\\uffff]", "[\\uffff-\\u{10000}]", "[\\u0080-\\u07ff]",
    "[\\u0000-\\u{10FFFF}]", "[^\\u0080-\\u{10FFFF}]", "[\\u00ff-\\u0100]", "[\\u{FFFF}-\\u{10FFFF}]",
    "[\\uD7FF-\\uE000]", "[^\\uE000-\\uFFFF]", "[\\u{10000}-\\u{3FFFF}]", "[\\u{40000}-\\u{10FFFF}]",
    "[\\u0000-\\u007f]", "[^\\u0000-\\u007f]", "[\\u{10FFFE}-\\u{10FFFF}]", "[\\u0800-\\u0fff\\u{1000}]",
    /* \d \w \s and negations, inside and outside classes */
    "\\d+", "\\D", "\\w+", "\\W", "\\s", "\\S", "\\s*\\S+\\s*", "[\\d]", "[\\D]", "[\\w-]", "[\\w.-]+",
    "[^\\d]", "[^\\w]", "[\\s]", "[^\\s]", "[\\S]", "[^\\S]", "[a\\S]", "[^a\\S]", "[\\s\\S]", "[^\\s\\S]",
    "[\\d\\s]", "[^\\d\\s]", "[\\S\\d]", "[^\\S\\d]", "[\\W\\d]", "[^\\W\\d]", "[\\d-z]", "[a-\\d]",
    "[\\s-a]", "[\\S-a]", "[^\\S^]", "[\\DA]", "[\\w\\W]", "[^\\w\\W]", "\\S\\s", "[\\S\\s]+a",
    /* Unicode properties */
    "\\p{L}", "\\p{Lu}", "\\P{N}", "\\p{Nd}", "\\p{Ll}+", "\\P{L}", "[\\p{L}\\p{N}]+", "[^\\p{L}]",
    "\\p{Letter}", "\\p{gc=Lu}", "\\p{General_Category=Nd}", "\\p{Zs}", "\\p{Sc}", "\\p{Cc}", "\\p{Cf}",
    "\\p{Co}", "\\p{Cn}", "\\p{Mn}", "\\p{P}", "\\p{S}", "\\p{Z}", "\\p{C}", "\\p{M}", "\\p{Any}",
    "\\p{L&}", "\\p{Lt}", "\\p{Lm}", "\\p{Lo}", "\\p{No}", "\\p{Nl}", "\\p{Pd}", "\\p{Sm}", "\\p{So}",
    "\\p{^L}", "\\P{^L}", "[\\P{L}a]", "[^\\P{Lu}]", "\\p{Cs}", "\\P{Cs}", "\\p{Uppercase_Letter}",
    "[\\p{Lu}-]", "[\\p{Nd}\\s]+", "[^\\p{L}\\D]", "[^\\W\\p{Lu}]", "[^\\P{L}\\D]+", "[^\\D\\P{Nd}]",
    "[^\\d\\p{L}]", "[\\p{L}\\D]", "\\P{L}*\\P{N}", "\\P{L}{1,3}?\\P{N}", "[]*a", "[]?a", "a[]{0,2}", "([]|b)*",
    /* dot */
    ".", ".*", "a.b", ".+é", "\\.", "(.|\\n)*", "[^.]",
    /* alternation */
    "a|b", "a|", "|a", "|", "a||b", "(a|)", "(|a)+", "abc|abd|ab", "é|中|😀", "(a|b)*c", "((a|b)|c)",
    /* quantifiers, lazy ones */
    "a*", "a+", "a?", "a{3}", "a{2,}", "a{2,4}", "a{0}", "a{0,0}", "a{0,1}", "a*?", "a+?", "a??",
    "a{2}?", "a{2,}?", "a{2,4}?", "(ab){2,3}", "é{2}", "😀{1,3}", "[a-c]{3,5}", "\\d{4}-\\d{2}-\\d{2}",
    "(a*)*", "(a+)+b", "(a|aa)+", "(a?){3}", "a{1000}", "x{0,100}", "(?:a{2}){3}", "a{10,}", "b(a{0})c",
    /* a `{` that does not start a quantifier is literal */
    "a{", "x{,3}", "{", "a{1", "a{1,", "a{1,2", "a{a}", "{}", "a{ 1}", "\\{\\d+\\}", "{abc}", "a{,}",
    /* groups */
    "(a)", "(?:a)", "(?<name>a+)b", "(?<n1>x)(?<n2>y)?", "(?P<py>a)", "((a))", "(((a)b)c)d", "()", "(?:)",
    "a()b", "(a(b(c(d)?)?)?)?",
    /* ^ and $ anywhere */
    "^a", "a$", "^a$", "^$", "^", "$", "(^a|b)c", "a(b$|c)", "(^|x)y", "x($|y)", "a^b", "a$b", "^^a$$",
    "(^a)*", "(a|^)b", "^(a|b$)*", "\\Aabc\\z", "\\A(a|b)+\\z", "a*$b*", "(^)*", "(^a|^b)+", "(a$|b)+",
    "(^|a)+b", "(a|$)(b|$)", "(?:^|,)x(?:$|,)",
    /* real-world shapes */
    "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$", "^\\d{3}-\\d{3}-\\d{4}$",
    "^(\\+\\d{1,3})?\\s?\\(?\\d{3}\\)?[\\s.-]?\\d{3}[\\s.-]?\\d{4}$", "^[A-Z]{2}\\d{2}[A-Z0-9]{1,30}$",
    "^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$", "^(?:[0-9]{1,3}\\.){3}[0-9]{1,3}$", "^https?://[^\\s/$.?#].[^\\s]*$",
    "^[\\p{L} '-]+$", "^\\S+$", "^(\\([0-9]{3}\\))?[0-9]{3}-[0-9]{4}$", "^[^@]+@[^@]+$",
    "^\\w+([.-]?\\w+)*@\\w+([.-]?\\w+)*(\\.\\w{2,3})+$", "^(0|[1-9][0-9]*)(\\.[0-9]+)?$",
    "^[a-z0-9]+(?:-[a-z0-9]+)*$", "^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
    "^\\p{Lu}\\p{Ll}*(\\s\\p{Lu}\\p{Ll}*)*$", "^(([01]?\\d)|(2[0-3])):[0-5]\\d$", ".*\\S.*",
    "^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])T([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})$",
    "^[^\\x00-\\x1f\\x7f]*$", "[:a:]", "[.b.]+", "[=c=]", "[^:x:]", "[^.\\S.]",
};

/* ---- the generated patterns ------------------------------------------------- */

/* A small grammar over a small alphabet that mixes ASCII and multi-byte
 * characters. Assertions are never quantified (`^*` is an error in both
 * dialects); group names are numbered so PCRE2 never sees a duplicate. */
typedef struct { sv_rng_t *r; buf_t *b; int names; } gen_t;

static const char *pick(sv_rng_t *r, const char *const *v, uint32_t n) { return v[sv_rng_below(r, n)]; }
#define PICK(r, arr) pick(r, arr, (uint32_t)(sizeof arr / sizeof arr[0]))

static void gen_alt(gen_t *g, int depth);

static void gen_class(gen_t *g) {
    static const char *const items[] = {
        "a", "b", "z", "é", "中", "😀", "\\-", "a-c", "a-é", "é-中", "\\u00e0-\\u00ff", "0-9", "\\d", "\\D",
        "\\w", "\\W", "\\s", "\\S", "\\p{L}", "\\P{Lu}", ".", "\\n", "\\u2028", "\\u{1F600}-\\u{1F64F}", "^",
    };
    buf_str(g->b, sv_rng_below(g->r, 3) == 0 ? "[^" : "[");
    uint32_t n = sv_rng_below(g->r, 12) == 0 ? 0 : 1 + sv_rng_below(g->r, 3); /* [] and [^] now and then */
    for (uint32_t i = 0; i < n; i++) {
        const char *it = PICK(g->r, items);
        if (i == 0 && it[0] == '^') it = "\\^";
        buf_str(g->b, it);
    }
    buf_str(g->b, "]");
}

static void gen_piece(gen_t *g, int depth) {
    static const char *const chars[] = {"a", "b", "c", "é", "中", "😀", "-", ",", "\\.", "\\u00e9", "\\x62",
                                        "\\u{1F600}", "\\uD83D\\uDE00", "{", "}", "\\n", " ", "\\t", "\\v",
                                        "\\cJ", "\\0", "\\/", "\\-", "\\u{41}", "x{,2}", "a{", "\\xff",
                                        "\\u2028", "\\p{Lu}", "\\P{Nd}", "\\p{^N}"};
    static const char *const sets[] = {".", "\\d", "\\D", "\\w", "\\W", "\\s", "\\S", "\\p{L}", "\\P{L}", "\\p{Lu}", "\\p{N}"};
    static const char *const quants[] = {"*", "+", "?", "{2}", "{1,}", "{0,2}", "{1,3}", "{0}", "{3}"};
    uint32_t r = sv_rng_below(g->r, 20);
    bool repeatable = true;
    if (r < 7) {
        buf_str(g->b, PICK(g->r, chars));
    } else if (r < 10) {
        gen_class(g);
    } else if (r < 13) {
        buf_str(g->b, PICK(g->r, sets));
    } else if (r < 16 && depth < 3) {
        uint32_t kind = sv_rng_below(g->r, 3);
        if (kind == 0) buf_str(g->b, "(");
        else if (kind == 1) buf_str(g->b, "(?:");
        else buf_fmt(g->b, "(?<g%d>", g->names++);
        gen_alt(g, depth + 1);
        buf_str(g->b, ")");
    } else if (r == 16) {
        buf_str(g->b, "^");
        repeatable = false;
    } else if (r == 17) {
        buf_str(g->b, "$");
        repeatable = false;
    } else {
        buf_str(g->b, PICK(g->r, chars));
    }
    if (repeatable && sv_rng_below(g->r, 5) < 2) {
        buf_str(g->b, PICK(g->r, quants));
        if (sv_rng_below(g->r, 4) == 0) buf_str(g->b, "?");
    }
}

static void gen_alt(gen_t *g, int depth) {
    uint32_t branches = 1 + (sv_rng_below(g->r, 3) == 0 ? sv_rng_below(g->r, 3) : 0);
    for (uint32_t b = 0; b < branches; b++) {
        if (b) buf_str(g->b, "|");
        uint32_t pieces = sv_rng_below(g->r, depth ? 4 : 6);
        for (uint32_t k = 0; k < pieces; k++) gen_piece(g, depth);
    }
}

/* A code point on or next to a place where UTF-8 byte ranges split (the
 * ends of 64-, 4096- and 262144-code-point blocks), or anywhere. */
static uint32_t edge_cp(sv_rng_t *r) {
    static const uint32_t masks[] = {0x3F, 0xFFF, 0x3FFFF};
    for (;;) {
        uint32_t cp = random_scalar(r), m = masks[sv_rng_below(r, 3)];
        switch (sv_rng_below(r, 6)) {
        case 0: cp |= m; break;
        case 1: cp &= ~m; break;
        case 2: cp = (cp | m) - 1; break;
        case 3: cp = (cp & ~m) + 1; break;
        default: break;
        }
        if (cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF)) return cp;
    }
}

/* A class of one to three such ranges, possibly negated and repeated. */
static void gen_range_class(sv_rng_t *r, buf_t *b) {
    static const char *const quants[] = {"", "+", "*", "{2}", "{1,3}"};
    buf_str(b, sv_rng_below(r, 3) == 0 ? "[^" : "[");
    for (uint32_t n = 1 + sv_rng_below(r, 3); n; n--) {
        uint32_t lo = edge_cp(r), hi = edge_cp(r);
        if (lo > hi) { uint32_t t = lo; lo = hi; hi = t; }
        buf_fmt(b, "\\u{%X}-\\u{%X}", lo, hi);
    }
    buf_str(b, "]");
    buf_str(b, PICK(r, quants));
}

/* ---- what PCRE2 cannot check: hand-written expectations ------------------- */

static void expect(const char *pat, sv_status want, const char *const *acc, const char *const *rej) {
    sv_dfa_t *d = NULL;
    sv_error_t err;
    sv_error_clear(&err);
    sv_status st = sv_regex_compile(pat, strlen(pat), NULL, &d, &err);
    CHECK(st == want, "pattern %s: status %s, expected %s (%s)", escs(pat), sv_status_name(st), sv_status_name(want),
          err.message);
    for (int i = 0; acc && acc[i]; i++)
        CHECK(d && sv_dfa_matches(d, (const uint8_t *)acc[i], strlen(acc[i])), "pattern %s should match %s", escs(pat),
              escs(acc[i]));
    for (int i = 0; rej && rej[i]; i++)
        CHECK(!d || !sv_dfa_matches(d, (const uint8_t *)rej[i], strlen(rej[i])), "pattern %s should not match %s",
              escs(pat), escs(rej[i]));
    sv_dfa_destroy(d);
}
#define STRS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The 25 code points of ECMA-262 \s, as UTF-8. */
static const char *const ecma_spaces[] = {
    "\t", "\n", "\v", "\f", "\r", " ", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81", "\xE2\x80\x82",
    "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89",
    "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80", "\xEF\xBB\xBF", NULL,
};
/* Look like spaces, or are spaces elsewhere, but not in ECMA-262 \s:
 * NEL (U+0085), MONGOLIAN VOWEL SEPARATOR (U+180E, Zs before Unicode 6.3),
 * ZERO WIDTH SPACE (U+200B), WORD JOINER (U+2060), U+001C..U+001F. */
static const char *const not_spaces[] = {
    "\xC2\x85", "\xE1\xA0\x8E", "\xE2\x80\x8B", "\xE2\x81\xA0", "\x1c", "\x1f", "a", "", "  ", NULL,
};

static void check_expectations(void) {
    /* Lone surrogates: no UTF-8 text contains one, so they match nothing. */
    expect("\\uD800", SV_ERR_EMPTY, NULL, NULL);
    expect("\\uDFFF", SV_ERR_EMPTY, NULL, NULL);
    expect("\\u{D800}", SV_ERR_EMPTY, NULL, NULL);
    expect("[\\uD800-\\uDFFF]", SV_ERR_EMPTY, NULL, NULL);
    expect("\\uD83D\\u0041", SV_ERR_EMPTY, NULL, NULL); /* a high surrogate, then A: no pair */
    expect("\\uDE00\\uD83D", SV_ERR_EMPTY, NULL, NULL); /* low then high: no pair */
    expect("\\uD83Da", SV_ERR_EMPTY, NULL, NULL);
    expect("a|\\uD800", SV_OK, STRS("a"), STRS("", "\xED\xA0\x80", "a\xED\xA0\x80"));
    expect("\\uD800?a", SV_OK, STRS("a"), STRS("\xED\xA0\x80" "a", ""));
    expect("\\uD800*a", SV_OK, STRS("a"), STRS("\xED\xA0\x80" "a"));
    expect("[\\uD800-\\uDFFFa]", SV_OK, STRS("a"), STRS("b", "\xED\xA0\x80", "\xED\xBF\xBF"));
    expect("[^\\uD800]", SV_OK, STRS("a", "\xED\x9F\xBF", "\xEE\x80\x80", "\xF0\x9F\x98\x80", "b"),
           STRS("", "\xED\xA0\x80", "ab"));
    expect("[^\\uD800-\\uDFFF]+", SV_OK, STRS("\xED\x9F\xBF\xEE\x80\x80", "\xF4\x8F\xBF\xBF"), STRS("\xED\xA0\x80", "\xED\xBF\xBF"));
    /* A surrogate pair is one code point, in and out of classes, and never its CESU-8 form. */
    expect("\\uD83D\\uDE00", SV_OK, STRS("\xF0\x9F\x98\x80"), STRS("", "\xED\xA0\xBD\xED\xB8\x80", "\xF0\x9F\x98\x81"));
    expect("[\\uD83D\\uDE00]", SV_OK, STRS("\xF0\x9F\x98\x80"), STRS("\xED\xA0\xBD", "\xED\xB8\x80", "\xF0\x9F\x98\x80\xF0\x9F\x98\x80"));
    expect("[\\uD83D\\uDE00-\\uD83D\\uDE4F]+", SV_OK, STRS("\xF0\x9F\x98\x80\xF0\x9F\x99\x8F", "\xF0\x9F\x99\x82"),
           STRS("\xF0\x9F\x9A\x80", "a"));
    expect("\\uD83D\\uDE00{2}", SV_OK, STRS("\xF0\x9F\x98\x80\xF0\x9F\x98\x80"), STRS("\xF0\x9F\x98\x80"));
    expect("\\u{1F600}", SV_OK, STRS("\xF0\x9F\x98\x80"), STRS("\xED\xA0\xBD\xED\xB8\x80"));
    /* \s is ECMA-262's: Unicode spaces and line terminators, and nothing else. */
    for (int i = 0; ecma_spaces[i]; i++) {
        expect("\\s", SV_OK, STRS(ecma_spaces[i]), NULL);
        expect("[\\s]", SV_OK, STRS(ecma_spaces[i]), NULL);
        expect("\\S", SV_OK, NULL, STRS(ecma_spaces[i]));
        expect("[^\\s]", SV_OK, NULL, STRS(ecma_spaces[i]));
        expect("[a\\S]", SV_OK, STRS("a"), STRS(ecma_spaces[i]));
        expect("[^a\\S]", SV_OK, STRS(ecma_spaces[i]), STRS("a", "b"));
    }
    for (int i = 0; not_spaces[i]; i++) expect("\\s", SV_OK, NULL, STRS(not_spaces[i]));
    expect("\\S", SV_OK, STRS("\xC2\x85", "\xE1\xA0\x8E", "\xE2\x80\x8B", "a"), STRS(""));
    /* `.` excludes exactly the four line terminators. */
    expect(".", SV_OK, STRS("\xC2\x85", "\v", "\f", "\t", "\x7f", "\xF0\x9F\x98\x80", "\xEF\xBB\xBF", "\xF4\x8F\xBF\xBF"),
           STRS("\n", "\r", "\xE2\x80\xA8", "\xE2\x80\xA9", "", "\r\n"));
    expect("[^]", SV_OK, STRS("\n", "\r", "\xE2\x80\xA8", "a"), STRS("", "ab"));
    expect("[]", SV_ERR_EMPTY, NULL, NULL);
    expect("a[]b|c", SV_OK, STRS("c"), STRS("ab", "a", ""));
    /* \d and \w are ASCII; \p{..} is Unicode. */
    expect("\\d", SV_OK, STRS("0", "9"), STRS("\xD9\xA3", "\xEF\xBC\x91", "a"));
    expect("\\w", SV_OK, STRS("a", "Z", "_", "5"), STRS("\xC3\xA9", "\xC5\xBF", "\xE2\x84\xAA", "-"));
    expect("\\p{Nd}", SV_OK, STRS("0", "\xD9\xA3", "\xEF\xBC\x91"), STRS("a", "\xC2\xB2"));
    expect("\\p{Lu}", SV_OK, STRS("\xC3\x89", "\xCE\xA3", "A"), STRS("\xC3\xA9", "\xCF\x83", "a"));
    expect("\\p{L}", SV_OK, STRS("\xE4\xB8\xAD", "a", "\xC3\xA9"), STRS("1", "\xF0\x9F\x98\x80", " "));
    expect("[^\\p{L}\\D]", SV_OK, STRS("5"), STRS("\xE2\x80\x94", "\xD0\xAB", "a", "\xD9\xA3"));
    expect("[^\\W\\p{Lu}]", SV_OK, STRS("5", "a", "_"), STRS("\xE4\xB8\xAD", "A", "\xC3\xA9"));
    expect("[]*a", SV_OK, STRS("a"), STRS("", "aa"));
    expect("\\P{L}", SV_OK, STRS("1", "\xF0\x9F\x98\x80", "\n"), STRS("a", "\xE4\xB8\xAD"));
    /* Escapes that name one code point. */
    expect("\\cJ\\cj\\x41\\u0042\\u{43}\\0", SV_OK, NULL, STRS("\n\nABC"));
    expect("\\cJ\\cj\\x41\\u0042\\u{43}", SV_OK, STRS("\n\nABC"), STRS("\n\nAB"));
    expect("\\v\\f\\e\\a", SV_OK, STRS("\v\f\x1b\x07"), NULL);
    /* A `{` that is not a quantifier is literal. */
    expect("x{,3}", SV_OK, STRS("x{,3}"), STRS("x", "xxx", ""));
    expect("a{", SV_OK, STRS("a{"), STRS("a"));
    expect("a{1,", SV_OK, STRS("a{1,"), STRS("a"));
    /* Assertions anywhere. */
    expect("(^a|b)c", SV_OK, STRS("ac", "bc"), STRS("c", "abc", "bac"));
    expect("a(b$|c)", SV_OK, STRS("ab", "ac"), STRS("abc", "acb"));
    expect("a$b", SV_ERR_EMPTY, NULL, NULL);
    expect("(a|$)(b|$)", SV_OK, STRS("", "a", "ab"), STRS("b", "ba"));
}

/* Patterns whose language is fine but whose bytes are not UTF-8: the DFA
 * must reject every ill-formed sequence, not just fail to produce one. */
static void check_invalid_utf8(void) {
    static const char *const patterns[] = {
        ".*", "[^a]*", "[^]*", "\\S*", "\\D*", "\\W*", "\\P{L}*", "[\\u0000-\\u{10FFFF}]*", "\\p{Any}*",
        "(.|\\n)*", "[\\s\\S]*", "\\P{Cs}*", "[^\\uD800-\\uDFFF]*", "\\p{Cn}*", "[\\u0080-\\u{10FFFF}]*",
    };
    static const char *const invalid[] = {
        "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF", /* overlong */
        "\xED\xA0\x80", "\xED\xBF\xBF", "\xED\xA0\xBD\xED\xB8\x80",                                  /* surrogates */
        "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xF7\xBF\xBF\xBF", "\xF8\x88\x80\x80\x80",          /* > U+10FFFF */
        "\xFE", "\xFF", "\x80", "\xBF", "a\x80", "\x80" "a", "\xC3\xA9\x80",                         /* stray bytes */
        "\xC3", "\xE4\xB8", "\xF0\x9F\x98", "\xE4\xB8" "a", "\xF0\x9F" "ab", "a\xC3",               /* truncated */
        "\xC3\xC3\xA9", "\xE4\x41\xAD",
    };
    for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
        sv_dfa_t *d = NULL;
        sv_error_t err;
        sv_status st = sv_regex_compile(patterns[p], strlen(patterns[p]), NULL, &d, &err);
        CHECK(st == SV_OK, "pattern %s: %s", escs(patterns[p]), err.message);
        if (st) continue;
        for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
            CHECK(!sv_dfa_matches(d, (const uint8_t *)invalid[i], strlen(invalid[i])),
                  "pattern %s accepts the invalid UTF-8 %s", escs(patterns[p]), escs(invalid[i]));
        /* U+0080 U+D7FF U+E000 U+10FFFF: a control, two unassigned, a private use. */
        const char *valid = strstr(patterns[p], "Cn") ? "\xED\x9F\xBF\xF4\x8F\xBF\xBF"
                                                      : "\xC2\x80\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF";
        CHECK(sv_dfa_matches(d, (const uint8_t *)valid, strlen(valid)), "pattern %s rejects the valid UTF-8 %s",
              escs(patterns[p]), escs(valid));
        sv_dfa_destroy(d);
    }
}

/* Constructs outside the dialect: refused with SV_ERR_UNSUPPORTED at the
 * construct's byte offset, never compiled to something else. */
static void check_refusals(void) {
    static const struct { const char *pat; long offset; } cases[] = {
        {"a(?=b)", 1}, {"a(?!b)", 1}, {"(?<=a)b", 0}, {"(?<!a)b", 0}, {"(a)\\1", 3}, {"(?<n>a)\\k<n>", 7},
        {"a\\b", 1}, {"a\\Bb", 1}, {"a*+", 2}, {"a++", 2}, {"a?+", 2}, {"a{2}+", 4}, {"(?i)a", 0},
        {"a(?i:b)", 1}, {"[[:alpha:]]", 1}, {"x[[:digit:]]", 2}, {"(?>a)", 0}, {"\\p{Greek}", 0},
        {"ab\\p{Script=Latin}", 2}, {"a\\Z", 1}, {"\\G", 0}, {"(?#c)", 0}, {"\\01", 0},
        {"(?P<n>a)(?P=n)", 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sv_dfa_t *d = NULL;
        sv_error_t err;
        sv_error_clear(&err);
        sv_status st = sv_regex_compile(cases[i].pat, strlen(cases[i].pat), NULL, &d, &err);
        CHECK(st == SV_ERR_UNSUPPORTED && err.offset == cases[i].offset,
              "pattern %s: got %s at offset %ld (%s), expected unsupported at %ld", escs(cases[i].pat),
              sv_status_name(st), err.offset, err.message, cases[i].offset);
        sv_dfa_destroy(d);
    }
}

/* ---- main -------------------------------------------------------------------- */

static void print_refusals(const stats_t *st) {
    printf("  refused by us: unsupported %ld, budget %ld, timeout %ld, syntax %ld, other %ld\n",
           st->refused[SV_ERR_UNSUPPORTED], st->refused[SV_ERR_BUDGET], st->refused[SV_ERR_TIMEOUT],
           st->refused[SV_ERR_SYNTAX], st->refused[SV_ERR_NOMEM] + st->refused[SV_ERR_IO] + st->refused[SV_ERR_ARG]);
}

static void print_strings(const stats_t *st) {
    printf("  strings %ld: %ld agreements (%ld matched by both), %ld disagreements, %ld PCRE2 match-limit skips; "
           "%ld invalid UTF-8 rejected by the DFA, %ld accepted; %ld PCRE2 errors; %ld patterns disagree\n",
           st->strings, st->agree, st->matched, st->disagree, st->giveups, st->invalid_rejected, st->invalid_accepted,
           st->pcre_errors, st->bad_patterns);
}

/* ngrammar + nrange generated patterns from seed (the ctest run uses the
 * defaults; larger runs with other seeds are a cheap fuzzer). */
static int run_builtin(int ngrammar, int nrange, uint64_t seed, int nstrings) {
    uint64_t t0 = sv_now_ns();
    check_expectations();
    check_invalid_utf8();
    check_refusals();
    runner_t R;
    runner_init(&R, nstrings, NULL, true, seed ^ 0x51e7e5eedull);
    stats_t st = {0};
    size_t nhand = sizeof handwritten / sizeof handwritten[0];
    for (size_t i = 0; i < nhand; i++) compare_pattern(&R, &st, handwritten[i], strlen(handwritten[i]));
    long hand_compared = st.compared;
    sv_rng_t gr;
    sv_rng_seed(&gr, seed);
    buf_t pat = {0};
    R.strict = false; /* reported below with the generated pattern */
    for (int i = 0; i < ngrammar + nrange; i++) {
        pat.n = 0;
        buf_str(&pat, "");
        gen_t g = {&gr, &pat, 0};
        if (i < ngrammar) gen_alt(&g, 0);
        else gen_range_class(&gr, &pat);
        long refused_before = st.patterns - st.compiled - st.refused[SV_ERR_BUDGET] - st.refused[SV_ERR_TIMEOUT];
        long pcre_refused_before = st.pcre_refused;
        compare_pattern(&R, &st, (const char *)pat.p, pat.n);
        /* A random pattern may blow a state budget (a larger run finds some). */
        CHECK(st.patterns - st.compiled - st.refused[SV_ERR_BUDGET] - st.refused[SV_ERR_TIMEOUT] == refused_before,
              "generated pattern %s is refused", esc(pat.p, pat.n));
        CHECK(!R.x.why, "generated pattern %s cannot be translated: %s", esc(pat.p, pat.n), R.x.why ? R.x.why : "");
        CHECK(st.pcre_refused == pcre_refused_before, "PCRE2 refuses generated pattern %s", esc(pat.p, pat.n));
    }
    buf_free(&pat);
    CHECK(nhand >= 130 && st.compared >= (long)nhand + ngrammar + nrange - 10, "too few patterns compared: %ld",
          st.compared);
    double secs = (double)(sv_now_ns() - t0) / 1e9;
    printf("test_regex_pcre2: %ld patterns (%zu hand-written, %d generated) x %d strings each: %ld agreements, "
           "%ld disagreements, %ld PCRE2 match-limit skips (%.1f s)\n",
           st.patterns, nhand, ngrammar + nrange, nstrings, st.agree, st.disagree, st.giveups, secs);
    printf("  compared %ld patterns (%ld hand-written), %ld matching nothing\n", st.compared, hand_compared, st.empty);
    print_refusals(&st);
    print_strings(&st);
    runner_free(&R);
    return test_summary("test_regex_pcre2: the regex DFA against PCRE2, plus hand-written expectations");
}

static int run_corpus(const char *path, int nstrings) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "test_regex_pcre2: cannot open %s\n", path);
        return 1;
    }
    uint64_t t0 = sv_now_ns();
    sv_fsm_limits_t lim;
    sv_fsm_limits_default(&lim);
    lim.max_time_us = CORPUS_TIME_US;
    runner_t R;
    runner_init(&R, nstrings, &lim, false, 0xc0de5eedull);
    R.list_refusals = true;
    stats_t st = {0};
    long unreadable = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len) continue;
        json_error_t je;
        json_t *j = json_loadb(line, (size_t)len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!j || !json_is_string(j)) {
            unreadable++;
            fprintf(stderr, "test_regex_pcre2: %s: not a JSON string: %s (%s)\n", path, line, j ? "not a string" : je.text);
            json_decref(j);
            continue;
        }
        compare_pattern(&R, &st, json_string_value(j), json_string_length(j));
        json_decref(j);
    }
    free(line);
    fclose(f);
    CHECK(unreadable == 0, "%ld lines of %s are not JSON strings", unreadable, path);
    CHECK(st.patterns > 0, "no patterns in %s", path);
    double secs = (double)(sv_now_ns() - t0) / 1e9;
    printf("test_regex_pcre2 --patterns %s: %ld patterns x %d strings (%.1f s)\n", path, st.patterns, nstrings, secs);
    printf("  compiled %ld (%ld matching nothing); untranslatable for PCRE2 %ld; PCRE2 refuses %ld; compared %ld\n",
           st.compiled, st.empty, st.untranslatable, st.pcre_refused, st.compared);
    print_refusals(&st);
    print_strings(&st);
    runner_free(&R);
    return test_summary("test_regex_pcre2: real-world schema patterns against PCRE2");
}

/* test_regex_pcre2                      the built-in patterns (ctest)
 * test_regex_pcre2 --generated N --seed S   with N grammar patterns (and N/3
 *                                       range classes) from seed S
 * test_regex_pcre2 --patterns FILE      the patterns of FILE (one JSON string a line)
 * --strings N sets the candidates per pattern in either mode. */
int main(int argc, char **argv) {
    const char *patterns = NULL;
    int nstrings = 0, ngrammar = GRAMMAR_PATTERNS, nrange = RANGE_PATTERNS;
    uint64_t seed = 20240611;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--patterns") && i + 1 < argc) {
            patterns = argv[++i];
        } else if (!strcmp(argv[i], "--strings") && i + 1 < argc) {
            nstrings = atoi(argv[++i]);
            if (nstrings <= 0) goto usage;
        } else if (!strcmp(argv[i], "--generated") && i + 1 < argc) {
            ngrammar = atoi(argv[++i]);
            nrange = ngrammar / 3;
            if (ngrammar < 0) goto usage;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
        } else {
            goto usage;
        }
    }
    if (patterns) return run_corpus(patterns, nstrings ? nstrings : CORPUS_STRINGS);
    return run_builtin(ngrammar, nrange, seed, nstrings ? nstrings : BUILTIN_STRINGS);
usage:
    fprintf(stderr, "usage: %s [--generated N] [--seed S] [--strings N] | --patterns FILE [--strings N]\n", argv[0]);
    return 2;
}
