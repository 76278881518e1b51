/*
 * test_multilock.c -- several locks all or nothing (crd_multilock), and what
 * crd_lock_run_policy and `credisson run --on-unavailable` do when Redis is unavailable.
 *
 * Multi-lock: one wait budget for the set; a name held by another owner past the wait
 * rolls back the ones taken (nothing left held, the failing lock named); 4 processes
 * taking random overlapping sets of 3 of 6 names never deadlock, never overlap
 * (an INCR/DECR detector per name) and every set is eventually acquired; locks of
 * different kinds and clients in one set; the CLI with several NAMEs.
 * Policies: fail, skip and degrade with the server stopped (through a proxy that refuses
 * connections), with a client that never started (AUTH refused), and with a restart
 * during the wait (the lock is then taken: no policy applies); the counters, the WARN
 * line, and the CLI's exit codes.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faultproxy.h"
#include "harness.h"

static crd_multilock *multi(crd_lock **locks, size_t n)
{
    crd_multilock *m = NULL;
    cr_assert_eq(crd_multilock_new(locks, n, &m), CRD_OK);
    return m;
}

Test(multilock, a_name_held_past_the_wait_rolls_back_the_others_and_is_named)
{
    /* b holds the fixture's key ("b") through lb; the set of a's locks takes "c", then the
     * fixture's la on "b", then "a". */
    crdt_fixture f;
    crdt_fixture_open(&f, 2, "b", crdt_lock);
    redisContext *r = f.r;
    const char *na = crdt_key("a"), *nb = f.key, *nc = crdt_key("c");
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 60000), CRD_OK); /* "held forever" */
    crd_lock *ls[3] = {crdt_lock(f.a, nc), f.la, crdt_lock(f.a, na)};
    crd_multilock *m = multi(ls, 3);
    int64_t t0 = crdt_now_ms();
    cr_expect_eq(crd_multilock_acquire(m, 400, CRD_LEASE_WATCHDOG), CRD_TIMEOUT);
    int64_t took = crdt_now_ms() - t0;
    cr_expect(took >= 400 && took < 2000, "the set gave up after %lld ms", (long long)took);
    cr_expect_eq(crd_multilock_failed(m), ls[1], "the held name is the one named");
    cr_expect_eq(crdt_exists(r, na), 0, "a was released again");
    cr_expect_eq(crdt_exists(r, nc), 0, "c was never taken");
    cr_expect_eq(crdt_hget_int(r, nb, ""), 0);
    cr_expect_eq(crd_multilock_acquire(m, 0, 1000), CRD_BUSY);
    cr_expect_eq(crdt_exists(r, na), 0);
    /* once b is free the set is taken whole and given back whole */
    cr_assert_eq(crd_lock_release(f.lb), CRD_OK);
    cr_assert_eq(crd_multilock_acquire(m, 1000, 5000), CRD_OK);
    cr_expect(crdt_exists(r, na) && crdt_exists(r, nb) && crdt_exists(r, nc));
    cr_expect_null(crd_multilock_failed(m));
    cr_assert_eq(crd_multilock_release(m), CRD_OK);
    cr_expect(!crdt_exists(r, na) && !crdt_exists(r, nb) && !crdt_exists(r, nc));
    crd_multilock_free(m);
    crd_lock_free(ls[0]);
    crd_lock_free(ls[2]);
    crdt_fixture_close(&f);
}

Test(multilock, a_set_mixes_kinds_and_clients_and_refuses_duplicates)
{
    crd_client *a = crdt_client(), *b = crdt_client();
    const char *n1 = crdt_key("one"), *n2 = crdt_key("two");
    crd_lock *fair = NULL;
    crd_rwlock *rw = NULL;
    cr_assert_eq(crd_fair_lock_new(b, n1, &fair), CRD_OK);
    cr_assert_eq(crd_rwlock_new(a, n2, &rw), CRD_OK);
    /* read and write of one name: the write lock is taken first, so the set works */
    crd_lock *ls[3] = {crd_rwlock_read(rw), fair, crd_rwlock_write(rw)};
    crd_multilock *m = multi(ls, 3);
    uint64_t owner = crd_owner_new();
    cr_assert_eq(crd_multilock_acquire_owner(m, owner, 1000, 5000), CRD_OK);
    bool held = false;
    cr_assert_eq(crd_lock_is_held_owner(fair, owner, &held), CRD_OK);
    cr_expect(held, "one owner across two clients");
    cr_assert_eq(crd_lock_is_held_owner(crd_rwlock_write(rw), owner, &held), CRD_OK);
    cr_expect(held);
    cr_assert_eq(crd_multilock_release_owner(m, owner), CRD_OK);
    redisContext *r = crdt_redis();
    cr_expect(!crdt_exists(r, n1) && !crdt_exists(r, n2));
    redisFree(r);
    crd_multilock_free(m);

    crd_multilock *bad = NULL;
    crd_lock *dup[2] = {fair, fair};
    cr_expect_eq(crd_multilock_new(dup, 2, &bad), CRD_INVALID_ARGUMENT);
    cr_expect(strstr(crd_client_errmsg(b), "twice") != NULL, "%s", crd_client_errmsg(b));
    crd_lock *nul[2] = {fair, NULL};
    cr_expect_eq(crd_multilock_new(nul, 2, &bad), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_multilock_new(ls, 0, &bad), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_multilock_acquire(NULL, 0, 0), CRD_INVALID_ARGUMENT);
    crd_multilock_free(NULL);
    crd_lock_free(fair);
    crd_rwlock_free(rw);
    crd_client_free(a);
    crd_client_free(b);
}

/* ---- overlapping sets from several processes ---------------------------------------------- */

#define NAMES 6
#define PICK 3
#define PROCS 4

struct overlap {
    char names[NAMES][128];
    int64_t seconds;
    int fd; /* each child writes its count of acquired sets */
};

static int overlap_worker(int index, void *arg)
{
    struct overlap *o = arg;
    crd_client *c = crdt_plain_client(crdt_port());
    redisContext *r = crdt_raw_connect(crdt_port(), 2000);
    if (c == NULL || r == NULL)
        return 10;
    crd_lock *locks[NAMES];
    for (int i = 0; i < NAMES; i++)
        if (crd_lock_new(c, o->names[i], &locks[i]) != CRD_OK)
            return 11;
    unsigned seed = (unsigned)(getpid() * 2654435761u + (unsigned)index);
    int64_t end = crdt_now_ms() + o->seconds * 1000;
    long sets = 0, overlaps = 0;
    while (crdt_now_ms() < end) {
        /* a random 3 of 6, in random order */
        int idx[NAMES] = {0, 1, 2, 3, 4, 5};
        for (int i = NAMES - 1; i > 0; i--) {
            int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
        crd_lock *set[PICK];
        for (int i = 0; i < PICK; i++)
            set[i] = locks[idx[i]];
        crd_multilock *m = NULL;
        if (crd_multilock_new(set, PICK, &m) != CRD_OK)
            return 12;
        /* a generous wait: running out of it would mean a deadlock */
        crd_status st = crd_multilock_acquire(m, 20000, 10000);
        if (st != CRD_OK)
            return 13;
        char inside[PICK][160];
        for (int i = 0; i < PICK; i++) {
            snprintf(inside[i], sizeof inside[i], "%s:inside", o->names[idx[i]]);
            redisReply *rep = redisCommand(r, "INCR %s", inside[i]);
            if (rep == NULL)
                return 14;
            overlaps += rep->integer != 1;
            freeReplyObject(rep);
        }
        for (int i = 0; i < PICK; i++) {
            redisReply *rep = redisCommand(r, "DECR %s", inside[i]);
            if (rep == NULL)
                return 14;
            freeReplyObject(rep);
        }
        if (crd_multilock_release(m) != CRD_OK)
            return 15;
        crd_multilock_free(m);
        sets++;
    }
    long rec[2] = {sets, overlaps};
    if (write(o->fd, rec, sizeof rec) != (ssize_t)sizeof rec)
        return 16;
    for (int i = 0; i < NAMES; i++)
        crd_lock_free(locks[i]);
    crd_client_free(c);
    redisFree(r);
    return 0;
}

Test(multilock, overlapping_sets_from_four_processes_never_deadlock_or_overlap, .timeout = 240)
{
    struct overlap o;
    for (int i = 0; i < NAMES; i++)
        snprintf(o.names[i], sizeof o.names[i], "%s", crdt_key(i == 0 ? "n0" : i == 1 ? "n1" :
                                                              i == 2 ? "n2" : i == 3 ? "n3" :
                                                              i == 4 ? "n4" : "n5"));
    /* CRDT_MULTILOCK_SECONDS (default 10) sets the run's length: 60 for the long run. */
    const char *env = getenv("CRDT_MULTILOCK_SECONDS");
    o.seconds = env != NULL && atoi(env) > 0 ? atoi(env) : 10;
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    o.fd = fds[1];
    int codes[PROCS];
    int ok = crdt_run_children(PROCS, overlap_worker, &o, (o.seconds + 60) * 1000, codes);
    close(fds[1]);
    cr_assert_eq(ok, PROCS, "children exited %d %d %d %d (13: a set not acquired in 20 s)",
                 codes[0], codes[1], codes[2], codes[3]);
    long total = 0, overlaps = 0, least = -1, rec[2];
    while (read(fds[0], rec, sizeof rec) == (ssize_t)sizeof rec) {
        total += rec[0];
        overlaps += rec[1];
        least = least < 0 || rec[0] < least ? rec[0] : least;
    }
    close(fds[0]);
    fprintf(stderr, "[multilock] %d processes, %lld s: %ld sets of %d of %d names, fewest per "
            "process %ld, %ld overlaps\n", PROCS, (long long)o.seconds, total, PICK, NAMES, least,
            overlaps);
    cr_expect_eq(overlaps, 0);
    cr_expect_gt(least, 0, "every process got its sets");
}

/* ---- policies ------------------------------------------------------------------------------ */

static atomic_int ran;
static int work(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ran, 1);
    return 7;
}

typedef struct warn_log {
    atomic_int warns;
} warn_log;

static void on_log(void *user, crd_log_level level, const char *msg)
{
    if (level == CRD_LOG_WARN && strstr(msg, "Redis unavailable") != NULL)
        atomic_fetch_add(&((warn_log *)user)->warns, 1);
}

static void *back_in_300_ms(void *arg)
{
    crdt_sleep_ms(300);
    crdt_proxy_set_refuse(arg, false);
    return NULL;
}

Test(multilock, run_policy_fail_skip_degrade_with_the_server_unreachable)
{
    crdt_proxy *p = crdt_proxy_start(crdt_port(), NULL);
    cr_assert_not_null(p);
    warn_log wl = {0};
    crd_options o;
    crdt_options(&o);
    o.port = crdt_proxy_port(p);
    o.connect_timeout_ms = 300;
    o.command_timeout_ms = 500;
    o.on_log = on_log;
    o.log_user_data = &wl;
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l = crdt_lock(c, crdt_key("p"));
    /* Redis up: the policy plays no part */
    int res = 0;
    atomic_store(&ran, 0);
    cr_assert_eq(crd_lock_run_policy(c, l, 0, 5000, CRD_UNAVAILABLE_DEGRADE, work, NULL, &res),
                 CRD_OK);
    cr_expect(atomic_load(&ran) == 1 && res == 7);
    /* Redis down. A no-wait acquire first, so that the client has seen it go: the policy
     * calls below wait 200 ms, and without it the first of them could end before the
     * cut was noticed (the proxy's close not yet read, or no reconnect tried yet, on a
     * loaded machine: once in a CI-style run under ASan), which is CRD_TIMEOUT -- the wait
     * ran out and nothing said Redis was gone -- not the outage this test is about. */
    cr_assert(crdt_proxy_set_refuse(p, true));
    crd_status seen = crd_lock_acquire(l, 0, 5000);
    cr_assert_eq(seen, CRD_IO, "%s: %s", crd_strerror(seen), crd_client_errmsg(c));
    atomic_store(&ran, 0);
    crd_status st = crd_lock_run_policy(c, l, 200, 5000, CRD_UNAVAILABLE_FAIL, work, NULL, &res);
    cr_expect_eq(st, CRD_IO, "%s: %s", crd_strerror(st), crd_client_errmsg(c));
    cr_expect_eq(atomic_load(&ran), 0);
    cr_expect_eq(crd_lock_run_policy(c, l, 200, 5000, CRD_UNAVAILABLE_SKIP, work, NULL, &res),
                 CRD_SKIPPED);
    cr_expect_eq(atomic_load(&ran), 0);
    res = 0;
    cr_expect_eq(crd_lock_run_policy(c, l, 200, 5000, CRD_UNAVAILABLE_DEGRADE, work, NULL, &res),
                 CRD_DEGRADED);
    cr_expect(atomic_load(&ran) == 1 && res == 7, "degrade runs the work");
    cr_expect(strstr(crd_client_errmsg(c), "without the lock") != NULL, "%s",
              crd_client_errmsg(c));
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(c, &m, sizeof m), CRD_OK);
    cr_expect_eq(m.runs_skipped, 1);
    cr_expect_eq(m.runs_degraded, 1);
    cr_expect_eq(atomic_load(&wl.warns), 2, "one WARN line each");
    cr_expect_eq(crd_lock_run_policy(c, l, 0, 5000, (crd_unavailable_policy)9, work, NULL, &res),
                 CRD_INVALID_ARGUMENT);
    /* the server comes back during the wait: the acquire succeeds within it, no policy
     * applies (the outage lasting 300 ms is the scenario) */
    atomic_store(&ran, 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, back_in_300_ms, p), 0);
    cr_expect_eq(crd_lock_run_policy(c, l, 3000, 5000, CRD_UNAVAILABLE_DEGRADE, work, NULL, &res),
                 CRD_OK);
    cr_expect_eq(atomic_load(&ran), 1);
    pthread_join(th, NULL);
    crd_lock_free(l);
    crd_client_free(c);
    crdt_proxy_stop(p);
}

Test(multilock, a_client_refused_at_start_takes_the_policy_with_no_lock)
{
    crdt_server srv;
    const char *args[] = {"--requirepass", "right", NULL};
    crdt_server_start(&srv, false, args, NULL, "right");
    crd_options o;
    crdt_options(&o);
    o.port = srv.port;
    o.password = "wrong";
    crd_client *c = NULL;
    cr_assert_eq(crd_client_new(&o, &c), CRD_AUTH);
    atomic_store(&ran, 0);
    int res = 0;
    cr_expect_eq(crd_lock_run_policy(c, NULL, 0, 1000, CRD_UNAVAILABLE_FAIL, work, NULL, &res),
                 CRD_CLOSED);
    cr_expect_eq(crd_lock_run_policy(c, NULL, 0, 1000, CRD_UNAVAILABLE_SKIP, work, NULL, &res),
                 CRD_SKIPPED);
    cr_expect_eq(crd_lock_run_policy(c, NULL, 0, 1000, CRD_UNAVAILABLE_DEGRADE, work, NULL, &res),
                 CRD_DEGRADED);
    cr_expect_eq(atomic_load(&ran), 1);
    crd_client_free(c);
    crdt_server_stop(&srv);
}

/* ---- the CLI ------------------------------------------------------------------------------ */

static int sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(multilock, cli_run_takes_several_names_and_follows_on_unavailable)
{
    char cmd[2048], mark[128];
    snprintf(mark, sizeof mark, "/tmp/crdt-multi-%d", (int)getpid());
    const char *a = crdt_key("ca"), *b = crdt_key("cb");
    /* all names held while CMD runs */
    snprintf(cmd, sizeof cmd,
             "'%s' --url redis://127.0.0.1:%d run '%s' '%s' -- sh -c "
             "'%s -p %d EXISTS %s %s > %s'",
             CRD_CLI_PATH, crdt_port(), a, b, crdt_redis_cli_path(), crdt_port(), a, b, mark);
    cr_assert_eq(sh(cmd), 0, "%s", cmd);
    FILE *f = fopen(mark, "r");
    cr_assert_not_null(f);
    char line[32] = "";
    cr_assert_not_null(fgets(line, sizeof line, f));
    fclose(f);
    cr_expect_str_eq(line, "2\n", "both locks existed inside CMD");
    /* one held by someone else: 75, none left held */
    crd_client *c = crdt_client();
    crd_lock *hb = crdt_lock(c, b);
    cr_assert_eq(crd_lock_acquire(hb, 0, 60000), CRD_OK);
    snprintf(cmd, sizeof cmd, "'%s' --url redis://127.0.0.1:%d run --wait 200 '%s' '%s' -- true",
             CRD_CLI_PATH, crdt_port(), a, b);
    cr_expect_eq(sh(cmd), 75);
    redisContext *r = crdt_redis();
    cr_expect_eq(crdt_exists(r, a), 0, "the set rolled back");
    redisFree(r);
    crd_lock_release(hb);
    crd_lock_free(hb);
    crd_client_free(c);
    /* Redis unreachable (nothing listens on port 1) */
    unlink(mark);
    snprintf(cmd, sizeof cmd, "'%s' --url redis://127.0.0.1:1 run x -- touch %s 2>/dev/null",
             CRD_CLI_PATH, mark);
    cr_expect_eq(sh(cmd), 69);
    cr_expect_neq(access(mark, F_OK), 0);
    snprintf(cmd, sizeof cmd,
             "'%s' --url redis://127.0.0.1:1 run --on-unavailable=skip x -- touch %s 2>/dev/null",
             CRD_CLI_PATH, mark);
    cr_expect_eq(sh(cmd), 0);
    cr_expect_neq(access(mark, F_OK), 0, "skip: CMD did not run");
    snprintf(cmd, sizeof cmd,
             "'%s' --url redis://127.0.0.1:1 run --on-unavailable=degrade x -- touch %s "
             "2>/dev/null",
             CRD_CLI_PATH, mark);
    cr_expect_eq(sh(cmd), 3, "degrade: a successful CMD without the lock exits 3");
    cr_expect_eq(access(mark, F_OK), 0, "degrade: CMD ran");
    snprintf(cmd, sizeof cmd,
             "'%s' --url redis://127.0.0.1:1 run --on-unavailable=degrade x -- sh -c 'exit 5' "
             "2>/dev/null",
             CRD_CLI_PATH);
    cr_expect_eq(sh(cmd), 5, "degrade: CMD's own failure is kept");
    unlink(mark);
}
