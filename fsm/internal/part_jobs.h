/* part_jobs.h — compiling a schema's big parts on helper threads.
 *
 * A schema compile builds its parts' languages one after another on its own
 * thread, and most of a big part's time is the subset construction and the
 * minimization of its language (dfa_cache.c compile_uncached), which needs
 * nothing of the schema compile but the language itself. So the compile
 * hands such a part to a helper (schema.c ref_part) and goes on with the
 * rest; it waits for the DFA only where it reads it, or before it links
 * the program. A tool set is the common case: each tool's arguments are one
 * part (tools.c), and the compile builds the next tool while a helper
 * determinizes the last.
 *
 * The helpers are a process-wide pool, started on first use: one fewer than
 * the processors, at most SV_PART_JOBS_MAX_HELPERS, or the number in the
 * environment variable SIEVE_COMPILE_HELPERS (0: none; every job then runs
 * on the compile's own thread when it is waited for, which is the
 * sequential compile). A job nobody has started yet is run by the thread
 * that waits for it, so a busy pool never makes a compile wait for others.
 *
 * A job copies its language (the AST, not the DFAs it embeds, which the
 * compile keeps alive until it has waited for every job), and compiles it
 * under the compile's own memory account, joined (util/memacct.h), and its
 * limits and deadline: the budget holds for both threads together. */
#ifndef SV_FSM_PART_JOBS_H
#define SV_FSM_PART_JOBS_H

#include "fsm/ast.h"
#include "fsm/dfa.h"

#define SV_PART_JOBS_MAX_HELPERS 8

typedef struct sv_part_job sv_part_job_t;

/* Whether helpers run at all (the pool is started here on first use). */
bool sv_part_jobs_enabled(void);
/* Queues the compilation of ast's language under lim (copied) and the
 * calling thread's open memory account; NULL when out of memory (the caller
 * then compiles it itself). */
sv_part_job_t *sv_part_job_submit(const sv_ast_t *ast, const sv_fsm_limits_t *lim);
/* The job's result, and frees the job: runs it here if no helper has
 * started it, else waits for it. *out is the DFA (the caller's), or NULL
 * with err set. */
sv_status sv_part_job_wait(sv_part_job_t *j, sv_dfa_t **out, sv_error_t *err);
/* Runs the job on this thread if no helper has started it (the result
 * waits for sv_part_job_wait): a compile about to wait for all its jobs
 * takes the newest itself while the helpers take the oldest. */
void sv_part_job_help(sv_part_job_t *j);
/* Frees the job without its result (waiting for a helper that runs it). */
void sv_part_job_drop(sv_part_job_t *j);

#endif
