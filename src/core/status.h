/*
 * status.h - internal helpers for sift_status / sift_error.
 */
#ifndef SIFT_CORE_STATUS_H
#define SIFT_CORE_STATUS_H

#include "sift.h"

/* Fill *err (if not NULL) with status and a printf-style message; returns status, so
 * `return sift__error_set(err, SIFT_E_FORMAT, "tensor '%s': offset %llu past the end", ...)`. */
int sift__error_set(sift_error *err, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
