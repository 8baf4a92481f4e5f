/*
 * cli_chat.c - the conversation of `sift generate -cnv` and its chat template.
 *
 * The model sees a conversation as one text, the chat template's rendering of all the
 * messages so far. Rendering it again each turn and feeding it all would re-decode the whole
 * history; llama-cli instead renders the history before and after the new message and feeds
 * only the difference (common_chat_format_single), so the KV cache keeps what it holds. This
 * file does the same with libsift's Jinja engine (the GGUF's tokenizer.chat_template or
 * --chat-template-file), or with one of the built-in C templates the server uses too
 * (tools/common/chat.c, chosen by --chat-template NAME) for models that carry none.
 *
 * The messages are kept as (role, content) strings and turned into the JSON context the
 * template wants at each render; conversations are short, so no cleverness is needed.
 */
#include "cli_chat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "cli_util.h"
#include "reasoning.h"
#include "sift.h"
#include "stream_text.h"
#include "tc_format.h"

typedef struct msg {
    char *role, *content;
} msg;

struct cli_chat {
    sift_template *tpl; /* NULL: the built-in template */
    chat_tmpl builtin;
    char *bos, *eos;
    bool strip_bos;
    char source[160]; /* what the banner names: the file, the name, "the model's", ... */
    msg *msgs;
    size_t n, cap;
    int format;       /* the template's tool-call format (tc_detect): gpt-oss and Command R7B think in their own markup */
    bool think_tag;   /* the template knows <think> */
    bool forced_open; /* the last rendering (cli_chat_add) ends inside <think> */
};

cli_chat *cli_chat_new(const char *jinja, size_t len, const char *builtin, const char *bos, const char *eos,
                       bool strip_bos, char *err, size_t err_size)
{
    cli_chat *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    c->bos = strdup(bos ? bos : "");
    c->eos = strdup(eos ? eos : "");
    c->strip_bos = strip_bos;
    if (!c->bos || !c->eos) {
        snprintf(err, err_size, "out of memory");
        goto fail;
    }
    if (jinja) {
        char *t = strndup(jinja, len);
        if (!t) {
            snprintf(err, err_size, "out of memory");
            goto fail;
        }
        c->format = tc_detect(t);
        c->think_tag = strstr(t, "<think>") != NULL;
        free(t);
        sift_error e = {0};
        if (!(c->tpl = sift_template_parse(jinja, len, &e))) {
            snprintf(err, err_size, "%s", e.msg);
            goto fail;
        }
    } else if ((c->builtin = chat_from_name(builtin ? builtin : "chatml")) == CHAT_UNKNOWN) {
        snprintf(err, err_size, "unknown chat template '%s'", builtin);
        goto fail;
    }
    return c;
fail:
    cli_chat_free(c);
    return NULL;
}

void cli_chat_free(cli_chat *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free(c->msgs[i].role), free(c->msgs[i].content);
    free(c->msgs);
    sift_template_free(c->tpl);
    free(c->bos);
    free(c->eos);
    free(c);
}

bool cli_chat_push(cli_chat *c, const char *role, const char *content)
{
    if (c->n == c->cap) {
        const size_t cap = c->cap ? c->cap * 2 : 8;
        msg *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) return false;
        c->msgs = m, c->cap = cap;
    }
    /* the template's context is JSON: a reply cut inside a character, or odd input bytes,
     * must not make it unparsable (U+FFFD instead, as the server's stream does) */
    sbuf clean = {0};
    utf8_sanitize(&clean, content, strlen(content));
    msg *m = &c->msgs[c->n];
    m->role = strdup(role);
    m->content = clean.oom ? NULL : sbuf_strdup(&clean);
    sbuf_free(&clean);
    if (!m->role || !m->content) {
        free(m->role), free(m->content);
        return false;
    }
    c->n++;
    return true;
}

/* s as a JSON string literal */
static void json_str(sbuf *b, const char *s)
{
    sbuf_adds(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') sbuf_printf(b, "\\%c", *p);
        else if (*p == '\n') sbuf_adds(b, "\\n");
        else if (*p < 0x20) sbuf_printf(b, "\\u%04x", *p);
        else sbuf_add(b, p, 1);
    }
    sbuf_adds(b, "\"");
}

/* The first n messages rendered; malloc'd, NULL with err on failure. */
static char *render(const cli_chat *c, size_t n, bool add_gen, char *err, size_t err_size)
{
    sbuf out = {0};
    if (c->tpl) {
        sbuf j = {0};
        sbuf_adds(&j, "{\"messages\":[");
        for (size_t i = 0; i < n; i++) {
            sbuf_adds(&j, i ? ",{\"role\":" : "{\"role\":");
            json_str(&j, c->msgs[i].role);
            sbuf_adds(&j, ",\"content\":");
            json_str(&j, c->msgs[i].content);
            sbuf_adds(&j, "}");
        }
        sbuf_printf(&j, "],\"add_generation_prompt\":%s,\"bos_token\":", add_gen ? "true" : "false");
        json_str(&j, c->bos);
        sbuf_adds(&j, ",\"eos_token\":");
        json_str(&j, c->eos);
        sbuf_adds(&j, "}");
        if (j.oom) {
            sbuf_free(&j);
            snprintf(err, err_size, "out of memory");
            return NULL;
        }
        sift_template_options o;
        sift_template_options_init(&o);
        o.chat_defaults = true;
        char *text = NULL;
        size_t len = 0;
        sift_error e = {0};
        const sift_status st = sift_template_render(c->tpl, j.p, j.n, &o, &text, &len, &e);
        sbuf_free(&j);
        if (st != SIFT_OK) {
            snprintf(err, err_size, "chat template: %s", e.msg);
            return NULL;
        }
        sbuf_add(&out, text, len);
        free(text);
    } else {
        chat_msg *m = malloc((n ? n : 1) * sizeof *m);
        if (!m) {
            snprintf(err, err_size, "out of memory");
            return NULL;
        }
        for (size_t i = 0; i < n; i++) m[i] = (chat_msg){c->msgs[i].role, c->msgs[i].content};
        chat_apply(c->builtin, m, n, add_gen, &out);
        free(m);
    }
    char *s = out.oom ? NULL : sbuf_strdup(&out);
    sbuf_free(&out);
    if (!s) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    /* the tokenizer adds BOS; the template's BOS text would make a second one (as the server) */
    const size_t bl = strlen(c->bos);
    if (c->strip_bos && bl && !strncmp(s, c->bos, bl)) memmove(s, s + bl, strlen(s + bl) + 1);
    return s;
}

char *cli_chat_add(cli_chat *c, const char *role, const char *content, bool add_generation_prompt, char *err,
                   size_t err_size)
{
    char *past = c->n ? render(c, c->n, false, err, err_size) : strdup("");
    if (!past) {
        if (!c->n) snprintf(err, err_size, "out of memory");
        return NULL;
    }
    if (!cli_chat_push(c, role, content)) {
        free(past);
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    char *now = render(c, c->n, add_generation_prompt, err, err_size);
    if (!now) {
        /* the message stays out of the conversation: the caller may go on without it */
        c->n--;
        free(c->msgs[c->n].role), free(c->msgs[c->n].content);
        free(past);
        return NULL;
    }
    const size_t lp = strlen(past), ln = strlen(now);
    c->forced_open = rs_prompt_forced_open(now, ln);
    /* only after a reply: the text we fed ourselves (a system prompt) is in the cache whole */
    const bool nl = add_generation_prompt && lp && past[lp - 1] == '\n' && c->n >= 2 &&
                    !strcmp(c->msgs[c->n - 2].role, "assistant");
    /* a template whose earlier rendering is not a prefix of the new one (some drop old
     * reasoning) gets the part after the common length, as llama-cli does */
    const size_t from = lp < ln ? lp : ln;
    char *d = malloc(ln - from + 2);
    if (d) {
        size_t k = 0;
        if (nl) d[k++] = '\n';
        memcpy(d + k, now + from, ln - from + 1);
    } else {
        snprintf(err, err_size, "out of memory");
    }
    free(past);
    free(now);
    return d;
}

/* ---- the template for a model ---------------------------------------------------------------- */

/* The text of a special token ("" when the vocabulary has none). */
static void special_text(const sift_vocab *vocab, sift_token t, char *buf, int size)
{
    buf[0] = 0;
    if (t == SIFT_TOKEN_NULL) return;
    const int32_t n = sift_token_to_piece(vocab, t, buf, size - 1, 0, true);
    buf[n > 0 && n < size ? n : 0] = 0;
}

int cli_chat_for_model(const sift_model *model, const char *file, const char *name, bool force, cli_chat **c)
{
    const sift_vocab *vocab = sift_model_vocab(model);
    *c = NULL;
    char *text = NULL;
    size_t len = 0;
    const char *builtin = NULL, *source = "the model's";
    if (file) {
        source = file;
        if (!(text = cli_read_file(file, &len))) {
            fprintf(stderr, "sift generate: --chat-template-file: cannot read '%s': %s\n", file,
                    strerror(errno));
            return 2;
        }
    } else if (name) {
        source = "--chat-template";
        if (chat_from_name(name) != CHAT_UNKNOWN) {
            builtin = source = name;
        } else if (!strstr(name, "{{") && !strstr(name, "{%")) {
            /* neither a name nor a template: most likely a misspelt name */
            fprintf(stderr, "sift generate: --chat-template: unknown template name '%s' (chatml, llama3, llama2, "
                            "mistral-v7, phi3, ... or Jinja text)\n", name);
            return 2;
        } else if (!(text = strdup(name))) {
            return 1;
        }
        if (text) len = strlen(text);
    } else if (sift_model_chat_template(model, NULL)) {
        if (!(text = strdup(sift_model_chat_template(model, NULL)))) return 1;
        len = strlen(text);
    } else if (force) {
        builtin = "chatml"; /* -cnv on a model without a template: llama.cpp's default, chatml */
        source = "chatml (the model has none)";
    } else {
        return 0;
    }
    char bos[256], eos[256], err[512];
    special_text(vocab, sift_vocab_bos(vocab), bos, sizeof bos);
    special_text(vocab, sift_vocab_eos(vocab), eos, sizeof eos);
    *c = cli_chat_new(text, len, builtin, bos, eos, sift_vocab_add_bos(vocab), err, sizeof err);
    free(text);
    if (!*c) {
        fprintf(stderr, "sift generate: chat template%s%s: %s\n", file ? " " : "",
                file ? file : "", err);
        return 2;
    }
    snprintf((*c)->source, sizeof (*c)->source, "%s", source);
    return 0;
}

const char *cli_chat_source(const cli_chat *c) { return c->source; }

bool cli_chat_thinks(const cli_chat *c)
{
    return c->think_tag || c->forced_open || tc_harmony(c->format) || c->format == TC_COMMAND_R7B;
}

int cli_chat_format(const cli_chat *c) { return c->format; }

bool cli_chat_forced_open(const cli_chat *c) { return c->forced_open; }
