/*
 * cluster.c -- the private Redis Cluster of cluster.h: start, create, wait until it is
 * stable, move a slot, fail a primary over, stop.
 *
 * Nodes are ordinary crdt_server processes (harness.c) with cluster mode switched on,
 * so they die with the test process (PR_SET_PDEATHSIG) even if nothing calls
 * crdt_cluster_stop(). Every wait here has a deadline and polls the servers' own view
 * (CLUSTER INFO, CLUSTER SLOTS, INFO replication): the topology is ready when the
 * servers say so, not after some sleep.
 */
#include "cluster.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define NSLOTS 16384

static redisContext *node_conn(crdt_cluster *cl, int i, int64_t timeout_ms)
{
    if (cl->node[i].pid <= 0)
        return NULL;
    return crdt_raw_connect(cl->node[i].port, timeout_ms);
}

redisContext *crdt_cluster_redis(crdt_cluster *cl, int i)
{
    cr_assert(i >= 0 && i < cl->nnodes, "no node %d", i);
    redisContext *r = node_conn(cl, i, 3000);
    cr_assert_not_null(r, "cannot connect to cluster node %d (port %d)", i, cl->node[i].port);
    return r;
}

static int index_of_port(crdt_cluster *cl, int port)
{
    for (int i = 0; i < cl->nnodes; i++)
        if (cl->node[i].port == port)
            return i;
    return -1;
}

/* The primary's node index for every slot, as node i sees it (-1: unassigned). False if
 * node i did not answer. */
static bool slot_owners(crdt_cluster *cl, int i, int *owner)
{
    redisContext *r = node_conn(cl, i, 1000);
    if (r == NULL)
        return false;
    redisReply *rep = redisCommand(r, "CLUSTER SLOTS");
    bool ok = rep != NULL && rep->type == REDIS_REPLY_ARRAY;
    for (int s = 0; s < NSLOTS; s++)
        owner[s] = -1;
    for (size_t k = 0; ok && k < rep->elements; k++) {
        redisReply *e = rep->element[k];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
            continue;
        int port = (int)e->element[2]->element[1]->integer;
        int idx = index_of_port(cl, port);
        for (long long s = e->element[0]->integer; s <= e->element[1]->integer && s < NSLOTS; s++)
            owner[s] = idx;
    }
    if (rep != NULL)
        freeReplyObject(rep);
    redisFree(r);
    return ok;
}

static bool info_has(redisContext *r, const char *cmd, const char *needle)
{
    redisReply *rep = redisCommand(r, cmd);
    bool ok = rep != NULL && rep->type == REDIS_REPLY_STRING && strstr(rep->str, needle) != NULL;
    if (rep != NULL)
        freeReplyObject(rep);
    return ok;
}

/* Runs cmd on r every 10 ms until its reply contains needle or timeout_ms passes;
 * returns whether it did. */
static bool await_info(redisContext *r, const char *cmd, const char *needle,
                       int64_t timeout_ms)
{
    int64_t deadline = crdt_now_ms() + timeout_ms;
    for (;;) {
        if (info_has(r, cmd, needle))
            return true;
        if (crdt_now_ms() >= deadline)
            return false;
        crdt_sleep_ms(10);
    }
}

bool crdt_cluster_wait_stable(crdt_cluster *cl, int64_t timeout_ms)
{
    int64_t deadline = crdt_now_ms() + timeout_ms;
    int *ref = malloc(sizeof(int) * NSLOTS);
    int *other = malloc(sizeof(int) * NSLOTS);
    cr_assert(ref != NULL && other != NULL);
    bool stable = false;
    while (!stable && crdt_now_ms() < deadline) {
        stable = true;
        int first = -1;
        for (int i = 0; i < cl->nnodes && stable; i++) {
            if (cl->node[i].pid <= 0)
                continue;
            redisContext *r = node_conn(cl, i, 1000);
            stable = r != NULL && info_has(r, "CLUSTER INFO", "cluster_state:ok");
            if (r != NULL)
                redisFree(r);
            if (!stable)
                break;
            if (first < 0) {
                first = i;
                stable = slot_owners(cl, i, ref);
                for (int s = 0; stable && s < NSLOTS; s++)
                    stable = ref[s] >= 0;
            } else {
                stable = slot_owners(cl, i, other) &&
                         memcmp(ref, other, sizeof(int) * NSLOTS) == 0;
            }
        }
        if (!stable)
            crdt_sleep_ms(20);
    }
    free(ref);
    free(other);
    return stable;
}

static void my_id(crdt_cluster *cl, int i)
{
    redisContext *r = crdt_cluster_redis(cl, i);
    redisReply *rep = redisCommand(r, "CLUSTER MYID");
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_STRING && rep->len == 40,
              "CLUSTER MYID of node %d failed", i);
    memcpy(cl->id[i], rep->str, 40);
    cl->id[i][40] = '\0';
    freeReplyObject(rep);
    redisFree(r);
}

/* Runs redis-cli --cluster create; its output goes to a log in node 0's directory. */
static void cli_create(crdt_cluster *cl, int replicas_per, const char *certs_dir)
{
    const char *args[CRDT_CLUSTER_MAX + 12];
    char ca[300];
    char addr[CRDT_CLUSTER_MAX][32];
    char reps[8];
    int n = 0;
    args[n++] = crdt_redis_cli_path();
    if (certs_dir != NULL) {
        /* tls-cluster: the nodes announce their TLS ports, and meet over them */
        snprintf(ca, sizeof ca, "%s/ca.crt", certs_dir);
        args[n++] = "--tls";
        args[n++] = "--cacert";
        args[n++] = ca;
    }
    args[n++] = "--cluster";
    args[n++] = "create";
    for (int i = 0; i < cl->nnodes; i++) {
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d",
                 certs_dir != NULL ? cl->node[i].tls_port : cl->node[i].port);
        args[n++] = addr[i];
    }
    snprintf(reps, sizeof reps, "%d", replicas_per);
    args[n++] = "--cluster-replicas";
    args[n++] = reps;
    args[n++] = "--cluster-yes";
    args[n] = NULL;
    char log[400];
    snprintf(log, sizeof log, "%s/cluster-create.log", cl->node[0].dir);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        crdt_child_stdio(log, true);
        execvp(args[0], (char *const *)args);
        _exit(127);
    }
    int code = crdt_wait_child(pid, 30000);
    cr_assert_eq(code, 0, "%s --cluster create failed (exit %d); see %s", args[0], code, log);
}

/* One primary: redis-cli refuses fewer than three, so assign the slots directly (the
 * golden recordings ran on such a cluster). */
static void single_create(crdt_cluster *cl)
{
    redisContext *r = crdt_cluster_redis(cl, 0);
    long long ok = 0;
    redisReply *rep = redisCommand(r, "CLUSTER ADDSLOTSRANGE 0 16383");
    ok = rep != NULL && rep->type == REDIS_REPLY_STATUS;
    if (rep != NULL)
        freeReplyObject(rep);
    cr_assert(ok, "CLUSTER ADDSLOTSRANGE failed");
    for (int i = 1; i < cl->nnodes; i++) {
        rep = redisCommand(r, "CLUSTER MEET 127.0.0.1 %d", cl->node[i].port);
        if (rep != NULL)
            freeReplyObject(rep);
    }
    redisFree(r);
    for (int i = 1; i < cl->nnodes; i++) {
        /* A replica may only replicate a primary it already knows through gossip. */
        int64_t deadline = crdt_now_ms() + 10000;
        bool done = false;
        while (!done && crdt_now_ms() < deadline) {
            redisContext *ri = crdt_cluster_redis(cl, i);
            rep = redisCommand(ri, "CLUSTER REPLICATE %s", cl->id[0]);
            done = rep != NULL && rep->type == REDIS_REPLY_STATUS;
            if (rep != NULL)
                freeReplyObject(rep);
            redisFree(ri);
            if (!done)
                crdt_sleep_ms(20);
        }
        cr_assert(done, "node %d could not replicate the primary", i);
    }
}

void crdt_cluster_start(crdt_cluster *cl, int primaries, int replicas_per)
{
    crdt_cluster_start_tls(cl, primaries, replicas_per, NULL);
}

void crdt_cluster_start_tls(crdt_cluster *cl, int primaries, int replicas_per,
                            const char *certs_dir)
{
    memset(cl, 0, sizeof *cl);
    cl->nprimaries = primaries;
    cl->nnodes = primaries * (1 + replicas_per);
    cr_assert(primaries >= 1 && cl->nnodes <= CRDT_CLUSTER_MAX);
    cr_assert(primaries == 1 || primaries >= 3, "redis-cli creates clusters of 3+ primaries");
    /* With certificates: every node also serves TLS, and the cluster bus and replication
     * run over TLS; the tests' own connections keep the plain ports. */
    static const char *const extra[] = {"--cluster-enabled", "yes",
                                        "--cluster-config-file", "nodes.conf",
                                        "--cluster-node-timeout", "2000",
                                        NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                        NULL};
    const char *args[sizeof extra / sizeof *extra];
    memcpy(args, extra, sizeof extra);
    char ccert[300], ckey[300];
    if (certs_dir != NULL) {
        /* The cluster bus checks the connecting node's certificate as a client's. */
        snprintf(ccert, sizeof ccert, "%s/client.crt", certs_dir);
        snprintf(ckey, sizeof ckey, "%s/client.key", certs_dir);
        const char *tls[] = {"--tls-cluster", "yes", "--tls-replication", "yes",
                             "--tls-client-cert-file", ccert, "--tls-client-key-file", ckey};
        memcpy(args + 6, tls, sizeof tls);
    }
    size_t o = 0, t = 0;
    for (int i = 0; i < cl->nnodes; i++) {
        if (certs_dir != NULL)
            crdt_server_start_tls(&cl->node[i], certs_dir, args, NULL, NULL);
        else
            crdt_server_start(&cl->node[i], false, args, NULL, NULL);
        o += (size_t)snprintf(cl->seeds + o, sizeof cl->seeds - o, "%s127.0.0.1:%d",
                              i ? "," : "", cl->node[i].port);
        if (certs_dir != NULL)
            t += (size_t)snprintf(cl->tls_seeds + t, sizeof cl->tls_seeds - t,
                                  "%s127.0.0.1:%d", i ? "," : "", cl->node[i].tls_port);
        my_id(cl, i);
    }
    /* make test-valkey (CRDT_EXPECT_SERVER=valkey): the nodes are the server the run
     * meant to test (Valkey's INFO server says server_name:valkey; Redis's has none). */
    const char *want = getenv("CRDT_EXPECT_SERVER");
    if (want != NULL && want[0] != '\0') {
        redisContext *r = crdt_cluster_redis(cl, 0);
        bool valkey = info_has(r, "INFO server", "server_name:valkey");
        redisFree(r);
        cr_assert_str_eq(valkey ? "valkey" : "redis", want, "the cluster's nodes (%s) are not %s",
                         crdt_redis_server_path(), want);
    }
    snprintf(cl->url, sizeof cl->url, "redis-cluster://%s", cl->seeds);
    if (certs_dir != NULL)
        snprintf(cl->tls_url, sizeof cl->tls_url, "rediss-cluster://%s", cl->tls_seeds);
    cr_assert(primaries >= 3 || certs_dir == NULL, "a TLS cluster is made by redis-cli: 3+ primaries");
    if (primaries == 1)
        single_create(cl);
    else
        cli_create(cl, replicas_per, certs_dir);
    cr_assert(crdt_cluster_wait_stable(cl, 30000), "the cluster did not become stable");
    /* Replicas: wait for their link so that a failover test starts from synced data. */
    int64_t deadline = crdt_now_ms() + 20000;
    for (int i = primaries; i < cl->nnodes; i++) {
        bool up = false;
        while (!up && crdt_now_ms() < deadline) {
            redisContext *r = node_conn(cl, i, 1000);
            up = r != NULL && info_has(r, "INFO replication", "master_link_status:up");
            if (r != NULL)
                redisFree(r);
            if (!up)
                crdt_sleep_ms(20);
        }
        cr_assert(up, "replica %d never linked to its primary", i);
    }
    /* ...and for the primaries to count them: a replica's link is up when it has loaded
     * the primary's data, but the primary puts it online (lists it in ROLE, counts it for
     * replica sync and WAIT) only at its first REPLCONF ACK, up to a second later. A test
     * that stops the replica before that sees a primary with no replicas. */
    for (int i = 0; i < primaries && replicas_per > 0; i++) {
        int listed = -1;
        while (listed != replicas_per && crdt_now_ms() < deadline) {
            redisContext *r = node_conn(cl, i, 1000);
            redisReply *rep = r != NULL ? redisCommand(r, "ROLE") : NULL;
            if (rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 3 &&
                rep->element[2]->type == REDIS_REPLY_ARRAY)
                listed = (int)rep->element[2]->elements;
            if (rep != NULL)
                freeReplyObject(rep);
            if (r != NULL)
                redisFree(r);
            if (listed != replicas_per)
                crdt_sleep_ms(20);
        }
        cr_assert_eq(listed, replicas_per, "primary %d lists %d of its %d replicas", i, listed,
                     replicas_per);
    }
}

void crdt_cluster_stop(crdt_cluster *cl)
{
    for (int i = 0; i < cl->nnodes; i++)
        if (cl->node[i].pid > 0 || cl->node[i].dir[0] != '\0')
            crdt_server_stop(&cl->node[i]);
    cl->nnodes = 0;
}

int crdt_cluster_owner(crdt_cluster *cl, int slot)
{
    int *owner = malloc(sizeof(int) * NSLOTS);
    cr_assert_not_null(owner);
    int found = -1;
    for (int i = 0; i < cl->nnodes && found < 0; i++)
        if (slot_owners(cl, i, owner))
            found = owner[slot];
    free(owner);
    return found;
}

int crdt_cluster_keyslot(crdt_cluster *cl, const char *key)
{
    for (int i = 0; i < cl->nnodes; i++) {
        redisContext *r = node_conn(cl, i, 1000);
        if (r == NULL)
            continue;
        redisReply *rep = redisCommand(r, "CLUSTER KEYSLOT %s", key);
        int slot = rep != NULL && rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -1;
        if (rep != NULL)
            freeReplyObject(rep);
        redisFree(r);
        if (slot >= 0)
            return slot;
    }
    cr_assert_fail("no node answered CLUSTER KEYSLOT");
    return -1;
}

redisContext *crdt_cluster_redis_for_key(crdt_cluster *cl, const char *key)
{
    int owner = crdt_cluster_owner(cl, crdt_cluster_keyslot(cl, key));
    cr_assert(owner >= 0, "no primary serves the slot of %s", key);
    return crdt_cluster_redis(cl, owner);
}

void crdt_cluster_options(crdt_cluster *cl, crd_options *o)
{
    crdt_options(o);
    o->url = cl->url;
}

const char *crdt_cluster_name_on(crdt_cluster *cl, int primary, const char *suffix)
{
    int *owner = malloc(sizeof(int) * NSLOTS);
    cr_assert_not_null(owner);
    cr_assert(slot_owners(cl, primary, owner));
    redisContext *r = crdt_cluster_redis(cl, primary);
    char buf[300];
    const char *out = NULL;
    static int next; /* every call gives a new name, even for the same suffix */
    const int first = next;
    for (int n = first; n < first + 10000 && out == NULL; n++) {
        snprintf(buf, sizeof buf, "%s.%d", crdt_key(suffix), n);
        next = n + 1;
        redisReply *rep = redisCommand(r, "CLUSTER KEYSLOT %s", buf);
        if (rep != NULL && rep->type == REDIS_REPLY_INTEGER && owner[rep->integer] == primary)
            out = strdup(buf);
        if (rep != NULL)
            freeReplyObject(rep);
    }
    redisFree(r);
    free(owner);
    cr_assert_not_null(out, "no name found on primary %d", primary);
    /* Kept reachable until exit (names are handed out for the whole process, also to
     * children forked after the call). */
    static const char **kept;
    static size_t nkept, capkept;
    if (nkept == capkept) {
        capkept = capkept ? capkept * 2 : 64;
        kept = realloc(kept, capkept * sizeof *kept);
        cr_assert_not_null(kept);
    }
    kept[nkept++] = out;
    return out;
}

static redisReply *must(redisContext *r, const char *what, redisReply *rep)
{
    cr_assert(rep != NULL && rep->type != REDIS_REPLY_ERROR, "%s failed: %s", what,
              rep == NULL ? (r->errstr[0] ? r->errstr : "no reply") : rep->str);
    return rep;
}

void crdt_cluster_move_slot(crdt_cluster *cl, int slot, int to, void (*midway)(void *),
                            void *arg)
{
    int from = crdt_cluster_owner(cl, slot);
    cr_assert(from >= 0 && from != to, "slot %d is served by %d, cannot move it to %d", slot,
              from, to);
    redisContext *src = crdt_cluster_redis(cl, from);
    redisContext *dst = crdt_cluster_redis(cl, to);
    freeReplyObject(must(dst, "SETSLOT IMPORTING",
                         redisCommand(dst, "CLUSTER SETSLOT %d IMPORTING %s", slot, cl->id[from])));
    freeReplyObject(must(src, "SETSLOT MIGRATING",
                         redisCommand(src, "CLUSTER SETSLOT %d MIGRATING %s", slot, cl->id[to])));
    bool called = midway == NULL;
    for (;;) {
        /* One key first, so that `midway` runs while the slot is half moved. */
        redisReply *keys = must(src, "GETKEYSINSLOT",
                                redisCommand(src, "CLUSTER GETKEYSINSLOT %d %d", slot,
                                             called ? 100 : 1));
        if (keys->elements == 0) {
            freeReplyObject(keys);
            break;
        }
        const char *argv[8 + 100];
        size_t lens[8 + 100];
        char port[16];
        snprintf(port, sizeof port, "%d", cl->node[to].port);
        int n = 0;
        const char *head[] = {"MIGRATE", "127.0.0.1", port, "", "0", "5000", "REPLACE", "KEYS"};
        for (int k = 0; k < 8; k++) {
            argv[n] = head[k];
            lens[n++] = strlen(head[k]);
        }
        for (size_t k = 0; k < keys->elements; k++) {
            argv[n] = keys->element[k]->str;
            lens[n++] = keys->element[k]->len;
        }
        redisReply *m = redisCommandArgv(src, n, argv, lens);
        freeReplyObject(must(src, "MIGRATE", m));
        freeReplyObject(keys);
        if (!called) {
            called = true;
            midway(arg);
        }
    }
    if (!called)
        midway(arg);
    /* The new owner first (it bumps its epoch), then the old one, then everyone else. */
    freeReplyObject(must(dst, "SETSLOT NODE",
                         redisCommand(dst, "CLUSTER SETSLOT %d NODE %s", slot, cl->id[to])));
    freeReplyObject(must(src, "SETSLOT NODE",
                         redisCommand(src, "CLUSTER SETSLOT %d NODE %s", slot, cl->id[to])));
    for (int i = 0; i < cl->nnodes; i++) {
        if (i == from || i == to || cl->node[i].pid <= 0)
            continue;
        redisContext *r = node_conn(cl, i, 1000);
        if (r == NULL)
            continue;
        redisReply *rep = redisCommand(r, "CLUSTER SETSLOT %d NODE %s", slot, cl->id[to]);
        if (rep != NULL)
            freeReplyObject(rep); /* replicas refuse it; they learn it by gossip */
        redisFree(r);
    }
    redisFree(src);
    redisFree(dst);
    cr_assert(crdt_cluster_wait_stable(cl, 20000), "the cluster did not settle after the move");
    cr_assert_eq(crdt_cluster_owner(cl, slot), to, "slot %d did not move", slot);
}

int crdt_cluster_replica_of(crdt_cluster *cl, int primary)
{
    int replica = -1;
    for (int i = 0; i < cl->nnodes && replica < 0; i++) {
        if (i == primary || cl->node[i].pid <= 0)
            continue;
        redisContext *r = node_conn(cl, i, 1000);
        if (r == NULL)
            continue;
        redisReply *rep = redisCommand(r, "ROLE");
        if (rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 3 &&
            strcmp(rep->element[0]->str, "slave") == 0 &&
            rep->element[2]->integer == cl->node[primary].port)
            replica = i;
        if (rep != NULL)
            freeReplyObject(rep);
        redisFree(r);
    }
    cr_assert(replica >= 0, "primary %d has no replica", primary);
    return replica;
}

/* Waits (deadline timeout_ms) until node i says role:master. */
static void await_promoted_only(crdt_cluster *cl, int i, int64_t timeout_ms)
{
    redisContext *r = crdt_cluster_redis(cl, i);
    bool promoted = await_info(r, "INFO replication", "role:master", timeout_ms);
    redisFree(r);
    cr_assert(promoted, "replica %d was not promoted", i);
}

/* Waits (deadline timeout_ms) until node i says role:master, then for a stable map. */
static void await_promoted(crdt_cluster *cl, int i, int64_t timeout_ms)
{
    await_promoted_only(cl, i, timeout_ms);
    cr_assert(crdt_cluster_wait_stable(cl, timeout_ms), "the cluster did not settle after failover");
}

int crdt_cluster_failover(crdt_cluster *cl, int primary)
{
    int replica = crdt_cluster_replica_of(cl, primary);
    redisContext *r = crdt_cluster_redis(cl, replica);
    freeReplyObject(must(r, "CLUSTER FAILOVER", redisCommand(r, "CLUSTER FAILOVER")));
    redisFree(r);
    await_promoted(cl, replica, 20000);
    return replica;
}

int crdt_cluster_kill_primary(crdt_cluster *cl, int primary)
{
    int replica = crdt_cluster_replica_of(cl, primary);
    cr_assert_eq(kill(cl->node[primary].pid, SIGKILL), 0);
    waitpid(cl->node[primary].pid, NULL, 0);
    cl->node[primary].pid = 0; /* its directory goes with crdt_cluster_stop */
    await_promoted(cl, replica, 30000);
    return replica;
}

int crdt_cluster_await_takeover(crdt_cluster *cl, int primary)
{
    int replica = crdt_cluster_replica_of(cl, primary);
    await_promoted_only(cl, replica, 30000);
    return replica;
}

void crdt_cluster_cut_replication(crdt_cluster *cl, int replica)
{
    redisContext *r = crdt_cluster_redis(cl, replica);
    /* A user the primary does not know: every reconnection fails its AUTH. */
    freeReplyObject(must(r, "CONFIG SET masteruser",
                         redisCommand(r, "CONFIG SET masteruser crdt-no-such-user")));
    freeReplyObject(must(r, "CONFIG SET masterauth",
                         redisCommand(r, "CONFIG SET masterauth crdt-wrong")));
    freeReplyObject(must(r, "CLIENT KILL TYPE master",
                         redisCommand(r, "CLIENT KILL TYPE master")));
    bool down = await_info(r, "INFO replication", "master_link_status:down", 10000);
    redisFree(r);
    cr_assert(down, "replica %d still replicates", replica);
}

long long crdt_cluster_shard_subscribers(redisContext *r, const char *channel)
{
    redisReply *rep = redisCommand(r, "PUBSUB SHARDNUMSUB %s", channel);
    long long n = -1;
    if (rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_INTEGER)
        n = rep->element[1]->integer;
    if (rep != NULL)
        freeReplyObject(rep);
    return n;
}

bool crdt_cluster_shard_subscribed(void *probe)
{
    const crdt_probe *p = probe;
    return crdt_cluster_shard_subscribers(p->r, p->name) >= (p->n > 0 ? p->n : 1);
}

crd_client *crdt_cluster_child_client(const char *url)
{
    crd_options o;
    crd_options_init(&o);
    o.url = url;
    crd_client *c = NULL;
    if (crd_client_new(&o, &c) == CRD_OK)
        return c;
    crd_client_free(c);
    return NULL;
}
