/*
 * tool_calls.c - OpenAI tool calling on /v1/chat/completions, as llama-server's --jinja has it.
 *
 * Four jobs, all pure (no HTTP, no engine), so tests/server_tools_unit.c drives them alone:
 *
 *   the format     which syntax the template's model writes a call in, from the template's
 *                  text (tc_detect): Hermes/Qwen `<tool_call>{json}</tool_call>`, Llama 3.x
 *                  `{"name": ..., "parameters": ...}`, Mistral `[TOOL_CALLS][{...}]`, DeepSeek
 *                  R1, Functionary v3.1 and v3.2, Command R7B, gpt-oss's harmony channels (the
 *                  view of reasoning.c hands its calls on as HM_CALL markup), else the generic JSON reply of
 *                  llama.cpp's common/chat.cpp ({"tool_call": {...}} or {"response": "..."};
 *                  the template is then told so by a system message). Two formats wrap their
 *                  content too (Command R7B's <|START_RESPONSE|>, Functionary v3.2's "all\n"
 *                  recipient): their content is not a prefix of the reply (content_of).
 *   the request    tools, tool_choice (auto, none, required, a named function) and
 *                  parallel_tool_calls -> tc_spec: the callable names and one grammar for the
 *                  calls. Each function's call object ({"name": const, "arguments": its
 *                  parameters schema}) is one branch of an anyOf, converted by libsift's JSON
 *                  schema converter (llama.cpp's conventions, lenient: a keyword it cannot
 *                  express widens the grammar instead of failing), then wrapped in the
 *                  format's syntax under the start rule TC_ROOT. With tool_choice auto the
 *                  grammar is lazy: it waits for the format's opening (the trigger words); with
 *                  required or a named function it binds from the first token.
 *   the messages   assistant tool_calls with string arguments get them parsed into objects
 *                  for templates that `tojson` them (chat_jinja_object_args; minja's
 *                  polyfill does the same).
 *   the bounds     whitespace between JSON tokens bounded tighter than llama.cpp's space, the
 *                  closing markup right after the call, and (tc_budget) free strings held to
 *                  a quarter of max_tokens when the grammar binds from the first token: a
 *                  constrained call closes within the budget even on a tiny model.
 *   the reply      text -> content + calls (tc_parse_output), and for streaming how much text
 *                  is surely content (tc_content_safe). The grammar makes a finished call
 *                  well-formed; a call cut off by max_tokens parses as no call, and the text
 *                  comes back as content.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

/* ---- the format -------------------------------------------------------------------------------- */

/* Functionary v3.2's recipient line for content */
#define FN32_ALL "all\n"

static const char *const hermes_triggers[] = {"<tool_call>"};
static const char *const llama3_triggers[] = {"<|python_tag|>"};
/* Llama 3.x's other opening, `{"name"` with the whitespace the grammar's `space` allows
 * after the brace: a trigger pattern (llama3_open finds the same in replies) */
#define LLAMA3_PATTERN "\\{(?: |\\n[ \\t]{0,4})?\"name\""
static const char *const mistral_triggers[] = {"[TOOL_CALLS]"};
static const char *const fn31_triggers[] = {"<function="};
static const char *const r7b_triggers[] = {R7B_ACTION};
static const char *const granite_triggers[] = {"<|tool_call|>"};
/* gpt-oss: a call in the channel's header (the word), or in the role's: at the reply's start (the
 * prompt ends with <|start|>assistant) or after a message; the grammar starts at the group */
static const char *const hm_triggers[] = {HM_CALL};
#define HM_PATTERN "^( to=functions\\.)|(<\\|start\\|>assistant to=functions\\.)|(<\\|channel\\|>analysis to=functions\\.)"
/* LLM-jp: the same with its spaces after the special tokens, as many as the grammar takes (x-sift-hm-sp); the
 * channel's form in the pattern too (the word has no spaces) */
#define HM_PATTERN_SPACED "^( to=functions\\.)|(<\\|start\\|> {0,4}assistant to=functions\\.)|(<\\|channel\\|> {0,4}(?:analysis|commentary) to=functions\\.)"
static const char *const kimi_triggers[] = {KIMI_SECTION, KIMI_CALL};
/* the opening as R1 writes it, and the spellings llama.cpp also takes (its models drift) */
static const char *const r1_triggers[] = {R1_CALLS_BEGIN, "<｜tool_calls_begin｜>",
                                          "<｜tool calls begin｜>",
                                          "<｜tool\\_calls\\_begin｜>",
                                          "<｜tool▁calls｜>"};

static const char *const *format_triggers(tc_format f, int *n)
{
    switch (f) {
    case TC_HERMES:
    case TC_GLM45:
    case TC_QWEN3_CODER: *n = 1; return hermes_triggers;
    case TC_LLAMA3: *n = 1; return llama3_triggers;
    case TC_MISTRAL: *n = 1; return mistral_triggers;
    case TC_DEEPSEEK_R1:
    case TC_DEEPSEEK_V31: *n = (int)(sizeof r1_triggers / sizeof *r1_triggers); return r1_triggers;
    case TC_FUNCTIONARY_V31: *n = 1; return fn31_triggers;
    case TC_COMMAND_R7B: *n = 1; return r7b_triggers;
    case TC_GRANITE: *n = 1; return granite_triggers;
    case TC_KIMI_K2: *n = 2; return kimi_triggers;
    case TC_GPT_OSS: *n = 1; return hm_triggers;
    default: *n = 0; return NULL; /* (Functionary v3.2's are its functions' names: tc_parse_request) */
    }
}

void tc_caps_json(const char *t, cJSON *caps)
{
    const char *s = t ? t : "";
    const bool calls = strstr(s, "tool_calls") != NULL;
    cJSON_AddBoolToObject(caps, "supports_system_role", strstr(s, "system") != NULL);
    cJSON_AddBoolToObject(caps, "supports_tools", strstr(s, "tools") != NULL);
    cJSON_AddBoolToObject(caps, "supports_tool_calls", calls);
    cJSON_AddBoolToObject(caps, "supports_tool_responses", strstr(s, "tool_call_id") || strstr(s, "'tool'") || strstr(s, "\"tool\""));
    cJSON_AddBoolToObject(caps, "supports_parallel_tool_calls",
                          calls && (strstr(s, "in message.tool_calls") || strstr(s, "in message['tool_calls']") ||
                                    strstr(s, "in tool_calls") || strstr(s, "[TOOL_CALLS] [")));
    cJSON_AddStringToObject(caps, "tool_call_format", tc_format_name(tc_detect(t)));
}

/* ---- the request --------------------------------------------------------------------------------- */

void tc_spec_free(tc_spec *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_triggers; i++) free(t->triggers[i]);
    free(t->triggers);
    for (int i = 0; i < t->n_names; i++) free(t->names[i]);
    free(t->names);
    free(t->gbnf);
    free(t->pattern);
    free(t->think_pattern);
    cJSON_Delete(t->params);
    free(t->streamed);
    sbuf_free(&t->seen);
    free(t);
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* Every "$ref" inside one tool's parameters that points into its own document ("#",
 * "#/$defs/Item", "#/properties/a") made to point into the combined schema, where those
 * parameters now live at `base` ("#/$defs/x-sift-tool-3"). Literal data (const, enum,
 * default, examples) is left alone: an object there is a value, not a schema. */
static bool rebase_refs(cJSON *node, const char *base)
{
    for (cJSON *k = node ? node->child : NULL; k; k = k->next) {
        if (k->string && (!strcmp(k->string, "const") || !strcmp(k->string, "enum") || !strcmp(k->string, "default") ||
                          !strcmp(k->string, "examples")))
            continue;
        if (k->string && !strcmp(k->string, "$ref") && cJSON_IsString(k) && k->valuestring[0] == '#') {
            sbuf b = {0};
            sbuf_adds(&b, base);
            sbuf_adds(&b, k->valuestring + 1);
            char *r = sbuf_strdup(&b);
            sbuf_free(&b);
            if (!r || !cJSON_SetValuestring(k, r)) {
                free(r);
                return false;
            }
            free(r);
        } else if ((cJSON_IsObject(k) || cJSON_IsArray(k)) && !rebase_refs(k, base)) {
            return false;
        }
    }
    return true;
}

/* Each tool's schema stands alone: its parameters go whole into the combined schema's $defs
 * under a name of their own ("x-sift-tool-<index>"), their own $defs and definitions still
 * inside them, and their references are rebased there; so two tools that both define "Item"
 * each get their own, and "#" or "#/properties/..." inside a tool's parameters mean that
 * tool's parameters (not the wrapper around them). base (cap >= 48): the pointer to them. */
static void store_params(const cJSON *params, cJSON *root, int index, char *base, size_t cap)
{
    cJSON *p = params ? cJSON_Duplicate(params, true) : cJSON_CreateObject();
    char key[32];
    snprintf(key, sizeof key, "x-sift-tool-%d", index);
    snprintf(base, cap, "#/$defs/%s", key);
    if (p && cJSON_IsObject(p)) {
        /* an empty parameters schema still means an object of arguments */
        if (!get(p, "type") && !get(p, "anyOf") && !get(p, "oneOf") && !get(p, "$ref")) cJSON_AddStringToObject(p, "type", "object");
        if (!rebase_refs(p, base)) {
            cJSON_Delete(p);
            p = NULL;
        }
    }
    cJSON *defs = cJSON_GetObjectItemCaseSensitive(root, "$defs");
    if (!defs) defs = cJSON_AddObjectToObject(root, "$defs");
    if (p) cJSON_AddItemToObject(defs, key, p);
}

/* The call object of one function (the index-th tool): {"name": const, "<args_key>":
 * parameters}, the parameters stored apart (store_params). Command R7B's: {"tool_call_id":
 * digits, "tool_name": const, "parameters": ...}, as llama.cpp's grammar has it. */
static cJSON *call_schema(tc_format f, const char *name, const cJSON *params, const char *args_key, cJSON *root, int index)
{
    const char *name_key = f == TC_COMMAND_R7B ? "tool_name" : "name";
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "object");
    cJSON *props = cJSON_AddObjectToObject(o, "properties");
    cJSON *req = cJSON_AddArrayToObject(o, "required");
    if (f == TC_COMMAND_R7B) {
        cJSON *id = cJSON_AddObjectToObject(props, "tool_call_id");
        cJSON_AddStringToObject(id, "type", "string");
        cJSON_AddStringToObject(id, "pattern", "^[0-9]{1,10}$");
        cJSON_AddItemToArray(req, cJSON_CreateString("tool_call_id"));
    }
    cJSON_AddStringToObject(cJSON_AddObjectToObject(props, name_key), "const", name);
    char base[48];
    store_params(params, root, index, base, sizeof base);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(props, args_key), "$ref", base);
    cJSON_AddItemToArray(req, cJSON_CreateString(name_key));
    cJSON_AddItemToArray(req, cJSON_CreateString(args_key));
    cJSON_AddBoolToObject(o, "additionalProperties", false);
    return o;
}

static int add_name(tc_spec *t, const char *name)
{
    char **n = realloc(t->names, (size_t)(t->n_names + 1) * sizeof *n);
    if (!n) return -1;
    t->names = n;
    if (!(n[t->n_names] = strdup(name))) return -1;
    t->n_names++;
    return 0;
}

/* GLM 4.5: is this argument's value written raw (a string), not as JSON? */
static bool glm_raw(const cJSON *prop)
{
    const cJSON *ty = cJSON_IsObject(prop) ? cJSON_GetObjectItemCaseSensitive(prop, "type") : NULL;
    return cJSON_IsString(ty) && !strcmp(ty->valuestring, "string");
}

/* GLM 4.5: each non-string property j of the index-th function's parameters (stored at base)
 * as the schema property x-sift-glm-<index>-<j> (a $ref to it: its own grammar rule). -1: OOM. */
static int glm_arg_rules(const cJSON *params, const char *base, int index, cJSON *props, cJSON *req)
{
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(params, "properties");
    int j = 0;
    for (const cJSON *k = cJSON_IsObject(pp) ? pp->child : NULL; k; k = k->next, j++) {
        if (glm_raw(k)) continue;
        sbuf ref = {0};
        sbuf_printf(&ref, "%s/properties/", base);
        for (const char *c = k->string; *c; c++) { /* a JSON pointer's escapes */
            if (*c == '~') sbuf_adds(&ref, "~0");
            else if (*c == '/') sbuf_adds(&ref, "~1");
            else sbuf_add(&ref, c, 1);
        }
        char prop[48];
        snprintf(prop, sizeof prop, "x-sift-glm-%d-%d", index, j);
        char *r = sbuf_strdup(&ref);
        sbuf_free(&ref);
        if (!r) return -1;
        cJSON_AddStringToObject(cJSON_AddObjectToObject(props, prop), "$ref", r);
        cJSON_AddItemToArray(req, cJSON_CreateString(prop));
        free(r);
    }
    return 0;
}

/* A GBNF string literal of s (quotes, backslashes and control bytes escaped). */
static void gbnf_lit(sbuf *g, const char *s)
{
    sbuf_add(g, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') sbuf_printf(g, "\\%c", *c);
        else if (*c < 0x20) sbuf_printf(g, "\\x%02x", *c);
        else sbuf_add(g, c, 1);
    }
    sbuf_add(g, "\"", 1);
}

/* The two formats that write each argument in markup of its own, its value raw or JSON:
 *   GLM 4.5      <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n...</tool_call>
 *   Qwen3-Coder  <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n...</function>\n</tool_call>
 * A value is raw text where the function's schema types the argument "string", else JSON. */
typedef struct xml_style {
    const char *open;                 /* the call's opening, then (after whitespace) open2, then the name */
    const char *open2;
    const char *name_end;             /* after the name ("": the name ends at a newline or '<') */
    const char *key_open, *key_close; /* around an argument's name */
    const char *value_open;           /* after whitespace, before the value ("": none) */
    const char *value_close;
    const char *close, *close2;       /* the call's closing, in two parts (whitespace between) */
    const char *key_chars;            /* GBNF class of a name not in the schema */
    bool trim_nl;                     /* one newline at each end of a value is markup */
} xml_style;
static const xml_style glm_style = {"<tool_call>", "", "", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "", "</tool_call>", "[^<]", false};
static const xml_style qwen_style = {"<tool_call>", "<function=", ">", "<parameter=", ">", "", "</parameter>", "</function>", "</tool_call>", "[^>\\n]", true};

static const xml_style *xml_style_of(tc_format f) { return f == TC_GLM45 ? &glm_style : &qwen_style; }

/* One argument's markup in GBNF, its value's rule `val` (the name's literal already written). */
static void xml_piece_tail(sbuf *g, const xml_style *st, const char *val)
{
    sbuf_adds(g, " ");
    gbnf_lit(g, st->key_close);
    sbuf_adds(g, " x-sift-xml-nl ");
    if (*st->value_open) {
        gbnf_lit(g, st->value_open);
        sbuf_adds(g, " ");
    }
    sbuf_printf(g, "%s x-sift-xml-nl ", val);
    gbnf_lit(g, st->value_close);
    sbuf_adds(g, " x-sift-xml-nl");
}

/* The calls' grammar: per function, the required arguments in the schema's order, then the
 * optional ones in any order (llama.cpp's takes them so); a string's value raw (without the
 * value's closing tag), any other's JSON (rule x-sift-glm-<i>-<j>); a function without
 * properties takes any names with raw values. */
static void xml_grammar(sbuf *g, const tc_spec *t)
{
    const xml_style *st = xml_style_of(t->format);
    sbuf_printf(g, TC_ROOT " ::= x-sift-xml-tc%s\n", t->parallel ? " (x-sift-xml-nl x-sift-xml-tc)*" : "");
    sbuf_adds(g, "x-sift-xml-nl ::= [\\n]?\nx-sift-xml-tc ::= ");
    gbnf_lit(g, st->open);
    if (*st->open2) {
        sbuf_adds(g, " x-sift-xml-nl ");
        gbnf_lit(g, st->open2);
    }
    sbuf_adds(g, " (");
    for (int i = 0; i < t->n_names; i++) sbuf_printf(g, "%sx-sift-xml-call-%d", i ? " | " : " ", i);
    sbuf_adds(g, " ) ");
    if (*st->close) {
        gbnf_lit(g, st->close);
        sbuf_adds(g, " x-sift-xml-nl ");
    }
    gbnf_lit(g, st->close2);
    sbuf_adds(g, "\n");
    rs_gbnf_without(g, "x-sift-xml-raw", st->value_close);
    for (int i = 0; i < t->n_names; i++) {
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(t->params, t->names[i]);
        const cJSON *pp = cJSON_GetObjectItemCaseSensitive(params, "properties");
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
        sbuf_printf(g, "x-sift-xml-call-%d ::= ", i);
        gbnf_lit(g, t->names[i]);
        if (*st->name_end) {
            sbuf_adds(g, " ");
            gbnf_lit(g, st->name_end);
        }
        sbuf_adds(g, " x-sift-xml-nl");
        if (!cJSON_IsObject(pp) || !pp->child) { /* any names, raw values */
            sbuf_adds(g, " (");
            gbnf_lit(g, st->key_open);
            sbuf_printf(g, " %s+", st->key_chars);
            xml_piece_tail(g, st, "x-sift-xml-raw-0");
            sbuf_adds(g, ")*\n");
            continue;
        }
        for (int pass = 0; pass < 2; pass++) { /* required, then optional */
            int j = 0, n_opt = 0;
            for (const cJSON *k = pp->child; k; k = k->next, j++) {
                bool required = false;
                for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r; r = r->next)
                    required |= cJSON_IsString(r) && !strcmp(r->valuestring, k->string);
                if (required != (pass == 0)) continue;
                sbuf_adds(g, pass ? (n_opt++ ? " | " : " (") : " ");
                sbuf_adds(g, "(");
                gbnf_lit(g, st->key_open);
                sbuf_adds(g, " ");
                gbnf_lit(g, k->string);
                char val[48];
                if (glm_raw(k)) snprintf(val, sizeof val, "x-sift-xml-raw-0");
                else snprintf(val, sizeof val, "x-sift-glm-%d-%d", i, j);
                xml_piece_tail(g, st, val);
                sbuf_adds(g, ")");
            }
            if (pass && n_opt) sbuf_adds(g, " )*");
        }
        sbuf_adds(g, "\n");
    }
}

/* gpt-oss, as llama.cpp's grammar: the recipient in the role's header (" to=functions.NAME"
 * then the channel) or in the channel's ("<|channel|>commentary to=functions.NAME"), an optional
 * " <|constrain|>json", the arguments. Lazy, from the trigger (the role's opening optional); else
 * from the first token, after an optional analysis message and an optional commentary one (their
 * bodies x-sift-hm-body: any text without <|end|>, bounded by tc_budget). LLM-jp's dialect
 * (t->spaced): spaces after the special tokens (x-sift-hm-sp), one before a body, and parallel
 * calls each a message of their own after the first's <|end|> (llama.cpp's LLM-jp grammar). */
static void hm_grammar(sbuf *g, const tc_spec *t)
{
    const bool sp = t->spaced;
    if (sp)
        sbuf_adds(g, "x-sift-hm-sp ::= [ ]{0,4}\n"
                     "x-sift-hm-chan ::= \"<|channel|>\" x-sift-hm-sp ( \"commentary\" | \"analysis\" )\n"
                     "x-sift-hm-con ::= ( \" \" ( \"<|constrain|>\" x-sift-hm-sp )? [a-zA-Z0-9_-]{1,16} )?\n"
                     "x-sift-hm-msg ::= \"<|message|>\" \" \"?\n"
                     "x-sift-hm-start ::= \"<|start|>\" x-sift-hm-sp \"assistant\"\n");
    else
        sbuf_adds(g, "x-sift-hm-chan ::= \"<|channel|>\" ( \"commentary\" | \"analysis\" )\n"
                     "x-sift-hm-con ::= \" <|constrain|>json\"?\n"
                     "x-sift-hm-msg ::= \"<|message|>\"\n"
                     "x-sift-hm-start ::= \"<|start|>assistant\"\n");
    for (int pass = 0; pass < 2; pass++) { /* the recipient in the role's header, then in the channel's */
        sbuf_adds(g, pass ? "x-sift-hm-inchan ::= x-sift-hm-chan \" to=functions.\" (" : "x-sift-hm-role ::= (");
        for (int i = 0; i < t->n_names; i++)
            sbuf_printf(g, "%s\"%s\"%s x-sift-hm-con x-sift-hm-msg x-sift-args-%d", i ? " | " : " ", t->names[i],
                        pass ? "" : " x-sift-hm-chan", i);
        sbuf_adds(g, " )\n");
    }
    /* one call; LLM-jp's parallel calls: more, each after <|end|> and the role's opening */
    sbuf_adds(g, "x-sift-hm-call ::= \" to=functions.\" x-sift-hm-role | x-sift-hm-inchan\n");
    const char *more = sp && t->parallel ? " ( \"<|end|>\" x-sift-hm-start x-sift-hm-call )*" : "";
    char calls[96];
    snprintf(calls, sizeof calls, "x-sift-hm-call%s", more);
    if (t->lazy) { /* (from the trigger: the role's opening before a recipient in its header) */
        sbuf_printf(g, TC_ROOT " ::= ( x-sift-hm-start? \" to=functions.\" x-sift-hm-role | x-sift-hm-inchan )%s\n", more);
        return;
    }
    sbuf_printf(g, TC_ROOT " ::= ( \"<|channel|>\"%s \"analysis\" x-sift-hm-msg x-sift-hm-body \"<|end|>\" x-sift-hm-start )? "
                   "( \"<|channel|>\"%s \"commentary\" x-sift-hm-msg x-sift-hm-body \"<|end|>\" x-sift-hm-start )? %s\n"
                   "x-sift-hm-body ::= x-sift-hm-free-0\n",
                sp ? " x-sift-hm-sp" : "", sp ? " x-sift-hm-sp" : "", calls);
    rs_gbnf_without(g, "x-sift-hm-free", "<|end|>");
}

/* The format's wrapper around the calls' JSON rule `root` (DeepSeek R1: around each
 * function's arguments rule, x-sift-args-<i>). */
static void wrap_grammar(sbuf *g, const tc_spec *t)
{
    const bool parallel = t->parallel;
    switch (t->format) {
    case TC_HERMES:
        sbuf_adds(g, TC_ROOT " ::= x-sift-tc-block");
        if (parallel) sbuf_adds(g, " (space x-sift-tc-block)*");
        sbuf_adds(g, "\nx-sift-tc-block ::= \"<tool_call>\" space root \"</tool_call>\"\n");
        break;
    case TC_LLAMA3:
        sbuf_adds(g, TC_ROOT " ::= \"<|python_tag|>\"? root");
        if (parallel) sbuf_adds(g, " (\";\"? space root)*");
        sbuf_adds(g, "\n");
        break;
    case TC_MISTRAL:
    case TC_GRANITE: /* (Granite's opening instead of Mistral's) */
        sbuf_printf(g, TC_ROOT " ::= \"%s\" space \"[\" space root", t->format == TC_GRANITE ? "<|tool_call|>" : "[TOOL_CALLS]");
        if (parallel) sbuf_adds(g, " (\",\" space root)*");
        sbuf_adds(g, " \"]\"\n");
        break;
    case TC_FUNCTIONARY_V31: /* <function=NAME>{args}</function>, one after the other */
        sbuf_printf(g, TC_ROOT " ::= x-sift-fn-call%s\nx-sift-fn-call ::= \"<function=\" (", parallel ? "+" : "");
        for (int i = 0; i < t->n_names; i++) sbuf_printf(g, "%s\"%s>\" x-sift-args-%d", i ? " | " : " ", t->names[i], i);
        sbuf_adds(g, " ) \"</function>\"\n");
        break;
    case TC_COMMAND_R7B: /* as llama.cpp's: a JSON array of call objects between the action tags */
        sbuf_adds(g, TC_ROOT " ::= \"" R7B_ACTION "[\" space root");
        if (parallel) sbuf_adds(g, " (\",\" space root)*");
        sbuf_adds(g, " \"]" R7B_ACTION_END "\"\n");
        break;
    case TC_FUNCTIONARY_V32:
        /* NAME\n{args} right after the prompt's ">>>" (or, lazy, from the trigger ">>>NAME\n"),
         * then with parallel calls >>>NAME\n{args} again */
        sbuf_printf(g, TC_ROOT " ::= \">>>\"? x-sift-fn32-call%s\nx-sift-fn32-call ::= (", parallel ? " (\">>>\" x-sift-fn32-call)*" : "");
        for (int i = 0; i < t->n_names; i++) sbuf_printf(g, "%s\"%s\\n\" x-sift-args-%d", i ? " | " : " ", t->names[i], i);
        sbuf_adds(g, " )\n");
        break;
    case TC_GLM45:
    case TC_QWEN3_CODER: xml_grammar(g, t); break;
    case TC_GPT_OSS: hm_grammar(g, t); break;
    case TC_KIMI_K2:
        /* as llama.cpp's, the id "functions.NAME:IDX" written by the model; each call and the section closed */
        sbuf_printf(g, TC_ROOT " ::= \"" KIMI_SECTION "\"? x-sift-kimi-call%s \"" KIMI_SECTION_END "\"\n", parallel ? "+" : "");
        sbuf_adds(g, "x-sift-kimi-call ::= \"" KIMI_CALL "functions.\" (");
        for (int i = 0; i < t->n_names; i++)
            sbuf_printf(g, "%s\"%s:\" [0-9]{1,6} \"" KIMI_ARGS "\" x-sift-args-%d", i ? " | " : " ", t->names[i], i);
        sbuf_adds(g, " ) \"" KIMI_CALL_END "\"\n");
        break;
    case TC_DEEPSEEK_R1:
    case TC_DEEPSEEK_V31:
        /* as llama.cpp's: any of the openings, the calls, the closing; a call's "begin" token optional;
         * R1 writes "function<sep>NAME" and fenced JSON, V3.1 "NAME<sep>" and the JSON */
        sbuf_adds(g, TC_ROOT " ::= (");
        for (int i = 0; i < t->n_triggers; i++) sbuf_printf(g, "%s\"%s\"", i ? " | " : " ", i == 3 ? "<｜tool\\\\_calls\\\\_begin｜>" : t->triggers[i]);
        sbuf_printf(g, " ) x-sift-r1-call%s \"" R1_CALLS_END "\"\n", parallel ? "+" : "");
        sbuf_adds(g, "x-sift-r1-call ::= \"" R1_CALL_BEGIN "\"? ");
        if (t->format == TC_DEEPSEEK_R1) sbuf_adds(g, "\"function" R1_SEP "\" ");
        sbuf_adds(g, "(");
        for (int i = 0; i < t->n_names; i++) {
            if (t->format == TC_DEEPSEEK_R1) sbuf_printf(g, "%s\"%s\\n```json\\n\" x-sift-args-%d", i ? " | " : " ", t->names[i], i);
            else sbuf_printf(g, "%s\"%s" R1_SEP "\" x-sift-args-%d", i ? " | " : " ", t->names[i], i);
        }
        sbuf_printf(g, " ) \"%s" R1_CALL_END "\"\n", t->format == TC_DEEPSEEK_R1 ? "```" : "");
        break;
    default:
        sbuf_adds(g, TC_ROOT " ::= root\n");
        break;
    }
}

/* gbnf with the body of rule `name` replaced (the converter writes each rule on a line of its
 * own, "name ::= body"), appended to g. */
static void add_replacing(sbuf *g, const char *gbnf, const char *name, const char *body)
{
    const size_t nl_ = strlen(name);
    for (const char *p = gbnf; *p;) {
        const char *nl = strchr(p, '\n');
        const size_t n = nl ? (size_t)(nl - p + 1) : strlen(p);
        if (!strncmp(p, name, nl_) && !strncmp(p + nl_, " ::= ", 5)) {
            sbuf_printf(g, "%s ::= %s\n", name, body);
        } else {
            sbuf_add(g, p, n);
        }
        p += n;
    }
}

void tc_budget(tc_spec *t, int n_predict)
{
    if (!t || t->lazy || n_predict <= 0 || n_predict >= TC_BUDGET_FREE) return;
    char body[64];
    snprintf(body, sizeof body, "\"\\\"\" char{0,%d} \"\\\"\" space", n_predict / 4 > 8 ? n_predict / 4 : 8);
    sbuf g = {0};
    add_replacing(&g, t->gbnf, "string", body);
    if (t->format == TC_GPT_OSS && !g.oom) { /* (and the messages before the call: text without '<') */
        char *g1 = sbuf_strdup(&g);
        snprintf(body, sizeof body, "[^<]{0,%d}", n_predict / 4 > 8 ? n_predict / 4 : 8);
        sbuf_free(&g);
        if (g1) add_replacing(&g, g1, "x-sift-hm-body", body);
        else g.oom = true;
        free(g1);
    }
    char *s = sbuf_strdup(&g);
    sbuf_free(&g);
    if (!s) return; /* out of memory: the unbounded grammar stays, still correct */
    free(t->gbnf);
    t->gbnf = s;
}

/* Functionary v3.2's lazy triggers, from the callable names: ">>>NAME\n" anywhere, and
 * "NAME\n" as the reply's first line (the prompt ended with ">>>"), as llama.cpp's. -1: OOM. */
static int fn32_triggers(tc_spec *t)
{
    char **tr = calloc((size_t)t->n_names + 1, sizeof *tr);
    if (!tr) return -1;
    t->triggers = tr;
    sbuf p = {0};
    sbuf_adds(&p, "^((?:");
    for (int i = 0; i < t->n_names; i++) {
        sbuf w = {0};
        sbuf_printf(&w, ">>>%s\n", t->names[i]);
        if (!(tr[t->n_triggers] = sbuf_strdup(&w))) {
            sbuf_free(&w);
            sbuf_free(&p);
            return -1;
        }
        t->n_triggers++;
        sbuf_free(&w);
        if (i) sbuf_adds(&p, "|");
        for (const char *c = t->names[i]; *c; c++) {
            if (*c == '.' || *c == '-') sbuf_add(&p, "\\", 1);
            sbuf_add(&p, c, 1);
        }
    }
    sbuf_adds(&p, ")\\n)");
    t->pattern = sbuf_strdup(&p);
    sbuf_free(&p);
    return t->pattern ? 0 : -1;
}

int tc_parse_request(tc_format f, const cJSON *root, tc_spec **out, srv_error *e)
{
    *out = NULL;
    const bool spaced = f == TC_LLM_JP; /* gpt-oss's format in LLM-jp's dialect: the view normalizes its replies */
    if (spaced) f = TC_GPT_OSS;
    const cJSON *tools = get(root, "tools"), *choice = get(root, "tool_choice"), *par = get(root, "parallel_tool_calls");
    if (tools && !cJSON_IsNull(tools) && !cJSON_IsArray(tools)) return srv_errorf(e, 400, "'tools' must be an array of tools");
    if (par && !cJSON_IsNull(par) && !cJSON_IsBool(par)) return srv_errorf(e, 400, "'parallel_tool_calls' must be a boolean");
    const int n_tools = cJSON_IsArray(tools) ? cJSON_GetArraySize(tools) : 0;
    /* tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}} */
    const char *mode = "auto", *only = NULL;
    if (choice && !cJSON_IsNull(choice)) {
        if (cJSON_IsString(choice)) {
            mode = choice->valuestring;
            if (strcmp(mode, "none") && strcmp(mode, "auto") && strcmp(mode, "required"))
                return srv_errorf(e, 400, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}, got \"%.64s\"", mode);
        } else {
            const cJSON *fn = cJSON_IsObject(choice) ? get(choice, "function") : NULL;
            const cJSON *nm = cJSON_IsObject(fn) ? get(fn, "name") : NULL;
            if (!cJSON_IsString(nm) || !*nm->valuestring)
                return srv_errorf(e, 400, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
            only = nm->valuestring;
            mode = "required";
        }
    }
    if (n_tools == 0) {
        if (!strcmp(mode, "required")) return srv_errorf(e, 400, "'tool_choice' asks for a tool call, but 'tools' is empty");
        return 0;
    }
    /* every tool is checked, even when tool_choice is none (the template renders them) */
    int i = 0;
    for (const cJSON *x = tools->child; x; x = x->next, i++) {
        const cJSON *type = cJSON_IsObject(x) ? get(x, "type") : NULL;
        const cJSON *fn = cJSON_IsObject(x) ? get(x, "function") : NULL;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 || !cJSON_IsObject(fn))
            return srv_errorf(e, 400, "'tools[%d]' must be {\"type\": \"function\", \"function\": {\"name\", \"parameters\"}}", i);
        const cJSON *nm = get(fn, "name"), *params = get(fn, "parameters");
        if (!cJSON_IsString(nm) || !*nm->valuestring)
            return srv_errorf(e, 400, "'tools[%d].function.name' must be a non-empty string", i);
        for (const char *c = nm->valuestring; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-' && *c != '.')
                return srv_errorf(e, 400, "'tools[%d].function.name' must be letters, digits, '_', '-' or '.', got \"%.64s\"", i, nm->valuestring);
        if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))
            return srv_errorf(e, 400, "'tools[%d].function.parameters' must be a JSON schema object", i);
        for (const cJSON *y = tools->child; y != x; y = y->next)
            if (!strcmp(get(get(y, "function"), "name")->valuestring, nm->valuestring))
                return srv_errorf(e, 400, "'tools[%d].function.name' \"%.64s\" is given twice", i, nm->valuestring);
    }
    if (only) {
        bool found = false;
        for (const cJSON *x = tools->child; x; x = x->next) found |= !strcmp(get(get(x, "function"), "name")->valuestring, only);
        if (!found) return srv_errorf(e, 400, "'tool_choice' names the function \"%.64s\", which is not in 'tools'", only);
    }
    if (!strcmp(mode, "none")) return 0;

    tc_spec *t = calloc(1, sizeof *t);
    cJSON *schema = cJSON_CreateObject(), *any = NULL;
    if (!t || !schema) goto oom;
    t->format = f;
    t->spaced = spaced;
    t->parallel = cJSON_IsTrue(par);
    t->lazy = !strcmp(mode, "auto") && f != TC_GENERIC;
    int n_trig = 0;
    const char *const *trig = format_triggers(f, &n_trig);
    if (n_trig && !(t->triggers = calloc((size_t)n_trig, sizeof *t->triggers))) goto oom;
    for (int k = 0; k < n_trig; k++)
        if (!(t->triggers[t->n_triggers++] = strdup(trig[k]))) goto oom;
    if (f == TC_LLAMA3 && !(t->pattern = strdup(LLAMA3_PATTERN))) goto oom;
    if (f == TC_GPT_OSS && !(t->pattern = strdup(spaced ? HM_PATTERN_SPACED : HM_PATTERN))) goto oom;

    /* the calls' JSON: one anyOf branch per callable function */
    const char *args_key = f == TC_LLAMA3 || f == TC_COMMAND_R7B ? "parameters" : "arguments";
    any = cJSON_CreateArray();
    if (!any) goto oom;
    /* DeepSeek R1 and Functionary write each call's name in its markup and only the arguments as JSON: an
     * object whose properties x-sift-args-<i> are the functions' parameters gives each its
     * own rule of that name (the converter names a property's rule after it) */
    cJSON *r1_props = NULL, *r1_req = NULL;
    const bool per_fn = f == TC_DEEPSEEK_R1 || f == TC_FUNCTIONARY_V31 || f == TC_FUNCTIONARY_V32 || f == TC_KIMI_K2 ||
                        f == TC_DEEPSEEK_V31 || f == TC_GLM45 || f == TC_QWEN3_CODER || f == TC_GPT_OSS; /* a rule per function's arguments */
    const bool xml = f == TC_GLM45 || f == TC_QWEN3_CODER;
    if (xml && !(t->params = cJSON_CreateObject())) goto oom;
    if (per_fn) {
        cJSON_AddStringToObject(schema, "type", "object");
        r1_props = cJSON_AddObjectToObject(schema, "properties");
        r1_req = cJSON_AddArrayToObject(schema, "required");
    }
    int ti = 0;
    for (const cJSON *x = tools->child; x; x = x->next, ti++) {
        const cJSON *fn = get(x, "function");
        const char *name = get(fn, "name")->valuestring;
        if (only && strcmp(name, only) != 0) continue;
        const cJSON *params = get(fn, "parameters");
        if (add_name(t, name)) goto oom;
        if (xml) { /* a rule per non-string argument (x-sift-glm-<i>-<j>); the values' types kept */
            char base[48];
            store_params(cJSON_IsObject(params) ? params : NULL, schema, ti, base, sizeof base);
            cJSON *dup = cJSON_IsObject(params) ? cJSON_Duplicate(params, true) : cJSON_CreateObject();
            if (!dup) goto oom;
            cJSON_AddItemToObject(t->params, name, dup);
            if (glm_arg_rules(dup, base, t->n_names - 1, r1_props, r1_req)) goto oom;
            continue;
        }
        if (per_fn) {
            char base[48], prop[32];
            store_params(cJSON_IsObject(params) ? params : NULL, schema, ti, base, sizeof base);
            snprintf(prop, sizeof prop, "x-sift-args-%d", t->n_names - 1);
            cJSON_AddStringToObject(cJSON_AddObjectToObject(r1_props, prop), "$ref", base);
            cJSON_AddItemToArray(r1_req, cJSON_CreateString(prop));
            continue;
        }
        cJSON_AddItemToArray(any, call_schema(f, name, cJSON_IsObject(params) ? params : NULL, args_key, schema, ti));
    }
    if (f == TC_FUNCTIONARY_V32 && fn32_triggers(t)) goto oom;
    if (per_fn) { /* no call object: the schema is complete */
        cJSON_Delete(any);
        any = cJSON_CreateObject();
    }
    cJSON *call = any;
    if (per_fn) { /* (an empty object: nothing to add to the schema) */
    } else if (cJSON_GetArraySize(any) == 1) {
        call = cJSON_DetachItemFromArray(any, 0);
        cJSON_Delete(any);
    } else {
        cJSON *wrap = cJSON_CreateObject();
        cJSON_AddItemToObject(wrap, "anyOf", any);
        call = wrap;
    }
    any = NULL;
    if (f == TC_GENERIC) { /* {"tool_call": call} / {"tool_calls": [call, ...]}, or (auto) {"response": "..."} */
        cJSON *tc = cJSON_CreateObject();
        cJSON_AddStringToObject(tc, "type", "object");
        cJSON *props = cJSON_AddObjectToObject(tc, "properties");
        cJSON *req = cJSON_AddArrayToObject(tc, "required");
        if (t->parallel) {
            cJSON *arr = cJSON_AddObjectToObject(props, "tool_calls");
            cJSON_AddStringToObject(arr, "type", "array");
            cJSON_AddItemToObject(arr, "items", call);
            cJSON_AddNumberToObject(arr, "minItems", 1);
            cJSON_AddItemToArray(req, cJSON_CreateString("tool_calls"));
        } else {
            cJSON_AddItemToObject(props, "tool_call", call);
            cJSON_AddItemToArray(req, cJSON_CreateString("tool_call"));
        }
        cJSON_AddBoolToObject(tc, "additionalProperties", false);
        call = tc;
        if (!strcmp(mode, "auto")) {
            cJSON *resp = cJSON_CreateObject();
            cJSON_AddStringToObject(resp, "type", "object");
            cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(resp, "properties"), "response"), "type", "string");
            cJSON_AddItemToArray(cJSON_AddArrayToObject(resp, "required"), cJSON_CreateString("response"));
            cJSON_AddBoolToObject(resp, "additionalProperties", false);
            cJSON *a = cJSON_CreateArray();
            cJSON_AddItemToArray(a, call);
            cJSON_AddItemToArray(a, resp);
            call = cJSON_CreateObject();
            cJSON_AddItemToObject(call, "anyOf", a);
        }
    }
    /* the combined schema: the call's keywords, beside the hoisted $defs */
    for (cJSON *k = call->child; k;) {
        cJSON *next = k->next;
        cJSON_AddItemToObject(schema, k->string, cJSON_DetachItemViaPointer(call, k));
        k = next;
    }
    cJSON_Delete(call);
    char *text = cJSON_PrintUnformatted(schema);
    cJSON_Delete(schema);
    schema = NULL;
    if (!text) goto oom;
    sift_error se = {0};
    srv_prio_background(); /* the client sets the cost of what follows (prio.c) */
    char *g = sift_json_schema_to_grammar(text, strlen(text), SIFT_JSON_SCHEMA_LLAMA | SIFT_JSON_SCHEMA_LENIENT, &se);
    free(text);
    if (!g) {
        tc_spec_free(t);
        return srv_errorf(e, se.status == SIFT_E_NOMEM ? 500 : 400, "'tools': a function's parameters schema: %s", se.msg);
    }
    sbuf gb = {0};
    wrap_grammar(&gb, t);
    add_replacing(&gb, g, "space", "| \" \" | \"\\n\" [ \\t]{0,4}");
    free(g);
    t->gbnf = sbuf_strdup(&gb);
    sbuf_free(&gb);
    if (!t->gbnf) goto oom;
    *out = t;
    return 0;
oom:
    cJSON_Delete(any);
    cJSON_Delete(schema);
    tc_spec_free(t);
    return srv_errorf(e, 500, "out of memory");
}

int tc_think_trigger(tc_spec *t, bool forced_open)
{
    sbuf p = {0};
    /* past the thinking: after its closing tag (the prompt opened it), or after a <think>...</think>
     * at the start, or anywhere in a reply that does not start thinking */
    sbuf_adds(&p, forced_open ? "^[\\s\\S]*?</think>[\\s\\S]*?("
                              : "^(?:\\s*<think>[\\s\\S]*?</think>|(?!\\s*<think>))[\\s\\S]*?(");
    for (int i = 0; i < t->n_triggers; i++) {
        if (i) sbuf_adds(&p, "|");
        for (const char *c = t->triggers[i]; *c; c++) {
            if (strchr("\\^$.|?*+()[]{}", *c)) sbuf_add(&p, "\\", 1);
            sbuf_add(&p, c, 1);
        }
    }
    if (t->pattern) {
        if (t->n_triggers) sbuf_adds(&p, "|");
        sbuf_adds(&p, t->pattern);
    }
    sbuf_adds(&p, ")");
    free(t->think_pattern);
    t->think_pattern = sbuf_strdup(&p);
    sbuf_free(&p);
    return t->think_pattern ? 0 : -1;
}

/* ---- the messages ------------------------------------------------------------------------------ */

static const char generic_prompt[] =
    "Respond in JSON. To call a tool, reply {\"tool_call\": {\"name\": <the tool's name>, \"arguments\": <its "
    "arguments as an object>}}; to answer the user directly, reply {\"response\": <your answer as a string>}.";
static const char generic_prompt_parallel[] =
    "Respond in JSON. To call tools, reply {\"tool_calls\": [{\"name\": <a tool's name>, \"arguments\": <its "
    "arguments as an object>}, ...]}; to answer the user directly, reply {\"response\": <your answer as a string>}.";

cJSON *tc_template_messages(const cJSON *messages, const tc_spec *spec, bool object_args)
{
    cJSON *m = cJSON_Duplicate(messages, true);
    if (!m) return NULL;
    for (cJSON *x = object_args ? m->child : NULL; x; x = x->next) {
        cJSON *calls = cJSON_GetObjectItemCaseSensitive(x, "tool_calls");
        for (cJSON *c = cJSON_IsArray(calls) ? calls->child : NULL; c; c = c->next) {
            cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
            cJSON *args = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
            if (!cJSON_IsString(args)) continue;
            cJSON *obj = cJSON_Parse(args->valuestring);
            if (obj) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj);
        }
    }
    if (spec && spec->format == TC_GENERIC) {
        const char *p = spec->parallel ? generic_prompt_parallel : generic_prompt;
        cJSON *first = m->child;
        cJSON *role = first ? cJSON_GetObjectItemCaseSensitive(first, "role") : NULL;
        cJSON *content = first ? cJSON_GetObjectItemCaseSensitive(first, "content") : NULL;
        if (cJSON_IsString(content) && ((cJSON_IsString(role) && !strcmp(role->valuestring, "system")) || spec->no_system)) {
            sbuf b = {0};
            sbuf_adds(&b, content->valuestring);
            sbuf_adds(&b, "\n\n");
            sbuf_adds(&b, p);
            char *s = sbuf_strdup(&b);
            sbuf_free(&b);
            if (s) cJSON_ReplaceItemInObjectCaseSensitive(first, "content", cJSON_CreateString(s));
            free(s);
        } else if (!spec->no_system) {
            cJSON *sys = cJSON_CreateObject();
            cJSON_AddStringToObject(sys, "role", "system");
            cJSON_AddStringToObject(sys, "content", p);
            cJSON_InsertItemInArray(m, 0, sys);
        }
    }
    return m;
}

/* ---- the reply --------------------------------------------------------------------------------- */

void tc_result_free(tc_result *r)
{
    free(r->content);
    for (int i = 0; i < r->n_calls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].arguments);
    }
    free(r->calls);
    memset(r, 0, sizeof *r);
}

/* Llama 3.x's `{` + whitespace + `"name"` (LLAMA3_PATTERN, with any whitespace) in
 * text[0..n): its offset, or -1; *partial (may be NULL): the offset of a `{` near the end
 * that the next tokens may turn into one (n when none). */
static long llama3_open(const char *text, size_t n, size_t *partial)
{
    static const char key[] = "\"name\"";
    if (partial) *partial = n;
    for (size_t i = 0; i < n; i++) {
        if (text[i] != '{') continue;
        size_t j = i + 1;
        while (j < n && (text[j] == ' ' || text[j] == '\n' || text[j] == '\t' || text[j] == '\r')) j++;
        size_t k = 0;
        while (k < sizeof key - 1 && j + k < n && text[j + k] == key[k]) k++;
        if (k == sizeof key - 1) return (long)i;
        if (j + k == n && partial && *partial == n) *partial = i; /* the text ends inside it */
    }
    return -1;
}

/* Functionary v3.2: does the reply open with a call, "NAME\n" for a callable NAME (the prompt
 * ended with ">>>")? *maybe (may be NULL): the text so far is a part of one. */
static bool fn32_first(const tc_spec *spec, const char *text, size_t n, bool *maybe)
{
    if (maybe) *maybe = false;
    for (int i = 0; i < spec->n_names; i++) {
        const size_t l = strlen(spec->names[i]);
        if (n > l && !memcmp(text, spec->names[i], l) && text[l] == '\n') return true;
        if (maybe && n <= l && !memcmp(text, spec->names[i], n)) *maybe = true;
    }
    return false;
}

/* The earliest call opening in text[0..n) (-1 when none). */
static long find_start(const tc_spec *spec, const char *text, size_t n)
{
    if (spec->format == TC_GENERIC) return n ? 0 : -1;
    int which = 0;
    long at = stop_find(text, n, 0, spec->triggers, spec->n_triggers, &which);
    if (spec->format == TC_LLAMA3) {
        const long b = llama3_open(text, n, NULL);
        if (b >= 0 && (at < 0 || b < at)) at = b;
    }
    if (spec->format == TC_FUNCTIONARY_V32 && fn32_first(spec, text, n, NULL)) at = 0;
    return at;
}

size_t tc_content_safe(const tc_spec *spec, const char *text, size_t n)
{
    if (spec->format == TC_GENERIC) return 0; /* the whole reply is JSON: content only once it is complete */
    const long at = find_start(spec, text, n);
    if (at >= 0) return (size_t)at;
    size_t safe = n - stop_partial(text, n, spec->triggers, spec->n_triggers);
    if (spec->format == TC_FUNCTIONARY_V32) {
        bool maybe;
        fn32_first(spec, text, n, &maybe);
        if (maybe || (n < sizeof FN32_ALL - 1 && !memcmp(text, FN32_ALL, n)) || (n < sizeof FN32_ALL + 2 && !memcmp(text, ">>>" FN32_ALL, n)))
            return 0; /* the recipient line is still coming */
    }
    if (spec->format == TC_LLAMA3) {
        size_t partial = n;
        llama3_open(text, n, &partial);
        if (partial < safe) safe = partial;
    }
    return safe;
}

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static bool has_prefix(const char *p, const char *end, const char *s)
{
    const size_t l = strlen(s);
    return (size_t)(end - p) >= l && !memcmp(p, s, l);
}

/* One JSON value at p (cJSON needs the bytes terminated: a copy). *next: just after it. */
static cJSON *parse_json_at(const char *p, const char *end, const char **next)
{
    const size_t n = (size_t)(end - p);
    char *copy = malloc(n + 1);
    if (!copy) return NULL;
    memcpy(copy, p, n);
    copy[n] = 0;
    const char *stop = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(copy, n, &stop, false);
    if (v) *next = p + (stop - copy);
    free(copy);
    return v;
}

static void make_id(char *id, size_t cap)
{
    static atomic_uint counter;
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t x = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)atomic_fetch_add(&counter, 1) + 1) * 0xD1B54A32D192ED03ull;
    x ^= (uint64_t)(uintptr_t)id;
    /* "call_" + 9 alphanumerics: Mistral's templates want at least 9 (and use the last 9) */
    snprintf(id, cap, "call_");
    for (size_t i = 5; i < 14 && i + 1 < cap; i++) {
        x ^= x >> 31;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 29;
        id[i] = al[x % (sizeof al - 1)];
        id[i + 1] = 0;
    }
}

/* The end of the JSON value that starts at p (strings and nesting followed; a scalar ends at
 * a delimiter); NULL when the text ends first. */
static const char *value_end(const char *p, const char *end)
{
    int depth = 0;
    bool str = false;
    for (const char *q = p; q < end; q++) {
        const char c = *q;
        if (str) {
            if (c == '\\') q++;
            else if (c == '"' && (str = false, depth == 0)) return q + 1;
            continue;
        }
        if (c == '"') str = true;
        else if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') {
            if (--depth <= 0) return depth == 0 ? q + 1 : (q == p ? NULL : q);
        } else if (depth == 0 && (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r')) return q;
    }
    return NULL;
}

/* JSON text p..end without the whitespace outside strings (the arguments as they are
 * streamed and returned: the model's own text, compact). cJSON, which checked the call,
 * takes raw control bytes inside strings and any byte up to ' ' as whitespace; JSON does
 * not, and a client's parser would refuse the arguments: outside strings they are dropped
 * like whitespace, inside they become \u00XX escapes. Byte by byte, so a longer text's
 * output extends a shorter one's (what streaming sends stays a prefix). */
static void minify(const char *p, const char *end, sbuf *out)
{
    bool str = false;
    const char *run = p;
    for (const char *q = p; q < end; q++) {
        const unsigned char c = (unsigned char)*q;
        if (str) {
            if (c == '\\' && q + 1 < end && (unsigned char)q[1] >= 0x20) q++;
            else if (c == '"') str = false;
            else if (c < 0x20) {
                char esc[8];
                snprintf(esc, sizeof esc, "\\u%04x", c);
                sbuf_add(out, run, (size_t)(q - run));
                sbuf_add(out, esc, 6);
                run = q + 1;
            }
        } else if (c == '"') {
            str = true;
        } else if (c <= 0x20) {
            sbuf_add(out, run, (size_t)(q - run));
            run = q + 1;
        }
    }
    sbuf_add(out, run, (size_t)(end - run));
}

/* What a call object's text at p ('{') shows so far: the name (once its string is whole),
 * the arguments' value (args_end once whole), the object's end. */
typedef struct call_scan {
    const char *name, *name_end;
    const char *id, *id_end;   /* Command R7B's "tool_call_id" string (its text, unescaped if plain) */
    const char *args, *args_end;
    const char *end;
} call_scan;

static void scan_call(const char *p, const char *end, const char *name_key, const char *args_key, call_scan *cs)
{
    const size_t nk = strlen(name_key);
    memset(cs, 0, sizeof *cs);
    if (p >= end || *p != '{') return;
    p++;
    for (;;) {
        p = skip_ws(p, end);
        if (p >= end) return;
        if (*p == '}') {
            cs->end = p + 1;
            return;
        }
        if (*p == ',') {
            p++;
            continue;
        }
        const char *k = p, *k_end = *p == '"' ? value_end(p, end) : NULL;
        if (!k_end) return;
        p = skip_ws(k_end, end);
        if (p >= end || *p != ':') return;
        p = skip_ws(p + 1, end);
        if (p >= end) return;
        const char *v = p, *v_end = value_end(p, end);
        const size_t kl = (size_t)(k_end - k) - 2;
        if (kl == 12 && !memcmp(k + 1, "tool_call_id", 12) && v_end && *v == '"') {
            cs->id = v + 1;
            cs->id_end = v_end - 1;
        } else if (kl == nk && !memcmp(k + 1, name_key, nk) && v_end && *v == '"') {
            cs->name = v + 1;
            cs->name_end = v_end - 1;
        } else if ((kl == strlen(args_key) && !memcmp(k + 1, args_key, kl)) || (kl == 9 && !memcmp(k + 1, "arguments", 9))) {
            cs->args = v;
            cs->args_end = v_end;
        }
        if (!v_end) return;
        p = v_end;
    }
}

static bool known(const tc_spec *spec, const char *name)
{
    for (int i = 0; i < spec->n_names; i++)
        if (!strcmp(spec->names[i], name)) return true;
    return spec->n_names == 0;
}

static bool known_n(const tc_spec *spec, const char *name, size_t n)
{
    for (int i = 0; i < spec->n_names; i++)
        if (strlen(spec->names[i]) == n && !memcmp(spec->names[i], name, n)) return true;
    return false;
}

/* A call object {"name", <args_key>} -> res; false when it is not one. raw..raw_end: its
 * text, when the reply has it: the arguments are then that text, compact (what streaming
 * sends); else cJSON's printing. */
/* A call into res: name (name_n bytes) and its arguments' JSON text args..args_end, compact
 * (or `printed`, cJSON's printing, when the text is not the model's). Takes printed. */
static bool push_call(tc_result *res, const char *name, size_t name_n, const char *args, const char *args_end, char *printed)
{
    tc_call *c = realloc(res->calls, (size_t)(res->n_calls + 1) * sizeof *c);
    if (!c) {
        free(printed);
        return false;
    }
    res->calls = c;
    c += res->n_calls;
    memset(c, 0, sizeof *c);
    c->name = strndup(name, name_n);
    if (printed) {
        c->arguments = printed;
    } else {
        sbuf m = {0};
        minify(args, args_end, &m);
        c->arguments = sbuf_strdup(&m);
        sbuf_free(&m);
    }
    if (!c->name || !c->arguments) {
        free(c->name);
        free(c->arguments);
        return false;
    }
    make_id(c->id, sizeof c->id);
    res->n_calls++;
    return true;
}

/* The model's own id for call c (id..id_end), when it fits and is plain text; else c keeps its own. */
static void own_id(tc_call *c, const char *id, const char *id_end)
{
    const size_t il = (size_t)(id_end - id);
    if (!il || il >= sizeof c->id || memchr(id, '\\', il) || memchr(id, '"', il)) return;
    memcpy(c->id, id, il);
    c->id[il] = 0;
}

static bool take_call(const tc_spec *spec, const cJSON *o, const char *args_key, tc_result *res, const char *raw,
                      const char *raw_end)
{
    const char *name_key = spec->format == TC_COMMAND_R7B ? "tool_name" : "name";
    const cJSON *nm = cJSON_IsObject(o) ? get(o, name_key) : NULL;
    const cJSON *args = cJSON_IsObject(o) ? get(o, args_key) : NULL;
    if (!args && cJSON_IsObject(o)) args = get(o, "arguments");
    if (!cJSON_IsString(nm) || !known(spec, nm->valuestring) || !args) return false;
    cJSON *parsed = NULL;
    if (cJSON_IsString(args)) args = parsed = cJSON_Parse(args->valuestring);
    if (!cJSON_IsObject(args)) {
        cJSON_Delete(parsed);
        return false;
    }
    call_scan cs;
    if (raw) scan_call(raw, raw_end, name_key, args_key, &cs);
    const bool own_text = raw && !parsed && cs.args && cs.args_end && *cs.args == '{';
    char *printed = own_text ? NULL : cJSON_PrintUnformatted(args);
    cJSON_Delete(parsed);
    if (!own_text && !printed) return false;
    if (!push_call(res, nm->valuestring, strlen(nm->valuestring), own_text ? cs.args : NULL, own_text ? cs.args_end : NULL,
                   printed))
        return false;
    /* Command R7B numbers its calls: the id is the model's, as llama.cpp keeps it (its text, as
     * streaming sends it) */
    if (spec->format == TC_COMMAND_R7B && raw && cs.id) own_id(&res->calls[res->n_calls - 1], cs.id, cs.id_end);
    return true;
}

/* DeepSeek R1: one call at p, "[<｜tool▁call▁begin｜>]function<｜tool▁sep｜>NAME\n```json\n
 * {args}\n```<｜tool▁call▁end｜>": the name once its line is whole, the arguments' value,
 * the end after the call's closing token (each NULL until the text has it). */
static void r1_scan(const char *p, const char *end, call_scan *cs)
{
    memset(cs, 0, sizeof *cs);
    p = skip_ws(p, end);
    if (has_prefix(p, end, R1_CALL_BEGIN)) p += strlen(R1_CALL_BEGIN);
    if (!has_prefix(p, end, "function" R1_SEP)) return;
    p += strlen("function" R1_SEP);
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) return;
    cs->name = p;
    cs->name_end = nl;
    p = nl + 1;
    if (!has_prefix(p, end, "```json\n")) return;
    p = skip_ws(p + strlen("```json\n"), end);
    if (p >= end) return;
    cs->args = p;
    if (!(cs->args_end = value_end(p, end))) return;
    p = skip_ws(cs->args_end, end);
    if (!has_prefix(p, end, "```")) return;
    p = skip_ws(p + 3, end);
    if (has_prefix(p, end, R1_CALL_END)) cs->end = p + strlen(R1_CALL_END);
}

/* DeepSeek V3.1: one call at p, "[<｜tool▁call▁begin｜>]NAME<｜tool▁sep｜>{args}<｜tool▁call▁end｜>". */
static void v31_scan(const char *p, const char *end, call_scan *cs)
{
    memset(cs, 0, sizeof *cs);
    p = skip_ws(p, end);
    if (has_prefix(p, end, R1_CALL_BEGIN)) p += strlen(R1_CALL_BEGIN);
    const char *name = p;
    while (p < end && *p != '\n' && *p != '<' && !has_prefix(p, end, R1_SEP)) p++;
    if (p == name || !has_prefix(p, end, R1_SEP)) return;
    cs->name = name;
    cs->name_end = p;
    p = skip_ws(p + strlen(R1_SEP), end);
    if (p >= end) return;
    cs->args = p;
    if (!(cs->args_end = value_end(p, end))) return;
    p = skip_ws(cs->args_end, end);
    if (has_prefix(p, end, R1_CALL_END)) cs->end = p + strlen(R1_CALL_END);
}

/* Functionary v3.1: one call at p, "<function=NAME>{args}</function>". */
static void fn31_scan(const char *p, const char *end, call_scan *cs)
{
    memset(cs, 0, sizeof *cs);
    p = skip_ws(p, end);
    if (!has_prefix(p, end, "<function=")) return;
    p += strlen("<function=");
    const char *gt = memchr(p, '>', (size_t)(end - p));
    if (!gt) return;
    cs->name = p;
    cs->name_end = gt;
    p = skip_ws(gt + 1, end);
    if (p >= end) return;
    cs->args = p;
    if (!(cs->args_end = value_end(p, end))) return;
    p = skip_ws(cs->args_end, end);
    if (has_prefix(p, end, "</function>")) cs->end = p + strlen("</function>");
}

/* Functionary v3.2: one call at p, "[>>>]NAME\n{args}": it ends with its arguments (only
 * whitespace, or the next ">>>", follows). */
static void fn32_scan(const char *p, const char *end, call_scan *cs)
{
    memset(cs, 0, sizeof *cs);
    if (has_prefix(p, end, ">>>")) p += 3;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) return;
    cs->name = p;
    cs->name_end = nl;
    p = skip_ws(nl + 1, end);
    if (p >= end) return;
    cs->args = p;
    if ((cs->args_end = value_end(p, end))) cs->end = cs->args_end;
}

/* Kimi K2: one call at p, "[<|tool_calls_section_begin|>]<|tool_call_begin|>functions.NAME:IDX
 * <|tool_call_argument_begin|>{args}[<|tool_call_end|>]": the id is "functions.NAME:IDX"; the
 * call's closing token may be missing, as llama.cpp allows. */
static void kimi_scan(const char *p, const char *end, call_scan *cs)
{
    memset(cs, 0, sizeof *cs);
    p = skip_ws(p, end);
    if (has_prefix(p, end, KIMI_SECTION)) p = skip_ws(p + strlen(KIMI_SECTION), end);
    if (!has_prefix(p, end, KIMI_CALL "functions.")) return;
    const char *id = p + strlen(KIMI_CALL);
    p += strlen(KIMI_CALL "functions.");
    const char *colon = memchr(p, ':', (size_t)(end - p));
    if (!colon) return;
    const char *q = colon + 1;
    while (q < end && *q >= '0' && *q <= '9') q++;
    if (q == colon + 1 || !has_prefix(q, end, KIMI_ARGS)) return;
    cs->name = p;
    cs->name_end = colon;
    cs->id = id;
    cs->id_end = q;
    p = skip_ws(q + strlen(KIMI_ARGS), end);
    if (p >= end) return;
    cs->args = p;
    if (!(cs->args_end = value_end(p, end))) return;
    p = skip_ws(cs->args_end, end);
    cs->end = has_prefix(p, end, KIMI_CALL_END) ? p + strlen(KIMI_CALL_END) : cs->args_end;
}

/* gpt-oss: one call at p as the harmony view writes it, HM_CALL NAME "<|message|>" {args}. */
static void hm_scan(const char *p, const char *end, call_scan *cs)
{
    memset(cs, 0, sizeof *cs);
    p = skip_ws(p, end);
    if (!has_prefix(p, end, HM_CALL)) return;
    p += strlen(HM_CALL);
    const char *name = p;
    while (p < end && *p != '<') p++;
    if (!has_prefix(p, end, "<|message|>")) return;
    cs->name = name;
    cs->name_end = p;
    p = skip_ws(p + strlen("<|message|>"), end);
    if (p >= end) return;
    cs->args = p;
    cs->args_end = cs->end = value_end(p, end);
}

/* The call at p in a format that names the function in its markup (R1, Functionary v3.1, v3.2, Kimi K2, gpt-oss). */
static void markup_scan(const tc_spec *spec, const char *p, const char *end, call_scan *cs)
{
    if (spec->format == TC_DEEPSEEK_R1) r1_scan(p, end, cs);
    else if (spec->format == TC_FUNCTIONARY_V32) fn32_scan(p, end, cs);
    else if (spec->format == TC_KIMI_K2) kimi_scan(p, end, cs);
    else if (spec->format == TC_DEEPSEEK_V31) v31_scan(p, end, cs);
    else if (spec->format == TC_GPT_OSS) hm_scan(p, end, cs);
    else fn31_scan(p, end, cs);
}

/* p at one of the format's openings: just after it (p when none). */
static const char *skip_trigger(const tc_spec *spec, const char *p, const char *end)
{
    for (int i = 0; i < spec->n_triggers; i++)
        if (has_prefix(p, end, spec->triggers[i])) return p + strlen(spec->triggers[i]);
    return p;
}

/* DeepSeek R1's, Functionary v3.1's and Kimi K2's calls, each complete up to its closing token (R1's
 * calls' closing token may be missing, as llama.cpp allows); with parallel calls, a reply
 * cut off keeps the complete ones before the cut. */
static bool parse_markup(const tc_spec *spec, const char *p, const char *end, tc_result *res)
{
    if (spec->format == TC_DEEPSEEK_R1 || spec->format == TC_DEEPSEEK_V31) p = skip_trigger(spec, p, end);
    for (;;) {
        call_scan cs;
        markup_scan(spec, p, end, &cs);
        if (!cs.end || !known_n(spec, cs.name, (size_t)(cs.name_end - cs.name)) || *cs.args != '{') break;
        const char *next = NULL;
        cJSON *o = parse_json_at(cs.args, cs.args_end, &next);
        const bool ok = cJSON_IsObject(o) && push_call(res, cs.name, (size_t)(cs.name_end - cs.name), cs.args, cs.args_end, NULL);
        cJSON_Delete(o);
        if (ok && cs.id) own_id(&res->calls[res->n_calls - 1], cs.id, cs.id_end); /* Kimi K2's "functions.NAME:IDX" */
        if (!ok || (!spec->parallel && spec->format != TC_GPT_OSS)) break; /* (gpt-oss: each call is a message of its own) */
        p = cs.end;
    }
    return res->n_calls > 0;
}

/* Functionary v3.2's calls from p (the reply's start, or a ">>>"): NAME\n{args}, and after
 * whitespace >>>NAME\n{args} again with parallel calls. A call to "python" may be raw code
 * (the rest of the reply), taken as {"code": ...} as llama.cpp does (allow_raw_python). */
static bool parse_fn32(const tc_spec *spec, const char *p, const char *end, tc_result *res)
{
    for (bool first = true;; first = false) {
        p = skip_ws(p, end);
        if (!first && !has_prefix(p, end, ">>>")) break;
        call_scan cs;
        fn32_scan(p, end, &cs);
        if (!cs.name || !known_n(spec, cs.name, (size_t)(cs.name_end - cs.name))) break;
        const size_t nl = (size_t)(cs.name_end - cs.name);
        if (!cs.args || *cs.args != '{') {
            if (nl != 6 || memcmp(cs.name, "python", 6) != 0) break;
            const char *code = cs.name_end + 1;
            cJSON *o = cJSON_CreateObject();
            char *c = strndup(code, (size_t)(end - code));
            char *printed = o && c && cJSON_AddStringToObject(o, "code", c) ? cJSON_PrintUnformatted(o) : NULL;
            cJSON_Delete(o);
            free(c);
            if (printed) push_call(res, cs.name, nl, NULL, NULL, printed);
            break;
        }
        const char *next = NULL;
        cJSON *o = parse_json_at(cs.args, end, &next);
        const bool ok = cJSON_IsObject(o) && push_call(res, cs.name, nl, cs.args, next, NULL);
        cJSON_Delete(o);
        if (!ok || !spec->parallel) break;
        p = next;
    }
    return res->n_calls > 0;
}

/* p at prefix (after whitespace when ws): just after it, or NULL. "" always matches. */
static const char *xml_expect(const char *p, const char *end, const char *prefix, bool ws)
{
    if (!*prefix) return p;
    if (ws) p = skip_ws(p, end);
    return has_prefix(p, end, prefix) ? p + strlen(prefix) : NULL;
}

/* The first `tag` at or after p, or NULL. */
static const char *xml_find(const char *p, const char *end, const char *tag)
{
    while (p < end && !has_prefix(p, end, tag)) p++;
    return p < end ? p : NULL;
}

/* One argument's value text v..ve as its JSON: the text itself when the schema types the
 * argument "string" (or the text is not one JSON value), else the value it spells. */
static cJSON *xml_value(const cJSON *prop, const char *v, const char *ve)
{
    if (!glm_raw(prop)) {
        const char *vs = skip_ws(v, ve), *vn = NULL;
        cJSON *jv = vs < ve ? parse_json_at(vs, ve, &vn) : NULL;
        if (jv && skip_ws(vn, ve) == ve) return jv;
        cJSON_Delete(jv);
    }
    char *t = strndup(v, (size_t)(ve - v));
    cJSON *s = t ? cJSON_CreateString(t) : NULL;
    free(t);
    return s;
}

/* GLM 4.5's and Qwen3-Coder's calls (xml_style), as llama.cpp reads them; a call cut off
 * before its closing is no call. */
static bool parse_xml(const tc_spec *spec, const char *p, const char *end, tc_result *res)
{
    const xml_style *st = xml_style_of(spec->format);
    for (;;) {
        if (!(p = xml_expect(p, end, st->open, true)) || !(p = xml_expect(p, end, st->open2, true))) break;
        const char *name = p, *name_end;
        if (*st->name_end) {
            if (!(name_end = xml_find(p, end, st->name_end))) break;
            p = name_end + strlen(st->name_end);
        } else {
            while (p < end && *p != '\n' && *p != '<') p++;
            name_end = p;
        }
        while (name_end > name && (name_end[-1] == ' ' || name_end[-1] == '\t' || name_end[-1] == '\r')) name_end--;
        if (!known_n(spec, name, (size_t)(name_end - name))) break;
        char *nm = strndup(name, (size_t)(name_end - name));
        const cJSON *pp = nm ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(spec->params, nm), "properties") : NULL;
        cJSON *args = cJSON_CreateObject();
        bool closed = false;
        while (args && nm) {
            const char *c = xml_expect(p, end, st->close, true);
            if (c && (c = xml_expect(c, end, st->close2, true))) {
                p = c;
                closed = true;
                break;
            }
            const char *k = xml_expect(p, end, st->key_open, true), *ke = k ? xml_find(k, end, st->key_close) : NULL;
            const char *v = ke ? xml_expect(ke + strlen(st->key_close), end, st->value_open, true) : NULL;
            const char *ve = v ? xml_find(v, end, st->value_close) : NULL;
            if (!ve) break;
            p = ve + strlen(st->value_close);
            if (st->trim_nl && v < ve && *v == '\n') v++;
            if (st->trim_nl && ve > v && ve[-1] == '\n') ve--;
            char *key = strndup(k, (size_t)(ke - k));
            cJSON *jv = key ? xml_value(cJSON_GetObjectItemCaseSensitive(pp, key), v, ve) : NULL;
            if (key && jv) {
                cJSON_DeleteItemFromObjectCaseSensitive(args, key);
                cJSON_AddItemToObject(args, key, jv);
            } else {
                cJSON_Delete(jv);
            }
            free(key);
        }
        char *printed = closed && args ? cJSON_PrintUnformatted(args) : NULL;
        cJSON_Delete(args);
        const bool ok = printed && push_call(res, nm, strlen(nm), NULL, NULL, printed);
        free(nm);
        if (!ok || !spec->parallel) break;
    }
    return res->n_calls > 0;
}

/* Command R7B: <|START_ACTION|> and a JSON array of {"tool_call_id", "tool_name",
 * "parameters"}, closed by <|END_ACTION|>; with parallel calls, a reply cut off keeps the
 * complete ones. */
static bool parse_call_array(const tc_spec *spec, const char *p, const char *end, const char *args_key, const char *close,
                             tc_result *res);
static bool parse_r7b(const tc_spec *spec, const char *p, const char *end, tc_result *res)
{
    p = skip_ws(p, end);
    if (!has_prefix(p, end, R7B_ACTION)) return false;
    return parse_call_array(spec, p + strlen(R7B_ACTION), end, "parameters", R7B_ACTION_END, res);
}

/* The content of a reply in the formats that wrap it (Command R7B, Functionary v3.2), as
 * llama.cpp's parsers give it, into out; partial: the reply is still coming, and what may
 * still change is held back (what comes out only ever grows). at: the first call (-1: none).
 *   Command R7B: the text before the call or the answer, then the answer inside
 *   <|START_RESPONSE|>...<|END_RESPONSE|> (the rest of the reply when not closed).
 *   Functionary v3.2: the text after the "[>>>]all\n" recipient line, up to the first call,
 *   without the whitespace before the call. */
static void content_of(const tc_spec *spec, const char *t, size_t n, bool partial, long at, sbuf *out)
{
    size_t end = at >= 0 ? (size_t)at : n;
    if (at < 0 && partial) end = tc_content_safe(spec, t, n);
    if (spec->format == TC_FUNCTIONARY_V32) {
        size_t c0 = 0;
        if (n >= sizeof FN32_ALL - 1 && !memcmp(t, FN32_ALL, sizeof FN32_ALL - 1)) c0 = sizeof FN32_ALL - 1;
        else if (n >= sizeof FN32_ALL + 2 && !memcmp(t, ">>>" FN32_ALL, sizeof FN32_ALL + 2)) c0 = sizeof FN32_ALL + 2; /* (a prompt without ">>>") */
        if (end < c0) end = c0;
        if (at >= 0 || partial) /* the whitespace before a call is not content: hold it */
            while (end > c0 && (t[end - 1] == ' ' || t[end - 1] == '\n' || t[end - 1] == '\t' || t[end - 1] == '\r')) end--;
        sbuf_add(out, t + c0, end - c0);
        return;
    }
    static char resp0[] = R7B_RESPONSE, resp_end0[] = R7B_RESPONSE_END; /* (stop_find's type; never written) */
    char *const resp[] = {resp0}, *const resp_end[] = {resp_end0};
    int which = 0;
    const long r = stop_find(t, end, 0, resp, 1, &which);
    if (r < 0) {
        sbuf_add(out, t, partial ? end - stop_partial(t, end, resp, 1) : end);
        return;
    }
    sbuf_add(out, t, (size_t)r);
    const size_t a0 = (size_t)r + strlen(R7B_RESPONSE);
    const long e = stop_find(t, end, a0, resp_end, 1, &which);
    size_t a1 = e >= 0 ? (size_t)e : end;
    if (e < 0 && partial) a1 -= stop_partial(t + a0, end - a0, resp_end, 1);
    sbuf_add(out, t + a0, a1 - a0);
}

/* Forget the calls from index `keep` on. */
static void drop_calls(tc_result *res, int keep)
{
    while (res->n_calls > keep) {
        tc_call *c = &res->calls[--res->n_calls];
        free(c->name);
        free(c->arguments);
    }
}

/* Hermes and Llama 3.x: the calls one after the other; with parallel calls, a reply cut
 * off (max_tokens) in a later call keeps the complete ones before it. */
static bool parse_hermes(const tc_spec *spec, const char *p, const char *end, tc_result *res)
{
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    while ((p = skip_ws(p, end)) < end && has_prefix(p, end, open)) {
        p = skip_ws(p + sizeof open - 1, end);
        const char *next = NULL;
        cJSON *o = parse_json_at(p, end, &next);
        const int had = res->n_calls;
        const bool ok = o && take_call(spec, o, "arguments", res, p, next);
        cJSON_Delete(o);
        if (!ok) break;
        p = skip_ws(next, end);
        if (!has_prefix(p, end, close)) { /* cut off before its closing tag */
            drop_calls(res, had);
            break;
        }
        p += sizeof close - 1;
        if (!spec->parallel) break;
    }
    return res->n_calls > 0;
}

static bool parse_llama3(const tc_spec *spec, const char *p, const char *end, tc_result *res)
{
    p = skip_ws(p, end);
    if (has_prefix(p, end, "<|python_tag|>")) p += strlen("<|python_tag|>");
    while ((p = skip_ws(p, end)) < end && *p == '{') {
        const char *next = NULL;
        cJSON *o = parse_json_at(p, end, &next);
        const bool ok = o && take_call(spec, o, "parameters", res, p, next);
        cJSON_Delete(o);
        if (!ok) break;
        p = skip_ws(next, end);
        if (p < end && *p == ';') p++;
        if (!spec->parallel) break;
    }
    return res->n_calls > 0;
}

/* A JSON array of calls at p, item by item (their arguments under args_key; the array
 * followed by `close` when not NULL): with parallel calls, an array cut off (max_tokens)
 * keeps the complete calls before the cut. */
static bool parse_call_array(const tc_spec *spec, const char *p, const char *end, const char *args_key, const char *close,
                             tc_result *res)
{
    p = skip_ws(p, end);
    if (p >= end || *p != '[') return false;
    p++;
    for (;;) {
        const char *next = NULL;
        p = skip_ws(p, end);
        cJSON *o = parse_json_at(p, end, &next);
        const bool ok = o && take_call(spec, o, args_key, res, p, next);
        cJSON_Delete(o);
        if (!ok) break;
        p = skip_ws(next, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == ']' && (!close || has_prefix(skip_ws(p + 1, end), end, close))) return res->n_calls > 0; /* complete */
        break;
    }
    return spec->parallel && res->n_calls > 0;
}

/* Skip `"key"` and `:` (whitespace around them) at p; NULL when not there. */
static const char *skip_key(const char *p, const char *end, const char *key)
{
    p = skip_ws(p, end);
    if (p >= end || *p != '"' || !has_prefix(p + 1, end, key)) return NULL;
    p += 1 + strlen(key);
    if (p >= end || *p != '"') return NULL;
    p = skip_ws(p + 1, end);
    if (p >= end || *p != ':') return NULL;
    return p + 1;
}

static bool parse_mistral(const tc_spec *spec, const char *p, const char *end, tc_result *res)
{
    const char *open = spec->triggers[0]; /* [TOOL_CALLS], or Granite's <|tool_call|> */
    p = skip_ws(p, end);
    if (!has_prefix(p, end, open)) return false;
    p = skip_ws(p + strlen(open), end);
    if (p < end && *p == '{') { /* a single call, not in an array */
        const char *next = NULL;
        cJSON *o = parse_json_at(p, end, &next);
        const bool ok = o && take_call(spec, o, "arguments", res, p, next);
        cJSON_Delete(o);
        return ok;
    }
    return parse_call_array(spec, p, end, "arguments", NULL, res);
}

/* {"tool_call": call} / {"tool_calls": [...]} -> calls; {"response": "..."} -> content */
static bool parse_generic(const tc_spec *spec, const char *p, const char *end, tc_result *res)
{
    const char *next = NULL;
    p = skip_ws(p, end);
    cJSON *o = parse_json_at(p, end, &next);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        /* {"tool_calls": [... cut off: the complete calls stand */
        const char *a = p < end && *p == '{' ? skip_key(p + 1, end, "tool_calls") : NULL;
        return a && spec->parallel && parse_call_array(spec, a, end, "arguments", NULL, res);
    }
    bool ok = false;
    const cJSON *one = get(o, "tool_call"), *many = get(o, "tool_calls"), *resp = get(o, "response");
    if (one) {
        ok = take_call(spec, one, "arguments", res, NULL, NULL);
    } else if (cJSON_IsArray(many)) {
        ok = true;
        for (const cJSON *x = many->child; x && ok; x = x->next) ok = take_call(spec, x, "arguments", res, NULL, NULL);
        ok = ok && res->n_calls > 0;
    } else if (cJSON_IsString(resp)) {
        ok = (res->content = strdup(resp->valuestring)) != NULL;
    }
    cJSON_Delete(o);
    return ok;
}

bool tc_parse_output(const tc_spec *spec, const char *text, size_t n, tc_result *res)
{
    memset(res, 0, sizeof *res);
    const long at = find_start(spec, text, n);
    bool ok = false;
    if (at >= 0) {
        const char *p = text + at, *end = text + n;
        switch (spec->format) {
        case TC_HERMES: ok = parse_hermes(spec, p, end, res); break;
        case TC_LLAMA3: ok = parse_llama3(spec, p, end, res); break;
        case TC_MISTRAL:
        case TC_GRANITE: ok = parse_mistral(spec, p, end, res); break;
        case TC_DEEPSEEK_R1:
        case TC_DEEPSEEK_V31:
        case TC_KIMI_K2:
        case TC_GPT_OSS:
        case TC_FUNCTIONARY_V31: ok = parse_markup(spec, p, end, res); break;
        case TC_COMMAND_R7B: ok = parse_r7b(spec, p, end, res); break;
        case TC_GLM45:
        case TC_QWEN3_CODER: ok = parse_xml(spec, p, end, res); break;
        case TC_FUNCTIONARY_V32: ok = parse_fn32(spec, p, end, res); break;
        default: ok = parse_generic(spec, p, end, res); break;
        }
    }
    if (spec->format == TC_COMMAND_R7B || spec->format == TC_FUNCTIONARY_V32) { /* content wrapped in the format's markup */
        if (!ok) tc_result_free(res);
        sbuf c = {0};
        content_of(spec, text, n, false, ok ? at : -1, &c);
        if (c.oom) {
            sbuf_free(&c);
            tc_result_free(res);
            return false;
        }
        if (c.n && !(res->content = sbuf_strdup(&c))) {
            sbuf_free(&c);
            tc_result_free(res);
            return false;
        }
        sbuf_free(&c);
        return true;
    }
    if (!ok) { /* no (complete) call: all of it is content */
        tc_result_free(res);
        if (!n) return true;
        res->content = malloc(n + 1);
        if (!res->content) return false;
        memcpy(res->content, text, n);
        res->content[n] = 0;
        return true;
    }
    if (res->content || spec->format == TC_GENERIC) return true;
    size_t k = (size_t)at; /* the text before the first call, without the whitespace that led to it
                            * (DeepSeek R1: as written, as llama.cpp keeps it) */
    while (spec->format != TC_DEEPSEEK_R1 && spec->format != TC_DEEPSEEK_V31 && k && (text[k - 1] == ' ' || text[k - 1] == '\n' || text[k - 1] == '\t' || text[k - 1] == '\r')) k--;
    if (k && !(res->content = strndup(text, k))) return false;
    return true;
}

/* ---- the response's shapes (response.c calls these) ------------------------------------------------- */

static cJSON *call_json(const tc_call *c, int index, bool delta_head)
{
    cJSON *o = cJSON_CreateObject();
    if (index >= 0) cJSON_AddNumberToObject(o, "index", index);
    cJSON_AddStringToObject(o, "id", c->id);
    cJSON_AddStringToObject(o, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(o, "function");
    cJSON_AddStringToObject(fn, "name", c->name);
    cJSON_AddStringToObject(fn, "arguments", delta_head ? "" : c->arguments);
    return o;
}

void tc_message_json(const tc_spec *spec, const char *text, size_t n, cJSON *message, const char **finish)
{
    tc_result res;
    if (!tc_parse_output(spec, text ? text : "", text ? n : 0, &res)) {
        cJSON_AddNullToObject(message, "content");
        return;
    }
    if (res.content) cJSON_AddStringToObject(message, "content", res.content);
    else if (res.n_calls) cJSON_AddNullToObject(message, "content");
    else cJSON_AddStringToObject(message, "content", "");
    if (res.n_calls) {
        cJSON *a = cJSON_AddArrayToObject(message, "tool_calls");
        for (int i = 0; i < res.n_calls; i++) cJSON_AddItemToArray(a, call_json(&res.calls[i], -1, false));
        if (strcmp(*finish, "length") != 0) *finish = "tool_calls"; /* as llama-server: a reply cut off stays "length" */
    }
    tc_result_free(&res);
}


static cJSON *head_delta(const char *id, int index, const char *name, size_t name_n)
{
    cJSON *d = cJSON_CreateObject(), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", index);
    cJSON_AddStringToObject(c, "id", id);
    cJSON_AddStringToObject(c, "type", "function");
    char *nm = strndup(name, name_n);
    cJSON *fn = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(fn, "name", nm ? nm : "");
    cJSON_AddStringToObject(fn, "arguments", "");
    free(nm);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "tool_calls"), c);
    return d;
}

static cJSON *args_delta(int index, const char *args, size_t n)
{
    cJSON *d = cJSON_CreateObject(), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", index);
    char *a = strndup(args, n);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "function"), "arguments", a ? a : "");
    free(a);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "tool_calls"), c);
    return d;
}

/* Streaming, the calls as they come: a call's head once its name is whole, then its
 * arguments as the model writes them (compact). The text from the opening on (at) is
 * scanned again at each token: cheap next to a token's decode, and stateless but for what
 * was sent (spec->streamed). The generic format waits for the end. */
static void stream_calls(tc_spec *spec, size_t at, cJSON *deltas)
{
    const char *p = spec->seen.p + at, *end = spec->seen.p + spec->seen.n;
    const char *key = spec->format == TC_LLAMA3 || spec->format == TC_COMMAND_R7B ? "parameters" : "arguments";
    /* (GLM's and Qwen3-Coder's arguments are not the model's JSON: whole, at the end) */
    if (spec->format == TC_GENERIC || spec->format == TC_GLM45 || spec->format == TC_QWEN3_CODER) return;
    if (spec->format == TC_LLAMA3) {
        p = skip_ws(p, end);
        if (has_prefix(p, end, "<|python_tag|>")) p += strlen("<|python_tag|>");
    } else if (spec->format == TC_MISTRAL || spec->format == TC_GRANITE) {
        p = skip_ws(p + strlen(spec->triggers[0]), end);
        if (p < end && *p == '[') p++;
    } else if (spec->format == TC_DEEPSEEK_R1 || spec->format == TC_DEEPSEEK_V31) {
        p = skip_trigger(spec, p, end);
    } else if (spec->format == TC_COMMAND_R7B) {
        p = skip_ws(p + strlen(R7B_ACTION), end);
        if (p >= end || *p != '[') return;
        p++;
    }
    for (int i = 0;; i++) {
        p = skip_ws(p, end);
        if (spec->format == TC_HERMES) {
            if (!has_prefix(p, end, "<tool_call>")) return;
            p = skip_ws(p + strlen("<tool_call>"), end);
        }
        if (spec->format == TC_FUNCTIONARY_V32 && i && !has_prefix(p, end, ">>>")) return;
        call_scan cs;
        if (spec->format == TC_DEEPSEEK_R1 || spec->format == TC_FUNCTIONARY_V31 || spec->format == TC_FUNCTIONARY_V32 ||
            spec->format == TC_KIMI_K2 || spec->format == TC_DEEPSEEK_V31 || spec->format == TC_GPT_OSS)
            markup_scan(spec, p, end, &cs);
        else scan_call(p, end, spec->format == TC_COMMAND_R7B ? "tool_name" : "name", key, &cs);
        if (!cs.name || !known_n(spec, cs.name, (size_t)(cs.name_end - cs.name))) return;
        if (i >= spec->n_streamed) {
            tc_streamed *st = realloc(spec->streamed, (size_t)(i + 1) * sizeof *st);
            if (!st) return;
            spec->streamed = st;
            memset(&st[i], 0, sizeof st[i]);
            make_id(st[i].id, sizeof st[i].id);
            /* the model's own id (Command R7B's comes before the name, Kimi K2's is the name's
             * markup), as the whole reply's parse keeps it */
            if (cs.id) {
                tc_call tmp;
                memcpy(tmp.id, st[i].id, sizeof tmp.id);
                own_id(&tmp, cs.id, cs.id_end);
                memcpy(st[i].id, tmp.id, sizeof st[i].id);
            }
            spec->n_streamed = i + 1;
            cJSON_AddItemToArray(deltas, head_delta(st[i].id, i, cs.name, (size_t)(cs.name_end - cs.name)));
        }
        if (cs.args && *cs.args == '{') {
            sbuf m = {0};
            minify(cs.args, cs.args_end ? cs.args_end : end, &m);
            if (!m.oom && m.n > spec->streamed[i].args_sent) {
                cJSON_AddItemToArray(deltas, args_delta(i, m.p + spec->streamed[i].args_sent, m.n - spec->streamed[i].args_sent));
                spec->streamed[i].args_sent = m.n;
            }
            sbuf_free(&m);
        }
        if (!cs.end || (!spec->parallel && spec->format != TC_GPT_OSS)) return;
        p = skip_ws(cs.end, end);
        if (spec->format == TC_HERMES) {
            if (!has_prefix(p, end, "</tool_call>")) return;
            p += strlen("</tool_call>");
        } else if (p < end && (*p == ',' || *p == ';')) {
            p++;
        }
    }
}

cJSON *tc_stream_text(tc_spec *spec, const char *txt, size_t n, sbuf *content)
{
    sbuf_add(&spec->seen, txt, n);
    if (spec->seen.oom) return NULL;
    const size_t safe = tc_content_safe(spec, spec->seen.p, spec->seen.n);
    if (spec->format == TC_COMMAND_R7B || spec->format == TC_FUNCTIONARY_V32) {
        /* content wrapped in markup: what content_of gives so far (sent: its bytes sent) */
        sbuf c = {0};
        content_of(spec, spec->seen.p, spec->seen.n, true, find_start(spec, spec->seen.p, spec->seen.n), &c);
        const size_t k = c.oom ? 0 : c.n - utf8_incomplete_tail(c.p, c.n);
        if (k > spec->sent) {
            sbuf_add(content, c.p + spec->sent, k - spec->sent);
            spec->sent = k;
        }
        sbuf_free(&c);
    } else if (safe > spec->sent) {
        /* never split a UTF-8 character: the held part may end inside one */
        size_t k = safe - utf8_incomplete_tail(spec->seen.p, safe);
        if (k > spec->sent) {
            sbuf_add(content, spec->seen.p + spec->sent, k - spec->sent);
            spec->sent = k;
        }
    }
    const long at = find_start(spec, spec->seen.p, spec->seen.n);
    if (at < 0 || spec->format == TC_GENERIC) return NULL;
    cJSON *deltas = cJSON_CreateArray();
    if (deltas) stream_calls(spec, (size_t)at, deltas);
    if (deltas && !deltas->child) {
        cJSON_Delete(deltas);
        deltas = NULL;
    }
    return deltas;
}

cJSON *tc_stream_final(tc_spec *spec, const char *text, size_t n, const char **finish)
{
    cJSON *deltas = cJSON_CreateArray();
    tc_result res;
    if (!deltas || !tc_parse_output(spec, text ? text : "", text ? n : 0, &res)) return deltas;
    const size_t cl = res.content ? strlen(res.content) : 0;
    /* the rest of the content; none after a call streamed in part (it was cut off) */
    if (cl > spec->sent && !(spec->n_streamed && !res.n_calls)) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "content", res.content + spec->sent);
        cJSON_AddItemToArray(deltas, d);
    }
    /* as OpenAI streams them: the head of each call (index, id, type, name, arguments ""),
     * then its arguments; the rest of what streamed in part */
    for (int i = 0; i < res.n_calls; i++) {
        const tc_call *c = &res.calls[i];
        const size_t al = strlen(c->arguments);
        size_t sent = 0;
        if (i < spec->n_streamed) {
            sent = spec->streamed[i].args_sent;
            if (sent > al) sent = al;
        } else {
            cJSON_AddItemToArray(deltas, head_delta(c->id, i, c->name, strlen(c->name)));
        }
        if (al > sent) cJSON_AddItemToArray(deltas, args_delta(i, c->arguments + sent, al - sent));
    }
    if (res.n_calls && strcmp(*finish, "length") != 0) *finish = "tool_calls";
    tc_result_free(&res);
    return deltas;
}
