/* test_schema_check.c — the independent validator (src/api/schema_check.h)
 * against the JSON-Schema-Test-Suite (tests/data/json-schema-test-suite,
 * draft 2020-12, the required tests of every keyword file).
 *
 * Every case the validator checks (outcome other than UNCHECKED) must agree
 * with the suite's verdict, and outside the files of the constructs it says
 * it leaves unchecked ($ref beyond a local pointer, $dynamicRef,
 * unevaluated*, custom vocabularies) it must check at least 95% of the
 * cases. Then a few
 * cases of its own: the failure's location and keyword, numbers, and
 * draft 7's forms. */
#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/api/schema_check.h"
#include "test.h"

static int n_checked, n_unchecked;
static int n_declared; /* cases in the files of constructs it declares unchecked */
/* Keyword files of what schema_check.h says it leaves unchecked. */
static const char *const declared[] = {"unevaluatedItems.json", "unevaluatedProperties.json", "refRemote.json",
                                       "anchor.json", "dynamicRef.json", "vocabulary.json"};

static void run_file(const char *path) {
    int unchecked_before = n_unchecked;
    json_error_t je;
    json_t *groups = json_load_file(path, JSON_ALLOW_NUL, &je);
    CHECK(json_is_array(groups), "%s: %s", path, je.text);
    size_t i, j;
    json_t *g, *t;
    json_array_foreach(groups, i, g) {
        json_t *schema = json_object_get(g, "schema");
        json_array_foreach(json_object_get(g, "tests"), j, t) {
            bool valid = json_is_true(json_object_get(t, "valid"));
            sv_check_result_t res;
            sv_check_outcome o = sv_schema_check(schema, json_object_get(t, "data"), &res);
            if (o == SV_CHECK_UNCHECKED) {
                n_unchecked++;
                continue;
            }
            n_checked++;
            CHECK((o == SV_CHECK_VALID) == valid, "%s: %s / %s: expected %s (keyword %s at '%s')", path,
                  json_string_value(json_object_get(g, "description")),
                  json_string_value(json_object_get(t, "description")), valid ? "valid" : "invalid", res.keyword,
                  res.pointer);
        }
    }
    json_decref(groups);
    for (size_t k = 0; k < sizeof declared / sizeof *declared; k++)
        if (!strcmp(strrchr(path, '/') + 1, declared[k])) n_declared += n_unchecked - unchecked_before;
    if (n_unchecked > unchecked_before) printf("%s: %d cases unchecked\n", strrchr(path, '/') + 1, n_unchecked - unchecked_before);
}

static sv_check_outcome chk(const char *schema, const char *inst, sv_check_result_t *res) {
    json_t *s = json_loads(schema, 0, NULL), *v = json_loads(inst, JSON_DECODE_ANY, NULL);
    CHECK(s && v, "parse %s / %s", schema, inst);
    sv_check_outcome o = sv_schema_check(s, v, res);
    json_decref(s);
    json_decref(v);
    return o;
}

int main(void) {
    const char *dir = SV_SOURCE_DIR "/tests/data/json-schema-test-suite/draft2020-12";
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    struct dirent *e;
    int files = 0;
    while (d && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        run_file(path);
        files++;
    }
    if (d) closedir(d);
    printf("suite: %d files, %d cases checked, %d unchecked\n", files, n_checked, n_unchecked);
    CHECK(files >= 40, "%d files", files);
    /* Outside the declared constructs, at least 95% of the cases are checked. */
    int others = n_checked + n_unchecked - n_declared;
    printf("outside unevaluated*, remote refs, anchors, $dynamicRef, vocabularies: %d of %d checked\n", n_checked,
           others);
    CHECK(n_checked * 100 >= others * 95, "checked %d of %d", n_checked, others);

    sv_check_result_t r;
    CHECK(chk("{\"properties\": {\"a\": {\"items\": {\"maximum\": 3}}}}", "{\"a\": [1, 5]}", &r) == SV_CHECK_INVALID &&
              !strcmp(r.pointer, "/a/1") && !strcmp(r.keyword, "maximum"),
          "location %s keyword %s", r.pointer, r.keyword);
    CHECK(chk("{\"properties\": {\"a/b~\": {\"type\": \"string\"}}}", "{\"a/b~\": 1}", &r) == SV_CHECK_INVALID &&
              !strcmp(r.pointer, "/a~1b~0"),
          "escaped location %s", r.pointer);
    CHECK(chk("{\"anyOf\": [{\"type\": \"string\"}, {\"minimum\": 2}]}", "1", &r) == SV_CHECK_INVALID &&
              !strcmp(r.keyword, "anyOf"),
          "anyOf keyword %s", r.keyword);
    CHECK(chk("{\"type\": \"integer\"}", "10.0", NULL) == SV_CHECK_VALID, "10.0 is an integer");
    CHECK(chk("{\"multipleOf\": 0.01}", "0.07", NULL) == SV_CHECK_VALID, "0.07 is a multiple of 0.01");
    CHECK(chk("{\"multipleOf\": 0.01}", "0.075", NULL) == SV_CHECK_INVALID, "0.075 is not");
    CHECK(chk("{\"enum\": [1, {\"a\": [2.0]}]}", "{\"a\": [2]}", NULL) == SV_CHECK_VALID, "enum by value");
    CHECK(chk("{\"items\": [{\"type\": \"string\"}], \"additionalItems\": false}", "[\"a\", 1]", NULL) ==
              SV_CHECK_INVALID,
          "draft 7 tuple");
    CHECK(chk("{\"minimum\": 5, \"exclusiveMinimum\": true}", "5", NULL) == SV_CHECK_INVALID, "draft 4 exclusive");
    CHECK(chk("{\"dependencies\": {\"a\": [\"b\"]}}", "{\"a\": 1}", NULL) == SV_CHECK_INVALID, "draft 7 dependencies");
    CHECK(chk("{\"$defs\": {\"n\": {\"type\": \"object\", \"properties\": {\"next\": {\"$ref\": \"#/$defs/n\"}}}},"
              " \"$ref\": \"#/$defs/n\"}",
              "{\"next\": {\"next\": {\"next\": 3}}}", &r) == SV_CHECK_INVALID &&
              !strcmp(r.pointer, "/next/next/next"),
          "recursive ref: %s", r.pointer);
    CHECK(chk("{\"$ref\": \"#\"}", "1", &r) == SV_CHECK_UNCHECKED && !strcmp(r.keyword, "depth"),
          "a ref loop ends unchecked (%s)", r.keyword);
    CHECK(chk("{\"$ref\": \"https://example.com/s\"}", "1", &r) == SV_CHECK_UNCHECKED && !strcmp(r.keyword, "$ref"),
          "a remote ref is unchecked");
    CHECK(chk("{\"pattern\": \"(\"}", "\"x\"", &r) == SV_CHECK_UNCHECKED, "a pattern PCRE2 refuses is unchecked");
    CHECK(chk("{\"patternProperties\": {\"^a\": true, \"^b\": false}}", "{\"a\": 1}", NULL) == SV_CHECK_VALID &&
              chk("{\"patternProperties\": {\"^a\": true, \"^b\": false}}", "{\"b\": 1}", NULL) == SV_CHECK_INVALID,
          "patterns keyed apart");
    CHECK(chk("{\"maxLength\": 2}", "\"\\u00e9\\u00e9\"", NULL) == SV_CHECK_VALID, "code points, not bytes");
    return test_summary("test_schema_check");
}
