/*
 * client.c -- the client handle: options and their validation, the endpoint, start-up
 * (pool, a PING that proves the server accepts us, subscriber, watchdog) and shutdown.
 * Sentinel mode (sentinel_master or a redis-sentinel:// URL) hands the sentinels to
 * sentinel.c, which finds the primary before the PING.
 * The pool is pool.c; the registry, fork and thread-exit handling are lifecycle.c.
 *
 * Threads: any. Locks: none of its own.
 */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- options --------------------------------------------------------------------------- */

crd_status crd_options_init(crd_options *o)
{
    if (o == NULL)
        return CRD_INVALID_ARGUMENT;
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 6379;
    o->connect_timeout_ms = 2000;
    o->command_timeout_ms = 3000;
    o->pool_size = 2;
    o->watchdog_timeout_ms = 30000;
    o->subscription_timeout_ms = 7500;
    o->poll_interval_ms = 1000;
    o->fair_wait_timeout_ms = 300000;
    o->replica_sync = CRD_REPLICA_SYNC_AUTO;
    o->replica_sync_timeout_ms = 1000;
    o->release_defer_ms = 5;
    o->local_fifo = true;
    o->sentinel_scan_interval_ms = 1000;
    o->identity = true;
    o->identity_cmdline = true;
    return CRD_OK;
}

static char *dup_or_null(const char *s)
{
    return s == NULL ? NULL : strdup(s);
}

static crd_status validate(crd_client *c, const crd_options *o)
{
#define RANGE(f, lo)                                                                         \
    if (o->f < (lo) || o->f > CRD_DURATION_MAX_MS)                                           \
        return crd__fail(c, CRD_INVALID_ARGUMENT, #f " must be from %lld to %lld ms (got %lld)", \
                         (long long)(lo), (long long)CRD_DURATION_MAX_MS, (long long)o->f);
    RANGE(connect_timeout_ms, 1)
    RANGE(command_timeout_ms, 1)
    RANGE(watchdog_timeout_ms, 30)
    RANGE(subscription_timeout_ms, 1)
    RANGE(poll_interval_ms, 1)
    RANGE(max_wait_slice_ms, 0)
    RANGE(fair_wait_timeout_ms, 1)
    RANGE(replica_sync_timeout_ms, 1)
    RANGE(release_defer_ms, 0)
    RANGE(sentinel_scan_interval_ms, 0)
#undef RANGE
    if (o->deployment != CRD_DEPLOYMENT_STANDALONE && o->deployment != CRD_DEPLOYMENT_CLUSTER)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "deployment must be CRD_DEPLOYMENT_STANDALONE "
                         "or CRD_DEPLOYMENT_CLUSTER (got %d)", (int)o->deployment);
    if (o->sharded_pubsub != CRD_SHARDED_AUTO && o->sharded_pubsub != CRD_SHARDED_ON &&
        o->sharded_pubsub != CRD_SHARDED_OFF)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "sharded_pubsub must be CRD_SHARDED_AUTO, ON "
                         "or OFF (got %d)", (int)o->sharded_pubsub);
    if (o->replica_sync < CRD_REPLICA_SYNC_AUTO || o->replica_sync > CRD_REPLICA_SYNC_IF_ALLOWED)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "replica_sync must be CRD_REPLICA_SYNC_AUTO, "
                         "_ON, _OFF or _IF_ALLOWED (got %d)", o->replica_sync);
    if (o->pool_size < 1 || o->pool_size > 1024)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "pool_size must be from 1 to 1024 (got %d)",
                         o->pool_size);
    return CRD_OK;
}

/* Cluster mode without a redis-cluster:// url: the seeds option, else host:port. */
static crd_status setup_seeds(crd_client *c, const crd_options *o)
{
    if (c->ep.unix_path != NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "a cluster is reached over TCP: give seeds "
                         "or host and port, not a unix socket");
    if (c->ep.db != 0)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "a cluster has only database 0 (got db %d)",
                         c->ep.db);
    char err[200], one[300];
    const char *list = o->url == NULL ? o->seeds : NULL;
    if (list == NULL) {
        bool v6 = strchr(c->ep.host, ':') != NULL;
        snprintf(one, sizeof one, "%s%s%s:%d", v6 ? "[" : "", c->ep.host, v6 ? "]" : "",
                 c->ep.port);
        list = one;
    }
    crd_status st = crd__seeds_parse(list, strlen(list), &c->ep, err, sizeof err);
    if (st == CRD_NO_MEMORY)
        return crd__fail(c, st, "cannot copy the seed list");
    if (st != CRD_OK)
        return crd__fail(c, st, "bad seed list: %s", err);
    c->ep.cluster = true;
    return CRD_OK;
}

/* Sentinel mode: the sentinels (from the URL or sentinel_addrs) into *cfg, and in c->ep
 * the data nodes' credentials, database and TLS switch (no host: sentinel.c resolves
 * it). */
static crd_status setup_sentinel(crd_client *c, const crd_options *o, crd__sentinel_cfg *cfg)
{
    char err[200];
    crd_status st;
    const char *user = o->username, *pass = o->password;
    if (o->url != NULL) {
        st = crd__sentinel_url_parse(o->url, cfg, err, sizeof err);
        if (st != CRD_OK)
            return crd__fail(c, st, "bad URL: %s", err);
        /* Lettuce's rule: the URL's credentials are the data nodes', and the sentinels'
         * too unless sentinel_username / sentinel_password say otherwise. */
        user = cfg->addrs[0].username;
        pass = cfg->addrs[0].password;
        for (size_t i = 0; (o->sentinel_username || o->sentinel_password) && i < cfg->naddrs; i++) {
            crd__endpoint *s = &cfg->addrs[i];
            if (i > 0) {
                free(s->username);
                free(s->password);
            }
            s->username = s->password = NULL;
            if ((o->sentinel_username && !(s->username = strdup(o->sentinel_username))) ||
                (o->sentinel_password && !(s->password = strdup(o->sentinel_password))))
                return crd__fail(c, CRD_NO_MEMORY, "cannot copy the options");
        }
        c->ep.username = dup_or_null(user);
        c->ep.password = dup_or_null(pass);
        if (o->sentinel_username || o->sentinel_password) {
            free((char *)user);
            free((char *)pass);
        }
        if ((user && !c->ep.username) || (pass && !c->ep.password))
            return crd__fail(c, CRD_NO_MEMORY, "cannot copy the options");
    } else {
        if (o->sentinel_addrs == NULL || o->sentinel_addrs[0] == '\0')
            return crd__fail(c, CRD_INVALID_ARGUMENT, "sentinel_master is set but "
                             "sentinel_addrs is not: name at least one sentinel (host:port)");
        st = crd__sentinel_addrs_parse(o->sentinel_addrs, cfg, err, sizeof err);
        if (st != CRD_OK)
            return crd__fail(c, st, "bad sentinel_addrs: %s", err);
        cfg->master = strdup(o->sentinel_master);
        cfg->db = o->db;
        cfg->tls = o->tls;
        for (size_t i = 0; i < cfg->naddrs; i++) {
            crd__endpoint *s = &cfg->addrs[i];
            s->tls = o->tls;
            if ((o->sentinel_username && !(s->username = strdup(o->sentinel_username))) ||
                (o->sentinel_password && !(s->password = strdup(o->sentinel_password))))
                return crd__fail(c, CRD_NO_MEMORY, "cannot copy the options");
        }
        if (cfg->master == NULL)
            return crd__fail(c, CRD_NO_MEMORY, "cannot copy the options");
        c->ep.username = dup_or_null(user);
        c->ep.password = dup_or_null(pass);
        if ((user && !c->ep.username) || (pass && !c->ep.password))
            return crd__fail(c, CRD_NO_MEMORY, "cannot copy the options");
    }
    if (o->db < 0)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "db must be >= 0 (got %d)", o->db);
    c->ep.port = 0;
    c->ep.db = cfg->db;
    c->ep.tls = cfg->tls;
    return CRD_OK;
}

static crd_status setup_endpoint(crd_client *c, const crd_options *o)
{
    if (o->url != NULL) {
        char err[200];
        crd_status st = crd__url_parse(o->url, &c->ep, err, sizeof err);
        if (st != CRD_OK)
            return crd__fail(c, st, "bad URL: %s", err);
        if (o->deployment == CRD_DEPLOYMENT_CLUSTER && !c->ep.cluster)
            return setup_seeds(c, o);
        return CRD_OK;
    }
    if (o->unix_path == NULL && (o->host == NULL || o->host[0] == '\0'))
        return crd__fail(c, CRD_INVALID_ARGUMENT, "no host and no unix_path given");
    if (o->unix_path == NULL && (o->port < 1 || o->port > 65535))
        return crd__fail(c, CRD_INVALID_ARGUMENT, "port must be from 1 to 65535 (got %d)", o->port);
    if (o->db < 0)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "db must be >= 0 (got %d)", o->db);
    c->ep.host = dup_or_null(o->unix_path ? NULL : o->host);
    c->ep.port = o->port;
    c->ep.unix_path = dup_or_null(o->unix_path);
    c->ep.username = dup_or_null(o->username);
    c->ep.password = dup_or_null(o->password);
    c->ep.db = o->db;
    if ((o->unix_path == NULL && c->ep.host == NULL) || (o->unix_path && !c->ep.unix_path) ||
        (o->username && !c->ep.username) || (o->password && !c->ep.password))
        return crd__fail(c, CRD_NO_MEMORY, "cannot copy the options");
    if (o->deployment == CRD_DEPLOYMENT_CLUSTER)
        return setup_seeds(c, o);
    return CRD_OK;
}

/* Classic or sharded pub/sub (PROTOCOL.md 4.4). AUTO in a cluster probes as Java does:
 * PUBSUB SHARDNUMSUB answers on Redis 7.0+. */
static crd_status choose_pubsub(crd_client *c, const crd_options *o)
{
    bool want = o->sharded_pubsub == CRD_SHARDED_ON;
    if (o->sharded_pubsub == CRD_SHARDED_AUTO && c->cluster != NULL) {
        crd_status st =
            crd__call_words(c, "probing sharded pub/sub", NULL, 2, "PUBSUB", "SHARDNUMSUB");
        if (st == CRD_IO || st == CRD_CLOSED || st == CRD_NO_MEMORY)
            return st;
        want = st == CRD_OK; /* an error: an older server, classic it is */
        crd__ok(c);
    } else if (want) {
        crd_status st = crd__call_words(c, "sharded pub/sub (sharded_pubsub ON) needs Redis 7.0+",
                                        NULL, 2, "PUBSUB", "SHARDNUMSUB");
        if (st != CRD_OK)
            return st;
    }
    c->sharded = want;
    c->publish = want ? "SPUBLISH" : "PUBLISH";
    return CRD_OK;
}

/* ---- lifecycle -------------------------------------------------------------------------- */

/* TLS when the URL says rediss://, or without a URL when the options say tls: one
 * context for the client's life, its files read once here. */
static crd_status setup_tls(crd_client *c, const crd_options *o)
{
    /* A URL says it all (redis:// is plaintext even with tls set); without one, tls. */
    if (!c->ep.tls && (o->url != NULL || !o->tls))
        return CRD_OK;
    bool sentinel = crd__topology_sentinel(c);
    if (c->ep.unix_path != NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "TLS is for TCP connections: Redis serves "
                         "its unix socket in plaintext (drop tls, or connect to the TLS port)");
    c->ep.tls = true;
    crd__tls_config cfg = {o->tls_ca_file, o->tls_ca_dir, o->tls_cert_file, o->tls_key_file,
                           o->tls_insecure_skip_verify};
    char err[400];
    crd_status st = crd__tls_ctx_new(&cfg, &c->tls, err, sizeof err);
    if (st != CRD_OK)
        return crd__fail(c, st, "%s", err);
    c->tls_verify = !o->tls_insecure_skip_verify;
    /* Sentinel mode without a configured name checks each connection's own host. */
    if (o->tls_server_name == NULL && sentinel)
        return CRD_OK;
    c->tls_name = strdup(o->tls_server_name != NULL ? o->tls_server_name : c->ep.host);
    if (c->tls_name == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot copy the options");
    return CRD_OK;
}

static crd_status start(crd_client *c, const crd_options *opts)
{
    crd_status st = validate(c, opts);
    bool sentinel = crd__url_is_sentinel(opts->url) ||
                    (opts->url == NULL && opts->sentinel_master != NULL);
    crd__sentinel_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    if (st == CRD_OK)
        st = sentinel ? setup_sentinel(c, opts, &cfg) : setup_endpoint(c, opts);
    if (st == CRD_OK)
        st = crd__topology_init(c, sentinel ? &cfg : NULL, opts);
    crd__sentinel_cfg_clear(&cfg);
    if (st == CRD_OK)
        st = setup_tls(c, opts);
    if (st == CRD_OK)
        st = crd__topology_start(c); /* sentinel mode: find the primary */
    if (st != CRD_OK)
        return st;
    if (crd__topology_sentinel(c)) {
        c->primary_at = crd__endpoint_peek;
        c->primary_gen = crd__topology_gen;
    }
    c->wake_loop = crd__pubsub_loop_notify;
    if ((st = crd__engine_start(c)) != CRD_OK || (st = crd__pool_init(c)) != CRD_OK)
        return st;

    /* Prove the server is there and accepts us (AUTH, SELECT, then PING for servers that
     * require a password we did not give). */
    st = crd__call_words(c, "PING refused", NULL, 1, "PING");
    if (st == CRD_SERVER && strstr(crd_client_errmsg(c), "NOAUTH") != NULL) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", crd_client_errmsg(c));
        st = crd__fail(c, CRD_AUTH, "%s", msg);
    }
    if (st != CRD_OK)
        return st;
    /* What the deployment allows (deploy.c): the eviction policy, and WAIT when replica
     * sync is on. Advice only: nothing here fails the start. */
    crd__deploy_probe(c, crd__sync_on(c));
    if ((st = choose_pubsub(c, opts)) != CRD_OK)
        return st;
    if ((st = crd__pubsub_start(c)) != CRD_OK)
        return st;
    if ((st = crd__ident_init(c, opts)) != CRD_OK)
        return st;
    return crd__watchdog_start(c);
}

crd_status crd_client_new(const crd_options *opts, crd_client **out)
{
    if (out == NULL)
        return crd__fail(NULL, CRD_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    crd_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return crd__fail(NULL, CRD_NO_MEMORY, "cannot allocate a client");
    crd_options defaults;
    if (opts == NULL) {
        crd_options_init(&defaults);
        opts = &defaults;
    }
    c->opts = *opts;
    /* Strings of opts are borrowed: only ep keeps copies; drop the borrowed pointers. */
    c->opts.url = c->opts.host = c->opts.unix_path = c->opts.username = c->opts.password = NULL;
    c->opts.tls_ca_file = c->opts.tls_ca_dir = c->opts.tls_cert_file = c->opts.tls_key_file =
        c->opts.tls_server_name = NULL;
    c->opts.seeds = NULL;
    c->publish = "PUBLISH";
    c->opts.sentinel_addrs = c->opts.sentinel_master = c->opts.sentinel_username =
        c->opts.sentinel_password = NULL;
    c->opts.identity_label = NULL; /* copied by ident.c */
    crd__uuid_v4(c->uuid);
    c->pid = getpid();
    atomic_init(&c->closed, false);
    if (crd__holds_init(c) != CRD_OK || crd__gates_init(c) != CRD_OK ||
        crd__offload_init(c) != CRD_OK || crd__deploy_init(c) != CRD_OK) {
        crd__deploy_free(c);
        crd__gates_free(c);
        crd__holds_free(c);
        free(c);
        return crd__fail(NULL, CRD_NO_MEMORY, "cannot allocate a client");
    }
    crd_status st = start(c, opts);
    if (st != CRD_OK) {
        snprintf(c->errmsg_init, sizeof c->errmsg_init, "%s", crd_client_errmsg(c));
        c->failed = true;
        *out = c;
        return st;
    }
    crd__lifecycle_register(c);
    crd__ok(c);
    *out = c;
    return CRD_OK;
}

void crd_client_free(crd_client *c)
{
    if (c == NULL)
        return;
    if (!c->failed)
        crd__lifecycle_unregister(c);
    if (!c->failed && c->pid == getpid())
        crd__loop_free(c); /* pending event-loop operations end with CRD_CLOSED */
    crd__offload_stop(c);
    crd__watchdog_stop(c);
    if (!c->failed && c->opts.release_on_close && c->pid == getpid())
        crd__lifecycle_release_all(c);
    crd__ident_stop(c); /* the identity record goes with the client */
    atomic_store(&c->closed, true);
    crd__gates_wake_all(c);
    crd__topology_stop(c);
    crd__pubsub_stop(c);
    crd__engine_stop(c); /* what is still queued or waited for ends with CRD_CLOSED */
    crd__pubsub_free(c);
    crd__pool_free(c);
    crd__engine_free(c);
    crd__watchdog_free(c);
    crd__ident_free(c);
    crd__holds_free(c);
    crd__gates_free(c);
    crd__topology_free(c);
    crd__deploy_free(c);
    crd__endpoint_clear(&c->ep);
    crd__tls_ctx_free(c->tls);
    free(c->tls_name);
    free(c);
}

const char *crd_client_id(const crd_client *c) { return c == NULL ? "" : c->uuid; }
