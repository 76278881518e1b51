/*
 * bench.c -- credisson-bench, the benchmark of issue #7: credisson against the round-trip
 * floor and against node-redisson, measured side by side in the same repetitions.
 *
 *   credisson-bench [--quick] [--json] [--scenario NAME]... [--reps N] [--url URL]
 *                   [--no-node]
 *
 * It starts a private redis-server (no RDB, no AOF, a free 127.0.0.1 port, killed at
 * exit) unless --url redis://HOST:PORT is given. Every scenario runs once per repetition,
 * repetitions outermost; credisson and node-redisson alternate which goes first. Every
 * ratio is computed inside one repetition (this machine is shared and noisy) and then
 * summarised as median, min and max over the repetitions. A repetition whose exclusion
 * or FIFO check fails makes the scenario "failed" and the exit status 1.
 *
 * Method, metrics and the last full run: bench/README.md.
 * Threads: the main thread drives everything; threads-N starts N locker threads, the
 * floor a subscriber thread; stall starts 64 blocking threads and a loop thread while the
 * main thread stops and resumes the server (SIGSTOP/SIGCONT). Workers are separate processes (worker.c, node/worker.js).
 */
#include "bench.h"
#include "../tests/standalone/redis_child.h" /* free_port, spawn_child, await_server */

#include <credisson.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CRD_BENCH_NODE_MODULES
#define CRD_BENCH_NODE_MODULES "interop/node/node_modules"
#endif
#ifndef CRD_BENCH_NODE_WORKER
#define CRD_BENCH_NODE_WORKER "bench/node/worker.js"
#endif
#ifndef CRD_BENCH_LUA_DIR
#define CRD_BENCH_LUA_DIR "lua"
#endif
#ifndef CRD_BENCH_REDIS_SERVER
#define CRD_BENCH_REDIS_SERVER "redis-server"
#endif
#ifndef CRD_BENCH_REDIS_BENCHMARK
#define CRD_BENCH_REDIS_BENCHMARK "redis-benchmark"
#endif
#ifndef CRD_BENCH_BUILD_TYPE
#define CRD_BENCH_BUILD_TYPE ""
#endif

/* ---- options and parameters ------------------------------------------------------------- */

static const char *const ALL_SCENARIOS[] = {
    "floor",   "uncontended", "uncontended-tls", "threads-4",    "threads-16",
    "loop-64", "many-names",  "stall",           "procs-4",      "procs-16",
    "handoff", "fair-8",      "cluster-3",       "watchdog-10k", "watchdog-100k",
    "semaphore-8", "dispatch-2000", "group-100"};
#define NSCEN (sizeof ALL_SCENARIOS / sizeof ALL_SCENARIOS[0])

typedef struct params {
    bool quick, json, node;
    int reps;
    int floor_n;            /* samples per floor measurement */
    int unc_blocks, unc_per_block;
    int64_t duration_ms;    /* threads-N, procs-N, fair-8 */
    int handoff_rounds;
    int wd_rounds;
    long cap_acq_n, cap_rel_n; /* many-names: redis-benchmark requests per script */
    int64_t stall_ms;          /* stall: how long the server is stopped */
    bool selected[NSCEN];
} params;

static params P;
static bn_endpoint EP;
static redisContext *ADMIN; /* the bench's own connection: INFO, cleanup */
static bool OWN_SERVER;
static char SELF_EXE[4096];
static char NODE_MODULES[4096];
static char NODE_WORKER[4096];
static char RUN_ID[32];
static int FAILED_CHECKS;

/* ---- the private redis-server ------------------------------------------------------------ */

static pid_t redis_pid;
static char redis_dir[64];

static void stop_redis(void)
{
    if (redis_pid > 0) {
        kill(redis_pid, SIGTERM);
        kill(redis_pid, SIGCONT); /* the stall scenario may have left it stopped */
        waitpid(redis_pid, NULL, 0);
        redis_pid = 0;
    }
    if (redis_dir[0] != '\0') {
        char p[128];
        snprintf(p, sizeof p, "%s/redis.log", redis_dir);
        unlink(p);
        rmdir(redis_dir);
        redis_dir[0] = '\0';
    }
}

static void on_signal(int sig)
{
    if (redis_pid > 0) {
        kill(redis_pid, SIGTERM);
        kill(redis_pid, SIGCONT);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static bool start_redis(void)
{
    snprintf(redis_dir, sizeof redis_dir, "/tmp/crd-bench.XXXXXX");
    if (mkdtemp(redis_dir) == NULL)
        return false;
    atexit(stop_redis);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    for (int attempt = 0; attempt < 5; attempt++) {
        int port = free_port();
        char ports[16], logf[128];
        snprintf(ports, sizeof ports, "%d", port);
        snprintf(logf, sizeof logf, "%s/redis.log", redis_dir);
        const char *args[] = {CRD_BENCH_REDIS_SERVER, "--port", ports, "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", redis_dir,
                              "--protected-mode", "no", "--loglevel", "warning", "--logfile",
                              logf, "--maxclients", "2000", NULL};
        redis_pid = spawn_child(args, false);
        if (redis_pid > 0 && await_server(&redis_pid, port, 5000)) {
            snprintf(EP.host, sizeof EP.host, "127.0.0.1");
            EP.port = port;
            return true;
        }
        kill_child(&redis_pid);
    }
    return false;
}

/* Between scenarios on our own server: nothing left over (locks, lists, 100k holds). */
static void clean_server(void)
{
    if (!OWN_SERVER)
        return;
    const char *argv[1] = {"FLUSHALL"};
    freeReplyObject(bn_cmd(ADMIN, 1, argv));
}

/* ---- results ---------------------------------------------------------------------------- */

#define MAXMET 40

typedef struct result {
    const char *scenario;
    const char *impl;
    char names[MAXMET][48];
    bn_vec vals[MAXMET];
    int nmet;
    int reps;
    bool failed;
    char why[256];
} result;

static result RESULTS[2 * NSCEN];
static int NRESULTS;

/* The most CPU time the hypervisor took from this machine in one repetition of one
 * scenario (bench/README.md, "Steal"), and where; above STEAL_NOTE the run says so. */
#define STEAL_NOTE 0.05
#define STEAL_MIN_TICKS 200
static double STEAL_MAX;
static const char *STEAL_WHERE = "";
static int STEAL_REP;

static result *res(const char *scenario, const char *impl)
{
    for (int i = 0; i < NRESULTS; i++)
        if (strcmp(RESULTS[i].scenario, scenario) == 0 && strcmp(RESULTS[i].impl, impl) == 0)
            return &RESULTS[i];
    result *r = &RESULTS[NRESULTS++];
    memset(r, 0, sizeof *r);
    r->scenario = scenario;
    r->impl = impl;
    return r;
}

static void put(result *r, const char *name, double v)
{
    int i;
    for (i = 0; i < r->nmet; i++)
        if (strcmp(r->names[i], name) == 0)
            break;
    if (i == r->nmet) {
        if (r->nmet == MAXMET)
            return;
        snprintf(r->names[r->nmet++], sizeof r->names[0], "%s", name);
    }
    bn_vec_push(&r->vals[i], v);
}

static void fail_check(result *r, const char *what, double n)
{
    r->failed = true;
    snprintf(r->why, sizeof r->why, "%.0f %s", n, what);
    FAILED_CHECKS++;
    fprintf(stderr, "credisson-bench: %s %s: CHECK FAILED: %s\n", r->scenario, r->impl, r->why);
}

/* ---- lock-script and pub/sub floor -------------------------------------------------------- */

/* The owner field of the raw scripts (floor, raw pair, capacity). */
#define CAP_OWNER "00000000-0000-4000-8000-000000000000:1"

static char ACQ_SHA[64], PUB_SHA[64], REL_SHA[64];
static bool load_release_script(void);
static long FLOOR_KEYS;

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    } else {
        s[n] = '\0';
    }
    fclose(f);
    return s;
}

static void load_script(const char *text, char *sha)
{
    const char *argv[3] = {"SCRIPT", "LOAD", text};
    redisReply *r = bn_cmd(ADMIN, 3, argv);
    snprintf(sha, 64, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

/* The floor's lock script is credisson's own lua/rlock_acquire.lua, run with raw hiredis
 * on a fresh key: the same server work as an uncontended acquire, no library around it. */
static void load_floor_scripts(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/rlock_acquire.lua", CRD_BENCH_LUA_DIR);
    char *text = read_file(path);
    if (text == NULL) {
        text = strdup("if (redis.call('exists', KEYS[1]) == 0) or "
                      "(redis.call('hexists', KEYS[1], ARGV[2]) == 1) then\n"
                      "redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
                      "redis.call('pexpire', KEYS[1], ARGV[1])\nreturn nil\nend\n"
                      "return redis.call('pttl', KEYS[1])\n");
    }
    load_script(text, ACQ_SHA);
    free(text);
    load_script("return redis.call('publish', KEYS[1], ARGV[1])", PUB_SHA);
}

static double script_rtt_once(redisContext *c)
{
    char k[96];
    snprintf(k, sizeof k, "crdbench:%s:floor:%ld", RUN_ID, FLOOR_KEYS++);
    const char *argv[6] = {"EVALSHA", ACQ_SHA, "1", k, "10000", CAP_OWNER};
    int64_t t0 = bn_now_us();
    redisReply *r = bn_cmd(c, 6, argv);
    int64_t t1 = bn_now_us();
    if (r->type != REDIS_REPLY_NIL) {
        fprintf(stderr, "credisson-bench: the floor script did not acquire a fresh key\n");
        exit(2);
    }
    freeReplyObject(r);
    return (double)(t1 - t0);
}

/* The raw pair (µs): credisson's acquire script and Redisson's unlock script
 * (lua/rlock_unlock.lua, publish and unlock latch included) on one fresh key, back to back
 * with raw hiredis: the server work of an uncontended acquire+release pair, no library
 * around it. NAN without the unlock script. */
static double raw_pair_once(redisContext *c)
{
    if (!load_release_script())
        return NAN;
    char k[96], ch[128], latch[160];
    long id = FLOOR_KEYS++;
    snprintf(k, sizeof k, "crdbench:%s:floor:%ld", RUN_ID, id);
    snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", k);
    snprintf(latch, sizeof latch, "redisson_unlock_latch:{%s}:%ld", k, id);
    const char *acq[6] = {"EVALSHA", ACQ_SHA, "1", k, "10000", CAP_OWNER};
    const char *rel[11] = {"EVALSHA", REL_SHA, "3", k, ch, latch, "0", "10000", CAP_OWNER,
                           "PUBLISH", "7000"};
    int64_t t0 = bn_now_us();
    redisReply *a = bn_cmd(c, 6, acq);
    redisReply *r = bn_cmd(c, 11, rel);
    int64_t t1 = bn_now_us();
    bool ok = a->type == REDIS_REPLY_NIL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(a);
    freeReplyObject(r);
    if (!ok) {
        fprintf(stderr, "credisson-bench: the raw pair did not acquire and release a fresh key\n");
        exit(2);
    }
    return (double)(t1 - t0);
}

typedef struct sub_thread {
    redisContext *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t t_recv;
    long got;
} sub_thread;

/* Reads what the server pushes on c (a subscribed or MONITOR connection) and hands each
 * reply to on_reply, until on_reply returns true or the connection ends. */
static void read_pushed(redisContext *c, bool (*on_reply)(void *arg, const redisReply *r),
                        void *arg)
{
    for (;;) {
        void *rv = NULL;
        if (redisGetReply(c, &rv) != REDIS_OK || rv == NULL)
            return;
        bool stop = on_reply(arg, rv);
        freeReplyObject(rv);
        if (stop)
            return;
    }
}

/* A message stamps its arrival and wakes the publisher; "stop" is the last one. */
static bool on_message(void *arg, const redisReply *r)
{
    sub_thread *s = arg;
    int64_t t = bn_now_us();
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        strcmp(r->element[0]->str, "message") != 0)
        return false;
    pthread_mutex_lock(&s->mu);
    s->t_recv = t;
    s->got++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return strcmp(r->element[2]->str, "stop") == 0;
}

static void *subscriber(void *p)
{
    sub_thread *s = p;
    read_pushed(s->c, on_message, s);
    return NULL;
}

typedef struct floor_vals {
    double ping_p50, ping_p99, script_p50, script_p99, pubsub_p50, pubsub_p99;
} floor_vals;

/* PING, lock-script and pub/sub delivery round trips from this process, concurrency 1.
 * With idle_us > 0 the pub/sub samples are each taken after that long a pause, as in the
 * handoff scenario, where both sides sit idle before the release (waking an idle CPU of
 * a virtual machine costs far more than a back-to-back round trip). */
static floor_vals measure_floor(int n, int64_t idle_us)
{
    floor_vals f;
    redisContext *c = bn_connect(&EP);
    bn_vec ping = {0}, script = {0}, pub = {0};
    const char *pa[1] = {"PING"};
    for (int i = 0; i < n; i++) {
        int64_t t0 = bn_now_us();
        freeReplyObject(bn_cmd(c, 1, pa));
        bn_vec_push(&ping, (double)(bn_now_us() - t0));
    }
    for (int i = 0; i < n; i++)
        bn_vec_push(&script, script_rtt_once(c));

    /* Pub/sub: time from sending a script that publishes to the subscriber thread
     * holding the message (the path of an unlock's wake-up). */
    sub_thread s;
    memset(&s, 0, sizeof s);
    s.c = bn_connect(&EP);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    char chan[96];
    snprintf(chan, sizeof chan, "crdbench:%s:floorchan", RUN_ID);
    const char *sa[2] = {"SUBSCRIBE", chan};
    freeReplyObject(bn_cmd(s.c, 2, sa));
    pthread_t th;
    pthread_create(&th, NULL, subscriber, &s);
    for (int i = 0; i <= n; i++) {
        bool last = i == n;
        const char *ea[5] = {"EVALSHA", PUB_SHA, "1", chan, last ? "stop" : "0"};
        pthread_mutex_lock(&s.mu);
        long want = s.got + 1;
        pthread_mutex_unlock(&s.mu);
        if (idle_us > 0)
            bn_sleep_us(idle_us);
        int64_t t0 = bn_now_us();
        freeReplyObject(bn_cmd(c, 5, ea));
        pthread_mutex_lock(&s.mu);
        while (s.got < want)
            pthread_cond_wait(&s.cv, &s.mu);
        int64_t t1 = s.t_recv;
        pthread_mutex_unlock(&s.mu);
        if (!last)
            bn_vec_push(&pub, (double)(t1 - t0));
    }
    pthread_join(th, NULL);
    redisFree(s.c);
    redisFree(c);
    f.ping_p50 = bn_quantile(&ping, 0.5);
    f.ping_p99 = bn_quantile(&ping, 0.99);
    f.script_p50 = bn_quantile(&script, 0.5);
    f.script_p99 = bn_quantile(&script, 0.99);
    f.pubsub_p50 = bn_quantile(&pub, 0.5);
    f.pubsub_p99 = bn_quantile(&pub, 0.99);
    bn_vec_free(&ping);
    bn_vec_free(&script);
    bn_vec_free(&pub);
    return f;
}

static void sc_floor(void)
{
    floor_vals f = measure_floor(P.floor_n, 0);
    result *r = res("floor", "credisson");
    put(r, "ping_us_p50", f.ping_p50);
    put(r, "ping_us_p99", f.ping_p99);
    put(r, "lock_script_us_p50", f.script_p50);
    put(r, "lock_script_us_p99", f.script_p99);
    put(r, "pubsub_delivery_us_p50", f.pubsub_p50);
    put(r, "pubsub_delivery_us_p99", f.pubsub_p99);
}

/* ---- helpers for scenarios --------------------------------------------------------------- */

static crd_client *new_client(int pool_size)
{
    crd_options o;
    crd_options_init(&o);
    o.url = EP.url;
    if (pool_size > 0)
        o.pool_size = pool_size;
    crd_client *c = NULL;
    crd_status st = crd_client_new(&o, &c);
    if (st != CRD_OK) {
        fprintf(stderr, "credisson-bench: crd_client_new: %s (%s)\n", crd_strerror(st),
                crd_client_errmsg(c));
        exit(2);
    }
    return c;
}

static void mkname(char *buf, size_t n, const char *scenario, int rep, const char *impl)
{
    snprintf(buf, n, "crdbench:%s:%s:%d:%s", RUN_ID, scenario, rep, impl);
}

static bool node_usable(void) { return P.node; }

/* Starts a worker: the C one (this binary) or the node one. */
static bool spawn_worker(bn_child *ch, bool node, const char *kind, const char *name,
                         const char *prefix, const char *extra1, const char *extra1v,
                         const char *extra2, const char *extra2v)
{
    char port[16];
    snprintf(port, sizeof port, "%d", EP.port);
    char *argv[24];
    int a = 0;
    static char nodepath[4200];
    char *env[2] = {NULL, NULL};
    if (node) {
        argv[a++] = "node";
        argv[a++] = NODE_WORKER;
        argv[a++] = (char *)kind;
        snprintf(nodepath, sizeof nodepath, "NODE_PATH=%s", NODE_MODULES);
        env[0] = nodepath;
    } else {
        argv[a++] = SELF_EXE;
        argv[a++] = "--worker";
        argv[a++] = (char *)kind;
    }
    argv[a++] = "--host";
    argv[a++] = EP.host;
    argv[a++] = "--port";
    argv[a++] = port;
    argv[a++] = "--name";
    argv[a++] = (char *)name;
    argv[a++] = "--prefix";
    argv[a++] = (char *)prefix;
    if (extra1 != NULL) {
        argv[a++] = (char *)extra1;
        argv[a++] = (char *)extra1v;
    }
    if (extra2 != NULL) {
        argv[a++] = (char *)extra2;
        argv[a++] = (char *)extra2v;
    }
    argv[a] = NULL;
    return bn_spawn(ch, argv, env);
}

/* Waits for "ready" from every worker; false if one died. */
static bool all_ready(bn_child *ch, int n)
{
    for (int i = 0; i < n; i++) {
        char *l = bn_readline(ch[i].out);
        bool ok = l != NULL && strcmp(l, "ready") == 0;
        free(l);
        if (!ok)
            return false;
    }
    return true;
}

static void go_all(bn_child *ch, int n)
{
    for (int i = 0; i < n; i++) {
        fputs("go\n", ch[i].in);
        fflush(ch[i].in);
    }
}

static void reap_all(bn_child *ch, int n)
{
    for (int i = 0; i < n; i++)
        if (ch[i].pid > 0) {
            kill(ch[i].pid, SIGKILL);
            bn_reap(&ch[i]);
        }
}

/* Parses "L v v v ..." into lat. */
static void parse_lat(const char *l, bn_vec *lat)
{
    const char *p = l + 1;
    char *end;
    for (;;) {
        double v = strtod(p, &end);
        if (end == p)
            break;
        bn_vec_push(lat, v);
        p = end;
    }
}

/* ---- counting the commands a client sends (MONITOR) --------------------------------------- */

/* INFO commandstats also counts the commands a script runs inside Redis, so the commands
 * a client *sends* are counted with MONITOR instead, on a short untimed block between two
 * ECHO markers: every line that is not from a script ("[0 lua]") is one command sent. */
typedef struct monitor {
    redisContext *c;
    pthread_t th;
    long count;
    bool counting;
} monitor;

/* One MONITOR line: counts it when between the markers; the end marker is the last. */
static bool on_monitored(void *arg, const redisReply *r)
{
    monitor *m = arg;
    if (r->type != REDIS_REPLY_STATUS || r->str == NULL)
        return false;
    if (strstr(r->str, "crdbench-mark-start") != NULL)
        m->counting = true;
    else if (strstr(r->str, "crdbench-mark-end") != NULL)
        return true;
    else if (m->counting && strstr(r->str, " lua]") == NULL)
        m->count++;
    return false;
}

static void *monitor_main(void *p)
{
    monitor *m = p;
    read_pushed(m->c, on_monitored, m);
    return NULL;
}

static void monitor_start(monitor *m)
{
    memset(m, 0, sizeof *m);
    m->c = bn_connect(&EP);
    const char *a[1] = {"MONITOR"};
    freeReplyObject(bn_cmd(m->c, 1, a));
    pthread_create(&m->th, NULL, monitor_main, m);
    const char *e[2] = {"ECHO", "crdbench-mark-start"};
    freeReplyObject(bn_cmd(ADMIN, 2, e));
}

static long monitor_stop(monitor *m)
{
    const char *e[2] = {"ECHO", "crdbench-mark-end"};
    freeReplyObject(bn_cmd(ADMIN, 2, e));
    pthread_join(m->th, NULL);
    redisFree(m->c);
    return m->count;
}

#define COUNT_PAIRS 50

/* ---- uncontended --------------------------------------------------------------------------- */

static double unc_c_pair_p50;
static bool unc_c_done, unc_node_done;
static double unc_node_pair_p50;

/* The figures both implementations report for n lock/unlock pairs, against the lock
 * script's round trip (floor); returns the pairs' p50. */
static double put_uncontended(result *r, bn_vec *pairs, bn_vec *floor, double cpu_us,
                              double redis_calls, long n)
{
    double p50 = bn_quantile(pairs, 0.5), f50 = bn_quantile(floor, 0.5);
    put(r, "pair_us_p50", p50);
    put(r, "pair_us_p99", bn_quantile(pairs, 0.99));
    put(r, "lock_script_us_p50", f50);
    put(r, "ratio_to_2x_script_rtt", p50 / (2 * f50));
    put(r, "client_cpu_us_per_pair", cpu_us / (double)n);
    put(r, "redis_calls_per_pair_incl_in_script", redis_calls / (double)n);
    return p50;
}

/* CPU time of every thread of this process, µs: CLOCK_PROCESS_CPUTIME_ID, read around
 * each sample below (one system call), so the CPU figures are taken in turn as well. */
static int64_t proc_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

typedef struct unc_take {
    bn_vec pairs, floor, raw;
    int64_t cpu_us, floor_cpu_us; /* the credisson pairs', the script RTTs' */
} unc_take;

/* One sample of each, in turn: a lock-script RTT, every other time a raw pair, and a
 * credisson pair, each with the process's CPU time around it. Taken one by one rather
 * than in blocks of each: this VM's round trip changes regime within a second (the
 * pair's p50 at 330 or 800 µs from one second to the next), and blocks of a few hundred
 * samples each then caught different regimes: the ratio of one run's medians swung
 * 1.03 -> 1.14 between two back-to-back runs, and read 0.96 to the raw pair, faster than
 * raw hiredis (bench/README.md, "Samples in turn"). */
static void unc_samples(crd_client *c, crd_lock *l, redisContext *fc, unc_take *t)
{
    for (int i = 0; i < P.unc_per_block; i++) {
        int64_t f0 = proc_cpu_us();
        bn_vec_push(&t->floor, script_rtt_once(fc));
        t->floor_cpu_us += proc_cpu_us() - f0;
        if (i % 2 == 0) {
            double v = raw_pair_once(fc);
            if (!isnan(v))
                bn_vec_push(&t->raw, v);
        }
        int64_t c0 = proc_cpu_us(), t0 = bn_now_us();
        crd_status a = crd_lock_acquire(l, -1, CRD_LEASE_WATCHDOG);
        crd_status r = crd_lock_release(l);
        bn_vec_push(&t->pairs, (double)(bn_now_us() - t0));
        t->cpu_us += proc_cpu_us() - c0;
        if (a != CRD_OK || r != CRD_OK) {
            fprintf(stderr, "credisson-bench: uncontended: %s / %s (%s)\n", crd_strerror(a),
                    crd_strerror(r), crd_client_errmsg(c));
            exit(2);
        }
    }
}

static void unc_credisson(int rep)
{
    char name[128];
    mkname(name, sizeof name, "uncontended", rep, "c");
    crd_client *c = new_client(0);
    crd_lock *l = NULL;
    crd_lock_new(c, name, &l);
    crd_lock_acquire(l, -1, CRD_LEASE_WATCHDOG); /* warm-up: connection, scripts, threads */
    crd_lock_release(l);
    redisContext *fc = bn_connect(&EP);
    unc_take t = {0};
    for (int b = 0; b < P.unc_blocks; b++)
        unc_samples(c, l, fc, &t);
    long n = (long)t.pairs.n;
    /* Redis calls per pair from a block of pairs alone (INFO commandstats counts every
     * client's). */
    bn_cmdstats s0 = bn_cmdstats_get(ADMIN);
    for (int i = 0; i < P.unc_per_block; i++) {
        crd_lock_acquire(l, -1, CRD_LEASE_WATCHDOG);
        crd_lock_release(l);
    }
    bn_cmdstats s1 = bn_cmdstats_get(ADMIN);
    result *r = res("uncontended", "credisson");
    if (rep == 0) {
        monitor m;
        monitor_start(&m);
        for (int i = 0; i < COUNT_PAIRS; i++) {
            crd_lock_acquire(l, -1, CRD_LEASE_WATCHDOG);
            crd_lock_release(l);
        }
        put(r, "redis_cmds_sent_per_pair", (double)monitor_stop(&m) / COUNT_PAIRS);
    }
    /* put_uncontended divides both by n: the calls are scaled from their block to n. */
    double calls = (double)(s1.total - s0.total) * (double)n / P.unc_per_block;
    double p50 = put_uncontended(r, &t.pairs, &t.floor, (double)t.cpu_us, calls, n);
    double floor_cpu = (double)t.floor_cpu_us / (double)t.floor.n;
    put(r, "raw_client_cpu_us_per_script_rtt", floor_cpu);
    if (floor_cpu > 0)
        put(r, "cpu_ratio_to_2x_script_rtt", (double)t.cpu_us / (double)n / (2 * floor_cpu));
    if (t.raw.n > 0) {
        put(r, "raw_pair_us_p50", bn_quantile(&t.raw, 0.5));
        put(r, "ratio_to_raw_pair", p50 / bn_quantile(&t.raw, 0.5));
    }
    unc_c_pair_p50 = p50;
    unc_c_done = true;
    redisFree(fc);
    crd_lock_free(l);
    crd_client_free(c);
    bn_vec_free(&t.pairs);
    bn_vec_free(&t.floor);
    bn_vec_free(&t.raw);
}

static void unc_node(int rep)
{
    char name[128], prefix[200], count[16];
    mkname(name, sizeof name, "uncontended", rep, "node");
    snprintf(prefix, sizeof prefix, "%s:k", name);
    snprintf(count, sizeof count, "%d", P.unc_blocks * P.unc_per_block);
    redisContext *fc = bn_connect(&EP);
    bn_vec floor = {0}, pairs = {0};
    for (int i = 0; i < P.unc_per_block * 2; i++)
        bn_vec_push(&floor, script_rtt_once(fc));
    bn_child ch;
    if (!spawn_worker(&ch, true, "pairs", name, prefix, "--count", count, NULL, NULL) ||
        !all_ready(&ch, 1)) {
        fprintf(stderr, "credisson-bench: the node worker did not start\n");
        reap_all(&ch, 1);
        redisFree(fc);
        return;
    }
    bn_cmdstats s0 = bn_cmdstats_get(ADMIN);
    go_all(&ch, 1);
    char *l1 = bn_readline(ch.out), *l2 = bn_readline(ch.out);
    bn_cmdstats s1 = bn_cmdstats_get(ADMIN);
    long n = 0;
    long long cpu = 0;
    if (l1 != NULL && l2 != NULL && sscanf(l1, "P %ld %lld", &n, &cpu) == 2 && n > 0) {
        parse_lat(l2, &pairs);
        for (int i = 0; i < P.unc_per_block * 2; i++)
            bn_vec_push(&floor, script_rtt_once(fc));
        result *r = res("uncontended", "node-redisson");
        double p50 =
            put_uncontended(r, &pairs, &floor, (double)cpu, (double)(s1.total - s0.total), n);
        unc_node_pair_p50 = p50;
        unc_node_done = true;
        if (rep == 0) {
            /* Count what node-redisson sends, in a second short run under MONITOR. */
            bn_child c2;
            char cnt[16];
            snprintf(cnt, sizeof cnt, "%d", COUNT_PAIRS);
            if (spawn_worker(&c2, true, "pairs", name, prefix, "--count", cnt, NULL, NULL) &&
                all_ready(&c2, 1)) {
                monitor m;
                monitor_start(&m);
                go_all(&c2, 1);
                char *a = bn_readline(c2.out), *b = bn_readline(c2.out);
                put(r, "redis_cmds_sent_per_pair", (double)monitor_stop(&m) / COUNT_PAIRS);
                free(a);
                free(b);
            }
            reap_all(&c2, 1);
        }
    }
    free(l1);
    free(l2);
    bn_reap(&ch);
    redisFree(fc);
    bn_vec_free(&floor);
    bn_vec_free(&pairs);
}

static void sc_uncontended(int rep)
{
    unc_c_done = unc_node_done = false;
    bool node_first = rep % 2 == 1;
    if (node_first && node_usable())
        unc_node(rep);
    unc_credisson(rep);
    if (!node_first && node_usable())
        unc_node(rep);
    if (unc_c_done && unc_node_done)
        put(res("uncontended", "credisson"), "node_pair_over_credisson_pair",
            unc_node_pair_p50 / unc_c_pair_p50);
}

/* ---- uncontended over TLS ----------------------------------------------------------------- */

/* A second private server with a plaintext and a TLS port, certificates made for this run
 * by tests/support/tls_certs.sh (the openssl CLI; nothing secret is kept). */
static pid_t tls_pid;
static char tls_dir[64];

static void stop_tls_redis(void)
{
    if (tls_pid > 0) {
        kill(tls_pid, SIGTERM);
        waitpid(tls_pid, NULL, 0);
        tls_pid = 0;
    }
    if (tls_dir[0] != '\0') {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tls_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "credisson-bench: could not remove %s\n", tls_dir);
        tls_dir[0] = '\0';
    }
}

static bool start_tls_redis(int *plain_port, int *tls_port)
{
    snprintf(tls_dir, sizeof tls_dir, "/tmp/crd-bench-tls.XXXXXX");
    if (mkdtemp(tls_dir) == NULL)
        return false;
    atexit(stop_tls_redis);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sh '%s' '%s/certs' >/dev/null 2>&1", CRD_BENCH_TLS_CERTS, tls_dir);
    if (system(cmd) != 0)
        return false;
    *plain_port = free_port();
    *tls_port = free_port();
    char pp[16], tp[16], cert[128], key[128], ca[128], logf[128];
    snprintf(logf, sizeof logf, "%s/redis.log", tls_dir);
    snprintf(pp, sizeof pp, "%d", *plain_port);
    snprintf(tp, sizeof tp, "%d", *tls_port);
    snprintf(cert, sizeof cert, "%s/certs/server.crt", tls_dir);
    snprintf(key, sizeof key, "%s/certs/server.key", tls_dir);
    snprintf(ca, sizeof ca, "%s/certs/ca.crt", tls_dir);
    const char *args[] = {CRD_BENCH_REDIS_SERVER, "--port", pp, "--tls-port", tp,
                          "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file",
                          ca, "--tls-auth-clients", "no", "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", tls_dir, "--loglevel", "warning",
                          "--logfile", logf, NULL};
    tls_pid = spawn_child(args, false);
    return tls_pid > 0 && await_server(&tls_pid, *plain_port, 5000);
}

static crd_client *client_at(const char *url, const char *ca)
{
    crd_options o;
    crd_options_init(&o);
    o.url = url;
    o.tls_ca_file = ca;
    crd_client *c = NULL;
    crd_status st = crd_client_new(&o, &c);
    if (st != CRD_OK) {
        fprintf(stderr, "credisson-bench: uncontended-tls: %s: %s (%s)\n", url, crd_strerror(st),
                crd_client_errmsg(c));
        exit(2);
    }
    return c;
}

/* One block of acquire+release pairs on l; their times go to v, the CPU to *cpu. */
static void pair_block(crd_lock *l, bn_vec *v, int64_t *cpu)
{
    int64_t c0 = bn_cpu_us();
    for (int i = 0; i < P.unc_per_block; i++) {
        int64_t t0 = bn_now_us();
        if (crd_lock_acquire(l, -1, CRD_LEASE_WATCHDOG) != CRD_OK || crd_lock_release(l) != CRD_OK) {
            fprintf(stderr, "credisson-bench: uncontended-tls: a pair failed\n");
            exit(2);
        }
        bn_vec_push(v, (double)(bn_now_us() - t0));
    }
    *cpu += bn_cpu_us() - c0;
}

/* The uncontended pair through a plaintext and a TLS client of one server, their blocks
 * interleaved (the handshake is outside: both clients are connected and warm first). */
static void sc_uncontended_tls(int rep)
{
    if (!OWN_SERVER) {
        fprintf(stderr, "credisson-bench: uncontended-tls needs the bench's own server\n");
        return;
    }
    int pp = 0, tp = 0;
    if (tls_pid == 0 && !start_tls_redis(&pp, &tp)) {
        fprintf(stderr, "credisson-bench: uncontended-tls: no TLS server (openssl? redis-server "
                        "built with TLS?): skipped\n");
        stop_tls_redis();
        return;
    }
    static char plain_url[64], tls_url[64], ca[128];
    if (pp != 0) {
        snprintf(plain_url, sizeof plain_url, "redis://127.0.0.1:%d", pp);
        snprintf(tls_url, sizeof tls_url, "rediss://127.0.0.1:%d", tp);
        snprintf(ca, sizeof ca, "%s/certs/ca.crt", tls_dir);
    }
    crd_client *cp = client_at(plain_url, NULL), *ct = client_at(tls_url, ca);
    char np[128], nt[128];
    mkname(np, sizeof np, "uncontended-tls", rep, "plain");
    mkname(nt, sizeof nt, "uncontended-tls", rep, "tls");
    crd_lock *lp = NULL, *lt = NULL;
    crd_lock_new(cp, np, &lp);
    crd_lock_new(ct, nt, &lt);
    for (int i = 0; i < 20; i++) { /* warm-up: connections, scripts, threads */
        crd_lock_acquire(lp, -1, CRD_LEASE_WATCHDOG);
        crd_lock_release(lp);
        crd_lock_acquire(lt, -1, CRD_LEASE_WATCHDOG);
        crd_lock_release(lt);
    }
    bn_vec vp = {0}, vt = {0};
    int64_t cpu_p = 0, cpu_t = 0;
    for (int b = 0; b < P.unc_blocks; b++) {
        bool tls_first = (b + rep) % 2 == 1;
        if (tls_first)
            pair_block(lt, &vt, &cpu_t);
        pair_block(lp, &vp, &cpu_p);
        if (!tls_first)
            pair_block(lt, &vt, &cpu_t);
    }
    double n = (double)P.unc_blocks * P.unc_per_block;
    result *r = res("uncontended-tls", "credisson");
    double p50p = bn_quantile(&vp, 0.5), p50t = bn_quantile(&vt, 0.5);
    put(r, "plain_pair_us_p50", p50p);
    put(r, "tls_pair_us_p50", p50t);
    put(r, "tls_pair_us_p99", bn_quantile(&vt, 0.99));
    put(r, "tls_over_plain_p50", p50t / p50p);
    put(r, "plain_client_cpu_us_per_pair", (double)cpu_p / n);
    put(r, "tls_client_cpu_us_per_pair", (double)cpu_t / n);
    crd_lock_free(lp);
    crd_lock_free(lt);
    crd_client_free(cp);
    crd_client_free(ct);
    bn_vec_free(&vp);
    bn_vec_free(&vt);
}

/* ---- threads-N ------------------------------------------------------------------------------ */

typedef struct locker {
    crd_lock *l;
    crd_client *c;
    const char *guard;
    int64_t deadline;
    long acq, late, viol, timeouts, errors;
    bn_vec lat;
    pthread_barrier_t *start;
} locker;

static void *locker_main(void *p)
{
    locker *k = p;
    redisContext *g = bn_connect(&EP);
    const char *inc[2] = {"INCR", k->guard}, *dec[2] = {"DECR", k->guard};
    pthread_barrier_wait(k->start);
    for (;;) {
        int64_t t0 = bn_now_us();
        if (t0 >= k->deadline)
            break;
        crd_status st = crd_lock_acquire(k->l, (k->deadline - t0) / 1000 + 2000, CRD_LEASE_WATCHDOG);
        int64_t t1 = bn_now_us();
        bn_vec_push(&k->lat, (double)(t1 - t0));
        if (st == CRD_TIMEOUT) {
            k->timeouts++;
            break;
        }
        if (st != CRD_OK) {
            fprintf(stderr, "credisson-bench: threads: acquire: %s (%s)\n", crd_strerror(st),
                    crd_client_errmsg(k->c));
            k->errors++;
            break;
        }
        if (t1 <= k->deadline)
            k->acq++;
        else
            k->late++;
        if (bn_cmd_int(g, 2, inc) != 1)
            k->viol++;
        bn_cmd_int(g, 2, dec);
        if (crd_lock_release(k->l) != CRD_OK) {
            k->errors++;
            break;
        }
    }
    redisFree(g);
    return NULL;
}

/* Shared summary of N lockers (threads or processes). */
typedef struct contended {
    long acq, late, viol, timeouts, errors;
    bn_vec lat;
    long min_acq, max_acq;
    double cpu_us;
    long long cmds, scripts, subs;
    double server_cpu_us; /* redis-server's own CPU time over the run (INFO cpu) */
    double idle;          /* the machine's idle share over the run */
} contended;

static void put_contended(result *r, contended *x, int n)
{
    double secs = (double)P.duration_ms / 1000.0;
    long total = x->acq + x->late;
    long stalls = 0;
    for (size_t i = 0; i < x->lat.n; i++)
        if (x->lat.v[i] > 1e6)
            stalls++;
    stalls += x->timeouts;
    put(r, "handoffs_per_s", (double)x->acq / secs);
    put(r, "acquire_ms_p50", bn_quantile(&x->lat, 0.5) / 1000.0);
    put(r, "acquire_ms_p99", bn_quantile(&x->lat, 0.99) / 1000.0);
    put(r, "acquire_ms_max", bn_max(&x->lat) / 1000.0);
    put(r, "stalls_over_1s", (double)stalls);
    put(r, "acquire_scripts_per_acq",
        total > 0 ? (double)(x->scripts - total) / (double)total : NAN);
    put(r, "sub_unsub_per_acq", total > 0 ? (double)x->subs / (double)total : NAN);
    put(r, "client_cpu_us_per_acq", total > 0 ? x->cpu_us / (double)total : NAN);
    put(r, "server_cpu_us_per_acq", total > 0 ? x->server_cpu_us / (double)total : NAN);
    put(r, "idle_share", x->idle);
    put(r, "min_share_of_mean", x->acq > 0 ? (double)x->min_acq * n / (double)x->acq : NAN);
    put(r, "exclusion_violations", (double)x->viol);
    if (x->viol > 0)
        fail_check(r, "exclusion violations", (double)x->viol);
    if (x->errors > 0)
        fprintf(stderr, "credisson-bench: %s %s: %ld lock errors\n", r->scenario, r->impl,
                x->errors);
}

static void sc_threads(int rep, const char *scenario, int n)
{
    char name[128], guard[200];
    mkname(name, sizeof name, scenario, rep, "c");
    snprintf(guard, sizeof guard, "%s:guard", name);
    crd_client *c = new_client(0);
    crd_lock *l = NULL;
    crd_lock_new(c, name, &l);
    crd_lock_acquire(l, -1, CRD_LEASE_WATCHDOG);
    crd_lock_release(l);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    locker *k = calloc((size_t)n, sizeof *k);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    for (int i = 0; i < n; i++) {
        k[i].l = l;
        k[i].c = c;
        k[i].guard = guard;
        k[i].start = &start;
        pthread_create(&th[i], NULL, locker_main, &k[i]);
    }
    bn_sleep_us(100000); /* the lockers connect their guard connections */
    bn_cmdstats s0 = bn_cmdstats_get(ADMIN);
    bn_ticks k0 = bn_ticks_now();
    int64_t cpu0 = bn_cpu_us();
    int64_t deadline = bn_now_us() + P.duration_ms * 1000;
    for (int i = 0; i < n; i++)
        k[i].deadline = deadline;
    pthread_barrier_wait(&start);
    contended x;
    memset(&x, 0, sizeof x);
    x.min_acq = -1;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        x.acq += k[i].acq;
        x.late += k[i].late;
        x.viol += k[i].viol;
        x.timeouts += k[i].timeouts;
        x.errors += k[i].errors;
        if (x.min_acq < 0 || k[i].acq < x.min_acq)
            x.min_acq = k[i].acq;
        for (size_t j = 0; j < k[i].lat.n; j++)
            bn_vec_push(&x.lat, k[i].lat.v[j]);
        bn_vec_free(&k[i].lat);
    }
    x.cpu_us = (double)(bn_cpu_us() - cpu0);
    x.idle = bn_idle_share(k0, bn_ticks_now());
    bn_cmdstats s1 = bn_cmdstats_get(ADMIN);
    x.cmds = s1.total - s0.total;
    x.scripts = s1.scripts - s0.scripts;
    x.subs = s1.subs - s0.subs;
    x.server_cpu_us = s1.server_cpu_us - s0.server_cpu_us;
    /* INCR and DECR of the critical section are the bench's, not the lock's. */
    x.cmds -= 2 * (x.acq + x.late);
    put_contended(res(scenario, "credisson"), &x, n);
    bn_vec_free(&x.lat);
    pthread_barrier_destroy(&start);
    free(k);
    free(th);
    crd_lock_free(l);
    crd_client_free(c);
}

/* ---- loop-N: the event-loop API against N blocking threads ---------------------------------- */

#define LOOP_NAMES 16

typedef struct loop_run {
    crd_lock **locks;
    int64_t deadline;
    long acq, errors;
    int in_flight;
} loop_run;

static void loop_released(void *user, crd_op *op, crd_status st);

static void loop_acquired(void *user, crd_op *op, crd_status st)
{
    loop_run *r = user;
    if (st != CRD_OK) {
        r->errors++;
        r->in_flight--;
        return;
    }
    r->acq++;
    crd_lock_release_async(crd_op_lock(op), crd_op_owner(op), loop_released, r, NULL);
}

static void loop_released(void *user, crd_op *op, crd_status st)
{
    loop_run *r = user;
    if (st != CRD_OK)
        r->errors++;
    if (bn_now_us() < r->deadline &&
        crd_lock_acquire_async(crd_op_lock(op), crd_op_owner(op), -1, 10000, loop_acquired, r,
                               NULL) == CRD_OK)
        return;
    r->in_flight--;
}

/* One loop thread (this one) of client c with n acquire-release chains in flight on
 * nnames names (chain k on name k % nnames, its own crd_owner_new() owner), each
 * acquire(-1, lease 10 s) followed by its release, for the scenario's duration:
 * acquisitions/s (each counted one's release is inside the time). */
static double loop_rate_on(crd_client *c, const char *base, int n, int nnames, long *errors)
{
    loop_run r;
    memset(&r, 0, sizeof r);
    r.locks = calloc((size_t)nnames, sizeof *r.locks);
    for (int i = 0; i < nnames; i++) {
        char name[200];
        snprintf(name, sizeof name, "%s:%d", base, i);
        crd_lock_new(c, name, &r.locks[i]);
    }
    int fd = crd_loop_fd(c);
    int64_t t0 = bn_now_us();
    r.deadline = t0 + P.duration_ms * 1000;
    for (int k = 0; k < n; k++)
        if (crd_lock_acquire_async(r.locks[k % nnames], crd_owner_new(), -1, 10000,
                                   loop_acquired, &r, NULL) == CRD_OK)
            r.in_flight++;
    while (r.in_flight > 0) {
        crd_loop_dispatch(c);
        int64_t ms = crd_loop_timeout_ms(c);
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, ms < 0 || ms > 100 ? 100 : (int)ms);
    }
    double secs = (double)(bn_now_us() - t0) / 1e6;
    *errors = r.errors;
    for (int i = 0; i < nnames; i++)
        crd_lock_free(r.locks[i]);
    free(r.locks);
    return (double)r.acq / secs;
}

/* One loop thread with n operations in flight on LOOP_NAMES names: acquisitions/s. */
typedef struct blocking_locker {
    crd_lock *l;
    int64_t deadline;
    long acq, errors;
} blocking_locker;

static void *blocking_main(void *p)
{
    blocking_locker *b = p;
    while (bn_now_us() < b->deadline) {
        if (crd_lock_acquire(b->l, -1, 10000) != CRD_OK || crd_lock_release(b->l) != CRD_OK)
            b->errors++;
        else
            b->acq++;
    }
    return NULL;
}

/* n threads of client c on nnames names (thread k on name k % nnames), for the
 * scenario's duration: acquisitions/s. */
static double blocking_rate_on(crd_client *c, const char *base, int n, int nnames, long *errors)
{
    crd_lock **locks = calloc((size_t)nnames, sizeof *locks);
    for (int i = 0; i < nnames; i++) {
        char name[200];
        snprintf(name, sizeof name, "%s:%d", base, i);
        crd_lock_new(c, name, &locks[i]);
    }
    blocking_locker *b = calloc((size_t)n, sizeof *b);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    int64_t t0 = bn_now_us();
    for (int k = 0; k < n; k++) {
        b[k].l = locks[k % nnames];
        b[k].deadline = t0 + P.duration_ms * 1000;
        pthread_create(&th[k], NULL, blocking_main, &b[k]);
    }
    long acq = 0;
    *errors = 0;
    for (int k = 0; k < n; k++) {
        pthread_join(th[k], NULL);
        acq += b[k].acq;
        *errors += b[k].errors;
    }
    double secs = (double)(bn_now_us() - t0) / 1e6;
    free(b);
    free(th);
    for (int i = 0; i < nnames; i++)
        crd_lock_free(locks[i]);
    free(locks);
    return (double)acq / secs;
}

/* n threads (one pool connection each) on the same LOOP_NAMES names: acquisitions/s. */

/* One side of a two-way comparison: rate(c, name, n, nnames, &errors), on c, or when c is
 * NULL on a client of its own made with new_client(own_threads). */
typedef struct side {
    double (*rate)(crd_client *c, const char *base, int n, int nnames, long *errors);
    crd_client *c;
    int own_threads;
    char name[128];
    int n, nnames;
    long errors;
    double value;
    double steal; /* the share of the machine's CPU time stolen while it ran */
} side;

static void side_run(side *s)
{
    crd_client *c = s->c != NULL ? s->c : new_client(s->own_threads);
    bn_ticks k0 = bn_ticks_now();
    s->value = s->rate(c, s->name, s->n, s->nnames, &s->errors);
    s->steal = bn_steal_share(k0, bn_ticks_now());
    if (c != s->c)
        crd_client_free(c);
}

/* Runs a then b in even repetitions, b then a in odd ones (order alternating). */
static void sides_in_turn(int rep, side *a, side *b)
{
    side_run(rep % 2 == 0 ? a : b);
    side_run(rep % 2 == 0 ? b : a);
}

/* The event-loop API with n acquisitions in flight from one thread, against the blocking
 * API with n threads, on the same 16 names, the two in turn (order alternating). */
static void sc_loop(int rep, const char *scenario, int n)
{
    side lp = {.rate = loop_rate_on, .own_threads = 0, .n = n, .nnames = LOOP_NAMES};
    side bl = {.rate = blocking_rate_on, .own_threads = n, .n = n, .nnames = LOOP_NAMES};
    mkname(lp.name, sizeof lp.name, scenario, rep, "loop");
    mkname(bl.name, sizeof bl.name, scenario, rep, "threads");
    sides_in_turn(rep, &lp, &bl);
    result *r = res(scenario, "credisson");
    put(r, "loop_acq_per_s", lp.value);
    put(r, "threads_acq_per_s", bl.value);
    put(r, "loop_over_threads", lp.value / bl.value);
    put(r, "loop_steal_share", lp.steal);
    put(r, "threads_steal_share", bl.steal);
    put(r, "loop_threads_used", 1);
    put(r, "blocking_threads_used", n);
    if (lp.errors + bl.errors > 0)
        fail_check(r, "errors", (double)(lp.errors + bl.errors));
}

/* ---- dispatch-2000: one loop call's work is bounded (issue #48) --------------------------- */

#define DISPATCH_OPS 2000

typedef struct dispatch_run {
    int done, errors, in_call, most_in_call;
} dispatch_run;

static void dispatch_done(void *user, crd_op *op, crd_status st)
{
    (void)op;
    dispatch_run *d = user;
    d->done++;
    d->errors += st != CRD_OK;
    if (++d->in_call > d->most_in_call)
        d->most_in_call = d->in_call;
}

static int64_t thread_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Runs the loop as an application would (poll on the fd for crd_loop_timeout_ms, then
 * dispatch) until stop(phase) or d->done reaches n, or 20 s pass. longest[0]: the longest
 * dispatch call (us, wall clock), longest[1]: the most CPU time one took (this thread's:
 * what the call did, without the time the machine gave others); *calls counts them. */
static void dispatch_until(crd_client *c, dispatch_run *d, int n, int phase,
                           bool (*stop)(int), int *calls, int64_t longest[2])
{
    int fd = crd_loop_fd(c);
    int64_t until = bn_now_us() + 20000000;
    while (d->done < n && !(stop != NULL && stop(phase)) && bn_now_us() < until) {
        int64_t t0 = bn_now_us(), c0 = thread_cpu_us();
        d->in_call = 0;
        crd_loop_dispatch(c);
        int64_t t = bn_now_us() - t0, cpu = thread_cpu_us() - c0;
        longest[0] = t > longest[0] ? t : longest[0];
        longest[1] = cpu > longest[1] ? cpu : longest[1];
        (*calls)++;
        int64_t ms = crd_loop_timeout_ms(c);
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, ms < 0 || ms > 100 ? 100 : (int)ms);
    }
}

/* The names of the scenario, for all_ran (set by sc_dispatch). */
static const char *DISPATCH_ARGV[DISPATCH_OPS + 1];
static size_t DISPATCH_LENS[DISPATCH_OPS + 1];

/* Whether the server has run every one of phase's operations (0: acquires, every name's
 * key exists; 1: releases, none does). One EXISTS of all the names. */
static bool all_ran(int phase)
{
    redisReply *r = redisCommandArgv(ADMIN, DISPATCH_OPS + 1, DISPATCH_ARGV, DISPATCH_LENS);
    long long n = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r != NULL)
        freeReplyObject(r);
    return phase == 0 ? n == DISPATCH_OPS : n == 0;
}

/* One loop client with 2 000 operations at once: 2 000 acquisitions on 2 000 free names,
 * started together, the loop run as an application runs it until the server has run
 * them all, then left alone 5 ms while the answers come in (so that what is left is ready
 * together), then drained; then their 2 000 releases likewise. Every dispatch call is
 * timed: the longest (target <= 5 ms), the most completions one call made, the calls,
 * and the phase's completions per second from the first start to the last completion. */
static void sc_dispatch(int rep, const char *scenario)
{
    crd_client *c = new_client(0);
    crd_lock **ls = calloc(DISPATCH_OPS, sizeof *ls);
    uint64_t *owners = calloc(DISPATCH_OPS, sizeof *owners);
    char base[128];
    mkname(base, sizeof base, scenario, rep, "d");
    for (int i = 0; i < DISPATCH_OPS; i++) {
        char name[200];
        snprintf(name, sizeof name, "%s:%d", base, i);
        crd_lock_new(c, name, &ls[i]);
        owners[i] = crd_owner_new();
        DISPATCH_ARGV[i + 1] = crd_lock_name(ls[i], &DISPATCH_LENS[i + 1]);
    }
    DISPATCH_ARGV[0] = "EXISTS";
    DISPATCH_LENS[0] = 6;
    /* Warm: connections and the script cache (a NOSCRIPT would take a second pass). */
    if (crd_lock_acquire(ls[0], -1, 10000) == CRD_OK)
        crd_lock_release(ls[0]);
    double longest[2] = {0, 0}, cpu[2] = {0, 0}, rate[2] = {0, 0}, most[2] = {0, 0};
    int calls[2] = {0, 0}, errors = 0;
    for (int phase = 0; phase < 2; phase++) {
        dispatch_run d = {0, 0, 0, 0};
        int64_t t0 = bn_now_us();
        for (int i = 0; i < DISPATCH_OPS; i++) {
            crd_status st = phase == 0 ? crd_lock_acquire_async(ls[i], owners[i], -1, 10000,
                                                                 dispatch_done, &d, NULL)
                                       : crd_lock_release_async(ls[i], owners[i],
                                                                dispatch_done, &d, NULL);
            if (st != CRD_OK) {
                d.done++;
                d.errors++;
            }
        }
        /* The loop runs until the server has run every one; then it stops looking while
         * their answers come in, and drains them. */
        int64_t worst[2] = {0, 0};
        dispatch_until(c, &d, DISPATCH_OPS, phase, all_ran, &calls[phase], worst);
        int64_t until = bn_now_us() + 20000000;
        while (!all_ran(phase) && bn_now_us() < until)
            bn_sleep_us(1000);
        bn_sleep_us(5000); /* time for the I/O thread to read the answers: the point */
        dispatch_until(c, &d, DISPATCH_OPS, phase, NULL, &calls[phase], worst);
        rate[phase] = DISPATCH_OPS / ((double)(bn_now_us() - t0) / 1e6);
        longest[phase] = (double)worst[0] / 1000.0;
        cpu[phase] = (double)worst[1] / 1000.0;
        most[phase] = d.most_in_call;
        errors += d.errors + (d.done < DISPATCH_OPS);
    }
    result *r = res(scenario, "credisson");
    put(r, "acquires_dispatch_ms_max", longest[0]);
    put(r, "releases_dispatch_ms_max", longest[1]);
    put(r, "acquires_dispatch_cpu_ms_max", cpu[0]);
    put(r, "releases_dispatch_cpu_ms_max", cpu[1]);
    put(r, "acquires_dispatch_calls", calls[0]);
    put(r, "releases_dispatch_calls", calls[1]);
    put(r, "acquires_completed_in_one_call_max", most[0]);
    put(r, "releases_completed_in_one_call_max", most[1]);
    put(r, "acquire_completions_per_s", rate[0]);
    put(r, "release_completions_per_s", rate[1]);
    if (errors > 0)
        fail_check(r, "errors", (double)errors);
    for (int i = 0; i < DISPATCH_OPS; i++)
        crd_lock_free(ls[i]);
    free(ls);
    free(owners);
    crd_client_free(c);
}

/* ---- many-names: distinct names against the server's capacity ------------------------------- */

#define MANY_NAMES 64
#define CAP_CHUNK 20000

static bool cap_noted;

/* Connections the server has open now (CLIENT LIST lines), the bench's own included. */
static long server_conns(void)
{
    const char *argv[2] = {"CLIENT", "LIST"};
    redisReply *r = bn_cmd(ADMIN, 2, argv);
    long n = 0;
    for (size_t i = 0; r->type == REDIS_REPLY_STRING && i < r->len; i++)
        n += r->str[i] == '\n';
    freeReplyObject(r);
    return n;
}

/* Waits (up to 2 s) until the server has closed what a freed client held. */
static void conns_settle(long base)
{
    int64_t until = bn_now_us() + 2000000;
    while (server_conns() > base && bn_now_us() < until)
        bn_sleep_us(10000);
}

/* redis-benchmark -P 16 -c 16 running one command n times, every __rand_int__ in it
 * replaced by a number in [0, keyspace) written as 12 digits: requests/s, or NAN. */
static double rb_rps(long n, long keyspace, int argc, const char **cmd)
{
    char port[16], ns[24], ks[24];
    snprintf(port, sizeof port, "%d", EP.port);
    snprintf(ns, sizeof ns, "%ld", n);
    snprintf(ks, sizeof ks, "%ld", keyspace);
    const char *head[] = {CRD_BENCH_REDIS_BENCHMARK, "-h", EP.host, "-p", port, "-P", "16",
                          "-c", "16", "-n", ns, "-r", ks, "--csv"};
    const int nh = (int)(sizeof head / sizeof head[0]);
    char *argv[40];
    for (int i = 0; i < nh; i++)
        argv[i] = (char *)head[i];
    for (int i = 0; i < argc; i++)
        argv[nh + i] = (char *)cmd[i];
    argv[nh + argc] = NULL;
    bn_child ch;
    if (!bn_spawn(&ch, argv, NULL))
        return NAN;
    /* --csv: a header line, then "<command>","<requests/s>",<latencies>... */
    double rps = NAN;
    char *l;
    while ((l = bn_readline(ch.out)) != NULL) {
        const char *q = strstr(l, "\",\"");
        if (strncmp(l, "\"EVALSHA", 8) == 0 && q != NULL)
            rps = strtod(q + 3, NULL);
        free(l);
    }
    if (bn_reap(&ch) != 0)
        rps = NAN;
    return rps;
}

/* Keys prefix + 12-digit i for i in [from, to), held by CAP_OWNER with a count of 1 (the
 * state the acquire script leaves), or counted. Bench-only scripts: the keys are built
 * from ARGV, which only a standalone server allows. */
static long cap_keys(const char *prefix, long from, long to, bool count)
{
    static const char fill[] =
        "for i = tonumber(ARGV[2]), tonumber(ARGV[3]) - 1 do\n"
        "  local k = ARGV[1] .. string.format('%012d', i)\n"
        "  redis.call('hset', k, ARGV[4], 1)\n"
        "  redis.call('pexpire', k, 60000)\n"
        "end\nreturn 0\n";
    static const char cnt[] =
        "local n = 0\n"
        "for i = tonumber(ARGV[2]), tonumber(ARGV[3]) - 1 do\n"
        "  n = n + redis.call('exists', ARGV[1] .. string.format('%012d', i))\n"
        "end\nreturn n\n";
    long n = 0;
    for (long a = from; a < to; a += CAP_CHUNK) {
        char as[24], bs[24];
        snprintf(as, sizeof as, "%ld", a);
        snprintf(bs, sizeof bs, "%ld", a + CAP_CHUNK < to ? a + CAP_CHUNK : to);
        const char *argv[7] = {"EVAL", count ? cnt : fill, "0", prefix, as, bs, CAP_OWNER};
        n += bn_cmd_int(ADMIN, 7, argv);
    }
    return n;
}

typedef struct capacity {
    double acq_rps, rel_rps, pairs_per_s, rel_full_fraction;
    double steal; /* the share of the machine's CPU time stolen during the two runs */
} capacity;

/* The server's capacity for credisson's own two scripts, from redis-benchmark -P 16 on
 * distinct keys (bench/README.md, many-names). Acquires: fresh keys out of 10^8, lease
 * 10 s. Releases: P.cap_rel_n of them on 8 x that many keys held by one owner (filled
 * first), the latch key random out of 10^16 as the library's per-call request id is;
 * the share of releases that found their key still held is reported. */
/* Loads Redisson's unlock script (lua/rlock_unlock.lua) once; whether REL_SHA is set. */
static bool load_release_script(void)
{
    if (REL_SHA[0] == '\0') {
        char path[4200];
        snprintf(path, sizeof path, "%s/rlock_unlock.lua", CRD_BENCH_LUA_DIR);
        char *text = read_file(path);
        if (text != NULL)
            load_script(text, REL_SHA);
        free(text);
    }
    return REL_SHA[0] != '\0';
}

static capacity measure_capacity(int rep)
{
    capacity cp = {NAN, NAN, NAN, NAN, 0};
    load_release_script();
    char akey[128], rprefix[128], rkey[160], chan[128], latch[160];
    snprintf(akey, sizeof akey, "crdbench:%s:cap:%d:a:__rand_int__", RUN_ID, rep);
    snprintf(rprefix, sizeof rprefix, "crdbench:%s:cap:%d:r:", RUN_ID, rep);
    snprintf(rkey, sizeof rkey, "%s__rand_int__", rprefix);
    snprintf(chan, sizeof chan, "redisson_lock__channel:{crdbench:%s:cap}", RUN_ID);
    snprintf(latch, sizeof latch,
             "redisson_unlock_latch:{crdbench:%s:cap}:__rand_int____rand_int__", RUN_ID);
    const char *acq[6] = {"EVALSHA", ACQ_SHA, "1", akey, "10000", CAP_OWNER};
    const char *rel[11] = {"EVALSHA", REL_SHA, "3", rkey, chan, latch,
                           "0",       "10000", CAP_OWNER, "PUBLISH", "7000"};
    bn_ticks k0 = bn_ticks_now();
    cp.acq_rps = rb_rps(P.cap_acq_n, 100000000, 6, acq);
    bn_ticks k1 = bn_ticks_now();
    if (isnan(cp.acq_rps) || REL_SHA[0] == '\0') {
        if (!cap_noted)
            fprintf(stderr, "credisson-bench: NOTE: many-names: no capacity figure (%s or "
                            "%s/rlock_unlock.lua missing or failing)\n",
                    CRD_BENCH_REDIS_BENCHMARK, CRD_BENCH_LUA_DIR);
        cap_noted = true;
        return cp;
    }
    long held = 8 * P.cap_rel_n;
    cap_keys(rprefix, 0, held, false);
    bn_ticks k2 = bn_ticks_now();
    cp.rel_rps = rb_rps(P.cap_rel_n, held, 11, rel);
    bn_ticks k3 = bn_ticks_now();
    k3.total += k1.total - k2.total; /* the two runs' ticks together, the filling between */
    k3.steal += k1.steal - k2.steal; /* them left out */
    cp.steal = bn_steal_share(k0, k3);
    long left = cap_keys(rprefix, 0, held, true);
    cp.rel_full_fraction = (double)(held - left) / (double)P.cap_rel_n;
    cp.pairs_per_s = 1.0 / (1.0 / cp.acq_rps + 1.0 / cp.rel_rps);
    return cp;
}

/* One side of many-names on a fresh client: its pairs per second, the connections the
 * server saw it open (over base), its own connect count and the share of the machine's
 * CPU time stolen while it ran; the client is freed and its connections closed after. */
typedef struct names_side {
    double rate, steal;
    long conns, errors;
    crd_metrics m;
} names_side;

static names_side many_names_side(double (*rate)(crd_client *, const char *, int, int, long *),
                                  const char *name, long base)
{
    names_side s;
    memset(&s, 0, sizeof s);
    crd_client *c = new_client(0);
    bn_ticks k0 = bn_ticks_now();
    s.rate = rate(c, name, MANY_NAMES, MANY_NAMES, &s.errors);
    s.steal = bn_steal_share(k0, bn_ticks_now());
    s.conns = server_conns() - base;
    crd_client_metrics(c, &s.m, sizeof s.m);
    crd_client_free(c);
    conns_settle(base);
    return s;
}

/* 64 threads of one client, each on its own name, then one loop thread with 64 chains on
 * 64 names (a fresh client each), against the server's capacity measured around them
 * (before them in even repetitions, after them in odd ones). */
static void sc_many_names(int rep, const char *scenario)
{
    char tname[128], lname[128];
    mkname(tname, sizeof tname, scenario, rep, "threads");
    mkname(lname, sizeof lname, scenario, rep, "loop");
    capacity cp = {NAN, NAN, NAN, NAN, 0};
    if (rep % 2 == 0)
        cp = measure_capacity(rep);
    long base = server_conns();
    names_side t = many_names_side(blocking_rate_on, tname, base);
    names_side l = many_names_side(loop_rate_on, lname, base);
    if (rep % 2 != 0)
        cp = measure_capacity(rep);
    result *r = res(scenario, "credisson");
    put(r, "threads_pairs_per_s", t.rate);
    put(r, "loop_pairs_per_s", l.rate);
    put(r, "capacity_pairs_per_s", cp.pairs_per_s);
    put(r, "threads_ratio_to_capacity", t.rate / cp.pairs_per_s);
    put(r, "loop_ratio_to_capacity", l.rate / cp.pairs_per_s);
    put(r, "cap_acquire_rps", cp.acq_rps);
    put(r, "cap_release_rps", cp.rel_rps);
    put(r, "cap_release_hit_held_share", cp.rel_full_fraction);
    put(r, "threads_connections", (double)t.conns);
    put(r, "threads_connects", (double)t.m.connects);
    put(r, "loop_connections", (double)l.conns);
    put(r, "loop_connects", (double)l.m.connects);
    put(r, "threads_steal_share", t.steal);
    put(r, "loop_steal_share", l.steal);
    put(r, "capacity_steal_share", cp.steal);
    if (t.errors + l.errors > 0)
        fail_check(r, "errors", (double)(t.errors + l.errors));
}

/* ---- stall: the server stopped (SIGSTOP) under blocking and loop acquires ------------------- */

#define STALL_NAMES 64
#define STALL_WAIT_MS 100

typedef struct stall_run {
    int64_t stall_end; /* the planned SIGCONT: no attempt starts after it */
    pthread_barrier_t ready, go;
} stall_run;

typedef struct stall_thread {
    stall_run *s;
    crd_lock *l;
    int64_t worst_over_us;
    long ok, failed, timed_out; /* timed_out: of failed, CRD_TIMEOUT */
    bool holds; /* told CRD_OK, and its release did not say released */
} stall_thread;

static void *stall_thread_main(void *p)
{
    stall_thread *t = p;
    if (crd_lock_acquire(t->l, 2000, CRD_LEASE_WATCHDOG) == CRD_OK) /* connected and warm */
        crd_lock_release(t->l);
    pthread_barrier_wait(&t->s->ready);
    pthread_barrier_wait(&t->s->go);
    t->worst_over_us = INT64_MIN;
    while (bn_now_us() < t->s->stall_end) {
        int64_t t0 = bn_now_us();
        crd_status st = crd_lock_acquire(t->l, STALL_WAIT_MS, CRD_LEASE_WATCHDOG);
        int64_t over = bn_now_us() - (t0 + STALL_WAIT_MS * 1000);
        if (over > t->worst_over_us)
            t->worst_over_us = over;
        if (st != CRD_OK) {
            t->failed++;
            t->timed_out += st == CRD_TIMEOUT;
            continue;
        }
        t->ok++;
        t->holds = crd_lock_release(t->l) != CRD_OK;
    }
    return NULL;
}

struct stall_loop;

typedef struct stall_chain {
    struct stall_loop *lp;
    crd_lock *l;
    uint64_t owner;
    int64_t t0;
    bool holds;
} stall_chain;

typedef struct stall_loop {
    stall_run *s;
    crd_client *c;
    stall_chain ch[STALL_NAMES];
    int64_t until; /* chains start no acquire after this */
    int in_flight;
    long ok, failed, timed_out;
    int64_t worst_over_us, worst_dispatch_us;
} stall_loop;

static void stall_acquired(void *user, crd_op *op, crd_status st);
static void stall_released(void *user, crd_op *op, crd_status st);

static void stall_next(stall_chain *k)
{
    stall_loop *lp = k->lp;
    k->t0 = bn_now_us();
    if (k->t0 < lp->until && crd_lock_acquire_async(k->l, k->owner, STALL_WAIT_MS,
                                                    CRD_LEASE_WATCHDOG, stall_acquired, k,
                                                    NULL) == CRD_OK)
        return;
    lp->in_flight--;
}

static void stall_acquired(void *user, crd_op *op, crd_status st)
{
    stall_chain *k = user;
    int64_t over = bn_now_us() - (k->t0 + STALL_WAIT_MS * 1000);
    if (over > k->lp->worst_over_us)
        k->lp->worst_over_us = over;
    if (st != CRD_OK) {
        k->lp->failed++;
        k->lp->timed_out += st == CRD_TIMEOUT;
        stall_next(k);
        return;
    }
    k->lp->ok++;
    k->holds = true;
    if (crd_lock_release_async(crd_op_lock(op), k->owner, stall_released, k, NULL) != CRD_OK)
        k->lp->in_flight--;
}

static void stall_released(void *user, crd_op *op, crd_status st)
{
    (void)op;
    stall_chain *k = user;
    k->holds = st != CRD_OK;
    stall_next(k);
}

/* Runs every chain once from now until it passes lp->until; gives up at hard (then
 * in_flight says how many never completed). Times each dispatch that starts before
 * lp->s->stall_end. */
static void stall_loop_run(stall_loop *lp, int64_t hard)
{
    int fd = crd_loop_fd(lp->c);
    lp->in_flight = STALL_NAMES;
    for (int i = 0; i < STALL_NAMES; i++) {
        lp->ch[i].t0 = bn_now_us();
        if (crd_lock_acquire_async(lp->ch[i].l, lp->ch[i].owner, STALL_WAIT_MS, CRD_LEASE_WATCHDOG,
                                   stall_acquired, &lp->ch[i], NULL) != CRD_OK)
            lp->in_flight--;
    }
    while (lp->in_flight > 0 && bn_now_us() < hard) {
        int64_t t0 = bn_now_us();
        crd_loop_dispatch(lp->c);
        int64_t d = bn_now_us() - t0;
        if (t0 < lp->s->stall_end && d > lp->worst_dispatch_us)
            lp->worst_dispatch_us = d;
        int64_t ms = crd_loop_timeout_ms(lp->c);
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, ms < 0 || ms > 100 ? 100 : (int)ms);
    }
}

static void *stall_loop_main(void *p)
{
    stall_loop *lp = p;
    lp->until = 0; /* warm-up: one acquire and release per chain, wait 100 ms */
    stall_loop_run(lp, bn_now_us() + 5000000);
    for (int i = 0; i < STALL_NAMES; i++)
        lp->ch[i].holds = false;
    lp->ok = lp->failed = lp->timed_out = 0;
    lp->worst_dispatch_us = 0;
    pthread_barrier_wait(&lp->s->ready);
    pthread_barrier_wait(&lp->s->go);
    lp->worst_over_us = INT64_MIN;
    lp->until = lp->s->stall_end;
    stall_loop_run(lp, lp->s->stall_end + 10000000);
    return NULL;
}

/* Waits until the kernel shows pid stopped (state T), up to 1 s. */
static bool wait_stopped(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    for (int i = 0; i < 1000; i++) {
        char buf[512] = "";
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        const char *q = strrchr(buf, ')');
        if (q != NULL && q[1] == ' ' && q[2] == 'T')
            return true;
        bn_sleep_us(1000);
    }
    return false;
}

static void sc_stall(int rep, const char *scenario)
{
    if (!OWN_SERVER) {
        if (rep == 0)
            fprintf(stderr, "credisson-bench: NOTE: stall skipped: it stops the server, which "
                            "it only does to its own (not with --url)\n");
        return;
    }
    char base[128];
    mkname(base, sizeof base, scenario, rep, "c");
    crd_client *c = new_client(0);
    stall_run s;
    memset(&s, 0, sizeof s);
    s.stall_end = INT64_MAX;
    pthread_barrier_init(&s.ready, NULL, STALL_NAMES + 2);
    pthread_barrier_init(&s.go, NULL, STALL_NAMES + 2);
    stall_thread *t = calloc(STALL_NAMES, sizeof *t);
    stall_loop *lp = calloc(1, sizeof *lp);
    pthread_t th[STALL_NAMES], lth;
    const char *names[2 * STALL_NAMES];
    char nbuf[2 * STALL_NAMES][160];
    lp->s = &s;
    lp->c = c;
    for (int i = 0; i < STALL_NAMES; i++) {
        snprintf(nbuf[i], sizeof nbuf[i], "%s:t:%d", base, i);
        snprintf(nbuf[STALL_NAMES + i], sizeof nbuf[0], "%s:l:%d", base, i);
        names[i] = nbuf[i];
        names[STALL_NAMES + i] = nbuf[STALL_NAMES + i];
        t[i].s = &s;
        crd_lock_new(c, names[i], &t[i].l);
        lp->ch[i].lp = lp;
        lp->ch[i].owner = crd_owner_new();
        crd_lock_new(c, names[STALL_NAMES + i], &lp->ch[i].l);
        pthread_create(&th[i], NULL, stall_thread_main, &t[i]);
    }
    pthread_create(&lth, NULL, stall_loop_main, lp);
    pthread_barrier_wait(&s.ready);
    crd_metrics m0, m1;
    crd_client_metrics(c, &m0, sizeof m0);

    /* From here to SIGCONT: no early return, and nothing of the bench's own talks to the
     * server (ADMIN would block). stop_redis() and on_signal() resume it too. */
    kill(redis_pid, SIGSTOP);
    bool stopped = wait_stopped(redis_pid);
    int64_t t_stop = bn_now_us();
    s.stall_end = t_stop + P.stall_ms * 1000;
    pthread_barrier_wait(&s.go);
    while (bn_now_us() < s.stall_end)
        bn_sleep_us(s.stall_end - bn_now_us());
    kill(redis_pid, SIGCONT);
    int64_t t_cont = bn_now_us();

    /* Every caller must be back soon after the resume; a hung one ends the run. */
    long hung = 0;
    struct timespec jd;
    clock_gettime(CLOCK_REALTIME, &jd);
    jd.tv_sec += 10;
    for (int i = 0; i < STALL_NAMES; i++)
        hung += pthread_timedjoin_np(th[i], NULL, &jd) != 0;
    hung += pthread_timedjoin_np(lth, NULL, &jd) != 0;
    int64_t t_back = bn_now_us();
    result *r = res(scenario, "credisson");
    if (hung > 0 || lp->in_flight > 0) {
        fail_check(r, "callers (threads, or the loop thread) not back 10 s after the resume",
                   (double)(hung + lp->in_flight));
        fprintf(stderr, "credisson-bench: stall: cannot free a client still in use; stopping\n");
        exit(1);
    }

    /* Every name's key must go: a late hold is given back once the server answers. A key
     * that stays while nobody was told it is held is a silent hold. */
    const char *argv[1 + 2 * STALL_NAMES];
    int64_t gone_at = -1, hard = bn_now_us() + 5000000;
    long left = 0;
    do {
        int n = 0;
        argv[n++] = "EXISTS";
        for (int i = 0; i < STALL_NAMES; i++) {
            if (!t[i].holds)
                argv[n++] = names[i];
            if (!lp->ch[i].holds)
                argv[n++] = names[STALL_NAMES + i];
        }
        left = n > 1 ? bn_cmd_int(ADMIN, n, argv) : 0;
        if (left == 0)
            gone_at = bn_now_us();
        else
            bn_sleep_us(10000);
    } while (left > 0 && bn_now_us() < hard);
    crd_client_metrics(c, &m1, sizeof m1);

    int64_t t_over = INT64_MIN;
    long t_ok = 0, t_failed = 0, t_timed_out = 0, known = 0;
    for (int i = 0; i < STALL_NAMES; i++) {
        t_over = t[i].worst_over_us > t_over ? t[i].worst_over_us : t_over;
        t_ok += t[i].ok;
        t_failed += t[i].failed;
        t_timed_out += t[i].timed_out;
        known += t[i].holds + lp->ch[i].holds;
    }
    put(r, "stall_ms", (double)(t_cont - t_stop) / 1000.0);
    put(r, "threads_deadline_overrun_ms_max", (double)t_over / 1000.0);
    put(r, "loop_deadline_overrun_ms_max", (double)lp->worst_over_us / 1000.0);
    put(r, "loop_dispatch_ms_max", (double)lp->worst_dispatch_us / 1000.0);
    put(r, "threads_acquires_failed", (double)t_failed);
    put(r, "threads_acquires_timed_out", (double)t_timed_out);
    put(r, "threads_acquires_ok", (double)t_ok);
    put(r, "loop_acquires_failed", (double)lp->failed);
    put(r, "loop_acquires_timed_out", (double)lp->timed_out);
    put(r, "loop_acquires_ok", (double)lp->ok);
    put(r, "late_holds_released", (double)(m1.late_holds_released - m0.late_holds_released));
    put(r, "outcomes_unknown", (double)(m1.outcomes_unknown - m0.outcomes_unknown));
    put(r, "callers_back_ms_after_resume", (double)(t_back - t_cont) / 1000.0);
    put(r, "keys_gone_ms_after_resume", gone_at < 0 ? NAN : (double)(gone_at - t_cont) / 1000.0);
    put(r, "holds_known_to_callers", (double)known);
    put(r, "silent_holds", (double)left);
    if (!stopped)
        fprintf(stderr, "credisson-bench: stall: the server was not seen stopped within 1 s\n");
    if (left > 0)
        fail_check(r, "silent holds (a key still held 5 s after the resume, its caller told the "
                      "acquire failed)", (double)left);
    for (int i = 0; i < STALL_NAMES; i++) {
        crd_lock_free(t[i].l);
        crd_lock_free(lp->ch[i].l);
    }
    crd_client_free(c);
    pthread_barrier_destroy(&s.ready);
    pthread_barrier_destroy(&s.go);
    free(t);
    free(lp);
}

/* ---- cluster-3 ------------------------------------------------------------------------------- */

#define CLUSTER_THREADS 24
#define CLUSTER_NAMES 48

static bn_cluster CL3, CL1;
static int cluster_state; /* 0 not tried, 1 running, -1 could not start */

static void stop_clusters(void)
{
    bn_cluster_stop(&CL3);
    bn_cluster_stop(&CL1);
}

static crd_client *cluster_client(const char *url, int pool)
{
    crd_options o;
    crd_options_init(&o);
    o.url = url;
    o.pool_size = pool;
    crd_client *c = NULL;
    if (crd_client_new(&o, &c) != CRD_OK) {
        fprintf(stderr, "credisson-bench: cluster-3: %s: %s\n", url, crd_client_errmsg(c));
        crd_client_free(c);
        return NULL;
    }
    return c;
}

/* The same load (CLUSTER_THREADS threads, each on its own of CLUSTER_NAMES names, so
 * the names spread over every slot owner) on a 3-primary cluster and on a 1-primary
 * cluster (every slot on one node, the same cluster code path), in turn, order
 * alternating: does sharding scale? */
static void sc_cluster(int rep, const char *scenario)
{
    if (cluster_state == 0) {
        atexit(stop_clusters);
        bool ok = bn_cluster_start(&CL3, 3, CRD_BENCH_REDIS_SERVER, CRD_BENCH_REDIS_CLI) &&
                  bn_cluster_start(&CL1, 1, CRD_BENCH_REDIS_SERVER, CRD_BENCH_REDIS_CLI);
        cluster_state = ok ? 1 : -1;
        if (!ok) {
            stop_clusters();
            fprintf(stderr, "NOTE: cluster-3 skipped: the private clusters could not be started "
                            "(%s, %s)\n", CRD_BENCH_REDIS_SERVER, CRD_BENCH_REDIS_CLI);
        }
    }
    if (cluster_state < 0)
        return;
    crd_client *c3 = cluster_client(CL3.url, CLUSTER_THREADS);
    crd_client *c1 = cluster_client(CL1.url, CLUSTER_THREADS);
    result *r = res(scenario, "credisson");
    if (c3 == NULL || c1 == NULL) {
        fail_check(r, "cluster clients", 1);
    } else {
        side s3 = {.rate = blocking_rate_on, .c = c3, .n = CLUSTER_THREADS,
                   .nnames = CLUSTER_NAMES};
        side s1 = {.rate = blocking_rate_on, .c = c1, .n = CLUSTER_THREADS,
                   .nnames = CLUSTER_NAMES};
        mkname(s3.name, sizeof s3.name, scenario, rep, "three");
        mkname(s1.name, sizeof s1.name, scenario, rep, "one");
        sides_in_turn(rep, &s3, &s1);
        put(r, "three_primaries_acq_per_s", s3.value);
        put(r, "one_primary_acq_per_s", s1.value);
        put(r, "three_over_one", s3.value / s1.value);
        put(r, "client_threads", CLUSTER_THREADS);
        if (s3.errors + s1.errors > 0)
            fail_check(r, "errors", (double)(s3.errors + s1.errors));
    }
    crd_client_free(c3);
    crd_client_free(c1);
}

/* ---- procs-N -------------------------------------------------------------------------------- */

/* Runs n worker processes of one implementation; false when they could not run. kind
 * "procs", or "semaphore" (C only: permits, and its "H" line of acquire and release
 * times into *times). */
static bool procs_run(int rep, const char *scenario, int n, bool node, contended *x,
                      const char *kind, int permits, bn_vec *times)
{
    char name[128], prefix[200], dur[24], perm[16];
    mkname(name, sizeof name, scenario, rep, node ? "node" : "c");
    snprintf(prefix, sizeof prefix, "%s:k", name);
    snprintf(dur, sizeof dur, "%" PRId64, P.duration_ms);
    snprintf(perm, sizeof perm, "%d", permits);
    bn_child *ch = calloc((size_t)n, sizeof *ch);
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
        ok = spawn_worker(&ch[i], node, kind, name, prefix, "--duration-ms", dur,
                          times != NULL ? "--permits" : NULL, times != NULL ? perm : NULL);
    if (!ok || !all_ready(ch, n)) {
        fprintf(stderr, "credisson-bench: %s: %s workers did not start\n", scenario,
                node ? "node" : "C");
        reap_all(ch, n);
        free(ch);
        return false;
    }
    memset(x, 0, sizeof *x);
    x->min_acq = -1;
    bn_cmdstats s0 = bn_cmdstats_get(ADMIN);
    bn_ticks k0 = bn_ticks_now();
    go_all(ch, n);
    for (int i = 0; i < n; i++) {
        char *l1 = bn_readline(ch[i].out), *l2 = bn_readline(ch[i].out);
        long acq = 0, viol = 0, to = 0, err = 0, late = 0;
        long long cpu = 0;
        if (l1 == NULL || l2 == NULL ||
            sscanf(l1, "R %ld %ld %ld %ld %lld %ld", &acq, &viol, &to, &err, &cpu, &late) != 6) {
            fprintf(stderr, "credisson-bench: %s: a worker gave no result\n", scenario);
            x->errors++;
        } else {
            parse_lat(l2, &x->lat);
        }
        char *l3 = times != NULL ? bn_readline(ch[i].out) : NULL;
        if (l3 != NULL && l3[0] == 'H')
            parse_lat(l3, times);
        free(l3);
        x->acq += acq;
        x->viol += viol;
        x->timeouts += to;
        x->errors += err;
        x->late += late;
        x->cpu_us += (double)cpu;
        if (x->min_acq < 0 || acq < x->min_acq)
            x->min_acq = acq;
        free(l1);
        free(l2);
    }
    x->idle = bn_idle_share(k0, bn_ticks_now());
    bn_cmdstats s1 = bn_cmdstats_get(ADMIN);
    x->cmds = s1.total - s0.total - 2 * (x->acq + x->late);
    x->scripts = s1.scripts - s0.scripts;
    x->subs = s1.subs - s0.subs;
    x->server_cpu_us = s1.server_cpu_us - s0.server_cpu_us;
    for (int i = 0; i < n; i++)
        bn_reap(&ch[i]);
    free(ch);
    return true;
}

static void sc_procs(int rep, const char *scenario, int n)
{
    contended c, nd;
    bool have_c = false, have_node = false;
    bool node_first = rep % 2 == 1;
    if (node_first && node_usable())
        have_node = procs_run(rep, scenario, n, true, &nd, "procs", 0, NULL);
    clean_server();
    have_c = procs_run(rep, scenario, n, false, &c, "procs", 0, NULL);
    clean_server();
    if (!node_first && node_usable())
        have_node = procs_run(rep, scenario, n, true, &nd, "procs", 0, NULL);
    if (have_c) {
        result *r = res(scenario, "credisson");
        put_contended(r, &c, n);
        if (have_node)
            put(r, "ratio_to_node_handoffs", nd.acq > 0 ? (double)c.acq / (double)nd.acq : NAN);
        bn_vec_free(&c.lat);
    }
    if (have_node) {
        put_contended(res(scenario, "node-redisson"), &nd, n);
        bn_vec_free(&nd.lat);
    }
}

/* ---- group-100 ---------------------------------------------------------------------------------- */

/* One job locking 100 row ids (issue 44): the grouped multi-lock (one hash, one script for
 * all values) against 100 separate locks taken one after another and against the composed
 * multi-lock over those 100 locks (crd_multilock: the same 100 scripts, all or nothing),
 * in one sitting, on one client: latency of acquire + release of all 100 values, and the
 * round trips it took (the client's own commands, counted by on_trace). Uncontended. */
#define GROUP_VALUES 100

static atomic_long GROUP_CMDS;

static void count_cmd(void *user, const crd_trace *t)
{
    (void)user;
    if (!t->subscriber && strncmp(t->reply, "(error) NOSCRIPT", 16) != 0)
        atomic_fetch_add(&GROUP_CMDS, 1);
}

static void sc_group(int rep, const char *scenario)
{
    char base[128];
    mkname(base, sizeof base, scenario, rep, "c");
    crd_options o;
    crd_options_init(&o);
    o.url = EP.url;
    o.on_trace = count_cmd;
    crd_client *c = NULL;
    if (crd_client_new(&o, &c) != CRD_OK) {
        fprintf(stderr, "credisson-bench: %s: crd_client_new: %s\n", scenario, crd_client_errmsg(c));
        crd_client_free(c);
        return;
    }
    char vals[GROUP_VALUES][32];
    const char *vp[GROUP_VALUES];
    crd_lock *sep[GROUP_VALUES];
    for (int i = 0; i < GROUP_VALUES; i++) {
        snprintf(vals[i], sizeof vals[i], "row-%d", i);
        vp[i] = vals[i];
        char name[200];
        snprintf(name, sizeof name, "%.120s:%.30s", base, vals[i]);
        crd_lock_new(c, name, &sep[i]);
    }
    crd_lock *g = NULL;
    crd_multilock *m = NULL;
    char gname[160];
    snprintf(gname, sizeof gname, "%.120s:rows", base);
    crd_group_lock_new(c, gname, vp, GROUP_VALUES, &g);
    crd_multilock_new(sep, GROUP_VALUES, &m);
    int n = P.quick ? 30 : 200;
    bn_vec lat[3] = {{0}};
    double rts[3] = {0};
    bool bad = false;
    for (int k = 0; k < 3; k++) { /* warm-up: scripts loaded, connections up */
        if (k == 0) {
            bad |= crd_lock_acquire(g, -1, CRD_LEASE_WATCHDOG) != CRD_OK;
            crd_lock_release(g);
        } else if (k == 1) {
            for (int i = 0; i < GROUP_VALUES; i++)
                bad |= crd_lock_acquire(sep[i], -1, CRD_LEASE_WATCHDOG) != CRD_OK;
            for (int i = 0; i < GROUP_VALUES; i++)
                crd_lock_release(sep[i]);
        }
    }
    for (int it = 0; it < n && !bad; it++) {
        for (int k = 0; k < 3; k++) { /* interleaved: the three see the same machine */
            long c0 = atomic_load(&GROUP_CMDS);
            int64_t t0 = bn_now_us();
            if (k == 0) {
                bad |= crd_lock_acquire(g, -1, CRD_LEASE_WATCHDOG) != CRD_OK;
                bad |= crd_lock_release(g) != CRD_OK;
            } else if (k == 1) {
                for (int i = 0; i < GROUP_VALUES; i++)
                    bad |= crd_lock_acquire(sep[i], -1, CRD_LEASE_WATCHDOG) != CRD_OK;
                for (int i = GROUP_VALUES - 1; i >= 0; i--)
                    bad |= crd_lock_release(sep[i]) != CRD_OK;
            } else {
                bad |= crd_multilock_acquire(m, -1, CRD_LEASE_WATCHDOG) != CRD_OK;
                bad |= crd_multilock_release(m) != CRD_OK;
            }
            bn_vec_push(&lat[k], (double)(bn_now_us() - t0));
            rts[k] += (double)(atomic_load(&GROUP_CMDS) - c0);
        }
    }
    result *r = res(scenario, "credisson");
    if (bad) {
        fail_check(r, "acquires or releases failed", 1);
    } else {
        static const char *const what[3] = {"group", "separate", "multilock"};
        for (int k = 0; k < 3; k++) {
            char key[48];
            snprintf(key, sizeof key, "%s_us_p50", what[k]);
            put(r, key, bn_quantile(&lat[k], 0.5));
            snprintf(key, sizeof key, "%s_us_p99", what[k]);
            put(r, key, bn_quantile(&lat[k], 0.99));
            snprintf(key, sizeof key, "%s_round_trips", what[k]);
            put(r, key, rts[k] / n);
        }
        put(r, "separate_over_group_p50", bn_quantile(&lat[1], 0.5) / bn_quantile(&lat[0], 0.5));
        put(r, "multilock_over_group_p50", bn_quantile(&lat[2], 0.5) / bn_quantile(&lat[0], 0.5));
    }
    for (int k = 0; k < 3; k++)
        bn_vec_free(&lat[k]);
    crd_multilock_free(m);
    crd_lock_free(g);
    for (int i = 0; i < GROUP_VALUES; i++)
        crd_lock_free(sep[i]);
    crd_client_free(c);
}

/* ---- semaphore-8 ---------------------------------------------------------------------------- */

static int by_time(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 8 processes share a semaphore of 2 permits (Redisson's RSemaphore): permits handed on
 * per second, the acquire wait, the hand-off time (an acquire's return minus the latest
 * release before it: the permit it got was freed at the latest then), exclusion (the
 * guard never above 2) and the least-served share. */
static void sc_semaphore(int rep, const char *scenario, int n, int permits)
{
    contended c;
    bn_vec times = {0};
    clean_server();
    if (!procs_run(rep, scenario, n, false, &c, "semaphore", permits, &times)) {
        bn_vec_free(&times);
        return;
    }
    result *r = res(scenario, "credisson");
    put_contended(r, &c, n);
    put(r, "permits", permits);
    /* times holds (acquired, release) pairs per worker, one worker after another. */
    size_t np = times.n / 2;
    double *rel = malloc(np * sizeof *rel);
    bn_vec ho = {0};
    for (size_t i = 0; rel != NULL && i < np; i++)
        rel[i] = times.v[2 * i + 1];
    if (rel != NULL)
        qsort(rel, np, sizeof *rel, by_time);
    for (size_t i = 0; rel != NULL && i < np; i++) {
        double a = times.v[2 * i];
        size_t lo = 0, hi = np; /* the first release at or after a */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (rel[mid] < a)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0)
            bn_vec_push(&ho, a - rel[lo - 1]);
    }
    put(r, "handoff_us_p50", bn_quantile(&ho, 0.5));
    put(r, "handoff_us_p99", bn_quantile(&ho, 0.99));
    free(rel);
    bn_vec_free(&ho);
    bn_vec_free(&times);
    bn_vec_free(&c.lat);
}

/* ---- handoff -------------------------------------------------------------------------------- */

/* What a hand-off costs in counts that do not move with the machine's load. */
typedef struct handoff_counts {
    long waits;     /* acquires that waited */
    long switches;  /* context switches of the waiting process during them (C only) */
    long long calls; /* its system calls during them; -1 unknown */
    long long scripts, subs, cmds; /* the server's: scripts, (UN)SUBSCRIBEs, commands */
} handoff_counts;

/* Two workers alternate; returns the hand-off times (µs) and counts, or false. */
static bool handoff_run(int rep, bool node, bn_vec *ho, long *stalls, handoff_counts *hc)
{
    char name[128], prefix[200], rounds[16];
    mkname(name, sizeof name, "handoff", rep, node ? "node" : "c");
    snprintf(prefix, sizeof prefix, "%s:k", name);
    snprintf(rounds, sizeof rounds, "%d", P.handoff_rounds);
    bn_child ch[2];
    memset(ch, 0, sizeof ch);
    bool ok = spawn_worker(&ch[0], node, "handoff", name, prefix, "--rounds", rounds, "--role",
                           "0") &&
              spawn_worker(&ch[1], node, "handoff", name, prefix, "--rounds", rounds, "--role",
                           "1");
    if (!ok || !all_ready(ch, 2)) {
        fprintf(stderr, "credisson-bench: handoff: %s workers did not start\n", node ? "node" : "C");
        reap_all(ch, 2);
        return false;
    }
    memset(hc, 0, sizeof *hc);
    bn_cmdstats s0 = bn_cmdstats_get(ADMIN);
    go_all(ch, 2);
    int R = P.handoff_rounds;
    double *trel = calloc((size_t)R, sizeof *trel), *tacq = calloc((size_t)R, sizeof *tacq);
    for (int i = 0; i < 2; i++) {
        char *l;
        while ((l = bn_readline(ch[i].out)) != NULL) {
            int k;
            char kind;
            long long t;
            long w, sw;
            long long sc;
            if (l[0] == 'S')
                (*stalls)++;
            else if (sscanf(l, "X %ld %ld %lld", &w, &sw, &sc) == 3) {
                hc->waits += w;
                hc->switches += sw;
                hc->calls = sc < 0 || hc->calls < 0 ? -1 : hc->calls + sc;
            } else if (sscanf(l, "E %d %c %lld", &k, &kind, &t) == 3 && k >= 0 && k < R) {
                if (kind == 'r')
                    trel[k] = (double)t;
                else
                    tacq[k] = (double)t;
            }
            free(l);
        }
    }
    bn_cmdstats s1 = bn_cmdstats_get(ADMIN);
    hc->scripts = s1.scripts - s0.scripts;
    hc->subs = s1.subs - s0.subs;
    hc->cmds = s1.total - s0.total;
    int st0 = bn_reap(&ch[0]), st1 = bn_reap(&ch[1]);
    for (int k = 0; k < R; k++)
        if (trel[k] > 0 && tacq[k] > 0)
            bn_vec_push(ho, tacq[k] - trel[k]);
    free(trel);
    free(tacq);
    if ((st0 != 0 || st1 != 0 || ho->n == 0) && *stalls == 0) {
        fprintf(stderr, "credisson-bench: handoff: %s workers failed (%d, %d)\n",
                node ? "node" : "C", st0, st1);
        return false;
    }
    return true;
}

/* The hand-off's raw floor (p50, µs; NAN when it cannot be measured): a rawwaiter worker
 * (bench/worker.c: one process, raw hiredis, blocked in read() on its subscriber
 * connection) acquires a fresh key the moment the unlock message comes; this process
 * releases as the handoff holder does, after a 3 ms pause with Redisson's unlock script.
 * Time from before the release to the worker's acquire reply: the least any client
 * pays for a hand-off on this machine, both scripts and every wake-up included. */
static double measure_raw_handoff(int rep, double *switches, double *calls)
{
    *switches = NAN;
    *calls = NAN;
    if (!load_release_script())
        return NAN;
    char name[128], prefix[200], rounds[16];
    mkname(name, sizeof name, "rawhandoff", rep, "c");
    snprintf(prefix, sizeof prefix, "%s:k", name);
    int R = P.handoff_rounds;
    snprintf(rounds, sizeof rounds, "%d", R);
    bn_child ch;
    memset(&ch, 0, sizeof ch);
    if (!spawn_worker(&ch, false, "rawwaiter", name, prefix, "--rounds", rounds, "--sha",
                      ACQ_SHA) ||
        !all_ready(&ch, 1)) {
        fprintf(stderr, "credisson-bench: handoff: the raw waiter did not start\n");
        reap_all(&ch, 1);
        return NAN;
    }
    go_all(&ch, 1);
    redisContext *c = bn_connect(&EP);
    char chan[200], latch[260];
    snprintf(chan, sizeof chan, "redisson_lock__channel:{%s}", name);
    bn_vec v = {0};
    for (int k = 0; k < R; k++) {
        const char *hold[4] = {"HSET", name, CAP_OWNER, "1"};
        freeReplyObject(bn_cmd(c, 4, hold));
        /* a latch name of its own per release, as the library's request ids are */
        snprintf(latch, sizeof latch, "redisson_unlock_latch:{%s}:%032d", name, k);
        const char *rel[11] = {"EVALSHA", REL_SHA, "3", name, chan, latch,
                               "0",       "10000", CAP_OWNER, "PUBLISH", "7000"};
        bn_sleep_us(3000);
        int64_t t0 = bn_now_us();
        freeReplyObject(bn_cmd(c, 11, rel));
        char *l = bn_readline(ch.out);
        int got;
        long long t1;
        bool ok = l != NULL && sscanf(l, "T %d %lld", &got, &t1) == 2 && got == k;
        free(l);
        if (!ok)
            break;
        bn_vec_push(&v, (double)(t1 - t0));
    }
    redisFree(c);
    char *l;
    while ((l = bn_readline(ch.out)) != NULL) {
        long n, sw;
        long long sc;
        if (sscanf(l, "X %ld %ld %lld", &n, &sw, &sc) == 3 && n > 0) {
            *switches = (double)sw / (double)n;
            *calls = sc < 0 ? NAN : (double)sc / (double)n;
        }
        free(l);
    }
    int st = bn_reap(&ch);
    double p50 = st == 0 && v.n == (size_t)R ? bn_quantile(&v, 0.5) : NAN;
    if (isnan(p50))
        fprintf(stderr, "credisson-bench: handoff: the raw waiter failed (%d, %zu rounds)\n",
                st, v.n);
    bn_vec_free(&v);
    return p50;
}

/* One implementation's hand-off result, against the floors; returns it so that the
 * caller can add to it. */
static result *put_handoff(const char *impl, bn_vec *ho, long stalls, double floor,
                           double hot_floor, double raw_floor, const handoff_counts *hc)
{
    result *r = res("handoff", impl);
    double p50 = bn_quantile(ho, 0.5);
    put(r, "handoff_us_p50", p50);
    put(r, "handoff_us_p99", bn_quantile(ho, 0.99));
    put(r, "floor_pubsub_plus_script_us", floor);
    put(r, "ratio_to_floor", p50 / floor);
    put(r, "hot_floor_us", hot_floor);
    put(r, "ratio_to_hot_floor", p50 / hot_floor);
    if (!isnan(raw_floor)) {
        put(r, "raw_floor_us", raw_floor);
        put(r, "ratio_to_raw_floor", p50 / raw_floor);
    }
    put(r, "stalls_over_2s", (double)stalls);
    /* per hand-off, counted by the server over the whole run: the C client's floor is 3
     * scripts (the waiter's failed attempt, its winning one, the holder's release) */
    double n = (double)P.handoff_rounds;
    put(r, "scripts_per_handoff", (double)hc->scripts / n);
    put(r, "subscribes_per_handoff", (double)hc->subs / n);
    if (hc->waits > 0) {
        put(r, "ctx_switches_per_waiting_acquire", (double)hc->switches / (double)hc->waits);
        if (hc->calls >= 0)
            put(r, "syscalls_per_waiting_acquire", (double)hc->calls / (double)hc->waits);
    }
    return r;
}

static void sc_handoff(int rep)
{
    /* Floor under the hand-off's own conditions: the release follows a 3 ms pause. */
    floor_vals hot = measure_floor(P.floor_n / 2 > 50 ? P.floor_n / 2 : 50, 0);
    floor_vals f = measure_floor(P.handoff_rounds > 50 ? P.handoff_rounds : 50, 3000);
    double floor = f.pubsub_p50 + hot.script_p50;
    double hot_floor = hot.pubsub_p50 + hot.script_p50;
    double raw_switches, raw_calls;
    double raw_floor = measure_raw_handoff(rep, &raw_switches, &raw_calls);
    handoff_counts cc, nc;
    bn_vec c = {0}, nd = {0};
    long c_stalls = 0, nd_stalls = 0;
    bool have_c = false, have_node = false;
    bool node_first = rep % 2 == 1;
    if (node_first && node_usable())
        have_node = handoff_run(rep, true, &nd, &nd_stalls, &nc);
    have_c = handoff_run(rep, false, &c, &c_stalls, &cc);
    if (!node_first && node_usable())
        have_node = handoff_run(rep, true, &nd, &nd_stalls, &nc);
    if (have_c) {
        result *r = put_handoff("credisson", &c, c_stalls, floor, hot_floor, raw_floor, &cc);
        if (!isnan(raw_switches))
            put(r, "raw_ctx_switches_per_acquire", raw_switches);
        if (!isnan(raw_calls))
            put(r, "raw_syscalls_per_acquire", raw_calls);
        if (have_node)
            put(r, "node_over_credisson", bn_quantile(&nd, 0.5) / bn_quantile(&c, 0.5));
    }
    if (have_node)
        put_handoff("node-redisson", &nd, nd_stalls, floor, hot_floor, raw_floor, &nc);
    bn_vec_free(&c);
    bn_vec_free(&nd);
}

/* ---- fair-8 --------------------------------------------------------------------------------- */

typedef struct fair_rec {
    long long seq;
    double t_acq, t_rel;
    int had_waiter;
} fair_rec;

static int cmp_fair(const void *a, const void *b)
{
    long long x = ((const fair_rec *)a)->seq, y = ((const fair_rec *)b)->seq;
    return x < y ? -1 : x > y;
}

static void sc_fair(int rep, int n)
{
    char name[128], prefix[200], dur[24];
    mkname(name, sizeof name, "fair", rep, "c");
    snprintf(prefix, sizeof prefix, "%s:k", name);
    snprintf(dur, sizeof dur, "%" PRId64, P.duration_ms);
    bn_child *ch = calloc((size_t)n, sizeof *ch);
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
        ok = spawn_worker(&ch[i], false, "fair", name, prefix, "--duration-ms", dur, NULL, NULL);
    if (!ok || !all_ready(ch, n)) {
        fprintf(stderr, "credisson-bench: fair-8: workers did not start\n");
        reap_all(ch, n);
        free(ch);
        return;
    }
    go_all(ch, n);
    long acq = 0, viol = 0, fifo = 0, to = 0, err = 0;
    size_t nrec = 0, cap = 4096;
    fair_rec *recs = malloc(cap * sizeof *recs);
    for (int i = 0; i < n; i++) {
        char *l;
        while ((l = bn_readline(ch[i].out)) != NULL) {
            long a, v, f, t, e, late;
            long long s, ta, tr;
            int w, counted;
            if (sscanf(l, "F %ld %ld %ld %ld %ld %ld", &a, &v, &f, &t, &e, &late) == 6) {
                acq += a, viol += v, fifo += f, to += t, err += e;
            } else if (sscanf(l, "A %lld %lld %lld %d %d", &s, &ta, &tr, &w, &counted) == 5) {
                if (nrec == cap) {
                    cap *= 2;
                    recs = realloc(recs, cap * sizeof *recs);
                }
                recs[nrec++] = (fair_rec){s, (double)ta, (double)tr, w};
            }
            free(l);
        }
        bn_reap(&ch[i]);
    }
    free(ch);
    qsort(recs, nrec, sizeof *recs, cmp_fair);
    bn_vec ho = {0};
    for (size_t i = 0; i + 1 < nrec; i++)
        if (recs[i].had_waiter && recs[i + 1].seq == recs[i].seq + 1)
            bn_vec_push(&ho, recs[i + 1].t_acq - recs[i].t_rel);
    free(recs);
    result *r = res("fair-8", "credisson");
    put(r, "handoffs_per_s", (double)acq / ((double)P.duration_ms / 1000.0));
    put(r, "handoff_us_p50", bn_quantile(&ho, 0.5));
    put(r, "handoff_us_p99", bn_quantile(&ho, 0.99));
    put(r, "timeouts", (double)to);
    put(r, "fifo_violations", (double)fifo);
    put(r, "exclusion_violations", (double)viol);
    if (fifo > 0)
        fail_check(r, "FIFO violations", (double)fifo);
    if (viol > 0)
        fail_check(r, "exclusion violations", (double)viol);
    if (err > 0)
        fprintf(stderr, "credisson-bench: fair-8: %ld lock errors\n", err);
    bn_vec_free(&ho);
}

/* ---- watchdog-N ----------------------------------------------------------------------------- */

static void sc_watchdog(int rep, const char *scenario, long locks, int64_t timeout_ms)
{
    char prefix[200], nl[24], to[24], rounds[16];
    mkname(prefix, sizeof prefix, scenario, rep, "c");
    snprintf(nl, sizeof nl, "%ld", locks);
    snprintf(to, sizeof to, "%" PRId64, timeout_ms);
    snprintf(rounds, sizeof rounds, "%d", P.wd_rounds);
    char port[16];
    snprintf(port, sizeof port, "%d", EP.port);
    char *argv[] = {SELF_EXE, "--worker", "watchdog", "--host", EP.host, "--port", port,
                    "--prefix", prefix, "--locks", nl, "--wd-timeout-ms", to, "--rounds",
                    rounds, NULL};
    bn_child ch;
    if (!bn_spawn(&ch, argv, NULL)) {
        fprintf(stderr, "credisson-bench: %s: worker did not start\n", scenario);
        return;
    }
    char *l = bn_readline(ch.out);
    bn_reap(&ch);
    if (l == NULL || l[0] != 'W') {
        fprintf(stderr, "credisson-bench: %s: worker gave no result\n", scenario);
        free(l);
        return;
    }
    result *r = res(scenario, "credisson");
    char *save = NULL;
    for (char *tok = strtok_r(l + 1, " ", &save); tok != NULL; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        if (strcmp(tok, "locks") == 0)
            continue;
        put(r, tok, strtod(eq + 1, NULL));
    }
    free(l);
}

/* ---- output --------------------------------------------------------------------------------- */

static void summary(bn_vec *v, double *med, double *mn, double *mx)
{
    bn_vec c = {0};
    for (size_t i = 0; i < v->n; i++)
        if (!isnan(v->v[i]))
            bn_vec_push(&c, v->v[i]);
    if (c.n == 0) {
        *med = *mn = *mx = NAN;
        return;
    }
    bn_quantile(&c, 0.5); /* sorts */
    *mn = c.v[0];
    *mx = c.v[c.n - 1];
    *med = c.n % 2 ? c.v[c.n / 2] : (c.v[c.n / 2 - 1] + c.v[c.n / 2]) / 2;
    bn_vec_free(&c);
}

static void json_num(double x)
{
    if (isnan(x) || isinf(x))
        printf("null");
    else
        printf("%.6g", x);
}

static void print_json(const result *r)
{
    size_t reps = 0;
    for (int i = 0; i < r->nmet; i++)
        reps = r->vals[i].n > reps ? r->vals[i].n : reps;
    printf("{\"scenario\": \"%s\", \"impl\": \"%s\", \"reps\": %zu, \"metrics\": {", r->scenario,
           r->impl, reps);
    for (int i = 0; i < r->nmet; i++) {
        double med, mn, mx;
        summary((bn_vec *)&r->vals[i], &med, &mn, &mx);
        printf("%s\"%s\": {\"median\": ", i ? ", " : "", r->names[i]);
        json_num(med);
        printf(", \"min\": ");
        json_num(mn);
        printf(", \"max\": ");
        json_num(mx);
        printf(", \"values\": [");
        for (size_t k = 0; k < r->vals[i].n; k++) {
            printf("%s", k ? ", " : "");
            json_num(r->vals[i].v[k]);
        }
        printf("]}");
    }
    printf("}, \"ok\": %s}\n", r->failed ? "false" : "true");
    fflush(stdout);
}

static void fmt_cell(char *buf, size_t n, const result *r, const char *name)
{
    if (r == NULL) {
        snprintf(buf, n, "-");
        return;
    }
    for (int i = 0; i < r->nmet; i++)
        if (strcmp(r->names[i], name) == 0) {
            double med, mn, mx;
            summary((bn_vec *)&r->vals[i], &med, &mn, &mx);
            if (isnan(med))
                snprintf(buf, n, "n/a");
            else if (fabs(med) >= 100 || med == 0)
                snprintf(buf, n, "%.0f [%.0f-%.0f]", med, mn, mx);
            else if (fabs(med) >= 1)
                snprintf(buf, n, "%.2f [%.2f-%.2f]", med, mn, mx);
            else
                snprintf(buf, n, "%.3g [%.3g-%.3g]", med, mn, mx);
            return;
        }
    snprintf(buf, n, "-");
}

static result *find_res(const char *scenario, const char *impl)
{
    for (int i = 0; i < NRESULTS; i++)
        if (strcmp(RESULTS[i].scenario, scenario) == 0 && strcmp(RESULTS[i].impl, impl) == 0)
            return &RESULTS[i];
    return NULL;
}

static void print_text(void)
{
    for (size_t s = 0; s < NSCEN; s++) {
        result *c = find_res(ALL_SCENARIOS[s], "credisson");
        result *nd = find_res(ALL_SCENARIOS[s], "node-redisson");
        if (c == NULL && nd == NULL)
            continue;
        size_t reps = 0;
        for (int i = 0; c != NULL && i < c->nmet; i++)
            reps = c->vals[i].n > reps ? c->vals[i].n : reps;
        for (int i = 0; nd != NULL && i < nd->nmet; i++)
            reps = nd->vals[i].n > reps ? nd->vals[i].n : reps;
        printf("\n%s  (median [min-max] of %zu repetitions)\n", ALL_SCENARIOS[s], reps);
        printf("  %-34s %-30s %s\n", "metric", "credisson", nd ? "node-redisson" : "");
        for (int pass = 0; pass < 2; pass++) {
            result *r = pass == 0 ? c : nd;
            if (r == NULL)
                continue;
            for (int i = 0; i < r->nmet; i++) {
                /* Each metric once, in the order first seen. */
                if (pass == 1 && c != NULL) {
                    bool seen = false;
                    for (int j = 0; j < c->nmet; j++)
                        seen = seen || strcmp(c->names[j], r->names[i]) == 0;
                    if (seen)
                        continue;
                }
                char a[64], b[64];
                fmt_cell(a, sizeof a, c, r->names[i]);
                fmt_cell(b, sizeof b, nd, r->names[i]);
                printf("  %-34s %-30s %s\n", r->names[i], a, nd ? b : "");
            }
        }
        if (c != NULL && c->failed)
            printf("  credisson: FAILED (%s)\n", c->why);
        if (nd != NULL && nd->failed)
            printf("  node-redisson: FAILED (%s)\n", nd->why);
    }
}

/* ---- main ----------------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: credisson-bench [--quick] [--json] [--scenario NAME]... [--reps N]\n"
                    "                       [--url redis://HOST:PORT] [--no-node]\n"
                    "       credisson-bench --list-scenarios\n"
                    "scenarios:");
    for (size_t k = 0; k < NSCEN; k++)
        fprintf(stderr, "%s%s", k % 6 == 0 && k > 0 ? "\n           " : " ", ALL_SCENARIOS[k]);
    fprintf(stderr, "\n");
}

static bool parse_url(const char *url)
{
    const char *p = url;
    if (strncmp(p, "redis://", 8) != 0)
        return false;
    p += 8;
    const char *colon = strrchr(p, ':');
    size_t hl = colon ? (size_t)(colon - p) : strcspn(p, "/");
    if (hl == 0 || hl >= sizeof EP.host || strchr(p, '@') != NULL)
        return false;
    memcpy(EP.host, p, hl);
    EP.host[hl] = '\0';
    EP.port = colon ? atoi(colon + 1) : 6379;
    return EP.port > 0;
}

static bool node_check(char *why, size_t n)
{
    const char *env = getenv("CRD_BENCH_NODE_MODULES");
    snprintf(NODE_MODULES, sizeof NODE_MODULES, "%s", env ? env : CRD_BENCH_NODE_MODULES);
    snprintf(NODE_WORKER, sizeof NODE_WORKER, "%s", CRD_BENCH_NODE_WORKER);
    char p[4300];
    snprintf(p, sizeof p, "%s/node-redisson/package.json", NODE_MODULES);
    struct stat st;
    if (stat(p, &st) != 0) {
        snprintf(why, n, "%s is missing (run `npm ci` in interop/node)", p);
        return false;
    }
    if (stat(NODE_WORKER, &st) != 0) {
        snprintf(why, n, "%s is missing", NODE_WORKER);
        return false;
    }
    if (system("node --version >/dev/null 2>&1") != 0) {
        snprintf(why, n, "node is not installed");
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--worker") == 0)
            return bn_worker_main(argc, argv);
    const char *url = NULL;
    int reps = 0;
    bool any = false;
    P.node = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--list-scenarios") == 0) {
            for (size_t k = 0; k < NSCEN; k++)
                printf("%s\n", ALL_SCENARIOS[k]);
            return 0;
        } else if (strcmp(a, "--quick") == 0)
            P.quick = true;
        else if (strcmp(a, "--json") == 0)
            P.json = true;
        else if (strcmp(a, "--no-node") == 0)
            P.node = false;
        else if (strcmp(a, "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(a, "--url") == 0 && i + 1 < argc)
            url = argv[++i];
        else if (strcmp(a, "--scenario") == 0 && i + 1 < argc) {
            const char *s = argv[++i];
            size_t k;
            for (k = 0; k < NSCEN; k++)
                if (strcmp(ALL_SCENARIOS[k], s) == 0)
                    break;
            if (k == NSCEN) {
                fprintf(stderr, "credisson-bench: unknown scenario %s\n", s);
                usage();
                return 64;
            }
            P.selected[k] = true;
            any = true;
        } else {
            usage();
            return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 ? 0 : 64;
        }
    }
    if (!any)
        for (size_t k = 0; k < NSCEN; k++)
            P.selected[k] = true;
    P.reps = reps > 0 ? reps : P.quick ? 3 : 7;
    P.floor_n = P.quick ? 300 : 2000;
    P.unc_blocks = P.quick ? 4 : 10;
    P.unc_per_block = P.quick ? 100 : 300;
    P.duration_ms = P.quick ? 500 : 3000;
    P.handoff_rounds = P.quick ? 40 : 200;
    P.wd_rounds = P.quick ? 1 : 3;
    P.cap_acq_n = P.quick ? 30000 : 200000;
    P.cap_rel_n = P.quick ? 10000 : 50000;
    P.stall_ms = P.quick ? 1000 : 2000;

    ssize_t len = readlink("/proc/self/exe", SELF_EXE, sizeof SELF_EXE - 1);
    if (len <= 0) {
        fprintf(stderr, "credisson-bench: cannot find its own executable\n");
        return 2;
    }
    SELF_EXE[len] = '\0';
    snprintf(RUN_ID, sizeof RUN_ID, "%d", (int)getpid());
    signal(SIGPIPE, SIG_IGN);

    if (url != NULL) {
        if (!parse_url(url)) {
            fprintf(stderr, "credisson-bench: --url takes redis://HOST:PORT (no auth)\n");
            return 64;
        }
    } else {
        if (!start_redis()) {
            fprintf(stderr, "credisson-bench: could not start %s\n", CRD_BENCH_REDIS_SERVER);
            return 2;
        }
        OWN_SERVER = true;
    }
    snprintf(EP.url, sizeof EP.url, "redis://%s:%d", EP.host, EP.port);
    char why[4400];
    if (P.node && !node_check(why, sizeof why)) {
        fprintf(stderr, "credisson-bench: NOTE: node-redisson side skipped: %s\n", why);
        P.node = false;
    }
    ADMIN = bn_connect(&EP);
    load_floor_scripts();
    if (strstr(CRD_BENCH_BUILD_TYPE, "Rel") == NULL)
        fprintf(stderr, "credisson-bench: NOTE: built without optimisation (CMAKE_BUILD_TYPE=%s);"
                        " configure with -DCMAKE_BUILD_TYPE=Release for real numbers\n",
                CRD_BENCH_BUILD_TYPE[0] ? CRD_BENCH_BUILD_TYPE : "none");
    {
        redisReply *r = redisCommand(ADMIN, "INFO server");
        /* Valkey keeps redis_version (7.2.4) for old clients; its own is valkey_version. */
        const char *vk = r && r->str ? strstr(r->str, "valkey_version:") : NULL;
        const char *v = vk ? vk + 15 : r && r->str ? strstr(r->str, "redis_version:") : NULL;
        if (v && !vk)
            v += 14;
        fprintf(stderr, "credisson-bench: credisson %s, %s %.*s at %s:%d, %d repetitions%s\n",
                crd_version(), vk ? "Valkey" : "Redis", v ? (int)strcspn(v, "\r\n") : 1,
                v ? v : "?", EP.host, EP.port, P.reps, P.quick ? " (quick)" : "");
        if (r)
            freeReplyObject(r);
    }
    int64_t t_start = bn_now_us();
    for (int rep = 0; rep < P.reps; rep++) {
        for (size_t k = 0; k < NSCEN; k++) {
            if (!P.selected[k])
                continue;
            const char *s = ALL_SCENARIOS[k];
            int64_t t0 = bn_now_us();
            clean_server();
            bn_ticks k0 = bn_ticks_now();
            if (strcmp(s, "floor") == 0)
                sc_floor();
            else if (strcmp(s, "uncontended") == 0)
                sc_uncontended(rep);
            else if (strcmp(s, "uncontended-tls") == 0)
                sc_uncontended_tls(rep);
            else if (strcmp(s, "threads-4") == 0)
                sc_threads(rep, s, 4);
            else if (strcmp(s, "threads-16") == 0)
                sc_threads(rep, s, 16);
            else if (strcmp(s, "loop-64") == 0)
                sc_loop(rep, s, 64);
            else if (strcmp(s, "dispatch-2000") == 0)
                sc_dispatch(rep, s);
            else if (strcmp(s, "many-names") == 0)
                sc_many_names(rep, s);
            else if (strcmp(s, "stall") == 0)
                sc_stall(rep, s);
            else if (strcmp(s, "procs-4") == 0)
                sc_procs(rep, s, 4);
            else if (strcmp(s, "procs-16") == 0)
                sc_procs(rep, s, 16);
            else if (strcmp(s, "handoff") == 0)
                sc_handoff(rep);
            else if (strcmp(s, "fair-8") == 0)
                sc_fair(rep, 8);
            else if (strcmp(s, "semaphore-8") == 0)
                sc_semaphore(rep, s, 8, 2);
            else if (strcmp(s, "cluster-3") == 0)
                sc_cluster(rep, s);
            else if (strcmp(s, "group-100") == 0)
                sc_group(rep, s);
            else if (P.quick && rep > 0 && strncmp(s, "watchdog", 8) == 0)
                continue; /* --quick: the watchdog scenarios (~10 s each) run once */
            else if (strcmp(s, "watchdog-10k") == 0)
                sc_watchdog(rep, s, 10000, 1500);
            else if (strcmp(s, "watchdog-100k") == 0)
                sc_watchdog(rep, s, 100000, 9000);
            bn_ticks k1 = bn_ticks_now();
            double stolen = bn_steal_share(k0, k1);
            result *sr = find_res(s, "credisson");
            if (sr != NULL)
                put(sr, "steal_share", stolen);
            /* A short repetition's share is a few 10 ms ticks: noted from 2 s of CPU time. */
            if (k1.total - k0.total >= STEAL_MIN_TICKS && stolen > STEAL_MAX) {
                STEAL_MAX = stolen;
                STEAL_WHERE = s;
                STEAL_REP = rep;
            }
            fprintf(stderr, "credisson-bench: rep %d/%d %-14s %.1f s, %.1f %% stolen\n", rep + 1,
                    P.reps, s, (double)(bn_now_us() - t0) / 1e6, 100.0 * stolen);
        }
    }
    clean_server();
    if (STEAL_MAX > STEAL_NOTE)
        fprintf(stderr, "credisson-bench: NOTE: the hypervisor took %.0f %% of this machine's CPU "
                        "time during %s (repetition %d; steal, /proc/stat): figures taken under "
                        "steal are slower, and a ratio between two phases is skewed when one "
                        "of them was stolen from more (each side's steal_share says); compare "
                        "runs at like steal (bench/README.md, \"Steal\")\n",
                100.0 * STEAL_MAX, STEAL_WHERE, STEAL_REP + 1);
    if (P.json) {
        for (size_t s = 0; s < NSCEN; s++) {
            result *c = find_res(ALL_SCENARIOS[s], "credisson");
            result *nd = find_res(ALL_SCENARIOS[s], "node-redisson");
            if (c)
                print_json(c);
            if (nd)
                print_json(nd);
        }
    } else {
        print_text();
        printf("\ntotal %.1f s; %s\n", (double)(bn_now_us() - t_start) / 1e6,
               FAILED_CHECKS ? "SOME CHECKS FAILED" : "all exclusion and FIFO checks passed");
    }
    redisFree(ADMIN);
    return FAILED_CHECKS ? 1 : 0;
}
