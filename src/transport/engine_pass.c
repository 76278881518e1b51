/*
 * engine_pass.c -- the I/O thread: its pass over every peer (links checked, queued requests
 * moved onto links, packed or spread, health limits, deadlines) and its poll() loop
 * (io_main); the submit path that wakes it. engine.c has the rest of the engine.
 *
 * Threads: the I/O thread, and submitters. Lock: e->mu.
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

/* ---- the pass ------------------------------------------------------------------------------ */

/* A link to a primary the sentinels have replaced. */
static bool stale(crd_client *c, const crd__pool *p, const crd__link *l)
{
    return p->ep == &c->ep && c->primary_gen != NULL && l->topo_gen != c->primary_gen(c);
}

bool crd__eng_usable(crd_client *c, const crd__pool *p, const crd__link *l)
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
void crd__eng_assign(crd__engine *e, crd__link *l, crd__req *rq, int64_t now)
{
    if (!crd__link_queue(l, rq->buf, rq->len)) {
        crd__eng_fail(e, rq, CRD_NO_MEMORY, "out of memory");
        return;
    }
    rq->state = RQ_INFLIGHT;
    rq->link = l;
    rq->sent_ms = now;
    rq->topo_gen = l->topo_gen;
    CRD__APPEND(l->head, l->tail, rq, next);
    if (rq->blocks_ms > 0)
        l->waits++;
    if (l->inflight++ == 0)
        l->quiet_since = now;
}

/* How long l may stay quiet while it owes replies: command_timeout_ms, plus the time the
 * WAITs it carries may block the server's answers (a replica-sync WAIT of 1 s on a link
 * with a 500 ms command timeout is not a dead link). */
int64_t crd__eng_health_limit(const crd_client *c, const crd__link *l)
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
    if (l->inflight == 0 || now - l->quiet_since < crd__eng_health_limit(c, l))
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
        crd__eng_drop_link(e, l, CRD_IO, msg);
        return;
    }
    /* Move it out of its slot; its waiting callers learn CRD_IO now, and what they sent
     * is the engine's to watch (they are told it was handed over). */
    crd__link *u = malloc(sizeof *u);
    if (u == NULL) {
        crd__eng_drop_link(e, l, CRD_IO, msg);
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
        crd__eng_tell_early(e, rq, CRD_IO, msg);
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
            crd__eng_service_link(c, e, p, l, POLLIN, now);
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
            } else if (!crd__eng_usable(c, p, l)) {
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
            crd__eng_open_link(c, e, p, closed, now);
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
            crd__eng_fail_unsent(e, rq);
            continue;
        }
        if (rq->want_gen != 0 && rq->want_gen != best->topo_gen) {
            /* Built for the replicas of a primary the sentinels have replaced: a WAIT for
             * that many on the new one would block its whole timeout (and call an acquire
             * that took the lock there unsynced). */
            crd__eng_fail(e, rq, CRD_IO, "the sentinels named a new primary before it was sent");
            continue;
        }
        crd__eng_assign(e, best, rq, now);
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
            crd__eng_fail_unsent(e, rq);
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
                crd__eng_tell_early(e, rq, CRD_TIMEOUT, "no reply before the deadline");
            else
                DUE(rq->deadline_ms);
        }
        if (l->inflight > 0)
            DUE(l->quiet_since + crd__eng_health_limit(c, l));
        if (l->state == CRD__LINK_CONNECTING || l->state == CRD__LINK_HANDSHAKE)
            DUE(l->opened_ms + c->opts.connect_timeout_ms);
    }
    for (crd__link *u = p->unhealthy; u != NULL; u = u->next)
        DUE(u->quiet_since + c->opts.command_timeout_ms + crd__eng_health_limit(c, u));
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
            crd__eng_connect_failed(c, e, p, l, CRD_IO, l->state == CRD__LINK_HANDSHAKE
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
            now - u->quiet_since >= c->opts.command_timeout_ms + crd__eng_health_limit(c, u)) {
            *pp = u->next;
            p->nunhealthy--;
            crd__eng_drop_link(e, u, CRD_IO, "connection closed");
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
    crd__thread_enter("crd-io");
    crd_client *c = arg;
    crd__engine *e = engine_of(c);
    crd__eng_on_io_thread = true;
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
                    crd__eng_service_link(c, e, p, l, POLLOUT, now);
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
            crd__eng_run_completions(c, e);
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
        crd__eng_unlock_and_wake(e);
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
                crd__eng_service_link(c, e, p, l, e->pfds[i].revents, now);
        }
        crd__eng_run_completions(c, e);
    }
    crd__eng_unlock_and_wake(e);
    return NULL;
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
    if (crd__thread_create(&e->thread, io_main, c) != 0)
        return CRD_IO;
    e->started = true;
    return CRD_OK;
}

crd_status crd__eng_queue(crd_client *c, crd__engine *e, crd__req *rq)
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
    crd__pool *p = rq->peer;
    CRD__APPEND(p->qhead, p->qtail, rq, next);
    crd__eng_wake(e);
    return CRD_OK;
}

crd_status crd__engine_submit(crd_client *c, crd__req *rq)
{
    crd__engine *e = engine_of(c);
    pthread_mutex_lock(&e->mu);
    crd_status st;
    if (crd__eng_corked == e && e->started && !e->stopping) {
        bool was = e->kicked;
        e->kicked = true; /* queue's wake-up is held back until crd__engine_uncork */
        st = crd__eng_queue(c, e, rq);
        e->kicked = was;
        e->held_back = true;
    } else {
        st = crd__eng_queue(c, e, rq);
    }
    pthread_mutex_unlock(&e->mu);
    if (st != CRD_OK)
        crd__req_free(rq);
    return st;
}

