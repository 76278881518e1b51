/*
 * test_fair.c -- the fair lock (issue #4) against a real redis-server.
 *
 * What it checks: FIFO order across processes and threads; waiting without polling and
 * one wake-up per release, addressed to the queue head alone; hand-off latency with a
 * full queue; a waiter killed with SIGKILL stalls the queue at most its announced wait;
 * waiters that give up leave the queue and move those behind them up; try-once never
 * queues; reentrancy never queues; force-unlock wakes the head and the old holder then
 * sees CRD_LOCK_LOST; mutual exclusion under threads and processes; watchdog renewal.
 *
 * Keys (PROTOCOL.md 8.1): the hash N, the queue redisson_lock_queue:{N} (LIST, head
 * first), the deadlines redisson_lock_timeout:{N} (ZSET, epoch ms) and each waiter's
 * channel redisson_lock__channel:{N}:<owner field>. Every test ends by checking that the
 * queue and deadline keys are gone and that no channel of the test is still subscribed.
 *
 * Waiting on other threads and processes is done on events with deadlines: a queue
 * entry becoming visible (LRANGE through raw hiredis), a gate opened by a thread, a
 * Redis list reaching a length. Sleeps appear only where time passing is the behaviour
 * under test (a 3 s hold, a watchdog period).
 *
 * CRDT_TIME_SCALE (harness.h) shrinks the repeated rounds for slow or quick runs.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exclusion.h"
#include "harness.h"
#include "waiters.h"

/* ---------------------------------------------------------------------------------- */
/* Helpers                                                                            */
/* ---------------------------------------------------------------------------------- */

typedef struct fair_keys {
    char queue[512];
    char deadlines[512];
    char chan_base[512]; /* a waiter's channel is chan_base:<field> */
} fair_keys;

static void fair_keys_of(const char *name, fair_keys *k)
{
    snprintf(k->queue, sizeof k->queue, "redisson_lock_queue:{%s}", name);
    snprintf(k->deadlines, sizeof k->deadlines, "redisson_lock_timeout:{%s}", name);
    snprintf(k->chan_base, sizeof k->chan_base, "redisson_lock__channel:{%s}", name);
}

static double ms_of(int64_t ns) { return (double)ns / 1e6; }

/* p-th percentile (0..100) of v[0..n-1]; sorts v. */
static int64_t percentile(int64_t *v, int n, int p)
{
    crdt_sort_i64(v, n);
    int i = (int)(((long long)n * p) / 100);
    if (i >= n)
        i = n - 1;
    return v[i];
}

/* The queue as a list of fields: fills out[] (up to max), returns the length. */
static int queue_fields(redisContext *r, const char *queue, char out[][128], int max)
{
    redisReply *rep = crdt_cmd(r, "LRANGE %s 0 -1", queue);
    cr_assert_eq(rep->type, REDIS_REPLY_ARRAY);
    int n = (int)rep->elements;
    for (int i = 0; i < n && i < max; i++)
        snprintf(out[i], 128, "%s", rep->element[i]->str);
    freeReplyObject(rep);
    return n;
}

typedef struct queue_pred {
    redisContext *r;
    const char *queue;
    int len;          /* expected LLEN */
    const char *tail; /* expected field at position len-1, or NULL */
} queue_pred;

static bool queue_is(void *arg)
{
    queue_pred *p = arg;
    char f[16][128];
    int n = queue_fields(p->r, p->queue, f, 16);
    if (n != p->len)
        return false;
    return p->tail == NULL || (n > 0 && strcmp(f[n - 1], p->tail) == 0);
}

/* Waits until the queue has exactly len entries, the last being tail. */
static void await_queue(redisContext *r, const char *queue, int len, const char *tail)
{
    queue_pred p = {r, queue, len, tail};
    cr_assert(crdt_wait_until(queue_is, &p, 5000),
              "the queue %s never reached length %d ending with %s", queue, len,
              tail != NULL ? tail : "(any)");
}

static double zscore(redisContext *r, const char *z, const char *member)
{
    char buf[64];
    crdt_cmd_str(r, buf, sizeof buf, "ZSCORE %s %s", z, member);
    return buf[0] == '\0' ? -1.0 : atof(buf);
}

/* The end-of-test check: no queue, no deadlines, no lock, no subscribed channel. */
static void assert_fair_clean(redisContext *r, const char *name)
{
    fair_keys k;
    fair_keys_of(name, &k);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", k.queue), 0, "queue %s left behind", k.queue);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", k.deadlines), 0, "deadlines %s left behind",
                 k.deadlines);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", name), 0, "the lock %s is still held", name);
    char pattern[400];
    snprintf(pattern, sizeof pattern, "*%s*", crdt_key_prefix());
    cr_assert(crdt_pubsub_channels_empty(pattern), "channels of the test are still subscribed");
}

static crd_client *client_with(int64_t fair_wait_ms, int64_t poll_ms, crdt_tracelog *t)
{
    crd_options o;
    crdt_options(&o);
    if (fair_wait_ms > 0)
        o.fair_wait_timeout_ms = fair_wait_ms;
    if (poll_ms > 0)
        o.poll_interval_ms = poll_ms;
    if (t != NULL)
        crdt_tracelog_attach(t, &o);
    return crdt_client_opts(&o);
}

static crd_lock *fair_lock(crd_client *c, const char *name)
{
    crd_lock *l = NULL;
    cr_assert_eq(crd_fair_lock_new(c, name, &l), CRD_OK);
    return l;
}

/* A two-client fixture of fair locks on crdt_key("fair"), and the keys of its queue. */
static void fair_fixture_open(crdt_fixture *f, fair_keys *fk)
{
    crdt_fixture_open(f, 2, "fair", fair_lock);
    fair_keys_of(f->key, fk);
}

/* ---------------------------------------------------------------------------------- */
/* FIFO rounds: agents that wait for a go signal, then queue for the lock             */
/* ---------------------------------------------------------------------------------- */

enum { FIFO_WAITERS = 8, FIFO_PROCS = 3, FIFO_WAIT_MS = 20000, FIFO_LEASE_MS = 10000 };

typedef struct fifo_setup {
    int port;
    char lock[256];
    char go[FIFO_WAITERS][320];       /* LIST: BLPOP'd by agent k: a round number or "quit" */
    char fieldkey[FIFO_WAITERS][320]; /* STRING: agent k's owner field */
    char prefix[320];                 /* order:<round> and times:<round> live under it */
    char failures[320];               /* acquires/releases that did not succeed */
    char inside[320];                 /* overlap detector */
    char violations[320];             /* times the detector read more than 1 */
} fifo_setup;

typedef struct agent {
    const fifo_setup *s;
    crd_client *client;
    int k;
} agent;

/* Plain C (no Criterion asserts): also runs in forked children. */
static void agent_loop(agent *a)
{
    const fifo_setup *s = a->s;
    redisContext *r = crdt_raw_connect(s->port, 30000);
    if (r == NULL)
        return;
    crd_lock *l = NULL;
    if (crd_fair_lock_new(a->client, s->lock, &l) != CRD_OK) {
        freeReplyObject(redisCommand(r, "INCR %s", s->failures));
        redisFree(r);
        return;
    }
    char field[128];
    crdt_owner_field(a->client, crd_owner_current(), field, sizeof field);
    freeReplyObject(redisCommand(r, "SET %s %s", s->fieldkey[a->k], field));
    for (;;) {
        redisReply *g = redisCommand(r, "BLPOP %s 60", s->go[a->k]);
        if (g == NULL || g->type != REDIS_REPLY_ARRAY || g->elements != 2) {
            freeReplyObject(g);
            break;
        }
        char round[32];
        snprintf(round, sizeof round, "%s", g->element[1]->str);
        freeReplyObject(g);
        if (strcmp(round, "quit") == 0)
            break;
        crd_status st = crd_lock_acquire(l, FIFO_WAIT_MS, FIFO_LEASE_MS);
        int64_t t_acq = crdt_now_ns();
        if (st != CRD_OK) {
            freeReplyObject(redisCommand(r, "INCR %s", s->failures));
            continue;
        }
        if (crdt_reply_int(redisCommand(r, "INCR %s", s->inside)) != 1)
            freeReplyObject(redisCommand(r, "INCR %s", s->violations));
        freeReplyObject(redisCommand(r, "RPUSH %s:order:%s %d", s->prefix, round, a->k));
        crdt_reply_int(redisCommand(r, "DECR %s", s->inside));
        int64_t t_rel = crdt_now_ns();
        if (crd_lock_release(l) != CRD_OK)
            freeReplyObject(redisCommand(r, "INCR %s", s->failures));
        freeReplyObject(redisCommand(r, "RPUSH %s:times:%s %d:%" PRId64 ":%" PRId64, s->prefix,
                                     round, a->k, t_acq, t_rel));
    }
    crd_lock_free(l);
    redisFree(r);
}

static void *agent_thread(void *arg)
{
    agent_loop(arg);
    return NULL;
}

typedef struct fifo_child {
    const fifo_setup *s;
    int proc;
} fifo_child;

/* A child process: one client, one thread per agent k with k % FIFO_PROCS == proc. */
static int fifo_child_main(void *arg)
{
    fifo_child *fc = arg;
    crd_options o;
    crdt_options_plain(&o, fc->s->port);
    crd_client *c = NULL;
    if (crd_client_new(&o, &c) != CRD_OK) {
        crd_client_free(c);
        return 3;
    }
    agent ag[FIFO_WAITERS];
    pthread_t th[FIFO_WAITERS];
    int n = 0;
    for (int k = fc->proc; k < FIFO_WAITERS; k += FIFO_PROCS) {
        ag[n] = (agent){fc->s, c, k};
        if (pthread_create(&th[n], NULL, agent_thread, &ag[n]) != 0)
            return 4;
        n++;
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    crd_client_free(c);
    return 0;
}

static void fifo_setup_init(fifo_setup *s)
{
    memset(s, 0, sizeof *s);
    s->port = crdt_port();
    snprintf(s->lock, sizeof s->lock, "%s", crdt_key("fair"));
    snprintf(s->prefix, sizeof s->prefix, "%s", crdt_key("rounds"));
    snprintf(s->failures, sizeof s->failures, "%s", crdt_key("failures"));
    snprintf(s->inside, sizeof s->inside, "%s", crdt_key("inside"));
    snprintf(s->violations, sizeof s->violations, "%s", crdt_key("violations"));
    for (int k = 0; k < FIFO_WAITERS; k++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "go%d", k);
        snprintf(s->go[k], sizeof s->go[k], "%s", crdt_key(suffix));
        snprintf(suffix, sizeof suffix, "field%d", k);
        snprintf(s->fieldkey[k], sizeof s->fieldkey[k], "%s", crdt_key(suffix));
    }
}

/* r, data (the fifo_setup): every agent has published its queue field. */
static bool all_fields_known(void *arg)
{
    crdt_probe *p = arg;
    const fifo_setup *s = p->data;
    for (int k = 0; k < FIFO_WAITERS; k++)
        if (crdt_cmd_int(p->r, "EXISTS %s", s->fieldkey[k]) == 0)
            return false;
    return true;
}

typedef struct fifo_result {
    int rounds;
    int order_violations; /* positions where the acquisition order differed */
    int64_t *handoff_ns;  /* release -> next acquired, FIFO_WAITERS per round */
    int nhandoff;
} fifo_result;

/* Runs `rounds` rounds: the holder takes the lock, the agents are started one by one in
 * a random order, each only once the previous one is visible in the queue, then the
 * holder releases and the agents must acquire in exactly that order. */
static void fifo_run(const fifo_setup *s, crd_lock *holder, int rounds, unsigned seed,
                     fifo_result *res)
{
    redisContext *r = crdt_redis();
    fair_keys fk;
    fair_keys_of(s->lock, &fk);
    crdt_probe kp = {.r = r, .data = s};
    cr_assert(crdt_wait_until(all_fields_known, &kp, 10000), "the agents never started");
    char fields[FIFO_WAITERS][128];
    for (int k = 0; k < FIFO_WAITERS; k++)
        crdt_cmd_str(r, fields[k], sizeof fields[k], "GET %s", s->fieldkey[k]);

    res->rounds = rounds;
    res->order_violations = 0;
    res->handoff_ns = calloc((size_t)rounds * FIFO_WAITERS, sizeof *res->handoff_ns);
    cr_assert_not_null(res->handoff_ns);
    res->nhandoff = 0;
    for (int round = 0; round < rounds; round++) {
        cr_assert_eq(crd_lock_acquire(holder, 0, FIFO_LEASE_MS), CRD_OK,
                     "round %d: the holder could not take the free lock", round);
        int perm[FIFO_WAITERS];
        for (int i = 0; i < FIFO_WAITERS; i++)
            perm[i] = i;
        for (int i = FIFO_WAITERS - 1; i > 0; i--) {
            int j = rand_r(&seed) % (i + 1);
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int i = 0; i < FIFO_WAITERS; i++) {
            freeReplyObject(crdt_cmd(r, "RPUSH %s %d", s->go[perm[i]], round));
            await_queue(r, fk.queue, i + 1, fields[perm[i]]);
        }
        int64_t t0 = crdt_now_ns();
        cr_assert_eq(crd_lock_release(holder), CRD_OK);

        char times_key[400], order_key[400];
        snprintf(times_key, sizeof times_key, "%s:times:%d", s->prefix, round);
        snprintf(order_key, sizeof order_key, "%s:order:%d", s->prefix, round);
        cr_assert(crdt_await_llen(r, times_key, FIFO_WAITERS, LLONG_MAX, 20000),
                  "round %d: not every waiter acquired and released", round);

        int order[FIFO_WAITERS];
        redisReply *rep = crdt_cmd(r, "LRANGE %s 0 -1", order_key);
        cr_assert_eq(rep->elements, (size_t)FIFO_WAITERS);
        for (int i = 0; i < FIFO_WAITERS; i++) {
            order[i] = atoi(rep->element[i]->str);
            if (order[i] != perm[i])
                res->order_violations++;
        }
        freeReplyObject(rep);

        int64_t acq[FIFO_WAITERS] = {0}, rel[FIFO_WAITERS] = {0};
        rep = crdt_cmd(r, "LRANGE %s 0 -1", times_key);
        for (size_t i = 0; i < rep->elements; i++) {
            int k = 0;
            long long a = 0, b = 0;
            cr_assert_eq(sscanf(rep->element[i]->str, "%d:%lld:%lld", &k, &a, &b), 3);
            acq[k] = a;
            rel[k] = b;
        }
        freeReplyObject(rep);
        int64_t prev = t0;
        for (int i = 0; i < FIFO_WAITERS; i++) {
            res->handoff_ns[res->nhandoff++] = acq[order[i]] - prev;
            prev = rel[order[i]];
        }
        /* Every waiter's entries went with its acquisition; the last release deleted N. */
        cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", fk.queue), 0, "round %d left a queue", round);
        cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", fk.deadlines), 0, "round %d left deadlines",
                     round);
    }
    for (int k = 0; k < FIFO_WAITERS; k++)
        freeReplyObject(crdt_cmd(r, "RPUSH %s quit", s->go[k]));
    redisFree(r);
}

static void report_handoffs(const char *what, fifo_result *res, int64_t *p50, int64_t *p99)
{
    int64_t *v = malloc((size_t)res->nhandoff * sizeof *v);
    cr_assert_not_null(v);
    memcpy(v, res->handoff_ns, (size_t)res->nhandoff * sizeof *v);
    *p50 = percentile(v, res->nhandoff, 50);
    *p99 = percentile(v, res->nhandoff, 99);
    int64_t max = v[res->nhandoff - 1];
    fprintf(stderr,
            "[fair] %s: %d rounds x %d waiters, hand-off release->next acquired "
            "p50 %.2f ms, p99 %.2f ms, max %.2f ms, order violations %d\n",
            what, res->rounds, FIFO_WAITERS, ms_of(*p50), ms_of(*p99), ms_of(max),
            res->order_violations);
    free(v);
}

/* ---------------------------------------------------------------------------------- */
/* Tests                                                                              */
/* ---------------------------------------------------------------------------------- */

Test(fair, waiters_in_three_processes_acquire_in_exactly_the_order_they_queued, .timeout = 120)
{
    fifo_setup s;
    fifo_setup_init(&s);
    /* Fork before this process starts threads of its own (its clients). */
    fifo_child fc[FIFO_PROCS];
    pid_t pids[FIFO_PROCS];
    for (int p = 0; p < FIFO_PROCS; p++) {
        fc[p] = (fifo_child){&s, p};
        pids[p] = crdt_fork(fifo_child_main, &fc[p]);
    }
    crd_client *c = crdt_client();
    crd_lock *holder = fair_lock(c, s.lock);
    fifo_result res;
    fifo_run(&s, holder, crdt_scaled_count(50, 3), 20240501u, &res);
    for (int p = 0; p < FIFO_PROCS; p++)
        cr_assert_eq(crdt_wait_child(pids[p], 30000), 0, "agent process %d failed", p);

    int64_t p50, p99;
    report_handoffs("3 processes", &res, &p50, &p99);
    redisContext *r = crdt_redis();
    cr_assert_eq(res.order_violations, 0, "%d waiters acquired out of queue order",
                 res.order_violations);
    cr_assert_eq(crdt_reply_int(crdt_cmd(r, "GET %s", s.failures)), 0,
                 "acquires or releases failed");
    cr_assert_eq(crdt_reply_int(crdt_cmd(r, "GET %s", s.violations)), 0, "two holders overlapped");
    free(res.handoff_ns);
    crd_lock_free(holder);
    crd_client_free(c);
    assert_fair_clean(r, s.lock);
    redisFree(r);
}

Test(fair, hand_off_to_the_next_of_eight_queued_waiters_is_fast, .timeout = 120)
{
    fifo_setup s;
    fifo_setup_init(&s);
    crd_client *clients[FIFO_WAITERS];
    agent ag[FIFO_WAITERS];
    pthread_t th[FIFO_WAITERS];
    for (int k = 0; k < FIFO_WAITERS; k++) {
        clients[k] = crdt_client();
        ag[k] = (agent){&s, clients[k], k};
        cr_assert_eq(pthread_create(&th[k], NULL, agent_thread, &ag[k]), 0);
    }
    crd_client *c = crdt_client();
    crd_lock *holder = fair_lock(c, s.lock);
    fifo_result res;
    fifo_run(&s, holder, crdt_scaled_count(25, 3), 777u, &res);
    for (int k = 0; k < FIFO_WAITERS; k++) {
        pthread_join(th[k], NULL);
        crd_client_free(clients[k]);
    }
    int64_t p50, p99;
    report_handoffs("8 clients in one process", &res, &p50, &p99);
    redisContext *r = crdt_redis();
    cr_assert_eq(res.order_violations, 0);
    cr_assert_eq(crdt_reply_int(crdt_cmd(r, "GET %s", s.failures)), 0,
                 "acquires or releases failed");
    cr_assert_lt(p99, INT64_C(200000000), "hand-off p99 %.1f ms is not below 200 ms", ms_of(p99));
    free(res.handoff_ns);
    crd_lock_free(holder);
    crd_client_free(c);
    assert_fair_clean(r, s.lock);
    redisFree(r);
}

enum { NP_WAITERS = 4, NP_HOLD_MS = 3000 };

Test(fair, queued_waiters_send_nothing_while_waiting_and_each_release_wakes_only_the_head,
     .timeout = 60)
{
    const char *name = crdt_key("fair");
    fair_keys fk;
    fair_keys_of(name, &fk);
    redisContext *r = crdt_redis();
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s:*", fk.chan_base);
    crdt_watch wt;
    crdt_watch_open(&wt, pattern, true);

    crd_client *hc = crdt_client();
    crd_lock *hl = fair_lock(hc, name);
    int64_t t_hold = crdt_now_ms();
    cr_assert_eq(crd_lock_acquire(hl, 0, 10000), CRD_OK);

    crdt_tracelog *tr[NP_WAITERS];
    crd_client *wc[NP_WAITERS];
    crd_lock *wl[NP_WAITERS];
    crdt_waiter w[NP_WAITERS];
    for (int i = 0; i < NP_WAITERS; i++) {
        tr[i] = crdt_tracelog_new();
        wc[i] = client_with(0, 0, tr[i]);
        wl[i] = fair_lock(wc[i], name);
        w[i] = (crdt_waiter){
            .lock = wl[i], .client = wc[i], .trace = tr[i], .wait_ms = 20000, .lease_ms = 10000};
        crdt_waiter_start(&w[i]);
        await_queue(r, fk.queue, i + 1, w[i].field);
    }
    /* Every waiter has queued, subscribed and re-checked once: from here on it must be
     * asleep until its own channel is published to. */
    size_t snap[NP_WAITERS];
    for (int i = 0; i < NP_WAITERS; i++) {
        int64_t until = crdt_now_ms() + 5000;
        while ((crdt_tracelog_count_scripts(tr[i], w[i].trace_from) < 2 ||
                crdt_tracelog_count_cmd(tr[i], w[i].trace_from, "SUBSCRIBE", 1) < 1) &&
               crdt_now_ms() < until)
            crdt_sleep_ms(2);
        cr_assert_geq(crdt_tracelog_count_scripts(tr[i], w[i].trace_from), 2);
        snap[i] = crdt_tracelog_count(tr[i]);
    }
    /* The hold itself is the behaviour under test: let 3 s pass. */
    int64_t left = t_hold + NP_HOLD_MS - crdt_now_ms();
    if (left > 0)
        crdt_sleep_ms(left);
    for (int i = 0; i < NP_WAITERS; i++) {
        size_t now = crdt_tracelog_count(tr[i]);
        if (now != snap[i])
            crdt_tracelog_dump(tr[i], "waiter that polled");
        cr_assert_eq(now, snap[i], "waiter %d sent %zu commands while queued behind the hold", i,
                     now - snap[i]);
    }
    cr_assert_eq(crd_lock_release(hl), CRD_OK);
    for (int i = 0; i < NP_WAITERS; i++)
        crdt_waiter_join(&w[i], 30000, NULL);

    crdt_msg m[16];
    int nm = crdt_watch_collect(&wt, m, 16);
    crdt_watch_close(&wt);
    /* The holder's release published to W0's channel, W0's to W1's, ... and the last
     * release, with nobody queued, published nothing. */
    cr_assert_eq(nm, NP_WAITERS, "%d wake-up messages for %d releases with someone queued", nm,
                 NP_WAITERS);
    for (int i = 0; i < NP_WAITERS; i++) {
        char want[700];
        snprintf(want, sizeof want, "%s:%s", fk.chan_base, w[i].field);
        cr_assert_str_eq(m[i].channel, want, "release %d woke %s, not the head", i, m[i].channel);
        cr_assert_str_eq(m[i].payload, "0");
    }
    for (int i = 0; i < NP_WAITERS; i++) {
        cr_assert_eq(w[i].acquire_st, CRD_OK);
        cr_assert_eq(w[i].release_st, CRD_OK);
        if (i > 0)
            cr_assert_gt(w[i].t_acq_ns, w[i - 1].t_acq_ns, "waiter %d overtook waiter %d", i,
                         i - 1);
        size_t scripts = crdt_tracelog_count_scripts(tr[i], w[i].trace_from) -
                         crdt_tracelog_count_scripts(tr[i], w[i].trace_to);
        size_t cmds = 0;
        for (size_t e = w[i].trace_from; e < w[i].trace_to; e++) {
            crdt_trace_entry te;
            if (crdt_tracelog_get(tr[i], e, &te)) {
                if (strstr(te.reply, "NOSCRIPT") == NULL)
                    cmds++;
                crdt_trace_entry_free(&te);
            }
        }
        fprintf(stderr,
                "[fair] waiter %d queued %.0f ms at position %d: %zu commands during the "
                "acquire call, %zu of them acquire scripts\n",
                i, ms_of(w[i].t_acq_ns - w[i].t_start_ns), i, cmds, scripts);
        /* enqueue, SUBSCRIBE, re-check, acquire on its wake-up */
        cr_assert_eq(scripts, 3, "waiter %d ran %zu acquire scripts (woken by others' releases?)",
                     i, scripts);
        cr_assert_leq(cmds, 5, "waiter %d sent %zu commands for one queued wait", i, cmds);
    }
    for (int i = 0; i < NP_WAITERS; i++) {
        crd_lock_free(wl[i]);
        crd_client_free(wc[i]);
        crdt_tracelog_free(tr[i]);
    }
    crd_lock_free(hl);
    crd_client_free(hc);
    assert_fair_clean(r, name);
    redisFree(r);
}

/* ---- a waiter killed while queued ----------------------------------------------------- */

enum { KILL_FAIR_WAIT_MS = 1500, KILL_HOLD_LEASE_MS = 2500 };

typedef struct kill_child {
    int port;
    const char *name;
    const char *go;
    const char *fieldkey;
} kill_child;

static int killed_waiter_main(void *arg)
{
    kill_child *k = arg;
    redisContext *r = crdt_raw_connect(k->port, 30000);
    if (r == NULL)
        return 3;
    crd_options o;
    crdt_options_plain(&o, k->port);
    o.fair_wait_timeout_ms = KILL_FAIR_WAIT_MS;
    crd_client *c;
    crd_lock *l;
    int open = crdt_plain_open(&o, k->name, crd_fair_lock_new, &c, &l);
    if (open != 0)
        return 3 + open; /* 4: the client, 5: the fair lock */
    redisReply *g = redisCommand(r, "BLPOP %s 30", k->go);
    freeReplyObject(g);
    char field[128];
    crdt_owner_field(c, crd_owner_current(), field, sizeof field);
    freeReplyObject(redisCommand(r, "SET %s %s", k->fieldkey, field));
    /* Waits without a deadline: it announces fair_wait_timeout_ms to the queue. It is
     * killed before its turn; reaching the lock means the test went wrong. */
    crd_lock_acquire(l, CRD_WAIT_FOREVER, 10000);
    return 7;
}

Test(fair, a_waiter_killed_in_the_queue_holds_the_others_up_at_most_its_wait, .timeout = 60)
{
    const char *name = crdt_key("fair");
    kill_child kc = {crdt_port(), name, crdt_key("go"), crdt_key("field")};
    pid_t dead = crdt_fork(killed_waiter_main, &kc);

    fair_keys fk;
    fair_keys_of(name, &fk);
    redisContext *r = crdt_redis();
    crd_client *hc = crdt_client();
    crd_lock *hl = fair_lock(hc, name);
    int64_t t_sent = crdt_now_ms();
    cr_assert_eq(crd_lock_acquire(hl, 0, KILL_HOLD_LEASE_MS), CRD_OK);
    int64_t t_got = crdt_now_ms();

    freeReplyObject(crdt_cmd(r, "RPUSH %s go", kc.go));
    cr_assert(crdt_await_exists(r, kc.fieldkey, true, 5000), "the doomed waiter never started");
    char dead_field[128];
    crdt_cmd_str(r, dead_field, sizeof dead_field, "GET %s", kc.fieldkey);
    await_queue(r, fk.queue, 1, dead_field);

    /* B and C re-check every 100 ms at most while told "free, but not your turn". */
    crd_client *bc = client_with(KILL_FAIR_WAIT_MS, 100, NULL);
    crd_client *cc = client_with(KILL_FAIR_WAIT_MS, 100, NULL);
    crdt_waiter b, c2;
    b = (crdt_waiter){
        .lock = fair_lock(bc, name), .client = bc, .wait_ms = 10000, .lease_ms = 10000};
    crdt_waiter_start(&b);
    await_queue(r, fk.queue, 2, b.field);
    c2 = (crdt_waiter){
        .lock = fair_lock(cc, name), .client = cc, .wait_ms = 10000, .lease_ms = 10000};
    crdt_waiter_start(&c2);
    await_queue(r, fk.queue, 3, c2.field);

    kill(dead, SIGKILL);
    cr_assert_eq(crdt_wait_child(dead, 5000), 128 + SIGKILL);
    /* The release wakes the dead head; nobody else is told. */
    cr_assert_eq(crd_lock_release(hl), CRD_OK);
    int64_t t_rel = crdt_now_ms();

    crdt_waiter_join(&b, 30000, NULL);
    crdt_waiter_join(&c2, 30000, NULL);
    cr_assert_eq(b.acquire_st, CRD_OK, "B: %s", crd_strerror(b.acquire_st));
    cr_assert_eq(c2.acquire_st, CRD_OK, "C: %s", crd_strerror(c2.acquire_st));
    int64_t b_acq = b.t_acq_ns / 1000000;
    /* The dead waiter's deadline is the holder's expiry plus its announced wait. */
    int64_t expiry_hi = t_got + KILL_HOLD_LEASE_MS;
    int64_t expiry_lo = t_sent + KILL_HOLD_LEASE_MS;
    fprintf(stderr,
            "[fair] dead head: released %" PRId64 " ms after the acquire, B got the lock %" PRId64
            " ms after the holder's expiry (fair_wait_timeout_ms %d), C %.1f ms after B's "
            "release\n",
            t_rel - t_got, b_acq - expiry_hi, KILL_FAIR_WAIT_MS,
            ms_of(c2.t_acq_ns - b.t_rel_ns));
    cr_assert_geq(b_acq, expiry_lo + KILL_FAIR_WAIT_MS - 100,
                  "B got in %" PRId64 " ms after the expiry, before the dead waiter's deadline",
                  b_acq - expiry_lo);
    cr_assert_leq(b_acq, expiry_hi + KILL_FAIR_WAIT_MS + 700,
                  "B waited %" PRId64 " ms after the holder's expiry (wait %d + margin 700)",
                  b_acq - expiry_hi, KILL_FAIR_WAIT_MS);
    cr_assert_lt(c2.t_acq_ns - b.t_rel_ns, INT64_C(300000000),
                 "C was not woken by B's release");
    cr_assert_eq(b.release_st, CRD_OK);
    cr_assert_eq(c2.release_st, CRD_OK);

    crd_lock_free(b.lock);
    crd_lock_free(c2.lock);
    crd_client_free(bc);
    crd_client_free(cc);
    crd_lock_free(hl);
    crd_client_free(hc);
    assert_fair_clean(r, name);
    redisFree(r);
}

Test(fair, timed_out_waiters_leave_the_queue_and_move_those_behind_them_up, .timeout = 60)
{
    const char *name = crdt_key("fair");
    fair_keys fk;
    fair_keys_of(name, &fk);
    redisContext *r = crdt_redis();
    crd_client *hc = crdt_client();
    crd_lock *hl = fair_lock(hc, name);
    cr_assert_eq(crd_lock_acquire(hl, 0, 10000), CRD_OK);

    /* A lone waiter that gives up leaves no queue and no deadlines at all. */
    crd_client *c0 = crdt_client();
    crd_lock *l0 = fair_lock(c0, name);
    int64_t t = crdt_now_ms();
    cr_assert_eq(crd_lock_acquire(l0, 300, 10000), CRD_TIMEOUT);
    int64_t waited = crdt_now_ms() - t;
    cr_assert(waited >= 300 && waited < 800, "the 300 ms wait took %" PRId64 " ms", waited);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", fk.queue), 0);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", fk.deadlines), 0);

    /* W1 (10 s), W2 (300 ms), W3 (10 s) queue in that order; W2 gives up. */
    crd_client *c1 = crdt_client(), *c2 = crdt_client(), *c3 = crdt_client();
    crdt_waiter w1, w2, w3;
    w1 = (crdt_waiter){
        .lock = fair_lock(c1, name), .client = c1, .wait_ms = 10000, .lease_ms = 10000};
    crdt_waiter_start(&w1);
    await_queue(r, fk.queue, 1, w1.field);
    w2 =
        (crdt_waiter){.lock = fair_lock(c2, name), .client = c2, .wait_ms = 300, .lease_ms = 10000};
    crdt_waiter_start(&w2);
    await_queue(r, fk.queue, 2, w2.field);
    w3 = (crdt_waiter){
        .lock = fair_lock(c3, name), .client = c3, .wait_ms = 10000, .lease_ms = 10000};
    crdt_waiter_start(&w3);
    /* W3 may join after W2 already left on a slow machine: only W3's position counts. */
    char q[8][128];
    int64_t until = crdt_now_ms() + 5000;
    int n = 0;
    bool seen = false;
    while (!seen && crdt_now_ms() < until) {
        n = queue_fields(r, fk.queue, q, 8);
        seen = n >= 2 && strcmp(q[n - 1], w3.field) == 0;
        if (!seen)
            crdt_sleep_ms(2);
    }
    cr_assert(seen, "W3 never queued");
    /* Deadline arithmetic (PROTOCOL.md 8.3): each deadline is the previous one plus the
     * waiter's own wait. Read atomically with W2 still there if it is. */
    double s1 = zscore(r, fk.deadlines, w1.field);
    double s2 = zscore(r, fk.deadlines, w2.field);
    double s3_before = zscore(r, fk.deadlines, w3.field);
    bool w2_was_there = s2 > 0 && n == 3;
    if (w2_was_there) {
        cr_assert_eq((long long)(s2 - s1), 300, "W2's deadline is W1's + %lld", (long long)(s2 - s1));
        cr_assert_eq((long long)(s3_before - s2), 10000);
    }

    cr_assert(crdt_waiter_wait(&w2, CRDT_WAITER_RETURNED, 5000), "W2 never gave up");
    cr_assert_eq(w2.acquire_st, CRD_TIMEOUT, "W2: %s", crd_strerror(w2.acquire_st));
    int64_t w2_waited = (w2.t_acq_ns - w2.t_start_ns) / 1000000;
    cr_assert(w2_waited >= 300 && w2_waited < 800, "W2's 300 ms wait took %" PRId64 " ms",
              w2_waited);
    crdt_waiter_join(&w2, 30000, NULL);

    n = queue_fields(r, fk.queue, q, 8);
    cr_assert_eq(n, 2, "the queue has %d entries after W2 left", n);
    cr_assert_str_eq(q[0], w1.field);
    cr_assert_str_eq(q[1], w3.field);
    cr_assert_lt(zscore(r, fk.deadlines, w2.field), 0.0, "W2's deadline is still there");
    double s1_after = zscore(r, fk.deadlines, w1.field);
    double s3_after = zscore(r, fk.deadlines, w3.field);
    fprintf(stderr,
            "[fair] W2 gave up after %" PRId64 " ms; W1's deadline moved by %.0f ms, W3's by "
            "%.0f ms%s\n",
            w2_waited, s1_after - s1, w2_was_there ? s3_after - s3_before : 0.0,
            w2_was_there ? "" : " (W3 joined after W2 had left)");
    cr_assert_eq((long long)(s1_after - s1), 0, "the waiter ahead of W2 was moved");
    cr_assert_eq((long long)(s3_after - s1_after), 10000,
                 "W3's deadline is not W1's plus its own wait");
    if (w2_was_there)
        cr_assert_eq((long long)(s3_before - s3_after), 300,
                     "W3's deadline went down by %lld, not by W2's wait",
                     (long long)(s3_before - s3_after));

    cr_assert_eq(crd_lock_release(hl), CRD_OK);
    crdt_waiter_join(&w1, 30000, NULL);
    crdt_waiter_join(&w3, 30000, NULL);
    cr_assert_eq(w1.acquire_st, CRD_OK);
    cr_assert_eq(w3.acquire_st, CRD_OK);
    cr_assert_lt(w1.t_acq_ns, w3.t_acq_ns, "W3 overtook W1");

    crd_lock_free(w1.lock);
    crd_lock_free(w2.lock);
    crd_lock_free(w3.lock);
    crd_client_free(c0);
    crd_client_free(c1);
    crd_client_free(c2);
    crd_client_free(c3);
    crd_lock_free(hl);
    crd_lock_free(l0);
    crd_client_free(hc);
    assert_fair_clean(r, name);
    redisFree(r);
}

Test(fair, a_queued_head_gets_the_lock_when_the_holders_lease_runs_out_unreleased)
{
    const char *name = crdt_key("fair");
    fair_keys fk;
    fair_keys_of(name, &fk);
    redisContext *r = crdt_redis();
    crd_client *hc = crdt_client(), *wc = crdt_client();
    crd_lock *hl = fair_lock(hc, name);
    int64_t t_sent = crdt_now_ms();
    cr_assert_eq(crd_lock_acquire(hl, 0, 500), CRD_OK);
    crdt_waiter w = {.lock = fair_lock(wc, name), .client = wc, .wait_ms = 5000, .lease_ms = 10000};
    crdt_waiter_start(&w);
    /* An expiry publishes nothing: the head's wait slice is the holder's PTTL. */
    crdt_waiter_join(&w, 30000, NULL);
    cr_assert_eq(w.acquire_st, CRD_OK, "waiter: %s", crd_strerror(w.acquire_st));
    int64_t after = w.t_acq_ns / 1000000 - (t_sent + 500);
    fprintf(stderr, "[fair] lease expiry -> head acquired %" PRId64 " ms after the expiry\n", after);
    cr_assert_geq(after, -5, "the head got in before the holder's lease ended");
    cr_assert_lt(after, 150, "the head noticed the expiry %" PRId64 " ms late", after);
    cr_assert_eq(w.release_st, CRD_OK);
    cr_assert_eq(crd_lock_release(hl), CRD_LOCK_LOST);

    crd_lock_free(w.lock);
    crd_lock_free(hl);
    crd_client_free(hc);
    crd_client_free(wc);
    assert_fair_clean(r, name);
    redisFree(r);
}

Test(fair, try_once_never_joins_the_queue)
{
    crdt_fixture f;
    fair_keys fk;
    fair_fixture_open(&f, &fk);
    crd_client *wc = crdt_client();

    cr_assert_eq(crd_lock_acquire(f.la, 0, 10000), CRD_OK);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(crd_lock_acquire(f.lb, 0, 10000), CRD_BUSY);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", fk.queue), 0, "a try-once joined the queue");
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", fk.deadlines), 0);

    /* With a real waiter queued, a try-once leaves the queue as it is. */
    crdt_waiter w = {
        .lock = fair_lock(wc, f.key), .client = wc, .wait_ms = 10000, .lease_ms = 10000};
    crdt_waiter_start(&w);
    await_queue(f.r, fk.queue, 1, w.field);
    double before = zscore(f.r, fk.deadlines, w.field);
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 10000), CRD_BUSY);
    char q[4][128];
    cr_assert_eq(queue_fields(f.r, fk.queue, q, 4), 1);
    cr_assert_str_eq(q[0], w.field);
    cr_assert_eq(zscore(f.r, fk.deadlines, w.field), before, "a try-once moved a deadline");
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    crdt_waiter_join(&w, 30000, NULL);
    cr_assert_eq(w.acquire_st, CRD_OK);

    /* Free, but someone else's turn: a try-once is refused and does not queue. */
    freeReplyObject(crdt_cmd(f.r, "RPUSH %s someone-else", fk.queue));
    freeReplyObject(crdt_cmd(f.r, "ZADD %s %lld someone-else", fk.deadlines,
                             (long long)time(NULL) * 1000 + 60000));
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 10000), CRD_BUSY);
    cr_assert_eq(queue_fields(f.r, fk.queue, q, 4), 1);
    cr_assert_str_eq(q[0], "someone-else");
    freeReplyObject(crdt_cmd(f.r, "DEL %s %s", fk.queue, fk.deadlines));
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 10000), CRD_OK, "a free lock with no queue was refused");
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", fk.queue), 0);
    cr_assert_eq(crd_lock_release(f.lb), CRD_OK);

    crd_lock_free(w.lock);
    crd_client_free(wc);
    crdt_fixture_close_checked(&f, assert_fair_clean);
}

Test(fair, reentrancy_two_deep_never_creates_queue_or_deadline_keys)
{
    crdt_fixture f;
    fair_keys fk;
    fair_fixture_open(&f, &fk);
    char field[128];
    crdt_owner_field(f.a, crd_owner_current(), field, sizeof field);

    /* Both forms: the waiting form (wait > 0) and try-once. */
    cr_assert_eq(crd_lock_acquire(f.la, 5000, 10000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f.la, 5000, 10000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f.la, 0, 10000), CRD_OK);
    int64_t count = 0;
    cr_assert_eq(crd_lock_hold_count(f.la, &count), CRD_OK);
    cr_assert_eq(count, 3);
    cr_assert_eq(crdt_reply_int(crdt_cmd(f.r, "HGET %s %s", f.key, field)), 3);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", fk.queue), 0, "re-entry queued the holder");
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", fk.deadlines), 0);
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 10000), CRD_BUSY);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", fk.queue), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(crd_lock_release(f.la), CRD_OK, "release %d", i);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);

    crdt_fixture_close_checked(&f, assert_fair_clean);
}

Test(fair, force_unlock_wakes_the_head_and_the_old_holder_then_sees_lock_lost)
{
    crdt_fixture f;
    fair_keys fk;
    fair_fixture_open(&f, &fk);
    crd_client *wc = crdt_client();

    /* Part 1: a queued waiter is woken by the force-unlock, long before the 30 s lease. */
    cr_assert_eq(crd_lock_acquire(f.la, 0, 30000), CRD_OK);
    crdt_gate release_w;
    crdt_gate_init(&release_w);
    crdt_waiter w = {.lock = fair_lock(wc, f.key),
                     .client = wc,
                     .wait_ms = 10000,
                     .lease_ms = 10000,
                     .release_gate = &release_w};
    crdt_waiter_start(&w);
    await_queue(f.r, fk.queue, 1, w.field);
    char chan[700];
    snprintf(chan, sizeof chan, "%s:%s", fk.chan_base, w.field);
    int64_t until = crdt_now_ms() + 5000;
    while (crdt_now_ms() < until) {
        redisReply *rep = crdt_cmd(f.r, "PUBSUB NUMSUB %s", chan);
        long long subs = rep->element[1]->integer;
        freeReplyObject(rep);
        if (subs == 1)
            break;
        crdt_sleep_ms(2);
    }
    bool was = false;
    int64_t t_force = crdt_now_ns();
    cr_assert_eq(crd_lock_force_unlock(f.lb, &was), CRD_OK);
    cr_assert(was);
    cr_assert(crdt_waiter_wait(&w, CRDT_WAITER_RETURNED, 5000),
              "the head was not woken by the force-unlock");
    cr_assert_eq(w.acquire_st, CRD_OK);
    fprintf(stderr, "[fair] force-unlock -> head acquired in %.2f ms\n",
            ms_of(w.t_acq_ns - t_force));
    cr_assert_lt(w.t_acq_ns - t_force, INT64_C(500000000));
    /* The old holder: its field is gone while W holds. */
    cr_assert_eq(crd_lock_release(f.la), CRD_LOCK_LOST);
    crdt_gate_set(&release_w, 1);
    crdt_waiter_join(&w, 30000, NULL);
    cr_assert_eq(w.release_st, CRD_OK);
    crdt_gate_destroy(&release_w);

    /* Part 2: nobody queued; the hash is simply gone (Redisson would report success). */
    cr_assert_eq(crd_lock_acquire(f.la, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_force_unlock(f.lb, &was), CRD_OK);
    cr_assert(was);
    cr_assert_eq(crd_lock_release(f.la), CRD_LOCK_LOST);
    cr_assert_eq(crd_lock_force_unlock(f.lb, &was), CRD_OK);
    cr_assert_not(was);

    crd_lock_free(w.lock);
    crd_client_free(wc);
    crdt_fixture_close_checked(&f, assert_fair_clean);
}

Test(fair, a_release_by_an_owner_that_holds_nothing_reports_not_owner)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 2, "fair", fair_lock);

    /* Held by another client: the script finds no field of ours. */
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 10000), CRD_OK);
    crd_status st = crd_lock_release(f.la);
    cr_assert_eq(st, CRD_NOT_OWNER, "release of someone else's fair lock: %s", crd_strerror(st));
    cr_assert_eq(crd_lock_release(f.lb), CRD_OK);
    /* Not held at all, by anyone: this owner never held it, so nothing was lost. */
    st = crd_lock_release(f.la);
    cr_expect_eq(st, CRD_NOT_OWNER, "release of a free fair lock never held: %s (%s)",
                 crd_strerror(st), crd_client_errmsg(f.a));
    /* The same after a hold of ours that ended normally. */
    cr_assert_eq(crd_lock_acquire(f.la, 0, 10000), CRD_OK);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    st = crd_lock_release(f.la);
    cr_expect_eq(st, CRD_NOT_OWNER, "second release after a normal release: %s", crd_strerror(st));

    crdt_fixture_close_checked(&f, assert_fair_clean);
}

Test(fair, a_queued_waiter_whose_client_is_freed_returns_closed_and_leaves_the_queue)
{
    const char *name = crdt_key("fair");
    fair_keys fk;
    fair_keys_of(name, &fk);
    redisContext *r = crdt_redis();
    crd_client *hc = crdt_client(), *wc = crdt_client(), *bc = crdt_client();
    crd_lock *hl = fair_lock(hc, name);
    cr_assert_eq(crd_lock_acquire(hl, 0, 30000), CRD_OK);
    crdt_waiter w, b;
    w = (crdt_waiter){
        .lock = fair_lock(wc, name), .client = wc, .wait_ms = CRD_WAIT_FOREVER, .lease_ms = 10000};
    crdt_waiter_start(&w);
    await_queue(r, fk.queue, 1, w.field);
    b = (crdt_waiter){
        .lock = fair_lock(bc, name), .client = bc, .wait_ms = 10000, .lease_ms = 10000};
    crdt_waiter_start(&b);
    await_queue(r, fk.queue, 2, b.field);
    double b_before = zscore(r, fk.deadlines, b.field);

    /* Shutting the client down wakes its blocked waiter with CRD_CLOSED; the waiter
     * must take itself out of the queue, or everyone behind it stalls until its deadline
     * (fair_wait_timeout_ms, 300 s by default). Freed once w sleeps: before that it is
     * inside a round trip, not blocked (crd_client_free's contract). */
    cr_assert(crdt_await_waiting(wc, 1, 5000), "the waiter never went to sleep");
    crd_client_free(wc);
    cr_assert(crdt_waiter_wait(&w, CRDT_WAITER_RETURNED, 5000),
              "the waiter did not return on client shutdown");
    cr_assert_eq(w.acquire_st, CRD_CLOSED, "waiter: %s", crd_strerror(w.acquire_st));
    char q[4][128];
    int n = queue_fields(r, fk.queue, q, 4);
    cr_expect_eq(n, 1, "the closed client's waiter is still queued (%d entries)", n);
    cr_expect_lt(zscore(r, fk.deadlines, w.field), 0.0, "its deadline is still there");
    double b_after = zscore(r, fk.deadlines, b.field);
    cr_expect_eq((long long)(b_before - b_after), 300000,
                 "the waiter behind moved up by %lld ms, not by the leaver's 300 s wait",
                 (long long)(b_before - b_after));
    cr_assert_eq(crd_lock_release(hl), CRD_OK);
    crdt_waiter_join(&b, 30000, NULL);
    cr_assert_eq(b.acquire_st, CRD_OK, "the next waiter: %s", crd_strerror(b.acquire_st));
    crdt_waiter_join(&w, 30000, NULL);

    crd_lock_free(w.lock);
    crd_lock_free(b.lock);
    crd_lock_free(hl);
    crd_client_free(hc);
    crd_client_free(bc);
    assert_fair_clean(r, name);
    redisFree(r);
}

/* ---- mutual exclusion ------------------------------------------------------------------ */

Test(fair, threads_and_processes_never_hold_the_fair_lock_together, .timeout = 120)
{
    /* 8 threads of this process and 4 processes, half of them renewing through the
     * watchdog: support/exclusion.h's checker, as test_exclusion runs it on a plain lock. */
    crdt_ex x = {.tag = "fair", .kind = CRDT_EX_FAIR_LOCK, .suffix = "fair",
                 .check = assert_fair_clean, .threads = 8, .procs = 4,
                 .lease_ms = CRDT_EX_HALF_WATCHDOG, .total = crdt_scaled_count(3000, 12),
                 .deadline_ms = 100000};
    crdt_ex_run(&x);
    crdt_ex_assert(&x);
}

Test(fair, the_watchdog_keeps_a_fair_hold_alive_past_three_timeouts, .timeout = 60)
{
    const char *name = crdt_key("fair");
    redisContext *r = crdt_redis();
    crd_options o;
    crdt_options(&o);
    o.watchdog_timeout_ms = 1500;
    crd_client *c = crdt_client_opts(&o);
    crd_client *other = crdt_client();
    crd_lock *l = fair_lock(c, name), *ol = fair_lock(other, name);

    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    int64_t start = crdt_now_ms();
    int tries = 0;
    long long min_ttl = 1 << 30;
    /* The renewal period passing is the behaviour under test: sample it. */
    while (crdt_now_ms() - start < 4500) {
        cr_assert_eq(crd_lock_acquire(ol, 0, 10000), CRD_BUSY,
                     "another client got the lock %" PRId64 " ms into the hold",
                     crdt_now_ms() - start);
        long long t = crdt_cmd_int(r, "PTTL %s", name);
        cr_assert(t > 0 && t <= 1500, "PTTL %lld at %" PRId64 " ms", t, crdt_now_ms() - start);
        if (t < min_ttl)
            min_ttl = t;
        tries++;
        crdt_sleep_ms(50);
    }
    fprintf(stderr, "[fair] watchdog: %d refused tries over 4.5 s, lowest PTTL seen %lld ms\n",
            tries, min_ttl);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_assert_eq(crd_lock_acquire(ol, 0, 10000), CRD_OK);
    cr_assert_eq(crd_lock_release(ol), CRD_OK);

    crd_lock_free(l);
    crd_lock_free(ol);
    crd_client_free(c);
    crd_client_free(other);
    assert_fair_clean(r, name);
    redisFree(r);
}
