/* test_result.c — unit tests of src/output.c (head and tail of a stream)
 * and src/result.c (the tool-call summary, the trace in audit records, the
 * error object) and src/result_json.c (a result struct as JSON), printing
 * TAP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "caps.h"
#include "exec.h"
#include "output.h"
#include "result.h"
#include "result_json.h"
#include "tap.h"

static void head_tail(void)
{
    struct hutch_output o;
    struct hutch_buf to = HUTCH_BUF_INIT(1u << 20);
    size_t head;
    uint64_t omitted;
    char big[5000];

    hutch_output_init(&o, 10);
    ok(hutch_output_feed(&o, "abcdefgh", 8) == 5, "the first 5 of 10 go to the head");
    hutch_output_finish(&o, &to, &head, &omitted);
    ok(to.len == 8 && !memcmp(to.data, "abcdefgh", 8) && head == 5 && omitted == 0,
       "up to the limit nothing is lost");
    hutch_output_free(&o);

    hutch_output_init(&o, 10);
    for (int i = 0; i < 100; i++)
        hutch_output_feed(&o, i == 99 ? "END\n" : "0123456789", i == 99 ? 4 : 10);
    hutch_output_finish(&o, &to, &head, &omitted);
    ok(to.len == 10 && !memcmp(to.data, "01234", 5) &&
           !memcmp(to.data + 5, "9END\n", 5),
       "past it: the first 5 and the last 5, in order (%.*s)", (int)to.len, to.data);
    ok(head == 5 && omitted == 984 && o.total == 994,
       "994 fed, 984 left out at 5: %llu", (unsigned long long)omitted);
    hutch_output_free(&o);

    memset(big, 'x', sizeof(big));
    big[sizeof(big) - 1] = 'Z';
    hutch_output_init(&o, 100);
    ok(hutch_output_feed(&o, big, sizeof(big)) == 50, "one chunk larger than the ring");
    hutch_output_finish(&o, &to, &head, &omitted);
    ok(to.len == 100 && to.data[99] == 'Z' && omitted == sizeof(big) - 100,
       "its last bytes are the tail");
    hutch_output_free(&o);

    char mark[96];
    hutch_output_marker(mark, sizeof(mark), "stdout", 123);
    ok(!strcmp(mark, "\n[… 123 bytes of stdout left out …]\n"), "the marker: %s", mark);
    hutch_buf_free(&to);
}

static void call(struct hutch_call_log *l, int id, const char *tool,
                 const char *outcome, double ms)
{
    hutch_call_log_add(l, id, tool, outcome, strcmp(outcome, "ok") ? "why" : NULL, ms);
}

static double num(const cJSON *o, const char *path)
{
    char buf[128], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
        o = cJSON_IsArray(o) ? cJSON_GetArrayItem(o, atoi(k))
                             : cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(o) ? o->valuedouble : -1;
}

static void summary(void)
{
    struct hutch_call_log calls = {0};
    struct hutch_calls_summary s;
    char name[32];
    cJSON *j;

    hutch_result_summarize(&calls, &s);
    ok(s.count == 0 && s.ntools == 0 && s.nfailed == 0, "no calls: count 0, no tools");

    for (int i = 0; i < 300; i++)
        call(&calls, i + 1, "fs.read", i % 30 ? "ok" : "denied", 0.5);
    hutch_result_summarize(&calls, &s);
    ok(s.count == 300 && s.ok == 290 && s.errors == 10, "300 calls, 10 failed");
    ok(s.ntools == 1 && s.tools[0].count == 300 && s.tools[0].total_ms == 150 &&
           s.tools[0].count - s.tools[0].ok == 10,
       "one line for the tool, its time summed");
    ok(s.nfailed == HUTCH_RESULT_MAX_FAILED &&
           s.failed_omitted == 10 - HUTCH_RESULT_MAX_FAILED && s.failed[0]->id == 1 &&
           !strcmp(s.failed[0]->error, "why"),
       "the first failed calls listed, the rest counted");
    j = hutch_result_summary_json(&s);
    {
        char *text = cJSON_PrintUnformatted(j);
        ok(text && strlen(text) < 1000, "the summary is small: %zu bytes",
           text ? strlen(text) : 0);
        static const char head[] =
            "{\"count\":300,\"ok\":290,\"errors\":10,\"tools\":[{\"tool\":"
            "\"fs.read\",\"count\":300,\"ok\":290,\"errors\":10,\"total_ms\":150}],"
            "\"other_calls\":0,\"failed\":[{\"id\":1,\"tool\":\"fs.read\","
            "\"outcome\":\"denied\",\"error\":\"why\",\"duration_ms\":0.5},";
        ok(text && !strncmp(text, head, sizeof(head) - 1) &&
               strstr(text, "],\"failed_omitted\":5}"),
           "its JSON, in the order the wire has always had: %.120s", text ? text : "");
        free(text);
    }
    cJSON_Delete(j);

    for (int i = 0; i < HUTCH_RESULT_MAX_TOOLS + 8; i++) {
        snprintf(name, sizeof(name), "s.t%d", i);
        call(&calls, 1000 + i, name, "ok", 1);
    }
    hutch_result_summarize(&calls, &s);
    ok(s.ntools == HUTCH_RESULT_MAX_TOOLS && s.other_calls == 9 &&
           s.count == 300 + HUTCH_RESULT_MAX_TOOLS + 8,
       "tools past the cap: counted in other_calls and count");
    hutch_call_log_free(&calls);
}

static void trace_audit(void)
{
    char path[] = "/tmp/hutch-test-result-XXXXXX";
    int fd = mkstemp(path), records = 0, calls = 0, longest = 0;
    struct hutch_audit *a = NULL;
    struct hutch_err err = {0};
    struct hutch_call_log trace = {0};
    char line[HUTCH_AUDIT_MAX_LINE + 2], big[2000];
    FILE *f;

    close(fd);
    memset(big, 'e', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 120; i++)
        hutch_call_log_add(&trace, i + 1, "fs.read", "upstream", big, 1);
    ok(hutch_audit_open(path, &a, &err) == 0, "audit log opens");
    hutch_result_trace_audit(a, "p", "x1", &trace);
    hutch_audit_close(a);
    f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f)) {
        cJSON *j = cJSON_Parse(line);
        if ((int)strlen(line) > longest)
            longest = (int)strlen(line);
        if (j &&
            !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "event")),
                    "tool_trace") &&
            num(j, "first") == calls && num(j, "count") == 120 &&
            !cJSON_GetObjectItem(j, "extra_dropped")) {
            records++;
            calls += cJSON_GetArraySize(cJSON_GetObjectItem(j, "calls"));
        }
        cJSON_Delete(j);
    }
    if (f)
        fclose(f);
    ok(records == 3 && calls == 120,
       "120 calls with long errors: 3 whole records (%d, %d)", records, calls);
    ok(longest < (int)HUTCH_AUDIT_MAX_LINE, "each fits a line (%d bytes)", longest);
    unlink(path);
    hutch_call_log_free(&trace);
}

static void error_of(const char *wire, struct hutch_result_error *e)
{
    cJSON *j = cJSON_Parse(wire);
    hutch_result_error_set(e, j);
    cJSON_Delete(j);
}

static void error_object(void)
{
    struct hutch_result_error e = {0};

    error_of("{\"type\":\"KeyError\",\"message\":\"'x'\",\"traceback\":\"Traceback "
             "(most recent call last):\\n  File \\\"main.py\\\", line 4, in "
             "<module>\\n  File \\\"main.py\\\", line 2, in f\\nKeyError: 'x'\\n\"}",
             &e);
    ok(e.set && e.line == 2 && !strcmp(e.type, "KeyError") && !strcmp(e.message, "'x'"),
       "python: the innermost user line");
    error_of("{\"type\":\"Error\",\"message\":\"b\",\"traceback\":\"Error: b\\n    at "
             "f (main.js:7:9)\\n    at main.js:9:1\"}",
             &e);
    ok(e.line == 7, "javascript: the first main.js frame");
    error_of("{\"type\":\"SyntaxError\",\"message\":\"Unexpected token (2:26)\","
             "\"traceback\":\"main.ts:2:26\\nfunction f(a: number, b: ) {}\"}",
             &e);
    ok(e.line == 2, "typescript: the first main.ts frame");
    error_of("{\"type\":\"SystemExit\",\"message\":\"3\",\"traceback\":\"\"}", &e);
    ok(e.set && e.line == 0, "no traceback: no line");
    error_of("{\"message\":7}", &e);
    ok(e.set && !e.type && !e.message, "no strings: set, with nothing to show");
    hutch_result_error_free(&e);
}

/* The renderer: a result struct as the JSON of structuredContent and
 * `hutch run --json`, byte for byte as the wire has it. */
static void render(void)
{
    struct hutch_exec_result res;
    cJSON *o, *w;
    char *text;

    hutch_exec_result_init(&res);
    res.exit_code = 1;
    hutch_buf_append(&res.out, "hi\n", 3);
    res.result = cJSON_CreateNumber(42);
    hutch_file_list_add(&res.files, "a.csv", 3);
    res.duration_ms = 12;
    snprintf(res.executor, sizeof(res.executor), "local");
    hutch_call_log_add(&res.tool_calls, 1, "fs.read", "ok", NULL, 1.25);
    hutch_call_log_add(&res.tool_calls, 2, "fs.write", "denied", "no", 0.5);
    w = cJSON_Parse("{\"type\":\"E\",\"message\":\"m\",\"traceback\":\"File "
                    "\\\"main.py\\\", line 3\"}");
    hutch_result_error_set(&res.error, w);
    cJSON_Delete(w);
    snprintf(res.message, sizeof(res.message), "note");
    snprintf(res.notes, sizeof(res.notes), "one\ntwo");

    o = hutch_result_json(&res, 1, NULL, NULL);
    text = cJSON_PrintUnformatted(o);
    ok(text &&
           !strcmp(
               text,
               "{\"exit_code\":1,\"stdout\":\"hi\\n\",\"stderr\":\"\","
               "\"stdout_omitted_bytes\":0,\"stderr_omitted_bytes\":0,\"result\":42,"
               "\"files\":[{\"path\":\"a.csv\",\"size\":3}],\"duration_ms\":12,"
               "\"timed_out\":false,\"oom\":false,\"executor\":\"local\","
               "\"warm\":false,\"tool_calls\":{\"count\":2,\"ok\":1,\"errors\":1,"
               "\"tools\":[{\"tool\":\"fs.read\",\"count\":1,\"ok\":1,\"errors\":0,"
               "\"total_ms\":1.25},{\"tool\":\"fs.write\",\"count\":1,\"ok\":0,"
               "\"errors\":1,\"total_ms\":0.5}],\"other_calls\":0,\"failed\":[{"
               "\"id\":2,\"tool\":\"fs.write\",\"outcome\":\"denied\",\"error\":"
               "\"no\",\"duration_ms\":0.5}],\"failed_omitted\":0},\"trace\":[{"
               "\"id\":1,\"tool\":\"fs.read\",\"outcome\":\"ok\",\"duration_ms\":"
               "1.25},{\"id\":2,\"tool\":\"fs.write\",\"outcome\":\"denied\","
               "\"error\":\"no\",\"duration_ms\":0.5}],\"stdout_truncated\":false,"
               "\"stderr_truncated\":false,\"error\":{\"type\":\"E\",\"message\":"
               "\"m\",\"line\":3},\"message\":\"note\",\"notes\":[\"one\",\"two\"]}"),
       "every field, in the wire's order: %s", text ? text : "(null)");
    free(text);
    cJSON_Delete(o);

    o = hutch_result_json(&res, 0, cJSON_CreateString("moved"), cJSON_CreateArray());
    ok(o && !cJSON_GetObjectItem(o, "trace") &&
           !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o, "result")), "moved") &&
           cJSON_GetArraySize(cJSON_GetObjectItem(o, "files")) == 0,
       "no trace unless asked; a value and files given are taken as they are");
    cJSON_Delete(o);
    hutch_exec_result_free(&res);
}

int main(void)
{
    head_tail();
    summary();
    trace_audit();
    error_object();
    render();
    return tap_done();
}
