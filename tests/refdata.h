/*
 * refdata.h - reading ../shared/reference/model/ (llama.cpp's outputs on the shared
 * models) for the runtime tests: the per-model JSON (prompt token ids, greedy and sampled
 * continuations) and the SLOG logits files. Header-only, for tests.
 */
#ifndef SIFT_TESTS_REFDATA_H
#define SIFT_TESTS_REFDATA_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_MAX_PROMPTS 8
#define REF_N_GEN 64

typedef struct ref_prompt {
    char id[32];
    int n_tokens;
    int32_t tokens[512];
    int logits_first, logits_last; /* prompt positions stored in the prompt SLOG */
    int32_t greedy[REF_N_GEN];
    int32_t sampled[REF_N_GEN];
    float greedy_margin[REF_N_GEN];  /* top1 - top2 at each greedy step */
    float sampled_margin[REF_N_GEN];
} ref_prompt;

typedef struct ref_model {
    char stem[64];
    int n_vocab;
    int n_prompts;
    ref_prompt prompts[REF_MAX_PROMPTS];
} ref_model;

static const char *ref_shared(void)
{
    const char *root = getenv("SIFT_SHARED");
    return root ? root : "../shared";
}

static char *ref_slurp(const char *path, size_t *len)
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

static void ref_ids(const cJSON *arr, int32_t *out, int cap)
{
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) if (i < cap) out[i++] = (int32_t)e->valuedouble;
}

static void ref_floats(const cJSON *arr, float *out, int cap)
{
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) if (i < cap) out[i++] = (float)e->valuedouble;
}

/* Load <stem>.json; returns 0 on success. */
static int ref_load(const char *stem, ref_model *m)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/reference/model/%s.json", ref_shared(), stem);
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
        ref_ids(cJSON_GetObjectItem(s, "ids"), rp->sampled, REF_N_GEN);
        ref_floats(cJSON_GetObjectItem(g, "step_logits_top1_minus_top2"), rp->greedy_margin, REF_N_GEN);
        ref_floats(cJSON_GetObjectItem(s, "step_logits_top1_minus_top2"), rp->sampled_margin, REF_N_GEN);
    }
    cJSON_Delete(root);
    return 0;
}

/* A SLOG file: rows of n_vocab floats. NULL when missing or malformed. */
static float *ref_slog(const char *stem, const char *prompt, const char *kind, int *n_vocab, int *n_rows)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/reference/model/%s.%s.%s.slog", ref_shared(), stem, prompt, kind);
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

static const char *ref_model_path(const char *stem, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/models/%s.gguf", ref_shared(), stem);
    return buf;
}

#endif
