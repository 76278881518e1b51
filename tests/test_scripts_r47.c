/*
 * test_scripts_r47.c -- credisson's scripts for Redisson 4.7's lock family, replayed against
 * the golden r47_* recordings (tests/golden/README-r47.md) at the script level: for every
 * step of every r47_* scenario that runs one of these scripts (the non-reentrant lock and
 * fair lock, the spin lock, the grouped multi-lock, the rate limiter, releaseIfExists), the
 * state the recording shows before the step is written into Redis, the step's commands run
 * in their recorded order and at their recorded offsets from the step's start (so a key's
 * TTL runs out where it did), and then each of our scripts is compared with the recording:
 *   - the reply;
 *   - the writes it made inside Redis (MONITOR, command names case-insensitive, arguments
 *     byte for byte);
 *   - the messages published during the step (a PSUBSCRIBE * connection; the cluster files
 *     record none, their SPUBLISH is checked among the writes);
 *   - the whole key state after the step (types, values, zset order and scores, TTLs).
 * Our script gets the recorded KEYS and ARGV with the placeholders mapped (README.md, "Using
 * the files in a C test"): <uuidX>/<tidX> to fixed ids of our own, <reqidN> to 32 hex
 * characters, <T+N> (and <T-N>) to T + N for one fixed T (the scripts compare the caller's
 * clock with the values it wrote, never with Redis's, so the relations are exact),
 * <rndN> to 16 bytes of our own and bin:10<rndN>PPPPPPPP to its 21-byte permit record.
 * Commands of other scripts (rlock.unlock, fair.unlock, ...) and plain DELs are replayed by
 * writing what the recording shows them writing; reads and (un)subscriptions are skipped.
 *
 * What may differ, and only where it says so:
 *   - integers that come from a PTTL (a holder's PTTL as a reply, a deadline derived from
 *     it, a TTL copied from the config key) may differ by TOL_MS, in scripts whose recorded
 *     effects read a PTTL; a fair waiter's new deadline must then be exactly now + reply +
 *     wait (the README's relation);
 *   - TTLs after the step: ours is read at once, the recording's ~300 ms later;
 *   - an error's text: Redisson's scripts fail in a Lua assert ("ERR user_script:1: <words>
 *     script: <sha>..."), ours answer "ERR <words>" with error_reply;
 *   - the deliberate differences below (table deviations[], each with its reason, and two
 *     rules: the grouped unlock answers 1 + the connections its message reached, as the
 *     reentrant unlock does; available_permits always answers an integer).
 * The SHA1 the library embeds for each script (generated crd_scripts.c) must be the one
 * Redis computes when it loads the expanded file. CRDT_SERIAL_TEST: one scenario at a time
 * (they share channel names, and the published messages are read server-wide).
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "crd_scripts.h"
#include "golden.h"
#include "harness.h"
#include "kinds_ext.h"

#ifndef CRD_GOLDEN_DIR
#error "CRD_GOLDEN_DIR must be defined by the build"
#endif

#define DB 9                   /* the database the replays use */
#define T_BASE 1750000000000LL /* T of <T+N> */
#define TOL_MS 200             /* PTTL-derived integers: a step's commands run within this */
#define MAX_WORDS 512

/* ---------------------------------------------------------------------------------- */
/* Our scripts by the recording's labels                                              */
/* ---------------------------------------------------------------------------------- */

/* The labels whose calls this suite replays with our scripts (their files are
 * crdt_golden_r47_file's; golden.c). */
static const char *const mine[] = {
    "nrlock.acquire",
    "nrfair.acquire",
    "nrfair.try_acquire_no_wait",
    "spin.acquire",
    "spin.unlock",
    "spin.force_unlock",
    "fml.acquire",
    "fml.try_acquire_once",
    "fml.unlock",
    "fml.force_unlock",
    "fml.renew",
    "fml.is_locked",
    "fml.is_held_by_thread",
    "ratelimiter.try_set_rate",
    "ratelimiter.try_acquire",
    "ratelimiter.available_permits",
    "ratelimiter.release",
    "ratelimiter.set_or_update_rate",
    "expirable.expire",
    "semaphore.release_if_exists",
};
#define NMINE (sizeof mine / sizeof mine[0])

static char mine_sha[NMINE][41];

static int mine_index(const char *label)
{
    for (size_t i = 0; label != NULL && i < NMINE; i++)
        if (strcmp(mine[i], label) == 0)
            return (int)i;
    return -1;
}

/* SCRIPT LOADs each of our files as the build expanded it; the SHA1 Redis answers must be
 * the one the library embeds (crd__scripts). */
static void load_scripts(redisContext *r)
{
    for (size_t i = 0; i < NMINE; i++) {
        const char *file = crdt_golden_r47_file(mine[i]);
        cr_assert_not_null(file, "%s: no file of ours", mine[i]);
        crdt_golden_script g;
        crdt_golden_script_read(r, file, true, &g);
        memcpy(mine_sha[i], g.sha, sizeof mine_sha[i]);
        free(g.text);
        const crd__script_src *src = NULL;
        for (int k = 0; k < CRD__SCRIPT_COUNT; k++)
            if (strcmp(crd__scripts[k].name, file) == 0)
                src = &crd__scripts[k];
        cr_assert_not_null(src, "%s is not embedded", file);
        cr_assert_eq(src->len, g.len, "%s: the embedded text is not the expanded file", file);
        cr_assert_str_eq(src->sha1, mine_sha[i], "%s: embedded SHA1 differs from Redis's", file);
    }
}

/* ---------------------------------------------------------------------------------- */
/* Bytes and placeholders                                                             */
/* ---------------------------------------------------------------------------------- */

typedef struct bytes {
    char *p;
    size_t n;
} bytes;

static void b_add(bytes *b, const void *p, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    cr_assert_not_null(b->p);
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void b_str(bytes *b, const char *s)
{
    b_add(b, s, strlen(s));
}

static void b_free(bytes *b)
{
    free(b->p);
    b->p = NULL;
    b->n = 0;
}

/* The 16 bytes standing for <rndN>: not text (a NUL, bytes above 0x7f). */
static void rnd_bytes(int n, unsigned char out[16])
{
    for (int i = 0; i < 16; i++)
        out[i] = (unsigned char)(n * 37 + i * 11 + (i == 5 ? 0 : 0x80));
    out[5] = 0;
}

static int hexv(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* One placeholder's text (between '<' and '>'), appended to out; false if it is none. */
static bool placeholder(const char *t, size_t n, bytes *out)
{
    char buf[64];
    if (n >= sizeof buf)
        return false;
    memcpy(buf, t, n);
    buf[n] = '\0';
    char x;
    int num;
    char tail[8];
    if (sscanf(buf, "uuid%c%7s", &x, tail) == 1 && x >= 'A' && x <= 'Z') {
        char u[40];
        snprintf(u, sizeof u, "%08x-0000-4000-8000-%012x", 0xc0ffee00u + (unsigned)(x - 'A'),
                 (unsigned)x);
        b_str(out, u);
        return true;
    }
    if (strncmp(buf, "tid", 3) == 0 && n >= 4 && buf[3] >= 'A' && buf[3] <= 'Z' &&
        (n == 4 || (n == 5 && buf[4] >= '0' && buf[4] <= '9'))) {
        char d[16];
        snprintf(d, sizeof d, "%d", 1000 + (buf[3] - 'A') * 10 + (n == 5 ? buf[4] - '0' : 0));
        b_str(out, d);
        return true;
    }
    if (sscanf(buf, "reqid%d%7s", &num, tail) == 1) {
        char id[33];
        snprintf(id, sizeof id, "00c0ffee0000000000000000%08x", (unsigned)num);
        b_str(out, id);
        return true;
    }
    long long v;
    if ((buf[0] == 'T' && (buf[1] == '+' || buf[1] == '-')) &&
        sscanf(buf + 2, "%lld%7s", &v, tail) == 1) {
        char d[24];
        snprintf(d, sizeof d, "%lld", T_BASE + (buf[1] == '+' ? v : -v));
        b_str(out, d);
        return true;
    }
    if (sscanf(buf, "rnd%d%7s", &num, tail) == 1) {
        unsigned char r[16];
        rnd_bytes(num, r);
        b_add(out, r, 16);
        return true;
    }
    return false;
}

/* The recording's text with every placeholder replaced; "bin:10<rndN>PPPPPPPP" becomes the
 * permit record's 21 bytes. */
static bytes subst(const char *in)
{
    bytes out = {0};
    b_add(&out, "", 0);
    if (strncmp(in, "bin:", 4) == 0) {
        const char *p = in + 4;
        while (*p != '\0') {
            if (*p == '<') {
                const char *e = strchr(p, '>');
                cr_assert_not_null(e, "unterminated placeholder in %s", in);
                cr_assert(placeholder(p + 1, (size_t)(e - p - 1), &out), "placeholder in %s", in);
                p = e + 1;
            } else {
                cr_assert(hexv(p[0]) >= 0 && hexv(p[1]) >= 0, "bin: %s", in);
                char c = (char)(hexv(p[0]) * 16 + hexv(p[1]));
                b_add(&out, &c, 1);
                p += 2;
            }
        }
        return out;
    }
    const char *p = in;
    while (*p != '\0') {
        const char *lt = strchr(p, '<');
        if (lt == NULL) {
            b_str(&out, p);
            break;
        }
        b_add(&out, p, (size_t)(lt - p));
        const char *gt = strchr(lt, '>');
        if (gt == NULL || !placeholder(lt + 1, (size_t)(gt - lt - 1), &out)) {
            b_add(&out, lt, 1);
            p = lt + 1;
            continue;
        }
        p = gt + 1;
    }
    return out;
}

static bool as_int(const char *p, size_t n, long long *v)
{
    if (n == 0 || n > 20)
        return false;
    char buf[24];
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *end;
    *v = strtoll(buf, &end, 10);
    return *end == '\0';
}

/* Equal bytes, or (tol > 0) two integers at most tol apart. */
static bool same_word(const char *a, size_t an, const char *b, size_t bn, long long tol)
{
    if (an == bn && memcmp(a, b, an) == 0)
        return true;
    long long x, y;
    return tol > 0 && as_int(a, an, &x) && as_int(b, bn, &y) && llabs(x - y) <= tol;
}

/* Printable form of bytes for messages. */
static const char *show(const char *p, size_t n)
{
    static char ring[8][400];
    static int k;
    char *o = ring[k++ % 8];
    size_t j = 0;
    for (size_t i = 0; i < n && j + 5 < sizeof ring[0]; i++) {
        unsigned char c = (unsigned char)p[i];
        j += (size_t)snprintf(o + j, sizeof ring[0] - j, c >= 32 && c < 127 ? "%c" : "\\x%02x", c);
    }
    o[j] = '\0';
    return o;
}

/* ---------------------------------------------------------------------------------- */
/* Commands as word lists                                                             */
/* ---------------------------------------------------------------------------------- */

typedef struct words {
    int n;
    bytes w[MAX_WORDS];
} words;

typedef struct cmdlist {
    words *v;
    int n, cap;
} cmdlist;

static void words_free(words *w)
{
    for (int i = 0; i < w->n; i++)
        b_free(&w->w[i]);
    w->n = 0;
}

static words *list_push(cmdlist *l)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = realloc(l->v, (size_t)l->cap * sizeof *l->v);
        cr_assert_not_null(l->v);
    }
    words *w = &l->v[l->n++];
    memset(w, 0, sizeof *w);
    return w;
}

static void list_free(cmdlist *l)
{
    for (int i = 0; i < l->n; i++)
        words_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void words_add(words *w, const char *p, size_t n)
{
    cr_assert_lt(w->n, MAX_WORDS);
    memset(&w->w[w->n], 0, sizeof w->w[w->n]);
    b_add(&w->w[w->n++], p, n);
}

static bool is_write(const char *cmd)
{
    static const char *const writes[] = {
        "hset",    "hsetnx",   "hincrby", "hdel",    "del",    "set",
        "pexpire", "expire",   "zadd",    "zincrby", "zrem",   "zremrangebyscore",
        "rpush",   "lpop",     "lrem",    "incr",    "incrby", "decrby",
        "publish", "spublish", NULL};
    for (int i = 0; writes[i] != NULL; i++)
        if (strcasecmp(cmd, writes[i]) == 0)
            return true;
    return false;
}

/* The writes among a recorded effects array, placeholders replaced. */
static void recorded_writes(json_t *effects, cmdlist *out)
{
    size_t i;
    json_t *e;
    json_array_foreach(effects, i, e)
    {
        if (!is_write(json_string_value(json_array_get(e, 0))))
            continue;
        words *w = list_push(out);
        size_t j;
        json_t *a;
        json_array_foreach(e, j, a)
        {
            bytes b = subst(json_string_value(a));
            words_add(w, b.p, b.n);
            b_free(&b);
        }
    }
}

static redisReply *run_words(redisContext *r, const words *w)
{
    const char *argv[MAX_WORDS];
    size_t lens[MAX_WORDS];
    for (int i = 0; i < w->n; i++) {
        argv[i] = w->w[i].p;
        lens[i] = w->w[i].n;
    }
    return crdt_cmd_argv(r, w->n, argv, lens);
}

/* ---------------------------------------------------------------------------------- */
/* Deliberate differences                                                              */
/* ---------------------------------------------------------------------------------- */

/* At (file, step, command index in the step): what credisson's script does instead of
 * Redisson's. JSON in the recording's notation (placeholders); NULL: as recorded. */
typedef struct deviation {
    const char *file;
    int step, command;
    const char *why;
    const char *reply;     /* the reply */
    const char *writes;    /* the writes, in order */
    const char *published; /* the step's messages: [[channel, payload], ...] */
    const char *state;     /* edits of state_after: [{"key": K, "hdel": [fields]} |
                              {"key": K, "zset": [[member, score], ...]} |
                              {"key": K, "del": true}] */
} deviation;

static const deviation deviations[] = {
    {"r47_fml_a_lock_unlock.json", 5, 0,
     "A partial unlock frees no value: credisson publishes nothing (Redisson tests "
     "`if (hasDeleted)` with hasDeleted = 0, which Lua takes as true, and wakes every waiter)",
     NULL,
     "[[\"hincrby\",\"grp1\",\"b/ERpQOx2r8GXiGBU6d0Hg:<uuidA>:<tidA>:lock_count\",\"-1\"],"
     "[\"hset\",\"grp1\",\"b/ERpQOx2r8GXiGBU6d0Hg:<uuidA>:<tidA>:expire_time\",\"<T+31253>\"],"
     "[\"hincrby\",\"grp1\",\"qwvAS12pR0CgRitaypEjUw:<uuidA>:<tidA>:lock_count\",\"-1\"],"
     "[\"hset\",\"grp1\",\"qwvAS12pR0CgRitaypEjUw:<uuidA>:<tidA>:expire_time\",\"<T+31253>\"],"
     "[\"hincrby\",\"grp1\",\"Q5CdP+xmkHdTGWYr64Lw6A:<uuidA>:<tidA>:lock_count\",\"-1\"],"
     "[\"hset\",\"grp1\",\"Q5CdP+xmkHdTGWYr64Lw6A:<uuidA>:<tidA>:expire_time\",\"<T+31253>\"],"
     "[\"set\",\"redisson_unlock_latch:{grp1}:<reqid1>\",\"0\",\"px\",\"17836\"],"
     "[\"pexpire\",\"grp1\",\"30000\"]]",
     "[]", NULL},
    {"r47_fml_a_lock_unlock.json", 12, 0,
     "forceUnlock() of values nobody holds: credisson answers 0 and writes nothing (Redisson's "
     "script fails with a Lua error after an HDEL of the first field)",
     "0", "[]", NULL, NULL},
    {"r47_fml_b_contention.json", 4, 0,
     "isHeldByCurrentThread(c) by B while A holds c: credisson checks every value (Redisson "
     "skips the first one and answers 1 whenever the group hash exists)",
     "0", NULL, NULL, NULL},
    {"r47_fml_d_lease_expiry.json", 4, 0,
     "B takes b over A's lapsed entry: credisson also deletes A's b sub-fields, which "
     "Redisson leaves (no Java call reads them: A's unlock, isHeld and renewal fail alike; "
     "A's next lock of b would otherwise count from its stale lock_count and keep b held "
     "after A's last unlock)",
     NULL,
     "[[\"hdel\",\"grp1\",\"Q5CdP+xmkHdTGWYr64Lw6A:<uuidA>:<tidA>:expire_time\","
     "\"Q5CdP+xmkHdTGWYr64Lw6A:<uuidA>:<tidA>:lock_count\"],"
     "[\"hset\",\"grp1\",\"Q5CdP+xmkHdTGWYr64Lw6A\",\"<uuidB>:<tidB>\"],"
     "[\"hset\",\"grp1\",\"Q5CdP+xmkHdTGWYr64Lw6A:<uuidB>:<tidB>:expire_time\",\"<T+31320>\"],"
     "[\"HINCRBY\",\"grp1\",\"Q5CdP+xmkHdTGWYr64Lw6A:<uuidB>:<tidB>:lock_count\",\"1\"],"
     "[\"pexpire\",\"grp1\",\"30000\"]]",
     NULL,
     "[{\"key\":\"grp1\",\"hdel\":[\"Q5CdP+xmkHdTGWYr64Lw6A:<uuidA>:<tidA>:expire_time\","
     "\"Q5CdP+xmkHdTGWYr64Lw6A:<uuidA>:<tidA>:lock_count\"]}]"},
    {"r47_rl_c_release_update.json", 3, 0,
     "release(2) with one record of 3 permits: credisson takes the 2 permits off the record "
     "(newest first), which then holds 1; Redisson 4.7 leaves it at 3, and its permits come back "
     "a second time when it expires (Redisson #7329, #7342)",
     NULL,
     "[[\"zrem\",\"{rl1}:permits\",\"bin:10<rnd1>03000000\"],"
     "[\"zadd\",\"{rl1}:permits\",\"<T+306>\",\"bin:10<rnd1>01000000\"],"
     "[\"set\",\"{rl1}:value\",\"4\"]]",
     NULL, "[{\"key\":\"{rl1}:permits\",\"zset\":[[\"bin:10<rnd1>01000000\",\"<T+306>\"]]}]"},
    {"r47_rl_c_release_update.json", 4, 0,
     "release(10) with one record of 3 permits (each step starts from the recorded state): the "
     "record is used up and removed, the value capped at the rate; Redisson keeps the record",
     NULL,
     "[[\"zrem\",\"{rl1}:permits\",\"bin:10<rnd1>03000000\"],[\"set\",\"{rl1}:value\",\"5\"]]",
     NULL, "[{\"key\":\"{rl1}:permits\",\"del\":true}]"},
    {"r47_rl_d_per_client.json", 7, 0,
     "release(1) with one record of 2 permits: credisson leaves 1 on the record (see "
     "r47_rl_c step 3)",
     NULL,
     "[[\"zrem\",\"{rl1}:permits:<uuidA>\",\"bin:10<rnd1>02000000\"],"
     "[\"zadd\",\"{rl1}:permits:<uuidA>\",\"<T+311>\",\"bin:10<rnd1>01000000\"],"
     "[\"set\",\"{rl1}:value:<uuidA>\",\"1\"]]",
     NULL,
     "[{\"key\":\"{rl1}:permits:<uuidA>\",\"zset\":[[\"bin:10<rnd1>01000000\",\"<T+311>\"]]}]"},
};

static const deviation *deviation_at(const char *file, int step, int command)
{
    for (size_t i = 0; i < sizeof deviations / sizeof deviations[0]; i++)
        if (strcmp(deviations[i].file, file) == 0 && deviations[i].step == step &&
            deviations[i].command == command)
            return &deviations[i];
    return NULL;
}

static json_t *parse(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &err);
    cr_assert_not_null(j, "deviation JSON: %s: %s", err.text, text);
    return j;
}

/* ---------------------------------------------------------------------------------- */
/* The replay                                                                         */
/* ---------------------------------------------------------------------------------- */

typedef struct replay {
    const char *file;
    json_t *root;
    redisContext *r, *mon, *sub;
    int marker;
    char where[200];
    int checked;  /* our script calls compared */
    int deviated; /* of which with a deviation */
    bool fml;     /* a grouped multi-lock file: ARGV fields are checked against values */
} replay;

/* Whether a MONITOR line is the ECHO of marker; if not and out != NULL, the command a
 * script ran in DB joins out. */
static bool monitor_line(redisReply *rep, const char *marker, cmdlist *out)
{
    crdt_mon_cmd m;
    if (rep->type != REDIS_REPLY_STATUS || !crdt_mon_parse(rep->str, rep->len, &m))
        return false;
    bool done = m.argc == 2 && strcasecmp(m.argv[0], "echo") == 0 && strcmp(m.argv[1], marker) == 0;
    if (!done && out != NULL && m.db == DB && strcmp(m.source, "lua") == 0) {
        words *w = list_push(out);
        for (int i = 0; i < m.argc; i++)
            words_add(w, m.argv[i], m.argvlen[i]);
    }
    crdt_mon_cmd_free(&m);
    return done;
}

/* Whether a PSUBSCRIBE message is the one published on marker; if not and out != NULL,
 * its channel and payload join out. */
static bool sub_message(redisReply *rep, const char *marker, cmdlist *out)
{
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 4 ||
        strcmp(rep->element[0]->str, "pmessage") != 0)
        return false;
    redisReply *ch = rep->element[2], *pl = rep->element[3];
    bool done = strcmp(ch->str, marker) == 0;
    if (!done && out != NULL) {
        words *w = list_push(out);
        words_add(w, ch->str, ch->len);
        words_add(w, pl->str, pl->len);
    }
    return done;
}

/* Reads the MONITOR feed (monitor) or the PSUBSCRIBE feed up to a marker sent through
 * s->r (an ECHO, a PUBLISH); with out, the commands scripts ran in DB (in order) or the
 * messages (channel, payload). */
static void drain(replay *s, bool monitor, cmdlist *out)
{
    redisContext *feed = monitor ? s->mon : s->sub;
    char marker[64];
    snprintf(marker, sizeof marker, "crdt-r47-marker:%d", ++s->marker);
    freeReplyObject(monitor ? crdt_cmd(s->r, "ECHO %s", marker)
                            : crdt_cmd(s->r, "PUBLISH %s m", marker));
    for (bool done = false; !done;) {
        void *rv = NULL;
        cr_assert_eq(redisGetReply(feed, &rv), REDIS_OK, "%s: %s: %s", s->where,
                     monitor ? "MONITOR" : "PSUBSCRIBE", feed->errstr);
        done = monitor ? monitor_line(rv, marker, out) : sub_message(rv, marker, out);
        freeReplyObject(rv);
    }
}

static void drain_monitor(replay *s, cmdlist *out)
{
    drain(s, true, out);
}
static void drain_sub(replay *s, cmdlist *out)
{
    drain(s, false, out);
}

static void select_db(redisContext *c)
{
    redisReply *rep = crdt_cmd(c, "SELECT %d", DB);
    cr_assert_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

/* Writes the recorded state (the state_after of the step before) into DB. */
static void restore(replay *s, json_t *state)
{
    freeReplyObject(crdt_cmd(s->r, "FLUSHDB"));
    size_t i;
    json_t *k;
    json_array_foreach(state, i, k)
    {
        bytes key = subst(json_string_value(json_object_get(k, "key")));
        const char *type = json_string_value(json_object_get(k, "type"));
        json_t *value = json_object_get(k, "value");
        words w = {0};
        if (strcmp(type, "hash") == 0) {
            words_add(&w, "HSET", 4);
            words_add(&w, key.p, key.n);
            const char *f;
            json_t *v;
            json_object_foreach(value, f, v)
            {
                bytes bf = subst(f), bv = subst(json_string_value(v));
                words_add(&w, bf.p, bf.n);
                words_add(&w, bv.p, bv.n);
                b_free(&bf);
                b_free(&bv);
            }
        } else if (strcmp(type, "string") == 0) {
            bytes bv = subst(json_string_value(value));
            words_add(&w, "SET", 3);
            words_add(&w, key.p, key.n);
            words_add(&w, bv.p, bv.n);
            b_free(&bv);
        } else if (strcmp(type, "zset") == 0) {
            words_add(&w, "ZADD", 4);
            words_add(&w, key.p, key.n);
            size_t j;
            json_t *pair;
            json_array_foreach(value, j, pair)
            {
                bytes m = subst(json_string_value(json_array_get(pair, 0)));
                json_t *sc = json_array_get(pair, 1);
                bytes score = json_is_string(sc) ? subst(json_string_value(sc)) : (bytes){0};
                if (!json_is_string(sc)) {
                    char d[32];
                    snprintf(d, sizeof d, "%.17g", json_number_value(sc));
                    b_str(&score, d);
                }
                words_add(&w, score.p, score.n);
                words_add(&w, m.p, m.n);
                b_free(&m);
                b_free(&score);
            }
        } else if (strcmp(type, "list") == 0) {
            words_add(&w, "RPUSH", 5);
            words_add(&w, key.p, key.n);
            size_t j;
            json_t *el;
            json_array_foreach(value, j, el)
            {
                bytes be = subst(json_string_value(el));
                words_add(&w, be.p, be.n);
                b_free(&be);
            }
        } else {
            cr_assert_fail("%s: no restore for type %s", s->where, type);
        }
        redisReply *rep = run_words(s->r, &w);
        cr_assert_neq(rep->type, REDIS_REPLY_ERROR, "%s: restoring %s: %s", s->where, key.p,
                      rep->str);
        freeReplyObject(rep);
        words_free(&w);
        json_t *pttl = json_object_get(k, "pttl_observed");
        if (json_is_integer(pttl))
            freeReplyObject(crdt_cmd(s->r, "PEXPIRE %b %lld", key.p, key.n,
                                     (long long)json_integer_value(pttl)));
        b_free(&key);
    }
}

/* Whether a recorded script read a PTTL (its integers may then be timing-dependent). */
static bool reads_pttl(json_t *effects)
{
    size_t i;
    json_t *e;
    json_array_foreach(effects, i, e) if (strcasecmp(json_string_value(json_array_get(e, 0)),
                                                     "pttl") == 0) return true;
    return false;
}

/* The recording's error text as credisson's script words it: Redisson's assert adds
 * "user_script:N: " before the words and " script: <sha>, on @user_script:N." after. */
static void error_core(const char *text, char *out, size_t cap)
{
    const char *p = text;
    if (strncmp(p, "ERR user_script:", 16) == 0) {
        const char *colon = strchr(p + 16, ':');
        if (colon != NULL && colon[1] == ' ')
            p = colon + 2;
        else
            p = text + 4;
        snprintf(out, cap, "ERR %s", p);
    } else {
        snprintf(out, cap, "%s", p);
    }
    char *tail = strstr(out, " script: ");
    if (tail != NULL)
        *tail = '\0';
}

static void render(const redisReply *r, char *buf, size_t cap)
{
    switch (r->type) {
    case REDIS_REPLY_NIL:
        snprintf(buf, cap, "nil");
        return;
    case REDIS_REPLY_INTEGER:
        snprintf(buf, cap, "(integer) %lld", r->integer);
        return;
    case REDIS_REPLY_STRING:
        snprintf(buf, cap, "\"%s\"", show(r->str, r->len));
        return;
    case REDIS_REPLY_STATUS:
        snprintf(buf, cap, "status %s", r->str);
        return;
    case REDIS_REPLY_ERROR:
        snprintf(buf, cap, "(error) %s", r->str);
        return;
    default:
        snprintf(buf, cap, "(type %d)", r->type);
        return;
    }
}

/* The recorded reply rec (JSON) against ours; numeric: a bulk string holding a number and
 * an integer are the same reply. */
static void check_reply(replay *s, const char *label, json_t *rec, const redisReply *ours,
                        long long tol, bool numeric)
{
    char got[300];
    render(ours, got, sizeof got);
    if (json_is_null(rec)) {
        cr_expect_eq(ours->type, REDIS_REPLY_NIL, "%s %s: reply %s, recorded nil", s->where, label,
                     got);
    } else if (json_is_integer(rec) || (numeric && json_is_string(rec))) {
        long long want =
            json_is_integer(rec) ? json_integer_value(rec) : atoll(json_string_value(rec));
        long long have = 0;
        bool is_num =
            ours->type == REDIS_REPLY_INTEGER || (numeric && ours->type == REDIS_REPLY_STRING);
        if (is_num)
            have = ours->type == REDIS_REPLY_INTEGER ? ours->integer : atoll(ours->str);
        cr_expect(is_num && llabs(have - want) <= tol, "%s %s: reply %s, recorded %lld (+-%lld)",
                  s->where, label, got, want, tol);
    } else if (json_is_string(rec)) {
        bytes want = subst(json_string_value(rec));
        cr_expect(ours->type == REDIS_REPLY_STRING &&
                      same_word(ours->str, ours->len, want.p, want.n, tol),
                  "%s %s: reply %s, recorded \"%s\"", s->where, label, got, show(want.p, want.n));
        b_free(&want);
    } else if (json_object_get(rec, "error") != NULL) {
        char want[400];
        error_core(json_string_value(json_object_get(rec, "error")), want, sizeof want);
        cr_expect(ours->type == REDIS_REPLY_ERROR && strcmp(ours->str, want) == 0,
                  "%s %s: reply %s, recorded (error) %s", s->where, label, got, want);
    } else if (json_object_get(rec, "status") != NULL) {
        cr_expect(ours->type == REDIS_REPLY_STATUS &&
                      strcmp(ours->str, json_string_value(json_object_get(rec, "status"))) == 0,
                  "%s %s: reply %s", s->where, label, got);
    } else {
        cr_assert_fail("%s %s: a recorded reply this suite cannot read", s->where, label);
    }
}

static void dump_list(const char *title, const cmdlist *l)
{
    fprintf(stderr, "  %s:\n", title);
    for (int i = 0; i < l->n; i++) {
        fprintf(stderr, "    ");
        for (int j = 0; j < l->v[i].n; j++)
            fprintf(stderr, "%s%s", j ? " " : "", show(l->v[i].w[j].p, l->v[i].w[j].n));
        fprintf(stderr, "\n");
    }
}

/* Which words of a write may be PTTL-derived (tol applies): the TTL a PEXPIRE copies
 * (the rate limiter copies the config's PTTL), a fair deadline's ZADD score (now + the
 * holder's PTTL + wait); every other word is exact. */
static long long word_tol(const words *w, int j, long long tol)
{
    if (strcasecmp(w->w[0].p, "pexpire") == 0 && j == 2)
        return tol;
    if (strcasecmp(w->w[0].p, "zadd") == 0 && j == 2 && w->w[1].n > 22 &&
        memcmp(w->w[1].p, "redisson_lock_timeout:", 22) == 0)
        return tol;
    return 0;
}

static bool lists_equal(const cmdlist *a, const cmdlist *b, long long tol)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++) {
        if (a->v[i].n != b->v[i].n)
            return false;
        for (int j = 0; j < a->v[i].n; j++) {
            const bytes *x = &a->v[i].w[j], *y = &b->v[i].w[j];
            bool same = j == 0 ? (x->n == y->n && strncasecmp(x->p, y->p, x->n) == 0)
                               : same_word(x->p, x->n, y->p, y->n, word_tol(&b->v[i], j, tol));
            if (!same)
                return false;
        }
    }
    return true;
}

/* nrfair.acquire joining the queue: the deadline it wrote is now + reply + wait, exactly
 * (the README's relation; the reply itself is a PTTL and may differ from the recording's). */
static void check_fair_deadline(replay *s, const words *call, const redisReply *reply,
                                const cmdlist *writes)
{
    if (reply->type != REDIS_REPLY_INTEGER)
        return;
    /* call: EVALSHA sha 3 N queue deadlines lease owner wait now err */
    long long wait = atoll(call->w[8].p), now = atoll(call->w[9].p);
    for (int i = 0; i < writes->n; i++) {
        const words *w = &writes->v[i];
        if (w->n == 4 && strcasecmp(w->w[0].p, "zadd") == 0) {
            cr_expect_eq(atoll(w->w[2].p), now + reply->integer + wait,
                         "%s nrfair.acquire: deadline %s != now %lld + reply %lld + wait %lld",
                         s->where, w->w[2].p, now, reply->integer, wait);
        }
    }
}

/* A grouped multi-lock command's fields are the fields of the step's values (a set: Java
 * sends them in HashSet order). */
static void check_fields(replay *s, json_t *step, const char *label, const words *call, int first)
{
    json_t *values = json_object_get(step, "values");
    if (!json_is_array(values))
        return;
    size_t nv = json_array_size(values);
    cr_expect_eq((size_t)(call->n - first), nv, "%s %s: %d fields for %zu values", s->where, label,
                 call->n - first, nv);
    size_t i;
    json_t *v;
    json_array_foreach(values, i, v)
    {
        char f[CRD__FML_FIELD_SIZE];
        const char *text = json_string_value(v);
        crd__fml_field(text, strlen(text), f);
        bool found = false;
        for (int j = first; j < call->n && !found; j++)
            found = call->w[j].n == 22 && memcmp(call->w[j].p, f, 22) == 0;
        cr_expect(found, "%s %s: value \"%s\" hashes to %s, not among the recorded fields",
                  s->where, label, text, f);
    }
}

/* Runs one of our scripts in place of a recorded command c; compares. */
static void run_mine(replay *s, json_t *step, int ci, json_t *c, int mi)
{
    const char *label = mine[mi];
    const deviation *dev =
        deviation_at(s->file, (int)json_integer_value(json_object_get(step, "step")), ci);
    json_t *keys = json_object_get(c, "keys"), *argv = json_object_get(c, "argv");
    words call = {0};
    words_add(&call, "EVALSHA", 7);
    words_add(&call, mine_sha[mi], 40);
    char nk[16];
    snprintf(nk, sizeof nk, "%zu", json_array_size(keys));
    words_add(&call, nk, strlen(nk));
    size_t i;
    json_t *a;
    json_array_foreach(keys, i, a)
    {
        bytes b = subst(json_string_value(a));
        words_add(&call, b.p, b.n);
        b_free(&b);
    }
    json_array_foreach(argv, i, a)
    {
        bytes b = subst(json_string_value(a));
        words_add(&call, b.p, b.n);
        b_free(&b);
    }
    /* Only the step's own call has the step's values (a command of another client, or a
     * background renewal, belongs to another call). */
    const char *client = json_string_value(json_object_get(c, "client"));
    const char *caller = json_string_value(json_object_get(step, "client"));
    if (s->fml && client != NULL && caller != NULL && strcmp(client, caller) == 0) {
        /* Where the fields start in ARGV (after KEYS): acquire/try/renew 3, unlock 6, force 2,
         * is_locked 1, is_held 2. */
        int skip = strcmp(label, "fml.unlock") == 0              ? 6
                   : strcmp(label, "fml.force_unlock") == 0      ? 2
                   : strcmp(label, "fml.is_locked") == 0         ? 1
                   : strcmp(label, "fml.is_held_by_thread") == 0 ? 2
                                                                 : 3;
        check_fields(s, step, label, &call, 3 + (int)json_array_size(keys) + skip);
    }
    redisReply *reply = run_words(s->r, &call);
    cmdlist lua = {0}, ours = {0}, want = {0};
    drain_monitor(s, &lua);
    for (int k = 0; k < lua.n; k++)
        if (is_write(lua.v[k].w[0].p)) {
            words *w = list_push(&ours);
            for (int j = 0; j < lua.v[k].n; j++)
                words_add(w, lua.v[k].w[j].p, lua.v[k].w[j].n);
        }
    json_t *effects = json_object_get(c, "effects");
    long long tol = reads_pttl(effects) ? TOL_MS : 0;
    s->checked++;
    if (dev != NULL)
        s->deviated++;

    /* The reply. */
    json_t *rec_reply = json_object_get(c, "reply");
    json_t *dev_reply = dev != NULL && dev->reply != NULL ? parse(dev->reply) : NULL;
    json_t *want_reply = dev_reply != NULL ? dev_reply : rec_reply;
    if (strcmp(label, "fml.unlock") == 0 && json_is_integer(want_reply) &&
        json_integer_value(want_reply) == 1) {
        /* House rule (as rlock_unlock): 1 + the connections the message reached; here our
         * pattern subscriber, which sharded messages (SPUBLISH) do not reach. */
        bool sharded = strcmp(call.w[3 + 3 + 3].p, "SPUBLISH") == 0;
        json_t *n = json_integer(sharded ? 1 : 2);
        check_reply(s, label, n, reply, 0, false);
        json_decref(n);
    } else {
        /* Only the lock acquires answer a PTTL (the holder's, or one a fair wait is made of). */
        bool pttl_reply = strcmp(label, "nrlock.acquire") == 0 ||
                          strcmp(label, "spin.acquire") == 0 ||
                          strcmp(label, "nrfair.acquire") == 0;
        check_reply(s, label, want_reply, reply, pttl_reply ? tol : 0,
                    strcmp(label, "ratelimiter.available_permits") == 0);
    }
    /* The writes. */
    json_t *dev_writes = dev != NULL && dev->writes != NULL ? parse(dev->writes) : NULL;
    if (dev_writes != NULL) {
        json_t *wrapped = json_array();
        size_t k;
        json_t *e;
        json_array_foreach(dev_writes, k, e) json_array_append(wrapped, e);
        recorded_writes(wrapped, &want);
        json_decref(wrapped);
    } else {
        recorded_writes(effects, &want);
    }
    if (!lists_equal(&ours, &want, tol)) {
        fprintf(stderr, "%s %s: writes differ%s\n", s->where, label, dev ? " (deviation)" : "");
        dump_list("credisson", &ours);
        dump_list(dev ? "expected (deviation)" : "recorded", &want);
        cr_expect_fail("%s %s: the script's writes differ from the recording's", s->where, label);
    }
    if (strcmp(label, "nrfair.acquire") == 0)
        check_fair_deadline(s, &call, reply, &ours);
    json_decref(dev_reply);
    json_decref(dev_writes);
    freeReplyObject(reply);
    words_free(&call);
    list_free(&lua);
    list_free(&ours);
    list_free(&want);
}

/* A recorded command that is not ours: what it wrote is written (scripts), a DEL is sent,
 * anything else (reads, subscriptions, cluster probes) is skipped. */
static void run_other(replay *s, json_t *c)
{
    const char *cmd = json_string_value(json_object_get(c, "cmd"));
    if (json_object_get(c, "script") != NULL) {
        cmdlist w = {0};
        recorded_writes(json_object_get(c, "effects"), &w);
        for (int i = 0; i < w.n; i++)
            freeReplyObject(run_words(s->r, &w.v[i]));
        list_free(&w);
    } else if (strcasecmp(cmd, "DEL") == 0) {
        words w = {0};
        words_add(&w, "DEL", 3);
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(c, "args"), i, a)
        {
            bytes b = subst(json_string_value(a));
            words_add(&w, b.p, b.n);
            b_free(&b);
        }
        freeReplyObject(run_words(s->r, &w));
        words_free(&w);
    }
    drain_monitor(s, NULL);
}

static void check_published(replay *s, json_t *step, const deviation *dev)
{
    cmdlist got = {0}, want = {0};
    drain_sub(s, &got);
    json_t *rec = json_object_get(step, "published");
    json_t *dev_pub = dev != NULL && dev->published != NULL ? parse(dev->published) : NULL;
    if (rec == NULL && dev_pub == NULL) {
        /* Cluster files record none; their SPUBLISH reaches no pattern subscriber. */
        cr_expect_eq(got.n, 0, "%s: %d messages published in a cluster replay", s->where, got.n);
        list_free(&got);
        return;
    }
    size_t i;
    json_t *m;
    json_array_foreach(dev_pub != NULL ? dev_pub : rec, i, m)
    {
        words *w = list_push(&want);
        bytes ch = subst(json_string_value(json_is_array(m) ? json_array_get(m, 0)
                                                            : json_object_get(m, "channel")));
        bytes pl = subst(json_string_value(json_is_array(m) ? json_array_get(m, 1)
                                                            : json_object_get(m, "payload")));
        words_add(w, ch.p, ch.n);
        words_add(w, pl.p, pl.n);
        b_free(&ch);
        b_free(&pl);
    }
    if (!lists_equal(&got, &want, 0)) {
        fprintf(stderr, "%s: published messages differ\n", s->where);
        dump_list("credisson", &got);
        dump_list("recorded", &want);
        cr_expect_fail("%s: published messages differ from the recording's", s->where);
    }
    json_decref(dev_pub);
    list_free(&got);
    list_free(&want);
}

/* Applies a deviation's state edits to a copy of the recorded state. */
static json_t *expected_state(json_t *state, const deviation *dev)
{
    json_t *copy = json_deep_copy(state);
    if (dev == NULL || dev->state == NULL)
        return copy;
    json_t *edits = parse(dev->state);
    size_t i, j;
    json_t *e, *k;
    json_array_foreach(edits, i, e)
    {
        const char *key = json_string_value(json_object_get(e, "key"));
        json_array_foreach(copy, j, k)
        {
            if (strcmp(json_string_value(json_object_get(k, "key")), key) != 0)
                continue;
            if (json_is_true(json_object_get(e, "del"))) {
                json_array_remove(copy, j);
                break;
            }
            json_t *hdel = json_object_get(e, "hdel"), *zset = json_object_get(e, "zset");
            size_t f;
            json_t *field;
            if (hdel != NULL)
                json_array_foreach(hdel, f, field)
                    json_object_del(json_object_get(k, "value"), json_string_value(field));
            if (zset != NULL)
                json_object_set(k, "value", zset);
        }
    }
    json_decref(edits);
    return copy;
}

/* later: how much later in the step the recording read its state than we do. */
static void check_state(replay *s, json_t *state, const deviation *dev, long long tol,
                        long long later)
{
    json_t *want = expected_state(state, dev);
    /* Every key of DB. */
    redisReply *keys = crdt_cmd(s->r, "KEYS *");
    cr_assert_eq(keys->type, REDIS_REPLY_ARRAY);
    size_t nwant = json_array_size(want);
    cr_expect_eq(keys->elements, nwant, "%s: %zu keys, recorded %zu", s->where, keys->elements,
                 nwant);
    for (size_t i = 0; i < keys->elements; i++) {
        bool found = false;
        size_t j;
        json_t *k;
        json_array_foreach(want, j, k)
        {
            bytes kb = subst(json_string_value(json_object_get(k, "key")));
            found = found || (kb.n == keys->element[i]->len &&
                              memcmp(kb.p, keys->element[i]->str, kb.n) == 0);
            b_free(&kb);
        }
        cr_expect(found, "%s: key %s is not in the recorded state", s->where,
                  show(keys->element[i]->str, keys->element[i]->len));
    }
    freeReplyObject(keys);
    size_t j;
    json_t *k;
    json_array_foreach(want, j, k)
    {
        bytes key = subst(json_string_value(json_object_get(k, "key")));
        const char *type = json_string_value(json_object_get(k, "type"));
        json_t *value = json_object_get(k, "value");
        char t[16];
        crdt_cmd_str(s->r, t, sizeof t, "TYPE %b", key.p, key.n);
        if (strcmp(t, type) != 0) {
            cr_expect_fail("%s: key %s is a %s, recorded a %s", s->where, show(key.p, key.n), t,
                           type);
            b_free(&key);
            continue;
        }
        if (strcmp(type, "hash") == 0) {
            redisReply *h = crdt_cmd(s->r, "HGETALL %b", key.p, key.n);
            cr_expect_eq(h->elements / 2, json_object_size(value),
                         "%s: %s has %zu fields, recorded %zu", s->where, key.p, h->elements / 2,
                         json_object_size(value));
            const char *f;
            json_t *v;
            json_object_foreach(value, f, v)
            {
                bytes bf = subst(f), bv = subst(json_string_value(v));
                bool ok = false;
                for (size_t e = 0; e + 1 < h->elements; e += 2)
                    if (h->element[e]->len == bf.n && memcmp(h->element[e]->str, bf.p, bf.n) == 0)
                        ok = same_word(h->element[e + 1]->str, h->element[e + 1]->len, bv.p, bv.n,
                                       0);
                cr_expect(ok, "%s: %s field %s is not %s", s->where, key.p, show(bf.p, bf.n),
                          show(bv.p, bv.n));
                b_free(&bf);
                b_free(&bv);
            }
            freeReplyObject(h);
        } else if (strcmp(type, "string") == 0) {
            redisReply *g = crdt_cmd(s->r, "GET %b", key.p, key.n);
            bytes bv = subst(json_string_value(value));
            cr_expect(g->type == REDIS_REPLY_STRING && same_word(g->str, g->len, bv.p, bv.n, 0),
                      "%s: %s is %s, recorded %s", s->where, key.p,
                      g->type == REDIS_REPLY_STRING ? show(g->str, g->len) : "?", show(bv.p, bv.n));
            b_free(&bv);
            freeReplyObject(g);
        } else if (strcmp(type, "zset") == 0) {
            /* A fair queue's deadlines are made of a holder's PTTL; permit records' scores are
             * a caller's clock, exact. */
            bool fair_deadlines = key.n > 22 && memcmp(key.p, "redisson_lock_timeout:", 22) == 0;
            redisReply *z = crdt_cmd(s->r, "ZRANGE %b 0 -1 WITHSCORES", key.p, key.n);
            cr_expect_eq(z->elements / 2, json_array_size(value),
                         "%s: %s has %zu members, recorded %zu", s->where, show(key.p, key.n),
                         z->elements / 2, json_array_size(value));
            for (size_t e = 0; e + 1 < z->elements && e / 2 < json_array_size(value); e += 2) {
                json_t *pair = json_array_get(value, e / 2);
                bytes m = subst(json_string_value(json_array_get(pair, 0)));
                json_t *sc = json_array_get(pair, 1);
                bytes score = {0};
                if (json_is_string(sc)) {
                    score = subst(json_string_value(sc));
                } else {
                    char d[32];
                    snprintf(d, sizeof d, "%.17g", json_number_value(sc));
                    b_str(&score, d);
                }
                cr_expect(same_word(z->element[e]->str, z->element[e]->len, m.p, m.n, 0) &&
                              same_word(z->element[e + 1]->str, z->element[e + 1]->len, score.p,
                                        score.n, fair_deadlines ? tol : 0),
                          "%s: %s member %zu is %s %s, recorded %s %s", s->where,
                          show(key.p, key.n), e / 2, show(z->element[e]->str, z->element[e]->len),
                          z->element[e + 1]->str, show(m.p, m.n), score.p);
                b_free(&m);
                b_free(&score);
            }
            freeReplyObject(z);
        } else if (strcmp(type, "list") == 0) {
            redisReply *l = crdt_cmd(s->r, "LRANGE %b 0 -1", key.p, key.n);
            cr_expect_eq(l->elements, json_array_size(value), "%s: %s length", s->where, key.p);
            for (size_t e = 0; e < l->elements && e < json_array_size(value); e++) {
                bytes be = subst(json_string_value(json_array_get(value, e)));
                cr_expect(same_word(l->element[e]->str, l->element[e]->len, be.p, be.n, 0),
                          "%s: %s[%zu] is %s, recorded %s", s->where, key.p, e,
                          show(l->element[e]->str, l->element[e]->len), show(be.p, be.n));
                b_free(&be);
            }
            freeReplyObject(l);
        }
        long long pttl = crdt_pttl(s->r, key.p);
        json_t *obs = json_object_get(k, "pttl_observed");
        if (!json_is_integer(obs)) {
            cr_expect_eq(pttl, -1, "%s: %s has a TTL (%lld ms), recorded none", s->where,
                         show(key.p, key.n), pttl);
        } else {
            /* The recording read its state later than we do (when the next step began):
             * ours is larger by the difference. */
            long long rec = json_integer_value(obs) + later;
            cr_expect(pttl > 0 && llabs(pttl - rec) <= TOL_MS,
                      "%s: %s PTTL %lld, recorded %lld + %lld ms read later", s->where,
                      show(key.p, key.n), pttl, rec - later, later);
        }
        b_free(&key);
    }
    json_decref(want);
}

/* The offset of a step's last command from the step's start. */
static long long last_offset(json_t *commands, long long step_t)
{
    long long last = 0;
    size_t i;
    json_t *c;
    json_array_foreach(commands, i, c)
    {
        long long t = json_integer_value(json_object_get(c, "t_ms")) - step_t;
        last = t > last ? t : last;
    }
    return last;
}

/* Whether a key of DB runs out within ms. */
static bool expires_within(redisContext *r, long long ms)
{
    redisReply *keys = crdt_cmd(r, "KEYS *");
    bool soon = false;
    for (size_t i = 0; i < keys->elements && !soon; i++) {
        long long pttl = crdt_pttl(r, keys->element[i]->str);
        soon = pttl >= 0 && pttl <= ms;
    }
    freeReplyObject(keys);
    return soon;
}

static void sleep_until(int64_t t)
{
    int64_t now = crdt_now_ms();
    if (t > now)
        crdt_sleep_ms(t - now);
}

/* Replays the scenario file; returns the number of our script calls compared. */
static int replay_file(const char *file)
{
    replay s;
    memset(&s, 0, sizeof s);
    s.file = file;
    char path[600];
    snprintf(path, sizeof path, "%s/scenarios/%s", CRD_GOLDEN_DIR, file);
    json_error_t err;
    s.root = json_load_file(path, 0, &err);
    cr_assert_not_null(s.root, "%s: %s", path, err.text);
    s.fml = strstr(file, "fml") != NULL;
    s.r = crdt_redis();
    select_db(s.r);
    load_scripts(s.r);
    s.mon = crdt_redis();
    redisReply *rep = crdt_cmd(s.mon, "MONITOR");
    freeReplyObject(rep);
    s.sub = crdt_redis();
    rep = crdt_cmd(s.sub, "PSUBSCRIBE *");
    freeReplyObject(rep);
    json_t *empty = json_array();
    json_t *before = empty;
    size_t si;
    json_t *step;
    json_array_foreach(json_object_get(s.root, "steps"), si, step)
    {
        int no = (int)json_integer_value(json_object_get(step, "step"));
        json_t *commands = json_object_get(step, "commands");
        bool ours = false;
        long long tol = 0;
        const deviation *dev = NULL;
        size_t ci;
        json_t *c;
        json_array_foreach(commands, ci, c)
        {
            if (mine_index(json_string_value(json_object_get(c, "script"))) >= 0) {
                ours = true;
                if (reads_pttl(json_object_get(c, "effects")))
                    tol = TOL_MS;
                if (dev == NULL)
                    dev = deviation_at(file, no, (int)ci);
            }
        }
        json_t *after = json_object_get(step, "state_after");
        if (!ours) {
            before = after;
            continue;
        }
        snprintf(s.where, sizeof s.where, "%s step %d", file, no);
        restore(&s, before);
        drain_monitor(&s, NULL);
        drain_sub(&s, NULL);
        int64_t t0 = crdt_now_ms(), step_t = json_integer_value(json_object_get(step, "t_ms"));
        json_array_foreach(commands, ci, c)
        {
            sleep_until(t0 + json_integer_value(json_object_get(c, "t_ms")) - step_t);
            int mi = mine_index(json_string_value(json_object_get(c, "script")));
            snprintf(s.where, sizeof s.where, "%s step %d command %zu", file, no, ci);
            if (mi >= 0)
                run_mine(&s, step, (int)ci, c, mi);
            else
                run_other(&s, c);
        }
        snprintf(s.where, sizeof s.where, "%s step %d", file, no);
        check_published(&s, step, dev);
        /* The recording read the state just before the next step began (the last step: after
         * ~300 ms without a command); we read it now. */
        json_t *next = json_array_get(json_object_get(s.root, "steps"), si + 1);
        long long rec_at = next != NULL ? json_integer_value(json_object_get(next, "t_ms")) - step_t
                                        : last_offset(commands, step_t) + 300;
        /* A key that expired before the recording read its state must be gone here too. */
        if (expires_within(s.r, rec_at - (crdt_now_ms() - t0) + TOL_MS))
            sleep_until(t0 + rec_at);
        check_state(&s, after, dev, tol, rec_at - (crdt_now_ms() - t0));
        before = after;
    }
    freeReplyObject(crdt_cmd(s.r, "FLUSHDB"));
    json_decref(empty);
    json_decref(s.root);
    redisFree(s.sub);
    redisFree(s.mon);
    redisFree(s.r);
    cr_log_info("%s: %d script calls compared, %d of them deliberate deviations", file, s.checked,
                s.deviated);
    return s.checked;
}

/* Every deviation must have been met (a table entry whose step no longer runs our script
 * would silently excuse nothing). */
static void expect_calls(const char *file, int calls, int want)
{
    cr_expect_eq(calls, want, "%s: %d of our script calls compared, expected %d", file, calls,
                 want);
}

#define SCENARIO(name, calls)                                                                      \
    Test(scripts_r47, name##_matches_redisson, .timeout = 120)                                     \
    {                                                                                              \
        expect_calls(#name ".json", replay_file(#name ".json"), calls);                            \
    }

SCENARIO(r47_nrlock_a_reentry_rejected, 6)
SCENARIO(r47_nrlock_b_handoff_lease_force, 8)
SCENARIO(r47_nrfair_a_reentry_rejected, 5)
SCENARIO(r47_nrfair_b_queue_handoff, 7)
SCENARIO(r47_nrfair_c_lease_timeout_force, 6)
SCENARIO(r47_spinlock, 49)
SCENARIO(r47_fml_a_lock_unlock, 13)
SCENARIO(r47_fml_b_contention, 14)
SCENARIO(r47_fml_c_watchdog, 4)
SCENARIO(r47_fml_d_lease_expiry, 9)
SCENARIO(r47_fml_e_field_names, 22)
SCENARIO(r47_cluster_fml, 8)
SCENARIO(r47_rl_a_overall, 12)
SCENARIO(r47_rl_b_acquire_waits, 7)
SCENARIO(r47_rl_c_release_update, 13)
SCENARIO(r47_rl_d_per_client, 7)
SCENARIO(r47_rl_e_keepalive_expire, 7)
SCENARIO(r47_cluster_rl, 7)
SCENARIO(r47_sem_release_if_exists, 3)

/* Every deviation in the table names a step that runs one of our scripts. */
Test(scripts_r47, every_listed_deviation_is_a_call_of_our_scripts)
{
    for (size_t i = 0; i < sizeof deviations / sizeof deviations[0]; i++) {
        const deviation *d = &deviations[i];
        char path[600];
        snprintf(path, sizeof path, "%s/scenarios/%s", CRD_GOLDEN_DIR, d->file);
        json_error_t err;
        json_t *root = json_load_file(path, 0, &err);
        cr_assert_not_null(root, "%s: %s", path, err.text);
        json_t *step = json_array_get(json_object_get(root, "steps"), (size_t)d->step - 1);
        json_t *c = json_array_get(json_object_get(step, "commands"), (size_t)d->command);
        cr_expect(c != NULL && mine_index(json_string_value(json_object_get(c, "script"))) >= 0,
                  "deviation %zu (%s step %d command %d) is not a call of our scripts", i, d->file,
                  d->step, d->command);
        json_decref(root);
    }
}

/* ---------------------------------------------------------------------------------- */
/* credisson's own fixes, where the recordings show no case                           */
/* ---------------------------------------------------------------------------------- */

/* EVALSHA of our script for label with nkeys keys then the args (NULL-terminated). */
static redisReply *eval_label(redisContext *r, const char *label, int nkeys, ...)
{
    int mi = mine_index(label);
    cr_assert_geq(mi, 0);
    const char *argv[64];
    size_t lens[64];
    char nk[8];
    snprintf(nk, sizeof nk, "%d", nkeys);
    int n = 0;
    argv[n++] = "EVALSHA";
    argv[n++] = mine_sha[mi];
    argv[n++] = nk;
    va_list ap;
    va_start(ap, nkeys);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL && n < 64)
        argv[n++] = a;
    va_end(ap);
    for (int i = 0; i < n; i++)
        lens[i] = strlen(argv[i]);
    return crdt_cmd_argv(r, n, argv, lens);
}

static redisContext *fixes_setup(void)
{
    redisContext *r = crdt_redis();
    select_db(r);
    load_scripts(r);
    freeReplyObject(crdt_cmd(r, "FLUSHDB"));
    return r;
}

#define RL_KEYS "rl", "{rl}:value", "{rl}:value:u", "{rl}:permits", "{rl}:permits:u"

/* A permit record as Redisson packs it: 0x10, 16 bytes, permits (32-bit little-endian). */
static void record(redisContext *r, const char *zset, long long score, char id, unsigned permits)
{
    char m[21];
    m[0] = 16;
    memset(m + 1, id, 16);
    for (int i = 0; i < 4; i++)
        m[17 + i] = (char)(permits >> (8 * i));
    freeReplyObject(crdt_cmd(r, "ZADD %s %lld %b", zset, score, m, sizeof m));
}

static long long get_int(redisContext *r, const char *key)
{
    char buf[32];
    crdt_cmd_str(r, buf, sizeof buf, "GET %s", key);
    return atoll(buf);
}

Test(scripts_r47, a_rate_limiter_value_that_outlived_its_records_refills)
{
    /* Redisson 4.7: value 0, no records: the refusal's zrange finds nothing and the script
     * fails ("attempt to perform arithmetic on a nil value"); the permits never come back. */
    redisContext *r = fixes_setup();
    freeReplyObject(crdt_cmd(r, "HSET rl rate 3 interval 1000 type 0 keepAliveTime 0"));
    freeReplyObject(crdt_cmd(r, "SET {rl}:value 0"));
    redisReply *rep =
        eval_label(r, "ratelimiter.try_acquire", 5, RL_KEYS, "1", "5000", "aaaaaaaaaaaaaaaa", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_NIL, "granted");
    freeReplyObject(rep);
    cr_expect_eq(get_int(r, "{rl}:value"), 2);
    /* A partial loss: value 0 beside that live record of 1 (2 permits gone). Three are asked
     * for: 2 are free, the third when the record expires. */
    freeReplyObject(crdt_cmd(r, "SET {rl}:value 0"));
    rep =
        eval_label(r, "ratelimiter.try_acquire", 5, RL_KEYS, "3", "5100", "bbbbbbbbbbbbbbbb", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_INTEGER);
    cr_expect_eq(rep->integer, 3 + 1000 - (5100 - 5000));
    freeReplyObject(rep);
    cr_expect_eq(get_int(r, "{rl}:value"), 2, "repaired, nothing taken");
    /* A missing value beside a live record: the record's permits stay taken. */
    freeReplyObject(crdt_cmd(r, "DEL {rl}:value"));
    rep = eval_label(r, "ratelimiter.available_permits", 5, RL_KEYS, "5100", NULL);
    cr_expect_eq(rep->integer, 2, "rate 3 less the live record's 1 (Redisson: 3)");
    freeReplyObject(rep);
    /* A value above the rate (left by a bigger rate) is cut to the rate. */
    freeReplyObject(crdt_cmd(r, "SET {rl}:value 9"));
    rep = eval_label(r, "ratelimiter.available_permits", 5, RL_KEYS, "5200", NULL);
    cr_expect_eq(rep->integer, 3);
    freeReplyObject(rep);
    redisFree(r);
}

Test(scripts_r47, a_rate_limiter_release_is_not_counted_twice_and_waits_are_exact)
{
    redisContext *r = fixes_setup();
    freeReplyObject(crdt_cmd(r, "HSET rl rate 3 interval 1000 type 0 keepAliveTime 0"));
    freeReplyObject(crdt_cmd(r, "SET {rl}:value 0"));
    record(r, "{rl}:permits", 1000, 'a', 2);
    record(r, "{rl}:permits", 1100, 'b', 1);
    /* Three permits are needed: they are all back when the newer record expires. */
    redisReply *rep =
        eval_label(r, "ratelimiter.try_acquire", 5, RL_KEYS, "3", "1200", "cccccccccccccccc", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_INTEGER);
    cr_expect_eq(rep->integer, 3 + 1000 - (1200 - 1100), "Redisson counts from the oldest: 803");
    freeReplyObject(rep);
    /* release(1) gives back the newest record's permit. */
    freeReplyObject(eval_label(r, "ratelimiter.release", 5, RL_KEYS, "1", NULL));
    cr_expect_eq(get_int(r, "{rl}:value"), 1);
    cr_expect_eq(crdt_cmd_int(r, "ZCARD {rl}:permits"), 1);
    /* Both records' time passes: 1 + 2, and the released permit is not given back again. */
    rep = eval_label(r, "ratelimiter.available_permits", 5, RL_KEYS, "2101", NULL);
    cr_expect_eq(rep->integer, 3, "Redisson 4.7: 4, above the rate");
    freeReplyObject(rep);
    /* A release with no value key: the live records count before they give permits up. */
    freeReplyObject(crdt_cmd(r, "DEL {rl}:value {rl}:permits"));
    record(r, "{rl}:permits", 3000, 'd', 2);
    freeReplyObject(eval_label(r, "ratelimiter.release", 5, RL_KEYS, "1", NULL));
    cr_expect_eq(get_int(r, "{rl}:value"), 2, "1 free + 1 released; 1 still recorded");
    rep = eval_label(r, "ratelimiter.available_permits", 5, RL_KEYS, "4001", NULL);
    cr_expect_eq(rep->integer, 3, "the record's last permit comes back once");
    freeReplyObject(rep);
    redisFree(r);
}

#define GROUP_KEYS "g", "redisson_lock__channel:{g}"
#define LATCH "redisson_unlock_latch:{g}:r1"

Test(scripts_r47, a_group_unlock_never_frees_a_value_another_owner_holds)
{
    /* B took fb over A's lapsed entry with a Java client (A's sub-fields stay), and A's clock
     * is behind: A's expire_time still looks live to A. Redisson's unlock would decrement A's
     * stale count and delete fb, B's. */
    redisContext *r = fixes_setup();
    freeReplyObject(crdt_cmd(r, "HSET g fb B:1 fb:B:1:expire_time 9000 fb:B:1:lock_count 1 "
                                "fb:A:1:expire_time 2000 fb:A:1:lock_count 1"));
    freeReplyObject(crdt_cmd(r, "PEXPIRE g 30000"));
    redisReply *rep = eval_label(r, "fml.unlock", 3, GROUP_KEYS, LATCH, "A:1", "0", "30000",
                                 "PUBLISH", "5000", "1500", "fb", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_NIL);
    freeReplyObject(rep);
    char h[16];
    crdt_cmd_str(r, h, sizeof h, "HGET g fb");
    cr_expect_str_eq(h, "B:1");
    cr_expect_eq(crdt_exists(r, LATCH), 0, "nothing written, no latch");
    redisFree(r);
}

Test(scripts_r47, a_group_unlock_of_a_partly_lost_hold_frees_what_it_held_once)
{
    redisContext *r = fixes_setup();
    freeReplyObject(crdt_cmd(r, "HSET g fa A:1 fa:A:1:expire_time 9000 fa:A:1:lock_count 1"));
    freeReplyObject(crdt_cmd(r, "PEXPIRE g 30000"));
    redisReply *rep = eval_label(r, "fml.unlock", 3, GROUP_KEYS, LATCH, "A:1", "0", "30000",
                                 "PUBLISH", "5000", "1500", "fa", "fb", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_NIL, "fb was not held: the hold is lost");
    freeReplyObject(rep);
    cr_expect_eq(crdt_exists(r, "g"), 0, "fa, which A held, is free");
    /* A retry with the same request id replays "not held" and frees nothing twice. */
    freeReplyObject(crdt_cmd(r, "HSET g fa A:1 fa:A:1:expire_time 9000 fa:A:1:lock_count 1"));
    rep = eval_label(r, "fml.unlock", 3, GROUP_KEYS, LATCH, "A:1", "0", "30000", "PUBLISH", "5000",
                     "1500", "fa", "fb", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_INTEGER);
    cr_expect_eq(rep->integer, -1);
    freeReplyObject(rep);
    char c[8];
    crdt_cmd_str(r, c, sizeof c, "HGET g fa:A:1:lock_count");
    cr_expect_str_eq(c, "1");
    redisFree(r);
}

Test(scripts_r47, a_new_group_hold_counts_from_one_over_a_stale_count)
{
    /* A's old hold of fa lapsed and was taken over by a Java client, which released it and left
     * A's sub-fields: Redisson's acquire would make A's count 2, and one unlock would not free
     * fa. */
    redisContext *r = fixes_setup();
    freeReplyObject(crdt_cmd(r, "HSET g other x fa:A:1:expire_time 1000 fa:A:1:lock_count 1"));
    freeReplyObject(crdt_cmd(r, "PEXPIRE g 30000"));
    redisReply *rep = eval_label(r, "fml.acquire", 1, "g", "30000", "5000", "A:1", "fa", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_NIL);
    freeReplyObject(rep);
    cr_expect_eq(crdt_hget_int(r, "g", "fa:A:1:lock_count"), 1);
    cr_expect_eq(crdt_hget_int(r, "g", "fa:A:1:expire_time"), 35000);
    rep = eval_label(r, "fml.unlock", 3, GROUP_KEYS, LATCH, "A:1", "0", "30000", "PUBLISH", "5000",
                     "6000", "fa", NULL);
    cr_expect_eq(rep->type, REDIS_REPLY_INTEGER);
    cr_expect_geq(rep->integer, 1, "released");
    freeReplyObject(rep);
    cr_expect_eq(crdt_hget_int(r, "g", "fa:A:1:lock_count"), 0);
    redisFree(r);
}

Test(scripts_r47, a_group_renewal_with_a_lost_value_renews_nothing)
{
    redisContext *r = fixes_setup();
    freeReplyObject(crdt_cmd(r, "HSET g fa A:1 fa:A:1:expire_time 4000 fa:A:1:lock_count 1 "
                                "fb B:1 fb:B:1:expire_time 9000 fb:B:1:lock_count 1"));
    redisReply *rep = eval_label(r, "fml.renew", 1, "g", "3000", "2000", "A:1", "fa", "fb", NULL);
    cr_expect_eq(rep->integer, 0);
    freeReplyObject(rep);
    cr_expect_eq(crdt_hget_int(r, "g", "fa:A:1:expire_time"), 4000, "Redisson renews fa first");
    redisFree(r);
}

Test(scripts_r47, the_spin_force_unlock_deletes_only_a_lock)
{
    redisContext *r = fixes_setup();
    freeReplyObject(crdt_cmd(r, "SET sp data"));
    redisReply *rep = eval_label(r, "spin.force_unlock", 1, "sp", NULL);
    cr_expect(rep->type == REDIS_REPLY_STRING && strcmp(rep->str, "string") == 0);
    freeReplyObject(rep);
    cr_expect_eq(crdt_exists(r, "sp"), 1);
    redisFree(r);
}
