/* test_structural_tag.c — token masks of structural tags (fsm/structural_tag.h)
 * against brute force, where triggers are split across tokens.
 *
 * The vocabulary has every byte, and tokens that cut a trigger anywhere:
 * "<tool" then "_call>", a token holding the end of a trigger and the
 * first bytes of a tag ("l>{\"name\": \""), one holding a whole trigger and
 * bytes no tag allows ("<tool_call>hello"), end strings glued to text, and
 * an EOG token. Along several texts (free text, calls in the middle, a
 * think section that holds a trigger) it checks the mask of every state
 * bit by bit against running the DFA over each token's bytes (EOG exactly
 * in accepting states), and it names the verdicts that matter: a token
 * that would hide a trigger is masked, one that completes a trigger and
 * goes on into a tag is allowed.
 *
 *   test_structural_tag [--tokenizer tokenizer.json]   (a real vocabulary instead) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/structural_tag.h"
#include "fsm/token_index.h"
#include "src/constraint/tokens.h"

#include "unit_vocab.h"

static const char *const WEATHER =
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":10},"
    "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":[\"city\",\"days\"],"
    "\"additionalProperties\":false}";

static bool brute(const sv_dfa_t *d, int32_t s, const uint8_t *b, uint32_t len) {
    for (uint32_t i = 0; i < len && s >= 0; i++) s = sv_dfa_next(d, s, b[i]);
    return s >= 0;
}

static uint32_t checked_states, checked_tokens;

static void check_state(sv_token_index_t *ix, const vocab_t *v, int32_t s, const char *what) {
    const sv_dfa_t *d = sv_token_index_dfa(ix);
    const sv_token_set_t *ts = sv_token_index_tokens(ix);
    const uint32_t *m;
    CHECK(sv_token_index_mask(ix, s, 0, &m, NULL) == SV_OK, "%s: mask of state %d failed", what, s);
    uint32_t bad = 0;
    for (uint32_t id = 0; id < v->n; id++) {
        bool got = (m[id >> 5] >> (id & 31)) & 1u, want;
        uint8_t kind = sv_token_set_kind(ts, (int32_t)id);
        if (kind == SV_TOKKIND_EOG) want = sv_dfa_is_accepting(d, s);
        else if (kind == SV_TOKKIND_NEVER) want = false;
        else want = brute(d, s, v->bytes[id], v->lens[id]);
        if (got != want && bad++ < 3)
            CHECK(0, "%s: state %d token %u \"%.*s\": index %d, brute force %d", what, s, id, (int)v->lens[id],
                  (const char *)v->bytes[id], got, want);
        checked_tokens++;
    }
    checked_states++;
}

static int32_t find(const vocab_t *v, const char *s) {
    for (uint32_t i = 0; i < v->n; i++)
        if (v->lens[i] == strlen(s) && !memcmp(v->bytes[i], s, v->lens[i])) return (int32_t)i;
    return -1;
}

/* The state after text from the start; -1 when the DFA rejects it. */
static int32_t walk(const sv_dfa_t *d, const char *text, size_t n) {
    int32_t s = sv_dfa_start(d);
    for (size_t i = 0; i < n && s >= 0; i++) s = sv_dfa_next(d, s, (uint8_t)text[i]);
    return s;
}

/* Whether token tok is in the mask after prefix. */
static bool allowed(sv_token_index_t *ix, const vocab_t *v, const char *prefix, const char *tok) {
    int32_t s = walk(sv_token_index_dfa(ix), prefix, strlen(prefix)), id = find(v, tok);
    CHECK(s >= 0, "the prefix \"%s\" is rejected", prefix);
    CHECK(id >= 0, "no token \"%s\" in the vocabulary", tok);
    if (s < 0 || id < 0) return false;
    const uint32_t *m;
    if (sv_token_index_mask(ix, s, 0, &m, NULL)) return false;
    return (m[id >> 5] >> (id & 31)) & 1u;
}

/* Compiles stag and checks every state along each text (which must be accepted). */
static sv_token_index_t *index_of(const char *stag, const sv_token_set_t *ts) {
    sv_dfa_t *d = NULL;
    sv_error_t err;
    if (sv_structural_tag_compile(stag, strlen(stag), NULL, &d, &err)) {
        CHECK(0, "the structural tag does not compile: %s (at %s)", err.message, err.pointer);
        return NULL;
    }
    sv_token_index_opts_t io;
    sv_token_index_opts_default(&io);
    sv_token_index_t *ix = NULL;
    if (sv_token_index_create(d, ts, &io, &ix, &err)) {
        CHECK(0, "token index: %s", err.message);
        return NULL;
    }
    return ix;
}

static void check_texts(sv_token_index_t *ix, const vocab_t *v, const char *const *texts, const char *what) {
    const sv_dfa_t *d = sv_token_index_dfa(ix);
    for (const char *const *t = texts; *t; t++) {
        size_t n = strlen(*t);
        CHECK(walk(d, *t, n) >= 0 && sv_dfa_is_accepting(d, walk(d, *t, n)), "%s: \"%s\" is not accepted", what, *t);
        for (size_t i = 0; i <= n; i++) {
            int32_t s = walk(d, *t, i);
            if (s < 0) break;
            check_state(ix, v, s, what);
        }
    }
}

int main(int argc, char **argv) {
    const char *tokpath = argc == 3 && !strcmp(argv[1], "--tokenizer") ? argv[2] : NULL;
    if (argc != 1 && !tokpath) {
        fprintf(stderr, "usage: %s [--tokenizer tokenizer.json]\n", argv[0]);
        return 64;
    }
    vocab_t v = {0};
    sv_error_t err;
    sv_tokens_t *tok = NULL;
    sv_token_set_t *own = NULL;
    const sv_token_set_t *ts;
    if (tokpath) {
        if (sv_tokens_load(tokpath, NULL, 0, &tok, &err)) {
            fprintf(stderr, "%s: %s\n", tokpath, err.message);
            return 1;
        }
        ts = sv_tokens_set(tok);
        v.n = sv_token_set_size(ts);
        v.bytes = calloc(v.n, sizeof *v.bytes);
        v.lens = calloc(v.n, sizeof *v.lens);
        for (uint32_t i = 0; i < v.n; i++) {
            uint32_t L;
            const uint8_t *b = sv_token_set_bytes(ts, (int32_t)i, &L);
            v.bytes[i] = malloc(L ? L : 1);
            if (L) memcpy(v.bytes[i], b, L);
            v.lens[i] = L;
        }
    } else {
        for (int b = 0; b < 256; b++) {
            uint8_t c = (uint8_t)b;
            add(&v, &c, 1, SV_TOKKIND_NORMAL);
        }
        static const char *const toks[] = {
            "<tool_call>", "<tool", "_call", "_call>", "_cal", "l>", "ol_call>", "call>{\"", "l>{\"name\": \"",
            "_call>{\"name\": \"weather\"", "_call>x", "<tool_call>hello", "<tool_call>{\"name\": \"weather\"",
            "<tool_call>{\"", "hello <tool", " <tool_call>", "<<tool_call>", "x<tool_call>{\"name\": \"",
            "}</tool_call>", "}</tool_call> ok", "</tool_call>", "</tool_call>", "\"weather\"", "weather",
            "\", \"arguments\": ", "{\"city\": \"", "Paris", "\", \"days\": ", "3}", "3}}", "3}}</tool_call>", "}}</tool_call>",
            "<think>", "</think>", "</th", "ink>", "ink><tool_call>", "think", " done", "hello", " ", "\n",
            "é", "\xe2\x82", "\xac", "\xff",
        };
        for (size_t i = 0; i < sizeof toks / sizeof *toks; i++) adds(&v, toks[i]);
        add(&v, "<|eot|>", 7, SV_TOKKIND_EOG);
        if (sv_token_set_create(v.n, v.n + 5, (const uint8_t *const *)v.bytes, v.lens, v.kinds, &own, &err)) {
            fprintf(stderr, "token set: %s\n", err.message);
            return 1;
        }
        ts = own;
    }

    char stag[2048];
    snprintf(stag, sizeof stag,
             "{\"type\":\"structural_tag\",\"format\":{\"type\":\"triggered_tags\",\"triggers\":[\"<tool_call>\"],"
             "\"tags\":[{\"begin\":\"<tool_call>{\\\"name\\\": \\\"weather\\\", \\\"arguments\\\": \","
             "\"content\":{\"type\":\"json_schema\",\"json_schema\":%s},\"end\":\"}</tool_call>\"}]}}",
             WEATHER);
    sv_token_index_t *ix = index_of(stag, ts);
    static const char *const texts[] = {
        "hello",
        "Let me check <tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}</tool_call> done",
        "<tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"é\", \"days\": 1}}</tool_call>"
        "<tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"\", \"days\": 7}}</tool_call>",
        "<tool <tool_ </tool_call> <<tool_cal",
        NULL,
    };
    if (ix) {
        check_texts(ix, &v, texts, "triggered_tags");
        if (!tokpath) {
            /* free text: every token that keeps the text free or opens a tag */
            CHECK(allowed(ix, &v, "", "hello <tool"), "text that ends in a trigger's prefix is masked");
            CHECK(allowed(ix, &v, "", "<tool_call>{\"name\": \"weather\""), "a trigger going on into its tag is masked");
            CHECK(!allowed(ix, &v, "", "<tool_call>hello"), "a trigger followed by free text is allowed");
            CHECK(allowed(ix, &v, "", "<<tool_call>"), "a token that ends in a whole trigger is masked: the tag "
                                                      "is entered, its begin follows");
            CHECK(allowed(ix, &v, "", "</tool_call>"), "an end string in free text is masked");
            /* the trigger split: "<tool" then a token with its end and the tag's first bytes */
            CHECK(allowed(ix, &v, "Let me check <tool", "_call>{\"name\": \"weather\""), "split trigger into its tag");
            CHECK(allowed(ix, &v, "Let me check <tool", "_cal"), "split trigger, still free text");
            CHECK(!allowed(ix, &v, "Let me check <tool", "_call>x"), "split trigger, then bytes no tag allows");
            CHECK(allowed(ix, &v, "Let me check <tool", "_call>"), "a trigger's end alone enters the tag");
            CHECK(allowed(ix, &v, "Let me check <tool_ca", "l>{\"name\": \""), "split trigger into its tag");
            CHECK(allowed(ix, &v, "Let me check <tool", "ol_call>"), "\"<toolol_call>\" is free text");
            CHECK(allowed(ix, &v, "<tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\", \"days\": ",
                          "3}}</tool_call>"), "the arguments and the tag's end in one token");
            CHECK(allowed(ix, &v, "<tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\", \"days\": ",
                          "3}"), "3} closes the arguments, the tag's end follows");
            CHECK(!allowed(ix, &v, "<tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\", \"days\": ",
                           "hello"), "free text inside the arguments");
        }
        sv_token_index_destroy(ix);
    }

    /* A trigger inside a think section does not fire: any_text in a tag
     * reads to the tag's end string. */
    snprintf(stag, sizeof stag,
             "{\"type\":\"structural_tag\",\"format\":{\"type\":\"sequence\",\"elements\":["
             "{\"type\":\"tag\",\"begin\":\"<think>\",\"content\":{\"type\":\"any_text\"},\"end\":\"</think>\"},"
             "{\"type\":\"triggered_tags\",\"triggers\":[\"<tool_call>\"],\"tags\":[{\"begin\":"
             "\"<tool_call>{\\\"name\\\": \\\"weather\\\", \\\"arguments\\\": \",\"content\":{\"type\":\"json_schema\","
             "\"json_schema\":%s},\"end\":\"}</tool_call>\"}]}]}}",
             WEATHER);
    ix = index_of(stag, ts);
    static const char *const think_texts[] = {
        "<think>try <tool_call>hello</think>ok",
        "<think></think><tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"a\", \"days\": 2}}</tool_call>",
        NULL,
    };
    if (ix) {
        check_texts(ix, &v, think_texts, "think");
        if (!tokpath) {
            CHECK(allowed(ix, &v, "<think>", "<tool_call>hello"), "a trigger inside the thinking fires");
            CHECK(allowed(ix, &v, "<think>x</th", "ink><tool_call>"), "the think end split across tokens");
            CHECK(!allowed(ix, &v, "<think></think>", "<tool_call>hello"), "after the thinking, a trigger followed by free text is allowed");
        }
        sv_token_index_destroy(ix);
    }

    printf("test_structural_tag: %u states, %u token verdicts against brute force%s\n", checked_states,
           checked_tokens, failures ? "" : ", all agree");
    for (uint32_t i = 0; i < v.n; i++) free(v.bytes[i]);
    free(v.bytes);
    free(v.lens);
    free(v.kinds);
    sv_token_set_destroy(own);
    sv_tokens_destroy(tok);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
