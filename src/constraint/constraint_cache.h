/* constraint_cache.h — compiled constraints, shared and bounded.
 *
 * Compiling a schema and warming its token index costs milliseconds to
 * seconds; agents and batch jobs send the same schema again and again. The
 * cache keys a compiled constraint (its DFA and token index, with every mask
 * computed so far) by the canonical constraint text (a schema re-serialized
 * compactly in its own key order, since order is meaningful to sieve; a
 * regex verbatim), its kind, the compile options that change the language
 * (whitespace mode, strict properties, unknown formats, depths, string-length
 * narrowing) and the token set. Budgets are not part of the key: they bound
 * work, not the result.
 *
 * It is bounded in bytes (DFA tables plus the masks each index has stored,
 * which grow as requests visit new states): least recently used entries that
 * no request holds are evicted until the total fits. A request holds its
 * entry from sv_constraint_get to sv_constraint_release, so an entry in use is
 * never freed under it.
 *
 * Thread-safe: any thread may get and release. When several threads ask for
 * the same missing key at once, one compiles and the others wait for it.
 * Failed compilations are not cached (the error goes to each caller). */
#ifndef SV_ENGINE_CONSTRAINT_CACHE_H
#define SV_ENGINE_CONSTRAINT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsm/schema.h"
#include "fsm/token_index.h"

/* A regex (fsm/regex.h), a JSON Schema (fsm/schema.h), a GBNF grammar
 * (fsm/grammar.h) or a structural tag (fsm/structural_tag.h: the
 * response_format object's JSON; opts apply to its JSON Schema contents). */
typedef enum {
    SV_CONSTRAINT_REGEX,
    SV_CONSTRAINT_SCHEMA,
    SV_CONSTRAINT_GRAMMAR,
    SV_CONSTRAINT_STRUCTURAL_TAG,
    SV_CONSTRAINT_FRAMED_SCHEMA, /* {"frame": {"trigger", "open", "close", "blocks", "repeat"},
                                    "schema": SCHEMA}: the schema's JSON inside free text
                                    (fsm/schema.h, sv_schema_frame_t; src/api/tools.h) */
} sv_constraint_kind;

typedef struct sv_constraint_cache sv_constraint_cache_t;
typedef struct sv_constraint sv_constraint_t;

/* max_bytes: the budget (entries in use may exceed it until released).
 * Token sets are keyed by address: they must outlive the cache. */
sv_status sv_ccache_create(size_t max_bytes, sv_constraint_cache_t **out, sv_error_t *err);
/* Frees every entry; no entry may be held. */
void sv_ccache_destroy(sv_constraint_cache_t *c);

/* One constraint as its caller asks for it: what the cache keys and
 * compiles. Every caller (the server's requests and batches, `sieve
 * generate` with and without --batch, `sieve batch`, `sieve maskbench`)
 * gets its constraints this way, so the steps from text to token index are
 * written once (sv_constraint_get). */
typedef struct sv_constraint_spec {
    sv_constraint_kind kind;
    const char *text;             /* a schema's JSON text or a regex; need not end in NUL */
    size_t len;
    const sv_schema_opts_t *opts; /* language and budgets (a regex reads lim only); NULL: defaults */
    const sv_token_set_t *tokens; /* keyed by address: must outlive the cache */
} sv_constraint_spec_t;

/* The longest run of JSON whitespace a schema in flexible whitespace mode
 * may write (fsm/token_index.h, "Whitespace cap"): enough for any
 * indentation a model writes, short of the loops of spaces and newlines
 * that an uncapped `\s*` lets a small model fall into. */
#define SV_CONSTRAINT_WS_CAP 16u

/* The token index's whitespace cap for a constraint: SV_CONSTRAINT_WS_CAP
 * for a schema in flexible mode, else none (0). */
uint32_t sv_constraint_ws_cap(sv_constraint_kind kind, const sv_schema_opts_t *opts);

/* Compiles an SV_CONSTRAINT_FRAMED_SCHEMA text (what the cache does on a
 * miss; the CLI's --tool-format tagged does it without a cache). */
sv_status sv_constraint_framed_compile(const char *text, size_t len, const sv_schema_opts_t *opts, sv_dfa_t **out,
                                      sv_error_t *err);

/* The compiled constraint for spec, compiled (and its token index built)
 * on a miss. *hit (may be NULL) says whether it was found. On success the
 * caller holds *out and must sv_constraint_release it. */
sv_status sv_constraint_get(sv_constraint_cache_t *c, const sv_constraint_spec_t *spec, sv_constraint_t **out,
                            bool *hit, sv_error_t *err);
/* The compiled constraint if it is in the cache and ready, else *out NULL
 * (a miss: not counted, nothing compiled, never waits for a compile in
 * progress). On a hit the caller holds *out, as with sv_constraint_get. */
sv_status sv_constraint_find(sv_constraint_cache_t *c, const sv_constraint_spec_t *spec, sv_constraint_t **out,
                             sv_error_t *err);
void sv_constraint_release(sv_constraint_cache_t *c, sv_constraint_t *e);

sv_token_index_t *sv_constraint_index(sv_constraint_t *e);
/* Microseconds the compilation took, token index included (0 for entries
 * compiled by nobody yet), and of those the token index's. */
uint64_t sv_constraint_compile_us(const sv_constraint_t *e);
uint64_t sv_constraint_index_us(const sv_constraint_t *e);

typedef struct sv_ccache_stats {
    uint32_t entries;
    size_t bytes;          /* as of the last accounting (each get and release) */
    uint64_t hits, misses, evictions, waits;
} sv_ccache_stats_t;
void sv_ccache_stats(sv_constraint_cache_t *c, sv_ccache_stats_t *st);

#endif
