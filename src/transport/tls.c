/*
 * tls.c -- TLS over a connected socket, with OpenSSL: the client's context (CA, client
 * certificate and key, loaded once), the handshake on a connection hiredis opened
 * (bounded by a deadline), reads and writes, and every TLS failure put into words.
 *
 * hiredis (0.14 on Debian 12, no TLS) stays the RESP parser: conn.c feeds what
 * crd__tls_read returns into the context's reader. The SSL object talks to the socket
 * through a BIO of our own that uses send(MSG_NOSIGNAL) and recv(): OpenSSL's socket BIO
 * writes with write(), and a write to a connection the server closed would raise
 * SIGPIPE, which kills the caller's process.
 *
 * No lock of its own. An SSL_CTX is shared by the client's threads (OpenSSL locks it
 * internally); an SSL belongs to its connection's one thread at a time. No key material
 * ever reaches a message: only file names and OpenSSL's reason strings.
 */
#include "transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* ---- the socket BIO ------------------------------------------------------------------- */

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static int bio_fd(BIO *b) { return (int)(intptr_t)BIO_get_data(b); }

static int bio_write(BIO *b, const char *buf, int len)
{
    BIO_clear_retry_flags(b);
    ssize_t n;
    do
        n = send(bio_fd(b), buf, (size_t)len, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_write(b);
    return (int)n;
}

static int bio_read(BIO *b, char *buf, int len)
{
    BIO_clear_retry_flags(b);
    ssize_t n;
    do
        n = recv(bio_fd(b), buf, (size_t)len, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_read(b);
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

/* The descriptor belongs to the hiredis context, which closes it. */
static int bio_destroy(BIO *b)
{
    (void)b;
    return 1;
}

static void bio_method_init(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "credisson socket");
    if (m == NULL)
        return;
    if (!BIO_meth_set_write(m, bio_write) || !BIO_meth_set_read(m, bio_read) ||
        !BIO_meth_set_ctrl(m, bio_ctrl) || !BIO_meth_set_create(m, bio_create) ||
        !BIO_meth_set_destroy(m, bio_destroy)) {
        BIO_meth_free(m);
        return;
    }
    bio_method = m;
}

/* ---- error words ------------------------------------------------------------------------ */

/* OpenSSL's reason for the most recent error in this thread's queue ("" if none), and
 * clears the queue. Only the reason: never data. */
static const char *ssl_reason(char *buf, size_t len, unsigned long *code)
{
    unsigned long e = 0, last;
    while ((last = ERR_get_error()) != 0)
        e = last; /* the last one is the most specific */
    if (code != NULL)
        *code = e;
    buf[0] = '\0';
    if (e != 0) {
        const char *r = ERR_reason_error_string(e);
        if (r != NULL)
            snprintf(buf, len, "%s", r);
        else
            snprintf(buf, len, "OpenSSL error %lu", e);
    }
    return buf;
}

/* Whether code is an SSL-library error whose reason is one of the n in reasons. */
static bool ssl_reason_in(unsigned long code, const int *reasons, size_t n)
{
    if (ERR_GET_LIB(code) != ERR_LIB_SSL)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ERR_GET_REASON(code) == reasons[i])
            return true;
    return false;
}

/* An alert by which the server says it did not accept our certificate (or that we sent
 * none), as opposed to a transport failure. */
static bool refused_certificate(unsigned long code)
{
    static const int reasons[] = {
        SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED, SSL_R_SSLV3_ALERT_BAD_CERTIFICATE,
        SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED,   SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED,
        SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN,   SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE,
        SSL_R_TLSV1_ALERT_UNKNOWN_CA,            SSL_R_TLSV1_ALERT_ACCESS_DENIED,
        SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE};
    return ssl_reason_in(code, reasons, sizeof reasons / sizeof reasons[0]);
}

/* Records that do not look like TLS: the other end speaks something else (a plaintext
 * Redis answers a ClientHello with "-ERR ..."). */
static bool not_tls(unsigned long code)
{
    static const int reasons[] = {SSL_R_WRONG_VERSION_NUMBER, SSL_R_PACKET_LENGTH_TOO_LONG,
                                  SSL_R_RECORD_LENGTH_MISMATCH, SSL_R_UNKNOWN_PROTOCOL,
                                  SSL_R_HTTP_REQUEST};
    return ssl_reason_in(code, reasons, sizeof reasons / sizeof reasons[0]);
}

/* ---- the context ------------------------------------------------------------------------- */

/* The marker a connection's app data gets when its server asked for a client certificate
 * and none is configured. TLS 1.3 servers check it after the client's side of the
 * handshake is done, so their refusal arrives as a closed connection at the first
 * command; the marker lets that failure be named. */
static char cert_requested_marker;

static int no_client_cert(SSL *ssl, X509 **x509, EVP_PKEY **pkey)
{
    (void)x509;
    (void)pkey;
    SSL_set_app_data(ssl, &cert_requested_marker);
    return 0; /* continue without a certificate */
}

bool crd__tls_cert_requested(SSL *ssl)
{
    return ssl != NULL && SSL_get_app_data(ssl) == &cert_requested_marker;
}

crd_status crd__tls_ctx_new(const crd__tls_config *cfg, SSL_CTX **out, char *err, size_t errlen)
{
    *out = NULL;
    pthread_once(&bio_once, bio_method_init);
    if (bio_method == NULL) {
        snprintf(err, errlen, "TLS: cannot set up the socket layer (out of memory)");
        return CRD_NO_MEMORY;
    }
    if ((cfg->cert_file == NULL) != (cfg->key_file == NULL)) {
        snprintf(err, errlen, "TLS: tls_cert_file and tls_key_file go together (got only %s)",
                 cfg->cert_file != NULL ? "the certificate" : "the key");
        return CRD_INVALID_ARGUMENT;
    }
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        snprintf(err, errlen, "TLS: cannot create a context (out of memory)");
        return CRD_NO_MEMORY;
    }
    char why[200];
    crd_status st = CRD_INVALID_ARGUMENT;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* A read returns after a non-application record (a TLS 1.3 session ticket) instead of
     * blocking for the next one: the subscriber thread reads only after poll(). */
    SSL_CTX_clear_mode(ctx, SSL_MODE_AUTO_RETRY);
    if (cfg->ca_file != NULL || cfg->ca_dir != NULL) {
        if (!SSL_CTX_load_verify_locations(ctx, cfg->ca_file, cfg->ca_dir)) {
            snprintf(err, errlen, "TLS: cannot load the CA certificates from %s%s%s: %s",
                     cfg->ca_file != NULL ? cfg->ca_file : "",
                     cfg->ca_file != NULL && cfg->ca_dir != NULL ? " and " : "",
                     cfg->ca_dir != NULL ? cfg->ca_dir : "", ssl_reason(why, sizeof why, NULL));
            goto fail;
        }
    } else if (!cfg->insecure && !SSL_CTX_set_default_verify_paths(ctx)) {
        snprintf(err, errlen, "TLS: cannot load the system's CA certificates: %s",
                 ssl_reason(why, sizeof why, NULL));
        goto fail;
    }
    if (cfg->cert_file != NULL) {
        if (SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file) != 1) {
            snprintf(err, errlen, "TLS: cannot load the client certificate %s: %s",
                     cfg->cert_file, ssl_reason(why, sizeof why, NULL));
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM) != 1) {
            unsigned long code = 0;
            ssl_reason(why, sizeof why, &code);
            if (ERR_GET_LIB(code) == ERR_LIB_X509 &&
                ERR_GET_REASON(code) == X509_R_KEY_VALUES_MISMATCH)
                snprintf(err, errlen, "TLS: the client key %s does not match the certificate %s",
                         cfg->key_file, cfg->cert_file);
            else
                snprintf(err, errlen, "TLS: cannot load the client key %s: %s", cfg->key_file,
                         why);
            goto fail;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            snprintf(err, errlen, "TLS: the client key %s does not match the certificate %s",
                     cfg->key_file, cfg->cert_file);
            ERR_clear_error();
            goto fail;
        }
    }
    else
        SSL_CTX_set_client_cert_cb(ctx, no_client_cert);
    SSL_CTX_set_verify(ctx, cfg->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    *out = ctx;
    return CRD_OK;
fail:
    SSL_CTX_free(ctx);
    return st;
}

void crd__tls_ctx_free(SSL_CTX *ctx)
{
    SSL_CTX_free(ctx);
}

/* ---- the handshake ----------------------------------------------------------------------- */

static bool is_ip_literal(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* The status and message of a handshake that failed with SSL_get_error() e (not WANT_*),
 * read from the verify result, OpenSSL's error queue and errno: CRD_AUTH for a certificate
 * (ours refused, or theirs failed verification), CRD_IO otherwise. */
static crd_status handshake_failure(SSL *ssl, int e, bool verify, const char *server_name,
                                    char *err, size_t errlen)
{
    char why[200];
    crd_status st;
    unsigned long code = 0;
    int saved = errno;
    ssl_reason(why, sizeof why, &code);
    long vr = SSL_get_verify_result(ssl);
    if (verify && vr != X509_V_OK) {
        /* The words that say what is wrong with the certificate: "unable to get local
         * issuer certificate", "certificate has expired", "hostname mismatch". */
        snprintf(err, errlen, "TLS: the server's certificate verify failed: %s%s%s",
                 X509_verify_cert_error_string(vr),
                 vr == X509_V_ERR_HOSTNAME_MISMATCH || vr == X509_V_ERR_IP_ADDRESS_MISMATCH
                     ? " (expected " : "",
                 vr == X509_V_ERR_HOSTNAME_MISMATCH || vr == X509_V_ERR_IP_ADDRESS_MISMATCH
                     ? server_name : "");
        if (vr == X509_V_ERR_HOSTNAME_MISMATCH || vr == X509_V_ERR_IP_ADDRESS_MISMATCH)
            strncat(err, ")", errlen - strlen(err) - 1);
        st = CRD_AUTH;
    } else if (refused_certificate(code)) {
        snprintf(err, errlen, "TLS: the server refused the handshake: %s (does it require "
                 "a client certificate: tls_cert_file, tls_key_file?)", why);
        st = CRD_AUTH;
    } else if (not_tls(code)) {
        snprintf(err, errlen, "TLS handshake failed: %s (the server does not speak TLS on "
                 "this port)", why);
        st = CRD_IO;
    } else if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN || why[0] == '\0') {
        snprintf(err, errlen, "TLS handshake failed: %s (does the server speak TLS on this "
                 "port?)", saved != 0 ? strerror(saved) : "the server closed the connection");
        st = CRD_IO;
    } else {
        snprintf(err, errlen, "TLS handshake failed: %s", why);
        st = CRD_IO;
    }
    return st;
}

crd_status crd__tls_session(SSL_CTX *ctx, int fd, const char *server_name, bool verify,
                            SSL **out, char *err, size_t errlen)
{
    *out = NULL;
    ERR_clear_error();
    SSL *ssl = SSL_new(ctx);
    BIO *bio = ssl != NULL ? BIO_new(bio_method) : NULL;
    if (bio == NULL) {
        SSL_free(ssl);
        snprintf(err, errlen, "TLS: out of memory");
        return CRD_NO_MEMORY;
    }
    BIO_set_data(bio, (void *)(intptr_t)fd);
    SSL_set_bio(ssl, bio, bio);
    /* A non-blocking write that would block is retried later from another buffer
     * position (the engine's write buffer grows and moves). */
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    bool ip = server_name != NULL && is_ip_literal(server_name);
    /* SNI carries host names only (RFC 6066); an address is checked against the
     * certificate's IP subjectAltNames instead of its DNS names. */
    if (server_name != NULL && !ip)
        SSL_set_tlsext_host_name(ssl, server_name);
    if (verify && server_name != NULL) {
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
        int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, server_name)
                    : X509_VERIFY_PARAM_set1_host(param, server_name, 0);
        if (!ok) {
            SSL_free(ssl);
            snprintf(err, errlen, "TLS: cannot check the server's name against \"%s\"",
                     server_name);
            return CRD_INVALID_ARGUMENT;
        }
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    }
    *out = ssl;
    return CRD_OK;
}

int crd__tls_handshake(SSL *ssl, bool verify, const char *server_name, crd_status *st,
                       char *err, size_t errlen)
{
    errno = 0;
    ERR_clear_error();
    int r = SSL_connect(ssl);
    if (r == 1)
        return 0;
    int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return POLLIN;
    if (e == SSL_ERROR_WANT_WRITE)
        return POLLOUT;
    *st = handshake_failure(ssl, e, verify, server_name, err, errlen);
    ERR_clear_error();
    return -1;
}

crd_status crd__tls_connect(SSL_CTX *ctx, int fd, const char *server_name, bool verify,
                            int64_t deadline_ms, SSL **out, char *err, size_t errlen)
{
    SSL *ssl;
    crd_status st = crd__tls_session(ctx, fd, server_name, verify, &ssl, err, errlen);
    if (st != CRD_OK)
        return st;
    int flags = fcntl(fd, F_GETFL, 0);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        SSL_free(ssl);
        snprintf(err, errlen, "TLS: cannot set up the socket: %s", strerror(errno));
        return CRD_IO;
    }
    for (;;) {
        int want = crd__tls_handshake(ssl, verify, server_name, &st, err, errlen);
        if (want <= 0)
            break;
        int64_t left = deadline_ms - crd__now_ms();
        if (left <= 0) {
            snprintf(err, errlen, "TLS handshake timed out (does the server speak TLS on "
                     "this port?)");
            st = CRD_IO;
            break;
        }
        struct pollfd p = {fd, (short)want, 0};
        int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (n < 0 && errno != EINTR) {
            snprintf(err, errlen, "TLS handshake failed: poll: %s", strerror(errno));
            st = CRD_IO;
            break;
        }
    }
    if (st == CRD_OK && fcntl(fd, F_SETFL, flags) < 0) {
        snprintf(err, errlen, "TLS: cannot set up the socket: %s", strerror(errno));
        st = CRD_IO;
    }
    if (st != CRD_OK) {
        ERR_clear_error();
        SSL_free(ssl);
        return st;
    }
    *out = ssl;
    return CRD_OK;
}

/* ---- reads and writes ------------------------------------------------------------------- */

/* One SSL_read into rbuf or SSL_write of wbuf (the other NULL), at most INT32_MAX bytes,
 * with OpenSSL's error queue and errno cleared before; when nothing moved (n <= 0), the
 * SSL error in *e and errno right after the call in *saved. */
static int ssl_io(SSL *ssl, char *rbuf, const char *wbuf, size_t len, int *e, int *saved)
{
    errno = 0;
    ERR_clear_error();
    int cap = len > INT32_MAX ? INT32_MAX : (int)len;
    int n = rbuf != NULL ? SSL_read(ssl, rbuf, cap) : SSL_write(ssl, wbuf, cap);
    if (n <= 0) {
        *e = SSL_get_error(ssl, n);
        *saved = errno;
    }
    return n;
}

/* Why a write that could not go on failed (not a would-block). */
static const char *send_failure(int e, int saved)
{
    if (saved == EPIPE || saved == ECONNRESET || e == SSL_ERROR_ZERO_RETURN)
        return "connection closed by the server";
    return "sending failed (TLS)";
}

int crd__tls_read(SSL *ssl, char *buf, size_t cap, char *why, size_t whylen, bool *refused)
{
    *refused = false;
    int e = 0, saved = 0;
    int n = ssl_io(ssl, buf, NULL, cap, &e, &saved);
    if (n > 0)
        return n;
    char reason[160];
    unsigned long code = 0;
    ssl_reason(reason, sizeof reason, &code);
    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        if (saved == EAGAIN || saved == EWOULDBLOCK) {
            snprintf(why, whylen, "command timed out");
            return -1;
        }
        return 0; /* a record that carried no data (a session ticket): read again */
    case SSL_ERROR_ZERO_RETURN:
        snprintf(why, whylen, "Server closed the connection (TLS close_notify)");
        return -1;
    case SSL_ERROR_SYSCALL:
        snprintf(why, whylen, "%s", saved != 0 ? strerror(saved) : "Server closed the connection");
        return -1;
    default:
        if (refused_certificate(code)) {
            /* TLS 1.3: the server checks our certificate after our handshake is done,
             * so its refusal arrives with the first reply. */
            snprintf(why, whylen, "the server refused the TLS connection: %s (does it require "
                     "a client certificate: tls_cert_file, tls_key_file?)", reason);
            *refused = true;
        } else {
            snprintf(why, whylen, "TLS: %s", reason[0] ? reason : "read failed");
        }
        return -1;
    }
}

bool crd__tls_write(SSL *ssl, const char *buf, size_t len, const char **why)
{
    while (len > 0) {
        int e = 0, saved = 0;
        int n = ssl_io(ssl, NULL, buf, len, &e, &saved);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        ERR_clear_error();
        if ((e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) &&
            (saved == EAGAIN || saved == EWOULDBLOCK))
            *why = "command timed out (sending)";
        else
            *why = send_failure(e, saved);
        return false;
    }
    return true;
}

int crd__tls_recv(SSL *ssl, char *buf, size_t cap, char *why, size_t whylen, bool *refused)
{
    int n = crd__tls_read(ssl, buf, cap, why, whylen, refused);
    if (n < 0 && !*refused && strcmp(why, "command timed out") == 0)
        return -2; /* would block */
    return n;
}

long crd__tls_send(SSL *ssl, const char *buf, size_t len, const char **why)
{
    int e = 0, saved = 0;
    int n = ssl_io(ssl, NULL, buf, len, &e, &saved);
    if (n > 0)
        return n;
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
        return 0;
    *why = send_failure(e, saved);
    return -1;
}

bool crd__tls_pending(SSL *ssl)
{
    return SSL_pending(ssl) > 0;
}

void crd__tls_free(SSL *ssl)
{
    /* No SSL_shutdown: a close_notify is a write, and the server needs none. */
    SSL_free(ssl);
}
