/*
 * watch.c -- `credisson watch NAME`: hold and release events of lock NAME, and the
 * available permits of a semaphore or the count of a latch NAME, as they happen. Two raw
 * connections: one subscribed to every channel a lock of any kind, a semaphore or a
 * latch publishes on, one that re-reads NAME on each message and at least once per
 * --interval (or as soon as the key's TTL runs out: an expiry publishes nothing); the
 * difference from the previous read is printed as events. Main thread only.
 */
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage_watch(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] watch [--json] [--count N] [--timeout MS]\n"
            "                 [--interval MS] NAME\n"
            "\n"
            "Print hold and release events of lock NAME (any kind: lock, fair lock, read-write\n"
            "lock), or the changes of semaphore or latch NAME, as they happen. Subscribes to\n"
            "redisson_lock__channel:{NAME}, redisson_rwlock:{NAME}, the fair waiters' channels\n"
            "redisson_lock__channel:{NAME}:*, redisson_sc:{NAME},\n"
            "redisson_countdownlatch__channel__{NAME} and __keyspace@DB__:NAME, and re-reads\n"
            "NAME (HGETALL, PTTL, GET) on every message,\n"
            "when its TTL runs out (an expiry publishes nothing), and every --interval. A\n"
            "release that publishes (an unlock of a lock or read-write lock, a fair unlock\n"
            "with a waiter queued, a force-unlock) is printed within milliseconds. An acquire\n"
            "publishes nothing; it shows at once all the same through client tracking (CLIENT\n"
            "TRACKING on REDIRECT <watch> BCAST PREFIX NAME, Redis >= 6, no configuration\n"
            "needed) or keyspace notifications (notify-keyspace-events Kghx). When the server\n"
            "offers neither (older Redis, or an ACL user without CLIENT), watch says so at\n"
            "start: it then sees an acquire only at the next read, and a hold shorter than\n"
            "--interval can be missed.\n"
            "\n"
            "Options:\n"
            "  --json         one JSON object per line instead of text\n"
            "  --count N      exit 0 after N events\n"
            "  --timeout MS   exit 0 after MS milliseconds\n"
            "  --interval MS  longest time between two reads (default 250, at least 10)\n"
            "  -h, --help     this help\n"
            "\n"
            "Events (text: \"HH:MM:SS.mmm EVENT NAME owner=OWNER ...\"):\n"
            "  held     a holder found at start (printed once; not counted by --count)\n"
            "  acquire  a new holder: count=C ttl_ms=T [mode=read|write]\n"
            "  count    a holder's hold count changed (reentry or partial release)\n"
            "  release  a holder is gone: cause=unlock (a message was published), expired\n"
            "           (its TTL ran out) or removed (deleted without a message)\n"
            "Semaphores and latches (text: \"HH:MM:SS.mmm EVENT NAME ...\"):\n"
            "  found    at start, NAME holds a number: kind=semaphore|permit_semaphore\n"
            "           available=A, or kind=latch count=C (not counted by --count)\n"
            "  permits  the available permits changed: available=A (0 once NAME is gone)\n"
            "  latch    the latch's count changed: count=C (0 once it is gone: opened or\n"
            "           deleted)\n"
            "  A latch is told from a semaphore as status tells it: at start by a waiter on\n"
            "  its channel, later by a message on it; a latch nobody awaits shows as a\n"
            "  semaphore until its channel carries a message.\n"
            "JSON: {\"time_ms\": epoch ms, \"event\": string, \"name\": string,\n"
            "       \"owner\": string, \"count\": integer, \"ttl_ms\": integer (not on\n"
            "       release), \"mode\": string (rwlock only), \"cause\": string (release\n"
            "       only)}; found, permits and latch: {\"time_ms\", \"event\", \"name\",\n"
            "       \"kind\": string, \"available\": integer (semaphores) or \"count\":\n"
            "       integer (latch)}\n"
            "\n"
            "With a redis-sentinel:// URL, a lost connection (a failover) is followed: watch\n"
            "asks the sentinels again, attaches to the new primary (saying so on stderr) and\n"
            "re-reads the lock; it gives up after --timeout, or 60 s without one.\n"
            "\n"
            "Exit codes: 0 after --count events or --timeout, 64 usage error, 69 Redis\n"
            "unreachable, refusing, or the connection was lost.\n");
}

/* One holder as `watch` last saw it: an owner field and its hold count. */
typedef struct wholder {
    char *owner;
    size_t len;
    long long count;
} wholder;

/* A snapshot of lock NAME: its holders, the rwlock mode ("" if none), the PTTL, and
 * when (monotonic ms) it was read. */
typedef struct wsnap {
    wholder *h;
    size_t n;
    char mode[16];
    long long ttl;
    int64_t read_ms;
    bool has_value;   /* NAME is a string holding a number (a semaphore or a latch) */
    long long value;
} wsnap;

static void wsnap_free(wsnap *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->h[i].owner);
    free(s->h);
    s->h = NULL;
    s->n = 0;
}

/* Copies the holders of a HGETALL reply into *out (which owns them). */
static bool wsnap_fill(const redisReply *hash, wsnap *out)
{
    cli_lockhash lh;
    if (!cli_lockhash_read(hash, &lh))
        return false;
    if (lh.mode != NULL)
        snprintf(out->mode, sizeof out->mode, "%.*s", (int)lh.mode_len, lh.mode);
    out->h = calloc(lh.nholders + 1, sizeof *out->h);
    for (size_t i = 0; out->h != NULL && i < lh.nholders; i++) {
        wholder *h = &out->h[out->n];
        if ((h->owner = malloc(lh.holders[i].owner_len + 1)) == NULL)
            continue;
        memcpy(h->owner, lh.holders[i].owner, lh.holders[i].owner_len);
        h->owner[lh.holders[i].owner_len] = '\0';
        h->len = lh.holders[i].owner_len;
        h->count = lh.holders[i].count;
        out->n++;
    }
    cli_lockhash_free(&lh);
    return out->h != NULL;
}

/* Reads NAME in one MULTI/EXEC (TYPE, HGETALL, PTTL) into *out. Returns false with a
 * message printed when the connection failed or the reply makes no sense. */
static bool watch_read(cli_rconn *c, const char *name, size_t nlen, wsnap *out)
{
    /* GET answers WRONGTYPE inside EXEC for a lock's hash: only a string's is used. */
    const char *cmds[6][2] = {{"MULTI"},       {"TYPE", name}, {"HGETALL", name},
                              {"PTTL", name}, {"GET", name},  {"EXEC"}};
    const int argcs[6] = {1, 2, 2, 2, 2, 1};
    for (int i = 0; i < 6; i++) {
        size_t lens[2] = {strlen(cmds[i][0]), nlen};
        cli_append(c, argcs[i], cmds[i], lens);
    }
    redisReply *exec = NULL;
    for (int i = 0; i < 6; i++) {
        redisReply *r = NULL;
        if (cli_get_reply(c, &r) != REDIS_OK) {
            cli_error("watch", "reading '%s' failed: %s", name, cli_rconn_err(c));
            freeReplyObject(exec);
            return false;
        }
        if (i == 5)
            exec = r;
        else
            freeReplyObject(r);
    }
    if (exec == NULL || exec->type != REDIS_REPLY_ARRAY || exec->elements != 4 ||
        exec->element[0]->type != REDIS_REPLY_STATUS ||
        exec->element[2]->type != REDIS_REPLY_INTEGER) {
        cli_error("watch", "unexpected reply reading '%s'%s%s", name,
                  exec && exec->type == REDIS_REPLY_ERROR ? ": " : "",
                  exec && exec->type == REDIS_REPLY_ERROR ? exec->str : "");
        freeReplyObject(exec);
        return false;
    }
    memset(out, 0, sizeof *out);
    out->ttl = exec->element[2]->integer;
    out->read_ms = cli_now_ms();
    const redisReply *v = exec->element[3];
    if (v->type == REDIS_REPLY_STRING && v->len > 0 && v->len < 24) {
        char *end = NULL;
        errno = 0;
        long long x = strtoll(v->str, &end, 10);
        out->has_value = errno == 0 && end == v->str + v->len;
        out->value = x;
    }
    bool ok = true;
    if (strcmp(exec->element[0]->str, "hash") == 0 && exec->element[1]->type == REDIS_REPLY_ARRAY &&
        !wsnap_fill(exec->element[1], out)) {
        cli_error("watch", "out of memory");
        wsnap_free(out);
        ok = false;
    }
    freeReplyObject(exec);
    return ok;
}

static const wholder *wsnap_find(const wsnap *s, const wholder *h)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->h[i].len == h->len && memcmp(s->h[i].owner, h->owner, h->len) == 0)
            return &s->h[i];
    return NULL;
}

/* What the watch is doing: its options, its connections and the lock's last state. */
typedef struct watcher {
    bool json;
    long long max_events; /* 0: no limit */
    int64_t timeout_ms, interval_ms;
    const char *name;
    size_t nlen;
    cli_rconn sub, rd;      /* subscribed; reading */
    char ks_prefix[48];     /* "__keyspace@DB__:" */
    int64_t deadline;       /* monotonic ms, INT64_MAX without --timeout */
    const global_opts *g;
    int db;
    crd__buf sem_ch, latch_ch; /* redisson_sc:{NAME}, redisson_countdownlatch__channel__{NAME} */
    bool sync_warned;          /* said once that those channels are refused */
    int sync_kind;             /* what a number in NAME is: SYNC_* */
} watcher;

enum { SYNC_SEMAPHORE = 1, SYNC_PERMITS, SYNC_LATCH };
static const char *const sync_kinds[] = {"", "semaphore", "permit_semaphore", "latch"};

/* Prints one semaphore or latch line: "found" (kind and value), "permits" or "latch". */
static void watch_print_sync(const watcher *w, const char *event, long long value)
{
    long long t = cli_epoch_ms();
    bool latch = w->sync_kind == SYNC_LATCH;
    if (w->json) {
        printf("{\"time_ms\":%lld,\"event\":\"%s\",\"name\":", t, event);
        cli_json_string(w->name, w->nlen);
        printf(",\"kind\":\"%s\",\"%s\":%lld}\n", sync_kinds[w->sync_kind],
               latch ? "count" : "available", value);
    } else {
        time_t secs = (time_t)(t / 1000);
        struct tm tm;
        localtime_r(&secs, &tm);
        printf("%02d:%02d:%02d.%03d %s %s", tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(t % 1000),
               event, w->name);
        if (strcmp(event, "found") == 0)
            printf(" kind=%s", sync_kinds[w->sync_kind]);
        printf(" %s=%lld\n", latch ? "count" : "available", value);
    }
}

/* A semaphore's available permits or a latch's count that differ between old and cur
 * (a missing key is 0, as Redisson reads it): one event, when budget allows. Returns
 * how many were printed. */
static long long watch_sync_diff(watcher *w, const wsnap *old, const wsnap *cur,
                                 long long budget)
{
    if (budget <= 0 || (!old->has_value && !cur->has_value))
        return 0;
    long long was = old->has_value ? old->value : 0, now = cur->has_value ? cur->value : 0;
    if (old->has_value == cur->has_value && was == now)
        return 0;
    if (w->sync_kind == 0)
        w->sync_kind = SYNC_SEMAPHORE;
    watch_print_sync(w, w->sync_kind == SYNC_LATCH ? "latch" : "permits", now);
    return 1;
}

/* At start, NAME holds a number: whose? A permit semaphore has its permit set
 * {NAME}:timeout; a latch, a waiter on its channel other than this watch (the rule of
 * `status`); else a semaphore. The replies are read loosely: an error (a cluster node
 * refusing a key of another slot) counts as no. */
static void classify(watcher *w)
{
    crd__buf zset = {0};
    if (crd__timeouts_name(w->name, w->nlen, &zset) == CRD_OK) {
        const char *argv[2] = {"EXISTS", zset.p};
        size_t lens[2] = {6, zset.len};
        redisReply *r = cli_cmd(&w->rd, 2, argv, lens);
        if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer > 0)
            w->sync_kind = SYNC_PERMITS;
        freeReplyObject(r);
    }
    free(zset.p);
    if (w->sync_kind != 0)
        return;
    /* Classic and sharded waiters (a cluster's clients SSUBSCRIBE): this watch is one
     * subscriber of each kind it subscribed with. */
    static const char *const sub[2] = {"NUMSUB", "SHARDNUMSUB"};
    bool sharded = w->sub.client != NULL && w->sub.client->cluster != NULL &&
                   w->sub.client->sharded;
    w->sync_kind = SYNC_SEMAPHORE;
    for (int i = 0; i < (sharded ? 2 : 1); i++) {
        const char *argv[3] = {"PUBSUB", sub[i], w->latch_ch.p};
        size_t lens[3] = {6, strlen(sub[i]), w->latch_ch.len};
        redisReply *r = cli_cmd(&w->rd, 3, argv, lens);
        if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
            r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer > 1)
            w->sync_kind = SYNC_LATCH;
        freeReplyObject(r);
    }
}

/* Prints one event line: text "HH:MM:SS.mmm EVENT NAME owner=O ..." or one JSON object. */
static void watch_print(const watcher *w, const char *event, const wholder *h, const wsnap *s,
                        const char *cause)
{
    long long t = cli_epoch_ms();
    if (w->json) {
        printf("{\"time_ms\":%lld,\"event\":\"%s\",\"name\":", t, event);
        cli_json_string(w->name, w->nlen);
        fputs(",\"owner\":", stdout);
        cli_json_string(h->owner, h->len);
        if (cause != NULL) {
            printf(",\"cause\":\"%s\"", cause);
        } else {
            printf(",\"count\":%lld,\"ttl_ms\":%lld", h->count, s->ttl);
            if (s->mode[0] != '\0') {
                fputs(",\"mode\":", stdout);
                cli_json_string(s->mode, strlen(s->mode));
            }
        }
        fputs("}\n", stdout);
    } else {
        time_t secs = (time_t)(t / 1000);
        struct tm tm;
        localtime_r(&secs, &tm);
        printf("%02d:%02d:%02d.%03d %s %s owner=%s", tm.tm_hour, tm.tm_min, tm.tm_sec,
               (int)(t % 1000), event, w->name, h->owner);
        if (cause != NULL) {
            printf(" cause=%s\n", cause);
        } else {
            printf(" count=%lld ttl_ms=%lld", h->count, s->ttl);
            if (s->mode[0] != '\0')
                printf(" mode=%s", s->mode);
            putchar('\n');
        }
    }
}

/* Prints the events that turn old into cur, releases first, at most budget of them;
 * returns how many. cause is why a vanished holder is gone ("unlock", "expired" or
 * "removed"). */
static long long watch_diff(const watcher *w, const wsnap *old, const wsnap *cur, const char *cause,
                            long long budget)
{
    long long events = 0;
    for (size_t i = 0; i < old->n && events < budget; i++)
        if (wsnap_find(cur, &old->h[i]) == NULL) {
            watch_print(w, "release", &old->h[i], cur, cause);
            events++;
        }
    for (size_t i = 0; i < cur->n && events < budget; i++) {
        const wholder *was = wsnap_find(old, &cur->h[i]);
        if (was == NULL || was->count != cur->h[i].count) {
            watch_print(w, was == NULL ? "acquire" : "count", &cur->h[i], cur, NULL);
            events++;
        }
    }
    return events;
}

/* pattern := s with the glob characters of PSUBSCRIBE escaped, then ":*". */
static char *glob_escaped_children(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(2 * n + 3);
    if (p == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (strchr("*?[]\\", s[i]) != NULL)
            p[o++] = '\\';
        p[o++] = s[i];
    }
    memcpy(p + o, ":*", 3);
    return p;
}

/* Subscribes w->sub to the channels every kind of lock NAME publishes on: the lock's
 * (RLock, fair lock, force unlocks), the read-write lock's, each fair waiter's own
 * channel "<lock channel>:<owner>" (a pattern), keyspace notifications for NAME (when
 * the server has them on: notify-keyspace-events), and the invalidations of client
 * tracking (track_changes). The last two make an acquire, which publishes nothing, show
 * at once. Returns 0 or the exit code (a line printed). */
static int subscribe(watcher *w, int db)
{
    bool sharded = w->sub.client != NULL && w->sub.client->cluster != NULL &&
                   w->sub.client->sharded;
    /* SUBSCRIBE 4, PSUBSCRIBE 1, SUBSCRIBE 1 + 1; sharded: SSUBSCRIBE 2, 1, 1 */
    int replies = sharded ? 11 : 7;
    crd__buf lock_ch = {0}, rw_ch = {0};
    crd__derived_name(CRD__LOCK_CHANNEL, w->name, w->nlen, &lock_ch);
    crd__derived_name(CRD__RW_CHANNEL, w->name, w->nlen, &rw_ch);
    char *waiters = lock_ch.p ? glob_escaped_children(lock_ch.p) : NULL;
    snprintf(w->ks_prefix, sizeof w->ks_prefix, "__keyspace@%d__:", db);
    size_t kslen = strlen(w->ks_prefix);
    char *ks_ch = malloc(kslen + w->nlen + 1);
    int rc = 0;
    if (w->sem_ch.p == NULL &&
        (crd__derived_name(CRD__SEMAPHORE_CHANNEL, w->name, w->nlen, &w->sem_ch) != CRD_OK ||
         crd__latch_channel_name(w->name, w->nlen, &w->latch_ch) != CRD_OK)) {
        free(w->sem_ch.p);
        w->sem_ch.p = NULL;
    }
    if (lock_ch.p == NULL || rw_ch.p == NULL || waiters == NULL || ks_ch == NULL ||
        w->sem_ch.p == NULL || w->latch_ch.p == NULL) {
        cli_error("watch", "out of memory");
        rc = EXIT_OSERR;
    } else {
        memcpy(ks_ch, w->ks_prefix, kslen);
        memcpy(ks_ch + kslen, w->name, w->nlen + 1);
        const char *sargv[5] = {"SUBSCRIBE", lock_ch.p, rw_ch.p, ks_ch, "__redis__:invalidate"};
        size_t slens[5] = {9, lock_ch.len, rw_ch.len, kslen + w->nlen, 20};
        cli_append(&w->sub, 5, sargv, slens);
        const char *pargv[2] = {"PSUBSCRIBE", waiters};
        size_t plens[2] = {10, strlen(waiters)};
        cli_append(&w->sub, 2, pargv, plens);
        /* The semaphores' and the latch's channels, one command each: a user whose ACL
         * predates them (README, least privilege) gets one error reply for each, and
         * watch goes on without them (their changes show at the next read). */
        const char *yargv[2] = {"SUBSCRIBE", w->sem_ch.p};
        size_t ylens[2] = {9, w->sem_ch.len};
        cli_append(&w->sub, 2, yargv, ylens);
        yargv[1] = w->latch_ch.p;
        ylens[1] = w->latch_ch.len;
        cli_append(&w->sub, 2, yargv, ylens);
        if (sharded) {
            /* Sharded pub/sub on a cluster: unlocks SPUBLISH on the node serving the
             * name's slot, which this connection is (classic messages still come from
             * clients in classic mode). The four channels brace NAME alike: one slot. */
            const char *ssargv[3] = {"SSUBSCRIBE", lock_ch.p, rw_ch.p};
            size_t sslens[3] = {10, lock_ch.len, rw_ch.len};
            cli_append(&w->sub, 3, ssargv, sslens);
            ssargv[1] = w->sem_ch.p;
            sslens[1] = w->sem_ch.len;
            cli_append(&w->sub, 2, ssargv, sslens);
            ssargv[1] = w->latch_ch.p;
            sslens[1] = w->latch_ch.len;
            cli_append(&w->sub, 2, ssargv, sslens);
        }
    }
    free(lock_ch.p);
    free(rw_ch.p);
    free(waiters);
    free(ks_ch);
    for (int i = 0; i < replies && rc == 0; i++) {
        redisReply *r = NULL;
        if (cli_get_reply(&w->sub, &r) != REDIS_OK) {
            cli_error("watch", "subscribing failed: %s", cli_rconn_err(&w->sub));
            rc = EXIT_UNAVAILABLE;
        } else if ((i == 5 || i == 6 || i == 9 || i == 10) && r->type == REDIS_REPLY_ERROR) {
            /* A semaphore's or a latch's channel refused (an ACL without it). */
            if (!w->sync_warned)
                cli_error("watch", "warning: semaphore and latch channels not watched (%s): "
                          "their changes show at the next read", r->str);
            w->sync_warned = true;
        } else if (i == 4 && r->type == REDIS_REPLY_ERROR) {
            /* A least-privilege ACL user may not PSUBSCRIBE (Redis matches a pattern
             * against the granted ones literally): fair hand-offs then show at the next
             * read instead of at once. */
            cli_error("watch", "warning: fair-lock waiters' channels not watched (%s): their "
                      "hand-offs show at the next read", r->str);
        } else if (r->type != REDIS_REPLY_ARRAY) {
            cli_error("watch", "subscribing failed: %s",
                      r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            rc = EXIT_UNAVAILABLE;
        }
        freeReplyObject(r);
    }
    return rc;
}

/* Whether the server sends keyspace notifications for the changes of a lock (K and
 * hash or generic events): 1 yes, 0 no (or it does not say), -1 no answer at all (the
 * connection failed: the next read reports that). */
static int keyspace_notifications_on(cli_rconn *c)
{
    const char *argv[3] = {"CONFIG", "GET", "notify-keyspace-events"};
    size_t lens[3] = {6, 3, 22};
    redisReply *r = cli_cmd(c, 3, argv, lens);
    if (r == NULL)
        return -1;
    int on = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING) {
        const char *f = r->element[1]->str;
        on = strchr(f, 'K') != NULL &&
             (strchr(f, 'A') != NULL || strchr(f, 'h') != NULL || strchr(f, 'g') != NULL);
    }
    freeReplyObject(r);
    return on;
}

/* An acquire publishes nothing, so without help a hold that starts and ends between two
 * reads would pass unseen. Client tracking (Redis >= 6) needs no server configuration:
 * the reading connection asks for invalidations of every key starting with NAME (BCAST
 * PREFIX), redirected to the subscribed connection, which then re-reads at once. When the
 * server refuses it (older, or an ACL without CLIENT) and has no keyspace notifications
 * either, say so once at start. id is the subscribed connection's CLIENT ID reply, taken
 * before it subscribed. */
static void track_changes(watcher *w, const redisReply *id)
{
    bool tracking = false;
    if (id->type == REDIS_REPLY_INTEGER) {
        char idbuf[24];
        snprintf(idbuf, sizeof idbuf, "%lld", id->integer);
        const char *tv[7] = {"CLIENT", "TRACKING", "on", "REDIRECT", idbuf, "BCAST", "PREFIX"};
        const char *argv[8];
        size_t lens[8];
        for (int i = 0; i < 7; i++) {
            argv[i] = tv[i];
            lens[i] = strlen(tv[i]);
        }
        argv[7] = w->name;
        lens[7] = w->nlen;
        redisReply *t = cli_cmd(&w->rd, 8, argv, lens);
        if (t == NULL)
            return; /* no answer (the server went away): the next read says so */
        tracking = t->type == REDIS_REPLY_STATUS;
        freeReplyObject(t);
    }
    /* Only a server that answered is said to offer neither (under memcheck the server of
     * a test went away between the subscription and this probe, and the warning was
     * printed for a connection that had failed). */
    if (!tracking && keyspace_notifications_on(&w->rd) == 0)
        cli_error("watch",
                  "warning: this server offers neither client tracking (Redis >= 6, CLIENT "
                  "allowed) nor keyspace notifications (notify-keyspace-events Kgh), so an "
                  "acquire shows only at the next read: a hold shorter than --interval "
                  "(%lld ms) can be missed",
                  (long long)w->interval_ms);
}

/* What arrived while waiting: any message, and whether a keyspace notification said the
 * key expired. */
typedef struct news {
    bool message;      /* anything: re-read */
    bool published;    /* on a lock's own channel: an unlock or force-unlock */
    bool expired_note; /* a keyspace notification said the key expired */
    int sync_kind;     /* a message on the semaphores' (SYNC_SEMAPHORE) or the latch's
                          (SYNC_LATCH) channel, else 0 */
} news;

static bool is_channel(const redisReply *ch, const crd__buf *b)
{
    return ch->type == REDIS_REPLY_STRING && b->p != NULL && ch->len == b->len &&
           memcmp(ch->str, b->p, b->len) == 0;
}

/* Whether ch is one of the change feeds (keyspace notifications, tracking's
 * invalidations) rather than a channel a lock publishes on. */
static bool is_change_feed(const watcher *w, const redisReply *ch)
{
    static const char inval[] = "__redis__:invalidate";
    size_t kslen = strlen(w->ks_prefix);
    if (ch->type != REDIS_REPLY_STRING)
        return false;
    return (ch->len > kslen && memcmp(ch->str, w->ks_prefix, kslen) == 0) ||
           (ch->len == sizeof inval - 1 && memcmp(ch->str, inval, ch->len) == 0);
}

/* Takes the messages hiredis has already read; notes what they say. Returns false on a
 * connection error (a line printed). */
static bool take_buffered(watcher *w, news *n)
{
    size_t kslen = strlen(w->ks_prefix);
    for (;;) {
        redisReply *r = NULL;
        if (cli_take_reply(&w->sub, &r) != REDIS_OK) {
            cli_error("watch", "connection error: %s", cli_rconn_err(&w->sub));
            return false;
        }
        if (r == NULL)
            return true;
        redisReply *m = r;
        if (m->type == REDIS_REPLY_ARRAY && m->elements >= 3) {
            n->message = true;
            redisReply *payload = m->element[m->elements - 1];
            redisReply *ch = m->element[m->elements - 2];
            if (is_channel(ch, &w->latch_ch))
                n->sync_kind = SYNC_LATCH;
            else if (is_channel(ch, &w->sem_ch))
                n->sync_kind = SYNC_SEMAPHORE;
            else if (!is_change_feed(w, ch))
                n->published = true;
            else if (ch->len > kslen && memcmp(ch->str, w->ks_prefix, kslen) == 0 &&
                     payload->type == REDIS_REPLY_STRING && strcmp(payload->str, "expired") == 0)
                n->expired_note = true;
        }
        freeReplyObject(m);
    }
}

/* Waits for a message, the next periodic read (next, monotonic ms) or the deadline.
 * Returns 0 or the exit code (a line printed). */
static int wait_for_news(watcher *w, int64_t next, news *n)
{
    for (;;) {
        /* Messages hiredis has already buffered first, then the socket. */
        if (!take_buffered(w, n))
            return EXIT_UNAVAILABLE;
        if (n->message)
            return 0;
        int64_t now = cli_now_ms();
        if (now >= w->deadline || now >= next)
            return 0;
        int64_t until = next < w->deadline ? next : w->deadline;
        struct pollfd pfd = {.fd = cli_fd(&w->sub), .events = POLLIN};
        int left = (int)(until - now > 60000 ? 60000 : until - now);
        /* TLS may hold bytes it already read: parse them before waiting on the socket. */
        int k = cli_buffered(&w->sub) ? 1 : poll(&pfd, 1, left);
        if (k < 0 && errno != EINTR) {
            cli_error("watch", "poll: %s", strerror(errno));
            return EXIT_OSERR;
        }
        if (k > 0 && cli_fill(&w->sub) != REDIS_OK) {
            cli_error("watch", "connection lost: %s", cli_rconn_err(&w->sub));
            return EXIT_UNAVAILABLE;
        }
    }
}

/* Takes what has arrived on the subscribed connection by now, without waiting: an
 * unlock publishes after the change a notification reported, so its message may come
 * just after the read that the notification caused. Returns 0 or the exit code. */
static int take_arrived(watcher *w, news *n)
{
    struct pollfd pfd = {.fd = cli_fd(&w->sub), .events = POLLIN};
    if ((cli_buffered(&w->sub) || poll(&pfd, 1, 0) > 0) && cli_fill(&w->sub) != REDIS_OK) {
        cli_error("watch", "connection lost: %s", cli_rconn_err(&w->sub));
        return EXIT_UNAVAILABLE;
    }
    return take_buffered(w, n) ? 0 : EXIT_UNAVAILABLE;
}

/* Why holders that vanished between old and cur are gone: a message came (an unlock
 * publishes), or the TTL they had ran out, or neither (deleted without a message). */
static const char *release_cause(const news *n, const wsnap *old, const wsnap *cur)
{
    if (n->expired_note)
        return "expired";
    if (n->published)
        return "unlock";
    if (old->ttl >= 0 && cur->read_ms - old->read_ms + 5 >= old->ttl)
        return "expired";
    return "removed";
}

/* Two connections to the primary (the slot's primary on a cluster): one subscribed to
 * the lock's channels, with client tracking redirected to it, one to read the lock's
 * state. Returns 0 or the exit code (a line printed); nothing stays open on failure. */
static int attach(watcher *w)
{
    int rc = cli_connect("watch", w->g, w->name, &w->sub);
    if (rc == 0 && (rc = cli_connect("watch", w->g, w->name, &w->rd)) != 0)
        cli_close(&w->sub);
    if (rc != 0)
        return rc;
    redisReply *id = NULL;
    const char *idv[2] = {"CLIENT", "ID"};
    size_t idl[2] = {6, 2};
    if ((id = cli_cmd(&w->sub, 2, idv, idl)) == NULL) {
        cli_error("watch", "connection error: %s", cli_rconn_err(&w->sub));
        rc = EXIT_UNAVAILABLE;
    }
    if (rc == 0)
        rc = subscribe(w, w->db);
    if (rc == 0)
        track_changes(w, id);
    freeReplyObject(id);
    if (rc != 0) {
        cli_close(&w->sub);
        cli_close(&w->rd);
    }
    return rc;
}

/* Sentinel mode: the primary went away (a failover). Connects again to whatever
 * primary the sentinels name now, retrying every 250 ms until --timeout (or 60 s
 * without one). True when attached again (the caller then re-reads the lock: the
 * difference shows as events, a hold the failover lost as "release cause=removed"). */
static bool follow_primary(watcher *w)
{
    if (!crd__topology_sentinel(w->sub.client))
        return false;
    cli_error("watch", "the connection to the primary was lost; following the sentinels to "
              "the new primary");
    cli_close(&w->sub);
    cli_close(&w->rd);
    int64_t until = w->deadline != INT64_MAX ? w->deadline : cli_now_ms() + 60000;
    while (cli_now_ms() < until) {
        if (attach(w) == 0) {
            cli_error("watch", "watching again on the new primary");
            return true;
        }
        struct timespec ts = {0, 250 * 1000000L}; /* a failover takes seconds */
        nanosleep(&ts, NULL);
    }
    return false;
}

/* Prints the holders found at start, then the events until --count, --timeout or an
 * error. Returns the exit code. */
static int watch_loop(watcher *w)
{
    /* Subscribed first, then the initial read: no change can fall between the two. */
    wsnap cur = {0};
    if (!watch_read(&w->rd, w->name, w->nlen, &cur))
        return EXIT_UNAVAILABLE;
    for (size_t i = 0; i < cur.n; i++)
        watch_print(w, "held", &cur.h[i], &cur, NULL);
    if (cur.has_value) {
        classify(w);
        watch_print_sync(w, "found", cur.value);
    }
    int rc = fflush(stdout) != 0 ? EXIT_OSERR : 0;
    long long events = 0;
    bool again = false; /* messages came after the last read began: read once more now */
    while (rc == 0 && (w->max_events == 0 || events < w->max_events)) {
        /* Next periodic read: after --interval, or just after the key's TTL runs out
         * (an expiry publishes nothing). */
        int64_t next = again ? cli_now_ms() : cur.read_ms + w->interval_ms;
        if (cur.ttl >= 0 && cur.read_ms + cur.ttl + 2 < next)
            next = cur.read_ms + cur.ttl + 2;
        news n = {.message = again};
        rc = wait_for_news(w, next, &n);
        if (rc == EXIT_UNAVAILABLE && follow_primary(w)) {
            rc = 0;
            again = true; /* read the lock at the new primary at once */
            continue;
        }
        if (rc != 0 || (!n.message && cli_now_ms() >= w->deadline))
            break;
        wsnap old = cur;
        if (!watch_read(&w->rd, w->name, w->nlen, &cur)) {
            cur = old;
            if (follow_primary(w)) {
                again = true;
                continue;
            }
            rc = EXIT_UNAVAILABLE;
            break;
        }
        news late = {0};
        if (n.message && !n.published && (rc = take_arrived(w, &late)) != 0) {
            wsnap_free(&old);
            break;
        }
        n.published |= late.published;
        again = late.message;
        /* A message on a latch's channel makes NAME a latch; one on the semaphores'
         * makes it a semaphore unless its permit set said which. */
        int kind = late.sync_kind != 0 ? late.sync_kind : n.sync_kind;
        if (kind == SYNC_LATCH || (kind == SYNC_SEMAPHORE && w->sync_kind != SYNC_PERMITS))
            w->sync_kind = kind;
        events += watch_diff(w, &old, &cur, release_cause(&n, &old, &cur),
                             w->max_events > 0 ? w->max_events - events : INT64_MAX);
        events += watch_sync_diff(w, &old, &cur,
                                  w->max_events > 0 ? w->max_events - events : INT64_MAX);
        wsnap_free(&old);
        if (fflush(stdout) != 0)
            rc = EXIT_OSERR;
    }
    wsnap_free(&cur);
    return rc;
}

static bool parse_count_arg(const char *v, long long *out)
{
    int64_t x;
    if (!cli_parse_ms(v, &x) || x == 0)
        return false;
    *out = (long long)x;
    return true;
}

/* Parses argv into *w. Returns 0, -1 after --help, or the usage error's exit code. */
static int parse_watch_args(int argc, char **argv, watcher *w)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) {
            usage_watch(stdout);
            return -1;
        } else if (strcmp(a, "--json") == 0) {
            w->json = true;
        } else if (cli_take_opt(argc, argv, &i, "--count", &v)) {
            if (v == NULL || !parse_count_arg(v, &w->max_events))
                return cli_usage_error("watch", "--count needs a positive number of events");
        } else if (cli_take_opt(argc, argv, &i, "--timeout", &v)) {
            if (v == NULL || !cli_parse_ms(v, &w->timeout_ms))
                return cli_usage_error("watch",
                                       "--timeout needs a non-negative number of milliseconds");
        } else if (cli_take_opt(argc, argv, &i, "--interval", &v)) {
            if (v == NULL || !cli_parse_ms(v, &w->interval_ms) || w->interval_ms < 10)
                return cli_usage_error("watch", "--interval needs a number of milliseconds >= 10");
        } else {
            int rc = cli_take_name_arg("watch", argc, argv, &i, &w->name);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

int cmd_watch(const global_opts *g, int argc, char **argv)
{
    watcher w = {.timeout_ms = -1, .interval_ms = 250};
    int rc = parse_watch_args(argc, argv, &w);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    crd__endpoint ep;
    rc = cli_name_and_endpoint("watch", g, w.name, &ep);
    /* It refuses a missing NAME; "w.name == NULL" is for clang's analyzer (the check is in
     * cli/conn.c, out of its sight). */
    if (rc != 0 || w.name == NULL)
        return rc != 0 ? rc : EXIT_USAGE;
    w.nlen = strlen(w.name);
    w.deadline = w.timeout_ms >= 0 ? cli_now_ms() + w.timeout_ms : INT64_MAX;
    w.db = ep.db;
    w.g = g;
    crd__endpoint_clear(&ep);
    rc = attach(&w);
    if (rc == 0)
        rc = watch_loop(&w);
    cli_close(&w.sub);
    cli_close(&w.rd);
    free(w.sem_ch.p);
    free(w.latch_ch.p);
    return rc;
}
