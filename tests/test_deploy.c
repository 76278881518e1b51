/*
 * test_deploy.c -- Redis as users run it (issue #46): deployments that are not the plain
 * server the URL seems to name, each started here for real on loopback.
 *
 *   - A server that checks key slots although the URL is redis:// (a one-node Redis
 *     Cluster owning every slot answers as a proxy in front of a sharded database does):
 *     four watchdog holds on names of different slots stay held past five 3 s leases,
 *     every renewal succeeds, the releases return CRD_OK (on today's main the watchdog's
 *     mixed batch got CROSSSLOT and every hold was lost after one lease).
 *   - WAIT renamed away (rename-command WAIT "") or denied by an ACL, with replica sync
 *     on and a replica to wait for: the acquire returns CRD_SYNC_UNAVAILABLE before
 *     anything is sent, nothing is held; an ACL changed under a running client: the
 *     acquire whose WAIT was refused is undone (CRD_NOT_SYNCED naming the refusal), the
 *     next one refused up front; CRD_REPLICA_SYNC_IF_ALLOWED goes without WAIT and says so.
 *   - maxmemory-policy volatile-lru: one WARN line and crd_metrics.eviction_warnings 1 per
 *     client, none on a default server.
 *   - A read-only replica endpoint (replicaof), a script past busy-reply-threshold (BUSY),
 *     maxmemory 1 with noeviction (OOM), a server loading its data (DEBUG RELOAD with a
 *     key-load delay: LOADING), a cluster with a failed node (CLUSTERDOWN): each a clear
 *     status whose words say what the server refused, and nothing held; an acquire with a
 *     wait outlasts BUSY and LOADING and gets the lock.
 *
 * Each test runs on servers of its own (they change server-wide settings); the shared
 * server serves the default-policy check only. Sleeps appear only where time passing is
 * the behaviour (holds kept for five leases, a script or a load that must be running).
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cluster.h"
#include "harness.h"

/* ---------------------------------------------------------------------------------- */
/* Helpers                                                                            */
/* ---------------------------------------------------------------------------------- */

/* on_log: every line kept (the library's words are what these tests check). */
typedef struct logbook {
    pthread_mutex_t mu;
    char lines[32][512];
    int levels[32];
    int n;
} logbook;

static void log_line(void *user, crd_log_level level, const char *message)
{
    logbook *b = user;
    pthread_mutex_lock(&b->mu);
    if (b->n < 32) {
        snprintf(b->lines[b->n], sizeof b->lines[b->n], "%s", message);
        b->levels[b->n] = (int)level;
        b->n++;
    }
    pthread_mutex_unlock(&b->mu);
}

static void logbook_init(logbook *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
}

/* Lines at level containing every one of the words (NULL-terminated). */
static int logbook_count(logbook *b, crd_log_level level, const char *const *words)
{
    int found = 0;
    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < b->n; i++) {
        bool all = b->levels[i] == (int)level;
        for (int w = 0; all && words[w] != NULL; w++)
            all = strstr(b->lines[i], words[w]) != NULL;
        found += all;
    }
    pthread_mutex_unlock(&b->mu);
    return found;
}

static void logbook_dump(logbook *b)
{
    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < b->n; i++)
        fprintf(stderr, "[deploy] log %d: %s\n", b->levels[i], b->lines[i]);
    pthread_mutex_unlock(&b->mu);
}

static crd_metrics metrics_of(crd_client *c)
{
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(c, &m, sizeof m), CRD_OK);
    return m;
}

/* Options on 127.0.0.1:port (plain), logging into b. */
static void opts_at(crd_options *o, int port, logbook *b)
{
    crdt_options_plain(o, port);
    o->connect_timeout_ms = 1000;
    if (b != NULL) {
        o->on_log = log_line;
        o->log_user_data = b;
    }
}

static bool info_has(redisContext *r, const char *section, const char *text)
{
    redisReply *rep = redisCommand(r, "INFO %s", section);
    bool yes = rep != NULL && rep->type == REDIS_REPLY_STRING && strstr(rep->str, text) != NULL;
    if (rep != NULL)
        freeReplyObject(rep);
    return yes;
}

typedef struct info_wait {
    redisContext *r;
    const char *section, *text;
} info_wait;

static bool info_pred(void *arg)
{
    info_wait *w = arg;
    return info_has(w->r, w->section, w->text);
}

/* A primary (extra arguments pargs, at most 8) with one replica online. */
static void start_pair(crdt_server *primary, crdt_server *replica, const char *const *pargs,
                       const char *user, const char *password)
{
    /* No 5 s wait before the first (diskless) sync. */
    const char *all[12] = {"--repl-diskless-sync-delay", "0"};
    for (int i = 0; pargs != NULL && pargs[i] != NULL && i < 8; i++)
        all[2 + i] = pargs[i];
    crdt_server_start(primary, false, all, user, password);
    char port[16];
    snprintf(port, sizeof port, "%d", primary->port);
    const char *rargs[] = {"--replicaof", "127.0.0.1", port, password ? "--masterauth" : NULL,
                           password, NULL};
    crdt_server_start(replica, false, rargs, NULL, NULL);
    redisContext *r = crdt_redis_port(primary->port);
    if (password != NULL)
        freeReplyObject(crdt_cmd(r, "AUTH %s %s", user, password));
    info_wait w = {r, "replication", "state=online"};
    bool up = crdt_wait_until(info_pred, &w, 10000);
    redisFree(r);
    cr_assert(up, "the replica did not connect to the primary");
    redisContext *rr = crdt_redis_port(replica->port);
    info_wait wr = {rr, "replication", "master_link_status:up"};
    up = crdt_wait_until(info_pred, &wr, 10000);
    redisFree(rr);
    cr_assert(up, "the replica's link did not come up");
}

/* start_pair with WAIT renamed away on the primary ("WAIT" answers unknown command); the
 * book b started and o on the primary, logging into b, with replica_sync. */
static void renamed_wait_pair(crdt_server *p, crdt_server *rep, logbook *b, crd_options *o,
                              int replica_sync)
{
    const char *pargs[] = {"--rename-command", "WAIT", "", NULL};
    start_pair(p, rep, pargs, NULL, NULL);
    logbook_init(b);
    opts_at(o, p->port, b);
    o->replica_sync = replica_sync;
}

/* ---------------------------------------------------------------------------------- */
/* A server that checks key slots, reached with redis://                              */
/* ---------------------------------------------------------------------------------- */

typedef struct event_counts {
    atomic_int failing, lost, recovered;
} event_counts;

static void count_event(void *user, const crd_event *e)
{
    event_counts *k = user;
    atomic_fetch_add(e->kind == CRD_EVENT_LOCK_LOST         ? &k->lost
                     : e->kind == CRD_EVENT_RENEWAL_FAILING ? &k->failing
                                                            : &k->recovered,
                     1);
}

Test(deploy, a_server_that_checks_slots_keeps_four_watchdog_holds_past_five_leases, .timeout = 90)
{
    crdt_cluster cl;
    crdt_cluster_start(&cl, 1, 0);
    logbook b;
    logbook_init(&b);
    event_counts ev = {0};
    crd_options o;
    opts_at(&o, cl.node[0].port, &b); /* redis://, not redis-cluster:// */
    const int64_t lease = 3000;
    o.watchdog_timeout_ms = lease;
    o.on_event = count_event;
    o.event_user_data = &ev;
    crd_client *c = crdt_client_opts(&o);
    const char *names[4] = {crdt_key("xa"), crdt_key("xb"), crdt_key("xc"), crdt_key("xd")};
    crd_lock *l[4];
    int slots[4], distinct = 0;
    for (int i = 0; i < 4; i++) {
        slots[i] = crdt_cluster_keyslot(&cl, names[i]);
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen = seen || slots[j] == slots[i];
        distinct += !seen;
        l[i] = crdt_lock(c, names[i]);
        crd_status st = crd_lock_acquire(l[i], 0, CRD_LEASE_WATCHDOG);
        cr_assert_eq(st, CRD_OK, "%s: %s", crd_strerror(st), crd_client_errmsg(c));
    }
    cr_assert_geq(distinct, 2, "the four names fell into one slot: the test shows nothing");
    /* Time passing is the behaviour: five leases and a renewal period more. */
    int64_t t0 = crdt_now_ms();
    crdt_sleep_ms(5 * lease + lease / 3);
    redisContext *r = crdt_redis_port(cl.node[0].port);
    for (int i = 0; i < 4; i++) {
        long long ttl = crdt_pttl(r, names[i]);
        cr_assert_gt(ttl, 0, "%s is gone after %lld ms (pttl %lld)", names[i],
                     (long long)(crdt_now_ms() - t0), ttl);
        int64_t valid = 0;
        cr_assert_eq(crd_lock_validity_ms(l[i], &valid), CRD_OK);
        cr_assert_gt(valid, 0);
    }
    crd_metrics m = metrics_of(c);
    fprintf(stderr, "[deploy] slot-checking server: %d slots, renewals %llu, failures %llu, "
            "round trips %llu, re-batched rounds %llu, events failing %d lost %d\n", distinct,
            (unsigned long long)m.renewals, (unsigned long long)m.renewal_failures,
            (unsigned long long)m.watchdog_round_trips,
            (unsigned long long)m.crossslot_rebatches, atomic_load(&ev.failing),
            atomic_load(&ev.lost));
    cr_assert_eq(atomic_load(&ev.failing) + atomic_load(&ev.lost), 0, "a renewal failed");
    cr_assert_eq(m.renewal_failures, 0);
    cr_assert_geq(m.renewals, 4 * 14, "renewals %llu", (unsigned long long)m.renewals);
    cr_assert_eq(m.crossslot_rebatches, 1, "the first round is re-batched, and only it");
    const char *words[] = {"checks key slots", "CROSSSLOT", NULL};
    cr_assert_eq(logbook_count(&b, CRD_LOG_INFO, words), 1, "the one line saying so");
    for (int i = 0; i < 4; i++) {
        crd_status st = crd_lock_release(l[i]);
        cr_assert_eq(st, CRD_OK, "release %s: %s (%s)", names[i], crd_strerror(st),
                     crd_client_errmsg(c));
        cr_assert_eq(crdt_exists(r, names[i]), 0);
        crd_lock_free(l[i]);
    }
    redisFree(r);
    crd_client_free(c);
    crdt_cluster_stop(&cl);
}

/* ---------------------------------------------------------------------------------- */
/* WAIT refused                                                                       */
/* ---------------------------------------------------------------------------------- */

/* An acquire refused for a refused WAIT: the status, words naming WAIT and the way out,
 * nothing in Redis, one WARN line, the metric. */
static void expect_sync_unavailable(crd_client *c, crd_lock *l, const char *key, redisContext *r,
                                    logbook *b, const char *server_words)
{
    crd_status st = crd_lock_acquire(l, 0, 30000);
    const char *msg = crd_client_errmsg(c);
    if (st != CRD_SYNC_UNAVAILABLE)
        logbook_dump(b);
    cr_assert_eq(st, CRD_SYNC_UNAVAILABLE, "%s: %s", crd_strerror(st), msg);
    cr_assert(strstr(msg, "refuses WAIT") != NULL && strstr(msg, "nothing is held") != NULL &&
              strstr(msg, "CRD_REPLICA_SYNC_OFF") != NULL && strstr(msg, server_words) != NULL,
              "%s", msg);
    cr_assert_eq(crdt_exists(r, key), 0, "a refused acquire left %s behind", key);
    bool held = true;
    cr_assert_eq(crd_lock_is_held(l, &held), CRD_OK);
    cr_assert(!held);
    cr_assert_geq(metrics_of(c).sync_refusals, 1);
    const char *words[] = {"refuses WAIT", NULL};
    cr_assert_eq(logbook_count(b, CRD_LOG_WARN, words), 1, "one WARN line per client");
}

Test(deploy, a_renamed_wait_refuses_an_acquire_that_asked_for_replica_sync_before_sending_it,
     .timeout = 60)
{
    crdt_server p, rep;
    logbook b;
    crd_options o;
    renamed_wait_pair(&p, &rep, &b, &o, CRD_REPLICA_SYNC_ON);
    crdt_tracelog *t = crdt_tracelog_new();
    crdt_tracelog_attach(t, &o);
    crd_client *c = crdt_client_opts(&o);
    const char *key = crdt_key("renamed");
    crd_lock *l = crdt_lock(c, key);
    size_t before = crdt_tracelog_count_scripts(t, 0);
    redisContext *r = crdt_redis_port(p.port);
    expect_sync_unavailable(c, l, key, r, &b, "unknown command");
    cr_assert_eq(crdt_tracelog_count_scripts(t, 0), before, "the acquire was sent");
    /* A second one: refused the same way, still one WARN line. */
    expect_sync_unavailable(c, l, key, r, &b, "unknown command");
    redisFree(r);
    crd_lock_free(l);
    crd_client_free(c);
    crdt_tracelog_free(t);
    crdt_server_stop(&rep);
    crdt_server_stop(&p);
}

Test(deploy, wait_denied_by_an_acl_at_start_or_later_never_leaves_a_hold, .timeout = 60)
{
    crdt_server p, rep;
    const char *pargs[] = {"--requirepass", "adminpw", NULL};
    start_pair(&p, &rep, pargs, "default", "adminpw");
    redisContext *admin = crdt_redis_port(p.port);
    freeReplyObject(crdt_cmd(admin, "AUTH default adminpw"));
    freeReplyObject(crdt_cmd(admin, "ACL SETUSER nowait on >pw ~* &* +@all -wait"));
    freeReplyObject(crdt_cmd(admin, "ACL SETUSER later on >pw ~* &* +@all"));

    /* Denied from the start: the start-up WAIT 0 0 learns it. */
    logbook b;
    logbook_init(&b);
    crd_options o;
    opts_at(&o, p.port, &b);
    o.username = "nowait";
    o.password = "pw";
    o.replica_sync = CRD_REPLICA_SYNC_ON;
    crd_client *c = crdt_client_opts(&o);
    const char *key = crdt_key("acl");
    crd_lock *l = crdt_lock(c, key);
    expect_sync_unavailable(c, l, key, admin, &b, "NOPERM");
    crd_lock_free(l);
    crd_client_free(c);

    /* Denied while the client runs: the acquire ran, its WAIT was refused: undone. */
    logbook b2;
    logbook_init(&b2);
    opts_at(&o, p.port, &b2);
    o.username = "later";
    o.password = "pw";
    o.replica_sync = CRD_REPLICA_SYNC_ON;
    c = crdt_client_opts(&o);
    const char *key2 = crdt_key("acl-later");
    l = crdt_lock(c, key2);
    cr_assert_eq(crd_lock_acquire(l, 0, 30000), CRD_OK, "%s", crd_client_errmsg(c));
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    freeReplyObject(crdt_cmd(admin, "ACL SETUSER later -wait"));
    crd_status st = crd_lock_acquire(l, 0, 30000);
    cr_assert_eq(st, CRD_NOT_SYNCED, "%s: %s", crd_strerror(st), crd_client_errmsg(c));
    cr_assert(strstr(crd_client_errmsg(c), "refused the WAIT") != NULL &&
              strstr(crd_client_errmsg(c), "undone") != NULL, "%s", crd_client_errmsg(c));
    cr_assert_eq(crdt_exists(admin, key2), 0, "the undone acquire left its hold");
    expect_sync_unavailable(c, l, key2, admin, &b2, "NOPERM");
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(admin);
    crdt_server_stop(&rep);
    crdt_server_stop(&p);
}

Test(deploy, if_allowed_goes_without_a_refused_wait_and_says_so, .timeout = 60)
{
    crdt_server p, rep;
    logbook b;
    crd_options o;
    renamed_wait_pair(&p, &rep, &b, &o, CRD_REPLICA_SYNC_IF_ALLOWED);
    crd_client *c = crdt_client_opts(&o);
    const char *key = crdt_key("fallback");
    crd_lock *l = crdt_lock(c, key);
    for (int i = 0; i < 3; i++) {
        crd_status st = crd_lock_acquire(l, 0, 30000);
        cr_assert_eq(st, CRD_OK, "%s: %s", crd_strerror(st), crd_client_errmsg(c));
        cr_assert_eq(crd_lock_release(l), CRD_OK, "%s", crd_client_errmsg(c));
    }
    cr_assert_geq(metrics_of(c).sync_refusals, 6, "every acquire and release went without");
    const char *words[] = {"refuses WAIT", "IF_ALLOWED", NULL};
    cr_assert_eq(logbook_count(&b, CRD_LOG_WARN, words), 1, "one WARN line per client");
    crd_lock_free(l);
    crd_client_free(c);
    crdt_server_stop(&rep);
    crdt_server_stop(&p);
}

/* ---------------------------------------------------------------------------------- */
/* Eviction                                                                           */
/* ---------------------------------------------------------------------------------- */

Test(deploy, an_evicting_policy_is_warned_once_at_connect_and_a_default_server_is_not)
{
    crdt_server s;
    const char *args[] = {"--maxmemory-policy", "volatile-lru", NULL};
    crdt_server_start(&s, false, args, NULL, NULL);
    logbook b;
    logbook_init(&b);
    crd_options o;
    opts_at(&o, s.port, &b);
    crd_client *c = crdt_client_opts(&o);
    const char *words[] = {"maxmemory-policy is volatile-lru", "noeviction", NULL};
    if (logbook_count(&b, CRD_LOG_WARN, words) != 1)
        logbook_dump(&b);
    cr_assert_eq(logbook_count(&b, CRD_LOG_WARN, words), 1);
    cr_assert_eq(metrics_of(c).eviction_warnings, 1);
    char text[16384];
    size_t n = crd_client_metrics_openmetrics(c, text, sizeof text);
    cr_assert(n > 0 && n < sizeof text);
    cr_assert(strstr(text, "\ncredisson_eviction_warnings_total 1\n") != NULL);
    /* It stays one line: locks taken and released say nothing more. */
    crd_lock *l = crdt_lock(c, crdt_key("evict"));
    cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_OK);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_assert_eq(logbook_count(&b, CRD_LOG_WARN, words), 1);
    crd_lock_free(l);
    crd_client_free(c);
    crdt_server_stop(&s);

    /* The shared, default server (noeviction): nothing said. */
    logbook d;
    logbook_init(&d);
    opts_at(&o, crdt_port(), &d);
    c = crdt_client_opts(&o);
    const char *any[] = {"maxmemory-policy", NULL};
    cr_assert_eq(logbook_count(&d, CRD_LOG_WARN, any), 0);
    cr_assert_eq(metrics_of(c).eviction_warnings, 0);
    crd_client_free(c);
}

/* ---------------------------------------------------------------------------------- */
/* Refusals: READONLY, BUSY, OOM, LOADING, CLUSTERDOWN                                 */
/* ---------------------------------------------------------------------------------- */

Test(deploy, a_read_only_replica_endpoint_refuses_an_acquire_in_words_and_holds_nothing)
{
    crdt_server p, rep;
    start_pair(&p, &rep, NULL, NULL, NULL);
    crd_options o;
    opts_at(&o, rep.port, NULL);
    crd_client *c = crdt_client_opts(&o);
    const char *key = crdt_key("replica");
    crd_lock *l = crdt_lock(c, key);
    crd_status st = crd_lock_acquire(l, 0, 10000);
    cr_assert_eq(st, CRD_SERVER, "%s: %s", crd_strerror(st), crd_client_errmsg(c));
    cr_assert(strstr(crd_client_errmsg(c), "read-only replica") != NULL &&
              strstr(crd_client_errmsg(c), "connect to the primary") != NULL, "%s",
              crd_client_errmsg(c));
    redisContext *r = crdt_redis_port(p.port), *rr = crdt_redis_port(rep.port);
    cr_assert_eq(crdt_exists(r, key), 0);
    cr_assert_eq(crdt_exists(rr, key), 0);
    redisFree(r);
    redisFree(rr);
    crd_lock_free(l);
    crd_client_free(c);
    crdt_server_stop(&rep);
    crdt_server_stop(&p);
}

/* A raw command run on a thread of its own (a long script, DEBUG RELOAD). */
typedef struct bg_cmd {
    int port;
    int argc;
    const char *argv[4];
    atomic_bool started;
    pthread_t th;
} bg_cmd;

static void *bg_run(void *arg)
{
    bg_cmd *b = arg;
    redisContext *r = crdt_raw_connect(b->port, 30000);
    atomic_store(&b->started, true);
    if (r != NULL) {
        redisReply *rep = redisCommandArgv(r, b->argc, b->argv, NULL);
        if (rep != NULL)
            freeReplyObject(rep);
        redisFree(r);
    }
    return NULL;
}

static void bg_start(bg_cmd *b, int port)
{
    b->port = port;
    atomic_init(&b->started, false);
    cr_assert_eq(pthread_create(&b->th, NULL, bg_run, b), 0);
}

/* Whether PING on r is answered with an error starting with code. r is a connection
 * made before the refusal began: a busy script and a load answer every connection so. */
typedef struct refusing {
    redisContext *r;
    const char *code;
} refusing;

static bool answers_with(void *arg)
{
    refusing *f = arg;
    redisReply *rep = redisCommand(f->r, "PING");
    bool yes = rep != NULL && rep->type == REDIS_REPLY_ERROR &&
               strncmp(rep->str, f->code, strlen(f->code)) == 0;
    if (rep != NULL)
        freeReplyObject(rep);
    return yes;
}

/* While the server refuses with code (BUSY, LOADING): a try with a short command timeout
 * fails in words and holds nothing; an acquire with a wait outlasts the refusal. */
static void refusal_then_lock(int port, const char *code, const char *meaning, bg_cmd *bg)
{
    crd_options o;
    opts_at(&o, port, NULL);
    crd_client *c = crdt_client_opts(&o); /* before the refusal starts */
    const char *key = crdt_key(code);
    crd_lock *l = crdt_lock(c, key);
    /* A try whose command timeout ends inside the refusal. */
    crd_options ot;
    opts_at(&ot, port, NULL);
    ot.command_timeout_ms = 300;
    crd_client *ct = crdt_client_opts(&ot);
    crd_lock *lt = crdt_lock(ct, key);
    refusing f = {crdt_raw_connect(port, 2000), code};
    cr_assert_not_null(f.r);
    bg_start(bg, port);
    bool refused = crdt_wait_until(answers_with, &f, 5000);
    redisFree(f.r);
    cr_assert(refused, "the server never answered %s", code);
    int64_t t0 = crdt_now_ms();
    crd_status st = crd_lock_acquire(lt, 0, 10000);
    int64_t took = crdt_now_ms() - t0;
    const char *msg = crd_client_errmsg(ct);
    fprintf(stderr, "[deploy] %s: a try -> %s after %lld ms (%s)\n", code, crd_strerror(st),
            (long long)took, msg);
    cr_assert_eq(st, CRD_SERVER, "%s: %s", crd_strerror(st), msg);
    cr_assert(strstr(msg, code) != NULL && strstr(msg, meaning) != NULL, "%s", msg);
    cr_assert_lt(took, 1500, "the try took %lld ms", (long long)took);
    /* An acquire that may wait gets the lock once the server serves again. */
    t0 = crdt_now_ms();
    st = crd_lock_acquire(l, 10000, 10000);
    fprintf(stderr, "[deploy] %s: an acquire with a 10 s wait -> %s after %lld ms\n", code,
            crd_strerror(st), (long long)(crdt_now_ms() - t0));
    cr_assert_eq(st, CRD_OK, "%s: %s", crd_strerror(st), crd_client_errmsg(c));
    pthread_join(bg->th, NULL);
    redisContext *r = crdt_redis_port(port);
    char field[128];
    crdt_owner_field(c, crd_owner_current(), field, sizeof field);
    cr_assert_eq(crdt_hget_int(r, key, field), 1, "held once, by the acquire that waited");
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_assert_eq(crdt_exists(r, key), 0, "the try that failed holds nothing");
    redisFree(r);
    crd_lock_free(lt);
    crd_lock_free(l);
    crd_client_free(ct);
    crd_client_free(c);
}

Test(deploy, a_busy_script_delays_an_acquire_and_a_try_inside_it_fails_in_words, .timeout = 60)
{
    crdt_server s;
    const char *args[] = {"--busy-reply-threshold", "100", NULL};
    crdt_server_start(&s, false, args, NULL, NULL);
    bg_cmd bg = {.argc = 3,
                 .argv = {"EVAL",
                          "local s = redis.call('time') repeat local n = redis.call('time') "
                          "until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 2000000 return 1",
                          "0"}};
    refusal_then_lock(s.port, "BUSY", "nothing ran", &bg);
    crdt_server_stop(&s);
}

Test(deploy, a_loading_server_is_waited_out_by_an_acquire_and_a_try_inside_it_fails_in_words,
     .timeout = 60)
{
    crdt_server s;
    const char *args[] = {"--enable-debug-command", "yes",
                          "--loading-process-events-interval-bytes", "1024", NULL};
    crdt_server_start(&s, false, args, NULL, NULL);
    redisContext *r = crdt_redis_port(s.port);
    freeReplyObject(crdt_cmd(r, "DEBUG POPULATE 2000 crdt-deploy-fill"));
    /* One ms per key: the reload takes about 2 s, answering LOADING meanwhile. */
    freeReplyObject(crdt_cmd(r, "CONFIG SET key-load-delay 1000"));
    redisFree(r);
    bg_cmd bg = {.argc = 2, .argv = {"DEBUG", "RELOAD"}};
    refusal_then_lock(s.port, "LOADING", "nothing ran", &bg);
    crdt_server_stop(&s);
}

Test(deploy, an_out_of_memory_server_refuses_an_acquire_and_keeps_renewing_existing_holds,
     .timeout = 60)
{
    crdt_server s;
    crdt_server_start(&s, false, NULL, NULL, NULL);
    crd_options o;
    opts_at(&o, s.port, NULL);
    o.watchdog_timeout_ms = 900;
    crd_client *c = crdt_client_opts(&o);
    const char *held = crdt_key("oom-held"), *key = crdt_key("oom");
    crd_lock *lh = crdt_lock(c, held), *l = crdt_lock(c, key);
    cr_assert_eq(crd_lock_acquire(lh, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    redisContext *r = crdt_redis_port(s.port);
    freeReplyObject(crdt_cmd(r, "CONFIG SET maxmemory-policy noeviction"));
    freeReplyObject(crdt_cmd(r, "CONFIG SET maxmemory 1"));
    crd_status st = crd_lock_acquire(l, 0, 10000);
    const char *msg = crd_client_errmsg(c);
    cr_assert_eq(st, CRD_SERVER, "%s: %s", crd_strerror(st), msg);
    cr_assert(strstr(msg, "OOM") != NULL && strstr(msg, "nothing was written") != NULL, "%s",
              msg);
    cr_assert_eq(crdt_exists(r, key), 0);
    /* Renewal only extends (PEXPIRE is allowed at maxmemory): the hold outlives two
     * leases. Time passing is the behaviour. */
    crdt_sleep_ms(2 * 900);
    cr_assert_gt(crdt_pttl(r, held), 0);
    cr_assert_eq(metrics_of(c).renewal_failures, 0);
    freeReplyObject(crdt_cmd(r, "CONFIG SET maxmemory 0"));
    cr_assert_eq(crd_lock_release(lh), CRD_OK);
    redisFree(r);
    crd_lock_free(l);
    crd_lock_free(lh);
    crd_client_free(c);
    crdt_server_stop(&s);
}

static bool cluster_failed(void *arg)
{
    redisReply *rep = redisCommand(arg, "CLUSTER INFO");
    bool f = rep != NULL && rep->type == REDIS_REPLY_STRING &&
             strstr(rep->str, "cluster_state:fail") != NULL;
    if (rep != NULL)
        freeReplyObject(rep);
    return f;
}

/* The next test's cluster: 3 primaries without replicas, stopped after the test. */
static crdt_cluster cl3;
static void three_primaries_up(void) { crdt_cluster_start(&cl3, 3, 0); }
static void three_primaries_down(void) { crdt_cluster_stop(&cl3); }

Test(deploy, a_cluster_with_a_failed_node_answers_clusterdown_in_words_and_nothing_is_held,
     .init = three_primaries_up, .fini = three_primaries_down, .timeout = 90)
{
    crdt_cluster *cl = &cl3;
    crd_options o;
    crdt_cluster_options(cl, &o);
    o.command_timeout_ms = 600;
    crd_client *c = crdt_client_opts(&o);
    const char *key = crdt_cluster_name_on(cl, 0, "down");
    crd_lock *l = crdt_lock(c, key);
    cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_OK);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    /* Node 2 fails; with no replica its slots are lost and the others say the cluster is
     * down once the node timeout (2 s) has passed. */
    cr_assert_eq(kill(cl->node[2].pid, SIGKILL), 0);
    waitpid(cl->node[2].pid, NULL, 0);
    cl->node[2].pid = 0;
    redisContext *r = crdt_cluster_redis(cl, 0);
    cr_assert(crdt_wait_until(cluster_failed, r, 20000), "node 0 never saw the cluster fail");
    int64_t t0 = crdt_now_ms();
    crd_status st = crd_lock_acquire(l, 0, 10000);
    int64_t took = crdt_now_ms() - t0;
    const char *msg = crd_client_errmsg(c);
    fprintf(stderr, "[deploy] CLUSTERDOWN: a try -> %s after %lld ms (%s)\n", crd_strerror(st),
            (long long)took, msg);
    cr_assert_eq(st, CRD_SERVER, "%s: %s", crd_strerror(st), msg);
    cr_assert(strstr(msg, "CLUSTERDOWN") != NULL && strstr(msg, "nothing ran") != NULL, "%s",
              msg);
    cr_assert_lt(took, 2000);
    /* DBSIZE names no key, so a failed cluster still answers it: nothing was written. */
    cr_assert_eq(crdt_cmd_int(r, "DBSIZE"), 0);
    redisFree(r);
    crd_lock_free(l);
    crd_client_free(c);
}
