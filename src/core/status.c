/*
 * status.c - version string and status names.
 *
 * Errors in sift are values (see sift.h): a sift_status code plus, where the caller passes
 * one, a sift_error with a message that says where and what. sift__error_set() is the one
 * place such messages are formatted.
 */
#include <stdarg.h>
#include <stdio.h>

#include "core/status.h"

const char *sift_version(void) { return SIFT_VERSION_STRING; }

const char *sift_status_str(sift_status status)
{
    switch (status) {
    case SIFT_OK: return "ok";
    case SIFT_E_INVAL: return "invalid argument";
    case SIFT_E_NOMEM: return "out of memory";
    case SIFT_E_PARSE: return "parse error";
    case SIFT_E_FORMAT: return "malformed file";
    case SIFT_E_IO: return "I/O error";
    case SIFT_E_UNSUPPORTED: return "unsupported";
    case SIFT_E_STATE: return "invalid state";
    default: return "unknown status";
    }
}

int sift__error_set(sift_error *err, int status, const char *fmt, ...)
{
    if (err) {
        err->status = status;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}
