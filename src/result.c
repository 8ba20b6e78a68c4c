/* result.c — the typed parts of an execution's result: the call log, the
 * file list, the error, the summary of the calls, the trace's audit
 * records (see result.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "result.h"

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
    size_t want = *cap ? *cap * 2 : 16;
    void *p;

    if (n < *cap)
        return 0;
    p = realloc(*v, want * size);
    if (!p)
        return -ENOMEM;
    *v = p;
    *cap = want;
    return 0;
}

int hutch_call_log_add(struct hutch_call_log *l, int64_t id, const char *tool,
                       const char *outcome, const char *error, double duration_ms)
{
    struct hutch_call_rec c = {.id = id, .duration_ms = duration_ms};
    int bad = outcome && strcmp(outcome, "ok");

    c.tool = dup_or_null(tool);
    c.outcome = dup_or_null(outcome);
    c.error = bad ? dup_or_null(error) : NULL;
    if ((tool && !c.tool) || (outcome && !c.outcome) || (bad && error && !c.error) ||
        grow((void **)&l->v, &l->cap, l->n, sizeof(*l->v)) < 0) {
        free(c.tool);
        free(c.outcome);
        free(c.error);
        return -ENOMEM;
    }
    l->v[l->n++] = c;
    return 0;
}

void hutch_call_log_free(struct hutch_call_log *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].tool);
        free(l->v[i].outcome);
        free(l->v[i].error);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

int hutch_file_list_add(struct hutch_file_list *l, const char *path, uint64_t size)
{
    char *p = strdup(path);

    if (!p || grow((void **)&l->v, &l->cap, l->n, sizeof(*l->v)) < 0) {
        free(p);
        return -ENOMEM;
    }
    l->v[l->n++] = (struct hutch_result_file){.path = p, .size = size};
    return 0;
}

void hutch_file_list_remove(struct hutch_file_list *l, size_t i)
{
    if (i >= l->n)
        return;
    free(l->v[i].path);
    memmove(l->v + i, l->v + i + 1, (l->n - i - 1) * sizeof(*l->v));
    l->n--;
}

void hutch_file_list_clear(struct hutch_file_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

static double ms2(double v)
{
    return (double)(long long)(v * 100.0 + 0.5) / 100.0;
}

void hutch_result_summarize(const struct hutch_call_log *calls,
                            struct hutch_calls_summary *s)
{
    uint64_t nfailed = 0;

    memset(s, 0, sizeof(*s));
    for (size_t k = 0; calls && k < calls->n; k++) {
        const struct hutch_call_rec *c = &calls->v[k];
        const char *tool = c->tool ? c->tool : "";
        int good = c->outcome && !strcmp(c->outcome, "ok");
        size_t i;

        s->count++;
        s->ok += good;
        for (i = 0; i < s->ntools && strcmp(s->tools[i].tool, tool); i++)
            ;
        if (i == s->ntools && s->ntools < HUTCH_RESULT_MAX_TOOLS)
            s->tools[s->ntools++] = (struct hutch_tool_sum){.tool = tool};
        if (i < s->ntools) {
            s->tools[i].count++;
            s->tools[i].ok += good;
            s->tools[i].total_ms += c->duration_ms;
        } else {
            s->other_calls++;
        }
        if (!good && nfailed++ < HUTCH_RESULT_MAX_FAILED)
            s->failed[s->nfailed++] = c;
    }
    for (size_t i = 0; i < s->ntools; i++)
        s->tools[i].total_ms = ms2(s->tools[i].total_ms);
    s->errors = s->count - s->ok;
    s->failed_omitted =
        nfailed > HUTCH_RESULT_MAX_FAILED ? nfailed - HUTCH_RESULT_MAX_FAILED : 0;
}

cJSON *hutch_call_rec_json(const struct hutch_call_rec *c)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddNumberToObject(o, "id", (double)c->id);
    if (c->tool)
        cJSON_AddStringToObject(o, "tool", c->tool);
    if (c->outcome)
        cJSON_AddStringToObject(o, "outcome", c->outcome);
    if (c->error)
        cJSON_AddStringToObject(o, "error", c->error);
    cJSON_AddNumberToObject(o, "duration_ms", c->duration_ms);
    return o;
}

void hutch_result_trace_audit(struct hutch_audit *a, const char *principal,
                              const char *execution, const struct hutch_call_log *calls)
{
    size_t first = 0;

    while (calls && first < calls->n) {
        cJSON *extra = cJSON_CreateObject(), *part = cJSON_CreateArray();
        size_t k;
        for (k = 0; first + k < calls->n && k < HUTCH_AUDIT_TRACE_CALLS; k++) {
            cJSON *c = hutch_call_rec_json(&calls->v[first + k]);
            cJSON_AddItemToArray(part, hutch_audit_redact(c, NULL, NULL));
            cJSON_Delete(c);
        }
        cJSON_AddNumberToObject(extra, "first", (double)first);
        cJSON_AddNumberToObject(extra, "count", (double)calls->n);
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

int hutch_result_error_set(struct hutch_result_error *e, const cJSON *error)
{
    /* The wire's error object: parsing the runner's message, not reading
     * a result back. */
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(error, "type");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(error, "message");
    struct hutch_result_error n = {.set = 1};

    hutch_result_error_free(e);
    if (!error)
        return 0;
    n.type = cJSON_IsString(type) ? strdup(type->valuestring) : NULL;
    n.message = cJSON_IsString(msg) ? strdup(msg->valuestring) : NULL;
    if ((cJSON_IsString(type) && !n.type) || (cJSON_IsString(msg) && !n.message)) {
        hutch_result_error_free(&n);
        return -ENOMEM;
    }
    n.line = user_line(
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(error, "traceback")));
    if (n.line < 0)
        n.line = 0;
    *e = n;
    return 0;
}

void hutch_result_error_free(struct hutch_result_error *e)
{
    free(e->type);
    free(e->message);
    memset(e, 0, sizeof(*e));
}
