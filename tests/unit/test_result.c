/* test_result.c — unit tests of src/output.c (head and tail of a stream)
 * and src/result.c (the tool-call summary, the trace in audit records, the
 * error object), printing TAP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "caps.h"
#include "output.h"
#include "result.h"
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

static cJSON *call(int id, const char *tool, const char *outcome, double ms)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "id", id);
    cJSON_AddStringToObject(c, "tool", tool);
    cJSON_AddStringToObject(c, "outcome", outcome);
    if (strcmp(outcome, "ok"))
        cJSON_AddStringToObject(c, "error", "why");
    cJSON_AddNumberToObject(c, "duration_ms", ms);
    return c;
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
    cJSON *calls = cJSON_CreateArray(), *s;
    char name[32];

    s = hutch_result_calls_summary(calls);
    ok(num(s, "count") == 0 && cJSON_GetArraySize(cJSON_GetObjectItem(s, "tools")) == 0,
       "no calls: count 0, no tools");
    cJSON_Delete(s);

    for (int i = 0; i < 300; i++)
        cJSON_AddItemToArray(calls,
                             call(i + 1, "fs.read", i % 30 ? "ok" : "denied", 0.5));
    s = hutch_result_calls_summary(calls);
    ok(num(s, "count") == 300 && num(s, "ok") == 290 && num(s, "errors") == 10,
       "300 calls, 10 failed");
    ok(num(s, "tools.0.count") == 300 && num(s, "tools.0.total_ms") == 150 &&
           num(s, "tools.0.errors") == 10,
       "one line for the tool, its time summed");
    ok(cJSON_GetArraySize(cJSON_GetObjectItem(s, "failed")) ==
               HUTCH_RESULT_MAX_FAILED &&
           num(s, "failed_omitted") == 10 - HUTCH_RESULT_MAX_FAILED &&
           num(s, "failed.0.id") == 1,
       "the first failed calls listed, the rest counted");
    {
        char *text = cJSON_PrintUnformatted(s);
        ok(text && strlen(text) < 1000, "the summary is small: %zu bytes",
           text ? strlen(text) : 0);
        free(text);
    }
    cJSON_Delete(s);

    for (int i = 0; i < HUTCH_RESULT_MAX_TOOLS + 8; i++) {
        snprintf(name, sizeof(name), "s.t%d", i);
        cJSON_AddItemToArray(calls, call(1000 + i, name, "ok", 1));
    }
    s = hutch_result_calls_summary(calls);
    ok(cJSON_GetArraySize(cJSON_GetObjectItem(s, "tools")) == HUTCH_RESULT_MAX_TOOLS &&
           num(s, "other_calls") == 9 &&
           num(s, "count") == 300 + HUTCH_RESULT_MAX_TOOLS + 8,
       "tools past the cap: counted in other_calls and count");
    cJSON_Delete(s);
    cJSON_Delete(calls);
}

static void trace_audit(void)
{
    char path[] = "/tmp/hutch-test-result-XXXXXX";
    int fd = mkstemp(path), records = 0, calls = 0, longest = 0;
    struct hutch_audit *a = NULL;
    struct hutch_err err = {0};
    cJSON *trace = cJSON_CreateArray();
    char line[HUTCH_AUDIT_MAX_LINE + 2], big[2000];
    FILE *f;

    close(fd);
    memset(big, 'e', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 120; i++) {
        cJSON *c = call(i + 1, "fs.read", "upstream", 1);
        cJSON_ReplaceItemInObject(c, "error", cJSON_CreateString(big));
        cJSON_AddItemToArray(trace, c);
    }
    ok(hutch_audit_open(path, &a, &err) == 0, "audit log opens");
    hutch_result_trace_audit(a, "p", "x1", trace);
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
    cJSON_Delete(trace);
}

static void error_object(void)
{
    cJSON *e = cJSON_Parse(
        "{\"type\":\"KeyError\",\"message\":\"'x'\",\"traceback\":\"Traceback (most "
        "recent "
        "call last):\\n  File \\\"main.py\\\", line 4, in <module>\\n  File "
        "\\\"main.py\\\", line 2, in f\\nKeyError: 'x'\\n\"}");
    cJSON *o = hutch_result_error(e);
    ok(num(o, "line") == 2 && !cJSON_GetObjectItem(o, "traceback") &&
           !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o, "type")), "KeyError"),
       "python: the innermost user line, no traceback");
    cJSON_Delete(o);
    cJSON_Delete(e);
    e = cJSON_Parse(
        "{\"type\":\"Error\",\"message\":\"b\",\"traceback\":\"Error: b\\n    at "
        "f (main.js:7:9)\\n    at main.js:9:1\"}");
    o = hutch_result_error(e);
    ok(num(o, "line") == 7, "javascript: the first main.js frame");
    cJSON_Delete(o);
    cJSON_Delete(e);
    e = cJSON_Parse("{\"type\":\"SyntaxError\",\"message\":\"Unexpected token (2:26)\","
                    "\"traceback\":\"main.ts:2:26\\nfunction f(a: number, b: ) {}\"}");
    o = hutch_result_error(e);
    ok(num(o, "line") == 2, "typescript: the first main.ts frame");
    cJSON_Delete(o);
    cJSON_Delete(e);
    e = cJSON_Parse("{\"type\":\"SystemExit\",\"message\":\"3\",\"traceback\":\"\"}");
    o = hutch_result_error(e);
    ok(!cJSON_GetObjectItem(o, "line"), "no traceback: no line");
    cJSON_Delete(o);
    cJSON_Delete(e);
}

int main(void)
{
    head_tail();
    summary();
    trace_audit();
    error_object();
    return tap_done();
}
