/*
 * run.h -- what run.c and spawn.c share: the state the signal handlers and the watchdog
 * callback leave for the main thread, and the child-process helpers of spawn.c.
 */
#ifndef CRD_CLI_RUN_H
#define CRD_CLI_RUN_H

#include "cli.h"

#include <stdatomic.h>
#include <sys/types.h>

/* Where `run` is, as seen by the signal handler. */
enum { RUN_WAITING = 0, RUN_STARTING = 1, RUN_RUNNING = 2, RUN_DONE = 3 };

extern atomic_int run_phase;
extern atomic_int run_child;       /* CMD's pid while it can be signalled */
extern atomic_int run_pending_sig; /* arrived while run_child was not set */
/* The watchdog callback's findings. */
extern atomic_int run_lost;        /* CRD_EVENT_LOCK_LOST seen */
extern atomic_int run_lost_status; /* its crd_status */
extern atomic_int run_failing;     /* renewals failing: 1 = new, main thread prints */
extern atomic_int run_recovered;   /* renewals recovered: 1 = new */

/* crd_options.on_event: runs on the library's watchdog thread; records and wakes. */
void run_on_event(void *user_data, const crd_event *ev);
/* The self-pipe and the handlers of SIGINT, SIGTERM, SIGHUP, SIGCHLD, and the interrupt
 * token bound to the calling (main) thread: a signal while `run` waits for its lock raises
 * it, so the wait ends (CRD_INTERRUPTED), a fair waiter leaves its queue, and `run` then dies
 * of the signal (run_die_of_signal). A signal of the three that was ignored when `run`
 * started keeps that, here and in CMD (spawn.c). Returns 0 or an exit code (a line printed). */
int run_install_handlers(void);
/* The signal that interrupted the wait (0: none). */
int run_wait_signal(void);
/* After the library let go of everything: dies of that signal (the exit status a shell
 * sees is 128 + it); returns 128 + sig only if the signal did not end the process. */
int run_die_of_signal(int sig);
/* The fd the main thread polls, and how it empties it after a wake-up. */
int run_wake_fd(void);
void run_drain_wakes(void);
/* Remember the descriptors open at start (the caller's, which CMD inherits); later mark
 * every other one (the library's sockets) close-on-exec so CMD does not keep them. */
void run_remember_start_fds(void);
void run_cloexec_library_fds(void);
/* fork + execvp, CMD in a new process group. Returns the pid, or -1 with *exit_code set (and a line
 * printed). */
pid_t run_spawn(char **cmd, int *exit_code);
/* Gives the terminal back to our group if CMD had it (after CMD exited). */
void run_take_back_tty(void);
/* Sends sig to CMD's process group (CMD and every process it started that stayed in
 * it). */
void run_signal_cmd(pid_t pid, int sig);
/* Has CMD exited? Looks without reaping (WNOWAIT), so run_child can be cleared before
 * the pid is freed for reuse; then reaps. Returns true with *status set. */
bool run_child_exited(pid_t pid, int *status);

#endif /* CRD_CLI_RUN_H */
