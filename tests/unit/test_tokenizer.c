/* test_tokenizer.c — the tokenizer on tiny tokenizer.json files that the test
 * writes itself: hand-checked BPE merges, added and special tokens, NFC,
 * the split behaviors, byte fallback and unknown tokens, decoding, the
 * streaming detokenizer (characters cut across tokens), SentencePiece-style
 * BPE (Llama 2's Prepend/Replace normalizers, Metaspace), and errors.
 *
 * The byte-level tokenizer ("tiny") has ids 0..255 for the 256 bytes (id =
 * byte value, spelled in GPT-2's alphabet), then these merges, in rank
 * order, each making the next id from 256 on:
 *    0 "Ġ t"   1 "h e"   2 "Ġt he"   3 "l l"   4 "e ll"   5 "h ell"
 *    6 "hell o"   7 "Ġ w"   8 "o r"   9 "Ġw or"   10 "l d"   11 "Ġwor ld"
 * then "Ġxyz" (268, reachable only through ignore_merges) and the added
 * tokens <|eot|> (269, special), <tool> (270), <mask> (271, lstrip). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/tokenizer/bpe.h"
#include "src/tokenizer/bytelevel.h"
#include "src/tokenizer/detok.h"
#include "src/tokenizer/nfc.h"
#include "src/tokenizer/pretok.h"
#include "util/utf8.h"
#include "src/tokenizer/vocab.h"
#include "test.h"

#define LLAMA3_SPLIT                                                                               \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "                    \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const char *const MERGES[] = {"Ġ t", "h e", "Ġt he", "l l", "e ll", "h ell",
                                     "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"};
enum { N_MERGES = 12, ID_XYZ = 268, ID_EOT = 269, ID_TOOL = 270, ID_MASK = 271 };

static char *spell(const char *s) {
    /* The tokens above are written with Ġ for the space byte: already the
     * byte-level spelling. */
    return strdup(s);
}

static json_t *added(int id, const char *content, bool special, bool lstrip) {
    return json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id, "content", content, "special",
                     special, "normalized", false, "lstrip", lstrip, "rstrip", false, "single_word",
                     false);
}

/* The tiny byte-level tokenizer as JSON text (caller frees). */
static char *tiny_json(bool ignore_merges, bool array_merges) {
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        int k = sv_utf8_encode(sv_bytelevel_char((uint8_t)b), u);
        char key[5] = {0};
        memcpy(key, u, (size_t)k);
        json_object_set_new(vocab, key, json_integer(b));
    }
    json_t *merges = json_array();
    for (int i = 0; i < N_MERGES; i++) {
        char *m = spell(MERGES[i]);
        char *sp = strchr(m, ' ');
        *sp = 0;
        char joined[64];
        snprintf(joined, sizeof joined, "%s%s", m, sp + 1);
        json_object_set_new(vocab, joined, json_integer(256 + i));
        json_array_append_new(merges, array_merges ? json_pack("[s, s]", m, sp + 1)
                                                   : json_string(MERGES[i]));
        free(m);
    }
    json_object_set_new(vocab, "Ġxyz", json_integer(ID_XYZ));
    json_t *root = json_pack(
        "{s:s, s:[o, o, o], s:{s:s}, s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}, "
        "s:{s:s, s:b, s:b, s:b}, s:{s:s, s:o, s:o, s:b, s:b, s:n}}",
        "version", "1.0",
        "added_tokens", added(ID_EOT, "<|eot|>", true, false), added(ID_TOOL, "<tool>", false, false),
        added(ID_MASK, "<mask>", true, true),
        "normalizer", "type", "NFC",
        "pre_tokenizer", "type", "Sequence", "pretokenizers",
        "type", "Split", "pattern", "Regex", LLAMA3_SPLIT, "behavior", "Isolated", "invert", false,
        "type", "ByteLevel", "add_prefix_space", false, "trim_offsets", true, "use_regex", false,
        "decoder", "type", "ByteLevel", "add_prefix_space", true, "trim_offsets", true, "use_regex", true,
        "model", "type", "BPE", "vocab", vocab, "merges", merges, "ignore_merges", ignore_merges,
        "byte_fallback", false, "unk_token");
    char *text = json_dumps(root, 0);
    json_decref(root);
    return text;
}

typedef struct {
    sv_vocab_t *v;
    sv_bpe_t *b;
    sv_bpe_scratch_t *s;
} tok_t;

static bool open_tok(tok_t *t, const char *json) {
    sv_error_t err;
    memset(t, 0, sizeof *t);
    if (sv_vocab_from_hf_json(json, strlen(json), &t->v, &err) || sv_bpe_create(t->v, &t->b, &err) ||
        sv_bpe_scratch_create(t->b, &t->s, &err)) {
        fprintf(stderr, "open_tok: %s\n", err.message);
        return false;
    }
    return true;
}

static void close_tok(tok_t *t) {
    sv_bpe_scratch_destroy(t->s);
    sv_bpe_destroy(t->b);
    sv_vocab_destroy(t->v);
}

/* Encodes text and compares with want[0..n). */
static void expect_ids(tok_t *t, const char *text, uint32_t flags, const int32_t *want, size_t n) {
    sv_ids_t ids = {0};
    sv_error_t err;
    sv_status st = sv_bpe_encode(t->b, t->s, text, strlen(text), flags, &ids, &err);
    bool same = st == SV_OK && ids.n == n && (n == 0 || memcmp(ids.v, want, n * sizeof *want) == 0);
    char got[512] = "";
    for (size_t i = 0; i < ids.n && strlen(got) < 480; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids.v[i]);
    CHECK(same, "encode \"%s\": got%s (status %d)", text, got, st);
    /* decode(encode(x)) == NFC(x) for every case here. */
    sv_bytes_t dec = {0}, norm = {0};
    CHECK(sv_vocab_decode(t->v, ids.v, ids.n, false, &dec, &err) == SV_OK, "decode");
    CHECK(sv_bpe_normalize(t->b, t->s, text, strlen(text), flags, &norm, &err) == SV_OK, "normalize");
    CHECK(dec.n == norm.n && (dec.n == 0 || memcmp(dec.p, norm.p, dec.n) == 0) ,
          "round trip of \"%s\"", text);
    sv_bytes_free(&dec);
    sv_bytes_free(&norm);
    sv_ids_free(&ids);
}

#define EXPECT(t, text, flags, ...)                                                               \
    do {                                                                                          \
        const int32_t want_[] = {__VA_ARGS__};                                                    \
        expect_ids((t), (text), (flags), want_, sizeof want_ / sizeof want_[0]);                  \
    } while (0)

static void test_tiny_bpe(void) {
    char *json = tiny_json(false, false);
    tok_t t;
    CHECK(open_tok(&t, json), "tiny tokenizer loads");
    free(json);
    if (!t.s)
        return;
    CHECK(sv_vocab_size(t.v) == 272, "size %u", sv_vocab_size(t.v));
    /* "h e" (rank 1) goes before "l l" (rank 3), which then blocks "e ll":
     * hello = he ll o, not hello. */
    EXPECT(&t, "hello", 0, 257, 259, 'o');
    EXPECT(&t, "hello world", 0, 257, 259, 'o', 267);
    EXPECT(&t, " the", 0, 258);
    EXPECT(&t, "the", 0, 't', 257);
    EXPECT(&t, "tell", 0, 't', 260);
    EXPECT(&t, "Hello", 0, 'H', 260, 'o');
    EXPECT(&t, "shell", 0, 's', 257, 259);
    /* Equal ranks: the leftmost pair first. */
    EXPECT(&t, "llll", 0, 259, 259);
    EXPECT(&t, "lll", 0, 259, 'l');
    /* Without ignore_merges, a vocabulary word that merges cannot reach is
     * spelled out. */
    EXPECT(&t, " xyz", 0, 0x120 - 0x100, 'x', 'y', 'z');
    /* The pre-tokenizer: contractions, digits in threes, whitespace runs. */
    EXPECT(&t, "it's", 0, 'i', 't', '\'', 's');
    EXPECT(&t, "12345", 0, '1', '2', '3', '4', '5');
    EXPECT(&t, "a  b", 0, 'a', ' ', ' ', 'b');
    EXPECT(&t, "", 0);
    /* Added tokens come out first; special ones can be plain text. */
    EXPECT(&t, "hi<|eot|>the", 0, 'h', 'i', ID_EOT, 't', 257);
    EXPECT(&t, "hi<|eot|>the", SV_BPE_SPECIAL_AS_TEXT, 'h', 'i', '<', '|', 'e', 'o', 't', '|', '>',
           't', 257);
    EXPECT(&t, "<tool><|eot|>", SV_BPE_SPECIAL_AS_TEXT, ID_TOOL, '<', '|', 'e', 'o', 't', '|', '>');
    EXPECT(&t, "<|eot|><|eot|>", 0, ID_EOT, ID_EOT);
    EXPECT(&t, "<|eot|", 0, '<', '|', 'e', 'o', 't', '|');
    /* NFC: e + U+0301 composes to U+00E9 (C3 A9). */
    EXPECT(&t, "e\xCC\x81", 0, 0xC3, 0xA9);
    EXPECT(&t, "\xC3\xA9", 0, 0xC3, 0xA9);
    /* A 4-byte character is 4 byte tokens. */
    EXPECT(&t, "\xF0\x9F\xA4\x96", 0, 0xF0, 0x9F, 0xA4, 0x96);

    /* lstrip: <mask> takes the spaces before it (so the round trip loses
     * them: checked apart from EXPECT). */
    sv_ids_t ids = {0};
    sv_error_t err;
    CHECK(sv_bpe_encode(t.b, t.s, "a  <mask>b", 10, 0, &ids, &err) == SV_OK, "lstrip encode");
    CHECK(ids.n == 3 && ids.v[0] == 'a' && ids.v[1] == ID_MASK && ids.v[2] == 'b', "lstrip ids");

    /* Invalid UTF-8 is refused with its offset. */
    ids.n = 0;
    CHECK(sv_bpe_encode(t.b, t.s, "ab\xC3(", 4, 0, &ids, &err) == SV_ERR_ARG && err.offset == 2,
          "invalid UTF-8: offset %ld", err.offset);
    sv_ids_free(&ids);

    /* Token bytes and flags. */
    size_t n;
    const uint8_t *b = sv_vocab_bytes(t.v, 258, &n);
    CHECK(n == 4 && memcmp(b, " the", 4) == 0, "bytes of 258");
    b = sv_vocab_bytes(t.v, 0x0A, &n);
    CHECK(n == 1 && b[0] == '\n', "bytes of the newline token");
    b = sv_vocab_bytes(t.v, ID_EOT, &n);
    CHECK(n == 7 && memcmp(b, "<|eot|>", 7) == 0, "bytes of <|eot|>");
    CHECK(sv_vocab_flags(t.v, ID_EOT) == (SV_TOKEN_ADDED | SV_TOKEN_SPECIAL), "eot flags");
    CHECK(sv_vocab_flags(t.v, ID_TOOL) == SV_TOKEN_ADDED, "tool flags");
    CHECK(sv_vocab_flags(t.v, 5000) == SV_TOKEN_UNUSED, "out of range");
    CHECK(sv_vocab_bytes(t.v, -1, &n) == NULL && n == 0, "id -1");
    CHECK(sv_vocab_find(t.v, "Ġthe", strlen("Ġthe")) == 258, "find");
    CHECK(sv_vocab_find(t.v, "<tool>", 6) == ID_TOOL, "find added");
    CHECK(sv_vocab_eos(t.v) == -1 && sv_vocab_bos(t.v) == -1, "no EOS/BOS names here");

    /* Decode, with and without special tokens. */
    const int32_t seq[] = {257, 259, 'o', ID_EOT, 267};
    sv_bytes_t out = {0};
    CHECK(sv_vocab_decode(t.v, seq, 5, false, &out, &err) == SV_OK && out.n == 18 &&
              memcmp(out.p, "hello<|eot|> world", 18) == 0, "decode");
    out.n = 0;
    CHECK(sv_vocab_decode(t.v, seq, 5, true, &out, &err) == SV_OK && out.n == 11 &&
              memcmp(out.p, "hello world", 11) == 0, "decode skipping special");
    const int32_t bad[] = {1, 99999};
    CHECK(sv_vocab_decode(t.v, bad, 2, false, &out, &err) == SV_ERR_ARG && err.offset == 1, "decode bad id");
    sv_bytes_free(&out);
    close_tok(&t);

    /* ignore_merges, and merges written as arrays. */
    json = tiny_json(true, true);
    CHECK(open_tok(&t, json), "ignore_merges tokenizer loads");
    free(json);
    if (t.s) {
        EXPECT(&t, " xyz", 0, ID_XYZ);
        /* "hello" is a vocabulary token (merge 6 makes it): whole. */
        EXPECT(&t, "hello world", 0, 262, 267);
        EXPECT(&t, "shell", 0, 's', 257, 259);
        EXPECT(&t, " the", 0, 258);
    }
    close_tok(&t);
}

/* Streams ids through a detokenizer; the chunks joined must equal want. */
static void expect_stream(const sv_vocab_t *v, uint32_t flags, const int32_t *ids, size_t n,
                          const char *want, const size_t *chunk_lens) {
    sv_detok_t *d;
    sv_error_t err;
    if (sv_detok_create(v, flags, &d, &err)) {
        CHECK(false, "detok create");
        return;
    }
    char got[256] = "";
    size_t gn = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *t;
        size_t tn;
        if (i == n)
            sv_detok_flush(d, &t, &tn);
        else
            CHECK(sv_detok_push(d, ids[i], &t, &tn, &err) == SV_OK, "push");
        if (chunk_lens)
            CHECK(tn == chunk_lens[i], "chunk %zu of \"%s\": %zu bytes, want %zu", i, want, tn, chunk_lens[i]);
        memcpy(got + gn, t, tn);
        gn += tn;
    }
    CHECK(gn == strlen(want) && memcmp(got, want, gn) == 0, "stream \"%s\"", want);
    sv_detok_destroy(d);
}

static void test_detok(void) {
    char *json = tiny_json(false, false);
    sv_vocab_t *v;
    sv_error_t err;
    CHECK(sv_vocab_from_hf_json(json, strlen(json), &v, &err) == SV_OK, "load");
    free(json);
    /* é cut in two: nothing, then the character. */
    const int32_t e[] = {'h', 0xC3, 0xA9, '!'};
    const size_t e_chunks[] = {1, 0, 2, 1, 0};
    expect_stream(v, 0, e, 4, "h\xC3\xA9!", e_chunks);
    /* An emoji in four tokens. */
    const int32_t robot[] = {0xF0, 0x9F, 0xA4, 0x96, 258};
    const size_t robot_chunks[] = {0, 0, 0, 4, 4, 0};
    expect_stream(v, 0, robot, 5, "\xF0\x9F\xA4\x96 the", robot_chunks);
    /* Ill-formed: a stray continuation byte, a lead byte followed by ASCII,
     * E0 80 (two maximal subparts), and a tail cut by the end. */
    const int32_t bad[] = {0x80, 'a', 0xE2, 'b', 0xE0, 0x80, 0xF0, 0x9F};
    expect_stream(v, 0, bad, 8,
                  "\xEF\xBF\xBD" "a" "\xEF\xBF\xBD" "b" "\xEF\xBF\xBD\xEF\xBF\xBD" "\xEF\xBF\xBD", NULL);
    /* A special token inside a cut character: kept, it breaks the character;
     * skipped, the character survives. */
    const int32_t sp[] = {0xC3, ID_EOT, 0xA9};
    expect_stream(v, 0, sp, 3, "\xEF\xBF\xBD<|eot|>\xEF\xBF\xBD", NULL);
    expect_stream(v, SV_DETOK_SKIP_SPECIAL, sp, 3, "\xC3\xA9", NULL);
    /* The lossy conversion on its own. */
    uint8_t out[64];
    size_t hold;
    size_t w = sv_utf8_lossy((const uint8_t *)"ab\xF0\x9F\xA4", 5, out, &hold);
    CHECK(w == 2 && hold == 3, "lossy holds a valid prefix (%zu, %zu)", w, hold);
    w = sv_utf8_lossy((const uint8_t *)"\xED\xA0\x80", 3, out, NULL);  /* a surrogate */
    CHECK(w == 9, "surrogate: three U+FFFD (%zu bytes)", w);
    w = sv_utf8_lossy((const uint8_t *)"\xF4\x90\x80\x80", 4, out, NULL);  /* above U+10FFFF */
    CHECK(w == 12, "F4 90: four U+FFFD (%zu bytes)", w);
    sv_detok_t *d;
    CHECK(sv_detok_create(v, 0, &d, &err) == SV_OK, "create");
    const char *t;
    size_t tn;
    CHECK(sv_detok_push(d, 99999, &t, &tn, &err) == SV_ERR_ARG, "unknown id");
    sv_detok_destroy(d);
    sv_detok_destroy(NULL);
    sv_vocab_destroy(v);
}

static void test_nfc(void) {
    static const struct { const char *in, *out; } cases[] = {
        {"e\xCC\x81", "\xC3\xA9"},                        /* e + acute */
        {"\xE2\x84\xAB", "\xC3\x85"},                     /* Angstrom sign: singleton */
        {"\xE1\xB8\x8B\xCC\xA3", "\xE1\xB8\x8D\xCC\x87"}, /* d-dot-above + dot-below: reorder */
        {"q\xCC\x87\xCC\xA3", "q\xCC\xA3\xCC\x87"},       /* no composite: reorder only */
        {"\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC"},     /* U+0958: composition exclusion */
        {"\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"}, /* Hangul L V T */
        {"\xCC\x81" "a", "\xCC\x81" "a"},                /* a lone mark stays */
        {"a\xCC\x81\xCC\x81", "\xC3\xA1\xCC\x81"},        /* the second acute is blocked */
        {"=\xCC\xB8", "\xE2\x89\xA0"},                    /* = + long solidus overlay */
        {"plain ascii", "plain ascii"},
    };
    sv_bytes_t out = {0}, work = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        out.n = 0;
        const char *in = cases[i].in;
        CHECK(sv_nfc_append((const uint8_t *)in, strlen(in), &out, &work) == SV_OK, "nfc %zu", i);
        CHECK(out.n == strlen(cases[i].out) && memcmp(out.p, cases[i].out, out.n) == 0, "nfc case %zu", i);
        bool already = strcmp(cases[i].in, cases[i].out) == 0;
        /* Quick check: "yes" only when nothing could change. */
        if (!already)
            CHECK(!sv_nfc_quick_check((const uint8_t *)in, strlen(in)), "quick check %zu", i);
    }
    CHECK(sv_nfc_quick_check((const uint8_t *)"h\xC3\xA9llo \xE4\xBD\xA0", 10), "quick check yes");
    CHECK(sv_nfc_append((const uint8_t *)"\xFF", 1, &out, &work) == SV_ERR_ARG, "nfc invalid");
    sv_bytes_free(&out);
    sv_bytes_free(&work);
}

/* A tokenizer with one Split String step, to read the pieces. */
static void expect_pieces(const char *pretok_json, const char *text, const char *want) {
    char json[1024];
    snprintf(json, sizeof json,
             "{\"pre_tokenizer\": %s, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
             "\"merges\": []}}", pretok_json);
    sv_vocab_t *v = NULL;
    sv_pretok_t *p = NULL;
    sv_pretok_scratch_t s;
    sv_error_t err;
    if (sv_vocab_from_hf_json(json, strlen(json), &v, &err) || sv_pretok_create(v, &p, &err) ||
        sv_pretok_scratch_init(p, &s)) {
        CHECK(false, "pieces setup for %s: %s", pretok_json, err.message);
        sv_pretok_destroy(p);
        sv_vocab_destroy(v);
        return;
    }
    char got[256] = "";
    CHECK(sv_pretok_split(p, &s, (const uint8_t *)text, strlen(text), &err) == SV_OK, "split");
    for (size_t i = 0; i < s.n; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%.*s", i ? "|" : "",
                 (int)s.pieces[i].len, (const char *)s.pool.p + s.pieces[i].off);
    CHECK(strcmp(got, want) == 0, "%s on \"%s\": got \"%s\", want \"%s\"", pretok_json, text, got, want);
    sv_pretok_scratch_free(&s);
    sv_pretok_destroy(p);
    sv_vocab_destroy(v);
}

static void test_pretok(void) {
    /* The split behaviors (expected pieces from tokenizers 0.23). */
    const char *split = "{\"type\": \"Split\", \"pattern\": {\"String\": \"-\"}, \"behavior\": \"%s\", "
                        "\"invert\": %s}";
    static const struct { const char *behavior, *plain, *inverted; } b[] = {
        {"Isolated", "a|-|b|-|-|c|-", "a|-|b|-|-|c|-"},
        {"Removed", "a|b|c", "-|-|-|-"},
        {"MergedWithPrevious", "a-|b-|-|c-", "a|-b|-|-c|-"},
        {"MergedWithNext", "a|-b|-|-c|-", "a-|b-|-|c-"},
        {"Contiguous", "a|-|b|--|c|-", "a|-|b|--|c|-"},
    };
    char pj[256];
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        snprintf(pj, sizeof pj, split, b[i].behavior, "false");
        expect_pieces(pj, "a-b--c-", b[i].plain);
        snprintf(pj, sizeof pj, split, b[i].behavior, "true");
        expect_pieces(pj, "a-b--c-", b[i].inverted);
    }
    /* Empty matches, as the onig crate iterates them. */
    expect_pieces("{\"type\": \"Split\", \"pattern\": {\"Regex\": \"x*\"}, \"behavior\": \"Isolated\"}",
                  "abxxc", "a|b|xx|c");
    expect_pieces("{\"type\": \"Split\", \"pattern\": {\"Regex\": \"x*\"}, \"behavior\": "
                  "\"MergedWithPrevious\"}", "abxxc", "a|bxx|c");
    expect_pieces("{\"type\": \"Digits\", \"individual_digits\": false}", "ab12c3", "ab|12|c|3");
    expect_pieces("{\"type\": \"Digits\", \"individual_digits\": true}", "ab12c3", "ab|1|2|c|3");
    expect_pieces("{\"type\": \"ByteLevel\", \"add_prefix_space\": true}", "hello world",
                  " hello| world");
    /* Oniguruma's \s has no U+180E; PCRE2's \s would. */
    expect_pieces("{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"}, \"behavior\": \"Removed\"}",
                  "a\xE1\xA0\x8E" "b c\xC2\x85" "d", "a\xE1\xA0\x8E" "b|c|d");

    sv_bytes_t out = {0};
    sv_error_t err;
    CHECK(sv_pretok_translate("\\s+(?!\\S)|[^\\s\\p{L}]\\d\\w", &out, &err) == SV_OK &&
              strcmp((char *)out.p,
                     "[\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}]+(?![^\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}])|"
                     "[^\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}\\p{L}]\\p{Nd}[\\p{L}\\p{M}\\p{Nd}\\p{Pc}]") == 0,
          "translate: %s", out.p ? (char *)out.p : "");
    CHECK(sv_pretok_translate("[\\S]", &out, &err) == SV_ERR_UNSUPPORTED, "\\S in a class");
    CHECK(sv_pretok_translate("[a[b]]", &out, &err) == SV_ERR_UNSUPPORTED, "nested class");
    CHECK(sv_pretok_translate("[]a]\\\\s", &out, &err) == SV_OK && strcmp((char *)out.p, "[]a]\\\\s") == 0,
          "] first in a class, escaped backslash");
    sv_bytes_free(&out);
}

/* A non-byte-level BPE: byte fallback, unknown tokens, fused or not. */
static void test_fallback(void) {
    const char *fmt =
        "{\"added_tokens\": [{\"id\": 6, \"content\": \"</s>\", \"special\": true}],"
        " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"ByteFallback\"}]},"
        " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"fuse_unk\": %s,"
        " \"unk_token\": \"<unk>\", \"vocab\": {\"<unk>\": 0, \"a\": 1, \"b\": 2, \"ab\": 3,"
        " \"<0x5A>\": 4, \"<0xC3>\": 5}, \"merges\": [[\"a\", \"b\"]]}}";
    char json[1024];
    for (int fuse = 0; fuse < 2; fuse++) {
        snprintf(json, sizeof json, fmt, fuse ? "true" : "false");
        tok_t t;
        CHECK(open_tok(&t, json), "fallback tokenizer loads");
        if (!t.s) {
            close_tok(&t);
            continue;
        }
        sv_ids_t ids = {0};
        sv_error_t err;
        /* Z has a byte token; Q, R have none: <unk> (twice, or fused). */
        CHECK(sv_bpe_encode(t.b, t.s, "abZQRab", 7, 0, &ids, &err) == SV_OK, "encode");
        const int32_t want0[] = {3, 4, 0, 0, 3}, want1[] = {3, 4, 0, 3};
        const int32_t *want = fuse ? want1 : want0;
        size_t wn = fuse ? 4 : 5;
        CHECK(ids.n == wn && memcmp(ids.v, want, wn * sizeof *want) == 0, "fallback ids (fuse %d)", fuse);
        size_t n;
        const uint8_t *b = sv_vocab_bytes(t.v, 4, &n);
        CHECK(n == 1 && b[0] == 'Z' && (sv_vocab_flags(t.v, 4) & SV_TOKEN_BYTE), "byte token");
        CHECK(sv_vocab_eos(t.v) == 6 && (sv_vocab_flags(t.v, 6) & SV_TOKEN_EOG), "</s> is EOS");
        sv_ids_free(&ids);
        close_tok(&t);
    }
}

/* SentencePiece-style BPE from tokenizer.json (Llama 2, Mistral): ids
 * 0..2 <unk> <s> </s>, 3..258 <0xNN>, then ▁ a b h e l o (259..265) and ll
 * he ▁he llo ▁hello ab (266..271), merged in that order. The expected ids
 * are Hugging Face tokenizers' (0.23) for the same file. */
enum { M_SP = 259, M_HELLO = 270, M_AB = 271 };

static char *spm_json(const char *normalizer, const char *pre_tokenizer, const char *post_processor) {
    json_t *vocab = json_object();
    const char *special[] = {"<unk>", "<s>", "</s>"};
    json_t *added = json_array();
    for (int i = 0; i < 3; i++) {
        json_object_set_new(vocab, special[i], json_integer(i));
        json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b}", "id", i, "content", special[i],
                                               "special", true, "normalized", false));
    }
    for (int i = 0; i < 256; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", i);
        json_object_set_new(vocab, name, json_integer(3 + i));
    }
    const char *pieces[] = {"\xE2\x96\x81", "a", "b", "h", "e", "l", "o", "ll", "he", "\xE2\x96\x81he",
                            "llo", "\xE2\x96\x81hello", "ab"};
    for (int i = 0; i < 13; i++)
        json_object_set_new(vocab, pieces[i], json_integer(M_SP + i));
    json_t *merges = json_pack("[s, s, s, s, s, s]", "l l", "h e", "\xE2\x96\x81 he", "ll o",
                               "\xE2\x96\x81he llo", "a b");
    json_error_t jerr;
    json_t *root = json_pack(
        "{s:o, s:o, s:o, s:o, s:{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}]},"
        " s:{s:s, s:s, s:b, s:b, s:o, s:o}}",
        "added_tokens", added,
        "post_processor", post_processor ? json_loads(post_processor, 0, &jerr) : json_null(),
        "normalizer", normalizer ? json_loads(normalizer, 0, &jerr) : json_null(),
        "pre_tokenizer", pre_tokenizer ? json_loads(pre_tokenizer, 0, &jerr) : json_null(),
        "decoder", "type", "Sequence", "decoders", "type", "Replace", "pattern", "String",
        "\xE2\x96\x81", "content", " ", "type", "ByteFallback", "type", "Fuse",
        "model", "type", "BPE", "unk_token", "<unk>", "fuse_unk", true, "byte_fallback", true,
        "vocab", vocab, "merges", merges);
    char *text = json_dumps(root, 0);
    json_decref(root);
    return text;
}

static void test_spm_json(void) {
    tok_t t;
    char *json = spm_json("{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", "
                          "\"prepend\": \"\xE2\x96\x81\"}, {\"type\": \"Replace\", \"pattern\": "
                          "{\"String\": \" \"}, \"content\": \"\xE2\x96\x81\"}]}", NULL,
                          "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
                          "{\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", "
                          "\"type_id\": 0}}]}");
    CHECK(open_tok(&t, json), "Llama 2 style tokenizer loads");
    CHECK(t.v && sv_vocab_bos(t.v) == 1 && sv_vocab_add_bos(t.v), "the template adds <s>");
    free(json);
    if (t.s) {
        /* ▁ h e l l o: l l, h e, ▁ he, ll o, ▁he llo. */
        EXPECT(&t, "hello", 0, M_HELLO);
        /* Prepend adds a ▁ even before a space. */
        EXPECT(&t, " hello", 0, M_SP, M_HELLO);
        EXPECT(&t, "hello  hello", 0, M_HELLO, M_SP, M_HELLO);
        /* After a special token, the next stretch gets its own ▁. */
        EXPECT(&t, "<s>ab", 0, 1, M_SP, M_AB);
        /* é has no piece: its two bytes. */
        EXPECT(&t, "\xC3\xA9", 0, M_SP, 3 + 0xC3, 3 + 0xA9);
        size_t n;
        const uint8_t *b = sv_vocab_bytes(t.v, M_HELLO, &n);
        CHECK(n == 6 && memcmp(b, " hello", 6) == 0, "bytes of ▁hello");
    }
    close_tok(&t);

    /* Metaspace "always" with split: a ▁ per stretch unless it starts with
     * a space, and each ▁ starts a piece. */
    json = spm_json(NULL, "{\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\", "
                          "\"prepend_scheme\": \"always\", \"split\": true}", NULL);
    CHECK(open_tok(&t, json), "Metaspace (always) loads");
    CHECK(t.v && !sv_vocab_add_bos(t.v), "no template, no BOS");
    free(json);
    if (t.s) {
        EXPECT(&t, "hello hello", 0, M_HELLO, M_HELLO);
        EXPECT(&t, " hello", 0, M_HELLO);
        EXPECT(&t, "ab<s> ab", 0, M_SP, M_AB, 1, M_SP, M_AB);
    }
    close_tok(&t);

    /* Metaspace "first": only the stretch at the start of the text. */
    json = spm_json(NULL, "{\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\", "
                          "\"prepend_scheme\": \"first\", \"split\": true}", NULL);
    CHECK(open_tok(&t, json), "Metaspace (first) loads");
    free(json);
    if (t.s) {
        EXPECT(&t, "<s>ab", 0, 1, M_AB);
        EXPECT(&t, "ab<s>ab", 0, M_SP, M_AB, 1, M_AB);
        EXPECT(&t, " ab", 0, M_SP, M_AB);
    }
    close_tok(&t);

    /* Prepend alone (no Replace) is not something the encoder does. */
    json = spm_json("{\"type\": \"Prepend\", \"prepend\": \"\xE2\x96\x81\"}", NULL, NULL);
    sv_vocab_t *v;
    sv_error_t err;
    CHECK(sv_vocab_from_hf_json(json, strlen(json), &v, &err) == SV_OK && sv_vocab_encoder_support(v),
          "Prepend without Replace is flagged");
    sv_vocab_destroy(v);
    free(json);
}

static void test_errors(void) {
    sv_vocab_t *v = NULL;
    sv_bpe_t *b = NULL;
    sv_error_t err;
    const char *cases[][2] = {
        {"{", "syntax"},
        {"[]", "syntax"},
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "unsupported"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}", "syntax"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}", "syntax"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}}", "syntax"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a\"]}}", "syntax"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sv_status st = sv_vocab_from_hf_json(cases[i][0], strlen(cases[i][0]), &v, &err);
        CHECK(st != SV_OK && v == NULL && strcmp(sv_status_name(st), cases[i][1]) == 0,
              "error case %zu: %s (%s)", i, sv_status_name(st), err.message);
    }
    /* Loads (the token index only needs bytes) but cannot be encoded. */
    const char *lower = "{\"normalizer\": {\"type\": \"Lowercase\"}, \"model\": {\"type\": \"BPE\", "
                        "\"vocab\": {\"a\": 0}, \"merges\": []}}";
    CHECK(sv_vocab_from_hf_json(lower, strlen(lower), &v, &err) == SV_OK, "Lowercase loads");
    CHECK(v && sv_vocab_encoder_support(v) != NULL, "but is flagged");
    CHECK(v && sv_bpe_create(v, &b, &err) == SV_ERR_UNSUPPORTED && strstr(err.message, "Lowercase"),
          "and the encoder refuses it: %s", err.message);
    sv_vocab_destroy(v);
    CHECK(sv_vocab_load_hf_json("/nonexistent/tokenizer.json", &v, &err) == SV_ERR_IO, "missing file");
    sv_vocab_destroy(NULL);
    sv_bpe_destroy(NULL);
    sv_bpe_scratch_destroy(NULL);
}

/* Loading from a file the test writes, with a tokenizer_config.json. */
static void test_files(void) {
    char dir[] = "/tmp/sv_tok_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(false, "mkdtemp");
        return;
    }
    char path[64], cfg[64];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    char *json = tiny_json(false, false);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    free(json);
    f = fopen(cfg, "w");
    fputs("{\"bos_token\": \"<tool>\", \"eos_token\": {\"content\": \"<|eot|>\"}}", f);
    fclose(f);
    sv_vocab_t *v;
    sv_error_t err;
    CHECK(sv_vocab_load_hf_json(path, &v, &err) == SV_OK, "load file: %s", err.message);
    CHECK(sv_vocab_apply_hf_config(v, cfg, &err) == SV_OK, "config: %s", err.message);
    CHECK(sv_vocab_bos(v) == ID_TOOL && sv_vocab_eos(v) == ID_EOT, "BOS/EOS from the config");
    CHECK(sv_vocab_flags(v, ID_EOT) & SV_TOKEN_EOG, "EOS flagged");
    sv_vocab_destroy(v);
    unlink(path);
    unlink(cfg);
    rmdir(dir);
}

int main(void) {
    test_tiny_bpe();
    test_detok();
    test_nfc();
    test_pretok();
    test_fallback();
    test_spm_json();
    test_errors();
    test_files();
    return test_summary("tokenizer: BPE, added tokens, NFC, pre-tokenizer, detokenizer, errors");
}
