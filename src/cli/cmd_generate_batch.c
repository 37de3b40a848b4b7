/* cmd_generate_batch.c — `sieve generate --batch FILE.jsonl`: many prompts
 * through the engine (src/engine/engine.h) at once.
 *
 * Each input line is one request, a JSON object:
 *
 *     {"prompt": str, "chat": bool, "schema": object, "regex": str, "grammar": str,
 *      "max_tokens": int, "temperature": float, "top_p": float, "seed": int,
 *      "n": int, "stop": str | [str], "logprobs": bool, "top_logprobs": int,
 *      "max_reasoning_tokens": int, "enable_thinking": bool}
 *
 * n (1..16) choices share the prompt's KV blocks, choice i seeded from the
 * seed and i (choice 0 is the n = 1 run); stop strings (at most 8, 1..256
 * bytes each) end an unconstrained choice's text just before the first
 * occurrence (a constrained choice's text is never cut); logprobs asks for
 * each output token's logprob, top_logprobs (0..20, needs logprobs) for
 * that many alternatives, forced (jump-forward) tokens included.
 *
 * With --reasoning-parser qwen3|deepseek_r1 (src/api/reasoning.h), chat
 * lines think first, as the server's chat completions do: the prompt ends
 * as the parser says, the output writes freely inside <think>...</think>
 * (at most max_reasoning_tokens, or --max-reasoning-tokens, before the end
 * tag is forced) and the line's constraint applies to what follows; each
 * output then carries "reasoning" and "reasoning_tokens" beside "text".
 * "enable_thinking": false turns it off for a line (Qwen3's empty think).
 *
 * (only "prompt" is required; blank lines are skipped and do not take an
 * index). Every line is parsed, encoded and its constraint compiled before
 * anything runs, so a bad line costs no forward pass; lines with the same
 * schema text, regex or grammar (GBNF, docs/grammar.md) share one token
 * index (and the masks it computes).
 * On CUDA rows are sampled on the device unless --host-sampling (see
 * docs/cuda.md, "Sampling on the device"). The good lines are then submitted to one engine (stepping
 * while its waiting queue is full) and the engine is stepped until every
 * request has finished.
 *
 * Output: one JSON line per input line, in input order, printed at the end:
 *
 *     {"index", "outputs": [{"index", "text", "finish_reason", "stop_reason"?,
 *      "logprobs"?}, ... one per choice], "prompt_tokens",
 *      "completion_tokens" (all choices), "cached_tokens"}
 *
 * where "stop_reason" is the stop string that ended the text, or "budget",
 * and "logprobs" is OpenAI chat's {"content": [{"token", "logprob",
 * "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]} (a token's
 * text is its bytes decoded lossily; a logprob of -inf is -9999.0).
 *
 * or {"index", "error": {"message", "type"}} for a line that is not JSON,
 * has a bad field, a constraint that does not compile or cannot complete
 * within max_tokens, or bad sampling values. A constrained request whose
 * budget ended it finishes with "stop" and "stop_reason": "budget" (the
 * engine's budget_stop; the sequential path prints "stop (budget)").
 *
 * Equivalence with the sequential path (cmd_generate.c): the prompt is
 * encoded the same way (chat template, or BOS when the vocabulary adds one),
 * the budget is min(max_tokens, context - prompt) with the same context
 * (the model's, at most 4096), and the CPU backend is batch-invariant, so a
 * greedy line gives the text `sieve generate` gives alone.
 *
 * A summary (requests, tokens, wall time, tokens/s, preemptions, cached
 * tokens) goes to stderr; --stats FILE writes the engine's counters
 * (sv_engine_stats_t) as one JSON object; --no-jump-forward samples every
 * constrained token instead of feeding forced ones. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsm/schema.h"
#include "src/backend/cpu.h"
#include "src/api/reasoning.h"
#include "src/chat/chat.h"
#include "src/constraint/constraint_cache.h"
#include "src/engine/engine.h"
#include "src/engine/prefetch.h"
#include "src/engine/sample.h"
#include "src/constraint/tokens.h"
#include "src/model/llama.h"
#include "src/tokenizer/detok.h"
#include "util/clock.h"
#include "cli.h"
#include "device.h"
#include "generate.h"


#define BATCH_MAX_LINES 100000      /* requests in one file */
#define BATCH_MAX_TOKENS (1u << 20) /* max_tokens of one line, as --max-tokens */
#define BATCH_CTX_CAP 4096          /* the context, as cmd_generate's default */

enum { OPT_BATCH = 256, OPT_GPU_UTIL, OPT_MAX_NUM_SEQS, OPT_THREADS, OPT_WS, OPT_UNKNOWN_FORMATS, OPT_KV_MB, OPT_NO_JF, OPT_STATS,
       OPT_MAX_BATCHED, OPT_NO_PREFIX, OPT_PREFETCH, OPT_DEVICE, OPT_CPU_KERNELS, OPT_CUDA_FP32,
       OPT_HOST_SAMPLING, OPT_REASONING_PARSER, OPT_MAX_REASONING };

static const char *const usage_text =
    "Usage: sieve generate --batch FILE.jsonl -m MODEL [--max-num-seqs 8] [--threads N]\n"
    "                      [--ws MODE] [--allow-unknown-formats] [--kv-memory-mb 512]\n"
    "                      [--gpu-memory-utilization 0.9]\n"
    "                      [--max-num-batched-tokens 256] [--no-prefix-cache]\n"
    "                      [--prefetch-threads 1] [--no-jump-forward] [--stats FILE]\n"
    "                      [--device cpu|cuda|auto] [--cuda-fp32] [--cpu-kernels ref|int8]\n"
    "                      [--host-sampling] [--reasoning-parser qwen3|deepseek_r1]\n"
    "                      [--max-reasoning-tokens N]\n"
    "\n"
    "Runs every line of FILE (- is standard input) through the continuous-batching\n"
    "engine. A line is a JSON object:\n"
    "  {\"prompt\": str, \"chat\": bool, \"schema\": object, \"regex\": str,\n"
    "   \"max_tokens\": int, \"temperature\": float, \"top_p\": float, \"seed\": int,\n"
    "   \"n\": int, \"stop\": str or [str], \"logprobs\": bool, \"top_logprobs\": int,\n"
    "   \"max_reasoning_tokens\": int, \"enable_thinking\": bool}\n"
    "(defaults: chat false, max_tokens 256, temperature 1, top_p 1, seed = the line's\n"
    "index, n 1 (at most 16 choices, sharing the prompt), no stop strings (at most 8;\n"
    "they do not cut constrained text), logprobs false, top_logprobs 0 (at most 20)).\n"
    "One JSON line per input line is printed on stdout in input order:\n"
    "  {\"index\", \"outputs\": [{\"index\", \"text\", \"finish_reason\", \"stop_reason\",\n"
    "   \"logprobs\": {\"content\": [{\"token\", \"logprob\", \"bytes\", \"top_logprobs\"}]}}],\n"
    "   \"prompt_tokens\", \"completion_tokens\", \"cached_tokens\"}\n"
    "(one output per choice; stop_reason, the stop string or \"budget\", and logprobs\n"
    "only when they apply), or {\"index\", \"error\": {\"message\", \"type\"}} for a bad\n"
    "line; the others still run.\n"
    "  --max-num-seqs N     sequences (choices) decoded at once (default 8).\n"
    "  --kv-memory-mb M     memory of the paged KV cache (default 512 on the CPU).\n"
    "  --gpu-memory-utilization F  on CUDA, the fraction of the GPU's memory to take:\n"
    "                       the KV cache gets what the weights leave (default 0.9 on\n"
    "                       CUDA unless --kv-memory-mb is given).\n"
    "  --max-num-batched-tokens N  rows in one forward: decode tokens plus prefill\n"
    "                       chunks (default 256).\n"
    "  --no-prefix-cache    do not share prompt blocks between requests.\n"
    "  --prefetch-threads N threads computing the masks of states a constrained\n"
    "                       request may reach next (default: 1 on a GPU, 0 on the CPU).\n"
    "  --no-jump-forward    sample every constrained token (no forced extends).\n"
    "  --stats FILE         write the engine's counters as one JSON object at the end\n"
    "                       (on CUDA with the step graphs': graph_steps, graph_replays,\n"
    "                       graph_captures).\n"
    "  --host-sampling      on CUDA, sample every row on the host (the logits come\n"
    "                       back each step) instead of on the device (the default for\n"
    "                       rows without logprobs, logit bias or penalties).\n"
    "  --reasoning-parser NAME  qwen3 or deepseek_r1: chat lines think in\n"
    "                       <think>...</think> before their constraint applies; their\n"
    "                       outputs add \"reasoning\" and \"reasoning_tokens\".\n"
    "  --max-reasoning-tokens N  reasoning tokens before </think> is forced, for lines\n"
    "                       without max_reasoning_tokens (default: no limit).\n"
    "  --ws, --allow-unknown-formats, --threads, --device, --cuda-fp32, --cpu-kernels: as for one\n"
    "                       generation\n"
    "                       (on CUDA a line's text matches the sequential run's up to\n"
    "                       float rounding, not bit for bit: cuBLAS is not batch-invariant).\n"
    "A summary goes to stderr.\n";

typedef struct {
    const char *file, *model;
    uint32_t max_num_seqs;
    int threads;
    sv_ws_mode ws;
    bool unknown_formats;
    uint64_t kv_mb;  /* --kv-memory-mb; 0: not given */
    double gpu_util; /* --gpu-memory-utilization; 0: not given */
    bool no_jump_forward, no_prefix_cache;
    uint32_t max_batched, prefetch_threads;
    bool prefetch_given;
    const char *stats;
    const char *device; /* --device; NULL: auto */
    sv_cpu_kernels kernels; /* --cpu-kernels */
    bool cuda_fp32;         /* --cuda-fp32 */
    bool host_sampling;     /* --host-sampling */
    sv_reasoning_parser reasoning;  /* --reasoning-parser */
    uint32_t max_reasoning;         /* --max-reasoning-tokens; UINT32_MAX: no limit */
    bool max_reasoning_given;
} batch_opts_t;

/* One choice's result. */
typedef struct {
    sv_ids_t out;           /* generated ids, as output */
    sv_bytes_t text;        /* the engine's text deltas */
    sv_logprobs_t *lp;      /* (n_lp) when the line asks */
    size_t n_lp, cap_lp;
    sv_finish_reason finish;
    bool budget_stop;
    int32_t stop_index;
    sv_bytes_t reasoning;   /* the engine's reasoning deltas */
    uint32_t n_reasoning_tokens;
} choice_t;

/* One input line and, once run, its result. */
typedef struct {
    json_t *error;          /* {"message", "type", ...} for a bad line, or NULL */
    sv_ids_t prompt;        /* encoded prompt */
    sv_sample_params_t sp;
    uint32_t budget;        /* min(max_tokens, ctx - prompt) */
    sv_constraint_t *c;     /* NULL when unconstrained; held from the run's cache */
    sv_token_index_t *ix;   /* c's index */
    uint32_t n;             /* choices */
    bool logprobs;
    char *stop[SV_ENGINE_MAX_STOP];
    uint32_t n_stop;
    uint64_t id;            /* engine id; 0 until submitted */
    choice_t *ch;           /* (n), once prepared */
    uint32_t n_cached;
    bool done;
    bool reasons;           /* a chat line under a reasoning parser, thinking on */
    uint32_t max_reasoning; /* its reasoning budget (UINT32_MAX: none) */
} line_t;

static void line_error(line_t *l, const char *type, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void line_error(line_t *l, const char *type, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_decref(l->error);
    l->error = json_pack("{s:s, s:s}", "message", msg, "type", type);
}

/* An error from a library call, with the context sv_cli_constraint_error
 * prints (offset, keyword, pointer). */
static void line_status_error(line_t *l, const sv_error_t *err) {
    line_error(l, sv_status_name(err->code), "%s", err->message[0] ? err->message : sv_status_name(err->code));
    if (!l->error) return;
    if (err->offset >= 0) json_object_set_new(l->error, "offset", json_integer(err->offset));
    if (err->keyword[0]) json_object_set_new(l->error, "keyword", json_string(err->keyword));
    if (err->keyword[0] || err->pointer[0]) json_object_set_new(l->error, "pointer", json_string(err->pointer));
}

/* Shared, read-only state for preparing lines. */
typedef struct {
    const batch_opts_t *o;
    sv_tokens_t *tok;
    const sv_vocab_t *v;
    int32_t n_vocab;
    long ctx;
    const sv_chat_template_t *tmpl; /* NULL when the model has none */
    const char *tmpl_error;         /* why, for chat lines */
    sv_constraint_cache_t *cache;   /* the compiled constraints */
} prep_t;

/* Gets a line's schema or regex from the run's constraint cache into
 * l->c and l->ix: lines with the same constraint share one compiled index
 * (a job of thousands of lines with one schema compiles it once, and its
 * lines share the masks it computes). */
static void compile_constraint(const prep_t *p, line_t *l, json_t *schema, const char *regex, const char *grammar) {
    sv_error_t err;
    sv_error_clear(&err);
    char *text = schema ? json_dumps(schema, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
    if (schema && !text) { line_error(l, "nomem", "out of memory"); return; }
    sv_schema_opts_t so;
    sv_schema_opts_default(&so);
    so.ws = p->o->ws;
    so.unknown_formats_ok = p->o->unknown_formats;
    const char *t = schema ? text : grammar ? grammar : regex;
    sv_constraint_spec_t spec = {.kind = schema ? SV_CONSTRAINT_SCHEMA : grammar ? SV_CONSTRAINT_GRAMMAR : SV_CONSTRAINT_REGEX,
                                 .text = t, .len = strlen(t),
                                 .opts = &so, .tokens = sv_tokens_set(p->tok)};
    sv_status st = sv_constraint_get(p->cache, &spec, &l->c, NULL, &err);
    free(text);
    if (st) { line_status_error(l, &err); return; }
    l->ix = sv_constraint_index(l->c);
}

/* "stop": a string or a list of strings, each 1..SV_ENGINE_MAX_STOP_BYTES
 * bytes without NUL, at most SV_ENGINE_MAX_STOP. Nonzero on error. */
static int parse_stop(line_t *l, json_t *val) {
    json_t *one[1] = {val};
    json_t **items = one;
    size_t n = 1;
    if (json_is_array(val)) {
        n = json_array_size(val);
        if (n > SV_ENGINE_MAX_STOP) {
            line_error(l, "arg", "stop: at most %d strings", SV_ENGINE_MAX_STOP);
            return -1;
        }
        items = NULL;
    } else if (!json_is_string(val)) {
        line_error(l, "arg", "stop: must be a string or a list of strings");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *s = items ? items[i] : json_array_get(val, i);
        if (!json_is_string(s)) {
            line_error(l, "arg", "stop: must be a string or a list of strings");
            return -1;
        }
        size_t len = json_string_length(s);
        if (len == 0 || len > SV_ENGINE_MAX_STOP_BYTES || strlen(json_string_value(s)) != len) {
            line_error(l, "arg", "stop: each string must have 1 to %d bytes and no NUL", SV_ENGINE_MAX_STOP_BYTES);
            return -1;
        }
        if (!(l->stop[l->n_stop] = strdup(json_string_value(s)))) {
            line_error(l, "nomem", "out of memory");
            return -1;
        }
        l->n_stop++;
    }
    return 0;
}

/* Parses and prepares one line (index idx): fields, prompt, sampling,
 * constraint. On any problem l->error is set and the line does not run. */
static void prepare_line(const prep_t *p, const char *s, size_t n, size_t idx, line_t *l) {
    l->sp = sv_sample_params_default();
    l->sp.seed = idx; /* reproducible runs: the seed follows the line's index */
    json_error_t je;
    json_t *root = json_loadb(s, n, 0, &je);
    if (!root) { line_error(l, "syntax", "not JSON: %s (column %d)", je.text, je.column); return; }
    if (!json_is_object(root)) { line_error(l, "arg", "a line must be a JSON object"); goto done; }

    const char *prompt = NULL, *regex = NULL, *grammar = NULL;
    json_t *schema = NULL;
    bool chat = false, thinking = true, thinking_given = false, max_reasoning_given = false;
    l->max_reasoning = p->o->max_reasoning;
    long long max_tokens = 256;
    int32_t top_logprobs = 0;
    l->n = 1;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "prompt")) {
            if (!json_is_string(val)) { line_error(l, "arg", "prompt: must be a string"); goto done; }
            prompt = json_string_value(val);
            if (strlen(prompt) != json_string_length(val)) { line_error(l, "arg", "prompt: contains NUL"); goto done; }
        } else if (!strcmp(key, "chat")) {
            if (!json_is_boolean(val)) { line_error(l, "arg", "chat: must be a boolean"); goto done; }
            chat = json_is_true(val);
        } else if (!strcmp(key, "schema")) {
            if (!json_is_object(val)) { line_error(l, "arg", "schema: must be an object"); goto done; }
            schema = val;
        } else if (!strcmp(key, "regex") || !strcmp(key, "grammar")) {
            if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val)) {
                line_error(l, "arg", "%s: must be a string without NUL", key);
                goto done;
            }
            *(key[0] == 'r' ? &regex : &grammar) = json_string_value(val);
        } else if (!strcmp(key, "max_tokens")) {
            if (!json_is_integer(val) || json_integer_value(val) < 1 || json_integer_value(val) > BATCH_MAX_TOKENS) {
                line_error(l, "arg", "max_tokens: must be an integer from 1 to %u", BATCH_MAX_TOKENS);
                goto done;
            }
            max_tokens = json_integer_value(val);
        } else if (!strcmp(key, "temperature") || !strcmp(key, "top_p")) {
            if (!json_is_number(val)) { line_error(l, "arg", "%s: must be a number", key); goto done; }
            *(key[0] == 't' && key[1] == 'e' ? &l->sp.temperature : &l->sp.top_p) = (float)json_number_value(val);
        } else if (!strcmp(key, "seed")) {
            if (!json_is_integer(val) || json_integer_value(val) < 0) {
                line_error(l, "arg", "seed: must be a non-negative integer");
                goto done;
            }
            l->sp.seed = (uint64_t)json_integer_value(val);
        } else if (!strcmp(key, "n")) {
            if (!json_is_integer(val) || json_integer_value(val) < 1 || json_integer_value(val) > SV_ENGINE_MAX_N) {
                line_error(l, "arg", "n: must be an integer from 1 to %d", SV_ENGINE_MAX_N);
                goto done;
            }
            l->n = (uint32_t)json_integer_value(val);
        } else if (!strcmp(key, "stop")) {
            if (parse_stop(l, val)) goto done;
        } else if (!strcmp(key, "logprobs")) {
            if (!json_is_boolean(val)) { line_error(l, "arg", "logprobs: must be a boolean"); goto done; }
            l->logprobs = json_is_true(val);
        } else if (!strcmp(key, "top_logprobs")) {
            if (!json_is_integer(val) || json_integer_value(val) < 0 ||
                json_integer_value(val) > SV_SAMPLE_MAX_LOGPROBS) {
                line_error(l, "arg", "top_logprobs: must be an integer from 0 to %d", SV_SAMPLE_MAX_LOGPROBS);
                goto done;
            }
            top_logprobs = (int32_t)json_integer_value(val);
        } else if (!strcmp(key, "max_reasoning_tokens")) {
            if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) > BATCH_MAX_TOKENS) {
                line_error(l, "arg", "max_reasoning_tokens: must be an integer from 0 to %u", BATCH_MAX_TOKENS);
                goto done;
            }
            l->max_reasoning = (uint32_t)json_integer_value(val);
            max_reasoning_given = true;
        } else if (!strcmp(key, "enable_thinking")) {
            if (!json_is_boolean(val)) { line_error(l, "arg", "enable_thinking: must be a boolean"); goto done; }
            thinking = json_is_true(val);
            thinking_given = true;
        } else {
            /* Refused rather than ignored: a misspelt "max_token" would
             * otherwise run silently with the default. */
            line_error(l, "arg", "unknown field '%s'", key);
            goto done;
        }
    }
    if (!prompt) { line_error(l, "arg", "prompt: missing"); goto done; }
    /* Refused where nothing would apply them, as the server refuses them. */
    if ((max_reasoning_given || thinking_given) && p->o->reasoning == SV_REASONING_NONE) {
        line_error(l, "arg", "%s: this run has no reasoning parser (--reasoning-parser qwen3|deepseek_r1)",
                   max_reasoning_given ? "max_reasoning_tokens" : "enable_thinking");
        goto done;
    }
    if ((max_reasoning_given || thinking_given) && !chat) {
        line_error(l, "arg", "%s: only chat lines reason", max_reasoning_given ? "max_reasoning_tokens" : "enable_thinking");
        goto done;
    }
    if (top_logprobs && !l->logprobs) {
        line_error(l, "arg", "top_logprobs: needs \"logprobs\": true");
        goto done;
    }
    l->sp.n_logprobs = top_logprobs;
    sv_error_t err;
    sv_error_clear(&err);
    if (sv_sample_params_validate(&l->sp, (uint32_t)p->n_vocab, &err)) {
        line_error(l, "arg", "%s", err.message);
        if (l->error && err.keyword[0]) json_object_set_new(l->error, "param", json_string(err.keyword));
        goto done;
    }

    /* The prompt, encoded as cmd_generate does. */
    sv_bytes_t rendered = {0};
    const char *text = prompt;
    size_t tlen = strlen(prompt);
    if (chat) {
        if (!p->tmpl) { line_error(l, "unsupported", "chat: %s", p->tmpl_error); goto done; }
        sv_chat_msg_t msg = {"user", prompt};
        if (sv_chat_render(p->tmpl, &msg, 1, &rendered, &err)) {
            sv_bytes_free(&rendered);
            line_status_error(l, &err);
            goto done;
        }
        const char *suffix = sv_reasoning_prompt_suffix(p->o->reasoning, thinking, &l->reasons);
        if (sv_bytes_append(&rendered, suffix, strlen(suffix))) {
            sv_bytes_free(&rendered);
            line_error(l, "nomem", "out of memory");
            goto done;
        }
        text = (const char *)rendered.p;
        tlen = rendered.n;
    } else if (sv_vocab_add_bos(p->v) && sv_vocab_bos(p->v) >= 0 && sv_ids_push(&l->prompt, sv_vocab_bos(p->v))) {
        line_error(l, "nomem", "out of memory");
        goto done;
    }
    sv_status st = sv_tokens_encode(p->tok, text, tlen, &l->prompt, &err);
    sv_bytes_free(&rendered);
    if (st) { line_status_error(l, &err); goto done; }
    if (l->prompt.n == 0) { line_error(l, "arg", "prompt: encodes to no tokens"); goto done; }
    if ((long)l->prompt.n >= p->ctx) {
        line_error(l, "budget", "the prompt has %zu tokens; the context is %ld", l->prompt.n, p->ctx);
        goto done;
    }
    long left = p->ctx - (long)l->prompt.n;
    l->budget = (uint32_t)(left < max_tokens ? left : max_tokens);

    if (!!schema + !!regex + !!grammar > 1) {
        line_error(l, "arg", "give at most one of schema, regex and grammar");
        goto done;
    }
    if (schema || regex || grammar) compile_constraint(p, l, schema, regex, grammar);
    if (!l->error && !(l->ch = calloc(l->n, sizeof *l->ch))) line_error(l, "nomem", "out of memory");
done:
    json_decref(root);
}

/* The line a finished or incremental output belongs to: ids[] holds the
 * submitted lines in increasing engine id (submission order). */
static line_t *find_line(line_t *lines, const size_t *order, size_t n_order, uint64_t id) {
    size_t lo = 0, hi = n_order;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (lines[order[mid]].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n_order && lines[order[lo]].id == id ? &lines[order[lo]] : NULL;
}

static sv_status drain(sv_engine_t *e, line_t *lines, const size_t *order, size_t n_order, size_t *n_done,
                       sv_error_t *err) {
    sv_engine_output_t out;
    while (sv_engine_next_output(e, &out)) {
        line_t *l = find_line(lines, order, n_order, out.id);
        if (!l || out.index >= l->n)
            return sv_error_set(err, SV_ERR_INTERNAL, -1, "internal: an output for unknown request %llu choice %u",
                                (unsigned long long)out.id, out.index);
        choice_t *c = &l->ch[out.index];
        if (out.n_tokens && sv_ids_reserve(&c->out, out.n_tokens))
            return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        for (uint32_t i = 0; i < out.n_tokens; i++) sv_ids_push(&c->out, out.tokens[i]);
        if ((out.n_text && sv_bytes_append(&c->text, out.text, out.n_text)) ||
            (out.n_reasoning && sv_bytes_append(&c->reasoning, out.reasoning, out.n_reasoning)))
            return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
        c->n_reasoning_tokens = out.n_reasoning_tokens;
        if (out.logprobs && out.n_tokens) {
            if (c->n_lp + out.n_tokens > c->cap_lp) {
                size_t nc = c->cap_lp ? c->cap_lp : 16;
                while (nc < c->n_lp + out.n_tokens) nc *= 2;
                sv_logprobs_t *lp = realloc(c->lp, nc * sizeof *lp);
                if (!lp) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
                c->lp = lp;
                c->cap_lp = nc;
            }
            memcpy(c->lp + c->n_lp, out.logprobs, out.n_tokens * sizeof *out.logprobs);
            c->n_lp += out.n_tokens;
        }
        if (out.finish != SV_FINISH_NONE) {
            c->finish = out.finish;
            c->budget_stop = out.budget_stop;
            c->stop_index = out.stop_index;
            if (out.index == 0) l->n_cached = out.n_cached;
        }
        if (out.request_done) {
            l->done = true;
            (*n_done)++;
        }
    }
    return SV_OK;
}

/* A token as OpenAI's logprobs show it: "token" (its bytes, decoded
 * lossily), "logprob" (-inf as -9999.0) and "bytes". */
static json_t *token_json(const sv_vocab_t *v, int32_t id, float logprob) {
    size_t n = 0;
    const uint8_t *b = sv_vocab_bytes(v, id, &n);
    uint8_t *u = malloc(3 * n + 1);
    json_t *bytes = json_array();
    if (!u || !bytes) {
        free(u);
        json_decref(bytes);
        return NULL;
    }
    size_t un = sv_utf8_lossy(b, n, u, NULL);
    for (size_t i = 0; i < n; i++) json_array_append_new(bytes, json_integer(b[i]));
    double lp = logprob == -INFINITY ? -9999.0 : (double)logprob;
    json_t *o = json_pack("{s:s%, s:f, s:o}", "token", un ? (const char *)u : "", un, "logprob", lp, "bytes", bytes);
    free(u);
    return o;
}

static json_t *logprobs_json(const sv_vocab_t *v, const choice_t *c) {
    json_t *content = json_array();
    if (!content) return NULL;
    for (size_t i = 0; i < c->n_lp && i < c->out.n; i++) {
        json_t *t = token_json(v, c->out.v[i], c->lp[i].logprob);
        json_t *top = json_array();
        for (int k = 0; t && top && k < c->lp[i].n_top; k++)
            json_array_append_new(top, token_json(v, c->lp[i].top[k].id, c->lp[i].top[k].logprob));
        if (!t || !top || json_object_set_new(t, "top_logprobs", top) || json_array_append_new(content, t)) {
            json_decref(content);
            return NULL;
        }
    }
    return json_pack("{s:o}", "content", content);
}

static const char *finish_name(sv_finish_reason f) {
    switch (f) {
    case SV_FINISH_STOP: return "stop";
    case SV_FINISH_LENGTH: return "length";
    case SV_FINISH_ABORT: return "abort";
    case SV_FINISH_NONE: break;
    }
    return "none";
}

static int print_line(size_t idx, const line_t *l, const sv_vocab_t *v) {
    json_t *root;
    if (l->error) {
        root = json_pack("{s:I, s:O}", "index", (json_int_t)idx, "error", l->error);
    } else {
        json_t *outs = json_array();
        size_t completion = 0;
        for (uint32_t k = 0; outs && k < l->n; k++) {
            const choice_t *c = &l->ch[k];
            completion += c->out.n;
            json_t *o = json_pack("{s:I, s:s%, s:s}", "index", (json_int_t)k, "text",
                                  c->text.n ? (const char *)c->text.p : "", c->text.n, "finish_reason",
                                  finish_name(c->finish));
            if (o && c->budget_stop) json_object_set_new(o, "stop_reason", json_string("budget"));
            if (o && l->reasons &&
                (json_object_set_new(o, "reasoning",
                                     json_stringn(c->reasoning.n ? (const char *)c->reasoning.p : "", c->reasoning.n)) ||
                 json_object_set_new(o, "reasoning_tokens", json_integer(c->n_reasoning_tokens)))) {
                json_decref(o);
                o = NULL;
            }
            if (o && c->finish == SV_FINISH_STOP && c->stop_index >= 0 && (uint32_t)c->stop_index < l->n_stop)
                json_object_set_new(o, "stop_reason", json_string(l->stop[c->stop_index]));
            if (o && l->logprobs) {
                json_t *lp = logprobs_json(v, c);
                if (!lp || json_object_set_new(o, "logprobs", lp)) {
                    json_decref(o);
                    o = NULL;
                }
            }
            if (!o || json_array_append_new(outs, o)) {
                json_decref(outs);
                outs = NULL;
            }
        }
        root = outs ? json_pack("{s:I, s:o, s:I, s:I, s:I}", "index", (json_int_t)idx, "outputs", outs,
                                "prompt_tokens", (json_int_t)l->prompt.n, "completion_tokens",
                                (json_int_t)completion, "cached_tokens",
                                /* after a preemption the engine's count can include generated
                                   tokens it took back from the prefix cache */
                                (json_int_t)(l->n_cached < l->prompt.n ? l->n_cached : l->prompt.n))
                    : NULL;
    }
    char *s = root ? json_dumps(root, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
    json_decref(root);
    if (!s) return -1;
    puts(s);
    free(s);
    return 0;
}

/* The engine's counters as one JSON object. */
static sv_status write_stats(const char *path, const sv_engine_stats_t *es, const sv_backend_t *be,
                             sv_error_t *err) {
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "steps",
                          (json_int_t)es->steps, "rows", (json_int_t)es->rows, "cached_tokens",
                          (json_int_t)es->cached_tokens, "sampled", (json_int_t)es->sampled, "dev_sampled",
                          (json_int_t)es->dev_sampled, "forced",
                          (json_int_t)es->forced, "rollbacks", (json_int_t)es->rollbacks, "preemptions",
                          (json_int_t)es->preemptions, "running", (json_int_t)es->running, "waiting",
                          (json_int_t)es->waiting, "max_running", (json_int_t)es->max_running, "prefix_queries",
                          (json_int_t)es->prefix_queries, "prefetched", (json_int_t)es->prefetched, "mask_waits",
                          (json_int_t)es->mask_waits);
    if (!o) return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    json_t *t = json_pack("{s:I, s:I, s:I, s:I, s:I}", "step_ns", (json_int_t)es->step_ns, "forward_ns",
                          (json_int_t)es->forward_ns, "hook_ns", (json_int_t)es->hook_ns, "mask_ns",
                          (json_int_t)es->mask_ns, "sample_ns", (json_int_t)es->sample_ns);
    if (!t || json_object_update(o, t)) {
        json_decref(t);
        json_decref(o);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    json_decref(t);
    uint64_t opened, replayed, captured; /* on CUDA: the step graphs (src/backend/cuda.h) */
    if (sv_cli_graph_stats(be, &opened, &replayed, &captured) &&
        (json_object_set_new(o, "graph_steps", json_integer((json_int_t)opened)) ||
         json_object_set_new(o, "graph_replays", json_integer((json_int_t)replayed)) ||
         json_object_set_new(o, "graph_captures", json_integer((json_int_t)captured)))) {
        json_decref(o);
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    }
    int rc = json_dump_file(o, path, JSON_PRESERVE_ORDER | JSON_COMPACT);
    json_decref(o);
    if (rc) return sv_error_set(err, SV_ERR_IO, -1, "--stats: cannot write %s", path);
    return SV_OK;
}

static int parse_opts(int argc, char **argv, batch_opts_t *o) {
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'},
        {"model", required_argument, 0, 'm'},
        {"batch", required_argument, 0, OPT_BATCH},
        {"max-num-seqs", required_argument, 0, OPT_MAX_NUM_SEQS},
        {"threads", required_argument, 0, OPT_THREADS},
        {"ws", required_argument, 0, OPT_WS},
        {"allow-unknown-formats", no_argument, 0, OPT_UNKNOWN_FORMATS},
        {"kv-memory-mb", required_argument, 0, OPT_KV_MB},
        {"gpu-memory-utilization", required_argument, 0, OPT_GPU_UTIL},
        {"no-jump-forward", no_argument, 0, OPT_NO_JF},
        {"stats", required_argument, 0, OPT_STATS},
        {"max-num-batched-tokens", required_argument, 0, OPT_MAX_BATCHED},
        {"no-prefix-cache", no_argument, 0, OPT_NO_PREFIX},
        {"prefetch-threads", required_argument, 0, OPT_PREFETCH},
        {"device", required_argument, 0, OPT_DEVICE},
        {"cpu-kernels", required_argument, 0, OPT_CPU_KERNELS},
        {"cuda-fp32", no_argument, 0, OPT_CUDA_FP32},
        {"host-sampling", no_argument, 0, OPT_HOST_SAMPLING},
        {"reasoning-parser", required_argument, 0, OPT_REASONING_PARSER},
        {"max-reasoning-tokens", required_argument, 0, OPT_MAX_REASONING},
        {0, 0, 0, 0},
    };
    const char *verb = "generate";
    unsigned long long v;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":hm:", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': fputs(usage_text, stdout); return -1;
        case 'm': o->model = optarg; break;
        case OPT_BATCH: o->file = optarg; break;
        case OPT_UNKNOWN_FORMATS: o->unknown_formats = true; break;
        case OPT_NO_JF: o->no_jump_forward = true; break;
        case OPT_STATS: o->stats = optarg; break;
        case OPT_NO_PREFIX: o->no_prefix_cache = true; break;
        case OPT_DEVICE:
            if (!sv_cli_device_valid(optarg))
                return sv_cli_usage_error(verb, "invalid value '%s' for --device (cpu, cuda, cuda:N, auto)",
                                          optarg);
            o->device = optarg;
            break;
        case OPT_CUDA_FP32:
            o->cuda_fp32 = true;
            break;
        case OPT_HOST_SAMPLING:
            o->host_sampling = true;
            break;
        case OPT_REASONING_PARSER: {
            sv_error_t rerr;
            if (sv_reasoning_parser_named(optarg, &o->reasoning, &rerr)) return sv_cli_usage_error(verb, "%s", rerr.message);
            break;
        }
        case OPT_MAX_REASONING:
            if (sv_cli_parse_u64(optarg, BATCH_MAX_TOKENS, &v))
                return sv_cli_usage_error(verb, "invalid value '%s' for --max-reasoning-tokens", optarg);
            o->max_reasoning = (uint32_t)v;
            o->max_reasoning_given = true;
            break;
        case OPT_CPU_KERNELS:
            if (!sv_cli_parse_cpu_kernels(optarg, &o->kernels))
                return sv_cli_usage_error(verb, "invalid value '%s' for --cpu-kernels (ref, int8)", optarg);
            break;
        case OPT_MAX_BATCHED:
            if (sv_cli_parse_u64(optarg, 1u << 20, &v) || !v)
                return sv_cli_usage_error(verb, "invalid value '%s' for --max-num-batched-tokens", optarg);
            o->max_batched = (uint32_t)v;
            break;
        case OPT_PREFETCH:
            if (sv_cli_parse_u64(optarg, SV_PREFETCH_MAX_THREADS, &v))
                return sv_cli_usage_error(verb, "invalid value '%s' for --prefetch-threads", optarg);
            o->prefetch_threads = (uint32_t)v;
            o->prefetch_given = true;
            break;
        case OPT_MAX_NUM_SEQS:
            if (sv_cli_parse_u64(optarg, 1024, &v) || !v)
                return sv_cli_usage_error(verb, "invalid value '%s' for --max-num-seqs", optarg);
            o->max_num_seqs = (uint32_t)v;
            break;
        case OPT_THREADS:
            if (sv_cli_parse_u64(optarg, SV_CPU_MAX_THREADS, &v) || !v)
                return sv_cli_usage_error(verb, "invalid value '%s' for --threads", optarg);
            o->threads = (int)v;
            break;
        case OPT_KV_MB:
            if (sv_cli_parse_u64(optarg, 1u << 20, &v) || !v)
                return sv_cli_usage_error(verb, "invalid value '%s' for --kv-memory-mb", optarg);
            o->kv_mb = v;
            break;
        case OPT_GPU_UTIL:
            if (!sv_cli_parse_utilization(optarg, &o->gpu_util))
                return sv_cli_usage_error(verb, "invalid value '%s' for --gpu-memory-utilization (0 < F <= 1)", optarg);
            break;
        case OPT_WS:
            if (!strcmp(optarg, "canonical")) o->ws = SV_WS_CANONICAL;
            else if (!strcmp(optarg, "compact")) o->ws = SV_WS_COMPACT;
            else if (!strcmp(optarg, "flexible")) o->ws = SV_WS_FLEXIBLE;
            else return sv_cli_usage_error(verb, "invalid value '%s' for --ws", optarg);
            break;
        case ':': return sv_cli_usage_error(verb, "option '%s' needs a value", argv[optind - 1]);
        default:
            return sv_cli_usage_error(verb, "option '%s' is not one of --batch's (--batch FILE --help lists them)",
                                      argv[optind - 1]);
        }
    }
    if (optind < argc) return sv_cli_usage_error(verb, "unexpected argument '%s'", argv[optind]);
    if (!o->model) return sv_cli_usage_error(verb, "-m MODEL is required");
    if (!o->file) return sv_cli_usage_error(verb, "--batch needs a FILE");
    if (o->max_reasoning_given && o->reasoning == SV_REASONING_NONE)
        return sv_cli_usage_error(verb, "--max-reasoning-tokens needs --reasoning-parser");
    if (o->threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = n < 1 ? 1 : n > SV_CPU_MAX_THREADS ? SV_CPU_MAX_THREADS : (int)n;
    }
    return 0;
}

int sv_cmd_generate_batch(int argc, char **argv) {
    batch_opts_t o = {.kernels = SV_CPU_KERNELS_INT8, .max_num_seqs = 8, .ws = SV_WS_CANONICAL, .max_batched = 256,
                      .prefetch_threads = 1, .max_reasoning = UINT32_MAX};
    int prc = parse_opts(argc, argv, &o);
    if (prc) return prc < 0 ? SV_EXIT_OK : prc;

    int rc = SV_EXIT_RUNTIME;
    sv_error_t err;
    sv_error_clear(&err);
    sv_status st = SV_OK;
    sv_backend_t *be = NULL;
    sv_llama_t *model = NULL;
    sv_tokens_t *tok = NULL;
    sv_engine_t *eng = NULL;
    sv_engine_dsampler_t *dsampler = NULL; /* after eng, before be */
    sv_constraint_cache_t *cache = NULL;
    line_t *lines = NULL;
    size_t *order = NULL;
    size_t n_lines = 0;
    sv_chat_template_t tmpl;
    sv_reasoning_t rs = {0};
    char *input = NULL;
    size_t input_len = 0;

    if (!(input = sv_cli_read_file(o.file, &input_len, &err))) { st = err.code; goto fail; }
    size_t cap_lines = 0;
    for (size_t i = 0; i < input_len; i++) cap_lines += input[i] == '\n';
    cap_lines++;
    if (cap_lines > BATCH_MAX_LINES) cap_lines = BATCH_MAX_LINES + 1;
    lines = calloc(cap_lines, sizeof *lines);
    order = calloc(cap_lines, sizeof *order);
    if (!lines || !order) { st = sv_error_set(&err, SV_ERR_NOMEM, -1, "out of memory"); goto fail; }

    if ((st = sv_cli_backend_create(o.device, o.threads, o.kernels, o.cuda_fp32, &be, &err)) || (st = sv_llama_load(o.model, be, &model, &err)))
        goto fail;
    if (!o.prefetch_given) o.prefetch_threads = sv_cli_default_prefetch_threads(be);
    const sv_llama_config_t *cfg = sv_llama_config(model);
    if ((st = sv_tokens_load_model(o.model, cfg->vocab_size, &tok, &err))) goto fail;
    const sv_vocab_t *v = sv_tokens_vocab(tok);
    if (sv_vocab_size(v) > (uint32_t)cfg->vocab_size) {
        st = sv_error_set(&err, SV_ERR_SYNTAX, -1, "the tokenizer has %u tokens but the model's output has %d rows",
                          sv_vocab_size(v), cfg->vocab_size);
        goto fail;
    }
    /* unbounded: every entry is held by its lines until the end */
    if ((st = sv_ccache_create(SIZE_MAX, &cache, &err))) goto fail;
    if (o.reasoning != SV_REASONING_NONE && (st = sv_reasoning_init(o.reasoning, cache, tok, &rs, &err))) goto fail;
    prep_t p = {.o = &o, .tok = tok, .v = v, .n_vocab = cfg->vocab_size,
                .ctx = cfg->max_ctx < BATCH_CTX_CAP ? cfg->max_ctx : BATCH_CTX_CAP, .cache = cache};
    sv_error_t terr;
    sv_error_clear(&terr);
    if (!sv_chat_template_load(o.model, &tmpl, &terr)) p.tmpl = &tmpl;
    else p.tmpl_error = terr.message;

    /* Parse, encode and compile every line before running any. */
    for (char *s = input, *end = input + input_len; s < end;) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        char *next = nl ? nl + 1 : end;
        size_t k = 0;
        while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r')) k++;
        if (k < n) {
            if (n_lines == BATCH_MAX_LINES) {
                st = sv_error_set(&err, SV_ERR_BUDGET, -1, "%s has more than %d requests", o.file, BATCH_MAX_LINES);
                goto fail;
            }
            prepare_line(&p, s, n, n_lines, &lines[n_lines]);
            n_lines++;
        }
        s = next;
    }

    /* The engine's context: the longest request, so that the KV pool need
     * hold only that one alone (each request's budget is then what the
     * sequential path gives it). */
    uint32_t max_ctx = 0;
    size_t n_ok = 0;
    uint64_t prompt_tokens = 0;
    for (size_t i = 0; i < n_lines; i++)
        if (!lines[i].error) {
            uint32_t need = (uint32_t)lines[i].prompt.n + lines[i].budget;
            if (need > max_ctx) max_ctx = need;
            n_ok++;
        }
    uint64_t t0 = sv_now_ns();
    sv_engine_stats_t es = {0};
    size_t n_submitted = 0, n_done = 0;
    if (n_ok) {
        sv_engine_config_t ec;
        sv_engine_config_default(&ec);
        ec.max_num_seqs = o.max_num_seqs;
        ec.max_ctx = max_ctx;
        if (!o.host_sampling && (st = sv_cli_dsampler_create(be, cfg->vocab_size, &dsampler, &err)))
            goto fail;
        ec.dsampler = dsampler;
        uint64_t kvb = 0;
        if ((st = sv_cli_kv_bytes(be, o.kv_mb, o.gpu_util, &kvb, &err)))
            goto fail;
        ec.kv_bytes = kvb;
        ec.jump_forward = !o.no_jump_forward;
        ec.prefix_cache = !o.no_prefix_cache;
        ec.max_num_batched_tokens = o.max_batched;
        ec.prefetch_threads = o.prefetch_threads;
        sv_engine_vocab_t ev = {.set = sv_tokens_set(tok), .tok = sv_tokens_iface(tok), .vocab = v};
        if ((st = sv_engine_create(model, &ev, &ec, &eng, &err))) goto fail;

        for (size_t i = 0; i < n_lines; i++) {
            line_t *l = &lines[i];
            if (l->error) continue;
            /* Room in the waiting queue: step until some request starts. */
            for (;;) {
                sv_engine_stats(eng, &es);
                if (es.waiting < ec.max_queue) break;
                if ((st = sv_engine_step(eng, &err)) || (st = drain(eng, lines, order, n_submitted, &n_done, &err)))
                    goto fail;
            }
            sv_engine_request_t rq = {.prompt = l->prompt.v, .n_prompt = (uint32_t)l->prompt.n, .sampling = l->sp,
                                      .constraint = l->ix, .max_tokens = l->budget,
                                      .stop = (const char *const *)l->stop, .n_stop = l->n_stop, .n = l->n,
                                      .logprobs = l->logprobs};
            sv_engine_reasoning_t ers;
            if (l->reasons) {
                sv_reasoning_engine(&rs, l->max_reasoning, &ers);
                rq.reasoning = &ers;
            }
            sv_error_t serr;
            sv_error_clear(&serr);
            if (sv_engine_submit(eng, &rq, &l->id, &serr)) {
                line_status_error(l, &serr); /* e.g. a constraint that cannot fit max_tokens */
                l->id = 0;
                continue;
            }
            order[n_submitted++] = i;
            /* Outputs of a constraint complete at submit are queued already. */
            if ((st = drain(eng, lines, order, n_submitted, &n_done, &err))) goto fail;
        }
        while (sv_engine_has_work(eng)) {
            if ((st = sv_engine_step(eng, &err)) || (st = drain(eng, lines, order, n_submitted, &n_done, &err)))
                goto fail;
        }
        if ((st = drain(eng, lines, order, n_submitted, &n_done, &err))) goto fail;
        if (n_done != n_submitted) {
            st = sv_error_set(&err, SV_ERR_INTERNAL, -1, "internal: %zu of %zu requests finished", n_done, n_submitted);
            goto fail;
        }
        sv_engine_stats(eng, &es);
    }
    uint64_t t1 = sv_now_ns();

    uint64_t completion_tokens = 0;
    size_t n_err = 0;
    for (size_t i = 0; i < n_lines; i++) {
        line_t *l = &lines[i];
        if (l->error) n_err++;
        else {
            prompt_tokens += l->prompt.n;
            for (uint32_t k = 0; k < l->n; k++) completion_tokens += l->ch[k].out.n;
        }
        if (print_line(i, l, v)) { st = sv_error_set(&err, SV_ERR_NOMEM, -1, "out of memory"); goto fail; }
    }
    fflush(stdout);
    if (o.stats && (st = write_stats(o.stats, &es, be, &err))) goto fail;
    double secs = (double)(t1 - t0) / 1e9;
    fprintf(stderr,
            "sieve generate --batch: %zu requests (%zu ran, %zu errors); %llu prompt + %llu completion tokens in "
            "%.2f s (%.1f tokens/s); %llu steps, at most %u running, %llu preemptions, %llu cached tokens\n",
            n_lines, n_submitted, n_err, (unsigned long long)prompt_tokens, (unsigned long long)completion_tokens, secs,
            secs > 0 ? (double)completion_tokens / secs : 0.0, (unsigned long long)es.steps, es.max_running,
            (unsigned long long)es.preemptions, (unsigned long long)es.cached_tokens);
    rc = SV_EXIT_OK;
    goto done;
fail:
    fprintf(stderr, "sieve generate: %s\n", err.message[0] ? err.message : sv_status_name(st));
    rc = st == SV_ERR_ARG || st == SV_ERR_BUDGET ? SV_EXIT_USAGE : SV_EXIT_RUNTIME;
done:
    sv_engine_destroy(eng); /* before the token indexes its requests borrow */
    sv_cli_dsampler_destroy(dsampler);
    for (size_t i = 0; i < n_lines; i++) {
        line_t *l = &lines[i];
        json_decref(l->error);
        sv_ids_free(&l->prompt);
        for (uint32_t k = 0; l->ch && k < l->n; k++) {
            sv_ids_free(&l->ch[k].out);
            sv_bytes_free(&l->ch[k].text);
            sv_bytes_free(&l->ch[k].reasoning);
            free(l->ch[k].lp);
        }
        free(l->ch);
        for (uint32_t k = 0; k < l->n_stop; k++) free(l->stop[k]);
        if (l->c) sv_constraint_release(cache, l->c); /* after the engine: its requests borrowed the index */
    }
    if (rs.think) sv_reasoning_release(&rs, cache); /* after the engine: its requests borrowed the index */
    sv_ccache_destroy(cache);
    free(lines);
    free(order);
    free(input);
    sv_tokens_destroy(tok);
    sv_llama_destroy(model);
    sv_backend_destroy(be);
    return rc;
}
