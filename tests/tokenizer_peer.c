/*
 * tokenizer_peer.c - sift's vocabulary and tokenizers against llama.cpp itself, in one
 * process (optional test, built only when the peer library is present; see tokenizer.cmake).
 *
 *   tokenizer_peer [--quick] [--pre-variants BPE.gguf] [--gemma4-from SPM.gguf] VOCAB.gguf...
 *
 * For each vocabulary, loaded by both libraries (llama.cpp with vocab_only):
 *   - the metadata-derived facts: n_tokens, type, BOS/EOS/EOT/SEP/PAD/NL, add_bos/add_eos,
 *     the EOG set, every token's attributes, text and score;
 *   - every token's piece, special = false and true, lstrip 0 and 1;
 *   - every test string of VOCAB.gguf.inp (when present) and a generated stress corpus
 *     (words, numbers, punctuation, whitespace runs, the vocabulary's own special texts,
 *     code points from many scripts, unassigned and private-use code points, invalid
 *     UTF-8), tokenized with add_special/parse_special in all four combinations, then
 *     detokenized with remove_special/unparse_special in all four combinations;
 *   - unless --quick, a text holding every code point once (except surrogates; llama.cpp
 *     aborts on code points above U+10FFFF, so none are generated), which exercises the
 *     whole Unicode class table through the pre-tokenizers.
 * --pre-variants BPE.gguf rewrites that byte-level BPE vocabulary once per pre-tokenizer name
 * sift knows (tokenizer.ggml.pre = "llama-bpe", "qwen2", "gpt-4o", ...) and compares each
 * (quick corpus, its .inp strings): the vocabularies the shared folder has cover only a
 * few pre-tokenizers, this covers the splitting rules of all of them.
 * --gemma4-from SPM.gguf makes "gemma4" vocabularies (SentencePiece-style BPE, Gemma 4's
 * tokenizer model) out of a SentencePiece one as `sift mkmodel --tokenizer gemma4` does
 * (sift__mkmodel_gemma4_vocab: its tokens plus three newline runs no merge builds, merges made
 * from the tokens); once with add_bos_token as the file says, once with it false (llama.cpp
 * turns it back on) and with tokenizer.ggml.suppress_tokens (some out of range).
 * Any difference is printed (first few) and makes the exit status 1. The last lines are
 * the round-trip table: of the .inp strings, how many come back unchanged from
 * detokenize(tokenize(s)) (add_special = parse_special = remove_special = unparse_special =
 * false) with sift and with llama.cpp.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/mkmodel.h"
#include "vocab/pretok.h"
#include "model_ref_api.h"
#include "peer_backend.h"
#include "refdata.h"
#include "sift.h"

/* libllama functions model_ref_api.h does not declare (llama.h signatures) */
int32_t llama_vocab_get_attr(const struct llama_vocab *vocab, llama_token token);
const char *llama_vocab_get_text(const struct llama_vocab *vocab, llama_token token);
float llama_vocab_get_score(const struct llama_vocab *vocab, llama_token token);
llama_token llama_vocab_eot(const struct llama_vocab *vocab);
llama_token llama_vocab_sep(const struct llama_vocab *vocab);
llama_token llama_vocab_nl(const struct llama_vocab *vocab);
llama_token llama_vocab_pad(const struct llama_vocab *vocab);
llama_token llama_vocab_fim_pre(const struct llama_vocab *vocab);
llama_token llama_vocab_fim_suf(const struct llama_vocab *vocab);
llama_token llama_vocab_fim_mid(const struct llama_vocab *vocab);
llama_token llama_vocab_fim_pad(const struct llama_vocab *vocab);
llama_token llama_vocab_fim_rep(const struct llama_vocab *vocab);
llama_token llama_vocab_fim_sep(const struct llama_vocab *vocab);
bool llama_vocab_is_control(const struct llama_vocab *vocab, llama_token token);
const llama_token *llama_vocab_get_suppress_tokens(const struct llama_vocab *vocab, int32_t *n);

static void quiet_log(int level, const char *text, void *ud)
{
    (void)ud;
    if (level == 4) fputs(text, stderr);
}

static int n_fail;
static int n_fail_shown;

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    n_fail++;
    if (n_fail_shown++ >= 12) return;
    va_list ap;
    va_start(ap, fmt);
    printf("  MISMATCH ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

static void show(const char *label, const char *s, size_t n)
{
    printf("    %s (%zu bytes): '", label, n);
    for (size_t i = 0; i < n && i < 120; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F) putchar(c);
        else printf("\\x%02x", c);
    }
    printf("%s'\n", n > 120 ? "..." : "");
}

typedef struct {
    char **s;
    size_t *n;
    size_t count, cap;
} strlist;

static void add(strlist *l, const char *s, size_t n)
{
    if (l->count == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->s = realloc(l->s, sizeof *l->s * l->cap);
        l->n = realloc(l->n, sizeof *l->n * l->cap);
    }
    l->s[l->count] = malloc(n + 1);
    memcpy(l->s[l->count], s, n);
    l->s[l->count][n] = 0;
    l->n[l->count++] = n;
}

static void split_inp(strlist *l, const char *text, size_t n)
{
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep);
    const char *p = text, *end = text + n;
    for (;;) {
        const char *e = memmem(p, (size_t)(end - p), sep, sl);
        if (!e) {
            if (end > p) add(l, p, (size_t)(end - p));
            break;
        }
        add(l, p, (size_t)(e - p));
        p = e + sl;
    }
}

/* ---- generated corpus ---------------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint32_t rn(uint32_t n) { return (uint32_t)(rnd() % n); }

static size_t put_cpt(char *o, uint32_t c)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

static const uint32_t script_ranges[][2] = {
    {0x00C0, 0x024F}, {0x0370, 0x03FF}, {0x0400, 0x04FF}, {0x0590, 0x05FF}, {0x0600, 0x06FF}, {0x0900, 0x097F},
    {0x0E00, 0x0E7F}, {0x1100, 0x11FF}, {0x1E00, 0x1FFF}, {0x2000, 0x206F}, {0x2100, 0x214F}, {0x2190, 0x23FF},
    {0x3000, 0x303F}, {0x3040, 0x30FF}, {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0xE000, 0xE0FF}, {0xFB00, 0xFB4F},
    {0xFF00, 0xFFEF}, {0x0300, 0x036F}, {0x1F300, 0x1FAFF}, {0x10400, 0x1044F}, {0x20000, 0x20FFF},
    {0x0378, 0x037A}, {0x0080, 0x00BF}, {0x2FFC, 0x2FFF}, {0x1E900, 0x1E95F},
};

static size_t gen_piece(char *o, const sift_vocab *sv)
{
    static const char *const words[] = {"the", "The", "HELLO", "world", "don't", "I'm", "we'll", "they're",
                                        "you've", "it's", "He'd", "O'Neil", "a", "B", "xyzzy", "caf\xC3\xA9",
                                        "na\xC3\xAFve", "\xC3\x84pfel", "\xCE\xB1\xCE\xB2\xCE\xB3",
                                        "\xD0\xBF\xD1\x80\xD0\xB8", "\xE4\xBD\xA0\xE5\xA5\xBD",
                                        "\xE3\x81\x93\xE3\x82\x93", "\xEC\x95\x88\xEB\x85\x95", "'s", "'T",
                                        "'RE", "'ll", "'Ve", "'d", "'m", "''", "'"};
    static const char *const puncts[] = {".", ",", "!", "?", "...", "--", "(", ")", "[]", "{}", "<", ">", "<|",
                                         "|>", "/", "\\", "#", "$", "%", "^", "&", "*", "+", "=", "~", "`", "@",
                                         "\"", ":", ";", "_", "-", "\xE2\x80\x94", "\xE3\x80\x82", "\xEF\xBC\x8C"};
    static const char *const spaces[] = {" ", "  ", "   ", "    ", "\t", "\n", "\r\n", "\n\n", " \n ", "\t\t ",
                                         "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\x89", "\xC2\x85", "\x0B", "\x0C",
                                         "\x1C", "        ", "\n   \n"};
    static const char *const bad[] = {"\x80", "\xBF", "\xC0\x80", "\xC3", "\xE2\x82", "\xF0\x9F\x98", "\xFF",
                                      "\xFE", "\xED\xA0\x80", "\xF8\x88\x80\x80\x80", "\xC3\x28", "\xE0\x80\xAF"};
    size_t n = 0;
    switch (rn(12)) {
    case 0: case 1: case 2: {
        const char *w = words[rn(sizeof words / sizeof *words)];
        n = strlen(w);
        memcpy(o, w, n);
        break;
    }
    case 3: {
        uint32_t len = 1 + rn(12);
        for (uint32_t i = 0; i < len; i++) o[n++] = (char)('0' + rn(10));
        break;
    }
    case 4: {
        const char *p = puncts[rn(sizeof puncts / sizeof *puncts)];
        n = strlen(p);
        memcpy(o, p, n);
        break;
    }
    case 5: case 6: {
        const char *p = spaces[rn(sizeof spaces / sizeof *spaces)];
        n = strlen(p);
        memcpy(o, p, n);
        break;
    }
    case 7: case 8: {
        uint32_t len = 1 + rn(4);
        const uint32_t *r = script_ranges[rn(sizeof script_ranges / sizeof *script_ranges)];
        for (uint32_t i = 0; i < len; i++) n += put_cpt(o + n, r[0] + rn(r[1] - r[0] + 1));
        break;
    }
    case 9: {
        const char *b = bad[rn(sizeof bad / sizeof *bad)];
        n = strlen(b);
        memcpy(o, b, n);
        break;
    }
    case 10: { /* one of the vocabulary's special texts */
        int32_t nt = sift_vocab_n_tokens(sv);
        for (int tries = 0; tries < 64; tries++) {
            sift_token t = (sift_token)rn((uint32_t)nt);
            if (sift_vocab_token_attr(sv, t) & (SIFT_VOCAB_ATTR_CONTROL | SIFT_VOCAB_ATTR_USER_DEFINED)) {
                size_t len;
                const char *txt = sift_vocab_token_text(sv, t, &len);
                if (len < 64) {
                    memcpy(o, txt, len);
                    return len;
                }
            }
        }
        break;
    }
    default: { /* a random token's text (byte-level, ▁ and all) */
        size_t len;
        const char *txt = sift_vocab_token_text(sv, (sift_token)rn((uint32_t)sift_vocab_n_tokens(sv)), &len);
        if (len < 64) {
            memcpy(o, txt, len);
            n = len;
        }
        break;
    }
    }
    return n;
}

static void gen_corpus(strlist *l, const sift_vocab *sv, int count)
{
    char buf[8192];
    for (int i = 0; i < count; i++) {
        size_t n = 0;
        uint32_t pieces = rn(40);
        for (uint32_t k = 0; k < pieces && n < sizeof buf - 128; k++) n += gen_piece(buf + n, sv);
        add(l, buf, n);
    }
}

/* every code point once (no surrogates), with a separator every few code points */
static void gen_all_codepoints(strlist *l)
{
    size_t cap = 0x110000 * 5, n = 0;
    char *buf = malloc(cap);
    static const char seps[] = " a1.\n";
    for (uint32_t c = 0; c < 0x110000; c++) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        n += put_cpt(buf + n, c);
        if (c % 5 == 4) buf[n++] = seps[(c / 5) % 5];
        if (n > (1u << 20)) { /* chunks of about 1 MB */
            add(l, buf, n);
            n = 0;
        }
    }
    add(l, buf, n);
    free(buf);
}

/* ---- comparisons ------------------------------------------------------------------------- */

static void compare_facts(const struct llama_vocab *lv, const sift_vocab *sv)
{
    int32_t n = llama_vocab_n_tokens(lv);
    if (n != sift_vocab_n_tokens(sv)) {
        fail("n_tokens: llama %d, sift %d", n, sift_vocab_n_tokens(sv));
        return;
    }
    if (llama_vocab_type(lv) != (int32_t)sift_vocab_get_type(sv))
        fail("type: llama %d, sift %d", llama_vocab_type(lv), sift_vocab_get_type(sv));
#define SAME_ID(what, a, b) \
    if ((a) != (b)) fail("%s: llama %d, sift %d", what, (a), (b))
    SAME_ID("bos", llama_vocab_bos(lv), sift_vocab_bos(sv));
    SAME_ID("eos", llama_vocab_eos(lv), sift_vocab_eos(sv));
    SAME_ID("eot", llama_vocab_eot(lv), sift_vocab_eot(sv));
    SAME_ID("sep", llama_vocab_sep(lv), sift_vocab_sep(sv));
    SAME_ID("pad", llama_vocab_pad(lv), sift_vocab_pad(sv));
    SAME_ID("nl", llama_vocab_nl(lv), sift_vocab_nl(sv));
    SAME_ID("fim_pre", llama_vocab_fim_pre(lv), sift_vocab_fim_pre(sv));
    SAME_ID("fim_suf", llama_vocab_fim_suf(lv), sift_vocab_fim_suf(sv));
    SAME_ID("fim_mid", llama_vocab_fim_mid(lv), sift_vocab_fim_mid(sv));
    SAME_ID("fim_pad", llama_vocab_fim_pad(lv), sift_vocab_fim_pad(sv));
    SAME_ID("fim_rep", llama_vocab_fim_rep(lv), sift_vocab_fim_rep(sv));
    SAME_ID("fim_sep", llama_vocab_fim_sep(lv), sift_vocab_fim_sep(sv));
    SAME_ID("add_bos", (int)llama_vocab_get_add_bos(lv), (int)sift_vocab_add_bos(sv));
    SAME_ID("add_eos", (int)llama_vocab_get_add_eos(lv), (int)sift_vocab_add_eos(sv));
#undef SAME_ID
    int32_t nl_sup = 0, ns_sup = 0;
    const llama_token *l_sup = llama_vocab_get_suppress_tokens(lv, &nl_sup);
    const sift_token *s_sup = sift_vocab_suppress_tokens(sv, &ns_sup);
    if (nl_sup != ns_sup || (nl_sup > 0 && memcmp(l_sup, s_sup, sizeof *s_sup * (size_t)nl_sup)))
        fail("suppress tokens: llama %d of them, sift %d (or other ids)", nl_sup, ns_sup);
    char lb[4096], sb[4096];
    for (llama_token t = 0; t < n; t++) {
        if (llama_vocab_is_eog(lv, t) != sift_vocab_is_eog(sv, t))
            fail("is_eog(%d): llama %d, sift %d", t, llama_vocab_is_eog(lv, t), sift_vocab_is_eog(sv, t));
        if ((uint32_t)llama_vocab_get_attr(lv, t) != sift_vocab_token_attr(sv, t))
            fail("attr(%d): llama 0x%x, sift 0x%x", t, llama_vocab_get_attr(lv, t), sift_vocab_token_attr(sv, t));
        if (llama_vocab_is_control(lv, t) != sift_vocab_is_control(sv, t)) fail("is_control(%d)", t);
        size_t sl;
        const char *st = sift_vocab_token_text(sv, t, &sl);
        const char *lt = llama_vocab_get_text(lv, t);
        if (strlen(lt) != strlen(st) || strcmp(lt, st)) fail("text(%d)", t);
        if (llama_vocab_get_score(lv, t) != sift_vocab_token_score(sv, t)) fail("score(%d)", t);
        for (int special = 0; special < 2; special++) {
            for (int lstrip = 0; lstrip < 2; lstrip++) {
                int32_t a = llama_token_to_piece(lv, t, lb, sizeof lb, lstrip, special);
                int32_t b = sift_token_to_piece(sv, t, sb, sizeof sb, lstrip, special);
                if (a != b || (a > 0 && memcmp(lb, sb, (size_t)a))) {
                    fail("token_to_piece(%d, lstrip %d, special %d): llama %d bytes, sift %d", t, lstrip, special, a,
                         b);
                    if (a > 0 && b > 0 && n_fail_shown <= 12) {
                        show("llama", lb, (size_t)a);
                        show("sift", sb, (size_t)b);
                    }
                }
            }
        }
    }
}

typedef struct {
    int checked, lossless_sift, lossless_llama;
    char lossy_llama[512]; /* indices of the .inp strings llama.cpp does not round-trip */
} rt_stats;

static llama_token *lt_buf, *st_buf;
static char *ld_buf, *sd_buf;
static size_t tok_cap, det_cap;

static void ensure(size_t ntok, size_t ndet)
{
    if (ntok > tok_cap) {
        tok_cap = ntok;
        lt_buf = realloc(lt_buf, sizeof *lt_buf * tok_cap);
        st_buf = realloc(st_buf, sizeof *st_buf * tok_cap);
    }
    if (ndet > det_cap) {
        det_cap = ndet;
        ld_buf = realloc(ld_buf, det_cap);
        sd_buf = realloc(sd_buf, det_cap);
    }
}

static void compare_text(const struct llama_vocab *lv, const sift_vocab *sv, const char *s, size_t n, const char *what,
                         size_t idx, rt_stats *rt)
{
    ensure(n * 2 + 16, n * 8 + 4096);
    for (int mode = 0; mode < 4; mode++) {
        bool add_special = mode & 1, parse_special = mode & 2;
        int32_t a = llama_tokenize(lv, s, (int32_t)n, lt_buf, (int32_t)tok_cap, add_special, parse_special);
        int32_t b = sift_tokenize(sv, s, n, st_buf, (int32_t)tok_cap, add_special, parse_special);
        if (a != b || (a > 0 && memcmp(lt_buf, st_buf, sizeof *lt_buf * (size_t)a))) {
            int32_t k = 0;
            while (k < a && k < b && lt_buf[k] == st_buf[k]) k++;
            fail("%s %zu tokenize(add_special %d, parse_special %d): llama %d tokens, sift %d, first difference at %d "
                 "(llama %d, sift %d)",
                 what, idx, add_special, parse_special, a, b, k, k < a ? lt_buf[k] : -1, k < b ? st_buf[k] : -1);
            if (n_fail_shown <= 12) show("text", s, n);
            continue;
        }
        if (a < 0) continue;
        for (int dmode = 0; dmode < 4; dmode++) {
            bool remove_special = dmode & 1, unparse_special = dmode & 2;
            int32_t x = llama_detokenize(lv, lt_buf, a, ld_buf, (int32_t)det_cap, remove_special, unparse_special);
            int32_t y = sift_detokenize(sv, st_buf, b, sd_buf, (int32_t)det_cap, remove_special, unparse_special);
            if (x != y || (x > 0 && memcmp(ld_buf, sd_buf, (size_t)x))) {
                fail("%s %zu detokenize(tokenize(add %d, parse %d), remove_special %d, unparse_special %d): llama %d "
                     "bytes, sift %d",
                     what, idx, add_special, parse_special, remove_special, unparse_special, x, y);
                if (x > 0 && y > 0 && n_fail_shown <= 12) {
                    show("llama", ld_buf, (size_t)x);
                    show("sift", sd_buf, (size_t)y);
                }
            }
            if (mode == 0 && dmode == 0 && rt) {
                rt->checked++;
                bool ll = x == (int32_t)n && !memcmp(ld_buf, s, n);
                rt->lossless_llama += ll;
                if (!ll) {
                    size_t used = strlen(rt->lossy_llama);
                    snprintf(rt->lossy_llama + used, sizeof rt->lossy_llama - used, "%s%zu", used ? "," : "", idx);
                }
                rt->lossless_sift += y == (int32_t)n && !memcmp(sd_buf, s, n);
            }
        }
    }
}

/* Compare one vocabulary file; returns its mismatch count (-1: loaded by one library only). */
static int compare_vocab(const char *path, const char *label, const char *inp_path, int quick, uint64_t seed,
                         char *table, size_t *tl, size_t table_cap)
{
    n_fail = n_fail_shown = 0;
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    sift_error err = {0};
    sift_vocab *sv = sift_vocab_load(path, &err);
    if (!model || !sv) {
        printf("%s: llama %s, sift %s%s\n", label, model ? "loads" : "refuses", sv ? "loads" : "refuses: ",
               sv ? "" : err.msg);
        if (model) llama_model_free(model);
        sift_vocab_free(sv);
        return !model != !sv ? -1 : 0;
    }
    const struct llama_vocab *lv = llama_model_get_vocab(model);
    printf("%s\n", label);
    compare_facts(lv, sv);
    printf("  facts and %d pieces: %s\n", sift_vocab_n_tokens(sv), n_fail ? "DIFFER" : "same");
    int before = n_fail;

    strlist inp = {0};
    size_t in_n;
    char *in_text = ref_slurp(inp_path, &in_n);
    rt_stats rt = {0};
    if (in_text) split_inp(&inp, in_text, in_n);
    for (size_t k = 0; k < inp.count; k++) compare_text(lv, sv, inp.s[k], inp.n[k], ".inp string", k, &rt);
    printf("  %zu .inp strings x 4 tokenize x 4 detokenize modes: %s\n", inp.count, n_fail > before ? "DIFFER" : "same");
    before = n_fail;

    strlist gen = {0};
    rng_state = seed;
    gen_corpus(&gen, sv, quick ? 300 : 2000);
    for (size_t k = 0; k < gen.count; k++) compare_text(lv, sv, gen.s[k], gen.n[k], "generated string", k, NULL);
    printf("  %zu generated strings: %s\n", gen.count, n_fail > before ? "DIFFER" : "same");
    before = n_fail;
    if (!quick) {
        strlist all = {0};
        gen_all_codepoints(&all);
        for (size_t k = 0; k < all.count; k++) compare_text(lv, sv, all.s[k], all.n[k], "all-code-points chunk", k, NULL);
        printf("  every code point (%zu chunks): %s\n", all.count, n_fail > before ? "DIFFER" : "same");
        for (size_t k = 0; k < all.count; k++) free(all.s[k]);
        free(all.s);
        free(all.n);
    }
    if (in_text && table)
        *tl += (size_t)snprintf(table + *tl, table_cap - *tl, "  %-32s %2d/%-2d             %2d/%-2d   %s\n", label,
                                rt.lossless_sift, rt.checked, rt.lossless_llama, rt.checked,
                                rt.lossy_llama[0] ? rt.lossy_llama : "-");
    printf("  %s: %d mismatches\n", label, n_fail);
    for (size_t k = 0; k < inp.count; k++) free(inp.s[k]);
    for (size_t k = 0; k < gen.count; k++) free(gen.s[k]);
    free(inp.s);
    free(inp.n);
    free(gen.s);
    free(gen.n);
    free(in_text);
    sift_vocab_free(sv);
    llama_model_free(model);
    return n_fail;
}

/* Every pre-tokenizer sift knows, on one byte-level BPE vocabulary: BASE.gguf rewritten
 * with each tokenizer.ggml.pre name (the merges are BASE's; what differs is the split). */
static int compare_pre_variants(const char *base, int *n_variants)
{
    sift_error err = {0};
    sift_gguf *g = sift_gguf_open(base, &err);
    if (!g) {
        printf("%s: %s\n", base, err.msg);
        return 1;
    }
    char inp_path[4096];
    snprintf(inp_path, sizeof inp_path, "%s.inp", base);
    int fails = 0;
    for (const sift__pretok_def *const *d = sift__pretok_defs; *d; d++) {
        for (const char *p = (*d)->names; *p;) {
            const char *bar = strchr(p, '|');
            size_t len = bar ? (size_t)(bar - p) : strlen(p);
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)len, p);
            p = bar ? bar + 1 : p + len;
            const char *only = getenv("SIFT_PRE_ONLY"); /* debugging: one name */
            if (only && strcmp(only, name)) continue;
            sift__gguf_writer *w = sift__gguf_writer_new();
            for (int64_t i = 0; i < sift_gguf_n_kv(g); i++)
                sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i));
            sift__gguf_writer_set_str(w, "tokenizer.ggml.pre", name);
            char path[] = "/tmp/sift-pre-variant-XXXXXX";
            int fd = mkstemp(path);
            close(fd);
            if (sift__gguf_writer_write_file(w, path, &err) != SIFT_OK) {
                printf("writing the %s variant: %s\n", name, err.msg);
                fails++;
            } else {
                char label[96];
                snprintf(label, sizeof label, "pre=%s", name);
                uint64_t seed = 0xABCD0000u; /* per name, so that SIFT_PRE_ONLY reproduces a run */
                for (const char *c = name; *c; c++) seed = seed * 31 + (uint8_t)*c;
                int r = compare_vocab(path, label, inp_path, 1, seed, NULL, NULL, 0);
                fails += r < 0 ? 1 : r;
                (*n_variants)++;
            }
            unlink(path);
            sift__gguf_writer_free(w);
        }
    }
    sift_gguf_close(g);
    return fails;
}

/* The gemma4 variant of SentencePiece vocabulary base (see the top comment) at path; add_bos_false
 * writes add_bos_token = false. 0 on success. */
static int write_gemma4(const char *base, const char *path, bool add_bos_false)
{
    sift_error err = {0};
    sift_gguf *g = sift_gguf_open(base, &err);
    if (!g) {
        printf("%s: %s\n", base, err.msg);
        return 1;
    }
    sift__gguf_writer *w = sift__gguf_writer_new();
    for (int64_t i = 0; i < sift_gguf_n_kv(g); i++) sift__gguf_writer_set_value(w, sift_gguf_key(g, i), sift_gguf_kv_value(g, i));
    sift__gguf_writer_set_str(w, "general.architecture", "gemma4");
    int64_t n_vocab;
    int rc = sift__mkmodel_gemma4_vocab(w, g, &n_vocab, &err);
    if (!rc && add_bos_false) {
        const bool no = false;
        rc = sift__gguf_writer_set(w, "tokenizer.ggml.add_bos_token", SIFT_GGUF_BOOL, &no);
        /* and suppress tokens (Gemma 4's key): out-of-range ids dropped, the rest kept in order */
        const int32_t sup[] = {300, -1, 29, (int32_t)n_vocab, 300, 5};
        if (!rc) rc = sift__gguf_writer_set_arr(w, "tokenizer.ggml.suppress_tokens", SIFT_GGUF_INT32, sup, 6);
    }
    if (!rc) rc = sift__gguf_writer_write_file(w, path, &err);
    if (rc) printf("the gemma4 vocabulary from %s: %s\n", base, err.msg);
    sift__gguf_writer_free(w);
    sift_gguf_close(g);
    return rc != SIFT_OK;
}

/* The gemma4 vocabularies made from base, against llama.cpp (base's .inp strings; the corpus as
 * quick says, the add_bos_token-false copy with the quick one). */
static int compare_gemma4(const char *base, int quick)
{
    char inp_path[4096];
    snprintf(inp_path, sizeof inp_path, "%s.inp", base);
    int fails = 0;
    for (int v = 0; v < 2; v++) {
        char path[] = "/tmp/sift-gemma4-XXXXXX";
        int fd = mkstemp(path);
        close(fd);
        if (write_gemma4(base, path, v == 1)) {
            fails++;
        } else {
            int r = compare_vocab(path, v ? "gemma4 (add_bos_token false)" : "gemma4", inp_path, v ? 1 : quick, 0x6E3A0000u + (uint64_t)v,
                                  NULL, NULL, 0);
            fails += r < 0 ? 1 : r;
        }
        unlink(path);
    }
    return fails;
}

int main(int argc, char **argv)
{
    int quick = 0, first = 1;
    const char *pre_base = NULL, *gemma4_base = NULL;
    while (first < argc && argv[first][0] == '-') {
        if (!strcmp(argv[first], "--quick")) quick = 1, first++;
        else if (!strcmp(argv[first], "--pre-variants") && first + 1 < argc) pre_base = argv[first + 1], first += 2;
        else if (!strcmp(argv[first], "--gemma4-from") && first + 1 < argc) gemma4_base = argv[first + 1], first += 2;
        else break;
    }
    if (first >= argc && !pre_base && !gemma4_base) {
        fprintf(stderr, "usage: tokenizer_peer [--quick] [--pre-variants BPE.gguf] [--gemma4-from SPM.gguf] VOCAB.gguf...\n");
        return 2;
    }
    llama_log_set(quiet_log, NULL);
    if (peer_load_cpu_backend(NULL, NULL) != 0) {
        fprintf(stderr, "tokenizer_peer: no llama.cpp CPU backend could be registered\n");
        return 77;
    }
    llama_backend_init();
    char table[8192];
    size_t tl = 0;
    int total_fail = 0;
    for (int i = first; i < argc; i++) {
        const char *path = argv[i];
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        char inp_path[4096];
        snprintf(inp_path, sizeof inp_path, "%s.inp", path);
        int r = compare_vocab(path, base, inp_path, quick, 0x5EED0000u + (uint64_t)i, table, &tl, sizeof table);
        total_fail += r < 0 ? 1 : r;
    }
    if (first < argc) {
        printf("\nround trip detokenize(tokenize(s)) == s over the .inp strings:\n");
        printf("  %-32s %-18s %-18s %s\n", "vocab", "sift lossless", "llama.cpp lossless",
               "strings llama.cpp does not restore");
        fputs(table, stdout);
    }
    if (pre_base) {
        int n_variants = 0, f = compare_pre_variants(pre_base, &n_variants);
        printf("\n%d pre-tokenizer names on %s: %d mismatches\n", n_variants, pre_base, f);
        total_fail += f;
    }
    if (gemma4_base) {
        int f = compare_gemma4(gemma4_base, quick);
        printf("\ngemma4 vocabularies from %s: %d mismatches\n", gemma4_base, f);
        total_fail += f;
    }
    printf("\n%s: %d mismatches in total\n", total_fail ? "FAIL" : "OK", total_fail);
    return total_fail ? 1 : 0;
}
