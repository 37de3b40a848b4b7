/* cmd_serve.c — `sieve serve`: the OpenAI-compatible HTTP server.
 *
 * Loads the model on the backend --device names (CPU or CUDA), its tokenizer twice (one encoder for
 * the engine thread's jump-forward, one for the HTTP thread: an encoder is
 * single-threaded) and its chat template (or --chat-template NAME), starts
 * the engine thread and serves until SIGTERM (src/server/server.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/backend/cpu.h"
#include "src/api/reasoning.h"
#include "src/chat/chat.h"
#include "src/engine/engine.h"
#include "src/engine/engine_loop.h"
#include "src/constraint/tokens.h"
#include "src/model/llama.h"
#include "src/server/server.h"
#include "cli.h"
#include "cmd_batch.h"
#include "device.h"
#include "verbs.h"

enum {
    OPT_HOST = 256, OPT_GPU_UTIL, OPT_PORT, OPT_API_KEY, OPT_NAME, OPT_MAX_NUM_SEQS, OPT_BATCHED, OPT_KV_MB, OPT_MAX_LEN,
    OPT_MAX_QUEUE, OPT_THREADS, OPT_WS, OPT_UNKNOWN_FORMATS, OPT_MAX_BODY, OPT_CHAT_TEMPLATE, OPT_COMPILE_THREADS,
    OPT_TIMEOUT, OPT_DRAIN, OPT_NO_PREFIX, OPT_NO_JUMP, OPT_CCACHE_MB, OPT_PREFETCH, OPT_DEVICE, OPT_CPU_KERNELS, OPT_CUDA_FP32, OPT_HOST_SAMPLING, OPT_DEEP_LEVELS, OPT_ANY_CALLS, OPT_KEY_ORDER, OPT_DISCRIMINATOR, OPT_METRICS_COMPAT,
    OPT_COMPILE_QUEUE, OPT_COMPILE_MEMORY, OPT_COMPILE_MEMORY_EACH, OPT_COMPILE_TIMEOUT, OPT_COMPILE_STATES, OPT_DFA_MEMO_MB,
    OPT_ERRORS, OPT_INPUT_ERRORS, OPT_RESUME, OPT_CONCURRENCY, OPT_QUIET, OPT_BATCH_STEP, OPT_DATA_DIR,
    OPT_MAX_FILE, OPT_REASONING_PARSER, OPT_MAX_REASONING,
};

static const char *const batch_usage_text =
    "Usage: sieve batch -m MODEL -i IN.jsonl -o OUT.jsonl [--resume] [--errors ERR.jsonl]\n"
    "                   [--concurrency N] [--quiet] [any option of sieve serve]\n"
    "\n"
    "Runs a file of OpenAI batch request lines through the model:\n"
    "  {\"custom_id\": str, \"method\": \"POST\", \"url\": \"/v1/chat/completions\" or\n"
    "   \"/v1/completions\", \"body\": {the request, as you would POST it}}\n"
    "and writes one line per request, OpenAI's batch output shape, as each finishes:\n"
    "  {\"id\", \"custom_id\", \"response\": {\"status_code\", \"request_id\", \"body\"},\n"
    "   \"error\": null}\n"
    "Every request gets what the same request gets from sieve serve (it runs one in this\n"
    "process, on loopback). The whole input is checked first: a bad line stops the batch\n"
    "before anything runs, with every bad line reported (exit 65). Each distinct schema\n"
    "compiles once. Each output line is on disk (fdatasync) before it counts as done.\n"
    "  -i, --input FILE      the requests (- is standard input)\n"
    "  -o, --output FILE     the answers; a file that is not empty needs --resume\n"
    "  --resume              skip the custom_ids the output (and --errors) already hold,\n"
    "                        dropping a last line cut by a crash: an interrupted run\n"
    "                        finishes with each request exactly once\n"
    "  --errors FILE         answers with an error status go here, not to the output\n"
    "  --input-errors FILE   the bad input lines as a JSON array [{line, code, message, param}]\n"
    "  --concurrency N       requests in flight (default: twice --max-num-seqs)\n"
    "  --quiet               no progress (else a bar on a terminal, a line every 10 s on\n"
    "                        a pipe: done/total, tokens/s, ETA, errors)\n"
    "The served model name is the one the input's bodies name (one model a batch).\n"
    "SIGINT/SIGTERM: requests in flight are cancelled (a resumed run sends them again),\n"
    "exit 130. Exit 0 when every request has its answer (an answer may be an error\n"
    "status, as online), 1 on a runtime failure, 64 on bad options.\n";

static const char *const usage_text =
    "Usage: sieve serve -m MODEL [--host 127.0.0.1] [--port 8000] [--api-key KEY]\n"
    "                   [--served-model-name NAME] [engine and limit options]\n"
    "\n"
    "Serves the OpenAI API (POST /v1/chat/completions, POST /v1/completions,\n"
    "GET /v1/models, GET /health, GET /metrics) on the CPU or a GPU (--device).\n"
    "  --host H, --port P        where to listen (default 127.0.0.1:8000; port 0: any)\n"
    "  --api-key KEY             require Authorization: Bearer KEY on /v1/\n"
    "  --served-model-name NAME  the model's name in the API (default: the file's name)\n"
    "  --chat-template NAME      chatml, llama3, mistral or gemma instead of the model's\n"
    "  --reasoning-parser NAME   qwen3 or deepseek_r1: chat answers may think in <think>...</think>\n"
    "                            before the constraint applies (reasoning_content)\n"
    "  --max-reasoning-tokens N  reasoning tokens before </think> is forced, for requests\n"
    "                            without max_reasoning_tokens (default: no limit)\n"
    "  --max-num-seqs N          requests decoded at once (default 16)\n"
    "  --max-num-batched-tokens N  rows per forward step (default 256)\n"
    "  --batch-step-tokens N     rows of batch-priority requests (X-Sieve-Priority: batch) per\n"
    "                            step beside online rows (default 32; 0: no cap)\n"
    "  --max-model-len N         tokens per request, prompt + output (default: the\n"
    "                            model's, at most 4096)\n"
    "  --kv-memory-mb M          memory of the paged KV cache (default 512 on the CPU)\n"
    SV_CLI_GPU_MEMORY_HELP
    "  --max-queue N             waiting requests before 429 (default 256)\n"
    "  --no-prefix-cache, --no-jump-forward\n"
    "  --prefetch-threads N      mask prefetch workers (default: 1 on a GPU, 0 on the CPU)\n"
    "  --threads N               CPU threads for the model (default: the online CPUs)\n"
    SV_CLI_DEVICE_HELP
    SV_CLI_HOST_SAMPLING_HELP
    SV_CLI_CPU_KERNELS_HELP
    "  --compile-threads N       constraint compile threads (default 2)\n"
    "  --compile-queue N         constraints waiting to compile before 429 (default 64)\n"
    "  --compile-memory-mb M     memory for all compiles in flight together (default\n"
    "                            1024); past it: 429 with Retry-After\n"
    "  --compile-memory-each-mb M  one compile's memory budget (default 256, at most\n"
    "                            --compile-memory-mb); past it: 400 (type budget)\n"
    "  --compile-timeout-ms MS   one compile's time budget (default 10000; past it: 400)\n"
    "  --compile-max-states N    one compile's DFA state budget (default 200000; past it: 400)\n"
    "  --constraint-cache-mb M   compiled-constraint cache (default 512)\n"
    "  --dfa-memo-mb M           the compiler's memo of sub-automata, shared by all\n"
    "                            compiles (default 64; 0: off)\n"
    "  --ws MODE                 JSON whitespace: canonical (default), compact, flexible\n"
    "  --allow-unknown-formats   unknown JSON Schema formats are annotations\n"
    "  --any-calls true|false    constraints composed from parts (default true): free-form\n"
    "                            values and recursive $refs nest to any depth, each tool's\n"
    "                            arguments compile once; false: one flat automaton\n"
    "  --key-order schema|any    object keys in the schema's order (default, forced for\n"
    "                            jump-forward), or any order, each key at most once\n"
    "                            (objects of up to 64 keys: docs/fsm.md \"Key order\")\n"
    "  --discriminator required|annotation\n"
    "                            required (default): a oneOf with OpenAPI's discriminator\n"
    "                            requires its propertyName in each branch, as OpenAPI and\n"
    "                            Pydantic do; annotation: ignored, as in JSON Schema\n"
    "  --metrics-compat none|vllm  vllm: /metrics also carries the series routers and\n"
    "                            autoscalers read under vLLM's names (vllm:num_requests_waiting,\n"
    "                            kv_cache_usage_perc, cache_config_info, ...; docs/metrics.md)\n"
    "  --any-deep-levels N       flat form: free-form values nest up to N levels beyond 3\n"
    "                            (default 3; 0: compile faster, accept less deep data)\n"
    "  --max-body-bytes N        request body limit (default 8388608; larger: 413)\n"
    "  --request-timeout S       cancel a request running longer (default: none)\n"
    "  --drain-timeout S         on SIGTERM, how long running requests may finish (default 30)\n"
    "  --data-dir DIR            uploaded files (/v1/files), made on first use (default ./sieve-data)\n"
    "  --max-file-bytes N        one upload (default 104857600; larger: 413)\n"
    "Prints 'sieve serve: listening on http://HOST:PORT' on stderr when ready.\n";

static uint16_t g_port;
static const char *g_host;
static const char *g_name;
static void ready(uint16_t port) {
    g_port = port;
    fprintf(stderr, "sieve serve: listening on http://%s:%u (model %s)\n", g_host, (unsigned)port, g_name);
    fflush(stderr);
}

static int parse_seconds(const char *s, double *out) {
    char *e;
    double v = strtod(s, &e);
    if (e == s || *e || !(v >= 0) || v > 1e6) return -1;
    *out = v;
    return 0;
}

static int serve_main(int argc, char **argv, bool batch);
int sv_cmd_serve(int argc, char **argv) { return serve_main(argc, argv, false); }
int sv_cmd_batch(int argc, char **argv) { return serve_main(argc, argv, true); }

static int serve_main(int argc, char **argv, bool batch) {
    static const struct option longopts[] = {
        {"help", no_argument, 0, 'h'},
        {"model", required_argument, 0, 'm'},
        {"host", required_argument, 0, OPT_HOST},
        {"port", required_argument, 0, OPT_PORT},
        {"api-key", required_argument, 0, OPT_API_KEY},
        {"served-model-name", required_argument, 0, OPT_NAME},
        {"max-num-seqs", required_argument, 0, OPT_MAX_NUM_SEQS},
        {"max-num-batched-tokens", required_argument, 0, OPT_BATCHED},
        {"batch-step-tokens", required_argument, 0, OPT_BATCH_STEP},
        {"kv-memory-mb", required_argument, 0, OPT_KV_MB},
        {"gpu-memory-utilization", required_argument, 0, OPT_GPU_UTIL},
        {"max-model-len", required_argument, 0, OPT_MAX_LEN},
        {"max-queue", required_argument, 0, OPT_MAX_QUEUE},
        {"threads", required_argument, 0, OPT_THREADS},
        {"ws", required_argument, 0, OPT_WS},
        {"allow-unknown-formats", no_argument, 0, OPT_UNKNOWN_FORMATS},
        {"any-deep-levels", required_argument, 0, OPT_DEEP_LEVELS},
        {"any-calls", required_argument, 0, OPT_ANY_CALLS},
        {"key-order", required_argument, 0, OPT_KEY_ORDER},
        {"discriminator", required_argument, 0, OPT_DISCRIMINATOR},
        {"metrics-compat", required_argument, 0, OPT_METRICS_COMPAT},
        {"max-body-bytes", required_argument, 0, OPT_MAX_BODY},
        {"chat-template", required_argument, 0, OPT_CHAT_TEMPLATE},
        {"reasoning-parser", required_argument, 0, OPT_REASONING_PARSER},
        {"max-reasoning-tokens", required_argument, 0, OPT_MAX_REASONING},
        {"compile-threads", required_argument, 0, OPT_COMPILE_THREADS},
        {"compile-queue", required_argument, 0, OPT_COMPILE_QUEUE},
        {"compile-memory-mb", required_argument, 0, OPT_COMPILE_MEMORY},
        {"compile-memory-each-mb", required_argument, 0, OPT_COMPILE_MEMORY_EACH},
        {"compile-timeout-ms", required_argument, 0, OPT_COMPILE_TIMEOUT},
        {"compile-max-states", required_argument, 0, OPT_COMPILE_STATES},
        {"constraint-cache-mb", required_argument, 0, OPT_CCACHE_MB},
        {"dfa-memo-mb", required_argument, 0, OPT_DFA_MEMO_MB},
        {"request-timeout", required_argument, 0, OPT_TIMEOUT},
        {"drain-timeout", required_argument, 0, OPT_DRAIN},
        {"no-prefix-cache", no_argument, 0, OPT_NO_PREFIX},
        {"no-jump-forward", no_argument, 0, OPT_NO_JUMP},
        {"prefetch-threads", required_argument, 0, OPT_PREFETCH},
        {"device", required_argument, 0, OPT_DEVICE},
        {"cpu-kernels", required_argument, 0, OPT_CPU_KERNELS},
        {"cuda-fp32", no_argument, 0, OPT_CUDA_FP32},
        {"host-sampling", no_argument, 0, OPT_HOST_SAMPLING},
        {"input", required_argument, 0, 'i'},
        {"output", required_argument, 0, 'o'},
        {"errors", required_argument, 0, OPT_ERRORS},
        {"input-errors", required_argument, 0, OPT_INPUT_ERRORS},
        {"resume", no_argument, 0, OPT_RESUME},
        {"concurrency", required_argument, 0, OPT_CONCURRENCY},
        {"quiet", no_argument, 0, OPT_QUIET},
        {"data-dir", required_argument, 0, OPT_DATA_DIR},
        {"max-file-bytes", required_argument, 0, OPT_MAX_FILE},
        {0, 0, 0, 0},
    };
    const char *verb = batch ? "batch" : "serve";
    sv_batch_cli_t bo = {0};
    bool batch_step_given = false;
    sv_server_config_t sc;
    sv_server_config_default(&sc);
    sv_engine_config_t ec;
    sv_engine_config_default(&ec);
    const char *model = NULL, *tmpl_name = NULL, *name = NULL, *device = NULL;
    uint64_t kv_mb = 0, ccache_mb = 512, memo_mb = 64; /* kv_mb 0: not given */
    double gpu_util = 0.0; /* --gpu-memory-utilization; 0: not given */
    uint32_t max_len = 0;
    int threads = 0;
    bool prefetch_given = false;
    sv_cpu_kernels kernels = SV_CPU_KERNELS_INT8;
    bool cuda_fp32 = false, host_sampling = false;
    unsigned long long v;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":hm:i:o:", longopts, NULL)) != -1) {
        if (!batch && (c == 'i' || c == 'o' || c == OPT_ERRORS || c == OPT_INPUT_ERRORS || c == OPT_RESUME ||
                       c == OPT_CONCURRENCY || c == OPT_QUIET))
            return sv_cli_usage_error(verb, "unknown option '%s'", argv[optind - 1]);
        switch (c) {
        case 'h': fputs(batch ? batch_usage_text : usage_text, stdout); return SV_EXIT_OK;
        case 'i': bo.input = optarg; break;
        case 'o': bo.output = optarg; break;
        case OPT_ERRORS: bo.errors = optarg; break;
        case OPT_INPUT_ERRORS: bo.errors_json = optarg; break;
        case OPT_RESUME: bo.resume = true; break;
        case OPT_QUIET: bo.quiet = true; break;
        case OPT_DATA_DIR:
            if (!*optarg) return sv_cli_usage_error(verb, "--data-dir must not be empty");
            sc.data_dir = optarg;
            break;
        case OPT_MAX_FILE:
            if (sv_cli_parse_u64(optarg, 1ull << 40, &v) || !v)
                return sv_cli_usage_error(verb, "invalid value '%s' for --max-file-bytes", optarg);
            sc.max_file_bytes = (size_t)v;
            break;
        case OPT_CONCURRENCY:
            if (sv_cli_parse_u64(optarg, 4096, &v) || !v) return sv_cli_usage_error(verb, "invalid value '%s' for --concurrency", optarg);
            bo.concurrency = (uint32_t)v;
            break;
        case 'm': model = optarg; break;
        case OPT_HOST: sc.host = optarg; break;
        case OPT_PORT:
            if (sv_cli_parse_u64(optarg, 65535, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --port", optarg);
            sc.port = (uint16_t)v;
            break;
        case OPT_API_KEY:
            if (!*optarg) return sv_cli_usage_error(verb, "--api-key must not be empty");
            sc.api_key = optarg;
            break;
        case OPT_NAME: name = optarg; break;
        case OPT_MAX_NUM_SEQS:
            if (sv_cli_parse_u64(optarg, 1024, &v) || !v) return sv_cli_usage_error(verb, "invalid value '%s' for --max-num-seqs", optarg);
            ec.max_num_seqs = (uint32_t)v;
            break;
        case OPT_BATCH_STEP:
            if (sv_cli_parse_u64(optarg, 1u << 16, &v))
                return sv_cli_usage_error(verb, "invalid value '%s' for --batch-step-tokens", optarg);
            ec.batch_step_tokens = (uint32_t)v;
            batch_step_given = true;
            break;
        case OPT_BATCHED:
            if (sv_cli_parse_u64(optarg, 1u << 16, &v) || !v)
                return sv_cli_usage_error(verb, "invalid value '%s' for --max-num-batched-tokens", optarg);
            ec.max_num_batched_tokens = (uint32_t)v;
            break;
        case OPT_KV_MB:
            if (sv_cli_parse_u64(optarg, 1u << 20, &v) || !v) return sv_cli_usage_error(verb, "invalid value '%s' for --kv-memory-mb", optarg);
            kv_mb = v;
            break;
        case OPT_GPU_UTIL:
            if (!sv_cli_parse_utilization(optarg, &gpu_util))
                return sv_cli_usage_error(verb, "invalid value '%s' for --gpu-memory-utilization (0 < F <= 1)", optarg);
            break;
        case OPT_CCACHE_MB:
            if (sv_cli_parse_u64(optarg, 1u << 20, &v) || !v)
                return sv_cli_usage_error(verb, "invalid value '%s' for --constraint-cache-mb", optarg);
            ccache_mb = v;
            break;
        case OPT_DFA_MEMO_MB:
            if (sv_cli_parse_u64(optarg, 1u << 20, &v))
                return sv_cli_usage_error(verb, "invalid value '%s' for --dfa-memo-mb", optarg);
            memo_mb = v;
            break;
        case OPT_MAX_LEN:
            if (sv_cli_parse_u64(optarg, 1u << 24, &v) || v < 2) return sv_cli_usage_error(verb, "invalid value '%s' for --max-model-len", optarg);
            max_len = (uint32_t)v;
            break;
        case OPT_MAX_QUEUE:
            if (sv_cli_parse_u64(optarg, 1u << 20, &v) || !v) return sv_cli_usage_error(verb, "invalid value '%s' for --max-queue", optarg);
            ec.max_queue = (uint32_t)v;
            break;
        case OPT_THREADS:
            if (sv_cli_parse_u64(optarg, SV_CPU_MAX_THREADS, &v) || !v) return sv_cli_usage_error(verb, "invalid value '%s' for --threads", optarg);
            threads = (int)v;
            break;
        case OPT_COMPILE_QUEUE:
            if (sv_cli_parse_u64(optarg, 1u << 20, &v) || !v) return sv_cli_usage_error(verb, "invalid value '%s' for --compile-queue", optarg);
            sc.compile_queue = (uint32_t)v;
            break;
        case OPT_COMPILE_MEMORY:
            if (sv_cli_parse_u64(optarg, 1u << 22, &v) || v < 16)
                return sv_cli_usage_error(verb, "invalid value '%s' for --compile-memory-mb (16 or more)", optarg);
            sc.compile_memory = (size_t)v << 20;
            break;
        case OPT_COMPILE_MEMORY_EACH:
            if (sv_cli_parse_u64(optarg, 1u << 22, &v) || v < 16)
                return sv_cli_usage_error(verb, "invalid value '%s' for --compile-memory-each-mb (16 or more)", optarg);
            sc.compile_memory_each = (size_t)v << 20;
            break;
        case OPT_COMPILE_TIMEOUT:
            if (sv_cli_parse_u64(optarg, 3600000, &v) || !v)
                return sv_cli_usage_error(verb, "invalid value '%s' for --compile-timeout-ms", optarg);
            sc.compile_timeout_ms = (uint32_t)v;
            break;
        case OPT_COMPILE_STATES:
            if (sv_cli_parse_u64(optarg, 1000000000, &v) || v < 16)
                return sv_cli_usage_error(verb, "invalid value '%s' for --compile-max-states (16 or more)", optarg);
            sc.compile_max_states = (uint32_t)v;
            break;
        case OPT_COMPILE_THREADS:
            if (sv_cli_parse_u64(optarg, 64, &v) || !v) return sv_cli_usage_error(verb, "invalid value '%s' for --compile-threads", optarg);
            sc.compile_threads = (uint32_t)v;
            break;
        case OPT_WS:
            if (!strcmp(optarg, "canonical")) sc.ws = SV_WS_CANONICAL;
            else if (!strcmp(optarg, "compact")) sc.ws = SV_WS_COMPACT;
            else if (!strcmp(optarg, "flexible")) sc.ws = SV_WS_FLEXIBLE;
            else return sv_cli_usage_error(verb, "invalid value '%s' for --ws", optarg);
            break;
        case OPT_UNKNOWN_FORMATS: sc.unknown_formats = true; break;
        case OPT_ANY_CALLS:
            if (strcmp(optarg, "true") && strcmp(optarg, "false"))
                return sv_cli_usage_error(verb, "invalid value '%s' for --any-calls (true or false)", optarg);
            sc.any_calls = !strcmp(optarg, "true");
            break;
        case OPT_KEY_ORDER:
            if (strcmp(optarg, "schema") && strcmp(optarg, "any"))
                return sv_cli_usage_error(verb, "invalid value '%s' for --key-order (schema or any)", optarg);
            sc.key_order = strcmp(optarg, "any") ? SV_KEY_ORDER_SCHEMA : SV_KEY_ORDER_ANY;
            break;
        case OPT_DISCRIMINATOR:
            if (strcmp(optarg, "required") && strcmp(optarg, "annotation"))
                return sv_cli_usage_error(verb, "invalid value '%s' for --discriminator (required or annotation)", optarg);
            sc.discriminator_annotation = !strcmp(optarg, "annotation");
            break;
        case OPT_METRICS_COMPAT:
            if (strcmp(optarg, "none") && strcmp(optarg, "vllm"))
                return sv_cli_usage_error(verb, "invalid value '%s' for --metrics-compat (none or vllm)", optarg);
            sc.metrics_vllm = !strcmp(optarg, "vllm");
            break;
        case OPT_DEEP_LEVELS:
            if (sv_cli_parse_u64(optarg, 13, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --any-deep-levels (0 to 13)", optarg);
            sc.any_deep_levels = (uint32_t)v;
            break;
        case OPT_MAX_BODY:
            if (sv_cli_parse_u64(optarg, 1ull << 32, &v) || v < 1024) return sv_cli_usage_error(verb, "invalid value '%s' for --max-body-bytes (at least 1024)", optarg);
            sc.max_body_bytes = (size_t)v;
            break;
        case OPT_CHAT_TEMPLATE: tmpl_name = optarg; break;
        case OPT_REASONING_PARSER: {
            sv_reasoning_parser rp;
            sv_error_t rerr;
            if (sv_reasoning_parser_named(optarg, &rp, &rerr)) return sv_cli_usage_error(verb, "%s", rerr.message);
            sc.reasoning_parser = (int)rp;
            break;
        }
        case OPT_MAX_REASONING: {
            unsigned long long mr;
            if (sv_cli_parse_u64(optarg, UINT32_MAX - 1, &mr))
                return sv_cli_usage_error(verb, "invalid value '%s' for --max-reasoning-tokens", optarg);
            sc.max_reasoning_tokens = (uint32_t)mr;
            break;
        }
        case OPT_TIMEOUT:
            if (parse_seconds(optarg, &sc.request_timeout_s)) return sv_cli_usage_error(verb, "invalid value '%s' for --request-timeout", optarg);
            break;
        case OPT_DRAIN:
            if (parse_seconds(optarg, &sc.drain_timeout_s)) return sv_cli_usage_error(verb, "invalid value '%s' for --drain-timeout", optarg);
            break;
        case OPT_NO_PREFIX: ec.prefix_cache = false; break;
        case OPT_NO_JUMP: ec.jump_forward = false; break;
        case OPT_DEVICE:
            if (!sv_cli_device_valid(optarg))
                return sv_cli_usage_error(verb, "invalid value '%s' for --device (cpu, cuda, cuda:N, auto)", optarg);
            device = optarg;
            break;
        case OPT_HOST_SAMPLING:
            host_sampling = true;
            break;
        case OPT_CUDA_FP32:
            cuda_fp32 = true;
            break;
        case OPT_CPU_KERNELS:
            if (!sv_cli_parse_cpu_kernels(optarg, &kernels))
                return sv_cli_usage_error(verb, "invalid value '%s' for --cpu-kernels (ref, int8)", optarg);
            break;
        case OPT_PREFETCH:
            if (sv_cli_parse_u64(optarg, 64, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --prefetch-threads", optarg);
            ec.prefetch_threads = (uint32_t)v;
            prefetch_given = true;
            break;
        case ':': return sv_cli_usage_error(verb, "option '%s' needs a value", argv[optind - 1]);
        default: return sv_cli_usage_error(verb, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return sv_cli_usage_error(verb, "unexpected argument '%s'", argv[optind]);
    if (!model) return sv_cli_usage_error(verb, "-m MODEL is required");
    if (batch && (!bo.input || !bo.output)) return sv_cli_usage_error(verb, "-i INPUT and -o OUTPUT are required");
    bo.name_given = name != NULL;
    if (!bo.concurrency) bo.concurrency = 2 * ec.max_num_seqs;
    /* sieve batch: every request is the batch's, no online one to keep steps short for. */
    if (batch && !batch_step_given) ec.batch_step_tokens = 0;
    sv_chat_template_t tmpl;
    sv_error_t err;
    sv_error_clear(&err);
    if (tmpl_name && sv_chat_template_named(tmpl_name, &tmpl, &err)) return sv_cli_usage_error(verb, "%s", err.message);
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1 : n > SV_CPU_MAX_THREADS ? SV_CPU_MAX_THREADS : (int)n;
    }

    /* The served name: the file's name without its directory and .gguf. */
    char base_name[256];
    if (!name) {
        const char *b = strrchr(model, '/');
        b = b && b[1] ? b + 1 : model;
        snprintf(base_name, sizeof base_name, "%s", b);
        size_t n = strlen(base_name);
        while (n > 1 && base_name[n - 1] == '/') base_name[--n] = 0;
        if (n > 5 && !strcmp(base_name + n - 5, ".gguf")) base_name[n - 5] = 0;
        name = base_name;
    }

    sv_backend_t *be = NULL;
    sv_llama_t *m = NULL;
    sv_tokens_t *tok_engine = NULL, *tok_http = NULL;
    sv_engine_t *eng = NULL;
    sv_engine_dsampler_t *dsampler = NULL; /* outlives eng, not be */
    sv_engine_loop_t *loop = NULL;
    sv_status st;
    if ((st = sv_cli_backend_create(device, threads, kernels, cuda_fp32, &be, &err)) || (st = sv_llama_load(model, be, &m, &err)))
        goto fail;
    if (!prefetch_given) ec.prefetch_threads = sv_cli_default_prefetch_threads(be);
    const sv_llama_config_t *cfg = sv_llama_config(m);
    if ((st = sv_tokens_load_model(model, cfg->vocab_size, &tok_engine, &err)) ||
        (st = sv_tokens_load_model(model, cfg->vocab_size, &tok_http, &err)))
        goto fail;
    if (sv_vocab_size(sv_tokens_vocab(tok_engine)) > (uint32_t)cfg->vocab_size) {
        st = sv_error_set(&err, SV_ERR_SYNTAX, -1, "the tokenizer has %u tokens but the model's output has %d rows",
                          sv_vocab_size(sv_tokens_vocab(tok_engine)), cfg->vocab_size);
        goto fail;
    }
    sv_error_t terr;
    sv_error_clear(&terr);
    bool have_tmpl = tmpl_name != NULL;
    if (!have_tmpl) have_tmpl = sv_chat_template_load(model, &tmpl, &terr) == SV_OK;
    if (!have_tmpl)
        fprintf(stderr, "sieve %s: no chat template (%s); /v1/chat/completions will answer 400\n", verb, terr.message);

    /* A test hook (tests/server/test_limits.py): an engine step that fails
     * as a broken invariant would, to show a fault fails its requests only. */
    const char *fault = getenv("SIEVE_TEST_ENGINE_FAULT_AT_STEP");
    if (fault && *fault) ec.fault_at_step = strtoull(fault, NULL, 10);

    uint32_t ctx = max_len ? max_len : (cfg->max_ctx < 4096 ? (uint32_t)cfg->max_ctx : 4096);
    if (ctx > (uint32_t)cfg->max_ctx) ctx = (uint32_t)cfg->max_ctx;
    ec.max_ctx = ctx;
    if (!host_sampling && (st = sv_cli_dsampler_create(be, cfg->vocab_size, &dsampler, &err))) goto fail;
    ec.dsampler = dsampler;
    uint64_t kvb = 0;
    if ((st = sv_cli_kv_bytes(be, kv_mb, gpu_util, &kvb, &err))) goto fail;
    ec.kv_bytes = kvb;
    sv_engine_vocab_t ev = {.set = sv_tokens_set(tok_engine), .tok = sv_tokens_iface(tok_engine),
                            .vocab = sv_tokens_vocab(tok_engine)};
    if ((st = sv_engine_create(m, &ev, &ec, &eng, &err))) goto fail;
    st = sv_engine_loop_start(eng, &loop, &err);
    eng = NULL; /* the loop owns it now, also on failure */
    if (st) goto fail;

    sc.model_name = name;
    sc.model_path = model;
    sc.max_ctx = ctx;
    sc.max_queue = ec.max_queue;
    sc.ccache_bytes = (size_t)ccache_mb << 20;
    sc.dfa_memo_bytes = (size_t)memo_mb << 20;
    g_host = sc.host;
    g_name = name;
    sv_server_deps_t deps = {.loop = loop, .tok = tok_http, .set = sv_tokens_set(tok_engine),
                             .vocab_rows = (uint32_t)cfg->vocab_size, .tmpl = have_tmpl ? &tmpl : NULL,
                             .tmpl_error = terr.message};
    if (batch) {
        bool taken;
        int rc = sv_batch_main(&bo, &sc, &deps, &taken);
        if (!taken) sv_engine_loop_stop(loop);
        sv_tokens_destroy(tok_http);
        sv_tokens_destroy(tok_engine);
        sv_llama_destroy(m);
        sv_cli_dsampler_destroy(dsampler);
        sv_backend_destroy(be);
        return rc;
    }
    st = sv_server_run(&sc, &deps, ready, &err);
    loop = NULL; /* stopped by the server */
    if (st) goto fail;
    fprintf(stderr, "sieve serve: stopped\n");
    sv_tokens_destroy(tok_http);
    sv_tokens_destroy(tok_engine);
    sv_llama_destroy(m);
    sv_cli_dsampler_destroy(dsampler);
    sv_backend_destroy(be);
    return SV_EXIT_OK;
fail:
    fprintf(stderr, "sieve %s: %s\n", verb, err.message[0] ? err.message : sv_status_name(st));
    sv_engine_loop_stop(loop);
    sv_engine_destroy(eng);
    sv_tokens_destroy(tok_http);
    sv_tokens_destroy(tok_engine);
    sv_llama_destroy(m);
    sv_cli_dsampler_destroy(dsampler);
    sv_backend_destroy(be);
    return SV_EXIT_RUNTIME;
}
