/*
 * conn.c -- raw hiredis connections for the commands that read what the public API does
 * not offer (status, watch, list): the lock's holders, its Redis type, pub/sub. They are
 * opened from the same URL forms as the library's (its own parser, crd__url_parse), with
 * AUTH and SELECT. A redis-sentinel:// URL resolves to the primary the sentinels name
 * when the command starts (status, list); watch keeps that primary and does not follow
 * a later failover. Main thread only.
 */
#include "cli.h"

#include <string.h>

/* A redis-sentinel:// URL: the primary the sentinels name now, found by the library
 * (a short-lived client: the same discovery, ROLE check and credentials rules). */
static int sentinel_endpoint(const char *cmd, const global_opts *g, crd__endpoint *ep)
{
    char why[256];
    crd__sentinel_cfg cfg;
    crd_status st = crd__sentinel_url_parse(g->url, &cfg, why, sizeof why);
    crd__sentinel_cfg_clear(&cfg);
    char shown[512];
    cli_redact_url(g->url, shown, sizeof shown);
    if (st != CRD_OK)
        return cli_usage_error(cmd, "bad --url '%s': %s", shown,
                               st == CRD_NO_MEMORY ? "out of memory" : why);
    crd_options o;
    crd_options_init(&o);
    o.url = g->url;
    o.pool_size = 1;
    o.replica_sync = CRD_REPLICA_SYNC_OFF;
    crd_client *c = NULL;
    st = crd_client_new(&o, &c);
    uint64_t gen = 0;
    if (st == CRD_OK)
        st = crd__endpoint_for_connect(c, ep, &gen);
    if (st != CRD_OK) {
        cli_error(cmd, "cannot find the primary through %s: %s", shown, crd_client_errmsg(c));
        crd_client_free(c);
        return cli_exit_for_status(st);
    }
    crd_client_free(c);
    return 0;
}

int cli_endpoint(const char *cmd, const global_opts *g, crd__endpoint *ep)
{
    char why[256];
    if (crd__url_is_sentinel(g->url))
        return sentinel_endpoint(cmd, g, ep);
    crd_status st = crd__url_parse(g->url, ep, why, sizeof why);
    if (st == CRD_OK)
        return 0;
    if (st == CRD_NO_MEMORY)
        snprintf(why, sizeof why, "out of memory");
    char shown[512];
    return cli_usage_error(cmd, "bad --url '%s': %s", cli_redact_url(g->url, shown, sizeof shown),
                           why);
}

int cli_name_and_endpoint(const char *cmd, const global_opts *g, const char *name,
                          crd__endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    if (name == NULL)
        return cli_usage_error(cmd, "missing lock NAME");
    if (*name == '\0')
        return cli_usage_error(cmd, "lock NAME is empty");
    return cli_endpoint(cmd, g, ep);
}

/* AUTH (when the URL has a password) and SELECT (when it names a database other than
 * 0). Returns false with a line printed when the server refuses either. */
static bool auth_and_select(const char *cmd, redisContext *c, const crd__endpoint *ep,
                            const char *shown)
{
    const char *argv[3];
    size_t lens[3];
    char dbbuf[16];
    for (int step = 0; step < 2; step++) {
        int n = 0;
        if (step == 0 && ep->password != NULL) {
            argv[n++] = "AUTH";
            if (ep->username != NULL)
                argv[n++] = ep->username;
            argv[n++] = ep->password;
        } else if (step == 1 && ep->db != 0) {
            snprintf(dbbuf, sizeof dbbuf, "%d", ep->db);
            argv[n++] = "SELECT";
            argv[n++] = dbbuf;
        }
        if (n == 0)
            continue;
        for (int i = 0; i < n; i++)
            lens[i] = strlen(argv[i]);
        redisReply *r = redisCommandArgv(c, n, argv, lens);
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            cli_error(cmd, "cannot connect to %s: %s refused: %s", shown, argv[0],
                      r ? r->str : c->errstr);
            freeReplyObject(r);
            return false;
        }
        freeReplyObject(r);
    }
    return true;
}

redisContext *cli_connect(const char *cmd, const char *raw_url, const crd__endpoint *ep)
{
    char shown[512];
    cli_redact_url(raw_url, shown, sizeof shown);
    struct timeval ctv = {2, 0}, tv = {3, 0};
    redisContext *c = ep->unix_path ? redisConnectUnixWithTimeout(ep->unix_path, ctv)
                                    : redisConnectWithTimeout(ep->host, ep->port, ctv);
    if (c == NULL || c->err) {
        cli_error(cmd, "cannot connect to %s: %s", shown, c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (!auth_and_select(cmd, c, ep, shown)) {
        redisFree(c);
        return NULL;
    }
    return c;
}
