/*
 * verify.c -- `credisson [--url URL] verify [--procs N] [--seconds S] [--permits K]
 * [--failover] [--replica-sync auto|on|off|if-allowed] [--second-url URL] [--json]`: a
 * bounded mutual-exclusion check against the user's own deployment.
 *
 * N processes (forked here, one library client each) take one fenced lock and one
 * semaphore of K permits in turn for S seconds. Each critical section is checked by a
 * ledger in memory the processes share (mmap), independent of Redis: a holder enters
 * with its validity deadline and finds any other valid holder inside (an overlap), and
 * the fencing token it drew must be larger than every token an earlier holder showed (a
 * smaller or equal one is a stale token: what a fenced store would refuse). With
 * --failover the parent runs SENTINEL FAILOVER (redis-sentinel://) or CLUSTER FAILOVER on
 * a replica of the lock's primary (redis-cluster://) a third of the way in. With
 * --second-url every other process uses that URL (the two sides of a partition, a proxy
 * and the server behind it).
 *
 * It reports acquisitions, overlaps (must be 0), stale tokens, lost holds, failures by
 * status and the acquire latency. Exit: 0 no overlap, no stale token, no lost hold; 1 lost
 * holds (each reported to its holder), stale tokens (a failover lost a write: a fenced
 * store would refuse the later holder), a failover not done, or no acquisition; 2
 * overlaps; 64 usage; 69 Redis unreachable. Its only
 * keys are PREFIX:<pid>:lock (with its token counter) and :sem, deleted at the end.
 * Main thread of each process.
 */
#include "probe.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 64
#define LAT_MAX 20000 /* acquire latencies kept per process */

typedef struct proc_slot {
    _Atomic int64_t lock_until_ns; /* 0 outside; else inside, valid until (monotonic ns) */
    atomic_int sem_inside;
} proc_slot;

typedef struct ledger {
    _Atomic int64_t max_token;
    atomic_long lock_acq, sem_acq, overlaps, sem_overlaps, stale, lost, timeouts, errors,
        sem_timeouts, sem_errors;
    atomic_int errors_by_status[32];
    atomic_int first_overlap_taken;
    char first_overlap[256];
    atomic_int ready; /* processes that made their first attempt */
    atomic_int first_error_taken;
    char first_error[400];
    proc_slot slots[MAX_PROCS];
    atomic_int nlat[MAX_PROCS];
    int32_t lat_us[MAX_PROCS][LAT_MAX];
} ledger;

typedef struct verify_opts {
    int procs, permits;
    int64_t seconds;
    bool failover, json;
    int replica_sync;
    const char *second_url;
    const char *prefix;
} verify_opts;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_us(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void note_error(ledger *lg, crd_status st, const char *what, const char *msg)
{
    if ((int)st >= 0 && (int)st < 32)
        atomic_fetch_add(&lg->errors_by_status[st], 1);
    if (atomic_exchange(&lg->first_error_taken, 1) == 0)
        snprintf(lg->first_error, sizeof lg->first_error, "%s: %s (%s)", what, crd_strerror(st),
                 msg);
}

/* An acquire that did not succeed, into timeouts (CRD_TIMEOUT, CRD_BUSY) or errors (noted
 * as what's, with c's detail). After an error the process pauses 10 ms: a refusing server
 * must not make it spin. */
static void count_miss(ledger *lg, crd_status st, atomic_long *timeouts, atomic_long *errors,
                       const char *what, const crd_client *c)
{
    if (st == CRD_TIMEOUT || st == CRD_BUSY) {
        atomic_fetch_add(timeouts, 1);
        return;
    }
    atomic_fetch_add(errors, 1);
    note_error(lg, st, what, crd_client_errmsg(c));
    sleep_us(10000);
}

/* ---- one process ------------------------------------------------------------------------ */

static int child_main(const global_opts *g, const verify_opts *vo, ledger *lg, int id,
                      const char *lock_name, const char *sem_name, int64_t end_ns)
{
    crd_options o;
    probe_options(g, &o);
    if (vo->second_url != NULL && id % 2 == 1)
        o.url = vo->second_url;
    o.replica_sync = vo->replica_sync;
    crd_client *c = NULL;
    crd_status st = crd_client_new(&o, &c);
    crd_lock *l = NULL;
    crd_semaphore *s = NULL;
    if (st != CRD_OK || crd_fenced_lock_new(c, lock_name, &l) != CRD_OK ||
        crd_semaphore_new(c, sem_name, &s) != CRD_OK) {
        note_error(lg, st != CRD_OK ? st : CRD_INVALID_ARGUMENT, "client", crd_client_errmsg(c));
        crd_client_free(c);
        return 1;
    }
    unsigned seed = (unsigned)(getpid() * 2654435761u);
    bool counted = false;
    while (now_ns() < end_ns) {
        /* The lock: a watchdog hold, a fencing token, a short critical section. */
        int64_t token = 0;
        int64_t t0 = now_ns();
        st = crd_lock_acquire_token(l, 2000, CRD_LEASE_WATCHDOG, &token);
        int64_t t1 = now_ns();
        if (!counted) {
            counted = true;
            atomic_fetch_add(&lg->ready, 1);
        }
        if (st == CRD_OK) {
            atomic_fetch_add(&lg->lock_acq, 1);
            int k = atomic_load(&lg->nlat[id]);
            if (k < LAT_MAX) {
                lg->lat_us[id][k] = (int32_t)((t1 - t0) / 1000);
                atomic_store(&lg->nlat[id], k + 1);
            }
            int64_t valid = 0;
            crd_lock_validity_ms(l, &valid);
            int64_t now = now_ns();
            atomic_store(&lg->slots[id].lock_until_ns, now + valid * 1000000);
            for (int j = 0; j < vo->procs; j++) {
                int64_t u = atomic_load(&lg->slots[j].lock_until_ns);
                if (j != id && u > now) {
                    atomic_fetch_add(&lg->overlaps, 1);
                    if (atomic_exchange(&lg->first_overlap_taken, 1) == 0)
                        snprintf(lg->first_overlap, sizeof lg->first_overlap,
                                 "process %d took the lock (token %lld) while process %d held "
                                 "it, valid for %lld ms more", id, (long long)token, j,
                                 (long long)((u - now) / 1000000));
                }
            }
            int64_t prev = atomic_load(&lg->max_token);
            while (token > prev && !atomic_compare_exchange_weak(&lg->max_token, &prev, token)) {
            }
            if (token <= prev)
                atomic_fetch_add(&lg->stale, 1);
            sleep_us(200 + rand_r(&seed) % 1800); /* the critical section */
            bool lost = crd_lock_validity_ms(l, &valid) != CRD_OK || valid <= 0;
            atomic_store(&lg->slots[id].lock_until_ns, 0);
            st = crd_lock_release(l);
            if (lost || st == CRD_LOCK_LOST)
                atomic_fetch_add(&lg->lost, 1);
            else if (st != CRD_OK)
                note_error(lg, st, "release", crd_client_errmsg(c));
        } else {
            count_miss(lg, st, &lg->timeouts, &lg->errors, "acquire", c);
        }
        if (now_ns() >= end_ns)
            break;
        /* The semaphore: at most K inside. */
        st = crd_semaphore_acquire(s, 1, 2000);
        if (st == CRD_OK) {
            atomic_fetch_add(&lg->sem_acq, 1);
            atomic_store(&lg->slots[id].sem_inside, 1);
            int inside = 0;
            for (int j = 0; j < vo->procs; j++)
                inside += j != id && atomic_load(&lg->slots[j].sem_inside);
            if (inside >= vo->permits)
                atomic_fetch_add(&lg->sem_overlaps, 1);
            sleep_us(200 + rand_r(&seed) % 1800);
            atomic_store(&lg->slots[id].sem_inside, 0);
            st = crd_semaphore_release(s, 1);
            if (st != CRD_OK)
                note_error(lg, st, "semaphore release", crd_client_errmsg(c));
        } else {
            count_miss(lg, st, &lg->sem_timeouts, &lg->sem_errors, "semaphore acquire", c);
        }
    }
    crd_semaphore_free(s);
    crd_lock_free(l);
    crd_client_free(c);
    return 0;
}

/* ---- failover --------------------------------------------------------------------------- */

static bool sentinel_failover(const probe_target *t, char *detail, size_t cap, int64_t *ms)
{
    int64_t t0 = now_ns();
    probe_addr before;
    int n = 0;
    char err[600];
    if (probe_primaries(t, 2000, &before, 1, &n, err, sizeof err) != 0) {
        snprintf(detail, cap, "no sentinel named the primary: %.300s", err);
        return false;
    }
    bool asked = false;
    char why[300] = "";
    for (int attempt = 0; attempt < 50 && !asked; attempt++) {
        for (int i = 0; i < t->naddrs && !asked; i++) {
            bool to;
            redisContext *s = probe_connect(t, &t->addrs[i], false, 2000, why, sizeof why, &to);
            if (s == NULL) {
                probe_target bare = *t;
                bare.user[0] = bare.pass[0] = '\0';
                s = probe_connect(&bare, &t->addrs[i], false, 2000, why, sizeof why, &to);
            }
            if (s == NULL)
                continue;
            redisReply *r = probe_cmdv(s, "SENTINEL", "FAILOVER", t->master, NULL);
            asked = r != NULL && r->type == REDIS_REPLY_STATUS;
            snprintf(why, sizeof why, "%s", r == NULL ? s->errstr : r->str ? r->str : "?");
            if (r != NULL)
                freeReplyObject(r);
            redisFree(s);
        }
        if (!asked && strstr(why, "INPROG") == NULL && strstr(why, "NOGOODSLAVE") == NULL)
            break;
        if (!asked)
            sleep_us(100000);
    }
    if (!asked) {
        snprintf(detail, cap, "SENTINEL FAILOVER refused: %.300s", why);
        return false;
    }
    for (int64_t until = now_ns() + 30000000000LL; now_ns() < until; sleep_us(50000)) {
        probe_addr now;
        if (probe_primaries(t, 1000, &now, 1, &n, err, sizeof err) == 0 &&
            (now.port != before.port || strcmp(now.host, before.host) != 0)) {
            *ms = (now_ns() - t0) / 1000000;
            snprintf(detail, cap, "SENTINEL FAILOVER: %.64s:%d -> %.64s:%d", before.host, before.port,
                     now.host, now.port);
            return true;
        }
    }
    snprintf(detail, cap, "SENTINEL FAILOVER was accepted, but no sentinel named a new primary "
             "within 30 s");
    return false;
}

/* The primary and first replica of slot from a seed's CLUSTER SLOTS. */
static bool slot_nodes(const probe_target *t, int slot, probe_addr *primary, probe_addr *replica,
                       bool *has_replica)
{
    *has_replica = false;
    for (int i = 0; i < t->naddrs; i++) {
        char why[300];
        bool to;
        redisContext *c = probe_connect(t, &t->addrs[i], true, 2000, why, sizeof why, &to);
        if (c == NULL)
            continue;
        redisReply *r = probe_cmdv(c, "CLUSTER", "SLOTS", NULL);
        bool found = false;
        for (size_t k = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
            redisReply *e = r->element[k];
            if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || slot < e->element[0]->integer ||
                slot > e->element[1]->integer)
                continue;
            for (size_t m = 2; m < e->elements && m < 4; m++) {
                redisReply *n = e->element[m];
                probe_addr *a = m == 2 ? primary : replica;
                memset(a, 0, sizeof *a);
                snprintf(a->host, sizeof a->host, "%s",
                         n->element[0]->len ? n->element[0]->str : t->addrs[i].host);
                a->port = (int)n->element[1]->integer;
            }
            *has_replica = e->elements > 3;
            found = true;
        }
        if (r != NULL)
            freeReplyObject(r);
        redisFree(c);
        if (found)
            return true;
    }
    return false;
}

static bool cluster_failover(const probe_target *t, const char *lock_name, char *detail,
                             size_t cap, int64_t *ms)
{
    int64_t t0 = now_ns();
    int slot = probe_key_slot(lock_name, strlen(lock_name));
    probe_addr primary, replica;
    bool has_replica;
    if (!slot_nodes(t, slot, &primary, &replica, &has_replica)) {
        snprintf(detail, cap, "no seed gave the slot map");
        return false;
    }
    if (!has_replica) {
        snprintf(detail, cap, "the primary of slot %d (%.64s:%d) has no replica to fail over to",
                 slot, primary.host, primary.port);
        return false;
    }
    char why[300];
    bool to;
    redisContext *c = probe_connect(t, &replica, true, 2000, why, sizeof why, &to);
    if (c == NULL) {
        snprintf(detail, cap, "%.300s", why);
        return false;
    }
    redisReply *r = probe_cmdv(c, "CLUSTER", "FAILOVER", NULL);
    bool ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    snprintf(why, sizeof why, "%s", r == NULL ? c->errstr : r->str ? r->str : "?");
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    if (!ok) {
        snprintf(detail, cap, "CLUSTER FAILOVER refused by %.64s:%d: %.200s", replica.host,
                 replica.port, why);
        return false;
    }
    for (int64_t until = now_ns() + 30000000000LL; now_ns() < until; sleep_us(50000)) {
        probe_addr p2, r2;
        bool h2;
        if (slot_nodes(t, slot, &p2, &r2, &h2) && p2.port == replica.port &&
            strcmp(p2.host, replica.host) == 0) {
            *ms = (now_ns() - t0) / 1000000;
            snprintf(detail, cap, "CLUSTER FAILOVER: slot %d %.64s:%d -> %.64s:%d", slot, primary.host,
                     primary.port, replica.host, replica.port);
            return true;
        }
    }
    snprintf(detail, cap, "CLUSTER FAILOVER was accepted, but %.64s:%d did not become primary "
             "within 30 s", replica.host, replica.port);
    return false;
}

/* ---- clean-up --------------------------------------------------------------------------- */

/* DEL of each key on every primary (a cluster's non-owners answer MOVED, ignored). */
static bool delete_keys(const probe_target *t, const char *const *keys, int nkeys)
{
    probe_addr prim[64];
    int n = 0;
    char err[600];
    if (probe_primaries(t, 2000, prim, 64, &n, err, sizeof err) != 0)
        return false;
    bool any = false;
    for (int i = 0; i < n; i++) {
        char why[300];
        bool to;
        redisContext *c = probe_connect(t, &prim[i], true, 2000, why, sizeof why, &to);
        if (c == NULL)
            continue;
        for (int k = 0; k < nkeys; k++) {
            redisReply *r = probe_cmdv(c, "DEL", keys[k], NULL);
            any = any || (r != NULL && r->type == REDIS_REPLY_INTEGER);
            if (r != NULL)
                freeReplyObject(r);
        }
        redisFree(c);
    }
    return any;
}

/* ---- the command -------------------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: credisson [--url URL] verify [--procs N] [--seconds S] [--permits K]\n"
            "                 [--failover] [--replica-sync auto|on|off|if-allowed]\n"
            "                 [--second-url URL] [--prefix P] [--json]\n"
            "\n"
            "A bounded mutual-exclusion check of the deployment URL names: N processes take one\n"
            "fenced lock (a watchdog hold) and a semaphore of K permits in turn for S seconds;\n"
            "a ledger the processes share in memory, independent of Redis, finds any overlap\n"
            "and any fencing token that is not larger than the ones before it.\n"
            "\n"
            "  --procs N        processes (default 4, at most 64)\n"
            "  --seconds S      how long (default 10)\n"
            "  --permits K      the semaphore's permits (default 2, below N)\n"
            "  --failover       a third of the way in: SENTINEL FAILOVER (redis-sentinel://)\n"
            "                   or CLUSTER FAILOVER on a replica of the lock's primary\n"
            "                   (redis-cluster://); needs those rights\n"
            "  --replica-sync M the clients' replica_sync (default auto: on with Sentinel and\n"
            "                   Cluster)\n"
            "  --second-url URL every other process connects with this URL instead (the other\n"
            "                   side of a partition, a proxy and the server behind it)\n"
            "  --prefix P       its keys are P:<pid>:lock and :sem (default credisson:verify),\n"
            "                   deleted at the end\n"
            "  --json           one JSON object\n"
            "\n"
            "Exit: 0 no overlap, stale token or lost hold; 1 lost holds (each reported to its\n"
            "holder), stale fencing tokens (a failover lost a write), a failover not done, or\n"
            "no acquisition; 2 overlaps; 64 usage; 69 Redis unreachable.\n");
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

int cmd_verify(const global_opts *g, int argc, char **argv)
{
    verify_opts vo = {4, 2, 10, false, false, CRD_REPLICA_SYNC_AUTO, NULL, "credisson:verify"};
    bool permits_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t num;
        if (cli_is_help(a)) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            vo.json = true;
        } else if (strcmp(a, "--failover") == 0) {
            vo.failover = true;
        } else if (cli_take_opt(argc, argv, &i, "--procs", &v)) {
            if (v == NULL || !cli_parse_ms(v, &num) || num < 1 || num > MAX_PROCS)
                return cli_usage_error("verify", "--procs needs a number from 1 to %d", MAX_PROCS);
            vo.procs = (int)num;
        } else if (cli_take_opt(argc, argv, &i, "--seconds", &v)) {
            if (v == NULL || !cli_parse_ms(v, &num) || num < 1 || num > 86400)
                return cli_usage_error("verify", "--seconds needs a number from 1 to 86400");
            vo.seconds = num;
        } else if (cli_take_opt(argc, argv, &i, "--permits", &v)) {
            if (v == NULL || !cli_parse_ms(v, &num) || num < 1 || num > MAX_PROCS)
                return cli_usage_error("verify", "--permits needs a number from 1 to %d",
                                       MAX_PROCS);
            vo.permits = (int)num;
            permits_given = true;
        } else if (cli_take_opt(argc, argv, &i, "--replica-sync", &v)) {
            if (v != NULL && strcmp(v, "auto") == 0)
                vo.replica_sync = CRD_REPLICA_SYNC_AUTO;
            else if (v != NULL && strcmp(v, "on") == 0)
                vo.replica_sync = CRD_REPLICA_SYNC_ON;
            else if (v != NULL && strcmp(v, "off") == 0)
                vo.replica_sync = CRD_REPLICA_SYNC_OFF;
            else if (v != NULL && strcmp(v, "if-allowed") == 0)
                vo.replica_sync = CRD_REPLICA_SYNC_IF_ALLOWED;
            else
                return cli_usage_error("verify", "--replica-sync is auto, on, off or if-allowed");
        } else if (cli_take_opt(argc, argv, &i, "--second-url", &v)) {
            if (v == NULL || *v == '\0')
                return cli_usage_error("verify", "--second-url needs a URL");
            vo.second_url = v;
        } else if (cli_take_opt(argc, argv, &i, "--prefix", &v)) {
            if (v == NULL || *v == '\0' || strlen(v) > 120 || strchr(v, '{') || strchr(v, '}'))
                return cli_usage_error("verify", "--prefix needs a key prefix (no braces, at "
                                       "most 120 bytes)");
            vo.prefix = v;
        } else {
            return cli_usage_error("verify", "unknown argument '%s'", a);
        }
    }
    if (!permits_given && vo.permits >= vo.procs)
        vo.permits = vo.procs > 1 ? vo.procs - 1 : 1;
    if (vo.permits > vo.procs)
        return cli_usage_error("verify", "--permits %d is more than --procs %d: nothing to "
                               "check", vo.permits, vo.procs);
    probe_target t;
    char err[300];
    if (probe_parse_url(g->url, &t, err, sizeof err) != 0)
        return cli_usage_error("verify", "--url: %s", err);
    t.tls_opts = g;
    if (vo.second_url != NULL) {
        probe_target t2;
        if (probe_parse_url(vo.second_url, &t2, err, sizeof err) != 0)
            return cli_usage_error("verify", "--second-url: %s", err);
    }
    if (vo.failover && t.kind == PROBE_STANDALONE)
        return cli_usage_error("verify", "--failover needs a redis-sentinel:// or "
                               "redis-cluster:// URL (a single server has nothing to fail over "
                               "to)");
    char lock_name[200], sem_name[200], token_key[240];
    snprintf(lock_name, sizeof lock_name, "%s:%ld:lock", vo.prefix, (long)getpid());
    snprintf(sem_name, sizeof sem_name, "%s:%ld:sem", vo.prefix, (long)getpid());
    snprintf(token_key, sizeof token_key, "redisson_lock_token:{%s}", lock_name);

    /* The parent's client: Redis is reachable, and the semaphore has K permits. */
    crd_options o;
    probe_options(g, &o);
    o.replica_sync = vo.replica_sync;
    crd_client *c = NULL;
    crd_status st = crd_client_new(&o, &c);
    crd_semaphore *sem = NULL;
    if (st == CRD_OK && (st = crd_semaphore_new(c, sem_name, &sem)) == CRD_OK)
        st = crd_semaphore_try_set_permits(sem, vo.permits, 0, NULL);
    if (st != CRD_OK) {
        char shown[512], what[600];
        snprintf(what, sizeof what, "cannot start on %s", cli_redact_url(g->url, shown, sizeof shown));
        cli_report("verify", what, st, c);
        crd_semaphore_free(sem);
        crd_client_free(c);
        return cli_exit_for_status(st) == 0 ? EXIT_UNAVAILABLE : cli_exit_for_status(st);
    }
    crd_semaphore_free(sem);
    crd_client_free(c);

    ledger *lg = mmap(NULL, sizeof *lg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (lg == MAP_FAILED) {
        cli_error("verify", "cannot map the shared ledger");
        return EXIT_OSERR;
    }
    int64_t start = now_ns(), end = start + vo.seconds * 1000000000LL;
    fflush(NULL);
    pid_t pids[MAX_PROCS];
    int started = 0;
    for (int i = 0; i < vo.procs; i++) {
        pid_t pid = fork();
        if (pid < 0)
            break;
        if (pid == 0)
            _exit(child_main(g, &vo, lg, i, lock_name, sem_name, end));
        pids[started++] = pid;
    }
    bool failed_over = false, asked_failover = false, said_ready = false;
    char fo_detail[400] = "";
    int64_t fo_ms = 0;
    /* The processes stop by themselves at the end; a straggler (a call past its deadline)
     * gets 30 s more, then SIGKILL. Meanwhile: say when every process is running (on
     * stderr), and the failover a third of the way in. */
    int64_t give_up = end + 30000000000LL;
    int alive = started;
    while (alive > 0) {
        if (!said_ready && atomic_load(&lg->ready) == started) {
            said_ready = true;
            fprintf(stderr, "%s: verify: %d processes running\n", CLI_PROG, started);
        }
        if (vo.failover && !asked_failover && now_ns() >= start + (end - start) / 3) {
            asked_failover = true;
            failed_over = t.kind == PROBE_SENTINEL
                              ? sentinel_failover(&t, fo_detail, sizeof fo_detail, &fo_ms)
                              : cluster_failover(&t, lock_name, fo_detail, sizeof fo_detail,
                                                 &fo_ms);
        }
        int status;
        pid_t w = waitpid(-1, &status, WNOHANG);
        if (w > 0) {
            alive--;
            continue;
        }
        if (w < 0)
            break;
        if (now_ns() > give_up) {
            for (int i = 0; i < started; i++)
                kill(pids[i], SIGKILL);
            give_up = INT64_MAX;
        }
        sleep_us(20000);
    }
    const char *keys[3] = {lock_name, token_key, sem_name};
    bool cleaned = delete_keys(&t, keys, 3);

    /* Latencies of every process. */
    size_t total = 0;
    for (int i = 0; i < vo.procs; i++)
        total += (size_t)atomic_load(&lg->nlat[i]);
    int32_t *all = calloc(total + 1, sizeof *all);
    size_t k = 0;
    for (int i = 0; all != NULL && i < vo.procs; i++)
        for (int j = 0; j < atomic_load(&lg->nlat[i]); j++)
            all[k++] = lg->lat_us[i][j];
    if (all != NULL && k > 0)
        qsort(all, k, sizeof *all, cmp_i32);
    long p50 = k ? all[(k - 1) / 2] : 0, p99 = k ? all[(size_t)((double)(k - 1) * 0.99)] : 0,
         pmax = k ? all[k - 1] : 0;
    free(all);

    long acq = atomic_load(&lg->lock_acq), overlaps = atomic_load(&lg->overlaps),
         stale = atomic_load(&lg->stale), lost = atomic_load(&lg->lost),
         sem_acq = atomic_load(&lg->sem_acq), sem_over = atomic_load(&lg->sem_overlaps);
    /* Overlaps break exclusion; a stale token (the counter went back: a failover lost an
     * acquire's write) is what fencing exists for, and a lost hold was reported to its
     * holder: warnings. */
    int rc = overlaps + sem_over > 0 ? 2 : (lost > 0 || stale > 0 || acq == 0) ? 1 : 0;
    if (vo.failover && !failed_over && rc == 0)
        rc = 1;
    char shown[512];
    cli_redact_url(g->url, shown, sizeof shown);
    char by_status[400] = "";
    for (int s = 0; s < 32; s++) {
        int n = atomic_load(&lg->errors_by_status[s]);
        if (n > 0)
            snprintf(by_status + strlen(by_status), sizeof by_status - strlen(by_status),
                     "%s%s: %d", by_status[0] ? ", " : "", crd_strerror((crd_status)s), n);
    }
    if (vo.json) {
        printf("{\"url\": ");
        cli_json_string(shown, strlen(shown));
        printf(", \"procs\": %d, \"seconds\": %lld, \"permits\": %d, \"lock\": {\"acquisitions\": "
               "%ld, \"overlaps\": %ld, \"stale_tokens\": %ld, \"lost_holds\": %ld, "
               "\"timeouts\": %ld, \"failures\": %ld}, \"semaphore\": {\"acquisitions\": %ld, "
               "\"overlaps\": %ld, \"timeouts\": %ld, \"failures\": %ld}, \"latency_us\": "
               "{\"p50\": %ld, \"p99\": %ld, \"max\": %ld}, \"failover\": {\"asked\": %s, "
               "\"done\": %s, \"ms\": %lld, \"detail\": ", vo.procs, (long long)vo.seconds,
               vo.permits, acq, overlaps, stale, lost, atomic_load(&lg->timeouts),
               atomic_load(&lg->errors), sem_acq, sem_over, atomic_load(&lg->sem_timeouts),
               atomic_load(&lg->sem_errors), p50, p99, pmax, vo.failover ? "true" : "false",
               failed_over ? "true" : "false", (long long)fo_ms);
        cli_json_string(fo_detail, strlen(fo_detail));
        printf("}, \"failures_by_status\": {");
        for (int s = 0, first = 1; s < 32; s++) {
            int n = atomic_load(&lg->errors_by_status[s]);
            if (n == 0)
                continue;
            printf("%s", first ? "" : ", ");
            const char *text = crd_strerror((crd_status)s);
            cli_json_string(text, strlen(text));
            printf(": %d", n);
            first = 0;
        }
        printf("}, \"first_overlap\": ");
        cli_json_string(lg->first_overlap, strlen(lg->first_overlap));
        printf(", \"first_failure\": ");
        cli_json_string(lg->first_error, strlen(lg->first_error));
        printf(", \"cleaned\": %s, \"exit\": %d}\n", cleaned ? "true" : "false", rc);
    } else {
        printf("credisson verify: %s, %d processes, %lld s, semaphore of %d permits\n", shown,
               vo.procs, (long long)vo.seconds, vo.permits);
        printf("lock: %ld acquisitions, %ld overlaps, %ld stale tokens, %ld lost holds, %ld "
               "timed out, %ld failed\n", acq, overlaps, stale, lost, atomic_load(&lg->timeouts),
               atomic_load(&lg->errors));
        printf("semaphore: %ld acquisitions, %ld overlaps (more than %d inside), %ld timed out, "
               "%ld failed\n", sem_acq, sem_over, vo.permits, atomic_load(&lg->sem_timeouts),
               atomic_load(&lg->sem_errors));
        printf("acquire latency: p50 %ld us, p99 %ld us, max %ld us\n", p50, p99, pmax);
        if (vo.failover)
            printf("failover: %s%s (%lld ms)\n", failed_over ? "" : "NOT DONE: ", fo_detail,
                   (long long)fo_ms);
        if (by_status[0])
            printf("failures by status: %s; first: %s\n", by_status, lg->first_error);
        if (lg->first_overlap[0])
            printf("first overlap: %s\n", lg->first_overlap);
        if (!cleaned)
            printf("note: its keys could not be deleted (%s, %s, %s)\n", lock_name, token_key,
                   sem_name);
        printf("verify: %s: exit %d\n",
               rc == 2 ? "OVERLAPS: mutual exclusion was broken"
               : rc == 1 ? (vo.failover && !failed_over ? "the failover was not done"
                            : acq == 0 ? "no acquisition"
                            : stale > 0 ? "stale fencing tokens (a failover lost a write)"
                                        : "holds were lost (each reported)")
                         : "0 overlaps", rc);
    }
    munmap(lg, sizeof *lg);
    return rc;
}
