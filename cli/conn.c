/*
 * conn.c -- raw hiredis connections for the commands that read what the public API does
 * not offer (status, watch, list): the lock's holders, its Redis type, pub/sub. They are
 * opened from the same URL forms as the library's (its own parser, crd__url_parse), with
 * AUTH and SELECT. With a redis-cluster:// URL, status and watch go to the primary
 * serving the name's slot (asked of the seeds with CLUSTER SLOTS); list scans only the
 * first seed. Main thread only.
 */
#include "cli.h"

#include <string.h>

int cli_endpoint(const char *cmd, const global_opts *g, crd__endpoint *ep)
{
    char why[256];
    crd_status st = crd__url_parse(g->url, ep, why, sizeof why);
    if (st == CRD_OK)
        return 0;
    if (st == CRD_NO_MEMORY)
        snprintf(why, sizeof why, "out of memory");
    char shown[512];
    return cli_usage_error(cmd, "bad --url '%s': %s", cli_redact_url(g->url, shown, sizeof shown),
                           why);
}

/* A redis-cluster:// URL: replaces ep's host and port with the primary serving name's
 * slot, read from the first seed that answers CLUSTER SLOTS. */
static int route_to_slot(const char *cmd, const char *raw_url, const char *name,
                         crd__endpoint *ep)
{
    int slot = crd__key_slot(name, strlen(name));
    for (int i = 0; i < ep->nseeds; i++) {
        crd__endpoint one = *ep;
        one.host = ep->seeds[i].host;
        one.port = ep->seeds[i].port;
        one.cluster = false;
        struct timeval ctv = {2, 0};
        redisContext *c = redisConnectWithTimeout(one.host, one.port, ctv);
        if (c == NULL || c->err) {
            redisFree(c);
            continue;
        }
        redisReply *r = NULL;
        if (ep->password != NULL)
            r = ep->username != NULL ? redisCommand(c, "AUTH %s %s", ep->username, ep->password)
                                     : redisCommand(c, "AUTH %s", ep->password);
        freeReplyObject(r);
        r = redisCommand(c, "CLUSTER SLOTS");
        for (size_t k = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
            redisReply *e = r->element[k];
            if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || e->element[2]->elements < 2 ||
                slot < e->element[0]->integer || slot > e->element[1]->integer)
                continue;
            const redisReply *h = e->element[2]->element[0];
            char *host = strdup(h->len > 0 ? h->str : one.host);
            if (host == NULL)
                break;
            free(ep->host);
            ep->host = host;
            ep->port = (int)e->element[2]->element[1]->integer;
            freeReplyObject(r);
            redisFree(c);
            return 0;
        }
        freeReplyObject(r);
        redisFree(c);
    }
    char shown[512];
    cli_error(cmd, "no cluster node of %s said which primary serves slot %d",
              cli_redact_url(raw_url, shown, sizeof shown), slot);
    return EXIT_UNAVAILABLE;
}

int cli_name_and_endpoint(const char *cmd, const global_opts *g, const char *name,
                          crd__endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    if (name == NULL)
        return cli_usage_error(cmd, "missing lock NAME");
    if (*name == '\0')
        return cli_usage_error(cmd, "lock NAME is empty");
    int rc = cli_endpoint(cmd, g, ep);
    if (rc == 0 && ep->cluster)
        rc = route_to_slot(cmd, g->url, name, ep);
    return rc;
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
