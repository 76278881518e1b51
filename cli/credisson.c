/*
 * cli/credisson.c -- the `credisson` command-line tool.
 *
 *   credisson [--url URL] [--watchdog-ms N] run [--wait MS] [--lease MS] [--fair|--read|--write]
 *             [--on-lost=term|kill|ignore] [--grace MS] NAME -- CMD [ARG...]
 *   credisson [--url URL] status [--json] NAME
 *   credisson [--url URL] unlock --force [--fair|--read|--write] NAME
 *   credisson [--url URL] watch [--json] [--count N] [--timeout MS] [--interval MS] NAME
 *
 * `run` holds a Redisson-compatible lock while a child command runs. The main thread
 * acquires the lock, forks CMD, and then sleeps in poll() on one self-pipe that three
 * sources write to: the SIGCHLD handler (the child changed state), the SIGINT/SIGTERM/
 * SIGHUP handler (a signal to forward that arrived before the child's pid was known),
 * and the library's watchdog callback, which runs on the watchdog thread and only
 * stores a flag and writes a byte. Signal handlers may run on any thread of the
 * process (the library's threads do not block signals), so they touch only
 * sig_atomic_t / lock-free atomics and call only async-signal-safe functions.
 *
 * `status` needs raw reads the public API does not offer (the list of holders, the
 * Redis type), so it opens its own hiredis connection from the same URL forms the
 * library accepts and reads TYPE, HGETALL and PTTL in one MULTI/EXEC snapshot; with
 * --json it also opens a library client to report that client's metrics.
 *
 * `watch` uses two such connections: one subscribed to every channel a lock of any kind
 * publishes on, one that re-reads the lock on each message and at least once per
 * --interval (or as soon as the key's TTL runs out: an expiry publishes nothing), and
 * prints the difference from the previous read as events.
 *
 * Exit codes follow sysexits(3) where one fits; they are listed in usage_main().
 */
#include <credisson.h>

#include <hiredis/hiredis.h>

#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- exit codes -------------------------------------------------------------------- */

enum {
    EXIT_USAGE = 64,        /* EX_USAGE: bad command line */
    EXIT_UNAVAILABLE = 69,  /* EX_UNAVAILABLE: Redis unreachable or refusing */
    EXIT_LOST = 70,         /* EX_SOFTWARE: the lock was lost while CMD ran */
    EXIT_OSERR = 71,        /* EX_OSERR: fork, pipe or memory failure */
    EXIT_NOT_ACQUIRED = 75, /* EX_TEMPFAIL: not acquired within --wait */
    EXIT_CANNOT_EXEC = 126,
    EXIT_NOT_FOUND = 127
};

#define DEFAULT_URL "redis://127.0.0.1:6379"
/* How long CMD gets to exit after SIGTERM (lock lost) before it is sent SIGKILL. */
#define KILL_GRACE_MS 10000

static const char *prog = "credisson";

/* ---- help texts -------------------------------------------------------------------- */

static const char exit_codes_text[] =
    "Exit codes:\n"
    "  0      success (run: CMD exited with 0)\n"
    "  N      run: CMD's own exit status N\n"
    "  64     usage error (unknown option, missing NAME or '--', bad number or URL)\n"
    "  69     Redis cannot be reached, or it refused the connection (AUTH, SELECT) or a\n"
    "         command (e.g. NAME holds a value that is not a lock)\n"
    "  70     run: the lock was lost while CMD ran (force-unlocked, expired, or renewal\n"
    "         failed for longer than the lease); CMD was stopped as --on-lost says (default:\n"
    "         SIGTERM, SIGKILL after --grace) or, with --on-lost=ignore, ran to its end\n"
    "  71     operating-system error (fork, pipe, out of memory)\n"
    "  75     run: the lock was not acquired within --wait\n"
    "  126    run: CMD could not be executed; 127: CMD was not found\n"
    "  128+S  run: CMD was killed by signal S\n"
    "status, unlock and watch exit 0 whatever the lock's state (watch: after --count\n"
    "events or --timeout), 64 on a usage error and 69 when Redis is unreachable.\n";

static void usage_main(FILE *f)
{
    fprintf(f,
            "usage: credisson [--url URL] [--watchdog-ms N] COMMAND [OPTIONS] NAME ...\n"
            "\n"
            "Redisson-compatible distributed locks from the shell: a lock NAME taken here is\n"
            "the same lock as Java Redisson's getLock(NAME).\n"
            "\n"
            "Commands:\n"
            "  run [--wait MS] [--lease MS] [--fair|--read|--write]\n"
            "      [--on-lost=term|kill|ignore] [--grace MS] NAME -- CMD [ARG...]\n"
            "                   run CMD while holding lock NAME\n"
            "  status [--json] NAME\n"
            "                   show the kind, holders, TTL and queue of lock NAME\n"
            "  unlock --force [--fair|--read|--write] NAME\n"
            "                   delete lock NAME whoever holds it and wake a waiter\n"
            "  watch [--json] [--count N] [--timeout MS] [--interval MS] NAME\n"
            "                   print hold and release events of lock NAME as they happen\n"
            "\n"
            "Global options (before COMMAND):\n"
            "  --url URL        redis://[[user]:password@]host[:port][/db] or\n"
            "                   unix:///path/to.sock[?db=N]; %%XX escapes in user and password\n"
            "                   (default: $CREDISSON_URL, else " DEFAULT_URL ")\n"
            "  --watchdog-ms N  lease of a lock held without --lease; the watchdog renews it\n"
            "                   every N/3 ms (default 30000, Redisson's lockWatchdogTimeout)\n"
            "  -h, --help       this help; 'credisson COMMAND --help' describes a command\n"
            "  --version        print the version\n"
            "\n"
            "Environment:\n"
            "  CREDISSON_URL    the default for --url\n"
            "\n"
            "%s",
            exit_codes_text);
}

static void usage_run(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] run [--wait MS] [--lease MS] [--fair|--read|--write]\n"
            "                 [--on-lost=term|kill|ignore] [--grace MS] NAME -- CMD [ARG...]\n"
            "\n"
            "Acquire lock NAME, run CMD as a child process, release the lock when CMD exits.\n"
            "SIGINT, SIGTERM and SIGHUP are forwarded to CMD. Interrupting credisson while it\n"
            "still waits for the lock simply ends it.\n"
            "\n"
            "Options:\n"
            "  --wait MS    give up after MS milliseconds without the lock (exit 75);\n"
            "               0 tries once; default: wait as long as it takes\n"
            "  --lease MS   the lock expires MS milliseconds after it was taken unless CMD has\n"
            "               exited; if the lease runs out first the lock is lost (see\n"
            "               --on-lost) and the exit status is 70. Default (or 0): no fixed\n"
            "               lease, the watchdog renews the lock while CMD runs (--watchdog-ms)\n"
            "  --on-lost=term|kill|ignore\n"
            "               what to do to CMD when the lock is lost while it runs:\n"
            "               term (default): SIGTERM, then SIGKILL if CMD is still running\n"
            "               after --grace; kill: SIGKILL at once; ignore: let CMD run to its\n"
            "               end. In every case the exit status is 70\n"
            "  --grace MS   how long CMD has to exit after SIGTERM (default 10000)\n"
            "  --fair       use the fair lock of NAME (Redisson getFairLock): waiting processes,\n"
            "               in any language, get it in the order they asked\n"
            "  --read       take the read lock of NAME (Redisson getReadWriteLock(NAME)\n"
            "               .readLock()): many readers at once, no writer\n"
            "  --write      take the write lock of NAME: no other reader or writer\n"
            "  -h, --help   this help\n"
            "\n"
            "If releasing the lock fails for a network reason after CMD exited, a warning is\n"
            "printed, the exit status stays CMD's, and the lock expires after its lease.\n"
            "\n"
            "%s",
            exit_codes_text);
}

static void usage_status(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] status [--json] NAME\n"
            "\n"
            "Show lock NAME as stored in Redis (one snapshot of TYPE, HGETALL and PTTL).\n"
            "\n"
            "Options:\n"
            "  --json       print one JSON object instead of lines of text\n"
            "  -h, --help   this help\n"
            "\n"
            "Kinds:\n"
            "  rlock   a hash of owner fields \"<client-uuid>:<id>\" -> hold count (RLock,\n"
            "          and also a fair lock's hash)\n"
            "  rwlock  a hash with a \"mode\" field (RReadWriteLock); write holders' fields end\n"
            "          in \":write\"\n"
            "  none    the key does not exist\n"
            "  other   anything else (see \"type\"; a hash whose values are not counts is\n"
            "          \"other\" with type \"hash\")\n"
            "\n"
            "Text output, one fact per line:\n"
            "  name: NAME\n"
            "  kind: rlock|rwlock|none|other\n"
            "  type: TYPE                  (other only: the Redis type)\n"
            "  mode: read|write            (rwlock only)\n"
            "  ttl_ms: N                   (PTTL: -2 absent, -1 no TTL)\n"
            "  holders: K\n"
            "  holder: OWNER count=C       (K lines)\n"
            "  read_hold: OWNER index=I ttl_ms=T   (rwlock: one line per read hold and its\n"
            "                              own timeout key's PTTL)\n"
            "  queue: Q                    (fair lock waiters, if any)\n"
            "  waiter: OWNER deadline_ms=D remaining_ms=R   (Q lines, head first)\n"
            "\n"
            "JSON output (schema; fields may be added later, never removed):\n"
            "  {\n"
            "    \"name\":    string,\n"
            "    \"kind\":    \"rlock\" | \"rwlock\" | \"none\" | \"other\",\n"
            "    \"type\":    string     Redis type: \"hash\", \"string\", \"none\", ...,\n"
            "    \"mode\":    string     rwlock only: \"read\" or \"write\",\n"
            "    \"ttl_ms\":  integer    PTTL of the key: -2 absent, -1 no TTL,\n"
            "    \"holders\": [ { \"owner\": string, \"count\": integer }, ... ],\n"
            "    \"writer\":  string|null   rwlock only: the write holder's owner field,\n"
            "    \"read_holds\": [ { \"owner\": string, \"index\": integer,\n"
            "                      \"ttl_ms\": integer }, ... ]   rwlock only,\n"
            "    \"queue\":   [ { \"owner\": string, \"deadline_ms\": integer|null,\n"
            "                  \"remaining_ms\": integer|null }, ... ]   fair-lock waiters,\n"
            "                 head first; deadlines are epoch ms (the waiters' clocks)\n"
            "    \"client\":  {           this CLI's own library client (crd_client_metrics):\n"
            "      \"id\": string (its UUID), \"version\": string (library version),\n"
            "      \"acquisitions\", \"contended\", \"acquire_busy\", \"releases\",\n"
            "      \"renewals\", \"renewal_failures\", \"locks_lost\", \"connects\",\n"
            "      \"connection_failures\", \"subscribes\", \"holds_now\": integer >= 0,\n"
            "      \"wait_ms_p50\", \"wait_ms_p99\", \"wait_ms_max\", \"hold_ms_p50\",\n"
            "      \"hold_ms_p99\", \"hold_ms_max\": integer ms\n"
            "    }\n"
            "  }\n"
            "\n"
            "Exit codes: 0 (whatever the lock's state), 64 usage error, 69 Redis unreachable\n"
            "or refusing.\n");
}

static void usage_watch(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] watch [--json] [--count N] [--timeout MS]\n"
            "                 [--interval MS] NAME\n"
            "\n"
            "Print hold and release events of lock NAME (any kind: lock, fair lock, read-write\n"
            "lock) as they happen. Subscribes to redisson_lock__channel:{NAME},\n"
            "redisson_rwlock:{NAME}, the fair waiters' channels redisson_lock__channel:{NAME}:*\n"
            "and __keyspace@DB__:NAME, and re-reads the lock (HGETALL, PTTL) on every message,\n"
            "when its TTL runs out (an expiry publishes nothing), and every --interval. A\n"
            "release that publishes (an unlock of a lock or read-write lock, a fair unlock\n"
            "with a waiter queued, a force-unlock) is printed within milliseconds; an acquire\n"
            "publishes nothing, so it shows at the next read (at once if the server has\n"
            "keyspace notifications on: notify-keyspace-events Kghx).\n"
            "\n"
            "Options:\n"
            "  --json         one JSON object per line instead of text\n"
            "  --count N      exit 0 after N events\n"
            "  --timeout MS   exit 0 after MS milliseconds\n"
            "  --interval MS  longest time between two reads (default 250, at least 10)\n"
            "  -h, --help     this help\n"
            "\n"
            "Events (text: \"HH:MM:SS.mmm EVENT NAME owner=OWNER ...\"):\n"
            "  held     a holder found at start (printed once; not counted by --count)\n"
            "  acquire  a new holder: count=C ttl_ms=T [mode=read|write]\n"
            "  count    a holder's hold count changed (reentry or partial release)\n"
            "  release  a holder is gone: cause=unlock (a message was published), expired\n"
            "           (its TTL ran out) or removed (deleted without a message)\n"
            "JSON: {\"time_ms\": epoch ms, \"event\": string, \"name\": string,\n"
            "       \"owner\": string, \"count\": integer, \"ttl_ms\": integer (not on\n"
            "       release), \"mode\": string (rwlock only), \"cause\": string (release\n"
            "       only)}\n"
            "\n"
            "Exit codes: 0 after --count events or --timeout, 64 usage error, 69 Redis\n"
            "unreachable, refusing, or the connection was lost.\n");
}

static void usage_unlock(FILE *f)
{
    fprintf(f, "usage: credisson [GLOBAL OPTIONS] unlock --force [--fair|--read|--write] NAME\n"
               "\n"
               "Delete lock NAME whoever holds it and wake a waiter (Redisson's forceUnlock:\n"
               "DEL, then PUBLISH on its channel). The holders find out that they lost it; a\n"
               "'credisson run' holding it exits with 70. Prints whether a lock was deleted.\n"
               "--force is required: a lock belongs to the process that took it, so there is no\n"
               "ordinary unlock from the command line.\n"
               "\n"
               "Options:\n"
               "  --force      required\n"
               "  --fair       NAME is a fair lock: wake the head of its queue instead\n"
               "  --read       delete NAME only if it is read-locked (publishes 0)\n"
               "  --write      delete NAME only if it is write-locked (publishes 1)\n"
               "  -h, --help   this help\n"
               "\n"
               "Exit codes: 0 (whether or not a lock was deleted), 64 usage error, 69 Redis\n"
               "unreachable or refusing.\n");
}

/* One line naming the problem, plus where to read more. Returns EXIT_USAGE. */
static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cmd != NULL)
        fprintf(stderr, "%s %s: %s (see '%s %s --help')\n", prog, cmd, msg, prog, cmd);
    else
        fprintf(stderr, "%s: %s (see '%s --help')\n", prog, msg, prog);
    return EXIT_USAGE;
}

/* ---- small helpers ------------------------------------------------------------------ */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A duration in ms: decimal digits only (no sign, no spaces), at most
 * CRD_DURATION_MAX_MS. */
static bool parse_ms(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0')
        return false;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (*p - '0');
        if (v > CRD_DURATION_MAX_MS)
            return false;
    }
    *out = v;
    return true;
}

/* Matches "--opt VALUE" and "--opt=VALUE". On a match stores the value (NULL when
 * "--opt" is the last argument) and advances *i past what it consumed. */
static bool take_opt(int argc, char **argv, int *i, const char *opt, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(opt);
    if (strncmp(a, opt, n) != 0)
        return false;
    if (a[n] == '=') {
        *val = a + n + 1;
        return true;
    }
    if (a[n] != '\0')
        return false;
    *val = (*i + 1 < argc) ? argv[*i + 1] : NULL;
    if (*val != NULL)
        (*i)++;
    return true;
}

static bool is_help(const char *a)
{
    return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

/* Exit code for a failed crd_client_new(), crd_lock_new() or Redis call. */
static int exit_for_status(crd_status st)
{
    switch (st) {
    case CRD_OK:
        return 0;
    case CRD_INVALID_ARGUMENT:
        return EXIT_USAGE;
    case CRD_BUSY:
    case CRD_TIMEOUT:
        return EXIT_NOT_ACQUIRED;
    case CRD_LOCK_LOST:
    case CRD_NOT_OWNER:
        return EXIT_LOST;
    case CRD_NO_MEMORY:
    case CRD_FORKED:
        return EXIT_OSERR;
    case CRD_IO:
    case CRD_PROTOCOL:
    case CRD_SERVER:
    case CRD_CLOSED:
    case CRD_AUTH:
    case CRD_DEADLOCK:
        return EXIT_UNAVAILABLE;
    }
    return EXIT_UNAVAILABLE;
}

/* "credisson: WHAT: <status text>: <detail>" on one line. */
static void report(const char *what, crd_status st, const crd_client *client)
{
    const char *detail = client ? crd_client_errmsg(client) : "";
    if (detail != NULL && *detail != '\0')
        fprintf(stderr, "%s: %s: %s: %s\n", prog, what, crd_strerror(st), detail);
    else
        fprintf(stderr, "%s: %s: %s\n", prog, what, crd_strerror(st));
}

/* url with the password replaced by "***", for messages (logs must not keep secrets). */
static const char *redact_url(const char *url, char *buf, size_t len)
{
    const char *s = strstr(url, "://");
    if (s != NULL)
        s += 3;
    const char *slash = s ? strchr(s, '/') : NULL;
    const char *at = NULL;
    for (const char *p = s; p != NULL && *p && p != slash; p++)
        if (*p == '@')
            at = p;
    if (at == NULL) {
        snprintf(buf, len, "%s", url);
        return buf;
    }
    const char *colon = memchr(s, ':', (size_t)(at - s));
    const char *cut = colon ? colon + 1 : s;
    snprintf(buf, len, "%.*s***%s", (int)(cut - url), url, at);
    return buf;
}

/* ---- global options and the client ---------------------------------------------------- */

typedef struct global_opts {
    const char *url;
    int64_t watchdog_ms; /* 0: library default */
} global_opts;

/* The watchdog callback's findings, read by the main thread. */
static atomic_int g_lost;        /* CRD_EVENT_LOCK_LOST seen */
static atomic_int g_lost_status; /* its crd_status */
static atomic_int g_failing;     /* renewals failing: 1 = new, main thread prints */
static atomic_int g_recovered;   /* renewals recovered: 1 = new */

/* Self-pipe: [0] polled by the main thread, [1] written by handlers and callbacks. */
static int g_pipe[2] = {-1, -1};

static void wake(char c)
{
    if (g_pipe[1] >= 0) {
        ssize_t r = write(g_pipe[1], &c, 1); /* non-blocking; a full pipe already wakes */
        (void)r;
    }
}

/* Runs on the library's watchdog thread: record and wake, nothing else. */
static void on_event(void *user_data, const crd_event *ev)
{
    (void)user_data;
    switch (ev->kind) {
    case CRD_EVENT_LOCK_LOST:
        atomic_store(&g_lost_status, (int)ev->status);
        atomic_store(&g_lost, 1);
        break;
    case CRD_EVENT_RENEWAL_FAILING:
        atomic_store(&g_failing, 1);
        break;
    case CRD_EVENT_RENEWAL_RECOVERED:
        atomic_store(&g_recovered, 1);
        break;
    }
    wake('e');
}

static const char *check_url(const char *url, char *why, size_t cap);

/* The usage error for a --url the library's parser refuses (the password redacted). */
static int bad_url_error(const global_opts *g, const char *why)
{
    char shown[512];
    return usage_error(NULL, "bad --url '%s': %s", redact_url(g->url, shown, sizeof shown), why);
}

/* The last branch of the option loops of unlock, status and watch: "-- NAME" (for a
 * name that starts with '-'), an unknown option, the lock NAME, or one argument too
 * many. Returns 0, or the usage error's exit code. */
static int take_name_arg(const char *cmd, int argc, char **argv, int *i, const char **name)
{
    const char *a = argv[*i];
    if (strcmp(a, "--") == 0 && *name == NULL && *i + 2 == argc) {
        *name = argv[++*i];
        return 0;
    }
    if (a[0] == '-' && a[1] != '\0')
        return usage_error(cmd, "unknown option '%s'", a);
    if (*name != NULL)
        return usage_error(cmd, "unexpected argument '%s'", a);
    *name = a;
    return 0;
}

static int make_client(const global_opts *g, bool with_events, crd_client **out)
{
    /* The URL is checked first (the library's parser), so that every command reports a
     * bad URL the same way and no message echoes a password. */
    char why_buf[256];
    const char *why = check_url(g->url, why_buf, sizeof why_buf);
    if (why != NULL) {
        *out = NULL;
        return bad_url_error(g, why);
    }
    crd_options o;
    crd_options_init(&o);
    o.url = g->url;
    o.pool_size = 1;
    if (g->watchdog_ms > 0)
        o.watchdog_timeout_ms = g->watchdog_ms;
    if (with_events)
        o.on_event = on_event;
    crd_client *c = NULL;
    crd_status st = crd_client_new(&o, &c);
    if (st != CRD_OK) {
        char what[600], shown[512];
        redact_url(g->url, shown, sizeof shown);
        if (st == CRD_INVALID_ARGUMENT)
            snprintf(what, sizeof what, "bad --url '%s' or option", shown);
        else
            snprintf(what, sizeof what, "cannot connect to %s", shown);
        report(what, st, c);
        crd_client_free(c);
        *out = NULL;
        return exit_for_status(st);
    }
    *out = c;
    return 0;
}

/* ---- run ---------------------------------------------------------------------------- */

/* Where `run` is, as seen by the signal handler. */
enum { PHASE_WAITING = 0, PHASE_STARTING = 1, PHASE_RUNNING = 2, PHASE_DONE = 3 };
/* Lock-free atomics, not volatile sig_atomic_t: the handler may run on another thread,
 * and C11 makes lock-free atomics safe in signal handlers too. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "signal handlers need lock-free atomic_int");
static atomic_int g_phase = PHASE_WAITING;
static atomic_int g_child = 0;       /* CMD's pid while it can be signalled */
static atomic_int g_pending_sig = 0; /* arrived while g_child was not set */

/* SIGINT, SIGTERM, SIGHUP, SIGCHLD. May run on any thread. */
static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int saved_errno = errno;
    pid_t child = (pid_t)atomic_load(&g_child);
    if (sig == SIGCHLD) {
        wake('c');
    } else if (child > 0) {
        /* A terminal's SIGINT/SIGHUP (sent by the kernel) already reached CMD, which
         * is in our process group: sending it again would count twice. */
        if (si == NULL || si->si_code != SI_KERNEL)
            kill(child, sig);
    } else if (atomic_load(&g_phase) == PHASE_WAITING) {
        /* Still waiting for the lock: nothing to clean up, die of the signal. */
        signal(sig, SIG_DFL);
        raise(sig);
    } else {
        /* Between acquire and fork, or after CMD exited: the main loop forwards it. */
        atomic_store(&g_pending_sig, sig);
        wake('s');
    }
    errno = saved_errno;
}

static int install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&sa.sa_mask, sigs[i]);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            return -1;
    return 0;
}

static int make_self_pipe(void)
{
    if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "%s: run: cannot create a pipe: %s\n", prog, strerror(errno));
        return EXIT_OSERR;
    }
    return 0;
}

static void drain_pipe(void)
{
    char buf[64];
    while (read(g_pipe[0], buf, sizeof buf) > 0) {
    }
}

/* File descriptors open when the tool started: the caller's, which CMD inherits. */
static int *g_start_fds;
static size_t g_start_nfds;

static void remember_start_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = atoi(e->d_name);
        if (fd == dirfd(d))
            continue;
        if (g_start_nfds == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            int *n = realloc(g_start_fds, ncap * sizeof *n);
            if (n == NULL)
                break;
            g_start_fds = n;
            cap = ncap;
        }
        g_start_fds[g_start_nfds++] = fd;
    }
    closedir(d);
}

/* Mark every descriptor the library opened since (Redis connections) close-on-exec,
 * so CMD does not keep our sockets open after we exit. */
static void cloexec_library_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = atoi(e->d_name);
        bool inherited = fd <= 2 || fd == dirfd(d);
        for (size_t i = 0; !inherited && i < g_start_nfds; i++)
            inherited = g_start_fds[i] == fd;
        if (inherited)
            continue;
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0 && !(fl & FD_CLOEXEC))
            fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
    closedir(d);
}

/* fork + execvp. Returns the pid, or -1 with *exit_code set (and a message printed). */
static pid_t spawn(char **cmd, int *exit_code)
{
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        fprintf(stderr, "%s: run: cannot create a pipe: %s\n", prog, strerror(errno));
        *exit_code = EXIT_OSERR;
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s: run: cannot fork: %s\n", prog, strerror(errno));
        close(errpipe[0]);
        close(errpipe[1]);
        *exit_code = EXIT_OSERR;
        return -1;
    }
    if (pid == 0) {
        /* Child: only async-signal-safe calls until exec. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(SIGINT, &dfl, NULL);
        sigaction(SIGTERM, &dfl, NULL);
        sigaction(SIGHUP, &dfl, NULL);
        sigaction(SIGCHLD, &dfl, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvp(cmd[0], cmd);
        int err = errno;
        ssize_t w = write(errpipe[1], &err, sizeof err);
        (void)w;
        _exit(err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC);
    }
    close(errpipe[1]);
    int err = 0;
    ssize_t n;
    do {
        n = read(errpipe[0], &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    close(errpipe[0]);
    if (n == (ssize_t)sizeof err) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        fprintf(stderr, "%s: run: cannot run '%s': %s\n", prog, cmd[0], strerror(err));
        *exit_code = err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
        return -1;
    }
    return pid;
}

/* Has the child exited? Looks without reaping (WNOWAIT), so g_child can be cleared
 * before the pid is freed for reuse; then reaps. Returns true with *status set. */
static bool child_exited(pid_t pid, int *status)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0)
        return false;
    atomic_store(&g_child, 0);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    return true;
}

static void print_event_warnings(const char *name, crd_lock *lock)
{
    if (atomic_exchange(&g_failing, 0)) {
        int64_t v = 0;
        crd_lock_validity_ms(lock, &v);
        fprintf(stderr, "%s: warning: renewing lock '%s' fails; still valid for %lld ms\n", prog,
                name, (long long)v);
    }
    if (atomic_exchange(&g_recovered, 0))
        fprintf(stderr, "%s: lock '%s' is renewed again\n", prog, name);
}

/* ---- lock kinds ---------------------------------------------------------------------- */

typedef enum lock_kind { KIND_RLOCK, KIND_FAIR, KIND_READ, KIND_WRITE } lock_kind;

/* A lock of any kind; rw is set for --read/--write and owns lock. */
typedef struct cli_lock {
    crd_lock *lock;
    crd_rwlock *rw;
} cli_lock;

/* Parses --fair/--read/--write into *kind; false if a is none of them. */
static bool take_kind(const char *a, lock_kind *kind, int *seen)
{
    lock_kind k;
    if (strcmp(a, "--fair") == 0)
        k = KIND_FAIR;
    else if (strcmp(a, "--read") == 0)
        k = KIND_READ;
    else if (strcmp(a, "--write") == 0)
        k = KIND_WRITE;
    else
        return false;
    if (*seen && *kind != k)
        *seen = 2; /* conflicting kinds: reported by the caller */
    else
        *seen = 1;
    *kind = k;
    return true;
}

static crd_status open_lock(crd_client *client, lock_kind kind, const char *name, cli_lock *out)
{
    out->lock = NULL;
    out->rw = NULL;
    switch (kind) {
    case KIND_FAIR:
        return crd_fair_lock_new(client, name, &out->lock);
    case KIND_READ:
    case KIND_WRITE: {
        crd_status st = crd_rwlock_new(client, name, &out->rw);
        if (st == CRD_OK)
            out->lock = kind == KIND_READ ? crd_rwlock_read(out->rw) : crd_rwlock_write(out->rw);
        return st;
    }
    case KIND_RLOCK:
    default:
        return crd_lock_new(client, name, &out->lock);
    }
}

static void close_lock(cli_lock *l)
{
    if (l->rw != NULL)
        crd_rwlock_free(l->rw);
    else
        crd_lock_free(l->lock);
    l->lock = NULL;
    l->rw = NULL;
}

/* What `run` does to CMD when the lock is lost while CMD runs (--on-lost). */
typedef enum on_lost_mode { ON_LOST_TERM, ON_LOST_KILL, ON_LOST_IGNORE } on_lost_mode;

static int cmd_run(const global_opts *g, int argc, char **argv)
{
    lock_kind kind = KIND_RLOCK;
    int kinds_seen = 0;
    int64_t wait_ms = CRD_WAIT_FOREVER, lease_ms = CRD_LEASE_WATCHDOG;
    on_lost_mode on_lost = ON_LOST_TERM;
    int64_t grace_ms = KILL_GRACE_MS;
    const char *name = NULL;
    char **cmd = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (strcmp(a, "--") == 0) {
            if (i + 1 >= argc)
                return usage_error("run", "missing CMD after '--'");
            cmd = argv + i + 1;
            break;
        } else if (is_help(a)) {
            usage_run(stdout);
            return 0;
        } else if (take_opt(argc, argv, &i, "--wait", &v)) {
            if (v == NULL)
                return usage_error("run", "--wait needs a value in milliseconds");
            if (!parse_ms(v, &wait_ms))
                return usage_error("run",
                                   "--wait: '%s' is not a non-negative number of milliseconds", v);
        } else if (take_opt(argc, argv, &i, "--lease", &v)) {
            if (v == NULL)
                return usage_error("run", "--lease needs a value in milliseconds");
            if (!parse_ms(v, &lease_ms))
                return usage_error("run",
                                   "--lease: '%s' is not a non-negative number of milliseconds", v);
            if (lease_ms == 0)
                lease_ms = CRD_LEASE_WATCHDOG;
        } else if (take_opt(argc, argv, &i, "--on-lost", &v)) {
            if (v != NULL && strcmp(v, "term") == 0)
                on_lost = ON_LOST_TERM;
            else if (v != NULL && strcmp(v, "kill") == 0)
                on_lost = ON_LOST_KILL;
            else if (v != NULL && strcmp(v, "ignore") == 0)
                on_lost = ON_LOST_IGNORE;
            else
                return usage_error("run", "--on-lost must be term, kill or ignore");
        } else if (take_opt(argc, argv, &i, "--grace", &v)) {
            if (v == NULL)
                return usage_error("run", "--grace needs a value in milliseconds");
            if (!parse_ms(v, &grace_ms))
                return usage_error("run",
                                   "--grace: '%s' is not a non-negative number of milliseconds", v);
        } else if (take_kind(a, &kind, &kinds_seen)) {
            if (kinds_seen > 1)
                return usage_error("run", "--fair, --read and --write exclude each other");
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("run", "unknown option '%s'", a);
        } else if (name == NULL) {
            name = a;
        } else {
            return usage_error("run", "unexpected '%s': put '--' before CMD", a);
        }
    }
    if (name == NULL)
        return usage_error("run", "missing lock NAME");
    if (cmd == NULL)
        return usage_error("run", "missing '--' and CMD after NAME");

    remember_start_fds();
    int rc = make_self_pipe();
    if (rc != 0)
        return rc;
    if (install_handlers() != 0) {
        fprintf(stderr, "%s: run: cannot install signal handlers: %s\n", prog, strerror(errno));
        return EXIT_OSERR;
    }

    crd_client *client;
    rc = make_client(g, true, &client);
    if (rc != 0)
        return rc;
    cli_lock held;
    crd_status st = open_lock(client, kind, name, &held);
    crd_lock *lock = held.lock;
    if (st != CRD_OK) {
        report("run: bad lock name", st, client);
        crd_client_free(client);
        return exit_for_status(st);
    }

    st = crd_lock_acquire(lock, wait_ms, lease_ms);
    if (st != CRD_OK) {
        char what[300];
        if (st == CRD_BUSY || st == CRD_TIMEOUT)
            snprintf(what, sizeof what, "run: lock '%.200s' not acquired within %lld ms", name,
                     (long long)wait_ms);
        else
            snprintf(what, sizeof what, "run: cannot acquire lock '%.200s'", name);
        if (st == CRD_BUSY || st == CRD_TIMEOUT)
            fprintf(stderr, "%s: %s\n", prog, what);
        else
            report(what, st, client);
        close_lock(&held);
        crd_client_free(client);
        return exit_for_status(st);
    }
    atomic_store(&g_phase, PHASE_STARTING);

    /* With a fixed lease, CMD may only run while the lease is trusted. */
    int64_t lease_deadline = -1;
    if (lease_ms > 0) {
        int64_t valid = 0;
        if (crd_lock_validity_ms(lock, &valid) != CRD_OK)
            valid = lease_ms;
        lease_deadline = now_ms() + valid;
    }

    cloexec_library_fds();
    int exit_code = 0;
    pid_t pid = spawn(cmd, &exit_code);
    if (pid < 0) {
        atomic_store(&g_phase, PHASE_DONE);
        crd_lock_release(lock);
        close_lock(&held);
        crd_client_free(client);
        return exit_code;
    }
    atomic_store(&g_child, (int)pid);
    atomic_store(&g_phase, PHASE_RUNNING);

    /* lost: the lock is gone; acted: --on-lost was carried out; term_sent: SIGTERM went
     * out and kill_deadline (INT64_MAX once SIGKILL went out) is when SIGKILL follows. */
    bool lost = false, acted = false, term_sent = false;
    int64_t kill_deadline = -1;
    static const char *const action_text[] = {
        [ON_LOST_TERM] = "sending CMD SIGTERM",
        [ON_LOST_KILL] = "killing CMD (SIGKILL)",
        [ON_LOST_IGNORE] = "CMD keeps running (--on-lost=ignore), exit status will be 70"};
    int wstatus = 0;
    for (;;) {
        int sig = atomic_exchange(&g_pending_sig, 0);
        if (sig != 0)
            kill(pid, sig);
        if (child_exited(pid, &wstatus))
            break;
        print_event_warnings(name, lock);
        if (!lost && atomic_load(&g_lost)) {
            lost = true;
            fprintf(stderr, "%s: run: lock '%s' lost while CMD ran (%s); %s\n", prog, name,
                    crd_strerror((crd_status)atomic_load(&g_lost_status)), action_text[on_lost]);
        }
        if (!lost && lease_deadline >= 0 && now_ms() >= lease_deadline) {
            lost = true;
            fprintf(stderr,
                    "%s: run: the %lld ms lease of lock '%s' ran out while CMD ran; %s\n", prog,
                    (long long)lease_ms, name, action_text[on_lost]);
        }
        if (lost && !acted) {
            acted = true;
            if (on_lost == ON_LOST_TERM) {
                kill(pid, SIGTERM);
                term_sent = true;
                kill_deadline = now_ms() + grace_ms;
            } else if (on_lost == ON_LOST_KILL) {
                kill(pid, SIGKILL);
                term_sent = true;
                kill_deadline = INT64_MAX;
            }
        }
        if (term_sent && now_ms() >= kill_deadline) {
            kill(pid, SIGKILL);
            kill_deadline = INT64_MAX;
        }

        int64_t until = -1;
        if (term_sent && kill_deadline != INT64_MAX)
            until = kill_deadline;
        else if (!lost && lease_deadline >= 0)
            until = lease_deadline;
        int timeout = -1;
        if (until >= 0) {
            int64_t left = until - now_ms();
            timeout = left <= 0 ? 0 : (left > 60000 ? 60000 : (int)left);
        }
        struct pollfd pfd = {.fd = g_pipe[0], .events = POLLIN};
        if (poll(&pfd, 1, timeout) > 0)
            drain_pipe();
    }
    atomic_store(&g_phase, PHASE_DONE);

    if (WIFEXITED(wstatus))
        exit_code = WEXITSTATUS(wstatus);
    else if (WIFSIGNALED(wstatus))
        exit_code = 128 + WTERMSIG(wstatus);
    else
        exit_code = EXIT_OSERR;

    st = crd_lock_release(lock);
    if (st == CRD_IO) /* the library retried once; the latch makes another try safe */
        st = crd_lock_release(lock);
    if (lost) {
        exit_code = EXIT_LOST;
    } else if (st == CRD_LOCK_LOST || st == CRD_NOT_OWNER) {
        fprintf(stderr, "%s: run: lock '%s' was lost while CMD ran (%s)\n", prog, name,
                crd_strerror(st));
        exit_code = EXIT_LOST;
    } else if (st != CRD_OK) {
        char what[300];
        snprintf(what, sizeof what,
                 "warning: run: cannot release lock '%.200s', it expires after its lease", name);
        report(what, st, client);
    }
    close_lock(&held);
    crd_client_free(client);
    return exit_code;
}

/* ---- unlock --------------------------------------------------------------------------- */

static int cmd_unlock(const global_opts *g, int argc, char **argv)
{
    lock_kind kind = KIND_RLOCK;
    int kinds_seen = 0;
    bool force = false;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            usage_unlock(stdout);
            return 0;
        } else if (strcmp(a, "--force") == 0) {
            force = true;
        } else if (take_kind(a, &kind, &kinds_seen)) {
            if (kinds_seen > 1)
                return usage_error("unlock", "--fair, --read and --write exclude each other");
        } else {
            int rc = take_name_arg("unlock", argc, argv, &i, &name);
            if (rc != 0)
                return rc;
        }
    }
    if (name == NULL)
        return usage_error("unlock", "missing lock NAME");
    if (!force)
        return usage_error("unlock",
                           "--force is required: only the holder can release a lock normally");

    crd_client *client;
    int rc = make_client(g, false, &client);
    if (rc != 0)
        return rc;
    cli_lock held;
    crd_status st = open_lock(client, kind, name, &held);
    crd_lock *lock = held.lock;
    if (st != CRD_OK) {
        report("unlock: bad lock name", st, client);
        crd_client_free(client);
        return exit_for_status(st);
    }
    bool was_locked = false;
    st = crd_lock_force_unlock(lock, &was_locked);
    if (st != CRD_OK) {
        char what[300];
        snprintf(what, sizeof what, "unlock: cannot force-unlock '%.200s'", name);
        report(what, st, client);
    } else if (was_locked) {
        printf("unlocked: %s (a lock was deleted)\n", name);
    } else {
        printf("not locked: %s (nothing deleted)\n", name);
    }
    close_lock(&held);
    crd_client_free(client);
    return exit_for_status(st);
}

/* ---- URL parsing (the same forms as crd_options.url) ------------------------------ */

/* The library's own parser (src/url.c is compiled into this program too). */
typedef crd__endpoint endpoint;

static void endpoint_free(endpoint *ep)
{
    crd__endpoint_clear(ep);
}

/* Parses url into *ep. Returns NULL, or why not (written into why). */
static const char *parse_url(const char *url, endpoint *ep, char *why, size_t cap)
{
    crd_status st = crd__url_parse(url, ep, why, cap);
    if (st == CRD_OK)
        return NULL;
    if (st == CRD_NO_MEMORY)
        snprintf(why, cap, "out of memory");
    return why;
}

/* NULL if url parses, else why not (written into why). */
static const char *check_url(const char *url, char *why, size_t cap)
{
    endpoint ep;
    const char *bad = parse_url(url, &ep, why, cap);
    endpoint_free(&ep);
    return bad;
}

/* For the commands that open raw connections (status, watch): the lock NAME must be
 * there and non-empty, and --url must parse into *ep (left empty otherwise). Returns 0,
 * or the usage error's exit code. */
static int name_and_endpoint(const char *cmd, const global_opts *g, const char *name,
                             endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    if (name == NULL)
        return usage_error(cmd, "missing lock NAME");
    if (*name == '\0')
        return usage_error(cmd, "lock NAME is empty");
    char why_buf[256];
    const char *why = parse_url(g->url, ep, why_buf, sizeof why_buf);
    return why != NULL ? bad_url_error(g, why) : 0;
}

/* ---- status: reading and printing -------------------------------------------------------- */

typedef struct holder {
    const char *owner;
    size_t owner_len;
    long long count;
} holder;

/* Length of the valid UTF-8 sequence at s (at most len bytes), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t len)
{
    size_t n;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        n = 2;
        cp = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        n = 3;
        cp = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        n = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (n > len)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    /* Overlong forms, UTF-16 surrogates, beyond U+10FFFF. */
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* Prints s as a JSON string: control characters escaped, valid UTF-8 passed through,
 * each byte of an invalid sequence (a binary name) printed as U+FFFD so that the
 * output stays valid JSON. */
static void json_string(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    putchar('"');
    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            putchar('\\');
            putchar(c);
        } else if (c == '\n') {
            fputs("\\n", stdout);
        } else if (c == '\r') {
            fputs("\\r", stdout);
        } else if (c == '\t') {
            fputs("\\t", stdout);
        } else if (c < 0x20 || c == 0x7f) {
            printf("\\u%04x", c);
        } else {
            size_t n = utf8_seq(u + i, len - i);
            if (n == 0) {
                fputs("\\ufffd", stdout);
                n = 1;
            } else {
                fwrite(u + i, 1, n, stdout);
            }
            i += n;
            continue;
        }
        i++;
    }
    putchar('"');
}

static bool parse_count(const char *s, size_t len, long long *out)
{
    if (len == 0 || len > 18)
        return false;
    size_t i = s[0] == '-' ? 1 : 0;
    if (i == len)
        return false;
    long long v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = s[0] == '-' ? -v : v;
    return true;
}

/* Opens an authenticated connection; on failure prints one line and returns NULL. */
static redisContext *status_connect(const char *cmd, const char *raw_url, const endpoint *ep)
{
    char url[512];
    redact_url(raw_url, url, sizeof url);
    struct timeval ctv = {2, 0}, tv = {3, 0};
    redisContext *c = ep->unix_path ? redisConnectUnixWithTimeout(ep->unix_path, ctv)
                                    : redisConnectWithTimeout(ep->host, ep->port, ctv);
    if (c == NULL || c->err) {
        fprintf(stderr, "%s: %s: cannot connect to %s: %s\n", prog, cmd, url,
                c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    const char *argv[3];
    size_t lens[3];
    int n = 0;
    if (ep->password != NULL) {
        argv[n++] = "AUTH";
        if (ep->username != NULL)
            argv[n++] = ep->username;
        argv[n++] = ep->password;
    }
    char dbbuf[16];
    for (int step = 0; step < 2; step++) {
        if (step == 1) {
            if (ep->db == 0)
                break;
            snprintf(dbbuf, sizeof dbbuf, "%d", ep->db);
            argv[0] = "SELECT";
            argv[1] = dbbuf;
            n = 2;
        } else if (n == 0) {
            continue;
        }
        for (int i = 0; i < n; i++)
            lens[i] = strlen(argv[i]);
        redisReply *r = redisCommandArgv(c, n, argv, lens);
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "%s: %s: %s refused by %s: %s\n", prog, cmd, argv[0], url,
                    r ? r->str : c->errstr);
            freeReplyObject(r);
            redisFree(c);
            return NULL;
        }
        freeReplyObject(r);
    }
    return c;
}

/* Redisson's prefixName: "<prefix>:{N}", or "<prefix>:N" when N contains '{'. */
static char *derived_name(const char *prefix, const char *name, size_t len)
{
    bool tagged = memchr(name, '{', len) != NULL;
    size_t total = strlen(prefix) + 1 + len + (tagged ? 0 : 2);
    char *p = malloc(total + 1);
    if (p != NULL)
        snprintf(p, total + 1, tagged ? "%s:%.*s" : "%s:{%.*s}", prefix, (int)len, name);
    return p;
}

/* The read-write lock's key prefix P: "{N}", or N when it contains '{'. */
static char *rw_prefix(const char *name, size_t len)
{
    bool tagged = memchr(name, '{', len) != NULL;
    char *p = malloc(len + 3);
    if (p != NULL)
        snprintf(p, len + 3, tagged ? "%.*s" : "{%.*s}", (int)len, name);
    return p;
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

static long long epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The score of member m in a ZRANGE ... WITHSCORES reply, or -1. */
static long long deadline_of(const redisReply *z, const char *m, size_t len)
{
    for (size_t i = 0; i + 1 < z->elements; i += 2)
        if (z->element[i]->len == len && memcmp(z->element[i]->str, m, len) == 0)
            return strtoll(z->element[i + 1]->str, NULL, 10);
    return -1;
}

/* ,"client":{...}: the CLI's own client, its id and its crd_client_metrics() snapshot,
 * every field under its C name (the schema is in usage_status()). */
static void print_client_json(crd_client *client)
{
    crd_metrics m;
    memset(&m, 0, sizeof m);
    if (client == NULL || crd_client_metrics(client, &m, sizeof m) != CRD_OK)
        return;
    fputs(",\"client\":{\"id\":", stdout);
    const char *id = crd_client_id(client);
    json_string(id, strlen(id));
    printf(",\"version\":\"%s\"", crd_version());
    const struct {
        const char *k;
        uint64_t v;
    } u[] = {{"acquisitions", m.acquisitions},
             {"contended", m.contended},
             {"acquire_busy", m.acquire_busy},
             {"releases", m.releases},
             {"renewals", m.renewals},
             {"renewal_failures", m.renewal_failures},
             {"locks_lost", m.locks_lost},
             {"connects", m.connects},
             {"connection_failures", m.connection_failures},
             {"subscribes", m.subscribes},
             {"holds_now", m.holds_now}};
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
        printf(",\"%s\":%llu", u[i].k, (unsigned long long)u[i].v);
    const struct {
        const char *k;
        int64_t v;
    } d[] = {{"wait_ms_p50", m.wait_ms_p50}, {"wait_ms_p99", m.wait_ms_p99},
             {"wait_ms_max", m.wait_ms_max}, {"hold_ms_p50", m.hold_ms_p50},
             {"hold_ms_p99", m.hold_ms_p99}, {"hold_ms_max", m.hold_ms_max}};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        printf(",\"%s\":%lld", d[i].k, (long long)d[i].v);
    fputs("}", stdout);
}

typedef struct read_hold {
    const char *owner;
    size_t owner_len;
    long long index;
    long long ttl;
} read_hold;

static int cmd_status(const global_opts *g, int argc, char **argv)
{
    bool json = false;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            usage_status(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else {
            int rc = take_name_arg("status", argc, argv, &i, &name);
            if (rc != 0)
                return rc;
        }
    }
    endpoint ep;
    int bad = name_and_endpoint("status", g, name, &ep);
    if (bad != 0)
        return bad;
    redisContext *c = status_connect("status", g->url, &ep);
    endpoint_free(&ep);
    if (c == NULL)
        return EXIT_UNAVAILABLE;
    /* --json also reports the CLI's own library client (its metrics snapshot). */
    crd_client *client = NULL;
    if (json) {
        int rc = make_client(g, false, &client);
        if (rc != 0) {
            redisFree(c);
            return rc;
        }
    }

    /* One snapshot: MULTI, TYPE, HGETALL, PTTL, the fair queue and its deadlines, EXEC. */
    size_t nlen = strlen(name);
    char *queue_key = derived_name("redisson_lock_queue", name, nlen);
    char *deadline_key = derived_name("redisson_lock_timeout", name, nlen);
    if (queue_key == NULL || deadline_key == NULL) {
        free(queue_key);
        free(deadline_key);
        redisFree(c);
        crd_client_free(client);
        fprintf(stderr, "%s: status: out of memory\n", prog);
        return EXIT_OSERR;
    }
    const char *cmds[7][5] = {{"MULTI"},
                              {"TYPE", name},
                              {"HGETALL", name},
                              {"PTTL", name},
                              {"LRANGE", queue_key, "0", "-1"},
                              {"ZRANGE", deadline_key, "0", "-1", "WITHSCORES"},
                              {"EXEC"}};
    int argcs[7] = {1, 2, 2, 2, 4, 5, 1};
    for (int i = 0; i < 7; i++) {
        size_t lens[5];
        for (int j = 0; j < argcs[i]; j++)
            lens[j] = cmds[i][j] == name ? nlen : strlen(cmds[i][j]);
        redisAppendCommandArgv(c, argcs[i], cmds[i], lens);
    }
    free(queue_key);
    free(deadline_key);
    redisReply *exec = NULL;
    for (int i = 0; i < 7; i++) {
        void *r = NULL;
        if (redisGetReply(c, &r) != REDIS_OK) {
            fprintf(stderr, "%s: status: reading '%s' failed: %s\n", prog, name, c->errstr);
            freeReplyObject(exec);
            redisFree(c);
            crd_client_free(client);
            return EXIT_UNAVAILABLE;
        }
        if (i == 6)
            exec = r;
        else
            freeReplyObject(r);
    }
    if (exec == NULL || exec->type != REDIS_REPLY_ARRAY || exec->elements != 5 ||
        exec->element[0]->type != REDIS_REPLY_STATUS ||
        exec->element[2]->type != REDIS_REPLY_INTEGER ||
        exec->element[3]->type != REDIS_REPLY_ARRAY ||
        exec->element[4]->type != REDIS_REPLY_ARRAY) {
        fprintf(stderr, "%s: status: unexpected reply reading '%s'%s%s\n", prog, name,
                exec && exec->type == REDIS_REPLY_ERROR ? ": " : "",
                exec && exec->type == REDIS_REPLY_ERROR ? exec->str : "");
        freeReplyObject(exec);
        redisFree(c);
        crd_client_free(client);
        return EXIT_UNAVAILABLE;
    }
    const char *type = exec->element[0]->str;
    redisReply *hash = exec->element[1];
    long long ttl = exec->element[2]->integer;

    const char *kind;
    const char *mode = NULL;
    size_t mode_len = 0;
    size_t nholders = 0;
    holder *holders = NULL;
    if (strcmp(type, "none") == 0) {
        kind = "none";
    } else if (strcmp(type, "hash") == 0 && hash->type == REDIS_REPLY_ARRAY) {
        kind = "rlock";
        holders = calloc(hash->elements / 2 + 1, sizeof *holders);
        if (holders == NULL) {
            fprintf(stderr, "%s: status: out of memory\n", prog);
            freeReplyObject(exec);
            redisFree(c);
            crd_client_free(client);
            return EXIT_OSERR;
        }
        for (size_t i = 0; i + 1 < hash->elements; i += 2) {
            redisReply *f = hash->element[i], *v = hash->element[i + 1];
            if (f->len == 4 && memcmp(f->str, "mode", 4) == 0) {
                mode = v->str;
                mode_len = v->len;
                kind = "rwlock";
                continue;
            }
            holder *h = &holders[nholders];
            if (!parse_count(v->str, v->len, &h->count)) {
                kind = "other"; /* a hash, but not a lock's */
                continue;
            }
            h->owner = f->str;
            h->owner_len = f->len;
            nholders++;
        }
        if (strcmp(kind, "other") == 0) {
            nholders = 0;
            mode = NULL;
        }
    } else {
        kind = "other";
    }

    /* Fair queue: members in order with their deadlines (epoch ms). */
    redisReply *queue = exec->element[3], *deadlines = exec->element[4];
    long long now = epoch_ms();
    /* RW: each read hold's own timeout key, P:<field>:rwlock_timeout:<i>. */
    read_hold *rholds = NULL;
    size_t nrholds = 0;
    if (mode != NULL && nholders > 0) {
        size_t cap = 0;
        for (size_t i = 0; i < nholders; i++)
            if (!ends_with(holders[i].owner, holders[i].owner_len, ":write") &&
                holders[i].count > 0 && holders[i].count < 10000)
                cap += (size_t)holders[i].count;
        rholds = calloc(cap + 1, sizeof *rholds);
        char *prefix = rw_prefix(name, nlen);
        if (rholds != NULL && prefix != NULL) {
            for (size_t i = 0; i < nholders; i++) {
                if (ends_with(holders[i].owner, holders[i].owner_len, ":write") ||
                    holders[i].count <= 0 || holders[i].count >= 10000)
                    continue;
                for (long long k = 1; k <= holders[i].count; k++) {
                    read_hold *rh = &rholds[nrholds++];
                    rh->owner = holders[i].owner;
                    rh->owner_len = holders[i].owner_len;
                    rh->index = k;
                    char idx[24];
                    snprintf(idx, sizeof idx, "%lld", k);
                    size_t klen = strlen(prefix) + 1 + rh->owner_len + 16 + strlen(idx);
                    char *key = malloc(klen + 1);
                    if (key == NULL) {
                        nrholds--;
                        continue;
                    }
                    snprintf(key, klen + 1, "%s:%.*s:rwlock_timeout:%s", prefix,
                             (int)rh->owner_len, rh->owner, idx);
                    const char *pttl_argv[2] = {"PTTL", key};
                    size_t lens[2] = {4, strlen(key)};
                    redisAppendCommandArgv(c, 2, pttl_argv, lens);
                    free(key);
                }
            }
            for (size_t i = 0; i < nrholds; i++) {
                void *r = NULL;
                if (redisGetReply(c, &r) != REDIS_OK)
                    break;
                redisReply *rr = r;
                rholds[i].ttl = rr->type == REDIS_REPLY_INTEGER ? rr->integer : -2;
                freeReplyObject(rr);
            }
        }
        free(prefix);
    }

    if (json) {
        fputs("{\"name\":", stdout);
        json_string(name, nlen);
        printf(",\"kind\":\"%s\",\"type\":", kind);
        json_string(type, strlen(type));
        if (mode != NULL) {
            fputs(",\"mode\":", stdout);
            json_string(mode, mode_len);
        }
        printf(",\"ttl_ms\":%lld,\"holders\":[", ttl);
        for (size_t i = 0; i < nholders; i++) {
            fputs(i ? ",{\"owner\":" : "{\"owner\":", stdout);
            json_string(holders[i].owner, holders[i].owner_len);
            printf(",\"count\":%lld}", holders[i].count);
        }
        fputs("]", stdout);
        if (mode != NULL) {
            fputs(",\"writer\":", stdout);
            bool any = false;
            for (size_t i = 0; i < nholders && !any; i++)
                if (ends_with(holders[i].owner, holders[i].owner_len, ":write")) {
                    json_string(holders[i].owner, holders[i].owner_len - 6);
                    any = true;
                }
            if (!any)
                fputs("null", stdout);
            fputs(",\"read_holds\":[", stdout);
            for (size_t i = 0; i < nrholds; i++) {
                fputs(i ? ",{\"owner\":" : "{\"owner\":", stdout);
                json_string(rholds[i].owner, rholds[i].owner_len);
                printf(",\"index\":%lld,\"ttl_ms\":%lld}", rholds[i].index, rholds[i].ttl);
            }
            fputs("]", stdout);
        }
        fputs(",\"queue\":[", stdout);
        for (size_t i = 0; i < queue->elements; i++) {
            redisReply *m = queue->element[i];
            long long dl = deadline_of(deadlines, m->str, m->len);
            fputs(i ? ",{\"owner\":" : "{\"owner\":", stdout);
            json_string(m->str, m->len);
            if (dl >= 0)
                printf(",\"deadline_ms\":%lld,\"remaining_ms\":%lld}", dl, dl - now);
            else
                fputs(",\"deadline_ms\":null,\"remaining_ms\":null}", stdout);
        }
        fputs("]", stdout);
        print_client_json(client);
        fputs("}\n", stdout);
    } else {
        printf("name: %s\nkind: %s\n", name, kind);
        if (strcmp(kind, "other") == 0)
            printf("type: %s\n", type);
        if (mode != NULL)
            printf("mode: %.*s\n", (int)mode_len, mode);
        printf("ttl_ms: %lld\nholders: %zu\n", ttl, nholders);
        for (size_t i = 0; i < nholders; i++)
            printf("holder: %.*s count=%lld\n", (int)holders[i].owner_len, holders[i].owner,
                   holders[i].count);
        for (size_t i = 0; i < nrholds; i++)
            printf("read_hold: %.*s index=%lld ttl_ms=%lld\n", (int)rholds[i].owner_len,
                   rholds[i].owner, rholds[i].index, rholds[i].ttl);
        if (queue->elements > 0)
            printf("queue: %zu\n", queue->elements);
        for (size_t i = 0; i < queue->elements; i++) {
            redisReply *m = queue->element[i];
            long long dl = deadline_of(deadlines, m->str, m->len);
            printf("waiter: %.*s deadline_ms=%lld remaining_ms=%lld\n", (int)m->len, m->str, dl,
                   dl >= 0 ? dl - now : -1);
        }
    }
    free(rholds);
    free(holders);
    freeReplyObject(exec);
    redisFree(c);
    crd_client_free(client);
    return fflush(stdout) == 0 ? 0 : EXIT_OSERR;
}

/* ---- watch --------------------------------------------------------------------------- */

/* One holder as `watch` last saw it: an owner field and its hold count. */
typedef struct wholder {
    char *owner;
    size_t len;
    long long count;
} wholder;

/* A snapshot of lock NAME: its holders, the rwlock mode ("" if none), the PTTL, and
 * when (monotonic ms) it was read. */
typedef struct wsnap {
    wholder *h;
    size_t n;
    char mode[16];
    long long ttl;
    int64_t read_ms;
} wsnap;

static void wsnap_free(wsnap *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->h[i].owner);
    free(s->h);
    s->h = NULL;
    s->n = 0;
}

/* Reads NAME in one MULTI/EXEC (TYPE, HGETALL, PTTL) into *out. Returns false with a
 * message printed when the connection failed or the reply makes no sense. */
static bool watch_read(redisContext *c, const char *name, size_t nlen, wsnap *out)
{
    const char *cmds[5][2] = {{"MULTI"}, {"TYPE", name}, {"HGETALL", name}, {"PTTL", name},
                              {"EXEC"}};
    const int argcs[5] = {1, 2, 2, 2, 1};
    for (int i = 0; i < 5; i++) {
        size_t lens[2] = {strlen(cmds[i][0]), nlen};
        redisAppendCommandArgv(c, argcs[i], cmds[i], lens);
    }
    redisReply *exec = NULL;
    for (int i = 0; i < 5; i++) {
        void *r = NULL;
        if (redisGetReply(c, &r) != REDIS_OK) {
            fprintf(stderr, "%s: watch: reading '%s' failed: %s\n", prog, name, c->errstr);
            freeReplyObject(exec);
            return false;
        }
        if (i == 4)
            exec = r;
        else
            freeReplyObject(r);
    }
    if (exec == NULL || exec->type != REDIS_REPLY_ARRAY || exec->elements != 3 ||
        exec->element[0]->type != REDIS_REPLY_STATUS ||
        exec->element[2]->type != REDIS_REPLY_INTEGER) {
        fprintf(stderr, "%s: watch: unexpected reply reading '%s'%s%s\n", prog, name,
                exec && exec->type == REDIS_REPLY_ERROR ? ": " : "",
                exec && exec->type == REDIS_REPLY_ERROR ? exec->str : "");
        freeReplyObject(exec);
        return false;
    }
    memset(out, 0, sizeof *out);
    out->ttl = exec->element[2]->integer;
    out->read_ms = now_ms();
    redisReply *hash = exec->element[1];
    if (strcmp(exec->element[0]->str, "hash") == 0 && hash->type == REDIS_REPLY_ARRAY) {
        out->h = calloc(hash->elements / 2 + 1, sizeof *out->h);
        if (out->h == NULL) {
            fprintf(stderr, "%s: watch: out of memory\n", prog);
            freeReplyObject(exec);
            return false;
        }
        for (size_t i = 0; i + 1 < hash->elements; i += 2) {
            redisReply *f = hash->element[i], *v = hash->element[i + 1];
            if (f->len == 4 && memcmp(f->str, "mode", 4) == 0) {
                snprintf(out->mode, sizeof out->mode, "%.*s", (int)v->len, v->str);
                continue;
            }
            long long count;
            if (!parse_count(v->str, v->len, &count))
                continue; /* not a lock's field */
            wholder *h = &out->h[out->n];
            if ((h->owner = malloc(f->len + 1)) == NULL)
                continue;
            memcpy(h->owner, f->str, f->len);
            h->owner[f->len] = '\0';
            h->len = f->len;
            h->count = count;
            out->n++;
        }
    }
    freeReplyObject(exec);
    return true;
}

static const wholder *wsnap_find(const wsnap *s, const wholder *h)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->h[i].len == h->len && memcmp(s->h[i].owner, h->owner, h->len) == 0)
            return &s->h[i];
    return NULL;
}

/* Prints one event line: text "HH:MM:SS.mmm EVENT NAME owner=O ..." or one JSON object. */
static void watch_print(bool json, const char *event, const char *name, size_t nlen,
                        const wholder *h, const wsnap *s, const char *cause)
{
    long long t = epoch_ms();
    if (json) {
        printf("{\"time_ms\":%lld,\"event\":\"%s\",\"name\":", t, event);
        json_string(name, nlen);
        fputs(",\"owner\":", stdout);
        json_string(h->owner, h->len);
        if (cause != NULL) {
            printf(",\"cause\":\"%s\"", cause);
        } else {
            printf(",\"count\":%lld,\"ttl_ms\":%lld", h->count, s->ttl);
            if (s->mode[0] != '\0') {
                fputs(",\"mode\":", stdout);
                json_string(s->mode, strlen(s->mode));
            }
        }
        fputs("}\n", stdout);
    } else {
        time_t secs = (time_t)(t / 1000);
        struct tm tm;
        localtime_r(&secs, &tm);
        printf("%02d:%02d:%02d.%03d %s %s owner=%s", tm.tm_hour, tm.tm_min, tm.tm_sec,
               (int)(t % 1000), event, name, h->owner);
        if (cause != NULL) {
            printf(" cause=%s\n", cause);
        } else {
            printf(" count=%lld ttl_ms=%lld", h->count, s->ttl);
            if (s->mode[0] != '\0')
                printf(" mode=%s", s->mode);
            putchar('\n');
        }
    }
}

/* Prints the events that turn old into cur, releases first, at most budget of them;
 * returns how many. cause is why a vanished
 * holder is gone ("unlock", "expired" or "removed"). */
static long long watch_diff(bool json, const char *name, size_t nlen, const wsnap *old,
                            const wsnap *cur, const char *cause, long long budget)
{
    long long events = 0;
    for (size_t i = 0; i < old->n && events < budget; i++)
        if (wsnap_find(cur, &old->h[i]) == NULL) {
            watch_print(json, "release", name, nlen, &old->h[i], cur, cause);
            events++;
        }
    for (size_t i = 0; i < cur->n && events < budget; i++) {
        const wholder *was = wsnap_find(old, &cur->h[i]);
        if (was == NULL || was->count != cur->h[i].count) {
            watch_print(json, was == NULL ? "acquire" : "count", name, nlen, &cur->h[i], cur,
                        NULL);
            events++;
        }
    }
    return events;
}

/* pattern := s with the glob characters of PSUBSCRIBE escaped, then ":*". */
static char *glob_escaped_children(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(2 * n + 3);
    if (p == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (strchr("*?[]\\", s[i]) != NULL)
            p[o++] = '\\';
        p[o++] = s[i];
    }
    memcpy(p + o, ":*", 3);
    return p;
}

static bool parse_count_arg(const char *v, long long *out)
{
    int64_t x;
    if (!parse_ms(v, &x) || x == 0)
        return false;
    *out = (long long)x;
    return true;
}

static int cmd_watch(const global_opts *g, int argc, char **argv)
{
    bool json = false;
    long long max_events = 0; /* 0: no limit */
    int64_t timeout_ms = -1, interval_ms = 250;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (is_help(a)) {
            usage_watch(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (take_opt(argc, argv, &i, "--count", &v)) {
            if (v == NULL || !parse_count_arg(v, &max_events))
                return usage_error("watch", "--count needs a positive number of events");
        } else if (take_opt(argc, argv, &i, "--timeout", &v)) {
            if (v == NULL || !parse_ms(v, &timeout_ms))
                return usage_error("watch",
                                   "--timeout needs a non-negative number of milliseconds");
        } else if (take_opt(argc, argv, &i, "--interval", &v)) {
            if (v == NULL || !parse_ms(v, &interval_ms) || interval_ms < 10)
                return usage_error("watch", "--interval needs a number of milliseconds >= 10");
        } else {
            int rc = take_name_arg("watch", argc, argv, &i, &name);
            if (rc != 0)
                return rc;
        }
    }
    endpoint ep;
    int bad = name_and_endpoint("watch", g, name, &ep);
    if (bad != 0)
        return bad;
    int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : INT64_MAX;
    /* Two connections: one subscribed to the lock's channels, one to read its state. */
    redisContext *sub = status_connect("watch", g->url, &ep);
    redisContext *rd = sub ? status_connect("watch", g->url, &ep) : NULL;
    int db = ep.db;
    endpoint_free(&ep);
    if (rd == NULL) {
        if (sub != NULL)
            redisFree(sub);
        return EXIT_UNAVAILABLE;
    }

    /* The channels every kind of lock NAME publishes on: the lock's (RLock, fair lock,
     * force unlocks), the read-write lock's, each fair waiter's own channel
     * "<lock channel>:<owner>" (a pattern), and keyspace notifications for NAME, which
     * make acquires show at once when the server has them enabled (notify-keyspace-
     * events); without them acquires show at the next periodic read. */
    size_t nlen = strlen(name);
    char *lock_ch = derived_name("redisson_lock__channel", name, nlen);
    char *rw_ch = derived_name("redisson_rwlock", name, nlen);
    char *waiters = lock_ch ? glob_escaped_children(lock_ch) : NULL;
    char ks_prefix[48];
    snprintf(ks_prefix, sizeof ks_prefix, "__keyspace@%d__:", db);
    char *ks_ch = malloc(strlen(ks_prefix) + nlen + 1);
    if (lock_ch == NULL || rw_ch == NULL || waiters == NULL || ks_ch == NULL) {
        fprintf(stderr, "%s: watch: out of memory\n", prog);
        free(lock_ch);
        free(rw_ch);
        free(waiters);
        free(ks_ch);
        redisFree(sub);
        redisFree(rd);
        return EXIT_OSERR;
    }
    memcpy(ks_ch, ks_prefix, strlen(ks_prefix));
    memcpy(ks_ch + strlen(ks_prefix), name, nlen + 1);
    const char *sargv[4] = {"SUBSCRIBE", lock_ch, rw_ch, ks_ch};
    size_t slens[4] = {9, strlen(lock_ch), strlen(rw_ch), strlen(ks_ch)};
    redisAppendCommandArgv(sub, 4, sargv, slens);
    const char *pargv[2] = {"PSUBSCRIBE", waiters};
    size_t plens[2] = {10, strlen(waiters)};
    redisAppendCommandArgv(sub, 2, pargv, plens);
    free(lock_ch);
    free(rw_ch);
    free(waiters);
    free(ks_ch);
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++) { /* three subscribe and one psubscribe replies */
        void *r = NULL;
        if (redisGetReply(sub, &r) != REDIS_OK) {
            fprintf(stderr, "%s: watch: subscribing failed: %s\n", prog, sub->errstr);
            rc = EXIT_UNAVAILABLE;
        } else if (((redisReply *)r)->type != REDIS_REPLY_ARRAY) {
            fprintf(stderr, "%s: watch: subscribing failed: %s\n", prog,
                    ((redisReply *)r)->type == REDIS_REPLY_ERROR ? ((redisReply *)r)->str
                                                                 : "unexpected reply");
            rc = EXIT_UNAVAILABLE;
        }
        freeReplyObject(r);
    }

    /* Subscribed first, then the initial read: no change can fall between the two. */
    wsnap cur = {0};
    if (rc == 0 && !watch_read(rd, name, nlen, &cur))
        rc = EXIT_UNAVAILABLE;
    if (rc == 0) {
        for (size_t i = 0; i < cur.n; i++)
            watch_print(json, "held", name, nlen, &cur.h[i], &cur, NULL);
        if (fflush(stdout) != 0)
            rc = EXIT_OSERR;
    }

    long long events = 0;
    while (rc == 0 && (max_events == 0 || events < max_events)) {
        /* Next periodic read: after --interval, or just after the key's TTL runs out
         * (an expiry publishes nothing). */
        int64_t next = cur.read_ms + interval_ms;
        if (cur.ttl >= 0 && cur.read_ms + cur.ttl + 2 < next)
            next = cur.read_ms + cur.ttl + 2;
        bool message = false, expired_note = false;
        for (;;) {
            /* Messages hiredis has already buffered first, then the socket. */
            void *r = NULL;
            if (redisGetReplyFromReader(sub, &r) != REDIS_OK) {
                fprintf(stderr, "%s: watch: connection error: %s\n", prog, sub->errstr);
                rc = EXIT_UNAVAILABLE;
                break;
            }
            if (r != NULL) {
                redisReply *m = r;
                if (m->type == REDIS_REPLY_ARRAY && m->elements >= 3) {
                    message = true;
                    redisReply *payload = m->element[m->elements - 1];
                    redisReply *ch = m->element[m->elements - 2];
                    if (ch->type == REDIS_REPLY_STRING && ch->len > strlen(ks_prefix) &&
                        memcmp(ch->str, ks_prefix, strlen(ks_prefix)) == 0 &&
                        payload->type == REDIS_REPLY_STRING &&
                        strcmp(payload->str, "expired") == 0)
                        expired_note = true;
                }
                freeReplyObject(m);
                continue;
            }
            if (message)
                break;
            int64_t now = now_ms();
            if (now >= deadline || now >= next)
                break;
            int64_t until = next < deadline ? next : deadline;
            struct pollfd pfd = {.fd = sub->fd, .events = POLLIN};
            int left = (int)(until - now > 60000 ? 60000 : until - now);
            int n = poll(&pfd, 1, left);
            if (n < 0 && errno != EINTR) {
                fprintf(stderr, "%s: watch: poll: %s\n", prog, strerror(errno));
                rc = EXIT_OSERR;
                break;
            }
            if (n > 0 && redisBufferRead(sub) != REDIS_OK) {
                fprintf(stderr, "%s: watch: connection lost: %s\n", prog,
                        sub->errstr[0] ? sub->errstr : "closed");
                rc = EXIT_UNAVAILABLE;
                break;
            }
        }
        if (rc != 0)
            break;
        if (!message && now_ms() >= deadline)
            break;
        wsnap old = cur;
        if (!watch_read(rd, name, nlen, &cur)) {
            cur = old;
            rc = EXIT_UNAVAILABLE;
            break;
        }
        /* Why holders that vanished are gone: a message came (an unlock publishes), or
         * the TTL they had ran out, or neither (deleted without a message). */
        const char *cause;
        if (expired_note)
            cause = "expired";
        else if (message)
            cause = "unlock";
        else if (old.ttl >= 0 && cur.read_ms - old.read_ms + 5 >= old.ttl)
            cause = "expired";
        else
            cause = "removed";
        events += watch_diff(json, name, nlen, &old, &cur, cause,
                             max_events > 0 ? max_events - events : INT64_MAX);
        wsnap_free(&old);
        if (fflush(stdout) != 0)
            rc = EXIT_OSERR;
    }
    wsnap_free(&cur);
    redisFree(sub);
    redisFree(rd);
    return rc;
}

/* ---- main -------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    global_opts g = {0};
    g.url = getenv("CREDISSON_URL");
    if (g.url == NULL || *g.url == '\0')
        g.url = DEFAULT_URL;

    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *v;
        if (is_help(a)) {
            usage_main(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("credisson %s\n", crd_version());
            return 0;
        } else if (take_opt(argc, argv, &i, "--url", &v)) {
            if (v == NULL || *v == '\0')
                return usage_error(NULL, "--url needs a value");
            g.url = v;
        } else if (take_opt(argc, argv, &i, "--watchdog-ms", &v)) {
            if (v == NULL)
                return usage_error(NULL, "--watchdog-ms needs a value in milliseconds");
            if (!parse_ms(v, &g.watchdog_ms) || g.watchdog_ms == 0)
                return usage_error(
                    NULL, "--watchdog-ms: '%s' is not a positive number of milliseconds", v);
        } else if (a[0] == '-') {
            return usage_error(NULL, "unknown option '%s'", a);
        } else {
            break;
        }
    }
    if (i >= argc)
        return usage_error(NULL, "missing COMMAND (run, status, unlock or watch)");
    const char *cmd = argv[i];
    if (strcmp(cmd, "run") == 0)
        return cmd_run(&g, argc - i, argv + i);
    if (strcmp(cmd, "status") == 0)
        return cmd_status(&g, argc - i, argv + i);
    if (strcmp(cmd, "unlock") == 0)
        return cmd_unlock(&g, argc - i, argv + i);
    if (strcmp(cmd, "watch") == 0)
        return cmd_watch(&g, argc - i, argv + i);
    return usage_error(NULL, "unknown command '%s' (run, status, unlock or watch)", cmd);
}
