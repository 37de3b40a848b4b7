/* tok_cli — drives the tokenizer from the command line, for the parity tests
 * against Hugging Face tokenizers (test_parity.py) and for benchmarking.
 *
 *   tok_cli TOKENIZER [--special-as-text] MODE
 *   tok_cli nfc          (no tokenizer needed)
 *
 * TOKENIZER is a tokenizer.json or a GGUF file (sv_vocab_load tells them
 * apart by the GGUF magic).
 *
 * Input records are read from stdin, one per line; text records are JSON
 * strings (so a record can hold newlines), id records are ids separated by
 * spaces. Output is one line per record.
 *
 *   encode     text -> ids
 *   decode     ids -> text (a JSON string; ill-formed UTF-8 as U+FFFD)
 *   stream     ids -> text through the streaming detokenizer; exits 1 if a
 *              chunk is not valid UTF-8 on its own
 *   normalize  text -> the text as the encoder sees it (JSON string)
 *   nfc        text -> its NFC (JSON string)
 *   bytes      (no input) one line per id: the id and its bytes in hex
 *   flags      (no input) one line per id: the id and its SV_TOKEN_* flags
 *   info       (no input) vocabulary size, BOS/EOS/EOT, add_bos, flag counts
 *   bench      text -> nothing; prints records, bytes, tokens and seconds
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/tokenizer/bpe.h"
#include "src/tokenizer/detok.h"
#include "src/tokenizer/nfc.h"
#include "src/tokenizer/vocab.h"

static int fail(const char *what, const sv_error_t *err) {
    fprintf(stderr, "tok_cli: %s: %s (%s)\n", what, err->message, sv_status_name(err->code));
    return 1;
}

/* Prints bytes as a JSON string, ill-formed UTF-8 replaced. */
static int print_json(const uint8_t *s, size_t n) {
    uint8_t *buf = malloc(3 * n + 1);
    if (!buf)
        return 1;
    size_t w = sv_utf8_lossy(s, n, buf, NULL);
    json_t *j = json_stringn((const char *)buf, w);
    char *out = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
    if (out)
        puts(out);
    free(out);
    json_decref(j);
    free(buf);
    return out ? 0 : 1;
}

/* Parses a JSON string record into *s (valid until the next call). */
static int read_text(const char *line, json_t **holder, const char **s, size_t *n) {
    json_error_t jerr;
    json_decref(*holder);
    *holder = json_loads(line, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (!json_is_string(*holder)) {
        fprintf(stderr, "tok_cli: input is not a JSON string: %s\n", jerr.text);
        return 1;
    }
    *s = json_string_value(*holder);
    *n = json_string_length(*holder);
    return 0;
}

static int read_ids(char *line, sv_ids_t *ids) {
    ids->n = 0;
    char *p = line, *end;
    for (;;) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (sv_ids_push(ids, (int32_t)v))
            return 1;
        p = end;
    }
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *path = NULL, *mode = NULL;
    uint32_t flags = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--special-as-text") == 0)
            flags |= SV_BPE_SPECIAL_AS_TEXT;
        else if (!path)
            path = argv[i];
        else if (!mode)
            mode = argv[i];
    }
    if (path && !mode && strcmp(path, "nfc") == 0) {
        mode = path;  /* `tok_cli nfc`: no tokenizer */
        path = NULL;
    }
    if (!mode) {
        fprintf(stderr, "usage: tok_cli TOKENIZER [--special-as-text] "
                        "encode|decode|stream|normalize|nfc|bytes|flags|info|bench\n");
        return 64;
    }
    static char obuf[1 << 16];
    setvbuf(stdout, obuf, _IOFBF, sizeof obuf);

    sv_error_t err;
    sv_error_clear(&err);
    sv_vocab_t *v = NULL;
    sv_bpe_t *bpe = NULL;
    sv_bpe_scratch_t *scratch = NULL;
    sv_detok_t *detok = NULL;
    double t0 = now();
    if (path && sv_vocab_load(path, &v, &err))
        return fail(path, &err);
    double t_load = now() - t0;
    bool needs_encoder = !strcmp(mode, "encode") || !strcmp(mode, "normalize") || !strcmp(mode, "bench");
    if (needs_encoder && (sv_bpe_create(v, &bpe, &err) || sv_bpe_scratch_create(bpe, &scratch, &err)))
        return fail("encoder", &err);
    if (!strcmp(mode, "stream") && sv_detok_create(v, 0, &detok, &err))
        return fail("detokenizer", &err);
    double t_build = now() - t0 - t_load;

    int rc = 0;
    if (!strcmp(mode, "info")) {
        size_t special = 0, added = 0, unused = 0;
        for (uint32_t i = 0; i < sv_vocab_size(v); i++) {
            uint32_t f = sv_vocab_flags(v, (int32_t)i);
            special += !!(f & SV_TOKEN_SPECIAL);
            added += !!(f & SV_TOKEN_ADDED);
            unused += !!(f & SV_TOKEN_UNUSED);
        }
        const char *why = sv_vocab_encoder_support(v);
        printf("{\"size\": %u, \"bos\": %d, \"eos\": %d, \"eot\": %d, \"add_bos\": %s, "
               "\"added\": %zu, \"special\": %zu, \"unused\": %zu, \"max_token_bytes\": %zu, "
               "\"load_s\": %.3f, \"encoder\": \"%s\"}\n",
               sv_vocab_size(v), sv_vocab_bos(v), sv_vocab_eos(v), sv_vocab_eot(v),
               sv_vocab_add_bos(v) ? "true" : "false", added, special, unused,
               sv_vocab_max_token_bytes(v), t_load, why ? "unsupported" : "ok");
        goto done;
    }
    if (!strcmp(mode, "flags")) {
        for (uint32_t i = 0; i < sv_vocab_size(v); i++)
            printf("%u %u\n", i, sv_vocab_flags(v, (int32_t)i));
        goto done;
    }
    if (!strcmp(mode, "bytes")) {
        for (uint32_t i = 0; i < sv_vocab_size(v); i++) {
            size_t n;
            const uint8_t *b = sv_vocab_bytes(v, (int32_t)i, &n);
            if (!b)
                continue;
            printf("%u ", i);
            for (size_t k = 0; k < n; k++)
                printf("%02x", b[k]);
            putchar('\n');
        }
        goto done;
    }

    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    json_t *holder = NULL;
    sv_ids_t ids = {0};
    sv_bytes_t bytes = {0}, work = {0};
    size_t records = 0, in_bytes = 0, tokens = 0;
    double t_run = now();
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        if (got && line[got - 1] == '\n')
            line[--got] = 0;
        const char *s;
        size_t n;
        records++;
        ids.n = bytes.n = 0;
        if (!strcmp(mode, "encode") || !strcmp(mode, "bench")) {
            if ((rc = read_text(line, &holder, &s, &n)))
                break;
            in_bytes += n;
            if (sv_bpe_encode(bpe, scratch, s, n, flags, &ids, &err)) {
                rc = fail("encode", &err);
                break;
            }
            tokens += ids.n;
            if (!strcmp(mode, "encode")) {
                for (size_t i = 0; i < ids.n; i++)
                    printf(i ? " %d" : "%d", ids.v[i]);
                putchar('\n');
            }
        } else if (!strcmp(mode, "normalize") || !strcmp(mode, "nfc")) {
            if ((rc = read_text(line, &holder, &s, &n)))
                break;
            sv_status st = !strcmp(mode, "nfc")
                               ? sv_nfc_append((const uint8_t *)s, n, &bytes, &work)
                               : sv_bpe_normalize(bpe, scratch, s, n, flags, &bytes, &err);
            if (st) {
                rc = fail(mode, &err);
                break;
            }
            if ((rc = print_json(bytes.p, bytes.n)))
                break;
        } else if (!strcmp(mode, "decode")) {
            if ((rc = read_ids(line, &ids)))
                break;
            if (sv_vocab_decode(v, ids.v, ids.n, false, &bytes, &err)) {
                rc = fail("decode", &err);
                break;
            }
            if ((rc = print_json(bytes.p, bytes.n)))
                break;
        } else if (!strcmp(mode, "stream")) {
            if ((rc = read_ids(line, &ids)))
                break;
            for (size_t i = 0; i <= ids.n && !rc; i++) {
                const char *t;
                size_t tn;
                if (i == ids.n)
                    sv_detok_flush(detok, &t, &tn);
                else if (sv_detok_push(detok, ids.v[i], &t, &tn, &err))
                    rc = fail("stream", &err);
                if (rc)
                    break;
                uint8_t tmp[4096];
                if (tn > sizeof tmp / 3 || sv_utf8_lossy((const uint8_t *)t, tn, tmp, NULL) != tn ||
                    memcmp(tmp, t, tn) != 0) {
                    fprintf(stderr, "tok_cli: stream chunk %zu is not valid UTF-8\n", i);
                    rc = 1;
                }
                if (sv_bytes_append(&bytes, t, tn))
                    rc = 1;
            }
            if (rc || (rc = print_json(bytes.p, bytes.n)))
                break;
        } else {
            fprintf(stderr, "tok_cli: unknown mode %s\n", mode);
            rc = 64;
            break;
        }
    }
    if (!strcmp(mode, "bench") && !rc)
        printf("{\"records\": %zu, \"bytes\": %zu, \"tokens\": %zu, \"load_s\": %.3f, "
               "\"build_s\": %.3f, \"encode_s\": %.3f}\n",
               records, in_bytes, tokens, t_load, t_build, now() - t_run);
    free(line);
    json_decref(holder);
    sv_ids_free(&ids);
    sv_bytes_free(&bytes);
    sv_bytes_free(&work);
done:
    sv_detok_destroy(detok);
    sv_bpe_scratch_destroy(scratch);
    sv_bpe_destroy(bpe);
    sv_vocab_destroy(v);
    if (fflush(stdout))
        rc = 1;
    return rc;
}
