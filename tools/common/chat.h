/*
 * chat.h - the built-in chat templates (chat.c), for `sift serve` and `sift generate -cnv`.
 */
#ifndef SIFT_TOOLS_CHAT_H
#define SIFT_TOOLS_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "stream_text.h"

/* ---- chat templates (chat.c) --------------------------------------------------------------- */

typedef enum chat_tmpl {
    CHAT_UNKNOWN = 0,
    CHAT_CHATML,
    CHAT_LLAMA2,
    CHAT_LLAMA2_SYS,
    CHAT_LLAMA2_SYS_BOS,
    CHAT_LLAMA2_SYS_STRIP,
    CHAT_MISTRAL_V1,
    CHAT_MISTRAL_V3,
    CHAT_MISTRAL_V3_TEKKEN,
    CHAT_MISTRAL_V7,
    CHAT_PHI3,
    CHAT_PHI4,
    CHAT_FALCON3,
    CHAT_ZEPHYR,
    CHAT_GEMMA,
    CHAT_VICUNA,
    CHAT_VICUNA_ORCA,
    CHAT_DEEPSEEK,
    CHAT_DEEPSEEK3,
    CHAT_COMMAND_R,
    CHAT_LLAMA3,
    CHAT_COUNT,
} chat_tmpl;

typedef struct chat_msg {
    const char *role;
    const char *content;
} chat_msg;

/* The template a Jinja chat template text stands for, by the patterns llama.cpp uses; a
 * template name ("chatml", "llama3", ...) is accepted too. CHAT_UNKNOWN otherwise. */
chat_tmpl chat_detect(const char *tmpl_text);
/* By name only ("chatml", "llama2", "llama2-sys", "mistral-v7", "llama3", ...). */
chat_tmpl chat_from_name(const char *name);
const char *chat_name(chat_tmpl t);
/* Format messages with template t (add_assistant: open the assistant's turn). Returns
 * false for CHAT_UNKNOWN. */
bool chat_apply(chat_tmpl t, const chat_msg *msgs, size_t n, bool add_assistant, sbuf *out);

#endif
