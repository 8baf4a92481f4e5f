/*
 * server_anthropic_unit.c - unit tests of Anthropic's Messages API adapter
 * (tools/server/anthropic.c; CTest: server_anthropic_unit, also under valgrind): a Messages
 * request converted into the chat request it means, compared whole; the checks' 400s; and the
 * stream converter fed OpenAI chunks that no small model produces in one reply (thinking, then
 * text, then two tool calls whose arguments arrive in pieces; an empty reply; a stop string;
 * a failure), in two batches so that its state carries across calls: the events, their
 * indices and deltas, compared whole.
 */
#include "sift_test.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "server_dialect.h"

/* The conversion of body (JSON text), printed (NULL: refused, *e says why). */
static char *convert(const char *body, bool count_only, srv_error *e)
{
    cJSON *in = body_json(body, e);
    return printed(in, srv_anth_request(in, count_only, e));
}

static void test_request(void **state)
{
    (void)state;
    srv_error e;
    /* every block kind in order: a tool_result splits the user's text around it; the
     * assistant's thinking becomes reasoning_content, its tool_use the tool_calls */
    char *got = convert(
        "{\"model\": \"m\", \"max_tokens\": 9, \"temperature\": 0.5, \"top_k\": 4, \"stream\": true, \"n\": 3, \"metadata\": {\"user_id\": \"u\"},"
        " \"system\": [{\"type\": \"text\", \"text\": \"x-anthropic-billing-header: cc_version=1; cch=a5145;\"}, {\"type\": \"text\", \"text\": \" Be brief.\"}],"
        " \"stop_sequences\": [\"END\"], \"thinking\": {\"type\": \"disabled\"},"
        " \"tools\": [{\"name\": \"f\", \"description\": \"d\", \"input_schema\": {\"type\": \"object\"}, \"cache_control\": {\"type\": \"ephemeral\"}}, {\"name\": \"g\", \"type\": \"custom\"}],"
        " \"tool_choice\": {\"type\": \"tool\", \"name\": \"f\", \"disable_parallel_tool_use\": true},"
        " \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"},"
        "  {\"role\": \"assistant\", \"content\": [{\"type\": \"thinking\", \"thinking\": \"hmm\", \"signature\": \"s\"}, {\"type\": \"redacted_thinking\", \"data\": \"x\"},"
        "    {\"type\": \"text\", \"text\": \"Calling.\"}, {\"type\": \"tool_use\", \"id\": \"t1\", \"name\": \"f\", \"input\": {\"a\": [1, \"b\"]}}, {\"type\": \"tool_use\", \"id\": \"t2\", \"name\": \"g\"}]},"
        "  {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"before\"}, {\"type\": \"tool_result\", \"tool_use_id\": \"t1\", \"content\": [{\"type\": \"text\", \"text\": \"r\"}, {\"type\": \"text\", \"text\": \"1\"}]},"
        "    {\"type\": \"tool_result\", \"tool_use_id\": \"t2\", \"is_error\": true}, {\"type\": \"text\", \"text\": \"after\"}]},"
        "  {\"role\": \"assistant\", \"content\": []}]}",
        false, &e);
    assert_non_null(got);
    assert_json_equal(got,
        "{\"messages\": [{\"role\": \"system\", \"content\": \"x-anthropic-billing-header: cc_version=1; cch=fffff; Be brief.\"},"
        " {\"role\": \"user\", \"content\": \"Hi\"},"
        " {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"Calling.\"}], \"tool_calls\": ["
        "   {\"id\": \"t1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\":[1,\\\"b\\\"]}\"}},"
        "   {\"id\": \"t2\", \"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\": \"{}\"}}], \"reasoning_content\": \"hmm\"},"
        " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"before\"}]},"
        " {\"role\": \"tool\", \"tool_call_id\": \"t1\", \"content\": \"r1\"}, {\"role\": \"tool\", \"tool_call_id\": \"t2\", \"content\": \"\"},"
        " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"after\"}]}],"
        " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\", \"parameters\": {\"type\": \"object\"}}},"
        "   {\"type\": \"function\", \"function\": {\"name\": \"g\", \"parameters\": {}}}],"
        " \"parallel_tool_calls\": false, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"f\"}},"
        " \"stop\": [\"END\"], \"model\": \"m\", \"temperature\": 0.5, \"top_k\": 4, \"max_tokens\": 9, \"stream\": true,"
        " \"chat_template_kwargs\": {\"enable_thinking\": false}}");
    free(got);
    /* count_tokens: no max_tokens or stream; an empty conversation is one empty user turn;
     * the client's enable_thinking wins; any -> required */
    got = convert("{\"max_tokens\": 5, \"stream\": true, \"messages\": [], \"tool_choice\": {\"type\": \"any\"},"
                  " \"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 100}, \"chat_template_kwargs\": {\"enable_thinking\": false, \"x\": 1}}",
                  true, &e);
    assert_non_null(got);
    assert_json_equal(got, "{\"messages\": [{\"role\": \"user\", \"content\": \"\"}], \"tool_choice\": \"required\","
                           " \"chat_template_kwargs\": {\"enable_thinking\": false, \"x\": 1}}");
    free(got);
    /* a billing header elsewhere than the system prompt is the client's text */
    got = convert("{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"a\","
                  " \"content\": \"x-anthropic-billing-header: cch=12345;\"}]}]}", false, &e);
    assert_non_null(got);
    assert_non_null(strstr(got, "cch=12345;"));
    free(got);
}

static void test_request_errors(void **state)
{
    (void)state;
    static const struct {
        const char *body, *word;
    } bad[] = {
        {"{}", "'messages' is required"},
        {"{\"messages\": {}}", "'messages' must be an array"},
        {"{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}", "'messages[0].role'"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "'messages[0].content'"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [5]}]}", "'messages[0].content[0]' must be a content block"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"document\"}]}]}", "image input is not supported"},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\": \"thinking\"}]}]}", "'messages[0].content[0].thinking'"},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\": \"tool_use\", \"name\": \"\"}]}]}", "'messages[0].content[0].name'"},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\": \"tool_use\", \"name\": \"f\", \"id\": 1}]}]}", "'messages[0].content[0].id'"},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"a\"}]}]}", "tool_result block in an assistant"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"a\", \"is_error\": 1}]}]}", "is_error"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"a\", \"content\": [{\"type\": \"image\"}]}]}]}",
         "image input is not supported"},
        {"{\"messages\": [], \"system\": [{\"type\": \"text\"}]}", "'system[0].text'"},
        {"{\"messages\": [], \"tools\": [3]}", "'tools[0]' must be an object"},
        {"{\"messages\": [], \"tools\": [{\"name\": 3}]}", "'tools[0].name'"},
        {"{\"messages\": [], \"tools\": [{\"name\": \"f\", \"description\": 3}]}", "'tools[0].description'"},
        {"{\"messages\": [], \"tools\": [{\"type\": 7, \"name\": \"f\"}]}", "server tool"},
        {"{\"messages\": [], \"tool_choice\": {\"type\": \"tool\"}}", "'tool_choice.name'"},
        {"{\"messages\": [], \"tool_choice\": {\"type\": \"auto\", \"disable_parallel_tool_use\": \"yes\"}}", "disable_parallel_tool_use"},
        {"{\"messages\": [], \"thinking\": {\"type\": \"enabled\", \"budget_tokens\": -1}}", "'thinking.budget_tokens'"},
        {"{\"messages\": [], \"thinking\": true}", "'thinking'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        srv_error e;
        assert_refused(bad[i].body, convert(bad[i].body, false, &e), &e, bad[i].word);
    }
}

/* Feed the chunks (each a JSON object, "data: " added) as one batch; the events since the
 * last call, as a JSON array of the data lines (each checked against its event: line). */
static char *feed(srv_anth_stream *st, srv_task *t, const char *const *chunks, size_t n)
{
    put_chunks(srv_anth_stream_input(st), chunks, n);
    sbuf out = {0};
    srv_anth_sse(dialect_server(), st, t, &out);
    assert_int_equal(srv_anth_stream_input(st)->n, 0);
    return sse_events(&out);
}

static void test_stream(void **state)
{
    (void)state;
    srv_task *t = fake_task(20, 5, 7);
    srv_anth_stream *st = srv_anth_stream_new();
    assert_non_null(st);
    char *got = feed(st, t, dialect_part1, 4);
    assert_json_equal(got,
        "[{\"type\": \"message_start\", \"message\": {\"id\": \"msg_abc123\", \"type\": \"message\", \"role\": \"assistant\", \"content\": [],"
        "   \"model\": \"m\", \"stop_reason\": null, \"stop_sequence\": null,"
        "   \"usage\": {\"input_tokens\": 15, \"cache_creation_input_tokens\": 0, \"cache_read_input_tokens\": 5, \"output_tokens\": 0}}},"
        " {\"type\": \"content_block_start\", \"index\": 0, \"content_block\": {\"type\": \"thinking\", \"thinking\": \"\"}},"
        " {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"thinking_delta\", \"thinking\": \"Let me \"}},"
        " {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"thinking_delta\", \"thinking\": \"think.\"}},"
        " {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"signature_delta\", \"signature\": \"\"}},"
        " {\"type\": \"content_block_stop\", \"index\": 0},"
        " {\"type\": \"content_block_start\", \"index\": 1, \"content_block\": {\"type\": \"text\", \"text\": \"\"}},"
        " {\"type\": \"content_block_delta\", \"index\": 1, \"delta\": {\"type\": \"text_delta\", \"text\": \"Calling.\"}}]");
    free(got);
    got = feed(st, t, dialect_part2, 7);
    assert_json_equal(got,
        "[{\"type\": \"content_block_stop\", \"index\": 1},"
        " {\"type\": \"content_block_start\", \"index\": 2, \"content_block\": {\"type\": \"tool_use\", \"id\": \"c0\", \"name\": \"f\", \"input\": {}}},"
        " {\"type\": \"content_block_delta\", \"index\": 2, \"delta\": {\"type\": \"input_json_delta\", \"partial_json\": \"{\\\"a\\\":\"}},"
        " {\"type\": \"content_block_delta\", \"index\": 2, \"delta\": {\"type\": \"input_json_delta\", \"partial_json\": \"1}\"}},"
        " {\"type\": \"content_block_stop\", \"index\": 2},"
        " {\"type\": \"content_block_start\", \"index\": 3, \"content_block\": {\"type\": \"tool_use\", \"id\": \"c1\", \"name\": \"g\", \"input\": {}}},"
        " {\"type\": \"content_block_delta\", \"index\": 3, \"delta\": {\"type\": \"input_json_delta\", \"partial_json\": \"{}\"}},"
        " {\"type\": \"content_block_stop\", \"index\": 3},"
        " {\"type\": \"message_delta\", \"delta\": {\"stop_reason\": \"tool_use\", \"stop_sequence\": null}, \"usage\": {\"output_tokens\": 7}},"
        " {\"type\": \"message_stop\"}]");
    free(got);
    /* after message_stop nothing more goes out */
    static const char *const late[] = {"{\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"x\"}}]}"};
    got = feed(st, t, late, 1);
    assert_string_equal(got, "[]");
    free(got);
    srv_anth_stream_free(st);
    free_task(t);

    /* an empty reply ended by a stop string: one empty text block, stop_reason stop_sequence */
    t = fake_task(3, 0, 1);
    t->stop = SRV_STOP_WORD;
    t->req.stop = calloc(1, sizeof *t->req.stop);
    t->req.stop[0] = strdup("END");
    t->req.n_stop = 1;
    st = srv_anth_stream_new();
    static const char *const empty[] = {
        "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"role\": \"assistant\", \"content\": null}}]}",
        "{\"choices\": [{\"finish_reason\": \"stop\", \"index\": 0, \"delta\": {}}]}",
    };
    got = feed(st, t, empty, 2);
    assert_json_equal(got,
        "[{\"type\": \"message_start\", \"message\": {\"id\": \"msg_abc123\", \"type\": \"message\", \"role\": \"assistant\", \"content\": [],"
        "   \"model\": \"file.gguf\", \"stop_reason\": null, \"stop_sequence\": null,"
        "   \"usage\": {\"input_tokens\": 3, \"cache_creation_input_tokens\": 0, \"cache_read_input_tokens\": 0, \"output_tokens\": 0}}},"
        " {\"type\": \"content_block_start\", \"index\": 0, \"content_block\": {\"type\": \"text\", \"text\": \"\"}},"
        " {\"type\": \"content_block_stop\", \"index\": 0},"
        " {\"type\": \"message_delta\", \"delta\": {\"stop_reason\": \"stop_sequence\", \"stop_sequence\": \"END\"}, \"usage\": {\"output_tokens\": 1}},"
        " {\"type\": \"message_stop\"}]");
    free(got);
    srv_anth_stream_free(st);

    /* a failure mid-stream: an error event in Anthropic's shape, then nothing */
    st = srv_anth_stream_new();
    got = feed(st, t, dialect_fail, 3);
    cJSON *a = cJSON_Parse(got);
    const cJSON *last = cJSON_GetArrayItem(a, cJSON_GetArraySize(a) - 1);
    char *ls = cJSON_PrintUnformatted(last);
    assert_json_equal(ls, "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"the server is shutting down\"}}");
    free(ls);
    assert_int_equal(cJSON_GetArraySize(a), 4); /* message_start, block start, delta, error */
    cJSON_Delete(a);
    free(got);
    srv_anth_stream_free(st);
    free_task(t);
}

static void test_error_shape(void **state)
{
    (void)state;
    static const struct {
        int status;
        const char *type;
    } map[] = {{400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"}, {404, "not_found_error"},
               {413, "request_too_large"},     {503, "overloaded_error"},     {500, "api_error"},        {501, "api_error"}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
        srv_error e = {0};
        srv_errorf(&e, map[i].status, "bad \xff thing");
        char *j = srv_anth_json_error(&e);
        char want[256];
        snprintf(want, sizeof want, "{\"type\": \"error\", \"error\": {\"type\": \"%s\", \"message\": \"bad \\ufffd thing\"}}", map[i].type);
        assert_json_equal(j, want);
        free(j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_request_errors),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_error_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
