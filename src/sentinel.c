/*
 * sentinel.c -- where the primary is, and how many replicas must acknowledge a write.
 *
 * Standalone clients have one endpoint (c->ep) and nothing here does any I/O for them
 * except the replica count of replica sync. In sentinel mode this file owns the
 * current primary: it asks the sentinels in turn (SENTINEL get-master-addr-by-name,
 * starting with the one that answered last), checks that the node named says ROLE
 * master, and publishes the result with a generation number. Connections remember the
 * generation they were opened under (crd__conn.topo_gen); pool.c, pubsub.c and
 * watchdog.c reopen a connection whose generation is old, so after a switch every
 * connection moves to the new primary on its next use (the subscriber checks every
 * 250 ms, then resubscribes and wakes every waiter to re-check).
 *
 * What triggers a new resolution: a +switch-master message (a listener thread of this
 * file keeps one sentinel connection subscribed), a READONLY reply (crd__call), and a
 * failed connection to the primary (pool, watchdog, subscriber). One resolution runs at
 * a time; a thread that asks while one is running waits for its result instead of
 * asking the sentinels again.
 *
 * Replica sync (PROTOCOL.md 11): crd__sync_replicas() is the one rule for WAIT's replica
 * count: the replicas the primary lists in ROLE, read at resolution and again when the
 * count is older than 10 s; the timeout is replica_sync_timeout_ms.
 *
 * Threads: callers, the watchdog, the subscriber, and the listener thread. Lock: t->mu
 * (a leaf, taken after every other lock of internal.h; never held during I/O).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPLICAS_MAX_AGE_MS 10000

struct crd__topology {
    bool sentinel;          /* sentinel mode (immutable after init) */
    crd__sentinel_cfg cfg;  /* the sentinels and the master name */
    bool sync;              /* replica sync on */
    int64_t sync_timeout_ms;

    pthread_mutex_t mu;
    pthread_cond_t cv;      /* a resolution finished */
    crd__endpoint primary;  /* host and port of the current primary (host owned) */
    bool known;             /* primary holds a resolved address */
    bool resolving;         /* a thread is asking the sentinels now */
    uint64_t rounds;        /* resolutions finished so far */
    crd_status last_st;     /* of the last resolution */
    char last_err[512];
    size_t first;           /* the sentinel to ask first */
    atomic_uint_fast64_t gen; /* moves on each change of the primary's address */
    int replicas;           /* replicas ROLE listed, and when (monotonic ms) */
    int64_t replicas_at;
    uint64_t replicas_gen;

    /* The +switch-master listener. */
    pthread_t thread;
    bool started, stop;
    int pipe_fd[2];
    crd__conn lconn;
};

/* ---- set-up ------------------------------------------------------------------------------ */

crd_status crd__topology_init(crd_client *c, crd__sentinel_cfg *cfg, const crd_options *o)
{
    crd__topology *t = calloc(1, sizeof *t);
    if (t == NULL) {
        crd__sentinel_cfg_clear(cfg);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the topology");
    }
    if (cfg != NULL) {
        t->cfg = *cfg;
        memset(cfg, 0, sizeof *cfg);
        t->sentinel = true;
    }
    /* AUTO: on where Java does it (a primary with replicas: Sentinel, Cluster). */
    t->sync = o->replica_sync == CRD_REPLICA_SYNC_ON ||
              (o->replica_sync == CRD_REPLICA_SYNC_AUTO && (t->sentinel || c->ep.cluster));
    t->sync_timeout_ms = o->replica_sync_timeout_ms;
    pthread_mutex_init(&t->mu, NULL);
    crd__cond_init(&t->cv);
    atomic_init(&t->gen, 1);
    t->pipe_fd[0] = t->pipe_fd[1] = -1;
    c->topo = t;
    return CRD_OK;
}

bool crd__topology_sentinel(const crd_client *c) { return c->topo != NULL && c->topo->sentinel; }

uint64_t crd__topology_gen(crd_client *c)
{
    return c->topo == NULL ? 0 : atomic_load_explicit(&c->topo->gen, memory_order_acquire);
}

/* ---- resolution --------------------------------------------------------------------------- */

/* Appends "; <text>" (the first without "; ") to a message buffer. */
static void add_reason(char *buf, size_t cap, const char *fmt, ...) CRD__PRINTF(3, 4);
static void add_reason(char *buf, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n + 4 >= cap)
        return;
    if (n > 0) {
        memcpy(buf + n, "; ", 3);
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

/* Runs one command on a connection (strings only); the reply or NULL on I/O failure. */
static redisReply *command(crd_client *c, crd__conn *conn, int argc, const char **argv)
{
    size_t lens[4];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    redisReply *r = NULL;
    if (crd__conn_command(c, conn, argc, argv, lens, &r) != CRD_OK)
        return NULL;
    return r;
}

/* ROLE on conn: 1 master (with *replicas set), 0 another role (its name in role),
 * -1 no usable reply (the reason in why). */
static int role_of(crd_client *c, crd__conn *conn, int *replicas, char *role, size_t rcap,
                   char *why, size_t wcap)
{
    const char *argv[1] = {"ROLE"};
    redisReply *r = command(c, conn, 1, argv);
    if (r == NULL) {
        snprintf(why, wcap, "%s", crd_client_errmsg(c));
        return -1;
    }
    int res = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_STRING) {
        snprintf(role, rcap, "%s", r->element[0]->str);
        res = strcmp(r->element[0]->str, "master") == 0;
        if (res == 1)
            *replicas = r->elements >= 3 && r->element[2]->type == REDIS_REPLY_ARRAY
                            ? (int)r->element[2]->elements
                            : 0;
    } else {
        char text[160];
        crd__reply_render(r, text, sizeof text);
        snprintf(why, wcap, "ROLE answered %s", text);
    }
    freeReplyObject(r);
    return res;
}

/* Asks the sentinels, from t->first on, until one names a node that says ROLE master.
 * No lock held. On success *out holds the primary's host and port. */
static crd_status resolve_once(crd_client *c, crd__endpoint *out, int *replicas, size_t *first,
                               char *err, size_t errcap)
{
    crd__topology *t = c->topo;
    err[0] = '\0';
    bool auth = false;
    size_t n = t->cfg.naddrs;
    for (size_t k = 0; k < n; k++) {
        size_t i = (*first + k) % n;
        const crd__endpoint *s = &t->cfg.addrs[i];
        crd__conn conn;
        memset(&conn, 0, sizeof conn);
        crd_status st = crd__conn_open(c, s, &conn);
        if (st != CRD_OK) {
            auth = auth || st == CRD_AUTH;
            add_reason(err, errcap, "sentinel %s:%d: %s", s->host, s->port, crd_client_errmsg(c));
            continue;
        }
        const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", t->cfg.master};
        redisReply *r = command(c, &conn, 3, argv);
        crd__conn_close(&conn);
        if (r == NULL) {
            add_reason(err, errcap, "sentinel %s:%d: %s", s->host, s->port, crd_client_errmsg(c));
            continue;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            bool noauth = strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "NOPERM", 6) == 0;
            auth = auth || noauth;
            add_reason(err, errcap, "sentinel %s:%d refused: %.*s%s", s->host, s->port,
                       (int)(r->len > 120 ? 120 : r->len), r->str,
                       noauth ? " (set the sentinels' password: sentinel_password, or "
                                "the redis-sentinel:// URL's)" : "");
            freeReplyObject(r);
            continue;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
            if (r->type == REDIS_REPLY_NIL)
                add_reason(err, errcap, "sentinel %s:%d does not know a master named '%s'",
                           s->host, s->port, t->cfg.master);
            else
                add_reason(err, errcap, "sentinel %s:%d: unexpected answer", s->host, s->port);
            freeReplyObject(r);
            continue;
        }
        crd__endpoint cand = c->ep; /* the data nodes' credentials, database and TLS */
        cand.host = r->element[0]->str;
        cand.port = atoi(r->element[1]->str);
        cand.unix_path = NULL;
        crd__conn dconn;
        memset(&dconn, 0, sizeof dconn);
        st = crd__conn_open(c, &cand, &dconn);
        int role = -1;
        char rname[32] = "", why[300] = "";
        if (st == CRD_OK)
            role = role_of(c, &dconn, replicas, rname, sizeof rname, why, sizeof why);
        else
            snprintf(why, sizeof why, "%s", crd_client_errmsg(c));
        crd__conn_close(&dconn);
        if (role == 1) {
            out->host = strdup(cand.host);
            out->port = cand.port;
            freeReplyObject(r);
            if (out->host == NULL)
                return crd__fail(c, CRD_NO_MEMORY, "cannot copy the primary's address");
            *first = i;
            return CRD_OK;
        }
        auth = auth || st == CRD_AUTH;
        if (role == 0)
            add_reason(err, errcap, "sentinel %s:%d names %s:%d, which answers ROLE %s: not a "
                       "primary (a failover in progress, or a stale sentinel)", s->host, s->port,
                       cand.host, cand.port, rname);
        else
            add_reason(err, errcap, "sentinel %s:%d names %s:%d: %s", s->host, s->port, cand.host,
                       cand.port, why);
        freeReplyObject(r);
    }
    return auth ? CRD_AUTH : CRD_IO;
}

/* Resolves, or waits for the resolution another thread is running, unless the primary
 * has already moved past gen_seen (0: always). Caller holds t->mu; it is released
 * during I/O. */
static crd_status resolve_locked(crd_client *c, uint64_t gen_seen)
{
    crd__topology *t = c->topo;
    if (gen_seen != 0 && t->known && atomic_load(&t->gen) != gen_seen)
        return CRD_OK; /* someone already followed the move */
    if (t->resolving) {
        uint64_t round = t->rounds;
        int64_t deadline = crd__now_ms() + (int64_t)t->cfg.naddrs * 2 *
                                               (c->opts.connect_timeout_ms + c->opts.command_timeout_ms);
        while (t->resolving && t->rounds == round && crd__now_ms() < deadline) {
            struct timespec ts = crd__abstime(deadline);
            pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        }
        if (t->rounds == round)
            return crd__fail(c, CRD_IO, "sentinel mode: timed out waiting for the primary of "
                             "'%s' to be resolved", t->cfg.master);
        return t->last_st == CRD_OK ? CRD_OK : crd__fail(c, t->last_st, "%s", t->last_err);
    }
    t->resolving = true;
    size_t first = t->first;
    pthread_mutex_unlock(&t->mu);
    crd__endpoint found;
    memset(&found, 0, sizeof found);
    int replicas = 0;
    char err[512];
    crd_status st = resolve_once(c, &found, &replicas, &first, err, sizeof err);
    pthread_mutex_lock(&t->mu);
    t->resolving = false;
    t->rounds++;
    t->last_st = st;
    if (st == CRD_OK) {
        t->first = first;
        bool moved = !t->known || t->primary.port != found.port ||
                     strcmp(t->primary.host, found.host) != 0;
        if (moved) {
            free(t->primary.host);
            t->primary.host = found.host;
            t->primary.port = found.port;
            found.host = NULL;
            atomic_fetch_add(&t->gen, 1);
        }
        t->known = true;
        t->replicas = replicas;
        t->replicas_at = crd__now_ms();
        t->replicas_gen = atomic_load(&t->gen);
        free(found.host);
        if (moved)
            crd__log(c, CRD_LOG_INFO, "sentinel mode: the primary of '%s' is %s:%d (%d "
                     "replicas); connections move there", t->cfg.master, t->primary.host,
                     t->primary.port, replicas);
        t->last_err[0] = '\0';
    } else {
        /* Bounded pieces: the master name at most 100 bytes, the sentinels' answers 360. */
        snprintf(t->last_err, sizeof t->last_err, "sentinel mode: no primary for '%.100s': %.360s",
                 t->cfg.master, err);
    }
    pthread_cond_broadcast(&t->cv);
    if (st != CRD_OK) {
        crd__log(c, CRD_LOG_WARN, "%s", t->last_err);
        return crd__fail(c, st, "%s", t->last_err);
    }
    return CRD_OK;
}

static void start_listener(crd_client *c);

crd_status crd__topology_changed(crd_client *c, uint64_t gen_seen)
{
    crd__topology *t = c->topo;
    if (t == NULL || !t->sentinel)
        return CRD_OK;
    pthread_mutex_lock(&t->mu);
    crd_status st = resolve_locked(c, gen_seen == 0 ? atomic_load(&t->gen) : gen_seen);
    pthread_mutex_unlock(&t->mu);
    return st;
}

crd_status crd__endpoint_for_connect(crd_client *c, crd__endpoint *out, uint64_t *gen)
{
    crd__topology *t = c->topo;
    memset(out, 0, sizeof *out);
    *out = c->ep;
    out->host = out->unix_path = out->username = out->password = NULL;
    if (t == NULL || !t->sentinel) {
        *gen = crd__topology_gen(c);
        if ((c->ep.host && !(out->host = strdup(c->ep.host))) ||
            (c->ep.unix_path && !(out->unix_path = strdup(c->ep.unix_path))))
            goto oom;
    } else {
        start_listener(c); /* again in a fork child, where the thread is gone */
        pthread_mutex_lock(&t->mu);
        crd_status st = t->known ? CRD_OK : resolve_locked(c, 0);
        if (st == CRD_OK) {
            out->host = strdup(t->primary.host);
            out->port = t->primary.port;
            *gen = atomic_load(&t->gen);
        }
        pthread_mutex_unlock(&t->mu);
        if (st != CRD_OK)
            return st;
        if (out->host == NULL)
            goto oom;
    }
    if ((c->ep.username && !(out->username = strdup(c->ep.username))) ||
        (c->ep.password && !(out->password = strdup(c->ep.password))))
        goto oom;
    return CRD_OK;
oom:
    crd__endpoint_clear(out);
    return crd__fail(c, CRD_NO_MEMORY, "cannot copy the endpoint");
}

crd_status crd__conn_open_primary(crd_client *c, crd__conn *conn)
{
    if (!crd__topology_sentinel(c)) {
        conn->topo_gen = crd__topology_gen(c);
        crd_status st = crd__conn_open(c, &c->ep, conn);
        conn->topo_gen = crd__topology_gen(c);
        return st;
    }
    crd_status st = CRD_IO;
    /* A second try only when the first failed and the sentinels named a new primary. */
    for (int attempt = 0; attempt < 2; attempt++) {
        crd__endpoint ep;
        uint64_t gen = 0;
        st = crd__endpoint_for_connect(c, &ep, &gen);
        if (st != CRD_OK)
            return st;
        st = crd__conn_open(c, &ep, conn);
        conn->topo_gen = gen;
        crd__endpoint_clear(&ep);
        if (st != CRD_IO)
            return st;
        char msg[400];
        snprintf(msg, sizeof msg, "%s", crd_client_errmsg(c));
        if (crd__topology_changed(c, gen) != CRD_OK || crd__topology_gen(c) == gen) {
            crd__fail(c, st, "%s", msg);
            return st;
        }
    }
    return st;
}

/* ---- replica sync ----------------------------------------------------------------------- */

int crd__sync_replicas(crd_client *c, crd__conn *conn, int64_t *timeout_ms)
{
    crd__topology *t = c->topo;
    if (t == NULL || !t->sync)
        return 0;
    *timeout_ms = t->sync_timeout_ms;
    int64_t now = crd__now_ms();
    char role[32], why[200];
    if (c->cluster != NULL) {
        /* Each node has its own replicas: the count is kept per connection (a node's
         * pool connections each ask ROLE once per REPLICAS_MAX_AGE_MS). */
        if (conn->replicas_at == 0 || now - conn->replicas_at >= REPLICAS_MAX_AGE_MS) {
            int n = 0;
            if (role_of(c, conn, &n, role, sizeof role, why, sizeof why) != 1)
                n = 0;
            conn->replicas = n;
            conn->replicas_at = now;
        }
        return conn->replicas;
    }
    pthread_mutex_lock(&t->mu);
    bool fresh = t->replicas_at != 0 && now - t->replicas_at < REPLICAS_MAX_AGE_MS &&
                 t->replicas_gen == conn->topo_gen;
    int n = t->replicas;
    pthread_mutex_unlock(&t->mu);
    if (fresh)
        return n;
    /* The count is old, or was read from another primary: ask this one (the connection
     * is the primary's). A refused ROLE (an ACL without it) means no WAIT. */
    n = 0;
    if (role_of(c, conn, &n, role, sizeof role, why, sizeof why) != 1)
        n = 0;
    pthread_mutex_lock(&t->mu);
    t->replicas = n;
    t->replicas_at = now;
    t->replicas_gen = conn->topo_gen;
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* ---- the +switch-master listener -------------------------------------------------------- */

/* Waits on the stop pipe for ms; false when told to stop. */
static bool pause_ms(crd__topology *t, int ms)
{
    struct pollfd p = {t->pipe_fd[0], POLLIN, 0};
    poll(&p, 1, ms);
    pthread_mutex_lock(&t->mu);
    bool stop = t->stop;
    pthread_mutex_unlock(&t->mu);
    return !stop;
}

/* "+switch-master" payload: "<name> <old-ip> <old-port> <new-ip> <new-port>". */
static bool is_our_switch(const crd__topology *t, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") != 0 ||
        r->element[2]->type != REDIS_REPLY_STRING)
        return false;
    const char *p = r->element[2]->str;
    size_t n = strlen(t->cfg.master);
    return r->element[2]->len > n && memcmp(p, t->cfg.master, n) == 0 && p[n] == ' ';
}

static void *listener_main(void *arg)
{
    crd_client *c = arg;
    crd__topology *t = c->topo;
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
    size_t next = 0;
    int backoff = 100;
    bool first = true;
    for (;;) {
        pthread_mutex_lock(&t->mu);
        bool stop = t->stop;
        size_t start = t->first;
        pthread_mutex_unlock(&t->mu);
        if (stop)
            break;
        size_t i = (start + next) % t->cfg.naddrs;
        crd__conn *conn = &t->lconn;
        const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
        size_t lens[2] = {9, 14};
        redisReply *r = NULL;
        bool ok = crd__conn_open(c, &t->cfg.addrs[i], conn) == CRD_OK &&
                  crd__conn_command(c, conn, 2, argv, lens, &r) == CRD_OK &&
                  r->type == REDIS_REPLY_ARRAY;
        if (r != NULL)
            freeReplyObject(r);
        if (!ok) {
            crd__conn_close(conn);
            next++;
            if (!pause_ms(t, backoff))
                break;
            backoff = backoff < 2000 ? backoff * 2 : 2000;
            continue;
        }
        backoff = 100;
        /* A switch may have happened while nobody listened. */
        if (!first)
            crd__topology_changed(c, 0);
        first = false;
        redisContext *ctx = conn->ctx;
        for (bool alive = true; alive;) {
            struct pollfd p[2] = {{ctx->fd, POLLIN, 0}, {t->pipe_fd[0], POLLIN, 0}};
            int pn = crd__conn_buffered(conn) ? 0 : poll(p, 2, -1);
            if (pn < 0 && errno != EINTR)
                break;
            if (pn == 0)
                p[0].revents = POLLIN;
            if (p[1].revents & POLLIN) {
                pthread_mutex_lock(&t->mu);
                stop = t->stop;
                pthread_mutex_unlock(&t->mu);
                if (stop)
                    break;
            }
            if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (crd__conn_fill(conn) != REDIS_OK)
                break;
            void *reply = NULL;
            bool switched = false;
            while (redisGetReplyFromReader(ctx, &reply) == REDIS_OK && reply != NULL) {
                switched = switched || is_our_switch(t, reply);
                freeReplyObject(reply);
                reply = NULL;
            }
            if (ctx->err)
                alive = false;
            if (switched) {
                crd__log(c, CRD_LOG_INFO, "sentinel mode: +switch-master for '%s'; resolving "
                         "the new primary", t->cfg.master);
                crd__topology_changed(c, 0);
            }
        }
        crd__conn_close(conn);
        if (stop)
            break;
        next++;
    }
    return NULL;
}

static void start_listener(crd_client *c)
{
    crd__topology *t = c->topo;
    pthread_mutex_lock(&t->mu);
    if (!t->started && !t->stop) {
        if (t->pipe_fd[0] < 0 && pipe2(t->pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0)
            t->pipe_fd[0] = t->pipe_fd[1] = -1;
        /* Without the thread, READONLY replies and failed connections still re-resolve. */
        if (t->pipe_fd[0] >= 0 && pthread_create(&t->thread, NULL, listener_main, c) == 0)
            t->started = true;
    }
    pthread_mutex_unlock(&t->mu);
}

crd_status crd__topology_start(crd_client *c)
{
    crd__topology *t = c->topo;
    if (!t->sentinel)
        return CRD_OK;
    pthread_mutex_lock(&t->mu);
    crd_status st = resolve_locked(c, 0);
    pthread_mutex_unlock(&t->mu);
    if (st == CRD_OK)
        start_listener(c);
    return st;
}

void crd__topology_stop(crd_client *c)
{
    crd__topology *t = c->topo;
    if (t == NULL)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    bool started = t->started;
    pthread_mutex_unlock(&t->mu);
    if (t->pipe_fd[1] >= 0) {
        char b = 1;
        ssize_t n = write(t->pipe_fd[1], &b, 1);
        (void)n;
    }
    if (started && c->pid == getpid())
        pthread_join(t->thread, NULL);
    t->started = false;
}

void crd__topology_free(crd_client *c)
{
    crd__topology *t = c->topo;
    if (t == NULL)
        return;
    crd__conn_close(&t->lconn);
    if (t->pipe_fd[0] >= 0) {
        close(t->pipe_fd[0]);
        close(t->pipe_fd[1]);
    }
    crd__sentinel_cfg_clear(&t->cfg);
    free(t->primary.host);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
    c->topo = NULL;
}

void crd__topology_lock_for_fork(crd_client *c, bool lock)
{
    if (c->topo == NULL)
        return;
    if (lock)
        pthread_mutex_lock(&c->topo->mu);
    else
        pthread_mutex_unlock(&c->topo->mu);
}

/* In a fork child (t->mu held): the listener does not exist here; its connection is
 * abandoned, and the thread starts again at the next connect. */
void crd__topology_after_fork_child(crd_client *c)
{
    crd__topology *t = c->topo;
    if (t == NULL)
        return;
    crd__conn_abandon(&t->lconn);
    if (t->pipe_fd[0] >= 0) {
        close(t->pipe_fd[0]);
        close(t->pipe_fd[1]);
        t->pipe_fd[0] = t->pipe_fd[1] = -1;
    }
    t->started = false;
    t->resolving = false;
    memset(&t->cv, 0, sizeof t->cv);
    crd__cond_init(&t->cv);
}
