/*
 * stress.c -- a standalone concurrency stress run of the library, without Criterion.
 *
 * Why it exists: Criterion's process sandbox (BoxFort) cannot map its arena under
 * ThreadSanitizer, so the TSan build runs this program instead of the Criterion suites.
 * It drives every path where threads meet: many threads on one client and one lock, the
 * subscriber thread waking waiters, the watchdog renewing while holds are released,
 * lock-lost events, a subscriber connection killed mid-wait, fair and read-write locks,
 * thread exit with holds, fork, and shutdown with blocked waiters. Every check asserts
 * real behaviour against a real redis-server that the program starts itself on a free
 * loopback port; it ends with "stress: N passed, M failed" and exits non-zero on any
 * failure. Plain, ASan and TSan builds all run it.
 */
#include <credisson.h>

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../standalone/events.h"      /* crdt_events: watchdog events counted */
#include "../standalone/redis_child.h" /* free_port, connect_port, spawn_child, ... */

static int port;
static pid_t server_pid;
static int passed, failed;
static char prefix[64];

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "stress: FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
            ok = false;                                                                       \
        }                                                                                     \
    } while (0)

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const char *key(const char *name)
{
    static _Thread_local char buf[8][128];
    static _Thread_local int next;
    char *b = buf[next++ & 7];
    snprintf(b, 128, "%s:%s", prefix, name);
    return b;
}

/* ---- the server ----------------------------------------------------------------------- */

static redisContext *raw(void)
{
    struct timeval tv = {2, 0};
    return connect_port(port, tv);
}

static long long raw_int(const char *fmt, const char *arg)
{
    redisContext *r = raw();
    if (r == NULL)
        return -99;
    redisReply *rep = redisCommand(r, fmt, arg);
    long long v = rep != NULL && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -99;
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return v;
}

static void stop_server(void) { kill_child(&server_pid); }

static bool start_server(void)
{
    const char *prog = getenv("CRD_REDIS_SERVER");
    if (prog == NULL)
        prog = "redis-server";
    for (int attempt = 0; attempt < 5; attempt++) {
        port = free_port();
        char p[16];
        snprintf(p, sizeof p, "%d", port);
        const char *args[] = {prog, "--port", p, "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", "/tmp", NULL};
        server_pid = spawn_child(args, true);
        if (server_pid > 0 && await_server(&server_pid, port, 5000))
            return true;
        stop_server();
    }
    return false;
}

static crd_client *client_with(int64_t watchdog_ms, crd_event_fn fn, void *ud)
{
    crd_options o;
    crd_options_init(&o);
    o.port = port;
    o.command_timeout_ms = 2000;
    if (watchdog_ms > 0)
        o.watchdog_timeout_ms = watchdog_ms;
    o.on_event = fn;
    o.event_user_data = ud;
    crd_client *c = NULL;
    if (crd_client_new(&o, &c) != CRD_OK) {
        fprintf(stderr, "stress: client: %s\n", crd_client_errmsg(c));
        crd_client_free(c);
        return NULL;
    }
    return c;
}

/* ---- 1. many threads, one client, one lock ---------------------------------------------- */

typedef struct excl {
    crd_lock *lock;
    int iters;
    atomic_int inside;
    atomic_int violations;
    atomic_int errors;
    long counter; /* protected by the distributed lock only */
} excl;

static void *excl_worker(void *arg)
{
    excl *e = arg;
    for (int i = 0; i < e->iters; i++) {
        crd_status st = crd_lock_acquire(e->lock, 20000, i % 2 ? CRD_LEASE_WATCHDOG : 20000);
        if (st != CRD_OK) {
            atomic_fetch_add(&e->errors, 1);
            continue;
        }
        if (atomic_fetch_add(&e->inside, 1) != 0)
            atomic_fetch_add(&e->violations, 1);
        e->counter++;
        atomic_fetch_sub(&e->inside, 1);
        if (crd_lock_release(e->lock) != CRD_OK)
            atomic_fetch_add(&e->errors, 1);
    }
    return NULL;
}

static bool run_exclusion(crd_lock *lock, int threads, int iters)
{
    bool ok = true;
    excl e = {.lock = lock, .iters = iters};
    pthread_t t[16];
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, excl_worker, &e);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    CHECK(e.violations == 0, "%d overlaps", e.violations);
    CHECK(e.errors == 0, "%d failed calls", e.errors);
    CHECK(e.counter == (long)threads * iters, "counter %ld", e.counter);
    return ok;
}

static bool test_threads_one_lock(void)
{
    bool ok = true;
    crd_client *c = client_with(1000, NULL, NULL);
    crd_lock *l = NULL;
    CHECK(c != NULL && crd_lock_new(c, key("excl"), &l) == CRD_OK, "setup");
    if (ok)
        ok = run_exclusion(l, 8, 300);
    CHECK(raw_int("EXISTS %s", key("excl")) == 0, "lock key left behind");
    crd_lock_free(l);
    crd_client_free(c);
    return ok;
}

/* ---- 2. fair and read-write locks under threads --------------------------------------- */

static bool test_fair_threads(void)
{
    bool ok = true;
    crd_client *c = client_with(1000, NULL, NULL);
    crd_lock *l = NULL;
    CHECK(c != NULL && crd_fair_lock_new(c, key("fair"), &l) == CRD_OK, "setup");
    if (ok)
        ok = run_exclusion(l, 6, 100);
    char q[160];
    snprintf(q, sizeof q, "redisson_lock_queue:{%s}", key("fair"));
    CHECK(raw_int("EXISTS %s", q) == 0, "queue left behind");
    crd_lock_free(l);
    crd_client_free(c);
    return ok;
}

typedef struct rw_ctx {
    crd_rwlock *rw;
    int iters;
    atomic_int readers, writers, violations, errors;
} rw_ctx;

static void *rw_worker(void *arg)
{
    rw_ctx *x = arg;
    for (int i = 0; i < x->iters; i++) {
        bool write = (i % 4) == 0;
        crd_lock *l = write ? crd_rwlock_write(x->rw) : crd_rwlock_read(x->rw);
        if (crd_lock_acquire(l, 20000, CRD_LEASE_WATCHDOG) != CRD_OK) {
            atomic_fetch_add(&x->errors, 1);
            continue;
        }
        if (write) {
            if (atomic_fetch_add(&x->writers, 1) != 0 || atomic_load(&x->readers) != 0)
                atomic_fetch_add(&x->violations, 1);
            atomic_fetch_sub(&x->writers, 1);
        } else {
            atomic_fetch_add(&x->readers, 1);
            if (atomic_load(&x->writers) != 0)
                atomic_fetch_add(&x->violations, 1);
            atomic_fetch_sub(&x->readers, 1);
        }
        if (crd_lock_release(l) != CRD_OK)
            atomic_fetch_add(&x->errors, 1);
    }
    return NULL;
}

static bool test_rw_threads(void)
{
    bool ok = true;
    crd_client *c = client_with(1000, NULL, NULL);
    rw_ctx x = {.iters = 120};
    CHECK(c != NULL && crd_rwlock_new(c, key("rw"), &x.rw) == CRD_OK, "setup");
    if (ok) {
        pthread_t t[6];
        for (int i = 0; i < 6; i++)
            pthread_create(&t[i], NULL, rw_worker, &x);
        for (int i = 0; i < 6; i++)
            pthread_join(t[i], NULL);
        CHECK(x.violations == 0, "%d violations", x.violations);
        CHECK(x.errors == 0, "%d errors", x.errors);
    }
    CHECK(raw_int("EXISTS %s", key("rw")) == 0, "rw key left behind");
    crd_rwlock_free(x.rw);
    crd_client_free(c);
    return ok;
}

/* ---- 3. watchdog: renewals racing releases, lock lost -------------------------------- */

static bool test_watchdog_lost(void)
{
    bool ok = true;
    crdt_events ev = {0};
    crd_client *c = client_with(300, crdt_events_count, &ev);
    crd_client *other = client_with(0, NULL, NULL);
    crd_lock *locks[20] = {0}, *force = NULL;
    CHECK(c != NULL && other != NULL, "setup");
    for (int i = 0; ok && i < 20; i++) {
        char n[32];
        snprintf(n, sizeof n, "wd%d", i);
        CHECK(crd_lock_new(c, key(n), &locks[i]) == CRD_OK, "new");
        CHECK(crd_lock_acquire(locks[i], 0, CRD_LEASE_WATCHDOG) == CRD_OK, "acquire");
    }
    if (ok) {
        sleep_ms(700); /* two renewal periods pass: the holds must survive them */
        for (int i = 0; i < 20; i++) {
            bool held = false;
            crd_lock_is_held(locks[i], &held);
            CHECK(held, "hold %d lost under renewal", i);
        }
        CHECK(crd_lock_new(other, key("wd0"), &force) == CRD_OK, "new");
        bool was = false;
        CHECK(crd_lock_force_unlock(force, &was) == CRD_OK && was, "force-unlock");
        crdt_events_await_lost(&ev, 1, 2000);
        CHECK(atomic_load(&ev.lost) == 1, "lost events: %d", atomic_load(&ev.lost));
        CHECK(crd_lock_release(locks[0]) == CRD_LOCK_LOST, "release after loss");
        for (int i = 1; i < 20; i++)
            CHECK(crd_lock_release(locks[i]) == CRD_OK, "release %d", i);
    }
    CHECK(raw_int("EXISTS %s", key("wd0")) == 0, "a renewal re-created a lost lock");
    for (int i = 0; i < 20; i++)
        crd_lock_free(locks[i]);
    crd_lock_free(force);
    crd_client_free(other);
    crd_client_free(c);
    return ok;
}

/* Renewals of 2000 holds run while two threads release them: renewal racing release. */
typedef struct release_half {
    crd_lock **locks;
    uint64_t owner;
    int from, to;
    atomic_int *errors;
} release_half;

static void *release_range(void *arg)
{
    release_half *r = arg;
    for (int i = r->from; i < r->to; i++)
        if (crd_lock_release_owner(r->locks[i], r->owner) != CRD_OK)
            atomic_fetch_add(r->errors, 1);
    return NULL;
}

static bool test_renewal_races_release(void)
{
    bool ok = true;
    enum { N = 2000 };
    crdt_events ev = {0};
    crd_client *c = client_with(300, crdt_events_count, &ev);
    crd_lock **locks = calloc(N, sizeof *locks);
    uint64_t owner = crd_owner_new();
    CHECK(c != NULL && locks != NULL, "setup");
    for (int i = 0; ok && i < N; i++) {
        char n[32];
        snprintf(n, sizeof n, "race%d", i);
        CHECK(crd_lock_new(c, key(n), &locks[i]) == CRD_OK, "new");
        CHECK(crd_lock_acquire_owner(locks[i], owner, 0, CRD_LEASE_WATCHDOG) == CRD_OK, "acquire");
    }
    if (ok) {
        sleep_ms(250); /* into the second renewal period, then release under renewal */
        atomic_int errors = 0;
        release_half a = {locks, owner, 0, N / 2, &errors}, b = {locks, owner, N / 2, N, &errors};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, release_range, &a);
        pthread_create(&tb, NULL, release_range, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        CHECK(errors == 0, "%d releases failed", (int)errors);
        CHECK(atomic_load(&ev.lost) == 0, "%d holds reported lost", atomic_load(&ev.lost));
        sleep_ms(400); /* a late renewal must not re-create anything */
        CHECK(raw_int("EXISTS %s", key("race0")) == 0, "a renewal re-created a released lock");
        CHECK(raw_int("EXISTS %s", key("race1999")) == 0, "a renewal re-created a released lock");
    }
    for (int i = 0; locks != NULL && i < N; i++)
        crd_lock_free(locks[i]);
    free(locks);
    crd_client_free(c);
    return ok;
}

/* CLIENT PAUSE longer than the lease: renewal-failing, then lock-lost, reported from the
 * watchdog thread while the caller's thread reads the validity. */
static bool test_pause_loses_lock(void)
{
    bool ok = true;
    crdt_events ev;
    crd_options o;
    crd_options_init(&o);
    o.port = port;
    o.watchdog_timeout_ms = 600;
    o.command_timeout_ms = 100;
    crdt_events_attach(&ev, &o);
    crd_client *c = NULL;
    CHECK(crd_client_new(&o, &c) == CRD_OK, "client");
    crd_lock *l = NULL;
    CHECK(crd_lock_new(c, key("pause"), &l) == CRD_OK, "new");
    CHECK(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG) == CRD_OK, "acquire");
    redisContext *r = raw();
    redisReply *rep = r ? redisCommand(r, "CLIENT PAUSE 1200 WRITE") : NULL;
    if (rep)
        freeReplyObject(rep);
    int64_t deadline = now_ms() + 3000;
    while (atomic_load(&ev.lost) == 0 && now_ms() < deadline) {
        int64_t v;
        crd_lock_validity_ms(l, &v);
        sleep_ms(5);
    }
    CHECK(atomic_load(&ev.failing) >= 1, "no renewal-failing event");
    CHECK(atomic_load(&ev.lost) == 1, "lost events: %d", atomic_load(&ev.lost));
    int64_t v = 1;
    CHECK(crd_lock_validity_ms(l, &v) == CRD_LOCK_LOST && v == 0, "validity after loss");
    sleep_ms(1300 - 600); /* the pause ends; nothing may re-create the key */
    CHECK(raw_int("EXISTS %s", key("pause")) == 0, "the lost lock was re-created");
    CHECK(crd_lock_release(l) == CRD_LOCK_LOST, "release after loss");
    if (r)
        redisFree(r);
    crd_lock_free(l);
    crd_client_free(c);
    return ok;
}

/* ---- 4. subscriber connection killed while waiting ------------------------------------ */

typedef struct waiter_arg {
    crd_lock *lock;
    crd_status status;
    int64_t acquired_at;
} waiter_arg;

static void *waiter_main(void *arg)
{
    waiter_arg *w = arg;
    w->status = crd_lock_acquire(w->lock, 20000, 30000);
    w->acquired_at = now_ms();
    if (w->status == CRD_OK)
        crd_lock_release(w->lock);
    return NULL;
}

static bool test_subscriber_killed(void)
{
    bool ok = true;
    crd_client *holder = client_with(0, NULL, NULL);
    crd_client *waiter = client_with(0, NULL, NULL);
    crd_lock *hl = NULL, *wl = NULL;
    CHECK(holder && waiter && crd_lock_new(holder, key("sub"), &hl) == CRD_OK &&
              crd_lock_new(waiter, key("sub"), &wl) == CRD_OK,
          "setup");
    CHECK(crd_lock_acquire(hl, 0, 30000) == CRD_OK, "holder acquire");
    waiter_arg w = {.lock = wl};
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &w);
    /* Wait until the waiter is subscribed, then cut the subscriber connection. */
    int64_t deadline = now_ms() + 3000;
    char ch[160];
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", key("sub"));
    redisContext *r = raw();
    while (now_ms() < deadline) {
        redisReply *rep = redisCommand(r, "PUBSUB NUMSUB %s", ch);
        long long n = rep && rep->elements == 2 ? rep->element[1]->integer : 0;
        if (rep)
            freeReplyObject(rep);
        if (n > 0)
            break;
        sleep_ms(2);
    }
    redisReply *k = redisCommand(r, "CLIENT KILL TYPE pubsub");
    if (k)
        freeReplyObject(k);
    redisFree(r);
    int64_t released = now_ms();
    CHECK(crd_lock_release(hl) == CRD_OK, "holder release");
    pthread_join(t, NULL);
    CHECK(w.status == CRD_OK, "waiter: %s", crd_strerror(w.status));
    CHECK(w.acquired_at - released < 3000, "waiter took %lld ms", (long long)(w.acquired_at - released));
    crd_lock_free(hl);
    crd_lock_free(wl);
    crd_client_free(holder);
    crd_client_free(waiter);
    return ok;
}

/* ---- 5. thread exit, fork, shutdown ----------------------------------------------------- */

static void *exit_holding(void *arg)
{
    crd_lock *l = arg;
    crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG);
    return NULL; /* exits holding the lock */
}

static bool test_thread_exit(void)
{
    bool ok = true;
    crd_client *c = client_with(400, NULL, NULL);
    crd_lock *l = NULL;
    CHECK(c && crd_lock_new(c, key("exit"), &l) == CRD_OK, "setup");
    pthread_t t;
    pthread_create(&t, NULL, exit_holding, l);
    pthread_join(t, NULL);
    CHECK(raw_int("EXISTS %s", key("exit")) == 1, "not held after the thread exited");
    int64_t deadline = now_ms() + 2000;
    while (raw_int("EXISTS %s", key("exit")) == 1 && now_ms() < deadline)
        sleep_ms(20);
    CHECK(raw_int("EXISTS %s", key("exit")) == 0, "renewal outlived its thread");
    crd_lock_free(l);
    crd_client_free(c);
    return ok;
}

static bool test_fork(void)
{
    bool ok = true;
    crd_client *c = client_with(600, NULL, NULL);
    crd_lock *l = NULL;
    CHECK(c && crd_lock_new(c, key("fork"), &l) == CRD_OK, "setup");
    CHECK(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG) == CRD_OK, "acquire");
    char parent_id[40];
    snprintf(parent_id, sizeof parent_id, "%s", crd_client_id(c));
    /* Fork once the subscriber thread has its connection (start-up + subscriber = 2
     * connects): a fork that lands inside hiredis's connect leaves that context on a
     * thread stack the child does not have, which memcheck counts as a leak. */
    int64_t until = now_ms() + 3000;
    crd_metrics m = {0};
    while (now_ms() < until && crd_client_metrics(c, &m, sizeof m) == CRD_OK && m.connects < 2)
        sleep_ms(2);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = 0;
        if (strcmp(parent_id, crd_client_id(c)) == 0)
            rc |= 1;
#ifdef __SANITIZE_THREAD__
        /* TSan cannot start a thread in the child of a multi-threaded process, and the
         * child's first command starts the client's I/O thread there: the child's traffic
         * runs in the other builds (the parent's half runs here too). */
        _exit(rc);
#endif
        if (crd_lock_release(l) != CRD_NOT_OWNER)
            rc |= 2;
        crd_lock *other = NULL;
        if (crd_lock_new(c, key("fork-child"), &other) != CRD_OK ||
            crd_lock_acquire(other, 1000, 5000) != CRD_OK || crd_lock_release(other) != CRD_OK)
            rc |= 4;
        for (int i = 0; i < 200; i++) {
            bool locked = false;
            if (crd_lock_is_locked(l, &locked) != CRD_OK || !locked)
                rc |= 8;
        }
        crd_lock_free(other);
        crd_client_free(c);
        _exit(rc);
    }
    for (int i = 0; i < 200; i++) {
        bool held = false;
        if (crd_lock_is_held(l, &held) != CRD_OK || !held) {
            CHECK(false, "parent lost its hold during the child's traffic");
            break;
        }
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    sleep_ms(1300); /* two watchdog periods after the child: the parent still renews */
    bool held = false;
    CHECK(crd_lock_is_held(l, &held) == CRD_OK && held, "parent's renewal stopped");
    CHECK(crd_lock_release(l) == CRD_OK, "parent release");
    crd_lock_free(l);
    crd_client_free(c);
    return ok;
}

static bool test_shutdown_wakes_waiters(void)
{
    bool ok = true;
    crd_client *holder = client_with(0, NULL, NULL);
    crd_client *c = client_with(0, NULL, NULL);
    crd_lock *hl = NULL, *wl = NULL;
    CHECK(holder && c && crd_lock_new(holder, key("close"), &hl) == CRD_OK &&
              crd_lock_new(c, key("close"), &wl) == CRD_OK,
          "setup");
    CHECK(crd_lock_acquire(hl, 0, 30000) == CRD_OK, "holder");
    waiter_arg w[3] = {{.lock = wl}, {.lock = wl}, {.lock = wl}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, waiter_main, &w[i]);
    /* Free once all three sleep (one on the subscription, two queued behind it): what
     * is tested is that free() wakes blocked waiters. A thread inside any other call
     * must not be racing the free (crd_client_free's contract). */
    crd_metrics m = {0};
    int64_t until = now_ms() + 10000;
    while (now_ms() < until && crd_client_metrics(c, &m, sizeof m) == CRD_OK &&
           m.waiting_now < 3)
        sleep_ms(2);
    CHECK(m.waiting_now == 3, "only %llu of 3 waiters went to sleep",
          (unsigned long long)m.waiting_now);
    int64_t start = now_ms();
    crd_client_free(c);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        CHECK(w[i].status == CRD_CLOSED, "waiter %d: %s", i, crd_strerror(w[i].status));
    }
    CHECK(now_ms() - start < 2000, "shutdown took %lld ms", (long long)(now_ms() - start));
    crd_lock_free(wl);
    CHECK(crd_lock_release(hl) == CRD_OK, "holder release");
    crd_lock_free(hl);
    crd_client_free(holder);
    return ok;
}

/* crd_stress [NAME...]: every test, or only the named ones (to repeat one under a tool). */
int main(int argc, char **argv)
{
    setvbuf(stderr, NULL, _IONBF, 0);
    snprintf(prefix, sizeof prefix, "stress:%d", (int)getpid());
    if (!start_server()) {
        fprintf(stderr, "stress: cannot start redis-server\n");
        printf("stress: 0 passed, 1 failed\n");
        return 1;
    }
    struct {
        const char *name;
        bool (*fn)(void);
    } tests[] = {
        {"threads_one_lock", test_threads_one_lock},
        {"fair_threads", test_fair_threads},
        {"rw_threads", test_rw_threads},
        {"watchdog_lost", test_watchdog_lost},
        {"renewal_races_release", test_renewal_races_release},
        {"pause_loses_lock", test_pause_loses_lock},
        {"subscriber_killed", test_subscriber_killed},
        {"thread_exit", test_thread_exit},
        {"fork", test_fork},
        {"shutdown_wakes_waiters", test_shutdown_wakes_waiters},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        bool chosen = argc < 2;
        for (int a = 1; a < argc; a++)
            chosen = chosen || strcmp(argv[a], tests[i].name) == 0;
        if (!chosen)
            continue;
        int64_t t0 = now_ms();
        bool ok = tests[i].fn();
        fprintf(stderr, "stress: %-24s %s (%lld ms)\n", tests[i].name, ok ? "ok" : "FAILED",
                (long long)(now_ms() - t0));
        if (ok)
            passed++;
        else
            failed++;
    }
    stop_server();
    printf("stress: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
