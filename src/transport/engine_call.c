/*
 * engine_call.c -- the engine's callers: crd__eng_corked submissions of an event-loop dispatch
 * pass (written by the loop thread itself when the I/O thread sleeps), a waiting thread's
 * wait for its request and its direct path (its round trip on a link it borrows), and the
 * event loop's requests (crd__aio). engine.c has the rest of the engine.
 *
 * Threads: callers on any thread, the loop thread; the I/O thread completes. Lock: e->mu.
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

/* ---- crd__eng_corked submissions (the event loop's dispatch pass) ------------------------------------ */

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
        if (!l->borrowed && l->ssl == NULL && crd__eng_usable(c, p, l) &&
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
        crd__eng_assign(e, l, rq, now);
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
            crd__eng_link_broke(c, e, p, l, st, why); /* its requests fail with it, as on the thread */
            return false;
        }
        int64_t health = l->quiet_since + crd__eng_health_limit(c, l);
        if (l->woff < l->wlen || !poll_covers(e, l, due < health ? due : health))
            covered = false;
    }
    return covered;
}

void crd__engine_cork(crd_client *c)
{
    if (crd__eng_cork_depth++ == 0)
        crd__eng_corked = engine_of(c);
}

void crd__engine_uncork(crd_client *c)
{
    if (crd__eng_cork_depth > 0 && --crd__eng_cork_depth > 0)
        return;
    crd__eng_corked = NULL;
    crd__engine *e = engine_of(c);
    pthread_mutex_lock(&e->mu);
    if (e->held_back) {
        e->held_back = false;
        bool covered = e->polling && !e->kicked && !e->stopping;
        for (crd__pool *p = e->peers; covered && p != NULL; p = p->next)
            if (p->qhead != NULL)
                covered = write_queued(c, e, p);
        if (!covered)
            crd__eng_wake(e);
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
    crd__eng_trace(c, rq, st);
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
    while (rq->state != RQ_DONE && !rq->abandoned && crd__now_ms() < rq->deadline_ms &&
           !crd__intr_raised(rq->intr)) {
        pthread_mutex_unlock(&e->mu);
        crd__eng_park(&rq->fin, rq->deadline_ms);
        int fin = atomic_load_explicit(&rq->fin, memory_order_acquire);
        if (fin == 1)
            return take_done(c, e, rq, out, sent_ms, handed_over);
        if (fin == 3) { /* an interrupt's look (wake_request): the loop's test decides */
            int three = 3;
            atomic_compare_exchange_strong(&rq->fin, &three, 0);
        }
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
    bool interrupted = !rq->abandoned && crd__now_ms() < rq->deadline_ms &&
                       crd__intr_raised(rq->intr);
    if (rq->state == RQ_QUEUED) {
        unqueue(rq);
        char why[sizeof rq->why];
        snprintf(why, sizeof why, interrupted ? "interrupted before the command could be sent"
                                              : "the deadline passed before the command could "
                                                "be sent (no connection was ready)");
        *handed_over = crd__eng_not_sent(rq, why, sizeof why);
        pthread_mutex_unlock(&e->mu);
        crd__req_free(rq);
        *sent_ms = 0;
        if (interrupted)
            *handed_over = 0;
        return crd__fail(c, interrupted ? CRD_INTERRUPTED : CRD_IO, "%s", why);
    }
    /* Written, no reply yet: the engine keeps it in line; its late reply goes to on_late.
     * The caller hears CRD_IO: the server did not answer in time. Traced from a copy (the
     * I/O thread owns rq once the mutex is released). Only what crd__eng_trace() reads is copied:
     * rq's words (refs, fin) belong to a wake-up that may still be on its way. */
    crd__req copy = {.len = rq->len, .nreply = rq->nreply};
    copy.buf = c->opts.on_trace != NULL ? malloc(rq->len) : NULL;
    if (copy.buf != NULL)
        memcpy(copy.buf, rq->buf, rq->len);
    st = interrupted ? CRD_INTERRUPTED : CRD_IO;
    char why[300];
    if (rq->abandoned)
        snprintf(why, sizeof why, "%s", rq->why);
    else if (interrupted)
        snprintf(why, sizeof why, "interrupted while waiting for the reply%s",
                 rq->on_late != NULL ? "; if it ran, the engine gives it back" : "");
    else
        snprintf(why, sizeof why, "no reply within the call's deadline (%lld ms after it was "
                 "sent)%s", (long long)(rq->deadline_ms - rq->sent_ms),
                 rq->on_late != NULL ? "; if it ran, the engine gives it back" : "");
    bool answered = rq->notified ? rq->link_answered : rq->link != NULL && rq->link->replied;
    crd__eng_abandon(rq);
    rq->caller_left = true;
    *handed_over = rq->on_late == NULL ? 0 : answered ? 1 : 2;
    if (rq->state == RQ_DONE) {
        /* Told early (its link went unhealthy), and its reply or its link's end came
         * before this thread woke: it goes where crd__eng_complete() sends an abandoned request. */
        crd__eng_late_done(e, rq);
        crd__eng_wake(e);
    }
    pthread_mutex_unlock(&e->mu);
    if (copy.buf != NULL) {
        snprintf(copy.why, sizeof copy.why, "%.*s", (int)sizeof copy.why - 1, why);
        crd__eng_trace(c, &copy, CRD_IO);
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
    if (!e->started || e->stopping || p->qhead != NULL || rq->want_gen != 0 || rq->intr != NULL)
        return NULL;
    crd__link *idle = NULL;
    for (int i = 0; i < p->nlinks; i++) {
        crd__link *l = &p->links[i];
        if (l->borrowed)
            continue;
        if (alone && l->inflight > 0)
            return NULL;
        if (idle == NULL && l->inflight == 0 && l->setup == 0 && l->woff == l->wlen &&
            crd__eng_usable(c, p, l) && crd__link_quiet(l))
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
    crd__eng_assign(e, l, rq, now);
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
        crd__eng_unlink_head(l);
        rq->link = NULL;
        rq->st = CRD_OK;
        rq->state = RQ_DONE;
    } else if (rc < 0) {
        crd__eng_link_broke(c, e, p, l, st, why);
    }
    if (rc <= 0 || p->qhead != NULL)
        crd__eng_wake(e); /* the I/O thread watches l again, or takes the queue onto it */
}

/* The direct path, for a request on a lent link (e->mu held; see crd__engine_call): this
 * thread writes what is left of rq and reads its reply itself, until rq's deadline or
 * l's health limit. An uncontended round trip then wakes no other thread (through the I/O
 * thread it costs two wake-ups: the hand-over, then the reply's). */
static crd_status call_direct(crd_client *c, crd__engine *e, crd__req *rq, redisReply **out,
                              int64_t *sent_ms, int *handed_over)
{
    crd__link *l = rq->link;
    int64_t limit = l->quiet_since + crd__eng_health_limit(c, l);
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

static crd_status engine_call(crd_client *c, crd__req *rq, redisReply **out, int64_t *sent_ms,
                              int *handed_over);

/* The interrupt of a caller asleep on rq's word (interrupt.c's thread): a futex wake-up;
 * the caller finds its token raised and leaves as at its deadline. */
static void wake_request(void *arg)
{
    crd__req *rq = arg;
    /* 3 ("look, interrupted") unless the I/O thread has already set its 1 or 2: a caller
     * between its test and its futex wait then finds the word moved and does not sleep. */
    int zero = 0;
    atomic_compare_exchange_strong(&rq->fin, &zero, 3);
    syscall(SYS_futex, &rq->fin, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

crd_status crd__engine_call(crd_client *c, crd__req *rq, redisReply **out, int64_t *sent_ms,
                            int *handed_over)
{
    crd_interrupt *in = rq->intr;
    if (in == NULL)
        return engine_call(c, rq, out, sent_ms, handed_over);
    /* rq stays valid memory for the wake-up until this caller has left the token: a
     * reference of its own, dropped after. */
    atomic_fetch_add_explicit(&rq->refs, 1, memory_order_relaxed);
    crd__intr_wait iw;
    crd__intr_enter(in, &iw, wake_request, rq);
    crd_status st = engine_call(c, rq, out, sent_ms, handed_over);
    crd__intr_leave(in, &iw);
    crd__req_free(rq);
    return st;
}

static crd_status engine_call(crd_client *c, crd__req *rq, redisReply **out, int64_t *sent_ms,
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
    crd_status st = crd__eng_queue(c, e, rq);
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

crd_status crd__engine_call_argv(crd_client *c, crd__pool *p, int argc, const char *const *argv,
                                 const size_t *lens, int64_t deadline_ms, redisReply **out)
{
    *out = NULL;
    crd__req *rq = crd__req_new(p, 1);
    if (rq == NULL || !crd__req_add(rq, argc, argv, lens)) {
        crd__req_free(rq);
        return crd__fail(c, CRD_NO_MEMORY, "cannot build a request");
    }
    if (deadline_ms != 0)
        rq->deadline_ms = deadline_ms;
    int64_t sent = 0;
    int handed = 0;
    return crd__engine_call(c, rq, out, &sent, &handed);
}

void crd__engine_prepare_wait(crd__req *rq) { rq->waited = true; }

crd_status crd__engine_submit_lent(crd_client *c, crd__req *rq)
{
    crd__engine *e = engine_of(c);
    pthread_mutex_lock(&e->mu);
    crd__link *l = borrowable(c, e, rq, false);
    if (l == NULL) {
        crd_status st = crd__eng_queue(c, e, rq);
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
void crd__eng_aio_done(crd_client *c, crd__req *rq)
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
    rq->on_done = crd__eng_aio_done;
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
        return NULL; /* crd__eng_aio_done frees it */
    redisReply *r = io->reply;
    free(io);
    return r;
}

