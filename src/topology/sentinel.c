/*
 * sentinel.c -- where the primary is, and how many replicas must acknowledge a write.
 *
 * Standalone clients have one endpoint (c->ep) and nothing here does any I/O for them
 * except the replica count of replica sync. In sentinel mode this file owns the
 * current primary: it asks every sentinel (SENTINEL MASTER: the address and the
 * configuration epoch), orders their answers newest first (newest_first: the newest
 * epoch, then the address most of them name, then not the current primary), takes the
 * first that says ROLE master, and publishes it with a generation number. Links and
 * connections remember the generation they were opened under; the engine gives a link
 * of an old generation nothing new, and pubsub.c and watchdog.c reopen theirs, so after
 * a switch every command goes to the new primary. A script answered across a switch is
 * re-checked by its caller (script.c), and the watchdog renews every hold at once.
 *
 * What triggers a new resolution: a +switch-master message (a listener thread of this
 * file keeps every sentinel's connection subscribed), the listener's periodic scan
 * (sentinel_scan_interval_ms, on its own connections to every sentinel), a READONLY
 * reply (crd__call), and a failed connection to the primary (engine, watchdog,
 * subscriber). One resolution runs at a time; a thread that asks while one is running
 * waits for its result instead of asking the sentinels again.
 *
 * Replica sync (PROTOCOL.md 11): crd__sync_replicas() is the one rule for WAIT's replica
 * count: the replicas the primary lists in ROLE, read at resolution and again when the
 * count is older than 10 s; the timeout is replica_sync_timeout_ms.
 *
 * Threads: callers, the watchdog, the subscriber, and the listener thread. Lock: t->mu
 * (a leaf, taken after every other lock of internal.h; never held during I/O).
 */
#include "topology.h"

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

    /* The listener thread (+switch-master on every sentinel, the periodic scan): per
     * sentinel its subscriber and query connections, and when to try a failed one again.
     * Touched by that thread only (and by free and the fork child, when it is gone). */
    pthread_t thread;
    bool started, stop;
    bool check_now;         /* crd__topology_suspect: ask the sentinels now (under mu) */
    int pipe_fd[2];
    crd__conn *sub, *query;
    int64_t *retry_at;
    int *fails;
};

/* ---- set-up ------------------------------------------------------------------------------ */

crd_status crd__topology_init(crd_client *c, crd__sentinel_cfg *cfg, const crd_options *o)
{
    crd__topology *t = calloc(1, sizeof *t);
    if (t == NULL) {
        crd__sentinel_cfg_clear(cfg);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the topology");
    }
    if (crd__mutex_make(c, CRD__MU_TOPOLOGY, &t->mu, &t->cv) != 0) {
        free(t);
        crd__sentinel_cfg_clear(cfg);
        return crd__fail(c, CRD_NO_MEMORY, "cannot make the topology's mutex");
    }
    atomic_init(&t->gen, 1);
    t->pipe_fd[0] = t->pipe_fd[1] = -1;
    if (cfg != NULL) {
        t->cfg = *cfg;
        memset(cfg, 0, sizeof *cfg);
        t->sentinel = true;
        size_t n = t->cfg.naddrs;
        t->sub = calloc(n, sizeof *t->sub);
        t->query = calloc(n, sizeof *t->query);
        t->retry_at = calloc(n, sizeof *t->retry_at);
        t->fails = calloc(n, sizeof *t->fails);
        if (t->sub == NULL || t->query == NULL || t->retry_at == NULL || t->fails == NULL) {
            c->topo = t;
            crd__topology_free(c);
            return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the topology");
        }
    }
    /* AUTO: on where Java does it (a primary with replicas: Sentinel, Cluster). */
    t->sync = o->replica_sync == CRD_REPLICA_SYNC_ON ||
              o->replica_sync == CRD_REPLICA_SYNC_IF_ALLOWED ||
              (o->replica_sync == CRD_REPLICA_SYNC_AUTO && (t->sentinel || c->ep.cluster));
    t->sync_timeout_ms = o->replica_sync_timeout_ms;
    c->topo = t;
    return CRD_OK;
}

bool crd__topology_sentinel(const crd_client *c) { return c->topo != NULL && c->topo->sentinel; }

bool crd__sync_on(const crd_client *c) { return c->topo != NULL && c->topo->sync; }

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

/* ROLE's reply r: 1 master (with *replicas set), 0 another role (its name in role), -1
 * no usable reply (the reason in why). */
static int parse_role(const redisReply *r, int *replicas, char *role, size_t rcap, char *why,
                      size_t wcap)
{
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_STRING) {
        snprintf(role, rcap, "%s", r->element[0]->str);
        int res = strcmp(r->element[0]->str, "master") == 0;
        if (res == 1)
            *replicas = r->elements >= 3 && r->element[2]->type == REDIS_REPLY_ARRAY
                            ? (int)r->element[2]->elements
                            : 0;
        return res;
    }
    char text[160];
    crd__reply_render(r, text, sizeof text);
    snprintf(why, wcap, "ROLE answered %s", text);
    return -1;
}

/* ROLE on conn (parse_role's answer). */
static int role_of(crd_client *c, crd__conn *conn, int *replicas, char *role, size_t rcap,
                   char *why, size_t wcap)
{
    const char *argv[1] = {"ROLE"};
    redisReply *r = command(c, conn, 1, argv);
    if (r == NULL) {
        snprintf(why, wcap, "%s", crd_client_errmsg(c));
        return -1;
    }
    int res = parse_role(r, replicas, role, rcap, why, wcap);
    freeReplyObject(r);
    return res;
}

/* ROLE at peer p through the engine: 1 master with *replicas, else 0 or -1. */
static int role_at(crd_client *c, crd__pool *p, int *replicas, int64_t deadline_ms)
{
    static const char *const argv[1] = {"ROLE"};
    static const size_t lens[1] = {4};
    redisReply *r;
    if (crd__engine_call_argv(c, p, 1, argv, lens, deadline_ms, &r) != CRD_OK)
        return -1;
    char role[32], why[200];
    int res = parse_role(r, replicas, role, sizeof role, why, sizeof why);
    freeReplyObject(r);
    return res;
}

/* What one sentinel says of the master: where it is and under which configuration
 * epoch (-1: the sentinel answered only get-master-addr-by-name). */
typedef struct master_view {
    char host[256];
    int port;
    long long epoch;
    size_t from; /* the sentinel's index in t->cfg.addrs */
} master_view;

/* The field named key of SENTINEL MASTER's flat list, or NULL. */
static const redisReply *field_of(const redisReply *r, const char *key)
{
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING && strcmp(r->element[i]->str, key) == 0 &&
            r->element[i + 1]->type == REDIS_REPLY_STRING)
            return r->element[i + 1];
    return NULL;
}

/* A reply naming the master: SENTINEL MASTER's field list, or get-master-addr-by-name's
 * [host, port]. True with *v filled. */
static bool parse_view(const redisReply *r, bool by_name, master_view *v)
{
    if (r->type != REDIS_REPLY_ARRAY)
        return false;
    const redisReply *host, *port, *epoch = NULL;
    if (by_name) {
        if (r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
            r->element[1]->type != REDIS_REPLY_STRING)
            return false;
        host = r->element[0];
        port = r->element[1];
    } else {
        host = field_of(r, "ip");
        port = field_of(r, "port");
        epoch = field_of(r, "config-epoch");
        if (host == NULL || port == NULL)
            return false;
    }
    if (host->len == 0 || host->len >= sizeof v->host)
        return false;
    memcpy(v->host, host->str, host->len + 1);
    v->port = atoi(port->str);
    v->epoch = epoch != NULL ? strtoll(epoch->str, NULL, 10) : -1;
    return v->port > 0;
}

/* Asks sentinel i on conn where the master is. 1 with *v, 0 the sentinel does not know
 * it, -1 no usable answer; -2 it refused the credentials. Reasons go to err. */
static int ask_sentinel(crd_client *c, crd__conn *conn, size_t i, master_view *v, char *err,
                        size_t errcap)
{
    crd__topology *t = c->topo;
    const crd__endpoint *s = &t->cfg.addrs[i];
    /* SENTINEL MASTER gives the epoch; a sentinel whose ACL allows only
     * get-master-addr-by-name (what older clients send) is asked that instead. */
    for (int by_name = 0; by_name < 2; by_name++) {
        const char *argv[3] = {"SENTINEL", by_name ? "get-master-addr-by-name" : "MASTER",
                               t->cfg.master};
        redisReply *r = command(c, conn, 3, argv);
        if (r == NULL) {
            add_reason(err, errcap, "sentinel %s:%d: %s", s->host, s->port, crd_client_errmsg(c));
            return -1;
        }
        v->from = i;
        bool ok = parse_view(r, by_name, v);
        if (ok || r->type == REDIS_REPLY_NIL ||
            (r->type == REDIS_REPLY_ERROR && strstr(r->str, "No such master") != NULL)) {
            freeReplyObject(r);
            if (ok)
                return 1;
            add_reason(err, errcap, "sentinel %s:%d does not know a master named '%s'", s->host,
                       s->port, t->cfg.master);
            return 0;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            bool noauth = strncmp(r->str, "NOAUTH", 6) == 0;
            bool noperm = strncmp(r->str, "NOPERM", 6) == 0;
            if (!noauth && by_name == 0) {
                freeReplyObject(r);
                continue; /* try the older command */
            }
            add_reason(err, errcap, "sentinel %s:%d refused: %.*s%s", s->host, s->port,
                       (int)(r->len > 120 ? 120 : r->len), r->str,
                       noauth || noperm ? " (set the sentinels' password: sentinel_password, "
                                          "or the redis-sentinel:// URL's)" : "");
            freeReplyObject(r);
            return noauth || noperm ? -2 : -1;
        }
        freeReplyObject(r);
        add_reason(err, errcap, "sentinel %s:%d: unexpected answer", s->host, s->port);
        return -1;
    }
    return -1;
}

static bool same_addr(const master_view *a, const master_view *b)
{
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* Orders the views best first: the newest configuration epoch; among views of one epoch,
 * the address more sentinels name; on a tie, not the current primary (cur, or NULL);
 * then the order the sentinels were asked in. Why not the epoch alone: a failover's
 * leader raises the epoch when the replica it promoted reports itself master, but goes
 * on naming the old address until it has reconfigured the other replicas (a second or
 * more), while the sentinels it told already name the new one: the same epoch, two
 * addresses, and the old one is the stale view. */
static void newest_first(master_view *v, size_t n, const crd__endpoint *cur)
{
    int *votes = calloc(n, sizeof *votes);
    for (size_t i = 0; votes != NULL && i < n; i++)
        for (size_t j = 0; j < n; j++)
            votes[i] += v[j].epoch == v[i].epoch && same_addr(&v[i], &v[j]);
    /* Insertion sort: a handful of sentinels. */
    for (size_t i = 1; i < n; i++) {
        master_view x = v[i];
        int xv = votes != NULL ? votes[i] : 0;
        size_t j = i;
        while (j > 0) {
            const master_view *y = &v[j - 1];
            int yv = votes != NULL ? votes[j - 1] : 0;
            bool x_cur = cur != NULL && x.port == cur->port && strcmp(x.host, cur->host) == 0;
            bool y_cur = cur != NULL && y->port == cur->port && strcmp(y->host, cur->host) == 0;
            bool before = x.epoch != y->epoch ? x.epoch > y->epoch
                          : xv != yv          ? xv > yv
                          : x_cur != y_cur    ? !x_cur
                                              : x.from < y->from;
            if (!before)
                break;
            v[j] = v[j - 1];
            if (votes != NULL)
                votes[j] = votes[j - 1];
            j--;
        }
        v[j] = x;
        if (votes != NULL)
            votes[j] = xv;
    }
    free(votes);
}

/* Of the views (in newest_first's order), the first whose node says ROLE master: its address in
 * *out (host allocated), its replicas, and the sentinel that named it in *first. */
static crd_status pick_primary(crd_client *c, master_view *views, size_t n, crd__endpoint *out,
                               int *replicas, size_t *first, bool *auth, char *err, size_t errcap)
{
    for (size_t k = 0; k < n; k++) {
        bool seen = false;
        for (size_t j = 0; j < k && !seen; j++)
            seen = views[j].port == views[k].port && strcmp(views[j].host, views[k].host) == 0;
        if (seen)
            continue;
        const crd__endpoint *s = &c->topo->cfg.addrs[views[k].from];
        crd__endpoint cand = c->ep; /* the data nodes' credentials, database and TLS */
        cand.host = views[k].host;
        cand.port = views[k].port;
        cand.unix_path = NULL;
        crd__conn dconn;
        memset(&dconn, 0, sizeof dconn);
        crd_status st = crd__conn_open(c, &cand, &dconn);
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
            if (out->host == NULL)
                return crd__fail(c, CRD_NO_MEMORY, "cannot copy the primary's address");
            *first = views[k].from;
            return CRD_OK;
        }
        *auth = *auth || st == CRD_AUTH;
        if (role == 0)
            add_reason(err, errcap, "sentinel %s:%d names %s:%d, which answers ROLE %s: not a "
                       "primary (a failover in progress, or a stale sentinel)", s->host, s->port,
                       cand.host, cand.port, rname);
        else
            add_reason(err, errcap, "sentinel %s:%d names %s:%d: %s", s->host, s->port, cand.host,
                       cand.port, why);
    }
    return *auth ? CRD_AUTH : CRD_IO;
}

/* Asks every sentinel, from *first on, on fresh connections, and takes the primary the
 * newest configuration epoch names (pick_primary). No lock held. On success *out holds
 * the primary's host and port. */
static crd_status resolve_once(crd_client *c, const crd__endpoint *cur, crd__endpoint *out,
                               int *replicas, size_t *first, char *err, size_t errcap)
{
    crd__topology *t = c->topo;
    err[0] = '\0';
    bool auth = false;
    size_t n = t->cfg.naddrs, nv = 0;
    master_view *views = calloc(n, sizeof *views);
    if (views == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the sentinels' answers");
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
        int res = ask_sentinel(c, &conn, i, &views[nv], err, errcap);
        crd__conn_close(&conn);
        auth = auth || res == -2;
        nv += res == 1;
    }
    newest_first(views, nv, cur);
    crd_status st = pick_primary(c, views, nv, out, replicas, first, &auth, err, errcap);
    free(views);
    return st;
}

/* Ends a resolution (t->mu held, t->resolving set by the caller): on success the primary
 * becomes found (its generation moves when the address changed) and *found's host is
 * taken or freed; on failure the reason is kept for the threads that waited. */
static crd_status finish_locked(crd_client *c, crd_status st, crd__endpoint *found, int replicas,
                                size_t first, const char *err)
{
    crd__topology *t = c->topo;
    t->resolving = false;
    t->rounds++;
    t->last_st = st;
    if (st == CRD_OK) {
        t->first = first;
        bool moved = !t->known || t->primary.port != found->port ||
                     strcmp(t->primary.host, found->host) != 0;
        if (moved) {
            free(t->primary.host);
            t->primary.host = found->host;
            t->primary.port = found->port;
            found->host = NULL;
            atomic_fetch_add(&t->gen, 1);
        }
        t->known = true;
        t->replicas = replicas;
        t->replicas_at = crd__now_ms();
        t->replicas_gen = atomic_load(&t->gen);
        free(found->host);
        found->host = NULL;
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
        int64_t deadline =
            crd__now_ms() +
            (int64_t)t->cfg.naddrs * 2 * (c->opts.connect_timeout_ms + c->opts.command_timeout_ms);
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
    /* The primary before this resolution: on a tie it is the stale view (newest_first). */
    crd__endpoint cur;
    memset(&cur, 0, sizeof cur);
    cur.host = t->known ? strdup(t->primary.host) : NULL;
    cur.port = t->primary.port;
    pthread_mutex_unlock(&t->mu);
    crd__endpoint found;
    memset(&found, 0, sizeof found);
    int replicas = 0;
    char err[512];
    crd_status st = resolve_once(c, cur.host != NULL ? &cur : NULL, &found, &replicas, &first,
                                 err, sizeof err);
    free(cur.host);
    pthread_mutex_lock(&t->mu);
    return finish_locked(c, st, &found, replicas, first, err);
}

static void start_listener(crd_client *c);

crd_status crd__topology_changed(crd_client *c, uint64_t gen_seen)
{
    crd__topology *t = c->topo;
    if (t == NULL || !t->sentinel)
        return CRD_OK;
    uint64_t gen = crd__topology_gen(c);
    pthread_mutex_lock(&t->mu);
    crd_status st = resolve_locked(c, gen_seen == 0 ? atomic_load(&t->gen) : gen_seen);
    pthread_mutex_unlock(&t->mu);
    if (crd__topology_gen(c) != gen && c->on_primary_moved != NULL)
        c->on_primary_moved(c);
    return st;
}

void crd__topology_suspect(crd_client *c)
{
    crd__topology *t = c->topo;
    if (t == NULL || !t->sentinel)
        return;
    start_listener(c); /* again in a fork child, where the thread is gone */
    pthread_mutex_lock(&t->mu);
    bool listening = t->started && !t->stop;
    t->check_now = listening;
    pthread_mutex_unlock(&t->mu);
    if (!listening) {
        (void)crd__topology_changed(c, 0); /* no thread to ask: this one asks */
        return;
    }
    char b = 2;
    ssize_t n = write(t->pipe_fd[1], &b, 1); /* a full pipe already wakes it */
    (void)n;
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

crd_status crd__endpoint_peek(crd_client *c, crd__endpoint *out, uint64_t *gen, char *why,
                              size_t whylen)
{
    crd__topology *t = c->topo;
    if (t != NULL && t->sentinel) {
        pthread_mutex_lock(&t->mu);
        bool known = t->known;
        pthread_mutex_unlock(&t->mu);
        if (!known) {
            memset(out, 0, sizeof *out);
            snprintf(why, whylen, "the primary is not known (the sentinels are being asked)");
            return CRD_IO;
        }
    }
    crd_status st = crd__endpoint_for_connect(c, out, gen);
    if (st != CRD_OK)
        snprintf(why, whylen, "%s", crd_client_errmsg(c));
    return st;
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

int64_t crd__sync_budget_ms(crd_client *c, const char *key, size_t keylen)
{
    crd__topology *t = c->topo;
    if (t == NULL || !t->sync)
        return 0;
    /* A node known to have no replica gets no WAIT (a cluster without replicas); an
     * unknown count may. */
    int64_t now = crd__now_ms();
    bool fresh = false;
    int n;
    if (c->cluster != NULL) {
        crd__pool *p = crd__pool_for(c, key, keylen);
        n = p != NULL ? crd__pool_replicas(p, now, REPLICAS_MAX_AGE_MS, &fresh) : 0;
    } else {
        pthread_mutex_lock(&t->mu);
        fresh = t->replicas_at != 0 && now - t->replicas_at < REPLICAS_MAX_AGE_MS;
        n = t->replicas;
        pthread_mutex_unlock(&t->mu);
    }
    return fresh && n == 0 ? 0 : t->sync_timeout_ms;
}

int crd__sync_replicas(crd_client *c, crd__pool *p, int64_t *timeout_ms, int64_t deadline_ms)
{
    crd__topology *t = c->topo;
    if (t == NULL || !t->sync)
        return 0;
    *timeout_ms = t->sync_timeout_ms;
    int64_t now = crd__now_ms();
    if (c->cluster != NULL) {
        /* Each node has its own replicas: the count is kept per peer. */
        bool fresh;
        int n = crd__pool_replicas(p, now, REPLICAS_MAX_AGE_MS, &fresh);
        if (fresh)
            return n;
        n = 0;
        if (role_at(c, p, &n, deadline_ms) != 1)
            n = 0;
        crd__pool_set_replicas(p, n, now);
        return n;
    }
    uint64_t gen = crd__topology_gen(c);
    pthread_mutex_lock(&t->mu);
    bool fresh = t->replicas_at != 0 && now - t->replicas_at < REPLICAS_MAX_AGE_MS &&
                 t->replicas_gen == gen;
    int n = t->replicas;
    pthread_mutex_unlock(&t->mu);
    if (fresh)
        return n;
    /* The count is old, or was read from another primary: ask this one. A refused ROLE
     * (an ACL without it) means no WAIT. */
    n = 0;
    if (role_at(c, p, &n, deadline_ms) != 1)
        n = 0;
    pthread_mutex_lock(&t->mu);
    t->replicas = n;
    t->replicas_at = now;
    t->replicas_gen = gen;
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* ---- the +switch-master listener -------------------------------------------------------- */

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

/* A sentinel that failed is tried again after 100 ms, doubling to at most 10 s: one
 * cut off (a partition: every call on it runs into a timeout) costs the thread a
 * timeout now and then, not every tick. */
static void sentinel_failed(crd__topology *t, size_t i, int64_t now)
{
    int64_t back = 100;
    for (int k = 0; k < t->fails[i] && back < 10000; k++)
        back *= 2;
    t->fails[i]++;
    t->retry_at[i] = now + (back < 10000 ? back : 10000);
}

/* Opens sentinel i's subscriber connection (SUBSCRIBE +switch-master). */
static bool subscribe_to(crd_client *c, size_t i)
{
    crd__topology *t = c->topo;
    const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
    size_t lens[2] = {9, 14};
    redisReply *r = NULL;
    bool ok = crd__conn_open(c, &t->cfg.addrs[i], &t->sub[i]) == CRD_OK &&
              crd__conn_command(c, &t->sub[i], 2, argv, lens, &r) == CRD_OK &&
              r->type == REDIS_REPLY_ARRAY;
    if (r != NULL)
        freeReplyObject(r);
    if (!ok)
        crd__conn_close(&t->sub[i]);
    return ok;
}

/* The periodic check: every sentinel that can be asked (on the listener's own
 * connections) says where the master is; when the newest configuration epoch names
 * another address than the current primary, and that node says ROLE master, the client
 * moves there. Runs on the listener thread; no lock held on entry. */
static void scan(crd_client *c)
{
    crd__topology *t = c->topo;
    size_t n = t->cfg.naddrs, nv = 0;
    master_view *views = calloc(n, sizeof *views);
    if (views == NULL)
        return;
    char err[512] = "";
    for (size_t i = 0; i < n; i++) {
        int64_t now = crd__now_ms();
        if (t->query[i].ctx == NULL) {
            if (now < t->retry_at[i])
                continue;
            if (crd__conn_open(c, &t->cfg.addrs[i], &t->query[i]) != CRD_OK) {
                crd__conn_close(&t->query[i]);
                sentinel_failed(t, i, crd__now_ms());
                continue;
            }
        }
        int res = ask_sentinel(c, &t->query[i], i, &views[nv], err, sizeof err);
        if (res == 1) {
            t->fails[i] = 0;
            nv++;
        } else if (t->query[i].broken || res < 0) {
            crd__conn_close(&t->query[i]);
            sentinel_failed(t, i, crd__now_ms());
        }
    }
    pthread_mutex_lock(&t->mu);
    if (nv > 0)
        newest_first(views, nv, t->known ? &t->primary : NULL);
    bool same = nv == 0 || t->resolving ||
                (t->known && t->primary.port == views[0].port &&
                 strcmp(t->primary.host, views[0].host) == 0);
    if (same) {
        pthread_mutex_unlock(&t->mu);
        free(views);
        return;
    }
    t->resolving = true;
    size_t first = t->first;
    pthread_mutex_unlock(&t->mu);
    crd__log(c, CRD_LOG_INFO, "sentinel mode: sentinel %s:%d (configuration epoch %lld) names "
             "%s:%d as the primary of '%s'", t->cfg.addrs[views[0].from].host,
             t->cfg.addrs[views[0].from].port, views[0].epoch, views[0].host, views[0].port,
             t->cfg.master);
    crd__endpoint found;
    memset(&found, 0, sizeof found);
    int replicas = 0;
    bool auth = false;
    err[0] = '\0';
    crd_status st = pick_primary(c, views, nv, &found, &replicas, &first, &auth, err, sizeof err);
    free(views);
    uint64_t gen = crd__topology_gen(c);
    pthread_mutex_lock(&t->mu);
    finish_locked(c, st, &found, replicas, first, err);
    pthread_mutex_unlock(&t->mu);
    if (crd__topology_gen(c) != gen && c->on_primary_moved != NULL)
        c->on_primary_moved(c);
}

/* The listener thread: every sentinel's +switch-master, and the periodic scan. */
static void *listener_main(void *arg)
{
    crd__thread_enter("crd-sentinel");
    crd_client *c = arg;
    crd__topology *t = c->topo;
    size_t n = t->cfg.naddrs;
    int64_t interval = c->opts.sentinel_scan_interval_ms;
    int64_t next_scan = interval > 0 ? crd__now_ms() + interval : INT64_MAX;
    struct pollfd *pfd = calloc(n + 1, sizeof *pfd);
    size_t *who = calloc(n + 1, sizeof *who);
    bool ever[64] = {false}; /* subscribed before: a switch may have happened meanwhile */
    bool check = false;
    while (pfd != NULL && who != NULL) {
        pthread_mutex_lock(&t->mu);
        bool stop = t->stop;
        pthread_mutex_unlock(&t->mu);
        if (stop)
            break;
        int64_t now = crd__now_ms();
        for (size_t i = 0; i < n; i++) {
            if (t->sub[i].ctx != NULL || now < t->retry_at[i])
                continue;
            if (subscribe_to(c, i)) {
                t->fails[i] = 0;
                check = check || (i < 64 && ever[i]);
                if (i < 64)
                    ever[i] = true;
            } else {
                sentinel_failed(t, i, crd__now_ms());
            }
        }
        now = crd__now_ms();
        if (check || now >= next_scan) {
            scan(c);
            check = false;
            now = crd__now_ms();
            next_scan = interval > 0 ? now + interval : INT64_MAX;
        }
        /* Sleep until a message, the next scan, or the next reconnect. */
        int64_t wake = next_scan;
        nfds_t np = 0;
        bool buffered = false;
        for (size_t i = 0; i < n; i++) {
            if (t->sub[i].ctx != NULL) {
                pfd[np] = (struct pollfd){t->sub[i].ctx->fd, POLLIN, 0};
                who[np++] = i;
                buffered = buffered || crd__conn_buffered(&t->sub[i]);
            } else if (t->retry_at[i] < wake) {
                wake = t->retry_at[i];
            }
        }
        pfd[np] = (struct pollfd){t->pipe_fd[0], POLLIN, 0};
        int64_t left = wake == INT64_MAX ? -1 : wake - now < 0 ? 0 : wake - now;
        int pn = poll(pfd, np + 1, buffered ? 0 : left > 60000 ? 60000 : (int)left);
        if (pn < 0 && errno != EINTR)
            break;
        if (pfd[np].revents & POLLIN) {
            char buf[64];
            while (read(t->pipe_fd[0], buf, sizeof buf) > 0) {
            }
            pthread_mutex_lock(&t->mu);
            check = check || t->check_now;
            t->check_now = false;
            pthread_mutex_unlock(&t->mu);
        }
        for (nfds_t k = 0; k < np; k++) {
            size_t i = who[k];
            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) && !crd__conn_buffered(&t->sub[i]))
                continue;
            bool alive = crd__conn_fill(&t->sub[i]) == REDIS_OK;
            void *reply = NULL;
            while (alive && redisGetReplyFromReader(t->sub[i].ctx, &reply) == REDIS_OK &&
                   reply != NULL) {
                if (is_our_switch(t, reply)) {
                    crd__log(c, CRD_LOG_INFO, "sentinel mode: +switch-master for '%s' from "
                             "sentinel %s:%d; asking the sentinels", t->cfg.master,
                             t->cfg.addrs[i].host, t->cfg.addrs[i].port);
                    check = true;
                }
                freeReplyObject(reply);
                reply = NULL;
            }
            if (!alive || t->sub[i].ctx->err) {
                crd__conn_close(&t->sub[i]);
                sentinel_failed(t, i, crd__now_ms());
            }
        }
    }
    free(pfd);
    free(who);
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
        if (t->pipe_fd[0] >= 0 && crd__thread_create(&t->thread, listener_main, c) == 0)
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
    crd__thread_stop(c, &t->mu, NULL, &t->stop, &t->started, &t->thread, t->pipe_fd[1]);
    t->started = false;
}

void crd__topology_free(crd_client *c)
{
    crd__topology *t = c->topo;
    if (t == NULL)
        return;
    for (size_t i = 0; t->sub != NULL && t->query != NULL && i < t->cfg.naddrs; i++) {
        crd__conn_close(&t->sub[i]);
        crd__conn_close(&t->query[i]);
    }
    free(t->sub);
    free(t->query);
    free(t->retry_at);
    free(t->fails);
    if (t->pipe_fd[0] >= 0) {
        close(t->pipe_fd[0]);
        close(t->pipe_fd[1]);
    }
    crd__sentinel_cfg_clear(&t->cfg);
    free(t->primary.host);
    crd__mutex_drop(c, CRD__MU_TOPOLOGY, &t->mu, &t->cv);
    free(t);
    c->topo = NULL;
}

/* In a fork child (t->mu held): the listener does not exist here; its connection is
 * abandoned, and the thread starts again at the next connect. */
void crd__topology_after_fork_child(crd_client *c)
{
    crd__topology *t = c->topo;
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->cfg.naddrs; i++) {
        crd__conn_abandon(&t->sub[i]);
        crd__conn_abandon(&t->query[i]);
    }
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
