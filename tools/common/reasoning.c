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
 * gpt-oss (harmony) writes messages, not tags: `<|channel|>analysis<|message|>...<|end|>`, then
 * `<|start|>assistant<|channel|>final<|message|>...`, a call `<|channel|>commentary
 * to=functions.NAME <|constrain|>json<|message|>{args}` (the recipient may come before the channel
 * instead). Its reply is a view of the messages (rs_reply, the rules of llama.cpp's gpt-oss parser):
 * analysis bodies are the reasoning (each stripped), final and commentary bodies the content,
 * calls to functions.* go on to the tool-call parser as HM_CALL markup, messages to anyone else
 * (container.exec, python: calls nobody offered) are dropped; with reasoning format none the
 * analysis message stays in the content as written. A message ends at <|end|> (or <|call|>).
 * A finished reply with no message header at all is all content (llama.cpp's parser falls
 * back to the raw text when it finds none). LLM-jp 4.1 writes the same messages with a space
 * after each special token ("<|start|> assistant<|channel|> final<|message|> Hello"): its view
 * (r->spaced) skips them, and the one space before a body. A continued assistant message
 * (rs_harmony_prefill) has its start in the prompt: the view reads r->pre, then the reply, so
 * the prefilled reasoning and content are the reply's too (llama.cpp parses its generation
 * prompt with the reply).
 *
 * The same with tags (rs_think_prefill, as llama.cpp's handlers write a continued message):
 * the prompt ends with the opening tag and the message's reasoning, and when its content goes
 * on, the closing tag and the content so far; r->pre holds that (from the opening tag on) and
 * the split reads it before the reply. A template that does not think gets the content alone.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reasoning.h"
#include "tc_format.h"

static const char OPEN[] = "<think>", CLOSE[] = "</think>";
#define OPEN_N (sizeof OPEN - 1)
#define CLOSE_N (sizeof CLOSE - 1)

void rs_set_tags(rs_spec *r, int format)
{
    if (r && tc_harmony(format)) r->harmony = true; /* channels, not tags */
    if (r && format == TC_LLM_JP) r->spaced = true;
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

/* ---- gpt-oss's harmony messages ---------------------------------------------------------------- */

static const char H_MSG[] = "<|message|>", H_END[] = "<|end|>", H_CALL_END[] = "<|call|>",
                  H_CHAN[] = "<|channel|>";
enum { HM_SKIP, HM_ANALYSIS, HM_CONTENT, HM_CALL_MSG };

static bool at(const char *t, size_t i, size_t n, const char *s)
{
    const size_t l = strlen(s);
    return n - i >= l && !memcmp(t + i, s, l);
}

static bool word_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'; }

/* Past the spaces LLM-jp writes after a special token at t[i] (none but with r->spaced). */
static size_t hm_sp(bool spaced, const char *t, size_t i, size_t n)
{
    while (spaced && i < n && t[i] == ' ') i++;
    return i;
}

/* "<|start|>assistant" (LLM-jp: spaces between) at t[i]: the offset after it, or 0. */
static size_t hm_start_at(bool spaced, const char *t, size_t i, size_t n)
{
    if (!at(t, i, n, "<|start|>")) return 0;
    const size_t j = hm_sp(spaced, t, i + 9, n);
    return at(t, j, n, "assistant") ? j + 9 : 0;
}

/* The next "<|start|>assistant" in t[from..n): the offset after it, or 0. */
static size_t hm_next_start(bool spaced, const char *t, size_t from, size_t n)
{
    for (const char *s = find_close(t, from, n, "<|start|>"); s; s = find_close(t, (size_t)(s - t) + 1, n, "<|start|>")) {
        const size_t k = hm_start_at(spaced, t, (size_t)(s - t), n);
        if (k) return k;
    }
    return 0;
}

/* " to=RECIPIENT" at h[*i]: the recipient's [*r0, *r1) (up to '<' or whitespace); false when not there. */
static bool recipient(const char *h, size_t n, size_t *i, size_t *r0, size_t *r1)
{
    if (!at(h, *i, n, " to=")) return false;
    size_t j = *i + 4;
    *r0 = j;
    while (j < n && h[j] != '<' && !ws(h[j])) j++;
    *r1 = j;
    *i = j;
    return true;
}

/* A message's header h[0..n) (what comes before <|message|>): [" to=R"] <|channel|>CHANNEL [" to=R"]
 * [" " [<|constrain|>]TYPE] (spaced: spaces after the special tokens). The kind of message; a
 * call's function name in [*f0, *f1). */
static int hm_header(bool spaced, const char *h, size_t n, size_t *f0, size_t *f1)
{
    size_t i = 0, r0 = 0, r1 = 0;
    bool has_r = recipient(h, n, &i, &r0, &r1);
    for (;;) {
        if (!at(h, i, n, H_CHAN)) return HM_SKIP;
        const size_t c0 = i = hm_sp(spaced, h, i + sizeof H_CHAN - 1, n);
        while (i < n && word_char(h[i])) i++;
        const size_t c1 = i;
        if (!has_r) has_r = recipient(h, n, &i, &r0, &r1);
        /* "<|channel|>commentary to=assistant" before the real channel: gpt-oss writes it at times,
         * and llama.cpp's parser reads past it */
        if (has_r && r1 - r0 == 9 && !memcmp(h + r0, "assistant", 9) && at(h, i, n, H_CHAN)) {
            has_r = false;
            continue;
        }
        if (i < n && h[i] == ' ') { /* the constraint */
            i++;
            if (at(h, i, n, "<|constrain|>")) i = hm_sp(spaced, h, i + 13, n);
            const size_t t0 = i;
            while (i < n && word_char(h[i])) i++;
            if (i == t0) return HM_SKIP;
        }
        if (i != n) return HM_SKIP;
        const bool analysis = c1 - c0 == 8 && !memcmp(h + c0, "analysis", 8);
        const bool commentary = c1 - c0 == 10 && !memcmp(h + c0, "commentary", 10);
        const bool final = c1 - c0 == 5 && !memcmp(h + c0, "final", 5);
        if (has_r) { /* a call: to functions.* on analysis or commentary; any other recipient is nobody's */
            if (!(analysis || commentary) || r1 - r0 <= 10 || memcmp(h + r0, "functions.", 10)) return HM_SKIP;
            *f0 = r0 + 10;
            *f1 = r1;
            return HM_CALL_MSG;
        }
        return analysis ? HM_ANALYSIS : final || commentary ? HM_CONTENT : HM_SKIP;
    }
}

/* The earliest of the two markers in t[from..n) (its offset, *len its length), or n. */
static size_t hm_body_end(const char *t, size_t from, size_t n, bool calls, size_t *len)
{
    const char *e = find_close(t, from, n, H_END), *c = calls ? find_close(t, from, n, H_CALL_END) : NULL;
    if (c && (!e || c < e)) e = c, *len = sizeof H_CALL_END - 1;
    else *len = sizeof H_END - 1;
    return e ? (size_t)(e - t) : n;
}

/* The harmony view (rs_reply): message by message, as llama.cpp's gpt-oss parser reads them. */
static void hm_view(const rs_spec *r, const char *t, size_t n, bool partial, sbuf *reasoning, sbuf *content)
{
    const bool raw_analysis = r->format == RS_NONE || r->format == RS_DEEPSEEK_LEGACY;
    size_t p = hm_start_at(r->spaced, t, 0, n); /* (a reply that repeats the role's opening) */
    for (bool first = true;; first = false) {
        const char *m = find_close(t, p, n, H_MSG);
        if (!m && first && !partial) { /* no message at all (a model that ignores the format): all of it is content */
            sbuf_add(content, t, n);
            return;
        }
        if (!m) return; /* a header still coming (or cut off): nothing of it */
        size_t f0 = 0, f1 = 0, end_len = 0;
        const int kind = hm_header(r->spaced, t + p, (size_t)(m - t) - p, &f0, &f1);
        size_t b0 = (size_t)(m - t) + sizeof H_MSG - 1;
        if (r->spaced && b0 < n && t[b0] == ' ') b0++; /* (LLM-jp: one space, not the body's; a second one is) */
        const size_t e = hm_body_end(t, b0, n, kind == HM_CALL_MSG, &end_len);
        size_t b1 = e;
        if (e == n && partial) { /* the body goes on: a marker it may end with held back */
            size_t k = close_partial(t + b0, n - b0, H_END);
            if (kind == HM_CALL_MSG && close_partial(t + b0, n - b0, H_CALL_END) > k) k = close_partial(t + b0, n - b0, H_CALL_END);
            b1 = n - k;
        }
        if (kind == HM_ANALYSIS && raw_analysis) /* as written, its end marker too */
            sbuf_add(content, t + p, (e < n ? e + end_len : b1) - p);
        if (kind == HM_ANALYSIS && r->format != RS_NONE) {
            size_t r0 = b0, r1 = b1;
            while (r0 < r1 && ws(t[r0])) r0++;
            while (r1 > r0 && ws(t[r1 - 1])) r1--; /* (held back while it may still go on) */
            sbuf_add(reasoning, t + r0, r1 - r0);
        } else if (kind == HM_CONTENT) {
            sbuf_add(content, t + b0, b1 - b0);
        } else if (kind == HM_CALL_MSG && r->calls) {
            sbuf_adds(content, HM_CALL);
            sbuf_add(content, t + p + f0, f1 - f0);
            sbuf_adds(content, H_MSG);
            sbuf_add(content, t + b0, b1 - b0);
        }
        if (e == n) return;
        p = hm_next_start(r->spaced, t, e + end_len, n); /* what lies between is nobody's */
        if (!p) return;
    }
}

/* The view of r->pre (the prompt's part of the reply, if any) and then t[0..n). */
static void hm_view_all(const rs_spec *r, const char *t, size_t n, bool partial, sbuf *reasoning, sbuf *content)
{
    if (!r->pre) {
        hm_view(r, t, n, partial, reasoning, content);
        return;
    }
    sbuf all = {0};
    sbuf_adds(&all, r->pre);
    sbuf_add(&all, t, n);
    if (all.oom) reasoning->oom = content->oom = true;
    else hm_view(r, all.p, all.n, partial, reasoning, content);
    sbuf_free(&all);
}

size_t rs_hm_analysis(const rs_spec *r, const char *t, size_t from, size_t n, size_t *resume)
{
    static const char body[] = "analysis<|message|>";
    const size_t hn = sizeof H_CHAN - 1, bn = sizeof body - 1;
    *resume = n > from + hn - 1 ? n - (hn - 1) : from; /* a header cut short at the end starts in its last hn-1 bytes */
    for (const char *c = find_close(t, from, n, H_CHAN); c; c = find_close(t, (size_t)(c - t) + 1, n, H_CHAN)) {
        const size_t i = hm_sp(r->spaced, t, (size_t)(c - t) + hn, n);
        if (at(t, i, n, body)) return i + bn;
        if (n - i < bn && !memcmp(t + i, body, n - i)) { /* undecided until more text comes: read it again */
            *resume = (size_t)(c - t);
            break; /* (a later <|channel|> would sit inside this header's rest, which cannot hold one) */
        }
    }
    return 0;
}

void rs_harmony_prefill(sbuf *out, const char *reasoning, const char *content, bool reasoning_open)
{
    sbuf_adds(out, "<|channel|>analysis<|message|>");
    sbuf_adds(out, reasoning ? reasoning : "");
    if (reasoning_open) return;
    sbuf_adds(out, "<|end|><|start|>assistant<|channel|>final<|message|>");
    sbuf_adds(out, content ? content : "");
}

size_t rs_prompt_think_at(const rs_spec *r, const char *prompt, size_t n, bool *forced_open)
{
    const char *open = r && r->open ? r->open : OPEN, *close = r && r->close ? r->close : CLOSE;
    const size_t on = strlen(open), cn = strlen(close);
    size_t e = n;
    *forced_open = false;
    while (e && ws(prompt[e - 1])) e--;
    if (e >= on && !memcmp(prompt + e - on, open, on)) { /* the thinking left open: continued as written */
        *forced_open = true;
        return e - on;
    }
    if (e < cn || memcmp(prompt + e - cn, close, cn)) return n; /* no thinking in the generation prompt */
    size_t b = e - cn; /* an empty thinking (thinking off): the prefill's own replaces it */
    while (b && ws(prompt[b - 1])) b--;
    return b >= on && !memcmp(prompt + b - on, open, on) ? b - on : n;
}

void rs_think_prefill(sbuf *out, const rs_spec *r, bool opened, const char *reasoning, const char *content, bool reasoning_open)
{
    /* a generation prompt that opened the thinking on a line of its own ("<think>\n": Qwen 3.5,
     * Reka Edge) gets the closing tag on its own too, as those templates write a thought */
    const bool lines = opened && out->n && out->p[out->n - 1] == '\n';
    if (!opened) sbuf_adds(out, r && r->open ? r->open : OPEN);
    sbuf_adds(out, reasoning ? reasoning : "");
    if (reasoning_open) return;
    if (lines) sbuf_adds(out, "\n");
    sbuf_adds(out, r && r->close ? r->close : CLOSE); /* (Granite's too: llama.cpp writes no <response> here) */
    if (lines) sbuf_adds(out, "\n\n");
    sbuf_adds(out, content ? content : "");
}

/* t[0..n) after r->pre (a continued message's start the prompt holds), in *buf when there is
 * one: the text the view reads. NULL when out of memory. */
static const char *with_pre(const rs_spec *r, const char *t, size_t *n, sbuf *buf)
{
    if (!r || !r->pre) return t;
    sbuf_adds(buf, r->pre);
    sbuf_add(buf, t, *n);
    if (buf->oom) return NULL;
    *n = buf->n;
    return buf->p;
}

void rs_reply(const rs_spec *r, const char *t, size_t n, bool partial, sbuf *reasoning, sbuf *content)
{
    if (r && r->harmony) {
        hm_view_all(r, t, n, partial, reasoning, content);
        return;
    }
    sbuf all = {0};
    if (!(t = with_pre(r, t, &n, &all))) {
        reasoning->oom = content->oom = true;
        return;
    }
    rs_split sp;
    rs_split_text(r, t, n, partial, &sp);
    sbuf_add(reasoning, t + sp.r0, sp.r1 - sp.r0);
    sbuf_add(content, t + sp.c0, sp.c1 - sp.c0);
    sbuf_free(&all);
}

void rs_spec_free(rs_spec *r)
{
    if (!r) return;
    sbuf_free(&r->seen);
    free(r->pre);
    free(r);
}

/* harmony: what grew of the view's reasoning and content since they were last sent */
static void hm_stream(rs_spec *r, const char *t, size_t n, bool partial, sbuf *reasoning, sbuf *content)
{
    sbuf rr = {0}, cc = {0};
    hm_view_all(r, t, n, partial, &rr, &cc);
    if (!rr.oom && rr.n > r->r_sent) {
        const size_t k = partial ? rr.n - utf8_incomplete_tail(rr.p, rr.n) : rr.n; /* never half a character */
        if (k > r->r_sent) sbuf_add(reasoning, rr.p + r->r_sent, k - r->r_sent), r->r_sent = k;
    }
    if (!cc.oom && cc.n > r->c_sent) {
        const size_t k = partial ? cc.n - utf8_incomplete_tail(cc.p, cc.n) : cc.n;
        if (k > r->c_sent) sbuf_add(content, cc.p + r->c_sent, k - r->c_sent), r->c_sent = k;
    }
    sbuf_free(&rr);
    sbuf_free(&cc);
}

void rs_stream(rs_spec *r, const char *txt, size_t n, sbuf *reasoning, sbuf *content)
{
    if (r->pre && !r->harmony && !r->seen.n) sbuf_adds(&r->seen, r->pre); /* the view starts with the prompt's part */
    sbuf_add(&r->seen, txt, n);
    if (r->seen.oom) return;
    if (r->harmony) {
        hm_stream(r, r->seen.p, r->seen.n, true, reasoning, content);
        return;
    }
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
    if (r->harmony) {
        hm_stream(r, text, n, false, reasoning, content);
        return;
    }
    sbuf all = {0};
    if (!(text = with_pre(r, text, &n, &all))) {
        reasoning->oom = content->oom = true;
        return;
    }
    rs_split sp;
    rs_split_text(r, text, n, false, &sp);
    if (sp.r1 - sp.r0 > r->r_sent) sbuf_add(reasoning, text + sp.r0 + r->r_sent, sp.r1 - sp.r0 - r->r_sent);
    if (sp.c1 - sp.c0 > r->c_sent) sbuf_add(content, text + sp.c0 + r->c_sent, sp.c1 - sp.c0 - r->c_sent);
    r->r_sent = sp.r1 - sp.r0;
    r->c_sent = sp.c1 - sp.c0;
    sbuf_free(&all);
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

char *rs_wrap_harmony(const char *gbnf, const char *root, bool spaced, rs_hm_start at_, const char **new_root)
{
    sbuf g = {0};
    /* LLM-jp: spaces after the special tokens (bounded), one before a body */
    const char *sp = spaced ? " x-sift-hmw-sp" : "", *msg = spaced ? "\"<|message|>\" \" \"?" : "\"<|message|>\"";
    const char *con = spaced ? "( \" \" ( \"<|constrain|>\" x-sift-hmw-sp )? [a-zA-Z0-9_-]{1,16} )?" : "( \" \" \"<|constrain|>\"? [a-zA-Z0-9_-]{1,16} )?";
    sbuf_adds(&g, RS_ROOT " ::= ");
    if (at_ == RS_HM_REPLY) sbuf_printf(&g, "( \"<|channel|>\"%s \"analysis\" %s x-sift-hm-think-0 \"<|end|><|start|>\"%s \"assistant\" )? ", sp, msg, sp);
    else sbuf_printf(&g, "x-sift-hm-think-0 \"<|end|><|start|>\"%s \"assistant\" ", sp);
    if (at_ != RS_HM_IN_MESSAGE) sbuf_printf(&g, "\"<|channel|>\"%s \"final\" %s %s ", sp, con, msg);
    sbuf_printf(&g, "%s\n", root);
    if (spaced) sbuf_adds(&g, "x-sift-hmw-sp ::= [ ]{0,4}\n");
    rs_gbnf_without(&g, "x-sift-hm-think", "<|end|>");
    sbuf_adds(&g, gbnf);
    char *out = sbuf_strdup(&g);
    sbuf_free(&g);
    if (out) *new_root = RS_ROOT;
    return out;
}
