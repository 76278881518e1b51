/*
 * test_golden_sync.c -- parity with the Redisson 3.52.0 recordings of RSemaphore
 * (sem_*), RPermitExpirableSemaphore (pes_*) and RCountDownLatch (cdl_*,
 * xs_cluster_semaphore_latch) in tests/golden (CRD_GOLDEN_DIR). Every scenario has a server
 * of its own, so the suite runs two at once.
 *
 * Each scenario is replayed step by step with credisson: every Java client is a
 * crd_client with a trace recorder, every call the matching credisson call (a call the
 * recording marks async runs in a thread of its own), each step starts at the
 * recording's t_ms (time passing is what some steps record: leases and waits running
 * out), and the scenario's names are mapped to per-test prefixed names. After each step
 * this is compared with the recording:
 *   - the commands each client sent, in order: script (by label: our lua/ file of the
 *     same operation), KEYS and ARGV by position, and the reply; (S)SUBSCRIBE and
 *     (S)UNSUBSCRIBE with their channel; GET. A NOSCRIPT answered by one EVAL counts as
 *     the one script call (the recording's client had the script cached); the cluster
 *     file's start-up commands (WAIT, WAITAOF, INFO, SCRIPT LOAD) are Redisson's own;
 *   - the messages published (a PSUBSCRIBE on the test's prefix; single-server files);
 *   - the whole key state: types, values, zset members and scores, TTL ranges;
 *   - the result of every call that returned in the step, and that the others still
 *     wait.
 * Placeholders: <permitN> is bound to the 16 bytes of the N-th id credisson sent (the
 * returned hex id must encode them); <T+N> in a deadline is bound to credisson's own
 * deadline after checking deadline - now against the recording's difference, a "now"
 * must lie within the step's wall-clock window, a ":<T+N>" reply and a zset score must
 * equal the bound deadline, and getLeaseTime's reply must be the bound deadline minus
 * the call's now.
 * The writes inside each script (MONITOR effects) are not compared here; the state
 * after every step is.
 *
 * Deliberate differences from Redisson, asserted as credisson's behaviour:
 *   - cdl_c: a delete ("1") wakes credisson's waiter, which reads the count at once and
 *     returns (Redisson's slept until its timeout): its GET and UNSUBSCRIBE come in the
 *     delete's step;
 *   - pes.release of an id whose lease has run out but which no script reclaimed
 *     (pes_f) replies 2, not 0: released late, CRD_LOCK_LOST (Java: false / exception);
 *   - the cross-slot latch cdl{2} (xs) is refused by crd_latch_new before any command.
 */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calls.h"
#include "cluster.h"
#include "golden.h"
#include "harness.h"

#ifndef CRD_GOLDEN_DIR
#error "CRD_GOLDEN_DIR must be defined by the build"
#endif

#define MAXC 3
#define MAXOBJ 8
#define MAXPERMITS 32
#define MAXTN 64

/* The recording's script labels and the lua/ file doing the same operation. */
static const char *const label_map[][2] = {
    {"semaphore.try_set_permits", "semaphore_try_set"},
    {"semaphore.try_set_permits_ttl", "semaphore_try_set_ttl"},
    {"semaphore.try_acquire", "semaphore_acquire"},
    {"semaphore.release", "semaphore_release"},
    {"semaphore.add_permits", "semaphore_add"},
    {"semaphore.drain", "semaphore_drain"},
    {"pes.try_acquire", "pes_acquire"},
    {"pes.release", "pes_release"},
    {"pes.release_many", "pes_release_many"},
    {"pes.available_permits", "pes_available"},
    {"pes.get_permits", "pes_permits"},
    {"pes.acquired_permits", "pes_acquired"},
    {"pes.set_permits", "pes_set_permits"},
    {"pes.add_permits", "pes_add"},
    {"pes.update_lease_time", "pes_update_lease"},
    {"pes.get_lease_time", "pes_lease_left"},
    {"latch.try_set_count", "latch_try_set"},
    {"latch.count_down", "latch_count_down"},
    {"latch.delete", "latch_delete"},
};
#define NLABELS (sizeof label_map / sizeof label_map[0])
static crdt_golden_script scripts[NLABELS];

typedef struct result {
    crd_status st;
    int64_t v;
    bool flag;
    char ids[4][CRD_PERMIT_ID_SIZE];
    int nids;
} result;

typedef struct obj {
    char kind[40];
    char name[64];
    void *h;
} obj;

typedef struct gcl {
    char label[16];
    crd_client *c;
    crdt_tracelog *tl;
    obj objs[MAXOBJ];
    int nobjs;
} gcl;

struct scn;

typedef struct async_call {
    struct scn *s;
    gcl *g;
    json_t *step;
    result res;
    crdt_call call;
} async_call;

typedef struct scn {
    const char *file;
    json_t *root;
    crdt_golden_site site;
    redisContext *r;
    char prefix[200];
    gcl cls[MAXC];
    int ncl;
    crdt_watch w;
    bool watching;
    /* <permitN> -> 16 bytes */
    unsigned char permit[MAXPERMITS][16];
    bool permit_bound[MAXPERMITS];
    /* <T+N> -> our epoch ms (deadlines) */
    long long tn_g[MAXTN], tn_o[MAXTN];
    int ntn;
    long long step_wall_start;
    async_call *async[16];
    int nasync;
    int64_t t0;
} scn;

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Each of our scripts, loaded into the server's cache (SCRIPT LOAD). */
static void load_labels(redisContext *r)
{
    for (size_t i = 0; i < NLABELS; i++)
        crdt_golden_script_read(r, label_map[i][1], true, &scripts[i]);
}

static const char *label_of(const crdt_trace_entry *e)
{
    for (size_t i = 0; i < NLABELS; i++)
        if (crdt_golden_script_runs(&scripts[i], e->argc, e->argv, e->argvlen))
            return label_map[i][0];
    return "?";
}

static const char *jstr(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The recording's name g mapped into this test's keyspace, inside any string. */
static void map_names(scn *s, const char *in, char *out, size_t cap)
{
    static const char *const names[] = {"sem{1}", "sem{2}", "pes{1}", "cdl{1}", "cdl{2}",
                                        "sem1", "sem2", "pes1", "cdl1"};
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < cap;) {
        bool hit = false;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            size_t n = strlen(names[i]);
            if (strncmp(p, names[i], n) == 0) {
                o += (size_t)snprintf(out + o, cap - o, "%s.%s", s->prefix, names[i]);
                p += n;
                hit = true;
                break;
            }
        }
        if (!hit)
            out[o++] = *p++;
    }
    out[o < cap ? o : cap - 1] = '\0';
}

static bool tn_parse(const char *g, long long *n)
{
    return sscanf(g, "<T+%lld>", n) == 1;
}

static bool tn_bound(scn *s, long long g, long long *o)
{
    for (int i = 0; i < s->ntn; i++)
        if (s->tn_g[i] == g) {
            *o = s->tn_o[i];
            return true;
        }
    return false;
}

static void tn_bind(scn *s, long long g, long long o)
{
    long long have;
    if (tn_bound(s, g, &have)) {
        cr_assert_eq(have, o, "%s: <T+%lld> was %lld, now %lld", s->file, g, have, o);
        return;
    }
    cr_assert_lt(s->ntn, MAXTN);
    s->tn_g[s->ntn] = g;
    s->tn_o[s->ntn++] = o;
}

static void check_now(scn *s, const char *what, long long o)
{
    cr_assert(o >= s->step_wall_start - 50 && o <= wall_ms() + 50,
              "%s: %s %lld lies outside the step's wall-clock window", s->file, what, o);
}

static int permit_index(const char *g)
{
    int n = 0;
    return sscanf(g, "<permit%d>", &n) == 1 && n > 0 && n <= MAXPERMITS ? n - 1 : -1;
}

static void permit_bind(scn *s, int i, const char *bytes, size_t len)
{
    cr_assert_eq(len, 16, "%s: a permit id of %zu bytes", s->file, len);
    if (s->permit_bound[i]) {
        cr_assert(memcmp(s->permit[i], bytes, 16) == 0, "%s: <permit%d> is another id", s->file,
                  i + 1);
        return;
    }
    memcpy(s->permit[i], bytes, 16);
    s->permit_bound[i] = true;
}

static void permit_hex(scn *s, int i, char out[33])
{
    cr_assert(i >= 0, "%s: not a permit placeholder", s->file);
    if (!s->permit_bound[i]) {
        /* An id the recording's client made up (a release of one never issued): ours. */
        for (int k = 0; k < 16; k++)
            s->permit[i][k] = (unsigned char)(rand() & 0xff);
        s->permit_bound[i] = true;
    }
    for (int k = 0; k < 16; k++)
        snprintf(out + 2 * k, 3, "%02x", s->permit[i][k]);
}

/* ---- objects and calls ------------------------------------------------------------------ */

static void *object(scn *s, gcl *g, const char *kind, const char *name, result *res)
{
    for (int i = 0; i < g->nobjs; i++)
        if (strcmp(g->objs[i].kind, kind) == 0 && strcmp(g->objs[i].name, name) == 0)
            return g->objs[i].h;
    char mapped[300];
    map_names(s, name, mapped, sizeof mapped);
    void *h = NULL;
    crd_status st;
    if (strcmp(kind, "RSemaphore") == 0)
        st = crd_semaphore_new(g->c, mapped, (crd_semaphore **)&h);
    else if (strcmp(kind, "RPermitExpirableSemaphore") == 0)
        st = crd_permit_semaphore_new(g->c, mapped, (crd_permit_semaphore **)&h);
    else
        st = crd_latch_new(g->c, mapped, (crd_latch **)&h);
    if (st != CRD_OK) {
        res->st = st;
        return NULL;
    }
    cr_assert_lt(g->nobjs, MAXOBJ);
    obj *o = &g->objs[g->nobjs++];
    snprintf(o->kind, sizeof o->kind, "%s", kind);
    snprintf(o->name, sizeof o->name, "%s", name);
    o->h = h;
    return h;
}

static int64_t arg(json_t *step, const char *k)
{
    json_t *v = json_object_get(json_object_get(step, "args"), k);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* Runs the step's call on g's objects. Plain C (also on async threads). */
static void run_call(scn *s, gcl *g, json_t *step, result *res)
{
    memset(res, 0, sizeof *res);
    const char *kind = jstr(step, "object"), *call = jstr(step, "call");
    void *h = object(s, g, kind, jstr(step, "name"), res);
    if (h == NULL)
        return;
    res->st = (crd_status)-1; /* a call this suite does not know: no branch below sets it */
    int64_t permits = arg(step, "permits"), lease = arg(step, "leaseTime"),
            wait = arg(step, "waitTime");
    if (strcmp(kind, "RSemaphore") == 0) {
        crd_semaphore *x = h;
        if (strcmp(call, "tryAcquire(permits)") == 0)
            res->st = crd_semaphore_acquire(x, permits, 0);
        else if (strcmp(call, "tryAcquire(permits,waitTime)") == 0)
            res->st = crd_semaphore_acquire(x, permits, wait);
        else if (strcmp(call, "acquire(permits)") == 0)
            res->st = crd_semaphore_acquire(x, permits, CRD_WAIT_FOREVER);
        else if (strcmp(call, "availablePermits") == 0)
            res->st = crd_semaphore_available(x, &res->v);
        else if (strcmp(call, "trySetPermits(permits)") == 0)
            res->st = crd_semaphore_try_set_permits(x, permits, 0, &res->flag);
        else if (strcmp(call, "trySetPermits(permits,timeToLive)") == 0)
            res->st = crd_semaphore_try_set_permits(x, permits, arg(step, "timeToLive"),
                                                    &res->flag);
        else if (strcmp(call, "release(permits)") == 0)
            res->st = crd_semaphore_release(x, permits);
        else if (strcmp(call, "addPermits(permits)") == 0)
            res->st = crd_semaphore_add_permits(x, permits);
        else if (strcmp(call, "drainPermits") == 0)
            res->st = crd_semaphore_drain(x, &res->v);
    } else if (strcmp(kind, "RPermitExpirableSemaphore") == 0) {
        crd_permit_semaphore *x = h;
        char hex[4][CRD_PERMIT_ID_SIZE] = {{0}};
        json_t *args = json_object_get(step, "args");
        const char *pid = jstr(args, "permitId");
        if (pid != NULL)
            permit_hex(s, permit_index(pid), hex[0]);
        res->nids = 1;
        if (strcmp(call, "trySetPermits(permits)") == 0)
            res->st = crd_permit_semaphore_try_set_permits(x, permits, &res->flag);
        else if (strcmp(call, "acquire(leaseTime)") == 0)
            res->st = crd_permit_semaphore_acquire(x, CRD_WAIT_FOREVER, lease, res->ids[0]);
        else if (strcmp(call, "acquire()") == 0)
            res->st = crd_permit_semaphore_acquire(x, CRD_WAIT_FOREVER, CRD_PERMIT_NO_LEASE,
                                                   res->ids[0]);
        else if (strcmp(call, "tryAcquire()") == 0)
            res->st = crd_permit_semaphore_acquire(x, 0, CRD_PERMIT_NO_LEASE, res->ids[0]);
        else if (strcmp(call, "tryAcquire(permits,waitTime,leaseTime)") == 0) {
            res->nids = (int)permits;
            res->st = crd_permit_semaphore_acquire_n(x, permits, wait, lease, res->ids);
        } else if (strcmp(call, "availablePermits") == 0)
            res->st = crd_permit_semaphore_available(x, &res->v);
        else if (strcmp(call, "getPermits") == 0)
            res->st = crd_permit_semaphore_permits(x, &res->v);
        else if (strcmp(call, "acquiredPermits") == 0)
            res->st = crd_permit_semaphore_acquired(x, &res->v);
        else if (strcmp(call, "getLeaseTime(permitId)") == 0)
            res->st = crd_permit_semaphore_lease_left(x, hex[0], &res->v);
        else if (strcmp(call, "updateLeaseTime(permitId,leaseTime)") == 0)
            res->st = crd_permit_semaphore_update_lease(x, hex[0], lease);
        else if (strcmp(call, "tryRelease(permitId)") == 0 ||
                 strcmp(call, "release(permitId)") == 0)
            res->st = crd_permit_semaphore_release(x, hex[0]);
        else if (strcmp(call, "release(permitIds)") == 0) {
            json_t *ids = json_object_get(args, "permitIds");
            const char *ptrs[4];
            size_t n = json_array_size(ids);
            for (size_t i = 0; i < n && i < 4; i++) {
                permit_hex(s, permit_index(json_string_value(json_array_get(ids, i))), hex[i]);
                ptrs[i] = hex[i];
            }
            res->st = crd_permit_semaphore_release_n(x, ptrs, n);
        } else if (strcmp(call, "setPermits(permits)") == 0)
            res->st = crd_permit_semaphore_set_permits(x, permits);
        else if (strcmp(call, "addPermits(permits)") == 0)
            res->st = crd_permit_semaphore_add_permits(x, permits);
    } else {
        crd_latch *x = h;
        if (strcmp(call, "getCount") == 0)
            res->st = crd_latch_count(x, &res->v);
        else if (strcmp(call, "trySetCount(count)") == 0)
            res->st = crd_latch_try_set_count(x, arg(step, "count"), &res->flag);
        else if (strcmp(call, "countDown") == 0)
            res->st = crd_latch_count_down(x);
        else if (strcmp(call, "await(timeout)") == 0)
            res->st = crd_latch_await(x, arg(step, "timeout"));
        else if (strcmp(call, "await()") == 0)
            res->st = crd_latch_await(x, CRD_WAIT_FOREVER);
        else if (strcmp(call, "delete") == 0)
            res->st = crd_latch_delete(x, &res->flag);
    }
}

/* The golden command of this step that a release's result depends on: a pes.release
 * reply 0 whose effects gave the permit back (pes_f: released past its lease). */
static bool released_late(json_t *step, const char *client)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(step, "commands"), i, c)
    {
        if (strcmp(jstr(c, "client"), client) != 0 || jstr(c, "script") == NULL ||
            strcmp(jstr(c, "script"), "pes.release") != 0)
            continue;
        json_t *e;
        size_t k;
        json_array_foreach(json_object_get(c, "effects"), k, e)
        {
            if (strcmp(json_string_value(json_array_get(e, 0)), "incrby") == 0 &&
                json_integer_value(json_object_get(c, "reply")) == 0)
                return true;
        }
    }
    return false;
}

static void check_result(scn *s, json_t *step, json_t *gres, const result *res,
                         const char *client)
{
    const char *call = jstr(step, "call");
    int no = (int)json_integer_value(json_object_get(step, "step"));
    json_t *ret = json_object_get(gres, "returned");
    json_t *exc = json_object_get(gres, "exception");
    if (exc != NULL) {
        const char *msg = jstr(gres, "message");
        if (msg != NULL && strstr(msg, "CROSSSLOT") != NULL) {
            cr_assert_eq(res->st, CRD_INVALID_ARGUMENT, "%s step %d: CROSSSLOT latch refused",
                         s->file, no);
            return;
        }
        crd_status want = released_late(step, client) ? CRD_LOCK_LOST : CRD_NOT_OWNER;
        cr_assert_eq(res->st, want, "%s step %d %s: %s, expected %s", s->file, no, call,
                     crd_strerror(res->st), crd_strerror(want));
        return;
    }
    bool boolean = json_is_boolean(ret);
    if (strncmp(call, "tryRelease", 10) == 0) {
        crd_status want = json_is_true(ret) ? CRD_OK
                          : released_late(step, client) ? CRD_LOCK_LOST : CRD_NOT_OWNER;
        cr_assert_eq(res->st, want, "%s step %d %s: %s", s->file, no, call, crd_strerror(res->st));
        return;
    }
    if (boolean && (strncmp(call, "trySet", 6) == 0 || strcmp(call, "delete") == 0)) {
        cr_assert_eq(res->st, CRD_OK, "%s step %d %s: %s", s->file, no, call,
                     crd_strerror(res->st));
        cr_assert_eq(res->flag, json_is_true(ret), "%s step %d %s", s->file, no, call);
        return;
    }
    if (boolean) {
        crd_status no_st = strstr(call, "waitTime") != NULL || strstr(call, "await") != NULL
                               ? CRD_TIMEOUT
                           : strncmp(call, "update", 6) == 0 ? CRD_NOT_OWNER
                                                             : CRD_BUSY;
        cr_assert_eq(res->st, json_is_true(ret) ? CRD_OK : no_st, "%s step %d %s: %s", s->file,
                     no, call, crd_strerror(res->st));
        return;
    }
    if (json_is_null(ret) && strcmp(call, "tryAcquire()") == 0) {
        cr_assert_eq(res->st, CRD_BUSY, "%s step %d %s: %s", s->file, no, call,
                     crd_strerror(res->st));
        return;
    }
    cr_assert_eq(res->st, CRD_OK, "%s step %d %s: %s", s->file, no, call, crd_strerror(res->st));
    if (json_is_integer(ret) && strcmp(call, "getLeaseTime(permitId)") != 0)
        cr_assert_eq(res->v, json_integer_value(ret), "%s step %d %s: %lld", s->file, no, call,
                     (long long)res->v);
    if (json_is_integer(ret) && strcmp(call, "getLeaseTime(permitId)") == 0)
        cr_assert((json_integer_value(ret) < 0) == (res->v < 0), "%s step %d", s->file, no);
    json_t *ids = json_is_string(ret) ? NULL : ret;
    for (int i = 0; i < (json_is_string(ret) ? 1 : (int)json_array_size(ids)); i++) {
        const char *g = json_is_string(ret) ? json_string_value(ret)
                                             : json_string_value(json_array_get(ids, (size_t)i));
        char hex[33];
        permit_hex(s, permit_index(g), hex);
        cr_assert_str_eq(res->ids[i], hex, "%s step %d: the id returned is the one sent",
                         s->file, no);
    }
}

static void async_body(void *arg)
{
    async_call *a = arg;
    run_call(a->s, a->g, a->step, &a->res);
}

/* ---- commands ---------------------------------------------------------------------------- */

/* Redisson's start-up commands in cluster mode, and the CROSSSLOT script credisson
 * refuses before sending. */
static bool ignored_golden(json_t *c)
{
    const char *cmd = jstr(c, "cmd");
    json_t *err = json_object_get(json_object_get(c, "reply"), "error");
    return strcmp(cmd, "WAIT") == 0 || strcmp(cmd, "WAITAOF") == 0 || strcmp(cmd, "INFO") == 0 ||
           strcmp(cmd, "SCRIPT") == 0 ||
           (json_is_string(err) && strstr(json_string_value(err), "CROSSSLOT") != NULL);
}

/* A NOSCRIPT (the EVAL follows), and a cluster client's slot map refreshes. */
static bool ignored_ours(const crdt_trace_entry *e)
{
    return strstr(e->reply, "NOSCRIPT") != NULL || strcasecmp(e->argv[0], "CLUSTER") == 0;
}

static gcl *client_of(scn *s, const char *label)
{
    for (int i = 0; i < s->ncl; i++)
        if (strcmp(s->cls[i].label, label) == 0)
            return &s->cls[i];
    cr_assert_fail("%s: no client %s", s->file, label);
    return NULL;
}

static size_t golden_count(json_t *step, const char *client)
{
    size_t n = 0, i;
    json_t *c;
    json_array_foreach(json_object_get(step, "commands"), i, c)
        if (strcmp(jstr(c, "client"), client) == 0 && !ignored_golden(c))
            n++;
    return n;
}

static size_t ours_count(gcl *g, int tag)
{
    size_t n = 0, total = crdt_tracelog_count(g->tl);
    for (size_t i = 0; i < total; i++) {
        crdt_trace_entry e;
        if (!crdt_tracelog_get(g->tl, i, &e))
            break;
        if (e.tag == tag && !ignored_ours(&e))
            n++;
        crdt_trace_entry_free(&e);
    }
    return n;
}

typedef struct count_pred {
    scn *s;
    json_t *step;
    int tag;
} count_pred;

static bool counts_reached(void *arg)
{
    count_pred *p = arg;
    for (int i = 0; i < p->s->ncl; i++)
        if (ours_count(&p->s->cls[i], p->tag) < golden_count(p->step, p->s->cls[i].label))
            return false;
    return true;
}

static long long num(const char *p, size_t len)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < 31 ? len : 31), p);
    return strtoll(buf, NULL, 10);
}

/* One golden ARGV or KEYS value against ours. */
static void match_value(scn *s, const char *where, const char *g, const char *o, size_t olen,
                        bool deadline)
{
    int pi = permit_index(g);
    if (pi >= 0) {
        permit_bind(s, pi, o, olen);
        return;
    }
    long long tn;
    if (tn_parse(g, &tn)) {
        if (deadline) /* deadline - now is checked by the caller */
            cr_assert(num(o, olen) >= s->step_wall_start, "%s %s: deadline in the past", s->file,
                      where);
        else
            check_now(s, where, num(o, olen));
        return;
    }
    char mapped[600];
    map_names(s, g, mapped, sizeof mapped);
    if (strcmp(mapped, "PUBLISH") == 0 && s->site.cluster)
        snprintf(mapped, sizeof mapped, "SPUBLISH");
    cr_assert(strlen(mapped) == olen && memcmp(mapped, o, olen) == 0,
              "%s %s: expected \"%s\", got \"%.*s\"", s->file, where, mapped, (int)olen, o);
}

static void check_command(scn *s, int no, json_t *c, const crdt_trace_entry *e)
{
    const char *gcmd = jstr(c, "cmd");
    char where[200];
    snprintf(where, sizeof where, "step %d %s %s", no, jstr(c, "client"), gcmd);
    const char *ocmd = e->argv[0];
    if (strcmp(gcmd, "EVALSHA") == 0) {
        cr_assert(strcasecmp(ocmd, "EVALSHA") == 0 || strcasecmp(ocmd, "EVAL") == 0,
                  "%s %s: got %s", s->file, where, ocmd);
        const char *label = jstr(c, "script");
        cr_assert_str_eq(label_of(e), label, "%s %s", s->file, where);
        json_t *keys = json_object_get(c, "keys"), *argv = json_object_get(c, "argv");
        size_t nk = json_array_size(keys), na = json_array_size(argv);
        cr_assert_eq((size_t)e->argc, 3 + nk + na, "%s %s (%s): %d words", s->file, where, label,
                     e->argc);
        for (size_t i = 0; i < nk; i++)
            match_value(s, where, json_string_value(json_array_get(keys, i)), e->argv[3 + i],
                        e->argvlen[3 + i], false);
        for (size_t i = 0; i < na; i++)
            match_value(s, where, json_string_value(json_array_get(argv, i)),
                        e->argv[3 + nk + i], e->argvlen[3 + nk + i],
                        i == 1 && (strcmp(label, "pes.try_acquire") == 0 ||
                                   strcmp(label, "pes.update_lease_time") == 0));
        /* Deadlines: deadline - now as recorded, then bound. */
        long long gd, gn;
        int di = -1, ni = -1;
        if (strcmp(label, "pes.try_acquire") == 0 || strcmp(label, "pes.update_lease_time") == 0) {
            di = 1;
            ni = 2;
        }
        if (di >= 0 && tn_parse(json_string_value(json_array_get(argv, (size_t)di)), &gd) &&
            tn_parse(json_string_value(json_array_get(argv, (size_t)ni)), &gn)) {
            long long od = num(e->argv[3 + nk + (size_t)di], e->argvlen[3 + nk + (size_t)di]);
            long long on = num(e->argv[3 + nk + (size_t)ni], e->argvlen[3 + nk + (size_t)ni]);
            cr_assert_eq(od - on, gd - gn, "%s %s: deadline - now", s->file, where);
            tn_bind(s, gd, od);
        }
        /* The reply. */
        json_t *rep = json_object_get(c, "reply");
        char want[200];
        if (json_is_null(rep)) {
            snprintf(want, sizeof want, "nil");
        } else if (json_is_integer(rep)) {
            long long v = json_integer_value(rep);
            if (strcmp(label, "pes.release") == 0 && v == 0) {
                json_t *st = json_object_get(c, "effects");
                size_t k;
                json_t *x;
                json_array_foreach(st, k, x) if (strcmp(json_string_value(json_array_get(x, 0)),
                                                        "incrby") == 0) v = 2; /* pes_f */
            }
            if (strcmp(label, "pes.get_lease_time") == 0 && v > 0) {
                /* Timing-dependent: a bound deadline minus this call's now. */
                long long on = num(e->argv[3 + nk + 2], e->argvlen[3 + nk + 2]);
                long long ov = strncmp(e->reply, "(integer) ", 10) == 0
                                   ? strtoll(e->reply + 10, NULL, 10) : -1;
                bool found = false;
                for (int i = 0; i < s->ntn; i++)
                    found = found || s->tn_o[i] - on == ov;
                cr_assert(found, "%s %s: lease left %s is no bound deadline minus now", s->file,
                          where, e->reply);
                return;
            }
            snprintf(want, sizeof want, "(integer) %lld", v);
        } else if (json_is_string(rep)) {
            const char *g = json_string_value(rep);
            long long tn, bound;
            if (g[0] == ':' && tn_parse(g + 1, &tn)) {
                cr_assert(tn_bound(s, tn, &bound), "%s %s: reply %s before its deadline was sent",
                          s->file, where, g);
                snprintf(want, sizeof want, "\":%lld\"", bound);
            } else {
                snprintf(want, sizeof want, "\"%s\"", g);
            }
        } else {
            cr_assert_fail("%s %s: reply type", s->file, where);
        }
        cr_assert_str_eq(e->reply, want, "%s %s (%s)", s->file, where, label);
        return;
    }
    /* Plain commands: GET N, (S)SUBSCRIBE / (S)UNSUBSCRIBE channel. */
    cr_assert(strcasecmp(ocmd, gcmd) == 0, "%s %s: got %s", s->file, where, ocmd);
    json_t *args = json_object_get(c, "args");
    cr_assert_eq((size_t)e->argc, 1 + json_array_size(args), "%s %s", s->file, where);
    for (size_t i = 0; i < json_array_size(args); i++)
        match_value(s, where, json_string_value(json_array_get(args, i)), e->argv[1 + i],
                    e->argvlen[1 + i], false);
    if (strcmp(gcmd, "GET") == 0) {
        json_t *rep = json_object_get(c, "reply");
        char want[100];
        if (json_is_null(rep))
            snprintf(want, sizeof want, "nil");
        else
            snprintf(want, sizeof want, "\"%s\"", json_string_value(rep));
        cr_assert_str_eq(e->reply, want, "%s %s", s->file, where);
    }
}

static void check_commands(scn *s, json_t *step, int no)
{
    for (int k = 0; k < s->ncl; k++) {
        gcl *g = &s->cls[k];
        size_t gi = 0, i;
        json_t *gc = json_object_get(step, "commands");
        size_t total = crdt_tracelog_count(g->tl);
        for (i = 0; i < total; i++) {
            crdt_trace_entry e;
            if (!crdt_tracelog_get(g->tl, i, &e))
                break;
            if (e.tag != no || ignored_ours(&e)) {
                crdt_trace_entry_free(&e);
                continue;
            }
            json_t *c = NULL;
            while (gi < json_array_size(gc)) {
                json_t *x = json_array_get(gc, gi++);
                if (strcmp(jstr(x, "client"), g->label) == 0 && !ignored_golden(x)) {
                    c = x;
                    break;
                }
            }
            if (c == NULL)
                crdt_tracelog_dump(g->tl, g->label);
            cr_assert_not_null(c, "%s step %d: %s sent %s, which the recording does not have",
                               s->file, no, g->label, e.argv[0]);
            check_command(s, no, c, &e);
            crdt_trace_entry_free(&e);
        }
        cr_assert_eq(ours_count(g, no), golden_count(step, g->label),
                     "%s step %d: %s sent %zu commands, the recording %zu", s->file, no,
                     g->label, ours_count(g, no), golden_count(step, g->label));
    }
}

/* ---- published messages and state --------------------------------------------------------- */

static void check_published(scn *s, json_t *step, int no)
{
    if (!s->watching)
        return;
    crdt_msg m[16];
    int n = crdt_watch_collect(&s->w, m, 16);
    json_t *pub = json_object_get(step, "published");
    cr_assert_eq((size_t)n, json_array_size(pub), "%s step %d: %d messages published, recorded %zu",
                 s->file, no, n, json_array_size(pub));
    for (int i = 0; i < n; i++) {
        json_t *p = json_array_get(pub, (size_t)i);
        char ch[400];
        map_names(s, jstr(p, "channel"), ch, sizeof ch);
        cr_assert_str_eq(m[i].channel, ch, "%s step %d", s->file, no);
        cr_assert_str_eq(m[i].payload, jstr(p, "payload"), "%s step %d on %s", s->file, no, ch);
    }
}

static void check_state(scn *s, json_t *step, int no)
{
    json_t *state = json_object_get(step, "state_after");
    char pattern[300];
    snprintf(pattern, sizeof pattern, "*%s*", s->prefix);
    long long nkeys = crdt_count_keys(s->r, pattern);
    cr_assert_eq((size_t)nkeys, json_array_size(state), "%s step %d: %lld keys, recorded %zu",
                 s->file, no, nkeys, json_array_size(state));
    size_t i;
    json_t *k;
    json_array_foreach(state, i, k)
    {
        char key[400], type[32];
        map_names(s, jstr(k, "key"), key, sizeof key);
        crdt_cmd_str(s->r, type, sizeof type, "TYPE %s", key);
        cr_assert_str_eq(type, jstr(k, "type"), "%s step %d: %s", s->file, no, key);
        json_t *v = json_object_get(k, "value");
        if (strcmp(type, "string") == 0) {
            char val[64];
            crdt_cmd_str(s->r, val, sizeof val, "GET %s", key);
            cr_assert_str_eq(val, json_string_value(v), "%s step %d: %s", s->file, no, key);
        } else {
            redisReply *z = crdt_cmd(s->r, "ZRANGE %s 0 -1 WITHSCORES", key);
            cr_assert_eq(z->elements, 2 * json_array_size(v), "%s step %d: %s members", s->file,
                         no, key);
            /* Members with equal scores may sort differently (random ids): match by id. */
            for (size_t m = 0; m < json_array_size(v); m++) {
                json_t *pair = json_array_get(v, m);
                int pi = permit_index(json_string_value(json_array_get(pair, 0)));
                cr_assert(pi >= 0 && s->permit_bound[pi], "%s step %d", s->file, no);
                bool found = false;
                for (size_t e = 0; e < z->elements; e += 2) {
                    if (z->element[e]->len != 16 ||
                        memcmp(z->element[e]->str, s->permit[pi], 16) != 0)
                        continue;
                    found = true;
                    const char *gs = json_string_value(json_array_get(pair, 1));
                    long long tn, bound;
                    long long os = strtoll(z->element[e + 1]->str, NULL, 10);
                    if (tn_parse(gs, &tn)) {
                        cr_assert(tn_bound(s, tn, &bound), "%s step %d: score %s", s->file, no, gs);
                        cr_assert_eq(os, bound, "%s step %d: <permit%d>'s deadline", s->file, no,
                                     pi + 1);
                    } else {
                        cr_assert_eq(os, strtoll(gs, NULL, 10), "%s step %d", s->file, no);
                    }
                }
                cr_assert(found, "%s step %d: <permit%d> not in %s", s->file, no, pi + 1, key);
            }
            freeReplyObject(z);
        }
        json_t *pttl = json_object_get(k, "pttl");
        long long ours = crdt_pttl(s->r, key);
        if (json_is_integer(pttl))
            cr_assert_eq(ours, -1, "%s step %d: %s has a TTL (%lld)", s->file, no, key, ours);
        else
            cr_assert(ours >= json_integer_value(json_array_get(pttl, 0)) - 1000 &&
                          ours <= json_integer_value(json_array_get(pttl, 1)),
                      "%s step %d: %s pttl %lld", s->file, no, key, ours);
    }
}

/* ---- the replay ----------------------------------------------------------------------------- */

/* cdl_c: credisson's waiter re-checks on the delete's "1": its GET and UNSUBSCRIBE, and
 * its return, move from step 4 (the timeout) to step 3 (the delete). */
static void cdl_c_difference(scn *s)
{
    json_t *steps = json_object_get(s->root, "steps");
    json_t *s3 = json_array_get(steps, 2), *s4 = json_array_get(steps, 3);
    json_t *c3 = json_object_get(s3, "commands"), *c4 = json_object_get(s4, "commands");
    while (json_array_size(c4) > 0) {
        json_array_append(c3, json_array_get(c4, 0));
        json_array_remove(c4, 0);
    }
    json_object_set(s3, "completed", json_object_get(s4, "completed"));
    json_object_set_new(s4, "completed", json_array());
}

static void open_scn(scn *s, const char *file, bool cluster)
{
    memset(s, 0, sizeof *s);
    s->file = file;
    s->root = crdt_golden_scenario(file);
    if (strstr(file, "cdl_c") != NULL)
        cdl_c_difference(s);
    crd_options o;
    s->r = crdt_golden_site_start(&s->site, cluster);
    load_labels(s->r);
    snprintf(s->prefix, sizeof s->prefix, "%s", crdt_key("g"));
    if (!cluster) {
        char pattern[300];
        snprintf(pattern, sizeof pattern, "*%s*", s->prefix);
        crdt_watch_open_at(&s->w, s->site.srv.port, pattern, true);
        s->watching = true;
    }
    const char *label;
    json_t *v;
    json_object_foreach(json_object_get(s->root, "clients"), label, v)
    {
        cr_assert_lt(s->ncl, MAXC);
        gcl *g = &s->cls[s->ncl++];
        snprintf(g->label, sizeof g->label, "%s", label);
        g->tl = crdt_tracelog_new();
        crdt_golden_site_options(&s->site, &o);
        crdt_tracelog_attach(g->tl, &o);
        g->c = crdt_client_opts(&o);
        crdt_tracelog_set_tag(g->tl, 0);
    }
}

static void close_scn(scn *s)
{
    for (int i = 0; i < s->nasync; i++) {
        crdt_call_join(&s->async[i]->call);
        free(s->async[i]);
    }
    for (int i = 0; i < s->ncl; i++) {
        gcl *g = &s->cls[i];
        for (int k = 0; k < g->nobjs; k++) {
            if (strcmp(g->objs[k].kind, "RSemaphore") == 0)
                crd_semaphore_free(g->objs[k].h);
            else if (strcmp(g->objs[k].kind, "RPermitExpirableSemaphore") == 0)
                crd_permit_semaphore_free(g->objs[k].h);
            else
                crd_latch_free(g->objs[k].h);
        }
        crd_client_free(g->c);
        crdt_tracelog_free(g->tl);
    }
    if (s->watching)
        crdt_watch_close(&s->w);
    redisFree(s->r);
    crdt_golden_site_stop(&s->site);
    json_decref(s->root);
    for (size_t i = 0; i < NLABELS; i++)
        free(scripts[i].text);
}

static async_call *async_of(scn *s, int step)
{
    for (int i = 0; i < s->nasync; i++)
        if ((int)json_integer_value(json_object_get(s->async[i]->step, "step")) == step)
            return s->async[i];
    return NULL;
}

static void replay(const char *file, bool cluster)
{
    scn s;
    open_scn(&s, file, cluster);
    s.t0 = crdt_now_ms();
    size_t i;
    json_t *step;
    json_array_foreach(json_object_get(s.root, "steps"), i, step)
    {
        int no = (int)json_integer_value(json_object_get(step, "step"));
        int64_t at = s.t0 + json_integer_value(json_object_get(step, "t_ms"));
        while (crdt_now_ms() < at)
            crdt_sleep_ms(at - crdt_now_ms()); /* the recording's pace: time is the input */
        for (int k = 0; k < s.ncl; k++)
            crdt_tracelog_set_tag(s.cls[k].tl, no);
        s.step_wall_start = wall_ms();
        const char *call = jstr(step, "call");
        result sync_res;
        bool have_sync = false;
        if (strcmp(call, "sleep") == 0) {
            crdt_sleep_ms(json_integer_value(json_object_get(step, "ms")));
        } else if (json_is_true(json_object_get(step, "async"))) {
            async_call *a = calloc(1, sizeof *a);
            a->s = &s;
            a->g = client_of(&s, jstr(step, "client"));
            a->step = step;
            s.async[s.nasync++] = a;
            crdt_call_start(&a->call, async_body, a);
        } else {
            run_call(&s, client_of(&s, jstr(step, "client")), step, &sync_res);
            have_sync = true;
        }
        count_pred p = {&s, step, no};
        if (!crdt_wait_until(counts_reached, &p, 5000))
            for (int k = 0; k < s.ncl; k++)
                crdt_tracelog_dump(s.cls[k].tl, s.cls[k].label);
        size_t j;
        json_t *done;
        /* Commands first: they bind the permit ids and deadlines the results name. */
        check_commands(&s, step, no);
        if (have_sync)
            check_result(&s, step, json_object_get(step, "result"), &sync_res,
                         jstr(step, "client"));
        json_array_foreach(json_object_get(step, "completed"), j, done)
        {
            async_call *a = async_of(&s, (int)json_integer_value(json_object_get(done, "step")));
            cr_assert_not_null(a);
            cr_assert(crdt_call_wait(&a->call, 5000), "%s step %d: step %d's call "
                      "did not return", file, no,
                      (int)json_integer_value(json_object_get(done, "step")));
            check_result(&s, a->step, json_object_get(done, "result"), &a->res,
                         jstr(a->step, "client"));
        }
        check_published(&s, step, no);
        check_state(&s, step, no);
    }
    /* Every async call returned when the recording says so, and no later. */
    for (int k = 0; k < s.nasync; k++)
        cr_assert(crdt_call_returned(&s.async[k]->call), "%s: an async call is still waiting",
                  file);
    close_scn(&s);
}

Test(golden_sync, sem_a_set_acquire_release_matches_redisson) { replay("sem_a_set_acquire_release.json", false); }
Test(golden_sync, sem_b_blocked_acquire_woken_matches_redisson) { replay("sem_b_blocked_acquire_woken.json", false); }
Test(golden_sync, sem_c_try_acquire_timeout_matches_redisson) { replay("sem_c_try_acquire_timeout.json", false); }
Test(golden_sync, sem_d_negative_counts_wake_nobody_like_redisson) { replay("sem_d_add_permits_negative.json", false); }
Test(golden_sync, sem_e_drain_matches_redisson) { replay("sem_e_drain.json", false); }
Test(golden_sync, sem_f_two_local_waiters_share_a_subscription_like_redisson) { replay("sem_f_two_local_waiters.json", false); }
Test(golden_sync, sem_g_try_set_permits_with_a_ttl_matches_redisson) { replay("sem_g_try_set_permits_ttl.json", false); }
Test(golden_sync, sem_h_braced_name_matches_redisson) { replay("sem_h_braced_name.json", false); }
Test(golden_sync, pes_a_acquire_lease_release_matches_redisson) { replay("pes_a_acquire_lease_release.json", false); }
Test(golden_sync, pes_b_an_expired_lease_is_reclaimed_like_redisson) { replay("pes_b_expired_lease_reclaimed.json", false); }
Test(golden_sync, pes_c_release_of_an_unknown_id_matches_redisson) { replay("pes_c_release_unknown_id.json", false); }
Test(golden_sync, pes_d_a_two_permit_waiter_is_woken_like_redisson) { replay("pes_d_multi_permit_woken.json", false); }
Test(golden_sync, pes_e_set_and_add_permits_match_redisson) { replay("pes_e_set_add_permits.json", false); }
Test(golden_sync, pes_f_a_late_release_gives_back_and_reports_lock_lost) { replay("pes_f_release_expired_unreclaimed.json", false); }
Test(golden_sync, pes_g_braced_name_matches_redisson) { replay("pes_g_braced_name.json", false); }
Test(golden_sync, cdl_a_set_and_count_down_match_redisson) { replay("cdl_a_set_count_down.json", false); }
Test(golden_sync, cdl_b_waiters_woken_by_zero_like_redisson) { replay("cdl_b_await_woken.json", false); }
Test(golden_sync, cdl_c_a_delete_wakes_the_waiter_where_redisson_sleeps_on) { replay("cdl_c_delete_while_waiting.json", false); }
Test(golden_sync, cdl_d_braced_name_matches_redisson) { replay("cdl_d_braced_name.json", false); }
Test(golden_sync, xs_cluster_semaphores_and_latch_match_redisson_with_sharded_pubsub, .timeout = 120)
{
    replay("xs_cluster_semaphore_latch.json", true);
}
