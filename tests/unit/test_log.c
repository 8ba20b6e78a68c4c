/* test_log.c — log.c's two formats, read back from stderr: text keeps its
 * "who: level: message" shape, JSON is one object per line with time,
 * level, who and msg (and fields), bytes that are not UTF-8 become U+FFFD
 * so the line still parses, and the threshold applies to both. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "tap.h"

static char got[16384];

/* Runs f with stderr sent to a temporary file; got holds what it wrote. */
static void capture(void (*f)(void))
{
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);
    size_t n;

    fflush(stderr);
    dup2(fileno(tmp), STDERR_FILENO);
    f();
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    n = fread(got, 1, sizeof(got) - 1, tmp);
    got[n] = '\0';
    fclose(tmp);
}

static void text_lines(void)
{
    hutch_log_set_format_name("text");
    hutch_log(HUTCH_LOG_WARN, "policy", "a %s", "warning");
    hutch_log(HUTCH_LOG_DEBUG, "policy", "below the threshold");
    hutch_log_say(HUTCH_LOG_INFO, "hutch serve", NULL, "listening");
}

static void json_lines(void)
{
    cJSON *f = cJSON_CreateObject();
    cJSON_AddNumberToObject(f, "port", 8080);
    hutch_log_set_format_name("json");
    hutch_log(HUTCH_LOG_WARN, "up\"stream",
              "bad \xff\xfe bytes \xe2\x82 and \"quotes\"\n");
    hutch_log(HUTCH_LOG_DEBUG, "x", "below the threshold");
    hutch_log_say(HUTCH_LOG_INFO, "hutch serve", f, "listening");
    hutch_log_set_format_name("text");
    cJSON_Delete(f);
}

int main(void)
{
    char *line, *save = NULL;
    int n = 0, parsed = 0;
    cJSON *o;

    hutch_log_set_level(HUTCH_LOG_WARN);
    ok(hutch_log_set_format_name("yaml") < 0, "an unknown format is refused");
    capture(text_lines);
    ok(strcmp(got, "policy: warning: a warning\nhutch serve: listening\n") == 0,
       "text: who: level: message; said lines without a level word");

    capture(json_lines);
    for (line = strtok_r(got, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        n++;
        o = cJSON_Parse(line);
        if (o && cJSON_IsString(cJSON_GetObjectItem(o, "time")) &&
            cJSON_IsString(cJSON_GetObjectItem(o, "level")) &&
            cJSON_IsString(cJSON_GetObjectItem(o, "who")) &&
            cJSON_IsString(cJSON_GetObjectItem(o, "msg")))
            parsed++;
        if (n == 1) {
            const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(o, "msg"));
            ok(msg && strstr(msg, "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes \xEF\xBF\xBD"),
               "bytes that are not UTF-8 become U+FFFD");
            ok(msg && strstr(msg, "\"quotes\""), "quotes survive");
            ok(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o, "who")),
                       "up\"stream"),
               "who is kept");
            ok(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o, "level")),
                       "warning"),
               "level named");
        }
        if (n == 2)
            ok(cJSON_GetNumberValue(cJSON_GetObjectItem(
                   cJSON_GetObjectItem(o, "fields"), "port")) == 8080,
               "fields are added");
        cJSON_Delete(o);
    }
    ok(n == 2, "json: one line each, none below the threshold (%d)", n);
    ok(parsed == n, "json: every line is an object with time, level, who, msg");
    return tap_done();
}
