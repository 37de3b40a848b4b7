/* metrics.c — Prometheus text for the server's counters (see metrics.h). */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const double latency_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                        0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0};
static const double itl_bounds[] = {0.001, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
                                    0.1,   0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1.0,  2.5};

void sv_histogram_observe(sv_histogram_t *h, double v) {
    size_t i = 0;
    while (i < h->n_bounds && v > h->bounds[i]) i++;
    h->counts[i]++; /* i == n_bounds: the +Inf bucket */
    h->count++;
    h->sum += v;
}

void sv_metrics_init(sv_metrics_t *m) {
    memset(m, 0, sizeof *m);
    size_t nl = sizeof latency_bounds / sizeof latency_bounds[0];
    m->ttft = (sv_histogram_t){.bounds = latency_bounds, .n_bounds = nl};
    m->e2e = (sv_histogram_t){.bounds = latency_bounds, .n_bounds = nl};
    m->compile = (sv_histogram_t){.bounds = latency_bounds, .n_bounds = nl};
    m->itl = (sv_histogram_t){.bounds = itl_bounds, .n_bounds = sizeof itl_bounds / sizeof itl_bounds[0]};
    m->batch_ttft = m->ttft;
    m->batch_e2e = m->e2e;
    m->batch_itl = m->itl;
}

typedef struct {
    sv_bytes_t *out;
    const char *model;
    const char *ns; /* "sieve" or "vllm" */
    sv_status st;
} w_t;

static void wf(w_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wf(w_t *w, const char *fmt, ...) {
    if (w->st) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof buf) n = (int)sizeof buf - 1;
    w->st = sv_bytes_append(w->out, buf, (size_t)n);
}

static void head(w_t *w, const char *name, const char *type, const char *help) {
    wf(w, "# HELP %s:%s %s\n# TYPE %s:%s %s\n", w->ns, name, help, w->ns, name, type);
}

static void num(w_t *w, const char *name, const char *type, const char *help, double v) {
    head(w, name, type, help);
    wf(w, "%s:%s{model_name=\"%s\"} %.17g\n", w->ns, name, w->model, v);
}

static void hist(w_t *w, const char *name, const char *help, const sv_histogram_t *h) {
    head(w, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < h->n_bounds; i++) {
        cum += h->counts[i];
        wf(w, "%s:%s_bucket{model_name=\"%s\",le=\"%g\"} %llu\n", w->ns, name, w->model, h->bounds[i],
           (unsigned long long)cum);
    }
    cum += h->counts[h->n_bounds];
    wf(w, "%s:%s_bucket{model_name=\"%s\",le=\"+Inf\"} %llu\n", w->ns, name, w->model, (unsigned long long)cum);
    wf(w, "%s:%s_sum{model_name=\"%s\"} %.17g\n", w->ns, name, w->model, h->sum);
    wf(w, "%s:%s_count{model_name=\"%s\"} %llu\n", w->ns, name, w->model, (unsigned long long)h->count);
}

/* The KV cache's shape as an info gauge (value 1, the facts in labels), as
 * vLLM's cache_config_info; num_gpu_blocks is vLLM's name for num_blocks. */
static void cache_info(w_t *w, const sv_metrics_snapshot_t *s, bool gpu_name) {
    head(w, "cache_config_info", "gauge", "The KV cache: positions per block and blocks (labels; value 1).");
    wf(w, "%s:cache_config_info{model_name=\"%s\",block_size=\"%u\",num_blocks=\"%u\"%s", w->ns, w->model,
       (unsigned)s->block_size, (unsigned)s->num_blocks, gpu_name ? "" : "} 1\n");
    if (gpu_name)
        wf(w, ",num_gpu_blocks=\"%u\"} 1\n", (unsigned)s->num_blocks);
}

/* The series vLLM-aware routers, autoscalers and dashboards read, under
 * vLLM's names, with the values of sieve's own series. */
static void vllm_series(w_t *w, const sv_metrics_t *m, const sv_metrics_snapshot_t *s) {
    w->ns = "vllm";
    num(w, "num_requests_running", "gauge", "Requests running in the engine (sieve: online and batch).",
        (double)s->running + s->batch_running);
    num(w, "num_requests_waiting", "gauge", "Requests waiting to run (sieve: online and batch).",
        (double)s->waiting + s->batch_waiting);
    num(w, "kv_cache_usage_perc", "gauge", "KV cache usage (1 = full).", s->kv_usage);
    num(w, "gpu_cache_usage_perc", "gauge", "KV cache usage (1 = full; the name before vLLM 0.10).", s->kv_usage);
    num(w, "prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
        (double)s->prefix_queries);
    num(w, "prefix_cache_hits_total", "counter", "Prompt tokens served by the prefix cache.", (double)s->prefix_hits);
    num(w, "prompt_tokens_total", "counter", "Prompt tokens of finished requests.", (double)m->prompt_tokens);
    num(w, "generation_tokens_total", "counter", "Generated tokens of finished requests.",
        (double)m->generation_tokens);
    hist(w, "time_to_first_token_seconds", "Time to the first output token.", &m->ttft);
    hist(w, "e2e_request_latency_seconds", "Time from arrival to the last token.", &m->e2e);
    hist(w, "time_per_output_token_seconds", "Time between output tokens.", &m->itl);
    hist(w, "inter_token_latency_seconds", "Time between output tokens.", &m->itl);
    cache_info(w, s, true);
    w->ns = "sieve";
}

const char *const sv_metric_batch_status[SV_METRIC_N_BATCH_STATUS] = {
    "validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling", "cancelled"};

sv_status sv_metrics_format(const sv_metrics_t *m, const sv_metrics_snapshot_t *s, const char *model_name,
                            bool vllm, sv_bytes_t *out) {
    /* The label value is the served model name: escape what Prometheus
     * requires (backslash, quote, newline) by refusing it instead. */
    char model[128];
    size_t k = 0;
    for (const char *p = model_name; *p && k + 1 < sizeof model; p++)
        model[k++] = (*p == '"' || *p == '\\' || *p == '\n') ? '_' : *p;
    model[k] = 0;
    w_t w = {out, model, "sieve", SV_OK};
    num(&w, "num_requests_running", "gauge", "Online requests running in the engine.", s->running);
    num(&w, "num_requests_waiting", "gauge", "Online requests waiting to run.", s->waiting);
    num(&w, "batch_num_requests_running", "gauge", "Batch-priority requests running in the engine.",
        s->batch_running);
    num(&w, "batch_num_requests_waiting", "gauge", "Batch-priority requests waiting to run.", s->batch_waiting);
    num(&w, "kv_cache_usage_perc", "gauge", "Fraction of KV cache blocks held by requests (1 = full).", s->kv_usage);
    num(&w, "prompt_tokens_total", "counter", "Prompt tokens of finished requests.", (double)m->prompt_tokens);
    num(&w, "generation_tokens_total", "counter", "Generated tokens of finished requests.", (double)m->generation_tokens);
    num(&w, "prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.", (double)s->prefix_queries);
    num(&w, "prefix_cache_hits_total", "counter", "Prompt tokens served by the prefix cache.", (double)s->prefix_hits);
    num(&w, "num_preemptions_total", "counter", "Requests preempted (recomputed) for lack of KV blocks.",
        (double)s->preemptions);
    num(&w, "batch_steps_interrupted_total", "counter",
        "Steps of batch-priority rows given up part way for an online request (their rows are computed again).",
        (double)s->batch_steps_interrupted);
    head(&w, "request_success_total", "counter", "Finished requests by finish reason.");
    static const char *const reasons[] = {"stop", "length", "abort", "tool_calls"};
    for (int i = 0; i < SV_METRIC_N_REASONS; i++)
        wf(&w, "sieve:request_success_total{model_name=\"%s\",finished_reason=\"%s\"} %llu\n", model, reasons[i],
           (unsigned long long)m->success[i]);
    num(&w, "request_errors_total", "counter", "Requests answered with an error status.", (double)m->errors);
    hist(&w, "time_to_first_token_seconds", "Time from the request's arrival to its first output token.", &m->ttft);
    hist(&w, "inter_token_latency_seconds", "Time between output deliveries, per token.", &m->itl);
    hist(&w, "e2e_request_latency_seconds", "Time from arrival to the last token.", &m->e2e);
    hist(&w, "batch_time_to_first_token_seconds", "The same for batch-priority requests.", &m->batch_ttft);
    hist(&w, "batch_inter_token_latency_seconds", "The same for batch-priority requests.", &m->batch_itl);
    hist(&w, "batch_e2e_request_latency_seconds", "The same for batch-priority requests.", &m->batch_e2e);
    hist(&w, "constraint_compile_seconds", "Time to compile a constraint (cache misses).", &m->compile);
    num(&w, "constraint_cache_hits_total", "counter", "Constraints found compiled in the cache.", (double)s->ccache_hits);
    num(&w, "constraint_cache_misses_total", "counter", "Constraints compiled.", (double)s->ccache_misses);
    num(&w, "constraint_cache_bytes", "gauge", "Memory held by the compiled-constraint cache.", s->ccache_bytes);
    num(&w, "dfa_memo_bytes", "gauge", "Memory held by the compiler's memo of sub-automata (--dfa-memo-mb).",
        s->dfa_memo_bytes);
    num(&w, "constraint_compiles_waiting", "gauge", "Constraints waiting for a compile thread.", s->compiles_waiting);
    num(&w, "constraint_compiles_running", "gauge", "Constraints compiling now.", s->compiles_running);
    num(&w, "constraint_compile_memory_bytes", "gauge", "Memory held by the compiles in flight (their shared pool).",
        s->compile_memory_bytes);
    num(&w, "constraint_compiles_refused_total", "counter",
        "Compiles refused because the compile queue or memory was full (429).", (double)s->compiles_refused);
    num(&w, "constraint_compiles_cancelled_total", "counter", "Compiles cancelled because their client went away.",
        (double)s->compiles_cancelled);
    num(&w, "jump_forward_tokens_total", "counter", "Tokens appended by jump-forward (forced by a constraint).",
        (double)s->jump_forward_tokens);
    num(&w, "engine_alive", "gauge", "1 while the engine thread runs.", s->alive);
    head(&w, "batch_requests_total", "counter", "Batch requests answered, by outcome (completed: in the output file).");
    wf(&w, "sieve:batch_requests_total{model_name=\"%s\",status=\"completed\"} %llu\n", model,
       (unsigned long long)s->batch_lines_ok);
    wf(&w, "sieve:batch_requests_total{model_name=\"%s\",status=\"failed\"} %llu\n", model,
       (unsigned long long)s->batch_lines_failed);
    num(&w, "batch_validation_failed_total", "counter",
        "Batch answers that did not match their constraint when checked again (a bug in sieve if ever above 0).",
        (double)s->batch_validation_failed);
    head(&w, "batches", "gauge", "Batches by status.");
    for (int i = 0; i < SV_METRIC_N_BATCH_STATUS; i++)
        wf(&w, "sieve:batches{model_name=\"%s\",status=\"%s\"} %llu\n", model, sv_metric_batch_status[i],
           (unsigned long long)s->batches[i]);
    num(&w, "engine_faults_total", "counter",
        "Internal faults the engine recovered from (the requests in flight failed with a 500).", (double)s->engine_faults);
    cache_info(&w, s, false);
    if (vllm)
        vllm_series(&w, m, s);
    return w.st;
}
