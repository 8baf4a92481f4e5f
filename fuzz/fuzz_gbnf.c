/*
 * fuzz_gbnf.c - libFuzzer target for the GBNF parser, the matcher and the token-mask engine.
 *
 * One input: a grammar text, optionally followed by a line "%%" and a text to match.
 *   1. sift_grammar_parse: must return a grammar or an error with a message (never crash,
 *      hang or leak). Both the ids-only form and a small vocabulary (for <text> tokens) run.
 *   2. If it parsed: sift_grammar_match on the text after "%%" (and on a few fixed strings),
 *      then byte by byte: every prefix of the text up to the failure must be viable, the
 *      longer ones must fail at the same byte (the matcher's promise to its callers).
 *   3. The mask engine on a small synthetic vocabulary (printable ASCII, a few multi-byte
 *      characters and pieces of them, and tokens cut from the input itself): for a few steps
 *      of a generation, the engine's mask must equal the reference matcher's verdict for
 *      every token; any difference aborts (a wrong mask is a bug even without a crash).
 *      Skipped for grammars of more than 4096 elements (repetition-expanded giants such as
 *      nested x{2000}: correct, but minutes per input under the sanitizers).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/mask.h"
#include "sift.h"

#define VOCAB_MAX 320

/* Prefix k of a text is judged like the whole text up to where that failed: a prefix of an
 * accepted text is never rejected, and a prefix past the failure point fails at the same
 * byte. Every prefix up to 16 bytes and around the failure point, and 32 spread over the
 * rest: checking all of them would make this quadratic in the text (each match starts
 * afresh), and an ambiguous grammar with a text of a kilobyte then takes the fuzzer's
 * whole per-input time under ASan. */
static bool check_prefix(const sift_grammar *g, const char *s, size_t n, size_t k, int r, size_t fail)
{
    size_t f2 = 0;
    const int rk = sift_grammar_match(g, s, k, &f2);
    if (rk < 0) return false; /* out of memory, or over the stack limit: undecided */
    const bool must_fail = r == SIFT_GRAMMAR_REJECTED && k > fail;
    if (must_fail ? (rk != SIFT_GRAMMAR_REJECTED || f2 != fail) : rk == SIFT_GRAMMAR_REJECTED) {
        fprintf(stderr, "prefix %zu of %zu: %d at %zu, whole text %d at %zu\n", k, n, rk, f2, r, fail);
        abort();
    }
    return true;
}

static void check_prefixes(const sift_grammar *g, const char *s, size_t n)
{
    size_t fail = 0;
    const int r = sift_grammar_match(g, s, n, &fail);
    if (r < 0) return;
    for (size_t k = 0; k <= n && k <= 16; k++)
        if (!check_prefix(g, s, n, k, r, fail)) return;
    if (r == SIFT_GRAMMAR_REJECTED)
        for (size_t k = fail > 0 ? fail - 1 : 0; k <= fail + 1 && k <= n; k++)
            if (!check_prefix(g, s, n, k, r, fail)) return;
    if (n > 16)
        for (size_t i = 1; i <= 32; i++)
            if (!check_prefix(g, s, n, 16 + (n - 16) * i / 32, r, fail)) return;
}

typedef struct {
    char text[VOCAB_MAX][8];
    const char *piece[VOCAB_MAX];
    uint32_t len[VOCAB_MAX];
    uint8_t attr[VOCAB_MAX];
    sift_vocab_view view;
} small_vocab;

static void make_vocab(small_vocab *v, const uint8_t *data, size_t size)
{
    int n = 0;
#define ADD(bytes, nb, at)                                    \
    do {                                                      \
        memcpy(v->text[n], bytes, nb);                        \
        v->len[n] = (uint32_t)(nb);                           \
        v->attr[n] = (at);                                    \
        n++;                                                  \
    } while (0)
    for (int c = 0x20; c < 0x7F; c++) {
        char b = (char)c;
        ADD(&b, 1, SIFT_TOKEN_ATTR_NORMAL);
    }
    ADD("\n", 1, SIFT_TOKEN_ATTR_NORMAL);
    ADD("\t", 1, SIFT_TOKEN_ATTR_NORMAL);
    ADD("\xC3\xA9", 2, SIFT_TOKEN_ATTR_NORMAL);
    ADD("\xC3", 1, SIFT_TOKEN_ATTR_BYTE);
    ADD("\xA9", 1, SIFT_TOKEN_ATTR_BYTE);
    ADD("\xE2\x82\xAC", 3, SIFT_TOKEN_ATTR_NORMAL);
    ADD("\xE2\x82", 2, SIFT_TOKEN_ATTR_NORMAL);
    ADD("\xF0\x9F\x98\x80", 4, SIFT_TOKEN_ATTR_NORMAL);
    ADD("\xED\xA0\x80", 3, SIFT_TOKEN_ATTR_NORMAL); /* a surrogate: never text */
    ADD("<s>", 3, SIFT_TOKEN_ATTR_CONTROL);
    ADD("", 0, SIFT_TOKEN_ATTR_NORMAL);
    ADD("a\0b", 3, SIFT_TOKEN_ATTR_NORMAL);
    ADD("</s>", 4, SIFT_TOKEN_ATTR_CONTROL | SIFT_TOKEN_ATTR_EOG);
    /* tokens cut from the input (grammar literals make likely tokens) */
    for (size_t at = 0; at + 1 < size && n < VOCAB_MAX; at += 3) {
        size_t len = 1 + (data[at] % 6);
        if (at + len > size) len = size - at;
        ADD(data + at, len, SIFT_TOKEN_ATTR_NORMAL);
    }
#undef ADD
    for (int i = 0; i < n; i++) v->piece[i] = v->text[i];
    memset(&v->view, 0, sizeof v->view);
    v->view.n_tokens = n;
    v->view.piece = v->piece;
    v->view.piece_len = v->len;
    v->view.attr = v->attr;
}

static void engine_differential(const char *gtext, size_t glen, const uint8_t *data, size_t size)
{
    static small_vocab v;
    make_vocab(&v, data, size);
    sift_grammar *g = sift_grammar_parse(gtext, glen, "root", &v.view, NULL);
    if (!g) return;
    if (g->n_elems > 4096) { /* repetition-expanded giants: correct but too slow under ASan */
        sift_grammar_free(g);
        return;
    }
    sift__gx_engine *e;
    if (sift__gx_engine_new(&e, g, &v.view, NULL) != SIFT_OK) return;
    if (size & 1) sift__gx_engine_precompute(e, 20000);
    const sift__gx_vocab *vo = sift__gx_engine_vocab(e);
    sift__gx_arena ra;
    sift__gx_state st = {0}, t1 = {0}, t2 = {0}, t3 = {0};
    if (sift__gx_arena_init(&ra, sift__gx_engine_grammar(e)) != SIFT_OK) goto out;
    ra.max_nodes = 1u << 16; /* keep hostile grammars bounded: running out ends the comparison */
    if (sift__gx_state_start(&ra, &st) != SIFT_OK) goto out;
    uint64_t mask[(VOCAB_MAX + 63) / 64];
    uint32_t pick = size ? data[size - 1] : 0;
    for (int step = 0; step < 6; step++) {
        if (sift__gx_engine_fill_mask(e, &ra, &st, mask) != SIFT_OK) break;
        int allowed[VOCAB_MAX], na = 0;
        /* every token against the reference while the state is small; in a state of more
         * than 64 stacks (a 200-fold ambiguous grammar has hundreds) every 8th token from a
         * varying start, or one input costs the whole per-input time under ASan */
        const int32_t stride = st.tops.n > 64 ? 8 : 1, first = stride > 1 ? (int32_t)(pick % 8u) : 0;
        for (int32_t t = first; t < vo->n_tokens; t += stride) {
            bool m = (mask[t >> 6] >> (t & 63)) & 1, ref;
            const int r = sift__gx_token_verdict(&ra, &st, vo, (uint32_t)t, &t1, &t2);
            if (r < 0) goto out; /* the capped arena is full: no verdict to compare with */
            ref = r == 1;
            if (m != ref) {
                uint32_t l;
                const uint8_t *b = sift__gx_vocab_text(vo, (uint32_t)t, &l);
                fprintf(stderr, "step %d token %d '%.*s': mask %d, reference %d\n", step, t, (int)l, b, m, ref);
                abort();
            }
            if (m && !(vo->flags[t] & GX_TOK_EOG)) allowed[na++] = t;
        }
        if (!na) break;
        pick = pick * 1103515245u + 12345u;
        int32_t t = allowed[(pick >> 8) % (uint32_t)na];
        uint32_t l;
        const uint8_t *b = sift__gx_vocab_text(vo, (uint32_t)t, &l);
        if (sift__gx_state_accept_token(&ra, &st, (uint32_t)t, b, l, &t1, &t2, &t3) != SIFT_OK) break;
    }
out:
    sift__gx_state_free(&st);
    sift__gx_state_free(&t1);
    sift__gx_state_free(&t2);
    sift__gx_state_free(&t3);
    sift__gx_arena_free(&ra);
    sift__gx_engine_release(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    size_t glen = size;
    const char *text = NULL;
    size_t tlen = 0;
    for (size_t i = 0; i + 3 <= size; i++)
        if (!memcmp(s + i, "%%\n", 3) && (i == 0 || s[i - 1] == '\n')) {
            glen = i;
            text = s + i + 3;
            tlen = size - i - 3;
            break;
        }
    sift_error err = {0};
    sift_grammar *g = sift_grammar_parse(s, glen, "root", NULL, &err);
    if (!g) {
        if (err.status == SIFT_OK || !err.msg[0]) abort(); /* errors must say what */
    } else {
        if (text) check_prefixes(g, text, tlen);
        static const char *fixed[] = {"", "a", "0", "{}", "[1, 2]", "\"x\"", "\xC3\xA9", "\xED\xA0\x80"};
        for (size_t k = 0; k < sizeof fixed / sizeof *fixed; k++) check_prefixes(g, fixed[k], strlen(fixed[k]));
        sift_grammar_free(g);
        engine_differential(s, glen, data, size);
    }
    return 0;
}
