/*
 * metrics.c -- the client's counters, its wait and hold histograms, and log messages.
 *
 * Counters are relaxed atomics bumped on the paths that already run (no lock, no extra
 * Redis traffic); crd_client_metrics() reads them into a snapshot. Histograms use
 * power-of-two millisecond buckets: cheap to update from any thread, precise enough for
 * p50/p99 within a factor of two, with the exact maximum kept beside them.
 */
#include "internal.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

void crd__hist_add(crd__hist *h, int64_t ms)
{
    if (ms < 0)
        ms = 0;
    int b = 0;
    while (b < CRD__HIST_BUCKETS - 1 && ms >= ((int64_t)1 << b))
        b++;
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
    int_fast64_t cur = atomic_load_explicit(&h->max, memory_order_relaxed);
    while (ms > cur && !atomic_compare_exchange_weak(&h->max, &cur, ms)) {
    }
}

/* Upper bound of the bucket holding the q-quantile (q in percent), 0 when empty. */
static int64_t quantile(crd__hist *h, int q)
{
    uint64_t counts[CRD__HIST_BUCKETS], total = 0;
    for (int i = 0; i < CRD__HIST_BUCKETS; i++) {
        counts[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        total += counts[i];
    }
    if (total == 0)
        return 0;
    uint64_t rank = (total * (uint64_t)q + 99) / 100, seen = 0;
    int64_t max = atomic_load_explicit(&h->max, memory_order_relaxed);
    for (int i = 0; i < CRD__HIST_BUCKETS; i++) {
        seen += counts[i];
        if (seen >= rank) {
            int64_t upper = i == 0 ? 0 : ((int64_t)1 << i) - 1;
            return upper < max ? upper : max;
        }
    }
    return max;
}

crd_status crd_client_metrics(crd_client *c, crd_metrics *out, size_t size)
{
    if (c == NULL || out == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "client or out is NULL");
    /* The first version of the struct ended with hold_ms_max. */
    const size_t v1 = offsetof(crd_metrics, hold_ms_max) + sizeof out->hold_ms_max;
    if (size < v1)
        return crd__fail(c, CRD_INVALID_ARGUMENT,
                         "size %zu is smaller than the first crd_metrics (%zu)", size, v1);
    crd_metrics m;
    memset(&m, 0, sizeof m);
    crd__metrics *k = &c->metrics;
#define LOAD(f) m.f = atomic_load_explicit(&k->f, memory_order_relaxed)
    LOAD(acquisitions);
    LOAD(contended);
    LOAD(acquire_busy);
    LOAD(releases);
    LOAD(renewals);
    LOAD(renewal_failures);
    LOAD(locks_lost);
    LOAD(connects);
    LOAD(connection_failures);
    LOAD(subscribes);
    LOAD(watchdog_round_trips);
    LOAD(runs_skipped);
    LOAD(runs_degraded);
    LOAD(local_queued);
    LOAD(deferred);
#undef LOAD
    if (c->holds != NULL) {
        pthread_mutex_lock(&c->holds->mu);
        m.holds_now = c->holds->count;
        pthread_mutex_unlock(&c->holds->mu);
    }
    m.wait_ms_p50 = quantile(&k->wait, 50);
    m.wait_ms_p99 = quantile(&k->wait, 99);
    m.wait_ms_max = atomic_load_explicit(&k->wait.max, memory_order_relaxed);
    m.hold_ms_p50 = quantile(&k->hold, 50);
    m.hold_ms_p99 = quantile(&k->hold, 99);
    m.hold_ms_max = atomic_load_explicit(&k->hold.max, memory_order_relaxed);
    memcpy(out, &m, size < sizeof m ? size : sizeof m);
    crd__ok(c);
    return CRD_OK;
}

void crd__log(crd_client *c, crd_log_level level, const char *fmt, ...)
{
    if (c->opts.on_log == NULL)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->opts.on_log(c->opts.log_user_data, level, msg);
}
