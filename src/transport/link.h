/*
 * link.h -- one non-blocking connection of the engine (link.c). Private to engine.c.
 */
#ifndef CRD_LINK_H
#define CRD_LINK_H

#include "base.h"

struct crd__req; /* the engine's requests: a link keeps their order, never their insides */

typedef enum crd__link_state {
    CRD__LINK_CLOSED = 0,
    CRD__LINK_CONNECTING,
    CRD__LINK_HANDSHAKE,
    CRD__LINK_READY,
    CRD__LINK_UNHEALTHY /* no reply for command_timeout_ms: takes nothing new */
} crd__link_state;

typedef struct crd__link {
    int fd;
    SSL *ssl;
    SSL_CTX *tls_ctx; /* NULL: plaintext */
    bool verify;
    char tls_name[256];
    int tls_want;
    redisReader *reader;
    crd__link_state state;
    char *wbuf;
    size_t wlen, woff, wcap;
    /* The requests whose replies this link owes, in order (engine.c). */
    struct crd__req *head, *tail;
    int inflight;
    int waits;            /* how many of them are WAITs (blocks_ms > 0; engine.c) */
    int setup;            /* AUTH/SELECT replies still to come before the first request's */
    char setup_kind[2];   /* 'A' AUTH, 'S' SELECT, in the order sent */
    int setup_next;
    int64_t opened_ms;    /* when the connect started */
    int64_t quiet_since;  /* since when it owes a reply and has read nothing */
    uint64_t topo_gen;    /* the primary generation it was opened under */
    bool replied;         /* a reply has been read on it */
    bool borrowed;        /* a calling thread runs its round trip on it (engine.c): the I/O
                             thread neither polls, writes, reads nor reassigns it */
    bool can_wait;        /* plaintext, socket in blocking mode (crd__link_wait) */
    int64_t rcvtimeo_ms;  /* its SO_RCVTIMEO (0: not set yet) */
    struct crd__link *next; /* the peer's list of unhealthy links */
} crd__link;

void crd__link_init(crd__link *l);
/* Starts a connect to ep; -1 with why on an immediate failure. */
int crd__link_open(crd__link *l, const crd__endpoint *ep, SSL_CTX *tls, const char *tls_name,
                   bool verify, char *why, size_t n);
/* Closes the socket and frees the buffers (the reply queue is the engine's to empty). */
void crd__link_close(crd__link *l);
/* Fork child: closes the parent's socket without touching its TLS state. */
void crd__link_abandon(crd__link *l);
/* Appends bytes to the write buffer; false when out of memory. */
bool crd__link_queue(crd__link *l, const char *buf, size_t len);
/* The poll events the link waits for. */
short crd__link_events(const crd__link *l);
/* Advances the link with poll's revents: finishes a connect or handshake, writes, reads.
 * *got: bytes were read. -1: the link failed (*st, why). */
int crd__link_io(crd__link *l, short revents, bool *got, crd_status *st, char *why, size_t n);
/* A ready plaintext link with nothing left to write, whose caller may wait for bytes in
 * crd__link_wait. */
bool crd__link_can_wait(const crd__link *l);
/* For the thread a link is lent to: waits for bytes, never past left_ms, and reads what
 * came into the reader (*got); 0 (bytes came, or none yet: look at the time again), -1
 * failed (*st, why), -2 poll instead (TLS, bytes left to write, under 40 ms left). */
int crd__link_wait(crd__link *l, int64_t left_ms, bool *got, crd_status *st, char *why,
                   size_t n);
/* An idle ready link with nothing to read: no stray bytes, no end of stream (a peek). */
bool crd__link_quiet(const crd__link *l);
/* The next complete reply: 1 (in *out), 0 none yet, -1 a protocol error. */
int crd__link_reply(crd__link *l, redisReply **out);

#endif
