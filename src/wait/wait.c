/*
 * wait.c -- the rules every waiter shares (wait.h): the deadline of a wait and the slice
 * a waiter sleeps before its next attempt. Used by the lock's acquire machine (acquire.c)
 * and the synchronizers' (sync.c), for both drivers (a blocking call, the event loop).
 *
 * Pure functions; any thread.
 */
#include "wait.h"

void crd__spin_backoff_exponential(crd__spin_backoff *b, int64_t initial_ms, int64_t max_ms,
                                   int multiplier)
{
    b->next_ms = initial_ms;
    b->max_ms = max_ms;
    b->multiplier = multiplier;
    b->fails = 0;
}

void crd__spin_backoff_constant(crd__spin_backoff *b, int64_t delay_ms)
{
    b->next_ms = delay_ms;
    b->max_ms = delay_ms;
    b->multiplier = 0;
    b->fails = 0;
}

int64_t crd__spin_backoff_next(crd__spin_backoff *b, uint32_t random)
{
    if (b->multiplier == 0 || b->next_ms >= b->max_ms)
        return b->max_ms;
    int64_t sleep = b->next_ms;
    b->fails++;
    int64_t next = sleep * b->multiplier + (int64_t)(random % (uint32_t)b->fails);
    b->next_ms = next < b->max_ms ? next : b->max_ms;
    return sleep;
}

void crd__backoff_init(crd__backoff *b)
{
    b->io_ms = 25;
    b->fair_ms = 4;
    crd__spin_backoff_exponential(&b->spin, CRD__SPIN_INITIAL_MS, CRD__SPIN_MAX_MS,
                                  CRD__SPIN_MULTIPLIER);
}

static int64_t doubled(int64_t v, int64_t cap) { return v * 2 < cap ? v * 2 : cap; }

int64_t crd__wait_slice(const crd__slice_in *in, crd__backoff *b)
{
    /* Where a holder's TTL ends, as the next attempt must see it: the key expires once the
     * server's clock has passed its expire time, and both clocks are read in whole ms (the
     * TTL the script returned, our now), so an attempt hint + 1 ms after the reply can
     * still land in the key's last millisecond (the script then answers a TTL of 0 and the
     * attempt is spent: seen in the 4.7 replay's lease hand-off under load). One ms more
     * puts it past the end. */
    int64_t ttl_end = in->hint_ms + 1;
    int64_t slice;
    if (in->failed) {
        /* Redis failed (restart, cut): retry soon, backing off to the poll interval. */
        slice = b->io_ms;
        b->io_ms = doubled(b->io_ms, in->poll_ms);
    } else if (in->busy == CRD__BUSY_NO_TTL) {
        slice = in->poll_ms; /* nothing expires: a release publishes, or we poll */
    } else if (in->busy == CRD__BUSY_TURN) {
        /* Fair: free, but the head's turn. Back off from 4 ms while it takes it. */
        slice = b->fair_ms;
        b->fair_ms = doubled(b->fair_ms, in->poll_ms);
    } else if (in->busy == CRD__BUSY_MESSAGE) {
        slice = INT64_MAX; /* a message ends it, or the deadline */
    } else {
        /* A TTL: a release publishes, an expiry does not. */
        slice = ttl_end;
        b->fair_ms = 4;
    }
    if (!in->failed)
        b->io_ms = 25;
    if (!in->failed && in->how == CRD__WAIT_BACKOFF) {
        /* No message ever comes (a spin holder's release publishes nothing): the next
         * attempt is the back-off's, or the holder's TTL's end when that is sooner. */
        int64_t step = crd__spin_backoff_next(&b->spin, in->random);
        slice = in->busy == CRD__BUSY_TTL && ttl_end < step ? ttl_end : step;
    }
    bool channel = in->how == CRD__WAIT_CHANNEL || in->how == CRD__WAIT_OWN_CHANNEL;
    if (channel && !in->confirmed && slice > in->poll_ms)
        slice = in->poll_ms; /* no live subscription: a release could go unheard */
    if (slice < 1)
        slice = 1;
    if (in->max_slice_ms > 0 && slice > in->max_slice_ms)
        slice = in->max_slice_ms;
    return slice;
}

int64_t crd__wait_until(int64_t now, int64_t slice, int64_t deadline)
{
    if (slice >= deadline - now - 1)
        return deadline;
    return now + slice + 1;
}

int64_t crd__wait_deadline(int64_t start, int64_t wait_ms)
{
    return wait_ms < 0 ? INT64_MAX : start + wait_ms + 1;
}

bool crd__wait_futile(const crd__slice_in *in, int64_t slice, int64_t now, int64_t deadline)
{
    return in->how == CRD__WAIT_DELAY && !in->failed && deadline != INT64_MAX &&
           slice > deadline - now;
}
