/*
 * test_sentinel.c -- Sentinel mode and replica sync against a real topology: one
 * primary, two replicas and three redis-sentinel processes (tests/support/sentinel.h),
 * started by each test on free loopback ports and stopped at its end.
 * Runs its tests one at a time (CRDT_SERIAL_TEST): failovers load both cores.
 */
#include <criterion/criterion.h>

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sentinel.h"
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

/* Events of the watchdog, counted. */
typedef struct events {
    pthread_mutex_t mu;
    int lost, failing, recovered;
} events;

static void on_event(void *ud, const crd_event *e)
{
    events *ev = ud;
    pthread_mutex_lock(&ev->mu);
    if (e->kind == CRD_EVENT_LOCK_LOST)
        ev->lost++;
    else if (e->kind == CRD_EVENT_RENEWAL_FAILING)
        ev->failing++;
    else
        ev->recovered++;
    pthread_mutex_unlock(&ev->mu);
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
    events ev = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};
    o.on_event = on_event;
    o.event_user_data = &ev;
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
        pthread_mutex_lock(&ev.mu);
        lost = ev.lost;
        pthread_mutex_unlock(&ev.mu);
    }
    cr_assert(renewed || lost > 0, "hold neither renewed on the new primary (pttl %lld at its "
              "promotion, %lld now) nor reported lost", at_promotion, ttl);
    cr_assert_eq(lost, 0, "the acquire was acknowledged by a replica, yet the hold was lost");
    int64_t validity = 0;
    cr_assert_eq(crd_lock_validity_ms(l, &validity), CRD_OK);
    cr_assert_gt(validity, 0);
    cr_assert_eq(crd_lock_release(l), CRD_OK, "%s", crd_client_errmsg(a));
    cr_assert_eq(pttl_on(next, name), -2);
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
    redisContext *p = crdt_topo_connect(&topo, topo.nodes[0].port, 1000);
    cr_assert(crdt_await_subscribed(p, ch, 5000));
    redisFree(p);
    int next = crdt_topo_failover(&topo, 30000);
    cr_assert(next > 0, "%s", topo.err);
    /* The waiter's subscription moves to the new primary. */
    p = crdt_topo_connect(&topo, next, 1000);
    cr_assert(crdt_await_subscribed(p, ch, 10000), "the waiter did not resubscribe on the new "
              "primary");
    redisFree(p);
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

/* ---- bad input ------------------------------------------------------------------------- */

static crd_status try_client(const char *url, const char *sentinel_password, char *msg,
                             size_t cap)
{
    crd_options o;
    crd_options_init(&o);
    o.url = url;
    o.sentinel_password = sentinel_password;
    o.connect_timeout_ms = 300;
    o.command_timeout_ms = 1000;
    crd_client *c = NULL;
    crd_status st = crd_client_new(&o, &c);
    snprintf(msg, cap, "%s", crd_client_errmsg(c));
    crd_client_free(c);
    return st;
}

Test(sentinel, bad_sentinel_input_gives_a_clear_status_and_message, .init = topo_up,
     .fini = topo_down)
{
    char url[300], msg[600];
    /* No sentinel reachable. */
    int dead = topo.sentinels[0].port;
    crdt_proc_stop(&topo.sentinels[0]);
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#%s", dead, topo.name);
    cr_assert_eq(try_client(url, NULL, msg, sizeof msg), CRD_IO);
    cr_assert(strstr(msg, "no primary for") && strstr(msg, "Connection refused"), "%s", msg);
    /* A master name no sentinel knows. */
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d#nosuchmaster", dead,
             topo.sentinels[1].port);
    cr_assert_eq(try_client(url, NULL, msg, sizeof msg), CRD_IO);
    cr_assert(strstr(msg, "does not know a master named 'nosuchmaster'"), "%s", msg);
    /* A sentinel that wants a password, given a wrong one, then none. */
    crdt_proc locked;
    cr_assert(crdt_topo_extra_sentinel(&topo, topo.name, topo.nodes[0].port, "s3cret", &locked),
              "%s", topo.err);
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#%s", locked.port, topo.name);
    cr_assert_eq(try_client(url, "wrong", msg, sizeof msg), CRD_AUTH);
    cr_assert(strstr(msg, "AUTH refused"), "%s", msg);
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#%s", locked.port, topo.name);
    cr_assert_eq(try_client(url, NULL, msg, sizeof msg), CRD_AUTH);
    cr_assert(strstr(msg, "sentinel_password"), "%s", msg);
    /* The right password for the sentinels only: the data nodes have none, and a URL
     * password would be sent to them too (Lettuce's rule) and refused. */
    cr_assert_eq(try_client(url, "s3cret", msg, sizeof msg), CRD_OK, "%s", msg);
    snprintf(url, sizeof url, "redis-sentinel://:s3cret@127.0.0.1:%d#%s", locked.port, topo.name);
    cr_assert_eq(try_client(url, NULL, msg, sizeof msg), CRD_AUTH, "%s", msg);
    crdt_proc_stop(&locked);
    /* A "primary" that answers as a replica: a sentinel monitoring a replica. */
    crdt_proc liar;
    cr_assert(crdt_topo_extra_sentinel(&topo, "liar", topo.nodes[1].port, NULL, &liar), "%s",
              topo.err);
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#liar", liar.port);
    cr_assert_eq(try_client(url, NULL, msg, sizeof msg), CRD_IO);
    cr_assert(strstr(msg, "answers ROLE slave: not a primary"), "%s", msg);
    crdt_proc_stop(&liar);
    /* Bad URLs and options. */
    cr_assert_eq(try_client("redis-sentinel://127.0.0.1:1", NULL, msg, sizeof msg),
                 CRD_INVALID_ARGUMENT);
    cr_assert(strstr(msg, "#MASTERNAME"), "%s", msg);
    crd_options o;
    crd_options_init(&o);
    o.sentinel_master = "m";
    crd_client *c = NULL;
    cr_assert_eq(crd_client_new(&o, &c), CRD_INVALID_ARGUMENT);
    cr_assert(strstr(crd_client_errmsg(c), "sentinel_addrs"), "%s", crd_client_errmsg(c));
    crd_client_free(c);
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
