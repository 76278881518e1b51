/* loop_uv.c -- a libuv TCP server that takes a distributed lock per request without
 * blocking its loop (credisson's event-loop API).
 * Usage: example_loop_uv [redis://host:port] [listen-port]   (default 7000; 0 = any)
 *
 * Each line a client sends names a lock. The server takes that lock (Redisson's
 * getLock(NAME): Java services wait for it too), answers "locked NAME", gives the lock
 * back, answers "released NAME". While one request waits for a lock another process
 * holds, the loop goes on serving the others: the waiting is the library's, on the
 * loop's thread, with no thread per request.
 *
 * The adapter is <credisson/libuv.h> (installed with the library): credisson's fd in a
 * uv_poll_t, its timeout in a uv_timer_t, and crd_loop_dispatch() whenever either fires;
 * crd_loop_dispatch() never waits on the network (the client's I/O thread does). */
#define _DEFAULT_SOURCE /* POSIX 2008 for the loop libraries' headers, clock_gettime */
#include <credisson.h>
#include <credisson/libuv.h> /* the adapter: one call attaches the client to the loop */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "example.h" /* connect_client, report_failure */

/* ---- the server ----------------------------------------------------------------------- */

static crd_uv ADAPTER;

typedef struct conn {
    uv_tcp_t tcp;
    char line[256];
    size_t len;
    uint64_t owner; /* one owner id per connection: its requests are its own holds */
} conn;

typedef struct request {
    conn *c;
    crd_lock *lock;
} request;

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

static void on_released(void *user, crd_op *op, crd_status st)
{
    request *r = user;
    const char *name = crd_lock_name(crd_op_lock(op), NULL);
    reply(r->c, st == CRD_OK ? "released" : crd_strerror(st), name);
    crd_lock_free(r->lock);
    free(r);
}

static void on_acquired(void *user, crd_op *op, crd_status st)
{
    request *r = user;
    const char *name = crd_lock_name(crd_op_lock(op), NULL);
    if (st != CRD_OK) {
        reply(r->c, crd_strerror(st), name);
        crd_lock_free(r->lock);
        free(r);
        return;
    }
    reply(r->c, "locked", name);
    /* ... the work under the lock would go here ... */
    crd_lock_release_async(r->lock, crd_op_owner(op), on_released, r, NULL);
}

static void start_request(conn *c, const char *name)
{
    request *r = calloc(1, sizeof *r);
    if (r == NULL || crd_lock_new(ADAPTER.client, name, &r->lock) != CRD_OK) {
        reply(c, "bad lock name", name);
        free(r);
        return;
    }
    r->c = c;
    if (crd_lock_acquire_async(r->lock, c->owner, 30000, 10000, on_acquired, r, NULL) != CRD_OK) {
        reply(c, crd_client_errmsg(ADAPTER.client), name);
        crd_lock_free(r->lock);
        free(r);
        return;
    }
    crd_uv_dispatch(&ADAPTER); /* new operations: run what can progress now */
}

static void on_closed(uv_handle_t *h) { free(h->data); }

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
    uv_tcp_t server;
    struct sockaddr_in addr;
    uv_tcp_init(loop, &server);
    uv_ip4_addr("127.0.0.1", port, &addr);
    if (uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0) != 0 ||
        uv_listen((uv_stream_t *)&server, 128, on_connection) != 0) {
        fprintf(stderr, "cannot listen on port %d\n", port);
        return 1;
    }
    struct sockaddr_in bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &blen);
    printf("listening on 127.0.0.1:%d\n", ntohs(bound.sin_port));
    fflush(stdout);
    return uv_run(loop, UV_RUN_DEFAULT);
}
