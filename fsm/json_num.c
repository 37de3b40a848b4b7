/* json_num.c — the spellings of JSON numbers under integer, bound and
 * multipleOf constraints, as exact digit automata.
 *
 * Every constraint here is a property of a number's value, read from its
 * spelling left to right, so each one is a small deterministic automaton
 * over the bytes '-', '.', '0'..'9' that follows the number grammar and
 * carries a little arithmetic state:
 *
 *   - a comparison with a bound m = ±(I.F) (I its integer digits without
 *     leading zeros, F its fraction digits without trailing zeros) tracks
 *     how many integer digits have been read and how the digits read so far
 *     compare with I's prefix (lt / eq / gt: the first difference decides);
 *     a canonical integer part longer than I is greater, a shorter one less.
 *     In the fraction, while still equal, digits compare with F's; once F is
 *     used up, a nonzero digit makes the magnitude greater and zeros keep it
 *     equal; a fraction that stops short of F is less (F's last digit is
 *     nonzero). The sign then maps the magnitude relation to the value
 *     relation: for a '-' spelling it is flipped, except that when m > 0
 *     every '-' spelling is below m; a spelling without '-' is above any
 *     m < 0. "-0", "-0.00" and "0.0" compare as 0 because the relation of a
 *     zero magnitude with |m| = 0 is "eq" and flips to itself. That is
 *     O(L + |F|) states (sign x relation x position), for bounds of any
 *     size: the arithmetic is on digit strings, never on machine numbers.
 *     -123456789012345678901234567890.123456789 <= x <
 *     123456789012345678901234567890 minimizes to 101 states.
 *   - multipleOf p/10^q (p a positive integer, q the fraction digits) holds
 *     for x iff x*10^q is an integer multiple of p: the automaton keeps the
 *     remainder mod p of the integer digits followed by the first q fraction
 *     digits; past those only zeros may follow; a spelling that stops after
 *     j < q fraction digits has the value rem * 10^(q-j) mod p. The sign does
 *     not matter. That is p + 3 states for integers and p * (q + 2) + 3
 *     (q >= 1) for numbers, checked against lim->max_dfa_states up front.
 *
 * Each automaton is built by breadth-first search from its start state over
 * 13 byte classes ('-', '.', each digit, everything else), with the states
 * packed into 64-bit keys and deduplicated in a hash table, then minimized.
 * Each one accepts only spellings of the universe (the number or the integer
 * grammar of json_num.h), so the constraints combine exactly by DFA product
 * (intersection): "integer, minimum 1.5, exclusiveMaximum 10, multipleOf 3"
 * is the integer universe ∩ (x >= 1.5) ∩ (x < 10) ∩ (3 | x), i.e. 3, 6, 9,
 * with no rounding of bounds to get wrong. An empty intersection is
 * SV_ERR_EMPTY. The result is embedded in the AST as a DFA node, the DFA
 * registered with the arena. */
#include "json_num.h"

#include "util/memacct.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/dfa_internal.h"
#include "regex.h"

/* ---- plain decimals ------------------------------------------------------ */

/* A plain decimal, normalized: digits point into the caller's string. */
typedef struct {
    bool neg;        /* false for every spelling of zero */
    const char *ip;  /* integer digits without leading zeros; "0" when < 1 */
    size_t il;       /* >= 1 */
    const char *fp;  /* fraction digits without trailing zeros */
    size_t fl;       /* may be 0 */
} decimal_t;

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Parses -?[0-9]+(\.[0-9]+)? (leading zeros allowed); false if malformed. */
static bool decimal_parse(const char *s, decimal_t *d) {
    if (!s) return false;
    const char *p = s;
    d->neg = *p == '-';
    if (d->neg) p++;
    const char *ip = p;
    while (is_digit(*p)) p++;
    size_t il = (size_t)(p - ip);
    const char *fp = p;
    size_t fl = 0;
    if (il == 0) return false;
    if (*p == '.') {
        fp = ++p;
        while (is_digit(*p)) p++;
        fl = (size_t)(p - fp);
        if (fl == 0) return false;
    }
    if (*p) return false;
    while (il > 1 && *ip == '0') ip++, il--;
    while (fl > 0 && fp[fl - 1] == '0') fl--;
    if (il == 1 && *ip == '0' && fl == 0) d->neg = false;
    d->ip = ip, d->il = il, d->fp = fp, d->fl = fl;
    return true;
}

static bool decimal_is_zero(const decimal_t *d) { return d->il == 1 && d->ip[0] == '0' && d->fl == 0; }

/* ---- the automata -------------------------------------------------------- */

enum { CLS_OTHER, CLS_MINUS, CLS_DOT, CLS_DIGIT0, NCLS = CLS_DIGIT0 + 10 };

/* Where a spelling is in the grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?. */
enum { PH_START, PH_NEG, PH_INT0, PH_INT, PH_DOT, PH_FRAC };

/* Relations of a value with a bound, as bits so that accepted sets are masks. */
enum { REL_LT = 1, REL_EQ = 2, REL_GT = 4 };

typedef enum { COMP_ANY, COMP_CMP, COMP_MOD } comp_kind;

/* One constraint automaton. */
typedef struct {
    comp_kind kind;
    bool integer;        /* the integer grammar: no '.', no "-0" */
    /* COMP_CMP: accept iff the relation of the value with m is in mask. */
    decimal_t m;
    int mask;
    /* COMP_MOD: multiples of p / 10^q; pow10[k] = 10^k mod p for k <= q. */
    uint64_t p;
    uint32_t q;
    uint64_t *pow10;
} comp_t;

typedef struct {
    uint8_t phase, neg, rel;
    uint32_t pos;  /* CMP: digits of the current part read (capped); MOD: fraction digits read */
    uint32_t rem;  /* MOD: remainder mod p so far */
} nstate_t;

/* Key layout: phase 3 bits, neg 1, rel 3, pos 27, rem 30. */
#define POS_BITS 27
#define REM_BITS 30

static uint64_t key_of(const nstate_t *s) {
    return (uint64_t)s->phase | (uint64_t)s->neg << 3 | (uint64_t)s->rel << 4 | (uint64_t)s->pos << 7 |
           (uint64_t)s->rem << (7 + POS_BITS);
}

static nstate_t state_of(uint64_t k) {
    nstate_t s = {(uint8_t)(k & 7), (uint8_t)(k >> 3 & 1), (uint8_t)(k >> 4 & 7),
                  (uint32_t)(k >> 7 & ((1u << POS_BITS) - 1)), (uint32_t)(k >> (7 + POS_BITS))};
    return s;
}

static int cmp_digit(int d, char m) { return d < m - '0' ? REL_LT : d > m - '0' ? REL_GT : REL_EQ; }

/* The relation of the integer part read so far with m's, were it to end here. */
static int int_rel(const comp_t *c, const nstate_t *s) {
    return s->pos < c->m.il ? REL_LT : s->pos > c->m.il ? REL_GT : s->rel;
}

static void int_digit(const comp_t *c, nstate_t *s, int d) {
    if (c->kind == COMP_CMP) {
        if (s->pos < c->m.il) {
            if (s->rel == REL_EQ) s->rel = (uint8_t)cmp_digit(d, c->m.ip[s->pos]);
            s->pos++;
        } else {
            s->pos = (uint32_t)c->m.il + 1, s->rel = REL_GT;  /* longer than m's integer part */
        }
    } else if (c->kind == COMP_MOD) {
        s->rem = (uint32_t)((s->rem * 10ull + (uint64_t)d) % c->p);
    }
}

static void enter_frac(const comp_t *c, nstate_t *s) {
    if (c->kind == COMP_CMP) s->rel = (uint8_t)int_rel(c, s);
    s->pos = 0;
}

/* False when the digit kills the spelling (a nonzero digit past a multiple's q). */
static bool frac_digit(const comp_t *c, nstate_t *s, int d) {
    if (c->kind == COMP_CMP) {
        if (s->rel != REL_EQ) return true;                 /* decided; pos stays 0 */
        if (s->pos < c->m.fl) {
            s->rel = (uint8_t)cmp_digit(d, c->m.fp[s->pos]);
            s->pos = s->rel == REL_EQ ? s->pos + 1 : 0;
        } else if (d != 0) {
            s->rel = REL_GT, s->pos = 0;
        }
    } else if (c->kind == COMP_MOD) {
        if (s->pos < c->q) {
            s->rem = (uint32_t)((s->rem * 10ull + (uint64_t)d) % c->p);
            s->pos++;
        } else if (d != 0) {
            return false;
        }
    }
    return true;
}

/* The next state from s on a byte of class cls; false for the dead state. */
static bool step(const comp_t *c, nstate_t *s, int cls) {
    int d = cls - CLS_DIGIT0;
    switch (s->phase) {
    case PH_START:
        if (cls == CLS_MINUS) {
            s->phase = PH_NEG, s->neg = 1;
            return true;
        }
        /* a digit starts the integer part either way */
        /* fall through */
    case PH_NEG:
        if (d < 0) return false;
        if (d == 0 && s->neg && c->integer) return false;  /* no "-0" among integers */
        s->phase = d == 0 ? PH_INT0 : PH_INT;
        if (c->kind != COMP_CMP) s->neg = 0; /* only comparisons need the sign from here on */
        int_digit(c, s, d);
        return true;
    case PH_INT0:
    case PH_INT:
        if (cls == CLS_DOT) {
            if (c->integer) return false;
            s->phase = PH_DOT;
            enter_frac(c, s);
            return true;
        }
        if (d < 0 || s->phase == PH_INT0) return false;
        int_digit(c, s, d);
        return true;
    case PH_DOT:
    case PH_FRAC:
        if (d < 0) return false;
        s->phase = PH_FRAC;
        return frac_digit(c, s, d);
    }
    return false;
}

static int flip(int r) { return r == REL_LT ? REL_GT : r == REL_GT ? REL_LT : REL_EQ; }

static bool accepts(const comp_t *c, const nstate_t *s) {
    if (s->phase != PH_INT0 && s->phase != PH_INT && s->phase != PH_FRAC) return false;
    if (c->kind == COMP_CMP) {
        int r;  /* |value| against |m| */
        if (s->phase == PH_FRAC) {
            r = s->rel;
            if (r == REL_EQ && s->pos < c->m.fl) r = REL_LT;
        } else {
            r = int_rel(c, s);
            if (r == REL_EQ && c->m.fl > 0) r = REL_LT;
        }
        bool m_pos = !c->m.neg && !decimal_is_zero(&c->m);
        if (s->neg) r = m_pos ? REL_LT : flip(r);
        else if (c->m.neg) r = REL_GT;
        return (r & c->mask) != 0;
    }
    if (c->kind == COMP_MOD) {
        uint32_t missing = s->phase == PH_FRAC ? c->q - s->pos : c->q;
        return (uint64_t)s->rem * c->pow10[missing] % c->p == 0;
    }
    return true;
}

/* Builds the minimal DFA of one constraint automaton by breadth-first search.
 * On success *out is a new DFA the caller frees with sv_dfa_destroy. */
static sv_status build_dfa(const comp_t *c, const sv_fsm_limits_t *lim, sv_dfa_t **out, sv_error_t *err) {
    sv_rawdfa_t raw = {0};
    for (int b = 0; b < 256; b++)
        raw.classes[b] = (uint8_t)(b == '-' ? CLS_MINUS : b == '.' ? CLS_DOT : is_digit((char)b) ? CLS_DIGIT0 + b - '0' : CLS_OTHER);
    raw.nclasses = NCLS;
    uint32_t cap = 64, n = 0, tcap = 256;
    uint64_t *keys = malloc(cap * sizeof *keys);
    uint32_t *table = calloc(tcap, sizeof *table);
    raw.trans = malloc((size_t)cap * NCLS * sizeof *raw.trans);
    raw.accept = malloc(cap);
    sv_status st = SV_OK;
    if (!keys || !table || !raw.trans || !raw.accept) goto oom;
    nstate_t s0 = {PH_START, 0, REL_EQ, 0, 0};
    keys[n] = key_of(&s0);
    raw.accept[n] = 0;
    table[sv_hash_fib32(keys[n]) & (tcap - 1)] = n + 1;
    n++;
    for (uint32_t cur = 0; cur < n; cur++) {
        for (int cls = 0; cls < NCLS; cls++) {
            nstate_t s = state_of(keys[cur]);
            int32_t id = SV_DFA_DEAD;
            if (step(c, &s, cls)) {
                uint64_t k = key_of(&s);
                uint32_t h = sv_hash_fib32(k) & (tcap - 1);
                while (table[h] && keys[table[h] - 1] != k) h = (h + 1) & (tcap - 1);
                if (table[h]) {
                    id = (int32_t)table[h] - 1;
                } else {
                    if (n >= lim->max_dfa_states) {
                        st = sv_error_set(err, SV_ERR_BUDGET, -1,
                                          "a numeric constraint needs more than %u DFA states (the max_dfa_states budget)",
                                          lim->max_dfa_states);
                        goto done;
                    }
                    if (n == cap) {
                        cap *= 2;
                        if (!sv_memacct_fits((size_t)cap * (NCLS * sizeof *raw.trans + sizeof *keys + 1), lim->max_memory)) {
                            st = sv_error_set(err, SV_ERR_BUDGET, -1,
                                              "a numeric constraint exceeds what is left of the compile's memory budget of %zu bytes",
                                              lim->max_memory);
                            goto done;
                        }
                        uint64_t *nk = realloc(keys, cap * sizeof *nk);
                        if (nk) keys = nk;
                        int32_t *nt = realloc(raw.trans, (size_t)cap * NCLS * sizeof *nt);
                        if (nt) raw.trans = nt;
                        uint8_t *na = realloc(raw.accept, cap);
                        if (na) raw.accept = na;
                        if (!nk || !nt || !na) goto oom;
                    }
                    keys[n] = k;
                    raw.accept[n] = accepts(c, &s);
                    table[h] = n + 1;
                    id = (int32_t)n++;
                    if (2 * n > tcap) {
                        uint32_t ncap = tcap * 2;
                        uint32_t *nt = calloc(ncap, sizeof *nt);
                        if (!nt) goto oom;
                        for (uint32_t i = 0; i < n; i++) {
                            uint32_t hh = sv_hash_fib32(keys[i]) & (ncap - 1);
                            while (nt[hh]) hh = (hh + 1) & (ncap - 1);
                            nt[hh] = i + 1;
                        }
                        free(table);
                        table = nt;
                        tcap = ncap;
                    }
                }
            }
            raw.trans[(size_t)cur * NCLS + (size_t)cls] = id;
        }
    }
    raw.nstates = n;
    raw.start = 0;
    st = sv_dfa_minimize_budget(&raw, (size_t)cap * sizeof *keys + (size_t)tcap * sizeof *table, lim, err);
    if (!st) st = sv_dfa_minimize(&raw, out, err);
    goto done;
oom:
    st = sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory building a numeric automaton");
done:
    free(keys);
    free(table);
    sv_rawdfa_free(&raw);
    return st;
}

/* ---- sv_json_number ------------------------------------------------------ */

/* Describes the spec for error messages ("minimum 5, maximum 3"). */
static void describe(const sv_num_spec_t *spec, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    const sv_num_bound_t *b[2] = {&spec->min, &spec->max};
    static const char *names[2][2] = {{"minimum", "exclusiveMinimum"}, {"maximum", "exclusiveMaximum"}};
    for (int i = 0; i < 2; i++)
        if (b[i]->set && n < cap)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s %.60s", n ? ", " : "", names[i][b[i]->exclusive],
                                  b[i]->value ? b[i]->value : "?");
    if (spec->multiple_of && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%smultipleOf %.60s", n ? ", " : "", spec->multiple_of);
    if (n == 0) snprintf(buf, cap, "no constraint");
}

/* Intersects *acc with d (both owned); *acc is NULL the first time. */
static sv_status and_into(sv_dfa_t **acc, sv_dfa_t *d, const sv_fsm_limits_t *lim, sv_error_t *err) {
    if (!*acc) {
        *acc = d;
        return SV_OK;
    }
    sv_dfa_t *r = NULL;
    sv_status st = sv_dfa_product(*acc, d, SV_DFA_AND, lim, &r, err);
    sv_dfa_destroy(*acc);
    sv_dfa_destroy(d);
    *acc = r;
    return st;
}

/* The bound a decimal too long to track would exceed. */
#define MAX_DIGITS ((1u << POS_BITS) - 2)

sv_status sv_json_number(sv_arena_t *a, const sv_num_spec_t *spec, const sv_fsm_limits_t *lim, sv_ast_t **out,
                         sv_error_t *err) {
    sv_fsm_limits_t def;
    if (!lim) sv_fsm_limits_default(&def), lim = &def;
    if (!a || !spec || !out) return sv_error_set(err, SV_ERR_ARG, -1, "sv_json_number: NULL argument");
    comp_t comps[3];
    int nc = 0;
    const sv_num_bound_t *bounds[2] = {&spec->min, &spec->max};
    for (int i = 0; i < 2; i++) {
        const sv_num_bound_t *b = bounds[i];
        if (!b->set) continue;
        comp_t *c = &comps[nc++];
        memset(c, 0, sizeof *c);
        c->kind = COMP_CMP;
        c->integer = spec->integer;
        if (!decimal_parse(b->value, &c->m))
            return sv_error_set(err, SV_ERR_ARG, -1, "%s is not a plain decimal: \"%.60s\"", i ? "maximum" : "minimum",
                                b->value ? b->value : "(null)");
        if (c->m.il + c->m.fl > MAX_DIGITS || c->m.il + c->m.fl + 8 > lim->max_dfa_states)
            return sv_error_set(err, SV_ERR_BUDGET, -1, "the %s has %zu digits, more than the max_dfa_states budget allows",
                                i ? "maximum" : "minimum", c->m.il + c->m.fl);
        c->mask = i == 0 ? (b->exclusive ? REL_GT : REL_GT | REL_EQ) : (b->exclusive ? REL_LT : REL_LT | REL_EQ);
    }
    if (spec->multiple_of) {
        decimal_t m;
        if (!decimal_parse(spec->multiple_of, &m) || m.neg || decimal_is_zero(&m))
            return sv_error_set(err, SV_ERR_ARG, -1, "multipleOf must be a positive plain decimal, not \"%.60s\"",
                                spec->multiple_of);
        /* p: the digits of I and F together, without leading zeros. */
        uint64_t p = 0;
        size_t nd = 0;
        bool too_big = false;
        for (size_t i = 0; i < m.il + m.fl; i++) {
            char ch = i < m.il ? m.ip[i] : m.fp[i - m.il];
            if (nd == 0 && ch == '0') continue;
            if (++nd > 12) { too_big = true; break; }
            p = p * 10 + (uint64_t)(ch - '0');
        }
        /* Raw states: start, '-', "0", then a remainder per integer-part
         * state, and (numbers) per '.' and per fraction position. */
        uint64_t need = too_big ? UINT64_MAX : spec->integer ? p + 3 : p * (2 + (m.fl ? (uint64_t)m.fl : 1)) + 3;
        if (too_big || m.fl > MAX_DIGITS || p >= (1ull << REM_BITS) || need > lim->max_dfa_states)
            return sv_error_set(err, SV_ERR_BUDGET, -1,
                                "multipleOf %.60s needs a remainder automaton of about %s%llu states, over the "
                                "max_dfa_states budget of %u",
                                spec->multiple_of, too_big ? "more than " : "",
                                (unsigned long long)(too_big ? 1000000000000ull : need), lim->max_dfa_states);
        comp_t *c = &comps[nc++];
        memset(c, 0, sizeof *c);
        c->kind = COMP_MOD;
        c->integer = spec->integer;
        c->p = p;
        c->q = (uint32_t)m.fl;
        c->pow10 = sv_arena_alloc(a, ((size_t)c->q + 1) * sizeof *c->pow10);
        if (!c->pow10) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        c->pow10[0] = 1 % p;
        for (uint32_t k = 1; k <= c->q; k++) c->pow10[k] = c->pow10[k - 1] * 10 % p;
    }
    if (nc == 0) {
        memset(&comps[0], 0, sizeof comps[0]);
        comps[0].kind = COMP_ANY;
        comps[0].integer = spec->integer;
        nc = 1;
    }
    sv_dfa_t *acc = NULL;
    sv_status st = SV_OK;
    for (int i = 0; i < nc && !st; i++) {
        sv_dfa_t *d = NULL;
        st = build_dfa(&comps[i], lim, &d, err);
        if (!st) st = and_into(&acc, d, lim, err);
    }
    if (st == SV_ERR_EMPTY) {
        char what[200];
        describe(spec, what, sizeof what);
        sv_dfa_destroy(acc);
        return sv_error_set(err, SV_ERR_EMPTY, -1, "no %s satisfies %s", spec->integer ? "integer" : "number", what);
    }
    if (st) {
        sv_dfa_destroy(acc);
        return st;
    }
    if (!sv_arena_defer(a, (sv_arena_cleanup_fn)sv_dfa_destroy, acc))
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    sv_ast_t *n = sv_ast_dfa(a, acc, false);
    if (!n) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    *out = n;
    return SV_OK;
}

/* ---- exponent spellings --------------------------------------------------- */

/* Compares two normalized decimals by value: -1, 0 or 1. */
static int decimal_cmp(const decimal_t *x, const decimal_t *y) {
    if (x->neg != y->neg) return x->neg ? -1 : 1;
    int mag; /* |x| against |y| */
    if (x->il != y->il) {
        mag = x->il < y->il ? -1 : 1;
    } else {
        int r = memcmp(x->ip, y->ip, x->il);
        if (r == 0) {
            size_t n = x->fl < y->fl ? x->fl : y->fl;
            r = memcmp(x->fp, y->fp, n);
            if (r == 0) r = x->fl < y->fl ? -1 : x->fl > y->fl ? 1 : 0;
        }
        mag = r < 0 ? -1 : r > 0 ? 1 : 0;
    }
    return x->neg ? -mag : mag;
}

/* The relation of a bound's value (checked to parse) with the plain decimal lit. */
static int bound_cmp(const sv_num_bound_t *b, const char *lit) {
    decimal_t x, y;
    decimal_parse(b->value, &x);
    decimal_parse(lit, &y);
    return decimal_cmp(&x, &y);
}

#define EXP_MANTISSA "[1-9](\\.[0-9]*[1-9])?"
#define EXP_TINY "e-(0[5-9]|[1-9][0-9]|[12][0-9][0-9]|30[0-7])"
#define EXP_HUGE "e\\+(1[6-9]|[2-9][0-9]|[12][0-9][0-9]|30[0-7])"
#define E16 "10000000000000000"

sv_status sv_json_number_exp(sv_arena_t *a, const sv_num_spec_t *spec, sv_ast_t **out, sv_error_t *err) {
    if (!a || !spec || !out) return sv_error_set(err, SV_ERR_ARG, -1, "sv_json_number_exp: NULL argument");
    *out = NULL;
    if (spec->integer || spec->multiple_of) return SV_OK;
    const sv_num_bound_t *mn = &spec->min, *mx = &spec->max;
    decimal_t chk;
    if ((mn->set && !decimal_parse(mn->value, &chk)) || (mx->set && !decimal_parse(mx->value, &chk)))
        return sv_error_set(err, SV_ERR_ARG, -1, "a bound is not a plain decimal");
    /* 1e308 and -1e308 as plain decimals. */
    char p308[311], n308[311];
    p308[0] = '1', n308[0] = '-', n308[1] = '1';
    memset(p308 + 1, '0', 308), memset(n308 + 2, '0', 308);
    p308[309] = '\0', n308[310] = '\0';
    /* Whether every value of a group satisfies the bounds (a lower bound
     * below the group's least value, an upper bound above its greatest). */
    bool tiny_pos = (!mn->set || bound_cmp(mn, "0") <= 0) && (!mx->set || bound_cmp(mx, "0.0001") >= 0);
    bool tiny_neg = (!mn->set || bound_cmp(mn, "-0.0001") <= 0) && (!mx->set || bound_cmp(mx, "0") >= 0);
    bool huge_pos = (!mn->set || bound_cmp(mn, E16) < 0 || (bound_cmp(mn, E16) == 0 && !mn->exclusive)) &&
                    (!mx->set || bound_cmp(mx, p308) >= 0);
    bool huge_neg = (!mn->set || bound_cmp(mn, n308) <= 0) &&
                    (!mx->set || bound_cmp(mx, "-" E16) > 0 || (bound_cmp(mx, "-" E16) == 0 && !mx->exclusive));
    const char *groups[4][2] = {{"", EXP_TINY}, {"-", EXP_TINY}, {"", EXP_HUGE}, {"-", EXP_HUGE}};
    bool keep[4] = {tiny_pos, tiny_neg, huge_pos, huge_neg};
    char pat[512];
    size_t n = 0;
    for (int g = 0; g < 4; g++) {
        if (!keep[g]) continue;
        n += (size_t)snprintf(pat + n, sizeof pat - n, "%s%s%s%s", n ? "|" : "", groups[g][0], EXP_MANTISSA, groups[g][1]);
    }
    if (n == 0) return SV_OK;
    return sv_regex_parse(pat, n, a, out, err);
}

bool sv_json_number_exp_spelling(const char *decimal, char *buf, size_t cap) {
    decimal_t d;
    if (!decimal_parse(decimal, &d) || decimal_is_zero(&d)) return false;
    /* The significant digits are positions [first, last] of ip·fp (the
     * integer digits then the fraction digits); e is the decimal exponent of
     * the first one. */
    size_t total = d.il + d.fl, first = 0, last = total;
    long e;
    if (!(d.il == 1 && d.ip[0] == '0')) {
        e = (long)d.il - 1;
    } else {
        first = 1;
        while (first < total && d.fp[first - 1] == '0') first++;
        e = -(long)first;
    }
#define DIGIT(i) ((i) < d.il ? d.ip[i] : d.fp[(i) - d.il])
    while (last > first + 1 && DIGIT(last - 1) == '0') last--;
    size_t nd = last - first;
    if (nd > 17 || (e >= -4 && e < 16) || e < -307 || e > 307) return false;
    char tmp[48];
    size_t k = 0;
    if (d.neg) tmp[k++] = '-';
    tmp[k++] = DIGIT(first);
    if (nd > 1) tmp[k++] = '.';
    for (size_t i = first + 1; i < last; i++) tmp[k++] = DIGIT(i);
#undef DIGIT
    k += (size_t)snprintf(tmp + k, sizeof tmp - k, "e%c%02ld", e < 0 ? '-' : '+', e < 0 ? -e : e);
    if (k + 1 > cap) return false;
    memcpy(buf, tmp, k + 1);
    return true;
}

/* ---- sv_json_number_value ------------------------------------------------ */

/* The literal s[0..n), or NULL when out of memory. */
static sv_ast_t *literal(sv_arena_t *a, const char *s, size_t n) {
    if (n == 0) return sv_ast_empty(a);
    sv_ast_t **kids = sv_arena_alloc(a, n * sizeof *kids);
    if (!kids) return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(kids[i] = sv_ast_codepoint(a, (uint8_t)s[i]))) return NULL;
    return sv_ast_cat(a, kids, (uint32_t)n);
}

/* kid repeated min..max times, or NULL when kid is (out of memory). */
static sv_ast_t *repeat(sv_arena_t *a, sv_ast_t *kid, uint32_t min, uint32_t max) {
    return kid ? sv_ast_repeat(a, kid, min, max) : NULL;
}

static sv_ast_t *cat3(sv_arena_t *a, sv_ast_t *x, sv_ast_t *y, sv_ast_t *z) {
    if (!x || !y || !z) return NULL;
    sv_ast_t *k[3] = {x, y, z};
    return sv_ast_cat(a, k, 3);
}

sv_status sv_json_number_value(sv_arena_t *a, const char *decimal, sv_ast_t **out, sv_error_t *err) {
    decimal_t d;
    if (!a || !out) return sv_error_set(err, SV_ERR_ARG, -1, "sv_json_number_value: NULL argument");
    if (!decimal_parse(decimal, &d))
        return sv_error_set(err, SV_ERR_ARG, -1, "not a plain decimal: \"%.60s\"", decimal ? decimal : "(null)");
    /* Sign: '-' for negative values, "-?" for zero (both spellings of 0). */
    sv_ast_t *sign = d.neg ? literal(a, "-", 1) : sv_ast_empty(a);
    if (decimal_is_zero(&d)) sign = repeat(a, literal(a, "-", 1), 0, 1);
    sv_ast_t *tail;
    if (d.fl == 0) /* (\.0+)? */
        tail = repeat(a, cat3(a, literal(a, ".", 1), repeat(a, literal(a, "0", 1), 1, SV_AST_INF), sv_ast_empty(a)), 0, 1);
    else /* \.F0* */
        tail = cat3(a, literal(a, ".", 1), literal(a, d.fp, d.fl), repeat(a, literal(a, "0", 1), 0, SV_AST_INF));
    sv_ast_t *n = cat3(a, sign, literal(a, d.ip, d.il), tail);
    if (!n) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    *out = n;
    return SV_OK;
}

/* ---- sv_shortest_digits, sv_decimal_from_double --------------------------- */

bool sv_shortest_digits(double x, char dig[24], int *nd_out, int *exp10_out, bool *neg_out) {
    if (!isfinite(x) || x == 0) return false;
    /* Shortest round-trip: the first precision whose %e spelling reads back
     * as x; 17 significant digits always do. */
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    /* e is [-]d[.ddd]e[+-]dd: collect the digits (whatever the locale's
     * decimal point) and the exponent. */
    int nd = 0;
    const char *p = e;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e' && *p != 'E'; p++)
        if (is_digit(*p) && nd < 24) dig[nd++] = *p;
    if (!*p || nd == 0) return false;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    *nd_out = nd;
    *exp10_out = atoi(p + 1);
    *neg_out = neg;
    return true;
}

/* -0.0 gives "0": JSON Schema compares numbers by value, and both spellings
 * of zero are in every language built from "0" anyway. */
bool sv_decimal_from_double(double x, char *buf, size_t cap) {
    if (!buf || !isfinite(x)) return false;
    if (x == 0) {
        if (cap < 2) return false;
        memcpy(buf, "0", 2);
        return true;
    }
    char dig[24];
    int nd, exp10;
    bool neg;
    if (!sv_shortest_digits(x, dig, &nd, &exp10, &neg)) return false;
    /* The value is 0.dig * 10^point. */
    int point = exp10 + 1;
    size_t need = (size_t)neg + (point <= 0 ? (size_t)(2 - point + nd) : point >= nd ? (size_t)point : (size_t)nd + 1);
    if (need + 1 > cap) return false;
    char *o = buf;
    if (neg) *o++ = '-';
    if (point <= 0) {
        *o++ = '0', *o++ = '.';
        for (int i = 0; i < -point; i++) *o++ = '0';
        memcpy(o, dig, (size_t)nd), o += nd;
    } else if (point >= nd) {
        memcpy(o, dig, (size_t)nd), o += nd;
        for (int i = nd; i < point; i++) *o++ = '0';
    } else {
        memcpy(o, dig, (size_t)point), o += point;
        *o++ = '.';
        memcpy(o, dig + point, (size_t)(nd - point)), o += nd - point;
    }
    *o = 0;
    return true;
}
