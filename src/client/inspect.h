/*
 * inspect.h -- what the client layer's introspection files share (src/client/ only):
 * state.c holds a state's memory and the reply readers all of them use, inspect.c reads
 * and decodes a state, scan.c walks the keyspace for them, whois.c joins
 * the identity records into a state, watch.c
 * follows a name's events and names the process behind each. The record's keys and field
 * names are ident.c's, in locks.h.
 */
#ifndef CRD_INSPECT_H
#define CRD_INSPECT_H

#include "client.h"

/* ---- state.c: a state's memory and the readers of reply pieces ------------------------ */

/* Every piece of a crd_state lives in chunks behind it, freed at once (crd_state_free). */
typedef struct crd__state_chunk {
    struct crd__state_chunk *next;
    size_t used, size;
    max_align_t data[];
} crd__state_chunk;

/* What crd_state_read hands out: the public struct first, its memory behind it. */
typedef struct state_box {
    crd_state pub;
    crd__state_chunk *chunks;
    bool oom; /* an allocation failed: the state is incomplete */
} state_box;

/* n zeroed bytes of b's arena, or NULL (b->oom set). */
void *crd__state_alloc(state_box *b, size_t n);
/* A NUL-terminated copy of len bytes in b's arena ("" when out of memory or s is NULL). */
const char *crd__state_str(state_box *b, const char *s, size_t len);

/* A signed decimal of at most 18 digits (a hold count, a semaphore's value). */
bool crd__count_parse(const char *s, size_t len, int64_t *out);
/* A string or status reply. */
bool crd__reply_is_text(const redisReply *r);
/* An integer reply, or a string holding a count; dflt otherwise. */
int64_t crd__state_int(const redisReply *r, int64_t dflt);
/* An owner field as the force-unlock guard reads one: "...:<digits>" or
 * "...:<digits>:write"; or node-redisson's "<uuid>:<anything>" (thread 0). *ulen: the
 * client part's length, *thread, *writer. */
bool crd__owner_field_parse(const char *f, size_t len, size_t *ulen, uint64_t *thread,
                            bool *writer);

/* What a snapshot said besides the state: the raw subscriber counts of the four channels
 * and the string's value, for the decisions the join can sharpen (a latch's watchers). */
typedef struct raw {
    int64_t subs[4]; /* lock, rw, semaphore, latch channel */
    bool number;     /* a string holding a number */
    int64_t value;
} raw;
/* Which of raw.subs a kind's waiters subscribe to, or -1 (none) (state.c). */
int crd__state_channel(crd_object_kind k);

/* ---- inspect.c: the snapshot of one name, read and decoded --------------------------- */

/* The flags a state read takes. */
#define CRD__STATE_FLAGS (CRD_STATE_NO_IDENTITY | CRD_STATE_WAITERS | CRD_STATE_CLIENTS)
/* The state of one name as crd_state_read() reads it, also for watch.c. */
crd_status crd__state_read(crd_client *c, const char *name, size_t len, unsigned flags,
                           crd_state **out);

/* The same with the identity records read into (and found in) ic, the scan's (scan.c). */
typedef struct crd__idcache crd__idcache;
crd_status crd__state_read_cached(crd_client *c, const char *name, size_t len, unsigned flags,
                                  crd__idcache *ic, crd_state **out);

/* ---- whois.c: the identity records, read and kept ------------------------------------- */

/* The identity records a read, a scan or a watch has read, kept for its life; who is
 * behind an owner field (its strings point into the cache, valid until the cache is freed
 * or asked again). */
crd__idcache *crd__idcache_new(void);
void crd__idcache_free(crd__idcache *ic);
void crd__idcache_who(crd_client *c, crd__idcache *ic, const char *owner, size_t len,
                      crd_identity *who);
/* Joins the records into b: holders' and queued waiters' identities and since-times, the
 * watches and the declared waiters of the name (CRD_STATE_WAITERS), CLIENT LIST for the
 * holders without a record (CRD_STATE_CLIENTS). *watches: crd_watch sessions of the name
 * (-1 when the directory was not read). */
crd_status crd__state_join(crd_client *c, state_box *b, crd__idcache *ic, unsigned flags,
                           const raw *rw, int64_t *watches);

#endif /* CRD_INSPECT_H */
