/* test_dfa_ops.c — product construction (and, or, difference, xor) and the
 * embedding of compiled DFAs into ASTs, checked exhaustively on every string
 * up to length 6 over a small alphabet, and by algebraic identities (the
 * union equals the DFA of the regex alternation, field by field). */
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/dfa_internal.h"
#include "fsm/regex.h"
#include "test.h"

static sv_dfa_t *rx(const char *p) {
    sv_dfa_t *d = NULL;
    sv_error_t e;
    sv_status st = sv_regex_compile(p, strlen(p), NULL, &d, &e);
    CHECK(st == SV_OK, "/%s/: %s", p, e.message);
    return d;
}

static const char alphabet[] = {'a', 'b', 'c', '0', '-'};
#define NALPHA 5
#define MAXLEN 6

/* Calls fn on every string over the alphabet up to MAXLEN. */
static long for_all_strings(bool (*fn)(void *, const uint8_t *, size_t), void *ctx) {
    uint8_t buf[MAXLEN];
    long bad = 0, n = 0;
    for (int len = 0; len <= MAXLEN; len++) {
        long total = 1;
        for (int i = 0; i < len; i++) total *= NALPHA;
        for (long code = 0; code < total; code++, n++) {
            long c = code;
            for (int i = 0; i < len; i++) buf[i] = (uint8_t)alphabet[c % NALPHA], c /= NALPHA;
            if (!fn(ctx, buf, (size_t)len)) bad++;
        }
    }
    return bad ? -bad : n;
}

typedef struct { const sv_dfa_t *a, *b, *r; sv_dfa_op op; } prod_ctx_t;

static bool check_product(void *v, const uint8_t *s, size_t n) {
    prod_ctx_t *c = v;
    bool x = sv_dfa_matches(c->a, s, n), y = sv_dfa_matches(c->b, s, n);
    bool want = c->op == SV_DFA_AND ? x && y : c->op == SV_DFA_OR ? x || y : c->op == SV_DFA_DIFF ? x && !y : x != y;
    bool got = c->r ? sv_dfa_matches(c->r, s, n) : false;
    return got == want;
}

int main(void) {
    printf("test_dfa_ops: product construction and DFA embedding\n");
    static const char *pats[] = {
        "[abc]*", "a*b*", "(ab|ba)*", "[a-c]{2,4}", "0|-?[1-9][0-9]*|-?[0-9]{3}", "a[^b]*b?", ".*a.*", "(a|b|c|0)*-(a|b)?",
        "c?", "(aa)*", "(aaa)*", "[^a]*",
    };
    const int np = (int)(sizeof pats / sizeof pats[0]);
    sv_dfa_t *d[16];
    for (int i = 0; i < np; i++) d[i] = rx(pats[i]);
    static const char *opn[] = {"and", "or", "diff", "xor"};
    int products = 0, empties = 0;
    long strings = 0;
    for (int i = 0; i < np; i++)
        for (int j = 0; j < np; j++)
            for (int op = 0; op < 4; op++) {
                sv_dfa_t *r = NULL;
                sv_error_t e;
                sv_status st = sv_dfa_product(d[i], d[j], (sv_dfa_op)op, NULL, &r, &e);
                CHECK(st == SV_OK || st == SV_ERR_EMPTY, "/%s/ %s /%s/: %s", pats[i], opn[op], pats[j], e.message);
                empties += st == SV_ERR_EMPTY;
                if (op == SV_DFA_AND) { /* sv_dfa_meets asks the same without building it */
                    bool m = false;
                    CHECK(sv_dfa_meets(d[i], d[j], NULL, &m, &e) == SV_OK && m == (st == SV_OK), "/%s/ meets /%s/: %d",
                          pats[i], pats[j], (int)m);
                }
                prod_ctx_t c = {d[i], d[j], r, (sv_dfa_op)op};
                long n = for_all_strings(check_product, &c);
                CHECK(n > 0, "/%s/ %s /%s/: %ld strings disagree", pats[i], opn[op], pats[j], -n);
                strings += n > 0 ? n : 0;
                products++;
                sv_dfa_destroy(r);
            }
    printf("  %d products (%d empty) agree with the operands on all %d-letter strings up to length %d (%ld checks)\n",
           products, empties, NALPHA, MAXLEN, strings);

    /* Identities: a ∪ b is the DFA of (a)|(b); a \ a is empty; (aa)* ∩ (aaa)* = (a{6})*. */
    sv_dfa_t *u = NULL, *alt = rx("(a*b*)|((ab|ba)*)"), *ab = NULL, *six = rx("(a{6})*");
    sv_error_t e;
    CHECK(sv_dfa_product(d[1], d[2], SV_DFA_OR, NULL, &u, &e) == SV_OK && sv_dfa_equal(u, alt), "union is canonical");
    CHECK(sv_dfa_product(d[0], d[0], SV_DFA_DIFF, NULL, &ab, &e) == SV_ERR_EMPTY, "a minus a is empty");
    sv_dfa_destroy(ab);
    ab = NULL;
    CHECK(sv_dfa_product(d[9], d[10], SV_DFA_AND, NULL, &ab, &e) == SV_OK && sv_dfa_equal(ab, six), "(aa)* and (aaa)*");
    sv_dfa_destroy(u);
    sv_dfa_destroy(alt);
    sv_dfa_destroy(ab);
    sv_dfa_destroy(six);

    /* Budget: the product of two 2^10-state machines over disjoint tails. */
    sv_fsm_limits_t lim;
    sv_fsm_limits_default(&lim);
    lim.max_dfa_states = 1000;
    sv_dfa_t *x = rx("(a|b)*a(a|b){9}"), *y = rx("(a|b)*b(a|b){8}"), *r = NULL;
    CHECK(sv_dfa_product(x, y, SV_DFA_AND, &lim, &r, &e) == SV_ERR_BUDGET, "product budget");
    bool m;
    CHECK(sv_dfa_meets(x, y, &lim, &m, &e) == SV_ERR_BUDGET, "meets budget");
    sv_dfa_destroy(x);
    sv_dfa_destroy(y);
    sv_dfa_destroy(r);

    /* Embedding: "<" a-DFA ">" (b-DFA)* as an AST equals the regex spelled out. */
    sv_arena_t *ar = sv_arena_create(0);
    sv_ast_t *kids[3] = {sv_ast_codepoint(ar, '<'), sv_ast_dfa(ar, d[2], false), sv_ast_codepoint(ar, '>')};
    sv_ast_t *cat = sv_ast_cat(ar, kids, 3);
    sv_ast_t *both[2] = {cat, sv_ast_repeat(ar, sv_ast_dfa(ar, d[3], false), 0, SV_AST_INF)};
    sv_dfa_t *emb = NULL, *want = rx("<(ab|ba)*>([a-c]{2,4})*");
    CHECK(sv_dfa_from_ast(sv_ast_cat(ar, both, 2), NULL, &emb, &e) == SV_OK && sv_dfa_equal(emb, want),
          "embedded DFAs compose like their regexes");
    sv_dfa_destroy(emb);
    sv_dfa_destroy(want);

    /* JSON escaping: the content x"y\z<LF><0x01>é spelled as json.dumps does. */
    sv_dfa_t *raw = rx("x\"y\\\\z\\n\\x01é|[\\x00-\\x1f]"), *esc = NULL;
    sv_ast_t *q[3] = {sv_ast_codepoint(ar, '"'), sv_ast_dfa(ar, raw, true), sv_ast_codepoint(ar, '"')};
    CHECK(sv_dfa_from_ast(sv_ast_cat(ar, q, 3), NULL, &esc, &e) == SV_OK, "escaped embedding compiles");
    static const struct { const char *s; bool m; } js[] = {
        {"\"x\\\"y\\\\z\\n\\u0001\xc3\xa9\"", true}, {"\"x\"y\\z\n\x01\xc3\xa9\"", false},
        {"\"\\b\"", true}, {"\"\\t\"", true}, {"\"\\u001f\"", true}, {"\"\\u001F\"", false},
        {"\"\\u0008\"", false}, {"\"\\u0000\"", true}, {"\"\\/\"", false},
    };
    for (size_t i = 0; esc && i < sizeof js / sizeof js[0]; i++)
        CHECK(sv_dfa_matches(esc, (const uint8_t *)js[i].s, strlen(js[i].s)) == js[i].m, "escaped: %s", js[i].s);
    /* The direct construction (json_quote.c) is the same canonical DFA. */
    sv_dfa_t *dq = NULL;
    CHECK(sv_dfa_json_quoted_uncached(raw, NULL, &dq, &e) == SV_OK && esc && sv_dfa_equal(dq, esc),
          "quoted directly = quoted through the NFA");
    sv_dfa_destroy(dq);
    sv_dfa_destroy(esc);
    sv_dfa_destroy(raw);
    {
        /* Contents with every kind of escape, UTF-8, complements of keys
         * (an object's extra keys), and random patterns over bytes that
         * escapes spell: quoted directly and through the NFA, equal. */
        static const char *contents[] = {
            "[^]*", "", "a", "[\\x00-\\x1f]*", "[\"\\\\]+", "[^\\x00-\\x1f\"\\\\]*",
            "\\x08\\x0c\\x0a\\x0d\\x09\\x00\\x1f\\x10\\x0f", "(?:[^a]|a[^b])*", "é+[^é]?",
            "[\\x00-\\x0f]u00|[\\x10-\\x1f]\\\\", "(ab|\\x01|\"){2,5}", "[^]{3,7}", "x[0-9a-f\\x0b]*y",
        };
        int nq = 0;
        for (size_t i = 0; i < sizeof contents / sizeof contents[0]; i++) {
            sv_dfa_t *cd = NULL, *viaq = NULL, *direct = NULL;
            sv_error_t ce;
            if (sv_regex_compile(contents[i], strlen(contents[i]), NULL, &cd, &ce) != SV_OK) {
                CHECK(0, "content /%s/: %s", contents[i], ce.message);
                continue;
            }
            sv_ast_t *qq[3] = {sv_ast_codepoint(ar, '"'), sv_ast_dfa(ar, cd, true), sv_ast_codepoint(ar, '"')};
            CHECK(sv_dfa_from_ast(sv_ast_cat(ar, qq, 3), NULL, &viaq, &e) == SV_OK, "/%s/ through the NFA", contents[i]);
            CHECK(sv_dfa_json_quoted_uncached(cd, NULL, &direct, &e) == SV_OK, "/%s/ directly", contents[i]);
            CHECK(viaq && direct && sv_dfa_equal(viaq, direct), "/%s/: quoted directly differs", contents[i]);
            nq++;
            sv_dfa_destroy(cd);
            sv_dfa_destroy(viaq);
            sv_dfa_destroy(direct);
        }
        /* random contents: alternations of short byte classes and repeats */
        static const char *atoms[] = {"a", "\\x01", "\"", "\\\\", "\\n", "\\x1f", "[a-f]", "[\\x00-\\x20]",
                                      "é", "[^a]", "u", "0", "[\\x09\\x0a]"};
        const int na = (int)(sizeof atoms / sizeof atoms[0]);
        uint32_t seed = 12345;
        for (int round = 0; round < 200; round++) {
            char pat[256];
            size_t o = 0;
            int terms = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 4;
            for (int t = 0; t < terms; t++) {
                if (t) pat[o++] = '|';
                int len = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 4;
                for (int l = 0; l < len; l++) {
                    const char *at = atoms[((seed = seed * 1103515245u + 12345u) >> 16) % (uint32_t)na];
                    o += (size_t)snprintf(pat + o, sizeof pat - o, "%s", at);
                    uint32_t rep = ((seed = seed * 1103515245u + 12345u) >> 16) % 5;
                    if (rep == 0) pat[o++] = '*';
                    else if (rep == 1) pat[o++] = '?';
                }
            }
            pat[o] = '\0';
            sv_dfa_t *cd = NULL, *viaq = NULL, *direct = NULL;
            sv_error_t ce;
            if (sv_regex_compile(pat, o, NULL, &cd, &ce) != SV_OK) continue; /* empty language */
            sv_ast_t *qq[3] = {sv_ast_codepoint(ar, '"'), sv_ast_dfa(ar, cd, true), sv_ast_codepoint(ar, '"')};
            bool ok = sv_dfa_from_ast(sv_ast_cat(ar, qq, 3), NULL, &viaq, &e) == SV_OK &&
                      sv_dfa_json_quoted_uncached(cd, NULL, &direct, &e) == SV_OK && sv_dfa_equal(viaq, direct);
            CHECK(ok, "random content /%s/: quoted directly differs", pat);
            nq++;
            sv_dfa_destroy(cd);
            sv_dfa_destroy(viaq);
            sv_dfa_destroy(direct);
        }
        printf("  %d string contents quoted directly and through the NFA: equal DFAs\n", nq);
    }
    {
        /* Counted strings written down directly (json_quote.c) against the
         * content [^]{mn,mx} through subset construction and quoting: the
         * same canonical table (same states, classes, fingerprint), with
         * and without a maximum, and the budget refused, not overrun. */
        static const uint32_t bounds[][2] = {{0, 0}, {0, 1}, {1, 1}, {0, 2}, {2, 5}, {3, 3}, {0, SV_AST_INF},
                                             {1, SV_AST_INF}, {4, SV_AST_INF}, {0, 40}, {17, 40}, {40, 40}};
        int nc = 0;
        for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
            uint32_t mn = bounds[i][0], mx = bounds[i][1];
            char pat[64];
            if (mx == SV_AST_INF) snprintf(pat, sizeof pat, "[^]{%u,}", mn);
            else snprintf(pat, sizeof pat, "[^]{%u,%u}", mn, mx);
            sv_dfa_t *cd = NULL, *viaq = NULL, *direct = NULL;
            sv_error_t ce;
            CHECK(sv_regex_compile(pat, strlen(pat), NULL, &cd, &ce) == SV_OK, "%s compiles", pat);
            CHECK(cd && sv_dfa_json_quoted_uncached(cd, NULL, &viaq, &e) == SV_OK, "%s quoted", pat);
            CHECK(sv_dfa_json_quoted_counted_uncached(mn, mx, NULL, &direct, &e) == SV_OK, "%s counted: %s", pat,
                  e.message);
            CHECK(viaq && direct && sv_dfa_equal(viaq, direct) && sv_dfa_fingerprint(viaq) == sv_dfa_fingerprint(direct),
                  "%s: the counted string differs from the general route", pat);
            static const struct { const char *s; uint32_t cps; } probe[] = {
                {"\"\"", 0}, {"\"a\"", 1}, {"\"\\u001f\\n\xf4\x8f\xbf\xbf\"", 3}, {"\"\xed\x9f\xbf\xe0\xa0\x80\"", 2},
            };
            for (size_t j = 0; direct && j < sizeof probe / sizeof probe[0]; j++) {
                bool inb = probe[j].cps >= mn && (mx == SV_AST_INF || probe[j].cps <= mx);
                CHECK(sv_dfa_matches(direct, (const uint8_t *)probe[j].s, strlen(probe[j].s)) == inb,
                      "%s on %s", pat, probe[j].s);
            }
            CHECK(!direct || !sv_dfa_matches(direct, (const uint8_t *)"\"\xed\xa0\x80\"", 5), "%s: no surrogate", pat);
            nc++;
            sv_dfa_destroy(cd);
            sv_dfa_destroy(viaq);
            sv_dfa_destroy(direct);
        }
        sv_fsm_limits_t small;
        sv_fsm_limits_default(&small);
        small.max_dfa_states = 1000;
        sv_dfa_t *big = NULL;
        CHECK(sv_dfa_json_quoted_counted_uncached(0, 100, &small, &big, &e) == SV_ERR_BUDGET && !big,
              "a counted string past the state budget is refused");
        CHECK(sv_dfa_json_quoted_counted_uncached(5, 4, NULL, &big, &e) == SV_ERR_EMPTY && !big,
              "minLength above maxLength is empty");
        printf("  %d counted strings written down directly: equal to the general route\n", nc);
    }

    {
        /* An object's extra keys written down (sv_dfa_json_quoted_except)
         * against the general route: the keys' union subtracted from any
         * string, quoted. Equal tables (fingerprints too) on fixed and
         * random key sets (shared prefixes, a key a prefix of another, the
         * empty key), probes inside and outside, and keys it must leave to
         * the general route (escaped or non-ASCII bytes). */
        sv_dfa_t *anyc = rx("[^]*"), *anyq = NULL;
        CHECK(anyc && sv_dfa_json_quoted_uncached(anyc, NULL, &anyq, &e) == SV_OK, "any string quoted");
        static const char *fixed[][6] = {
            {"a", NULL}, {"", NULL}, {"ab", "abc", "a", NULL}, {"name", "namespace", "labels", "annotations", NULL},
            {"x y", "~", "0", "!#$%&'()*+,-./", NULL}, {"apiVersion", "kind", "metadata", "spec", "status", NULL},
        };
        static const char keych[] = "abcdn ~_0";
        uint32_t seed = 777;
        int nx = 0;
        for (int round = 0; round < 6 + 150; round++) {
            const char *keys[8];
            char kbuf[8][8];
            uint32_t nk = 0;
            if (round < 6) {
                while (fixed[round][nk]) keys[nk] = fixed[round][nk], nk++;
            } else {
                nk = 1 + ((seed = seed * 1103515245u + 12345u) >> 16) % 8;
                for (uint32_t i = 0; i < nk; i++) {
                    uint32_t len = ((seed = seed * 1103515245u + 12345u) >> 16) % 6;
                    for (uint32_t j = 0; j < len; j++)
                        kbuf[i][j] = keych[((seed = seed * 1103515245u + 12345u) >> 16) % (sizeof keych - 1)];
                    kbuf[i][len] = '\0';
                    keys[i] = kbuf[i];
                }
            }
            sv_ast_t *alts[8];
            for (uint32_t i = 0; i < nk; i++) {
                size_t len = strlen(keys[i]);
                sv_ast_t *cps[32];
                for (size_t j = 0; j < len; j++) cps[j] = sv_ast_codepoint(ar, (uint8_t)keys[i][j]);
                alts[i] = sv_ast_cat(ar, cps, (uint32_t)len);
            }
            sv_dfa_t *known = NULL, *freec = NULL, *general = NULL, *direct = NULL;
            bool ok = sv_dfa_from_ast(sv_ast_alt(ar, alts, nk), NULL, &known, &e) == SV_OK &&
                      sv_dfa_product(anyc, known, SV_DFA_DIFF, NULL, &freec, &e) == SV_OK &&
                      sv_dfa_json_quoted_uncached(freec, NULL, &general, &e) == SV_OK &&
                      sv_dfa_json_quoted_except(anyq, keys, nk, NULL, &direct, &e) == SV_OK && direct;
            CHECK(ok && sv_dfa_equal(general, direct) && sv_dfa_fingerprint(general) == sv_dfa_fingerprint(direct),
                  "extra keys of %u keys (round %d): written down differs from the general route", nk, round);
            for (uint32_t i = 0; direct && i < nk; i++) {
                char qs[32];
                int ql = snprintf(qs, sizeof qs, "\"%s\"", keys[i]);
                CHECK(!sv_dfa_matches(direct, (const uint8_t *)qs, (size_t)ql), "declared key %s is no extra key", qs);
                ql = snprintf(qs, sizeof qs, "\"%s\\n\"", keys[i]);
                CHECK(sv_dfa_matches(direct, (const uint8_t *)qs, (size_t)ql), "%s is an extra key", qs);
            }
            nx++;
            sv_dfa_destroy(known);
            sv_dfa_destroy(freec);
            sv_dfa_destroy(general);
            sv_dfa_destroy(direct);
        }
        static const char *odd[] = {"a\"b", "back\\slash", "tab\t", "caf\xc3\xa9", "del\x7f"};
        for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
            const char *keys[2] = {"plain", odd[i]};
            sv_dfa_t *direct = NULL;
            CHECK(sv_dfa_json_quoted_except(anyq, keys, 2, NULL, &direct, &e) == SV_OK && !direct,
                  "key %zu is left to the general route", i);
        }
        sv_fsm_limits_t small;
        sv_fsm_limits_default(&small);
        small.max_memory = 4096;
        const char *many[] = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "b"};
        sv_dfa_t *direct = NULL;
        CHECK(sv_dfa_json_quoted_except(anyq, many, 2, &small, &direct, &e) == SV_ERR_BUDGET && !direct,
              "the memory budget is checked before the table is built");
        printf("  %d extra-key regions written down: equal to the general route\n", nx);
        sv_dfa_destroy(anyc);
        sv_dfa_destroy(anyq);
    }

    /* A graph: 0 -a-> 1 -b-> 2 (final), 1 -eps-> 0, 0 -c-> 2: (a)+b | (a+)?c ... = (a a*)b | a* c. */
    sv_ast_edge_t edges[] = {{0, 1, sv_ast_codepoint(ar, 'a')}, {1, 2, sv_ast_codepoint(ar, 'b')}, {1, 0, NULL},
                             {0, 2, sv_ast_codepoint(ar, 'c')}};
    uint8_t fin[3] = {0, 0, 1};
    sv_dfa_t *g = NULL, *gw = rx("a+b|a*c");
    CHECK(sv_dfa_from_ast(sv_ast_graph(ar, 3, edges, 4, fin), NULL, &g, &e) == SV_OK && sv_dfa_equal(g, gw),
          "graph node equals its regex");
    sv_dfa_destroy(g);
    sv_dfa_destroy(gw);
    sv_arena_destroy(ar);
    printf("  identities, budget, and DFA embedding checked\n");
    for (int i = 0; i < np; i++) sv_dfa_destroy(d[i]);
    return test_summary("test_dfa_ops: and/or/diff/xor exhaustively, identities, embedding");
}
