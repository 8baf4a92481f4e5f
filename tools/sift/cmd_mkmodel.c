/*
 * cmd_mkmodel.c - `sift mkmodel`: write a llama model of realistic shape with random
 * weights, for benchmarks that need weights which do not live in the CPU caches (the
 * shared test models are 1 MB and smaller, so on them a batch of 8 tokens costs 8 times one
 * token, whatever the runtime does).
 *
 *   sift mkmodel [-o OUT.gguf] [--arch llama|qwen2|qwen3|qwen3moe|qwen35|qwen35moe|gemma2|gemma3|gemma4|granite|smollm3|phi3|gpt-oss]
 *                [--shared-kv N] [--ple N] [--experts N] [--experts-used K] [--ff-exp N] [--type-exps T] [--dim N] [--ff N]
 *                [--layers N] [--heads N] [--kv-heads N] [--head-dim N] [--swa N]
 *                [--type q8_0|q4_0|q4_k|q5_k|q6_k|f16|bf16|f32] [--vocab FILE.gguf] [--ctx N]
 *                [--out-scale X] [--seed N] [--fim] [--fim-style qwen|codellama] [--tokenizer gemma4]
 *   sift mkmodel --fim [--fim-style S] --from MODEL.gguf -o OUT.gguf
 *
 * The default is 1024 wide, 8 layers, 16 heads sharing 4 KV heads (GQA), a feed-forward of
 * 2816, llama-2-tiny-random's 32000-token SPM vocabulary, Q8_0 matrices: 155 M parameters,
 * a 165 MB file, five times the largest L3 cache of the machines this is benchmarked on.
 * The weights are scaled so the activations stay of order 1 and the logits have a standard
 * deviation of about --out-scale (see src/gguf/mkmodel.h): greedy decoding is well
 * defined and sampling gives varied text (the model is random, so the text is nonsense).
 * The file goes to /tmp by default; never commit one.
 *
 * --fim appends fill-in-the-middle tokens to the vocabulary (src/gguf/mkmodel_vocab.c),
 * for the server's /infill; with --from the model is a copy of MODEL.gguf, its weights as
 * they are, with those tokens added (stories260K that infills: tests/server_test.py and the
 * llama-server suite's stories260K-infill). --tokenizer gemma4 rewrites the copied SentencePiece
 * vocabulary as Gemma 4's tokenizer model (a BPE over characters; mkmodel_vocab.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "gguf/mkmodel.h"
#include "sift.h"

const char sift_cmd_mkmodel_help[] = "write a random model of a chosen architecture and shape (tests, benchmarks)";

static const struct {
    const char *name;
    sift_tensor_type type;
} type_names[] = {
    {"f32", SIFT_TYPE_F32},   {"f16", SIFT_TYPE_F16},   {"q8_0", SIFT_TYPE_Q8_0},
    {"q4_0", SIFT_TYPE_Q4_0}, {"q4_k", SIFT_TYPE_Q4_K}, {"q5_k", SIFT_TYPE_Q5_K},
    {"q6_k", SIFT_TYPE_Q6_K}, {"bf16", SIFT_TYPE_BF16}, {"mxfp4", SIFT_TYPE_MXFP4},
};

/* *out = the type named v; false when there is none */
static bool type_by_name(const char *v, sift_tensor_type *out)
{
    for (size_t k = 0; k < sizeof type_names / sizeof *type_names; k++)
        if (!strcasecmp(v, type_names[k].name)) return *out = type_names[k].type, true;
    return false;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sift mkmodel [-o OUT.gguf] [shape options]\n\n"
               "  -o FILE          output (default /tmp/sift-synth-DIMxLAYERS-TYPE.gguf)\n"
               "  --arch A         llama (default), qwen2, qwen3, qwen3moe, qwen35, qwen35moe, gemma2, gemma3,\n"
               "                   gemma4, granite, smollm3, phi3, gpt-oss:\n"
               "                   each with the tensors and keys its architecture has (qwen2 biases,\n"
               "                   q/k norms, gemma's post norms, sliding window, soft-caps, granite's\n"
               "                   multipliers, phi3's fused QKV and gate-up, gpt-oss's biases, sinks\n"
               "                   and window of 128 on even layers; gemma4's sliding layers of head size\n"
               "                   dim/heads and full ones (every 6th, 2nd below 6 layers, and the last)\n"
               "                   of twice that with half the KV heads, V as K, proportional RoPE)\n"
               "  --shared-kv N    gemma4: the last N layers read earlier layers' K/V (default: about\n"
               "                   half of them; -1: none)\n"
               "  --ple N          gemma4: per-layer embeddings of width N (E2B/E4B: 256; default none)\n"
               "  --head-dim N     head size when it is not dim/heads (the key_length key)\n"
               "  --interval N     qwen35, qwen35moe: every Nth layer gated full attention, the others Gated\n"
               "                   DeltaNet (default 4)\n"
               "  --ssm-groups N   qwen35: DeltaNet q/k heads (default --kv-heads)\n"
               "  --ssm-heads N    qwen35: DeltaNet v heads, a multiple of the groups (default --heads)\n"
               "  --ssm-state N    qwen35: DeltaNet head size (default the head size)\n"
               "  --mtp N          qwen35: MTP layers appended after the main stack (default 0)\n"
               "  --experts N      qwen3moe, qwen35moe, gpt-oss: experts per layer (default 8); gemma4: experts beside\n"
               "                   each layer's dense FFN (26B-A4B's shape; default none)\n"
               "  --experts-used K qwen3moe, gpt-oss, gemma4: experts each token is routed to (default 2)\n"
               "  --ff-exp N       qwen3moe, gpt-oss, gemma4: each expert's feed-forward width (default --ff)\n"
               "  --type-exps T    the experts' type (default --type's); mxfp4 as gpt-oss's own files\n"
               "  --swa N          sliding window in positions (gemma2/gemma3/gpt-oss; default 4096 for\n"
               "                   gemma2, none for gemma3, 128 for gpt-oss)\n"
               "  --dim N          embedding width (default 1024)\n"
               "  --layers N       blocks (default 8)\n"
               "  --heads N        query heads (default dim/64)\n"
               "  --kv-heads N     key/value heads, dividing --heads (default heads/4: GQA)\n"
               "  --ff N           feed-forward width (default 2.75*dim rounded up to 256)\n"
               "  --type T         matrices' type: q8_0 (default), q4_0, q4_k, q5_k, q6_k,\n                   f16, bf16, f32, mxfp4\n"
               "  --vocab FILE     GGUF whose tokenizer is copied (default\n"
               "                   $SIFT_SHARED/models/llama-2-tiny-random.gguf: 32000-token SPM)\n"
               "  --ctx N          context_length (default 2048)\n"
               "  --out-scale X    standard deviation of the logits (default 1.5)\n"
               "  --seed N         weights' seed (default 1)\n"
               "  --fim            append fill-in-the-middle tokens to the vocabulary (Qwen2.5-Coder's\n"
               "                   <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>, <|fim_pad|>,\n"
               "                   <|repo_name|>, <|file_sep|>, with the tokenizer.ggml.fim_*_token_id\n"
               "                   keys), for the server's /infill\n"
               "  --fim-style S    qwen (the default of --fim: the six above) or codellama (its four\n"
               "                   \u2581<PRE>, \u2581<SUF>, \u2581<MID>, \u2581<EOT> with the older\n"
               "                   tokenizer.ggml.prefix/suffix/middle/eot_token_id keys; implies --fim)\n"
               "  --tokenizer T    gemma4: the SentencePiece vocabulary rewritten as Gemma 4's tokenizer\n"
               "                   model (BPE over characters; merges made from the tokens)\n"
               "  --from FILE      with --fim: copy FILE's model (weights as they are) instead of\n"
               "                   making a random one; the new tokens' embedding and output rows are the\n"
               "                   mean of the trained ones\n");
}

static int bad(const char *flag, const char *what)
{
    fprintf(stderr, "sift mkmodel: %s: %s (try --help)\n", flag, what);
    return 2;
}

/* elapsed seconds since t0 */
static double since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

static void wrote(const char *out, const struct timespec *t0)
{
    struct stat st;
    const long long size = stat(out, &st) == 0 ? (long long)st.st_size : -1;
    printf("wrote %s (%lld bytes) in %.1f s\n", out, size, since(t0));
}

/* --from: a copy of a model with the FIM tokens added (the only change --from makes) */
static int mkmodel_from(const char *from, const char *out, int fim, const char *shape_flag)
{
    if (!fim) return bad("--from", "copies a model to add --fim tokens; give --fim");
    if (shape_flag) return bad(shape_flag, "not with --from (the model's shape is the copied one's)");
    if (!out) return bad("--from", "give the copy's file with -o");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sift_error err = {0};
    if (sift__mkmodel_add_fim(out, from, fim, &err) != SIFT_OK) return fprintf(stderr, "sift mkmodel: %s\n", err.msg), 1;
    wrote(out, &t0);
    return 0;
}

int sift_cmd_mkmodel(int argc, char **argv)
{
    sift__mkmodel_spec sp = {.arch = "llama", .n_embd = 1024, .n_layer = 8, .n_ctx_train = 2048, .out_scale = 1.5f,
                            .seed = 1, .type = SIFT_TYPE_Q8_0};
    const char *out = NULL, *vocab = NULL, *from = NULL, *shape_flag = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--fim")) {
            if (!sp.fim) sp.fim = SIFT__FIM_QWEN;
            continue;
        }
        if (strcmp(a, "-o") && strcmp(a, "--from") && strcmp(a, "--fim-style")) shape_flag = a;
        if (!v) return bad(a, a[0] == '-' ? "missing value (or unknown option)" : "unexpected argument");
        i++;
        char *end;
        const long long n = strtoll(v, &end, 10);
        const bool num = end != v && !*end;
        int *field = NULL;
        long long lo = 1, hi = 1 << 16;
        if (!strcmp(a, "-o")) {
            out = v;
        } else if (!strcmp(a, "--arch")) {
            sp.arch = v;
        } else if (!strcmp(a, "--head-dim")) {
            field = &sp.head_dim, hi = 1024;
        } else if (!strcmp(a, "--interval")) {
            field = &sp.attn_interval, hi = 1024;
        } else if (!strcmp(a, "--ssm-groups")) {
            field = &sp.ssm_groups, hi = 1024;
        } else if (!strcmp(a, "--ssm-heads")) {
            field = &sp.ssm_v_heads, hi = 1024;
        } else if (!strcmp(a, "--ssm-state")) {
            field = &sp.ssm_state, hi = 1024;
        } else if (!strcmp(a, "--mtp")) {
            field = &sp.n_nextn, lo = 0, hi = 4;
        } else if (!strcmp(a, "--experts")) {
            field = &sp.n_expert, hi = 4096;
        } else if (!strcmp(a, "--experts-used")) {
            field = &sp.n_expert_used, hi = 4096;
        } else if (!strcmp(a, "--ff-exp")) {
            field = &sp.n_ff_exp, hi = 1 << 18;
        } else if (!strcmp(a, "--ple")) {
            field = &sp.n_embd_per_layer, lo = 0, hi = 4096;
        } else if (!strcmp(a, "--shared-kv")) {
            field = &sp.n_kv_shared, lo = -1, hi = 1023;
        } else if (!strcmp(a, "--swa")) {
            field = &sp.n_swa, hi = 1 << 24;
        } else if (!strcmp(a, "--vocab")) {
            vocab = v;
        } else if (!strcmp(a, "--from")) {
            from = v;
        } else if (!strcmp(a, "--tokenizer")) {
            if (strcmp(v, "gemma4")) return bad(a, "expected gemma4");
            sp.gemma4_vocab = true;
        } else if (!strcmp(a, "--fim-style")) {
            if (!strcmp(v, "qwen")) sp.fim = SIFT__FIM_QWEN;
            else if (!strcmp(v, "codellama")) sp.fim = SIFT__FIM_CODELLAMA;
            else return bad(a, "expected qwen or codellama");
        } else if (!strcmp(a, "--type") || !strcmp(a, "--type-exps")) {
            if (!type_by_name(v, !strcmp(a, "--type") ? &sp.type : &sp.exp_type))
                return bad(a, "expected q8_0, q4_0, q4_k, q5_k, q6_k, f16, bf16, f32 or mxfp4");
        } else if (!strcmp(a, "--out-scale")) {
            const float x = strtof(v, &end);
            if (end == v || *end || !(x > 0 && x <= 100)) return bad(a, "expected a number in (0, 100]");
            sp.out_scale = x;
        } else if (!strcmp(a, "--seed")) {
            if (!num || n < 0) return bad(a, "expected a non-negative integer");
            sp.seed = (uint64_t)n;
        } else if (!strcmp(a, "--dim")) {
            field = &sp.n_embd;
        } else if (!strcmp(a, "--layers")) {
            field = &sp.n_layer, hi = 1024;
        } else if (!strcmp(a, "--heads")) {
            field = &sp.n_head, hi = 1024;
        } else if (!strcmp(a, "--kv-heads")) {
            field = &sp.n_head_kv, hi = 1024;
        } else if (!strcmp(a, "--ff")) {
            field = &sp.n_ff, hi = 1 << 18;
        } else if (!strcmp(a, "--ctx")) {
            field = &sp.n_ctx_train, hi = 1 << 24;
        } else {
            return bad(a, "unknown option");
        }
        if (field) {
            if (!num || n < lo || n > hi) {
                char msg[96];
                snprintf(msg, sizeof msg, "expected an integer in [%lld, %lld]", lo, hi);
                return bad(a, msg);
            }
            *field = (int)n;
        }
    }
    if (from) return mkmodel_from(from, out, sp.fim, shape_flag);
    if (!sp.n_head) sp.n_head = sp.n_embd / 64 > 0 ? sp.n_embd / 64 : 1;
    if (!sp.n_head_kv) sp.n_head_kv = sp.n_head % 4 == 0 ? sp.n_head / 4 : sp.n_head;
    if (!sp.n_ff) sp.n_ff = (sp.n_embd * 11 / 4 + 255) / 256 * 256;
    if (!sp.head_dim && sp.n_embd % sp.n_head) return bad("--heads", "must divide --dim (or give --head-dim)");
    if (sp.n_head % sp.n_head_kv) return bad("--kv-heads", "must divide --heads");
    if ((sp.head_dim ? sp.head_dim : sp.n_embd / sp.n_head) % 2) return bad("--heads", "the head size must be even (RoPE rotates pairs)");

    char vocab_buf[1024], out_buf[1024];
    if (!vocab) {
        const char *root = getenv("SIFT_SHARED");
        snprintf(vocab_buf, sizeof vocab_buf, "%s/models/llama-2-tiny-random.gguf", root ? root : "../shared");
        vocab = vocab_buf;
    }
    if (!out) {
        snprintf(out_buf, sizeof out_buf, "/tmp/sift-synth-%dx%d-%s.gguf", sp.n_embd, sp.n_layer, sift_type_name(sp.type));
        out = out_buf;
    }

    sift_error err = {0};
    sift_gguf *vg = sift_gguf_open(vocab, &err);
    if (!vg) return fprintf(stderr, "sift mkmodel: --vocab: %s\n", err.msg), 1;
    int n_fim = 0;
    sift__mkmodel_fim_tokens(sp.fim, &n_fim);
    const int64_t n_vocab = (int64_t)sift_gguf_array_n(sift_gguf_get(vg, "tokenizer.ggml.tokens")) + n_fim;
    sift_gguf_close(vg);
    const int hd = sp.head_dim ? sp.head_dim : sp.n_embd / sp.n_head;
    const bool moe = !strcmp(sp.arch, "qwen3moe") || !strcmp(sp.arch, "qwen35moe") || !strcmp(sp.arch, "gpt-oss");
    const double n_exp = sp.n_expert > 0 ? sp.n_expert : 8, ff_exp = sp.n_ff_exp > 0 ? sp.n_ff_exp : sp.n_ff;
    const bool g4moe = !strcmp(sp.arch, "gemma4") && sp.n_expert > 0; /* experts beside the dense FFN */
    const double exps = (double)sp.n_embd * n_exp * (3.0 * ff_exp + 1);
    const double ffn = moe ? exps : 3.0 * sp.n_embd * sp.n_ff + (g4moe ? exps : 0);
    const double params = (double)n_vocab * sp.n_embd * 2 +
                          (double)sp.n_layer * ((double)sp.n_embd * (2.0 * sp.n_head * hd + 2.0 * sp.n_head_kv * hd) + ffn);
    printf("sift mkmodel: %s, dim %d, %d layers, %d heads (%d KV, head size %d), ff %d, vocab %lld, %s: "
           "%.1f M parameters, ~%.1f MB\n",
           sp.arch, sp.n_embd, sp.n_layer, sp.n_head, sp.n_head_kv, hd, sp.n_ff, (long long)n_vocab, sift_type_name(sp.type),
           params / 1e6, (double)sift__mkmodel_tensor_bytes(&sp, n_vocab) / 1e6);
    fflush(stdout);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (sift__mkmodel_write(out, vocab, &sp, &err) != SIFT_OK) return fprintf(stderr, "sift mkmodel: %s\n", err.msg), 1;
    wrote(out, &t0);
    return 0;
}
