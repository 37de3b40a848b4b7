/* cmd_fsm.c — the constraint verbs: compile, match, sample.
 *
 * All three take the same constraint options and compile it the same way;
 * they differ in what they do with the DFA. A --tools list becomes the
 * tool-call schema the server would constrain to, built by the server's own
 * sv_tools_parse and sv_tools_call_schema (src/api/tools.h), so that tests
 * and benchmarks measure exactly what a request with those tools compiles. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/grammar.h"
#include "fsm/regex.h"
#include "fsm/schema.h"
#include "fsm/structural_tag.h"
#include "src/api/tools.h"
#include "src/chat/chat.h"
#include "src/constraint/constraint_cache.h"
#include "util/clock.h"
#include "cli.h"
#include "verbs.h"

typedef struct {
    const char *regex;       /* borrowed from argv, or owned file contents */
    size_t regex_len;
    bool is_schema;          /* regex holds a JSON Schema's text */
    bool is_grammar;         /* regex holds a GBNF grammar (fsm/grammar.h) */
    bool is_stag;            /* regex holds a structural tag (fsm/structural_tag.h) */
    bool is_framed;          /* regex holds a framed schema (src/constraint/constraint_cache.h) */
    char *owned;
    sv_schema_opts_t sopts;  /* sopts.lim holds the budgets for both kinds */
    sv_schema_info_t info;
    unsigned long long n, seed, max_len;
    /* --tools: the tools list, and what the call schema is built for. */
    const char *tools_file;
    const char *tool_choice;  /* "required", "auto" or a tool's name; NULL: not given */
    int parallel;             /* --parallel-tool-calls: -1 not given, else 0 or 1 */
    int tool_object;          /* --tool-format: -1 not given, 1 object, 0 array, 2 tagged, 3 tagged-list */
    int extra_orders;         /* --extra-key-orders: -1 not given (true, false with --tools), else 0 or 1 */
    bool explain;             /* match --explain: where each candidate stops */
    bool print_schema;        /* compile --print-schema: the call schema, not compiled */
} opts_t;

enum {
    OPT_REGEX = 256, OPT_REGEX_FILE, OPT_MAX_NFA, OPT_MAX_DFA, OPT_MAX_MEM, OPT_TIMEOUT, OPT_SEED, OPT_MAX_LEN,
    OPT_SCHEMA, OPT_WS, OPT_STRICT, OPT_UNKNOWN_FORMATS, OPT_REF_DEPTH, OPT_ANY_DEPTH, OPT_ANY_DEPTH_TOTAL, OPT_ANY_DEEP_LEVELS, OPT_ANY_DEEP_ARRAYS, OPT_STRING_LEN, OPT_ANY_CALLS, OPT_KEY_ORDER, OPT_EXTRA_ORDERS, OPT_DISCRIMINATOR,
    OPT_TOOLS, OPT_TOOL_CHOICE, OPT_PARALLEL, OPT_TOOL_FORMAT, OPT_EXPLAIN, OPT_PRINT_SCHEMA, OPT_GRAMMAR, OPT_STAG,
};

static const char constraint_help[] =
    "Constraint (exactly one):\n"
    "  --regex PATTERN        an ECMA-262 regex (JSON Schema `pattern` dialect),\n"
    "                         matched against the whole string\n"
    "  --regex-file FILE      the pattern is the contents of FILE (- for stdin)\n"
    "  --schema FILE          a JSON Schema (drafts 4 to 2020-12; - for stdin): the\n"
    "                         JSON texts of the values it accepts\n"
    "  --grammar FILE         a grammar (- for stdin): GBNF, llama.cpp's format, whose\n"
    "                         rule `root` it is, or Lark-style EBNF (no `::=`),\n"
    "                         whose rule `start` it is (docs/grammar.md)\n"
    "  --structural-tag FILE  a structural tag, the response_format object\n"
    "                         {\"type\": \"structural_tag\", \"format\": ...} or the\n"
    "                         legacy {\"structures\", \"triggers\"} (- for stdin;\n"
    "                         docs/grammar.md, \"Structural tags\"); its JSON Schemas\n"
    "                         take the schema options below\n"
    "  --tools FILE           OpenAI tools (- for stdin), a JSON list of\n"
    "                         {\"type\": \"function\", \"function\": {\"name\",\n"
    "                         \"description\", \"parameters\"}}, checked as the server\n"
    "                         checks them: the tool calls a request with these tools\n"
    "                         is constrained to, built by the server's own code\n"
    "Tool options (with --tools):\n"
    "  --tool-choice C        required (default), auto, or NAME (one tool's name);\n"
    "                         auto is the call the server constrains once the model\n"
    "                         opens one\n"
    "  --parallel-tool-calls true|false\n"
    "                         true (default): one or more calls, any number; false,\n"
    "                         or a named tool: exactly one\n"
    "  --tool-format array|object|tagged|tagged-list\n"
    "                         array (default): the call list [{\"name\": ...,\n"
    "                         \"arguments\": {...}}, ...]; object: one call object;\n"
    "                         what auto is (the call schema in free text, which\n"
    "                         --print-schema prints): tagged for ChatML, free text whose\n"
    "                         <tool_call> blocks are calls; tagged-list for the\n"
    "                         other families, free text then the call list\n"
    "Schema options (also for --tools):\n"
    "  --ws MODE              canonical (default: json.dumps spacing), compact, flexible\n"
    "  --strict-properties    absent additionalProperties means false\n"
    "  --allow-unknown-formats  treat unknown formats as annotations (default: error)\n"
    "  --max-ref-depth N      expansions of one recursive $ref (default 5)\n"
    "  --any-calls true|false free-form values as calls into one shared part (default\n"
    "                         true, also inside not/oneOf/if/allOf/contains): any\n"
    "                         depth, small automata; false: the bounded shape below\n"
    "  --key-order schema|any object keys in the schema's order (default, as OpenAI\n"
    "                         writes them; keys are forced for jump-forward), or in\n"
    "                         any order, each key at most once (wide objects keep\n"
    "                         their key set in the walk, key_set_frames; those that\n"
    "                         count members or carry not/oneOf key conditions keep\n"
    "                         the schema's order, counted in key_order_narrowed)\n"
    "  --extra-key-orders true|false\n"
    "                         with --key-order schema, an object also takes up to\n"
    "                         3 more key orders real data follows (an anyOf/oneOf\n"
    "                         branch's, a required list's); default true, and false\n"
    "                         with --tools, as the server compiles tool calls:\n"
    "                         the definition order alone\n"
    "  --max-any-depth N|auto nesting of unconstrained values: N levels (default 3),\n"
    "                         or auto: 6 levels at the root, one less per level\n"
    "                         down, 3 from level 3 on (--any-depth-total); auto\n"
    "                         accepts deeper data but compiles several times slower\n"
    "  --any-depth-total N    auto: the nesting reached from the root (default 6)\n"
    "  --any-deep-levels N    beyond --max-any-depth, N more levels (default 3) for\n"
    "                         containers nested with at most --any-deep-arrays\n"
    "                         arrays among them (default 1); 0 turns them off\n"
    "  --max-string-length N  narrow larger maxLength values to N (default 512)\n"
    "  --discriminator required|annotation\n"
    "                         required (default): a oneOf with OpenAPI's\n"
    "                         discriminator requires its propertyName in every\n"
    "                         branch that defines it, as OpenAPI and Pydantic do\n"
    "                         (counted in discriminator_required); annotation:\n"
    "                         ignored, as JSON Schema ignores it\n"
    "Budgets:\n"
    "  --max-nfa-states N     default 2000000\n"
    "  --max-dfa-states N     default 200000\n"
    "  --max-memory BYTES     default 268435456 (256 MiB)\n"
    "  --compile-timeout-ms N default 10000 (0 = none)\n";

static void help(const char *verb) {
    if (strcmp(verb, "compile") == 0)
        printf("Usage: sieve compile --regex PATTERN | --schema FILE | --grammar FILE | --structural-tag FILE | --tools FILE [options]\n\n"
               "Compiles the constraint to a minimized byte-level DFA and prints one JSON\n"
               "object: states, byte_classes, forced_states, min_len, compile_us (for\n"
               "a schema also ignored_keywords, recursion_truncated, parts: the compiled\n"
               "parts that call one another, docs/fsm.md, and what the compile narrowed).\n"
               "For a schema, compile_us leaves out the automata every schema shares,\n"
               "built first as the server builds them at startup (docs/fsm.md, the prelude).\n"
               "On a constraint that does not compile, prints\n"
               "{\"error\": {\"message\", \"type\", \"offset\"}} and exits 2.\n"
               "With --tools, --print-schema prints the call schema instead (one line of\n"
               "JSON, what the server compiles for those tools) and compiles nothing.\n\n%s",
               constraint_help);
    else if (strcmp(verb, "match") == 0)
        printf("Usage: sieve match --regex PATTERN | --schema FILE | --grammar FILE | --structural-tag FILE | --tools FILE [options] < candidates\n\n"
               "Reads standard input, one JSON string literal per line (its decoded value is\n"
               "the candidate), and prints 1 or 0 per line: whether the whole candidate\n"
               "matches. A line that is not a JSON string literal is a usage error (exit 64).\n\n"
               "  --explain              print {\"match\": B, \"viable\": N} instead: N is the\n"
               "                         length in bytes of the longest prefix of the candidate\n"
               "                         that some accepted string starts with (the whole\n"
               "                         length when it stops only for being incomplete)\n\n%s",
               constraint_help);
    else
        printf("Usage: sieve sample --regex PATTERN | --schema FILE | --grammar FILE | --structural-tag FILE | --tools FILE [-n N] [--seed S]\n"
               "                    [--max-len L] [options]\n\n"
               "Prints N (default 10) random strings the constraint accepts, each as a JSON\n"
               "string literal on its own line. Choices are uniform over the live byte classes\n"
               "of each state; past L bytes (default 64) the walk heads for acceptance.\n\n%s",
               constraint_help);
}

/* The tool-call schema for the tools in text[0..len) into o (as --schema
 * would have given it), built as the server builds it: sv_tools_parse
 * checks the list and the choice, sv_tools_call_schema writes the schema.
 * Returns -1 to continue, or an exit code: a tools list that is not JSON or
 * breaks the server's rules is a constraint error (2, the error object on
 * stdout), a --tool-choice naming no tool a usage error (64). */
static int tools_schema(opts_t *o, const char *verb, const char *text, size_t len) {
    sv_error_t err;
    sv_error_clear(&err);
    json_error_t jerr;
    json_t *tools = json_loadb(text, len, 0, &jerr);
    if (!tools) {
        sv_error_set(&err, SV_ERR_SYNTAX, (long)jerr.position, "--tools: not JSON: %s (line %d, column %d)", jerr.text,
                     jerr.line, jerr.column);
        return sv_cli_constraint_error(&err);
    }
    if (json_is_array(tools) && json_array_size(tools) == 0) {
        json_decref(tools);
        sv_error_set(&err, SV_ERR_ARG, -1, "--tools: the list is empty; a call needs at least one tool");
        return sv_cli_constraint_error(&err);
    }
    const char *choice = o->tool_choice ? o->tool_choice : "required";
    json_t *tc = strcmp(choice, "required") == 0 || strcmp(choice, "auto") == 0
                     ? json_string(choice)
                     : json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", choice);
    sv_api_request_t r;
    memset(&r, 0, sizeof r);
    r.kind = SV_API_CHAT;
    r.parallel_tool_calls = o->parallel != 0;
    sv_api_error_t e;
    char *schema = NULL;
    int rc = -1;
    if (!tc) {
        sv_error_set(&err, SV_ERR_NOMEM, -1, "out of memory");
        rc = sv_cli_constraint_error(&err);
    } else if (sv_tools_parse(&r, tools, tc, &e)) {
        if (strcmp(e.param, "tool_choice") == 0) {
            rc = sv_cli_usage_error(verb, "%s", e.message); /* "tool_choice: function ... is not one of the tools" */
        } else {
            sv_error_set(&err, e.status >= 500 ? SV_ERR_NOMEM : SV_ERR_ARG, -1, "--tools: %s", e.message);
            rc = sv_cli_constraint_error(&err);
        }
    } else if (o->tool_object >= 2 ? sv_tools_tagged_calls(&r, o->tool_object == 2 ? SV_CHAT_CHATML : SV_CHAT_LLAMA3,
                                                           &schema, &e)
                                   : sv_tools_call_schema(&r, o->tool_object != 1, &schema, &e)) {
        sv_error_set(&err, SV_ERR_NOMEM, -1, "%s", e.message); /* their only failure */
        rc = sv_cli_constraint_error(&err);
    } else {
        o->owned = schema;
        o->regex = schema;
        o->regex_len = strlen(schema);
        o->is_schema = o->tool_object < 2;
        o->is_framed = o->tool_object >= 2;
    }
    json_decref(tc); /* after the schema: r.tool_name points into it */
    json_decref(tools);
    return rc;
}

/* Parses the options; returns -1 to continue, or an exit code. */
static int parse(int argc, char **argv, opts_t *o, bool sampling) {
    static const struct option longopts[] = {
        {"regex", required_argument, 0, OPT_REGEX},
        {"regex-file", required_argument, 0, OPT_REGEX_FILE},
        {"max-nfa-states", required_argument, 0, OPT_MAX_NFA},
        {"max-dfa-states", required_argument, 0, OPT_MAX_DFA},
        {"max-memory", required_argument, 0, OPT_MAX_MEM},
        {"compile-timeout-ms", required_argument, 0, OPT_TIMEOUT},
        {"seed", required_argument, 0, OPT_SEED},
        {"max-len", required_argument, 0, OPT_MAX_LEN},
        {"schema", required_argument, 0, OPT_SCHEMA},
        {"ws", required_argument, 0, OPT_WS},
        {"strict-properties", no_argument, 0, OPT_STRICT},
        {"allow-unknown-formats", no_argument, 0, OPT_UNKNOWN_FORMATS},
        {"max-ref-depth", required_argument, 0, OPT_REF_DEPTH},
        {"max-any-depth", required_argument, 0, OPT_ANY_DEPTH},
        {"any-depth-total", required_argument, 0, OPT_ANY_DEPTH_TOTAL},
        {"any-deep-levels", required_argument, 0, OPT_ANY_DEEP_LEVELS},
        {"any-calls", required_argument, 0, OPT_ANY_CALLS},
        {"key-order", required_argument, 0, OPT_KEY_ORDER},
        {"extra-key-orders", required_argument, 0, OPT_EXTRA_ORDERS},
        {"discriminator", required_argument, 0, OPT_DISCRIMINATOR},
        {"any-deep-arrays", required_argument, 0, OPT_ANY_DEEP_ARRAYS},
        {"max-string-length", required_argument, 0, OPT_STRING_LEN},
        {"tools", required_argument, 0, OPT_TOOLS},
        {"tool-choice", required_argument, 0, OPT_TOOL_CHOICE},
        {"parallel-tool-calls", required_argument, 0, OPT_PARALLEL},
        {"tool-format", required_argument, 0, OPT_TOOL_FORMAT},
        {"explain", no_argument, 0, OPT_EXPLAIN},
        {"print-schema", no_argument, 0, OPT_PRINT_SCHEMA},
        {"grammar", required_argument, 0, OPT_GRAMMAR},
        {"structural-tag", required_argument, 0, OPT_STAG},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *verb = argv[0];
    memset(o, 0, sizeof *o);
    sv_schema_opts_default(&o->sopts);
    o->n = 10;
    o->max_len = 64;
    o->parallel = -1;
    o->tool_object = -1;
    o->extra_orders = -1;
    opterr = 0;
    optind = 1;
    int c;
    const char *file = NULL;
    unsigned long long v;
    while ((c = getopt_long(argc, argv, sampling ? ":n:h" : ":h", longopts, NULL)) != -1) {
        const char *arg = optarg;
        switch (c) {
        case 'h': help(verb); return SV_EXIT_OK;
        case OPT_REGEX:
            if (o->regex || file || o->tools_file) return sv_cli_usage_error(verb, "give exactly one constraint");
            o->regex = arg;
            o->regex_len = strlen(arg);
            break;
        case OPT_REGEX_FILE:
        case OPT_SCHEMA:
        case OPT_GRAMMAR:
        case OPT_STAG:
            if (o->regex || file || o->tools_file) return sv_cli_usage_error(verb, "give exactly one constraint");
            file = arg;
            o->is_schema = c == OPT_SCHEMA;
            o->is_grammar = c == OPT_GRAMMAR;
            o->is_stag = c == OPT_STAG;
            break;
        case OPT_TOOLS:
            if (o->regex || file || o->tools_file) return sv_cli_usage_error(verb, "give exactly one constraint");
            o->tools_file = arg;
            break;
        case OPT_TOOL_CHOICE:
            if (!arg[0] || strcmp(arg, "none") == 0)
                return sv_cli_usage_error(verb, "invalid value '%s' for --tool-choice (required, auto or a tool's name)", arg);
            o->tool_choice = arg;
            break;
        case OPT_PARALLEL:
            if (strcmp(arg, "true") == 0) o->parallel = 1;
            else if (strcmp(arg, "false") == 0) o->parallel = 0;
            else return sv_cli_usage_error(verb, "invalid value '%s' for --parallel-tool-calls (true, false)", arg);
            break;
        case OPT_TOOL_FORMAT:
            if (strcmp(arg, "array") == 0) o->tool_object = 0;
            else if (strcmp(arg, "object") == 0) o->tool_object = 1;
            else if (strcmp(arg, "tagged") == 0) o->tool_object = 2;
            else if (strcmp(arg, "tagged-list") == 0) o->tool_object = 3;
            else return sv_cli_usage_error(verb, "invalid value '%s' for --tool-format (array, object, tagged, tagged-list)",
                                           arg);
            break;
        case OPT_EXPLAIN:
            if (strcmp(verb, "match")) return sv_cli_usage_error(verb, "unknown option '--explain'");
            o->explain = true;
            break;
        case OPT_PRINT_SCHEMA:
            if (strcmp(verb, "compile")) return sv_cli_usage_error(verb, "unknown option '--print-schema'");
            o->print_schema = true;
            break;
        case OPT_WS:
            if (strcmp(arg, "canonical") == 0) o->sopts.ws = SV_WS_CANONICAL;
            else if (strcmp(arg, "compact") == 0) o->sopts.ws = SV_WS_COMPACT;
            else if (strcmp(arg, "flexible") == 0) o->sopts.ws = SV_WS_FLEXIBLE;
            else return sv_cli_usage_error(verb, "invalid value '%s' for --ws (canonical, compact, flexible)", arg);
            break;
        case OPT_STRICT: o->sopts.strict_properties = true; break;
        case OPT_STRING_LEN:
            if (sv_cli_parse_u64(arg, 1000000, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --max-string-length", arg);
            o->sopts.max_string_length = (uint32_t)v;
            break;
        case OPT_UNKNOWN_FORMATS: o->sopts.unknown_formats_ok = true; break;
        case OPT_ANY_DEPTH_TOTAL:
            if (sv_cli_parse_u64(arg, 16, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --any-depth-total (0 to 16)", arg);
            o->sopts.any_depth_total = (uint32_t)v;
            break;
        case OPT_ANY_CALLS:
            if (strcmp(arg, "true") && strcmp(arg, "false"))
                return sv_cli_usage_error(verb, "invalid value '%s' for --any-calls (true or false)", arg);
            o->sopts.any_calls = !strcmp(arg, "true");
            break;
        case OPT_KEY_ORDER:
            if (strcmp(arg, "schema") && strcmp(arg, "any"))
                return sv_cli_usage_error(verb, "invalid value '%s' for --key-order (schema or any)", arg);
            o->sopts.key_order = strcmp(arg, "any") ? SV_KEY_ORDER_SCHEMA : SV_KEY_ORDER_ANY;
            break;
        case OPT_EXTRA_ORDERS:
            if (strcmp(arg, "true") && strcmp(arg, "false"))
                return sv_cli_usage_error(verb, "invalid value '%s' for --extra-key-orders (true or false)", arg);
            o->extra_orders = !strcmp(arg, "true");
            break;
        case OPT_DISCRIMINATOR:
            if (strcmp(arg, "required") && strcmp(arg, "annotation"))
                return sv_cli_usage_error(verb, "invalid value '%s' for --discriminator (required or annotation)", arg);
            o->sopts.discriminator_annotation = !strcmp(arg, "annotation");
            break;
        case OPT_ANY_DEEP_LEVELS:
            if (sv_cli_parse_u64(arg, 16, &v)) return sv_cli_usage_error(verb, "invalid value '%s' for --any-deep-levels (0 to 16)", arg);
            o->sopts.any_deep_levels = (uint32_t)v;
            break;
        case OPT_ANY_DEEP_ARRAYS:
            if (sv_cli_parse_u64(arg, SV_SCHEMA_ANY_DEEP_ARRAYS_MAX, &v))
                return sv_cli_usage_error(verb, "invalid value '%s' for --any-deep-arrays (0 to %d)", arg, SV_SCHEMA_ANY_DEEP_ARRAYS_MAX);
            o->sopts.any_deep_arrays = (uint32_t)v;
            break;
        case OPT_REF_DEPTH:
        case OPT_ANY_DEPTH:
            if (c == OPT_ANY_DEPTH && strcmp(arg, "auto") == 0) {
                o->sopts.max_any_depth = SV_SCHEMA_ANY_DEPTH_AUTO;
                break;
            }
            if (sv_cli_parse_u64(arg, 16, &v))
                return sv_cli_usage_error(verb, "invalid value '%s' for --%s (0 to 16)", arg, c == OPT_REF_DEPTH ? "max-ref-depth" : "max-any-depth");
            if (c == OPT_REF_DEPTH) o->sopts.max_ref_depth = (uint32_t)v;
            else o->sopts.max_any_depth = (uint32_t)v;
            break;
        case OPT_MAX_NFA: case OPT_MAX_DFA: case OPT_MAX_MEM: case OPT_TIMEOUT:
            if (sv_cli_parse_u64(arg, c == OPT_MAX_MEM ? (1ull << 40) : 1000000000ull, &v) || (v == 0 && c != OPT_TIMEOUT))
                return sv_cli_usage_error(verb, "invalid value '%s' for --%s", arg, longopts[c - OPT_REGEX].name);
            if (c == OPT_MAX_NFA) o->sopts.lim.max_nfa_states = (uint32_t)v;
            else if (c == OPT_MAX_DFA) o->sopts.lim.max_dfa_states = (uint32_t)v;
            else if (c == OPT_MAX_MEM) o->sopts.lim.max_memory = (size_t)v;
            else o->sopts.lim.max_time_us = v * 1000;
            break;
        case 'n':
            if (sv_cli_parse_u64(arg, 100000000ull, &o->n)) return sv_cli_usage_error(verb, "invalid value '%s' for -n", arg);
            break;
        case OPT_SEED:
            if (!sampling || sv_cli_parse_u64(arg, ~0ull, &o->seed)) return sv_cli_usage_error(verb, "invalid option --seed here or value '%s'", arg);
            break;
        case OPT_MAX_LEN:
            if (!sampling || sv_cli_parse_u64(arg, 1u << 20, &o->max_len)) return sv_cli_usage_error(verb, "invalid option --max-len here or value '%s'", arg);
            break;
        case ':': return sv_cli_usage_error(verb, "option '%s' needs a value", argv[optind - 1]);
        default: return sv_cli_usage_error(verb, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return sv_cli_usage_error(verb, "unexpected argument '%s'", argv[optind]);
    if (!o->tools_file && (o->tool_choice || o->parallel >= 0 || o->tool_object >= 0 || o->print_schema))
        return sv_cli_usage_error(verb, "--tool-choice, --parallel-tool-calls, --tool-format and --print-schema need "
                                        "--tools FILE");
    o->sopts.extra_key_orders = o->extra_orders >= 0 ? o->extra_orders == 1 : !o->tools_file;
    if (o->tools_file) {
        sv_error_t err;
        size_t len;
        char *text = sv_cli_read_file(o->tools_file, &len, &err);
        if (!text) {
            fprintf(stderr, "sieve %s: %s\n", verb, err.message);
            return SV_EXIT_RUNTIME;
        }
        int rc = tools_schema(o, verb, text, len);
        free(text);
        return rc;
    }
    if (file) {
        sv_error_t err;
        o->owned = sv_cli_read_file(file, &o->regex_len, &err);
        if (!o->owned) {
            fprintf(stderr, "sieve %s: %s\n", verb, err.message);
            return SV_EXIT_RUNTIME;
        }
        o->regex = o->owned;
    }
    if (!o->regex) return sv_cli_usage_error(verb, "a constraint is required (--regex PATTERN, --schema FILE, --grammar FILE, --structural-tag FILE or --tools FILE)");
    return -1;
}

/* Compiles; on failure prints the error object and returns the exit code. */
static int build(opts_t *o, sv_dfa_t **dfa, uint64_t *us) {
    sv_error_t err;
    sv_error_clear(&err);
    /* the shared automata first, untimed, as the server builds them at
     * startup; a failure here shows again in the compile itself */
    if (o->is_schema || o->is_stag || o->is_framed) (void)sv_schema_prelude_warm(&o->sopts, &err);
    sv_error_clear(&err);
    uint64_t t0 = sv_now_ns();
    sv_status st = o->is_schema    ? sv_schema_compile(o->regex, o->regex_len, &o->sopts, dfa, &o->info, &err)
                   : o->is_grammar ? sv_grammar_compile(o->regex, o->regex_len, &o->sopts.lim, dfa, &err)
                   : o->is_stag    ? sv_structural_tag_compile(o->regex, o->regex_len, &o->sopts, dfa, &err)
                   : o->is_framed  ? sv_constraint_framed_compile(o->regex, o->regex_len, &o->sopts, dfa, &err)
                                   : sv_regex_compile(o->regex, o->regex_len, &o->sopts.lim, dfa, &err);
    *us = (sv_now_ns() - t0) / 1000;
    if (st) return sv_cli_constraint_error(&err);
    return -1;
}

int sv_cmd_compile(int argc, char **argv) {
    opts_t o;
    int rc = parse(argc, argv, &o, false);
    sv_dfa_t *dfa = NULL;
    uint64_t us;
    if (rc < 0 && o.print_schema) {
        printf("%.*s\n", (int)o.regex_len, o.regex);
        rc = SV_EXIT_OK;
    }
    if (rc < 0) rc = build(&o, &dfa, &us);
    if (rc < 0) {
        json_t *stats = json_pack("{s:I, s:I, s:I, s:I, s:I}", "states", (json_int_t)sv_dfa_num_states(dfa),
                                  "byte_classes", (json_int_t)sv_dfa_num_classes(dfa), "forced_states",
                                  (json_int_t)sv_dfa_num_forced_states(dfa), "min_len",
                                  (json_int_t)sv_dfa_distance(dfa, sv_dfa_start(dfa)), "compile_us", (json_int_t)us);
        if (stats && o.is_schema) {
            /* Annotations and unknown keywords, which constrain nothing. */
            json_t *ign = json_array();
            uint32_t k = o.info.nignored < SV_SCHEMA_MAX_IGNORED ? o.info.nignored : SV_SCHEMA_MAX_IGNORED;
            for (uint32_t i = 0; i < k; i++) json_array_append_new(ign, json_string(o.info.ignored[i]));
            json_object_set_new(stats, "ignored_keywords", ign);
            json_object_set_new(stats, "recursion_truncated", json_boolean(o.info.ref_truncated));
            json_object_set_new(stats, "parts", json_integer(sv_dfa_num_parts(dfa)));
            json_object_set_new(stats, "max_length_narrowed", json_integer(o.info.nnarrowed));
            json_object_set_new(stats, "key_order_narrowed", json_integer(o.info.nkey_order_narrowed));
            json_object_set_new(stats, "key_set_frames", json_integer(o.info.nkey_set_frames));
            json_object_set_new(stats, "discriminator_required", json_integer(o.info.ndiscriminator_required));
            json_object_set_new(stats, "memory_peak_bytes", json_integer((json_int_t)o.info.mem_peak));
            /* What a budget made the compiler drop (schema.h SV_SCHEMA_NARROWED_*). */
            json_t *nb = json_array();
            if (o.info.narrowed_by_budget & SV_SCHEMA_NARROWED_DEPTH) json_array_append_new(nb, json_string("depth"));
            if (o.info.narrowed_by_budget & SV_SCHEMA_NARROWED_ORDERS) json_array_append_new(nb, json_string("key_orders"));
            if (o.info.narrowed_by_budget & SV_SCHEMA_NARROWED_CALLS) json_array_append_new(nb, json_string("calls"));
            if (o.info.narrowed_by_budget & SV_SCHEMA_NARROWED_KEY_SETS) json_array_append_new(nb, json_string("key_sets"));
            if (o.info.narrowed_by_budget & SV_SCHEMA_NARROWED_ONEOF_DEPTH) json_array_append_new(nb, json_string("oneof_depth"));
            if (o.info.narrowed_by_budget & SV_SCHEMA_NARROWED_PRODUCT_KEY_SETS)
                json_array_append_new(nb, json_string("product_key_sets"));
            if (o.info.narrowed_by_budget & SV_SCHEMA_NARROWED_DIFFERENCE_KEY_SETS)
                json_array_append_new(nb, json_string("difference_key_sets"));
            json_object_set_new(stats, "narrowed_by_budget", nb);
        }
        char *txt = stats ? json_dumps(stats, JSON_PRESERVE_ORDER) : NULL;
        if (txt) printf("%s\n", txt);
        free(txt);
        json_decref(stats);
        if (!txt) rc = SV_EXIT_RUNTIME;
        if (rc < 0) rc = SV_EXIT_OK;
    }
    sv_dfa_destroy(dfa);
    free(o.owned);
    return rc;
}

int sv_cmd_match(int argc, char **argv) {
    opts_t o;
    int rc = parse(argc, argv, &o, false);
    sv_dfa_t *dfa = NULL;
    uint64_t us;
    if (rc < 0) rc = build(&o, &dfa, &us);
    if (rc >= 0) { free(o.owned); return rc; }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    unsigned long lineno = 0;
    rc = SV_EXIT_OK;
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = '\0';
        json_error_t jerr;
        json_t *j = json_loadb(line, (size_t)got, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!j || !json_is_string(j)) {
            json_decref(j);
            fflush(stdout);
            rc = sv_cli_usage_error("match", "line %lu is not a JSON string literal", lineno);
            break;
        }
        const uint8_t *cand = (const uint8_t *)json_string_value(j);
        size_t clen = json_string_length(j);
        bool ok = sv_dfa_matches(dfa, cand, clen);
        if (o.explain)
            printf("{\"match\": %s, \"viable\": %zu}\n", ok ? "true" : "false", ok ? clen : sv_dfa_viable_prefix(dfa, cand, clen));
        else
            fputs(ok ? "1\n" : "0\n", stdout);
        json_decref(j);
    }
    free(line);
    sv_dfa_destroy(dfa);
    free(o.owned);
    return rc;
}


/* One sample into *buf, doubling it (up to 256 MiB) while the string does
 * not fit. */
static sv_status draw(const sv_dfa_t *d, sv_rng_t *rng, uint32_t soft, uint8_t **buf, size_t *cap, size_t *len) {
    for (;;) {
        sv_status st = sv_dfa_sample(d, rng, soft, *buf, *cap, len);
        if (st != SV_ERR_BUDGET || *cap >= ((size_t)1 << 28)) return st;
        uint8_t *nb = realloc(*buf, *cap * 2);
        if (!nb) return SV_ERR_NOMEM;
        *buf = nb;
        *cap *= 2;
    }
}

int sv_cmd_sample(int argc, char **argv) {
    opts_t o;
    int rc = parse(argc, argv, &o, true);
    sv_dfa_t *dfa = NULL;
    uint64_t us;
    if (rc < 0) rc = build(&o, &dfa, &us);
    if (rc >= 0) { free(o.owned); return rc; }
    sv_rng_t rng;
    sv_rng_seed(&rng, o.seed);
    /* Past max_len every step brings acceptance nearer, so a string is at
     * most max_len + min distance + the longest shortcut; bound by states
     * for a DFA. A program's completion can be longer (calls expand, an
     * object's required keys come last): the buffer grows. */
    size_t cap = (size_t)o.max_len + sv_dfa_num_states(dfa) + 16;
    uint8_t *buf = malloc(cap);
    rc = buf ? SV_EXIT_OK : SV_EXIT_RUNTIME;
    for (unsigned long long i = 0; buf && i < o.n; i++) {
        size_t len;
        if (draw(dfa, &rng, (uint32_t)o.max_len, &buf, &cap, &len)) { rc = SV_EXIT_RUNTIME; break; }
        /* A DFA cannot remember which of unboundedly many extra keys an
         * object already has, so a schema that allows extra keys also
         * accepts a repeated one. Such texts are not valid samples: draw
         * again (a bounded number of times). */
        for (int retry = 0; o.is_schema && retry < 64; retry++) {
            json_error_t je;
            json_t *v = json_loadb((const char *)buf, len,
                                   JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
            json_decref(v);
            if (v || json_error_code(&je) != json_error_duplicate_key) break; /* only a repeated key draws again */
            if (draw(dfa, &rng, (uint32_t)o.max_len, &buf, &cap, &len)) { rc = SV_EXIT_RUNTIME; break; }
        }
        json_t *s = json_stringn_nocheck((const char *)buf, len);
        char *txt = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
        if (!txt) { json_decref(s); rc = SV_EXIT_RUNTIME; break; }
        puts(txt);
        free(txt);
        json_decref(s);
    }
    if (rc == SV_EXIT_RUNTIME) fprintf(stderr, "sieve sample: out of memory\n");
    free(buf);
    sv_dfa_destroy(dfa);
    free(o.owned);
    return rc;
}
