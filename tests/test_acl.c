/*
 * test_acl.c -- least privilege: the README's ACL rule sets are enough, and exactly
 * enough. Each feature (reentrant lock, fair lock, read-write lock) runs its operations
 * (acquire, a contended wake-up, a watchdog renewal, introspection, release,
 * force-unlock) under a user that has only that feature's rules, for lock names under
 * "crdt:*"; and a user missing one permission gets CRD_SERVER with the server's NOPERM
 * words, or (a refused SUBSCRIBE) a warning through on_log while waiters fall back to
 * re-checking.
 *
 * Finding: the scripts get the channel's name in KEYS (as Redisson's do), so a rule set
 * needs the channel both as a key pattern (~) and as a channel pattern (&).
 *
 * The rules below are the README's ("Least privilege: ACL rules"), with crdt:* as the
 * application's lock-name pattern. Keep the two in step.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "waiters.h"

#define PW ">s3cret"
/* Every feature. */
#define BASE "resetchannels", "+ping", "+evalsha", "+eval", "+script|load", "+subscribe", \
             "+unsubscribe", "+exists", "+hget", "+hexists", "+pttl"
/* Reentrant lock: its scripts' commands, the lock and latch keys, its channel (as a
 * channel, and as a key: the scripts get the channel's name in KEYS, as Redisson's do). */
#define LOCK_RULES "+hincrby", "+pexpire", "+del", "+get", "+set", "+publish", "+type", \
                   "+hlen", "+hkeys", "~crdt:*", "~redisson_unlock_latch:{crdt:*",       \
                   "~redisson_lock__channel:{crdt:*", "&redisson_lock__channel:{crdt:*"
/* Fair lock: the reentrant lock's rules, plus the queue and its deadlines. */
#define FAIR_RULES LOCK_RULES, "+hset", "+lindex", "+lpop", "+rpush", "+lrange", "+lrem", \
                   "+zadd", "+zincrby", "+zrange", "+zrem", "+zscore",                    \
                   "~redisson_lock_queue:{crdt:*", "~redisson_lock_timeout:{crdt:*"
/* Read-write lock: its own channel and the per-hold timeout keys {N}:...:rwlock_timeout:i. */
#define RW_RULES "+hincrby", "+pexpire", "+del", "+get", "+set", "+publish", "+type", "+hlen", \
                 "+hkeys", "+hset", "+hdel", "~crdt:*", "~{crdt:*",                          \
                 "~redisson_unlock_latch:{crdt:*", "~redisson_rwlock:{crdt:*",              \
                 "&redisson_rwlock:{crdt:*"

/* Fenced lock: the reentrant lock's rules plus its token counter. */
#define FENCED_RULES "+incr", "~redisson_lock_token:{crdt:*"
/* The identity record every client keeps by default (crd_options.identity, README). */
#define IDENTITY_RULES "+hset", "+hdel", "+del", "+pexpire", "+pttl", "+zadd",               \
                       "+zremrangebyscore", "+zrem", "~{credisson}:*"
/* The CLI's status, list and watch on top of the reentrant lock's rules (README): the
 * state's script (inspect_read.lua) and the identity records' (ident_read.lua), SCAN,
 * and watch's own connections. */
#define CLI_RULES "+type", "+pttl", "+hlen", "+hgetall", "+hscan", "+llen", "+lrange",       \
                  "+zscore", "+get", "+zcard", "+zrange", "+scan", "+pubsub|numsub",          \
                  "+pubsub|shardnumsub", "~{crdt:*", "~redisson_lock_queue:{crdt:*",          \
                  "~redisson_lock_timeout:{crdt:*", "~redisson_lock_token:{crdt:*",           \
                  "~{credisson}:*", "+multi", "+exec", "+exists", "+client|id",               \
                  "+client|tracking", "+config|get", "+psubscribe",                          \
                  "&redisson_rwlock:{crdt:*", "&__keyspace@0__:crdt:*",                      \
                  "&__redis__:invalidate", "&redisson_sc:{crdt:*",                           \
                  "&redisson_countdownlatch__channel__{crdt:*"

static crdt_server g_srv;

static void start(void)
{
    /* One server, one user per feature plus users that each miss one permission. */
    static const char *const args[] = {
        "--user", "locks", "on", PW, BASE, LOCK_RULES, IDENTITY_RULES,
        "--user", "fair", "on", PW, BASE, FAIR_RULES, IDENTITY_RULES,
        "--user", "rw", "on", PW, BASE, RW_RULES, IDENTITY_RULES,
        "--user", "cli", "on", PW, BASE, LOCK_RULES, FENCED_RULES, IDENTITY_RULES, CLI_RULES,
        /* The lock rules without the identity record's: the locks work the same. */
        "--user", "noidentity", "on", PW, BASE, LOCK_RULES,
        /* The lock rules without EVALSHA and EVAL. */
        "--user", "noscripts", "on", PW, "resetchannels", "+ping", "+exists", "+hget",
        "+hexists", "+pttl", "~crdt:*", "&redisson_lock__channel:{crdt:*",
        /* The lock rules with another key pattern. */
        "--user", "otherkeys", "on", PW, BASE, "+hincrby", "+pexpire", "+del", "+get",
        "+set", "+publish", "~app:*", "~redisson_lock__channel:{crdt:*",
        "&redisson_lock__channel:{crdt:*",
        /* The lock rules without the SUBSCRIBE command. */
        "--user", "nosubscribe", "on", PW, "resetchannels", "+ping", "+evalsha", "+eval",
        "+script|load", "+exists", "+hget", "+hexists", "+pttl", LOCK_RULES, IDENTITY_RULES,
        /* The lock rules without the channel. */
        "--user", "nochannel", "on", PW, "resetchannels", "+ping", "+evalsha", "+eval",
        "+script|load", "+subscribe", "+unsubscribe", "+exists", "+hget", "+hexists", "+pttl",
        "+hincrby", "+pexpire", "+del", "+get", "+set", "+publish", "~crdt:*",
        "~redisson_unlock_latch:{crdt:*", "~redisson_lock__channel:{crdt:*", NULL};
    crdt_server_start(&g_srv, false, args, NULL, NULL);
}

static crd_client *client_as(const char *user, crd_options *o)
{
    crd_options_init(o);
    o->host = "127.0.0.1";
    crdt_options_port(o, g_srv.port);
    o->username = user;
    o->password = "s3cret";
    return crdt_client_opts(o);
}

static bool has_channel(void *arg)
{
    return crdt_pubsub_channels_count(arg, "redisson_*") > 0;
}

/* Acquire, a second client's waiter woken by the release, introspection, force-unlock. */
static void exercise(crd_client *a, crd_client *b, crd_lock *la, crd_lock *lb, const char *what)
{
    cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s acquire: %s", what,
                 crd_client_errmsg(a));
    bool held = false;
    int64_t n = 0, ttl = 0;
    cr_assert_eq(crd_lock_is_held(la, &held), CRD_OK, "%s: %s", what, crd_client_errmsg(a));
    cr_assert(held);
    cr_assert_eq(crd_lock_hold_count(la, &n), CRD_OK, "%s: %s", what, crd_client_errmsg(a));
    cr_assert_eq(n, 1);
    cr_assert_eq(crd_lock_remaining_ttl(la, &ttl), CRD_OK, "%s: %s", what, crd_client_errmsg(a));
    bool locked = false;
    cr_assert_eq(crd_lock_is_locked(lb, &locked), CRD_OK, "%s: %s", what, crd_client_errmsg(b));
    cr_assert(locked);

    crdt_waiter w = {.lock = lb, .wait_ms = 10000, .lease_ms = 10000, .client = b};
    crdt_waiter_start(&w);
    /* Blocked (subscribed) before the release, or the wake-up proves nothing. */
    redisContext *r = crdt_redis_port(g_srv.port);
    cr_assert(crdt_wait_until(has_channel, r, 5000), "%s: the waiter never subscribed", what);
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(la), CRD_OK, "%s release: %s", what, crd_client_errmsg(a));
    cr_assert(crdt_waiter_wait(&w, CRDT_WAITER_RETURNED, 3000), "%s: the waiter was not woken",
              what);
    cr_assert_eq(w.acquire_st, CRD_OK, "%s: waiter got %s", what, crd_strerror(w.acquire_st));
    cr_assert(w.t_acq_ms - t0 < 2000, "%s: woken after %lld ms", what,
              (long long)(w.t_acq_ms - t0));
    crdt_waiter_join(&w, 5000, what);

    cr_assert_eq(crd_lock_acquire(la, 0, 10000), CRD_OK, "%s: %s", what, crd_client_errmsg(a));
    bool was = false;
    cr_assert_eq(crd_lock_force_unlock(lb, &was), CRD_OK, "%s force-unlock: %s", what,
                 crd_client_errmsg(b));
    cr_assert(was);
    cr_assert_eq(crd_lock_release(la), CRD_LOCK_LOST, "%s: %s", what, crd_client_errmsg(a));
    redisFree(r);
}

/* A lock kind's constructor. */
typedef crd_status (*new_fn)(crd_client *, const char *, crd_lock **);

static void renew_under(const char *user, new_fn mk, const char *name)
{
    crd_options o;
    crd_options_init(&o);
    o.host = "127.0.0.1";
    crdt_options_port(&o, g_srv.port);
    o.username = user;
    o.password = "s3cret";
    o.watchdog_timeout_ms = 300;
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l = NULL;
    cr_assert_eq(mk(c, name, &l), CRD_OK);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s", crd_client_errmsg(c));
    cr_assert(crdt_await_metric(c, CRDT_METRIC(renewals), 2, UINT64_MAX, 3000), "%s: no renewals",
              user);
    crd_metrics m;
    crd_client_metrics(c, &m, sizeof m);
    cr_assert_eq(m.renewal_failures, 0, "%s: renewals failed", user);
    cr_assert_eq(crd_lock_release(l), CRD_OK, "%s", crd_client_errmsg(c));
    crd_lock_free(l);
    crd_client_free(c);
}

static crd_status read_of(crd_client *c, const char *name, crd_lock **out)
{
    static crd_rwlock *keep[4];
    static int n;
    crd_status st = crd_rwlock_new(c, name, &keep[n % 4]);
    *out = crd_rwlock_read(keep[n++ % 4]);
    return st; /* freed with the process: a test of rules, not of handles */
}

/* Two clients logged in as user exercise one lock of a kind (made by mk, key
 * crdt_key(suffix)), then one watchdog hold renews under the same user's rules. */
static void exercise_kind(const char *user, new_fn mk, const char *suffix, const char *what)
{
    crd_options o;
    crd_client *a = client_as(user, &o), *b = client_as(user, &o);
    const char *key = crdt_key(suffix);
    crd_lock *la = NULL, *lb = NULL;
    cr_assert_eq(mk(a, key, &la), CRD_OK);
    cr_assert_eq(mk(b, key, &lb), CRD_OK);
    exercise(a, b, la, lb, what);
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
    renew_under(user, mk, crdt_key("renewed"));
}

Test(acl, the_lock_rules_are_enough_for_every_reentrant_lock_operation, .init = start)
{
    exercise_kind("locks", crd_lock_new, "rlock", "reentrant lock");
    crdt_server_stop(&g_srv);
}

Test(acl, the_fair_rules_are_enough_for_every_fair_lock_operation, .init = start)
{
    exercise_kind("fair", crd_fair_lock_new, "fair", "fair lock");
    crdt_server_stop(&g_srv);
}

Test(acl, the_rw_rules_are_enough_for_every_read_write_lock_operation, .init = start)
{
    crd_options o;
    crd_client *a = client_as("rw", &o), *b = client_as("rw", &o);
    const char *key = crdt_key("rw");
    crd_rwlock *ra = NULL, *rb = NULL;
    cr_assert_eq(crd_rwlock_new(a, key, &ra), CRD_OK);
    cr_assert_eq(crd_rwlock_new(b, key, &rb), CRD_OK);
    /* A writer blocks a reader; its release wakes the reader. */
    exercise(a, b, crd_rwlock_write(ra), crd_rwlock_write(rb), "write lock");
    /* Readers share; a read hold is renewed with its timeout key. */
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(ra), 0, 10000), CRD_OK, "%s",
                 crd_client_errmsg(a));
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(rb), 0, 10000), CRD_OK, "%s",
                 crd_client_errmsg(b));
    cr_assert_eq(crd_lock_release(crd_rwlock_read(ra)), CRD_OK, "%s", crd_client_errmsg(a));
    cr_assert_eq(crd_lock_release(crd_rwlock_read(rb)), CRD_OK, "%s", crd_client_errmsg(b));
    crd_rwlock_free(ra);
    crd_rwlock_free(rb);
    crd_client_free(a);
    crd_client_free(b);
    renew_under("rw", read_of, crdt_key("renewed"));
    crdt_server_stop(&g_srv);
}

static void expect_noperm(crd_client *c, crd_status st, const char *words)
{
    cr_assert_eq(st, CRD_SERVER, "got %s (%s)", crd_strerror(st), crd_client_errmsg(c));
    cr_assert(strstr(crd_client_errmsg(c), "NOPERM") != NULL &&
                  strstr(crd_client_errmsg(c), words) != NULL,
              "message \"%s\" lacks NOPERM and \"%s\"", crd_client_errmsg(c), words);
}

Test(acl, a_missing_command_or_key_permission_fails_with_the_servers_noperm_words, .init = start)
{
    crd_options o;
    crd_client *c = client_as("noscripts", &o);
    crd_lock *l = crdt_lock(c, crdt_key("l"));
    expect_noperm(c, crd_lock_acquire(l, 0, 10000), "evalsha");
    crd_lock_free(l);
    crd_client_free(c);

    c = client_as("otherkeys", &o);
    l = crdt_lock(c, crdt_key("l"));
    expect_noperm(c, crd_lock_acquire(l, 0, 10000), "key");
    crd_lock_free(l);
    crd_client_free(c);

    /* Without the channel the unlock script cannot publish: the release fails with the
     * server's words. (Redis does not roll a script back: the hash is already gone when
     * its PUBLISH is refused, which is why the channel is in every rule set.) */
    c = client_as("nochannel", &o);
    l = crdt_lock(c, crdt_key("n"));
    cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_OK, "%s", crd_client_errmsg(c));
    crd_status st = crd_lock_release(l);
    cr_assert_eq(st, CRD_SERVER, "got %s (%s)", crd_strerror(st), crd_client_errmsg(c));
    /* Redis 7.0's words inside a script ("NOPERM ... channel" outside one). */
    cr_assert(strstr(crd_client_errmsg(c), "can't publish to the channel") != NULL ||
                  strstr(crd_client_errmsg(c), "NOPERM") != NULL,
              "message \"%s\" does not name the channel permission", crd_client_errmsg(c));
    crd_lock_free(l);
    crd_client_free(c);
    crdt_server_stop(&g_srv);
}

struct logrec {
    pthread_mutex_t mu;
    char text[512];
};

static void on_log(void *user, crd_log_level level, const char *message)
{
    struct logrec *lr = user;
    pthread_mutex_lock(&lr->mu);
    if (level == CRD_LOG_WARN && strstr(message, "NOPERM") != NULL && lr->text[0] == '\0')
        snprintf(lr->text, sizeof lr->text, "%s", message);
    pthread_mutex_unlock(&lr->mu);
}

static bool logged(void *arg)
{
    struct logrec *lr = arg;
    pthread_mutex_lock(&lr->mu);
    bool yes = lr->text[0] != '\0';
    pthread_mutex_unlock(&lr->mu);
    return yes;
}

Test(acl, a_refused_subscribe_is_logged_and_the_waiter_still_gets_the_lock_by_rechecking,
     .init = start)
{
    static struct logrec lr = {PTHREAD_MUTEX_INITIALIZER, ""};
    crd_options o;
    crd_client *a = client_as("nosubscribe", &o);
    crd_options_init(&o);
    o.host = "127.0.0.1";
    crdt_options_port(&o, g_srv.port);
    o.username = "nosubscribe";
    o.password = "s3cret";
    o.subscription_timeout_ms = 200;
    o.poll_interval_ms = 100;
    o.on_log = on_log;
    o.log_user_data = &lr;
    crd_client *b = crdt_client_opts(&o);
    const char *key = crdt_key("l");
    crd_lock *la = crdt_lock(a, key), *lb = crdt_lock(b, key);
    cr_assert_eq(crd_lock_acquire(la, 0, 500), CRD_OK, "%s", crd_client_errmsg(a));
    cr_assert_eq(crd_lock_acquire(lb, 5000, 10000), CRD_OK, "%s", crd_client_errmsg(b));
    cr_assert(crdt_wait_until(logged, &lr, 2000), "no warning about the refused SUBSCRIBE");
    cr_assert(strstr(lr.text, "re-check") != NULL, "%s", lr.text);
    cr_assert_eq(crd_lock_release(lb), CRD_OK);
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
    crdt_server_stop(&g_srv);
}

static bool logged_text(void *arg) { return ((char *)arg)[0] != '\0'; }

/* Runs the CLI as user cli; returns its exit status and its stderr in err. */
static int cli_as(const char *args, char *err, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' --url redis://cli:s3cret@127.0.0.1:%d %s", CRD_CLI_PATH,
             g_srv.port, args);
    return crdt_run_stderr(cmd, err, cap);
}

Test(acl, the_cli_rules_are_enough_for_run_status_watch_and_list, .init = start)
{
    char args[512], err[1024];
    const char *name = crdt_key("cli");
    const char *cmds[5][2] = {{"run", "-- true"}, {"run --fenced", "-- true"}, {"status", ""},
                              {"watch --timeout 300", ""}, {"list", ""}};
    for (int i = 0; i < 5; i++) {
        snprintf(args, sizeof args, "%s '%s' %s", cmds[i][0], name, cmds[i][1]);
        cr_expect_eq(cli_as(args, err, sizeof err), 0, "%s: %s", args, err);
        /* watch may say that the fair waiters' pattern is not granted (see the README) */
        cr_expect(strstr(err, "NOPERM") == NULL || strstr(err, "fair-lock waiters") != NULL,
                  "%s: %s", args, err);
    }
}

/* on_log: keeps the first warning. */
static void keep_warning(void *user, crd_log_level level, const char *message)
{
    char *buf = user;
    if (level >= CRD_LOG_WARN && buf[0] == '\0')
        snprintf(buf, 512, "%s", message);
}

Test(acl, without_the_identity_rules_the_locks_work_and_the_refusal_is_logged_once, .init = start)
{
    static char warned[512];
    crd_options o;
    crd_options_init(&o);
    o.host = "127.0.0.1";
    crdt_options_port(&o, g_srv.port);
    o.username = "noidentity";
    o.password = "s3cret";
    o.on_log = keep_warning;
    o.log_user_data = warned;
    crd_client *a = crdt_client_opts(&o);
    o.on_log = NULL;
    crd_client *b = crdt_client_opts(&o);
    const char *key = crdt_key("noident");
    crd_lock *la = crdt_lock(a, key), *lb = crdt_lock(b, key);
    exercise(a, b, la, lb, "noidentity");
    cr_assert(crdt_wait_until(logged_text, warned, 2000), "the refused record was not logged");
    cr_assert(strstr(warned, "identity record") != NULL && strstr(warned, "NOPERM") != NULL,
              "%s", warned);
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
    crdt_server_stop(&g_srv);
}
