/*
 * reasoning.c - a thinking model's reasoning, apart from its answer, as llama-server's
 * --reasoning-format has it.
 *
 * Thinking models (DeepSeek R1, Qwen 3, QwQ, ...) write `<think>...</think>` before the answer.
 * With a reasoning format other than none, the text between the tags becomes the message's
 * `reasoning_content` (stream deltas too) and the rest its `content`; the tool-call parser and
 * a grammar only ever see the rest. The rules are llama.cpp's (common/chat-parser.cpp,
 * try_parse_reasoning):
 *   - the reasoning opens with `<think>` at the start of the reply (after whitespace), or is
 *     already open when the rendered prompt ends inside it ("forced open": DeepSeek R1's
 *     template ends its generation prompt with `<think>\n`);
 *   - it ends at the first `</think>`; the whitespace after the tag is dropped, and the
 *     reasoning is stripped of the whitespace around it;
 *   - thinking that never closes (cut off by max_tokens, or a model that never ends it) is
 *     all reasoning, and the content is empty;
 *   - `deepseek-legacy` also leaves the whole text, tags included, in the content.
 *
 * Command R7B writes its thoughts between <|START_THINKING|> and <|END_THINKING|>: the same
 * rules with those tags (rs_set_tags; llama.cpp's try_parse_reasoning with R7B's tags). Kimi K2
 * may call a tool from inside its thinking without closing it: its calls' markup ends the
 * reasoning there, and the content (the calls) starts at it, as llama.cpp's Kimi parser has it.
 * Granite wraps the answer after its thinking in <response>...</response>: the content is
 * inside the tags.
 *
 * Streaming splits the text seen so far again at each token (cheap next to a decode) and
 * sends what grew: text that may still change (a possible `<think>` at the start, a
 * possible `</think>` or whitespace at the end of the reasoning, whitespace after the tag)
 * is held back, so the deltas add up to exactly the non-streamed fields.
 *
 * The grammar side (rs_wrap_grammar): a grammar-constrained reply (tools, json_schema,
 * grammar) starts after the thinking ends: the request's grammar gets a free-text prefix
 * that cannot contain `</think>`, then the tag, then the original start rule; optional when
 * the model may or may not think, required when the prompt left the thinking open.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static const char OPEN[] = "<think>", CLOSE[] = "</think>";
#define OPEN_N (sizeof OPEN - 1)
#define CLOSE_N (sizeof CLOSE - 1)

void rs_set_tags(rs_spec *r, int format)
{
    if (r && format == TC_COMMAND_R7B) {
        r->open = "<|START_THINKING|>";
        r->close = "<|END_THINKING|>";
    }
    if (r && format == TC_GRANITE) { /* its answer after the thinking is wrapped */
        r->resp[0] = "<response>";
        r->resp[1] = "</response>";
    }
    if (r && format == TC_KIMI_K2) { /* Kimi K2 may call a tool from inside its thinking, never closing it */
        r->cut[0] = "<|tool_calls_section_begin|>";
        r->cut[1] = "<|tool_call_begin|>";
    }
}

int rs_format_parse(const char *s, rs_format *out)
{
    static const struct {
        const char *name;
        rs_format f;
    } names[] = {{"none", RS_NONE}, {"deepseek", RS_DEEPSEEK}, {"deepseek-legacy", RS_DEEPSEEK_LEGACY}, {"auto", RS_AUTO}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (s && !strcmp(s, names[i].name)) {
            *out = names[i].f;
            return 0;
        }
    return -1;
}

static bool ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

bool rs_prompt_forced_open(const char *prompt, size_t n)
{
    while (n && ws(prompt[n - 1])) n--;
    return n >= OPEN_N && !memcmp(prompt + n - OPEN_N, OPEN, OPEN_N);
}

/* The length of the longest suffix of t[0..n) that is a proper prefix of the tag. */
static size_t close_partial(const char *t, size_t n, const char *tag)
{
    const size_t tn = strlen(tag);
    for (size_t k = tn - 1; k > 0; k--)
        if (n >= k && !memcmp(t + n - k, tag, k)) return k;
    return 0;
}

static const char *find_close(const char *t, size_t from, size_t n, const char *tag)
{
    const size_t tn = strlen(tag);
    for (size_t i = from; i + tn <= n; i++)
        if (t[i] == tag[0] && !memcmp(t + i, tag, tn)) return t + i;
    return NULL;
}

void rs_split_text(const rs_spec *r, const char *t, size_t n, bool partial, rs_split *out)
{
    memset(out, 0, sizeof *out);
    out->c1 = n; /* by default all of it is content */
    if (!r || r->format == RS_NONE) return;
    const char *open = r->open ? r->open : OPEN, *close = r->close ? r->close : CLOSE;
    const size_t open_n = strlen(open);
    size_t p = 0;
    if (!r->forced_open) {
        size_t q = 0;
        while (q < n && ws(t[q])) q++;
        const size_t rem = n - q;
        if (rem < open_n && !memcmp(t + q, open, rem)) { /* maybe the opening, still coming */
            if (partial) out->c1 = 0;
            return;
        }
        if (memcmp(t + q, open, open_n) != 0) return; /* no reasoning */
        p = q + open_n;
    }
    out->thinking = true;
    const char *e = find_close(t, p, n, close);
    size_t r0 = p, r1;
    const char *cut = NULL; /* the earliest markup that ends the thinking unclosed, before any closing tag */
    for (int i = 0; i < 2; i++) {
        const char *c = r->cut[i] ? find_close(t, p, n, r->cut[i]) : NULL;
        if (c && (!e || c < e) && (!cut || c < cut)) cut = c;
    }
    if (cut) {
        r1 = (size_t)(cut - t);
        out->c0 = r1;
        out->closed = true;
    } else if (e) {
        r1 = (size_t)(e - t);
        size_t c = r1 + strlen(close);
        while (c < n && ws(t[c])) c++;
        out->c0 = c;
        out->closed = true;
        if (r->resp[0]) { /* Granite: <response>answer</response> after the thinking, as llama.cpp's parser takes it */
            const size_t ro = strlen(r->resp[0]), rem = n - c;
            if (rem >= ro && !memcmp(t + c, r->resp[0], ro)) {
                out->c0 = c + ro;
                const char *rc = find_close(t, out->c0, n, r->resp[1]);
                out->c1 = rc ? (size_t)(rc - t) : partial ? n - close_partial(t + out->c0, n - out->c0, r->resp[1]) : n;
            } else if (partial && rem < ro && !memcmp(t + c, r->resp[0], rem)) {
                out->c1 = c; /* maybe the opening, still coming */
            }
        }
    } else { /* open: all reasoning so far (a partial closing tag held back) */
        r1 = n;
        if (partial) { /* a partial closing tag, or a partial markup that would end it, held back */
            size_t k = close_partial(t + p, n - p, close);
            for (int i = 0; i < 2; i++)
                if (r->cut[i] && close_partial(t + p, n - p, r->cut[i]) > k) k = close_partial(t + p, n - p, r->cut[i]);
            r1 = n - k;
        }
        out->c0 = n;
    }
    while (r0 < r1 && ws(t[r0])) r0++;
    while (r1 > r0 && ws(t[r1 - 1])) r1--;
    out->r0 = r0;
    out->r1 = r1;
    if (r->format == RS_DEEPSEEK_LEGACY) out->c0 = 0; /* the whole text stays content too */
}

void rs_spec_free(rs_spec *r)
{
    if (!r) return;
    sbuf_free(&r->seen);
    free(r);
}

void rs_stream(rs_spec *r, const char *txt, size_t n, sbuf *reasoning, sbuf *content)
{
    sbuf_add(&r->seen, txt, n);
    if (r->seen.oom) return;
    rs_split sp;
    rs_split_text(r, r->seen.p, r->seen.n, true, &sp);
    if (sp.r1 > sp.r0 && sp.r1 - sp.r0 > r->r_sent) {
        sbuf_add(reasoning, r->seen.p + sp.r0 + r->r_sent, sp.r1 - sp.r0 - r->r_sent);
        r->r_sent = sp.r1 - sp.r0;
    }
    if (sp.c1 > sp.c0 && sp.c1 - sp.c0 > r->c_sent) {
        sbuf_add(content, r->seen.p + sp.c0 + r->c_sent, sp.c1 - sp.c0 - r->c_sent);
        r->c_sent = sp.c1 - sp.c0;
    }
}

void rs_stream_final(rs_spec *r, const char *text, size_t n, sbuf *reasoning, sbuf *content)
{
    rs_split sp;
    rs_split_text(r, text, n, false, &sp);
    if (sp.r1 - sp.r0 > r->r_sent) sbuf_add(reasoning, text + sp.r0 + r->r_sent, sp.r1 - sp.r0 - r->r_sent);
    if (sp.c1 - sp.c0 > r->c_sent) sbuf_add(content, text + sp.c0 + r->c_sent, sp.c1 - sp.c0 - r->c_sent);
    r->r_sent = sp.r1 - sp.r0;
    r->c_sent = sp.c1 - sp.c0;
}

/* Free text without the tag in it (a thought without "</think>"), as GBNF: the DFA over how
 * much of the tag the text ends with, one rule per state (<prefix>-k: the last k bytes are
 * the tag's first k), right-recursive (a tail reference: the parse stacks do not grow). The
 * body may end in any state: "</thi" + "</think>" has its first tag at the end. */
void rs_gbnf_without(sbuf *g, const char *prefix, const char *tag)
{
    const size_t n = strlen(tag);
    for (size_t k = 0; k < n; k++) {
        sbuf_printf(g, "%s-%zu ::= \"\"", prefix, k);
        if (k + 1 < n) sbuf_printf(g, " | \"%c\" %s-%zu", tag[k], prefix, k + 1);
        if (k > 0) sbuf_printf(g, " | \"<\" %s-1", prefix);
        if (k == 0) sbuf_printf(g, " | [^<] %s-0\n", prefix);
        else sbuf_printf(g, " | [^%c<] %s-0\n", tag[k], prefix);
    }
}

char *rs_wrap_grammar(const char *gbnf, const char *root, bool forced_open, const char **new_root)
{
    sbuf g = {0};
    /* ws after the tag: what the model writes before its answer (bounded, as JSON's space) */
    if (forced_open) sbuf_printf(&g, RS_ROOT " ::= x-sift-think-0 \"</think>\" x-sift-think-ws %s\n", root);
    else sbuf_printf(&g, RS_ROOT " ::= ( \"<think>\" x-sift-think-0 \"</think>\" x-sift-think-ws )? %s\n", root);
    sbuf_adds(&g, "x-sift-think-ws ::= [ \\t\\n]{0,4}\n");
    rs_gbnf_without(&g, "x-sift-think", CLOSE);
    sbuf_adds(&g, gbnf);
    char *out = sbuf_strdup(&g);
    sbuf_free(&g);
    if (out) *new_root = RS_ROOT;
    return out;
}
