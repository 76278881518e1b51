/*
 * test_lifecycle.c -- what happens to holds when their thread exits, when the process
 * forks, and when the client is shut down (PROTOCOL.md 13 items 11, 12, 13 and 17), and
 * that owner ids are never reused.
 *
 * Sleeps appear only where time passing is the behaviour under test (a parent keeping
 * its hold across several watchdog timeouts); everything else waits on a condition with
 * a deadline.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "harness.h"
#include "waiters.h"

static crd_client *client_with(int64_t watchdog_ms, bool release_on_thread_exit,
                               bool release_on_close)
{
    crd_options o;
    crdt_options(&o);
    o.watchdog_timeout_ms = watchdog_ms;
    o.release_on_thread_exit = release_on_thread_exit;
    o.release_on_close = release_on_close;
    return crdt_client_opts(&o);
}

/* ---------------------------------------------------------------------------------- */
/* Thread exit                                                                        */
/* ---------------------------------------------------------------------------------- */

typedef struct thread_job {
    crd_lock *l;
    int holds;      /* acquires to make (watchdog) */
    crd_status st;  /* first failure, or the last result */
    uint64_t owner;
    bool held;
    crd_status release_st;
} thread_job;

static void *acquire_and_exit(void *arg)
{
    thread_job *j = arg;
    j->owner = crd_owner_current();
    j->st = CRD_OK;
    for (int i = 0; i < j->holds && j->st == CRD_OK; i++)
        j->st = crd_lock_acquire(j->l, 0, CRD_LEASE_WATCHDOG);
    return NULL; /* no release */
}

static void *try_dead_hold(void *arg)
{
    thread_job *j = arg;
    j->owner = crd_owner_current();
    j->release_st = crd_lock_release(j->l);
    j->held = true;
    crd_lock_is_held(j->l, &j->held);
    j->st = crd_lock_acquire(j->l, 0, 5000);
    return NULL;
}

Test(lifecycle, a_thread_exiting_without_release_stops_renewal_and_its_hold_expires)
{
    const int64_t timeout = 1500;
    crd_client *c = client_with(timeout, false, false);
    redisContext *r = crdt_redis();
    const char *key = crdt_key("exit");
    crd_lock *l = crdt_lock(c, key);

    thread_job a = {l, 1, CRD_OK, 0, false, CRD_OK};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, acquire_and_exit, &a), 0);
    pthread_join(th, NULL);
    int64_t t_exit = crdt_now_ms();
    cr_assert_eq(a.st, CRD_OK);
    char field[96];
    crdt_owner_field(c, a.owner, field, sizeof field);
    cr_assert_eq(crdt_cmd_int(r, "HEXISTS %s %s", key, field), 1,
                 "default policy: the dead thread's hold is not released, only left to expire");

    /* A new thread: a different owner id, which cannot release or re-enter the hold. */
    thread_job b = {l, 0, CRD_OK, 0, true, CRD_OK};
    cr_assert_eq(pthread_create(&th, NULL, try_dead_hold, &b), 0);
    pthread_join(th, NULL);
    cr_assert_neq(b.owner, a.owner, "a new thread reused the dead thread's owner id");
    cr_assert_eq(b.release_st, CRD_NOT_OWNER, "release by a new thread: %s",
                 crd_strerror(b.release_st));
    cr_assert_not(b.held);
    cr_assert_eq(b.st, CRD_BUSY, "a new thread re-entered the dead thread's hold: %s",
                 crd_strerror(b.st));
    cr_assert_eq(crd_lock_release(l), CRD_NOT_OWNER, "the main thread is not the owner either");
    cr_assert_eq(crdt_cmd_int(r, "HEXISTS %s %s", key, field), 1);

    /* Renewal stopped: the key expires within the timeout. */
    cr_assert(crdt_await_exists(r, key, false, timeout + 700),
              "the dead thread's hold was still there %" PRId64 " ms after the thread exited",
              crdt_now_ms() - t_exit);
    int64_t gone = crdt_now_ms() - t_exit;
    fprintf(stderr, "[lifecycle] dead thread's hold expired %" PRId64 " ms after the exit\n", gone);

    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
}

Test(lifecycle, with_release_on_thread_exit_the_hold_is_released_when_the_thread_exits)
{
    crd_client *c = client_with(1500, true, false);
    redisContext *r = crdt_redis();
    const char *key = crdt_key("exit-release");
    const char *key2 = crdt_key("exit-release-other");
    crd_lock *l = crdt_lock(c, key);
    crd_lock *l2 = crdt_lock(c, key2);

    /* The main thread's own hold must survive the other thread's exit. */
    cr_assert_eq(crd_lock_acquire(l2, 0, CRD_LEASE_WATCHDOG), CRD_OK);

    thread_job a = {l, 2, CRD_OK, 0, false, CRD_OK}; /* reentrant: count 2 */
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, acquire_and_exit, &a), 0);
    pthread_join(th, NULL);
    cr_assert_eq(a.st, CRD_OK);
    cr_assert(crdt_await_exists(r, key, false, 300),
              "release_on_thread_exit: the hold (count 2) was not released at thread exit");
    cr_assert_eq(crdt_exists(r, key2), 1, "another thread's hold was released");
    bool held = false;
    cr_assert_eq(crd_lock_is_held(l2, &held), CRD_OK);
    cr_assert(held);
    cr_assert_eq(crd_lock_release(l2), CRD_OK);

    crd_lock_free(l);
    crd_lock_free(l2);
    crd_client_free(c);
    redisFree(r);
}

/* ---------------------------------------------------------------------------------- */
/* Owner ids                                                                          */
/* ---------------------------------------------------------------------------------- */

static void *record_owner(void *arg)
{
    *(uint64_t *)arg = crd_owner_current();
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

Test(lifecycle, owner_ids_never_repeat_across_two_thousand_thread_lifetimes)
{
    /* A client exists, so the thread-exit hook runs for every thread. */
    crd_client *c = crdt_client();
    enum { N = 2000, PAR = 8 };
    uint64_t *ids = calloc(2 * N + 1, sizeof *ids);
    cr_assert_not_null(ids);
    crdt_threads_run(N, PAR, record_owner, ids, sizeof *ids);
    for (int i = 0; i < N; i++)
        ids[N + i] = crd_owner_new();
    ids[2 * N] = crd_owner_current();
    for (int i = 0; i < 2 * N + 1; i++)
        cr_assert_neq(ids[i], 0, "owner id 0 at %d", i);
    qsort(ids, 2 * N + 1, sizeof *ids, cmp_u64);
    for (int i = 1; i < 2 * N + 1; i++)
        cr_assert_neq(ids[i], ids[i - 1], "owner id %" PRIu64 " was handed out twice", ids[i]);
    free(ids);
    crd_client_free(c);
}

/* ---------------------------------------------------------------------------------- */
/* fork                                                                               */
/* ---------------------------------------------------------------------------------- */

#define FLOOD 2000

typedef struct fork_ctx {
    crd_client *c;
    crd_lock *held;     /* N: held by the parent */
    crd_lock *free_l;   /* never locked */
    const char *other;  /* a name the child locks and releases */
    char parent_id[40];
    int ready_fd;       /* child -> parent: flood starts */
} fork_ctx;

/* crdt_options() with a watchdog timeout_ms, traced into the returned log. */
static crdt_tracelog *traced_watchdog_options(crd_options *o, int64_t timeout_ms)
{
    crdt_tracelog *tl = crdt_traced_options(o);
    o->watchdog_timeout_ms = timeout_ms;
    return tl;
}

/* Exit codes say which check failed. */
static int fork_child(void *arg)
{
    fork_ctx *x = arg;
    const char *id = crd_client_id(x->c);
    if (strlen(id) != 36)
        return 10;
    if (strcmp(id, x->parent_id) == 0)
        return 11; /* the child kept the parent's identity */
    int64_t v = 0;
    if (crd_lock_validity_ms(x->held, &v) != CRD_NOT_OWNER)
        return 14; /* the child inherited the parent's hold records */
    if (CRDT_FORK_CHILD_LIMITED) {
        /* The child's first command starts its I/O thread (harness.h): the child's
         * traffic runs in the plain build; the parent's half (renewals through the
         * fork) runs here. */
        char go = 1, ok = 'k';
        return write(x->ready_fd, &go, 1) == 1 && write(x->ready_fd, &ok, 1) == 1 ? 0 : 19;
    }
    if (crd_lock_release(x->held) != CRD_NOT_OWNER)
        return 12;
    bool b = true;
    if (crd_lock_is_held(x->held, &b) != CRD_OK || b)
        return 13;
    crd_lock *m = NULL;
    if (crd_lock_new(x->c, x->other, &m) != CRD_OK)
        return 15;
    if (crd_lock_acquire(m, 0, 5000) != CRD_OK)
        return 16;
    if (crd_lock_is_held(m, &b) != CRD_OK || !b)
        return 17;
    if (crd_lock_release(m) != CRD_OK)
        return 18;
    crd_lock_free(m);
    char go = 1;
    if (write(x->ready_fd, &go, 1) != 1)
        return 19;
    for (int i = 0; i < FLOOD; i++) {
        crd_lock *l = (i & 1) ? x->free_l : x->held;
        bool locked = false;
        if (crd_lock_is_locked(l, &locked) != CRD_OK)
            return 20;
        if (locked != !(i & 1))
            return 21; /* a reply meant for someone else */
    }
    /* Every check passed: say so before the shutdown, which is checked on its own. */
    char ok = 'k';
    if (write(x->ready_fd, &ok, 1) != 1)
        return 22;
    /* Shutting the child's copy down releases nothing of the parent's (the parent's
     * client has release_on_close set). */
    crd_client_free(x->c);
    return 0;
}

Test(lifecycle, a_forked_child_gets_a_new_identity_holds_nothing_and_the_parent_keeps_renewing)
{
    const int64_t timeout = 1500;
    crd_options o;
    crdt_tracelog *tl = traced_watchdog_options(&o, timeout);
    o.release_on_close = true;
    crdt_fixture f;
    crdt_fixture_open_opts(&f, 1, "N", crdt_lock, &o, NULL);
    const char *freek = crdt_key("free");
    const char *other = crdt_key("child-own");
    crd_lock *lf = crdt_lock(f.a, freek);
    cr_assert_eq(crd_lock_acquire(f.la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    char field[96];
    crdt_owner_field(f.a, crd_owner_current(), field, sizeof field);
    /* Fork while the renewal thread is established (it has renewed once and sleeps on
     * its condition variable), as in a long-lived process. */
    cr_assert(crdt_await_traced(tl, 0, NULL, 0, 2, 2 * timeout), "no renewal before the fork");

    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fork_ctx x = {f.a, f.la, lf, other, "", fds[1]};
    snprintf(x.parent_id, sizeof x.parent_id, "%s", crd_client_id(f.a));
    int64_t t_fork = crdt_now_ms();
    pid_t pid = crdt_fork(fork_child, &x);
    close(fds[1]);

    /* Flood in the parent while the child floods. */
    struct pollfd p = {fds[0], POLLIN, 0};
    cr_assert_eq(poll(&p, 1, 10000), 1, "the child never started its flood");
    char go = 0;
    ssize_t got = read(fds[0], &go, 1);
    for (int i = 0; i < FLOOD; i++) {
        crd_lock *fl = (i & 1) ? lf : f.la;
        bool locked = false;
        cr_assert_eq(crd_lock_is_locked(fl, &locked), CRD_OK);
        cr_assert_eq(locked, !(i & 1), "parent call %d got another call's reply", i);
    }
    char ok = 0;
    p.revents = 0;
    ssize_t got_ok = poll(&p, 1, 10000) == 1 ? read(fds[0], &ok, 1) : 0;
    close(fds[0]);
    int rc = crdt_wait_child(pid, 10000);
    cr_assert_eq(got, 1, "the child exited before its flood (exit code %d)", rc);
    cr_assert(got_ok == 1 || rc != -1, "the child hung during its checks");
    cr_assert(got_ok == 1, "the child failed check %d (see fork_child)", rc);
    /* The checks passed; the child's crd_client_free must return too (checked last, so
     * the parent's side below is still verified). */
    cr_expect_neq(rc, -1, "the child hung in crd_client_free (killed after 10 s)");
    cr_expect(rc == 0 || rc == -1, "the child's shutdown failed with %d", rc);

    cr_assert_str_neq(crd_client_id(f.a), "", "");
    cr_assert_str_eq(crd_client_id(f.a), x.parent_id, "the parent's identity changed");
    cr_assert_eq(crdt_exists(f.r, other), 0, "the child's own lock was not released");
    cr_assert_eq(crdt_cmd_int(f.r, "HEXISTS %s %s", f.key, field), 1,
                 "the child's exit released the parent's hold");

    /* Time passing is the behaviour: the parent keeps renewing past two timeouts. */
    crdt_sleep_ms(t_fork + 2 * timeout + 300 - crdt_now_ms());
    cr_assert_eq(crdt_cmd_int(f.r, "HEXISTS %s %s", f.key, field), 1,
                 "the parent's hold expired after the fork: renewal stopped");
    long long t = crdt_cmd_int(f.r, "PTTL %s", f.key);
    cr_assert(t > 0 && t <= timeout, "PTTL %lld", t);
    bool held = false;
    cr_assert_eq(crd_lock_is_held(f.la, &held), CRD_OK);
    cr_assert(held);
    int64_t v = 0;
    cr_assert_eq(crd_lock_validity_ms(f.la, &v), CRD_OK);
    cr_assert(v > 0);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    cr_assert_eq(crdt_exists(f.r, f.key), 0);

    crdt_fixture_close(&f);
    crd_lock_free(lf);
    crdt_tracelog_free(tl);
}

/* ---------------------------------------------------------------------------------- */
/* Shutdown                                                                           */
/* ---------------------------------------------------------------------------------- */

Test(lifecycle, freeing_a_client_stops_renewal_and_its_holds_expire_without_a_release)
{
    const int64_t timeout = 1500;
    crd_options o;
    crdt_tracelog *tl = traced_watchdog_options(&o, timeout);
    crd_client *c = crdt_client_opts(&o);
    redisContext *r = crdt_redis();
    const char *keys[3] = {crdt_key("s0"), crdt_key("s1"), crdt_key("s2")};
    crd_lock *l[3];
    for (int i = 0; i < 3; i++) {
        l[i] = crdt_lock(c, keys[i]);
        cr_assert_eq(crd_lock_acquire(l[i], 0, CRD_LEASE_WATCHDOG), CRD_OK);
    }
    size_t before = crdt_tracelog_count(tl);
    int64_t t_free = crdt_now_ms();
    crd_client_free(c);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(crdt_exists(r, keys[i]), 1,
                     "crd_client_free released %s (no release by default)", keys[i]);
    for (size_t i = before; i < crdt_tracelog_count(tl); i++) {
        crdt_trace_entry e;
        cr_assert(crdt_tracelog_get(tl, i, &e));
        bool unlock = e.argc >= 3 && strcasecmp(e.argv[0], "EVALSHA") == 0 && strcmp(e.argv[2], "3") == 0;
        crdt_trace_entry_free(&e);
        cr_assert_not(unlock, "an unlock script was sent during crd_client_free");
    }
    for (int i = 0; i < 3; i++) {
        cr_assert(crdt_await_exists(r, keys[i], false, timeout + 700 - (crdt_now_ms() - t_free)),
                  "%s still exists %" PRId64 " ms after the client was freed", keys[i],
                  crdt_now_ms() - t_free);
    }
    fprintf(stderr, "[lifecycle] holds of a freed client expired after %" PRId64 " ms\n",
            crdt_now_ms() - t_free);
    for (int i = 0; i < 3; i++)
        crd_lock_free(l[i]);
    crdt_tracelog_free(tl);
    redisFree(r);
}

Test(lifecycle, with_release_on_close_every_hold_is_released_when_the_client_is_freed)
{
    crd_client *c = client_with(1500, false, true);
    redisContext *r = crdt_redis();
    const char *keys[3] = {crdt_key("c0"), crdt_key("c1"), crdt_key("c2")};
    crd_lock *l[3];
    for (int i = 0; i < 3; i++)
        l[i] = crdt_lock(c, keys[i]);
    cr_assert_eq(crd_lock_acquire(l[0], 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(l[0], 0, CRD_LEASE_WATCHDOG), CRD_OK); /* count 2 */
    cr_assert_eq(crd_lock_acquire(l[1], 0, 60000), CRD_OK);             /* a lease hold */
    /* A hold of an explicit owner, taken on another thread. */
    crdt_waiter j = {
        .lock = l[2], .owner = crd_owner_new(), .lease_ms = CRD_LEASE_WATCHDOG, .hold = true};
    crdt_waiter_start(&j);
    crdt_waiter_join(&j, 5000, "the explicit owner's hold");
    cr_assert_eq(j.acquire_st, CRD_OK, "%s", crd_strerror(j.acquire_st));
    /* A foreign hold on one more name must be left alone. */
    crd_client *other = crdt_client();
    const char *foreign = crdt_key("foreign");
    crd_lock *lfo = crdt_lock(other, foreign);
    cr_assert_eq(crd_lock_acquire(lfo, 0, 60000), CRD_OK);

    crd_client_free(c);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(crdt_exists(r, keys[i]), 0, "release_on_close left %s held", keys[i]);
    cr_assert_eq(crdt_exists(r, foreign), 1, "release_on_close touched another client's lock");
    cr_assert_eq(crd_lock_release(lfo), CRD_OK);

    for (int i = 0; i < 3; i++)
        crd_lock_free(l[i]);
    crd_lock_free(lfo);
    crd_client_free(other);
    redisFree(r);
}

Test(lifecycle, a_thread_blocked_in_acquire_returns_closed_promptly_when_the_client_is_freed)
{
    crdt_fixture f; /* a holds, b's thread blocks */
    crdt_fixture_open(&f, 2, "blocked", crdt_lock);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 30000), CRD_OK);

    crdt_waiter b = {
        .lock = f.lb, .wait_ms = CRD_WAIT_FOREVER, .lease_ms = CRD_LEASE_WATCHDOG, .hold = true};
    crdt_waiter_start(&b);
    cr_assert(crdt_await_subscribed(f.r, f.channel, 5000), "the waiter never subscribed");
    /* Blocked, not in a round trip: crd_client_free's contract (no other thread inside
     * a call that is not a blocked acquire). */
    cr_assert(crdt_await_waiting(f.b, 1, 5000), "the waiter never went to sleep");

    int64_t t0 = crdt_now_ms();
    crd_client_free(f.b);
    f.b = NULL; /* freed: the fixture's close frees only its handle */
    int64_t t_free = crdt_now_ms();
    crdt_waiter_join(&b, 30000, NULL);
    int64_t t_join = crdt_now_ms();
    fprintf(stderr,
            "[lifecycle] blocked acquire: free took %" PRId64 " ms, the waiter returned %" PRId64
            " ms after the free began\n",
            t_free - t0, b.t_acq_ms - t0);
    cr_assert_eq(b.acquire_st, CRD_CLOSED, "the blocked acquire returned %s",
                 crd_strerror(b.acquire_st));
    cr_assert(t_join - t0 < 1000, "the blocked acquire took %" PRId64 " ms to return",
              t_join - t0);
    cr_assert_eq(crdt_exists(f.r, f.key), 1, "the holder's lock must be untouched");
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    crdt_fixture_close(&f);
}

/* A thread of the parent is blocked in acquire (waiting on the client's condition
 * variables) when another thread forks: the child must still come to life and work. */
static int fork_waiter_child(void *arg)
{
    crd_lock *l = arg;
    if (CRDT_FORK_CHILD_LIMITED)
        return 0; /* its first command starts the I/O thread (harness.h) */
    bool locked = false;
    if (crd_lock_is_locked(l, &locked) != CRD_OK || !locked)
        return 3;
    return 0;
}

Test(lifecycle, a_fork_while_another_thread_waits_for_a_lock_gives_a_working_child)
{
    crd_client *holder = crdt_client();
    crdt_fixture f;
    crdt_fixture_open(&f, 1, "fork-waiter", crdt_lock);
    crd_lock *lh = crdt_lock(holder, f.key);
    cr_assert_eq(crd_lock_acquire(lh, 0, 30000), CRD_OK);
    crdt_waiter b = {
        .lock = f.la, .wait_ms = CRD_WAIT_FOREVER, .lease_ms = CRD_LEASE_WATCHDOG, .hold = true};
    crdt_waiter_start(&b);
    cr_assert(crdt_await_subscribed(f.r, f.channel, 5000), "the waiter never subscribed");
    /* Fork while the waiter sleeps (not while it handles a reply: what a thread holds on
     * its stack is lost in the child, which has no such thread). */
    cr_assert(crdt_await_waiting(f.a, 1, 5000), "the waiter never went to sleep");

    pid_t pid = crdt_fork(fork_waiter_child, f.la);
    int rc = crdt_wait_child(pid, 5000);
    /* Let the waiter go before asserting, so a failure leaves no blocked thread. */
    cr_assert_eq(crd_lock_release(lh), CRD_OK);
    crdt_waiter_join(&b, 30000, NULL);
    cr_assert_eq(b.acquire_st, CRD_OK);
    cr_assert_neq(rc, -1, "the child hung after fork (killed after 5 s)");
    cr_assert_eq(rc, 0, "the child failed with %d", rc);

    crdt_fixture_close(&f);
    crd_lock_free(lh);
    crd_client_free(holder);
}

/* A signal sent to the process runs its handler on a thread of the application, never on
 * one of the library's (they start with every signal blocked): here the main thread
 * blocks SIGUSR1, so the kernel must pick another thread that does not, and the only one
 * is the application's. Before, the client's threads took some of them (under TSan a
 * handler on the I/O thread, asleep in a raw futex wait, ran seconds late). */
static atomic_int usr1_seen, usr1_elsewhere;
static pthread_t usr1_app;

static void on_usr1(int sig)
{
    (void)sig;
    if (!pthread_equal(pthread_self(), usr1_app))
        atomic_fetch_add(&usr1_elsewhere, 1);
    atomic_fetch_add(&usr1_seen, 1);
}

static atomic_bool usr1_stop;

static void *usr1_thread(void *arg)
{
    (void)arg;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    while (!atomic_load(&usr1_stop))
        poll(NULL, 0, 5); /* interrupted by the handler, or 5 ms */
    return NULL;
}

Test(lifecycle, a_signal_to_the_process_is_handled_on_an_application_thread_not_the_librarys)
{
    /* Every thread of the clients running (I/O, subscriber, watchdog), started while
     * the main thread still took SIGUSR1: a thread inherits its creator's mask. */
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, crdt_key("sig"));
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crd_client *o = crdt_client();
    crd_lock *lo = crdt_lock(o, crdt_key("sig"));
    cr_assert_eq(crd_lock_acquire(lo, 100, 10000), CRD_TIMEOUT); /* o subscribed too */
    sigset_t one, old;
    sigemptyset(&one);
    sigaddset(&one, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &one, &old);
    struct sigaction sa, prev;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGUSR1, &sa, &prev), 0);
    cr_assert_eq(pthread_create(&usr1_app, NULL, usr1_thread, NULL), 0);
    enum { SIGNALS = 200 };
    for (int i = 0; i < SIGNALS; i++) {
        int seen = atomic_load(&usr1_seen);
        cr_assert_eq(kill(getpid(), SIGUSR1), 0);
        int64_t end = crdt_now_ms() + 5000;
        while (atomic_load(&usr1_seen) == seen && crdt_now_ms() < end)
            poll(NULL, 0, 1);
        cr_assert_gt(atomic_load(&usr1_seen), seen, "signal %d never handled", i);
    }
    atomic_store(&usr1_stop, true);
    pthread_join(usr1_app, NULL);
    cr_expect_eq(atomic_load(&usr1_elsewhere), 0, "%d of %d signals ran on a library thread",
                 atomic_load(&usr1_elsewhere), SIGNALS);
    sigaction(SIGUSR1, &prev, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    crd_lock_free(lo);
    crd_client_free(o);
    crd_lock_free(l);
    crd_client_free(c);
}
