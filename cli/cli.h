/*
 * cli.h -- what the files of the `credisson` command-line tool share.
 *
 *   main.c    dispatch, global options, the main help text and the exit codes
 *   common.c  option parsing, error lines, exit codes for statuses, the library client
 *   conn.c    raw hiredis connections (status, watch, list) from the same URL forms
 *   json.c    JSON strings for --json output
 *   lockhash.c reading a lock's hash (holders, mode) as status, watch and list see it
 *   run.c, spawn.c   `run` and the child process it supervises
 *   unlock.c, status.c, watch.c, list.c   one command each
 *   credisson.bash  bash completion (installed as completions/credisson)
 *
 * Every error line has one shape, "credisson: COMMAND: what went wrong[: the server's or
 * the system's words]" (cli_error, cli_report); usage errors add where to read more.
 * Redisson's key and channel names come from the library (src/names.c via internal.h),
 * never from here.
 */
#ifndef CRD_CLI_H
#define CRD_CLI_H

#include <credisson.h>

#include <hiredis/hiredis.h>

#include "internal.h"

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

/* A lock of any kind; rw is set for --read/--write and owns lock. */
typedef struct cli_lock {
    crd_lock *lock;
    crd_rwlock *rw;
} cli_lock;

/* Parses --fair/--read/--write into *kind; false if a is none of them. *seen becomes 1,
 * or 2 when a different kind was given before. */
bool cli_take_kind(const char *a, crd__kind *kind, int *seen);
crd_status cli_open_lock(crd_client *client, crd__kind kind, const char *name, cli_lock *out);
void cli_close_lock(cli_lock *l);

/* ---- conn.c: raw connections --------------------------------------------------------- */

/* For the commands that open raw connections: NAME must be given and non-empty (unless
 * name_optional), and --url must parse into *ep (left empty otherwise). Returns 0, or
 * the usage error's exit code. */
int cli_name_and_endpoint(const char *cmd, const global_opts *g, const char *name,
                          crd__endpoint *ep);
int cli_endpoint(const char *cmd, const global_opts *g, crd__endpoint *ep);
/* A raw connection on the library's transport (TCP or unix socket, TLS when the URL says
 * rediss://, AUTH, SELECT), for the commands the public API does not offer. It owns a
 * library client made from the global options (crd_client_metrics for status --json). */
typedef struct cli_rconn {
    crd_client *client;
    crd__conn conn;
} cli_rconn;

/* Opens one (0), or prints one line and returns the exit code. name (may be NULL)
 * chooses the node on a cluster: the primary serving its slot. */
int cli_connect(const char *cmd, const global_opts *g, const char *name, cli_rconn *out);
void cli_close(cli_rconn *c);
/* Closes c's connection and opens one to node (a cluster node: the client's credentials
 * and TLS). 0, or prints one line and returns the exit code. */
int cli_reconnect_to(const char *cmd, cli_rconn *c, const crd__endpoint *node);
/* One command and its reply (error replies included), or NULL on a connection failure
 * (cli_rconn_err says why). */
redisReply *cli_cmd(cli_rconn *c, int argc, const char **argv, const size_t *lens);
/* Pipelining: cli_append sends a command now (false on a failure), cli_get_reply reads
 * the next reply (REDIS_OK, or REDIS_ERR on a connection failure). */
bool cli_append(cli_rconn *c, int argc, const char **argv, const size_t *lens);
int cli_get_reply(cli_rconn *c, redisReply **out);
/* Subscribed connections: the next reply already read (NULL when none; REDIS_ERR on a
 * protocol error), the socket to poll, whether read bytes wait to be parsed (TLS: do
 * not poll then), and one read from the socket (REDIS_ERR when it failed or closed). */
int cli_take_reply(cli_rconn *c, redisReply **out);
int cli_fd(const cli_rconn *c);
bool cli_buffered(const cli_rconn *c);
int cli_fill(cli_rconn *c);
/* Why the last operation failed. */
const char *cli_rconn_err(const cli_rconn *c);

/* ---- json.c -------------------------------------------------------------------------- */

/* Prints s as a JSON string (control characters escaped, invalid UTF-8 as U+FFFD). */
void cli_json_string(const char *s, size_t len);

/* ---- lockhash.c: a lock's hash ------------------------------------------------------- */

/* One owner field of a lock hash and its hold count (borrowed from the reply). */
typedef struct cli_holder {
    const char *owner;
    size_t owner_len;
    long long count;
} cli_holder;

/* A HGETALL reply read as a lock: holders, the read-write "mode" (NULL if none), and
 * whether every other field was a hold count (is_lock). */
typedef struct cli_lockhash {
    cli_holder *holders; /* malloc'd; borrowed strings */
    size_t nholders;
    const char *mode;
    size_t mode_len;
    bool is_lock;
} cli_lockhash;

/* Reads hash (a HGETALL array reply) into *out. Returns false when out of memory. */
bool cli_lockhash_read(const redisReply *hash, cli_lockhash *out);
void cli_lockhash_free(cli_lockhash *h);
/* A signed decimal of at most 18 digits. */
bool cli_parse_count(const char *s, size_t len, long long *out);
/* Whether a hash field looks like a holder's: "<uuid>:<id>", or a writer's
 * "<uuid>:<id>:write". */
bool cli_is_owner_field(const char *f, size_t len);
/* Whether an owner field is a writer's ("<uuid>:<id>:write"). */
bool cli_is_writer(const char *owner, size_t len);

#endif /* CRD_CLI_H */
