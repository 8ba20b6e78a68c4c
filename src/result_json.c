/* result_json.c — the result's JSON for structuredContent and `hutch run
 * --json` (see result_json.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "result_json.h"
#include "wire.h"

/* Captured output as a JSON string: every byte kept, a NUL or a byte that
 * is not UTF-8 shown as U+FFFD (hutch_utf8_sanitize), and the marker of
 * what was left out where it was. */
static cJSON *text_json(const struct hutch_buf *b, size_t head, uint64_t omitted,
                        const char *name)
{
    struct hutch_buf t = HUTCH_BUF_INIT(b->len + 128);
    char mark[96], *s;
    cJSON *j;

    hutch_buf_append(&t, hutch_buf_str(b), omitted ? head : b->len);
    if (omitted) {
        hutch_output_marker(mark, sizeof(mark), name, omitted);
        hutch_buf_appends(&t, mark);
        hutch_buf_append(&t, b->data + head, b->len - head);
    }
    s = hutch_utf8_sanitize(hutch_buf_str(&t), t.len, NULL);
    j = cJSON_CreateString(s ? s : "");
    free(s);
    hutch_buf_free(&t);
    return j;
}

cJSON *hutch_result_files_json(const struct hutch_exec_result *res)
{
    cJSON *a = cJSON_CreateArray();

    for (size_t i = 0; a && i < res->files.n; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "path", res->files.v[i].path);
        cJSON_AddNumberToObject(f, "size", (double)res->files.v[i].size);
        cJSON_AddItemToArray(a, f);
    }
    return a;
}

cJSON *hutch_result_summary_json(const struct hutch_calls_summary *s)
{
    cJSON *o = cJSON_CreateObject(), *tools, *failed;

    if (!o)
        return NULL;
    tools = cJSON_CreateArray();
    failed = cJSON_CreateArray();
    for (size_t i = 0; i < s->ntools; i++) {
        const struct hutch_tool_sum *t = &s->tools[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "tool", t->tool);
        cJSON_AddNumberToObject(j, "count", (double)t->count);
        cJSON_AddNumberToObject(j, "ok", (double)t->ok);
        cJSON_AddNumberToObject(j, "errors", (double)(t->count - t->ok));
        cJSON_AddNumberToObject(j, "total_ms", t->total_ms);
        cJSON_AddItemToArray(tools, j);
    }
    for (size_t i = 0; i < s->nfailed; i++)
        cJSON_AddItemToArray(failed, hutch_call_rec_json(s->failed[i]));
    cJSON_AddNumberToObject(o, "count", (double)s->count);
    cJSON_AddNumberToObject(o, "ok", (double)s->ok);
    cJSON_AddNumberToObject(o, "errors", (double)s->errors);
    cJSON_AddItemToObject(o, "tools", tools);
    cJSON_AddNumberToObject(o, "other_calls", (double)s->other_calls);
    cJSON_AddItemToObject(o, "failed", failed);
    cJSON_AddNumberToObject(o, "failed_omitted", (double)s->failed_omitted);
    return o;
}

static cJSON *error_json(const struct hutch_result_error *e)
{
    cJSON *o = cJSON_CreateObject();

    if (e->type)
        cJSON_AddStringToObject(o, "type", e->type);
    if (e->message)
        cJSON_AddStringToObject(o, "message", e->message);
    if (e->line > 0)
        cJSON_AddNumberToObject(o, "line", (double)e->line);
    return o;
}

cJSON *hutch_result_json(const struct hutch_exec_result *res, int trace, cJSON *value,
                         cJSON *files)
{
    cJSON *o = cJSON_CreateObject();
    struct hutch_calls_summary sum;

    if (!o) {
        cJSON_Delete(value);
        cJSON_Delete(files);
        return NULL;
    }
    if (!value)
        value = res->result ? cJSON_Duplicate(res->result, 1) : cJSON_CreateNull();
    if (!files)
        files = hutch_result_files_json(res);
    hutch_result_summarize(&res->tool_calls, &sum);
    cJSON_AddNumberToObject(o, "exit_code", res->exit_code);
    cJSON_AddItemToObject(
        o, "stdout", text_json(&res->out, res->out_head, res->out_omitted, "stdout"));
    cJSON_AddItemToObject(
        o, "stderr", text_json(&res->err, res->err_head, res->err_omitted, "stderr"));
    cJSON_AddNumberToObject(o, "stdout_omitted_bytes", (double)res->out_omitted);
    cJSON_AddNumberToObject(o, "stderr_omitted_bytes", (double)res->err_omitted);
    cJSON_AddItemToObject(o, "result", value);
    cJSON_AddItemToObject(o, "files", files);
    cJSON_AddNumberToObject(o, "duration_ms", (double)res->duration_ms);
    cJSON_AddBoolToObject(o, "timed_out", res->timed_out);
    cJSON_AddBoolToObject(o, "oom", res->oom);
    cJSON_AddStringToObject(o, "executor", res->executor);
    cJSON_AddBoolToObject(o, "warm", res->warm);
    cJSON_AddItemToObject(o, "tool_calls", hutch_result_summary_json(&sum));
    if (trace) {
        cJSON *t = cJSON_AddArrayToObject(o, "trace");
        for (size_t i = 0; t && i < res->tool_calls.n; i++)
            cJSON_AddItemToArray(t, hutch_call_rec_json(&res->tool_calls.v[i]));
    }
    cJSON_AddBoolToObject(o, "stdout_truncated", res->out_omitted > 0);
    cJSON_AddBoolToObject(o, "stderr_truncated", res->err_omitted > 0);
    if (res->error.set)
        cJSON_AddItemToObject(o, "error", error_json(&res->error));
    if (res->message[0])
        cJSON_AddStringToObject(o, "message", res->message);
    if (res->notes[0]) {
        cJSON *n = cJSON_AddArrayToObject(o, "notes");
        char line[HUTCH_RESULT_NOTES_MAX];
        for (const char *p = res->notes; *p;) {
            size_t k = strcspn(p, "\n");
            snprintf(line, sizeof(line), "%.*s", (int)k, p);
            cJSON_AddItemToArray(n, cJSON_CreateString(line));
            p += k + (p[k] == '\n');
        }
    }
    return o;
}
