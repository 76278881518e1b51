/*
 * cli.h -- what the files of the `credisson` command-line tool share.
 *
 *   main.c    dispatch, global options, the main help text and the exit codes
 *   common.c  option parsing, error lines, exit codes for statuses, the library client
 *   json.c    JSON strings for --json output
 *   show.c    what status, list and watch say of a state: ages, identities, JSON objects
 *   run.c, spawn.c   `run` and the child process it supervises
 *   unlock.c, status.c, watch.c, list.c   one command each
 *   metrics.c `list --openmetrics` and `exporter` (libmicrohttpd): per-object gauges
 *   ratelimit.c `ratelimit` and what run --rate needs
 *   doctor.c, verify.c, probe.c (probe.h)   `doctor` and `verify`: their own hiredis
 *             connections (the deployment's probes), still no header of src/; doctor's
 *             checks and measurements are doctor_checks.c and doctor_measure.c, what
 *             they all go through doctor_findings.c (doctor.h)
 *   credisson.bash  bash completion (installed as completions/credisson)
 *
 * Every error line has one shape, "credisson: COMMAND: what went wrong[: the server's or
 * the system's words]" (cli_error, cli_report); usage errors add where to read more.
 * The CLI is a client of the public API like any other program: it includes credisson.h
 * and nothing of src/ (ctest cli_public_api checks the object files for crd__ symbols).
 * What it shows of a name comes from crd_state_read, crd_scan_* and crd_watch_*.
 */
#ifndef CRD_CLI_H
#define CRD_CLI_H

#include <credisson.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- exit codes (sysexits(3) where one fits; listed in main.c's help) ---------------- */

enum {
    EXIT_USAGE = 64,        /* EX_USAGE: bad command line */
    EXIT_NOT_A_LOCK = 65,   /* EX_DATAERR: unlock --force of a key that is not a lock */
    EXIT_UNAVAILABLE = 69,  /* EX_UNAVAILABLE: Redis unreachable or refusing */
    EXIT_LOST = 70,         /* EX_SOFTWARE: the lock was lost while CMD ran */
    EXIT_OSERR = 71,        /* EX_OSERR: fork, pipe or memory failure */
    EXIT_NOT_ACQUIRED = 75, /* EX_TEMPFAIL: not acquired within --wait */
    EXIT_CANNOT_EXEC = 126,
    EXIT_NOT_FOUND = 127
};

#define CLI_DEFAULT_URL "redis://127.0.0.1:6379"
#define CLI_PROG "credisson"

/* The options that come before the command. */
typedef struct global_opts {
    const char *url;
    int64_t watchdog_ms; /* 0: library default */
    /* TLS (redis-cli's flags), for rediss:// URLs */
    const char *cacert, *cacertdir, *cert, *key, *sni;
    bool insecure;
    const char *label; /* --label: the identity record's label */
} global_opts;

/* The exit-code table every help text ends with (main.c). */
extern const char cli_exit_codes_text[];

/* ---- the commands ------------------------------------------------------------------- */

int cmd_run(const global_opts *g, int argc, char **argv);
int cmd_status(const global_opts *g, int argc, char **argv);
int cmd_unlock(const global_opts *g, int argc, char **argv);
int cmd_watch(const global_opts *g, int argc, char **argv);
int cmd_list(const global_opts *g, int argc, char **argv);
int cmd_semaphore(const global_opts *g, int argc, char **argv); /* sync.c */
int cmd_latch(const global_opts *g, int argc, char **argv);     /* sync.c */
int cmd_doctor(const global_opts *g, int argc, char **argv);    /* doctor.c */
int cmd_verify(const global_opts *g, int argc, char **argv);    /* verify.c */
int cmd_ratelimit(const global_opts *g, int argc, char **argv); /* ratelimit.c */

/* ---- ratelimit.c: what run --rate needs ------------------------------------------------ */

/* "N/DURATION": N >= 1 permits per DURATION (a count and ms, s, m or h; a bare unit is 1 of
 * it; a bare number is ms). */
bool cli_parse_rate(const char *v, int64_t *rate, int64_t *interval_ms);
/* Creates rate limiter name with the rate when it has none (a different existing rate is
 * a usage error: *rc 64, nothing changed) and waits up to wait_ms for one permit. Returns
 * CRD_OK, or the failure with the exit code in *rc (a line printed; CRD_INTERRUPTED is the
 * caller's to report). */
crd_status cli_rate_acquire(crd_client *c, const char *name, int64_t rate, int64_t interval_ms,
                            int64_t wait_ms, int conflict_exit, bool verbose, int *rc);
int cmd_exporter(const global_opts *g, int argc, char **argv);  /* metrics.c */

/* ---- common.c: errors ---------------------------------------------------------------- */

#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* "credisson: CMD: <message>" (or "credisson: <message>" when cmd is NULL) on stderr. */
void cli_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);
/* The same plus " (see 'credisson [CMD] --help')". Returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);
/* "credisson: CMD: WHAT: <detail>" for a failed library call: the client's detail
 * message (the server's or the system's words) when there is one, else the status text. */
void cli_report(const char *cmd, const char *what, crd_status st, const crd_client *client);
/* The exit code for a failed library call. */
int cli_exit_for_status(crd_status st);

/* ---- common.c: options --------------------------------------------------------------- */

/* A duration in ms: decimal digits only, at most CRD_DURATION_MAX_MS. */
bool cli_parse_ms(const char *s, int64_t *out);
/* Matches "--opt VALUE" and "--opt=VALUE" (and, when opt is a short option "-x",
 * "-xVALUE"). Stores the value (NULL when opt is the last argument) and advances *i past
 * what it consumed. */
bool cli_take_opt(int argc, char **argv, int *i, const char *opt, const char **val);
bool cli_is_help(const char *a);
/* The last branch of a command's option loop: "-- NAME", an unknown option, the lock
 * NAME, or one argument too many. Returns 0, or the usage error's exit code. */
int cli_take_name_arg(const char *cmd, int argc, char **argv, int *i, const char **name);

/* ---- common.c: time ------------------------------------------------------------------ */

int64_t cli_now_ms(void);     /* CLOCK_MONOTONIC */
long long cli_epoch_ms(void); /* CLOCK_REALTIME: event times, fair-queue deadlines */

/* ---- common.c: URL and the library client -------------------------------------------- */

/* url with the password replaced by "***", for messages (logs must not keep secrets). */
const char *cli_redact_url(const char *url, char *buf, size_t len);
/* A library client for g (pool of one); on_event may be NULL. Prints one line and
 * returns the exit code on failure. */
int cli_make_client(const global_opts *g, const char *cmd, crd_event_fn on_event, crd_client **out);

/* ---- common.c: lock kinds ------------------------------------------------------------ */

/* The lock kinds behind --fair/--read/--write/--fenced/--spin/--nonreentrant[-fair]. */
typedef enum cli_kind {
    CLI_RLOCK,
    CLI_FAIR,
    CLI_READ,
    CLI_WRITE,
    CLI_FENCED,
    CLI_SPIN,
    CLI_NRLOCK,
    CLI_NRFAIR
} cli_kind;

/* A lock of any kind; rw is set for --read/--write and owns lock. */
typedef struct cli_lock {
    crd_lock *lock;
    crd_rwlock *rw;
} cli_lock;

/* Parses --fair/--read/--write/--fenced/--spin/--nonreentrant[-fair] into *kind; false if a is none of them. *seen becomes 1,
 * or 2 when a different kind was given before. */
bool cli_take_kind(const char *a, cli_kind *kind, int *seen);
crd_status cli_open_lock(crd_client *client, cli_kind kind, const char *name, cli_lock *out);
void cli_close_lock(cli_lock *l);

/* For the commands that name an object: NAME must be given and non-empty, and --url must
 * parse. Returns 0, or the usage error's exit code. */
int cli_check_name_and_url(const char *cmd, const global_opts *g, const char *name);
int cli_check_url(const char *cmd, const global_opts *g);

/* ---- json.c -------------------------------------------------------------------------- */

/* Prints s as a JSON string (control characters escaped, invalid UTF-8 as U+FFFD). */
void cli_json_string(const char *s, size_t len);
/* Writes the valid UTF-8 sequence at s (at most len bytes) to f, or bad in place of an
 * invalid first byte; returns how many bytes of s it took (1 for an invalid one). */
size_t cli_put_utf8(FILE *f, const unsigned char *s, size_t len, const char *bad);

/* ---- metrics.c ----------------------------------------------------------------------- */

/* Every Redisson object matching the patterns as Prometheus gauges in the text format
 * (0.0.4): a scan per pattern (keys counted per SCAN step: count), at most max_names
 * objects (then credisson_scrape_truncated 1 and a comment say so), within timeout_ms
 * (then credisson_scrape_complete 0). *text is malloc'd. Returns 0, or the exit code after
 * a line on stderr (cmd names the command). */
int cli_openmetrics(crd_client *client, const char *cmd, const char *const *patterns,
                    size_t npatterns, size_t count, size_t max_names, int64_t timeout_ms,
                    char **text, size_t *len);

/* ---- show.c: what status, list and watch say ------------------------------------------ */

/* A duration for people: "850 ms", "3 s", "12 min 3 s", "2 h 5 min", "3 d 4 h". */
const char *cli_age(int64_t ms, char *buf, size_t cap);
/* "web-3 pid 4711 ./report.sh" (crd_identity_describe) into buf. */
const char *cli_who(const crd_identity *who, char *buf, size_t cap);
/* The JSON object of an identity: {"client_id", "thread", "known", "host", "pid", "program",
 * "label", "version", "started_ms", "connections"}. */
void cli_json_who(const crd_identity *who);
/* A string as a logfmt-style value: bare when it has no space, quote or '=', else in
 * double quotes with '"' and '\\' escaped. */
void cli_text_value(const char *s);
/* A state's holders as JSON members ("holders":[...]). */
void cli_json_holders(const crd_state *st);
/* An epoch-ms since-time as JSON: the number, or null when negative. */
void cli_json_ms(const char *key, int64_t v);

#endif /* CRD_CLI_H */
