/*
 * pubsub_wait.c -- the waiters' side of the client's subscriptions (pubsub.c has the
 * subscriber thread): taking and giving back a reference on a channel's entry (the last
 * one's UNSUBSCRIBE written by the thread that lets go, leave_direct), waiting on it for a
 * wake-up permit or a lent attempt's sending, watched holds (prompt_loss_detection), and
 * the event loop's eventfd and polls.
 *
 * Threads: callers' threads, the watchdog's, the loop thread. Lock: ps->mu; a link's wmu
 * (a leaf, without ps->mu) for a direct UNSUBSCRIBE.
 */
#include "pubsub_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- waiters ------------------------------------------------------------------------- */

static void quiet_release(crd__pubsub *ps, crd__sub *s);

static crd_status join(crd_client *c, const char *channel, size_t len, int rule, bool turn,
                       int64_t deadline_ms, crd__sub **out, bool *confirmed);

crd_status crd__sub_acquire(crd_client *c, const char *channel, size_t len,
                            int64_t deadline_ms, crd__sub **out, bool *confirmed)
{
    return join(c, channel, len, CRD__WAKE_LOCK, false, deadline_ms, out, confirmed);
}

crd_status crd__sub_acquire_rule(crd_client *c, const char *channel, size_t len, int rule,
                                 int64_t deadline_ms, crd__sub **out, bool *confirmed)
{
    return join(c, channel, len, rule, false, deadline_ms, out, confirmed);
}

crd_status crd__sub_acquire_turn(crd_client *c, const char *channel, size_t len,
                                 int64_t deadline_ms, crd__sub **out, bool *confirmed)
{
    return join(c, channel, len, CRD__WAKE_LOCK, true, deadline_ms, out, confirmed);
}

/* turn: a counted turn, which takes an entry kept through this client's release as it
 * is (what it heard since that release's own message are releases after it). */
static crd_status join(crd_client *c, const char *channel, size_t len, int rule, bool turn,
                       int64_t deadline_ms, crd__sub **out, bool *confirmed)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    crd_status st = crd__ps_start_thread(c);
    if (st != CRD_OK) {
        pthread_mutex_unlock(&ps->mu);
        return st;
    }
    crd__sub *s = crd__ps_entry_for(ps, channel, len);
    if (s == NULL) {
        pthread_mutex_unlock(&ps->mu);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a subscription");
    }
    s->wake_rule = rule; /* one channel, one kind of object: every waiter agrees */
    if (s->refs == 0 && turn && s->kept && live(s)) {
        s->kept = false; /* its permits are the releases after this client's own */
    } else if (s->refs == 0) {
        /* The first waiter: a permit left by a message that found nobody waiting (a "1"
         * gives one even then, e.g. a write unlock while the entry lingered or its
         * UNSUBSCRIBE was on its way) was published before this waiter's re-try. */
        s->permits = 0;
        /* Lingering (its last waiter left without waking the subscriber thread): what is
         * still on its way here was published before that re-try too. Subscribed afresh,
         * it hears none of this client's own messages from before either. */
        if (s->watch_refs == 0 && live(s)) {
            s->stale = true;
            s->kept = false;
            s->own_skip = 0;
        }
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

/* s has no waiter and no watched hold left (ps->mu held): its UNSUBSCRIBE is encoded into
 * *out for the caller to send once it has let go of ps->mu, on a plaintext client; else
 * the thread is woken to send it. The entry is unsubscribing from now on, as if the
 * thread had sent it. */
void crd__ps_leave(crd_client *c, crd__sub *s, leaving *out)
{
    crd__pubsub *ps = c->ps;
    out->l = NULL;
    out->cmd = out->buf;
    out->len = 0;
    s->kept = false; /* not live from now on: nothing it hears counts */
    s->own_skip = 0;
    sublink *l = s->link;
    /* The link's connection is the subscriber thread's: leave_direct looks at it under
     * wmu. TLS never: its session is read by that thread. */
    bool direct = s->subscribed && !s->inflight && !s->stale && l != NULL && c->tls == NULL;
    if (direct) {
        const char *word = c->sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE";
        const char *argv[2] = {word, s->channel};
        size_t lens[2] = {strlen(word), s->len};
        size_t cap = sizeof out->buf;
        char *p = out->buf;
        if (s->len + 128 > cap) { /* crd__resp_append wants ~90 bytes over the channel */
            p = NULL; /* it allocates */
            cap = 0;
        }
        direct = crd__resp_append(&p, &out->len, &cap, 2, argv, lens);
        if (direct)
            out->cmd = p;
        else if (p != out->buf)
            free(p); /* out->cmd stays out->buf: nothing of it is freed twice */
    }
    if (!direct) {
        poke(ps); /* under the mutex: crd__pubsub_stop may close the pipe once we leave */
        return;
    }
    s->inflight = true;
    s->unsubscribing = true;
    s->resubscribe = false;
    out->l = l;
    out->gen = atomic_load(&l->gen);
    ps->total_refs++; /* crd__pubsub_stop waits for this send too (it frees the link) */
}

/* Writes what crd__ps_leave() encoded, without waiting: what send() does not take is left for
 * the subscriber thread (woken), which sends it before anything else. The link's
 * connection is the one crd__ps_leave() saw or the write is dropped: a connection closed since
 * took the subscription with it. */
void crd__ps_leave_direct(crd_client *c, leaving *lv)
{
    crd__pubsub *ps = c->ps;
    sublink *l = lv->l;
    bool wake = false;
    pthread_mutex_lock(&l->wmu);
    if (atomic_load(&l->gen) == lv->gen) {
        size_t done = 0;
        if (l->open && l->rest_len == 0) {
            ssize_t n;
            do
                n = send(l->conn.ctx->fd, lv->cmd, lv->len, MSG_NOSIGNAL | MSG_DONTWAIT);
            while (n < 0 && errno == EINTR);
            done = n > 0 ? (size_t)n : 0;
        }
        if (done < lv->len) {
            /* Short, refused or behind an earlier rest: the thread sends the rest (a
             * connection that failed is found dead when it next reads it). */
            char *rest = realloc(l->rest, l->rest_len + lv->len - done);
            if (rest != NULL) {
                memcpy(rest + l->rest_len, lv->cmd + done, lv->len - done);
                l->rest = rest;
                l->rest_len += lv->len - done;
            } else if (done > 0) {
                /* Half a command written and no room for the rest: the connection is
                 * lost (the thread finds it closed). */
                shutdown(l->conn.ctx->fd, SHUT_RDWR);
            }
            wake = true;
        }
    }
    pthread_mutex_unlock(&l->wmu);
    if (lv->cmd != lv->buf)
        free(lv->cmd);
    pthread_mutex_lock(&ps->mu);
    if (wake)
        poke(ps);
    if (--ps->total_refs == 0)
        pthread_cond_broadcast(&ps->idle_cv);
    pthread_mutex_unlock(&ps->mu);
}

void crd__sub_release(crd_client *c, crd__sub *s)
{
    crd__pubsub *ps = c->ps;
    leaving lv = {.l = NULL};
    pthread_mutex_lock(&ps->mu);
    if (s->channel == NULL) {
        quiet_release(ps, s);
        if (ps->total_refs == 0)
            pthread_cond_broadcast(&ps->idle_cv);
        pthread_mutex_unlock(&ps->mu);
        return;
    }
    s->refs--;
    ps->total_refs--;
    if (s->refs == 0) {
        s->permits = 0;
        /* Not after a hand-off: the holder's release or this thread ends that one. */
        if (s->watch_refs == 0 && crd__now_ms() >= s->look_at)
            crd__ps_leave(c, s, &lv);
    }
    if (ps->total_refs == 0)
        pthread_cond_broadcast(&ps->idle_cv);
    pthread_mutex_unlock(&ps->mu);
    if (lv.l != NULL)
        crd__ps_leave_direct(c, &lv);
}

/* ---- watched holds (prompt_loss_detection) ----------------------------------------------- */

crd__sub *crd__sub_watch(crd_client *c, const char *channel, size_t len)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    crd__sub *s = crd__ps_start_thread(c) == CRD_OK ? crd__ps_entry_for(ps, channel, len) : NULL;
    if (s != NULL) {
        s->watch_refs++;
        if (!live(s))
            poke(ps);
    }
    pthread_mutex_unlock(&ps->mu);
    return s;
}

void crd__sub_end_linger(crd_client *c, const char *channel, size_t len)
{
    crd__pubsub *ps = c->ps;
    leaving lv = {.l = NULL};
    pthread_mutex_lock(&ps->mu);
    crd__sub *s = find(ps, channel, len);
    if (s != NULL && s->look_at != 0 && s->refs == 0 && s->watch_refs == 0) {
        s->look_at = 0;
        crd__ps_leave(c, s, &lv);
    }
    pthread_mutex_unlock(&ps->mu);
    if (lv.l != NULL)
        crd__ps_leave_direct(c, &lv);
}

void crd__sub_hold_linger(crd_client *c, crd__sub *s, int64_t until_ms)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    if (s->channel != NULL && s->look_at != 0 && s->look_at < until_ms)
        s->look_at = until_ms;
    pthread_mutex_unlock(&ps->mu);
}

bool crd__sub_keep_linger(crd_client *c, const char *channel, size_t len, int64_t until_ms)
{
    crd__pubsub *ps = c->ps;
    leaving lv = {.l = NULL};
    pthread_mutex_lock(&ps->mu);
    crd__sub *s = find(ps, channel, len);
    bool lingering = s != NULL && s->look_at != 0 && s->refs == 0 && s->watch_refs == 0;
    bool keep = lingering && live(s);
    if (keep) {
        s->look_at = until_ms;
        s->kept = true;
        s->own_skip++;
        s->permits = 0; /* what it heard before this release is no turn of anyone's */
    } else if (lingering) {
        s->look_at = 0;
        crd__ps_leave(c, s, &lv);
    }
    pthread_mutex_unlock(&ps->mu);
    if (lv.l != NULL)
        crd__ps_leave_direct(c, &lv);
    return keep;
}

void crd__sub_kept_settle(crd_client *c, const char *channel, size_t len, bool keep,
                          bool published, int64_t until_ms)
{
    crd__pubsub *ps = c->ps;
    leaving lv = {.l = NULL};
    pthread_mutex_lock(&ps->mu);
    crd__sub *s = find(ps, channel, len);
    if (s != NULL && !published && s->own_skip > 0)
        s->own_skip--; /* nothing was released: no message of this client's is to come */
    if (s != NULL && s->kept && keep && live(s)) {
        s->look_at = until_ms;
    } else if (s != NULL && s->kept) {
        /* No herd to wait behind: it ends as it would have before the release. A waiter
         * of this client that joined meanwhile would have cleared kept: nobody waits. */
        s->kept = false;
        s->permits = 0;
        if (s->look_at != 0 && s->refs == 0 && s->watch_refs == 0) {
            s->look_at = 0;
            crd__ps_leave(c, s, &lv);
        }
    }
    pthread_mutex_unlock(&ps->mu);
    if (lv.l != NULL)
        crd__ps_leave_direct(c, &lv);
}

void crd__sub_unwatch(crd_client *c, crd__sub *s)
{
    crd__pubsub *ps = c->ps;
    leaving lv = {.l = NULL};
    pthread_mutex_lock(&ps->mu);
    if (--s->watch_refs == 0 && s->refs == 0)
        crd__ps_leave(c, s, &lv);
    pthread_mutex_unlock(&ps->mu);
    if (lv.l != NULL)
        crd__ps_leave_direct(c, &lv);
}

bool crd__sub_arm(crd_client *c, crd__sub *s, crd__handoff *h)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    bool ok = live(s) && s->handoff == NULL && s->refs == 1 && s->permits == 0;
    if (ok)
        s->handoff = h;
    pthread_mutex_unlock(&ps->mu);
    return ok;
}

void crd__sub_disarm(crd_client *c, crd__sub *s)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    s->handoff = NULL;
    pthread_mutex_unlock(&ps->mu);
}

int crd__sub_take_checks(crd_client *c, crd__sub **out, int max)
{
    crd__pubsub *ps = c->ps;
    int n = 0;
    pthread_mutex_lock(&ps->mu);
    for (crd__sub *s = ps->subs; s != NULL && n < max; s = s->next)
        if (s->check) {
            s->check = false;
            out[n++] = s;
        }
    pthread_mutex_unlock(&ps->mu);
    return n;
}

bool crd__sub_await_live(crd_client *c, const char *channel, size_t len, int64_t deadline_ms)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    crd__sub *s = find(ps, channel, len);
    while (s != NULL && !live(s) && !atomic_load(&c->closed) && crd__now_ms() < deadline_ms) {
        struct timespec ts = crd__abstime(deadline_ms);
        pthread_cond_timedwait(&s->cv, &ps->mu, &ts);
        s = find(ps, channel, len);
    }
    bool yes = s != NULL && live(s);
    pthread_mutex_unlock(&ps->mu);
    return yes;
}

bool crd__sub_is_live(crd_client *c, const char *channel, size_t len)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    crd__sub *s = find(ps, channel, len);
    bool yes = s != NULL && live(s);
    pthread_mutex_unlock(&ps->mu);
    return yes;
}

/* An interrupt of a waiter asleep on s (interrupt.c's thread, no other mutex held). */
typedef struct sub_sleeper {
    crd__pubsub *ps;
    crd__sub *s;
} sub_sleeper;

static void wake_sleeper(void *arg)
{
    sub_sleeper *z = arg;
    pthread_mutex_lock(&z->ps->mu);
    pthread_cond_broadcast(&z->s->cv);
    pthread_mutex_unlock(&z->ps->mu);
}

crd_status crd__sub_quiet(crd_client *c, crd__sub **out)
{
    crd__pubsub *ps = c->ps;
    *out = NULL;
    crd__sub *s = calloc(1, sizeof *s);
    if (s == NULL || crd__cond_init(&s->cv) != 0) {
        free(s);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a wait");
    }
    atomic_init(&s->events, 0);
    s->refs = 1;
    pthread_mutex_lock(&ps->mu);
    if (atomic_load(&c->closed)) {
        pthread_mutex_unlock(&ps->mu);
        crd__ps_free_sub(s);
        return crd__fail(c, CRD_CLOSED, "client closed while waiting");
    }
    s->next = ps->quiet;
    ps->quiet = s;
    ps->total_refs++;
    pthread_mutex_unlock(&ps->mu);
    *out = s;
    return CRD_OK;
}

/* Gives a quiet entry back (crd__sub_release of one without a channel); ps->mu held. */
static void quiet_release(crd__pubsub *ps, crd__sub *s)
{
    for (crd__sub **pp = &ps->quiet; *pp != NULL; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    ps->total_refs--;
    crd__ps_free_sub(s);
}

/* need: the releases to wait for (1 for a waiter's wake-up); *got: how many of them came. */
static crd_status wait_for(crd_client *c, crd__sub *s, int64_t need, int64_t deadline_ms,
                           const crd__handoff *mine, int64_t *got, bool *confirmed)
{
    crd__pubsub *ps = c->ps;
    crd_status st = CRD_TIMEOUT;
    crd_interrupt *in = crd__intr_current();
    sub_sleeper z = {ps, s};
    crd__intr_wait iw;
    crd__intr_enter(in, &iw, wake_sleeper, &z);
    pthread_mutex_lock(&ps->mu);
    CRD__WAITING(c, 1);
    *got = 0;
    if (need > 1)
        s->need = need;
    for (;;) {
        if (mine != NULL && mine->sent != 0) {
            st = CRD_OK; /* this waiter's lent attempt went out */
            break;
        }
        if (atomic_load(&c->closed)) {
            st = CRD_CLOSED;
            break;
        }
        if (crd__intr_raised(in)) {
            st = CRD_INTERRUPTED;
            break;
        }
        if (s->permits >= need) {
            s->permits -= need;
            *got = need;
            st = CRD_OK;
            break;
        }
        if (crd__now_ms() >= deadline_ms) {
            *got = s->permits; /* fewer than asked for: the caller decides */
            s->permits = 0;
            break;
        }
        struct timespec ts = crd__abstime(deadline_ms);
        pthread_cond_timedwait(&s->cv, &ps->mu, &ts);
    }
    s->need = 0;
    CRD__WAITING(c, -1);
    *confirmed = live(s);
    pthread_mutex_unlock(&ps->mu);
    crd__intr_leave(in, &iw);
    return st;
}

crd_status crd__sub_wait(crd_client *c, crd__sub *s, int64_t deadline_ms,
                         const crd__handoff *mine, bool *confirmed)
{
    int64_t got = 0;
    return wait_for(c, s, 1, deadline_ms, mine, &got, confirmed);
}

crd_status crd__sub_wait_turns(crd_client *c, crd__sub *s, int64_t need, int64_t deadline_ms,
                               int64_t *got, bool *confirmed)
{
    return wait_for(c, s, need > 1 ? need : 1, deadline_ms, NULL, got, confirmed);
}

/* ---- the event-loop API's hooks (loop.c) ------------------------------------------------ */

int crd__pubsub_loop_fd(crd_client *c)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    if (ps->loop_fd < 0)
        ps->loop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int fd = ps->loop_fd;
    pthread_mutex_unlock(&ps->mu);
    return fd;
}

void crd__pubsub_loop_notify(crd_client *c)
{
    crd__pubsub *ps = c->ps;
    /* Written and not drained yet: the loop's next pass sees what the caller did before
     * this (most notices, e.g. one per reply of a batch, end here without a lock). An
     * exchange, not a load: a read-modify-write orders the caller's earlier stores before
     * it, where a plain load could pass them. */
    if (atomic_exchange(&ps->loop_signalled, true))
        return;
    pthread_mutex_lock(&ps->mu);
    if (ps->loop_fd >= 0)
        crd__ps_write_loop_fd(ps);
    else
        atomic_store(&ps->loop_signalled, false); /* no loop yet: nothing to tell */
    pthread_mutex_unlock(&ps->mu);
}

void crd__pubsub_loop_drain(crd_client *c, int fd)
{
    /* Drain, then clear, then (the caller) look at the operations: a notice before the
     * clear found the flag set and wrote nothing, but what it announced was done before
     * it and is seen by the look that follows; a notice after the clear writes again. */
    uint64_t drained;
    while (read(fd, &drained, sizeof drained) == (ssize_t)sizeof drained) {
    }
    atomic_exchange(&c->ps->loop_signalled, false);
}

void crd__sub_loop_watch(crd_client *c, crd__sub *s, bool on)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    s->loop_refs += on ? 1 : -1;
    pthread_mutex_unlock(&ps->mu);
}

bool crd__sub_try_take(crd_client *c, crd__sub *s, bool *confirmed)
{
    crd__pubsub *ps = c->ps;
    pthread_mutex_lock(&ps->mu);
    bool took = s->permits > 0;
    if (took)
        s->permits--;
    *confirmed = live(s);
    pthread_mutex_unlock(&ps->mu);
    return took;
}

uint64_t crd__sub_events(const crd__sub *s)
{
    return atomic_load_explicit(&s->events, memory_order_acquire);
}

