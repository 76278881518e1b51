/*
 * syncs.h -- helpers of the synchronizer suites (test_semaphore.c, test_latch.c).
 *
 * What it provides
 *   - CRDT_OK(client, expr): asserts expr is CRD_OK, showing the expression, the status
 *     and the client's detail string.
 *   - crdt_sem_of, crdt_pes_of (permit-expirable), crdt_latch_of: a handle on name,
 *     asserted to be made.
 *   - crdt_sync_fixture: two clients, a raw connection, a name and a handle of one kind
 *     on it for each client, with the kind's pub/sub channel (crdt_sync_channel).
 *   - crdt_permit_score: a permit id's deadline in a permit semaphore's timeout zset.
 *   - crdt_lost_permit: a permit acquire whose reply the fault proxy drops after Redis
 *     ran it, and the checks that it was read back, not resent.
 *   - crdt_client_via_proxy: a fault proxy in front of the test server and a client
 *     through it with a 1 s command timeout (the lost-reply tests), plain TCP even in a
 *     CRDT_TLS=1 run (the proxy reads the commands).
 *   - crdt_sync_waiter: one thread blocked in one synchronizer call (a semaphore's or a
 *     permit semaphore's acquire, or a latch's await), recording what it got and when
 *     it returned; its done gate opens when the call returns.
 *
 * The start and join assert with Criterion, so they run in a test; the thread itself
 * asserts nothing.
 */
#ifndef CRDT_SYNCS_H
#define CRDT_SYNCS_H

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdint.h>

#include "faultproxy.h"
#include "harness.h"
#include "waiters.h"

#define CRDT_OK(c, expr)                                                                     \
    do {                                                                                     \
        crd_status st_ = (expr);                                                             \
        cr_assert_eq(st_, CRD_OK, "%s: %s: %s", #expr, crd_strerror(st_),                   \
                     crd_client_errmsg(c));                                                  \
    } while (0)

crd_semaphore *crdt_sem_of(crd_client *c, const char *name);
crd_permit_semaphore *crdt_pes_of(crd_client *c, const char *name);
crd_latch *crdt_latch_of(crd_client *c, const char *name);

typedef enum crdt_sync_kind {
    CRDT_SYNC_SEMAPHORE,
    CRDT_SYNC_PERMIT_SEMAPHORE,
    CRDT_SYNC_LATCH,
} crdt_sync_kind;

/* The channel a synchronizer of kind named name publishes on: "redisson_sc:{name}" for
 * both semaphores, "redisson_countdownlatch__channel__{name}" for a latch. */
void crdt_sync_channel(crdt_sync_kind kind, const char *name, char *buf, size_t cap);

/* Clients a and b, a raw connection r, name = crdt_key(suffix) (valid after the close),
 * its channel, and one handle of the fixture's kind for each client: sa/sb, pa/pb or
 * la/lb (the other pairs stay NULL). A proxied fixture has client a only, made through
 * the fault proxy p (NULL otherwise); so has a one-client fixture (b NULL). timeouts is
 * a permit semaphore's "{name}:timeout" zset (filled for every kind). */
typedef struct crdt_sync_fixture {
    crdt_proxy *p;
    crd_client *a, *b;
    redisContext *r;
    const char *name;
    char channel[400];
    crd_semaphore *sa, *sb;
    crd_permit_semaphore *pa, *pb;
    crd_latch *la, *lb;
    char timeouts[400];
} crdt_sync_fixture;

/* Opens the fixture (asserts). */
void crdt_sync_open(crdt_sync_fixture *f, crdt_sync_kind kind, const char *suffix);
/* The same with `clients` clients (1: a only, 2: a and b), a made from oa (NULL:
 * crdt_options(), e.g. crdt_traced_options()'s to trace it), b from crdt_options(). */
void crdt_sync_open_opts(crdt_sync_fixture *f, crdt_sync_kind kind, const char *suffix,
                         int clients, const crd_options *oa);
/* One client a through a fault proxy (crdt_client_via_proxy: plain TCP, 1 s command
 * timeout), its handle, r, name and channel: the lost-reply tests. */
void crdt_sync_open_proxied(crdt_sync_fixture *f, crdt_sync_kind kind, const char *suffix);
/* Frees the handles, then the clients, then the raw connection; stops the proxy. */
void crdt_sync_close(crdt_sync_fixture *f);
/* For a fixture whose a, b (or only a) and name the caller set (a cluster's clients,
 * a name on a chosen slot): fills channel and makes the handles of kind (asserts); and
 * the handles' half of the close, which frees them and leaves the rest. */
void crdt_sync_handles(crdt_sync_fixture *f, crdt_sync_kind kind);
void crdt_sync_handles_free(crdt_sync_fixture *f);

/* Starts *p (asserted) in front of the test server and returns a client through it:
 * crdt_options() with the proxy's port and command_timeout_ms 1000. Stop *p after
 * freeing the client. */
crd_client *crdt_client_via_proxy(crdt_proxy **p);

/* The score of permit id (32 hex digits) in zset, the permit semaphore's
 * "{name}:timeout" (asserts a reply); -1 when it is not there. */
long long crdt_permit_score(redisContext *r, const char *zset, const char *id);

/* A proxied permit-semaphore fixture f (f.pa named f.name = crdt_key(suffix)) with 3
 * permits, one taken so that the acquire script is cached; zset its timeout set. Then
 * rule is armed: Redis runs the next command naming it and the reply is lost with the
 * connection (CRDT_PROXY_EXECUTE_THEN_CLOSE). */
typedef struct crdt_lost_permit {
    crdt_sync_fixture f;
    char zset[400];
    int rule;
} crdt_lost_permit;

void crdt_lost_permit_open(crdt_lost_permit *x, const char *suffix);
/* The acquire made under the rule returned st and id: asserts the rule fired, st is
 * CRD_OK, one permit was taken once (count 1, two ids in zset) and id is one of them:
 * the acquire was read back, not sent again. */
void crdt_lost_permit_check(crdt_lost_permit *x, crd_status st, const char *id);

typedef struct crdt_sync_waiter {
    /* Set by the test before crdt_sync_waiter_start; exactly one handle. The call is
     * crd_semaphore_acquire(s, permits, wait_ms), crd_permit_semaphore_acquire_n(ps,
     * permits, wait_ms, lease_ms, ids) or crd_latch_await(l, wait_ms). */
    crd_semaphore *s;
    crd_permit_semaphore *ps;
    crd_latch *l;
    int64_t permits, wait_ms, lease_ms;
    /* Filled by the thread; read them once done is 1. */
    crd_status st;
    int64_t t_start, t_end; /* crdt_now_ms() before the call and after it returned */
    char ids[4][CRD_PERMIT_ID_SIZE]; /* the permit semaphore's ids (permits <= 4) */
    crdt_gate done;
    pthread_t th;
} crdt_sync_waiter;

/* Starts the thread (asserted). */
void crdt_sync_waiter_start(crdt_sync_waiter *w);
/* Asserts the call returns within timeout_ms ("<what>"), joins the thread and destroys
 * its gate. */
void crdt_sync_waiter_join(crdt_sync_waiter *w, int64_t timeout_ms, const char *what);

/* Joins w (deadline 30 s) and asserts its call returned CRD_OK less than within_ms after
 * since_ms (crdt_now_ms() just before the release, count-down or delete that should
 * wake it): woken by the message, not by its own deadline. what names it in messages. */
void crdt_sync_waiter_woken(crdt_sync_waiter *w, int64_t since_ms, int64_t within_ms,
                            const char *what);

#endif /* CRDT_SYNCS_H */
