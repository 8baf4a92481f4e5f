/*
 * grammar_mask_vocab.c - the token-mask engine against the reference matcher on the real
 * vocabularies (CTest: grammar_mask_vocab, label slow).
 *
 * For llama-spm (32000) and deepseek-llm (102400), and the grammars of tests/data/grammars
 * and ../shared/peer/grammars: walk a random generation (a uniformly chosen allowed token per
 * step) and, at every step, compare the engine's mask with the reference matcher's verdict
 * (sift__gx_state_token_check: the token's bytes through the parse stacks) for every token of the
 * vocabulary. Any difference is a failure, reported with the step, the token and its text.
 *
 *   grammar_mask_vocab [--steps N]
 */
#include <time.h>

#include "grammar/mask.h"
#include "grammar_util.h"

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int check(const char *vname, const sift_vocab_view *view, const char *gname, const char *text, size_t len, int steps)
{
    sift_error err = {0};
    sift_grammar *g = sift_grammar_parse(text, len, NULL, view, &err);
    sift__gx_engine *e = NULL;
    if (!g || sift__gx_engine_new(&e, g, view, &err) != SIFT_OK || sift__gx_engine_precompute(e, 1u << 26) != SIFT_OK) {
        fprintf(stderr, "%s: %s\n", gname, err.msg);
        return 1;
    }
    const sift__gx_vocab *vo = sift__gx_engine_vocab(e);
    sift__gx_arena ra;
    sift__gx_state st = {0}, t1 = {0}, t2 = {0}, t3 = {0};
    sift__gx_arena_init(&ra, sift__gx_engine_grammar(e));
    sift__gx_state_start(&ra, &st);
    uint64_t *mask = malloc(vo->n_words * sizeof *mask);
    int32_t *allowed = malloc(sizeof *allowed * (size_t)vo->n_tokens);
    uint64_t seed = 77;
    long checks = 0, docs = 0, allowed_sum = 0;
    int bad = 0;
    for (int step = 0; step < steps && !bad; step++) {
        if (sift__gx_engine_fill_mask(e, &ra, &st, mask) != SIFT_OK) {
            bad = 1;
            break;
        }
        int na = 0;
        for (int32_t t = 0; t < vo->n_tokens; t++) {
            bool m = (mask[t >> 6] >> (t & 63)) & 1, ref;
            const int r = sift__gx_token_verdict(&ra, &st, vo, (uint32_t)t, &t1, &t2);
            if (r < 0) {
                fprintf(stderr, "%s/%s step %d: the reference matcher failed (%d)\n", vname, gname, step, r);
                bad = 1;
                break;
            }
            ref = r == 1;
            checks++;
            if (m != ref) {
                uint32_t l;
                const uint8_t *b = sift__gx_vocab_text(vo, (uint32_t)t, &l);
                fprintf(stderr, "%s/%s step %d token %d '%.*s': mask %d, reference %d\n", vname, gname, step, t, (int)l, b, m, ref);
                bad = 1;
            }
            if (m) allowed[na++] = t;
        }
        allowed_sum += na;
        if (!na) {
            fprintf(stderr, "%s/%s step %d: nothing allowed\n", vname, gname, step);
            bad = 1;
            break;
        }
        int32_t t = allowed[rng(&seed) % (uint64_t)na];
        if (vo->flags[t] & GX_TOK_EOG) {
            docs++;
            sift__gx_state_start(&ra, &st);
            continue;
        }
        uint32_t l;
        const uint8_t *b = sift__gx_vocab_text(vo, (uint32_t)t, &l);
        if (sift__gx_state_accept_token(&ra, &st, (uint32_t)t, b, l, &t1, &t2, &t3) != SIFT_OK) bad = 1;
    }
    printf("%-13s %-20s %d steps, %ld token checks, 0 differences%s, %ld documents, %.0f allowed on average\n", vname, gname,
           steps, checks, bad ? " (FAILED)" : "", docs, (double)allowed_sum / steps);
    free(mask);
    free(allowed);
    sift__gx_state_free(&st);
    sift__gx_state_free(&t1);
    sift__gx_state_free(&t2);
    sift__gx_state_free(&t3);
    sift__gx_arena_free(&ra);
    sift__gx_engine_release(e);
    return bad;
}

int main(int argc, char **argv)
{
    int steps = 100;
    if (argc == 3 && !strcmp(argv[1], "--steps")) steps = atoi(argv[2]);
    const char *vocabs[] = {"llama-spm", "deepseek-llm"};
    const char *mine[] = {"json", "arithmetic", "list", "c_like", "chess"};
    const char *peer[] = {"json", "json_schema_person", "arith", "c_like"};
    int bad = 0;
    for (int v = 0; v < 2; v++) {
        char rel[256], path[1024];
        sift_vocab_view view;
        sift_vocab *vocab = gt_vocab_load_shared(vocabs[v], &view);
        if (!vocab) return 1;
        for (int k = 0; k < 5; k++) {
            size_t n;
            char *t = gt_grammar_text(mine[k], &n);
            if (!t) return fprintf(stderr, "missing grammar %s\n", mine[k]), 1;
            bad |= check(vocabs[v], &view, mine[k], t, n, steps);
            free(t);
        }
        for (int k = 0; k < 4; k++) {
            snprintf(rel, sizeof rel, "peer/grammars/%s.gbnf", peer[k]);
            size_t n;
            char *t = gt_read_file(gt_shared_path(path, sizeof path, rel), &n);
            if (!t) return fprintf(stderr, "missing %s\n", path), 1;
            char name[64];
            snprintf(name, sizeof name, "peer/%s", peer[k]);
            bad |= check(vocabs[v], &view, name, t, n, steps);
            free(t);
        }
        sift_vocab_free(vocab);
    }
    return bad;
}
