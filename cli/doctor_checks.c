/*
 * doctor_checks.c -- the checks of `credisson doctor` (doctor.h): where the data is (the
 * primary the sentinels name, a cluster's slot map) and the checks of the data node: server
 * and version, eviction policy, slot checking, scripts, ACL rights, WAIT and the replicas,
 * the configuration the locks depend on, and the host's clock against the server's. Each
 * adds its findings to the session; the raw commands go through doctor_ask, so a server
 * that stops answering ends the checks. Main thread only.
 */
#include "doctor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
bool doctor_find_sentinel_primary(doctor *d)
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
                    probe_reply_why(s, r, "no such master"));
        }
        if (r != NULL)
            freeReplyObject(r);
        redisFree(s);
    }
    if (!found) {
        doctor_add(d, "topology", SEV_FAIL, "without a primary no lock can be taken",
            "check the sentinel addresses and the master name after '#'",
            "no sentinel named the primary of master '%s': %s", d->t.master, errs);
        return false;
    }
    doctor_add(d, "topology", SEV_OK, NULL, NULL,
        "Sentinel: master '%s' at %s:%d, %lld replicas, %lld sentinels (quorum %lld) of "
        "%d named in the URL answering, down-after %lld ms", d->t.master, d->node.host,
        d->node.port, slaves, others + 1, quorum, answered, down_after);
    if (answered < d->t.naddrs)
        doctor_add(d, "sentinels", SEV_WARN,
            "a client that reaches fewer sentinels learns of a failover later, or not at all",
            "make every sentinel of the URL reachable", "%d of %d sentinels answered: %s",
            answered, d->t.naddrs, errs);
    /* A killed primary is replaced after down-after plus an election (about a second):
     * a watchdog lease shorter than that expires during the failover. */
    if (down_after > 0 && d->lease_ms < down_after + 2000)
        doctor_add(d, "lease-vs-failover", SEV_WARN,
            "a primary that dies is replaced only after down-after-milliseconds plus an "
            "election; a watchdog lease shorter than that expires during the failover, and "
            "every hold is lost (reported, never silent)",
            "raise --watchdog-ms / watchdog_timeout_ms above down-after + 2 s",
            "watchdog lease %lld ms against down-after %lld ms + election",
            (long long)d->lease_ms, down_after);
    d->sync_default = true;
    return true;
}

/* Cluster mode: the slot map from the first seed that answers; the first primary into
 * d->node, a hash tag it serves into d->tag. */
bool doctor_find_cluster_primary(doctor *d, slot_range *ranges, int *nranges)
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
                    probe_reply_why(s, r, "no slot map"));
        if (r != NULL)
            freeReplyObject(r);
        redisFree(s);
    }
    if (*nranges == 0) {
        doctor_add(d, "topology", SEV_FAIL, "without the slot map no lock can be routed",
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
    doctor_add(d, "server", tested ? SEV_OK : SEV_WARN,
        tested ? NULL : "credisson is tested on Redis >= 7.0 and Valkey >= 8.0; older servers "
                        "lack sharded pub/sub and some of the error words it reads",
        tested ? NULL : "upgrade the server",
        "%s %s, mode %s; sharded pub/sub %s, WAITAOF %s", valkey ? "Valkey" : "Redis",
        v[0] ? v : "(version unknown)", mode[0] ? mode : "?", sharded ? "yes" : "no (< 7.0)",
        waitaof ? "yes" : "no (< 7.2)");
    d->replicas = slaves[0] ? atoi(slaves) : -1;
    if (strcmp(role, "slave") == 0) {
        doctor_add(d, "role", SEV_FAIL,
            "a replica refuses every write: each acquire fails READONLY (nothing is held)",
            "point the URL at the primary (or use redis-sentinel:// so the client follows it)",
            "the URL names a read-only replica (role:slave)");
    } else if (d->t.kind == PROBE_STANDALONE) {
        char aof[8] = "", saves[16] = "";
        probe_info_field(info, "aof_enabled", aof, sizeof aof);
        probe_info_field(info, "rdb_changes_since_last_save", saves, sizeof saves);
        doctor_add(d, "replicas", SEV_OK, NULL, NULL,
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
        doctor_add(d, "maxmemory-policy", SEV_WARN, "an eviction policy can delete held locks",
            "check maxmemory-policy by hand (CONFIG GET maxmemory-policy)",
            "maxmemory-policy unknown (INFO memory says nothing of it)");
    else if (strncmp(policy, "volatile-", 9) == 0 || strncmp(policy, "allkeys-", 8) == 0)
        doctor_add(d, "maxmemory-policy", SEV_FAIL,
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
        doctor_add(d, "maxmemory-policy", SEV_OK, NULL, NULL,
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
    redisReply *r = doctor_askv(d, "the two-slot script",
                         "EVAL", "redis.call('get', KEYS[1]) redis.call('get', KEYS[2])", "2",
                         k1, k2, NULL);
    bool crossslot = doctor_is_err(r, "CROSSSLOT");
    if (r != NULL)
        freeReplyObject(r);
    if (d->cluster_node) {
        redisReply *ci = doctor_askv(d, "CLUSTER INFO", "CLUSTER", "INFO", NULL);
        char size[16] = "", assigned[16] = "";
        if (ci != NULL && ci->type == REDIS_REPLY_STRING) {
            probe_info_field(ci->str, "cluster_size", size, sizeof size);
            probe_info_field(ci->str, "cluster_slots_assigned", assigned, sizeof assigned);
        }
        if (ci != NULL)
            freeReplyObject(ci);
        bool alone = strcmp(size, "1") == 0;
        doctor_add(d, "slot-checking", alone ? SEV_WARN : SEV_FAIL,
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
        doctor_add(d, "slot-checking", SEV_WARN,
            "the server checks key slots although the URL is redis:// (a proxy in front of a "
            "sharded database: Redis Enterprise, Envoy, a managed endpoint): a script whose "
            "keys span slots is refused. credisson 0.7+ batches watchdog renewals by slot once "
            "it sees that; older clients (and Redisson before 4.7) lose every watchdog hold "
            "after one lease",
            "nothing to do for credisson 0.7+; keep lock names free of braces that split slots",
            "a script over two slots got CROSSSLOT: a slot-checking proxy or cluster node");
    } else if (r != NULL) {
        doctor_add(d, "slot-checking", SEV_OK, NULL, NULL,
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
    doctor_own_key(d, "script", k, sizeof k);
    redisReply *r = doctor_askv(d, "SCRIPT LOAD", "SCRIPT", "LOAD", acq_script, NULL);
    if (r == NULL)
        return;
    bool load_ok = r->type == REDIS_REPLY_STRING;
    if (load_ok)
        snprintf(d->acq_sha, sizeof d->acq_sha, "%s", r->str);
    char load_err[200];
    snprintf(load_err, sizeof load_err, "%s", load_ok ? "" : r->str ? r->str : "?");
    freeReplyObject(r);
    if (load_ok &&
        (r = doctor_askv(d, "SCRIPT LOAD", "SCRIPT", "LOAD", pub_script, NULL)) != NULL) {
        if (r->type == REDIS_REPLY_STRING)
            snprintf(d->pub_sha, sizeof d->pub_sha, "%s", r->str);
        freeReplyObject(r);
    }
    char evalsha_err[200] = "", eval_err[200] = "";
    if (load_ok && (r = doctor_askv(d, "EVALSHA", "EVALSHA", d->acq_sha, "1", k, "10000",
                             "doctor:1", NULL)) != NULL) {
        d->evalsha_ok = r->type != REDIS_REPLY_ERROR;
        if (!d->evalsha_ok)
            snprintf(evalsha_err, sizeof evalsha_err, "%s", r->str);
        freeReplyObject(r);
    }
    if ((r = doctor_askv(d, "EVAL", "EVAL", "return 1", "1", k, NULL)) != NULL) {
        d->eval_ok = r->type != REDIS_REPLY_ERROR;
        if (!d->eval_ok)
            snprintf(eval_err, sizeof eval_err, "%s", r->str);
        freeReplyObject(r);
    }
    if (d->stopped)
        return;
    if (!d->eval_ok)
        doctor_add(d, "scripts", SEV_FAIL,
            "every lock operation is one Lua script: credisson sends EVALSHA, and EVAL when "
            "the server's script cache lacks it (after a restart, a failover, SCRIPT FLUSH); "
            "without EVAL those calls fail",
            "grant +eval (the README's ACL rules) or stop renaming it",
            "EVAL refused: %s", eval_err);
    if (load_ok && !d->evalsha_ok)
        doctor_add(d, "scripts", SEV_FAIL,
            "every lock operation is sent as EVALSHA first: without it no lock can be taken",
            "grant +evalsha (the README's ACL rules) or stop renaming it",
            "EVALSHA refused: %s", evalsha_err);
    if (!load_ok)
        doctor_add(d, "scripts", SEV_WARN,
            "the watchdog loads its renewal script with SCRIPT LOAD after a cache flush; "
            "without it each such round goes as EVAL (credisson 0.7+), costing bandwidth",
            "grant +script|load", "SCRIPT LOAD refused: %s", load_err);
    if (d->eval_ok && (d->evalsha_ok || !load_ok) && load_ok)
        doctor_add(d, "scripts", SEV_OK, NULL, NULL, "EVAL, EVALSHA and SCRIPT LOAD work");
    else if (d->eval_ok && !load_ok)
        doctor_add(d, "scripts", SEV_OK, NULL, NULL, "EVAL works");
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
    doctor_own_key(d, "rights-hash", h, sizeof h);
    doctor_own_key(d, "rights-string", s, sizeof s);
    snprintf(ch, sizeof ch, "%s%s:rights-channel", d->keybase, d->tag);
    doctor_own_key(d, "rights-list", l, sizeof l);
    doctor_own_key(d, "rights-zset", z, sizeof z);
    redisReply *r =
        doctor_askv(d, "the ACL check", "EVAL", rights_script, "5", h, s, ch, l, z, NULL);
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
        redisReply *p = doctor_ask(d, plain[i].name, plain[i].argc, plain[i].argv);
        if (doctor_is_err(p, "NOPERM"))
            snprintf(plain_missing + strlen(plain_missing),
                     sizeof plain_missing - strlen(plain_missing), "%s%s",
                     plain_missing[0] ? ", " : "", plain[i].name);
        if (p != NULL)
            freeReplyObject(p);
    }
    if (d->stopped)
        return;
    if (keys_refused)
        doctor_add(d, "acl", SEV_WARN,
            "doctor's own keys are outside the key or channel patterns the ACL user may use, so "
            "its rights were not checked",
            "run doctor with --prefix under your locks' key pattern (e.g. --prefix app:doctor)",
            "the ACL refused doctor's keys: %s", missing);
    else if (missing[0] != '\0' || plain_missing[0] != '\0')
        doctor_add(d, "acl", SEV_FAIL,
            "credisson's scripts and reads need these rights: a refused one fails the lock "
            "operation that runs it (an unlock refused its PUBLISH after deleting the hash "
            "wakes nobody)",
            "grant them (the README's ACL rules list each lock kind's commands)",
            "the ACL user lacks: %s%s%s", missing, missing[0] && plain_missing[0] ? ", " : "",
            plain_missing);
    else
        doctor_add(d, "acl", SEV_OK, NULL, NULL,
            "every command credisson sends is allowed (scripts' commands, EXISTS, HGET, HEXISTS, "
            "PTTL, ROLE, INFO)");
}

static void check_wait(doctor *d, bool sync_default)
{
    redisReply *r = doctor_askv(d, "WAIT 0 0", "WAIT", "0", "0", NULL);
    if (r == NULL)
        return;
    d->wait_ok = r->type == REDIS_REPLY_INTEGER;
    char why[200];
    snprintf(why, sizeof why, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
    redisReply *a = doctor_askv(d, "WAITAOF 0 0 0", "WAITAOF", "0", "0", "0", NULL);
    bool waitaof = a != NULL && a->type != REDIS_REPLY_ERROR;
    if (a != NULL)
        freeReplyObject(a);
    if (!d->wait_ok) {
        int sev = d->replicas > 0 ? (sync_default ? SEV_FAIL : SEV_WARN) : SEV_OK;
        doctor_add(d, "wait", sev,
            sync_default ? "replica sync (on by default with Sentinel and Cluster, as in Java) "
                           "sends WAIT after every lock script; on a server that refuses it an "
                           "acquire with replicas to wait for returns CRD_SYNC_UNAVAILABLE"
                         : "replica sync (replica_sync ON) cannot work here: acquires would "
                           "return CRD_SYNC_UNAVAILABLE",
            "set replica_sync to CRD_REPLICA_SYNC_OFF (or _IF_ALLOWED), or allow WAIT",
            "WAIT refused: %s%s", why,
            d->replicas > 0 ? "" : " (no replicas: nothing to wait for)");
        return;
    }
    if (d->replicas <= 0) {
        doctor_add(d, "wait", SEV_OK, NULL, NULL,
            "WAIT works (no replicas to acknowledge); WAITAOF %s",
            waitaof ? "available" : "not available");
        return;
    }
    /* One write of doctor's own, then how many replicas acknowledge it within 1 s. */
    char k[240], n[16];
    doctor_own_key(d, "wait", k, sizeof k);
    redisReply *w = doctor_askv(d, "SET", "SET", k, "1", "PX", "10000", NULL);
    if (w != NULL)
        freeReplyObject(w);
    snprintf(n, sizeof n, "%d", d->replicas);
    int64_t t0 = probe_now_us();
    w = doctor_askv(d, "WAIT", "WAIT", n, "1000", NULL);
    int64_t took = probe_now_us() - t0;
    if (w == NULL)
        return;
    long long acks = w->type == REDIS_REPLY_INTEGER ? w->integer : 0;
    freeReplyObject(w);
    doctor_add(d, "wait", acks == 0 ? (sync_default ? SEV_FAIL : SEV_WARN) : SEV_OK,
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
    redisReply *r = doctor_askv(d, "CONFIG GET", "CONFIG", "GET", "notify-keyspace-events", NULL);
    if (r == NULL)
        return;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        doctor_add(d, "keyspace-events", SEV_OK, NULL, NULL,
            "notify-keyspace-events '%s': credisson watch shows acquires through client "
            "tracking (Redis >= 6) or these events; releases through the unlock message",
            r->element[1]->str);
    else
        doctor_add(d, "keyspace-events", SEV_OK, NULL, NULL,
            "CONFIG GET refused (%s): a managed service; watch relies on client tracking",
            r->type == REDIS_REPLY_ERROR ? r->str : "?");
    freeReplyObject(r);
    if (!d->cluster_node && d->t.kind != PROBE_CLUSTER)
        return;
    r = doctor_askv(d, "CONFIG GET", "CONFIG", "GET", "cluster-node-timeout", NULL);
    if (r == NULL)
        return;
    long long nt = r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? atoll(r->element[1]->str)
                                                                     : -1;
    freeReplyObject(r);
    if (nt < 0)
        doctor_add(d, "node-timeout", SEV_OK, NULL, NULL,
            "cluster-node-timeout unknown (CONFIG GET refused)");
    else if (d->lease_ms > nt && !(d->wait_ok && d->replicas > 0))
        doctor_add(d, "node-timeout", SEV_WARN,
            "a primary cut off from the cluster keeps granting locks until its node timeout; "
            "a hold granted there whose lease outlasts the replica's promotion overlaps the "
            "holder the other side lets in (the README measured it), unless replica sync "
            "refuses the cut side's acquires",
            "keep replica sync on with replicas, or a watchdog lease below the node timeout",
            "watchdog lease %lld ms > cluster-node-timeout %lld ms", (long long)d->lease_ms, nt);
    else
        doctor_add(d, "node-timeout", SEV_OK, NULL, NULL,
            "cluster-node-timeout %lld ms, watchdog lease %lld ms%s", nt, (long long)d->lease_ms,
            d->lease_ms > nt ? " (replica sync guards the split brain)" : "");
}

static void check_clock(doctor *d)
{
    struct timespec before, after;
    clock_gettime(CLOCK_REALTIME, &before);
    redisReply *r = doctor_askv(d, "TIME", "TIME", NULL);
    clock_gettime(CLOCK_REALTIME, &after);
    if (r == NULL)
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        doctor_add(d, "clock", SEV_OK, NULL, NULL, "TIME refused: the clock was not compared");
        freeReplyObject(r);
        return;
    }
    double server_ms = atof(r->element[0]->str) * 1000.0 + atof(r->element[1]->str) / 1000.0;
    freeReplyObject(r);
    double local_ms = ((double)before.tv_sec + (double)after.tv_sec) * 500.0 +
                      ((double)before.tv_nsec + (double)after.tv_nsec) / 2e6;
    double skew = local_ms - server_ms;
    double mag = skew < 0 ? -skew : skew;
    doctor_add(d, "clock", mag > 500 ? SEV_WARN : SEV_OK,
        mag > 500 ? "the fair lock's queue deadlines and the expirable semaphore's permit leases "
                    "are the hosts' wall clocks: hosts that disagree by d ms shift each other's "
                    "deadlines by d ms"
                  : NULL,
        mag > 500 ? "run NTP (chrony, systemd-timesyncd) on every host" : NULL,
        "this host's clock is %.0f ms %s the server's TIME", mag,
        skew >= 0 ? "ahead of" : "behind");
}

void doctor_check_info(doctor *d, const char *info)
{
    check_server(d, info);
    check_memory(d, info);
}

void doctor_check_node(doctor *d)
{
    check_slots(d);
    check_scripts(d);
    check_rights(d);
    check_wait(d, d->sync_default);
    check_config(d);
    check_clock(d);
}
