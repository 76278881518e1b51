/*
 * test_inspect.c -- lock state as a public API (issue #45): crd_state_read and crd_scan_*
 * read every Redisson kind, held by C clients and by foreign ones (node-redisson's RLock
 * when interop/node has its packages; the golden recordings' states, written into Redis as
 * Java left them, for the kinds node-redisson lacks), on a standalone server and on a
 * cluster; and, with real processes, `credisson status` and `list --json` name the
 * holder's host, pid, program and hold age and count (non-fair) or list in order (fair)
 * its three waiters within 1 s of the change.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "harness.h"
#include "probes.h"
#include "procs.h"
#include "syncs.h"

static int64_t epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static crd_state *state_of(crd_client *c, const char *name, unsigned flags)
{
    crd_state *s = NULL;
    crd_status st = crd_state_read(c, name, strlen(name), flags, &s);
    cr_assert_eq(st, CRD_OK, "crd_state_read(%s): %s (%s)", name, crd_strerror(st),
                 crd_client_errmsg(c));
    cr_assert_not_null(s);
    cr_assert_str_eq(s->kind_name, crd_object_kind_name(s->kind));
    return s;
}

static void ident_options(crd_options *o)
{
    crdt_options(o);
    o->identity = true;
}

/* ---- golden states -------------------------------------------------------------------- */

/* The recording's placeholders made concrete: <uuidX> a UUID ending in X's letter,
 * <tidX> a thread id, <reqidN>, <permitN> 16 bytes, <T+N> now + N ms; the recorded name
 * (and "{name}") the test's own. */
static void concrete(const char *in, const char *rec_name, const char *name, char *out,
                     size_t cap)
{
    char braced[64];
    snprintf(braced, sizeof braced, "{%s}", rec_name);
    size_t o = 0;
    if (strcmp(in, rec_name) == 0) {
        snprintf(out, cap, "%s", name);
        return;
    }
    for (const char *p = in; *p && o + 1 < cap;) {
        if (strncmp(p, braced, strlen(braced)) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "{%s}", name);
            p += strlen(braced);
        } else if (strncmp(p, "<uuid", 5) == 0 && p[6] == '>') {
            o += (size_t)snprintf(out + o, cap - o, "%c%c%c%c%c%c%c%c-0000-4000-8000-00000000000%c",
                                  p[5] | 32, '1', '1', '1', '1', '1', '1', '1', p[5] | 32);
            p += 7;
        } else if (strncmp(p, "<tid", 4) == 0) {
            const char *e = strchr(p, '>');
            o += (size_t)snprintf(out + o, cap - o, "%d", 100 + (p[4] - 'A') * 10 +
                                                             (p[5] >= '0' && p[5] <= '9' ? p[5] - '0' : 0));
            p = e + 1;
        } else if (strncmp(p, "<T+", 3) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "%lld", (long long)(epoch_ms() + atoll(p + 3)));
            p = strchr(p, '>') + 1;
        } else if (strncmp(p, "<permit", 7) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "permit-%09d", atoi(p + 7));
            p = strchr(p, '>') + 1;
        } else if (strncmp(p, "<reqid", 6) == 0) {
            o += (size_t)snprintf(out + o, cap - o, "req%d", atoi(p + 6));
            p = strchr(p, '>') + 1;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
}

/* Writes the state after step `step` of a recording into Redis under name. */
static void write_golden_state(redisContext *r, const char *file, int step, const char *rec_name,
                               const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/scenarios/%s", CRD_GOLDEN_DIR, file);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    cr_assert_not_null(root, "%s: %s", path, jerr.text);
    json_t *st = json_object_get(json_array_get(json_object_get(root, "steps"), (size_t)step),
                                 "state_after");
    cr_assert(json_is_array(st), "%s step %d has no state_after", file, step);
    size_t i;
    json_t *k;
    json_array_foreach(st, i, k)
    {
        char key[512], a[512], b[512];
        concrete(json_string_value(json_object_get(k, "key")), rec_name, name, key, sizeof key);
        const char *type = json_string_value(json_object_get(k, "type"));
        json_t *v = json_object_get(k, "value");
        freeReplyObject(crdt_cmd(r, "DEL %s", key));
        if (strcmp(type, "hash") == 0) {
            const char *f;
            json_t *x;
            json_object_foreach(v, f, x)
            {
                concrete(f, rec_name, name, a, sizeof a);
                concrete(json_string_value(x), rec_name, name, b, sizeof b);
                freeReplyObject(crdt_cmd(r, "HSET %s %s %s", key, a, b));
            }
        } else if (strcmp(type, "string") == 0) {
            concrete(json_string_value(v), rec_name, name, a, sizeof a);
            freeReplyObject(crdt_cmd(r, "SET %s %s", key, a));
        } else if (strcmp(type, "list") == 0 || strcmp(type, "zset") == 0) {
            /* A list's elements are strings, a zset's [member, score] pairs. */
            bool zset = type[0] == 'z';
            size_t j;
            json_t *x;
            json_array_foreach(v, j, x)
            {
                concrete(json_string_value(zset ? json_array_get(x, 0) : x), rec_name, name, a,
                         sizeof a);
                if (!zset) {
                    freeReplyObject(crdt_cmd(r, "RPUSH %s %s", key, a));
                    continue;
                }
                concrete(json_string_value(json_array_get(x, 1)), rec_name, name, b, sizeof b);
                freeReplyObject(crdt_cmd(r, "ZADD %s %s %s", key, b, a));
            }
        }
        json_t *pttl = json_object_get(k, "pttl");
        long long ttl = json_is_array(pttl) ? json_integer_value(json_array_get(pttl, 1))
                                            : json_integer_value(pttl);
        if (ttl > 0)
            freeReplyObject(crdt_cmd(r, "PEXPIRE %s %lld", key, ttl));
    }
    json_decref(root);
}

static void expect_foreign_holder(const crd_holder *h, char letter, int64_t count)
{
    char uuid[64];
    snprintf(uuid, sizeof uuid, "%c1111111-0000-4000-8000-00000000000%c", letter | 32, letter | 32);
    cr_assert_str_eq(h->who.client_id, uuid);
    cr_assert(!h->who.known, "a Java holder has no identity record");
    cr_assert_eq(h->count, count);
    cr_assert_eq(h->since_ms, -1);
}

/* The state of name once file's step is written into it (write_golden_state), read with
 * flags; asserts it is of kind. */
static crd_state *golden_state(redisContext *r, crd_client *c, const char *name, const char *file,
                               int step, const char *rec_name, unsigned flags,
                               crd_object_kind kind)
{
    write_golden_state(r, file, step, rec_name, name);
    crd_state *s = state_of(c, name, flags);
    cr_assert_eq(s->kind, kind, "%s step %d reads as %s", file, step, s->kind_name);
    return s;
}

Test(inspect, the_golden_states_of_every_kind_java_leaves_read_through_the_public_api)
{
    redisContext *r = crdt_redis();
    crd_client *c = crdt_client();
    /* RLock held (a: lock with the watchdog) */
    crd_state *s = golden_state(r, c, crdt_key("g_rlock"), "a_lock_unlock_watchdog.json", 0, "s1",
                                CRD_STATE_WAITERS | CRD_STATE_CLIENTS, CRD_KIND_LOCK);
    cr_assert(s->held && s->nholders == 1 && s->ttl_ms > 0);
    expect_foreign_holder(&s->holders[0], 'A', 1);
    cr_assert(s->identity_read);
    crd_state_free(s);
    /* Fair lock held by A with B and C queued (g step 2), deadlines in the future */
    s = golden_state(r, c, crdt_key("g_fair"), "g_fair_three_clients.json", 2, "f1",
                     CRD_STATE_WAITERS, CRD_KIND_FAIR_LOCK);
    expect_foreign_holder(&s->holders[0], 'A', 1);
    cr_assert_eq(s->nqueue, 2);
    cr_assert_eq(s->waiters, 2);
    cr_assert(strncmp(s->queue[0].who.client_id, "b1111111", 8) == 0, "%s", s->queue[0].owner);
    cr_assert(strncmp(s->queue[1].who.client_id, "c1111111", 8) == 0);
    cr_assert(s->queue[0].remaining_ms > 0 && s->queue[1].deadline_ms > s->queue[0].deadline_ms);
    crd_state_free(s);
    /* Read-write lock: two readers with their timeout keys (i step 1) */
    s = golden_state(r, c, crdt_key("g_rw"), "i_rw_readers_then_writer.json", 1, "rw1", 0,
                     CRD_KIND_READ_WRITE_LOCK);
    cr_assert_str_eq(s->mode, "read");
    cr_assert_eq(s->nholders, 2);
    cr_assert_eq(s->nread_holds, 2);
    for (size_t i = 0; i < 2; i++) {
        cr_assert(!s->holders[i].writer && s->holders[i].ttl_ms > 0);
        cr_assert(s->read_holds[i].ttl_ms > 0 && s->read_holds[i].index == 1);
    }
    crd_state_free(s);
    /* Fenced lock held by A with token 1 (o step 0) */
    s = golden_state(r, c, crdt_key("g_fenced"), "o_fenced_lock.json", 0, "fe1", 0,
                     CRD_KIND_FENCED_LOCK);
    cr_assert_eq(s->token, 1);
    expect_foreign_holder(&s->holders[0], 'A', 1);
    crd_state_free(s);
    /* Semaphore: sem_a step 2 (permits set) */
    s = golden_state(r, c, crdt_key("g_sem"), "sem_a_set_acquire_release.json", 2, "sem1", 0,
                     CRD_KIND_SEMAPHORE);
    cr_assert_gt(s->available, 0);
    crd_state_free(s);
    /* Permit-expirable semaphore with two permits out, one without a lease (pes_a step 2) */
    s = golden_state(r, c, crdt_key("g_pes"), "pes_a_acquire_lease_release.json", 2, "pes1", 0,
                     CRD_KIND_PERMIT_SEMAPHORE);
    cr_assert_eq(s->available, 0);
    cr_assert_eq(s->npermits, 2);
    cr_assert((s->permits[0].deadline_ms > 0) != (s->permits[1].deadline_ms > 0),
              "one permit with a lease, one without");
    crd_state_free(s);
    /* Count-down latch with a Java awaiter subscribed to its channel (cdl_b step 1); nobody
     * awaits it yet, so it reads as a semaphore. */
    const char *n = crdt_key("g_cdl");
    s = golden_state(r, c, n, "cdl_b_await_woken.json", 1, "cdl1", 0, CRD_KIND_SEMAPHORE);
    cr_assert(s->maybe_latch);
    crd_state_free(s);
    redisContext *awaiter = crdt_redis();
    redisReply *rep = crdt_cmd(awaiter, "SUBSCRIBE redisson_countdownlatch__channel__{%s}", n);
    freeReplyObject(rep);
    s = state_of(c, n, 0);
    cr_assert_eq(s->kind, CRD_KIND_LATCH, "%s", s->kind_name);
    cr_assert_eq(s->count, 1);
    cr_assert_eq(s->waiters, 1);
    crd_state_free(s);
    redisFree(awaiter);
    /* Not Redisson's: a hash of other fields, a list; and nothing */
    n = crdt_key("other");
    freeReplyObject(crdt_cmd(r, "HSET %s colour blue", n));
    s = state_of(c, n, 0);
    cr_assert_eq(s->kind, CRD_KIND_OTHER);
    cr_assert_str_eq(s->type, "hash");
    cr_assert_eq(s->nholders, 0);
    crd_state_free(s);
    s = state_of(c, crdt_key("absent"), 0);
    cr_assert_eq(s->kind, CRD_KIND_NONE);
    cr_assert_eq(s->ttl_ms, -2);
    crd_state_free(s);
    /* Bad input: a status, a message, no crash. */
    crd_state *none = NULL;
    cr_assert_eq(crd_state_read(c, "", 0, 0, &none), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_state_read(c, "x", 1, 0x1000, &none), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_state_read(c, NULL, 1, 0, &none), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_state_read(NULL, "x", 1, 0, &none), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_state_read(c, "x", 1, 0, NULL), CRD_INVALID_ARGUMENT);
    cr_assert(strstr(crd_client_errmsg(c), "NULL") != NULL, "%s", crd_client_errmsg(c));
    crd_state_free(NULL);
    crd_client_free(c);
    redisFree(r);
}

/* ---- node-redisson ------------------------------------------------------------------------ */

typedef struct node_peer {
    pid_t pid;
    FILE *in, *out;
} node_peer;

/* interop/node's driver, on the test server; false when its packages are missing. */
static bool node_start(node_peer *np)
{
    char driver[512], mods[512];
    snprintf(driver, sizeof driver, "%s/../interop/node/driver.js", CRDT_SUPPORT_DIR "/..");
    snprintf(mods, sizeof mods, "%s/../interop/node/node_modules/node-redisson/package.json",
             CRDT_SUPPORT_DIR "/..");
    if (access(mods, R_OK) != 0 || system("command -v node >/dev/null 2>&1") != 0)
        return false;
    int tochild[2], fromchild[2];
    cr_assert_eq(pipe(tochild), 0);
    cr_assert_eq(pipe(fromchild), 0);
    char port[16];
    snprintf(port, sizeof port, "%d", crdt_port());
    fflush(NULL);
    np->pid = fork();
    cr_assert(np->pid >= 0);
    if (np->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(tochild[0], 0);
        dup2(fromchild[1], 1);
        close(tochild[1]);
        close(fromchild[0]);
        execlp("node", "node", driver, "--port", port, (char *)NULL);
        _exit(99);
    }
    close(tochild[0]);
    close(fromchild[1]);
    np->in = fdopen(tochild[1], "w");
    np->out = fdopen(fromchild[0], "r");
    return true;
}

static json_t *node_cmd(node_peer *np, const char *line)
{
    fprintf(np->in, "%s\n", line);
    fflush(np->in);
    char buf[4096];
    cr_assert_not_null(fgets(buf, sizeof buf, np->out), "node-redisson said nothing to %s", line);
    json_error_t e;
    json_t *j = json_loads(buf, 0, &e);
    cr_assert_not_null(j, "%s", buf);
    return j;
}

Test(inspect, an_rlock_held_by_node_redisson_shows_its_client_and_no_identity, .timeout = 60)
{
    node_peer np;
    if (!node_start(&np)) {
        cr_log_info("[inspect] node-redisson not installed (interop/node: npm ci): the golden "
                    "states stand in for the foreign holder");
        return;
    }
    json_t *hello = node_cmd(&np, "hello");
    char id[128];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(hello, "id")));
    json_decref(hello);
    const char *name = crdt_key("node");
    char line[400];
    snprintf(line, sizeof line, "lock %s", name);
    json_t *j = node_cmd(&np, line);
    cr_assert(json_is_true(json_object_get(j, "ok")));
    json_decref(j);
    crd_client *c = crdt_client();
    crd_state *s = state_of(c, name, CRD_STATE_WAITERS | CRD_STATE_CLIENTS);
    cr_assert_eq(s->kind, CRD_KIND_LOCK);
    cr_assert_eq(s->nholders, 1);
    cr_assert_str_eq(s->holders[0].who.client_id, id);
    cr_assert(!s->holders[0].who.known);
    cr_assert(s->holders[0].ttl_ms > 0);
    char who[512];
    crd_identity_describe(&s->holders[0].who, who, sizeof who);
    cr_assert(strstr(who, id) != NULL && strstr(who, "no identity record") != NULL, "%s", who);
    cr_log_info("[inspect] node-redisson holder: %s", who);
    crd_state_free(s);
    /* A C waiter behind it is counted as the channel's subscriber. */
    crd_options o;
    ident_options(&o);
    crd_client *w = crdt_client_opts(&o);
    crd_lock *l = crdt_lock(w, name);
    cr_assert_eq(crd_lock_acquire(l, 300, CRD_LEASE_WATCHDOG), CRD_TIMEOUT);
    crd_lock_free(l);
    crd_client_free(w);
    snprintf(line, sizeof line, "unlock %s", name);
    json_decref(node_cmd(&np, line));
    json_decref(node_cmd(&np, "quit"));
    int status;
    waitpid(np.pid, &status, 0);
    crd_client_free(c);
}

/* ---- C holders of every kind ----------------------------------------------------------- */

/* Holds one object of every kind through c (names from name_of), checks each state as
 * reader sees it, and lets go. */
static void every_kind_by_c(crd_client *c, crd_client *reader, const char *(*name_of)(int, void *),
                            void *arg)
{
    const char *n_lock = name_of(0, arg), *n_fair = name_of(1, arg), *n_rw = name_of(2, arg),
               *n_fenced = name_of(3, arg), *n_sem = name_of(4, arg), *n_pes = name_of(5, arg),
               *n_latch = name_of(6, arg);
    crd_lock *lock = crdt_lock(c, n_lock), *fair = NULL, *fenced = NULL;
    crd_rwlock *rw = NULL;
    cr_assert_eq(crd_fair_lock_new(c, n_fair, &fair), CRD_OK);
    cr_assert_eq(crd_fenced_lock_new(c, n_fenced, &fenced), CRD_OK);
    cr_assert_eq(crd_rwlock_new(c, n_rw, &rw), CRD_OK);
    cr_assert_eq(crd_lock_acquire(lock, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(lock, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(fair, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(rw), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(rw), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    int64_t token = 0;
    cr_assert_eq(crd_lock_acquire_token(fenced, 0, 20000, &token), CRD_OK);
    crd_semaphore *sem = NULL;
    cr_assert_eq(crd_semaphore_new(c, n_sem, &sem), CRD_OK);
    cr_assert_eq(crd_semaphore_try_set_permits(sem, 3, 0, NULL), CRD_OK);
    cr_assert_eq(crd_semaphore_acquire(sem, 1, 0), CRD_OK);
    crd_permit_semaphore *pes = NULL;
    cr_assert_eq(crd_permit_semaphore_new(c, n_pes, &pes), CRD_OK);
    cr_assert_eq(crd_permit_semaphore_try_set_permits(pes, 2, NULL), CRD_OK);
    char permit[CRD_PERMIT_ID_SIZE];
    cr_assert_eq(crd_permit_semaphore_acquire(pes, 0, 60000, permit), CRD_OK);
    crd_latch *latch = NULL;
    cr_assert_eq(crd_latch_new(c, n_latch, &latch), CRD_OK);
    cr_assert_eq(crd_latch_try_set_count(latch, 2, NULL), CRD_OK);
    crdt_sync_waiter lw = {.l = latch, .wait_ms = 10000};
    crdt_sync_waiter_start(&lw);

    crdt_probe hp = {.c = reader, .name = n_lock};
    cr_assert(crdt_wait_until(crdt_holder_since_known, &hp, 2000), "the holder's since never showed");
    char host[256];
    gethostname(host, sizeof host);
    crd_state *s = state_of(reader, n_lock, CRD_STATE_WAITERS);
    cr_assert_eq(s->kind, CRD_KIND_LOCK);
    cr_assert_eq(s->holders[0].count, 2);
    cr_assert_str_eq(s->holders[0].who.client_id, crd_client_id(c));
    cr_assert_str_eq(s->holders[0].who.host, host);
    cr_assert_eq(s->holders[0].who.pid, getpid());
    cr_assert(s->holders[0].held_ms >= 250 && s->holders[0].held_ms < 5000, "held %lld",
              (long long)s->holders[0].held_ms);
    crd_state_free(s);
    s = state_of(reader, n_fair, 0);
    cr_assert_eq(s->kind, CRD_KIND_LOCK, "a fair lock nobody waits for reads as a lock");
    cr_assert(s->holders[0].who.known);
    crd_state_free(s);
    s = state_of(reader, n_rw, 0);
    cr_assert_eq(s->kind, CRD_KIND_READ_WRITE_LOCK);
    cr_assert_str_eq(s->mode, "write");
    cr_assert_eq(s->nholders, 2);
    cr_assert(s->holders[0].writer && !s->holders[1].writer);
    cr_assert_eq(s->nread_holds, 1);
    crd_state_free(s);
    s = state_of(reader, n_fenced, 0);
    cr_assert_eq(s->kind, CRD_KIND_FENCED_LOCK);
    cr_assert_eq(s->token, token);
    cr_assert(s->holders[0].ttl_ms > 0 && s->holders[0].ttl_ms <= 20000);
    crd_state_free(s);
    s = state_of(reader, n_sem, 0);
    cr_assert_eq(s->kind, CRD_KIND_SEMAPHORE);
    cr_assert_eq(s->available, 2);
    crd_state_free(s);
    s = state_of(reader, n_pes, 0);
    cr_assert_eq(s->kind, CRD_KIND_PERMIT_SEMAPHORE);
    cr_assert_eq(s->npermits, 1);
    cr_assert_str_eq(s->permits[0].id, permit);
    cr_assert(s->permits[0].remaining_ms > 50000);
    crd_state_free(s);
    int64_t until = crdt_now_ms() + 3000;
    for (;;) { /* the awaiter subscribes a moment after it starts */
        s = state_of(reader, n_latch, 0);
        if (s->kind == CRD_KIND_LATCH || crdt_now_ms() > until)
            break;
        crd_state_free(s);
        crdt_sleep_ms(5);
    }
    cr_assert_eq(s->kind, CRD_KIND_LATCH, "%s", s->kind_name);
    cr_assert_eq(s->count, 2);
    cr_assert_eq(s->waiters, 1);
    crd_state_free(s);

    cr_assert_eq(crd_latch_delete(latch, NULL), CRD_OK);
    crdt_sync_waiter_join(&lw, 15000, "the latch's awaiter after its delete");
    cr_assert_eq(lw.st, CRD_OK, "the latch's awaiter: %s", crd_strerror(lw.st));
    crd_latch_free(latch);
    cr_assert_eq(crd_permit_semaphore_release(pes, permit), CRD_OK);
    crd_permit_semaphore_free(pes);
    cr_assert_eq(crd_semaphore_release(sem, 1), CRD_OK);
    crd_semaphore_free(sem);
    /* The reentrant lock is held twice. */
    crd_lock *held[] = {fenced, crd_rwlock_read(rw), crd_rwlock_write(rw), fair, lock, lock};
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++)
        cr_assert_eq(crd_lock_release(held[i]), CRD_OK, "release %zu", i);
    crd_lock_free(lock);
    crd_lock_free(fair);
    crd_lock_free(fenced);
    crd_rwlock_free(rw);
}

static const char *standalone_name(int i, void *arg)
{
    (void)arg;
    static const char *const s[] = {"lock", "fair", "rw", "fenced", "sem", "pes", "latch"};
    return crdt_key(s[i]);
}

Test(inspect, every_kind_held_by_c_reads_with_its_holders_identity, .timeout = 60)
{
    crd_options o;
    ident_options(&o);
    crd_client *c = crdt_client_opts(&o), *reader = crdt_client();
    every_kind_by_c(c, reader, standalone_name, NULL);
    crd_client_free(c);
    crd_client_free(reader);
}

/* Names on the cluster's three primaries in turn. */
static const char *cluster_name(int i, void *arg)
{
    static const char *const s[] = {"lock", "fair", "rw", "fenced", "sem", "pes", "latch"};
    return crdt_cluster_name_on(arg, i % 3, s[i]);
}

static size_t scan_count(crd_client *c, const char *pattern, unsigned flags)
{
    crd_scan *scan = NULL;
    cr_assert_eq(crd_scan_new(c, pattern, 10, flags, &scan), CRD_OK);
    size_t n = 0;
    for (;;) {
        crd_state *s = NULL;
        crd_status st = crd_scan_next(scan, 0, &s);
        cr_assert_eq(st, CRD_OK, "%s", crd_client_errmsg(c));
        if (s == NULL)
            break;
        n++;
        crd_state_free(s);
    }
    bool complete = false;
    crd_scan_progress(scan, NULL, &complete);
    cr_assert(complete);
    crd_scan_free(scan);
    return n;
}

Test(inspect, every_kind_on_a_cluster_and_the_scan_covers_every_primary, .timeout = 120)
{
    crdt_cluster cl;
    crdt_cluster_start(&cl, 3, 0);
    crd_options o;
    crdt_cluster_options(&cl, &o);
    o.identity = true;
    crd_client *c = crdt_client_opts(&o);
    crdt_cluster_options(&cl, &o);
    crd_client *reader = crdt_client_opts(&o);
    every_kind_by_c(c, reader, cluster_name, &cl);
    /* The golden states of a Java fleet on the cluster, on three different primaries. */
    const char *names[3];
    for (int i = 0; i < 3; i++) {
        names[i] = crdt_cluster_name_on(&cl, i, "java");
        redisContext *r = crdt_cluster_redis_for_key(&cl, names[i]);
        write_golden_state(r, "g_fair_three_clients.json", 2, "f1", names[i]);
        redisFree(r);
    }
    for (int i = 0; i < 3; i++) {
        crd_state *s = state_of(reader, names[i], CRD_STATE_WAITERS);
        cr_assert_eq(s->kind, CRD_KIND_FAIR_LOCK);
        cr_assert_eq(s->nqueue, 2);
        expect_foreign_holder(&s->holders[0], 'A', 1);
        crd_state_free(s);
    }
    char pattern[300];
    snprintf(pattern, sizeof pattern, "%s*", crdt_key_prefix());
    /* Every node's keys, each object once: the three fair locks (their queues and
     * deadlines are parts of them, not objects). */
    size_t n = scan_count(reader, pattern, CRD_SCAN_HELD_ONLY);
    cr_assert_eq(n, 3, "the scan found %zu objects", n);
    crd_client_free(c);
    crd_client_free(reader);
    crdt_cluster_stop(&cl);
}

/* Redisson 4.7's kinds: the spin and non-reentrant locks share RLock's hash and read as a
 * lock with their holder; a grouped multi-lock reads as a group whose holder holds its
 * values; a rate limiter as a rate limiter with no holder, and a scan does not take its
 * state keys for semaphores. */
Test(inspect, redisson_4_7_kinds_read_as_their_kind_and_never_as_another)
{
    crd_options o;
    ident_options(&o);
    crd_client *c = crdt_client_opts(&o), *reader = crdt_client();
    char n_spin[300], n_nr[300], n_group[300], n_rate[300], pattern[300];
    snprintf(n_spin, sizeof n_spin, "%s", crdt_key("spin"));
    snprintf(n_nr, sizeof n_nr, "%s", crdt_key("nr"));
    snprintf(n_group, sizeof n_group, "%s", crdt_key("group"));
    snprintf(n_rate, sizeof n_rate, "%s", crdt_key("rate"));
    crd_lock *spin = NULL, *nr = NULL, *group = NULL;
    cr_assert_eq(crd_spin_lock_new(c, n_spin, &spin), CRD_OK);
    cr_assert_eq(crd_nonreentrant_lock_new(c, n_nr, &nr), CRD_OK);
    const char *const values[] = {"a", "b", "c"};
    cr_assert_eq(crd_group_lock_new(c, n_group, values, 3, &group), CRD_OK);
    cr_assert_eq(crd_lock_acquire(spin, 0, 20000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(nr, 0, 20000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(group, 0, 20000), CRD_OK);
    crd_rate_limiter *rl = NULL;
    cr_assert_eq(crd_rate_limiter_new(c, n_rate, &rl), CRD_OK);
    crd_rate_config cfg = {.mode = CRD_RATE_OVERALL, .rate = 5, .interval_ms = 60000};
    cr_assert_eq(crd_rate_limiter_try_set_rate(rl, &cfg, NULL), CRD_OK);
    cr_assert_eq(crd_rate_limiter_acquire(rl, 1, 0), CRD_OK);

    const char *const locks[] = {n_spin, n_nr};
    for (size_t i = 0; i < 2; i++) {
        crd_state *s = state_of(reader, locks[i], 0);
        cr_assert_eq(s->kind, CRD_KIND_LOCK, "%s: %s", locks[i], s->kind_name);
        cr_assert_eq(s->nholders, 1);
        cr_assert_str_eq(s->holders[0].who.client_id, crd_client_id(c));
        crd_state_free(s);
    }
    /* The identity record lists a group's hold under the group's name. */
    crdt_probe hp = {.c = reader, .name = n_group};
    cr_assert(crdt_wait_until(crdt_holder_since_known, &hp, 2000), "the group holder's since never showed");
    crd_state *s = state_of(reader, n_group, 0);
    cr_assert_eq(s->kind, CRD_KIND_GROUP_LOCK, "%s", s->kind_name);
    cr_assert_str_eq(s->kind_name, "group");
    cr_assert_eq(s->nholders, 1);
    cr_assert_eq(s->holders[0].count, 3, "the holder holds the 3 values");
    cr_assert(s->holders[0].ttl_ms > 0 && s->holders[0].ttl_ms <= 20000, "ttl %lld",
              (long long)s->holders[0].ttl_ms);
    cr_assert_str_eq(s->holders[0].who.client_id, crd_client_id(c));
    crd_state_free(s);
    s = state_of(reader, n_rate, 0);
    cr_assert_eq(s->kind, CRD_KIND_RATE_LIMITER, "%s", s->kind_name);
    cr_assert_str_eq(s->kind_name, "rate_limiter");
    cr_assert_eq(s->nholders, 0);
    crd_state_free(s);
    /* The limiter's {N}:value is no semaphore of its own: the scan lists the limiter once. */
    snprintf(pattern, sizeof pattern, "*%s*", crdt_key("rate"));
    cr_assert_eq(scan_count(reader, pattern, CRD_SCAN_SYNCS), 1);
    cr_assert_eq(scan_count(reader, pattern, CRD_SCAN_HELD_ONLY), 0);

    cr_assert_eq(crd_rate_limiter_delete(rl, NULL), CRD_OK);
    crd_rate_limiter_free(rl);
    crd_lock *held[] = {group, nr, spin};
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++) {
        cr_assert_eq(crd_lock_release(held[i]), CRD_OK, "release %zu", i);
        crd_lock_free(held[i]);
    }
    crd_client_free(reader);
    crd_client_free(c);
}

/* The next event of kind want (others skipped), within timeout_ms; NULL when none came. */
static const crd_watch_event *next_of(crd_watch *w, crd_watch_kind want, int64_t timeout_ms)
{
    int64_t until = crdt_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = until - crdt_now_ms();
        const crd_watch_event *ev = NULL;
        if (left <= 0 || crd_watch_next(w, left, &ev) != CRD_OK)
            return NULL;
        if (ev->kind == want)
            return ev;
    }
}

Test(inspect, crd_watch_follows_redisson_4_7_s_group_and_spin_locks_with_their_holder, .timeout = 60)
{
    crd_options o;
    ident_options(&o);
    crd_client *c = crdt_client_opts(&o), *reader = crdt_client();
    char n_group[300], n_spin[300];
    snprintf(n_group, sizeof n_group, "%s", crdt_key("wgroup"));
    snprintf(n_spin, sizeof n_spin, "%s", crdt_key("wspin"));
    crd_lock *group = NULL, *spin = NULL;
    const char *const values[] = {"x", "y", "z"};
    cr_assert_eq(crd_group_lock_new(c, n_group, values, 3, &group), CRD_OK);
    cr_assert_eq(crd_spin_lock_new(c, n_spin, &spin), CRD_OK);
    crd_watch *wg = NULL, *ws = NULL;
    cr_assert_eq(crd_watch_new(reader, n_group, strlen(n_group), 0, &wg), CRD_OK);
    cr_assert_eq(crd_watch_new(reader, n_spin, strlen(n_spin), 0, &ws), CRD_OK);
    /* The first crd_watch_next makes each watch's first read (nothing held yet: what comes
     * is a notice at most). */
    const crd_watch_event *first = NULL;
    while (crd_watch_next(wg, 0, &first) == CRD_OK)
        cr_assert_eq(first->kind, CRD_WATCH_NOTICE);
    while (crd_watch_next(ws, 0, &first) == CRD_OK)
        cr_assert_eq(first->kind, CRD_WATCH_NOTICE);
    /* The client's record is written just after it starts (its watchdog thread): the
     * acquire's event names the process once it is there. */
    redisContext *r = crdt_redis();
    char rec_key[128];
    snprintf(rec_key, sizeof rec_key, "{credisson}:client:%s", crd_client_id(c));
    crdt_probe rp = {.r = r, .name = rec_key, .n = 1};
    cr_assert(crdt_wait_until(crdt_key_exists_is, &rp, 5000), "the client's record never came");

    /* The group: one holder of its 3 values, its process named; the release publishes. */
    cr_assert_eq(crd_lock_acquire(group, 0, 20000), CRD_OK);
    const crd_watch_event *ev = next_of(wg, CRD_WATCH_ACQUIRE, 5000);
    cr_assert_not_null(ev, "no acquire event of the group");
    cr_assert_eq(ev->count, 3, "the group's holder holds %lld values", (long long)ev->count);
    cr_assert_str_eq(ev->who.client_id, crd_client_id(c));
    cr_assert(ev->who.known && ev->who.pid == getpid(), "the group's holder is not named");
    cr_assert_eq(crd_lock_release(group), CRD_OK);
    ev = next_of(wg, CRD_WATCH_RELEASE, 5000);
    cr_assert_not_null(ev, "no release event of the group");
    cr_assert_str_eq(ev->cause, "unlock");

    /* The spin lock publishes nothing: its release is seen as the key's removal. */
    cr_assert_eq(crd_lock_acquire(spin, 0, 20000), CRD_OK);
    ev = next_of(ws, CRD_WATCH_ACQUIRE, 5000);
    cr_assert_not_null(ev, "no acquire event of the spin lock");
    cr_assert_eq(ev->count, 1);
    cr_assert_str_eq(ev->who.client_id, crd_client_id(c));
    cr_assert_eq(crd_lock_release(spin), CRD_OK);
    ev = next_of(ws, CRD_WATCH_RELEASE, 5000);
    cr_assert_not_null(ev, "no release event of the spin lock");
    cr_assert_str_eq(ev->cause, "removed");

    crd_watch_free(wg);
    crd_watch_free(ws);
    crd_lock_free(group);
    crd_lock_free(spin);
    crd_client_free(reader);
    crd_client_free(c);
    redisFree(r);
}

/* True when the record's "pid" field is there (the record written whole). */
static bool record_whole(void *probe)
{
    crdt_probe *p = probe;
    return crdt_cmd_int(p->r, "HEXISTS %s pid", p->name) == 1;
}

Test(inspect, a_watch_names_a_holder_whose_record_was_partial_when_the_watch_read_it, .timeout = 60)
{
    crd_options o;
    ident_options(&o);
    o.watchdog_timeout_ms = 1500; /* the record is written whole every 500 ms */
    crd_client *c = crdt_client_opts(&o), *reader = crdt_client();
    redisContext *r = crdt_redis();
    char rec_key[128], name[300];
    snprintf(rec_key, sizeof rec_key, "{credisson}:client:%s", crd_client_id(c));
    snprintf(name, sizeof name, "%s", crdt_key("late"));
    crdt_probe rp = {.r = r, .name = rec_key};
    cr_assert(crdt_wait_until(record_whole, &rp, 5000), "the client's record never came");
    crd_lock *l = crdt_lock(c, name);
    crd_watch *w = NULL;
    cr_assert_eq(crd_watch_new(reader, name, strlen(name), 0, &w), CRD_OK);
    const crd_watch_event *ev = NULL;
    while (crd_watch_next(w, 0, &ev) == CRD_OK)
        cr_assert_eq(ev->kind, CRD_WATCH_NOTICE);
    /* The record gone and a hold's field written into it (as when it expired and a change
     * was written before the whole record): the watch reads it without its process at an
     * acquire. The writer puts it back whole within 500 ms, so this is tried until an
     * event saw it so. */
    bool seen_unknown = false;
    for (int i = 0; i < 20 && !seen_unknown; i++) {
        freeReplyObject(crdt_cmd(r, "DEL %s", rec_key));
        freeReplyObject(crdt_cmd(r, "HSET %s h:1:%s 1", rec_key, crdt_key("other")));
        cr_assert_eq(crd_lock_acquire(l, 0, 20000), CRD_OK);
        ev = next_of(w, CRD_WATCH_ACQUIRE, 5000);
        cr_assert_not_null(ev, "no acquire event");
        cr_assert_str_eq(ev->who.client_id, crd_client_id(c));
        seen_unknown = !ev->who.known || ev->who.pid == 0;
        cr_assert_eq(crd_lock_release(l), CRD_OK);
        cr_assert_not_null(next_of(w, CRD_WATCH_RELEASE, 5000), "no release event");
    }
    cr_assert(seen_unknown, "no acquire event ever saw the record missing");
    /* Once it is back, a later acquire's event names the process. */
    cr_assert(crdt_wait_until(record_whole, &rp, 5000), "the record was never rewritten");
    bool named = false;
    int64_t until = crdt_now_ms() + 5000;
    while (!named && crdt_now_ms() < until) {
        cr_assert_eq(crd_lock_acquire(l, 0, 20000), CRD_OK);
        ev = next_of(w, CRD_WATCH_ACQUIRE, 5000);
        cr_assert_not_null(ev, "no acquire event");
        named = ev->who.known && ev->who.pid == getpid();
        cr_assert_eq(crd_lock_release(l), CRD_OK);
        cr_assert_not_null(next_of(w, CRD_WATCH_RELEASE, 5000), "no release event");
    }
    cr_assert(named, "the watch never named the holder once its record was back");
    crd_watch_free(w);
    crd_lock_free(l);
    crd_client_free(reader);
    crd_client_free(c);
    redisFree(r);
}

Test(inspect, the_scan_returns_each_object_once_and_skips_their_parts)
{
    crdt_fixture f;
    crdt_fixture_open_opts(&f, 1, "scan", NULL, NULL, NULL);
    crd_client *c = f.a;
    char pattern[300];
    snprintf(pattern, sizeof pattern, "%s*", crdt_key_prefix());
    for (int i = 0; i < 25; i++) {
        char n[300];
        snprintf(n, sizeof n, "%s%d", f.key, i);
        write_golden_state(f.r, "g_fair_three_clients.json", 2, "f1", n);
    }
    write_golden_state(f.r, "pes_a_acquire_lease_release.json", 2, "pes1", crdt_key("scanpes"));
    write_golden_state(f.r, "sem_a_set_acquire_release.json", 2, "sem1", crdt_key("scansem"));
    freeReplyObject(crdt_cmd(f.r, "SET %s notanumber", crdt_key("plain")));
    cr_assert_eq(scan_count(c, pattern, CRD_SCAN_HELD_ONLY), 26);
    cr_assert_eq(scan_count(c, pattern, CRD_SCAN_SYNCS), 27);
    crd_scan *scan = NULL;
    cr_assert_eq(crd_scan_new(c, pattern, 200000, 0, &scan), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_scan_new(c, pattern, 10, 1u << 20, &scan), CRD_INVALID_ARGUMENT);
    cr_assert_eq(crd_scan_next(NULL, 0, NULL), CRD_INVALID_ARGUMENT);
    crd_scan_free(NULL);
    crdt_fixture_close(&f);
}

/* ---- one holder, three waiters, in other processes ------------------------------------------ */

static const char *test_url(void)
{
    static char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", crdt_port());
    return url;
}

static json_t *status_json(const char *name)
{
    char *out = NULL, *err = NULL;
    int rc = crdt_cli_run((const char *[]){"--url", test_url(), "status", "--json", name, NULL},
                          10000, &out, &err);
    cr_assert_eq(rc, 0, "stderr: %s", err);
    json_error_t e;
    json_t *j = json_loads(out, 0, &e);
    cr_assert_not_null(j, "%s", out);
    free(out);
    free(err);
    return j;
}

static int64_t jint(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }
static const char *jstr(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* The holder of status --json j is holder's process: host, pid, program and its age. */
static void expect_holder_is(json_t *j, const crdt_proc *holder, const char *name)
{
    json_t *h = json_array_get(json_object_get(j, "holders"), 0);
    cr_assert_not_null(h, "no holder");
    json_t *who = json_object_get(h, "who");
    char host[256];
    gethostname(host, sizeof host);
    cr_assert(json_is_true(json_object_get(who, "known")));
    cr_assert_str_eq(jstr(who, "host"), host);
    cr_assert_eq(jint(who, "pid"), holder->pid);
    /* Its command line (cut at 200 bytes: the test's names are long). */
    const char *prog = jstr(who, "program");
    cr_assert(strncmp(prog, CRD_CLI_PATH, strlen(CRD_CLI_PATH)) == 0 &&
                  strstr(prog, " --label holder run ") != NULL,
              "%s", prog);
    (void)name;
    cr_assert_geq(jint(h, "held_ms"), 250);
}

/* What holder_and_three_waiters waits for: name held, want known waiters (fair: queued). */
typedef struct ready {
    const char *name;
    bool fair;
    size_t want;
} ready;

/* status --json says want waiters, each one known (non-fair: listed in "waiting"). */
static bool status_ready(void *arg)
{
    ready *rd = arg;
    json_t *j = status_json(rd->name);
    json_t *list = json_object_get(j, rd->fair ? "queue" : "waiting");
    bool ok = jint(j, "waiters") == (int64_t)rd->want && json_array_size(list) == rd->want;
    json_t *h = json_array_get(json_object_get(j, "holders"), 0);
    ok = ok && h != NULL && json_is_integer(json_object_get(h, "held_ms"));
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) ok = ok && json_is_true(json_object_get(json_object_get(e, "who"), "known"));
    json_decref(j);
    return ok;
}

/* The same through the library in this process. */
static bool state_ready(void *arg)
{
    ready *p = arg;
    static crd_client *c;
    if (c == NULL)
        c = crdt_client();
    crd_state *s = NULL;
    if (crd_state_read(c, p->name, strlen(p->name), CRD_STATE_WAITERS, &s) != CRD_OK)
        return false;
    const crd_waiter *w = p->fair ? s->queue : s->known_waiters;
    size_t n = p->fair ? s->nqueue_listed : s->nknown_waiters;
    bool ok = s->waiters == (int64_t)p->want && n == p->want && s->nholders == 1 &&
              s->holders[0].who.known && s->holders[0].held_ms >= 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = w[i].who.known;
    crd_state_free(s);
    return ok;
}

static void holder_and_three_waiters(bool fair)
{
    redisContext *r = crdt_redis();
    const char *name = crdt_key(fair ? "fair3" : "lock3");
    crdt_proc holder, w[3];
    if (fair)
        crdt_cli_start(&holder, (const char *[]){"--url", test_url(), "--label", "holder", "run",
                                                 "--fair", name, "--", "sleep", "30", NULL});
    else
        crdt_cli_start(&holder, (const char *[]){"--url", test_url(), "--label", "holder", "run",
                                                 name, "--", "sleep", "30", NULL});
    cr_assert(crdt_await_exists(r, name, true, 10000), "the holder never held");
    char channel[400], queue[400];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    snprintf(queue, sizeof queue, "redisson_lock_queue:{%s}", name);
    int64_t changed = 0;
    for (int i = 0; i < 3; i++) {
        if (fair)
            crdt_cli_start(&w[i], (const char *[]){"--url", test_url(), "run", "--wait", "30000",
                                                   "--fair", name, "--", "true", NULL});
        else
            crdt_cli_start(&w[i], (const char *[]){"--url", test_url(), "run", "--wait", "30000",
                                                   name, "--", "true", NULL});
        /* One after another, so that a fair queue's order is theirs. */
        int64_t until = crdt_now_ms() + 10000;
        for (;;) {
            long long n = fair ? crdt_cmd_int(r, "LLEN %s", queue) : crdt_numsub(r, channel);
            /* non-fair: the holder's own prompt-loss subscription, and one per waiter */
            if (n >= (fair ? i + 1 : i + 2))
                break;
            cr_assert_lt(crdt_now_ms(), until, "waiter %d never waited", i);
            crdt_sleep_ms(2);
        }
        changed = crdt_now_ms();
    }
    /* Within 1 s of the last waiter's arrival the state says it all: read in this process
     * (the library's promptness), then by `credisson status` (the same, plus the CLI's own
     * start; under a sanitizer each CLI run starts slower: 3 s there). */
    ready rd = {name, fair, 3};
    cr_assert(crdt_wait_until(state_ready, &rd, 3000), "the state never showed 3 known waiters");
    int64_t took_lib = crdt_now_ms() - changed;
    cr_assert(crdt_wait_until(status_ready, &rd, 3000), "status never showed 3 known waiters");
    int64_t took = crdt_now_ms() - changed;
    cr_log_info("[inspect] %s: the holder and 3 known waiters %lld ms (crd_state_read) and %lld ms "
                "(credisson status) after the third began to wait", fair ? "fair" : "rlock",
                (long long)took_lib, (long long)took);
    cr_assert_leq(took_lib, 1000, "%lld ms", (long long)took_lib);
    cr_assert_leq(took, CRDT_SANITIZED ? 3000 : 1000, "%lld ms", (long long)took);
    json_t *j = status_json(name);
    expect_holder_is(j, &holder, name);
    if (fair) {
        cr_assert_str_eq(jstr(j, "kind"), "fair");
        for (int i = 0; i < 3; i++) {
            json_t *e = json_array_get(json_object_get(j, "queue"), (size_t)i);
            cr_assert_eq(jint(json_object_get(e, "who"), "pid"), w[i].pid, "queue entry %d", i);
        }
    } else {
        cr_assert_str_eq(jstr(j, "kind"), "rlock");
        cr_assert_eq(jint(j, "subscribers"), 4);
        for (int i = 0; i < 3; i++) {
            json_t *e = json_array_get(json_object_get(j, "waiting"), (size_t)i);
            pid_t pid = (pid_t)jint(json_object_get(e, "who"), "pid");
            cr_assert(pid == w[0].pid || pid == w[1].pid || pid == w[2].pid);
        }
    }
    json_decref(j);
    /* The text form names the process and the age. */
    char *out = NULL;
    cr_assert_eq(crdt_cli_run((const char *[]){"--url", test_url(), "status", name, NULL}, 10000,
                              &out, NULL),
                 0);
    char host[256], want[400];
    gethostname(host, sizeof host);
    snprintf(want, sizeof want, "  who: %s pid %d ", host, (int)holder.pid);
    cr_assert(strstr(out, want) != NULL && strstr(out, "[holder], held ") != NULL, "%s", out);
    if (!fair)
        cr_assert(strstr(out, "\nwaiters: 3 (subscribers of the channel: 4)\n") != NULL, "%s", out);
    cr_log_info("[inspect] status:\n%s", out);
    free(out);
    /* list --json says the same. */
    cr_assert_eq(crdt_cli_run((const char *[]){"--url", test_url(), "list", "--json", name, NULL},
                              10000, &out, NULL),
                 0);
    json_error_t e;
    json_t *l = json_loads(out, 0, &e);
    cr_assert_not_null(l, "%s", out);
    json_t *entry = json_array_get(json_object_get(l, "locks"), 0);
    cr_assert_not_null(entry, "%s", out);
    cr_assert_eq(jint(entry, "waiters"), 3, "%s", out);
    if (fair)
        cr_assert_eq(jint(entry, "queue"), 3);
    expect_holder_is(entry, &holder, name);
    json_decref(l);
    free(out);
    /* The holder ends; the waiters run one after the other. */
    kill(holder.pid, SIGTERM);
    crdt_proc_finish(&holder, 10000, NULL, NULL);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(crdt_proc_finish(&w[i], 20000, NULL, NULL), 0);
    redisFree(r);
}

Test(inspect, status_and_list_name_the_holder_and_count_three_waiters_of_a_lock, .timeout = 60)
{
    holder_and_three_waiters(false);
}

Test(inspect, status_and_list_name_the_holder_and_list_three_fair_waiters_in_order,
     .timeout = 60)
{
    holder_and_three_waiters(true);
}
