/*
 * test_golden.c -- parity with the Redisson 3.52.0 recordings in tests/golden
 * (CRD_GOLDEN_DIR). The RLock scenarios (a b c d e f k n z u), the fair-lock
 * scenarios (g h r t w), the read-write scenarios (i j m m2 p q s v) and the fenced-lock
 * scenarios (o y; Java's delete() is played by the test's own connection: a plain DEL,
 * which credisson does not offer) are replayed step
 * by step with credisson: every Java client is a crd_client, every Java thread an
 * explicit owner id (crd_owner_new; the two threads B1/B2 of java-B in u and v are two
 * owner ids of one client, sharing its lock object and its subscription), blocking calls
 * that the recording marks async run in a thread of their own, and sleep steps really
 * sleep (time passing is what those steps record). java-B of t runs in a forked child
 * with a client of its own and is killed with SIGKILL, as its JVM was; its commands come
 * back to the test through a pipe. Scenarios whose timing matters (watchdog periods, a
 * dead waiter's deadline) are paced: each step starts at the recording's t_ms.
 *
 * Compared after each step, with the recording's placeholders replaced by credisson's
 * own values (<uuidX>/<tidX> by client id and owner id, <reqidN> bound to the request
 * ids credisson used, in order of first appearance, <T+N> as relations, see below) and
 * the scenario's lock name mapped to a per-test prefixed name:
 *   - the script commands each thread sent (KEYS and ARGV by position, except the
 *     latch TTL of unlock, which is ours to choose) and their replies, from on_trace;
 *   - no other command on the command connections (no read after acquire, and never
 *     Redisson's "DEL redisson_unlock_latch:...:<uuid>" bug, quirk Q1);
 *   - SUBSCRIBE per step and client, as recorded (one per channel and client);
 *   - the writes each script executed, in order (MONITOR feed, grouped by script call);
 *   - the messages published (a PSUBSCRIBE * connection);
 *   - the whole key state (types, values, list order, zset order and scores, TTLs).
 * Watchdog renewals (lock.renew, read.renew) run on credisson's own schedule: each one is
 * checked (arguments, reply, effects), and their number per step may differ from the
 * recording's by one.
 *
 * <T+N> values (fair "now" arguments and deadline scores) are checked as the README's
 * relations, with our own clock: a "now" argument lies within the step's wall-clock
 * window; a new deadline = the caller's now + its reply + its wait (so a waiter joining
 * behind another gets reply = previous deadline - now); every deadline differs from the
 * previously bound one by exactly the recorded difference (queue chaining, lowering by
 * the acquirer's wait on acquisition and by the leaver's wait on cleanup: the zincrby
 * arguments are exact).
 *
 * Deliberate differences from Redisson (PROTOCOL.md quirks), asserted as credisson's
 * documented behaviour instead: the reentrant and write unlocks reply 1 + the connections
 * their message reached (Redisson: 1; the writes are the same); a client with several
 * threads on one lock (u, v) is replayed with local_fifo off (with it on, only the
 * longest local waiter sends commands; test_contention covers that); Q1 (no latch DEL), Q4 (fair unlock after a force-unlock
 * replies 2 and returns CRD_LOCK_LOST), Q5 (a write unlock that leaves the owner's read
 * holds publishes 1), the fair cleanup's extra KEYS/ARGV (it may wake the new head when
 * the lock is free), rw force-unlock's extra mode argument, the read renewal's form
 * (Q2: it sets every hold's timeout key with SET ... PX, Redisson 4.4+, and m2 is
 * replayed only up to the point where Redisson's renewal breaks), NOSCRIPT answered by
 * one EVAL. The recording's values are read from the JSON files, never copied here.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "golden.h"
#include "harness.h"

#ifndef CRD_GOLDEN_DIR
#error "CRD_GOLDEN_DIR must be defined by the build"
#endif

#define MAX_CLIENTS 4
#define MAX_ACTORS 6
#define MAX_REQIDS 32
#define MAX_STEPS 32
#define MAX_TN 64
#define MAX_TTLS 128

/* ---------------------------------------------------------------------------------- */
/* Scenario state                                                                     */
/* ---------------------------------------------------------------------------------- */

/* One Java client: a crd_client here, or (own_process) one in a forked child. */
typedef struct gclient {
    char label[32];      /* "java-A" */
    char uuid_ph[32];    /* "<uuidA>" */
    char uuid[40];
    crd_client *client;  /* NULL for a remote client */
    crdt_tracelog *tl;
    /* own_process: the child, its trace pipe and its command pipe */
    bool remote;
    pid_t pid;
    int trace_fd, cmd_fd;
    crdt_trace_entry *rv;
    size_t rn, rcap;
    int rtag;
    uint64_t remote_owner;
    unsigned char rbuf[1 << 16];
    size_t rlen;
    /* lock objects, created on first use and shared by the client's threads */
    crd_lock *rlock, *fair, *fenced;
    crd_rwlock *rw;
} gclient;

/* One Java thread: an owner id of a client. */
typedef struct actor {
    char label[40];      /* "java-A", or "java-B/B1" */
    char thread[16];     /* "" or "B1" */
    char tid_ph[32];     /* "<tidA>" */
    char field_ph[80];   /* "<uuidA>:<tidA>" */
    gclient *cl;
    uint64_t owner;
    char owner_dec[24];
    char field[80];      /* "<uuid>:<owner>" */
    int holds;           /* holds this actor believes it has (for the expected status) */
    bool lost;           /* a force-unlock took its hold */
} actor;

typedef struct async_call {
    bool used;
    int step;
    actor *who;
    crd_lock *lock;
    int64_t wait_ms, lease_ms;
    crd_status st;
    volatile int done; /* written by the thread, read by the waiting test (under mu) */
    pthread_t th;
    pthread_mutex_t mu;
} async_call;

typedef struct scenario {
    const char *file;
    json_t *root;
    gclient clients[MAX_CLIENTS];
    int nclients;
    actor actors[MAX_ACTORS];
    int nactors;
    int alias[MAX_ACTORS]; /* <tid> of actor i maps to actor alias[i] (thread races) */
    char name_golden[64];  /* the recorded lock name, e.g. "s1" */
    const char *name;      /* our prefixed name */
    char reqids[MAX_REQIDS][33];
    int nreqids;
    /* <T+N>: deadlines bound so far (recorded N, our value) */
    long long tn_g[MAX_TN], tn_o[MAX_TN];
    int ntn;
    long long tn_seen[8]; /* integers matched to <T+N> by the last match_str */
    int ntn_seen;
    /* TTLs our scripts set, per key */
    char *ttl_key[MAX_TTLS];
    long long ttl_val[MAX_TTLS];
    int nttl;
    long long lock_ttl_set;  /* last TTL set on the lock key */
    bool paced;
    int64_t t0;              /* monotonic ms at the scenario start */
    int64_t step_wall;       /* wall-clock ms when the step began */
    int renew_g, renew_o;    /* renewals recorded / seen, whole scenario */
    int max_steps;           /* replay only steps <= this (0: all) */
    crdt_server srv;      /* this scenario's own server (MONITOR sees only its clients) */
    redisContext *r;      /* assertions and markers */
    redisContext *mon;    /* MONITOR */
    redisContext *sub;    /* PSUBSCRIBE * */
    int marker_seq;
    async_call calls[MAX_STEPS];
    char where[160];      /* "step N" for messages */
    bool peer_deleted;    /* this step played Java's RFencedLock.delete() (a plain DEL) */
} scenario;

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* ---------------------------------------------------------------------------------- */
/* Script labels: credisson's scripts by SHA1 (Redis computes it from expanded lua/)  */
/* ---------------------------------------------------------------------------------- */

static const crdt_golden_label script_files[] = {
    {"rlock.acquire", "rlock_acquire"},
    {"rlock.unlock", "rlock_unlock"},
    {"rlock.force_unlock", "rlock_force_unlock"},
    {"lock.renew", "lock_renew"},
    {"fair.acquire", "fair_acquire"},
    {"fair.try_acquire_no_wait", "fair_try_acquire"},
    {"fair.acquire_failed", "fair_acquire_failed"},
    {"fair.unlock", "fair_unlock"},
    {"fair.force_unlock", "fair_force_unlock"},
    {"read.acquire", "rw_read_acquire"},
    {"read.unlock", "rw_read_unlock"},
    {"read.renew", "rw_read_renew"},
    {"rw.force_unlock", "rw_force_unlock"},
    {"write.acquire", "rw_write_acquire"},
    {"write.unlock", "rw_write_unlock"},
    {"rw.is_locked", "rw_is_locked"},
    {"fenced.acquire", "fenced_acquire"},
    {"fenced.acquire_with_token", "fenced_acquire_token"},
    {"fenced.renew", "fenced_renew"},
};
#define NSCRIPTS (sizeof script_files / sizeof script_files[0])

static crdt_golden_script our_scripts[NSCRIPTS];

/* Our scripts, as the library sends them; their SHA1 by redis.sha1hex, which loads nothing
 * into the script cache. */
static void load_script_labels(redisContext *r)
{
    crdt_golden_scripts_read(r, script_files, NSCRIPTS, our_scripts);
}

/* The golden label of one of our script calls (argv of EVALSHA/EVAL), or NULL. */
static const char *label_of(int argc, char *const *argv, const size_t *argvlen)
{
    int i = crdt_golden_scripts_find(our_scripts, NSCRIPTS, argc, argv, argvlen);
    const char *lab = i >= 0 ? script_files[i].label : NULL;
    if (lab != NULL && strcmp(lab, "rw.force_unlock") == 0)
        lab = strcmp(argv[argc - 1], "write") == 0 ? "write.force_unlock" : "read.force_unlock";
    return lab;
}

static bool is_renewal_label(const char *label)
{
    return label != NULL && (strcmp(label, "lock.renew") == 0 || strcmp(label, "read.renew") == 0 ||
                             strcmp(label, "fenced.renew") == 0);
}

/* ---------------------------------------------------------------------------------- */
/* Placeholders and matching                                                          */
/* ---------------------------------------------------------------------------------- */

/* Replace <uuidX>, <tidX> by the actors' values and the recorded lock name by ours
 * (the whole string, or "{name}" inside a derived name). <reqidN> and <T+N> stay. */
static char *map_golden(scenario *s, const char *g)
{
    size_t cap = strlen(g) * 2 + strlen(s->name) * 4 + 256;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    if (strcmp(g, s->name_golden) == 0) {
        snprintf(out, cap, "%s", s->name);
        return out;
    }
    char tagged[80];
    snprintf(tagged, sizeof tagged, "{%s}", s->name_golden);
    size_t o = 0;
    const char *p = g;
    out[0] = '\0';
    while (*p != '\0') {
        if (*p == '<') {
            const char *end = strchr(p, '>');
            bool done = false;
            if (end != NULL) {
                size_t len = (size_t)(end - p) + 1;
                const char *val = NULL;
                for (int i = 0; i < s->nclients && val == NULL; i++)
                    if (strlen(s->clients[i].uuid_ph) == len &&
                        strncmp(p, s->clients[i].uuid_ph, len) == 0)
                        val = s->clients[i].uuid;
                for (int i = 0; i < s->nactors && val == NULL; i++)
                    if (strlen(s->actors[i].tid_ph) == len &&
                        strncmp(p, s->actors[i].tid_ph, len) == 0)
                        val = s->actors[s->alias[i]].owner_dec;
                if (val != NULL) {
                    o += (size_t)snprintf(out + o, cap - o, "%s", val);
                    p += len;
                    done = true;
                }
            }
            if (done)
                continue;
        }
        if (strncmp(p, tagged, strlen(tagged)) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "{%s}", s->name);
            p += strlen(tagged);
            continue;
        }
        out[o++] = *p++;
        out[o] = '\0';
    }
    out[o] = '\0';
    return out;
}

static bool is_lower_hex32(const char *o, size_t olen)
{
    if (olen < 32)
        return false;
    for (int i = 0; i < 32; i++)
        if (!((o[i] >= '0' && o[i] <= '9') || (o[i] >= 'a' && o[i] <= 'f')))
            return false;
    return true;
}

/* Match a mapped golden string against observed bytes; <reqidN> binds to 32 lowercase
 * hex characters (first appearance binds, later ones must agree, two numbers never
 * bind the same id); <T+N> matches any decimal integer, which is kept in tn_seen for
 * the caller's relation checks. Bindings are committed only when the whole string
 * matches. */
static bool match_str(scenario *s, const char *g, const char *o, size_t olen)
{
    char tmp[MAX_REQIDS][33];
    int ntmp = s->nreqids;
    memcpy(tmp, s->reqids, sizeof tmp);
    long long seen[8];
    int nseen = 0;
    size_t oi = 0;
    const char *p = g;
    while (*p != '\0') {
        int n = 0;
        int used = 0;
        long long tn = 0;
        if (sscanf(p, "<reqid%d>%n", &n, &used) == 1 && used > 0 && n >= 1 && n <= MAX_REQIDS) {
            if (!is_lower_hex32(o + oi, olen - oi))
                return false;
            char val[33];
            memcpy(val, o + oi, 32);
            val[32] = '\0';
            if (n <= ntmp && tmp[n - 1][0] != '\0') {
                if (strcmp(tmp[n - 1], val) != 0)
                    return false;
            } else {
                for (int i = 0; i < MAX_REQIDS; i++)
                    if (tmp[i][0] != '\0' && strcmp(tmp[i], val) == 0)
                        return false;
                snprintf(tmp[n - 1], 33, "%s", val);
                if (n > ntmp)
                    ntmp = n;
            }
            oi += 32;
            p += used;
            continue;
        }
        used = 0;
        if (sscanf(p, "<T+%lld>%n", &tn, &used) == 1 && used > 0) {
            size_t st = oi;
            if (oi < olen && o[oi] == '-')
                oi++;
            size_t d0 = oi;
            while (oi < olen && o[oi] >= '0' && o[oi] <= '9')
                oi++;
            if (oi == d0 || nseen == 8)
                return false;
            char num[32];
            size_t nl = oi - st < sizeof num - 1 ? oi - st : sizeof num - 1;
            memcpy(num, o + st, nl);
            num[nl] = '\0';
            seen[nseen++] = atoll(num);
            p += used;
            continue;
        }
        if (oi >= olen || o[oi] != *p)
            return false;
        oi++;
        p++;
    }
    if (oi != olen)
        return false;
    memcpy(s->reqids, tmp, sizeof tmp);
    s->nreqids = ntmp;
    memcpy(s->tn_seen, seen, sizeof seen);
    s->ntn_seen = nseen;
    return true;
}

static bool match_golden(scenario *s, const char *golden, const char *o, size_t olen)
{
    char *m = map_golden(s, golden);
    bool ok = match_str(s, m, o, olen);
    free(m);
    return ok;
}

/* The recorded N of a "<T+N>" string, or false. */
static bool tn_value(const char *g, long long *n)
{
    int used = 0;
    return g != NULL && sscanf(g, "<T+%lld>%n", n, &used) == 1 && used > 0 &&
           g[used] == '\0';
}

/* ---------------------------------------------------------------------------------- */
/* TTL bookkeeping: what our scripts set, per key                                      */
/* ---------------------------------------------------------------------------------- */

static void ttl_note(scenario *s, const char *key, long long ttl)
{
    for (int i = 0; i < s->nttl; i++)
        if (strcmp(s->ttl_key[i], key) == 0) {
            s->ttl_val[i] = ttl;
            return;
        }
    cr_assert_lt(s->nttl, MAX_TTLS);
    s->ttl_key[s->nttl] = strdup(key);
    s->ttl_val[s->nttl++] = ttl;
}

static long long ttl_set_of(scenario *s, const char *key)
{
    for (int i = 0; i < s->nttl; i++)
        if (strcmp(s->ttl_key[i], key) == 0)
            return s->ttl_val[i];
    return -1;
}

/* ---------------------------------------------------------------------------------- */
/* Feeds: MONITOR and PSUBSCRIBE *, drained up to a marker                            */
/* ---------------------------------------------------------------------------------- */

typedef struct effect {
    int argc;
    char **argv;
    size_t *argvlen;
} effect;

typedef struct effects {
    effect *v;
    int n, cap;
} effects;

/* One script call seen on MONITOR: the client's EVALSHA/EVAL and the writes it ran. */
typedef struct invocation {
    effect call;
    const char *label;
    effects writes;
    bool used_pos, used_id;
} invocation;

typedef struct invocations {
    invocation *v;
    int n, cap;
} invocations;

static void effect_copy(effect *x, int argc, char *const *argv, const size_t *argvlen)
{
    x->argc = argc;
    x->argv = calloc((size_t)argc + 1, sizeof *x->argv);
    x->argvlen = calloc((size_t)argc + 1, sizeof *x->argvlen);
    cr_assert(x->argv != NULL && x->argvlen != NULL);
    for (int i = 0; i < argc; i++) {
        x->argv[i] = malloc(argvlen[i] + 1);
        memcpy(x->argv[i], argv[i], argvlen[i]);
        x->argv[i][argvlen[i]] = '\0';
        x->argvlen[i] = argvlen[i];
    }
}

static void effect_clear(effect *x)
{
    for (int j = 0; j < x->argc; j++)
        free(x->argv[j]);
    free(x->argv);
    free(x->argvlen);
    memset(x, 0, sizeof *x);
}

static void effects_push(effects *e, int argc, char **argv, const size_t *argvlen)
{
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 16;
        e->v = realloc(e->v, (size_t)e->cap * sizeof *e->v);
        cr_assert_not_null(e->v);
    }
    effect_copy(&e->v[e->n++], argc, argv, argvlen);
}

static void effects_free(effects *e)
{
    for (int i = 0; i < e->n; i++)
        effect_clear(&e->v[i]);
    free(e->v);
    memset(e, 0, sizeof *e);
}

static void invocations_free(invocations *iv)
{
    for (int i = 0; i < iv->n; i++) {
        effect_clear(&iv->v[i].call);
        effects_free(&iv->v[i].writes);
    }
    free(iv->v);
    memset(iv, 0, sizeof *iv);
}

static bool is_write(const char *cmd)
{
    static const char *writes[] = {"hset",  "hincrby", "hdel",  "del",     "set",
                                   "pexpire", "incr",  "publish", "spublish", "expire",
                                   "unlink", "hsetnx", "zadd", "zrem", "rpush", "lpop",
                                   "lrem", "zincrby", "psetex", "setex", NULL};
    for (int i = 0; writes[i] != NULL; i++)
        if (strcasecmp(cmd, writes[i]) == 0)
            return true;
    return false;
}

static bool mentions(int argc, char *const *argv, const size_t *argvlen, const char *needle)
{
    for (int i = 0; i < argc; i++)
        if (memmem(argv[i], argvlen[i], needle, strlen(needle)) != NULL)
            return true;
    return false;
}

static bool is_script_cmd(const char *cmd)
{
    return strcasecmp(cmd, "EVALSHA") == 0 || strcasecmp(cmd, "EVAL") == 0;
}

/* Send the markers, then read both feeds up to them. Script calls that mention our lock
 * name go to *calls with the writes they ran (MONITOR lists a script's own commands
 * right after it), other client commands that mention it to *client_cmds, and messages
 * on channels that mention it to *published (argv = channel, payload). */
static void drain_feeds(scenario *s, invocations *calls, effects *client_cmds,
                        effects *published)
{
    char marker[300];
    snprintf(marker, sizeof marker, "crdt-marker:%s:%d", s->name, ++s->marker_seq);
    freeReplyObject(crdt_cmd(s->r, "ECHO %s", marker));
    freeReplyObject(crdt_cmd(s->r, "PUBLISH %s %s", marker, "m"));

    invocation *cur = NULL;
    for (;;) {
        void *rv = NULL;
        cr_assert_eq(redisGetReply(s->mon, &rv), REDIS_OK, "%s: MONITOR feed: %s", s->where,
                     s->mon->errstr);
        redisReply *rep = rv;
        cr_assert_eq(rep->type, REDIS_REPLY_STATUS);
        crdt_mon_cmd m;
        bool parsed = crdt_mon_parse(rep->str, rep->len, &m);
        freeReplyObject(rep);
        if (!parsed)
            continue;
        bool is_marker = m.argc == 2 && strcasecmp(m.argv[0], "echo") == 0 &&
                         strcmp(m.argv[1], marker) == 0;
        bool ours = !is_marker && mentions(m.argc, m.argv, m.argvlen, s->name);
        if (strcmp(m.source, "lua") == 0) {
            if (cur != NULL && is_write(m.argv[0]))
                effects_push(&cur->writes, m.argc, m.argv, m.argvlen);
        } else {
            cur = NULL;
            if (ours && is_script_cmd(m.argv[0])) {
                if (calls->n == calls->cap) {
                    calls->cap = calls->cap ? calls->cap * 2 : 16;
                    calls->v = realloc(calls->v, (size_t)calls->cap * sizeof *calls->v);
                    cr_assert_not_null(calls->v);
                }
                cur = &calls->v[calls->n++];
                memset(cur, 0, sizeof *cur);
                effect_copy(&cur->call, m.argc, m.argv, m.argvlen);
                cur->label = label_of(m.argc, m.argv, m.argvlen);
            } else if (ours && client_cmds != NULL) {
                effects_push(client_cmds, m.argc, m.argv, m.argvlen);
            }
        }
        crdt_mon_cmd_free(&m);
        if (is_marker)
            break;
    }
    for (;;) {
        void *rv = NULL;
        cr_assert_eq(redisGetReply(s->sub, &rv), REDIS_OK, "%s: PSUBSCRIBE feed: %s",
                     s->where, s->sub->errstr);
        redisReply *rep = rv;
        cr_assert_eq(rep->type, REDIS_REPLY_ARRAY);
        bool is_marker = false;
        if (rep->elements == 4 && strcmp(rep->element[0]->str, "pmessage") == 0) {
            redisReply *ch = rep->element[2], *pl = rep->element[3];
            if (strcmp(ch->str, marker) == 0) {
                is_marker = true;
            } else if (memmem(ch->str, ch->len, s->name, strlen(s->name)) != NULL) {
                char *argv[2] = {ch->str, pl->str};
                size_t lens[2] = {ch->len, pl->len};
                effects_push(published, 2, argv, lens);
            }
        }
        freeReplyObject(rep);
        if (is_marker)
            break;
    }
}

/* ---------------------------------------------------------------------------------- */
/* A client in its own process (t: java-B is killed with SIGKILL)                      */
/* ---------------------------------------------------------------------------------- */

/* The child's trace callback: one record per command, written with one write() (pipe
 * writes up to PIPE_BUF bytes are atomic, so the client's threads do not interleave):
 * u32 total, u8 subscriber, u32 argc, argc x (u32 len, bytes), u32 len, reply bytes. */
static void remote_trace_cb(void *user_data, const crd_trace *tr)
{
    int fd = *(int *)user_data;
    unsigned char buf[4096];
    size_t o = 4;
    buf[o++] = tr->subscriber ? 1 : 0;
    uint32_t argc = (uint32_t)tr->argc;
    memcpy(buf + o, &argc, 4);
    o += 4;
    for (int i = 0; i < tr->argc; i++) {
        uint32_t l = (uint32_t)tr->argvlen[i];
        if (o + 4 + l + 64 > sizeof buf)
            return;
        memcpy(buf + o, &l, 4);
        o += 4;
        memcpy(buf + o, tr->argv[i], l);
        o += l;
    }
    uint32_t rl = (uint32_t)strlen(tr->reply);
    if (o + 4 + rl > sizeof buf)
        rl = (uint32_t)(sizeof buf - o - 4);
    memcpy(buf + o, &rl, 4);
    o += 4;
    memcpy(buf + o, tr->reply, rl);
    o += rl;
    uint32_t total = (uint32_t)o;
    memcpy(buf, &total, 4);
    ssize_t w = write(fd, buf, o);
    (void)w;
}

typedef struct remote_args {
    int trace_wr, cmd_rd, hello_wr;
    int64_t watchdog_ms, fair_wait_ms;
    const char *name;
    int port;
} remote_args;

/* The child: its own client, reporting its id and owner, then running the calls the
 * parent sends (one line: "<object> <wait_ms> <lease_ms>") until it is killed. */
static int remote_child(void *arg)
{
    remote_args *ra = arg;
    static int trace_fd;
    trace_fd = ra->trace_wr;
    crd_options o;
    crdt_options_plain(&o, ra->port);
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 3000;
    o.watchdog_timeout_ms = ra->watchdog_ms;
    o.fair_wait_timeout_ms = ra->fair_wait_ms;
    o.on_trace = remote_trace_cb;
    o.trace_user_data = &trace_fd;
    crd_client *c = NULL;
    if (crd_client_new(&o, &c) != CRD_OK)
        return 2;
    uint64_t owner = crd_owner_new();
    char hello[128];
    int hl = snprintf(hello, sizeof hello, "%s %" PRIu64 "\n", crd_client_id(c), owner);
    if (write(ra->hello_wr, hello, (size_t)hl) != hl)
        return 3;
    FILE *in = fdopen(ra->cmd_rd, "r");
    char line[256];
    while (in != NULL && fgets(line, sizeof line, in) != NULL) {
        char object[64];
        long long wait_ms = 0, lease_ms = 0;
        if (sscanf(line, "%63s %lld %lld", object, &wait_ms, &lease_ms) != 3)
            return 4;
        crd_lock *l = NULL;
        crd_rwlock *rw = NULL;
        if (strcmp(object, "RFairLock") == 0)
            crd_fair_lock_new(c, ra->name, &l);
        else if (strcmp(object, "RLock") == 0)
            crd_lock_new(c, ra->name, &l);
        else {
            crd_rwlock_new(c, ra->name, &rw);
            l = strcmp(object, "RReadWriteLock.readLock") == 0 ? crd_rwlock_read(rw)
                                                                : crd_rwlock_write(rw);
        }
        if (l == NULL)
            return 5;
        crd_lock_acquire_owner(l, owner, wait_ms, lease_ms);
    }
    return 0;
}

static bool read_full_line(int fd, char *buf, size_t cap, int64_t timeout_ms)
{
    size_t n = 0;
    int64_t deadline = crdt_now_ms() + timeout_ms;
    while (n + 1 < cap && crdt_now_ms() < deadline) {
        char ch;
        ssize_t r = read(fd, &ch, 1);
        if (r == 1) {
            if (ch == '\n') {
                buf[n] = '\0';
                return true;
            }
            buf[n++] = ch;
        } else if (r == 0) {
            return false;
        } else {
            crdt_sleep_ms(2);
        }
    }
    return false;
}

static void remote_start(scenario *s, gclient *g, int64_t watchdog, int64_t fair_wait)
{
    int tp[2], cp[2], hp[2];
    cr_assert_eq(pipe(tp), 0);
    cr_assert_eq(pipe(cp), 0);
    cr_assert_eq(pipe(hp), 0);
    remote_args ra = {tp[1], cp[0], hp[1], watchdog, fair_wait, s->name, s->srv.port};
    g->pid = crdt_fork(remote_child, &ra);
    close(tp[1]);
    close(cp[0]);
    close(hp[1]);
    g->remote = true;
    g->trace_fd = tp[0];
    g->cmd_fd = cp[1];
    fcntl(g->trace_fd, F_SETFL, O_NONBLOCK);
    fcntl(hp[0], F_SETFL, O_NONBLOCK);
    char hello[128];
    cr_assert(read_full_line(hp[0], hello, sizeof hello, 10000),
              "%s: the child client of %s did not start", s->file, g->label);
    close(hp[0]);
    char *sp = strchr(hello, ' ');
    cr_assert_not_null(sp);
    *sp = '\0';
    snprintf(g->uuid, sizeof g->uuid, "%.39s", hello);
    g->remote_owner = strtoull(sp + 1, NULL, 10);
    cr_assert_gt(g->remote_owner, 0);
    g->rtag = 0;
}

/* Read whatever the child has written; records are tagged with the current step. */
static void remote_pump(gclient *g)
{
    for (;;) {
        ssize_t r = read(g->trace_fd, g->rbuf + g->rlen, sizeof g->rbuf - g->rlen);
        if (r <= 0)
            break;
        g->rlen += (size_t)r;
    }
    size_t o = 0;
    for (;;) {
        uint32_t total;
        if (g->rlen - o < 4)
            break;
        memcpy(&total, g->rbuf + o, 4);
        if (g->rlen - o < total)
            break;
        const unsigned char *p = g->rbuf + o + 4;
        crdt_trace_entry e = {0};
        e.subscriber = *p++ != 0;
        uint32_t argc;
        memcpy(&argc, p, 4);
        p += 4;
        e.argc = (int)argc;
        e.argv = calloc(argc + 1, sizeof *e.argv);
        e.argvlen = calloc(argc + 1, sizeof *e.argvlen);
        for (uint32_t i = 0; i < argc; i++) {
            uint32_t l;
            memcpy(&l, p, 4);
            p += 4;
            e.argv[i] = malloc(l + 1);
            memcpy(e.argv[i], p, l);
            e.argv[i][l] = '\0';
            e.argvlen[i] = l;
            p += l;
        }
        uint32_t rl;
        memcpy(&rl, p, 4);
        p += 4;
        e.reply = malloc(rl + 1);
        memcpy(e.reply, p, rl);
        e.reply[rl] = '\0';
        e.t_ns = crdt_now_ns();
        e.tag = g->rtag;
        if (g->rn == g->rcap) {
            g->rcap = g->rcap ? g->rcap * 2 : 32;
            g->rv = realloc(g->rv, g->rcap * sizeof *g->rv);
            cr_assert_not_null(g->rv);
        }
        g->rv[g->rn++] = e;
        o += total;
    }
    memmove(g->rbuf, g->rbuf + o, g->rlen - o);
    g->rlen -= o;
}

/* Trace access for local and remote clients alike. */
static size_t cl_count(gclient *g)
{
    if (!g->remote)
        return crdt_tracelog_count(g->tl);
    remote_pump(g);
    return g->rn;
}

static bool cl_get(gclient *g, size_t i, crdt_trace_entry *out)
{
    if (!g->remote)
        return crdt_tracelog_get(g->tl, i, out);
    memset(out, 0, sizeof *out);
    if (i >= g->rn)
        return false;
    const crdt_trace_entry *e = &g->rv[i];
    *out = *e;
    out->argv = calloc((size_t)e->argc + 1, sizeof *out->argv);
    out->argvlen = calloc((size_t)e->argc + 1, sizeof *out->argvlen);
    for (int j = 0; j < e->argc; j++) {
        out->argv[j] = malloc(e->argvlen[j] + 1);
        memcpy(out->argv[j], e->argv[j], e->argvlen[j] + 1);
        out->argvlen[j] = e->argvlen[j];
    }
    out->reply = strdup(e->reply);
    return true;
}

static void cl_set_tag(gclient *g, int tag)
{
    if (g->remote) {
        remote_pump(g);
        g->rtag = tag;
    } else {
        crdt_tracelog_set_tag(g->tl, tag);
    }
}

static const actor *first_actor_of(scenario *s, const gclient *g)
{
    for (int i = 0; i < s->nactors; i++)
        if (s->actors[i].cl == g)
            return &s->actors[i];
    return NULL;
}

/* Does a command belong to actor a, by owner fields? names(b, cmd) says whether cmd
 * carries actor b's field. A client's threads are told apart by the field in the
 * arguments; a command naming none of them belongs to the client's first thread. */
static bool named_by_actor(scenario *s, const actor *a,
                           bool (*names)(const actor *b, const void *cmd), const void *cmd)
{
    bool any = false;
    for (int i = 0; i < s->nactors; i++) {
        const actor *b = &s->actors[i];
        if (b->cl != a->cl || !names(b, cmd))
            continue;
        any = true;
        if (b == a)
            return true;
    }
    return !any && a == first_actor_of(s, a->cl);
}

/* Does trace entry cmd carry b's owner field in its arguments? */
static bool entry_names(const actor *b, const void *cmd)
{
    const crdt_trace_entry *e = cmd;
    size_t fl = strlen(b->field);
    for (int j = 1; j < e->argc; j++) {
        const char *hit =
            e->argvlen[j] >= fl ? memmem(e->argv[j], e->argvlen[j], b->field, fl) : NULL;
        if (hit == NULL)
            continue;
        /* "<uuid>:1" is a prefix of "<uuid>:12": require a delimiter after it */
        size_t after = (size_t)(hit - e->argv[j]) + fl;
        if (after == e->argvlen[j] || e->argv[j][after] == ':')
            return true;
    }
    return false;
}

/* Does trace entry e belong to actor a? */
static bool entry_of_actor(scenario *s, const actor *a, const crdt_trace_entry *e)
{
    int nthreads = 0;
    for (int i = 0; i < s->nactors; i++)
        nthreads += s->actors[i].cl == a->cl;
    return nthreads <= 1 || named_by_actor(s, a, entry_names, e);
}

/* Does recorded command cmd (JSON) carry b's field placeholder in its keys or argv? */
static bool golden_names(const actor *b, const void *cmd)
{
    json_t *c = (json_t *)cmd;
    const char *lists[2] = {"keys", "argv"};
    size_t fl = strlen(b->field_ph);
    for (int l = 0; l < 2; l++) {
        size_t j;
        json_t *v;
        json_array_foreach(json_object_get(c, lists[l]), j, v) {
            const char *str = json_string_value(v);
            const char *hit = str ? strstr(str, b->field_ph) : NULL;
            if (hit != NULL && (hit[fl] == '\0' || hit[fl] == ':'))
                return true;
        }
    }
    return false;
}

/* Does a recorded command belong to actor a? */
static bool golden_of_actor(scenario *s, const actor *a, json_t *c)
{
    if (strcmp(jstr(c, "client"), a->cl->label) != 0)
        return false;
    if (a->thread[0] == '\0')
        return true;
    return named_by_actor(s, a, golden_names, c);
}

/* ---------------------------------------------------------------------------------- */
/* Setup                                                                              */
/* ---------------------------------------------------------------------------------- */

static json_t *load_json(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", CRD_GOLDEN_DIR, rel);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "cannot load %s: %s (line %d)", path, err.text, err.line);
    return root;
}

static gclient *client_of(scenario *s, const char *label)
{
    for (int i = 0; i < s->nclients; i++)
        if (strcmp(s->clients[i].label, label) == 0)
            return &s->clients[i];
    cr_assert_fail("%s: unknown client %s", s->where, label ? label : "(null)");
    return NULL;
}

static actor *actor_of(scenario *s, const char *label, const char *thread)
{
    for (int i = 0; i < s->nactors; i++) {
        actor *a = &s->actors[i];
        if (strcmp(a->cl->label, label) == 0 &&
            (thread == NULL ? a->thread[0] == '\0' : strcmp(a->thread, thread) == 0))
            return a;
    }
    cr_assert_fail("%s: unknown client/thread %s/%s", s->where, label ? label : "(null)",
                   thread ? thread : "");
    return NULL;
}

static void add_actor(scenario *s, gclient *g, const char *thread, const char *field_ph)
{
    cr_assert_lt(s->nactors, MAX_ACTORS);
    actor *a = &s->actors[s->nactors];
    a->cl = g;
    snprintf(a->thread, sizeof a->thread, "%s", thread ? thread : "");
    snprintf(a->label, sizeof a->label, "%s%s%s", g->label, thread ? "/" : "",
             thread ? thread : "");
    snprintf(a->field_ph, sizeof a->field_ph, "%s", field_ph);
    const char *colon = strchr(field_ph, ':');
    cr_assert_not_null(colon);
    snprintf(a->tid_ph, sizeof a->tid_ph, "%s", colon + 1);
    s->alias[s->nactors] = s->nactors;
    s->nactors++;
}

static void scenario_open(scenario *s, const char *file, bool paced, int max_steps)
{
    memset(s, 0, sizeof *s);
    s->file = file;
    s->paced = paced;
    s->max_steps = max_steps;
    char rel[256];
    snprintf(rel, sizeof rel, "scenarios/%s.json", file);
    s->root = load_json(rel);
    snprintf(s->where, sizeof s->where, "%s setup", file);

    /* The lock name of the scenario (every step of these scenarios uses one). */
    json_t *steps = json_object_get(s->root, "steps");
    cr_assert(json_is_array(steps));
    size_t i;
    json_t *st;
    json_array_foreach(steps, i, st) {
        const char *nm = jstr(st, "name");
        if (nm == NULL)
            continue;
        if (s->name_golden[0] == '\0')
            snprintf(s->name_golden, sizeof s->name_golden, "%s", nm);
        cr_assert_str_eq(nm, s->name_golden, "%s uses two lock names", file);
    }
    cr_assert_neq(s->name_golden[0], '\0');
    s->name = crdt_key(s->name_golden);

    json_t *config = json_object_get(s->root, "config");
    json_t *wd = json_object_get(config, "lockWatchdogTimeout");
    int64_t watchdog = json_is_integer(wd) ? json_integer_value(wd) : 30000;
    json_t *fw = json_object_get(config, "fairLockWaitTimeout");
    int64_t fair_wait = json_is_integer(fw) ? json_integer_value(fw) : 300000;

    crdt_server_start(&s->srv, false, NULL, NULL, NULL);
    s->r = crdt_redis_port(s->srv.port);
    load_script_labels(s->r);

    /* Clients in their own process first: fork before this process has client threads. */
    json_t *clients = json_object_get(s->root, "clients");
    const char *label;
    json_t *cl;
    for (int pass = 0; pass < 2; pass++) {
        json_object_foreach(clients, label, cl) {
            bool own = json_is_true(json_object_get(cl, "own_process"));
            if (own != (pass == 0))
                continue;
            cr_assert_lt(s->nclients, MAX_CLIENTS);
            gclient *g = &s->clients[s->nclients++];
            snprintf(g->label, sizeof g->label, "%s", label);
            snprintf(g->uuid_ph, sizeof g->uuid_ph, "%s", jstr(cl, "client_id"));
            if (own) {
                remote_start(s, g, watchdog, fair_wait);
            } else {
                crd_options o;
                crdt_options(&o);
                crdt_options_port(&o, s->srv.port);
                o.watchdog_timeout_ms = watchdog;
                o.fair_wait_timeout_ms = fair_wait;
                /* Several Java threads of one client (u, v) wait on one lock: replayed
                 * with Redisson's local behaviour, every waiting thread trying (the
                 * local queue, on by default, is checked by test_contention). */
                if (json_object_size(json_object_get(cl, "owner_fields")) > 1)
                    o.local_fifo = false;
                g->tl = crdt_tracelog_new();
                crdt_tracelog_attach(g->tl, &o);
                g->client = crdt_client_opts(&o);
                snprintf(g->uuid, sizeof g->uuid, "%s", crd_client_id(g->client));
            }
            const char *of = jstr(cl, "owner_field");
            int first = s->nactors;
            if (of != NULL) {
                add_actor(s, g, NULL, of);
            } else {
                const char *th;
                json_t *f;
                json_object_foreach(json_object_get(cl, "owner_fields"), th, f)
                    add_actor(s, g, th, json_string_value(f));
            }
            for (int k = first; k < s->nactors; k++) {
                actor *a = &s->actors[k];
                a->owner = own ? g->remote_owner : crd_owner_new();
            }
        }
    }
    for (int k = 0; k < s->nactors; k++) {
        actor *a = &s->actors[k];
        snprintf(a->owner_dec, sizeof a->owner_dec, "%" PRIu64, a->owner);
        char field[sizeof a->field];
        snprintf(field, sizeof field, "%s:%" PRIu64, a->cl->uuid, a->owner);
        memcpy(a->field, field, sizeof field);
    }

    s->mon = crdt_redis_port(s->srv.port);
    redisReply *rep = crdt_cmd(s->mon, "MONITOR");
    cr_assert_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    s->sub = crdt_redis_port(s->srv.port);
    rep = crdt_cmd(s->sub, "PSUBSCRIBE *");
    cr_assert_eq(rep->type, REDIS_REPLY_ARRAY);
    freeReplyObject(rep);
    /* Start both feeds at a known point. */
    invocations w = {0};
    effects c = {0}, p = {0};
    drain_feeds(s, &w, &c, &p);
    invocations_free(&w);
    effects_free(&c);
    effects_free(&p);
    s->t0 = crdt_now_ms();
}

static void scenario_close(scenario *s)
{
    for (int i = 0; i < s->nclients; i++) {
        gclient *g = &s->clients[i];
        if (g->remote) {
            if (g->pid > 0) {
                kill(g->pid, SIGKILL);
                crdt_wait_child(g->pid, 5000);
            }
            close(g->trace_fd);
            close(g->cmd_fd);
            for (size_t k = 0; k < g->rn; k++)
                crdt_trace_entry_free(&g->rv[k]);
            free(g->rv);
            continue;
        }
        crd_lock_free(g->rlock);
        crd_lock_free(g->fair);
        crd_lock_free(g->fenced);
        crd_rwlock_free(g->rw);
        crd_client_free(g->client);
        crdt_tracelog_free(g->tl);
    }
    for (int i = 0; i < s->nttl; i++)
        free(s->ttl_key[i]);
    redisFree(s->mon);
    redisFree(s->sub);
    redisFree(s->r);
    crdt_server_stop(&s->srv);
    json_decref(s->root);
}

/* The client's lock object of the recorded kind (created once, shared by threads). */
static crd_lock *lock_for(scenario *s, actor *a, const char *object)
{
    gclient *g = a->cl;
    cr_assert(!g->remote);
    if (object == NULL || strcmp(object, "RLock") == 0) {
        if (g->rlock == NULL)
            g->rlock = crdt_lock(g->client, s->name);
        return g->rlock;
    }
    if (strcmp(object, "RFairLock") == 0) {
        if (g->fair == NULL)
            cr_assert_eq(crd_fair_lock_new(g->client, s->name, &g->fair), CRD_OK);
        return g->fair;
    }
    if (strcmp(object, "RFencedLock") == 0) {
        if (g->fenced == NULL)
            cr_assert_eq(crd_fenced_lock_new(g->client, s->name, &g->fenced), CRD_OK);
        return g->fenced;
    }
    if (g->rw == NULL)
        cr_assert_eq(crd_rwlock_new(g->client, s->name, &g->rw), CRD_OK);
    if (strcmp(object, "RReadWriteLock.readLock") == 0)
        return crd_rwlock_read(g->rw);
    cr_assert_str_eq(object, "RReadWriteLock.writeLock", "%s: object %s", s->where, object);
    return crd_rwlock_write(g->rw);
}

/* ---------------------------------------------------------------------------------- */
/* Calls                                                                              */
/* ---------------------------------------------------------------------------------- */

static int64_t arg_ms(json_t *step, const char *k)
{
    json_t *args = json_object_get(step, "args");
    json_t *v = json_object_get(args, k);
    cr_assert(json_is_integer(v), "step has no integer args.%s", k);
    return json_integer_value(v);
}

/* The Java call as (wait, lease) of crd_lock_acquire. */
static bool acquire_form(json_t *step, int64_t *wait_ms, int64_t *lease_ms)
{
    const char *call = jstr(step, "call");
    if (strcmp(call, "lock") == 0) {
        *wait_ms = CRD_WAIT_FOREVER;
        *lease_ms = CRD_LEASE_WATCHDOG;
    } else if (strcmp(call, "lock(leaseTime)") == 0) {
        *wait_ms = CRD_WAIT_FOREVER;
        *lease_ms = arg_ms(step, "leaseTime");
    } else if (strcmp(call, "tryLock()") == 0) {
        *wait_ms = 0;
        *lease_ms = CRD_LEASE_WATCHDOG;
    } else if (strcmp(call, "tryLock(waitTime)") == 0) {
        *wait_ms = arg_ms(step, "waitTime");
        *lease_ms = CRD_LEASE_WATCHDOG;
    } else if (strcmp(call, "tryLock(waitTime,leaseTime)") == 0) {
        *wait_ms = arg_ms(step, "waitTime");
        *lease_ms = arg_ms(step, "leaseTime");
    } else {
        return false;
    }
    return true;
}

/* The status credisson must return for the Java result of an acquire. */
static crd_status expected_acquire(json_t *res, int64_t wait_ms)
{
    json_t *ret = json_object_get(res, "returned");
    cr_assert_null(json_object_get(res, "exception"));
    if (json_is_false(ret))
        return wait_ms == 0 ? CRD_BUSY : CRD_TIMEOUT;
    return CRD_OK; /* null (void lock) or true */
}

static void *async_body(void *arg)
{
    async_call *c = arg;
    crd_status st = crd_lock_acquire_owner(c->lock, c->who->owner, c->wait_ms, c->lease_ms);
    pthread_mutex_lock(&c->mu);
    c->st = st;
    c->done = 1;
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static bool async_done_pred(void *arg)
{
    async_call *c = arg;
    pthread_mutex_lock(&c->mu);
    bool d = c->done != 0;
    pthread_mutex_unlock(&c->mu);
    return d;
}

static bool is_noscript(json_t *cmd)
{
    json_t *rep = json_object_get(cmd, "reply");
    const char *e = json_is_object(rep) ? jstr(rep, "error") : NULL;
    return e != NULL && strncmp(e, "NOSCRIPT", 8) == 0;
}

static bool is_script_trace(const crdt_trace_entry *e)
{
    return e->argc >= 3 && is_script_cmd(e->argv[0]);
}

static bool is_noscript_trace(const crdt_trace_entry *e)
{
    return strncmp(e->reply, "(error) NOSCRIPT", 16) == 0;
}

/* Recorded script calls (not renewals, not NOSCRIPT) of actor a in one step. */
static size_t golden_scripts(scenario *s, json_t *step, const actor *a)
{
    size_t n = 0, i;
    json_t *c;
    json_array_foreach(json_object_get(step, "commands"), i, c) {
        if (jstr(c, "script") == NULL || is_noscript(c) || is_renewal_label(jstr(c, "script")))
            continue;
        if (golden_of_actor(s, a, c))
            n++;
    }
    return n;
}

/* Recorded commands named cmd of a client in one step. */
static size_t golden_count_cmd(json_t *step, const char *client, const char *cmd)
{
    size_t n = 0, i;
    json_t *c;
    json_array_foreach(json_object_get(step, "commands"), i, c)
        if (strcmp(jstr(c, "client"), client) == 0 && strcmp(jstr(c, "cmd"), cmd) == 0)
            n++;
    return n;
}

struct ready_pred {
    scenario *s;
    const actor *a;
    size_t from;
    size_t scripts;
    size_t subscribes;
};

static bool ready_pred_fn(void *arg)
{
    struct ready_pred *p = arg;
    size_t n = cl_count(p->a->cl), scripts = 0, subs = 0;
    for (size_t i = p->from; i < n; i++) {
        crdt_trace_entry e;
        cl_get(p->a->cl, i, &e);
        if (e.subscriber) {
            if (strcasecmp(e.argv[0], "SUBSCRIBE") == 0)
                subs++;
        } else if (is_script_trace(&e) && !is_noscript_trace(&e) &&
                   !is_renewal_label(label_of(e.argc, e.argv, e.argvlen)) &&
                   entry_of_actor(p->s, p->a, &e)) {
            scripts++;
        }
        crdt_trace_entry_free(&e);
    }
    return scripts >= p->scripts && subs >= p->subscribes;
}

static void pace_until(scenario *s, int64_t t_ms)
{
    int64_t left = s->t0 + t_ms - crdt_now_ms();
    if (left > 0)
        crdt_sleep_ms(left);
}

static void run_step_call(scenario *s, json_t *step, int stepno)
{
    const char *call = jstr(step, "call");
    if (strcmp(call, "sleep") == 0) {
        json_t *ms = json_object_get(step, "ms");
        cr_assert(json_is_integer(ms));
        /* The recording lets this much time pass (a lease runs out, a wait ends, the
         * watchdog renews). */
        if (s->paced)
            pace_until(s, json_integer_value(json_object_get(step, "t_ms")) +
                              json_integer_value(ms));
        else
            crdt_sleep_ms(json_integer_value(ms));
        return;
    }
    if (strcmp(call, "kill") == 0) {
        gclient *g = client_of(s, jstr(step, "client"));
        cr_assert(g->remote, "%s: only a client in its own process can be killed", s->where);
        cr_assert_str_eq(jstr(step, "signal"), "SIGKILL");
        cr_assert_eq(kill(g->pid, SIGKILL), 0);
        int code = crdt_wait_child(g->pid, 5000);
        cr_assert_eq(code, 128 + SIGKILL, "%s: the child ended with %d", s->where, code);
        g->pid = 0;
        remote_pump(g);
        /* its connections closed with the process, so Redis dropped its subscription
         * (its queue entry stays: that is the scenario) */
        char pattern[64];
        snprintf(pattern, sizeof pattern, "*%s*", g->uuid);
        cr_assert(crdt_pubsub_channels_empty_at(s->srv.port, pattern), "%s: the killed client is still "
                  "subscribed", s->where);
        return;
    }
    actor *a = actor_of(s, jstr(step, "client"), jstr(step, "thread"));
    const char *object = jstr(step, "object");
    json_t *res = json_object_get(step, "result");
    int64_t wait_ms, lease_ms;
    if (acquire_form(step, &wait_ms, &lease_ms)) {
        if (json_is_true(json_object_get(step, "async"))) {
            struct ready_pred p = {s, a, cl_count(a->cl), golden_scripts(s, step, a),
                                   golden_count_cmd(step, a->cl->label, "SUBSCRIBE")};
            if (a->cl->remote) {
                char line[128];
                int n = snprintf(line, sizeof line, "%s %lld %lld\n", object,
                                 (long long)wait_ms, (long long)lease_ms);
                cr_assert_eq(write(a->cl->cmd_fd, line, (size_t)n), n);
            } else {
                async_call *c = &s->calls[stepno];
                c->used = true;
                c->step = stepno;
                c->who = a;
                c->lock = lock_for(s, a, object);
                c->wait_ms = wait_ms;
                c->lease_ms = lease_ms;
                pthread_mutex_init(&c->mu, NULL);
                cr_assert_eq(pthread_create(&c->th, NULL, async_body, c), 0);
            }
            /* The step ends while the call waits: after its recorded commands. */
            cr_assert(crdt_wait_until(ready_pred_fn, &p, 5000),
                      "%s: the blocked %s did not send its %zu scripts and %zu SUBSCRIBEs",
                      s->where, call, p.scripts, p.subscribes);
            return;
        }
        cr_assert(!a->cl->remote);
        crd_status want = expected_acquire(res, wait_ms);
        crd_status st = crd_lock_acquire_owner(lock_for(s, a, object), a->owner, wait_ms,
                                               lease_ms);
        cr_assert_eq(st, want, "%s: %s by %s gave %s, the recording says %s", s->where, call,
                     a->label, crd_strerror(st), crd_strerror(want));
        if (st == CRD_OK) {
            a->holds++;
            a->lost = false;
        }
        return;
    }
    cr_assert(!a->cl->remote);
    crd_lock *l = lock_for(s, a, object);
    if (strcmp(call, "unlock") == 0) {
        crd_status want = CRD_OK;
        if (json_object_get(res, "exception") != NULL) {
            const char *cls = jstr(res, "exception");
            cr_assert_str_eq(cls, "java.lang.IllegalMonitorStateException");
            /* A holder whose hold vanished is told it was lost; others are not owners. */
            want = a->holds > 0 ? CRD_LOCK_LOST : CRD_NOT_OWNER;
        } else if (a->lost && strcmp(object, "RFairLock") == 0) {
            /* Quirk Q4: Redisson's fair unlock after a force-unlock replies 1 and returns
             * normally; credisson's script replies 2 (same server effects) and the caller
             * learns that its hold was lost. */
            want = CRD_LOCK_LOST;
        }
        crd_status st = crd_lock_release_owner(l, a->owner);
        cr_assert_eq(st, want, "%s: unlock by %s gave %s, expected %s", s->where, a->label,
                     crd_strerror(st), crd_strerror(want));
        if (st == CRD_OK || st == CRD_LOCK_LOST)
            a->holds = st == CRD_OK ? a->holds - 1 : 0;
        return;
    }
    if (strcmp(call, "lockAndGetToken") == 0) {
        int64_t token = 0;
        crd_status st = crd_lock_acquire_token_owner(l, a->owner, CRD_WAIT_FOREVER,
                                                     CRD_LEASE_WATCHDOG, &token);
        cr_assert_eq(st, CRD_OK, "%s: lockAndGetToken by %s gave %s", s->where, a->label,
                     crd_strerror(st));
        cr_assert_eq(token, json_integer_value(json_object_get(res, "returned")),
                     "%s: token %lld", s->where, (long long)token);
        a->holds++;
        a->lost = false;
        return;
    }
    if (strcmp(call, "getToken") == 0) {
        int64_t token = -1;
        cr_assert_eq(crd_lock_token(l, &token), CRD_OK, "%s", s->where);
        cr_assert_eq(token, json_integer_value(json_object_get(res, "returned")),
                     "%s: getToken gave %lld", s->where, (long long)token);
        return;
    }
    if (strcmp(call, "delete") == 0) {
        /* Java's RFencedLock.delete(): a plain DEL of the hash and the counter, no script,
         * no publish (PROTOCOL.md 9). credisson offers no such call (it defeats fencing);
         * the test plays the Java peer's part with its own connection. */
        char recorded[128];
        snprintf(recorded, sizeof recorded, "redisson_lock_token:{%s}", s->name_golden);
        char *counter = map_golden(s, recorded);
        long long n = crdt_cmd_int(s->r, "DEL %s %s", s->name, counter);
        free(counter);
        cr_assert_eq(json_is_true(json_object_get(res, "returned")), n > 0, "%s", s->where);
        if (n > 0)
            for (int i = 0; i < s->nactors; i++)
                if (s->actors[i].holds > 0)
                    s->actors[i].lost = true;
        s->peer_deleted = true;
        return;
    }
    if (strcmp(call, "forceUnlock") == 0) {
        bool was = false;
        cr_assert_eq(crd_lock_force_unlock(l, &was), CRD_OK, "%s", s->where);
        json_t *ret = json_object_get(res, "returned");
        cr_assert_eq(was, json_is_true(ret), "%s: forceUnlock returned %d", s->where, was);
        if (was)
            for (int i = 0; i < s->nactors; i++)
                if (s->actors[i].holds > 0)
                    s->actors[i].lost = true;
        return;
    }
    cr_assert_fail("%s: call %s is not replayed by this test", s->where, call);
}

/* Blocked calls the recording says returned during this step. */
static void collect_completions(scenario *s, json_t *step)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(step, "completed"), i, c) {
        int from = (int)json_integer_value(json_object_get(c, "step"));
        json_t *res = json_object_get(c, "result");
        if (json_is_true(json_object_get(res, "killed"))) {
            /* its process is gone (the kill step checked how it ended) */
            cr_assert(client_of(s, jstr(c, "client"))->remote);
            continue;
        }
        cr_assert(from >= 0 && from < MAX_STEPS && s->calls[from].used,
                  "%s: completion of an unknown step %d", s->where, from);
        async_call *ac = &s->calls[from];
        cr_assert(crdt_wait_until(async_done_pred, ac, 10000),
                  "%s: the call of step %d did not return", s->where, from);
        pthread_join(ac->th, NULL);
        crd_status want = expected_acquire(res, ac->wait_ms);
        cr_assert_eq(ac->st, want, "%s: the blocked call of step %d gave %s", s->where, from,
                     crd_strerror(ac->st));
        if (ac->st == CRD_OK)
            ac->who->holds++;
        ac->used = false;
        pthread_mutex_destroy(&ac->mu);
    }
}

/* ---------------------------------------------------------------------------------- */
/* Comparisons                                                                        */
/* ---------------------------------------------------------------------------------- */

/* Arguments credisson's scripts take beyond Redisson's (recorded KEYS/ARGV come first,
 * by position; these follow). Written as recorded strings, mapped like them. */
static int extra_keys(scenario *s, const char *label, char out[][128])
{
    if (strcmp(label, "fair.acquire_failed") == 0) {
        /* The cleanup may wake the new head when the lock is free (credisson's
         * addition), so it also takes the lock key and the channel base. */
        snprintf(out[0], 128, "%s", s->name_golden);
        snprintf(out[1], 128, "redisson_lock__channel:{%s}", s->name_golden);
        return 2;
    }
    return 0;
}

static int extra_argv(const char *label, char out[][128])
{
    if (strcmp(label, "fair.acquire_failed") == 0) {
        snprintf(out[0], 128, "PUBLISH");
        return 1;
    }
    /* rw_force_unlock is one script for both views: ARGV[3] names the mode it deletes */
    if (strcmp(label, "read.force_unlock") == 0) {
        snprintf(out[0], 128, "read");
        return 1;
    }
    if (strcmp(label, "write.force_unlock") == 0) {
        snprintf(out[0], 128, "write");
        return 1;
    }
    return 0;
}

/* Compare one of our script calls (argv of EVALSHA/EVAL) with a recorded command: the
 * label, KEYS and ARGV by position (the unlock latch TTL is ours), then credisson's extra
 * arguments. Integers matched to <T+N> "now" arguments go to nows[]. No assertion: the
 * reason goes to err. */
static bool args_match(scenario *s, json_t *g, int argc, char *const *argv,
                       const size_t *lens, char *err, size_t errlen, long long *nows,
                       int *nnows)
{
    const char *glabel = jstr(g, "script");
    const char *olabel = label_of(argc, argv, lens);
    if (nnows != NULL)
        *nnows = 0;
    if (olabel == NULL || strcmp(olabel, glabel) != 0) {
        snprintf(err, errlen, "script %s, recorded %s", olabel ? olabel : "(unknown)", glabel);
        return false;
    }
    json_t *keys = json_object_get(g, "keys");
    json_t *gargv = json_object_get(g, "argv");
    size_t nk = json_array_size(keys), na = json_array_size(gargv);
    char xk[4][128], xa[4][128];
    int nxk = extra_keys(s, glabel, xk), nxa = extra_argv(glabel, xa);
    size_t onk = (size_t)atoi(argv[2]);
    if (onk != nk + (size_t)nxk || (size_t)argc != 3 + onk + na + (size_t)nxa) {
        snprintf(err, errlen, "%s: %zu keys and %d arguments, expected %zu and %zu", glabel,
                 onk, argc - 3 - (int)onk, nk + (size_t)nxk, na + (size_t)nxa);
        return false;
    }
    for (size_t j = 0; j < onk; j++) {
        const char *gk = j < nk ? json_string_value(json_array_get(keys, j)) : xk[j - nk];
        if (!match_golden(s, gk, argv[3 + j], lens[3 + j])) {
            snprintf(err, errlen, "%s KEYS[%zu] is '%s', expected '%s'", glabel, j + 1,
                     argv[3 + j], gk);
            return false;
        }
    }
    bool is_unlock = strstr(glabel, ".unlock") != NULL;
    for (size_t j = 0; j < na + (size_t)nxa; j++) {
        const char *ga = j < na ? json_string_value(json_array_get(gargv, j)) : xa[j - na];
        const char *oa = argv[3 + onk + j];
        if (is_unlock && j == na - 1) {
            /* the latch TTL is ours to choose: a positive integer */
            if (atoll(oa) < 1) {
                snprintf(err, errlen, "%s latch TTL '%s'", glabel, oa);
                return false;
            }
            continue;
        }
        if (!match_golden(s, ga, oa, lens[3 + onk + j])) {
            snprintf(err, errlen, "%s ARGV[%zu] is '%s', expected '%s'", glabel, j + 1, oa, ga);
            return false;
        }
        long long tn;
        if (nows != NULL && tn_value(ga, &tn) && s->ntn_seen == 1 && *nnows < 4)
            nows[(*nnows)++] = s->tn_seen[0];
    }
    return true;
}

static void check_reply(scenario *s, const actor *a, json_t *gcmd, const crdt_trace_entry *e)
{
    json_t *rep = json_object_get(gcmd, "reply");
    const char *label = jstr(gcmd, "script");
    char want[256];
    crdt_golden_reply_text(rep, want, sizeof want);
    if (!json_is_integer(rep)) {
        cr_assert_str_eq(e->reply, want, "%s: %s of %s replied %s, recorded %s", s->where,
                         label, a->label, e->reply, want);
        return;
    }
    long long g = json_integer_value(rep);
    long long got = 0;
    cr_assert_eq(sscanf(e->reply, "(integer) %lld", &got), 1,
                 "%s: %s of %s replied %s, recorded %lld", s->where, label, a->label, e->reply,
                 g);
    long long bound = s->lock_ttl_set > 0 ? s->lock_ttl_set : 1;
    if (strcmp(label, "rlock.acquire") == 0 || strcmp(label, "read.acquire") == 0 ||
        strcmp(label, "write.acquire") == 0) {
        /* the holder's PTTL: timing-dependent, bounded by the holder's lease */
        cr_assert(got > 0 && got <= bound,
                  "%s: %s hint %lld not in (0, %lld] (the holder's lease)", s->where, label,
                  got, bound);
    } else if (strcmp(label, "fair.acquire") == 0) {
        /* The holder's PTTL, or (joining the queue) the previous deadline - now: that
         * relation is checked with the deadline the same call wrote (zadd). */
        cr_assert(got >= 0, "%s: fair.acquire hint %lld", s->where, got);
        if (g <= bound)
            cr_assert(got <= bound, "%s: fair.acquire hint %lld above the holder's lease %lld",
                      s->where, got, bound);
    } else if (strcmp(label, "fair.unlock") == 0 && g == 1 && a->lost) {
        /* Quirk Q4: after a force-unlock, credisson's fair unlock replies 2 where
         * Redisson's replies 1 (same writes: latch 1, head woken). */
        cr_assert_eq(got, 2, "%s: fair.unlock after a force-unlock replied %lld, expected 2 "
                     "(Q4)", s->where, got);
    } else if ((strcmp(label, "rlock.unlock") == 0 || strcmp(label, "write.unlock") == 0) &&
               g == 1) {
        /* credisson's unlock replies 1 + the connections its message reached (the test's
         * own PSUBSCRIBE * is one of them); Redisson's replies 1. Same writes. */
        cr_assert(got >= 2, "%s: %s of %s replied %lld, expected 1 + receivers", s->where,
                  label, a->label, got);
    } else {
        cr_assert_eq(got, g, "%s: %s of %s replied %lld, recorded %lld", s->where, label,
                     a->label, got, g);
    }
}

static void check_now_window(scenario *s, const char *label, const long long *nows, int n)
{
    int64_t hi = wall_ms() + 1;
    for (int i = 0; i < n; i++)
        cr_assert(nows[i] >= s->step_wall - 200 && nows[i] <= hi,
                  "%s: %s now argument %lld is not this step's wall clock [%lld, %lld]",
                  s->where, label, nows[i], (long long)(s->step_wall - 200), (long long)hi);
}

/* A recorded renewal of the same kind, the pattern for ours (their count and times
 * follow credisson's own schedule). */
static json_t *renewal_template(scenario *s, const char *label, const char *client)
{
    size_t i, j;
    json_t *st, *c;
    json_array_foreach(json_object_get(s->root, "steps"), i, st)
        json_array_foreach(json_object_get(st, "commands"), j, c)
            if (jstr(c, "script") != NULL && strcmp(jstr(c, "script"), label) == 0 &&
                strcmp(jstr(c, "client"), client) == 0 && !is_noscript(c) &&
                json_is_array(json_object_get(c, "reply")))
                return c;
    return NULL;
}

/* Script commands of each thread: KEYS and ARGV by position, replies; nothing else on
 * the command connections; SUBSCRIBE per client as recorded; NOSCRIPT handled with one
 * EVAL; renewals checked one by one, their number within one of the recording's. */
/* Does the recording have this plain (non-script) command, with the same arguments, from
 * this actor's client in this step? */
static bool recorded_plain(scenario *s, json_t *step, const actor *a, const crdt_trace_entry *e)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(step, "commands"), i, c) {
        if (jstr(c, "script") != NULL || strcmp(jstr(c, "client"), a->cl->label) != 0 ||
            strcasecmp(jstr(c, "cmd"), e->argv[0]) != 0)
            continue;
        json_t *args = json_object_get(c, "args");
        if ((int)json_array_size(args) != e->argc - 1)
            continue;
        bool same = true;
        for (int k = 1; k < e->argc && same; k++) {
            char *m = map_golden(s, json_string_value(json_array_get(args, (size_t)k - 1)));
            same = strcmp(m, e->argv[k]) == 0;
            free(m);
        }
        if (same)
            return true;
    }
    return false;
}

static void check_client_traffic(scenario *s, json_t *step, int stepno)
{
    for (int ai = 0; ai < s->nactors; ai++) {
        actor *a = &s->actors[ai];
        bool first_thread = first_actor_of(s, a->cl) == a;
        json_t *gs[64];
        size_t ng = 0, i;
        json_t *c;
        size_t g_noscript = 0, g_renew = 0;
        json_array_foreach(json_object_get(step, "commands"), i, c) {
            if (jstr(c, "script") == NULL || !golden_of_actor(s, a, c))
                continue;
            if (is_noscript(c)) {
                g_noscript++;
                continue;
            }
            if (is_renewal_label(jstr(c, "script"))) {
                g_renew++;
                continue;
            }
            cr_assert_lt(ng, 64);
            gs[ng++] = c;
        }
        size_t k = 0, o_noscript = 0, o_subscribes = 0, o_renew = 0;
        int boundary_retries = 0;
        size_t n = cl_count(a->cl);
        bool prev_noscript = false, renew_noscript = false;
        char prev_args[4096] = "";
        for (size_t ti = 0; ti < n; ti++) {
            crdt_trace_entry e;
            cr_assert(cl_get(a->cl, ti, &e));
            if (e.tag != stepno) {
                crdt_trace_entry_free(&e);
                continue;
            }
            if (e.subscriber) {
                if (first_thread && strcasecmp(e.argv[0], "SUBSCRIBE") == 0)
                    o_subscribes++;
                crdt_trace_entry_free(&e);
                continue;
            }
            if (!entry_of_actor(s, a, &e)) {
                crdt_trace_entry_free(&e);
                continue;
            }
            if (renew_noscript && e.argc == 3 && strcasecmp(e.argv[0], "SCRIPT") == 0 &&
                strcasecmp(e.argv[1], "LOAD") == 0) {
                /* The watchdog answers NOSCRIPT (a cache flushed by another test) with
                 * SCRIPT LOAD and the same EVALSHA, Redisson's own recovery (README). */
                renew_noscript = false;
                crdt_trace_entry_free(&e);
                continue;
            }
            if (!is_script_trace(&e) && recorded_plain(s, step, a, &e)) {
                crdt_trace_entry_free(&e);
                continue; /* a plain command the recording has too (getToken's GET) */
            }
            cr_assert(is_script_trace(&e), "%s: %s sent %s, which the recording does not have",
                      s->where, a->label, e.argv[0]);
            if (is_noscript_trace(&e) && is_renewal_label(label_of(e.argc, e.argv, e.argvlen))) {
                renew_noscript = true;
                crdt_trace_entry_free(&e);
                continue;
            }
            if (is_noscript_trace(&e)) {
                cr_assert_str_eq(e.argv[0], "EVALSHA");
                o_noscript++;
                prev_noscript = true;
                size_t off = 0;
                for (int j = 2; j < e.argc && off < sizeof prev_args; j++)
                    off += (size_t)snprintf(prev_args + off, sizeof prev_args - off, "%s\x1f",
                                            e.argv[j]);
                crdt_trace_entry_free(&e);
                continue;
            }
            if (prev_noscript) {
                /* the fallback: one EVAL with the very same keys and arguments */
                cr_assert_str_eq(e.argv[0], "EVAL", "%s: after NOSCRIPT %s sent %s", s->where,
                                 a->label, e.argv[0]);
                char args[4096] = "";
                size_t off = 0;
                for (int j = 2; j < e.argc && off < sizeof args; j++)
                    off += (size_t)snprintf(args + off, sizeof args - off, "%s\x1f", e.argv[j]);
                cr_assert_str_eq(args, prev_args, "%s: the EVAL retry changed its arguments",
                                 s->where);
                prev_noscript = false;
            }
            const char *olabel = label_of(e.argc, e.argv, e.argvlen);
            if (is_renewal_label(olabel)) {
                /* the watchdog, on credisson's schedule */
                json_t *t = renewal_template(s, olabel, a->cl->label);
                cr_assert_not_null(t, "%s: %s renewed with %s; the recording never does",
                                   s->where, a->label, olabel);
                char err[512];
                cr_assert(args_match(s, t, e.argc, e.argv, e.argvlen, err, sizeof err, NULL,
                                     NULL),
                          "%s: renewal by %s: %s", s->where, a->label, err);
                check_reply(s, a, t, &e);
                o_renew++;
                crdt_trace_entry_free(&e);
                continue;
            }
            /* A waiter whose slice (the holder's PTTL, in whole ms) ends a hair before
             * the key really expires sees a hint of 0..5 ms once more; that re-check
             * has no effects and is not polling. Tolerated up to 3 times, reported. */
            if (k < ng && boundary_retries < 3 && olabel != NULL &&
                strcmp(jstr(gs[k], "script"), olabel) == 0 && strstr(olabel, "acquire") &&
                json_is_null(json_object_get(gs[k], "reply"))) {
                long long hint = -1;
                if (sscanf(e.reply, "(integer) %lld", &hint) == 1 && hint >= 0 && hint <= 5) {
                    fprintf(stderr, "[golden] %s: %s re-checked %lld ms before the expiry\n",
                            s->where, a->label, hint);
                    boundary_retries++;
                    crdt_trace_entry_free(&e);
                    continue;
                }
            }
            if (k >= ng)
                crdt_tracelog_dump(a->cl->tl, s->where);
            cr_assert_lt(k, ng, "%s: %s sent more scripts than the recording (%zu): %s %s",
                         s->where, a->label, ng, olabel ? olabel : e.argv[0], e.reply);
            json_t *g = gs[k++];
            char err[512];
            long long nows[4];
            int nnows = 0;
            cr_assert(args_match(s, g, e.argc, e.argv, e.argvlen, err, sizeof err, nows,
                                 &nnows),
                      "%s: %s: %s", s->where, a->label, err);
            check_now_window(s, olabel, nows, nnows);
            check_reply(s, a, g, &e);
            crdt_trace_entry_free(&e);
        }
        cr_assert_eq(k, ng, "%s: %s sent %zu scripts, the recording has %zu", s->where,
                     a->label, k, ng);
        /* The scenario's own server starts with an empty script cache, so a NOSCRIPT
         * may come at any script's first use; where the recording has one, the cache
         * was flushed right before the step and it must come. */
        cr_assert_geq(o_noscript, g_noscript, "%s: %s got %zu NOSCRIPT replies, recorded %zu",
                      s->where, a->label, o_noscript, g_noscript);
        /* Renewals follow credisson's own period (watchdog timeout / 3, as Redisson):
         * one more or one fewer per step than recorded is a matter of when the step
         * boundary fell. */
        cr_assert(o_renew + 1 >= g_renew && o_renew <= g_renew + 1,
                  "%s: %s renewed %zu times, recorded %zu", s->where, a->label, o_renew,
                  g_renew);
        s->renew_g += (int)g_renew;
        s->renew_o += (int)o_renew;
        if (!first_thread)
            continue;
        size_t g_sub = golden_count_cmd(step, a->cl->label, "SUBSCRIBE");
        cr_assert_eq(o_subscribes, g_sub, "%s: %s sent %zu SUBSCRIBEs, recorded %zu", s->where,
                     a->cl->label, o_subscribes, g_sub);
        /* the subscribed channel is the recorded one */
        json_array_foreach(json_object_get(step, "commands"), i, c) {
            if (strcmp(jstr(c, "client"), a->cl->label) != 0 ||
                strcmp(jstr(c, "cmd"), "SUBSCRIBE"))
                continue;
            const char *gch = json_string_value(json_array_get(json_object_get(c, "args"), 0));
            char *mch = map_golden(s, gch);
            bool found = false;
            for (size_t ti = 0; ti < n && !found; ti++) {
                crdt_trace_entry e;
                cl_get(a->cl, ti, &e);
                found = e.tag == stepno && e.subscriber && e.argc >= 2 &&
                        strcasecmp(e.argv[0], "SUBSCRIBE") == 0 && strcmp(e.argv[1], mch) == 0;
                crdt_trace_entry_free(&e);
            }
            cr_assert(found, "%s: %s did not SUBSCRIBE to %s", s->where, a->cl->label, mch);
            free(mch);
        }
    }
}

/* Is this observed write a latch SET? (its TTL is ours) */
static bool is_latch_set(const effect *e)
{
    return e->argc == 5 && strcasecmp(e->argv[0], "set") == 0 &&
           strncmp(e->argv[1], "redisson_unlock_latch:", 22) == 0;
}

/* A recorded script call, with the writes credisson must run for it. */
typedef struct ginv {
    json_t *cmd;
    json_t *writes; /* array of recorded write commands (owned) */
    const actor *who;
    bool used_id;
} ginv;

/* The recorded writes of one command, adjusted where credisson deliberately differs. */
static json_t *expected_writes(json_t *c)
{
    json_t *out = json_array();
    const char *label = jstr(c, "script");
    bool published = false;
    size_t j;
    json_t *eff;
    json_array_foreach(json_object_get(c, "effects"), j, eff) {
        const char *cmd = json_string_value(json_array_get(eff, 0));
        if (strcasecmp(cmd, "publish") == 0 || strcasecmp(cmd, "spublish") == 0)
            published = true;
    }
    json_array_foreach(json_object_get(c, "effects"), j, eff) {
        const char *cmd = json_string_value(json_array_get(eff, 0));
        if (!is_write(cmd))
            continue;
        json_array_append(out, eff);
        if (strcmp(label, "write.unlock") == 0 && !published && strcmp(cmd, "hset") == 0 &&
            strcmp(json_string_value(json_array_get(eff, 2)), "mode") == 0 &&
            strcmp(json_string_value(json_array_get(eff, 3)), "read") == 0) {
            /* Quirk Q5: the write release that leaves the owner's read holds switches the
             * mode to read; Redisson publishes nothing there, credisson publishes 1 on the
             * RW channel so readers blocked by the write hold re-check. */
            json_t *pub = json_array();
            json_array_append_new(pub, json_string("PUBLISH"));
            json_array_append(pub, json_array_get(json_object_get(c, "keys"), 1));
            json_array_append_new(pub, json_string("1"));
            json_array_append_new(out, pub);
        }
    }
    return out;
}

/* The reply credisson got for the script call with exactly these arguments. */
static bool reply_of_call(scenario *s, const effect *call, long long *reply)
{
    for (int ci = 0; ci < s->nclients; ci++) {
        gclient *g = &s->clients[ci];
        size_t n = cl_count(g);
        /* the first call with these arguments: a waiter's re-check may follow within the
         * same millisecond with the very same arguments, and only the first enqueues */
        for (size_t i = 0; i < n; i++) {
            crdt_trace_entry e;
            cl_get(g, i, &e);
            bool same = !e.subscriber && e.argc == call->argc && is_script_trace(&e) &&
                        !is_noscript_trace(&e);
            for (int j = 2; same && j < e.argc; j++)
                same = e.argvlen[j] == call->argvlen[j] &&
                       memcmp(e.argv[j], call->argv[j], e.argvlen[j]) == 0;
            bool ok = same && sscanf(e.reply, "(integer) %lld", reply) == 1;
            crdt_trace_entry_free(&e);
            if (same)
                return ok;
        }
    }
    return false;
}

static void bind_tn(scenario *s, long long g, long long o)
{
    for (int i = 0; i < s->ntn; i++)
        if (s->tn_g[i] == g) {
            cr_assert_eq(s->tn_o[i], o, "%s: <T+%lld> is %lld here and %lld before", s->where,
                         g, o, s->tn_o[i]);
            return;
        }
    cr_assert_lt(s->ntn, MAX_TN);
    s->tn_g[s->ntn] = g;
    s->tn_o[s->ntn++] = o;
}

/* The value a recorded <T+N> deadline must have here: the bound one, or the last bound
 * one moved by the recorded difference (queue deadlines are chained exactly). */
static long long tn_expected(scenario *s, long long g)
{
    for (int i = 0; i < s->ntn; i++)
        if (s->tn_g[i] == g)
            return s->tn_o[i];
    cr_assert_gt(s->ntn, 0, "%s: deadline <T+%lld> with nothing to relate it to", s->where, g);
    return s->tn_o[s->ntn - 1] + (g - s->tn_g[s->ntn - 1]);
}

/* The writes of one script call against the recorded ones. */
static void compare_writes(scenario *s, const invocation *oi, json_t *gcmd, json_t *gw)
{
    const char *label = jstr(gcmd, "script");
    size_t ng = json_array_size(gw);
    cr_assert_eq((size_t)oi->writes.n, ng, "%s: %s ran %d writes, recorded %zu (first: %s %s)",
                 s->where, label, oi->writes.n, ng, oi->writes.n ? oi->writes.v[0].argv[0] : "",
                 oi->writes.n && oi->writes.v[0].argc > 1 ? oi->writes.v[0].argv[1] : "");
    for (size_t k = 0; k < ng; k++) {
        json_t *eff = json_array_get(gw, k);
        const char *cmd = json_string_value(json_array_get(eff, 0));
        const effect *o = &oi->writes.v[k];
        cr_assert_eq(strcasecmp(o->argv[0], cmd), 0, "%s: %s write #%zu is %s %s, recorded %s",
                     s->where, label, k + 1, o->argv[0], o->argc > 1 ? o->argv[1] : "", cmd);
        cr_assert_eq((size_t)o->argc, json_array_size(eff), "%s: %s argument count", s->where,
                     cmd);
        bool latch = is_latch_set(o);
        for (int a = 1; a < o->argc; a++) {
            const char *g = json_string_value(json_array_get(eff, (size_t)a));
            if (latch && a == 3) {
                cr_assert_eq(strcasecmp(o->argv[a], g), 0);
                continue;
            }
            if (latch && a == 4) {
                cr_assert(atoll(o->argv[a]) >= 1, "%s: latch PX %s", s->where, o->argv[a]);
                continue;
            }
            long long gn;
            if (strcasecmp(cmd, "zadd") == 0 && a == 2 && tn_value(g, &gn)) {
                /* a new deadline: now + reply + wait of the same call */
                const effect *c = &oi->call;
                int nk = atoi(c->argv[2]);
                cr_assert_str_eq(label, "fair.acquire");
                long long now = atoll(c->argv[3 + nk + 3]), wait = atoll(c->argv[3 + nk + 2]);
                long long reply = 0;
                cr_assert(reply_of_call(s, c, &reply), "%s: no reply traced for the zadd's call",
                          s->where);
                long long obs = atoll(o->argv[a]);
                cr_assert_eq(obs, now + reply + wait,
                             "%s: deadline %lld != now %lld + reply %lld + wait %lld", s->where,
                             obs, now, reply, wait);
                if (s->ntn > 0)
                    cr_assert_eq(obs, tn_expected(s, gn),
                                 "%s: deadline %lld, expected %lld (recorded <T+%lld>)", s->where,
                                 obs, tn_expected(s, gn), gn);
                bind_tn(s, gn, obs);
                continue;
            }
            if (strcasecmp(cmd, "pexpire") == 0 && a == 2) {
                bool from_args = false;
                size_t j;
                json_t *v;
                json_array_foreach(json_object_get(gcmd, "argv"), j, v)
                    from_args = from_args || strcmp(json_string_value(v), g) == 0;
                if (!from_args) {
                    /* A TTL derived from a PTTL (write reentry: PTTL + lease; read acquire
                     * while writing: max(PTTL, lease); read unlock: the longest live
                     * hold): in a replay paced like the recording it lies within 1000 ms
                     * of the recorded value (scheduling on a loaded 2-core machine). */
                    long long obs = atoll(o->argv[a]), want = atoll(g);
                    cr_assert(obs > 0 && obs >= want - 1000 && obs <= want + 1000,
                              "%s: %s pexpire %lld, recorded %lld", s->where, label, obs, want);
                    continue;
                }
            }
            cr_assert(match_golden(s, g, o->argv[a], o->argvlen[a]),
                      "%s: %s %s argument %d is '%s', recorded '%s'", s->where, label, cmd, a,
                      o->argv[a], g);
        }
    }
}

/* Note the TTLs the observed writes set (for the state check). */
static void note_ttls(scenario *s, const effects *w)
{
    for (int k = 0; k < w->n; k++) {
        const effect *o = &w->v[k];
        long long ttl = -1;
        if (strcasecmp(o->argv[0], "pexpire") == 0 && o->argc == 3)
            ttl = atoll(o->argv[2]);
        else if (strcasecmp(o->argv[0], "set") == 0 && o->argc == 5 &&
                 strcasecmp(o->argv[3], "px") == 0)
            ttl = atoll(o->argv[4]);
        if (ttl < 0)
            continue;
        ttl_note(s, o->argv[1], ttl);
        if (strcmp(o->argv[1], s->name) == 0)
            s->lock_ttl_set = ttl;
    }
}

/* A renewal's writes: the recorded TTLs on the recorded keys. The read renewal sets each
 * hold's timeout key with SET ... PX (credisson's Q2-free form, PROTOCOL.md 7.6) where
 * Redisson 3.52 runs PEXPIRE; both give the key value 1 and that TTL. */
static void check_renewal_writes(scenario *s, const invocation *oi, json_t *t)
{
    json_t *gw = expected_writes(t);
    if (strcmp(oi->label, "lock.renew") == 0) {
        compare_writes(s, oi, t, gw);
        json_decref(gw);
        return;
    }
    cr_assert_eq((size_t)oi->writes.n, json_array_size(gw), "%s: read.renew ran %d writes, "
                 "recorded %zu", s->where, oi->writes.n, json_array_size(gw));
    for (int k = 0; k < oi->writes.n; k++) {
        const effect *o = &oi->writes.v[k];
        const char *ttl = NULL;
        if (strcasecmp(o->argv[0], "pexpire") == 0 && o->argc == 3)
            ttl = o->argv[2];
        else if (strcasecmp(o->argv[0], "set") == 0 && o->argc == 5 &&
                 strcmp(o->argv[2], "1") == 0 && strcasecmp(o->argv[3], "px") == 0)
            ttl = o->argv[4];
        cr_assert_not_null(ttl, "%s: read.renew ran %s %s", s->where, o->argv[0], o->argv[1]);
        bool found = false;
        size_t j;
        json_t *eff;
        json_array_foreach(gw, j, eff)
            found = found || (match_golden(s, json_string_value(json_array_get(eff, 1)),
                                           o->argv[1], o->argvlen[1]) &&
                              strcmp(json_string_value(json_array_get(eff, 2)), ttl) == 0);
        cr_assert(found, "%s: read.renew set %s to %s ms, not recorded", s->where, o->argv[1],
                  ttl);
    }
    json_decref(gw);
}

static void check_effects(scenario *s, json_t *step, invocations *calls, effects *exp_pub)
{
    /* recorded script calls with writes, in order */
    ginv gv[64];
    int ngv = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(step, "commands"), i, c) {
        const char *label = jstr(c, "script");
        if (label == NULL || is_noscript(c) || is_renewal_label(label))
            continue;
        json_t *w = expected_writes(c);
        size_t j;
        json_t *eff;
        json_array_foreach(w, j, eff) {
            const char *cmd = json_string_value(json_array_get(eff, 0));
            if (strcasecmp(cmd, "publish") == 0 || strcasecmp(cmd, "spublish") == 0) {
                char *argv[2] = {(char *)json_string_value(json_array_get(eff, 1)),
                                 (char *)json_string_value(json_array_get(eff, 2))};
                size_t lens[2] = {strlen(argv[0]), strlen(argv[1])};
                effects_push(exp_pub, 2, argv, lens);
            }
        }
        if (json_array_size(w) == 0) {
            json_decref(w);
            continue;
        }
        cr_assert_lt(ngv, 64);
        const actor *who = NULL;
        for (int a = 0; a < s->nactors && who == NULL; a++)
            if (golden_of_actor(s, &s->actors[a], c))
                who = &s->actors[a];
        gv[ngv++] = (ginv){c, w, who, false};
    }
    /* ours, in the server's order */
    int pos = 0;
    for (int k = 0; k < calls->n; k++) {
        invocation *oi = &calls->v[k];
        cr_assert_not_null(oi->label, "%s: a script that is none of credisson's ran", s->where);
        note_ttls(s, &oi->writes);
        if (is_renewal_label(oi->label)) {
            if (oi->writes.n == 0)
                continue; /* refused with NOSCRIPT (the trace shows the retry) */
            const char *client = NULL;
            for (int ci = 0; ci < s->nclients && client == NULL; ci++)
                if (mentions(oi->call.argc, oi->call.argv, oi->call.argvlen, s->clients[ci].uuid))
                    client = s->clients[ci].label;
            json_t *t = client ? renewal_template(s, oi->label, client) : NULL;
            cr_assert_not_null(t, "%s: a %s the recording does not have", s->where, oi->label);
            check_renewal_writes(s, oi, t);
            continue;
        }
        if (oi->writes.n == 0)
            continue; /* reads only: fully checked by its trace (arguments and reply) */
        cr_assert_lt(pos, ngv, "%s: %s wrote (%s %s), which the recording has no script for",
                     s->where, oi->label, oi->writes.v[0].argv[0],
                     oi->writes.v[0].argc > 1 ? oi->writes.v[0].argv[1] : "");
        /* The call it is (by its arguments)... */
        ginv *id = NULL;
        for (int g = 0; g < ngv && id == NULL; g++) {
            char err[512];
            if (!gv[g].used_id && args_match(s, gv[g].cmd, oi->call.argc, oi->call.argv,
                                             oi->call.argvlen, err, sizeof err, NULL, NULL))
                id = &gv[g];
        }
        cr_assert_not_null(id, "%s: %s with writes (%s %s) matches no recorded call",
                           s->where, oi->label, oi->writes.v[0].argv[0],
                           oi->writes.v[0].argc > 1 ? oi->writes.v[0].argv[1] : "");
        id->used_id = true;
        /* ...and the recorded call at its place in the order, whose writes it must run.
         * Two threads of one client woken by one message (v) may run in either order;
         * the first to run writes what the recording's first wrote, with the threads'
         * owner ids exchanged. */
        ginv *at = &gv[pos++];
        int saved[MAX_ACTORS];
        memcpy(saved, s->alias, sizeof saved);
        if (at != id) {
            cr_assert(at->who != NULL && id->who != NULL && at->who->cl == id->who->cl &&
                          at->who != id->who,
                      "%s: %s ran out of the recorded order", s->where, oi->label);
            int x = (int)(at->who - s->actors), y = (int)(id->who - s->actors);
            s->alias[x] = y;
            s->alias[y] = x;
            fprintf(stderr, "[golden] %s: %s and %s ran in the other order\n", s->where,
                    id->who->label, at->who->label);
        }
        compare_writes(s, oi, at->cmd, at->writes);
        memcpy(s->alias, saved, sizeof saved);
    }
    cr_assert_eq(pos, ngv, "%s: %d script calls wrote, the recording has %d (next missing: %s)",
                 s->where, pos, ngv, pos < ngv ? jstr(gv[pos].cmd, "script") : "");
    for (int g = 0; g < ngv; g++)
        json_decref(gv[g].writes);
}

static void check_published(scenario *s, json_t *step, const effects *expected,
                            const effects *published)
{
    json_t *gp = json_object_get(step, "published");
    cr_assert(json_is_array(gp), "%s: no published list", s->where);
    /* the recording's publishes are those of its scripts (plus Q5 where we add one) */
    cr_assert_geq((size_t)expected->n, json_array_size(gp));
    cr_assert_eq(published->n, expected->n, "%s: %d messages published, expected %d",
                 s->where, published->n, expected->n);
    for (int i = 0; i < expected->n; i++) {
        const effect *o = &published->v[i];
        const effect *e = &expected->v[i];
        cr_assert(match_golden(s, e->argv[0], o->argv[0], o->argvlen[0]),
                  "%s: published on %s, expected %s", s->where, o->argv[0], e->argv[0]);
        cr_assert_str_eq(o->argv[1], e->argv[1], "%s: payload", s->where);
    }
}

typedef struct obs_key {
    char *key;
    size_t len;
    bool matched;
} obs_key;

static void check_state(scenario *s, json_t *step)
{
    /* our keys: the lock and every derived key carry our name */
    obs_key keys[64];
    int nk = 0;
    char pattern[400];
    snprintf(pattern, sizeof pattern, "*%s*", s->name);
    char cursor[32] = "0";
    do {
        redisReply *rep = crdt_cmd(s->r, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        for (size_t i = 0; i < rep->element[1]->elements; i++) {
            cr_assert_lt(nk, 64);
            redisReply *k = rep->element[1]->element[i];
            keys[nk].key = malloc(k->len + 1);
            memcpy(keys[nk].key, k->str, k->len + 1);
            keys[nk].len = k->len;
            keys[nk].matched = false;
            nk++;
        }
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);

    json_t *state = json_object_get(step, "state_after");
    if ((size_t)nk != json_array_size(state)) {
        for (int j = 0; j < nk; j++)
            fprintf(stderr, "[golden] %s: key %s\n", s->where, keys[j].key);
    }
    cr_assert_eq((size_t)nk, json_array_size(state), "%s: %d keys exist, recorded %zu",
                 s->where, nk, json_array_size(state));
    size_t i;
    json_t *g;
    json_array_foreach(state, i, g) {
        const char *gkey = jstr(g, "key");
        obs_key *o = NULL;
        for (int j = 0; j < nk && o == NULL; j++)
            if (!keys[j].matched && match_golden(s, gkey, keys[j].key, keys[j].len))
                o = &keys[j];
        cr_assert_not_null(o, "%s: recorded key %s does not exist", s->where, gkey);
        o->matched = true;
        char type[32];
        crdt_cmd_str(s->r, type, sizeof type, "TYPE %b", o->key, o->len);
        cr_assert_str_eq(type, jstr(g, "type"), "%s: %s has type %s", s->where, gkey, type);
        json_t *val = json_object_get(g, "value");
        if (strcmp(type, "hash") == 0) {
            cr_assert_eq(crdt_cmd_int(s->r, "HLEN %b", o->key, o->len),
                         (long long)json_object_size(val), "%s: fields of %s", s->where, gkey);
            const char *f;
            json_t *fv;
            json_object_foreach(val, f, fv) {
                char *mf = map_golden(s, f);
                char got[64];
                crdt_cmd_str(s->r, got, sizeof got, "HGET %b %s", o->key, o->len, mf);
                cr_assert_str_eq(got, json_string_value(fv), "%s: %s field %s", s->where, gkey,
                                 mf);
                free(mf);
            }
        } else if (strcmp(type, "string") == 0) {
            char got[256];
            crdt_cmd_str(s->r, got, sizeof got, "GET %b", o->key, o->len);
            cr_assert_str_eq(got, json_string_value(val), "%s: value of %s", s->where, gkey);
        } else if (strcmp(type, "list") == 0) {
            redisReply *rep = crdt_cmd(s->r, "LRANGE %b 0 -1", o->key, o->len);
            cr_assert_eq(rep->elements, json_array_size(val), "%s: length of %s", s->where,
                         gkey);
            for (size_t j = 0; j < rep->elements; j++) {
                const char *ge = json_string_value(json_array_get(val, j));
                cr_assert(match_golden(s, ge, rep->element[j]->str, rep->element[j]->len),
                          "%s: %s[%zu] is %s, recorded %s", s->where, gkey, j,
                          rep->element[j]->str, ge);
            }
            freeReplyObject(rep);
        } else if (strcmp(type, "zset") == 0) {
            redisReply *rep = crdt_cmd(s->r, "ZRANGE %b 0 -1 WITHSCORES", o->key, o->len);
            cr_assert_eq(rep->elements, 2 * json_array_size(val), "%s: size of %s", s->where,
                         gkey);
            for (size_t j = 0; j < json_array_size(val); j++) {
                json_t *pair = json_array_get(val, j);
                const char *gm = json_string_value(json_array_get(pair, 0));
                const char *gsc = json_string_value(json_array_get(pair, 1));
                redisReply *m = rep->element[2 * j], *sc = rep->element[2 * j + 1];
                cr_assert(match_golden(s, gm, m->str, m->len), "%s: %s member %zu is %s, "
                          "recorded %s", s->where, gkey, j, m->str, gm);
                long long gn;
                cr_assert(tn_value(gsc, &gn));
                long long want = tn_expected(s, gn);
                cr_assert_eq(atoll(sc->str), want, "%s: %s score of %s is %s, expected %lld "
                             "(recorded <T+%lld>)", s->where, gkey, m->str, sc->str, want, gn);
            }
            freeReplyObject(rep);
        }
        long long ttl = crdt_cmd_int(s->r, "PTTL %b", o->key, o->len);
        json_t *gttl = json_object_get(g, "pttl");
        if (json_is_integer(gttl)) {
            cr_assert_eq(ttl, json_integer_value(gttl), "%s: PTTL of %s", s->where, gkey);
        } else if (strncmp(gkey, "redisson_unlock_latch:", 22) == 0) {
            cr_assert(ttl > 0, "%s: latch %s has no TTL (%lld)", s->where, gkey, ttl);
        } else {
            long long set = ttl_set_of(s, o->key);
            cr_assert(ttl > 0 && (set < 0 || ttl <= set), "%s: PTTL %lld of %s not in (0, %lld]",
                      s->where, ttl, gkey, set);
        }
    }
    for (int j = 0; j < nk; j++)
        free(keys[j].key);
}

/* ---------------------------------------------------------------------------------- */
/* The replay                                                                         */
/* ---------------------------------------------------------------------------------- */

static bool step_has_noscript(json_t *step)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(step, "commands"), i, c) if (is_noscript(c)) return true;
    return false;
}

/* How many of s's lock channels g has unsubscribed from so far (its subscriber's trace). */
static size_t unsubscribed(scenario *s, gclient *g)
{
    size_t n = cl_count(g), unsub = 0;
    for (size_t i = 0; i < n; i++) {
        crdt_trace_entry e;
        cl_get(g, i, &e);
        if (e.subscriber && strcasecmp(e.argv[0], "UNSUBSCRIBE") == 0 &&
            mentions(e.argc, e.argv, e.argvlen, s->name))
            unsub += (size_t)e.argc - 1;
        crdt_trace_entry_free(&e);
    }
    return unsub;
}

struct unsub_wait {
    scenario *s;
    gclient *g;
    size_t want;
};

static bool unsubscribed_enough(void *arg)
{
    struct unsub_wait *w = arg;
    return unsubscribed(w->s, w->g) >= w->want;
}

/* The subscriber thread sends an UNSUBSCRIBE after the last waiter returned, so it may
 * trail the step that recorded it; a waiter of the next step arriving first would share
 * the old subscription and send no SUBSCRIBE (correct, and cheaper, but not the recorded
 * traffic). Before a step where a client subscribes, wait (an event in its trace, with a
 * deadline) until it has unsubscribed as often as the recording before that step; if it
 * never does, the SUBSCRIBE count of the step says so. */
static void await_recorded_unsubscribes(scenario *s, json_t *steps, size_t upto)
{
    json_t *step = json_array_get(steps, upto);
    for (int c = 0; c < s->nclients; c++) {
        gclient *g = &s->clients[c];
        if (g->remote || golden_count_cmd(step, g->label, "SUBSCRIBE") == 0)
            continue;
        struct unsub_wait w = {s, g, 0};
        for (size_t i = 0; i < upto; i++)
            w.want += golden_count_cmd(json_array_get(steps, i), g->label, "UNSUBSCRIBE");
        crdt_wait_until(unsubscribed_enough, &w, 5000);
    }
}

static void replay_steps(scenario *s)
{
    json_t *steps = json_object_get(s->root, "steps");
    size_t i;
    json_t *step;
    json_array_foreach(steps, i, step) {
        int stepno = (int)json_integer_value(json_object_get(step, "step"));
        cr_assert(stepno >= 0 && stepno < MAX_STEPS);
        if (s->max_steps > 0 && stepno > s->max_steps)
            break;
        const char *call = jstr(step, "call");
        snprintf(s->where, sizeof s->where, "%s step %d (%s%s%s %s)", s->file, stepno,
                 jstr(step, "client") ? jstr(step, "client") : "", jstr(step, "thread") ? "/" : "",
                 jstr(step, "thread") ? jstr(step, "thread") : "", call);
        if (s->paced && strcmp(call, "sleep") != 0)
            pace_until(s, json_integer_value(json_object_get(step, "t_ms")));
        await_recorded_unsubscribes(s, steps, i);
        s->step_wall = wall_ms();
        for (int c = 0; c < s->nclients; c++)
            cl_set_tag(&s->clients[c], stepno);
        if (step_has_noscript(step))
            freeReplyObject(crdt_cmd(s->r, "SCRIPT FLUSH")); /* the recorded cache miss */

        run_step_call(s, step, stepno);
        collect_completions(s, step);

        invocations calls = {0};
        effects client_cmds = {0}, published = {0}, exp_pub = {0};
        drain_feeds(s, &calls, &client_cmds, &published);
        check_client_traffic(s, step, stepno);
        check_effects(s, step, &calls, &exp_pub);
        check_published(s, step, &exp_pub, &published);
        check_state(s, step);
        /* Redisson's latch DEL with the client id (Q1) is never sent (a delete step's DEL
         * is the test's own, playing the Java peer). */
        for (int c = 0; c < client_cmds.n && !s->peer_deleted; c++)
            cr_assert_neq(strcasecmp(client_cmds.v[c].argv[0], "del"), 0,
                          "%s: a client sent DEL %s", s->where, client_cmds.v[c].argv[1]);
        s->peer_deleted = false;
        invocations_free(&calls);
        effects_free(&client_cmds);
        effects_free(&published);
        effects_free(&exp_pub);
    }
}

/* Checks over the whole replay. */
static void replay_finish(scenario *s)
{
    snprintf(s->where, sizeof s->where, "%s (end)", s->file);
    for (int c = 0; c < s->nclients; c++) {
        gclient *g = &s->clients[c];
        size_t n = cl_count(g);
        bool renew_noscript = false;
        for (size_t i = 0; i < n; i++) {
            crdt_trace_entry e;
            cl_get(g, i, &e);
            cr_assert(!(!e.subscriber && strcasecmp(e.argv[0], "DEL") == 0),
                      "%s: %s sent a DEL", s->file, g->label);
            /* only the watchdog recovers with SCRIPT LOAD (see check_client_traffic) */
            cr_assert(!(!e.subscriber && strcasecmp(e.argv[0], "SCRIPT") == 0 && !renew_noscript),
                      "%s: %s sent SCRIPT (LOAD): the NOSCRIPT fallback is one EVAL", s->file,
                      g->label);
            renew_noscript = !e.subscriber && is_script_trace(&e) && is_noscript_trace(&e) &&
                             is_renewal_label(label_of(e.argc, e.argv, e.argvlen));
            crdt_trace_entry_free(&e);
        }
        if (g->remote)
            continue;
        /* one UNSUBSCRIBE per channel, after the client's last waiter on it (u, v) */
        size_t g_unsub = 0, i;
        json_t *st;
        json_array_foreach(json_object_get(s->root, "steps"), i, st) {
            int stepno = (int)json_integer_value(json_object_get(st, "step"));
            if (s->max_steps == 0 || stepno <= s->max_steps)
                g_unsub += golden_count_cmd(st, g->label, "UNSUBSCRIBE");
        }
        /* The subscriber thread sends the UNSUBSCRIBE after the waiter returned: wait for
         * it (an event in the trace), then no more than recorded. */
        struct unsub_wait w = {s, g, g_unsub};
        crdt_wait_until(unsubscribed_enough, &w, 5000);
        size_t unsub = unsubscribed(s, g);
        cr_assert_eq(unsub, g_unsub, "%s: %s unsubscribed %zu times, recorded %zu", s->file,
                     g->label, unsub, g_unsub);
    }
    for (int c = 0; c < MAX_STEPS; c++)
        cr_assert_not(s->calls[c].used, "%s: the blocked call of step %d never completed",
                      s->file, c);
    /* renewals: credisson's schedule, but neither missing nor extra over the run */
    cr_assert(s->renew_o + 1 >= s->renew_g && s->renew_o <= s->renew_g + 1,
              "%s: %d renewals, recorded %d", s->file, s->renew_o, s->renew_g);
    char pattern[400];
    snprintf(pattern, sizeof pattern, "*%s*", s->name);
    cr_assert(crdt_pubsub_channels_empty_at(s->srv.port, pattern), "%s: a waiter stayed subscribed", s->file);
}

static void replay_mode(const char *file, bool paced)
{
    scenario s;
    scenario_open(&s, file, paced, 0);
    replay_steps(&s);
    replay_finish(&s);
    scenario_close(&s);
}

static void replay(const char *file)
{
    replay_mode(file, false);
}

/* Paced: every step starts at the recording's t_ms (watchdog periods, deadlines). */
static void replay_paced(const char *file)
{
    replay_mode(file, true);
}

/* ---------------------------------------------------------------------------------- */
/* RLock                                                                              */
/* ---------------------------------------------------------------------------------- */

Test(golden, a_lock_then_unlock_with_the_watchdog_matches_redisson)
{
    replay("a_lock_unlock_watchdog");
}

Test(golden, b_reentrant_lock_and_unlock_match_redisson)
{
    replay("b_reentrant");
}

Test(golden, c_lock_with_a_lease_then_unlock_matches_redisson)
{
    replay("c_lock_lease");
}

Test(golden, d_failing_try_locks_match_redisson)
{
    replay("d_trylock_fails");
}

Test(golden, e_contention_woken_by_pubsub_matches_redisson)
{
    replay("e_contention_pubsub");
}

Test(golden, f_force_unlock_matches_redisson)
{
    replay("f_force_unlock");
}

Test(golden, k_unlock_by_a_non_owner_matches_redisson)
{
    replay("k_unlock_not_owner");
}

Test(golden, n_lease_expiry_publishes_nothing_like_redisson)
{
    replay("n_lease_expiry_no_publish");
}

Test(golden, z_script_cache_miss_falls_back_to_one_eval_with_exact_counts)
{
    replay("z_script_cache_miss");
}

Test(golden, u_two_local_waiters_share_one_subscription_and_each_0_wakes_one)
{
    replay_paced("u_rlock_two_local_waiters");
}

/* ---------------------------------------------------------------------------------- */
/* Fair lock                                                                          */
/* ---------------------------------------------------------------------------------- */

Test(golden, g_fair_hand_off_through_each_waiters_channel_matches_redisson)
{
    replay_paced("g_fair_three_clients");
}

Test(golden, h_fair_try_lock_timeout_cleans_up_and_moves_the_queue_up_like_redisson)
{
    replay_paced("h_fair_trylock_timeout");
}

Test(golden, r_fair_no_wait_try_lock_and_force_unlock_match_redisson_with_q4)
{
    replay_paced("r_fair_trylock_nowait_force_unlock");
}

Test(golden, w_fair_reentrant_lock_never_creates_the_queue_like_redisson)
{
    replay_paced("w_fair_reentrant");
}

Test(golden, t_fair_dead_waiter_is_purged_by_the_next_attempt_after_its_deadline)
{
    replay_paced("t_fair_dead_waiter_purge");
}

/* ---------------------------------------------------------------------------------- */
/* Read-write lock                                                                    */
/* ---------------------------------------------------------------------------------- */

Test(golden, i_rw_readers_then_a_waiting_writer_match_redisson)
{
    replay_paced("i_rw_readers_then_writer");
}

Test(golden, j_rw_write_reentry_and_downgrade_match_redisson_with_q5)
{
    replay_paced("j_rw_write_reentrant_downgrade");
}

Test(golden, m_rw_read_watchdog_with_one_hold_matches_redisson)
{
    replay_paced("m_rw_read_watchdog_single_hold");
}

Test(golden, p_write_unlock_wakes_the_waiting_reader_like_redisson)
{
    replay_paced("p_write_waits_then_readers");
}

Test(golden, q_write_lock_watchdog_renews_with_the_write_field_like_redisson)
{
    replay_paced("q_write_watchdog");
}

Test(golden, s_rw_force_unlock_of_each_view_matches_redisson)
{
    replay_paced("s_rw_force_unlock");
}

Test(golden, v_one_1_wakes_both_local_reader_threads_like_redisson)
{
    replay_paced("v_read_waiters_wake_all");
}

Test(golden, o_fenced_tokens_getToken_and_a_plain_lock_match_redisson)
{
    replay("o_fenced_lock");
}

Test(golden, y_fenced_reentry_draws_a_token_and_javas_delete_restarts_them_like_redisson)
{
    replay("y_fenced_reentry_and_delete");
}

static bool key_alive(scenario *s, const char *key)
{
    return crdt_cmd_int(s->r, "PTTL %s", key) > 0;
}

/* m2: Redisson 3.52's read renewal breaks with two holds (quirk Q2) after step 2, so the
 * recording is parity only for steps 1 and 2. After that, credisson's own renewal must
 * keep the hash and BOTH holds' timeout keys alive for at least three renewal periods
 * (past the moment the first hold's original TTL ran out), and the two unlocks must
 * succeed and leave nothing but their latches. */
Test(golden, m2_rw_read_watchdog_keeps_both_holds_alive_where_redisson_breaks)
{
    scenario s;
    scenario_open(&s, "m2_rw_read_watchdog_two_holds", true, 2);
    replay_steps(&s);

    actor *a = &s.actors[0];
    crd_lock *rl = lock_for(&s, a, "RReadWriteLock.readLock");
    char t1[512], t2[512];
    snprintf(t1, sizeof t1, "{%s}:%s:rwlock_timeout:1", s.name, a->field);
    snprintf(t2, sizeof t2, "{%s}:%s:rwlock_timeout:2", s.name, a->field);
    json_t *config = json_object_get(s.root, "config");
    int64_t watchdog = json_integer_value(json_object_get(config, "lockWatchdogTimeout"));
    cr_assert_gt(watchdog, 0);
    snprintf(s.where, sizeof s.where, "m2 after step 2");
    size_t from = cl_count(a->cl);
    int64_t until = crdt_now_ms() + watchdog + watchdog / 3; /* >= 3 periods of timeout/3 */
    while (crdt_now_ms() < until) {
        cr_assert(key_alive(&s, s.name), "%s: the hash lapsed", s.where);
        cr_assert(key_alive(&s, t1), "%s: hold 1's timeout key lapsed", s.where);
        cr_assert(key_alive(&s, t2), "%s: hold 2's timeout key lapsed", s.where);
        crdt_sleep_ms(50);
    }
    size_t n = cl_count(a->cl), renewals = 0;
    for (size_t i = from; i < n; i++) {
        crdt_trace_entry e;
        cl_get(a->cl, i, &e);
        const char *label = e.subscriber ? NULL : label_of(e.argc, e.argv, e.argvlen);
        if (label != NULL && strcmp(label, "read.renew") == 0 && !is_noscript_trace(&e)) {
            cr_assert_str_eq(e.reply, "[(integer) 1]", "%s: read.renew replied %s", s.where,
                             e.reply);
            renewals++;
        }
        crdt_trace_entry_free(&e);
    }
    cr_assert_geq(renewals, 3, "%s: %zu renewals in %lld ms", s.where, renewals,
                  (long long)(watchdog + watchdog / 3));
    /* every timeout key was renewed to the full timeout just now, not left to run down */
    cr_assert_gt(crdt_cmd_int(s.r, "PTTL %s", t1), watchdog / 2);
    cr_assert_gt(crdt_cmd_int(s.r, "PTTL %s", t2), watchdog / 2);

    cr_assert_eq(crd_lock_release_owner(rl, a->owner), CRD_OK, "%s: first unlock", s.where);
    cr_assert(key_alive(&s, s.name), "%s: the hash went with the first unlock", s.where);
    cr_assert(key_alive(&s, t1), "%s: hold 1 went with the first unlock", s.where);
    cr_assert_eq(crdt_cmd_int(s.r, "EXISTS %s", t2), 0, "%s: hold 2's key stayed", s.where);
    cr_assert_eq(crd_lock_release_owner(rl, a->owner), CRD_OK, "%s: second unlock", s.where);

    /* nothing left but the two latches (0, then 1), which expire on their own (Q1) */
    char pattern[400];
    snprintf(pattern, sizeof pattern, "*%s*", s.name);
    redisReply *rep = crdt_cmd(s.r, "KEYS %s", pattern);
    cr_assert_eq(rep->elements, 2, "%s: %zu keys left", s.where, rep->elements);
    int zeros = 0, ones = 0;
    for (size_t i = 0; i < rep->elements; i++) {
        cr_assert(strncmp(rep->element[i]->str, "redisson_unlock_latch:", 22) == 0,
                  "%s: %s left behind", s.where, rep->element[i]->str);
        char v[8];
        crdt_cmd_str(s.r, v, sizeof v, "GET %s", rep->element[i]->str);
        zeros += strcmp(v, "0") == 0;
        ones += strcmp(v, "1") == 0;
    }
    freeReplyObject(rep);
    cr_assert(zeros == 1 && ones == 1, "%s: latches %d x 0, %d x 1", s.where, zeros, ones);
    /* and no renewal after the release */
    size_t mark = cl_count(a->cl);
    crdt_sleep_ms(watchdog / 3 + 200);
    n = cl_count(a->cl);
    for (size_t i = mark; i < n; i++) {
        crdt_trace_entry e;
        cl_get(a->cl, i, &e);
        const char *label = e.subscriber ? NULL : label_of(e.argc, e.argv, e.argvlen);
        cr_assert(label == NULL || !is_renewal_label(label), "%s: %s after the release",
                  s.where, label);
        crdt_trace_entry_free(&e);
    }
    scenario_close(&s);
}
