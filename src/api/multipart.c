/* multipart.c — multipart/form-data bodies (see multipart.h). */
#define _GNU_SOURCE /* memmem, strncasecmp */
#include "multipart.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MAX_BOUNDARY 200
#define MAX_HEADERS 8192

static int fail(char *why, size_t cap, const char *msg) {
    snprintf(why, cap, "%s", msg);
    return -1;
}

/* The value of parameter key in a header value (after its first ';'), quoted
 * or not, in [*v, *v + *n). */
static bool param(const char *h, size_t hn, const char *key, const char **v, size_t *n) {
    size_t kn = strlen(key);
    for (size_t i = 0; i < hn; i++) {
        if (h[i] != ';') continue;
        size_t j = i + 1;
        while (j < hn && (h[j] == ' ' || h[j] == '\t')) j++;
        if (j + kn + 1 > hn || strncasecmp(h + j, key, kn) || h[j + kn] != '=') continue;
        j += kn + 1;
        if (j < hn && h[j] == '"') {
            size_t k = ++j;
            while (k < hn && h[k] != '"') k += h[k] == '\\' && k + 1 < hn ? 2 : 1;
            if (k >= hn) return false;
            *v = h + j;
            *n = k - j;
        } else {
            size_t k = j;
            while (k < hn && h[k] != ';' && h[k] != ' ' && h[k] != '\t' && h[k] != '\r' && h[k] != '\n') k++;
            *v = h + j;
            *n = k - j;
        }
        return true;
    }
    return false;
}

int sv_multipart_parse(const char *content_type, const char *body, size_t len, sv_mpart_t *parts, int max,
                       char *why, size_t why_cap) {
    if (!content_type || strncasecmp(content_type, "multipart/form-data", 19))
        return fail(why, why_cap, "the body must be multipart/form-data");
    const char *b;
    size_t bn;
    if (!param(content_type, strlen(content_type), "boundary", &b, &bn) || bn == 0 || bn > MAX_BOUNDARY)
        return fail(why, why_cap, "the Content-Type has no boundary");
    char delim[MAX_BOUNDARY + 4];
    delim[0] = delim[1] = '-';
    memcpy(delim + 2, b, bn);
    size_t dn = bn + 2;
    /* The first delimiter (a preamble before it is allowed). */
    const char *p = body, *end = body + len;
    if (len >= dn && !memcmp(body, delim, dn)) p = body + dn;
    else {
        char crlf_delim[MAX_BOUNDARY + 6] = "\r\n";
        memcpy(crlf_delim + 2, delim, dn);
        const char *f = memmem(body, len, crlf_delim, dn + 2);
        if (!f) return fail(why, why_cap, "the body does not hold its boundary");
        p = f + dn + 2;
    }
    int n = 0;
    for (;;) {
        /* After a delimiter: "--" ends the body, else CRLF starts a part. */
        if (end - p >= 2 && p[0] == '-' && p[1] == '-') return n;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return fail(why, why_cap, "a boundary is not followed by a line end");
        p += 2;
        size_t left = (size_t)(end - p);
        const char *hend = memmem(p, left < MAX_HEADERS ? left : MAX_HEADERS, "\r\n\r\n", 4);
        const char *data;
        if (left >= 2 && p[0] == '\r' && p[1] == '\n') {
            hend = p - 2; /* no headers at all */
            data = p + 2;
        } else if (!hend) {
            return fail(why, why_cap, "a part's headers do not end");
        } else {
            data = hend + 4;
        }
        sv_mpart_t part = {0};
        /* Content-Disposition: form-data; name="..."; filename="..." */
        for (const char *h = p; h < hend;) {
            const char *eol = memmem(h, (size_t)(hend - h), "\r\n", 2);
            if (!eol) eol = hend;
            size_t hn = (size_t)(eol - h);
            if (hn > 20 && !strncasecmp(h, "content-disposition:", 20)) {
                param(h, hn, "name", &part.name, &part.name_len);
                param(h, hn, "filename", &part.filename, &part.filename_len);
            }
            h = eol + 2;
        }
        if (!part.name) return fail(why, why_cap, "a part has no Content-Disposition name");
        /* The data runs to CRLF + delimiter. */
        char crlf_delim[MAX_BOUNDARY + 6] = "\r\n";
        memcpy(crlf_delim + 2, delim, dn);
        const char *next = memmem(data, (size_t)(end - data), crlf_delim, dn + 2);
        if (!next) return fail(why, why_cap, "the body has no closing boundary");
        part.data = data;
        part.len = (size_t)(next - data);
        if (n == max) return fail(why, why_cap, "too many parts");
        parts[n++] = part;
        p = next + dn + 2;
    }
}
