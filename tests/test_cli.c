/*
 * test_cli.c -- the `credisson` command-line tool, run as a separate program.
 *
 * Each test spawns the built binary (CRD_CLI_PATH) with fork/execve against the
 * harness's redis-server, captures stdout and stderr in files of a per-test temporary
 * directory, and checks the exit status, the output and the state in Redis. Waiting is
 * always on a condition with a deadline (a file appears, a key or channel exists, a
 * process exits), never a fixed sleep.
 */
#include "harness.h"
#include "probes.h"
#include "procs.h"
#include "syncs.h"

#include <criterion/criterion.h>

#include <jansson.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CRD_CLI_PATH
#error "CRD_CLI_PATH must name the built credisson binary"
#endif
#ifndef CRD_CLI_COMPLETION
#error "CRD_CLI_COMPLETION must name cli/credisson.bash"
#endif

extern char **environ;

/* ---------------------------------------------------------------------------------- */
/* Spawning the CLI                                                                   */
/* ---------------------------------------------------------------------------------- */

/* A per-test scratch directory, removed by the fini hook. */
static char scratch[256];

static void scratch_init(void)
{
    snprintf(scratch, sizeof scratch, "/tmp/crdt-cli-XXXXXX");
    cr_assert_not_null(mkdtemp(scratch), "mkdtemp: %s", strerror(errno));
}

static void scratch_fini(void)
{
    if (scratch[0] == '\0')
        return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    int rc = system(cmd);
    (void)rc;
}

/* buf := the path of file inside the scratch directory. */
static const char *spath(char *buf, size_t cap, const char *file)
{
    int n = snprintf(buf, cap, "%s/%s", scratch, file);
    cr_assert(n > 0 && (size_t)n < cap, "path too long: %s/%s", scratch, file);
    return buf;
}

static const char *url_for_port(char *buf, size_t cap, int port)
{
    snprintf(buf, cap, "redis://127.0.0.1:%d", port);
    return buf;
}

/* The harness server's URL. */
static const char *test_url(void)
{
    static char url[64];
    return url_for_port(url, sizeof url, crdt_port());
}

/* Starts CRD_CLI_PATH with args (NULL-terminated, without argv[0]), its output in the
 * scratch directory. CREDISSON_URL is removed from the environment, then set to env_url
 * if that is not NULL. */
static void cli_start_env(crdt_proc *p, const char *env_url, const char *const *args)
{
    int n = 0;
    while (args[n] != NULL)
        n++;
    const char **argv = calloc((size_t)n + 2, sizeof *argv);
    cr_assert_not_null(argv);
    argv[0] = CRD_CLI_PATH;
    for (int i = 0; i < n; i++)
        argv[i + 1] = args[i];

    /* The environment is built before fork: the test process has threads. */
    size_t ne = 0;
    while (environ[ne] != NULL)
        ne++;
    char **envp = calloc(ne + 2, sizeof *envp);
    cr_assert_not_null(envp);
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], "CREDISSON_URL=", 14) != 0)
            envp[k++] = environ[i];
    char envbuf[300];
    if (env_url != NULL) {
        snprintf(envbuf, sizeof envbuf, "CREDISSON_URL=%s", env_url);
        envp[k++] = envbuf;
    }
    crdt_proc_start_in(p, argv, envp, scratch);
    free(argv);
    free(envp);
}

static void cli_start(crdt_proc *p, const char *const *args)
{
    cli_start_env(p, NULL, args);
}

/* Runs the CLI to completion (20 s deadline). */
static int cli(char **out, char **err, const char *const *args)
{
    crdt_proc p;
    cli_start(&p, args);
    return crdt_proc_finish(&p, 20000, out, err);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Number of '\n'-terminated lines in s. */
static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* text parsed as JSON (asserts, with the parser's words and the text; the caller
 * json_decref()s). */
static json_t *json_of(const char *text)
{
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    cr_assert_not_null(j, "not JSON (%s): %s", jerr.text, text);
    return j;
}

/* status --json of name, parsed (the caller json_decref()s). */
static json_t *status_json(const char *name)
{
    char *out = NULL, *err = NULL;
    cr_assert_eq(cli(&out, &err, ARGS("--url", test_url(), "status", "--json", name)), 0,
                 "stderr: %s", err);
    json_t *j = json_of(out);
    free(out);
    free(err);
    return j;
}

/* ---------------------------------------------------------------------------------- */
/* Waiting on conditions                                                              */
/* ---------------------------------------------------------------------------------- */

static long read_pid_file(const char *path)
{
    char *s = crdt_file_text(path);
    long pid = strtol(s, NULL, 10);
    free(s);
    return pid;
}

TestSuite(cli, .init = scratch_init, .fini = scratch_fini, .timeout = 90);

/* ---------------------------------------------------------------------------------- */
/* run: exit statuses                                                                 */
/* ---------------------------------------------------------------------------------- */

Test(cli, run_passes_the_commands_exit_status_through)
{
    const char *name = crdt_key("lock");
    redisContext *r = crdt_redis();

    cr_assert_eq(cli(NULL, NULL, ARGS("--url", test_url(), "run", name, "--", "true")), 0);
    cr_assert_eq(
        cli(NULL, NULL, ARGS("--url", test_url(), "run", name, "--", "sh", "-c", "exit 3")), 3);
    /* Died by a signal: 128 + signal. */
    cr_assert_eq(
        cli(NULL, NULL, ARGS("--url", test_url(), "run", name, "--", "sh", "-c", "kill -USR1 $$")),
        128 + SIGUSR1);
    /* CMD not found / not executable. */
    char *err = NULL;
    cr_assert_eq(
        cli(NULL, &err, ARGS("--url", test_url(), "run", name, "--", "/nonexistent/credisson-cmd")),
        127);
    cr_assert(strstr(err, "/nonexistent/credisson-cmd") != NULL, "stderr: %s", err);
    cr_assert_eq(count_lines(err), 1, "stderr: %s", err);
    free(err);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", test_url(), "run", name, "--", "/")), 126);

    /* Every run released the lock. */
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", name), 0);
    redisFree(r);
}

Test(cli, run_holds_the_lock_while_the_command_runs)
{
    const char *name = crdt_key("lock");
    char script[2048], seen[300];
    spath(seen, sizeof seen, "seen");
    /* CMD records what Redis says about the lock from inside the critical section. */
    snprintf(script, sizeof script, "%s -p %d HLEN '%s' > '%s'", crdt_redis_cli_path(),
             crdt_port(), name, seen);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", test_url(), "run", name, "--", "sh", "-c", script)),
                 0);
    char *s = crdt_file_text(seen);
    cr_assert_str_eq(s, "1\n");
    free(s);
}

Test(cli, run_takes_the_url_from_CREDISSON_URL)
{
    const char *name = crdt_key("lock");
    crdt_proc p;
    cli_start_env(&p, test_url(), ARGS("run", name, "--", "true"));
    cr_assert_eq(crdt_proc_finish(&p, 20000, NULL, NULL), 0);
    /* --url wins over the environment. */
    char bad[64];
    url_for_port(bad, sizeof bad, crdt_free_port());
    cli_start_env(&p, bad, ARGS("--url", test_url(), "run", name, "--", "true"));
    cr_assert_eq(crdt_proc_finish(&p, 20000, NULL, NULL), 0);
    cli_start_env(&p, bad, ARGS("run", name, "--", "true"));
    cr_assert_eq(crdt_proc_finish(&p, 20000, NULL, NULL), 69);
}

Test(cli, run_exits_75_when_a_foreign_owner_keeps_the_lock_past_wait)
{
    const char *name = crdt_key("lock");
    redisContext *r = crdt_redis();
    /* A Java-style holder: owner field of another client, count 1, 60 s lease. */
    freeReplyObject(crdt_cmd(r, "HSET %s 5bd1e0c2-0000-4000-8000-00000000abcd:1 1", name));
    freeReplyObject(crdt_cmd(r, "PEXPIRE %s 60000", name));

    char marker[300];
    spath(marker, sizeof marker, "ran");
    char *err = NULL;
    int64_t t0 = crdt_now_ms();
    int rc = cli(NULL, &err,
                 ARGS("--url", test_url(), "run", "--wait", "200", name, "--", "touch", marker));
    int64_t took = crdt_now_ms() - t0;
    cr_assert_eq(rc, 75, "stderr: %s", err);
    cr_assert_geq(took, 200);
    cr_assert_lt(took, 10000);
    cr_assert_eq(count_lines(err), 1, "stderr: %s", err);
    cr_assert(access(marker, F_OK) != 0, "CMD ran without the lock");
    free(err);

    /* --wait 0 tries once. */
    cr_assert_eq(cli(NULL, NULL,
                     ARGS("--url", test_url(), "run", "--wait", "0", name, "--", "touch", marker)),
                 75);
    cr_assert(access(marker, F_OK) != 0, "CMD ran without the lock");
    /* The foreign hold is untouched. */
    cr_assert_eq(crdt_cmd_int(r, "HLEN %s", name), 1);
    redisFree(r);
}

Test(cli, run_exits_75_when_a_library_holder_keeps_the_lock_past_wait)
{
    const char *name = crdt_key("lock");
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, name);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);

    cr_assert_eq(
        cli(NULL, NULL, ARGS("--url", test_url(), "run", "--wait", "200", name, "--", "true")), 75);

    /* Released: the CLI gets it. */
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_assert_eq(
        cli(NULL, NULL, ARGS("--url", test_url(), "run", "--wait", "2000", name, "--", "true")), 0);
    crd_lock_free(l);
    crd_client_free(c);
}

Test(cli, run_nonblock_conflict_exit_code_and_verbose_do_what_flock_users_expect)
{
    const char *name = crdt_key("lock");
    const char *u = test_url();
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, name);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    char marker[300];
    spath(marker, sizeof marker, "ran");
    char body[400];
    snprintf(body, sizeof body, "touch '%s'", marker);

    /* -n / --nonblock: one try, exit 75 at once; -E / --conflict-exit-code: another code. */
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", u, "run", "-n", name, "--", "sh", "-c", body)), 75);
    cr_assert_lt(crdt_now_ms() - t0, 2000);
    cr_assert_eq(
        cli(NULL, NULL, ARGS("--url", u, "run", "--nonblock", "-E", "3", name, "--", "true")), 3);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", u, "run", "-n", "-E7", name, "--", "true")), 7);
    cr_assert_eq(cli(NULL, NULL,
                     ARGS("--url", u, "run", "-n", "--conflict-exit-code=9", name, "--", "true")),
                 9);
    cr_assert_eq(cli(NULL, NULL,
                     ARGS("--url", u, "run", "--wait", "50", "--conflict-exit-code", "0", name,
                          "--", "true")),
                 0);
    cr_assert(access(marker, F_OK) != 0, "CMD ran without the lock");
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", u, "run", "-E", "256", name, "--", "true")), 64);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", u, "run", "-E", "x", name, "--", "true")), 64);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", u, "run", name, "-E")), 64);

    /* --verbose: how it got the lock, on stderr. */
    crdt_proc p;
    cli_start(&p, ARGS("--url", u, "run", "--verbose", "--wait", "10000", name, "--", "true"));
    char channel[512];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    crdt_probe ch = {.r = crdt_redis(), .name = channel};
    cr_assert(crdt_wait_until(crdt_channel_subscribed, &ch, 10000), "run never waited");
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    char *err = NULL;
    cr_assert_eq(crdt_proc_finish(&p, 10000, NULL, &err), 0, "stderr: %s", err);
    cr_assert(strstr(err, "credisson: run: lock '") && strstr(err, "acquired after waiting"),
              "stderr: %s", err);
    free(err);
    cr_assert_eq(cli(NULL, &err, ARGS("--url", u, "run", "--verbose", name, "--", "true")), 0);
    cr_assert(strstr(err, "acquired without waiting"), "stderr: %s", err);
    free(err);
    redisFree(ch.r);
    crd_lock_free(l);
    crd_client_free(c);
}

Test(cli, unreachable_redis_gives_69)
{
    const char *name = crdt_key("lock");
    char url[64];
    url_for_port(url, sizeof url, crdt_free_port());
    char *err = NULL;
    cr_assert_eq(cli(NULL, &err, ARGS("--url", url, "run", name, "--", "true")), 69);
    cr_assert_eq(count_lines(err), 1, "stderr: %s", err);
    free(err);
    cr_assert_eq(cli(NULL, &err, ARGS("--url", url, "status", name)), 69);
    cr_assert_eq(count_lines(err), 1, "stderr: %s", err);
    free(err);
    cr_assert_eq(cli(NULL, &err, ARGS("--url", url, "unlock", "--force", name)), 69);
    cr_assert_eq(count_lines(err), 1, "stderr: %s", err);
    free(err);
    cr_assert_eq(cli(NULL, &err, ARGS("--url", url, "status", "--json", name)), 69);
    cr_assert_eq(count_lines(err), 1, "stderr: %s", err);
    free(err);
    cr_assert_eq(cli(NULL, &err, ARGS("--url", url, "watch", "--timeout", "5000", name)), 69);
    cr_assert_eq(count_lines(err), 1, "stderr: %s", err);
    free(err);
}

Test(cli, a_wrong_password_gives_69)
{
    crdt_server srv;
    crdt_server_start(&srv, false, (const char *const[]){"--requirepass", "s3cret", NULL}, NULL,
                      "s3cret");
    const char *name = crdt_key("lock");
    char wrong[128], none[64], right[128];
    snprintf(wrong, sizeof wrong, "redis://:nope@127.0.0.1:%d", srv.port);
    snprintf(none, sizeof none, "redis://127.0.0.1:%d", srv.port);
    snprintf(right, sizeof right, "redis://:s3cret@127.0.0.1:%d", srv.port);

    char *err = NULL;
    cr_assert_eq(cli(NULL, &err, ARGS("--url", wrong, "run", name, "--", "true")), 69);
    cr_assert_eq(count_lines(err), 1, "stderr: %s", err);
    cr_assert(strstr(err, "nope") == NULL, "the password leaked into the message: %s", err);
    free(err);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", wrong, "status", name)), 69);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", wrong, "unlock", "--force", name)), 69);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", none, "run", name, "--", "true")), 69);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", none, "status", name)), 69);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", wrong, "watch", "--timeout", "100", name)), 69);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", wrong, "status", "--json", name)), 69);

    /* The right password works for all three. */
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", right, "run", name, "--", "true")), 0);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", right, "status", name)), 0);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", right, "unlock", "--force", name)), 0);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", right, "watch", "--timeout", "100", name)), 0);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", right, "status", "--json", name)), 0);
    crdt_server_stop(&srv);
}

Test(cli, unix_socket_and_database_urls_work)
{
    crdt_server srv;
    crdt_server_start(&srv, true, NULL, NULL, NULL);
    const char *name = crdt_key("lock");
    char url[400], seen[300], script[2048];
    snprintf(url, sizeof url, "unix://%s?db=3", srv.unix_path);
    spath(seen, sizeof seen, "seen");
    /* The lock lives in database 3 while CMD runs; status reads it there too. */
    snprintf(script, sizeof script,
             "%s -s '%s' -n 3 EXISTS '%s' > '%s'; '%s' --url '%s' status '%s' >> '%s'",
             crdt_redis_cli_path(), srv.unix_path, name, seen, CRD_CLI_PATH, url, name, seen);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", url, "run", name, "--", "sh", "-c", script)), 0);
    char *s = crdt_file_text(seen);
    cr_assert(strncmp(s, "1\n", 2) == 0, "seen: %s", s);
    cr_assert(strstr(s, "kind: rlock\n") != NULL, "seen: %s", s);
    free(s);
    crdt_server_stop(&srv);
}

Test(cli, usage_errors_give_64_and_one_line)
{
    const char *name = crdt_key("lock");
    const char *u = test_url();
    const char *const *cases[] = {
        ARGS("--url", u),
        ARGS("--url", u, "frobnicate", name),
        ARGS("--url", u, "--bogus", "run", name, "--", "true"),
        ARGS("--url", u, "run"),
        ARGS("--url", u, "run", "--", "true"),
        ARGS("--url", u, "run", name),
        ARGS("--url", u, "run", name, "true"),
        ARGS("--url", u, "run", name, "--"),
        ARGS("--url", u, "run", "--wait", "abc", name, "--", "true"),
        ARGS("--url", u, "run", "--wait", "-5", name, "--", "true"),
        ARGS("--url", u, "run", "--wait", "", name, "--", "true"),
        ARGS("--url", u, "run", "--wait", "1.5", name, "--", "true"),
        ARGS("--url", u, "run", "--lease", "-1", name, "--", "true"),
        ARGS("--url", u, "run", "--lease", "x", name, "--", "true"),
        ARGS("--url", u, "run", "--frob", name, "--", "true"),
        ARGS("--url", u, "run", name, "--wait"),
        ARGS("--url", u, "--watchdog-ms", "-600", "run", name, "--", "true"),
        ARGS("--url", u, "--watchdog-ms", "soon", "run", name, "--", "true"),
        ARGS("--url", u, "status"),
        ARGS("--url", u, "status", "--yaml", name),
        ARGS("--url", u, "status", name, "extra"),
        ARGS("--url", u, "unlock", name),
        ARGS("--url", u, "unlock", "--force"),
        ARGS("--url", u, "unlock", "--force", "--all", name),
        ARGS("--url", "http://127.0.0.1:1", "status", name),
        ARGS("--url", "http://127.0.0.1:1", "run", name, "--", "true"),
        ARGS("--url", "redis://127.0.0.1:notaport", "status", name),
        ARGS("--url", u, "run", "--on-lost=maybe", name, "--", "true"),
        ARGS("--url", u, "run", "--on-lost", "", name, "--", "true"),
        ARGS("--url", u, "run", "--grace", "soon", name, "--", "true"),
        ARGS("--url", u, "run", "--grace=-1", name, "--", "true"),
        ARGS("--url", u, "watch"),
        ARGS("--url", u, "watch", "--count", "0", name),
        ARGS("--url", u, "watch", "--count", "x", name),
        ARGS("--url", u, "watch", "--count"),
        ARGS("--url", u, "watch", "--timeout", "-1", name),
        ARGS("--url", u, "watch", "--interval", "5", name),
        ARGS("--url", u, "watch", "--follow", name),
        ARGS("--url", u, "watch", name, "extra"),
        ARGS("--url", u, "watch", ""),
        ARGS("--url", "http://127.0.0.1:1", "watch", name),
        ARGS("--url", u, "list", "--count", "0"),
        ARGS("--url", u, "list", "--timeout", "x"),
        ARGS("--url", u, "list", "a*", "b*"),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL, *err = NULL;
        int rc = cli(&out, &err, cases[i]);
        cr_expect_eq(rc, 64, "case %zu (%s ...): exit %d, stderr: %s", i,
                     cases[i][2] ? cases[i][2] : "", rc, err);
        cr_expect_eq(count_lines(err), 1, "case %zu: stderr is not one line: %s", i, err);
        cr_expect_str_empty(out, "case %zu: stdout: %s", i, out);
        free(out);
        free(err);
    }
    redisContext *r = crdt_redis();
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", name), 0, "a usage error touched the lock");
    redisFree(r);
}

/* Whether s has a run of 40 hexadecimal digits (a script SHA1). */
static bool has_sha1(const char *s)
{
    int run = 0;
    for (; *s; s++) {
        bool hex = (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f');
        run = hex ? run + 1 : 0;
        if (run >= 40)
            return true;
    }
    return false;
}

/* err is one line "credisson: CMD: ..." naming no internal identifier. */
static void expect_error_line(const char *err, const char *cmd, const char *what)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "credisson: %s: ", cmd);
    cr_expect_eq(count_lines(err), 1, "%s: not one line: %s", what, err);
    cr_expect(strncmp(err, prefix, strlen(prefix)) == 0, "%s: not '%s...': %s", what, prefix, err);
    const char *first = strstr(err, "cannot connect");
    cr_expect(first == NULL || strstr(first + 1, "cannot connect") == NULL,
              "%s: 'cannot connect' twice: %s", what, err);
    cr_expect(!has_sha1(err), "%s: a script SHA in: %s", what, err);
    cr_expect(strstr(err, "@user_script") == NULL, "%s: a script position in: %s", what, err);
}

Test(cli, every_error_line_has_one_format_and_keeps_the_servers_words)
{
    const char *name = crdt_key("lock");
    char url[64];
    url_for_port(url, sizeof url, crdt_free_port());
    const char *cmds[] = {"run", "status", "unlock", "watch", "list"};
    const char *const *unreachable[] = {
        ARGS("--url", url, "run", name, "--", "true"), ARGS("--url", url, "status", name),
        ARGS("--url", url, "unlock", "--force", name),
        ARGS("--url", url, "watch", "--timeout", "100", name), ARGS("--url", url, "list")};
    const char *const *usage[] = {ARGS("--url", url, "run", name), ARGS("--url", url, "status"),
                                  ARGS("--url", url, "unlock", name),
                                  ARGS("--url", url, "watch", "--count", "0", name),
                                  ARGS("--url", url, "list", "--frob")};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char *err = NULL;
        cr_expect_eq(cli(NULL, &err, unreachable[i]), 69, "%s: %s", cmds[i], err);
        expect_error_line(err, cmds[i], cmds[i]);
        cr_expect(strstr(err, "Connection refused") != NULL, "%s: %s", cmds[i], err);
        free(err);
        cr_expect_eq(cli(NULL, &err, usage[i]), 64, "%s: %s", cmds[i], err);
        expect_error_line(err, cmds[i], cmds[i]);
        free(err);
    }

    /* A key that is not a lock: the server's words, not the script's SHA or line. The
     * library drops the script position from its detail; until it does, this fails. */
    redisContext *r = crdt_redis();
    freeReplyObject(crdt_cmd(r, "SET %s not-a-lock", name));
    char *err = NULL;
    cr_assert_eq(cli(NULL, &err, ARGS("--url", test_url(), "run", name, "--", "true")), 69);
    expect_error_line(err, "run", "WRONGTYPE");
    cr_expect(strstr(err, "WRONGTYPE Operation against a key holding the wrong kind of value"),
              "the server's words are gone: %s", err);
    free(err);
    freeReplyObject(crdt_cmd(r, "DEL %s", name));
    redisFree(r);
}

Test(cli, help_is_on_every_command_and_lists_exit_codes)
{
    const char *const *cases[] = {ARGS("--help"),           ARGS("-h"),
                                  ARGS("run", "--help"),    ARGS("status", "--help"),
                                  ARGS("unlock", "--help"), ARGS("watch", "--help"),
                                  ARGS("list", "--help")};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL, *err = NULL;
        /* --help must not need a server: no --url, and CREDISSON_URL is unset. */
        cr_assert_eq(cli(&out, &err, cases[i]), 0, "case %zu", i);
        cr_assert(strstr(out, "usage: credisson") != NULL, "case %zu: %s", i, out);
        cr_assert(strstr(out, "64") != NULL && strstr(out, "69") != NULL, "case %zu: %s", i, out);
        cr_assert_str_empty(err);
        free(out);
        free(err);
    }
    char *out = NULL;
    cr_assert_eq(cli(&out, NULL, ARGS("run", "--help")), 0);
    cr_assert(strstr(out, "70") && strstr(out, "75") && strstr(out, "--wait") &&
                  strstr(out, "--lease") && strstr(out, "--on-lost=term|kill|ignore") &&
                  strstr(out, "--grace"),
              "%s", out);
    free(out);
    cr_assert_eq(cli(&out, NULL, ARGS("--help")), 0);
    cr_assert(strstr(out, "watch") && strstr(out, "CREDISSON_URL"), "%s", out);
    free(out);
    cr_assert_eq(cli(&out, NULL, ARGS("watch", "--help")), 0);
    cr_assert(strstr(out, "--count") && strstr(out, "--timeout") && strstr(out, "release") &&
                  strstr(out, "\"event\""),
              "%s", out);
    free(out);
    cr_assert_eq(cli(&out, NULL, ARGS("status", "--help")), 0);
    cr_assert(strstr(out, "\"holders\"") && strstr(out, "\"ttl_ms\"") && strstr(out, "\"kind\"") &&
                  strstr(out, "\"who\"") && strstr(out, "\"waiters\"") &&
                  strstr(out, "\"held_ms\""),
              "%s", out);
    free(out);
    cr_assert_eq(cli(&out, NULL, ARGS("--version")), 0);
    cr_assert(strstr(out, CRD_VERSION_STRING) != NULL, "%s", out);
    free(out);
}

/* ---------------------------------------------------------------------------------- */
/* run: losing the lock, signals                                                      */
/* ---------------------------------------------------------------------------------- */

/* Starts `credisson run` around a shell CMD that writes its pid to a file and then runs
 * body; waits until CMD is running. Returns CMD's pid. */
static long start_script(crdt_proc *p, const char *name, const char *const *opts_before_run,
                         const char *const *run_opts, const char *body)
{
    char pidfile[300], script[2400];
    spath(pidfile, sizeof pidfile, "cmd.pid");
    unlink(pidfile);
    snprintf(script, sizeof script, "echo $$ > '%s.tmp' && mv '%s.tmp' '%s' && %s", pidfile,
             pidfile, pidfile, body);
    const char *args[32];
    int n = 0;
    args[n++] = "--url";
    args[n++] = test_url();
    for (int i = 0; opts_before_run && opts_before_run[i]; i++)
        args[n++] = opts_before_run[i];
    args[n++] = "run";
    for (int i = 0; run_opts && run_opts[i]; i++)
        args[n++] = run_opts[i];
    args[n++] = name;
    args[n++] = "--";
    args[n++] = "sh";
    args[n++] = "-c";
    args[n++] = script;
    args[n] = NULL;
    cli_start(p, args);
    cr_assert(crdt_wait_until(crdt_file_filled, pidfile, 10000), "CMD did not start");
    long pid = read_pid_file(pidfile);
    cr_assert_gt(pid, 1);
    return pid;
}

/* Starts `credisson run` around a CMD that writes its pid to a file and then sleeps. */
static long start_sleeper(crdt_proc *p, const char *name, const char *const *opts_before_run,
                          const char *const *run_opts)
{
    return start_script(p, name, opts_before_run, run_opts, "exec sleep 30");
}

static bool process_gone(void *arg)
{
    long pid = *(long *)arg;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

Test(cli, run_exits_70_and_stops_cmd_when_the_lock_is_force_unlocked)
{
    const char *name = crdt_key("lock");
    crdt_proc p;
    long cmd_pid = start_sleeper(&p, name, ARGS("--watchdog-ms", "600"), NULL);

    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, name);
    bool was_locked = false;
    cr_assert_eq(crd_lock_force_unlock(l, &was_locked), CRD_OK);
    cr_assert(was_locked);
    int64_t t0 = crdt_now_ms();

    char *err = NULL;
    int rc = crdt_proc_finish(&p, 5000, NULL, &err);
    cr_assert_eq(rc, 70, "stderr: %s", err);
    cr_assert_lt(crdt_now_ms() - t0, 3000);
    cr_assert(strstr(err, "lost") != NULL, "stderr: %s", err);
    free(err);
    /* CMD (sleep 30) was killed and reaped, not left running. */
    cr_assert(crdt_wait_until(process_gone, &cmd_pid, 2000), "CMD %ld still runs", cmd_pid);
    crd_lock_free(l);
    crd_client_free(c);
}

Test(cli, run_notices_a_force_unlock_at_once_not_at_the_next_renewal)
{
    /* The default watchdog: renewals every 10 s. run watches the held lock's channel, so
     * the force-unlock's message stops CMD within milliseconds. */
    const char *name = crdt_key("lock");
    char channel[400];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    crdt_proc p;
    long cmd_pid = start_sleeper(&p, name, NULL, NULL);
    redisContext *r = crdt_redis();
    cr_assert(crdt_await_subscribed(r, channel, 5000), "run does not watch its lock");
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, name);
    bool was_locked = false;
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_force_unlock(l, &was_locked), CRD_OK);
    cr_assert(was_locked);
    char *err = NULL;
    int rc = crdt_proc_finish(&p, 8000, NULL, &err);
    int64_t took = crdt_now_ms() - t0;
    cr_assert_eq(rc, 70, "stderr: %s", err);
    fprintf(stderr, "[cli] run stopped CMD %" PRId64 " ms after the force-unlock\n", took);
    cr_assert_lt(took, 2000, "run noticed the loss after %" PRId64 " ms", took);
    free(err);
    cr_assert(crdt_wait_until(process_gone, &cmd_pid, 2000), "CMD %ld still runs", cmd_pid);
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
}

Test(cli, run_exits_70_when_the_lock_is_force_unlocked_by_the_cli)
{
    const char *name = crdt_key("lock");
    crdt_proc p;
    long cmd_pid = start_sleeper(&p, name, ARGS("--watchdog-ms", "600"), NULL);
    char *out = NULL;
    cr_assert_eq(cli(&out, NULL, ARGS("--url", test_url(), "unlock", "--force", name)), 0);
    cr_assert(strstr(out, "unlocked") != NULL, "%s", out);
    free(out);
    cr_assert_eq(crdt_proc_finish(&p, 5000, NULL, NULL), 70);
    cr_assert(crdt_wait_until(process_gone, &cmd_pid, 2000), "CMD %ld still runs", cmd_pid);
}

Test(cli, run_exits_70_when_a_fixed_lease_runs_out_before_cmd_exits)
{
    const char *name = crdt_key("lock");
    crdt_proc p;
    long cmd_pid = start_sleeper(&p, name, NULL, ARGS("--lease", "400"));
    int rc = crdt_proc_finish(&p, 5000, NULL, NULL);
    cr_assert_eq(rc, 70);
    cr_assert_lt(crdt_now_ms() - p.started_ms, 3000);
    cr_assert(crdt_wait_until(process_gone, &cmd_pid, 2000), "CMD %ld still runs", cmd_pid);

    /* A command that finishes inside its lease is fine. */
    cr_assert_eq(
        cli(NULL, NULL, ARGS("--url", test_url(), "run", "--lease", "5000", name, "--", "true")),
        0);
}

Test(cli, run_forwards_sigterm_to_cmd_and_releases_the_lock)
{
    const char *name = crdt_key("lock");
    redisContext *r = crdt_redis();
    crdt_proc p;
    long cmd_pid = start_sleeper(&p, name, NULL, NULL);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", name), 1);
    cr_assert_eq(kill(p.pid, SIGTERM), 0);
    cr_assert_eq(crdt_proc_finish(&p, 5000, NULL, NULL), 128 + SIGTERM);
    cr_assert(crdt_wait_until(process_gone, &cmd_pid, 2000));
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", name), 0, "the lock was not released");
    redisFree(r);
}

Test(cli, run_forwards_sigint_and_sighup_to_cmd)
{
    const char *name = crdt_key("lock");
    crdt_proc p;
    start_sleeper(&p, name, NULL, NULL);
    cr_assert_eq(kill(p.pid, SIGINT), 0);
    cr_assert_eq(crdt_proc_finish(&p, 5000, NULL, NULL), 128 + SIGINT);
    start_sleeper(&p, name, NULL, NULL);
    cr_assert_eq(kill(p.pid, SIGHUP), 0);
    cr_assert_eq(crdt_proc_finish(&p, 5000, NULL, NULL), 128 + SIGHUP);
}

/* ---------------------------------------------------------------------------------- */
/* status                                                                             */
/* ---------------------------------------------------------------------------------- */

Test(cli, status_describes_a_held_lock)
{
    const char *name = crdt_key("lock");
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, name);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    char owner[128];
    snprintf(owner, sizeof owner, "%s:%llu", crd_client_id(c),
             (unsigned long long)crd_owner_current());

    char *out = NULL, *err = NULL;
    cr_assert_eq(cli(&out, &err, ARGS("--url", test_url(), "status", name)), 0, "stderr: %s", err);
    char line[512];
    snprintf(line, sizeof line, "name: %s\n", name);
    cr_assert(strstr(out, line) != NULL, "%s", out);
    cr_assert(strstr(out, "kind: rlock\n") != NULL, "%s", out);
    cr_assert(strstr(out, "holders: 1\n") != NULL, "%s", out);
    snprintf(line, sizeof line, "holder: %s count=2\n", owner);
    cr_assert(strstr(out, line) != NULL, "%s", out);
    const char *ttl = strstr(out, "ttl_ms: ");
    cr_assert_not_null(ttl, "%s", out);
    long long ttl_ms = strtoll(ttl + 8, NULL, 10);
    cr_assert(ttl_ms > 0 && ttl_ms <= 30000, "ttl_ms %lld", ttl_ms);
    free(out);
    free(err);

    json_t *j = status_json(name);
    cr_assert_str_eq(json_string_value(json_object_get(j, "name")), name);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "rlock");
    cr_assert_str_eq(json_string_value(json_object_get(j, "type")), "hash");
    json_t *jt = json_object_get(j, "ttl_ms");
    cr_assert(json_is_integer(jt));
    cr_assert(json_integer_value(jt) > 0 && json_integer_value(jt) <= 30000);
    json_t *hs = json_object_get(j, "holders");
    cr_assert(json_is_array(hs));
    cr_assert_eq(json_array_size(hs), 1);
    json_t *h = json_array_get(hs, 0);
    cr_assert_str_eq(json_string_value(json_object_get(h, "owner")), owner);
    cr_assert_eq(json_integer_value(json_object_get(h, "count")), 2);
    json_decref(j);

    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    crd_lock_free(l);
    crd_client_free(c);
}

Test(cli, status_tells_none_rwlock_and_other_kinds_apart)
{
    redisContext *r = crdt_redis();
    const char *absent = crdt_key("absent");
    json_t *j = status_json(absent);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "none");
    cr_assert_eq(json_integer_value(json_object_get(j, "ttl_ms")), -2);
    cr_assert_eq(json_array_size(json_object_get(j, "holders")), 0);
    json_decref(j);
    char *out = NULL;
    cr_assert_eq(cli(&out, NULL, ARGS("--url", test_url(), "status", absent)), 0);
    cr_assert(strstr(out, "kind: none\n") && strstr(out, "ttl_ms: -2\n") &&
                  strstr(out, "holders: 0\n"),
              "%s", out);
    free(out);

    const char *rw = crdt_key("rw");
    freeReplyObject(crdt_cmd(r, "HSET %s mode read 11111111-2222-4333-8444-555555555555:7 2", rw));
    freeReplyObject(crdt_cmd(r, "PEXPIRE %s 60000", rw));
    j = status_json(rw);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "rwlock");
    cr_assert_str_eq(json_string_value(json_object_get(j, "mode")), "read");
    json_t *hs = json_object_get(j, "holders");
    cr_assert_eq(json_array_size(hs), 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(hs, 0), "owner")),
                     "11111111-2222-4333-8444-555555555555:7");
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(hs, 0), "count")), 2);
    json_decref(j);

    const char *str = crdt_key("str");
    freeReplyObject(crdt_cmd(r, "SET %s hello", str));
    j = status_json(str);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "other");
    cr_assert_str_eq(json_string_value(json_object_get(j, "type")), "string");
    cr_assert_eq(json_integer_value(json_object_get(j, "ttl_ms")), -1);
    json_decref(j);
    cr_assert_eq(cli(&out, NULL, ARGS("--url", test_url(), "status", str)), 0);
    cr_assert(strstr(out, "kind: other\n") && strstr(out, "type: string\n"), "%s", out);
    free(out);

    /* A hash that is not a lock (values are not hold counts). */
    const char *h = crdt_key("hash");
    freeReplyObject(crdt_cmd(r, "HSET %s colour blue", h));
    j = status_json(h);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "other");
    cr_assert_str_eq(json_string_value(json_object_get(j, "type")), "hash");
    cr_assert_eq(json_array_size(json_object_get(j, "holders")), 0);
    json_decref(j);

    /* A name that needs JSON escaping comes back intact. */
    char odd[256];
    snprintf(odd, sizeof odd, "%s \"quoted\" \\ tab\t%%s", crdt_key("odd"));
    j = status_json(odd);
    cr_assert_str_eq(json_string_value(json_object_get(j, "name")), odd);
    json_decref(j);
    snprintf(odd, sizeof odd, "%s:\xe9\x94\x81:\xe4\xb8\xad\xe6\x96\x87",
             crdt_key("utf8")); /* 锁:中文 */
    j = status_json(odd);
    cr_assert_str_eq(json_string_value(json_object_get(j, "name")), odd);
    json_decref(j);
    /* A name that is not UTF-8 still gives valid JSON (the bad byte as U+FFFD). */
    snprintf(odd, sizeof odd, "%s:\xff", crdt_key("binary"));
    j = status_json(odd);
    const char *got = json_string_value(json_object_get(j, "name"));
    cr_assert_not_null(got);
    cr_assert(strstr(got, "\xef\xbf\xbd") != NULL, "name: %s", got);
    json_decref(j);
    redisFree(r);
}

/* ---------------------------------------------------------------------------------- */
/* unlock --force                                                                     */
/* ---------------------------------------------------------------------------------- */

Test(cli, unlock_force_deletes_a_held_lock_and_wakes_a_waiter)
{
    const char *name = crdt_key("lock");
    redisContext *r = crdt_redis();
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, name);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK); /* 30 s, renewed */

    /* A waiter: a second `credisson run` on the same name. */
    char marker[300];
    spath(marker, sizeof marker, "ran");
    crdt_proc waiter;
    cli_start(&waiter, ARGS("--url", test_url(), "run", name, "--", "sh", "-c", "echo ran > \"$0\"",
                            marker));
    char channel[512];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    crdt_probe ch = {.r = r, .name = channel};
    cr_assert(crdt_wait_until(crdt_channel_subscribed, &ch, 10000), "the waiter never subscribed");
    cr_assert(access(marker, F_OK) != 0, "CMD ran while the lock was held");

    char *out = NULL;
    cr_assert_eq(cli(&out, NULL, ARGS("--url", test_url(), "unlock", "--force", name)), 0);
    cr_assert(strstr(out, "unlocked") != NULL, "%s", out);
    free(out);
    int64_t t0 = crdt_now_ms();
    /* Woken by the publish, far sooner than the holder's 30 s lease. */
    cr_assert_eq(crdt_proc_finish(&waiter, 10000, NULL, NULL), 0);
    cr_assert_lt(crdt_now_ms() - t0, 3000);
    cr_assert(crdt_file_filled(marker));

    /* Nothing left to delete. */
    cr_assert_eq(cli(&out, NULL, ARGS("--url", test_url(), "unlock", "--force", name)), 0);
    cr_assert(strstr(out, "not locked") != NULL, "%s", out);
    free(out);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", name), 0);

    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
}

/* ---------------------------------------------------------------------------------- */
/* Mutual exclusion between processes                                                 */
/* ---------------------------------------------------------------------------------- */

Test(cli, two_runs_on_one_name_never_overlap)
{
    const char *name = crdt_key("lock");
    char dir[300];
    spath(dir, sizeof dir, "x");
    cr_assert_eq(mkdir(dir, 0700), 0);
    char counter[400];
    snprintf(counter, sizeof counter, "%s/counter", dir);
    FILE *f = fopen(counter, "w");
    cr_assert_not_null(f);
    fputs("0\n", f);
    fclose(f);

    /* The critical section: an overlap detector (mkdir is atomic) around a slow
     * read-modify-write of a file. */
    const char *body = "d=$0; mkdir \"$d/inside\" 2>/dev/null || echo overlap >> \"$d/overlaps\"; "
                       "n=$(cat \"$d/counter\"); sleep 0.01; echo $((n + 1)) > \"$d/counter\"; "
                       "rmdir \"$d/inside\"";
    /* Each loop runs `credisson run` 15 times. */
    const char *loop =
        "i=0; while [ $i -lt 15 ]; do "
        "\"$0\" --url \"$1\" run \"$2\" -- sh -c \"$3\" \"$4\" || exit 1; i=$((i + 1)); done";
    pid_t loops[2];
    for (int k = 0; k < 2; k++) {
        fflush(NULL);
        loops[k] = fork();
        cr_assert(loops[k] >= 0);
        if (loops[k] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            execlp("sh", "sh", "-c", loop, CRD_CLI_PATH, test_url(), name, body, dir, (char *)NULL);
            _exit(99);
        }
    }
    for (int k = 0; k < 2; k++)
        cr_assert_eq(crdt_wait_child(loops[k], 60000), 0, "loop %d failed", k);

    char *n = crdt_file_text(counter);
    cr_assert_str_eq(n, "30\n");
    free(n);
    char overlaps[400];
    snprintf(overlaps, sizeof overlaps, "%s/overlaps", dir);
    cr_assert(access(overlaps, F_OK) != 0, "two holders overlapped");
}

/* ---------------------------------------------------------------------------------- */
/* run --on-lost                                                                      */
/* ---------------------------------------------------------------------------------- */

/* Force-unlocks name from a library client of its own (the CLI then loses its hold). */
static void force_unlock(const char *name)
{
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, name);
    bool was_locked = false;
    cr_assert_eq(crd_lock_force_unlock(l, &was_locked), CRD_OK);
    cr_assert(was_locked, "the CLI did not hold %s", name);
    crd_lock_free(l);
    crd_client_free(c);
}

/* Run, under a 600 ms watchdog and run_opts, a CMD that notes SIGTERM in marker (the
 * scratch file "got-term") and carries on: only SIGKILL ends it. Then force-unlock name
 * and wait for the CLI, which must exit 70 (lost); *t0 is when the lock was lost, *err
 * the CLI's stderr (freed by the caller). Returns CMD's pid. */

static long run_term_noter_until_lost(const char *name, const char *const *run_opts,
                                      char *marker, size_t cap, int64_t *t0, char **err)
{
    char body[1024], ready[300];
    spath(marker, cap, "got-term");
    spath(ready, sizeof ready, "term-trapped");
    /* The loss comes only once CMD's trap is set: a SIGTERM before it would end the shell
     * at once (seen once under load: "SIGKILL came before the grace ran out (2 ms)"). */
    snprintf(body, sizeof body, "trap 'echo term >> %s' TERM; : > %s; while :; do sleep 0.05; done",
             marker, ready);
    crdt_proc p;
    long cmd_pid = start_script(&p, name, ARGS("--watchdog-ms", "600"), run_opts, body);
    cr_assert(crdt_wait_until(crdt_file_there, ready, 5000), "CMD never set its trap");
    /* Just before the unlock: the grace cannot start earlier. Taken after it, t0 was late
     * by the unlocking client's free, while run had heard of the loss 2 ms after it
     * (399 ms measured against a 400 ms grace). */
    *t0 = crdt_now_ms();
    force_unlock(name);
    *err = NULL;
    cr_assert_eq(crdt_proc_finish(&p, 5000, NULL, err), 70, "stderr: %s", *err);
    return cmd_pid;
}

Test(cli, run_on_lost_term_sends_sigterm_then_sigkill_after_the_grace)
{
    const char *name = crdt_key("lock");
    char marker[300];
    int64_t t0;
    char *err;
    long cmd_pid = run_term_noter_until_lost(name, ARGS("--on-lost=term", "--grace", "400"),
                                             marker, sizeof marker, &t0, &err);
    int64_t took = crdt_now_ms() - t0;
    cr_assert_geq(took, 400, "SIGKILL came before the grace ran out (%lld ms)", (long long)took);
    cr_assert_lt(took, 3000);
    cr_assert(strstr(err, "SIGTERM") != NULL, "stderr: %s", err);
    free(err);
    cr_assert(crdt_wait_until(process_gone, &cmd_pid, 2000), "CMD %ld still runs", cmd_pid);
    char *m = crdt_file_text(marker);
    cr_assert(strstr(m, "term") != NULL, "CMD never got SIGTERM");
    free(m);

    /* The default is term too: a CMD that exits on SIGTERM ends long before the grace. */
    crdt_proc q;
    cmd_pid = start_sleeper(&q, name, ARGS("--watchdog-ms", "600"), NULL);
    force_unlock(name);
    t0 = crdt_now_ms();
    cr_assert_eq(crdt_proc_finish(&q, 5000, NULL, NULL), 70);
    cr_assert_lt(crdt_now_ms() - t0, 3000);
    cr_assert(crdt_wait_until(process_gone, &cmd_pid, 2000), "CMD %ld still runs", cmd_pid);
}

Test(cli, run_on_lost_kill_sends_sigkill_at_once)
{
    const char *name = crdt_key("lock");
    char marker[300];
    int64_t t0;
    char *err;
    long cmd_pid = run_term_noter_until_lost(name, ARGS("--on-lost", "kill", "--grace", "20000"),
                                             marker, sizeof marker, &t0, &err);
    cr_assert_lt(crdt_now_ms() - t0, 2000);
    cr_assert(strstr(err, "SIGKILL") != NULL, "stderr: %s", err);
    free(err);
    cr_assert(crdt_wait_until(process_gone, &cmd_pid, 2000), "CMD %ld still runs", cmd_pid);
    cr_assert(access(marker, F_OK) != 0, "CMD was sent SIGTERM");
}

Test(cli, run_on_lost_ignore_lets_cmd_finish_and_still_exits_70)
{
    const char *name = crdt_key("lock");
    char go[300], done[300], body[1024];
    spath(go, sizeof go, "go");
    spath(done, sizeof done, "done");
    snprintf(body, sizeof body, "while [ ! -e %s ]; do sleep 0.02; done; echo done > %s", go,
             done);
    crdt_proc p;
    long cmd_pid = start_script(&p, name, ARGS("--watchdog-ms", "600"),
                                ARGS("--on-lost=ignore"), body);
    force_unlock(name);
    /* The CLI says it lost the lock, and CMD keeps running. */
    cr_assert(crdt_wait_until(crdt_file_filled, p.err, 5000), "no word about the lost lock");
    cr_assert_eq(kill((pid_t)cmd_pid, 0), 0, "CMD was stopped");
    FILE *f = fopen(go, "w");
    cr_assert_not_null(f);
    fclose(f);
    char *err = NULL;
    cr_assert_eq(crdt_proc_finish(&p, 5000, NULL, &err), 70, "stderr: %s", err);
    cr_assert(strstr(err, "lost") && strstr(err, "ignore"), "stderr: %s", err);
    free(err);
    char *d = crdt_file_text(done);
    cr_assert_str_eq(d, "done\n", "CMD did not run to its end");
    free(d);

    /* A fixed lease that runs out: the same. */
    snprintf(body, sizeof body, "sleep 0.6; echo again > %s", done);
    cr_assert_eq(cli(NULL, NULL,
                     ARGS("--url", test_url(), "run", "--lease", "200", "--on-lost=ignore", name,
                          "--", "sh", "-c", body)),
                 70);
    d = crdt_file_text(done);
    cr_assert_str_eq(d, "again\n");
    free(d);
}

/* ---------------------------------------------------------------------------------- */
/* run: CMD's process group                                                           */
/* ---------------------------------------------------------------------------------- */

/* Dead: no such process, or a zombie (its new parent, maybe not a reaping init, has not
 * collected it yet). */
static bool process_dead(void *arg)
{
    long pid = *(long *)arg;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return true;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    char *st = crdt_file_text(path);
    const char *paren = strrchr(st, ')');
    bool zombie = paren != NULL && (paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
    free(st);
    return zombie;
}

/* Starts `credisson run` around `sh -c` that starts a background `sleep 30` (CMD's child,
 * credisson's grandchild), writes its pid to a file and waits for it. Returns its pid. */
static long start_with_grandchild(crdt_proc *p, const char *name, const char *const *run_opts)
{
    char gc[300], body[1024];
    spath(gc, sizeof gc, "grandchild.pid");
    unlink(gc);
    snprintf(body, sizeof body, "sleep 30 & echo $! > '%s.tmp' && mv '%s.tmp' '%s'; wait", gc, gc,
             gc);
    start_script(p, name, ARGS("--watchdog-ms", "600"), run_opts, body);
    cr_assert(crdt_wait_until(crdt_file_filled, gc, 10000), "CMD started no grandchild");
    long pid = read_pid_file(gc);
    cr_assert_gt(pid, 1);
    cr_assert_eq(kill((pid_t)pid, 0), 0, "the grandchild is not running");
    return pid;
}

Test(cli, run_signals_cmds_whole_process_group_so_grandchildren_stop_too)
{
    const char *name = crdt_key("lock");
    const char *const *run_opts[] = {ARGS("--on-lost=kill"), ARGS("--on-lost=term")};
    for (size_t i = 0; i < 2; i++) {
        crdt_proc p;
        long gc = start_with_grandchild(&p, name, run_opts[i]);
        force_unlock(name);
        char *err = NULL;
        cr_assert_eq(crdt_proc_finish(&p, 5000, NULL, &err), 70, "case %zu: stderr: %s", i, err);
        free(err);
        bool dead = crdt_wait_until(process_dead, &gc, 2000);
        if (!dead)
            kill((pid_t)gc, SIGKILL); /* no stray sleep after a failure */
        cr_assert(dead, "case %zu: CMD's child %ld still runs after the lock was lost", i, gc);
    }
    /* A forwarded SIGTERM reaches the grandchild too. */
    crdt_proc p;
    long gc = start_with_grandchild(&p, name, NULL);
    cr_assert_eq(kill(p.pid, SIGTERM), 0);
    cr_assert_eq(crdt_proc_finish(&p, 5000, NULL, NULL), 128 + SIGTERM);
    bool dead = crdt_wait_until(process_dead, &gc, 2000);
    if (!dead)
        kill((pid_t)gc, SIGKILL);
    cr_assert(dead, "CMD's child %ld still runs after a forwarded SIGTERM", gc);
}

/* ---------------------------------------------------------------------------------- */
/* list                                                                               */
/* ---------------------------------------------------------------------------------- */

static char *owner_of(crd_client *c, char *buf, size_t cap);

/* The entry of locks (a JSON array) named name, or NULL. */
static json_t *lock_named(json_t *locks, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(locks, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
            return e;
    }
    return NULL;
}

static void expect_listed(json_t *locks, const char *name, const char *kind, const char *owner)
{
    json_t *e = lock_named(locks, name);
    cr_assert_not_null(e, "%s is not listed", name);
    cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), kind, "%s", name);
    cr_assert_gt(json_integer_value(json_object_get(e, "ttl_ms")), 0, "%s", name);
    json_t *h = json_object_get(e, "holders");
    cr_assert_eq(json_array_size(h), 1, "%s", name);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(h, 0), "owner")), owner);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(h, 0), "count")), 1);
}

Test(cli, list_shows_every_kind_of_held_lock_and_nothing_else)
{
    char pattern[300], rl[300], rw[300], fair[300], other[300], str[300];
    snprintf(pattern, sizeof pattern, "%s*", crdt_key_prefix());
    snprintf(rl, sizeof rl, "%s", crdt_key("rlock"));
    snprintf(rw, sizeof rw, "%s", crdt_key("rw"));
    snprintf(fair, sizeof fair, "%s", crdt_key("fair"));
    snprintf(other, sizeof other, "%s", crdt_key("hash"));
    snprintf(str, sizeof str, "%s", crdt_key("string"));
    redisContext *r = crdt_redis();
    freeReplyObject(crdt_cmd(r, "HSET %s a 1", other));
    freeReplyObject(crdt_cmd(r, "SET %s 1", str));

    crd_client *c = crdt_client();
    char owner[128];
    owner_of(c, owner, sizeof owner);
    crd_lock *l = crdt_lock(c, rl), *f = NULL;
    crd_rwlock *w = NULL;
    cr_assert_eq(crd_fair_lock_new(c, fair, &f), CRD_OK);
    cr_assert_eq(crd_rwlock_new(c, rw, &w), CRD_OK);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(w), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    /* A waiter in the fair queue. */
    crdt_proc waiter;
    cli_start(&waiter,
              ARGS("--url", test_url(), "run", "--fair", "--wait", "20000", fair, "--", "true"));
    char queue[400];
    snprintf(queue, sizeof queue, "redisson_lock_queue:{%s}", fair);
    cr_assert(crdt_await_llen(r, queue, 1, 1, 10000), "the waiter never queued");

    char *out = NULL, *err = NULL;
    cr_assert_eq(cli(&out, &err, ARGS("--url", test_url(), "list", "--json", pattern)), 0,
                 "stderr: %s", err);
    cr_assert_str_empty(err);
    json_t *j = json_of(out);
    cr_assert(json_is_true(json_object_get(j, "complete")), "%s", out);
    cr_assert_geq(json_integer_value(json_object_get(j, "scanned")), 5, "%s", out);
    json_t *locks = json_object_get(j, "locks");
    cr_assert_eq(json_array_size(locks), 3, "%s", out);
    expect_listed(locks, rl, "rlock", owner);
    expect_listed(locks, fair, "fair", owner);
    expect_listed(locks, rw, "rwlock", owner);
    cr_assert_eq(json_integer_value(json_object_get(lock_named(locks, fair), "queue")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(lock_named(locks, rw), "mode")), "read");
    json_decref(j);
    free(out);
    free(err);

    /* Text: one line per lock. */
    cr_assert_eq(cli(&out, NULL, ARGS("--url", test_url(), "list", pattern)), 0);
    cr_assert_eq(count_lines(out), 3, "%s", out);
    char want[600];
    snprintf(want, sizeof want, "%s kind=fair ttl_ms=", fair);
    cr_assert(strstr(out, want) && strstr(out, " queue=1 holders=1 holder="), "%s", out);
    snprintf(want, sizeof want, "%s kind=rwlock ttl_ms=", rw);
    cr_assert(strstr(out, want) && strstr(out, " mode=read "), "%s", out);
    free(out);

    cr_assert_eq(crd_lock_release(f), CRD_OK);
    cr_assert_eq(crdt_proc_finish(&waiter, 10000, NULL, NULL), 0);
    crd_lock_free(f);
    crd_lock_free(l);
    crd_rwlock_free(w);
    crd_client_free(c);
    redisFree(r);
}

Test(cli, list_stops_at_its_time_bound_and_says_the_list_is_incomplete)
{
    /* Enough keys that one SCAN step of COUNT 1 cannot cover the keyspace. */
    redisContext *r = crdt_redis();
    for (int i = 0; i < 300; i++)
        redisAppendCommand(r, "SET %s:%d 1", crdt_key("k"), i);
    for (int i = 0; i < 300; i++) {
        void *rep = NULL;
        cr_assert_eq(redisGetReply(r, &rep), REDIS_OK);
        freeReplyObject(rep);
    }
    char *out = NULL, *err = NULL;
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(cli(&out, &err,
                     ARGS("--url", test_url(), "list", "--json", "--timeout", "0", "--count", "1")),
                 0, "stderr: %s", err);
    cr_assert_lt(crdt_now_ms() - t0, 5000);
    cr_assert_eq(count_lines(err), 1, "stderr: %s", err);
    cr_assert(strncmp(err, "credisson: list: ", 17) == 0 && strstr(err, "incomplete"), "%s", err);
    json_t *j = json_of(out);
    cr_assert(json_is_false(json_object_get(j, "complete")), "%s", out);
    json_decref(j);
    free(out);
    free(err);
    redisFree(r);
}

/* ---------------------------------------------------------------------------------- */
/* bash completion                                                                    */
/* ---------------------------------------------------------------------------------- */

/* The completions bash offers for the words of line (the last word is being typed),
 * one per line, from the completion script of the source tree. */
static char *complete_in_bash(const char *line)
{
    char script[300], cmd[1200];
    spath(script, sizeof script, "complete.sh");
    FILE *f = fopen(script, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "source '%s' || exit 3\n"
            "COMP_LINE='%s'; COMP_WORDS=(%s); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
            "[[ $COMP_LINE == *' ' ]] && { COMP_WORDS+=(''); COMP_CWORD=$((COMP_CWORD + 1)); }\n"
            "_credisson; printf '%%s\\n' \"${COMPREPLY[@]}\"\n",
            CRD_CLI_COMPLETION, line, line);
    fclose(f);
    char out[300];
    spath(out, sizeof out, "complete.out");
    snprintf(cmd, sizeof cmd, "bash --norc --noprofile '%s' > '%s' 2>&1", script, out);
    int rc = system(cmd);
    char *s = crdt_file_text(out);
    cr_assert_eq(rc, 0, "bash failed: %s", s);
    return s;
}

Test(cli, bash_completion_offers_commands_and_flags)
{
    char *s = complete_in_bash("credisson ru");
    cr_assert_str_eq(s, "run\n");
    free(s);
    /* Bash splits the URL at each ':' (COMP_WORDBREAKS). */
    s = complete_in_bash("credisson --url redis : //h : 1 ");
    cr_assert_str_eq(s, "run\nstatus\nunlock\nwatch\nlist\nexporter\nsemaphore\nlatch\nratelimit\n"
                        "doctor\n"
                        "verify\n");
    free(s);
    s = complete_in_bash("credisson run --");
    const char *const flags[] = {"--wait\n",     "--nonblock\n", "--lease\n",
                                 "--fair\n",     "--read\n",     "--write\n",
                                 "--on-lost=\n", "--grace\n",    "--conflict-exit-code\n",
                                 "--verbose\n",  "--help\n"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        cr_assert(strstr(s, flags[i]) != NULL, "no %s in: %s", flags[i], s);
    free(s);
    s = complete_in_bash("credisson run --on-lost ");
    cr_assert_str_eq(s, "term\nkill\nignore\n");
    free(s);
    s = complete_in_bash("credisson list --");
    cr_assert_str_eq(s, "--json\n--openmetrics\n--timeout\n--count\n--max-names\n--help\n");
    free(s);
    s = complete_in_bash("credisson doctor --");
    cr_assert_str_eq(s, "--json\n--samples\n--timeout\n--prefix\n--help\n");
    free(s);
    s = complete_in_bash("credisson verify --replica-sync ");
    cr_assert_str_eq(s, "auto\non\noff\nif-allowed\n");
    free(s);
}

/* ---------------------------------------------------------------------------------- */
/* URLs: ACL users                                                                    */
/* ---------------------------------------------------------------------------------- */

Test(cli, an_acl_user_url_works_for_every_command)
{
    crdt_server srv;
    crdt_server_start(&srv, false,
                      (const char *const[]){"--user", "alice", "on", ">p@ss", "~*", "&*", "+@all",
                                            NULL},
                      "alice", "p@ss");
    const char *name = crdt_key("lock");
    char right[160], wrong[160];
    snprintf(right, sizeof right, "redis://alice:p%%40ss@127.0.0.1:%d", srv.port);
    snprintf(wrong, sizeof wrong, "redis://bob:p%%40ss@127.0.0.1:%d/0", srv.port);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", right, "run", name, "--", "true")), 0);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", right, "status", "--json", name)), 0);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", right, "unlock", "--force", name)), 0);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", right, "watch", "--timeout", "50", name)), 0);
    crdt_proc p;
    cli_start_env(&p, right, ARGS("run", name, "--", "true"));
    cr_assert_eq(crdt_proc_finish(&p, 20000, NULL, NULL), 0);
    char *err = NULL;
    cr_assert_eq(cli(NULL, &err, ARGS("--url", wrong, "run", name, "--", "true")), 69);
    cr_assert(strstr(err, "p@ss") == NULL && strstr(err, "p%40ss") == NULL,
              "the password leaked: %s", err);
    free(err);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", wrong, "watch", "--timeout", "50", name)), 69);
    crdt_server_stop(&srv);
}

/* ---------------------------------------------------------------------------------- */
/* status --json: the documented schema, including the client object                  */
/* ---------------------------------------------------------------------------------- */

static bool json_is_int_or_null(const json_t *v)
{
    return json_is_integer(v) || json_is_null(v);
}

/* Every key of object o is one of the NULL-terminated list keys. */
static void expect_only_keys(json_t *o, const char *what, const char *const *keys)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        bool known = false;
        for (size_t i = 0; keys[i] != NULL && !known; i++)
            known = strcmp(keys[i], k) == 0;
        cr_expect(known, "%s has the undocumented key \"%s\"", what, k);
    }
}

/* The WHO object of status --json (an identity). */
static void check_who(json_t *w)
{
    cr_assert(json_is_object(w), "no \"who\" object");
    cr_assert(json_is_string(json_object_get(w, "client_id")));
    cr_assert(json_is_integer(json_object_get(w, "thread")));
    cr_assert(json_is_boolean(json_object_get(w, "known")));
    cr_assert(json_is_string(json_object_get(w, "connections")));
    if (json_is_true(json_object_get(w, "known"))) {
        cr_assert(json_is_string(json_object_get(w, "host")));
        cr_assert(json_is_string(json_object_get(w, "program")));
        cr_assert(json_is_string(json_object_get(w, "label")));
        cr_assert_str_eq(json_string_value(json_object_get(w, "version")), CRD_VERSION_STRING);
        cr_assert(json_integer_value(json_object_get(w, "pid")) > 0);
        cr_assert(json_integer_value(json_object_get(w, "started_ms")) > 0);
        expect_only_keys(w, "who", (const char *const[]){"client_id", "thread", "known", "host",
                                                        "program", "label", "version", "pid",
                                                        "started_ms", "connections", NULL});
    } else {
        expect_only_keys(w, "who", (const char *const[]){"client_id", "thread", "known",
                                                        "connections", NULL});
    }
}

static void check_waiters(json_t *q, bool deadlines)
{
    cr_assert(json_is_array(q));
    size_t i;
    json_t *e;
    json_array_foreach(q, i, e)
    {
        cr_assert(json_is_string(json_object_get(e, "owner")));
        cr_assert(json_is_int_or_null(json_object_get(e, "since_ms")));
        cr_assert(json_is_int_or_null(json_object_get(e, "waited_ms")));
        check_who(json_object_get(e, "who"));
        if (deadlines) {
            cr_assert(json_is_int_or_null(json_object_get(e, "deadline_ms")));
            cr_assert(json_is_int_or_null(json_object_get(e, "remaining_ms")));
            expect_only_keys(e, "a waiter",
                             (const char *const[]){"owner", "deadline_ms", "remaining_ms",
                                                   "since_ms", "waited_ms", "who", NULL});
        } else {
            expect_only_keys(e, "a waiting client",
                             (const char *const[]){"owner", "since_ms", "waited_ms", "who", NULL});
        }
    }
}

/* status --json's documented schema (status --help): only those keys, of those types. */
static void check_status_schema(json_t *j)
{
    cr_assert(json_is_object(j));
    cr_assert(json_is_string(json_object_get(j, "name")));
    const char *kind = json_string_value(json_object_get(j, "kind"));
    cr_assert_not_null(kind);
    static const char *const kinds[] = {"rlock", "fair", "rwlock", "fenced", "semaphore",
                                        "permit_semaphore", "latch", "none", "other", NULL};
    bool known = false;
    for (size_t k = 0; kinds[k] != NULL; k++)
        known = known || strcmp(kind, kinds[k]) == 0;
    cr_assert(known, "kind %s", kind);
    cr_assert(json_is_string(json_object_get(j, "type")));
    cr_assert(json_is_integer(json_object_get(j, "ttl_ms")));
    cr_assert(json_integer_value(json_object_get(j, "read_at_ms")) > 0);
    json_t *hs = json_object_get(j, "holders");
    cr_assert(json_is_array(hs));
    size_t i;
    json_t *e;
    json_array_foreach(hs, i, e)
    {
        cr_assert(json_is_string(json_object_get(e, "owner")));
        cr_assert(json_is_integer(json_object_get(e, "count")));
        cr_assert(json_is_boolean(json_object_get(e, "writer")));
        cr_assert(json_is_integer(json_object_get(e, "ttl_ms")));
        cr_assert(json_is_int_or_null(json_object_get(e, "since_ms")));
        cr_assert(json_is_int_or_null(json_object_get(e, "held_ms")));
        cr_assert(json_is_boolean(json_object_get(e, "watching")));
        check_who(json_object_get(e, "who"));
        expect_only_keys(e, "a holder",
                         (const char *const[]){"owner", "count", "writer", "ttl_ms", "since_ms",
                                               "held_ms", "watching", "who", NULL});
    }
    check_waiters(json_object_get(j, "queue"), true);
    check_waiters(json_object_get(j, "waiting"), false);
    cr_assert(json_integer_value(json_object_get(j, "queue_length")) >= 0);
    cr_assert(json_integer_value(json_object_get(j, "subscribers")) >= 0);
    cr_assert(json_integer_value(json_object_get(j, "waiters")) >= 0);
    cr_assert(json_is_boolean(json_object_get(j, "identity")));
    if (strcmp(kind, "rwlock") == 0) {
        cr_assert(json_is_string(json_object_get(j, "mode")));
        json_t *w = json_object_get(j, "writer");
        cr_assert(json_is_string(w) || json_is_null(w));
        json_t *rh = json_object_get(j, "read_holds");
        cr_assert(json_is_array(rh));
        json_array_foreach(rh, i, e)
        {
            cr_assert(json_is_string(json_object_get(e, "owner")));
            cr_assert(json_is_integer(json_object_get(e, "index")));
            cr_assert(json_is_integer(json_object_get(e, "ttl_ms")));
        }
    } else {
        cr_assert_null(json_object_get(j, "mode"));
        cr_assert_null(json_object_get(j, "read_holds"));
    }
    /* No unrelated counters: the CLI's own client is not the lock's business. */
    cr_assert_null(json_object_get(j, "client"));
    expect_only_keys(j, "status",
                     (const char *const[]){"name", "kind", "type", "mode", "token", "ttl_ms",
                                           "read_at_ms", "holders", "writer", "read_holds",
                                           "queue", "queue_length", "subscribers", "waiters",
                                           "waiting", "available", "maybe_latch", "permits",
                                           "count", "identity", NULL});
}

Test(cli, status_json_matches_the_documented_schema_and_names_no_client_counters)
{
    redisContext *r = crdt_redis();
    /* none */
    json_t *j = status_json(crdt_key("absent"));
    check_status_schema(j);
    json_decref(j);

    /* a held fair lock with a queued CLI waiter: its queue entry names the process */
    const char *name = crdt_key("fair");
    crd_client *lc = crdt_client();
    crd_lock *fl = NULL;
    cr_assert_eq(crd_fair_lock_new(lc, name, &fl), CRD_OK);
    cr_assert_eq(crd_lock_acquire(fl, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crdt_proc waiter;
    cli_start(&waiter, ARGS("--url", test_url(), "run", "--fair", "--wait", "10000", name, "--",
                            "true"));
    char qkey[400];
    snprintf(qkey, sizeof qkey, "redisson_lock_queue:{%s}", name);
    cr_assert(crdt_await_llen(r, qkey, 1, 1, 10000), "the CLI never queued");
    j = status_json(name);
    check_status_schema(j);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "fair");
    cr_assert_eq(json_array_size(json_object_get(j, "holders")), 1);
    cr_assert_eq(json_array_size(json_object_get(j, "queue")), 1);
    cr_assert(json_is_integer(
        json_object_get(json_array_get(json_object_get(j, "queue"), 0), "deadline_ms")));
    json_decref(j);
    cr_assert_eq(crd_lock_release(fl), CRD_OK);
    cr_assert_eq(crdt_proc_finish(&waiter, 10000, NULL, NULL), 0);
    crd_lock_free(fl);

    /* a write-locked read-write lock with a read hold besides (downgrade) */
    const char *rwname = crdt_key("rw");
    crd_rwlock *rw = NULL;
    cr_assert_eq(crd_rwlock_new(lc, rwname, &rw), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_write(rw), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(rw), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    j = status_json(rwname);
    check_status_schema(j);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "rwlock");
    cr_assert(json_is_string(json_object_get(j, "writer")));
    cr_assert_eq(json_array_size(json_object_get(j, "read_holds")), 1);
    json_decref(j);
    cr_assert_eq(crd_lock_release(crd_rwlock_read(rw)), CRD_OK);
    cr_assert_eq(crd_lock_release(crd_rwlock_write(rw)), CRD_OK);
    crd_rwlock_free(rw);
    crd_client_free(lc);

    /* a string: kind other */
    const char *str = crdt_key("str");
    freeReplyObject(crdt_cmd(r, "SET %s x", str));
    j = status_json(str);
    check_status_schema(j);
    json_decref(j);

    /* The text form has no client lines either. */
    char *out = NULL;
    cr_assert_eq(cli(&out, NULL, ARGS("--url", test_url(), "status", str)), 0);
    cr_assert(strstr(out, "connects") == NULL && strstr(out, "acquisitions") == NULL, "%s",
              out);
    free(out);
    redisFree(r);
}

/* ---------------------------------------------------------------------------------- */
/* watch                                                                              */
/* ---------------------------------------------------------------------------------- */

/* Line i (0-based) of the file at path, parsed as JSON (asserts). */
static json_t *json_line(const char *path, int i)
{
    char *s = crdt_file_text(path), *p = s;
    for (int k = 0; k < i && p != NULL; k++) {
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    cr_assert(p != NULL && *p != '\0', "no line %d in: %s", i, s);
    char *end = strchr(p, '\n');
    if (end != NULL)
        *end = '\0';
    json_error_t jerr;
    json_t *j = json_loads(p, 0, &jerr);
    cr_assert_not_null(j, "line %d is not JSON (%s): %s", i, jerr.text, p);
    free(s);
    return j;
}

static void expect_event(json_t *ev, const char *event, const char *name, const char *owner,
                         const char *cause)
{
    cr_assert_str_eq(json_string_value(json_object_get(ev, "event")), event);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "name")), name);
    cr_assert(json_is_integer(json_object_get(ev, "time_ms")));
    if (owner != NULL)
        cr_assert_str_eq(json_string_value(json_object_get(ev, "owner")), owner);
    if (cause != NULL) {
        cr_assert_str_eq(json_string_value(json_object_get(ev, "cause")), cause);
    } else {
        cr_assert(json_is_integer(json_object_get(ev, "count")));
        cr_assert(json_is_integer(json_object_get(ev, "ttl_ms")));
    }
}

/* Starts `watch --json` on name with extra options and waits until it has subscribed to
 * channel and printed want_lines lines (its "held" lines). */
static void start_watch(crdt_proc *w, redisContext *r, const char *name, const char *channel,
                        const char *const *opts, int want_lines)
{
    const char *args[24];
    int n = 0;
    args[n++] = "--url";
    args[n++] = test_url();
    args[n++] = "watch";
    args[n++] = "--json";
    for (int i = 0; opts && opts[i]; i++)
        args[n++] = opts[i];
    args[n++] = name;
    args[n] = NULL;
    cli_start(w, args);
    crdt_probe ch = {.r = r, .name = channel};
    cr_assert(crdt_wait_until(crdt_channel_subscribed, &ch, 10000), "watch never subscribed");
    crdt_probe lp = {.name = w->out, .n = want_lines};
    cr_assert(crdt_wait_until(crdt_file_lines_reach, &lp, 10000), "watch printed no held line");
}

/* A MONITOR connection, opened before the watch it observes starts. */
static redisContext *monitor_open(void)
{
    redisContext *m = crdt_redis();
    redisReply *rep = crdt_cmd(m, "MONITOR");
    cr_assert_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    return m;
}

/* Waits (10 s at most) until MONITOR shows a TYPE of name, the first command of watch's
 * read: Redis feeds a transaction's commands to MONITOR as EXEC runs them, so that read
 * is over. */
static void wait_first_read(redisContext *mon, const char *name)
{
    int64_t deadline = crdt_now_ms() + 10000;
    for (;;) {
        cr_assert_lt(crdt_now_ms(), deadline, "watch never read the lock");
        void *rv = NULL;
        cr_assert(redisGetReply(mon, &rv) == REDIS_OK && rv != NULL,
                  "watch never read the lock: %s", mon->errstr);
        redisReply *rep = rv;
        crdt_mon_cmd c;
        bool seen = rep->type == REDIS_REPLY_STATUS && crdt_mon_parse(rep->str, rep->len, &c);
        if (seen) {
            seen = c.argc == 2 && strcasecmp(c.argv[0], "TYPE") == 0 &&
                   strcmp(c.argv[1], name) == 0;
            crdt_mon_cmd_free(&c);
        }
        freeReplyObject(rep);
        if (seen)
            return;
    }
}

static char *owner_of(crd_client *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s:%llu", crd_client_id(c), (unsigned long long)crd_owner_current());
    return buf;
}

Test(cli, watch_prints_a_release_within_100_ms)
{
    const char *name = crdt_key("lock");
    redisContext *r = crdt_redis();
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, name);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    char owner[128], channel[400];
    owner_of(c, owner, sizeof owner);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);

    crdt_proc w;
    start_watch(&w, r, name, channel, ARGS("--count", "1", "--timeout", "20000"), 1);
    json_t *ev = json_line(w.out, 0);
    expect_event(ev, "held", name, owner, NULL);
    cr_assert_eq(json_integer_value(json_object_get(ev, "count")), 1);
    json_decref(ev);

    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    crdt_probe lp = {.name = w.out, .n = 2};
    cr_assert(crdt_wait_until(crdt_file_lines_reach, &lp, 5000), "no release event");
    int64_t took = crdt_now_ms() - t0;
    cr_assert_lt(took, 100, "the release was printed %lld ms after it happened", (long long)took);
    ev = json_line(w.out, 1);
    expect_event(ev, "release", name, owner, "unlock");
    json_decref(ev);
    /* --count 1: the held line does not count, the release does. */
    char *err = NULL;
    cr_assert_eq(crdt_proc_finish(&w, 5000, NULL, &err), 0, "stderr: %s", err);
    cr_assert_str_empty(err);
    free(err);

    /* Text form: the same event as one line. */
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crdt_proc t;
    cli_start(&t, ARGS("--url", test_url(), "watch", "--count", "1", name));
    crdt_probe ch = {.r = r, .name = channel};
    cr_assert(crdt_wait_until(crdt_channel_subscribed, &ch, 10000));
    lp.name = t.out;
    lp.n = 1;
    cr_assert(crdt_wait_until(crdt_file_lines_reach, &lp, 10000));
    t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    lp.n = 2;
    cr_assert(crdt_wait_until(crdt_file_lines_reach, &lp, 5000), "no release line");
    cr_assert_lt(crdt_now_ms() - t0, 100);
    char *out = NULL;
    cr_assert_eq(crdt_proc_finish(&t, 5000, &out, NULL), 0);
    char want[512];
    snprintf(want, sizeof want, " release %s owner=%s cause=unlock by=", name, owner);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    snprintf(want, sizeof want, " held %s owner=%s count=1 ttl_ms=", name, owner);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    free(out);

    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
}

Test(cli, watch_reports_acquire_reentry_and_expiry)
{
    const char *name = crdt_key("lock");
    redisContext *r = crdt_redis();
    char channel[400], owner[128];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    crdt_proc w;
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, name);
    owner_of(c, owner, sizeof owner);
    crdt_probe lp = {.name = w.out, .n = 1};
    /* watch subscribes, then reads the lock once: an acquire that lands between the
     * subscription and that first read shows up as "held" (not counted), not as
     * "acquire". That start-up race is the test's, not the tool's: acquire once MONITOR
     * shows the read (a slow start, as under valgrind, lost it every time), and start
     * over should it happen anyway. */
    for (int attempt = 0;; attempt++) {
        redisContext *mon = monitor_open();
        start_watch(&w, r, name, channel, ARGS("--count", "3", "--interval", "50"), 0);
        wait_first_read(mon, name);
        redisFree(mon);
        lp.name = w.out;
        cr_assert_eq(crd_lock_acquire(l, 0, 400), CRD_OK);
        cr_assert(crdt_wait_until(crdt_file_lines_reach, &lp, 2000), "no acquire event");
        json_t *first = json_line(w.out, 0);
        bool held = strcmp(json_string_value(json_object_get(first, "event")), "held") == 0;
        json_decref(first);
        if (!held)
            break;
        cr_assert_lt(attempt, 3, "watch kept starting after the acquire");
        kill(w.pid, SIGTERM);
        crdt_proc_finish(&w, 5000, NULL, NULL);
        freeReplyObject(crdt_cmd(r, "DEL %s", name));
        crd_lock_release(l); /* CRD_LOCK_LOST: forget the local hold */
    }
    cr_assert_eq(crd_lock_acquire(l, 0, 400), CRD_OK); /* reentry: count 2, lease again */
    lp.n = 2;
    cr_assert(crdt_wait_until(crdt_file_lines_reach, &lp, 2000), "no count event");
    /* Nothing publishes an expiry; the watcher reads again when the TTL runs out. */
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crdt_proc_finish(&w, 5000, NULL, NULL), 0);
    cr_assert_lt(crdt_now_ms() - t0, 1500);
    json_t *ev = json_line(w.out, 0);
    expect_event(ev, "acquire", name, owner, NULL);
    cr_assert_eq(json_integer_value(json_object_get(ev, "count")), 1);
    json_t *ttl = json_object_get(ev, "ttl_ms");
    cr_assert(json_integer_value(ttl) > 0 && json_integer_value(ttl) <= 400);
    json_decref(ev);
    ev = json_line(w.out, 1);
    expect_event(ev, "count", name, owner, NULL);
    cr_assert_eq(json_integer_value(json_object_get(ev, "count")), 2);
    json_decref(ev);
    ev = json_line(w.out, 2);
    expect_event(ev, "release", name, owner, "expired");
    json_decref(ev);
    cr_assert_eq(crd_lock_release(l), CRD_LOCK_LOST);
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
}

Test(cli, watch_sees_fair_and_read_write_releases_within_100_ms)
{
    redisContext *r = crdt_redis();
    crd_client *c = crdt_client();
    char owner[128], channel[400];
    owner_of(c, owner, sizeof owner);

    /* Fair lock with a queued waiter: the release publishes on the waiter's own channel
     * (redisson_lock__channel:{N}:<owner>), which watch follows by pattern. */
    const char *name = crdt_key("fair");
    crd_lock *fl = NULL;
    cr_assert_eq(crd_fair_lock_new(c, name, &fl), CRD_OK);
    cr_assert_eq(crd_lock_acquire(fl, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crdt_proc waiter;
    cli_start(&waiter, ARGS("--url", test_url(), "run", "--fair", "--wait", "10000", name, "--",
                            "sleep", "0.3"));
    char qkey[400];
    snprintf(qkey, sizeof qkey, "redisson_lock_queue:{%s}", name);
    cr_assert(crdt_await_llen(r, qkey, 1, 1, 10000), "the CLI never queued");
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    crdt_proc w;
    start_watch(&w, r, name, channel, ARGS("--count", "2"), 1);
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(fl), CRD_OK);
    crdt_probe lp = {.name = w.out, .n = 2};
    cr_assert(crdt_wait_until(crdt_file_lines_reach, &lp, 5000), "no release event");
    cr_assert_lt(crdt_now_ms() - t0, 100);
    json_t *ev = json_line(w.out, 1);
    expect_event(ev, "release", name, owner, "unlock");
    json_decref(ev);
    /* ... and the waiter's acquire follows. */
    cr_assert_eq(crdt_proc_finish(&w, 5000, NULL, NULL), 0);
    ev = json_line(w.out, 2);
    expect_event(ev, "acquire", name, NULL, NULL);
    cr_assert_str_neq(json_string_value(json_object_get(ev, "owner")), owner);
    json_decref(ev);
    cr_assert_eq(crdt_proc_finish(&waiter, 10000, NULL, NULL), 0);
    crd_lock_free(fl);

    /* Read lock: the release publishes on redisson_rwlock:{N}. */
    const char *rwname = crdt_key("rw");
    crd_rwlock *rw = NULL;
    cr_assert_eq(crd_rwlock_new(c, rwname, &rw), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(rw), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", rwname);
    start_watch(&w, r, rwname, channel, ARGS("--count", "1"), 1);
    ev = json_line(w.out, 0);
    expect_event(ev, "held", rwname, owner, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "mode")), "read");
    json_decref(ev);
    t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(crd_rwlock_read(rw)), CRD_OK);
    lp.name = w.out;
    lp.n = 2;
    cr_assert(crdt_wait_until(crdt_file_lines_reach, &lp, 5000), "no release event");
    cr_assert_lt(crdt_now_ms() - t0, 100);
    cr_assert_eq(crdt_proc_finish(&w, 5000, NULL, NULL), 0);
    ev = json_line(w.out, 1);
    expect_event(ev, "release", rwname, owner, "unlock");
    json_decref(ev);
    crd_rwlock_free(rw);
    crd_client_free(c);
    redisFree(r);
}

/* Starts `watch --json --interval 60000 --count 2` on name at url and returns after its
 * first read (seen on MONITOR at port): from then on, an acquire can only show before
 * the next periodic read, a minute away, if the server tells the watch about it. */
static void start_slow_watch(crdt_proc *w, const char *url, int port, const char *name)
{
    redisContext *mon = crdt_redis_port(port);
    freeReplyObject(crdt_cmd(mon, "MONITOR"));
    cli_start(w, ARGS("--url", url, "watch", "--json", "--interval", "60000", "--timeout", "20000",
                      "--count", "2", name));
    wait_first_read(mon, name);
    redisFree(mon);
}

/* A hold taken and released on port while the watch runs: the watch prints its acquire
 * within 2 s (long before its next periodic read) and then its release. */
static void expect_short_hold_seen(crdt_proc *w, int port, const char *name)
{
    crd_options o;
    crdt_options(&o);
    o.port = port;
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l = crdt_lock(c, name);
    char owner[128];
    owner_of(c, owner, sizeof owner);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crdt_probe lp = {.name = w->out, .n = 1};
    bool seen = crdt_wait_until(crdt_file_lines_reach, &lp, 2000);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_assert(seen, "the acquire was not printed before the release");
    char *err = NULL;
    cr_assert_eq(crdt_proc_finish(w, 10000, NULL, &err), 0, "stderr: %s", err);
    cr_assert_str_empty(err, "a warning although acquires show at once: %s", err);
    free(err);
    json_t *ev = json_line(w->out, 0);
    expect_event(ev, "acquire", name, owner, NULL);
    json_decref(ev);
    ev = json_line(w->out, 1);
    expect_event(ev, "release", name, owner, "unlock");
    json_decref(ev);
    crd_lock_free(l);
    crd_client_free(c);
}

Test(cli, watch_shows_an_acquire_at_once_without_server_configuration)
{
    /* The test server has no keyspace notifications: client tracking does it. */
    redisContext *r = crdt_redis();
    redisReply *rep = crdt_cmd(r, "CONFIG GET notify-keyspace-events");
    cr_assert(rep->type == REDIS_REPLY_ARRAY && rep->elements == 2);
    cr_assert_str_empty(rep->element[1]->str, "the test server has keyspace notifications on");
    freeReplyObject(rep);
    redisFree(r);
    const char *name = crdt_key("lock");
    crdt_proc w;
    start_slow_watch(&w, test_url(), crdt_port(), name);
    expect_short_hold_seen(&w, crdt_port(), name);
}

Test(cli, watch_warns_at_start_when_short_holds_can_be_missed)
{
    /* A user that may not run CLIENT: no tracking. */
    crdt_server srv;
    crdt_server_start(&srv, false,
                      (const char *const[]){"--user", "watcher", "on", ">pw", "~*", "&*", "+@all",
                                            "-client", NULL},
                      NULL, NULL);
    char url[128];
    snprintf(url, sizeof url, "redis://watcher:pw@127.0.0.1:%d", srv.port);
    const char *name = crdt_key("lock");
    char *err = NULL;
    cr_assert_eq(cli(NULL, &err, ARGS("--url", url, "watch", "--timeout", "100", name)), 0,
                 "stderr: %s", err);
    cr_assert_eq(count_lines(err), 1, "stderr: %s", err);
    cr_assert(strncmp(err, "credisson: watch: warning: ", 27) == 0, "stderr: %s", err);
    cr_assert(strstr(err, "can be missed") && strstr(err, "notify-keyspace-events"), "%s", err);
    free(err);

    /* With keyspace notifications on, no warning, and acquires show at once again. */
    redisContext *admin = crdt_redis_port(srv.port);
    freeReplyObject(crdt_cmd(admin, "CONFIG SET notify-keyspace-events Kghx"));
    redisFree(admin);
    crdt_proc w;
    start_slow_watch(&w, url, srv.port, name);
    expect_short_hold_seen(&w, srv.port, name);
    crdt_server_stop(&srv);
}

Test(cli, watch_exits_0_at_its_timeout_and_69_when_the_server_goes_away)
{
    const char *name = crdt_key("lock");
    char *out = NULL, *err = NULL;
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(cli(&out, &err, ARGS("--url", test_url(), "watch", "--timeout", "300", name)), 0,
                 "stderr: %s", err);
    int64_t took = crdt_now_ms() - t0;
    cr_assert_geq(took, 300);
    cr_assert_lt(took, 3000);
    cr_assert_str_empty(out); /* nothing held, nothing happened */
    cr_assert_str_empty(err);
    free(out);
    free(err);

    crdt_server srv;
    crdt_server_start(&srv, false, NULL, NULL, NULL);
    char url[64];
    url_for_port(url, sizeof url, srv.port);
    crdt_proc w;
    cli_start(&w, ARGS("--url", url, "watch", name));
    redisContext *r = crdt_redis_port(srv.port);
    char channel[512];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    crdt_probe ch = {.r = r, .name = channel};
    cr_assert(crdt_wait_until(crdt_channel_subscribed, &ch, 10000));
    redisFree(r);
    crdt_server_stop(&srv);
    cr_assert_eq(crdt_proc_finish(&w, 5000, NULL, &err), 69, "stderr: %s", err);
    cr_assert_eq(count_lines(err), 1, "stderr: %s", err);
    free(err);
}

/* ---------------------------------------------------------------------------------- */
/* unlock --force never deletes data by mistake                                        */
/* ---------------------------------------------------------------------------------- */

Test(cli, unlock_force_refuses_a_key_that_is_not_a_lock_unless_told)
{
    redisContext *r = crdt_redis();
    const char *str = crdt_key("a-string"), *list = crdt_key("a-list"), *hash = crdt_key("a-hash");
    freeReplyObject(crdt_cmd(r, "SET %s %s", str, "precious"));
    freeReplyObject(crdt_cmd(r, "RPUSH %s %s", list, "precious"));
    freeReplyObject(crdt_cmd(r, "HSET %s %s %s", hash, "name", "precious"));
    const char *keys[3] = {str, list, hash};
    const char *words[3] = {"string", "list", "hash"};
    for (int i = 0; i < 3; i++) {
        char *out = NULL, *err = NULL;
        int rc = cli(&out, &err, ARGS("--url", test_url(), "unlock", "--force", keys[i]));
        cr_expect_eq(rc, 65, "%s: exit %d, stderr %s", keys[i], rc, err);
        cr_expect(strstr(err, "not a lock") != NULL && strstr(err, words[i]) != NULL &&
                      strstr(err, "--delete-non-lock") != NULL,
                  "the message says what the key is: %s", err);
        cr_expect_eq(crdt_exists(r, keys[i]), 1, "%s is intact", keys[i]);
        free(out);
        free(err);
    }
    char *out = NULL, *err = NULL;
    cr_expect_eq(cli(&out, &err, ARGS("--url", test_url(), "unlock", "--force",
                                      "--delete-non-lock", str)),
                 0, "%s", err);
    cr_expect(strstr(out, "deleted") != NULL, "%s", out);
    cr_expect_eq(crdt_exists(r, str), 0);
    free(out);
    free(err);
    redisFree(r);
}

/* ---- semaphore and latch (issue 27) ------------------------------------------------------ */

Test(cli, semaphore_set_add_and_status_keep_redissons_key_and_refuse_a_second_set)
{
    const char *name = crdt_key("clisem");
    redisContext *r = crdt_redis();
    char *out = NULL, *err = NULL;
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "semaphore", "set",
                                                       name, "3", NULL}), 0, "%s", err);
    free(out);
    free(err);
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "semaphore", "set",
                                                       name, "5", NULL}), 1);
    cr_assert(strstr(err, "exists (3 available); nothing was changed") != NULL, "%s", err);
    free(out);
    free(err);
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "semaphore", "add",
                                                       name, "-4", NULL}), 0, "%s", err);
    cr_assert_str_eq(out, "available: -1\n");
    free(out);
    free(err);
    cr_assert_eq(crdt_reply_int(crdt_cmd(r, "GET %s", name)), -1);
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "semaphore",
                                                       "status", "--json", name, NULL}), 0);
    cr_assert(strstr(out, "\"available\":-1") != NULL && strstr(out, "\"expirable\":false"),
              "%s", out);
    free(out);
    free(err);
    /* an expirable semaphore's permits, with their leases */
    crd_client *c = crdt_client();
    const char *pname = crdt_key("clipes");
    crd_permit_semaphore *ps = NULL;
    cr_assert_eq(crd_permit_semaphore_new(c, pname, &ps), CRD_OK);
    cr_assert_eq(crd_permit_semaphore_try_set_permits(ps, 2, NULL), CRD_OK);
    char id[CRD_PERMIT_ID_SIZE];
    cr_assert_eq(crd_permit_semaphore_acquire(ps, 0, 60000, id), CRD_OK);
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "semaphore",
                                                       "status", pname, NULL}), 0);
    char line[100];
    snprintf(line, sizeof line, "permit: %s remaining_ms=", id);
    cr_assert(strstr(out, "available: 1\n") != NULL && strstr(out, line) != NULL, "%s", out);
    free(out);
    free(err);
    crd_permit_semaphore_free(ps);
    crd_client_free(c);
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "semaphore", "add",
                                                       name, "x", NULL}), 64);
    free(out);
    free(err);
    redisFree(r);
}

Test(cli, latch_wait_exits_0_at_zero_and_75_on_timeout)
{
    const char *name = crdt_key("clilatch");
    char channel[400];
    snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", name);
    char *out = NULL, *err = NULL;
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "latch", "set", name,
                                                       "2", NULL}), 0, "%s", err);
    free(out);
    free(err);
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "latch", "set", name,
                                                       "9", NULL}), 1);
    free(out);
    free(err);
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "latch", "wait",
                                                       "--wait", "200", name, NULL}), 75);
    cr_assert(strstr(err, "did not reach zero within 200 ms") != NULL, "%s", err);
    free(out);
    free(err);
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "latch",
                                                       "count-down", name, NULL}), 0);
    cr_assert_str_eq(out, "count: 1\n");
    free(out);
    free(err);
    crdt_proc w;
    cli_start(&w, (const char *const[]){"--url", test_url(), "latch", "wait", "--wait", "20000",
                                         name, NULL});
    redisContext *r = crdt_redis();
    cr_assert(crdt_await_subscribed(r, channel, 10000), "the waiter subscribes");
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "latch",
                                                       "count-down", name, NULL}), 0);
    free(out);
    free(err);
    cr_assert_eq(crdt_proc_finish(&w, 10000, NULL, NULL), 0, "wait exits 0 at zero");
    cr_assert_lt(crdt_now_ms() - t0, 5000);
    cr_assert_eq(cli(&out, &err, (const char *const[]){"--url", test_url(), "latch", "status",
                                                       "--json", name, NULL}), 0);
    cr_assert(strstr(out, "\"count\":0") != NULL, "%s", out);
    free(out);
    free(err);
    redisFree(r);
}

/* ---------------------------------------------------------------------------------- */
/* run --permits: a fleet-wide concurrency limit                                      */
/* ---------------------------------------------------------------------------------- */

/* The zset of permit-expirable semaphore name's permits out: "{name}:timeout". */
static const char *permits_zset(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "{%s}:timeout", name);
    return buf;
}

/* The permits out (ids as 32 hex characters, deadlines in epoch ms); returns how many
 * (at most max). */
static int permits_out(redisContext *r, const char *name, char (*ids)[33], long long *deadlines,
                       int max)
{
    char z[400];
    redisReply *rep = crdt_cmd(r, "ZRANGE %s 0 -1 WITHSCORES", permits_zset(z, sizeof z, name));
    cr_assert_eq(rep->type, REDIS_REPLY_ARRAY);
    int n = 0;
    for (size_t i = 0; i + 1 < rep->elements && n < max; i += 2, n++) {
        cr_assert_eq(rep->element[i]->len, 16, "a permit id is 16 bytes");
        for (int k = 0; k < 16; k++)
            snprintf(ids[n] + 2 * k, 3, "%02x", (unsigned char)rep->element[i]->str[k]);
        deadlines[n] = strtoll(rep->element[i + 1]->str, NULL, 10);
    }
    freeReplyObject(rep);
    return n;
}

Test(cli, run_permits_lets_at_most_two_of_six_processes_run_at_once)
{
    const char *name = crdt_key("fleet");
    const char *inside = crdt_key("inside");
    char port[16], log[300];
    snprintf(port, sizeof port, "%d", crdt_port());
    spath(log, sizeof log, "ran");
    /* CMD: INCR a counter on entry (the value is how many are inside, itself included),
     * note it with the permit id, stay a while, DECR on the way out. */
    const char *body = "n=$(\"$0\" -p \"$1\" INCR \"$2\") || exit 9; "
                       "echo \"$n $CREDISSON_PERMIT\" >> \"$3\"; sleep 0.2; "
                       "\"$0\" -p \"$1\" DECR \"$2\" > /dev/null";
    crdt_proc p[6];
    for (int i = 0; i < 6; i++)
        cli_start(&p[i], ARGS("--url", test_url(), "run", "--permits", "2", name, "--", "sh",
                              "-c", body, crdt_redis_cli_path(), port, inside, log));
    for (int i = 0; i < 6; i++) {
        char *err = NULL;
        cr_assert_eq(crdt_proc_finish(&p[i], 30000, NULL, &err), 0, "run %d: %s", i, err);
        free(err);
    }
    char *ran = crdt_file_text(log);
    cr_assert_eq(count_lines(ran), 6, "all six ran: %s", ran);
    int max = 0;
    for (char *line = ran; *line;) {
        char id[64] = "";
        int n = 0;
        cr_assert_eq(sscanf(line, "%d %63s", &n, id), 2, "%s", line);
        cr_assert(n >= 1 && n <= 2, "%d inside at once under --permits 2: %s", n, ran);
        cr_assert_eq(strlen(id), 32, "CREDISSON_PERMIT is a permit id: %s", id);
        max = n > max ? n : max;
        line = strchr(line, '\n') + 1;
    }
    fprintf(stderr, "[cli] run --permits 2: at most %d of 6 inside at once\n", max);
    free(ran);
    /* Every permit came back; the semaphore is Redisson's string of 2. */
    redisContext *r = crdt_redis();
    char buf[32];
    cr_assert_str_eq(crdt_cmd_str(r, buf, sizeof buf, "GET %s", inside), "0");
    cr_assert_str_eq(crdt_cmd_str(r, buf, sizeof buf, "GET %s", name), "2");
    char z[400];
    cr_assert_eq(crdt_cmd_int(r, "ZCARD %s", permits_zset(z, sizeof z, name)), 0);
    redisFree(r);
}

Test(cli, run_permits_killed_holder_frees_its_permit_when_its_lease_ends)
{
    const char *name = crdt_key("fleet");
    char idfile[300], body[600];
    spath(idfile, sizeof idfile, "permit-id");
    snprintf(body, sizeof body, "printf %%s \"$CREDISSON_PERMIT\" > '%s'; exec sleep 30", idfile);
    crdt_proc holder;
    long cmd_pid = start_script(&holder, name, ARGS("--watchdog-ms", "1500"),
                                ARGS("--permits", "1"), body);
    cr_assert(crdt_wait_until(crdt_file_filled, idfile, 5000), "CMD has no CREDISSON_PERMIT");
    kill(holder.pid, SIGKILL);
    int64_t t_kill = crdt_now_ms();
    cr_assert_eq(crdt_wait_child(holder.pid, 5000), 128 + SIGKILL);
    kill((pid_t)cmd_pid, SIGKILL); /* CMD's group outlives a killed run */

    /* The dead holder's permit is still out, under the id CMD was given. */
    redisContext *r = crdt_redis();
    char ids[4][33];
    long long deadlines[4];
    cr_assert_eq(permits_out(r, name, ids, deadlines, 4), 1);
    char *given = crdt_file_text(idfile);
    cr_assert_str_eq(given, ids[0], "CREDISSON_PERMIT is the permit's id");
    free(given);

    /* A waiter gets it when the lease ends: the last renewal was at most 500 ms before
     * the kill, so not before ~1000 ms, and not much after 1500 ms. */
    crdt_proc w;
    cli_start(&w, ARGS("--url", test_url(), "run", "--permits", "1", "--wait", "10000", name,
                       "--", "true"));
    char *err = NULL;
    cr_assert_eq(crdt_proc_finish(&w, 15000, NULL, &err), 0, "%s", err);
    free(err);
    int64_t took = crdt_now_ms() - t_kill;
    fprintf(stderr, "[cli] a SIGKILLed holder's permit (lease 1500 ms) passed on after %" PRId64
                    " ms\n", took);
    cr_assert_geq(took, 700, "the permit was free before its lease ended (%" PRId64 " ms)", took);
    cr_assert_lt(took, 1500 + crdt_scaled_ms(2000), "passed on only after %" PRId64 " ms", took);
    char buf[32];
    cr_assert_str_eq(crdt_cmd_str(r, buf, sizeof buf, "GET %s", name), "1");
    redisFree(r);
}

/* r, name, n: the one permit out of name has a deadline beyond n (epoch ms). */
static bool permit_renewed_past(void *arg)
{
    crdt_probe *p = arg;
    char ids[2][33];
    long long d[2];
    return permits_out(p->r, p->name, ids, d, 2) == 1 && d[0] > p->n;
}

Test(cli, run_permits_renews_the_lease_while_cmd_runs_and_exits_70_when_the_permit_is_gone)
{
    const char *name = crdt_key("fleet");
    redisContext *r = crdt_redis();
    crdt_proc holder;
    long cmd_pid = start_sleeper(&holder, name, ARGS("--watchdog-ms", "600"),
                                 ARGS("--permits", "1"));
    char ids[2][33];
    long long d0[2];
    cr_assert_eq(permits_out(r, name, ids, d0, 2), 1);
    /* Renewed after its first lease had ended (a deadline past d0 + 600 was set after
     * d0), and still held then. */
    crdt_probe probe = {.r = r, .name = name, .n = d0[0] + 600};
    cr_assert(crdt_wait_until(permit_renewed_past, &probe, 5000), "the lease is not renewed");
    char *err = NULL;
    cr_assert_eq(cli(NULL, &err, ARGS("--url", test_url(), "run", "--permits", "1", "-n", name,
                                      "--", "true")),
                 75, "the held permit is not free: %s", err);
    cr_assert(strstr(err, "no permit of semaphore") != NULL, "%s", err);
    free(err);

    /* The permit removed behind the holder's back: the next renewal finds it gone. */
    char z[400];
    cr_assert_eq(crdt_cmd_int(r, "DEL %s", permits_zset(z, sizeof z, name)), 1);
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crdt_proc_finish(&holder, 5000, NULL, &err), 70, "%s", err);
    cr_assert_lt(crdt_now_ms() - t0, 2000);
    cr_assert(strstr(err, "lost while CMD ran") != NULL, "%s", err);
    free(err);
    cr_assert(crdt_wait_until(process_gone, &cmd_pid, 2000), "CMD %ld still runs", cmd_pid);
    redisFree(r);
}

Test(cli, run_permits_refuses_a_semaphore_with_another_number_of_permits)
{
    const char *name = crdt_key("fleet");
    redisContext *r = crdt_redis();
    char marker[300];
    spath(marker, sizeof marker, "ran");
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", test_url(), "run", "--permits", "3", name, "--",
                                      "true")), 0);
    char buf[32];
    cr_assert_str_eq(crdt_cmd_str(r, buf, sizeof buf, "GET %s", name), "3", "created with 3");
    char *err = NULL;
    cr_assert_eq(cli(NULL, &err, ARGS("--url", test_url(), "run", "--permits", "2", name, "--",
                                      "touch", marker)), 64);
    cr_assert(strstr(err, "exists with 3 permits, not 2") != NULL, "%s", err);
    cr_assert_eq(count_lines(err), 1, "%s", err);
    free(err);
    cr_assert(access(marker, F_OK) != 0, "CMD ran");
    cr_assert_str_eq(crdt_cmd_str(r, buf, sizeof buf, "GET %s", name), "3", "nothing changed");
    /* The same count is accepted; bad --permits values and lock flags are usage errors. */
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", test_url(), "run", "--permits", "3", name, "--",
                                      "touch", marker)), 0);
    cr_assert(access(marker, F_OK) == 0);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", test_url(), "run", "--permits", "0", name, "--",
                                      "true")), 64);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", test_url(), "run", "--permits", "2", "--fair",
                                      name, "--", "true")), 64);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", test_url(), "run", "--permits", "2", name,
                                      "other", "--", "true")), 64);
    /* A key of another type: the server's words, exit 69, nothing changed. */
    const char *h = crdt_key("hash");
    cr_assert_eq(crdt_cmd_int(r, "HSET %s a 1", h), 1);
    cr_assert_eq(cli(NULL, &err, ARGS("--url", test_url(), "run", "--permits", "2", h, "--",
                                      "true")), 69);
    cr_assert(strstr(err, "WRONGTYPE") != NULL, "%s", err);
    free(err);
    cr_assert_eq(crdt_cmd_int(r, "HLEN %s", h), 1);
    redisFree(r);
}

Test(cli, status_recognises_semaphores_permit_semaphores_and_latches)
{
    redisContext *r = crdt_redis();
    crd_client *c = crdt_client();
    /* A permit-expirable semaphore with one permit out. */
    const char *pname = crdt_key("pes");
    crd_permit_semaphore *ps = NULL;
    cr_assert_eq(crd_permit_semaphore_new(c, pname, &ps), CRD_OK);
    cr_assert_eq(crd_permit_semaphore_try_set_permits(ps, 3, NULL), CRD_OK);
    char id[CRD_PERMIT_ID_SIZE];
    cr_assert_eq(crd_permit_semaphore_acquire(ps, 0, 60000, id), CRD_OK);
    json_t *j = status_json(pname);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "permit_semaphore");
    cr_assert_eq(json_integer_value(json_object_get(j, "available")), 2);
    json_t *permits = json_object_get(j, "permits");
    cr_assert_eq(json_array_size(permits), 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(permits, 0), "id")), id);
    json_int_t left = json_integer_value(json_object_get(json_array_get(permits, 0), "remaining_ms"));
    cr_assert(left > 0 && left <= 60000, "remaining_ms %lld", (long long)left);
    json_decref(j);
    char *out = NULL;
    cr_assert_eq(cli(&out, NULL, ARGS("--url", test_url(), "status", pname)), 0);
    cr_assert(strstr(out, "kind: permit_semaphore\n") && strstr(out, "permits_out: 1\n") &&
                  strstr(out, id),
              "%s", out);
    free(out);
    /* A plain semaphore (RSemaphore): its number, which could be a latch's count. */
    const char *sname = crdt_key("sem");
    crd_semaphore *sem = NULL;
    cr_assert_eq(crd_semaphore_new(c, sname, &sem), CRD_OK);
    cr_assert_eq(crd_semaphore_try_set_permits(sem, 4, 0, NULL), CRD_OK);
    j = status_json(sname);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "semaphore");
    cr_assert_eq(json_integer_value(json_object_get(j, "available")), 4);
    cr_assert(json_is_true(json_object_get(j, "maybe_latch")));
    json_decref(j);
    /* A latch someone awaits. */
    const char *lname = crdt_key("latch");
    char channel[400];
    snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", lname);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", test_url(), "latch", "set", lname, "2")), 0);
    crdt_proc w;
    cli_start(&w, ARGS("--url", test_url(), "latch", "wait", "--wait", "20000", lname));
    cr_assert(crdt_await_subscribed(r, channel, 10000), "the waiter subscribes");
    j = status_json(lname);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "latch");
    cr_assert_eq(json_integer_value(json_object_get(j, "count")), 2);
    json_decref(j);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", test_url(), "latch", "count-down", lname)), 0);
    cr_assert_eq(cli(NULL, NULL, ARGS("--url", test_url(), "latch", "count-down", lname)), 0);
    cr_assert_eq(crdt_proc_finish(&w, 10000, NULL, NULL), 0);
    /* A string that is not a number stays "other". */
    const char *oname = crdt_key("text");
    freeReplyObject(crdt_cmd(r, "SET %s hello", oname));
    j = status_json(oname);
    cr_assert_str_eq(json_string_value(json_object_get(j, "kind")), "other");
    json_decref(j);
    crd_semaphore_free(sem);
    crd_permit_semaphore_free(ps);
    crd_client_free(c);
    redisFree(r);
}

Test(cli, list_shows_permit_semaphores_with_permits_out)
{
    crd_client *c = crdt_client();
    const char *pname = crdt_key("listedpes");
    crd_permit_semaphore *ps = NULL;
    cr_assert_eq(crd_permit_semaphore_new(c, pname, &ps), CRD_OK);
    cr_assert_eq(crd_permit_semaphore_try_set_permits(ps, 2, NULL), CRD_OK);
    char pattern[300];
    snprintf(pattern, sizeof pattern, "%s*", crdt_key_prefix());
    /* No permit out: nothing held, nothing listed. */
    char *out = NULL;
    cr_assert_eq(cli(&out, NULL, ARGS("--url", test_url(), "list", pattern)), 0);
    cr_assert_str_eq(out, "");
    free(out);
    char id[CRD_PERMIT_ID_SIZE];
    cr_assert_eq(crd_permit_semaphore_acquire(ps, 0, 60000, id), CRD_OK);
    cr_assert_eq(cli(&out, NULL, ARGS("--url", test_url(), "list", "--json", pattern)), 0);
    json_t *j = json_of(out);
    json_t *locks = json_object_get(j, "locks");
    cr_assert_eq(json_array_size(locks), 1, "%s", out);
    json_t *p = json_array_get(locks, 0);
    cr_assert_str_eq(json_string_value(json_object_get(p, "name")), pname);
    cr_assert_str_eq(json_string_value(json_object_get(p, "kind")), "permit_semaphore");
    cr_assert_eq(json_integer_value(json_object_get(p, "available")), 1);
    json_t *permit = json_array_get(json_object_get(p, "permits"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(permit, "id")), id);
    json_decref(j);
    free(out);
    cr_assert_eq(cli(&out, NULL, ARGS("--url", test_url(), "list", pattern)), 0);
    cr_assert(strstr(out, " kind=permit_semaphore available=1 permits_out=1 permit=") != NULL,
              "%s", out);
    cr_assert_eq(count_lines(out), 1, "%s", out);
    free(out);
    crd_permit_semaphore_free(ps);
    crd_client_free(c);
}

/* ---- watch on a semaphore and a latch (issue 27) ----------------------------------------- */

static void expect_sync_event(const char *path, int line, const char *event, const char *name,
                              const char *kind, const char *field, long long value)
{
    json_t *ev = json_line(path, line);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "event")), event, "line %d", line);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "name")), name);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "kind")), kind, "line %d", line);
    cr_assert(json_is_integer(json_object_get(ev, "time_ms")));
    json_t *v = json_object_get(ev, field);
    cr_assert(json_is_integer(v), "line %d has no %s", line, field);
    cr_assert_eq(json_integer_value(v), value, "line %d: %s %lld, not %lld", line, field,
                 (long long)json_integer_value(v), value);
    json_decref(ev);
}

/* Each change waits for its line before the next: one change, one read, one event. */
static void wait_lines(const char *path, int want, const char *what)
{
    crdt_probe lp = {.name = path, .n = want};
    cr_assert(crdt_wait_until(crdt_file_lines_reach, &lp, 5000), "no %s event", what);
}

Test(cli, watch_prints_a_semaphores_available_permits_as_they_change)
{
    const char *name = crdt_key("wsem");
    redisContext *r = crdt_redis();
    crd_client *c = crdt_client();
    crd_semaphore *s = crdt_sem_of(c, name);
    CRDT_OK(c, crd_semaphore_try_set_permits(s, 2, 0, NULL));
    char channel[400];
    snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
    crdt_proc w;
    start_watch(&w, r, name, channel, ARGS("--count", "3", "--timeout", "20000"), 1);
    expect_sync_event(w.out, 0, "found", name, "semaphore", "available", 2);

    CRDT_OK(c, crd_semaphore_acquire(s, 1, 0)); /* publishes nothing: client tracking */
    wait_lines(w.out, 2, "acquire");
    CRDT_OK(c, crd_semaphore_release(s, 1));    /* publishes on redisson_sc:{N} */
    wait_lines(w.out, 3, "release");
    CRDT_OK(c, crd_semaphore_add_permits(s, -2));
    char *err = NULL;
    cr_assert_eq(crdt_proc_finish(&w, 5000, NULL, &err), 0, "stderr: %s", err);
    cr_assert_str_empty(err);
    free(err);
    expect_sync_event(w.out, 1, "permits", name, "semaphore", "available", 1);
    expect_sync_event(w.out, 2, "permits", name, "semaphore", "available", 2);
    expect_sync_event(w.out, 3, "permits", name, "semaphore", "available", 0);
    crd_semaphore_free(s);
    crd_client_free(c);
    redisFree(r);
}

Test(cli, watch_prints_a_latchs_count_down_to_its_opening_in_text_and_json)
{
    const char *name = crdt_key("wlatch");
    redisContext *r = crdt_redis();
    crd_client *c = crdt_client();
    crd_latch *l = crdt_latch_of(c, name);
    CRDT_OK(c, crd_latch_try_set_count(l, 3, NULL));
    char channel[400];
    snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", name);
    /* A waiter on the latch: what tells watch, at start, that the number is a count. */
    crdt_sync_waiter aw = {.l = l, .wait_ms = 30000};
    crdt_sync_waiter_start(&aw);
    crdt_probe ch = {.r = r, .name = channel};
    cr_assert(crdt_wait_until(crdt_channel_subscribed, &ch, 10000), "the waiter never subscribed");

    crdt_proc w, t;
    start_watch(&w, r, name, channel, ARGS("--count", "3", "--timeout", "20000"), 1);
    expect_sync_event(w.out, 0, "found", name, "latch", "count", 3);
    cli_start(&t, ARGS("--url", test_url(), "watch", "--count", "3", "--timeout", "20000", name));
    crdt_probe lp = {.name = t.out, .n = 1};
    cr_assert(crdt_wait_until(crdt_file_lines_reach, &lp, 10000), "the text watch printed nothing");

    CRDT_OK(c, crd_latch_count_down(l)); /* 3 -> 2: publishes nothing */
    wait_lines(w.out, 2, "first count-down");
    wait_lines(t.out, 2, "first count-down (text)");
    CRDT_OK(c, crd_latch_count_down(l));
    wait_lines(w.out, 3, "second count-down");
    wait_lines(t.out, 3, "second count-down (text)");
    int64_t opened = crdt_now_ms();
    CRDT_OK(c, crd_latch_count_down(l)); /* 1 -> 0: deleted, "0" published */
    crdt_sync_waiter_woken(&aw, opened, 2000, "the await");
    char *err = NULL, *out = NULL;
    cr_assert_eq(crdt_proc_finish(&w, 5000, NULL, &err), 0, "stderr: %s", err);
    cr_assert_str_empty(err);
    free(err);
    cr_assert_eq(crdt_proc_finish(&t, 5000, &out, NULL), 0);
    expect_sync_event(w.out, 1, "latch", name, "latch", "count", 2);
    expect_sync_event(w.out, 2, "latch", name, "latch", "count", 1);
    expect_sync_event(w.out, 3, "latch", name, "latch", "count", 0);
    char want[512];
    snprintf(want, sizeof want, " found %s kind=latch count=3\n", name);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    snprintf(want, sizeof want, " latch %s count=0\n", name);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    free(out);
    crd_latch_free(l);
    crd_client_free(c);
    redisFree(r);
}
