/*
 * test_rwlock.c -- the read-write lock (issue #5) against a real redis-server.
 *
 * What it checks: many readers at once and one writer excluding them all; who wakes whom
 * (the last read release wakes a writer, a write release wakes readers, one "1" wakes
 * every local reader thread); waiters that time out leave nothing behind; downgrade
 * (write, then read, then release the write) and the refused upgrade; the per-hold
 * timeout keys and the hash TTL that follows the longest of them; watchdog-renewed read
 * holds, once and twice per owner, surviving other readers' releases; an exclusion
 * checker with readers and writers in several processes; force-unlock per mode.
 *
 * Keys (PROTOCOL.md 7): the hash N (field "mode", one field "<uuid>:<id>" per reader with
 * its hold count, one "<uuid>:<id>:write" for the writer), one key
 * {N}:<uuid>:<id>:rwlock_timeout:<i> per read hold i, and the channel
 * redisson_rwlock:{N} shared by readers and writers ("0" from read releases, "1" from
 * write releases). Every test ends with the lock, its timeout keys and its channel gone.
 *
 * Waiting on other threads is done on events with deadlines (a gate, a trace entry);
 * sleeps appear only where time passing is the behaviour under test (watchdog periods).
 *
 * CRDT_TIME_SCALE (harness.h) shrinks the exclusion checker for slow or quick runs.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exclusion.h"
#include "harness.h"
#include "waiters.h"

/* ---------------------------------------------------------------------------------- */
/* Helpers                                                                            */
/* ---------------------------------------------------------------------------------- */

static double ms_of(int64_t ns) { return (double)ns / 1e6; }

/* The timeout key of read hold i of a field: {N}:<field>:rwlock_timeout:<i>. */
static void tkey_of(const char *name, const char *field, int i, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "{%s}:%s:rwlock_timeout:%d", name, field, i);
    cr_assert(n > 0 && (size_t)n < cap, "timeout key does not fit in %zu bytes", cap);
}

static void chan_of(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "redisson_rwlock:{%s}", name);
}

static void hget_str(redisContext *r, const char *key, const char *field, char *buf, size_t cap)
{
    crdt_cmd_str(r, buf, cap, "HGET %s %s", key, field);
}

/* PTTLs of several keys read in one MULTI, so they are comparable to the millisecond. */
static void pttls(redisContext *r, int n, const char *const *keys, long long *out)
{
    freeReplyObject(crdt_cmd(r, "MULTI"));
    for (int i = 0; i < n; i++)
        freeReplyObject(crdt_cmd(r, "PTTL %s", keys[i]));
    redisReply *rep = crdt_cmd(r, "EXEC");
    cr_assert_eq(rep->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(rep->elements, (size_t)n);
    for (int i = 0; i < n; i++)
        out[i] = rep->element[i]->integer;
    freeReplyObject(rep);
}

/* The end-of-test check: no hash, no timeout key, no subscribed channel of the test. */
static void assert_rw_clean(redisContext *r, const char *name)
{
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", name), 0, "the lock %s is still held", name);
    char pattern[600];
    snprintf(pattern, sizeof pattern, "{%s}:*", name);
    cr_assert_eq(crdt_count_keys(r, pattern), 0, "timeout keys of %s left behind", name);
    snprintf(pattern, sizeof pattern, "*%s*", crdt_key_prefix());
    cr_assert(crdt_pubsub_channels_empty(pattern), "channels of the test are still subscribed");
}

static void opts_traced(crd_options *o, crdt_tracelog *t, int64_t watchdog_ms)
{
    crdt_options(o);
    if (t != NULL)
        crdt_tracelog_attach(t, o);
    if (watchdog_ms > 0)
        o->watchdog_timeout_ms = watchdog_ms;
}

static crd_client *client_traced(crdt_tracelog *t, int64_t watchdog_ms)
{
    crd_options o;
    opts_traced(&o, t, watchdog_ms);
    return crdt_client_opts(&o);
}

static crd_rwlock *rwlock(crd_client *c, const char *name)
{
    crd_rwlock *rw = NULL;
    cr_assert_eq(crd_rwlock_new(c, name, &rw), CRD_OK);
    return rw;
}

/* Waits until a traced client has run at_least scripts since `from`: a waiter that ran
 * its acquire, subscribed and re-checked (2 scripts) is asleep on the channel. */
static void await_scripts(crdt_tracelog *t, size_t from, size_t at_least)
{
    cr_assert(crdt_await_traced(t, from, NULL, 0, at_least, 5000), "the waiter never settled (%zu scripts)",
              crdt_tracelog_count_scripts(t, from));
}

/* ---------------------------------------------------------------------------------- */
/* Tests                                                                              */
/* ---------------------------------------------------------------------------------- */

enum { READERS = 4 };

Test(rwlock, many_readers_hold_at_once_and_a_writer_excludes_them_all)
{
    /* The fixture's client and read-write lock are the writer's. */
    crdt_fixture f;
    crdt_fixture_open_rw(&f, 1, "rw", NULL, NULL);
    const char *name = f.key;
    redisContext *r = f.r;
    crd_client *rc[READERS];
    crd_rwlock *rrw[READERS];
    char fields[READERS][128];
    for (int i = 0; i < READERS; i++) {
        rc[i] = crdt_client();
        rrw[i] = rwlock(rc[i], name);
        crdt_owner_field(rc[i], crd_owner_current(), fields[i], sizeof fields[i]);
    }
    crd_lock *wl = crd_rwlock_write(f.rwa);

    for (int i = 0; i < READERS; i++)
        cr_assert_eq(crd_lock_acquire(crd_rwlock_read(rrw[i]), 0, 30000), CRD_OK,
                     "reader %d was refused while only readers hold", i);
    char mode[16];
    hget_str(r, name, "mode", mode, sizeof mode);
    cr_assert_str_eq(mode, "read");
    cr_assert_eq(crdt_cmd_int(r, "HLEN %s", name), 1 + READERS);
    for (int i = 0; i < READERS; i++) {
        char tk[400];
        tkey_of(name, fields[i], 1, tk, sizeof tk);
        cr_assert_eq(crdt_hget_int(r, name, fields[i]), 1);
        cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", tk), 1, "no timeout key %s", tk);
    }
    bool locked = false;
    cr_assert_eq(crd_lock_is_locked(crd_rwlock_read(rrw[0]), &locked), CRD_OK);
    cr_assert(locked);
    cr_assert_eq(crd_lock_is_locked(wl, &locked), CRD_OK);
    cr_assert_not(locked);

    /* The writer is refused while any reader is left. */
    for (int i = 0; i < READERS; i++) {
        cr_assert_eq(crd_lock_acquire(wl, 0, 30000), CRD_BUSY,
                     "the writer got in with %d readers holding", READERS - i);
        cr_assert_eq(crd_lock_release(crd_rwlock_read(rrw[i])), CRD_OK);
    }
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", name), 0, "the last read release left the hash");
    cr_assert_eq(crd_lock_acquire(wl, 0, 30000), CRD_OK);

    /* While the writer holds, every reader and every other writer is refused. */
    for (int i = 0; i < READERS; i++) {
        cr_assert_eq(crd_lock_acquire(crd_rwlock_read(rrw[i]), 0, 30000), CRD_BUSY);
        cr_assert_eq(crd_lock_acquire(crd_rwlock_write(rrw[i]), 0, 30000), CRD_BUSY);
    }
    cr_assert_eq(crd_lock_is_locked(wl, &locked), CRD_OK);
    cr_assert(locked);
    cr_assert_eq(crd_lock_is_locked(crd_rwlock_read(rrw[0]), &locked), CRD_OK);
    cr_assert_not(locked, "read lock reported locked with only a writer");
    cr_assert_eq(crd_lock_release(wl), CRD_OK);

    for (int i = 0; i < READERS; i++) {
        crd_rwlock_free(rrw[i]);
        crd_client_free(rc[i]);
    }
    crdt_fixture_close_checked(&f, assert_rw_clean);
}

enum { WAKE_ROUNDS = 5 };
#define WAKE_BOUND_NS INT64_C(250000000) /* far below the 30 s leases */

static void print_latencies(const char *what, const int64_t *ns, int n)
{
    int64_t min = ns[0], max = ns[0], sum = 0;
    for (int i = 0; i < n; i++) {
        if (ns[i] < min)
            min = ns[i];
        if (ns[i] > max)
            max = ns[i];
        sum += ns[i];
    }
    fprintf(stderr, "[rwlock] %s: %d rounds, min %.2f ms, mean %.2f ms, max %.2f ms\n", what, n,
            ms_of(min), ms_of(sum / n), ms_of(max));
}

/* The names a test checks for one client's holds on a fixture's key: the channel, the
 * client's owner field, its ":write" form and its first read hold's timeout key. */
typedef struct rw_names {
    char chan[400], field[128], write[160], tk[400];
} rw_names;

static void rw_names_of(const crdt_fixture *f, crd_client *c, rw_names *n)
{
    chan_of(f->key, n->chan, sizeof n->chan);
    crdt_owner_field(c, crd_owner_current(), n->field, sizeof n->field);
    snprintf(n->write, sizeof n->write, "%s:write", n->field);
    tkey_of(f->key, n->field, 1, n->tk, sizeof n->tk);
}

/* A two-client read-write fixture whose b is traced; returns b's recorder (free it after
 * closing the fixture). */
static crdt_tracelog *traced_fixture_open(crdt_fixture *f)
{
    crdt_tracelog *t = crdt_tracelog_new();
    crd_options o;
    opts_traced(&o, t, 0);
    crdt_fixture_open_rw(f, 2, "rw", NULL, &o);
    return t;
}

/* Joins a wake-up round's waiter w (traced by t; who names it) and checks it acquired and
 * released, after since_ns (crdt_now_ns() just before the release that woke it) and within
 * WAKE_BOUND_NS of it ("woken ... after the <by>"), with 3 acquire scripts: the first
 * try, the re-check once subscribed, the try its wake-up started. Returns its wake-up
 * latency. */
static int64_t round_woken(crdt_tracelog *t, crdt_waiter *w, int round, const char *who,
                           int64_t since_ns, const char *by)
{
    crdt_waiter_join(w, 30000, NULL);
    cr_assert_eq(w->acquire_st, CRD_OK, "%s: %s", who, crd_strerror(w->acquire_st));
    cr_assert_eq(w->release_st, CRD_OK);
    cr_assert_gt(w->t_acq_ns, since_ns);
    int64_t lat = w->t_acq_ns - since_ns;
    size_t scripts =
        crdt_tracelog_count_scripts(t, w->trace_from) - crdt_tracelog_count_scripts(t, w->trace_to);
    cr_assert_eq(scripts, 3, "round %d: the %s ran %zu acquire scripts", round, who, scripts);
    cr_assert_lt(lat, WAKE_BOUND_NS, "round %d: woken %.1f ms after the %s", round, ms_of(lat), by);
    return lat;
}

Test(rwlock, a_writer_waiting_behind_readers_is_woken_by_the_last_read_release, .timeout = 60)
{
    const char *name = crdt_key("rw");
    redisContext *r = crdt_redis();
    crd_client *rc[3];
    crd_rwlock *rrw[3];
    for (int i = 0; i < 3; i++) {
        rc[i] = crdt_client();
        rrw[i] = rwlock(rc[i], name);
    }
    crdt_tracelog *t = crdt_tracelog_new();
    crd_client *wc = client_traced(t, 0);
    crd_rwlock *wrw = rwlock(wc, name);
    int64_t lat[WAKE_ROUNDS];
    for (int round = 0; round < WAKE_ROUNDS; round++) {
        for (int i = 0; i < 3; i++)
            cr_assert_eq(crd_lock_acquire(crd_rwlock_read(rrw[i]), 0, 30000), CRD_OK);
        crdt_waiter w = {.lock = crd_rwlock_write(wrw),
                         .client = wc,
                         .trace = t,
                         .wait_ms = 10000,
                         .lease_ms = 30000};
        crdt_waiter_start(&w);
        await_scripts(t, w.trace_from, 2);
        /* Releases that leave readers behind publish nothing and wake nobody. */
        for (int i = 0; i < 2; i++) {
            cr_assert_eq(crd_lock_release(crd_rwlock_read(rrw[i])), CRD_OK);
            cr_assert_lt(crdt_gate_value(&w.state), CRDT_WAITER_RETURNED,
                         "the writer got in with readers left");
        }
        int64_t t_last = crdt_now_ns();
        cr_assert_eq(crd_lock_release(crd_rwlock_read(rrw[2])), CRD_OK);
        lat[round] = round_woken(t, &w, round, "writer", t_last, "last release");
    }
    print_latencies("last read release -> waiting writer acquired", lat, WAKE_ROUNDS);
    for (int i = 0; i < 3; i++) {
        crd_rwlock_free(rrw[i]);
        crd_client_free(rc[i]);
    }
    crd_rwlock_free(wrw);
    crd_client_free(wc);
    crdt_tracelog_free(t);
    assert_rw_clean(r, name);
    redisFree(r);
}

Test(rwlock, a_reader_waiting_behind_a_writer_is_woken_by_the_write_release, .timeout = 60)
{
    crdt_fixture f;
    crdt_tracelog *t = traced_fixture_open(&f);
    int64_t lat[WAKE_ROUNDS];
    for (int round = 0; round < WAKE_ROUNDS; round++) {
        cr_assert_eq(crd_lock_acquire(crd_rwlock_write(f.rwa), 0, 30000), CRD_OK);
        crdt_waiter w = {.lock = crd_rwlock_read(f.rwb),
                         .client = f.b,
                         .trace = t,
                         .wait_ms = 10000,
                         .lease_ms = 30000};
        crdt_waiter_start(&w);
        await_scripts(t, w.trace_from, 2);
        int64_t t_rel = crdt_now_ns();
        cr_assert_eq(crd_lock_release(crd_rwlock_write(f.rwa)), CRD_OK);
        lat[round] = round_woken(t, &w, round, "reader", t_rel, "write release");
    }
    print_latencies("write release -> waiting reader acquired", lat, WAKE_ROUNDS);
    crdt_fixture_close_checked(&f, assert_rw_clean);
    crdt_tracelog_free(t);
}

Test(rwlock, two_reader_threads_of_one_client_both_wake_on_one_write_release, .timeout = 60)
{
    crdt_fixture f;
    crdt_tracelog *t = traced_fixture_open(&f);
    char chan[400];
    chan_of(f.key, chan, sizeof chan);
    crdt_watch wt;
    crdt_watch_open(&wt, chan, false);

    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(f.rwa), 0, 30000), CRD_OK);
    crdt_gate hold;
    crdt_gate_init(&hold);
    size_t from = crdt_tracelog_count(t);
    /* Two reader threads of b, each releasing once hold opens. */
    crdt_waiter a, b;
    crdt_waiter *readers[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        *readers[i] = (crdt_waiter){.lock = crd_rwlock_read(f.rwb),
                                    .client = f.b,
                                    .trace = t,
                                    .wait_ms = 10000,
                                    .lease_ms = 30000,
                                    .release_gate = &hold};
        crdt_waiter_start(readers[i]);
    }
    await_scripts(t, from, 4);
    cr_assert_eq(crdt_tracelog_count_cmd(t, from, "SUBSCRIBE", 1), 1,
                 "the two local waiters did not share one subscription");
    int64_t t_rel = crdt_now_ns();
    cr_assert_eq(crd_lock_release(crd_rwlock_write(f.rwa)), CRD_OK);
    cr_assert(crdt_waiter_wait(&a, CRDT_WAITER_RETURNED, 5000) &&
                  crdt_waiter_wait(&b, CRDT_WAITER_RETURNED, 5000),
              "not both readers woke up");
    cr_assert_eq(a.acquire_st, CRD_OK);
    cr_assert_eq(b.acquire_st, CRD_OK);
    size_t scripts = crdt_tracelog_count_scripts(t, from);
    crdt_msg m[8];
    int nm = crdt_watch_collect(&wt, m, 8);
    fprintf(stderr,
            "[rwlock] one write release woke both local readers: %.2f ms and %.2f ms, %zu "
            "acquire scripts in all, %d message(s)\n",
            ms_of(a.t_acq_ns - t_rel), ms_of(b.t_acq_ns - t_rel), scripts, nm);
    cr_assert_eq(nm, 1, "%d messages for one write release", nm);
    cr_assert_str_eq(m[0].payload, "1");
    cr_assert_eq(scripts, 6, "%zu acquire scripts for two waits (expected 3 each)", scripts);
    cr_assert_lt(a.t_acq_ns - t_rel, WAKE_BOUND_NS);
    cr_assert_lt(b.t_acq_ns - t_rel, WAKE_BOUND_NS);
    cr_assert_eq(crdt_hget_int(f.r, f.key, a.field), 1);
    cr_assert_eq(crdt_hget_int(f.r, f.key, b.field), 1);

    crdt_gate_set(&hold, 1);
    crdt_waiter_join(&a, 30000, NULL);
    crdt_waiter_join(&b, 30000, NULL);
    cr_assert_eq(a.release_st, CRD_OK);
    cr_assert_eq(b.release_st, CRD_OK);
    crdt_gate_destroy(&hold);
    crdt_watch_close(&wt);
    crdt_fixture_close_checked(&f, assert_rw_clean);
    crdt_tracelog_free(t);
}

Test(rwlock, a_waiter_that_times_out_leaves_nothing_behind)
{
    crdt_fixture f;
    crdt_fixture_open_rw(&f, 2, "rw", NULL, NULL);
    rw_names n;
    rw_names_of(&f, f.b, &n);

    /* A reader behind a writer. */
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(f.rwa), 0, 30000), CRD_OK);
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(f.rwb), 300, 30000), CRD_TIMEOUT);
    int64_t waited = crdt_now_ms() - t0;
    cr_assert(waited >= 300 && waited < 800, "a 300 ms wait took %" PRId64 " ms", waited);
    cr_assert_eq(crdt_cmd_int(f.r, "HEXISTS %s %s", f.key, n.field), 0);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", n.tk), 0, "the timed-out reader left %s", n.tk);
    cr_assert_eq(crdt_cmd_int(f.r, "HLEN %s", f.key), 2);
    cr_assert(crdt_pubsub_channels_empty(n.chan), "the timed-out reader is still subscribed");
    cr_assert_eq(crd_lock_release(crd_rwlock_write(f.rwa)), CRD_OK);

    /* A writer behind a reader. */
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(f.rwa), 0, 30000), CRD_OK);
    t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(f.rwb), 300, 30000), CRD_TIMEOUT);
    waited = crdt_now_ms() - t0;
    cr_assert(waited >= 300 && waited < 800, "a 300 ms wait took %" PRId64 " ms", waited);
    cr_assert_eq(crdt_cmd_int(f.r, "HEXISTS %s %s", f.key, n.write), 0);
    cr_assert_eq(crdt_cmd_int(f.r, "HLEN %s", f.key), 2);
    cr_assert(crdt_pubsub_channels_empty(n.chan), "the timed-out writer is still subscribed");
    int64_t count = -1;
    cr_assert_eq(crd_lock_hold_count(crd_rwlock_write(f.rwb), &count), CRD_OK);
    cr_assert_eq(count, 0);
    cr_assert_eq(crd_lock_release(crd_rwlock_write(f.rwb)), CRD_NOT_OWNER);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(f.rwa)), CRD_OK);

    crdt_fixture_close_checked(&f, assert_rw_clean);
}

Test(rwlock, downgrade_keeps_reading_and_wakes_readers_blocked_by_the_write_hold, .timeout = 60)
{
    const char *name = crdt_key("rw");
    char chan[400];
    chan_of(name, chan, sizeof chan);
    redisContext *r = crdt_redis();
    crd_client *ac = crdt_client(), *cc = crdt_client();
    crdt_tracelog *t = crdt_tracelog_new();
    crd_client *bc = client_traced(t, 0);
    crd_rwlock *arw = rwlock(ac, name), *brw = rwlock(bc, name), *crw = rwlock(cc, name);
    char afield[128], awrite[160];
    crdt_owner_field(ac, crd_owner_current(), afield, sizeof afield);
    snprintf(awrite, sizeof awrite, "%s:write", afield);

    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(arw), 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(arw), 0, 30000), CRD_OK,
                 "the writer could not also read");
    char mode[16];
    hget_str(r, name, "mode", mode, sizeof mode);
    cr_assert_str_eq(mode, "write");
    cr_assert_eq(crdt_hget_int(r, name, awrite), 1);
    cr_assert_eq(crdt_hget_int(r, name, afield), 1);

    crdt_gate hold;
    crdt_gate_init(&hold);
    crdt_waiter b = {.lock = crd_rwlock_read(brw),
                     .client = bc,
                     .trace = t,
                     .wait_ms = 10000,
                     .lease_ms = 30000,
                     .release_gate = &hold};
    crdt_waiter_start(&b);
    await_scripts(t, b.trace_from, 2);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(crw), 0, 30000), CRD_BUSY);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(crw), 0, 30000), CRD_BUSY);

    crdt_watch wt;
    crdt_watch_open(&wt, chan, false);
    int64_t t_rel = crdt_now_ns();
    cr_assert_eq(crd_lock_release(crd_rwlock_write(arw)), CRD_OK);
    hget_str(r, name, "mode", mode, sizeof mode);
    cr_assert_str_eq(mode, "read", "the downgrade left mode %s", mode);
    cr_assert_eq(crdt_cmd_int(r, "HEXISTS %s %s", name, awrite), 0);
    cr_assert_eq(crdt_hget_int(r, name, afield), 1, "the downgrading owner lost its read hold");
    cr_assert(crdt_waiter_wait(&b, CRDT_WAITER_RETURNED, 5000),
              "the blocked reader was not woken by the downgrade");
    cr_assert_eq(b.acquire_st, CRD_OK);
    crdt_msg m[4];
    int nm = crdt_watch_collect(&wt, m, 4);
    crdt_watch_close(&wt);
    fprintf(stderr,
            "[rwlock] downgrade: the blocked reader got in %.2f ms after the write release (%d "
            "message(s), payload %s; Redisson publishes nothing there, quirk Q5)\n",
            ms_of(b.t_acq_ns - t_rel), nm, nm > 0 ? m[0].payload : "-");
    cr_assert_eq(nm, 1);
    cr_assert_str_eq(m[0].payload, "1");
    cr_assert_lt(b.t_acq_ns - t_rel, WAKE_BOUND_NS);

    /* Now in read mode: another client's reader gets in, writers do not, and the old
     * writer cannot take the write lock back while only reading. */
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(crw), 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_acquire_owner(crd_rwlock_write(crw), crd_owner_new(), 0, 30000),
                 CRD_BUSY);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(arw), 0, 30000), CRD_DEADLOCK);

    cr_assert_eq(crd_lock_release(crd_rwlock_read(crw)), CRD_OK);
    crdt_gate_set(&hold, 1);
    crdt_waiter_join(&b, 30000, NULL);
    cr_assert_eq(b.release_st, CRD_OK);
    crdt_gate_destroy(&hold);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(arw)), CRD_OK);

    crd_rwlock_free(arw);
    crd_rwlock_free(brw);
    crd_rwlock_free(crw);
    crd_client_free(ac);
    crd_client_free(bc);
    crd_client_free(cc);
    crdt_tracelog_free(t);
    assert_rw_clean(r, name);
    redisFree(r);
}

Test(rwlock, a_writer_that_also_reads_keeps_the_write_lock_when_it_stops_reading)
{
    crdt_fixture f;
    crdt_fixture_open_rw(&f, 2, "rw", NULL, NULL);
    rw_names n;
    rw_names_of(&f, f.a, &n);

    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(f.rwa), 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(f.rwa), 0, 30000), CRD_OK);
    bool locked = false;
    /* Redisson 3.24+: the read lock counts as locked in write mode with a read hold. */
    cr_assert_eq(crd_lock_is_locked(crd_rwlock_read(f.rwb), &locked), CRD_OK);
    cr_assert(locked, "read lock not reported locked while the writer also reads");
    crdt_watch wt;
    crdt_watch_open(&wt, n.chan, false);
    crdt_msg m[4];
    cr_assert_eq(crd_lock_release(crd_rwlock_read(f.rwa)), CRD_OK);
    char mode[16];
    hget_str(f.r, f.key, "mode", mode, sizeof mode);
    cr_assert_str_eq(mode, "write");
    cr_assert_eq(crdt_hget_int(f.r, f.key, n.write), 1);
    cr_assert_eq(crdt_cmd_int(f.r, "HEXISTS %s %s", f.key, n.field), 0);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", n.tk), 0);
    long long t = crdt_cmd_int(f.r, "PTTL %s", f.key);
    cr_assert(t > 0 && t <= 30000, "PTTL %lld after the read release", t);
    cr_assert_eq(crdt_watch_collect(&wt, m, 4), 0, "a read release that left the writer published");
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(f.rwb), 0, 30000), CRD_BUSY);
    cr_assert_eq(crd_lock_is_locked(crd_rwlock_read(f.rwb), &locked), CRD_OK);
    cr_assert_not(locked);
    cr_assert_eq(crd_lock_release(crd_rwlock_write(f.rwa)), CRD_OK);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);
    cr_assert_eq(crdt_watch_collect(&wt, m, 4), 1);
    cr_assert_str_eq(m[0].payload, "1");
    crdt_watch_close(&wt);

    crdt_fixture_close_checked(&f, assert_rw_clean);
}

Test(rwlock, an_owner_holding_only_the_read_lock_gets_deadlock_when_asking_for_write)
{
    const char *name = crdt_key("rw");
    redisContext *r = crdt_redis();
    crdt_tracelog *t = crdt_tracelog_new();
    crd_client *c = client_traced(t, 0);
    crd_rwlock *rw = rwlock(c, name);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(rw), 0, 30000), CRD_OK);

    const int64_t waits[3] = {0, 5000, CRD_WAIT_FOREVER};
    for (int i = 0; i < 3; i++) {
        size_t before = crdt_tracelog_count(t);
        int64_t t0 = crdt_now_ms();
        cr_assert_eq(crd_lock_acquire(crd_rwlock_write(rw), waits[i], 30000), CRD_DEADLOCK,
                     "wait %" PRId64 ": not refused as a deadlock", waits[i]);
        int64_t took = crdt_now_ms() - t0;
        cr_assert_lt(took, 100, "the refusal took %" PRId64 " ms", took);
        cr_assert_eq(crdt_tracelog_count(t), before, "the refused upgrade sent commands");
    }
    /* Another owner of the same client is simply refused (it is not the reader). */
    cr_assert_eq(crd_lock_acquire_owner(crd_rwlock_write(rw), crd_owner_new(), 0, 30000), CRD_BUSY);
    /* Once the read hold is gone, the write lock is available to the same owner. */
    cr_assert_eq(crd_lock_release(crd_rwlock_read(rw)), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(rw), 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_release(crd_rwlock_write(rw)), CRD_OK);

    crd_rwlock_free(rw);
    crd_client_free(c);
    crdt_tracelog_free(t);
    assert_rw_clean(r, name);
    redisFree(r);
}

Test(rwlock, each_read_hold_has_a_timeout_key_and_the_hash_ttl_follows_the_longest_live_one)
{
    crdt_fixture f;
    crdt_fixture_open_rw(&f, 2, "rw", NULL, NULL);
    char af[128], bf[128], t1[400], t2[400], bt1[400];
    crdt_owner_field(f.a, crd_owner_current(), af, sizeof af);
    crdt_owner_field(f.b, crd_owner_current(), bf, sizeof bf);
    tkey_of(f.key, af, 1, t1, sizeof t1);
    tkey_of(f.key, af, 2, t2, sizeof t2);
    tkey_of(f.key, bf, 1, bt1, sizeof bt1);
    long long v[3];

    /* One owner, two holds: 3 s, then 10 s. */
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(f.rwa), 0, 3000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(f.rwa), 0, 10000), CRD_OK);
    cr_assert_eq(crdt_hget_int(f.r, f.key, af), 2);
    const char *k1[3] = {f.key, t1, t2};
    pttls(f.r, 3, k1, v);
    fprintf(stderr, "[rwlock] two holds (3 s, 10 s): PTTL hash %lld, hold 1 %lld, hold 2 %lld\n",
            v[0], v[1], v[2]);
    cr_assert(v[1] > 0 && v[1] <= 3000, "hold 1's key PTTL %lld", v[1]);
    cr_assert(v[2] > 3000 && v[2] <= 10000, "hold 2's key PTTL %lld", v[2]);
    cr_assert(v[0] >= v[2] && v[0] <= 10000, "hash PTTL %lld, longest hold %lld", v[0], v[2]);
    /* Releasing the later (longer) hold: the hash now lives as long as hold 1. */
    cr_assert_eq(crd_lock_release(crd_rwlock_read(f.rwa)), CRD_OK);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", t2), 0, "the released hold's key is still there");
    const char *k2[2] = {f.key, t1};
    pttls(f.r, 2, k2, v);
    fprintf(stderr, "[rwlock] after releasing the 10 s hold: PTTL hash %lld, hold 1 %lld\n", v[0],
            v[1]);
    cr_assert(v[1] > 0 && v[1] <= 3000);
    cr_assert(llabs(v[0] - v[1]) <= 2, "hash PTTL %lld does not follow hold 1's %lld", v[0], v[1]);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(f.rwa)), CRD_OK);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", t1), 0);

    /* Two owners: A for 10 s, B for 3 s; A leaves, the hash follows B's hold. */
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(f.rwa), 0, 10000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(f.rwb), 0, 3000), CRD_OK);
    const char *k3[3] = {f.key, t1, bt1};
    pttls(f.r, 3, k3, v);
    cr_assert(v[1] > 3000 && v[1] <= 10000);
    cr_assert(v[2] > 0 && v[2] <= 3000);
    cr_assert(v[0] >= v[1] && v[0] <= 10000, "hash PTTL %lld below A's hold %lld", v[0], v[1]);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(f.rwa)), CRD_OK);
    const char *k4[2] = {f.key, bt1};
    pttls(f.r, 2, k4, v);
    fprintf(stderr, "[rwlock] A (10 s) left B (3 s): PTTL hash %lld, B's hold %lld\n", v[0], v[1]);
    cr_assert(llabs(v[0] - v[1]) <= 2, "hash PTTL %lld does not follow B's hold %lld", v[0], v[1]);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(f.rwb)), CRD_OK);

    crdt_fixture_close_checked(&f, assert_rw_clean);
}

/* ---- watchdog-renewed read holds ------------------------------------------------------ */

enum { WD_MS = 1500, WD_PERIOD_MS = 3 * WD_MS };

/* A holds the read lock `holds` times under the watchdog for 3x its timeout while another
 * client's reader (standing in for a Java reader: our read unlock has Java's effects,
 * PROTOCOL.md 7.2) comes and goes and a writer keeps being refused. */
static void watchdog_read_holds(int holds)
{
    const char *name = crdt_key("rw");
    redisContext *r = crdt_redis();
    crd_client *ac = client_traced(NULL, WD_MS);
    crd_client *jc = crdt_client(), *wc = crdt_client();
    crd_rwlock *arw = rwlock(ac, name), *jrw = rwlock(jc, name), *wrw = rwlock(wc, name);
    char af[128];
    crdt_owner_field(ac, crd_owner_current(), af, sizeof af);
    char tk[2][400];
    for (int i = 0; i < holds; i++)
        tkey_of(name, af, i + 1, tk[i], sizeof tk[i]);
    for (int i = 0; i < holds; i++)
        cr_assert_eq(crd_lock_acquire(crd_rwlock_read(arw), 0, CRD_LEASE_WATCHDOG), CRD_OK);

    const char *keys[3] = {name, tk[0], tk[1]};
    long long v[3], min_key = 1 << 30;
    int samples = 0, visits = 0, refusals = 0;
    int64_t start = crdt_now_ms();
    /* The renewal period passing is the behaviour under test: sample it every 100 ms. */
    while (crdt_now_ms() - start < WD_PERIOD_MS) {
        int64_t at = crdt_now_ms() - start;
        pttls(r, 1 + holds, keys, v);
        cr_assert(v[0] > 0, "the hash has PTTL %lld at %" PRId64 " ms", v[0], at);
        for (int i = 0; i < holds; i++) {
            cr_assert(v[1 + i] > 0 && v[1 + i] <= WD_MS,
                      "hold %d's timeout key has PTTL %lld at %" PRId64 " ms", i + 1, v[1 + i], at);
            if (v[1 + i] < min_key)
                min_key = v[1 + i];
        }
        cr_assert_eq(crdt_hget_int(r, name, af), holds, "A's field changed at %" PRId64 " ms", at);
        if (samples % 5 == 0) {
            /* Another reader takes and releases a hold: its unlock looks for live timeout
             * keys and must find A's. */
            cr_assert_eq(crd_lock_acquire(crd_rwlock_read(jrw), 0, 1000), CRD_OK);
            cr_assert_eq(crd_lock_release(crd_rwlock_read(jrw)), CRD_OK);
            cr_assert_eq(crdt_hget_int(r, name, af), holds,
                         "another reader's release removed A's field at %" PRId64 " ms", at);
            visits++;
        }
        if (samples % 5 == 2) {
            cr_assert_eq(crd_lock_acquire(crd_rwlock_write(wrw), 0, 30000), CRD_BUSY,
                         "a writer got in while A reads, at %" PRId64 " ms", at);
            refusals++;
        }
        samples++;
        crdt_sleep_ms(100);
    }
    fprintf(stderr,
            "[rwlock] watchdog %d ms, %d read hold(s) for %d ms: %d samples, lowest timeout-key "
            "PTTL %lld ms, %d visiting reader releases, %d writer refusals\n",
            WD_MS, holds, WD_PERIOD_MS, samples, min_key, visits, refusals);
    if (holds == 2) {
        /* One hold released: the other one's key must go on being renewed. */
        cr_assert_eq(crd_lock_release(crd_rwlock_read(arw)), CRD_OK);
        cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", tk[1]), 0, "the released hold's key remains");
        int64_t s2 = crdt_now_ms();
        while (crdt_now_ms() - s2 < 2 * WD_MS) {
            pttls(r, 2, keys, v);
            cr_assert(v[0] > 0 && v[1] > 0 && v[1] <= WD_MS,
                      "after a partial release: hash PTTL %lld, hold 1 key PTTL %lld at %" PRId64
                      " ms",
                      v[0], v[1], crdt_now_ms() - s2);
            cr_assert_eq(crdt_hget_int(r, name, af), 1);
            crdt_sleep_ms(100);
        }
        holds = 1;
    }
    for (int i = 0; i < holds; i++)
        cr_assert_eq(crd_lock_release(crd_rwlock_read(arw)), CRD_OK);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", name), 0);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(wrw), 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_release(crd_rwlock_write(wrw)), CRD_OK);

    crd_rwlock_free(arw);
    crd_rwlock_free(jrw);
    crd_rwlock_free(wrw);
    crd_client_free(ac);
    crd_client_free(jc);
    crd_client_free(wc);
    assert_rw_clean(r, name);
    redisFree(r);
}

Test(rwlock, one_watchdog_read_hold_keeps_its_timeout_key_alive_for_three_timeouts, .timeout = 60)
{
    watchdog_read_holds(1);
}

Test(rwlock, two_watchdog_read_holds_keep_their_timeout_keys_alive_before_and_after_one_release,
     .timeout = 60)
{
    watchdog_read_holds(2);
}

/* ---- exclusion checker ------------------------------------------------------------------ */

Test(rwlock, readers_and_writers_in_four_processes_never_overlap_wrongly, .timeout = 120)
{
    /* 4 processes of 2 threads, 20 % of the holds writes, 5 s leases:
     * support/exclusion.h's checker. */
    crdt_ex x = {.tag = "rwlock", .kind = CRDT_EX_RWLOCK, .suffix = "rw", .check = assert_rw_clean,
                 .procs = 4, .per_proc = 2, .write_percent = 20, .lease_ms = 5000,
                 .total = crdt_scaled_count(10000, 8), .deadline_ms = 110000};
    crdt_ex_run(&x);
    crdt_ex_assert(&x);
}

Test(rwlock, force_unlock_of_each_lock_only_deletes_in_its_own_mode)
{
    crdt_fixture f;
    crdt_fixture_open_rw(&f, 2, "rw", NULL, NULL);
    char chan[400];
    chan_of(f.key, chan, sizeof chan);
    char af[128], tk[400];
    crdt_owner_field(f.a, crd_owner_current(), af, sizeof af);
    tkey_of(f.key, af, 1, tk, sizeof tk);
    crdt_watch wt;
    crdt_watch_open(&wt, chan, false);
    crdt_msg m[4];
    bool was = true;

    /* Held for writing: the read force-unlock does nothing, the write one deletes. */
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(f.rwa), 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_force_unlock(crd_rwlock_read(f.rwb), &was), CRD_OK);
    cr_assert_not(was, "the read force-unlock reported deleting a write-held lock");
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 1);
    cr_assert_eq(crdt_watch_collect(&wt, m, 4), 0, "a force-unlock that deleted nothing published");
    cr_assert_eq(crd_lock_force_unlock(crd_rwlock_write(f.rwb), &was), CRD_OK);
    cr_assert(was);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);
    cr_assert_eq(crdt_watch_collect(&wt, m, 4), 1);
    cr_assert_str_eq(m[0].payload, "1");
    cr_assert_eq(crd_lock_release(crd_rwlock_write(f.rwa)), CRD_LOCK_LOST);
    /* A write unlock of an unlocked name publishes "1" (PROTOCOL.md 4.1, 7.4 step 2). */
    cr_assert_eq(crdt_watch_collect(&wt, m, 4), 1);
    cr_assert_str_eq(m[0].payload, "1");

    /* Held for reading: the write force-unlock does nothing, the read one deletes. */
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(f.rwa), 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_force_unlock(crd_rwlock_write(f.rwb), &was), CRD_OK);
    cr_assert_not(was, "the write force-unlock reported deleting a read-held lock");
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 1);
    cr_assert_eq(crdt_watch_collect(&wt, m, 4), 0);
    cr_assert_eq(crd_lock_force_unlock(crd_rwlock_read(f.rwb), &was), CRD_OK);
    cr_assert(was);
    cr_assert_eq(crdt_cmd_int(f.r, "EXISTS %s", f.key), 0);
    cr_assert_eq(crdt_watch_collect(&wt, m, 4), 1);
    cr_assert_str_eq(m[0].payload, "0");
    /* The hold's timeout key is left to expire (PROTOCOL.md 7.5); it still carries the
     * hold's lease, never more. */
    long long left = crdt_cmd_int(f.r, "PTTL %s", tk);
    cr_assert(left > 0 && left <= 30000, "left-over timeout key PTTL %lld", left);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(f.rwa)), CRD_LOCK_LOST);
    /* A read unlock of an unlocked name publishes "0" (7.2 step 2). */
    cr_assert_eq(crdt_watch_collect(&wt, m, 4), 1);
    cr_assert_str_eq(m[0].payload, "0");
    /* Nothing left to force-unlock in either mode. */
    cr_assert_eq(crd_lock_force_unlock(crd_rwlock_read(f.rwb), &was), CRD_OK);
    cr_assert_not(was);
    cr_assert_eq(crd_lock_force_unlock(crd_rwlock_write(f.rwb), &was), CRD_OK);
    cr_assert_not(was);
    crdt_watch_close(&wt);
    freeReplyObject(crdt_cmd(f.r, "DEL %s", tk));

    crdt_fixture_close_checked(&f, assert_rw_clean);
}
