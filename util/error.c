#include "error.h"

#include <stdarg.h>
#include <stdio.h>

sv_status sv_error_set(sv_error_t *err, sv_status code, long offset, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
        err->offset = offset;
        err->keyword[0] = '\0';
        err->pointer[0] = '\0';
    }
    return code;
}

void sv_error_clear(sv_error_t *err) {
    if (!err) return;
    err->code = SV_OK;
    err->offset = -1;
    err->message[0] = '\0';
    err->keyword[0] = '\0';
    err->pointer[0] = '\0';
}

const char *sv_status_name(sv_status code) {
    switch (code) {
    case SV_OK: return "ok";
    case SV_ERR_SYNTAX: return "syntax";
    case SV_ERR_UNSUPPORTED: return "unsupported";
    case SV_ERR_EMPTY: return "empty";
    case SV_ERR_BUDGET: return "budget";
    case SV_ERR_TIMEOUT: return "timeout";
    case SV_ERR_NOMEM: return "nomem";
    case SV_ERR_IO: return "io";
    case SV_ERR_ARG: return "arg";
    case SV_ERR_CAPACITY: return "capacity";
    case SV_ERR_INTERNAL: return "internal";
    case SV_ERR_CANCELLED: return "cancelled";
    case SV_ERR_NOT_FOUND: return "not_found";
    }
    return "unknown";
}
