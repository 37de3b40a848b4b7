/* schema_internal.h — shared state of the JSON Schema compiler's files:
 * schema.c (loading, $ref, keyword dispatch, boolean keywords),
 * schema_text.c (whitespace, strings, literals, the universe of values),
 * schema_container.c (objects and arrays), schema_disjoint.c (oneOf
 * branches that share no value). */
#ifndef SV_FSM_SCHEMA_INTERNAL_H
#define SV_FSM_SCHEMA_INTERNAL_H

#include <jansson.h>
#include <stdio.h>

#include "util/arena.h"
#include "fsm/ast.h"
#include "dfa_internal.h"
#include "fsm/schema.h"

#define SV_SCHEMA_MAX_ANY 16
/* Call marker ids of the schema compiler's parts (program.c). */
#define SV_SCHEMA_PART_ANY 1
#define SV_SCHEMA_PART_FIRST 2  /* parts registered by sv_sc_part */
/* Key orders an object location accepts: the canonical one and up to 3 more
 * (schema_container.c). */
#define SV_SCHEMA_MAX_ORDERS 4
/* Subschemas compiled inside one another (sv_sc_lang's recursion). */
#define SV_SCHEMA_MAX_NESTING 256

/* The set of schema objects that apply at one instance location, closed
 * under the in-place applicators (allOf, anyOf, oneOf, not, if/then/else,
 * $ref). It fixes the order of object keys at that location. */
typedef struct sv_loc {
    json_t **v;       /* the schemas */
    uint32_t n;
    json_t **lits;    /* const/enum values that apply here (from these schemas
                         or from literals at enclosing locations) */
    uint32_t nlits;
    json_t **ctx;     /* the context: schemas every valid value here satisfies
                         (see "Member context" in schema.c) */
    uint32_t nctx;
    uint32_t orders;  /* key orders an object here may accept, divided among
                         the objects below it (schema_container.c) */
    uint32_t level;   /* instance nesting level (root 0), capped where the
                         depth of free-form values stops depending on it */
} sv_loc_t;

/* An exact oneOf's result, by its branches' and universe's fingerprints
 * and the universe's depth (schema.c); in the compile's arena. */
typedef struct oneof_memo {
    struct oneof_memo *next;
    uint32_t n, depth;
    const uint64_t *fp; /* n + 1: the branches', then the universe's */
    struct sv_dfa *res;
    bool narrowed;      /* built again at the free-form depth */
} oneof_memo_t;

typedef struct sctx {
    sv_arena_t *arena;
    const sv_schema_opts_t *o;
    sv_schema_info_t *info;
    sv_error_t *err;
    json_t *root;
    struct sv_refmap *refs;    /* schema_ref.c */
    struct sv_numtexts *numtexts; /* schema_numtext.c */
    int draft;                 /* 4, 6, 7, 2019 or 2020 */
    char ptr[1024];            /* JSON pointer of the schema being compiled */
    size_t ptr_len;
    /* $ref expansion: targets on the current path and their counts. */
    json_t *ref_stack[256];
    uint32_t ref_depth;
    bool truncated;            /* the language built since the last negation point may
                                  miss valid values (a $ref cut at max_ref_depth, or a
                                  format sieve narrows): no complement over it */
    uint32_t canon_depth;      /* container levels left in the canonical universe */
    uint64_t deep_oneof_left;  /* states of products left to oneOfs over deeper universes (schema.c) */
    struct oneof_memo *oneofs; /* exact oneOfs made so far (schema.c) */
    bool more_orders;          /* some object accepts more than one key order */
    bool product_keysets;      /* some object in an intersection took key sets */
    bool diff_keysets;         /* some object in a language a difference sees took key sets */
    /* --key-order any: the locations whose objects keep the schema's
     * orders in the languages a difference sees (sv_sc_keysets_at), and
     * the location of the object that failed the attempt there
     * (schema_container.c order_narrowed; compile_schema adds it) */
    const uint64_t *ko_locs;
    uint32_t nko_locs;
    uint64_t ko_failed;
    bool keyset;               /* --key-order any (schema_container.c object_anyorder) */
    uint32_t lang_depth;       /* sv_sc_lang calls open (SV_SCHEMA_MAX_NESTING) */
    uint32_t ctx_depth;        /* member contexts open (schema_container.c) */
    bool deep_any;             /* some free-form value nests deeper than SV_SCHEMA_ANY_DEPTH_MIN,
                                  or takes the deep levels beyond it */
    uint64_t deadline_ns;      /* the whole compilation's time budget (0 = none) */
    sv_fsm_limits_t lim_now;   /* o->lim with the time that is left */
    /* Caches (DFAs live in the arena's cleanup list). */
    sv_dfa_t **any_value;      /* free-form values by shape (schema_text.c), from the arena */
    sv_dfa_t *any_string;      /* content [^]* */
    struct sv_memo *memo;      /* compiled (schema, location) pairs (schema.c) */
    struct sv_patcache *pats;  /* compiled patternProperties regexes (schema.c) */
    uint32_t npats, cappats;
    uint32_t nmemo, capmemo;
    sv_ast_t *any_number[2];   /* [with exponents] */
    sv_dfa_t *py_numbers;      /* the Python number spellings */
    struct sv_quoted { const sv_dfa_t *content; sv_ast_t *ast; } quoted[32]; /* sv_sc_quoted's DFAs by content */
    uint32_t nquoted;
    struct sv_numlang { const char *key; sv_ast_t *ast; } nums[32]; /* number languages by bounds (schema.c) */
    uint32_t nnums;
    /* Free-form containers as calls (program.c): on for the compilation,
     * off (no_calls > 0) while building a language that enters a product,
     * which needs flat automata; a marker that reaches a product anyway
     * sets calls_conflict and the compilation is redone without calls. */
    bool calls;
    uint32_t no_calls;
    /* Key sets (--key-order any) are off (no_keysets > 0) while building a
     * language that a difference sees (sv_sc_keysets). */
    uint32_t no_keysets;
    /* Key sets in the walk (program.c, "Key sets"): an object too wide for
     * its automaton of key sets is a part whose guards the walk checks
     * against the keys written; off in the retry after a conflict that
     * such an object was in (frames_used). */
    bool frames, frames_used;
    sv_kcond_t *kconds;        /* their close conditions, by SV_ANN_COND0 + index */
    uint32_t nkconds, capkconds;
    bool calls_conflict;
    /* Free-form values as calls inside products too (program_product.c):
     * on in the first attempt; any_products_used says the compile made
     * such a call, so that a conflict retries without them first. */
    bool any_products, any_products_used;
    sv_dfa_t *any_part;        /* the free-form container part (raw, with markers) */
    sv_dfa_t **parts;          /* other parts by id - SV_SCHEMA_PART_FIRST (sv_sc_part) */
    uint32_t nparts, capparts;
    bool ref_parts;            /* big $ref targets as parts (schema.c ref_part) */
    /* Member values of 16 states or more as parts (schema_container.c), on
     * in the first attempt; small_parts_used says the compile made such a
     * part, so that a conflict retries with only big values as parts
     * first (one whose object meets another in a union may be called where
     * the other has bytes). */
    bool small_parts, small_parts_used;
    /* An allOf distributed over a union among its conjuncts (schema.c
     * distribute_allof), on in the first attempt; distributed says one was,
     * so that a conflict retries without first (the union's objects may
     * call different values where only a later tag tells them apart). */
    bool distribute, distributed;
    struct { sv_ast_t *ast, *call; } *refparts;
    uint32_t nrefparts, caprefparts;
    struct sv_rec { json_t *t; uint32_t id; bool used; } recs[64]; /* $ref targets open as parts */
    struct { json_t *from, *merged; bool active; } *merges; /* allOf of plain objects, merged (schema.c
                                                                 merge_allof); active while compiled */
    uint32_t nmerges, capmerges;
    /* A member's schemas met as one allOf (schema.c sv_sc_meet), the same
     * JSON for the same schemas, so that merges and languages are memoized. */
    struct { json_t *src[8], *all; uint32_t n; } *meets;
    uint32_t nmeets, capmeets;
    uint32_t nrecs;
    /* Unions whose branches call parts still open (schema.c defer_union):
     * each a part reserved now and compiled once every part is known. */
    struct sv_deferred { uint32_t id; sv_ast_t **alts; uint8_t *inline_it; uint32_t n; const char *ptr; } *deferred;
    uint32_t ndeferred, capdeferred;
    uint32_t disjoint_steps;   /* of the oneOf disjointness proof under way (schema_disjoint.c) */
    /* Parts cut to a type (schema_typed.c), each (part, type) once: the
     * result's id (0: none is left); where the source part was still open
     * (reserved), an id reserved now and filled by sv_sc_type_filter_finish.
     * state: 0 reserved and not filled, 1 being cut, 2 done. */
    struct sv_typed_part { uint32_t id, src; int mask; uint8_t state; bool reserved; } *typed;
    uint32_t ntyped, captyped;
    bool typed_final;          /* sv_sc_type_filter_finish is running */
    /* Parts compiled on helper threads (fsm/internal/part_jobs.h, schema.c
     * ref_part): each reserved (parts[idx] NULL) until sv_sc_part_at waits
     * for it. job NULL once waited for. The first job that failed, in the
     * order they were waited for, is the compile's error (job_st). */
    bool async_parts;
    struct sv_pending {
        uint32_t idx;
        struct sv_part_job *job;
        const char *ptr;
        uint8_t *key;          /* sv_ast_key of the language (malloc'd): an equal one is this part */
        size_t nkey;
        uint64_t hash;
        sv_ast_t *call;
    } *pending;
    uint32_t npending, cappending;
    sv_status job_st;
} sctx_t;

/* Whether free-form values are calls here. */
static inline bool sv_sc_calls(const sctx_t *c) { return c->calls && !c->no_calls; }
/* Whether objects here take keys in any order (--key-order any).
 * Intersections (allOf, a union beside type keywords) keep key sets: a
 * spelling in both operands is a value valid in both, whatever orders each
 * holds. A language a difference sees (`not`, a oneOf that is no union,
 * `if`, dependencies that are no key conditions, maxContains; no_keysets >
 * 0) is subtracted from or subtracts, and the subtracted language must hold
 * every spelling of its values that the positive operand holds, or the
 * difference keeps spellings of values it was meant to remove. With
 * SV_KEY_ORDER_ANY every object there takes key sets, the universe's too
 * (sv_sc_object's canonical_any), and one that cannot (too many keys, over
 * keyset_fits' share of the budget) fails the attempt as a budget
 * (schema_container.c order_narrowed): the retry keeps schema orders in
 * every such language (SV_KEY_ORDER_ANY_OUTSIDE_DIFFERENCES), where both
 * operands then hold the same orders. */
static inline bool sv_sc_keysets(const sctx_t *c) {
    sv_key_order k = c->o->key_order;
    return c->keyset && (!c->no_keysets || k == SV_KEY_ORDER_ANY) &&
           (!c->no_calls || k == SV_KEY_ORDER_ANY || k == SV_KEY_ORDER_ANY_OUTSIDE_DIFFERENCES);
}

/* A location's identity across the attempts of one compile: the schemas
 * and literals that apply there (schema_container.c). */
uint64_t sv_sc_loc_id(const sv_loc_t *loc);
/* sv_sc_keysets for an object at loc: off in the languages a difference
 * sees where an earlier attempt found an object there too big for key
 * sets. Every language at a location decides alike, the universe's too, so
 * the two sides of a difference hold the same orders there. */
static inline bool sv_sc_keysets_at(const sctx_t *c, const sv_loc_t *loc) {
    if (!sv_sc_keysets(c)) return false;
    if (!c->no_keysets || !c->nko_locs) return true;
    uint64_t id = sv_sc_loc_id(loc);
    for (uint32_t i = 0; i < c->nko_locs; i++)
        if (c->ko_locs[i] == id) return false;
    return true;
}

/* ---- errors and pointers (schema.c) ---- */
sv_status sv_sc_fail(sctx_t *c, sv_status code, const char *keyword, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
size_t sv_sc_push(sctx_t *c, const char *token);   /* returns the length to restore */
void sv_sc_pop(sctx_t *c, size_t len);
sv_status sv_sc_nomem(sctx_t *c);
/* The budgets for the next DFA construction: o->lim with max_time_us cut to
 * what is left of the whole compilation's time budget. */
const sv_fsm_limits_t *sv_sc_lim(sctx_t *c);
/* top inside the frame f (fsm/schema.h, schema_frame.c); the frame's free
 * text DFAs go to kept[0..1] (NULL where unused), which the caller frees
 * once the whole is compiled. */
sv_status sv_sc_frame(sctx_t *c, const sv_schema_frame_t *f, sv_ast_t **top, sv_dfa_t *kept[2]);

/* ---- languages (schema.c) ---- */
/* The nesting allowed to a free-form value at instance level `level`. */
uint32_t sv_sc_any_depth(sctx_t *c, uint32_t level);
/* The level of a location one container below loc (capped as sv_loc_t says). */
uint32_t sv_sc_child_level(const sctx_t *c, const sv_loc_t *loc);
/* The language of schema s at location loc. */
sv_status sv_sc_lang(sctx_t *c, json_t *s, const sv_loc_t *loc, sv_ast_t **out);
/* Compiles an AST to a DFA owned by the arena. */
sv_status sv_sc_dfa(sctx_t *c, sv_ast_t *ast, sv_dfa_t **out);
/* The content DFA of a regex with JSON Schema's search semantics, compiled
 * once per pattern text; *out NULL when it matches nothing. On a bad regex
 * fails with keyword kw. */
sv_status sv_sc_pattern_dfa(sctx_t *c, const char *pattern, const char *kw, sv_dfa_t **out);
/* An AST as a DFA (an embedded DFA is reused as it is); *out NULL when the
 * language is empty. */
sv_status sv_sc_to_dfa(sctx_t *c, sv_ast_t *a, sv_dfa_t **out);
/* A product under the compilation's budgets, owned by the arena; NULL
 * operands stand for the empty language, and *out is NULL when the result is
 * empty. Errors name keyword kw. */
sv_status sv_sc_product(sctx_t *c, sv_dfa_t *a, sv_dfa_t *b, sv_dfa_op op, const char *kw, sv_dfa_t **out);
/* Frees now a product that sv_sc_product made and nothing refers to any
 * more (an intermediate of a chain of products), rather than with the
 * arena: without it a chain holds every intermediate until the compile
 * ends. Only for a result the caller made itself, never an operand it was
 * given. */
void sv_sc_drop(sctx_t *c, sv_dfa_t *d);
/* Location sets. */
/* lits: literal values inherited from the enclosing location (may be NULL). */
sv_status sv_sc_loc_closure(sctx_t *c, json_t *const *seeds, uint32_t n, json_t *const *lits, uint32_t nlits,
                            sv_loc_t *out);
sv_status sv_sc_loc_property(sctx_t *c, const sv_loc_t *loc, const char *key, sv_loc_t *out);
/* Sets loc's context to the schemas that hold wherever seeds[0..n) all hold. */
sv_status sv_sc_loc_context(sctx_t *c, json_t *const *seeds, uint32_t n, sv_loc_t *loc);
/* The schemas loc's context puts on the value of member key (its
 * properties, matching patternProperties, or additionalProperties schemas),
 * leaving out those that constrain nothing ({} and true); arena memory. */
sv_status sv_sc_ctx_sources(sctx_t *c, const sv_loc_t *loc, const char *key, json_t ***out, uint32_t *n);
sv_status sv_sc_loc_item(sctx_t *c, const sv_loc_t *loc, uint32_t index, sv_loc_t *out);
/* Key conditions (schema.c): a schema of required lists under allOf, anyOf,
 * oneOf and not (and "type": "object") is a condition on an object's key
 * set. sv_sc_keycond_keys: 1 + the number of distinct keys it names (into
 * keys), or 0 when x is no such schema or names more than SV_KEYCOND_MAX.
 * sv_sc_keycond_eval: whether it holds for an object holding the keys whose
 * bits are set in present (bit j: keys[j]), or for a non-object (object
 * false: every required holds). sv_sc_not_keys: whether s's `not` is one
 * (and s has no const or enum), compiled as the condition, not a product. */
#define SV_KEYCOND_MAX 6
uint32_t sv_sc_keycond_keys(json_t *x, const char *keys[SV_KEYCOND_MAX]);
/* Adds the keys x names to keys[0..*n), at most cap in all; false if x is
 * no key condition or they do not fit. */
bool sv_sc_keycond_collect(json_t *x, const char **keys, uint32_t *n, uint32_t cap);
bool sv_sc_keycond_eval(json_t *x, const char *const *keys, uint32_t n, uint32_t present, bool object);
bool sv_sc_not_keys(json_t *s);
/* Whether the list a under keyword kw (allOf, anyOf or oneOf) of key
 * conditions holds, as sv_sc_keycond_eval. */
bool sv_sc_keycond_list(json_t *a, const char *kw, const char *const *keys, uint32_t n, uint32_t present, bool object);
/* Whether s's anyOf or oneOf (kw) is a key condition: every branch names
 * keys only, s has no const or enum, it is no single-key condition
 * (sv_sc_any_required, sv_sc_one_required), and with s's other key
 * conditions and dependencies it names at most 8 keys. Compiled as bits of
 * the object's automaton (schema_container.c), not as a union or product. */
bool sv_sc_union_keys(json_t *s, const char *kw);
/* Whether s has schema-valued dependencies (dependentSchemas, or the
 * schema form of dependencies), each naming keys only, over at most
 * SV_KEYCOND_MAX keys with their trigger keys (and no const or enum):
 * conditions too, "k absent, or the schema holds". */
bool sv_sc_deps_keys(json_t *s);
/* Whether the array arr holds the string s (false when arr is no array). */
bool sv_sc_has_string(json_t *arr, const char *s);
/* Adds key to the set fk[0..*nfk) of at most cap keys; false when it is
 * NULL or does not fit (schema.c). */
bool sv_sc_add_key(const char **fk, uint32_t *nfk, uint32_t cap, const char *key);
/* Keywords that never change a schema's language (schema.c). */
bool sv_sc_inert_keyword(const char *k);
/* Whether a and b are the same schema, annotations at their top level aside
 * (schema.c); for schemas whose $refs resolve from the same base. */
bool sv_sc_same_schema(json_t *a, json_t *b);
/* The language at loc of values that satisfy every schema of src[0..n)
 * (2 <= n <= 8), where they merge into one schema (objects, arrays, or an
 * allOf distributed over a union: schema.c merge_allof), so no product of
 * their languages is built; *merged false (and *out untouched) where they do
 * not. An empty language is SV_ERR_EMPTY, as sv_sc_lang's. */
sv_status sv_sc_meet(sctx_t *c, json_t *const *src, uint32_t n, const sv_loc_t *loc, sv_ast_t **out, bool *merged);
/* Whether a $ref's siblings constrain nothing ($defs, annotations), so that
 * the ref alone decides the language in every draft (schema.c). */
bool sv_sc_ref_alone(json_t *s);
/* sv_sc_ref_alone, or a $ref beside only a type its target's type implies. */
bool sv_sc_ref_stands_alone(sctx_t *c, json_t *s);
/* Whether s's anyOf only asks for one of some keys: every branch is
 * {"required": [one key]} (and annotations), and s builds its object
 * language from type keywords (no const/enum). The object language of s
 * then takes it as a condition on its key set (schema_container.c), with no
 * union and no product; non-objects satisfy it as they do every branch. */
bool sv_sc_any_required(json_t *s);
/* The same for s's oneOf ("exactly one of these keys"), where s's type is
 * "object" alone (non-objects would satisfy every branch). */
bool sv_sc_one_required(json_t *s);
/* Whether no value satisfies two of the oneOf branches, proven from their
 * text (schema_disjoint.c); false when not proven. Within the values the
 * type, const or enum of beside (the schema holding the oneOf, or NULL)
 * allows, which must meet the union in a product. */
bool sv_sc_oneof_disjoint(sctx_t *c, json_t *branches, json_t *beside);
/* Whether a branch may be an object with members no schema names (its
 * free-form values are then calls). */
bool sv_sc_oneof_open(sctx_t *c, json_t *branches);
/* A oneOf of closed objects that may overlap, as branches that do not: each
 * branch an object with "type": "object", "additionalProperties": false,
 * properties and required only (inline or through local $refs), and a
 * member several branches name the same schema in each. An object is then
 * in branch j exactly when its keys are among j's members and hold j's
 * required ones, so "in this branch and no other" is the branch with a
 * condition on its keys (a key-only `not`: docs/fsm.md "Key conditions").
 * Returns those branches (a new reference), or NULL when the shape is not
 * this one, a condition would name more than SV_KEYCOND_MAX keys, or
 * another branch holds every value of one (the difference then stays). */
json_t *sv_sc_closed_oneof(sctx_t *c, json_t *branches);

/* Adds each discriminated oneOf's propertyName to the "required" of its
 * branches, in place in the loaded schema root (schema_disjoint.c, where the
 * rules are); returns how many branches changed. */
uint32_t sv_sc_require_discriminators(json_t *root);
/* The classes of values schema s may hold, over-approximated from its
 * type, const and enum (through $refs), numbers as one class: two schemas
 * whose classes do not meet never start with the same byte. */
int sv_sc_first_classes(sctx_t *c, json_t *s);
/* $id/$anchor index of the document (schema_ref.c), built once. */
sv_status sv_sc_refs_index(sctx_t *c);
/* Resolves the $ref string held by schema `from` to its target. */
sv_status sv_sc_resolve_ref(sctx_t *c, json_t *from, const char *ref, json_t **out);

/* ---- exact numbers (schema_numtext.c) ---- */
sv_status sv_sc_numtexts_index(sctx_t *c, const char *text, size_t len);
/* The exact plain decimal of a number node ("-12.5", "10000000000000009999"),
 * or NULL if it has none (an exponent beyond +-4000). buf is scratch. */
const char *sv_sc_decimal(sctx_t *c, json_t *v, char *buf, size_t cap);

/* ---- text pieces (schema_text.c) ---- */
sv_ast_t *sv_sc_lit(sctx_t *c, const char *bytes, size_t n);   /* a literal byte string */
sv_ast_t *sv_sc_ws(sctx_t *c);        /* optional whitespace (flexible mode), else empty */
sv_ast_t *sv_sc_sep(sctx_t *c);       /* between items / members */
sv_ast_t *sv_sc_colon(sctx_t *c);     /* between key and value */
sv_ast_t *sv_sc_cat2(sctx_t *c, sv_ast_t *x, sv_ast_t *y);
sv_ast_t *sv_sc_cat3(sctx_t *c, sv_ast_t *x, sv_ast_t *y, sv_ast_t *z);
/* "content" as a JSON string: '"' + escaped content DFA + '"'. */
sv_ast_t *sv_sc_quoted(sctx_t *c, const sv_dfa_t *content);
/* The JSON string literal of a UTF-8 key (escaped as json.dumps does). */
sv_ast_t *sv_sc_key(sctx_t *c, const char *key, size_t len);
/* Writes '"' + the json.dumps(ensure_ascii=False) escape of s[0..n) + '"' to
 * buf (room for 6n + 2 bytes) and returns its length. */
size_t sv_sc_escape_json(const char *s, size_t n, char *buf);
/* The content DFA of any string, and the any-string JSON language. */
sv_status sv_sc_any_string_content(sctx_t *c, sv_dfa_t **out);
/* Narrows a number language to the spellings Python's json.dumps writes
 * (repr of a float or an int): no exponent, no trailing zeros but the ".0"
 * of an integral float, "-0" only as "-0.0". */
sv_status sv_sc_python_numbers(sctx_t *c, sv_ast_t *lang, sv_ast_t **out);
/* Any number: the plain Python spellings (10, 10.0, 0.5, -0.0), which every
 * number language holds for each value it accepts (so they form the number
 * part of the universe that differences subtract from), and with exponents
 * the exponent spellings too (1e-05: for typed numbers only, since they cost
 * 16 states per copy and free-form values copy them 2^depth times). */
sv_status sv_sc_any_number(sctx_t *c, bool exponents, sv_ast_t **out);
/* An integer language (one spelling per value) widened to the spellings
 * Python writes for integral floats, 10.0 and -0.0, from draft 6 on (where
 * they are integers); draft 4 keeps it as it is. */
sv_status sv_sc_integer_spellings(sctx_t *c, sv_ast_t *lang, sv_ast_t **out);
/* Any JSON value nested at most depth levels (numbers in their plain Python
 * spellings, objects with keys in any order, a key possibly twice). */
sv_status sv_sc_any_value(sctx_t *c, uint32_t depth, sv_ast_t **out);
/* A free-form value as a call into the free-form part, inside a language
 * that enters a product (c->any_products): every value, to any depth. The
 * same language as the canonical universe at a location no schema names,
 * since that universe fixes no key order there. */
sv_status sv_sc_any_call_in_product(sctx_t *c, sv_ast_t **out);
/* The spellings of a JSON value (const/enum), keys ordered per location. */
sv_status sv_sc_literal(sctx_t *c, json_t *v, const sv_loc_t *loc, sv_ast_t **out);
/* The JSON strings of a string schema (pattern, lengths, format), quoted:
 * a length alone is written down directly (json_quote.c), the rest is the
 * content's product quoted (sv_sc_quoted). */
sv_status sv_sc_string(sctx_t *c, json_t *s, sv_ast_t **out);

/* A call to a new part whose language is d (raw, owned by the arena): the
 * marker AST in *out. Only where sv_sc_calls(c). With d and out NULL it
 * reserves the next id (filled in later). */
sv_status sv_sc_part(sctx_t *c, sv_dfa_t *d, sv_ast_t **out);
/* The same, giving the part's marker id (d's own when an equal part exists). */
sv_status sv_sc_part_id(sctx_t *c, sv_dfa_t *d, uint32_t *id);
/* Values of SV_SC_BIG_PART_MIN states or more are parts where calls are
 * on: in any object (schema_container.c), as array items, and as the
 * alternatives of a union that no other alternative starts alike. */
#define SV_SC_BIG_PART_MIN 256u
/* The deepest canonical universe a oneOf's branches ask for (schema.c
 * json_depth): a bound on their containers' nesting, which only recursive
 * schemas near max_ref_depth approach. */
#define SV_SC_CANON_DEPTH_MAX 32u
/* The states of products a compile may spend on oneOfs over universes
 * deeper than the free-form depth (the sum of every product's, each branch
 * in the universe and minus the others), before the rest is built over
 * the universe of free-form depth. GeoJSON's spends 1.1 million. */
#define SV_SC_DEEP_ONEOF_WORK 2000000u
/* Languages this heavy become parts compiled on helper threads (schema.c
 * sv_sc_part_job). */
#define SV_SC_JOB_MIN 256u
sv_status sv_sc_part_job(sctx_t *c, sv_ast_t *ta, sv_ast_t **call);
/* Each alternative of alts[0..n) that is a DFA of SV_SC_BIG_PART_MIN
 * states or more, and whose first bytes no other alternative shares,
 * becomes a call to a part (a string with maxLength beside null: the
 * union is a few states, not a copy of the string's thousands). The other
 * alternatives are compiled to find their first bytes, and kept as those
 * DFAs. Only where sv_sc_calls(c) and big parts are on (ref_parts). */
/* Whether d may be such a part: that big, a raw DFA (no program), and
 * not starting with a call. */
bool sv_sc_big_part_ok(const sv_dfa_t *d);
sv_status sv_sc_big_alts_as_parts(sctx_t *c, sv_ast_t **alts, uint32_t n);
/* The raw DFA of the part a marker id names (the free-form part too), or
 * NULL while it is reserved and not yet compiled. */
const sv_dfa_t *sv_sc_part_dfa(sctx_t *c, uint32_t id);
/* The DFA of part index i (id - SV_SCHEMA_PART_FIRST), waiting for it where
 * a helper compiles it; NULL while it is open (reserved), or when its job
 * failed (c->job_st). */
sv_dfa_t *sv_sc_part_at(sctx_t *c, uint32_t i);

/* JSON types as bits (a type mask; integer apart from number). */
enum { T_NULL = 1, T_BOOL = 2, T_OBJECT = 4, T_ARRAY = 8, T_STRING = 16, T_NUMBER = 32, T_INTEGER = 64, T_ALL = 63 };

/* ---- a type beside a union (schema_typed.c) ---- */

/* The strings of a (a union's language, JSON texts) whose type is in mask,
 * read off their first byte, with the parts a's start calls cut the same
 * way (new parts). Only where sv_sc_calls(c); what it cannot read off the
 * start (a callee still being compiled, a nullable one) sets
 * calls_conflict, so the compile is redone with fewer calls. */
sv_status sv_sc_type_filter(sctx_t *c, sv_ast_t *a, int mask, sv_ast_t **out);
/* Fills the parts sv_sc_type_filter reserved for calls to parts still open
 * (a recursive $ref target), once every other part is compiled. */
sv_status sv_sc_type_filter_finish(sctx_t *c);

/* ---- containers (schema_container.c) ---- */
/* canonical_any: build the universe at this location (every key optional,
 * any values, canonical spellings) instead of s's language. */
sv_status sv_sc_object(sctx_t *c, json_t *s, const sv_loc_t *loc, bool canonical_any, sv_ast_t **out);
sv_status sv_sc_array(sctx_t *c, json_t *s, const sv_loc_t *loc, bool canonical_any, sv_ast_t **out);
/* An object literal's members in any key order (--key-order any), or *out
 * NULL where key sets are off or too big. */
sv_status sv_sc_object_literal(sctx_t *c, const sv_loc_t *loc, const char *const *keys, sv_ast_t *const *vals, uint32_t n,
                               sv_ast_t **out);
/* The ordered keys of a location (arena memory). */
sv_status sv_sc_loc_keys(sctx_t *c, const sv_loc_t *loc, const char ***keys, uint32_t *n);
sv_status sv_sc_lit_orders(sctx_t *c, const sv_loc_t *loc, const char **keys, uint32_t nk, uint32_t ***perm,
                           uint32_t *n, uint32_t *child_orders);

#endif
