/*
 * test_golden_r47.c -- parity with the Redisson 4.7.0 recordings (tests/golden/scenarios/
 * r47_*.json, README-r47.md) through the library's API. Every scenario has a server of its
 * own (the recording's whole key space is compared), so the suite runs two at once.
 *
 * Each scenario is replayed step by step with credisson: every Java client is a crd_client
 * (its watchdog timeout the recording's lockWatchdogTimeout) with a trace recorder, every
 * Java thread an owner id of it, every call the matching credisson call (Java's lock(),
 * tryLock(wait, lease), unlock, forceUnlock, isLocked, isHeldByCurrentThread on every lock
 * kind, the rate limiter's trySetRate/setRate/updateRate/tryAcquire/acquire/
 * availablePermits/release/getConfig/delete, the semaphore's trySetPermits/acquire/release/
 * releaseIfExists/availablePermits); a call the recording marks async runs in a thread of
 * its own and is awaited where the recording says it completed; every step starts at the
 * recording's t_ms (leases, waits and keep-alives running out are what some steps record).
 * The server is flushed before each scenario, so names are the recording's own. After each
 * step this is compared with the recording:
 *   - the commands each client sent, in order: scripts by what they do (the recording's
 *     label mapped to our lua/ file of the same operation), KEYS and ARGV by position with
 *     the placeholders bound (<uuidX>, <tidX> to our ids, <reqidN> and <rndN> bound on first
 *     appearance, <T+N> within TOL_MS of the scenario's start + N on our clock, a grouped
 *     lock's value fields as a set, the unlock latch's TTL ours to choose), and the reply
 *     (integers above 10, which are PTTLs and waits, within TOL_MS); SUBSCRIBE per step;
 *   - the messages published (a PSUBSCRIBE * connection; the cluster files record none);
 *   - the whole key state after the step: keys, types, values (hash fields and zset
 *     members with the placeholders bound), TTLs within the recorded range;
 *   - the result of every call that returned in the step, as credisson reports it.
 * A NOSCRIPT answered by one EVAL is one script call (the recording's client had the
 * script cached). Runs of the same poll (a spin waiter's attempts) are compared as runs:
 * their number is timing, the README says so.
 *
 * Deliberate differences, asserted as credisson's behaviour (docs/KINDS-R47.md):
 *   - Q1: no DEL of the unlock latch after an unlock (Redisson 4.7 sends one): the latch
 *     expires on its own; latch keys in our state are not compared;
 *   - the cluster files' start-up commands (WAIT, WAITAOF, INFO, SCRIPT LOAD, the cluster
 *     probe EVAL) are Redisson's own;
 *   - a fair waiter's give-up (fair.acquire_failed) carries extra KEYS and ARGV (it wakes
 *     the new head when the lock is free);
 *   - the grouped unlock replies 1 + the connections its message reached, publishes only
 *     when it freed a value, and an unlock of a free group replies nil without a message;
 *     the grouped force-unlock answers the number freed, true for several values and no
 *     Lua error for a free one; isHeldByCurrentThread checks every value; a value taken
 *     over an expired holder's entry drops that holder's stale fields (r47_fml_d);
 *   - the rate limiter's available_permits always answers an integer; a tryAcquire whose
 *     wait is shorter than the server's delay returns at once (Redisson sleeps the wait);
 *   - steps credisson has no call for are played by the test's own connection writing what
 *     the recording shows: the deprecated setRate (#5487: credisson never sends it),
 *     expire(), remainTimeToLive(), RSemaphore.delete(); RGcra (r47_gcra_*) is not part of
 *     credisson (Redis 7.0 has no GCRA command) and its file is not replayed.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "calls.h"
#include "cluster.h"
#include "golden.h"
#include "harness.h"

#ifndef CRD_GOLDEN_DIR
#error "CRD_GOLDEN_DIR must be defined by the build"
#endif

#define TOL_MS 250
#define MAXC 3
#define MAXA 4
#define MAXO 12
#define MAXB 64

/* ---- the recording's script labels and our files -------------------------------------- */

/* Our scripts of crdt_golden_r47_labels, in its order (read once, by the first replay). */
static crdt_golden_script *files;

static void load_files(redisContext *r)
{
    if (files == NULL)
        files = calloc(crdt_golden_r47_nlabels, sizeof *files);
    cr_assert_not_null(files);
    crdt_golden_scripts_read(r, crdt_golden_r47_labels, crdt_golden_r47_nlabels, files);
}

/* Our file of a traced script call, or NULL. */
static const char *file_of(const crdt_trace_entry *e)
{
    if (e->argc < 3 ||
        (strcasecmp(e->argv[0], "EVALSHA") != 0 && strcasecmp(e->argv[0], "EVAL") != 0))
        return NULL;
    int i = crdt_golden_scripts_find(files, crdt_golden_r47_nlabels, e->argc, e->argv,
                                     e->argvlen);
    return i >= 0 ? crdt_golden_r47_labels[i].file : "?";
}

/* ---- deliberate differences (docs/KINDS-R47.md, interop/README.md) ------------------------ */

enum {
    DEV_NO_PUBLISH = 1, /* credisson publishes nothing where Redisson did */
    DEV_REPLY = 2,      /* the reply of `label` is credisson's own (asserted by `reply`) */
    DEV_RESULT = 4,     /* the call's status is `status` (and a value `value` when >= 0) */
    DEV_STATE = 8,      /* `keys` (comma-separated): ours is what `why` says, not recorded */
    DEV_MERGE = 16      /* the commands of steps from..to are compared together, at `to` */
};

typedef struct deviation {
    const char *file;
    int from, to; /* steps */
    int what;
    const char *label, *reply;
    crd_status status;
    int value;
    const char *keys;
    const char *why;
} deviation;

static const deviation deviations[] = {
    {"r47_fml_a_lock_unlock", 5, 5, DEV_NO_PUBLISH, NULL, NULL, CRD_OK, -1, NULL,
     "a partial unlock frees no value and publishes nothing (Redisson tests `if (hasDeleted)` "
     "with 0, true in Lua)"},
    {"r47_fml_a_lock_unlock", 12, 12, DEV_REPLY | DEV_RESULT, "fml.force_unlock", "(integer) 0",
     CRD_OK, 0, NULL,
     "a force-unlock of a free group frees nothing and says so (Redisson's stops with a Lua error)"},
    {"r47_fml_b_contention", 4, 4, DEV_REPLY | DEV_RESULT, "fml.is_held_by_thread", "(integer) 0",
     CRD_OK, 0, NULL,
     "B does not hold c: every value is checked (Redisson's skips the first, and says true)"},
    {"r47_fml_d_lease_expiry", 4, 8, DEV_STATE, NULL, NULL, CRD_OK, -1, "grp1",
     "a value taken over an expired entry drops that owner's stale fields: ours are the "
     "recorded fields less the stale ones (and the hash is gone once nothing is held)"},
    {"r47_nrfair_c_lease_timeout_force", 6, 6, DEV_REPLY | DEV_RESULT, "fair.unlock",
     "(integer) 2", CRD_LOCK_LOST, -1, NULL,
     "Q4: an unlock after a force-unlock answers 2 and CRD_LOCK_LOST (Redisson returns)"},
    {"r47_rl_c_release_update", 3, 7, DEV_STATE | DEV_REPLY | DEV_RESULT,
     "ratelimiter.available_permits", NULL, CRD_OK, -2, "{rl1}:permits,{rl1}:value",
     "release gives permits back once: it takes them out of the records (Redisson's records "
     "give them back a second time when they expire), so more are available afterwards"},
    {"r47_spinlock", 13, 14, DEV_MERGE | DEV_STATE, NULL, NULL, CRD_OK, -1, "sp1",
     "a spin waiter also tries when the holder's TTL ends (its PTTL shortens the back-off): A "
     "takes the lock when B's lease runs out, in step 13, not at its next back-off step"},
    {"r47_rl_d_per_client", 7, 7, DEV_STATE, NULL, NULL, CRD_OK, -1, "{rl1}:permits:<uuidA>",
     "release takes the permits out of the records (see r47_rl_c)"},
};

static const deviation *deviation_at(const char *file, int step, int what)
{
    for (size_t i = 0; i < sizeof deviations / sizeof deviations[0]; i++)
        if (strcmp(deviations[i].file, file) == 0 && step >= deviations[i].from &&
            step <= deviations[i].to && (deviations[i].what & what))
            return &deviations[i];
    return NULL;
}

/* ---- scenario state ---------------------------------------------------------------------- */

typedef struct obj {
    char kind[40], name[160];
    json_t *values; /* a grouped lock's */
    crd_lock *lock;
    crd_rwlock *rw;
    crd_rate_limiter *rl;
    crd_semaphore *sem;
} obj;

typedef struct gcl {
    char label[16], uuid_ph[16];
    crd_client *c;
    crdt_tracelog *tl;
    size_t seen;
    obj objs[MAXO];
    int nobjs;
    struct {
        char thread[8], ph[24];
        uint64_t owner;
    } thr[MAXA];
    int nthr;
} gcl;

struct scn;
typedef struct async_call {
    struct scn *s;
    gcl *g;
    json_t *step;
    int stepno;
    crd_status st;
    int64_t v;
    crdt_call call;
} async_call;

typedef struct scn {
    const char *file;
    json_t *root;
    crdt_golden_site site;
    redisContext *r, *sub; /* sub: standalone only */
    gcl cls[MAXC];
    int ncl;
    int64_t t0_mono, t0_epoch;
    char binds[MAXB][2][48]; /* placeholder -> bound bytes (hex for binary) */
    int nbinds;
    async_call *async[16];
    int nasync;
    char where[200];
} scn;

static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int64_t epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static gcl *client_of(scn *s, const char *label)
{
    for (int i = 0; i < s->ncl; i++)
        if (strcmp(s->cls[i].label, label) == 0)
            return &s->cls[i];
    return NULL;
}

/* The owner of a client's thread ("" for its only thread), made on first use. */
static uint64_t owner_of(gcl *g, const char *thread)
{
    const char *t = thread != NULL ? thread : "";
    for (int i = 0; i < g->nthr; i++)
        if (strcmp(g->thr[i].thread, t) == 0)
            return g->thr[i].owner;
    cr_assert_lt(g->nthr, MAXA);
    snprintf(g->thr[g->nthr].thread, sizeof g->thr[g->nthr].thread, "%s", t);
    /* <tidA> for java-A's only thread, <tidA1> for its thread A1 */
    snprintf(g->thr[g->nthr].ph, sizeof g->thr[g->nthr].ph, "<tid%s>",
             *t ? t : g->label + strlen("java-"));
    g->thr[g->nthr].owner = crd_owner_new();
    return g->thr[g->nthr++].owner;
}

/* ---- placeholders ---------------------------------------------------------------------------- */

/* Our bytes for a placeholder of uuids and owners, or NULL. */
static const char *fixed_value(scn *s, const char *ph, size_t n, char *buf, size_t cap)
{
    for (int i = 0; i < s->ncl; i++) {
        gcl *g = &s->cls[i];
        if (strlen(g->uuid_ph) == n && strncmp(ph, g->uuid_ph, n) == 0)
            return crd_client_id(g->c);
        for (int k = 0; k < g->nthr; k++)
            if (strlen(g->thr[k].ph) == n && strncmp(ph, g->thr[k].ph, n) == 0) {
                snprintf(buf, cap, "%llu", (unsigned long long)g->thr[k].owner);
                return buf;
            }
    }
    return NULL;
}

static const char *bound(scn *s, const char *ph, size_t n)
{
    for (int i = 0; i < s->nbinds; i++)
        if (strlen(s->binds[i][0]) == n && strncmp(s->binds[i][0], ph, n) == 0)
            return s->binds[i][1];
    return NULL;
}

static void bind(scn *s, const char *ph, size_t n, const char *val, size_t vn)
{
    cr_assert_lt(s->nbinds, MAXB);
    snprintf(s->binds[s->nbinds][0], 48, "%.*s", (int)n, ph);
    snprintf(s->binds[s->nbinds][1], 48, "%.*s", (int)vn, val);
    s->nbinds++;
}

static void hex_of(const char *p, size_t n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[(unsigned char)p[i] >> 4];
        out[2 * i + 1] = hx[(unsigned char)p[i] & 15];
    }
    out[2 * n] = '\0';
}

/* Whether observed bytes o match recorded text g: placeholders bound or checked; a
 * "bin:10<rndN>PPPPPPPP" member is 21 raw bytes. Bindings commit only on a match. */
static bool matches(scn *s, const char *g, const char *o, size_t olen)
{
    int saved = s->nbinds;
    if (strncmp(g, "bin:", 4) == 0) {
        /* 0x10, the 16 random bytes of <rndN>, the permits LE32 in hex */
        int n = 0, used = 0;
        char perm[9];
        if (sscanf(g, "bin:10<rnd%d>%8s%n", &n, perm, &used) != 2 || olen != 21 || o[0] != 0x10)
            return false;
        char ph[16], hex[40], ph_hex[24];
        snprintf(ph, sizeof ph, "<rnd%d>", n);
        hex_of(o + 1, 16, hex);
        hex_of(o + 17, 4, ph_hex);
        if (strcmp(ph_hex, perm) != 0)
            return false;
        const char *b = bound(s, ph, strlen(ph));
        if (b == NULL)
            bind(s, ph, strlen(ph), hex, 32);
        return b == NULL || strcmp(b, hex) == 0;
    }
    size_t oi = 0;
    for (const char *p = g; *p;) {
        if (*p == '<') {
            const char *end = strchr(p, '>');
            size_t n = end != NULL ? (size_t)(end - p) + 1 : 0;
            long long tn = 0;
            int used = 0;
            char buf[32];
            const char *fixed = n ? fixed_value(s, p, n, buf, sizeof buf) : NULL;
            if (fixed != NULL) {
                size_t fl = strlen(fixed);
                if (olen - oi < fl || memcmp(o + oi, fixed, fl) != 0)
                    goto no;
                oi += fl;
                p += n;
                continue;
            }
            if ((sscanf(p, "<T+%lld>%n", &tn, &used) == 1 ||
                 (sscanf(p, "<T-%lld>%n", &tn, &used) == 1 && (tn = -tn, 1))) &&
                used > 0) {
                size_t st = oi;
                while (oi < olen && ((o[oi] >= '0' && o[oi] <= '9') || (oi == st && o[oi] == '-')))
                    oi++;
                if (oi == st)
                    goto no;
                char num[32];
                snprintf(num, sizeof num, "%.*s", (int)(oi - st), o + st);
                long long v = atoll(num);
                if (llabs(v - (s->t0_epoch + tn)) > TOL_MS)
                    goto no;
                p += used;
                continue;
            }
            int k = 0;
            bool reqid = sscanf(p, "<reqid%d>%n", &k, &used) == 1 && used > 0;
            bool rnd = !reqid && sscanf(p, "<rnd%d>%n", &k, &used) == 1 && used > 0;
            if (reqid || rnd) {
                size_t w = reqid ? 32 : 16;
                if (olen - oi < w)
                    goto no;
                char val[40];
                if (reqid)
                    snprintf(val, sizeof val, "%.*s", 32, o + oi);
                else
                    hex_of(o + oi, 16, val);
                const char *b = bound(s, p, (size_t)used);
                if (b == NULL)
                    bind(s, p, (size_t)used, val, strlen(val));
                else if (strcmp(b, val) != 0)
                    goto no;
                oi += w;
                p += used;
                continue;
            }
        }
        if (oi >= olen || o[oi] != *p)
            goto no;
        oi++;
        p++;
    }
    if (oi == olen)
        return true;
no:
    s->nbinds = saved;
    return false;
}

/* ---- what a step's commands are ------------------------------------------------------------- */

/* A command of the recording that credisson deliberately does not send. */
static bool javas_own(json_t *c)
{
    const char *cmd = jstr(c, "cmd");
    json_t *args = json_object_get(c, "args");
    const char *a0 = json_is_array(args) ? json_string_value(json_array_get(args, 0)) : NULL;
    if (cmd == NULL)
        return true;
    if (strcasecmp(cmd, "DEL") == 0 && a0 != NULL && strncmp(a0, "redisson_unlock_latch:", 22) == 0)
        return true; /* Q1 */
    if (strcasecmp(cmd, "WAIT") == 0 || strcasecmp(cmd, "WAITAOF") == 0 ||
        strcasecmp(cmd, "INFO") == 0 || strcasecmp(cmd, "SCRIPT") == 0)
        return true; /* Redisson's cluster probes */
    if (strcasecmp(cmd, "EVAL") == 0 && jstr(c, "script") == NULL)
        return true; /* its cluster detection */
    return false;
}

static bool is_subscribe(const char *cmd)
{
    return cmd != NULL && (strcasecmp(cmd, "SUBSCRIBE") == 0 || strcasecmp(cmd, "SSUBSCRIBE") == 0);
}

static bool is_unsubscribe(const char *cmd)
{
    return cmd != NULL &&
           (strcasecmp(cmd, "UNSUBSCRIBE") == 0 || strcasecmp(cmd, "SUNSUBSCRIBE") == 0);
}

/* The watchdog's renewals run on its own schedule: compared apart (check_renewals). */
static bool is_renewal_label(const char *label)
{
    return label != NULL && (strcmp(label, "lock.renew") == 0 || strcmp(label, "fml.renew") == 0 ||
                             strcmp(label, "read.renew.v4") == 0);
}

static bool is_renewal_file(const char *f)
{
    return f != NULL && (strcmp(f, "lock_renew") == 0 || strcmp(f, "group_renew") == 0 ||
                         strcmp(f, "rw_read_renew") == 0);
}

/* Recorded script calls and plain commands of client g in a step, in order (their
 * (un)subscriptions apart). */
static int recorded_calls(json_t *step, const char *client, json_t **out, int max, int *nsub,
                          int n)
{
    json_t *cmds = json_object_get(step, "commands");
    for (size_t i = 0; i < json_array_size(cmds); i++) {
        json_t *c = json_array_get(cmds, i);
        if (strcmp(jstr(c, "client"), client) != 0 || javas_own(c) ||
            is_renewal_label(jstr(c, "script")))
            continue;
        if (is_subscribe(jstr(c, "cmd"))) {
            (*nsub)++;
            continue;
        }
        if (is_unsubscribe(jstr(c, "cmd")))
            continue;
        cr_assert_lt(n, max);
        out[n++] = c;
    }
    return n;
}

/* Our command connection's commands of a step (NOSCRIPT answers, PINGs apart). */
static int our_calls(gcl *g, int tag_from, int tag, crdt_trace_entry *out, int max, int *nsub)
{
    int n = 0;
    *nsub = 0;
    crdt_trace_entry e;
    for (size_t i = g->seen; crdt_tracelog_get(g->tl, i, &e); i++) {
        bool keep = e.tag >= tag_from && e.tag <= tag && strncmp(e.reply, "(error) NOSCRIPT", 16) != 0 &&
                    strcasecmp(e.argv[0], "PING") != 0 && strcasecmp(e.argv[0], "CLUSTER") != 0 &&
                    strcasecmp(e.argv[0], "PUBSUB") != 0 && strcasecmp(e.argv[0], "ROLE") != 0 &&
                    strcasecmp(e.argv[0], "SCRIPT") != 0 && /* a pipeline's NOSCRIPT recovery */
                    !is_renewal_file(file_of(&e));
        if (keep && e.subscriber) {
            *nsub += is_subscribe(e.argv[0]);
            keep = false;
        }
        if (keep && n < max)
            out[n++] = e;
        else
            crdt_trace_entry_free(&e);
    }
    return n;
}

/* The recorded reply as our trace renders it, and whether our reply o matches it. The
 * reentrant and grouped unlocks answer 1 + the connections their message reached (the
 * reentrant unlock's house rule): a recorded 1 is any count >= 1 there. */
static bool reply_matches(scn *s, json_t *rec, const char *o, const char *label)
{
    long long got = 0;
    if (label != NULL && (strcmp(label, "rlock.unlock") == 0 || strcmp(label, "fml.unlock") == 0) &&
        json_is_integer(rec) && json_integer_value(rec) == 1)
        return sscanf(o, "(integer) %lld", &got) == 1 && got >= 1;
    char want[400];
    json_t *err = json_is_object(rec) ? json_object_get(rec, "error") : NULL;
    if (err != NULL) {
        /* Redisson's assert: "ERR user_script:1: <words> script: ..."; ours: "ERR <words>". */
        const char *t = json_string_value(err);
        const char *w = strstr(t, "user_script:1: ");
        char words[200];
        snprintf(words, sizeof words, "%s", w != NULL ? w + 15 : t + (strncmp(t, "ERR ", 4) ? 0 : 4));
        char *cut = strstr(words, " script:");
        if (cut != NULL)
            *cut = '\0';
        return strncmp(o, "(error) ", 8) == 0 && strstr(o, words) != NULL;
    }
    if (json_is_integer(rec)) {
        long long v = json_integer_value(rec), ov = 0;
        if (sscanf(o, "(integer) %lld", &ov) != 1)
            return false;
        return v <= 10 ? ov == v : llabs(ov - v) <= TOL_MS;
    }
    if (json_is_string(rec)) {
        /* a bulk count ("3"): ours answers the integer */
        long long ov = 0;
        if (sscanf(o, "(integer) %lld", &ov) == 1)
            return ov == atoll(json_string_value(rec));
    }
    crdt_golden_reply_text(rec, want, sizeof want);
    (void)s;
    return strcmp(want, o) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* KEYS and ARGV of a recorded script call against ours: by position, the unlock latch's
 * TTL ours; a grouped lock's trailing fields as a set; a fair give-up may carry more. */
static bool args_match(scn *s, json_t *c, const crdt_trace_entry *e, char *why, size_t wl)
{
    const char *label = jstr(c, "script");
    json_t *keys = json_object_get(c, "keys"), *argv = json_object_get(c, "argv");
    int nk = atoi(e->argv[2]);
    size_t rk = json_array_size(keys), ra = json_array_size(argv);
    int na = e->argc - 3 - nk;
    bool extra = strcmp(label, "fair.acquire_failed") == 0;
    if ((size_t)nk < rk || (!extra && (size_t)nk != rk) || (size_t)na < ra ||
        (!extra && (size_t)na != ra)) {
        snprintf(why, wl, "%s: %d keys %d args, recorded %zu and %zu", label, nk, na, rk, ra);
        return false;
    }
    for (size_t i = 0; i < rk; i++)
        if (!matches(s, json_string_value(json_array_get(keys, i)), e->argv[3 + i],
                     e->argvlen[3 + i])) {
            snprintf(why, wl, "%s: KEYS[%zu] %s, recorded %s", label, i + 1, e->argv[3 + i],
                     json_string_value(json_array_get(keys, i)));
            return false;
        }
    bool group = strncmp(label, "fml.", 4) == 0;
    size_t fixed = ra;
    if (group) /* the fields after the fixed arguments: Java's HashSet order, ours sorted */
        fixed = strcmp(label, "fml.unlock") == 0 ? 6
                : strcmp(label, "fml.force_unlock") == 0 ? 2
                : strcmp(label, "fml.is_locked") == 0    ? 1
                : strcmp(label, "fml.is_held_by_thread") == 0 ? 2
                                                             : 3;
    for (size_t i = 0; i < fixed && i < ra; i++) {
        const char *g = json_string_value(json_array_get(argv, i));
        const char *o = e->argv[3 + nk + i];
        bool latch_ttl = (strcmp(label, "rlock.unlock") == 0 && i == 4) ||
                         (strcmp(label, "fair.unlock") == 0 && i == 5) ||
                         (strcmp(label, "spin.unlock") == 0 && i == 2) ||
                         (strcmp(label, "read.unlock") == 0 && i == 3) ||
                         (strcmp(label, "fml.unlock") == 0 && i == 4);
        if (latch_ttl ? atoll(o) < 1 : !matches(s, g, o, e->argvlen[3 + nk + i])) {
            snprintf(why, wl, "%s: ARGV[%zu] %s, recorded %s", label, i + 1, o, g);
            return false;
        }
    }
    if (group) {
        size_t nf = ra - fixed;
        if ((size_t)na - fixed != nf) {
            snprintf(why, wl, "%s: %zu fields, recorded %zu", label, (size_t)na - fixed, nf);
            return false;
        }
        const char *a[256], *b[256];
        for (size_t i = 0; i < nf && i < 256; i++) {
            a[i] = json_string_value(json_array_get(argv, fixed + i));
            b[i] = e->argv[3 + nk + fixed + i];
        }
        qsort(a, nf, sizeof *a, cmp_str);
        qsort(b, nf, sizeof *b, cmp_str);
        for (size_t i = 0; i < nf; i++)
            if (strcmp(a[i], b[i]) != 0) {
                snprintf(why, wl, "%s: field %s, recorded %s", label, b[i], a[i]);
                return false;
            }
    }
    return true;
}

/* A poll: a command whose number of repeats is timing (a spin waiter's attempts). */
static bool is_poll(json_t *c) { return strcmp(jstr(c, "script") ? jstr(c, "script") : "", "spin.acquire") == 0; }

/* Does our command e do what recorded command c does (same script or plain command)? */
static bool same_call(scn *s, json_t *c, const crdt_trace_entry *e, char *why, size_t wl)
{
    const char *label = jstr(c, "script");
    if (label != NULL) {
        const char *f = file_of(e), *want = crdt_golden_r47_file(label);
        if (f == NULL || want == NULL || strcmp(f, want) != 0) {
            snprintf(why, wl, "sent %s (%s), recorded %s", e->argv[0], f ? f : "-", label);
            return false;
        }
        return args_match(s, c, e, why, wl);
    }
    const char *cmd = jstr(c, "cmd");
    json_t *args = json_object_get(c, "args");
    if (strcasecmp(cmd, e->argv[0]) != 0 || (size_t)e->argc != json_array_size(args) + 1) {
        snprintf(why, wl, "sent %s, recorded %s", e->argv[0], cmd);
        return false;
    }
    for (int i = 1; i < e->argc; i++)
        if (!matches(s, json_string_value(json_array_get(args, (size_t)i - 1)), e->argv[i],
                     e->argvlen[i])) {
            snprintf(why, wl, "%s arg %d %s", cmd, i, e->argv[i]);
            return false;
        }
    return true;
}

/* Steps from..stepno's commands (from < stepno: a DEV_MERGE). */
static void check_commands(scn *s, json_t *steps, int from, int stepno)
{
    for (int k = 0; k < s->ncl; k++) {
        gcl *g = &s->cls[k];
        json_t *rec[64];
        crdt_trace_entry ours[128];
        int rsub = 0, osub = 0, nr = 0;
        for (int st = from; st <= stepno; st++) {
            int sub = 0;
            nr = recorded_calls(json_array_get(steps, (size_t)st - 1), g->label, rec, 64, &sub, nr);
            rsub += sub;
        }
        int no = our_calls(g, from, stepno, ours, 128, &osub);
        cr_expect_eq(osub, rsub, "%s %s: %d SUBSCRIBEs, recorded %d", s->where, g->label, osub,
                     rsub);
        int i = 0, j = 0;
        char why[400] = "";
        while (i < nr && j < no) {
            if (is_poll(rec[i])) {
                /* a run of polls: as many of ours as match, at least one; the last reply
                 * of the run must be the recorded run's last */
                int ri = i;
                while (ri + 1 < nr && is_poll(rec[ri + 1]))
                    ri++;
                int oj = j;
                cr_expect(same_call(s, rec[i], &ours[j], why, sizeof why), "%s %s: %s", s->where,
                          g->label, why);
                while (oj + 1 < no && same_call(s, rec[i], &ours[oj + 1], why, sizeof why))
                    oj++;
                /* the run ends the same way: taken (nil) or still held (a PTTL, which is
                 * timing) */
                bool rnil = json_is_null(json_object_get(rec[ri], "reply"));
                cr_expect(rnil ? strcmp(ours[oj].reply, "nil") == 0
                               : strncmp(ours[oj].reply, "(integer) ", 10) == 0,
                          "%s %s: the last poll answered %s", s->where, g->label, ours[oj].reply);
                i = ri + 1;
                j = oj + 1;
                continue;
            }
            /* A fair waiter that wakes in the holder's last millisecond hears 0 (its turn,
             * a TTL of 0) and tries again 4 ms later: one attempt more than Redisson's,
             * which woke a millisecond later. Timing, not protocol. */
            if (j + 1 < no && strcmp(ours[j].reply, "(integer) 0") == 0 &&
                file_of(&ours[j]) != NULL && strstr(file_of(&ours[j]), "fair_acquire") != NULL &&
                strcmp(file_of(&ours[j]), file_of(&ours[j + 1]) ? file_of(&ours[j + 1]) : "") == 0 &&
                !(json_is_integer(json_object_get(rec[i], "reply")) &&
                  json_integer_value(json_object_get(rec[i], "reply")) == 0)) {
                j++;
                continue;
            }
            cr_expect(same_call(s, rec[i], &ours[j], why, sizeof why), "%s %s command %d: %s",
                      s->where, g->label, i, why);
            int rstep = from; /* the recorded command's own step, for its deviation */
            for (int st = from; st <= stepno; st++) {
                json_t *sc = json_object_get(json_array_get(steps, (size_t)st - 1), "commands");
                for (size_t x = 0; x < json_array_size(sc); x++)
                    if (json_array_get(sc, x) == rec[i])
                        rstep = st;
            }
            const deviation *dv = deviation_at(s->file, rstep, DEV_REPLY);
            bool mine = dv != NULL && jstr(rec[i], "script") != NULL &&
                        strcmp(dv->label, jstr(rec[i], "script")) == 0;
            if (mine && dv->reply != NULL)
                cr_expect_str_eq(ours[j].reply, dv->reply, "%s %s: %s", s->where, g->label,
                                 dv->why);
            cr_expect(mine || reply_matches(s, json_object_get(rec[i], "reply"), ours[j].reply,
                                            jstr(rec[i], "script")),
                      "%s %s %s: reply %s, recorded %s", s->where, g->label,
                      jstr(rec[i], "script") ? jstr(rec[i], "script") : jstr(rec[i], "cmd"),
                      ours[j].reply, json_dumps(json_object_get(rec[i], "reply"), JSON_ENCODE_ANY));
            i++;
            j++;
        }
        if (i != nr || j != no) {
            for (int x = 0; x < no; x++)
                fprintf(stderr, "  ours[%d] %s %s -> %s\n", x, ours[x].argv[0],
                        file_of(&ours[x]) ? file_of(&ours[x]) : ours[x].argc > 1 ? ours[x].argv[1] : "",
                        ours[x].reply);
        }
        cr_expect_eq(i, nr, "%s %s: %d of %d recorded commands sent", s->where, g->label, i, nr);
        cr_expect_eq(j, no, "%s %s: %d commands sent, recorded %d", s->where, g->label, no, nr);
        for (int x = 0; x < no; x++)
            crdt_trace_entry_free(&ours[x]);
    }
}

/* Q2: credisson's read renewal names each hold (KEYS N, {N} and its owner field per hold)
 * where Redisson 4.x's read.renew.v4 names each lock once with a count of owners; the same
 * holds renewed, the same keys' TTLs set (the state after each step is compared). */
static bool read_renewal_matches(scn *s, json_t *c, const crdt_trace_entry *e)
{
    json_t *keys = json_object_get(c, "keys"), *argv = json_object_get(c, "argv");
    int nk = atoi(e->argv[2]);
    if (nk % 2 != 0 || json_array_size(keys) != 2 || e->argc - 3 - nk != nk / 2 + 1)
        return false;
    for (int h = 0; h < nk; h++)
        if (!matches(s, json_string_value(json_array_get(keys, (size_t)h % 2)), e->argv[3 + h],
                     e->argvlen[3 + h]))
            return false;
    if (strcmp(json_string_value(json_array_get(argv, 0)), e->argv[3 + nk]) != 0)
        return false;
    for (int h = 0; h < nk / 2; h++) { /* each of our fields is one of the recorded owners */
        bool found = false;
        for (size_t x = 2; x < json_array_size(argv) && !found; x++)
            found = matches(s, json_string_value(json_array_get(argv, x)), e->argv[4 + nk + h],
                            e->argvlen[4 + nk + h]);
        if (!found)
            return false;
    }
    return strstr(e->reply, "(integer) 0") == NULL && strncmp(e->reply, "[", 1) == 0;
}

/* The watchdog's renewals, on its own schedule: every one of ours does what a recorded one
 * of that client does (script, KEYS, ARGV with their clocks within TOL_MS, reply), and
 * their number over the scenario is the recording's, within one. */
static void check_renewals(scn *s, json_t *steps)
{
    for (int k = 0; k < s->ncl; k++) {
        gcl *g = &s->cls[k];
        json_t *rec[64];
        int nr = 0;
        for (size_t st = 0; st < json_array_size(steps); st++) {
            json_t *cmds = json_object_get(json_array_get(steps, st), "commands");
            for (size_t i = 0; i < json_array_size(cmds) && nr < 64; i++) {
                json_t *c = json_array_get(cmds, i);
                if (strcmp(jstr(c, "client"), g->label) == 0 && is_renewal_label(jstr(c, "script")))
                    rec[nr++] = c;
            }
        }
        int no = 0;
        crdt_trace_entry e;
        char why[400];
        for (size_t i = 0; crdt_tracelog_get(g->tl, i, &e); i++) {
            if (is_renewal_file(file_of(&e)) && strncmp(e.reply, "(error) NOSCRIPT", 16) != 0) {
                no++;
                bool found = false;
                for (int x = 0; x < nr && !found; x++)
                    found = strcmp(jstr(rec[x], "script"), "read.renew.v4") == 0
                                ? read_renewal_matches(s, rec[x], &e)
                                : same_call(s, rec[x], &e, why, sizeof why) &&
                                      reply_matches(s, json_object_get(rec[x], "reply"), e.reply,
                                                    NULL);
                cr_expect(found, "%s %s: renewal %s -> %s matches no recorded one (%s)", s->file,
                          g->label, file_of(&e), e.reply, nr ? why : "none recorded");
            }
            crdt_trace_entry_free(&e);
        }
        cr_expect(no >= nr - 1 && no <= nr + 1, "%s %s: %d renewals, recorded %d", s->file,
                  g->label, no, nr);
    }
}

/* ---- published messages ------------------------------------------------------------------------ */

static void check_published(scn *s, json_t *step)
{
    if (s->sub == NULL)
        return;
    /* the marker's own message ends what this step published */
    redisContext *p = crdt_redis_port(s->site.srv.port);
    freeReplyObject(crdt_cmd(p, "PUBLISH crdt-golden-r47-marker end"));
    redisFree(p);
    json_t *pub = json_object_get(step, "published");
    int stepno = (int)json_integer_value(json_object_get(step, "step"));
    if (deviation_at(s->file, stepno, DEV_NO_PUBLISH) != NULL)
        pub = NULL; /* credisson publishes nothing here */
    size_t want = json_array_size(pub), got = 0;
    for (;;) {
        redisReply *r = NULL;
        cr_assert_eq(redisGetReply(s->sub, (void **)&r), REDIS_OK, "%s: no marker", s->where);
        const char *ch = r->element[2]->str, *payload = r->element[3]->str;
        if (strcmp(ch, "crdt-golden-r47-marker") == 0) {
            freeReplyObject(r);
            break;
        }
        if (got < want) {
            json_t *m = json_array_get(pub, got);
            cr_expect(matches(s, jstr(m, "channel"), ch, strlen(ch)) &&
                          strcmp(jstr(m, "payload"), payload) == 0,
                      "%s: published %s %s, recorded %s %s", s->where, ch, payload,
                      jstr(m, "channel"), jstr(m, "payload"));
        } else {
            cr_expect(false, "%s: published %s %s, more than recorded", s->where, ch, payload);
        }
        got++;
        freeReplyObject(r);
    }
    cr_expect_eq(got, want, "%s: %zu messages published, recorded %zu", s->where, got, want);
}

/* ---- key state ---------------------------------------------------------------------------------- */

/* The node that holds key: the cluster files' one node has every slot, so s->r. */
static redisContext *node_for(scn *s, const char *key)
{
    (void)key;
    return s->r;
}

/* Whether key is one the deviation at this step lets differ. */
static bool deviant_key(scn *s, const deviation *dv, const char *key, size_t klen)
{
    if (dv == NULL)
        return false;
    char list[200];
    snprintf(list, sizeof list, "%s", dv->keys);
    for (char *save = NULL, *k = strtok_r(list, ",", &save); k != NULL; k = strtok_r(NULL, ",", &save))
        if (matches(s, k, key, klen))
            return true;
    return false;
}

static void check_state(scn *s, json_t *state, int stepno)
{
    const deviation *dv = deviation_at(s->file, stepno, DEV_STATE);
    /* our keys: every node's (one node in the cluster files) */
    redisReply *ks = redisCommand(s->r, "KEYS *");
    cr_assert(ks != NULL && ks->type == REDIS_REPLY_ARRAY);
    size_t nrec = json_array_size(state);
    bool *used = calloc(nrec + 1, 1);
    for (size_t i = 0; i < ks->elements; i++) {
        const char *key = ks->element[i]->str;
        size_t klen = ks->element[i]->len;
        if (strncmp(key, "redisson_unlock_latch:", 22) == 0)
            continue; /* Q1 */
        bool deviant = deviant_key(s, dv, key, klen);
        json_t *rec = NULL;
        for (size_t k = 0; k < nrec && rec == NULL; k++)
            if (!used[k] && matches(s, jstr(json_array_get(state, k), "key"), key, klen)) {
                rec = json_array_get(state, k);
                used[k] = true;
            }
        cr_expect(rec != NULL || deviant, "%s: key %s is not in the recording", s->where, key);
        if (rec == NULL || (deviant && strcmp(jstr(rec, "type"), "hash") != 0))
            continue; /* a deviation's string or zset: ours is checked by its own test */
        redisContext *r = node_for(s, key);
        char type[16];
        crdt_cmd_str(r, type, sizeof type, "TYPE %b", key, klen);
        cr_expect_str_eq(type, jstr(rec, "type"), "%s: %s", s->where, key);
        long long pttl = crdt_cmd_int(r, "PTTL %b", key, klen);
        json_t *pr = json_object_get(rec, "pttl");
        if (json_is_array(pr))
            cr_expect(pttl >= json_integer_value(json_array_get(pr, 0)) - 2 * TOL_MS - 300 &&
                          pttl <= json_integer_value(json_array_get(pr, 1)) + TOL_MS,
                      "%s: PTTL of %s is %lld, recorded [%lld, %lld]", s->where, key, pttl,
                      (long long)json_integer_value(json_array_get(pr, 0)),
                      (long long)json_integer_value(json_array_get(pr, 1)));
        else
            cr_expect_eq(pttl, -1, "%s: %s has a TTL of %lld", s->where, key, pttl);
        json_t *val = json_object_get(rec, "value");
        if (strcmp(type, "string") == 0) {
            redisReply *v = crdt_cmd(r, "GET %b", key, klen);
            cr_expect(matches(s, json_string_value(val), v->str, v->len), "%s: %s = %s", s->where,
                      key, v->str);
            freeReplyObject(v);
        } else if (strcmp(type, "hash") == 0) {
            redisReply *v = crdt_cmd(r, "HGETALL %b", key, klen);
            /* a deviant hash: ours is a subset of the recording's (stale fields dropped) */
            cr_expect(deviant ? v->elements / 2 <= json_object_size(val)
                              : v->elements / 2 == json_object_size(val),
                      "%s: %s has %zu fields, recorded %zu", s->where, key, v->elements / 2,
                      json_object_size(val));
            for (size_t f = 0; f + 1 < v->elements; f += 2) {
                const char *fk;
                json_t *fv;
                bool found = false;
                json_object_foreach(val, fk, fv)
                {
                    if (!found && matches(s, fk, v->element[f]->str, v->element[f]->len) &&
                        matches(s, json_string_value(fv), v->element[f + 1]->str,
                                v->element[f + 1]->len))
                        found = true;
                }
                cr_expect(found, "%s: %s field %s = %s is not recorded", s->where, key,
                          v->element[f]->str, v->element[f + 1]->str);
            }
            freeReplyObject(v);
        } else if (strcmp(type, "zset") == 0) {
            redisReply *v = crdt_cmd(r, "ZRANGE %b 0 -1 WITHSCORES", key, klen);
            cr_expect_eq(v->elements / 2, json_array_size(val), "%s: %s has %zu members",
                         s->where, key, v->elements / 2);
            for (size_t m = 0; m + 1 < v->elements && m / 2 < json_array_size(val); m += 2) {
                json_t *rm = json_array_get(val, m / 2);
                cr_expect(matches(s, json_string_value(json_array_get(rm, 0)), v->element[m]->str,
                                  v->element[m]->len) &&
                              matches(s, json_string_value(json_array_get(rm, 1)),
                                      v->element[m + 1]->str, v->element[m + 1]->len),
                          "%s: %s member %zu", s->where, key, m / 2);
            }
            freeReplyObject(v);
        } else if (strcmp(type, "list") == 0) {
            redisReply *v = crdt_cmd(r, "LRANGE %b 0 -1", key, klen);
            cr_expect_eq(v->elements, json_array_size(val), "%s: %s", s->where, key);
            for (size_t m = 0; m < v->elements && m < json_array_size(val); m++)
                cr_expect(matches(s, json_string_value(json_array_get(val, m)), v->element[m]->str,
                                  v->element[m]->len),
                          "%s: %s[%zu] = %s", s->where, key, m, v->element[m]->str);
            freeReplyObject(v);
        }
    }
    for (size_t k = 0; k < nrec; k++) {
        const char *rk = jstr(json_array_get(state, k), "key");
        bool dev_key = false;
        if (dv != NULL) {
            char list[200];
            snprintf(list, sizeof list, "%s", dv->keys);
            for (char *save = NULL, *t = strtok_r(list, ",", &save); t != NULL;
                 t = strtok_r(NULL, ",", &save))
                dev_key = dev_key || strcmp(t, rk) == 0;
        }
        cr_expect(used[k] || dev_key, "%s: recorded key %s is missing", s->where, rk);
    }
    free(used);
    freeReplyObject(ks);
}

/* ---- the calls -------------------------------------------------------------------------------- */

static int64_t arg_i(json_t *step, const char *k, int64_t dflt)
{
    json_t *v = json_object_get(json_object_get(step, "args"), k);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static obj *object_of(scn *s, gcl *g, json_t *step)
{
    const char *kind = jstr(step, "object"), *name = jstr(step, "name");
    json_t *values = json_object_get(step, "values");
    for (int i = 0; i < g->nobjs; i++)
        if (strcmp(g->objs[i].kind, kind) == 0 && strcmp(g->objs[i].name, name) == 0 &&
            (values == NULL || json_equal(values, g->objs[i].values)))
            return &g->objs[i];
    cr_assert_lt(g->nobjs, MAXO);
    obj *o = &g->objs[g->nobjs++];
    memset(o, 0, sizeof *o);
    snprintf(o->kind, sizeof o->kind, "%s", kind);
    snprintf(o->name, sizeof o->name, "%s", name);
    crd_status st = CRD_OK;
    if (strcmp(kind, "RLock") == 0)
        st = crd_lock_new(g->c, name, &o->lock);
    else if (strcmp(kind, "RNonReentrantLock") == 0)
        st = crd_nonreentrant_lock_new(g->c, name, &o->lock);
    else if (strcmp(kind, "RNonReentrantFairLock") == 0)
        st = crd_nonreentrant_fair_lock_new(g->c, name, &o->lock);
    else if (strcmp(kind, "RSpinLock") == 0)
        st = crd_spin_lock_new(g->c, name, &o->lock);
    else if (strcmp(kind, "RReadWriteLock.readLock") == 0) {
        st = crd_rwlock_new(g->c, name, &o->rw);
        o->lock = crd_rwlock_read(o->rw);
    } else if (strcmp(kind, "RFasterMultiLock") == 0) {
        o->values = json_incref(values);
        const char *vals[64];
        size_t n = json_array_size(values);
        for (size_t i = 0; i < n && i < 64; i++)
            vals[i] = json_string_value(json_array_get(values, i));
        st = crd_group_lock_new(g->c, name, vals, n, &o->lock);
    } else if (strcmp(kind, "RRateLimiter") == 0)
        st = crd_rate_limiter_new(g->c, name, &o->rl);
    else if (strcmp(kind, "RSemaphore") == 0)
        st = crd_semaphore_new(g->c, name, &o->sem);
    else
        cr_assert_fail("%s: object %s has no credisson counterpart", s->where, kind);
    cr_assert_eq(st, CRD_OK, "%s: %s %s: %s", s->where, kind, name, crd_client_errmsg(g->c));
    return o;
}

/* Plays a step credisson has no call for: the recorded writes, through our connection. */
static void play_writes(scn *s, json_t *step)
{
    json_t *cmds = json_object_get(step, "commands");
    for (size_t i = 0; i < json_array_size(cmds); i++) {
        json_t *c = json_array_get(cmds, i);
        json_t *eff = json_object_get(c, "effects");
        json_t *list = eff != NULL ? eff : NULL;
        if (list == NULL && jstr(c, "script") == NULL) {
            /* a plain command (DEL, PTTL): run it as recorded */
            json_t *args = json_object_get(c, "args");
            const char *argv[16];
            size_t lens[16];
            char bufs[16][200];
            int n = 0;
            argv[n] = jstr(c, "cmd");
            lens[n] = strlen(argv[n]);
            n++;
            for (size_t k = 0; k < json_array_size(args) && n < 16; k++, n++) {
                snprintf(bufs[n], sizeof bufs[n], "%s", json_string_value(json_array_get(args, k)));
                argv[n] = bufs[n];
                lens[n] = strlen(bufs[n]);
            }
            freeReplyObject(crdt_cmd_argv(node_for(s, argv[1]), n, argv, lens));
            continue;
        }
        for (size_t k = 0; k < json_array_size(list); k++) {
            json_t *w = json_array_get(list, k);
            const char *cmd = json_string_value(json_array_get(w, 0));
            static const char *const writes[] = {"hset", "set", "del", "pexpire", "hsetnx",
                                                 "zadd", "decrby", "incrby"};
            bool write = false;
            for (size_t x = 0; x < sizeof writes / sizeof writes[0]; x++)
                write = write || strcasecmp(cmd, writes[x]) == 0;
            if (!write)
                continue;
            const char *argv[16];
            size_t lens[16];
            int n = 0;
            for (size_t a = 0; a < json_array_size(w) && n < 16; a++, n++) {
                argv[n] = json_string_value(json_array_get(w, a));
                lens[n] = strlen(argv[n]);
            }
            freeReplyObject(crdt_cmd_argv(node_for(s, argv[1]), n, argv, lens));
        }
    }
}

static bool bool_result(json_t *step, bool *v)
{
    json_t *r = json_object_get(json_object_get(step, "result"), "returned");
    if (!json_is_boolean(r))
        return false;
    *v = json_is_true(r);
    return true;
}


/* Runs the call of step on client g (its thread's owner), returns its status; *v gets a
 * value (a bool as 0/1, a count). */
static crd_status do_call(scn *s, gcl *g, json_t *step, int64_t *v)
{
    const char *call = jstr(step, "call");
    obj *o = object_of(s, g, step);
    uint64_t owner = owner_of(g, jstr(step, "thread"));
    *v = 0;
    if (o->lock != NULL) {
        crd_lock *l = o->lock;
        int64_t wait = arg_i(step, "waitTime", -1), lease = arg_i(step, "leaseTime", -1);
        if (strcmp(call, "lock") == 0 || strcmp(call, "lock(leaseTime)") == 0)
            return crd_lock_acquire_owner(l, owner, CRD_WAIT_FOREVER, lease);
        if (strcmp(call, "tryLock()") == 0)
            return crd_lock_acquire_owner(l, owner, 0, CRD_LEASE_WATCHDOG);
        if (strncmp(call, "tryLock(waitTime", 16) == 0)
            return crd_lock_acquire_owner(l, owner, wait, lease);
        if (strcmp(call, "unlock") == 0)
            return crd_lock_release_owner(l, owner);
        bool b = false;
        crd_status st = CRD_INVALID_ARGUMENT;
        if (strcmp(call, "forceUnlock") == 0)
            st = crd_lock_force_unlock(l, &b);
        else if (strcmp(call, "isLocked") == 0)
            st = crd_lock_is_locked(l, &b);
        else if (strcmp(call, "isHeldByCurrentThread") == 0)
            st = crd_lock_is_held_owner(l, owner, &b);
        else
            cr_assert_fail("%s: %s.%s", s->where, o->kind, call);
        *v = b;
        return st;
    }
    if (o->rl != NULL) {
        crd_rate_limiter *rl = o->rl;
        const char *mode = jstr(json_object_get(step, "args"), "mode");
        crd_rate_config cfg = {mode != NULL && strcmp(mode, "PER_CLIENT") == 0 ? CRD_RATE_PER_CLIENT
                                                                              : CRD_RATE_OVERALL,
                               arg_i(step, "rate", 0), arg_i(step, "rateInterval", 0),
                               arg_i(step, "keepAliveTime", 0)};
        json_t *ks = json_object_get(json_object_get(step, "args"), "keepState");
        bool keep = ks == NULL || json_is_true(ks), b = false;
        int64_t permits = arg_i(step, "permits", 1), timeout = arg_i(step, "timeout", 0);
        crd_status st = CRD_INVALID_ARGUMENT;
        if (strncmp(call, "trySetRate", 10) == 0)
            st = crd_rate_limiter_try_set_rate(rl, &cfg, &b);
        else if (strcmp(call, "setRate(RateLimiterArgs)") == 0)
            st = crd_rate_limiter_set_rate(rl, &cfg, keep);
        else if (strcmp(call, "updateRate(RateLimiterArgs)") == 0)
            st = crd_rate_limiter_update_rate(rl, &cfg, keep, &b);
        else if (strcmp(call, "tryAcquire()") == 0 || strcmp(call, "tryAcquire(permits)") == 0)
            st = crd_rate_limiter_acquire(rl, permits, 0);
        else if (strcmp(call, "tryAcquire(permits,timeout)") == 0)
            st = crd_rate_limiter_acquire(rl, permits, timeout);
        else if (strcmp(call, "acquire()") == 0)
            st = crd_rate_limiter_acquire(rl, 1, CRD_WAIT_FOREVER);
        else if (strcmp(call, "availablePermits") == 0)
            st = crd_rate_limiter_available(rl, v);
        else if (strcmp(call, "release(permits)") == 0)
            st = crd_rate_limiter_release(rl, permits);
        else if (strcmp(call, "delete") == 0)
            st = crd_rate_limiter_delete(rl, &b);
        else if (strcmp(call, "getConfig") == 0) {
            crd_rate_config got;
            st = crd_rate_limiter_get_rate(rl, &got, &b);
            json_t *want = json_object_get(json_object_get(step, "result"), "returned");
            cr_expect(b && got.rate == json_integer_value(json_object_get(want, "rate")) &&
                          got.interval_ms == json_integer_value(json_object_get(want, "rateInterval")),
                      "%s: getConfig", s->where);
        } else
            cr_assert_fail("%s: RRateLimiter.%s", s->where, call);
        if (strcmp(call, "availablePermits") != 0)
            *v = b;
        return st;
    }
    crd_semaphore *sem = o->sem;
    bool b = false;
    crd_status st = CRD_INVALID_ARGUMENT;
    int64_t permits = arg_i(step, "permits", 1);
    if (strcmp(call, "trySetPermits(permits)") == 0)
        st = crd_semaphore_try_set_permits(sem, permits, 0, &b);
    else if (strcmp(call, "releaseIfExists(permits)") == 0)
        st = crd_semaphore_release_if_exists(sem, permits, &b);
    else if (strcmp(call, "release(permits)") == 0)
        st = crd_semaphore_release(sem, permits);
    else if (strcmp(call, "acquire(permits)") == 0)
        st = crd_semaphore_acquire(sem, permits, CRD_WAIT_FOREVER);
    else if (strcmp(call, "availablePermits") == 0)
        st = crd_semaphore_available(sem, v);
    else
        cr_assert_fail("%s: RSemaphore.%s", s->where, call);
    if (strcmp(call, "availablePermits") != 0)
        *v = b;
    return st;
}

/* Whether the step is one credisson has no call for (the test plays its writes). */
static bool played_raw(json_t *step)
{
    const char *call = jstr(step, "call"), *kind = jstr(step, "object");
    return kind != NULL && ((strcmp(kind, "RRateLimiter") == 0 &&
                             (strcmp(call, "expire(timeToLive)") == 0 ||
                              strcmp(call, "remainTimeToLive") == 0 ||
                              strcmp(call, "setRate(mode,rate,rateInterval)") == 0)) ||
                            (strcmp(kind, "RSemaphore") == 0 && strcmp(call, "delete") == 0));
}

/* What credisson answers where Redisson answered res: its status, and the value. */
static void check_result(scn *s, json_t *step, crd_status st, int64_t v, gcl *g)
{
    const char *call = jstr(step, "call"), *kind = jstr(step, "object");
    int stepno = (int)json_integer_value(json_object_get(step, "step"));
    const deviation *dv = deviation_at(s->file, stepno, DEV_RESULT);
    if (dv != NULL && (dv->label == NULL || strcmp(call, "availablePermits") != 0 ||
                       strcmp(dv->label, "ratelimiter.available_permits") == 0)) {
        cr_expect_eq(st, dv->status, "%s: %s (%s)", s->where, crd_strerror(st), dv->why);
        json_t *ret = json_object_get(json_object_get(step, "result"), "returned");
        if (dv->value >= 0)
            cr_expect_eq(v, dv->value, "%s: %s", s->where, dv->why);
        else if (dv->value == -2 && json_is_integer(ret)) /* at least Redisson's */
            cr_expect_geq(v, json_integer_value(ret), "%s: %s", s->where, dv->why);
        return;
    }
    json_t *res = json_object_get(step, "result");
    json_t *exc = json_object_get(res, "exception");
    json_t *ret = json_object_get(res, "returned");
    bool group = strcmp(kind, "RFasterMultiLock") == 0;
    const char *msg = crd_client_errmsg(g->c);
    if (exc != NULL) {
        const char *e = json_string_value(exc), *m = jstr(res, "message");
        if (strstr(m, "non-reentrant") != NULL)
            cr_expect_eq(st, CRD_DEADLOCK, "%s: %s (%s)", s->where, crd_strerror(st), msg);
        else if (strstr(e, "IllegalMonitorState") != NULL)
            cr_expect(st == CRD_NOT_OWNER || st == CRD_LOCK_LOST, "%s: %s", s->where,
                      crd_strerror(st));
        else if (strstr(m, "not initialized") != NULL || strstr(m, "cannot exceed") != NULL ||
                 strstr(e, "IllegalArgument") != NULL)
            cr_expect_eq(st, CRD_INVALID_ARGUMENT, "%s: %s", s->where, crd_strerror(st));
        else if (group && strcmp(call, "forceUnlock") == 0)
            /* Redisson's fails on a free value; credisson's frees what is held */
            cr_expect(st == CRD_OK, "%s: %s", s->where, crd_strerror(st));
        else
            cr_expect(false, "%s: recorded %s, no rule for it", s->where, e);
        return;
    }
    bool b = false;
    if (bool_result(step, &b)) {
        bool acquire = strncmp(call, "tryLock", 7) == 0 || strncmp(call, "tryAcquire", 10) == 0;
        if (acquire) {
            crd_status want = b ? CRD_OK : strstr(call, "()") || strstr(call, "(permits)") ? CRD_BUSY
                                                                                           : CRD_TIMEOUT;
            cr_expect_eq(st, want, "%s: %s, recorded %s (%s)", s->where, crd_strerror(st),
                         b ? "true" : "false", msg);
        } else if (group && strcmp(call, "forceUnlock") == 0) {
            cr_expect_eq(st, CRD_OK);
            cr_expect(v == 1, "%s: credisson says it freed values (Redisson's answers false)",
                      s->where);
        } else if (group && strcmp(call, "isHeldByCurrentThread") == 0) {
            cr_expect_eq(st, CRD_OK);
            (void)0; /* Redisson skips the first value; ours checks each: asserted below */
        } else {
            cr_expect_eq(st, CRD_OK, "%s: %s (%s)", s->where, crd_strerror(st), msg);
            cr_expect_eq(v, b, "%s: %s answered %lld, recorded %s", s->where, call, (long long)v,
                         b ? "true" : "false");
        }
        return;
    }
    cr_expect_eq(st, CRD_OK, "%s: %s (%s)", s->where, crd_strerror(st), msg);
    if (json_is_integer(ret))
        cr_expect_eq(v, json_integer_value(ret), "%s: %s answered %lld, recorded %lld", s->where,
                     call, (long long)v, (long long)json_integer_value(ret));
}

static void async_main(void *arg)
{
    async_call *a = arg;
    a->st = do_call(a->s, a->g, a->step, &a->v);
}

/* ---- the scenario ------------------------------------------------------------------------- */

static void open_scenario(scn *s, const char *file)
{
    memset(s, 0, sizeof *s);
    s->file = file;
    char name[600];
    snprintf(name, sizeof name, "%s.json", file);
    s->root = crdt_golden_scenario(name);
    crd_options o;
    s->r = crdt_golden_site_start(&s->site, strncmp(file, "r47_cluster_", 12) == 0);
    if (!s->site.cluster) {
        s->sub = crdt_redis_port(s->site.srv.port);
        freeReplyObject(crdt_cmd(s->sub, "PSUBSCRIBE *"));
        struct timeval tv = {5, 0};
        redisSetTimeout(s->sub, tv);
    }
    load_files(s->r);
    json_t *cfg = json_object_get(s->root, "config");
    json_t *clients = json_object_get(s->root, "clients");
    const char *label;
    json_t *cj;
    json_object_foreach(clients, label, cj)
    {
        cr_assert_lt(s->ncl, MAXC);
        gcl *g = &s->cls[s->ncl++];
        snprintf(g->label, sizeof g->label, "%s", label);
        snprintf(g->uuid_ph, sizeof g->uuid_ph, "%s", jstr(cj, "client_id"));
        g->tl = crdt_tracelog_new();
        crdt_golden_site_options(&s->site, &o);
        o.watchdog_timeout_ms = json_integer_value(json_object_get(cfg, "lockWatchdogTimeout"));
        o.local_fifo = false; /* each Java thread asks Redis itself, as recorded */
        o.release_defer_ms = 0;
        crdt_tracelog_attach(g->tl, &o);
        g->c = crdt_client_opts(&o);
        crdt_tracelog_set_tag(g->tl, 0);
    }
    s->t0_mono = crdt_now_ms();
    s->t0_epoch = epoch_ms();
}

static void close_scenario(scn *s)
{
    for (int i = 0; i < s->nasync; i++) {
        cr_assert(crdt_call_wait(&s->async[i]->call, 20000), "async call of step %d",
                  s->async[i]->stepno);
        crdt_call_join(&s->async[i]->call);
        free(s->async[i]);
    }
    for (int i = 0; i < s->ncl; i++) {
        gcl *g = &s->cls[i];
        for (int k = 0; k < g->nobjs; k++) {
            obj *o = &g->objs[k];
            if (o->rw != NULL)
                crd_rwlock_free(o->rw);
            else
                crd_lock_free(o->lock);
            crd_rate_limiter_free(o->rl);
            crd_semaphore_free(o->sem);
            json_decref(o->values);
        }
        crd_client_free(g->c);
        crdt_tracelog_free(g->tl);
    }
    redisFree(s->r);
    if (s->sub != NULL)
        redisFree(s->sub);
    crdt_golden_site_stop(&s->site);
    json_decref(s->root);
}

/* What step i's calls sent, answered and published, and the state after it: checked just
 * before the next step begins (the recording's commands of a step are those of its whole
 * interval, an async waiter's included). */
static void check_step(scn *s, json_t *steps, size_t i)
{
    json_t *step = json_array_get(steps, i);
    int stepno = (int)json_integer_value(json_object_get(step, "step"));
    snprintf(s->where, sizeof s->where, "%s step %d (%s %s)", s->file, stepno,
             jstr(step, "client") ? jstr(step, "client") : "",
             jstr(step, "call") ? jstr(step, "call") : "");
    const deviation *merge = deviation_at(s->file, stepno, DEV_MERGE);
    if (merge == NULL && !played_raw(step))
        check_commands(s, steps, stepno, stepno);
    else if (merge != NULL && stepno == merge->to)
        check_commands(s, steps, merge->from, stepno);
    check_published(s, step);
    check_state(s, json_object_get(step, "state_after"), stepno);
}

/* Step i's calls, when it started an async call: what the recording says every client
 * sent in it (SUBSCRIBEs and commands; a run of polls counts once) has been sent by ours.
 * A thread started for the call sends its first commands a little after the step began;
 * under a sanitizer or a loaded machine that can pass the recording's interval. */
typedef struct step_wait {
    scn *s;
    json_t *steps;
    int from, to;
} step_wait;

static bool step_sent(void *arg)
{
    step_wait *w = arg;
    for (int k = 0; k < w->s->ncl; k++) {
        gcl *g = &w->s->cls[k];
        json_t *rec[64];
        int rsub = 0, nr = 0, need = 0, osub = 0;
        for (int st = w->from; st <= w->to; st++) {
            int sub = 0;
            nr = recorded_calls(json_array_get(w->steps, (size_t)st - 1), g->label, rec, 64, &sub,
                                nr);
            rsub += sub;
        }
        for (int i = 0; i < nr; i++)
            need += !is_poll(rec[i]) || i == 0 || !is_poll(rec[i - 1]);
        crdt_trace_entry ours[128];
        int no = our_calls(g, w->from, w->to, ours, 128, &osub);
        for (int i = 0; i < no; i++)
            crdt_trace_entry_free(&ours[i]);
        if (no < need || osub < rsub)
            return false;
    }
    return true;
}

/* Waits (up to 2 s) for step i's commands when it began an async call. */
static void await_async_step(scn *s, json_t *steps, size_t i)
{
    json_t *step = json_array_get(steps, i);
    if (!json_is_true(json_object_get(step, "async")) || played_raw(step))
        return;
    int stepno = (int)json_integer_value(json_object_get(step, "step"));
    const deviation *merge = deviation_at(s->file, stepno, DEV_MERGE);
    if (merge != NULL && stepno != merge->to)
        return;
    step_wait w = {s, steps, merge != NULL ? merge->from : stepno, stepno};
    crdt_wait_until(step_sent, &w, 2000); /* what is still missing, check_step says */
}

static void replay(const char *file)
{
    scn s;
    open_scenario(&s, file);
    json_t *steps = json_object_get(s.root, "steps");
    size_t n = json_array_size(steps);
    for (size_t i = 0; i < n; i++) {
        json_t *step = json_array_get(steps, i);
        int stepno = (int)json_integer_value(json_object_get(step, "step"));
        int64_t at = s.t0_mono + json_integer_value(json_object_get(step, "t_ms"));
        /* the recording's pace; the previous step's interval ends here */
        int64_t check_at = at - 40;
        while (crdt_now_ms() < check_at)
            crdt_sleep_ms(check_at - crdt_now_ms());
        if (i > 0) {
            /* The replay's clock stays the recording's (a rate limiter's permits are
             * given back by time): a late step only starts late. */
            await_async_step(&s, steps, i - 1);
            check_step(&s, steps, i - 1);
        }
        while (crdt_now_ms() < at)
            crdt_sleep_ms(at - crdt_now_ms());
        snprintf(s.where, sizeof s.where, "%s step %d (%s %s)", file, stepno,
                 jstr(step, "client") ? jstr(step, "client") : "",
                 jstr(step, "call") ? jstr(step, "call") : "");
        for (int k = 0; k < s.ncl; k++)
            crdt_tracelog_set_tag(s.cls[k].tl, stepno);
        const char *call = jstr(step, "call");
        if (strcmp(call, "sleep") == 0) {
            crdt_sleep_ms(json_integer_value(json_object_get(step, "ms")));
        } else if (played_raw(step)) {
            play_writes(&s, step);
        } else {
            gcl *g = client_of(&s, jstr(step, "client"));
            cr_assert_not_null(g, "%s", s.where);
            if (json_is_true(json_object_get(step, "async"))) {
                async_call *a = calloc(1, sizeof *a);
                *a = (async_call){&s, g, step, stepno, CRD_IO, 0};
                crdt_call_start(&a->call, async_main, a);
                s.async[s.nasync++] = a;
            } else {
                int64_t v = 0;
                crd_status st = do_call(&s, g, step, &v);
                check_result(&s, step, st, v, g);
            }
        }
        /* calls that completed during this step */
        json_t *done = json_object_get(step, "completed");
        for (size_t k = 0; k < json_array_size(done); k++) {
            int which = (int)json_integer_value(json_object_get(json_array_get(done, k), "step"));
            for (int x = 0; x < s.nasync; x++)
                if (s.async[x]->stepno == which) {
                    cr_assert(crdt_call_wait(&s.async[x]->call, 10000),
                              "%s: the call of step %d completes", s.where, which);
                    json_t *orig = json_array_get(steps, (size_t)which - 1);
                    check_result(&s, orig, s.async[x]->st, s.async[x]->v, s.async[x]->g);
                }
        }
    }
    /* the last step's interval: as long as the recording's steps last */
    crdt_sleep_ms(300);
    if (n > 0) {
        await_async_step(&s, steps, n - 1);
        check_step(&s, steps, n - 1);
    }
    check_renewals(&s, steps);
    close_scenario(&s);
}

/* ---- one test per recording ------------------------------------------------------------------- */

/* Test <name>_matches replays tests/golden/r47_<name>.json within timeout_s seconds. */
#define REPLAY(name, timeout_s)                                                                    \
    Test(golden_r47, name##_matches, .timeout = timeout_s)                                         \
    {                                                                                              \
        replay("r47_" #name);                                                                      \
    }

Test(golden_r47, rlock_basic_under_4_7_matches, .timeout = 60) { replay("r47_rlock_basic"); }
REPLAY(nrlock_a_reentry_rejected, 60)
REPLAY(nrlock_b_handoff_lease_force, 60)
REPLAY(nrfair_a_reentry_rejected, 60)
REPLAY(nrfair_b_queue_handoff, 60)
REPLAY(nrfair_c_lease_timeout_force, 60)
REPLAY(fml_a_lock_unlock, 60)
REPLAY(fml_b_contention, 60)
REPLAY(fml_c_watchdog, 60)
REPLAY(fml_d_lease_expiry, 60)
REPLAY(fml_e_field_names, 60)
REPLAY(spinlock, 60)
REPLAY(sem_release_if_exists, 60)
REPLAY(rl_a_overall, 60)
REPLAY(rl_b_acquire_waits, 60)
REPLAY(rl_c_release_update, 60)
REPLAY(rl_d_per_client, 60)
REPLAY(rl_e_keepalive_expire, 60)
REPLAY(rw_read_watchdog_single_hold, 60)
REPLAY(rw_read_watchdog_two_holds, 60)
REPLAY(rw_read_watchdog_two_threads, 60)
REPLAY(cluster_fml, 90)
REPLAY(cluster_rl, 90)
