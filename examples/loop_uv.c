/* loop_uv.c -- a libuv TCP server that takes a distributed lock per request without
 * blocking its loop (credisson's event-loop API).
 * Usage: example_loop_uv [redis://host:port] [listen-port]   (default 7000; 0 = any)
 *
 * Each line a client sends names a lock. The server takes that lock (Redisson's
 * getLock(NAME): Java services wait for it too), answers "locked NAME", gives the lock
 * back, answers "released NAME". While one request waits for a lock another process
 * holds, the loop goes on serving the others: the waiting is the library's, on the
 * loop's thread, with no thread per request. On SIGTERM or SIGINT it stops accepting,
 * cancels the acquires still waiting, lets the releases in flight end, closes every
 * handle, frees the client and exits 0 (a second signal meanwhile kills it).
 *
 * The adapter is <credisson/libuv.h> (installed with the library): credisson's fd in a
 * uv_poll_t, its timeout in a uv_timer_t, and crd_loop_dispatch() whenever either fires;
 * crd_loop_dispatch() never waits on the network (the client's I/O thread does). */
#define _DEFAULT_SOURCE /* POSIX 2008 for the loop libraries' headers, clock_gettime */
#include <credisson.h>
#include <credisson/libuv.h> /* the adapter: one call attaches the client to the loop */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "example.h" /* connect_client, report_failure */

/* ---- the server ----------------------------------------------------------------------- */

static crd_uv ADAPTER;
static uv_tcp_t SERVER;
static uv_signal_t SIGNALS[2]; /* SIGTERM, SIGINT */
static bool STOPPING;

typedef struct conn {
    uv_tcp_t tcp;
    char line[256];
    size_t len;
    uint64_t owner; /* one owner id per connection: its requests are its own holds */
} conn;

typedef struct request {
    conn *c;
    crd_lock *lock;
    crd_op *acquire;             /* while the acquire is pending: for crd_op_cancel */
    struct request *prev, *next; /* in REQUESTS */
} request;

static request *REQUESTS; /* every request whose last callback has not run yet */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = malloc(suggested);
    buf->len = buf->base ? suggested : 0;
}

static void on_written(uv_write_t *w, int status)
{
    (void)status;
    free(w->data);
    free(w);
}

static void reply(conn *c, const char *what, const char *name)
{
    uv_write_t *w = malloc(sizeof *w);
    char *text = malloc(strlen(what) + strlen(name) + 3);
    if (w == NULL || text == NULL) {
        free(w);
        free(text);
        return;
    }
    sprintf(text, "%s %s\n", what, name);
    uv_buf_t b = uv_buf_init(text, (unsigned)strlen(text));
    w->data = text;
    uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
}

static void on_closed(uv_handle_t *h) { free(h->data); }

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, on_closed);
}

/* Stopping and no request left: with every handle closed, uv_run returns. The listener
 * and the signals are closed already, so the walk closes (and frees) the connections. */
static void finish(void)
{
    crd_uv_detach(&ADAPTER);
    uv_walk(SERVER.loop, close_handle, NULL);
}

/* A request's last callback has run: it leaves REQUESTS (the last one, once stopping,
 * lets the loop end). */
static void request_end(request *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        REQUESTS = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    crd_lock_free(r->lock);
    free(r);
    if (STOPPING && REQUESTS == NULL)
        finish();
}

static void on_released(void *user, crd_op *op, crd_status st)
{
    request *r = user;
    const char *name = crd_lock_name(crd_op_lock(op), NULL);
    reply(r->c, st == CRD_OK ? "released" : crd_strerror(st), name);
    request_end(r);
}

static void on_acquired(void *user, crd_op *op, crd_status st)
{
    request *r = user;
    const char *name = crd_lock_name(crd_op_lock(op), NULL);
    r->acquire = NULL;  /* op ends when this callback returns */
    if (st != CRD_OK) { /* CRD_CANCELLED when stopping */
        reply(r->c, crd_strerror(st), name);
        request_end(r);
        return;
    }
    reply(r->c, "locked", name);
    /* ... the work under the lock would go here ... */
    if (crd_lock_release_async(r->lock, crd_op_owner(op), on_released, r, NULL) != CRD_OK) {
        reply(r->c, crd_client_errmsg(ADAPTER.client), name);
        request_end(r);
    }
}

static void start_request(conn *c, const char *name)
{
    if (STOPPING) {
        reply(c, "stopping", name);
        return;
    }
    request *r = calloc(1, sizeof *r);
    if (r == NULL || crd_lock_new(ADAPTER.client, name, &r->lock) != CRD_OK) {
        reply(c, "bad lock name", name);
        free(r);
        return;
    }
    r->c = c;
    if (crd_lock_acquire_async(r->lock, c->owner, 30000, 10000, on_acquired, r, &r->acquire) !=
        CRD_OK) {
        reply(c, crd_client_errmsg(ADAPTER.client), name);
        crd_lock_free(r->lock);
        free(r);
        return;
    }
    r->next = REQUESTS;
    if (REQUESTS != NULL)
        REQUESTS->prev = r;
    REQUESTS = r;
    crd_uv_dispatch(&ADAPTER); /* new operations: run what can progress now */
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    conn *c = s->data;
    for (ssize_t i = 0; i < n; i++) {
        char ch = buf->base[i];
        if (ch == '\n') {
            c->line[c->len] = '\0';
            if (c->len > 0)
                start_request(c, c->line);
            c->len = 0;
        } else if (ch != '\r' && c->len + 1 < sizeof c->line) {
            c->line[c->len++] = ch;
        }
    }
    free(buf->base);
    /* A closed connection's requests still finish; their replies then fail quietly.
     * (A real server would cancel them with crd_op_cancel.) */
    if (n < 0)
        uv_read_stop(s);
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return;
    uv_tcp_init(server->loop, &c->tcp);
    c->tcp.data = c;
    c->owner = crd_owner_new();
    if (uv_accept(server, (uv_stream_t *)&c->tcp) == 0)
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    else
        uv_close((uv_handle_t *)&c->tcp, on_closed);
}

/* SIGTERM or SIGINT: accept no more connections and no more requests, cancel the
 * acquires still waiting (one that has just succeeded gives its lock back as usual), and
 * finish once every request has ended. Closing the signal handles gives the signals back
 * their default action, so a second one ends the process at once. */
static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    (void)signum;
    STOPPING = true;
    for (int i = 0; i < 2; i++)
        uv_close((uv_handle_t *)&SIGNALS[i], NULL);
    uv_close((uv_handle_t *)&SERVER, NULL);
    for (request *r = REQUESTS; r != NULL; r = r->next)
        if (r->acquire != NULL)
            crd_op_cancel(r->acquire);
    if (REQUESTS == NULL)
        finish();
}

int main(int argc, char **argv)
{
    int port = argc > 2 ? atoi(argv[2]) : 7000;
    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    uv_loop_t *loop = uv_default_loop();
    if (crd_uv_attach(&ADAPTER, loop, client) != 0) {
        fprintf(stderr, "credisson's loop fd: %s\n", crd_client_errmsg(client));
        return 1;
    }
    const int signums[2] = {SIGTERM, SIGINT};
    for (int i = 0; i < 2; i++) {
        uv_signal_init(loop, &SIGNALS[i]);
        uv_signal_start(&SIGNALS[i], on_signal, signums[i]);
    }
    struct sockaddr_in addr;
    uv_tcp_init(loop, &SERVER);
    uv_ip4_addr("127.0.0.1", port, &addr);
    if (uv_tcp_bind(&SERVER, (const struct sockaddr *)&addr, 0) != 0 ||
        uv_listen((uv_stream_t *)&SERVER, 128, on_connection) != 0) {
        fprintf(stderr, "cannot listen on port %d\n", port);
        return 1;
    }
    struct sockaddr_in bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&SERVER, (struct sockaddr *)&bound, &blen);
    printf("listening on 127.0.0.1:%d\n", ntohs(bound.sin_port));
    fflush(stdout);
    uv_run(loop, UV_RUN_DEFAULT); /* until finish() has closed the last handle */
    crd_client_free(client);
    return uv_loop_close(loop) == 0 ? 0 : 1;
}
