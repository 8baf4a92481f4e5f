/*
 * cli_chat.h - the conversation of `sift generate -cnv`: its messages and the chat template
 * that formats them, as llama-cli keeps them (common_chat_format_single).
 */
#ifndef SIFT_CLI_CHAT_H
#define SIFT_CLI_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "sift.h"

typedef struct cli_chat cli_chat;

/* A conversation formatted by a Jinja template (jinja, len bytes), or when jinja is NULL by
 * the built-in template called builtin ("chatml", "llama3", ...: the server's names).
 * bos/eos: the vocabulary's texts of those tokens (the template's bos_token / eos_token);
 * strip_bos: the tokenizer adds BOS itself, so a BOS text the template writes first is
 * dropped. NULL with a message in err when the template does not parse or the name is
 * unknown. */
cli_chat *cli_chat_new(const char *jinja, size_t len, const char *builtin, const char *bos, const char *eos,
                       bool strip_bos, char *err, size_t err_size);
void cli_chat_free(cli_chat *c);

/* Add a message and return the text to feed the model (malloc'd): the whole conversation
 * rendered with it (and the assistant's opening when add_generation_prompt) minus the
 * rendering before it, which is already in the KV cache. A newline that ended the earlier
 * rendering is fed again, since the model's own end-of-turn token stood for that text (what
 * llama-cli does). NULL with err set when rendering fails. */
char *cli_chat_add(cli_chat *c, const char *role, const char *content, bool add_generation_prompt, char *err,
                   size_t err_size);

/* The conversation of a model: its template from --chat-template-file (file), --chat-template
 * (name: a built-in name, else Jinja text, as llama-cli takes it), or the GGUF's
 * tokenizer.chat_template; with none of them NULL (and 0), unless force (-cnv), which takes
 * chatml as llama.cpp does. Nonzero (an exit code, the message on stderr) when the one asked
 * for cannot be read or parsed. */
int cli_chat_for_model(const sift_model *model, const char *file, const char *name, bool force, cli_chat **c);

/* Where the template of cli_chat_for_model came from, for the banner: the file, the built-in
 * name, "--chat-template" (Jinja text), "the model's" or "chatml (the model has none)". */
const char *cli_chat_source(const cli_chat *c);

/* Record a message without rendering it (the assistant's reply: already in the cache). */
bool cli_chat_push(cli_chat *c, const char *role, const char *content);

/* Whether the template's model may think before its answer (the template knows <think>,
 * its last rendering opened it, or it is gpt-oss's or Command R7B's, which think in their own
 * markup); its tool-call format (tc_format, for the thinking's markup); whether the last
 * rendering (cli_chat_add) ends inside <think>. */
bool cli_chat_thinks(const cli_chat *c);
int cli_chat_format(const cli_chat *c);
bool cli_chat_forced_open(const cli_chat *c);

#endif
