/* test_metrics.c — the exposition metrics.c renders, without HTTP: label
 * values escaped as the text format wants (\\, \", \n), histogram buckets
 * cumulative with +Inf equal to _count, unknown tool call outcomes and
 * executors past the table counted as "other", and the sandboxes gauge;
 * the pools' and upstreams' typed rows (status.h) as /metrics sums them
 * and /readyz shows them, their free-text errors only with detail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "caps.h"
#include "metrics.h"
#include "tap.h"

static char *render_from(const struct hutch_metrics_source *src)
{
    struct hutch_buf b;
    hutch_buf_init(&b, HUTCH_METRICS_MAX_BYTES);
    if (hutch_metrics_render(src, NULL, &b) < 0) {
        hutch_buf_free(&b);
        return NULL;
    }
    return hutch_buf_steal(&b, NULL);
}

static char *render(void)
{
    return render_from(NULL);
}

/* Two classes with the same labels (they differ in options), one failing. */
static const struct hutch_pool_status pools[] = {
    {.executor = "local",
     .language = "python",
     .memory_mb = 512,
     .pids = 64,
     .size = 2,
     .target = 3,
     .idle = 1,
     .starting = 1,
     .hits = 5,
     .misses = 1},
    {.executor = "local",
     .language = "python",
     .memory_mb = 512,
     .pids = 64,
     .size = 1,
     .target = 1,
     .idle = 1,
     .hits = 2,
     .recycled = 3},
    {.executor = "docker",
     .language = "node",
     .memory_mb = 256,
     .pids = 32,
     .size = 1,
     .target = 1,
     .failures = 4,
     .on_demand = true,
     .failing = true,
     .last_error = "no such image"},
};

static int fake_pools(void *ctx, struct hutch_pool_status **rows, size_t *n)
{
    (void)ctx;
    *rows = malloc(sizeof(pools));
    if (!*rows)
        return -12;
    memcpy(*rows, pools, sizeof(pools));
    *n = sizeof(pools) / sizeof(pools[0]);
    return 0;
}

static int fake_ready(void *ctx, cJSON *out, int detail)
{
    (void)ctx;
    (void)out;
    (void)detail;
    return 1;
}

static void typed_rows(void)
{
    struct hutch_metrics_source src = {.pool_status = fake_pools, .ready = fake_ready};
    struct hutch_upstream_status ups[2] = {{.server = "fs",
                                            .transport = "stdio",
                                            .state = HUTCH_UPSTREAM_READY,
                                            .tools = 3},
                                           {.server = "web",
                                            .transport = "http",
                                            .state = HUTCH_UPSTREAM_FAILED,
                                            .error = "connection refused"}};
    char *text = render_from(&src), *js;
    cJSON *o;
    int ready = 0;

    ok(text && strstr(text, "hutch_pool_idle{executor=\"local\",language=\"python\","
                            "memory_mb=\"512\",pids=\"64\"} 2\n"),
       "pool classes with the same labels are summed");
    ok(text &&
           strstr(text, "hutch_pool_target{executor=\"local\",language=\"python\","
                        "memory_mb=\"512\",pids=\"64\"} 4\n") &&
           strstr(text, "hutch_pool_size{executor=\"local\",language=\"python\","
                        "memory_mb=\"512\",pids=\"64\"} 3\n"),
       "a pool's target (what demand added) beside its configured size");
    ok(text && strstr(text, "hutch_pool_failures_total{executor=\"docker\","
                            "language=\"node\",memory_mb=\"256\",pids=\"32\"} 4\n"),
       "each field of a row is its own family");
    free(text);

    o = hutch_metrics_ready(&src, NULL, 0, &ready);
    js = o ? cJSON_PrintUnformatted(o) : NULL;
    ok(ready && js && !strstr(js, "no such image") &&
           strstr(js, "\"pools\":[{\"executor\":\"local\",\"language\":\"python\","
                      "\"memory_mb\":512,\"pids\":64,\"size\":2,\"target\":3,"
                      "\"idle\":1,"
                      "\"starting\":1,\"hits\":5,\"misses\":1,\"failures\":0,"
                      "\"recycled\":0,\"on_demand\":false},") &&
           strstr(js, "\"upstreams\":[],"),
       "/readyz without detail: the rows, no last_error (%s)", js ? js : "NULL");
    free(js);
    cJSON_Delete(o);
    o = hutch_metrics_ready(&src, NULL, 1, &ready);
    js = o ? cJSON_PrintUnformatted(o) : NULL;
    ok(js && strstr(js, "\"on_demand\":true,\"last_error\":\"no such image\"}"),
       "/readyz with detail: a failing class's last_error");
    free(js);
    cJSON_Delete(o);

    o = hutch_upstream_status_json(ups, 2, 1);
    js = o ? cJSON_PrintUnformatted(o) : NULL;
    ok(js && !strcmp(js, "[{\"server\":\"fs\",\"transport\":\"stdio\",\"state\":"
                         "\"ready\",\"tools\":3},{\"server\":\"web\",\"transport\":"
                         "\"http\",\"state\":\"failed\",\"error\":\"connection "
                         "refused\",\"tools\":0}]"),
       "upstream rows as /readyz shows them (%s)", js ? js : "NULL");
    free(js);
    cJSON_Delete(o);
    o = hutch_upstream_status_json(ups, 2, 0);
    js = o ? cJSON_PrintUnformatted(o) : NULL;
    ok(js && !strstr(js, "error"), "and without their errors when not detailed");
    free(js);
    cJSON_Delete(o);
}

int main(void)
{
    char *text, name[32];

    hutch_metrics_execution("we\"ird\\ex\necutor", HUTCH_OUTCOME_OK, 0.02);
    hutch_metrics_execution("local", HUTCH_OUTCOME_OK, 0.003);
    hutch_metrics_execution("local", HUTCH_OUTCOME_TIMEOUT, 1000);
    hutch_metrics_execution("local", HUTCH_OUTCOME_ERROR, 0.7);
    hutch_metrics_execution(NULL, HUTCH_OUTCOME_DENIED, -1);
    hutch_metrics_tool_call("fs", "ok");
    hutch_metrics_tool_call("fs", "made-up-code");
    hutch_metrics_tool_call(NULL, "unknown_tool");
    hutch_metrics_denial(HUTCH_DENIAL_TOOL_CALL, 1);
    hutch_metrics_sandbox(1);
    hutch_metrics_sandbox(1);
    hutch_metrics_sandbox(-1);
    for (int i = 0; i < 2 * HUTCH_METRICS_MAX_EXECUTORS; i++) {
        snprintf(name, sizeof(name), "x%d", i);
        hutch_metrics_execution(name, HUTCH_OUTCOME_FAILED, 0.001);
    }

    text = render();
    ok(text != NULL, "renders");
    if (!text)
        return tap_done();
    ok(strstr(text, "hutch_executions_total{executor=\"we\\\"ird\\\\ex\\necutor\","
                    "outcome=\"ok\"} 1\n"),
       "label values escape quote, backslash and newline");
    ok(!strstr(text, "we\"ird"), "no raw quote inside a label value");
    ok(strstr(text, "hutch_execution_duration_seconds_bucket{executor=\"local\","
                    "le=\"0.005\"} 1\n"),
       "a fast run lands in the first bucket");
    ok(strstr(text, "hutch_execution_duration_seconds_bucket{executor=\"local\","
                    "le=\"1\"} 2\n"),
       "buckets are cumulative");
    ok(strstr(text, "hutch_execution_duration_seconds_bucket{executor=\"local\","
                    "le=\"300\"} 2\n"),
       "a run past the last bound is in no finite bucket");
    ok(strstr(text, "hutch_execution_duration_seconds_bucket{executor=\"local\","
                    "le=\"+Inf\"} 3\n") &&
           strstr(text,
                  "hutch_execution_duration_seconds_count{executor=\"local\"} 3\n"),
       "+Inf equals _count");
    ok(strstr(text, "hutch_executions_total{executor=\"none\",outcome=\"denied\"} 1\n"),
       "a refusal before any executor counts under none");
    ok(!strstr(text, "hutch_execution_duration_seconds_count{executor=\"none\"}"),
       "and is not in the histogram");
    ok(strstr(text, "hutch_tool_calls_total{server=\"fs\",outcome=\"other\"} 1\n"),
       "an outcome hutch does not know counts as other");
    ok(strstr(text, "hutch_tool_calls_total{server=\"\",outcome=\"unknown_tool\"} 1\n"),
       "a call naming no known server counts under server \"\"");
    ok(strstr(text,
              "hutch_policy_denials_total{kind=\"tool_call\",reason=\"rate_limit\"} "
              "1\n"),
       "denials by kind and reason");
    ok(strstr(text, "hutch_sandboxes_alive 1\n"), "sandboxes alive gauge");
    ok(strstr(text, "executor=\"other\""), "executors past the table count as other");
    snprintf(name, sizeof(name), "\"x%d\"", 2 * HUTCH_METRICS_MAX_EXECUTORS - 1);
    ok(!strstr(text, name), "the table stays bounded");
    ok(strstr(text, "# TYPE hutch_execution_duration_seconds histogram\n") &&
           strstr(text, "# TYPE hutch_executions_total counter\n"),
       "families have their TYPE");
    ok(text[strlen(text) - 1] == '\n', "the text ends with a newline");
    free(text);
    typed_rows();
    return tap_done();
}
