/*
 * pubsub.c -- the client's one subscriber connection and the waiters it wakes.
 *
 * A dedicated thread owns the subscriber connection: it is never used for commands and
 * never touched by another thread. Waiters take a reference on a per-channel entry;
 * the first reference makes the thread send SUBSCRIBE, the last one UNSUBSCRIBE, so all
 * local waiters of a lock share one subscription. Each entry has a permit counter and a
 * condition variable: a "0" message adds one permit and wakes one waiter, a "1" adds a
 * permit per waiter and wakes all (Redisson's semaphore semantics). After a reconnect,
 * every entry is resubscribed and, once confirmed, every waiter is woken to re-check,
 * because messages published while disconnected are lost.
 *
 * Lock: ps->mu guards every entry and the connection state. Threads: the subscriber
 * thread (reads, writes the subscriber socket) and callers' threads (wait on entries).
 * Waiters are told what to do through a self-pipe; the thread never blocks on a mutex
 * while holding the socket half-written. In sentinel mode the connection goes to the
 * current primary (sentinel.c) and is reopened when the primary moves.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct crd__sub {
    char *channel;
    size_t len;
    int refs;          /* references held by waiters */
    int64_t permits;   /* wake-ups not yet consumed */
    bool subscribed;   /* confirmed on the current connection */
    bool inflight;     /* SUBSCRIBE or UNSUBSCRIBE sent, confirmation pending */
    bool unsubscribing; /* the one in flight is an UNSUBSCRIBE: not live any more */
    bool recheck;      /* wake everyone once resubscribed (a message may be lost) */
    pthread_cond_t cv;
    struct crd__sub *next;
};

struct crd__pubsub {
    pthread_mutex_t mu;
    pthread_cond_t idle_cv; /* signalled when total_refs drops to 0 */
    crd__sub *subs;
    int total_refs;
    int pipe_fd[2];
    pthread_t thread;
    bool thread_started;
    bool stop;
    crd__conn conn; /* the subscriber connection; only the subscriber thread uses it (a
                       forked child abandons it) */
    char *out;      /* (UN)SUBSCRIBEs encoded under ps->mu, sent after it is released;
                       subscriber thread only */
    size_t out_len, out_cap;
};

static void poke(crd__pubsub *ps)
{
    char b = 1;
    ssize_t n = write(ps->pipe_fd[1], &b, 1);
    (void)n; /* a full pipe already holds a wake-up */
}

static crd__sub *find(crd__pubsub *ps, const char *ch, size_t len)
{
    for (crd__sub *s = ps->subs; s != NULL; s = s->next)
        if (s->len == len && memcmp(s->channel, ch, len) == 0)
            return s;
    return NULL;
}

/* A message published now will reach this entry. */
static bool live(const crd__sub *s) { return s->subscribed && !s->unsubscribing; }

static void free_sub(crd__sub *s)
{
    pthread_cond_destroy(&s->cv);
    free(s->channel);
    free(s);
}

/* Adds permits and wakes; all = a "1" message or a resubscribe. */
static void wake(crd__sub *s, bool all)
{
    if (all) {
        s->permits += s->refs > 0 ? s->refs : 1;
        pthread_cond_broadcast(&s->cv);
    } else {
        if (s->permits < s->refs)
            s->permits++;
        pthread_cond_signal(&s->cv);
    }
}

/* ---- the subscriber thread ----------------------------------------------------------- */

/* Queues the (UN)SUBSCRIBEs that bring the server in line with the entries, and frees
 * entries nobody wants that are no longer subscribed. Caller holds ps->mu. */
static void sync_entries(crd_client *c)
{
    crd__pubsub *ps = c->ps;
    crd__sub **pp = &ps->subs;
    while (*pp != NULL) {
        crd__sub *s = *pp;
        bool want = s->refs > 0;
        if (!s->inflight && want && !s->subscribed) {
            const char *argv[2] = {"SUBSCRIBE", s->channel};
            size_t lens[2] = {9, s->len};
            /* Out of memory: the entry stays as it is and is retried on the next pass. */
            if (crd__resp_append(&ps->out, &ps->out_len, &ps->out_cap, 2, argv, lens))
                s->inflight = true;
        } else if (!s->inflight && !want && s->subscribed) {
            const char *argv[2] = {"UNSUBSCRIBE", s->channel};
            size_t lens[2] = {11, s->len};
            if (!crd__resp_append(&ps->out, &ps->out_len, &ps->out_cap, 2, argv, lens)) {
                pp = &s->next;
                continue;
            }
            s->inflight = true;
            s->unsubscribing = true;
        } else if (!s->inflight && !want && !s->subscribed) {
            *pp = s->next;
            free_sub(s);
            continue;
        }
        pp = &s->next;
    }
}

static void handle_reply(crd_client *c, redisReply *r)
{
    crd__pubsub *ps = c->ps;
    if (r->type == REDIS_REPLY_ERROR) {
        /* A refused SUBSCRIBE (an ACL user without the channel: NOPERM) is never
         * confirmed: its waiters fall back to re-checking every poll_interval_ms. Say so
         * instead of degrading in silence. */
        crd__log(c, CRD_LOG_WARN, "subscriber: the server refused a (UN)SUBSCRIBE: %.*s "
                 "(waiters re-check every poll_interval_ms instead of being woken)",
                 (int)(r->len > 200 ? 200 : r->len), r->str);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    const redisReply *ch = r->element[1];
    bool message = strcmp(kind, "message") == 0 || strcmp(kind, "smessage") == 0;
    bool sub = strcmp(kind, "subscribe") == 0 || strcmp(kind, "ssubscribe") == 0;
    bool unsub = strcmp(kind, "unsubscribe") == 0 || strcmp(kind, "sunsubscribe") == 0;
    if (sub || unsub) {
        const char *argv[2] = {sub ? "SUBSCRIBE" : "UNSUBSCRIBE", ch->str};
        size_t lens[2] = {strlen(argv[0]), ch->len};
        crd__trace(c, 2, argv, lens, r, NULL, true);
    }
    pthread_mutex_lock(&ps->mu);
    crd__sub *s = find(ps, ch->str, ch->len);
    if (s != NULL) {
        if (message) {
            /* A message that arrives while an UNSUBSCRIBE is in flight was published before
             * any waiter that joined since is subscribed; that waiter re-checks once its
             * own subscription is confirmed anyway, so the message would only cost it a
             * useless retry. */
            const redisReply *p = r->element[2];
            bool all = p->type == REDIS_REPLY_STRING && p->len == 1 && p->str[0] == '1';
            if (live(s))
                wake(s, all);
        } else if (sub) {
            CRD__COUNT(c, subscribes);
            s->inflight = false;
            s->subscribed = true;
            if (s->recheck) {
                s->recheck = false;
                wake(s, true);
            } else {
                pthread_cond_broadcast(&s->cv); /* waiters waiting for the confirmation */
            }
        } else if (unsub) {
            s->inflight = false;
            s->unsubscribing = false;
            s->subscribed = false;
        }
    }
    pthread_mutex_unlock(&ps->mu);
}

/* Marks every entry unsubscribed after the connection died. */
static void lost_connection(crd__pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    for (crd__sub *s = ps->subs; s != NULL; s = s->next) {
        if (s->subscribed || s->inflight)
            s->recheck = s->refs > 0;
        s->subscribed = false;
        s->inflight = false;
        s->unsubscribing = false;
    }
    pthread_mutex_unlock(&ps->mu);
}

static bool flush_out(crd__pubsub *ps)
{
    const char *why = NULL;
    bool ok = ps->out_len == 0 || crd__conn_send(&ps->conn, ps->out, ps->out_len, &why);
    ps->out_len = 0;
    return ok;
}

/* Waits on the self-pipe for ms (reconnect back-off); false when told to stop. */
static bool pause_ms(crd__pubsub *ps, int ms)
{
    struct pollfd p = {ps->pipe_fd[0], POLLIN, 0};
    poll(&p, 1, ms);
    char buf[64];
    while (read(ps->pipe_fd[0], buf, sizeof buf) > 0) {
    }
    pthread_mutex_lock(&ps->mu);
    bool stop = ps->stop;
    pthread_mutex_unlock(&ps->mu);
    return !stop;
}

static void *subscriber_main(void *arg)
{
    crd_client *c = arg;
    /* (UN)SUBSCRIBEs go out with send(MSG_NOSIGNAL); SIGPIPE stays blocked here all the
     * same, so that nothing this thread writes can kill the caller's process. */
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
    crd__pubsub *ps = c->ps;
    int backoff = 50;
    uint64_t generation = 0;
    bool sentinel = crd__topology_sentinel(c);
    for (;;) {
        pthread_mutex_lock(&ps->mu);
        bool stop = ps->stop;
        pthread_mutex_unlock(&ps->mu);
        if (stop)
            break;
        crd__conn *conn = &ps->conn;
        if (crd__conn_open_primary(c, conn) != CRD_OK) {
            if (!pause_ms(ps, backoff))
                break;
            backoff = backoff < 1000 ? backoff * 2 : 1000;
            continue;
        }
        backoff = 50;
        redisContext *ctx = conn->ctx;
        if (generation++ > 0)
            crd__log(c, CRD_LOG_INFO, "subscriber connection reopened; resubscribing and waking "
                     "every waiter to re-check");

        bool alive = true;
        ps->out_len = 0;
        while (alive) {
            pthread_mutex_lock(&ps->mu);
            stop = ps->stop;
            if (!stop)
                sync_entries(c);
            pthread_mutex_unlock(&ps->mu);
            if (stop || !flush_out(ps))
                break;
            struct pollfd p[2] = {{ctx->fd, POLLIN, 0}, {ps->pipe_fd[0], POLLIN, 0}};
            /* TLS may hold decrypted bytes the socket no longer shows: read them first.
             * Sentinel mode wakes every 250 ms to see whether the primary moved. */
            int n = crd__conn_buffered(conn) ? 0 : poll(p, 2, sentinel ? 250 : -1);
            if (sentinel && conn->topo_gen != crd__topology_gen(c))
                break; /* reconnect to the new primary; every waiter re-checks */
            if (n == 0 && !crd__conn_buffered(conn))
                continue;
            if (n < 0 && errno != EINTR)
                break;
            if (n == 0)
                p[0].revents = POLLIN;
            if (p[1].revents & POLLIN) {
                char buf[64];
                while (read(ps->pipe_fd[0], buf, sizeof buf) > 0) {
                }
            }
            if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                if (crd__conn_fill(conn) != REDIS_OK) {
                    alive = false;
                    break;
                }
                void *reply = NULL;
                while (redisGetReplyFromReader(ctx, &reply) == REDIS_OK && reply != NULL) {
                    handle_reply(c, reply);
                    freeReplyObject(reply);
                    reply = NULL;
                }
                if (ctx->err)
                    alive = false;
            }
        }
        uint64_t gen = conn->topo_gen;
        bool failed = !alive;
        crd__conn_close(conn);
        lost_connection(ps);
        if (failed && sentinel)
            crd__topology_changed(c, gen); /* the primary may have gone */
    }
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------------------- */

/* Starts the subscriber thread if it is not running. Caller holds ps->mu. */
static crd_status start_thread(crd_client *c)
{
    crd__pubsub *ps = c->ps;
    if (ps->thread_started)
        return CRD_OK;
    if (ps->pipe_fd[0] < 0)
        return crd__fail(c, CRD_IO, "the subscriber's wake-up pipe could not be created");
    if (pthread_create(&ps->thread, NULL, subscriber_main, c) != 0)
        return crd__fail(c, CRD_NO_MEMORY, "cannot start the subscriber thread");
    ps->thread_started = true;
    return CRD_OK;
}

crd_status crd__pubsub_start(crd_client *c)
{
    crd__pubsub *ps = calloc(1, sizeof *ps);
    if (ps == NULL)
        return CRD_NO_MEMORY;
    if (pipe2(ps->pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        free(ps);
        return crd__fail(c, CRD_IO, "cannot create the subscriber's wake-up pipe");
    }
    pthread_mutex_init(&ps->mu, NULL);
    crd__cond_init(&ps->idle_cv);
    c->ps = ps;
    pthread_mutex_lock(&ps->mu);
    crd_status st = start_thread(c);
    pthread_mutex_unlock(&ps->mu);
    return st;
}

void crd__pubsub_lock_for_fork(crd_client *c, bool lock)
{
    if (lock)
        pthread_mutex_lock(&c->ps->mu);
    else
        pthread_mutex_unlock(&c->ps->mu);
}

/* In a forked child (ps->mu held by the fork handler): the subscriber thread does not
 * exist here. Close the inherited subscriber socket and pipe without writing to them;
 * the thread is started again on first use. */
void crd__pubsub_after_fork_child(crd_client *c)
{
    crd__pubsub *ps = c->ps;
    /* The parent's subscriber thread may have been inside hiredis on this context. */
    crd__conn_abandon(&ps->conn);
    close(ps->pipe_fd[0]);
    close(ps->pipe_fd[1]);
    if (pipe2(ps->pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0)
        ps->pipe_fd[0] = ps->pipe_fd[1] = -1;
    /* Condition variables inherited from the parent may record waiters that do not
     * exist here: never destroy them (glibc would wait for those waiters forever). */
    while (ps->subs != NULL) {
        crd__sub *s = ps->subs;
        ps->subs = s->next;
        free(s->channel);
        free(s);
    }
    memset(&ps->idle_cv, 0, sizeof ps->idle_cv);
    crd__cond_init(&ps->idle_cv);
    ps->total_refs = 0;
    ps->thread_started = false;
    ps->stop = false;
}

void crd__pubsub_stop(crd_client *c)
{
    crd__pubsub *ps = c->ps;
    if (ps == NULL)
        return;
    /* Waiters see c->closed; wait for them to drop their references. */
    pthread_mutex_lock(&ps->mu);
    for (crd__sub *s = ps->subs; s != NULL; s = s->next)
        pthread_cond_broadcast(&s->cv);
    while (ps->total_refs > 0)
        pthread_cond_wait(&ps->idle_cv, &ps->mu);
    ps->stop = true;
    pthread_mutex_unlock(&ps->mu);
    poke(ps);
    if (ps->thread_started)
        pthread_join(ps->thread, NULL);
    while (ps->subs != NULL) {
        crd__sub *s = ps->subs;
        ps->subs = s->next;
        free_sub(s);
    }
    close(ps->pipe_fd[0]);
    close(ps->pipe_fd[1]);
    free(ps->out);
    pthread_cond_destroy(&ps->idle_cv);
    pthread_mutex_destroy(&ps->mu);
    free(ps);
    c->ps = NULL;
}

/* ---- waiters ------------------------------------------------------------------------- */

crd_status crd__sub_acquire(crd_client *c, const char *channel, size_t len,
                            int64_t deadline_ms, crd__sub **out, bool *confirmed)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    crd_status st = start_thread(c);
    if (st != CRD_OK) {
        pthread_mutex_unlock(&ps->mu);
        return st;
    }
    crd__sub *s = find(ps, channel, len);
    if (s == NULL) {
        s = calloc(1, sizeof *s);
        if (s != NULL)
            s->channel = malloc(len + 1);
        if (s == NULL || s->channel == NULL) {
            free(s);
            pthread_mutex_unlock(&ps->mu);
            return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a subscription");
        }
        memcpy(s->channel, channel, len);
        s->channel[len] = '\0';
        s->len = len;
        crd__cond_init(&s->cv);
        s->next = ps->subs;
        ps->subs = s;
    }
    s->refs++;
    ps->total_refs++;
    if (!live(s))
        poke(ps);
    while (!live(s) && !atomic_load(&c->closed)) {
        if (crd__now_ms() >= deadline_ms)
            break;
        struct timespec ts = crd__abstime(deadline_ms);
        pthread_cond_timedwait(&s->cv, &ps->mu, &ts);
    }
    *confirmed = live(s);
    pthread_mutex_unlock(&ps->mu);
    *out = s;
    return atomic_load(&c->closed) ? CRD_CLOSED : CRD_OK;
}

void crd__sub_release(crd_client *c, crd__sub *s)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    s->refs--;
    ps->total_refs--;
    if (s->refs == 0) {
        s->permits = 0;
        poke(ps); /* under the mutex: crd__pubsub_stop may close the pipe once we leave */
    }
    if (ps->total_refs == 0)
        pthread_cond_broadcast(&ps->idle_cv);
    pthread_mutex_unlock(&ps->mu);
}

crd_status crd__sub_wait(crd_client *c, crd__sub *s, int64_t deadline_ms, bool *confirmed)
{
    crd__pubsub *ps = c->ps;
    crd_status st = CRD_TIMEOUT;
    pthread_mutex_lock(&ps->mu);
    for (;;) {
        if (atomic_load(&c->closed)) {
            st = CRD_CLOSED;
            break;
        }
        if (s->permits > 0) {
            s->permits--;
            st = CRD_OK;
            break;
        }
        if (crd__now_ms() >= deadline_ms)
            break;
        struct timespec ts = crd__abstime(deadline_ms);
        pthread_cond_timedwait(&s->cv, &ps->mu, &ts);
    }
    *confirmed = live(s);
    pthread_mutex_unlock(&ps->mu);
    return st;
}
