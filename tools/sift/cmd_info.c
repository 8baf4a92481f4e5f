/*
 * cmd_info.c - `sift info MODEL.gguf`: what is in a GGUF file, in the manner of gguf-dump.
 *
 * Prints the header (version, size, alignment, where the tensor data starts), every
 * metadata pair with its type, element count and value (arrays and long strings cut short
 * unless --all), a summary of the vocabulary read from the tokenizer.ggml.* keys, and the
 * tensor table (shape as ne[0..3], type, offset from the data section, bytes) with totals
 * per type. A file the reader refuses gives its message and exit code 1.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "sift.h"

const char sift_cmd_info_help[] = "show a GGUF file: header, metadata, vocabulary summary, tensor table";

typedef struct {
    bool all;          /* whole arrays and strings */
    bool show_meta, show_tensors;
} info_opts;

#define ARRAY_SHOWN 8  /* array elements shown unless --all */
#define STRING_SHOWN 80 /* string bytes shown unless --all */

static void usage(FILE *f)
{
    fprintf(f, "usage: sift info [options] MODEL.gguf     (or -m MODEL.gguf)\n"
               "  --all            print whole arrays and strings (default: the first %d elements, %d bytes)\n"
               "  --no-metadata    skip the metadata pairs\n"
               "  --no-tensors     skip the tensor table\n",
            ARRAY_SHOWN, STRING_SHOWN);
}

static const char *type_word(int t)
{
    static const char *const w[SIFT_GGUF_TYPE_COUNT] = {"UINT8",   "INT8", "UINT16", "INT16", "UINT32",
                                                        "INT32",   "FLOAT32", "BOOL", "STRING", "ARRAY",
                                                        "UINT64",  "INT64", "FLOAT64"};
    return t >= 0 && t < SIFT_GGUF_TYPE_COUNT ? w[t] : "?";
}

/* A string in single quotes with C escapes for quotes, backslashes and non-printing bytes
 * (UTF-8 multibyte sequences pass through). */
static void print_str(const char *s, size_t len, const info_opts *o)
{
    size_t shown = o->all || len <= STRING_SHOWN ? len : STRING_SHOWN;
    putchar('\'');
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\'' || c == '\\') printf("\\%c", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\'');
    if (shown < len) printf("... (%zu bytes)", len);
}

static void print_scalar(int type, const void *p)
{
    switch (type) {
    case SIFT_GGUF_UINT8: printf("%u", *(const uint8_t *)p); break;
    case SIFT_GGUF_INT8: printf("%d", *(const int8_t *)p); break;
    case SIFT_GGUF_UINT16: printf("%u", *(const uint16_t *)p); break;
    case SIFT_GGUF_INT16: printf("%d", *(const int16_t *)p); break;
    case SIFT_GGUF_UINT32: printf("%" PRIu32, *(const uint32_t *)p); break;
    case SIFT_GGUF_INT32: printf("%" PRId32, *(const int32_t *)p); break;
    case SIFT_GGUF_UINT64: printf("%" PRIu64, *(const uint64_t *)p); break;
    case SIFT_GGUF_INT64: printf("%" PRId64, *(const int64_t *)p); break;
    case SIFT_GGUF_FLOAT32: printf("%.9g", *(const float *)p); break;
    case SIFT_GGUF_FLOAT64: printf("%.17g", *(const double *)p); break;
    case SIFT_GGUF_BOOL: fputs(*(const uint8_t *)p ? "true" : "false", stdout); break;
    }
}

static size_t scalar_size(int type)
{
    switch (type) {
    case SIFT_GGUF_UINT8: case SIFT_GGUF_INT8: case SIFT_GGUF_BOOL: return 1;
    case SIFT_GGUF_UINT16: case SIFT_GGUF_INT16: return 2;
    case SIFT_GGUF_UINT32: case SIFT_GGUF_INT32: case SIFT_GGUF_FLOAT32: return 4;
    default: return 8;
    }
}

static void print_value(const sift_gguf_value *v, const info_opts *o)
{
    int type = sift_gguf_value_type(v);
    if (type == SIFT_GGUF_STRING) {
        size_t len;
        const char *s = sift_gguf_value_str(v, &len);
        print_str(s, len, o);
        return;
    }
    if (type != SIFT_GGUF_ARRAY) {
        print_scalar(type, sift_gguf_value_scalar(v));
        return;
    }
    int et = sift_gguf_array_type(v);
    uint64_t n = sift_gguf_array_n(v), shown = o->all || n <= ARRAY_SHOWN ? n : ARRAY_SHOWN;
    putchar('[');
    const uint8_t *data = sift_gguf_array_data(v);
    for (uint64_t i = 0; i < shown; i++) {
        if (i) fputs(", ", stdout);
        if (et == SIFT_GGUF_STRING) {
            size_t len;
            const char *s = sift_gguf_array_str(v, i, &len);
            print_str(s, len, o);
        } else if (et == SIFT_GGUF_ARRAY) {
            print_value(sift_gguf_array_elem(v, i), o);
        } else {
            print_scalar(et, data + i * scalar_size(et));
        }
    }
    if (shown < n) printf(", ... (%" PRIu64 " elements)", n);
    putchar(']');
}

static void print_metadata(const sift_gguf *g, const info_opts *o)
{
    printf("\nmetadata: %" PRId64 " pairs\n", sift_gguf_n_kv(g));
    printf("%7s  %-10s | %8s | %s\n", "#", "type", "count", "key = value");
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++) {
        const sift_gguf_value *v = sift_gguf_kv_value(g, i);
        int type = sift_gguf_value_type(v);
        char tw[24];
        if (type == SIFT_GGUF_ARRAY) snprintf(tw, sizeof tw, "[%s]", type_word(sift_gguf_array_type(v)));
        else snprintf(tw, sizeof tw, "%s", type_word(type));
        printf("%6" PRId64 ":  %-10s | %8" PRIu64 " | %s = ", i + 1, tw,
               type == SIFT_GGUF_ARRAY ? sift_gguf_array_n(v) : 1, sift_gguf_key(g, i));
        print_value(v, o);
        putchar('\n');
    }
}

/* The vocabulary as the tokenizer.ggml.* keys describe it (no tokenizer needed). */
static void print_vocab(const sift_gguf *g)
{
    const sift_gguf_value *tokens = sift_gguf_get(g, "tokenizer.ggml.tokens");
    const char *model = sift_gguf_value_str(sift_gguf_get(g, "tokenizer.ggml.model"), NULL);
    if (!tokens && !model) return;
    uint64_t n = sift_gguf_array_type(tokens) == SIFT_GGUF_STRING ? sift_gguf_array_n(tokens) : 0;
    printf("\nvocabulary: model %s", model ? model : "(none)");
    const char *pre = sift_gguf_value_str(sift_gguf_get(g, "tokenizer.ggml.pre"), NULL);
    if (pre) printf(", pre-tokenizer %s", pre);
    printf(", %" PRIu64 " tokens", n);
    const sift_gguf_value *merges = sift_gguf_get(g, "tokenizer.ggml.merges");
    if (merges) printf(", %" PRIu64 " merges", sift_gguf_array_n(merges));
    if (sift_gguf_get(g, "tokenizer.ggml.scores")) printf(", scores");
    putchar('\n');
    const sift_gguf_value *tt = sift_gguf_get(g, "tokenizer.ggml.token_type");
    if (sift_gguf_array_type(tt) == SIFT_GGUF_INT32) {
        /* llama.cpp's token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte */
        static const char *const names[7] = {"undefined", "normal", "unknown", "control", "user-defined", "unused", "byte"};
        uint64_t count[8] = {0};
        const int32_t *t = sift_gguf_array_data(tt);
        for (uint64_t i = 0; i < sift_gguf_array_n(tt); i++) count[t[i] >= 0 && t[i] <= 6 ? t[i] : 7]++;
        printf("  token types:");
        for (int k = 0; k < 8; k++)
            if (count[k]) printf(" %s %" PRIu64, k < 7 ? names[k] : "other", count[k]);
        putchar('\n');
    }
    static const char *const ids[] = {"bos",     "eos",     "eot",     "eom",     "unknown", "seperator", "padding",
                                      "mask",    "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep",   "fim_sep",
                                      "prefix",  "suffix",  "middle"};
    bool any = false;
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", ids[k]);
        int64_t id;
        if (sift_gguf_value_int(sift_gguf_get(g, key), &id) != SIFT_OK) continue;
        printf("%s %s %" PRId64, any ? "," : "  special:", ids[k], id);
        size_t len;
        const char *s = id >= 0 && (uint64_t)id < n ? sift_gguf_array_str(tokens, (uint64_t)id, &len) : NULL;
        if (s) {
            info_opts o = {.all = false};
            putchar(' ');
            print_str(s, len, &o);
        }
        any = true;
    }
    if (any) putchar('\n');
    static const char *const flags[] = {"add_bos_token", "add_eos_token", "add_space_prefix"};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        char key[64];
        bool b;
        snprintf(key, sizeof key, "tokenizer.ggml.%s", flags[k]);
        if (sift_gguf_value_bool(sift_gguf_get(g, key), &b) == SIFT_OK) printf("  %s: %s\n", flags[k], b ? "true" : "false");
    }
}

static void print_tensors(const sift_gguf *g)
{
    int64_t n = sift_gguf_n_tensors(g);
    printf("\ntensors: %" PRId64 "\n", n);
    if (n == 0) return;
    printf("%7s  %12s | %-28s | %-7s | %12s | %12s | %s\n", "#", "elements", "shape (ne0, ne1, ne2, ne3)", "type",
           "offset", "bytes", "name");
    uint64_t total_el = 0, total_bytes = 0, by_count[SIFT_TYPE_COUNT] = {0}, by_bytes[SIFT_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < n; i++) {
        const sift_gguf_tensor *t = sift_gguf_tensor_at(g, i);
        uint64_t nel = (uint64_t)t->ne[0] * (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
        char shape[64];
        snprintf(shape, sizeof shape, "%6" PRId64 ", %6" PRId64 ", %5" PRId64 ", %5" PRId64, t->ne[0], t->ne[1],
                 t->ne[2], t->ne[3]);
        const bool bad = t->nb[0] == 0; /* inspection mode: rows not whole blocks, no data */
        printf("%6" PRId64 "%s  %12" PRIu64 " | %-28s | %-7s | %12" PRIu64 " | %12" PRIu64 " | %s%s\n", i + 1, bad ? "!" : ":",
               nel, shape, sift_type_name(t->type), t->offset, t->size, t->name,
               bad ? "  (rows are not whole blocks: no data)" : "");
        total_el += nel;
        total_bytes += t->size;
        by_count[t->type]++;
        by_bytes[t->type] += t->size;
    }
    printf("total: %" PRId64 " tensors, %" PRIu64 " elements (%.2f M), %" PRIu64 " bytes (%.2f MiB)\n", n, total_el,
           total_el / 1e6, total_bytes, total_bytes / 1048576.0);
    printf("by type:");
    for (int t = 0; t < SIFT_TYPE_COUNT; t++)
        if (by_count[t]) printf(" %s %" PRIu64 " (%" PRIu64 " bytes)", sift_type_name(t), by_count[t], by_bytes[t]);
    putchar('\n');
}

int sift_cmd_info(int argc, char **argv)
{
    info_opts o = {.all = false, .show_meta = true, .show_tensors = true};
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--all")) {
            o.all = true;
        } else if (!strcmp(a, "--no-metadata")) {
            o.show_meta = false;
        } else if (!strcmp(a, "--no-tensors")) {
            o.show_tensors = false;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "sift info: %s needs a file name\n", a);
                return 2;
            }
            path = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "sift info: unknown option '%s' (try sift info --help)\n", a);
            return 2;
        } else if (path) {
            fprintf(stderr, "sift info: more than one file given ('%s')\n", a);
            return 2;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(stderr, "sift info: no model file given (sift info MODEL.gguf)\n");
        return 2;
    }
    sift_error err = {0};
    /* inspection mode: a file the model loader refuses is still shown, with the problem */
    sift_gguf *g = sift__gguf_open_inspect(path, &err);
    if (!g) {
        fprintf(stderr, "sift info: %s: %s\n", path, err.msg);
        return 1;
    }
    printf("%s: GGUF version %u, %" PRIu64 " bytes, alignment %u, tensor data at offset %" PRIu64 "\n", path,
           sift_gguf_version(g), sift_gguf_file_size(g), sift_gguf_alignment(g), sift_gguf_data_offset(g));
    printf("%" PRId64 " metadata pairs, %" PRId64 " tensors\n", sift_gguf_n_kv(g), sift_gguf_n_tensors(g));
    if (o.show_meta) print_metadata(g, &o);
    const char *arch = sift_gguf_value_str(sift_gguf_get(g, "general.architecture"), NULL);
    if (arch) {
        const char *feat = sift_arch_features(arch);
        printf("\narchitecture: %s (%s)\n", arch, feat ? feat : "sift cannot run it");
    }
    print_vocab(g);
    if (o.show_tensors) print_tensors(g);
    const char *first;
    const int64_t n_bad = sift__gguf_problems(g, &first);
    char problem[SIFT_ERROR_MSG_MAX]; /* a copy: the text lives in g */
    snprintf(problem, sizeof problem, "%s", first ? first : "");
    sift_gguf_close(g);
    if (n_bad) { /* shown, but not loadable: say so, and exit 1 for scripts */
        fprintf(stderr, "sift info: %s: PROBLEM: %" PRId64 " tensor%s cannot be read (marked '!' above; sift generate and "
                "llama.cpp refuse this file); the first: %s\n", path, n_bad, n_bad == 1 ? "" : "s", problem);
        return 1;
    }
    return 0;
}
