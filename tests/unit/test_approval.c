/* test_approval.c — unit tests of src/approval.c: hutch's requests to an
 * MCP client and the approval question built on them.  The "client" is a
 * send function that answers in place (through hutch_asks_response), so
 * no test waits for anything but a budget nobody will meet.  TAP. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "approval.h"
#include "govern.h"

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

int main(void)
{
    struct client c = {0};
    char why[256];
    int r;

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
