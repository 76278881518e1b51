/*
 * test_identity.c -- the holder identity record (issue #45, part 2): what a client writes
 * of itself ({credisson}:client:<uuid>, listed in {credisson}:clients), that it lists the
 * holds and waits older than 250 ms with since when and drops them when they end, that a
 * client freed leaves nothing and one killed with SIGKILL leaves nothing after the
 * record's TTL, that the command line can be left out, and that the acquire/release path
 * sends no identity command (commands counted per pair with on_trace).
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define REGISTRY "{credisson}:clients"

static void record_key(crd_client *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "{credisson}:client:%s", crd_client_id(c));
}

/* crdt_options() with the identity on (the harness turns it off). */
static void ident_options(crd_options *o)
{
    crdt_options(o);
    o->identity = true;
}

/* HGET as a string ("" for none), into buf. */
static const char *hget(redisContext *r, const char *key, const char *field, char *buf, size_t cap)
{
    redisReply *rep = crdt_cmd(r, "HGET %s %s", key, field);
    snprintf(buf, cap, "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
    return buf;
}

typedef struct field_probe {
    redisContext *r;
    const char *key;
    char field[512];
    bool present;
} field_probe;

static bool field_is(void *arg)
{
    field_probe *p = arg;
    redisReply *rep = crdt_cmd(p->r, "HEXISTS %s %b", p->key, p->field, strlen(p->field));
    bool there = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
    freeReplyObject(rep);
    return there == p->present;
}

Test(identity, a_client_writes_who_it_is_and_crd_client_free_leaves_nothing)
{
    redisContext *r = crdt_redis();
    crd_options o;
    ident_options(&o);
    o.identity_label = "billing-nightly";
    int64_t before = crdt_now_ms();
    crd_client *c = crdt_client_opts(&o);
    char key[128];
    record_key(c, key, sizeof key);
    cr_assert(crdt_await_exists(r, key, true, 2000), "no identity record within 2 s");
    int64_t took = crdt_now_ms() - before;
    char v[512], host[256];
    gethostname(host, sizeof host);
    cr_assert_str_eq(hget(r, key, "host", v, sizeof v), host);
    char pid[24];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    cr_assert_str_eq(hget(r, key, "pid", v, sizeof v), pid);
    /* The command line as /proc/self/cmdline has it (a Criterion worker's: it renames
     * itself), arguments joined by spaces. */
    char cmdline[256] = "";
    FILE *f = fopen("/proc/self/cmdline", "r");
    size_t n = f != NULL ? fread(cmdline, 1, sizeof cmdline - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    while (n > 0 && cmdline[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        cmdline[i] = cmdline[i] == '\0' ? ' ' : cmdline[i];
    cmdline[n] = '\0';
    cr_assert(n > 0);
    cr_assert_str_eq(hget(r, key, "program", v, sizeof v), cmdline);
    cr_assert_str_eq(hget(r, key, "version", v, sizeof v), CRD_VERSION_STRING);
    cr_assert_str_eq(hget(r, key, "label", v, sizeof v), "billing-nightly");
    cr_assert_str_eq(hget(r, key, "lib", v, sizeof v), "credisson");
    cr_assert(atoll(hget(r, key, "started_ms", v, sizeof v)) > 1600000000000LL, "%s", v);
    long long ttl = crdt_pttl(r, key);
    cr_assert(ttl > 0 && ttl <= o.watchdog_timeout_ms, "pttl %lld", ttl);
    redisReply *z = crdt_cmd(r, "ZSCORE %s %s", REGISTRY, crd_client_id(c));
    cr_assert_eq(z->type, REDIS_REPLY_STRING, "not in the registry");
    freeReplyObject(z);
    cr_log_info("[identity] record written %lld ms after crd_client_new began", (long long)took);

    /* crd_client_set_label reaches the record at the next tick. */
    cr_assert_eq(crd_client_set_label(c, "trace-4711"), CRD_OK);
    int64_t t0 = crdt_now_ms();
    bool labelled = false;
    while (!labelled && crdt_now_ms() - t0 < 1000) {
        labelled = strcmp(hget(r, key, "label", v, sizeof v), "trace-4711") == 0;
        if (!labelled)
            crdt_sleep_ms(5);
    }
    cr_assert(labelled, "label still %s", v);
    char toolong[300];
    memset(toolong, 'x', sizeof toolong - 1);
    toolong[sizeof toolong - 1] = '\0';
    cr_assert_eq(crd_client_set_label(c, toolong), CRD_INVALID_ARGUMENT);

    char uuid[40];
    snprintf(uuid, sizeof uuid, "%s", crd_client_id(c));
    crd_client_free(c);
    /* Nothing of it is left: deleted by crd_client_free itself, not by a TTL. */
    cr_assert_eq(crdt_exists(r, key), 0);
    z = crdt_cmd(r, "ZSCORE %s %s", REGISTRY, uuid);
    cr_assert_eq(z->type, REDIS_REPLY_NIL, "still in the registry");
    freeReplyObject(z);
    redisFree(r);
}

/* A thread that waits up to 10 s for l under an owner of its own. */
struct wait_arg {
    crd_lock *l;
    _Atomic uint64_t owner;
    crd_status st;
};

static void *wait_for_lock(void *arg)
{
    struct wait_arg *w = arg;
    uint64_t owner = crd_owner_new();
    atomic_store(&w->owner, owner);
    w->st = crd_lock_acquire_owner(w->l, owner, 10000, CRD_LEASE_WATCHDOG);
    return NULL;
}

Test(identity, holds_and_waits_older_than_250_ms_are_listed_and_dropped_when_they_end)
{
    redisContext *r = crdt_redis();
    crd_options o;
    ident_options(&o);
    o.prompt_loss_detection = true;
    crd_client *a = crdt_client_opts(&o), *b = crdt_client_opts(&o);
    const char *name = crdt_key("held");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    char ka[128], kb[128];
    record_key(a, ka, sizeof ka);
    record_key(b, kb, sizeof kb);
    int64_t epoch0 = 0;
    {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        epoch0 = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    cr_assert_eq(crd_lock_acquire(la, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    int64_t held_at = crdt_now_ms();
    field_probe p = {.r = r, .key = ka, .present = true};
    snprintf(p.field, sizeof p.field, "h:%llu:%s", (unsigned long long)crd_owner_current(), name);
    cr_assert(crdt_wait_until(field_is, &p, 1000), "the hold was not listed within 1 s");
    int64_t listed = crdt_now_ms() - held_at;
    cr_assert_geq(listed, 200, "listed after %lld ms: younger than 250 ms", (long long)listed);
    char v[128];
    redisReply *rep = crdt_cmd(r, "HGET %s %s", ka, p.field);
    snprintf(v, sizeof v, "%s", rep->str);
    freeReplyObject(rep);
    long long since = atoll(v);
    cr_assert(since >= epoch0 - 5 && since <= epoch0 + 200, "since %lld, acquired ~%lld", since,
              (long long)epoch0);
    cr_assert(strstr(v, " w") != NULL, "prompt loss detection's subscription not declared: %s", v);
    cr_log_info("[identity] a hold listed %lld ms after its acquire", (long long)listed);

    /* A waiter of another client: listed while it waits, a hold once it has the lock. */
    struct wait_arg w = {.l = lb};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, wait_for_lock, &w), 0);
    while (atomic_load(&w.owner) == 0)
        crdt_sleep_ms(1);
    field_probe pw = {.r = r, .key = kb, .present = true};
    snprintf(pw.field, sizeof pw.field, "w:%llu:%s", (unsigned long long)atomic_load(&w.owner),
             name);
    cr_assert(crdt_wait_until(field_is, &pw, 1000), "the waiter was not listed within 1 s");
    /* The release: the hold's entry goes, the waiter's turns into a hold. */
    cr_assert_eq(crd_lock_release(la), CRD_OK);
    p.present = false;
    cr_assert(crdt_wait_until(field_is, &p, 1000), "the released hold still listed after 1 s");
    pthread_join(th, NULL);
    cr_assert_eq(w.st, CRD_OK);
    pw.present = false;
    cr_assert(crdt_wait_until(field_is, &pw, 1000), "the wait still listed after 1 s");
    field_probe ph = {.r = r, .key = kb, .present = true};
    snprintf(ph.field, sizeof ph.field, "h:%llu:%s", (unsigned long long)atomic_load(&w.owner),
             name);
    cr_assert(crdt_wait_until(field_is, &ph, 1000), "the new hold not listed within 1 s");
    cr_assert_eq(crd_lock_release_owner(lb, atomic_load(&w.owner)), CRD_OK);
    ph.present = false;
    cr_assert(crdt_wait_until(field_is, &ph, 1000));
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
    redisFree(r);
}

Test(identity, a_client_that_leaves_the_command_line_out_names_only_its_executable)
{
    redisContext *r = crdt_redis();
    crd_options o;
    ident_options(&o);
    o.identity_cmdline = false;
    crd_client *c = crdt_client_opts(&o);
    char key[128], v[512];
    record_key(c, key, sizeof key);
    cr_assert(crdt_await_exists(r, key, true, 2000));
    /* /proc/self/comm: the executable's name, none of its arguments (--jobs ...). */
    cr_assert_str_eq(hget(r, key, "program", v, sizeof v), "test_identity");
    crd_client_free(c);

    /* And a client with identity off writes nothing at all. */
    crdt_options(&o);
    c = crdt_client_opts(&o);
    record_key(c, key, sizeof key);
    const char *name = crdt_key("quiet");
    crd_lock *l = crdt_lock(c, name);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crdt_sleep_ms(600); /* two ticks' worth: what would have been written by now */
    cr_assert_eq(crdt_exists(r, key), 0);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
}

/* The child of the SIGKILL test: a client with a 1.5 s TTL holding a lock, its uuid on fd. */
static int killed_child(void *arg)
{
    int fd = *(int *)arg;
    crd_options o;
    ident_options(&o);
    o.watchdog_timeout_ms = 1500;
    crd_client *c = NULL;
    if (crd_client_new(&o, &c) != CRD_OK)
        return 1;
    crd_lock *l = NULL;
    if (crd_lock_new(c, crdt_key("killed"), &l) != CRD_OK ||
        crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG) != CRD_OK)
        return 2;
    if (write(fd, crd_client_id(c), 36) != 36)
        return 3;
    for (;;)
        pause();
}

Test(identity, the_record_of_a_client_killed_with_sigkill_disappears_by_its_ttl)
{
    redisContext *r = crdt_redis();
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = crdt_fork(killed_child, &fds[1]);
    char uuid[40] = "";
    cr_assert_eq(read(fds[0], uuid, 36), 36, "the child never held its lock");
    close(fds[0]);
    close(fds[1]);
    char key[128];
    snprintf(key, sizeof key, "{credisson}:client:%s", uuid);
    cr_assert(crdt_await_exists(r, key, true, 2000), "the child wrote no record");
    /* Renewed while it lives: still there after twice its TTL... */
    crdt_sleep_ms(1600);
    cr_assert_eq(crdt_exists(r, key), 1, "the live child's record was not renewed");
    kill(pid, SIGKILL);
    int64_t killed = crdt_now_ms();
    int status;
    waitpid(pid, &status, 0);
    /* ...and gone by its TTL (1.5 s) once nobody renews it. */
    cr_assert(crdt_await_exists(r, key, false, 3000), "the record outlived its TTL");
    int64_t gone = crdt_now_ms() - killed;
    cr_assert_leq(gone, 1500 + 250, "gone %lld ms after the kill, TTL 1500", (long long)gone);
    cr_log_info("[identity] a SIGKILLed client's record expired %lld ms after the kill (TTL 1500)",
                (long long)gone);
    redisFree(r);
}

/* on_trace: counts the commands the client sends (not the subscriber's), and among them
 * the identity record's (a key in the slot of "{credisson}"). */
static atomic_long ident_cmds;

static void count_cmd(void *user, const crd_trace *t)
{
    if (t->subscriber)
        return;
    atomic_fetch_add((atomic_long *)user, 1);
    for (int i = 0; i < t->argc; i++)
        if (t->argvlen[i] >= 12 && memcmp(t->argv[i], "{credisson}:", 12) == 0) {
            atomic_fetch_add(&ident_cmds, 1);
            break;
        }
}

/* Acquire/release pairs of one owner on one name: the commands sent per pair. */
/* Test options with the identity record on or off and every command counted in *n. */
static void counting_options(crd_options *o, bool identity, atomic_long *n)
{
    crdt_options(o);
    o->identity = identity;
    o->on_trace = count_cmd;
    o->trace_user_data = n;
}

static double commands_per_pair(bool identity, int pairs)
{
    atomic_long n = 0;
    crd_options o;
    counting_options(&o, identity, &n);
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l = crdt_lock(c, crdt_key(identity ? "pairs_on" : "pairs_off"));
    cr_assert_eq(crd_lock_acquire(l, 0, 30000), CRD_OK); /* the scripts are loaded */
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    crdt_sleep_ms(400); /* the identity's first write is done */
    long before = atomic_load(&n);
    atomic_store(&ident_cmds, 0);
    for (int i = 0; i < pairs; i++) {
        cr_assert_eq(crd_lock_acquire(l, 0, 30000), CRD_OK);
        cr_assert_eq(crd_lock_release(l), CRD_OK);
    }
    long sent = atomic_load(&n) - before;
    crd_lock_free(l);
    crd_client_free(c);
    return (double)sent / pairs;
}

Test(identity, acquire_release_pairs_send_no_identity_command)
{
    int pairs = crdt_scaled_count(2000, 200);
    double off = commands_per_pair(false, pairs), on = commands_per_pair(true, pairs);
    cr_log_info("[identity] commands per acquire/release pair over %d pairs: %.4f without "
                "identity, %.4f with", pairs, off, on);
    cr_assert(off == 2.0, "without identity: %.4f commands per pair", off);
    /* At most one write can fall in the loop: the record's periodic renewal (every 10 s)
     * or a tick that saw a hold; never one per pair. */
    cr_assert_leq(on * pairs, 2.0 * pairs + 1, "with identity: %.4f commands per pair", on);
    cr_assert_leq(atomic_load(&ident_cmds), 1, "%ld identity commands in %d pairs",
                  atomic_load(&ident_cmds), pairs);
}

/* A ping-pong of one lock between two clients (a thread each): each one waits for the
 * other's release, takes the lock, releases it. The commands both send per hand-off. */
struct pingpong {
    crd_lock *l;
    int rounds;
    _Atomic int *turn; /* whose turn: 0 or 1 */
    int me;
};

static void *pingpong_main(void *arg)
{
    struct pingpong *p = arg;
    for (int i = 0; i < p->rounds; i++) {
        while (atomic_load(p->turn) != p->me)
            sched_yield(); /* the other one holds it (valgrind runs one thread at a time:
                              a bare spin there starves the holder) */
        cr_assert_eq(crd_lock_acquire(p->l, crdt_scaled_ms(5000), 30000), CRD_OK);
        atomic_store(p->turn, 1 - p->me);
        /* Hold it until the other side is waiting in its acquire. */
        crdt_sleep_ms(1);
        cr_assert_eq(crd_lock_release(p->l), CRD_OK);
    }
    return NULL;
}

static double commands_per_handoff(bool identity, int rounds, long *idents, int64_t *took_ms)
{
    atomic_long n = 0;
    crd_options o;
    counting_options(&o, identity, &n);
    crd_client *a = crdt_client_opts(&o), *b = crdt_client_opts(&o);
    const char *name = crdt_key(identity ? "handoff_on" : "handoff_off");
    crd_lock *la = crdt_lock(a, name), *lb = crdt_lock(b, name);
    cr_assert_eq(crd_lock_acquire(la, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_release(la), CRD_OK);
    cr_assert_eq(crd_lock_acquire(lb, 0, 30000), CRD_OK);
    cr_assert_eq(crd_lock_release(lb), CRD_OK);
    crdt_sleep_ms(400);
    long before = atomic_load(&n);
    atomic_store(&ident_cmds, 0);
    _Atomic int turn = 0;
    struct pingpong pa = {la, rounds, &turn, 0}, pb = {lb, rounds, &turn, 1};
    pthread_t ta, tb;
    int64_t t0 = crdt_now_ms();
    pthread_create(&ta, NULL, pingpong_main, &pa);
    pthread_create(&tb, NULL, pingpong_main, &pb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    *took_ms = crdt_now_ms() - t0;
    long sent = atomic_load(&n) - before;
    *idents = atomic_load(&ident_cmds);
    crd_lock_free(la);
    crd_lock_free(lb);
    crd_client_free(a);
    crd_client_free(b);
    return (double)sent / (2.0 * rounds);
}

Test(identity, hand_offs_between_two_clients_send_no_identity_command, .timeout = 60)
{
    int rounds = crdt_scaled_count(300, 50);
    long ioff = 0, ion = 0;
    int64_t took_off = 0, took_on = 0;
    double off = commands_per_handoff(false, rounds, &ioff, &took_off);
    double on = commands_per_handoff(true, rounds, &ion, &took_on);
    cr_log_info("[identity] commands per hand-off (acquire + release, retries included, both "
                "clients) over %d hand-offs: %.4f without identity, %.4f with; identity "
                "commands among them: %ld and %ld", 2 * rounds, off, on, ioff, ion);
    cr_assert_eq(ioff, 0);
    /* Waits and holds shorter than 250 ms are never written: at most each client's
     * periodic renewal (every 10 s: one per started period of the loop's time, which
     * memcheck stretches past 10 s) can fall in the loop. */
    long renewals = 2 * (long)(took_on / 10000 + 1);
    cr_assert_leq(ion, renewals, "%ld identity commands during %d hand-offs (%lld ms)", ion,
                  2 * rounds, (long long)took_on);
}
