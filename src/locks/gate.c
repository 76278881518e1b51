/*
 * gate.c -- fairness at the client: the local queue of an exclusive lock's waiters, and
 * the short deferral that keeps a releasing client from cutting in front of waiters in
 * other processes.
 *
 * Local queue. Every acquire of an exclusive kind (reentrant, fenced, write) that may
 * wait joins its lock name's gate in arrival order; only the gate's head talks to Redis
 * (tries, subscribes, waits for the unlock message). The others wait on their own
 * condition variable (an event-loop acquire: on the loop's eventfd) until they become
 * the head. So a thread that releases and asks again at once queues behind the threads
 * already waiting, and the unlock message wakes the longest waiter, not a random one.
 * When the head leaves (it took the lock, gave up or was cancelled) it hands its
 * subscription reference to the next head: the channel stays subscribed while local
 * waiters remain, with no UNSUBSCRIBE/SUBSCRIBE per hand-off. An owner that already holds
 * the lock (re-entry) and a try without wait never queue.
 *
 * Deferral. A release that reached subscribers in other clients (the unlock script says
 * how many connections the message reached; our own subscriber connection is not
 * counted) sets the gate's defer_until about one hand-off time ahead: until then this
 * client's next attempt on the name waits (for the lock's message or the time), so the
 * waiter that was just woken elsewhere takes the lock instead of the releaser taking it
 * back. The gate also keeps how many subscribers the release reached: from four on, a
 * blocking acquire counts their turns instead of the time (acquire.c, DEFER). Nothing
 * new goes on the wire: Java and other clients see Redisson's protocol.
 *
 * Lock: gates->mu, a leaf (no other mutex is taken under it, no Redis traffic). Threads:
 * callers' threads and the loop thread.
 */
#include "waiter.h"

#include <stdlib.h>
#include <string.h>

#define NBUCKETS 64
#define UNUSED_MAX 8      /* deferrals nobody used before deferring pauses */
#define PROBE_EVERY 16    /* while paused, every 16th release defers again */
#define KEEP_US 10000000  /* a gate's counters outlive its last release by 10 s */

struct crd__gate {
    struct crd__gate *next; /* hash chain */
    crd__acquire *head, *tail; /* the queue; head is the one that talks to Redis */
    int64_t defer_until_us;   /* monotonic µs; 0: no deferral */
    int64_t last_release_us;  /* the last release that could defer (kept 10 s after it) */
    int unused;               /* deferrals in a row after which nobody had taken the lock */
    unsigned skipped;         /* releases not deferred since unused reached UNUSED_MAX */
    int others;               /* the other clients the last deferring release reached */
    size_t len;
    char name[];
};

struct crd__gates {
    pthread_mutex_t mu;
    struct crd__gate *buckets[NBUCKETS];
};

static size_t bucket(const char *name, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)name[i];
        h *= 1099511628211ULL;
    }
    return (size_t)((h ^ (h >> 29)) % NBUCKETS);
}

crd_status crd__gates_init(crd_client *c)
{
    crd__gates *g = calloc(1, sizeof *g);
    if (g == NULL)
        return CRD_NO_MEMORY;
    if (crd__mutex_make(c, CRD__MU_GATES, &g->mu, NULL) != 0) {
        free(g);
        return CRD_NO_MEMORY;
    }
    c->gates = g;
    return CRD_OK;
}

static void drop_all(crd__gates *g)
{
    for (size_t i = 0; i < NBUCKETS; i++) {
        while (g->buckets[i] != NULL) {
            crd__gate *e = g->buckets[i];
            g->buckets[i] = e->next;
            free(e);
        }
    }
}

void crd__gates_free(crd_client *c)
{
    crd__gates *g = c->gates;
    if (g == NULL)
        return;
    drop_all(g);
    crd__mutex_drop(c, CRD__MU_GATES, &g->mu, NULL);
    free(g);
    c->gates = NULL;
}

/* The gate of name, created when create is set (NULL: none, or out of memory). Stale
 * gates met on the way (nobody queued, no deferral left) are freed. Caller holds mu. */
static crd__gate *find(crd__gates *g, const char *name, size_t len, bool create, int64_t now_us)
{
    crd__gate **pp = &g->buckets[bucket(name, len)];
    while (*pp != NULL) {
        crd__gate *e = *pp;
        if (e->len == len && memcmp(e->name, name, len) == 0)
            return e;
        if (e->head == NULL && e->defer_until_us <= now_us &&
            e->last_release_us + KEEP_US <= now_us) {
            *pp = e->next;
            free(e);
            continue;
        }
        pp = &e->next;
    }
    if (!create)
        return NULL;
    crd__gate *e = calloc(1, sizeof *e + len);
    if (e == NULL)
        return NULL;
    memcpy(e->name, name, len);
    e->len = len;
    e->next = *pp;
    *pp = e;
    return e;
}

bool crd__gate_join(crd__acquire *a)
{
    crd_lock *l = a->l;
    crd__gates *g = a->c->gates;
    pthread_mutex_lock(&g->mu);
    crd__gate *e = find(g, l->name, l->name_len, true, crd__now_us());
    if (e == NULL) {
        pthread_mutex_unlock(&g->mu);
        a->gate_head = true; /* out of memory: an ungated acquire still works */
        return true;
    }
    a->gated = true;
    CRD__APPEND(e->head, e->tail, a, gate_next);
    a->gate_head = e->head == a;
    bool head = a->gate_head;
    pthread_mutex_unlock(&g->mu);
    return head;
}

/* Unlinks a from gate e's queue; true when a was there. Caller holds mu. */
static bool unlink_waiter(crd__gate *e, crd__acquire *a)
{
    crd__acquire **pp = &e->head, *prev = NULL;
    while (*pp != NULL && *pp != a) {
        prev = *pp;
        pp = &(*pp)->gate_next;
    }
    if (*pp != a)
        return false;
    *pp = a->gate_next;
    if (e->tail == a)
        e->tail = prev;
    return true;
}

void crd__gate_leave(crd__acquire *a, bool took)
{
    if (!a->gated)
        return;
    crd_client *c = a->c;
    crd__gates *g = c->gates;
    crd__acquire *next = NULL;
    bool notify_loop = false;
    pthread_mutex_lock(&g->mu);
    /* Found by name, never through a kept pointer: a fork child drops every gate. */
    crd__gate *e = find(g, a->l->name, a->l->name_len, false, 0);
    bool was_head = e != NULL && e->head == a;
    if (e != NULL && unlink_waiter(e, a) && was_head && e->head != NULL) {
        next = e->head;
        next->gate_head = true;
        /* The channel stays subscribed for the next head (same lock, same channel). */
        if (next->sub == NULL && a->sub != NULL) {
            next->sub = a->sub;
            next->confirmed = a->confirmed;
            a->sub = NULL;
            a->sub_handed = true;
        }
        next->behind_ms = took ? a->lease : 0;
        /* Read under the mutex: once it is released, a blocking next may return and
         * reuse its memory (TSan saw the read race a new acquire's memset in chaos). */
        notify_loop = next->nonblocking;
        if (!notify_loop)
            pthread_cond_signal(&next->gate_cv);
    }
    a->gated = false;
    a->gate_head = false;
    pthread_mutex_unlock(&g->mu);
    if (notify_loop)
        crd__pubsub_loop_notify(c);
}

bool crd__gate_is_head(crd__acquire *a)
{
    crd__gates *g = a->c->gates;
    pthread_mutex_lock(&g->mu);
    bool head = a->gate_head;
    if (!head) {
        /* Not in its gate's queue any more (a fork child dropped the gates): ungated. */
        crd__gate *e = find(g, a->l->name, a->l->name_len, false, 0);
        crd__acquire *w = e != NULL ? e->head : NULL;
        while (w != NULL && w != a)
            w = w->gate_next;
        head = a->gate_head = w == NULL;
    }
    pthread_mutex_unlock(&g->mu);
    return head;
}

/* An interrupt of a blocking waiter asleep in the queue or a deferral (interrupt.c). */
static void wake_waiter(void *arg)
{
    crd__acquire *a = arg;
    crd__gates *g = a->c->gates;
    pthread_mutex_lock(&g->mu);
    pthread_cond_signal(&a->gate_cv);
    pthread_mutex_unlock(&g->mu);
}

crd_status crd__gate_wait(crd__acquire *a, int64_t deadline_ms)
{
    crd__gates *g = a->c->gates;
    crd_status st = CRD_OK;
    crd_interrupt *in = crd__intr_current();
    crd__intr_wait iw;
    crd__intr_enter(in, &iw, wake_waiter, a);
    pthread_mutex_lock(&g->mu);
    CRD__WAITING(a->c, 1);
    while (!a->gate_head) {
        if (atomic_load(&a->c->closed)) {
            st = CRD_CLOSED;
            break;
        }
        if (crd__intr_raised(in)) {
            st = CRD_INTERRUPTED;
            break;
        }
        if (crd__now_ms() >= deadline_ms) {
            st = CRD_TIMEOUT;
            break;
        }
        struct timespec ts = crd__abstime(deadline_ms);
        pthread_cond_timedwait(&a->gate_cv, &g->mu, &ts);
    }
    CRD__WAITING(a->c, -1);
    pthread_mutex_unlock(&g->mu);
    crd__intr_leave(in, &iw);
    return st;
}

crd_status crd__gate_sleep(crd__acquire *a, int64_t deadline_ms)
{
    crd__gates *g = a->c->gates;
    crd_interrupt *in = crd__intr_current();
    crd__intr_wait iw;
    crd__intr_enter(in, &iw, wake_waiter, a);
    pthread_mutex_lock(&g->mu);
    CRD__WAITING(a->c, 1);
    while (!atomic_load(&a->c->closed) && !crd__intr_raised(in) && crd__now_ms() < deadline_ms) {
        struct timespec ts = crd__abstime(deadline_ms);
        pthread_cond_timedwait(&a->gate_cv, &g->mu, &ts);
    }
    CRD__WAITING(a->c, -1);
    crd_status st = atomic_load(&a->c->closed) ? CRD_CLOSED
                    : crd__intr_raised(in)     ? CRD_INTERRUPTED
                                               : CRD_OK;
    pthread_mutex_unlock(&g->mu);
    crd__intr_leave(in, &iw);
    return st;
}

void crd__gates_wake_all(crd_client *c)
{
    crd__gates *g = c->gates;
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < NBUCKETS; i++)
        for (crd__gate *e = g->buckets[i]; e != NULL; e = e->next)
            for (crd__acquire *a = e->head; a != NULL; a = a->gate_next)
                if (!a->nonblocking)
                    pthread_cond_signal(&a->gate_cv);
    pthread_mutex_unlock(&g->mu);
}

void crd__gate_defer(crd_client *c, const char *name, size_t len, int64_t until_us, int others)
{
    crd__gates *g = c->gates;
    int64_t now = crd__now_us();
    pthread_mutex_lock(&g->mu);
    crd__gate *e = find(g, name, len, true, now);
    /* Deferrals nobody used (the message reached listeners that do not want the lock,
     * a PSUBSCRIBE * for one): pause, and probe again now and then. */
    if (e != NULL && (e->unused < UNUSED_MAX || e->skipped++ % PROBE_EVERY == PROBE_EVERY - 1)) {
        e->last_release_us = now;
        if (e->defer_until_us < until_us)
            e->defer_until_us = until_us;
        e->others = others;
    }
    pthread_mutex_unlock(&g->mu);
}

void crd__gate_deferral_used(crd__acquire *a, bool used)
{
    crd__gates *g = a->c->gates;
    pthread_mutex_lock(&g->mu);
    crd__gate *e = find(g, a->l->name, a->l->name_len, false, 0);
    if (e != NULL) {
        e->unused = used ? 0 : e->unused + 1;
        if (used)
            e->skipped = 0;
    }
    pthread_mutex_unlock(&g->mu);
}

int64_t crd__gate_deferred_until(crd__acquire *a, int *others)
{
    crd__gates *g = a->c->gates;
    pthread_mutex_lock(&g->mu);
    crd__gate *e = find(g, a->l->name, a->l->name_len, false, 0);
    int64_t until = e != NULL ? e->defer_until_us : 0;
    *others = e != NULL ? e->others : 0;
    pthread_mutex_unlock(&g->mu);
    return until;
}

void crd__gates_after_fork_child(crd_client *c)
{
    /* The queued acquires belong to threads the child does not have. An event-loop
     * acquire of the forking thread finds itself in no queue and goes on ungated
     * (crd__gate_is_head). */
    drop_all(c->gates);
}
