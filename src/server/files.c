/* files.c — the OpenAI Files API over the store (src/batch/store.h).
 *
 *   POST   /v1/files               multipart/form-data: purpose, file
 *   GET    /v1/files               ?purpose=&after=&limit= (newest first)
 *   GET    /v1/files/{id}
 *   GET    /v1/files/{id}/content  the bytes
 *   DELETE /v1/files/{id}
 *
 * The store opens on the first request (so a server that never sees one
 * creates no directory); a store that cannot open answers 503 with the
 * reason, and the rest of the server goes on. Uploads are bounded by
 * --max-file-bytes (413). Purposes: batch, batch_output, user_data; a file
 * uploaded for batch must be JSON Lines (checked when a batch uses it). */
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/api/multipart.h"
#include "src/server/internal/server_internal.h"

/* Sends j and drops it (sv_server_send_json borrows). */
static void send_owned(struct evhttp_request *http, int status, json_t *j, int retry_after) {
    sv_server_send_json(http, status, j, retry_after);
    json_decref(j);
}

static json_t *file_json(const sv_file_t *f) {
    return json_pack("{s:s, s:s, s:I, s:I, s:s, s:s, s:s, s:n, s:n}", "id", f->id, "object", "file", "bytes",
                     (json_int_t)f->bytes, "created_at", (json_int_t)f->created_at, "filename", f->filename, "purpose",
                     f->purpose, "status", "processed", "expires_at", "status_details");
}

static void send_status_error(srv_t *s, struct evhttp_request *http, const sv_error_t *err) {
    sv_api_error_t e;
    int status = sv_api_http_status(err->code);
    sv_api_fail(&e, status, NULL, "%s", err->message[0] ? err->message : sv_status_name(err->code));
    if (status == 404) snprintf(e.code, sizeof e.code, "not_found");
    sv_server_send_error(s, http, &e);
}

sv_store_t *sv_server_store(srv_t *s, struct evhttp_request *http) {
    if (!s->store) {
        sv_error_t err;
        sv_error_clear(&err);
        if (sv_store_open(s->cfg.data_dir, &s->store, &err)) {
            sv_api_error_t e;
            sv_api_fail(&e, 503, NULL, "the data directory is not usable: %s", err.message);
            sv_server_send_error(s, http, &e);
            return NULL;
        }
    }
    return s->store;
}

static void upload(srv_t *s, struct evhttp_request *http) {
    sv_api_error_t e;
    struct evbuffer *in = evhttp_request_get_input_buffer(http);
    size_t len = evbuffer_get_length(in);
    if (len > s->cfg.max_file_bytes + 64 * 1024) {
        sv_api_fail(&e, 413, "file", "the upload is %zu bytes; the limit is %zu (--max-file-bytes)", len,
                    s->cfg.max_file_bytes);
        snprintf(e.code, sizeof e.code, "request_too_large");
        sv_server_send_error(s, http, &e);
        return;
    }
    const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(http), "Content-Type");
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    sv_mpart_t parts[16];
    char why[128];
    int n = sv_multipart_parse(ctype, body, len, parts, 16, why, sizeof why);
    if (n < 0) {
        sv_api_fail(&e, 400, NULL, "%s", why);
        sv_server_send_error(s, http, &e);
        return;
    }
    const sv_mpart_t *file = NULL, *purpose = NULL;
    for (int i = 0; i < n; i++) {
        if (parts[i].name_len == 4 && !memcmp(parts[i].name, "file", 4)) file = &parts[i];
        if (parts[i].name_len == 7 && !memcmp(parts[i].name, "purpose", 7)) purpose = &parts[i];
    }
    char pbuf[24] = "";
    if (purpose && purpose->len < sizeof pbuf) memcpy(pbuf, purpose->data, purpose->len), pbuf[purpose->len] = 0;
    if (strcmp(pbuf, "batch") && strcmp(pbuf, "batch_output") && strcmp(pbuf, "user_data")) {
        sv_api_fail(&e, 400, "purpose", "purpose must be \"batch\", \"batch_output\" or \"user_data\"");
        sv_server_send_error(s, http, &e);
        return;
    }
    if (!file) {
        sv_api_fail(&e, 400, "file", "the form has no \"file\" part");
        sv_server_send_error(s, http, &e);
        return;
    }
    if (file->len > s->cfg.max_file_bytes) {
        sv_api_fail(&e, 413, "file", "the file is %zu bytes; the limit is %zu (--max-file-bytes)", file->len,
                    s->cfg.max_file_bytes);
        snprintf(e.code, sizeof e.code, "request_too_large");
        sv_server_send_error(s, http, &e);
        return;
    }
    char fname[256] = "upload";
    if (file->filename && file->filename_len) {
        size_t k = file->filename_len < sizeof fname - 1 ? file->filename_len : sizeof fname - 1;
        memcpy(fname, file->filename, k);
        fname[k] = 0;
        if (strlen(fname) != k) snprintf(fname, sizeof fname, "upload"); /* NUL inside */
    }
    sv_store_t *st = sv_server_store(s, http);
    if (!st) return;
    sv_file_t f;
    sv_error_t err;
    sv_error_clear(&err);
    if (sv_store_file_put(st, pbuf, fname, file->data, file->len, &f, &err)) {
        send_status_error(s, http, &err);
        return;
    }
    send_owned(http, 200, file_json(&f), 0);
}

static void list(srv_t *s, struct evhttp_request *http) {
    sv_api_error_t e;
    struct evkeyvalq q;
    const char *uri = evhttp_request_get_uri(http);
    const char *qs = strchr(uri, '?');
    if (evhttp_parse_query_str(qs ? qs + 1 : "", &q)) {
        sv_api_fail(&e, 400, NULL, "the query string does not parse");
        sv_server_send_error(s, http, &e);
        return;
    }
    const char *after = evhttp_find_header(&q, "after"), *purpose = evhttp_find_header(&q, "purpose");
    const char *lim = evhttp_find_header(&q, "limit");
    long limit = 10000;
    if (lim) {
        char *end;
        limit = strtol(lim, &end, 10);
        if (!*lim || *end || limit < 1 || limit > 10000) {
            evhttp_clear_headers(&q);
            sv_api_fail(&e, 400, "limit", "limit must be an integer from 1 to 10000");
            sv_server_send_error(s, http, &e);
            return;
        }
    }
    sv_store_t *st = sv_server_store(s, http);
    if (!st) {
        evhttp_clear_headers(&q);
        return;
    }
    sv_file_t *v = NULL;
    size_t n = 0;
    bool more = false;
    sv_error_t err;
    sv_error_clear(&err);
    sv_status rc = sv_store_file_list(st, after, (uint32_t)limit, purpose, &v, &n, &more, &err);
    evhttp_clear_headers(&q);
    if (rc) {
        send_status_error(s, http, &err);
        return;
    }
    json_t *data = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(data, file_json(&v[i]));
    json_t *j = json_pack("{s:s, s:o, s:s?, s:s?, s:b}", "object", "list", "data", data, "first_id",
                          n ? v[0].id : NULL, "last_id", n ? v[n - 1].id : NULL, "has_more", more);
    free(v);
    send_owned(http, 200, j, 0);
}

static void content(srv_t *s, struct evhttp_request *http, const char *id) {
    sv_store_t *st = sv_server_store(s, http);
    if (!st) return;
    char path[4096];
    sv_error_t err;
    sv_error_clear(&err);
    if (sv_store_file_path(st, id, path, sizeof path, &err)) {
        send_status_error(s, http, &err);
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb)) {
        if (fd >= 0) close(fd);
        sv_error_set(&err, SV_ERR_IO, -1, "cannot read the file");
        send_status_error(s, http, &err);
        return;
    }
    struct evbuffer *out = evbuffer_new();
    /* evbuffer_add_file takes the descriptor and sends it without a copy. */
    if (!out || evbuffer_add_file(out, fd, 0, sb.st_size)) {
        if (out) evbuffer_free(out);
        else close(fd);
        sv_error_set(&err, SV_ERR_NOMEM, -1, "out of memory");
        send_status_error(s, http, &err);
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(http), "Content-Type", "application/octet-stream");
    evhttp_send_reply(http, 200, "OK", out);
    evbuffer_free(out);
}

void sv_server_files(srv_t *s, struct evhttp_request *http, const char *path) {
    sv_api_error_t e;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(http);
    const char *rest = path + strlen("/v1/files");
    if (!*rest) {
        if (cmd == EVHTTP_REQ_POST) upload(s, http);
        else if (cmd == EVHTTP_REQ_GET) list(s, http);
        else {
            sv_api_fail(&e, 405, NULL, "/v1/files takes GET or POST");
            sv_server_send_error(s, http, &e);
        }
        return;
    }
    char id[64];
    const char *slash = strchr(rest + 1, '/');
    size_t idn = slash ? (size_t)(slash - rest - 1) : strlen(rest + 1);
    if (idn >= sizeof id || (slash && strcmp(slash, "/content"))) {
        sv_api_fail(&e, 404, NULL, "no route for %s", path);
        snprintf(e.code, sizeof e.code, "unknown_url");
        sv_server_send_error(s, http, &e);
        return;
    }
    memcpy(id, rest + 1, idn);
    id[idn] = 0;
    if (slash) {
        if (cmd != EVHTTP_REQ_GET) {
            sv_api_fail(&e, 405, NULL, "%s takes GET", path);
            sv_server_send_error(s, http, &e);
            return;
        }
        content(s, http, id);
        return;
    }
    sv_store_t *st = sv_server_store(s, http);
    if (!st) return;
    sv_file_t f;
    sv_error_t err;
    sv_error_clear(&err);
    if (cmd == EVHTTP_REQ_GET) {
        if (sv_store_file_get(st, id, &f, &err)) send_status_error(s, http, &err);
        else send_owned(http, 200, file_json(&f), 0);
    } else if (cmd == EVHTTP_REQ_DELETE) {
        if (sv_store_file_delete(st, id, &err)) send_status_error(s, http, &err);
        else send_owned(http, 200, json_pack("{s:s, s:s, s:b}", "id", id, "object", "file", "deleted", 1), 0);
    } else {
        sv_api_fail(&e, 405, NULL, "%s takes GET or DELETE", path);
        sv_server_send_error(s, http, &e);
    }
}
