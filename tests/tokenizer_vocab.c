/*
 * tokenizer_vocab.c - the tokenizer against llama.cpp's recorded results (CTest driver,
 * registered by tokenizer.cmake; not a cmocka program).
 *
 *   tokenizer_vocab inp VOCAB.gguf EXPECTED.out LOSSY
 *     Splits VOCAB.gguf.inp on "\n__ggml_vocab_test__\n" as llama.cpp's test-tokenizer-0
 *     does, tokenizes each string with add_special = parse_special = false, and requires
 *     the ids of the same line of EXPECTED.out, exactly. Then the round trip
 *     detokenize(tokenize(s)) == s (remove_special = unparse_special = false): LOSSY lists
 *     the strings llama.cpp does not restore ("none", "1,5,9", or "!2,7" = all but 2 and 7;
 *     measured with tests/tokenizer_peer.c), and every other string must come back exactly
 *     - and these must not (same behaviour as llama.cpp, both ways).
 *
 *   tokenizer_vocab json MODEL.json MODELS_DIR
 *     For each prompt of ../shared/reference/model/MODEL.json: tokenize(text, add_special =
 *     true, parse_special = false) must equal its "tokens"; and for the greedy and sampled
 *     continuations, each token's piece (token_to_piece, special = false) must equal
 *     "pieces_hex", and their concatenation "text_hex".
 *
 * Exit status 0 = all equal, 1 = a difference (printed), 2 = missing data or bad usage.
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refdata.h"
#include "sift.h"

static void show(const char *label, const char *s, size_t n)
{
    printf("    %s: '", label);
    for (size_t i = 0; i < n && i < 100; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F) putchar(c);
        else printf("\\x%02x", c);
    }
    printf("%s'\n", n > 100 ? "..." : "");
}

/* Is index i in LOSSY ("none", "a,b,c", "!a,b,c")? */
static bool in_lossy(const char *spec, int i)
{
    if (!strcmp(spec, "none")) return false;
    bool negate = spec[0] == '!';
    const char *p = spec + negate;
    bool found = false;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        if (v == i) found = true;
        p = *end == ',' ? end + 1 : end;
    }
    return negate ? !found : found;
}

static int run_inp(const char *vocab_path, const char *out_path, const char *lossy)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.inp", vocab_path);
    size_t in_len, out_len;
    char *inp = ref_slurp(path, &in_len), *out = ref_slurp(out_path, &out_len);
    if (!inp || !out) {
        printf("missing test data: %s%s%s\n", inp ? "" : path, !inp && !out ? " and " : "", out ? "" : out_path);
        free(inp);
        free(out);
        return 2;
    }
    sift_error err = {0};
    sift_vocab *v = sift_vocab_load(vocab_path, &err);
    if (!v) {
        printf("%s: %s\n", vocab_path, err.msg);
        free(inp);
        free(out);
        return 1;
    }
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep);
    char *s = inp, *line = out, *inp_end = inp + in_len;
    int idx = 0, ok = 0, bad = 0, rt_ok = 0, rt_bad = 0, lossless = 0;
    sift_token *toks = malloc(sizeof *toks * (in_len + 16));
    char *detok = malloc(in_len * 4 + 64);
    while (s < inp_end) {
        char *e = strstr(s, sep);
        size_t len = e ? (size_t)(e - s) : (size_t)(inp_end - s);
        char *nl = line ? strchr(line, '\n') : NULL;
        if (!line || !*line) {
            printf("%s: no expected line for test %d\n", out_path, idx);
            bad++;
            break;
        }
        if (nl) *nl = 0;
        int32_t n = sift_tokenize(v, s, len, toks, (int32_t)in_len + 16, false, false);
        /* compare with the expected ids */
        bool same = n >= 0;
        int32_t k = 0;
        char *p = line;
        while (same) {
            char *end;
            long id = strtol(p, &end, 10);
            if (end == p) break;
            if (k >= n || toks[k] != id) same = false;
            k++;
            p = end;
        }
        if (same && k != n) same = false;
        if (same) {
            ok++;
        } else {
            bad++;
            printf("MISMATCH test %d\n", idx);
            show("text", s, len);
            printf("    expected:%s\n    sift:    ", line);
            for (int32_t j = 0; j < n; j++) printf(" %d", toks[j]);
            printf("\n");
        }
        /* round trip */
        int32_t d = n >= 0 ? sift_detokenize(v, toks, n, detok, (int32_t)(in_len * 4 + 64), false, false) : -1;
        bool restored = d == (int32_t)len && !memcmp(detok, s, len);
        lossless += restored;
        if (restored == !in_lossy(lossy, idx)) {
            rt_ok++;
        } else {
            rt_bad++;
            printf("ROUND TRIP test %d: sift %s it, llama.cpp %s\n", idx, restored ? "restores" : "does not restore",
                   restored ? "does not" : "does");
            show("text", s, len);
            if (d >= 0) show("detokenized", detok, (size_t)d);
        }
        idx++;
        line = nl ? nl + 1 : NULL;
        if (!e) break;
        s = e + sl;
    }
    printf("%s: %d/%d tokenizations equal to %s; round trip lossless for %d/%d (same as llama.cpp for %d/%d)\n",
           strrchr(vocab_path, '/') ? strrchr(vocab_path, '/') + 1 : vocab_path, ok, idx, out_path, lossless, idx,
           rt_ok, idx);
    free(toks);
    free(detok);
    free(inp);
    free(out);
    sift_vocab_free(v);
    return bad || rt_bad || idx == 0 ? 1 : 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* hex string -> bytes; returns length or -1 */
static int unhex(const char *hex, char *out, int cap)
{
    int n = 0;
    for (const char *p = hex; p[0] && p[1]; p += 2) {
        int a = hexval(p[0]), b = hexval(p[1]);
        if (a < 0 || b < 0 || n >= cap) return -1;
        out[n++] = (char)(a * 16 + b);
    }
    return n;
}

static int check_continuation(const sift_vocab *v, const cJSON *c, const char *where)
{
    const cJSON *ids = cJSON_GetObjectItem(c, "ids"), *pieces = cJSON_GetObjectItem(c, "pieces_hex"),
                *text_hex = cJSON_GetObjectItem(c, "text_hex");
    if (!cJSON_IsArray(ids) || !cJSON_IsArray(pieces) || !cJSON_IsString(text_hex)) {
        printf("%s: ids/pieces_hex/text_hex missing\n", where);
        return 2;
    }
    int bad = 0, n = cJSON_GetArraySize(ids);
    char all[65536], want_all[65536];
    int all_n = 0;
    for (int i = 0; i < n; i++) {
        sift_token t = (sift_token)cJSON_GetArrayItem(ids, i)->valueint;
        char got[512], want[512];
        int32_t k = sift_token_to_piece(v, t, got, sizeof got, 0, false);
        int w = unhex(cJSON_GetArrayItem(pieces, i)->valuestring, want, sizeof want);
        if (k != w || (k > 0 && memcmp(got, want, (size_t)k))) {
            printf("%s: piece of token %d (step %d) differs\n", where, t, i);
            bad++;
        }
        if (k > 0 && all_n + k < (int)sizeof all) {
            memcpy(all + all_n, got, (size_t)k);
            all_n += k;
        }
    }
    int wn = unhex(text_hex->valuestring, want_all, sizeof want_all);
    if (wn != all_n || memcmp(all, want_all, (size_t)all_n)) {
        printf("%s: concatenated pieces differ from text_hex\n", where);
        bad++;
    }
    return bad ? 1 : 0;
}

static int run_json(const char *json_path, const char *models_dir)
{
    size_t n;
    char *text = ref_slurp(json_path, &n);
    if (!text) {
        printf("missing test data: %s\n", json_path);
        return 2;
    }
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *model = cJSON_GetObjectItem(root, "model"), *prompts = cJSON_GetObjectItem(root, "prompts");
    const cJSON *file = model ? cJSON_GetObjectItem(model, "file") : NULL;
    if (!cJSON_IsString(file) || !cJSON_IsArray(prompts)) {
        printf("%s: no model.file or prompts\n", json_path);
        cJSON_Delete(root);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", models_dir, file->valuestring);
    sift_error err = {0};
    sift_vocab *v = sift_vocab_load(path, &err);
    if (!v) {
        printf("%s: %s\n", path, err.msg);
        cJSON_Delete(root);
        return 1;
    }
    int rc = 0, n_prompts = 0, n_ok = 0, n_cont = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, prompts)
    {
        const cJSON *id = cJSON_GetObjectItem(p, "id"), *ptext = cJSON_GetObjectItem(p, "text"),
                    *tokens = cJSON_GetObjectItem(p, "tokens");
        if (!cJSON_IsString(id) || !cJSON_IsString(ptext) || !cJSON_IsArray(tokens)) {
            printf("%s: a prompt lacks id/text/tokens\n", json_path);
            rc = 2;
            continue;
        }
        n_prompts++;
        size_t len = strlen(ptext->valuestring);
        sift_token toks[4096];
        int32_t k = sift_tokenize(v, ptext->valuestring, len, toks, 4096, true, false);
        bool same = k == cJSON_GetArraySize(tokens);
        for (int32_t i = 0; same && i < k; i++) same = toks[i] == cJSON_GetArrayItem(tokens, i)->valueint;
        if (same) {
            n_ok++;
        } else {
            printf("MISMATCH prompt '%s': %d tokens, expected %d\n", id->valuestring, k, cJSON_GetArraySize(tokens));
            rc = rc ? rc : 1;
        }
        static const char *const conts[] = {"greedy", "sampled"};
        for (int c = 0; c < 2; c++) {
            const cJSON *cont = cJSON_GetObjectItem(p, conts[c]);
            char where[256];
            snprintf(where, sizeof where, "prompt '%s' %s", id->valuestring, conts[c]);
            if (!cont) continue;
            int r = check_continuation(v, cont, where);
            if (r) rc = rc ? rc : r;
            else n_cont++;
        }
    }
    printf("%s: %d/%d prompt tokenizations equal; %d continuations' pieces and text equal\n", file->valuestring, n_ok,
           n_prompts, n_cont);
    sift_vocab_free(v);
    cJSON_Delete(root);
    return rc ? rc : n_prompts ? 0 : 2;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "inp")) return run_inp(argv[2], argv[3], argv[4]);
    if (argc == 4 && !strcmp(argv[1], "json")) return run_json(argv[2], argv[3]);
    fprintf(stderr, "usage: tokenizer_vocab inp VOCAB.gguf EXPECTED.out LOSSY | json MODEL.json MODELS_DIR\n");
    return 2;
}
