/* api.c — OpenAI request parsing and validation (see api.h). */
#include "api.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/tokenizer/detok.h"
#include "tools.h"

int sv_api_fail(sv_api_error_t *e, int status, const char *param, const char *fmt, ...) {
    memset(e, 0, sizeof *e);
    e->status = status;
    const char *type = status == 400 || status == 413 ? "invalid_request_error"
                       : status == 401                ? "authentication_error"
                       : status == 404                ? "not_found_error"
                       : status == 429                ? "rate_limit_error"
                       : status == 503                ? "service_unavailable_error"
                                                      : "server_error";
    snprintf(e->type, sizeof e->type, "%s", type);
    if (param) snprintf(e->param, sizeof e->param, "%s", param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

/* A JSON string of s, whose bytes may come from the request (a parser's
 * message quoting the input): ill-formed UTF-8 becomes U+FFFD. */
static json_t *lossy_string(const char *s) {
    size_t n = strlen(s);
    uint8_t buf[3 * sizeof ((sv_api_error_t *)0)->message + 4];
    if (n > sizeof ((sv_api_error_t *)0)->message) n = sizeof ((sv_api_error_t *)0)->message;
    size_t k = sv_utf8_lossy((const uint8_t *)s, n, buf, NULL);
    return json_stringn((const char *)buf, k);
}

int sv_api_http_status(sv_status code) {
    switch (code) {
    case SV_OK: return 200;
    case SV_ERR_SYNTAX:
    case SV_ERR_UNSUPPORTED:
    case SV_ERR_EMPTY:
    case SV_ERR_BUDGET:
    case SV_ERR_TIMEOUT:
    case SV_ERR_ARG: return 400;
    case SV_ERR_CAPACITY: return 429;
    case SV_ERR_IO: return 503;
    case SV_ERR_NOMEM:
    case SV_ERR_INTERNAL: return 500;
    case SV_ERR_CANCELLED: return 499; /* nginx's "client closed request": nobody reads it */
    case SV_ERR_NOT_FOUND: return 404;
    }
    return 500;
}

json_t *sv_api_error_json(const sv_api_error_t *e) {
    return json_pack("{s:{s:o, s:s, s:o, s:o}}", "error", "message", lossy_string(e->message), "type", e->type,
                     "param", e->param[0] ? lossy_string(e->param) : json_null(), "code",
                     e->code[0] ? json_string(e->code) : json_null());
}

char *sv_api_choice_regex(const char *const *choices, size_t n) {
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) cap += 2 * strlen(choices[i]) + 1;
    char *s = malloc(cap), *p = s;
    if (!s) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (i) *p++ = '|';
        for (const char *c = choices[i]; *c; c++) {
            /* Every ASCII punctuation character is escaped (the regex parser
             * reads an escaped punctuation character as itself). */
            if ((*c >= '!' && *c <= '/') || (*c >= ':' && *c <= '@') || (*c >= '[' && *c <= '`') ||
                (*c >= '{' && *c <= '~'))
                *p++ = '\\';
            *p++ = *c;
        }
    }
    *p = 0;
    return s;
}

void sv_api_constraint_error(const sv_api_constraint_t *c, const sv_error_t *err, sv_api_error_t *e) {
    const char *what = c->kind == SV_CONSTRAINT_SCHEMA    ? "the schema"
                       : c->kind == SV_CONSTRAINT_GRAMMAR ? "the grammar"
                       : c->kind == SV_CONSTRAINT_STRUCTURAL_TAG ? "the structural tag"
                       : c->kind == SV_CONSTRAINT_FRAMED_SCHEMA  ? "the tools' calls"
                                                          : "the regex";
    int status = sv_api_http_status(err->code);
    if (status == 429) {
        /* The compile pool is full (its queue, or the memory all compiles
         * share): the constraint is fine, the server is busy. */
        sv_api_fail(e, status, NULL, "the server is busy compiling constraints: %s", err->message);
        snprintf(e->code, sizeof e->code, "%s", "queue_full");
        e->retry_after = 1;
        return;
    }
    if (status != 400) {
        if (status == 404) status = 500; /* a compile looks nothing up: sieve's own fault */
        sv_api_fail(e, status, NULL, "compiling %s failed inside sieve: %s", what,
                    err->message[0] ? err->message : sv_status_name(err->code));
        snprintf(e->code, sizeof e->code, "%s", "internal_error");
        return;
    }
    if (c->tool_calls) what = "a tool's parameters schema";
    const char *pointer = err->pointer;
    const char *param = c->param;
    if (c->calls_or_answer) {
        /* The union's pointers, back to the schema the caller wrote. */
        if (!strncmp(pointer, "/anyOf/1", 8) && (pointer[8] == 0 || pointer[8] == '/')) {
            pointer += 8;
        } else if (!strncmp(pointer, "/anyOf/0", 8) && (pointer[8] == 0 || pointer[8] == '/')) {
            what = "a tool's parameters schema";
            param = "tools";
        }
    }
    char mapped[320];
    if (c->tagged_calls) {
        /* The call schema (tools.c) reaches tools[K]'s parameters through
         * [/items]/anyOf/K/properties/arguments/$ref (or without anyOf for
         * one tool) and keeps them at /$defs/sv_args_NAME: back to
         * /K/function/parameters. */
        what = "a tool's parameters schema";
        static const char *const via[] = {"/items/anyOf/%u/properties/arguments/$ref%n",
                                          "/anyOf/%u/properties/arguments/$ref%n"};
        static const char *const one[] = {"/items/properties/arguments/$ref", "/properties/arguments/$ref"};
        static const char defs[] = "/$defs/sv_args_";
        const char *rest = NULL;
        size_t k = 0;
        for (int i = 0; i < 2 && !rest; i++) {
            unsigned u;
            int n = -1;
            size_t ol = strlen(one[i]);
            if (sscanf(pointer, via[i], &u, &n) == 1 && n > 0) k = u, rest = pointer + n;
            else if (!strncmp(pointer, one[i], ol)) k = 0, rest = pointer + ol;
        }
        if (!rest && c->tools && !strncmp(pointer, defs, sizeof defs - 1)) {
            size_t i;
            json_t *t;
            json_array_foreach(c->tools, i, t) {
                const char *name = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
                size_t n = name ? strlen(name) : 0;
                const char *r = pointer + sizeof defs - 1;
                if (n && !strncmp(r, name, n) && (r[n] == 0 || r[n] == '/')) {
                    k = i, rest = r + n;
                    break;
                }
            }
        }
        if (rest && (*rest == 0 || *rest == '/')) {
            snprintf(mapped, sizeof mapped, "/%zu/function/parameters%s", k, rest);
            pointer = mapped;
        }
    }
    char where[400] = "";
    if (pointer[0] || err->keyword[0])
        snprintf(where, sizeof where, " (at %s%s%s)", pointer[0] ? pointer : "#", err->keyword[0] ? ", keyword " : "",
                 err->keyword);
    else if (err->offset >= 0)
        snprintf(where, sizeof where, " (at offset %ld)", err->offset);
    sv_api_fail(e, 400, param, "%s: %s does not compile: %s%s", param, what,
                err->message[0] ? err->message : sv_status_name(err->code), where);
    snprintf(e->code, sizeof e->code, "%s", "invalid_constraint");
}

/* ---- field helpers ------------------------------------------------------ */

static int want_number(json_t *v, const char *name, double lo, double hi, double *out, sv_api_error_t *e) {
    if (!json_is_number(v)) return sv_api_fail(e, 400, name, "%s: must be a number", name);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) return sv_api_fail(e, 400, name, "%s: must be between %g and %g, got %g", name, lo, hi, d);
    *out = d;
    return 0;
}

static int want_int(json_t *v, const char *name, long long lo, long long hi, long long *out, sv_api_error_t *e) {
    /* 5.0 is accepted as 5: some clients serialize every number as a float. */
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e15) {
        *out = (long long)json_real_value(v);
    } else if (json_is_integer(v)) {
        *out = json_integer_value(v);
    } else {
        return sv_api_fail(e, 400, name, "%s: must be an integer", name);
    }
    if (*out < lo || *out > hi) return sv_api_fail(e, 400, name, "%s: must be between %lld and %lld, got %lld", name, lo, hi, *out);
    return 0;
}

static int want_bool(json_t *v, const char *name, bool *out, sv_api_error_t *e) {
    if (!json_is_boolean(v)) return sv_api_fail(e, 400, name, "%s: must be a boolean", name);
    *out = json_is_true(v);
    return 0;
}

static bool has_nul(json_t *s) { return strlen(json_string_value(s)) != json_string_length(s); }

/* Whether a string outside the JSON schemas of v holds NUL; where gets its
 * path. A schema may hold \u0000 (a pattern like "^[^\u0000]+$": the
 * compiler reads it with its length), while every other string of a request
 * is text for the model, a name or an option, none of which may. */
static bool nul_outside_schemas(json_t *v, char *where, size_t cap) {
    size_t len = strlen(where);
    if (json_is_string(v)) return has_nul(v);
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            snprintf(where + len, cap - len, "[%zu]", i);
            if (nul_outside_schemas(x, where, cap)) return true;
        }
    } else if (json_is_object(v)) {
        static const char *const schema_keys[] = {"schema", "parameters", "json", "guided_json"};
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            bool schema = false;
            for (size_t i = 0; i < sizeof schema_keys / sizeof *schema_keys; i++) schema |= !strcmp(k, schema_keys[i]);
            if (schema && (json_is_object(x) || json_is_boolean(x))) continue;
            snprintf(where + len, cap - len, "%s%s", len ? "." : "", k);
            if (nul_outside_schemas(x, where, cap)) return true;
        }
    }
    where[len] = '\0';
    return false;
}

/* A field present and not null. */
static json_t *field(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return v && !json_is_null(v) ? v : NULL;
}

/* r's constraint: schema (a JSON value) for a schema or a structural tag
 * (the response_format object), source (a regex or a grammar's text) for
 * the others. */
static int set_constraint(sv_api_request_t *r, sv_constraint_kind kind, json_t *schema, const char *source,
                          const char *param, const sv_api_limits_t *lim, sv_api_error_t *e) {
    if (r->c.on)
        return sv_api_fail(e, 400, param, "%s: a request takes one constraint, and %s already gives one", param, r->c.param);
    char *text;
    if (kind == SV_CONSTRAINT_SCHEMA || kind == SV_CONSTRAINT_STRUCTURAL_TAG) {
        text = json_dumps(schema, JSON_PRESERVE_ORDER | JSON_COMPACT | JSON_ENCODE_ANY);
    } else {
        text = strdup(source);
    }
    if (!text) return sv_api_fail(e, 500, NULL, "out of memory");
    size_t len = strlen(text);
    if (len > lim->max_constraint_bytes) {
        free(text);
        return sv_api_fail(e, 400, param, "%s: the constraint has %zu bytes; the limit is %zu", param, len,
                           lim->max_constraint_bytes);
    }
    r->c.on = true;
    r->c.kind = kind;
    r->c.text = text;
    r->c.len = len;
    snprintf(r->c.param, sizeof r->c.param, "%s", param);
    return 0;
}

/* A schema given as an object (or a boolean), or as JSON text in a string
 * (vLLM's guided_json accepts both). */
static int schema_value(json_t *v, const char *param, json_t **out, sv_api_error_t *e) {
    if (json_is_object(v) || json_is_boolean(v)) {
        *out = json_incref(v);
        return 0;
    }
    if (json_is_string(v)) {
        json_error_t je;
        json_t *s = json_loadb(json_string_value(v), json_string_length(v), JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!s) return sv_api_fail(e, 400, param, "%s: the schema string is not JSON: %s", param, je.text);
        if (!json_is_object(s) && !json_is_boolean(s)) {
            json_decref(s);
            return sv_api_fail(e, 400, param, "%s: a schema must be an object or a boolean", param);
        }
        *out = s;
        return 0;
    }
    return sv_api_fail(e, 400, param, "%s: a schema must be an object or a boolean", param);
}

static int choice_constraint(sv_api_request_t *r, json_t *v, const char *param, const sv_api_limits_t *lim,
                             sv_api_error_t *e) {
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 4096)
        return sv_api_fail(e, 400, param, "%s: must be a non-empty list of strings", param);
    const char **cs = calloc(json_array_size(v), sizeof *cs);
    if (!cs) return sv_api_fail(e, 500, NULL, "out of memory");
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
        if (!json_is_string(x) || has_nul(x) || json_string_length(x) == 0) {
            free(cs);
            return sv_api_fail(e, 400, param, "%s[%zu]: must be a non-empty string", param, i);
        }
        cs[i] = json_string_value(x);
    }
    char *re = sv_api_choice_regex(cs, json_array_size(v));
    free(cs);
    if (!re) return sv_api_fail(e, 500, NULL, "out of memory");
    int rc = set_constraint(r, SV_CONSTRAINT_REGEX, NULL, re, param, lim, e);
    free(re);
    return rc;
}

static int regex_constraint(sv_api_request_t *r, json_t *v, const char *param, const sv_api_limits_t *lim,
                            sv_api_error_t *e) {
    if (!json_is_string(v) || has_nul(v) || json_string_length(v) == 0)
        return sv_api_fail(e, 400, param, "%s: must be a non-empty string", param);
    return set_constraint(r, SV_CONSTRAINT_REGEX, NULL, json_string_value(v), param, lim, e);
}

/* A GBNF grammar (fsm/grammar.h): llama.cpp's `grammar`, vLLM's
 * `guided_grammar` and `structured_outputs.grammar`, SGLang's `ebnf`. */
static int grammar_constraint(sv_api_request_t *r, json_t *v, const char *param, const sv_api_limits_t *lim,
                              sv_api_error_t *e) {
    if (!json_is_string(v) || has_nul(v) || json_string_length(v) == 0)
        return sv_api_fail(e, 400, param, "%s: must be a non-empty string (a GBNF or Lark grammar)", param);
    return set_constraint(r, SV_CONSTRAINT_GRAMMAR, NULL, json_string_value(v), param, lim, e);
}

static int json_constraint(sv_api_request_t *r, json_t *v, const char *param, const sv_api_limits_t *lim,
                           sv_api_error_t *e) {
    json_t *s;
    if (schema_value(v, param, &s, e)) return -1;
    int rc = set_constraint(r, SV_CONSTRAINT_SCHEMA, s, NULL, param, lim, e);
    json_decref(s);
    return rc;
}

static int parse_response_format(sv_api_request_t *r, json_t *rf, const sv_api_limits_t *lim, sv_api_error_t *e) {
    const char *P = "response_format";
    if (!json_is_object(rf)) return sv_api_fail(e, 400, P, "response_format: must be an object");
    json_t *t = json_object_get(rf, "type");
    if (!json_is_string(t)) return sv_api_fail(e, 400, P, "response_format.type: must be a string");
    const char *type = json_string_value(t);
    if (!strcmp(type, "text")) return 0;
    if (!strcmp(type, "json_object")) {
        json_t *obj = json_pack("{s:s}", "type", "object");
        int rc = obj ? set_constraint(r, SV_CONSTRAINT_SCHEMA, obj, NULL, P, lim, e) : sv_api_fail(e, 500, NULL, "out of memory");
        json_decref(obj);
        return rc;
    }
    if (!strcmp(type, "json_schema")) {
        json_t *js = json_object_get(rf, "json_schema");
        if (!json_is_object(js)) return sv_api_fail(e, 400, P, "response_format.json_schema: must be an object");
        json_t *name = json_object_get(js, "name");
        if (name && !json_is_string(name)) return sv_api_fail(e, 400, P, "response_format.json_schema.name: must be a string");
        json_t *strict = field(js, "strict");
        if (strict && !json_is_boolean(strict))
            return sv_api_fail(e, 400, P, "response_format.json_schema.strict: must be a boolean");
        json_t *schema = json_object_get(js, "schema");
        /* OpenAI allows the schema to be left out; it then means any JSON object. */
        if (!schema) {
            json_t *obj = json_pack("{s:s}", "type", "object");
            int rc = obj ? set_constraint(r, SV_CONSTRAINT_SCHEMA, obj, NULL, P, lim, e) : sv_api_fail(e, 500, NULL, "out of memory");
            json_decref(obj);
            return rc;
        }
        if (!json_is_object(schema) && !json_is_boolean(schema))
            return sv_api_fail(e, 400, P, "response_format.json_schema.schema: must be an object");
        return set_constraint(r, SV_CONSTRAINT_SCHEMA, schema, NULL, P, lim, e);
    }
    /* XGrammar's structural tag, as vLLM and SGLang take it: the object is
     * the constraint (fsm/structural_tag.h checks its fields, with pointers) */
    if (!strcmp(type, "structural_tag")) return set_constraint(r, SV_CONSTRAINT_STRUCTURAL_TAG, rf, NULL, P, lim, e);
    return sv_api_fail(e, 400, P,
                       "response_format.type: must be text, json_object, json_schema or structural_tag, got '%s'", type);
}

/* Whether every "$ref" in v points into #/$defs/ or #/definitions/ (or
 * outside the document), so that the schema can move under anyOf/1 with
 * those moved to the root. */
static bool refs_movable(json_t *v) {
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            if (!strcmp(k, "$ref") && json_is_string(x)) {
                const char *ref = json_string_value(x);
                if (ref[0] == '#' && strncmp(ref, "#/$defs/", 8) != 0 && strncmp(ref, "#/definitions/", 14) != 0)
                    return false;
            } else if (!refs_movable(x)) {
                return false;
            }
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) if (!refs_movable(x)) return false;
    }
    return true;
}

/* tools "auto" with a JSON response_format: r->c becomes {"anyOf": [calls,
 * answer]} (api.h). Leaves r->c as it is when the answer schema cannot
 * move. */
static int union_with_calls(sv_api_request_t *r, const sv_api_limits_t *lim, sv_api_error_t *e) {
    json_t *answer = json_loadb(r->c.text, r->c.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!json_is_object(answer) || json_object_get(answer, "$id") || json_object_get(answer, "id") ||
        !refs_movable(answer)) {
        json_decref(answer);
        return 0;
    }
    char *calls_text = NULL;
    if (sv_tools_call_schema(r, true, &calls_text, e)) {
        json_decref(answer);
        return -1;
    }
    json_t *calls = json_loads(calls_text, JSON_ALLOW_NUL, NULL);
    free(calls_text);
    json_t *u = calls ? json_pack("{s:[o, O]}", "anyOf", calls, answer) : NULL;
    if (u) {
        static const char *const moved[] = {"$defs", "definitions"};
        for (int i = 0; i < 2; i++) {
            json_t *d = json_object_get(answer, moved[i]);
            if (d) {
                json_object_set(u, moved[i], d);
                json_object_del(answer, moved[i]);
            }
        }
        json_object_del(answer, "$schema");
        /* The calls' own $defs (each tool's parameters, tools.c) join the
         * root's, where their "#/$defs/sv_args_NAME" refs point. */
        json_t *cd = json_object_get(calls, "$defs"), *rd = json_object_get(u, "$defs");
        if (cd) {
            if (!rd) {
                json_object_set(u, "$defs", cd);
            } else {
                const char *k;
                json_t *x;
                bool clash = false;
                json_object_foreach(cd, k, x) clash |= json_object_get(rd, k) != NULL;
                if (clash || !json_is_object(rd)) { /* the answer names a def like ours: no union */
                    json_decref(u);
                    json_decref(answer);
                    return 0;
                }
                json_object_update(rd, cd);
            }
            json_object_del(calls, "$defs");
        }
    }
    json_decref(answer);
    if (!u) return sv_api_fail(e, 500, NULL, "out of memory");
    char param[64];
    snprintf(param, sizeof param, "%s", r->c.param);
    free(r->c.text);
    memset(&r->c, 0, sizeof r->c);
    int rc = set_constraint(r, SV_CONSTRAINT_SCHEMA, u, NULL, param, lim, e);
    json_decref(u);
    if (!rc) r->c.calls_or_answer = true;
    return rc;
}

/* vLLM's structured_outputs.structural_tag: the JSON text (or the object)
 * of a structural tag, {"type": "structural_tag", "format": ...} or the
 * legacy {"structures", "triggers"} with or without its "type". */
static int structural_tag_constraint(sv_api_request_t *r, json_t *v, const sv_api_limits_t *lim, sv_api_error_t *e) {
    const char *P = "structured_outputs";
    json_t *o = NULL;
    if (json_is_string(v)) {
        json_error_t je;
        o = json_loadb(json_string_value(v), json_string_length(v), 0, &je);
        if (!o)
            return sv_api_fail(e, 400, P, "structured_outputs.structural_tag: not JSON: %s (line %d, column %d)",
                               je.text, je.line, je.column);
    } else if (json_is_object(v)) {
        o = json_deep_copy(v);
        if (!o) return sv_api_fail(e, 500, NULL, "out of memory");
    }
    if (!json_is_object(o)) {
        json_decref(o);
        return sv_api_fail(e, 400, P, "structured_outputs.structural_tag: must be an object or its JSON text");
    }
    if (!json_object_get(o, "type") && json_object_set_new(o, "type", json_string("structural_tag"))) {
        json_decref(o);
        return sv_api_fail(e, 500, NULL, "out of memory");
    }
    int rc = set_constraint(r, SV_CONSTRAINT_STRUCTURAL_TAG, o, NULL, P, lim, e);
    json_decref(o);
    return rc;
}

static int parse_structured_outputs(sv_api_request_t *r, json_t *so, const sv_api_limits_t *lim, sv_api_error_t *e) {
    const char *P = "structured_outputs";
    if (!json_is_object(so)) return sv_api_fail(e, 400, P, "structured_outputs: must be an object");
    json_t *v;
    if ((v = field(so, "json"))) return json_constraint(r, v, P, lim, e);
    if ((v = field(so, "regex"))) return regex_constraint(r, v, P, lim, e);
    if ((v = field(so, "choice"))) return choice_constraint(r, v, P, lim, e);
    if ((v = field(so, "json_object"))) {
        if (!json_is_true(v)) return 0;
        json_t *obj = json_pack("{s:s}", "type", "object");
        int rc = obj ? set_constraint(r, SV_CONSTRAINT_SCHEMA, obj, NULL, P, lim, e) : sv_api_fail(e, 500, NULL, "out of memory");
        json_decref(obj);
        return rc;
    }
    if ((v = field(so, "grammar"))) return grammar_constraint(r, v, P, lim, e);
    if ((v = field(so, "structural_tag"))) return structural_tag_constraint(r, v, lim, e);
    return 0;
}

/* content: a string, or a list of parts of which only text parts are taken. */
static int check_content(json_t *c, size_t i, bool may_be_null, sv_api_error_t *e) {
    char param[40];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (!c || json_is_null(c)) {
        if (may_be_null) return 0;
        return sv_api_fail(e, 400, "messages", "%s: missing", param);
    }
    if (json_is_string(c)) {
        if (has_nul(c)) return sv_api_fail(e, 400, "messages", "%s: contains NUL", param);
        return 0;
    }
    if (!json_is_array(c)) return sv_api_fail(e, 400, "messages", "%s: must be a string or a list of parts", param);
    size_t k;
    json_t *part;
    json_array_foreach(c, k, part) {
        json_t *t = json_object_get(part, "type");
        if (!json_is_object(part) || !json_is_string(t))
            return sv_api_fail(e, 400, "messages", "%s[%zu]: must be an object with a type", param, k);
        if (strcmp(json_string_value(t), "text") != 0)
            return sv_api_fail(e, 400, "messages", "%s[%zu]: only text parts are supported, got '%s'", param, k,
                               json_string_value(t));
        json_t *tx = json_object_get(part, "text");
        if (!json_is_string(tx) || has_nul(tx))
            return sv_api_fail(e, 400, "messages", "%s[%zu].text: must be a string", param, k);
    }
    return 0;
}

static int parse_messages(sv_api_request_t *r, json_t *m, sv_api_error_t *e) {
    if (!json_is_array(m) || json_array_size(m) == 0)
        return sv_api_fail(e, 400, "messages", "messages: must be a non-empty list");
    if (json_array_size(m) > SV_API_MAX_MESSAGES)
        return sv_api_fail(e, 400, "messages", "messages: at most %d messages", SV_API_MAX_MESSAGES);
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        if (!json_is_object(msg)) return sv_api_fail(e, 400, "messages", "messages[%zu]: must be an object", i);
        json_t *role = json_object_get(msg, "role");
        if (!json_is_string(role)) return sv_api_fail(e, 400, "messages", "messages[%zu].role: must be a string", i);
        const char *ro = json_string_value(role);
        json_t *content = json_object_get(msg, "content");
        if (!strcmp(ro, "system") || !strcmp(ro, "developer") || !strcmp(ro, "user")) {
            if (check_content(content, i, false, e)) return -1;
        } else if (!strcmp(ro, "assistant")) {
            json_t *tc = field(msg, "tool_calls");
            if (check_content(content, i, tc != NULL, e)) return -1;
            if (tc && sv_tools_check_calls(tc, i, e)) return -1;
        } else if (!strcmp(ro, "tool")) {
            if (check_content(content, i, false, e)) return -1;
            json_t *id = field(msg, "tool_call_id");
            if (id && !json_is_string(id))
                return sv_api_fail(e, 400, "messages", "messages[%zu].tool_call_id: must be a string", i);
        } else {
            return sv_api_fail(e, 400, "messages",
                               "messages[%zu].role: must be system, developer, user, assistant or tool, got '%s'", i, ro);
        }
    }
    r->messages = m;
    return 0;
}

static int parse_prompt(sv_api_request_t *r, json_t *p, const sv_api_limits_t *lim, sv_api_error_t *e) {
    if (!p) return sv_api_fail(e, 400, "prompt", "prompt: missing");
    /* ["text"] and [[ids]] are one prompt; more than one is a batch, which
     * /v1/completions allows and sieve does not (use n or several requests). */
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        if (has_nul(p)) return sv_api_fail(e, 400, "prompt", "prompt: contains NUL");
        r->prompt = json_string_value(p);
        return 0;
    }
    if (!json_is_array(p) || json_array_size(p) == 0)
        return sv_api_fail(e, 400, "prompt", "prompt: must be a string or a list of token ids");
    size_t n = json_array_size(p);
    if (n > lim->max_ctx) return sv_api_fail(e, 400, "prompt", "prompt: %zu ids; the context is %u", n, lim->max_ctx);
    r->prompt_ids = malloc(n * sizeof *r->prompt_ids);
    if (!r->prompt_ids) return sv_api_fail(e, 500, NULL, "out of memory");
    size_t i;
    json_t *x;
    json_array_foreach(p, i, x) {
        if (!json_is_integer(x))
            return sv_api_fail(e, 400, "prompt", "prompt: a batch of prompts is not supported; give one string or one list of ids");
        json_int_t id = json_integer_value(x);
        if (id < 0 || id >= (json_int_t)lim->vocab_size)
            return sv_api_fail(e, 400, "prompt", "prompt[%zu]: token id %lld is outside the vocabulary (%u)", i,
                               (long long)id, lim->vocab_size);
        r->prompt_ids[i] = (int32_t)id;
    }
    r->n_prompt_ids = (uint32_t)n;
    return 0;
}

static int parse_stop(sv_api_request_t *r, json_t *v, sv_api_error_t *e) {
    if (json_is_string(v)) {
        if (json_string_length(v) == 0) return 0;
        if (has_nul(v) || json_string_length(v) > SV_ENGINE_MAX_STOP_BYTES)
            return sv_api_fail(e, 400, "stop", "stop: a stop string must have 1 to %d bytes", SV_ENGINE_MAX_STOP_BYTES);
        r->stop[r->n_stop++] = json_string_value(v);
        return 0;
    }
    if (!json_is_array(v)) return sv_api_fail(e, 400, "stop", "stop: must be a string or a list of strings");
    if (json_array_size(v) > SV_ENGINE_MAX_STOP)
        return sv_api_fail(e, 400, "stop", "stop: at most %d stop strings", SV_ENGINE_MAX_STOP);
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
        if (!json_is_string(x)) return sv_api_fail(e, 400, "stop", "stop[%zu]: must be a string", i);
        if (json_string_length(x) == 0) continue;
        if (has_nul(x) || json_string_length(x) > SV_ENGINE_MAX_STOP_BYTES)
            return sv_api_fail(e, 400, "stop", "stop[%zu]: a stop string must have 1 to %d bytes", i, SV_ENGINE_MAX_STOP_BYTES);
        r->stop[r->n_stop++] = json_string_value(x);
    }
    return 0;
}

static int parse_logit_bias(sv_api_request_t *r, json_t *v, const sv_api_limits_t *lim, sv_api_error_t *e) {
    if (!json_is_object(v)) return sv_api_fail(e, 400, "logit_bias", "logit_bias: must be an object of token id -> bias");
    size_t n = json_object_size(v);
    if (n > SV_SAMPLE_MAX_LOGIT_BIAS)
        return sv_api_fail(e, 400, "logit_bias", "logit_bias: at most %d entries", SV_SAMPLE_MAX_LOGIT_BIAS);
    if (!n) return 0;
    r->bias = calloc(n, sizeof *r->bias);
    if (!r->bias) return sv_api_fail(e, 500, NULL, "out of memory");
    const char *k;
    json_t *b;
    uint32_t i = 0;
    json_object_foreach(v, k, b) {
        char *end;
        long long id = strtoll(k, &end, 10);
        if (!*k || *end || id < 0 || id >= (long long)lim->vocab_size)
            return sv_api_fail(e, 400, "logit_bias", "logit_bias: key '%s' is not a token id below %u", k, lim->vocab_size);
        if (!json_is_number(b) || !isfinite(json_number_value(b)))
            return sv_api_fail(e, 400, "logit_bias", "logit_bias[%s]: must be a number", k);
        for (uint32_t j = 0; j < i; j++)
            if (r->bias[j].id == (int32_t)id) return sv_api_fail(e, 400, "logit_bias", "logit_bias: token %lld twice", id);
        r->bias[i].id = (int32_t)id;
        r->bias[i].bias = (float)json_number_value(b);
        i++;
    }
    r->sp.logit_bias = r->bias;
    r->sp.n_logit_bias = i;
    return 0;
}

void sv_api_request_free(sv_api_request_t *r) {
    if (!r) return;
    json_decref(r->body);
    free(r->prompt_ids);
    free(r->bias);
    free(r->c.text);
    memset(r, 0, sizeof *r);
}

/* max_reasoning_tokens and chat_template_kwargs.enable_thinking
 * (src/api/reasoning.h): a budget is refused where nothing would apply it
 * (no reasoning parser, or a completion), rather than ignored. */
static int parse_reasoning(sv_api_kind kind, json_t *root, const sv_api_limits_t *lim, sv_api_request_t *r,
                           sv_api_error_t *e) {
    long long ll;
    json_t *v;
    r->enable_thinking = true;
    if ((v = field(root, "max_reasoning_tokens"))) {
        if (kind != SV_API_CHAT)
            return sv_api_fail(e, 400, "max_reasoning_tokens", "max_reasoning_tokens: only chat completions reason");
        if (!lim->reasoning)
            return sv_api_fail(e, 400, "max_reasoning_tokens", "max_reasoning_tokens: this server has no reasoning "
                               "parser (start it with --reasoning-parser qwen3|deepseek_r1)");
        if (want_int(v, "max_reasoning_tokens", 0, lim->max_ctx, &ll, e)) return -1;
        r->max_reasoning_tokens = (uint32_t)ll;
        r->max_reasoning_given = true;
    }
    json_t *kw = field(root, "chat_template_kwargs");
    if (kw && !json_is_object(kw))
        return sv_api_fail(e, 400, "chat_template_kwargs", "chat_template_kwargs: must be an object");
    if (kw && (v = field(kw, "enable_thinking")) && want_bool(v, "chat_template_kwargs", &r->enable_thinking, e))
        return -1;
    return 0;
}

static int parse_fields(sv_api_kind kind, json_t *root, const sv_api_limits_t *lim, sv_api_request_t *r,
                        sv_api_error_t *e) {
    json_t *v;
    double d = 0;
    long long ll;
    bool b = false;

    if ((v = field(root, "model"))) {
        if (!json_is_string(v)) return sv_api_fail(e, 400, "model", "model: must be a string");
        r->model = json_string_value(v);
    }
    if (kind == SV_API_CHAT) {
        if (parse_messages(r, json_object_get(root, "messages"), e)) return -1;
    } else {
        if (parse_prompt(r, json_object_get(root, "prompt"), lim, e)) return -1;
        if ((v = field(root, "echo")) && (want_bool(v, "echo", &b, e) || (b && sv_api_fail(e, 400, "echo", "echo: true is not supported"))))
            return -1;
        if ((v = field(root, "best_of"))) {
            if (want_int(v, "best_of", 1, 1, &ll, e)) return -1;
        }
        if ((v = field(root, "suffix")) && !(json_is_string(v) && json_string_length(v) == 0))
            return sv_api_fail(e, 400, "suffix", "suffix: is not supported");
    }

    if ((v = field(root, "temperature"))) {
        if (want_number(v, "temperature", 0, 2, &d, e)) return -1;
        r->sp.temperature = (float)d;
    }
    if ((v = field(root, "top_p"))) {
        if (want_number(v, "top_p", 0, 1, &d, e)) return -1;
        if (d == 0) return sv_api_fail(e, 400, "top_p", "top_p: must be greater than 0");
        r->sp.top_p = (float)d;
    }
    if ((v = field(root, "top_k"))) {
        if (want_int(v, "top_k", -1, 1 << 30, &ll, e)) return -1;
        r->sp.top_k = ll < 0 ? 0 : (int32_t)ll; /* vLLM's -1 is off */
    }
    if ((v = field(root, "min_p"))) {
        if (want_number(v, "min_p", 0, 1, &d, e)) return -1;
        r->sp.min_p = (float)d;
    }
    if ((v = field(root, "presence_penalty"))) {
        if (want_number(v, "presence_penalty", -2, 2, &d, e)) return -1;
        r->sp.presence_penalty = (float)d;
    }
    if ((v = field(root, "frequency_penalty"))) {
        if (want_number(v, "frequency_penalty", -2, 2, &d, e)) return -1;
        r->sp.frequency_penalty = (float)d;
    }
    if ((v = field(root, "repetition_penalty"))) {
        if (want_number(v, "repetition_penalty", 1e-6, 10, &d, e)) return -1;
        r->sp.repetition_penalty = (float)d;
    }
    if ((v = field(root, "seed"))) {
        if (want_int(v, "seed", INT64_MIN / 2, INT64_MAX / 2, &ll, e)) return -1;
        r->sp.seed = (uint64_t)ll;
        r->seed_given = true;
    }
    if ((v = field(root, "n"))) {
        if (want_int(v, "n", 1, lim->max_n, &ll, e)) return -1;
        r->n = (uint32_t)ll;
    }
    /* max_completion_tokens is the newer name (chat); it wins over max_tokens. */
    json_t *mt = field(root, "max_completion_tokens");
    const char *mt_name = "max_completion_tokens";
    if (!mt) mt = field(root, "max_tokens"), mt_name = "max_tokens";
    if (mt) {
        if (want_int(mt, mt_name, 1, lim->max_ctx, &ll, e)) return -1;
        r->max_tokens = (uint32_t)ll;
    }
    if ((v = field(root, "stop")) && parse_stop(r, v, e)) return -1;
    if ((v = field(root, "stream")) && want_bool(v, "stream", &r->stream, e)) return -1;
    if ((v = field(root, "stream_options"))) {
        if (!json_is_object(v)) return sv_api_fail(e, 400, "stream_options", "stream_options: must be an object");
        if (!r->stream) return sv_api_fail(e, 400, "stream_options", "stream_options: only allowed when stream is true");
        json_t *iu = field(v, "include_usage");
        if (iu && want_bool(iu, "stream_options", &r->include_usage, e)) return -1;
    }
    if (kind == SV_API_CHAT) {
        if ((v = field(root, "logprobs")) && want_bool(v, "logprobs", &r->logprobs, e)) return -1;
        if ((v = field(root, "top_logprobs"))) {
            if (want_int(v, "top_logprobs", 0, SV_SAMPLE_MAX_LOGPROBS, &ll, e)) return -1;
            if (!r->logprobs && ll > 0)
                return sv_api_fail(e, 400, "top_logprobs", "top_logprobs: needs logprobs set to true");
            r->top_logprobs = (int32_t)ll;
        }
    } else if ((v = field(root, "logprobs"))) {
        if (want_int(v, "logprobs", 0, 5, &ll, e)) return -1;
        r->logprobs = true;
        r->top_logprobs = (int32_t)ll;
    }
    r->sp.n_logprobs = r->top_logprobs;
    if ((v = field(root, "logit_bias")) && parse_logit_bias(r, v, lim, e)) return -1;
    if (parse_reasoning(kind, root, lim, r, e)) return -1;

    /* Tools first: a tool constraint takes precedence, and response_format
     * then only shapes a text answer (which sieve cannot combine with a
     * required call: see tools.h). */
    if (kind == SV_API_CHAT) {
        r->parallel_tool_calls = true;
        if ((v = field(root, "parallel_tool_calls")) && want_bool(v, "parallel_tool_calls", &r->parallel_tool_calls, e))
            return -1;
        if (sv_tools_parse(r, field(root, "tools"), field(root, "tool_choice"), e)) return -1;
        if (r->tool_choice == SV_TOOLS_REQUIRED || r->tool_choice == SV_TOOLS_NAMED) {
            char *schema = NULL;
            if (sv_tools_call_schema(r, true, &schema, e)) return -1;
            json_t *s = json_loads(schema, JSON_ALLOW_NUL, NULL);
            free(schema);
            if (!s) return sv_api_fail(e, 500, NULL, "internal: the tool-call schema is not JSON");
            int rc = set_constraint(r, SV_CONSTRAINT_SCHEMA, s, NULL, "tools", lim, e);
            json_decref(s);
            if (rc) return -1;
            r->c.tool_calls = true;
        }
    }
    if ((v = field(root, "response_format")) && !r->c.tool_calls) {
        if (parse_response_format(r, v, lim, e)) return -1;
        if (r->c.on && r->c.kind == SV_CONSTRAINT_SCHEMA && r->tool_choice == SV_TOOLS_AUTO &&
            union_with_calls(r, lim, e))
            return -1;
    }
    if ((v = field(root, "regex")) && regex_constraint(r, v, "regex", lim, e)) return -1;
    if ((v = field(root, "guided_regex")) && regex_constraint(r, v, "guided_regex", lim, e)) return -1;
    if ((v = field(root, "choice")) && choice_constraint(r, v, "choice", lim, e)) return -1;
    if ((v = field(root, "guided_choice")) && choice_constraint(r, v, "guided_choice", lim, e)) return -1;
    if ((v = field(root, "guided_json")) && json_constraint(r, v, "guided_json", lim, e)) return -1;
    if ((v = field(root, "structured_outputs")) && parse_structured_outputs(r, v, lim, e)) return -1;
    if ((v = field(root, "grammar")) && grammar_constraint(r, v, "grammar", lim, e)) return -1;
    if ((v = field(root, "guided_grammar")) && grammar_constraint(r, v, "guided_grammar", lim, e)) return -1;
    if ((v = field(root, "ebnf")) && grammar_constraint(r, v, "ebnf", lim, e)) return -1;

    sv_error_t err;
    sv_error_clear(&err);
    if (sv_sample_params_validate(&r->sp, lim->vocab_size, &err))
        return sv_api_fail(e, 400, err.keyword[0] ? err.keyword : NULL, "%s", err.message);
    return 0;
}

int sv_api_parse(sv_api_kind kind, const char *body, size_t len, const sv_api_limits_t *lim, sv_api_request_t *r,
                 sv_api_error_t *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->n = 1;
    r->sp = sv_sample_params_default();
    json_error_t je;
    /* \u0000 is data in a schema or a pattern (strings the model reads are
     * checked for NUL where they are taken: has_nul); a key given twice
     * keeps its last value, as Python's json does; jansson refuses invalid
     * UTF-8, NUL in keys, integers past 64 bits and nesting past 2048. */
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &je);
    if (!root) return sv_api_fail(e, 400, NULL, "the body is not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    if (!json_is_object(root)) {
        json_decref(root);
        return sv_api_fail(e, 400, NULL, "the body must be a JSON object");
    }
    r->body = root;
    char where[160] = "";
    if (nul_outside_schemas(root, where, sizeof where)) {
        sv_api_request_free(r);
        return sv_api_fail(e, 400, NULL, "%s: contains NUL (\\u0000 is allowed only inside JSON schemas)", where);
    }
    if (parse_fields(kind, root, lim, r, e)) {
        sv_api_request_free(r);
        return -1;
    }
    return 0;
}
