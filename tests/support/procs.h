/*
 * procs.h -- child processes, free ports and plain HTTP for the introspection and CLI
 * suites (test_inspect.c, test_exporter.c, test_cli.c, test_cli_r47.c): the credisson CLI or any program started with its
 * output in files, waited for with a deadline; a free loopback port; one HTTP GET.
 *
 * Every helper asserts with Criterion (call it from a test). Children get
 * PR_SET_PDEATHSIG, so none outlives the test process.
 */
#ifndef CRDT_PROCS_H
#define CRDT_PROCS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct crdt_proc {
    pid_t pid;
    char out[300], err[300]; /* files holding its stdout and stderr */
    int64_t started_ms;
} crdt_proc;

/* Starts argv[0] (a path) with argv (NULL-terminated), stdin from /dev/null. */
void crdt_proc_start(crdt_proc *p, const char *const *argv);
/* The same with envp as its environment (NULL: this process's) and its output files in
 * dir (NULL: a directory of this process's under $TMPDIR). The child starts with no
 * signal blocked and SIGINT, SIGTERM, SIGHUP at their defaults, as a shell's child. */
void crdt_proc_start_in(crdt_proc *p, const char *const *argv, char *const *envp,
                        const char *dir);
/* The same for the credisson CLI (CRD_CLI_PATH): args without argv[0]. */
void crdt_cli_start(crdt_proc *p, const char *const *args);
/* Waits up to timeout_ms for it to exit (after that: what it is doing on stderr, its
 * signal state, threads and, with gdb installed, their stacks; then SIGKILL and an
 * assertion showing its output); returns its exit status (128+N for a signal). *out / *err (may be NULL) get its output,
 * malloc'd. */
int crdt_proc_finish(crdt_proc *p, int64_t timeout_ms, char **out, char **err);
/* Sends sig and reaps it (no assertion on how it ended). */
void crdt_proc_kill(crdt_proc *p, int sig);
/* The CLI run to its end (timeout_ms), its exit status. */
int crdt_cli_run(const char *const *args, int64_t timeout_ms, char **out, char **err);
/* The signal set /proc/PID/status shows as field ("SigCgt": caught, "SigIgn": ignored,
 * "SigBlk": blocked by the main thread), bit N-1 for signal N; 0 when it cannot be read. */
uint64_t crdt_proc_signals(pid_t pid, const char *field);
/* What the file at path holds now ("" when it does not exist), malloc'd. */
char *crdt_file_text(const char *path);

/* A TCP port nobody listens on now on 127.0.0.1 (bound, then closed). */
int crdt_free_port(void);
/* GET http://127.0.0.1:port<path>; returns the status code (0 when no answer within
 * timeout_ms), the body in *body (malloc'd, may be NULL). */
int crdt_http_get(int port, const char *path, int64_t timeout_ms, char **body);

#endif /* CRDT_PROCS_H */
