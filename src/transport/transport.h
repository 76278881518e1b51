/*
 * transport.h -- the transport layer (src/transport/; base.h lists the layers): TLS, one
 * blocking connection, what a reply means, and the engine (every command connection of a
 * client, pipelined, driven by one I/O thread; its requests with their own deadlines,
 * waiting callers, the event loop's requests). Sees base.h only. What it offers the
 * layers above is this header; link.h and engine_int.h are its own.
 */
#ifndef CRD_TRANSPORT_H
#define CRD_TRANSPORT_H

#include "base.h"

/* ---- tls.c: TLS over a connected socket (OpenSSL) ------------------------------------ */


/* What crd_options says about TLS; borrowed strings. */
typedef struct crd__tls_config {
    const char *ca_file, *ca_dir, *cert_file, *key_file;
    bool insecure; /* no verification of the server's certificate */
} crd__tls_config;

/* Creates the one context of a client: CA, client certificate and key loaded once
 * (the system's CAs when neither CA option is given). On failure err says which file
 * and why: CRD_INVALID_ARGUMENT, CRD_NO_MEMORY. Any thread. */
crd_status crd__tls_ctx_new(const crd__tls_config *cfg, SSL_CTX **out, char *err, size_t errlen);
void crd__tls_ctx_free(SSL_CTX *ctx);
/* The handshake on a connected socket fd, done by deadline_ms (monotonic). server_name
 * (may be NULL) is sent as SNI unless it is an IP address, and the certificate must
 * match it when verify. Returns CRD_OK with *out; CRD_AUTH when the certificate was not
 * trusted or the server refused ours; CRD_IO for a transport failure (timeout, a
 * server that does not speak TLS); err says which in words. The socket is left
 * blocking, as it was. */
/* The engine's non-blocking TLS (link.c): a session over fd, not yet handshaken... */
crd_status crd__tls_session(SSL_CTX *ctx, int fd, const char *server_name, bool verify,
                            SSL **out, char *err, size_t errlen);
/* ...one handshake step: 0 done, POLLIN or POLLOUT wanted, -1 failed (*st, err). */
int crd__tls_handshake(SSL *ssl, bool verify, const char *server_name, crd_status *st,
                       char *err, size_t errlen);
/* Non-blocking read: bytes, 0 (a record without data: read again), -2 would block, -1
 * failed (why, *refused). */
int crd__tls_recv(SSL *ssl, char *buf, size_t cap, char *why, size_t whylen, bool *refused);
/* Non-blocking write: bytes written, 0 would block, -1 failed (*why). */
long crd__tls_send(SSL *ssl, const char *buf, size_t len, const char **why);
crd_status crd__tls_connect(SSL_CTX *ctx, int fd, const char *server_name, bool verify,
                            int64_t deadline_ms, SSL **out, char *err, size_t errlen);
/* One read: > 0 bytes; 0 when a record without data arrived (read again); -1 on failure
 * with why in words (*refused: the server refused our certificate). Blocks up to the
 * socket's receive timeout. */
int crd__tls_read(SSL *ssl, char *buf, size_t cap, char *why, size_t whylen, bool *refused);
/* Writes all of buf; false with *why on failure (never raises SIGPIPE). */
bool crd__tls_write(SSL *ssl, const char *buf, size_t len, const char **why);
/* The server asked for a client certificate and none is configured (it may require one:
 * a TLS 1.3 server then drops the connection after the handshake). */
bool crd__tls_cert_requested(SSL *ssl);
/* Decrypted bytes wait inside the SSL object: poll() on the socket would not see them. */
bool crd__tls_pending(SSL *ssl);
/* Frees the SSL object without a close_notify (nothing is written). */
void crd__tls_free(SSL *ssl);
/* ---- conn.c: one hiredis connection --------------------------------------------------- */

typedef struct crd__conn {
    redisContext *ctx;
    SSL *ssl;       /* TLS connections: the session over ctx->fd; NULL for plaintext */
    bool broken;    /* an I/O error happened: discard, never reuse */
    bool replied;   /* a reply has been read on it (a plaintext connection closed before
                       its first reply may be talking to a TLS-only port) */
    bool refused;   /* TLS: the server refused our certificate after the handshake */
    char why[200];  /* TLS: the words of the last read failure (errstr holds 128 bytes) */
    unsigned epoch; /* pool connections: the pool epoch when it was opened */
    struct crd__pool *pool; /* pool connections: the pool it belongs to */
    uint64_t topo_gen; /* the primary's generation it was opened under (sentinel.c) */
    int replicas;      /* cluster replica sync: its node's replicas (ROLE), read at */
    int64_t replicas_at; /* replicas_at (monotonic ms; 0: never) */
} crd__conn;

/* Opens a connection to ep with the client's timeouts, AUTH and SELECT. The endpoint is
 * an argument so that each connect can resolve where to go (Sentinel, Cluster nodes). */
crd_status crd__conn_open(crd_client *c, const crd__endpoint *ep, crd__conn *conn);
void crd__conn_close(crd__conn *conn);
/* In a forked child: give up a connection another (parent) thread may have been using
 * at the fork. Its socket is closed (never written); its memory, possibly caught
 * mid-update, is never touched again, only kept reachable. */
void crd__conn_abandon(crd__conn *conn);
/* Sends one command (argv with lengths) and reads its reply. On CRD_IO the connection is
 * marked broken; *reply is NULL. Error replies are returned as CRD_OK with the reply
 * (callers classify them with crd__reply_classify). Traces the command when the client
 * has on_trace. */
crd_status crd__conn_command(crd_client *c, crd__conn *conn, int argc, const char **argv,
                             const size_t *lens, redisReply **reply);
/* Pipelined form: appends all commands, then reads all replies into replies[]. */
crd_status crd__conn_pipeline(crd_client *c, crd__conn *conn, int ncmd, const int *argcs,
                              const char *const *const *argvs,
                              const size_t *const *lens, redisReply **replies);
void crd__trace(crd_client *c, int argc, const char *const *argv, const size_t *lens,
                const redisReply *r, const char *io_error, bool subscriber);
/* Appends argv as one RESP command to the buffer *p (length *len, capacity *cap, grown
 * with realloc). False when out of memory (the buffer is unchanged). */
bool crd__resp_append(char **p, size_t *len, size_t *cap, int argc, const char *const *argv,
                      const size_t *lens);
/* The second half of crd__conn_command for a command already sent (or not: sent false,
 * why the send failed): reads and traces its reply, or fails as it would. */
crd_status crd__conn_reply(crd_client *c, crd__conn *conn, int argc, const char **argv,
                           const size_t *lens, bool sent, const char *why, redisReply **reply);
/* Writes all of buf on the connection's transport; false with *why on failure. */
bool crd__conn_send(crd__conn *conn, const char *buf, size_t len, const char **why);
/* One read from the transport into the context's reply reader. REDIS_OK, or REDIS_ERR
 * with conn->ctx->err and errstr set. */
int crd__conn_fill(crd__conn *conn);
/* Bytes already read from the socket wait to be parsed (TLS): do not poll() first. */
bool crd__conn_buffered(const crd__conn *conn);
/* Reads one reply, blocking (bounded by the command timeout): REDIS_OK with *out, or
 * REDIS_ERR with conn->ctx->errstr. For the CLI's raw connections (its own commands). */
int crd__conn_read(crd__conn *conn, redisReply **out);

/* ---- reply.c: every reply classified once ---------------------------------------------- */

typedef enum crd__reply_class {
    CRD__REPLY_OK,        /* not an error reply: the command ran */
    CRD__REPLY_ERROR,     /* the server refused or the script failed (WRONGTYPE, ERR, ...) */
    CRD__REPLY_NOSCRIPT,  /* EVALSHA of a script the server has not cached: nothing ran */
    CRD__REPLY_MOVED,     /* cluster: the key's slot is served by another node */
    CRD__REPLY_ASK,       /* cluster: ask another node, for this one command */
    CRD__REPLY_READONLY,  /* a replica answered a write: not the primary */
    CRD__REPLY_BUSY,      /* LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN: not now */
    CRD__REPLY_NONE       /* no reply at all (NULL) */
} crd__reply_class;

/* Which class a reply is in. Every class but OK and ERROR means the command did not
 * run, so sending it again (elsewhere, or later) cannot apply it twice. Pure. */
crd__reply_class crd__reply_classify(const redisReply *r);
/* Records and returns the status for a reply the caller cannot use: CRD_SERVER with the
 * server's words for an error reply (without the script SHA and the "@user_script"
 * position Redis appends: internal identifiers say nothing to a user), CRD_PROTOCOL with
 * the reply rendered for anything else. what names the operation. */
crd_status crd__reply_fail(crd_client *c, const redisReply *r, const char *what);
/* What an error reply means for a lock, as a sentence for messages (OOM, LOADING, BUSY,
 * MASTERDOWN, CLUSTERDOWN, TRYAGAIN, CROSSSLOT, NOPERM), or NULL. Pure. */
const char *crd__reply_meaning(const redisReply *r);
/* The server's words of an error reply without the script tail; returns their length. */
size_t crd__reply_error_text(const redisReply *r, const char **text);
/* Renders a reply for traces and messages. */
void crd__reply_render(const redisReply *r, char *buf, size_t len);
/* Reads a decimal integer reply, or a string holding one (HGET of a count). NIL is 0.
 * False for anything else. */
bool crd__reply_int(const redisReply *r, int64_t *out);


/* ---- engine.c: peers (one server or cluster node each; engine.h has the rest) ---------- */

/* The peer for ep (borrowed; must outlive the client): up to opts.pool_size pipelined
 * links, opened on demand by the I/O thread. NULL when out of memory. */
crd__pool *crd__pool_new(crd_client *c, const crd__endpoint *ep);
/* Peers live as long as the client's engine: a no-op kept for cluster.c. */
void crd__pool_destroy(crd__pool *p);
/* Where a peer's links go (&c->ep: the primary, which the sentinels name). */
const crd__endpoint *crd__pool_ep(const crd__pool *p);
/* Replica sync on a cluster: the node's replica count as last read, whether it is
 * younger than max_age; and setting it. */
int crd__pool_replicas(crd__pool *p, int64_t now, int64_t max_age, bool *fresh);
void crd__pool_set_replicas(crd__pool *p, int n, int64_t now);
/* Whether the peer's last connect failed (it is in its reconnect backoff); its reason
 * then in why. */
bool crd__pool_failing(crd__pool *p, char *why, size_t n);

/* ---- engine*.c: the engine (docs/ARCHITECTURE.md, "The engine") ---------------------------
 *
 * Every command connection of a client, pipelined on non-blocking sockets driven by one
 * I/O thread per client.
 * A request is one or more commands in RESP form for one peer (a server, or a cluster
 * node: crd__pool), with the caller's deadline. It is queued on its peer, written with
 * whatever else is queued there in one write on one of the peer's links (at most
 * opts.links_per_node, default 2), and its replies are matched in order. The caller either
 * waits for it (crd__engine_call: a blocking thread, bounded by the deadline) or gives a
 * completion (crd__engine_submit with on_done: runs on the I/O thread, never under the
 * engine's mutex).
 *
 * What a late reply becomes: a request whose caller stopped waiting (its deadline passed)
 * after it was written stays in its link's reply queue, "abandoned"; when its reply comes
 * the engine calls its on_late (an acquire's: give the hold back if it was taken,
 * undo.c); when its link dies first, on_late runs with CRD_IO (outcome unknown: undo.c
 * reads the field back once the node answers). A link that has had no reply for
 * command_timeout_ms is declared unhealthy: it takes no new request, and it stays open
 * only while an abandoned request on it still waits for its reply (a stalled server runs
 * what is in its socket buffer when it resumes: that reply must be seen).
 */
typedef struct crd__req crd__req;
typedef void (*crd__req_fn)(crd_client *c, crd__req *rq);

struct crd__req {
    crd__pool *peer;
    char *buf; /* the commands, RESP */
    size_t len, cap;
    int nreply, got;
    redisReply **replies; /* nreply entries; the inline array when nreply <= 2 */
    redisReply *inline_replies[2];
    int64_t deadline_ms; /* monotonic; 0: the command timeout from submission */
    int64_t sent_ms;     /* when its bytes went to a link (0: never) */
    crd_status st;       /* CRD_OK (replies in place), CRD_TIMEOUT, CRD_IO, CRD_AUTH */
    char why[240];       /* what failed, in words */
    uint64_t topo_gen;   /* the primary generation of the link that carried it */
    uint64_t want_gen;   /* Sentinel mode, with a WAIT: the primary generation it was built
                            for (the WAIT counts that primary's replicas). A link of another
                            generation does not take it: it fails CRD_IO, never sent
                            (sent_ms 0), and its caller builds it again. 0: any link */
    int64_t blocks_ms;   /* a WAIT in it may keep the server quiet this long (replica
                            sync): its link's health limit grows by as much */
    bool asked_replicas; /* engine use */
    /* Completion on the I/O thread (NULL: a waiting thread, crd__engine_call). The engine
     * frees the request after it returns; a callback that keeps a reply sets its slot
     * to NULL. */
    crd__req_fn on_done;
    /* A late reply (st CRD_OK) or the loss of its link (st CRD_IO) after the caller gave
     * up; runs on the I/O thread. */
    crd__req_fn on_late;
    /* The caller went away while it was written and unanswered (its reply now goes to
     * on_late): called with arg, under the engine's mutex; may take holds->mu only. */
    void (*on_abandon)(void *arg);
    void *arg;                 /* for on_late (and on_done when done_arg is NULL) */
    void *done_arg;            /* for on_done, when it needs its own */
    void (*arg_free)(void *);  /* frees arg with the request (NULL: not owned) */
    /* engine state, under the engine's mutex */
    int state;
    bool abandoned;
    bool retry;                /* async: wait through reconnects until the deadline */
    bool waited;               /* a thread waits for it (crd__engine_call/await) */
    atomic_int fin;            /* the waiting thread's wake-up word (a futex): 0 while it
                                  waits, 1 done (the thread takes it without the engine's
                                  mutex; the engine no longer touches it but to wake it),
                                  2 look (it was told early: decided under the mutex),
                                  3 look (its interrupt token was raised: intr) */
    atomic_int refs;           /* 1, and 1 more while a wake-up of its word is on its way:
                                  crd__req_free frees it when the last one lets go */
    bool notified;             /* its caller was told early (deadline, unhealthy link) */
    bool lent;                 /* on a link lent to its waiting thread (the direct path) */
    bool caller_left;          /* a waited-for request's caller left wait_for without it: the
                                  engine's now (until then its caller takes it, even one told
                                  early whose reply comes before the caller wakes) */
    bool link_answered;        /* when told early: its link had answered before (a known-good
                                  connection that went quiet, not one that never worked) */
    bool unsent;               /* failed CRD_TIMEOUT never written: its deadline passed in the
                                  queue while its peer's connection was being set up (not
                                  after a failed connect) */
    crd__req *next;            /* the peer's queue, or the link's reply queue */
    crd__req *done_next;       /* the completions list */
    struct crd__link *link;
    /* A waited-for request whose caller's interrupt token (crd_interrupt_bind) ends the
     * wait as its deadline would (CRD_INTERRUPTED; a late reply goes to on_late); NULL:
     * not interruptible. Such a request never takes the direct path (a blocking recv()
     * cannot be woken). */
    crd_interrupt *intr;
};

/* A request for peer with room for nreply replies; NULL when out of memory. */
crd__req *crd__req_new(crd__pool *peer, int nreply);
/* Appends one command (argv with lengths) in RESP; false when out of memory. */
bool crd__req_add(crd__req *rq, int argc, const char *const *argv, const size_t *lens);
void crd__req_free(crd__req *rq);

/* Marks rq as one a thread will wait for (crd__engine_await) once another submits it. */
void crd__engine_prepare_wait(crd__req *rq);

/* Starts the client's I/O thread (crd_client_new). */
crd_status crd__engine_start(crd_client *c);
/* Stops and joins it; every request still queued or waited for completes with
 * CRD_CLOSED. The peers stay allocated (crd__pool_free frees them). */
void crd__engine_stop(crd_client *c);
void crd__engine_free(crd_client *c);

/* Queues rq (its completion is on_done on the I/O thread). CRD_CLOSED when the client
 * is closing (rq is then freed). Any thread; never blocks on the network. */
crd_status crd__engine_submit(crd_client *c, crd__req *rq);
/* Holds back the I/O thread's wake-ups for what this thread submits (crd__engine_submit)
 * until the matching crd__engine_uncork, which writes the lot from this thread in one send
 * per link when the I/O thread sleeps in poll() (its poll then reads the replies), or
 * wakes it. The event loop's dispatch pass: the operations it steps submit one command
 * each, and go out together. Nests; never blocks on the network. */
void crd__engine_cork(crd_client *c);
void crd__engine_uncork(crd_client *c);
/* Queues rq and waits for it until its deadline (when the peer has nothing queued and an
 * idle link, the calling thread writes rq and reads its reply itself on that link, lent
 * to it by the I/O thread: the direct path; the outcome rules are the same). On CRD_OK
 * the replies are moved to out[0..nreply-1] (the caller frees them). On CRD_TIMEOUT or
 * CRD_IO *sent_ms says whether it was written (0: not: it never runs); *handed_over is
 * nonzero when the engine now owns its outcome (rq->on_late will see the late reply): the
 * caller must not read it back; 1 when its connection had answered before (Redis went
 * quiet), 2 when it never had; -1 when it was never written because its deadline passed
 * while it waited in the queue (no connection was ready in time). rq is always consumed. */
crd_status crd__engine_call(crd_client *c, crd__req *rq, redisReply **out, int64_t *sent_ms,
                            int *handed_over);
/* One command of argc words at pool p, as crd__engine_call runs it (deadline_ms 0: the
 * request's own default): its status, *out the reply (NULL unless CRD_OK; the caller frees
 * it). CRD_NO_MEMORY when the request cannot be built. */
crd_status crd__engine_call_argv(crd_client *c, crd__pool *p, int argc, const char *const *argv,
                                 const size_t *lens, int64_t deadline_ms, redisReply **out);
/* Submits rq (crd__engine_prepare_wait done) for the thread that will await it (the
 * hand-off): on an idle link it is written at once by the calling thread, and the link is
 * lent to the awaiting thread, which reads the reply itself (no I/O thread hop on either
 * side); otherwise as crd__engine_submit. Never blocks on the network. */
crd_status crd__engine_submit_lent(crd_client *c, crd__req *rq);
/* The same for a request some other thread submitted (the hand-off). */
crd_status crd__engine_await(crd_client *c, crd__req *rq, redisReply **out, int64_t *sent_ms,
                             int *handed_over);

/* The event loop's requests (acquire.c, loop.c): submitted without a waiting thread; the
 * completion writes the loop fd, and dispatch takes the answer. */
typedef struct crd__aio crd__aio;
/* Submits rq (its on_done is the engine's); NULL when refused (rq freed). tag is handed
 * back by crd__aio_take (e.g. "this was the EVAL"). */
crd__aio *crd__aio_submit(crd_client *c, crd__req *rq, bool tag);
/* Whether the answer came. */
bool crd__aio_ready(crd__aio *io);
/* (After crd__aio_ready) whether it was sent and got no answer by its deadline: 1 on a
 * connection that had answered before, 2 on one that never had; 0: not so. */
int crd__aio_unanswered(const crd__aio *io);
/* (After crd__aio_ready) whether it was never written because its deadline passed while
 * its peer's connection was being set up: nothing failed, the time ran out. */
bool crd__aio_unsent(const crd__aio *io);
/* (After crd__aio_ready) whether it was written and its connection closed under it (its
 * outcome went to rq->on_late: read back once the node answers). */
bool crd__aio_cut(const crd__aio *io);
/* The answer (after crd__aio_ready); frees io. CRD_OK: *reply (the caller frees it);
 * otherwise CRD_IO with the detail set (a lost link's outcome went to rq->on_late). */
crd_status crd__aio_take(crd_client *c, crd__aio *io, redisReply **reply, int64_t *sent_ms,
                         bool *tag);
/* The operation went away first: returns the reply if it had come (the caller frees it),
 * else NULL (the completion then gives the reply to rq->on_late, or drops it). */
redisReply *crd__aio_drop(crd__aio *io);

/* Fork: the prepare handler holds the engine's mutex; the child forgets the parent's
 * thread, sockets and requests (kept reachable, never touched) and starts afresh. */
void crd__engine_after_fork_child(crd_client *c);

/* Metrics the engine keeps (connections per peer). */
int crd__engine_links(crd_client *c);

#endif /* CRD_TRANSPORT_H */
