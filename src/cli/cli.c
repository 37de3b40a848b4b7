#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sv_cli_usage_error(const char *verb, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "sieve%s%s: ", verb ? " " : "", verb ? verb : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'sieve %s%s--help'.\n", verb ? verb : "", verb ? " " : "");
    return SV_EXIT_USAGE;
}

char *sv_cli_read_file(const char *path, size_t *len, sv_error_t *err) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        sv_error_set(err, SV_ERR_IO, -1, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    bool failed = !buf || ferror(f);
    if (f != stdin) fclose(f);
    if (failed) {
        free(buf);
        sv_error_set(err, SV_ERR_IO, -1, "cannot read %s", path);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

int sv_cli_constraint_error(const sv_error_t *err) {
    json_t *e = json_pack("{s:s, s:s}", "message", err->message, "type", sv_status_name(err->code));
    if (e && err->offset >= 0) json_object_set_new(e, "offset", json_integer(err->offset));
    if (e && err->keyword[0]) json_object_set_new(e, "keyword", json_string(err->keyword));
    if (e && (err->keyword[0] || err->pointer[0])) json_object_set_new(e, "pointer", json_string(err->pointer));
    json_t *root = json_pack("{s:o}", "error", e);
    char *s = root ? json_dumps(root, JSON_PRESERVE_ORDER) : NULL;
    if (s) printf("%s\n", s);
    else printf("{\"error\": {\"message\": \"out of memory\"}}\n");
    free(s);
    json_decref(root);
    bool runtime = err->code == SV_ERR_NOMEM || err->code == SV_ERR_IO;
    return runtime ? SV_EXIT_RUNTIME : SV_EXIT_CONSTRAINT;
}

int sv_cli_parse_u64(const char *s, unsigned long long max, unsigned long long *out) {
    if (!s || !*s || *s == '-' || *s == '+') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max) return -1;
    *out = v;
    return 0;
}
