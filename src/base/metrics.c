/*
 * metrics.c -- the client's counters, its wait and hold histograms, and log messages.
 *
 * Counters are relaxed atomics bumped on the paths that already run (no lock, no extra
 * Redis traffic); crd_client_metrics() reads them into a snapshot. Histograms use
 * power-of-two millisecond buckets: cheap to update from any thread, precise enough for
 * p50/p99 within a factor of two, with the exact maximum kept beside them, and their sum.
 * crd_client_metrics_openmetrics() writes the same counters and histograms in the
 * Prometheus text exposition format.
 */
#include "base.h"

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
    atomic_fetch_add_explicit(&h->sum_ms, (uint_fast64_t)ms, memory_order_relaxed);
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
    LOAD(late_holds_released);
    LOAD(outcomes_unknown);
    LOAD(permits_acquired);
    LOAD(permits_released);
    LOAD(permit_acquires_contended);
    LOAD(permit_acquire_busy);
    LOAD(latch_count_downs);
    LOAD(latch_awaits_woken);
    LOAD(latch_await_timeouts);
    LOAD(eviction_warnings);
    LOAD(sync_refusals);
    LOAD(crossslot_rebatches);
#undef LOAD
    int64_t holds = atomic_load_explicit(&k->holds, memory_order_relaxed);
    m.holds_now = holds > 0 ? (uint64_t)holds : 0;
    int64_t waiting = atomic_load_explicit(&k->waiting, memory_order_relaxed);
    m.waiting_now = waiting > 0 ? (uint64_t)waiting : 0;
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

/* ---- the Prometheus text exposition format ------------------------------------------ */

/* An snprintf-style writer: text goes into buf while it fits (always NUL-terminated when
 * size > 0), len counts every byte the whole text needs. */
typedef struct prom_out {
    char *buf;
    size_t size, len;
} prom_out;

static void put(prom_out *o, const char *fmt, ...) CRD__PRINTF(2, 3);
static void put(prom_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = o->len < o->size ? vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap)
                             : vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

/* Milliseconds as seconds with three decimals, in integer arithmetic: printf's %f would
 * follow the process's LC_NUMERIC and could write a decimal comma. */
#define SECS_FMT "%llu.%03llu"
#define SECS(ms) (unsigned long long)((ms) / 1000), (unsigned long long)((ms) % 1000)

static void put_family(prom_out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP credisson_%s %s\n# TYPE credisson_%s %s\n", name, help, name, type);
}

/* Buckets le = 2^i ms for i < CRD__PROM_BUCKETS (0.001 s up to 4194.304 s, about 70
 * minutes), then +Inf: a fixed set, as Prometheus wants for rate() and
 * histogram_quantile() across scrapes. The histogram's bucket i holds values < 2^i ms,
 * whole milliseconds, so every value counted up to bucket i is <= 2^i ms. */
#define CRD__PROM_BUCKETS 23

static void put_hist(prom_out *o, const char *name, const char *help, crd__hist *h)
{
    uint64_t counts[CRD__HIST_BUCKETS];
    for (int i = 0; i < CRD__HIST_BUCKETS; i++)
        counts[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
    uint64_t sum_ms = atomic_load_explicit(&h->sum_ms, memory_order_relaxed);
    put_family(o, name, "histogram", help);
    /* Cumulative counts from the one set of loads above: _count equals the +Inf bucket
     * and the buckets never decrease, even while other threads add values. */
    uint64_t cum = 0;
    for (int i = 0; i < CRD__HIST_BUCKETS; i++) {
        cum += counts[i];
        if (i < CRD__PROM_BUCKETS) {
            uint64_t le_ms = (uint64_t)1 << i;
            put(o, "credisson_%s_bucket{le=\"" SECS_FMT "\"} %llu\n", name, SECS(le_ms),
                (unsigned long long)cum);
        }
    }
    put(o, "credisson_%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    put(o, "credisson_%s_sum " SECS_FMT "\n", name, SECS(sum_ms));
    put(o, "credisson_%s_count %llu\n", name, (unsigned long long)cum);
}

size_t crd_client_metrics_openmetrics(crd_client *c, char *buf, size_t size)
{
    if (c == NULL) {
        crd__fail(c, CRD_INVALID_ARGUMENT, "client is NULL");
        return 0;
    }
    if (buf == NULL && size > 0) {
        crd__fail(c, CRD_INVALID_ARGUMENT, "buf is NULL and size is %zu", size);
        return 0;
    }
    crd_metrics m;
    if (crd_client_metrics(c, &m, sizeof m) != CRD_OK)
        return 0;
    prom_out o = {buf, size, 0};
    if (size > 0)
        buf[0] = '\0';
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
#define C(field, name, help) {name, help, offsetof(crd_metrics, field)}
        C(acquisitions, "acquisitions_total", "Acquires that succeeded (re-entries included)."),
        C(contended, "acquisitions_contended_total", "Successful acquires that had to wait."),
        C(acquire_busy, "acquire_busy_total", "Acquires that returned CRD_BUSY or CRD_TIMEOUT."),
        C(releases, "releases_total", "Releases that returned CRD_OK."),
        C(renewals, "renewals_total", "Holds renewed by the watchdog (one per hold per period)."),
        C(renewal_failures, "renewal_failures_total",
          "Hold renewals that got no definite answer."),
        C(locks_lost, "locks_lost_total", "Holds reported lost (event or release status)."),
        C(connects, "connects_total", "Connections opened (pool, subscriber, watchdog)."),
        C(connection_failures, "connection_failures_total",
          "Connection attempts that failed, and broken connections."),
        C(subscribes, "subscribes_total", "SUBSCRIBE commands confirmed."),
        C(watchdog_round_trips, "watchdog_round_trips_total",
          "Renewal pipelines sent by the watchdog."),
        C(runs_skipped, "runs_skipped_total", "crd_lock_run_policy calls that skipped the work."),
        C(runs_degraded, "runs_degraded_total",
          "crd_lock_run_policy calls that ran the work without the lock."),
        C(local_queued, "local_queued_total", "Acquires that queued behind local waiters."),
        C(deferred, "deferred_total",
          "Acquire attempts deferred after this client's own release."),
        C(late_holds_released, "late_holds_released_total",
          "Acquires that took the lock after their caller was told they failed: given back."),
        C(outcomes_unknown, "outcomes_unknown_total",
          "Such acquires whose connection died first: read back (and given back if they ran)."),
        C(permits_acquired, "permits_acquired_total",
          "Semaphore permits taken by acquires that succeeded."),
        C(permits_released, "permits_released_total",
          "Semaphore permits given back by releases."),
        C(permit_acquires_contended, "permit_acquires_contended_total",
          "Successful semaphore acquires that had to wait."),
        C(permit_acquire_busy, "permit_acquire_busy_total",
          "Semaphore acquires that returned CRD_BUSY or CRD_TIMEOUT."),
        C(latch_count_downs, "latch_count_downs_total", "Latch count-downs that succeeded."),
        C(latch_awaits_woken, "latch_awaits_woken_total",
          "Latch awaits that waited and saw the count reach zero (or the latch deleted)."),
        C(latch_await_timeouts, "latch_await_timeouts_total",
          "Latch awaits that returned CRD_BUSY or CRD_TIMEOUT."),
        C(eviction_warnings, "eviction_warnings_total",
          "1 when the server's maxmemory-policy, read at start, can evict lock keys."),
        C(sync_refusals, "sync_refusals_total",
          "Operations that asked for replica sync on a server refusing WAIT."),
        C(crossslot_rebatches, "crossslot_rebatches_total",
          "Renewal rounds sent again one slot per call after a CROSSSLOT answer."),
#undef C
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&m + counters[i].off, sizeof v);
        put_family(&o, counters[i].name, "counter", counters[i].help);
        put(&o, "credisson_%s %llu\n", counters[i].name, (unsigned long long)v);
    }
    put_family(&o, "holds", "gauge", "Holds this client records right now.");
    put(&o, "credisson_holds %llu\n", (unsigned long long)m.holds_now);
    put_family(&o, "waiting", "gauge",
               "Threads asleep right now in a blocking acquire or latch await.");
    put(&o, "credisson_waiting %llu\n", (unsigned long long)m.waiting_now);
    put_hist(&o, "acquire_wait_seconds",
             "Wait of the acquires that had to wait, until they got the lock.", &c->metrics.wait);
    put_hist(&o, "lock_hold_seconds",
             "Holds from the first acquire to the final release that gave them back.",
             &c->metrics.hold);
    crd__ok(c);
    return o.len;
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
