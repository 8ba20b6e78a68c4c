/* http_ops.c — the operator's endpoints of `hutch serve --http`, beside
 * /mcp.  GET (and HEAD) only, other methods 405:
 *   /healthz  200 "ok": the process answers.  No token.
 *   /readyz   200 when hutch can run code now (the policy can be served and
 *             its executor's probe passes), else 503; a JSON body with the
 *             executor, the upstreams' and the pools' states.  No token:
 *             load balancers and orchestrators' probes send none.  Without
 *             a valid token the body leaves out free-text error messages
 *             (they may name paths and hosts); states and names stay.
 *   /metrics  Prometheus text format 0.0.4 (metrics.c).  The same bearer
 *             token as /mcp when one is set (the server's or a principal's):
 *             counts say what agents do, and Prometheus sends a bearer token
 *             from its scrape config.  No separate metrics token: one
 *             secret fewer to manage.
 * The Host/Origin checks apply to all of them, as to /mcp (http.c makes
 * them before it comes here).
 *
 * No state and no lock of its own: called on the connection's thread.
 *
 * Not here: what the bodies say (metrics.c); the token (http_auth.c). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "caps.h"
#include "http_int.h"
#include "job.h"
#include "metrics.h"

enum MHD_Result http_on_ops(struct http_server *srv, struct MHD_Connection *conn,
                            const char *url, const char *method)
{
    static const char *const allow[] = {"Allow", "GET, HEAD", NULL};
    static const char *const nocache[] = {"Cache-Control", "no-store", NULL};
    char who[HUTCH_MAX_PRINCIPAL_NAME + 1];
    int given = 0, authed = http_authorized(srv, conn, who, sizeof(who), &given);
    /* What metrics.c reads of the execution layer (it does not call it). */
    struct hutch_metrics_source jobs = {0};

    if (srv->jobs)
        jobs = hutch_jobs_metrics_source(srv->jobs);

    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return http_reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                               "Method Not Allowed: use GET\n", allow);
    if (strcmp(url, "/healthz") == 0)
        return http_reply_text(conn, MHD_HTTP_OK, "ok\n", nocache);
    if (strcmp(url, "/readyz") == 0) {
        int ready = 0;
        cJSON *o = hutch_metrics_ready(srv->jobs ? &jobs : NULL, srv->upstreams, authed,
                                       &ready);
        char *body = o ? cJSON_PrintUnformatted(o) : NULL;
        cJSON_Delete(o);
        if (!body)
            return MHD_NO;
        return http_reply(conn, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                          "application/json", body, strlen(body), MHD_RESPMEM_MUST_FREE,
                          nocache);
    }
    /* /metrics */
    if (!authed) {
        char msg[96];
        snprintf(msg, sizeof(msg), "%s\n", http_unauthorized_msg(given));
        return http_reply(conn, MHD_HTTP_UNAUTHORIZED, "text/plain; charset=utf-8", msg,
                          strlen(msg), MHD_RESPMEM_MUST_COPY,
                          http_www_authenticate(given));
    }
    {
        struct hutch_buf b;
        size_t len = 0;
        char *body;
        hutch_buf_init(&b, HUTCH_METRICS_MAX_BYTES);
        if (hutch_metrics_render(srv->jobs ? &jobs : NULL, srv->upstreams, &b) < 0) {
            hutch_buf_free(&b);
            return http_reply_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                   "Internal Server Error: the metrics do not fit\n",
                                   NULL);
        }
        body = hutch_buf_steal(&b, &len);
        if (!body)
            return MHD_NO;
        return http_reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                          body, len, MHD_RESPMEM_MUST_FREE, nocache);
    }
}

int http_is_ops_path(const char *url)
{
    return !strcmp(url, "/healthz") || !strcmp(url, "/readyz") ||
           !strcmp(url, "/metrics");
}
