/* cmd_generate.c — `sieve generate`: one completion on the CPU or a GPU (--device), streamed.
 *
 * The sequential reference of the engine: load a model (GGUF, or an HF
 * directory with config.json, model.safetensors and tokenizer.json), encode
 * the prompt (through the model's chat template with --chat), then decode
 * one token per forward step. With --schema or --regex the matcher masks
 * every step and takes forced paths as multi-token steps (jump-forward);
 * its budget rule keeps the output complete within --max-tokens.
 *
 * Output: the completion's text on stdout as it is produced (whole UTF-8
 * characters only), or with --print-ids the generated ids, comma-separated,
 * on one line. The finish reason and token counts go to stderr. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsm/matcher.h"
#include "fsm/schema.h"
#include "src/backend/cpu.h"
#include "src/chat/chat.h"
#include "src/constraint/constraint_cache.h"
#include "src/engine/sample.h"
#include "src/constraint/tokens.h"
#include "src/model/llama.h"
#include "src/tokenizer/detok.h"
#include "util/clock.h"
#include "cli.h"
#include "device.h"
#include "generate.h"
#include "verbs.h"

enum {
    OPT_CHAT = 256, OPT_SYSTEM, OPT_MAX_TOKENS, OPT_TEMPERATURE, OPT_TOP_P, OPT_TOP_K, OPT_MIN_P, OPT_SEED,
    OPT_PROMPT_IDS, OPT_PRINT_IDS, OPT_SCHEMA, OPT_REGEX, OPT_WS, OPT_THREADS, OPT_CTX, OPT_UNKNOWN_FORMATS,
    OPT_PRINT_PROMPT, OPT_DEVICE, OPT_CPU_KERNELS, OPT_CUDA_FP32, OPT_GRAMMAR,
};

static const char *const usage_text =
    "Usage: sieve generate -m MODEL (-p PROMPT | --prompt-ids 1,2,3) [--chat] [--system TEXT]\n"
    "                      [--max-tokens 256] [--temperature 1] [--top-p 1] [--top-k 0] [--min-p 0]\n"
    "                      [--seed S] [--schema FILE | --regex PATTERN | --grammar FILE] [--ws MODE]\n"
    "                      [--allow-unknown-formats] [--threads N] [--ctx N] [--print-ids]\n"
    "                      [--print-prompt] [--device cpu|cuda|auto] [--cuda-fp32] [--cpu-kernels ref|int8]\n"
    "       sieve generate --batch FILE.jsonl -m MODEL [...]   (--batch FILE --help: its options)\n"
    "\n"
    "Generates one completion and streams it to stdout. MODEL is a GGUF\n"
    "file or a Hugging Face directory (config.json, model.safetensors, tokenizer.json,\n"
    "and tokenizer_config.json for --chat).\n"
    "  --chat            PROMPT is a user message, rendered with the model's chat\n"
    "                    template (ChatML or Llama 3); --system adds a system message.\n"
    "  --prompt-ids      token ids instead of text (no BOS is added).\n"
    "  --print-ids       print the generated ids, comma-separated, instead of text.\n"
    "  --print-prompt    with --chat: print the rendered prompt and exit (the model's\n"
    "                    weights are not loaded).\n"
    "  --schema FILE     constrain the output to a JSON Schema (FILE may be -);\n"
    "  --regex PATTERN   or to a regular expression,\n"
    "  --grammar FILE    or to a grammar (GBNF or Lark, docs/grammar.md). The output is\n"
    "                    then always complete and valid, within --max-tokens.\n"
    "  --ws MODE         whitespace of constrained JSON: canonical (default), compact,\n"
    "                    flexible.\n"
    "  --temperature 0   is greedy decoding. --seed makes sampling reproducible\n"
    "                    (default: a random seed).\n"
    "  --threads N       CPU threads (default: the online CPUs). --ctx N: the context\n"
    "                    (default: the model's, at most 4096).\n"
    SV_CLI_DEVICE_HELP
    SV_CLI_CPU_KERNELS_HELP
    "The finish reason (stop, length) and token counts are printed to stderr.\n";

typedef struct {
    const char *model, *prompt, *system, *prompt_ids, *schema, *regex, *grammar;
    bool chat, print_ids, unknown_formats, print_prompt;
    long max_tokens;
    sv_ws_mode ws;
    sv_sample_params_t sp;
    bool have_seed;
    int threads;
    long ctx;
    const char *device; /* --device; NULL: auto */
    sv_cpu_kernels kernels; /* --cpu-kernels */
    bool cuda_fp32;         /* --cuda-fp32 */
} gen_opts_t;

static int parse_float(const char *s, float *out) {
    char *e;
    double v = strtod(s, &e);
    if (e == s || *e) return -1;
    *out = (float)v;
    return 0;
}


static int parse_ids(const char *s, sv_ids_t *ids) {
    while (*s) {
        char *e;
        long v = strtol(s, &e, 10);
        if (e == s || v < 0 || v > INT32_MAX) return -1;
        if (sv_ids_push(ids, (int32_t)v)) return -1;
        s = e;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return ids->n ? 0 : -1;
}

/* The generation state: model, sequence, sampler, matcher, output. */
typedef struct {
    sv_llama_t *model;
    sv_llama_state_t *seq;
    int32_t vocab;
    float *logits;          /* (vocab) the last forward's last row */
    int32_t pos;            /* positions cached */
    sv_sampler_t *sampler;
    sv_matcher_t *matcher;  /* NULL when unconstrained */
    const sv_vocab_t *v;
    sv_ids_t out;           /* generated ids */
    sv_bytes_t text;        /* their bytes */
    size_t pushed;          /* bytes of text handed to the detokenizer */
    sv_detok_t *detok;
    bool print_text;
} gen_t;

static sv_status step(gen_t *g, const int32_t *ids, int32_t n, sv_error_t *err) {
    int32_t posv[256];
    for (int32_t done = 0; done < n;) {
        int32_t k = n - done < 256 ? n - done : 256;
        for (int32_t i = 0; i < k; i++) posv[i] = g->pos + i;
        sv_status st = sv_llama_forward(g->model, g->seq, ids + done, posv, k, SV_LLAMA_LOGITS_LAST, g->logits, err);
        if (st) return st;
        g->pos += k;
        done += k;
    }
    return SV_OK;
}

/* Appends an output token's bytes. */
static sv_status emit(gen_t *g, int32_t id, sv_error_t *err) {
    size_t n = 0;
    const uint8_t *b = sv_vocab_bytes(g->v, id, &n);
    if (sv_ids_push(&g->out, id) || (n && sv_bytes_append(&g->text, b, n)))
        return sv_error_set(err, SV_ERR_NOMEM, -1, "out of memory");
    return SV_OK;
}

/* Streams the text past what was printed; the text only ever grows past
 * it (a rolled-back token comes back as the start of the forced tokens). */
static sv_status flush_text(gen_t *g, bool final, sv_error_t *err) {
    if (!g->print_text) return SV_OK;
    size_t maxb = sv_vocab_max_token_bytes(g->v);
    if (maxb == 0) maxb = 1;
    while (g->pushed < g->text.n) {
        size_t k = g->text.n - g->pushed < maxb ? g->text.n - g->pushed : maxb;
        const char *t;
        size_t tn;
        sv_status st = sv_detok_push_bytes(g->detok, g->text.p + g->pushed, k, &t, &tn, err);
        if (st) return st;
        fwrite(t, 1, tn, stdout);
        g->pushed += k;
    }
    if (final) {
        const char *t;
        size_t tn;
        sv_detok_flush(g->detok, &t, &tn);
        fwrite(t, 1, tn, stdout);
    }
    fflush(stdout);
    return SV_OK;
}

int sv_cmd_generate(int argc, char **argv) {
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'},
        {"model", required_argument, 0, 'm'},
        {"prompt", required_argument, 0, 'p'},
        {"chat", no_argument, 0, OPT_CHAT},
        {"system", required_argument, 0, OPT_SYSTEM},
        {"max-tokens", required_argument, 0, OPT_MAX_TOKENS},
        {"temperature", required_argument, 0, OPT_TEMPERATURE},
        {"top-p", required_argument, 0, OPT_TOP_P},
        {"top-k", required_argument, 0, OPT_TOP_K},
        {"min-p", required_argument, 0, OPT_MIN_P},
        {"seed", required_argument, 0, OPT_SEED},
        {"prompt-ids", required_argument, 0, OPT_PROMPT_IDS},
        {"print-ids", no_argument, 0, OPT_PRINT_IDS},
        {"print-prompt", no_argument, 0, OPT_PRINT_PROMPT},
        {"schema", required_argument, 0, OPT_SCHEMA},
        {"regex", required_argument, 0, OPT_REGEX},
        {"grammar", required_argument, 0, OPT_GRAMMAR},
        {"ws", required_argument, 0, OPT_WS},
        {"allow-unknown-formats", no_argument, 0, OPT_UNKNOWN_FORMATS},
        {"threads", required_argument, 0, OPT_THREADS},
        {"ctx", required_argument, 0, OPT_CTX},
        {"device", required_argument, 0, OPT_DEVICE},
        {"cpu-kernels", required_argument, 0, OPT_CPU_KERNELS},
        {"cuda-fp32", no_argument, 0, OPT_CUDA_FP32},
        {0, 0, 0, 0},
    };
    const char *verb = "generate";
    /* --batch FILE runs many prompts through the engine: its own options
     * (cmd_generate_batch.c). */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--batch") || !strncmp(argv[i], "--batch=", 8)) return sv_cmd_generate_batch(argc, argv);
    gen_opts_t o = {.max_tokens = 256, .ws = SV_WS_CANONICAL, .sp = sv_sample_params_default(),
                    .kernels = SV_CPU_KERNELS_INT8};
    unsigned long long v;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":hm:p:", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': fputs(usage_text, stdout); return SV_EXIT_OK;
        case 'm': o.model = optarg; break;
        case 'p': o.prompt = optarg; break;
        case OPT_CHAT: o.chat = true; break;
        case OPT_SYSTEM: o.system = optarg; break;
        case OPT_PROMPT_IDS: o.prompt_ids = optarg; break;
        case OPT_PRINT_IDS: o.print_ids = true; break;
        case OPT_PRINT_PROMPT: o.print_prompt = true; break;
        case OPT_SCHEMA: o.schema = optarg; break;
        case OPT_REGEX: o.regex = optarg; break;
        case OPT_GRAMMAR: o.grammar = optarg; break;
        case OPT_UNKNOWN_FORMATS: o.unknown_formats = true; break;
        case OPT_DEVICE:
            if (!sv_cli_device_valid(optarg))
                return sv_cli_usage_error(verb, "invalid value '%s' for --device (cpu, cuda, cuda:N, auto)",
                                          optarg);
            o.device = optarg;
            break;
        case OPT_CUDA_FP32:
            o.cuda_fp32 = true;
            break;
        case OPT_CPU_KERNELS:
            if (!sv_cli_parse_cpu_kernels(optarg, &o.kernels))
                return sv_cli_usage_error(verb, "invalid value '%s' for --cpu-kernels (ref, int8)", optarg);
            break;
        case OPT_MAX_TOKENS:
            if (sv_cli_parse_u64(optarg, 1u << 20, &v) || !v)
                return sv_cli_usage_error(verb, "invalid value '%s' for --max-tokens", optarg);
            o.max_tokens = (long)v;
            break;
        case OPT_TEMPERATURE:
            if (parse_float(optarg, &o.sp.temperature))
                return sv_cli_usage_error(verb, "invalid value '%s' for --temperature", optarg);
            break;
        case OPT_TOP_P:
            if (parse_float(optarg, &o.sp.top_p)) return sv_cli_usage_error(verb, "invalid value '%s' for --top-p", optarg);
            break;
        case OPT_MIN_P:
            if (parse_float(optarg, &o.sp.min_p)) return sv_cli_usage_error(verb, "invalid value '%s' for --min-p", optarg);
            break;
        case OPT_TOP_K:
            if (sv_cli_parse_u64(optarg, INT32_MAX, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --top-k", optarg);
            o.sp.top_k = (int32_t)v;
            break;
        case OPT_SEED:
            if (sv_cli_parse_u64(optarg, UINT64_MAX, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --seed", optarg);
            o.sp.seed = v;
            o.have_seed = true;
            break;
        case OPT_WS:
            if (!strcmp(optarg, "canonical")) o.ws = SV_WS_CANONICAL;
            else if (!strcmp(optarg, "compact")) o.ws = SV_WS_COMPACT;
            else if (!strcmp(optarg, "flexible")) o.ws = SV_WS_FLEXIBLE;
            else return sv_cli_usage_error(verb, "invalid value '%s' for --ws", optarg);
            break;
        case OPT_THREADS:
            if (sv_cli_parse_u64(optarg, SV_CPU_MAX_THREADS, &v) || !v)
                return sv_cli_usage_error(verb, "invalid value '%s' for --threads", optarg);
            o.threads = (int)v;
            break;
        case OPT_CTX:
            if (sv_cli_parse_u64(optarg, 1u << 24, &v) || v < 2) return sv_cli_usage_error(verb, "invalid value '%s' for --ctx", optarg);
            o.ctx = (long)v;
            break;
        case ':': return sv_cli_usage_error(verb, "option '%s' needs a value", argv[optind - 1]);
        default: return sv_cli_usage_error(verb, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return sv_cli_usage_error(verb, "unexpected argument '%s'", argv[optind]);
    if (!o.model) return sv_cli_usage_error(verb, "-m MODEL is required");
    if (!o.prompt == !o.prompt_ids) return sv_cli_usage_error(verb, "give exactly one of -p PROMPT and --prompt-ids");
    if (o.prompt_ids && o.chat) return sv_cli_usage_error(verb, "--chat needs a text prompt (-p)");
    if (o.system && !o.chat) return sv_cli_usage_error(verb, "--system needs --chat");
    if (!!o.schema + !!o.regex + !!o.grammar > 1)
        return sv_cli_usage_error(verb, "give at most one of --schema, --regex and --grammar");
    if (o.print_prompt && !o.chat) return sv_cli_usage_error(verb, "--print-prompt needs --chat");
    if (o.print_prompt) {
        sv_error_t e;
        sv_chat_template_t t;
        sv_bytes_t b = {0};
        sv_chat_msg_t msgs[2];
        size_t nm = 0;
        if (o.system) msgs[nm++] = (sv_chat_msg_t){"system", o.system};
        msgs[nm++] = (sv_chat_msg_t){"user", o.prompt};
        sv_status s2 = sv_chat_template_load(o.model, &t, &e);
        if (!s2) s2 = sv_chat_render(&t, msgs, nm, &b, &e);
        if (s2) {
            fprintf(stderr, "sieve generate: %s\n", e.message);
            sv_bytes_free(&b);
            return SV_EXIT_RUNTIME;
        }
        fwrite(b.p, 1, b.n, stdout);
        sv_bytes_free(&b);
        return SV_EXIT_OK;
    }
    if (!o.have_seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        o.sp.seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
    }
    if (o.threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o.threads = n < 1 ? 1 : n > SV_CPU_MAX_THREADS ? SV_CPU_MAX_THREADS : (int)n;
    }

    int rc = SV_EXIT_RUNTIME;
    sv_error_t err;
    sv_error_clear(&err);
    sv_backend_t *be = NULL;
    sv_tokens_t *tok = NULL;
    sv_constraint_cache_t *cache = NULL;
    sv_constraint_t *constraint = NULL;
    sv_ids_t prompt = {0};
    sv_bytes_t ptext = {0};
    gen_t g = {.print_text = !o.print_ids};
    sv_status st = sv_cli_backend_create(o.device, o.threads, o.kernels, o.cuda_fp32, &be, &err);
    if (!st) st = sv_llama_load(o.model, be, &g.model, &err);
    if (st) goto fail;
    const sv_llama_config_t *cfg = sv_llama_config(g.model);
    g.vocab = cfg->vocab_size;

    if ((st = sv_tokens_load_model(o.model, g.vocab, &tok, &err))) goto fail;
    g.v = sv_tokens_vocab(tok);
    if (sv_vocab_size(g.v) > (uint32_t)g.vocab) {
        st = sv_error_set(&err, SV_ERR_SYNTAX, -1, "the tokenizer has %u tokens but the model's output has %d rows",
                          sv_vocab_size(g.v), g.vocab);
        goto fail;
    }

    /* The prompt. */
    if (o.prompt_ids) {
        if (parse_ids(o.prompt_ids, &prompt)) {
            sv_ids_free(&prompt);
            sv_backend_destroy(be);
            return sv_cli_usage_error(verb, "invalid --prompt-ids '%s' (non-negative integers, comma-separated)",
                                      o.prompt_ids);
        }
    } else {
        const char *text = o.prompt;
        size_t tlen = strlen(text);
        if (o.chat) {
            sv_chat_template_t t;
            if ((st = sv_chat_template_load(o.model, &t, &err))) goto fail;
            sv_chat_msg_t msgs[2];
            size_t nm = 0;
            if (o.system) msgs[nm++] = (sv_chat_msg_t){"system", o.system};
            msgs[nm++] = (sv_chat_msg_t){"user", o.prompt};
            if ((st = sv_chat_render(&t, msgs, nm, &ptext, &err))) goto fail;
            text = (const char *)ptext.p;
            tlen = ptext.n;
        } else if (sv_vocab_add_bos(g.v) && sv_vocab_bos(g.v) >= 0 && sv_ids_push(&prompt, sv_vocab_bos(g.v))) {
            st = sv_error_set(&err, SV_ERR_NOMEM, -1, "out of memory");
            goto fail;
        }
        if ((st = sv_tokens_encode(tok, text, tlen, &prompt, &err))) goto fail;
    }
    for (size_t i = 0; i < prompt.n; i++)
        if (prompt.v[i] < 0 || prompt.v[i] >= g.vocab) {
            st = sv_error_set(&err, SV_ERR_ARG, -1, "prompt id %d is outside the vocabulary (%d)", prompt.v[i], g.vocab);
            goto fail;
        }
    long ctx = o.ctx ? o.ctx : (cfg->max_ctx < 4096 ? cfg->max_ctx : 4096);
    if (ctx > cfg->max_ctx) ctx = cfg->max_ctx;
    if ((long)prompt.n >= ctx) {
        st = sv_error_set(&err, SV_ERR_BUDGET, -1, "the prompt has %zu tokens; the context is %ld", prompt.n, ctx);
        goto fail;
    }
    long budget = ctx - (long)prompt.n < o.max_tokens ? ctx - (long)prompt.n : o.max_tokens;

    /* The constraint, through a cache of its own as every caller's
     * (src/constraint/constraint_cache.h). */
    if (o.schema || o.regex || o.grammar) {
        const char *file = o.schema ? o.schema : o.grammar;
        size_t len = 0;
        char *text = file ? sv_cli_read_file(file, &len, &err) : NULL;
        if (file && !text) { st = err.code; goto fail; }
        sv_schema_opts_t so;
        sv_schema_opts_default(&so);
        so.ws = o.ws;
        so.unknown_formats_ok = o.unknown_formats;
        sv_constraint_spec_t spec = {.kind = o.schema    ? SV_CONSTRAINT_SCHEMA
                                             : o.grammar ? SV_CONSTRAINT_GRAMMAR
                                                         : SV_CONSTRAINT_REGEX,
                                     .text = file ? text : o.regex, .len = file ? len : strlen(o.regex),
                                     .opts = &so, .tokens = sv_tokens_set(tok)};
        st = sv_ccache_create(SIZE_MAX, &cache, &err);
        if (!st) st = sv_constraint_get(cache, &spec, &constraint, NULL, &err);
        free(text);
        if (st) {
            rc = sv_cli_constraint_error(&err);
            goto done;
        }
        if ((st = sv_matcher_create(sv_constraint_index(constraint), sv_tokens_iface(tok), budget, &g.matcher, &err)))
            goto fail;
    }

    if ((st = sv_sampler_create((uint32_t)g.vocab, &o.sp, &g.sampler, &err))) goto fail;
    if ((st = sv_sampler_add_context(g.sampler, prompt.v, (uint32_t)prompt.n, &err))) goto fail;
    if ((st = sv_detok_create(g.v, SV_DETOK_SKIP_SPECIAL, &g.detok, &err))) goto fail;
    if ((st = sv_llama_state_create(g.model, (int32_t)ctx, 64, &g.seq, &err))) goto fail;
    g.logits = malloc((size_t)g.vocab * sizeof *g.logits);
    if (!g.logits) { st = sv_error_set(&err, SV_ERR_NOMEM, -1, "out of memory"); goto fail; }

    uint64_t t0 = sv_now_ns();
    if ((st = step(&g, prompt.v, (int32_t)prompt.n, &err))) goto fail;
    uint64_t t1 = sv_now_ns();
    const char *finish = "length";
    int32_t forced[64];
    long forced_total = 0;
    while ((long)g.out.n < budget) {
        if (g.matcher) {
            if (sv_matcher_is_finished(g.matcher)) { finish = "stop"; break; }
            uint32_t nf = 0, rb = 0;
            if ((st = sv_matcher_forced(g.matcher, forced, 64, &nf, &rb, &err))) goto fail;
            if (nf > 0 && rb <= g.out.n) {
                /* Jump-forward: roll back rb tokens, then feed the forced ones in one step. */
                if (rb) {
                    if ((st = sv_matcher_rollback(g.matcher, rb, &err))) goto fail;
                    for (uint32_t i = 0; i < rb; i++) {
                        int32_t id = g.out.v[--g.out.n];
                        size_t n = 0;
                        sv_vocab_bytes(g.v, id, &n);
                        g.text.n -= n;
                        if ((st = sv_sampler_unaccept(g.sampler, id, &err))) goto fail;
                    }
                    g.pos -= (int32_t)rb;
                }
                for (uint32_t i = 0; i < nf; i++) {
                    if (!sv_matcher_accept(g.matcher, forced[i])) {
                        st = sv_error_set(&err, SV_ERR_INTERNAL, -1, "internal: a forced token was refused");
                        goto fail;
                    }
                    if ((st = sv_sampler_accept(g.sampler, forced[i], &err)) || (st = emit(&g, forced[i], &err))) goto fail;
                }
                forced_total += nf;
                if ((st = step(&g, forced, (int32_t)nf, &err))) goto fail;
                if ((st = flush_text(&g, false, &err))) goto fail;
                continue;
            }
        }
        const uint32_t *mask = NULL;
        if (g.matcher && (st = sv_matcher_mask(g.matcher, &mask, &err))) goto fail;
        int32_t id;
        if ((st = sv_sampler_sample(g.sampler, g.logits, mask, &id, NULL, &err))) goto fail;
        if (sv_vocab_flags(g.v, id) & SV_TOKEN_EOG) {
            if (g.matcher) sv_matcher_accept(g.matcher, id);
            finish = "stop";
            break;
        }
        if (g.matcher && !sv_matcher_accept(g.matcher, id)) {
            st = sv_error_set(&err, SV_ERR_INTERNAL, -1, "internal: the sampled token %d is outside the mask", id);
            goto fail;
        }
        if ((st = sv_sampler_accept(g.sampler, id, &err)) || (st = emit(&g, id, &err))) goto fail;
        if ((st = flush_text(&g, false, &err))) goto fail;
        if (g.matcher && sv_matcher_is_finished(g.matcher)) { finish = "stop"; break; }
        if ((long)g.out.n >= budget) break;
        if ((st = step(&g, &id, 1, &err))) goto fail;
    }
    if (g.matcher && !sv_matcher_is_accepting(g.matcher)) {
        st = sv_error_set(&err, SV_ERR_INTERNAL, -1, "internal: the constrained output is incomplete");
        goto fail;
    }
    /* A constrained output that used its whole budget is complete (the
     * budget rule steered it there): finish reason stop, as docs/architecture.md says,
     * with the budget as the stop reason. */
    if (g.matcher && !strcmp(finish, "length")) finish = "stop (budget)";
    uint64_t t2 = sv_now_ns();
    if ((st = flush_text(&g, true, &err))) goto fail;
    if (o.print_ids) {
        for (size_t i = 0; i < g.out.n; i++) printf("%s%d", i ? "," : "", g.out.v[i]);
        printf("\n");
    } else {
        printf("\n");
    }
    fflush(stdout);
    fprintf(stderr,
            "sieve generate: finish %s; prompt %zu tokens in %.0f ms; %zu generated (%ld forced) in %.0f ms "
            "(%.1f tokens/s)\n",
            finish, prompt.n, (t1 - t0) / 1e6, g.out.n, forced_total, (t2 - t1) / 1e6,
            g.out.n ? g.out.n / ((t2 - t1) / 1e9) : 0.0);
    rc = SV_EXIT_OK;
    goto done;
fail:
    fprintf(stderr, "sieve generate: %s\n", err.message[0] ? err.message : sv_status_name(st));
    rc = st == SV_ERR_ARG || st == SV_ERR_BUDGET ? SV_EXIT_USAGE : SV_EXIT_RUNTIME;
done:
    free(g.logits);
    sv_llama_state_destroy(g.seq);
    sv_detok_destroy(g.detok);
    sv_sampler_destroy(g.sampler);
    sv_matcher_destroy(g.matcher);
    if (constraint) sv_constraint_release(cache, constraint);
    sv_ccache_destroy(cache);
    sv_ids_free(&g.out);
    sv_bytes_free(&g.text);
    sv_ids_free(&prompt);
    sv_bytes_free(&ptext);
    sv_tokens_destroy(tok);
    sv_llama_destroy(g.model);
    sv_backend_destroy(be);
    return rc;
}
