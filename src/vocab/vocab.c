/*
 * vocab.c - building a vocabulary from its metadata, exactly as llama.cpp's
 * llama_vocab::impl::load does (the steps and why their order matters are in vocab.h),
 * and the read-only accessors of sift.h's "vocabulary & tokenizer" section.
 *
 * Memory: token texts live in one interned-string arena (sift__strtab), pieces in another;
 * per-token arrays (score, attr, piece offsets, view pointers) are flat. Nothing is
 * allocated after sift__vocab_build returns except by a tokenize call for its own scratch.
 *
 * Deviations from llama.cpp, all on inputs where llama.cpp throws or aborts: a vocabulary
 * whose token text is not valid UTF-8 (or spells a code point above 0x10FFFF) gets
 * U+FFFD-based pieces instead of aborting; a special-token fix naming a token the
 * vocabulary lacks is skipped instead of throwing; and where a vocabulary has several of
 * the texts llama.cpp recognises as EOT (or FIM-...) tokens and llama.cpp takes whichever its
 * hash table lists first, we take the one listed first in llama.cpp's list of texts (so
 * phi-3's EOT is "<|end|>", not "<|endoftext|>", as with llama.cpp).
 */
#include "vocab/tokenizers.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "vocab/unicode.h"

const char *const sift__vocab_id_keys[SIFT_VKEY_COUNT] = {
    "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",     "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",     "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
    "tokenizer.ggml.padding_token_id", "tokenizer.ggml.mask_token_id",    "tokenizer.ggml.fim_pre_token_id",
    "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.fim_pad_token_id",
    "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id", "tokenizer.ggml.prefix_token_id",
    "tokenizer.ggml.suffix_token_id",  "tokenizer.ggml.middle_token_id",
};

void sift__vocab_spec_init(sift__vocab_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    for (int i = 0; i < SIFT_VKEY_COUNT; i++) spec->ids[i] = -1;
    spec->add_bos = spec->add_eos = spec->add_sep = spec->add_space_prefix = -1;
    spec->remove_extra_ws = spec->lowercase = spec->strip_accents = -1;
}

void sift_vocab_free(sift_vocab *v)
{
    if (!v) return;
    free(v->model);
    free(v->pre);
    free(v->name);
    free(v->arch);
    sift__pretok_free(v->pretok);
    sift__strtab_free(&v->strs);
    free(v->score);
    free(v->attr);
    free(v->piece_arena);
    free(v->piece_off);
    free(v->piece_len);
    free(v->piece_ptr);
    free(v->view_attr);
    free(v->eog);
    free(v->suppress);
    free(v->special);
    free(v->special_rank);
    free(v->trie);
    sift__pairtab_free(&v->merges);
    free(v);
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

static size_t spec_text_len(const sift__vocab_spec *spec, int64_t i)
{
    return spec->text_len ? spec->text_len[i] : strlen(spec->text[i]);
}

/* ---- pieces ------------------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} strbuf;

static void sb_put(strbuf *b, const void *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1024;
        while (nc < b->n + n) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* llama.cpp's token_to_byte: strtol of the two characters after "<0x". */
static uint8_t token_to_byte(const char *text, size_t len)
{
    char hex[3] = {0, 0, 0};
    for (size_t i = 0; i < 2 && 3 + i < len; i++) hex[i] = text[3 + i];
    return (uint8_t)strtol(hex, NULL, 16);
}

/* token_to_piece(special = true) from the token text, appended to b. */
static void piece_of(const sift_vocab *v, sift_token t, strbuf *b)
{
    size_t len;
    const char *text = sift__strtab_str(&v->strs, t, &len);
    uint16_t a = v->attr[t];
    if (a & (SIFT_VATTR_UNKNOWN | SIFT_VATTR_CONTROL | SIFT_VATTR_USER_DEFINED)) {
        sb_put(b, text, len);
        return;
    }
    if (a & SIFT_VATTR_NORMAL) {
        if (v->type == SIFT_VOCAB_BPE && !v->escape_whitespaces) {
            /* undo the byte-level alphabet; a character outside it becomes a marker */
            const uint8_t *s = (const uint8_t *)text;
            for (size_t i = 0; i < len;) {
                size_t adv;
                uint32_t cpt = sift__utf8_decode(s + i, len - i, &adv);
                i += adv;
                int byte = sift__bytelevel_byte(cpt);
                if (byte >= 0) {
                    char c = (char)byte;
                    sb_put(b, &c, 1);
                    continue;
                }
                char u[4], hex[3];
                size_t un = sift__utf8_encode(cpt, u);
                sb_put(b, "[UNK_BYTE_0x", 12);
                for (size_t k = 0; k < un; k++) {
                    snprintf(hex, sizeof hex, "%02x", (uint8_t)u[k]);
                    sb_put(b, hex, 2);
                }
                sb_put(b, text, len);
                sb_put(b, "]", 1);
            }
            return;
        }
        /* SentencePiece / WordPiece: "▁" is a space */
        for (size_t i = 0; i < len;) {
            if (i + 3 <= len && !memcmp(text + i, "\xE2\x96\x81", 3)) {
                sb_put(b, " ", 1);
                i += 3;
            } else {
                sb_put(b, text + i, 1);
                i++;
            }
        }
        return;
    }
    if (a & SIFT_VATTR_BYTE) {
        char c = (char)token_to_byte(text, len);
        sb_put(b, &c, 1);
    }
    /* undefined / unused: no text */
}

static int build_pieces(sift_vocab *v)
{
    strbuf b = {0};
    v->piece_off = malloc(sizeof *v->piece_off * (size_t)v->n_tokens);
    v->piece_len = malloc(sizeof *v->piece_len * (size_t)v->n_tokens);
    v->piece_ptr = malloc(sizeof *v->piece_ptr * (size_t)v->n_tokens);
    if (!v->piece_off || !v->piece_len || !v->piece_ptr) return SIFT_E_NOMEM;
    for (sift_token t = 0; t < v->n_tokens; t++) {
        size_t start = b.n;
        piece_of(v, t, &b);
        if (b.n - start > INT32_MAX / 2 || b.n > UINT32_MAX) b.oom = 1;
        if (b.oom) break;
        v->piece_off[t] = (uint32_t)start;
        v->piece_len[t] = (uint32_t)(b.n - start);
    }
    sb_put(&b, "", 1);
    if (b.oom) {
        free(b.p);
        return SIFT_E_NOMEM;
    }
    v->piece_arena = b.p;
    for (sift_token t = 0; t < v->n_tokens; t++) v->piece_ptr[t] = v->piece_arena + v->piece_off[t];
    return 0;
}

/* ---- special tokens ----------------------------------------------------------------------- */

static bool text_is(const sift_vocab *v, sift_token t, const char *s)
{
    size_t len;
    const char *text = sift__strtab_str(&v->strs, t, &len);
    return len == strlen(s) && !memcmp(text, s, len);
}

static void force_control(sift_vocab *v, sift_token t)
{
    v->attr[t] |= SIFT_VATTR_CONTROL;
}

static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                        "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                        "<end_of_utterance>", NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
                                            "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const fim_suf_texts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>",
                                            "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const fim_mid_texts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                            "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
                                            "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
                                            NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};
static const char *const eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                                        "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>",
                                        "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
                                        "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
                                        "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                        "[e~[", NULL};

/* If *id is unset: the token whose text comes first in list (it becomes control). */
static void detect_by_text(sift_vocab *v, sift_token *id, const char *const *list)
{
    if (*id != SIFT_TOKEN_NULL) return;
    for (; *list; list++) {
        sift_token t = sift__vocab_find(v, *list, strlen(*list));
        if (t >= 0) {
            *id = t;
            force_control(v, t);
            return;
        }
    }
}

/* EOG ids kept as a small sorted set */
static int eog_add(sift_vocab *v, sift_token t)
{
    if (t == SIFT_TOKEN_NULL) return 0;
    int32_t i = 0;
    while (i < v->n_eog && v->eog[i] < t) i++;
    if (i < v->n_eog && v->eog[i] == t) return 0;
    sift_token *ne = realloc(v->eog, sizeof *ne * (size_t)(v->n_eog + 1));
    if (!ne) return SIFT_E_NOMEM;
    v->eog = ne;
    memmove(v->eog + i + 1, v->eog + i, sizeof *ne * (size_t)(v->n_eog - i));
    v->eog[i] = t;
    v->n_eog++;
    return 0;
}

static void eog_remove(sift_vocab *v, sift_token t)
{
    for (int32_t i = 0; i < v->n_eog; i++) {
        if (v->eog[i] == t) {
            memmove(v->eog + i, v->eog + i + 1, sizeof *v->eog * (size_t)(v->n_eog - i - 1));
            v->n_eog--;
            return;
        }
    }
}

static int build_eog(sift_vocab *v)
{
    int rc = 0;
    rc |= eog_add(v, v->fim_pad);
    rc |= eog_add(v, v->fim_rep);
    rc |= eog_add(v, v->fim_sep);
    for (const char *const *s = eog_texts; *s; s++) {
        sift_token t = sift__vocab_find(v, *s, strlen(*s));
        if (t >= 0) {
            rc |= eog_add(v, t);
            force_control(v, t);
        }
    }
    /* gpt-oss: these always render */
    static const char *const always_render[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    for (const char *const *s = always_render; *s; s++) {
        sift_token t = sift__vocab_find(v, *s, strlen(*s));
        if (t >= 0) v->attr[t] = SIFT_VATTR_USER_DEFINED;
    }
    rc |= eog_add(v, v->eos);
    rc |= eog_add(v, v->eot);
    rc |= eog_add(v, v->eom);
    if (rc) return SIFT_E_NOMEM;

    /* o200k_harmony / solar-open: "<|end|>" is not an end of generation there */
    bool has_return = false, has_call = false, has_end = false, has_flush = false;
    sift_token end_id = SIFT_TOKEN_NULL;
    for (int32_t i = 0; i < v->n_eog; i++) {
        sift_token t = v->eog[i];
        if (text_is(v, t, "<|return|>")) has_return = true;
        else if (text_is(v, t, "<|call|>") || text_is(v, t, "<|calls|>")) has_call = true;
        else if (text_is(v, t, "<|flush|>")) has_flush = true;
        else if (text_is(v, t, "<|end|>")) {
            has_end = true;
            end_id = t;
        }
    }
    if ((has_return && has_call && has_end) || (has_call && has_flush && has_end)) {
        eog_remove(v, end_id);
        v->attr[end_id] = SIFT_VATTR_USER_DEFINED;
    }
    /* gemma4 / paddleocr: "</s>" is not an end of generation when "<|tool_response>" is */
    bool has_tool_response = false;
    sift_token s_id = SIFT_TOKEN_NULL;
    for (int32_t i = 0; i < v->n_eog; i++) {
        if (text_is(v, v->eog[i], "<|tool_response>")) has_tool_response = true;
        else if (text_is(v, v->eog[i], "</s>")) s_id = v->eog[i];
    }
    if (has_tool_response && s_id != SIFT_TOKEN_NULL) {
        eog_remove(v, s_id);
        v->attr[s_id] = SIFT_VATTR_NORMAL;
    }
    return 0;
}

/* Special tokens for partitioning: control, user-defined and unknown, longest text first;
 * equal lengths by id (llama.cpp's std::sort leaves their order unspecified). */
static int cmp_special(const void *a, const void *b, void *vocab)
{
    const sift_vocab *v = vocab;
    sift_token x = *(const sift_token *)a, y = *(const sift_token *)b;
    uint32_t lx = v->strs.len[x], ly = v->strs.len[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return (x > y) - (x < y);
}

static int trie_child(sift_vocab *v, int32_t node, uint8_t byte, int32_t *cap)
{
    int32_t *link = node < 0 ? &v->trie_root[byte] : &v->trie[node].child;
    for (int32_t c = *link; c >= 0; c = v->trie[c].sibling)
        if (v->trie[c].byte == byte) return c;
    if (v->n_trie == *cap) {
        int32_t nc = *cap ? *cap * 2 : 256;
        sift__trie_node *nt = realloc(v->trie, sizeof *nt * (size_t)nc);
        if (!nt) return -1;
        v->trie = nt;
        *cap = nc;
        link = node < 0 ? &v->trie_root[byte] : &v->trie[node].child; /* trie moved */
    }
    int32_t id = v->n_trie++;
    v->trie[id] = (sift__trie_node){.child = -1, .sibling = *link, .token = -1, .byte = byte};
    *link = id;
    return id;
}

static int build_specials(sift_vocab *v)
{
    v->special = malloc(sizeof *v->special * (size_t)(v->n_tokens ? v->n_tokens : 1));
    v->special_rank = malloc(sizeof *v->special_rank * (size_t)v->n_tokens);
    if (!v->special || !v->special_rank) return SIFT_E_NOMEM;
    for (sift_token t = 0; t < v->n_tokens; t++) {
        v->special_rank[t] = -1;
        if (v->attr[t] & (SIFT_VATTR_CONTROL | SIFT_VATTR_USER_DEFINED | SIFT_VATTR_UNKNOWN))
            v->special[v->n_special++] = t;
    }
    qsort_r(v->special, (size_t)v->n_special, sizeof *v->special, cmp_special, v);
    for (int32_t i = 0; i < 256; i++) v->trie_root[i] = -1;
    int32_t cap = 0;
    for (int32_t r = 0; r < v->n_special; r++) {
        sift_token t = v->special[r];
        v->special_rank[t] = r;
        size_t len;
        const uint8_t *s = (const uint8_t *)sift__strtab_str(&v->strs, t, &len);
        int32_t node = -1;
        for (size_t i = 0; i < len; i++)
            if ((node = trie_child(v, node, s[i], &cap)) < 0) return SIFT_E_NOMEM;
        if (node >= 0) v->trie[node].token = t;
    }
    return 0;
}

/* ---- per-model attribute fixes ------------------------------------------------------------ */

static bool contains(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

static void set_attr_by_text(sift_vocab *v, const char *text, uint16_t bit, bool on)
{
    sift_token t = sift__vocab_find(v, text, strlen(text));
    if (t < 0) return;
    v->attr[t] = on ? (uint16_t)(v->attr[t] | bit) : (uint16_t)(v->attr[t] & ~bit);
}

static void model_attr_fixes(sift_vocab *v)
{
    char name[128];
    size_t i = 0;
    for (const char *p = v->name; *p && i + 1 < sizeof name; p++)
        name[i++] = (*p >= 'A' && *p <= 'Z') ? (char)(*p + 32) : *p;
    name[i] = 0;
    if (contains(v->pre, "jina-v2-de") || contains(v->pre, "jina-v2-es") || contains(v->pre, "jina-v2-code") ||
        contains(v->arch, "nomic-bert-moe") || contains(v->arch, "jina-bert-v3")) {
        set_attr_by_text(v, "<mask>", SIFT_VATTR_LSTRIP, true);
    } else if (contains(name, "phi-3") || contains(name, "phi3")) {
        for (int32_t r = 0; r < v->n_special; r++) v->attr[v->special[r]] |= SIFT_VATTR_RSTRIP;
        set_attr_by_text(v, "</s>", SIFT_VATTR_RSTRIP, true);
        set_attr_by_text(v, "<unk>", SIFT_VATTR_RSTRIP, false);
        set_attr_by_text(v, "<s>", SIFT_VATTR_RSTRIP, false);
        set_attr_by_text(v, "<|endoftext|>", SIFT_VATTR_RSTRIP, false);
    } else if (contains(name, "modern-bert")) {
        set_attr_by_text(v, "[MASK]", SIFT_VATTR_LSTRIP, true);
    }
}

/* ---- BPE tables --------------------------------------------------------------------------- */

static int build_merges(sift_vocab *v, const sift__vocab_spec *spec, sift_error *err)
{
    if (sift__pairtab_init(&v->merges, (size_t)spec->n_merges) != 0) return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    v->n_merges = spec->n_merges;
    for (int64_t i = 0; i < spec->n_merges; i++) {
        const char *m = spec->merges[i];
        size_t len = spec->merge_len ? spec->merge_len[i] : strlen(m);
        /* llama.cpp splits at the first space after the first byte; no space: ("", "") */
        const char *sp = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
        size_t ll = sp ? (size_t)(sp - m) : 0, rl = sp ? len - ll - 1 : 0;
        const char *r = sp ? sp + 1 : m;
        int32_t a = sift__strtab_intern(&v->strs, m, ll, NULL);
        int32_t b = sift__strtab_intern(&v->strs, r, rl, NULL);
        if (a < 0 || b < 0) return sift__error_set(err, SIFT_E_NOMEM, "out of memory interning merges");
        /* the merged string, for its id */
        char stackbuf[256];
        char *cat = ll + rl <= sizeof stackbuf ? stackbuf : malloc(ll + rl);
        if (!cat) return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        memcpy(cat, m, ll);
        memcpy(cat + ll, r, rl);
        int32_t ab = sift__strtab_intern(&v->strs, cat, ll + rl, NULL);
        if (cat != stackbuf) free(cat);
        if (ab < 0 || sift__pairtab_add(&v->merges, a, b, (int32_t)(i > INT32_MAX ? INT32_MAX : i), ab) < 0)
            return sift__error_set(err, SIFT_E_NOMEM, "out of memory");
    }
    return 0;
}

static void build_byte_tables(sift_vocab *v)
{
    for (int b = 0; b < 256; b++) {
        char c = (char)b, u[2];
        size_t n = sift__bytelevel_utf8((uint8_t)b, u);
        v->byte_sid[b] = sift__strtab_find(&v->strs, u, n);
        v->byte1[b] = sift__vocab_find(v, &c, 1);
        char hex[7];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        sift_token t = sift__vocab_find(v, hex, 6);
        v->byte_token[b] = t >= 0 ? t : v->byte1[b];
    }
}

/* Whether every "▁" inside a token text (not at its start) follows another "▁". */
static bool spm_split_safe(const sift_vocab *v)
{
    for (sift_token t = 0; t < v->n_tokens; t++) {
        size_t len;
        const char *s = sift__strtab_str(&v->strs, t, &len);
        for (size_t k = 1; k + 3 <= len; k++) {
            if (memcmp(s + k, "\xE2\x96\x81", 3)) continue;
            if (k < 3 || memcmp(s + k - 3, "\xE2\x96\x81", 3)) return false;
        }
    }
    return true;
}

/* ---- build -------------------------------------------------------------------------------- */

static sift_token default_or_null(const sift_vocab *v, sift_token id)
{
    return id >= 0 && id < v->n_tokens ? id : SIFT_TOKEN_NULL;
}

sift_vocab *sift__vocab_build(const sift__vocab_spec *spec, sift_error *err)
{
    sift_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        return NULL;
    }
    int rc = 0;
#define FAIL(...)                                     \
    do {                                              \
        rc = sift__error_set(err, __VA_ARGS__);        \
        goto fail;                                    \
    } while (0)

    if (!spec->model) FAIL(SIFT_E_FORMAT, "tokenizer.ggml.model: missing");
    v->model = dup_or_empty(spec->model);
    v->pre = dup_or_empty(spec->pre);
    v->name = dup_or_empty(spec->name);
    v->arch = dup_or_empty(spec->arch);
    if (!v->model || !v->pre || !v->name || !v->arch) FAIL(SIFT_E_NOMEM, "out of memory");

    /* 1. type, defaults, pre-tokenizer */
    sift_token d_bos, d_eos, d_unk, d_sep = -1, d_pad = -1, d_mask = -1;
    v->escape_whitespaces = true;
    if (!strcmp(spec->model, "llama")) {
        v->type = SIFT_VOCAB_SPM;
        d_bos = 1, d_eos = 2, d_unk = 0;
        v->add_space_prefix = true;
        v->add_bos = true;
    } else if (!strcmp(spec->model, "bert")) {
        v->type = SIFT_VOCAB_WPM;
        d_bos = 101, d_eos = -1, d_unk = 100, d_sep = 102, d_pad = 0, d_mask = 103;
        v->clean_spaces = true;
        v->add_bos = true;
        v->add_sep = true;
    } else if (!strcmp(spec->model, "gpt2")) {
        v->type = SIFT_VOCAB_BPE;
        if (!spec->has_merges) FAIL(SIFT_E_FORMAT, "tokenizer.ggml.merges: missing (required for gpt2)");
        d_bos = 11, d_eos = 11, d_unk = -1;
        v->escape_whitespaces = false;
        v->clean_spaces = true;
        v->pre_def = sift__pretok_find(spec->pre);
        if (!v->pre_def)
            FAIL(SIFT_E_UNSUPPORTED, "tokenizer.ggml.pre: unknown or unsupported pre-tokenizer '%s'", spec->pre);
        unsigned pf = v->pre_def->flags;
        if (pf & SIFT_PRE_KEEP_SPACES) v->clean_spaces = false;
        if (pf & SIFT_PRE_IGNORE_MERGES) v->ignore_merges = true;
        if (pf & SIFT_PRE_ADD_BOS) v->add_bos = true;
        if (pf & SIFT_PRE_NO_BOS) d_bos = -1;
        if (pf & SIFT_PRE_ADD_SEP) v->add_sep = true;
    } else if (!strcmp(spec->model, "gemma4")) {
        /* SentencePiece-style BPE: merges over characters, "▁" for spaces, "<0xXX>" byte fallback;
         * no default special ids, and the pre-tokenizer is gemma4's whatever the file names */
        v->type = SIFT_VOCAB_BPE;
        if (!spec->has_merges) FAIL(SIFT_E_FORMAT, "tokenizer.ggml.merges: missing (required for gemma4)");
        d_bos = d_eos = d_unk = -1;
        v->clean_spaces = true;
        v->pre_def = &sift__pretok_gemma4;
        v->bpe_chars = true;
        v->add_bos = true;
    } else if (!strcmp(spec->model, "no_vocab") || !strcmp(spec->model, "none")) {
        FAIL(SIFT_E_UNSUPPORTED, "tokenizer.ggml.model: '%s' (the file has no vocabulary)", spec->model);
    } else {
        FAIL(SIFT_E_UNSUPPORTED, "tokenizer.ggml.model: tokenizer '%s' is not supported", spec->model);
    }
    if (spec->add_space_prefix >= 0) v->add_space_prefix = spec->add_space_prefix;
    if (spec->remove_extra_ws >= 0) v->remove_extra_ws = spec->remove_extra_ws;

    /* 2. tokens */
    if (spec->n_tokens <= 0 || spec->n_tokens > INT32_MAX - 1)
        FAIL(SIFT_E_FORMAT, "tokenizer.ggml.tokens: %lld tokens", (long long)spec->n_tokens);
    v->n_tokens = (int32_t)spec->n_tokens;
    if (spec->scores && spec->n_scores < spec->n_tokens)
        FAIL(SIFT_E_FORMAT, "tokenizer.ggml.scores: %lld scores for %d tokens", (long long)spec->n_scores, v->n_tokens);
    if (spec->iscores && spec->n_scores < spec->n_tokens)
        FAIL(SIFT_E_FORMAT, "tokenizer.ggml.scores: %lld scores for %d tokens", (long long)spec->n_scores, v->n_tokens);
    if (spec->types && spec->n_types < spec->n_tokens)
        FAIL(SIFT_E_FORMAT, "tokenizer.ggml.token_type: %lld types for %d tokens", (long long)spec->n_types, v->n_tokens);
    size_t total = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) total += spec_text_len(spec, i);
    if (sift__strtab_init(&v->strs, v->n_tokens + (int32_t)(spec->n_merges > v->n_tokens ? v->n_tokens : spec->n_merges),
                         total + (size_t)v->n_tokens + 16) != 0)
        FAIL(SIFT_E_NOMEM, "out of memory");
    v->score = malloc(sizeof *v->score * (size_t)v->n_tokens);
    v->attr = malloc(sizeof *v->attr * (size_t)v->n_tokens);
    if (!v->score || !v->attr) FAIL(SIFT_E_NOMEM, "out of memory");
    for (int32_t i = 0; i < v->n_tokens; i++) {
        const char *text = spec->text[i];
        size_t len = spec_text_len(spec, i);
        char empty[32];
        if (len == 0) {
            snprintf(empty, sizeof empty, "[EMPTY_%d]", i);
            text = empty;
            len = strlen(empty);
        }
        int added;
        int32_t id = sift__strtab_intern(&v->strs, text, len, &added);
        if (id < 0) FAIL(SIFT_E_NOMEM, "out of memory");
        if (!added)
            FAIL(SIFT_E_FORMAT, "tokenizer.ggml.tokens: duplicate token '%.*s' at ids %d and %d", (int)(len > 40 ? 40 : len),
                 text, id, i);
        if ((int32_t)len > v->max_token_len) v->max_token_len = (int32_t)len;
        v->score[i] = spec->scores ? spec->scores[i] : spec->iscores ? (float)spec->iscores[i] : 0.0f;
        uint16_t a = SIFT_VATTR_NORMAL;
        if (spec->types) {
            switch (spec->types[i]) {
            case 1: a = SIFT_VATTR_NORMAL; break;
            case 2: a = SIFT_VATTR_UNKNOWN; break;
            case 3: a = SIFT_VATTR_CONTROL; break;
            case 4: a = SIFT_VATTR_USER_DEFINED; break;
            case 5: a = SIFT_VATTR_UNUSED; break;
            case 6: a = SIFT_VATTR_BYTE; break;
            default: a = 0; break; /* undefined */
            }
        }
        v->attr[i] = a;
    }

    /* 3. tokenizer tables */
    if (v->type == SIFT_VOCAB_BPE) {
        if ((rc = build_merges(v, spec, err))) goto fail;
        v->pretok = sift__pretok_new(v->pre_def->regexes, err);
        if (!v->pretok) {
            rc = err ? err->status : SIFT_E_INVAL;
            goto fail;
        }
    }
    build_byte_tables(v);
    if (v->type == SIFT_VOCAB_SPM) v->spm_split = spm_split_safe(v);

    /* 4. newline token, before any special token is known */
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = SIFT_TOKEN_NULL;
    v->eot = v->eom = SIFT_TOKEN_NULL;
    v->pad = default_or_null(v, d_pad);
    if (v->type == SIFT_VOCAB_SPM) {
        v->nl = v->byte_token['\n'] >= 0 ? v->byte_token['\n'] : v->pad;
    } else if (v->type == SIFT_VOCAB_WPM) {
        v->nl = v->pad;
    } else {
        sift__tokbuf nl = {0};
        if ((rc = sift__vocab_tokenize_buf(v, "\n", 1, 0, &nl))) {
            free(nl.ids);
            FAIL(rc, "tokenizing the newline token failed");
        }
        v->nl = nl.n ? nl.ids[0] : v->pad;
        free(nl.ids);
    }

    /* 5. special ids: defaults (out of range -> none), then the metadata */
    v->bos = default_or_null(v, d_bos);
    v->eos = default_or_null(v, d_eos);
    v->unk = default_or_null(v, d_unk);
    v->sep = default_or_null(v, d_sep);
    v->mask = default_or_null(v, d_mask);
    sift_token *slot[SIFT_VKEY_COUNT] = {&v->bos,     &v->eos,     &v->eot,     &v->eom,     &v->unk,     &v->sep,
                                         &v->pad,     &v->mask,    &v->fim_pre, &v->fim_suf, &v->fim_mid, &v->fim_pad,
                                         &v->fim_rep, &v->fim_sep, &v->fim_pre, &v->fim_suf, &v->fim_mid};
    for (int k = 0; k < SIFT_VKEY_COUNT; k++) {
        int64_t id = spec->ids[k];
        if (id >= 0 && id < v->n_tokens) *slot[k] = (sift_token)id; /* else: "bad special token", keep */
    }
    if (spec->add_bos >= 0) v->add_bos = spec->add_bos;
    if (v->bpe_chars) v->add_bos = true; /* llama.cpp overrides a false add_bos_token for gemma4 */
    if (spec->add_eos >= 0) v->add_eos = spec->add_eos;
    if (spec->add_sep >= 0) v->add_sep = spec->add_sep;
    if (v->add_bos && v->bos == SIFT_TOKEN_NULL)
        FAIL(SIFT_E_FORMAT, "tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
    if (v->add_eos && v->eos == SIFT_TOKEN_NULL)
        FAIL(SIFT_E_FORMAT, "tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");
    /* add_sep without a SEP id is accepted, as llama.cpp accepts it (only WordPiece adds SEP) */
    v->lowercase = spec->lowercase >= 0 ? spec->lowercase : true;
    v->strip_accents = spec->strip_accents >= 0 ? spec->strip_accents : v->lowercase;

    /* 6. tokens recognised by their text, unused control tokens, end of generation */
    detect_by_text(v, &v->eot, eot_texts);
    detect_by_text(v, &v->eom, eom_texts);
    detect_by_text(v, &v->fim_pre, fim_pre_texts);
    detect_by_text(v, &v->fim_suf, fim_suf_texts);
    detect_by_text(v, &v->fim_mid, fim_mid_texts);
    detect_by_text(v, &v->fim_pad, fim_pad_texts);
    detect_by_text(v, &v->fim_rep, fim_rep_texts);
    detect_by_text(v, &v->fim_sep, fim_sep_texts);
    for (sift_token t = 0; t < v->n_tokens; t++) {
        if (!(v->attr[t] & SIFT_VATTR_CONTROL)) continue;
        size_t len;
        const char *text = sift__strtab_str(&v->strs, t, &len);
        for (size_t i = 0; i + 6 <= len; i++)
            if (!memcmp(text + i, "unused", 6)) {
                v->attr[t] |= SIFT_VATTR_UNUSED;
                break;
            }
    }
    if (build_eog(v)) FAIL(SIFT_E_NOMEM, "out of memory");

    /* 7. special tokens for partitioning; 8. pieces; 9. per-model fixes */
    if (build_specials(v)) FAIL(SIFT_E_NOMEM, "out of memory");
    if (build_pieces(v)) FAIL(SIFT_E_NOMEM, "out of memory");
    model_attr_fixes(v);

    /* tokens the model asks never to be sampled (Gemma 4's image and audio placeholders) */
    if (spec->n_suppress > 0) {
        if (spec->n_suppress > INT32_MAX || !(v->suppress = malloc(sizeof *v->suppress * (size_t)spec->n_suppress)))
            FAIL(SIFT_E_NOMEM, "out of memory");
        for (int64_t i = 0; i < spec->n_suppress; i++)
            if (spec->suppress[i] >= 0 && spec->suppress[i] < v->n_tokens) v->suppress[v->n_suppress++] = spec->suppress[i];
    }

    v->view_attr = malloc((size_t)v->n_tokens);
    if (!v->view_attr) FAIL(SIFT_E_NOMEM, "out of memory");
    for (sift_token t = 0; t < v->n_tokens; t++) {
        uint16_t a = v->attr[t];
        uint8_t f = 0;
        if (a & SIFT_VATTR_NORMAL) f |= SIFT_TOKEN_ATTR_NORMAL;
        if (a & SIFT_VATTR_CONTROL) f |= SIFT_TOKEN_ATTR_CONTROL;
        if (a & SIFT_VATTR_BYTE) f |= SIFT_TOKEN_ATTR_BYTE;
        if (a & SIFT_VATTR_USER_DEFINED) f |= SIFT_TOKEN_ATTR_USER;
        if (a & SIFT_VATTR_UNKNOWN) f |= SIFT_TOKEN_ATTR_UNKNOWN;
        if (sift_vocab_is_eog(v, t)) f |= SIFT_TOKEN_ATTR_EOG;
        v->view_attr[t] = f;
    }
    for (int32_t i = 0; i < v->n_suppress; i++) v->view_attr[v->suppress[i]] |= SIFT_TOKEN_ATTR_SUPPRESS;
    /* never 0 (a hand-made view's "none"), never reused: the vocabulary is immutable from
     * here on, so the number names its view's contents for as long as the process lives */
    static _Atomic uint64_t identities;
    v->identity = atomic_fetch_add(&identities, 1) + 1;
    return v;
#undef FAIL
fail:
    (void)rc;
    sift_vocab_free(v);
    return NULL;
}

/* ---- accessors ---------------------------------------------------------------------------- */

sift_vocab_type sift_vocab_get_type(const sift_vocab *v) { return v ? v->type : SIFT_VOCAB_NONE; }
const char *sift_vocab_model_name(const sift_vocab *v) { return v ? v->model : ""; }
const char *sift_vocab_pre_name(const sift_vocab *v) { return v ? v->pre : ""; }
int32_t sift_vocab_n_tokens(const sift_vocab *v) { return v ? v->n_tokens : 0; }
int64_t sift_vocab_n_merges(const sift_vocab *v) { return v ? v->n_merges : 0; }
sift_token sift_vocab_bos(const sift_vocab *v) { return v ? v->bos : SIFT_TOKEN_NULL; }
sift_token sift_vocab_eos(const sift_vocab *v) { return v ? v->eos : SIFT_TOKEN_NULL; }
sift_token sift_vocab_eot(const sift_vocab *v) { return v ? v->eot : SIFT_TOKEN_NULL; }
sift_token sift_vocab_eom(const sift_vocab *v) { return v ? v->eom : SIFT_TOKEN_NULL; }
sift_token sift_vocab_unk(const sift_vocab *v) { return v ? v->unk : SIFT_TOKEN_NULL; }
sift_token sift_vocab_sep(const sift_vocab *v) { return v ? v->sep : SIFT_TOKEN_NULL; }
sift_token sift_vocab_pad(const sift_vocab *v) { return v ? v->pad : SIFT_TOKEN_NULL; }
sift_token sift_vocab_nl(const sift_vocab *v) { return v ? v->nl : SIFT_TOKEN_NULL; }
sift_token sift_vocab_fim_pre(const sift_vocab *v) { return v ? v->fim_pre : SIFT_TOKEN_NULL; }
sift_token sift_vocab_fim_suf(const sift_vocab *v) { return v ? v->fim_suf : SIFT_TOKEN_NULL; }
sift_token sift_vocab_fim_mid(const sift_vocab *v) { return v ? v->fim_mid : SIFT_TOKEN_NULL; }
sift_token sift_vocab_fim_pad(const sift_vocab *v) { return v ? v->fim_pad : SIFT_TOKEN_NULL; }
sift_token sift_vocab_fim_rep(const sift_vocab *v) { return v ? v->fim_rep : SIFT_TOKEN_NULL; }
sift_token sift_vocab_fim_sep(const sift_vocab *v) { return v ? v->fim_sep : SIFT_TOKEN_NULL; }
bool sift_vocab_add_bos(const sift_vocab *v) { return v && v->add_bos; }
bool sift_vocab_add_eos(const sift_vocab *v) { return v && v->add_eos; }

const sift_token *sift_vocab_eog(const sift_vocab *v, int32_t *n)
{
    if (n) *n = v ? v->n_eog : 0;
    return v ? v->eog : NULL;
}

const sift_token *sift_vocab_suppress_tokens(const sift_vocab *v, int32_t *n)
{
    if (n) *n = v ? v->n_suppress : 0;
    return v && v->n_suppress ? v->suppress : NULL;
}

bool sift_vocab_is_eog(const sift_vocab *v, sift_token t)
{
    if (!v || t == SIFT_TOKEN_NULL) return false;
    int32_t lo = 0, hi = v->n_eog;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (v->eog[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return lo < v->n_eog && v->eog[lo] == t;
}

bool sift_vocab_is_control(const sift_vocab *v, sift_token t)
{
    return v && sift__vocab_valid_id(v, t) && (v->attr[t] & SIFT_VATTR_CONTROL);
}

const char *sift_vocab_token_text(const sift_vocab *v, sift_token t, size_t *len)
{
    if (!v || !sift__vocab_valid_id(v, t)) {
        if (len) *len = 0;
        return NULL;
    }
    return sift__strtab_str(&v->strs, t, len);
}

float sift_vocab_token_score(const sift_vocab *v, sift_token t)
{
    return v && sift__vocab_valid_id(v, t) ? v->score[t] : NAN;
}

uint32_t sift_vocab_token_attr(const sift_vocab *v, sift_token t)
{
    return v && sift__vocab_valid_id(v, t) ? v->attr[t] : 0;
}

static int32_t view_tokenize(void *ctx, const char *text, size_t len, sift_token *out, int32_t cap)
{
    return sift_tokenize((const sift_vocab *)ctx, text, len, out, cap, false, false);
}

sift_status sift_vocab_view_get(const sift_vocab *v, sift_vocab_view *view)
{
    if (!v || !view) return SIFT_E_INVAL;
    view->n_tokens = v->n_tokens;
    view->piece = v->piece_ptr;
    view->piece_len = v->piece_len;
    view->attr = v->view_attr;
    view->tokenize = view_tokenize;
    view->tokenize_ctx = (void *)v;
    view->identity = v->identity;
    return SIFT_OK;
}
