/*
 * client.c -- the client handle: options, the connection pool, start-up and shutdown,
 * and the process-wide registry that the thread-exit and fork hooks walk.
 *
 * Threads: any. Locks: pool_mu guards the pool's free-slot stack (a leaf: nothing else
 * is taken under it). registry_mu guards the client list; the fork handlers take it and
 * then every client's mutexes, so that the child starts with all of them unlocked and
 * consistent.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- registry, thread exit and fork ----------------------------------------------------- */

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static crd_client *registry;
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
/* This process's pid, refreshed in the fork child handler, so that the per-call check
 * for a handle used across fork() costs a load instead of a getpid() system call. */
static atomic_int current_pid;

void crd__pubsub_lock_for_fork(crd_client *c, bool lock);
void crd__pubsub_after_fork_child(crd_client *c);
void crd__watchdog_lock_for_fork(crd_client *c, bool lock);
void crd__watchdog_after_fork_child(crd_client *c);
void crd__thread_exit_release(crd_client *c, uint64_t owner);

static void on_thread_exit(uint64_t owner)
{
    pthread_mutex_lock(&registry_mu);
    for (crd_client *c = registry; c != NULL; c = c->next_client)
        crd__thread_exit_release(c, owner);
    pthread_mutex_unlock(&registry_mu);
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&registry_mu);
    for (crd_client *c = registry; c != NULL; c = c->next_client) {
        pthread_mutex_lock(&c->pool_mu);
        pthread_mutex_lock(&c->holds->mu);
        crd__pubsub_lock_for_fork(c, true);
        crd__watchdog_lock_for_fork(c, true);
    }
}

static void fork_parent(void)
{
    for (crd_client *c = registry; c != NULL; c = c->next_client) {
        crd__watchdog_lock_for_fork(c, false);
        crd__pubsub_lock_for_fork(c, false);
        pthread_mutex_unlock(&c->holds->mu);
        pthread_mutex_unlock(&c->pool_mu);
    }
    pthread_mutex_unlock(&registry_mu);
}

static void drop_hold(crd__hold *h, void *arg) { crd__holds_remove(arg, h); }

/* Contexts given up in forked children, kept reachable (see crd__abandon_ctx). volatile:
 * nothing reads the array, and without it the compiler drops the stores (the contexts
 * then count as leaked in every fork child). */
static redisContext *volatile abandoned[256];
static size_t nabandoned;

void crd__abandon_ctx(redisContext *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->fd >= 0)
        close(ctx->fd);
    if (nabandoned < sizeof abandoned / sizeof abandoned[0])
        abandoned[nabandoned++] = ctx;
}

/* The child has none of the parent's threads and must never write on the parent's
 * sockets: it gets a new identity, an empty pool (sockets closed, never written), no
 * holds, and subscriber and watchdog threads that start on first use. */
static void fork_child(void)
{
    atomic_store(&current_pid, (int)getpid());
    crd__random_after_fork();
    for (crd_client *c = registry; c != NULL; c = c->next_client) {
        crd__uuid_v4(c->uuid);
        c->pid = getpid();
        /* Idle connections are consistent and can be freed; one checked out by a
         * parent thread may be mid-command: abandon it. */
        bool *idle = calloc((size_t)c->opts.pool_size, sizeof *idle);
        for (int i = 0; idle != NULL && i < c->pool_nfree; i++)
            idle[c->pool_free[i]] = true;
        for (int i = 0; i < c->opts.pool_size; i++) {
            if (idle != NULL && idle[i]) {
                crd__conn_close(&c->pool[i]);
            } else {
                crd__abandon_ctx(c->pool[i].ctx);
                c->pool[i].ctx = NULL;
                c->pool[i].broken = false;
            }
            c->pool_free[i] = i;
        }
        free(idle);
        c->pool_nfree = c->opts.pool_size;
        /* Waiters recorded on the parent's pool_cv do not exist here. */
        memset(&c->pool_cv, 0, sizeof c->pool_cv);
        crd__cond_init(&c->pool_cv);
        crd__holds_foreach(c->holds, drop_hold, c->holds);
        crd__watchdog_after_fork_child(c);
        crd__pubsub_after_fork_child(c);
        crd__watchdog_lock_for_fork(c, false);
        crd__pubsub_lock_for_fork(c, false);
        pthread_mutex_unlock(&c->holds->mu);
        pthread_mutex_unlock(&c->pool_mu);
    }
    pthread_mutex_unlock(&registry_mu);
}

static void install_hooks(void)
{
    atomic_store(&current_pid, (int)getpid());
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    crd__owner_set_exit_hook(on_thread_exit);
}

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
    o->pool_size = 8;
    o->watchdog_timeout_ms = 30000;
    o->subscription_timeout_ms = 7500;
    o->poll_interval_ms = 1000;
    o->fair_wait_timeout_ms = 300000;
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
#undef RANGE
    if (o->pool_size < 1 || o->pool_size > 1024)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "pool_size must be from 1 to 1024 (got %d)",
                         o->pool_size);
    return CRD_OK;
}

static crd_status setup_endpoint(crd_client *c, const crd_options *o)
{
    if (o->url != NULL) {
        char err[200];
        crd_status st = crd__url_parse(o->url, &c->ep, err, sizeof err);
        if (st != CRD_OK)
            return crd__fail(c, st, "bad URL: %s", err);
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
    return CRD_OK;
}

/* ---- pool ------------------------------------------------------------------------------ */

crd_status crd__client_check(crd_client *c)
{
    if (c == NULL)
        return crd__fail(NULL, CRD_INVALID_ARGUMENT, "client is NULL");
    if (c->failed)
        return crd__fail(c, CRD_CLOSED, "client failed to start: %s", c->errmsg_init);
    if (atomic_load(&c->closed))
        return crd__fail(c, CRD_CLOSED, "client is closed");
    if (c->pid != (pid_t)atomic_load_explicit(&current_pid, memory_order_relaxed))
        return crd__fail(c, CRD_FORKED, "client was created in another process");
    return CRD_OK;
}

crd_status crd__pool_get(crd_client *c, crd__conn **out)
{
    int64_t deadline = crd__now_ms() + c->opts.connect_timeout_ms + c->opts.command_timeout_ms;
    pthread_mutex_lock(&c->pool_mu);
    while (c->pool_nfree == 0) {
        if (atomic_load(&c->closed)) {
            pthread_mutex_unlock(&c->pool_mu);
            return crd__fail(c, CRD_CLOSED, "client is closed");
        }
        struct timespec ts = crd__abstime(deadline);
        if (crd__now_ms() >= deadline) {
            pthread_mutex_unlock(&c->pool_mu);
            return crd__fail(c, CRD_IO, "all %d pool connections stayed busy", c->opts.pool_size);
        }
        pthread_cond_timedwait(&c->pool_cv, &c->pool_mu, &ts);
    }
    int idx = c->pool_free[--c->pool_nfree];
    pthread_mutex_unlock(&c->pool_mu);
    crd__conn *conn = &c->pool[idx];
    unsigned epoch = atomic_load(&c->pool_epoch);
    if (conn->ctx != NULL && conn->epoch != epoch)
        crd__conn_close(conn); /* opened before a failure: probably dead too */
    if (conn->ctx == NULL) {
        conn->epoch = epoch;
        crd_status st = crd__conn_open(c, conn);
        if (st != CRD_OK) {
            crd__pool_put(c, conn);
            return st;
        }
    }
    *out = conn;
    return CRD_OK;
}

void crd__pool_put(crd_client *c, crd__conn *conn)
{
    if (conn->broken) {
        crd__conn_close(conn);
        atomic_fetch_add(&c->pool_epoch, 1);
    }
    pthread_mutex_lock(&c->pool_mu);
    c->pool_free[c->pool_nfree++] = (int)(conn - c->pool);
    pthread_cond_signal(&c->pool_cv);
    pthread_mutex_unlock(&c->pool_mu);
}

crd_status crd__command(crd_client *c, int argc, const char **argv, const size_t *lens,
                        redisReply **reply)
{
    crd__conn *conn;
    crd_status st = crd__pool_get(c, &conn);
    if (st != CRD_OK)
        return st;
    st = crd__conn_command(c, conn, argc, argv, lens, reply);
    crd__pool_put(c, conn);
    return st;
}

/* ---- lifecycle -------------------------------------------------------------------------- */

static crd_status start(crd_client *c, const crd_options *opts)
{
    crd_status st = validate(c, opts);
    if (st == CRD_OK)
        st = setup_endpoint(c, opts);
    if (st != CRD_OK)
        return st;
    c->pool = calloc((size_t)opts->pool_size, sizeof *c->pool);
    c->pool_free = calloc((size_t)opts->pool_size, sizeof *c->pool_free);
    if (c->pool == NULL || c->pool_free == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the connection pool");
    for (int i = 0; i < opts->pool_size; i++)
        c->pool_free[i] = opts->pool_size - 1 - i;
    c->pool_nfree = opts->pool_size;

    /* Prove the server is there and accepts us (AUTH, SELECT, then PING for servers that
     * require a password we did not give). */
    crd__conn *conn;
    st = crd__pool_get(c, &conn);
    if (st != CRD_OK)
        return st;
    const char *argv[1] = {"PING"};
    size_t lens[1] = {4};
    redisReply *r = NULL;
    st = crd__conn_command(c, conn, 1, argv, lens, &r);
    if (st == CRD_OK && r->type == REDIS_REPLY_ERROR) {
        bool auth = strncmp(r->str, "NOAUTH", 6) == 0;
        st = crd__fail(c, auth ? CRD_AUTH : CRD_SERVER, "PING refused: %.*s", (int)r->len, r->str);
        conn->broken = true;
    }
    if (r != NULL)
        freeReplyObject(r);
    crd__pool_put(c, conn);
    if (st != CRD_OK)
        return st;
    if ((st = crd__pubsub_start(c)) != CRD_OK)
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
    pthread_once(&hooks_once, install_hooks);
    crd_options defaults;
    if (opts == NULL) {
        crd_options_init(&defaults);
        opts = &defaults;
    }
    c->opts = *opts;
    /* Strings of opts are borrowed: only ep keeps copies; drop the borrowed pointers. */
    c->opts.url = c->opts.host = c->opts.unix_path = c->opts.username = c->opts.password = NULL;
    crd__uuid_v4(c->uuid);
    c->pid = getpid();
    pthread_mutex_init(&c->pool_mu, NULL);
    crd__cond_init(&c->pool_cv);
    atomic_init(&c->closed, false);
    if (crd__holds_init(c) != CRD_OK) {
        pthread_cond_destroy(&c->pool_cv);
        pthread_mutex_destroy(&c->pool_mu);
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
    pthread_mutex_lock(&registry_mu);
    c->next_client = registry;
    registry = c;
    pthread_mutex_unlock(&registry_mu);
    crd__ok(c);
    *out = c;
    return CRD_OK;
}

void crd__release_all_on_close(crd_client *c);

void crd_client_free(crd_client *c)
{
    if (c == NULL)
        return;
    if (!c->failed) {
        pthread_mutex_lock(&registry_mu);
        for (crd_client **pp = &registry; *pp != NULL; pp = &(*pp)->next_client)
            if (*pp == c) {
                *pp = c->next_client;
                break;
            }
        pthread_mutex_unlock(&registry_mu);
    }
    crd__watchdog_stop(c);
    if (!c->failed && c->opts.release_on_close && c->pid == getpid())
        crd__release_all_on_close(c);
    atomic_store(&c->closed, true);
    pthread_mutex_lock(&c->pool_mu);
    pthread_cond_broadcast(&c->pool_cv);
    pthread_mutex_unlock(&c->pool_mu);
    crd__pubsub_stop(c);
    /* Woken waiters may still be finishing a command (a fair waiter leaving its queue):
     * wait for every pool connection to come back before closing them. Bounded by the
     * command timeouts of what is in flight. */
    pthread_mutex_lock(&c->pool_mu);
    while (c->pool != NULL && c->pool_nfree < c->opts.pool_size) {
        struct timespec ts = crd__abstime(crd__now_ms() + 100);
        pthread_cond_timedwait(&c->pool_cv, &c->pool_mu, &ts);
    }
    pthread_mutex_unlock(&c->pool_mu);
    if (c->pool != NULL)
        for (int i = 0; i < c->opts.pool_size; i++)
            crd__conn_close(&c->pool[i]);
    free(c->pool);
    free(c->pool_free);
    crd__watchdog_free(c);
    crd__holds_free(c);
    crd__endpoint_clear(&c->ep);
    pthread_cond_destroy(&c->pool_cv);
    pthread_mutex_destroy(&c->pool_mu);
    free(c);
}

const char *crd_client_id(const crd_client *c) { return c == NULL ? "" : c->uuid; }
