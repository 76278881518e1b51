/*
 * test_r47_topology.c -- Redisson 4.7's family on Redis Cluster and through Sentinel: a
 * grouped lock whose name has its own hash tag and one that has none, each on the
 * primary of its slot, excluding value by value and woken by sharded messages; the
 * non-reentrant, spin and rate limiter objects routed to the primary of their name's slot;
 * eight processes sharing 50 permits a second through a cluster (2 s window here; the
 * standalone run, tests/test_r47.c, has the 3 s one and `make soak-r47` 10 s); and the
 * rate limiter, the grouped lock and an interrupted fair waiter through Sentinel.
 * The r47_cluster_* recordings are replayed by tests/test_golden_r47.c.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "harness.h"
#include "sentinel.h"

typedef struct gwait {
    crd_lock *l;
    crd_status st;
    atomic_int done;
    int64_t done_at;
} gwait;

static void *gwait_main(void *arg)
{
    gwait *w = arg;
    w->st = crd_lock_acquire(w->l, 10000, 10000);
    w->done_at = crdt_now_ms();
    atomic_store(&w->done, 1);
    return NULL;
}

static bool gwait_done(void *arg) { return atomic_load(&((gwait *)arg)->done) != 0; }

/* Eight processes on the cluster share 50 permits a second for window_ms. */
enum { PROCS = 8, RATE = 50 };

typedef struct rlshare {
    char url[600];
    const char *name;
    int64_t start, window_ms;
    int fds[2];
} rlshare;

static int rl_proc(int index, void *arg)
{
    (void)index;
    const rlshare *sh = arg;
    crd_client *c = crdt_cluster_child_client(sh->url);
    if (c == NULL)
        return 2;
    crd_rate_limiter *rl = NULL;
    if (crd_rate_limiter_new(c, sh->name, &rl) != CRD_OK)
        return 3;
    while (crdt_now_ms() < sh->start) /* the common start, on this host's clock */
        crdt_sleep_ms(sh->start - crdt_now_ms());
    int64_t end = sh->start + sh->window_ms;
    int got = 0, fails = 0;
    for (int64_t left; (left = end - crdt_now_ms()) > 0;) {
        crd_status st = crd_rate_limiter_acquire(rl, 1, left);
        if (st == CRD_OK && crdt_now_ms() <= end)
            got++;
        else if (st != CRD_OK && st != CRD_TIMEOUT)
            fails++;
    }
    ssize_t w = write(sh->fds[1], &got, sizeof got);
    (void)w;
    crd_rate_limiter_free(rl);
    crd_client_free(c);
    return fails > 0 ? 1 : 0;
}

Test(r47_topology, the_family_on_a_cluster_routes_excludes_and_shares_one_rate, .timeout = 120)
{
    crdt_cluster cl;
    crdt_cluster_start(&cl, 3, 0);
    crd_options o;
    crdt_cluster_options(&cl, &o);
    crd_client *a = crdt_client_opts(&o), *b = crdt_client_opts(&o);
    /* grouped locks: a group with its own tag and one without, on their slots' primaries */
    const char *const abc[] = {"a", "b", "c"}, *const cd[] = {"c", "d"};
    const char *groups[2] = {"{g}1", crdt_cluster_name_on(&cl, 2, "grp")};
    for (int i = 0; i < 2; i++) {
        crd_lock *la = NULL, *lb = NULL;
        cr_assert_eq(crd_group_lock_new(a, groups[i], abc, 3, &la), CRD_OK);
        cr_assert_eq(crd_group_lock_new(b, groups[i], cd, 2, &lb), CRD_OK);
        cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK, "%s: %s", groups[i],
                     crd_client_errmsg(a));
        redisContext *r = crdt_cluster_redis_for_key(&cl, groups[i]);
        cr_expect_eq(crdt_cmd_int(r, "HLEN %s", groups[i]), 9, "on its slot's primary");
        gwait w = {lb, CRD_IO, 0, 0};
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, gwait_main, &w), 0);
        char ch[200];
        snprintf(ch, sizeof ch, "redisson_lock__channel:%s", i == 0 ? "{g}1" : "");
        if (i == 1)
            snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", groups[i]);
        /* it waits on the sharded channel of the group's slot */
        crdt_probe sub = {.r = r, .name = ch};
        cr_expect(crdt_wait_until(crdt_cluster_shard_subscribed, &sub, 5000),
                  "%s: one sharded subscriber", ch);
        cr_expect_not(gwait_done(&w), "c is held");
        int64_t released = crdt_now_ms();
        cr_assert_eq(crd_lock_release(la), CRD_OK);
        cr_assert(crdt_wait_until(gwait_done, &w, 5000));
        pthread_join(th, NULL);
        cr_expect_eq(w.st, CRD_OK);
        cr_expect_lt(w.done_at - released, crdt_scaled_ms(200), "%s: woken by SPUBLISH", groups[i]);
        bool was = false;
        cr_assert_eq(crd_lock_force_unlock(lb, &was), CRD_OK); /* the waiter's thread ended */
        cr_expect(was);
        crd_lock_free(la);
        crd_lock_free(lb);
        redisFree(r);
    }
    /* a group name whose braces split its keys is refused, as a lock name is */
    crd_lock *bad = NULL;
    cr_expect_eq(crd_group_lock_new(a, "x}y", abc, 3, &bad), CRD_INVALID_ARGUMENT);
    /* non-reentrant and spin locks on a cluster */
    crd_lock *nr = NULL, *sp = NULL;
    const char *nrname = crdt_cluster_name_on(&cl, 1, "nr");
    cr_assert_eq(crd_nonreentrant_lock_new(a, nrname, &nr), CRD_OK);
    cr_assert_eq(crd_lock_acquire(nr, 0, 10000), CRD_OK);
    cr_expect_eq(crd_lock_acquire(nr, 5000, 10000), CRD_DEADLOCK);
    cr_assert_eq(crd_lock_release(nr), CRD_OK);
    cr_assert_eq(crd_spin_lock_new(a, crdt_cluster_name_on(&cl, 0, "spin"), &sp), CRD_OK);
    cr_assert_eq(crd_lock_acquire(sp, 1000, 10000), CRD_OK);
    cr_assert_eq(crd_lock_release(sp), CRD_OK);
    crd_lock_free(nr);
    crd_lock_free(sp);
    /* eight processes, one rate */
    rlshare sh;
    memset(&sh, 0, sizeof sh);
    snprintf(sh.url, sizeof sh.url, "%s", cl.url);
    sh.name = crdt_cluster_name_on(&cl, 1, "rl8");
    sh.window_ms = 2000;
    crd_rate_limiter *rl = NULL;
    cr_assert_eq(crd_rate_limiter_new(a, sh.name, &rl), CRD_OK);
    crd_rate_config cfg = {CRD_RATE_OVERALL, RATE, 1000, 0};
    cr_assert_eq(crd_rate_limiter_try_set_rate(rl, &cfg, NULL), CRD_OK, "%s", crd_client_errmsg(a));
    /* No client of ours (nor its threads) while the children are forked: a thread inside
     * malloc at fork() leaves a child's allocator locked under ASan, and what the children
     * inherit and never free is a leak to memcheck. */
    crd_rate_limiter_free(rl);
    crd_client_free(a);
    crd_client_free(b);
    cr_assert_eq(pipe(sh.fds), 0);
    sh.start = crdt_now_ms() + 1500; /* the children's clients are up by then */
    int codes[PROCS];
    int ok = crdt_run_children(PROCS, rl_proc, &sh, 60000, codes);
    close(sh.fds[1]);
    long long total = 0;
    int got;
    while (read(sh.fds[0], &got, sizeof got) == (ssize_t)sizeof got)
        total += got;
    close(sh.fds[0]);
    cr_assert_eq(ok, PROCS, "children exited %d %d %d ...", codes[0], codes[1], codes[2]);
    fprintf(stderr, "[r47_topology] cluster: %d processes, %d permits/s, 2 s: %lld permits "
            "(expected 100 +- 50)\n", PROCS, RATE, total);
    cr_expect(total >= 2 * RATE - RATE && total <= 2 * RATE + RATE, "%lld", total);
    a = crdt_client_opts(&o);
    cr_assert_eq(crd_rate_limiter_new(a, sh.name, &rl), CRD_OK);
    crd_rate_limiter_delete(rl, NULL);
    crd_rate_limiter_free(rl);
    crd_client_free(a);
    crdt_cluster_stop(&cl);
}

Test(r47_topology, the_rate_limiter_and_the_group_work_through_sentinel, .timeout = 120)
{
    crdt_topo topo;
    cr_assert(crdt_topo_start(&topo, NULL), "topology: %s", topo.err);
    char url[256];
    crd_options o;
    crd_options_init(&o);
    crdt_topo_url(&topo, url, sizeof url);
    o.url = url;
    crd_client *c = NULL;
    cr_assert_eq(crd_client_new(&o, &c), CRD_OK, "%s", crd_client_errmsg(c));
    const char *name = crdt_key("rl");
    crd_rate_limiter *rl = NULL;
    cr_assert_eq(crd_rate_limiter_new(c, name, &rl), CRD_OK);
    crd_rate_config cfg = {CRD_RATE_OVERALL, 2, 600, 0};
    cr_assert_eq(crd_rate_limiter_try_set_rate(rl, &cfg, NULL), CRD_OK, "%s", crd_client_errmsg(c));
    cr_assert_eq(crd_rate_limiter_acquire(rl, 2, 0), CRD_OK);
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_rate_limiter_acquire(rl, 1, 2000), CRD_OK, "%s", crd_client_errmsg(c));
    int64_t took = crdt_now_ms() - t0;
    cr_expect(took >= 300 && took <= 600 + crdt_scaled_ms(200), "%lld ms", (long long)took);
    const char *const vals[] = {"r1", "r2"};
    crd_lock *g = NULL;
    cr_assert_eq(crd_group_lock_new(c, crdt_key("grp"), vals, 2, &g), CRD_OK);
    cr_assert_eq(crd_lock_acquire(g, 1000, CRD_LEASE_WATCHDOG), CRD_OK, "%s", crd_client_errmsg(c));
    cr_assert_eq(crd_lock_release(g), CRD_OK, "%s", crd_client_errmsg(c));
    crd_lock_free(g);
    crd_rate_limiter_delete(rl, NULL);
    crd_rate_limiter_free(rl);
    crd_client_free(c);
    crdt_topo_stop(&topo);
}
