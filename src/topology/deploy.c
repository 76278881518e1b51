/*
 * deploy.c -- what the deployment in front of the client allows, learned as the client
 * meets it (README "Running on managed Redis"): Redis as users run it is often not the
 * server the URL seems to name.
 *
 *   - The eviction policy. INFO memory once at start; a maxmemory-policy that can evict
 *     lock keys (allkeys-*, volatile-*: volatile-* picks among keys with a TTL, and every
 *     held lock has one) is said once per client (a CRD_LOG_WARN line and
 *     crd_metrics.eviction_warnings). An evicted lock is free for anyone while its holder
 *     still believes it holds it, until the holder's next renewal finds it gone.
 *   - WAIT. With replica sync on, WAIT 0 0 once at start (Redisson sends the same before
 *     its first synced script), and any WAIT refused inside a pipeline. A server that
 *     refuses WAIT (rename-command, an ACL without +wait, a managed service) cannot give
 *     the guarantee replica sync asks for: an acquire with replicas to wait for is refused
 *     before anything is sent (CRD_SYNC_UNAVAILABLE), or sent without WAIT when the user
 *     chose CRD_REPLICA_SYNC_IF_ALLOWED; releases and renewals always go without it (a
 *     hold must stay releasable and renewable). While it is refused the answer is asked
 *     again (WAIT 0 0 on the peer) every 10 s.
 *   - Slot checking. A server reached with redis:// that answers CROSSSLOT (a proxy in
 *     front of a sharded database, a cluster node owning every slot) refuses a script
 *     whose keys span slots. The watchdog's standalone batches mix names of any slot; once
 *     a CROSSSLOT answer is seen they are batched one slot per call (watchdog.c asks
 *     crd__deploy_slot_checked). Every other script names the keys of one lock, which
 *     share its name's slot by construction.
 *
 * Threads: any (callers, the watchdog); the start-up probe runs on crd_client_new's
 * thread. No mutex: the state is a few atomics, and the one text (the server's words of
 * the first refusal) is written once before a flag publishes it, so a fork in the middle
 * leaves nothing locked.
 */
#include "topology.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECHECK_MS 10000 /* how often a refused WAIT is asked about again */

struct crd__deploy {
    atomic_bool wait_refused;
    atomic_int_fast64_t wait_checked_at; /* monotonic ms of the last answer about WAIT */
    atomic_int why_state;                /* 0 none, 1 being written, 2 wait_why is set */
    char wait_why[160];                  /* the server's words when it first refused */
    atomic_bool warned_sync;             /* the one WARN line about a refused WAIT */
    atomic_bool slot_checked;            /* CROSSSLOT seen: the server checks slots */
};

crd_status crd__deploy_init(crd_client *c)
{
    crd__deploy *d = calloc(1, sizeof *d);
    if (d == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the client");
    atomic_init(&d->wait_refused, false);
    atomic_init(&d->wait_checked_at, 0);
    atomic_init(&d->why_state, 0);
    atomic_init(&d->warned_sync, false);
    atomic_init(&d->slot_checked, false);
    c->deploy = d;
    return CRD_OK;
}

void crd__deploy_free(crd_client *c)
{
    free(c->deploy);
    c->deploy = NULL;
}

/* ---- the eviction policy ------------------------------------------------------------- */

/* The value of "name:" in an INFO text (up to the line's end) into buf; false if absent. */
static bool info_field(const char *text, size_t len, const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    for (size_t i = 0; i + n + 1 <= len; i++) {
        if ((i == 0 || text[i - 1] == '\n') && memcmp(text + i, name, n) == 0 &&
            text[i + n] == ':') {
            size_t j = i + n + 1, k = 0;
            while (j < len && text[j] != '\r' && text[j] != '\n' && k + 1 < cap)
                buf[k++] = text[j++];
            buf[k] = '\0';
            return true;
        }
    }
    return false;
}

bool crd__deploy_policy_evicts(const char *policy)
{
    return strncmp(policy, "allkeys-", 8) == 0 || strncmp(policy, "volatile-", 9) == 0;
}

/* INFO memory: warns once when the policy can evict lock keys. A refusal (an ACL without
 * INFO, a managed service) says nothing: the check is advice, never a failure. */
static void check_eviction(crd_client *c)
{
    static const char *const argv[2] = {"INFO", "memory"};
    static const size_t lens[2] = {4, 6};
    redisReply *r = NULL;
    crd_status st = CRD_IO;
    crd__pool *p = crd__pool_for(c, "", 0);
    if (p != NULL)
        st = crd__engine_call_argv(c, p, 2, argv, lens, crd__now_ms() + c->opts.command_timeout_ms,
                                   &r);
    char policy[64] = "", maxmem[32] = "";
    if (st == CRD_OK && r != NULL && r->type == REDIS_REPLY_STRING) {
        info_field(r->str, r->len, "maxmemory_policy", policy, sizeof policy);
        info_field(r->str, r->len, "maxmemory", maxmem, sizeof maxmem);
    }
    if (r != NULL)
        freeReplyObject(r);
    crd__ok(c);
    if (!crd__deploy_policy_evicts(policy))
        return;
    CRD__COUNT(c, eviction_warnings);
    bool limited = maxmem[0] != '\0' && strcmp(maxmem, "0") != 0;
    crd__log(c, CRD_LOG_WARN, "the server's maxmemory-policy is %s: when memory runs short "
             "it evicts keys%s, and an evicted lock is free for anyone while its holder still "
             "believes it holds it; set maxmemory-policy noeviction (writes are then refused "
             "with OOM instead)%s", policy,
             strncmp(policy, "volatile-", 9) == 0 ? " with a TTL, which every held lock has"
                                                  : ", lock keys included",
             limited ? "" : " (maxmemory is 0 now, so nothing is evicted yet)");
}

/* ---- WAIT ----------------------------------------------------------------------------- */

/* Records a refusal of WAIT with the server's words (the first ones are kept). */
static void note_refused(crd_client *c, const redisReply *r)
{
    crd__deploy *d = c->deploy;
    int none = 0;
    if (atomic_compare_exchange_strong(&d->why_state, &none, 1)) {
        const char *text = "";
        size_t n = 0;
        if (r != NULL && r->type == REDIS_REPLY_ERROR)
            n = crd__reply_error_text(r, &text);
        snprintf(d->wait_why, sizeof d->wait_why, "%.*s", (int)(n > 120 ? 120 : n), text);
        atomic_store(&d->why_state, 2);
    }
    atomic_store(&d->wait_refused, true);
    atomic_store(&d->wait_checked_at, crd__now_ms());
}

static const char *why_text(crd__deploy *d)
{
    return atomic_load(&d->why_state) == 2 ? d->wait_why : "refused";
}

/* Whether a WAIT reply w says the server refuses WAIT itself: an ACL without it, or a
 * server that does not know it (renamed away, a managed service that disabled it). Not
 * the errors of a server that has WAIT but cannot run it now: "WAIT cannot be used with
 * replica instances" comes from a primary just demoted by a failover, whose successor
 * answers WAIT again. */
static bool is_refusal(const redisReply *w)
{
    if (w == NULL || w->type != REDIS_REPLY_ERROR)
        return false;
    return strncmp(w->str, "NOPERM", 6) == 0 || strstr(w->str, "unknown command") != NULL ||
           strstr(w->str, "not allowed") != NULL || strstr(w->str, "disabled") != NULL;
}

void crd__deploy_wait_answer(crd_client *c, const redisReply *w)
{
    if (c->deploy == NULL || w == NULL)
        return;
    if (is_refusal(w))
        note_refused(c, w);
}

/* WAIT 0 0 on peer p (NULL: the peer of slot 0's keys, any primary): a server that has
 * it answers at once. Returns 1 allowed, 0 refused, -1 no answer. */
static int probe_wait(crd_client *c, crd__pool *p, int64_t deadline)
{
    static const char *const argv[3] = {"WAIT", "0", "0"};
    static const size_t lens[3] = {4, 1, 1};
    if (p == NULL && (p = crd__pool_for(c, "", 0)) == NULL) {
        crd__ok(c);
        return -1;
    }
    redisReply *r;
    crd_status st = crd__engine_call_argv(c, p, 3, argv, lens, deadline, &r);
    crd__ok(c);
    if (st != CRD_OK)
        return -1;
    bool refused = is_refusal(r);
    if (refused)
        note_refused(c, r);
    freeReplyObject(r);
    if (refused)
        return 0;
    atomic_store(&c->deploy->wait_refused, false);
    atomic_store(&c->deploy->wait_checked_at, crd__now_ms());
    return 1;
}

bool crd__deploy_wait_refused(crd_client *c)
{
    return c->deploy != NULL && atomic_load(&c->deploy->wait_refused);
}

crd__sync_mode crd__deploy_sync_mode(crd_client *c, crd__pool *p, bool acquire,
                                     int64_t deadline, const char *what)
{
    crd__deploy *d = c->deploy;
    if (d == NULL || !atomic_load(&d->wait_refused))
        return CRD__SYNC_WAIT;
    /* Refused a while ago: the answer may have changed (an ACL edited, a failover to a
     * primary configured otherwise). Asked again of this peer, at most every 10 s. */
    int64_t now = crd__now_ms();
    int64_t at = atomic_load(&d->wait_checked_at);
    if (now - at >= RECHECK_MS && p != NULL &&
        atomic_compare_exchange_strong(&d->wait_checked_at, &at, now) &&
        probe_wait(c, p, deadline) == 1)
        return CRD__SYNC_WAIT;
    CRD__COUNT(c, sync_refusals);
    bool fallback = c->opts.replica_sync == CRD_REPLICA_SYNC_IF_ALLOWED;
    if (!atomic_exchange(&d->warned_sync, true))
        crd__log(c, CRD_LOG_WARN, "replica sync: the server refuses WAIT (%s): %s; releases "
                 "and renewals go without WAIT (set replica_sync to CRD_REPLICA_SYNC_OFF "
                 "where WAIT is not allowed)", why_text(d),
                 fallback ? "CRD_REPLICA_SYNC_IF_ALLOWED: acquires go without it too, with "
                            "only asynchronous replication behind them"
                          : "acquires that need a replica's acknowledgement are refused "
                            "(CRD_SYNC_UNAVAILABLE) before anything is sent");
    if (!acquire || fallback)
        return CRD__SYNC_WITHOUT;
    crd__fail(c, CRD_SYNC_UNAVAILABLE, "%s: replica sync is on and the primary has replicas, "
              "but the server refuses WAIT (%s): no replica could acknowledge it, so it was "
              "not sent and nothing is held; set replica_sync to CRD_REPLICA_SYNC_OFF, or "
              "CRD_REPLICA_SYNC_IF_ALLOWED to go without WAIT where it is refused",
              what, why_text(d));
    return CRD__SYNC_REFUSE;
}

/* ---- slot checking ------------------------------------------------------------------------ */

bool crd__deploy_slot_checked(crd_client *c)
{
    return c->deploy != NULL && atomic_load(&c->deploy->slot_checked);
}

bool crd__deploy_crossslot(crd_client *c, const redisReply *r)
{
    if (r == NULL || r->type != REDIS_REPLY_ERROR || r->len < 9 ||
        memcmp(r->str, "CROSSSLOT", 9) != 0 || (r->len > 9 && r->str[9] != ' '))
        return false;
    if (c->deploy != NULL && !atomic_exchange(&c->deploy->slot_checked, true))
        crd__log(c, CRD_LOG_INFO, "the server checks key slots (it answered CROSSSLOT: a "
                 "proxy in front of a sharded database, or a cluster node reached with "
                 "redis://): renewals are batched one slot per script call from now on");
    return true;
}

/* ---- the start-up probe -------------------------------------------------------------------- */

void crd__deploy_probe(crd_client *c, bool sync)
{
    check_eviction(c);
    if (sync)
        probe_wait(c, NULL, crd__now_ms() + c->opts.command_timeout_ms);
}
