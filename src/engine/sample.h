/* sample.h — choosing the next token from a row of logits, on the CPU.
 *
 * The parameters follow the OpenAI API (temperature, top_p, presence and
 * frequency penalties, logit_bias, seed, top_logprobs) plus the common
 * extras of vLLM / llama.cpp / Hugging Face (top_k, min_p,
 * repetition_penalty). One sv_sampler_t serves one sequence: it holds the
 * parameters, the penalty state (what the sequence has seen and generated)
 * and a seeded RNG, and every buffer a call needs, allocated at create time;
 * sv_sampler_sample allocates nothing.
 *
 * Order of operations in sv_sampler_sample, on logits l[0..vocab):
 *
 *   1. logit bias         l[id] += bias (each pair, bias clamped to [-100, 100])
 *   2. penalties          a. repetition (llama.cpp / HF): for every token seen
 *                            (context or generated), l > 0 ? l / r : l * r
 *                         b. presence / frequency (OpenAI): for every generated
 *                            token, l -= presence + frequency * count
 *   3. mask               tokens whose allow_mask bit is 0 get l = -inf
 *   -- logprobs are taken here: log_softmax(l) over the allowed tokens --
 *   4. temperature        0: greedy (argmax, lowest id on ties; 5-7 skipped);
 *                         else weights w = exp((l - max l) / temperature)
 *   5. top-k              keep the k largest (ties: lower id first)
 *   6. top-p              keep the shortest prefix, in descending order (ties:
 *                         lower id first), whose mass is >= top_p of the mass
 *                         left by top-k (sums in double, in an order that
 *                         differs from a sorted running sum only by rounding)
 *   7. min-p              keep tokens with w >= min_p * max w
 *   8. sample             one draw in proportion to w over what is left
 *
 * Each truncation acts on the distribution the previous one left
 * (renormalized), as Hugging Face's logits processors and vLLM do. The
 * highest-weight token survives every rule, so there is always a candidate
 * once the mask allows one token with a finite logit.
 *
 * Logprobs are those of the distribution after bias, penalties and mask but
 * before temperature and truncation: OpenAI reports the model's
 * distribution, not the sampling one (a temperature-0 request still gets
 * real logprobs), and with the mask applied the chosen token always has a
 * finite logprob and the top list never names a token the constraint
 * forbids. They are computed in double and rounded to float.
 *
 * Determinism: the same parameters, seed, accepted tokens and logits give
 * the same tokens on every platform. Token choice uses only IEEE basic
 * operations on float and double (a private exp, not libm's, whose results
 * differ between C libraries), fixed summation orders and a deterministic
 * selection algorithm; each non-greedy call consumes exactly one 64-bit draw
 * from the RNG (util/rng.h), greedy calls none. Logprob values go
 * through libm's log and may differ in the last bit between platforms.
 *
 * Memory: about 20 bytes per vocabulary entry per sampler (16 of candidate
 * scratch, 4 of generated-token counts), 3 MB for a 152k vocabulary.
 *
 * Thread safety: a sampler is used by one thread at a time; distinct
 * samplers are independent. */
#ifndef SV_ENGINE_SAMPLE_H
#define SV_ENGINE_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

#define SV_SAMPLE_MAX_LOGPROBS 20      /* OpenAI's top_logprobs limit */
#define SV_SAMPLE_MAX_LOGIT_BIAS 1024  /* entries in logit_bias */
#define SV_SAMPLE_MAX_VOCAB 0x7fffffffu /* ids are int32_t */

typedef struct sv_logit_bias {
    int32_t id;  /* token id, 0 <= id < vocab_size */
    float bias;  /* finite (NaN is an error); clamped to [-100, 100] */
} sv_logit_bias_t;

/* Validated ranges (sv_sample_params_validate); "off" values disable a rule.
 * Start from sv_sample_params_default(): a zeroed struct is not the
 * defaults (top_p 0 is invalid, temperature 0 is greedy). */
typedef struct sv_sample_params {
    float temperature;         /* [0, 2] (OpenAI); 0 = greedy. default 1 */
    int32_t top_k;             /* >= 0; 0 = off (a server maps vLLM's -1 to 0). default 0 */
    float top_p;               /* (0, 1] (0 would keep nothing); 1 = off. default 1 */
    float min_p;               /* [0, 1]; 0 = off. default 0 */
    float repetition_penalty;  /* (0, 10]; 1 = off. default 1 */
    float presence_penalty;    /* [-2, 2] (OpenAI); 0 = off. default 0 */
    float frequency_penalty;   /* [-2, 2] (OpenAI); 0 = off. default 0 */
    const sv_logit_bias_t *logit_bias; /* n_logit_bias entries, borrowed by
                                          sv_sampler_create (copied); ids
                                          distinct. default NULL */
    uint32_t n_logit_bias;     /* <= SV_SAMPLE_MAX_LOGIT_BIAS. default 0 */
    uint64_t seed;             /* RNG seed. A request without a seed should get
                                  a random one from the caller. default 0 */
    int32_t n_logprobs;        /* top logprobs to report, 0..20. default 0 */
} sv_sample_params_t;

sv_sample_params_t sv_sample_params_default(void);

/* Checks every field (NaN is out of every range) and, for logit_bias, the ids
 * against vocab_size. On failure returns SV_ERR_ARG with a message that
 * starts with the OpenAI parameter name ("temperature: must be between 0 and
 * 2, got 2.5"); err->keyword holds that name alone ("temperature",
 * "logit_bias", ...) for the server's error "param" field. */
sv_status sv_sample_params_validate(const sv_sample_params_t *p, uint32_t vocab_size, sv_error_t *err);

typedef struct sv_token_logprob {
    int32_t id;
    float logprob;
} sv_token_logprob_t;

/* Caller-owned; filled by sv_sampler_sample when non-NULL. */
typedef struct sv_logprobs {
    float logprob;  /* the chosen token's */
    int32_t n_top;  /* entries in top: min(n_logprobs, allowed tokens with a finite logit) */
    sv_token_logprob_t top[SV_SAMPLE_MAX_LOGPROBS]; /* descending logprob, ties: lower id first */
} sv_logprobs_t;

typedef struct sv_sampler sv_sampler_t;

/* A sampler for logits rows of vocab_size floats (the model's row length,
 * padding included), 1 <= vocab_size <= SV_SAMPLE_MAX_VOCAB. Validates
 * params (SV_ERR_ARG as above) and copies them, logit_bias included: params
 * is borrowed for the call only. The penalty state starts empty and the RNG
 * at params->seed. *out: caller frees with sv_sampler_destroy. */
sv_status sv_sampler_create(uint32_t vocab_size, const sv_sample_params_t *params, sv_sampler_t **out,
                            sv_error_t *err);
/* NULL is a no-op. */
void sv_sampler_destroy(sv_sampler_t *s);

/* Forgets every seen and generated token and reseeds the RNG with the
 * parameters' seed: the sampler is as sv_sampler_create left it. */
void sv_sampler_reset(sv_sampler_t *s);

/* Context tokens (the prompt): seen by the repetition penalty only (as in
 * Hugging Face and vLLM), not counted by presence / frequency, which OpenAI
 * defines over the generated text. SV_ERR_ARG for an id out of range
 * (nothing is recorded then). */
sv_status sv_sampler_add_context(sv_sampler_t *s, const int32_t *ids, uint32_t n, sv_error_t *err);

/* A generated token: every token appended to the output, sampled or forced
 * (jump-forward), in order. It counts for presence / frequency and is seen
 * by the repetition penalty. SV_ERR_ARG for an id out of range. */
sv_status sv_sampler_accept(sv_sampler_t *s, int32_t id, sv_error_t *err);

/* Undoes one sv_sampler_accept(s, id) (a token rolled back, e.g. when
 * jump-forward re-tokenizes across a boundary). SV_ERR_ARG if id is out of
 * range or was not accepted. */
sv_status sv_sampler_unaccept(sv_sampler_t *s, int32_t id, sv_error_t *err);

/* Sampling elsewhere (a device sampler, src/backend/cuda.h): true when
 * the parameters need nothing beyond the mask, temperature, top-k, top-p
 * and min-p (no logit bias, no penalties, no logprobs), and then *t, *k,
 * *p and *mp get them; false otherwise (sample here). */
bool sv_sampler_plain(const sv_sampler_t *s, float *t, int32_t *k, float *p, float *mp);
/* The draw sv_sampler_sample would take next (the RNG is not advanced), and
 * advancing past it: a choice made elsewhere with the peeked draw takes it
 * (sv_sampler_take_draw) once the choice is kept, as sv_sampler_sample
 * would have (no draw when greedy). */
uint64_t sv_sampler_peek_draw(const sv_sampler_t *s);
void sv_sampler_take_draw(sv_sampler_t *s);

/* Chooses the next token (see the order of operations above).
 *
 * logits: vocab_size floats, MODIFIED IN PLACE (no copy on the hot path): on
 * return it holds the logits after bias, penalties and mask (-inf where the
 * mask forbids), before temperature (after an error, its contents are
 * unspecified). A caller that samples the same row twice must keep its own
 * copy.
 * allow_mask: NULL (every token allowed) or a bitset of (vocab_size + 31) /
 * 32 words, bit (id & 31) of word (id >> 5) set for an allowed token (the
 * layout of fsm/token_index.h); bits past vocab_size are ignored. A token
 * whose bit is 0 is never chosen.
 * out_lp: NULL, or filled with the chosen token's logprob and the top
 * n_logprobs (see the header comment for which distribution).
 *
 * Errors (nothing chosen, *out_id untouched): SV_ERR_EMPTY when no allowed
 * token has a finite logit (the mask allows nothing); SV_ERR_ARG when an
 * allowed token's logit is NaN or +inf after bias and penalties. The RNG
 * does not advance on an error. */
sv_status sv_sampler_sample(sv_sampler_t *s, float *logits, const uint32_t *allow_mask, int32_t *out_id,
                            sv_logprobs_t *out_lp, sv_error_t *err);

/* The logprobs sv_sampler_sample would report (out_lp) had it chosen id,
 * without drawing: the same distribution and the same top list, bit for
 * bit. For a token the caller chose (a jump-forward token, scored where it
 * would have been sampled). A token the mask forbids gets -inf. logits is
 * modified as by sv_sampler_sample; the RNG does not advance. Errors as
 * sv_sampler_sample, and SV_ERR_ARG for id out of range. */
sv_status sv_sampler_logprobs(sv_sampler_t *s, float *logits, const uint32_t *allow_mask, int32_t id,
                              sv_logprobs_t *out_lp, sv_error_t *err);

/* The distribution sv_sampler_sample would draw from, without drawing:
 * probs (vocab_size doubles, caller-owned) gets, for each id, the
 * probability that sv_sampler_sample with the same state and logits returns
 * it: 1 at the argmax when greedy, 0 for every masked or truncated token.
 * logits is modified as by sv_sampler_sample; the RNG does not advance.
 * Errors as sv_sampler_sample. For tests, and as the CPU reference of a
 * device sampler. */
sv_status sv_sampler_probs(sv_sampler_t *s, float *logits, const uint32_t *allow_mask, double *probs,
                           sv_error_t *err);

#endif
