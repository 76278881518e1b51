/*
 * sentinel.c -- the test Sentinel topology (see sentinel.h): processes, readiness,
 * failovers. Self-contained (no Criterion, no harness.c) so that the soak program can
 * link it alone.
 */
#include "sentinel.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "../standalone/redis_child.h" /* free_port, fork_tied, child_stdio, remove_dir */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Polling interval of the readiness loops below (they wait on other processes' state,
 * which offers nothing to block on). */
static void nap(void)
{
    struct timespec ts = {0, 20 * 1000000};
    nanosleep(&ts, NULL);
}

static void fail(crdt_topo *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(crdt_topo *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof t->err, fmt, ap);
    va_end(ap);
}

static const char *server_program(void)
{
    const char *e = getenv("CRD_REDIS_SERVER");
    return e != NULL && e[0] != '\0' ? e : "redis-server";
}

/* The sentinels' program, started as "PROG CONF --sentinel" (redis-server, redis-sentinel,
 * valkey-server and valkey-sentinel all take that): CRD_REDIS_SENTINEL, else the data
 * nodes' CRD_REDIS_SERVER (make test-valkey: Valkey sentinels for Valkey nodes, never
 * Redis's redis-sentinel watching them), else NULL: Debian's redis-sentinel. */
static const char *sentinel_program(void)
{
    const char *e = getenv("CRD_REDIS_SENTINEL");
    if (e != NULL && e[0] != '\0')
        return e;
    e = getenv("CRD_REDIS_SERVER");
    return e != NULL && e[0] != '\0' ? e : NULL;
}

/* fork + exec argv (or alt when argv[0] cannot be run) in dir with its output in dir/log;
 * the child dies with the thread that started it (PR_SET_PDEATHSIG), so no server
 * outlives a crashed test. */
static pid_t spawn(const char *dir, const char *const *argv, const char *const *alt)
{
    pid_t pid = fork_tied();
    if (pid != 0)
        return pid;
    setpgid(0, 0);
    char log[400];
    snprintf(log, sizeof log, "%s/log", dir);
    child_stdio(log, false);
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    execvp(argv[0], (char *const *)argv);
    if (alt != NULL)
        execvp(alt[0], (char *const *)alt);
    _exit(127);
}

void crdt_proc_stop(crdt_proc *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        int64_t deadline = now_ms() + 3000;
        for (;;) {
            pid_t r = waitpid(p->pid, NULL, WNOHANG);
            if (r == p->pid || (r < 0 && errno == ECHILD))
                break;
            if (now_ms() >= deadline) {
                kill(p->pid, SIGKILL);
                waitpid(p->pid, NULL, 0);
                break;
            }
            struct timespec ts = {0, 2 * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    p->pid = 0;
    remove_dir(p->dir);
    p->dir[0] = '\0';
}

static bool make_dir(crdt_proc *p)
{
    /* The harness's prefix: its stale-directory sweep removes what a SIGKILLed run
     * left behind (runner.pid names the owner). */
    snprintf(p->dir, sizeof p->dir, "/tmp/crdt-redis-XXXXXX");
    if (mkdtemp(p->dir) == NULL) {
        p->dir[0] = '\0';
        return false;
    }
    char path[400];
    snprintf(path, sizeof path, "%s/runner.pid", p->dir);
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }
    return true;
}

static redisContext *connect_auth(int port, const char *password, int64_t timeout_ms)
{
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == NULL || c->err) {
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (password != NULL && password[0] != '\0') {
        redisReply *r = redisCommand(c, "AUTH %s", password);
        bool ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!ok) {
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

redisContext *crdt_topo_connect(const crdt_topo *t, int port, int64_t timeout_ms)
{
    return connect_auth(port, t->data_password, timeout_ms);
}

static redisContext *connect_sentinel(const crdt_topo *t, int i)
{
    return connect_auth(t->sentinels[i].port, t->sentinel_password, 500);
}

/* Whether a process answers PING (with a password). */
static bool answers(int port, const char *password)
{
    redisContext *c = connect_auth(port, password, 300);
    if (c == NULL)
        return false;
    redisReply *r = redisCommand(c, "PING");
    bool ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* With CRDT_EXPECT_SERVER=redis|valkey (make test-valkey), whether the process on
 * p->port is that server (INFO server's server_name says valkey; Redis has none); the
 * reason in t->err when not. */
static bool expected_server(crdt_topo *t, const crdt_proc *p, const char *password,
                            const char *what)
{
    const char *want = getenv("CRDT_EXPECT_SERVER");
    if (want == NULL || want[0] == '\0')
        return true;
    redisContext *c = connect_auth(p->port, password, 1000);
    redisReply *r = c != NULL ? redisCommand(c, "INFO server") : NULL;
    bool valkey = r != NULL && r->type == REDIS_REPLY_STRING &&
                  strstr(r->str, "server_name:valkey") != NULL;
    bool answered = r != NULL && r->type == REDIS_REPLY_STRING;
    freeReplyObject(r);
    redisFree(c);
    const char *is = valkey ? "valkey" : "redis";
    if (answered && strcmp(is, want) == 0)
        return true;
    fail(t, "the %s on port %d is %s, the run meant to test %s", what, p->port,
         answered ? is : "silent", want);
    return false;
}

/* Waits for a new process to answer; false when it exited (a port race) or the
 * deadline passed. */
static bool await_start(crdt_proc *p, const char *password, int64_t timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline) {
        int st;
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
            p->pid = 0;
            return false;
        }
        if (answers(p->port, password))
            return true;
        nap();
    }
    return false;
}

/* One data node on p->port (a fresh port when 0), a replica of primary_port unless 0. */
static bool start_node(crdt_topo *t, crdt_proc *p, int primary_port)
{
    bool fixed = p->port > 0;
    for (int attempt = 0; attempt < (fixed ? 1 : 8); attempt++) {
        if (!fixed)
            p->port = free_port();
        if (p->dir[0] == '\0' && !make_dir(p)) {
            fail(t, "mkdtemp: %s", strerror(errno));
            return false;
        }
        char port[16], replicaof[32];
        snprintf(port, sizeof port, "%d", p->port);
        snprintf(replicaof, sizeof replicaof, "127.0.0.1 %d", primary_port);
        const char *argv[40];
        int n = 0;
        argv[n++] = server_program();
        const char *fixed_args[] = {"--port", port, "--bind", "127.0.0.1", "--save", "",
                                    "--appendonly", "no", "--daemonize", "no", "--dir", p->dir,
                                    "--logfile", "", "--repl-diskless-sync", "yes",
                                    "--repl-diskless-sync-delay", "0",
                                    "--repl-ping-replica-period", "1"};
        for (size_t i = 0; i < sizeof fixed_args / sizeof fixed_args[0]; i++)
            argv[n++] = fixed_args[i];
        if (primary_port > 0) {
            argv[n++] = "--replicaof";
            argv[n++] = replicaof;
        }
        if (t->data_password[0] != '\0') {
            argv[n++] = "--requirepass";
            argv[n++] = t->data_password;
            argv[n++] = "--masterauth";
            argv[n++] = t->data_password;
        }
        argv[n] = NULL;
        p->pid = spawn(p->dir, argv, NULL);
        if (p->pid < 0) {
            p->pid = 0;
            fail(t, "fork: %s", strerror(errno));
            return false;
        }
        if (await_start(p, t->data_password, 10000))
            return expected_server(t, p, t->data_password, "data node");
        if (p->pid > 0) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, NULL, 0);
            p->pid = 0;
        }
    }
    fail(t, "redis-server on port %d did not start (log in %s)", p->port, p->dir);
    return false;
}

/* One sentinel with its own config file (Sentinel rewrites it, so it must be ours). */
static bool start_sentinel_on(crdt_topo *t, crdt_proc *p, const char *name, int primary_port,
                              int quorum, const char *password, const char *certs);

static bool start_sentinel(crdt_topo *t, crdt_proc *p, const char *name, int primary_port,
                           int quorum, const char *password)
{
    return start_sentinel_on(t, p, name, primary_port, quorum, password, NULL);
}

/* certs (may be NULL): the sentinel also serves TLS on p->tls_port with the certificates
 * of that directory and talks TLS to the data nodes (tls-replication). */
static bool start_sentinel_on(crdt_topo *t, crdt_proc *p, const char *name, int primary_port,
                              int quorum, const char *password, const char *certs)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        p->port = free_port();
        if (p->dir[0] == '\0' && !make_dir(p)) {
            fail(t, "mkdtemp: %s", strerror(errno));
            return false;
        }
        char conf[400];
        snprintf(conf, sizeof conf, "%s/sentinel.conf", p->dir);
        FILE *f = fopen(conf, "w");
        if (f == NULL) {
            fail(t, "cannot write %s: %s", conf, strerror(errno));
            return false;
        }
        fprintf(f, "port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\nlogfile \"\"\n"
                   "sentinel resolve-hostnames no\n"
                   "sentinel monitor %s 127.0.0.1 %d %d\n"
                   "sentinel down-after-milliseconds %s 1000\n"
                   "sentinel failover-timeout %s 3000\n"
                   "sentinel parallel-syncs %s 2\n",
                p->port, p->dir, name, primary_port, quorum, name, name, name);
        if (t->data_password[0] != '\0')
            fprintf(f, "sentinel auth-pass %s %s\n", name, t->data_password);
        if (password != NULL && password[0] != '\0')
            fprintf(f, "requirepass %s\nsentinel sentinel-pass %s\n", password, password);
        if (certs != NULL) {
            p->tls_port = free_port();
            fprintf(f, "tls-port %d\ntls-cert-file %s/server.crt\ntls-key-file %s/server.key\n"
                       "tls-client-cert-file %s/client.crt\ntls-client-key-file %s/client.key\n"
                       "tls-ca-cert-file %s/ca.crt\ntls-auth-clients no\ntls-replication yes\n",
                    p->tls_port, certs, certs, certs, certs, certs);
        }
        fclose(f);
        const char *chosen[] = {sentinel_program(), conf, "--sentinel", NULL};
        const char *argv[] = {"redis-sentinel", conf, NULL, NULL};
        /* Debian's redis-sentinel package; without it, redis-server in sentinel mode. */
        const char *fallback[] = {server_program(), conf, "--sentinel", NULL};
        p->pid = chosen[0] != NULL ? spawn(p->dir, chosen, NULL) : spawn(p->dir, argv, fallback);
        if (p->pid < 0) {
            p->pid = 0;
            fail(t, "fork: %s", strerror(errno));
            return false;
        }
        if (await_start(p, password, 10000))
            return expected_server(t, p, password, "sentinel");
        if (p->pid > 0) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, NULL, 0);
            p->pid = 0;
        }
    }
    fail(t, "%s did not start (is the redis-sentinel package installed? log in %s)",
         sentinel_program() != NULL ? sentinel_program() : "redis-sentinel", p->dir);
    return false;
}

/* A field of a flat [field, value, ...] reply (SENTINEL MASTER, SENTINEL REPLICAS). */
static const char *field(const redisReply *r, const char *name)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING && strcmp(r->element[i]->str, name) == 0 &&
            r->element[i + 1]->type == REDIS_REPLY_STRING)
            return r->element[i + 1]->str;
    return NULL;
}

/* The port sentinel i names for t->name, or -1. */
static int named_port(const crdt_topo *t, int i)
{
    if (t->sentinels[i].pid <= 0)
        return -1;
    redisContext *c = connect_sentinel(t, i);
    if (c == NULL)
        return -1;
    redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", t->name);
    int port = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING)
        port = atoi(r->element[1]->str);
    freeReplyObject(r);
    redisFree(c);
    return port;
}

int crdt_topo_primary_port(crdt_topo *t)
{
    for (int i = 0; i < CRDT_TOPO_SENTINELS; i++) {
        int p = named_port(t, i);
        if (p > 0)
            return p;
    }
    fail(t, "no sentinel names a primary for %s", t->name);
    return -1;
}

int crdt_topo_node_index(const crdt_topo *t, int port)
{
    for (int i = 0; i < CRDT_TOPO_NODES; i++)
        if (t->nodes[i].port == port)
            return i;
    return -1;
}

/* Whether the node on port says ROLE master. */
static bool is_master(const crdt_topo *t, int port)
{
    redisContext *c = crdt_topo_connect(t, port, 500);
    if (c == NULL)
        return false;
    redisReply *r = redisCommand(c, "ROLE");
    bool ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
              r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "master") == 0;
    freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* Every running sentinel names port, and port says ROLE master. */
static bool all_name(const crdt_topo *t, int port)
{
    for (int i = 0; i < CRDT_TOPO_SENTINELS; i++)
        if (t->sentinels[i].pid > 0 && named_port(t, i) != port)
            return false;
    return is_master(t, port);
}

/* The primary sees replica `port` online. */
static bool replica_online(const char *info, int port)
{
    char needle[48];
    snprintf(needle, sizeof needle, "port=%d,state=online", port);
    return strstr(info, needle) != NULL;
}

/* Why the last settled() check failed, for the error message. */
static char g_unsettled[200];

static bool settled(crdt_topo *t, int named)
{
    /* The sentinels name nodes[0] by its front port when it has one; its replicas are
     * every other node. */
    int primary = t->front_port > 0 && named == t->front_port ? t->nodes[0].port : named;
    snprintf(g_unsettled, sizeof g_unsettled, "primary %d: replicas not online", primary);
    redisContext *c = crdt_topo_connect(t, primary, 500);
    if (c == NULL)
        return false;
    redisReply *r = redisCommand(c, "INFO replication");
    bool ok = r != NULL && r->type == REDIS_REPLY_STRING && strstr(r->str, "role:master") != NULL;
    for (int i = 0; ok && i < CRDT_TOPO_NODES; i++)
        if (t->nodes[i].pid > 0 && t->nodes[i].port != primary)
            ok = replica_online(r->str, t->nodes[i].port);
    freeReplyObject(r);
    redisFree(c);
    for (int s = 0; ok && s < CRDT_TOPO_SENTINELS; s++) {
        if (t->sentinels[s].pid <= 0)
            continue;
        snprintf(g_unsettled, sizeof g_unsettled, "sentinel %d: names another primary", s);
        if (named_port(t, s) != named)
            return false;
        redisContext *sc = connect_sentinel(t, s);
        if (sc == NULL)
            return false;
        redisReply *m = redisCommand(sc, "SENTINEL master %s", t->name);
        const char *others = field(m, "num-other-sentinels");
        int running = 0;
        for (int k = 0; k < CRDT_TOPO_SENTINELS; k++)
            running += t->sentinels[k].pid > 0;
        ok = others != NULL && atoi(others) >= running - 1;
        freeReplyObject(m);
        snprintf(g_unsettled, sizeof g_unsettled, "sentinel %d: %s", s,
                 ok ? "replica not listed as a healthy slave" : "does not know the others");
        redisReply *reps = ok ? redisCommand(sc, "SENTINEL replicas %s", t->name) : NULL;
        for (int i = 0; ok && i < CRDT_TOPO_NODES; i++) {
            if (t->nodes[i].pid <= 0 || t->nodes[i].port == primary)
                continue;
            bool seen = false;
            const char *why = "not listed";
            for (size_t k = 0; reps != NULL && reps->type == REDIS_REPLY_ARRAY &&
                               k < reps->elements && !seen; k++) {
                const char *p = field(reps->element[k], "port");
                const char *flags = field(reps->element[k], "flags");
                if (p == NULL || atoi(p) != t->nodes[i].port)
                    continue;
                why = flags != NULL ? flags : "?";
                /* Its link as the primary reports it was checked above; a sentinel's
                 * own copy of master-link-status is refreshed only every 10 s. */
                seen = flags != NULL && strcmp(flags, "slave") == 0;
            }
            if (!seen)
                snprintf(g_unsettled, sizeof g_unsettled, "sentinel %d: replica %d not a "
                         "healthy slave (%s)", s, t->nodes[i].port, why);
            ok = seen;
        }
        freeReplyObject(reps);
        redisFree(sc);
    }
    return ok;
}

bool crdt_topo_settle(crdt_topo *t, int64_t timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    int primary = -1;
    while (now_ms() < deadline) {
        primary = crdt_topo_primary_port(t);
        if (primary > 0 && settled(t, primary))
            return true;
        nap();
    }
    fail(t, "topology %s did not settle within %lld ms (%s)", t->name,
         (long long)timeout_ms, g_unsettled);
    return false;
}

bool crdt_topo_start(crdt_topo *t, const crdt_topo_opts *o)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", o != NULL && o->name ? o->name : "crdtmaster");
    if (o != NULL && o->data_password != NULL)
        snprintf(t->data_password, sizeof t->data_password, "%s", o->data_password);
    if (o != NULL && o->sentinel_password != NULL)
        snprintf(t->sentinel_password, sizeof t->sentinel_password, "%s", o->sentinel_password);
    bool ok = start_node(t, &t->nodes[0], 0);
    int reach = t->nodes[0].port;
    if (ok && o != NULL && o->front != NULL) {
        reach = t->front_port = o->front(o->front_arg, t->nodes[0].port);
        if (reach <= 0) {
            fail(t, "no front port for the primary %d", t->nodes[0].port);
            ok = false;
        }
    }
    for (int i = 1; ok && i < CRDT_TOPO_NODES; i++)
        ok = start_node(t, &t->nodes[i], reach);
    for (int i = 0; ok && i < CRDT_TOPO_SENTINELS; i++)
        ok = start_sentinel(t, &t->sentinels[i], t->name, reach, 2, t->sentinel_password);
    if (ok)
        ok = crdt_topo_settle(t, 20000);
    if (!ok) {
        char why[512];
        snprintf(why, sizeof why, "%s", t->err);
        crdt_topo_stop(t);
        snprintf(t->err, sizeof t->err, "%s", why);
    }
    return ok;
}

void crdt_topo_stop(crdt_topo *t)
{
    for (int i = 0; i < CRDT_TOPO_SENTINELS; i++)
        crdt_proc_stop(&t->sentinels[i]);
    for (int i = 0; i < CRDT_TOPO_NODES; i++)
        crdt_proc_stop(&t->nodes[i]);
}

const char *crdt_topo_addrs(const crdt_topo *t, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < CRDT_TOPO_SENTINELS && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s127.0.0.1:%d", i ? "," : "",
                              t->sentinels[i].port);
    return buf;
}

const char *crdt_topo_url(const crdt_topo *t, char *buf, size_t cap)
{
    char addrs[128];
    crdt_topo_addrs(t, addrs, sizeof addrs);
    char auth[80] = "";
    if (t->data_password[0] != '\0')
        snprintf(auth, sizeof auth, ":%s@", t->data_password);
    snprintf(buf, cap, "redis-sentinel://%s%s#%s", auth, addrs, t->name);
    return buf;
}

static int await_switch(crdt_topo *t, int old, int64_t deadline)
{
    while (now_ms() < deadline) {
        int p = crdt_topo_primary_port(t);
        if (p > 0 && p != old && all_name(t, p))
            return p;
        nap();
    }
    fail(t, "no switch away from primary %d before the deadline", old);
    return -1;
}

int crdt_topo_await_switch(crdt_topo *t, int old, int64_t timeout_ms)
{
    return await_switch(t, old, now_ms() + timeout_ms);
}

int crdt_topo_failover(crdt_topo *t, int64_t timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    int old = crdt_topo_primary_port(t);
    if (old < 0)
        return -1;
    char last[200] = "";
    bool started = false;
    while (!started && now_ms() < deadline) {
        for (int i = 0; i < CRDT_TOPO_SENTINELS && !started; i++) {
            if (t->sentinels[i].pid <= 0)
                continue;
            redisContext *c = connect_sentinel(t, i);
            if (c == NULL)
                continue;
            redisReply *r = redisCommand(c, "SENTINEL FAILOVER %s", t->name);
            started = r != NULL && r->type == REDIS_REPLY_STATUS;
            if (r != NULL && r->type == REDIS_REPLY_ERROR)
                snprintf(last, sizeof last, "%s", r->str); /* INPROG, NOGOODSLAVE: retry */
            freeReplyObject(r);
            redisFree(c);
        }
        if (!started)
            nap();
    }
    if (!started) {
        fail(t, "SENTINEL FAILOVER was refused until the deadline: %s", last);
        return -1;
    }
    return await_switch(t, old, deadline);
}

int crdt_topo_kill_primary(crdt_topo *t, int64_t timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    int old = crdt_topo_primary_port(t);
    int i = crdt_topo_node_index(t, old);
    if (i < 0 || t->nodes[i].pid <= 0) {
        fail(t, "the primary %d is not one of ours, or not running", old);
        return -1;
    }
    kill(t->nodes[i].pid, SIGKILL);
    waitpid(t->nodes[i].pid, NULL, 0);
    t->nodes[i].pid = 0;
    return await_switch(t, old, deadline);
}

bool crdt_topo_restart(crdt_topo *t, int index, int64_t timeout_ms)
{
    crdt_proc *p = &t->nodes[index];
    if (p->pid > 0)
        return true;
    int primary = crdt_topo_primary_port(t);
    if (primary < 0)
        return false;
    if (!start_node(t, p, primary))
        return false;
    return crdt_topo_settle(t, timeout_ms);
}

bool crdt_topo_extra_sentinel(crdt_topo *t, const char *name, int port, const char *password,
                              crdt_proc *out)
{
    memset(out, 0, sizeof *out);
    return start_sentinel(t, out, name, port, 1, password);
}

bool crdt_tls_sentinel_start(const char *certs, const char *name, int primary_tls_port,
                             crdt_proc *out, char *err, size_t errlen)
{
    crdt_topo t;
    memset(&t, 0, sizeof t);
    memset(out, 0, sizeof *out);
    bool ok = start_sentinel_on(&t, out, name, primary_tls_port, 1, NULL, certs);
    if (!ok)
        snprintf(err, errlen, "%s", t.err);
    return ok;
}
