/*
 * syncs.c -- the handle makers and the waiter thread of syncs.h.
 */
#include "syncs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

crd_semaphore *crdt_sem_of(crd_client *c, const char *name)
{
    crd_semaphore *s = NULL;
    CRDT_OK(c, crd_semaphore_new(c, name, &s));
    return s;
}

crd_permit_semaphore *crdt_pes_of(crd_client *c, const char *name)
{
    crd_permit_semaphore *ps = NULL;
    CRDT_OK(c, crd_permit_semaphore_new(c, name, &ps));
    return ps;
}

crd_latch *crdt_latch_of(crd_client *c, const char *name)
{
    crd_latch *l = NULL;
    CRDT_OK(c, crd_latch_new(c, name, &l));
    return l;
}

void crdt_sync_channel(crdt_sync_kind kind, const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap,
             kind == CRDT_SYNC_LATCH ? "redisson_countdownlatch__channel__{%s}"
                                     : "redisson_sc:{%s}",
             name);
}

void crdt_sync_open(crdt_sync_fixture *f, crdt_sync_kind kind, const char *suffix)
{
    crdt_sync_open_opts(f, kind, suffix, 2, NULL);
}

void crdt_sync_open_opts(crdt_sync_fixture *f, crdt_sync_kind kind, const char *suffix,
                         int clients, const crd_options *oa)
{
    cr_assert(clients == 1 || clients == 2, "a synchronizer fixture has 1 or 2 clients");
    memset(f, 0, sizeof *f);
    f->a = oa != NULL ? crdt_client_opts(oa) : crdt_client();
    f->b = clients == 2 ? crdt_client() : NULL;
    f->r = crdt_redis();
    f->name = crdt_key(suffix);
    crdt_sync_handles(f, kind);
}

void crdt_sync_handles(crdt_sync_fixture *f, crdt_sync_kind kind)
{
    crdt_sync_channel(kind, f->name, f->channel, sizeof f->channel);
    snprintf(f->timeouts, sizeof f->timeouts, "{%s}:timeout", f->name);
    switch (kind) {
    case CRDT_SYNC_SEMAPHORE:
        f->sa = crdt_sem_of(f->a, f->name);
        f->sb = f->b != NULL ? crdt_sem_of(f->b, f->name) : NULL;
        break;
    case CRDT_SYNC_PERMIT_SEMAPHORE:
        f->pa = crdt_pes_of(f->a, f->name);
        f->pb = f->b != NULL ? crdt_pes_of(f->b, f->name) : NULL;
        break;
    case CRDT_SYNC_LATCH:
        f->la = crdt_latch_of(f->a, f->name);
        f->lb = f->b != NULL ? crdt_latch_of(f->b, f->name) : NULL;
        break;
    }
}

void crdt_sync_open_proxied(crdt_sync_fixture *f, crdt_sync_kind kind, const char *suffix)
{
    memset(f, 0, sizeof *f);
    f->a = crdt_client_via_proxy(&f->p);
    f->r = crdt_redis();
    f->name = crdt_key(suffix);
    crdt_sync_handles(f, kind);
}

void crdt_sync_close(crdt_sync_fixture *f)
{
    crdt_sync_handles_free(f);
    crd_client_free(f->a);
    crd_client_free(f->b);
    redisFree(f->r);
    crdt_proxy_stop(f->p);
}

void crdt_sync_handles_free(crdt_sync_fixture *f)
{
    crd_semaphore_free(f->sa);
    crd_semaphore_free(f->sb);
    f->sa = f->sb = NULL;
    crd_permit_semaphore_free(f->pa);
    crd_permit_semaphore_free(f->pb);
    f->pa = f->pb = NULL;
    crd_latch_free(f->la);
    crd_latch_free(f->lb);
    f->la = f->lb = NULL;
}

long long crdt_permit_score(redisContext *r, const char *zset, const char *id)
{
    unsigned char b[16];
    for (int i = 0; i < 16; i++) {
        unsigned v = 0;
        sscanf(id + 2 * i, "%2x", &v);
        b[i] = (unsigned char)v;
    }
    redisReply *rep = redisCommand(r, "ZSCORE %s %b", zset, b, (size_t)16);
    cr_assert_not_null(rep);
    long long v = rep->type == REDIS_REPLY_NIL ? -1 : strtoll(rep->str, NULL, 10);
    freeReplyObject(rep);
    return v;
}

void crdt_lost_permit_open(crdt_lost_permit *x, const char *suffix)
{
    crdt_sync_fixture *f = &x->f;
    crdt_sync_open_proxied(f, CRDT_SYNC_PERMIT_SEMAPHORE, suffix);
    snprintf(x->zset, sizeof x->zset, "%s", f->timeouts);
    CRDT_OK(f->a, crd_permit_semaphore_try_set_permits(f->pa, 3, NULL));
    char first[CRD_PERMIT_ID_SIZE];
    CRDT_OK(f->a, crd_permit_semaphore_acquire(f->pa, 0, 60000, first)); /* script cached */
    x->rule = crdt_proxy_arm(f->p, f->name, NULL, CRDT_PROXY_EXECUTE_THEN_CLOSE, 0);
}

void crdt_lost_permit_check(crdt_lost_permit *x, crd_status st, const char *id)
{
    const crdt_sync_fixture *f = &x->f;
    cr_assert(crdt_proxy_fired(f->p, x->rule));
    cr_assert_eq(st, CRD_OK, "%s: %s", crd_strerror(st), crd_client_errmsg(f->a));
    cr_assert_eq(crdt_reply_int(crdt_cmd(f->r, "GET %s", f->name)), 1, "one permit taken, once");
    cr_assert_eq(crdt_cmd_int(f->r, "ZCARD %s", x->zset), 2);
    cr_assert_neq(crdt_permit_score(f->r, x->zset, id), -1, "the id read back is the permit");
}

crd_client *crdt_client_via_proxy(crdt_proxy **p)
{
    *p = crdt_proxy_start(crdt_port(), NULL);
    cr_assert_not_null(*p);
    crd_options o;
    crdt_options(&o);
    /* Plain even in a CRDT_TLS=1 run: the proxy's rules match command bytes, which TLS
     * hides; what a lost reply means does not depend on the transport. */
    o.port = crdt_proxy_port(*p);
    o.tls = false;
    o.tls_ca_file = NULL;
    o.command_timeout_ms = 1000;
    return crdt_client_opts(&o);
}

static void *sync_waiter_main(void *arg)
{
    crdt_sync_waiter *w = arg;
    w->t_start = crdt_now_ms();
    if (w->s != NULL)
        w->st = crd_semaphore_acquire(w->s, w->permits, w->wait_ms);
    else if (w->ps != NULL)
        w->st = crd_permit_semaphore_acquire_n(w->ps, w->permits, w->wait_ms, w->lease_ms,
                                               w->ids);
    else
        w->st = crd_latch_await(w->l, w->wait_ms);
    w->t_end = crdt_now_ms();
    crdt_gate_set(&w->done, 1);
    return NULL;
}

void crdt_sync_waiter_start(crdt_sync_waiter *w)
{
    cr_assert(w->ps == NULL || (w->permits >= 1 && w->permits <= 4),
              "a permit semaphore waiter takes 1 to 4 permits");
    crdt_gate_init(&w->done);
    cr_assert_eq(pthread_create(&w->th, NULL, sync_waiter_main, w), 0);
}

void crdt_sync_waiter_join(crdt_sync_waiter *w, int64_t timeout_ms, const char *what)
{
    cr_assert(crdt_gate_wait(&w->done, 1, timeout_ms), "%s", what);
    pthread_join(w->th, NULL);
    crdt_gate_destroy(&w->done);
}

void crdt_sync_waiter_woken(crdt_sync_waiter *w, int64_t since_ms, int64_t within_ms,
                            const char *what)
{
    crdt_sync_waiter_join(w, 30000, what);
    cr_assert_eq(w->st, CRD_OK, "%s: %s", what, crd_strerror(w->st));
    cr_assert_lt(w->t_end - since_ms, within_ms, "%s: returned %lld ms after the wake-up "
                 "(%lld allowed): not woken by the message", what,
                 (long long)(w->t_end - since_ms), (long long)within_ms);
}
