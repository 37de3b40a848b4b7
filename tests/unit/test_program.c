/* test_program.c — programs (fsm/program.c): free-form values as calls.
 *
 * For schemas whose free-form values compile to calls, random walks go
 * deep into nested containers (tokens that open brackets are favoured),
 * and at every step:
 *   - the mask of the configuration is checked bit by bit against brute
 *     force: a normal token is allowed iff the text so far plus the token
 *     is a prefix of an accepted string (sv_program_viable walks the
 *     program with its own stack), EOG iff the text is accepted
 *     (sv_dfa_matches), NEVER tokens and padding rows never;
 *   - sv_token_index_next agrees with the walk, sv_token_index_accepting with
 *     sv_dfa_matches, and the completion has sv_token_index_distance bytes
 *     and completes the text.
 * The same for objects whose keys come in any order (key sets), and for
 * GBNF grammars whose recursive rules are parts (fsm/grammar.c).
 * Then: values nested 50 deep are accepted and broken at any depth
 * rejected; the flat compilation (any_calls off) accepts exactly the same
 * strings up to its depth; and budget walks through the matcher end
 * accepting within every budget. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/dfa_internal.h"
#include "fsm/grammar.h"
#include "fsm/structural_tag.h"
#include "fsm/matcher.h"
#include "fsm/schema.h"
#include "fsm/token_index.h"
#include "util/rng.h"

#include "unit_vocab.h"

/* Every byte, JSON punctuation runs that cross container ends (the tokens
 * that pop several frames), words, digits, UTF-8. */
static void vocab(vocab_t *v, sv_rng_t *rng) {
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        add(v, &c, 1, SV_TOKKIND_NORMAL);
    }
    static const char *const fixed[] = {
        "{\"", "\"}", "\": ", "\": \"", "\", \"", ", ", ": ", "[{", "}]", "}, {", "null", "true", "false", "[[",
        "]]", "]]]", "}}", "}}}", "}]}", "]}", "\"}]", "\"]}", "\"}}", "1}", "1]", "0]]", "e]", "\": {", "\": [",
        "\": {\"", "[[[", "{\"a\": ", "\"a\"", "\": null}", "], [", "}, [", "], {", "\\\"", "\\n", "\\u00", "é",
        "日本", "\xf0\x9f\x98\x80", "\xe2\x82", "name", "1.5", "-0", "10", "  ", "\n", " ", "\n  ", "\t",
        /* string content, then out of a part: the boundary walk's tails
         * (token_config.c boundary_tails) */
        "a\"}", "xy\"}]", "é\"}", "ab\"]}", "1\"}, {\"", "z\\\"\"}", "日\"]]", "b\"}}", "a\", \"", "q\"]",
        "\xe2\x82\xac\"}]",
        /* into a part and on in its string content: summarized subtrees
         * after a crossing */
        "\"ab", "\"abc", "\"abx", "\"ab 1", "\"日本", "\"日本語", "\"é", "\"éa", "[\"xy", "[\"xyz", "{\"ab", "{\"abc",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) adds(v, fixed[i]);
    add(v, "<|eot|>", 7, SV_TOKKIND_EOG);
    add(v, "<|special|>", 11, SV_TOKKIND_NEVER);
    static const char alpha[] = "abcxyz019 \"\\:,{}[]-.e";
    for (int i = 0; i < 1500; i++) {
        char buf[16];
        uint32_t L = 1 + (uint32_t)sv_rng_below(rng, 8);
        for (uint32_t k = 0; k < L; k++) buf[k] = alpha[sv_rng_below(rng, sizeof alpha - 1)];
        add(v, buf, L, SV_TOKKIND_NORMAL);
    }
}

static sv_key_order key_order = SV_KEY_ORDER_SCHEMA; /* of every compile (main sets it) */

static sv_dfa_t *compile(const char *text, bool calls, sv_ws_mode ws) {
    sv_schema_opts_t o;
    sv_schema_opts_default(&o);
    o.any_calls = calls;
    o.key_order = key_order;
    o.ws = ws;
    sv_dfa_t *d = NULL;
    sv_error_t e;
    sv_status st = sv_schema_compile(text, strlen(text), &o, &d, NULL, &e);
    CHECK(st == SV_OK, "%s: %s", text, e.message);
    return d;
}

static bool opens(const vocab_t *v, int32_t id) {
    for (uint32_t i = 0; i < v->lens[id]; i++)
        if (v->bytes[id][i] == '[' || v->bytes[id][i] == '{') return true;
    return false;
}

/* The link's bdist and qcrit (program.c boundary_distances) against a
 * search forward from each state over the program's own table: the bytes
 * to the nearest state with a call or a final one (1 there), and whether
 * each way there takes the quote's class. */
static void check_bdist(const char *schema, const sv_dfa_t *d) {
    if (d->ks) { /* guards cross too: the token index finds them (token_config.c) */
        CHECK(!d->bdist && !d->qcrit, "%s: the link found boundary distances without the guards", schema);
        return;
    }
    CHECK(d->bdist && d->qcrit, "%s: the link left no boundary distances", schema);
    if (!d->bdist || !d->qcrit) return;
    uint32_t n = d->nstates, k = d->nclasses, kq = d->classes['"'], bad = 0;
    uint32_t *dist = malloc(n * sizeof *dist), *queue = malloc(n * sizeof *queue);
    for (int quote = 0; quote < 2; quote++)
        for (uint32_t x0 = 0; x0 < n; x0++) {
            /* quote 0: every class (bdist); 1: all but the quote's (qcrit) */
            for (uint32_t x = 0; x < n; x++) dist[x] = UINT32_MAX;
            uint32_t qh = 0, qt = 0, found = UINT32_MAX;
            dist[x0] = 1, queue[qt++] = x0;
            while (qh < qt && found == UINT32_MAX) {
                uint32_t x = queue[qh++];
                if (d->accept[x] || sv_dfa_has_calls(d, (int32_t)x)) { found = dist[x]; break; }
                for (uint32_t c = 0; c < k; c++) {
                    int32_t y = d->trans[(size_t)x * k + c];
                    if (y < 0 || (quote && c == kq) || dist[y] != UINT32_MAX) continue;
                    dist[y] = dist[x] + 1, queue[qt++] = (uint32_t)y;
                }
            }
            if (quote == 0) {
                uint32_t want = found == UINT32_MAX ? SV_BDIST_INF : found < SV_BDIST_INF ? found : SV_BDIST_INF - 1;
                bad += d->bdist[x0] != want;
            } else {
                bad += d->qcrit[x0] != (found == UINT32_MAX);
            }
        }
    CHECK(bad == 0, "%s: %u boundary distances differ from a search forward", schema, bad);
    free(dist);
    free(queue);
}

/* Random walks with brute-force masks over the program d (named schema in
 * messages; the index takes d). Returns the deepest stack seen. */
static uint32_t walks_dfa(const char *schema, sv_dfa_t *d, const vocab_t *v, const sv_token_set_t *ts, uint32_t seeds,
                          uint32_t steps) {
    if (!d) return 0;
    CHECK(sv_dfa_is_program(d), "%s: not compiled to a program", schema);
    sv_token_index_t *ix;
    sv_error_t e;
    if (sv_token_index_create(d, ts, NULL, &ix, &e)) { CHECK(0, "index: %s", e.message); return 0; }
    const sv_dfa_t *pd = sv_token_index_dfa(ix);
    check_bdist(schema, pd);
    uint32_t words = sv_token_set_mask_words(ts), deepest = 0;
    uint8_t *text = malloc(1 << 16), *buf = malloc(1 << 16);
    int32_t *allowed = malloc(v->n * sizeof *allowed);
    for (uint32_t seed = 0; seed < seeds; seed++) {
        sv_rng_t rng;
        sv_rng_seed(&rng, 1000 + seed);
        int32_t st = 0;
        uint32_t len = 0, depth = 0;
        for (uint32_t step = 0; step < steps; step++) {
            const uint32_t *mask;
            if (sv_token_index_mask(ix, st, 0, &mask, NULL)) { CHECK(0, "mask failed"); break; }
            uint32_t na = 0, nopen = 0;
            for (uint32_t id = 0; id < words * 32; id++) {
                bool bit = (mask[id >> 5] >> (id & 31)) & 1;
                bool want = false;
                if (id < v->n && v->kinds[id] == SV_TOKKIND_NORMAL && v->lens[id] && len + v->lens[id] < (1 << 16)) {
                    memcpy(text + len, v->bytes[id], v->lens[id]);
                    want = sv_program_viable(pd, text, len + v->lens[id]);
                } else if (id < v->n && v->kinds[id] == SV_TOKKIND_EOG) {
                    want = sv_dfa_matches(pd, text, len);
                }
                CHECK(bit == want, "%s seed %u step %u: token %u (%.*s) mask %d, brute force %d after '%.*s'", schema,
                      seed, step, id, id < v->n ? (int)v->lens[id] : 0, id < v->n ? (const char *)v->bytes[id] : "", bit,
                      want, (int)(len > 60 ? 60 : len), (const char *)text + (len > 60 ? len - 60 : 0));
                if (want && v->kinds[id] == SV_TOKKIND_NORMAL) {
                    allowed[na++] = (int32_t)id;
                    nopen += opens(v, (int32_t)id);
                }
            }
            CHECK(sv_token_index_accepting(ix, st) == sv_dfa_matches(pd, text, len), "accepting differs");
            uint32_t dist = sv_token_index_distance(ix, st);
            uint32_t cl = sv_token_index_completion(ix, st, buf, 1 << 15);
            CHECK(cl == dist, "completion %u bytes, distance %u", cl, dist);
            /* every configuration a walk reaches can still end: no dead end */
            CHECK(cl != UINT32_MAX, "%s seed %u step %u: no completion after '%.*s'", schema, seed, step,
                  (int)(len > 60 ? 60 : len), (const char *)text + (len > 60 ? len - 60 : 0));
            if (cl == dist && len + cl < (1 << 16)) {
                memcpy(text + len, buf, cl);
                CHECK(sv_dfa_matches(pd, text, len + cl), "the completion does not complete the text");
            }
            if (!na) break;
            /* favour opening tokens for the first half, closing later */
            int32_t id = allowed[sv_rng_below(&rng, na)];
            if (step < steps * 3 / 4 && nopen && sv_rng_below(&rng, 8)) {
                int best = -1000;
                for (uint32_t k = 0; k < na; k++) {
                    int32_t c = allowed[(k + (uint32_t)sv_rng_below(&rng, na)) % na];
                    int net = 0;
                    for (uint32_t i = 0; i < v->lens[c]; i++) {
                        uint8_t ch = v->bytes[c][i];
                        net += (ch == '[' || ch == '{') - (ch == ']' || ch == '}');
                    }
                    if (net > best) best = net, id = c;
                }
            }
            int32_t nx = sv_token_index_next(ix, st, id);
            CHECK(nx >= 0, "next died on an allowed token");
            if (nx < 0) break;
            memcpy(text + len, v->bytes[id], v->lens[id]);
            len += v->lens[id];
            st = nx;
            /* the stack depth: count open brackets outside strings */
            depth = 0;
            bool in_str = false, esc = false;
            for (uint32_t i = 0; i < len; i++) {
                uint8_t c = text[i];
                if (in_str) { if (esc) esc = false; else if (c == '\\') esc = true; else if (c == '"') in_str = false; }
                else if (c == '"') in_str = true;
                else if (c == '[' || c == '{') depth++;
                else if (c == ']' || c == '}') depth--;
            }
            if (depth > deepest) deepest = depth;
        }
    }
    free(text);
    free(buf);
    free(allowed);
    sv_token_index_destroy(ix);
    return deepest;
}

static uint32_t walks(const char *schema, const vocab_t *v, const sv_token_set_t *ts, uint32_t seeds, uint32_t steps) {
    return walks_dfa(schema, compile(schema, true, SV_WS_CANONICAL), v, ts, seeds, steps);
}

/* GBNF grammars (fsm/grammar.c): recursive rules are parts. */
static void grammar_walks(const vocab_t *v, const sv_token_set_t *ts) {
    static const char *const grammars[] = {
        "root ::= list\nlist ::= \"[\" ( item ( \",\" item )* )? \"]\"\nitem ::= [a-z0-9]+ | list\n",
        /* nullable recursion: balanced brackets, the empty string included */
        "root ::= s\ns ::= \"[\" s \"]\" s |\n",
        /* JSON, as llama.cpp's grammars/json.gbnf writes it (ws at the ends of values) */
        "root ::= value\n"
        "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
        "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
        "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
        "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
        "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ws\n"
        "ws ::= | \" \"\n",
        /* a part that ends in whitespace where its caller reads whitespace
         * (a harmless competition, fsm/program.c) and a newline (the
         * return absorbed into the caller's loop, fsm/grammar.c) */
        "root ::= item (\"\\n\" item)*\n"
        "item ::= \"[\" ws ( item ws ( \",\" ws item ws )* )? \"]\" ws | [a-z]+ ws\n"
        "ws ::= [ \\t\\n]*\n",
        /* llama.cpp's arithmetic.gbnf with brackets: a term's trailing ws
         * may take the newline root reads after it */
        "root ::= (expr \"=\" ws term \"\\n\")+\n"
        "expr ::= term ([-+*/] term)*\n"
        "term ::= ident | num | \"[\" ws expr \"]\" ws\n"
        "ident ::= [a-z] [a-z0-9_]* ws\n"
        "num ::= [0-9]+ ws\n"
        "ws ::= [ \\t\\n]*\n",
        /* llama.cpp's json.gbnf itself: its ws ("\n" [ \t]{0,20}) and string
         * are shared rules, parts their uses call (fsm/grammar.c) */
        "root ::= object\n"
        "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
        "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
        "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
        "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
        "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
        "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n",
    };
    const size_t shared = 5; /* the grammar above: 3 recursive rules and 2 shared */
    for (size_t i = 0; i < sizeof grammars / sizeof *grammars; i++) {
        sv_dfa_t *d = NULL;
        sv_error_t e;
        sv_status st = sv_grammar_compile(grammars[i], strlen(grammars[i]), NULL, &d, &e);
        CHECK(st == SV_OK, "grammar %zu: %s", i, e.message);
        if (st) continue;
        if (i == shared) CHECK(sv_dfa_num_parts(d) == 6, "grammar %zu: %u parts, not root and 5", i, sv_dfa_num_parts(d));
        uint32_t deepest = walks_dfa(grammars[i], d, v, ts, 4, 160);
        CHECK(deepest >= (i == shared ? 3u : 4u), "grammar %zu: the walks reached a depth of only %u", i, deepest);
    }
}

/* A structural tag whose tags hold a recursive grammar (fsm/structural_tag.c
 * links the grammar's calls into the whole): the output opens with a tag. */
static void structural_tag_walks(const vocab_t *v, const sv_token_set_t *ts) {
    static const char stag[] =
        "{\"type\":\"structural_tag\",\"format\":{\"type\":\"triggered_tags\",\"triggers\":[\"<l>\"],"
        "\"at_least_one\":true,\"tags\":[{\"begin\":\"<l>\",\"end\":\"</l>\",\"content\":{\"type\":\"grammar\","
        "\"grammar\":\"root ::= \\\"[\\\" (item (\\\",\\\" item)*)? \\\"]\\\"\\nitem ::= [a-z]+ | root\\n\"}}]}}";
    sv_dfa_t *d = NULL;
    sv_error_t e;
    sv_status st = sv_structural_tag_compile(stag, sizeof stag - 1, NULL, &d, &e);
    CHECK(st == SV_OK, "structural tag: %s", e.message);
    if (st) return;
    CHECK(sv_dfa_num_parts(d) > 1, "structural tag: no parts (%u)", sv_dfa_num_parts(d));
    uint32_t deepest = walks_dfa("structural tag", d, v, ts, 4, 160);
    CHECK(deepest >= 3, "structural tag: the walks reached a depth of only %u", deepest);
}

/* A schema framed in free text (fsm/schema.h, sv_schema_frame_t): text,
 * then from the first "[" the array, whose free-form items are calls. */
static void framed_walks(const vocab_t *v, const sv_token_set_t *ts) {
    static const char schema[] = "{\"type\":\"array\",\"items\":{}}";
    sv_schema_frame_t f = {.trigger = "[", .blocks = false};
    sv_schema_opts_t o;
    sv_schema_opts_default(&o);
    o.frame = &f;
    sv_dfa_t *d = NULL;
    sv_error_t e;
    sv_status st = sv_schema_compile(schema, sizeof schema - 1, &o, &d, NULL, &e);
    CHECK(st == SV_OK, "framed: %s", e.message);
    if (st) return;
    CHECK(!sv_dfa_matches(d, (const uint8_t *)"a[1]b", 5) && sv_dfa_matches(d, (const uint8_t *)"ab[1, {}]", 9) &&
              sv_dfa_matches(d, (const uint8_t *)"no list", 7),
          "framed: the language is not text then the list");
    uint32_t deepest = walks_dfa("framed", d, v, ts, 4, 160);
    CHECK(deepest >= 3, "framed: the walks reached a depth of only %u", deepest);
}

static bool match(const sv_dfa_t *d, const char *s) { return sv_dfa_matches(d, (const uint8_t *)s, strlen(s)); }

/* Free-form values 50 deep, and broken at every depth. */
static void deep(void) {
    static const char *const schemas[] = {
        "{}",
        "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}}",
        "{\"type\": \"array\"}",
        "{\"type\": \"object\", \"additionalProperties\": true, \"properties\": {\"x\": {}}}",
    };
    for (size_t k = 0; k < sizeof schemas / sizeof *schemas; k++) {
        sv_dfa_t *d = compile(schemas[k], true, SV_WS_CANONICAL);
        if (!d) continue;
        char good[4096], bad[4096];
        for (int kind = 0; kind < 3; kind++) {
            /* kind 0: objects, 1: arrays, 2: alternating; the root is
             * an object or array as the schema allows */
            size_t n = 0;
            const bool root_obj = k == 1 || k == 3 || (k == 0 && kind != 1);
            const char *pre = root_obj ? "{\"x\": " : "[";
            n += (size_t)sprintf(good + n, "%s", pre);
            for (int i = 0; i < 50; i++) {
                bool obj = kind == 0 || (kind == 2 && i % 2 == 0);
                n += (size_t)sprintf(good + n, "%s", obj ? "{\"k\": " : "[1, ");
            }
            n += (size_t)sprintf(good + n, "\"v\"");
            /* close in reverse */
            char closers[64];
            int m = 0;
            for (int i = 49; i >= 0; i--) closers[m++] = (kind == 0 || (kind == 2 && i % 2 == 0)) ? '}' : ']';
            for (int i = 0; i < m; i++) good[n++] = closers[i];
            good[n++] = root_obj ? '}' : ']';
            good[n] = 0;
            CHECK(match(d, good), "%s: 50 deep (kind %d) rejected", schemas[k], kind);
            /* broken at every depth: a wrong closer, a missing one, an extra one */
            size_t first_close = n - 51;
            for (int i = 0; i <= 50; i++) {
                memcpy(bad, good, n + 1);
                char *c = bad + first_close + i;
                *c = *c == '}' ? ']' : '}';
                CHECK(!match(d, bad), "%s: wrong closer at %d accepted", schemas[k], i);
                memcpy(bad, good, n + 1);
                memmove(bad + first_close + i, bad + first_close + i + 1, n - first_close - i);
                CHECK(!match(d, bad), "%s: missing closer at %d accepted", schemas[k], i);
            }
            memcpy(bad, good, n + 1);
            bad[n] = '}';
            bad[n + 1] = 0;
            CHECK(!match(d, bad), "%s: an extra closer accepted", schemas[k]);
        }
        /* the flat compilation agrees where it reaches */
        sv_dfa_t *flat = compile(schemas[k], false, SV_WS_CANONICAL);
        static const char *const probe[] = {
            "{}", "[]", "{\"x\": 1}", "[1, [2, {\"a\": null}]]", "{\"a\": 1, \"b\": [true, false]}", "{\"a\": \"s\"}",
            "{\"x\": {\"y\": {}}}", "[[[]]]", "{\"a\": 1.5}", "{\"a\": 1, }", "[1,2]", "{\"a\":1}", "\"s\"", "7", "null",
        };
        for (size_t i = 0; flat && i < sizeof probe / sizeof *probe; i++)
            CHECK(match(d, probe[i]) == match(flat, probe[i]), "%s: calls and flat differ on %s", schemas[k], probe[i]);
        sv_dfa_destroy(flat);
        sv_dfa_destroy(d);
    }
}

/* The matcher under budgets: random walks end accepting within it. */
/* The mask bit of byte token b after text (walked a byte token at a time). */
static int byte_allowed(sv_token_index_t *ix, const char *text, uint8_t b) {
    int32_t st = 0;
    for (const char *p = text; *p && st >= 0; p++) st = sv_token_index_next(ix, st, (uint8_t)*p);
    const uint32_t *mask;
    if (st < 0 || sv_token_index_mask(ix, st, 0, &mask, NULL)) return -1;
    return (int)((mask[b >> 5] >> (b & 31)) & 1);
}

/* Each case's mask bit and sv_program_viable after its text, against
 * the answer worked out by hand. */
typedef struct { const char *text; char next; int want; } dcase_t;

static void dead_end_cases(const char *schema, const sv_token_set_t *ts, const dcase_t *cases, size_t n) {
    sv_dfa_t *d = compile(schema, true, SV_WS_CANONICAL);
    if (!d) return;
    sv_token_index_t *ix;
    sv_error_t e;
    if (sv_token_index_create(d, ts, NULL, &ix, &e)) { CHECK(0, "index: %s", e.message); return; }
    uint8_t text[512];
    for (size_t i = 0; i < n; i++) {
        int got = byte_allowed(ix, cases[i].text, (uint8_t)cases[i].next);
        size_t len = strlen(cases[i].text);
        memcpy(text, cases[i].text, len);
        text[len] = (uint8_t)cases[i].next;
        int viable = sv_program_viable(d, text, len + 1);
        CHECK(got == cases[i].want && viable == cases[i].want, "after '%s' the byte '%c': mask %d, viable %d, want %d",
              cases[i].text, cases[i].next, got, viable, cases[i].want);
    }
    sv_token_index_destroy(ix);
}

/* Where the key set decides (program.c, "Key sets"): a key's spelling that
 * only written keys finish, a key written again, a close with a required
 * key missing; the masks and sv_program_viable against the answers worked
 * out by hand. */
static void frames_dead_ends(const char *schema, const sv_token_set_t *ts) {
    static const dcase_t cases[] = {
        {"[{\"name\": \"ab\", \"names\": [], \"namespace\": true, \"n\": 1, \"", 'n', 0}, /* every n... key written */
        {"[{\"name\": \"ab\", \"names\": [], \"namespace\": true, \"n\": 1, \"", 'k', 1},
        {"[{\"name\": \"ab\", \"names\": [], \"n\": 1, \"nam", 'e', 1},                   /* namespace is left */
        {"[{\"name\": \"ab\", \"names\": [], \"n\": 1, \"name", 's', 1},
        {"[{\"name\": \"ab\", \"names\": [], \"n\": 1, \"name", '"', 0},                   /* name again */
        {"[{\"name\": \"ab\", \"names\": [], \"n\": 1, \"names", '"', 0},
        {"[{\"name\": \"ab\", \"k3\": 1", '}', 0},                                            /* inner missing */
        {"[{\"name\": \"ab\", \"k3\": 1", ',', 1},
        {"[{\"inner\": {\"q2\": 7, \"q11\": 1}, \"k3\": 1, \"name\": \"\"", '}', 1},
        {"[{\"inner\": {\"q11\": 1", '}', 0},                                                  /* q2 missing */
        {"[{\"inner\": {\"q11\": 1, \"zz\": 3, \"q2\": 0", '}', 1},                      /* an extra key */
        {"[{\"inner\": {\"q11\": 1, \"q2\": 0}, \"name\": \"a\", \"k3\": 2}, {\"k3\": 1, \"", 'k', 1},
        {"[{\"inner\": {\"q11\": 1, \"q2\": 0}, \"name\": \"a\", \"k3\": 2}, {\"k3\": 1, \"k", '3', 0},
    };
    dead_end_cases(schema, ts, cases, sizeof cases / sizeof *cases);
}

/* An object schema of 18 integer keys p0..p17 (too wide for an automaton
 * of key sets), then the keywords of rest. */
static void integer_keys(char *buf, size_t cap, char p, const char *rest) {
    int at = snprintf(buf, cap, "{\"type\": \"object\", \"properties\": {");
    for (int i = 0; i < 18; i++) at += snprintf(buf + at, cap - (size_t)at, "%s\"%c%d\": {\"type\": \"integer\"}", i ? ", " : "", p, i);
    snprintf(buf + at, cap - (size_t)at, "}, %s}", rest);
}

static void budgets(const vocab_t *v, const sv_token_set_t *ts, const char *schema) {
    sv_dfa_t *d = compile(schema, true, SV_WS_CANONICAL);
    if (!d) return;
    sv_token_index_t *ix;
    sv_error_t e;
    if (sv_token_index_create(d, ts, NULL, &ix, &e)) return;
    for (int64_t budget = 20; budget < 60; budget += 3) {
        for (uint32_t seed = 0; seed < 8; seed++) {
            sv_matcher_t *m;
            if (sv_matcher_create(ix, NULL, budget, &m, &e)) { CHECK(0, "matcher: %s", e.message); continue; }
            sv_rng_t rng;
            sv_rng_seed(&rng, seed * 31 + (uint64_t)budget);
            while (!sv_matcher_is_finished(m) && sv_matcher_tokens_left(m) > 0) {
                const uint32_t *mask;
                if (sv_matcher_mask(m, &mask, &e)) break;
                int32_t ids[4096];
                uint32_t n = 0;
                for (uint32_t id = 0; id < v->n && n < 4096; id++)
                    if ((mask[id >> 5] >> (id & 31)) & 1) ids[n++] = (int32_t)id;
                CHECK(n > 0, "budget %lld: an empty mask before the end", (long long)budget);
                if (!n) break;
                int32_t id = ids[sv_rng_below(&rng, n)];
                /* favour opening tokens early */
                if (sv_rng_below(&rng, 2) == 0)
                    for (uint32_t t = 0; t < 8; t++) {
                        int32_t c = ids[sv_rng_below(&rng, n)];
                        if (v->kinds[c] == SV_TOKKIND_NORMAL && opens(v, c)) { id = c; break; }
                    }
                CHECK(sv_matcher_accept(m, id), "an allowed token was refused");
            }
            CHECK(sv_matcher_is_accepting(m), "budget %lld seed %u: ended unaccepted", (long long)budget, seed);
            sv_matcher_destroy(m);
        }
    }
    sv_token_index_destroy(ix);
}

/* A closed object of 256 states or more (a $ref part), told apart by its kind. */
#define OBJ(kind)                                                                                                    \
    "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {\"kind\": {\"const\": \"" kind "\"}, " \
    "\"s\": {\"type\": \"string\", \"maxLength\": 12}, \"t\": {\"type\": \"string\", \"maxLength\": 12}}, "             \
    "\"required\": [\"kind\", \"s\"]}"

int main(void) {
    sv_rng_t rng;
    sv_rng_seed(&rng, 7);
    vocab_t v = {0};
    vocab(&v, &rng);
    sv_token_set_t *ts;
    sv_error_t e;
    if (sv_token_set_create(v.n, v.n + 40, (const uint8_t *const *)v.bytes, v.lens, v.kinds, &ts, &e)) {
        fprintf(stderr, "token set: %s\n", e.message);
        return 1;
    }
    static const char *const schemas[] = {
        "{}",
        "{\"type\": \"array\"}",
        "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {}}, \"required\": [\"a\"]}",
        "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"string\"}, \"v\": {}}}}",
        /* counted strings inside parts and beside them: chains in the boundary walk */
        "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {\"s\": {\"type\": \"string\", "
        "\"maxLength\": 6}, \"v\": {}, \"t\": {\"type\": \"string\", \"maxLength\": 3}}}}",
        /* a big value (schema_container.c BIG_VALUE_PART_MIN) between required keys, which two key orders
         * hold: the only part of a closed object, so a program only through it */
        "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {\"a\": {\"type\": \"integer\"}, "
        "\"r\": {\"type\": \"string\", \"maxLength\": 40}, \"b\": {\"type\": \"boolean\"}}, \"required\": [\"a\", \"b\"]}",
        /* $ref parts: C called at x; A and B both start with `{`, so their union at y takes them inline
         * (schema.c inline_alike_calls) instead of the linker refusing the program; a program only
         * through C's part */
        "{\"$defs\": {\"A\": " OBJ("a") ", \"B\": " OBJ("b") ", \"C\": " OBJ("c") "}, \"type\": \"object\", "
        "\"additionalProperties\": false, \"properties\": {\"x\": {\"$ref\": \"#/$defs/C\"}, \"y\": {\"anyOf\": "
        "[{\"$ref\": \"#/$defs/A\"}, {\"$ref\": \"#/$defs/B\"}]}}, \"required\": [\"x\", \"y\"]}",
    };
    uint32_t deepest = 0;
    for (size_t i = 0; i < sizeof schemas / sizeof *schemas; i++) {
        uint32_t dd = walks(schemas[i], &v, ts, 4, 160);
        if (dd > deepest) deepest = dd;
    }
    CHECK(deepest >= 8, "the walks reached a depth of only %u", deepest);
    /* Keys in any order (schema_container.c key sets), values as parts. */
    static const char *const any_order[] = {
        "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {}, \"c\": {\"type\": \"array\"}},"
        " \"required\": [\"a\", \"c\"], \"additionalProperties\": false}",
        "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"string\"}, \"v\": {},"
        " \"w\": {\"type\": \"object\", \"properties\": {\"p\": {}, \"q\": {\"type\": \"boolean\"}}}}, \"required\": [\"v\"]}}",
    };
    key_order = SV_KEY_ORDER_ANY;
    for (size_t i = 0; i < sizeof any_order / sizeof *any_order; i++) walks(any_order[i], &v, ts, 4, 160);
    key_order = SV_KEY_ORDER_SCHEMA;
    {   /* A wide object: each value a part, counted strings among them, so
         * chains meet part ends (the boundary walk's chain shortcut). */
        char wide[4096];
        int at = snprintf(wide, sizeof wide, "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {");
        for (int i = 0; i < 34; i++)
            at += snprintf(wide + at, sizeof wide - (size_t)at, "%s\"p%d\": {\"type\": \"string\", \"maxLength\": %d}",
                           i ? ", " : "", i, 2 + i % 5);
        snprintf(wide + at, sizeof wide - (size_t)at, "}, \"required\": [\"p0\"]}}");
        walks(wide, &v, ts, 4, 160);
    }
    grammar_walks(&v, ts);
    structural_tag_walks(&v, ts);
    framed_walks(&v, ts);
    deep();
    budgets(&v, ts, "{\"type\": \"object\", \"properties\": {\"a\": {}, \"b\": {\"type\": \"array\"}}, \"required\": [\"a\", \"b\"]}");
    {   /* Objects too wide for key sets keep their set in the walk (program.c
         * "Key sets"): keys that are prefixes of one another (a key's
         * spelling alive for its bytes and dead for the set), required keys,
         * no extra keys, then extra keys of a schema, one such object inside
         * another (frames that save a set) and inside an array's items. */
        char inner[4096], outer[8192];
        int at = snprintf(inner, sizeof inner, "{\"type\": \"object\", \"properties\": {");
        for (int i = 0; i < 18; i++)
            at += snprintf(inner + at, sizeof inner - (size_t)at, "%s\"q%d\": {\"type\": \"%s\"}", i ? ", " : "", i,
                           i % 3 ? "integer" : "boolean");
        snprintf(inner + at, sizeof inner - (size_t)at,
                 "}, \"required\": [\"q2\", \"q11\"], \"additionalProperties\": {\"type\": \"integer\"}}");
        at = snprintf(outer, sizeof outer, "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": "
                      "{\"n\": {\"type\": \"integer\"}, \"name\": {\"type\": \"string\", \"maxLength\": 3}, "
                      "\"names\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}, "
                      "\"namespace\": {\"type\": \"boolean\"}, \"inner\": %s", inner);
        for (int i = 0; i < 14; i++)
            at += snprintf(outer + at, sizeof outer - (size_t)at, ", \"k%d\": {%s}", i, i % 4 ? "\"type\": \"integer\"" : "");
        snprintf(outer + at, sizeof outer - (size_t)at,
                 "}, \"required\": [\"name\", \"k3\", \"inner\"], \"additionalProperties\": false}}");
        key_order = SV_KEY_ORDER_ANY;
        sv_dfa_t *kd = compile(outer, true, SV_WS_CANONICAL);
        CHECK(kd && kd->ks && kd->ks->nobjs == 2, "the wide objects keep no key sets in the walk");
        sv_dfa_destroy(kd);
        frames_dead_ends(outer, ts);
        /* a close that waits for dependencies and an anyOf of required keys */
        char conds[4096];
        integer_keys(conds, sizeof conds, 'd',
                     "\"required\": [\"d1\"], \"dependentRequired\": {\"d3\": [\"d7\", \"d9\"], \"d9\": [\"d12\"]}, "
                     "\"anyOf\": [{\"required\": [\"d15\"]}, {\"required\": [\"d16\"]}], \"additionalProperties\": false");
        static const dcase_t cc[] = {
            {"{\"d1\": 1, \"d16\": 2", '}', 1},
            {"{\"d1\": 1", '}', 0},                                          /* the anyOf */
            {"{\"d1\": 1, \"d15\": 0, \"d3\": 0", '}', 0},                   /* d3 needs d7 and d9 */
            {"{\"d1\": 1, \"d15\": 0, \"d3\": 0, \"d9\": 0, \"d7\": 0", '}', 0}, /* d9 needs d12 */
            {"{\"d12\": 1, \"d1\": 1, \"d15\": 0, \"d3\": 0, \"d9\": 0, \"d7\": 0", '}', 1},
        };
        dead_end_cases(conds, ts, cc, sizeof cc / sizeof *cc);
        walks(conds, &v, ts, 6, 160);
        budgets(&v, ts, conds);
        /* conditions that writing a key can break (a `not` and a oneOf of
         * key conditions): a table of the sets that may close; a key whose
         * writing leaves none dies where its spelling becomes it */
        char nm[4096];
        integer_keys(nm, sizeof nm, 'e',
                     "\"not\": {\"required\": [\"e2\", \"e5\"]}, "
                     "\"oneOf\": [{\"required\": [\"e7\", \"e8\"]}, {\"required\": [\"e9\"]}], "
                     "\"additionalProperties\": false");
        sv_dfa_t *nd = compile(nm, true, SV_WS_CANONICAL);
        CHECK(nd && nd->ks && nd->ks->nobjs == 1, "the object with key conditions keeps no key set in the walk");
        sv_dfa_destroy(nd);
        static const dcase_t nc[] = {
            {"{\"e2\": 1, \"e", '5', 0},                          /* e2 and e5: the not */
            {"{\"e2\": 1, \"e", '1', 1},
            {"{\"e5\": 1, \"e1\": 1, \"e", '2', 0},
            {"{\"e9\": 1, \"e7\": 1, \"e", '8', 0},             /* both branches, for good */
            {"{\"e9\": 1, \"e7\": 1, \"e1", '"', 1},
            {"{\"e9\": 1, \"e7\": 1", '}', 1},
            {"{\"e7\": 1, \"e8\": 1, \"e", '9', 0},
            {"{\"e7\": 1", '}', 0},                                /* neither branch yet */
            {"{\"e7\": 1", ',', 1},
            {"{\"e1\": 1", '}', 0},
        };
        dead_end_cases(nm, ts, nc, sizeof nc / sizeof *nc);
        walks(nm, &v, ts, 6, 160);
        budgets(&v, ts, nm);
        walks(inner, &v, ts, 6, 160);
        walks(outer, &v, ts, 6, 220);
        budgets(&v, ts, outer);
        budgets(&v, ts, inner);
        key_order = SV_KEY_ORDER_SCHEMA;
    }
    sv_token_set_destroy(ts);
    for (uint32_t i = 0; i < v.n; i++) free(v.bytes[i]);
    free(v.bytes);
    free(v.lens);
    free(v.kinds);
    printf("test_program: deepest stack %u; %s\n", deepest, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
