/* test_metrics.c — the exposition metrics.c renders, without HTTP: label
 * values escaped as the text format wants (\\, \", \n), histogram buckets
 * cumulative with +Inf equal to _count, unknown tool call outcomes and
 * executors past the table counted as "other", and the sandboxes gauge. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "caps.h"
#include "metrics.h"
#include "tap.h"

static char *render(void)
{
    struct hutch_buf b;
    hutch_buf_init(&b, HUTCH_METRICS_MAX_BYTES);
    if (hutch_metrics_render(NULL, NULL, &b) < 0) {
        hutch_buf_free(&b);
        return NULL;
    }
    return hutch_buf_steal(&b, NULL);
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
    return tap_done();
}
