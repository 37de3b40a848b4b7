/* dequant_cli — writes one tensor of a model file as raw float32, for the
 * dequantization tests against the gguf Python package (test_dequant.py) and
 * the safetensors tests (test_safetensors.py).
 *
 *   dequant_cli FILE TENSOR_NAME OUT.f32
 *
 * FILE is a GGUF file, or a safetensors file when its name ends in
 * ".safetensors". OUT.f32 receives the tensor's elements in storage order as
 * little-endian float32. Errors go to stderr with exit status 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/gguf.h"
#include "src/backend/quant.h"
#include "src/model/safetensors.h"

static int fail(const char *what, const sv_error_t *err) {
    fprintf(stderr, "dequant_cli: %s: %s (%s)\n", what, err->message, sv_status_name(err->code));
    return 1;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int write_floats(const char *path, const float *x, uint64_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t wrote = n ? fwrite(x, sizeof *x, (size_t)n, f) : 0;
    if (fclose(f) != 0 || wrote != (size_t)n) {
        fprintf(stderr, "dequant_cli: writing %s failed\n", path);
        return 1;
    }
    return 0;
}

static float *alloc_floats(uint64_t n) {
    if (n > SIZE_MAX / sizeof(float))
        return NULL;
    return malloc(n ? (size_t)n * sizeof(float) : 1);
}

static int from_gguf(const char *path, const char *name, const char *out) {
    sv_error_t err;
    sv_error_clear(&err);
    sv_gguf_t *g = NULL;
    if (sv_gguf_open(path, &g, &err)) /* the message names the file */
        return fail("open", &err);
    int rc = 1;
    float *y = NULL;
    const sv_gguf_tensor_t *t = sv_gguf_find_tensor(g, name);
    if (!t) {
        fprintf(stderr, "dequant_cli: %s has no tensor \"%s\"\n", path, name);
        goto done;
    }
    if (!(y = alloc_floats(t->n_elements))) {
        fprintf(stderr, "dequant_cli: out of memory for %llu floats\n",
                (unsigned long long)t->n_elements);
        goto done;
    }
    if (sv_dequantize(t->type, t->data, (size_t)t->n_bytes, y, t->n_elements, &err)) {
        rc = fail(name, &err);
        goto done;
    }
    rc = write_floats(out, y, t->n_elements);
done:
    free(y);
    sv_gguf_destroy(g);
    return rc;
}

static int from_safetensors(const char *path, const char *name, const char *out) {
    sv_error_t err;
    sv_error_clear(&err);
    sv_st_t *st = NULL;
    if (sv_st_open(path, &st, &err)) /* the message names the file */
        return fail("open", &err);
    int rc = 1;
    float *y = NULL;
    const sv_st_tensor_t *t = sv_st_find(st, name);
    if (!t) {
        fprintf(stderr, "dequant_cli: %s has no tensor \"%s\"\n", path, name);
        goto done;
    }
    if (!(y = alloc_floats(t->n_elems))) {
        fprintf(stderr, "dequant_cli: out of memory for %llu floats\n",
                (unsigned long long)t->n_elems);
        goto done;
    }
    if (sv_st_to_f32(t, y, &err)) {
        rc = fail(name, &err);
        goto done;
    }
    rc = write_floats(out, y, t->n_elems);
done:
    free(y);
    sv_st_destroy(st);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: dequant_cli FILE.gguf|FILE.safetensors TENSOR_NAME OUT.f32\n");
        return 2;
    }
    if (ends_with(argv[1], ".safetensors"))
        return from_safetensors(argv[1], argv[2], argv[3]);
    return from_gguf(argv[1], argv[2], argv[3]);
}
