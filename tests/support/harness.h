/*
 * harness.h -- test support for the credisson Criterion suites.
 *
 * What it provides
 *   - A private redis-server per test executable. A Criterion PRE_ALL hook (in the
 *     runner process, before any worker exists) starts redis-server on a free
 *     127.0.0.1 port in a temporary directory, waits until PING answers, and exports
 *     the port in the environment (CRDT_REDIS_PORT) that every worker inherits. The
 *     POST_ALL hook (and an atexit handler, and PR_SET_PDEATHSIG in the server child)
 *     stops it, so no redis-server outlives the test executable even when a test or
 *     the runner crashes. Set CRDT_REDIS_PORT yourself to run against a server you
 *     started instead.
 *   - Extra servers for tests that need special configuration (requirepass, ACL
 *     users, unix sockets): crdt_server_start().
 *   - Clients, raw hiredis connections, unique key prefixes, a monotonic clock, a
 *     deadline-bounded wait-until, fork helpers, a trace recorder for crd_options
 *     .on_trace, INFO commandstats readers and PUBSUB CHANNELS checks.
 *
 * Parallelism: tests/CMakeLists.txt runs each executable with two Criterion workers,
 * or one ("--jobs 1") for executables listed in CRD_SERIAL_TESTS or whose source has a
 * line containing CRDT_SERIAL_TEST. Tests of one executable share its server, so each
 * uses its own keys (crdt_key); server-wide checks need a serial executable.
 *
 * Every helper that can fail asserts with Criterion (cr_assert), so it must be called
 * from a test (a worker process), not from the runner. Helpers are thread-safe unless
 * noted; the trace recorder is explicitly so.
 */
#ifndef CRDT_HARNESS_H
#define CRDT_HARNESS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "credisson.h"

/* ---------------------------------------------------------------------------------- */
/* The shared server                                                                  */
/* ---------------------------------------------------------------------------------- */

/* Port of this executable's redis-server (asserts it is running). */
int crdt_port(void);

/* The server program under test: CRD_REDIS_SERVER from the environment (e.g. the path
 * of valkey-server), else the redis-server the build found. */
const char *crdt_redis_server_path(void);
/* Its command-line client: CRD_REDIS_CLI from the environment (e.g. valkey-cli), else
 * "redis-cli" (looked up on PATH). */
const char *crdt_redis_cli_path(void);

/* ---------------------------------------------------------------------------------- */
/* Extra servers                                                                      */
/* ---------------------------------------------------------------------------------- */

typedef struct crdt_server {
    pid_t pid;
    int port;           /* 0 when started with port 0 (unix socket only) */
    int tls_port;       /* its TLS port, 0 when it serves no TLS */
    char dir[256];      /* its temporary working directory */
    char unix_path[300];/* "" unless with_unix_socket */
} crdt_server;

/* Start a redis-server on a free port (retrying on a port race), with an optional unix
 * socket in its temp dir, plus extra arguments (NULL-terminated list, may be NULL),
 * e.g. {"--requirepass", "s3cret", NULL}. Waits (deadline 10 s) until it accepts
 * connections. ping_password / ping_user are used for the readiness PING (may be
 * NULL). Asserts on failure. */
void crdt_server_start(crdt_server *srv, bool with_unix_socket, const char *const *extra_args,
                       const char *ping_user, const char *ping_password);
/* Stop it (SIGTERM, then SIGKILL after 3 s) and remove its directory. */
void crdt_server_stop(crdt_server *srv);

/* ---------------------------------------------------------------------------------- */
/* TLS                                                                                */
/* ---------------------------------------------------------------------------------- */

/* TLS is a parameter of the harness: with CRDT_TLS=1 in the environment, every server it
 * starts (the shared one and crdt_server_start's) also serves TLS on tls_port with
 * certificates made for this run by support/tls_certs.sh (openssl CLI, in a temp dir;
 * nothing secret is committed), and crdt_options() / crdt_options_port() /
 * crdt_plain_client() clients connect there with verification on. Raw hiredis probes
 * (crdt_redis, crdt_raw_connect) keep the plain port. `make test-tls` runs the lock,
 * exclusion, pubsub, watchdog, contention, semaphore and latch suites so. */
bool crdt_tls(void);
/* The directory of this run's certificates (made on first use in this process when the
 * environment has none): ca.crt ca.key server.crt server.key expired.crt client.crt
 * client.key other-ca.crt (see tls_certs.sh). */
const char *crdt_tls_certs(void);
/* "<crdt_tls_certs()>/<name>", kept for the process's life. */
const char *crdt_tls_file(const char *name);
/* With o's TLS options but a CA that signed nothing of the run (other-ca.crt), a client
 * must not start, and its message must name the certificate (asserted). */
void crdt_expect_untrusted_ca_refused(crd_options *o);
/* Point o at the server whose plain port is port: its TLS port (tls, CA) when the run is
 * CRDT_TLS=1 and that server serves TLS, else the plain port without TLS. */
void crdt_options_port(crd_options *o, int port);
/* Start a server that serves TLS on tls_port (server.crt/server.key/ca.crt of
 * certs_dir, --tls-auth-clients no unless extra_args say otherwise: later arguments
 * win) besides its plain port, whatever CRDT_TLS says. Asserts on failure. */
void crdt_server_start_tls(crdt_server *srv, const char *certs_dir,
                           const char *const *extra_args, const char *ping_user,
                           const char *ping_password);

/* ---------------------------------------------------------------------------------- */
/* Time                                                                               */
/* ---------------------------------------------------------------------------------- */

/* Monotonic clock in ms / ns. */
int64_t crdt_now_ms(void);
int64_t crdt_now_ns(void);
/* Sleep for ms. Only for letting time pass where time passing IS the behaviour under
 * test (a lease running out), and inside crdt_wait_until's polling. */
void crdt_sleep_ms(int64_t ms);

/* Evaluate pred(arg) until it returns true or timeout_ms passes (checking every
 * ~2 ms). Returns whether pred became true. */
bool crdt_wait_until(bool (*pred)(void *arg), void *arg, int64_t timeout_ms);
/* What a crdt_wait_until predicate most often needs to look at: a server connection, a
 * client, a name (key, channel, lock) and one more thing of the test's own. Each
 * predicate reads the members it needs; the rest stay zero. */
typedef struct crdt_probe {
    redisContext *r;
    crd_client *c;
    const char *name;
    const void *data;
    long long n;
} crdt_probe;

/* Runs c's event loop as an application would (poll on crd_loop_fd for
 * crd_loop_timeout_ms, at most 100 ms, then crd_loop_dispatch) until *done reaches n or
 * limit_ms pass. Returns the longest crd_loop_dispatch call, in microseconds. */
int64_t crdt_loop_until(crd_client *c, const int *done, int n, int64_t limit_ms);
/* The simplest event-loop callback: counts the operations done (a crdt_loop_until
 * counter), those whose wait ran out (CRD_TIMEOUT, or CRD_IO on a connection that never
 * answered), and keeps the last status. */
typedef struct crdt_op_rec {
    int done;
    crd_status last;
    int failed;
} crdt_op_rec;
void crdt_op_rec_done(void *user, crd_op *op, crd_status st);

/* The slowdown factor of this run, the suite's one time-scale knob: CRDT_TIME_SCALE
 * from the environment (make test-valgrind sets it; memcheck runs the library many
 * times slower), 1 when unset, never below 1. Two uses, both through these helpers:
 *   - a test whose scenario must fit inside a lease it chose stretches that lease and
 *     the bounds derived from it with crdt_scaled_ms(); bounds on the library's own
 *     promptness are never scaled;
 *   - a heavy loop (exclusion checkers, FIFO rounds, 10 000 holds) runs
 *     crdt_scaled_count() rounds, so CRDT_TIME_SCALE=4 also makes a quick local run.
 * No other environment variable scales time or work (test_exclusion's
 * CRDT_EXCLUSION_TOTAL sets that one test's total). */
double crdt_time_scale(void);
/* ms times crdt_time_scale(), rounded up. */
int64_t crdt_scaled_ms(int64_t ms);
/* n divided by crdt_time_scale() (rounded down), at least min. */
int crdt_scaled_count(int n, int min);

/* ---------------------------------------------------------------------------------- */
/* Files                                                                              */
/* ---------------------------------------------------------------------------------- */

/* The whole file at path, NUL-terminated, in malloc'd memory (free it); *len gets its
 * length. Asserts it can be opened. */
char *crdt_slurp(const char *path, size_t *len);

/* ---------------------------------------------------------------------------------- */
/* Clients and connections                                                            */
/* ---------------------------------------------------------------------------------- */

/* crd_options_init(), then host 127.0.0.1 and the test server's port (its TLS port under
 * CRDT_TLS=1), connect timeout 1000 ms, command timeout 3000 ms, and identity off (the
 * suites that count commands or compare traffic stay exact; set it back to test it). */
void crdt_options(crd_options *o);
/* A client from crdt_options() (asserts CRD_OK). */
crd_client *crdt_client(void);
/* A client from the given options (asserts CRD_OK). */
crd_client *crdt_client_opts(const crd_options *o);
/* A lock handle (asserts CRD_OK). */
crd_lock *crdt_lock(crd_client *c, const char *name);

/* The setup most lock tests open with: one or two clients from crdt_options(), a raw
 * connection to the test server, one key and a handle on it for each client: la/lb, or
 * rwa/rwb for read-write locks (the other pair stays NULL). b and its handle are NULL for
 * a one-client fixture. key is crdt_key(suffix), so it stays valid after
 * crdt_fixture_close (tests check what a closed client left on the server), and so does
 * channel, the pub/sub channel a plain lock of that name publishes its unlocks on
 * ("redisson_lock__channel:{<key>}"; fair and read-write locks use others). */
typedef struct crdt_fixture {
    crd_client *a, *b;
    redisContext *r;
    const char *key;
    char channel[400];
    crd_lock *la, *lb;
    crd_rwlock *rwa, *rwb;
} crdt_fixture;

/* Open a fixture of `clients` (1 or 2) clients whose handles new_lock makes (crdt_lock,
 * or a suite's own constructor such as a fair lock's). Asserts on failure. */
void crdt_fixture_open(crdt_fixture *f, int clients, const char *suffix,
                       crd_lock *(*new_lock)(crd_client *c, const char *name));
/* The same with client a made from oa and b from ob (NULL: crdt_options()), for tests
 * that trace a client or point it at a proxy. new_lock NULL: no la/lb. */
void crdt_fixture_open_opts(crdt_fixture *f, int clients, const char *suffix,
                            crd_lock *(*new_lock)(crd_client *c, const char *name),
                            const crd_options *oa, const crd_options *ob);
/* A fixture whose handles are read-write locks (rwa, rwb), its clients made as
 * crdt_fixture_open_opts makes them. Asserts on failure. */
void crdt_fixture_open_rw(crdt_fixture *f, int clients, const char *suffix,
                          const crd_options *oa, const crd_options *ob);
/* Free each client after its handles, then the raw connection (NULL members skipped). */
void crdt_fixture_close(crdt_fixture *f);
/* The same, running check(r, key) between freeing the clients and the connection: a
 * suite's "nothing left behind" assertion, which must see the server once no client of
 * the test is left to hold, wait or subscribe. */
void crdt_fixture_close_checked(crdt_fixture *f,
                                void (*check)(redisContext *r, const char *key));

/* A new raw hiredis connection to the test server (asserts). Free with redisFree(). */
redisContext *crdt_redis(void);
/* Same, to any port. */
redisContext *crdt_redis_port(int port);

/* Run a command (printf-like, hiredis %s/%b conventions); asserts a reply arrived.
 * The caller frees the reply with freeReplyObject(). */
redisReply *crdt_cmd(redisContext *c, const char *fmt, ...);
redisReply *crdt_cmd_argv(redisContext *c, int argc, const char **argv, const size_t *argvlen);
/* Integer reply of a command (asserts it is an integer). */
long long crdt_cmd_int(redisContext *c, const char *fmt, ...);
/* Status/string reply of a command, copied into buf ("" for nil); returns buf. */
char *crdt_cmd_str(redisContext *c, char *buf, size_t cap, const char *fmt, ...);

/* ---------------------------------------------------------------------------------- */
/* Keys                                                                               */
/* ---------------------------------------------------------------------------------- */

/* A unique key for this test: "crdt:<test-name>:<pid>.<n>:<suffix>" (no glob or brace
 * characters). Storage lives until the process exits. */
const char *crdt_key(const char *suffix);
/* The prefix crdt_key() uses for this process ("crdt:<test-name>:<pid>.<n>"), e.g. to
 * SCAN or PUBSUB CHANNELS with a pattern. */
const char *crdt_key_prefix(void);

/* ---------------------------------------------------------------------------------- */
/* Server introspection                                                               */
/* ---------------------------------------------------------------------------------- */

/* calls= of "cmdstat_<cmd>" in INFO commandstats (cmd lowercase, e.g. "evalsha"); 0 if
 * the command never ran. */
long long crdt_cmdstat_calls(redisContext *c, const char *cmd);
/* Number of channels PUBSUB CHANNELS [pattern] lists (pattern NULL = all). */
long long crdt_pubsub_channels_count(redisContext *c, const char *pattern);
/* Waits up to 2 s for PUBSUB CHANNELS [pattern] to become empty; returns whether it
 * did (unsubscribe is asynchronous to the call that ended a wait). */
bool crdt_pubsub_channels_empty(const char *pattern);
/* The same on the server at port. */
bool crdt_pubsub_channels_empty_at(int port, const char *pattern);

/* ---------------------------------------------------------------------------------- */
/* Lock state probes                                                                  */
/* ---------------------------------------------------------------------------------- */

/* "<client uuid>:<owner>": an owner's field in a lock hash, a fair queue entry, a
 * read-write reader (the writer's is that plus ":write"). */
void crdt_owner_field(crd_client *c, uint64_t owner, char *buf, size_t cap);
/* PTTL / EXISTS of a key (asserts an integer reply). */
long long crdt_pttl(redisContext *r, const char *key);
long long crdt_exists(redisContext *r, const char *key);
/* HGET as an integer: 0 for a missing field or key (asserts a string or nil reply). */
long long crdt_hget_int(redisContext *r, const char *key, const char *field);
/* Number of keys matching a pattern (a full SCAN). */
long long crdt_count_keys(redisContext *r, const char *pattern);
/* Waits up to timeout_ms until the key exists (present) or is gone (!present);
 * returns whether it happened. */
bool crdt_await_exists(redisContext *r, const char *key, bool present, int64_t timeout_ms);

/* PUBSUB NUMSUB of one channel. */
long long crdt_numsub(redisContext *r, const char *channel);
/* Waits up to timeout_ms until the channel has a subscriber (a waiter blocked on
 * it); returns whether it did. */
bool crdt_await_subscribed(redisContext *r, const char *channel, int64_t timeout_ms);
/* Waits up to timeout_ms until at least min connections are subscribed to the channel
 * (PUBSUB NUMSUB); returns whether they were. */
bool crdt_await_numsub(redisContext *r, const char *channel, long long min, int64_t timeout_ms);
/* Waits up to timeout_ms until LLEN key lies in [min, max] (min == max: exactly);
 * returns whether it did. */
bool crdt_await_llen(redisContext *r, const char *key, long long min, long long max,
                     int64_t timeout_ms);
/* Waits up to timeout_ms until crdt_hget_int(r, key, field) is want; returns whether
 * it was. */
bool crdt_await_hget_int(redisContext *r, const char *key, const char *field, long long want,
                         int64_t timeout_ms);
/* Waits up to timeout_ms until the crd_metrics counter at byte offset `offset`
 * (CRDT_METRIC(renewals)) of client c lies in [min, max]; asserts that
 * crd_client_metrics succeeds; returns whether it did. */
#define CRDT_METRIC(field) offsetof(crd_metrics, field)
bool crdt_await_metric(crd_client *c, size_t offset, uint64_t min, uint64_t max,
                       int64_t timeout_ms);
/* Waits up to timeout_ms until n threads of client c are asleep in a blocking acquire
 * or await (crd_metrics.waiting_now); returns whether they were. */
bool crdt_await_waiting(crd_client *c, uint64_t n, int64_t timeout_ms);

/* ---------------------------------------------------------------------------------- */
/* Watching published messages                                                        */
/* ---------------------------------------------------------------------------------- */

/* A raw subscriber on a channel (or a pattern) plus a sentinel channel of its own. To
 * read exactly what was published up to now, crdt_watch_collect publishes on the
 * sentinel and reads until it arrives: Redis delivers to one connection in publish
 * order. */
typedef struct crdt_watch {
    redisContext *sub, *pub;
    char sentinel[300];
} crdt_watch;

typedef struct crdt_msg {
    char channel[400];
    char payload[32];
} crdt_msg;

/* SUBSCRIBE channel, or PSUBSCRIBE it when pattern is true. */
void crdt_watch_open(crdt_watch *w, const char *channel, bool pattern);
/* The same on the server at port. */
void crdt_watch_open_at(crdt_watch *w, int port, const char *channel, bool pattern);
/* The messages published since the last collect: fills out[] (up to max), returns how
 * many there were. */
int crdt_watch_collect(crdt_watch *w, crdt_msg *out, int max);
void crdt_watch_close(crdt_watch *w);

/* ---------------------------------------------------------------------------------- */
/* Plain helpers for children and worker threads (no Criterion asserts)               */
/* ---------------------------------------------------------------------------------- */

/* Integer value of a reply, which it frees: an integer, a string's number, 0 for nil,
 * -1000000 for NULL or any other type. */
long long crdt_reply_int(redisReply *r);
/* A hiredis connection to 127.0.0.1:port with connect and command timeout timeout_ms,
 * or NULL. */
redisContext *crdt_raw_connect(int port, int64_t timeout_ms);
/* Blocks on BLPOP go 60 (a child's start signal, pushed by the parent): true when an
 * element came before the 60 s, or r's command timeout, ran out. */
bool crdt_await_go(redisContext *r, const char *go);
/* crd_options_init()'s defaults on 127.0.0.1:port over plain TCP, whatever CRDT_TLS
 * says (forked children, and tests that set up TLS themselves); no identity record, as
 * crdt_options. */
void crdt_options_plain(crd_options *o, int port);
/* A client with crd_options_init()'s defaults on 127.0.0.1:port (over TLS under
 * CRDT_TLS=1, see crdt_options_port), no identity record, or NULL. */
crd_client *crdt_plain_client(int port);
/* In a forked child about to exec a server or a tool (tests/standalone/redis_child.h's
 * child_stdio, which support/sentinel.c calls itself: soak_sentinel links it without this
 * file): stdin from /dev/null, stdout and stderr into log (appended to, or truncated first when truncate is true; left alone
 * when log cannot be opened). */
void crdt_child_stdio(const char *log, bool truncate);
/* A client made from o and a handle on name made by new_lock (crd_lock_new,
 * crd_fair_lock_new, ...), into *c and *l. Returns 0; 1 when the client failed (freed,
 * *c NULL); 2 when the handle failed (*c is the caller's to free). Callers add it to a
 * base of their own so that a child's exit code still says which step failed. */
int crdt_plain_open(const crd_options *o, const char *name,
                    crd_status (*new_lock)(crd_client *c, const char *name, crd_lock **out),
                    crd_client **c, crd_lock **l);
/* The critical section of the exclusion checkers, run by a holder right after its
 * acquire: INCR inside (it must read 1, nobody else is inside), a GET/SET
 * read-modify-write of counter (lost updates show in its final value), DECR inside.
 * Returns 1 if it found another holder inside, else 0. */
int crdt_exclusion_section(redisContext *r, const char *inside, const char *counter);
/* Sort n values ascending. */
void crdt_sort_i64(int64_t *v, int n);
/* Run command with sh -c (system()), its stdout discarded; copies what it wrote on stderr
 * into err (at most cap - 1 bytes, NUL-terminated) and returns its exit status, -1 when
 * it did not exit normally. For running the CLI from a test. */
int crdt_run_stderr(const char *command, char *err, size_t cap);

/* ---------------------------------------------------------------------------------- */
/* Processes                                                                          */
/* ---------------------------------------------------------------------------------- */

/* 1 in the ASan+UBSan and TSan builds (gcc's __SANITIZE_*__, clang's __has_feature). A
 * bound on wall-clock time that the plain build gates on is looser there, where every
 * program of the suite runs several times slower (the tests that say so name the factor);
 * counts are never loosened. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CRDT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CRDT_SANITIZED 1
#endif
#endif
#ifndef CRDT_SANITIZED
#define CRDT_SANITIZED 0
#endif

/* 1 in the sanitizer builds, where a child forked from a multi-threaded process cannot
 * run the library: TSan cannot start a thread there ("dup thread with used id"), and
 * gcc 12's ASan has no fork handler for its allocator, so a child forked while another
 * thread was inside malloc inherits that lock held and hangs in its first allocation
 * (seen in CI: 10 of 600 runs of lock's fork test under load, the child's new I/O
 * thread parked in SizeClassAllocator64::GetFromAllocator). A test whose child uses the
 * library after such a fork runs that half in the plain build and under memcheck
 * (glibc's malloc has its fork handler); forks made before the parent starts threads
 * (crdt_run_children, the exclusion runs) are safe everywhere. */
#define CRDT_FORK_CHILD_LIMITED CRDT_SANITIZED

/* Fork a child that runs fn(arg) and _exit()s with its return value (a crashing child
 * dies by its signal). The child must create its own clients. */
pid_t crdt_fork(int (*fn)(void *arg), void *arg);
/* Wait for the child (deadline timeout_ms; SIGKILL on expiry). Returns its exit code,
 * 128 + signal if it died by a signal, or -1 on timeout. */
int crdt_wait_child(pid_t pid, int64_t timeout_ms);

/* Fork n children; child i runs fn(i, arg) and exits with its return value. Waits for
 * all of them (one shared deadline, timeout_ms; stragglers are killed) and stores each
 * exit code as crdt_wait_child() reports it in codes[i]. Returns how many exited 0. */
int crdt_run_children(int n, int (*fn)(int index, void *arg), void *arg, int64_t timeout_ms,
                      int *codes);

/* ---------------------------------------------------------------------------------- */
/* Trace recorder (crd_options.on_trace)                                              */
/* ---------------------------------------------------------------------------------- */

typedef struct crdt_trace_entry {
    int argc;
    char **argv;        /* NUL-terminated copies (binary arguments keep their length) */
    size_t *argvlen;
    char *reply;        /* rendered reply */
    bool subscriber;
    int64_t t_ns;       /* monotonic time the callback ran */
    int tag;            /* the recorder's tag when recorded (e.g. a scenario step) */
} crdt_trace_entry;

typedef struct crdt_tracelog crdt_tracelog;

crdt_tracelog *crdt_tracelog_new(void);
void crdt_tracelog_free(crdt_tracelog *t);
/* Set o->on_trace / o->trace_user_data to record into t. */
void crdt_tracelog_attach(crdt_tracelog *t, crd_options *o);
/* crdt_options(o) recording into a new log, which it returns (free it after the
 * clients made from o). */
crdt_tracelog *crdt_traced_options(crd_options *o);
/* Entries recorded from now on carry this tag. */
void crdt_tracelog_set_tag(crdt_tracelog *t, int tag);
/* Number of entries so far. */
size_t crdt_tracelog_count(crdt_tracelog *t);
/* Copy of entry i (the caller frees it with crdt_trace_entry_free); false if i is out
 * of range. */
bool crdt_tracelog_get(crdt_tracelog *t, size_t i, crdt_trace_entry *out);
void crdt_trace_entry_free(crdt_trace_entry *e);
/* Entries whose argv[0] equals cmd (case-insensitive) and, if subscriber >= 0,
 * whose subscriber flag equals it; counted from index `from`. */
size_t crdt_tracelog_count_cmd(crdt_tracelog *t, size_t from, const char *cmd, int subscriber);
/* Script entries (EVALSHA or EVAL whose reply is not a NOSCRIPT error), from `from`. */
size_t crdt_tracelog_count_scripts(crdt_tracelog *t, size_t from);
/* Wait up to timeout_ms until crdt_tracelog_count_cmd(t, from, cmd, subscriber) or, with
 * cmd NULL, crdt_tracelog_count_scripts(t, from) reaches at_least; returns whether it
 * did. (Entries of the subscriber thread are traced when it reads them, possibly after
 * the call that caused them returned.) */
bool crdt_await_traced(crdt_tracelog *t, size_t from, const char *cmd, int subscriber,
                       size_t at_least, int64_t timeout_ms);
/* Whether any entry from `from` has argv[0] == cmd (case-insensitive) and an argument
 * equal to arg (arg NULL: any). */
bool crdt_tracelog_has(crdt_tracelog *t, size_t from, const char *cmd, const char *arg);
/* Print the log to stderr (debugging failed tests). */
void crdt_tracelog_dump(crdt_tracelog *t, const char *title);

/* ---------------------------------------------------------------------------------- */
/* MONITOR feed                                                                       */
/* ---------------------------------------------------------------------------------- */

/* One MONITOR line: the database, the source ("lua", "127.0.0.1:1234", "unix:..."),
 * and the unescaped arguments. */
typedef struct crdt_mon_cmd {
    int db;
    char source[64];
    int argc;
    char **argv;
    size_t *argvlen;
} crdt_mon_cmd;

/* Parse a MONITOR status line. Returns false if it is not one. Free with
 * crdt_mon_cmd_free(). */
bool crdt_mon_parse(const char *line, size_t len, crdt_mon_cmd *out);
void crdt_mon_cmd_free(crdt_mon_cmd *m);

#endif /* CRDT_HARNESS_H */
