/*
 * bench.h -- declarations shared by the units of credisson-bench (issue #7).
 *
 *   bench.c    the driver: options, the private redis-server, repetitions, scenarios,
 *              summaries (text table or one JSON object per line)
 *   util.c     clocks, statistics, INFO commandstats, process spawning, line I/O
 *   cluster.c  private Redis Clusters for the cluster-3 scenario
 *   worker.c   the C worker processes (procs-N, handoff, fair-8, watchdog-N): the same
 *              binary started with --worker KIND
 *
 * Nothing here is part of the library; the bench uses only the public header plus raw
 * hiredis for its own measuring connections (critical-section counters, INFO, floor).
 */
#ifndef CRD_BENCH_H
#define CRD_BENCH_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- util.c ------------------------------------------------------------------------ */

int64_t bn_now_us(void); /* CLOCK_MONOTONIC, the clock node's process.hrtime reads too */
void bn_sleep_us(int64_t us);

/* A growable array of doubles, for latency samples. */
typedef struct bn_vec {
    double *v;
    size_t n, cap;
} bn_vec;
void bn_vec_push(bn_vec *a, double x);
void bn_vec_free(bn_vec *a);
/* Quantile q in [0,1] of the samples (sorts them in place); NAN when empty. */
double bn_quantile(bn_vec *a, double q);
double bn_max(const bn_vec *a);

/* The endpoint every connection of the run uses. */
typedef struct bn_endpoint {
    char host[256];
    int port;
    char url[300]; /* redis://host:port, passed to crd_options.url and to workers */
} bn_endpoint;

redisContext *bn_connect(const bn_endpoint *ep);
/* Runs a command (printf-free argv form); exits the program on I/O failure. */
redisReply *bn_cmd(redisContext *c, int argc, const char **argv);
long long bn_cmd_int(redisContext *c, int argc, const char **argv);

/* INFO commandstats: calls summed over every command except INFO itself, and the
 * script calls (EVAL + EVALSHA + their _RO forms) separately; INFO cpu: the server's own
 * CPU time (used_cpu_user + used_cpu_sys, its main thread and its helpers). */
typedef struct bn_cmdstats {
    long long total;
    long long scripts;
    long long subs; /* SUBSCRIBE + UNSUBSCRIBE */
    double server_cpu_us;
} bn_cmdstats;
bn_cmdstats bn_cmdstats_get(redisContext *c);

/* CPU time of this process (all threads) in microseconds. */
int64_t bn_cpu_us(void);
/* Context switches of this process so far, every thread's, voluntary and not. */
long bn_ctx_switches(void);
/* A counter of the system calls this thread and the threads it starts from now on make
 * (perf's raw_syscalls:sys_enter tracepoint, inherited): an fd for bn_counter_read, or
 * -1 where the kernel does not allow it (perf_event_paranoid, no tracefs). */
int bn_syscalls_open(void);
/* The counter's value summed over its threads; -1 when fd is -1 or the read fails. */
long long bn_counter_read(int fd);

/* The machine's CPU time so far (/proc/stat's "cpu" line, in clock ticks): all of it, and
 * what the hypervisor took for other guests (steal). Both 0 where /proc/stat is missing. */
typedef struct bn_ticks {
    long long total, steal, idle; /* idle: idle + iowait */
} bn_ticks;
bn_ticks bn_ticks_now(void);
/* The share of the machine's CPU time between a and b that was stolen (0 without data). */
double bn_steal_share(bn_ticks a, bn_ticks b);
/* The share of it that no task wanted (idle), 0 without data: near 0, the run was
 * bounded by the machine's CPU; well above, by latency. */
double bn_idle_share(bn_ticks a, bn_ticks b);

/* A child process with pipes on its stdin and stdout. */
typedef struct bn_child {
    pid_t pid;
    FILE *in;  /* child's stdin */
    FILE *out; /* child's stdout */
} bn_child;
/* Starts argv[0] (searched in PATH) with extra environment entries (NAME=VALUE, may be
 * NULL). Returns false when it could not be started. */
bool bn_spawn(bn_child *ch, char *const argv[], char *const env_add[]);
/* Reads one line (without the newline) into a malloc'ed buffer; NULL on EOF. */
char *bn_readline(FILE *f);
/* Closes the pipes and waits; returns the exit status (or -1). */
int bn_reap(bn_child *ch);

/* ---- cluster.c --------------------------------------------------------------------- */

#define BN_CLUSTER_MAX 8

/* A private Redis Cluster of primaries only (cluster-3 scenario). */
typedef struct bn_cluster {
    int n;
    pid_t pid[BN_CLUSTER_MAX];
    int port[BN_CLUSTER_MAX];
    char dir[64];
    char url[BN_CLUSTER_MAX * 24 + 32]; /* redis-cluster://127.0.0.1:p1,... */
} bn_cluster;

/* Starts primaries (1 or 3+) redis-servers in cluster mode (server: the redis-server
 * program, cli: redis-cli) and waits until the cluster is ok. False on failure (what
 * was started stays in cl for bn_cluster_stop). */
bool bn_cluster_start(bn_cluster *cl, int primaries, const char *server, const char *cli);
void bn_cluster_stop(bn_cluster *cl);

/* ---- worker.c ---------------------------------------------------------------------- */

/* Entry point of `credisson-bench --worker KIND ...`. */
int bn_worker_main(int argc, char **argv);

#endif /* CRD_BENCH_H */
