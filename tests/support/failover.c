/*
 * failover.c -- the failover checks of failover.h.
 */
#include "failover.h"
#include "faultproxy.h"
#include "sentinel.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <string.h>

int64_t crdt_stalled_acquire(crd_client *c, crd_lock *l, int64_t slack_ms, const char *what)
{
    int64_t t0 = crdt_now_ms();
    crd_status st = crd_lock_acquire(l, 100, 30000);
    int64_t took = crdt_now_ms() - t0;
    cr_assert(st == CRD_TIMEOUT || st == CRD_IO, "%s during the stall: %s (%s)", what,
              crd_strerror(st), crd_client_errmsg(c));
    cr_assert(took <= 100 + slack_ms, "%s: a 100 ms wait returned after %lld ms: %s (%s)",
              what, (long long)took, crd_strerror(st), crd_client_errmsg(c));
    return took;
}

bool crdt_linked_replica(redisContext *r)
{
    redisReply *info = redisCommand(r, "INFO replication");
    bool ok = info != NULL && info->type == REDIS_REPLY_STRING &&
              strstr(info->str, "role:slave") != NULL &&
              strstr(info->str, "master_link_status:up") != NULL;
    freeReplyObject(info);
    return ok;
}

typedef struct demoted_pred {
    crdt_node_fn node;
    void *arg;
    const char *key;
} demoted_pred;

/* The old primary is a replica with its link up and has no copy of the key. */
static bool demoted_and_clean(void *arg)
{
    demoted_pred *d = arg;
    redisContext *r = d->node(d->arg, true);
    if (r == NULL)
        return false;
    bool ok = crdt_linked_replica(r) && crdt_exists(r, d->key) == 0;
    redisFree(r);
    return ok;
}

int64_t crdt_failover_check(crd_client *c, crd_lock *l, const char *key, pid_t old_pid,
                            crdt_node_fn node, void *arg, const char *what)
{
    int64_t t0 = crdt_now_ms();
    crd_status st = crd_lock_acquire(l, 30000, 30000);
    int64_t found = crdt_now_ms() - t0;
    cr_assert_eq(st, CRD_OK, "acquire after the %s: %s (%s)", what, crd_strerror(st),
                 crd_client_errmsg(c));
    cr_assert_eq(crd_lock_release(l), CRD_OK, "%s", crd_client_errmsg(c));

    /* The old primary resumes: it runs what was left in its socket buffers, then the
     * topology makes it a replica of the new one and its data is replaced. */
    cr_assert_eq(kill(old_pid, SIGCONT), 0);
    demoted_pred dp = {node, arg, key};
    cr_assert(crdt_wait_until(demoted_and_clean, &dp, 30000),
              "the old primary was not demoted, or still has the lock");
    redisContext *r = node(arg, false);
    cr_assert_not_null(r);
    cr_assert_eq(crdt_exists(r, key), 0, "the new primary has a hold nobody owns");
    redisFree(r);
    return found;
}

/* crdt_topo_opts.front: a fault proxy in front of the first primary (kept in *arg). */
static int front_proxy(void *arg, int primary_port)
{
    crdt_proxy **out = arg;
    *out = crdt_proxy_start(primary_port, NULL);
    return *out != NULL ? crdt_proxy_port(*out) : -1;
}

void crdt_topo_start_fronted(crdt_topo *topo, crdt_proxy **front)
{
    *front = NULL;
    crdt_topo_opts to = {.front = front_proxy, .front_arg = front};
    bool up = crdt_topo_start(topo, &to);
    if (!up)
        crdt_proxy_stop(*front);
    cr_assert(up, "topology: %s", topo->err);
}
