/*
 * chaos.c -- mutual exclusion under injected faults (issue #9, item 3).
 *
 * One coordinator process starts a private redis-server, one fault proxy per worker
 * (support/faultproxy.h, run by threads of the coordinator) and N worker processes
 * (fork + exec of this program with --worker, so that no proxy socket is inherited).
 * Each worker has one client, connected through its own proxy, and T threads that
 * loop for the configured time: pick one of L locks, acquire it (a fixed lease or the
 * watchdog), stay inside for a few ms, release. Every critical section is written to
 * a per-worker file: lock, owner, the time the acquire was called, enter and leave
 * times (CLOCK_MONOTONIC, which all processes on the machine share), and whether the
 * hold was still valid (crd_lock_validity_ms > 0) at enter and at leave.
 *
 * Meanwhile a chaos thread injects, at random: latency, a black hole, a stall (late
 * delivery) or refused connections on one worker's proxy; dropped connections; one
 * lost, swallowed or late reply; a late SUBSCRIBE; CLIENT KILL TYPE pubsub; CLIENT
 * PAUSE; SCRIPT FLUSH; SIGSTOP of a worker for up to 3 s (longer than most leases);
 * and now and then a restart of redis-server without persistence.
 *
 * The check: for each lock, no two critical sections of different owners that were
 * valid at enter and at leave overlap in time. Holds that spanned a server restart
 * are counted apart: a restart without persistence forgets every lock (the documented
 * non-guarantee), so they are reported, not checked. Lost holds (release says lost,
 * validity gone at leave, watchdog LOCK_LOST events) are counted and printed.
 *
 * usage: crd_chaos [--seconds N] [--procs N] [--threads N] [--locks N] [--seed N]
 *        CRDT_CHAOS_SECONDS in the environment overrides --seconds. Exit 0 when every check passed.
 * The closing line reads "chaos: N passed, M failed", after the figures.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "credisson.h"
#include "faultproxy.h"
#include "../standalone/events.h"      /* crdt_events: watchdog events counted */
#include "../standalone/redis_child.h" /* free_port, connect_port, spawn_child, ... */

#define MAX_PROCS 32
#define MAX_LOCKS 16
#define MAX_RESTARTS 64

/* One critical section, as a worker writes it. */
typedef struct cs_record {
    int32_t lock;
    int32_t proc;
    uint64_t owner; /* process-local owner id; (proc, owner) is unique */
    int64_t t_call;  /* acquire called (ns) */
    int64_t t_enter; /* acquire returned CRD_OK (ns) */
    int64_t t_leave; /* before the release was sent (ns) */
    int32_t valid_enter, valid_leave;
    int32_t release_status;
    int32_t watchdog;
} cs_record;

/* A worker's closing counters, written as the last line of its summary file. */
typedef struct worker_totals {
    uint64_t acquired, timeouts, io_errors, other_errors, released_ok, release_lost,
        release_not_owner, release_io_final, lost_events, invalid_at_leave;
} worker_totals;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* xorshift64*: a small per-thread generator. */
static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ull;
}

static int64_t rnd_range(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd(s) % (uint64_t)(hi - lo + 1));
}

/* ---------------------------------------------------------------------------------- */
/* Worker                                                                             */
/* ---------------------------------------------------------------------------------- */

typedef struct worker_ctx {
    crd_client *client;
    crd_lock *locks[MAX_LOCKS];
    int nlocks;
    int proc;
    int64_t end_ns;
    uint64_t seed;
    FILE *out;
    pthread_mutex_t out_mu;
    pthread_mutex_t tot_mu;
    worker_totals tot;
    crdt_events events; /* the client's watchdog events */
} worker_ctx;

static bool valid_now(crd_lock *l)
{
    int64_t v = 0;
    return crd_lock_validity_ms(l, &v) == CRD_OK && v > 0;
}

static void *worker_thread(void *arg)
{
    worker_ctx *w = arg;
    uint64_t seed = w->seed ^ (uint64_t)(uintptr_t)&seed ^ (uint64_t)now_ns();
    if (seed == 0)
        seed = 1;
    worker_totals t;
    memset(&t, 0, sizeof t);
    cs_record buf[256];
    int nbuf = 0;
    uint64_t me = crd_owner_current();
    while (now_ns() < w->end_ns) {
        int li = (int)rnd_range(&seed, 0, w->nlocks - 1);
        crd_lock *l = w->locks[li];
        bool wd = rnd(&seed) % 3 == 0;
        int64_t lease = wd ? CRD_LEASE_WATCHDOG : rnd_range(&seed, 800, 3000);
        cs_record r;
        memset(&r, 0, sizeof r);
        r.lock = li;
        r.proc = w->proc;
        r.owner = me;
        r.watchdog = wd;
        r.t_call = now_ns();
        crd_status st = crd_lock_acquire(l, rnd_range(&seed, 0, 9) == 0 ? 0 : 2000, lease);
        if (st != CRD_OK) {
            if (st == CRD_TIMEOUT || st == CRD_BUSY)
                t.timeouts++;
            else if (st == CRD_IO)
                t.io_errors++;
            else
                t.other_errors++;
            if (st == CRD_IO || st == CRD_SERVER)
                sleep_ms(5); /* a failing network: do not spin on it */
            continue;
        }
        t.acquired++;
        r.t_enter = now_ns();
        r.valid_enter = valid_now(l);
        /* inside: mostly short, now and then long enough to meet a fault */
        int64_t inside = rnd(&seed) % 100 == 0 ? rnd_range(&seed, 20, 300) : rnd_range(&seed, 0, 1);
        sleep_ms(inside);
        r.t_leave = now_ns();
        r.valid_leave = valid_now(l);
        if (!r.valid_leave)
            t.invalid_at_leave++;
        /* Release; an unknown outcome (CRD_IO) is retried, as the manual says, until
         * Redis answers or 15 s pass (the lease then ends it). */
        int64_t give_up = now_ns() + 15 * INT64_C(1000000000);
        do {
            st = crd_lock_release(l);
            if (st == CRD_IO)
                sleep_ms(50);
        } while (st == CRD_IO && now_ns() < give_up);
        r.release_status = (int32_t)st;
        switch (st) {
        case CRD_OK: t.released_ok++; break;
        case CRD_LOCK_LOST: t.release_lost++; break;
        case CRD_NOT_OWNER: t.release_not_owner++; break;
        case CRD_IO: t.release_io_final++; break;
        case CRD_BUSY: case CRD_TIMEOUT: case CRD_INVALID_ARGUMENT: case CRD_PROTOCOL:
        case CRD_SERVER: case CRD_NO_MEMORY: case CRD_CLOSED: case CRD_AUTH: case CRD_DEADLOCK:
        case CRD_FORKED: case CRD_SKIPPED: case CRD_DEGRADED: case CRD_CANCELLED:
        case CRD_NOT_SYNCED: case CRD_OUTCOME_UNKNOWN:
        case CRD_SYNC_UNAVAILABLE: case CRD_INTERRUPTED:
        default: t.other_errors++; break;
        }
        buf[nbuf++] = r;
        if (nbuf == 256) {
            pthread_mutex_lock(&w->out_mu);
            fwrite(buf, sizeof buf[0], (size_t)nbuf, w->out);
            pthread_mutex_unlock(&w->out_mu);
            nbuf = 0;
        }
    }
    pthread_mutex_lock(&w->out_mu);
    fwrite(buf, sizeof buf[0], (size_t)nbuf, w->out);
    pthread_mutex_unlock(&w->out_mu);
    pthread_mutex_lock(&w->tot_mu);
    uint64_t *dst = (uint64_t *)&w->tot;
    const uint64_t *src = (const uint64_t *)&t;
    for (size_t i = 0; i < sizeof t / sizeof(uint64_t); i++)
        dst[i] += src[i];
    pthread_mutex_unlock(&w->tot_mu);
    return NULL;
}

static int worker_main(int proc, int port, int threads, int nlocks, int64_t seconds,
                       const char *dir, const char *prefix, uint64_t seed)
{
    worker_ctx w;
    memset(&w, 0, sizeof w);
    w.proc = proc;
    w.nlocks = nlocks;
    w.seed = seed * 1000003u + (uint64_t)proc;
    pthread_mutex_init(&w.out_mu, NULL);
    pthread_mutex_init(&w.tot_mu, NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/records.%d", dir, proc);
    w.out = fopen(path, "wb");
    if (w.out == NULL)
        return 2;
    crd_options o;
    crd_options_init(&o);
    o.port = port;
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 500;
    o.watchdog_timeout_ms = 1500;
    o.poll_interval_ms = 200;
    o.subscription_timeout_ms = 1000;
    crdt_events_attach(&w.events, &o);
    /* The network may be down when we start: keep trying for a while. */
    crd_status st = CRD_IO;
    for (int i = 0; i < 100; i++) {
        st = crd_client_new(&o, &w.client);
        if (st == CRD_OK)
            break;
        crd_client_free(w.client);
        w.client = NULL;
        sleep_ms(100);
    }
    if (st != CRD_OK)
        return 3;
    for (int i = 0; i < nlocks; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s:lock%d", prefix, i);
        if (crd_lock_new(w.client, name, &w.locks[i]) != CRD_OK)
            return 4;
    }
    w.end_ns = now_ns() + seconds * INT64_C(1000000000);
    pthread_t th[64];
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, worker_thread, &w);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    w.tot.lost_events = (uint64_t)atomic_load(&w.events.lost);
    fclose(w.out);
    for (int i = 0; i < nlocks; i++)
        crd_lock_free(w.locks[i]);
    crd_client_free(w.client);
    snprintf(path, sizeof path, "%s/totals.%d", dir, proc);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(&w.tot, sizeof w.tot, 1, f) != 1)
        return 5;
    fclose(f);
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* Coordinator: server, proxies, workers                                              */
/* ---------------------------------------------------------------------------------- */

static const char *g_redis_prog = "redis-server";
static char g_dir[256];
static pid_t g_server_pid;
static int g_server_port;
static pthread_mutex_t g_server_mu = PTHREAD_MUTEX_INITIALIZER;

static redisContext *raw(int port)
{
    struct timeval tv = {1, 0};
    return connect_port(port, tv);
}

/* Runs a command (hiredis format: %s and %d only here) on a fresh connection;
 * ignores the answer. */
static void server_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void server_cmd(const char *fmt, ...)
{
    pthread_mutex_lock(&g_server_mu);
    int port = g_server_port;
    pthread_mutex_unlock(&g_server_mu);
    redisContext *r = raw(port);
    if (r == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
}

static void kill_server(void) { kill_child(&g_server_pid); }

static bool start_server(void)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        int port = free_port();
        char p[16];
        snprintf(p, sizeof p, "%d", port);
        const char *args[] = {g_redis_prog, "--port", p, "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", g_dir, "--maxclients", "10000",
                              NULL};
        pid_t pid = spawn_child(args, true);
        if (pid > 0 && await_server(&pid, port, 5000)) {
            pthread_mutex_lock(&g_server_mu);
            g_server_pid = pid;
            g_server_port = port;
            pthread_mutex_unlock(&g_server_mu);
            return true;
        }
        kill_child(&pid);
    }
    return false;
}

typedef struct chaos_state {
    crdt_proxy *proxies[MAX_PROCS];
    pid_t workers[MAX_PROCS];
    int nprocs;
    int64_t end_ns;
    uint64_t seed;
    atomic_bool stop;
    atomic_bool restart_wanted; /* set by the chaos thread, served by the main thread */
    /* figures */
    uint64_t faults, by_kind[16];
    int64_t restart_from[MAX_RESTARTS], restart_to[MAX_RESTARTS];
    int nrestarts;
    bool restart_failed;
} chaos_state;

enum {
    F_DELAY, F_BLACKHOLE, F_STALL, F_REFUSE, F_DROP, F_LOST_REPLY, F_LATE_REPLY,
    F_LATE_SUBSCRIBE, F_KILL_PUBSUB, F_PAUSE, F_SCRIPT_FLUSH, F_SIGSTOP, F_RESTART, F_NKINDS
};
static const char *const fault_names[F_NKINDS] = {
    "latency", "black hole", "stall", "refuse", "drop connections", "lost reply",
    "late reply", "late subscribe", "kill pubsub", "client pause", "script flush",
    "sigstop", "server restart"};

/* Sleeps ms in small steps, returning early when told to stop. */
static void chaos_sleep(chaos_state *cs, int64_t ms)
{
    int64_t until = now_ns() + ms * 1000000;
    while (!atomic_load(&cs->stop) && now_ns() < until)
        sleep_ms(10);
}

static void restart_server(chaos_state *cs)
{
    if (cs->nrestarts >= MAX_RESTARTS)
        return;
    int i = cs->nrestarts;
    cs->restart_from[i] = now_ns();
    pthread_mutex_lock(&g_server_mu);
    kill_server();
    pthread_mutex_unlock(&g_server_mu);
    if (!start_server()) {
        cs->restart_failed = true;
        cs->restart_to[i] = now_ns();
        cs->nrestarts++;
        return;
    }
    for (int p = 0; p < cs->nprocs; p++) {
        crdt_proxy_set_upstream(cs->proxies[p], g_server_port);
        crdt_proxy_drop_all(cs->proxies[p]);
    }
    cs->restart_to[i] = now_ns();
    cs->nrestarts++;
}

/* A fault that takes a direction (a black hole, a stall): set(p, d, true) in a random
 * direction d (either way or both), for len ms, then off again. */
static void one_way_for(chaos_state *cs, uint64_t *seed, crdt_proxy *p,
                        void (*set)(crdt_proxy *, crdt_proxy_dir, bool), int64_t len)
{
    crdt_proxy_dir d = (crdt_proxy_dir)rnd_range(seed, 1, 3);
    set(p, d, true);
    chaos_sleep(cs, len);
    set(p, d, false);
}

static void *chaos_main(void *arg)
{
    chaos_state *cs = arg;
    uint64_t s = cs->seed ? cs->seed : 0x9e3779b97f4a7c15ull;
    int64_t last_restart = now_ns();
    /* A quiet second first: let every worker start. */
    chaos_sleep(cs, 1000);
    /* Stop injecting a few seconds before the end so that the run ends calm. */
    while (!atomic_load(&cs->stop) && now_ns() < cs->end_ns - INT64_C(4000000000)) {
        int kind = (int)rnd_range(&s, 0, F_NKINDS - 1);
        int pi = (int)rnd_range(&s, 0, cs->nprocs - 1);
        crdt_proxy *p = cs->proxies[pi];
        int64_t len = rnd_range(&s, 200, 3000);
        switch (kind) {
        case F_DELAY:
            crdt_proxy_set_delay(p, CRDT_PROXY_BOTH, rnd_range(&s, 5, 60));
            chaos_sleep(cs, len);
            crdt_proxy_set_delay(p, CRDT_PROXY_BOTH, 0);
            break;
        case F_BLACKHOLE:
            one_way_for(cs, &s, p, crdt_proxy_set_blackhole, len);
            /* a half black-holed connection is out of step: end it */
            crdt_proxy_drop_all(p);
            break;
        case F_STALL:
            one_way_for(cs, &s, p, crdt_proxy_set_stall, len);
            break;
        case F_REFUSE:
            crdt_proxy_set_refuse(p, true);
            chaos_sleep(cs, len);
            crdt_proxy_set_refuse(p, false);
            break;
        case F_DROP:
            crdt_proxy_drop_all(p);
            break;
        case F_LOST_REPLY:
            crdt_proxy_arm(p, "EVALSHA", NULL,
                           rnd(&s) % 2 ? CRDT_PROXY_EXECUTE_THEN_CLOSE : CRDT_PROXY_SWALLOW_REPLY,
                           0);
            chaos_sleep(cs, 300);
            crdt_proxy_disarm_all(p);
            break;
        case F_LATE_REPLY:
            crdt_proxy_arm(p, "EVALSHA", NULL, CRDT_PROXY_DELAY_REPLY, rnd_range(&s, 100, 1200));
            chaos_sleep(cs, 300);
            crdt_proxy_disarm_all(p);
            break;
        case F_LATE_SUBSCRIBE:
            crdt_proxy_arm(p, "SUBSCRIBE", NULL,
                           rnd(&s) % 2 ? CRDT_PROXY_DELAY_COMMAND : CRDT_PROXY_DELAY_REPLY,
                           rnd_range(&s, 50, 400));
            chaos_sleep(cs, 500);
            crdt_proxy_disarm_all(p);
            break;
        case F_KILL_PUBSUB:
            server_cmd("CLIENT KILL TYPE pubsub");
            break;
        case F_PAUSE: {
            server_cmd("CLIENT PAUSE %d WRITE", (int)(len / 2 + 100));
            chaos_sleep(cs, len / 2 + 100);
            break;
        }
        case F_SCRIPT_FLUSH:
            server_cmd("SCRIPT FLUSH");
            break;
        case F_SIGSTOP:
            kill(cs->workers[pi], SIGSTOP);
            chaos_sleep(cs, len);
            kill(cs->workers[pi], SIGCONT);
            break;
        case F_RESTART:
            /* rare: at most one per 20 s. The main thread forks the new server: a
             * server's PR_SET_PDEATHSIG fires when the thread that forked it ends. */
            if (now_ns() - last_restart < INT64_C(20000000000))
                continue;
            last_restart = now_ns();
            atomic_store(&cs->restart_wanted, true);
            while (atomic_load(&cs->restart_wanted) && !atomic_load(&cs->stop))
                sleep_ms(5);
            break;
        default:
            break;
        }
        cs->faults++;
        cs->by_kind[kind]++;
        chaos_sleep(cs, rnd_range(&s, 20, 400));
    }
    for (int i = 0; i < cs->nprocs; i++) {
        crdt_proxy_reset(cs->proxies[i]);
        kill(cs->workers[i], SIGCONT);
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------- */
/* The check                                                                          */
/* ---------------------------------------------------------------------------------- */

static int by_enter(const void *a, const void *b)
{
    const cs_record *x = a, *y = b;
    return x->t_enter < y->t_enter ? -1 : x->t_enter > y->t_enter;
}

static bool spans_restart(const chaos_state *cs, const cs_record *r)
{
    for (int i = 0; i < cs->nrestarts; i++)
        if (r->t_call < cs->restart_to[i] && r->t_leave > cs->restart_from[i])
            return true;
    return false;
}

static int passed, failed;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (ok)
        passed++;
    else
        failed++;
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr, "usage: crd_chaos [--seconds N] [--procs N] [--threads N] [--locks N] "
                    "[--seed N]\n");
}

int main(int argc, char **argv)
{
    int64_t seconds = 120;
    int procs = 6, threads = 4, nlocks = 3;
    uint64_t seed = (uint64_t)time(NULL);
    int worker = -1, wport = 0;
    const char *wdir = NULL, *wprefix = NULL;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            usage();
            return 64;
        }
        if (strcmp(a, "--seconds") == 0)
            seconds = atoll(v);
        else if (strcmp(a, "--procs") == 0)
            procs = atoi(v);
        else if (strcmp(a, "--threads") == 0)
            threads = atoi(v);
        else if (strcmp(a, "--locks") == 0)
            nlocks = atoi(v);
        else if (strcmp(a, "--seed") == 0)
            seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--worker") == 0)
            worker = atoi(v);
        else if (strcmp(a, "--port") == 0)
            wport = atoi(v);
        else if (strcmp(a, "--dir") == 0)
            wdir = v;
        else if (strcmp(a, "--prefix") == 0)
            wprefix = v;
        else {
            usage();
            return 64;
        }
    }
    /* The environment wins over --seconds, so CI can lengthen the ctest run. */
    const char *env = getenv("CRDT_CHAOS_SECONDS");
    if (worker < 0 && env != NULL && atoll(env) > 0)
        seconds = atoll(env);
    if (seconds < 5 || procs < 1 || procs > MAX_PROCS || threads < 1 || threads > 64 ||
        nlocks < 1 || nlocks > MAX_LOCKS) {
        usage();
        return 64;
    }
    if (worker >= 0)
        return worker_main(worker, wport, threads, nlocks, seconds, wdir, wprefix, seed);

    const char *prog = getenv("CRD_REDIS_SERVER");
    if (prog != NULL && prog[0] != '\0')
        g_redis_prog = prog;
    snprintf(g_dir, sizeof g_dir, "/tmp/crd-chaos-XXXXXX");
    if (mkdtemp(g_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    if (!start_server()) {
        fprintf(stderr, "chaos: cannot start %s\n", g_redis_prog);
        return 1;
    }
    printf("chaos: %d processes x %d threads on %d locks for %" PRId64 " s, seed %" PRIu64
           ", redis-server on port %d\n", procs, threads, nlocks, seconds, seed, g_server_port);
    fflush(stdout);

    static chaos_state cs;
    memset(&cs, 0, sizeof cs);
    cs.nprocs = procs;
    cs.seed = seed;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "chaos:%ld", (long)getpid());
    for (int i = 0; i < procs; i++) {
        const char *why = NULL;
        cs.proxies[i] = crdt_proxy_start(g_server_port, &why);
        if (cs.proxies[i] == NULL) {
            fprintf(stderr, "chaos: proxy: %s\n", why ? why : "?");
            return 1;
        }
    }
    char self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("readlink");
        return 1;
    }
    self[n] = '\0';
    int64_t t0 = now_ns();
    for (int i = 0; i < procs; i++) {
        char a_sec[24], a_thr[16], a_lk[16], a_seed[24], a_w[16], a_port[16];
        snprintf(a_sec, sizeof a_sec, "%" PRId64, seconds);
        snprintf(a_thr, sizeof a_thr, "%d", threads);
        snprintf(a_lk, sizeof a_lk, "%d", nlocks);
        snprintf(a_seed, sizeof a_seed, "%" PRIu64, seed);
        snprintf(a_w, sizeof a_w, "%d", i);
        snprintf(a_port, sizeof a_port, "%d", crdt_proxy_port(cs.proxies[i]));
        const char *args[] = {self, "--worker", a_w, "--port", a_port, "--seconds", a_sec,
                              "--threads", a_thr, "--locks", a_lk, "--seed", a_seed, "--dir",
                              g_dir, "--prefix", prefix, NULL};
        cs.workers[i] = spawn_child(args, false);
    }
    cs.end_ns = t0 + seconds * INT64_C(1000000000);
    atomic_init(&cs.stop, false);
    atomic_init(&cs.restart_wanted, false);
    pthread_t chaos_th;
    pthread_create(&chaos_th, NULL, chaos_main, &cs);

    /* Wait for the workers: the run plus time for the last releases (15 s) and exit. */
    int64_t deadline = cs.end_ns + INT64_C(60000000000);
    int codes[MAX_PROCS];
    int left = procs;
    for (int i = 0; i < procs; i++)
        codes[i] = -1;
    while (left > 0 && now_ns() < deadline) {
        if (atomic_load(&cs.restart_wanted)) {
            restart_server(&cs);
            atomic_store(&cs.restart_wanted, false);
        }
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0) {
            sleep_ms(50);
            continue;
        }
        for (int i = 0; i < procs; i++)
            if (cs.workers[i] == pid) {
                codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                left--;
            }
    }
    atomic_store(&cs.stop, true);
    pthread_join(chaos_th, NULL);
    for (int i = 0; i < procs; i++)
        if (codes[i] == -1) {
            kill(cs.workers[i], SIGCONT);
            kill(cs.workers[i], SIGKILL);
            waitpid(cs.workers[i], NULL, 0);
        }
    bool all_ok = true;
    for (int i = 0; i < procs; i++)
        all_ok = all_ok && codes[i] == 0;
    char codes_s[256] = "";
    for (int i = 0; i < procs; i++) {
        size_t l = strlen(codes_s);
        snprintf(codes_s + l, sizeof codes_s - l, "%s%d", i ? " " : "", codes[i]);
    }
    check(all_ok, "every worker finished in time and exited 0 (exit codes: %s; -1 = hung)",
          codes_s);

    /* Every lock key ends: nothing is left renewed or without a TTL once the clients
     * are gone (the longest lease is 3 s, the watchdog's 1.5 s). */
    bool keys_gone = false;
    for (int i = 0; i < 100 && !keys_gone; i++) {
        redisContext *r = raw(g_server_port);
        keys_gone = r != NULL;
        for (int k = 0; r != NULL && k < nlocks; k++) {
            redisReply *rep = redisCommand(r, "EXISTS %s:lock%d", prefix, k);
            if (rep == NULL || rep->type != REDIS_REPLY_INTEGER || rep->integer != 0)
                keys_gone = false;
            if (rep)
                freeReplyObject(rep);
        }
        if (r)
            redisFree(r);
        if (!keys_gone)
            sleep_ms(100);
    }
    if (!keys_gone) {
        /* Say what is left, to tell a missing TTL from one that keeps being renewed. */
        redisContext *r = raw(g_server_port);
        for (int k = 0; r != NULL && k < nlocks; k++) {
            redisReply *t = redisCommand(r, "PTTL %s:lock%d", prefix, k);
            redisReply *h = redisCommand(r, "HGETALL %s:lock%d", prefix, k);
            if (t != NULL && t->type == REDIS_REPLY_INTEGER && t->integer != -2) {
                printf("  left: lock%d PTTL %lld", k, t->integer);
                for (size_t i = 0; h != NULL && h->type == REDIS_REPLY_ARRAY && i < h->elements; i++)
                    printf(" %s", h->element[i]->str ? h->element[i]->str : "?");
                printf("\n");
            }
            if (t)
                freeReplyObject(t);
            if (h)
                freeReplyObject(h);
        }
        if (r)
            redisFree(r);
    }
    check(keys_gone, "every lock key expired or was released within 10 s of the end");

    /* Read the records. */
    size_t cap = 1 << 16, nrec = 0;
    cs_record *recs = malloc(cap * sizeof *recs);
    worker_totals tot;
    memset(&tot, 0, sizeof tot);
    for (int i = 0; i < procs && recs != NULL; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/records.%d", g_dir, i);
        FILE *f = fopen(path, "rb");
        if (f != NULL) {
            cs_record r;
            while (fread(&r, sizeof r, 1, f) == 1) {
                if (nrec == cap) {
                    cs_record *nr = realloc(recs, 2 * cap * sizeof *recs);
                    if (nr == NULL)
                        break;
                    recs = nr;
                    cap *= 2;
                }
                recs[nrec++] = r;
            }
            fclose(f);
            unlink(path);
        }
        snprintf(path, sizeof path, "%s/totals.%d", g_dir, i);
        f = fopen(path, "rb");
        worker_totals t;
        if (f != NULL && fread(&t, sizeof t, 1, f) == 1) {
            uint64_t *dst = (uint64_t *)&tot;
            const uint64_t *src = (const uint64_t *)&t;
            for (size_t k = 0; k < sizeof t / sizeof(uint64_t); k++)
                dst[k] += src[k];
        }
        if (f != NULL)
            fclose(f);
        unlink(path);
    }
    if (recs == NULL) {
        fprintf(stderr, "chaos: out of memory\n");
        return 1;
    }

    /* Overlap among valid holds, per lock. */
    qsort(recs, nrec, sizeof *recs, by_enter);
    uint64_t violations = 0, checked = 0, spanning = 0, invalid = 0, per_lock[MAX_LOCKS] = {0};
    for (int k = 0; k < nlocks; k++) {
        /* The latest-leaving valid hold seen so far (sorted by enter). */
        const cs_record *open = NULL;
        for (size_t i = 0; i < nrec; i++) {
            const cs_record *r = &recs[i];
            if (r->lock != k)
                continue;
            per_lock[k]++;
            if (!r->valid_enter || !r->valid_leave) {
                invalid++;
                continue;
            }
            if (spans_restart(&cs, r)) {
                spanning++;
                continue;
            }
            checked++;
            if (open != NULL && r->t_enter < open->t_leave &&
                !(r->proc == open->proc && r->owner == open->owner)) {
                if (violations < 10)
                    printf("  VIOLATION on lock%d: proc %d owner %" PRIu64 " [%" PRId64
                           ", %" PRId64 "] overlaps proc %d owner %" PRIu64 " [%" PRId64
                           ", %" PRId64 "] by %" PRId64 " us\n",
                           k, r->proc, r->owner, r->t_enter, r->t_leave, open->proc, open->owner,
                           open->t_enter, open->t_leave, (open->t_leave - r->t_enter) / 1000);
                violations++;
            }
            if (open == NULL || r->t_leave > open->t_leave)
                open = r;
        }
    }
    for (int k = 0; k < nlocks; k++)
        check(per_lock[k] > 0, "lock%d was acquired (%" PRIu64 " critical sections)", k,
              per_lock[k]);
    check(violations == 0, "no two valid holders of one lock overlapped (%" PRIu64
          " valid sections checked, %" PRIu64 " violations)", checked, violations);
    check(!cs.restart_failed, "every server restart brought a server back");
    uint64_t lost_reported = tot.release_lost + tot.invalid_at_leave;

    char kinds[1024] = "";
    for (int k = 0; k < F_NKINDS; k++) {
        size_t l = strlen(kinds);
        snprintf(kinds + l, sizeof kinds - l, "%s%s %" PRIu64, k ? ", " : "", fault_names[k],
                 cs.by_kind[k]);
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    printf("figures: acquisitions %" PRIu64 " (%.0f/s), timeouts %" PRIu64 ", I/O failures %" PRIu64
           ", other failures %" PRIu64 "\n", tot.acquired, (double)tot.acquired / (double)seconds,
           tot.timeouts, tot.io_errors, tot.other_errors);
    printf("figures: faults injected %" PRIu64 " (%s)\n", cs.faults, kinds);
    printf("figures: violations %" PRIu64 " among %" PRIu64 " valid sections; %" PRIu64
           " sections not valid at enter or leave; %" PRIu64 " spanning a server restart\n",
           violations, checked, invalid, spanning);
    printf("figures: locks lost and reported %" PRIu64 " (release said lost %" PRIu64
           ", validity gone at leave %" PRIu64 ", watchdog LOCK_LOST events %" PRIu64
           "), release not-owner %" PRIu64 ", release outcome still unknown after 15 s %" PRIu64
           "\n", lost_reported, tot.release_lost, tot.invalid_at_leave, tot.lost_events,
           tot.release_not_owner, tot.release_io_final);
    printf("figures: %.0f s wall\n", secs);
    printf("chaos: %d passed, %d failed\n", passed, failed);
    free(recs);
    for (int i = 0; i < procs; i++)
        crdt_proxy_stop(cs.proxies[i]);
    pthread_mutex_lock(&g_server_mu);
    kill_server();
    pthread_mutex_unlock(&g_server_mu);
    rmdir(g_dir);
    return failed == 0 ? 0 : 1;
}
