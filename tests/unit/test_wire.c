/* test_wire.c — the core's side of the runner protocol against forged and
 * malformed messages: every one is refused with a reason, none crashes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "tap.h"
#include "util.h"
#include "wire.h"

static int parse(const char *s, struct hutch_msg *m, struct hutch_err *e)
{
    memset(e, 0, sizeof(*e));
    return hutch_wire_parse(s, strlen(s), m, e);
}

static void refused(const char *line, const char *why, const char *desc)
{
    struct hutch_msg m;
    struct hutch_err e;
    int r = parse(line, &m, &e);
    ok(r < 0 && strstr(e.msg, why), "%s: %s", desc, e.msg);
    if (r == 0)
        hutch_msg_free(&m);
}

int main(void)
{
    struct hutch_wire_reader rd;
    struct hutch_msg m;
    struct hutch_err e;
    const char *line;
    size_t len;
    char *big;

    /* framing */
    hutch_wire_reader_init(&rd, 64);
    ok(hutch_wire_feed(&rd, "{\"a\":1}\n{\"b\"", 12) == 0, "feed two partial lines");
    ok(hutch_wire_next(&rd, &line, &len) == 1 && len == 7 &&
           !memcmp(line, "{\"a\":1}", 7),
       "first line comes out whole");
    ok(hutch_wire_next(&rd, &line, &len) == 0, "a partial line waits");
    ok(hutch_wire_feed(&rd, ":2}\n", 4) == 0 &&
           hutch_wire_next(&rd, &line, &len) == 1 && len == 7,
       "the rest completes it");
    big = malloc(100);
    memset(big, 'x', 100);
    ok(hutch_wire_feed(&rd, big, 100) == -E2BIG, "a line past the cap is refused");
    hutch_wire_reader_free(&rd);
    /* Complete, and with short lines around it, in one piece or in two
     * (tests/fuzz/crashes/wire). */
    big[0] = '\n';
    big[90] = '\n';
    hutch_wire_reader_init(&rd, 64);
    ok(hutch_wire_feed(&rd, big, 100) == -E2BIG,
       "a complete line past the cap between short ones is refused");
    hutch_wire_reader_free(&rd);
    hutch_wire_reader_init(&rd, 64);
    ok(hutch_wire_feed(&rd, big, 50) == 0 &&
           hutch_wire_feed(&rd, big + 50, 50) == -E2BIG,
       "so is one that ends in a later piece");
    hutch_wire_reader_free(&rd);
    hutch_wire_reader_init(&rd, 89);
    ok(hutch_wire_feed(&rd, big, 50) == 0 && hutch_wire_feed(&rd, big + 50, 50) == 0 &&
           hutch_wire_next(&rd, &line, &len) == 1 && len == 0 &&
           hutch_wire_next(&rd, &line, &len) == 1 && len == 89,
       "a line exactly at the cap comes out");
    free(big);
    hutch_wire_reader_free(&rd);

    /* valid messages */
    ok(parse("{\"t\":\"ready\",\"lang\":\"python\",\"version\":\"3.11\"}", &m, &e) ==
               0 &&
           m.type == HUTCH_MSG_READY && !strcmp(m.lang, "python"),
       "ready parses");
    hutch_msg_free(&m);
    ok(parse("{\"t\":\"tool_call\",\"id\":7,\"tool\":\"fs.read_file\",\"args\":{\"p\":"
             "1}}",
             &m, &e) == 0 &&
           m.type == HUTCH_MSG_TOOL_CALL && m.id == 7 &&
           !strcmp(m.tool, "fs.read_file"),
       "tool_call parses");
    hutch_msg_free(&m);
    ok(parse("{\"t\":\"search\",\"id\":8,\"tool\":\"ignored\",\"args\":{\"query\":"
             "\"x\"}}",
             &m, &e) == 0 &&
           m.type == HUTCH_MSG_SEARCH && m.id == 8 && !m.tool && cJSON_IsObject(m.args),
       "search (tools.search) parses, naming no tool");
    hutch_msg_free(&m);
    ok(parse("{\"t\":\"describe\",\"id\":9,\"tool\":\"ignored\",\"args\":{"
             "\"tool\":\"fs.read_file\"}}",
             &m, &e) == 0 &&
           m.type == HUTCH_MSG_DESCRIBE && m.id == 9 && !m.tool &&
           cJSON_IsObject(m.args),
       "describe (dir(), help()) parses, naming no tool");
    hutch_msg_free(&m);
    ok(parse("{\"t\":\"describe\",\"id\":0}", &m, &e) < 0 &&
           strstr(e.msg, "describe id must be a positive integer"),
       "describe: a bad id is refused (%s)", e.msg);
    hutch_msg_free(&m);
    ok(parse("{\"t\":\"describe\",\"id\":3,\"args\":[]}", &m, &e) < 0 &&
           strstr(e.msg, "describe args must be an object"),
       "describe: args must be an object (%s)", e.msg);
    hutch_msg_free(&m);
    ok(parse("{\"t\":\"done\",\"ok\":true,\"result\":[1,2]}", &m, &e) == 0 && m.ok &&
           cJSON_IsArray(m.result),
       "done parses");
    hutch_msg_free(&m);

    /* forged and malformed */
    refused("not json", "not valid JSON", "garbage");
    refused("[1,2]", "not a JSON object", "an array");
    refused("{\"x\":1}", "\"t\"", "no type");
    refused("{\"t\":\"run\"}", "unknown message type", "a core-to-runner type");
    refused("{\"t\":\"tool_call\",\"id\":0,\"tool\":\"a.b\"}", "positive integer",
            "id 0");
    refused("{\"t\":\"tool_call\",\"id\":1.5,\"tool\":\"a.b\"}", "positive integer",
            "fractional id");
    refused("{\"t\":\"tool_call\",\"id\":\"7\",\"tool\":\"a.b\"}", "positive integer",
            "string id");
    refused("{\"t\":\"tool_call\",\"id\":1e300,\"tool\":\"a.b\"}", "positive integer",
            "huge id");
    refused("{\"t\":\"tool_call\",\"id\":1,\"tool\":\"\"}", "printable", "empty tool");
    refused("{\"t\":\"tool_call\",\"id\":1,\"tool\":\"a\\nb\"}", "printable",
            "control character in tool");
    refused("{\"t\":\"tool_call\",\"id\":1,\"tool\":\"a.b\",\"args\":[1]}", "object",
            "args not an object");
    refused("{\"t\":\"search\",\"id\":0}", "search id must be a positive integer",
            "search id 0");
    refused("{\"t\":\"search\",\"id\":1,\"args\":\"x\"}",
            "search args must be an object", "search args not an object");
    refused("{\"t\":\"done\"}", "boolean", "done without ok");
    refused("{\"t\":\"done\",\"ok\":false}", "error object",
            "failed done without error");
    refused("{\"t\":\"ready\",\"x\":\"\xff\xfe\"}", "UTF-8", "invalid UTF-8");
    refused("{\"t\":\"ready\",\"x\":\"\xed\xa0\x80\"}", "UTF-8",
            "an encoded surrogate");
    refused("{\"t\":\"ready\",\"x\":\"\xc0\xaf\"}", "UTF-8", "an overlong encoding");
    {
        char deep[400];
        size_t n = 0;
        n += (size_t)snprintf(deep, sizeof(deep), "{\"t\":\"ready\",\"x\":");
        for (int i = 0; i < 100; i++)
            deep[n++] = '[';
        for (int i = 0; i < 100; i++)
            deep[n++] = ']';
        deep[n++] = '}';
        deep[n] = '\0';
        refused(deep, "deeper", "nesting past the cap");
    }
    ok(hutch_utf8_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15),
       "valid UTF-8 passes");

    /* A NUL in a value: \u0000 arrives as U+FFFD, nothing after it lost. */
    ok(parse("{\"t\":\"done\",\"ok\":true,\"result\":[\"a\\u0000b\",{\"k\\u0000\":"
             "\"\\u0000\"},\"tail\"]}",
             &m, &e) == 0 &&
           !strcmp(cJSON_GetArrayItem(m.result, 0)->valuestring, "a\xef\xbf\xbd"
                                                                 "b") &&
           !strcmp(cJSON_GetArrayItem(m.result, 1)->child->string, "k\xef\xbf\xbd") &&
           !strcmp(cJSON_GetArrayItem(m.result, 1)->child->valuestring,
                   "\xef\xbf\xbd") &&
           !strcmp(cJSON_GetArrayItem(m.result, 2)->valuestring, "tail"),
       "\\u0000 in a string, a key, a value alone becomes U+FFFD; the rest is kept");
    hutch_msg_free(&m);
    ok(parse("{\"t\":\"done\",\"ok\":true,\"result\":\"\\\\u0000 \\\\\\u0000\"}", &m,
             &e) == 0 &&
           !strcmp(m.result->valuestring, "\\u0000 \\\xef\xbf\xbd"),
       "an escaped backslash before u0000 is text, not an escape");
    hutch_msg_free(&m);
    {
        static const char raw[] = "{\"t\":\"ready\",\"x\":\"a\0b\"}";
        memset(&e, 0, sizeof(e));
        ok(hutch_wire_parse(raw, sizeof(raw) - 1, &m, &e) < 0 && strstr(e.msg, "NUL"),
           "a raw NUL byte in a message is refused: %s", e.msg);
    }

    /* Output as text: NUL and bytes that are not UTF-8 become U+FFFD. */
    {
        static const char in[] = "a\0b\xff\xc3\xa9\xe2\x82\n\xf0\x9f\x98\x80";
        size_t n = 0;
        char *t = hutch_utf8_sanitize(in, sizeof(in) - 1, &n);
        static const char want[] = "a\xef\xbf\xbd"
                                   "b\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd"
                                   "\n\xf0\x9f\x98\x80";
        ok(t && n == sizeof(want) - 1 && !memcmp(t, want, n) && strlen(t) == n &&
               hutch_utf8_valid(t, n),
           "sanitize: NUL, a stray byte and a cut sequence are U+FFFD, the rest kept");
        free(t);
        t = hutch_utf8_sanitize("", 0, &n);
        ok(t && n == 0 && !*t, "sanitize: empty");
        free(t);
    }

    /* Text from a sandbox shown on a terminal (util.c): one line, no
     * control reaches it, a plain name shows as itself. */
    {
        static const struct {
            const char *in, *name, *text;
        } cases[] = {
            {"notes/a.txt", "notes/a.txt", "notes/a.txt"},
            {"caf\xc3\xa9 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xf0\x9f\x98\x80",
             "caf\xc3\xa9 \xf0\x9f\x98\x80"},
            {"a\nb\tc\rd", "a\\nb\\tc\\rd", "a\\nb\\tc\\rd"},
            {"\x1b]52;c;Zm9v\x07", "\\x1b]52;c;Zm9v\\x07", "\\x1b]52;c;Zm9v\\x07"},
            {"del\x7f", "del\\x7f", "del\\x7f"},
            {"c1\xc2\x9b"
             "2J",
             "c1\\xc2\\x9b2J", "c1\\xc2\\x9b2J"},
            {"nbsp\xc2\xa0", "nbsp\xc2\xa0", "nbsp\xc2\xa0"},
            {"rlo\xe2\x80\xaetxt", "rlo\\u{202e}txt", "rlo\\u{202e}txt"},
            {"bad\xff\xc3", "bad\\xff\\xc3", "bad\\xff\\xc3"},
            {"over\xc0\xaf", "over\\xc0\\xaf", "over\\xc0\\xaf"},
            {"sur\xed\xa0\x80", "sur\\xed\\xa0\\x80", "sur\\xed\\xa0\\x80"},
            {"back\\slash", "back\\\\slash", "back\\slash"},
            {"", "", ""},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
            char *n = hutch_text_escape(cases[i].in, HUTCH_ESCAPE_NAME);
            char *t = hutch_text_escape(cases[i].in, HUTCH_ESCAPE_TEXT);
            ok(n && t && !strcmp(n, cases[i].name) && !strcmp(t, cases[i].text),
               "escape %zu: as a name %s, as text %s", i, n ? n : "?", t ? t : "?");
            free(n);
            free(t);
        }
        /* The worst case fills the buffer it reserves, exactly. */
        char worst[1025];
        memset(worst, 0x01, 1024);
        worst[1024] = '\0';
        char *w = hutch_text_escape(worst, HUTCH_ESCAPE_NAME);
        ok(w && strlen(w) == 4096, "1024 control bytes escape to 4096 characters");
        free(w);
    }

    /* Where an escaped NUL cut a string cJSON read (the MCP edge and the
     * servers file refuse it, naming the place). */
    {
        static const struct {
            const char *json, *where;
        } cases[] = {
            {"{\"params\":{\"arguments\":{\"workspace\":\"a\\u0000b\"}}}",
             "params.arguments.workspace"},
            {"{\"files\":[{\"path\":\"x\"},{\"path\":\"a\\u0000\"}]}", "files[1].path"},
            {"{\"a\\u0000b\":1}", "[\"a???b\"]"},
            {"{\"odd key\":[\"\\u0000\"]}", "[\"odd key\"][0]"},
            {"\"\\u0000\"", "the value"},
            {"{\"k\":\"\\\\u0000\"}", NULL}, /* a backslash, then text */
            {"{\"k\":\"\\ufffd\"}", NULL},
            {"[1,2,{\"x\":\"plain\"}]", NULL},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
            cJSON *j = cJSON_Parse(cases[i].json);
            char where[160] = "?";
            int r = hutch_json_find_nul(j, cases[i].json, strlen(cases[i].json), where,
                                        sizeof(where));
            if (cases[i].where)
                ok(r == 1 && !strcmp(where, cases[i].where), "find_nul %s: at %s (%d)",
                   cases[i].json, where, r);
            else
                ok(r == 0 && !where[0], "find_nul %s: none (%d)", cases[i].json, r);
            cJSON_Delete(j);
        }
    }
    return tap_done();
}
