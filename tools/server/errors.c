/*
 * errors.c - the error formatter every part of the server uses (srv_errorf): a file of its own
 * so that the parts tested or fuzzed alone, such as tool_calls.c, link without request.c.
 */
#include <stdarg.h>
#include <stdio.h>

#include "server/server.h"

int srv_errorf(srv_error *e, int status, const char *fmt, ...)
{
    e->status = status;
    e->type = status == 503 ? "unavailable_error" : status == 404 ? "not_found_error" : status >= 500 ? "server_error"
                                                                                                          : "invalid_request_error";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return status;
}
