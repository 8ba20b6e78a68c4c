/* test_approval.c — unit tests of src/approval.c: hutch's requests to an
 * MCP client and the approval question built on them (every argument's
 * head and tail shown, what was left out said, the whole bounded).  The "client" is a
 * send function that answers in place (through hutch_asks_response), so
 * no test waits for anything but a budget nobody will meet.  TAP. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "approval.h"
#include "caps.h"
#include "govern.h"
#include "wire.h"

#include "tap.h"

struct client {
    struct hutch_asks *a;
    const char *answer; /* the result (JSON) or NULL: no answer */
    const char *error;  /* an error message instead */
    int close_session;  /* the session ends instead of an answer */
    int wrong_id;       /* answer with another id first */
    cJSON *seen;        /* the last request */
};

static int client_send(void *arg, cJSON *msg)
{
    struct client *c = arg;
    cJSON *reply;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");

    cJSON_Delete(c->seen);
    c->seen = msg;
    if (c->close_session) {
        hutch_asks_close(c->a);
        return 0;
    }
    if (c->wrong_id) {
        cJSON *w =
            cJSON_Parse("{\"jsonrpc\":\"2.0\",\"id\":\"hutch-ask-999\",\"result\":{}}");
        ok(hutch_asks_response(c->a, w) == 0,
           "a response to nothing we asked is ignored");
        cJSON_Delete(w);
    }
    if (!c->answer && !c->error)
        return 0;
    reply = cJSON_CreateObject();
    cJSON_AddStringToObject(reply, "jsonrpc", "2.0");
    cJSON_AddItemToObject(reply, "id", cJSON_Duplicate(id, 1));
    if (c->error) {
        cJSON *e = cJSON_AddObjectToObject(reply, "error");
        cJSON_AddNumberToObject(e, "code", -32601);
        cJSON_AddStringToObject(e, "message", c->error);
    } else {
        cJSON_AddItemToObject(reply, "result", cJSON_Parse(c->answer));
    }
    ok(hutch_asks_response(c->a, reply) == 1,
       "the client's response reaches its waiter");
    cJSON_Delete(reply);
    return 0;
}

static int ask(struct client *c, unsigned ms, char *why, size_t n)
{
    cJSON *args = cJSON_Parse("{\"to\": \"bob@example.com\"}");
    int r = hutch_asks_approval(c->a, client_send, c, "mail.send", "Send it?", args, ms,
                                why, n);
    cJSON_Delete(args);
    return r;
}

/* The message of the question about mail.send with `args` (JSON). */
static char *message_for(const char *json)
{
    cJSON *args = cJSON_Parse(json);
    cJSON *p = hutch_approval_params("mail.send", "Send it?", args);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(p, "message");
    char *r = cJSON_IsString(m) ? strdup(m->valuestring) : NULL;
    cJSON_Delete(p);
    cJSON_Delete(args);
    return r;
}

/* A JSON object {"k0": "xxx…", …} of n arguments of `size` bytes each, then
 * `last` (a "key": value member, or ""). */
static char *many_args(int n, size_t size, const char *last)
{
    size_t cap = (size_t)n * (size + 16) + strlen(last) + 8, o = 0;
    char *s = malloc(cap);
    o += (size_t)snprintf(s + o, cap - o, "{");
    for (int i = 0; i < n; i++) {
        o += (size_t)snprintf(s + o, cap - o, "%s\"k%d\":\"", i ? "," : "", i);
        memset(s + o, 'x', size);
        o += size;
        s[o++] = '"';
    }
    snprintf(s + o, cap - o, "%s%s}", n && *last ? "," : "", last);
    return s;
}

/* The number in "…[N bytes left out]…" (the first), or -1. */
static long left_out(const char *m)
{
    const char *p = strstr(m, "…[");
    return p ? strtol(p + strlen("…["), NULL, 10) : -1;
}

static void question_text(void)
{
    char *m, *j, big[3200];
    size_t bound = strlen("Send it?") + 200 + HUTCH_APPROVAL_ARGS_TEXT * 5;

    /* The finding: `to` after 400 harmless bytes was cut away. */
    j = many_args(1, 400, "\"to\":\"attacker@evil.example\"");
    m = message_for(j);
    ok(m && strstr(m, "  to: \"attacker@evil.example\"\n"),
       "an argument after 400 bytes of another is shown");
    ok(m && strstr(m, "  k0: \"xxxxxxxx") && !strstr(m, "left out"),
       "and the first one whole, both within the budget");
    free(m);
    free(j);

    /* One long argument: its head and its tail, and the count between. */
    {
        size_t o = (size_t)snprintf(big, sizeof(big), "{\"body\":\"");
        while (o < 3000)
            o += (size_t)snprintf(big + o, sizeof(big) - o, "harmless ");
        snprintf(big + o, sizeof(big) - o, "to=attacker@evil.example\"}");
    }
    m = message_for(big);
    {
        /* "body: " + the JSON string: the line the budget applies to. */
        long line =
            (long)strlen("body: ") + (long)strlen(big) - (long)strlen("{\"body\":}");
        ok(m && strstr(m, "to=attacker@evil.example\"\n") &&
               strstr(m, "  body: \"harmless"),
           "one long argument: its head and its tail (where the address is)");
        ok(m && left_out(m) == line - HUTCH_APPROVAL_ARGS_TEXT,
           "and exactly how much between was left out (%ld of %ld bytes)",
           m ? left_out(m) : -1, line);
    }
    free(m);

    /* More arguments than can be shown: each shown one has its head and
     * tail, the rest are counted, the whole is bounded. */
    j = many_args(30, 500, "\"to\":\"attacker@evil.example\"");
    m = message_for(j);
    ok(m && strstr(m, "… and 10 more arguments (") && strstr(m, "bytes) left out"),
       "31 arguments: the ones past %d are counted",
       HUTCH_APPROVAL_ARGS_TEXT / HUTCH_APPROVAL_ARG_MIN);
    ok(m && strstr(m, "  k0: \"xxx") && strstr(m, "  k20: \"xxx") && !strstr(m, "k21:"),
       "and each of the first %d shows its head and its tail",
       HUTCH_APPROVAL_ARGS_TEXT / HUTCH_APPROVAL_ARG_MIN);
    ok(m && strlen(m) < bound, "the question stays bounded (%zu bytes)",
       m ? strlen(m) : 0);
    free(m);
    free(j);

    /* A megabyte in one argument: bounded, and the count is exact. */
    j = many_args(1, 1u << 20, "\"to\":\"attacker@evil.example\"");
    m = message_for(j);
    ok(m && strlen(m) < bound && strstr(m, "  to: \"attacker@evil.example\""),
       "a 1 MiB argument beside it: bounded (%zu bytes), the other shown",
       m ? strlen(m) : 0);
    ok(m && left_out(m) ==
                (long)strlen("k0: \"\"") + (1L << 20) - HUTCH_APPROVAL_ARGS_TEXT / 2,
       "and what was left out of the big one is said exactly (%ld)",
       m ? left_out(m) : -1);
    free(m);
    free(j);

    /* What could mislead the approver is escaped; a cut keeps UTF-8 whole. */
    m = message_for("{\"to\":\"moc.live@\\u202ebob\",\"c1\":\"\\u009b2J\",\"esc\":"
                    "\"\\u001b]52;\"}");
    ok(m && strstr(m, "moc.live@\\u{202e}bob") && strstr(m, "\\xc2\\x9b2J") &&
           strstr(m, "esc: \"\\u001b]52;\"") && !strstr(m, "\xe2\x80\xae") &&
           !strstr(m, "\xc2\x9b"),
       "a right-to-left override, C1 and escape characters are escaped");
    free(m);
    {
        char u[3200];
        size_t o = (size_t)snprintf(u, sizeof(u), "{\"t\":\"");
        for (int i = 0; i < 1500; i++)
            o += (size_t)snprintf(u + o, sizeof(u) - o, "\xc3\xa9");
        snprintf(u + o, sizeof(u) - o, "\"}");
        m = message_for(u);
        ok(m && hutch_utf8_valid(m, strlen(m)) && strstr(m, "left out"),
           "a cut inside two-byte characters keeps the text valid UTF-8");
        free(m);
    }
    m = message_for("{}");
    ok(m && strstr(m, "mail.send with no arguments."), "no arguments: said so");
    free(m);
    m = message_for("{\"a b\\n\":1}");
    ok(m && strstr(m, "  \"a b\\n\": 1\n"),
       "a key that is not a name is shown as JSON");
    free(m);
}

int main(void)
{
    struct client c = {0};
    char why[256];
    int r;

    question_text();

    c.a = hutch_asks_new();
    c.answer = "{\"action\": \"accept\", \"content\": {\"approve\": true}}";
    r = ask(&c, 60000, why, sizeof(why));
    ok(r == HUTCH_ANSWER_APPROVE, "accept with approve true: approved (%d)", r);
    {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(c.seen, "params");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(p, "message");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "requestedSchema");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c.seen, "id");
        ok(!strcmp(cJSON_GetObjectItemCaseSensitive(c.seen, "method")->valuestring,
                   "elicitation/create"),
           "the request is elicitation/create");
        ok(cJSON_IsString(id) && !strncmp(id->valuestring, "hutch-ask-", 10),
           "under an id of hutch's own (%s)",
           cJSON_IsString(id) ? id->valuestring : "?");
        ok(cJSON_IsString(m) && strstr(m->valuestring, "Send it?") &&
               strstr(m->valuestring, "mail.send") &&
               strstr(m->valuestring, "bob@example.com"),
           "its message has the question, the tool and the arguments");
        const cJSON *ap = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(s, "properties"), "approve");
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(ap, "type");
        ok(cJSON_IsString(ty) && !strcmp(ty->valuestring, "boolean") &&
               cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(s, "required")) == 1,
           "its schema asks for one required boolean, approve");
    }

    c.answer = "{\"action\": \"accept\", \"content\": {\"approve\": false}}";
    ok(ask(&c, 60000, why, sizeof(why)) == HUTCH_ANSWER_DECLINE,
       "accept with approve false: declined");
    c.answer = "{\"action\": \"decline\"}";
    ok(ask(&c, 60000, why, sizeof(why)) == HUTCH_ANSWER_DECLINE, "decline: declined");
    c.answer = "{\"action\": \"cancel\"}";
    ok(ask(&c, 60000, why, sizeof(why)) == HUTCH_ANSWER_CANCEL, "cancel: cancelled");
    c.answer = "{\"action\": \"maybe\"}";
    r = ask(&c, 60000, why, sizeof(why));
    ok(r < 0 && strstr(why, "action"), "an unknown action: not an answer (%s)", why);
    c.wrong_id = 1;
    c.answer = "{\"action\": \"accept\", \"content\": {\"approve\": true}}";
    ok(ask(&c, 60000, why, sizeof(why)) == HUTCH_ANSWER_APPROVE,
       "and the right one still arrives");
    c.wrong_id = 0;

    c.answer = NULL;
    c.error = "Method not found";
    r = ask(&c, 60000, why, sizeof(why));
    ok(r == -EREMOTEIO && strstr(why, "Method not found"),
       "a client that answers with an error: cannot be asked (%s)", why);
    c.error = NULL;

    /* Nobody answers: the budget is all the test waits for. */
    ok(ask(&c, 50, why, sizeof(why)) == HUTCH_ANSWER_TIMEOUT,
       "no answer within the time given: timeout");

    c.close_session = 1;
    r = ask(&c, 60000, why, sizeof(why));
    ok(r == -ECONNRESET, "the session ends while it waits: -ECONNRESET (%d: %s)", r,
       why);
    r = ask(&c, 60000, why, sizeof(why));
    ok(r == -ECONNRESET, "and later questions fail at once (%d)", r);

    cJSON_Delete(c.seen);
    hutch_asks_free(c.a);
    return tap_done();
}
