/*
 * test_engine.c -- the engine's promises against a real redis-server that stalls
 * (SIGSTOP, as a long script, a fork stall or a network blip would): a blocking call
 * returns by its deadline plus a small slack, and an acquire whose reply comes after its
 * caller was told it failed leaves no hold (the engine gives it back, and counts it).
 * Also: many threads on distinct names share the peer's few pipelined connections.
 */
#include "support/harness.h"
#include "support/waiters.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

/* Measured: 1-7 ms over the deadline and dispatch calls under 1 ms on this 2-core VM;
 * generous for the sanitizers. Under memcheck (CRDT_TIME_SCALE) everything the library
 * does costs 20-50 times more CPU, and these bounds on its promptness are the one place
 * here that scales with it (measured there: 21 ms over, a 10.6 ms dispatch). The test
 * file runs its tests one at a time (CRDT_SERIAL_TEST) so they do not share the CPU. */
#define SLACK_MS crdt_scaled_ms(50)
/* A dispatch that blocked on the stalled server would last the acquires' deadline (300 or
 * 500 ms) or the command timeout; one that does not block took under 2 ms alone and 23 ms
 * once when the two cores were shared with five other test runs (wall clock: a preempted
 * call counts its wait). 100 ms tells the two apart under that load. */
#define DISPATCH_MAX_US (crdt_scaled_ms(100) * 1000)

#define STALL_LOCKS 11

/* A private server to stall, a client of it whose health limit (command_timeout_ms 5000)
 * outlasts the stall, a raw connection to it, and n locks of the client (keys[i] their
 * names, crdt_key("<prefix><i>")). */
typedef struct stall {
    crdt_server s;
    redisContext *r;
    crd_client *c;
    int n;
    crd_lock *l[STALL_LOCKS];
    const char *keys[STALL_LOCKS];
} stall;

static void stall_open(stall *st, const char *prefix, int n)
{
    cr_assert(n >= 1 && n <= STALL_LOCKS);
    crdt_server_start(&st->s, false, NULL, NULL, NULL);
    crd_options o;
    crdt_options(&o);
    o.port = st->s.port;
    o.command_timeout_ms = 5000;
    st->c = crdt_client_opts(&o);
    st->r = crdt_redis_port(st->s.port);
    st->n = n;
    for (int i = 0; i < n; i++) {
        char suffix[64];
        snprintf(suffix, sizeof suffix, "%s%d", prefix, i);
        st->keys[i] = crdt_key(suffix);
        st->l[i] = crdt_lock(st->c, st->keys[i]);
    }
}

/* Frees the locks, the connection and the client, and stops the server. */
static void stall_close(stall *st)
{
    for (int i = 0; i < st->n; i++)
        crd_lock_free(st->l[i]);
    redisFree(st->r);
    crd_client_free(st->c);
    crdt_server_stop(&st->s);
}

Test(engine, a_stalled_server_returns_blocking_acquires_by_their_deadline_and_leaves_no_hold,
     .timeout = 60)
{
    stall sv;
    stall_open(&sv, "stalled", 1);
    crd_lock *l = sv.l[0];
    cr_assert_eq(crd_lock_acquire(l, 0, 30000), CRD_OK); /* warm the script cache */
    cr_assert_eq(crd_lock_release(l), CRD_OK);

    cr_assert_eq(kill(sv.s.pid, SIGSTOP), 0);
    int64_t t0 = crdt_now_ms();
    crd_status st = crd_lock_acquire(l, 100, 30000);
    int64_t took = crdt_now_ms() - t0;
    cr_assert_eq(st, CRD_TIMEOUT, "acquire during the stall: %s (%s)", crd_strerror(st),
                 crd_client_errmsg(sv.c));
    cr_assert(took <= 100 + SLACK_MS, "a 100 ms wait returned after %" PRId64 " ms", took);
    cr_assert_eq(kill(sv.s.pid, SIGCONT), 0);

    /* The server runs the acquire it had in its socket buffer; the late reply says
     * "taken", and the engine gives the hold back. */
    cr_assert(crdt_await_exists(sv.r, sv.keys[0], false, 5000),
              "the late hold was never given back");
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(sv.c, &m, sizeof m), CRD_OK);
    cr_assert_eq(m.late_holds_released, 1);
    /* And the lock works as before. */
    cr_assert_eq(crd_lock_acquire(l, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    stall_close(&sv);
}

typedef struct many_arg {
    crd_client *c;
    int idx;
    int rounds;
    int ok;
} many_arg;

static void *many_names(void *arg)
{
    many_arg *a = arg;
    char suffix[32];
    snprintf(suffix, sizeof suffix, "n%d", a->idx);
    crd_lock *l = crdt_lock(a->c, crdt_key(suffix));
    /* No deadline to miss (the test is about connections; memcheck makes it slow): an
     * unbounded wait, each attempt within command_timeout_ms. */
    for (int i = 0; i < a->rounds; i++)
        if (crd_lock_acquire(l, CRD_WAIT_FOREVER, 30000) == CRD_OK && crd_lock_release(l) == CRD_OK)
            a->ok++;
    crd_lock_free(l);
    return NULL;
}

Test(engine, sixty_four_threads_on_distinct_names_share_at_most_two_connections, .timeout = 60)
{
    crd_options o;
    crdt_options(&o);
    crd_client *c = crdt_client_opts(&o);
    crd_metrics before;
    cr_assert_eq(crd_client_metrics(c, &before, sizeof before), CRD_OK);
    enum { N = 64 };
    pthread_t t[N];
    many_arg a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (many_arg){c, i, 20, 0};
        cr_assert_eq(pthread_create(&t[i], NULL, many_names, &a[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(a[i].ok, 20, "thread %d: %d of 20 pairs", i, a[i].ok);
    }
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(c, &m, sizeof m), CRD_OK);
    /* Command connections (pool_size, default 2) plus the subscriber's. */
    cr_assert(m.connects - before.connects <= 3, "%" PRIu64 " connections opened",
              m.connects - before.connects);
    crd_client_free(c);
}

Test(engine, a_stalled_server_never_blocks_the_loop_thread_and_late_holds_are_given_back,
     .timeout = 60)
{
    enum { N = 10 };
    stall sv;
    stall_open(&sv, "loop", N);
    crd_lock **l = sv.l;
    cr_assert_eq(crd_lock_acquire(l[0], 0, 30000), CRD_OK); /* warm the script cache */
    cr_assert_eq(crd_lock_release(l[0]), CRD_OK);
    int fd = crd_loop_fd(sv.c);
    cr_assert(fd >= 0);

    cr_assert_eq(kill(sv.s.pid, SIGSTOP), 0);
    /* The wait runs out (CRD_TIMEOUT) on the connection that had answered before; on a
     * second connection opened during the stall, which never answered, it is CRD_IO:
     * crdt_op_rec counts both as failed. */
    crdt_op_rec lr = {0, CRD_OK, 0};
    int64_t t0 = crdt_now_ms();
    for (int i = 0; i < N; i++)
        cr_assert_eq(crd_lock_acquire_async(l[i], crd_owner_new(), 500, 30000, crdt_op_rec_done,
                                            &lr, NULL),
                     CRD_OK);
    int64_t worst = crdt_loop_until(sv.c, &lr.done, N, 10000);
    int64_t all = crdt_now_ms() - t0;
    cr_assert_eq(lr.done, N, "%d of %d acquires completed", lr.done, N);
    cr_assert_eq(lr.failed, N,
                 "every acquire failed by its deadline on the stalled server (last %s)",
                 crd_strerror(lr.last));
    cr_assert(worst < DISPATCH_MAX_US, "a dispatch call took %" PRId64 " us", worst);
    cr_assert(all <= 500 + SLACK_MS, "the 500 ms acquires completed after %" PRId64 " ms", all);
    cr_assert_eq(kill(sv.s.pid, SIGCONT), 0);
    for (int i = 0; i < N; i++) {
        cr_assert(crdt_await_exists(sv.r, sv.keys[i], false, 5000), "lock %d was left held", i);
    }
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(sv.c, &m, sizeof m), CRD_OK);
    cr_assert_eq(m.late_holds_released, N, "given back: %llu, unknown: %llu",
                 (unsigned long long)m.late_holds_released, (unsigned long long)m.outcomes_unknown);
    fprintf(stderr, "[engine] loop: %d acquires against a stopped server: worst dispatch %"
            PRId64 " us, all done after %" PRId64 " ms\n", N, worst, all);
    stall_close(&sv);
}

/* Bytes the server at port has received and not read (it is stopped): the receive queues
 * of its accepted loopback connections, from /proc/net/tcp. */
static long unread_at_server(int port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    cr_assert_not_null(f);
    char line[512];
    long sum = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned lport, state;
        unsigned long txq, rxq;
        if (sscanf(line, " %*d: %*8x:%x %*8x:%*x %x %lx:%lx", &lport, &state, &txq, &rxq) == 4 &&
            (int)lport == port && state == 1)
            sum += (long)rxq;
    }
    fclose(f);
    return sum;
}

typedef struct pass_run {
    crd_lock **l;
    int n;
    crdt_op_rec shorts;
    int64_t started;
    crd_status victim;
} pass_run;

/* The cancelled operation's callback: starts the short acquires inside the pass. */
static void start_shorts(void *user, crd_op *op, crd_status st)
{
    (void)op;
    pass_run *p = user;
    p->victim = st;
    p->started = crdt_now_ms();
    for (int i = 0; i < p->n; i++)
        cr_assert_eq(crd_lock_acquire_async(p->l[i], crd_owner_new(), 300, 30000, crdt_op_rec_done,
                                            &p->shorts, NULL),
                     CRD_OK);
}

/* What a dispatch pass starts (here a callback's acquires) goes out from the loop thread
 * when the pass ends, and the I/O thread is left asleep only if its poll() already covers
 * it. Here it does not: a 4 s acquire is in flight on the stopped server, so that poll
 * would sleep until its deadline; the 300 ms acquires must still end by theirs (fails
 * when the I/O thread is not woken for the earlier deadline: checked by breaking it). */
Test(engine, acquires_a_dispatch_pass_starts_on_a_stalled_server_end_by_their_deadline,
     .timeout = 60)
{
    enum { N = 4 };
    stall sv;
    stall_open(&sv, "pass", N + 1);
    crd_lock **l = sv.l;
    cr_assert_eq(crd_lock_acquire(l[N], 0, 30000), CRD_OK); /* warm the script cache */
    cr_assert_eq(crd_lock_release(l[N]), CRD_OK);
    cr_assert_geq(crd_loop_fd(sv.c), 0);
    cr_assert_eq(kill(sv.s.pid, SIGSTOP), 0);
    crdt_op_rec longs = {0, CRD_OK, 0};
    pass_run p = {l, N, {0, CRD_OK, 0}, 0, CRD_OK};
    /* The long acquire goes out; a second one of the same lock queues behind it in this
     * client (local_fifo) and sends nothing: cancelled, its callback runs in a pass. */
    cr_assert_eq(crd_lock_acquire_async(l[N], crd_owner_new(), 4000, 30000, crdt_op_rec_done,
                                        &longs, NULL), CRD_OK);
    crd_op *victim = NULL;
    cr_assert_eq(crd_lock_acquire_async(l[N], crd_owner_new(), 4000, 30000, start_shorts, &p,
                                        &victim), CRD_OK);
    crd_loop_dispatch(sv.c);
    int64_t until = crdt_now_ms() + 5000;
    while (unread_at_server(sv.s.port) == 0 && crdt_now_ms() < until)
        sched_yield();
    cr_assert_gt(unread_at_server(sv.s.port), 0, "the long acquire never reached the server");
    cr_assert_eq(crd_op_cancel(victim), CRD_OK);
    crd_loop_dispatch(sv.c);
    int64_t worst = crdt_loop_until(sv.c, &p.shorts.done, N, 10000);
    int64_t took = crdt_now_ms() - p.started;
    cr_assert_eq(p.victim, CRD_CANCELLED, "%s", crd_strerror(p.victim));
    cr_assert_eq(p.shorts.done, N, "%d of %d short acquires completed", p.shorts.done, N);
    cr_assert_eq(p.shorts.failed, N, "every short acquire failed on the stalled server (last %s)",
                 crd_strerror(p.shorts.last));
    cr_assert(took <= 300 + SLACK_MS, "the 300 ms acquires completed after %" PRId64 " ms", took);
    cr_assert(worst < DISPATCH_MAX_US, "a dispatch call took %" PRId64 " us", worst);
    cr_assert_eq(longs.done, 0, "the 4 s acquire ended early");
    cr_assert_eq(kill(sv.s.pid, SIGCONT), 0);
    crdt_loop_until(sv.c, &longs.done, 1, 10000);
    cr_assert_eq(longs.done, 1);
    fprintf(stderr, "[engine] a pass's acquires on a stopped server: done after %" PRId64
            " ms, worst dispatch %" PRId64 " us\n", took, worst);
    stall_close(&sv);
}

/* Replica sync against a replica that never acknowledges (SIGSTOP): the WAIT that
 * follows the acquire keeps the primary's answer back for replica_sync_timeout_ms. It is
 * not a dead connection (command_timeout_ms below the WAIT's timeout must not give the
 * link up and leave the hold behind), and it ends by the caller's deadline (a wait of
 * 700 ms returns by then, not 1 s later). Either way the acquire is CRD_NOT_SYNCED and
 * undone: no hold is left, and the undo sends no WAIT of its own. Seen while building the
 * partition suite: the hold stayed (PTTL 4862 after the call), and a 3000 ms wait
 * returned after 4070 ms. */
/* Whether the server lists two clients blocked in WAIT. */
static bool two_blocked_in_wait(void *arg)
{
    redisReply *rep = crdt_cmd(arg, "CLIENT LIST");
    int n = 0;
    for (const char *q = strstr(rep->str, " cmd=wait "); q != NULL; q = strstr(q + 1, " cmd=wait "))
        n++;
    freeReplyObject(rep);
    return n >= 2;
}

Test(engine, a_replica_sync_wait_neither_kills_the_link_nor_overruns_the_callers_deadline,
     .timeout = 60)
{
    crdt_server primary, replica;
    crdt_server_start(&primary, false, NULL, NULL, NULL);
    char port[16];
    snprintf(port, sizeof port, "%d", primary.port);
    const char *args[] = {"--replicaof", "127.0.0.1", port, NULL};
    crdt_server_start(&replica, false, args, NULL, NULL);
    redisContext *r = crdt_redis_port(primary.port);
    /* The primary counts the replica (ROLE) only from its first REPLCONF ACK. */
    int64_t until = crdt_now_ms() + 20000;
    long long listed = 0;
    while (listed != 1 && crdt_now_ms() < until) {
        redisReply *rep = redisCommand(r, "ROLE");
        listed = rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 3
                     ? (long long)rep->element[2]->elements : 0;
        if (rep != NULL)
            freeReplyObject(rep);
        if (listed != 1)
            crdt_sleep_ms(20);
    }
    cr_assert_eq(listed, 1, "the primary never listed its replica");
    crd_options o;
    crdt_options(&o);
    o.port = primary.port;
    o.replica_sync = CRD_REPLICA_SYNC_ON;
    o.replica_sync_timeout_ms = 1000;
    o.command_timeout_ms = 500; /* below the WAIT's timeout */
    crd_client *c = crdt_client_opts(&o);
    const char *key = crdt_key("unsynced");
    crd_lock *l = crdt_lock(c, key);
    cr_assert_eq(crd_lock_acquire(l, 0, 5000), CRD_OK); /* synced: the replica runs */
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_assert_eq(kill(replica.pid, SIGSTOP), 0);
    struct {
        int64_t wait_ms;
        int64_t bound_ms;
    } cases[] = {{3000, 1100}, {700, 700}, {0, 1500}}; /* a WAIT times out up to 100 ms
                                                            late; a try has the command
                                                            timeout plus the WAIT's */
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t t0 = crdt_now_ms();
        crd_status st = crd_lock_acquire(l, cases[k].wait_ms, 5000);
        int64_t took = crdt_now_ms() - t0;
        cr_expect_eq(st, CRD_NOT_SYNCED, "wait %lld: %s (%s)", (long long)cases[k].wait_ms,
                     crd_strerror(st), crd_client_errmsg(c));
        cr_expect_leq(took, cases[k].bound_ms + SLACK_MS, "wait %lld: returned after %lld ms",
                      (long long)cases[k].wait_ms, (long long)took);
        cr_expect_eq(crdt_cmd_int(r, "EXISTS %s", key), 0, "wait %lld: the hold was left",
                     (long long)cases[k].wait_ms);
    }
    /* Another caller's command does not wait behind a WAIT in flight (it holds the link's
     * answers back for up to 1 s). Two acquires of a busy client: the first runs on a link
     * lent to its thread, the second's WAIT on a link of the I/O thread; a read then goes
     * on a third link, not packed behind that WAIT. */
    o.pool_size = 3;
    crd_client *busy = crdt_client_opts(&o);
    crdt_waiter u[2];
    for (int i = 0; i < 2; i++) {
        u[i] = (crdt_waiter){
            .lock = crdt_lock(busy, crdt_key(i ? "u1" : "u0")), .wait_ms = 3000, .lease_ms = 5000};
        crdt_waiter_start(&u[i]);
    }
    cr_assert(crdt_wait_until(two_blocked_in_wait, r, 5000), "the acquires' WAITs never blocked");
    crd_lock *other = crdt_lock(busy, crdt_key("other"));
    bool held = true;
    int64_t t0 = crdt_now_ms();
    cr_expect_eq(crd_lock_is_held(other, &held), CRD_OK, "%s", crd_client_errmsg(busy));
    int64_t took = crdt_now_ms() - t0;
    cr_expect(!held);
    cr_expect_lt(took, crdt_scaled_ms(300), "a read waited %lld ms behind a WAIT",
                 (long long)took);
    for (int i = 0; i < 2; i++) {
        crdt_waiter_join(&u[i], 30000, "an unsynced acquire");
        cr_expect_eq(u[i].acquire_st, CRD_NOT_SYNCED, "%s", crd_strerror(u[i].acquire_st));
        crd_lock_free(u[i].lock);
    }
    crd_lock_free(other);
    crd_client_free(busy);
    cr_assert_eq(kill(replica.pid, SIGCONT), 0);
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
    crdt_server_stop(&replica);
    crdt_server_stop(&primary);
}

static bool only_one_client(void *arg)
{
    redisContext *r = arg;
    redisReply *rep = crdt_cmd(r, "CLIENT LIST");
    int n = 0;
    for (const char *q = rep->str; (q = strchr(q, '\n')) != NULL; q++)
        n++;
    freeReplyObject(rep);
    return n == 1;
}

/* A caller runs an uncontended round trip on an idle connection itself (the direct
 * path), and the I/O thread stops watching a connection while it is lent: a connection
 * the server closed while idle must still never carry a command. */
Test(engine, a_connection_the_server_closed_while_idle_never_carries_a_command, .timeout = 60)
{
    crd_options o;
    crdt_options(&o);
    crdt_tracelog *t = crdt_tracelog_new();
    crdt_tracelog_attach(t, &o);
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l = crdt_lock(c, crdt_key("idle"));
    redisContext *r = crdt_redis();
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 20; i++) {
            cr_assert_eq(crd_lock_acquire(l, 0, 5000), CRD_OK);
            cr_assert_eq(crd_lock_release(l), CRD_OK);
        }
        /* Every connection but r's goes (the command links and the subscriber's). */
        freeReplyObject(crdt_cmd(r, "CLIENT KILL TYPE normal SKIPME yes"));
        freeReplyObject(crdt_cmd(r, "CLIENT KILL TYPE pubsub"));
        cr_assert(crdt_wait_until(only_one_client, r, 5000), "the server kept a connection");
        size_t from = crdt_tracelog_count(t);
        cr_assert_eq(crd_lock_acquire(l, 0, 5000), CRD_OK, "%s", crd_client_errmsg(c));
        cr_assert_eq(crd_lock_release(l), CRD_OK, "%s", crd_client_errmsg(c));
        cr_assert_eq(crdt_tracelog_count_scripts(t, from), 2, "one script each, no retry");
        for (size_t i = from; i < crdt_tracelog_count(t); i++) {
            crdt_trace_entry e;
            cr_assert(crdt_tracelog_get(t, i, &e));
            bool io = strncmp(e.reply, "(io)", 4) == 0;
            bool sub = e.subscriber;
            char what[64];
            snprintf(what, sizeof what, "%s", e.argc > 0 ? e.argv[0] : "");
            crdt_trace_entry_free(&e);
            cr_assert(sub || !io, "round %d: %s went out on a dead connection", round, what);
        }
    }
    redisFree(r);
    crd_lock_free(l);
    crd_client_free(c);
    crdt_tracelog_free(t);
}
