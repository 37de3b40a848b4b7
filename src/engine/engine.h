/* engine.h — the step-based scheduler: continuous batching over the paged
 * KV cache, joining model, sampler and matcher.
 *
 * The engine owns a KV block pool (kv_pool.h), an optional prefix cache
 * (radix.h), the model's paged KV storage (llama.h) and every request's
 * sampler and matcher. A caller drives it synchronously:
 *
 *     sv_engine_submit(e, &req, &id, &err);      any number, up to the queue
 *     while (sv_engine_has_work(e)) {
 *         sv_engine_step(e, &err);               one forward over a ragged batch
 *         while (sv_engine_next_output(e, &out)) ... incremental tokens ...
 *     }
 *
 * so that one thread (the engine thread) can own it; nothing here locks.
 *
 * One step. Running requests, oldest first, each contribute their pending
 * tokens (the rest of a prefill chunk, one decode token, or a jump-forward
 * extend) within max_num_batched_tokens; then waiting requests are admitted
 * (up to max_num_seqs running), each starting from the longest cached
 * prefix of its tokens (prefix cache) and contributing a prefill chunk.
 * Blocks are appended before the forward and any copy-on-write record is
 * performed at once with sv_llama_kv_copy_block. One sv_llama_forward_batch
 * runs every row; rows whose request has all its tokens computed give
 * logits, are masked by the matcher and sampled. After a token the request
 * is advanced exactly as the sequential reference (src/cli/cmd_generate.c)
 * does: EOG / stop ids end it; a constrained request then takes forced paths
 * (jump-forward: the forced tokens join its pending tokens, the matcher's
 * one-token rollback drops the last pending token before they do) until the
 * state is not forced; budget exhaustion ends it.
 *
 * Preemption by recompute. When the pool is out of blocks (after the prefix
 * cache's evictor) while a running request needs more, the newest running
 * request is preempted: its blocks are released and it goes to the front of
 * the waiting queue with its tokens (prompt + generated) to recompute. Its
 * sampler (penalty state, RNG position) and matcher are not touched: they
 * depend on the accepted tokens only, never on the KV, so the request
 * produces exactly the tokens it would have produced without preemption
 * (the CPU backend is batch-invariant: a row's logits do not depend on the
 * batch or on the chunking of its sequence).
 *
 * Priorities. A request of priority batch (a batch job's) yields to online
 * ones: the waiting queue and the running list each hold the online
 * choices first, so admission takes every waiting online request before a
 * batch one, and preemption (of the newest running choice) takes batch
 * choices first. When an online request waits and every sequence runs, the
 * newest batch choice is preempted at the start of the step to make room;
 * and while an online request waits or computes its prompt, batch choices
 * sit the steps out (unless nothing else could run), so that its first
 * token comes about as fast as if it were alone; and batch choices take at
 * most batch_step_tokens rows of any step, so that online decode steps
 * shared with them stay short. A step of batch rows alone is given up part
 * way when the engine's interrupt says an online request has arrived
 * (sv_engine_set_interrupt): it does not wait for the whole step. A
 * preempted batch choice recomputes (through the prefix cache) and
 * produces the same tokens, as any preempted choice, and so does one that
 * sat steps out or whose step was given up. With no batch request,
 * nothing changes.
 *
 * Admission. submit refuses (SV_ERR_BUDGET) when the waiting queue is full,
 * when prompt + max_tokens exceeds max_ctx or can never fit in the pool,
 * and, for a constrained request, when the constraint cannot complete within
 * max_tokens (sv_matcher_create's check). Bad arguments are SV_ERR_ARG.
 *
 * Outputs. Each step queues, per choice that changed, the tokens appended
 * since its last output and, at the end, a finish reason. A token, once
 * output, is never withdrawn: a jump-forward rollback only ever drops a
 * token accepted in the same step, before it is output. With logprobs, a
 * forced token is output once its logprob is known (one step after it was
 * forced: its row must be computed), and a choice whose last tokens were
 * forced finishes one step later; an ABORT output carries only the tokens
 * already scored.
 *
 * Choices (n > 1). One id, n choices, each with its own sampler (choice i
 * seeded with choice_seed(seed, i): seed itself for i = 0, so choice 0 is
 * the n = 1 request; for i > 0 splitmix64's finalizer of seed + i *
 * 0xd1b54a32d192ed03), matcher, detokenizer and KV sequence. Only choice 0
 * is scheduled until the prompt (and any tokens forced at the start) is
 * computed; then the others fork its KV sequence (sv_kv_seq_fork: the full
 * blocks shared for good, the partial one copied on the first write) into
 * free running slots (or, when none is free, wait at the front of the queue
 * without KV and recompute, through the prefix cache when it has the
 * prompt) and every choice samples from its own copy of the prompt's last
 * row. After that the choices are scheduled, preempted and finished
 * independently; each has its own final output and the very last output
 * of the request has request_done. Cancelling the id ends every unfinished
 * choice with ABORT. The queue limit counts requests, not choices.
 *
 * Text. With a vocabulary, each choice's output tokens run through a
 * streaming detokenizer (special tokens skipped, lossy UTF-8) and outputs
 * carry the new whole characters. Stop strings apply to unconstrained
 * choices only: text that may still be the start of a stop string is held
 * back; the text ends just before the first occurrence of any stop string
 * in the full text (earliest start, then lowest index; found as soon as no
 * other stop string could still complete at or before it), the choice
 * finishes STOP with stop_index, and the tokens generated so far, the
 * occurrence's included, are still output. At the end the held text is
 * flushed (an incomplete character becomes U+FFFD).
 *
 * Logprobs (sample.h's distribution: after bias, penalties and the
 * matcher's mask, before temperature and truncation). A forced
 * (jump-forward) token gets exactly what sampling it at its position would
 * have reported with jump-forward off: the row before it, under the mask of
 * the state it was forced from and the penalties of the tokens before it.
 * The forward then gives logits for those rows too (and the prefix cache
 * never supplies them).
 *
 * Finish reasons follow the reference loop with one difference: a
 * constrained request whose budget runs out in an accepting state (the
 * budget rule guarantees it) finishes with STOP and budget_stop set
 * (docs/architecture.md, "Budget-aware completion"); cmd_generate prints
 * "stop (budget)" for it; the tokens are the same.
 *
 * Memory: the pool, the KV storage, the batch arrays (max_num_batched_tokens
 * rows) and min(max_num_seqs, max_num_batched_tokens) logits rows are
 * allocated at create; a choice's token buffer, sampler, matcher and
 * detokenizer at submit. sv_engine_step allocates only amortised growth:
 * the output queue, the waiting queue (preempted and overflowing choices),
 * the logits rows (up to max_num_batched_tokens when extends report
 * logprobs), a choice's logprobs and text buffers. */
#ifndef SV_ENGINE_ENGINE_H
#define SV_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "fsm/matcher.h"
#include "fsm/token_index.h"
#include "src/backend/cuda.h"
#include "kv_pool.h"
#include "sample.h"
#include "src/model/llama.h"
#include "src/tokenizer/vocab.h"
#include "util/error.h"

typedef struct sv_engine sv_engine_t;

/* A device sampler (src/backend/cuda.h's, behind function pointers so
 * that the engine links no CUDA; src/cli/device.c makes one for a CUDA
 * backend). With one, a step's logits rows stay on the device where they
 * can: a row whose request wants no logprobs, logit bias or penalties (and
 * is not choice 0 of an n > 1 request at its fork) is masked and sampled
 * there, and only its id comes back; the other rows are downloaded and
 * sampled on the host as before. The device draws with the request's own
 * RNG (one draw a non-greedy token, as on the host), but walks its
 * candidates in id order, so at temperature > 0 a seed gives a different
 * (equally distributed) token than the host sampler would; greedy rows
 * choose the same token. Masks are named for the device's table by
 * sv_matcher_mask_key (uploaded once while they stay there); a mask cut by
 * a token budget is uploaded for its row alone. */
typedef struct sv_engine_dsampler {
    void *ud;
    int32_t max_rows; /* rows a sample call takes */
    /* Masks looked up after this stay in the table until the next call. */
    void (*begin_step)(void *ud);
    sv_status (*mask_slot)(void *ud, uint64_t key_hi, uint64_t key_lo, const uint32_t *mask,
                           int32_t *slot, sv_error_t *err);
    sv_status (*sample)(void *ud, int32_t rows, const float *logits, const sv_cuda_sample_params_t *params,
                        sv_cuda_sample_out_t *out, sv_error_t *err);
} sv_engine_dsampler_t;

typedef struct sv_engine_config {
    uint32_t kv_blocks;              /* KV blocks of 16 positions; 0: from kv_bytes */
    uint64_t kv_bytes;               /* used when kv_blocks == 0 (sv_llama_kv_block_bytes each) */
    uint32_t max_num_seqs;           /* requests running at once (default 16) */
    uint32_t max_num_batched_tokens; /* rows per forward (default 256) */
    uint32_t batch_step_tokens;      /* rows of batch-priority choices per forward (default 32;
                                        0: no cap beyond max_num_batched_tokens): keeps steps that
                                        online decode rows share with them short */
    uint32_t max_ctx;                /* tokens per request, prompt + output (default: the model's) */
    uint32_t max_queue;              /* waiting requests before submit says SV_ERR_BUDGET (default 256) */
    bool prefix_cache;               /* share full prompt blocks through the radix tree */
    bool jump_forward;               /* feed forced tokens as extends (default true); off: every
                                        constrained token is sampled from a mask */
    uint32_t prefetch_threads;       /* mask prefetch workers (default 1; 0: none) */
    uint64_t fault_at_step;          /* tests only: the Nth call of sv_engine_step with work fails
                                        with SV_ERR_INTERNAL, as a broken invariant would (0: never) */
    const sv_engine_dsampler_t *dsampler; /* borrowed (must outlive the engine); NULL: every row
                                        is sampled on the host */
} sv_engine_config_t;

/* What the engine needs of the tokenizer, both borrowed and both optional:
 * set gives the EOG tokens (NULL: only stop ids end a request), tok is the
 * matcher's encoder for jump-forward and token budgets (NULL: constrained
 * requests need single-byte tokens for their budget and get no
 * jump-forward). From an sv_tokens_t: sv_tokens_set() and sv_tokens_iface(). */
typedef struct sv_engine_vocab {
    const sv_token_set_t *set;
    const sv_tokenizer_iface_t *tok;
    const sv_vocab_t *vocab; /* for text deltas and stop strings (NULL: outputs carry no text and
                                stop strings are refused at submit) */
} sv_engine_vocab_t;

#define SV_ENGINE_MAX_N 16           /* choices per request */
#define SV_ENGINE_MAX_STOP 8         /* stop strings per request (OpenAI allows 4) */
#define SV_ENGINE_MAX_STOP_BYTES 256 /* bytes per stop string */

/* A reasoning section before the answer (docs/api.md, "Reasoning"): the
 * choice first writes free text under `think`, a constraint of "any text
 * without the end tag, then the end tag" (so a token can never run past the
 * tag, and EOG waits for it), and the request's own constraint (or none)
 * starts fresh on the token after the tag. When the reasoning has taken
 * max_tokens tokens, or when only the room the answer needs is left of the
 * request's budget (constrained requests: the answer's shortest encoding,
 * sv_matcher_min_tokens), the end tokens are appended as forced tokens. The
 * text of the reasoning goes to the outputs' reasoning field, without an
 * opening tag at its very start and without the end tag; stop strings apply
 * to the answer's text only. */
typedef struct sv_engine_reasoning {
    sv_token_index_t *think; /* borrowed (must outlive the request): the reasoning's constraint, accepting
                                exactly once, at its end tag, with no way on */
    const int32_t *end;      /* (n_end) the end tag's tokens, copied; the think constraint accepts them
                                from any of its states */
    uint32_t n_end;          /* 1..SV_ENGINE_MAX_END */
    const char *open_tag;    /* stripped from the start of the reasoning text when it begins with it
                                (NULL: nothing); copied */
    const char *end_tag;     /* the end tag's text, held back and stripped from the reasoning text;
                                copied */
    uint32_t max_tokens;     /* reasoning tokens (the end tag's excluded) before the end is forced (0: at
                                once); UINT32_MAX: no limit of its own (constrained requests still keep
                                the answer's room) */
} sv_engine_reasoning_t;

#define SV_ENGINE_MAX_END 16     /* tokens of a reasoning end tag */
#define SV_ENGINE_MAX_TAG 32     /* bytes of a reasoning tag */

typedef struct sv_engine_request {
    const int32_t *prompt;        /* (n_prompt >= 1) ids, copied */
    uint32_t n_prompt;
    sv_sample_params_t sampling;  /* copied (sv_sample_params_default() to start) */
    sv_token_index_t *constraint; /* NULL, or borrowed: must outlive the request's final output */
    uint32_t max_tokens;          /* 0: the context left */
    const int32_t *stop_ids;      /* (n_stop_ids) sampled ids that end an unconstrained request (not
                                     output), copied; stop ids do not cut constrained text */
    uint32_t n_stop_ids;
    const char *const *stop;      /* (n_stop) non-empty stop strings, copied: an unconstrained
                                     choice's text ends before the first occurrence of any (finish
                                     STOP, the string not output); ignored for constrained ones */
    uint32_t n_stop;              /* <= SV_ENGINE_MAX_STOP, each 1..SV_ENGINE_MAX_STOP_BYTES bytes of
                                     valid UTF-8; needs the vocab (SV_ERR_ARG otherwise) */
    uint32_t n;                   /* choices, <= SV_ENGINE_MAX_N (0 or 1: one); each samples with its
                                     own RNG seeded from sampling.seed and its index (see the header
                                     essay), and all share the prompt's KV blocks */
    bool logprobs;                /* outputs carry each token's logprob (and sampling.n_logprobs
                                     top alternatives), forced tokens included */
    uint8_t priority;             /* SV_PRIORITY_ONLINE (0, the default) or SV_PRIORITY_BATCH: admitted
                                     after every waiting online request, preempted before any online
                                     one, and paused while an online request waits or computes its
                                     prompt (the header essay, "Priorities") */
    const sv_engine_reasoning_t *reasoning; /* NULL: none; else copied (its think index borrowed) */
} sv_engine_request_t;

enum { SV_PRIORITY_ONLINE = 0, SV_PRIORITY_BATCH = 1 };

typedef enum {
    SV_FINISH_NONE = 0, /* still running */
    SV_FINISH_STOP,     /* EOG, a stop id, or a complete constraint */
    SV_FINISH_LENGTH,   /* max_tokens or the context */
    SV_FINISH_ABORT,    /* cancelled */
} sv_finish_reason;

typedef struct sv_engine_output {
    uint64_t id;
    uint32_t index;        /* the choice, 0 .. n - 1 */
    const int32_t *tokens; /* (n_tokens) appended since the last output; borrowed until the next
                              engine call */
    uint32_t n_tokens;
    const sv_logprobs_t *logprobs; /* (n_tokens) when the request asked, else NULL; borrowed
                                      likewise */
    const char *text;      /* (n_text) the text delta: whole UTF-8 characters, special tokens
                              skipped, held back while it may be the start of a stop string; NULL
                              without a vocab; borrowed likewise */
    size_t n_text;
    const char *reasoning; /* (n_reasoning) the reasoning's text delta (sv_engine_reasoning_t), which
                              comes before any of text; borrowed likewise; NULL without a vocab */
    size_t n_reasoning;
    uint32_t n_reasoning_tokens; /* output tokens of the reasoning so far, its end tag included */
    sv_finish_reason finish; /* NONE until the last output of the choice */
    bool budget_stop;        /* a constrained STOP with max_tokens used: the budget rule may
                                have closed the output (the server's "stop_reason": "max_tokens") */
    int32_t stop_index;      /* STOP by stop string stop[stop_index]; -1 otherwise */
    int32_t stop_id;         /* STOP by this sampled stop id or EOG id; -1 otherwise (and when a
                                stop string cut the text) */
    bool request_done;       /* the last output of the request's last running choice: its id is
                                forgotten after it */
    uint32_t n_generated;    /* output tokens of the choice so far */
    uint32_t n_prompt;       /* prompt tokens */
    uint32_t n_cached;       /* tokens the prefix cache supplied at the choice's (last) admission;
                                a forked choice reports choice 0's at the fork */
} sv_engine_output_t;

typedef struct sv_engine_stats {
    uint64_t steps;            /* forwards run */
    uint64_t rows;             /* batch rows computed (all kinds) */
    uint64_t cached_tokens;    /* tokens adopted from the prefix cache instead of computed */
    uint64_t sampled;          /* tokens sampled */
    uint64_t dev_sampled;      /* of them, on the device (cfg.dsampler) */
    uint64_t forced;           /* tokens appended by jump-forward */
    uint64_t rollbacks;        /* jump-forward one-token rollbacks */
    uint64_t preemptions;      /* requests preempted (recompute) */
    uint64_t interrupted_steps; /* batch-only steps given up for an online request */
    uint32_t running, waiting; /* now */
    uint32_t running_batch, waiting_batch; /* of them, at batch priority */
    uint32_t max_running;      /* most requests running in one step */
    uint64_t prefix_queries;   /* prompt tokens looked up in the prefix cache */
    uint64_t prefetched;       /* masks the prefetch workers computed */
    uint64_t mask_waits;       /* mask calls on the engine thread during which the constraint's
                                  index walked its trie (first visits, or budget-filtered masks) */
    /* Where the engine thread's time goes, in ns (monotonic clock), over
     * the steps that ran a forward: the whole steps; the forward calls
     * (sv_llama_forward_batch, the device sampler's hook included, and on
     * a GPU the wait for the device); of them the hook; the masks asked of
     * the matchers (either sampler); the host sampler's calls. A step's
     * engine work outside the model is step_ns - forward_ns. */
    uint64_t step_ns, forward_ns, hook_ns, mask_ns, sample_ns;
} sv_engine_stats_t;

/* Sets defaults for every field (prefix cache on). */
void sv_engine_config_default(sv_engine_config_t *c);

/* An engine over model m (borrowed; must outlive the engine) with vocab
 * (copied; its pointers borrowed likewise; may be NULL). SV_ERR_ARG for bad
 * config values, SV_ERR_BUDGET when the KV memory cannot hold one
 * max_ctx request, SV_ERR_NOMEM. Caller frees with sv_engine_destroy. */
sv_status sv_engine_create(sv_llama_t *m, const sv_engine_vocab_t *vocab, const sv_engine_config_t *cfg,
                           sv_engine_t **out, sv_error_t *err);
/* Frees everything, requests included (no outputs). NULL is a no-op. */
void sv_engine_destroy(sv_engine_t *e);

/* Queues a request; *id gets its id (> 0). Errors as in the header essay;
 * nothing is queued on error. */
sv_status sv_engine_submit(sv_engine_t *e, const sv_engine_request_t *req, uint64_t *id, sv_error_t *err);

/* Runs one step (see the header essay). Does nothing when there is no
 * work. Errors come from the backend or broken invariants. After an
 * SV_ERR_INTERNAL the caller may cancel every request and ask
 * sv_engine_check whether the engine can go on; after any other error it
 * should be destroyed. */
sv_status sv_engine_step(sv_engine_t *e, sv_error_t *err);

/* Lets a step that holds only batch-priority rows be given up part way:
 * fn(ud) is asked before each layer of its forward (from the engine's
 * thread), and when it returns true the step ends with SV_OK and no
 * progress (its rows are computed again later, so the outputs are the
 * same), counted in interrupted_steps. The engine loop answers "an online
 * request waits in the inbox", so that it does not wait for a long batch
 * step (src/engine/engine_loop.c). fn NULL: steps run whole. */
void sv_engine_set_interrupt(sv_engine_t *e, bool (*fn)(void *ud), void *ud);

/* With no request left (all cancelled or finished): whether the engine's
 * state is whole, so that it can serve again: nothing running or waiting,
 * the KV pool's and the prefix cache's own invariants, and every block free
 * or held by the prefix cache alone. SV_ERR_INTERNAL when not. */
sv_status sv_engine_check(const sv_engine_t *e, sv_error_t *err);

/* True while a request is waiting or running. */
bool sv_engine_has_work(const sv_engine_t *e);

/* Pops the next output (false when none is queued). A choice's last
 * output has finish != NONE; the request's very last one has request_done,
 * and its id is then forgotten. */
bool sv_engine_next_output(sv_engine_t *e, sv_engine_output_t *out);

/* Cancels a waiting or running request: its blocks return at once and an
 * ABORT output is queued for each of its unfinished choices. SV_ERR_ARG
 * for an unknown or finished id. */
sv_status sv_engine_cancel(sv_engine_t *e, uint64_t id, sv_error_t *err);

void sv_engine_stats(const sv_engine_t *e, sv_engine_stats_t *st);
/* The pool (borrowed), for accounting and tests. */
const sv_kv_pool_t *sv_engine_pool(const sv_engine_t *e);
/* Blocks free in the pool plus blocks held by the prefix cache alone. */
uint32_t sv_engine_free_blocks(const sv_engine_t *e);

#endif
