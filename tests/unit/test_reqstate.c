/* test_reqstate.c — unit tests of src/reqstate.c: requestState tokens are
 * checked for what they claim (issue 11: tampered, replayed elsewhere,
 * another principal's, expired).  TAP. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "reqstate.h"

#include "tap.h"

int main(void)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    char tok[HUTCH_REQSTATE_MAX], bad[HUTCH_REQSTATE_MAX], exe[64];
    uint64_t q = 0;
    int r;

    ok(hutch_reqstate_make("alice", "x123-4", 7, 60000, tok, sizeof(tok), &err) == 0,
       "a token (%s)", err.msg);
    ok(strchr(tok, '.') && strlen(tok) < 300, "payload.mac, short (%zu bytes)",
       strlen(tok));
    r = hutch_reqstate_check(tok, "alice", exe, sizeof(exe), &q, &err);
    ok(r == 0 && !strcmp(exe, "x123-4") && q == 7,
       "checks out for its principal: execution and question back (%d %s)", r, err.msg);

    r = hutch_reqstate_check(tok, "bob", exe, sizeof(exe), &q, &err);
    ok(r == -EACCES && strstr(err.msg, "another principal"),
       "another principal: -EACCES (%s)", err.msg);

    /* One character of the payload changed, then one of the signature. */
    snprintf(bad, sizeof(bad), "%s", tok);
    bad[3] = bad[3] == 'A' ? 'B' : 'A';
    r = hutch_reqstate_check(bad, "alice", exe, sizeof(exe), &q, &err);
    ok(r == -EBADMSG || r == -EXDEV, "an altered payload is refused (%d: %s)", r,
       err.msg);
    snprintf(bad, sizeof(bad), "%s", tok);
    bad[strlen(bad) - 2] = bad[strlen(bad) - 2] == 'A' ? 'B' : 'A';
    r = hutch_reqstate_check(bad, "alice", exe, sizeof(exe), &q, &err);
    ok(r == -EBADMSG && strstr(err.msg, "altered"),
       "an altered signature: -EBADMSG (%s)", err.msg);
    ok(hutch_reqstate_check("", "alice", exe, sizeof(exe), &q, &err) == -EBADMSG,
       "an empty token: -EBADMSG");
    ok(hutch_reqstate_check("a.b.c", "alice", exe, sizeof(exe), &q, &err) == -EBADMSG,
       "junk: -EBADMSG");
    ok(hutch_reqstate_check(NULL, "alice", exe, sizeof(exe), &q, &err) == -EBADMSG,
       "none: -EBADMSG");
    memset(bad, 'A', sizeof(bad) - 1);
    bad[sizeof(bad) - 1] = '\0';
    ok(hutch_reqstate_check(bad, "alice", exe, sizeof(exe), &q, &err) == -EBADMSG,
       "an oversized token: -EBADMSG");

    /* A token signed with another key that names another instance: what a
     * replica receives.  (Made by hand: {"v":1,"i":"other",...}.) */
    {
        /* base64url of {"v":1,"i":"other-host-1","p":"alice","e":"x","q":1,"x":9e15} */
        const char *other =
            "eyJ2IjoxLCJpIjoib3RoZXItaG9zdC0xIiwicCI6ImFsaWNlIiwiZSI6Ingi"
            "LCJxIjoxLCJ4Ijo5ZTE1fQ.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        r = hutch_reqstate_check(other, "alice", exe, sizeof(exe), &q, &err);
        ok(r == -EXDEV && strstr(err.msg, "another hutch process") &&
               strstr(err.msg, "other-host-1"),
           "another process's token: -EXDEV naming it (%s)", err.msg);
    }

    ok(hutch_reqstate_make("alice", "x1", 1, 1, tok, sizeof(tok), &err) == 0,
       "a token that expires in 1 ms");
    usleep(20 * 1000); /* waiting longer than it lives: it cannot be early */
    r = hutch_reqstate_check(tok, "alice", exe, sizeof(exe), &q, &err);
    ok(r == -ETIMEDOUT, "after its time: -ETIMEDOUT (%s)", err.msg);
    return tap_done();
}
