/*
 * engine.c -- the client's I/O thread and its peers (a peer is one server or cluster
 * node: crd__pool). engine.h says what a request is and what becomes of a late reply.
 *
 * Shape: one thread per client runs poll() over the wake-up eventfd and every link of
 * every peer. A submitter appends its request to the peer's queue under the engine's
 * mutex and wakes the thread (one eventfd write, only while it sleeps in poll). Each pass
 * the thread moves queued requests onto the busiest ready link of their peer that may
 * take more (opening another, up to opts.pool_size per peer, when none may), writes,
 * reads, and completes requests in order as their replies arrive: a waiting thread
 * sleeps on its request's own word (a futex), is woken there once the thread has let go
 * of the mutex, and takes its reply without the mutex; an on_done/on_late completion is
 * collected and run after the mutex is released. The next poll() timeout is the earliest of the
 * requests' deadlines and the links' health limits.
 *
 * Corked submissions: what one event-loop dispatch pass submits is queued without waking
 * the thread and, when the pass ends, written by the loop thread itself (one non-blocking
 * send per plaintext link) if the thread sleeps in poll() and that poll already covers it;
 * otherwise the thread is woken as usual (crd__engine_uncork).
 *
 * The direct path: a waiting caller whose peer has nothing queued or in flight on the
 * thread's links, and an idle link, runs its round trip on that link itself (the link is
 * lent: the I/O thread leaves it alone), so an uncontended call wakes no other thread;
 * the hand-off lends one to its waiter. On a plaintext link the caller waits for its
 * reply in one blocking recv() (crd__link_wait, link.c), otherwise in poll().
 *
 * Connection failures: a connect that fails fails the peer's queued requests (nothing was
 * sent: CRD_IO, callers may route elsewhere), except "retry" requests (undo.c's
 * clean-ups), which wait for a later connect until their deadline. A link that breaks
 * fails its in-flight requests with CRD_IO (they may have run: the caller reads back),
 * and its idle siblings are closed too (a server restart kills them all).
 *
 * Threads: the I/O thread; submitters and waiters on any thread. Lock: e->mu (taken
 * after the subscriber's ps->mu, before holds->mu; nothing else is taken under it except
 * the topology's leaf mutex, and no callback runs under it).
 */
#include "engine_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread bool crd__eng_on_io_thread;
__thread struct crd__engine *crd__eng_corked;
__thread int crd__eng_cork_depth;

/* ---- requests ------------------------------------------------------------------------- */

crd__req *crd__req_new(crd__pool *peer, int nreply)
{
    crd__req *rq = calloc(1, sizeof *rq);
    if (rq == NULL)
        return NULL;
    rq->peer = peer;
    rq->nreply = nreply;
    atomic_init(&rq->refs, 1);
    rq->replies = rq->inline_replies;
    if (nreply > 2 && (rq->replies = calloc((size_t)nreply, sizeof *rq->replies)) == NULL) {
        free(rq);
        return NULL;
    }
    return rq;
}

bool crd__req_add(crd__req *rq, int argc, const char *const *argv, const size_t *lens)
{
    return crd__resp_append(&rq->buf, &rq->len, &rq->cap, argc, argv, lens);
}

void crd__req_free(crd__req *rq)
{
    if (rq == NULL || atomic_fetch_sub_explicit(&rq->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (int i = 0; i < rq->nreply; i++)
        if (rq->replies[i] != NULL)
            freeReplyObject(rq->replies[i]);
    if (rq->replies != rq->inline_replies)
        free(rq->replies);
    if (rq->arg_free != NULL)
        rq->arg_free(rq->arg);
    free(rq->buf);
    free(rq);
}

/* Reads a RESP length line at *p ("<c><digits>\r\n"); -1 when malformed. */
static long resp_len(const char **p, const char *end, char c)
{
    if (*p >= end || **p != c)
        return -1;
    long n = 0;
    const char *q = *p + 1;
    while (q < end && *q >= '0' && *q <= '9')
        n = n * 10 + (*q++ - '0');
    if (q + 2 > end || q[0] != '\r')
        return -1;
    *p = q + 2;
    return n;
}

/* Tells on_trace about each command of rq and its reply (or what failed). Runs on the
 * thread that completes rq for its caller, outside the engine's mutex. */
void crd__eng_trace(crd_client *c, const crd__req *rq, crd_status st)
{
    if (c->opts.on_trace == NULL)
        return;
    const char *p = rq->buf, *end = rq->buf + rq->len;
    for (int k = 0; p < end && k < rq->nreply; k++) {
        long argc = resp_len(&p, end, '*');
        if (argc <= 0 || argc > 4096)
            return;
        const char **argv = malloc((size_t)argc * sizeof *argv);
        size_t *lens = malloc((size_t)argc * sizeof *lens);
        bool ok = argv != NULL && lens != NULL;
        for (long i = 0; ok && i < argc; i++) {
            long n = resp_len(&p, end, '$');
            ok = n >= 0 && p + n + 2 <= end;
            if (ok) {
                argv[i] = p;
                lens[i] = (size_t)n;
                p += n + 2;
            }
        }
        if (ok)
            crd__trace(c, (int)argc, argv, lens, st == CRD_OK ? rq->replies[k] : NULL,
                       st == CRD_OK ? NULL : rq->why[0] ? rq->why : crd_strerror(st), false);
        free(argv);
        free(lens);
        if (!ok)
            return;
    }
}

/* ---- peers ------------------------------------------------------------------------------ */

crd__pool *crd__pool_new(crd_client *c, const crd__endpoint *ep)
{
    crd__pool *p = calloc(1, sizeof *p);
    int n = c->opts.pool_size;
    if (p == NULL || (p->links = calloc((size_t)n, sizeof *p->links)) == NULL) {
        free(p);
        return NULL;
    }
    p->c = c;
    p->ep = ep;
    p->nlinks = n;
    for (int i = 0; i < n; i++)
        crd__link_init(&p->links[i]);
    crd__engine *e = engine_of(c);
    pthread_mutex_lock(&e->mu);
    p->next = e->peers;
    e->peers = p;
    pthread_mutex_unlock(&e->mu);
    return p;
}

const crd__endpoint *crd__pool_ep(const crd__pool *p) { return p->ep; }

/* Peers live as long as the engine (crd__engine_free frees them). */
void crd__pool_destroy(crd__pool *p) { (void)p; }

int crd__pool_replicas(crd__pool *p, int64_t now, int64_t max_age, bool *fresh)
{
    crd__engine *e = engine_of(p->c);
    pthread_mutex_lock(&e->mu);
    *fresh = p->replicas_at != 0 && now - p->replicas_at < max_age;
    int n = p->replicas;
    pthread_mutex_unlock(&e->mu);
    return n;
}

void crd__pool_set_replicas(crd__pool *p, int n, int64_t now)
{
    crd__engine *e = engine_of(p->c);
    pthread_mutex_lock(&e->mu);
    p->replicas = n;
    p->replicas_at = now;
    pthread_mutex_unlock(&e->mu);
}

bool crd__pool_failing(crd__pool *p, char *why, size_t n)
{
    crd__engine *e = engine_of(p->c);
    pthread_mutex_lock(&e->mu);
    bool failing = p->backoff_ms != 0;
    snprintf(why, n, "%s", failing ? p->last_why : "");
    pthread_mutex_unlock(&e->mu);
    return failing;
}

static void free_peer(crd__pool *p)
{
    for (int i = 0; i < p->nlinks; i++)
        crd__link_close(&p->links[i]);
    while (p->unhealthy != NULL) {
        crd__link *l = p->unhealthy;
        p->unhealthy = l->next;
        crd__link_close(l);
        free(l);
    }
    free(p->links);
    free(p);
}

/* ---- completion ------------------------------------------------------------------------- */

/* rq is finished (replies, or a failure): wake its waiter, or collect its callback. */
static void collect(crd__engine *e, crd__req *rq)
{
    CRD__APPEND(e->done_head, e->done_tail, rq, done_next);
}

/* An abandoned request's end (its late reply, or its link's): on_late, or freed. */
void crd__eng_late_done(crd__engine *e, crd__req *rq)
{
    if (rq->abandoned && rq->on_late == NULL)
        crd__req_free(rq);
    else
        collect(e, rq);
}

/* The waiting thread's futex: it sleeps while *w is 0, until deadline_ms (monotonic). */
void crd__eng_park(atomic_int *w, int64_t deadline_ms)
{
    struct timespec ts = crd__abstime(deadline_ms);
    syscall(SYS_futex, w, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0, &ts, NULL,
            FUTEX_BITSET_MATCH_ANY);
}

static void unpark(atomic_int *w) { syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

/* Wakes rq's thread and lets go of the reference the wake-up held. */
static void wake_now(crd__req *rq)
{
    unpark(&rq->fin);
    crd__req_free(rq);
}

/* Sets rq's word to v and wakes its thread (under e->mu; on the I/O thread the wake-up
 * waits until it lets go of the mutex: unlock_and_wake). With v 1 the thread may take rq at
 * once and let go of it: the wake-up holds a reference of its own until it is made (the
 * word stays valid memory for the futex call), and the last one frees rq. A wake-up that
 * comes after the thread has moved on is a spurious one, which every sleeper allows for. */
static void wake_caller(crd__engine *e, crd__req *rq, int v)
{
    atomic_fetch_add_explicit(&rq->refs, 1, memory_order_relaxed);
    atomic_store_explicit(&rq->fin, v, memory_order_release);
    if (crd__eng_on_io_thread && e->nwakes < WAKES_MAX)
        e->wakes[e->nwakes++] = rq;
    else
        wake_now(rq);
}

/* Lets go of e->mu and makes the wake-ups held back meanwhile. */
void crd__eng_unlock_and_wake(crd__engine *e)
{
    crd__req *w[WAKES_MAX];
    int n = e->nwakes;
    memcpy(w, e->wakes, sizeof w[0] * (size_t)n);
    e->nwakes = 0;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < n; i++)
        wake_now(w[i]);
}

void crd__eng_complete(crd__engine *e, crd__req *rq)
{
    rq->state = RQ_DONE;
    rq->next = NULL;
    if (rq->waited && !rq->caller_left) {
        /* Its caller waits, or has yet to (a hand-off's waiter): wait_for takes it from
         * here, also when it was told early and is woken but not yet running. Not told
         * early, it is the caller's from now on: only the wake-up (its own reference)
         * touches it again. */
        wake_caller(e, rq, rq->abandoned ? 2 : 1);
        return;
    }
    if (rq->notified && !rq->abandoned && !rq->waited)
        return; /* its early notice is still in the completions list: it carries this */
    crd__eng_late_done(e, rq);
}

/* rq's caller went away while it was written and unanswered (an acquire's job then counts
 * as under way in undo.c's registry until its reply or its link's end reaches on_late). */
void crd__eng_abandon(crd__req *rq)
{
    rq->abandoned = true;
    if (rq->on_abandon != NULL && rq->arg != NULL)
        rq->on_abandon(rq->arg);
}

/* Tells rq's caller st now although rq stays in line for its reply (its deadline passed,
 * or its link became unhealthy); the reply, when it comes, goes to on_late. */
void crd__eng_tell_early(crd__engine *e, crd__req *rq, crd_status st, const char *why)
{
    if (rq->abandoned || rq->notified)
        return;
    rq->notified = true;
    rq->link_answered = rq->link != NULL && rq->link->replied;
    rq->st = st;
    snprintf(rq->why, sizeof rq->why, "%s", why);
    if (rq->waited) {
        crd__eng_abandon(rq);
        wake_caller(e, rq, 2);
    } else if (rq->on_done != NULL) {
        collect(e, rq); /* abandoned once its on_done has run */
    } else {
        crd__eng_abandon(rq);
    }
}

void crd__eng_fail(crd__engine *e, crd__req *rq, crd_status st, const char *why)
{
    rq->st = st;
    snprintf(rq->why, sizeof rq->why, "%.*s", (int)sizeof rq->why - 1, why);
    crd__eng_complete(e, rq);
}

/* A request never written because its deadline passed in the queue: -1 while its peer's
 * connection is merely being set up, 0 (and the last connect failure appended to why) when
 * the peer's last connect failed. Under e->mu. */
int crd__eng_not_sent(const crd__req *rq, char *why, size_t n)
{
    const crd__pool *p = rq->peer;
    if (p == NULL || p->backoff_ms == 0)
        return -1;
    size_t len = strlen(why);
    if (len < n)
        snprintf(why + len, n - len, "; the last connect failed: %.150s", p->last_why);
    return 0;
}

/* Fails rq, taken from its peer's queue, whose deadline passed before it was written. */
void crd__eng_fail_unsent(crd__engine *e, crd__req *rq)
{
    char why[sizeof rq->why] = "the deadline passed before the command could be sent";
    rq->unsent = crd__eng_not_sent(rq, why, sizeof why) < 0;
    crd__eng_fail(e, rq, CRD_TIMEOUT, why);
}

/* Runs the collected callbacks; called with e->mu held, returns with it held. */
void crd__eng_run_completions(crd_client *c, crd__engine *e)
{
    while (e->done_head != NULL) {
        crd__req *list = e->done_head;
        e->done_head = e->done_tail = NULL;
        crd__eng_unlock_and_wake(e);
        /* Only this thread completes requests: one still in flight here (told early)
         * stays in its link's line, untouched by anyone else, until its reply. */
        while (list != NULL) {
            crd__req *rq = list;
            list = rq->done_next;
            if (rq->state != RQ_DONE) {
                crd__eng_trace(c, rq, rq->st);
                rq->on_done(c, rq);
                rq->abandoned = true; /* relaxed: read by this thread only */
                continue;
            }
            crd__eng_trace(c, rq, rq->st);
            if (rq->abandoned)
                rq->on_late(c, rq);
            else if (rq->on_done != NULL)
                rq->on_done(c, rq);
            crd__req_free(rq);
        }
        pthread_mutex_lock(&e->mu);
    }
}

/* ---- links -------------------------------------------------------------------------------- */

void crd__eng_unlink_head(crd__link *l)
{
    crd__req *rq = l->head;
    l->head = rq->next;
    if (l->head == NULL)
        l->tail = NULL;
    l->inflight--;
    if (rq->blocks_ms > 0)
        l->waits--;
}

/* Fails every request l owes with st (they were sent: they may have run), closes it. */
void crd__eng_drop_link(crd__engine *e, crd__link *l, crd_status st, const char *why)
{
    char text[300];
    snprintf(text, sizeof text, "%s", why);
    while (l->head != NULL) {
        crd__req *rq = l->head;
        crd__eng_unlink_head(l);
        rq->link = NULL;
        crd__eng_fail(e, rq, st, text);
    }
    crd__link_close(l);
}

/* The connection setup that goes first on a new link: AUTH, SELECT. */
static bool queue_setup(crd_client *c, const crd__endpoint *ep, crd__link *l)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    bool ok = true;
    l->setup = 0;
    if (ep->password != NULL) {
        const char *argv[3] = {"AUTH", ep->username, ep->password};
        size_t lens[3] = {4, ep->username ? strlen(ep->username) : 0, strlen(ep->password)};
        if (ep->username != NULL)
            ok = crd__resp_append(&buf, &len, &cap, 3, argv, lens);
        else {
            argv[1] = ep->password;
            lens[1] = lens[2];
            ok = crd__resp_append(&buf, &len, &cap, 2, argv, lens);
        }
        l->setup_kind[l->setup++] = 'A';
    }
    if (ok && c->ep.db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", c->ep.db);
        const char *argv[2] = {"SELECT", db};
        size_t lens[2] = {6, strlen(db)};
        ok = crd__resp_append(&buf, &len, &cap, 2, argv, lens);
        l->setup_kind[l->setup++] = 'S';
    }
    l->setup_next = 0;
    ok = ok && (len == 0 || crd__link_queue(l, buf, len));
    free(buf);
    return ok;
}

/* Fails the peer's queued requests that may not wait for a later connect. */
void crd__eng_fail_queue(crd__engine *e, crd__pool *p, crd_status st, const char *why)
{
    crd__req **pp = &p->qhead, *last = NULL;
    while (*pp != NULL) {
        crd__req *rq = *pp;
        if (rq->retry) {
            last = rq;
            pp = &rq->next;
            continue;
        }
        *pp = rq->next;
        crd__eng_fail(e, rq, st, why);
    }
    p->qtail = last;
}

/* Opens link l of peer p; false when it failed at once (queued requests failed). */
bool crd__eng_open_link(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l, int64_t now)
{
    char why[300] = "";
    crd__endpoint ep;
    uint64_t gen = 0;
    crd_status st = CRD_OK;
    bool primary = p->ep == &c->ep && c->primary_at != NULL;
    if (primary)
        st = c->primary_at(c, &ep, &gen, why, sizeof why);
    const crd__endpoint *to = primary ? &ep : p->ep;
    if (st == CRD_OK && crd__link_open(l, to, c->tls, c->tls_name, c->tls_verify, why,
                                       sizeof why) == 0 && queue_setup(c, to, l)) {
        l->topo_gen = gen;
        l->opened_ms = now;
        CRD__COUNT(c, connects);
    } else {
        char msg[400];
        if (to->unix_path != NULL)
            snprintf(msg, sizeof msg, "cannot connect to unix:%s: %s", to->unix_path, why);
        else if (st == CRD_OK)
            snprintf(msg, sizeof msg, "cannot connect to %s:%d: %s", to->host, to->port, why);
        else
            snprintf(msg, sizeof msg, "%s", why);
        crd__link_close(l);
        CRD__COUNT(c, connection_failures);
        /* 50 ms, doubling up to 1 s */
        p->backoff_ms = p->backoff_ms == 0 ? 50 : p->backoff_ms >= 500 ? 1000 : p->backoff_ms * 2;
        p->retry_at = now + p->backoff_ms;
        p->last_st = st == CRD_OK ? CRD_IO : st;
        snprintf(p->last_why, sizeof p->last_why, "%s", msg);
        crd__eng_fail_queue(e, p, p->last_st, msg);
        st = CRD_IO;
    }
    if (primary)
        crd__endpoint_clear(&ep);
    return st == CRD_OK;
}

/* A link failed during its connect or handshake: nothing of the requests was sent. */
void crd__eng_connect_failed(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l,
                           crd_status st, const char *why, int64_t now)
{
    char msg[400];
    const crd__endpoint *ep = p->ep;
    if (ep->unix_path != NULL)
        snprintf(msg, sizeof msg, "cannot connect to unix:%s: %s", ep->unix_path, why);
    else if (p->ep == &c->ep && c->primary_at != NULL)
        snprintf(msg, sizeof msg, "cannot connect to the primary: %s", why);
    else
        snprintf(msg, sizeof msg, "cannot connect to %s:%d: %s", ep->host, ep->port, why);
    CRD__COUNT(c, connection_failures);
    crd__log(c, CRD_LOG_WARN, "%s", msg);
    crd__eng_drop_link(e, l, st, msg);
    p->backoff_ms = p->backoff_ms == 0 ? 50 : p->backoff_ms * 2 > 1000 ? 1000 : p->backoff_ms * 2;
    p->retry_at = now + p->backoff_ms;
    p->last_st = st;
    snprintf(p->last_why, sizeof p->last_why, "%s", msg);
    crd__eng_fail_queue(e, p, st, msg);
}

/* Words for a link that broke after it was set up. */
static void broken_words(crd_client *c, const crd__link *l, crd_status *st, const char *why,
                         char *out, size_t n)
{
    const char *hint = "";
    if (l->ssl == NULL && !l->replied && c->ep.unix_path == NULL &&
        (strstr(why, "reset") != NULL || strstr(why, "closed") != NULL))
        hint = " before its first reply (if the server accepts only TLS, use rediss://)";
    if (l->ssl != NULL && !l->replied && crd__tls_cert_requested(l->ssl)) {
        hint = " before its first reply: the server asked for a client certificate and none "
               "is configured (a client certificate is required? set tls_cert_file and "
               "tls_key_file)";
        *st = CRD_AUTH;
    }
    snprintf(out, n, "%s%s", why, hint);
}

void crd__eng_link_broke(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l,
                       crd_status st, const char *why)
{
    char msg[400];
    broken_words(c, l, &st, why, msg, sizeof msg);
    CRD__COUNT(c, connection_failures);
    crd__log(c, CRD_LOG_WARN, "connection dropped: %s (it is reopened on next use)", msg);
    crd__eng_drop_link(e, l, st, msg);
    /* A server restart kills every connection at once: close the idle siblings too. */
    for (int i = 0; i < p->nlinks; i++)
        if (p->links[i].state == CRD__LINK_READY && p->links[i].inflight == 0)
            crd__link_close(&p->links[i]);
}

/* One reply arrived on l: the setup's, or the head request's. */
static bool take_reply(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l,
                       redisReply *r)
{
    l->replied = true;
    if (l->setup > 0) {
        l->setup--;
        bool select = l->setup_kind[l->setup_next++] == 'S';
        if (r->type == REDIS_REPLY_ERROR) {
            /* Credentials refused, or a database we may not use: CRD_AUTH; anything else
             * (a full server answering every command with an error) is the server's. */
            bool auth = strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "WRONGPASS", 9) == 0 ||
                        strstr(r->str, "password") != NULL || strstr(r->str, "AUTH") != NULL;
            crd_status st = auth || select ? CRD_AUTH : CRD_SERVER;
            char msg[300];
            snprintf(msg, sizeof msg, "%s refused: %.*s", select ? "SELECT" : "AUTH",
                     (int)(r->len > 200 ? 200 : r->len), r->str);
            freeReplyObject(r);
            crd__eng_drop_link(e, l, st, msg);
            crd__eng_fail_queue(e, p, st, msg);
            return false;
        }
        freeReplyObject(r);
        return true;
    }
    crd__req *rq = l->head;
    if (rq == NULL) {
        freeReplyObject(r);
        crd__eng_link_broke(c, e, p, l, CRD_PROTOCOL, "a reply that no command asked for");
        return false;
    }
    rq->replies[rq->got++] = r;
    if (rq->got == rq->nreply) {
        crd__eng_unlink_head(l);
        rq->link = NULL;
        rq->st = CRD_OK;
        crd__eng_complete(e, rq);
    }
    return true;
}

/* Advances l with revents; false when it was closed. */
bool crd__eng_service_link(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l,
                         short revents, int64_t now)
{
    bool was_connecting = l->state == CRD__LINK_CONNECTING || l->state == CRD__LINK_HANDSHAKE;
    bool got = false;
    crd_status st = CRD_IO;
    char why[300] = "";
    if (crd__link_io(l, revents, &got, &st, why, sizeof why) < 0) {
        if (was_connecting && l->inflight == 0)
            crd__eng_connect_failed(c, e, p, l, st, why, now);
        else
            crd__eng_link_broke(c, e, p, l, st, why);
        return false;
    }
    if (was_connecting && l->state == CRD__LINK_READY)
        p->backoff_ms = 0;
    if (got)
        l->quiet_since = now;
    redisReply *r;
    int rc;
    while ((rc = crd__link_reply(l, &r)) == 1)
        if (!take_reply(c, e, p, l, r))
            return false;
    if (rc < 0) {
        crd__eng_link_broke(c, e, p, l, CRD_PROTOCOL, "protocol error");
        return false;
    }
    return true;
}

/* ---- life ---------------------------------------------------------------------------------- */

crd_status crd__engine_start(crd_client *c)
{
    crd__engine *e = calloc(1, sizeof *e);
    if (e == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the engine");
    e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e->wake_fd < 0) {
        free(e);
        return crd__fail(c, CRD_IO, "cannot create the engine's eventfd");
    }
    if (crd__mutex_make(c, CRD__MU_ENGINE, &e->mu, &e->idle) != 0) {
        close(e->wake_fd);
        free(e);
        return crd__fail(c, CRD_NO_MEMORY, "cannot make the engine's mutex");
    }
    c->engine = e;
    return CRD_OK;
}

void crd__eng_wake(crd__engine *e)
{
    if (!e->polling || e->kicked)
        return;
    e->kicked = true;
    uint64_t one = 1;
    while (write(e->wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

void crd__engine_stop(crd_client *c)
{
    crd__engine *e = engine_of(c);
    if (e == NULL)
        return;
    pthread_mutex_lock(&e->mu);
    /* Callers still waiting finish first (each bounded by its deadline). */
    atomic_store(&e->draining, true);
    while (atomic_load(&e->callers) > 0)
        pthread_cond_wait(&e->idle, &e->mu);
    bool started = e->started;
    e->stopping = true;
    e->polling = true;
    e->kicked = false;
    crd__eng_wake(e);
    pthread_mutex_unlock(&e->mu);
    if (started)
        pthread_join(e->thread, NULL);
    pthread_mutex_lock(&e->mu);
    e->started = false;
    for (crd__pool *p = e->peers; p != NULL; p = p->next) {
        crd__eng_fail_queue(e, p, CRD_CLOSED, "client is closed");
        while (p->qhead != NULL) { /* the retry ones too */
            crd__req *rq = p->qhead;
            p->qhead = rq->next;
            crd__eng_fail(e, rq, CRD_CLOSED, "client is closed");
        }
        p->qtail = NULL;
        for (int i = 0; i < p->nlinks; i++)
            crd__eng_drop_link(e, &p->links[i], CRD_CLOSED, "client is closed");
        for (crd__link *u = p->unhealthy; u != NULL; u = u->next)
            crd__eng_drop_link(e, u, CRD_CLOSED, "client is closed"); /* keeps u->next */
    }
    /* Callbacks see CRD_CLOSED (on_late: the client is gone, nothing to clean up). */
    while (e->done_head != NULL) {
        crd__req *rq = e->done_head;
        e->done_head = rq->done_next;
        if (rq->state != RQ_DONE)
            continue;
        if (!rq->abandoned && rq->on_done != NULL) {
            pthread_mutex_unlock(&e->mu);
            rq->on_done(c, rq);
            pthread_mutex_lock(&e->mu);
        }
        crd__req_free(rq);
    }
    e->done_tail = NULL;
    pthread_mutex_unlock(&e->mu);
}

void crd__engine_free(crd_client *c)
{
    crd__engine *e = engine_of(c);
    if (e == NULL)
        return;
    while (e->peers != NULL) {
        crd__pool *p = e->peers;
        e->peers = p->next;
        free_peer(p);
    }
    close(e->wake_fd);
    free(e->pfds);
    free(e->plinks);
    crd__mutex_drop(c, CRD__MU_ENGINE, &e->mu, &e->idle);
    free(e);
    c->engine = NULL;
}



/* Frees a list of requests chained by next (a fork child: their threads are the
 * parent's). An event-loop operation's request is answered CRD_IO first (no wake-up: the
 * loop sees it at its next dispatch, crd_loop_timeout_ms says 0). */
static void free_chain(crd__req *rq)
{
    while (rq != NULL) {
        crd__req *next = rq->next;
        if (rq->on_done == crd__eng_aio_done && !rq->abandoned && !rq->notified) {
            crd__aio *io = rq->done_arg;
            io->st = CRD_IO;
            snprintf(io->why, sizeof io->why, "the process forked while it was in flight (it "
                     "may have run in the parent's connection)");
            if (atomic_exchange(&io->state, 1) == 2)
                free(io);
        }
        crd__req_free(rq);
        rq = next;
    }
}

void crd__engine_after_fork_child(crd_client *c)
{
    crd__engine *e = engine_of(c);
    if (e == NULL)
        return;
    /* A fork inside a dispatch callback: the child's passes start uncrd__eng_corked. */
    crd__eng_corked = NULL;
    crd__eng_cork_depth = 0;
    /* The parent's I/O thread does not exist here, nor do its waiting threads. The fork
     * prepare handler held e->mu, so no pass of that thread was under way: the links and
     * requests are consistent, and the child frees them. Closing the child's copy of a
     * socket leaves the parent's connection open; nothing is written (no TLS
     * close_notify: SSL_free only). */
    e->started = false;
    e->polling = false;
    e->kicked = false;
    e->held_back = false;
    atomic_store(&e->callers, 0);
    for (int i = 0; i < e->nwakes; i++)
        crd__req_free(e->wakes[i]); /* the parent's held-back wake-ups: no thread here */
    e->nwakes = 0;
    atomic_store(&e->draining, false);
    e->done_head = e->done_tail = NULL; /* only ever non-empty during a pass */
    for (crd__pool *p = e->peers; p != NULL; p = p->next) {
        free_chain(p->qhead);
        p->qhead = p->qtail = NULL;
        for (int i = 0; i < p->nlinks; i++) {
            free_chain(p->links[i].head);
            p->links[i].head = p->links[i].tail = NULL;
            p->links[i].inflight = 0;
            p->links[i].waits = 0;
            p->links[i].borrowed = false; /* its borrower is the parent's thread */
            crd__link_close(&p->links[i]);
        }
        while (p->unhealthy != NULL) {
            crd__link *u = p->unhealthy;
            p->unhealthy = u->next;
            free_chain(u->head);
            u->head = u->tail = NULL;
            crd__link_close(u);
            free(u);
        }
        p->nunhealthy = 0;
    }
    close(e->wake_fd);
    e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    /* e->mu stays held by this (the forking) thread: the child handler releases it. */
}

int crd__engine_links(crd_client *c)
{
    crd__engine *e = engine_of(c);
    int n = 0;
    pthread_mutex_lock(&e->mu);
    for (crd__pool *p = e->peers; p != NULL; p = p->next) {
        for (int i = 0; i < p->nlinks; i++)
            n += p->links[i].state != CRD__LINK_CLOSED;
        n += p->nunhealthy;
    }
    pthread_mutex_unlock(&e->mu);
    return n;
}

