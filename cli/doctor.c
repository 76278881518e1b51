/*
 * doctor.c -- `credisson [--url URL] doctor [--json] [--samples N] [--timeout MS]
 * [--prefix P]`: checks one deployment for what it means to locks, in the manner of
 * `flutter doctor` and `redis-cli --latency`. Each finding says what it is, why it
 * matters to a lock, how to fix it and a severity; the exit code is the worst severity
 * (0 nothing threatens a lock, 1 warnings, 2 findings that break locks; 64 usage). Then
 * it measures this deployment's floor (round trip, the lock script, pub/sub delivery,
 * and the library's own acquire+release and hand-off).
 *
 * What it touches: reads (INFO, CONFIG GET, ROLE, CLUSTER INFO/SLOTS, SENTINEL MASTER,
 * TIME, ACL WHOAMI) and its own keys under PREFIX:<pid>: (deleted at the end), plus the
 * unlock latches of its own locks, which expire by themselves within seconds. Every
 * command has the --timeout deadline; a server that stops answering (CLIENT PAUSE, a
 * stall) is a finding of its own and ends the checks at once.
 *
 * Raw probes use hiredis (probe.c; over TLS through tlsdial.c's relay), the measured pair and
 * hand-off the public API.
 * Main thread, plus one subscriber thread while pub/sub delivery is measured and one
 * waiter thread while hand-offs are.
 */
#include "probe.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FINDINGS 64

enum { SEV_OK = 0, SEV_WARN = 1, SEV_FAIL = 2 };

typedef struct finding {
    char check[32];
    int sev;
    char summary[400];
    char why[700];
    char fix[400];
} finding;

typedef struct measured {
    int n;
    double ping_p50, ping_p99, script_p50, script_p99, pubsub_p50, pubsub_p99;
    double pair_p50, pair_p99, handoff_p50, handoff_p99;
    int handoffs;
    bool have_raw, have_pubsub, have_pair, have_handoff;
} measured;

typedef struct doctor {
    const global_opts *g;
    probe_target t;
    bool json;
    int samples;
    int64_t timeout_ms;
    const char *prefix;
    char keybase[160];     /* PREFIX:<pid> */
    char tag[24];          /* a hash tag served by the probed node (cluster), or "" */
    finding f[MAX_FINDINGS];
    int n;
    bool stopped;          /* a timeout or a lost connection ended the raw checks */
    redisContext *c;       /* the probed data node */
    probe_addr node;
    /* what was learned */
    char version[64], server_name[16], mode[32];
    int major, minor;
    int replicas;          /* connected replicas of the probed primary (-1 unknown) */
    bool cluster_node;     /* cluster_enabled:1 */
    bool sync_default;     /* replica sync on by default (Sentinel, Cluster) */
    bool wait_ok, eval_ok, evalsha_ok;
    char acq_sha[48], pub_sha[48];
    int64_t lease_ms;
    int cl_primaries, cl_covered, cl_min_rep; /* cluster: the slot map, replicas by INFO */
    char keys[64][240];    /* own keys to delete at the end */
    int nkeys;
    measured m;
} doctor;

static void add(doctor *d, const char *check, int sev, const char *why, const char *fix,
                const char *fmt, ...) CLI_PRINTF(6, 7);
static void add(doctor *d, const char *check, int sev, const char *why, const char *fix,
                const char *fmt, ...)
{
    if (d->n == MAX_FINDINGS)
        return;
    finding *f = &d->f[d->n++];
    snprintf(f->check, sizeof f->check, "%s", check);
    f->sev = sev;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->summary, sizeof f->summary, fmt, ap);
    va_end(ap);
    snprintf(f->why, sizeof f->why, "%s", why != NULL ? why : "");
    snprintf(f->fix, sizeof f->fix, "%s", fix != NULL ? fix : "");
}

/* An own key: PREFIX:<pid>[tag]:<suffix>, remembered for the clean-up. */
static const char *own_key(doctor *d, const char *suffix, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s:%s", d->keybase, d->tag, suffix);
    if (d->nkeys < 64)
        snprintf(d->keys[d->nkeys++], sizeof d->keys[0], "%s", buf);
    return buf;
}

/* A reply, or NULL after recording why the server stopped answering (and stopping). */
static redisReply *ask(doctor *d, const char *what, int argc, const char *const *argv)
{
    if (d->stopped || d->c == NULL)
        return NULL;
    int64_t t0 = probe_now_us();
    redisReply *r = probe_cmd(d->c, argc, argv);
    if (r != NULL)
        return r;
    bool timeout = probe_timed_out(d->c) ||
                   probe_now_us() - t0 >= d->timeout_ms * 1000 - 50000;
    if (!timeout) {
        /* A proxy closes the connection on a command it does not forward (twemproxy does
         * on INFO, SCRIPT LOAD, SUBSCRIBE): said, and the checks go on afresh. */
        char err[300], closed[200];
        bool to;
        snprintf(closed, sizeof closed, "%s", d->c->errstr);
        redisFree(d->c);
        d->c = probe_connect(&d->t, &d->node, true, d->timeout_ms, err, sizeof err, &to);
        if (d->c != NULL) {
            add(d, "proxy", SEV_WARN, "a proxy between the client and the server that refuses "
                "some commands by closing the connection: credisson survives what it knows of "
                "(SCRIPT LOAD falls back to EVAL), but waiters need SUBSCRIBE",
                "use a proxy that forwards scripts and pub/sub, or connect to the server",
                "the server closed the connection on %s (%s)", what, closed);
            return NULL;
        }
    }
    d->stopped = true;
    if (timeout)
        add(d, "timeout", SEV_FAIL,
            "the server accepted the connection but stopped answering: it is paused (CLIENT "
            "PAUSE), stalled (a fork, swap, SIGSTOP) or overloaded. Every lock call waits its "
            "whole deadline there, and a holder cannot renew: its locks expire",
            "find what stalls it (redis-cli --latency, the slow log, CLIENT LIST); doctor "
            "stopped checking here",
            "%s: no answer within %lld ms (timed out)", what, (long long)d->timeout_ms);
    else
        add(d, "connection", SEV_FAIL, "the server closed the connection: nothing more can be "
            "checked", "see the server's log", "%s: the connection failed and could not be "
            "opened again", what);
    return NULL;
}

static redisReply *askv(doctor *d, const char *what, const char *first, ...)
{
    const char *argv[PROBE_MAX_WORDS];
    va_list ap;
    va_start(ap, first);
    int argc = probe_words(argv, first, ap);
    va_end(ap);
    return ask(d, what, argc, argv);
}

static bool is_err(const redisReply *r, const char *code)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           (code == NULL || strncmp(r->str, code, strlen(code)) == 0);
}

/* ---- where the data is --------------------------------------------------------------- */

/* Appends the formatted words to errs, the "; "-separated list of what failed so far. */
static void add_err(char *errs, size_t cap, const char *fmt, ...) CLI_PRINTF(3, 4);
static void add_err(char *errs, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(errs);
    if (n > 0)
        n += (size_t)snprintf(errs + n, cap - n, "; ");
    if (n >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errs + n, cap - n, fmt, ap);
    va_end(ap);
}

/* Why r, the reply to a command on s, is no answer: the connection's failure, the
 * server's error, or otherwise (a reply of the wrong shape). */
static const char *reply_why(const redisContext *s, const redisReply *r, const char *otherwise)
{
    return r == NULL ? s->errstr : r->type == REDIS_REPLY_ERROR ? r->str : otherwise;
}

/* The value of a field of SENTINEL MASTER's flat list. */
static const char *flat_field(const redisReply *r, const char *key)
{
    for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING && strcmp(r->element[i]->str, key) == 0 &&
            r->element[i + 1]->type == REDIS_REPLY_STRING)
            return r->element[i + 1]->str;
    return NULL;
}

/* Sentinel mode: the master as the sentinels see it; the primary into d->node. */
static bool find_sentinel_primary(doctor *d)
{
    int answered = 0;
    char errs[600] = "";
    bool found = false;
    long long down_after = 0, quorum = 0, others = 0, slaves = 0;
    for (int i = 0; i < d->t.naddrs; i++) {
        char why[300];
        bool to;
        redisContext *s = probe_connect(&d->t, &d->t.addrs[i], false, d->timeout_ms, why,
                                        sizeof why, &to);
        if (s == NULL) {
            probe_target bare = d->t;
            bare.user[0] = bare.pass[0] = '\0';
            s = probe_connect(&bare, &d->t.addrs[i], false, d->timeout_ms, why, sizeof why, &to);
        }
        if (s == NULL) {
            add_err(errs, sizeof errs, "%s", why);
            continue;
        }
        redisReply *r = probe_cmdv(s, "SENTINEL", "MASTER", d->t.master, NULL);
        const char *ip = flat_field(r, "ip"), *port = flat_field(r, "port");
        if (ip != NULL && port != NULL) {
            answered++;
            if (!found) {
                memset(&d->node, 0, sizeof d->node);
                snprintf(d->node.host, sizeof d->node.host, "%s", ip);
                d->node.port = atoi(port);
                found = true;
                const char *v;
                down_after = (v = flat_field(r, "down-after-milliseconds")) ? atoll(v) : 0;
                quorum = (v = flat_field(r, "quorum")) ? atoll(v) : 0;
                others = (v = flat_field(r, "num-other-sentinels")) ? atoll(v) : 0;
                slaves = (v = flat_field(r, "num-slaves")) ? atoll(v) : 0;
            }
        } else {
            add_err(errs, sizeof errs, "%s:%d: %s", d->t.addrs[i].host, d->t.addrs[i].port,
                    reply_why(s, r, "no such master"));
        }
        if (r != NULL)
            freeReplyObject(r);
        redisFree(s);
    }
    if (!found) {
        add(d, "topology", SEV_FAIL, "without a primary no lock can be taken",
            "check the sentinel addresses and the master name after '#'",
            "no sentinel named the primary of master '%s': %s", d->t.master, errs);
        return false;
    }
    add(d, "topology", SEV_OK, NULL, NULL,
        "Sentinel: master '%s' at %s:%d, %lld replicas, %lld sentinels (quorum %lld) of "
        "%d named in the URL answering, down-after %lld ms", d->t.master, d->node.host,
        d->node.port, slaves, others + 1, quorum, answered, down_after);
    if (answered < d->t.naddrs)
        add(d, "sentinels", SEV_WARN,
            "a client that reaches fewer sentinels learns of a failover later, or not at all",
            "make every sentinel of the URL reachable", "%d of %d sentinels answered: %s",
            answered, d->t.naddrs, errs);
    /* A killed primary is replaced after down-after plus an election (about a second):
     * a watchdog lease shorter than that expires during the failover. */
    if (down_after > 0 && d->lease_ms < down_after + 2000)
        add(d, "lease-vs-failover", SEV_WARN,
            "a primary that dies is replaced only after down-after-milliseconds plus an "
            "election; a watchdog lease shorter than that expires during the failover, and "
            "every hold is lost (reported, never silent)",
            "raise --watchdog-ms / watchdog_timeout_ms above down-after + 2 s",
            "watchdog lease %lld ms against down-after %lld ms + election",
            (long long)d->lease_ms, down_after);
    d->sync_default = true;
    return true;
}

typedef struct slot_range {
    int from, to;
    probe_addr primary;
    int replicas;
} slot_range;

/* Cluster mode: the slot map from the first seed that answers; the first primary into
 * d->node, a hash tag it serves into d->tag. */
static bool find_cluster_primary(doctor *d, slot_range *ranges, int *nranges)
{
    char errs[600] = "";
    *nranges = 0;
    for (int i = 0; i < d->t.naddrs && *nranges == 0; i++) {
        char why[300];
        bool to;
        redisContext *s = probe_connect(&d->t, &d->t.addrs[i], true, d->timeout_ms, why,
                                        sizeof why, &to);
        if (s == NULL) {
            add_err(errs, sizeof errs, "%s", why);
            continue;
        }
        redisReply *r = probe_cmdv(s, "CLUSTER", "SLOTS", NULL);
        for (size_t k = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && k < r->elements &&
                           *nranges < 128; k++) {
            redisReply *e = r->element[k];
            if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
                e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
                continue;
            slot_range *sr = &ranges[(*nranges)++];
            memset(sr, 0, sizeof *sr);
            sr->from = (int)e->element[0]->integer;
            sr->to = (int)e->element[1]->integer;
            redisReply *n = e->element[2];
            snprintf(sr->primary.host, sizeof sr->primary.host, "%s",
                     n->element[0]->type == REDIS_REPLY_STRING && n->element[0]->len
                         ? n->element[0]->str
                         : d->t.addrs[i].host);
            sr->primary.port = (int)n->element[1]->integer;
            sr->replicas = (int)e->elements - 3;
        }
        if (*nranges == 0)
            add_err(errs, sizeof errs, "%s:%d: %s", d->t.addrs[i].host, d->t.addrs[i].port,
                    reply_why(s, r, "no slot map"));
        if (r != NULL)
            freeReplyObject(r);
        redisFree(s);
    }
    if (*nranges == 0) {
        add(d, "topology", SEV_FAIL, "without the slot map no lock can be routed",
            "check the seed addresses (any one reachable node is enough)",
            "no seed gave its slot map: %s", errs);
        return false;
    }
    int primaries = 0, covered = 0;
    for (int i = 0; i < *nranges; i++) {
        covered += ranges[i].to - ranges[i].from + 1;
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen = seen || (ranges[j].primary.port == ranges[i].primary.port &&
                            strcmp(ranges[j].primary.host, ranges[i].primary.host) == 0);
        primaries += !seen;
    }
    /* The finding comes once every primary has said how many replicas it has (INFO
     * replication: CLUSTER SLOTS lists a replica only once gossip has spread it). */
    d->cl_primaries = primaries;
    d->cl_covered = covered;
    d->cl_min_rep = 1 << 30;
    d->node = ranges[0].primary;
    /* A hash tag in the first range: this node serves the keys doctor makes. */
    for (int k = 0; k < 100000; k++) {
        char tag[8];
        snprintf(tag, sizeof tag, "%d", k);
        int slot = probe_key_slot(tag, strlen(tag));
        if (slot >= ranges[0].from && slot <= ranges[0].to) {
            snprintf(d->tag, sizeof d->tag, ":{%s}", tag);
            break;
        }
    }
    d->sync_default = true;
    return true;
}

/* ---- the checks of the data node ------------------------------------------------------ */

static void check_server(doctor *d, const char *info)
{
    char v[64] = "", name[16] = "redis", mode[32] = "", role[16] = "", slaves[16] = "";
    if (probe_info_field(info, "valkey_version", v, sizeof v))
        snprintf(name, sizeof name, "valkey");
    else
        probe_info_field(info, "redis_version", v, sizeof v);
    if (!probe_info_field(info, "server_mode", mode, sizeof mode))
        probe_info_field(info, "redis_mode", mode, sizeof mode);
    probe_info_field(info, "role", role, sizeof role);
    probe_info_field(info, "connected_slaves", slaves, sizeof slaves);
    snprintf(d->version, sizeof d->version, "%s", v);
    snprintf(d->server_name, sizeof d->server_name, "%s", name);
    snprintf(d->mode, sizeof d->mode, "%s", mode);
    sscanf(v, "%d.%d", &d->major, &d->minor);
    bool valkey = strcmp(name, "valkey") == 0;
    bool sharded = valkey || d->major >= 7;
    bool waitaof = valkey || d->major > 7 || (d->major == 7 && d->minor >= 2);
    bool tested = valkey ? d->major >= 8 : d->major >= 7;
    add(d, "server", tested ? SEV_OK : SEV_WARN,
        tested ? NULL : "credisson is tested on Redis >= 7.0 and Valkey >= 8.0; older servers "
                        "lack sharded pub/sub and some of the error words it reads",
        tested ? NULL : "upgrade the server",
        "%s %s, mode %s; sharded pub/sub %s, WAITAOF %s", valkey ? "Valkey" : "Redis",
        v[0] ? v : "(version unknown)", mode[0] ? mode : "?", sharded ? "yes" : "no (< 7.0)",
        waitaof ? "yes" : "no (< 7.2)");
    d->replicas = slaves[0] ? atoi(slaves) : -1;
    if (strcmp(role, "slave") == 0) {
        add(d, "role", SEV_FAIL,
            "a replica refuses every write: each acquire fails READONLY (nothing is held)",
            "point the URL at the primary (or use redis-sentinel:// so the client follows it)",
            "the URL names a read-only replica (role:slave)");
    } else if (d->t.kind == PROBE_STANDALONE) {
        char aof[8] = "", saves[16] = "";
        probe_info_field(info, "aof_enabled", aof, sizeof aof);
        probe_info_field(info, "rdb_changes_since_last_save", saves, sizeof saves);
        add(d, "replicas", SEV_OK, NULL, NULL,
            "primary with %d replica(s)%s; persistence: %s (a restart without it loses every "
            "lock, and each holder learns so at its next renewal)",
            d->replicas < 0 ? 0 : d->replicas,
            d->replicas > 0 ? " (replica sync is off by default on a redis:// URL)" : "",
            strcmp(aof, "1") == 0 ? "AOF" : "none or RDB only");
    }
    char ce[8] = "";
    d->cluster_node = probe_info_field(info, "cluster_enabled", ce, sizeof ce) &&
                      strcmp(ce, "1") == 0;
}

static void check_memory(doctor *d, const char *info)
{
    char policy[48] = "", maxmem[32] = "";
    probe_info_field(info, "maxmemory_policy", policy, sizeof policy);
    probe_info_field(info, "maxmemory", maxmem, sizeof maxmem);
    bool limited = maxmem[0] && strcmp(maxmem, "0") != 0;
    if (policy[0] == '\0')
        add(d, "maxmemory-policy", SEV_WARN, "an eviction policy can delete held locks",
            "check maxmemory-policy by hand (CONFIG GET maxmemory-policy)",
            "maxmemory-policy unknown (INFO memory says nothing of it)");
    else if (strncmp(policy, "volatile-", 9) == 0 || strncmp(policy, "allkeys-", 8) == 0)
        add(d, "maxmemory-policy", SEV_FAIL,
            strncmp(policy, "volatile-", 9) == 0
                ? "when memory runs short the server evicts keys that have a TTL, and every "
                  "held lock has one: an evicted lock is free for anyone while its holder still "
                  "believes it holds it (redis#9105; BullMQ warns of the same)"
                : "when memory runs short the server evicts any key, locks included: an "
                  "evicted lock is free for anyone while its holder still believes it holds it",
            "CONFIG SET maxmemory-policy noeviction (or keep locks on a server of their own); "
            "writes are then refused with OOM, which the caller sees",
            "maxmemory-policy %s (maxmemory %s)%s", policy, limited ? maxmem : "0",
            limited ? "" : ": nothing is evicted while maxmemory is 0, but a limit set later "
                           "starts evicting locks");
    else
        add(d, "maxmemory-policy", SEV_OK, NULL, NULL,
            "maxmemory-policy %s (maxmemory %s): lock keys are never evicted; a full server "
            "refuses new locks with OOM", policy, limited ? maxmem : "0, no limit");
}

/* Redisson 4.7's probe: a script naming keys of two slots. */
static void check_slots(doctor *d)
{
    if (d->t.kind == PROBE_CLUSTER)
        return;
    /* Two keys without doctor's hash tag, in two slots (nothing is written to them). */
    char k1[240], k2[240];
    snprintf(k1, sizeof k1, "%s:slot-a", d->keybase);
    for (int i = 0;; i++) {
        snprintf(k2, sizeof k2, "%s:slot-b%d", d->keybase, i);
        if (probe_key_slot(k1, strlen(k1)) != probe_key_slot(k2, strlen(k2)))
            break;
    }
    redisReply *r = askv(d, "the two-slot script",
                         "EVAL", "redis.call('get', KEYS[1]) redis.call('get', KEYS[2])", "2",
                         k1, k2, NULL);
    bool crossslot = is_err(r, "CROSSSLOT");
    if (r != NULL)
        freeReplyObject(r);
    if (d->cluster_node) {
        redisReply *ci = askv(d, "CLUSTER INFO", "CLUSTER", "INFO", NULL);
        char size[16] = "", assigned[16] = "";
        if (ci != NULL && ci->type == REDIS_REPLY_STRING) {
            probe_info_field(ci->str, "cluster_size", size, sizeof size);
            probe_info_field(ci->str, "cluster_slots_assigned", assigned, sizeof assigned);
        }
        if (ci != NULL)
            freeReplyObject(ci);
        bool alone = strcmp(size, "1") == 0;
        add(d, "slot-checking", alone ? SEV_WARN : SEV_FAIL,
            alone ? "a Redis Cluster node reached with redis://, serving every slot itself: it "
                    "checks key slots as a proxy in front of a sharded database does, and "
                    "refuses a script whose keys span slots (CROSSSLOT). credisson 0.7+ batches "
                    "watchdog renewals by slot once it sees that; older clients (and Redisson "
                    "before 4.7) lose every watchdog hold after one lease"
                  : "a Redis Cluster node reached with redis://: a lock whose slot another node "
                    "serves is refused with MOVED",
            alone ? "use redis-cluster:// so the client routes by slot from the start"
                  : "use a redis-cluster:// URL",
            "the server is a cluster node (cluster_enabled:1, %s primaries, %s slots "
            "assigned)%s", size[0] ? size : "?", assigned[0] ? assigned : "?",
            crossslot ? "; a script over two slots got CROSSSLOT" : "");
    } else if (crossslot) {
        add(d, "slot-checking", SEV_WARN,
            "the server checks key slots although the URL is redis:// (a proxy in front of a "
            "sharded database: Redis Enterprise, Envoy, a managed endpoint): a script whose "
            "keys span slots is refused. credisson 0.7+ batches watchdog renewals by slot once "
            "it sees that; older clients (and Redisson before 4.7) lose every watchdog hold "
            "after one lease",
            "nothing to do for credisson 0.7+; keep lock names free of braces that split slots",
            "a script over two slots got CROSSSLOT: a slot-checking proxy or cluster node");
    } else if (r != NULL) {
        add(d, "slot-checking", SEV_OK, NULL, NULL,
            "a script over keys of two slots ran: the server does not check slots");
    }
}

/* SCRIPT LOAD, EVALSHA, EVAL: the lock script path. */
static const char acq_script[] =
    "if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) "
    "then redis.call('hincrby', KEYS[1], ARGV[2], 1) redis.call('pexpire', KEYS[1], ARGV[1]) "
    "return nil end return redis.call('pttl', KEYS[1])";
static const char pub_script[] = "return redis.call('publish', KEYS[1], ARGV[1])";

static void check_scripts(doctor *d)
{
    char k[240];
    own_key(d, "script", k, sizeof k);
    redisReply *r = askv(d, "SCRIPT LOAD", "SCRIPT", "LOAD", acq_script, NULL);
    if (r == NULL)
        return;
    bool load_ok = r->type == REDIS_REPLY_STRING;
    if (load_ok)
        snprintf(d->acq_sha, sizeof d->acq_sha, "%s", r->str);
    char load_err[200];
    snprintf(load_err, sizeof load_err, "%s", load_ok ? "" : r->str ? r->str : "?");
    freeReplyObject(r);
    if (load_ok && (r = askv(d, "SCRIPT LOAD", "SCRIPT", "LOAD", pub_script, NULL)) != NULL) {
        if (r->type == REDIS_REPLY_STRING)
            snprintf(d->pub_sha, sizeof d->pub_sha, "%s", r->str);
        freeReplyObject(r);
    }
    char evalsha_err[200] = "", eval_err[200] = "";
    if (load_ok && (r = askv(d, "EVALSHA", "EVALSHA", d->acq_sha, "1", k, "10000",
                             "doctor:1", NULL)) != NULL) {
        d->evalsha_ok = r->type != REDIS_REPLY_ERROR;
        if (!d->evalsha_ok)
            snprintf(evalsha_err, sizeof evalsha_err, "%s", r->str);
        freeReplyObject(r);
    }
    if ((r = askv(d, "EVAL", "EVAL", "return 1", "1", k, NULL)) != NULL) {
        d->eval_ok = r->type != REDIS_REPLY_ERROR;
        if (!d->eval_ok)
            snprintf(eval_err, sizeof eval_err, "%s", r->str);
        freeReplyObject(r);
    }
    if (d->stopped)
        return;
    if (!d->eval_ok)
        add(d, "scripts", SEV_FAIL,
            "every lock operation is one Lua script: credisson sends EVALSHA, and EVAL when "
            "the server's script cache lacks it (after a restart, a failover, SCRIPT FLUSH); "
            "without EVAL those calls fail",
            "grant +eval (the README's ACL rules) or stop renaming it",
            "EVAL refused: %s", eval_err);
    if (load_ok && !d->evalsha_ok)
        add(d, "scripts", SEV_FAIL,
            "every lock operation is sent as EVALSHA first: without it no lock can be taken",
            "grant +evalsha (the README's ACL rules) or stop renaming it",
            "EVALSHA refused: %s", evalsha_err);
    if (!load_ok)
        add(d, "scripts", SEV_WARN,
            "the watchdog loads its renewal script with SCRIPT LOAD after a cache flush; "
            "without it each such round goes as EVAL (credisson 0.7+), costing bandwidth",
            "grant +script|load", "SCRIPT LOAD refused: %s", load_err);
    if (d->eval_ok && (d->evalsha_ok || !load_ok) && load_ok)
        add(d, "scripts", SEV_OK, NULL, NULL, "EVAL, EVALSHA and SCRIPT LOAD work");
    else if (d->eval_ok && !load_ok)
        add(d, "scripts", SEV_OK, NULL, NULL, "EVAL works");
}

/* The commands credisson's scripts run, tried inside one script on doctor's own keys:
 * a NOPERM names a right the ACL user lacks (Redis checks each redis.call). */
static const char rights_script[] =
    "local refused = {} "
    "local function try(name, ...) local ok = redis.pcall(name, ...) "
    "if type(ok) == 'table' and ok.err and string.find(ok.err, 'NOPERM', 1, true) == 1 then "
    "refused[#refused + 1] = name end end "
    "try('exists', KEYS[1]) try('hexists', KEYS[1], 'f') try('hget', KEYS[1], 'f') "
    "try('hincrby', KEYS[1], 'f', 1) try('pexpire', KEYS[1], 10000) try('pttl', KEYS[1]) "
    "try('type', KEYS[1]) try('hlen', KEYS[1]) try('hkeys', KEYS[1]) try('hset', KEYS[1], 'f', 1) "
    "try('hdel', KEYS[1], 'f') try('del', KEYS[1]) try('set', KEYS[2], '1', 'px', 10000) "
    "try('get', KEYS[2]) try('incr', KEYS[2]) try('publish', KEYS[3], 'doctor') "
    "try('rpush', KEYS[4], 'x') try('lindex', KEYS[4], 0) try('lrange', KEYS[4], 0, -1) "
    "try('lrem', KEYS[4], 0, 'x') try('lpop', KEYS[4]) try('zadd', KEYS[5], 1, 'x') "
    "try('zincrby', KEYS[5], 1, 'x') try('zrange', KEYS[5], 0, -1) try('zscore', KEYS[5], 'x') "
    "try('zrem', KEYS[5], 'x') redis.pcall('del', KEYS[1], KEYS[2], KEYS[4], KEYS[5]) "
    "return refused";

static void check_rights(doctor *d)
{
    if (d->stopped || !d->eval_ok)
        return;
    char h[240], s[240], ch[240], l[240], z[240];
    own_key(d, "rights-hash", h, sizeof h);
    own_key(d, "rights-string", s, sizeof s);
    snprintf(ch, sizeof ch, "%s%s:rights-channel", d->keybase, d->tag);
    own_key(d, "rights-list", l, sizeof l);
    own_key(d, "rights-zset", z, sizeof z);
    redisReply *r = askv(d, "the ACL check", "EVAL", rights_script, "5", h, s, ch, l, z, NULL);
    if (r == NULL)
        return;
    char missing[400] = "";
    bool keys_refused = false;
    if (r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < r->elements; i++)
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s",
                     i ? ", " : "", r->element[i]->str);
    } else if (r->type == REDIS_REPLY_ERROR) {
        keys_refused = strstr(r->str, "key") != NULL || strstr(r->str, "channel") != NULL;
        snprintf(missing, sizeof missing, "%s", r->str);
    }
    freeReplyObject(r);
    /* The commands sent outside scripts. */
    struct {
        const char *argv[4];
        int argc;
        const char *name;
    } plain[] = {{{"EXISTS", h}, 2, "exists"},     {{"HGET", h, "f"}, 3, "hget"},
                 {{"HEXISTS", h, "f"}, 3, "hexists"}, {{"PTTL", h}, 2, "pttl"},
                 {{"ROLE"}, 1, "role"},             {{"INFO", "memory"}, 2, "info"}};
    char plain_missing[200] = "";
    for (size_t i = 0; i < sizeof plain / sizeof plain[0] && !d->stopped; i++) {
        redisReply *p = ask(d, plain[i].name, plain[i].argc, plain[i].argv);
        if (is_err(p, "NOPERM"))
            snprintf(plain_missing + strlen(plain_missing),
                     sizeof plain_missing - strlen(plain_missing), "%s%s",
                     plain_missing[0] ? ", " : "", plain[i].name);
        if (p != NULL)
            freeReplyObject(p);
    }
    if (d->stopped)
        return;
    if (keys_refused)
        add(d, "acl", SEV_WARN,
            "doctor's own keys are outside the key or channel patterns the ACL user may use, so "
            "its rights were not checked",
            "run doctor with --prefix under your locks' key pattern (e.g. --prefix app:doctor)",
            "the ACL refused doctor's keys: %s", missing);
    else if (missing[0] != '\0' || plain_missing[0] != '\0')
        add(d, "acl", SEV_FAIL,
            "credisson's scripts and reads need these rights: a refused one fails the lock "
            "operation that runs it (an unlock refused its PUBLISH after deleting the hash "
            "wakes nobody)",
            "grant them (the README's ACL rules list each lock kind's commands)",
            "the ACL user lacks: %s%s%s", missing, missing[0] && plain_missing[0] ? ", " : "",
            plain_missing);
    else
        add(d, "acl", SEV_OK, NULL, NULL,
            "every command credisson sends is allowed (scripts' commands, EXISTS, HGET, HEXISTS, "
            "PTTL, ROLE, INFO)");
}

static void check_wait(doctor *d, bool sync_default)
{
    redisReply *r = askv(d, "WAIT 0 0", "WAIT", "0", "0", NULL);
    if (r == NULL)
        return;
    d->wait_ok = r->type == REDIS_REPLY_INTEGER;
    char why[200];
    snprintf(why, sizeof why, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
    redisReply *a = askv(d, "WAITAOF 0 0 0", "WAITAOF", "0", "0", "0", NULL);
    bool waitaof = a != NULL && a->type != REDIS_REPLY_ERROR;
    if (a != NULL)
        freeReplyObject(a);
    if (!d->wait_ok) {
        int sev = d->replicas > 0 ? (sync_default ? SEV_FAIL : SEV_WARN) : SEV_OK;
        add(d, "wait", sev,
            sync_default ? "replica sync (on by default with Sentinel and Cluster, as in Java) "
                           "sends WAIT after every lock script; on a server that refuses it an "
                           "acquire with replicas to wait for returns CRD_SYNC_UNAVAILABLE"
                         : "replica sync (replica_sync ON) cannot work here: acquires would "
                           "return CRD_SYNC_UNAVAILABLE",
            "set replica_sync to CRD_REPLICA_SYNC_OFF (or _IF_ALLOWED), or allow WAIT",
            "WAIT refused: %s%s", why, d->replicas > 0 ? "" : " (no replicas: nothing to wait for)");
        return;
    }
    if (d->replicas <= 0) {
        add(d, "wait", SEV_OK, NULL, NULL, "WAIT works (no replicas to acknowledge); WAITAOF %s",
            waitaof ? "available" : "not available");
        return;
    }
    /* One write of doctor's own, then how many replicas acknowledge it within 1 s. */
    char k[240], n[16];
    own_key(d, "wait", k, sizeof k);
    redisReply *w = askv(d, "SET", "SET", k, "1", "PX", "10000", NULL);
    if (w != NULL)
        freeReplyObject(w);
    snprintf(n, sizeof n, "%d", d->replicas);
    int64_t t0 = probe_now_us();
    w = askv(d, "WAIT", "WAIT", n, "1000", NULL);
    int64_t took = probe_now_us() - t0;
    if (w == NULL)
        return;
    long long acks = w->type == REDIS_REPLY_INTEGER ? w->integer : 0;
    freeReplyObject(w);
    add(d, "wait", acks == 0 ? (sync_default ? SEV_FAIL : SEV_WARN) : SEV_OK,
        acks == 0 ? "with replica sync (default on Sentinel and Cluster) every acquire no replica "
                    "acknowledges is undone (CRD_NOT_SYNCED): no lock can be taken"
                  : NULL,
        acks == 0 ? "check the replicas' links (INFO replication), or set replica_sync OFF"
                  : NULL,
        "WAIT: %lld of %d replica(s) acknowledged a write in %lld us; WAITAOF %s", acks,
        d->replicas, (long long)took, waitaof ? "available" : "not available");
}

static void check_config(doctor *d)
{
    redisReply *r = askv(d, "CONFIG GET", "CONFIG", "GET", "notify-keyspace-events", NULL);
    if (r == NULL)
        return;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        add(d, "keyspace-events", SEV_OK, NULL, NULL,
            "notify-keyspace-events '%s': credisson watch shows acquires through client "
            "tracking (Redis >= 6) or these events; releases through the unlock message",
            r->element[1]->str);
    else
        add(d, "keyspace-events", SEV_OK, NULL, NULL,
            "CONFIG GET refused (%s): a managed service; watch relies on client tracking",
            r->type == REDIS_REPLY_ERROR ? r->str : "?");
    freeReplyObject(r);
    if (!d->cluster_node && d->t.kind != PROBE_CLUSTER)
        return;
    r = askv(d, "CONFIG GET", "CONFIG", "GET", "cluster-node-timeout", NULL);
    if (r == NULL)
        return;
    long long nt = r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? atoll(r->element[1]->str)
                                                                     : -1;
    freeReplyObject(r);
    if (nt < 0)
        add(d, "node-timeout", SEV_OK, NULL, NULL, "cluster-node-timeout unknown (CONFIG GET "
            "refused)");
    else if (d->lease_ms > nt && !(d->wait_ok && d->replicas > 0))
        add(d, "node-timeout", SEV_WARN,
            "a primary cut off from the cluster keeps granting locks until its node timeout; "
            "a hold granted there whose lease outlasts the replica's promotion overlaps the "
            "holder the other side lets in (the README measured it), unless replica sync "
            "refuses the cut side's acquires",
            "keep replica sync on with replicas, or a watchdog lease below the node timeout",
            "watchdog lease %lld ms > cluster-node-timeout %lld ms", (long long)d->lease_ms, nt);
    else
        add(d, "node-timeout", SEV_OK, NULL, NULL,
            "cluster-node-timeout %lld ms, watchdog lease %lld ms%s", nt, (long long)d->lease_ms,
            d->lease_ms > nt ? " (replica sync guards the split brain)" : "");
}

static void check_clock(doctor *d)
{
    struct timespec before, after;
    clock_gettime(CLOCK_REALTIME, &before);
    redisReply *r = askv(d, "TIME", "TIME", NULL);
    clock_gettime(CLOCK_REALTIME, &after);
    if (r == NULL)
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        add(d, "clock", SEV_OK, NULL, NULL, "TIME refused: the clock was not compared");
        freeReplyObject(r);
        return;
    }
    double server_ms = atof(r->element[0]->str) * 1000.0 + atof(r->element[1]->str) / 1000.0;
    freeReplyObject(r);
    double local_ms = ((double)before.tv_sec + (double)after.tv_sec) * 500.0 +
                      ((double)before.tv_nsec + (double)after.tv_nsec) / 2e6;
    double skew = local_ms - server_ms;
    double mag = skew < 0 ? -skew : skew;
    add(d, "clock", mag > 500 ? SEV_WARN : SEV_OK,
        mag > 500 ? "the fair lock's queue deadlines and the expirable semaphore's permit leases "
                    "are the hosts' wall clocks: hosts that disagree by d ms shift each other's "
                    "deadlines by d ms"
                  : NULL,
        mag > 500 ? "run NTP (chrony, systemd-timesyncd) on every host" : NULL,
        "this host's clock is %.0f ms %s the server's TIME", mag,
        skew >= 0 ? "ahead of" : "behind");
}

/* ---- measurements ------------------------------------------------------------------------ */

typedef struct sub_ctx {
    redisContext *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long got;
    int64_t t_recv;
    atomic_bool failed;
} sub_ctx;

/* The subscriber's thread: counts the messages and notes when the last one came, until
 * the "stop" message or the connection's end (failed); each change is broadcast on cv. */
static void *sub_main(void *arg)
{
    sub_ctx *s = arg;
    bool stop = false;
    redisReply *r;
    while (!stop && (r = probe_next_reply(s->c)) != NULL) {
        int64_t t = probe_now_us();
        bool msg = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                   r->element[0]->type == REDIS_REPLY_STRING &&
                   strcmp(r->element[0]->str, "message") == 0;
        stop = msg && strcmp(r->element[2]->str, "stop") == 0;
        if (msg) {
            pthread_mutex_lock(&s->mu);
            s->got++;
            s->t_recv = t;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
        }
        freeReplyObject(r);
    }
    if (!stop) {
        atomic_store(&s->failed, true);
        pthread_mutex_lock(&s->mu);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

/* Unmeasured rounds before each measurement: a connection's, a thread's and a script's
 * first rounds (page faults, wake-ups of an idle CPU) are not the deployment's floor. */
static int warmup(const doctor *d) { return d->samples / 10 > 5 ? d->samples / 10 : 5; }

static void measure_raw(doctor *d)
{
    int n = d->samples, w = warmup(d);
    double *v = calloc((size_t)n, sizeof *v);
    if (v == NULL)
        return;
    for (int i = -w; i < n && !d->stopped; i++) {
        int64_t t0 = probe_now_us();
        redisReply *r = askv(d, "PING", "PING", NULL);
        if (i >= 0)
            v[i] = (double)(probe_now_us() - t0);
        if (r != NULL)
            freeReplyObject(r);
    }
    if (d->stopped) {
        free(v);
        return;
    }
    d->m.n = n;
    d->m.ping_p99 = probe_quantile(v, n, 0.99);
    d->m.ping_p50 = probe_quantile(v, n, 0.5);
    if (d->evalsha_ok && d->acq_sha[0]) {
        /* The lock script on a fresh key each time: the server work of an uncontended
         * acquire (credisson-bench's floor does the same). */
        char k[240];
        snprintf(k, sizeof k, "%s%s:floor", d->keybase, d->tag);
        size_t kl = strlen(k);
        for (int i = -w; i < n && !d->stopped; i++) {
            snprintf(k + kl, sizeof k - kl, ":%d", i);
            int64_t t0 = probe_now_us();
            redisReply *r = askv(d, "EVALSHA", "EVALSHA", d->acq_sha, "1", k, "10000",
                                 "00000000-0000-4000-8000-000000000000:1", NULL);
            if (i >= 0)
                v[i] = (double)(probe_now_us() - t0);
            if (r != NULL)
                freeReplyObject(r);
            if ((r = askv(d, "DEL", "DEL", k, NULL)) != NULL)
                freeReplyObject(r);
        }
        if (!d->stopped) {
            d->m.script_p99 = probe_quantile(v, n, 0.99);
            d->m.script_p50 = probe_quantile(v, n, 0.5);
            d->m.have_raw = true;
        }
    }
    free(v);
}

static void measure_pubsub(doctor *d)
{
    if (d->stopped || !d->pub_sha[0])
        return;
    char err[300];
    bool to;
    sub_ctx s;
    memset(&s, 0, sizeof s);
    s.c = probe_connect(&d->t, &d->node, true, d->timeout_ms, err, sizeof err, &to);
    if (s.c == NULL)
        return;
    char ch[240];
    snprintf(ch, sizeof ch, "%s%s:pubsub", d->keybase, d->tag);
    redisReply *r = probe_cmdv(s.c, "SUBSCRIBE", ch, NULL);
    bool ok = r != NULL && r->type == REDIS_REPLY_ARRAY;
    char why[200];
    snprintf(why, sizeof why, "%s", reply_why(s.c, r, "?"));
    if (r != NULL)
        freeReplyObject(r);
    if (!ok) {
        add(d, "pubsub", SEV_WARN,
            "waiters sleep until the holder's unlock message; without SUBSCRIBE they re-check "
            "every poll_interval_ms (1 s) instead, and a hand-off costs up to that",
            "allow SUBSCRIBE and the lock channels (&redisson_lock__channel:{...})",
            "SUBSCRIBE refused: %s", why);
        redisFree(s.c);
        return;
    }
    /* No deadline on the subscriber's reads: it waits for messages. */
    struct timeval none = {0, 0};
    redisSetTimeout(s.c, none);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, sub_main, &s) != 0) {
        redisFree(s.c);
        return;
    }
    int n = d->samples, w = warmup(d);
    double *v = calloc((size_t)n, sizeof *v);
    int got = 0;
    for (int i = -w; v != NULL && i <= n && !d->stopped && !atomic_load(&s.failed); i++) {
        bool last = i == n;
        pthread_mutex_lock(&s.mu);
        long want = s.got + 1;
        pthread_mutex_unlock(&s.mu);
        int64_t t0 = probe_now_us();
        r = askv(d, "the publish script", "EVALSHA", d->pub_sha, "1", ch, last ? "stop" : "0",
                 NULL);
        if (r != NULL)
            freeReplyObject(r);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)(d->timeout_ms / 1000) + 1;
        pthread_mutex_lock(&s.mu);
        while (s.got < want && !atomic_load(&s.failed) &&
               pthread_cond_timedwait(&s.cv, &s.mu, &until) == 0) {
        }
        bool arrived = s.got >= want;
        int64_t t1 = s.t_recv;
        pthread_mutex_unlock(&s.mu);
        if (!arrived)
            break;
        if (!last && i >= 0)
            v[got++] = (double)(t1 - t0);
    }
    if (got < n || d->stopped) {
        /* The thread may still wait: end its connection under it. */
        shutdown(s.c->fd, SHUT_RDWR);
    }
    pthread_join(th, NULL);
    redisFree(s.c);
    if (v != NULL && got == n) {
        d->m.pubsub_p99 = probe_quantile(v, n, 0.99);
        d->m.pubsub_p50 = probe_quantile(v, n, 0.5);
        d->m.have_pubsub = true;
        add(d, "pubsub", SEV_OK, NULL, NULL, "pub/sub delivers the unlock message (%d messages)",
            n);
    } else if (!d->stopped) {
        add(d, "pubsub", SEV_WARN,
            "waiters sleep until the holder's unlock message; when it does not arrive they wake "
            "only at the lock's TTL or every poll_interval_ms",
            "check what is between the client and the server (a proxy that does not forward "
            "pub/sub)", "a published message did not arrive within %lld ms (%d of %d did)",
            (long long)d->timeout_ms + 1000, got, n);
    }
    free(v);
}

/* Sharded pub/sub (Redis 7.0+): one SSUBSCRIBE and one SPUBLISH. A cluster client uses
 * it by default (Redisson's shardedSubscriptionMode AUTO), so there a refusal breaks the
 * waiters' wake-ups; elsewhere it is information. */
static void check_sharded(doctor *d)
{
    bool valkey = strcmp(d->server_name, "valkey") == 0;
    if (d->stopped || d->major == 0 || (!valkey && d->major < 7))
        return;
    bool cluster = d->t.kind == PROBE_CLUSTER;
    char err[300];
    bool to;
    redisContext *s = probe_connect(&d->t, &d->node, true, d->timeout_ms, err, sizeof err, &to);
    if (s == NULL)
        return;
    char ch[240];
    snprintf(ch, sizeof ch, "%s%s:sharded", d->keybase, d->tag);
    redisReply *r = probe_cmdv(s, "SSUBSCRIBE", ch, NULL);
    bool sub = r != NULL && r->type == REDIS_REPLY_ARRAY;
    char why[200];
    snprintf(why, sizeof why, "%s", reply_why(s, r, "?"));
    if (r != NULL)
        freeReplyObject(r);
    bool got = false;
    if (sub) {
        redisReply *p = askv(d, "SPUBLISH", "SPUBLISH", ch, "doctor", NULL);
        if (p != NULL && p->type == REDIS_REPLY_ERROR)
            snprintf(why, sizeof why, "SPUBLISH: %s", p->str);
        bool published = p != NULL && p->type == REDIS_REPLY_INTEGER;
        if (p != NULL)
            freeReplyObject(p);
        redisReply *m = published ? probe_next_reply(s) : NULL;
        got = m != NULL && m->type == REDIS_REPLY_ARRAY;
        if (m != NULL)
            freeReplyObject(m);
        if (published && !got)
            snprintf(why, sizeof why, "the message did not arrive within %lld ms",
                     (long long)d->timeout_ms);
    }
    redisFree(s);
    if (got)
        add(d, "sharded-pubsub", SEV_OK, NULL, NULL, "SSUBSCRIBE and SPUBLISH deliver%s",
            cluster ? " (a cluster client's default for unlock messages)" : "");
    else
        add(d, "sharded-pubsub", cluster ? SEV_FAIL : SEV_OK,
            cluster ? "a cluster client publishes unlock messages with SPUBLISH and waits with "
                      "SSUBSCRIBE by default (as Java 3.22+ does): without them waiters wake only "
                      "at the lock's TTL"
                    : NULL,
            cluster ? "allow SSUBSCRIBE/SPUBLISH and the lock channels, or set sharded_pubsub "
                      "OFF in every client of the fleet"
                    : NULL,
            "sharded pub/sub does not work: %s%s", why,
            cluster ? "" : " (not used on a single server unless asked for)");
}

/* The library's own pair and hand-off. */
typedef struct handoff_ctx {
    crd_lock *lock;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int round, done_round;
    int64_t t_acquired;
    crd_status st;
    bool quit;
} handoff_ctx;

static void *handoff_waiter(void *arg)
{
    handoff_ctx *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (h->round == h->done_round && !h->quit)
            pthread_cond_wait(&h->cv, &h->mu);
        if (h->quit)
            break;
        pthread_mutex_unlock(&h->mu);
        crd_status st = crd_lock_acquire(h->lock, 5000, 10000);
        int64_t t = probe_now_us();
        if (st == CRD_OK)
            crd_lock_release(h->lock);
        pthread_mutex_lock(&h->mu);
        h->st = st;
        h->t_acquired = t;
        h->done_round = h->round;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static bool waiting_one(crd_client *c)
{
    crd_metrics m;
    return crd_client_metrics(c, &m, sizeof m) == CRD_OK && m.waiting_now >= 1;
}

static void measure_library(doctor *d)
{
    crd_options o;
    probe_options(d->g, &o);
    o.command_timeout_ms = d->timeout_ms;
    o.connect_timeout_ms = d->timeout_ms;
    crd_client *a = NULL, *b = NULL;
    crd_status st = crd_client_new(&o, &a);
    if (st != CRD_OK) {
        add(d, "library", SEV_FAIL, "the library cannot start a client here: no lock can be taken",
            "see the words above", "crd_client_new: %s (%s)", crd_strerror(st),
            crd_client_errmsg(a));
        crd_client_free(a);
        return;
    }
    char name[240];
    snprintf(name, sizeof name, "%s%s:lock", d->keybase, d->tag);
    crd_lock *la = NULL;
    if (crd_lock_new(a, name, &la) != CRD_OK) {
        crd_client_free(a);
        return;
    }
    int n = d->samples;
    double *v = calloc((size_t)n, sizeof *v);
    int ok = 0;
    crd_status bad = CRD_OK;
    char bad_msg[400] = "";
    for (int i = -warmup(d); v != NULL && i < n; i++) {
        int64_t t0 = probe_now_us();
        st = crd_lock_acquire(la, 0, 10000);
        if (st == CRD_OK)
            st = crd_lock_release(la);
        if (st != CRD_OK) {
            bad = st;
            snprintf(bad_msg, sizeof bad_msg, "%s", crd_client_errmsg(a));
            break;
        }
        if (i >= 0)
            v[ok++] = (double)(probe_now_us() - t0);
    }
    if (bad != CRD_OK) {
        add(d, "library", SEV_FAIL, "an uncontended acquire and release must work on a healthy "
            "deployment", "see the library's words", "acquire+release: %s (%s)",
            crd_strerror(bad), bad_msg);
    } else if (ok == n && n > 0) {
        d->m.pair_p99 = probe_quantile(v, n, 0.99);
        d->m.pair_p50 = probe_quantile(v, n, 0.5);
        d->m.have_pair = true;
    }
    /* Hand-offs: a waiter in another client, woken by the release. */
    int rounds = n < 100 ? n : 100, done = 0;
    crd_lock *lb = NULL;
    if (v != NULL && bad == CRD_OK && crd_client_new(&o, &b) == CRD_OK &&
        crd_lock_new(b, name, &lb) == CRD_OK) {
        handoff_ctx h;
        memset(&h, 0, sizeof h);
        h.lock = lb;
        pthread_mutex_init(&h.mu, NULL);
        pthread_cond_init(&h.cv, NULL);
        pthread_t th;
        if (pthread_create(&th, NULL, handoff_waiter, &h) == 0) {
            for (int i = 0; i < rounds; i++) {
                if (crd_lock_acquire(la, 0, 10000) != CRD_OK)
                    break;
                pthread_mutex_lock(&h.mu);
                h.round++;
                pthread_cond_broadcast(&h.cv);
                pthread_mutex_unlock(&h.mu);
                /* The waiter must be asleep on the channel before the release. */
                int64_t until = probe_now_us() + 2000000;
                while (!waiting_one(b) && probe_now_us() < until) {
                    struct timespec ts = {0, 200000};
                    nanosleep(&ts, NULL);
                }
                int64_t t0 = probe_now_us();
                crd_lock_release(la);
                pthread_mutex_lock(&h.mu);
                while (h.done_round != h.round)
                    pthread_cond_wait(&h.cv, &h.mu);
                crd_status hs = h.st;
                int64_t t1 = h.t_acquired;
                pthread_mutex_unlock(&h.mu);
                if (hs != CRD_OK)
                    break;
                v[done++] = (double)(t1 - t0);
            }
            pthread_mutex_lock(&h.mu);
            h.quit = true;
            pthread_cond_broadcast(&h.cv);
            pthread_mutex_unlock(&h.mu);
            pthread_join(th, NULL);
        }
    }
    if (done > 0) {
        d->m.handoffs = done;
        d->m.handoff_p99 = probe_quantile(v, done, 0.99);
        d->m.handoff_p50 = probe_quantile(v, done, 0.5);
        d->m.have_handoff = true;
    }
    free(v);
    crd_lock_free(lb);
    crd_lock_free(la);
    crd_client_free(b);
    crd_client_free(a);
}

/* ---- report ------------------------------------------------------------------------------ */

static const char *sev_name(int s) { return s == SEV_FAIL ? "fail" : s == SEV_WARN ? "warn" : "ok"; }

static void json_str(const char *s) { cli_json_string(s, strlen(s)); }

static void report(doctor *d, int worst)
{
    char shown[512];
    cli_redact_url(d->g->url, shown, sizeof shown);
    const measured *m = &d->m;
    double pair_floor = m->have_raw ? 2 * m->script_p50 : 0;
    double handoff_floor = m->have_raw && m->have_pubsub ? m->pubsub_p50 + m->script_p50 : 0;
    int warns = 0, fails = 0;
    for (int i = 0; i < d->n; i++) {
        warns += d->f[i].sev == SEV_WARN;
        fails += d->f[i].sev == SEV_FAIL;
    }
    if (d->json) {
        printf("{\"url\": ");
        json_str(shown);
        printf(", \"findings\": [");
        for (int i = 0; i < d->n; i++) {
            printf("%s{\"check\": ", i ? ", " : "");
            json_str(d->f[i].check);
            printf(", \"severity\": \"%s\", \"summary\": ", sev_name(d->f[i].sev));
            json_str(d->f[i].summary);
            printf(", \"why\": ");
            json_str(d->f[i].why);
            printf(", \"fix\": ");
            json_str(d->f[i].fix);
            printf("}");
        }
        printf("], \"measured\": {\"samples\": %d", m->n);
        if (m->n > 0)
            printf(", \"ping_us_p50\": %.1f, \"ping_us_p99\": %.1f", m->ping_p50, m->ping_p99);
        if (m->have_raw)
            printf(", \"lock_script_us_p50\": %.1f, \"lock_script_us_p99\": %.1f", m->script_p50,
                   m->script_p99);
        if (m->have_pubsub)
            printf(", \"pubsub_delivery_us_p50\": %.1f, \"pubsub_delivery_us_p99\": %.1f",
                   m->pubsub_p50, m->pubsub_p99);
        if (m->have_pair)
            printf(", \"credisson_pair_us_p50\": %.1f, \"credisson_pair_us_p99\": %.1f",
                   m->pair_p50, m->pair_p99);
        if (m->have_handoff)
            printf(", \"credisson_handoff_us_p50\": %.1f, \"credisson_handoff_us_p99\": %.1f, "
                   "\"handoffs\": %d", m->handoff_p50, m->handoff_p99, m->handoffs);
        printf("}, \"floor\": {");
        if (pair_floor > 0)
            printf("\"acquire_release_us\": %.0f", pair_floor);
        if (handoff_floor > 0)
            printf("%s\"handoff_us\": %.0f", pair_floor > 0 ? ", " : "", handoff_floor);
        printf("}, \"warnings\": %d, \"failures\": %d, \"exit\": %d}\n", warns, fails, worst);
        return;
    }
    printf("credisson doctor: %s\n", shown);
    for (int i = 0; i < d->n; i++) {
        const finding *f = &d->f[i];
        printf("[%s] %s: %s\n", f->sev == SEV_FAIL ? "FAIL" : f->sev == SEV_WARN ? "WARN" : " ok ",
               f->check, f->summary);
        if (f->sev != SEV_OK) {
            if (f->why[0])
                printf("       why: %s\n", f->why);
            if (f->fix[0])
                printf("       fix: %s\n", f->fix);
        }
    }
    if (m->n > 0) {
        printf("measured (%d samples, p50/p99): round trip %.0f/%.0f us", m->n, m->ping_p50,
               m->ping_p99);
        if (m->have_raw)
            printf(", lock script %.0f/%.0f us", m->script_p50, m->script_p99);
        if (m->have_pubsub)
            printf(", pub/sub delivery %.0f/%.0f us", m->pubsub_p50, m->pubsub_p99);
        printf("\n");
        if (d->t.tls) /* tlsdial.c: two more hand-overs between threads per round trip */
            printf("(raw probes over TLS go through a relay thread: these and the floor read "
                   "higher than the server costs; credisson's own figures do not)\n");
    }
    if (pair_floor > 0)
        printf("floor: an uncontended acquire+release costs at least %.0f us here (two lock "
               "scripts)%s", pair_floor, handoff_floor > 0 ? "" : "\n");
    if (handoff_floor > 0)
        printf(", a hand-off at least %.0f us (the unlock message, then the waiter's script)\n",
               handoff_floor);
    if (m->have_pair)
        printf("credisson here: acquire+release %.0f/%.0f us (p50/p99)", m->pair_p50,
               m->pair_p99);
    if (m->have_handoff)
        printf("%shand-off %.0f/%.0f us (%d)", m->have_pair ? ", " : "credisson here: ",
               m->handoff_p50, m->handoff_p99, m->handoffs);
    if (m->have_pair || m->have_handoff)
        printf("\n");
    printf("doctor: %d failure(s), %d warning(s): exit %d (%s)\n", fails, warns, worst,
           worst == 2 ? "findings that break locks" : worst == 1 ? "warnings"
                                                               : "nothing threatens a lock");
}

/* ---- the command ---------------------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: credisson [--url URL] doctor [--json] [--samples N] [--timeout MS]\n"
            "                 [--prefix P]\n"
            "\n"
            "Checks the deployment URL names for what it means to locks: server and version,\n"
            "topology (standalone, replicas, Sentinel, Cluster, a slot-checking proxy),\n"
            "maxmemory-policy, scripts (EVAL, EVALSHA, SCRIPT LOAD), WAIT and the replicas that\n"
            "acknowledge, the ACL rights credisson needs, pub/sub delivery, cluster-node-timeout\n"
            "against the watchdog lease, this host's clock against the server's TIME and the\n"
            "keyspace events watch uses. Each finding says why it matters and how to fix it.\n"
            "Then it measures the round trip, the lock script and pub/sub delivery, prints this\n"
            "deployment's floor, and times credisson's own acquire+release and hand-off.\n"
            "\n"
            "  --json         one JSON object (findings, measured, floor, exit)\n"
            "  --samples N    samples per measurement (default 300; 0: no measurements)\n"
            "  --timeout MS   deadline of every command (default 2000): a server that stops\n"
            "                 answering is reported as a timeout and ends the checks\n"
            "  --prefix P     doctor's own keys are P:<pid>:... (default credisson:doctor),\n"
            "                 deleted at the end; use a prefix your ACL user may write\n"
            "\n"
            "Exit: 0 nothing threatens a lock, 1 warnings, 2 findings that break locks,\n"
            "64 usage error.\n");
}

int cmd_doctor(const global_opts *g, int argc, char **argv)
{
    doctor *d = calloc(1, sizeof *d);
    if (d == NULL) {
        cli_error("doctor", "out of memory");
        return EXIT_OSERR;
    }
    d->g = g;
    d->samples = 300;
    d->timeout_ms = 2000;
    d->prefix = "credisson:doctor";
    d->lease_ms = g->watchdog_ms > 0 ? g->watchdog_ms : 30000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t num;
        if (cli_is_help(a)) {
            usage(stdout);
            free(d);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            d->json = true;
        } else if (cli_take_opt(argc, argv, &i, "--samples", &v)) {
            if (v == NULL || !cli_parse_ms(v, &num) || num > 100000) {
                free(d);
                return cli_usage_error("doctor", "--samples needs a number from 0 to 100000");
            }
            d->samples = (int)num;
        } else if (cli_take_opt(argc, argv, &i, "--timeout", &v)) {
            if (v == NULL || !cli_parse_ms(v, &num) || num < 1 || num > 600000) {
                free(d);
                return cli_usage_error("doctor", "--timeout needs milliseconds from 1 to 600000");
            }
            d->timeout_ms = num;
        } else if (cli_take_opt(argc, argv, &i, "--prefix", &v)) {
            if (v == NULL || *v == '\0' || strlen(v) > 120 || strchr(v, '{') || strchr(v, '}')) {
                free(d);
                return cli_usage_error("doctor", "--prefix needs a key prefix (no braces, at "
                                       "most 120 bytes)");
            }
            d->prefix = v;
        } else {
            free(d);
            return cli_usage_error("doctor", "unknown argument '%s'", a);
        }
    }
    char err[300];
    if (probe_parse_url(g->url, &d->t, err, sizeof err) != 0) {
        free(d);
        return cli_usage_error("doctor", "--url: %s", err);
    }
    snprintf(d->keybase, sizeof d->keybase, "%s:%ld", d->prefix, (long)getpid());
    slot_range ranges[128];
    int nranges = 0;
    bool located = true;
    d->t.tls_opts = g;
    if (d->t.kind == PROBE_SENTINEL) {
        located = find_sentinel_primary(d);
    } else if (d->t.kind == PROBE_CLUSTER) {
        located = find_cluster_primary(d, ranges, &nranges);
    } else {
        d->node = d->t.addrs[0];
        d->sync_default = false;
        /* One hash tag for doctor's keys: a slot-checking server runs its multi-key
         * scripts too. */
        snprintf(d->tag, sizeof d->tag, ":{%ld}", (long)getpid());
    }
    if (located) {
        bool to = false;
        d->c = probe_connect(&d->t, &d->node, true, d->timeout_ms, err, sizeof err, &to);
        if (d->c == NULL) {
            d->stopped = true;
            if (to)
                add(d, "timeout", SEV_FAIL,
                    "the server did not answer in time: it is paused (CLIENT PAUSE), stalled or "
                    "unreachable through a black hole; every lock call waits its whole deadline",
                    "find what stalls it (redis-cli --latency, the slow log)",
                    "%s (timed out after %lld ms)", err, (long long)d->timeout_ms);
            else
                add(d, "connection", SEV_FAIL, "no lock can be taken where the client cannot "
                    "connect", "check the URL, the credentials and the network", "%s", err);
        }
        redisReply *r = d->c != NULL ? askv(d, "PING", "PING", NULL) : NULL;
        if (r != NULL)
            freeReplyObject(r);
        redisReply *info = r != NULL ? askv(d, "INFO", "INFO", NULL) : NULL;
        if (info != NULL && info->type == REDIS_REPLY_STRING) {
            check_server(d, info->str);
            check_memory(d, info->str);
        } else if (info != NULL) {
            add(d, "info", SEV_WARN, "without INFO the version, role, replicas and eviction "
                "policy cannot be read (the library's start-up check needs it too)",
                "grant +info, or check maxmemory-policy by hand", "INFO refused: %s",
                info->type == REDIS_REPLY_ERROR ? info->str : "?");
        }
        if (info != NULL)
            freeReplyObject(info);
        if (!d->stopped && d->t.kind == PROBE_CLUSTER) {
            /* The other primaries: reachable, their eviction policy, their replicas. */
            for (int i = 1; i < nranges; i++) {
                bool dup = false;
                for (int j = 0; j < i; j++)
                    dup = dup || (ranges[j].primary.port == ranges[i].primary.port &&
                                  strcmp(ranges[j].primary.host, ranges[i].primary.host) == 0);
                if (dup)
                    continue;
                bool t2;
                char e2[300];
                redisContext *c2 = probe_connect(&d->t, &ranges[i].primary, true,
                                                 d->timeout_ms, e2, sizeof e2, &t2);
                if (c2 == NULL) {
                    add(d, "node", SEV_FAIL, "the locks of that node's slots cannot be taken",
                        "check that node", "%s%s", e2, t2 ? " (timed out)" : "");
                    continue;
                }
                redisReply *pi = probe_cmdv(c2, "INFO", NULL);
                char pol[48] = "", reps[16] = "";
                if (pi != NULL && pi->type == REDIS_REPLY_STRING) {
                    probe_info_field(pi->str, "maxmemory_policy", pol, sizeof pol);
                    probe_info_field(pi->str, "connected_slaves", reps, sizeof reps);
                    if (reps[0] && atoi(reps) < d->cl_min_rep)
                        d->cl_min_rep = atoi(reps);
                }
                if (pi != NULL)
                    freeReplyObject(pi);
                if (strncmp(pol, "volatile-", 9) == 0 || strncmp(pol, "allkeys-", 8) == 0)
                    add(d, "maxmemory-policy", SEV_FAIL, "an evicted lock is free for anyone "
                        "while its holder still believes it holds it",
                        "CONFIG SET maxmemory-policy noeviction on every node",
                        "node %s:%d: maxmemory-policy %s", ranges[i].primary.host,
                        ranges[i].primary.port, pol);
                redisFree(c2);
            }
        }
        if (d->t.kind == PROBE_CLUSTER) {
            if (d->replicas >= 0 && d->replicas < d->cl_min_rep)
                d->cl_min_rep = d->replicas;
            bool full = d->cl_covered == 16384;
            add(d, "topology", full ? SEV_OK : SEV_FAIL,
                full ? NULL : "a lock whose slot no primary serves cannot be taken (CLUSTERDOWN)",
                full ? NULL : "assign every slot (redis-cli --cluster fix)",
                "Cluster: %d primaries serving %d of 16384 slots, at least %d replica(s) each",
                d->cl_primaries, d->cl_covered, d->cl_min_rep == 1 << 30 ? 0 : d->cl_min_rep);
            if (d->cl_min_rep == 0)
                add(d, "replicas", SEV_WARN,
                    "a primary without a replica loses its slots' locks when it dies, and the "
                    "cluster refuses every lock (CLUSTERDOWN) until it is back",
                    "give every primary a replica", "a primary has no replica");
        }
        if (!d->stopped && d->c != NULL) {
            check_slots(d);
            check_scripts(d);
            check_rights(d);
            check_wait(d, d->sync_default);
            check_config(d);
            check_clock(d);
            if (d->samples > 0) {
                measure_raw(d);
                measure_pubsub(d);
            }
            check_sharded(d);
        }
    }
    if (!d->stopped && d->samples > 0)
        measure_library(d);
    /* Clean-up: doctor's own keys (the locks' hashes are gone with their releases). */
    if (d->c != NULL && !d->stopped) {
        for (int i = 0; i < d->nkeys; i++) {
            redisReply *r = probe_cmdv(d->c, "DEL", d->keys[i], NULL);
            if (r != NULL)
                freeReplyObject(r);
        }
    }
    if (d->c != NULL)
        redisFree(d->c);
    int worst = 0;
    for (int i = 0; i < d->n; i++)
        worst = d->f[i].sev > worst ? d->f[i].sev : worst;
    report(d, worst);
    free(d);
    return worst;
}
