/*
 * link.c -- one non-blocking command connection of the engine: connect (TCP or unix,
 * then the TLS handshake step by step), the write buffer, and the reply reader. It
 * knows nothing of requests: engine.c queues bytes, asks which poll events the link
 * wants, hands it the events poll() returned, and takes the replies in order.
 *
 * Nothing here blocks but crd__link_wait: a connect in progress, a TLS handshake wanting
 * to read or write, and a full socket buffer are states the next poll() resumes. hiredis
 * is the parser only (redisReader). Writes use send(MSG_NOSIGNAL) (or SSL_write over
 * tls.c's BIO that does the same): a closed connection never raises SIGPIPE in the
 * caller's process.
 *
 * A plaintext link's socket is put in blocking mode once connected, and every send and
 * recv here passes MSG_DONTWAIT, except crd__link_wait's: a caller running its own round
 * trip (engine.c's direct path) then waits for its reply in one recv() bounded by
 * SO_RCVTIMEO instead of a poll() and a recv() (one system call fewer per round trip,
 * measured in bench/README.md). A TLS link stays non-blocking (OpenSSL reads through
 * tls.c's BIO) and its caller polls.
 *
 * Threads: the client's I/O thread, under the engine's mutex; or the one thread a link is
 * lent to (engine.c), without it.
 */
#include "transport.h"
#include "link.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

void crd__link_init(crd__link *l)
{
    memset(l, 0, sizeof *l);
    l->fd = -1;
}

static int connect_unix(const char *path, char *why, size_t n)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(why, n, "unix socket path too long");
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, n, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS &&
        errno != EAGAIN) {
        snprintf(why, n, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Connects to the first address of host that accepts the connect() call (the handshake
 * completes later: EINPROGRESS). Host names are addresses or /etc/hosts names in every
 * deployment this library is tested with; a DNS name costs one resolver call here. */
static int connect_tcp(const char *host, int port, char *why, size_t n)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        snprintf(why, n, "%s", gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = res; a != NULL; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            snprintf(why, n, "socket: %s", strerror(errno));
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        int idle = 15, intvl = 5, cnt = 3;
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS)
            break;
        snprintf(why, n, "%s", strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

int crd__link_open(crd__link *l, const crd__endpoint *ep, SSL_CTX *tls, const char *tls_name,
                   bool verify, char *why, size_t n)
{
    crd__link_close(l);
    l->fd = ep->unix_path != NULL ? connect_unix(ep->unix_path, why, n)
                                  : connect_tcp(ep->host, ep->port, why, n);
    if (l->fd < 0)
        return -1;
    l->reader = redisReaderCreate();
    if (l->reader == NULL) {
        snprintf(why, n, "out of memory");
        crd__link_close(l);
        return -1;
    }
    l->tls_ctx = ep->unix_path == NULL ? tls : NULL;
    l->verify = verify;
    snprintf(l->tls_name, sizeof l->tls_name, "%s",
             tls_name != NULL ? tls_name : ep->host != NULL ? ep->host : "");
    l->state = CRD__LINK_CONNECTING;
    return 0;
}

void crd__link_close(crd__link *l)
{
    if (l->ssl != NULL)
        crd__tls_free(l->ssl);
    if (l->reader != NULL)
        redisReaderFree(l->reader);
    if (l->fd >= 0)
        close(l->fd);
    free(l->wbuf);
    struct crd__req *keep_head = l->head, *keep_tail = l->tail;
    int keep_n = l->inflight;
    struct crd__link *keep_next = l->next;
    crd__link_init(l);
    /* The reply queue and the place in the peer's list of unhealthy links belong to the
     * engine (closing an unhealthy link must not cut that list: LSan saw the links after
     * it leak in chaos). */
    l->head = keep_head;
    l->tail = keep_tail;
    l->inflight = keep_n;
    l->next = keep_next;
}

void crd__link_abandon(crd__link *l)
{
    /* A fork child: the parent's socket is closed (never written); the memory another
     * thread may have been using is left as it is. */
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
    l->state = CRD__LINK_CLOSED;
}

bool crd__link_queue(crd__link *l, const char *buf, size_t len)
{
    if (l->woff == l->wlen)
        l->woff = l->wlen = 0;
    if (l->wlen + len > l->wcap) {
        if (l->woff > 0) {
            memmove(l->wbuf, l->wbuf + l->woff, l->wlen - l->woff);
            l->wlen -= l->woff;
            l->woff = 0;
        }
        size_t cap = l->wcap ? l->wcap : 4096;
        while (cap < l->wlen + len)
            cap *= 2;
        if (cap != l->wcap) {
            char *p = realloc(l->wbuf, cap);
            if (p == NULL)
                return false;
            l->wbuf = p;
            l->wcap = cap;
        }
    }
    memcpy(l->wbuf + l->wlen, buf, len);
    l->wlen += len;
    return true;
}

short crd__link_events(const crd__link *l)
{
    switch (l->state) {
    case CRD__LINK_CONNECTING:
        return POLLOUT;
    case CRD__LINK_HANDSHAKE:
        return (short)l->tls_want;
    case CRD__LINK_READY:
    case CRD__LINK_UNHEALTHY:
        return (short)(POLLIN | (l->woff < l->wlen ? POLLOUT : 0));
    case CRD__LINK_CLOSED:
        break;
    }
    return 0;
}

static int handshake(crd__link *l, crd_status *st, char *why, size_t n)
{
    int want = crd__tls_handshake(l->ssl, l->verify, l->tls_name[0] ? l->tls_name : NULL, st,
                                  why, n);
    if (want < 0)
        return -1;
    if (want > 0) {
        l->tls_want = want;
        return 0;
    }
    l->state = CRD__LINK_READY;
    return 0;
}

static int finish_connect(crd__link *l, crd_status *st, char *why, size_t n)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err != 0) {
        snprintf(why, n, "%s", strerror(err));
        *st = CRD_IO;
        return -1;
    }
    if (l->tls_ctx == NULL) {
        int fl = fcntl(l->fd, F_GETFL, 0);
        l->can_wait = fl >= 0 && fcntl(l->fd, F_SETFL, fl & ~O_NONBLOCK) == 0;
        l->state = CRD__LINK_READY;
        return 0;
    }
    if ((*st = crd__tls_session(l->tls_ctx, l->fd, l->tls_name[0] ? l->tls_name : NULL,
                                l->verify, &l->ssl, why, n)) != CRD_OK)
        return -1;
    l->state = CRD__LINK_HANDSHAKE;
    return handshake(l, st, why, n);
}

static int flush(crd__link *l, crd_status *st, char *why, size_t n)
{
    while (l->woff < l->wlen) {
        size_t left = l->wlen - l->woff;
        long w;
        if (l->ssl != NULL) {
            const char *reason = NULL;
            w = crd__tls_send(l->ssl, l->wbuf + l->woff, left, &reason);
            if (w < 0) {
                snprintf(why, n, "%s", reason);
                *st = CRD_IO;
                return -1;
            }
        } else {
            w = send(l->fd, l->wbuf + l->woff, left, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK) {
                    snprintf(why, n, "%s", errno == EPIPE || errno == ECONNRESET
                                               ? "connection closed by the server"
                                               : strerror(errno));
                    *st = CRD_IO;
                    return -1;
                }
                w = 0;
            }
        }
        if (w == 0)
            break;
        l->woff += (size_t)w;
    }
    return 0;
}

/* Reads what the socket has into the reader; sets *got when bytes came. With `wait`
 * (a plaintext link in blocking mode, see crd__link_wait) the first recv() waits for
 * bytes until SO_RCVTIMEO; 0 with nothing got is then a timeout. */
static int fill(crd__link *l, bool wait, bool *got, crd_status *st, char *why, size_t n)
{
    char buf[16384];
    for (int rounds = 0; rounds < 64; rounds++, wait = false) {
        long r;
        if (l->ssl != NULL) {
            bool refused = false;
            r = crd__tls_recv(l->ssl, buf, sizeof buf, why, n, &refused);
            if (r == -2)
                return 0;
            if (r < 0) {
                *st = refused ? CRD_AUTH : CRD_IO;
                return -1;
            }
            if (r == 0)
                continue;
        } else {
            r = recv(l->fd, buf, sizeof buf, wait ? 0 : MSG_DONTWAIT);
            if (r < 0) {
                if (errno == EINTR && !wait)
                    continue;
                if (errno == EINTR)
                    return 0; /* the caller looks at its deadline again */
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return 0;
                snprintf(why, n, "%s", strerror(errno));
                *st = CRD_IO;
                return -1;
            }
            if (r == 0) {
                snprintf(why, n, "Server closed the connection");
                *st = CRD_IO;
                return -1;
            }
        }
        *got = true;
        if (redisReaderFeed(l->reader, buf, (size_t)r) != REDIS_OK) {
            snprintf(why, n, "protocol error: %s", l->reader->errstr);
            *st = CRD_PROTOCOL;
            return -1;
        }
        if ((size_t)r < sizeof buf && (l->ssl == NULL || !crd__tls_pending(l->ssl)))
            return 0;
    }
    return 0;
}

int crd__link_io(crd__link *l, short revents, bool *got, crd_status *st, char *why, size_t n)
{
    *got = false;
    if (l->state == CRD__LINK_CONNECTING || l->state == CRD__LINK_HANDSHAKE) {
        if (revents == 0)
            return 0;
        int rc = l->state == CRD__LINK_CONNECTING ? finish_connect(l, st, why, n)
                                                  : handshake(l, st, why, n);
        if (rc < 0)
            return -1;
        if (l->state != CRD__LINK_READY)
            return 0;
        revents = POLLOUT;
    }
    if (l->state != CRD__LINK_READY && l->state != CRD__LINK_UNHEALTHY)
        return 0;
    if (flush(l, st, why, n) < 0)
        return -1;
    if ((revents & (POLLIN | POLLHUP | POLLERR)) || (l->ssl != NULL && crd__tls_pending(l->ssl)))
        return fill(l, false, got, st, why, n);
    return 0;
}

/* SO_RCVTIMEO of l's socket for a wait of left_ms, or false when the wait must poll. The
 * kernel's timer wheel lets a timeout of n ticks fire up to n/8 late (plus a tick), so the
 * timeout is left_ms less an eighth and 20 ms, and the last 40 ms of a wait poll() (whose
 * timer is precise); a recv() that times out early only goes round the caller's loop once
 * more. The timeout is set only when the one in place could outlast that or is far
 * shorter (rounded down to 64 ms steps): a run of round trips with like deadlines sets it
 * once. */
static int wait_limit(crd__link *l, int64_t left_ms)
{
    if (left_ms < 40)
        return 0;
    int64_t want = left_ms - left_ms / 8 - 20;
    if (want > 64)
        want &= ~(int64_t)63;
    if (want > 60000)
        want = 60000;
    if (l->rcvtimeo_ms != 0 && l->rcvtimeo_ms <= want && l->rcvtimeo_ms * 4 >= want)
        return 1;
    struct timeval tv = {(time_t)(want / 1000), (suseconds_t)(want % 1000) * 1000};
    if (setsockopt(l->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
        return -1;
    l->rcvtimeo_ms = want;
    return 1;
}

int crd__link_wait(crd__link *l, int64_t left_ms, bool *got, crd_status *st, char *why,
                   size_t n)
{
    *got = false;
    if (!crd__link_can_wait(l))
        return -2;
    int lim = wait_limit(l, left_ms);
    if (lim == 0)
        return -2;
    if (lim < 0) {
        snprintf(why, n, "setsockopt: %s", strerror(errno));
        *st = CRD_IO;
        return -1;
    }
    return fill(l, true, got, st, why, n);
}

bool crd__link_can_wait(const crd__link *l)
{
    return l->can_wait && l->ssl == NULL && l->state == CRD__LINK_READY && l->woff == l->wlen;
}

bool crd__link_quiet(const crd__link *l)
{
    if (l->ssl != NULL && crd__tls_pending(l->ssl))
        return false;
    char b;
    return recv(l->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
           (errno == EAGAIN || errno == EWOULDBLOCK);
}

int crd__link_reply(crd__link *l, redisReply **out)
{
    void *r = NULL;
    *out = NULL;
    if (redisReaderGetReply(l->reader, &r) != REDIS_OK)
        return -1;
    *out = r;
    return r != NULL;
}
