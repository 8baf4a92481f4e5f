/*
 * cmd_replay.c - `sift replay`: run a sampler chain over stored logits and print the
 * token ids it picks, one per line - the same interface as ../shared/peer/peer_replay
 * (llama.cpp itself), so the two streams can be diffed and the first step where they part
 * found.
 *
 *   sift replay --logits FILE --steps N --chain SPEC [--seed S] [--trace] [--time]
 *   sift replay --logits FILE --steps N [llama.cpp sampling flags: --top-k 40 --temp 0.8 ...]
 *
 * FILE: uint32 n_vocab, uint32 n_vectors, float32[n_vectors][n_vocab], little-endian
 * (../shared/reference/sampling/logits_v*.bin); step t uses vector t mod n_vectors. Each
 * step is one sift_chain_sample(): fill, apply, accept.
 *
 * --chain takes a chain spec (sift.h, "chain spec"); dist() / xtc(p,t,k) without a seed
 * take --seed (default 0, as peer_replay). Without --chain the chain is built from
 * llama.cpp's sampling flags exactly as llama.cpp's common sampler builds it (--seed
 * default: random, as llama.cpp).
 *
 * --trace prints, per step and per sampler, the candidate count, whether the array is
 * sorted and whether it holds valid probabilities, and the top few tokens with their
 * probabilities (the chain inspector in text form); the token line follows each step.
 * --time prints the timing (wall µs per step, the chain's fill / sampler time and each
 * sampler's share) to stderr.
 *
 * --vocab VOCAB.gguf (whose size must be the logits' n_vocab) gives the chain the token
 * texts: infill() and DRY's string breakers need them. With a grammar (--grammar,
 * --grammar-file, -j/--json-schema, -jf/--json-schema-file; see cli_grammar.h), which needs
 * --vocab, each step is sift_grammar_chain_sample(): llama.cpp's rejection strategy, or the
 * grammar first with --grammar-first.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_grammar.h"
#include "cli_sampling.h"
#include "cli_util.h"
#include "sift.h"

const char sift_cmd_replay_help[] = "run a sampler chain over a logits file, print the token ids (--trace: chain inspector)";

typedef struct trace_state {
    FILE *out;
    int top;
    int64_t step;
} trace_state;

static void trace_hook(void *user, int32_t index, const sift_sampler *smpl, const sift_candidates *cand)
{
    trace_state *ts = user;
    if (index < 0) fprintf(ts->out, "step %lld\n", (long long)ts->step);
    sift_token ids[32];
    float probs[32];
    const size_t want = ts->top < 32 ? (size_t)ts->top : 32;
    const size_t n = sift_candidates_top(cand, want, ids, NULL, probs);
    fprintf(ts->out, "  %-13s n=%-7zu %-8s %-6s", index < 0 ? "fill" : sift_sampler_name(smpl),
            cand->size, cand->sorted ? "sorted" : "unsorted", (cand->flags & SIFT_CAND_PROBS) ? "probs" : "logits");
    if (cand->selected >= 0 && (size_t)cand->selected < cand->size)
        fprintf(ts->out, " selected=%d", (int)cand->id[cand->selected]);
    fprintf(ts->out, " top p:"); /* probabilities, whatever the candidates hold (the column before says) */
    for (size_t i = 0; i < n; i++) fprintf(ts->out, " %d:%.4f", (int)ids[i], probs[i]);
    fputc('\n', ts->out);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sift replay --logits FILE --steps N --chain SPEC [--seed S] [--trace] [--trace-top K] [--time]\n"
               "       sift replay --logits FILE --steps N [llama.cpp sampling flags] [--trace] [--time]\n\n"
               "  --logits FILE   uint32 n_vocab, uint32 n_vectors, float32[n_vectors][n_vocab]\n"
               "  --steps N       steps to run (default 256); step t uses vector t mod n_vectors\n"
               "  --chain SPEC    e.g. \"top_k(40);temp(0.8);dist(1234)\" (see the README's chain-spec grammar)\n"
               "  --seed S        seed for spec items without one (default 0), or for the flags' chain\n"
               "  --trace         print each sampler's candidates per step (count, order, top tokens)\n"
               "  --trace-top K   tokens shown per trace line (default 5, at most 32)\n"
               "  --time          timing summary on stderr\n"
               "  --vocab FILE    the vocabulary (a GGUF model or vocab file) a grammar needs\n\n");
    cli_grammar_help(f);
    cli_sampling_help(f);
}

static float *read_logits(const char *path, uint32_t *n_vocab, uint32_t *n_vec)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "sift replay: cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    uint8_t h[8];
    if (fread(h, 1, 8, f) != 8) {
        fprintf(stderr, "sift replay: %s: file shorter than its 8-byte header\n", path);
        fclose(f);
        return NULL;
    }
    *n_vocab = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    *n_vec = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24;
    if (*n_vocab == 0 || *n_vocab > (1u << 24) || *n_vec == 0 || (uint64_t)*n_vocab * *n_vec > (1ull << 30)) {
        fprintf(stderr, "sift replay: %s: offset 0: implausible header n_vocab=%u n_vectors=%u\n", path, *n_vocab, *n_vec);
        fclose(f);
        return NULL;
    }
    const size_t n = (size_t)*n_vocab * *n_vec;
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "sift replay: out of memory for %zu logits\n", n);
        fclose(f);
        return NULL;
    }
    size_t got = fread(x, sizeof *x, n, f);
    int extra = fgetc(f);
    fclose(f);
    if (got != n) {
        fprintf(stderr, "sift replay: %s: offset %zu: file ends inside vector %zu (expected %zu bytes)\n", path,
                8 + got * sizeof *x, got / *n_vocab, 8 + n * sizeof *x);
        free(x);
        return NULL;
    }
    if (extra != EOF) {
        fprintf(stderr, "sift replay: %s: offset %zu: trailing bytes after %u vectors\n", path, 8 + n * sizeof *x, *n_vec);
        free(x);
        return NULL;
    }
    return x; /* little-endian host assumed (x86-64, aarch64) */
}

int sift_cmd_replay(int argc, char **argv)
{
    const char *path = NULL, *spec = NULL;
    long steps = 256, trace_top = 5;
    bool trace = false, timing = false, seed_given = false, other_flags = false;
    long long seed = 0;
    cli_sampling cs;
    cli_sampling_init(&cs);
    cli_grammar cg;
    cli_grammar_init(&cg);
    const char *vocab_path = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--logits") && v) {
            path = v, i++;
        } else if (!strcmp(a, "--chain") && v) {
            spec = v, i++;
        } else if (!strcmp(a, "--steps") && v) {
            if (!cli_parse_long(v, 0, LONG_MAX, &steps)) return fprintf(stderr, "sift replay: --steps: bad value '%s'\n", v), 2;
            i++;
        } else if (!strcmp(a, "--trace-top") && v) {
            if (!cli_parse_long(v, 1, 32, &trace_top))
                return fprintf(stderr, "sift replay: --trace-top: bad value '%s' (1..32)\n", v), 2;
            i++;
        } else if (!strcmp(a, "--trace")) {
            trace = true;
        } else if (!strcmp(a, "--time")) {
            timing = true;
        } else if (!strcmp(a, "--vocab") && v) {
            vocab_path = v, i++;
        } else {
            int r = cli_grammar_flag(&cg, argc, argv, &i);
            if (r < 0) return 2;
            if (r > 0) continue;
            r = cli_sampling_flag(&cs, argc, argv, &i);
            if (r < 0) return 2;
            if (r == 0) {
                fprintf(stderr, "sift replay: unknown or incomplete option '%s' (try --help)\n", a);
                return 2;
            }
            if (!strcmp(a, "-s") || !strcmp(a, "--seed")) seed_given = true, seed = (long long)cs.params.seed;
            else other_flags = true;
        }
    }
    if (!path) return fprintf(stderr, "sift replay: --logits FILE is required\n"), 2;
    if (cg.flag && !vocab_path) return fprintf(stderr, "sift replay: %s needs --vocab FILE\n", cg.flag), 2;
    if (spec && other_flags)
        return fprintf(stderr, "sift replay: --chain and llama.cpp sampling flags exclude each other (only --seed goes with --chain)\n"), 2;

    uint32_t n_vocab, n_vec;
    float *logits = read_logits(path, &n_vocab, &n_vec);
    if (!logits) return 1;

    sift_error err = {0};
    /* --vocab: the vocabulary the logits belong to, for the grammar and for the samplers
     * that need token texts (infill, DRY's string breakers) */
    sift_vocab *vocab = NULL;
    sift_vocab_view view;
    if (vocab_path) {
        vocab = sift_vocab_load(vocab_path, &err);
        const char *why = !vocab ? err.msg : sift_vocab_n_tokens(vocab) != (int32_t)n_vocab ? "size" : NULL;
        if (!why && sift_vocab_view_get(vocab, &view) != SIFT_OK) why = "cannot read its tokens";
        if (why) {
            if (!strcmp(why, "size"))
                fprintf(stderr, "sift replay: %s has %d tokens, the logits %u\n", vocab_path, sift_vocab_n_tokens(vocab), n_vocab);
            else
                fprintf(stderr, "sift replay: %s: %s\n", vocab_path, why);
            sift_vocab_free(vocab);
            free(logits);
            return 1;
        }
    }
    const sift_vocab_view *vview = vocab ? &view : NULL;
    sift_token eot = SIFT_TOKEN_NULL;
    if (vocab) eot = sift_vocab_eot(vocab) != SIFT_TOKEN_NULL ? sift_vocab_eot(vocab) : sift_vocab_eos(vocab);

    sift_chain *chain;
    if (spec) {
        sift_chain_env env = {.n_vocab = (int32_t)n_vocab, .vocab = vview, .eot = eot,
                              .default_seed = seed_given ? (uint32_t)seed : 0};
        chain = sift_chain_from_spec(spec, &env, &err);
    } else {
        /* libsift's rules; -1 windows = the whole replay (its context) */
        if (cli_sampling_finish(&cs, (int32_t)n_vocab, steps > INT32_MAX ? INT32_MAX : (int32_t)steps)) {
            sift_vocab_free(vocab);
            free(logits);
            return 2;
        }
        sift_chain_env env = {.n_vocab = (int32_t)n_vocab, .vocab = vview, .eot = eot, .default_seed = 0};
        chain = sift_chain_from_params(&cs.params, &env, &err);
    }
    if (!chain) {
        fprintf(stderr, "sift replay: %s\n", err.msg);
        sift_vocab_free(vocab);
        free(logits);
        return spec && err.status == SIFT_E_PARSE ? 2 : 1;
    }

    sift_sampler *grammar = NULL;
    if (cg.flag && !(grammar = cli_grammar_sampler(&cg, &view, &err))) {
        fprintf(stderr, "sift replay: %s\n", err.msg);
        sift_vocab_free(vocab);
        sift_chain_free(chain);
        free(logits);
        return 1;
    }

    trace_state ts = {stdout, (int)trace_top, 0};
    if (trace) sift_chain_set_trace(chain, trace_hook, &ts);

    int rc = 0;
    const double t0 = cli_now_us();
    for (long t = 0; t < steps; t++) {
        ts.step = t;
        const float *x = logits + (size_t)(t % n_vec) * n_vocab;
        const sift_token tok = grammar ? sift_grammar_chain_sample(grammar, chain, x, (int32_t)n_vocab, cg.mode, NULL)
                                       : sift_chain_sample(chain, x, (int32_t)n_vocab);
        if (tok == SIFT_TOKEN_NULL) {
            fprintf(stderr, "sift replay: step %ld: the chain selected no token (its last sampler must select: greedy, dist, mirostat, adaptive_p)\n", t);
            rc = 1;
            break;
        }
        if (trace) printf("token %d\n", (int)tok);
        else printf("%d\n", (int)tok);
    }
    const double t1 = cli_now_us();

    if (timing) {
        char desc[1024];
        sift_chain_describe(chain, desc, sizeof desc);
        const sift_chain_perf perf = sift_chain_get_perf(chain);
        fprintf(stderr, "chain: %s\n", desc);
        fprintf(stderr, "steps: %ld   vocab: %u   wall: %.1f us/step (%.2f ms total, output included)\n", steps, n_vocab,
                steps ? (t1 - t0) / (double)steps : 0.0, (t1 - t0) * 1e-3);
        if (perf.n_sample > 0) {
            fprintf(stderr, "fill: %.2f us/step   samplers: %.2f us/step\n", perf.t_fill_us / (double)perf.n_sample,
                    perf.t_total_us / (double)perf.n_sample);
            for (int32_t i = 0; i < sift_chain_n(chain); i++) {
                const double us = sift_chain_perf_sampler_us(chain, i);
                fprintf(stderr, "  %-14s %9.2f us/step  %5.1f%%\n", sift_sampler_name(sift_chain_get(chain, i)),
                        us / (double)perf.n_sample, perf.t_total_us > 0 ? 100.0 * us / perf.t_total_us : 0.0);
            }
        }
    }
    sift_sampler_free(grammar);
    sift_vocab_free(vocab);
    sift_chain_free(chain);
    free(logits);
    if (fflush(stdout) != 0) rc = 1;
    return rc;
}
