/*
 * conn.c -- one hiredis connection: open (timeouts, TLS handshake, AUTH, SELECT) to the
 * endpoint it is given, send a command in argv form with explicit lengths, pipelines,
 * tracing, and the fork child's abandonment of connections a parent thread may have
 * been using.
 *
 * The transport seam: hiredis opens the TCP (or unix) connection and parses replies;
 * bytes go out through crd__conn_send (send(MSG_NOSIGNAL), or SSL_write for TLS) and
 * come in through crd__conn_fill (hiredis's read, or SSL_read fed to the context's
 * reader). Nothing else in src/ reads or writes a socket.
 *
 * A connection that saw an I/O error is marked broken and is never used again (its
 * reply stream is out of step, or the outcome of what was sent is unknown). No lock is
 * taken here: a connection belongs to one thread at a time (the pool guarantees it).
 */
#include "transport.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct timeval tv_ms(int64_t ms)
{
    struct timeval tv;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
}

void crd__trace(crd_client *c, int argc, const char *const *argv, const size_t *lens,
                const redisReply *r, const char *io_error, bool subscriber)
{
    if (c->opts.on_trace == NULL)
        return;
    char text[1024];
    if (io_error != NULL)
        snprintf(text, sizeof text, "(io) %s", io_error);
    else
        crd__reply_render(r, text, sizeof text);
    crd_trace t = {argc, argv, lens, text, subscriber};
    c->opts.on_trace(c->opts.trace_user_data, &t);
}

static void reset(crd__conn *conn)
{
    conn->ctx = NULL;
    conn->ssl = NULL;
    conn->broken = false;
    conn->replied = false;
    conn->refused = false;
    conn->why[0] = '\0';
    conn->replicas_at = 0;
}

void crd__conn_close(crd__conn *conn)
{
    if (conn->ssl != NULL)
        crd__tls_free(conn->ssl);
    if (conn->ctx != NULL)
        redisFree(conn->ctx);
    reset(conn);
}

/* Contexts and TLS sessions given up in forked children, kept reachable (see
 * crd__conn_abandon). volatile: nothing reads the arrays, and without it the compiler
 * drops the stores (the objects then count as leaked in every fork child). Written only
 * by the fork child handler, which runs alone. */
static redisContext *volatile abandoned[256];
static SSL *volatile abandoned_ssl[256];
static size_t nabandoned;

void crd__conn_abandon(crd__conn *conn)
{
    redisContext *ctx = conn->ctx;
    SSL *ssl = conn->ssl;
    reset(conn);
    if (ctx == NULL)
        return;
    /* Closed, never written: no SSL_shutdown, no close_notify (the parent's session
     * goes on over the same TCP connection, and a parent thread may have been inside
     * OpenSSL on this object). */
    if (ctx->fd >= 0)
        close(ctx->fd);
    if (nabandoned < sizeof abandoned / sizeof abandoned[0]) {
        abandoned_ssl[nabandoned] = ssl;
        abandoned[nabandoned++] = ctx;
    }
}

/* Sets the context's error as hiredis would (errstr is a fixed 128-byte array; the
 * whole text stays in conn->why). */
static void set_error(crd__conn *conn, int type, const char *why)
{
    redisContext *ctx = conn->ctx;
    ctx->err = type;
    size_t n = strlen(why);
    if (n >= sizeof ctx->errstr)
        n = sizeof ctx->errstr - 1;
    memcpy(ctx->errstr, why, n);
    ctx->errstr[n] = '\0';
    if (why != conn->why)
        snprintf(conn->why, sizeof conn->why, "%s", why);
}

int crd__conn_fill(crd__conn *conn)
{
    redisContext *ctx = conn->ctx;
    if (conn->ssl == NULL)
        return redisBufferRead(ctx);
    char buf[16384];
    int n;
    do {
        n = crd__tls_read(conn->ssl, buf, sizeof buf, conn->why, sizeof conn->why,
                          &conn->refused);
        if (n < 0) {
            set_error(conn, conn->refused ? REDIS_ERR_OTHER : REDIS_ERR_IO, conn->why);
            return REDIS_ERR;
        }
        if (n > 0 && redisReaderFeed(ctx->reader, buf, (size_t)n) != REDIS_OK) {
            set_error(conn, ctx->reader->err, ctx->reader->errstr);
            return REDIS_ERR;
        }
        /* SSL_read returns one record at most: take every decrypted byte now, so that
         * a caller that poll()s next does not wait for data already here. */
    } while (n > 0 && crd__tls_pending(conn->ssl));
    return REDIS_OK;
}

bool crd__conn_buffered(const crd__conn *conn)
{
    return conn->ssl != NULL && crd__tls_pending(conn->ssl);
}

/* Reads until one reply is complete (hiredis's redisGetReply without its write half:
 * our commands never go through its output buffer). */
static int read_reply(crd__conn *conn, void **out)
{
    *out = NULL;
    for (;;) {
        if (redisGetReplyFromReader(conn->ctx, out) != REDIS_OK)
            return REDIS_ERR;
        if (*out != NULL) {
            conn->replied = true;
            return REDIS_OK;
        }
        if (crd__conn_fill(conn) != REDIS_OK)
            return REDIS_ERR;
    }
}

int crd__conn_read(crd__conn *conn, redisReply **out)
{
    void *r = NULL;
    int rc = read_reply(conn, &r);
    *out = r;
    return rc;
}

/* A setup command (AUTH, SELECT, PING) on a fresh connection. */
static crd_status setup_cmd(crd_client *c, crd__conn *conn, int argc, const char **argv,
                            crd_status refused, const char *what)
{
    size_t lens[4];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    redisReply *r = NULL;
    crd_status st = crd__conn_command(c, conn, argc, argv, lens, &r);
    /* CRD_OK always comes with a reply; "r == NULL" is for clang's analyzer, which loses
     * that on crd__conn_reply's io_fail path and reports a NULL dereference below. */
    if (st != CRD_OK || r == NULL)
        return st;
    if (r->type == REDIS_REPLY_ERROR) {
        /* Credentials refused -> CRD_AUTH; anything else (a full server answering every
         * command with an error, ...) is the server's own failure. */
        bool auth = strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "WRONGPASS", 9) == 0 ||
                    strstr(r->str, "password") != NULL || strstr(r->str, "AUTH") != NULL;
        st = crd__fail(c, auth ? CRD_AUTH : refused, "%s refused: %.*s", what, (int)r->len, r->str);
        freeReplyObject(r);
        return st;
    }
    freeReplyObject(r);
    return CRD_OK;
}

crd_status crd__conn_open(crd_client *c, const crd__endpoint *ep, crd__conn *conn)
{
    struct timeval ctv = tv_ms(c->opts.connect_timeout_ms);
    int64_t deadline = crd__now_ms() + c->opts.connect_timeout_ms;
    redisContext *ctx;
    reset(conn);
    if (ep->unix_path != NULL)
        ctx = redisConnectUnixWithTimeout(ep->unix_path, ctv);
    else
        ctx = redisConnectWithTimeout(ep->host, ep->port, ctv);
    if (ctx == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a connection");
    /* Owned by conn from now on (a fork child finds it there, not on our stack). */
    conn->ctx = ctx;
    if (ctx->err) {
        conn->ctx = NULL;
        CRD__COUNT(c, connection_failures);
        crd_status st;
        if (ep->unix_path != NULL)
            st = crd__fail(c, CRD_IO, "cannot connect to unix:%s: %s", ep->unix_path, ctx->errstr);
        else
            st = crd__fail(c, CRD_IO, "cannot connect to %s:%d: %s", ep->host, ep->port,
                           ctx->errstr);
        redisFree(ctx);
        crd__log(c, CRD_LOG_WARN, "%s", crd_client_errmsg(c));
        return st;
    }
    redisSetTimeout(ctx, tv_ms(c->opts.command_timeout_ms));
    if (ep->unix_path == NULL)
        redisEnableKeepAlive(ctx);
    if (c->tls != NULL && ep->unix_path == NULL) {
        /* One deadline for the TCP connect and the handshake together. */
        char err[300];
        /* The configured name, or (sentinel mode) the host of this connection. */
        const char *name = c->tls_name != NULL ? c->tls_name : ep->host;
        crd_status hs = crd__tls_connect(c->tls, ctx->fd, name, c->tls_verify,
                                         deadline, &conn->ssl, err, sizeof err);
        if (hs != CRD_OK) {
            CRD__COUNT(c, connection_failures);
            crd__conn_close(conn);
            hs = crd__fail(c, hs, "cannot connect to %s:%d: %s", ep->host, ep->port, err);
            crd__log(c, CRD_LOG_WARN, "%s", crd_client_errmsg(c));
            return hs;
        }
    }
    CRD__COUNT(c, connects);
    crd_status st = CRD_OK;
    if (ep->password != NULL) {
        const char *argv[3] = {"AUTH", ep->username, ep->password};
        if (ep->username != NULL)
            st = setup_cmd(c, conn, 3, argv, CRD_SERVER, "AUTH");
        else {
            argv[1] = ep->password;
            st = setup_cmd(c, conn, 2, argv, CRD_SERVER, "AUTH");
        }
    }
    if (st == CRD_OK && ep->db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", ep->db);
        const char *argv[2] = {"SELECT", db};
        st = setup_cmd(c, conn, 2, argv, CRD_AUTH, "SELECT");
    }
    if (st != CRD_OK)
        crd__conn_close(conn);
    return st;
}

/* why_sent: the reason a send failed, or NULL to take hiredis's (a read failed). */
static crd_status io_fail(crd_client *c, crd__conn *conn, int argc, const char **argv,
                          const size_t *lens, const char *why_sent)
{
    const char *why = conn->ctx->errstr[0] ? conn->ctx->errstr : "connection failed";
    if (conn->ssl != NULL && conn->why[0] != '\0')
        why = conn->why;
    if (conn->ssl == NULL && conn->ctx->err == REDIS_ERR_IO &&
        (errno == EAGAIN || errno == EWOULDBLOCK))
        why = "command timed out";
    if (why_sent != NULL)
        why = why_sent;
    /* A TLS-only port reads our plaintext as a broken handshake and hangs up before any
     * reply: say so, or the caller sees only "connection closed". */
    const char *hint = "";
    if (conn->ssl == NULL && !conn->replied && c->ep.unix_path == NULL &&
        (conn->ctx->err == REDIS_ERR_EOF || strstr(why, "reset") != NULL ||
         strstr(why, "closed") != NULL))
        hint = " before its first reply (if the server accepts only TLS, use rediss://)";
    bool refused = conn->refused;
    if (conn->ssl != NULL && !conn->replied && crd__tls_cert_requested(conn->ssl)) {
        hint = " before its first reply: the server asked for a client certificate and none "
               "is configured (a client certificate is required? set tls_cert_file and "
               "tls_key_file)";
        refused = true;
    }
    crd_status st = crd__fail(c, refused ? CRD_AUTH : CRD_IO, "%s: %s%s",
                              argc > 0 ? argv[0] : "command", why, hint);
    crd__trace(c, argc, argv, lens, NULL, why, false);
    conn->broken = true;
    CRD__COUNT(c, connection_failures);
    crd__log(c, CRD_LOG_WARN, "connection dropped after %.*s: %s (it is reopened on next use)",
             argc > 0 ? (int)lens[0] : 7, argc > 0 ? argv[0] : "command", why);
    return st;
}

/* Writes all of buf with send(MSG_NOSIGNAL) (SSL_write over a BIO that does the same).
 * hiredis 0.14 writes with write(), and a write to a connection the server has closed
 * would raise SIGPIPE, whose default action kills the whole process: a library must not
 * do that to its caller. */
bool crd__conn_send(crd__conn *conn, const char *buf, size_t len, const char **why)
{
    if (conn->ssl != NULL)
        return crd__tls_write(conn->ssl, buf, len, why);
    while (len > 0) {
        ssize_t n = send(conn->ctx->fd, buf, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                *why = "command timed out (sending)";
            else if (errno == EPIPE || errno == ECONNRESET)
                *why = "connection closed by the server";
            else
                *why = "sending failed";
            return false;
        }
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

/* Encodes argv as one RESP command. hiredis's own formatter builds it piece by piece with
 * printf-style appends; on the lock/unlock hot path that was half of the client's CPU.
 * Returns the encoded length, or 0 when it does not fit in cap. */
static size_t encode_command(char *buf, size_t cap, int argc, const char *const *argv,
                             const size_t *lens)
{
    size_t need = 1 + 20 + 2;
    for (int i = 0; i < argc; i++)
        need += 1 + 20 + 2 + lens[i] + 2;
    if (need > cap)
        return 0;
    char *p = buf;
    *p++ = '*';
    p = crd__put_u64(p, (uint64_t)argc);
    *p++ = '\r';
    *p++ = '\n';
    for (int i = 0; i < argc; i++) {
        *p++ = '$';
        p = crd__put_u64(p, lens[i]);
        *p++ = '\r';
        *p++ = '\n';
        memcpy(p, argv[i], lens[i]);
        p += lens[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    return (size_t)(p - buf);
}

bool crd__resp_append(char **p, size_t *len, size_t *cap, int argc, const char *const *argv,
                      const size_t *lens)
{
    size_t need = 1 + 20 + 2;
    for (int i = 0; i < argc; i++)
        need += 1 + 20 + 2 + lens[i] + 2;
    if (*cap - *len < need) {
        size_t ncap = *cap * 2 > *len + need ? *cap * 2 : *len + need;
        char *np = realloc(*p, ncap);
        if (np == NULL)
            return false;
        *p = np;
        *cap = ncap;
    }
    *len += encode_command(*p + *len, *cap - *len, argc, argv, lens);
    return true;
}

crd_status crd__conn_command(crd_client *c, crd__conn *conn, int argc, const char **argv,
                             const size_t *lens, redisReply **reply)
{
    *reply = NULL;
    if (conn->ctx == NULL || conn->broken)
        return crd__fail(c, CRD_IO, "connection is not open");
    char stack[2048];
    char *buf = stack;
    size_t n = encode_command(stack, sizeof stack, argc, argv, lens);
    if (n == 0) { /* large: an EVAL carrying a script's text */
        size_t cap = 32;
        for (int i = 0; i < argc; i++)
            cap += 24 + 2 + lens[i] + 2;
        buf = malloc(cap);
        if (buf == NULL)
            return crd__fail(c, CRD_NO_MEMORY, "cannot encode a %zu-argument command",
                             (size_t)argc);
        n = encode_command(buf, cap, argc, argv, lens);
    }
    const char *why = NULL;
    bool sent = crd__conn_send(conn, buf, n, &why);
    if (buf != stack)
        free(buf);
    return crd__conn_reply(c, conn, argc, argv, lens, sent, why, reply);
}

crd_status crd__conn_reply(crd_client *c, crd__conn *conn, int argc, const char **argv,
                           const size_t *lens, bool sent, const char *why, redisReply **reply)
{
    *reply = NULL;
    redisReply *r = NULL;
    void *out = NULL;
    if (sent && read_reply(conn, &out) == REDIS_OK)
        r = out;
    if (r == NULL)
        return io_fail(c, conn, argc, argv, lens, why);
    crd__trace(c, argc, argv, lens, r, NULL, false);
    *reply = r;
    return CRD_OK;
}

crd_status crd__conn_pipeline(crd_client *c, crd__conn *conn, int ncmd, const int *argcs,
                              const char *const *const *argvs,
                              const size_t *const *lens, redisReply **replies)
{
    for (int i = 0; i < ncmd; i++)
        replies[i] = NULL;
    if (conn->ctx == NULL || conn->broken)
        return crd__fail(c, CRD_IO, "connection is not open");
    if (ncmd <= 0)
        return CRD_OK;
    /* Every command of the pipeline in one buffer, sent with one send(). */
    size_t cap = 0;
    for (int i = 0; i < ncmd; i++) {
        cap += 32;
        for (int j = 0; j < argcs[i]; j++)
            cap += 24 + 2 + lens[i][j] + 2;
    }
    char *buf = malloc(cap);
    if (buf == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot encode a pipeline of %d commands", ncmd);
    buf[0] = '\0'; /* written below; this only tells the compiler so */
    size_t used = 0;
    for (int i = 0; i < ncmd; i++)
        used += encode_command(buf + used, cap - used, argcs[i], argvs[i], lens[i]);
    const char *why = NULL;
    bool sent = crd__conn_send(conn, buf, used, &why);
    free(buf);
    if (!sent)
        return io_fail(c, conn, argcs[0], (const char **)argvs[0], lens[0], why);
    for (int i = 0; i < ncmd; i++) {
        void *r = NULL;
        if (read_reply(conn, &r) != REDIS_OK || r == NULL) {
            for (int j = 0; j < i; j++) {
                freeReplyObject(replies[j]);
                replies[j] = NULL;
            }
            return io_fail(c, conn, argcs[i], (const char **)argvs[i], lens[i], NULL);
        }
        replies[i] = r;
        crd__trace(c, argcs[i], argvs[i], lens[i], r, NULL, false);
    }
    return CRD_OK;
}

