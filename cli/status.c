/*
 * status.c -- `credisson status [--json] NAME`: lock NAME as stored in Redis, read in one
 * MULTI/EXEC snapshot (TYPE, HGETALL, PTTL, the fair queue and its deadlines) over a raw
 * connection, plus the PTTL of each read hold's timeout key of a read-write lock. With
 * --json it also opens a library client to report that client's metrics.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void usage_status(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] status [--json] NAME\n"
            "\n"
            "Show lock NAME as stored in Redis (one snapshot of TYPE, HGETALL and PTTL).\n"
            "\n"
            "Options:\n"
            "  --json       print one JSON object instead of lines of text\n"
            "  -h, --help   this help\n"
            "\n"
            "Kinds:\n"
            "  rlock   a hash of owner fields \"<client-uuid>:<id>\" -> hold count (RLock,\n"
            "          and also a fair lock's hash)\n"
            "  rwlock  a hash with a \"mode\" field (RReadWriteLock); write holders' fields end\n"
            "          in \":write\"\n"
            "  semaphore         a string holding a number: RSemaphore's available permits\n"
            "                    (a latch looks the same: see latch below)\n"
            "  permit_semaphore  the same string with the sorted set {NAME}:timeout of its\n"
            "                    permits out (RPermitExpirableSemaphore, run --permits)\n"
            "  latch             a string holding a count >= 1 with a waiter subscribed to\n"
            "                    redisson_countdownlatch__channel__{NAME} (RCountDownLatch);\n"
            "                    without waiters a latch shows as a semaphore with\n"
            "                    maybe_latch: yes\n"
            "  none    the key does not exist\n"
            "  other   anything else (see \"type\"; a hash whose values are not counts is\n"
            "          \"other\" with type \"hash\")\n"
            "\n"
            "Text output, one fact per line:\n"
            "  name: NAME\n"
            "  kind: rlock|rwlock|semaphore|permit_semaphore|latch|none|other\n"
            "  type: TYPE                  (other only: the Redis type)\n"
            "  mode: read|write            (rwlock only)\n"
            "  ttl_ms: N                   (PTTL: -2 absent, -1 no TTL)\n"
            "  holders: K\n"
            "  holder: OWNER count=C       (K lines)\n"
            "  read_hold: OWNER index=I ttl_ms=T   (rwlock: one line per read hold and its\n"
            "                              own timeout key's PTTL)\n"
            "  queue: Q                    (fair lock waiters, if any)\n"
            "  token: T                    (a fenced lock's newest token, if it has one)\n"
            "  waiter: OWNER deadline_ms=D remaining_ms=R   (Q lines, head first)\n"
            "  available: A                (semaphores: the string's value)\n"
            "  maybe_latch: yes            (semaphore: the value could be a latch's count)\n"
            "  permits_out: K              (permit_semaphore)\n"
            "  permit: ID remaining_ms=R|none   (permit_semaphore: K lines)\n"
            "  count: C                    (latch)\n"
            "\n"
            "JSON output (schema; fields may be added later, never removed):\n"
            "  {\n"
            "    \"name\":    string,\n"
            "    \"kind\":    \"rlock\" | \"rwlock\" | \"semaphore\" | \"permit_semaphore\" |\n"
            "             \"latch\" | \"none\" | \"other\",\n"
            "    \"type\":    string     Redis type: \"hash\", \"string\", \"none\", ...,\n"
            "    \"mode\":    string     rwlock only: \"read\" or \"write\",\n"
            "    \"token\":   integer    fenced lock only: the newest token,\n"
            "    \"ttl_ms\":  integer    PTTL of the key: -2 absent, -1 no TTL,\n"
            "    \"holders\": [ { \"owner\": string, \"count\": integer }, ... ],\n"
            "    \"writer\":  string|null   rwlock only: the write holder's owner field,\n"
            "    \"read_holds\": [ { \"owner\": string, \"index\": integer,\n"
            "                      \"ttl_ms\": integer }, ... ]   rwlock only,\n"
            "    \"queue\":   [ { \"owner\": string, \"deadline_ms\": integer|null,\n"
            "                  \"remaining_ms\": integer|null }, ... ]   fair-lock waiters,\n"
            "                 head first; deadlines are epoch ms (the waiters' clocks)\n"
            "    \"available\": integer  semaphore, permit_semaphore: the available permits,\n"
            "    \"maybe_latch\": bool   semaphore: the value could be a latch's count,\n"
            "    \"permits\": [ { \"id\": string, \"remaining_ms\": integer|null }, ... ]\n"
            "                 permit_semaphore: the permits out (null: no lease),\n"
            "    \"count\":   integer    latch: the count,\n"
            "    \"client\":  {           this CLI's own library client (crd_client_metrics):\n"
            "      \"id\": string (its UUID), \"version\": string (library version),\n"
            "      \"acquisitions\", \"contended\", \"acquire_busy\", \"releases\",\n"
            "      \"renewals\", \"renewal_failures\", \"locks_lost\", \"connects\",\n"
            "      \"connection_failures\", \"subscribes\", \"holds_now\": integer >= 0,\n"
            "      \"wait_ms_p50\", \"wait_ms_p99\", \"wait_ms_max\", \"hold_ms_p50\",\n"
            "      \"hold_ms_p99\", \"hold_ms_max\": integer ms\n"
            "    }\n"
            "  }\n"
            "\n"
            "Exit codes: 0 (whatever the lock's state), 64 usage error, 69 Redis unreachable\n"
            "or refusing.\n");
}

/* ,"client":{...}: the CLI's own client, its id and its crd_client_metrics() snapshot,
 * every field under its C name (the schema is in usage_status()). */
static void print_client_json(crd_client *client)
{
    crd_metrics m;
    memset(&m, 0, sizeof m);
    if (client == NULL || crd_client_metrics(client, &m, sizeof m) != CRD_OK)
        return;
    fputs(",\"client\":{\"id\":", stdout);
    const char *id = crd_client_id(client);
    cli_json_string(id, strlen(id));
    printf(",\"version\":\"%s\"", crd_version());
    const struct {
        const char *k;
        uint64_t v;
    } u[] = {{"acquisitions", m.acquisitions},
             {"contended", m.contended},
             {"acquire_busy", m.acquire_busy},
             {"releases", m.releases},
             {"renewals", m.renewals},
             {"renewal_failures", m.renewal_failures},
             {"locks_lost", m.locks_lost},
             {"connects", m.connects},
             {"connection_failures", m.connection_failures},
             {"subscribes", m.subscribes},
             {"holds_now", m.holds_now}};
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
        printf(",\"%s\":%llu", u[i].k, (unsigned long long)u[i].v);
    const struct {
        const char *k;
        int64_t v;
    } d[] = {{"wait_ms_p50", m.wait_ms_p50}, {"wait_ms_p99", m.wait_ms_p99},
             {"wait_ms_max", m.wait_ms_max}, {"hold_ms_p50", m.hold_ms_p50},
             {"hold_ms_p99", m.hold_ms_p99}, {"hold_ms_max", m.hold_ms_max}};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        printf(",\"%s\":%lld", d[i].k, (long long)d[i].v);
    fputs("}", stdout);
}

/* The score of member m in a ZRANGE ... WITHSCORES reply, or -1. */
static long long deadline_of(const redisReply *z, const char *m, size_t len)
{
    for (size_t i = 0; i + 1 < z->elements; i += 2)
        if (z->element[i]->len == len && memcmp(z->element[i]->str, m, len) == 0)
            return strtoll(z->element[i + 1]->str, NULL, 10);
    return -1;
}

/* One read hold of a read-write lock: its owner, its index (1..count) and the PTTL of
 * its own timeout key. */
typedef struct read_hold {
    const char *owner;
    size_t owner_len;
    long long index;
    long long ttl;
} read_hold;

/* What status found: the EXEC reply it points into, and what was made of it. */
typedef struct status_view {
    const char *name;
    size_t nlen;
    redisReply *exec;
    const char *type;
    const char *kind; /* "rlock", "rwlock", "none", "other" */
    long long ttl;
    cli_lockhash hash;
    redisReply *queue, *deadlines; /* fair queue, head first, and its deadlines */
    long long token;               /* fenced lock's counter, -1 when it does not exist */
    read_hold *rholds;
    size_t nrholds;
    long long now; /* epoch ms */
    /* A string key: a semaphore or a latch (read_sync). */
    long long value;    /* the string's number */
    bool maybe_latch;   /* a semaphore whose value could be a latch's count */
    redisReply *sync;   /* replies of read_sync: GET, ZRANGE, NUMSUB, SHARDNUMSUB */
    redisReply *permits; /* ZRANGE {N}:timeout WITHSCORES (in sync) */
} status_view;

/* Pipelines n commands of argcs[i] arguments each (replies read by the caller). The
 * lock's name is binary-safe, so it goes with its length; the other arguments are C
 * strings. */
static void append_commands(cli_rconn *c, const status_view *v, int n, const char *cmds[][5],
                            const int *argcs)
{
    for (int i = 0; i < n; i++) {
        size_t lens[5];
        for (int j = 0; j < argcs[i]; j++)
            lens[j] = cmds[i][j] == v->name ? v->nlen : strlen(cmds[i][j]);
        cli_append(c, argcs[i], cmds[i], lens);
    }
}

/* Sends the snapshot (MULTI, TYPE, HGETALL, PTTL, the fair queue and its deadlines,
 * EXEC) and keeps the EXEC reply in v->exec. Returns 0 or the exit code. */
static int read_snapshot(cli_rconn *c, status_view *v)
{
    crd__buf queue_key = {0}, deadline_key = {0}, token_key = {0};
    if (crd__derived_name(CRD__FAIR_QUEUE, v->name, v->nlen, &queue_key) != CRD_OK ||
        crd__derived_name(CRD__FAIR_DEADLINES, v->name, v->nlen, &deadline_key) != CRD_OK ||
        crd__derived_name(CRD__FENCED_TOKEN, v->name, v->nlen, &token_key) != CRD_OK) {
        free(queue_key.p);
        free(deadline_key.p);
        free(token_key.p);
        cli_error("status", "out of memory");
        return EXIT_OSERR;
    }
    const char *cmds[8][5] = {{"MULTI"},
                              {"TYPE", v->name},
                              {"HGETALL", v->name},
                              {"PTTL", v->name},
                              {"LRANGE", queue_key.p, "0", "-1"},
                              {"ZRANGE", deadline_key.p, "0", "-1", "WITHSCORES"},
                              {"GET", token_key.p},
                              {"EXEC"}};
    int argcs[8] = {1, 2, 2, 2, 4, 5, 2, 1};
    append_commands(c, v, 8, cmds, argcs);
    free(queue_key.p);
    free(deadline_key.p);
    free(token_key.p);
    for (int i = 0; i < 8; i++) {
        redisReply *r = NULL;
        if (cli_get_reply(c, &r) != REDIS_OK) {
            cli_error("status", "reading '%s' failed: %s", v->name, cli_rconn_err(c));
            return EXIT_UNAVAILABLE;
        }
        if (i == 7)
            v->exec = r;
        else
            freeReplyObject(r);
    }
    redisReply *e = v->exec;
    if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements != 6 ||
        e->element[0]->type != REDIS_REPLY_STATUS || e->element[2]->type != REDIS_REPLY_INTEGER ||
        e->element[3]->type != REDIS_REPLY_ARRAY || e->element[4]->type != REDIS_REPLY_ARRAY) {
        cli_error("status", "unexpected reply reading '%s'%s%s", v->name,
                  e && e->type == REDIS_REPLY_ERROR ? ": " : "",
                  e && e->type == REDIS_REPLY_ERROR ? e->str : "");
        return EXIT_UNAVAILABLE;
    }
    return 0;
}

/* Makes sense of the snapshot: the kind and the holders. Returns 0 or the exit code. */
static int classify(status_view *v)
{
    redisReply *e = v->exec;
    v->type = e->element[0]->str;
    v->ttl = e->element[2]->integer;
    v->queue = e->element[3];
    v->deadlines = e->element[4];
    v->token = e->element[5]->type == REDIS_REPLY_STRING ? strtoll(e->element[5]->str, NULL, 10)
                                                         : -1;
    v->now = cli_epoch_ms();
    redisReply *hash = e->element[1];
    if (strcmp(v->type, "none") == 0) {
        v->kind = "none";
    } else if (strcmp(v->type, "hash") == 0 && hash->type == REDIS_REPLY_ARRAY) {
        if (!cli_lockhash_read(hash, &v->hash)) {
            cli_error("status", "out of memory");
            return EXIT_OSERR;
        }
        v->kind = !v->hash.is_lock ? "other" : v->hash.mode != NULL ? "rwlock" : "rlock";
        if (!v->hash.is_lock) {
            v->hash.nholders = 0;
            v->hash.mode = NULL;
        }
    } else {
        v->kind = "other";
    }
    return 0;
}

/* Subscribers of the two channels in a PUBSUB NUMSUB / SHARDNUMSUB reply (an error
 * reply, e.g. SHARDNUMSUB before Redis 7, counts none). */
static void add_numsub(const redisReply *r, long long *latch, long long *sem)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 4)
        return;
    if (r->element[1]->type == REDIS_REPLY_INTEGER)
        *latch += r->element[1]->integer;
    if (r->element[3]->type == REDIS_REPLY_INTEGER)
        *sem += r->element[3]->integer;
}

/* A string key: is it Redisson's semaphore, permit-expirable semaphore or count-down
 * latch? Reads (pipelined, after the snapshot) its value, the permit set {N}:timeout, and
 * how many subscribe to the latch's and the semaphores' channels, classic and sharded.
 * The keys alone cannot tell a latch from a semaphore: a latch is a number >= 1 that
 * someone awaits on the latch channel; without waiters it is shown as a semaphore that
 * may be a latch. Returns 0 or the exit code. */
static int read_sync(cli_rconn *c, status_view *v)
{
    crd__buf z = {0}, lch = {0}, sch = {0};
    if (crd__timeouts_name(v->name, v->nlen, &z) != CRD_OK ||
        crd__latch_channel_name(v->name, v->nlen, &lch) != CRD_OK ||
        crd__derived_name(CRD__SEMAPHORE_CHANNEL, v->name, v->nlen, &sch) != CRD_OK) {
        free(z.p);
        free(lch.p);
        free(sch.p);
        cli_error("status", "out of memory");
        return EXIT_OSERR;
    }
    const char *cmds[4][5] = {{"GET", v->name},
                              {"ZRANGE", z.p, "0", "-1", "WITHSCORES"},
                              {"PUBSUB", "NUMSUB", lch.p, sch.p},
                              {"PUBSUB", "SHARDNUMSUB", lch.p, sch.p}};
    int argcs[4] = {2, 5, 4, 4};
    append_commands(c, v, 4, cmds, argcs);
    free(z.p);
    free(lch.p);
    free(sch.p);
    redisReply *r[4] = {NULL};
    int rc = 0;
    for (int i = 0; i < 4; i++)
        if (cli_get_reply(c, &r[i]) != REDIS_OK) {
            cli_error("status", "reading '%s' failed: %s", v->name, cli_rconn_err(c));
            rc = EXIT_UNAVAILABLE;
            break;
        }
    if (rc == 0 && r[0]->type == REDIS_REPLY_STRING &&
        cli_parse_count(r[0]->str, r[0]->len, &v->value)) {
        long long latch_subs = 0, sem_subs = 0;
        add_numsub(r[2], &latch_subs, &sem_subs);
        add_numsub(r[3], &latch_subs, &sem_subs);
        bool has_permits = r[1]->type == REDIS_REPLY_ARRAY && r[1]->elements > 0;
        if (has_permits) {
            v->kind = "permit_semaphore";
            v->permits = r[1];
        } else if (v->value >= 1 && latch_subs > 0 && sem_subs == 0) {
            v->kind = "latch";
        } else {
            v->kind = "semaphore";
            v->maybe_latch = v->value >= 1 && sem_subs == 0;
        }
    }
    for (int i = 0; i < 4; i++)
        if (r[i] != v->permits)
            freeReplyObject(r[i]);
    return rc;
}

/* The permits out of a permit semaphore, as text or JSON members. */
static void print_permits(const status_view *v, bool json)
{
    const redisReply *p = v->permits;
    if (json)
        fputs(",\"permits\":[", stdout);
    for (size_t i = 0; p != NULL && i + 1 < p->elements; i += 2) {
        char id[33] = "";
        for (size_t k = 0; k < 16 && k < p->element[i]->len; k++)
            snprintf(id + 2 * k, 3, "%02x", (unsigned char)p->element[i]->str[k]);
        long long dl = strtoll(p->element[i + 1]->str, NULL, 10);
        bool lease = dl != CRD__PERMIT_NO_LEASE_MS;
        if (json && lease)
            printf("%s{\"id\":\"%s\",\"remaining_ms\":%lld}", i ? "," : "", id, dl - v->now);
        else if (json)
            printf("%s{\"id\":\"%s\",\"remaining_ms\":null}", i ? "," : "", id);
        else if (lease)
            printf("permit: %s remaining_ms=%lld\n", id, dl - v->now);
        else
            printf("permit: %s remaining_ms=none\n", id);
    }
    if (json)
        fputs("]", stdout);
}

/* The lines or JSON members of a semaphore or latch. */
static void print_sync(const status_view *v, bool json)
{
    bool latch = strcmp(v->kind, "latch") == 0;
    if (json) {
        printf(latch ? ",\"count\":%lld" : ",\"available\":%lld", v->value);
        if (strcmp(v->kind, "semaphore") == 0)
            printf(",\"maybe_latch\":%s", v->maybe_latch ? "true" : "false");
    } else {
        printf(latch ? "count: %lld\n" : "available: %lld\n", v->value);
        if (v->maybe_latch)
            printf("maybe_latch: yes\n");
    }
    if (v->permits != NULL) {
        if (!json)
            printf("permits_out: %zu\n", v->permits->elements / 2);
        print_permits(v, json);
    }
}

static bool is_sync_kind(const status_view *v)
{
    return strcmp(v->kind, "semaphore") == 0 || strcmp(v->kind, "permit_semaphore") == 0 ||
           strcmp(v->kind, "latch") == 0;
}

/* A read hold's count, if it is one this view lists one line per hold for. */
static bool lists_read_holds(const cli_holder *h)
{
    return !cli_is_writer(h->owner, h->owner_len) && h->count > 0 && h->count < 10000;
}

/* RW: each read hold's own timeout key, P:<field>:rwlock_timeout:<i>, and its PTTL. */
static void read_read_holds(cli_rconn *c, status_view *v)
{
    const cli_lockhash *lh = &v->hash;
    size_t cap = 0;
    for (size_t i = 0; i < lh->nholders; i++)
        if (lists_read_holds(&lh->holders[i]))
            cap += (size_t)lh->holders[i].count;
    v->rholds = calloc(cap + 1, sizeof *v->rholds);
    char *prefix = malloc(crd__rw_prefix_len(v->name, v->nlen) + 1);
    if (v->rholds == NULL || prefix == NULL) {
        free(prefix);
        return;
    }
    size_t plen = crd__rw_prefix_put(v->name, v->nlen, prefix);
    for (size_t i = 0; i < lh->nholders; i++) {
        const cli_holder *h = &lh->holders[i];
        if (!lists_read_holds(h))
            continue;
        char *key = malloc(plen + h->owner_len + 16 + 24);
        if (key == NULL)
            continue;
        size_t base = crd__read_timeout_base(prefix, plen, h->owner, h->owner_len, key);
        for (long long k = 1; k <= h->count; k++) {
            read_hold *rh = &v->rholds[v->nrholds++];
            rh->owner = h->owner;
            rh->owner_len = h->owner_len;
            rh->index = k;
            snprintf(key + base, 24, ":%lld", k);
            const char *pttl_argv[2] = {"PTTL", key};
            size_t lens[2] = {4, strlen(key)};
            cli_append(c, 2, pttl_argv, lens);
        }
        free(key);
    }
    free(prefix);
    for (size_t i = 0; i < v->nrholds; i++) {
        redisReply *rr = NULL;
        if (cli_get_reply(c, &rr) != REDIS_OK)
            break;
        v->rholds[i].ttl = rr->type == REDIS_REPLY_INTEGER ? rr->integer : -2;
        freeReplyObject(rr);
    }
}

/* ,"writer":...,"read_holds":[...] of a read-write lock. */
static void print_rw_json(const status_view *v)
{
    const cli_lockhash *lh = &v->hash;
    fputs(",\"writer\":", stdout);
    bool any = false;
    for (size_t i = 0; i < lh->nholders && !any; i++)
        if (cli_is_writer(lh->holders[i].owner, lh->holders[i].owner_len)) {
            cli_json_string(lh->holders[i].owner,
                            lh->holders[i].owner_len - (sizeof CRD__WRITE_SUFFIX - 1));
            any = true;
        }
    if (!any)
        fputs("null", stdout);
    fputs(",\"read_holds\":[", stdout);
    for (size_t i = 0; i < v->nrholds; i++) {
        fputs(i ? ",{\"owner\":" : "{\"owner\":", stdout);
        cli_json_string(v->rholds[i].owner, v->rholds[i].owner_len);
        printf(",\"index\":%lld,\"ttl_ms\":%lld}", v->rholds[i].index, v->rholds[i].ttl);
    }
    fputs("]", stdout);
}

static void print_json(const status_view *v, crd_client *client)
{
    const cli_lockhash *lh = &v->hash;
    fputs("{\"name\":", stdout);
    cli_json_string(v->name, v->nlen);
    printf(",\"kind\":\"%s\",\"type\":", v->kind);
    cli_json_string(v->type, strlen(v->type));
    if (lh->mode != NULL) {
        fputs(",\"mode\":", stdout);
        cli_json_string(lh->mode, lh->mode_len);
    }
    if (v->token >= 0)
        printf(",\"token\":%lld", v->token);
    printf(",\"ttl_ms\":%lld,\"holders\":[", v->ttl);
    for (size_t i = 0; i < lh->nholders; i++) {
        fputs(i ? ",{\"owner\":" : "{\"owner\":", stdout);
        cli_json_string(lh->holders[i].owner, lh->holders[i].owner_len);
        printf(",\"count\":%lld}", lh->holders[i].count);
    }
    fputs("]", stdout);
    if (lh->mode != NULL)
        print_rw_json(v);
    fputs(",\"queue\":[", stdout);
    for (size_t i = 0; i < v->queue->elements; i++) {
        redisReply *m = v->queue->element[i];
        long long dl = deadline_of(v->deadlines, m->str, m->len);
        fputs(i ? ",{\"owner\":" : "{\"owner\":", stdout);
        cli_json_string(m->str, m->len);
        if (dl >= 0)
            printf(",\"deadline_ms\":%lld,\"remaining_ms\":%lld}", dl, dl - v->now);
        else
            fputs(",\"deadline_ms\":null,\"remaining_ms\":null}", stdout);
    }
    fputs("]", stdout);
    if (is_sync_kind(v))
        print_sync(v, true);
    print_client_json(client);
    fputs("}\n", stdout);
}

static void print_text(const status_view *v)
{
    const cli_lockhash *lh = &v->hash;
    printf("name: %s\nkind: %s\n", v->name, v->kind);
    if (strcmp(v->kind, "other") == 0)
        printf("type: %s\n", v->type);
    if (lh->mode != NULL)
        printf("mode: %.*s\n", (int)lh->mode_len, lh->mode);
    if (v->token >= 0)
        printf("token: %lld\n", v->token);
    printf("ttl_ms: %lld\nholders: %zu\n", v->ttl, lh->nholders);
    for (size_t i = 0; i < lh->nholders; i++)
        printf("holder: %.*s count=%lld\n", (int)lh->holders[i].owner_len, lh->holders[i].owner,
               lh->holders[i].count);
    for (size_t i = 0; i < v->nrholds; i++)
        printf("read_hold: %.*s index=%lld ttl_ms=%lld\n", (int)v->rholds[i].owner_len,
               v->rholds[i].owner, v->rholds[i].index, v->rholds[i].ttl);
    if (v->queue->elements > 0)
        printf("queue: %zu\n", v->queue->elements);
    for (size_t i = 0; i < v->queue->elements; i++) {
        redisReply *m = v->queue->element[i];
        long long dl = deadline_of(v->deadlines, m->str, m->len);
        printf("waiter: %.*s deadline_ms=%lld remaining_ms=%lld\n", (int)m->len, m->str, dl,
               dl >= 0 ? dl - v->now : -1);
    }
    if (is_sync_kind(v))
        print_sync(v, false);
}

/* Parses argv: --json and NAME. Returns 0, -1 after --help, or the usage error's code. */
static int parse_status_args(int argc, char **argv, bool *json, const char **name)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage_status(stdout);
            return -1;
        } else if (strcmp(a, "--json") == 0) {
            *json = true;
        } else {
            int rc = cli_take_name_arg("status", argc, argv, &i, name);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

int cmd_status(const global_opts *g, int argc, char **argv)
{
    bool json = false;
    status_view v = {0};
    int rc = parse_status_args(argc, argv, &json, &v.name);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    crd__endpoint ep;
    rc = cli_name_and_endpoint("status", g, v.name, &ep);
    crd__endpoint_clear(&ep);
    /* It refuses a missing NAME; "v.name == NULL" is for clang's analyzer (the check is in
     * cli/conn.c, out of its sight). */
    if (rc != 0 || v.name == NULL)
        return rc != 0 ? rc : EXIT_USAGE;
    cli_rconn conn;
    rc = cli_connect("status", g, v.name, &conn);
    if (rc != 0)
        return rc;
    cli_rconn *c = &conn;
    /* --json also reports the CLI's own library client (its metrics snapshot). */
    crd_client *client = conn.client;
    v.nlen = strlen(v.name);
    if (rc == 0)
        rc = read_snapshot(c, &v);
    if (rc == 0)
        rc = classify(&v);
    if (rc == 0 && strcmp(v.type, "string") == 0)
        rc = read_sync(c, &v);
    if (rc == 0) {
        if (v.hash.mode != NULL && v.hash.nholders > 0)
            read_read_holds(c, &v);
        if (json)
            print_json(&v, client);
        else
            print_text(&v);
        rc = fflush(stdout) == 0 ? 0 : EXIT_OSERR;
    }
    free(v.rholds);
    cli_lockhash_free(&v.hash);
    freeReplyObject(v.exec);
    freeReplyObject(v.permits);
    cli_close(c);
    return rc;
}
