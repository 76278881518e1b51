/*
 * interrupt.c -- interrupt tokens (crd_interrupt, credisson.h): what lets another thread or
 * a signal handler end a blocking wait of the library (issue 44).
 *
 * A token is a flag and an eventfd. crd_interrupt_raise() is one atomic exchange and, when
 * the flag was down, one write(2) to the eventfd: both async-signal-safe, so a signal
 * handler may call it. The token's own thread (started by crd_interrupt_new) sleeps in
 * read(2) on the eventfd and, when it wakes, calls the wake function of every wait
 * registered on the token at that moment (crd__intr_enter): a broadcast on the waiter's
 * condition variable under its mutex (pubsub_wait.c, gate.c, undo.c) or a futex wake-up of
 * a caller waiting for its reply (engine_call.c). Nothing polls: a wait that is not
 * interrupted sleeps exactly as before. A wait checks the flag under its own mutex before
 * each sleep, and the thread takes that mutex before it broadcasts, so a raise is never
 * lost between the check and the sleep.
 *
 * Which token a wait obeys: the one the calling thread bound (crd_interrupt_bind), read
 * here from a thread-local; the waits ask crd__intr_current().
 *
 * Threads: raise from any thread or signal handler; the token's thread; waiters. Lock:
 * intr->mu (the registered waits), taken by a waiter with no other mutex held and by the
 * token's thread before a wait's own mutex: first in the lock order (base.h).
 */
#include "base.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct crd_interrupt {
    atomic_int raised;
    atomic_bool stop;
    int efd;
    pthread_t thread;
    pthread_mutex_t mu;   /* the list below */
    crd__intr_wait *waits; /* doubly linked, under mu */
};

static _Thread_local crd_interrupt *bound;

/* The token's thread: each time the eventfd is written, every registered wait is woken
 * (under mu: a wait that leaves takes mu, so none is woken after it left). */
static void *intr_main(void *arg)
{
    crd__thread_enter("crd-interrupt");
    crd_interrupt *in = arg;
    for (;;) {
        uint64_t v;
        ssize_t n = read(in->efd, &v, sizeof v);
        if (n < 0 && errno == EINTR)
            continue;
        if (atomic_load(&in->stop))
            break;
        if (n != (ssize_t)sizeof v)
            continue;
        pthread_mutex_lock(&in->mu);
        for (crd__intr_wait *w = in->waits; w != NULL; w = w->next)
            w->wake(w->arg);
        pthread_mutex_unlock(&in->mu);
    }
    return NULL;
}

crd_status crd_interrupt_new(crd_interrupt **out)
{
    if (out == NULL)
        return CRD_INVALID_ARGUMENT;
    *out = NULL;
    crd_interrupt *in = calloc(1, sizeof *in);
    if (in == NULL)
        return CRD_NO_MEMORY;
    atomic_init(&in->raised, 0);
    atomic_init(&in->stop, false);
    in->efd = eventfd(0, EFD_CLOEXEC);
    if (in->efd < 0) {
        free(in);
        return CRD_IO;
    }
    if (pthread_mutex_init(&in->mu, NULL) != 0) {
        close(in->efd);
        free(in);
        return CRD_NO_MEMORY;
    }
    /* Its thread takes none of the signals the process handles (crd__thread_create). */
    int rc = crd__thread_create(&in->thread, intr_main, in);
    if (rc != 0) {
        pthread_mutex_destroy(&in->mu);
        close(in->efd);
        free(in);
        return CRD_NO_MEMORY;
    }
    *out = in;
    return CRD_OK;
}

static void poke(crd_interrupt *in)
{
    uint64_t one = 1;
    ssize_t n;
    do
        n = write(in->efd, &one, sizeof one);
    while (n < 0 && errno == EINTR);
}

void crd_interrupt_free(crd_interrupt *in)
{
    if (in == NULL)
        return;
    if (bound == in)
        bound = NULL;
    atomic_store(&in->stop, true);
    poke(in);
    pthread_join(in->thread, NULL);
    close(in->efd);
    pthread_mutex_destroy(&in->mu);
    free(in);
}

void crd_interrupt_raise(crd_interrupt *in)
{
    if (in == NULL)
        return;
    int saved = errno; /* a signal handler's caller must find errno as it was */
    if (atomic_exchange(&in->raised, 1) == 0)
        poke(in);
    errno = saved;
}

bool crd_interrupt_raised(const crd_interrupt *in)
{
    return in != NULL && atomic_load(&((crd_interrupt *)in)->raised) != 0;
}

void crd_interrupt_clear(crd_interrupt *in)
{
    if (in != NULL)
        atomic_store(&in->raised, 0);
}

crd_interrupt *crd_interrupt_bind(crd_interrupt *in)
{
    crd_interrupt *was = bound;
    bound = in;
    return was;
}

crd_interrupt *crd__intr_current(void) { return bound; }

bool crd__intr_raised(const crd_interrupt *in) { return crd_interrupt_raised(in); }

void crd__intr_enter(crd_interrupt *in, crd__intr_wait *w, void (*wake)(void *arg), void *arg)
{
    w->wake = wake;
    w->arg = arg;
    w->prev = w->next = NULL;
    if (in == NULL)
        return;
    pthread_mutex_lock(&in->mu);
    CRD__DLIST_PUSH(in->waits, w);
    pthread_mutex_unlock(&in->mu);
}

void crd__intr_leave(crd_interrupt *in, crd__intr_wait *w)
{
    if (in == NULL)
        return;
    pthread_mutex_lock(&in->mu);
    CRD__DLIST_UNLINK(in->waits, w);
    pthread_mutex_unlock(&in->mu);
}
