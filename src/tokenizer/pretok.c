/* pretok.c — pre-tokenizer steps as PCRE2 regex splits.
 *
 * Dialect. Hugging Face runs Split patterns with Oniguruma (Ruby syntax,
 * UTF-8). PCRE2 in UTF mode agrees on the constructs these patterns use
 * (alternation, \p{L} and \p{N}, (?i:...), (?!...), bounded repeats) with
 * three exceptions that sv_pretok_translate rewrites:
 *  - \s: Oniguruma's is U+0009..U+000D, U+0085 and the Z categories; PCRE2's
 *    (with UCP) also has U+180E. Both \s and \S become explicit classes.
 *  - \d and \w: Oniguruma's are Unicode (\p{Nd}; letters, marks, decimal
 *    digits, connector punctuation); PCRE2's depend on UCP and version.
 *  - \h is a hexadecimal digit in Oniguruma, horizontal space in PCRE2.
 * Ruby's ^ and $ are line anchors: patterns compile with PCRE2_MULTILINE.
 * A remaining difference is the Unicode version: PCRE2 10.42 (Debian 12) has
 * Unicode 14, Oniguruma in tokenizers 0.23 has Unicode 16, so letters and
 * digits assigned since Unicode 14 are not \p{L} / \p{N} here.
 *
 * Matching follows tokenizers' Pattern for SysRegex: matches and the gaps
 * between them cover the piece; an empty match right where the previous one
 * ended is skipped by advancing one character (as the onig crate does). The
 * split behaviors (Isolated, Removed, MergedWith*, Contiguous) then decide
 * which of those become pieces, and empty pieces are dropped. */
#include "pretok.h"

#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

#define ONIG_SPACE "\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}"
#define ONIG_WORD "\\p{L}\\p{M}\\p{Nd}\\p{Pc}"

typedef struct {
    pcre2_code *code;   /* NULL: the step only adds a prefix space */
    const sv_pretok_step_t *step;
} compiled_t;

struct sv_pretok {
    compiled_t steps[SV_PRETOK_MAX_STEPS];
    uint32_t n;
};

static sv_status put(sv_bytes_t *out, const char *s) { return sv_bytes_append(out, s, strlen(s)); }

sv_status sv_pretok_translate(const char *pattern, sv_bytes_t *out, sv_error_t *err) {
    out->n = 0;
    bool in_class = false;
    size_t class_start = 0;  /* offset just after '[' or '[^' */
    sv_status st = SV_OK;
    for (size_t i = 0; pattern[i] && !st; i++) {
        char c = pattern[i];
        if (c == '\\') {
            char e = pattern[i + 1];
            if (!e)
                return sv_error_set(err, SV_ERR_SYNTAX, (long)i, "regex: trailing backslash");
            i++;
            const char *rep = NULL;
            switch (e) {
            case 's': rep = in_class ? ONIG_SPACE : "[" ONIG_SPACE "]"; break;
            case 'S': rep = in_class ? NULL : "[^" ONIG_SPACE "]"; break;
            case 'w': rep = in_class ? ONIG_WORD : "[" ONIG_WORD "]"; break;
            case 'W': rep = in_class ? NULL : "[^" ONIG_WORD "]"; break;
            case 'd': rep = "\\p{Nd}"; break;
            case 'D': rep = "\\P{Nd}"; break;
            case 'h': rep = in_class ? "0-9a-fA-F" : "[0-9a-fA-F]"; break;
            case 'H': rep = in_class ? NULL : "[^0-9a-fA-F]"; break;
            default: {
                char esc[3] = {'\\', e, 0};
                st = put(out, esc);
                continue;
            }
            }
            if (!rep)
                return sv_error_set(err, SV_ERR_UNSUPPORTED, (long)i - 1,
                                    "regex: \\%c inside a character class is not supported", e);
            st = put(out, rep);
            continue;
        }
        if (in_class) {
            if (c == ']' && i > class_start) {
                in_class = false;
            } else if (c == '[' && pattern[i + 1] != ':') {
                return sv_error_set(err, SV_ERR_UNSUPPORTED, (long)i,
                                    "regex: nested character classes are not supported");
            } else if (c == '&' && pattern[i + 1] == '&') {
                return sv_error_set(err, SV_ERR_UNSUPPORTED, (long)i,
                                    "regex: class intersection (&&) is not supported");
            }
        } else if (c == '[') {
            in_class = true;
            class_start = i + 1 + (pattern[i + 1] == '^');
        }
        st = sv_bytes_append(out, &c, 1);
    }
    if (!st && in_class)
        return sv_error_set(err, SV_ERR_SYNTAX, -1, "regex: unterminated character class");
    if (!st)
        st = sv_bytes_append(out, "", 1);
    if (st)
        return sv_error_set(err, st, -1, "regex: out of memory");
    return SV_OK;
}

sv_status sv_pretok_create(const sv_vocab_t *v, sv_pretok_t **out, sv_error_t *err) {
    sv_bytes_t buf = {0};
    sv_status st = SV_OK;
    sv_pretok_t *p = calloc(1, sizeof *p);
    if (!p)
        return sv_error_set(err, SV_ERR_NOMEM, -1, "pre-tokenizer: out of memory");
    for (uint32_t i = 0; i < v->n_steps; i++) {
        const sv_pretok_step_t *step = &v->steps[i];
        compiled_t *c = &p->steps[p->n++];
        c->step = step;
        if (!step->pattern || (step->literal && !step->pattern[0]))
            continue;  /* no pattern, or an empty String pattern: nothing to split */
        uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
        const char *pat = step->pattern;
        if (step->literal) {
            opts = PCRE2_UTF | PCRE2_LITERAL;  /* the only options LITERAL allows with UTF */
        } else {
            if ((st = sv_pretok_translate(step->pattern, &buf, err)))
                goto fail;
            pat = (const char *)buf.p;
        }
        int code;
        PCRE2_SIZE off;
        c->code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, opts, &code, &off, NULL);
        if (!c->code) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(code, msg, sizeof msg);
            st = sv_error_set(err, SV_ERR_SYNTAX, (long)off,
                              "pre-tokenizer pattern \"%.120s\": %s", step->pattern, (char *)msg);
            goto fail;
        }
        /* JIT is an optimization: without it (no JIT support) matching
         * falls back to the interpreter with the same results. */
        (void)pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    }
    sv_bytes_free(&buf);
    *out = p;
    return SV_OK;
fail:
    sv_bytes_free(&buf);
    sv_pretok_destroy(p);
    return st;
}

void sv_pretok_destroy(sv_pretok_t *p) {
    if (!p)
        return;
    for (uint32_t i = 0; i < p->n; i++)
        pcre2_code_free(p->steps[i].code);
    free(p);
}

sv_status sv_pretok_scratch_init(const sv_pretok_t *p, sv_pretok_scratch_t *s) {
    memset(s, 0, sizeof *s);
    (void)p;
    s->md = pcre2_match_data_create(1, NULL);
    return s->md ? SV_OK : SV_ERR_NOMEM;
}

void sv_pretok_scratch_free(sv_pretok_scratch_t *s) {
    pcre2_match_data_free(s->md);
    sv_bytes_free(&s->pool);
    free(s->pieces);
    free(s->next);
    free(s->splits);
    memset(s, 0, sizeof *s);
}

/* Appends a piece to s->next (capacity s->cap, shared with s->pieces). */
static sv_status emit(sv_pretok_scratch_t *s, size_t off, size_t len) {
    if (len == 0)
        return SV_OK;
    if (s->n_next == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        sv_piece_t *a = realloc(s->pieces, cap * sizeof *a);
        if (!a)
            return SV_ERR_NOMEM;
        s->pieces = a;
        sv_piece_t *b = realloc(s->next, cap * sizeof *b);
        if (!b)
            return SV_ERR_NOMEM;
        s->next = b;
        s->cap = cap;
    }
    s->next[s->n_next].off = off;
    s->next[s->n_next].len = len;
    s->n_next++;
    return SV_OK;
}

/* A match or a gap: bytes [start, end) of the piece, and whether it counts
 * as a match (after invert). */
typedef struct {
    size_t start, end;
    bool match;
} split_t;

static sv_status push_split(sv_pretok_scratch_t *s, size_t start, size_t end, bool match) {
    if (s->n_splits == s->cap_splits) {
        size_t cap = s->cap_splits ? 2 * s->cap_splits : 64;
        split_t *a = realloc(s->splits, cap * sizeof *a);
        if (!a)
            return SV_ERR_NOMEM;
        s->splits = a;
        s->cap_splits = cap;
    }
    split_t *sp = &((split_t *)s->splits)[s->n_splits++];
    sp->start = start;
    sp->end = end;
    sp->match = match;
    return SV_OK;
}

/* Fills s->splits with the matches of c in pool[base, base+len) and the gaps
 * between them, covering the piece (tokenizers' Pattern::find_matches). */
static sv_status find_splits(const compiled_t *c, sv_pretok_scratch_t *s, size_t base, size_t len,
                             sv_error_t *err) {
    bool inv = c->step->invert;
    const uint8_t *subject = s->pool.p + base;
    size_t prev = 0, pos = 0;
    bool have_last = false;
    sv_status st = SV_OK;
    s->n_splits = 0;
    while (pos <= len && !st) {
        int rc = pcre2_match(c->code, subject, len, pos, PCRE2_NO_UTF_CHECK, s->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            bool limit = rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
                         rc == PCRE2_ERROR_HEAPLIMIT;
            return sv_error_set(err, limit ? SV_ERR_BUDGET : SV_ERR_SYNTAX, (long)(base + pos),
                                "pre-tokenizer: %s", (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        size_t ms = ov[0], me = ov[1];
        if (ms == me && have_last && prev == me) {
            /* An empty match where the last match ended: step over one
             * character and search again, as the onig crate's iterator does. */
            if (pos >= len)
                break;
            uint32_t cp;
            int k = sv_utf8_decode(subject + pos, len - pos, &cp);
            pos += k ? (size_t)k : 1;
            continue;
        }
        if (prev != ms)
            st = push_split(s, prev, ms, inv);
        if (!st)
            st = push_split(s, ms, me, !inv);
        prev = pos = me;
        have_last = true;
    }
    if (!st && prev != len)
        st = push_split(s, prev, len, inv);
    if (st)
        return sv_error_set(err, st, -1, "pre-tokenizer: out of memory");
    return SV_OK;
}

/* Applies the step's behavior to s->splits (tokenizers'
 * NormalizedString::split) and emits the resulting non-empty pieces. */
static sv_status apply_behavior(sv_split_behavior b, sv_pretok_scratch_t *s, size_t base) {
    split_t *sp = s->splits;
    size_t n = s->n_splits;
    sv_status st = SV_OK;
    switch (b) {
    case SV_SPLIT_ISOLATED:
    case SV_SPLIT_REMOVED:
        for (size_t i = 0; i < n && !st; i++)
            if (b == SV_SPLIT_ISOLATED || !sp[i].match)
                st = emit(s, base + sp[i].start, sp[i].end - sp[i].start);
        return st;
    case SV_SPLIT_CONTIGUOUS:
    case SV_SPLIT_MERGED_WITH_PREVIOUS: {
        /* Left to right: a split joins the one before it when both are
         * matches or both gaps (Contiguous), or when it is a match that
         * follows a gap (MergedWithPrevious). */
        size_t i = 0;
        while (i < n && !st) {
            size_t j = i + 1;
            while (j < n && (b == SV_SPLIT_CONTIGUOUS ? sp[j].match == sp[j - 1].match
                                                       : sp[j].match && !sp[j - 1].match))
                j++;
            st = emit(s, base + sp[i].start, sp[j - 1].end - sp[i].start);
            i = j;
        }
        return st;
    }
    case SV_SPLIT_MERGED_WITH_NEXT: {
        /* Right to left in tokenizers: a match joins the split after it
         * when that one is a gap. */
        size_t i = 0;
        while (i < n && !st) {
            size_t end = sp[i].end;
            size_t j = i + 1;
            if (sp[i].match && j < n && !sp[j].match) {
                end = sp[j].end;
                j++;
            }
            st = emit(s, base + sp[i].start, end - sp[i].start);
            i = j;
        }
        return st;
    }
    }
    return SV_OK;
}

sv_status sv_pretok_split(const sv_pretok_t *p, sv_pretok_scratch_t *s, const uint8_t *text,
                          size_t n, sv_error_t *err) {
    s->pool.n = 0;
    s->n = s->n_next = 0;
    if (sv_bytes_append(&s->pool, text, n))
        return sv_error_set(err, SV_ERR_NOMEM, -1, "pre-tokenizer: out of memory");
    if (emit(s, 0, n))
        return sv_error_set(err, SV_ERR_NOMEM, -1, "pre-tokenizer: out of memory");
    for (uint32_t k = 0; k < p->n; k++) {
        /* The pieces so far become the input; s->next collects the output. */
        sv_piece_t *t = s->pieces;
        s->pieces = s->next;
        s->next = t;
        s->n = s->n_next;
        s->n_next = 0;
        const compiled_t *c = &p->steps[k];
        for (size_t i = 0; i < s->n; i++) {
            size_t off = s->pieces[i].off, len = s->pieces[i].len;
            if (c->step->add_prefix_space && s->pool.p[off] != ' ') {
                /* ByteLevel's prefix space: the piece continues as a copy. */
                size_t at = s->pool.n;
                if (sv_bytes_reserve(&s->pool, len + 1))
                    return sv_error_set(err, SV_ERR_NOMEM, -1, "pre-tokenizer: out of memory");
                s->pool.p[at] = ' ';
                memcpy(s->pool.p + at + 1, s->pool.p + off, len);
                s->pool.n += len + 1;
                off = at;
                len++;
            }
            sv_status st;
            if (!c->code) {
                st = emit(s, off, len);
            } else {
                if ((st = find_splits(c, s, off, len, err)))
                    return st;
                st = apply_behavior(c->step->behavior, s, off);
            }
            if (st)
                return sv_error_set(err, st, -1, "pre-tokenizer: out of memory");
        }
    }
    /* The result lives in s->next; expose it as s->pieces. */
    sv_piece_t *t = s->pieces;
    s->pieces = s->next;
    s->next = t;
    s->n = s->n_next;
    s->n_next = 0;
    return SV_OK;
}
