/*
 * clock.c -- time. Everything internal runs on CLOCK_MONOTONIC in milliseconds, held in
 * int64_t; the wall clock is read only for the fair lock's queue deadlines, which the
 * wire protocol defines in epoch milliseconds.
 */
#include "base.h"

#include <time.h>

int64_t crd__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t crd__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t crd__epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec crd__abstime(int64_t deadline_ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(deadline_ms / 1000);
    ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
    return ts;
}

int crd__cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc != 0)
        return rc;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

int crd__mutex_make(crd_client *c, int rank, pthread_mutex_t *mu, pthread_cond_t *cv)
{
    int rc = pthread_mutex_init(mu, NULL);
    if (rc == 0 && cv != NULL && (rc = crd__cond_init(cv)) != 0)
        pthread_mutex_destroy(mu);
    if (rc == 0)
        c->fork_mu[rank] = mu;
    return rc;
}

void crd__mutex_drop(crd_client *c, int rank, pthread_mutex_t *mu, pthread_cond_t *cv)
{
    if (c->fork_mu[rank] == mu)
        c->fork_mu[rank] = NULL;
    if (cv != NULL)
        pthread_cond_destroy(cv);
    pthread_mutex_destroy(mu);
}
