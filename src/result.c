/* result.c — tool-call summary, trace audit records, error object (see
 * result.h). */
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "caps.h"
#include "result.h"

struct tool_sum {
    const char *tool;
    double count, ok, ms;
};

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static double ms2(double v)
{
    return (double)(long long)(v * 100.0 + 0.5) / 100.0;
}

cJSON *hutch_result_calls_summary(const cJSON *calls)
{
    struct tool_sum sum[HUTCH_RESULT_MAX_TOOLS];
    size_t nsum = 0;
    double count = 0, ok = 0, nfailed = 0, other = 0;
    cJSON *o = cJSON_CreateObject(), *tools, *failed;
    const cJSON *c;

    if (!o)
        return NULL;
    tools = cJSON_CreateArray();
    failed = cJSON_CreateArray();
    cJSON_ArrayForEach(c, calls)
    {
        const char *tool =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "tool"));
        const char *outcome =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "outcome"));
        int good = outcome && !strcmp(outcome, "ok");
        size_t i;

        if (!tool)
            tool = "";
        count++;
        ok += good;
        for (i = 0; i < nsum && strcmp(sum[i].tool, tool); i++)
            ;
        if (i == nsum && nsum < HUTCH_RESULT_MAX_TOOLS)
            sum[nsum++] = (struct tool_sum){.tool = tool};
        if (i < nsum) {
            sum[i].count++;
            sum[i].ok += good;
            sum[i].ms += num(c, "duration_ms");
        } else {
            other++;
        }
        if (!good && nfailed++ < HUTCH_RESULT_MAX_FAILED)
            cJSON_AddItemToArray(failed, cJSON_Duplicate(c, 1));
    }
    for (size_t i = 0; i < nsum; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "tool", sum[i].tool);
        cJSON_AddNumberToObject(t, "count", sum[i].count);
        cJSON_AddNumberToObject(t, "ok", sum[i].ok);
        cJSON_AddNumberToObject(t, "errors", sum[i].count - sum[i].ok);
        cJSON_AddNumberToObject(t, "total_ms", ms2(sum[i].ms));
        cJSON_AddItemToArray(tools, t);
    }
    cJSON_AddNumberToObject(o, "count", count);
    cJSON_AddNumberToObject(o, "ok", ok);
    cJSON_AddNumberToObject(o, "errors", count - ok);
    cJSON_AddItemToObject(o, "tools", tools);
    cJSON_AddNumberToObject(o, "other_calls", other);
    cJSON_AddItemToObject(o, "failed", failed);
    cJSON_AddNumberToObject(
        o, "failed_omitted",
        nfailed > HUTCH_RESULT_MAX_FAILED ? nfailed - HUTCH_RESULT_MAX_FAILED : 0);
    return o;
}

void hutch_result_trace_audit(struct hutch_audit *a, const char *principal,
                              const char *execution, const cJSON *calls)
{
    int n = cJSON_GetArraySize(calls), first = 0;
    const cJSON *c = calls ? calls->child : NULL;

    while (c) {
        cJSON *extra = cJSON_CreateObject(), *part = cJSON_CreateArray();
        int k;
        for (k = 0; c && k < HUTCH_AUDIT_TRACE_CALLS; k++, c = c->next)
            cJSON_AddItemToArray(part, hutch_audit_redact(c, NULL, NULL));
        cJSON_AddNumberToObject(extra, "first", first);
        cJSON_AddNumberToObject(extra, "count", n);
        cJSON_AddItemToObject(extra, "calls", part);
        hutch_audit_log(a, "tool_trace", principal, execution, NULL, NULL, NULL, -1,
                        extra);
        cJSON_Delete(extra);
        first += k;
    }
}

/* The line of main.py / main.js / main.ts (TypeScript) the error was
 * raised at: Python lists the innermost frame last, V8 first. */
static long user_line(const char *tb)
{
    const char *py = "File \"main.py\", line ", *p, *last = NULL;
    const char *js = NULL;
    if (!tb)
        return 0;
    for (p = strstr(tb, py); p; p = strstr(p + 1, py))
        last = p + strlen(py);
    if (last)
        return strtol(last, NULL, 10);
    p = strstr(tb, "main.js:");
    js = strstr(tb, "main.ts:");
    if (!p || (js && js < p))
        p = js;
    return p ? strtol(p + 8, NULL, 10) : 0;
}

cJSON *hutch_result_error(const cJSON *error)
{
    cJSON *o = cJSON_CreateObject();
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(error, "type");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(error, "message");
    long line = user_line(
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(error, "traceback")));

    if (cJSON_IsString(type))
        cJSON_AddStringToObject(o, "type", type->valuestring);
    if (cJSON_IsString(msg))
        cJSON_AddStringToObject(o, "message", msg->valuestring);
    if (line > 0)
        cJSON_AddNumberToObject(o, "line", (double)line);
    return o;
}
