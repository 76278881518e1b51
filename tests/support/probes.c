/*
 * probes.c -- see probes.h.
 */
#include "probes.h"

#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "procs.h"

bool crdt_key_exists_is(void *probe)
{
    crdt_probe *p = probe;
    return crdt_exists(p->r, p->name) == p->n;
}

bool crdt_list_len_is(void *probe)
{
    crdt_probe *p = probe;
    return crdt_cmd_int(p->r, "LLEN %s", p->name) == p->n;
}

bool crdt_channel_subscribed(void *probe)
{
    crdt_probe *p = probe;
    redisReply *rep = crdt_cmd(p->r, "PUBSUB NUMSUB %s", p->name);
    bool yes = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
               rep->element[1]->type == REDIS_REPLY_INTEGER && rep->element[1]->integer > 0;
    freeReplyObject(rep);
    return yes;
}

bool crdt_holder_since_known(void *probe)
{
    crdt_probe *p = probe;
    crd_state *s = NULL;
    if (crd_state_read(p->c, p->name, strlen(p->name), 0, &s) != CRD_OK)
        return false;
    bool ok = s->nholders > 0 && s->holders[0].who.known && s->holders[0].since_ms > 0;
    crd_state_free(s);
    return ok;
}

bool crdt_client_waiting(void *probe)
{
    crdt_probe *p = probe;
    crd_metrics m;
    memset(&m, 0, sizeof m);
    crd_client_metrics(p->c, &m, sizeof m);
    return (long long)m.waiting_now >= p->n;
}

bool crdt_file_lines_reach(void *probe)
{
    crdt_probe *p = probe;
    char *s = crdt_file_text(p->name);
    long long n = 0;
    for (const char *q = s; *q != '\0'; q++)
        n += *q == '\n';
    free(s);
    return n >= p->n;
}

bool crdt_file_there(void *path)
{
    return access(path, F_OK) == 0;
}

bool crdt_file_filled(void *path)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_size > 0;
}

void crdt_assert_extended(const crdt_fixture *f, int64_t lease_ms, long long floor_ms)
{
    cr_assert_eq(crd_lock_extend(f->la, lease_ms), CRD_OK);
    long long t = crdt_pttl(f->r, f->key);
    cr_assert(t > floor_ms && t <= lease_ms, "PTTL after extend(%" PRId64 ") is %lld", lease_ms,
              t);
    int64_t v = 0;
    cr_assert_eq(crd_lock_validity_ms(f->la, &v), CRD_OK);
    cr_assert(v > lease_ms - 1000 && v <= lease_ms,
              "validity after extend(%" PRId64 ") is %" PRId64, lease_ms, v);
}
