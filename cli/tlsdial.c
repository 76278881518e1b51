/*
 * tlsdial.c -- a raw probe connection over TLS for doctor and verify. Debian 12's hiredis
 * 0.14 has no TLS, so the probe's hiredis context gets one end of a socketpair
 * (redisConnectFd) and a detached thread relays the other end through an OpenSSL session
 * with the server: hiredis stays the RESP parser, OpenSSL does the TLS, as in the library
 * (src/transport/tls.c). The certificate checks are the library's: the system's CAs or
 * --cacert/--cacertdir, the name of --sni or the URL's host, --cert/--key for mutual TLS,
 * --insecure for tests only.
 *
 * The relay ends when either side closes: redisFree() of the probe's context closes its end,
 * the thread sees end of file, shuts the session down and frees what it owns. One
 * thread (a 256 KiB stack) per connection; the probes open a handful.
 */
#include "probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

typedef struct relay {
    SSL_CTX *ctx;
    SSL *ssl;
    int net;   /* the TCP connection to the server */
    int plain; /* the relay's end of the socketpair */
} relay;

static void relay_free(relay *r)
{
    SSL_free(r->ssl); /* both do nothing with NULL */
    SSL_CTX_free(r->ctx);
    if (r->net >= 0)
        close(r->net);
    if (r->plain >= 0)
        close(r->plain);
    free(r);
}

static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Waits until the server's socket can do what OpenSSL asked for (after a WANT_READ or a
 * WANT_WRITE); false for any other error. */
static bool ssl_retry(relay *r, int rc)
{
    int e = SSL_get_error(r->ssl, rc);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
        return false;
    struct pollfd p = {r->net, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, 0};
    return poll(&p, 1, -1) >= 0 || errno == EINTR;
}

/* Bytes both ways until a side closes or fails. The server's socket does not block: a
 * record that is not whole yet, or a post-handshake message (TLS 1.3's session tickets),
 * is WANT_READ and the loop polls again; SSL_pending covers what OpenSSL already holds. */
static void *relay_main(void *arg)
{
    relay *r = arg;
    char buf[16384];
    for (;;) {
        struct pollfd p[2] = {{r->plain, POLLIN, 0}, {r->net, POLLIN, 0}};
        if (SSL_pending(r->ssl) == 0 && poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (SSL_pending(r->ssl) > 0 || (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            int n = SSL_read(r->ssl, buf, sizeof buf);
            if (n > 0 && !write_all(r->plain, buf, (size_t)n))
                break;
            if (n <= 0 && SSL_get_error(r->ssl, n) != SSL_ERROR_WANT_READ &&
                SSL_get_error(r->ssl, n) != SSL_ERROR_WANT_WRITE)
                break;
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(r->plain, buf, sizeof buf);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            int w;
            while ((w = SSL_write(r->ssl, buf, (int)n)) <= 0 && ssl_retry(r, w))
                ;
            if (w != (int)n)
                break;
        }
    }
    SSL_shutdown(r->ssl);
    relay_free(r);
    return NULL;
}

/* The connect of fd to ai within timeout_ms: 0, or an errno (ETIMEDOUT when it ran out). */
static int connect_within(int fd, const struct addrinfo *ai, int64_t timeout_ms)
{
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return errno;
    struct pollfd p = {fd, POLLOUT, 0};
    int n;
    do
        n = poll(&p, 1, (int)timeout_ms);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        return ETIMEDOUT;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
        return errno;
    return soerr;
}

/* A blocking TCP connection to host:port made within timeout_ms, or -1 with err. */
static int tcp_connect(const char *host, int port, int64_t timeout_ms, char *err, size_t cap,
                       bool *timed_out)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        snprintf(err, cap, "cannot connect to %s:%d: %s", host, port, gai_strerror(rc));
        return -1;
    }
    int fd = -1, why = EADDRNOTAVAIL;
    for (const struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            why = errno;
            continue;
        }
        why = connect_within(fd, ai, timeout_ms);
        if (why != 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        *timed_out = why == ETIMEDOUT;
        snprintf(err, cap, "cannot connect to %s:%d: %s", host, port,
                 why == ETIMEDOUT ? "connection timed out" : strerror(why));
    }
    return fd;
}

/* The first OpenSSL error (or the verification's), for a message. */
static const char *tls_reason(const SSL *ssl, char *buf, size_t cap)
{
    long v = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
    if (v != X509_V_OK) {
        snprintf(buf, cap, "certificate verify failed: %s", X509_verify_cert_error_string(v));
        return buf;
    }
    unsigned long e = ERR_get_error();
    if (e == 0)
        return "the server closed the connection during the TLS handshake";
    ERR_error_string_n(e, buf, cap);
    return buf;
}

/* The session's context: the CAs to trust, the client certificate, verification on
 * unless --insecure. NULL with err. */
static SSL_CTX *make_ctx(const global_opts *g, char *err, size_t cap)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    char why[256];
    if (ctx == NULL) {
        snprintf(err, cap, "TLS: %s", tls_reason(NULL, why, sizeof why));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    bool ok = true;
    if (g->cacert != NULL || g->cacertdir != NULL)
        ok = SSL_CTX_load_verify_locations(ctx, g->cacert, g->cacertdir) == 1;
    else
        ok = SSL_CTX_set_default_verify_paths(ctx) == 1;
    if (ok && g->cert != NULL)
        ok = SSL_CTX_use_certificate_chain_file(ctx, g->cert) == 1 &&
             SSL_CTX_use_PrivateKey_file(ctx, g->key != NULL ? g->key : g->cert,
                                         SSL_FILETYPE_PEM) == 1;
    if (!ok) {
        snprintf(err, cap, "TLS: cannot load the certificates: %s",
                 tls_reason(NULL, why, sizeof why));
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, g->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    return ctx;
}

int probe_tls_dial(const global_opts *g, const char *host, int port, int64_t timeout_ms,
                   char *err, size_t cap, bool *timed_out)
{
    static const global_opts none = {0};
    if (g == NULL)
        g = &none;
    relay *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    r->net = r->plain = -1;
    int pair[2] = {-1, -1};
    r->ctx = make_ctx(g, err, cap);
    if (r->ctx == NULL)
        goto fail;
    r->net = tcp_connect(host, port, timeout_ms, err, cap, timed_out);
    if (r->net < 0)
        goto fail;
    /* The handshake has the connect's deadline too. */
    struct timeval tv = {(time_t)(timeout_ms / 1000), (long)(timeout_ms % 1000) * 1000};
    setsockopt(r->net, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(r->net, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const char *name = g->sni != NULL ? g->sni : host;
    r->ssl = SSL_new(r->ctx);
    char why[256];
    /* SNI carries host names only (RFC 6066); an address is checked against the
     * certificate's IP subjectAltNames (as the library does). */
    unsigned char addr[16];
    bool ip = inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
    X509_VERIFY_PARAM *param = r->ssl != NULL ? SSL_get0_param(r->ssl) : NULL;
    if (r->ssl == NULL || SSL_set_fd(r->ssl, r->net) != 1 ||
        (!ip && SSL_set_tlsext_host_name(r->ssl, name) != 1) ||
        (!g->insecure && (ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name)
                             : X509_VERIFY_PARAM_set1_host(param, name, 0)) != 1)) {
        snprintf(err, cap, "TLS: %s", tls_reason(NULL, why, sizeof why));
        goto fail;
    }
    errno = 0;
    if (SSL_connect(r->ssl) != 1) {
        *timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
        snprintf(err, cap, "TLS handshake with %s:%d failed: %s", host, port,
                 *timed_out ? "no answer in time" : tls_reason(r->ssl, why, sizeof why));
        goto fail;
    }
    /* From here the relay polls: the server's socket does not block. */
    if (fcntl(r->net, F_SETFL, fcntl(r->net, F_GETFL) | O_NONBLOCK) != 0) {
        snprintf(err, cap, "fcntl: %s", strerror(errno));
        goto fail;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        snprintf(err, cap, "socketpair: %s", strerror(errno));
        goto fail;
    }
    r->plain = pair[1];
    pthread_attr_t attr;
    pthread_t th;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int rc = pthread_create(&th, &attr, relay_main, r);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        snprintf(err, cap, "cannot start the TLS relay: %s", strerror(rc));
        goto fail;
    }
    return pair[0];
fail:
    if (pair[0] >= 0)
        close(pair[0]);
    relay_free(r);
    return -1;
}
