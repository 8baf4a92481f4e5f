/*
 * refdata.h - reading ../shared/reference/model/ (llama.cpp's outputs on the shared
 * models) for the runtime tests: the per-model JSON (prompt token ids, greedy and sampled
 * continuations) and the SLOG logits files. Header-only, for tests.
 */
#ifndef SIFT_TESTS_REFDATA_H
#define SIFT_TESTS_REFDATA_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_MAX_PROMPTS 8
#define REF_N_GEN 64

typedef struct ref_prompt {
    char id[32];
    int n_tokens;
    int n_gen;                       /* generated ids stored (64 in the shared reference) */
    int32_t tokens[512];
    int logits_first, logits_last; /* prompt positions stored in the prompt SLOG */
    int32_t greedy[REF_N_GEN];
    int32_t sampled[REF_N_GEN];
    float greedy_margin[REF_N_GEN];  /* top1 - top2 at each greedy step */
    float sampled_margin[REF_N_GEN];
    char text[2048];                 /* the prompt text */
    char greedy_text[1024];          /* the continuations' exact bytes (text_hex) */
    int greedy_text_len;
    char sampled_text[1024];
    int sampled_text_len;
} ref_prompt;

typedef struct ref_model {
    char stem[64];
    int n_vocab;
    int n_prompts;
    ref_prompt prompts[REF_MAX_PROMPTS];
} ref_model;

/* Running under valgrind (its preload library is in LD_PRELOAD)? The heavy differential
 * tests then run every code path on fewer prompts and steps: valgrind looks for memory
 * errors, which repetitions do not add, and the memcheck pass must stay within CI's time. */
static inline bool ref_under_valgrind(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload");
}

static inline const char *ref_shared(void)
{
    const char *root = getenv("SIFT_SHARED");
    return root ? root : "../shared";
}

static inline char *ref_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    if (len) *len = (size_t)n;
    return buf;
}

static inline void ref_ids(const cJSON *arr, int32_t *out, int cap)
{
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) if (i < cap) out[i++] = (int32_t)e->valuedouble;
}

static inline void ref_floats(const cJSON *arr, float *out, int cap)
{
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) if (i < cap) out[i++] = (float)e->valuedouble;
}

static inline int ref_hex(const char *hex, char *out, int cap)
{
    int n = 0;
    for (; hex && hex[0] && hex[1] && n < cap; hex += 2) {
        unsigned v;
        if (sscanf(hex, "%2x", &v) != 1) break;
        out[n++] = (char)v;
    }
    return n;
}

static inline int ref_count(const cJSON *arr)
{
    return cJSON_GetArraySize(arr);
}

/* Load DIR/<stem>.json (model_ref's output); returns 0 on success. */
static inline int ref_load_dir(const char *dir, const char *stem, ref_model *m)
{
    char path[2200];
    snprintf(path, sizeof path, "%s/%s.json", dir, stem);
    char *text = ref_slurp(path, NULL);
    if (!text) return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return -1;
    memset(m, 0, sizeof *m);
    snprintf(m->stem, sizeof m->stem, "%s", stem);
    m->n_vocab = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "model"), "n_vocab")->valueint;
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(root, "prompts"))
    {
        if (m->n_prompts == REF_MAX_PROMPTS) break;
        ref_prompt *rp = &m->prompts[m->n_prompts++];
        snprintf(rp->id, sizeof rp->id, "%s", cJSON_GetObjectItem(p, "id")->valuestring);
        rp->n_tokens = cJSON_GetObjectItem(p, "n_tokens")->valueint;
        ref_ids(cJSON_GetObjectItem(p, "tokens"), rp->tokens, 512);
        const cJSON *lp = cJSON_GetObjectItem(p, "prompt_logits_positions");
        rp->logits_first = cJSON_GetArrayItem(lp, 0)->valueint;
        rp->logits_last = cJSON_GetArrayItem(lp, 1)->valueint;
        const cJSON *g = cJSON_GetObjectItem(p, "greedy"), *s = cJSON_GetObjectItem(p, "sampled");
        ref_ids(cJSON_GetObjectItem(g, "ids"), rp->greedy, REF_N_GEN);
        rp->n_gen = ref_count(cJSON_GetObjectItem(g, "ids"));
        ref_ids(cJSON_GetObjectItem(s, "ids"), rp->sampled, REF_N_GEN);
        ref_floats(cJSON_GetObjectItem(g, "step_logits_top1_minus_top2"), rp->greedy_margin, REF_N_GEN);
        ref_floats(cJSON_GetObjectItem(s, "step_logits_top1_minus_top2"), rp->sampled_margin, REF_N_GEN);
        snprintf(rp->text, sizeof rp->text, "%s", cJSON_GetObjectItem(p, "text")->valuestring);
        rp->greedy_text_len = ref_hex(cJSON_GetObjectItem(g, "text_hex")->valuestring, rp->greedy_text, sizeof rp->greedy_text);
        rp->sampled_text_len = ref_hex(cJSON_GetObjectItem(s, "text_hex")->valuestring, rp->sampled_text, sizeof rp->sampled_text);
    }
    cJSON_Delete(root);
    return 0;
}

/* The shared reference: ../shared/reference/model/<stem>.json */
static inline int ref_load(const char *stem, ref_model *m)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/reference/model", ref_shared());
    return ref_load_dir(dir, stem, m);
}

/* A SLOG file DIR/<stem>.<prompt>.<kind>.slog: rows of n_vocab floats. NULL when missing
 * or malformed. */
static inline float *ref_slog_dir(const char *dir, const char *stem, const char *prompt, const char *kind, int *n_vocab,
                                  int *n_rows)
{
    char path[2400];
    snprintf(path, sizeof path, "%s/%s.%s.%s.slog", dir, stem, prompt, kind);
    size_t len;
    char *buf = ref_slurp(path, &len);
    if (!buf) return NULL;
    uint32_t h[3];
    if (len < 16 || memcmp(buf, "SLOG", 4) != 0) {
        free(buf);
        return NULL;
    }
    memcpy(h, buf + 4, sizeof h);
    if (h[0] != 1 || len != 16 + (size_t)h[1] * h[2] * 4) {
        free(buf);
        return NULL;
    }
    float *rows = malloc((size_t)h[1] * h[2] * sizeof(float));
    memcpy(rows, buf + 16, (size_t)h[1] * h[2] * sizeof(float));
    free(buf);
    *n_vocab = (int)h[1];
    *n_rows = (int)h[2];
    return rows;
}

static inline float *ref_slog(const char *stem, const char *prompt, const char *kind, int *n_vocab, int *n_rows)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/reference/model", ref_shared());
    return ref_slog_dir(dir, stem, prompt, kind, n_vocab, n_rows);
}

static inline const char *ref_model_path(const char *stem, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/models/%s.gguf", ref_shared(), stem);
    return buf;
}

#endif
