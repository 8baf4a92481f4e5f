/*
 * chat_jinja.c - the model's own chat template, rendered by libsift's Jinja engine.
 *
 * llama-server's --jinja renders tokenizer.chat_template with the request's messages (and
 * tools) as they came, add_generation_prompt, and the BOS/EOS texts; so does this. It is a
 * file of its own, apart from chat.c's built-in templates, because it needs the request's
 * JSON and the server's error type, which chat.c (also linked into server_unit) does not.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

/* The text of a special token ("" when the vocabulary has none). */
static void token_text(const srv_server *s, sift_token t, char *buf, size_t size)
{
    buf[0] = 0;
    if (t == SIFT_TOKEN_NULL) return;
    int32_t n = sift_token_to_piece(s->vocab, t, buf, (int32_t)size - 1, 0, true);
    buf[n > 0 && n < (int32_t)size ? n : 0] = 0;
}

int chat_apply_jinja(const srv_server *s, const cJSON *messages, const cJSON *tools, bool add_assistant, sbuf *out,
                     srv_error *e)
{
    char bos[256], eos[256];
    token_text(s, sift_vocab_bos(s->vocab), bos, sizeof bos);
    token_text(s, sift_vocab_eos(s->vocab), eos, sizeof eos);
    cJSON *ctx = cJSON_CreateObject();
    if (!ctx) return srv_errorf(e, 500, "out of memory");
    cJSON_AddItemToObject(ctx, "messages", cJSON_Duplicate(messages, true));
    if (tools) cJSON_AddItemToObject(ctx, "tools", cJSON_Duplicate(tools, true));
    cJSON_AddBoolToObject(ctx, "add_generation_prompt", add_assistant);
    cJSON_AddStringToObject(ctx, "bos_token", bos);
    cJSON_AddStringToObject(ctx, "eos_token", eos);
    char *json = cJSON_PrintUnformatted(ctx);
    cJSON_Delete(ctx);
    if (!json) return srv_errorf(e, 500, "out of memory");
    sift_template_options o;
    sift_template_options_init(&o);
    o.chat_defaults = true;
    char *text = NULL;
    size_t n = 0;
    sift_error err = {0};
    sift_status st = sift_template_render(s->jinja, json, strlen(json), &o, &text, &n, &err);
    free(json);
    if (st != SIFT_OK)
        return srv_errorf(e, st == SIFT_E_NOMEM ? 500 : 400, "chat template: %s", err.msg);
    /* the template writes BOS itself; the tokenizer would add a second one (llama.cpp drops it too) */
    size_t skip = 0, bl = strlen(bos);
    if (bl && sift_vocab_add_bos(s->vocab) && n >= bl && memcmp(text, bos, bl) == 0) skip = bl;
    sbuf_add(out, text + skip, n - skip);
    free(text);
    return out->oom ? srv_errorf(e, 500, "out of memory") : 0;
}
