/* metrics.h — the server's Prometheus metrics (GET /metrics).
 *
 * Names are `sieve:` prefixed and follow the ones dashboards built for vLLM
 * expect (num_requests_running, e2e_request_latency_seconds, ...), each with
 * a model_name label. Counters the server keeps itself (tokens, finished
 * requests, latency histograms) live in sv_metrics_t, updated on the HTTP
 * thread only; the engine's and the constraint cache's counters are read as
 * snapshots when the page is rendered (sv_metrics_snapshot_t). */
#ifndef SV_SERVER_METRICS_H
#define SV_SERVER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "src/tokenizer/buf.h"

#define SV_HIST_MAX_BUCKETS 24

typedef struct sv_histogram {
    const double *bounds;   /* (n_bounds) upper bounds, increasing; +Inf is implicit */
    size_t n_bounds;
    uint64_t counts[SV_HIST_MAX_BUCKETS]; /* not cumulative: counts[i] is in (bounds[i-1], bounds[i]] */
    uint64_t count;
    double sum;
} sv_histogram_t;

void sv_histogram_observe(sv_histogram_t *h, double v);

enum { SV_METRIC_STOP, SV_METRIC_LENGTH, SV_METRIC_ABORT, SV_METRIC_TOOL_CALLS, SV_METRIC_N_REASONS };

typedef struct sv_metrics {
    sv_histogram_t ttft, itl, e2e, compile;           /* online requests (and compiles) */
    sv_histogram_t batch_ttft, batch_itl, batch_e2e;  /* X-Sieve-Priority: batch requests */
    uint64_t prompt_tokens, generation_tokens;
    uint64_t success[SV_METRIC_N_REASONS]; /* by finished_reason */
    uint64_t errors;                      /* requests answered with an error status */
} sv_metrics_t;

void sv_metrics_init(sv_metrics_t *m);

#define SV_METRIC_N_BATCH_STATUS 8
extern const char *const sv_metric_batch_status[SV_METRIC_N_BATCH_STATUS];

typedef struct sv_metrics_snapshot {
    uint32_t running, waiting;       /* online requests */
    uint32_t batch_running, batch_waiting;
    double kv_usage;                 /* 0..1 */
    uint64_t prefix_queries, prefix_hits, preemptions, jump_forward_tokens;
    uint64_t batch_steps_interrupted; /* batch-only steps given up for an online request */
    uint64_t ccache_hits, ccache_misses;
    double ccache_bytes, dfa_memo_bytes;
    uint32_t compiles_waiting, compiles_running;
    double compile_memory_bytes;
    uint64_t compiles_refused, compiles_cancelled;
    uint64_t engine_faults;
    int alive;
    uint64_t batch_lines_ok, batch_lines_failed;  /* batch output lines written */
    uint64_t batch_validation_failed;             /* of the failed: answers the independent check refused */
    uint64_t batches[SV_METRIC_N_BATCH_STATUS];     /* batches by status (sv_metric_batch_status) */
    uint32_t block_size, num_blocks;  /* the KV cache: positions per block, blocks */
} sv_metrics_snapshot_t;

/* Appends the Prometheus text exposition (format 0.0.4). vllm: the series
 * that routers and autoscalers built for vLLM read (the Gateway API
 * Inference Extension's endpoint picker, the production-stack router,
 * KServe and KEDA) again under their vllm: names, with the same values
 * (docs/metrics.md has the mapping). SV_ERR_NOMEM. */
sv_status sv_metrics_format(const sv_metrics_t *m, const sv_metrics_snapshot_t *s, const char *model_name,
                            bool vllm, sv_bytes_t *out);

#endif
