/*
 * conn.c -- raw connections for the commands that read what the public API does not
 * offer (status, watch, list): the lock's holders, its Redis type, pub/sub. They run on
 * the library's own transport (crd__conn: TCP or unix socket, TLS for rediss://, AUTH,
 * SELECT), opened from the same URL and TLS options as the library's client; on a
 * cluster (redis-cluster://) to the primary serving the name's slot, as the library's
 * slot map says (list scans the first seed only); with redis-sentinel:// to the primary
 * the sentinels name when the command starts (watch does not follow a later failover).
 * hiredis parses the replies. Main thread only.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

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

/* A cluster node's address with the client's credentials, database and TLS. */
static crd__endpoint node_ep(const crd_client *c, const crd__endpoint *node)
{
    crd__endpoint ep = *node;
    ep.username = c->ep.username;
    ep.password = c->ep.password;
    ep.db = c->ep.db;
    ep.tls = c->ep.tls;
    return ep;
}

int cli_reconnect_to(const char *cmd, cli_rconn *c, const crd__endpoint *node)
{
    crd__conn_close(&c->conn);
    crd__endpoint ep = node_ep(c->client, node);
    crd_status st = crd__conn_open(c->client, &ep, &c->conn);
    if (st != CRD_OK) {
        char what[300];
        snprintf(what, sizeof what, "cannot connect to %s:%d", node->host, node->port);
        cli_report(cmd, what, st, c->client);
        return cli_exit_for_status(st);
    }
    return 0;
}

int cli_connect(const char *cmd, const global_opts *g, const char *name, cli_rconn *out)
{
    memset(out, 0, sizeof *out);
    int rc = cli_make_client(g, cmd, NULL, &out->client);
    if (rc != 0)
        return rc;
    /* The node that serves name: on a cluster the primary of its slot (the library's
     * own slot map chooses it), else the one server. */
    crd__endpoint ep = out->client->ep;
    crd__pool *routed = NULL;
    if (name != NULL && out->client->cluster != NULL &&
        (routed = crd__pool_for(out->client, name, strlen(name))) != NULL)
        ep = node_ep(out->client, crd__pool_ep(routed));
    /* Standalone or Sentinel: the primary (resolved through the sentinels in Sentinel
     * mode); a cluster: the node routed to above. */
    crd_status st = routed != NULL ? crd__conn_open(out->client, &ep, &out->conn)
                                   : crd__conn_open_primary(out->client, &out->conn);
    if (st != CRD_OK) {
        char what[600], shown[512];
        snprintf(what, sizeof what, "cannot connect to %s",
                 cli_redact_url(g->url, shown, sizeof shown));
        cli_report(cmd, what, st, out->client);
        cli_close(out);
        return cli_exit_for_status(st);
    }
    return 0;
}

void cli_close(cli_rconn *c)
{
    crd__conn_close(&c->conn);
    crd_client_free(c->client);
    c->client = NULL;
}

redisReply *cli_cmd(cli_rconn *c, int argc, const char **argv, const size_t *lens)
{
    redisReply *r = NULL;
    if (crd__conn_command(c->client, &c->conn, argc, argv, lens, &r) != CRD_OK)
        return NULL;
    return r;
}

bool cli_append(cli_rconn *c, int argc, const char **argv, const size_t *lens)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    const char *why = NULL;
    bool ok = c->conn.ctx != NULL && !c->conn.broken &&
              crd__resp_append(&buf, &len, &cap, argc, argv, lens) &&
              crd__conn_send(&c->conn, buf, len, &why);
    free(buf);
    if (!ok && c->conn.ctx != NULL) {
        c->conn.broken = true;
        snprintf(c->conn.ctx->errstr, sizeof c->conn.ctx->errstr, "%s",
                 why != NULL ? why : "sending failed");
    }
    return ok;
}

int cli_get_reply(cli_rconn *c, redisReply **out)
{
    *out = NULL;
    if (c->conn.ctx == NULL || c->conn.broken)
        return REDIS_ERR;
    int rc = crd__conn_read(&c->conn, out);
    if (rc != REDIS_OK)
        c->conn.broken = true;
    return rc;
}

int cli_take_reply(cli_rconn *c, redisReply **out)
{
    void *r = NULL;
    int rc = redisGetReplyFromReader(c->conn.ctx, &r);
    *out = r;
    return rc;
}

int cli_fd(const cli_rconn *c) { return c->conn.ctx != NULL ? c->conn.ctx->fd : -1; }

bool cli_buffered(const cli_rconn *c) { return crd__conn_buffered(&c->conn); }

int cli_fill(cli_rconn *c) { return crd__conn_fill(&c->conn); }

const char *cli_rconn_err(const cli_rconn *c)
{
    if (c->conn.ctx != NULL && c->conn.ctx->errstr[0] != '\0')
        return c->conn.ctx->errstr;
    const char *m = crd_client_errmsg(c->client);
    return m != NULL && *m ? m : "connection closed";
}
