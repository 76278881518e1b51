/*
 * harness.c -- the private redis-server of a test executable and the helpers of
 * harness.h.
 *
 * Process model (Criterion 2.4 with BoxFort): the runner process runs the PRE_ALL and
 * POST_ALL report hooks; every test runs in a worker process that BoxFort starts by
 * exec'ing the test binary again, so workers share nothing with the runner but the
 * environment. The runner therefore starts the server in PRE_ALL and passes its port
 * through CRDT_REDIS_PORT. Three things make sure no redis-server survives the run:
 * the POST_ALL hook, an atexit() handler (only in the runner, checked by pid), and
 * PR_SET_PDEATHSIG(SIGKILL) in the server's own process, for a runner that dies by a
 * signal (a ctest timeout).
 */
#include "harness.h"
#include "../standalone/redis_child.h" /* free_port, fork_tied, child_stdio, remove_dir */

#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CRD_REDIS_SERVER
#define CRD_REDIS_SERVER "redis-server"
#endif

/* ---------------------------------------------------------------------------------- */
/* Time                                                                               */
/* ---------------------------------------------------------------------------------- */

int64_t crdt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

char *crdt_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "cannot read %s", path);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

int64_t crdt_now_ms(void)
{
    return crdt_now_ns() / 1000000;
}

void crdt_sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

bool crdt_wait_until(bool (*pred)(void *arg), void *arg, int64_t timeout_ms)
{
    int64_t deadline = crdt_now_ms() + timeout_ms;
    for (;;) {
        if (pred(arg))
            return true;
        if (crdt_now_ms() >= deadline)
            return pred(arg);
        crdt_sleep_ms(2);
    }
}

double crdt_time_scale(void)
{
    const char *v = getenv("CRDT_TIME_SCALE");
    double f = v != NULL ? strtod(v, NULL) : 1.0;
    return f > 1.0 ? f : 1.0;
}

int64_t crdt_scaled_ms(int64_t ms)
{
    double f = crdt_time_scale();
    int64_t r = (int64_t)((double)ms * f);
    return (double)r < (double)ms * f ? r + 1 : r;
}

int crdt_scaled_count(int n, int min)
{
    int v = (int)((double)n / crdt_time_scale());
    return v < min ? min : v;
}

/* ---------------------------------------------------------------------------------- */
/* Starting and stopping redis-server                                                 */
/* ---------------------------------------------------------------------------------- */

/* The server under test is a run-time parameter (make test-valkey sets it to
 * valkey-server); the build's redis-server is the default. */
const char *crdt_redis_server_path(void)
{
    const char *e = getenv("CRD_REDIS_SERVER");
    return e != NULL && e[0] != '\0' ? e : CRD_REDIS_SERVER;
}

const char *crdt_redis_cli_path(void)
{
    const char *e = getenv("CRD_REDIS_CLI");
    return e != NULL && e[0] != '\0' ? e : "redis-cli";
}

static void close_fds_from(int lowfd)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        for (int fd = lowfd; fd < 4096; fd++)
            close(fd);
        return;
    }
    int dfd = dirfd(d);
    int fds[1024];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 1024) {
        int fd = atoi(e->d_name);
        if (fd >= lowfd && fd != dfd)
            fds[n++] = fd;
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

/* fork + exec redis-server; the child dies with the process that started it. */
static pid_t spawn_server(const char *dir, int port, const char *unix_path,
                          const char *const *extra)
{
    char portbuf[16];
    snprintf(portbuf, sizeof portbuf, "%d", port);
    const char *prog = crdt_redis_server_path();
    const char *args[512];
    int n = 0;
    args[n++] = prog;
    args[n++] = "--port";
    args[n++] = portbuf;
    args[n++] = "--bind";
    args[n++] = "127.0.0.1";
    args[n++] = "--save";
    args[n++] = "";
    args[n++] = "--appendonly";
    args[n++] = "no";
    args[n++] = "--daemonize";
    args[n++] = "no";
    args[n++] = "--dir";
    args[n++] = dir;
    args[n++] = "--logfile";
    args[n++] = "";
    if (unix_path != NULL) {
        args[n++] = "--unixsocket";
        args[n++] = unix_path;
        args[n++] = "--unixsocketperm";
        args[n++] = "700";
    }
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 510; i++)
        args[n++] = extra[i];
    args[n] = NULL;

    pid_t pid = fork_tied();
    if (pid != 0)
        return pid;
    /* child */
    setpgid(0, 0); /* a Ctrl-C on the terminal goes to the runner, which stops us */
    char log[600];
    snprintf(log, sizeof log, "%s/redis.log", dir);
    crdt_child_stdio(log, false);
    close_fds_from(3);
    execvp(prog, (char *const *)args);
    if (strcmp(prog, CRD_REDIS_SERVER) == 0) /* never swap a chosen server for Redis */
        execvp("redis-server", (char *const *)args);
    _exit(127);
}

/* Try to PING the server once. */
static bool server_answers(int port, const char *unix_path, const char *user,
                           const char *password)
{
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    redisContext *c = unix_path != NULL ? redisConnectUnixWithTimeout(unix_path, tv)
                                        : redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == NULL)
        return false;
    bool ok = false;
    if (!c->err) {
        redisSetTimeout(c, tv);
        redisReply *r = NULL;
        bool auth_ok = true;
        if (password != NULL) {
            if (user != NULL)
                r = redisCommand(c, "AUTH %s %s", user, password);
            else
                r = redisCommand(c, "AUTH %s", password);
            auth_ok = r != NULL && r->type == REDIS_REPLY_STATUS;
            if (r != NULL)
                freeReplyObject(r);
        }
        if (auth_ok) {
            r = redisCommand(c, "PING");
            ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
            if (r != NULL)
                freeReplyObject(r);
        }
    }
    redisFree(c);
    return ok;
}

static void stop_pid(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    int64_t deadline = crdt_now_ms() + 3000;
    for (;;) {
        pid_t r = waitpid(pid, NULL, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD))
            return;
        if (crdt_now_ms() >= deadline)
            break;
        crdt_sleep_ms(2);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void write_runner_pid(const char *dir);

/* The last line of a server's log, for failure messages. */
static const char *last_log_line(const char *dir)
{
    static char line[300];
    char path[600];
    snprintf(path, sizeof path, "%s/redis.log", dir);
    line[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return "(no log)";
    char buf[300];
    while (fgets(buf, sizeof buf, f) != NULL)
        snprintf(line, sizeof line, "%s", buf);
    fclose(f);
    size_t n = strlen(line);
    if (n > 0 && line[n - 1] == '\n')
        line[n - 1] = '\0';
    return line;
}

/* ---------------------------------------------------------------------------------- */
/* TLS                                                                                */
/* ---------------------------------------------------------------------------------- */

#ifndef CRDT_SUPPORT_DIR
#error "CRDT_SUPPORT_DIR must be defined by the build"
#endif


bool crdt_tls(void)
{
    const char *v = getenv("CRDT_TLS");
    return v != NULL && strcmp(v, "1") == 0;
}

/* Runs tests/support/tls_certs.sh into dir; 0 on success. */
static int make_certs(const char *dir)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int nfd = open("/dev/null", O_WRONLY);
        if (nfd >= 0) {
            dup2(nfd, 1);
            dup2(nfd, 2);
        }
        execl("/bin/sh", "sh", CRDT_SUPPORT_DIR "/tls_certs.sh", dir, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static char g_certs_dir[256];
static pid_t g_certs_owner;

static void certs_remove(void)
{
    if (g_certs_owner == getpid() && g_certs_dir[0] != '\0')
        remove_dir(g_certs_dir);
}

/* Makes a certificate directory owned (and removed at exit) by this process. */
static const char *certs_make(void)
{
    snprintf(g_certs_dir, sizeof g_certs_dir, "/tmp/crdt-tls-XXXXXX");
    if (mkdtemp(g_certs_dir) == NULL || make_certs(g_certs_dir) != 0) {
        g_certs_dir[0] = '\0';
        return NULL;
    }
    g_certs_owner = getpid();
    atexit(certs_remove);
    return g_certs_dir;
}

const char *crdt_tls_certs(void)
{
    const char *env = getenv("CRDT_TLS_DIR");
    if (env != NULL)
        return env;
    if (g_certs_dir[0] == '\0')
        cr_assert_not_null(certs_make(), "cannot make test certificates with %s/tls_certs.sh "
                           "(is the openssl program installed?)", CRDT_SUPPORT_DIR);
    return g_certs_dir;
}

const char *crdt_tls_file(const char *name)
{
    /* Kept for the process's life, like crdt_key(), and reachable from here (a path
     * asked for twice is the same string): memcheck counts none of them as lost. */
    static char *paths[32];
    const char *dir = crdt_tls_certs();
    size_t n = strlen(dir) + strlen(name) + 2;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        if (paths[i] != NULL && strncmp(paths[i], dir, strlen(dir)) == 0 &&
            strcmp(paths[i] + strlen(dir) + 1, name) == 0)
            return paths[i];
        if (paths[i] == NULL) {
            paths[i] = malloc(n);
            cr_assert_not_null(paths[i]);
            snprintf(paths[i], n, "%s/%s", dir, name);
            return paths[i];
        }
    }
    cr_assert_fail("more than 32 certificate paths");
    return NULL;
}

/* Plain port -> TLS port of the TLS servers this process started (the shared server's
 * pair comes through the environment). */
static struct {
    int plain, tls;
} g_tls_ports[64];
static int g_ntls_ports;
static pthread_mutex_t g_tls_mu = PTHREAD_MUTEX_INITIALIZER;

static int tls_port_of(int plain)
{
    const char *p = getenv("CRDT_REDIS_PORT"), *t = getenv("CRDT_REDIS_TLS_PORT");
    if (p != NULL && t != NULL && atoi(p) == plain)
        return atoi(t);
    int tls = 0;
    pthread_mutex_lock(&g_tls_mu);
    for (int i = 0; i < g_ntls_ports; i++)
        if (g_tls_ports[i].plain == plain)
            tls = g_tls_ports[i].tls;
    pthread_mutex_unlock(&g_tls_mu);
    return tls;
}

void crdt_options_port(crd_options *o, int port)
{
    int tls = crdt_tls() ? tls_port_of(port) : 0;
    o->port = tls > 0 ? tls : port;
    o->tls = tls > 0;
    o->tls_ca_file = tls > 0 ? crdt_tls_file("ca.crt") : NULL;
}

/* Start a server; returns 0 on success, else a message in err. tls_dir: also serve TLS
 * on a second port with that directory's server certificate. */
static int start_server_tls(crdt_server *srv, bool with_unix, const char *const *extra,
                            const char *user, const char *password, const char *tls_dir,
                            char *err, size_t errcap);

static int start_server(crdt_server *srv, bool with_unix, const char *const *extra,
                        const char *user, const char *password, char *err, size_t errcap)
{
    return start_server_tls(srv, with_unix, extra, user, password,
                            crdt_tls() ? getenv("CRDT_TLS_DIR") : NULL, err, errcap);
}

static int start_server_tls(crdt_server *srv, bool with_unix, const char *const *extra,
                            const char *user, const char *password, const char *tls_dir,
                            char *err, size_t errcap)
{
    memset(srv, 0, sizeof *srv);
    snprintf(srv->dir, sizeof srv->dir, "/tmp/crdt-redis-XXXXXX");
    if (mkdtemp(srv->dir) == NULL) {
        snprintf(err, errcap, "mkdtemp: %s", strerror(errno));
        return -1;
    }
    if (with_unix)
        snprintf(srv->unix_path, sizeof srv->unix_path, "%s/redis.sock", srv->dir);
    for (int attempt = 0; attempt < 8; attempt++) {
        int port = free_port();
        if (port <= 0)
            continue;
        const char *args[480];
        int na = 0;
        char tls_port[16], cert[300], key[300], ca[300];
        int tport = 0;
        if (tls_dir != NULL) {
            tport = free_port();
            if (tport <= 0 || tport == port)
                continue;
            snprintf(tls_port, sizeof tls_port, "%d", tport);
            snprintf(cert, sizeof cert, "%s/server.crt", tls_dir);
            snprintf(key, sizeof key, "%s/server.key", tls_dir);
            snprintf(ca, sizeof ca, "%s/ca.crt", tls_dir);
            const char *t[] = {"--tls-port", tls_port, "--tls-cert-file", cert, "--tls-key-file",
                               key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no"};
            for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
                args[na++] = t[i];
        }
        for (int i = 0; extra != NULL && extra[i] != NULL && na < 478; i++)
            args[na++] = extra[i];
        args[na] = NULL;
        pid_t pid = spawn_server(srv->dir, port, with_unix ? srv->unix_path : NULL, args);
        if (pid < 0) {
            snprintf(err, errcap, "fork: %s", strerror(errno));
            break;
        }
        int64_t deadline = crdt_now_ms() + 10000;
        bool exited = false;
        for (;;) {
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid) {
                exited = true; /* most likely the port was taken meanwhile */
                break;
            }
            if (server_answers(port, NULL, user, password)) {
                srv->pid = pid;
                srv->port = port;
                srv->tls_port = tport;
                if (tport > 0) {
                    pthread_mutex_lock(&g_tls_mu);
                    if (g_ntls_ports < 64) {
                        g_tls_ports[g_ntls_ports].plain = port;
                        g_tls_ports[g_ntls_ports++].tls = tport;
                    }
                    pthread_mutex_unlock(&g_tls_mu);
                }
                return 0;
            }
            if (crdt_now_ms() >= deadline)
                break;
            crdt_sleep_ms(5);
        }
        if (!exited)
            stop_pid(pid);
        snprintf(err, errcap, "%s on port %d %s; log: %s", crdt_redis_server_path(), port,
                 exited ? "exited at start" : "did not answer PING within 10 s",
                 last_log_line(srv->dir));
    }
    remove_dir(srv->dir);
    return -1;
}

void crdt_server_start(crdt_server *srv, bool with_unix_socket, const char *const *extra_args,
                       const char *ping_user, const char *ping_password)
{
    char err[512] = "";
    int rc = start_server(srv, with_unix_socket, extra_args, ping_user, ping_password, err,
                          sizeof err);
    cr_assert_eq(rc, 0, "could not start an extra redis-server: %s", err);
    write_runner_pid(srv->dir);
}

void crdt_server_start_tls(crdt_server *srv, const char *certs_dir,
                           const char *const *extra_args, const char *ping_user,
                           const char *ping_password)
{
    char err[512] = "";
    int rc = start_server_tls(srv, false, extra_args, ping_user, ping_password, certs_dir, err,
                              sizeof err);
    cr_assert_eq(rc, 0, "could not start a TLS redis-server: %s", err);
    write_runner_pid(srv->dir);
}

void crdt_server_stop(crdt_server *srv)
{
    if (srv == NULL)
        return;
    stop_pid(srv->pid);
    srv->pid = 0;
    remove_dir(srv->dir);
    srv->dir[0] = '\0';
}

/* ---------------------------------------------------------------------------------- */
/* The executable's shared server (runner side)                                       */
/* ---------------------------------------------------------------------------------- */

static crdt_server g_main_server;
static pid_t g_runner_pid;

static void main_server_stop(void)
{
    /* atexit handlers also run in processes forked from the runner that call exit();
     * only the runner owns the server. */
    if (g_runner_pid == 0 || getpid() != g_runner_pid)
        return;
    if (g_main_server.pid > 0)
        crdt_server_stop(&g_main_server);
    unsetenv("CRDT_REDIS_PORT");
}

/* Directories of servers whose runner died by SIGKILL (nothing could clean up then):
 * each directory names its runner in runner.pid. */
static void remove_stale_dirs(void)
{
    DIR *d = opendir("/tmp");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "crdt-redis-", 11) != 0)
            continue;
        char path[600], dir[400];
        snprintf(dir, sizeof dir, "/tmp/%s", e->d_name);
        snprintf(path, sizeof path, "%s/runner.pid", dir);
        FILE *f = fopen(path, "r");
        long pid = 0;
        if (f == NULL)
            continue;
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
        if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
            remove_dir(dir);
    }
    closedir(d);
}

static void write_runner_pid(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/runner.pid", dir);
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }
}

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    if (getenv("CRDT_REDIS_PORT") != NULL)
        return; /* an externally managed server */
    remove_stale_dirs();
    char err[512] = "";
    if (crdt_tls() && getenv("CRDT_TLS_DIR") == NULL) {
        /* CRDT_TLS=1: the shared server also serves TLS, and crdt_options() clients use it
         * (with verification, trusting this run's CA); raw probes stay on the plain port. */
        const char *dir = certs_make();
        if (dir == NULL) {
            fprintf(stderr, "harness: CRDT_TLS=1 but %s/tls_certs.sh failed (openssl?)\n",
                    CRDT_SUPPORT_DIR);
            exit(2);
        }
        setenv("CRDT_TLS_DIR", dir, 1);
    }
    if (start_server(&g_main_server, false, NULL, NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "harness: cannot start %s: %s\n", crdt_redis_server_path(), err);
        exit(2);
    }
    g_runner_pid = getpid();
    write_runner_pid(g_main_server.dir);
    atexit(main_server_stop);
    char port[16];
    snprintf(port, sizeof port, "%d", g_main_server.port);
    setenv("CRDT_REDIS_PORT", port, 1);
    if (g_main_server.tls_port > 0) {
        snprintf(port, sizeof port, "%d", g_main_server.tls_port);
        setenv("CRDT_REDIS_TLS_PORT", port, 1);
    }
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    main_server_stop();
}

int crdt_port(void)
{
    const char *p = getenv("CRDT_REDIS_PORT");
    cr_assert_not_null(p, "CRDT_REDIS_PORT is not set: the PRE_ALL hook did not run");
    int port = atoi(p);
    cr_assert(port > 0 && port < 65536, "bad CRDT_REDIS_PORT %s", p);
    return port;
}

/* ---------------------------------------------------------------------------------- */
/* Clients and connections                                                            */
/* ---------------------------------------------------------------------------------- */

void crdt_options(crd_options *o)
{
    cr_assert_eq(crd_options_init(o), CRD_OK);
    o->host = "127.0.0.1";
    crdt_options_port(o, crdt_port());
    o->connect_timeout_ms = 1000;
    o->command_timeout_ms = 3000;
    /* The suites compare exact traffic (golden replays, commandstats, MONITOR feeds):
     * their clients keep no identity record. test_identity, test_inspect and the CLI's
     * processes run with it (the library's default). */
    o->identity = false;
}

crd_client *crdt_client_opts(const crd_options *o)
{
    crd_client *c = NULL;
    crd_status st = crd_client_new(o, &c);
    cr_assert_eq(st, CRD_OK, "crd_client_new: %s (%s)", crd_strerror(st),
                 c ? crd_client_errmsg(c) : "no client");
    cr_assert_not_null(c);
    return c;
}

crd_client *crdt_client(void)
{
    crd_options o;
    crdt_options(&o);
    return crdt_client_opts(&o);
}

crd_lock *crdt_lock(crd_client *c, const char *name)
{
    crd_lock *l = NULL;
    crd_status st = crd_lock_new(c, name, &l);
    cr_assert_eq(st, CRD_OK, "crd_lock_new(%s): %s (%s)", name, crd_strerror(st),
                 crd_client_errmsg(c));
    cr_assert_not_null(l);
    return l;
}

void crdt_fixture_open(crdt_fixture *f, int clients, const char *suffix,
                       crd_lock *(*new_lock)(crd_client *c, const char *name))
{
    crdt_fixture_open_opts(f, clients, suffix, new_lock, NULL, NULL);
}

void crdt_fixture_open_opts(crdt_fixture *f, int clients, const char *suffix,
                            crd_lock *(*new_lock)(crd_client *c, const char *name),
                            const crd_options *oa, const crd_options *ob)
{
    cr_assert(clients == 1 || clients == 2, "a fixture has 1 or 2 clients, not %d", clients);
    memset(f, 0, sizeof *f);
    f->a = oa ? crdt_client_opts(oa) : crdt_client();
    if (clients == 2)
        f->b = ob ? crdt_client_opts(ob) : crdt_client();
    f->r = crdt_redis();
    f->key = crdt_key(suffix);
    snprintf(f->channel, sizeof f->channel, "redisson_lock__channel:{%s}", f->key);
    if (new_lock != NULL) {
        f->la = new_lock(f->a, f->key);
        if (clients == 2)
            f->lb = new_lock(f->b, f->key);
    }
}

void crdt_fixture_open_rw(crdt_fixture *f, int clients, const char *suffix,
                          const crd_options *oa, const crd_options *ob)
{
    crdt_fixture_open_opts(f, clients, suffix, NULL, oa, ob);
    crd_status st = crd_rwlock_new(f->a, f->key, &f->rwa);
    cr_assert_eq(st, CRD_OK, "crd_rwlock_new(%s): %s", f->key, crd_strerror(st));
    if (clients == 2) {
        st = crd_rwlock_new(f->b, f->key, &f->rwb);
        cr_assert_eq(st, CRD_OK, "crd_rwlock_new(%s): %s", f->key, crd_strerror(st));
    }
}

void crdt_fixture_close(crdt_fixture *f)
{
    crdt_fixture_close_checked(f, NULL);
}

/* One client of a fixture, after the handles it made (NULL ones skipped). */
static void fixture_client_free(crd_client *c, crd_lock *l, crd_rwlock *rw)
{
    crd_lock_free(l);
    crd_rwlock_free(rw);
    crd_client_free(c);
}

void crdt_fixture_close_checked(crdt_fixture *f,
                                void (*check)(redisContext *r, const char *key))
{
    fixture_client_free(f->a, f->la, f->rwa);
    fixture_client_free(f->b, f->lb, f->rwb);
    if (check && f->r)
        check(f->r, f->key);
    if (f->r)
        redisFree(f->r);
    f->la = f->lb = NULL;
    f->rwa = f->rwb = NULL;
    f->a = f->b = NULL;
    f->r = NULL;
}

redisContext *crdt_redis_port(int port)
{
    struct timeval tv = {.tv_sec = 2, .tv_usec = 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    cr_assert(c != NULL && !c->err, "raw connection to 127.0.0.1:%d failed: %s", port,
              c ? c->errstr : "out of memory");
    struct timeval ctv = {.tv_sec = 10, .tv_usec = 0};
    redisSetTimeout(c, ctv);
    return c;
}

redisContext *crdt_redis(void)
{
    return crdt_redis_port(crdt_port());
}

redisReply *crdt_cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    cr_assert_not_null(r, "raw command '%s' failed: %s", fmt, c->errstr);
    return r;
}

redisReply *crdt_cmd_argv(redisContext *c, int argc, const char **argv, const size_t *argvlen)
{
    redisReply *r = redisCommandArgv(c, argc, argv, argvlen);
    cr_assert_not_null(r, "raw command %s failed: %s", argv[0], c->errstr);
    return r;
}

long long crdt_cmd_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    cr_assert_not_null(r, "raw command '%s' failed: %s", fmt, c->errstr);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "'%s' replied type %d (%s)", fmt, r->type,
                 r->str ? r->str : "");
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

char *crdt_cmd_str(redisContext *c, char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    cr_assert_not_null(r, "raw command '%s' failed: %s", fmt, c->errstr);
    buf[0] = '\0';
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
        r->type == REDIS_REPLY_ERROR)
        snprintf(buf, cap, "%s", r->str);
    else if (r->type == REDIS_REPLY_INTEGER)
        snprintf(buf, cap, "%lld", r->integer);
    freeReplyObject(r);
    return buf;
}

/* ---------------------------------------------------------------------------------- */
/* Keys                                                                               */
/* ---------------------------------------------------------------------------------- */

static pthread_mutex_t g_key_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_prefix[200];
static char **g_keys;
static size_t g_nkeys;

static void sanitize_into(char *dst, size_t cap, const char *src)
{
    size_t j = 0;
    for (size_t i = 0; src != NULL && src[i] != '\0' && j + 1 < cap; i++) {
        unsigned char ch = (unsigned char)src[i];
        dst[j++] = (isalnum(ch) || ch == '_' || ch == '-' || ch == '.') ? (char)ch : '_';
    }
    dst[j] = '\0';
}

const char *crdt_key_prefix(void)
{
    pthread_mutex_lock(&g_key_mu);
    if (g_prefix[0] == '\0') {
        char name[120] = "none";
        if (criterion_current_test != NULL && criterion_current_test->name != NULL)
            sanitize_into(name, 100, criterion_current_test->name);
        snprintf(g_prefix, sizeof g_prefix, "crdt:%s:%ld.%lld", name, (long)getpid(),
                 (long long)(crdt_now_ns() % 1000000));
    }
    pthread_mutex_unlock(&g_key_mu);
    return g_prefix;
}

const char *crdt_key(const char *suffix)
{
    const char *p = crdt_key_prefix();
    size_t n = strlen(p) + strlen(suffix) + 2;
    char *k = malloc(n);
    cr_assert_not_null(k);
    snprintf(k, n, "%s:%s", p, suffix);
    pthread_mutex_lock(&g_key_mu);
    char **nk = realloc(g_keys, (g_nkeys + 1) * sizeof *nk);
    cr_assert_not_null(nk);
    g_keys = nk;
    g_keys[g_nkeys++] = k;
    pthread_mutex_unlock(&g_key_mu);
    return k;
}

/* ---------------------------------------------------------------------------------- */
/* Server introspection                                                               */
/* ---------------------------------------------------------------------------------- */

long long crdt_cmdstat_calls(redisContext *c, const char *cmd)
{
    redisReply *r = crdt_cmd(c, "INFO commandstats");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    char needle[128];
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", cmd);
    long long v = 0;
    const char *p = strstr(r->str, needle);
    if (p != NULL)
        v = atoll(p + strlen(needle));
    freeReplyObject(r);
    return v;
}

long long crdt_pubsub_channels_count(redisContext *c, const char *pattern)
{
    redisReply *r = pattern ? crdt_cmd(c, "PUBSUB CHANNELS %s", pattern)
                            : crdt_cmd(c, "PUBSUB CHANNELS");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    long long n = (long long)r->elements;
    freeReplyObject(r);
    return n;
}

static bool channels_empty_pred(void *arg)
{
    const crdt_probe *p = arg;
    return crdt_pubsub_channels_count(p->r, p->name) == 0;
}

bool crdt_pubsub_channels_empty(const char *pattern)
{
    return crdt_pubsub_channels_empty_at(crdt_port(), pattern);
}

bool crdt_pubsub_channels_empty_at(int port, const char *pattern)
{
    crdt_probe p = {.r = crdt_redis_port(port), .name = pattern};
    bool ok = crdt_wait_until(channels_empty_pred, &p, 2000);
    redisFree(p.r);
    return ok;
}

/* ---------------------------------------------------------------------------------- */
/* Lock state probes                                                                  */
/* ---------------------------------------------------------------------------------- */

void crdt_owner_field(crd_client *c, uint64_t owner, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s:%" PRIu64, crd_client_id(c), owner);
}

long long crdt_pttl(redisContext *r, const char *key)
{
    return crdt_cmd_int(r, "PTTL %s", key);
}

long long crdt_exists(redisContext *r, const char *key)
{
    return crdt_cmd_int(r, "EXISTS %s", key);
}

long long crdt_hget_int(redisContext *r, const char *key, const char *field)
{
    redisReply *rep = crdt_cmd(r, "HGET %s %s", key, field);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    cr_assert(rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_NIL,
              "HGET %s %s: reply type %d", key, field, rep->type);
    freeReplyObject(rep);
    return v;
}

long long crdt_count_keys(redisContext *r, const char *pattern)
{
    long long n = 0;
    char cursor[32] = "0";
    do {
        redisReply *rep = crdt_cmd(r, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        cr_assert_eq(rep->type, REDIS_REPLY_ARRAY);
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        n += (long long)rep->element[1]->elements;
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);
    return n;
}

static bool exists_is(void *arg)
{
    const crdt_probe *p = arg;
    return crdt_exists(p->r, p->name) == p->n;
}

bool crdt_await_exists(redisContext *r, const char *key, bool present, int64_t timeout_ms)
{
    crdt_probe p = {.r = r, .name = key, .n = present};
    return crdt_wait_until(exists_is, &p, timeout_ms);
}

long long crdt_numsub(redisContext *r, const char *channel)
{
    redisReply *rep = crdt_cmd(r, "PUBSUB NUMSUB %s", channel);
    cr_assert(rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
                  rep->element[1]->type == REDIS_REPLY_INTEGER,
              "PUBSUB NUMSUB %s: unexpected reply", channel);
    long long v = rep->element[1]->integer;
    freeReplyObject(rep);
    return v;
}

/* A server-side integer (LLEN, PUBSUB NUMSUB, HGET) awaited until it lies in
 * [min, max]. */
struct int_pred {
    redisContext *r;
    const char *key, *field;
    long long (*probe)(const struct int_pred *p);
    long long min, max;
};

static bool int_in_range(void *arg)
{
    struct int_pred *p = arg;
    long long v = p->probe(p);
    return v >= p->min && v <= p->max;
}

static long long probe_numsub(const struct int_pred *p) { return crdt_numsub(p->r, p->key); }

static long long probe_llen(const struct int_pred *p)
{
    return crdt_cmd_int(p->r, "LLEN %s", p->key);
}

static long long probe_hget(const struct int_pred *p)
{
    return crdt_hget_int(p->r, p->key, p->field);
}

bool crdt_await_numsub(redisContext *r, const char *channel, long long min, int64_t timeout_ms)
{
    struct int_pred p = {r, channel, NULL, probe_numsub, min, LLONG_MAX};
    return crdt_wait_until(int_in_range, &p, timeout_ms);
}

bool crdt_await_subscribed(redisContext *r, const char *channel, int64_t timeout_ms)
{
    return crdt_await_numsub(r, channel, 1, timeout_ms);
}

bool crdt_await_llen(redisContext *r, const char *key, long long min, long long max,
                     int64_t timeout_ms)
{
    struct int_pred p = {r, key, NULL, probe_llen, min, max};
    return crdt_wait_until(int_in_range, &p, timeout_ms);
}

bool crdt_await_hget_int(redisContext *r, const char *key, const char *field, long long want,
                         int64_t timeout_ms)
{
    struct int_pred p = {r, key, field, probe_hget, want, want};
    return crdt_wait_until(int_in_range, &p, timeout_ms);
}

struct metric_pred {
    crd_client *c;
    size_t offset;
    uint64_t min, max;
};

static bool metric_in_range(void *arg)
{
    struct metric_pred *p = arg;
    crd_metrics m;
    cr_assert_eq(crd_client_metrics(p->c, &m, sizeof m), CRD_OK);
    uint64_t v;
    memcpy(&v, (const char *)&m + p->offset, sizeof v);
    return v >= p->min && v <= p->max;
}

bool crdt_await_metric(crd_client *c, size_t offset, uint64_t min, uint64_t max,
                       int64_t timeout_ms)
{
    cr_assert(offset + sizeof(uint64_t) <= sizeof(crd_metrics), "metric offset %zu", offset);
    struct metric_pred p = {c, offset, min, max};
    return crdt_wait_until(metric_in_range, &p, timeout_ms);
}

bool crdt_await_waiting(crd_client *c, uint64_t n, int64_t timeout_ms)
{
    return crdt_await_metric(c, CRDT_METRIC(waiting_now), n, n, timeout_ms);
}

/* ---------------------------------------------------------------------------------- */
/* Watching published messages                                                        */
/* ---------------------------------------------------------------------------------- */

void crdt_watch_open(crdt_watch *w, const char *channel, bool pattern)
{
    crdt_watch_open_at(w, crdt_port(), channel, pattern);
}

void crdt_watch_open_at(crdt_watch *w, int port, const char *channel, bool pattern)
{
    w->sub = crdt_redis_port(port);
    w->pub = crdt_redis_port(port);
    snprintf(w->sentinel, sizeof w->sentinel, "%s", crdt_key("sentinel"));
    freeReplyObject(crdt_cmd(w->sub, pattern ? "PSUBSCRIBE %s" : "SUBSCRIBE %s", channel));
    freeReplyObject(crdt_cmd(w->sub, "SUBSCRIBE %s", w->sentinel));
    struct timeval tv = {.tv_sec = 5, .tv_usec = 0};
    redisSetTimeout(w->sub, tv);
}

int crdt_watch_collect(crdt_watch *w, crdt_msg *out, int max)
{
    freeReplyObject(crdt_cmd(w->pub, "PUBLISH %s end", w->sentinel));
    int n = 0;
    for (;;) {
        redisReply *r = NULL;
        cr_assert_eq(redisGetReply(w->sub, (void **)&r), REDIS_OK,
                     "the watch connection received nothing: %s", w->sub->errstr);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        const char *kind = r->element[0]->str;
        const redisReply *ch = NULL, *payload = NULL;
        if (strcmp(kind, "pmessage") == 0 && r->elements == 4) {
            ch = r->element[2];
            payload = r->element[3];
        } else if (strcmp(kind, "message") == 0 && r->elements == 3) {
            ch = r->element[1];
            payload = r->element[2];
        }
        if (ch != NULL && strcmp(ch->str, w->sentinel) == 0) {
            freeReplyObject(r);
            break;
        }
        if (ch != NULL) {
            if (n < max) {
                snprintf(out[n].channel, sizeof out[n].channel, "%s", ch->str);
                snprintf(out[n].payload, sizeof out[n].payload, "%s", payload->str);
            }
            n++;
        }
        freeReplyObject(r);
    }
    return n;
}

void crdt_watch_close(crdt_watch *w)
{
    redisFree(w->sub);
    redisFree(w->pub);
}

/* ---------------------------------------------------------------------------------- */
/* Plain helpers (no Criterion: they also run in children and worker threads)         */
/* ---------------------------------------------------------------------------------- */

long long crdt_reply_int(redisReply *r)
{
    if (r == NULL)
        return -1000000;
    long long v = -1000000;
    if (r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r->type == REDIS_REPLY_STRING)
        v = atoll(r->str);
    else if (r->type == REDIS_REPLY_NIL)
        v = 0;
    freeReplyObject(r);
    return v;
}

bool crdt_await_go(redisContext *r, const char *go)
{
    redisReply *rep = redisCommand(r, "BLPOP %s 60", go);
    bool started = rep != NULL && rep->type == REDIS_REPLY_ARRAY;
    if (rep != NULL)
        freeReplyObject(rep);
    return started;
}

redisContext *crdt_raw_connect(int port, int64_t timeout_ms)
{
    struct timeval tv = {.tv_sec = (time_t)(timeout_ms / 1000),
                         .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (r == NULL)
        return NULL;
    if (r->err) {
        redisFree(r);
        return NULL;
    }
    redisSetTimeout(r, tv);
    return r;
}

void crdt_options_plain(crd_options *o, int port)
{
    crd_options_init(o);
    o->host = "127.0.0.1";
    o->port = port;
    o->identity = false; /* as crdt_options: the suites count exact traffic */
}

crd_client *crdt_plain_client(int port)
{
    crd_options o;
    crd_options_init(&o);
    o.host = "127.0.0.1";
    crdt_options_port(&o, port);
    o.identity = false; /* as crdt_options */
    crd_client *c = NULL;
    if (crd_client_new(&o, &c) != CRD_OK) {
        crd_client_free(c);
        return NULL;
    }
    return c;
}

void crdt_child_stdio(const char *log, bool truncate)
{
    child_stdio(log, truncate);
}

int crdt_plain_open(const crd_options *o, const char *name,
                    crd_status (*new_lock)(crd_client *c, const char *name, crd_lock **out),
                    crd_client **c, crd_lock **l)
{
    *c = NULL;
    *l = NULL;
    if (crd_client_new(o, c) != CRD_OK) {
        crd_client_free(*c);
        *c = NULL;
        return 1;
    }
    return new_lock(*c, name, l) != CRD_OK ? 2 : 0;
}

int crdt_exclusion_section(redisContext *r, const char *inside, const char *counter)
{
    int violation = crdt_reply_int(redisCommand(r, "INCR %s", inside)) != 1;
    long long v = crdt_reply_int(redisCommand(r, "GET %s", counter));
    freeReplyObject(redisCommand(r, "SET %s %lld", counter, v + 1));
    crdt_reply_int(redisCommand(r, "DECR %s", inside));
    return violation;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

void crdt_sort_i64(int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
}

int crdt_run_stderr(const char *command, char *err, size_t cap)
{
    char cmd[4096], errfile[64];
    snprintf(errfile, sizeof errfile, "/tmp/crdt-run-%d.err", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s >/dev/null 2>%s", command, errfile);
    int st = system(cmd);
    err[0] = '\0';
    FILE *f = fopen(errfile, "r");
    if (f != NULL) {
        size_t n = fread(err, 1, cap - 1, f);
        err[n] = '\0';
        fclose(f);
    }
    unlink(errfile);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---------------------------------------------------------------------------------- */
/* Processes                                                                          */
/* ---------------------------------------------------------------------------------- */

pid_t crdt_fork(int (*fn)(void *arg), void *arg)
{
    (void)crdt_key_prefix(); /* children share the parent's key prefix */
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int rc = fn(arg);
        fflush(NULL);
        _exit(rc & 0xff);
    }
    return pid;
}

int crdt_wait_child(pid_t pid, int64_t timeout_ms)
{
    int64_t deadline = crdt_now_ms() + timeout_ms;
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (r < 0)
            return -1;
        if (crdt_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        crdt_sleep_ms(2);
    }
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return -1;
}

struct child_job {
    int index;
    int (*fn)(int index, void *arg);
    void *arg;
};

static int child_trampoline(void *p)
{
    struct child_job *j = p;
    return j->fn(j->index, j->arg);
}

int crdt_run_children(int n, int (*fn)(int index, void *arg), void *arg, int64_t timeout_ms,
                      int *codes)
{
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    cr_assert_not_null(pids);
    for (int i = 0; i < n; i++) {
        struct child_job j = {i, fn, arg};
        pids[i] = crdt_fork(child_trampoline, &j);
    }
    int64_t deadline = crdt_now_ms() + timeout_ms;
    int ok = 0;
    for (int i = 0; i < n; i++) {
        int64_t left = deadline - crdt_now_ms();
        codes[i] = crdt_wait_child(pids[i], left > 0 ? left : 0);
        if (codes[i] == 0)
            ok++;
    }
    free(pids);
    return ok;
}

/* ---------------------------------------------------------------------------------- */
/* Trace recorder                                                                     */
/* ---------------------------------------------------------------------------------- */

struct crdt_tracelog {
    pthread_mutex_t mu;
    crdt_trace_entry *v;
    size_t n, cap;
    int tag;
};

crdt_tracelog *crdt_tracelog_new(void)
{
    crdt_tracelog *t = calloc(1, sizeof *t);
    cr_assert_not_null(t);
    pthread_mutex_init(&t->mu, NULL);
    return t;
}

static void entry_clear(crdt_trace_entry *e)
{
    for (int i = 0; i < e->argc; i++)
        free(e->argv[i]);
    free(e->argv);
    free(e->argvlen);
    free(e->reply);
    memset(e, 0, sizeof *e);
}

void crdt_trace_entry_free(crdt_trace_entry *e)
{
    if (e != NULL)
        entry_clear(e);
}

void crdt_tracelog_free(crdt_tracelog *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n; i++)
        entry_clear(&t->v[i]);
    free(t->v);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d == NULL)
        abort();
    if (n > 0)
        memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static void entry_copy(crdt_trace_entry *dst, int argc, const char *const *argv,
                       const size_t *argvlen, const char *reply, bool subscriber)
{
    dst->argc = argc;
    dst->argv = calloc((size_t)argc + 1, sizeof *dst->argv);
    dst->argvlen = calloc((size_t)argc + 1, sizeof *dst->argvlen);
    if (dst->argv == NULL || dst->argvlen == NULL)
        abort();
    for (int i = 0; i < argc; i++) {
        size_t len = argvlen ? argvlen[i] : strlen(argv[i]);
        dst->argv[i] = dup_bytes(argv[i], len);
        dst->argvlen[i] = len;
    }
    dst->reply = dup_bytes(reply ? reply : "", reply ? strlen(reply) : 0);
    dst->subscriber = subscriber;
}

static void trace_cb(void *user_data, const crd_trace *tr)
{
    crdt_tracelog *t = user_data;
    crdt_trace_entry e = {0};
    entry_copy(&e, tr->argc, tr->argv, tr->argvlen, tr->reply, tr->subscriber);
    e.t_ns = crdt_now_ns();
    pthread_mutex_lock(&t->mu);
    e.tag = t->tag;
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 64;
        crdt_trace_entry *nv = realloc(t->v, nc * sizeof *nv);
        if (nv == NULL)
            abort();
        t->v = nv;
        t->cap = nc;
    }
    t->v[t->n++] = e;
    pthread_mutex_unlock(&t->mu);
}

void crdt_tracelog_attach(crdt_tracelog *t, crd_options *o)
{
    o->on_trace = trace_cb;
    o->trace_user_data = t;
}

crdt_tracelog *crdt_traced_options(crd_options *o)
{
    crdt_tracelog *t = crdt_tracelog_new();
    crdt_options(o);
    crdt_tracelog_attach(t, o);
    return t;
}

void crdt_tracelog_set_tag(crdt_tracelog *t, int tag)
{
    pthread_mutex_lock(&t->mu);
    t->tag = tag;
    pthread_mutex_unlock(&t->mu);
}

size_t crdt_tracelog_count(crdt_tracelog *t)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->n;
    pthread_mutex_unlock(&t->mu);
    return n;
}

bool crdt_tracelog_get(crdt_tracelog *t, size_t i, crdt_trace_entry *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&t->mu);
    bool ok = i < t->n;
    if (ok) {
        crdt_trace_entry *e = &t->v[i];
        entry_copy(out, e->argc, (const char *const *)e->argv, e->argvlen, e->reply,
                   e->subscriber);
        out->t_ns = e->t_ns;
        out->tag = e->tag;
    }
    pthread_mutex_unlock(&t->mu);
    return ok;
}

static bool is_script_entry(const crdt_trace_entry *e)
{
    if (e->argc < 1)
        return false;
    if (strcasecmp(e->argv[0], "EVALSHA") != 0 && strcasecmp(e->argv[0], "EVAL") != 0)
        return false;
    return strncmp(e->reply, "(error) NOSCRIPT", 16) != 0;
}

size_t crdt_tracelog_count_cmd(crdt_tracelog *t, size_t from, const char *cmd, int subscriber)
{
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = from; i < t->n; i++) {
        crdt_trace_entry *e = &t->v[i];
        if (e->argc >= 1 && strcasecmp(e->argv[0], cmd) == 0 &&
            (subscriber < 0 || (int)e->subscriber == subscriber))
            n++;
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

size_t crdt_tracelog_count_scripts(crdt_tracelog *t, size_t from)
{
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = from; i < t->n; i++)
        if (is_script_entry(&t->v[i]))
            n++;
    pthread_mutex_unlock(&t->mu);
    return n;
}

struct traced_pred {
    crdt_tracelog *t;
    size_t from;
    const char *cmd;
    int subscriber;
    size_t at_least;
};

static bool traced_enough(void *arg)
{
    struct traced_pred *p = arg;
    size_t n = p->cmd != NULL ? crdt_tracelog_count_cmd(p->t, p->from, p->cmd, p->subscriber)
                              : crdt_tracelog_count_scripts(p->t, p->from);
    return n >= p->at_least;
}

bool crdt_await_traced(crdt_tracelog *t, size_t from, const char *cmd, int subscriber,
                       size_t at_least, int64_t timeout_ms)
{
    struct traced_pred p = {t, from, cmd, subscriber, at_least};
    return crdt_wait_until(traced_enough, &p, timeout_ms);
}

bool crdt_tracelog_has(crdt_tracelog *t, size_t from, const char *cmd, const char *arg)
{
    bool found = false;
    pthread_mutex_lock(&t->mu);
    for (size_t i = from; i < t->n && !found; i++) {
        crdt_trace_entry *e = &t->v[i];
        if (e->argc < 1 || strcasecmp(e->argv[0], cmd) != 0)
            continue;
        if (arg == NULL) {
            found = true;
            break;
        }
        for (int j = 1; j < e->argc; j++)
            if (strcmp(e->argv[j], arg) == 0) {
                found = true;
                break;
            }
    }
    pthread_mutex_unlock(&t->mu);
    return found;
}

void crdt_tracelog_dump(crdt_tracelog *t, const char *title)
{
    pthread_mutex_lock(&t->mu);
    fprintf(stderr, "---- trace %s (%zu entries)\n", title, t->n);
    for (size_t i = 0; i < t->n; i++) {
        crdt_trace_entry *e = &t->v[i];
        fprintf(stderr, "  [%d]%s", e->tag, e->subscriber ? " sub" : "");
        for (int j = 0; j < e->argc; j++)
            fprintf(stderr, " %.*s", (int)(e->argvlen[j] > 80 ? 80 : e->argvlen[j]),
                    e->argv[j]);
        fprintf(stderr, " -> %s\n", e->reply);
    }
    pthread_mutex_unlock(&t->mu);
}

/* ---------------------------------------------------------------------------------- */
/* MONITOR lines                                                                      */
/* ---------------------------------------------------------------------------------- */

/* A hex digit's value (either case), -1 for anything else. */
static int hexval(int ch)
{
    static const char digits[] = "0123456789abcdef";
    const char *at = ch > 0 && ch < 128 ? strchr(digits, tolower(ch)) : NULL;
    return at != NULL ? (int)(at - digits) : -1;
}

void crdt_mon_cmd_free(crdt_mon_cmd *m)
{
    if (m == NULL)
        return;
    for (int i = 0; i < m->argc; i++)
        free(m->argv[i]);
    free(m->argv);
    free(m->argvlen);
    memset(m, 0, sizeof *m);
}

bool crdt_mon_parse(const char *line, size_t len, crdt_mon_cmd *out)
{
    memset(out, 0, sizeof *out);
    const char *p = memchr(line, '[', len);
    const char *end = line + len;
    if (p == NULL)
        return false;
    p++;
    out->db = atoi(p);
    while (p < end && *p != ' ')
        p++;
    p++;
    size_t si = 0;
    while (p < end && *p != ']' && si + 1 < sizeof out->source)
        out->source[si++] = *p++;
    out->source[si] = '\0';
    while (p < end && *p != ']')
        p++;
    if (p >= end)
        return false;
    p++;
    size_t cap = 8;
    out->argv = calloc(cap, sizeof *out->argv);
    out->argvlen = calloc(cap, sizeof *out->argvlen);
    if (out->argv == NULL || out->argvlen == NULL)
        abort();
    while (p < end) {
        while (p < end && *p == ' ')
            p++;
        if (p >= end)
            break;
        if (*p != '"') {
            crdt_mon_cmd_free(out);
            return false;
        }
        p++;
        char *buf = malloc((size_t)(end - p) + 1);
        if (buf == NULL)
            abort();
        size_t n = 0;
        while (p < end && *p != '"') {
            if (*p == '\\' && p + 1 < end) {
                p++;
                switch (*p) {
                case 'n': buf[n++] = '\n'; p++; break;
                case 'r': buf[n++] = '\r'; p++; break;
                case 't': buf[n++] = '\t'; p++; break;
                case 'a': buf[n++] = '\a'; p++; break;
                case 'b': buf[n++] = '\b'; p++; break;
                case 'x':
                    if (p + 2 < end && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
                        buf[n++] = (char)(hexval(p[1]) * 16 + hexval(p[2]));
                        p += 3;
                    } else {
                        buf[n++] = *p++;
                    }
                    break;
                default: buf[n++] = *p++; break;
                }
            } else {
                buf[n++] = *p++;
            }
        }
        buf[n] = '\0';
        if (p < end)
            p++; /* closing quote */
        if ((size_t)out->argc == cap) {
            cap *= 2;
            char **na = realloc(out->argv, cap * sizeof *na);
            size_t *nl = realloc(out->argvlen, cap * sizeof *nl);
            if (na == NULL || nl == NULL)
                abort();
            out->argv = na;
            out->argvlen = nl;
        }
        out->argv[out->argc] = buf;
        out->argvlen[out->argc] = n;
        out->argc++;
    }
    return out->argc > 0;
}

void crdt_expect_untrusted_ca_refused(crd_options *o)
{
    o->tls_ca_file = crdt_tls_file("other-ca.crt");
    crd_client *bad = NULL;
    cr_expect_neq(crd_client_new(o, &bad), CRD_OK);
    cr_expect(strstr(crd_client_errmsg(bad), "certificate") != NULL, "%s", crd_client_errmsg(bad));
    crd_client_free(bad);
}

void crdt_op_rec_done(void *user, crd_op *op, crd_status st)
{
    (void)op;
    crdt_op_rec *r = user;
    r->last = st;
    r->failed += st == CRD_TIMEOUT || st == CRD_IO;
    r->done++;
}

int64_t crdt_loop_until(crd_client *c, const int *done, int n, int64_t limit_ms)
{
    int fd = crd_loop_fd(c);
    int64_t t0 = crdt_now_ms(), worst_us = 0;
    while (*done < n && crdt_now_ms() - t0 < limit_ms) {
        int64_t wait = crd_loop_timeout_ms(c);
        struct pollfd pf = {fd, POLLIN, 0};
        poll(&pf, fd >= 0 ? 1 : 0, wait < 0 || wait > 100 ? 100 : (int)wait);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        crd_loop_dispatch(c);
        clock_gettime(CLOCK_MONOTONIC, &b);
        int64_t us = (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
        worst_us = us > worst_us ? us : worst_us;
    }
    return worst_us;
}
