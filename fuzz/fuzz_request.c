/*
 * fuzz_request.c - libFuzzer target for the server's request parsing (tools/server/request.c
 * and what it calls: chat.c, chat_jinja.c, tool_calls.c): the JSON bodies of /completion,
 * /v1/completions, /v1/chat/completions, /tokenize, /detokenize and /apply-template, and
 * Anthropic's /v1/messages and /v1/messages/count_tokens (anthropic.c), as a client sends them. (The HTTP framing itself - request line, headers, chunks - is
 * libmicrohttpd's; the server's own checks on it are tested in tests/server_test.py.)
 *
 * One input: its first byte picks the endpoint (0xF0 and up: Anthropic's, even /v1/messages, odd
 * count_tokens), the rest is the body. The server is the real
 * one minus its threads: stories260K (../shared/models, or $SIFT_FUZZ_MODEL), its grammar
 * compiler, a Jinja chatml template with a render memory pool. Every body must be accepted
 * (then its samplers must build: what the HTTP layer does next) or refused with a 4xx or 5xx
 * and a message; the sanitizers catch the rest.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static srv_server S;
static bool ready;

static const char CHATML[] =
    "{%- for m in messages -%}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] | string + '<|im_end|>\\n' }}"
    "{%- endfor -%}{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}";

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *path = getenv("SIFT_FUZZ_MODEL");
    if (!path) path = "../shared/models/stories260K.gguf";
    sift_error err = {0};
    if (!(S.model = sift_model_load(path, &err))) {
        fprintf(stderr, "fuzz_request: %s: %s (set SIFT_FUZZ_MODEL)\n", path, err.msg);
        exit(1);
    }
    sift_model_get_info(S.model, &S.info);
    S.vocab = sift_model_vocab(S.model);
    S.n_vocab = S.info.n_vocab;
    sift_vocab_view_get(S.vocab, &S.view);
    sift_grammar_compiler_params gp = sift_grammar_compiler_default_params();
    if (!(S.gcomp = sift_grammar_compiler_new(&S.view, &gp, &err))) exit(1);
    S.eot = sift_vocab_eos(S.vocab);
    S.model_name = "stories260K.gguf";
    S.n_ctx_slot = 512;
    srv_config *c = &S.cfg;
    c->model_path = path;
    c->host = "127.0.0.1";
    c->n_parallel = 4;
    c->n_ctx = 2048;
    c->n_batch = 512;
    c->max_queue = 64;
    c->max_body = 1 << 20;
    c->max_n_predict = 4096;
    c->default_n_predict = -1;
    c->template_memory = (size_t)64 << 20;
    c->template_timeout_ms = 2000;
    c->max_probs_bytes = (size_t)256 << 20;
    c->max_renders = 1;
    if (!(S.jinja = sift_template_parse(CHATML, strlen(CHATML), &err))) exit(1);
    if (!(S.tpool = sift_template_pool_new(c->template_memory))) exit(1);
    S.jinja_object_args = chat_jinja_probe_object_args(&S);
    S.tmpl = CHAT_CHATML;
    ready = true;
    return 0;
}

static void check_refusal(int rc, const srv_error *e)
{
    if (rc < 400 || rc > 599 || !e->msg[0]) abort(); /* a refusal is an HTTP status and says why */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ready || size < 1) return 0;
    const char *body = (const char *)data + 1;
    const size_t n = size - 1;
    srv_error e = {0};
    char *out = NULL;
    int rc;
    const bool anth = data[0] >= 0xF0;
    switch (anth ? 0 : data[0] % 6) {
    case 0:
    case 1:
    case 2: {
        srv_request r;
        memset(&r, 0, sizeof r);
        const srv_kind kind = anth ? (data[0] & 1 ? SRV_ANTH_COUNT : SRV_ANTH_MSG) : (srv_kind)(data[0] % 3);
        rc = srv_parse_completion(&S, kind, body, n, &r, &e);
        if (rc) {
            check_refusal(rc, &e);
            return 0;
        }
        sift_chain *chain = NULL;
        sift_sampler *grammar = NULL;
        srv_error e2 = {0};
        const int b = srv_build_samplers(&S, &r, &chain, &grammar, &e2);
        if (b) check_refusal(b, &e2);
        sift_chain_free(chain);
        sift_sampler_free(grammar);
        srv_request_free(&r);
        return 0;
    }
    case 3: rc = srv_handle_tokenize(&S, body, n, &out, &e); break;
    case 4: rc = srv_handle_detokenize(&S, body, n, &out, &e); break;
    default: rc = srv_handle_apply_template(&S, body, n, &out, &e); break;
    }
    if (rc) check_refusal(rc, &e);
    else if (!out) abort();
    free(out);
    return 0;
}
