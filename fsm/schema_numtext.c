/* schema_numtext.c — the exact text of every number in the schema.
 *
 * jansson stores numbers as int64 or double, which loses the bounds users
 * write (10000000000000009999 becomes 1.000000000000001e19, 0.1 becomes
 * 0.1000000000000000055...). sieve's numeric automata are exact on decimal
 * strings, so the schema text is scanned once for number tokens and paired,
 * in document order, with the number nodes of the parsed tree (jansson keeps
 * object members in document order, and duplicate keys are rejected). Each
 * token is rewritten as a plain decimal without exponent. */
#include <stdlib.h>
#include <string.h>

#include "json_num.h"
#include "fsm/internal/schema_internal.h"

typedef struct { json_t *node; const char *text; } numtext_t;

struct sv_numtexts {
    numtext_t *v;
    uint32_t n;
};

static int cmp_node(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const numtext_t *)a)->node, y = (uintptr_t)((const numtext_t *)b)->node;
    return (x > y) - (x < y);
}

/* Rewrites a JSON number token as a plain decimal; NULL if the exponent is
 * beyond +-4000 (such numbers have no practical digit automaton). */
static char *plain_decimal(sctx_t *c, const char *t, size_t n) {
    size_t i = 0;
    bool neg = false;
    if (i < n && t[i] == '-') neg = true, i++;
    char *digits = sv_arena_alloc(c->arena, n + 1);
    if (!digits) return NULL;
    size_t nd = 0, nint = 0;
    while (i < n && t[i] >= '0' && t[i] <= '9') digits[nd++] = t[i++], nint++;
    if (i < n && t[i] == '.') {
        i++;
        while (i < n && t[i] >= '0' && t[i] <= '9') digits[nd++] = t[i++];
    }
    long exp = 0;
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        bool eneg = false;
        if (i < n && (t[i] == '+' || t[i] == '-')) eneg = t[i] == '-', i++;
        while (i < n && t[i] >= '0' && t[i] <= '9') {
            exp = exp * 10 + (t[i++] - '0');
            if (exp > 4000) return NULL;
        }
        if (eneg) exp = -exp;
    }
    long point = (long)nint + exp; /* digits[0..point) is the integer part */
    size_t cap = nd + (size_t)labs(exp) + 8;
    char *out = sv_arena_alloc(c->arena, cap);
    if (!out) return NULL;
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (point <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (long k = 0; k < -point; k++) out[o++] = '0';
        memcpy(out + o, digits, nd);
        o += nd;
    } else if ((size_t)point >= nd) {
        memcpy(out + o, digits, nd);
        o += nd;
        for (long k = 0; k < point - (long)nd; k++) out[o++] = '0';
    } else {
        memcpy(out + o, digits, (size_t)point);
        o += (size_t)point;
        out[o++] = '.';
        memcpy(out + o, digits + point, nd - (size_t)point);
        o += nd - (size_t)point;
    }
    out[o] = '\0';
    /* Normalize: no leading zeros in the integer part, no trailing zeros in
     * the fraction, "0" for zero. */
    char *p = out + (neg ? 1 : 0);
    size_t lead = 0;
    while (p[lead] == '0' && p[lead + 1] >= '0' && p[lead + 1] <= '9') lead++;
    memmove(p, p + lead, strlen(p + lead) + 1);
    char *dot = strchr(p, '.');
    if (dot) {
        char *e = p + strlen(p);
        while (e > dot + 1 && e[-1] == '0') *--e = '\0';
        if (e == dot + 1) *dot = '\0';
    }
    if (strcmp(p, "0") == 0) return "0";
    return out;
}

static sv_status collect(sctx_t *c, json_t *v, numtext_t **arr, uint32_t *n, uint32_t *cap) {
    if (json_is_number(v)) {
        if (*n == *cap) {
            uint32_t nc = *cap ? *cap * 2 : 64;
            numtext_t *na = realloc(*arr, nc * sizeof *na);
            if (!na) return sv_sc_nomem(c);
            *arr = na;
            *cap = nc;
        }
        (*arr)[(*n)++] = (numtext_t){v, NULL};
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            sv_status st = collect(c, x, arr, n, cap);
            if (st) return st;
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            sv_status st = collect(c, json_array_get(v, i), arr, n, cap);
            if (st) return st;
        }
    }
    return SV_OK;
}

sv_status sv_sc_numtexts_index(sctx_t *c, const char *text, size_t len) {
    numtext_t *arr = NULL;
    uint32_t n = 0, cap = 0;
    sv_status st = collect(c, c->root, &arr, &n, &cap);
    if (st) { free(arr); return st; }
    /* Number tokens in the text, skipping strings. */
    uint32_t k = 0;
    for (size_t i = 0; i < len && k < n;) {
        char ch = text[i];
        if (ch == '"') {
            for (i++; i < len && text[i] != '"'; i++)
                if (text[i] == '\\') i++;
            i++;
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            size_t s = i;
            while (i < len && (text[i] == '-' || text[i] == '+' || text[i] == '.' || text[i] == 'e' || text[i] == 'E' ||
                               (text[i] >= '0' && text[i] <= '9')))
                i++;
            arr[k++].text = plain_decimal(c, text + s, i - s);
        } else {
            i++;
        }
    }
    if (k != n) for (uint32_t j = 0; j < n; j++) arr[j].text = NULL; /* should not happen: fall back to doubles */
    struct sv_numtexts *m = sv_arena_alloc(c->arena, sizeof *m);
    if (!m || (arr && !sv_arena_defer(c->arena, free, arr))) { if (!m) free(arr); return sv_sc_nomem(c); }
    if (n) qsort(arr, n, sizeof *arr, cmp_node);
    m->v = arr;
    m->n = n;
    c->numtexts = m;
    return SV_OK;
}

const char *sv_sc_decimal(sctx_t *c, json_t *v, char *buf, size_t cap) {
    if (c->numtexts && c->numtexts->n) {
        numtext_t key = {v, NULL};
        numtext_t *hit = bsearch(&key, c->numtexts->v, c->numtexts->n, sizeof key, cmp_node);
        if (hit && hit->text) return hit->text;
    }
    if (json_is_integer(v)) {
        snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
        return buf;
    }
    return sv_decimal_from_double(json_real_value(v), buf, cap) ? buf : NULL;
}
