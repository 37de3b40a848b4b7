/* multipart.h — multipart/form-data bodies (RFC 7578), as `POST /v1/files`
 * receives them from the OpenAI SDKs: a part per form field, each with a
 * Content-Disposition naming it (and, for the file, its filename).
 *
 * The parser borrows: each part's name, filename and data point into the
 * body. It refuses (returns -1 with a reason) a Content-Type without a
 * boundary, a body that does not start with the boundary, a part without
 * the blank line that ends its headers or without a name, headers over 8 KiB,
 * and a body without the closing boundary; it never reads past len. */
#ifndef SV_SERVER_MULTIPART_H
#define SV_SERVER_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sv_mpart {
    const char *name;
    size_t name_len;
    const char *filename;  /* NULL: none given */
    size_t filename_len;
    const char *data;
    size_t len;
} sv_mpart_t;

/* The parts of body[0..len) (at most max), for the Content-Type header value
 * content_type. Returns the number of parts, or -1 with why filled. */
int sv_multipart_parse(const char *content_type, const char *body, size_t len, sv_mpart_t *parts, int max,
                       char *why, size_t why_cap);

#endif
