/*
 * list.c -- `credisson list [--json] [PATTERN]`: the locks held right now. SCANs the
 * keyspace (MATCH PATTERN, COUNT per step) over a raw connection, and for each hash whose
 * fields are all owner fields ("<uuid>:<id>", with a count) or a read-write lock's mode,
 * prints its kind, holders, counts and TTL; a reentrant lock with a fair queue
 * (redisson_lock_queue:{N}) is a fair lock and shows the queue's length. Safe on a large
 * keyspace: SCAN steps, a time bound (--timeout) after which the list is marked
 * incomplete, and a progress line on stderr every second once it takes longer than one.
 * A string key N with permits out in {N}:timeout is a permit-expirable semaphore
 * (run --permits) and is listed with its permits and their remaining leases.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void usage_list(FILE *f)
{
    fprintf(f, "usage: credisson [GLOBAL OPTIONS] list [--json] [--timeout MS] [--count N]\n"
               "                 [PATTERN]\n"
               "\n"
               "List the locks held right now: every key matching PATTERN (a SCAN glob, default\n"
               "'*') that is a lock of any kind, with its holders, their hold counts and its TTL.\n"
               "\n"
               "Options:\n"
               "  --json         one JSON object instead of lines of text\n"
               "  --timeout MS   stop scanning after MS ms (default 10000); the list is then\n"
               "                 incomplete, which a line on stderr and \"complete\": false say\n"
               "  --count N      keys SCAN looks at per step (default 1000)\n"
               "  -h, --help     this help\n"
               "\n"
               "Kinds: rlock (a reentrant lock), fair (a reentrant lock with waiters queued in\n"
               "its fair queue; the queue's length is shown), rwlock (a read-write lock; its mode\n"
               "is shown). A fair lock without waiters looks like, and is listed as, rlock.\n"
               "permit_semaphore: a permit-expirable semaphore (Redisson\n"
               "RPermitExpirableSemaphore, credisson run --permits) with permits out, each with\n"
               "its remaining lease; PATTERN matches the semaphore's NAME. A semaphore or latch\n"
               "has no holders: see 'credisson status NAME'.\n"
               "\n"
               "Text output, one line per lock:\n"
               "  NAME kind=KIND ttl_ms=T [mode=read|write] [queue=Q] holders=K\n"
               "       holder=OWNER count=C ...   (K times, on the same line)\n"
               "  NAME kind=permit_semaphore available=A permits_out=K\n"
               "       permit=ID remaining_ms=R|none ...   (K times, on the same line)\n"
               "JSON output:\n"
               "  {\"locks\": [{\"name\": string, \"kind\": string, \"ttl_ms\": integer,\n"
               "              \"mode\": string (rwlock), \"queue\": integer (fair),\n"
               "              \"holders\": [{\"owner\": string, \"count\": integer}]}\n"
               "            | {\"name\", \"kind\": \"permit_semaphore\", \"available\": integer,\n"
               "               \"permits\": [{\"id\": string, \"remaining_ms\": integer|null}]}],\n"
               "   \"scanned\": integer (keys looked at), \"complete\": boolean}\n"
               "After more than a second, a progress line goes to stderr every second.\n"
               "\n"
               "Exit codes: 0 (also when nothing is locked, or the list is incomplete), 64 usage\n"
               "error, 69 Redis unreachable or refusing.\n");
}

/* What list is doing: its options, its connection and its counts. */
typedef struct lister {
    bool json;
    int64_t timeout_ms, count;
    const char *pattern;
    cli_rconn c;
    long long scanned, found;
    int64_t started, next_progress;
} lister;

/* A lock found: the HGETALL reply it borrows from, and what it is. */
typedef struct found_lock {
    const redisReply *key;
    cli_lockhash hash;
    long long ttl, queue;
} found_lock;

static void print_lock(lister *l, const found_lock *f)
{
    const cli_lockhash *h = &f->hash;
    const char *kind = h->mode != NULL ? "rwlock" : f->queue > 0 ? "fair" : "rlock";
    if (l->json) {
        fputs(l->found ? ",{\"name\":" : "{\"name\":", stdout);
        cli_json_string(f->key->str, f->key->len);
        printf(",\"kind\":\"%s\",\"ttl_ms\":%lld", kind, f->ttl);
        if (h->mode != NULL) {
            fputs(",\"mode\":", stdout);
            cli_json_string(h->mode, h->mode_len);
        }
        if (f->queue > 0)
            printf(",\"queue\":%lld", f->queue);
        fputs(",\"holders\":[", stdout);
        for (size_t i = 0; i < h->nholders; i++) {
            fputs(i ? ",{\"owner\":" : "{\"owner\":", stdout);
            cli_json_string(h->holders[i].owner, h->holders[i].owner_len);
            printf(",\"count\":%lld}", h->holders[i].count);
        }
        fputs("]}", stdout);
    } else {
        printf("%.*s kind=%s ttl_ms=%lld", (int)f->key->len, f->key->str, kind, f->ttl);
        if (h->mode != NULL)
            printf(" mode=%.*s", (int)h->mode_len, h->mode);
        if (f->queue > 0)
            printf(" queue=%lld", f->queue);
        printf(" holders=%zu", h->nholders);
        for (size_t i = 0; i < h->nholders; i++)
            printf(" holder=%.*s count=%lld", (int)h->holders[i].owner_len, h->holders[i].owner,
                   h->holders[i].count);
        putchar('\n');
    }
    l->found++;
}

/* A permit-expirable semaphore with permits out: its name, the GET reply holding the
 * available count, and ZRANGE {N}:timeout WITHSCORES. */
static void print_permit_semaphore(lister *l, const redisReply *key, long long available,
                                   const redisReply *z)
{
    long long now = cli_epoch_ms();
    if (l->json) {
        fputs(l->found ? ",{\"name\":" : "{\"name\":", stdout);
        cli_json_string(key->str, key->len);
        printf(",\"kind\":\"permit_semaphore\",\"available\":%lld,\"permits\":[", available);
    } else {
        printf("%.*s kind=permit_semaphore available=%lld permits_out=%zu", (int)key->len,
               key->str, available, z->elements / 2);
    }
    for (size_t i = 0; i + 1 < z->elements; i += 2) {
        char id[33] = "";
        for (size_t k = 0; k < 16 && k < z->element[i]->len; k++)
            snprintf(id + 2 * k, 3, "%02x", (unsigned char)z->element[i]->str[k]);
        long long dl = strtoll(z->element[i + 1]->str, NULL, 10);
        bool lease = dl != CRD__PERMIT_NO_LEASE_MS;
        if (l->json && lease)
            printf("%s{\"id\":\"%s\",\"remaining_ms\":%lld}", i ? "," : "", id, dl - now);
        else if (l->json)
            printf("%s{\"id\":\"%s\",\"remaining_ms\":null}", i ? "," : "", id);
        else if (lease)
            printf(" permit=%s remaining_ms=%lld", id, dl - now);
        else
            printf(" permit=%s remaining_ms=none", id);
    }
    fputs(l->json ? "]}" : "\n", stdout);
    l->found++;
}

/* Reads n pipelined replies into r[]. Returns false with a line printed on an I/O error. */
static bool get_replies(lister *l, redisReply **r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        redisReply *p = NULL;
        if (cli_get_reply(&l->c, &p) != REDIS_OK) {
            cli_error("list", "reading failed: %s", cli_rconn_err(&l->c));
            for (size_t j = 0; j < i; j++)
                freeReplyObject(r[j]);
            return false;
        }
        r[i] = p;
    }
    return true;
}

/* Whether a HGETALL reply is a lock's: every field an owner field with a count, or the
 * read-write mode, and at least one holder. */
static bool read_lock(const redisReply *hash, cli_lockhash *h)
{
    if (hash->type != REDIS_REPLY_ARRAY || hash->elements == 0 || !cli_lockhash_read(hash, h))
        return false;
    bool ok = h->is_lock && h->nholders > 0;
    for (size_t i = 0; ok && i < h->nholders; i++)
        ok = cli_is_owner_field(h->holders[i].owner, h->holders[i].owner_len);
    if (!ok)
        cli_lockhash_free(h);
    return ok;
}

/* A string key with permits out in {N}:timeout: GET N, and if it holds a number, print
 * the permit semaphore. Returns 0 or the exit code. */
static int look_at_permits(lister *l, const redisReply *k, const redisReply *z)
{
    const char *a[2] = {"GET", k->str};
    size_t lens[2] = {3, k->len};
    redisReply *v = cli_cmd(&l->c, 2, a, lens);
    if (v == NULL) {
        cli_error("list", "reading failed: %s", cli_rconn_err(&l->c));
        return EXIT_UNAVAILABLE;
    }
    long long available = 0;
    if (v->type == REDIS_REPLY_STRING && cli_parse_count(v->str, v->len, &available))
        print_permit_semaphore(l, k, available, z);
    freeReplyObject(v);
    return 0;
}

/* Commands sent per key of a SCAN step. */
#define PER_KEY 4

/* For every key of one SCAN step: TYPE, PTTL, the fair queue's LLEN and the permits out
 * of a permit semaphore of that name (ZRANGE {N}:timeout), pipelined; then HGETALL of
 * the hashes (GET of the strings with permits out). Prints the locks and permit
 * semaphores among them. Returns 0 or the exit code. */
static int look_at_keys(lister *l, const redisReply *keys)
{
    size_t n = keys->elements;
    redisReply **r = calloc(PER_KEY * n + 1, sizeof *r);
    if (r == NULL) {
        cli_error("list", "out of memory");
        return EXIT_OSERR;
    }
    for (size_t i = 0; i < n; i++) {
        const redisReply *k = keys->element[i];
        crd__buf queue = {0}, z = {0};
        crd__derived_name(CRD__FAIR_QUEUE, k->str, k->len, &queue);
        crd__timeouts_name(k->str, k->len, &z);
        const char *a[PER_KEY][5] = {{"TYPE", k->str},
                                     {"PTTL", k->str},
                                     {"LLEN", queue.p},
                                     {"ZRANGE", z.p, "0", "-1", "WITHSCORES"}};
        int argc[PER_KEY] = {2, 2, 2, 5};
        for (int j = 0; j < PER_KEY; j++) {
            size_t lens[5] = {strlen(a[j][0]), j < 2 ? k->len : j == 2 ? queue.len : z.len, 1, 2,
                              10};
            /* A name too long to derive from (out of memory) is looked at as is. */
            cli_append(&l->c, a[j][1] ? argc[j] : 1, a[j], lens);
        }
        free(queue.p);
        free(z.p);
    }
    if (!get_replies(l, r, PER_KEY * n)) {
        free(r);
        return EXIT_UNAVAILABLE;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const redisReply *type = r[PER_KEY * i], *perm = r[PER_KEY * i + 3];
        const redisReply *k = keys->element[i];
        if (type->type == REDIS_REPLY_STATUS && strcmp(type->str, "string") == 0 &&
            perm->type == REDIS_REPLY_ARRAY && perm->elements > 0) {
            rc = look_at_permits(l, k, perm);
            continue;
        }
        if (type->type != REDIS_REPLY_STATUS || strcmp(type->str, "hash") != 0)
            continue;
        const char *a[2] = {"HGETALL", k->str};
        size_t lens[2] = {7, k->len};
        redisReply *hash = cli_cmd(&l->c, 2, a, lens);
        if (hash == NULL) {
            cli_error("list", "reading failed: %s", cli_rconn_err(&l->c));
            rc = EXIT_UNAVAILABLE;
            break;
        }
        found_lock f = {.key = k,
                        .ttl = r[PER_KEY * i + 1]->integer,
                        .queue = r[PER_KEY * i + 2]->type == REDIS_REPLY_INTEGER
                                     ? r[PER_KEY * i + 2]->integer
                                     : 0};
        if (read_lock(hash, &f.hash)) {
            print_lock(l, &f);
            cli_lockhash_free(&f.hash);
        }
        freeReplyObject(hash);
    }
    for (size_t i = 0; i < PER_KEY * n; i++)
        freeReplyObject(r[i]);
    free(r);
    return rc;
}

/* One progress line a second once the scan has taken more than one. */
static void progress(lister *l)
{
    int64_t now = cli_now_ms();
    if (now < l->next_progress)
        return;
    l->next_progress = now + 1000;
    cli_error("list", "%lld keys scanned, %lld locks so far (%lld ms)", l->scanned, l->found,
              (long long)(now - l->started));
}

/* SCAN until the cursor comes back to 0 or the time is up. Returns 0 or the exit code;
 * *complete says whether the whole keyspace was seen. */
static int scan_all(lister *l, bool *complete)
{
    char cursor[32] = "0", count[24];
    snprintf(count, sizeof count, "%lld", (long long)l->count);
    int64_t deadline = l->started + l->timeout_ms;
    for (;;) {
        const char *a[6] = {"SCAN", cursor, "MATCH", l->pattern, "COUNT", count};
        size_t lens[6];
        for (int i = 0; i < 6; i++)
            lens[i] = strlen(a[i]);
        redisReply *r = cli_cmd(&l->c, 6, a, lens);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            cli_error("list", "SCAN failed: %s",
                      r == NULL                      ? cli_rconn_err(&l->c)
                      : r->type == REDIS_REPLY_ERROR ? r->str
                                                     : "unexpected reply");
            freeReplyObject(r);
            return EXIT_UNAVAILABLE;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        l->scanned += (long long)r->element[1]->elements;
        int rc = look_at_keys(l, r->element[1]);
        freeReplyObject(r);
        if (rc != 0)
            return rc;
        *complete = strcmp(cursor, "0") == 0;
        if (*complete || cli_now_ms() >= deadline)
            return 0;
        progress(l);
    }
}

/* Parses argv into *l. Returns 0, -1 after --help, or the usage error's exit code. */
static int parse_list_args(int argc, char **argv, lister *l)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) {
            usage_list(stdout);
            return -1;
        } else if (strcmp(a, "--json") == 0) {
            l->json = true;
        } else if (cli_take_opt(argc, argv, &i, "--timeout", &v)) {
            if (v == NULL || !cli_parse_ms(v, &l->timeout_ms))
                return cli_usage_error("list",
                                       "--timeout needs a non-negative number of milliseconds");
        } else if (cli_take_opt(argc, argv, &i, "--count", &v)) {
            if (v == NULL || !cli_parse_ms(v, &l->count) || l->count == 0)
                return cli_usage_error("list", "--count needs a positive number of keys");
        } else {
            int rc = cli_take_name_arg("list", argc, argv, &i, &l->pattern);
            if (rc != 0)
                return rc;
        }
    }
    if (l->pattern == NULL)
        l->pattern = "*";
    return 0;
}

int cmd_list(const global_opts *g, int argc, char **argv)
{
    lister l = {.timeout_ms = 10000, .count = 1000};
    int rc = parse_list_args(argc, argv, &l);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    rc = cli_connect("list", g, NULL, &l.c);
    if (rc != 0)
        return rc;
    l.started = cli_now_ms();
    l.next_progress = l.started + 1000;
    if (l.json)
        fputs("{\"locks\":[", stdout);
    bool complete = false;
    /* A cluster: every primary holds its own slots' keys, so each primary of the map is
     * scanned in turn (the first connection went to a seed, which may be a replica). */
    crd__node *primaries[64];
    int np = l.c.client->cluster != NULL ? crd__cluster_primaries(l.c.client, primaries, 64) : 0;
    if (np == 0)
        rc = scan_all(&l, &complete);
    for (int i = 0; i < np && rc == 0; i++) {
        bool part = false;
        if ((rc = cli_reconnect_to("list", &l.c, &primaries[i]->ep)) == 0)
            rc = scan_all(&l, &part);
        complete = part && (i == 0 || complete);
        if (!part)
            break; /* out of time */
    }
    if (rc == 0 && l.json)
        printf("],\"scanned\":%lld,\"complete\":%s}\n", l.scanned, complete ? "true" : "false");
    if (rc == 0 && !complete)
        cli_error("list", "stopped after %lld ms with %lld keys scanned: the list is incomplete",
                  (long long)l.timeout_ms, l.scanned);
    cli_close(&l.c);
    if (rc == 0 && fflush(stdout) != 0)
        rc = EXIT_OSERR;
    return rc;
}
