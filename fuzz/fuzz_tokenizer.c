/* fuzz_tokenizer.c — libFuzzer target for src/tokenizer/.
 *
 * The input is text. On a small byte-level tokenizer built in-process
 * (Llama 3's split pattern, NFC, a few merges including multi-byte ones,
 * special and non-special added tokens) it checks, for well-formed UTF-8:
 *  - encode succeeds, every id is in range, and decode(encode(x)) equals
 *    normalize(x) byte for byte (also with special tokens as text);
 *  - NFC is idempotent;
 *  - the streaming detokenizer's chunks are each valid UTF-8 and join to
 *    the lossy decode (here: the text itself);
 * and for ill-formed input that encode refuses it with SV_ERR_ARG, and that
 * streaming its bytes (as if they were tokens) still yields valid UTF-8. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "src/tokenizer/bpe.h"
#include "src/tokenizer/bytelevel.h"
#include "src/tokenizer/detok.h"
#include "src/tokenizer/nfc.h"
#include "util/utf8.h"
#include "src/tokenizer/vocab.h"

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static const char SPLIT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* Merges in byte-level spelling: English, whitespace, é (C3 A9), 中 (E4 B8
 * AD), 🤖 (F0 9F A4 96). */
static const char *const MERGES[] = {
    "Ġ t", "h e", "Ġt he", "i n", "e r", "o n", "Ġ a", "r e", "a t", "Ġ s", "e n", "Ġ Ġ",
    "ĠĠ ĠĠ", "Ċ Ċ", "Ã ©", "ä ¸", "ä¸ Ń", "ð Ł", "ðŁ ¤", "ðŁ¤ ĸ", "Ġ ðŁ¤ĸ", "1 2", "12 3",
};

static sv_vocab_t *vocab;
static sv_bpe_t *bpe;
static sv_bpe_scratch_t *scratch;
static sv_detok_t *detok;

static void build(void) {
    json_t *v = json_object();
    for (int b = 0; b < 256; b++) {
        uint8_t u[5] = {0};
        sv_utf8_encode(sv_bytelevel_char((uint8_t)b), u);
        json_object_set_new(v, (const char *)u, json_integer(b));
    }
    json_t *merges = json_array();
    int id = 256;
    for (size_t i = 0; i < sizeof MERGES / sizeof MERGES[0]; i++) {
        char m[64];
        snprintf(m, sizeof m, "%s", MERGES[i]);
        char *sp = strchr(m, ' ');
        *sp = 0;
        char joined[64];
        snprintf(joined, sizeof joined, "%s%s", m, sp + 1);
        json_object_set_new(v, joined, json_integer(id++));
        json_array_append_new(merges, json_string(MERGES[i]));
    }
    json_t *root = json_pack(
        "{s:[{s:i, s:s, s:b, s:b}, {s:i, s:s, s:b, s:b}, {s:i, s:s, s:b, s:b}], s:{s:s},"
        " s:{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s, s:b, s:b}]}, s:{s:s},"
        " s:{s:s, s:o, s:o, s:b}}",
        "added_tokens", "id", id, "content", "<|eot_id|>", "special", true, "normalized", false,
        "id", id + 1, "content", "<tool_call>", "special", false, "normalized", false,
        "id", id + 2, "content", "<|eot_id|>x", "special", true, "normalized", false,
        "normalizer", "type", "NFC",
        "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex",
        SPLIT, "behavior", "Isolated", "type", "ByteLevel", "add_prefix_space", false, "use_regex", false,
        "decoder", "type", "ByteLevel",
        "model", "type", "BPE", "vocab", v, "merges", merges, "ignore_merges", true);
    char *text = json_dumps(root, 0);
    json_decref(root);
    sv_error_t err;
    CHECK(text && sv_vocab_from_hf_json(text, strlen(text), &vocab, &err) == SV_OK);
    CHECK(sv_bpe_create(vocab, &bpe, &err) == SV_OK);
    CHECK(sv_bpe_scratch_create(bpe, &scratch, &err) == SV_OK);
    CHECK(sv_detok_create(vocab, 0, &detok, &err) == SV_OK);
    free(text);
}

static bool valid_utf8(const uint8_t *s, size_t n) { return sv_utf8_valid(s, n); }

/* Streams `ids` (or, with ids NULL, the raw bytes in max-token chunks) and
 * returns the joined text in out; every chunk must be valid UTF-8. */
static void stream(const int32_t *ids, size_t n_ids, const uint8_t *raw, size_t n_raw, sv_bytes_t *out) {
    sv_error_t err;
    const char *t;
    size_t tn;
    sv_detok_reset(detok);
    size_t step = sv_vocab_max_token_bytes(vocab);
    size_t n = ids ? n_ids : (n_raw + step - 1) / step;
    for (size_t i = 0; i < n; i++) {
        if (ids) {
            CHECK(sv_detok_push(detok, ids[i], &t, &tn, &err) == SV_OK);
        } else {
            size_t k = n_raw - i * step < step ? n_raw - i * step : step;
            CHECK(sv_detok_push_bytes(detok, raw + i * step, k, &t, &tn, &err) == SV_OK);
        }
        CHECK(valid_utf8((const uint8_t *)t, tn));
        CHECK(sv_bytes_append(out, t, tn) == SV_OK);
    }
    sv_detok_flush(detok, &t, &tn);
    CHECK(valid_utf8((const uint8_t *)t, tn));
    CHECK(sv_bytes_append(out, t, tn) == SV_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!vocab)
        build();
    if (size > 4096)
        return 0;
    sv_error_t err;
    sv_ids_t ids = {0};
    sv_bytes_t dec = {0}, norm = {0}, again = {0}, work = {0}, streamed = {0};
    if (!valid_utf8(data, size)) {
        CHECK(sv_bpe_encode(bpe, scratch, (const char *)data, size, 0, &ids, &err) == SV_ERR_ARG);
        CHECK(err.offset >= 0 && (size_t)err.offset < size);
        /* The detokenizer turns any bytes into valid UTF-8. */
        stream(NULL, 0, data, size, &streamed);
        uint8_t *lossy = malloc(3 * size + 1);
        CHECK(lossy);
        size_t w = sv_utf8_lossy(data, size, lossy, NULL);
        CHECK(w == streamed.n && memcmp(lossy, streamed.p, w) == 0);
        free(lossy);
        goto done;
    }
    for (uint32_t flags = 0; flags <= SV_BPE_SPECIAL_AS_TEXT; flags += SV_BPE_SPECIAL_AS_TEXT) {
        ids.n = dec.n = norm.n = streamed.n = 0;
        CHECK(sv_bpe_encode(bpe, scratch, (const char *)data, size, flags, &ids, &err) == SV_OK);
        for (size_t i = 0; i < ids.n; i++)
            CHECK(ids.v[i] >= 0 && (uint32_t)ids.v[i] < sv_vocab_size(vocab));
        CHECK(sv_vocab_decode(vocab, ids.v, ids.n, false, &dec, &err) == SV_OK);
        CHECK(sv_bpe_normalize(bpe, scratch, (const char *)data, size, flags, &norm, &err) == SV_OK);
        CHECK(dec.n == norm.n && (dec.n == 0 || memcmp(dec.p, norm.p, dec.n) == 0));
        stream(ids.v, ids.n, NULL, 0, &streamed);
        CHECK(streamed.n == dec.n && (dec.n == 0 || memcmp(streamed.p, dec.p, dec.n) == 0));
    }
    /* NFC is idempotent, and the quick check never says "yes" wrongly. */
    norm.n = 0;
    CHECK(sv_nfc_append(data, size, &norm, &work) == SV_OK);
    CHECK(sv_nfc_append(norm.p, norm.n, &again, &work) == SV_OK);
    CHECK(again.n == norm.n && (norm.n == 0 || memcmp(again.p, norm.p, norm.n) == 0));
    if (sv_nfc_quick_check(data, size))
        CHECK(norm.n == size && (size == 0 || memcmp(norm.p, data, size) == 0));
done:
    sv_ids_free(&ids);
    sv_bytes_free(&dec);
    sv_bytes_free(&norm);
    sv_bytes_free(&again);
    sv_bytes_free(&work);
    sv_bytes_free(&streamed);
    return 0;
}
