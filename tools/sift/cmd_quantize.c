/*
 * cmd_quantize.c - `sift quantize`: convert a GGUF model's weight matrices to another type,
 * in the manner of llama.cpp's llama-quantize (same argument order):
 *
 *   sift quantize [--leave-output-tensor] [-t N] IN.gguf OUT.gguf TYPE [N_THREADS]
 *
 * TYPE: f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k (any case): every matrix
 * gets TYPE; or one of llama-quantize's names Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M (the
 * per-tensor mixtures of sift_quantize_mix), Q6_K, Q8_0. See sift_model_quantize() in
 * sift.h for the output head's Q6_K, the fallbacks for rows that are not whole blocks, and
 * what stays F32. Prints one line per tensor and the sizes before and after.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sift.h"

const char sift_cmd_quantize_help[] = "convert a GGUF model's weights to q8_0, q4_0, q4_k, q6_k, ... (llama-quantize style)";

static const struct {
    const char *name;
    sift_tensor_type type;
    sift_quantize_mix mix;
} type_names[] = {
    {"f32", SIFT_TYPE_F32, 0},   {"f16", SIFT_TYPE_F16, 0},   {"q8_0", SIFT_TYPE_Q8_0, 0}, {"q4_0", SIFT_TYPE_Q4_0, 0},
    {"q4_1", SIFT_TYPE_Q4_1, 0}, {"q5_0", SIFT_TYPE_Q5_0, 0}, {"q5_1", SIFT_TYPE_Q5_1, 0}, {"q4_k", SIFT_TYPE_Q4_K, 0},
    {"q5_k", SIFT_TYPE_Q5_K, 0}, {"q6_k", SIFT_TYPE_Q6_K, 0},
    {"q4_k_s", SIFT_TYPE_Q4_K, SIFT_QUANT_MIX_Q4_K_S}, {"q4_k_m", SIFT_TYPE_Q4_K, SIFT_QUANT_MIX_Q4_K_M},
    {"q5_k_s", SIFT_TYPE_Q5_K, SIFT_QUANT_MIX_Q5_K_S}, {"q5_k_m", SIFT_TYPE_Q5_K, SIFT_QUANT_MIX_Q5_K_M},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: sift quantize [--leave-output-tensor] [-t N] IN.gguf OUT.gguf TYPE [N_THREADS]\n\n"
               "  TYPE                    f32 f16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k: every matrix TYPE;\n"
               "                          Q4_K_S Q4_K_M Q5_K_S Q5_K_M: llama-quantize's mixtures (attn_v and\n"
               "                          ffn_down of some layers at Q5_K / Q6_K); Q6_K, Q8_0 as above\n"
               "  --leave-output-tensor   give the output head TYPE too (default: q6_k for 4/5-bit types)\n"
               "  -t N                    threads (default: one per CPU)\n\n"
               "Rows that are not whole blocks of TYPE get llama.cpp's fallback (q4_k->q5_0, q5_k->q5_1,\n"
               "q6_k->q8_0) or stay f32; norms and biases stay as they are.\n");
}

static double mib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

int sift_cmd_quantize(int argc, char **argv)
{
    const char *pos[4];
    int n_pos = 0;
    sift_quantize_params p = sift_quantize_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--leave-output-tensor")) {
            p.keep_output = true;
        } else if (!strcmp(a, "-t")) {
            char *end;
            long n = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || *end || end == argv[i + 1] || n < 1 || n > 256)
                return fprintf(stderr, "sift quantize: -t: expected a thread count in [1, 256]\n"), 2;
            p.n_threads = (int)n;
            i++;
        } else if (a[0] == '-' && a[1]) {
            return fprintf(stderr, "sift quantize: unknown option '%s' (try --help)\n", a), 2;
        } else if (n_pos < 4) {
            pos[n_pos++] = a;
        } else {
            return fprintf(stderr, "sift quantize: too many arguments at '%s'\n", a), 2;
        }
    }
    if (n_pos < 3) return fprintf(stderr, "sift quantize: expected IN.gguf OUT.gguf TYPE (try --help)\n"), 2;
    bool found = false;
    for (size_t k = 0; k < sizeof type_names / sizeof *type_names; k++)
        if (!strcasecmp(pos[2], type_names[k].name)) p.type = type_names[k].type, p.mix = type_names[k].mix, found = true;
    if (!found) return fprintf(stderr, "sift quantize: TYPE: unknown type '%s' (try --help)\n", pos[2]), 2;
    if (n_pos == 4) {
        char *end;
        long n = strtol(pos[3], &end, 10);
        if (*end || end == pos[3] || n < 1 || n > 256)
            return fprintf(stderr, "sift quantize: N_THREADS: expected a count in [1, 256], got '%s'\n", pos[3]), 2;
        p.n_threads = (int)n;
    }

    sift_error err = {0};
    int64_t n_conv = 0;
    if (sift_model_quantize(pos[0], pos[1], &p, &n_conv, &err) != SIFT_OK) {
        fprintf(stderr, "sift quantize: %s\n", err.msg);
        return 1;
    }
    /* report, from the two files */
    sift_gguf *a = sift_gguf_open(pos[0], &err), *b = sift_gguf_open(pos[1], &err);
    if (!a || !b) {
        fprintf(stderr, "sift quantize: cannot reopen: %s\n", err.msg);
        sift_gguf_close(a);
        sift_gguf_close(b);
        return 1;
    }
    uint64_t in_bytes = 0, out_bytes = 0;
    const int64_t nt = sift_gguf_n_tensors(b);
    for (int64_t i = 0; i < nt; i++) {
        const sift_gguf_tensor *ta = sift_gguf_tensor_at(a, i), *tb = sift_gguf_tensor_at(b, i);
        in_bytes += ta->size;
        out_bytes += tb->size;
        const bool head = !strcmp(tb->name, "output.weight") ||
                          (!strcmp(tb->name, "token_embd.weight") && sift_gguf_find_tensor(b, "output.weight") < 0);
        const char *why = "";
        if (tb->ne[1] > 1 && tb->type != p.type && (tb->type != ta->type || ta->type != SIFT_TYPE_F32 || tb->ne[0] % 32))
            why = head && !p.keep_output                     ? "  (output head)"
                  : p.mix && (tb->type == SIFT_TYPE_Q5_K || tb->type == SIFT_TYPE_Q6_K) ? "  (mixture)"
                                                                   : "  (rows are not whole blocks of the type)";
        printf("[%3lld/%3lld] %-28s [%6lld, %6lld] %-5s -> %-5s %9.3f -> %9.3f KiB%s\n", (long long)i + 1, (long long)nt,
               tb->name, (long long)tb->ne[0], (long long)tb->ne[1], sift_type_name(ta->type), sift_type_name(tb->type),
               ta->size / 1024.0, tb->size / 1024.0, why);
    }
    printf("%lld of %lld tensors converted; tensor data %.3f MiB -> %.3f MiB\n", (long long)n_conv, (long long)nt,
           mib(in_bytes), mib(out_bytes));
    sift_gguf_close(a);
    sift_gguf_close(b);
    return 0;
}
