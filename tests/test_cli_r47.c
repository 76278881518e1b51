/*
 * test_cli_r47.c -- the CLI's part of issue 44, with real processes and real signals:
 * an interrupted `run --fair` leaves the queue (the measured case: B gets the lock
 * within 100 ms of the holder's release), SIGINT/SIGTERM/SIGHUP end a waiting run of any
 * kind with the signal's own status, `run --rate` limits a shell loop, and `ratelimit
 * status|set|delete`. Each credisson is the built binary (CRD_CLI_PATH). CRDT_SERIAL_TEST:
 * one test at a time (a waiter is seen waiting through the server's command counts).
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "probes.h"
#include "procs.h"

#ifndef CRD_CLI_PATH
#error "CRD_CLI_PATH must name the credisson binary"
#endif

static char url[64];

static const char *test_url(void)
{
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", crdt_port());
    return url;
}

static char dir[128];

static const char *tmpdir(void)
{
    if (dir[0] == '\0') {
        snprintf(dir, sizeof dir, "/tmp/crdt-cli-r47-%d", (int)getpid());
        mkdir(dir, 0700);
    }
    return dir;
}

static void path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", tmpdir(), name);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Starts credisson --url <the harness server> args. */
static void start(crdt_proc *p, const char *const *args)
{
    const char *argv[64] = {CRD_CLI_PATH, "--url", test_url()};
    int n = 3;
    for (int i = 0; args[i] != NULL; i++) {
        cr_assert_lt(n, 63, "too many arguments");
        argv[n++] = args[i];
    }
    crdt_proc_start_in(p, argv, NULL, tmpdir());
}

static int cli(char **out, char **err, const char *const *args)
{
    crdt_proc p;
    start(&p, args);
    return crdt_proc_finish(&p, 20000, out, err);
}

static long long file_ns(const char *p)
{
    size_t len;
    char *s = crdt_slurp(p, &len);
    long long v = s != NULL ? atoll(s) : 0;
    free(s);
    return v;
}

/* Scripts the server has run (EVALSHA and EVAL calls). */
static long long scripts_run(redisContext *r)
{
    return crdt_cmdstat_calls(r, "evalsha") + crdt_cmdstat_calls(r, "eval");
}

/* r, n: the server has run n scripts or more. */
static bool scripts_reached(void *arg)
{
    crdt_probe *p = arg;
    return scripts_run(p->r) >= p->n;
}

/* data: a crdt_proc; n: a signal. The process catches it (its handler is installed). */
static bool catches(void *arg)
{
    crdt_probe *p = arg;
    const crdt_proc *w = p->data;
    return (crdt_proc_signals(w->pid, "SigCgt") >> (p->n - 1) & 1) != 0;
}

/* The measured case: H holds fq; A (--wait 10000) queues, B (--wait 30000) queues
 * behind A; A gets a real SIGINT and exits 130 having left the queue; when H's CMD ends,
 * B's CMD starts within 100 ms (on today's main it timed out after 30 s: A's dead entry
 * held it up for A's wait plus H's lease). */
Test(cli_r47, an_interrupted_fair_run_leaves_the_queue_and_the_next_gets_the_lock_at_once,
     .timeout = 60)
{
    redisContext *r = crdt_redis();
    const char *name = crdt_key("fq");
    char queue[300], marker[256], h_end[256], b_start[256], hcmd[600], bcmd[400];
    snprintf(queue, sizeof queue, "redisson_lock_queue:{%s}", name);
    path(marker, sizeof marker, "release");
    path(h_end, sizeof h_end, "h_end");
    path(b_start, sizeof b_start, "b_start");
    unlink(marker);
    unlink(h_end);
    unlink(b_start);
    /* H's CMD waits for the test's marker, then notes when it ended. */
    snprintf(hcmd, sizeof hcmd, "while [ ! -e %s ]; do sleep 0.01; done; date +%%s%%N > %s",
             marker, h_end);
    snprintf(bcmd, sizeof bcmd, "date +%%s%%N > %s", b_start);
    crdt_proc h, a, b;
    start(&h, ARGS("run", "--fair", name, "--", "sh", "-c", hcmd));
    crdt_probe held = {.r = r, .name = name, .n = 1};
    cr_assert(crdt_wait_until(crdt_key_exists_is, &held, 10000), "H holds the lock");
    start(&a, ARGS("run", "--fair", "--wait", "10000", name, "--", "true"));
    crdt_probe q1 = {.r = r, .name = queue, .n = 1};
    cr_assert(crdt_wait_until(crdt_list_len_is, &q1, 10000), "A is queued");
    start(&b, ARGS("run", "--fair", "--wait", "30000", name, "--", "sh", "-c", bcmd));
    crdt_probe q2 = {.r = r, .name = queue, .n = 2};
    cr_assert(crdt_wait_until(crdt_list_len_is, &q2, 10000), "B is queued behind A");
    cr_assert_eq(kill(a.pid, SIGINT), 0);
    char *aerr = NULL;
    int arc = crdt_proc_finish(&a, 5000, NULL, &aerr);
    cr_expect_eq(arc, 128 + SIGINT, "A exited %d; stderr: %s", arc, aerr);
    free(aerr);
    cr_expect_eq(crdt_cmd_int(r, "LLEN %s", queue), 1, "A left the queue: only B waits");
    int fd = open(marker, O_WRONLY | O_CREAT, 0600);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(crdt_proc_finish(&h, 10000, NULL, NULL), 0);
    char *berr = NULL;
    cr_assert_eq(crdt_proc_finish(&b, 10000, NULL, &berr), 0, "B: %s", berr);
    free(berr);
    cr_assert(crdt_file_there(h_end) && crdt_file_there(b_start));
    long long gap_ms = (file_ns(b_start) - file_ns(h_end)) / 1000000;
    fprintf(stderr, "[cli_r47] B's CMD started %lld ms after H's CMD ended (H's release, B's "
            "wake-up, B's fork and exec included)\n", gap_ms);
    /* The 100 ms (memcheck runs the CLI under valgrind: CRDT_TIME_SCALE) */
    cr_expect(gap_ms >= 0 && gap_ms < crdt_scaled_ms(100), "B got the lock %lld ms after H's release",
              gap_ms);
    cr_expect_eq(crdt_exists(r, queue), 0);
    cr_expect_eq(crdt_exists(r, name), 0);
    redisFree(r);
}

/* A run waiting for a lock, a permit or a rate limiter's permit ends on SIGTERM and SIGHUP
 * too, with the signal's own status, and holds nothing. */
Test(cli_r47, a_waiting_run_of_any_kind_dies_of_sigint_sigterm_or_sighup_holding_nothing,
     .timeout = 60)
{
    redisContext *r = crdt_redis();
    const char *lock = crdt_key("held"), *sem = crdt_key("sem"), *rl = crdt_key("rl");
    char marker[256], hcmd[400];
    path(marker, sizeof marker, "done");
    unlink(marker);
    snprintf(hcmd, sizeof hcmd, "while [ ! -e %s ]; do sleep 0.01; done", marker);
    crdt_proc h;
    start(&h, ARGS("run", lock, "--", "sh", "-c", hcmd));
    crdt_probe held = {.r = r, .name = lock, .n = 1};
    cr_assert(crdt_wait_until(crdt_key_exists_is, &held, 10000));
    /* the semaphore's one permit and the rate limiter's one permit a minute are taken */
    cr_assert_eq(cli(NULL, NULL, ARGS("run", "--permits", "1", "--lease", "20000", sem, "--",
                                      "true")), 0);
    crdt_proc ph;
    start(&ph, ARGS("run", "--permits", "1", sem, "--", "sh", "-c", hcmd));
    cr_assert_eq(cli(NULL, NULL, ARGS("run", "--rate", "1/1m", rl, "--", "true")), 0);
    struct {
        const char *const *args;
        int sig;
    } cases[] = {{ARGS("run", lock, "--", "true"), SIGTERM},
                 {ARGS("run", "--spin", lock, "--", "true"), SIGHUP},
                 {ARGS("run", "--nonreentrant", lock, "--", "true"), SIGINT},
                 {ARGS("run", "--permits", "1", sem, "--", "true"), SIGTERM},
                 {ARGS("run", "--rate", "1/1m", rl, "--", "true"), SIGINT}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        crdt_proc w;
        crdt_probe sa = {.r = r, .n = scripts_run(r) + 2};
        start(&w, cases[i].args);
        /* It waits once it has made its attempts (a first try and, with a channel, the
         * one after subscribing; the spin lock's polls; the rate limiter's one try). */
        sa.n -= i == 4 ? 1 : 0;
        cr_assert(crdt_wait_until(scripts_reached, &sa, 10000), "case %zu waits", i);
        /* The count is the server's: a watchdog renewal (H's, PH's) can reach it before
         * this process has run at all. The signal waits for the handler that makes it end
         * the wait (one before that would end the process all the same, by default). */
        crdt_probe caught = {.data = &w, .n = cases[i].sig};
        cr_assert(crdt_wait_until(catches, &caught, 10000), "case %zu catches %d", i,
                  cases[i].sig);
        int64_t t0 = crdt_now_ms();
        cr_assert_eq(kill(w.pid, cases[i].sig), 0);
        fprintf(stderr, "[cli_r47] case %zu: signal %d sent to %d\n", i, cases[i].sig,
                (int)w.pid); /* names the case a timeout's report is about */
        char *err = NULL;
        int rc = crdt_proc_finish(&w, 5000, NULL, &err);
        cr_expect_eq(rc, 128 + cases[i].sig, "case %zu exited %d: %s", i, rc, err);
        cr_expect_lt(crdt_now_ms() - t0, crdt_scaled_ms(500), "case %zu", i);
        free(err);
    }
    cr_expect_eq(crdt_cmd_int(r, "HLEN %s", lock), 1, "only H holds the lock");
    int fd = open(marker, O_WRONLY | O_CREAT, 0600);
    close(fd);
    cr_assert_eq(crdt_proc_finish(&h, 10000, NULL, NULL), 0);
    cr_assert_eq(crdt_proc_finish(&ph, 10000, NULL, NULL), 0);
    redisFree(r);
}

/* A run started with SIGHUP and SIGINT ignored (nohup(1); a non-interactive shell's
 * background job) keeps them ignored: both, sent while it waits, change nothing; it takes
 * the lock when H lets go, and CMD starts with them ignored too. */
Test(cli_r47, a_run_started_with_sighup_and_sigint_ignored_keeps_them_ignored, .timeout = 60)
{
    redisContext *r = crdt_redis();
    const char *lock = crdt_key("nohup");
    char marker[256], hcmd[400], wcmd[1200];
    path(marker, sizeof marker, "nohup_release");
    unlink(marker);
    snprintf(hcmd, sizeof hcmd, "while [ ! -e %s ]; do sleep 0.01; done", marker);
    crdt_proc h, w;
    start(&h, ARGS("run", lock, "--", "sh", "-c", hcmd));
    crdt_probe held = {.r = r, .name = lock, .n = 1};
    cr_assert(crdt_wait_until(crdt_key_exists_is, &held, 10000), "H holds the lock");
    snprintf(wcmd, sizeof wcmd,
             "trap '' HUP INT; exec %s --url %s run %s -- grep ^SigIgn: /proc/self/status",
             CRD_CLI_PATH, test_url(), lock);
    crdt_probe sa = {.r = r, .n = scripts_run(r) + 2};
    crdt_proc_start_in(&w, ARGS("/bin/sh", "-c", wcmd), NULL, tmpdir());
    /* credisson runs (its SIGTERM handler is in place) and has made its two attempts */
    crdt_probe term = {.data = &w, .n = SIGTERM};
    cr_assert(crdt_wait_until(catches, &term, 10000), "W's handlers are installed");
    cr_assert(crdt_wait_until(scripts_reached, &sa, 10000), "W waits");
    uint64_t ign = crdt_proc_signals(w.pid, "SigIgn");
    cr_expect((ign >> (SIGHUP - 1) & 1) && (ign >> (SIGINT - 1) & 1),
              "W ignores SIGHUP and SIGINT: SigIgn %llx", (unsigned long long)ign);
    cr_assert_eq(kill(w.pid, SIGHUP), 0);
    cr_assert_eq(kill(w.pid, SIGINT), 0);
    int fd = open(marker, O_WRONLY | O_CREAT, 0600);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(crdt_proc_finish(&h, 10000, NULL, NULL), 0);
    char *out = NULL, *err = NULL;
    int rc = crdt_proc_finish(&w, 10000, &out, &err);
    cr_expect_eq(rc, 0, "W exited %d (a hang-up or Ctrl-C ended it): %s", rc, err);
    unsigned long long cmd_ign = 0;
    cr_expect_eq(sscanf(out, "SigIgn: %llx", &cmd_ign), 1, "CMD printed: %s", out);
    cr_expect((cmd_ign >> (SIGHUP - 1) & 1) && (cmd_ign >> (SIGINT - 1) & 1),
              "CMD starts with SIGHUP and SIGINT ignored: SigIgn %llx", cmd_ign);
    free(out);
    free(err);
    cr_expect_eq(crdt_exists(r, lock), 0);
    redisFree(r);
}

/* `run --rate 3/1s` in a shell loop of 7 commands: no second starts more than 3 of them,
 * and the loop takes at least two intervals. */
Test(cli_r47, run_rate_limits_a_shell_loop_of_commands, .timeout = 60)
{
    const char *name = crdt_key("loop");
    char log[256], script[1200];
    path(log, sizeof log, "starts");
    unlink(log);
    snprintf(script, sizeof script,
             "for i in 1 2 3 4 5 6 7; do %s --url %s run --rate 3/1s %s -- sh -c 'date +%%s%%N "
             ">> %s' || exit 9; done", CRD_CLI_PATH, test_url(), name, log);
    int64_t t0 = crdt_now_ms();
    char err[512];
    int rc = crdt_run_stderr(script, err, sizeof err);
    int64_t took = crdt_now_ms() - t0;
    cr_assert_eq(rc, 0, "the loop failed (%d): %s", rc, err);
    size_t len;
    char *s = crdt_slurp(log, &len);
    cr_assert_not_null(s);
    long long t[16];
    int n = 0;
    for (char *p = s; *p && n < 16; n++) {
        t[n] = atoll(p);
        p = strchr(p, '\n');
        if (p == NULL)
            break;
        p++;
    }
    free(s);
    cr_assert_eq(n, 7, "%d starts", n);
    /* The limiter grants permits 3 and 0 at least 1000 ms apart (the server's clock); a
     * start is stamped later, by `date` after the CLI's fork and two execs, and that lag
     * differs from run to run (up to ~100 ms on a loaded two-core machine: 944 ms was
     * seen). Without the limiter the seven starts come within ~50 ms of each other, so
     * 900 ms still tells a limiter from none. */
    for (int i = 3; i < n; i++)
        cr_expect_geq((t[i] - t[i - 3]) / 1000000, 900, "starts %d and %d %lld ms apart", i - 3,
                      i, (t[i] - t[i - 3]) / 1000000);
    fprintf(stderr, "[cli_r47] 7 runs with --rate 3/1s took %lld ms\n", (long long)took);
    cr_expect_geq(took, 1900);
}

Test(cli_r47, ratelimit_status_set_and_delete)
{
    const char *name = crdt_key("rlcli");
    char *out = NULL, *err = NULL;
    cr_assert_eq(cli(&out, NULL, ARGS("ratelimit", "status", name)), 1);
    cr_expect(strstr(out, "no rate set") != NULL, "%s", out);
    free(out);
    cr_assert_eq(cli(&out, NULL, ARGS("ratelimit", "set", "--per-client", "--keep-alive",
                                      "120000", name, "10/1m")), 0);
    free(out);
    cr_assert_eq(cli(&out, NULL, ARGS("ratelimit", "status", "--json", name)), 0);
    cr_expect(strstr(out, "\"rate\": 10") && strstr(out, "\"interval_ms\": 60000") &&
                  strstr(out, "\"mode\": \"per_client\"") && strstr(out, "\"keep_alive_ms\": 120000"),
              "%s", out);
    free(out);
    cr_assert_eq(cli(NULL, &err, ARGS("run", "--rate", "5/1s", name, "--", "true")), 64);
    cr_expect(strstr(err, "exists with 10 permits per 60000 ms per client") != NULL, "%s", err);
    free(err);
    cr_assert_eq(cli(NULL, &err, ARGS("ratelimit", "set", name, "0/1s")), 64);
    free(err);
    cr_assert_eq(cli(NULL, &err, ARGS("ratelimit", "set", "--keep-alive", "10", name, "1/1s")),
                 64, "a keep-alive below the interval");
    cr_expect(strstr(err, "keep_alive_ms") != NULL, "%s", err);
    free(err);
    cr_assert_eq(cli(&out, NULL, ARGS("ratelimit", "delete", name)), 0);
    cr_expect(strstr(out, "deleted") != NULL, "%s", out);
    free(out);
    cr_assert_eq(cli(NULL, &err, ARGS("ratelimit", "frob", name)), 64);
    free(err);
}
