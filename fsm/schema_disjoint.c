/* schema_disjoint.c — oneOf branches that no value can satisfy together.
 *
 * oneOf accepts the values valid in exactly one branch. When no value is
 * valid in two branches, that is their union, which schema.c compiles as it
 * compiles anyOf: an alternation, with free-form values, big $ref targets and
 * key sets as parts, and no product. Otherwise oneOf needs a difference per
 * branch (schema.c), built from flat automata; and checking disjointness by
 * products alone costs one product per pair of branches.
 *
 * This file proves disjointness from the schemas' text, before any
 * automaton is built. Each branch is over-approximated by a few keywords:
 * its types (type, nullable, the types of const/enum values), its literals
 * (const/enum), and for objects what a required member's value may be. Any
 * other keyword only narrows a branch, so two over-approximations that share
 * no value prove the branches share none. The test is sound and incomplete:
 * "false" means "not proven", and schema.c then falls back to products.
 *
 * The common shapes it proves: branches of different types (a label given as
 * a string or as an object), tagged unions (a required "type" or "kind"
 * member with a different const in each branch, OpenAPI's discriminator
 * pattern), and closed objects told apart by a required key the other branch
 * does not allow (additionalProperties: false). Closed objects that do
 * overlap, but name their shared members alike, become disjoint branches
 * with a condition on keys each (sv_sc_closed_oneof, at the end). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/internal/schema_internal.h"

/* Value classes. Numbers split into integral and non-integral values, the
 * two sets "integer" and "number" are built from. */
enum { V_NULL = 1, V_BOOL = 2, V_OBJECT = 4, V_ARRAY = 8, V_STRING = 16, V_INT = 32, V_FRAC = 64, V_ALL = 127 };

/* Proof depth through member values (a tag inside a tag). */
#define DISJOINT_MAX_DEPTH 4
/* Schema pairs the proof for one pair of branches compares (anyOf and
 * oneOf inside branches make it a tree): past them, "not proven". */
#define DISJOINT_MAX_STEPS 4096u
/* $ref hops followed to reach a branch's schema. */
#define DISJOINT_MAX_HOPS 16

static int name_class(const char *t) {
    static const struct { const char *n; int v; } map[] = {
        {"null", V_NULL},     {"boolean", V_BOOL},  {"object", V_OBJECT},           {"array", V_ARRAY},
        {"string", V_STRING}, {"integer", V_INT}, {"number", V_INT | V_FRAC},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(t, map[i].n)) return map[i].v;
    return V_ALL; /* an error the compile reports: prove nothing */
}

static int value_class(json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: return V_NULL;
    case JSON_TRUE: case JSON_FALSE: return V_BOOL;
    case JSON_OBJECT: return V_OBJECT;
    case JSON_ARRAY: return V_ARRAY;
    case JSON_STRING: return V_STRING;
    case JSON_INTEGER: return V_INT;
    case JSON_REAL: {
        /* An integral decimal always parses to an integral double, so a
         * non-integral double is a non-integral value. */
        double d = json_real_value(v);
        return isfinite(d) && d == trunc(d) ? V_INT : V_FRAC;
    }
    }
    return V_ALL;
}

/* Whether two JSON values may be equal as JSON Schema compares them (numbers
 * by value, 1 equals 1.0). "true" when unsure. */
static bool maybe_equal(json_t *a, json_t *b, int depth) {
    if (depth > 32) return true;
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    if (json_typeof(a) != json_typeof(b)) return false;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b)) return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!maybe_equal(json_array_get(a, i), json_array_get(b, i), depth + 1)) return false;
        return true;
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b)) return false;
        const char *k;
        json_t *x;
        json_object_foreach(a, k, x) {
            json_t *y = json_object_get(b, k);
            if (!y || !maybe_equal(x, y, depth + 1)) return false;
        }
        return true;
    }
    default: return true; /* null, true, false: same type, same value */
    }
}

/* The schema a branch stands for after its $refs: in drafts up to 7 a $ref
 * replaces its siblings, and from 2019 a $ref with only inert siblings is
 * its target. A $ref beside other keywords in 2019+ keeps the object (its
 * siblings alone over-approximate it). NULL when a ref does not resolve,
 * or, with local, when one leaves the document (a "#..." ref stays in it). */
static json_t *follow_refs(sctx_t *c, json_t *s, bool local) {
    for (int hop = 0; hop < DISJOINT_MAX_HOPS && json_is_object(s); hop++) {
        json_t *ref = json_object_get(s, "$ref");
        if (!ref) return s;
        if (!json_is_string(ref) || (c->draft > 7 && !sv_sc_ref_stands_alone(c, s))) return s;
        if (local && json_string_value(ref)[0] != '#') return NULL;
        sv_error_t *keep = c->err, scratch;
        c->err = &scratch; /* a bad $ref is reported where it is compiled */
        json_t *t;
        bool ok = sv_sc_resolve_ref(c, s, json_string_value(ref), &t) == SV_OK;
        c->err = keep;
        if (!ok) return NULL;
        s = t;
    }
    return json_is_object(s) || json_is_boolean(s) ? s : NULL;
}

/* What a branch allows, over-approximated. */
typedef struct {
    int cls;        /* value classes */
    json_t *lits;   /* const (one value) or enum (an array), or NULL */
    bool one;       /* lits is a const */
} approx_t;

static size_t lits_n(const approx_t *a) { return a->one ? 1 : json_array_size(a->lits); }
static json_t *lits_at(const approx_t *a, size_t i) { return a->one ? a->lits : json_array_get(a->lits, i); }

static bool approx(json_t *s, approx_t *a) {
    a->cls = V_ALL;
    a->lits = NULL;
    a->one = false;
    json_t *t = json_object_get(s, "type");
    if (json_is_string(t)) {
        a->cls = name_class(json_string_value(t));
    } else if (json_is_array(t)) {
        a->cls = 0;
        for (size_t i = 0; i < json_array_size(t); i++) {
            json_t *x = json_array_get(t, i);
            a->cls |= json_is_string(x) ? name_class(json_string_value(x)) : V_ALL;
        }
    } else if (t) {
        return false;
    }
    if (t && json_is_true(json_object_get(s, "nullable"))) a->cls |= V_NULL; /* as schema.c's type_mask */
    json_t *cn = json_object_get(s, "const"), *en = json_object_get(s, "enum");
    if (en && !json_is_array(en)) return false;
    if (cn) a->lits = cn, a->one = true;
    else if (en) a->lits = en;
    if (a->lits) {
        int lc = 0;
        for (size_t i = 0; i < lits_n(a); i++) lc |= value_class(lits_at(a, i));
        a->cls &= lc;
    }
    return true;
}

/* Whether s's `not` refuses every literal of a: a `not` of literals only
 * ({"not": {"enum": [...]}}, the catch-all branch of a tagged union), and
 * each of a's literals a scalar equal to one of them. */
static bool excludes(json_t *s, const approx_t *a) {
    json_t *n = json_object_get(s, "not");
    if (!json_is_object(n)) return false;
    const char *k;
    json_t *v;
    json_object_foreach(n, k, v) if (strcmp(k, "enum") && strcmp(k, "const") && !sv_sc_inert_keyword(k)) return false;
    if (json_object_get(n, "enum") && json_object_get(n, "const")) return false; /* approx reads const alone */
    approx_t na;
    if (!approx(n, &na) || !na.lits) return false;
    for (size_t i = 0; i < lits_n(a); i++) {
        json_t *x = lits_at(a, i);
        /* maybe_equal is exact on scalars only, and on numbers where a
         * double holds every integer */
        if (json_is_object(x) || json_is_array(x) || (json_is_number(x) && !(fabs(json_number_value(x)) < 9007199254740992.0)))
            return false;
        bool out = false;
        for (size_t j = 0; j < lits_n(&na) && !out; j++) out = maybe_equal(x, lits_at(&na, j), 0);
        if (!out) return false;
    }
    return true;
}

/* The schema a object schema s puts on the value of member key: NULL for
 * "any value" (not known), &forbidden when s allows no such member. */
static json_t forbidden_mark;
#define FORBIDDEN (&forbidden_mark)
static json_t *member(json_t *s, const char *key) {
    json_t *props = json_object_get(s, "properties");
    json_t *p = json_is_object(props) ? json_object_get(props, key) : NULL;
    if (p) return p;
    json_t *pp = json_object_get(s, "patternProperties");
    if (pp && !(json_is_object(pp) && json_object_size(pp) == 0)) return NULL; /* a pattern may match key */
    json_t *ap = json_object_get(s, "additionalProperties");
    if (json_is_false(ap)) return FORBIDDEN;
    return json_is_object(ap) || json_is_boolean(ap) ? ap : NULL;
}

static bool disjoint(sctx_t *c, json_t *x, json_t *y, int depth);
static bool disjoint_within(sctx_t *c, json_t *x, json_t *y, int within, int depth);

/* Whether a required member of object schema a (in a's "required") takes
 * values b cannot give it, or b forbids it. */
static bool member_apart(sctx_t *c, json_t *a, json_t *b, int depth) {
    json_t *req = json_object_get(a, "required");
    if (!json_is_array(req)) return false;
    for (size_t i = 0; i < json_array_size(req); i++) {
        json_t *k = json_array_get(req, i);
        if (!json_is_string(k)) continue;
        json_t *mb = member(b, json_string_value(k));
        if (mb == FORBIDDEN) return true;
        json_t *ma = member(a, json_string_value(k));
        if (ma && ma != FORBIDDEN && mb && depth < DISJOINT_MAX_DEPTH && disjoint(c, ma, mb, depth + 1)) return true;
        if (ma == FORBIDDEN) return true; /* a requires what it forbids: a is empty for objects */
    }
    return false;
}

static bool disjoint_within(sctx_t *c, json_t *x, json_t *y, int within, int depth) {
    if (++c->disjoint_steps > DISJOINT_MAX_STEPS) return false;
    x = follow_refs(c, x, false);
    y = follow_refs(c, y, false);
    if (!x || !y) return false;
    if (json_is_false(x) || json_is_false(y)) return true;
    if (!json_is_object(x) || !json_is_object(y)) return false; /* true, or an error the compile reports */
    /* A branch allows no more than any of its allOf conjuncts (a tag's
     * string type beside its const, as merged allOf members hold them). */
    for (int side = 0; side < 2 && depth < DISJOINT_MAX_DEPTH; side++) {
        json_t *all = json_object_get(side ? y : x, "allOf");
        for (size_t i = 0; json_is_array(all) && i < json_array_size(all); i++)
            if (side ? disjoint_within(c, x, json_array_get(all, i), within, depth + 1)
                     : disjoint_within(c, json_array_get(all, i), y, within, depth + 1))
                return true;
    }
    /* Nor more than its anyOf or oneOf branches together: apart from every
     * branch is apart from the whole (a value given as a string or an
     * object, beside an array of them). */
    static const char *const unions[] = {"anyOf", "oneOf"};
    for (int side = 0; side < 2 && depth < DISJOINT_MAX_DEPTH; side++)
        for (int u = 0; u < 2; u++) {
            json_t *br = json_object_get(side ? y : x, unions[u]);
            if (!json_is_array(br) || json_array_size(br) == 0) continue;
            bool apart = true;
            for (size_t i = 0; i < json_array_size(br) && apart; i++)
                apart = side ? disjoint_within(c, x, json_array_get(br, i), within, depth + 1)
                             : disjoint_within(c, json_array_get(br, i), y, within, depth + 1);
            if (apart) return true;
        }
    approx_t a, b;
    if (!approx(x, &a) || !approx(y, &b)) return false;
    int both = a.cls & b.cls & within;
    if (!both) return true;
    if (a.lits && b.lits) {
        bool meet = false;
        for (size_t i = 0; i < lits_n(&a) && !meet; i++)
            for (size_t j = 0; j < lits_n(&b) && !meet; j++) meet = maybe_equal(lits_at(&a, i), lits_at(&b, j), 0);
        if (!meet) return true;
    }
    if ((a.lits && excludes(y, &a)) || (b.lits && excludes(x, &b))) return true;
    /* Only objects in common: a required member apart is enough. */
    if (both == V_OBJECT && !a.lits && !b.lits)
        return member_apart(c, x, y, depth) || member_apart(c, y, x, depth);
    return false;
}

static bool disjoint(sctx_t *c, json_t *x, json_t *y, int depth) { return disjoint_within(c, x, y, V_ALL, depth); }

/* Whether branch s may hold object members no schema names (a free-form
 * value is then a call). */
static bool open_object(sctx_t *c, json_t *s) {
    s = follow_refs(c, s, false);
    if (!s || json_is_false(s)) return false;
    if (!json_is_object(s)) return true;
    approx_t a;
    if (!approx(s, &a)) return true;
    if (!(a.cls & V_OBJECT)) return false;
    return a.lits || !json_is_false(json_object_get(s, "additionalProperties")) ||
           json_object_get(s, "patternProperties");
}

bool sv_sc_oneof_disjoint(sctx_t *c, json_t *branches, json_t *beside) {
    if (!json_is_array(branches)) return false;
    /* Values beside's own type, const or enum excludes never reach the
     * oneOf: they meet in a product (schema.c), so branches need only be
     * apart within them ("type": "object" beside branches that differ in a
     * tagged member, which non-objects satisfy alike). */
    approx_t w;
    int within = beside && approx(beside, &w) ? w.cls : V_ALL;
    size_t n = json_array_size(branches);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            c->disjoint_steps = 0;
            if (!disjoint_within(c, json_array_get(branches, i), json_array_get(branches, j), within, 0)) return false;
        }
    return true;
}

bool sv_sc_oneof_open(sctx_t *c, json_t *branches) {
    for (size_t i = 0; json_is_array(branches) && i < json_array_size(branches); i++)
        if (open_object(c, json_array_get(branches, i))) return true;
    return false;
}

int sv_sc_first_classes(sctx_t *c, json_t *s) {
    s = follow_refs(c, s, false);
    if (!s) return V_ALL;
    if (json_is_boolean(s)) return json_is_true(s) ? V_ALL : 0;
    approx_t a;
    if (!approx(s, &a)) return V_ALL;
    /* integral and other numbers start alike */
    return a.cls & (V_INT | V_FRAC) ? a.cls | V_INT | V_FRAC : a.cls;
}

/* ---- discriminators --------------------------------------------------------------- */

/* OpenAPI's discriminator names the member that tells a oneOf's branches
 * apart ({"discriminator": {"propertyName": "operation"}, "oneOf": [...]}).
 * JSON Schema ignores the keyword, but OpenAPI asks that the member be
 * required, and Pydantic, which writes such unions for its discriminated
 * models, refuses a value without it even where the tag has a default. A tag
 * that no branch requires proves nothing apart (an object without it may be
 * valid in several branches), and the exact oneOf is then a difference per
 * branch. So, unless discriminator_annotation, each branch that defines the
 * member requires it: a narrowing (values without the tag are refused),
 * counted in ndiscriminator_required, which turns a Pydantic tagged union
 * into a union the proofs above see apart. It is sound only when every
 * branch requires the member: the union is then oneOf's values that have
 * it ("required" constrains objects only), where narrowing some branches
 * alone would let a value valid in two branches pass as valid in one. So a
 * union changes whole or not at all: every branch an object schema that
 * defines the member, inline or the object a local "#/..." $ref names when
 * that branch is the only reference to it (a model used elsewhere keeps its
 * semantics there), changed in place. Documents with a nested $id or id are
 * left alone: their local references resolve against other bases. */

#define DISC_MAX_DEPTH 2048

static bool value_keyword(const char *k) {
    return !strcmp(k, "const") || !strcmp(k, "enum") || !strcmp(k, "default") || !strcmp(k, "examples");
}

/* Calls fn on every object below s, s included (parents before children),
 * skipping the values of const, enum, default and examples, and nothing
 * deeper than DISC_MAX_DEPTH; stops, and returns true, when fn does. */
typedef bool (*visit_fn)(json_t *obj, int depth, void *ctx);

static bool visit(json_t *s, visit_fn fn, void *ctx, int depth) {
    if (depth > DISC_MAX_DEPTH) return false;
    if (json_is_array(s)) {
        for (size_t i = 0; i < json_array_size(s); i++)
            if (visit(json_array_get(s, i), fn, ctx, depth + 1)) return true;
        return false;
    }
    if (!json_is_object(s)) return false;
    if (fn(s, depth, ctx)) return true;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) if (!value_keyword(k) && visit(v, fn, ctx, depth + 1)) return true;
    return false;
}

/* A schema below the root that declares a base of its own (or one too
 * deep to look at: as if it did). */
static bool nested_base(json_t *s, int depth, void *ctx) {
    (void)ctx;
    return depth >= DISC_MAX_DEPTH ||
           (depth > 0 && (json_is_string(json_object_get(s, "$id")) || json_is_string(json_object_get(s, "id"))));
}

/* The value a local JSON pointer reference ("#" or "#/a/b", ~0 and ~1
 * escaped) names in root; NULL for anything else. */
static json_t *local_ref(json_t *root, const char *ref) {
    if (ref[0] != '#' || strchr(ref, '%')) return NULL;
    if (!ref[1]) return root;
    if (ref[1] != '/') return NULL; /* an anchor */
    json_t *at = root;
    const char *p = ref + 1;
    char tok[256];
    while (*p == '/' && at) {
        size_t n = 0;
        for (p++; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~') {
                if (p[1] != '0' && p[1] != '1') return NULL;
                ch = p[1] == '0' ? '~' : '/';
                p++;
            }
            if (n + 1 >= sizeof tok) return NULL;
            tok[n++] = ch;
        }
        tok[n] = 0;
        if (json_is_object(at)) {
            at = json_object_get(at, tok);
        } else if (json_is_array(at)) {
            char *end;
            unsigned long i = strtoul(tok, &end, 10);
            at = n && !*end ? json_array_get(at, i) : NULL;
        } else {
            at = NULL;
        }
    }
    return at;
}

typedef struct {
    json_t **node;
    uint32_t *refs, *branch_refs; /* every $ref to node; those that are discriminated branches */
    uint32_t n, cap;
    bool oom;
} refcount_t;

/* Counts a reference to t: a discriminated branch's (and t joins the list),
 * or any $ref's (counted only for a t already listed). */
static void count_ref(refcount_t *rc, json_t *t, bool branch) {
    uint32_t i = 0;
    while (i < rc->n && rc->node[i] != t) i++;
    if (i == rc->n) {
        if (!branch) return;
        if (rc->n == rc->cap) {
            uint32_t cap = rc->cap ? 2 * rc->cap : 16;
            json_t **nn = realloc(rc->node, cap * sizeof *nn);
            if (nn) rc->node = nn;
            uint32_t *r = nn ? realloc(rc->refs, cap * sizeof *r) : NULL;
            if (r) rc->refs = r;
            uint32_t *b = r ? realloc(rc->branch_refs, cap * sizeof *b) : NULL;
            if (b) rc->branch_refs = b;
            if (!b) { rc->oom = true; return; }
            rc->cap = cap;
        }
        rc->node[i] = t, rc->refs[i] = rc->branch_refs[i] = 0, rc->n++;
    }
    if (branch) rc->branch_refs[i]++;
    else rc->refs[i]++;
}

/* The discriminator's member name of a schema holding a oneOf, or NULL. */
static const char *disc_name(json_t *s) {
    json_t *d = json_object_get(s, "discriminator");
    json_t *p = json_is_object(d) ? json_object_get(d, "propertyName") : NULL;
    return json_is_string(p) && json_is_array(json_object_get(s, "oneOf")) ? json_string_value(p) : NULL;
}

/* A schema holding a discriminated oneOf (most documents hold none, and
 * the rest of the work is skipped). */
static bool has_discriminator(json_t *s, int depth, void *ctx) {
    (void)depth, (void)ctx;
    return disc_name(s) != NULL;
}

/* A branch that is nothing but a $ref: its reference, else NULL. */
static const char *branch_ref(json_t *b) {
    json_t *r = json_is_object(b) && json_object_size(b) == 1 ? json_object_get(b, "$ref") : NULL;
    return json_is_string(r) ? json_string_value(r) : NULL;
}

typedef struct {
    json_t *root;
    refcount_t *rc;
    bool branches; /* list the targets of discriminated branches; else count
                      every $ref to a listed target (a branch's own included) */
    uint32_t changed;
} disc_walk_t;

static bool count_refs(json_t *s, int depth, void *ctx) {
    disc_walk_t *w = ctx;
    (void)depth;
    if (!w->branches) {
        json_t *r = json_object_get(s, "$ref");
        json_t *t = json_is_string(r) && w->rc->n ? local_ref(w->root, json_string_value(r)) : NULL;
        if (t) count_ref(w->rc, t, false);
    } else if (disc_name(s)) {
        json_t *one = json_object_get(s, "oneOf");
        for (size_t i = 0; i < json_array_size(one); i++) {
            const char *br = branch_ref(json_array_get(one, i));
            json_t *bt = br ? local_ref(w->root, br) : NULL;
            if (bt) count_ref(w->rc, bt, true);
        }
    }
    return w->rc->oom;
}

/* The object schema branch b stands for, if the union may change it: b
 * itself, or the target of its $ref when b is that target's one reference;
 * and it defines the member. NULL otherwise. */
static json_t *narrowable(json_t *root, json_t *b, const char *name, const refcount_t *rc) {
    const char *br = branch_ref(b);
    if (br) {
        json_t *t = local_ref(root, br);
        uint32_t j = 0;
        while (t && j < rc->n && rc->node[j] != t) j++;
        /* the root is also the document's own schema */
        if (!t || t == root || j == rc->n || rc->refs[j] != 1 || rc->branch_refs[j] != 1) return NULL;
        b = t;
    }
    json_t *props = json_is_object(b) ? json_object_get(b, "properties") : NULL;
    json_t *req = json_is_object(b) ? json_object_get(b, "required") : NULL;
    if (!props || json_object_get(b, "$ref") || !json_is_object(props) || !json_object_get(props, name) ||
        (req && !json_is_array(req)))
        return NULL;
    return b;
}

/* Requires name in object schema t; 1 if that changed it. */
static uint32_t require_member(json_t *t, const char *name) {
    json_t *req = json_object_get(t, "required");
    if (!req) return json_object_set_new(t, "required", json_pack("[s]", name)) == 0;
    if (sv_sc_has_string(req, name)) return 0; /* required already */
    return json_array_append_new(req, json_string(name)) == 0;
}

static bool require_in(json_t *s, int depth, void *ctx) {
    disc_walk_t *w = ctx;
    (void)depth;
    const char *name = disc_name(s);
    json_t *one = name ? json_object_get(s, "oneOf") : NULL;
    size_t nb = json_array_size(one), i = 0;
    while (i < nb && narrowable(w->root, json_array_get(one, i), name, w->rc)) i++;
    if (nb && i == nb) /* all of them, or none */
        for (i = 0; i < nb; i++) w->changed += require_member(narrowable(w->root, json_array_get(one, i), name, w->rc), name);
    return false;
}

uint32_t sv_sc_require_discriminators(json_t *root) {
    if (!json_is_object(root) || !visit(root, has_discriminator, NULL, 0) || visit(root, nested_base, NULL, 0)) return 0;
    refcount_t rc = {0};
    disc_walk_t w = {root, &rc, true, 0};
    visit(root, count_refs, &w, 0);
    w.branches = false;
    visit(root, count_refs, &w, 0);
    if (!rc.oom) visit(root, require_in, &w, 0);
    free(rc.node);
    free(rc.refs);
    free(rc.branch_refs);
    return w.changed;
}

/* ---- closed objects that overlap ------------------------------------------------ */

/* A branch as a closed object: "type": "object", "additionalProperties":
 * false, properties and required (a list of its members), and nothing else
 * but inert keywords; reached inline or through local $refs into the same
 * resource. NULL otherwise. */
static json_t *closed_object(sctx_t *c, json_t *s) {
    s = follow_refs(c, s, true);
    if (!json_is_object(s) || json_object_get(s, "$ref")) return NULL;
    json_t *ty = json_object_get(s, "type"), *props = json_object_get(s, "properties"),
           *req = json_object_get(s, "required");
    if (!json_is_string(ty) || strcmp(json_string_value(ty), "object") ||
        !json_is_false(json_object_get(s, "additionalProperties")) || (props && !json_is_object(props)) ||
        (req && !json_is_array(req)))
        return NULL;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) if (strcmp(k, "type") && strcmp(k, "properties") && strcmp(k, "required") &&
                                     strcmp(k, "additionalProperties") && !sv_sc_inert_keyword(k)) return NULL;
    for (size_t i = 0; i < json_array_size(req); i++) {
        json_t *r = json_array_get(req, i);
        if (!json_is_string(r) || !json_object_get(props, json_string_value(r))) return NULL; /* an empty branch */
    }
    return s;
}

/* What branch j holds of branch i's objects, as a condition on keys: none
 * of the keys i names and j does not, and all of the keys j requires and i
 * does not (the members both name are the same schema, so a value valid for
 * one is valid for the other). *cond NULL and true: j holds none of them (it
 * requires a key i does not name); *whole: j holds every one of them. False
 * when the condition would name more than SV_KEYCOND_MAX keys or out of
 * memory. */
static bool held_by(json_t *bi, json_t *bj, const char **names, uint32_t *nn, json_t **cond, bool *whole) {
    json_t *pi = json_object_get(bi, "properties"), *pj = json_object_get(bj, "properties");
    json_t *req = json_object_get(bj, "required");
    *cond = NULL;
    *whole = false;
    for (size_t x = 0; x < json_array_size(req); x++)
        if (!json_object_get(pi, json_string_value(json_array_get(req, x)))) return true;
    json_t *absent = json_array(), *present = json_array(), *parts = json_array();
    bool ok = absent && present && parts;
    const char *k;
    json_t *v;
    json_object_foreach(pi, k, v) {
        if (!ok || json_object_get(pj, k)) continue;
        json_t *r = json_pack("{s:[s]}", "required", k);
        ok = r && !json_array_append_new(absent, r) && sv_sc_add_key(names, nn, SV_KEYCOND_MAX, k);
    }
    for (size_t x = 0; ok && x < json_array_size(req); x++) {
        const char *r = json_string_value(json_array_get(req, x));
        if (!sv_sc_has_string(json_object_get(bi, "required"), r))
            ok = !json_array_append(present, json_array_get(req, x)) && sv_sc_add_key(names, nn, SV_KEYCOND_MAX, r);
    }
    if (ok && json_array_size(absent))
        ok = !json_array_append_new(parts, json_pack("{s:{s:O}}", "not", "anyOf", absent));
    if (ok && json_array_size(present)) ok = !json_array_append_new(parts, json_pack("{s:O}", "required", present));
    if (ok) {
        if (json_array_size(parts) == 0) *whole = true;
        else if (json_array_size(parts) == 1) *cond = json_incref(json_array_get(parts, 0));
        else *cond = json_pack("{s:O}", "allOf", parts);
        ok = *whole || *cond;
    }
    json_decref(absent);
    json_decref(present);
    json_decref(parts);
    return ok;
}

json_t *sv_sc_closed_oneof(sctx_t *c, json_t *branches) {
    size_t n = json_array_size(branches);
    if (n < 2 || n > 64) return NULL;
    json_t **b = malloc(n * sizeof *b);
    json_t *out = json_array();
    bool ok = b && out;
    for (size_t i = 0; ok && i < n; i++) ok = (b[i] = closed_object(c, json_array_get(branches, i))) != NULL;
    /* members named by several branches: one schema */
    for (size_t i = 0; ok && i < n; i++)
        for (size_t j = i + 1; ok && j < n; j++) {
            const char *k;
            json_t *v, *pj = json_object_get(b[j], "properties");
            json_object_foreach(json_object_get(b[i], "properties"), k, v) {
                json_t *w = json_object_get(pj, k);
                if (w && !sv_sc_same_schema(v, w)) { ok = false; break; }
            }
        }
    /* Branch i minus every other: not (held by j1 or held by j2 ...). */
    for (size_t i = 0; ok && i < n; i++) {
        const char *names[SV_KEYCOND_MAX];
        uint32_t nn = 0;
        json_t *held = json_array();
        bool within = false;
        ok = held != NULL;
        for (size_t j = 0; ok && !within && j < n; j++) {
            if (j == i) continue;
            json_t *cond;
            ok = held_by(b[i], b[j], names, &nn, &cond, &within);
            if (ok && cond) ok = !json_array_append_new(held, cond);
        }
        /* a branch another holds whole: the difference stays (so the
         * branches keep the indices that errors name) */
        ok = ok && !within;
        if (ok) {
            json_t *copy = json_copy(b[i]); /* shallow: the members are the branch's own */
            if (json_array_size(held) == 1) ok = copy && !json_object_set(copy, "not", json_array_get(held, 0));
            else if (json_array_size(held) > 1)
                ok = copy && !json_object_set_new(copy, "not", json_pack("{s:O}", "anyOf", held));
            ok = ok && copy && !json_array_append(out, copy);
            json_decref(copy);
        }
        json_decref(held);
    }
    free(b);
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}
