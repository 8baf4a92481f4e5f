/*
 * tc_format.c - which syntax a chat template's model writes a tool call in, from the
 * template's text (tc_detect), and the format's name (/props, the tests).
 *
 * Apart from tools/server/tool_calls.c (the grammars and parsers of the calls) because the
 * CLI needs the format too: `sift generate -cnv` shows the thinking apart, and Command R7B and
 * gpt-oss think in their own markup (rs_set_tags), so the CLI detects the format without
 * linking the server.
 */
#include <string.h>

#include "tc_format.h"

tc_format tc_detect(const char *t)
{
    if (!t) return TC_GENERIC;
    /* in llama.cpp's order (common/chat.cpp, before its autoparser): each test a marker only that
     * model's template writes */
    if (strstr(t, "chat_format=llm-jp-harmony-v1")) return TC_LLM_JP; /* (its own declaration, as llama.cpp tests it) */
    if (strstr(t, "<|channel|>")) return TC_GPT_OSS; /* harmony's channels */
    if (strstr(t, "message['prefix'] is defined and message['prefix'] and thinking")) return TC_DEEPSEEK_V31; /* (before R1's) */
    if (strstr(t, R1_CALLS_BEGIN)) return TC_DEEPSEEK_R1; /* llama.cpp's test: the tool calls' opening token */
    if (strstr(t, "<|END_THINKING|>" R7B_ACTION)) return TC_COMMAND_R7B;
    if (strstr(t, ">>>all")) return TC_FUNCTIONARY_V32;
    if (strstr(t, KIMI_SECTION) && strstr(t, KIMI_CALL)) return TC_KIMI_K2;
    if (strstr(t, "<|start_of_role|>") && strstr(t, "<|tool_call|>")) return TC_GRANITE;
    if (strstr(t, "<arg_key>")) return TC_GLM45; /* (before Hermes': it writes <tool_call> too) */
    if (strstr(t, "<tool_call>") && strstr(t, "<function=") && strstr(t, "<parameter=")) return TC_QWEN3_CODER; /* (as well) */
    if (strstr(t, "<function=") && strstr(t, "<|start_header_id|>")) return TC_FUNCTIONARY_V31; /* (before Llama 3.x's) */
    if (strstr(t, "[TOOL_CALLS]")) return TC_MISTRAL;
    if (strstr(t, "<tool_call>")) return TC_HERMES;
    /* Llama 3.x, and Llama 4 (<|header_start|>), whose JSON template asks for the same
     * {"name", "parameters"} object (llama.cpp's autoparser reads its template's calls so) */
    if ((strstr(t, "<|start_header_id|>") || strstr(t, "<|header_start|>")) &&
        (strstr(t, "<|python_tag|>") || strstr(t, "\"parameters\"") || strstr(t, "ipython")))
        return TC_LLAMA3;
    return TC_GENERIC;
}

const char *tc_format_name(tc_format f)
{
    switch (f) {
    case TC_HERMES: return "hermes";
    case TC_LLAMA3: return "llama3";
    case TC_MISTRAL: return "mistral";
    case TC_DEEPSEEK_R1: return "deepseek-r1";
    case TC_FUNCTIONARY_V31: return "functionary-v3.1";
    case TC_COMMAND_R7B: return "command-r7b";
    case TC_FUNCTIONARY_V32: return "functionary-v3.2";
    case TC_KIMI_K2: return "kimi-k2";
    case TC_DEEPSEEK_V31: return "deepseek-v3.1";
    case TC_GLM45: return "glm-4.5";
    case TC_QWEN3_CODER: return "qwen3-coder";
    case TC_GRANITE: return "granite";
    case TC_GPT_OSS: return "gpt-oss";
    case TC_LLM_JP: return "llm-jp-harmony";
    default: return "generic";
    }
}
