/*
 * cmd_apply_template.c - `sift apply-template`: render a chat template with a JSON context.
 *
 *   sift apply-template --template FILE.jinja --context FILE.json [--date YYYY-MM-DD]
 *
 * The rendering is what transformers' apply_chat_template produces (and what the reference
 * renderer of the conformance set, shared/chat-templates/render.py, prints): the context's
 * keys are the template's variables, with `tools` and `documents` None and
 * `add_generation_prompt` false unless the context sets them. The text goes to stdout byte
 * for byte (no newline added). --date pins strftime_now() to that day (00:00 UTC), as the
 * conformance goldens were made; without it, the current time.
 *
 * Exit status: 0 rendered, 1 the template failed (the message, as jinja2 would raise it, on
 * stderr), 2 usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"

const char sift_cmd_apply_template_help[] = "render a Jinja chat template with a JSON context (apply_chat_template)";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sift apply-template --template FILE --context FILE.json [--date YYYY-MM-DD]\n"
            "\n"
            "Renders a chat template as Hugging Face's apply_chat_template does and prints it exactly.\n"
            "\n"
            "  --template FILE     the Jinja template (e.g. a GGUF's tokenizer.chat_template)\n"
            "  --context FILE      a JSON object: messages, tools, add_generation_prompt, bos_token, ...\n"
            "  --date YYYY-MM-DD   what strftime_now() sees (default: now)\n"
            "  -h, --help          this text\n");
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, r;
    char *buf = malloc(cap);
    while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

/* YYYY-MM-DD -> Unix seconds at 00:00 UTC; -1 if malformed. */
static int64_t parse_date(const char *s)
{
    int y, m, d;
    char tail;
    if (sscanf(s, "%d-%d-%d%c", &y, &m, &d, &tail) != 3 || m < 1 || m > 12 || d < 1 || d > 31 || y < 1970 || y > 9999)
        return -1;
    /* days from civil (proleptic Gregorian) */
    y -= m <= 2;
    int64_t era = y / 400, yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return (era * 146097 + doe - 719468) * 86400;
}

int sift_cmd_apply_template(int argc, char **argv)
{
    const char *tpath = NULL, *cpath = NULL, *date = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        const char **dst = !strcmp(a, "--template") ? &tpath : !strcmp(a, "--context") ? &cpath : !strcmp(a, "--date") ? &date : NULL;
        if (!dst) {
            fprintf(stderr, "sift apply-template: unknown argument %s (try `sift apply-template --help`)\n", a);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sift apply-template: %s needs a value\n", a);
            return 2;
        }
        *dst = argv[++i];
    }
    if (!tpath || !cpath) {
        usage(stderr);
        return 2;
    }
    sift_template_options opts;
    sift_template_options_init(&opts);
    opts.chat_defaults = true;
    if (date && (opts.now = parse_date(date)) < 0) {
        fprintf(stderr, "sift apply-template: --date wants YYYY-MM-DD, got %s\n", date);
        return 2;
    }
    size_t tlen, clen;
    char *tsrc = slurp(tpath, &tlen);
    if (!tsrc) {
        fprintf(stderr, "sift apply-template: cannot read %s\n", tpath);
        return 1;
    }
    char *ctx = slurp(cpath, &clen);
    if (!ctx) {
        fprintf(stderr, "sift apply-template: cannot read %s\n", cpath);
        free(tsrc);
        return 1;
    }
    sift_error err = {0};
    int rc = 0;
    sift_template *t = sift_template_parse(tsrc, tlen, &err);
    char *out = NULL;
    size_t out_len = 0;
    if (!t || sift_template_render(t, ctx, clen, &opts, &out, &out_len, &err) != SIFT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        rc = 1;
    } else if (fwrite(out, 1, out_len, stdout) != out_len || fflush(stdout) != 0) {
        fprintf(stderr, "sift apply-template: write error\n");
        rc = 1;
    }
    free(out);
    sift_template_free(t);
    free(ctx);
    free(tsrc);
    return rc;
}
