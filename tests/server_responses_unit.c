/*
 * server_responses_unit.c - unit tests of OpenAI's Responses API adapter
 * (tools/server/responses.c; CTest: server_responses_unit, also under valgrind): a Responses
 * request converted into the chat request it means, compared whole; the checks' 400s (the
 * stateless ones among them); and the stream converter fed chat chunks that no small model
 * produces in one reply (reasoning, then text, then two function calls whose arguments
 * arrive in pieces; an empty reply cut by the token limit; a failure), in two batches so that
 * its state carries across calls: the events, their order, items and sequence numbers.
 */
#include "sift_test.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "server_dialect.h"

/* The conversion of body (JSON text), printed (NULL: refused, *e says why). */
static char *convert(const char *body, srv_error *e)
{
    cJSON *in = body_json(body, e);
    return printed(in, srv_resp_request(in, e));
}

static void test_request(void **state)
{
    (void)state;
    srv_error e;
    /* every item kind in order: consecutive function calls share one assistant message (with
     * the reasoning before them), their outputs become tool messages with the function's
     * name; developer is system; unknown-effect fields (store, metadata, reasoning) dropped */
    char *got = convert(
        "{\"model\": \"m\", \"max_output_tokens\": 9, \"temperature\": 0.5, \"top_p\": 0.9, \"seed\": 4, \"stream\": true, \"store\": false,"
        " \"metadata\": {\"a\": \"b\"}, \"reasoning\": {\"effort\": \"low\"}, \"parallel_tool_calls\": false, \"instructions\": \"Be brief.\","
        " \"input\": [{\"role\": \"developer\", \"content\": \"Dev.\"}, {\"type\": \"message\", \"role\": \"user\", \"content\": ["
        "   {\"type\": \"input_text\", \"text\": \"Hi \"}, {\"type\": \"input_text\", \"text\": \"there\"}]},"
        "  {\"type\": \"reasoning\", \"id\": \"rs_1\", \"summary\": [{\"type\": \"summary_text\", \"text\": \"hmm\"}]},"
        "  {\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"},"
        "  {\"type\": \"function_call\", \"call_id\": \"c2\", \"name\": \"g\", \"arguments\": \"{}\"},"
        "  {\"type\": \"function_call_output\", \"call_id\": \"c2\", \"output\": \"two\"},"
        "  {\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\": [{\"type\": \"input_text\", \"text\": \"one\"}]},"
        "  {\"role\": \"assistant\", \"content\": [{\"type\": \"output_text\", \"text\": \"Done.\", \"annotations\": []}]}],"
        " \"tools\": [{\"type\": \"function\", \"name\": \"f\", \"description\": \"d\", \"parameters\": {\"type\": \"object\"}, \"strict\": true},"
        "   {\"type\": \"function\", \"name\": \"g\"}],"
        " \"tool_choice\": {\"type\": \"function\", \"name\": \"f\"},"
        " \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"s\", \"schema\": {\"type\": \"object\"}, \"strict\": true}}}",
        &e);
    assert_non_null(got);
    assert_json_equal(got,
        "{\"model\": \"m\", \"temperature\": 0.5, \"top_p\": 0.9, \"seed\": 4, \"stream\": true, \"parallel_tool_calls\": false, \"max_tokens\": 9,"
        " \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"system\", \"content\": \"Dev.\"},"
        "  {\"role\": \"user\", \"content\": \"Hi there\"},"
        "  {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
        "    {\"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}, \"id\": \"c1\", \"type\": \"function\"},"
        "    {\"function\": {\"name\": \"g\", \"arguments\": \"{}\"}, \"id\": \"c2\", \"type\": \"function\"}], \"reasoning_content\": \"hmm\"},"
        "  {\"role\": \"tool\", \"content\": \"two\", \"tool_call_id\": \"c2\", \"name\": \"g\"},"
        "  {\"role\": \"tool\", \"content\": \"one\", \"tool_call_id\": \"c1\", \"name\": \"f\"},"
        "  {\"role\": \"assistant\", \"content\": \"Done.\"}],"
        " \"tools\": [{\"type\": \"function\", \"function\": {\"parameters\": {\"type\": \"object\"}, \"name\": \"f\", \"description\": \"d\"}},"
        "   {\"type\": \"function\", \"function\": {\"parameters\": {}, \"name\": \"g\"}}],"
        " \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"f\"}},"
        " \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"s\", \"schema\": {\"type\": \"object\"}, \"strict\": true}}}");
    free(got);
    /* a string input is one user message; an empty item list one empty user turn; a string
     * tool_choice and text.format text pass as they are */
    got = convert("{\"input\": \"Hello\", \"tool_choice\": \"required\", \"text\": {\"format\": {\"type\": \"text\"}}}", &e);
    assert_non_null(got);
    assert_json_equal(got, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"tool_choice\": \"required\"}");
    free(got);
    /* reasoning, call, reasoning, call: one assistant turn, its reasoning joined */
    got = convert("{\"input\": [{\"type\": \"reasoning\", \"content\": [{\"type\": \"reasoning_text\", \"text\": \"a\"}]},"
                  " {\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\"},"
                  " {\"type\": \"reasoning\", \"summary\": [{\"type\": \"summary_text\", \"text\": \"b\"}]},"
                  " {\"type\": \"function_call\", \"call_id\": \"c2\", \"name\": \"f\"}]}", &e);
    assert_non_null(got);
    assert_json_equal(got, "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
                           " {\"function\": {\"name\": \"f\", \"arguments\": \"{}\"}, \"id\": \"c1\", \"type\": \"function\"},"
                           " {\"function\": {\"name\": \"f\", \"arguments\": \"{}\"}, \"id\": \"c2\", \"type\": \"function\"}],"
                           " \"reasoning_content\": \"ab\"}]}");
    free(got);
    got = convert("{\"input\": []}", &e);
    assert_non_null(got);
    assert_json_equal(got, "{\"messages\": [{\"role\": \"user\", \"content\": \"\"}]}");
    free(got);
}

static void test_request_errors(void **state)
{
    (void)state;
    static const struct {
        const char *body, *word;
    } bad[] = {
        {"{}", "'input' is required"},
        {"{\"input\": 5}", "'input' must be a string or an array"},
        {"{\"input\": \"x\", \"previous_response_id\": \"resp_1\"}", "stateless"},
        {"{\"input\": \"x\", \"conversation\": \"conv_1\"}", "stateless"},
        {"{\"input\": \"x\", \"background\": true}", "'background'"},
        {"{\"input\": \"x\", \"instructions\": 3}", "'instructions' must be a string"},
        {"{\"input\": [3]}", "'input[0]' must be an object"},
        {"{\"input\": [{\"content\": \"x\"}]}", "'input[0]' must have a string 'type'"},
        {"{\"input\": [{\"role\": \"tool\", \"content\": \"x\"}]}", "'input[0].role'"},
        {"{\"input\": [{\"role\": \"user\", \"content\": 5}]}", "'input[0].content'"},
        {"{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\", \"image_url\": \"x\"}]}]}", "text only"},
        {"{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_text\"}]}]}", "'input[0].content[0].text'"},
        {"{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"weird\"}]}]}", "unknown part type"},
        {"{\"input\": [{\"type\": \"function_call\", \"name\": \"f\"}]}", "'input[0].call_id'"},
        {"{\"input\": [{\"type\": \"function_call\", \"call_id\": \"c\", \"name\": \"\"}]}", "'input[0].name'"},
        {"{\"input\": [{\"type\": \"function_call\", \"call_id\": \"c\", \"name\": \"f\", \"arguments\": {}}]}", "'input[0].arguments'"},
        {"{\"input\": [{\"type\": \"function_call_output\", \"output\": \"x\"}]}", "'input[0].call_id'"},
        {"{\"input\": [{\"type\": \"function_call_output\", \"call_id\": \"c\", \"output\": 3}]}", "'input[0].output'"},
        {"{\"input\": [{\"type\": \"item_reference\", \"id\": \"msg_1\"}]}", "stateless"},
        {"{\"input\": [{\"type\": \"web_search_call\"}]}", "unsupported item type"},
        {"{\"input\": [{\"type\": \"reasoning\", \"summary\": 3}]}", "'input[0].summary'"},
        {"{\"input\": \"x\", \"tools\": {}}", "'tools' must be an array"},
        {"{\"input\": \"x\", \"tools\": [{\"type\": \"web_search\"}]}", "built-in tools"},
        {"{\"input\": \"x\", \"tools\": [{\"type\": \"function\"}]}", "'tools[0].name'"},
        {"{\"input\": \"x\", \"tools\": [{\"type\": \"function\", \"name\": \"f\", \"parameters\": 1}]}", "'tools[0].parameters'"},
        {"{\"input\": \"x\", \"tools\": [{\"type\": \"function\", \"name\": \"f\", \"strict\": 1}]}", "'tools[0].strict'"},
        {"{\"input\": \"x\", \"tool_choice\": \"any\"}", "'tool_choice'"},
        {"{\"input\": \"x\", \"tool_choice\": {\"type\": \"function\"}}", "'tool_choice'"},
        {"{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"xml\"}}}", "'text.format.type'"},
        {"{\"input\": \"x\", \"text\": 1}", "'text' must be an object"},
        {"{\"input\": \"x\", \"max_output_tokens\": 1.5}", "'max_output_tokens'"},
        {"{\"input\": \"x\", \"max_output_tokens\": 1e30}", "'max_output_tokens'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        srv_error e;
        assert_refused(bad[i].body, convert(bad[i].body, &e), &e, bad[i].word);
    }
}

/* Feed the chunks (each a JSON object, "data: " added) as one batch; the events since the
 * last call, as a JSON array. */
static char *feed(srv_resp_stream *st, srv_task *t, const char *const *chunks, size_t n)
{
    put_chunks(srv_resp_stream_input(st), chunks, n);
    sbuf out = {0};
    srv_resp_sse(dialect_server(), st, t, &out);
    assert_int_equal(srv_resp_stream_input(st)->n, 0);
    return sse_events(&out);
}

/* The events in short, one line each: type, output_index, item id, and the delta / text /
 * arguments / item type / status it carries; the sequence numbers checked to run on from
 * *seq. */
static char *brief(const char *events, int *seq)
{
    cJSON *a = cJSON_Parse(events);
    assert_non_null(a);
    sbuf b = {0};
    for (const cJSON *ev = a->child; ev; ev = ev->next) {
        assert_int_equal(cJSON_GetObjectItem(ev, "sequence_number")->valueint, (*seq)++);
        const cJSON *oi = cJSON_GetObjectItem(ev, "output_index"), *id = cJSON_GetObjectItem(ev, "item_id");
        const cJSON *item = cJSON_GetObjectItem(ev, "item"), *resp = cJSON_GetObjectItem(ev, "response");
        sbuf_printf(&b, "%s", cJSON_GetObjectItem(ev, "type")->valuestring);
        if (oi) sbuf_printf(&b, " %d", oi->valueint);
        if (id) sbuf_printf(&b, " %s", id->valuestring);
        static const char *const keys[] = {"delta", "text", "arguments", "name"};
        for (size_t k = 0; k < 4; k++) {
            const cJSON *v = cJSON_GetObjectItem(ev, keys[k]);
            if (cJSON_IsString(v)) sbuf_printf(&b, " %s=%s", keys[k], v->valuestring);
        }
        if (item) sbuf_printf(&b, " %s %s %s", cJSON_GetObjectItem(item, "type")->valuestring, cJSON_GetObjectItem(item, "id")->valuestring,
                              cJSON_GetObjectItem(item, "status")->valuestring);
        if (resp) sbuf_printf(&b, " %s %d", cJSON_GetObjectItem(resp, "status")->valuestring, cJSON_GetArraySize(cJSON_GetObjectItem(resp, "output")));
        sbuf_adds(&b, "\n");
    }
    cJSON_Delete(a);
    char *s = sbuf_strdup(&b);
    sbuf_free(&b);
    return s;
}

static void test_stream(void **state)
{
    (void)state;
    srv_task *t = fake_task(20, 5, 7);
    srv_resp_stream *st = srv_resp_stream_new();
    assert_non_null(st);
    int seq = 0;
    char *got = feed(st, t, dialect_part1, 4);
    char *b = brief(got, &seq);
    assert_string_equal(b,
        "response.created in_progress 0\n"
        "response.in_progress in_progress 0\n"
        "response.output_item.added 0 reasoning rs_abc123_0 in_progress\n"
        "response.reasoning_text.delta 0 rs_abc123_0 delta=Let me \n"
        "response.reasoning_text.delta 0 rs_abc123_0 delta=think.\n"
        "response.reasoning_text.done 0 rs_abc123_0 text=Let me think.\n"
        "response.output_item.done 0 reasoning rs_abc123_0 completed\n"
        "response.output_item.added 1 message msg_abc123_1 in_progress\n"
        "response.content_part.added 1 msg_abc123_1\n"
        "response.output_text.delta 1 msg_abc123_1 delta=Calling.\n");
    free(b);
    free(got);
    got = feed(st, t, dialect_part2, 7);
    b = brief(got, &seq);
    assert_string_equal(b,
        "response.output_text.done 1 msg_abc123_1 text=Calling.\n"
        "response.content_part.done 1 msg_abc123_1\n"
        "response.output_item.done 1 message msg_abc123_1 completed\n"
        "response.output_item.added 2 function_call fc_abc123_2 in_progress\n"
        "response.function_call_arguments.delta 2 fc_abc123_2 delta={\"a\":\n"
        "response.function_call_arguments.delta 2 fc_abc123_2 delta=1}\n"
        "response.function_call_arguments.done 2 fc_abc123_2 arguments={\"a\":1} name=f\n"
        "response.output_item.done 2 function_call fc_abc123_2 completed\n"
        "response.output_item.added 3 function_call fc_abc123_3 in_progress\n"
        "response.function_call_arguments.delta 3 fc_abc123_3 delta={}\n"
        "response.function_call_arguments.done 3 fc_abc123_3 arguments={} name=g\n"
        "response.output_item.done 3 function_call fc_abc123_3 completed\n"
        "response.completed completed 4\n");
    free(b);
    /* the final response whole: the items as they closed, the usage */
    cJSON *a = cJSON_Parse(got);
    char *last = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetArrayItem(a, cJSON_GetArraySize(a) - 1), "response"));
    assert_json_equal(last,
        "{\"id\": \"resp_abc123\", \"object\": \"response\", \"created_at\": 0, \"status\": \"completed\", \"error\": null,"
        " \"incomplete_details\": null, \"model\": \"m\", \"output\": ["
        "  {\"id\": \"rs_abc123_0\", \"type\": \"reasoning\", \"summary\": [{\"type\": \"summary_text\", \"text\": \"Let me think.\"}], \"content\": [{\"type\": \"reasoning_text\", \"text\": \"Let me think.\"}],"
        "   \"status\": \"completed\"},"
        "  {\"id\": \"msg_abc123_1\", \"type\": \"message\", \"status\": \"completed\", \"role\": \"assistant\","
        "   \"content\": [{\"type\": \"output_text\", \"text\": \"Calling.\", \"annotations\": []}]},"
        "  {\"id\": \"fc_abc123_2\", \"type\": \"function_call\", \"status\": \"completed\", \"call_id\": \"c0\", \"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"},"
        "  {\"id\": \"fc_abc123_3\", \"type\": \"function_call\", \"status\": \"completed\", \"call_id\": \"c1\", \"name\": \"g\", \"arguments\": \"{}\"}],"
        " \"usage\": {\"input_tokens\": 20, \"input_tokens_details\": {\"cached_tokens\": 5}, \"output_tokens\": 7,"
        "  \"output_tokens_details\": {\"reasoning_tokens\": 0}, \"total_tokens\": 27}}");
    free(last);
    cJSON_Delete(a);
    free(got);
    /* after response.completed nothing more goes out */
    static const char *const late[] = {"{\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"x\"}}]}"};
    got = feed(st, t, late, 1);
    assert_string_equal(got, "[]");
    free(got);
    srv_resp_stream_free(st);
    free_task(t);

    /* an empty reply cut by the token limit: one empty message item, response.incomplete */
    t = fake_task(3, 0, 1);
    st = srv_resp_stream_new();
    static const char *const empty[] = {
        "{\"choices\": [{\"finish_reason\": null, \"index\": 0, \"delta\": {\"role\": \"assistant\", \"content\": null}}]}",
        "{\"choices\": [{\"finish_reason\": \"length\", \"index\": 0, \"delta\": {}}]}",
    };
    seq = 0;
    got = feed(st, t, empty, 2);
    b = brief(got, &seq);
    assert_string_equal(b,
        "response.created in_progress 0\n"
        "response.in_progress in_progress 0\n"
        "response.output_item.added 0 message msg_abc123_0 in_progress\n"
        "response.content_part.added 0 msg_abc123_0\n"
        "response.output_text.done 0 msg_abc123_0 text=\n"
        "response.content_part.done 0 msg_abc123_0\n"
        "response.output_item.done 0 message msg_abc123_0 completed\n"
        "response.incomplete incomplete 1\n");
    assert_non_null(strstr(got, "\"incomplete_details\":{\"reason\":\"max_output_tokens\"}"));
    assert_non_null(strstr(got, "\"model\":\"file.gguf\""));
    free(b);
    free(got);
    srv_resp_stream_free(st);

    /* a failure mid-stream: an error event, then nothing */
    st = srv_resp_stream_new();
    got = feed(st, t, dialect_fail, 3);
    a = cJSON_Parse(got);
    last = cJSON_PrintUnformatted(cJSON_GetArrayItem(a, cJSON_GetArraySize(a) - 1));
    assert_json_equal(last, "{\"type\": \"error\", \"code\": \"unavailable_error\", \"message\": \"the server is shutting down\", \"param\": null,"
                            " \"status\": 503, \"sequence_number\": 5}");
    assert_int_equal(cJSON_GetArraySize(a), 6); /* created, in_progress, item added, part added, delta, error */
    free(last);
    cJSON_Delete(a);
    free(got);
    srv_resp_stream_free(st);
    free_task(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_request_errors),
        cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
