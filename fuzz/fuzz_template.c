/*
 * fuzz_template.c - libFuzzer target for the chat-template (Jinja) engine.
 *
 * One input: a template, optionally followed by a line "%%" and a JSON context. Without a
 * context (or when the context is not a JSON object) a fixed chat context is used, with
 * messages, tools and a tool call, so that template mutations reach the code that real
 * templates reach. The engine must:
 *   - parse or refuse with a message (never crash);
 *   - render or fail with a message, within small limits (steps, output, memory), so an
 *     endless loop or runaway recursion is an error, not a timeout;
 *   - on success return exactly out_len bytes, NUL-terminated; on failure no output;
 *   - take at most 1 s of CPU (issue 26: work is charged, not nodes, so a render that
 *     spins inside one operation - a comparison, a string scan - is a bug this flags; run
 *     with -timeout above 1 so this check, with its message, fires first).
 * Each template is rendered twice (with transformers' defaults and without) to cover both
 * paths of the variables.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sift.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char CHAT[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi \\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":"
    "{\"name\":\"f\",\"arguments\":{\"x\":1.5,\"y\":[true,null]}}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
    "\"content\":\"42\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"more\"}]}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}},\"required\":[\"x\"]}}}],"
    "\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\"}";

static void render_once(const sift_template *t, const char *ctx, size_t clen, bool chat_defaults)
{
    sift_template_options o;
    sift_template_options_init(&o);
    o.max_steps = 200000;
    o.max_output = 1 << 20;
    o.max_memory = 64 << 20;
    o.max_depth = 40;
    o.now = 1721952000;
    o.chat_defaults = chat_defaults;
    sift_error err = {0};
    char *out = (char *)1;
    size_t len = 0;
    const double t0 = cpu_now();
    sift_status st = sift_template_render(t, ctx, clen, &o, &out, &len, &err);
    const double cpu = cpu_now() - t0;
    if (cpu > 1.0) {
        fprintf(stderr, "fuzz_template: one render took %.2f s of CPU (more than 1 s): %s\n", cpu,
                st == SIFT_OK ? "rendered" : err.msg);
        abort();
    }
    if (st == SIFT_OK) {
        if (!out || out[len] != 0) abort();
        free(out);
    } else {
        if (out || !err.msg[0] || err.status != st) abort(); /* failures say what, and leave nothing */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    size_t tlen = size;
    const char *ctx = CHAT;
    size_t clen = sizeof CHAT - 1;
    for (size_t i = 0; i + 3 <= size; i++) {
        if (data[i] == '%' && data[i + 1] == '%' && (i == 0 || data[i - 1] == '\n') && (i + 2 == size || data[i + 2] == '\n')) {
            tlen = i;
            ctx = text + i + 3 > text + size ? text + size : text + i + 3;
            clen = size - (size_t)(ctx - text);
            break;
        }
    }
    sift_error err = {0};
    sift_template *t = sift_template_parse(text, tlen, &err);
    if (!t) {
        if (err.status == SIFT_OK || !err.msg[0]) abort();
        return 0;
    }
    render_once(t, ctx, clen, true);
    if (ctx != CHAT) render_once(t, CHAT, sizeof CHAT - 1, false);
    sift_template_free(t);
    return 0;
}
