/* test_exec_args.c — execute_code's arguments from one table (exec_args.c):
 * the inputSchema it generates is byte for byte the one tools/list showed
 * before the table existed (with and without the policy's host folders,
 * with the server's maxima); every refusal's message; the values landing
 * in the typed request, timeout_ms and output_bytes clamped rather than
 * refused above the maximum shown; which argument a message names when
 * several are wrong; and the parser agreeing with a JSON Schema validator
 * (schema.c) run on the generated schema, but where they differ on
 * purpose. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "exec_args.h"
#include "hutch_archive.h"
#include "schema.h"
#include "tap.h"

static const char schema_plain[] =
    "{\"type\":\"object\",\"properties\":{\"language\":{\"type\":\"string\",\"enum\":["
    "\"python\",\"javascript\",\"typescript\"]},\"code\":{\"type\":\"string\"},"
    "\"files\":{\"type\":\"array\",\"description\":\"put under /work first\",\"items\":"
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{"
    "\"type\":\"string\"},\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\","
    "\"base64\"]}},\"required\":[\"path\",\"content\"]}},\"workspace\":{\"type\":"
    "\"string\",\"description\":\"keeps /work/out/workspace between runs that name "
    "it\",\"maxLength\":64,\"pattern\":\"^[A-Za-z0-9_][A-Za-z0-9_.-]*$\"},"
    "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":30000},"
    "\"output_bytes\":{\"type\":\"integer\",\"description\":\"stdout/stderr kept, head "
    "and tail\",\"minimum\":1,\"maximum\":1048576},\"trace\":{\"type\":\"boolean\","
    "\"description\":\"list every tool call\"}},\"required\":[\"language\",\"code\"],"
    "\"additionalProperties\":false}";

static const char schema_paths[] =
    "{\"type\":\"object\",\"properties\":{\"language\":{\"type\":\"string\",\"enum\":["
    "\"python\",\"javascript\",\"typescript\"]},\"code\":{\"type\":\"string\"},"
    "\"files\":{\"type\":\"array\",\"description\":\"put under /work first\",\"items\":"
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{"
    "\"type\":\"string\"},\"encoding\":{\"type\":\"string\",\"enum\":[\"utf-8\","
    "\"base64\"]}},\"required\":[\"path\",\"content\"]}},\"inputs\":{\"type\":"
    "\"array\",\"description\":\"host files or folders to copy in\",\"items\":{"
    "\"type\":\"string\"}},\"output_dir\":{\"type\":\"string\",\"description\":\"host "
    "folder that receives /work/out\"},\"workspace\":{\"type\":\"string\","
    "\"description\":\"keeps /work/out/workspace between runs that name it\","
    "\"maxLength\":64,\"pattern\":\"^[A-Za-z0-9_][A-Za-z0-9_.-]*$\"},\"timeout_ms\":{"
    "\"type\":\"integer\",\"minimum\":1,\"maximum\":5000},\"output_bytes\":{\"type\":"
    "\"integer\",\"description\":\"stdout/stderr kept, head and tail\",\"minimum\":1,"
    "\"maximum\":2000},\"trace\":{\"type\":\"boolean\",\"description\":\"list every "
    "tool "
    "call\"}},\"required\":[\"language\",\"code\"],\"additionalProperties\":false}";

static cJSON *json(const char *text)
{
    cJSON *j = cJSON_Parse(text);
    if (!j) {
        printf("# bad test JSON: %s\n", text);
        exit(2);
    }
    return j;
}

static void schema_is(const struct hutch_exec_args_offer *o, const char *want,
                      const char *what)
{
    cJSON *s = hutch_exec_args_schema(o);
    char *got = s ? cJSON_PrintUnformatted(s) : NULL;
    ok(got && !strcmp(got, want), "%s", what);
    if (got && strcmp(got, want))
        printf("#   got  %s\n#   want %s\n", got, want);
    cJSON_free(got);
    cJSON_Delete(s);
}

/* `args` refused with exactly `msg`. */
static void refused(const char *args, const char *msg, const char *what)
{
    cJSON *a = json(args);
    struct hutch_exec_args x;
    struct hutch_err err = {0};
    int r = hutch_exec_args_parse(a, &x, &err);
    ok(r < 0 && !strcmp(err.msg, msg) && !x.job.files && !x.job.inputs, "%s", what);
    if (r >= 0 || strcmp(err.msg, msg))
        printf("#   r %d, message %s\n", r, err.msg);
    cJSON_Delete(a);
}

static void refused_v(cJSON *a, const char *msg, const char *what)
{
    struct hutch_exec_args x;
    struct hutch_err err = {0};
    int r = hutch_exec_args_parse(a, &x, &err);
    ok(r < 0 && !strcmp(err.msg, msg), "%s", what);
    if (r >= 0 || strcmp(err.msg, msg))
        printf("#   r %d, message %s\n", r, err.msg);
}

static void test_schema(void)
{
    struct hutch_exec_args_offer plain = {0, 30000, HUTCH_OUTPUT_MAX_BYTES};
    struct hutch_exec_args_offer paths = {1, 5000, 2000};
    schema_is(&plain, schema_plain,
              "the inputSchema without host folders is tools/list's of before");
    schema_is(&paths, schema_paths,
              "… with them: inputs and output_dir, and the server's maxima");
}

static void test_refusals(void)
{
    static const struct {
        const char *args, *msg, *what;
    } cases[] = {
        {"{\"language\":\"cobol\",\"code\":\"x\"}",
         "execute_code: \"language\" must be \"python\", \"javascript\" or "
         "\"typescript\"",
         "a language that is not offered"},
        {"{\"code\":\"1\"}",
         "execute_code: \"language\" must be \"python\", \"javascript\" or "
         "\"typescript\"",
         "no language"},
        {"{\"language\":null,\"code\":\"1\"}",
         "execute_code: \"language\" must be \"python\", \"javascript\" or "
         "\"typescript\"",
         "a null language (a required argument is not made absent by null)"},
        {"{\"language\":\"python\"}", "execute_code: \"code\" must be a string",
         "no code"},
        {"{\"language\":\"python\",\"code\":5}",
         "execute_code: \"code\" must be a string", "code that is a number"},
        {"{\"language\":\"python\",\"code\":\"1\",\"extra\":1}",
         "execute_code: unknown argument \"extra\"", "an unknown argument"},
        {"{\"extra\":1}", "execute_code: unknown argument \"extra\"",
         "an unknown argument is named before a missing one"},
        {"{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":-5}",
         "execute_code: \"timeout_ms\" must be a positive integer", "timeout_ms < 0"},
        {"{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":0}",
         "execute_code: \"timeout_ms\" must be a positive integer", "timeout_ms 0"},
        {"{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":1.5}",
         "execute_code: \"timeout_ms\" must be a positive integer",
         "a fraction of a millisecond"},
        {"{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":\"5\"}",
         "execute_code: \"timeout_ms\" must be a positive integer",
         "timeout_ms as a string"},
        {"{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":true}",
         "execute_code: \"timeout_ms\" must be a positive integer", "timeout_ms true"},
        {"{\"language\":\"python\",\"code\":\"1\",\"output_bytes\":0}",
         "execute_code: \"output_bytes\" must be a positive integer", "output_bytes 0"},
        {"{\"language\":\"python\",\"code\":\"1\",\"output_bytes\":[]}",
         "execute_code: \"output_bytes\" must be a positive integer",
         "output_bytes an array"},
        {"{\"language\":\"python\",\"code\":\"1\",\"trace\":1}",
         "execute_code: \"trace\" must be true or false", "trace 1"},
        {"{\"language\":\"python\",\"code\":\"1\",\"output_dir\":5}",
         "execute_code: \"output_dir\" must be a host path", "output_dir a number"},
        {"{\"language\":\"python\",\"code\":\"1\",\"workspace\":5}",
         "execute_code: \"workspace\": must be a name (a string)",
         "workspace a number"},
        {"{\"language\":\"python\",\"code\":\"1\",\"workspace\":\".bad\"}",
         "execute_code: \"workspace\": workspace name \".bad\" must not start with "
         "\".\" "
         "or \"-\"",
         "workspace with a leading dot: the workspace rule's own message"},
        {"{\"language\":\"python\",\"code\":\"1\",\"workspace\":\"\"}",
         "execute_code: \"workspace\": a workspace name must not be empty",
         "an empty workspace"},
        {"{\"language\":\"python\",\"code\":\"1\",\"files\":\"nope\"}",
         "execute_code: \"files\" must be an array of {path, content, encoding?}",
         "files not an array"},
        {"{\"language\":\"python\",\"code\":\"1\",\"files\":[1]}",
         "execute_code: files[0] needs a string \"path\" and a string \"content\"",
         "a file that is not an object"},
        {"{\"language\":\"python\",\"code\":\"1\",\"files\":[{\"path\":\"a\","
         "\"content\":"
         "\"x\"},{\"path\":\"b\"}]}",
         "execute_code: files[1] needs a string \"path\" and a string \"content\"",
         "a file without content, the second (the tar built so far is freed)"},
        {"{\"language\":\"python\",\"code\":\"1\",\"files\":[{\"path\":\"a\","
         "\"content\":"
         "\"x\",\"encoding\":\"latin1\"}]}",
         "execute_code: files[0].encoding must be \"utf-8\" or \"base64\"",
         "an unknown encoding"},
        {"{\"language\":\"python\",\"code\":\"1\",\"files\":[{\"path\":\"a\","
         "\"content\":"
         "\"!!!\",\"encoding\":\"base64\"}]}",
         "execute_code: files[0] (a): content is not valid base64", "bad base64"},
        {"{\"language\":\"python\",\"code\":\"1\",\"files\":[{\"path\":\"../../etc/x\","
         "\"content\":\"x\"}]}",
         "execute_code: files[0]: tar destination \"../../etc/x\": \"..\" is not "
         "allowed in paths",
         "a file escaping /work"},
        {"{\"language\":\"python\",\"code\":\"1\",\"inputs\":\"x\"}",
         "execute_code: \"inputs\" must be an array of at most 1000 host paths",
         "inputs not an array"},
        {"{\"language\":\"python\",\"code\":\"1\",\"inputs\":[\"/a\",1]}",
         "execute_code: \"inputs\" must hold strings (host paths)",
         "inputs holding a number"},
        /* Several wrong: the first in the table's order, files and inputs
         * after the others. */
        {"{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":-1,\"files\":\"x\"}",
         "execute_code: \"timeout_ms\" must be a positive integer",
         "several wrong: files after the rest"},
        {"{\"trace\":1,\"language\":\"python\",\"code\":\"1\",\"workspace\":5,"
         "\"timeout_ms\":-1}",
         "execute_code: \"workspace\": must be a name (a string)",
         "several wrong: the table's order, not the request's"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        refused(cases[i].args, cases[i].msg, cases[i].what);

    {
        /* Code of 1 MiB passes, one byte more does not. */
        char *code = malloc(HUTCH_MAX_CODE_BYTES + 2);
        cJSON *a = json("{\"language\":\"python\"}");
        struct hutch_exec_args x;
        struct hutch_err err = {0};
        memset(code, '#', HUTCH_MAX_CODE_BYTES);
        code[HUTCH_MAX_CODE_BYTES] = '\0';
        cJSON_AddStringToObject(a, "code", code);
        ok(hutch_exec_args_parse(a, &x, &err) == 0, "code of exactly 1 MiB");
        hutch_exec_args_free(&x);
        cJSON_DeleteItemFromObject(a, "code");
        code[HUTCH_MAX_CODE_BYTES] = '#';
        code[HUTCH_MAX_CODE_BYTES + 1] = '\0';
        cJSON_AddStringToObject(a, "code", code);
        refused_v(a, "execute_code: \"code\" is larger than 1 MiB", "code over 1 MiB");
        cJSON_Delete(a);
        free(code);
    }
    {
        /* More files than HUTCH_MAX_INPUT_FILES, more inputs too. */
        cJSON *a = json("{\"language\":\"python\",\"code\":\"1\"}");
        cJSON *f = cJSON_AddArrayToObject(a, "files");
        for (int i = 0; i <= HUTCH_MAX_INPUT_FILES; i++) {
            cJSON *e = cJSON_CreateObject();
            char p[32];
            snprintf(p, sizeof(p), "f%d", i);
            cJSON_AddStringToObject(e, "path", p);
            cJSON_AddStringToObject(e, "content", "");
            cJSON_AddItemToArray(f, e);
        }
        refused_v(a, "execute_code: more than 1000 files", "1001 files");
        cJSON_DeleteItemFromObject(a, "files");
        f = cJSON_AddArrayToObject(a, "inputs");
        for (int i = 0; i <= HUTCH_MAX_INPUT_FILES; i++)
            cJSON_AddItemToArray(f, cJSON_CreateString("/x"));
        refused_v(
            a, "execute_code: \"inputs\" must be an array of at most 1000 host paths",
            "1001 inputs");
        cJSON_Delete(a);
    }
}

static void test_values(void)
{
    cJSON *a =
        json("{\"language\":\"typescript\",\"code\":\"1\",\"files\":[{\"path\":"
             "\"a.txt\",\"content\":\"x\"},{\"path\":\"b.bin\",\"content\":\"AAE=\","
             "\"encoding\":\"base64\"}],\"inputs\":[\"/h/a\",\"/h/b\",\"/h/c\"],"
             "\"output_dir\":\"/h/out\",\"workspace\":\"notes.v2\",\"timeout_ms\":"
             "1200,\"output_bytes\":64,\"trace\":true}");
    struct hutch_exec_args x;
    struct hutch_err err = {0};
    int r = hutch_exec_args_parse(a, &x, &err);

    ok(r == 0, "every argument at once (%s)", err.msg);
    ok(x.job.language && !strcmp(x.job.language, "typescript") && x.job.code &&
           !strcmp(x.job.code, "1"),
       "language and code land in the request");
    ok(x.job.files && x.job.nfiles == 2, "two files packed, counted");
    ok(x.job.inputs && x.job.ninputs == 3 && !strcmp(x.job.inputs[2].src, "/h/c") &&
           !x.job.inputs[0].dest,
       "three inputs, where the policy's paths say");
    ok(x.job.output_dir && !strcmp(x.job.output_dir, "/h/out") && x.job.workspace &&
           !strcmp(x.job.workspace, "notes.v2"),
       "output_dir and workspace");
    ok(x.job.timeout_ms == 1200 && x.job.output_bytes == 64 && x.trace == 1,
       "timeout_ms, output_bytes, trace");
    ok(!x.job.principal && !x.job.cancel && !x.job.ask && x.job.stream_fd_out == 0,
       "nothing else of the request is set");
    hutch_exec_args_free(&x);
    ok(!x.job.files && !x.job.inputs, "freed");
    hutch_exec_args_free(&x);
    cJSON_Delete(a);

    a = json(
        "{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":null,\"output_bytes\":"
        "null,\"trace\":null,\"workspace\":null,\"files\":null,\"inputs\":null,"
        "\"output_dir\":null}");
    r = hutch_exec_args_parse(a, &x, &err);
    ok(r == 0 && !x.job.timeout_ms && !x.job.output_bytes && !x.trace &&
           !x.job.workspace && !x.job.files && !x.job.nfiles && !x.job.inputs &&
           !x.job.output_dir,
       "null is absent for an optional argument");
    hutch_exec_args_free(&x);
    cJSON_Delete(a);

    a = json("{\"language\":\"python\",\"code\":\"1\",\"files\":[]}");
    r = hutch_exec_args_parse(a, &x, &err);
    ok(r == 0 && x.job.files && x.job.nfiles == 0, "no files: an empty tar");
    hutch_exec_args_free(&x);
    cJSON_Delete(a);

    /* Above the maximum shown: clamped, not refused (job.c gives the
     * ceiling and says so in the result). */
    a = json("{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":1e300,"
             "\"output_bytes\":5000000}");
    r = hutch_exec_args_parse(a, &x, &err);
    ok(r == 0 && x.job.timeout_ms == HUTCH_EXEC_ARG_COUNT_MAX &&
           x.job.output_bytes == 5000000,
       "timeout_ms 1e300 is read as 1e15, output_bytes above 1 MiB is kept for job.c");
    hutch_exec_args_free(&x);
    cJSON_Delete(a);
    a = json("{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":99999999.5}");
    r = hutch_exec_args_parse(a, &x, &err);
    ok(r == 0 && x.job.timeout_ms == 99999999,
       "a fraction above the longest timeout is no error (it is clamped anyway)");
    hutch_exec_args_free(&x);
    cJSON_Delete(a);
}

/* The parser and a JSON Schema validator on the generated schema agree,
 * but where they differ on purpose (exec_args.c's top comment). */
static void test_agreement(void)
{
    static const struct {
        const char *args;
        int parsed, valid; /* 1: accepted */
        const char *what;
    } cases[] = {
        {"{\"language\":\"python\",\"code\":\"1\"}", 1, 1, "the least call"},
        {"{\"language\":\"python\",\"code\":\"1\",\"files\":[{\"path\":\"a\","
         "\"content\":"
         "\"x\",\"encoding\":\"utf-8\"}],\"workspace\":\"w\",\"timeout_ms\":10,"
         "\"output_bytes\":10,\"trace\":false}",
         1, 1, "every argument shown"},
        {"{\"language\":\"ruby\",\"code\":\"1\"}", 0, 0, "a language not offered"},
        {"{\"language\":\"python\"}", 0, 0, "no code"},
        {"{\"language\":\"python\",\"code\":\"1\",\"x\":1}", 0, 0,
         "an unknown argument"},
        {"{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":0}", 0, 0,
         "timeout 0"},
        {"{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":2.5}", 0, 0,
         "a fraction"},
        {"{\"language\":\"python\",\"code\":\"1\",\"trace\":\"yes\"}", 0, 0,
         "trace a string"},
        {"{\"language\":\"python\",\"code\":\"1\",\"files\":[{\"path\":\"a\"}]}", 0, 0,
         "a file without content"},
        {"{\"language\":\"python\",\"code\":\"1\",\"files\":[{\"path\":\"a\","
         "\"content\":"
         "\"x\",\"encoding\":\"hex\"}]}",
         0, 0, "an unknown encoding"},
        {"{\"language\":\"python\",\"code\":\"1\",\"workspace\":\"" /* 65 bytes */
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
         0, 0, "a workspace name over maxLength"},
        /* On purpose: clamped above the maximum shown. */
        {"{\"language\":\"python\",\"code\":\"1\",\"timeout_ms\":30001}", 1, 0,
         "timeout_ms above the maximum shown: clamped, not refused"},
        {"{\"language\":\"python\",\"code\":\"1\",\"output_bytes\":2000000}", 1, 0,
         "output_bytes above the maximum shown: clamped, not refused"},
        /* On purpose: the policy's paths refuse them (job.c). */
        {"{\"language\":\"python\",\"code\":\"1\",\"inputs\":[\"/a\"],\"output_dir\":"
         "\"/b\"}",
         1, 0, "inputs and output_dir when not shown: left to the policy's paths"},
        /* schema.c enforces no pattern (schema.h); the parser does. */
        {"{\"language\":\"python\",\"code\":\"1\",\"workspace\":\"-x\"}", 0, 1,
         "a workspace name against the pattern"},
    };
    struct hutch_exec_args_offer o = {0, 30000, HUTCH_OUTPUT_MAX_BYTES};
    cJSON *schema = hutch_exec_args_schema(&o);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *a = json(cases[i].args);
        struct hutch_exec_args x;
        struct hutch_err err = {0};
        char msg[256];
        int parsed = hutch_exec_args_parse(a, &x, &err) == 0;
        int valid = hutch_schema_validate(schema, a, msg, sizeof(msg)) == 0;
        ok(parsed == cases[i].parsed && valid == cases[i].valid,
           "%s: parsed %d, schema %d", cases[i].what, parsed, valid);
        hutch_exec_args_free(&x);
        cJSON_Delete(a);
    }
    cJSON_Delete(schema);
}

int main(void)
{
    test_schema();
    test_refusals();
    test_values();
    test_agreement();
    return tap_done();
}
