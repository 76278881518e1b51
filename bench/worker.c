/*
 * worker.c -- the C worker processes of credisson-bench: `credisson-bench --worker KIND`.
 *
 * Every worker sets itself up (client, lock, its own hiredis connection for the critical
 * section), prints "ready", waits for a "go" line on stdin so that all workers of a
 * repetition start together, runs, prints its results as text lines and exits:
 *
 *   procs     loop until the duration ends: acquire (watchdog lease), INCR guard (a value
 *             other than 1 is an exclusion violation), DECR guard, release.
 *             Prints "R acq viol timeouts errors cpu_us late" and "L <wait us>...".
 *   handoff   two of them alternate the lock; prints "E <round> r|a <t us>": the holder's
 *             time just before its release, the waiter's time when its acquire returned;
 *             at the end "X <acquires> <context switches> <system calls>": every
 *             thread's, counted from just before each waiting acquire to its return (-1
 *             system calls where perf's tracepoint is not allowed).
 *   fair      procs on a fair lock, plus a FIFO check inside the critical section (see
 *             FAIR_CHECK); prints "F acq viol fifo timeouts errors late" and
 *             "A <seq> <t_acq> <t_rel> <had_waiter> <counted>" per acquisition.
 *   semaphore procs on a semaphore of --permits permits (Redisson's RSemaphore): acquire one
 *             permit, INCR guard (a value above the permits is an exclusion violation),
 *             DECR guard, release. Prints procs' two lines and "H <acquired us> <release
 *             us>..." (monotonic, comparable across processes) for the hand-off times.
 *   rawwaiter the hand-off's floor, no library: a hiredis connection subscribed to the lock
 *             channel of --name; on each message it runs the acquire script (--sha) on a
 *             fresh key over a second connection and prints "T <round> <t us>" once the
 *             reply is in (the driver releases with Redisson's unlock script); at the end
 *             "X <rounds> <context switches> <system calls>", counted from the wait for
 *             each message to the acquire's reply.
 *   watchdog  one client holding N locks under the watchdog (timeout shortened); measures
 *             its own heap, its watchdog thread's CPU and write syscalls per renewal round;
 *             prints one "W key=value..." line.
 *
 * node-redisson's workers (bench/node/worker.js) speak the same lines.
 * Threads: the worker's main thread, plus the acquiring threads of the watchdog worker.
 */
#include "bench.h"

#include <credisson.h>

#include <dirent.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct wopts {
    const char *kind;
    bn_endpoint ep;
    const char *name;
    const char *prefix;
    int64_t duration_ms;
    int rounds;
    int role;
    long locks;
    int64_t wd_timeout_ms;
    int threads;
    int permits;
    const char *sha; /* rawwaiter: the SHA of the acquire script (lua/rlock_acquire.lua) */
} wopts;

static void die(const char *what, crd_client *c, crd_status st)
{
    fprintf(stderr, "credisson-bench worker: %s: %s (%s)\n", what, crd_strerror(st),
            c ? crd_client_errmsg(c) : "");
    exit(3);
}

static crd_client *new_client(const wopts *o, int64_t wd_timeout_ms, crd_event_fn on_event,
                              void *ud)
{
    crd_options opts;
    crd_options_init(&opts);
    opts.url = o->ep.url;
    if (wd_timeout_ms > 0)
        opts.watchdog_timeout_ms = wd_timeout_ms;
    opts.on_event = on_event;
    opts.event_user_data = ud;
    crd_client *c = NULL;
    crd_status st = crd_client_new(&opts, &c);
    if (st != CRD_OK)
        die("crd_client_new", c, st);
    return c;
}

/* A client, and a handle on the lock o->name (a fair one with fair); exits on failure. */
static crd_lock *open_lock(const wopts *o, bool fair, crd_client **client)
{
    crd_client *c = new_client(o, 0, NULL, NULL);
    crd_lock *l = NULL;
    crd_status st = fair ? crd_fair_lock_new(c, o->name, &l) : crd_lock_new(c, o->name, &l);
    if (st != CRD_OK)
        die(fair ? "crd_fair_lock_new" : "crd_lock_new", c, st);
    *client = c;
    return l;
}

/* "ready", then block until the driver says "go". */
static void ready_go(void)
{
    printf("ready\n");
    fflush(stdout);
    char *l = bn_readline(stdin);
    if (l == NULL || strcmp(l, "go") != 0)
        exit(4);
    free(l);
}

static char *key(const wopts *o, const char *suffix)
{
    size_t n = strlen(o->prefix) + strlen(suffix) + 2;
    char *k = malloc(n);
    snprintf(k, n, "%s:%s", o->prefix, suffix);
    return k;
}

static long long incr(redisContext *g, const char *cmd, const char *k)
{
    const char *argv[2] = {cmd, k};
    return bn_cmd_int(g, 2, argv);
}

/* ---- procs ------------------------------------------------------------------------------ */

/* Opens the pool connection and starts the watchdog thread, on a private name so that
 * the warm-up is never contended. */
static void warm_up(crd_client *c, const wopts *o)
{
    char name[512];
    snprintf(name, sizeof name, "%s:warm:%d", o->name, (int)getpid());
    crd_lock *w = NULL;
    crd_status st = crd_lock_new(c, name, &w);
    if (st == CRD_OK)
        st = crd_lock_acquire(w, 30000, CRD_LEASE_WATCHDOG);
    if (st != CRD_OK)
        die("warm-up acquire", c, st);
    crd_lock_release(w);
    crd_lock_free(w);
}

/* What the contention loop takes and gives back: a lock, or permits of a semaphore. */
typedef struct contender {
    crd_status (*acquire)(void *obj, int64_t wait_ms);
    crd_status (*release)(void *obj);
    void *obj;
    long limit; /* holders allowed at once: a guard above it is a violation */
} contender;

static crd_status lock_acquire(void *l, int64_t wait_ms)
{
    return crd_lock_acquire(l, wait_ms, CRD_LEASE_WATCHDOG);
}
static crd_status lock_release(void *l) { return crd_lock_release(l); }
static crd_status permit_acquire(void *s, int64_t wait_ms)
{
    return crd_semaphore_acquire(s, 1, wait_ms);
}
static crd_status permit_release(void *s) { return crd_semaphore_release(s, 1); }

/* procs and semaphore: acquire, INCR guard, DECR guard, release, until the duration
 * ends; prints the "R" and "L" lines, and with times the "H" line (acquire returns and
 * release starts). */
static void contend(const wopts *o, crd_client *c, const contender *k, bool times)
{
    redisContext *g = bn_connect(&o->ep);
    char *guard = key(o, "guard");
    warm_up(c, o);
    ready_go();
    bn_vec lat = {0}, stamps = {0};
    long acq = 0, viol = 0, timeouts = 0, errors = 0, late = 0;
    int64_t cpu0 = bn_cpu_us();
    int64_t deadline = bn_now_us() + o->duration_ms * 1000;
    for (;;) {
        int64_t t0 = bn_now_us();
        if (t0 >= deadline)
            break;
        crd_status st = k->acquire(k->obj, (deadline - t0) / 1000 + 2000);
        int64_t t1 = bn_now_us();
        bn_vec_push(&lat, (double)(t1 - t0));
        if (st != CRD_OK) {
            timeouts += st == CRD_TIMEOUT;
            errors += st != CRD_TIMEOUT;
            if (st != CRD_TIMEOUT)
                fprintf(stderr, "worker: acquire: %s (%s)\n", crd_strerror(st),
                        crd_client_errmsg(c));
            break;
        }
        if (t1 <= deadline)
            acq++;
        else
            late++;
        if (incr(g, "INCR", guard) > k->limit)
            viol++;
        incr(g, "DECR", guard);
        if (times) {
            bn_vec_push(&stamps, (double)t1);
            bn_vec_push(&stamps, (double)bn_now_us());
        }
        if ((st = k->release(k->obj)) != CRD_OK) {
            fprintf(stderr, "worker: release: %s (%s)\n", crd_strerror(st), crd_client_errmsg(c));
            errors++;
            break;
        }
    }
    int64_t cpu = bn_cpu_us() - cpu0;
    printf("R %ld %ld %ld %ld %" PRId64 " %ld\nL", acq, viol, timeouts, errors, cpu, late);
    for (size_t i = 0; i < lat.n; i++)
        printf(" %.0f", lat.v[i]);
    printf("\n");
    if (times) {
        printf("H");
        for (size_t i = 0; i < stamps.n; i++)
            printf(" %.0f", stamps.v[i]);
        printf("\n");
    }
    fflush(stdout);
    bn_vec_free(&lat);
    bn_vec_free(&stamps);
    free(guard);
    redisFree(g);
}

static int run_procs(const wopts *o)
{
    crd_client *c;
    crd_lock *l = open_lock(o, false, &c);
    contender k = {lock_acquire, lock_release, l, 1};
    contend(o, c, &k, false);
    crd_lock_free(l);
    crd_client_free(c);
    return 0;
}

/* ---- semaphore --------------------------------------------------------------------------- */

static int run_semaphore(const wopts *o)
{
    crd_client *c = new_client(o, 0, NULL, NULL);
    crd_semaphore *sem = NULL;
    crd_status st = crd_semaphore_new(c, o->name, &sem);
    bool set = false;
    if (st == CRD_OK)
        st = crd_semaphore_try_set_permits(sem, o->permits, 0, &set); /* the first one sets */
    if (st != CRD_OK)
        die("semaphore set-up", c, st);
    contender k = {permit_acquire, permit_release, sem, o->permits};
    contend(o, c, &k, true);
    crd_semaphore_free(sem);
    crd_client_free(c);
    return 0;
}

/* ---- handoff ----------------------------------------------------------------------------- */

static void blpop(redisContext *g, const char *k)
{
    const char *argv[3] = {"BLPOP", k, "3"};
    redisReply *r = bn_cmd(g, 3, argv);
    bool ok = r->type == REDIS_REPLY_ARRAY;
    freeReplyObject(r);
    if (!ok) {
        fprintf(stderr, "worker: handoff partner did not answer within 3 s\n");
        exit(5);
    }
}

static void rpush(redisContext *g, const char *k)
{
    const char *argv[3] = {"RPUSH", k, "1"};
    freeReplyObject(bn_cmd(g, 3, argv));
}

/* Waits (at most 1 s) until someone is subscribed to the lock's channel: node-redisson
 * subscribes only after its first failed attempt, and a release before that is lost. */
static void wait_subscriber(redisContext *g, const char *name)
{
    char chan[512];
    snprintf(chan, sizeof chan, "redisson_lock__channel:{%s}", name);
    const char *argv[3] = {"PUBSUB", "NUMSUB", chan};
    for (int i = 0; i < 5000; i++) {
        redisReply *r = bn_cmd(g, 3, argv);
        bool ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                  r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer > 0;
        freeReplyObject(r);
        if (ok)
            return;
        bn_sleep_us(200);
    }
}

static int run_handoff(const wopts *o)
{
    int sysfd = bn_syscalls_open(); /* before the client's threads start: they inherit it */
    crd_client *c;
    crd_lock *l = open_lock(o, false, &c);
    crd_status st;
    redisContext *g = bn_connect(&o->ep);
    int r = o->role, other = 1 - o->role;
    char rk[2][32], hk[2][32];
    char *ready[2], *held[2];
    for (int i = 0; i < 2; i++) {
        snprintf(rk[i], sizeof rk[i], "ready:%d", i);
        snprintf(hk[i], sizeof hk[i], "held:%d", i);
        ready[i] = key(o, rk[i]);
        held[i] = key(o, hk[i]);
    }
    if (r == 0 && (st = crd_lock_acquire(l, 10000, CRD_LEASE_WATCHDOG)) != CRD_OK)
        die("initial acquire", c, st);
    int64_t held_at = bn_now_us(); /* when this side last got the lock */
    long switches = 0, waits = 0;
    long long calls = 0;
    ready_go();
    for (int k = 0; k < o->rounds; k++) {
        if (k % 2 == r) {
            /* Holder: wait until the other side is about to wait, give it time to
             * subscribe and block, then release. The subscriber counted must be the
             * other side's: this side's own subscription outlives the hand-off that
             * gave it the lock by up to 2 ms (pubsub.c, HANDOFF_LOOK_MS), and counted
             * while the other side still slept out its deferral after its own release
             * (release_defer_ms, 5 ms), it made 12 % of the rounds a wait for that
             * deferral instead of a hand-off (p99 2.7 ms; bench/README.md). */
            blpop(g, ready[r]);
            int64_t linger_end = held_at + 3000;
            if (bn_now_us() < linger_end)
                bn_sleep_us(linger_end - bn_now_us());
            wait_subscriber(g, o->name);
            bn_sleep_us(3000);
            int64_t t = bn_now_us();
            if ((st = crd_lock_release(l)) != CRD_OK)
                die("release", c, st);
            printf("E %d r %" PRId64 "\n", k, t);
            if (k + 1 < o->rounds)
                blpop(g, held[r]); /* the other side holds it now */
        } else {
            rpush(g, ready[other]);
            long cs0 = bn_ctx_switches();
            long long sc0 = bn_counter_read(sysfd);
            if ((st = crd_lock_acquire(l, 2000, CRD_LEASE_WATCHDOG)) != CRD_OK) {
                printf("S %d\n", k); /* a stall: no wake-up within 2 s */
                fflush(stdout);
                exit(0);
            }
            int64_t t = bn_now_us();
            held_at = t;
            switches += bn_ctx_switches() - cs0;
            calls += sc0 < 0 ? 0 : bn_counter_read(sysfd) - sc0;
            waits++;
            printf("E %d a %" PRId64 "\n", k, t);
            rpush(g, held[other]);
        }
    }
    /* Whoever holds it at the end lets it go. */
    crd_lock_release(l);
    printf("X %ld %ld %lld\n", waits, switches, sysfd < 0 ? -1 : calls);
    if (sysfd >= 0)
        close(sysfd);
    fflush(stdout);
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(g);
    return 0;
}

/* ---- rawwaiter -------------------------------------------------------------------------- */

/* What the least a waiting client can do costs on this machine: block in read() on its
 * subscriber connection, and on the unlock message send the acquire at once and read its
 * reply. One process, no threads, no library. */
static int run_rawwaiter(const wopts *o)
{
    int sysfd = bn_syscalls_open();
    redisContext *sub = bn_connect(&o->ep), *cmd = bn_connect(&o->ep);
    char chan[512];
    snprintf(chan, sizeof chan, "redisson_lock__channel:{%s}", o->name);
    const char *sa[2] = {"SUBSCRIBE", chan};
    freeReplyObject(bn_cmd(sub, 2, sa));
    long switches = 0;
    long long calls = 0;
    ready_go();
    for (int k = 0; k < o->rounds; k++) {
        void *m = NULL;
        long cs0 = bn_ctx_switches();
        long long sc0 = bn_counter_read(sysfd);
        if (redisGetReply(sub, &m) != REDIS_OK || m == NULL) {
            fprintf(stderr, "worker: rawwaiter: no message for round %d\n", k);
            return 5;
        }
        freeReplyObject(m);
        char fresh[600];
        snprintf(fresh, sizeof fresh, "%s:w:%d", o->name, k);
        const char *argv[6] = {"EVALSHA", o->sha, "1", fresh, "10000",
                               "00000000-0000-4000-8000-000000000001:1"};
        freeReplyObject(bn_cmd(cmd, 6, argv));
        int64_t t = bn_now_us();
        switches += bn_ctx_switches() - cs0;
        calls += sc0 < 0 ? 0 : bn_counter_read(sysfd) - sc0;
        printf("T %d %" PRId64 "\n", k, t);
        fflush(stdout);
    }
    printf("X %d %ld %lld\n", o->rounds, switches, sysfd < 0 ? -1 : calls);
    if (sysfd >= 0)
        close(sysfd);
    fflush(stdout);
    redisFree(sub);
    redisFree(cmd);
    return 0;
}

/* ---- fair -------------------------------------------------------------------------------- */

/* Inside the critical section, in one round trip: the exclusion counter, a global
 * sequence number, and the FIFO check. The previous holder stored the head of the
 * queue as it was while it held the lock: the next holder must be that waiter (nobody
 * gives up in this test, so nobody may overtake it). */
static const char FAIR_CHECK[] =
    "local g = redis.call('incr', KEYS[3])\n"
    "local s = redis.call('incr', KEYS[4])\n"
    "local e = redis.call('get', KEYS[1])\n"
    "local h = redis.call('lindex', KEYS[2], 0)\n"
    "if h then redis.call('set', KEYS[1], h) else redis.call('del', KEYS[1]) end\n"
    "local bad = 0\n"
    "if e and e ~= ARGV[1] then bad = 1 end\n"
    "local w = 0\n"
    "if h then w = 1 end\n"
    "return {g, s, bad, w}\n";

static int run_fair(const wopts *o)
{
    crd_client *c;
    crd_lock *l = open_lock(o, true, &c);
    redisContext *g = bn_connect(&o->ep);
    char *expected = key(o, "expected"), *guard = key(o, "guard"), *seq = key(o, "seq");
    char queue[512];
    snprintf(queue, sizeof queue, "redisson_lock_queue:{%s}", o->name);
    char field[128];
    snprintf(field, sizeof field, "%s:%" PRIu64, crd_client_id(c), crd_owner_current());
    warm_up(c, o);
    const char *la[3] = {"SCRIPT", "LOAD", FAIR_CHECK};
    redisReply *lr = bn_cmd(g, 3, la);
    char sha[64];
    snprintf(sha, sizeof sha, "%s", lr->type == REDIS_REPLY_STRING ? lr->str : "");
    freeReplyObject(lr);
    ready_go();
    long acq = 0, viol = 0, fifo = 0, timeouts = 0, errors = 0, late = 0;
    size_t cap = 1024, n = 0;
    struct rec {
        long long seq;
        int64_t t_acq, t_rel;
        int had_waiter, counted;
    } *recs = malloc(cap * sizeof *recs);
    int64_t deadline = bn_now_us() + o->duration_ms * 1000;
    for (;;) {
        int64_t t0 = bn_now_us();
        if (t0 >= deadline)
            break;
        crd_status st = crd_lock_acquire(l, (deadline - t0) / 1000 + 2000, CRD_LEASE_WATCHDOG);
        int64_t t1 = bn_now_us();
        if (st == CRD_TIMEOUT) {
            timeouts++;
            break;
        }
        if (st != CRD_OK) {
            fprintf(stderr, "worker: fair acquire: %s (%s)\n", crd_strerror(st),
                    crd_client_errmsg(c));
            errors++;
            break;
        }
        const char *argv[9] = {"EVALSHA", sha, "4", expected, queue, guard, seq, field};
        redisReply *r = bn_cmd(g, 8, argv);
        long long gv = -1, sv = -1, bad = 0, w = 0;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 4) {
            gv = r->element[0]->integer;
            sv = r->element[1]->integer;
            bad = r->element[2]->integer;
            w = r->element[3]->integer;
        } else {
            errors++;
        }
        freeReplyObject(r);
        if (gv != 1)
            viol++;
        fifo += bad;
        incr(g, "DECR", guard);
        int64_t t2 = bn_now_us();
        if ((st = crd_lock_release(l)) != CRD_OK) {
            fprintf(stderr, "worker: fair release: %s (%s)\n", crd_strerror(st),
                    crd_client_errmsg(c));
            errors++;
            break;
        }
        bool counted = t1 <= deadline;
        if (counted)
            acq++;
        else
            late++;
        if (n == cap) {
            cap *= 2;
            recs = realloc(recs, cap * sizeof *recs);
        }
        recs[n++] = (struct rec){sv, t1, t2, (int)w, counted};
    }
    printf("F %ld %ld %ld %ld %ld %ld\n", acq, viol, fifo, timeouts, errors, late);
    for (size_t i = 0; i < n; i++)
        printf("A %lld %" PRId64 " %" PRId64 " %d %d\n", recs[i].seq, recs[i].t_acq, recs[i].t_rel,
               recs[i].had_waiter, recs[i].counted);
    fflush(stdout);
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(g);
    return 0;
}

/* ---- watchdog ---------------------------------------------------------------------------- */

static atomic_long lost_events;

static void on_event(void *ud, const crd_event *ev)
{
    (void)ud;
    if (ev->kind == CRD_EVENT_LOCK_LOST)
        atomic_fetch_add(&lost_events, 1);
}

/* Bytes the allocator has handed out and not got back (all arenas: the worker runs
 * with one arena, set before any thread starts). */
static long long heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (long long)mi.uordblks + (long long)mi.hblkhd;
}

static long long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, rss = 0;
    if (f != NULL) {
        if (fscanf(f, "%lld %lld", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * sysconf(_SC_PAGESIZE);
}

/* Thread ids of this process. */
static int list_tasks(pid_t *out, int max)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && n < max)
            out[n++] = (pid_t)atoi(e->d_name);
    if (d != NULL)
        closedir(d);
    return n;
}

/* Whether task tid's name (/proc/self/task/tid/comm) is name. */
static bool task_named(pid_t tid, const char *name)
{
    char p[64], comm[32] = "";
    snprintf(p, sizeof p, "/proc/self/task/%d/comm", (int)tid);
    FILE *f = fopen(p, "r");
    if (f == NULL)
        return false;
    bool yes = fgets(comm, sizeof comm, f) != NULL && strncmp(comm, name, strlen(name)) == 0 &&
               (comm[strlen(name)] == '\n' || comm[strlen(name)] == '\0');
    fclose(f);
    return yes;
}

/* A thread's CPU time in ns (schedstat: time on the CPU). */
static long long task_cpu_ns(pid_t tid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/self/task/%d/schedstat", (int)tid);
    FILE *f = fopen(p, "r");
    long long ns = -1;
    if (f != NULL) {
        if (fscanf(f, "%lld", &ns) != 1)
            ns = -1;
        fclose(f);
    }
    return ns;
}

/* Renewal pipelines the watchdog has sent (one round trip each): the library's counter.
 * (The write-family syscalls of the thread no longer count them: commands go out with
 * send(), which /proc/<tid>/io's syscw does not see.) */
static long long watchdog_round_trips(crd_client *c)
{
    crd_metrics m;
    return crd_client_metrics(c, &m, sizeof m) == CRD_OK ? (long long)m.watchdog_round_trips : -1;
}

typedef struct holder_arg {
    crd_client *c;
    uint64_t owner;
    char *names;
    size_t stride;
    long from, to;
    long failed;
} holder_arg;

/* Acquire names[from..to) and free each handle at once: only the holds stay. The owner
 * is explicit: a thread's own holds stop being renewed when the thread exits. */
static void *hold_range(void *p)
{
    holder_arg *a = p;
    for (long i = a->from; i < a->to; i++) {
        crd_lock *l = NULL;
        if (crd_lock_new(a->c, a->names + (size_t)i * a->stride, &l) != CRD_OK ||
            crd_lock_acquire_owner(l, a->owner, 0, CRD_LEASE_WATCHDOG) != CRD_OK)
            a->failed++;
        crd_lock_free(l);
    }
    return NULL;
}

static int run_watchdog(const wopts *o)
{
    long n = o->locks;
    int64_t period_ms = o->wd_timeout_ms / 3;
    crd_client *c = new_client(o, o->wd_timeout_ms, on_event, NULL);
    redisContext *g = bn_connect(&o->ep);
    size_t stride = strlen(o->prefix) + 16;
    char *names = malloc((size_t)n * stride);
    for (long i = 0; i < n; i++)
        snprintf(names + (size_t)i * stride, stride, "%s:%07ld", o->prefix, i);
    crd_lock **handles = malloc((size_t)n * sizeof *handles);

    /* 1. Handle cost: N handles, no holds. */
    long long h0 = heap_in_use();
    for (long i = 0; i < n; i++)
        if (crd_lock_new(c, names + (size_t)i * stride, &handles[i]) != CRD_OK)
            die("crd_lock_new", c, CRD_NO_MEMORY);
    long long h1 = heap_in_use();
    for (long i = 0; i < n; i++)
        crd_lock_free(handles[i]);

    /* 2. The first hold starts the watchdog thread: the new task is it. */
    pid_t before[64], after[64];
    int nb = list_tasks(before, 64);
    uint64_t owner = crd_owner_new();
    holder_arg first = {c, owner, names, stride, 0, 1, 0};
    hold_range(&first);
    int na = list_tasks(after, 64);
    /* Named (0.7's threads carry their names; its identity record starts the watchdog
     * with the client), else the new task (a library before that). */
    pid_t wd = 0;
    for (int i = 0; i < na && wd == 0; i++)
        if (task_named(after[i], "crd-watchdog"))
            wd = after[i];
    for (int i = 0; i < na && wd == 0; i++) {
        bool seen = false;
        for (int j = 0; j < nb; j++)
            seen = seen || before[j] == after[i];
        if (!seen)
            wd = after[i];
    }
    if (wd == 0 || first.failed) {
        fprintf(stderr, "worker: could not find the watchdog thread\n");
        return 6;
    }

    /* 3. Hold cost: N-1 more holds, handles freed right away. */
    long long hold0 = heap_in_use(), rss0 = rss_bytes();
    int64_t t0 = bn_now_us();
    int nt = o->threads > 0 ? o->threads : 4;
    pthread_t th[64];
    holder_arg args[64];
    long per = (n - 1 + nt - 1) / nt;
    for (int i = 0; i < nt; i++) {
        long from = 1 + per * i, to = from + per < n ? from + per : n;
        args[i] = (holder_arg){c, owner, names, stride, from < n ? from : n, to, 0};
        pthread_create(&th[i], NULL, hold_range, &args[i]);
    }
    long failed = 0;
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        failed += args[i].failed;
    }
    int64_t t_acq = bn_now_us() - t0;
    long long hold1 = heap_in_use(), rss1 = rss_bytes();

    /* 4. Renewal rounds, found by watching the client's renewal round trips (metrics): a
     * round is a burst of them; between rounds the watchdog sleeps for a period (its
     * thread also wakes for the identity record, which sends no renewal: its CPU counts,
     * its ticks are no rounds). Start after an idle gap, then count rounds. */
    int64_t gap_us = (period_ms / 4 < 100 ? period_ms / 4 : 100) * 1000;
    long long seen = watchdog_round_trips(c);
    int64_t last_active = bn_now_us(), give_up = last_active + (o->rounds + 3) * period_ms * 4000;
    while (bn_now_us() - last_active < gap_us && bn_now_us() < give_up) {
        bn_sleep_us(1000);
        long long x = watchdog_round_trips(c);
        if (x != seen) {
            seen = x;
            last_active = bn_now_us();
        }
    }
    bn_cmdstats s0 = bn_cmdstats_get(g);
    long long cpu0 = task_cpu_ns(wd), w0 = watchdog_round_trips(c);
    int rounds = 0;
    bool in_burst = false;
    int64_t burst_start = 0, burst_last = 0;
    bn_vec walls = {0};
    while (rounds < o->rounds && bn_now_us() < give_up) {
        bn_sleep_us(1000);
        long long x = watchdog_round_trips(c);
        int64_t now = bn_now_us();
        if (x != seen) {
            seen = x;
            if (!in_burst) {
                in_burst = true;
                burst_start = now - 1000; /* it began since the previous poll */
            }
            burst_last = now;
        } else if (in_burst && now - burst_last >= gap_us) {
            in_burst = false;
            rounds++;
            bn_vec_push(&walls, (double)(burst_last - burst_start) / 1000.0);
        }
    }
    bn_cmdstats s1 = bn_cmdstats_get(g);
    long long cpu1 = task_cpu_ns(wd), w1 = watchdog_round_trips(c);
    long long heap_after = heap_in_use(), rss_after = rss_bytes();
    if (rounds == 0)
        rounds = 1;
    double cpu_ms = (double)(cpu1 - cpu0) / 1e6 / rounds;
    printf("W locks=%ld failed=%ld lost=%ld rounds=%d period_ms=%" PRId64
           " acquire_s=%.3f handle_bytes=%.1f hold_bytes=%.1f rss_bytes_per_lock=%.1f"
           " rss_after_rounds_per_lock=%.1f heap_after_rounds_per_lock=%.1f"
           " scripts_per_period=%.1f round_trips_per_period=%.1f wall_ms_per_period=%.2f"
           " cpu_ms_per_period=%.2f core_pct=%.3f core_pct_default=%.4f\n",
           n, failed, (long)atomic_load(&lost_events), rounds, period_ms, (double)t_acq / 1e6,
           (double)(h1 - h0) / (double)n, (double)(hold1 - hold0) / (double)(n - 1),
           (double)(rss1 - rss0) / (double)(n - 1), (double)(rss_after - rss0) / (double)(n - 1),
           (double)(heap_after - hold0) / (double)(n - 1),
           (double)(s1.scripts - s0.scripts) / rounds, (double)(w1 - w0) / rounds,
           bn_quantile(&walls, 0.5), cpu_ms, 100.0 * cpu_ms / (double)period_ms,
           100.0 * cpu_ms / 10000.0);
    fflush(stdout);
    crd_client_free(c);
    redisFree(g);
    free(names);
    free(handles);
    return 0;
}

/* ---- entry ------------------------------------------------------------------------------- */

int bn_worker_main(int argc, char **argv)
{
    wopts o;
    memset(&o, 0, sizeof o);
    snprintf(o.ep.host, sizeof o.ep.host, "127.0.0.1");
    o.ep.port = 6379;
    o.rounds = 100;
    o.duration_ms = 1000;
    o.locks = 10000;
    o.wd_timeout_ms = 3000;
    o.threads = 4;
    o.permits = 2;
    /* Every argument is a "--flag value" pair (but --host): the value is kept as given, or
     * read as a number of its field's type. */
    enum { STR, INT, LONG, I64 };
    const struct {
        const char *flag;
        int type;
        void *to;
    } flags[] = {{"--worker", STR, &o.kind},
                 {"--name", STR, &o.name},
                 {"--prefix", STR, &o.prefix},
                 {"--sha", STR, &o.sha},
                 {"--port", INT, &o.ep.port},
                 {"--rounds", INT, &o.rounds},
                 {"--role", INT, &o.role},
                 {"--threads", INT, &o.threads},
                 {"--permits", INT, &o.permits},
                 {"--locks", LONG, &o.locks},
                 {"--duration-ms", I64, &o.duration_ms},
                 {"--wd-timeout-ms", I64, &o.wd_timeout_ms}};
    size_t nflags = sizeof flags / sizeof flags[0];
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        size_t k = 0;
        while (k < nflags && strcmp(a, flags[k].flag) != 0)
            k++;
        if (strcmp(a, "--host") == 0) {
            snprintf(o.ep.host, sizeof o.ep.host, "%s", v);
        } else if (k == nflags) {
            fprintf(stderr, "credisson-bench worker: unknown argument %s\n", a);
            return 64;
        } else if (flags[k].type == STR) {
            *(const char **)flags[k].to = v;
        } else if (flags[k].type == INT) {
            *(int *)flags[k].to = atoi(v);
        } else if (flags[k].type == LONG) {
            *(long *)flags[k].to = atol(v);
        } else {
            *(int64_t *)flags[k].to = atoll(v);
        }
    }
    snprintf(o.ep.url, sizeof o.ep.url, "redis://%s:%d", o.ep.host, o.ep.port);
    if (o.kind == NULL || o.prefix == NULL || (o.name == NULL && strcmp(o.kind, "watchdog") != 0)) {
        fprintf(stderr, "credisson-bench worker: --worker KIND --prefix P --name N required\n");
        return 64;
    }
    if (strcmp(o.kind, "procs") == 0)
        return run_procs(&o);
    if (strcmp(o.kind, "handoff") == 0)
        return run_handoff(&o);
    if (strcmp(o.kind, "rawwaiter") == 0 && o.sha != NULL)
        return run_rawwaiter(&o);
    if (strcmp(o.kind, "semaphore") == 0)
        return run_semaphore(&o);
    if (strcmp(o.kind, "fair") == 0)
        return run_fair(&o);
    if (strcmp(o.kind, "watchdog") == 0) {
        /* One malloc arena, so that mallinfo2() sees the acquiring threads' holds too. */
        mallopt(M_ARENA_MAX, 1);
        return run_watchdog(&o);
    }
    fprintf(stderr, "credisson-bench worker: unknown kind %s\n", o.kind);
    return 64;
}
