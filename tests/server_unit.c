/*
 * server_unit.c - unit tests of the server's pure parts (CTest: server_unit, also under
 * valgrind): UTF-8 holding and repair of streamed text, stop strings, and chat templates
 * (detection from real Jinja template texts and the prompts they produce, with the
 * conversation and expected outputs of llama.cpp's tests/test-chat-template.cpp, and the
 * template of a real GGUF from ../shared); and the connection table (conns.c): per-client
 * and global caps, which connection gives way, the header and body deadlines.
 */
#include "sift_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "server/server.h"

/* ---- UTF-8 ------------------------------------------------------------------------------------ */

static void test_utf8_tail(void **state)
{
    (void)state;
    assert_int_equal(utf8_incomplete_tail("abc", 3), 0);
    assert_int_equal(utf8_incomplete_tail("ab\xc3", 3), 1);            /* é cut after 1 of 2 */
    assert_int_equal(utf8_incomplete_tail("ab\xc3\xa9", 4), 0);
    assert_int_equal(utf8_incomplete_tail("\xe2\x82", 2), 2);          /* € cut after 2 of 3 */
    assert_int_equal(utf8_incomplete_tail("x\xe2\x82\xac", 4), 0);
    assert_int_equal(utf8_incomplete_tail("\xf0\x9f\x98", 3), 3);      /* emoji cut after 3 of 4 */
    assert_int_equal(utf8_incomplete_tail("\xf0\x9f\x98\x80", 4), 0);
    assert_int_equal(utf8_incomplete_tail("a\xff", 2), 0);             /* invalid: never completes, not held */
    assert_int_equal(utf8_incomplete_tail("a\xe0\x80", 3), 0);         /* overlong start: invalid, not held */
    assert_int_equal(utf8_incomplete_tail("a\x80\x80", 3), 0);         /* stray continuation bytes */
    assert_int_equal(utf8_incomplete_tail("", 0), 0);
}

static void test_utf8_valid_sanitize(void **state)
{
    (void)state;
    assert_true(utf8_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15));
    assert_false(utf8_valid("\xc0\xaf", 2));         /* overlong */
    assert_false(utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    assert_false(utf8_valid("\xc3", 1));             /* cut */
    assert_int_equal(utf8_valid_prefix("ab\xc3\xa9\xff", 5), 4);
    sbuf b = {0};
    utf8_sanitize(&b, "a\xffz\xc3\xa9\xed\xa0\x80!", 9);
    assert_string_equal(b.p, "a\xef\xbf\xbdz\xc3\xa9\xef\xbf\xbd!");
    sbuf_free(&b);
}

/* ---- stop strings ---------------------------------------------------------------------------- */

static void test_stop_strings(void **state)
{
    (void)state;
    char *stops[] = {"world", "\n\nUser:", "x"};
    int which = -1;
    const char *t = "hello world, x";
    assert_int_equal(stop_find(t, strlen(t), 0, stops, 2, &which), 6);
    assert_int_equal(which, 0);
    assert_int_equal(stop_find(t, strlen(t), 0, stops, 3, &which), 6); /* the earliest wins */
    assert_int_equal(stop_find(t, strlen(t), 7, stops, 3, &which), 13);
    assert_int_equal(which, 2);
    assert_int_equal(stop_find(t, strlen(t), 0, stops + 1, 1, &which), -1);
    /* partial matches at the end are held back */
    assert_int_equal(stop_partial("hello wor", 9, stops, 2), 3);
    assert_int_equal(stop_partial("story.\n\nUs", 10, stops, 2), 4);
    assert_int_equal(stop_partial("story.\n", 7, stops, 2), 1);
    assert_int_equal(stop_partial("nothing", 7, stops, 2), 0);
    assert_int_equal(stop_partial("abc", 3, stops + 2, 1), 0); /* one-byte stop: no partial */
}

/* ---- chat templates --------------------------------------------------------------------------- */

static const chat_msg conversation[] = {
    {"system", "You are a helpful assistant"}, {"user", "Hello"},      {"assistant", "Hi there"},
    {"user", "Who are you"},                   {"assistant", "   I am an assistant   "}, {"user", "Another question"},
};

typedef struct tcase {
    const char *name, *tmpl;
    chat_tmpl want;
    const char *expected;
} tcase;

/* Template texts and expected prompts from llama.cpp's tests/test-chat-template.cpp. */
static const tcase cases[] = {
    {"OpenHermes (chatml)",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
     CHAT_CHATML,
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi "
     "there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   "
     "<|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n"},
    {"Mistral-7B-Instruct-v0.2 (llama2)",
     "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
     "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}",
     CHAT_LLAMA2,
     "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] "
     "Another question [/INST]"},
    {"FusionNet (llama2-sys-bos)",
     "{%- if messages[idx]['role'] == 'user' -%}{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}"
     "{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}",
     CHAT_LLAMA2_SYS_BOS,
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you [/INST]   I am an "
     "assistant   </s><s>[INST] Another question [/INST]"},
    {"vigogne (llama2-sys-strip)",
     "{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'system' %}"
     "{{ '<<SYS>>\\n' + content.strip() + '\\n<</SYS>>\\n\\n' }}{% endif %}",
     CHAT_LLAMA2_SYS_STRIP,
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]I am an "
     "assistant</s>[INST] Another question [/INST]"},
    {"gemma-7b-it",
     "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
     "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}",
     CHAT_GEMMA,
     "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
     "<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\n"
     "Another question<end_of_turn>\n<start_of_turn>model\n"},
    {"deepseek-coder-33b-instruct",
     "{{'### Instruction:\\n' + message['content'] + '\\n'}}{{'### Response:\\n' + message['content'] + '\\n<|EOT|>\\n'}}",
     CHAT_DEEPSEEK,
     "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\nWho are you\n### "
     "Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother question\n### Response:\n"},
    {"vicuna-13b-1.1",
     "{%- if message['role'] == 'user' -%}{{-'USER: ' + message['content'] + '\\n'-}}{%- else -%}{{-'ASSISTANT: ' + "
     "message['content'] + '</s>\\n' -}}",
     CHAT_VICUNA,
     "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant   "
     "</s>\nUSER: Another question\nASSISTANT:"},
    {"Orca-Vicuna",
     "{{-'SYSTEM: ' + message['content'] + '\\n' -}}{{-'USER: ' + message['content'] + '\\n'-}}{{-'ASSISTANT: ' + message['content'] "
     "+ '</s>\\n' -}}",
     CHAT_VICUNA_ORCA,
     "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\nASSISTANT:    I am an assistant  "
     " </s>\nUSER: Another question\nASSISTANT:"},
    {"c4ai-command-r-plus",
     "{{ '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' + system_message + '<|END_OF_TURN_TOKEN|>' }}{{ "
     "'<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }}",
     CHAT_COMMAND_R,
     "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>"
     "Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|>"
     "<|USER_TOKEN|>Who are you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {"Llama-3",
     "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
     "'<|eot_id|>' %}",
     CHAT_LLAMA3,
     "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
     "Hello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
     "Who are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user"
     "<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"Phi-3-small",
     "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + '<|end|>\\n' }}"
     "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}",
     CHAT_PHI3,
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are "
     "you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
};

static void test_chat_templates(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const tcase *c = &cases[i];
        const chat_tmpl t = chat_detect(c->tmpl);
        if (t != c->want) fail_msg("%s: detected %s, want %s", c->name, chat_name(t), chat_name(c->want));
        sbuf out = {0};
        assert_true(chat_apply(t, conversation, sizeof conversation / sizeof *conversation, true, &out));
        if (strcmp(out.p, c->expected) != 0) fail_msg("%s:\n got  %s\n want %s", c->name, out.p, c->expected);
        sbuf_free(&out);
        /* the name works too */
        assert_int_equal(chat_from_name(chat_name(c->want)), c->want);
    }
    assert_int_equal(chat_detect("{{ unknown }}"), CHAT_UNKNOWN);
    assert_int_equal(chat_detect(NULL), CHAT_UNKNOWN);
    assert_int_equal(chat_detect("llama3"), CHAT_LLAMA3);
    sbuf out = {0};
    assert_false(chat_apply(CHAT_UNKNOWN, conversation, 1, true, &out));
    sbuf_free(&out);
}

/* A real GGUF's tokenizer.chat_template (Phi-3's vocabulary file in ../shared). */
static void test_chat_template_from_gguf(void **state)
{
    (void)state;
    const char *shared = getenv("SIFT_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/vocab/ggml-vocab-phi-3.gguf", shared ? shared : "../shared");
    sift_error err = {0};
    sift_gguf *g = sift_gguf_open(path, &err);
    if (!g) fail_msg("%s: %s", path, err.msg);
    const char *tmpl = NULL;
    assert_int_equal(sift_gguf_get_str(g, "tokenizer.chat_template", &tmpl, &err), SIFT_OK);
    assert_int_equal(chat_detect(tmpl), CHAT_PHI3);
    sift_gguf_close(g);
}

/* ---- connection table (conns.c) ----------------------------------------------------------------- */

static int killed[64], n_killed;
static void fake_kill(int fd) { killed[n_killed++ % 64] = fd; }

static struct sockaddr_in v4(const char *ip)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static bool admit(srv_conns *c, int fd, const char *ip, double now)
{
    struct sockaddr_in a = v4(ip);
    return srv_conns_admit(c, fd, (struct sockaddr *)&a, now);
}

static void test_conns_per_client(void **state)
{
    (void)state;
    n_killed = 0;
    srv_conns *c = srv_conns_new(100, 2, 10000, 30000, 0, fake_kill);
    assert_non_null(c);
    assert_true(admit(c, 10, "10.0.0.1", 0));
    assert_true(admit(c, 11, "10.0.0.1", 100));
    assert_true(admit(c, 20, "10.0.0.2", 200)); /* another client: its own count */
    /* at the cap: the client's oldest waiting connection (10) gives way */
    assert_true(admit(c, 12, "10.0.0.1", 5000));
    assert_int_equal(n_killed, 1);
    assert_int_equal(killed[0], 10);
    srv_conns_closed(c, 10);
    /* both of the client's connections busy: the next one is refused, nobody is closed */
    srv_conns_set_phase(c, 11, SRV_CONN_BUSY, 5100);
    srv_conns_set_phase(c, 12, SRV_CONN_BODY, 8500); /* an upload younger than the grace period */
    assert_false(admit(c, 13, "10.0.0.1", 9000));
    assert_int_equal(n_killed, 1);
    /* the same client over IPv6 as ::ffff:10.0.0.1 counts as the same address */
    struct sockaddr_in6 m = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::ffff:10.0.0.1", &m.sin6_addr);
    assert_false(srv_conns_admit(c, 14, (struct sockaddr *)&m, 9000));
    srv_conn_stats st;
    srv_conns_stats(c, &st);
    assert_int_equal(st.n_open, 3);
    assert_int_equal(st.n_busy, 1);
    assert_int_equal(st.n_evicted, 1);
    assert_int_equal(st.n_refused, 2);
    srv_conns_free(c);
}

static void test_conns_global_cap(void **state)
{
    (void)state;
    n_killed = 0;
    srv_conns *c = srv_conns_new(3, 0, 10000, 30000, 0, fake_kill);
    assert_true(admit(c, 1, "10.0.0.1", 0));
    assert_true(admit(c, 2, "10.0.0.2", 100));
    assert_true(admit(c, 3, "10.0.0.3", 200));
    srv_conns_set_phase(c, 1, SRV_CONN_BUSY, 300);
    /* full: the oldest waiting one of anybody (2, not the busy 1) makes room */
    assert_true(admit(c, 4, "10.0.0.4", 5000));
    assert_int_equal(n_killed, 1);
    assert_int_equal(killed[0], 2);
    /* a doomed connection no longer counts, even before its thread closes it */
    srv_conns_set_phase(c, 3, SRV_CONN_BUSY, 5100);
    srv_conns_set_phase(c, 4, SRV_CONN_BUSY, 5100);
    assert_false(admit(c, 5, "10.0.0.5", 9000)); /* everyone busy: refused */
    srv_conns_closed(c, 2);
    srv_conns_closed(c, 1); /* one finished: room again */
    assert_true(admit(c, 5, "10.0.0.5", 9100));
    assert_int_equal(n_killed, 1);
    srv_conns_free(c);
}

static void test_conns_deadlines(void **state)
{
    (void)state;
    n_killed = 0;
    srv_conns *c = srv_conns_new(10, 0, 1000, 2000, 0, fake_kill);
    assert_true(admit(c, 1, "10.0.0.1", 0));    /* head due by 1000 */
    assert_true(admit(c, 2, "10.0.0.1", 0));
    assert_true(admit(c, 3, "10.0.0.1", 0));
    srv_conns_set_phase(c, 2, SRV_CONN_BODY, 500); /* body due by 2500 */
    srv_conns_set_phase(c, 3, SRV_CONN_BUSY, 500); /* no deadline */
    assert_int_equal(srv_conns_reap(c, 999), 0);
    assert_int_equal(srv_conns_reap(c, 1001), 1);
    assert_int_equal(killed[0], 1);
    assert_int_equal(srv_conns_reap(c, 1500), 0); /* once */
    assert_int_equal(srv_conns_reap(c, 2501), 1);
    assert_int_equal(killed[1], 2);
    assert_int_equal(srv_conns_reap(c, 1e9), 0);
    /* a kept-alive connection back in WAIT gets a fresh header deadline */
    srv_conns_set_phase(c, 3, SRV_CONN_WAIT, 5000);
    assert_int_equal(srv_conns_reap(c, 5999), 0);
    assert_int_equal(srv_conns_reap(c, 6001), 1);
    srv_conn_stats st;
    srv_conns_stats(c, &st);
    assert_int_equal(st.n_header_timeouts, 2);
    assert_int_equal(st.n_body_timeouts, 1);
    srv_conns_free(c);
}

/* Which waiting connection gives way: never a fresh one younger than the grace period (its
 * request may be on its way), and an answered (kept-alive) one before an older fresh one. */
static void test_conns_grace(void **state)
{
    (void)state;
    n_killed = 0;
    srv_conns *c = srv_conns_new(100, 2, 10000, 30000, 0, fake_kill); /* grace: 1 s */
    assert_true(admit(c, 1, "10.0.0.1", 0));
    assert_true(admit(c, 2, "10.0.0.1", 500));
    assert_false(admit(c, 3, "10.0.0.1", 900)); /* both younger than 1 s: refused, nobody closed */
    assert_int_equal(n_killed, 0);
    assert_true(admit(c, 3, "10.0.0.1", 1200)); /* 1 is past the grace period */
    assert_int_equal(n_killed, 1);
    assert_int_equal(killed[0], 1);
    srv_conns_closed(c, 1);
    srv_conns_set_phase(c, 3, SRV_CONN_BUSY, 1300);
    srv_conns_set_phase(c, 3, SRV_CONN_WAIT, 1400); /* answered, kept alive */
    assert_true(admit(c, 4, "10.0.0.1", 5000));
    assert_int_equal(n_killed, 2);
    assert_int_equal(killed[1], 3); /* the answered one, though 2 is older */
    srv_conns_free(c);
}

/* connections shut down but not closed yet keep their entries: once the table is full of
 * them, refuse rather than overflow */
static void test_conns_capacity(void **state)
{
    (void)state;
    n_killed = 0;
    srv_conns *c = srv_conns_new(1, 0, 1000, 1000, 0, fake_kill);
    const int cap = srv_conns_capacity(1);
    int admitted = 0;
    for (int fd = 0; fd < cap + 10; fd++) admitted += admit(c, 100 + fd, "10.0.0.1", 1000.0 * fd);
    assert_int_equal(admitted, cap);
    assert_int_equal(n_killed, cap - 1); /* each new one made the previous give way */
    srv_conns_closed(c, 100);
    assert_true(admit(c, 500, "10.0.0.1", 1e9));
    srv_conns_free(c);
}

/* --min-body-rate: a body trickled below the pace is closed after the rate grace period (2 s);
 * a full table gives up its slowest upload for a new connection; IPv6 clients count per /64 */
static void test_conns_slow_bodies(void **state)
{
    (void)state;
    n_killed = 0;
    srv_conns *c = srv_conns_new(3, 0, 10000, 30000, 100, fake_kill);
    assert_true(admit(c, 1, "10.0.0.1", 0));
    assert_true(admit(c, 2, "10.0.0.2", 0));
    assert_true(admit(c, 3, "10.0.0.3", 0));
    srv_conns_set_phase(c, 1, SRV_CONN_BODY, 0);
    srv_conns_set_phase(c, 2, SRV_CONN_BODY, 0);
    srv_conns_set_phase(c, 3, SRV_CONN_BUSY, 0);
    srv_conns_body_bytes(c, 1, 1000); /* 1000 B: on pace for 10 s at 100 B/s */
    srv_conns_body_bytes(c, 2, 150);  /* 150 B: on pace for 1.5 s only */
    assert_int_equal(srv_conns_reap(c, 1900), 0); /* inside the 2 s grace: any pace */
    /* full (3 of 3): the slowest upload (2) gives way, though both are BODY */
    assert_true(admit(c, 4, "10.0.0.4", 1900));
    assert_int_equal(n_killed, 1);
    assert_int_equal(killed[0], 2);
    srv_conns_closed(c, 2);
    assert_int_equal(srv_conns_reap(c, 5000), 0);  /* 1000 B in 5 s: 200 B/s */
    assert_int_equal(srv_conns_reap(c, 10100), 1); /* 1000 B in 10.1 s: under 100 B/s */
    assert_int_equal(killed[1], 1);
    srv_conn_stats st;
    srv_conns_stats(c, &st);
    assert_int_equal(st.n_slow_bodies, 1);
    assert_int_equal(st.n_evicted, 1);
    srv_conns_free(c);

    /* IPv6: 2001:db8::1 and 2001:db8::ffff share a /64 (one client); 2001:db8:0:1::1 does not */
    n_killed = 0;
    c = srv_conns_new(100, 1, 10000, 30000, 0, fake_kill);
    const char *ips[] = {"2001:db8::1", "2001:db8::ffff", "2001:db8:0:1::1"};
    bool ok[3];
    for (int i = 0; i < 3; i++) {
        struct sockaddr_in6 a = {.sin6_family = AF_INET6};
        inet_pton(AF_INET6, ips[i], &a.sin6_addr);
        srv_conns_set_phase(c, 10 + i - 1, SRV_CONN_BUSY, 0); /* the previous one busy: no room to make */
        ok[i] = srv_conns_admit(c, 10 + i, (struct sockaddr *)&a, 0);
        srv_conns_set_phase(c, 10 + i, SRV_CONN_BUSY, 0);
    }
    assert_true(ok[0]);
    assert_false(ok[1]);
    assert_true(ok[2]);
    srv_conns_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_tail),
        cmocka_unit_test(test_utf8_valid_sanitize),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_chat_templates),
        cmocka_unit_test(test_chat_template_from_gguf),
        cmocka_unit_test(test_conns_per_client),
        cmocka_unit_test(test_conns_global_cap),
        cmocka_unit_test(test_conns_deadlines),
        cmocka_unit_test(test_conns_grace),
        cmocka_unit_test(test_conns_capacity),
        cmocka_unit_test(test_conns_slow_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
