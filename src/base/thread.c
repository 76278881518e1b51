/*
 * thread.c -- the start and the stop of the client's own threads (watchdog, subscriber,
 * cluster refresher, sentinel listener, offload helpers, I/O thread): one rule for each, so
 * that every thread is named the same way, none takes the process's signals or can raise
 * SIGPIPE, and a stop never joins a thread that a fork child does not have.
 *
 * No lock of its own: crd__thread_stop takes the mutex it is given; any thread but the one
 * being stopped.
 */
#include "base.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

int crd__thread_create(pthread_t *thread, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(thread, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

void crd__thread_enter(const char *name)
{
    pthread_setname_np(pthread_self(), name); /* as top -H, gdb and perf show it */
}

void crd__thread_stop(crd_client *c, pthread_mutex_t *mu, pthread_cond_t *cv, bool *stop,
                      const bool *started, const pthread_t *thread, int wake_fd)
{
    pthread_mutex_lock(mu);
    *stop = true;
    if (cv != NULL)
        pthread_cond_broadcast(cv);
    bool was_started = *started;
    pthread_mutex_unlock(mu);
    if (wake_fd >= 0) {
        char b = 1;
        while (write(wake_fd, &b, 1) < 0 && errno == EINTR) {
        }
    }
    if (was_started && c->pid == getpid())
        pthread_join(*thread, NULL); /* read after stop: no start comes after it */
}
