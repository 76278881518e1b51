/*
 * util.c -- small helpers of credisson-bench: the monotonic clock, sample statistics,
 * the bench's own hiredis connections and INFO commandstats, process CPU time, and
 * child processes talking over pipes (workers and node peers).
 *
 * Runs on the bench's main thread and in workers; no shared state.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int64_t bn_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void bn_sleep_us(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void bn_vec_push(bn_vec *a, double x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        double *p = realloc(a->v, cap * sizeof *p);
        if (p == NULL) {
            fprintf(stderr, "credisson-bench: out of memory\n");
            exit(2);
        }
        a->v = p;
        a->cap = cap;
    }
    a->v[a->n++] = x;
}

void bn_vec_free(bn_vec *a)
{
    free(a->v);
    memset(a, 0, sizeof *a);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bn_quantile(bn_vec *a, double q)
{
    if (a->n == 0)
        return NAN;
    qsort(a->v, a->n, sizeof *a->v, cmp_double);
    /* Nearest rank: the smallest sample with at least q of the samples at or below it. */
    size_t k = (size_t)ceil(q * (double)a->n);
    if (k < 1)
        k = 1;
    if (k > a->n)
        k = a->n;
    return a->v[k - 1];
}

double bn_max(const bn_vec *a)
{
    double m = NAN;
    for (size_t i = 0; i < a->n; i++)
        if (i == 0 || a->v[i] > m)
            m = a->v[i];
    return m;
}

redisContext *bn_connect(const bn_endpoint *ep)
{
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout(ep->host, ep->port, tv);
    if (c == NULL || c->err) {
        fprintf(stderr, "credisson-bench: cannot connect to %s:%d: %s\n", ep->host, ep->port,
                c ? c->errstr : "out of memory");
        exit(2);
    }
    struct timeval ctv = {30, 0};
    redisSetTimeout(c, ctv);
    return c;
}

redisReply *bn_cmd(redisContext *c, int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    if (r == NULL) {
        fprintf(stderr, "credisson-bench: %s failed: %s\n", argv[0], c->errstr);
        exit(2);
    }
    return r;
}

long long bn_cmd_int(redisContext *c, int argc, const char **argv)
{
    redisReply *r = bn_cmd(c, argc, argv);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

bn_cmdstats bn_cmdstats_get(redisContext *c)
{
    const char *argv[2] = {"INFO", "commandstats"};
    redisReply *r = bn_cmd(c, 2, argv);
    bn_cmdstats s = {0, 0, 0, 0.0};
    if (r->type == REDIS_REPLY_STRING) {
        char *p = r->str;
        while ((p = strstr(p, "cmdstat_")) != NULL) {
            p += 8;
            char *colon = strchr(p, ':');
            char *calls = colon ? strstr(colon, "calls=") : NULL;
            if (calls == NULL)
                break;
            long long n = strtoll(calls + 6, NULL, 10);
            size_t nl = (size_t)(colon - p);
            bool info = nl == 4 && strncmp(p, "info", 4) == 0;
            bool script = (nl == 4 && strncmp(p, "eval", 4) == 0) ||
                          (nl == 7 && strncmp(p, "evalsha", 7) == 0) ||
                          (nl == 7 && strncmp(p, "eval_ro", 7) == 0) ||
                          (nl == 10 && strncmp(p, "evalsha_ro", 10) == 0);
            if (!info)
                s.total += n;
            if (script)
                s.scripts += n;
            if ((nl == 9 && strncmp(p, "subscribe", 9) == 0) ||
                (nl == 11 && strncmp(p, "unsubscribe", 11) == 0))
                s.subs += n;
            p = colon;
        }
    }
    freeReplyObject(r);
    const char *cpu[2] = {"INFO", "cpu"};
    r = bn_cmd(c, 2, cpu);
    if (r->type == REDIS_REPLY_STRING) {
        const char *u = strstr(r->str, "used_cpu_user:"), *y = strstr(r->str, "used_cpu_sys:");
        if (u != NULL && y != NULL)
            s.server_cpu_us = (strtod(u + 14, NULL) + strtod(y + 13, NULL)) * 1e6;
    }
    freeReplyObject(r);
    return s;
}

int64_t bn_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec +
           (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
}

long bn_ctx_switches(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_nvcsw + u.ru_nivcsw;
}

int bn_syscalls_open(void)
{
    const char *paths[2] = {"/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
                            "/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id"};
    long long id = -1;
    for (int i = 0; i < 2 && id < 0; i++) {
        FILE *f = fopen(paths[i], "r");
        if (f != NULL) {
            if (fscanf(f, "%lld", &id) != 1)
                id = -1;
            fclose(f);
        }
    }
    if (id < 0)
        return -1;
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_TRACEPOINT;
    a.size = sizeof a;
    a.config = (unsigned long long)id;
    a.inherit = 1;
    a.exclude_kernel = 0;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

long long bn_counter_read(int fd)
{
    unsigned long long v;
    if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v)
        return -1;
    return (long long)v;
}

bn_ticks bn_ticks_now(void)
{
    bn_ticks t = {0, 0, 0};
    FILE *f = fopen("/proc/stat", "r");
    if (f == NULL)
        return t;
    /* cpu user nice system idle iowait irq softirq steal guest guest_nice (guest time is
     * inside user already) */
    long long v[8];
    if (fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7]) == 8) {
        for (int i = 0; i < 8; i++)
            t.total += v[i];
        t.steal = v[7];
        t.idle = v[3] + v[4];
    }
    fclose(f);
    return t;
}

double bn_steal_share(bn_ticks a, bn_ticks b)
{
    long long total = b.total - a.total;
    return total > 0 ? (double)(b.steal - a.steal) / (double)total : 0.0;
}

double bn_idle_share(bn_ticks a, bn_ticks b)
{
    long long total = b.total - a.total;
    return total > 0 ? (double)(b.idle - a.idle) / (double)total : 0.0;
}

bool bn_spawn(bn_child *ch, char *const argv[], char *const env_add[])
{
    int in[2], out[2];
    if (pipe(in) != 0)
        return false;
    if (pipe(out) != 0) {
        close(in[0]);
        close(in[1]);
        return false;
    }
    int ready[2]; /* closed on exec; carries errno when exec failed */
    if (pipe(ready) != 0)
        return false;
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        close(ready[0]);
        fcntl(ready[1], F_SETFD, FD_CLOEXEC);
        for (int i = 0; env_add != NULL && env_add[i] != NULL; i++)
            putenv(env_add[i]);
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(ready[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(ready[1]);
    int e = 0;
    ssize_t n = read(ready[0], &e, sizeof e);
    close(ready[0]);
    if (n == (ssize_t)sizeof e) {
        close(in[1]);
        close(out[0]);
        waitpid(pid, NULL, 0);
        return false;
    }
    ch->pid = pid;
    ch->in = fdopen(in[1], "w");
    ch->out = fdopen(out[0], "r");
    setvbuf(ch->in, NULL, _IOLBF, 0);
    return true;
}

char *bn_readline(FILE *f)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n > 0 && line[n - 1] == '\n')
        line[n - 1] = '\0';
    return line;
}

int bn_reap(bn_child *ch)
{
    if (ch->in != NULL)
        fclose(ch->in);
    if (ch->out != NULL)
        fclose(ch->out);
    ch->in = ch->out = NULL;
    int status = 0;
    if (ch->pid <= 0 || waitpid(ch->pid, &status, 0) < 0)
        return -1;
    ch->pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
