/*
 * test_loop.c -- the event-loop API: acquires that wait without a thread, driven by
 * crd_loop_fd / crd_loop_timeout_ms / crd_loop_dispatch from one thread (a poll() loop
 * here, libuv and libevent in examples/).
 *
 * One loop thread holds 10 000 pending acquisitions over 1 000 names while two other
 * processes take and give back the same names: every acquisition completes, an overlap
 * detector in Redis sees no two holders, and the process has no more threads than a
 * client's own two. Cancelling a random 1 000 of 2 000 pending acquisitions (fair locks
 * among them) leaves no subscription and no fair-queue entry behind. Waiting is by
 * pub/sub: a waiter behind a 30 s lease is served at the release. Every kind works, and
 * bad arguments start nothing. A semaphore's acquire and a latch's await (issue #27) wait
 * on the loop, are woken by their messages, time out, cancel (leaving their channels)
 * and end CRD_CLOSED when the client is freed. The fd alone drives the loop: no notice
 * from the I/O thread, the subscriber or a callback is lost although the fd is written
 * at most once between two drains (a loop sleeping as long as crd_loop_timeout_ms says,
 * and one that never asks it).
 */
#include <criterion/criterion.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "standalone/events.h"
#include "syncs.h"

/* CRDT_SERIAL_TEST: it counts the process's threads and the server's channels. */

/* Runs the loop until done(arg) or timeout_ms; returns done(arg). */
static bool run_loop(crd_client *c, bool (*done)(void *), void *arg, int64_t timeout_ms)
{
    int fd = crd_loop_fd(c);
    cr_assert_geq(fd, 0, "%s", crd_client_errmsg(c));
    int64_t deadline = crdt_now_ms() + timeout_ms;
    crd_loop_dispatch(c);
    while (!done(arg) && crdt_now_ms() < deadline) {
        int64_t t = crd_loop_timeout_ms(c);
        int ms = t < 0 || t > 200 ? 200 : (int)t;
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, ms);
        crd_loop_dispatch(c);
    }
    return done(arg);
}

static int threads_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    cr_assert_not_null(f);
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

/* ---- one waiter, woken by the release ------------------------------------------------- */

typedef struct rec {
    int calls;
    crd_status st[4];
    int64_t at[4];
} rec;

static void done_rec(void *user, crd_op *op, crd_status st)
{
    (void)op;
    rec *t = user;
    if (t->calls < 4) {
        t->st[t->calls] = st;
        t->at[t->calls] = crdt_now_ms();
    }
    t->calls++;
}

static bool calls_1(void *arg) { return ((rec *)arg)->calls >= 1; }

/* Releases first's hold on l through the loop; the pending acquire b is served at that
 * release, not at its lease's end. */
static void release_serves(crd_client *c, crd_lock *l, uint64_t first, rec *b)
{
    rec r = {0};
    int64_t released = crdt_now_ms();
    cr_assert_eq(crd_lock_release_async(l, first, done_rec, &r, NULL), CRD_OK);
    cr_assert(run_loop(c, calls_1, b, 5000), "the waiter was not served");
    cr_assert(run_loop(c, calls_1, &r, 5000), "the release never completed");
    cr_expect_eq(r.st[0], CRD_OK);
    cr_expect_eq(b->st[0], CRD_OK);
    cr_expect_lt(b->at[0] - released, 1000, "served at the release, not at the lease's end");
}

Test(loop, a_pending_acquire_is_served_by_the_release_message_not_by_the_lease)
{
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, crdt_key("l"));
    uint64_t first = crd_owner_new(), second = crd_owner_new();
    rec a = {0}, b = {0};
    cr_assert_eq(crd_lock_acquire_async(l, first, 0, 30000, done_rec, &a, NULL), CRD_OK);
    cr_expect_eq(a.calls, 0, "a callback never runs inside the start call");
    cr_assert(run_loop(c, calls_1, &a, 5000));
    cr_assert_eq(a.st[0], CRD_OK);
    crd_op *op = NULL;
    cr_assert_eq(crd_lock_acquire_async(l, second, CRD_WAIT_FOREVER, 5000, done_rec, &b, &op),
                 CRD_OK);
    cr_expect_eq(crd_op_lock(op), l);
    cr_expect_eq(crd_op_owner(op), second);
    /* it waits behind a 30 s lease, on no thread of its own */
    cr_expect(!run_loop(c, calls_1, &b, 300), "still waiting after 300 ms");
    release_serves(c, l, first, &b);
    bool held = false;
    cr_assert_eq(crd_lock_is_held_owner(l, second, &held), CRD_OK);
    cr_expect(held);
    /* extend, then release, through the loop */
    rec e = {0}, f = {0};
    cr_assert_eq(crd_lock_extend_async(l, second, 20000, done_rec, &e, NULL), CRD_OK);
    cr_assert(run_loop(c, calls_1, &e, 5000));
    cr_expect_eq(e.st[0], CRD_OK);
    cr_assert_eq(crd_lock_release_async(l, second, done_rec, &f, NULL), CRD_OK);
    cr_assert(run_loop(c, calls_1, &f, 5000));
    cr_expect_eq(f.st[0], CRD_OK);
    /* bad arguments start nothing */
    cr_expect_eq(crd_lock_acquire_async(NULL, first, 0, 0, done_rec, &a, NULL),
                 CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_lock_acquire_async(l, first, 0, 0, NULL, &a, NULL), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_lock_acquire_async(l, 0, 0, 0, done_rec, &a, NULL), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_lock_acquire_async(l, first, -5, 0, done_rec, &a, NULL),
                 CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_op_cancel(NULL), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_loop_timeout_ms(c), -1, "nothing pending");
    crd_lock_free(l);
    crd_client_free(c);
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

/* Two pending acquires of one loop client on one name, the first waiting behind another
 * client's hold: when the first gets the lock, the second (the local queue's next head,
 * with the first one's live subscription) waits for the first one's release instead of
 * trying in the same pass (where it could only find the lock held), and is served at that
 * release. Without the rule the second runs an acquire script in the window below. */
Test(loop, the_next_local_waiter_does_not_try_while_the_one_before_it_holds_the_lock)
{
    const char *name = crdt_key("l");
    crd_options o;
    crdt_tracelog *t = crdt_traced_options(&o);
    crd_client *c = crdt_client_opts(&o);
    crd_client *x = crdt_client();
    crd_lock *l = crdt_lock(c, name), *xl = crdt_lock(x, name);
    cr_assert_eq(crd_lock_acquire(xl, 0, 30000), CRD_OK);
    uint64_t first = crd_owner_new(), second = crd_owner_new();
    rec a = {0}, b = {0};
    size_t from = crdt_tracelog_count(t);
    cr_assert_eq(crd_lock_acquire_async(l, first, CRD_WAIT_FOREVER, 30000, done_rec, &a, NULL),
                 CRD_OK);
    cr_assert_eq(crd_lock_acquire_async(l, second, CRD_WAIT_FOREVER, 30000, done_rec, &b, NULL),
                 CRD_OK);
    /* the first tries, subscribes, tries again once the subscription is live and waits
     * (3 scripts); the second waits behind it in the local queue */
    int64_t until = crdt_now_ms() + 5000;
    while (crdt_tracelog_count_scripts(t, from) < 3 && crdt_now_ms() < until)
        run_loop(c, never, NULL, 20);
    run_loop(c, never, NULL, 50);
    size_t settled = crdt_tracelog_count_scripts(t, from);
    cr_assert_eq(settled, 3, "the first waiter did not settle (%zu scripts)", settled);
    /* counted from before the release: the second's attempt may be traced (on the I/O
     * thread) before the first one's callback has returned */
    size_t released_from = crdt_tracelog_count(t);
    cr_assert_eq(crd_lock_release(xl), CRD_OK);
    cr_assert(run_loop(c, calls_1, &a, 5000), "the first waiter was not served");
    cr_assert_eq(a.st[0], CRD_OK);
    cr_expect(!run_loop(c, calls_1, &b, crdt_scaled_ms(300)), "the second got a held lock");
    size_t tried = crdt_tracelog_count_scripts(t, released_from) - 1;
    cr_expect_eq(tried, 0, "the second waiter ran %zu acquire scripts while the first held the "
                 "lock", tried);
    release_serves(c, l, first, &b);
    rec f = {0};
    cr_assert_eq(crd_lock_release_async(l, second, done_rec, &f, NULL), CRD_OK);
    cr_assert(run_loop(c, calls_1, &f, 5000));
    cr_expect_eq(f.st[0], CRD_OK);
    crd_lock_free(xl);
    crd_lock_free(l);
    crd_client_free(x);
    crd_client_free(c);
    crdt_tracelog_free(t);
}

/* ---- 10 000 pending acquisitions over 1 000 names ------------------------------------------ */

#define NAMES 1000
#define PER_NAME 10

typedef struct mass {
    crd_client *c;
    redisContext *r;
    crd_lock *locks[NAMES];
    char inside[NAMES][104]; /* a name and ":inside" */
    long acquired, released, overlaps, failures;
} mass;

static void on_released(void *user, crd_op *op, crd_status st)
{
    (void)op;
    mass *m = user;
    if (st != CRD_OK)
        m->failures++;
    m->released++;
}

static void on_acquired(void *user, crd_op *op, crd_status st)
{
    mass *m = user;
    if (st != CRD_OK) {
        m->failures++;
        return;
    }
    m->acquired++;
    size_t i = 0;
    while (i < NAMES && m->locks[i] != crd_op_lock(op))
        i++;
    long long in = crdt_cmd_int(m->r, "INCR %s", m->inside[i]);
    m->overlaps += in != 1;
    crdt_cmd_int(m->r, "DECR %s", m->inside[i]);
    if (crd_lock_release_async(crd_op_lock(op), crd_op_owner(op), on_released, m, NULL) != CRD_OK)
        m->failures++;
}

static bool all_released(void *arg)
{
    mass *m = arg;
    return m->released + m->failures >= (long)NAMES * PER_NAME;
}

struct other {
    char names[NAMES][96];
    char go[96]; /* a list the parent pushes to once its acquisitions are pending */
};

static int other_process(int index, void *arg)
{
    struct other *o = arg;
    crd_client *c = crdt_plain_client(crdt_port());
    redisContext *r = crdt_raw_connect(crdt_port(), 2000);
    if (c == NULL || r == NULL)
        return 10;
    /* The parent queues its 10 000 acquisitions before it pushes: seconds under TSan on a
     * loaded machine, so the read waits as long as the BLPOP does (with the connect's
     * 2 s both children once failed here with 15). */
    struct timeval blpop_tv = {61, 0};
    redisSetTimeout(r, blpop_tv);
    if (!crdt_await_go(r, o->go))
        return 15;
    unsigned seed = (unsigned)getpid() + (unsigned)index;
    int64_t end = crdt_now_ms() + 3000;
    while (crdt_now_ms() < end) {
        int i = (int)(rand_r(&seed) % NAMES);
        crd_lock *l = NULL;
        if (crd_lock_new(c, o->names[i], &l) != CRD_OK)
            return 11;
        if (crd_lock_acquire(l, 20000, 10000) != CRD_OK)
            return 12;
        char inside[128];
        snprintf(inside, sizeof inside, "%s:inside", o->names[i]);
        redisReply *rep = redisCommand(r, "INCR %s", inside);
        int bad = rep == NULL || rep->integer != 1;
        freeReplyObject(rep);
        freeReplyObject(redisCommand(r, "DECR %s", inside));
        if (bad)
            return 13;
        if (crd_lock_release(l) != CRD_OK)
            return 14;
        crd_lock_free(l);
    }
    crd_client_free(c);
    redisFree(r);
    return 0;
}

static int other_0(void *arg) { return other_process(0, arg); }
static int other_1(void *arg) { return other_process(1, arg); }

Test(loop, one_thread_serves_10000_pending_acquisitions_over_1000_names, .timeout = 240)
{
    static mass m;
    static struct other o;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < NAMES; i++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "m%d", i);
        snprintf(o.names[i], sizeof o.names[i], "%s", crdt_key(suffix));
        snprintf(m.inside[i], sizeof m.inside[i], "%s:inside", o.names[i]);
    }
    snprintf(o.go, sizeof o.go, "%s", crdt_key("go"));
    /* Two other processes take and give back the same names while the loop works. They
     * are forked before this process starts a thread (ThreadSanitizer cannot follow a
     * fork of a threaded process) and start on the go list. */
    pid_t kids[2] = {crdt_fork(other_0, &o), crdt_fork(other_1, &o)};
    m.c = crdt_client();
    m.r = crdt_redis();
    int threads_before = threads_now();
    for (int i = 0; i < NAMES; i++)
        m.locks[i] = crdt_lock(m.c, o.names[i]);
    for (int k = 0; k < PER_NAME; k++)
        for (int i = 0; i < NAMES; i++)
            cr_assert_eq(crd_lock_acquire_async(m.locks[i], crd_owner_new(), CRD_WAIT_FOREVER,
                                                10000, on_acquired, &m, NULL),
                         CRD_OK);
    freeReplyObject(crdt_cmd(m.r, "RPUSH %s 1 1", o.go));
    cr_assert(run_loop(m.c, all_released, &m, 200000), "%ld of %d released, %ld failures",
              m.released, NAMES * PER_NAME, m.failures);
    for (int k = 0; k < 2; k++) {
        int code = crdt_wait_child(kids[k], 60000);
        cr_expect_eq(code, 0, "the other process %d exited with %d", k, code);
    }
    int threads_after = threads_now();
    fprintf(stderr, "[loop] %d acquisitions over %d names by one loop thread; threads %d -> %d\n",
            NAMES * PER_NAME, NAMES, threads_before, threads_after);
    cr_expect_eq(m.failures, 0);
    cr_expect_eq(m.acquired, (long)NAMES * PER_NAME);
    cr_expect_eq(m.overlaps, 0);
    cr_expect_leq(threads_after, threads_before + 2, "no thread per waiter (the client's "
                  "subscriber and watchdog at most)");
    for (int i = 0; i < NAMES; i++)
        crd_lock_free(m.locks[i]);
    crd_client_free(m.c);
    redisFree(m.r);
}

/* ---- cancelling pending acquisitions -------------------------------------------------------- */

#define CNAMES 200
#define CPER 10

typedef struct cancel_run {
    crd_lock *locks[CNAMES];
    crd_op *ops[CNAMES * CPER];
    int done_ok, done_cancelled, done_other, released;
} cancel_run;

static void c_released(void *user, crd_op *op, crd_status st)
{
    (void)op;
    cancel_run *r = user;
    if (st == CRD_OK)
        r->released++;
    else
        r->done_other++;
}

static void c_done(void *user, crd_op *op, crd_status st)
{
    cancel_run *r = user;
    for (int i = 0; i < CNAMES * CPER; i++)
        if (r->ops[i] == op)
            r->ops[i] = NULL; /* gone once this returns */
    if (st == CRD_CANCELLED) {
        r->done_cancelled++;
    } else if (st == CRD_OK) {
        r->done_ok++;
        crd_lock_release_async(crd_op_lock(op), crd_op_owner(op), c_released, r, NULL);
    } else {
        r->done_other++;
    }
}

static bool cancelled_all(void *arg) { return ((cancel_run *)arg)->done_cancelled >= 1000; }
static bool rest_done(void *arg)
{
    cancel_run *r = arg;
    return r->done_cancelled + r->done_ok + r->done_other >= CNAMES * CPER &&
           r->released >= r->done_ok;
}

static bool no_channels_left(void *arg)
{
    (void)arg;
    return crdt_pubsub_channels_empty("*crdt*cancel*");
}

Test(loop, cancelling_1000_of_2000_pending_acquisitions_leaves_no_subscription_or_queue_entry,
     .timeout = 120)
{
    static cancel_run run;
    memset(&run, 0, sizeof run);
    crd_client *c = crdt_client(), *holder = crdt_client();
    crd_lock *held[CNAMES];
    for (int i = 0; i < CNAMES; i++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "cancel%d", i);
        const char *name = crdt_key(suffix);
        bool fair = i % 2 == 1;
        if (fair) {
            cr_assert_eq(crd_fair_lock_new(c, name, &run.locks[i]), CRD_OK);
            cr_assert_eq(crd_fair_lock_new(holder, name, &held[i]), CRD_OK);
        } else {
            run.locks[i] = crdt_lock(c, name);
            held[i] = crdt_lock(holder, name);
        }
        cr_assert_eq(crd_lock_acquire(held[i], 0, 60000), CRD_OK);
    }
    for (int k = 0; k < CPER; k++)
        for (int i = 0; i < CNAMES; i++)
            cr_assert_eq(crd_lock_acquire_async(run.locks[i], crd_owner_new(), 60000, 10000,
                                                c_done, &run, &run.ops[k * CNAMES + i]),
                         CRD_OK);
    /* let every one of them try, subscribe and (fair) join its queue */
    crd_loop_dispatch(c);
    run_loop(c, cancelled_all, &run, 1000);
    unsigned seed = 7;
    int cancelled = 0;
    while (cancelled < 1000) {
        int i = (int)(rand_r(&seed) % (CNAMES * CPER));
        if (run.ops[i] == NULL || run.ops[i] == (crd_op *)1)
            continue;
        cr_assert_eq(crd_op_cancel(run.ops[i]), CRD_OK);
        run.ops[i] = (crd_op *)1; /* chosen; cleared by its callback */
        cancelled++;
    }
    for (int i = 0; i < CNAMES * CPER; i++)
        if (run.ops[i] == (crd_op *)1)
            run.ops[i] = NULL;
    cr_assert(run_loop(c, cancelled_all, &run, 30000), "%d cancelled", run.done_cancelled);
    cr_expect_eq(run.done_cancelled, 1000);
    /* the holder lets go: the other 1 000 are served, one after the other */
    for (int i = 0; i < CNAMES; i++)
        cr_assert_eq(crd_lock_release(held[i]), CRD_OK);
    cr_assert(run_loop(c, rest_done, &run, 60000), "ok %d cancelled %d other %d released %d",
              run.done_ok, run.done_cancelled, run.done_other, run.released);
    cr_expect_eq(run.done_ok, 1000);
    cr_expect_eq(run.done_other, 0);
    cr_expect(crdt_wait_until(no_channels_left, NULL, 5000), "subscriptions left behind");
    redisContext *r = crdt_redis();
    for (int i = 1; i < CNAMES; i += 2) {
        const char *name = crd_lock_name(run.locks[i], NULL);
        cr_expect_eq(crdt_cmd_int(r, "LLEN redisson_lock_queue:{%s}", name), 0);
        cr_expect_eq(crdt_cmd_int(r, "ZCARD redisson_lock_timeout:{%s}", name), 0);
    }
    redisFree(r);
    for (int i = 0; i < CNAMES; i++) {
        crd_lock_free(run.locks[i]);
        crd_lock_free(held[i]);
    }
    crd_client_free(holder);
    crd_client_free(c);
}

/* ---- lock-lost signals on the loop thread -------------------------------------------------- */

Test(loop, a_lock_lost_event_is_delivered_on_the_loop_thread)
{
    crdt_events lr;
    crd_options o;
    crdt_options(&o);
    o.watchdog_timeout_ms = crdt_scaled_ms(600); /* renewals every 200 ms */
    crdt_events_attach(&lr, &o);
    o.events_on_loop = true;
    crd_client *c = crdt_client_opts(&o);
    const char *name = crdt_key("lost");
    crd_lock *l = crdt_lock(c, name);
    rec a = {0};
    uint64_t owner = crd_owner_new();
    cr_assert_eq(crd_lock_acquire_async(l, owner, 0, CRD_LEASE_WATCHDOG, done_rec, &a, NULL),
                 CRD_OK);
    cr_assert(run_loop(c, calls_1, &a, 5000));
    cr_assert_eq(a.st[0], CRD_OK);
    /* another client force-unlocks it: the next renewal finds the hold gone */
    crd_client *other = crdt_client();
    crd_lock *ol = crdt_lock(other, name);
    bool was = false;
    cr_assert_eq(crd_lock_force_unlock(ol, &was), CRD_OK);
    cr_assert(was);
    cr_assert(run_loop(c, crdt_events_saw_lost, &lr, crdt_scaled_ms(5000)), "no LOCK_LOST event");
    cr_expect(pthread_equal(atomic_load(&lr.lost_thread), pthread_self()),
              "on_event ran on the loop thread");
    crd_lock_free(ol);
    crd_client_free(other);
    crd_lock_free(l);
    crd_client_free(c);
}

/* ---- the libuv and libevent examples ---------------------------------------------------------- */

#ifdef CRD_EXAMPLE_LOOP_UV
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

/* Reads until buf holds `lines` lines or timeout_ms passes; returns the lines read. */
static int read_lines(int fd, char *buf, size_t cap, int lines, int64_t timeout_ms)
{
    size_t len = strlen(buf);
    int64_t end = crdt_now_ms() + timeout_ms;
    for (;;) {
        int n = 0;
        for (size_t i = 0; i < len; i++)
            n += buf[i] == '\n';
        if (n >= lines || crdt_now_ms() >= end)
            return n;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(end - crdt_now_ms())) > 0) {
            ssize_t k = read(fd, buf + len, cap - len - 1);
            if (k <= 0)
                return n;
            len += (size_t)k;
            buf[len] = '\0';
        }
    }
}

Test(loop, the_libuv_server_serves_other_requests_while_one_waits_for_a_lock, .timeout = 60)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", crdt_port());
    int out[2];
    cr_assert_eq(pipe(out), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        execl(CRD_EXAMPLE_LOOP_UV, CRD_EXAMPLE_LOOP_UV, url, "0", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char banner[128] = "";
    cr_assert_eq(read_lines(out[0], banner, sizeof banner, 1, 10000), 1, "no banner");
    int port = 0;
    cr_assert_eq(sscanf(banner, "listening on 127.0.0.1:%d", &port), 1, "%s", banner);
    /* "busy" is held by another client: its request waits, the others are served */
    const char *busy = crdt_key("busy");
    crd_client *c = crdt_client();
    crd_lock *hold = crdt_lock(c, busy);
    cr_assert_eq(crd_lock_acquire(hold, 0, 30000), CRD_OK);
    int a = connect_to(port);
    char line[256];
    snprintf(line, sizeof line, "%s\n", busy);
    cr_assert_eq(write(a, line, strlen(line)), (ssize_t)strlen(line));
    enum { CLIENTS = 8, EACH = 5 };
    int fds[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        fds[i] = connect_to(port);
        char req[1024] = "";
        for (int k = 0; k < EACH; k++) {
            char nm[64];
            snprintf(nm, sizeof nm, "free%d", k); /* shared names: they queue on each other */
            snprintf(req + strlen(req), sizeof req - strlen(req), "%s\n", crdt_key(nm));
        }
        cr_assert_eq(write(fds[i], req, strlen(req)), (ssize_t)strlen(req));
    }
    for (int i = 0; i < CLIENTS; i++) {
        char got[4096] = "";
        int n = read_lines(fds[i], got, sizeof got, 2 * EACH, 10000);
        cr_expect_eq(n, 2 * EACH, "client %d got %d lines: %s", i, n, got);
        cr_expect(strstr(got, "locked") != NULL && strstr(got, "released") != NULL, "%s", got);
        close(fds[i]);
    }
    char got_a[512] = "";
    cr_expect_eq(read_lines(a, got_a, sizeof got_a, 1, 200), 0, "the busy request waits: %s",
                 got_a);
    cr_assert_eq(crd_lock_release(hold), CRD_OK);
    cr_expect_eq(read_lines(a, got_a, sizeof got_a, 2, 5000), 2, "%s", got_a);
    cr_expect(strncmp(got_a, "locked ", 7) == 0, "%s", got_a);
    close(a);
    /* SIGTERM while a request waits: the server cancels it, answers, and exits 0 */
    const char *busy2 = crdt_key("busy2"); /* a's subscription to busy may linger */
    crd_lock *hold2 = crdt_lock(c, busy2);
    cr_assert_eq(crd_lock_acquire(hold2, 0, 30000), CRD_OK);
    int b = connect_to(port);
    snprintf(line, sizeof line, "%s\n", busy2);
    cr_assert_eq(write(b, line, strlen(line)), (ssize_t)strlen(line));
    char channel[128];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", busy2);
    redisContext *r = crdt_redis();
    cr_assert(crdt_await_subscribed(r, channel, 10000), "the busy2 request does not wait");
    kill(pid, SIGTERM);
    char got_b[512] = "";
    cr_expect_eq(read_lines(b, got_b, sizeof got_b, 1, 5000), 1, "%s", got_b);
    cr_expect(strncmp(got_b, "operation cancelled ", 20) == 0, "%s", got_b);
    cr_expect_eq(crdt_wait_child(pid, 5000), 0, "the server stops cleanly on SIGTERM");
    close(b);
    close(out[0]);
    redisFree(r);
    cr_expect_eq(crd_lock_release(hold2), CRD_OK);
    crd_lock_free(hold2);
    crd_lock_free(hold);
    crd_client_free(c);
}
#endif

#ifdef CRD_EXAMPLE_LOOP_EVENT
Test(loop, the_libevent_example_serves_its_waiters_one_after_the_other, .timeout = 60)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' redis://127.0.0.1:%d 200 >/dev/null", CRD_EXAMPLE_LOOP_EVENT,
             crdt_port());
    cr_expect_eq(system(cmd), 0);
}
#endif

/* ---- the synchronizers on the loop (issue #27) ------------------------------------------ */

static crd_metrics metrics_of(crd_client *c)
{
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(c, &m, sizeof m), CRD_OK);
    return m;
}

Test(loop, a_semaphore_acquire_and_a_latch_await_wait_on_the_loop_woken_by_their_messages)
{
    crd_client *c = crdt_client(), *other = crdt_client();
    const char *sname = crdt_key("sem"), *lname = crdt_key("latch");
    crd_semaphore *s = NULL, *os = NULL;
    crd_latch *l = NULL, *ol = NULL;
    cr_assert_eq(crd_semaphore_new(c, sname, &s), CRD_OK);
    cr_assert_eq(crd_semaphore_new(other, sname, &os), CRD_OK);
    cr_assert_eq(crd_latch_new(c, lname, &l), CRD_OK);
    cr_assert_eq(crd_latch_new(other, lname, &ol), CRD_OK);
    cr_assert_eq(crd_semaphore_try_set_permits(os, 1, 0, NULL), CRD_OK);
    cr_assert_eq(crd_semaphore_acquire(os, 1, 0), CRD_OK); /* the other client holds it */

    /* The semaphore: pending on the loop behind the other client's permit. */
    rec a = {0};
    crd_op *op = NULL;
    cr_assert_eq(crd_semaphore_acquire_async(s, 1, 20000, done_rec, &a, &op), CRD_OK,
                 "%s", crd_client_errmsg(c));
    cr_assert_not_null(op);
    cr_expect_null(crd_op_lock(op));
    cr_expect_eq(a.calls, 0, "a callback never runs inside the start call");
    cr_expect(!run_loop(c, calls_1, &a, 300), "still waiting after 300 ms");
    cr_expect_geq(crd_loop_timeout_ms(c), 0, "a wait is pending");
    int64_t released = crdt_now_ms();
    cr_assert_eq(crd_semaphore_release(os, 1), CRD_OK);
    cr_assert(run_loop(c, calls_1, &a, 5000), "the acquire was not served");
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(a.st[0], CRD_OK);
    cr_expect_lt(a.at[0] - released, 1000, "served by the release's message, not its deadline");
    int64_t avail = -1;
    cr_assert_eq(crd_semaphore_available(s, &avail), CRD_OK);
    cr_assert_eq(avail, 0, "the loop's acquire took the permit");
    crd_metrics m = metrics_of(c);
    cr_assert_eq(m.permits_acquired, 1);
    cr_assert_eq(m.permit_acquire_busy, 0);

    /* A try (wait 0) is CRD_BUSY; a short wait runs out: CRD_TIMEOUT. */
    rec b = {0}, t = {0};
    cr_assert_eq(crd_semaphore_acquire_async(s, 1, 0, done_rec, &b, NULL), CRD_OK);
    cr_assert_eq(crd_semaphore_acquire_async(s, 1, 100, done_rec, &t, NULL), CRD_OK);
    cr_assert(run_loop(c, calls_1, &b, 5000) && run_loop(c, calls_1, &t, 5000));
    cr_assert_eq(b.st[0], CRD_BUSY);
    cr_assert_eq(t.st[0], CRD_TIMEOUT);
    cr_assert_geq(t.at[0] - a.at[0], 100);
    cr_assert_eq(metrics_of(c).permit_acquire_busy, 2);

    /* The latch: an await pending on the loop, opened by the other client's count-down. */
    cr_assert_eq(crd_latch_try_set_count(ol, 1, NULL), CRD_OK);
    rec w = {0};
    cr_assert_eq(crd_latch_await_async(l, 20000, done_rec, &w, NULL), CRD_OK);
    cr_expect(!run_loop(c, calls_1, &w, 300), "the latch is still closed");
    int64_t opened = crdt_now_ms();
    cr_assert_eq(crd_latch_count_down(ol), CRD_OK);
    cr_assert(run_loop(c, calls_1, &w, 5000), "the await was not woken");
    cr_assert_eq(w.st[0], CRD_OK);
    cr_expect_lt(w.at[0] - opened, 1000, "woken by the count-down's message");
    cr_assert_eq(metrics_of(c).latch_awaits_woken, 1);
    /* Open: an await on the loop completes at the first dispatch's check. */
    rec z = {0};
    cr_assert_eq(crd_latch_await_async(l, 0, done_rec, &z, NULL), CRD_OK);
    cr_assert(run_loop(c, calls_1, &z, 5000));
    cr_assert_eq(z.st[0], CRD_OK);

    cr_expect_eq(crd_loop_timeout_ms(c), -1, "nothing pending");
    crd_latch_free(l);
    crd_latch_free(ol);
    crd_semaphore_free(s);
    crd_semaphore_free(os);
    crd_client_free(other);
    crd_client_free(c);
}

Test(loop, a_cancelled_semaphore_or_latch_wait_reports_cancelled_and_leaves_its_channel)
{
    crd_client *c = crdt_client();
    const char *sname = crdt_key("csem"), *lname = crdt_key("clatch");
    crd_semaphore *s = NULL;
    crd_latch *l = NULL;
    cr_assert_eq(crd_semaphore_new(c, sname, &s), CRD_OK);
    cr_assert_eq(crd_latch_new(c, lname, &l), CRD_OK);
    cr_assert_eq(crd_latch_try_set_count(l, 1, NULL), CRD_OK);
    char sch[400], lch[400];
    snprintf(sch, sizeof sch, "redisson_sc:{%s}", sname);
    snprintf(lch, sizeof lch, "redisson_countdownlatch__channel__{%s}", lname);
    rec a = {0}, b = {0};
    crd_op *sop = NULL, *lop = NULL;
    cr_assert_eq(crd_semaphore_acquire_async(s, 1, CRD_WAIT_FOREVER, done_rec, &a, &sop), CRD_OK);
    cr_assert_eq(crd_latch_await_async(l, CRD_WAIT_FOREVER, done_rec, &b, &lop), CRD_OK);
    redisContext *r = crdt_redis();
    int64_t deadline = crdt_now_ms() + 5000;
    /* Dispatch until both have subscribed (the loop drives them; the server tells). */
    while (!(crdt_numsub(r, sch) > 0 && crdt_numsub(r, lch) > 0) &&
           crdt_now_ms() < deadline)
        run_loop(c, calls_1, &a, 20);
    cr_assert(crdt_numsub(r, sch) > 0 && crdt_numsub(r, lch) > 0,
              "the waits never subscribed");
    cr_assert_eq(crd_op_cancel(sop), CRD_OK);
    cr_assert_eq(crd_op_cancel(lop), CRD_OK);
    cr_assert(run_loop(c, calls_1, &a, 5000) && run_loop(c, calls_1, &b, 5000));
    cr_assert_eq(a.st[0], CRD_CANCELLED);
    cr_assert_eq(b.st[0], CRD_CANCELLED);
    cr_assert(crdt_pubsub_channels_empty(sch), "the semaphore's channel is still subscribed");
    cr_assert(crdt_pubsub_channels_empty(lch), "the latch's channel is still subscribed");
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(c, &m, sizeof m), CRD_OK);
    cr_assert_eq(m.permit_acquire_busy + m.latch_await_timeouts + m.permits_acquired, 0,
                 "a cancel is neither a timeout nor an acquire");

    /* Bad arguments start nothing. */
    rec x = {0};
    cr_expect_eq(crd_semaphore_acquire_async(NULL, 1, 0, done_rec, &x, NULL),
                 CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_semaphore_acquire_async(s, 0, 0, done_rec, &x, NULL), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_semaphore_acquire_async(s, 1, -5, done_rec, &x, NULL), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_semaphore_acquire_async(s, 1, 0, NULL, &x, NULL), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_latch_await_async(NULL, 0, done_rec, &x, NULL), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_latch_await_async(l, -2, done_rec, &x, NULL), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_latch_await_async(l, 0, NULL, &x, NULL), CRD_INVALID_ARGUMENT);
    crd_loop_dispatch(c);
    cr_expect_eq(x.calls, 0);
    cr_expect_eq(crd_loop_timeout_ms(c), -1, "nothing pending");
    redisFree(r);
    crd_latch_free(l);
    crd_semaphore_free(s);
    crd_client_free(c);
}

/* A callback that, told CRD_CLOSED, waits again (as a retry loop would). */
typedef struct rewait {
    rec r;
    crd_latch *l;
    crd_status restart; /* what starting the second wait returned */
} rewait;

static void done_again(void *user, crd_op *op, crd_status st)
{
    rewait *g = user;
    done_rec(&g->r, op, st);
    if (g->r.calls == 1)
        g->restart = crd_latch_await_async(g->l, CRD_WAIT_FOREVER, done_again, g, NULL);
}

Test(loop, a_wait_pending_when_the_client_is_freed_reports_closed)
{
    crd_client *c = crdt_client();
    crd_latch *l = NULL;
    cr_assert_eq(crd_latch_new(c, crdt_key("closed"), &l), CRD_OK);
    cr_assert_eq(crd_latch_try_set_count(l, 1, NULL), CRD_OK);
    rec a = {0};
    cr_assert_eq(crd_latch_await_async(l, CRD_WAIT_FOREVER, done_rec, &a, NULL), CRD_OK);
    /* The last pending operation's callback starts another: refused, nothing left behind
     * (the list's tail was the freed operation; ASan and memcheck see a use of it). */
    rewait g = {.l = l, .restart = CRD_OK};
    cr_assert_eq(crd_latch_await_async(l, CRD_WAIT_FOREVER, done_again, &g, NULL), CRD_OK);
    cr_expect(!run_loop(c, calls_1, &a, 100));
    crd_client_free(c);
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(a.st[0], CRD_CLOSED);
    cr_assert_eq(g.r.calls, 1, "the wait started while freeing never ran its callback");
    cr_assert_eq(g.r.st[0], CRD_CLOSED);
    cr_assert_eq(g.restart, CRD_CLOSED, "%s", crd_strerror(g.restart));
    crd_latch_free(l);
}

Test(loop, a_permit_semaphore_acquire_on_the_loop_gets_its_ids_when_a_permit_is_released)
{
    crd_client *c = crdt_client(), *other = crdt_client();
    const char *name = crdt_key("pes");
    crd_permit_semaphore *ps = NULL, *ops = NULL;
    cr_assert_eq(crd_permit_semaphore_new(c, name, &ps), CRD_OK);
    cr_assert_eq(crd_permit_semaphore_new(other, name, &ops), CRD_OK);
    cr_assert_eq(crd_permit_semaphore_try_set_permits(ops, 2, NULL), CRD_OK);
    char held[2][CRD_PERMIT_ID_SIZE];
    cr_assert_eq(crd_permit_semaphore_acquire_n(ops, 2, 0, 30000, held), CRD_OK);

    /* Two permits wanted, both out elsewhere: pending until both come back. */
    char ids[2][CRD_PERMIT_ID_SIZE];
    memset(ids, 0, sizeof ids);
    rec a = {0};
    cr_assert_eq(crd_permit_semaphore_acquire_async(ps, 2, 20000, 10000, ids, done_rec, &a,
                                                    NULL), CRD_OK, "%s", crd_client_errmsg(c));
    cr_expect(!run_loop(c, calls_1, &a, 300), "still waiting after 300 ms");
    cr_assert_eq(crd_permit_semaphore_release(ops, held[0]), CRD_OK);
    cr_expect(!run_loop(c, calls_1, &a, 300), "one permit is not enough");
    int64_t released = crdt_now_ms();
    cr_assert_eq(crd_permit_semaphore_release(ops, held[1]), CRD_OK);
    cr_assert(run_loop(c, calls_1, &a, 5000), "the acquire was not served");
    cr_assert_eq(a.st[0], CRD_OK, "%s", crd_strerror(a.st[0]));
    cr_expect_lt(a.at[0] - released, 1000, "served by the release's message");
    cr_assert_eq(strlen(ids[0]), 32);
    cr_assert_eq(strlen(ids[1]), 32);
    cr_assert_str_neq(ids[0], ids[1]);
    int64_t left = 0;
    cr_assert_eq(crd_permit_semaphore_lease_left(ps, ids[0], &left), CRD_OK);
    cr_assert(left > 8000 && left <= 10000, "lease left %lld", (long long)left);
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(c, &m, sizeof m), CRD_OK);
    cr_assert_eq(m.permits_acquired, 2);
    cr_assert_eq(m.permit_acquires_contended, 1);

    /* None left: a try is CRD_BUSY and writes no id. */
    char none[1][CRD_PERMIT_ID_SIZE] = {"untouched"};
    rec b = {0};
    cr_assert_eq(crd_permit_semaphore_acquire_async(ps, 1, 0, 10000, none, done_rec, &b, NULL),
                 CRD_OK);
    cr_assert(run_loop(c, calls_1, &b, 5000));
    cr_assert_eq(b.st[0], CRD_BUSY);
    cr_assert_str_eq(none[0], "untouched");
    cr_expect_eq(crd_permit_semaphore_acquire_async(ps, 0, 0, 10000, none, done_rec, &b, NULL),
                 CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_permit_semaphore_acquire_async(ps, 1, 0, 10000, NULL, done_rec, &b, NULL),
                 CRD_INVALID_ARGUMENT);
    const char *both[2] = {ids[0], ids[1]};
    cr_assert_eq(crd_permit_semaphore_release_n(ps, both, 2), CRD_OK);
    cr_expect_eq(crd_loop_timeout_ms(c), -1, "nothing pending");
    crd_permit_semaphore_free(ps);
    crd_permit_semaphore_free(ops);
    crd_client_free(other);
    crd_client_free(c);
}

/* A lost reply on the loop: the proxy lets Redis run the acquire and drops its reply;
 * the next attempt reads the ids back (ZSCORE) instead of sending the acquire again. */
Test(loop, a_permit_acquire_on_the_loop_whose_reply_is_lost_is_read_back_not_resent)
{
    crdt_lost_permit x;
    crdt_lost_permit_open(&x, "readback");
    char id[1][CRD_PERMIT_ID_SIZE];
    rec a = {0};
    CRDT_OK(x.f.a,
            crd_permit_semaphore_acquire_async(x.f.pa, 1, 5000, 60000, id, done_rec, &a, NULL));
    cr_assert(run_loop(x.f.a, calls_1, &a, 10000), "the acquire never completed");
    crdt_lost_permit_check(&x, a.st[0], id[0]);
    crdt_sync_close(&x.f);
}

/* The engine carries the semaphores' and the latch's attempts: with every reply held
 * 300 ms by a proxy, no dispatch waits for one (the blocking attempt would take 300 ms
 * inside the dispatch), and all three complete once their replies come. */
Test(loop, semaphore_and_latch_attempts_on_the_loop_never_make_a_dispatch_wait_for_redis)
{
    crdt_proxy *p;
    crd_client *c = crdt_client_via_proxy(&p);
    crd_semaphore *s = crdt_sem_of(c, crdt_key("slow"));
    crd_latch *l = crdt_latch_of(c, crdt_key("slowlatch"));
    crd_permit_semaphore *ps = crdt_pes_of(c, crdt_key("slowpes"));
    CRDT_OK(c, crd_permit_semaphore_try_set_permits(ps, 1, NULL));
    char pid[1][CRD_PERMIT_ID_SIZE];
    CRDT_OK(c, crd_permit_semaphore_acquire(ps, 0, 10000, pid[0])); /* its script cached */
    CRDT_OK(c, crd_permit_semaphore_release(ps, pid[0]));
    CRDT_OK(c, crd_semaphore_try_set_permits(s, 1, 0, NULL));
    CRDT_OK(c, crd_semaphore_acquire(s, 1, 0)); /* the scripts cached */
    CRDT_OK(c, crd_semaphore_release(s, 1));
    crdt_proxy_set_delay(p, CRDT_PROXY_DOWN, 300);
    rec a = {0}, b = {0}, e = {0};
    int64_t t0 = crdt_now_ms();
    CRDT_OK(c, crd_semaphore_acquire_async(s, 1, 5000, done_rec, &a, NULL));
    CRDT_OK(c, crd_latch_await_async(l, 5000, done_rec, &b, NULL));
    CRDT_OK(c, crd_permit_semaphore_acquire_async(ps, 1, 5000, 10000, pid, done_rec, &e,
                                                  NULL));
    int fd = crd_loop_fd(c);
    int64_t worst = 0;
    while ((a.calls == 0 || b.calls == 0 || e.calls == 0) && crdt_now_ms() - t0 < 10000) {
        int64_t t = crd_loop_timeout_ms(c);
        struct pollfd pf = {fd, POLLIN, 0};
        poll(&pf, 1, t < 0 || t > 100 ? 100 : (int)t);
        int64_t d0 = crdt_now_ms();
        crd_loop_dispatch(c);
        int64_t took = crdt_now_ms() - d0;
        worst = took > worst ? took : worst;
    }
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(b.calls, 1);
    cr_assert_eq(a.st[0], CRD_OK, "%s", crd_strerror(a.st[0]));
    cr_assert_eq(b.st[0], CRD_OK, "%s", crd_strerror(b.st[0]));
    cr_assert_eq(e.calls, 1);
    cr_assert_eq(e.st[0], CRD_OK, "%s", crd_strerror(e.st[0]));
    cr_assert_eq(strlen(pid[0]), 32);
    cr_assert_geq(a.at[0] - t0, 300, "the acquire's reply was held 300 ms");
    cr_assert_lt(worst, 100 * crdt_time_scale(), "a dispatch took %lld ms: it waited for Redis",
                 (long long)worst);
    crdt_proxy_set_delay(p, CRDT_PROXY_DOWN, 0);
    CRDT_OK(c, crd_permit_semaphore_release(ps, pid[0]));
    crd_permit_semaphore_free(ps);
    crd_latch_free(l);
    crd_semaphore_free(s);
    crd_client_free(c);
    crdt_proxy_stop(p);
}

/* ---- the loop fd alone drives the loop: no notice is lost ---------------------------------- */

/* Loop chains and blocking threads of one client take turns on the same few names, so the
 * loop's steps are announced from every side at once: the I/O thread (replies), the
 * subscriber (release messages of the blocking threads) and the loop thread itself
 * (operations a callback starts). The loop sleeps in poll() on its fd for as long as
 * crd_loop_timeout_ms says (2 s when it says "no timer"): a notice lost between a drain
 * and a write would leave it asleep with work pending, and is counted as a stall. */

#define NN_NAMES 4
#define NN_CHAINS 16
#define NN_THREADS 2

typedef struct notice_run {
    crd_client *c;
    crd_lock *locks[NN_NAMES];
    atomic_int inside[NN_NAMES];
    atomic_long overlaps;
    atomic_bool stop;
    long loop_pairs, failures;
    long blocking_pairs[NN_THREADS];
    int chains;
} notice_run;

/* One pass through the critical section of name l (an overlap is counted). */
static void nn_inside(notice_run *n, crd_lock *l)
{
    int i = 0;
    while (i < NN_NAMES - 1 && n->locks[i] != l)
        i++;
    if (atomic_fetch_add(&n->inside[i], 1) != 0)
        atomic_fetch_add(&n->overlaps, 1);
    atomic_fetch_sub(&n->inside[i], 1);
}

/* A chain ends: a failure, or the run is over. */
static void nn_end(notice_run *n, bool failed)
{
    n->failures += failed;
    n->chains--;
}

static void nn_released(void *user, crd_op *op, crd_status st);

static void nn_acquired(void *user, crd_op *op, crd_status st)
{
    notice_run *n = user;
    if (st == CRD_OK)
        nn_inside(n, crd_op_lock(op));
    if (st != CRD_OK ||
        crd_lock_release_async(crd_op_lock(op), crd_op_owner(op), nn_released, n, NULL) != CRD_OK)
        nn_end(n, true);
}

static void nn_released(void *user, crd_op *op, crd_status st)
{
    notice_run *n = user;
    n->failures += st != CRD_OK;
    n->loop_pairs++;
    bool again = !atomic_load(&n->stop);
    if (!again || crd_lock_acquire_async(crd_op_lock(op), crd_op_owner(op), CRD_WAIT_FOREVER,
                                         10000, nn_acquired, n, NULL) != CRD_OK)
        nn_end(n, again);
}

static notice_run nn; /* the run of the test below (its blocking threads use it) */

/* Blocking thread `index` of the run's client on the same names, round robin. */
static void *nn_blocking(void *arg)
{
    int index = (int)(intptr_t)arg;
    for (int k = index; !atomic_load(&nn.stop); k++) {
        crd_lock *l = nn.locks[k % NN_NAMES];
        bool ok = crd_lock_acquire(l, CRD_WAIT_FOREVER, 10000) == CRD_OK;
        if (ok)
            nn_inside(&nn, l);
        if (!ok || crd_lock_release(l) != CRD_OK)
            break;
        nn.blocking_pairs[index]++;
    }
    return NULL;
}

Test(loop, a_loop_woken_only_by_its_fd_misses_no_notice, .timeout = 60)
{
    notice_run *n = &nn;
    memset(n, 0, sizeof *n);
    n->c = crdt_client();
    for (int i = 0; i < NN_NAMES; i++) {
        char suffix[16];
        snprintf(suffix, sizeof suffix, "n%d", i);
        n->locks[i] = crdt_lock(n->c, crdt_key(suffix));
    }
    int fd = crd_loop_fd(n->c);
    cr_assert_geq(fd, 0);
    for (int k = 0; k < NN_CHAINS; k++)
        cr_assert_eq(crd_lock_acquire_async(n->locks[k % NN_NAMES], crd_owner_new(),
                                            CRD_WAIT_FOREVER, 10000, nn_acquired, n, NULL),
                     CRD_OK);
    n->chains = NN_CHAINS;
    pthread_t th[NN_THREADS];
    for (int k = 0; k < NN_THREADS; k++)
        cr_assert_eq(pthread_create(&th[k], NULL, nn_blocking, (void *)(intptr_t)k), 0);
    int64_t until = crdt_now_ms() + 2000, give_up = until + 20000;
    long stalls = 0, sleeps = 0;
    while (n->chains > 0 && crdt_now_ms() < give_up) {
        if (!atomic_load(&n->stop) && crdt_now_ms() >= until)
            atomic_store(&n->stop, true);
        crd_loop_dispatch(n->c);
        if (n->chains == 0)
            break;
        int64_t t = crd_loop_timeout_ms(n->c);
        bool no_timer = t < 0 || t > 2000;
        struct pollfd p = {fd, POLLIN, 0};
        int rc = poll(&p, 1, no_timer ? 2000 : (int)t);
        sleeps++;
        if (rc == 0 && no_timer)
            stalls++; /* asleep for 2 s with operations pending and nothing due: lost */
    }
    atomic_store(&n->stop, true);
    long blocking_pairs = 0;
    for (int k = 0; k < NN_THREADS; k++) {
        pthread_join(th[k], NULL);
        blocking_pairs += n->blocking_pairs[k];
    }
    fprintf(stderr, "[loop] fd-driven: %ld loop pairs, %ld blocking pairs, %ld polls, %ld "
            "stalls\n", n->loop_pairs, blocking_pairs, sleeps, stalls);
    cr_expect_eq(n->chains, 0, "%d chains never finished", n->chains);
    cr_expect_eq(stalls, 0, "the loop slept through pending work");
    cr_expect_eq(n->failures, 0);
    cr_expect_eq(atomic_load(&n->overlaps), 0);
    cr_expect_gt(n->loop_pairs, NN_CHAINS);
    cr_expect_gt(blocking_pairs, 0);
    for (int i = 0; i < NN_NAMES; i++)
        crd_lock_free(n->locks[i]);
    crd_client_free(n->c);
}

/* A loop that never asks crd_loop_timeout_ms: an operation a callback starts behind the
 * pass's last one makes the fd readable itself (one chain, acquire -> release -> acquire,
 * each started by the previous one's callback, so each starts at the end of a pass). */
Test(loop, an_operation_a_callback_starts_makes_the_fd_readable, .timeout = 60)
{
    static notice_run n;
    memset(&n, 0, sizeof n);
    n.c = crdt_client();
    n.locks[0] = crdt_lock(n.c, crdt_key("chain"));
    int fd = crd_loop_fd(n.c);
    cr_assert_geq(fd, 0);
    cr_assert_eq(crd_lock_acquire_async(n.locks[0], crd_owner_new(), CRD_WAIT_FOREVER, 10000,
                                        nn_acquired, &n, NULL),
                 CRD_OK);
    n.chains = 1;
    long stalls = 0;
    int64_t give_up = crdt_now_ms() + 30000;
    while (n.chains > 0 && crdt_now_ms() < give_up) {
        if (n.loop_pairs >= 200)
            atomic_store(&n.stop, true);
        crd_loop_dispatch(n.c);
        if (n.chains == 0)
            break;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 2000) == 0)
            stalls++;
    }
    cr_expect_eq(n.chains, 0);
    cr_expect_eq(stalls, 0, "the fd stayed quiet with an operation to step");
    cr_expect_eq(n.failures, 0);
    cr_expect_geq(n.loop_pairs, 200);
    crd_lock_free(n.locks[0]);
    crd_client_free(n.c);
}

/* ---- a dispatch's budget (issue #48) ------------------------------------------------------ */

/* Counts completions and remembers the most any one dispatch call saw. */
typedef struct budget_rec {
    int done, in_call, most_in_call;
} budget_rec;

static void budget_done(void *user, crd_op *op, crd_status st)
{
    (void)op;
    budget_rec *b = user;
    cr_assert_eq(st, CRD_OK);
    b->done++;
    if (++b->in_call > b->most_in_call)
        b->most_in_call = b->in_call;
}

/* 1 000 acquisitions on 1 000 free names, all answered before the loop looks: one
 * dispatch used to complete them all in one go (2 000 took 20-24 ms). A call now completes
 * at most 128 and says when it stopped with work left: crd_loop_timeout_ms() is 0, and the
 * operations behind go first in the next call, so every one completes. */
Test(loop, a_dispatch_completes_at_most_its_budget_and_says_more_is_ready, .timeout = 120)
{
    enum { N = 1000 };
    crd_client *c = crdt_client();
    crd_lock **ls = calloc(N, sizeof *ls);
    cr_assert_not_null(ls);
    budget_rec b = {0};
    uint64_t owner = crd_owner_new();
    /* Warm: the scripts are cached (a NOSCRIPT would need a second pass). */
    crd_lock *w = crdt_lock(c, crdt_key("budget-warm"));
    cr_assert_eq(crd_lock_acquire(w, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_release(w), CRD_OK);
    crd_lock_free(w);
    for (int i = 0; i < N; i++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "budget:%d", i);
        ls[i] = crdt_lock(c, crdt_key(suffix));
        cr_assert_eq(crd_lock_acquire_async(ls[i], owner, 5000, 30000, budget_done, &b, NULL),
                     CRD_OK);
    }
    /* Dispatch until every attempt is out (a call stopped by its budget leaves the rest to
     * the next: crd_loop_timeout_ms() is 0); the server has run them all once every key
     * exists, and their replies are on their way back. */
    redisContext *r = crdt_redis();
    char pattern[300];
    snprintf(pattern, sizeof pattern, "%s", crdt_key("budget:*"));
    int64_t deadline = crdt_now_ms() + crdt_scaled_ms(20000);
    do {
        b.in_call = 0;
        crd_loop_dispatch(c);
    } while (crd_loop_timeout_ms(c) == 0 && crdt_count_keys(r, pattern) < N &&
             crdt_now_ms() < deadline);
    while (crdt_count_keys(r, pattern) < N && crdt_now_ms() < deadline)
        crdt_sleep_ms(5); /* the server's work, outside the loop: polled, not awaited */
    cr_assert_eq(crdt_count_keys(r, pattern), N, "the acquires never ran");
    int fd = crd_loop_fd(c);
    while (b.done < N && crdt_now_ms() < deadline) {
        struct pollfd p = {fd, POLLIN, 0};
        int64_t t = crd_loop_timeout_ms(c);
        poll(&p, 1, t < 0 || t > 100 ? 100 : (int)t);
        b.in_call = 0;
        int left = crd_loop_dispatch(c);
        if (b.in_call == 128 && left > 0)
            cr_assert_eq(crd_loop_timeout_ms(c), 0, "a dispatch stopped at its budget but "
                         "crd_loop_timeout_ms() does not say more is ready");
    }
    cr_assert_eq(b.done, N, "%d of %d acquisitions completed", b.done, N);
    cr_assert_leq(b.most_in_call, 128, "one dispatch completed %d operations", b.most_in_call);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(crd_lock_release_owner(ls[i], owner), CRD_OK);
        crd_lock_free(ls[i]);
    }
    free(ls);
    redisFree(r);
    crd_client_free(c);
}
