/* schema.h — JSON Schema (drafts 4 to 2020-12) to a byte-level DFA.
 *
 * The DFA accepts JSON texts of values that validate against the schema, and
 * every such value in its canonical spelling: whitespace per the mode below,
 * object keys in one fixed order per position (the properties named by the
 * schemas that apply there, in first-appearance order, then keys only
 * required lists name; other keys after them), strings with only the escapes
 * json.dumps(ensure_ascii=False) writes, numbers as json.dumps writes ints
 * and floats (10, 10.0, 0.5, -0.0). Positive languages also take a few more
 * spellings that real data uses: up to 3 more key orders per position (an
 * anyOf/oneOf branch's, a required list's), 10.0 for an integer (draft 6
 * on), and exponents for typed numbers (1e-05, 1e+16) where every value of
 * the exponent range satisfies the bounds. Other spellings of valid values
 * are rejected (keys in other orders, 1E-5): generation never needs them. No
 * invalid value is ever accepted.
 *
 * Every keyword that constrains instances is either compiled exactly or
 * refused with an error naming the keyword and the JSON pointer of its
 * schema location; annotations are ignored and reported. */
#ifndef SV_FSM_SCHEMA_H
#define SV_FSM_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "dfa.h"

typedef enum {
    SV_WS_CANONICAL,  /* exactly json.dumps: ", " between items, ": " after keys */
    SV_WS_COMPACT,    /* no whitespace at all */
    SV_WS_FLEXIBLE,   /* JSON whitespace wherever JSON allows it (runs capped by the matcher) */
} sv_ws_mode;

typedef enum {
    SV_KEY_ORDER_SCHEMA,  /* definition order (and a few orders real data follows) */
    SV_KEY_ORDER_ANY,     /* any order, each key at most once */
    SV_KEY_ORDER_ANY_OUTSIDE_PRODUCTS, /* any order, but objects in an intersection (allOf, a
                                          union beside type keywords) keep the schema's orders:
                                          the retry when ANY outgrows a budget there */
    SV_KEY_ORDER_ANY_OUTSIDE_DIFFERENCES, /* any order, but objects in a language a difference sees
                                             (`not`, an overlapping oneOf, `if`) keep the schema's
                                             orders: the retry when ANY outgrows a budget there, or
                                             when such an object was too big for its key sets */
} sv_key_order;

#define SV_SCHEMA_ANY_DEPTH_AUTO UINT32_MAX
#define SV_SCHEMA_ANY_DEPTH_MIN 3  /* auto: the depth of values at level 3 and below */
#define SV_SCHEMA_ANY_DEEP_ARRAYS_MAX 4

#define SV_SCHEMA_NARROWED_DEPTH 1u  /* the deep levels (and auto's depth) */
#define SV_SCHEMA_NARROWED_ORDERS 2u /* the extra key orders */
#define SV_SCHEMA_NARROWED_CALLS 4u  /* free-form values as calls (compiled flat instead: a choice
                                        competed with a call, see program.c) */
#define SV_SCHEMA_NARROWED_KEY_SETS 8u /* --key-order any's key sets (the schema's orders instead) */
#define SV_SCHEMA_NARROWED_PRODUCT_KEY_SETS 16u /* key sets in intersections (kept outside them) */
#define SV_SCHEMA_NARROWED_ONEOF_DEPTH 32u /* an overlapping oneOf's universe at the free-form depth, not its
                                              branches' (schema.c, SV_SC_DEEP_ONEOF_WORK) */
#define SV_SCHEMA_NARROWED_DIFFERENCE_KEY_SETS 64u /* key sets in languages a difference sees (kept outside
                                                      them) */

/* A frame of free text around the JSON text (opts.frame; tool calls that a
 * model writes inside its own text: src/api/tools.h). The free text stops
 * at the first occurrence of trigger (fsm/internal/free_text.h):
 *   blocks, repeat   (text · trigger · open · VALUE · close)* · text
 *   blocks, once     text  |  text · trigger · open · VALUE · close
 *   not blocks       text  |  text · VALUE   (VALUE starts with the trigger,
 *                                            and nothing follows it)
 * where text never holds the trigger. The value keeps everything a schema
 * compiles to, its calls (parts) included: the frame's free text is dead by
 * the time the value makes a call (the trigger has been read). */
typedef struct sv_schema_frame {
    const char *trigger;   /* non-empty */
    const char *open, *close;
    bool blocks, repeat;
} sv_schema_frame_t;

typedef struct sv_schema_opts {
    sv_ws_mode ws;
    bool strict_properties;    /* absent additionalProperties means false (vLLM's
                                  disable_additional_properties) */
    bool unknown_formats_ok;   /* treat unknown formats as annotations */
    uint32_t max_ref_depth;    /* expansions of one $ref along a path (default 5) */
    uint32_t max_any_depth;    /* nesting of unconstrained values: N levels wherever
                                  they are (default 3), or SV_SCHEMA_ANY_DEPTH_AUTO:
                                  max(3, any_depth_total - L) levels for a value at
                                  instance level L (the root is level 0). A DFA for
                                  depth d needs about 2^d copies of a level, so depth
                                  goes where the values are few: near the root */
    uint32_t any_depth_total;  /* auto: the nesting reached from the root (default 6) */
    uint32_t any_deep_levels;  /* beyond max_any_depth, this many more levels of
                                  nesting (default 3) in stacks of containers that
                                  hold at most any_deep_arrays arrays (default 1): a
                                  stack of objects costs one copy of a level where
                                  every stack costs 2^d, and deep data is mostly
                                  objects in objects */
    uint32_t any_deep_arrays;
    bool any_calls;            /* free-form containers as calls into one shared part
                                  (program.c): any depth, one copy (default true);
                                  inside products too (program_product.c), unless a
                                  call there cannot be kept: then the bounded shape */
    sv_key_order key_order;    /* object keys in the schema's order (default), or in any
                                  order, each at most once (objects with few keys: see
                                  docs/fsm.md "Key order") */
    bool extra_key_orders;     /* true (default): in schema key order, an object also takes
                                  up to 3 more orders that real data follows (an anyOf or
                                  oneOf branch's, a required list's); false: the definition
                                  order alone. The server's tool calls
                                  (src/api/tools.h) compile with false: only generation reads
                                  them, and the extra orders cost about a third of a big tool
                                  set's compile */
    uint32_t max_string_length;/* a maxLength above this is narrowed to it (default 512
                                  code points): each counted character costs DFA states */
    bool discriminator_annotation; /* false (default): a oneOf with OpenAPI's discriminator
                                  requires its propertyName in each branch that defines it
                                  (as OpenAPI and Pydantic do), which makes a tagged union
                                  whose tag has a default a union instead of a difference;
                                  true: discriminator is an annotation, as in JSON Schema */
    sv_fsm_limits_t lim;
    const sv_schema_frame_t *frame; /* NULL (default): the JSON text alone; else borrowed */
    bool oneof_shallow;        /* set by the compiler's own narrower attempts (schema.c
                                  compile_schema): an overlapping oneOf's universe at the
                                  free-form depth, not its branches' */
} sv_schema_opts_t;

void sv_schema_opts_default(sv_schema_opts_t *o);

/* What compilation noticed besides the DFA. */
#define SV_SCHEMA_MAX_IGNORED 32
typedef struct sv_schema_info {
    uint32_t nignored;                       /* distinct annotation/unknown keywords seen */
    char ignored[SV_SCHEMA_MAX_IGNORED][48]; /* the first SV_SCHEMA_MAX_IGNORED of them */
    bool ref_truncated;                      /* a recursive $ref was cut at max_ref_depth */
    uint32_t nnarrowed;                      /* maxLength values narrowed to max_string_length */
    size_t mem_peak;                         /* the most bytes the compile held at once, as its
                                                memory account counts them (arenas, automata) */
    uint32_t nkey_order_narrowed;            /* --key-order any: objects kept in their key
                                                orders (too many keys for their key sets) */
    uint32_t nkey_set_frames;                /* --key-order any: objects whose key set the walk
                                                keeps (program.c, "Key sets") */
    uint32_t ndiscriminator_required;        /* oneOf branches whose discriminator property
                                                the compile made required (discriminator_annotation) */
    uint32_t narrowed_by_budget;             /* SV_SCHEMA_NARROWED_*: what exceeded a budget and
                                                was dropped; the language is the narrower one (so
                                                it may differ between whitespace modes, whose
                                                automata differ in size) */
} sv_schema_info_t;

/* Compiles the schema text (JSON). On success *out is a new DFA the caller
 * frees with sv_dfa_destroy. On failure err has the message, and, where the
 * schema is at fault, err->keyword and err->pointer. info may be NULL. */
sv_status sv_schema_compile(const char *text, size_t len, const sv_schema_opts_t *o, sv_dfa_t **out,
                            sv_schema_info_t *info, sv_error_t *err);

/* Builds the automata every schema shares for o's whitespace mode (the
 * content and spelling of any string, the free-form container part: the
 * prelude of fsm/schema_text.c) now, once per process, so that no later
 * compile builds them: the server calls it at startup. */
sv_status sv_schema_prelude_warm(const sv_schema_opts_t *o, sv_error_t *err);

#endif
