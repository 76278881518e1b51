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
#include "engine.h"
#include "link.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { RQ_NEW, RQ_QUEUED, RQ_INFLIGHT, RQ_DONE };

#define MAX_UNHEALTHY 16 /* unhealthy links kept per peer for their late replies */
#define WAKES_MAX 128    /* wake-ups the I/O thread holds back per pass */
#define PIPE_DEPTH 64    /* replies one link may owe before the next request goes elsewhere */

static __thread bool on_io_thread;
/* The engine whose submissions this thread holds back (crd__engine_cork), and how deep. */
static __thread struct crd__engine *corked;
static __thread int cork_depth;

struct crd__pool {
    crd_client *c;
    const crd__endpoint *ep; /* borrowed; &c->ep for the client's primary */
    crd__req *qhead, *qtail;
    crd__link *links;
    int nlinks;
    crd__link *unhealthy; /* kept open for abandoned requests' replies */
    int nunhealthy;
    int64_t retry_at; /* no connect before this (after a failed one), monotonic ms */
    int64_t backoff_ms;
    crd_status last_st; /* the last connect failure, told to requests during the backoff */
    char last_why[400];
    /* replica sync on a cluster: this node's replicas (ROLE), and when they were read */
    int replicas;
    int64_t replicas_at;
    crd__pool *next;
};

typedef struct crd__engine {
    pthread_mutex_t mu;
    pthread_t thread;
    bool started, stopping;
    int wake_fd;
    bool polling; /* in poll(): a submitter writes the eventfd */
    bool kicked;  /* the eventfd was written since the thread last drained it */
    crd__pool *peers;
    struct pollfd *pfds;
    crd__link **plinks;
    size_t pcap;
    size_t npoll;       /* entries of pfds in the poll() under way (while polling) */
    int64_t poll_until; /* when that poll() returns by itself (0: never) */
    bool held_back;     /* a corked submission queued without waking the thread */
    crd__req *done_head, *done_tail; /* completions to run outside the mutex */
    crd__req *wakes[WAKES_MAX]; /* the I/O thread's wake-ups of waiting threads, made
                                   after it lets go of mu (a woken thread that ran while
                                   it still held mu would find it taken) */
    int nwakes;
    atomic_int callers;    /* threads waiting in crd__engine_call/await */
    atomic_bool draining;  /* crd__engine_stop waits for callers to drop to 0 */
    pthread_cond_t idle;   /* signalled then, under mu */
} crd__engine;

static crd__engine *engine_of(crd_client *c) { return c->engine; }

/* Shared by the loop operation and its request's completion (I/O thread): state 0 in
 * flight, 1 answered (the fields below set), 2 the operation went away first. */
struct crd__aio {
    atomic_int state;
    crd_status st;
    redisReply *reply;
    int64_t sent_ms;
    bool tag;
    bool answered; /* told CRD_TIMEOUT on a link that had answered before */
    bool unsent;   /* told CRD_TIMEOUT, never written, its connection still being set up */
    bool cut;      /* CRD_IO: written, and its link closed under it (outcome to on_late) */
    char why[240];
};

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
static void trace(crd_client *c, const crd__req *rq, crd_status st)
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
    rq->done_next = NULL;
    if (e->done_tail != NULL)
        e->done_tail->done_next = rq;
    else
        e->done_head = rq;
    e->done_tail = rq;
}

/* An abandoned request's end (its late reply, or its link's): on_late, or freed. */
static void late_done(crd__engine *e, crd__req *rq)
{
    if (rq->abandoned && rq->on_late == NULL)
        crd__req_free(rq);
    else
        collect(e, rq);
}

/* The waiting thread's futex: it sleeps while *w is 0, until deadline_ms (monotonic). */
static void park(atomic_int *w, int64_t deadline_ms)
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
    if (on_io_thread && e->nwakes < WAKES_MAX)
        e->wakes[e->nwakes++] = rq;
    else
        wake_now(rq);
}

/* Lets go of e->mu and makes the wake-ups held back meanwhile. */
static void unlock_and_wake(crd__engine *e)
{
    crd__req *w[WAKES_MAX];
    int n = e->nwakes;
    memcpy(w, e->wakes, sizeof w[0] * (size_t)n);
    e->nwakes = 0;
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < n; i++)
        wake_now(w[i]);
}

static void complete(crd__engine *e, crd__req *rq)
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
    late_done(e, rq);
}

/* rq's caller went away while it was written and unanswered (an acquire's job then counts
 * as under way in undo.c's registry until its reply or its link's end reaches on_late). */
static void abandon(crd__req *rq)
{
    rq->abandoned = true;
    if (rq->on_abandon != NULL && rq->arg != NULL)
        rq->on_abandon(rq->arg);
}

/* Tells rq's caller st now although rq stays in line for its reply (its deadline passed,
 * or its link became unhealthy); the reply, when it comes, goes to on_late. */
static void tell_early(crd__engine *e, crd__req *rq, crd_status st, const char *why)
{
    if (rq->abandoned || rq->notified)
        return;
    rq->notified = true;
    rq->link_answered = rq->link != NULL && rq->link->replied;
    rq->st = st;
    snprintf(rq->why, sizeof rq->why, "%s", why);
    if (rq->waited) {
        abandon(rq);
        wake_caller(e, rq, 2);
    } else if (rq->on_done != NULL) {
        collect(e, rq); /* abandoned once its on_done has run */
    } else {
        abandon(rq);
    }
}

static void fail(crd__engine *e, crd__req *rq, crd_status st, const char *why)
{
    rq->st = st;
    snprintf(rq->why, sizeof rq->why, "%.*s", (int)sizeof rq->why - 1, why);
    complete(e, rq);
}

/* A request never written because its deadline passed in the queue: -1 while its peer's
 * connection is merely being set up, 0 (and the last connect failure appended to why) when
 * the peer's last connect failed. Under e->mu. */
static int not_sent(const crd__req *rq, char *why, size_t n)
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
static void fail_unsent(crd__engine *e, crd__req *rq)
{
    char why[sizeof rq->why] = "the deadline passed before the command could be sent";
    rq->unsent = not_sent(rq, why, sizeof why) < 0;
    fail(e, rq, CRD_TIMEOUT, why);
}

/* Runs the collected callbacks; called with e->mu held, returns with it held. */
static void run_completions(crd_client *c, crd__engine *e)
{
    while (e->done_head != NULL) {
        crd__req *list = e->done_head;
        e->done_head = e->done_tail = NULL;
        unlock_and_wake(e);
        /* Only this thread completes requests: one still in flight here (told early)
         * stays in its link's line, untouched by anyone else, until its reply. */
        while (list != NULL) {
            crd__req *rq = list;
            list = rq->done_next;
            if (rq->state != RQ_DONE) {
                trace(c, rq, rq->st);
                rq->on_done(c, rq);
                rq->abandoned = true; /* relaxed: read by this thread only */
                continue;
            }
            trace(c, rq, rq->st);
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

static void unlink_head(crd__link *l)
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
static void drop_link(crd__engine *e, crd__link *l, crd_status st, const char *why)
{
    char text[300];
    snprintf(text, sizeof text, "%s", why);
    while (l->head != NULL) {
        crd__req *rq = l->head;
        unlink_head(l);
        rq->link = NULL;
        fail(e, rq, st, text);
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
static void fail_queue(crd__engine *e, crd__pool *p, crd_status st, const char *why)
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
        fail(e, rq, st, why);
    }
    p->qtail = last;
}

/* Opens link l of peer p; false when it failed at once (queued requests failed). */
static bool open_link(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l, int64_t now)
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
        fail_queue(e, p, p->last_st, msg);
        st = CRD_IO;
    }
    if (primary)
        crd__endpoint_clear(&ep);
    return st == CRD_OK;
}

/* A link failed during its connect or handshake: nothing of the requests was sent. */
static void connect_failed(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l,
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
    drop_link(e, l, st, msg);
    p->backoff_ms = p->backoff_ms == 0 ? 50 : p->backoff_ms * 2 > 1000 ? 1000 : p->backoff_ms * 2;
    p->retry_at = now + p->backoff_ms;
    p->last_st = st;
    snprintf(p->last_why, sizeof p->last_why, "%s", msg);
    fail_queue(e, p, st, msg);
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

static void link_broke(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l,
                       crd_status st, const char *why)
{
    char msg[400];
    broken_words(c, l, &st, why, msg, sizeof msg);
    CRD__COUNT(c, connection_failures);
    crd__log(c, CRD_LOG_WARN, "connection dropped: %s (it is reopened on next use)", msg);
    drop_link(e, l, st, msg);
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
            drop_link(e, l, st, msg);
            fail_queue(e, p, st, msg);
            return false;
        }
        freeReplyObject(r);
        return true;
    }
    crd__req *rq = l->head;
    if (rq == NULL) {
        freeReplyObject(r);
        link_broke(c, e, p, l, CRD_PROTOCOL, "a reply that no command asked for");
        return false;
    }
    rq->replies[rq->got++] = r;
    if (rq->got == rq->nreply) {
        unlink_head(l);
        rq->link = NULL;
        rq->st = CRD_OK;
        complete(e, rq);
    }
    return true;
}

/* Advances l with revents; false when it was closed. */
static bool service_link(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l,
                         short revents, int64_t now)
{
    bool was_connecting = l->state == CRD__LINK_CONNECTING || l->state == CRD__LINK_HANDSHAKE;
    bool got = false;
    crd_status st = CRD_IO;
    char why[300] = "";
    if (crd__link_io(l, revents, &got, &st, why, sizeof why) < 0) {
        if (was_connecting && l->inflight == 0)
            connect_failed(c, e, p, l, st, why, now);
        else
            link_broke(c, e, p, l, st, why);
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
        link_broke(c, e, p, l, CRD_PROTOCOL, "protocol error");
        return false;
    }
    return true;
}

/* ---- the pass ------------------------------------------------------------------------------ */

/* A link to a primary the sentinels have replaced. */
static bool stale(crd_client *c, const crd__pool *p, const crd__link *l)
{
    return p->ep == &c->ep && c->primary_gen != NULL && l->topo_gen != c->primary_gen(c);
}

static bool usable(crd_client *c, const crd__pool *p, const crd__link *l)
{
    if (l->state != CRD__LINK_READY)
        return false;
    /* A link whose oldest request's caller already gave up on it is stalled: nothing new
     * queues behind it (it is given up at its health limit). */
    if (l->head != NULL && (l->head->abandoned || l->head->notified))
        return false;
    /* A link to a primary the sentinels have replaced takes nothing new. */
    return !stale(c, p, l);
}

/* A stale link that still owes replies (all written) leaves its slot for the unhealthy
 * list, where its replies are still read and delivered, so that the slot can open a link
 * to the new primary now (with pool_size 1 the peer would otherwise wait for the old
 * primary, a WAIT there taking up to replica_sync_timeout_ms). False when it stays. */
static bool retire(crd__pool *p, crd__link *l)
{
    if (l->woff < l->wlen || p->nunhealthy >= MAX_UNHEALTHY)
        return false;
    crd__link *u = malloc(sizeof *u);
    if (u == NULL)
        return false;
    *u = *l;
    crd__link_init(l);
    u->state = CRD__LINK_UNHEALTHY;
    u->next = p->unhealthy;
    p->unhealthy = u;
    p->nunhealthy++;
    for (crd__req *rq = u->head; rq != NULL; rq = rq->next)
        rq->link = u;
    return true;
}

/* Puts rq on link l: its bytes into the write buffer, itself at the end of the replies
 * l owes. */
static void assign(crd__engine *e, crd__link *l, crd__req *rq, int64_t now)
{
    if (!crd__link_queue(l, rq->buf, rq->len)) {
        fail(e, rq, CRD_NO_MEMORY, "out of memory");
        return;
    }
    rq->state = RQ_INFLIGHT;
    rq->link = l;
    rq->sent_ms = now;
    rq->topo_gen = l->topo_gen;
    rq->next = NULL;
    if (l->tail != NULL)
        l->tail->next = rq;
    else
        l->head = rq;
    l->tail = rq;
    if (rq->blocks_ms > 0)
        l->waits++;
    if (l->inflight++ == 0)
        l->quiet_since = now;
}

/* How long l may stay quiet while it owes replies: command_timeout_ms, plus the time the
 * WAITs it carries may block the server's answers (a replica-sync WAIT of 1 s on a link
 * with a 500 ms command timeout is not a dead link). */
static int64_t health_limit(const crd_client *c, const crd__link *l)
{
    int64_t limit = c->opts.command_timeout_ms;
    for (const crd__req *rq = l->head; rq != NULL; rq = rq->next)
        limit += rq->blocks_ms;
    return limit;
}

/* A link that owes replies and has read nothing for its health limit is unhealthy: its
 * waiting callers are told CRD_IO, and it is kept (outside the peer's slots) only while
 * an abandoned request on it waits for its reply. */
static void check_health(crd_client *c, crd__engine *e, crd__pool *p, crd__link *l, int64_t now)
{
    if (l->inflight == 0 || now - l->quiet_since < health_limit(c, l))
        return;
    char msg[200];
    snprintf(msg, sizeof msg, "no reply within %lld ms (command_timeout_ms): the connection "
             "is given up", (long long)c->opts.command_timeout_ms);
    crd__log(c, CRD_LOG_WARN, "%s", msg);
    CRD__COUNT(c, connection_failures);
    bool keep = false;
    for (crd__req *rq = l->head; rq != NULL; rq = rq->next)
        keep = keep || rq->on_late != NULL;
    if (!keep || p->nunhealthy >= MAX_UNHEALTHY) {
        drop_link(e, l, CRD_IO, msg);
        return;
    }
    /* Move it out of its slot; its waiting callers learn CRD_IO now, and what they sent
     * is the engine's to watch (they are told it was handed over). */
    crd__link *u = malloc(sizeof *u);
    if (u == NULL) {
        drop_link(e, l, CRD_IO, msg);
        return;
    }
    *u = *l;
    crd__link_init(l);
    u->state = CRD__LINK_UNHEALTHY;
    u->next = p->unhealthy;
    p->unhealthy = u;
    p->nunhealthy++;
    for (crd__req *rq = u->head; rq != NULL; rq = rq->next) {
        rq->link = u;
        tell_early(e, rq, CRD_IO, msg);
    }
}

/* Whether a caller (not a background clean-up) waits in p's queue. */
static bool caller_queued(const crd__pool *p)
{
    for (const crd__req *rq = p->qhead; rq != NULL; rq = rq->next)
        if (!rq->retry)
            return true;
    return false;
}

/* Idle links with something to read (the server closed one while it was lent, and this
 * thread's poll did not watch it) are read now, before a request is put on them. */
static void check_idle(crd_client *c, crd__engine *e, crd__pool *p, int64_t now)
{
    for (int i = 0; i < p->nlinks; i++) {
        crd__link *l = &p->links[i];
        if (!l->borrowed && l->state == CRD__LINK_READY && l->inflight == 0 &&
            l->woff == l->wlen && !crd__link_quiet(l))
            service_link(c, e, p, l, POLLIN, now);
    }
}

/* Whether l may take more requests behind those it carries: it owes fewer than PIPE_DEPTH
 * replies and none of them is a WAIT (which keeps the server from answering the rest). */
static bool fillable(const crd__link *l)
{
    return l->inflight < PIPE_DEPTH && l->waits == 0;
}

/* Whether rq is packed onto l. A waiting thread's request is packed onto the busiest
 * fillable link: its thread has nothing else to do, and the server reads and answers one
 * link's batch in one go (64 threads on 64 names ran ~20 % faster with their requests on
 * one link than spread over two, the server busier, the client spending less per pair).
 * Any other request (the event loop's, the watchdog's, a helper's) is spread: it goes to
 * the least busy link. The loop thread is one thread; with its batches alternating over
 * two links it handles one link's replies while the server works on the other's (packed,
 * its 64 chains ran ~12 % slower: thread and server took turns). */
static bool packs(const crd__req *rq, const crd__link *l)
{
    return rq->waited && fillable(l);
}

/* Whether usable link a takes rq before usable link b. */
static bool better(const crd__req *rq, const crd__link *a, const crd__link *b)
{
    bool fa = packs(rq, a), fb = packs(rq, b);
    if (fa != fb)
        return fa;
    return fa ? a->inflight > b->inflight : a->inflight < b->inflight;
}

/* Moves p's queued requests onto links; opens links as needed: one connect at a time,
 * another link when none would take the next request without spreading. A caller's
 * request connects at once (it hears the failure if there is one); background clean-ups
 * wait for the backoff. */
static void dispatch_peer(crd_client *c, crd__engine *e, crd__pool *p, int64_t now)
{
    if (p->qhead != NULL)
        check_idle(c, e, p, now);
    while (p->qhead != NULL) {
        crd__link *best = NULL, *closed = NULL;
        int connecting = 0;
        for (int i = 0; i < p->nlinks; i++) {
            crd__link *l = &p->links[i];
            if (l->borrowed) {
                continue; /* busy with its caller's round trip */
            } else if (l->state == CRD__LINK_CLOSED) {
                if (closed == NULL)
                    closed = l;
            } else if (l->state == CRD__LINK_CONNECTING || l->state == CRD__LINK_HANDSHAKE) {
                connecting++;
            } else if (!usable(c, p, l)) {
                /* An old primary's: closed when idle, else retired; its slot is free. */
                if (l->inflight == 0 && stale(c, p, l))
                    crd__link_close(l);
                else if (stale(c, p, l) && l->state == CRD__LINK_READY)
                    retire(p, l);
                if (l->state == CRD__LINK_CLOSED && closed == NULL)
                    closed = l;
            } else if (best == NULL || better(p->qhead, l, best)) {
                best = l;
            }
        }
        if (closed != NULL && connecting == 0 &&
            (best == NULL || (best->inflight > 0 && !packs(p->qhead, best))) &&
            (now >= p->retry_at || caller_queued(p))) {
            open_link(c, e, p, closed, now);
            continue; /* failed: the queue was told; connected at once; or connecting */
        }
        /* Waiting for a connect (or, clean-ups only, its retry time); and never behind a
         * WAIT while another link is on its way. */
        if (best == NULL || (best->waits > 0 && connecting > 0))
            return;
        crd__req *rq = p->qhead;
        p->qhead = rq->next;
        if (p->qhead == NULL)
            p->qtail = NULL;
        if (rq->deadline_ms <= now) {
            /* Never written once its caller's deadline has passed. */
            fail_unsent(e, rq);
            continue;
        }
        if (rq->want_gen != 0 && rq->want_gen != best->topo_gen) {
            /* Built for the replicas of a primary the sentinels have replaced: a WAIT for
             * that many on the new one would block its whole timeout (and call an acquire
             * that took the lock there unsynced). */
            fail(e, rq, CRD_IO, "the sentinels named a new primary before it was sent");
            continue;
        }
        assign(e, best, rq, now);
    }
}

/* Expires requests whose deadline passed: queued ones were never sent and fail; sent
 * ones are told CRD_TIMEOUT and stay in line (tell_early). Waiting threads watch their
 * own deadlines; this covers on_done requests. Returns the earliest time something is
 * due (0: nothing). */
static int64_t expire_peer(crd_client *c, crd__engine *e, crd__pool *p, int64_t now)
{
    int64_t next = 0;
#define DUE(t) do { if (next == 0 || (t) < next) next = (t); } while (0)
    crd__req **pp = &p->qhead, *last = NULL;
    while (*pp != NULL) {
        crd__req *rq = *pp;
        if (!rq->waited && rq->deadline_ms <= now) {
            *pp = rq->next;
            fail_unsent(e, rq);
            continue;
        }
        if (!rq->waited)
            DUE(rq->deadline_ms);
        last = rq;
        pp = &rq->next;
    }
    p->qtail = last;
    for (int i = 0; i < p->nlinks; i++) {
        crd__link *l = &p->links[i];
        if (l->borrowed)
            continue; /* its caller keeps its own time */
        for (crd__req *rq = l->head; rq != NULL; rq = rq->next) {
            if (rq->waited || rq->abandoned || rq->notified)
                continue;
            if (rq->deadline_ms <= now)
                tell_early(e, rq, CRD_TIMEOUT, "no reply before the deadline");
            else
                DUE(rq->deadline_ms);
        }
        if (l->inflight > 0)
            DUE(l->quiet_since + health_limit(c, l));
        if (l->state == CRD__LINK_CONNECTING || l->state == CRD__LINK_HANDSHAKE)
            DUE(l->opened_ms + c->opts.connect_timeout_ms);
    }
    for (crd__link *u = p->unhealthy; u != NULL; u = u->next)
        DUE(u->quiet_since + c->opts.command_timeout_ms + health_limit(c, u));
    if (p->qhead != NULL && p->retry_at > now)
        DUE(p->retry_at);
#undef DUE
    return next;
}

/* Connects that outlived connect_timeout_ms fail; unhealthy links are found. */
static void check_links(crd_client *c, crd__engine *e, crd__pool *p, int64_t now)
{
    for (int i = 0; i < p->nlinks; i++) {
        crd__link *l = &p->links[i];
        if (l->borrowed)
            continue;
        if ((l->state == CRD__LINK_CONNECTING || l->state == CRD__LINK_HANDSHAKE) &&
            now - l->opened_ms >= c->opts.connect_timeout_ms) {
            connect_failed(c, e, p, l, CRD_IO, l->state == CRD__LINK_HANDSHAKE
                           ? "TLS handshake timed out (does the server speak TLS on this port?)"
                           : "connect timed out", now);
            continue;
        }
        if (l->state == CRD__LINK_READY)
            check_health(c, e, p, l, now);
    }
    /* Unhealthy links: closed once they owe nothing; on_late sees CRD_IO for the rest
     * when one more health period passes without a byte (a dead peer, or a reply that is
     * never coming: undo.c then reads the outcome back). */
    crd__link **pp = &p->unhealthy;
    while (*pp != NULL) {
        crd__link *u = *pp;
        if (u->inflight == 0 || u->state == CRD__LINK_CLOSED ||
            now - u->quiet_since >= c->opts.command_timeout_ms + health_limit(c, u)) {
            *pp = u->next;
            p->nunhealthy--;
            drop_link(e, u, CRD_IO, "connection closed");
            free(u);
            continue;
        }
        pp = &u->next;
    }
}

/* Adds fd's poll entry for l. */
static bool add_pollfd(crd__engine *e, size_t *n, crd__link *l)
{
    if (l->borrowed)
        return true;
    short ev = crd__link_events(l);
    if (l->fd < 0 || ev == 0)
        return true;
    if (*n == e->pcap) {
        size_t cap = e->pcap ? e->pcap * 2 : 16;
        struct pollfd *pf = realloc(e->pfds, cap * sizeof *pf);
        if (pf == NULL)
            return false;
        e->pfds = pf;
        crd__link **pl = realloc(e->plinks, cap * sizeof *pl);
        if (pl == NULL)
            return false;
        e->plinks = pl;
        e->pcap = cap;
    }
    e->pfds[*n] = (struct pollfd){l->fd, ev, 0};
    e->plinks[*n] = l;
    (*n)++;
    return true;
}

static crd__pool *peer_of_link(crd__engine *e, crd__link *l)
{
    for (crd__pool *p = e->peers; p != NULL; p = p->next) {
        if (l >= p->links && l < p->links + p->nlinks)
            return p;
        for (crd__link *u = p->unhealthy; u != NULL; u = u->next)
            if (u == l)
                return p;
    }
    return NULL;
}

static void *io_main(void *arg)
{
    crd_client *c = arg;
    crd__engine *e = engine_of(c);
    on_io_thread = true;
    pthread_mutex_lock(&e->mu);
    while (!e->stopping) {
        int64_t now = crd__now_ms();
        int64_t due = 0;
        size_t n = 1;
        e->pfds[0] = (struct pollfd){e->wake_fd, POLLIN, 0};
        e->plinks[0] = NULL;
        for (crd__pool *p = e->peers; p != NULL; p = p->next) {
            check_links(c, e, p, now);
            dispatch_peer(c, e, p, now);
            /* Write what was queued at once: a link ready to write is written now. */
            for (int i = 0; i < p->nlinks; i++) {
                crd__link *l = &p->links[i];
                if (!l->borrowed && l->state == CRD__LINK_READY && l->woff < l->wlen)
                    service_link(c, e, p, l, POLLOUT, now);
            }
            int64_t d = expire_peer(c, e, p, now);
            if (d != 0 && (due == 0 || d < due))
                due = d;
            for (int i = 0; i < p->nlinks; i++)
                add_pollfd(e, &n, &p->links[i]);
            for (crd__link *u = p->unhealthy; u != NULL; u = u->next)
                add_pollfd(e, &n, u);
        }
        if (e->done_head != NULL) {
            run_completions(c, e);
            continue; /* callbacks may have queued more */
        }
        int timeout = -1;
        if (due != 0) {
            int64_t left = due - crd__now_ms();
            timeout = left <= 0 ? 0 : left > 60000 ? 60000 : (int)left + 1;
        }
        e->polling = true;
        e->kicked = false;
        e->npoll = n;
        e->poll_until = timeout < 0 ? 0 : crd__now_ms() + timeout;
        unlock_and_wake(e);
        int rc = poll(e->pfds, n, timeout);
        pthread_mutex_lock(&e->mu);
        e->polling = false;
        if (rc <= 0)
            continue;
        now = crd__now_ms();
        if (e->pfds[0].revents & POLLIN) {
            uint64_t v;
            while (read(e->wake_fd, &v, sizeof v) < 0 && errno == EINTR) {
            }
        }
        for (size_t i = 1; i < n; i++) {
            if (e->pfds[i].revents == 0)
                continue;
            crd__link *l = e->plinks[i];
            crd__pool *p = peer_of_link(e, l);
            /* A link borrowed since the poll began is its caller's to read. */
            if (p != NULL && l->state != CRD__LINK_CLOSED && !l->borrowed)
                service_link(c, e, p, l, e->pfds[i].revents, now);
        }
        run_completions(c, e);
    }
    unlock_and_wake(e);
    return NULL;
}

static void wake(crd__engine *e)
{
    if (!e->polling || e->kicked)
        return;
    e->kicked = true;
    uint64_t one = 1;
    while (write(e->wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

/* Starts the thread if needed (the first request, or the first in a fork child). */
static crd_status ensure_thread(crd_client *c, crd__engine *e)
{
    if (e->started)
        return CRD_OK;
    if (e->stopping)
        return CRD_CLOSED;
    if (e->pfds == NULL) {
        e->pcap = 16;
        e->pfds = calloc(e->pcap, sizeof *e->pfds);
        e->plinks = calloc(e->pcap, sizeof *e->plinks);
        if (e->pfds == NULL || e->plinks == NULL)
            return CRD_NO_MEMORY;
    }
    if (pthread_create(&e->thread, NULL, io_main, c) != 0)
        return CRD_IO;
    e->started = true;
    return CRD_OK;
}

static crd_status queue(crd_client *c, crd__engine *e, crd__req *rq)
{
    if (e->stopping)
        return CRD_CLOSED;
    /* A closing client still carries what its woken callers send on their way out (a fair
     * waiter leaving its queue); only a stopped engine refuses. */
    (void)c;
    crd_status st = ensure_thread(c, e);
    if (st != CRD_OK)
        return st;
    if (rq->deadline_ms == 0)
        rq->deadline_ms = crd__now_ms() + c->opts.command_timeout_ms;
    rq->state = RQ_QUEUED;
    rq->next = NULL;
    crd__pool *p = rq->peer;
    if (p->qtail != NULL)
        p->qtail->next = rq;
    else
        p->qhead = rq;
    p->qtail = rq;
    wake(e);
    return CRD_OK;
}

crd_status crd__engine_submit(crd_client *c, crd__req *rq)
{
    crd__engine *e = engine_of(c);
    pthread_mutex_lock(&e->mu);
    crd_status st;
    if (corked == e && e->started && !e->stopping) {
        bool was = e->kicked;
        e->kicked = true; /* queue's wake-up is held back until crd__engine_uncork */
        st = queue(c, e, rq);
        e->kicked = was;
        e->held_back = true;
    } else {
        st = queue(c, e, rq);
    }
    pthread_mutex_unlock(&e->mu);
    if (st != CRD_OK)
        crd__req_free(rq);
    return st;
}

/* ---- corked submissions (the event loop's dispatch pass) ------------------------------------ */

/* Whether the poll() under way watches l for replies and returns by itself by due (e->mu
 * held, e->polling). */
static bool poll_covers(const crd__engine *e, const crd__link *l, int64_t due)
{
    if (e->poll_until == 0 || e->poll_until > due)
        return false;
    for (size_t i = 1; i < e->npoll; i++)
        if (e->plinks[i] == l)
            return (e->pfds[i].events & POLLIN) != 0;
    return false; /* lent when the poll began: the thread does not watch it */
}

/* A link of p this thread may write while the I/O thread sleeps in poll(): the least busy
 * plaintext one that is not lent (an idle one only if the server did not close it
 * meanwhile), as dispatch_peer would pick for the loop's requests; NULL when none, or when
 * dispatch_peer would open another link instead (all busy, a free slot, no connect under
 * way). */
static crd__link *writable_link(crd_client *c, crd__pool *p)
{
    crd__link *best = NULL;
    bool spare = false;
    for (int i = 0; i < p->nlinks; i++) {
        crd__link *l = &p->links[i];
        if (l->state != CRD__LINK_READY && l->state != CRD__LINK_CLOSED)
            return NULL; /* a connect under way: the thread's */
        spare = spare || l->state == CRD__LINK_CLOSED;
        if (!l->borrowed && l->ssl == NULL && usable(c, p, l) &&
            (best == NULL || l->inflight < best->inflight) &&
            (l->inflight > 0 || crd__link_quiet(l)))
            best = l;
    }
    return best != NULL && best->inflight > 0 && spare ? NULL : best;
}

/* Moves p's queued requests onto its links and writes them from this thread, in one
 * non-blocking send per link (e->mu held, the I/O thread in poll()). True when the thread's
 * poll() already covers them all: every byte out, each link watched for its replies, no
 * deadline or health limit before the poll's own timeout. */
static bool write_queued(crd_client *c, crd__engine *e, crd__pool *p)
{
    int64_t now = crd__now_ms(), due = INT64_MAX;
    bool covered = true;
    while (p->qhead != NULL) {
        crd__req *rq = p->qhead;
        crd__link *l = writable_link(c, p);
        if (l == NULL || rq->deadline_ms <= now ||
            (rq->want_gen != 0 && rq->want_gen != l->topo_gen))
            return false; /* the thread's pass decides */
        p->qhead = rq->next;
        if (p->qhead == NULL)
            p->qtail = NULL;
        assign(e, l, rq, now);
        covered = covered && rq->state == RQ_INFLIGHT; /* else its failure is to be run */
        if (rq->deadline_ms < due)
            due = rq->deadline_ms;
    }
    for (int i = 0; i < p->nlinks; i++) {
        crd__link *l = &p->links[i];
        if (l->borrowed || l->ssl != NULL || l->state != CRD__LINK_READY || l->inflight == 0)
            continue;
        bool got = false;
        crd_status st = CRD_IO;
        char why[300] = "";
        if (l->woff < l->wlen && crd__link_io(l, 0, &got, &st, why, sizeof why) < 0) {
            link_broke(c, e, p, l, st, why); /* its requests fail with it, as on the thread */
            return false;
        }
        int64_t health = l->quiet_since + health_limit(c, l);
        if (l->woff < l->wlen || !poll_covers(e, l, due < health ? due : health))
            covered = false;
    }
    return covered;
}

void crd__engine_cork(crd_client *c)
{
    if (cork_depth++ == 0)
        corked = engine_of(c);
}

void crd__engine_uncork(crd_client *c)
{
    if (cork_depth > 0 && --cork_depth > 0)
        return;
    corked = NULL;
    crd__engine *e = engine_of(c);
    pthread_mutex_lock(&e->mu);
    if (e->held_back) {
        e->held_back = false;
        bool covered = e->polling && !e->kicked && !e->stopping;
        for (crd__pool *p = e->peers; covered && p != NULL; p = p->next)
            if (p->qhead != NULL)
                covered = write_queued(c, e, p);
        if (!covered)
            wake(e);
    }
    pthread_mutex_unlock(&e->mu);
}

/* Removes rq from its peer's queue (it was never sent). */
static void unqueue(crd__req *rq)
{
    crd__pool *p = rq->peer;
    crd__req **pp = &p->qhead, *last = NULL;
    while (*pp != NULL && *pp != rq) {
        last = *pp;
        pp = &(*pp)->next;
    }
    if (*pp == NULL)
        return;
    *pp = rq->next;
    if (p->qtail == rq)
        p->qtail = last;
}

/* One waiting thread fewer: crd__engine_stop may be waiting for none (locked: with e->mu
 * held). */
static void caller_gone(crd__engine *e, bool locked)
{
    if (atomic_fetch_sub(&e->callers, 1) != 1 || !atomic_load(&e->draining))
        return;
    if (!locked)
        pthread_mutex_lock(&e->mu);
    pthread_cond_broadcast(&e->idle);
    if (!locked)
        pthread_mutex_unlock(&e->mu);
}

/* rq is done and was not told early: this thread's alone (e->mu not held). */
static crd_status take_done(crd_client *c, crd__engine *e, crd__req *rq, redisReply **out,
                            int64_t *sent_ms, int *handed_over)
{
    crd_status st = rq->st;
    *sent_ms = rq->sent_ms;
    *handed_over = 0;
    trace(c, rq, st);
    if (st == CRD_OK) {
        for (int i = 0; i < rq->nreply; i++) {
            out[i] = rq->replies[i];
            rq->replies[i] = NULL;
        }
    } else {
        /* CRD_TIMEOUT here: never written, its deadline passed in the queue. */
        if (st == CRD_TIMEOUT) {
            st = CRD_IO;
            *handed_over = rq->unsent ? -1 : 0;
        }
        crd__fail(c, st, "%s", rq->why);
    }
    crd__req_free(rq);
    caller_gone(e, false);
    return st;
}

/* Waits for rq (submitted with waited set) under e->mu; see crd__engine_call. The thread
 * sleeps on rq's own word without the mutex; done, it takes rq without the mutex too (64
 * callers share it with the I/O thread: a woken thread that had to take it again would
 * mostly sleep once more on it). */
static crd_status wait_for(crd_client *c, crd__engine *e, crd__req *rq, redisReply **out,
                           int64_t *sent_ms, int *handed_over)
{
    atomic_fetch_add(&e->callers, 1);
    while (rq->state != RQ_DONE && !rq->abandoned && crd__now_ms() < rq->deadline_ms) {
        pthread_mutex_unlock(&e->mu);
        park(&rq->fin, rq->deadline_ms);
        if (atomic_load_explicit(&rq->fin, memory_order_acquire) == 1)
            return take_done(c, e, rq, out, sent_ms, handed_over);
        pthread_mutex_lock(&e->mu);
    }
    if (rq->state == RQ_DONE && !rq->abandoned) {
        pthread_mutex_unlock(&e->mu);
        return take_done(c, e, rq, out, sent_ms, handed_over);
    }
    caller_gone(e, true);
    *sent_ms = rq->sent_ms;
    *handed_over = 0;
    crd_status st;
    if (rq->state == RQ_QUEUED) {
        unqueue(rq);
        char why[sizeof rq->why];
        snprintf(why, sizeof why, "the deadline passed before the command could be sent (no "
                 "connection was ready)");
        *handed_over = not_sent(rq, why, sizeof why);
        pthread_mutex_unlock(&e->mu);
        crd__req_free(rq);
        *sent_ms = 0;
        return crd__fail(c, CRD_IO, "%s", why);
    }
    /* Written, no reply yet: the engine keeps it in line; its late reply goes to on_late.
     * The caller hears CRD_IO: the server did not answer in time. Traced from a copy (the
     * I/O thread owns rq once the mutex is released). Only what trace() reads is copied:
     * rq's words (refs, fin) belong to a wake-up that may still be on its way. */
    crd__req copy = {.len = rq->len, .nreply = rq->nreply};
    copy.buf = c->opts.on_trace != NULL ? malloc(rq->len) : NULL;
    if (copy.buf != NULL)
        memcpy(copy.buf, rq->buf, rq->len);
    st = CRD_IO;
    char why[300];
    if (rq->abandoned)
        snprintf(why, sizeof why, "%s", rq->why);
    else
        snprintf(why, sizeof why, "no reply within the call's deadline (%lld ms after it was "
                 "sent)%s", (long long)(rq->deadline_ms - rq->sent_ms),
                 rq->on_late != NULL ? "; if it ran, the engine gives it back" : "");
    bool answered = rq->notified ? rq->link_answered : rq->link != NULL && rq->link->replied;
    abandon(rq);
    rq->caller_left = true;
    *handed_over = rq->on_late == NULL ? 0 : answered ? 1 : 2;
    if (rq->state == RQ_DONE) {
        /* Told early (its link went unhealthy), and its reply or its link's end came
         * before this thread woke: it goes where complete() sends an abandoned request. */
        late_done(e, rq);
        wake(e);
    }
    pthread_mutex_unlock(&e->mu);
    if (copy.buf != NULL) {
        snprintf(copy.why, sizeof copy.why, "%.*s", (int)sizeof copy.why - 1, why);
        trace(c, &copy, CRD_IO);
        free(copy.buf);
    }
    return crd__fail(c, st, "%s", why);
}

/* ---- the direct path: a caller's round trip on a link it borrows ---------------------------- */

/* A link the calling thread may run rq on itself: the I/O thread runs, nothing waits in
 * the peer's queue (rq would overtake it), and a ready link owes nothing and has nothing
 * to read (a server that closed it while idle: the I/O thread has yet to see it, and
 * the request goes the usual way). With `alone`, also only while the I/O thread has
 * nothing in flight to the peer: a busy client's request joins the next batch instead
 * (a round trip of its own would split the server's batches and cost it a read and a
 * write per request; with packing, 64 threads on 64 names ran ~20 % faster). Under
 * e->mu. */
static crd__link *borrowable(crd_client *c, crd__engine *e, const crd__req *rq, bool alone)
{
    crd__pool *p = rq->peer;
    if (!e->started || e->stopping || p->qhead != NULL || rq->want_gen != 0)
        return NULL;
    crd__link *idle = NULL;
    for (int i = 0; i < p->nlinks; i++) {
        crd__link *l = &p->links[i];
        if (l->borrowed)
            continue;
        if (alone && l->inflight > 0)
            return NULL;
        if (idle == NULL && l->inflight == 0 && l->setup == 0 && l->woff == l->wlen &&
            usable(c, p, l) && crd__link_quiet(l))
            idle = l;
    }
    return idle;
}

/* Writes rq (already in l's buffer) and reads its replies on the calling thread, without
 * the engine's mutex (l is borrowed), until they are all in (1), `until` passes (0) or l
 * fails (-1: *st, why). *heard: when bytes last came (0: none). */
static int round_trip(crd__link *l, crd__req *rq, int64_t until, int64_t *heard,
                      crd_status *st, char *why, size_t n)
{
    short revents = 0;
    for (;;) {
        bool got = false;
        if (crd__link_io(l, revents, &got, st, why, n) < 0)
            return -1;
        if (got)
            *heard = crd__now_ms();
        redisReply *r;
        int rc = 0;
        while (rq->got < rq->nreply && (rc = crd__link_reply(l, &r)) == 1)
            rq->replies[rq->got++] = r;
        if (rc < 0) {
            *st = CRD_PROTOCOL;
            snprintf(why, n, "protocol error");
            return -1;
        }
        if (rq->got == rq->nreply)
            return 1;
        int64_t left = until - crd__now_ms();
        if (left <= 0)
            return 0;
        revents = 0;
        int wrc = crd__link_wait(l, left, &got, st, why, n);
        if (wrc == -1)
            return -1;
        if (wrc == 0) {
            if (got)
                *heard = crd__now_ms();
            continue; /* a plaintext link: the reply (or time) came in one recv() */
        }
        struct pollfd pfd = {l->fd, crd__link_events(l), 0};
        int prc = poll(&pfd, 1, left > 60000 ? 60000 : (int)left);
        if (prc < 0 && errno != EINTR) {
            *st = CRD_IO;
            snprintf(why, n, "poll: %s", strerror(errno));
            return -1;
        }
        revents = prc > 0 ? pfd.revents : 0;
    }
}

/* Lends l to rq's waiting thread (e->mu held): rq goes on l exactly as the I/O thread
 * would put it there, and the I/O thread leaves l alone until lend_end. False when rq
 * failed instead (out of memory). */
static bool lend(crd_client *c, crd__engine *e, crd__link *l, crd__req *rq)
{
    int64_t now = crd__now_ms();
    if (rq->deadline_ms == 0)
        rq->deadline_ms = now + c->opts.command_timeout_ms;
    assign(e, l, rq, now);
    if (rq->state != RQ_INFLIGHT)
        return false;
    l->borrowed = true;
    rq->lent = true;
    atomic_fetch_add(&e->callers, 1); /* crd__engine_stop waits for the round trip */
    return true;
}

/* Gives l back to the I/O thread after rq's direct round trip (e->mu held): rc as
 * round_trip's. Done, rq is complete; otherwise it stays in l's line (time is up) or l
 * failed, and the usual wait decides, exactly as on the queued path. */
static void lend_end(crd_client *c, crd__engine *e, crd__link *l, crd__req *rq, int rc,
                     int64_t heard, crd_status st, const char *why)
{
    crd__pool *p = rq->peer;
    /* wait_for counts the caller again (it returns at once when rq is done); a hand-off's
     * failed send has no caller here yet, so crd__engine_stop may be waiting for zero. */
    caller_gone(e, true);
    l->borrowed = false;
    rq->lent = false;
    if (heard != 0) {
        l->replied = true;
        l->quiet_since = heard;
    }
    if (rc > 0) {
        unlink_head(l);
        rq->link = NULL;
        rq->st = CRD_OK;
        rq->state = RQ_DONE;
    } else if (rc < 0) {
        link_broke(c, e, p, l, st, why);
    }
    if (rc <= 0 || p->qhead != NULL)
        wake(e); /* the I/O thread watches l again, or takes the queue onto it */
}

/* The direct path, for a request on a lent link (e->mu held; see crd__engine_call): this
 * thread writes what is left of rq and reads its reply itself, until rq's deadline or
 * l's health limit. An uncontended round trip then wakes no other thread (through the I/O
 * thread it costs two wake-ups: the hand-over, then the reply's). */
static crd_status call_direct(crd_client *c, crd__engine *e, crd__req *rq, redisReply **out,
                              int64_t *sent_ms, int *handed_over)
{
    crd__link *l = rq->link;
    int64_t limit = l->quiet_since + health_limit(c, l);
    int64_t until = rq->deadline_ms < limit ? rq->deadline_ms : limit;
    pthread_mutex_unlock(&e->mu);
    crd_status st = CRD_IO;
    char why[300] = "";
    int64_t heard = 0;
    int rc = round_trip(l, rq, until, &heard, &st, why, sizeof why);
    pthread_mutex_lock(&e->mu);
    lend_end(c, e, l, rq, rc, heard, st, why);
    return wait_for(c, e, rq, out, sent_ms, handed_over);
}

crd_status crd__engine_call(crd_client *c, crd__req *rq, redisReply **out, int64_t *sent_ms,
                            int *handed_over)
{
    crd__engine *e = engine_of(c);
    rq->waited = true;
    pthread_mutex_lock(&e->mu);
    crd__link *l = borrowable(c, e, rq, true);
    if (l != NULL && lend(c, e, l, rq))
        return call_direct(c, e, rq, out, sent_ms, handed_over);
    if (l != NULL)
        return wait_for(c, e, rq, out, sent_ms, handed_over); /* failed: out of memory */
    crd_status st = queue(c, e, rq);
    if (st != CRD_OK) {
        pthread_mutex_unlock(&e->mu);
        crd__req_free(rq);
        *sent_ms = 0;
        *handed_over = 0;
        return crd__fail(c, st, st == CRD_CLOSED ? "client is closed"
                                                 : "cannot start the I/O thread");
    }
    return wait_for(c, e, rq, out, sent_ms, handed_over);
}

void crd__engine_prepare_wait(crd__req *rq) { rq->waited = true; }

crd_status crd__engine_submit_lent(crd_client *c, crd__req *rq)
{
    crd__engine *e = engine_of(c);
    pthread_mutex_lock(&e->mu);
    crd__link *l = borrowable(c, e, rq, false);
    if (l == NULL) {
        crd_status st = queue(c, e, rq);
        pthread_mutex_unlock(&e->mu);
        if (st != CRD_OK)
            crd__req_free(rq);
        return st;
    }
    if (lend(c, e, l, rq)) {
        /* The bytes go out now (a non-blocking send of one request on an idle link); the
         * waiter reads the reply. */
        bool got = false;
        crd_status st = CRD_IO;
        char why[300] = "";
        if (crd__link_io(l, 0, &got, &st, why, sizeof why) < 0)
            lend_end(c, e, l, rq, -1, 0, st, why); /* rq failed: its waiter hears it */
    }
    pthread_mutex_unlock(&e->mu);
    return CRD_OK;
}

crd_status crd__engine_await(crd_client *c, crd__req *rq, redisReply **out, int64_t *sent_ms,
                             int *handed_over)
{
    crd__engine *e = engine_of(c);
    pthread_mutex_lock(&e->mu);
    if (rq->lent)
        return call_direct(c, e, rq, out, sent_ms, handed_over);
    return wait_for(c, e, rq, out, sent_ms, handed_over);
}

/* ---- the event loop's requests ------------------------------------------------------------ */


/* The I/O thread: the answer (or an early CRD_TIMEOUT, the reply then going to on_late).
 * A link that broke under it leaves the outcome unknown: on_late (undo.c) reads it back,
 * and the operation is told CRD_IO. */
static void aio_done(crd_client *c, crd__req *rq)
{
    crd__aio *io = rq->done_arg;
    io->st = rq->st;
    io->sent_ms = rq->sent_ms;
    io->answered = rq->link_answered;
    io->unsent = rq->unsent;
    io->cut = rq->st == CRD_IO && rq->state == RQ_DONE && rq->sent_ms != 0;
    snprintf(io->why, sizeof io->why, "%s", rq->why);
    if (rq->st == CRD_OK) {
        io->reply = rq->replies[0];
        rq->replies[0] = NULL;
    } else if (rq->st == CRD_IO && rq->on_late != NULL && rq->state == RQ_DONE) {
        /* The link died under it (an early notice instead leaves it in line: its reply or
         * the link's end reaches on_late later, once). */
        rq->on_late(c, rq);
    }
    if (atomic_exchange(&io->state, 1) == 2) {
        /* The operation went away meanwhile: what the reply did is on_late's. */
        if (io->reply != NULL && rq->on_late != NULL) {
            rq->replies[0] = io->reply;
            io->reply = NULL;
            rq->on_late(c, rq);
        }
        if (io->reply != NULL)
            freeReplyObject(io->reply);
        free(io);
        return;
    }
    if (c->wake_loop != NULL)
        c->wake_loop(c);
}

crd__aio *crd__aio_submit(crd_client *c, crd__req *rq, bool tag)
{
    crd__aio *io = calloc(1, sizeof *io);
    if (io == NULL) {
        crd__req_free(rq);
        return NULL;
    }
    atomic_init(&io->state, 0);
    io->tag = tag;
    rq->on_done = aio_done;
    rq->done_arg = io;
    if (crd__engine_submit(c, rq) != CRD_OK) {
        free(io);
        return NULL;
    }
    return io;
}

bool crd__aio_ready(crd__aio *io) { return atomic_load(&io->state) != 0; }

int crd__aio_unanswered(const crd__aio *io)
{
    return io->st != CRD_TIMEOUT || io->sent_ms == 0 ? 0 : io->answered ? 1 : 2;
}

bool crd__aio_unsent(const crd__aio *io) { return io->st == CRD_TIMEOUT && io->unsent; }

bool crd__aio_cut(const crd__aio *io) { return io->cut; }

crd_status crd__aio_take(crd_client *c, crd__aio *io, redisReply **reply, int64_t *sent_ms,
                         bool *tag)
{
    crd_status st = io->st;
    *reply = io->reply;
    *sent_ms = io->sent_ms;
    *tag = io->tag;
    if (st != CRD_OK)
        st = crd__fail(c, CRD_IO, "%s", io->why[0] ? io->why : "no reply");
    free(io);
    return st;
}

redisReply *crd__aio_drop(crd__aio *io)
{
    if (atomic_exchange(&io->state, 2) == 0)
        return NULL; /* aio_done frees it */
    redisReply *r = io->reply;
    free(io);
    return r;
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
    pthread_mutex_init(&e->mu, NULL);
    crd__cond_init(&e->idle);
    c->engine = e;
    return CRD_OK;
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
    wake(e);
    pthread_mutex_unlock(&e->mu);
    if (started)
        pthread_join(e->thread, NULL);
    pthread_mutex_lock(&e->mu);
    e->started = false;
    for (crd__pool *p = e->peers; p != NULL; p = p->next) {
        fail_queue(e, p, CRD_CLOSED, "client is closed");
        while (p->qhead != NULL) { /* the retry ones too */
            crd__req *rq = p->qhead;
            p->qhead = rq->next;
            fail(e, rq, CRD_CLOSED, "client is closed");
        }
        p->qtail = NULL;
        for (int i = 0; i < p->nlinks; i++)
            drop_link(e, &p->links[i], CRD_CLOSED, "client is closed");
        for (crd__link *u = p->unhealthy; u != NULL; u = u->next)
            drop_link(e, u, CRD_CLOSED, "client is closed"); /* keeps u->next */
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
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->idle);
    free(e);
    c->engine = NULL;
}

void crd__engine_lock_for_fork(crd_client *c, bool lock)
{
    crd__engine *e = engine_of(c);
    if (e == NULL)
        return;
    if (lock)
        pthread_mutex_lock(&e->mu);
    else
        pthread_mutex_unlock(&e->mu);
}

static void aio_done(crd_client *c, crd__req *rq);

/* Frees a list of requests chained by next (a fork child: their threads are the
 * parent's). An event-loop operation's request is answered CRD_IO first (no wake-up: the
 * loop sees it at its next dispatch, crd_loop_timeout_ms says 0). */
static void free_chain(crd__req *rq)
{
    while (rq != NULL) {
        crd__req *next = rq->next;
        if (rq->on_done == aio_done && !rq->abandoned && !rq->notified) {
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
    /* A fork inside a dispatch callback: the child's passes start uncorked. */
    corked = NULL;
    cork_depth = 0;
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
