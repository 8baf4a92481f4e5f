/*
 * reasoning.h - a thinking model's reasoning apart from its answer (reasoning.c), shared by
 * the server's replies and `sift generate`'s output.
 */
#ifndef SIFT_TOOLS_REASONING_H
#define SIFT_TOOLS_REASONING_H

#include <stdbool.h>
#include <stddef.h>

#include "stream_text.h"

/* ---- reasoning (reasoning.c) ------------------------------------------------------------------ */

/* --reasoning-format / "reasoning_format": none leaves <think>...</think> in the content;
 * deepseek (and auto, the default, as llama-server) moves it to reasoning_content;
 * deepseek-legacy fills reasoning_content and leaves the whole text in the content too. */
typedef enum rs_format { RS_AUTO = 0, RS_NONE, RS_DEEPSEEK, RS_DEEPSEEK_LEGACY } rs_format;
int rs_format_parse(const char *s, rs_format *out); /* 0, or -1 for an unknown name */

/* A chat request's reasoning: how to split the reply, and the streaming state. */
typedef struct rs_spec {
    rs_format format;
    const char *open, *close;  /* the thinking's tags (static strings); NULL: <think> and </think> */
    const char *cut[2];        /* markup that ends the thinking unclosed, the content starting at it (Kimi K2's calls), or NULL */
    const char *resp[2];       /* tags around the answer after the thinking (Granite's <response>), or NULL */
    bool forced_open;          /* the rendered prompt ends inside <think> (rs_prompt_forced_open) */
    bool harmony;              /* gpt-oss's channels (rs_set_tags): the reply is a view of its messages (rs_reply) */
    bool calls;                /* harmony: the request has tools; its calls' messages stay in the content, as HM_CALL
                                * NAME <|message|> args, for the tool-call parser (else they are dropped) */
    bool spaced;               /* harmony: LLM-jp's dialect (TC_LLM_JP), spaces after the special tokens */
    char *pre;                 /* the reply's start the prompt already holds (a continued assistant message:
                                * rs_harmony_prefill, rs_think_prefill), read before the reply; NULL: none (malloc'd) */
    sbuf seen;                 /* streaming: the reply so far */
    size_t r_sent, c_sent;     /* bytes of reasoning / content sent */
} rs_spec;
void rs_spec_free(rs_spec *r);
bool rs_prompt_forced_open(const char *prompt, size_t n);

/* Where the reasoning [r0, r1) and the content [c0, c1) of text t[0..n) are; partial: the
 * reply is still coming (what may change is held back: both ranges only ever grow). */
typedef struct rs_split {
    size_t r0, r1, c0, c1;
    bool thinking, closed;     /* the reply thinks; its thinking ended */
} rs_split;
void rs_split_text(const rs_spec *r, const char *t, size_t n, bool partial, rs_split *out);
/* The whole reply t[0..n) -> its reasoning and its content (appended): the two ranges of
 * rs_split_text, or with harmony the view of its messages (analysis -> reasoning; final and
 * commentary -> content; calls to functions.* as HM_CALL markup when r->calls; anything else
 * dropped). partial: the reply is still coming (what may change is held back). */
void rs_reply(const rs_spec *r, const char *t, size_t n, bool partial, sbuf *reasoning, sbuf *content);
/* gpt-oss's call, as the harmony view hands it to the tool-call parser: HM_CALL NAME "<|message|>" {args} */
#define HM_CALL "<|channel|>commentary to=functions."
/* Streaming: the new text txt -> what grew of the reasoning and of the content (appended). */
void rs_stream(rs_spec *r, const char *txt, size_t n, sbuf *reasoning, sbuf *content);
/* The end of the stream: the rest of both, from the whole text. */
void rs_stream_final(rs_spec *r, const char *text, size_t n, sbuf *reasoning, sbuf *content);
/* A grammar (start rule `root`) that starts after the thinking ends: free text without
 * "</think>", the tag, then root; the thinking optional unless forced_open. *new_root: the
 * start rule of the result (malloc'd; NULL when out of memory). */
#define RS_ROOT "x-sift-think-root"
char *rs_wrap_grammar(const char *gbnf, const char *root, bool forced_open, const char **new_root);
/* gpt-oss: the same for a harmony reply, as llama.cpp's: an optional analysis message, then the
 * final channel's header (an optional constraint), then root (RS_HM_REPLY); the rest of an
 * analysis message the prompt opened, then the same (RS_HM_IN_ANALYSIS); the rest of any message
 * the prompt opened, its end and the role's opening, then root (RS_HM_IN_MESSAGE: tool calls
 * after a continued message). spaced: LLM-jp's dialect. */
typedef enum rs_hm_start { RS_HM_REPLY, RS_HM_IN_ANALYSIS, RS_HM_IN_MESSAGE } rs_hm_start;
char *rs_wrap_harmony(const char *gbnf, const char *root, bool spaced, rs_hm_start at, const char **new_root);
/* A continued assistant message (continue_final_message, or a last assistant message) on a
 * harmony template, as llama.cpp's gpt-oss handler writes it after the assistant's opening:
 * its reasoning as an open analysis message, and with reasoning false (continuing the content)
 * that message ended and a final one opened with the content so far. Appended to out. */
void rs_harmony_prefill(sbuf *out, const char *reasoning, const char *content, bool reasoning_open);
/* The same on a template that thinks in tags (r's, rs_set_tags), as llama.cpp's handlers write a
 * continued message after the generation prompt: the opening tag (unless `opened`: the prompt
 * already ends inside the thinking, out ends with its opening), the reasoning, and unless
 * reasoning_open the closing tag (on a line of its own, then a blank line, when out's opening
 * ended with a newline: "<think>\n") and the content so far. Appended to out. */
void rs_think_prefill(sbuf *out, const rs_spec *r, bool opened, const char *reasoning, const char *content, bool reasoning_open);
/* Where a continued message on such a template starts in the rendered prompt[0..n) (with the
 * generation prompt): at the opening tag the prompt ends with (*forced_open: the thinking is
 * left open, continued as written), or at an empty thinking block it ends with (thinking off:
 * the prefill's own thinking replaces it, the prompt is cut there), else n. */
size_t rs_prompt_think_at(const rs_spec *r, const char *prompt, size_t n, bool *forced_open);
/* harmony, for --reasoning-budget (engine.c): where the first analysis message's header in t[from..n)
 * ends (after its <|message|>), or 0 when none is there. *resume: where a later call, on the same
 * text grown longer, must start so as to miss no header (one cut short at n is read again), which
 * keeps the per-token search linear in the reply. */
size_t rs_hm_analysis(const rs_spec *r, const char *t, size_t from, size_t n, size_t *resume);
/* GBNF rules <prefix>-0 .. <prefix>-<len-1>: any text without `tag` in it (tag starts with '<'
 * and holds no other '<'); start rule <prefix>-0. */
void rs_gbnf_without(sbuf *g, const char *prefix, const char *tag);
/* The thinking's tags of a template whose tool-call format has its own (Command R7B's
 * <|START_THINKING|>...<|END_THINKING|>); else leaves r's (NULL: <think>). */
void rs_set_tags(rs_spec *r, int format);

#endif
