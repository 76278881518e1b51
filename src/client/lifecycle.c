/*
 * lifecycle.c -- the process around the clients: the registry of live clients, the
 * fork handlers, the thread-exit hook, and what happens to holds when a thread exits
 * or a client closes.
 *
 * fork(): the prepare handler takes registry_mu and then every client's mutexes
 * (subscriber, cluster map and pools, holds, gates, watchdog, topology), so the child starts with
 * all of them unlocked and consistent. The child has none of the parent's threads and must never
 * write on the parent's sockets: each client gets a new identity, an empty pool (sockets closed,
 * never written), no holds, and subscriber and watchdog threads that start on first use.
 *
 * Thread exit: the exiting thread's holds stop being renewed (they expire with their
 * lease), or are released when release_on_thread_exit is set.
 *
 * Threads: any. Locks: registry_mu, then (fork only) each client's mutexes in the order
 * of internal.h; holds->mu around bookkeeping only, never during Redis traffic.
 */
#include "client.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static crd_client *registry;
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
/* ---- holds at thread exit and close --------------------------------------------------- */

typedef struct owner_scan {
    uint64_t owner; /* 0 = every owner */
    bool release;
    crd__holds *hs;
    struct {
        char *name;
        size_t len;
        uint64_t owner;
        crd__kind kind;
        int64_t count;
    } *list;
    size_t n, cap;
} owner_scan;

static void scan_owner(crd__hold *h, void *arg)
{
    owner_scan *s = arg;
    if (s->owner != 0 && h->owner != s->owner)
        return;
    if (s->release && !h->lost && s->n < s->cap) {
        char *copy = malloc(h->name_len + 1);
        if (copy != NULL) {
            memcpy(copy, h->name, h->name_len);
            s->list[s->n].name = copy;
            s->list[s->n].len = h->name_len;
            s->list[s->n].owner = h->owner;
            s->list[s->n].kind = (crd__kind)h->kind;
            s->list[s->n].count = h->count;
            s->n++;
            return; /* released below; the release removes the record */
        }
    }
    /* Stop renewal: the lock expires within its lease. A read-back of this owner's lost
     * acquire still to come must not take this hold for a lost one. */
    crd__settle *e = crd__settle_find(s->hs, h->name, h->name_len, h->owner, h->kind);
    if (e != NULL && !h->lost)
        e->forgotten += h->count;
    crd__holds_remove(s->hs, h);
}

static void release_owner_holds(crd_client *c, uint64_t owner, bool release)
{
    crd__holds *hs = c->holds;
    owner_scan s = {owner, release, hs, NULL, 0, 0};
    pthread_mutex_lock(&hs->mu);
    if (release && hs->count > 0) {
        s.cap = hs->count;
        s.list = calloc(s.cap, sizeof *s.list);
        if (s.list == NULL)
            s.cap = 0;
    }
    crd__holds_foreach(hs, scan_owner, &s);
    pthread_mutex_unlock(&hs->mu);
    for (size_t i = 0; i < s.n; i++) {
        for (int64_t k = 0; k < s.list[i].count; k++)
            if (crd__release_by_name(c, s.list[i].name, s.list[i].len, s.list[i].owner,
                                     s.list[i].kind) != CRD_OK)
                break;
        /* Whatever the outcome, stop tracking it. */
        pthread_mutex_lock(&hs->mu);
        crd__hold *h = crd__holds_find(hs, s.list[i].name, s.list[i].len, s.list[i].owner,
                                       (int)s.list[i].kind);
        if (h != NULL)
            crd__holds_remove(hs, h);
        pthread_mutex_unlock(&hs->mu);
        free(s.list[i].name);
    }
    free(s.list);
}

void crd__lifecycle_release_all(crd_client *c) { release_owner_holds(c, 0, true); }

static void on_thread_exit(uint64_t owner)
{
    pthread_mutex_lock(&registry_mu);
    for (crd_client *c = registry; c != NULL; c = c->next_client)
        if (!c->failed && !atomic_load(&c->closed) && c->pid == getpid())
            release_owner_holds(c, owner, c->opts.release_on_thread_exit);
    pthread_mutex_unlock(&registry_mu);
}

/* ---- fork ------------------------------------------------------------------------------- */

/* Every mutex of the client, in the lock order (crd__mu_rank), or let go in reverse. */
static void lock_client(crd_client *c, bool lock)
{
    for (int i = 0; i < CRD__MU_RANKS; i++) {
        pthread_mutex_t *mu = c->fork_mu[lock ? i : CRD__MU_RANKS - 1 - i];
        if (mu != NULL && lock)
            pthread_mutex_lock(mu);
        else if (mu != NULL)
            pthread_mutex_unlock(mu);
    }
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&registry_mu);
    for (crd_client *c = registry; c != NULL; c = c->next_client)
        lock_client(c, true);
}

static void fork_parent(void)
{
    for (crd_client *c = registry; c != NULL; c = c->next_client)
        lock_client(c, false);
    pthread_mutex_unlock(&registry_mu);
}

static void drop_hold(crd__hold *h, void *arg) { crd__holds_remove(arg, h); }

static void fork_child(void)
{
    crd__process_refresh();
    crd__random_after_fork();
    for (crd_client *c = registry; c != NULL; c = c->next_client) {
        crd__uuid_v4(c->uuid);
        c->pid = getpid();
        crd__pool_after_fork_child(c);
        crd__holds_foreach(c->holds, drop_hold, c->holds);
        crd__settle_forget(c->holds);
        crd__sub **unwatch;
        crd__holds_take_unwatch(c->holds, &unwatch);
        free(unwatch); /* the child's subscriber entries are dropped with them below */
        crd__gates_after_fork_child(c);
        crd__watchdog_after_fork_child(c);
        crd__pubsub_after_fork_child(c);
        crd__topology_after_fork_child(c);
        atomic_store(&c->metrics.waiting, 0); /* the waiting threads are the parent's */
        lock_client(c, false);
    }
    pthread_mutex_unlock(&registry_mu);
}

static void install_hooks(void)
{
    crd__process_refresh();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    crd__owner_set_exit_hook(on_thread_exit);
}

/* ---- registry ----------------------------------------------------------------------------- */

void crd__lifecycle_register(crd_client *c)
{
    pthread_once(&hooks_once, install_hooks);
    pthread_mutex_lock(&registry_mu);
    c->next_client = registry;
    registry = c;
    pthread_mutex_unlock(&registry_mu);
}

void crd__lifecycle_unregister(crd_client *c)
{
    pthread_mutex_lock(&registry_mu);
    for (crd_client **pp = &registry; *pp != NULL; pp = &(*pp)->next_client)
        if (*pp == c) {
            *pp = c->next_client;
            break;
        }
    pthread_mutex_unlock(&registry_mu);
}
