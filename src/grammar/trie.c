/*
 * trie.c - build the preorder vocabulary trie (see trie.h).
 *
 * Sort the token ids by text, then emit nodes in one pass: a token shares its first
 * lcp(previous token) bytes with nodes already emitted, so only the rest become new nodes;
 * nodes deeper than that common prefix are closed (their subtree ends here). The same pass
 * knows the path of each token (open[]), which is all the slice flags need: a node's flag is
 * the AND, over the tokens through it, of "the text after this depth is C_k characters".
 */
#include <stdlib.h>

#include "core/status.h"
#include "grammar/share.h"
#include "grammar/trie.h"


static int tok_cmp(const sift__gx_vocab *v, uint32_t x, uint32_t y)
{
    uint32_t lx = v->off[x + 1] - v->off[x], ly = v->off[y + 1] - v->off[y];
    int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* JSON string contents without escapes: the converters' char class [^"\\\x7F\x00-\x1F]
 * (surrogates never decode, so including them changes nothing). */
static const uint32_t slice_json_char[] = {0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7E, 0x80, 0x10FFFF};
/* The same less U+2028..U+2029: a regex "." inside a string pattern (the converters write
 * [^"\\\x00-\x1F\x0A\x0D\u2028-\u2029] for it, ".+" as char* (.)+ char*). A state looping on
 * that class does not step alike on every C_0 character, so without this slice it walked
 * the whole string part of the trie (MaskBench: 300k-node masks, ~5-20 ms, in pattern
 * strings). */
static const uint32_t slice_json_dot[] = {0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7E, 0x80, 0x2027, 0x202A, 0x10FFFF};
/* Host name letters, digits and '-': the label chains of the converters' hostname, email and
 * uri formats ( [A-Za-z0-9-]{0,60} [A-Za-z0-9] ). Every typed token moves such a chain to a
 * new grammar position, so nothing is cached across tokens, and each mask walked all the
 * alphanumeric tokens of the trie (~50k nodes) and resumed ~34k escapes below (the chain
 * may end after every character): 5-10 ms masks, MaskBench's worst. Inside a label every
 * character of this class steps the chain alike (a letter also ends it - an escape, which
 * a slice need not record), so a chain position takes those subtrees whole. */
static const uint32_t slice_host[] = {0x2D, 0x2D, 0x30, 0x39, 0x41, 0x5A, 0x61, 0x7A};
const sift__gx_slice sift__gx_slices[GX_N_SLICES] = {
    {slice_json_char, sizeof slice_json_char / sizeof slice_json_char[0] / 2},
    {slice_json_dot, sizeof slice_json_dot / sizeof slice_json_dot[0] / 2},
    {slice_host, sizeof slice_host / sizeof slice_host[0] / 2},
};

static bool in_slice(const sift__gx_slice *sl, uint32_t cp)
{
    for (uint32_t r = 0; r < sl->n_ranges; r++)
        if (cp >= sl->ranges[2 * r] && cp <= sl->ranges[2 * r + 1]) return true;
    return false;
}

static bool slice_meets(const sift__gx_slice *sl, uint32_t lo, uint32_t hi)
{
    for (uint32_t r = 0; r < sl->n_ranges; r++)
        if (lo <= sl->ranges[2 * r + 1] && sl->ranges[2 * r] <= hi) return true;
    return false;
}

/* good[d] (bit k) := s[d..len) is UTF-8 characters of slice k, the last of which may be
 * unfinished if it can still complete to one of the slice; for d in [0, len]. chars[d] :=
 * how many characters that is, the unfinished one included (when some bit of good[d] is
 * set; capped at 255). Byte-level vocabularies split characters across tokens, and a
 * trailing partial character would otherwise clear the flag of every node above it. A
 * walk accepts such a token exactly when the partial character can still complete to a
 * class some stack accepts; in a state that steps live on every character of the slice,
 * every symbol meeting the slice is such a class. */
static void slice_suffixes(const uint8_t *s, uint32_t len, uint8_t *good, uint8_t *chars)
{
    good[len] = (1u << GX_N_SLICES) - 1;
    chars[len] = 0;
    for (uint32_t d = len; d-- > 0;) {
        good[d] = 0;
        chars[d] = 0;
        sift__gx_utf8 u = {0};
        for (uint32_t q = d; q < len; q++) {
            int32_t r = sift__gx_utf8_feed(&u, s[q]);
            if (r == GX_UTF8_MORE) {
                if (q + 1 == len) { /* unfinished at the end of the token */
                    uint32_t lo, hi;
                    sift__gx_utf8_range(&u, &lo, &hi);
                    for (uint32_t k = 0; k < GX_N_SLICES; k++)
                        if (slice_meets(&sift__gx_slices[k], lo, hi)) good[d] |= (uint8_t)(1u << k);
                    chars[d] = 1;
                }
                continue;
            }
            if (r >= 0) {
                for (uint32_t k = 0; k < GX_N_SLICES; k++)
                    if (in_slice(&sift__gx_slices[k], (uint32_t)r)) good[d] |= good[q + 1] & (1u << k);
                chars[d] = chars[q + 1] < 255 ? (uint8_t)(chars[q + 1] + 1) : 255;
            }
            break;
        }
    }
}

void sift__gx_vocab_free(sift__gx_vocab *v)
{
    sift__gx_free(v->bytes);
    sift__gx_free(v->off);
    sift__gx_free(v->flags);
    sift__gx_free(v->normal);
    sift__gx_free(v->eog);
    sift__gx_free(v->node);
    sift__gx_free(v->sorted);
    sift__gx_free(v->slice_all);
    sift__gx_free(v->slice_len);
    sift__gx_free(v->sorted_chars);
    sift__gx_free(v->slice_first);
    sift__gx_free(v->first_nodes);
    sift__gx_free(v->first_bits);
    sift__gx_free(v->below_bytes);
    sift__gx_free(v->below_len);
    sift__gx_free(v->len_bits);
    sift__gx_free(v->long_first);
    sift__gx_free(v->c0_len_bits);
    sift__gx_free(v->c0_bits);
    sift__gx_free(v->c0_long);
    sift__gx_free(v->c0_first);
    sift__gx_free(v->c0_node);
    sift__gx_share_free(v->share);
    memset(v, 0, sizeof *v);
}

/* merge sort of token ids by text (qsort has no context argument and qsort_r is not C11) */
static void msort(const sift__gx_vocab *v, uint32_t *a, uint32_t *tmp, uint32_t n)
{
    if (n <= 16) {
        for (uint32_t i = 1; i < n; i++) {
            uint32_t x = a[i], j = i;
            while (j > 0 && tok_cmp(v, a[j - 1], x) > 0) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = x;
        }
        return;
    }
    uint32_t h = n / 2;
    msort(v, a, tmp, h);
    msort(v, a + h, tmp, n - h);
    uint32_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = tok_cmp(v, a[i], a[j]) <= 0 ? a[i++] : a[j++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, (size_t)n * sizeof *a);
}

/* Bytes sorted token k shares with sorted token k - 1 (its depth of divergence in the trie). */
static uint32_t common_prefix(const sift__gx_vocab *v, uint32_t k, const uint8_t *s, uint32_t len)
{
    uint32_t lcp = 0;
    if (k) {
        uint32_t pl;
        const uint8_t *ps = sift__gx_vocab_text(v, v->sorted[k - 1], &pl);
        while (lcp < len && lcp < pl && s[lcp] == ps[lcp]) lcp++;
    }
    return lcp;
}

/* Close the node at depth d of the current path (its subtree ends before node nn): its byte
 * and the bytes below it go into its parent's below_bytes, its depth of bytes below plus one
 * into the parent's below_len (trie.h). */
static void close_node(sift__gx_vocab *v, const uint32_t *open, uint32_t d, uint32_t nn)
{
    uint32_t c = open[d], p = open[d - 1];
    uint8_t b = v->node[c].byte;
    v->node[c].end = nn;
    v->below_bytes[p][0] |= v->below_bytes[c][0];
    v->below_bytes[p][1] |= v->below_bytes[c][1];
    if (b < 0x80) v->below_bytes[p][b >> 6] |= (uint64_t)1 << (b & 63);
    else v->below_bytes[p][0] |= 1;
    uint32_t l = (uint32_t)v->below_len[c] + 1;
    if (l > v->below_len[p]) v->below_len[p] = (uint8_t)(l < 255 ? l : 255);
}

static int cmp_longer(const void *a, const void *b)
{
    uint32_t x = ((const uint32_t *)a)[1], y = ((const uint32_t *)b)[1];
    return x > y ? -1 : x < y;
}

/* slice_first and first_bits (trie.h). A node's text is the first depth bytes of the token
 * that made it (sorted[tok_begin]). */
static int build_first(sift__gx_vocab *v)
{
    v->slice_first = sift__gx_calloc(v->n_nodes, 1);
    v->first_bits = sift__gx_calloc((size_t)GX_N_SLICES * v->n_words, sizeof *v->first_bits);
    if (!v->slice_first || !v->first_bits) return SIFT_E_NOMEM;
    for (uint32_t i = 1; i < v->n_nodes; i++) {
        const sift__gx_trie_node *nd = &v->node[i];
        if (nd->depth > 4 || !v->slice_all[i] || nd->end <= i + 1) continue;
        uint32_t len;
        const uint8_t *s = sift__gx_vocab_text(v, v->sorted[nd->tok_begin], &len);
        sift__gx_utf8 u = {0};
        int32_t cp = GX_UTF8_MORE;
        for (uint32_t d = 0; d < nd->depth && cp == GX_UTF8_MORE; d++) {
            cp = sift__gx_utf8_feed(&u, s[d]);
            if (cp >= 0 && d + 1 != nd->depth) cp = GX_UTF8_BAD; /* more than one character */
        }
        if (cp < 0) continue;
        for (uint32_t k = 0; k < GX_N_SLICES; k++) {
            if (!(v->slice_all[i] >> k & 1) || !in_slice(&sift__gx_slices[k], (uint32_t)cp)) continue;
            v->slice_first[i] |= (uint8_t)(1u << k);
            uint32_t lo, hi;
            sift__gx_trie_below(v, i, &lo, &hi);
            uint64_t *bits = v->first_bits + (size_t)k * v->n_words;
            for (uint32_t q = lo; q < hi; q++) sift__gx_bit_set(bits, v->sorted[q]);
        }
        if (v->slice_first[i]) v->n_first_nodes++;
    }
    /* len_bits and long_first from first_bits[0] */
    v->len_bits = sift__gx_calloc((size_t)(GX_FIRST_LEN_MAX + 1) * v->n_words, sizeof *v->len_bits);
    if (!v->len_bits) return SIFT_E_NOMEM;
    uint32_t n_long = 0;
    for (uint32_t q = 0; q < v->n_sorted; q++) {
        uint32_t t = v->sorted[q];
        if (!sift__gx_bit(v->first_bits, t)) continue;
        if (v->sorted_chars[q] <= GX_FIRST_LEN_MAX) sift__gx_bit_set(v->len_bits + (size_t)v->sorted_chars[q] * v->n_words, t);
        else n_long++;
    }
    for (uint32_t l = 1; l <= GX_FIRST_LEN_MAX; l++)
        for (uint32_t w = 0; w < v->n_words; w++) v->len_bits[(size_t)l * v->n_words + w] |= v->len_bits[(size_t)(l - 1) * v->n_words + w];
    v->long_first = sift__gx_malloc(((size_t)n_long + 1) * 2 * sizeof *v->long_first);
    if (!v->long_first) return SIFT_E_NOMEM;
    for (uint32_t q = 0; q < v->n_sorted; q++) {
        uint32_t t = v->sorted[q];
        if (!sift__gx_bit(v->first_bits, t) || v->sorted_chars[q] <= GX_FIRST_LEN_MAX) continue;
        v->long_first[2 * v->n_long_first] = t;
        v->long_first[2 * v->n_long_first + 1] = v->sorted_chars[q];
        v->n_long_first++;
    }
    qsort(v->long_first, v->n_long_first, 2 * sizeof *v->long_first, cmp_longer); /* longest first */
    v->first_nodes = sift__gx_malloc(((size_t)v->n_first_nodes + 1) * sizeof *v->first_nodes);
    if (!v->first_nodes) return SIFT_E_NOMEM;
    v->n_first_nodes = 0;
    for (uint32_t i = 1; i < v->n_nodes; i++)
        if (v->slice_first[i]) v->first_nodes[v->n_first_nodes++] = i;
    return SIFT_OK;
}

/* c0_len_bits, c0_long and c0_first (trie.h) from c0_bits, which the trie's own pass set
 * (slice_suffixes' good[0], bit 0). */
static int build_c0(sift__gx_vocab *v)
{
    size_t W = v->n_words;
    v->c0_len_bits = sift__gx_calloc((size_t)(GX_FIRST_LEN_MAX + 1) * W, sizeof *v->c0_len_bits);
    if (!v->c0_len_bits) return SIFT_E_NOMEM;
    uint32_t n_long = 0, n_first = 0, last_first = 0;
    for (int pass = 0; pass < 2; pass++) {
        n_long = n_first = last_first = 0;
        uint8_t last_text[4] = {0};
        for (uint32_t q = 0; q < v->n_sorted; q++) {
            uint32_t t = v->sorted[q], len;
            const uint8_t *s = sift__gx_vocab_text(v, t, &len);
            if (!sift__gx_bit(v->c0_bits, t)) continue;
            uint32_t fl = s[0] < 0x80 ? 1 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4;
            /* the node of its first character: the previous one's (sorted by text), or found
             * by walking down from the root */
            uint32_t c = last_first;
            if (!c || v->node[c].depth != fl || memcmp(last_text, s, fl)) {
                c = 0;
                for (uint32_t d = 0; d < fl; d++) { /* the child of c with byte s[d] */
                    uint32_t x = c + 1;
                    while (v->node[x].byte != s[d]) x = v->node[x].end;
                    c = x;
                }
                memcpy(last_text, s, fl);
            }
            if (pass == 0) {
                if (v->sorted_chars[q] <= GX_FIRST_LEN_MAX) sift__gx_bit_set(v->c0_len_bits + (size_t)v->sorted_chars[q] * W, t);
            } else {
                if (v->sorted_chars[q] > GX_FIRST_LEN_MAX) {
                    v->c0_long[2 * n_long] = t;
                    v->c0_long[2 * n_long + 1] = v->sorted_chars[q];
                }
                if (c != last_first) v->c0_first[n_first] = c;
            }
            n_long += v->sorted_chars[q] > GX_FIRST_LEN_MAX;
            n_first += c != last_first;
            last_first = c;
        }
        if (pass == 0) {
            v->c0_long = sift__gx_malloc(((size_t)n_long + 1) * 2 * sizeof *v->c0_long);
            v->c0_first = sift__gx_malloc(((size_t)n_first + 1) * sizeof *v->c0_first);
            if (!v->c0_long || !v->c0_first) return SIFT_E_NOMEM;
        }
    }
    v->n_c0_long = n_long;
    v->n_c0_first = n_first;
    /* c0_node: decode the path down the preorder, one decoder state per depth */
    v->c0_node = sift__gx_calloc(v->n_nodes, 1);
    sift__gx_utf8 *du = sift__gx_malloc(((size_t)v->max_depth + 1) * sizeof *du);
    uint8_t *dok = sift__gx_malloc((size_t)v->max_depth + 1); /* the path to depth d is C_0 so far (maybe unfinished) */
    if (!v->c0_node || !du || !dok) {
        sift__gx_free(du);
        sift__gx_free(dok);
        return SIFT_E_NOMEM;
    }
    du[0] = (sift__gx_utf8){0};
    dok[0] = 1;
    for (uint32_t i = 1; i < v->n_nodes; i++) {
        uint32_t d = v->node[i].depth;
        sift__gx_utf8 u = du[d - 1];
        int32_t r = dok[d - 1] ? sift__gx_utf8_feed(&u, v->node[i].byte) : GX_UTF8_BAD;
        dok[d] = r == GX_UTF8_MORE || (r >= 0 && in_slice(&sift__gx_slices[0], (uint32_t)r));
        du[d] = u;
        v->c0_node[i] = dok[d] && r >= 0;
    }
    sift__gx_free(du);
    sift__gx_free(dok);
    qsort(v->c0_long, v->n_c0_long, 2 * sizeof *v->c0_long, cmp_longer); /* longest first */
    for (uint32_t l = 1; l <= GX_FIRST_LEN_MAX; l++)
        for (uint32_t w = 0; w < W; w++) v->c0_len_bits[(size_t)l * W + w] |= v->c0_len_bits[(size_t)(l - 1) * W + w];
    return SIFT_OK;
}

int sift__gx_vocab_build(sift__gx_vocab *v, const sift_vocab_view *view, sift_error *err)
{
    memset(v, 0, sizeof *v);
    if (!view || view->n_tokens <= 0 || !view->piece || !view->piece_len)
        return sift__error_set(err, SIFT_E_INVAL, "grammar sampler: the vocabulary view is empty");
    int32_t n = view->n_tokens;
    v->n_tokens = n;
    v->n_words = sift__gx_words((uint32_t)n);
    uint64_t total = 0;
    for (int32_t t = 0; t < n; t++) total += view->piece_len[t] > GX_MAX_TOKEN_TEXT ? 0 : view->piece_len[t];
    if (total > UINT32_MAX / 2) return sift__error_set(err, SIFT_E_INVAL, "grammar sampler: vocabulary texts too large");
    v->bytes = sift__gx_malloc(total + 1);
    v->off = sift__gx_malloc(((size_t)n + 1) * sizeof *v->off);
    v->flags = sift__gx_calloc((size_t)n, 1);
    v->normal = sift__gx_calloc(v->n_words, sizeof *v->normal);
    v->sorted = sift__gx_malloc((size_t)n * sizeof *v->sorted);
    uint32_t *tmp = sift__gx_malloc((size_t)n * sizeof *tmp);
    if (!v->bytes || !v->off || !v->flags || !v->normal || !v->sorted || !tmp) goto nomem;
    uint32_t at = 0, n_trie = 0;
    for (int32_t t = 0; t < n; t++) {
        v->off[t] = at;
        uint32_t len = view->piece_len[t];
        const char *p = view->piece[t];
        bool eog = view->attr && (view->attr[t] & SIFT_TOKEN_ATTR_EOG);
        if (eog) v->flags[t] |= GX_TOK_EOG;
        if (len > GX_MAX_TOKEN_TEXT || (len && !p)) len = 0;
        if (len) memcpy(v->bytes + at, p, len);
        at += len;
        if (len == 0 || memchr(p, 0, len)) v->flags[t] |= GX_TOK_EXCLUDED;
        if (!v->flags[t]) {
            sift__gx_bit_set(v->normal, (uint32_t)t);
            v->sorted[n_trie++] = (uint32_t)t;
        }
        if (eog) v->n_eog++;
    }
    v->off[n] = at;
    v->eog = sift__gx_malloc((size_t)(v->n_eog ? v->n_eog : 1) * sizeof *v->eog);
    if (!v->eog) goto nomem;
    v->n_eog = 0;
    for (int32_t t = 0; t < n; t++)
        if (v->flags[t] & GX_TOK_EOG) v->eog[v->n_eog++] = (uint32_t)t;

    msort(v, v->sorted, tmp, n_trie);

    /* count nodes: 1 (root) + sum of (len - lcp with previous) */
    uint64_t nodes = 1;
    for (uint32_t k = 0; k < n_trie; k++) {
        uint32_t len;
        const uint8_t *s = sift__gx_vocab_text(v, v->sorted[k], &len);
        const uint32_t lcp = common_prefix(v, k, s, len);
        nodes += len - lcp;
        if (len > v->max_depth) v->max_depth = len;
    }
    if (nodes > UINT32_MAX / 2) return sift__gx_free(tmp), sift__error_set(err, SIFT_E_INVAL, "grammar sampler: vocabulary too large");
    v->n_nodes = (uint32_t)nodes;
    v->n_sorted = n_trie;
    v->node = sift__gx_calloc(nodes, sizeof *v->node);
    v->slice_all = sift__gx_malloc(nodes);
    v->slice_len = sift__gx_calloc(nodes, 1);
    v->sorted_chars = sift__gx_malloc(((size_t)n_trie + 1) * sizeof *v->sorted_chars);
    v->below_bytes = sift__gx_calloc(nodes, sizeof *v->below_bytes);
    v->below_len = sift__gx_calloc(nodes, 1);
    v->c0_bits = sift__gx_calloc(v->n_words, sizeof *v->c0_bits);
    /* open[d] = node at depth d on the current path */
    uint32_t *open = sift__gx_malloc(((size_t)v->max_depth + 1) * sizeof *open);
    uint8_t *good = sift__gx_malloc(2 * ((size_t)v->max_depth + 1));
    if (!v->node || !open || !good || !v->slice_all || !v->slice_len || !v->sorted_chars || !v->below_bytes || !v->below_len || !v->c0_bits) {
        sift__gx_free(open);
        sift__gx_free(good);
        goto nomem;
    }
    uint8_t *chars = good + v->max_depth + 1;
    memset(v->slice_all, (1u << GX_N_SLICES) - 1, nodes);
    open[0] = 0;
    uint32_t path_len = 0, nn = 1;
    for (uint32_t k = 0; k < n_trie; k++) {
        uint32_t len;
        const uint8_t *s = sift__gx_vocab_text(v, v->sorted[k], &len);
        const uint32_t lcp = common_prefix(v, k, s, len);
        /* close the nodes of the previous path deeper than lcp */
        while (path_len > lcp) close_node(v, open, path_len--, nn);
        for (uint32_t d = lcp; d < len; d++) {
            uint32_t id = nn++;
            v->node[id].byte = s[d];
            v->node[id].depth = (uint16_t)(d + 1);
            v->node[id].tok_begin = k;
            open[++path_len] = id;
        }
        uint32_t last = open[len];
        uint32_t nc = 0;
        for (uint32_t d = 0; d < len; d++) nc += (s[d] & 0xC0) != 0x80;
        v->sorted_chars[k] = (uint16_t)(nc < UINT16_MAX ? nc : UINT16_MAX);
        slice_suffixes(s, len, good, chars);
        if ((good[0] & 1) && nc >= 2) sift__gx_bit_set(v->c0_bits, v->sorted[k]); /* a C_0 token (build_c0) */
        for (uint32_t d = 0; d <= len; d++) {
            v->slice_all[open[d]] &= good[d];
            if (good[d] && chars[d] > v->slice_len[open[d]]) v->slice_len[open[d]] = chars[d];
        }
        if (v->node[last].tok_n == 0) v->node[last].tok_begin = k;
        if (v->node[last].tok_n == UINT16_MAX) {
            sift__gx_free(open);
            sift__gx_free(good);
            sift__gx_free(tmp);
            sift__gx_vocab_free(v);
            return sift__error_set(err, SIFT_E_INVAL, "grammar sampler: more than 65535 tokens share one text");
        }
        v->node[last].tok_n++;
    }
    while (path_len > 0) close_node(v, open, path_len--, nn);
    v->node[0].end = nn;
    for (uint32_t c = 1; c < nn; c = v->node[c].end) v->root_child[v->node[c].byte] = c;
    sift__gx_free(open);
    sift__gx_free(good);
    sift__gx_free(tmp);
    if (build_first(v) != SIFT_OK || build_c0(v) != SIFT_OK) goto nomem;
    if (!(v->share = sift__gx_share_new(v->n_words))) goto nomem;
    return SIFT_OK;
nomem:
    sift__gx_free(tmp);
    sift__gx_vocab_free(v);
    return sift__error_set(err, SIFT_E_NOMEM, "out of memory building the vocabulary trie");
}
