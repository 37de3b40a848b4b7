/* cpset.c — code-point sets and their UTF-8 byte-range sequences.
 *
 * The translation of a range of scalar values to byte ranges follows the
 * structure of UTF-8: split the range where the encoded length changes
 * (0x7F, 0x7FF, 0xFFFF), then, for an n-byte range, split it until every
 * trailing group of continuation bytes is either fixed or spans the whole
 * 0x80..0xBF range; such a range is exactly one sequence of byte ranges.
 * The result has at most a few dozen sequences per range. */
#include "cpset.h"

#include <stdlib.h>
#include <string.h>

#include "fsm/internal/unicode_tables.h"

void sv_cpset_init(sv_cpset_t *s) { memset(s, 0, sizeof *s); s->sorted = true; }

void sv_cpset_free(sv_cpset_t *s) {
    if (!s) return;
    free(s->r);
    sv_cpset_init(s);
}

sv_status sv_cpset_add(sv_cpset_t *s, uint32_t lo, uint32_t hi) {
    if (lo > hi) return SV_ERR_ARG;
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 8;
        sv_cprange_t *r = realloc(s->r, cap * sizeof *r);
        if (!r) return SV_ERR_NOMEM;
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n++] = (sv_cprange_t){lo, hi};
    s->sorted = false;
    return SV_OK;
}

sv_status sv_cpset_add_set(sv_cpset_t *s, const sv_cpset_t *t) {
    for (uint32_t i = 0; i < t->n; i++) {
        sv_status st = sv_cpset_add(s, t->r[i].lo, t->r[i].hi);
        if (st) return st;
    }
    return SV_OK;
}

static int cmp_range(const void *a, const void *b) {
    const sv_cprange_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

sv_status sv_cpset_normalize(sv_cpset_t *s) {
    if (s->sorted) return SV_OK;
    qsort(s->r, s->n, sizeof *s->r, cmp_range);
    /* Merge overlapping and adjacent ranges, clip to 0..0x10FFFF. */
    uint32_t m = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        sv_cprange_t r = s->r[i];
        if (r.lo > SV_CP_MAX) continue;
        if (r.hi > SV_CP_MAX) r.hi = SV_CP_MAX;
        if (m && r.lo <= s->r[m - 1].hi + 1) {
            if (r.hi > s->r[m - 1].hi) s->r[m - 1].hi = r.hi;
        } else {
            s->r[m++] = r;
        }
    }
    s->n = m;
    /* Remove the surrogates D800..DFFF. The ranges are disjoint now, so at
     * most one straddles the block and needs one more slot. */
    if (s->n == s->cap) {
        sv_cprange_t *nr = realloc(s->r, (s->cap + 1) * sizeof *nr);
        if (!nr) return SV_ERR_NOMEM;
        s->r = nr;
        s->cap++;
    }
    for (uint32_t i = 0; i < s->n; i++) {
        sv_cprange_t r = s->r[i];
        if (r.hi < 0xD800 || r.lo > 0xDFFF) continue;
        bool left = r.lo < 0xD800, right = r.hi > 0xDFFF;
        if (left && right) {
            memmove(&s->r[i + 2], &s->r[i + 1], (s->n - i - 1) * sizeof *s->r);
            s->r[i] = (sv_cprange_t){r.lo, 0xD7FF};
            s->r[i + 1] = (sv_cprange_t){0xE000, r.hi};
            s->n++;
            i++;
        } else if (left) {
            s->r[i].hi = 0xD7FF;
        } else if (right) {
            s->r[i].lo = 0xE000;
        } else {
            memmove(&s->r[i], &s->r[i + 1], (s->n - i - 1) * sizeof *s->r);
            s->n--;
            i--;
        }
    }
    s->sorted = true;
    return SV_OK;
}

sv_status sv_cpset_negate(sv_cpset_t *s) {
    if (sv_cpset_normalize(s)) return SV_ERR_NOMEM;
    sv_cpset_t t;
    sv_cpset_init(&t);
    uint32_t next = 0;
    sv_status st = SV_OK;
    for (uint32_t i = 0; i < s->n && !st; i++) {
        if (s->r[i].lo > next) st = sv_cpset_add(&t, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (!st && next <= SV_CP_MAX) st = sv_cpset_add(&t, next, SV_CP_MAX);
    if (!st) st = sv_cpset_normalize(&t);
    if (st) { sv_cpset_free(&t); return st; }
    sv_cpset_free(s);
    *s = t;
    return SV_OK;
}

bool sv_cpset_contains(const sv_cpset_t *s, uint32_t cp) {
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (s->r[mid].hi < cp) lo = mid + 1;
        else if (s->r[mid].lo > cp) hi = mid;
        else return true;
    }
    return false;
}

static int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

/* Emits the sequences of [lo, hi]; lo and hi have the same encoded length. */
static sv_status split_range(uint32_t lo, uint32_t hi, sv_utf8_seq_fn fn, void *ctx) {
    int n = utf8_len(lo);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;  /* the low i continuation bytes */
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                sv_status st = split_range(lo, lo | m, fn, ctx);
                return st ? st : split_range((lo | m) + 1, hi, fn, ctx);
            }
            if ((hi & m) != m) {
                sv_status st = split_range(lo, (hi & ~m) - 1, fn, ctx);
                return st ? st : split_range(hi & ~m, hi, fn, ctx);
            }
        }
    }
    sv_utf8_seq_t seq;
    uint8_t a[4], b[4];
    seq.len = (uint8_t)sv_utf8_encode(lo, a);
    sv_utf8_encode(hi, b);
    for (int i = 0; i < seq.len; i++) { seq.lo[i] = a[i]; seq.hi[i] = b[i]; }
    return fn(ctx, &seq);
}

sv_status sv_cpset_utf8_sequences(const sv_cpset_t *s, sv_utf8_seq_fn fn, void *ctx) {
    static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF, SV_CP_MAX};
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;
        for (int k = 0; k < 4 && lo <= hi; k++) {
            if (lo > bounds[k]) continue;
            uint32_t top = hi < bounds[k] ? hi : bounds[k];
            sv_status st = split_range(lo, top, fn, ctx);
            if (st) return st;
            lo = top + 1;
        }
    }
    return SV_OK;
}

sv_status sv_cpset_add_class(sv_cpset_t *s, sv_class_kind kind, bool negated) {
    sv_cpset_t t;
    sv_cpset_init(&t);
    sv_status st = SV_OK;
    switch (kind) {
    case SV_CLASS_DIGIT:
        st = sv_cpset_add(&t, '0', '9');
        break;
    case SV_CLASS_WORD:
        if (!st) st = sv_cpset_add(&t, '0', '9');
        if (!st) st = sv_cpset_add(&t, 'A', 'Z');
        if (!st) st = sv_cpset_add(&t, '_', '_');
        if (!st) st = sv_cpset_add(&t, 'a', 'z');
        break;
    case SV_CLASS_SPACE: {
        /* ECMA-262 WhiteSpace (TAB VT FF SP NBSP ZWNBSP and Zs) plus
         * LineTerminator (LF CR LS PS). */
        static const uint32_t sp[][2] = {
            {0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
            {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF},
        };
        for (size_t i = 0; i < sizeof sp / sizeof sp[0] && !st; i++) st = sv_cpset_add(&t, sp[i][0], sp[i][1]);
        break;
    }
    case SV_CLASS_DOT:
        if (!st) st = sv_cpset_add(&t, 0x0A, 0x0A);
        if (!st) st = sv_cpset_add(&t, 0x0D, 0x0D);
        if (!st) st = sv_cpset_add(&t, 0x2028, 0x2029);
        negated = !negated;
        break;
    }
    if (!st && negated) st = sv_cpset_negate(&t);
    if (!st) st = sv_cpset_add_set(s, &t);
    sv_cpset_free(&t);
    return st;
}

static bool name_eq(const char *a, size_t alen, const char *b) {
    /* Property names compare loosely, as Unicode's UAX44-LM3: ignore case,
     * spaces, '-' and '_'. */
    size_t i = 0, j = 0, blen = strlen(b);
    for (;;) {
        while (i < alen && (a[i] == ' ' || a[i] == '_' || a[i] == '-')) i++;
        while (j < blen && (b[j] == ' ' || b[j] == '_' || b[j] == '-')) j++;
        if (i == alen || j == blen) return i == alen && j == blen;
        char x = a[i], y = b[j];
        if (x >= 'A' && x <= 'Z') x = (char)(x + 32);
        if (y >= 'A' && y <= 'Z') y = (char)(y + 32);
        if (x != y) return false;
        i++, j++;
    }
}

static sv_status add_category(sv_cpset_t *t, const sv_unicode_category_t *c) {
    for (int k = 0; k < c->n; k++) {
        sv_status st = sv_cpset_add(t, c->ranges[2 * k], c->ranges[2 * k + 1]);
        if (st) return st;
    }
    return SV_OK;
}

sv_status sv_cpset_add_property(sv_cpset_t *s, const char *name, size_t len, bool negated) {
    static const struct { const char *shortn, *longn; } groups[] = {
        {"L", "Letter"}, {"M", "Mark"}, {"N", "Number"}, {"P", "Punctuation"},
        {"S", "Symbol"}, {"Z", "Separator"}, {"C", "Other"},
    };
    /* Accept the "gc=" / "General_Category=" prefixes. */
    for (size_t i = 0; i < len; i++) {
        if (name[i] == '=') {
            if (!name_eq(name, i, "gc") && !name_eq(name, i, "General_Category")) return SV_ERR_UNSUPPORTED;
            name += i + 1;
            len -= i + 1;
            break;
        }
    }
    sv_cpset_t t;
    sv_cpset_init(&t);
    sv_status st = SV_ERR_UNSUPPORTED;
    if (name_eq(name, len, "Any")) {
        st = sv_cpset_add(&t, 0, SV_CP_MAX);
    } else if ((len == 2 && memcmp(name, "L&", 2) == 0) || name_eq(name, len, "LC") ||
               name_eq(name, len, "Cased_Letter")) {
        st = SV_OK;
        for (int i = 0; i < sv_unicode_num_categories && !st; i++) {
            const char *sn = sv_unicode_categories[i].short_name;
            if (sn[0] == 'L' && (sn[1] == 'u' || sn[1] == 'l' || sn[1] == 't'))
                st = add_category(&t, &sv_unicode_categories[i]);
        }
    } else {
        for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
            if ((len == 1 && name[0] == groups[g].shortn[0]) || name_eq(name, len, groups[g].longn)) {
                st = SV_OK;
                for (int i = 0; i < sv_unicode_num_categories && !st; i++)
                    if (sv_unicode_categories[i].short_name[0] == groups[g].shortn[0])
                        st = add_category(&t, &sv_unicode_categories[i]);
                break;
            }
        }
        for (int i = 0; st == SV_ERR_UNSUPPORTED && i < sv_unicode_num_categories; i++) {
            const sv_unicode_category_t *c = &sv_unicode_categories[i];
            if ((len == 2 && memcmp(name, c->short_name, 2) == 0) || name_eq(name, len, c->long_name))
                st = add_category(&t, c);
        }
    }
    if (!st && negated) st = sv_cpset_negate(&t);
    if (!st) st = sv_cpset_add_set(s, &t);
    sv_cpset_free(&t);
    return st;
}
