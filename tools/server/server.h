/*
 * server.h - internal interfaces of `sift serve` (tools/server, tools/sift/cmd_serve.c).
 *
 * The server is four modules with one job each:
 *
 *   request.c   JSON request -> srv_request: every llama-server / OpenAI field, checked
 *               (type, range) with a 400 message that names the field; the prompt
 *               tokenized; the sampler chain and grammar built. Runs on the HTTP
 *               connection's thread, so the expensive part of a request's set-up (grammar
 *               masks, DRY breakers, tokenizing) never stalls generation.
 *   engine.c    the slots and the continuous-batching loop: one thread owns the
 *               sift_context, takes queued tasks into free slots, builds one batch per step
 *               (one token per generating slot, plus prompt chunks), calls sift_decode once,
 *               samples every slot with its own chain, and publishes tokens to the task.
 *   response.c  srv_task results -> JSON: /completion (native), /v1/completions and
 *               /v1/chat/completions (OpenAI), n_probs, the chain trace, errors, /props,
 *               /metrics.
 *   http.c      libmicrohttpd glue: routing, body limits, SSE streaming, client
 *               disconnects (which cancel the task and free its slot at once).
 *
 * plus chat_jinja.c (the model's own Jinja template) and tool_calls.c (OpenAI tool calling:
 * the calls' grammar, the reply parsed into tool_calls). What the CLI uses too lives in
 * tools/common, each part with its own header: chat.c (the built-in chat templates, detected
 * from the GGUF's Jinja text by pattern, as llama.cpp's llm_chat_detect_template does),
 * reasoning.c (the thinking apart from the answer), tc_format.c (the template's tool-call
 * format) and stream_text.c (a growable buffer, UTF-8 and stop strings for the streamed text).
 *
 * A task (srv_task) is the unit shared between a connection thread and the engine thread:
 * the request half is immutable once submitted; the output half (tokens, text, per-token
 * probabilities and traces, the final state) is appended by the engine under task->mu and
 * read by the connection, which copies what it needs under the lock and formats outside it.
 * A task is reference-counted (connection + engine); whoever drops the last reference frees
 * it.
 */
#ifndef SIFT_SERVER_H
#define SIFT_SERVER_H

#include <pthread.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "chat.h"
#include "reasoning.h"
#include "sift.h"
#include "stream_text.h"
#include "tc_format.h"

/* ---- configuration ------------------------------------------------------------------------- */

typedef struct srv_config {
    const char *model_path;
    const char *alias;          /* model name in responses (default: the model path) */
    const char *host;
    int port;                   /* 0: any free port (printed at start) */
    int n_parallel;             /* -np: slots = KV sequences */
    int n_ctx;                  /* -c: KV cells in all, n_ctx / n_parallel per slot (0: train ctx x np) */
    int n_batch;                /* most tokens per decode call */
    int n_threads, n_threads_batch;
    int timeout_s;              /* idle connection timeout */
    int max_connections;
    int max_queue;              /* requests waiting for a slot; more -> 503 */
    size_t max_body;            /* request body bytes; more -> 413 */
    int max_n_predict;          /* tokens one request may ask for (and the cap of n_predict = -1) */
    int default_n_predict;      /* n_predict when a request does not say (-1: up to the cap) */
    const char *chat_template;  /* --chat-template NAME (overrides the GGUF's) */
    const char *chat_template_file; /* --chat-template-file FILE (a Jinja template) */
    const char *chat_template_text; /* --chat-template TEXT that names no built-in template: a Jinja template's text */
    int reasoning_format;       /* --reasoning-format: rs_format (default auto) */
    int reasoning;              /* --reasoning on|off|auto: 1, 0, -1 (on/off set enable_thinking for the template) */
    int reasoning_budget;       /* --reasoning-budget: thinking tokens before </think> is forced (-1: no limit) */
    const char *chat_template_kwargs; /* --chat-template-kwargs JSON: extra template variables (an object) */
    sift_isa isa;
    bool log_requests;
    /* exposure (http.c, conns.c; docs/server.md "Exposing the server") */
    char **api_keys;            /* --api-key / --api-key-file: none -> no authentication */
    int n_api_keys;
    char **cors_origins;        /* --cors-origin: none -> no CORS headers; "*" -> any origin */
    int n_cors_origins;
    int header_timeout_s;       /* request line + headers must arrive within this (default 10) */
    int body_timeout_s;         /* the body must arrive within this once the headers are in (default 30) */
    int max_conns_per_client;   /* per client address (0: no cap) */
    int drain_timeout_s;        /* SIGTERM/SIGINT: running requests get this long to finish */
    size_t template_memory;     /* --template-memory: bytes all chat-template renders may hold at once (and
                                   each one at most); more -> 413 (default 1 GiB; 0: per render 512 MiB only) */
    int template_timeout_ms;    /* --template-timeout: wall-clock limit of one render (default 5000; 0: none) */
    char **allowed_hosts;       /* --allowed-hosts: Host names accepted beside loopback names, IP literals
                                   and --host ("*": any); the DNS-rebinding check (http.c) */
    int n_allowed_hosts;
    int min_body_rate;          /* --min-body-rate: bytes/s a body must average after a grace period (0: off) */
    size_t max_body_in_flight;  /* --max-body-in-flight: request body bytes buffered by all connections together */
    size_t max_probs_bytes;     /* --max-probs-bytes: n_probs + trace output of all requests together (estimated) */
    int max_renders;            /* --max-renders: Jinja chat template renders at once (others wait, then 503) */
    bool no_slots, no_metrics;  /* --no-slots / --no-metrics: those endpoints answer 404 */
    bool no_jinja;              /* --no-jinja: chats use the built-in template the GGUF's resembles */
    bool no_webui;              /* --no-webui: / answers 404 */
    bool kv_unified;            /* --kv-unified: every slot may fill the whole -c (np x c cells) */
    const char *slot_save_path; /* --slot-save-path DIR: where slot save and restore files live (NULL: no save/restore) */
    bool ctx_shift;             /* --context-shift: a full slot drops old tokens and goes on (llama-server's) */
    bool spm_infill;            /* --spm-infill: /infill's prompt is suffix-prefix-middle (else prefix-suffix-middle) */
    const char *tags;           /* --tags a,b: the model's tags in /models */
    bool embeddings;            /* --embeddings: /embedding and /v1/embeddings (else 501) */
    int pooling;                /* --pooling: sift_pooling_type (UNSPECIFIED: none) */
    char **owned;               /* strings the options were copied into (environment values, key-file lines) */
    int n_owned;
    /* control vectors (--control-vector...): files, scales, layer range (<= 0: 1 .. n_layer) */
    const char *const *cvec_paths;
    const float *cvec_scales;
    int n_cvec, cvec_layer_start, cvec_layer_end;
    /* --temp, --top-k, ... (llama-server's sampling flags): what a request that does not give a
     * field gets (NULL: libsift's defaults). Checked without the vocabulary at start; each
     * request checks its whole set against the vocabulary as for its own fields. */
    const sift_sampling_params *sampling;
    /* speculative decoding (engine.c; docs/speculative.md): -md/--model-draft FILE, or --lookup N
     * (prompt lookup over n-grams of 1..N tokens); each slot drafts on its own, one decode
     * verifies every slot's draft. --draft-max/--draft-min/--draft-p-min: what a request that
     * gives no speculative.* field gets */
    const char *model_draft;
    int lookup;
    int draft_max, draft_min;
    float draft_p_min;
    /* router mode (router.c, router.h): no -m, the models of --models-dir / --models-preset, each
     * served by a `sift serve` child of its own, started on demand */
    const char *models_dir, *models_preset;
    int models_max;             /* --models-max: model servers at once, the least recently used stopped (0: no cap) */
    bool models_autoload;       /* a request for a model not loaded loads it (--no-models-autoload: 400) */
    char **child_args;          /* the command line's options the model servers get (argv's strings) */
    int n_child_args;
} srv_config;

/* Limits that are not flags (docs/server.md lists them). */
#define SRV_MAX_N_PROBS 100
#define SRV_MAX_DRAFT 1024     /* speculative.n_max / --draft-max: sift_draft_params' own limit */
#define SRV_MAX_TRACE_TOP 64
#define SRV_MAX_STOP 16
#define SRV_MAX_STOP_LEN 256
#define SRV_MAX_LOGIT_BIAS 4096
#define SRV_MAX_MESSAGES 1024
#define SRV_MAX_PROMPTS 64     /* prompts x n in one request */
#define SRV_MAX_EMBD_INPUTS 256 /* inputs in one embeddings request */
#define SRV_MAX_QUERY 4096     /* bytes of a URL's query string; more (or more arguments) -> 414 */
#define SRV_MAX_QUERY_ARGS 64
#define SRV_PROBS_ENTRY_BYTES 256 /* what one top-candidate entry (n_probs or trace) is counted as against
                                     --max-probs-bytes: about its cost as JSON in memory */

/* ---- requests ------------------------------------------------------------------------------ */

typedef enum srv_kind {
    SRV_NATIVE = 0, /* POST /completion */
    SRV_OAI_CMPL,   /* POST /v1/completions */
    SRV_OAI_CHAT,   /* POST /v1/chat/completions */
    SRV_ANTH_MSG,   /* POST /v1/messages (anthropic.c): parsed as the chat it converts to (kind SRV_OAI_CHAT) */
    SRV_ANTH_COUNT, /* POST /v1/messages/count_tokens: the same without max_tokens and stream */
    SRV_INFILL,     /* POST /infill (infill.c): parsed and answered as /completion (kind SRV_NATIVE, infill set) */
    SRV_RESP,       /* POST /v1/responses (responses.c): parsed as the chat it converts to (kind SRV_OAI_CHAT) */
} srv_kind;

typedef struct srv_request {
    srv_kind kind;
    sift_sampling_params sp;   /* llama.cpp common's parameters (sp.logit_bias -> bias) */
    sift_logit_bias *bias;
    size_t n_bias;
    int32_t n_predict;         /* -1: until end of generation or the cap */
    int32_t n_probs;
    bool post_sampling_probs;  /* probabilities after the chain (else: softmax of the raw logits) */
    bool stream, include_usage, return_tokens, cache_prompt, timings_per_token;
    bool trace;                /* ours: the chain inspector per token */
    int32_t trace_top;
    int32_t id_slot;           /* -1: any */
    char **stop;
    int n_stop;
    sift_compiled_grammar *cgrammar; /* grammar, json_schema or response_format, compiled by the
                                        server's compiler: a repeated grammar, or the n choices, share it */
    bool grammar_from_schema;
    bool json_schema_llama; /* "json_schema_llama": llama.cpp's converter conventions */
    sift_token *prompt;
    int32_t n_prompt;
    char *model;               /* the "model" the client named (echoed by the OpenAI shapes) */
    /* several completions in one request (http.c runs one task each, parsed again with
     * srv_parse_completion_at): n_prompts prompts x n_cmpl choices; this one is prompt
     * prompt_index, choice `choice`, answered at index prompt_index * n_cmpl + choice */
    int32_t n_cmpl, n_prompts, prompt_index, choice, index;
    bool echo;                 /* /v1/completions: the prompt text before each choice's text */
    char *echo_text;           /* with echo, a text prompt as written (NULL: the prompt's ids detokenized) */
    int32_t n_probs_shown;     /* top candidates shown per token (-1: n_probs); chat logprobs alone: 0 */
    struct tc_spec *tools;     /* tool calling (tool_calls.c); NULL without */
    struct rs_spec *rs;        /* a chat's reasoning (reasoning.c); NULL with reasoning_format none */
    char *gbnf_pending;        /* a chat's grammar / json_schema as GBNF (start rule "root"), compiled once
                                  the prompt shows whether the reply may think (then wrapped, rs_wrap_grammar) */
    bool tools_after_think;    /* the tools' grammar starts after the thinking (srv_build_samplers) */
    bool think_forced_open;    /* the prompt left the thinking open */
    int32_t reasoning_budget;  /* thinking tokens before </think> is forced (-1: no limit) */
    char *response_fields;     /* /completion's response_fields as a JSON array (NULL: every field) */
    sift_draft_params spec;    /* speculative.n_max / n_min / p_min (used where the server drafts) */
    int32_t n_keep;            /* --context-shift: prompt tokens kept (-1: all of them) */
    int32_t n_discard;         /* --context-shift: tokens dropped at a time (0: half of what is not kept) */
    bool return_progress;      /* a stream reports the prompt's progress (srv_progress) */
    bool infill;               /* POST /infill: the prompt is the fill-in-the-middle one (infill.c) */
} srv_request;

void srv_request_free(srv_request *r);
/* A JSON value's kind for messages ("a string", "an object", ...). (request.c) */
struct cJSON;
const char *srv_jtype(const struct cJSON *v);

/* An error for the client: HTTP status, OpenAI-style type, message naming the field. */
typedef struct srv_error {
    int status;                /* 400, 404, 413, 500, 503 */
    const char *type;          /* "invalid_request_error", "exceed_context_size_error", ... */
    char msg[512];
    int32_t n_prompt_tokens, n_ctx; /* exceed_context_size_error only */
} srv_error;

int srv_errorf(srv_error *e, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- tool calling (tool_calls.c) ----------------------------------------------------------- */

/* A request's tool calling, as parsed from tools / tool_choice / parallel_tool_calls. */
typedef struct tc_spec {
    tc_format format;
    bool parallel;             /* several calls allowed */
    bool lazy;                 /* tool_choice auto: the grammar waits for a trigger word */
    bool no_system;            /* the template has no system role: the generic format's instructions go to the first message */
    bool spaced;               /* gpt-oss's format in LLM-jp's dialect (asked as TC_LLM_JP): the grammar allows its spaces */
    char **triggers;           /* the format's call openings (lazy triggers; streamed text is held from them) */
    int n_triggers;
    char **names;              /* the callable functions */
    int n_names;
    char *gbnf;                /* the calls' grammar, start rule TC_ROOT */
    char *pattern;             /* a lazy trigger pattern beside the words (Llama 3.x's `{"name"`), or NULL */
    char *think_pattern;       /* (reasoning) the triggers as one pattern that skips the thinking, or NULL */
    struct cJSON *params;      /* GLM 4.5: each callable function's parameters schema by name (its values' types) */
    /* streaming state, touched by the connection's thread only (srv_sse_tokens/final) */
    sbuf seen;                 /* the reply's text so far */
    size_t sent;               /* bytes of it sent as content */
    struct tc_streamed {       /* the calls whose head went out */
        char id[96];
        size_t args_sent;      /* bytes of their (compact) arguments sent */
    } *streamed;
    int n_streamed;
} tc_spec;
typedef struct tc_streamed tc_streamed;
#define TC_ROOT "x-sift-tool-calls" /* a name no schema property gives */

void tc_spec_free(tc_spec *t);

/* tools, tool_choice and parallel_tool_calls of a chat request: *out is NULL when no tool
 * call can come (no tools, or tool_choice "none"). 0, or 400 with e (bad tools, unknown
 * function name, a parameters schema that does not convert). */
struct cJSON;
int tc_parse_request(tc_format f, const struct cJSON *root, tc_spec **out, srv_error *e);
/* Calls that close within the request's token budget: where the grammar binds from the first
 * token (tool_choice required or a named function) and n_predict is below TC_BUDGET_FREE,
 * free-form strings in the calls are held to n_predict / 4 characters (at least 8), so a call
 * fits the budget with room for its markup. */
#define TC_BUDGET_FREE 4096
void tc_budget(tc_spec *t, int n_predict);
/* A reply that may think first (reasoning.c): the lazy grammar's triggers as one pattern that
 * only fires after the thinking (t->think_pattern; forced_open: the prompt opened it). -1: out of memory. */
int tc_think_trigger(tc_spec *t, bool forced_open);
/* The messages as the template gets them: a deep copy where, with object_args (the template
 * `tojson`s arguments: chat_jinja_object_args), tool_calls' string arguments are parsed into
 * objects, as minja's polyfill does; and, for the generic format, a system message that asks
 * for the JSON reply. NULL on OOM. */
struct cJSON *tc_template_messages(const struct cJSON *messages, const tc_spec *spec, bool object_args);

typedef struct tc_call {
    char *name;
    char *arguments;           /* JSON text (an object) */
    char id[96];               /* "call_" + 9 alphanumerics, or the model's own (Command R7B's, Kimi K2's) */
} tc_call;

typedef struct tc_result {
    char *content;             /* the text that is not a call (NULL when empty) */
    tc_call *calls;
    int n_calls;
} tc_result;

/* Parse a reply: its calls, and the text before them as content. A malformed or cut-off
 * call leaves no call, and the whole text as content. Never fails but on OOM (false). */
bool tc_parse_output(const tc_spec *spec, const char *text, size_t n, tc_result *res);
void tc_result_free(tc_result *res);
/* Streaming: how many bytes of text[0..n) are content for sure (before any call opening,
 * and not a part of one that the next token may complete). */
size_t tc_content_safe(const tc_spec *spec, const char *text, size_t n);
/* A chat reply's message with tool calling: "content" (null beside calls) and "tool_calls";
 * *finish becomes "tool_calls" when there are calls. */
void tc_message_json(const tc_spec *spec, const char *text, size_t n, struct cJSON *message, const char **finish);
/* Streaming: take the text a token released; append to content what is surely content;
 * return the tool-call deltas it completes (a call's head once its name is whole, then its
 * arguments as they come), NULL when none. */
struct cJSON *tc_stream_text(tc_spec *spec, const char *txt, size_t n, sbuf *content);
/* Streaming, at the end (text: the whole reply): the deltas still to send, the rest of the
 * content and what is left of each call (its head, then its arguments). *finish as
 * tc_message_json. */
struct cJSON *tc_stream_final(tc_spec *spec, const char *text, size_t n, const char **finish);
/* The template's capabilities as /props' chat_template_caps reports them (detected from its text). */
void tc_caps_json(const char *tmpl_text, struct cJSON *caps);

/* ---- the server ---------------------------------------------------------------------------- */

typedef struct srv_engine srv_engine;

/* HTTP-side counters (/metrics); the engine keeps its own. */
typedef struct srv_http_stats {
    atomic_llong n_requests, n_2xx, n_400, n_401_403, n_404, n_413, n_429_503, n_5xx, n_disconnects;
    atomic_llong probs_bytes;    /* --max-probs-bytes reserved by the requests in flight */
    atomic_llong body_bytes;     /* --max-body-in-flight reserved by the uploads in flight */
    atomic_llong renders;        /* Jinja renders running (--max-renders) */
} srv_http_stats;

typedef struct srv_http srv_http;

typedef struct srv_embd srv_embd;

typedef struct srv_server {
    srv_config cfg;
    sift_model *model;
    sift_model *draft_model;   /* --model-draft (NULL: none) */
    const sift_vocab *vocab;
    sift_vocab_view view;
    sift_grammar_compiler *gcomp; /* the model's grammar compiler: trie, shared entries, compiled grammars */
    int32_t n_vocab;
    sift_token eot;            /* EOT or EOS, for infill */
    int n_ctx_slot;
    char *tmpl_text;           /* tokenizer.chat_template (NULL when absent) */
    tc_format tc_fmt;          /* tc_detect(tmpl_text), found once at load: the text is fixed, and
                                  the detection is some fifteen scans of it */
    sift_template *jinja;      /* the Jinja template rendered for chats (--chat-template-file, else the GGUF's);
                                  NULL: the built-in named template `tmpl` */
    bool jinja_object_args;    /* chat_jinja_probe_object_args(jinja), found at load */
    bool jinja_typed_content;  /* the template iterates over content parts (chat_jinja_probe_caps) */
    bool jinja_system_role;    /* the template shows a system message's text (chat_jinja_probe_caps) */
    struct cJSON *template_kwargs; /* --chat-template-kwargs (and --reasoning on/off's enable_thinking), parsed */
    sift_template_pool *tpool; /* the renders' shared memory budget (cfg.template_memory; NULL: none) */
    chat_tmpl tmpl;            /* the template applied (CHATML when unknown: documented default) */
    bool tmpl_detected;        /* tmpl came from the GGUF (or --chat-template), not the default */
    const char *model_name;    /* --alias (the first of several in sort order), or the model's file name (never its path) */
    char *model_name_own;      /* (model_name when it was made from --alias; freed with the server) */
    bool tmpl_fallback;        /* the model has no chat template: llama.cpp's chatml as Jinja stands in */
    char model_desc[128];
    sift_model_info info;
    srv_engine *engine;
    srv_embd *embd;            /* --embeddings (embeddings.c); NULL without */
    srv_http_stats http;
    time_t t_start;
    srv_http *httpd;           /* for /metrics' connection counters (NULL before the start) */
    atomic_bool draining;      /* SIGTERM/SIGINT seen: /health 503, new work 503, running work finishes */
    atomic_bool drain_abort;   /* a second signal: srv_http_drain returns at once */
    atomic_bool stop_work;     /* the drain's deadline passed: long work (a template render, a grammar) should
                                  give up; the hook a per-request cancel flag can watch */
    struct srv_router *router; /* router mode (router.c): no model here, requests go to the model servers */
} srv_server;

/* The model's own Jinja template (sift_template_*) applied to a chat request, as
 * llama-server's --jinja does: the context is the request's messages and tools as given,
 * add_generation_prompt, and the vocabulary's bos_token/eos_token texts; a leading BOS text
 * is dropped when the tokenizer adds BOS itself. 0, or 400 with e (jinja2's message, e.g. a
 * template's raise_exception) / 500. */
struct cJSON;
int chat_apply_jinja(const srv_server *s, const struct cJSON *messages, const struct cJSON *tools, const struct cJSON *kwargs, bool add_assistant,
                     sbuf *out, srv_error *e);

/* Whether the template needs tool calls' arguments as objects (it `tojson`s them: a string
 * would come out double-encoded), found by rendering a probe call both ways (minja's
 * requires_object_arguments): chat_jinja_probe_object_args once, when the template is loaded
 * (into s->jinja_object_args); chat_jinja_object_args reads the answer, without a lock. */
bool chat_jinja_probe_object_args(const srv_server *s);
/* All the template's capabilities, found once at load by rendering probes as minja does:
 * jinja_object_args, jinja_typed_content (a string content does not come out, a list of text
 * parts does) and jinja_system_role (a system message's text comes out). */
void chat_jinja_probe_caps(srv_server *s);
/* The server's template variables (s->template_kwargs): --chat-template-kwargs (a JSON object;
 * anything else is an error printed on stderr, -1), with enable_thinking as llama-server sets
 * it: false for --reasoning off (reasoning 0), else true unless the kwargs say. */
int chat_jinja_set_kwargs(srv_server *s, const char *json, int reasoning);
void chat_jinja_free_kwargs(srv_server *s);
/* The text parts of a content list (appended to out, newline-joined as llama.cpp does; out
 * may be NULL to only check them). 400 naming the part for an image, audio or other part. */
int chat_content_text(const struct cJSON *content, int i, sbuf *out, srv_error *e);
/* In msgs (a copy the template will get): content lists of text parts become one string,
 * as llama-server does, unless the template iterates over parts (jinja_typed_content). */
int chat_jinja_flatten(const srv_server *s, struct cJSON *msgs, srv_error *e);
/* For a template without a system role: the system messages' text goes at the start of the
 * next user message (minja's polyfill). -1 out of memory. */
int chat_jinja_system_fallback(struct cJSON *msgs);
bool chat_jinja_object_args(const srv_server *s);

/* Renders abandon themselves (503, "render abandoned") when their client goes away: the HTTP
 * thread names its request's connection here before parsing a request (-1 after). The drain's
 * deadline (s->stop_work) and a second signal (s->drain_abort) stop every render too. */
void chat_jinja_set_client(int fd);
/* Whether the peer of connection fd closed or reset it (false for fd < 0). */
bool srv_client_gone(int fd);

/* ---- request parsing (request.c) ------------------------------------------------------------- */

/* Parse and check a completion request (any of the three kinds) from body[0..len): fills r
 * (free with srv_request_free). Returns 0, or the HTTP status with e filled. */
/* text[0..len) of the request field `name` tokenized into *out (malloc'd, *n_out tokens):
 * 0, a 400 for text that is not UTF-8, a 500 when out of memory. (request.c) */
int srv_tokenize_field(const srv_server *s, const char *name, const char *text, size_t len, bool add_special,
                       bool parse_special, sift_token **out, int32_t *n_out, srv_error *e);
/* POST /infill (infill.c): 0 when the vocabulary has the FIM prefix, suffix and middle tokens,
 * else 501 not_supported_error (llama-server's answer). */
int srv_infill_supported(const srv_server *s, srv_error *e);
/* The fill-in-the-middle prompt of an /infill request (input_prefix, input_suffix,
 * input_extra, prompt), token for token llama-server's (malloc'd into *out). 0 or a 400. */
int srv_infill_prompt(const srv_server *s, const struct cJSON *o, sift_token **out, int32_t *n_out, srv_error *e);

int srv_parse_completion(const srv_server *s, srv_kind kind, const char *body, size_t len, srv_request *r,
                         srv_error *e);
/* The same for prompt prompt_index and choice `choice` of a request with several (the
 * seed of choice i is seed + i when one is given). */
int srv_parse_completion_at(const srv_server *s, srv_kind kind, const char *body, size_t len, int prompt_index, int choice,
                            srv_request *r, srv_error *e);
/* llama-server's prompt forms with several prompts (also the embeddings' input): a string,
 * one sequence of ids and strings, or an array of those. srv_prompt_count: how many (at
 * most max), or minus the HTTP status with e. srv_prompt_at: prompt `index` tokenized
 * (BOS as for a prompt), 0 or the status. name is the field, for messages. */
int srv_prompt_count(const struct cJSON *p, const char *name, int max, srv_error *e);
int srv_prompt_at(const srv_server *s, const struct cJSON *p, const char *name, int index, sift_token **out, int32_t *n_out,
                  srv_error *e);
/* The chain (and grammar sampler, NULL without a grammar) for a parsed request. */
int srv_build_samplers(const srv_server *s, const srv_request *r, sift_chain **chain, sift_sampler **grammar,
                       srv_error *e);
/* Tokenize text the way prompts are (parse_special; add_special as asked). NULL on error. */
sift_token *srv_tokenize(const srv_server *s, const char *text, size_t len, bool add_special, bool parse_special,
                         int32_t *n_out);

/* ---- tasks and the engine (engine.c) ------------------------------------------------------- */

typedef enum srv_stop {
    SRV_STOP_NONE = 0,
    SRV_STOP_EOS,
    SRV_STOP_WORD,
    SRV_STOP_LIMIT,
} srv_stop;

/* One token as the engine published it. */
typedef struct srv_tokrec {
    sift_token tok;
    uint32_t text_end;         /* task->text length after this token (the visible text grew to here) */
    float p;                   /* probability of tok (n_probs > 0) */
    uint32_t probs_off;        /* top candidates: task->probs[probs_off .. + n_probs) */
    uint32_t n_probs;
    uint32_t trace_off;        /* trace stages: task->stages[trace_off .. + n_stages) */
    uint32_t n_stages;
} srv_tokrec;

typedef struct srv_prob {
    sift_token id;
    float p;
} srv_prob;

/* One stage of the chain inspector: what a sampler (or the logits, or the grammar) left. */
typedef struct srv_stage {
    int16_t name;              /* index into task->stage_names */
    bool has_selected;
    uint32_t n;                /* candidates left */
    sift_token selected;       /* the token this stage selected, if any */
    uint32_t top_off, n_top;   /* task->tops[top_off .. + n_top): best candidates, with probabilities */
} srv_stage;

/* One report of a prompt's progress (return_progress): prompt tokens in all, found in the
 * slot's cache, read so far (the cached ones counted), and ms since the slot took it. */
typedef struct srv_progress {
    int32_t total, cache, processed;
    double ms;
} srv_progress;

typedef struct srv_task {
    atomic_int refs;
    atomic_bool cancelled;     /* the client went away: the engine frees the slot */
    int64_t id;

    /* the request (immutable once submitted) */
    srv_request req;
    sift_chain *chain;         /* owned; used by the engine thread only */
    sift_sampler *grammar;     /* owned, may be NULL */
    char **stage_names;        /* "(logits)", the chain's samplers, "grammar" */
    int n_stage_names;
    char oai_id[48];           /* "chatcmpl-..." / "cmpl-..." */
    time_t created;
    uint32_t seed_used;

    /* the output (under mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_tokrec *recs;
    size_t n_recs, cap_recs;
    sbuf text;                 /* the visible text so far (stop strings cut, UTF-8 tails held) */
    srv_prob *probs;
    size_t n_probs, cap_probs;
    srv_stage *stages;
    size_t n_stages, cap_stages;
    srv_prob *tops;
    size_t n_tops, cap_tops;
    bool started;              /* a slot took it */
    bool done;
    srv_error err;             /* err.status != 0: failed */
    srv_stop stop;
    int stop_word;             /* index into req.stop for SRV_STOP_WORD */
    bool truncated;            /* stopped by the slot's context */
    int id_slot;
    int32_t n_cached;          /* prompt tokens reused from the slot's cache */
    int32_t n_drafted, n_draft_accepted; /* speculative decoding: draft tokens verified, accepted */
    double t_prompt_ms, t_gen_ms;
    int32_t n_decoded;
    double t_submit;           /* srv_now_ms() when queued (queue time, time to first token) */
    srv_progress *prog;        /* return_progress: the prompt's progress reports, one per chunk read */
    size_t n_prog, cap_prog;
} srv_task;

/* A task for a parsed request: takes ownership of *req (zeroed), chain and grammar.
 * refs = 1 (the caller's). NULL on out of memory (nothing taken then). */
srv_task *srv_task_new(srv_request *req, sift_chain *chain, sift_sampler *grammar);
void srv_task_ref(srv_task *t);
void srv_task_unref(srv_task *t);

/* Start the engine: the context (n_parallel sequences), the slots, the thread. */
srv_engine *srv_engine_start(srv_server *s, sift_error *err);
/* Stop the thread; every queued or running task fails with 503 (their connections finish).
 * The engine stays valid for srv_engine_cancel / stats until srv_engine_free. */
void srv_engine_stop(srv_engine *e);
/* The same, but waiting for the thread only until t_end (srv_now_ms): then the tasks still in
 * slots fail with 503 from here (their connections can answer) and false is returned; the
 * thread is joined by srv_engine_stop / srv_engine_free later. */
bool srv_engine_stop_by(srv_engine *e, double t_end);
void srv_engine_free(srv_engine *e);
/* Queue a task (the engine takes its own reference). 0, or 503 when the queue is full. */
int srv_engine_submit(srv_engine *e, srv_task *t);
/* Queue the n tasks of one request together (all or none: 503 when they do not all fit),
 * so that idle slots take them in the same step and twins read their prompt once. */
int srv_engine_submit_all(srv_engine *e, srv_task *const *g, int n);
/* A slot action (POST /slots/N?action=...), run by the engine thread between steps on an
 * idle slot: save its KV cells and tokens to path, restore them from path (the slot's
 * prompt cache then starts from them), or erase them. 0 with res, or an HTTP status with
 * err (503 while the slot is busy). */
typedef enum srv_slot_action { SRV_SLOT_SAVE, SRV_SLOT_RESTORE, SRV_SLOT_ERASE } srv_slot_action;
typedef struct srv_slot_result {
    long long n_tokens;        /* saved, restored or erased */
    size_t n_bytes;            /* written or read */
    double ms;
} srv_slot_result;
int srv_engine_slot_action(srv_engine *e, int slot, srv_slot_action action, const char *path, srv_slot_result *res, srv_error *err);
/* The client is gone: the engine drops the task at its next step (queued or running). */
void srv_engine_cancel(srv_engine *e, srv_task *t);

/* A snapshot for /slots, /props and /metrics. */
typedef struct srv_slot_info {
    int id;
    bool busy;
    int64_t id_task;
    int32_t n_prompt, n_past, n_decoded, n_cached_tokens;
    bool has_run;              /* a request has run in the slot (else /slots has no params, as llama-server) */
    sift_draft_params spec;    /* the running or last request's speculative.* (the defaults before any) */
    double draft_acceptance;   /* the slot's draft source's running acceptance estimate */
} srv_slot_info;

/* A Prometheus histogram in seconds over SRV_HIST_BOUNDS (response.c prints it). */
#define SRV_HIST_N 14
extern const double srv_hist_bounds[SRV_HIST_N];
typedef struct srv_hist {
    long long count, le[SRV_HIST_N]; /* le[i]: observations <= srv_hist_bounds[i] */
    double sum;
} srv_hist;
void srv_hist_add(srv_hist *h, double seconds);

typedef struct srv_engine_stats {
    int n_slots, n_busy, n_queued;
    long long n_prompt_tokens, n_gen_tokens, n_decode, n_busy_slot_steps;
    double t_prompt_s, t_gen_s;
    long long n_tasks_done, n_tasks_cancelled, n_tasks_failed, n_rejected;
    long long n_tokens_max;    /* high-water mark of one slot's context use */
    long long n_prompt_shared; /* prompt tokens a slot did not decode: its twin's batch entries held them too */
    double t_decode_s, t_sample_s; /* engine thread: in sift_decode, in sampling + publishing */
    double t_sampling_s;       /* engine thread: in the sampling call alone (sift_chain_sample_ex) */
    long long n_sampled;       /* sampling calls */
    int32_t kv_used;
    long long n_drafted, n_draft_accepted; /* speculative decoding: draft tokens verified, accepted */
    double t_draft_s;          /* engine thread: drafting (the draft model's decodes, lookups) */
    srv_hist h_queue, h_ttft, h_tpot; /* queue time, time to first token, time per output token */
} srv_engine_stats;

/* A request's speculative.* defaults: --draft-max, --draft-min, --draft-p-min. */
sift_draft_params srv_draft_defaults(const srv_config *cfg);
void srv_engine_stats_get(srv_engine *e, srv_engine_stats *st, srv_slot_info *slots, int max_slots);

/* ---- responses (response.c) ----------------------------------------------------------------- */

/* {"error": {"code", "message", "type"}} */
char *srv_json_error(const srv_error *e);
/* The whole response of a finished task (non-streaming), in its kind's shape. */
char *srv_json_final(const srv_server *s, srv_task *t);
/* The same for the n tasks of one request (n > 1 or several prompts), in index order:
 * /completion an array of objects, the OpenAI shapes one object with n choices. */
char *srv_json_final_group(const srv_server *s, srv_task *const *g, int n);

/* Streaming: the SSE events for the tokens [from, to) of a snapshot, then (final) the
 * closing events. Appends "data: ...\n\n" lines to out. */
typedef struct srv_snapshot {
    srv_tokrec *recs;
    size_t n_recs;
    char *text;                /* bytes [text_from, text_to) of task->text */
    size_t text_from, text_to;
    srv_prob *probs;           /* copies of the task arrays the records point into */
    size_t probs_from;
    srv_stage *stages;
    size_t stages_from;
    srv_prob *tops;
    size_t tops_from;
    size_t rec_from;           /* index of recs[0] among all the task's records */
} srv_snapshot;

/* *role_sent: the chat stream's opening delta ({"role": "assistant"}) went out already. */
void srv_sse_tokens(const srv_server *s, srv_task *t, const srv_snapshot *snap, bool *role_sent, sbuf *out);
/* After every token: the closing events (the task is done, so read without its lock). */
void srv_sse_final(const srv_server *s, srv_task *t, bool *role_sent, sbuf *out);
/* The same for task t of a request's tasks g[0..n): last (every other one has ended) adds
 * the usage over all of them and `[DONE]`. */
void srv_sse_final_group(const srv_server *s, srv_task *t, bool *role_sent, srv_task *const *g, int n, bool last, sbuf *out);
void srv_sse_error(const srv_error *e, sbuf *out);
/* A prompt-progress chunk (return_progress), llama-server's "prompt_progress". */
void srv_sse_progress(const srv_server *s, const srv_task *t, const srv_progress *pr, sbuf *out);

char *srv_json_props(const srv_server *s);
char *srv_json_slots(const srv_server *s);
char *srv_json_models(const srv_server *s);
char *srv_text_metrics(const srv_server *s);
/* The last component of a path (what /props and /v1/models show of the model file). */
const char *srv_file_name(const char *path);
/* POST /tokenize, /detokenize, /apply-template: 0 and *out, or an HTTP status with e. */
/* (request.c) */
int srv_handle_tokenize(const srv_server *s, const char *body, size_t len, char **out, srv_error *e);
int srv_handle_detokenize(const srv_server *s, const char *body, size_t len, char **out, srv_error *e);
int srv_handle_apply_template(const srv_server *s, const char *body, size_t len, char **out, srv_error *e);

/* ---- Anthropic's Messages API (anthropic.c) ------------------------------------------------------ */

/* A /v1/messages body (parsed) -> the /v1/chat/completions body it means (count_only: without
 * max_tokens and stream, for count_tokens). NULL with a 400 naming the Anthropic field. */
struct cJSON *srv_anth_request(const struct cJSON *in, bool count_only, srv_error *e);
/* The whole reply of a finished chat task as an Anthropic message (NULL: out of memory). */
char *srv_anth_json_final(const srv_server *s, srv_task *t);
/* {"type": "error", "error": {"type", "message"}}, the type from the status. */
char *srv_anth_json_error(const srv_error *e);
/* A stream's converter: the task's OpenAI chunks (srv_sse_* into srv_anth_stream_input) ->
 * Anthropic's events (srv_anth_sse appends them to out and empties the input). */
typedef struct srv_anth_stream srv_anth_stream;
srv_anth_stream *srv_anth_stream_new(void);
void srv_anth_stream_free(srv_anth_stream *st);
sbuf *srv_anth_stream_input(srv_anth_stream *st);
void srv_anth_sse(const srv_server *s, srv_anth_stream *st, srv_task *t, sbuf *out);
/* The chat chunks ("data: JSON" events) in in, each parsed and given to fn (with the
 * converter's state `stream`) until *ended; in is emptied (the dialects' stream converters,
 * anthropic.c and responses.c). */
/* Append the chat tool {type: "function", function: {name, description (desc NULL: none),
 * parameters (a copy of params; NULL: {})}} to the array tools; false: out of memory. */
bool srv_chat_tool_add(struct cJSON *tools, const char *name, const char *desc, const struct cJSON *params);
/* One event, `event: TYPE` (o's "type") and `data: JSON` (o, consumed); out->oom on failure. */
void srv_sse_event(sbuf *out, struct cJSON *o);
typedef void (*srv_chunk_fn)(const srv_server *s, void *stream, srv_task *t, const struct cJSON *chunk, sbuf *out);
void srv_sse_each(sbuf *in, const srv_server *s, void *stream, srv_task *t, srv_chunk_fn fn, const bool *ended, sbuf *out);
/* The OpenAI reply of a finished chat task, parsed, with its first choice and message (NULL:
 * out of memory). */
struct cJSON *srv_json_final_parsed(const srv_server *s, srv_task *t, const struct cJSON **choice, const struct cJSON **msg);
/* POST /v1/messages/count_tokens: {"input_tokens": N}, the prompt the request would read. */
int srv_handle_count_tokens(const srv_server *s, const char *body, size_t len, char **out, srv_error *e);

/* ---- OpenAI's Responses API (responses.c) ------------------------------------------------------- */

/* A /v1/responses body (parsed) -> the /v1/chat/completions body it means. NULL with a 400
 * naming the Responses field (previous_response_id and other state: refused, stateless). */
struct cJSON *srv_resp_request(const struct cJSON *in, srv_error *e);
/* The whole reply of a finished chat task as a `response` object (NULL: out of memory). */
char *srv_resp_json_final(const srv_server *s, srv_task *t);
/* A stream's converter: the task's chat chunks (srv_sse_* into srv_resp_stream_input) ->
 * the Responses events (srv_resp_sse appends them to out and empties the input). */
typedef struct srv_resp_stream srv_resp_stream;
srv_resp_stream *srv_resp_stream_new(void);
void srv_resp_stream_free(srv_resp_stream *st);
sbuf *srv_resp_stream_input(srv_resp_stream *st);
void srv_resp_sse(const srv_server *s, srv_resp_stream *st, srv_task *t, sbuf *out);

/* ---- embeddings (embeddings.c) ---------------------------------------------------------------- */

/* The embeddings context (after the engine: it takes the slot's size). NULL and err. */
srv_embd *srv_embd_new(srv_server *s, sift_error *err);
void srv_embd_free(srv_embd *m);
int srv_embd_pooling(const srv_embd *m);
const char *srv_pooling_name(int pooling);
/* POST /embedding (oai false: llama-server's shape) and /v1/embeddings: 0 and *out, or the
 * HTTP status with e (501 without --embeddings). */
int srv_handle_embeddings(const srv_server *s, bool oai, const char *body, size_t len, char **out, srv_error *e);

/* ---- connection admission and deadlines (conns.c) ------------------------------------------------ */

typedef enum srv_conn_phase {
    SRV_CONN_WAIT = 0, /* no request in progress: the next request's head must arrive (header deadline) */
    SRV_CONN_BODY,     /* the head is in, the body is arriving (body deadline) */
    SRV_CONN_BUSY,     /* the request is being answered */
} srv_conn_phase;

typedef struct srv_conn_stats {
    long long n_accepted, n_refused, n_evicted, n_header_timeouts, n_body_timeouts, n_slow_bodies;
    int n_open, n_busy;
} srv_conn_stats;

typedef struct srv_conns srv_conns;
/* max_conns in all, per_client per client address (IPv6: per /64; 0: no cap), deadlines in
 * ms, min_rate the body's least average pace in bytes/s (0: none). kill_fd closes a
 * connection from outside its thread (NULL: shutdown(2)). */
srv_conns *srv_conns_new(int max_conns, int per_client, double header_ms, double body_ms, int min_rate, void (*kill_fd)(int fd));
void srv_conns_free(srv_conns *c);
/* Table entries for max_conns (live ones plus those shut down but not closed yet). */
int srv_conns_capacity(int max_conns);
/* A new connection: true to admit it (it starts in WAIT), false to refuse it. Makes room by
 * closing a waiting connection (the client's own at the per-client cap): an answered one
 * first, else a fresh one older than a grace period, else the slowest upload (conns.c says
 * why). */
bool srv_conns_admit(srv_conns *c, int fd, const struct sockaddr *addr, double now_ms);
void srv_conns_set_phase(srv_conns *c, int fd, srv_conn_phase p, double now_ms);
void srv_conns_closed(srv_conns *c, int fd);
/* n more bytes of the body arrived on fd (for --min-body-rate and the slowest upload). */
void srv_conns_body_bytes(srv_conns *c, int fd, size_t n);
/* Close the connections past their phase's deadline; how many. */
int srv_conns_reap(srv_conns *c, double now_ms);
void srv_conns_stats(srv_conns *c, srv_conn_stats *st);

/* POST /slots/N?action=save|restore: the body's "filename" (a plain file name, checked) into
 * out; 0, or 400 with e. (request.c) */
int srv_parse_slot_file(const char *body, size_t len, char *out, size_t cap, srv_error *e);
/* The answer to a slot action, as llama-server writes it. (response.c) */
char *srv_json_slot_action(int slot, srv_slot_action a, const char *file, const srv_slot_result *res);

/* The first in byte order of a comma-separated list of names (--alias a,b), as a new
 * string; NULL when out of memory. (response.c) */
char *srv_first_name(const char *list);

/* ---- background priority for client-controlled work (prio.c) ----------------------------------- */

typedef enum srv_prio_mode {
    SRV_PRIO_OFF = 0, /* not on this system, or turned off */
    SRV_PRIO_NICE,    /* nice +19 (the lowest) */
} srv_prio_mode;

/* Once, before the first connection: which background this process can use (prio.c). */
srv_prio_mode srv_prio_init(bool enable);
/* This thread into the background, just before work whose cost the client controls (a
 * render, a grammar or schema compile); idempotent. */
void srv_prio_background(void);
/* This thread back to normal priority, if it went into the background; idempotent. */
void srv_prio_restore(void);

/* ---- HTTP (http.c) ------------------------------------------------------------------------- */

/* The embedded web page (generated at build time from tools/server/public/index.html). */
extern const unsigned char srv_index_html[];
extern const size_t srv_index_html_len;

/* Listen on cfg.host:cfg.port; *port_out receives the bound port. NULL and a message on error. */
srv_http *srv_http_start(srv_server *s, int *port_out, char *errbuf, size_t errcap);
void srv_http_stop(srv_http *h);
/* SIGTERM: take no new work (503 to new requests, /health 503), then wait until no request
 * is queued, running or still sending its response, or drain_timeout_s passed. Returns
 * whether everything finished. */
bool srv_http_drain(srv_http *h, int drain_timeout_s);
/* After srv_engine_stop failed what was left: wait until every connection has sent its
 * answer (a stream its closing error event), or until t_end (srv_now_ms). Returns whether
 * all did. */
bool srv_http_flush(srv_http *h, double t_end);
void srv_http_conn_stats(srv_http *h, srv_conn_stats *st);
srv_server *srv_http_server(srv_http *h);

double srv_now_ms(void);

#endif
