/* sample_cli — draws tokens with the CPU sampler, for
 * tests/model/test_sample_stats.py (which compares the draws with a NumPy
 * computation of the target distribution).
 *
 *   sample_cli LOGITS.f32 [--n N] [--seed S] [--temperature T] [--top-k K]
 *              [--top-p P] [--min-p M] [--repetition-penalty R]
 *              [--presence-penalty X] [--frequency-penalty X]
 *              [--bias ID:VALUE]... [--allow ID,ID,...] [--context ID,...]
 *              [--accept ID,...] [--probs]
 *
 * LOGITS.f32 is raw little-endian float32, one row; its length is the
 * vocabulary size. --allow builds a mask allowing only those ids; --context
 * and --accept feed the penalty state once, before the draws. Prints N
 * sampled ids, one per line, each drawn from a fresh copy of the row with
 * the same sampler (so the RNG advances and the penalty state does not
 * change). --probs prints instead the sampler's own distribution
 * (sv_sampler_probs), one "id probability" line per token with nonzero
 * probability. Exit status: 0, 1 on a sampler error (message on stderr), 64
 * on a usage error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/engine/sample.h"

static int usage(const char *msg) {
    fprintf(stderr, "sample_cli: %s\nusage: sample_cli LOGITS.f32 [--n N] [--seed S] [--temperature T] "
                    "[--top-k K] [--top-p P] [--min-p M] [--repetition-penalty R] [--presence-penalty X] "
                    "[--frequency-penalty X] [--bias ID:VALUE]... [--allow IDS] [--context IDS] [--accept IDS] "
                    "[--probs]\n",
            msg);
    return 64;
}

static int parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) return -1;
    *out = (float)v;
    return 0;
}

static int parse_long(const char *s, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

/* "1,2,3" into ids (capacity cap); returns the count or -1. */
static long parse_ids(const char *s, int32_t *ids, long cap) {
    long n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || n == cap) return -1;
        ids[n++] = (int32_t)v;
        if (*end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return n;
}

static float *read_logits(const char *path, uint32_t *vocab) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *l = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size > 0 && size % 4 == 0 && size / 4 <= (long)SV_SAMPLE_MAX_VOCAB && fseek(f, 0, SEEK_SET) == 0) {
        l = malloc((size_t)size);
        if (l && fread(l, 1, (size_t)size, f) != (size_t)size) {
            free(l);
            l = NULL;
        }
        *vocab = (uint32_t)(size / 4);
    }
    fclose(f);
    return l;
}

int main(int argc, char **argv) {
    enum { MAX_LIST = 1 << 16 };
    static int32_t allow[MAX_LIST], context[MAX_LIST], accept[MAX_LIST];
    static sv_logit_bias_t bias[SV_SAMPLE_MAX_LOGIT_BIAS];
    long n_allow = -1, n_context = 0, n_accept = 0;
    uint32_t n_bias = 0;
    long long n = 1;
    bool probs_mode = false;
    const char *path = NULL;
    sv_sample_params_t p = sv_sample_params_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x = 0;
        int bad = 0;
        if (!strcmp(a, "--probs")) {
            probs_mode = true;
            continue;
        }
        if (a[0] != '-') {
            if (path) return usage("more than one logits file");
            path = a;
            continue;
        }
        if (!v) return usage("an option needs a value");
        i++;
        if (!strcmp(a, "--n")) bad = parse_long(v, &n) || n < 0;
        else if (!strcmp(a, "--seed")) bad = parse_long(v, &x) || x < 0, p.seed = (uint64_t)x;
        else if (!strcmp(a, "--temperature")) bad = parse_float(v, &p.temperature);
        else if (!strcmp(a, "--top-k")) bad = parse_long(v, &x) || x < -1 || x > INT32_MAX, p.top_k = (int32_t)x;
        else if (!strcmp(a, "--top-p")) bad = parse_float(v, &p.top_p);
        else if (!strcmp(a, "--min-p")) bad = parse_float(v, &p.min_p);
        else if (!strcmp(a, "--repetition-penalty")) bad = parse_float(v, &p.repetition_penalty);
        else if (!strcmp(a, "--presence-penalty")) bad = parse_float(v, &p.presence_penalty);
        else if (!strcmp(a, "--frequency-penalty")) bad = parse_float(v, &p.frequency_penalty);
        else if (!strcmp(a, "--allow")) bad = (n_allow = parse_ids(v, allow, MAX_LIST)) < 0;
        else if (!strcmp(a, "--context")) bad = (n_context = parse_ids(v, context, MAX_LIST)) < 0;
        else if (!strcmp(a, "--accept")) bad = (n_accept = parse_ids(v, accept, MAX_LIST)) < 0;
        else if (!strcmp(a, "--bias")) {
            char id[32];
            const char *colon = strchr(v, ':');
            bad = !colon || colon - v >= (long)sizeof id || n_bias == SV_SAMPLE_MAX_LOGIT_BIAS;
            if (!bad) {
                memcpy(id, v, (size_t)(colon - v));
                id[colon - v] = '\0';
                bad = parse_long(id, &x) || parse_float(colon + 1, &bias[n_bias].bias);
                bias[n_bias++].id = (int32_t)x;
            }
        } else
            return usage("unknown option");
        if (bad) return usage("bad option value");
    }
    if (!path) return usage("no logits file");
    p.logit_bias = bias;
    p.n_logit_bias = n_bias;

    uint32_t vocab = 0;
    float *row = read_logits(path, &vocab);
    if (!row) {
        fprintf(stderr, "sample_cli: cannot read %s as a float32 row\n", path);
        return 1;
    }
    int rc = 1;
    float *work = malloc((size_t)vocab * sizeof *work);
    double *probs = malloc((size_t)vocab * sizeof *probs);
    uint32_t *mask = NULL;
    sv_sampler_t *s = NULL;
    sv_error_t err;
    if (!work || !probs) goto out;
    if (n_allow >= 0) {
        mask = calloc((vocab + 31) / 32, sizeof *mask);
        if (!mask) goto out;
        for (long i = 0; i < n_allow; i++) {
            if (allow[i] < 0 || (uint32_t)allow[i] >= vocab) {
                fprintf(stderr, "sample_cli: --allow id %d out of range\n", (int)allow[i]);
                goto out;
            }
            mask[(uint32_t)allow[i] >> 5] |= 1u << (allow[i] & 31);
        }
    }
    if (sv_sampler_create(vocab, &p, &s, &err) || sv_sampler_add_context(s, context, (uint32_t)n_context, &err))
        goto fail;
    for (long i = 0; i < n_accept; i++)
        if (sv_sampler_accept(s, accept[i], &err)) goto fail;
    if (probs_mode) {
        memcpy(work, row, (size_t)vocab * sizeof *work);
        if (sv_sampler_probs(s, work, mask, probs, &err)) goto fail;
        for (uint32_t i = 0; i < vocab; i++)
            if (probs[i] > 0.0) printf("%u %.17g\n", i, probs[i]);
    } else {
        for (long long i = 0; i < n; i++) {
            int32_t id;
            memcpy(work, row, (size_t)vocab * sizeof *work);
            if (sv_sampler_sample(s, work, mask, &id, NULL, &err)) goto fail;
            printf("%d\n", (int)id);
        }
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "sample_cli: %s (%s)\n", err.message, sv_status_name(err.code));
out:
    sv_sampler_destroy(s);
    free(mask);
    free(probs);
    free(work);
    free(row);
    return rc;
}
