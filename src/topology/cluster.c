/*
 * cluster.c -- a Redis Cluster's topology as the client sees it: the nodes it has heard
 * of (seeds, primaries, redirect targets), one connection pool per node, and the slot
 * map, a 16384-entry array of node pointers read from CLUSTER SLOTS.
 *
 * pool.c asks here which node serves a key (crd__cluster_node_for); script.c's crd__call
 * reports what the servers said: a MOVED updates one slot at once (crd__cluster_moved),
 * an ASK does not touch the map, and a connection failure, READONLY or a pushed
 * SUNSUBSCRIBE marks the map stale. A stale map is refreshed when a node is next needed,
 * at most one refresh at a time (the others keep using the current map) and at most one
 * attempt per 100 ms; a fresh map is also re-read every 5 s so a failover nobody ran into
 * yet is seen. A caller's thread that has a node for its key never reads the map itself:
 * it hands the refresh to the refresher thread and goes on (its deadline is not spent
 * on CLUSTER SLOTS from a node that stalls); the subscriber and watchdog threads, and a
 * caller without a node, read it themselves. A refresh asks the node that gave the last
 * map first, then the primaries of the current map, then the seeds, and installs the
 * whole map at once.
 *
 * Nodes are never freed before the client: a pointer handed out (a pool, a pubsub link)
 * stays valid however the topology changes, and a node that comes back is reused.
 *
 * Threads: any caller, the subscriber, watchdog and refresher threads. Lock: cl->mu
 * guards the map, the node list and the refresh flags; it is a leaf (nothing else is
 * taken under it, except by the fork handler, which then takes every pool's mutex), and
 * no I/O happens under it.
 */
#include "topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REFRESH_PERIOD_MS 5000
#define REFRESH_MIN_GAP_MS 100

struct crd__cluster {
    pthread_mutex_t mu;
    crd__node *slots[CRD__NSLOTS];
    crd__node *nodes;      /* every node heard of, newest first */
    bool stale;            /* the map is known to be wrong somewhere */
    uint64_t marks;        /* times it was marked stale (or a MOVED changed it) so far */
    uint64_t read_mark;    /* marks when the refresh that read the map now in use began */
    bool refreshing;       /* a refresh is in flight */
    int64_t refreshed_at;  /* last successful refresh (monotonic ms) */
    int64_t attempted_at;  /* last refresh attempt */
    /* The refresher thread, started at the first refresh a caller's thread would have
     * run: it runs it instead (wanted), so that no caller waits for CLUSTER SLOTS from a
     * node that stalls. */
    pthread_t thread;
    pthread_cond_t cv;
    bool started, stop, wanted;
    /* The node that gave the last map: asked first next time (a primary that stalls
     * costs each refresh that asks it first a whole command timeout). */
    char *good_host;
    int good_port;
};

/* ---- nodes ---------------------------------------------------------------------------------- */

/* Finds host:port; caller holds cl->mu. */
static crd__node *find_node(crd__cluster *cl, const char *host, size_t hostlen, int port)
{
    for (crd__node *n = cl->nodes; n != NULL; n = n->next)
        if (n->ep.port == port && strlen(n->ep.host) == hostlen &&
            memcmp(n->ep.host, host, hostlen) == 0)
            return n;
    return NULL;
}

crd__node *crd__cluster_node_at(crd_client *c, const char *host, size_t hostlen, int port)
{
    crd__cluster *cl = c->cluster;
    pthread_mutex_lock(&cl->mu);
    crd__node *n = find_node(cl, host, hostlen, port);
    if (n == NULL && (n = calloc(1, sizeof *n)) != NULL) {
        n->ep.host = malloc(hostlen + 1);
        if (n->ep.host != NULL) {
            memcpy(n->ep.host, host, hostlen);
            n->ep.host[hostlen] = '\0';
            n->ep.port = port;
            /* Password and ACL user apply to every node; a cluster has only db 0. */
            n->ep.username = c->ep.username;
            n->ep.password = c->ep.password;
            n->ep.tls = c->ep.tls; /* rediss-cluster://: every node over TLS */
            n->pool = crd__pool_new(c, &n->ep);
        }
        if (n->ep.host == NULL || n->pool == NULL) {
            free(n->ep.host);
            free(n);
            n = NULL;
        } else {
            n->next = cl->nodes;
            cl->nodes = n;
        }
    }
    pthread_mutex_unlock(&cl->mu);
    return n;
}

void crd__cluster_foreach_pool(crd_client *c, void (*fn)(crd_client *, crd__pool *, void *),
                               void *arg, bool held)
{
    crd__cluster *cl = c->cluster;
    if (cl == NULL)
        return;
    if (!held)
        pthread_mutex_lock(&cl->mu);
    for (crd__node *n = cl->nodes; n != NULL; n = n->next)
        fn(c, n->pool, arg);
    if (!held)
        pthread_mutex_unlock(&cl->mu);
}

int crd__cluster_primaries(crd_client *c, crd__node **out, int max)
{
    crd__cluster *cl = c->cluster;
    if (cl == NULL)
        return 0;
    int n = 0;
    pthread_mutex_lock(&cl->mu);
    for (int s = 0; s < CRD__NSLOTS; s++) {
        crd__node *node = cl->slots[s];
        int k = 0;
        while (k < n && out[k] != node)
            k++;
        if (node != NULL && k == n && n < max)
            out[n++] = node;
    }
    pthread_mutex_unlock(&cl->mu);
    return n;
}

/* ---- redirects ------------------------------------------------------------------------------ */

bool crd__cluster_parse_redirect(const redisReply *r, int *slot, const char **host,
                                 size_t *hostlen, int *port)
{
    if (r == NULL || r->type != REDIS_REPLY_ERROR || r->str == NULL)
        return false;
    const char *p = r->str, *end = r->str + r->len;
    /* "MOVED 3999 127.0.0.1:6381", "ASK 3999 [::1]:6381" */
    while (p < end && *p != ' ')
        p++;
    if (p == end)
        return false;
    p++;
    long s = 0;
    const char *digits = p;
    while (p < end && *p >= '0' && *p <= '9' && p - digits < 6)
        s = s * 10 + (*p++ - '0');
    if (p == digits || p == end || *p != ' ' || s >= CRD__NSLOTS)
        return false;
    p++;
    const char *colon = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == ':')
            colon = q;
    if (colon == NULL || colon + 1 == end)
        return false;
    long pt = 0;
    for (const char *q = colon + 1; q < end; q++) {
        if (*q < '0' || *q > '9' || pt > 65535)
            return false;
        pt = pt * 10 + (*q - '0');
    }
    if (pt < 1 || pt > 65535)
        return false;
    const char *h = p, *h_end = colon;
    if (h < h_end && *h == '[' && h_end[-1] == ']') {
        h++;
        h_end--;
    }
    *slot = (int)s;
    *host = h;
    *hostlen = (size_t)(h_end - h);
    *port = (int)pt;
    return true;
}

void crd__cluster_moved(crd_client *c, int slot, crd__node *n)
{
    crd__cluster *cl = c->cluster;
    pthread_mutex_lock(&cl->mu);
    cl->slots[slot] = n;
    cl->stale = true;
    cl->marks++;
    pthread_mutex_unlock(&cl->mu);
}

uint64_t crd__cluster_stale(crd_client *c)
{
    crd__cluster *cl = c->cluster;
    if (cl == NULL)
        return 0;
    pthread_mutex_lock(&cl->mu);
    cl->stale = true;
    uint64_t mark = ++cl->marks;
    pthread_mutex_unlock(&cl->mu);
    return mark;
}

bool crd__cluster_read_after(crd_client *c, uint64_t mark)
{
    crd__cluster *cl = c->cluster;
    if (cl == NULL)
        return true;
    pthread_mutex_lock(&cl->mu);
    bool after = cl->read_mark >= mark;
    pthread_mutex_unlock(&cl->mu);
    return after;
}

/* ---- reading the map ------------------------------------------------------------------------ */

typedef struct candidate {
    char *host;
    int port;
} candidate;

/* Reads CLUSTER SLOTS from one node into slots[]. CRD_OK with the map filled; else a
 * status with the reason in why. */
static crd_status read_slots(crd_client *c, const char *host, int port, crd__node **slots,
                             char *why, size_t whylen)
{
    crd__endpoint ep = {0};
    ep.host = (char *)host;
    ep.port = port;
    ep.username = c->ep.username;
    ep.password = c->ep.password;
    ep.tls = c->ep.tls;
    crd__conn conn = {0};
    crd_status st = crd__conn_open(c, &ep, &conn);
    if (st != CRD_OK) {
        snprintf(why, whylen, "%s", crd_client_errmsg(c));
        return st;
    }
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    size_t lens[2] = {7, 5};
    redisReply *r = NULL;
    st = crd__conn_command(c, &conn, 2, argv, lens, &r);
    crd__conn_close(&conn);
    if (st != CRD_OK) {
        snprintf(why, whylen, "%s", crd_client_errmsg(c));
        return st;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        bool disabled = strstr(r->str, "cluster support disabled") != NULL;
        snprintf(why, whylen, "%s:%d %s: %.*s", host, port,
                 disabled ? "is not a cluster node" : "refused CLUSTER SLOTS",
                 (int)(r->len > 100 ? 100 : r->len), r->str);
        freeReplyObject(r);
        return disabled ? CRD_INVALID_ARGUMENT : CRD_SERVER;
    }
    st = CRD_OK;
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        snprintf(why, whylen, "%s:%d has no slots assigned yet", host, port);
        st = CRD_SERVER;
    }
    for (size_t i = 0; st == CRD_OK && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
            e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
            e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
            continue;
        long long from = e->element[0]->integer, to = e->element[1]->integer;
        const redisReply *h = e->element[2]->element[0];
        long long p = e->element[2]->element[1]->integer;
        if (from < 0 || to >= CRD__NSLOTS || from > to || p < 1 || p > 65535)
            continue;
        /* An empty host means "where you asked"; "?" an endpoint the node does not know. */
        const char *nh = h->len > 0 ? h->str : host;
        size_t nhl = h->len > 0 ? h->len : strlen(host);
        if (nhl == 1 && nh[0] == '?')
            continue;
        crd__node *n = crd__cluster_node_at(c, nh, nhl, (int)p);
        if (n == NULL) {
            st = crd__fail(c, CRD_NO_MEMORY, "cannot allocate a cluster node");
            snprintf(why, whylen, "out of memory");
            break;
        }
        for (long long s = from; s <= to; s++)
            slots[s] = n;
    }
    freeReplyObject(r);
    return st;
}

crd_status crd__cluster_refresh(crd_client *c)
{
    crd__cluster *cl = c->cluster;
    pthread_mutex_lock(&cl->mu);
    if (cl->refreshing) {
        pthread_mutex_unlock(&cl->mu);
        return CRD_OK;
    }
    cl->refreshing = true;
    cl->attempted_at = crd__now_ms();
    uint64_t mark = cl->marks;
    /* Whom to ask: the primaries of the current map, then the seeds. */
    int cap = c->ep.nseeds + 16;
    candidate *cand = calloc((size_t)cap, sizeof *cand);
    int ncand = 0;
    for (int s = 0; cand != NULL && s < CRD__NSLOTS && ncand < 16; s++) {
        crd__node *n = cl->slots[s];
        bool seen = n == NULL;
        for (int k = 0; k < ncand && !seen; k++)
            seen = cand[k].port == n->ep.port && strcmp(cand[k].host, n->ep.host) == 0;
        if (!seen && (cand[ncand].host = strdup(n->ep.host)) != NULL)
            cand[ncand++].port = n->ep.port;
    }
    for (int k = 0; cand != NULL && k < c->ep.nseeds; k++)
        if ((cand[ncand].host = strdup(c->ep.seeds[k].host)) != NULL)
            cand[ncand++].port = c->ep.seeds[k].port;
    for (int k = 1; cl->good_host != NULL && k < ncand; k++) {
        if (cand[k].port == cl->good_port && strcmp(cand[k].host, cl->good_host) == 0) {
            candidate first = cand[0];
            cand[0] = cand[k];
            cand[k] = first;
            break;
        }
    }
    pthread_mutex_unlock(&cl->mu);

    crd__node **slots = calloc(CRD__NSLOTS, sizeof *slots);
    crd_status st = CRD_IO, first_st = CRD_OK;
    char tried[600] = "", why[300] = "";
    size_t o = 0;
    int good = -1;
    for (int k = 0; slots != NULL && cand != NULL && k < ncand && st != CRD_OK; k++) {
        st = read_slots(c, cand[k].host, cand[k].port, slots, why, sizeof why);
        good = k;
        if (st != CRD_OK) {
            if (first_st == CRD_OK || st == CRD_INVALID_ARGUMENT)
                first_st = st;
            if (o < sizeof tried)
                o += (size_t)snprintf(tried + o, sizeof tried - o, "%s%s", o ? "; " : "", why);
        }
    }
    pthread_mutex_lock(&cl->mu);
    if (st == CRD_OK) {
        memcpy(cl->slots, slots, sizeof cl->slots);
        /* A mark made while the map was read stays: the answer may predate what caused
         * it (a SUNSUBSCRIBE pushed by a primary just replaced, read while the refresh
         * asked CLUSTER SLOTS elsewhere or before it). */
        cl->stale = cl->marks != mark;
        cl->read_mark = mark;
        cl->refreshed_at = crd__now_ms();
        if (cand != NULL && good >= 0) {
            free(cl->good_host);
            cl->good_host = cand[good].host; /* taken from the list */
            cl->good_port = cand[good].port;
            cand[good].host = NULL;
        }
    }
    cl->refreshing = false;
    pthread_mutex_unlock(&cl->mu);
    for (int k = 0; cand != NULL && k < ncand; k++)
        free(cand[k].host);
    free(cand);
    free(slots);
    if (slots == NULL || cand == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the cluster slot map");
    if (st != CRD_OK) {
        crd__log(c, CRD_LOG_WARN, "cluster topology could not be read: %s", tried);
        return crd__fail(c, first_st == CRD_INVALID_ARGUMENT ? CRD_INVALID_ARGUMENT : st,
                         "no cluster node gave its slot map: %s", tried);
    }
    return CRD_OK;
}

/* The refresher thread: a refresh whenever one is wanted. */
static void *refresher_main(void *arg)
{
    crd__thread_enter("crd-cluster");
    crd_client *c = arg;
    crd__cluster *cl = c->cluster;
    pthread_mutex_lock(&cl->mu);
    while (!cl->stop) {
        if (!cl->wanted) {
            pthread_cond_wait(&cl->cv, &cl->mu);
            continue;
        }
        cl->wanted = false;
        pthread_mutex_unlock(&cl->mu);
        (void)crd__cluster_refresh(c); /* on failure the current map is the best guess */
        pthread_mutex_lock(&cl->mu);
    }
    pthread_mutex_unlock(&cl->mu);
    return NULL;
}

/* Hands a due refresh to the refresher thread (started on first use); false when there
 * is no thread to take it. Caller holds cl->mu. */
static bool hand_refresh(crd_client *c)
{
    crd__cluster *cl = c->cluster;
    if (cl->stop)
        return false;
    if (!cl->started)
        cl->started = crd__thread_create(&cl->thread, refresher_main, c) == 0;
    if (cl->started) {
        cl->wanted = true;
        pthread_cond_signal(&cl->cv);
    }
    return cl->started;
}

crd__node *crd__cluster_node_for(crd_client *c, const char *key, size_t len)
{
    crd__cluster *cl = c->cluster;
    int64_t now = crd__now_ms();
    pthread_mutex_lock(&cl->mu);
    bool due = !cl->refreshing && now - cl->attempted_at >= REFRESH_MIN_GAP_MS &&
               (cl->stale || now - cl->refreshed_at >= REFRESH_PERIOD_MS);
    /* A caller with a node for its key keeps its deadline: the refresher thread reads
     * the map, the caller goes to the node it knows (a MOVED or a timeout tells it
     * more). Without a node, and for the client's own threads (no key: the subscriber
     * and the watchdog want the new map before they go on), the caller reads it. */
    if (due && key != NULL && cl->slots[crd__key_slot(key, len)] != NULL && hand_refresh(c))
        due = false;
    pthread_mutex_unlock(&cl->mu);
    if (due)
        crd__cluster_refresh(c); /* on failure the current map is the best guess */
    pthread_mutex_lock(&cl->mu);
    crd__node *n = key != NULL ? cl->slots[crd__key_slot(key, len)] : NULL;
    for (int s = 0; n == NULL && s < CRD__NSLOTS; s += 1024)
        n = cl->slots[s];
    if (n == NULL)
        n = cl->nodes; /* no map: any node, whose MOVED will tell */
    pthread_mutex_unlock(&cl->mu);
    return n;
}

crd__node *crd__cluster_node_peek(crd_client *c, const char *key, size_t len)
{
    crd__cluster *cl = c->cluster;
    pthread_mutex_lock(&cl->mu);
    crd__node *n = cl->slots[crd__key_slot(key, len)];
    pthread_mutex_unlock(&cl->mu);
    return n;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

crd_status crd__cluster_init(crd_client *c)
{
    crd__cluster *cl = calloc(1, sizeof *cl);
    if (cl == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the cluster slot map");
    if (crd__mutex_make(c, CRD__MU_CLUSTER, &cl->mu, &cl->cv) != 0) {
        free(cl);
        return crd__fail(c, CRD_NO_MEMORY, "cannot make the cluster slot map's mutex");
    }
    c->cluster = cl;
    return crd__cluster_refresh(c);
}

void crd__cluster_free(crd_client *c)
{
    crd__cluster *cl = c->cluster;
    if (cl == NULL)
        return;
    crd__thread_stop(c, &cl->mu, &cl->cv, &cl->stop, &cl->started, &cl->thread, -1);
    while (cl->nodes != NULL) {
        crd__node *n = cl->nodes;
        cl->nodes = n->next;
        crd__pool_destroy(n->pool);
        free(n->ep.host);
        free(n);
    }
    free(cl->good_host);
    crd__mutex_drop(c, CRD__MU_CLUSTER, &cl->mu, &cl->cv);
    free(cl);
    c->cluster = NULL;
}

/* In a forked child, with cl->mu held: a refresh a parent thread had in flight, and the
 * refresher thread, do not exist here (it starts again when wanted). */
void crd__cluster_after_fork_child(crd_client *c)
{
    crd__cluster *cl = c->cluster;
    cl->refreshing = false;
    cl->stale = true;
    cl->started = false;
    cl->wanted = false;
    crd__cond_init(&cl->cv); /* a parent thread may have been waiting on it */
}
