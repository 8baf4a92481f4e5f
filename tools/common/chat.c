/*
 * chat.c - chat templates for /v1/chat/completions and /apply-template, and `sift generate -cnv`.
 *
 * A GGUF carries its chat template as Jinja text (tokenizer.chat_template). That text is
 * rendered by libsift's Jinja engine (sift_template_*, chat_jinja.c), as
 * llama-server's --jinja does; `--chat-template-file FILE` gives another one.
 *
 * For a model without a template, or when `--chat-template NAME` asks for one, the
 * built-in templates below are used. Like llama.cpp's llm_chat_detect_template it recognizes the common
 * templates by marker strings in that text ("<|im_start|>" -> chatml, "[INST]" -> llama 2
 * or mistral, "<|start_header_id|>" -> llama 3, ...) and formats the messages with C code
 * that writes exactly what the template would. The checks run in llama.cpp's order, since
 * several templates share markers (phi-4 and chatml both use <|im_start|>).
 *
 * A template that is not recognized (or a model without one) falls back to chatml, which is
 * also llama-server's default; `sift serve --chat-template NAME` picks one by name.
 * /props reports the template used and whether it was detected.
 */
#include <ctype.h>
#include <string.h>

#include "chat.h"

static const struct {
    const char *name;
    chat_tmpl t;
} names[] = {
    {"chatml", CHAT_CHATML},
    {"llama2", CHAT_LLAMA2},
    {"llama2-sys", CHAT_LLAMA2_SYS},
    {"llama2-sys-bos", CHAT_LLAMA2_SYS_BOS},
    {"llama2-sys-strip", CHAT_LLAMA2_SYS_STRIP},
    {"mistral-v1", CHAT_MISTRAL_V1},
    {"mistral-v3", CHAT_MISTRAL_V3},
    {"mistral-v3-tekken", CHAT_MISTRAL_V3_TEKKEN},
    {"mistral-v7", CHAT_MISTRAL_V7},
    {"phi3", CHAT_PHI3},
    {"phi4", CHAT_PHI4},
    {"falcon3", CHAT_FALCON3},
    {"zephyr", CHAT_ZEPHYR},
    {"gemma", CHAT_GEMMA},
    {"vicuna", CHAT_VICUNA},
    {"vicuna-orca", CHAT_VICUNA_ORCA},
    {"deepseek", CHAT_DEEPSEEK},
    {"deepseek3", CHAT_DEEPSEEK3},
    {"command-r", CHAT_COMMAND_R},
    {"llama3", CHAT_LLAMA3},
};

chat_tmpl chat_from_name(const char *name)
{
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(names[i].name, name)) return names[i].t;
    return CHAT_UNKNOWN;
}

const char *chat_name(chat_tmpl t)
{
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (names[i].t == t) return names[i].name;
    return "unknown";
}

chat_tmpl chat_detect(const char *tmpl)
{
    if (!tmpl) return CHAT_UNKNOWN;
    const chat_tmpl by_name = chat_from_name(tmpl);
    if (by_name != CHAT_UNKNOWN) return by_name;
#define HAS(x) (strstr(tmpl, (x)) != NULL)
    if (HAS("<|im_start|>")) return HAS("<|im_sep|>") ? CHAT_PHI4 : HAS("<end_of_utterance>") ? CHAT_UNKNOWN : CHAT_CHATML;
    if (!strncmp(tmpl, "mistral", 7) || HAS("[INST]")) {
        if (HAS("[SYSTEM_PROMPT]")) return CHAT_MISTRAL_V7;
        if (HAS("' [INST] ' + system_message") || HAS("[AVAILABLE_TOOLS]")) {
            if (HAS(" [INST]")) return CHAT_MISTRAL_V1;
            if (HAS("\"[INST]\"")) return CHAT_MISTRAL_V3_TEKKEN;
            return CHAT_MISTRAL_V3;
        }
        if (HAS("content.strip()")) return CHAT_LLAMA2_SYS_STRIP;
        if (HAS("bos_token + '[INST]")) return CHAT_LLAMA2_SYS_BOS;
        if (HAS("<<SYS>>")) return CHAT_LLAMA2_SYS;
        return CHAT_LLAMA2;
    }
    if (HAS("<|assistant|>") && HAS("<|end|>")) return CHAT_PHI3;
    if (HAS("<|assistant|>") && HAS("<|user|>") && HAS("</s>")) return CHAT_FALCON3;
    if (HAS("<|user|>") && HAS("<|endoftext|>")) return CHAT_ZEPHYR;
    if (HAS("<start_of_turn>")) return CHAT_GEMMA;
    if (HAS("USER: ") && HAS("ASSISTANT: ")) return HAS("SYSTEM: ") ? CHAT_VICUNA_ORCA : CHAT_VICUNA;
    if (HAS("### Instruction:") && HAS("<|EOT|>")) return CHAT_DEEPSEEK;
    if (HAS("<|START_OF_TURN_TOKEN|>") && HAS("<|USER_TOKEN|>")) return CHAT_COMMAND_R;
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) return CHAT_LLAMA3;
    if (HAS("<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>") && HAS("<\xef\xbd\x9c" "User\xef\xbd\x9c>")) return CHAT_DEEPSEEK3;
#undef HAS
    return CHAT_UNKNOWN;
}

/* s without leading and trailing whitespace, appended to out */
static void add_trimmed(sbuf *out, const char *s)
{
    size_t a = 0, b = strlen(s);
    while (a < b && isspace((unsigned char)s[a])) a++;
    while (b > a && isspace((unsigned char)s[b - 1])) b--;
    sbuf_add(out, s + a, b - a);
}

static bool is(const char *role, const char *r) { return !strcmp(role, r); }

bool chat_apply(chat_tmpl t, const chat_msg *m, size_t n, bool add_ass, sbuf *o)
{
    switch (t) {
    case CHAT_CHATML:
        for (size_t i = 0; i < n; i++) sbuf_printf(o, "<|im_start|>%s\n%s<|im_end|>\n", m[i].role, m[i].content);
        if (add_ass) sbuf_adds(o, "<|im_start|>assistant\n");
        return true;
    case CHAT_PHI4:
        for (size_t i = 0; i < n; i++) sbuf_printf(o, "<|im_start|>%s<|im_sep|>%s<|im_end|>", m[i].role, m[i].content);
        if (add_ass) sbuf_adds(o, "<|im_start|>assistant<|im_sep|>");
        return true;
    case CHAT_MISTRAL_V7:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) sbuf_printf(o, "[SYSTEM_PROMPT] %s[/SYSTEM_PROMPT]", m[i].content);
            else if (is(m[i].role, "user")) sbuf_printf(o, "[INST] %s[/INST]", m[i].content);
            else sbuf_printf(o, " %s</s>", m[i].content);
        }
        return true;
    case CHAT_MISTRAL_V1:
    case CHAT_MISTRAL_V3:
    case CHAT_MISTRAL_V3_TEKKEN: {
        const char *lead = t == CHAT_MISTRAL_V1 ? " " : "";
        const char *trail = t == CHAT_MISTRAL_V3_TEKKEN ? "" : " ";
        bool inside = false;
        for (size_t i = 0; i < n; i++) {
            if (!inside) {
                sbuf_printf(o, "%s[INST]%s", lead, trail);
                inside = true;
            }
            if (is(m[i].role, "system")) {
                sbuf_printf(o, "%s\n\n", m[i].content);
            } else if (is(m[i].role, "user")) {
                sbuf_printf(o, "%s%s[/INST]", m[i].content, lead);
            } else {
                sbuf_adds(o, trail);
                if (t == CHAT_MISTRAL_V3) add_trimmed(o, m[i].content);
                else sbuf_adds(o, m[i].content);
                sbuf_adds(o, "</s>");
                inside = false;
            }
        }
        return true;
    }
    case CHAT_LLAMA2:
    case CHAT_LLAMA2_SYS:
    case CHAT_LLAMA2_SYS_BOS:
    case CHAT_LLAMA2_SYS_STRIP: {
        const bool sys = t != CHAT_LLAMA2, bos = t == CHAT_LLAMA2_SYS_BOS, strip = t == CHAT_LLAMA2_SYS_STRIP;
        bool inside = true; /* the BOS of the first turn comes from the tokenizer */
        sbuf_adds(o, "[INST] ");
        for (size_t i = 0; i < n; i++) {
            if (!inside) {
                inside = true;
                sbuf_adds(o, bos ? "<s>[INST] " : "[INST] ");
            }
            sbuf tmp = {0};
            if (strip) add_trimmed(&tmp, m[i].content);
            else sbuf_adds(&tmp, m[i].content);
            const char *c = tmp.p ? tmp.p : "";
            if (is(m[i].role, "system")) {
                if (sys) sbuf_printf(o, "<<SYS>>\n%s\n<</SYS>>\n\n", c);
                else sbuf_printf(o, "%s\n", c);
            } else if (is(m[i].role, "user")) {
                sbuf_printf(o, "%s [/INST]", c);
            } else {
                sbuf_printf(o, "%s</s>", c);
                inside = false;
            }
            sbuf_free(&tmp);
        }
        return true;
    }
    case CHAT_PHI3:
        for (size_t i = 0; i < n; i++) sbuf_printf(o, "<|%s|>\n%s<|end|>\n", m[i].role, m[i].content);
        if (add_ass) sbuf_adds(o, "<|assistant|>\n");
        return true;
    case CHAT_FALCON3:
        for (size_t i = 0; i < n; i++) sbuf_printf(o, "<|%s|>\n%s\n", m[i].role, m[i].content);
        if (add_ass) sbuf_adds(o, "<|assistant|>\n");
        return true;
    case CHAT_ZEPHYR:
        for (size_t i = 0; i < n; i++) sbuf_printf(o, "<|%s|>\n%s<|endoftext|>\n", m[i].role, m[i].content);
        if (add_ass) sbuf_adds(o, "<|assistant|>\n");
        return true;
    case CHAT_GEMMA: {
        /* no system role: the system text goes before the first user message */
        sbuf sysp = {0};
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) {
                add_trimmed(&sysp, m[i].content);
                continue;
            }
            const bool model = is(m[i].role, "assistant");
            sbuf_printf(o, "<start_of_turn>%s\n", model ? "model" : m[i].role);
            if (sysp.n && !model) {
                sbuf_add(o, sysp.p, sysp.n);
                sbuf_adds(o, "\n\n");
                sysp.n = 0;
            }
            add_trimmed(o, m[i].content);
            sbuf_adds(o, "<end_of_turn>\n");
        }
        sbuf_free(&sysp);
        if (add_ass) sbuf_adds(o, "<start_of_turn>model\n");
        return true;
    }
    case CHAT_VICUNA:
    case CHAT_VICUNA_ORCA:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) {
                if (t == CHAT_VICUNA_ORCA) sbuf_printf(o, "SYSTEM: %s\n", m[i].content);
                else sbuf_printf(o, "%s\n\n", m[i].content);
            } else if (is(m[i].role, "user")) {
                sbuf_printf(o, "USER: %s\n", m[i].content);
            } else if (is(m[i].role, "assistant")) {
                sbuf_printf(o, "ASSISTANT: %s</s>\n", m[i].content);
            }
        }
        if (add_ass) sbuf_adds(o, "ASSISTANT:");
        return true;
    case CHAT_DEEPSEEK:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) sbuf_adds(o, m[i].content);
            else if (is(m[i].role, "user")) sbuf_printf(o, "### Instruction:\n%s\n", m[i].content);
            else if (is(m[i].role, "assistant")) sbuf_printf(o, "### Response:\n%s\n<|EOT|>\n", m[i].content);
        }
        if (add_ass) sbuf_adds(o, "### Response:\n");
        return true;
    case CHAT_DEEPSEEK3:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) sbuf_printf(o, "%s\n\n", m[i].content);
            else if (is(m[i].role, "user")) sbuf_printf(o, "<\xef\xbd\x9cUser\xef\xbd\x9c>%s", m[i].content);
            else if (is(m[i].role, "assistant"))
                sbuf_printf(o, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>%s<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                            m[i].content);
        }
        if (add_ass) sbuf_adds(o, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>");
        return true;
    case CHAT_COMMAND_R:
        for (size_t i = 0; i < n; i++) {
            const char *tok = is(m[i].role, "system") ? "<|SYSTEM_TOKEN|>" : is(m[i].role, "user") ? "<|USER_TOKEN|>"
                              : is(m[i].role, "assistant") ? "<|CHATBOT_TOKEN|>" : NULL;
            if (!tok) continue;
            sbuf_printf(o, "<|START_OF_TURN_TOKEN|>%s", tok);
            add_trimmed(o, m[i].content);
            sbuf_adds(o, "<|END_OF_TURN_TOKEN|>");
        }
        if (add_ass) sbuf_adds(o, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
        return true;
    case CHAT_LLAMA3:
        for (size_t i = 0; i < n; i++) {
            sbuf_printf(o, "<|start_header_id|>%s<|end_header_id|>\n\n", m[i].role);
            add_trimmed(o, m[i].content);
            sbuf_adds(o, "<|eot_id|>");
        }
        if (add_ass) sbuf_adds(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        return true;
    case CHAT_UNKNOWN:
    case CHAT_COUNT:
        break;
    }
    return false;
}
