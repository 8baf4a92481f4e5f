/*
 * test_tokenizer.c - vocabulary and tokenizers on hand-made vocabularies: the Unicode
 * tables, SentencePiece merges (scores, ties, byte fallback, the leading space), byte-level
 * BPE (ranks, ties, the byte alphabet, ignore_merges), WordPiece, special tokens (priority,
 * parse_special, RSTRIP), pieces and detokenization (clean-up passes), pre-tokenizer splits,
 * the API's return conventions and the loader's refusals. The merge loops are also checked
 * against naive re-implementations (string lists, global best pair each step) on random
 * vocabularies and texts. Real vocabularies are tested against llama.cpp in tokenizer.cmake.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf/gguf.h"
#include "vocab/pretok.h"
#include "vocab/unicode.h"
#include "vocab/vocab.h"
#include "sift.h"

#define SP "\xE2\x96\x81" /* "▁" */

/* ---- helpers -------------------------------------------------------------------------------- */

typedef struct {
    const char *text[600];
    float score[600];
    int32_t type[600];
    int n;
    const char *merges[600];
    int n_merges;
} vocab_src;

static int add_tok(vocab_src *s, const char *text, float score, int32_t type)
{
    s->text[s->n] = text;
    s->score[s->n] = score;
    s->type[s->n] = type;
    return s->n++;
}

static sift_vocab *build(const vocab_src *s, const char *model, const char *pre, sift__vocab_spec *extra)
{
    sift__vocab_spec spec;
    if (extra) spec = *extra;
    else sift__vocab_spec_init(&spec);
    spec.model = model;
    spec.pre = pre;
    spec.n_tokens = s->n;
    spec.text = s->text;
    spec.scores = s->score;
    spec.n_scores = s->n;
    spec.types = s->type;
    spec.n_types = s->n;
    if (!strcmp(model, "gpt2") || !strcmp(model, "gemma4")) {
        spec.has_merges = true;
        spec.merges = s->merges;
        spec.n_merges = s->n_merges;
    }
    sift_error err = {0};
    sift_vocab *v = sift__vocab_build(&spec, &err);
    if (!v) fail_msg("build: %s", err.msg);
    return v;
}

/* tokenize text into ids; returns the count */
static int tok(const sift_vocab *v, const char *text, bool add_special, bool parse_special, sift_token *out)
{
    int32_t n = sift_tokenize(v, text, strlen(text), out, 256, add_special, parse_special);
    assert_true(n >= 0);
    return n;
}

static void expect_ids(const sift_vocab *v, const char *text, bool add_special, bool parse_special, int n, ...)
{
    sift_token ids[256];
    int got = tok(v, text, add_special, parse_special, ids);
    va_list ap;
    va_start(ap, n);
    bool same = got == n;
    for (int i = 0; i < n; i++) {
        int want = va_arg(ap, int);
        if (same && ids[i] != want) same = false;
    }
    va_end(ap);
    if (!same) {
        char buf[1024];
        int k = 0;
        for (int i = 0; i < got && k < 1000; i++) k += snprintf(buf + k, sizeof buf - (size_t)k, " %d", ids[i]);
        buf[k] = 0;
        fail_msg("'%s': got%s", text, buf);
    }
}

static void expect_detok(const sift_vocab *v, const sift_token *ids, int n, bool remove_special, bool unparse,
                         const char *want)
{
    char buf[1024];
    int32_t k = sift_detokenize(v, ids, n, buf, sizeof buf, remove_special, unparse);
    assert_true(k >= 0);
    buf[k] = 0;
    assert_string_equal(buf, want);
}

/* ---- Unicode -------------------------------------------------------------------------------- */

static uint16_t flags_by_runs(uint32_t c)
{
    size_t i = 0;
    while (i + 1 < sift__ucd_n_runs && sift__ucd_run_start[i + 1] <= c) i++;
    return sift__ucd_run_flags[i];
}

static void test_unicode_tables(void **state)
{
    (void)state;
    for (uint32_t c = 0; c < 128; c++) assert_int_equal(sift__unicode_flags(c), flags_by_runs(c));
    for (uint32_t c = 128; c < 0x3100; c += 7) assert_int_equal(sift__unicode_flags(c), flags_by_runs(c));
    assert_int_equal(sift__unicode_flags('A'), SIFT_U_LETTER);
    assert_int_equal(sift__unicode_flags('7'), SIFT_U_NUMBER);
    assert_int_equal(sift__unicode_flags(' '), SIFT_U_SEPARATOR | SIFT_U_WHITESPACE);
    assert_int_equal(sift__unicode_flags('\n'), SIFT_U_CONTROL | SIFT_U_WHITESPACE);
    assert_int_equal(sift__unicode_flags(0x1C), SIFT_U_CONTROL); /* not whitespace for llama.cpp */
    assert_int_equal(sift__unicode_flags(0x85), SIFT_U_CONTROL | SIFT_U_WHITESPACE);
    assert_int_equal(sift__unicode_flags(0x3000), SIFT_U_SEPARATOR | SIFT_U_WHITESPACE);
    assert_int_equal(sift__unicode_flags(0xE9), SIFT_U_LETTER);
    assert_int_equal(sift__unicode_flags(0x301), SIFT_U_MARK);
    assert_int_equal(sift__unicode_flags(0x4E00), SIFT_U_LETTER);
    assert_int_equal(sift__unicode_flags(0x378), SIFT_U_UNDEFINED);
    assert_int_equal(sift__unicode_flags(0x1F600), SIFT_U_SYMBOL);
    assert_int_equal(sift__unicode_flags(0xE000), SIFT_U_CONTROL);   /* private use is \p{C} */
    assert_int_equal(sift__unicode_flags(0x2FFC), SIFT_U_SYMBOL);    /* new in Unicode 15.1 */
    assert_int_equal(sift__unicode_flags(0x11F00), SIFT_U_MARK);     /* new in Unicode 15.0 */
    assert_int_equal(sift__unicode_flags(0x110000), 0);
    assert_int_equal(sift__unicode_tolower('A'), 'a');
    assert_int_equal(sift__unicode_tolower(0xC9), 0xE9);
    assert_int_equal(sift__unicode_tolower(0x130), 'i');
    assert_int_equal(sift__unicode_tolower(0x10400), 0x10428);
    assert_int_equal(sift__unicode_tolower(0x4E00), 0x4E00);
    assert_int_equal(sift__unicode_nfd_head(0xE9), 'e');
    assert_int_equal(sift__unicode_nfd_head(0xAC00), 0x1100);
    assert_int_equal(sift__unicode_nfd_head('x'), 'x');
}

static void test_utf8(void **state)
{
    (void)state;
    size_t adv;
    assert_int_equal(sift__utf8_decode((const uint8_t *)"\xC0\x80", 2, &adv), 0); /* overlong: accepted */
    assert_int_equal(adv, 2);
    assert_int_equal(sift__utf8_decode((const uint8_t *)"\xED\xA0\x80", 3, &adv), 0xD800);
    assert_int_equal(sift__utf8_decode((const uint8_t *)"\xF4\x90\x80\x80", 4, &adv), 0x110000);
    assert_int_equal(sift__utf8_decode((const uint8_t *)"\xF8\x88", 2, &adv), SIFT_UNICODE_REPLACEMENT);
    assert_int_equal(adv, 1);
    assert_int_equal(sift__utf8_decode((const uint8_t *)"\xE2\x82", 2, &adv), SIFT_UNICODE_REPLACEMENT);
    assert_int_equal(adv, 1);
    assert_int_equal(sift__utf8_decode((const uint8_t *)"\x80", 1, &adv), SIFT_UNICODE_REPLACEMENT);
    char u[4];
    assert_int_equal(sift__utf8_encode(0x20AC, u), 3);
    assert_memory_equal(u, "\xE2\x82\xAC", 3);
    assert_int_equal(sift__utf8_encode(0x110000, u), 3); /* U+FFFD */
    assert_memory_equal(u, "\xEF\xBF\xBD", 3);
    /* the byte alphabet is a bijection; printable bytes stand for themselves */
    uint8_t seen[512] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t c = sift__bytelevel_cpt((uint8_t)b);
        assert_true(c < 512);
        assert_false(seen[c]);
        seen[c] = 1;
        assert_int_equal(sift__bytelevel_byte(c), b);
    }
    assert_int_equal(sift__bytelevel_cpt(' '), 0x120);
    assert_int_equal(sift__bytelevel_cpt('\n'), 0x10A);
    assert_int_equal(sift__bytelevel_cpt('a'), 'a');
    assert_int_equal(sift__bytelevel_cpt(0xAD), 0x143);
    assert_int_equal(sift__bytelevel_byte(0x144), -1);
}

/* ---- SentencePiece ------------------------------------------------------------------------ */

static char byte_names[256][8];

/* <unk> <s> </s>, the 256 byte tokens, then the given normal tokens */
static void spm_base(vocab_src *s)
{
    memset(s, 0, sizeof *s);
    add_tok(s, "<unk>", 0, 2);
    add_tok(s, "<s>", 0, 3);
    add_tok(s, "</s>", 0, 3);
    for (int b = 0; b < 256; b++) {
        snprintf(byte_names[b], sizeof byte_names[b], "<0x%02X>", b);
        add_tok(s, byte_names[b], 0, 6);
    }
}

static void test_spm(void **state)
{
    (void)state;
    vocab_src s;
    spm_base(&s);
    int t_sp = add_tok(&s, SP, -1, 1), t_a = add_tok(&s, "a", -2, 1), t_b = add_tok(&s, "b", -2, 1),
        t_c = add_tok(&s, "c", -2, 1), t_spa = add_tok(&s, SP "a", -3, 1), t_ab = add_tok(&s, "ab", -4, 1),
        t_bc = add_tok(&s, "bc", -1.5f, 1), t_abc = add_tok(&s, "abc", -5, 1), t_aa = add_tok(&s, "aa", -6, 1);
    sift_vocab *v = build(&s, "llama", NULL, NULL);
    assert_int_equal(sift_vocab_get_type(v), SIFT_VOCAB_SPM);
    assert_true(sift_vocab_add_bos(v));
    assert_int_equal(sift_vocab_bos(v), 1);
    assert_int_equal(sift_vocab_eos(v), 2);
    assert_int_equal(sift_vocab_nl(v), 3 + '\n');
    /* "▁abc": best pair bc (-1.5), then ▁a (-3) and a+bc ("abc" is not reachable: a|bc -> "abc" -5) */
    expect_ids(v, "abc", false, false, 2, t_spa, t_bc);
    expect_ids(v, "abc", true, false, 3, 1, t_spa, t_bc);
    /* ties go left: "▁aaa" -> ▁a (-3) first, then a a -> aa */
    expect_ids(v, "aaa", false, false, 2, t_spa, t_aa);
    /* byte fallback */
    expect_ids(v, "c\xC3\xA9", false, false, 4, t_sp, t_c, 3 + 0xC3, 3 + 0xA9);
    /* spaces are "▁" */
    expect_ids(v, "a b", false, false, 3, t_spa, t_sp, t_b);
    /* control text: plain text without parse_special, the token with it; a leading space follows */
    expect_ids(v, "<s>a", false, true, 2, 1, t_spa);
    sift_token ids[64];
    int n = tok(v, "<s>a", false, false, ids);
    assert_true(n > 2 && ids[0] == t_sp); /* "▁<s>a" as text: bytes */
    /* a continuation gets no leading space: "abc" -> bc (-1.5), then a+bc -> "abc" (-5) */
    n = sift_tokenize_ex(v, "abc", 3, ids, 64, SIFT_TOKENIZE_CONTINUATION);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], t_abc);
    n = sift_tokenize_ex(v, "a b", 3, ids, 64, SIFT_TOKENIZE_CONTINUATION | SIFT_TOKENIZE_ADD_SPECIAL);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], t_a);
    assert_int_equal(ids[2], t_sp);
    assert_int_equal(ids[3], t_b);
    /* after a special token the text starts again (llama.cpp's rule), continuation or not */
    n = sift_tokenize_ex(v, "<s>a", 4, ids, 64, SIFT_TOKENIZE_CONTINUATION | SIFT_TOKENIZE_PARSE_SPECIAL);
    assert_int_equal(n, 2);
    assert_int_equal(ids[1], t_spa);
    /* the bits without continuation are sift_tokenize's switches; unknown bits are refused */
    n = sift_tokenize_ex(v, "abc", 3, ids, 64, SIFT_TOKENIZE_ADD_SPECIAL);
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], t_spa);
    assert_int_equal(sift_tokenize_ex(v, "abc", 3, ids, 64, 8u), INT32_MIN);
    /* detokenize: the leading space goes, unless a BOS was removed first */
    sift_token seq[] = {1, t_spa, t_b};
    expect_detok(v, seq, 3, false, false, " ab");
    expect_detok(v, seq + 1, 2, false, false, "ab");
    expect_detok(v, seq, 3, true, false, " ab");
    expect_detok(v, seq, 3, false, true, "<s> ab");
    sift_token bytes[] = {t_sp, 3 + 0xC3, 3 + 0xA9};
    expect_detok(v, bytes, 3, false, false, "\xC3\xA9");
    (void)t_ab;
    sift_vocab_free(v);

    /* add_space_prefix = false */
    sift__vocab_spec spec;
    sift__vocab_spec_init(&spec);
    spec.add_space_prefix = 0;
    v = build(&s, "llama", NULL, &spec);
    expect_ids(v, "abc", false, false, 1, t_abc); /* b+c, then a+bc = "abc" (no ▁a to win first) */
    (void)t_a;
    sift_vocab_free(v);
}

/* Naive SentencePiece: a list of strings, merge the best-scoring adjacent pair (leftmost on
 * ties) while any pair is a token; then ids or byte tokens. */
static int naive_spm(const sift_vocab *v, const char *text, bool prefix, sift_token *out)
{
    char esc[1024];
    size_t k = 0;
    if (prefix) memcpy(esc, SP, 3), k = 3;
    for (const char *p = text; *p; p++) {
        if (*p == ' ') memcpy(esc + k, SP, 3), k += 3;
        else esc[k++] = *p;
    }
    size_t start[512], len[512], n = 0;
    for (size_t i = 0; i < k;) {
        size_t l = sift__utf8_seq_len((uint8_t)esc[i]);
        if (l > k - i) l = k - i;
        start[n] = i;
        len[n++] = l;
        i += l;
    }
    for (;;) {
        int best = -1;
        float best_score = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            sift_token t = sift__vocab_find(v, esc + start[i], len[i] + len[i + 1]);
            if (t < 0) continue;
            float sc = sift_vocab_token_score(v, t);
            if (best < 0 || sc > best_score) best = (int)i, best_score = sc;
        }
        if (best < 0) break;
        len[best] += len[best + 1];
        memmove(start + best + 1, start + best + 2, sizeof *start * (n - (size_t)best - 2));
        memmove(len + best + 1, len + best + 2, sizeof *len * (n - (size_t)best - 2));
        n--;
    }
    int m = 0;
    for (size_t i = 0; i < n; i++) {
        sift_token t = sift__vocab_find(v, esc + start[i], len[i]);
        if (t >= 0) out[m++] = t;
        else
            for (size_t j = 0; j < len[i]; j++) out[m++] = 3 + (uint8_t)esc[start[i] + j];
    }
    return m;
}

static uint64_t rng;
static uint32_t rnd(uint32_t n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((rng >> 33) % n);
}

static void test_spm_random(void **state)
{
    (void)state;
    static const char *alpha[] = {"a", "b", "c", SP};
    for (int round = 0; round < 40; round++) {
        rng = 1000 + (uint64_t)round;
        bool interior_space = round % 2; /* odd rounds: tokens like "a▁b", no segmenting */
        vocab_src s;
        spm_base(&s);
        static char texts[40][300][16];
        int nt = 0;
        for (int i = 0; i < 4; i++) add_tok(&s, alpha[i], -10, 1);
        if (interior_space) add_tok(&s, "a" SP "b", -1, 1);
        for (int i = 0; i < 120; i++) {
            char *t = texts[round][nt++];
            size_t k = 0;
            uint32_t l = 2 + rnd(4);
            for (uint32_t j = 0; j < l; j++) {
                const char *c = alpha[rnd(4)];
                if (!interior_space && j > 0 && !strcmp(c, SP) && (k < 3 || memcmp(t + k - 3, SP, 3))) c = "a";
                memcpy(t + k, c, strlen(c));
                k += strlen(c);
            }
            t[k] = 0;
            bool dup = false;
            for (int j = 259; j < s.n; j++) dup |= !strcmp(s.text[j], t);
            if (!dup) add_tok(&s, t, -(float)rnd(8), 1); /* few distinct scores: many ties */
        }
        sift_vocab *v = build(&s, "llama", NULL, NULL);
        assert_int_equal(v->spm_split, !interior_space);
        for (int k = 0; k < 60; k++) {
            char text[128];
            uint32_t l = rnd(60);
            for (uint32_t j = 0; j < l; j++) text[j] = "abc  "[rnd(5)];
            text[l] = 0;
            sift_token a[512], b[512];
            int na = l ? naive_spm(v, text, true, a) : 0; /* empty text: no "▁" either */
            int nb = (int)sift_tokenize(v, text, l, b, 512, false, false);
            assert_int_equal(na, nb);
            assert_memory_equal(a, b, sizeof *a * (size_t)na);
        }
        sift_vocab_free(v);
    }
}

/* ---- byte-level BPE ----------------------------------------------------------------------- */

static char bl_names[256][4];

/* the 256 byte-level characters as tokens 0..255 (byte order) */
static void bpe_base(vocab_src *s)
{
    memset(s, 0, sizeof *s);
    for (int b = 0; b < 256; b++) {
        size_t n = sift__bytelevel_utf8((uint8_t)b, bl_names[b]);
        bl_names[b][n] = 0;
        add_tok(s, bl_names[b], 0, 1);
    }
}

#define G "\xC4\xA0" /* "Ġ", the byte-level space */

static void test_bpe(void **state)
{
    (void)state;
    vocab_src s;
    bpe_base(&s);
    int t_aa = add_tok(&s, "aa", 0, 1), t_ga = add_tok(&s, G "a", 0, 1), /* t_ga: merged on, never final */ t_ab = add_tok(&s, "ab", 0, 1),
        t_gab = add_tok(&s, G "ab", 0, 1), t_eot = add_tok(&s, "<|endoftext|>", 0, 3),
        t_user = add_tok(&s, "<|user|>", 0, 4);
    s.merges[s.n_merges++] = "a b";
    s.merges[s.n_merges++] = "a a";
    s.merges[s.n_merges++] = G " a";
    s.merges[s.n_merges++] = G "a b";
    s.merges[s.n_merges++] = G " ab";
    sift_vocab *v = build(&s, "gpt2", "gpt-2", NULL);
    (void)t_ga;
    assert_int_equal(sift_vocab_get_type(v), SIFT_VOCAB_BPE);
    assert_int_equal(sift_vocab_n_merges(v), 5);
    assert_int_equal(sift_vocab_nl(v), '\n');
    assert_int_equal(sift_vocab_eot(v), t_eot); /* found by its text */
    assert_true(sift_vocab_is_eog(v, t_eot));
    /* ranks: "ab" (0) before "aa" (1); ties leftmost */
    expect_ids(v, "aab", false, false, 2, 'a', t_ab);
    expect_ids(v, "aaa", false, false, 2, t_aa, 'a');
    /* " ab": Ġ a b -> (a b) rank 0 first, then Ġ+ab rank 4 */
    expect_ids(v, " ab", false, false, 1, t_gab);
    expect_ids(v, "ab ab", false, false, 2, t_ab, t_gab);
    /* pre-tokenizer: words never merge across */
    expect_ids(v, "a,a", false, false, 3, 'a', ',', 'a');
    /* bytes of non-ASCII text */
    expect_ids(v, "\xC3\xA9", false, false, 2, 0xC3, 0xA9);
    /* special tokens: control only with parse_special, user-defined always */
    expect_ids(v, "a<|endoftext|>", false, true, 2, 'a', t_eot);
    expect_ids(v, "a<|user|>b", false, false, 3, 'a', t_user, 'b');
    sift_token ids[64];
    assert_true(tok(v, "<|endoftext|>", false, false, ids) > 1);
    /* pieces: the byte alphabet undone; control text only with special */
    char piece[32];
    assert_int_equal(sift_token_to_piece(v, t_gab, piece, sizeof piece, 0, false), 3);
    assert_memory_equal(piece, " ab", 3);
    assert_int_equal(sift_token_to_piece(v, t_gab, piece, sizeof piece, 1, false), 2);
    assert_int_equal(sift_token_to_piece(v, t_eot, piece, sizeof piece, 0, false), 0);
    assert_int_equal(sift_token_to_piece(v, t_eot, piece, sizeof piece, 0, true), 13);
    assert_int_equal(sift_token_to_piece(v, t_gab, piece, 2, 0, true), -3);
    sift_vocab_free(v);
}

static void test_bpe_detokenize_cleanup(void **state)
{
    (void)state;
    vocab_src s;
    bpe_base(&s);
    sift_vocab *gpt2 = build(&s, "gpt2", "gpt-2", NULL);           /* clean_spaces */
    sift_vocab *ds = build(&s, "gpt2", "deepseek-llm", NULL);      /* keeps spaces */
    const char *text = "a , b . c ' d 's e 't f 're g 've h 'll i ?";
    sift_token ids[128];
    int n = tok(gpt2, text, false, false, ids);
    expect_detok(gpt2, ids, n, false, false, "a, b. c'd's e 't f're g've h 'll i?");
    n = tok(ds, text, false, false, ids);
    expect_detok(ds, ids, n, false, false, text);
    sift_vocab_free(gpt2);
    sift_vocab_free(ds);
}

/* Naive BPE over one word given as byte-level strings: merge the lowest-rank pair (leftmost
 * on ties) while any pair has a rank. */
static int naive_bpe_word(const vocab_src *s, char parts[][256], int n)
{
    for (;;) {
        int best = -1, best_rank = 0;
        for (int i = 0; i + 1 < n; i++) {
            size_t ll = strlen(parts[i]), rl = strlen(parts[i + 1]);
            for (int r = 0; r < s->n_merges; r++) {
                const char *m = s->merges[r];
                if (strlen(m) == ll + rl + 1 && !memcmp(m, parts[i], ll) && m[ll] == ' ' &&
                    !memcmp(m + ll + 1, parts[i + 1], rl)) {
                    if (best < 0 || r < best_rank) best = i, best_rank = r;
                    break;
                }
            }
        }
        if (best < 0) return n;
        size_t ll = strlen(parts[best]), rl = strlen(parts[best + 1]);
        assert_true(ll + rl < 256);
        memcpy(parts[best] + ll, parts[best + 1], rl + 1);
        memmove(parts + best + 1, parts + best + 2, sizeof parts[0] * (size_t)(n - best - 2));
        n--;
    }
}

static void test_bpe_random(void **state)
{
    (void)state;
    static char merge_text[40][200][64], tok_text[40][200][64];
    for (int round = 0; round < 20; round++) {
        rng = 77 + (uint64_t)round;
        vocab_src s;
        bpe_base(&s);
        /* random merges over "a", "b", "c": operands are existing tokens, results become tokens */
        int pool_n = 3;
        const char *pool[200] = {"a", "b", "c"};
        for (int m = 0; m < 60; m++) {
            const char *l = pool[rnd((uint32_t)pool_n)], *r = pool[rnd((uint32_t)pool_n)];
            if (strlen(l) + strlen(r) > 40) continue; /* fits the 64-byte slots below */
            size_t ll = strlen(l), rl = strlen(r);
            memcpy(merge_text[round][m], l, ll);
            merge_text[round][m][ll] = ' ';
            memcpy(merge_text[round][m] + ll + 1, r, rl + 1);
            bool dup = false;
            for (int k = 0; k < s.n_merges; k++) dup |= !strcmp(s.merges[k], merge_text[round][m]);
            if (dup) continue;
            s.merges[s.n_merges++] = merge_text[round][m];
            memcpy(tok_text[round][m], l, ll);
            memcpy(tok_text[round][m] + ll, r, rl + 1);
            bool known = false;
            for (int k = 0; k < s.n; k++) known |= !strcmp(s.text[k], tok_text[round][m]);
            if (!known) {
                add_tok(&s, tok_text[round][m], 0, 1);
                pool[pool_n++] = tok_text[round][m];
            }
        }
        sift_vocab *v = build(&s, "gpt2", "gpt-2", NULL);
        for (int k = 0; k < 40; k++) {
            char word[160];
            uint32_t l = 1 + rnd(k < 20 ? 20 : 150); /* long words take the heap path */
            for (uint32_t j = 0; j < l; j++) word[j] = "abc"[rnd(3)];
            word[l] = 0;
            static char parts[160][256];
            for (uint32_t j = 0; j < l; j++) parts[j][0] = word[j], parts[j][1] = 0;
            int np = naive_bpe_word(&s, parts, (int)l);
            sift_token ids[256];
            int n = tok(v, word, false, false, ids);
            assert_int_equal(n, np);
            for (int j = 0; j < n; j++) {
                size_t tl;
                const char *t = sift_vocab_token_text(v, ids[j], &tl);
                assert_int_equal(tl, strlen(parts[j]));
                assert_memory_equal(t, parts[j], tl);
            }
        }
        sift_vocab_free(v);
    }
}

static void test_bpe_ignore_merges(void **state)
{
    (void)state;
    vocab_src s;
    bpe_base(&s);
    int t_abc = add_tok(&s, "abc", 0, 1);
    add_tok(&s, "<|begin_of_text|>", 0, 3);
    s.merges[s.n_merges++] = "a b";
    sift__vocab_spec spec;
    sift__vocab_spec_init(&spec);
    spec.ids[SIFT_VKEY_BOS] = 257;
    sift_vocab *v = build(&s, "gpt2", "llama-bpe", &spec); /* ignore_merges, add_bos */
    assert_true(sift_vocab_add_bos(v));
    expect_ids(v, "abc", true, false, 2, 257, t_abc); /* whole word is a token: taken as is */
    /* "abcc" is no token: merged a+b -> "ab", which is no token either: its single bytes */
    expect_ids(v, "abcc", false, false, 4, 'a', 'b', 'c', 'c');
    sift_vocab_free(v);
}

/* gemma4: BPE over characters, SentencePiece-style. "hello hello\n\nhé" is escaped to
 * "hello▁hello\n\nhé" and split into "hello▁hello", "\n\n", "hé". In the first word the ranks
 * go "▁ h" (0): h e l l o [▁h] e l l o; "l l" (1), leftmost first, then the other: h e [ll] o [▁h]
 * e [ll] o; "▁h e" (2): ... [▁he] ll o; "ll o" (3): h e [llo] [▁he] [llo]; "▁he llo" (4): h e llo
 * [▁hello]. "\n\n" has no merge but is a token: taken whole. "é" is no token: its bytes'
 * <0xC3> <0xA9>. No BOS by default id, but add_bos is forced on. */
static void test_gemma4(void **state)
{
    (void)state;
    vocab_src s = {.n = 0};
#define U "\xE2\x96\x81" /* ▁ */
    add_tok(&s, "<pad>", 0, 3);
    add_tok(&s, "<eos>", 0, 3);
    const int t_bos = add_tok(&s, "<bos>", 0, 3);
    const int t_u = add_tok(&s, U, 0, 1), t_h = add_tok(&s, "h", 0, 1), t_e = add_tok(&s, "e", 0, 1);
    add_tok(&s, "l", 0, 1);
    add_tok(&s, "o", 0, 1);
    const int t_uh = add_tok(&s, U "h", 0, 1);
    add_tok(&s, "ll", 0, 1);
    add_tok(&s, U "he", 0, 1);
    const int t_llo = add_tok(&s, "llo", 0, 1), t_hello = add_tok(&s, U "hello", 0, 1);
    const int t_nl = add_tok(&s, "\n", 0, 1), t_nl2 = add_tok(&s, "\n\n", 0, 1);
    const int t_c3 = add_tok(&s, "<0xC3>", 0, 6), t_a9 = add_tok(&s, "<0xA9>", 0, 6);
    s.merges[s.n_merges++] = U " h";
    s.merges[s.n_merges++] = "l l";
    s.merges[s.n_merges++] = U "h e";
    s.merges[s.n_merges++] = "ll o";
    s.merges[s.n_merges++] = U "he llo";
    sift__vocab_spec spec;
    sift__vocab_spec_init(&spec);
    spec.ids[SIFT_VKEY_BOS] = t_bos;
    spec.add_bos = 0; /* llama.cpp turns it back on for gemma4 */
    sift_vocab *v = build(&s, "gemma4", "whatever", &spec);
    assert_int_equal(sift_vocab_get_type(v), SIFT_VOCAB_BPE);
    assert_true(sift_vocab_add_bos(v));
    assert_int_equal(sift_vocab_eos(v), SIFT_TOKEN_NULL); /* no default ids */
    assert_int_equal(sift_vocab_nl(v), t_nl);
    expect_ids(v, "hello hello\n\nh\xC3\xA9", false, false, 8, t_h, t_e, t_llo, t_hello, t_nl2, t_h, t_c3, t_a9);
    expect_ids(v, " h", true, false, 2, t_bos, t_uh);
    expect_ids(v, "  ", false, false, 2, t_u, t_u);
    /* pieces: "▁" is a space, byte tokens their byte */
    const sift_token ids[] = {t_bos, t_hello, t_c3, t_a9};
    expect_detok(v, ids, 4, true, false, " hello\xC3\xA9");
    expect_detok(v, ids, 4, false, true, "<bos> hello\xC3\xA9");
    sift_vocab_free(v);

    /* tokenizer.ggml.suppress_tokens: kept in order, ids outside the vocabulary dropped (as
     * llama.cpp's llama_vocab_get_suppress_tokens); marked in the view; and the chain
     * common_sampler_init would build never samples them: greedy over logits that put the
     * suppressed "▁hello" first picks the next best, "llo" */
    const int32_t sup[] = {t_hello, -1, t_c3, s.n, t_hello};
    spec.suppress = sup;
    spec.n_suppress = 5;
    v = build(&s, "gemma4", NULL, &spec);
    int32_t n_sup = -1;
    const sift_token *got = sift_vocab_suppress_tokens(v, &n_sup);
    assert_int_equal(n_sup, 3);
    assert_int_equal(got[0], t_hello);
    assert_int_equal(got[1], t_c3);
    assert_int_equal(got[2], t_hello);
    sift_vocab_view view;
    assert_int_equal(sift_vocab_view_get(v, &view), SIFT_OK);
    assert_true(view.attr[t_hello] & SIFT_TOKEN_ATTR_SUPPRESS);
    assert_false(view.attr[t_llo] & SIFT_TOKEN_ATTR_SUPPRESS);
    sift_sampling_params sp = sift_sampling_default_params();
    sp.temp = 0; /* greedy */
    const sift_chain_env env = {.n_vocab = s.n, .vocab = &view};
    sift_error cerr = {0};
    sift_chain *chain = sift_chain_from_params(&sp, &env, &cerr);
    assert_non_null(chain);
    float logits[32] = {0};
    logits[t_hello] = 9, logits[t_llo] = 5;
    assert_int_equal(sift_chain_sample(chain, logits, s.n), t_llo);
    sift_chain_free(chain);
    sift_vocab_free(v);
    assert_null(sift_vocab_suppress_tokens(NULL, &n_sup));
    assert_int_equal(n_sup, 0);

    /* gemma4 without merges is refused, naming the key */
    sift__vocab_spec_init(&spec);
    spec.model = "gemma4";
    spec.n_tokens = s.n;
    spec.text = s.text;
    sift_error err = {0};
    assert_null(sift__vocab_build(&spec, &err));
    assert_non_null(strstr(err.msg, "tokenizer.ggml.merges"));
#undef U
}

/* ---- WordPiece ----------------------------------------------------------------------------- */

static void test_wpm(void **state)
{
    (void)state;
    vocab_src s;
    memset(&s, 0, sizeof s);
    add_tok(&s, "[PAD]", 0, 3);
    add_tok(&s, "[UNK]", 0, 3);
    add_tok(&s, "[CLS]", 0, 3);
    add_tok(&s, "[SEP]", 0, 3);
    add_tok(&s, "[MASK]", 0, 3);
    int t_hello = add_tok(&s, SP "hello", 0, 1), t_world = add_tok(&s, SP "world", 0, 1),
        t_hel = add_tok(&s, SP "hel", 0, 1), t_lo = add_tok(&s, "lo", 0, 1), t_comma = add_tok(&s, SP ",", 0, 1),
        t_excl = add_tok(&s, SP "!", 0, 1), t_cafe = add_tok(&s, SP "cafe", 0, 1), t_zh = add_tok(&s, SP "\xE4\xBD\xA0", 0, 1);
    sift__vocab_spec spec;
    sift__vocab_spec_init(&spec);
    spec.ids[SIFT_VKEY_UNK] = 1;
    spec.ids[SIFT_VKEY_BOS] = 2;
    spec.ids[SIFT_VKEY_SEP] = 3;
    spec.ids[SIFT_VKEY_PAD] = 0;
    spec.ids[SIFT_VKEY_MASK] = 4;
    sift_vocab *v = build(&s, "bert", NULL, &spec);
    assert_int_equal(sift_vocab_get_type(v), SIFT_VOCAB_WPM);
    expect_ids(v, "Hello, World!", false, false, 4, t_hello, t_comma, t_world, t_excl);
    expect_ids(v, "Hello", true, false, 3, 2, t_hello, 3);
    expect_ids(v, "hello", false, false, 1, t_hello);
    expect_ids(v, "hello wor", false, false, 2, t_hello, 1); /* no piece for "wor": [UNK] */
    expect_ids(v, "CAF\xC3\x89", false, false, 1, t_cafe);    /* lowercase + accents stripped */
    expect_ids(v, "x\xE4\xBD\xA0y", false, false, 3, 1, t_zh, 1); /* CJK is a word of its own */
    expect_ids(v, "hello\x01", false, false, 1, t_hello);        /* control characters dropped */
    sift_token ids[] = {2, t_hello, t_comma, t_world, 3};
    expect_detok(v, ids, 5, true, false, " hello, world"); /* WordPiece cleans " ," too */
    (void)t_hel;
    (void)t_lo;
    sift_vocab_free(v);
}

/* ---- special tokens -------------------------------------------------------------------------- */

static void test_special_partition(void **state)
{
    (void)state;
    vocab_src s;
    spm_base(&s);
    int t_sp = add_tok(&s, SP, -1, 1), t_x = add_tok(&s, "x", -1, 1), t_ab = add_tok(&s, "<ab>", 0, 4),
        t_abc = add_tok(&s, "<ab>c", 0, 4), t_end = add_tok(&s, "<|end|>", 0, 3);
    sift__vocab_spec spec;
    sift__vocab_spec_init(&spec);
    spec.name = "Phi3 test"; /* phi-3: RSTRIP on special tokens */
    sift_vocab *v = build(&s, "llama", NULL, &spec);
    assert_int_equal(sift_vocab_eot(v), t_end);
    assert_true(sift_vocab_token_attr(v, t_end) & SIFT_VOCAB_ATTR_RSTRIP);
    assert_false(sift_vocab_token_attr(v, 1) & SIFT_VOCAB_ATTR_RSTRIP); /* <s> excluded */
    /* the longest special text first */
    expect_ids(v, "<ab>c", false, false, 1, t_abc);
    expect_ids(v, "<ab>x", false, false, 3, t_ab, t_sp, t_x); /* a space before text after a special token */
    /* RSTRIP swallows the spaces after the token; the next fragment gets its own "▁" */
    expect_ids(v, "x<|end|>   x", false, true, 5, t_sp, t_x, t_end, t_sp, t_x);
    sift_vocab_free(v);
}

/* ---- pre-tokenizers ------------------------------------------------------------------------ */

static void expect_split(const char *pre, const char *text, int n, ...)
{
    const sift__pretok_def *d = sift__pretok_find(pre);
    assert_non_null(d);
    sift_error err = {0};
    sift__pretok *p = sift__pretok_new(d->regexes, &err);
    if (!p) fail_msg("%s: %s", pre, err.msg);
    uint32_t cp[256];
    uint16_t fl[256];
    size_t nc = sift__utf8_to_cpts(text, strlen(text), cp);
    for (size_t i = 0; i < nc; i++) fl[i] = sift__unicode_flags(cp[i]);
    sift__pretok_scratch sc = {0};
    const uint32_t *pieces;
    size_t np;
    assert_int_equal(sift__pretok_split(p, &sc, cp, fl, nc, &pieces, &np), 0);
    va_list ap;
    va_start(ap, n);
    size_t pos = 0;
    bool ok = (int)np == n;
    char got[1024] = "";
    for (size_t i = 0; i < np; i++) {
        char w[128];
        size_t k = 0;
        for (size_t j = pos; j < pos + pieces[i]; j++) k += sift__utf8_encode(cp[j], w + k);
        w[k] = 0;
        if ((int)i < n) {
            const char *want = va_arg(ap, const char *);
            if (strcmp(want, w)) ok = false;
        }
        snprintf(got + strlen(got), sizeof got - strlen(got), "[%s]", w);
        pos += pieces[i];
    }
    va_end(ap);
    if (!ok) fail_msg("%s '%s': got %s", pre, text, got);
    sift__pretok_scratch_free(&sc);
    sift__pretok_free(p);
}

static void test_pretok(void **state)
{
    (void)state;
    expect_split("gpt-2", "Hello world's  end\n", 6, "Hello", " world", "'s", " ", " end", "\n");
    expect_split("gpt-2", "a\n\n\xE3\x80\x80x", 4, "a", "\n\n", "\xE3\x80\x80", "x"); /* U+3000 is whitespace */
    expect_split("llama-bpe", "I'M 12345 ok!!\n\n", 7, "I", "'M", " ", "123", "45", " ok", "!!\n\n");
    expect_split("superbpe", "1234567", 3, "1", "234", "567"); /* empty matches split */
    expect_split("deepseek-llm", "Hello, world 123\n\xE4\xBD\xA0\xE5\xA5\xBD", 7, "Hello", ",", " world", " ", "123",
                 "\n", "\xE4\xBD\xA0\xE5\xA5\xBD");
    expect_split("starcoder", "x=12", 4, "x", "=", "1", "2");
    assert_null(sift__pretok_find("no-such-pre"));
    assert_non_null(sift__pretok_find(NULL)); /* absent = default */
}

/* ---- API conventions and refusals ---------------------------------------------------------- */

static void test_api_edges(void **state)
{
    (void)state;
    vocab_src s;
    spm_base(&s);
    int t_a = add_tok(&s, "a", -1, 1), t_spa = add_tok(&s, SP "a", -1, 1);
    sift_vocab *v = build(&s, "llama", NULL, NULL);
    sift_token ids[8];
    assert_int_equal(sift_tokenize(NULL, "a", 1, ids, 8, false, false), INT32_MIN);
    assert_int_equal(sift_tokenize(v, NULL, 1, ids, 8, false, false), INT32_MIN);
    assert_int_equal(sift_tokenize(v, NULL, 0, ids, 8, false, false), 0);
    assert_int_equal(sift_tokenize(v, "", 0, ids, 8, true, false), 1); /* BOS only */
    assert_int_equal(sift_tokenize(v, "a a a", 5, ids, 2, false, false), -3);
    assert_int_equal(sift_tokenize(v, "a a a", 5, NULL, 0, false, false), -3);
    assert_int_equal(sift_tokenize(v, "a", (size_t)INT32_MAX + 1, ids, 8, false, false), INT32_MIN);
    char buf[8];
    assert_int_equal(sift_token_to_piece(v, -1, buf, 8, 0, true), 0);
    assert_int_equal(sift_token_to_piece(v, 999999, buf, 8, 0, true), 0);
    sift_token bad[] = {t_a, 12345};
    assert_int_equal(sift_detokenize(v, bad, 2, buf, 8, false, false), INT32_MIN);
    sift_token good[] = {t_spa, t_spa, t_spa};
    assert_int_equal(sift_detokenize(v, good, 3, buf, 2, false, false), -5); /* "a a a" */
    assert_null(sift_vocab_token_text(v, -5, NULL));
    assert_true(isnan(sift_vocab_token_score(v, 100000)));
    assert_int_equal(sift_vocab_token_attr(v, 100000), 0);
    sift_vocab_view view;
    assert_int_equal(sift_vocab_view_get(v, &view), SIFT_OK);
    assert_int_equal(view.n_tokens, sift_vocab_n_tokens(v));
    assert_int_equal(view.piece_len[t_spa], 2);
    assert_memory_equal(view.piece[t_spa], " a", 2);
    assert_int_equal(view.attr[1], SIFT_TOKEN_ATTR_CONTROL);
    assert_int_equal(view.attr[2], SIFT_TOKEN_ATTR_CONTROL | SIFT_TOKEN_ATTR_EOG);
    assert_int_equal(view.attr[3], SIFT_TOKEN_ATTR_BYTE);
    assert_int_equal(view.tokenize(view.tokenize_ctx, "a", 1, ids, 8), 1);
    assert_int_equal(ids[0], t_spa);
    /* the identity: nonzero, the same for every view of this vocabulary, another for a
     * second vocabulary built from the same metadata (identity is per object, never reused) */
    sift_vocab_view again;
    assert_int_equal(sift_vocab_view_get(v, &again), SIFT_OK);
    assert_true(view.identity != 0);
    assert_true(again.identity == view.identity);
    sift_vocab *v2 = build(&s, "llama", NULL, NULL);
    assert_int_equal(sift_vocab_view_get(v2, &again), SIFT_OK);
    assert_true(again.identity != 0 && again.identity != view.identity);
    sift_vocab_free(v2);
    assert_int_equal(sift_vocab_view_get(NULL, &view), SIFT_E_INVAL);
    sift_vocab_free(v);
    sift_vocab_free(NULL);
}

static void expect_build_error(vocab_src *s, const char *model, const char *pre, sift__vocab_spec *spec,
                               const char *needle)
{
    sift__vocab_spec sp;
    if (spec) sp = *spec;
    else sift__vocab_spec_init(&sp);
    sp.model = model;
    sp.pre = pre;
    sp.n_tokens = s->n;
    sp.text = s->text;
    sp.types = s->type;
    sp.n_types = s->n;
    if (model && !strcmp(model, "gpt2") && s->n_merges) {
        sp.has_merges = true;
        sp.merges = s->merges;
        sp.n_merges = s->n_merges;
    }
    sift_error err = {0};
    sift_vocab *v = sift__vocab_build(&sp, &err);
    assert_null(v);
    if (!strstr(err.msg, needle)) fail_msg("error '%s' does not mention '%s'", err.msg, needle);
}

static void test_build_errors(void **state)
{
    (void)state;
    vocab_src s;
    bpe_base(&s);
    expect_build_error(&s, "gpt2", "gpt-2", NULL, "tokenizer.ggml.merges");
    s.merges[s.n_merges++] = "a b";
    expect_build_error(&s, "gpt2", "no-such-pre", NULL, "no-such-pre");
    expect_build_error(&s, "t5", NULL, NULL, "'t5'");
    sift__vocab_spec spec;
    sift__vocab_spec_init(&spec);
    spec.scores = (const float[]){0, 0};
    spec.n_scores = 2;
    expect_build_error(&s, "llama", NULL, &spec, "tokenizer.ggml.scores");
    expect_build_error(&s, NULL, NULL, NULL, "tokenizer.ggml.model");
    sift__vocab_spec_init(&spec);
    spec.add_bos = 1; /* default BPE BOS 11 exists here, so take it away */
    spec.ids[SIFT_VKEY_BOS] = -1;
    vocab_src small;
    memset(&small, 0, sizeof small);
    add_tok(&small, "a", 0, 1);
    small.merges[small.n_merges++] = "a a";
    expect_build_error(&small, "gpt2", "gpt-2", &spec, "add_bos_token");
    add_tok(&s, "a", 0, 1); /* duplicate of token 'a' */
    expect_build_error(&s, "gpt2", "gpt-2", NULL, "duplicate");
}

/* A vocabulary written as a GGUF file (the GGUF writer) and read back by the loader. */
static void test_gguf_loader(void **state)
{
    (void)state;
    const char *toks[] = {"<unk>", "<s>", "</s>", "a", SP "a"};
    float scores[] = {0, 0, 0, -1, -1};
    int32_t types[] = {2, 3, 3, 1, 1};
    sift__gguf_writer *w = sift__gguf_writer_new();
    assert_non_null(w);
    sift__gguf_writer_set_str(w, "general.name", "tiny");
    sift__gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    sift__gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
    sift__gguf_writer_set_arr(w, "tokenizer.ggml.scores", SIFT_GGUF_FLOAT32, scores, 5);
    sift__gguf_writer_set_arr(w, "tokenizer.ggml.token_type", SIFT_GGUF_INT32, types, 5);
    sift__gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 99); /* out of range: ignored */
    sift_error err = {0};
    uint8_t *buf;
    size_t size;
    assert_int_equal(sift__gguf_writer_write_buffer(w, &buf, &size, &err), SIFT_OK);
    sift_gguf *g = sift_gguf_open_buffer(buf, size, &err);
    assert_non_null(g);
    sift_vocab *v = sift_vocab_from_gguf(g, &err);
    if (!v) fail_msg("%s", err.msg);
    assert_int_equal(sift_vocab_n_tokens(v), 5);
    assert_int_equal(sift_vocab_eos(v), 2);
    expect_ids(v, "a", true, false, 2, 1, 4);
    sift_vocab_free(v);
    sift_gguf_close(g);
    free(buf);

    /* a mistyped key is named: suppress tokens as u32 (llama.cpp wants i32), then token types */
    uint32_t n32[] = {1, 2};
    sift__gguf_writer_set_arr(w, "tokenizer.ggml.suppress_tokens", SIFT_GGUF_UINT32, n32, 2);
    assert_int_equal(sift__gguf_writer_write_buffer(w, &buf, &size, &err), SIFT_OK);
    g = sift_gguf_open_buffer(buf, size, &err);
    assert_non_null(g);
    assert_null(sift_vocab_from_gguf(g, &err));
    assert_non_null(strstr(err.msg, "tokenizer.ggml.suppress_tokens"));
    sift_gguf_close(g);
    free(buf);
    sift__gguf_writer_remove(w, "tokenizer.ggml.suppress_tokens");
    sift__gguf_writer_set_arr(w, "tokenizer.ggml.token_type", SIFT_GGUF_UINT32, n32, 2);
    assert_int_equal(sift__gguf_writer_write_buffer(w, &buf, &size, &err), SIFT_OK);
    g = sift_gguf_open_buffer(buf, size, &err);
    assert_non_null(g);
    assert_null(sift_vocab_from_gguf(g, &err));
    assert_non_null(strstr(err.msg, "tokenizer.ggml.token_type"));
    sift_gguf_close(g);
    free(buf);
    sift__gguf_writer_remove(w, "tokenizer.ggml.tokens");
    sift__gguf_writer_remove(w, "tokenizer.ggml.token_type");
    assert_int_equal(sift__gguf_writer_write_buffer(w, &buf, &size, &err), SIFT_OK);
    g = sift_gguf_open_buffer(buf, size, &err);
    assert_null(sift_vocab_from_gguf(g, &err));
    assert_non_null(strstr(err.msg, "tokenizer.ggml.tokens"));
    sift_gguf_close(g);
    free(buf);
    sift__gguf_writer_free(w);
    assert_null(sift_vocab_load("/nonexistent/file.gguf", &err));
    assert_int_equal(err.status, SIFT_E_IO);
}

/* One vocabulary, several threads tokenizing at once (a vocabulary is read-only). */
typedef struct {
    const sift_vocab *v;
    const char *const *texts;
    int n_texts;
    sift_token (*want)[64];
    const int *want_n;
    int bad;
} thread_job;

static void *tokenize_many(void *arg)
{
    thread_job *j = arg;
    for (int rep = 0; rep < 50; rep++)
        for (int i = 0; i < j->n_texts; i++) {
            sift_token ids[64];
            int32_t n = sift_tokenize(j->v, j->texts[i], strlen(j->texts[i]), ids, 64, true, true);
            if (n != j->want_n[i] || memcmp(ids, j->want[i], sizeof *ids * (size_t)(n > 0 ? n : 0))) j->bad++;
        }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    vocab_src s;
    bpe_base(&s);
    add_tok(&s, "<|eos|>", 0, 3);
    s.merges[s.n_merges++] = "a b";
    s.merges[s.n_merges++] = G " ab";
    add_tok(&s, "ab", 0, 1);
    add_tok(&s, G "ab", 0, 1);
    sift_vocab *v = build(&s, "gpt2", "deepseek-llm", NULL); /* both PCRE2 paths */
    static const char *const texts[] = {"ab ab abab", "Hello, world 123<|eos|>", "\xE4\xBD\xA0\xE5\xA5\xBD ab\n\n",
                                        "x = [1, 2, 3]  # \xCE\xB1\xCE\xB2", "   ab\t\tab   "};
    enum { N = sizeof texts / sizeof *texts };
    static sift_token want[N][64];
    int want_n[N];
    for (int i = 0; i < N; i++) want_n[i] = (int)sift_tokenize(v, texts[i], strlen(texts[i]), want[i], 64, true, true);
    pthread_t th[4];
    thread_job jobs[4];
    for (int t = 0; t < 4; t++) {
        jobs[t] = (thread_job){v, texts, N, want, want_n, 0};
        assert_int_equal(pthread_create(&th[t], NULL, tokenize_many, &jobs[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(jobs[t].bad, 0);
    }
    sift_vocab_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unicode_tables), cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_spm),            cmocka_unit_test(test_spm_random),
        cmocka_unit_test(test_bpe),            cmocka_unit_test(test_bpe_detokenize_cleanup),
        cmocka_unit_test(test_bpe_random),     cmocka_unit_test(test_bpe_ignore_merges), cmocka_unit_test(test_gemma4),
        cmocka_unit_test(test_wpm),            cmocka_unit_test(test_special_partition),
        cmocka_unit_test(test_pretok),         cmocka_unit_test(test_api_edges),
        cmocka_unit_test(test_build_errors),   cmocka_unit_test(test_gguf_loader),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
