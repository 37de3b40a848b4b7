/* schema_ref.c — $id, $anchor and $ref: finding the schema a reference names
 * without ever leaving the document.
 *
 * Before compiling, the document is walked once through the keywords that
 * hold subschemas (never through enum, const, examples or unknown keywords,
 * where an "$id" is data). Each schema object gets its base URI (its own $id
 * resolved against the enclosing base, RFC 3986 section 5.2); each $id names
 * an embedded resource and each $anchor (or draft-6/7 "#name" $id) a plain
 * fragment. A $ref is resolved against the base of the schema holding it;
 * a target outside the document is a remote reference, refused. */
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/schema_internal.h"

typedef struct ref_entry {
    json_t *node;
    char *base;        /* absolute (or document-relative) URI without fragment */
    char *anchor;      /* NULL, or the plain-name fragment this node defines */
    bool resource;     /* the node has its own $id */
} ref_entry_t;

struct sv_refmap {
    ref_entry_t *v;
    uint32_t n, cap;
};

static char *dupn(sctx_t *c, const char *s, size_t n) {
    char *d = sv_arena_alloc(c->arena, n + 1);
    if (d) memcpy(d, s, n), d[n] = '\0';
    return d;
}

/* Removes "." and ".." segments from a path (RFC 3986 5.2.4), in place;
 * the output never outgrows the input, so out <= in throughout. */
static void remove_dots(char *path) {
    char *in = path, *out = path;
    while (*in) {
        if (strncmp(in, "../", 3) == 0) {
            in += 3;
        } else if (strncmp(in, "./", 2) == 0) {
            in += 2;
        } else if (strncmp(in, "/./", 3) == 0) {
            in += 2;
        } else if (strcmp(in, "/.") == 0) {
            in[1] = '/';
            in += 1;
        } else if (strncmp(in, "/../", 4) == 0 || strcmp(in, "/..") == 0) {
            if (in[3] == '\0') in[2] = '/', in += 2;
            else in += 3;
            while (out > path && out[-1] != '/') out--;
            if (out > path) out--;
        } else if (strcmp(in, ".") == 0 || strcmp(in, "..") == 0) {
            in += strlen(in);
        } else {
            do *out++ = *in++;
            while (*in && *in != '/');
        }
    }
    *out = '\0';
}

static size_t scheme_len(const char *u) {
    size_t i = 0;
    while (u[i] && (u[i] == '+' || u[i] == '-' || u[i] == '.' || ((u[i] | 32) >= 'a' && (u[i] | 32) <= 'z') ||
                    (i > 0 && u[i] >= '0' && u[i] <= '9')))
        i++;
    return i > 0 && u[i] == ':' ? i + 1 : 0;
}

/* Resolves ref against base (both without or with fragment); arena memory. */
static char *resolve(sctx_t *c, const char *base, const char *ref) {
    size_t bl = strcspn(base, "#");
    if (scheme_len(ref)) {
        char *r = dupn(c, ref, strlen(ref));
        if (r && strncmp(ref, "urn:", 4) != 0) {
            char *path = strstr(r, "://");
            path = path ? strchr(path + 3, '/') : NULL;
            if (path) {
                size_t fl = strcspn(path, "#");
                char keep = path[fl];
                char *frag = keep ? dupn(c, path + fl, strlen(path + fl)) : NULL;
                path[fl] = '\0';
                remove_dots(path);
                if (frag) strcat(r, frag);
            }
        }
        return r;
    }
    if (ref[0] == '#' || ref[0] == '\0') {
        char *r = sv_arena_alloc(c->arena, bl + strlen(ref) + 1);
        if (r) memcpy(r, base, bl), strcpy(r + bl, ref);
        return r;
    }
    size_t sl = scheme_len(base);
    if (ref[0] == '/' && ref[1] == '/') {
        char *r = sv_arena_alloc(c->arena, sl + strlen(ref) + 1);
        if (r) memcpy(r, base, sl), strcpy(r + sl, ref);
        return r;
    }
    /* authority end */
    size_t ae = sl;
    if (strncmp(base + sl, "//", 2) == 0) {
        ae = sl + 2;
        while (ae < bl && base[ae] != '/') ae++;
    }
    size_t keep;
    if (ref[0] == '/') {
        keep = ae;
    } else {
        keep = bl;
        while (keep > ae && base[keep - 1] != '/') keep--;
        if (keep == ae && ae > sl) {
            /* base has an authority and an empty path: the merged path is "/" + ref */
            char *r = sv_arena_alloc(c->arena, ae + strlen(ref) + 2);
            if (r) memcpy(r, base, ae), r[ae] = '/', strcpy(r + ae + 1, ref);
            if (r) remove_dots(r + ae);
            return r;
        }
    }
    char *r = sv_arena_alloc(c->arena, keep + strlen(ref) + 1);
    if (!r) return NULL;
    memcpy(r, base, keep);
    strcpy(r + keep, ref);
    size_t fl = strcspn(r + ae, "#");
    char save = r[ae + fl];
    char *frag = save ? dupn(c, r + ae + fl, strlen(r + ae + fl)) : NULL;
    r[ae + fl] = '\0';
    remove_dots(r + ae);
    if (frag) strcat(r, frag);
    return r;
}

static sv_status add(sctx_t *c, struct sv_refmap *m, ref_entry_t e) {
    if (m->n == m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 64;
        ref_entry_t *v = realloc(m->v, cap * sizeof *v);
        if (!v) return sv_sc_nomem(c);
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n++] = e;
    return SV_OK;
}

static sv_status walk(sctx_t *c, struct sv_refmap *m, json_t *s, const char *base, int depth);

static sv_status walk_any(sctx_t *c, struct sv_refmap *m, json_t *x, const char *base, int depth) {
    if (json_is_array(x)) {
        for (size_t i = 0; i < json_array_size(x); i++) {
            sv_status st = walk(c, m, json_array_get(x, i), base, depth + 1);
            if (st) return st;
        }
        return SV_OK;
    }
    return walk(c, m, x, base, depth + 1);
}

/* Whether a keyword's string (or array of strings) holds a NUL character:
 * sieve reads keyword strings as C strings, so it refuses those. */
static bool has_nul(json_t *v) {
    if (json_is_string(v)) return strlen(json_string_value(v)) != json_string_length(v);
    if (json_is_array(v))
        for (size_t i = 0; i < json_array_size(v); i++)
            if (has_nul(json_array_get(v, i))) return true;
    return false;
}

static sv_status walk(sctx_t *c, struct sv_refmap *m, json_t *s, const char *base, int depth) {
    if (!json_is_object(s) || depth > 200) return SV_OK;
    static const char *const strkw[] = {"required", "dependentRequired", "format", "type", "$ref", "$anchor", "$id", "id"};
    for (size_t i = 0; i < sizeof strkw / sizeof strkw[0]; i++) {
        json_t *v = json_object_get(s, strkw[i]);
        bool bad = has_nul(v);
        if (!bad && json_is_object(v) && strcmp(strkw[i], "dependentRequired") == 0) {
            const char *k;
            json_t *x;
            json_object_foreach(v, k, x) bad |= has_nul(x);
        }
        if (bad)
            return sv_sc_fail(c, SV_ERR_UNSUPPORTED, strkw[i], "a NUL character in the strings of %s is not supported",
                              strkw[i]);
    }
    json_t *id = json_object_get(s, "$id");
    if (!id && c->draft == 4) id = json_object_get(s, "id");
    ref_entry_t e = {.node = s, .base = (char *)base};
    if (id && json_is_string(id)) {
        const char *ids = json_string_value(id);
        if (ids[0] == '#' && c->draft <= 7) {
            e.anchor = dupn(c, ids + 1, strlen(ids + 1)); /* draft 6/7: "#name" is an anchor */
        } else {
            char *abs = resolve(c, base, ids);
            if (!abs) return sv_sc_nomem(c);
            abs[strcspn(abs, "#")] = '\0';
            e.base = abs;
            e.resource = true;
        }
    }
    json_t *anc = json_object_get(s, "$anchor");
    if (anc && json_is_string(anc)) e.anchor = dupn(c, json_string_value(anc), json_string_length(anc));
    anc = json_object_get(s, "$dynamicAnchor");
    if (!e.anchor && anc && json_is_string(anc)) e.anchor = dupn(c, json_string_value(anc), json_string_length(anc));
    sv_status st = add(c, m, e);
    if (st) return st;
    static const char *const maps[] = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                                       "dependencies"};
    static const char *const subs[] = {"items", "prefixItems", "allOf", "anyOf", "oneOf", "additionalProperties",
                                       "additionalItems", "contains", "propertyNames", "not", "if", "then", "else",
                                       "unevaluatedProperties", "unevaluatedItems"};
    for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++) {
        json_t *x = json_object_get(s, maps[i]);
        const char *k;
        json_t *v;
        if (json_is_object(x)) json_object_foreach(x, k, v) if ((st = walk(c, m, v, e.base, depth + 1))) return st;
    }
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if ((st = walk_any(c, m, json_object_get(s, subs[i]), e.base, depth))) return st;
    return SV_OK;
}

sv_status sv_sc_refs_index(sctx_t *c) {
    struct sv_refmap *m = sv_arena_alloc(c->arena, sizeof *m);
    if (!m) return sv_sc_nomem(c);
    c->refs = m;
    sv_status st = walk(c, m, c->root, "", 0);
    /* The entries array is malloc'ed: free it with the arena. */
    if (m->v && !sv_arena_defer(c->arena, free, m->v)) return sv_sc_nomem(c);
    return st;
}

static const ref_entry_t *entry_of(const struct sv_refmap *m, const json_t *node) {
    for (uint32_t i = 0; i < m->n; i++)
        if (m->v[i].node == node) return &m->v[i];
    return NULL;
}

static int hexd(char x) {
    return x >= '0' && x <= '9' ? x - '0' : (x | 32) >= 'a' && (x | 32) <= 'f' ? (x | 32) - 'a' + 10 : -1;
}

/* Follows a JSON pointer (already URI-decoded fragment) from cur. */
static sv_status follow_pointer(sctx_t *c, json_t *cur, const char *p, const char *ref, json_t **out) {
    char tok[512];
    while (*p == '/') {
        p++;
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof tok) {
            char ch = *p++;
            if (ch == '~' && *p == '0') ch = '~', p++;
            else if (ch == '~' && *p == '1') ch = '/', p++;
            else if (ch == '%' && hexd(p[0]) >= 0 && hexd(p[1]) >= 0) ch = (char)(hexd(p[0]) * 16 + hexd(p[1])), p += 2;
            tok[n++] = ch;
        }
        tok[n] = '\0';
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            char *end;
            unsigned long i = strtoul(tok, &end, 10);
            cur = *end || !*tok ? NULL : json_array_get(cur, i);
        } else {
            cur = NULL;
        }
        if (!cur) return sv_sc_fail(c, SV_ERR_SYNTAX, "$ref", "$ref \"%s\" points nowhere in this schema", ref);
    }
    *out = cur;
    return SV_OK;
}

sv_status sv_sc_resolve_ref(sctx_t *c, json_t *from, const char *ref, json_t **out) {
    const struct sv_refmap *m = c->refs;
    const ref_entry_t *fe = m ? entry_of(m, from) : NULL;
    const char *base = fe ? fe->base : "";
    char *abs = resolve(c, base, ref);
    if (!abs) return sv_sc_nomem(c);
    size_t ul = strcspn(abs, "#");
    const char *frag = abs[ul] ? abs + ul + 1 : "";
    abs[ul] = '\0';
    /* The resource: the root for the document's own (possibly empty) base,
     * else an embedded $id. */
    json_t *res = NULL;
    const ref_entry_t *root = m ? entry_of(m, c->root) : NULL;
    if (root && strcmp(root->base, abs) == 0) res = c->root;
    for (uint32_t i = 0; !res && m && i < m->n; i++)
        if (m->v[i].resource && strcmp(m->v[i].base, abs) == 0) res = m->v[i].node;
    if (!res && !*abs) res = c->root;
    if (!res) return sv_sc_fail(c, SV_ERR_UNSUPPORTED, "$ref", "remote $ref \"%s\": sieve never fetches schemas", ref);
    if (*frag == '\0') { *out = res; return SV_OK; }
    if (*frag == '/') return follow_pointer(c, res, frag, ref, out);
    for (uint32_t i = 0; m && i < m->n; i++)
        if (m->v[i].anchor && strcmp(m->v[i].anchor, frag) == 0 && strcmp(m->v[i].base, abs) == 0) {
            *out = m->v[i].node;
            return SV_OK;
        }
    return sv_sc_fail(c, SV_ERR_SYNTAX, "$ref", "$ref \"%s\": no such anchor in this schema", ref);
}
