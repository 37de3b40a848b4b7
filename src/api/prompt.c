/* prompt.c — request to prompt text (see prompt.h). */
#include "prompt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/json_num.h"

static sv_status app(sv_bytes_t *out, const char *s, size_t n) { return sv_bytes_append(out, s, n); }
static sv_status apps(sv_bytes_t *out, const char *s) { return sv_bytes_append(out, s, strlen(s)); }

/* Python's repr of a finite double: the shortest digits that round-trip,
 * in positional notation when the decimal exponent is in [-4, 16), else
 * d.ddde+XX; positional values always carry a fraction (1.0). */
static sv_status py_float(double d, sv_bytes_t *out) {
    if (isnan(d)) return apps(out, "NaN");
    if (isinf(d)) return apps(out, d > 0 ? "Infinity" : "-Infinity");
    char digits[24];
    int nd, exp;
    bool neg;
    if (d == 0) return apps(out, signbit(d) ? "-0.0" : "0.0");
    if (!sv_shortest_digits(d, digits, &nd, &exp, &neg)) return SV_ERR_ARG;
    char res[64];
    int k = 0;
    if (neg) res[k++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            res[k++] = '0';
            res[k++] = '.';
            for (int i = 0; i < -exp - 1; i++) res[k++] = '0';
            for (int i = 0; i < nd; i++) res[k++] = digits[i];
        } else {
            for (int i = 0; i <= exp; i++) res[k++] = i < nd ? digits[i] : '0';
            res[k++] = '.';
            if (nd > exp + 1)
                for (int i = exp + 1; i < nd; i++) res[k++] = digits[i];
            else
                res[k++] = '0';
        }
    } else {
        res[k++] = digits[0];
        if (nd > 1) {
            res[k++] = '.';
            for (int i = 1; i < nd; i++) res[k++] = digits[i];
        }
        k += snprintf(res + k, sizeof res - (size_t)k, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    return app(out, res, (size_t)k);
}

static sv_status py_string(const char *s, size_t n, sv_bytes_t *out) {
    sv_status st;
    if ((st = app(out, "\"", 1))) return st;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
        }
        if (!esc) continue;
        if ((st = app(out, s + run, i - run)) || (st = apps(out, esc))) return st;
        run = i + 1;
    }
    if ((st = app(out, s + run, n - run))) return st;
    return app(out, "\"", 1);
}

sv_status sv_pyjson_dumps(json_t *v, sv_bytes_t *out) {
    sv_status st;
    char buf[32];
    switch (json_typeof(v)) {
    case JSON_NULL: return apps(out, "null");
    case JSON_TRUE: return apps(out, "true");
    case JSON_FALSE: return apps(out, "false");
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        return apps(out, buf);
    case JSON_REAL: return py_float(json_real_value(v), out);
    case JSON_STRING: return py_string(json_string_value(v), json_string_length(v), out);
    case JSON_ARRAY: {
        if ((st = apps(out, "["))) return st;
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            if (i && (st = apps(out, ", "))) return st;
            if ((st = sv_pyjson_dumps(x, out))) return st;
        }
        return apps(out, "]");
    }
    case JSON_OBJECT: {
        if ((st = apps(out, "{"))) return st;
        const char *k;
        json_t *x;
        bool first = true;
        json_object_foreach(v, k, x) {
            if (!first && (st = apps(out, ", "))) return st;
            first = false;
            if ((st = py_string(k, strlen(k), out)) || (st = apps(out, ": ")) || (st = sv_pyjson_dumps(x, out)))
                return st;
        }
        return apps(out, "}");
    }
    }
    return SV_ERR_ARG;
}

/* A message's content as one string: a string as is, text parts joined
 * (Hugging Face's templates see parts joined by the server too). Owned
 * copy in *own when joined. */
static const char *content_text(json_t *c, char **own) {
    *own = NULL;
    if (!c || json_is_null(c)) return NULL;
    if (json_is_string(c)) return json_string_value(c);
    size_t n = 0, i;
    json_t *part;
    json_array_foreach(c, i, part) n += json_string_length(json_object_get(part, "text")) + 1;
    char *s = malloc(n + 1), *p = s;
    if (!s) return NULL;
    json_array_foreach(c, i, part) {
        json_t *t = json_object_get(part, "text");
        if (i) *p++ = '\n';
        memcpy(p, json_string_value(t), json_string_length(t));
        p += json_string_length(t);
    }
    *p = 0;
    *own = s;
    return s;
}

int sv_prompt_render_chat(const sv_chat_template_t *t, const sv_api_request_t *r, sv_bytes_t *out, sv_api_error_t *e) {
    size_t n = json_array_size(r->messages);
    size_t n_tools = r->tools && r->tool_choice != SV_TOOLS_NONE ? json_array_size(r->tools) : 0;
    size_t n_calls = 0, i;
    json_t *m;
    json_array_foreach(r->messages, i, m) n_calls += json_array_size(json_object_get(m, "tool_calls"));

    sv_chat_msg_t *msgs = calloc(n ? n : 1, sizeof *msgs);
    sv_chat_calls_t *mc = calloc(n ? n : 1, sizeof *mc);
    char **owned = calloc(n + n_calls + n_tools + 1, sizeof *owned);
    sv_chat_tool_call_t *calls = calloc(n_calls ? n_calls : 1, sizeof *calls);
    const char **tools = calloc(n_tools ? n_tools : 1, sizeof *tools);
    size_t n_owned = 0, ci = 0;
    int rc = -1;
    sv_bytes_t js = {0};
    if (!msgs || !mc || !owned || !calls || !tools) {
        sv_api_fail(e, 500, NULL, "out of memory");
        goto done;
    }
    json_array_foreach(r->messages, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        msgs[i].role = !strcmp(role, "developer") ? "system" : role;
        msgs[i].content = content_text(json_object_get(m, "content"), &owned[n_owned]);
        if (owned[n_owned]) n_owned++;
        json_t *tc = json_object_get(m, "tool_calls");
        if (json_is_array(tc) && json_array_size(tc)) {
            mc[i].calls = &calls[ci];
            mc[i].n = json_array_size(tc);
            size_t k;
            json_t *c;
            json_array_foreach(tc, k, c) {
                json_t *f = json_object_get(c, "function");
                json_t *args = json_loadb(json_string_value(json_object_get(f, "arguments")),
                                          json_string_length(json_object_get(f, "arguments")), JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
                js.n = 0;
                sv_status st = args ? sv_pyjson_dumps(args, &js) : SV_ERR_ARG;
                json_decref(args);
                if (st || sv_bytes_append(&js, "", 1) || !(owned[n_owned] = strdup((const char *)js.p))) {
                    sv_api_fail(e, 500, NULL, "out of memory");
                    goto done;
                }
                calls[ci].name = json_string_value(json_object_get(f, "name"));
                calls[ci].arguments = owned[n_owned++];
                ci++;
            }
        }
    }
    for (size_t k = 0; k < n_tools; k++) {
        js.n = 0;
        if (sv_pyjson_dumps(json_array_get(r->tools, k), &js) || sv_bytes_append(&js, "", 1) ||
            !(owned[n_owned] = strdup((const char *)js.p))) {
            sv_api_fail(e, 500, NULL, "out of memory");
            goto done;
        }
        tools[k] = owned[n_owned++];
    }
    sv_error_t err;
    sv_error_clear(&err);
    if (sv_chat_render_tools(t, msgs, mc, n, tools, n_tools, out, &err)) {
        sv_api_fail(e, sv_api_http_status(err.code), "messages", "%s", err.message);
        goto done;
    }
    rc = 0;
done:
    for (size_t k = 0; k < n_owned; k++) free(owned[k]);
    free(owned);
    free(msgs);
    free(mc);
    free(calls);
    free(tools);
    sv_bytes_free(&js);
    return rc;
}
