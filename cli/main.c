/*
 * main.c -- the `credisson` command-line tool's entry point: the global options (--url,
 * --watchdog-ms, --help, --version), the main help text with the exit codes every
 * command shares, and the dispatch to one command's file through one table (COMMANDS: run.c,
 * status.c, unlock.c, watch.c, list.c, sync.c, ratelimit.c, doctor.c, verify.c).
 *
 *   credisson [--url URL] [--watchdog-ms N] COMMAND [OPTIONS] NAME ...
 */
#include "cli.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

const char cli_exit_codes_text[] =
    "Exit codes:\n"
    "  0      success (run: CMD exited with 0)\n"
    "  N      run: CMD's own exit status N\n"
    "  3      run --on-unavailable=degrade: CMD succeeded, WITHOUT the lock\n"
    "  64     usage error (unknown option, missing NAME or '--', bad number or URL);\n"
    "         run --permits N: semaphore NAME exists with another number of permits;\n"
    "         run --rate: rate limiter NAME exists with another rate\n"
    "  65     unlock --force: NAME is not a lock (nothing deleted)\n"
    "  69     Redis cannot be reached, or it refused the connection (AUTH, SELECT, TLS:\n"
    "         the message names the problem) or a command (e.g. NAME holds a value that is\n"
    "         not a lock)\n"
    "  70     run: the lock (or permit) was lost while CMD ran (force-unlocked, expired,\n"
    "         or renewal failed for longer than the lease); CMD was stopped as --on-lost\n"
    "         says (default: SIGTERM, SIGKILL after --grace) or, with --on-lost=ignore, ran\n"
    "         to its end\n"
    "  71     operating-system error (fork, pipe, out of memory)\n"
    "  75     run: the lock (or a permit) was not acquired within --wait (-E N changes this\n"
    "         code)\n"
    "  129, 130, 143  run: SIGHUP, SIGINT or SIGTERM while waiting for the lock: it left the\n"
    "         wait (a fair lock's queue too) and died of the signal\n"
    "  126    run: CMD could not be executed; 127: CMD was not found\n"
    "  128+S  run: CMD was killed by signal S\n"
    "status, unlock, watch and list exit 0 whatever the lock's state (watch: after --count\n"
    "events or --timeout), 64 on a usage error and 69 when Redis is unreachable.\n";

/* Every command: its name, its function and its lines in the main help. The help, the
 * "missing COMMAND" and "unknown command" messages are made from it; the bash completion's
 * commands="..." and the man page's sections are checked against it (tests/check_docs.py). */
static const struct {
    const char *name;
    int (*run)(const global_opts *g, int argc, char **argv);
    const char *usage;
} COMMANDS[] = {
    {"run", cmd_run,
     "  run [--wait MS] [--lease MS] [--fair|--read|--write|--fenced|--spin|--nonreentrant]\n"
     "      [--on-lost=term|kill|ignore] [--grace MS] NAME -- CMD [ARG...]\n"
     "                   run CMD while holding lock NAME\n"
     "  run --permits N [--wait MS] [--lease MS] NAME -- CMD [ARG...]\n"
     "                   run CMD while holding one of N permits of semaphore NAME\n"
     "                   (at most N at once, fleet-wide); CMD gets CREDISSON_PERMIT\n"
     "  run --rate N/DURATION [--wait MS] NAME -- CMD [ARG...]\n"
     "                   start CMD when rate limiter NAME gives a permit (10/1s, 100/1m)\n"},
    {"status", cmd_status,
     "  status [--json] NAME\n"
     "                   show the kind, holders (who, since when), TTL, queue and\n"
     "                   waiters of NAME\n"},
    {"unlock", cmd_unlock,
     "  unlock --force [--fair|--read|--write] NAME\n"
     "                   delete lock NAME whoever holds it and wake a waiter\n"},
    {"watch", cmd_watch,
     "  watch [--json] [--count N] [--timeout MS] [--interval MS] NAME\n"
     "                   print hold and release events of lock NAME as they happen\n"},
    {"list", cmd_list,
     "  list [--json|--openmetrics] [--timeout MS] [--count N] [PATTERN]\n"
     "                   the locks held right now (SCAN), with holders, who and since\n"
     "                   when, and waiters; --openmetrics: Prometheus gauges\n"},
    {"exporter", cmd_exporter,
     "  exporter [--listen ADDR] [--max-names N] [PATTERN]...\n"
     "                   serve those gauges at http://ADDR/metrics\n"},
    {"semaphore", cmd_semaphore,
     "  semaphore status [--json] NAME | set NAME N | add NAME N\n"
     "                   Redisson's RSemaphore / RPermitExpirableSemaphore NAME\n"},
    {"latch", cmd_latch,
     "  latch set NAME N | count-down NAME | wait [--wait MS] NAME | status [--json] NAME\n"
     "                   Redisson's RCountDownLatch NAME\n"},
    {"ratelimit", cmd_ratelimit,
     "  ratelimit status [--json] NAME | set NAME N/DURATION | delete NAME\n"
     "                   Redisson's RRateLimiter NAME\n"},
    {"doctor", cmd_doctor,
     "  doctor [--json] [--samples N] [--timeout MS] [--prefix P]\n"
     "                   check this deployment for what threatens a lock, and measure\n"
     "                   its floor (exit 0 fine, 1 warnings, 2 findings that break locks)\n"},
    {"verify", cmd_verify,
     "  verify [--procs N] [--seconds S] [--permits K] [--failover] [--json] ...\n"
     "                   a bounded mutual-exclusion check of this deployment\n"},
};
#define NCOMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

/* "run, status, ... or verify": the commands' names for a usage error. */
static const char *command_names(void)
{
    static char names[256];
    size_t at = 0;
    for (size_t k = 0; k < NCOMMANDS && at < sizeof names; k++)
        at += (size_t)snprintf(names + at, sizeof names - at, "%s%s",
                               k == 0 ? "" : k + 1 == NCOMMANDS ? " or " : ", ", COMMANDS[k].name);
    return names;
}

static void usage_main(FILE *f)
{
    char commands[4096];
    size_t at = 0;
    for (size_t k = 0; k < NCOMMANDS && at < sizeof commands; k++)
        at += (size_t)snprintf(commands + at, sizeof commands - at, "%s", COMMANDS[k].usage);
    fprintf(f,
            "usage: credisson [--url URL] [--watchdog-ms N] [TLS OPTIONS] COMMAND [OPTIONS] NAME ...\n"
            "\n"
            "Redisson-compatible distributed locks from the shell: a lock NAME taken here is\n"
            "the same lock as Java Redisson's getLock(NAME).\n"
            "\n"
            "Commands:\n"
            "%s"
            "\n"
            "Global options (before COMMAND):\n"
            "  --url URL        redis://[[user]:password@]host[:port][/db],\n"
            "                   rediss://... (TLS), or unix://[[user]:password@]/path.sock[?db=N];\n"
            "                   %%XX escapes in user and password\n"
            "                   (default: $CREDISSON_URL, else " CLI_DEFAULT_URL ")\n"
            "  --watchdog-ms N  lease of a lock held without --lease; the watchdog renews it\n"
            "                   every N/3 ms (default 30000, Redisson's lockWatchdogTimeout)\n"
            "  --label TEXT     run, watch: the label of this process's identity record (a\n"
            "                   service or job name; status, list and watch show it)\n"
            "  -h, --help       this help; 'credisson COMMAND --help' describes a command\n"
            "  --version        print the version\n"
            "\n"
            "TLS options (with a rediss:// URL; redis-cli's names):\n"
            "  --cacert FILE    trust the CAs in FILE (PEM) instead of the system's\n"
            "  --cacertdir DIR  trust the CAs in DIR (hashed, c_rehash)\n"
            "  --cert FILE      client certificate for mutual TLS (with --key)\n"
            "  --key FILE       its private key\n"
            "  --sni NAME       the server name to send and to verify (default: the URL's host)\n"
            "  --insecure       do not verify the server's certificate (tests only)\n"
            "  A TLS failure (unknown CA, wrong name, expired certificate) exits 69 and says\n"
            "  which.\n"
            "\n"
            "Environment:\n"
            "  CREDISSON_URL    the default for --url\n"
            "\n"
            "%s",
            commands, cli_exit_codes_text);
}

int main(int argc, char **argv)
{
    /* No OpenSSL clean-up at exit: doctor's and verify's TLS relays (tlsdial.c) are detached
     * threads that may still be inside OpenSSL when main returns, and OpenSSL's atexit
     * handler frees the locks they hold (TSan: a race in CRYPTO_THREAD_lock_free). The
     * process's memory goes with it anyway. */
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
    global_opts g = {0};
    g.url = getenv("CREDISSON_URL");
    if (g.url == NULL || *g.url == '\0')
        g.url = CLI_DEFAULT_URL;

    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) {
            usage_main(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("credisson %s\n", crd_version());
            return 0;
        } else if (cli_take_opt(argc, argv, &i, "--url", &v)) {
            if (v == NULL || *v == '\0')
                return cli_usage_error(NULL, "--url needs a value");
            g.url = v;
        } else if (cli_take_opt(argc, argv, &i, "--watchdog-ms", &v)) {
            if (v == NULL)
                return cli_usage_error(NULL, "--watchdog-ms needs a value in milliseconds");
            if (!cli_parse_ms(v, &g.watchdog_ms) || g.watchdog_ms == 0)
                return cli_usage_error(
                    NULL, "--watchdog-ms: '%s' is not a positive number of milliseconds", v);
        } else if (cli_take_opt(argc, argv, &i, "--cacert", &v) ||
                   cli_take_opt(argc, argv, &i, "--cacertdir", &v) ||
                   cli_take_opt(argc, argv, &i, "--cert", &v) ||
                   cli_take_opt(argc, argv, &i, "--key", &v) ||
                   cli_take_opt(argc, argv, &i, "--sni", &v)) {
            if (v == NULL || *v == '\0')
                return cli_usage_error(NULL, "%s needs a value", a);
            const char **slot = strncmp(a, "--cacertdir", 11) == 0 ? &g.cacertdir
                                : strncmp(a, "--cacert", 8) == 0   ? &g.cacert
                                : strncmp(a, "--cert", 6) == 0     ? &g.cert
                                : strncmp(a, "--key", 5) == 0      ? &g.key
                                                                   : &g.sni;
            *slot = v;
        } else if (cli_take_opt(argc, argv, &i, "--label", &v)) {
            if (v == NULL || strlen(v) > 200)
                return cli_usage_error(NULL, "--label needs a text of at most 200 bytes");
            g.label = v;
        } else if (strcmp(a, "--insecure") == 0) {
            g.insecure = true;
        } else if (a[0] == '-') {
            return cli_usage_error(NULL, "unknown option '%s'", a);
        } else {
            break;
        }
    }
    if (i >= argc)
        return cli_usage_error(NULL, "missing COMMAND (%s)", command_names());
    bool tls_opts = g.cacert || g.cacertdir || g.cert || g.key || g.sni || g.insecure;
    if (tls_opts && strncmp(g.url, "rediss://", 9) != 0)
        return cli_usage_error(NULL, "TLS options need a rediss:// URL");
    const char *cmd = argv[i];
    for (size_t k = 0; k < NCOMMANDS; k++)
        if (strcmp(cmd, COMMANDS[k].name) == 0)
            return COMMANDS[k].run(&g, argc - i, argv + i);
    return cli_usage_error(NULL, "unknown command '%s' (%s)", cmd, command_names());
}
