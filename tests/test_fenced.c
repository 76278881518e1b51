/*
 * test_fenced.c -- the fenced lock (Redisson RFencedLock, PROTOCOL.md 9): every acquire,
 * re-entry included, draws a token from redisson_lock_token:{N}; tokens strictly increase
 * across clients and processes; crd_lock_token reads the counter (0 when absent); a
 * holder paused past its lease has its write refused by a store that remembers the
 * newest token (examples/fenced_store.h); a hold whose counter vanished is reported lost
 * by the watchdog; the CLI hands the token to CMD. Golden parity with Java's recordings
 * is in test_golden (o_fenced_lock, y_fenced_reentry_and_delete).
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../examples/fenced_store.h"
#include "harness.h"
#include "standalone/events.h"

static crd_lock *fenced(crd_client *c, const char *name)
{
    crd_lock *l = NULL;
    cr_assert_eq(crd_fenced_lock_new(c, name, &l), CRD_OK, "%s", crd_client_errmsg(c));
    return l;
}

static char token_key[512];

static const char *token_key_of(const char *name)
{
    snprintf(token_key, sizeof token_key, "redisson_lock_token:{%s}", name);
    return token_key;
}

Test(fenced, every_acquire_and_reentry_draws_a_larger_token_and_release_keeps_the_counter)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 2, "fe", fenced);
    int64_t t = -1;
    cr_assert_eq(crd_lock_token(f.la, &t), CRD_OK);
    cr_expect_eq(t, 0, "no counter yet: 0, as Java's getToken()");

    int64_t t1 = 0, t2 = 0, t3 = 0;
    cr_assert_eq(crd_lock_acquire_token(f.la, 0, CRD_LEASE_WATCHDOG, &t1), CRD_OK);
    cr_assert_eq(crd_lock_acquire_token(f.la, 0, CRD_LEASE_WATCHDOG, &t2), CRD_OK);
    cr_expect_eq(t1, 1);
    cr_expect_eq(t2, 2, "re-entry draws a token too");
    int64_t count = 0;
    cr_assert_eq(crd_lock_hold_count(f.la, &count), CRD_OK);
    cr_expect_eq(count, 2);
    cr_expect_gt(crdt_pttl(f.r, f.key), 0, "the hash always has a TTL");
    cr_expect_eq(crdt_pttl(f.r, token_key_of(f.key)), -1, "the counter has no TTL");

    /* B waits while A holds it, then gets a larger token */
    cr_expect_eq(crd_lock_acquire_token(f.lb, 0, CRD_LEASE_WATCHDOG, &t3), CRD_BUSY);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    cr_expect_eq(crdt_exists(f.r, f.key), 0);
    cr_expect_eq(crdt_exists(f.r, token_key_of(f.key)), 1, "a release never deletes the counter");
    cr_assert_eq(crd_lock_acquire_token(f.lb, 1000, 10000, &t3), CRD_OK);
    cr_expect_eq(t3, 3);
    /* a plain acquire (Java's lock()) draws one without returning it */
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 10000), CRD_OK);
    cr_assert_eq(crd_lock_token(f.lb, &t), CRD_OK);
    cr_expect_eq(t, 4);
    cr_assert_eq(crd_lock_release(f.lb), CRD_OK);
    cr_assert_eq(crd_lock_release(f.lb), CRD_OK);
    crdt_fixture_close(&f);
}

Test(fenced, tokens_are_refused_on_other_kinds_and_bad_arguments)
{
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, crdt_key("plain"));
    int64_t t = 0;
    cr_expect_eq(crd_lock_acquire_token(l, 0, 1000, &t), CRD_INVALID_ARGUMENT);
    cr_expect(strstr(crd_client_errmsg(c), "not a fenced lock") != NULL, "%s",
              crd_client_errmsg(c));
    cr_expect_eq(crd_lock_token(l, &t), CRD_INVALID_ARGUMENT);
    crd_lock *f = fenced(c, crdt_key("f"));
    cr_expect_eq(crd_lock_acquire_token(f, 0, 1000, NULL), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_lock_token(f, NULL), CRD_INVALID_ARGUMENT);
    cr_expect_eq(crd_lock_acquire_token(NULL, 0, 1000, &t), CRD_INVALID_ARGUMENT);
    /* a counter that is not a number: the server's words, no token */
    redisContext *r = crdt_redis();
    freeReplyObject(crdt_cmd(r, "SET %s %s", token_key_of(crd_lock_name(f, NULL)), "abc"));
    cr_expect_eq(crd_lock_acquire_token(f, 0, 1000, &t), CRD_SERVER);
    cr_expect(strstr(crd_client_errmsg(c), "not an integer") != NULL, "%s", crd_client_errmsg(c));
    cr_expect_eq(crdt_exists(r, crd_lock_name(f, NULL)), 0, "a failed script wrote nothing");
    redisFree(r);
    crd_lock_free(l);
    crd_lock_free(f);
    crd_client_free(c);
}

/* ---- tokens strictly increase across processes ------------------------------------------- */

#define PROCS 3
#define ROUNDS 40

struct proc_arg {
    const char *name;
    int fd; /* write end of the pipe the tokens go to */
};

static int taker(int index, void *arg)
{
    struct proc_arg *p = arg;
    crd_client *c = crdt_plain_client(crdt_port());
    if (c == NULL)
        return 10;
    crd_lock *l = NULL;
    if (crd_fenced_lock_new(c, p->name, &l) != CRD_OK)
        return 11;
    int64_t last = 0;
    for (int i = 0; i < ROUNDS; i++) {
        int64_t t = 0;
        if (crd_lock_acquire_token(l, 10000, 5000, &t) != CRD_OK)
            return 12;
        if (t <= last)
            return 13; /* not increasing within this process */
        last = t;
        int64_t rec[2] = {index, t};
        if (write(p->fd, rec, sizeof rec) != (ssize_t)sizeof rec)
            return 14;
        if (crd_lock_release(l) != CRD_OK)
            return 15;
    }
    crd_lock_free(l);
    crd_client_free(c);
    return 0;
}

Test(fenced, tokens_strictly_increase_across_processes_and_none_is_drawn_twice, .timeout = 60)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    struct proc_arg p = {crdt_key("procs"), fds[1]};
    int codes[PROCS];
    int ok = crdt_run_children(PROCS, taker, &p, 50000, codes);
    close(fds[1]);
    cr_assert_eq(ok, PROCS, "children exited %d %d %d", codes[0], codes[1], codes[2]);
    int64_t tokens[PROCS * ROUNDS];
    int n = 0;
    int64_t rec[2];
    while (read(fds[0], rec, sizeof rec) == (ssize_t)sizeof rec && n < PROCS * ROUNDS)
        tokens[n++] = rec[1];
    close(fds[0]);
    cr_assert_eq(n, PROCS * ROUNDS);
    crdt_sort_i64(tokens, n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(tokens[i], i + 1, "every token 1..%d drawn exactly once", n);
}

/* ---- the pause problem ------------------------------------------------------------------- */

Test(fenced, a_holder_paused_past_its_lease_has_its_write_refused_by_the_store)
{
    crdt_fixture fx;
    crdt_fixture_open(&fx, 2, "ledger", fenced);
    char store[256];
    snprintf(store, sizeof store, "/tmp/crdt-fenced-%d-%s.txt", (int)getpid(), "ledger");
    unlink(store);
    int64_t ta = 0, tb = 0, seen = 0;
    cr_assert_eq(crd_lock_acquire_token(fx.la, 0, 300, &ta), CRD_OK);
    cr_assert_eq(fenced_store_write(store, ta, "a-before", &seen), 1);
    /* A stalls (a GC pause, SIGSTOP): its lease runs out, B takes the lock and writes. */
    cr_assert(crdt_await_exists(fx.r, fx.key, false, 5000), "A's lease did not run out");
    cr_assert_eq(crd_lock_acquire_token(fx.lb, 1000, 10000, &tb), CRD_OK);
    cr_expect_gt(tb, ta);
    cr_assert_eq(fenced_store_write(store, tb, "b", &seen), 1);
    /* A wakes up believing it still holds the lock: the store refuses its write. */
    cr_expect_eq(fenced_store_write(store, ta, "a-after-the-pause", &seen), 0);
    cr_expect_eq(seen, tb);
    FILE *f = fopen(store, "r");
    cr_assert_not_null(f);
    char line[128] = "";
    cr_assert_not_null(fgets(line, sizeof line, f));
    fclose(f);
    char want[128];
    snprintf(want, sizeof want, "%lld b\n", (long long)tb);
    cr_expect_str_eq(line, want);
    cr_expect_eq(crd_lock_release(fx.la), CRD_LOCK_LOST, "A learns its hold was lost");
    cr_assert_eq(crd_lock_release(fx.lb), CRD_OK);
    unlink(store);
    crdt_fixture_close(&fx);
}

/* ---- a vanished counter ------------------------------------------------------------------ */

Test(fenced, a_hold_whose_counter_vanished_is_reported_lost_by_the_watchdog)
{
    const char *name = crdt_key("deleted");
    crdt_events seen;
    crd_options o;
    crdt_options(&o);
    o.watchdog_timeout_ms = crdt_scaled_ms(900); /* renewals every 300 ms */
    crdt_events_attach(&seen, &o);
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l = fenced(c, name);
    int64_t t = 0;
    cr_assert_eq(crd_lock_acquire_token(l, 0, CRD_LEASE_WATCHDOG, &t), CRD_OK);
    redisContext *r = crdt_redis();
    /* one renewal goes through while the counter is there */
    cr_assert(crdt_await_exists(r, name, true, 100));
    /* Java's RFencedLock.delete() on the counter alone (it deletes both; the hash part is
     * an ordinary force-unlock): tokens would start again at 1 */
    cr_assert_eq(crdt_cmd_int(r, "DEL %s", token_key_of(name)), 1);
    cr_assert(crdt_events_await_lost(&seen, 1, crdt_scaled_ms(3000)),
              "no LOCK_LOST within a few renewal periods");
    cr_expect_eq(crd_lock_release(l), CRD_LOCK_LOST);
    redisFree(r);
    crd_lock_free(l);
    crd_client_free(c);
}

/* ---- the CLI ------------------------------------------------------------------------------ */

Test(fenced, cli_run_fenced_hands_the_token_to_cmd_and_status_shows_it)
{
    const char *name = crdt_key("cli");
    char out[256], cmd[4096], url[64];
    snprintf(out, sizeof out, "/tmp/crdt-fenced-cli-%d.txt", (int)getpid());
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", crdt_port());
    unlink(out);
    snprintf(cmd, sizeof cmd,
             "'%s' --url %s run --fenced '%s' -- sh -c 'echo $CREDISSON_TOKEN > %s' && "
             "'%s' --url %s run --fenced '%s' -- sh -c 'echo $CREDISSON_TOKEN >> %s' && "
             "'%s' --url %s status '%s' | grep '^token:' >> %s",
             CRD_CLI_PATH, url, name, out, CRD_CLI_PATH, url, name, out, CRD_CLI_PATH, url, name,
             out);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    FILE *f = fopen(out, "r");
    cr_assert_not_null(f);
    char l1[64] = "", l2[64] = "", l3[64] = "";
    cr_assert(fgets(l1, sizeof l1, f) && fgets(l2, sizeof l2, f) && fgets(l3, sizeof l3, f));
    fclose(f);
    unlink(out);
    cr_expect_str_eq(l1, "1\n");
    cr_expect_str_eq(l2, "2\n");
    cr_expect_str_eq(l3, "token: 2\n");
}
