/*
 * run.c -- `credisson run NAME -- CMD`: holds a Redisson-compatible lock while a child
 * command runs. The main thread parses the options, acquires the lock, starts CMD
 * (spawn.c), and then sleeps until CMD exits, a signal is to be forwarded, the watchdog
 * reports the lock lost or failing, or a fixed lease runs out; it carries out --on-lost
 * and releases the lock at the end.
 */
#include "run.h"
#include "cli.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static void usage_run(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] run [--wait MS|-n] [--lease MS] "
            "[--fair|--read|--write|--fenced]\n"
            "                 [--on-lost=term|kill|ignore] [--grace MS] [-E N] [--verbose]\n"
            "                 [--on-unavailable=fail|skip|degrade] NAME [NAME...] -- CMD [ARG...]\n"
            "       credisson [GLOBAL OPTIONS] run --permits N [--wait MS|-n] [--lease MS] [-E N]\n"
            "                 [--on-lost=...] [--grace MS] [--verbose] NAME -- CMD [ARG...]\n"
            "\n"
            "Acquire lock NAME, run CMD as a child process, release the lock when CMD exits.\n"
            "With several NAMEs, all of them are taken (all or nothing, one --wait for all, in\n"
            "one order that cannot deadlock against another run over the same names, and\n"
            "Redisson's RedissonMultiLock excludes it too): if not all can be taken within\n"
            "--wait, the ones taken are released again and the exit status is 75.\n"
            "CMD runs in a process group of its own (as with timeout(1)): SIGINT, SIGTERM and\n"
            "SIGHUP are forwarded to that group, and --on-lost signals the group, so what CMD\n"
            "started (a shell's children) stops with it. When credisson runs in the terminal's\n"
            "foreground, CMD's group has the terminal while it runs. SIGINT, SIGTERM or SIGHUP\n"
            "while credisson still waits for the lock ends the wait at once (a fair lock's\n"
            "queue entry is removed, so the next waiter is not held up), then credisson dies\n"
            "of the signal (exit status 130, 143, 129). One that credisson was started with\n"
            "ignored (nohup(1)'s SIGHUP; SIGINT in a script's background job) stays ignored,\n"
            "in credisson and in CMD.\n"
            "\n"
            "Options:\n"
            "  --wait MS    give up after MS milliseconds without the lock (exit 75);\n"
            "               0 tries once; default: wait as long as it takes\n"
            "  -n, --nonblock  the same as --wait 0: fail at once if the lock is held\n"
            "  -E, --conflict-exit-code N\n"
            "               exit with N (0-255) instead of 75 when the lock was not acquired\n"
            "  --verbose    say on stderr whether the lock was acquired at once or after\n"
            "               waiting, and how long\n"
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
            "  --on-unavailable=fail|skip|degrade\n"
            "               when Redis cannot be reached or refuses us (not when the lock\n"
            "               is merely held): fail (default): exit 69; skip: CMD does not\n"
            "               run, a warning, exit 0; degrade: CMD runs WITHOUT the lock (other\n"
            "               processes may run it at the same time), a warning, and the exit\n"
            "               status is CMD's, or 3 when CMD succeeded, so that a degraded\n"
            "               success is never mistaken for a locked one\n"
            "  --fair       use the fair lock of NAME (Redisson getFairLock): waiting processes,\n"
            "               in any language, get it in the order they asked\n"
            "  --read       take the read lock of NAME (Redisson getReadWriteLock(NAME)\n"
            "               .readLock()): many readers at once, no writer\n"
            "  --write      take the write lock of NAME: no other reader or writer\n"
            "  --fenced     take the fenced lock of NAME (Redisson getFencedLock): every\n"
            "               acquire draws a fencing token, a number larger than any earlier\n"
            "               one; CMD finds it in CREDISSON_TOKEN and should hand it to the\n"
            "               storage it writes, which refuses tokens older than one it saw\n");
    /* In pieces: C99 promises string literals of 4095 bytes only. */
    fputs("  --permits N  instead of a lock, hold one permit of the permit-expirable\n"
            "               semaphore NAME (Redisson getPermitExpirableSemaphore) while CMD\n"
            "               runs: at most N processes of a fleet run at once, like flock(1)\n"
            "               on one host. A missing NAME is created with N permits (atomically,\n"
            "               trySetPermits); if NAME has another number of permits, the exit\n"
            "               status is 64 and nothing changes. The permit's lease is --lease,\n"
            "               not renewed, or else --watchdog-ms, renewed every third of it\n"
            "               while CMD runs (a killed run frees its permit when that lease\n"
            "               ends; a renewal that finds the permit gone is a loss: --on-lost,\n"
            "               exit 70). A waiter waits on the semaphore's channel and wakes\n"
            "               when a permit is released or a lease ends. CMD finds the permit's\n"
            "               id in CREDISSON_PERMIT\n"
            "  --rate N/DURATION\n"
            "               instead of a lock, start CMD once rate limiter NAME (Redisson\n"
            "               getRateLimiter) gives a permit: at most N starts per DURATION\n"
            "               fleet-wide (10/1s, 100/1m, 5/250ms); NAME is created with that\n"
            "               rate when missing, another rate is exit 64. --wait applies (exit\n"
            "               75 when it runs out); the wait is the server's delay, no polling\n"
            "  --spin, --nonreentrant, --nonreentrant-fair\n"
            "               Redisson's RSpinLock, RNonReentrantLock, RNonReentrantFairLock of NAME\n", f);
    fprintf(f,
            "  -h, --help   this help\n"
            "\n"
            "If releasing the lock fails for a network reason after CMD exited, a warning is\n"
            "printed, the exit status stays CMD's, and the lock expires after its lease.\n"
            "\n"
            "%s",
            cli_exit_codes_text);
}

/* How long CMD gets to exit after SIGTERM (lock lost) before it is sent SIGKILL. */
#define KILL_GRACE_MS 10000

/* The exit status of a CMD that succeeded without the lock (--on-unavailable=degrade). */
#define EXIT_DEGRADED 3
#define MAX_NAMES 64

/* What `run` does to CMD when the lock is lost while CMD runs (--on-lost). */
typedef enum on_lost_mode { ON_LOST_TERM, ON_LOST_KILL, ON_LOST_IGNORE } on_lost_mode;

/* The command line of `run`. */
typedef struct run_opts {
    cli_kind kind;
    int64_t wait_ms, lease_ms, grace_ms;
    on_lost_mode on_lost;
    int conflict_exit; /* exit code when not acquired within --wait */
    crd_unavailable_policy on_unavailable;
    bool verbose;
    int64_t permits;  /* --permits N: a permit of semaphore NAME instead of a lock; 0: a lock */
    int64_t rate, rate_interval_ms; /* --rate N/DURATION: a rate limiter's permit; 0: none */
    const char *noun; /* for messages: "lock" or "the permit of semaphore" */
    const char *name; /* for messages: the NAME, or all NAMEs joined by spaces */
    const char *names[MAX_NAMES];
    int nnames;
    char joined[1024];
    char **cmd;
} run_opts;

/* The most permits --permits creates a semaphore with (a typo guard, not Redis' limit). */
#define MAX_PERMITS 1000000

/* The words --on-lost and --on-unavailable take, with what each means; a NULL word ends. */
typedef struct word_value {
    const char *word;
    int value;
} word_value;
static const word_value on_lost_words[] = {
    {"term", ON_LOST_TERM}, {"kill", ON_LOST_KILL}, {"ignore", ON_LOST_IGNORE}, {NULL, 0}};
static const word_value on_unavailable_words[] = {{"fail", CRD_UNAVAILABLE_FAIL},
                                                  {"skip", CRD_UNAVAILABLE_SKIP},
                                                  {"degrade", CRD_UNAVAILABLE_DEGRADE},
                                                  {NULL, 0}};

/* The value of the word v in words into *out. Returns 0, or the usage error's exit code
 * (saying what_ok) when v is missing or not one of them. */
static int word_arg(const char *v, const word_value *words, const char *what_ok, int *out)
{
    for (; v != NULL && words->word != NULL; words++)
        if (strcmp(v, words->word) == 0) {
            *out = words->value;
            return 0;
        }
    return cli_usage_error("run", "%s", what_ok);
}

/* One value option of `run`: "--wait MS", "--lease MS", "--grace MS". Returns 0, or the
 * usage error's exit code. */
static int ms_value(const char *opt, const char *v, int64_t *out)
{
    if (v == NULL)
        return cli_usage_error("run", "%s needs a value in milliseconds", opt);
    if (!cli_parse_ms(v, out))
        return cli_usage_error("run", "%s: '%s' is not a non-negative number of milliseconds", opt,
                               v);
    return 0;
}

/* Parses argv into *o. Returns 0, -1 after --help, or the usage error's exit code. */
static int parse_run_args(int argc, char **argv, run_opts *o)
{
    int kinds_seen = 0, rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i], *v;
        if (strcmp(a, "--") == 0) {
            if (i + 1 >= argc)
                return cli_usage_error("run", "missing CMD after '--'");
            o->cmd = argv + i + 1;
            break;
        } else if (cli_is_help(a)) {
            usage_run(stdout);
            return -1;
        } else if (cli_take_opt(argc, argv, &i, "--wait", &v)) {
            rc = ms_value("--wait", v, &o->wait_ms);
        } else if (strcmp(a, "-n") == 0 || strcmp(a, "--nonblock") == 0) {
            o->wait_ms = 0;
        } else if (cli_take_opt(argc, argv, &i, "-E", &v) ||
                   cli_take_opt(argc, argv, &i, "--conflict-exit-code", &v)) {
            int64_t code = 0;
            if (v == NULL || !cli_parse_ms(v, &code) || code > 255)
                return cli_usage_error("run", "%s needs an exit code from 0 to 255", a);
            o->conflict_exit = (int)code;
        } else if (strcmp(a, "--verbose") == 0) {
            o->verbose = true;
        } else if (cli_take_opt(argc, argv, &i, "--lease", &v)) {
            rc = ms_value("--lease", v, &o->lease_ms);
            if (o->lease_ms == 0)
                o->lease_ms = CRD_LEASE_WATCHDOG;
        } else if (cli_take_opt(argc, argv, &i, "--on-lost", &v)) {
            int mode = o->on_lost;
            rc = word_arg(v, on_lost_words, "--on-lost must be term, kill or ignore", &mode);
            o->on_lost = (on_lost_mode)mode;
        } else if (cli_take_opt(argc, argv, &i, "--grace", &v)) {
            rc = ms_value("--grace", v, &o->grace_ms);
        } else if (cli_take_opt(argc, argv, &i, "--on-unavailable", &v)) {
            int policy = o->on_unavailable;
            rc = word_arg(v, on_unavailable_words,
                          "--on-unavailable must be fail, skip or degrade", &policy);
            o->on_unavailable = (crd_unavailable_policy)policy;
        } else if (cli_take_opt(argc, argv, &i, "--permits", &v)) {
            if (v == NULL || !cli_parse_ms(v, &o->permits) || o->permits < 1 ||
                o->permits > MAX_PERMITS)
                return cli_usage_error("run", "--permits needs a number of permits from 1 to %d",
                                       MAX_PERMITS);
        } else if (cli_take_opt(argc, argv, &i, "--rate", &v)) {
            if (!cli_parse_rate(v, &o->rate, &o->rate_interval_ms))
                return cli_usage_error("run", "--rate needs N/DURATION (e.g. 10/1s, 100/1m, "
                                       "5/250ms), N and the duration positive");
        } else if (cli_take_kind(a, &o->kind, &kinds_seen)) {
            if (kinds_seen > 1)
                return cli_usage_error("run",
                                       "--fair, --read, --write and --fenced exclude each other");
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage_error("run", "unknown option '%s'", a);
        } else if (o->nnames < MAX_NAMES) {
            o->names[o->nnames++] = a;
        } else {
            return cli_usage_error("run", "at most %d NAMEs", MAX_NAMES);
        }
    }
    if (rc != 0)
        return rc;
    if (o->nnames == 0)
        return cli_usage_error("run", "missing lock NAME");
    if (o->cmd == NULL)
        return cli_usage_error("run", "missing '--' and CMD after NAME");
    if (o->nnames > 1 && o->kind == CLI_FENCED)
        return cli_usage_error("run", "--fenced takes one NAME (its token goes to CMD)");
    if (o->permits > 0 && kinds_seen > 0)
        return cli_usage_error("run", "--permits holds a semaphore's permit, not a lock: no "
                               "--fair, --read, --write or --fenced");
    if (o->permits > 0 && o->nnames > 1)
        return cli_usage_error("run", "--permits takes one semaphore NAME");
    if (o->rate > 0 && (kinds_seen > 0 || o->permits > 0 || o->nnames > 1))
        return cli_usage_error("run", "--rate waits for a permit of one rate limiter NAME: no "
                               "--permits, lock kind or second NAME");
    if (o->rate > 0 && o->lease_ms > 0)
        return cli_usage_error("run", "--rate: a rate limiter's permit has no lease (--lease)");
    o->noun = o->permits > 0 ? "the permit of semaphore" : "lock";
    size_t off = 0;
    for (int i = 0; i < o->nnames && off < sizeof o->joined; i++)
        off += (size_t)snprintf(o->joined + off, sizeof o->joined - off, "%s%s", i ? " " : "",
                                o->names[i]);
    o->name = o->joined;
    return 0;
}

static void print_event_warnings(const char *name, crd_lock *lock)
{
    if (atomic_exchange(&run_failing, 0)) {
        int64_t v = 0;
        if (lock != NULL)
            crd_lock_validity_ms(lock, &v);
        cli_error("run", "warning: renewing lock '%s' fails; still valid for %lld ms", name,
                  (long long)v);
    }
    if (atomic_exchange(&run_recovered, 0))
        cli_error("run", "lock '%s' is renewed again", name);
}

/* The permit of `run --permits`: the library has no watchdog for permits, so the main
 * loop renews it (update_lease every third of the lease) between its other duties. */
typedef struct permit_hold {
    crd_permit_semaphore *ps;
    char id[CRD_PERMIT_ID_SIZE];
    int64_t lease_ms;    /* the permit's lease */
    bool renew;          /* no --lease: renewed while CMD runs */
    bool failing;        /* the last renewal got no answer (a warning was printed) */
    int64_t valid_until; /* CLOCK_MONOTONIC: the lease's end as last confirmed */
    int64_t next_renew;  /* CLOCK_MONOTONIC: when the next update_lease is due */
} permit_hold;

/* While CMD runs: what is known about the lock and what was done about losing it. */
typedef struct supervision {
    pid_t pid;
    int64_t lease_deadline; /* -1: the watchdog renews */
    bool lost;              /* the lock is gone */
    bool acted;             /* --on-lost was carried out */
    bool term_sent;         /* SIGTERM (or SIGKILL) went out */
    int64_t kill_deadline;  /* when SIGKILL follows SIGTERM; INT64_MAX once it went out */
} supervision;

static const char *const action_text[] = {
    [ON_LOST_TERM] = "sending CMD SIGTERM",
    [ON_LOST_KILL] = "killing CMD (SIGKILL)",
    [ON_LOST_IGNORE] = "CMD keeps running (--on-lost=ignore), exit status will be 70"};

/* Notices a lost lock (the watchdog said so, or a fixed lease ran out) and carries out
 * --on-lost: SIGTERM then SIGKILL after the grace, SIGKILL, or nothing. */
static void check_lost(const run_opts *o, crd_lock *lock, supervision *s)
{
    print_event_warnings(o->name, lock);
    if (!s->lost && atomic_load(&run_lost)) {
        s->lost = true;
        cli_error("run", "%s '%s' lost while CMD ran (%s); %s", o->noun, o->name,
                  crd_strerror((crd_status)atomic_load(&run_lost_status)), action_text[o->on_lost]);
    }
    if (!s->lost && s->lease_deadline >= 0 && cli_now_ms() >= s->lease_deadline) {
        s->lost = true;
        cli_error("run", "the %lld ms lease of %s '%s' ran out while CMD ran; %s",
                  (long long)o->lease_ms, o->noun, o->name, action_text[o->on_lost]);
    }
    if (s->lost && !s->acted) {
        s->acted = true;
        if (o->on_lost == ON_LOST_TERM) {
            run_signal_cmd(s->pid, SIGTERM);
            s->term_sent = true;
            s->kill_deadline = cli_now_ms() + o->grace_ms;
        } else if (o->on_lost == ON_LOST_KILL) {
            run_signal_cmd(s->pid, SIGKILL);
            s->term_sent = true;
            s->kill_deadline = INT64_MAX;
        }
    }
    if (s->term_sent && cli_now_ms() >= s->kill_deadline) {
        run_signal_cmd(s->pid, SIGKILL);
        s->kill_deadline = INT64_MAX;
    }
}

/* Renews a permit whose renewal is due: update_lease sets its lease to lease_ms from
 * now. The permit found gone (expired and reclaimed, or removed) is a loss at once;
 * renewals without an answer are a loss when the last confirmed lease has run out, as
 * for a lock's watchdog. */
static void renew_permit(const run_opts *o, permit_hold *h, supervision *s)
{
    if (h == NULL || !h->renew || s->lost)
        return;
    int64_t now = cli_now_ms();
    if (now < h->next_renew)
        return;
    crd_status st = crd_permit_semaphore_update_lease(h->ps, h->id, h->lease_ms);
    if (st == CRD_OK) {
        h->valid_until = now + h->lease_ms; /* now: taken before the script ran */
        h->next_renew = now + h->lease_ms / 3;
        if (h->failing)
            cli_error("run", "permit of semaphore '%s' is renewed again", o->name);
        h->failing = false;
        return;
    }
    if (st == CRD_NOT_OWNER) {
        s->lost = true;
        cli_error("run", "permit %s of semaphore '%s' lost while CMD ran (it is not a permit "
                  "out any more: its lease ran out, or it was removed); %s", h->id, o->name,
                  action_text[o->on_lost]);
        return;
    }
    now = cli_now_ms();
    if (now >= h->valid_until) {
        s->lost = true;
        cli_error("run", "renewing the permit of semaphore '%s' failed until its lease ran "
                  "out (%s); %s", o->name, crd_strerror(st), action_text[o->on_lost]);
        return;
    }
    if (!h->failing)
        cli_error("run", "warning: renewing the permit of semaphore '%s' fails (%s); still "
                  "valid for %lld ms", o->name, crd_strerror(st),
                  (long long)(h->valid_until - now));
    h->failing = true;
    /* Retry soon, but never past the lease's end. */
    int64_t retry =
        h->lease_ms / 10 < 50 ? 50 : (h->lease_ms / 10 > 1000 ? 1000 : h->lease_ms / 10);
    h->next_renew = now + retry < h->valid_until ? now + retry : h->valid_until;
}

/* Sleeps until a wake-up or the next deadline (SIGKILL after the grace, the lease, a
 * permit's renewal). */
static void wait_for_news(const supervision *s, const permit_hold *h)
{
    int64_t until = -1;
    if (s->term_sent && s->kill_deadline != INT64_MAX)
        until = s->kill_deadline;
    else if (!s->lost && s->lease_deadline >= 0)
        until = s->lease_deadline;
    else if (!s->lost && h != NULL && h->renew)
        until = h->next_renew;
    int timeout = -1;
    if (until >= 0) {
        int64_t left = until - cli_now_ms();
        timeout = left <= 0 ? 0 : (left > 60000 ? 60000 : (int)left);
    }
    struct pollfd pfd = {.fd = run_wake_fd(), .events = POLLIN};
    if (poll(&pfd, 1, timeout) > 0)
        run_drain_wakes();
}

/* Runs CMD under the held lock (or permit) until it exits. Returns the exit code; *lost
 * says whether the lock was lost meanwhile, *spawned whether CMD started at all. */
static int supervise(const run_opts *o, crd_lock *lock, permit_hold *permit, bool *lost,
                     bool *spawned)
{
    supervision s = {.lease_deadline = -1, .kill_deadline = -1};
    /* With a fixed lease, CMD may only run while the lease is trusted (lock and permit
     * are NULL when CMD runs without the lock). */
    if (o->lease_ms > 0 && lock != NULL) {
        int64_t valid = 0;
        if (crd_lock_validity_ms(lock, &valid) != CRD_OK)
            valid = o->lease_ms;
        s.lease_deadline = cli_now_ms() + valid;
    } else if (permit != NULL && !permit->renew) {
        s.lease_deadline = permit->valid_until;
    }
    run_cloexec_library_fds();
    int exit_code = 0;
    s.pid = run_spawn(o->cmd, &exit_code);
    *spawned = s.pid > 0;
    if (s.pid < 0)
        return exit_code;
    atomic_store(&run_child, (int)s.pid);
    atomic_store(&run_phase, RUN_RUNNING);

    int wstatus = 0;
    for (;;) {
        int sig = atomic_exchange(&run_pending_sig, 0);
        if (sig != 0)
            run_signal_cmd(s.pid, sig);
        if (run_child_exited(s.pid, &wstatus))
            break;
        renew_permit(o, permit, &s);
        check_lost(o, lock, &s);
        wait_for_news(&s, permit);
    }
    *lost = s.lost;
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return EXIT_OSERR;
}

/* The locks of one run: one per NAME, and the multi-lock over them when there are
 * several. */
typedef struct held_set {
    cli_lock locks[MAX_NAMES];
    crd_lock *handles[MAX_NAMES];
    int n;
    crd_multilock *multi;
} held_set;

/* Is this acquire failure Redis being unavailable (--on-unavailable applies)? */
static bool unavailable(crd_status st) { return st == CRD_IO || st == CRD_AUTH; }

/* Prints what --verbose says about a successful acquire, and hands a fenced lock's
 * token to CMD's environment. */
static void acquired(const run_opts *o, crd_client *client, int64_t waited, int64_t token)
{
    if (o->kind == CLI_FENCED) {
        char buf[24];
        snprintf(buf, sizeof buf, "%lld", (long long)token);
        setenv("CREDISSON_TOKEN", buf, 1);
        if (o->verbose)
            cli_error("run", "lock '%.200s' fencing token %lld", o->name, (long long)token);
    }
    if (!o->verbose)
        return;
    /* This client's only acquires: the metrics say whether it had to wait. */
    crd_metrics m;
    memset(&m, 0, sizeof m);
    crd_client_metrics(client, &m, sizeof m);
    if (m.contended > 0)
        cli_error("run", "lock '%.200s' acquired after waiting %lld ms", o->name,
                  (long long)waited);
    else
        cli_error("run", "lock '%.200s' acquired without waiting (%lld ms)", o->name,
                  (long long)waited);
}

/* Acquires the locks as o says. Returns CRD_OK, or the failure with the exit code in
 * *rc (a line printed; --conflict-exit-code may make that code 0). */
static crd_status acquire(const run_opts *o, crd_client *client, held_set *set, int *rc)
{
    int64_t t0 = cli_now_ms();
    int64_t token = 0;
    crd_status st;
    if (set->multi != NULL)
        st = crd_multilock_acquire(set->multi, o->wait_ms, o->lease_ms);
    else if (o->kind == CLI_FENCED)
        st = crd_lock_acquire_token(set->handles[0], o->wait_ms, o->lease_ms, &token);
    else
        st = crd_lock_acquire(set->handles[0], o->wait_ms, o->lease_ms);
    if (st == CRD_OK) {
        acquired(o, client, cli_now_ms() - t0, token);
        return CRD_OK;
    }
    if (st == CRD_BUSY || st == CRD_TIMEOUT) {
        cli_error("run", "lock '%.200s' not acquired within %lld ms%s", o->name,
                  (long long)o->wait_ms, set->n > 1 ? " (none of them is held)" : "");
        *rc = o->conflict_exit;
        return st;
    }
    if (st == CRD_INTERRUPTED) { /* a signal: the caller dies of it */
        *rc = 128 + run_wait_signal();
        return st;
    }
    char what[300];
    snprintf(what, sizeof what, "cannot acquire lock '%.200s'", o->name);
    cli_report("run", what, st, client);
    *rc = cli_exit_for_status(st);
    return st;
}

/* Releases the locks after CMD exited; returns the final exit code. */
static int release(const run_opts *o, crd_client *client, held_set *set, bool lost,
                   int exit_code)
{
    crd_status st;
    if (set->multi != NULL) {
        st = crd_multilock_release(set->multi);
    } else {
        st = crd_lock_release(set->handles[0]);
        if (st == CRD_IO) /* the library retried once; the latch makes another try safe */
            st = crd_lock_release(set->handles[0]);
    }
    if (lost)
        return EXIT_LOST;
    if (st == CRD_LOCK_LOST || st == CRD_NOT_OWNER) {
        cli_error("run", "lock '%s' was lost while CMD ran (%s)", o->name, crd_strerror(st));
        return EXIT_LOST;
    }
    if (st != CRD_OK) {
        char what[300];
        snprintf(what, sizeof what,
                 "warning: cannot release lock '%.200s', it expires after its lease", o->name);
        cli_report("run", what, st, client);
    }
    return exit_code;
}

/* --on-unavailable=skip|degrade after Redis could not be used: say so, and run CMD
 * without the lock when degrading. Returns the exit code. */
static int without_the_lock(const run_opts *o)
{
    if (o->on_unavailable == CRD_UNAVAILABLE_SKIP) {
        cli_error("run", "warning: Redis unavailable: CMD skipped (--on-unavailable=skip)");
        return 0;
    }
    cli_error("run", "warning: Redis unavailable: running CMD WITHOUT %s '%.200s' "
              "(--on-unavailable=degrade); other processes may run it at the same time",
              o->noun, o->name);
    atomic_store(&run_phase, RUN_STARTING);
    bool lost = false, spawned = false;
    int exit_code = supervise(o, NULL, NULL, &lost, &spawned);
    atomic_store(&run_phase, RUN_DONE);
    return spawned && exit_code == 0 ? EXIT_DEGRADED : exit_code;
}

static void close_set(held_set *set)
{
    crd_multilock_free(set->multi);
    set->multi = NULL;
    for (int i = 0; i < set->n; i++)
        cli_close_lock(&set->locks[i]);
    set->n = 0;
}

/* Opens one lock per NAME (and the multi-lock over them). Returns CRD_OK or the
 * failure, reported. */
static crd_status open_set(const run_opts *o, crd_client *client, held_set *set)
{
    memset(set, 0, sizeof *set);
    /* parse_run_args refuses a run without a NAME; said again for clang's analyzer, which
     * does not carry that to cmd_run's set.handles[0]. */
    if (o->nnames < 1)
        return CRD_INVALID_ARGUMENT;
    crd_status st = CRD_OK;
    for (int i = 0; i < o->nnames && st == CRD_OK; i++) {
        st = cli_open_lock(client, o->kind, o->names[i], &set->locks[i]);
        if (st == CRD_OK)
            set->handles[set->n++] = set->locks[i].lock;
    }
    if (st == CRD_OK && set->n > 1)
        st = crd_multilock_new(set->handles, (size_t)set->n, &set->multi);
    if (st != CRD_OK) {
        cli_report("run", "bad lock name", st, client);
        close_set(set);
    }
    return st;
}

/* ---- run --permits N NAME: one permit of a permit-expirable semaphore ------------------ */

/* The default lease of a permit without --lease: the library's lock watchdog default. */
#define DEFAULT_PERMIT_LEASE_MS 30000

/* Opens semaphore NAME, creates it with o->permits permits when missing (trySetPermits:
 * one script, so two runs starting together create it once), refuses it when it has
 * another total, and takes one permit. Returns CRD_OK with h filled and
 * CREDISSON_PERMIT set, or the failure with the exit code in *rc (a line printed). */
static crd_status acquire_permit(const run_opts *o, const global_opts *g, crd_client *client,
                                 permit_hold *h, int *rc)
{
    crd_status st = crd_permit_semaphore_new(client, o->name, &h->ps);
    if (st != CRD_OK) {
        cli_report("run", "bad semaphore name", st, client);
        *rc = cli_exit_for_status(st);
        return st;
    }
    bool created = false;
    int64_t total = 0;
    st = crd_permit_semaphore_try_set_permits(h->ps, o->permits, &created);
    if (st == CRD_OK && !created)
        st = crd_permit_semaphore_permits(h->ps, &total);
    if (st != CRD_OK) {
        char what[300];
        snprintf(what, sizeof what, "cannot set up semaphore '%.200s'", o->name);
        cli_report("run", what, st, client);
        *rc = cli_exit_for_status(st);
        return st;
    }
    if (!created && total != o->permits) {
        cli_error("run", "semaphore '%.200s' exists with %lld permits, not %lld (--permits); "
                  "nothing was changed (see 'credisson semaphore status %.200s')", o->name,
                  (long long)total, (long long)o->permits, o->name);
        *rc = EXIT_USAGE;
        return CRD_INVALID_ARGUMENT;
    }
    h->renew = o->lease_ms <= 0;
    h->lease_ms = !h->renew ? o->lease_ms
                  : g->watchdog_ms > 0 ? g->watchdog_ms
                                       : DEFAULT_PERMIT_LEASE_MS;
    int64_t t0 = cli_now_ms();
    st = crd_permit_semaphore_acquire(h->ps, o->wait_ms, h->lease_ms, h->id);
    if (st == CRD_BUSY || st == CRD_TIMEOUT) {
        cli_error("run", "no permit of semaphore '%.200s' free within %lld ms (all %lld held)",
                  o->name, (long long)o->wait_ms, (long long)o->permits);
        *rc = o->conflict_exit;
        return st;
    }
    if (st == CRD_INTERRUPTED) {
        *rc = 128 + run_wait_signal();
        return st;
    }
    if (st != CRD_OK) {
        char what[300];
        snprintf(what, sizeof what, "cannot acquire a permit of semaphore '%.200s'", o->name);
        cli_report("run", what, st, client);
        *rc = cli_exit_for_status(st);
        return st;
    }
    /* The lease ends lease_ms after the try that took it, which may be long after t0:
     * ask how much is left (measured from before the question, so never late). */
    int64_t t1 = cli_now_ms(), left = 0;
    if (crd_permit_semaphore_lease_left(h->ps, h->id, &left) != CRD_OK || left <= 0)
        left = h->lease_ms - (cli_now_ms() - t1);
    h->valid_until = t1 + left;
    h->next_renew = t1 + h->lease_ms / 3;
    setenv("CREDISSON_PERMIT", h->id, 1);
    if (o->verbose)
        cli_error("run", "permit %s of semaphore '%.200s' acquired after %lld ms (%s lease "
                  "%lld ms)", h->id, o->name, (long long)(t1 - t0),
                  h->renew ? "renewed" : "fixed", (long long)h->lease_ms);
    return CRD_OK;
}

/* Gives the permit back after CMD exited; returns the final exit code. A release is not
 * resent blindly: one that was not sent (CRD_IO) is sent again; one whose reply was lost
 * is sent again too, because a release by id is safe to repeat (a second one finds no
 * such permit and changes nothing: CRD_NOT_OWNER then means the first went through). */
static int release_permit(const run_opts *o, crd_client *client, permit_hold *h, bool lost,
                          int exit_code)
{
    crd_status st = crd_permit_semaphore_release(h->ps, h->id);
    if (st == CRD_IO)
        st = crd_permit_semaphore_release(h->ps, h->id);
    if (st == CRD_OUTCOME_UNKNOWN) {
        st = crd_permit_semaphore_release(h->ps, h->id);
        if (st == CRD_NOT_OWNER)
            st = CRD_OK;
    }
    if (lost)
        return EXIT_LOST;
    if (st == CRD_LOCK_LOST || st == CRD_NOT_OWNER) {
        cli_error("run", "permit %s of semaphore '%s' was lost while CMD ran (%s)", h->id,
                  o->name, crd_strerror(st));
        return EXIT_LOST;
    }
    if (st != CRD_OK) {
        char what[300];
        snprintf(what, sizeof what,
                 "warning: cannot release the permit of semaphore '%.200s', it expires "
                 "after its lease", o->name);
        cli_report("run", what, st, client);
    }
    return exit_code;
}

/* run --permits: acquire, supervise, release. Returns the exit code; *st says how the
 * acquire went (for --on-unavailable). */
static int run_with_permit(const run_opts *o, const global_opts *g, crd_client *client,
                           crd_status *st)
{
    permit_hold h;
    memset(&h, 0, sizeof h);
    int rc = 0;
    *st = acquire_permit(o, g, client, &h, &rc);
    if (*st == CRD_OK) {
        atomic_store(&run_phase, RUN_STARTING);
        bool lost = false, spawned = false;
        int exit_code = supervise(o, NULL, &h, &lost, &spawned);
        atomic_store(&run_phase, RUN_DONE);
        if (spawned) {
            rc = release_permit(o, client, &h, lost, exit_code);
        } else {
            release_permit(o, client, &h, false, 0); /* CMD never ran: its failure is the news */
            rc = exit_code;
        }
    }
    crd_permit_semaphore_free(h.ps);
    return rc;
}

/* run --rate: a permit of the rate limiter, then CMD; nothing to give back. Returns the
 * exit code; *st says how the acquire went (for --on-unavailable). */
static int run_with_rate(const run_opts *o, crd_client *client, crd_status *st)
{
    int rc = 0;
    *st = cli_rate_acquire(client, o->name, o->rate, o->rate_interval_ms, o->wait_ms,
                           o->conflict_exit, o->verbose, &rc);
    if (*st == CRD_INTERRUPTED)
        return 128 + run_wait_signal();
    if (*st != CRD_OK)
        return rc;
    atomic_store(&run_phase, RUN_STARTING);
    bool lost = false, spawned = false;
    int exit_code = supervise(o, NULL, NULL, &lost, &spawned);
    atomic_store(&run_phase, RUN_DONE);
    return exit_code;
}

/* The end of a run that a signal interrupted while it waited: everything is released
 * (the client is freed), then the process dies of the signal. */
static int finish_run(int rc)
{
    int sig = run_wait_signal();
    if (sig != 0 && atomic_load(&run_phase) == RUN_WAITING)
        return run_die_of_signal(sig);
    return rc;
}

int cmd_run(const global_opts *g, int argc, char **argv)
{
    run_opts o = {.kind = CLI_RLOCK,
                  .wait_ms = CRD_WAIT_FOREVER,
                  .lease_ms = CRD_LEASE_WATCHDOG,
                  .grace_ms = KILL_GRACE_MS,
                  .on_lost = ON_LOST_TERM,
                  .conflict_exit = EXIT_NOT_ACQUIRED,
                  .on_unavailable = CRD_UNAVAILABLE_FAIL};
    int rc = parse_run_args(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? 0 : rc;

    run_remember_start_fds();
    rc = run_install_handlers();
    if (rc != 0)
        return rc;
    crd_client *client;
    rc = cli_make_client(g, "run", run_on_event, &client);
    if (rc == EXIT_UNAVAILABLE && o.on_unavailable != CRD_UNAVAILABLE_FAIL)
        return without_the_lock(&o);
    if (rc != 0)
        return rc;
    if (o.permits > 0 || o.rate > 0) {
        crd_status pst = CRD_OK;
        rc = o.permits > 0 ? run_with_permit(&o, g, client, &pst)
                           : run_with_rate(&o, client, &pst);
        crd_client_free(client);
        if (pst != CRD_OK && unavailable(pst) && o.on_unavailable != CRD_UNAVAILABLE_FAIL)
            return without_the_lock(&o);
        return finish_run(rc);
    }
    held_set set;
    crd_status st = open_set(&o, client, &set);
    if (st != CRD_OK) {
        crd_client_free(client);
        return cli_exit_for_status(st);
    }
    st = acquire(&o, client, &set, &rc);
    if (st == CRD_OK && run_wait_signal() != 0) {
        /* Taken just as the signal came: given back, and the signal ends the run. */
        release(&o, client, &set, false, 0);
        st = CRD_INTERRUPTED;
    }
    if (st == CRD_OK) {
        /* The lock is watched (prompt loss detection) before CMD starts: a force-unlock
         * right away is heard, and no subscriber connect is in flight at the fork. */
        crd_lock_await_watch(set.handles[0], 2000);
        atomic_store(&run_phase, RUN_STARTING);
        bool lost = false, spawned = false;
        int exit_code = supervise(&o, set.handles[0], NULL, &lost, &spawned);
        atomic_store(&run_phase, RUN_DONE);
        if (spawned) {
            rc = release(&o, client, &set, lost, exit_code);
        } else {
            release(&o, client, &set, false, 0); /* CMD never ran: its failure is the news */
            rc = exit_code;
        }
    }
    close_set(&set);
    crd_client_free(client);
    if (st != CRD_OK && unavailable(st) && o.on_unavailable != CRD_UNAVAILABLE_FAIL)
        return without_the_lock(&o);
    return finish_run(rc);
}
