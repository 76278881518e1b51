/*
 * test_sentinel.c -- Sentinel mode and replica sync against a real topology: one
 * primary, two replicas and three redis-sentinel processes (tests/support/sentinel.h),
 * started by each test on free loopback ports and stopped at its end.
 * Runs its tests one at a time (CRDT_SERIAL_TEST): failovers load both cores.
 */
#include <criterion/criterion.h>

#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultproxy.h"
#include "failover.h"
#include "harness.h"
#include "sentinel.h"
#include "standalone/events.h"
#include "syncs.h"
#include "waiters.h"

static crdt_topo topo;

static void topo_up(void)
{
    cr_assert(crdt_topo_start(&topo, NULL), "topology: %s", topo.err);
}

static void topo_down(void) { crdt_topo_stop(&topo); }

Test(sentinel, the_test_topology_comes_up_and_fails_over, .init = topo_up, .fini = topo_down)
{
    int first = crdt_topo_primary_port(&topo);
    cr_assert_eq(first, topo.nodes[0].port);
    int second = crdt_topo_failover(&topo, 30000);
    cr_assert(second > 0 && second != first, "failover: %s", topo.err);
    cr_assert(crdt_topo_settle(&topo, 20000), "%s", topo.err);
    int third = crdt_topo_kill_primary(&topo, 30000);
    cr_assert(third > 0 && third != second, "kill: %s", topo.err);
    cr_assert(crdt_topo_restart(&topo, crdt_topo_node_index(&topo, second), 20000), "%s",
              topo.err);
}

/* ---- helpers ------------------------------------------------------------------------- */

static crd_client *sentinel_client(crd_options *o)
{
    crd_client *c = NULL;
    crd_status st = crd_client_new(o, &c);
    cr_assert_eq(st, CRD_OK, "crd_client_new: %s", crd_client_errmsg(c));
    return c;
}

static void url_options(crd_options *o, char *url, size_t cap)
{
    crd_options_init(o);
    crdt_topo_url(&topo, url, cap);
    o->url = url;
    o->identity = false; /* the WAIT checks read exact traffic (as crdt_options) */
    o->connect_timeout_ms = 500;
    o->command_timeout_ms = 2000;
}

static long long pttl_on(int port, const char *key)
{
    redisContext *r = crdt_topo_connect(&topo, port, 1000);
    cr_assert_not_null(r);
    long long v = crdt_pttl(r, key);
    redisFree(r);
    return v;
}

typedef struct waiter {
    crd_lock *l;
    int64_t wait_ms;
    crd_status st;
    int64_t done_ms;
    bool release_after;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->st = crd_lock_acquire(w->l, w->wait_ms, CRD_LEASE_WATCHDOG);
    w->done_ms = crdt_now_ms();
    if (w->st == CRD_OK && w->release_after)
        crd_lock_release(w->l);
    return NULL;
}

/* Within timeout_ms someone subscribed ch1 (and ch2 unless NULL) at the node on port
 * ("what": whose subscription, where). */
static void subscribed_at(int port, int64_t timeout_ms, const char *what, const char *ch1,
                          const char *ch2)
{
    redisContext *p = crdt_topo_connect(&topo, port, 1000);
    cr_assert_not_null(p, "no connection to port %d", port);
    const char *const channels[] = {ch1, ch2};
    for (int i = 0; i < 2 && channels[i] != NULL; i++)
        cr_assert(crdt_await_subscribed(p, channels[i], timeout_ms), "%s: nobody on %s", what,
                  channels[i]);
    redisFree(p);
}

/* ---- discovery ----------------------------------------------------------------------- */

Test(sentinel, every_lock_kind_works_through_discovery, .init = topo_up, .fini = topo_down)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    o.watchdog_timeout_ms = 600; /* renewals every 200 ms */
    crd_client *a = sentinel_client(&o), *b = sentinel_client(&o);
    const char *name = crdt_key("rl");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s", crd_client_errmsg(a));
    cr_assert_eq(crd_lock_acquire(lb, 0, CRD_LEASE_WATCHDOG), CRD_BUSY);
    /* The watchdog keeps it past three leases. */
    crdt_sleep_ms(1800); /* time passing is the scenario */
    cr_assert_gt(pttl_on(topo.nodes[0].port, name), 0);
    waiter w = {lb, 10000, CRD_IO, 0, true};
    pthread_t th;
    pthread_create(&th, NULL, wait_thread, &w);
    redisContext *p = crdt_topo_connect(&topo, topo.nodes[0].port, 1000);
    char ch[300];
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", name);
    cr_assert(crdt_await_subscribed(p, ch, 5000), "the waiter never subscribed");
    int64_t released = crdt_now_ms();
    cr_assert_eq(crd_lock_release(la), CRD_OK);
    pthread_join(th, NULL);
    cr_assert_eq(w.st, CRD_OK);
    cr_assert_lt(w.done_ms - released, 1000, "woken after %lld ms", (long long)(w.done_ms - released));

    /* Fair and read-write locks. */
    crd_lock *fa = NULL, *fb = NULL;
    cr_assert_eq(crd_fair_lock_new(a, crdt_key("fair"), &fa), CRD_OK);
    cr_assert_eq(crd_fair_lock_new(b, crdt_key("fair"), &fb), CRD_OK);
    cr_assert_eq(crd_lock_acquire(fa, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    waiter fw = {fb, 10000, CRD_IO, 0, true};
    pthread_create(&th, NULL, wait_thread, &fw);
    crdt_sleep_ms(200); /* let the waiter queue up; the release below wakes it either way */
    cr_assert_eq(crd_lock_release(fa), CRD_OK);
    pthread_join(th, NULL);
    cr_assert_eq(fw.st, CRD_OK);
    crd_rwlock *ra = NULL, *rb = NULL;
    cr_assert_eq(crd_rwlock_new(a, crdt_key("rw"), &ra), CRD_OK);
    cr_assert_eq(crd_rwlock_new(b, crdt_key("rw"), &rb), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(ra), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(rb), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(rb), 0, CRD_LEASE_WATCHDOG), CRD_DEADLOCK);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(rb)), CRD_OK);
    waiter ww = {crd_rwlock_write(rb), 10000, CRD_IO, 0, true};
    pthread_create(&th, NULL, wait_thread, &ww);
    crdt_sleep_ms(200);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(ra)), CRD_OK);
    pthread_join(th, NULL);
    cr_assert_eq(ww.st, CRD_OK);
    redisFree(p);
    crd_rwlock_free(ra);
    crd_rwlock_free(rb);
    crd_lock_free(fa);
    crd_lock_free(fb);
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
}

/* ---- failover during a hold ------------------------------------------------------------ */

static void hold_through(bool kill_primary)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    /* Renewals every 3 s; the failover (about 1-3 s here: down-after 1 s, then the
     * election) fits in the lease even on a loaded machine. */
    o.watchdog_timeout_ms = crdt_scaled_ms(9000);
    crdt_events ev;
    crdt_events_attach(&ev, &o);
    crd_client *a = sentinel_client(&o);
    const char *name = crdt_key("held");
    crd_lock *l = crdt_lock(a, name);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s", crd_client_errmsg(a));
    int next = kill_primary ? crdt_topo_kill_primary(&topo, 30000) : crdt_topo_failover(&topo, 30000);
    cr_assert(next > 0, "%s", topo.err);
    /* Renewals continue on the new primary: its copy of the lock gets a fresh TTL (seen
     * as a PTTL above the lowest one seen since its promotion), or the loss is told. The
     * deadline is two renewal periods past the lease. */
    long long at_promotion = pttl_on(next, name), ttl = at_promotion;
    long long low = at_promotion > 0 ? at_promotion : LLONG_MAX; /* lowest PTTL seen */
    int64_t deadline = crdt_now_ms() + o.watchdog_timeout_ms * 5 / 3;
    int lost = 0;
    bool renewed = false;
    while (!renewed && lost == 0 && crdt_now_ms() < deadline) {
        crdt_sleep_ms(50); /* polling the new primary's PTTL: the renewal is not an event here */
        ttl = pttl_on(next, name);
        renewed = low != LLONG_MAX && ttl > low + 100;
        low = ttl > 0 && ttl < low ? ttl : low;
        lost = atomic_load(&ev.lost);
    }
    cr_assert(renewed || lost > 0, "hold neither renewed on the new primary (pttl %lld at its "
              "promotion, %lld now) nor reported lost", at_promotion, ttl);
    cr_assert_eq(lost, 0, "the acquire was acknowledged by a replica, yet the hold was lost");
    int64_t validity = 0;
    cr_assert_eq(crd_lock_validity_ms(l, &validity), CRD_OK);
    cr_assert_gt(validity, 0);
    cr_assert_eq(crd_lock_release(l), CRD_OK, "%s", crd_client_errmsg(a));
    /* Gone on the primary the sentinels name now: on a loaded machine they may have moved
     * it again since `next` (a node that does not answer PING for the 1 s down-after is
     * failed over too; `next` is then a replica catching up). Polled for 2 s, well inside
     * the 9 s lease the watchdog last set: a lock the release left would still be there. */
    int64_t gone_by = crdt_now_ms() + 2000;
    int at = crdt_topo_primary_port(&topo);
    long long left = at > 0 ? pttl_on(at, name) : 0;
    while (left != -2 && crdt_now_ms() < gone_by) {
        crdt_sleep_ms(50);
        at = crdt_topo_primary_port(&topo);
        left = at > 0 ? pttl_on(at, name) : 0;
    }
    cr_assert_eq(left, -2, "the released lock is still on the primary %d (pttl %lld; %d after "
                 "the first switch)", at, left, next);
    crd_lock_free(l);
    crd_client_free(a);
}

Test(sentinel, a_hold_is_renewed_on_the_new_primary_after_sentinel_failover, .init = topo_up,
     .fini = topo_down)
{
    hold_through(false);
}

Test(sentinel, a_hold_is_renewed_on_the_new_primary_after_the_primary_is_killed,
     .init = topo_up, .fini = topo_down)
{
    hold_through(true);
}

/* ---- a short lease through a planned failover, a waiter in another process ----------- */

/* The MONITOR feed of the old primary, in a thread: the latest wall-clock time (the
 * server's, seconds) at which it ran a script carrying the holder's id. */
typedef struct old_feed {
    redisContext *r;
    const char *id; /* the holder's client id: in every field its scripts carry */
    atomic_bool stop;
    double last_script; /* 0: none */
    int scripts;
} old_feed;

static void *old_feed_main(void *arg)
{
    old_feed *f = arg;
    struct timeval tv = {0, 100000};
    redisSetTimeout(f->r, tv);
    while (!atomic_load(&f->stop)) {
        redisReply *rep = NULL;
        if (redisGetReply(f->r, (void **)&rep) != REDIS_OK) {
            if (f->r->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                f->r->err = 0; /* a read timeout: nothing ran */
                continue;
            }
            break; /* the server closed it (demoted): it runs nothing of ours any more */
        }
        if (rep->type == REDIS_REPLY_STATUS && strstr(rep->str, f->id) != NULL &&
            (strstr(rep->str, "\"EVALSHA\"") || strstr(rep->str, "\"EVAL\""))) {
            f->last_script = strtod(rep->str, NULL);
            f->scripts++;
        }
        freeReplyObject(rep);
    }
    return NULL;
}

/* The holder's log: when it named each node the primary (the last time, per port). */
typedef struct primary_log {
    pthread_mutex_t mu;
    int n;
    int port[16];
    int64_t mono[16]; /* monotonic ms */
    double wall[16];  /* the same moment, wall clock (seconds) */
} primary_log;

static void on_primary_log(void *ud, crd_log_level level, const char *msg)
{
    (void)level;
    primary_log *pl = ud;
    const char *at = strstr(msg, "the primary of");
    at = at != NULL ? strstr(at, "' is ") : NULL;
    const char *colon = at != NULL ? strchr(at + 5, ':') : NULL;
    if (colon == NULL)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    pthread_mutex_lock(&pl->mu);
    if (pl->n < 16) {
        pl->port[pl->n] = atoi(colon + 1);
        pl->mono[pl->n] = crdt_now_ms();
        pl->wall[pl->n] = (double)ts.tv_sec + ts.tv_nsec / 1e9;
        pl->n++;
    }
    pthread_mutex_unlock(&pl->mu);
}

/* The entry of the last time port was named, or -1. */
static int named_at(primary_log *pl, int port)
{
    pthread_mutex_lock(&pl->mu);
    int k = pl->n - 1;
    while (k >= 0 && pl->port[k] != port)
        k--;
    pthread_mutex_unlock(&pl->mu);
    return k;
}

typedef struct named_arg {
    primary_log *pl;
    int port;
} named_arg;

static bool primary_learned(void *arg)
{
    named_arg *na = arg;
    return named_at(na->pl, na->port) >= 0;
}

/* The waiter process: on a byte from go, a client of its own waits for the lock; it
 * writes the monotonic time its acquire returned (or a negative status) to out. */
static void waiter_process(const char *url, const char *name, int go, int out)
{
    char b;
    if (read(go, &b, 1) != 1)
        _exit(2);
    crd_options o;
    crd_options_init(&o);
    o.url = url;
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 2000;
    o.poll_interval_ms = 60000; /* woken by the release's message, not by polling */
    crd_client *c = NULL;
    int64_t res = -1000;
    crd_lock *l = NULL;
    if (crd_client_new(&o, &c) == CRD_OK && crd_lock_new(c, name, &l) == CRD_OK) {
        crd_status st = crd_lock_acquire(l, 120000, 30000);
        res = st == CRD_OK ? crdt_now_ms() : -(int64_t)st;
        if (st == CRD_OK)
            crd_lock_release(l);
    }
    ssize_t w = write(out, &res, sizeof res);
    crd_lock_free(l);
    crd_client_free(c);
    _exit(w == (ssize_t)sizeof res ? 0 : 3);
}

/* A 3 s watchdog hold and a waiter process blocked on it: what the failover tests of a
 * short lease share. */
typedef struct short_hold {
    char url[256];
    const char *name;
    int go[2], res[2];
    pid_t child;
    crd_options o;
    crdt_events ev;
    primary_log pl;
    crd_client *a;
    crd_lock *l;
    int old; /* the primary's port when the hold was taken */
} short_hold;

/* Forks the waiter process (before this process has threads of its own), takes the hold
 * and waits until the waiter is subscribed on the primary. */
static void short_hold_start(short_hold *h, const char *key)
{
    memset(h, 0, sizeof *h);
    crdt_topo_url(&topo, h->url, sizeof h->url);
    h->name = crdt_key(key);
    cr_assert_eq(pipe(h->go), 0);
    cr_assert_eq(pipe(h->res), 0);
    h->child = fork();
    cr_assert_geq(h->child, 0);
    if (h->child == 0) {
        close(h->go[1]);
        close(h->res[0]);
        waiter_process(h->url, h->name, h->go[0], h->res[1]);
    }
    close(h->go[0]);
    close(h->res[1]);

    url_options(&h->o, h->url, sizeof h->url);
    h->o.watchdog_timeout_ms = crdt_scaled_ms(3000); /* renewals every second */
    crdt_events_attach(&h->ev, &h->o);
    pthread_mutex_init(&h->pl.mu, NULL);
    h->o.on_log = on_primary_log;
    h->o.log_user_data = &h->pl;
    h->a = sentinel_client(&h->o);
    h->l = crdt_lock(h->a, h->name);
    cr_assert_eq(crd_lock_acquire(h->l, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s",
                 crd_client_errmsg(h->a));
    h->old = crdt_topo_primary_port(&topo);
    cr_assert_eq(write(h->go[1], "g", 1), 1);
    char ch[300];
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", h->name);
    redisContext *p = crdt_topo_connect(&topo, h->old, 1000);
    cr_assert(crdt_await_subscribed(p, ch, 10000), "the waiter process never subscribed");
    redisFree(p);
}

static int short_hold_lost(short_hold *h)
{
    return atomic_load(&h->ev.lost);
}

/* The monotonic time the waiter process got the lock (asserts that it did). */
static int64_t short_hold_waiter_got(short_hold *h)
{
    int64_t got = 0;
    cr_assert_eq(read(h->res[0], &got, sizeof got), (ssize_t)sizeof got);
    int wst = 0;
    cr_assert_eq(waitpid(h->child, &wst, 0), h->child);
    cr_assert(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "waiter process status %d", wst);
    cr_assert_gt(got, 0, "the waiter process did not get the lock: %s",
                 crd_strerror((crd_status)-got));
    close(h->go[1]);
    close(h->res[0]);
    return got;
}

static void short_hold_free(short_hold *h)
{
    crd_lock_free(h->l);
    crd_client_free(h->a);
}

Test(sentinel, a_3_s_watchdog_hold_survives_sentinel_failover_and_the_old_primary_gets_nothing,
     .init = topo_up, .fini = topo_down, .timeout = 120)
{
    short_hold h;
    short_hold_start(&h, "short");
    int old = h.old;

    old_feed feed = {crdt_topo_connect(&topo, old, 1000), crd_client_id(h.a), false, 0, 0};
    cr_assert_not_null(feed.r);
    redisReply *m = redisCommand(feed.r, "MONITOR");
    cr_assert(m != NULL && m->type == REDIS_REPLY_STATUS);
    freeReplyObject(m);
    pthread_t ft;
    pthread_create(&ft, NULL, old_feed_main, &feed);

    int64_t t0 = crdt_now_ms();
    int next = crdt_topo_failover(&topo, 30000);
    cr_assert(next > 0, "%s", topo.err);
    named_arg na = {&h.pl, next};
    cr_assert(crdt_wait_until(primary_learned, &na, crdt_scaled_ms(5000)),
              "the client never named the new primary");
    int k = named_at(&h.pl, next);
    int64_t moved_ms = h.pl.mono[k] - t0;
    double known_wall = h.pl.wall[k];
    /* Two leases pass on the new primary: the hold must be renewed there all along. */
    crdt_sleep_ms(2 * h.o.watchdog_timeout_ms); /* time passing is the scenario */
    cr_assert_eq(short_hold_lost(&h), 0, "the hold was reported lost after a planned failover");
    int64_t validity = 0;
    cr_assert_eq(crd_lock_validity_ms(h.l, &validity), CRD_OK);
    cr_assert_gt(validity, 0);
    long long ttl = pttl_on(next, h.name);
    cr_assert_gt(ttl, 0, "the new primary has no hold (pttl %lld)", ttl);
    int64_t released = crdt_now_ms();
    cr_assert_eq(crd_lock_release(h.l), CRD_OK, "%s", crd_client_errmsg(h.a));
    int64_t got = short_hold_waiter_got(&h);
    cr_assert_geq(got, released, "the waiter got the lock %lld ms before the release",
                  (long long)(released - got));

    atomic_store(&feed.stop, true);
    pthread_join(ft, NULL);
    redisFree(feed.r);
    /* Nothing of the holder's ran on the old primary once the switch was known (a
     * script written just before may run just after: 100 ms of slack). */
    double late = feed.last_script - known_wall;
    cr_assert(feed.last_script == 0 || late < crdt_scaled_ms(100) / 1000.0,
              "the old primary ran a script of the holder %.0f ms after the client knew the "
              "new primary", late * 1000);
    fprintf(stderr, "[sentinel] 3 s lease through SENTINEL FAILOVER: the client named the new "
            "primary %lld ms after SENTINEL FAILOVER was sent; %d scripts of the holder ran on the "
            "old primary, the last %.0f ms before the switch was known; the waiter process "
            "got the lock %lld ms after the release\n", (long long)moved_ms, feed.scripts,
            feed.last_script == 0 ? 0.0 : -late * 1000, (long long)(got - released));
    short_hold_free(&h);
}

/* ---- failover during a release --------------------------------------------------------- */

typedef struct promoted_arg {
    int old;
    int port; /* out: the node that says role:master */
} promoted_arg;

/* A node other than the old primary says it is the primary (the sentinels promoted it;
 * they may not have announced it yet, and the old one may still say master too). */
static bool promoted_elsewhere(void *arg)
{
    promoted_arg *pa = arg;
    for (int i = 0; i < CRDT_TOPO_NODES; i++) {
        int port = topo.nodes[i].port;
        if (port == pa->old || topo.nodes[i].pid <= 0)
            continue;
        redisContext *r = crdt_topo_connect(&topo, port, 500);
        redisReply *rep = r != NULL ? redisCommand(r, "ROLE") : NULL;
        bool master = rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
                      rep->element[0]->type == REDIS_REPLY_STRING &&
                      strcmp(rep->element[0]->str, "master") == 0;
        freeReplyObject(rep);
        if (r != NULL)
            redisFree(r);
        if (master) {
            pa->port = port;
            return true;
        }
    }
    return false;
}

static void *failover_main(void *arg)
{
    int *next = arg;
    *next = crdt_topo_failover(&topo, 30000);
    return NULL;
}

/* The release runs while the failover does: the replica is promoted, the old primary
 * may still say master and the client may not know yet. Wherever the release lands, it
 * succeeds, the hold is not reported lost, and the waiter process gets the lock after
 * the release and within the lease (3 s) even if the release reached only the old
 * primary (the watchdog renews nothing once released). */
Test(sentinel, a_release_during_sentinel_failover_lets_the_waiter_in_after_it_and_within_the_lease,
     .init = topo_up, .fini = topo_down, .timeout = 120)
{
    short_hold h;
    short_hold_start(&h, "release-failover");
    int next = -1;
    pthread_t ft;
    cr_assert_eq(pthread_create(&ft, NULL, failover_main, &next), 0);
    promoted_arg pa = {h.old, -1};
    bool promoted = crdt_wait_until(promoted_elsewhere, &pa, crdt_scaled_ms(30000));
    bool knew = promoted && named_at(&h.pl, pa.port) >= 0;
    int64_t released = crdt_now_ms();
    crd_status st = crd_lock_release(h.l);
    int64_t release_took = crdt_now_ms() - released;
    pthread_join(ft, NULL);
    cr_assert(promoted, "no replica was promoted");
    cr_assert(next > 0, "the failover did not end: %s", topo.err);
    cr_assert_eq(st, CRD_OK, "the release during the failover: %s (%s)", crd_strerror(st),
                 crd_client_errmsg(h.a));
    int64_t got = short_hold_waiter_got(&h);
    cr_assert_geq(got, released, "the waiter got the lock %lld ms before the release",
                  (long long)(released - got));
    cr_assert_lt(got - released, h.o.watchdog_timeout_ms + crdt_scaled_ms(2000),
                 "the waiter got the lock %lld ms after the release", (long long)(got - released));
    cr_assert_eq(short_hold_lost(&h), 0, "the hold was reported lost");
    fprintf(stderr, "[sentinel] release during SENTINEL FAILOVER (the client %s the new "
            "primary): the release took %lld ms, the waiter process got the lock %lld ms "
            "after it\n", knew ? "knew" : "did not know yet", (long long)release_took,
            (long long)(got - released));
    short_hold_free(&h);
}

/* ---- failover during a wait ------------------------------------------------------------ */

Test(sentinel, a_waiter_is_woken_by_the_release_on_the_new_primary, .init = topo_up,
     .fini = topo_down)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    o.poll_interval_ms = 60000; /* only a message (or a resubscribe) wakes the waiter */
    crd_client *a = sentinel_client(&o), *b = sentinel_client(&o);
    const char *name = crdt_key("wait");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    waiter w = {lb, 60000, CRD_IO, 0, true};
    pthread_t th;
    pthread_create(&th, NULL, wait_thread, &w);
    char ch[300];
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", name);
    subscribed_at(topo.nodes[0].port, 5000, "the waiter", ch, NULL);
    int next = crdt_topo_failover(&topo, 30000);
    cr_assert(next > 0, "%s", topo.err);
    /* The waiter's subscription moves to the new primary. */
    subscribed_at(next, 10000, "the waiter, resubscribed on the new primary", ch, NULL);
    int64_t released = crdt_now_ms();
    cr_assert_eq(crd_lock_release(la), CRD_OK, "%s", crd_client_errmsg(a));
    pthread_join(th, NULL);
    cr_assert_eq(w.st, CRD_OK, "%s", crd_strerror(w.st));
    cr_assert_lt(w.done_ms - released, 2000, "woken %lld ms after the release",
                 (long long)(w.done_ms - released));
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
}

/* ---- a handed-off acquire answered after the switch ---------------------------------------- */

static crdt_proxy *front; /* the proxy in front of the first primary, for the test below */

static int front_proxy(void *arg, int primary_port)
{
    (void)arg;
    front = crdt_proxy_start(primary_port, NULL);
    return front != NULL ? crdt_proxy_port(front) : -1;
}

static void front_topo_up(void)
{
    crdt_topo_opts to = {.front = front_proxy};
    cr_assert(crdt_topo_start(&topo, &to), "topology: %s", topo.err);
}

static void front_topo_down(void)
{
    crdt_topo_stop(&topo);
    crdt_proxy_stop(front);
    front = NULL;
}

/* The replica at port stops replicating (a user its primary does not know: every
 * reconnection fails its AUTH); returns once its link is down. */
static void cut_replication(int port)
{
    redisContext *r = crdt_topo_connect(&topo, port, 1000);
    cr_assert_not_null(r);
    char reply[64];
    crdt_cmd_str(r, reply, sizeof reply, "CONFIG SET masteruser crdt-no-such-user");
    cr_assert_str_eq(reply, "OK");
    crdt_cmd_str(r, reply, sizeof reply, "CONFIG SET masterauth crdt-wrong");
    cr_assert_str_eq(reply, "OK");
    crdt_cmd_str(r, reply, sizeof reply, "CLIENT KILL TYPE master");
    bool down = false;
    for (int64_t end = crdt_now_ms() + 10000; !down && crdt_now_ms() < end;) {
        redisReply *info = redisCommand(r, "INFO replication");
        down = info != NULL && info->type == REDIS_REPLY_STRING &&
               strstr(info->str, "master_link_status:down") != NULL;
        freeReplyObject(info);
        if (!down)
            crdt_sleep_ms(10);
    }
    redisFree(r);
    cr_assert(down, "the replica at %d still replicates", port);
}

/* Whether the hash name on the node at port has a field of client id (an owner field is
 * "<client id>:<thread id>"). */
static bool held_on(int port, const char *name, const char *id)
{
    redisContext *r = crdt_topo_connect(&topo, port, 1000);
    cr_assert_not_null(r);
    redisReply *rep = redisCommand(r, "HKEYS %s", name);
    bool found = false;
    for (size_t i = 0; rep != NULL && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++)
        found = found || strncmp(rep->element[i]->str, id, strlen(id)) == 0;
    freeReplyObject(rep);
    redisFree(r);
    return found;
}

/* A waiter's acquire is sent by the subscriber thread on the unlock message (the
 * hand-off) and runs on the old primary, but its reply is held back (the fault proxy in
 * front of that primary) until the waiter's client knows the sentinels' new primary,
 * which never got the hold: replication was cut before the release (replica sync off,
 * so nothing waits for it). An acquire that returns CRD_OK must hold the lock where the
 * sentinels say the primary is: the late reply is re-checked there (read back: not
 * held; the holder's copy from before the cut still is, 10 s lease), and the waiter gets
 * the lock on the new primary once that copy has expired. Taking the old primary's word
 * would have told the waiter it holds a lock the new primary gives the next client. */
Test(sentinel, a_handed_off_acquire_answered_after_a_switch_holds_the_lock_on_the_new_primary,
     .init = front_topo_up, .fini = front_topo_down, .timeout = 120)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    o.replica_sync = CRD_REPLICA_SYNC_OFF;
    o.watchdog_timeout_ms = crdt_scaled_ms(10000);
    o.poll_interval_ms = 60000; /* woken by messages, not by polling */
    crd_client *a = sentinel_client(&o);
    primary_log pl;
    memset(&pl, 0, sizeof pl);
    pthread_mutex_init(&pl.mu, NULL);
    o.on_log = on_primary_log;
    o.log_user_data = &pl;
    crd_client *b = sentinel_client(&o);
    const char *name = crdt_key("handoff-switch");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s", crd_client_errmsg(a));
    waiter w = {lb, 60000, CRD_IO, 0, false};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, wait_thread, &w), 0);
    cr_assert(crdt_await_waiting(b, 1, 10000), "the waiter never slept");

    for (int i = 1; i < CRDT_TOPO_NODES; i++)
        cut_replication(topo.nodes[i].port);
    /* b's next command: the acquire its subscriber sends on the unlock message. Its
     * reply waits in the proxy until the proxy is told to end the delay. */
    int rule = crdt_proxy_arm(front, crd_client_id(b), NULL, CRDT_PROXY_DELAY_REPLY, 100000);
    cr_assert_geq(rule, 0);
    cr_assert_eq(crd_lock_release(la), CRD_OK, "%s", crd_client_errmsg(a));
    cr_assert(crdt_proxy_wait_fired(front, rule, 5000), "the waiter sent no acquire");
    int next = crdt_topo_failover(&topo, 30000);
    cr_assert(next > 0, "%s", topo.err);
    named_arg na = {&pl, next};
    cr_assert(crdt_wait_until(primary_learned, &na, crdt_scaled_ms(5000)),
              "the waiter's client never named the new primary");
    cr_assert(held_on(next, name, crd_client_id(a)), "the holder's copy is not on the new primary");
    int64_t delivered = crdt_now_ms();
    crdt_proxy_end_delays(front);
    pthread_join(th, NULL);
    cr_assert_eq(w.st, CRD_OK, "the waiter: %s", crd_strerror(w.st));
    cr_assert(held_on(next, name, crd_client_id(b)),
              "the waiter was told it holds the lock, but the new primary has no hold of it");
    fprintf(stderr, "[sentinel] hand-off answered after a switch: the waiter got the lock on the "
            "new primary %lld ms after the old primary's reply was let through\n",
            (long long)(w.done_ms - delivered));
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
}

/* ---- a primary that stalls until the sentinels replace it ------------------------------- */

/* failover.h's view of the two primaries: ports[0] the old one, ports[1] the new. */
static redisContext *topo_node(void *arg, bool old)
{
    const int *ports = arg;
    return crdt_topo_connect(&topo, ports[old ? 0 : 1], 500);
}

/* The primary stops (SIGSTOP: a fork stall, a blip) and stays stopped until the sentinels
 * have promoted a replica. Calls made during the stall return by their own deadline (a
 * blocking acquire of 100 ms, ten loop acquires of 500 ms), the next acquire finds the
 * new primary, and when the old one resumes and runs the scripts left in its socket
 * buffers, the holds they take there die with its demotion: nothing of an owner whose
 * caller was told "failed" is held anywhere. Found with it: the failed call itself asked
 * the sentinels and sent ROLE to the stalled primary, so a 100 ms acquire returned after
 * command_timeout_ms (5.2 s); the listener thread asks now. No dispatch call waits for
 * the stalled primary either. */
Test(sentinel, a_primary_stalled_until_the_sentinels_replace_it_keeps_every_deadline_and_no_hold,
     .init = topo_up, .fini = topo_down, .timeout = 120)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    o.command_timeout_ms = 5000; /* the health limit: longer than the stall's first part */
    crd_client *c = sentinel_client(&o);
    enum { N = 10 };
    const char *key = crdt_key("stall");
    crd_lock *l = crdt_lock(c, key);
    cr_assert_eq(crd_lock_acquire(l, 0, 30000), CRD_OK); /* warm the script cache */
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    int old = crdt_topo_primary_port(&topo);
    int idx = crdt_topo_node_index(&topo, old);
    cr_assert(idx >= 0);
    int fd = crd_loop_fd(c);
    cr_assert(fd >= 0);
    const int64_t slack = crdt_scaled_ms(50);

    cr_assert_eq(kill(topo.nodes[idx].pid, SIGSTOP), 0);
    int64_t took = crdt_stalled_acquire(c, l, slack, "acquire");

    crdt_op_rec lt = {0, CRD_OK, 0};
    int64_t t0 = crdt_now_ms();
    for (int i = 0; i < N; i++)
        cr_assert_eq(crd_lock_acquire_async(l, crd_owner_new(), 500, 30000, crdt_op_rec_done, &lt,
                                            NULL), CRD_OK);
    int64_t worst_us = crdt_loop_until(c, &lt.done, N, 10000);
    int64_t all = crdt_now_ms() - t0;
    cr_assert_eq(lt.done, N, "%d of %d loop acquires completed", lt.done, N);
    cr_assert_eq(lt.failed, N, "every loop acquire ran out of its wait (last %s)",
                 crd_strerror(lt.last));
    cr_assert(all <= 500 + slack, "the 500 ms loop acquires completed after %lld ms",
              (long long)all);
    /* In Sentinel mode the attempts go through crd__call on the loop's helper threads:
     * the loop thread never waits for the stalled primary (before the helpers, one
     * dispatch call took about the 500 ms wait). */
    cr_assert_lt(worst_us, crdt_scaled_ms(50) * 1000, "a dispatch call took %lld us",
                 (long long)worst_us);

    /* Still stopped: the sentinels see it down and promote a replica. */
    int next = crdt_topo_await_switch(&topo, old, 30000);
    cr_assert(next > 0, "%s", topo.err);
    int ports[2] = {old, next};
    int64_t found = crdt_failover_check(c, l, key, topo.nodes[idx].pid, topo_node, ports,
                                        "switch");
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(c, &m, sizeof m), CRD_OK);
    fprintf(stderr, "[sentinel] stalled primary: 100 ms acquire back after %lld ms; %d loop "
            "acquires of 500 ms done after %lld ms, worst dispatch %lld us; first acquire after "
            "the switch took %lld ms; late holds given back %llu, outcomes unknown %llu\n",
            (long long)took, N, (long long)all, (long long)worst_us, (long long)found,
            (unsigned long long)m.late_holds_released, (unsigned long long)m.outcomes_unknown);
    crd_lock_free(l);
    crd_client_free(c);
}

/* ---- bad input ------------------------------------------------------------------------- */

/* A client made from url (or, url NULL, from options naming a master but no sentinel)
 * with sentinel_password: crd_client_new must return want, with every one of words (up
 * to two; NULL ends them) in its detail. */
static void client_refused(const char *url, const char *sentinel_password, crd_status want,
                           const char *w1, const char *w2)
{
    crd_options o;
    crd_options_init(&o);
    o.url = url;
    o.sentinel_master = url == NULL ? "m" : NULL;
    o.sentinel_password = sentinel_password;
    o.connect_timeout_ms = 300;
    o.command_timeout_ms = 1000;
    crd_client *c = NULL;
    crd_status st = crd_client_new(&o, &c);
    const char *msg = crd_client_errmsg(c);
    cr_assert_eq(st, want, "%s: %s, not %s (%s)", url ? url : "no sentinel_addrs",
                 crd_strerror(st), crd_strerror(want), msg);
    cr_assert(w1 == NULL || strstr(msg, w1), "%s", msg);
    cr_assert(w2 == NULL || strstr(msg, w2), "%s", msg);
    crd_client_free(c);
}

/* "redis-sentinel://127.0.0.1:<port>#<name>", in a buffer of the caller's (url). */
static const char *one_sentinel(char *url, size_t cap, const char *auth, int port,
                                const char *name)
{
    snprintf(url, cap, "redis-sentinel://%s127.0.0.1:%d#%s", auth, port, name);
    return url;
}

Test(sentinel, bad_sentinel_input_gives_a_clear_status_and_message, .init = topo_up,
     .fini = topo_down)
{
    char url[300];
    /* No sentinel reachable. */
    int dead = topo.sentinels[0].port;
    crdt_proc_stop(&topo.sentinels[0]);
    client_refused(one_sentinel(url, sizeof url, "", dead, topo.name), NULL, CRD_IO,
                   "no primary for", "Connection refused");
    /* A master name no sentinel knows. */
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d#nosuchmaster", dead,
             topo.sentinels[1].port);
    client_refused(url, NULL, CRD_IO, "does not know a master named 'nosuchmaster'", NULL);
    /* A sentinel that wants a password, given a wrong one, then none. */
    crdt_proc locked;
    cr_assert(crdt_topo_extra_sentinel(&topo, topo.name, topo.nodes[0].port, "s3cret", &locked),
              "%s", topo.err);
    one_sentinel(url, sizeof url, "", locked.port, topo.name);
    client_refused(url, "wrong", CRD_AUTH, "AUTH refused", NULL);
    client_refused(url, NULL, CRD_AUTH, "sentinel_password", NULL);
    /* The right password for the sentinels only: the data nodes have none, and a URL
     * password would be sent to them too (Lettuce's rule) and refused. */
    client_refused(url, "s3cret", CRD_OK, NULL, NULL);
    client_refused(one_sentinel(url, sizeof url, ":s3cret@", locked.port, topo.name), NULL,
                   CRD_AUTH, NULL, NULL);
    crdt_proc_stop(&locked);
    /* A "primary" that answers as a replica: a sentinel monitoring a replica. */
    crdt_proc liar;
    cr_assert(crdt_topo_extra_sentinel(&topo, "liar", topo.nodes[1].port, NULL, &liar), "%s",
              topo.err);
    client_refused(one_sentinel(url, sizeof url, "", liar.port, "liar"), NULL, CRD_IO,
                   "answers ROLE slave: not a primary", NULL);
    crdt_proc_stop(&liar);
    /* Bad URLs and options. */
    client_refused("redis-sentinel://127.0.0.1:1", NULL, CRD_INVALID_ARGUMENT, "#MASTERNAME",
                   NULL);
    client_refused(NULL, NULL, CRD_INVALID_ARGUMENT, "sentinel_addrs", NULL);
}

Test(sentinel, an_acquire_keeps_trying_within_its_wait_while_no_sentinel_answers,
     .init = topo_up, .fini = topo_down)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    crd_client *a = sentinel_client(&o);
    crd_lock *l = crdt_lock(a, crdt_key("nosentinel"));
    /* The primary dies and every sentinel is stopped: nothing can name a primary. */
    for (int i = 0; i < CRDT_TOPO_SENTINELS; i++)
        crdt_proc_stop(&topo.sentinels[i]);
    crdt_proc_stop(&topo.nodes[0]);
    int64_t t0 = crdt_now_ms();
    crd_status st = crd_lock_acquire(l, 1500, CRD_LEASE_WATCHDOG);
    int64_t took = crdt_now_ms() - t0;
    cr_assert_eq(st, CRD_IO, "%s", crd_strerror(st));
    cr_assert_geq(took, 1400, "gave up after %lld ms instead of trying for its wait",
                  (long long)took);
    cr_assert(strstr(crd_client_errmsg(a), "connection failing"), "%s", crd_client_errmsg(a));
    crd_lock_free(l);
    crd_client_free(a);
}

/* ---- replica sync ---------------------------------------------------------------------- */

Test(sentinel, replica_sync_waits_for_replicas_and_undoes_an_unacknowledged_acquire,
     .init = topo_up, .fini = topo_down)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    o.replica_sync_timeout_ms = 300;
    crdt_tracelog *tl = crdt_tracelog_new();
    crdt_tracelog_attach(tl, &o);
    crd_client *a = sentinel_client(&o);
    const char *name = crdt_key("sync");
    crd_lock *l = crdt_lock(a, name);
    size_t from = crdt_tracelog_count(tl);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert(crdt_tracelog_has(tl, from, "WAIT", "2"), "no WAIT 2 after the acquire");
    cr_assert(crdt_tracelog_has(tl, from, "WAIT", "300"));
    from = crdt_tracelog_count(tl);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_assert(crdt_tracelog_has(tl, from, "WAIT", "2"), "no WAIT after the release");

    /* Both replicas stopped: nobody acknowledges; the acquire is undone. */
    kill(topo.nodes[1].pid, SIGSTOP);
    kill(topo.nodes[2].pid, SIGSTOP);
    crd_status st = crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG);
    char msg[600];
    snprintf(msg, sizeof msg, "%s", crd_client_errmsg(a));
    cr_assert_eq(st, CRD_NOT_SYNCED, "%s", crd_strerror(st));
    cr_assert(strstr(msg, "none of its 2 replicas acknowledged") && strstr(msg, "undone"), "%s",
              msg);
    cr_assert_eq(pttl_on(topo.nodes[0].port, name), -2, "the unacknowledged acquire stayed");
    bool held = true;
    cr_assert_eq(crd_lock_is_held(l, &held), CRD_OK);
    cr_assert(!held);

    /* Switched off: no WAIT at all, and the acquire stands. */
    crd_options off = o;
    off.replica_sync = CRD_REPLICA_SYNC_OFF;
    crd_client *b = sentinel_client(&off);
    crd_lock *lb = crdt_lock(b, name);
    from = crdt_tracelog_count(tl);
    cr_assert_eq(crd_lock_acquire(lb, 0, 5000), CRD_OK);
    cr_assert(!crdt_tracelog_has(tl, from, "WAIT", NULL), "WAIT sent with replica sync off");
    cr_assert_eq(crd_lock_release(lb), CRD_OK);
    kill(topo.nodes[1].pid, SIGCONT);
    kill(topo.nodes[2].pid, SIGCONT);
    crd_lock_free(lb);
    crd_client_free(b);
    crd_lock_free(l);
    crd_client_free(a);
    crdt_tracelog_free(tl);
}

/* ---- rediss-sentinel:// ---------------------------------------------------------------- */

static bool master_known(void *arg)
{
    crdt_proc *s = arg;
    redisContext *r = crdt_raw_connect(s->port, 1000);
    if (r == NULL)
        return false;
    redisReply *rep = redisCommand(r, "SENTINEL get-master-addr-by-name tlsmaster");
    bool yes = rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2;
    if (rep != NULL)
        freeReplyObject(rep);
    redisFree(r);
    return yes;
}

/* TLS to the sentinel and to the data node: discovery, a lock, a waiter woken by the
 * release, and a CA that signed neither refused with the reason. (Failover itself does
 * not depend on the transport; it is tested over plaintext above.) */
Test(sentinel, rediss_sentinel_discovers_the_primary_and_locks_over_tls, .timeout = 60)
{
    crdt_server primary;
    const char *extra[] = {"--tls-replication", "yes", NULL};
    crdt_server_start_tls(&primary, crdt_tls_certs(), extra, NULL, NULL);
    crdt_proc s;
    char err[512] = "";
    cr_assert(crdt_tls_sentinel_start(crdt_tls_certs(), "tlsmaster", primary.tls_port, &s, err,
                                      sizeof err), "%s", err);
    cr_assert(crdt_wait_until(master_known, &s, 10000), "the sentinel does not know the primary");
    char url[200];
    snprintf(url, sizeof url, "rediss-sentinel://127.0.0.1:%d#tlsmaster", s.tls_port);
    crd_options o;
    crd_options_init(&o);
    o.url = url;
    o.tls_ca_file = crdt_tls_file("ca.crt");
    o.replica_sync = CRD_REPLICA_SYNC_OFF; /* no replicas here */
    crd_client *a = sentinel_client(&o), *b = sentinel_client(&o);
    const char *name = crdt_key("tls");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s", crd_client_errmsg(a));
    crdt_waiter w = {.lock = lb, .wait_ms = 20000, .lease_ms = 30000};
    crdt_waiter_start(&w);
    char ch[300];
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", name);
    redisContext *r = crdt_raw_connect(primary.port, 1000);
    cr_assert_not_null(r);
    cr_assert(crdt_await_subscribed(r, ch, 5000), "the waiter never subscribed");
    /* everything reached the node on its TLS port: its plain port saw no client of ours */
    redisReply *list = redisCommand(r, "CLIENT LIST");
    cr_assert(list != NULL && list->type == REDIS_REPLY_STRING);
    char lport[32];
    snprintf(lport, sizeof lport, "laddr=127.0.0.1:%d ", primary.port);
    int plain = 0;
    for (const char *p = list->str; (p = strstr(p, lport)) != NULL; p++)
        plain++;
    freeReplyObject(list);
    cr_expect_eq(plain, 1, "only the test's own connection is on the plain port");
    redisFree(r);
    crdt_release_wakes(la, &w, "tls waiter");
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
    crdt_expect_untrusted_ca_refused(&o);
    crdt_proc_stop(&s);
    crdt_server_stop(&primary);
}

/* ---- the CLI --------------------------------------------------------------------------- */

#ifdef CRD_CLI_PATH
/* Runs the CLI through the shell; its stdout (first line) into out; returns the exit code. */
static int cli(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cli(char *out, size_t cap, const char *fmt, ...)
{
    char args[1024], cmd[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", CRD_CLI_PATH, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

Test(sentinel, the_cli_runs_and_shows_locks_through_the_sentinels, .init = topo_up,
     .fini = topo_down)
{
    char url[256], out[4096];
    crdt_topo_url(&topo, url, sizeof url);
    const char *name = crdt_key("cli");
    int rc = cli(out, sizeof out, "--url '%s' run %s -- %s --url '%s' status %s", url, name,
                 CRD_CLI_PATH, url, name);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "holders: 1") != NULL, "%s", out);
    rc = cli(out, sizeof out, "--url 'redis-sentinel://127.0.0.1:1#%s' status %s", topo.name, name);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(out, "no primary") && strstr(out, "Connection refused"), "%s",
              out);
}

static bool file_says(void *arg)
{
    const char **p = arg; /* {path, text} */
    FILE *f = fopen(p[0], "r");
    if (f == NULL)
        return false;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strstr(buf, p[1]) != NULL;
}

static bool file_exists(void *arg) { return access((const char *)arg, F_OK) == 0; }

/* The issue's own scenario: `credisson run` holds through SENTINEL FAILOVER with a 3 s
 * watchdog, or through a SIGKILLed primary with a 10 s one (exit 0, not 70 "lost"), and
 * a second `run` waiting for the same name starts its command only after the first
 * one's command ended (its marker file gone). */
static void run_through(bool kill_primary, int64_t watchdog_ms)
{
    char url[256], line[2000], up[300], go[300], seen[300];
    crdt_topo_url(&topo, url, sizeof url);
    const char *name = crdt_key("run");
    snprintf(up, sizeof up, "%s/holder.up", topo.nodes[0].dir);
    snprintf(go, sizeof go, "%s/holder.go", topo.nodes[0].dir);
    snprintf(seen, sizeof seen, "%s/waiter.seen", topo.nodes[0].dir);
    /* The holder's command: marks itself running, waits for the go file, unmarks. */
    snprintf(line, sizeof line, "%s --url '%s' --watchdog-ms %lld run '%s' -- sh -c "
             "'echo up > %s; while [ ! -e %s ]; do sleep 0.05; done; rm %s' 2>&1",
             CRD_CLI_PATH, url, (long long)watchdog_ms, name, up, go, up);
    FILE *holder = popen(line, "r");
    cr_assert_not_null(holder);
    cr_assert(crdt_wait_until(file_exists, up, 20000), "the holder's command never started");
    /* The waiter: its command records whether the holder's command was still running. */
    /* It waits through the failover and two leases (70 s under memcheck's time scale). */
    snprintf(line, sizeof line, "%s --url '%s' run --wait %lld '%s' -- sh -c "
             "'if [ -e %s ]; then echo overlap > %s; else echo after > %s; fi' 2>&1",
             CRD_CLI_PATH, url, (long long)(4 * watchdog_ms + 60000), name, up, seen, seen);
    FILE *wproc = popen(line, "r");
    cr_assert_not_null(wproc);
    char ch[300];
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", name);
    /* Two subscribers: the holder's (run watches its own lock: prompt loss detection)
     * and the waiting run's. */
    redisContext *pr = crdt_topo_connect(&topo, crdt_topo_primary_port(&topo), 1000);
    cr_assert(crdt_await_numsub(pr, ch, 2, 20000), "the waiting run never subscribed");
    redisFree(pr);
    int next = kill_primary ? crdt_topo_kill_primary(&topo, 30000) : crdt_topo_failover(&topo, 30000);
    cr_assert(next > 0, "%s", topo.err);
    crdt_sleep_ms(2 * watchdog_ms); /* two leases on the new primary: the scenario */
    cr_expect_gt(pttl_on(next, name), 0, "the new primary has no hold");
    FILE *g = fopen(go, "w");
    cr_assert_not_null(g);
    fclose(g);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, holder);
    out[n] = '\0';
    int rc = pclose(holder);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "the holding run exited %d: %s",
              WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out);
    n = fread(out, 1, sizeof out - 1, wproc);
    out[n] = '\0';
    rc = pclose(wproc);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "the waiting run exited %d: %s",
              WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out);
    const char *after[2] = {seen, "after"};
    cr_assert(file_says(after), "the waiting run's command started while the holder's ran");
}

Test(sentinel, credisson_run_with_a_3_s_watchdog_keeps_its_lock_through_sentinel_failover,
     .init = topo_up, .fini = topo_down, .timeout = 120)
{
    run_through(false, crdt_scaled_ms(3000));
}

Test(sentinel, credisson_run_with_a_10_s_watchdog_keeps_its_lock_when_the_primary_is_killed,
     .init = topo_up, .fini = topo_down, .timeout = 180)
{
    run_through(true, crdt_scaled_ms(10000));
}

Test(sentinel, watch_follows_the_primary_through_a_failover, .init = topo_up, .fini = topo_down,
     .timeout = 120)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    crd_client *a = sentinel_client(&o);
    const char *name = crdt_key("watched");
    crd_lock *l = crdt_lock(a, name);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s", crd_client_errmsg(a));
    char errpath[300], line[1400];
    snprintf(errpath, sizeof errpath, "%s/watch.err", topo.nodes[0].dir);
    snprintf(line, sizeof line, "%s --url '%s' watch --count 1 --timeout 60000 '%s' 2>'%s'",
             CRD_CLI_PATH, url, name, errpath);
    FILE *wf = popen(line, "r");
    cr_assert_not_null(wf);
    char held[1024] = "", rel[1024] = "";
    cr_assert_not_null(fgets(held, sizeof held, wf), "watch printed nothing");
    cr_assert(strstr(held, " held ") != NULL, "%s", held);
    int next = crdt_topo_failover(&topo, 30000);
    cr_assert(next > 0, "%s", topo.err);
    /* watch notices, asks the sentinels and attaches to the new primary */
    const char *again[2] = {errpath, "watching again on the new primary"};
    cr_assert(crdt_wait_until(file_says, again, 30000), "watch did not follow the failover");
    /* Once the sentinels have reconfigured every node (a node they reconfigure drops its
     * clients), the watch is subscribed at the new primary. */
    cr_assert(crdt_topo_settle(&topo, 20000), "%s", topo.err);
    char ch[400];
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", name);
    redisContext *np = crdt_topo_connect(&topo, next, 1000);
    cr_assert(crdt_await_subscribed(np, ch, 30000), "watch is not subscribed at the new primary");
    redisFree(np);
    cr_assert_eq(crd_lock_release(l), CRD_OK, "%s", crd_client_errmsg(a));
    cr_assert_not_null(fgets(rel, sizeof rel, wf), "watch did not see the release");
    cr_expect_eq(pclose(wf), 0, "%s", line);
    cr_expect(strstr(rel, " release ") != NULL && strstr(rel, "cause=unlock") != NULL,
              "the release on the new primary: %s", rel);
    crd_lock_free(l);
    crd_client_free(a);
}
#endif

/* ---- the synchronizers (issue #27) ------------------------------------------------------ */

static long long get_on(int port, const char *key)
{
    redisContext *r = crdt_topo_connect(&topo, port, 1000);
    cr_assert_not_null(r);
    redisReply *rep = redisCommand(r, "GET %s", key);
    cr_assert_not_null(rep);
    long long v = rep->type == REDIS_REPLY_NIL ? -1 : strtoll(rep->str, NULL, 10);
    freeReplyObject(rep);
    redisFree(r);
    return v;
}

Test(sentinel, semaphores_and_a_latch_work_through_discovery, .init = topo_up, .fini = topo_down)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    crd_client *a = sentinel_client(&o), *b = sentinel_client(&o);
    int primary = topo.nodes[0].port;
    redisContext *p = crdt_topo_connect(&topo, primary, 1000);

    /* RSemaphore: a waiter on b woken by a's release, through the primary's channel. */
    const char *sname = crdt_key("sem");
    crd_semaphore *sa = crdt_sem_of(a, sname), *sb = crdt_sem_of(b, sname);
    CRDT_OK(a, crd_semaphore_try_set_permits(sa, 2, 0, NULL));
    CRDT_OK(a, crd_semaphore_acquire(sa, 2, 0));
    cr_assert_eq(crd_semaphore_acquire(sb, 1, 0), CRD_BUSY);
    crdt_sync_waiter sw = {.s = sb, .permits = 1, .wait_ms = 20000};
    crdt_sync_waiter_start(&sw);
    char ch[300];
    snprintf(ch, sizeof ch, "redisson_sc:{%s}", sname);
    cr_assert(crdt_await_subscribed(p, ch, 5000), "the semaphore waiter never subscribed");
    int64_t t0 = crdt_now_ms();
    CRDT_OK(a, crd_semaphore_release(sa, 1));
    crdt_sync_waiter_woken(&sw, t0, 2000, "the semaphore acquire");
    cr_assert_eq(get_on(primary, sname), 0, "the primary holds the count");

    /* RPermitExpirableSemaphore: an id issued through b, released through a. */
    const char *pname = crdt_key("pes");
    crd_permit_semaphore *pa = crdt_pes_of(a, pname), *pb = crdt_pes_of(b, pname);
    CRDT_OK(b, crd_permit_semaphore_try_set_permits(pb, 1, NULL));
    char id[CRD_PERMIT_ID_SIZE], other[CRD_PERMIT_ID_SIZE];
    CRDT_OK(b, crd_permit_semaphore_acquire(pb, 0, 10000, id));
    cr_assert_eq(crd_permit_semaphore_acquire(pa, 0, 10000, other), CRD_BUSY);
    CRDT_OK(a, crd_permit_semaphore_release(pa, id));
    cr_assert_eq(get_on(primary, pname), 1);

    /* RCountDownLatch: an await on b opened by a's last count-down. */
    const char *lname = crdt_key("latch");
    crd_latch *la = crdt_latch_of(a, lname), *lb = crdt_latch_of(b, lname);
    CRDT_OK(a, crd_latch_try_set_count(la, 2, NULL));
    crdt_sync_waiter lw = {.l = lb, .wait_ms = 20000};
    crdt_sync_waiter_start(&lw);
    snprintf(ch, sizeof ch, "redisson_countdownlatch__channel__{%s}", lname);
    cr_assert(crdt_await_subscribed(p, ch, 5000), "the latch waiter never subscribed");
    CRDT_OK(a, crd_latch_count_down(la));
    int64_t count = 0;
    CRDT_OK(b, crd_latch_count(lb, &count));
    cr_assert_eq(count, 1);
    t0 = crdt_now_ms();
    CRDT_OK(a, crd_latch_count_down(la));
    crdt_sync_waiter_woken(&lw, t0, 2000, "the latch await");
    cr_assert_eq(get_on(primary, lname), -1, "the latch key is gone at zero");

    redisFree(p);
    crd_latch_free(la);
    crd_latch_free(lb);
    crd_permit_semaphore_free(pa);
    crd_permit_semaphore_free(pb);
    crd_semaphore_free(sa);
    crd_semaphore_free(sb);
    crd_client_free(a);
    crd_client_free(b);
}

/* A semaphore waiter and a latch waiter, subscribed on the first primary, follow a
 * SENTINEL FAILOVER to the new one and are woken there by a release and a count-down:
 * the state moved with the failover and so did the channels. The client has replica sync
 * on (the default), though the synchronizers' writes send no WAIT (nor do Redisson's):
 * their state reaches the replicas by ordinary replication, seconds before the failover
 * here. */
Test(sentinel, semaphore_and_latch_waiters_are_woken_on_the_new_primary_after_failover,
     .init = topo_up, .fini = topo_down, .timeout = 120)
{
    char url[256];
    crd_options o;
    url_options(&o, url, sizeof url);
    o.poll_interval_ms = 60000; /* only a message (or a resubscribe) wakes a waiter */
    cr_assert_neq(o.replica_sync, CRD_REPLICA_SYNC_OFF, "replica sync is on by default");
    crd_client *a = sentinel_client(&o), *b = sentinel_client(&o);
    const char *sname = crdt_key("fsem"), *lname = crdt_key("flatch");
    crd_semaphore *sa = crdt_sem_of(a, sname), *sb = crdt_sem_of(b, sname);
    crd_latch *la = crdt_latch_of(a, lname), *lb = crdt_latch_of(b, lname);
    CRDT_OK(a, crd_semaphore_try_set_permits(sa, 1, 0, NULL));
    CRDT_OK(a, crd_semaphore_acquire(sa, 1, 0));
    CRDT_OK(a, crd_latch_try_set_count(la, 1, NULL));

    crdt_sync_waiter sw = {.s = sb, .permits = 1, .wait_ms = 60000};
    crdt_sync_waiter lw = {.l = lb, .wait_ms = 60000};
    crdt_sync_waiter_start(&sw);
    crdt_sync_waiter_start(&lw);
    char sch[300], lch[300];
    snprintf(sch, sizeof sch, "redisson_sc:{%s}", sname);
    snprintf(lch, sizeof lch, "redisson_countdownlatch__channel__{%s}", lname);
    subscribed_at(topo.nodes[0].port, 5000, "the semaphore and latch waiters", sch, lch);

    int next = crdt_topo_failover(&topo, 30000);
    cr_assert(next > 0, "%s", topo.err);
    subscribed_at(next, 10000, "the semaphore and latch waiters, resubscribed on the new primary",
                  sch, lch);
    cr_assert_not(crdt_gate_wait(&sw.done, 1, 0), "the semaphore waiter returned: %s",
                  crd_strerror(sw.st));
    cr_assert_not(crdt_gate_wait(&lw.done, 1, 0), "the latch waiter returned: %s",
                  crd_strerror(lw.st));
    cr_assert_eq(get_on(next, sname), 0, "the count moved with the failover");
    cr_assert_eq(get_on(next, lname), 1, "the latch moved with the failover");

    int64_t t0 = crdt_now_ms();
    CRDT_OK(a, crd_semaphore_release(sa, 1));
    /* Woken by the message, not by its 60 s deadline or poll interval. (Before the client
     * followed the sentinels' newest configuration epoch, the woken waiter's first
     * acquire went to the old primary in about half the runs, got no answer and reached
     * the new one only after command_timeout_ms.) */
    crdt_sync_waiter_woken(&sw, t0, 2000, "the semaphore acquire");
    t0 = crdt_now_ms();
    CRDT_OK(a, crd_latch_count_down(la));
    crdt_sync_waiter_woken(&lw, t0, 2000, "the latch await");
    cr_assert_eq(get_on(next, sname), 0, "the waiter took the released permit");
    cr_assert_eq(get_on(next, lname), -1);
    crd_latch_free(la);
    crd_latch_free(lb);
    crd_semaphore_free(sa);
    crd_semaphore_free(sb);
    crd_client_free(a);
    crd_client_free(b);
}
