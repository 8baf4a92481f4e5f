/*
 * tc_format.h - the tool-call format of a chat template (tc_format.c): which syntax the
 * template's model writes a call in, and the markup the detection and the server's
 * tool-call parser (tools/server/tool_calls.c) both look for. The CLI needs the format too:
 * Command R7B and gpt-oss write their thinking in their own markup (rs_set_tags).
 */
#ifndef SIFT_TOOLS_TC_FORMAT_H
#define SIFT_TOOLS_TC_FORMAT_H

#include <stdbool.h>

/* ---- the formats' markup ---------------------------------------------------------------------- */

/* DeepSeek R1's markup (full-width bars, U+2581 for the spaces) */
#define R1_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define R1_CALLS_END "<｜tool▁calls▁end｜>"
#define R1_CALL_BEGIN "<｜tool▁call▁begin｜>"
#define R1_CALL_END "<｜tool▁call▁end｜>"
#define R1_SEP "<｜tool▁sep｜>"

/* Command R7B's markup */
#define R7B_ACTION "<|START_ACTION|>"
#define R7B_ACTION_END "<|END_ACTION|>"
#define R7B_RESPONSE "<|START_RESPONSE|>"
#define R7B_RESPONSE_END "<|END_RESPONSE|>"
/* Kimi K2's markup */
#define KIMI_SECTION "<|tool_calls_section_begin|>"
#define KIMI_SECTION_END "<|tool_calls_section_end|>"
#define KIMI_CALL "<|tool_call_begin|>"
#define KIMI_ARGS "<|tool_call_argument_begin|>"
#define KIMI_CALL_END "<|tool_call_end|>"

/* ---- the tool-call format (tc_format.c) -------------------------------------------------------- */

/* How the template's model writes a tool call (detected from the template's text). */
typedef enum tc_format {
    TC_GENERIC = 0, /* no known syntax: the whole reply is JSON, {"tool_call": {...}} or {"response": "..."} */
    TC_HERMES,      /* Hermes, Qwen 2.5, Qwen 3: <tool_call>{"name", "arguments"}</tool_call> */
    TC_LLAMA3,      /* Llama 3.x and 4: {"name": ..., "parameters": {...}} (optionally after <|python_tag|>) */
    TC_MISTRAL,     /* Mistral: [TOOL_CALLS][{"name", "arguments"}, ...] */
    TC_FUNCTIONARY_V31, /* Functionary v3.1 (Llama 3.1): <function=NAME>{args}</function> */
    TC_DEEPSEEK_R1, /* DeepSeek R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{args}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜> */
    TC_COMMAND_R7B, /* Command R7B: <|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}, ...]<|END_ACTION|>;
                     * an answer in <|START_RESPONSE|>...<|END_RESPONSE|>, thoughts in <|START_THINKING|>...<|END_THINKING|> */
    TC_FUNCTIONARY_V32, /* Functionary v3.2: the prompt ends with ">>>", the reply names its recipient: all\n<content>,
                         * NAME\n{args}, then >>>NAME\n{args} ... */
    TC_KIMI_K2,     /* Kimi K2: [<|tool_calls_section_begin|>]<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{args}
                     * [<|tool_call_end|>] ... [<|tool_calls_section_end|>]; the call's id is "functions.NAME:IDX" */
    TC_DEEPSEEK_V31, /* DeepSeek V3.1: <｜tool▁calls▁begin｜>[<｜tool▁call▁begin｜>]NAME<｜tool▁sep｜>{args}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜> */
    TC_GLM45,       /* GLM 4.5/4.6/4.7: <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n...</tool_call>,
                     * a string argument's value raw, any other's JSON */
    TC_QWEN3_CODER, /* Qwen3-Coder, Qwen 3.5: <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n...</function>\n</tool_call>,
                     * values as GLM 4.5's */
    TC_GRANITE,     /* Granite 3.x: <|tool_call|>[{"name", "arguments"}, ...]; after the thinking, the answer in <response>...</response> */
    TC_GPT_OSS,     /* gpt-oss (harmony): messages <|channel|>analysis|commentary|final<|message|>...<|end|> after
                     * <|start|>assistant; a call is a message to=functions.NAME (in the role or the channel
                     * header) whose body is the arguments' JSON; the view of reasoning.c (rs_reply) hands it on */
    TC_LLM_JP,      /* LLM-jp 4.1 (its template says chat_format=llm-jp-harmony-v1): gpt-oss's harmony as its tokenizer
                     * writes it, spaces after the special tokens ("<|channel|> analysis<|message|> ...", one space
                     * before a body that is not the body's), parallel calls each a message ended by <|end|>;
                     * read as gpt-oss's (the view normalizes it), its grammars allow the spaces */
    TC_FORMAT_LAST = TC_LLM_JP
} tc_format;
/* gpt-oss's harmony channels, as gpt-oss or LLM-jp write them */
static inline bool tc_harmony(int f) { return f == TC_GPT_OSS || f == TC_LLM_JP; }

tc_format tc_detect(const char *tmpl_text);
const char *tc_format_name(tc_format f);

#endif
