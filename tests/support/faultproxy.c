/*
 * faultproxy.c -- the fault-injecting loopback TCP proxy of faultproxy.h.
 *
 * One thread per proxy runs a poll() loop over the listening socket, a self-pipe and
 * both sockets of every connection pair. Data read from one side becomes a chunk in
 * the queue towards the other side, stamped with the time it may leave (now + the
 * direction's delay, or later while a rule holds the replies); a queue is written in
 * order, so a late chunk holds back the ones behind it, as a slow link does. End of
 * stream is forwarded as a half-close once the queue towards that side is empty, so a
 * command sent just before the client hung up still reaches Redis.
 *
 * Lock: p->mu guards everything; the thread holds it while it moves bytes (non-blocking
 * I/O only) and drops it inside poll(). Control calls take it, change the settings and
 * poke the self-pipe so the loop re-reads them.
 */
#include "faultproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FP_RULES 16
#define FP_PAT 256
#define FP_TAIL 255
#define FP_READ 16384
#define FP_CUT_FROM 8

typedef struct fp_chunk {
    struct fp_chunk *next;
    int64_t due_ns;
    size_t len, off;
    char data[];
} fp_chunk;

typedef struct fp_queue {
    fp_chunk *head, *tail;
} fp_queue;

typedef struct fp_conn {
    int cfd, sfd;
    uint32_t from;             /* the client's IPv4 address (host order) */
    fp_queue up;   /* to the server */
    fp_queue down; /* to the client */
    bool c_eof, s_eof;         /* that side sent FIN */
    bool up_shut, down_shut;   /* FIN forwarded */
    int64_t hold_down_until_ns;
    int64_t hold_up_until_ns;
    bool swallow_down;         /* discard every later server byte */
    bool close_on_reply;       /* discard the next server bytes and close */
    bool dead;
    char tail[FP_TAIL];        /* last client bytes, for patterns split across reads */
    size_t tail_len;
    struct fp_conn *next;
} fp_conn;

typedef struct fp_rule {
    bool armed, fired;
    char match[FP_PAT], exclude[FP_PAT];
    size_t mlen, elen;
    crdt_proxy_action action;
    int64_t ms;
} fp_rule;

struct crdt_proxy {
    pthread_mutex_t mu;
    pthread_t thread;
    int pipe_fd[2];
    int lfd;
    int port;
    int upstream;
    bool refuse, stop;
    int64_t delay_ms[2];  /* [0] up, [1] down */
    bool blackhole[2];
    uint32_t cut_from[FP_CUT_FROM]; /* clients whose connections are black-holed */
    int ncut_from;
    bool stall[2];        /* queue without a due time until released */
    fp_rule rules[FP_RULES];
    fp_conn *conns;
    crdt_proxy_stats st;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void poke(crdt_proxy *p)
{
    char b = 1;
    ssize_t n = write(p->pipe_fd[1], &b, 1);
    (void)n; /* a full pipe already holds a wake-up */
}

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- queues ---------------------------------------------------------------------------- */

static void q_push(fp_queue *q, const char *data, size_t len, int64_t due)
{
    fp_chunk *c = malloc(sizeof *c + len);
    if (c == NULL)
        return; /* out of memory in a test: the bytes are lost, like a dropped packet */
    c->next = NULL;
    c->due_ns = due;
    c->len = len;
    c->off = 0;
    memcpy(c->data, data, len);
    if (q->tail != NULL)
        q->tail->next = c;
    else
        q->head = c;
    q->tail = c;
}

static void q_clear(fp_queue *q)
{
    while (q->head != NULL) {
        fp_chunk *c = q->head;
        q->head = c->next;
        free(c);
    }
    q->tail = NULL;
}

/* Writes what is due from q to fd. Returns false on a write error. */
static bool q_flush(fp_queue *q, int fd, int64_t now, uint64_t *counter)
{
    while (q->head != NULL && q->head->due_ns <= now) {
        fp_chunk *c = q->head;
        ssize_t n = send(fd, c->data + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        c->off += (size_t)n;
        *counter += (uint64_t)n;
        if (c->off < c->len)
            return true;
        q->head = c->next;
        if (q->head == NULL)
            q->tail = NULL;
        free(c);
    }
    return true;
}

/* ---- connections ----------------------------------------------------------------------- */

static void conn_close(crdt_proxy *p, fp_conn *c)
{
    if (c->dead)
        return;
    c->dead = true;
    if (c->cfd >= 0)
        close(c->cfd);
    if (c->sfd >= 0)
        close(c->sfd);
    c->cfd = c->sfd = -1;
    q_clear(&c->up);
    q_clear(&c->down);
    p->st.open--;
}

static void reap(crdt_proxy *p)
{
    fp_conn **pp = &p->conns;
    while (*pp != NULL) {
        fp_conn *c = *pp;
        if (c->dead) {
            *pp = c->next;
            free(c);
        } else {
            pp = &c->next;
        }
    }
}

static int drop_all_locked(crdt_proxy *p)
{
    int n = 0;
    for (fp_conn *c = p->conns; c != NULL; c = c->next)
        if (!c->dead) {
            conn_close(p, c);
            n++;
        }
    return n;
}

static void do_accept(crdt_proxy *p)
{
    for (;;) {
        struct sockaddr_in peer;
        socklen_t plen = sizeof peer;
        int cfd = accept4(p->lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
        if (cfd < 0)
            return;
        p->st.accepted++;
        int sfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)p->upstream);
        /* A blocking connect on loopback answers at once: accepted or refused. */
        if (sfd < 0 || connect(sfd, (struct sockaddr *)&a, sizeof a) != 0) {
            p->st.upstream_fails++;
            if (sfd >= 0)
                close(sfd);
            close(cfd);
            continue;
        }
        fp_conn *c = calloc(1, sizeof *c);
        if (c == NULL) {
            close(sfd);
            close(cfd);
            continue;
        }
        set_nonblock(cfd);
        set_nonblock(sfd);
        c->cfd = cfd;
        c->sfd = sfd;
        c->from = ntohl(peer.sin_addr.s_addr);
        c->next = p->conns;
        p->conns = c;
        p->st.open++;
    }
}

static bool contains(const char *hay, size_t hlen, const char *needle, size_t nlen)
{
    if (nlen == 0)
        return true;
    return hlen >= nlen && memmem(hay, hlen, needle, nlen) != NULL;
}

/* Checks the armed rules against a chunk of client bytes. Returns the rule that fired,
 * or NULL. */
static fp_rule *match_rules(crdt_proxy *p, fp_conn *c, const char *data, size_t len)
{
    char buf[FP_TAIL + FP_READ];
    memcpy(buf, c->tail, c->tail_len);
    memcpy(buf + c->tail_len, data, len);
    size_t blen = c->tail_len + len;
    fp_rule *hit = NULL;
    for (int i = 0; i < FP_RULES && hit == NULL; i++) {
        fp_rule *r = &p->rules[i];
        if (!r->armed || r->fired)
            continue;
        if (!contains(buf, blen, r->match, r->mlen))
            continue;
        if (r->elen > 0 && contains(data, len, r->exclude, r->elen))
            continue;
        r->fired = true;
        r->armed = false;
        hit = r;
    }
    size_t keep = blen < FP_TAIL ? blen : FP_TAIL;
    memcpy(c->tail, buf + blen - keep, keep);
    c->tail_len = keep;
    return hit;
}

/* Whether c's client address is one crdt_proxy_set_blackhole_from cut off. */
static bool cut_off(const crdt_proxy *p, const fp_conn *c)
{
    for (int i = 0; i < p->ncut_from; i++)
        if (p->cut_from[i] == c->from)
            return true;
    return false;
}

/* recv on fd, one side of c, into data (FP_READ bytes): the count read, or 0 at the end
 * of that side (*eof set), with nothing to read, or on an error (c closed). */
static size_t conn_recv(crdt_proxy *p, fp_conn *c, int fd, bool *eof, char *data)
{
    ssize_t n = recv(fd, data, FP_READ, 0);
    if (n == 0)
        *eof = true;
    else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        conn_close(p, c);
    return n > 0 ? (size_t)n : 0;
}

/* Queues n bytes towards the other side (dir 0: up, to the server; 1: down), due after
 * that direction's delay and not before c's hold of it; never due while it stalls. */
static void queue_towards(crdt_proxy *p, fp_conn *c, int dir, const char *data, size_t n,
                          int64_t now)
{
    int64_t due = now + p->delay_ms[dir] * 1000000;
    int64_t hold = dir == 0 ? c->hold_up_until_ns : c->hold_down_until_ns;
    if (due < hold)
        due = hold;
    if (p->stall[dir])
        due = INT64_MAX;
    q_push(dir == 0 ? &c->up : &c->down, data, n, due);
}

/* Reads from the client side and queues towards the server. */
static void read_client(crdt_proxy *p, fp_conn *c, int64_t now)
{
    char data[FP_READ];
    size_t n = conn_recv(p, c, c->cfd, &c->c_eof, data);
    if (n == 0)
        return;
    fp_rule *r = match_rules(p, c, data, n);
    if (r != NULL) {
        switch (r->action) {
        case CRDT_PROXY_CLOSE_BEFORE:
            conn_close(p, c);
            return;
        case CRDT_PROXY_DELAY_REPLY:
            c->hold_down_until_ns = now + r->ms * 1000000;
            break;
        case CRDT_PROXY_DELAY_COMMAND:
            c->hold_up_until_ns = now + r->ms * 1000000;
            break;
        case CRDT_PROXY_SWALLOW_REPLY:
            c->swallow_down = true;
            break;
        case CRDT_PROXY_EXECUTE_THEN_CLOSE:
            c->close_on_reply = true;
            break;
        default:
            break;
        }
    }
    if (p->blackhole[0] || cut_off(p, c)) {
        p->st.dropped_up += n;
        return;
    }
    queue_towards(p, c, 0, data, n, now);
}

/* Reads from the server side and queues towards the client. */
static void read_server(crdt_proxy *p, fp_conn *c, int64_t now)
{
    char data[FP_READ];
    size_t n = conn_recv(p, c, c->sfd, &c->s_eof, data);
    if (n == 0)
        return;
    if (c->close_on_reply) {
        p->st.dropped_down += n;
        conn_close(p, c);
        return;
    }
    if (c->swallow_down || p->blackhole[1] || cut_off(p, c)) {
        p->st.dropped_down += n;
        return;
    }
    queue_towards(p, c, 1, data, n, now);
}

/* Flushes due data and forwards half-closes. */
static void pump(crdt_proxy *p, fp_conn *c, int64_t now)
{
    if (c->dead)
        return;
    if (!q_flush(&c->up, c->sfd, now, &p->st.bytes_up) ||
        !q_flush(&c->down, c->cfd, now, &p->st.bytes_down)) {
        conn_close(p, c);
        return;
    }
    if (c->c_eof && !c->up_shut && c->up.head == NULL) {
        shutdown(c->sfd, SHUT_WR);
        c->up_shut = true;
    }
    if (c->s_eof && !c->down_shut && c->down.head == NULL) {
        shutdown(c->cfd, SHUT_WR);
        c->down_shut = true;
    }
    if (c->up_shut && c->down_shut)
        conn_close(p, c);
}

static int64_t earliest_due(const fp_queue *q, int64_t best)
{
    if (q->head != NULL && q->head->due_ns < best)
        return q->head->due_ns;
    return best;
}

static void *proxy_main(void *arg)
{
    crdt_proxy *p = arg;
    struct pollfd *pfd = NULL;
    fp_conn **who = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        reap(p);
        size_t need = 2;
        for (fp_conn *c = p->conns; c != NULL; c = c->next)
            need += 2;
        if (need > cap) {
            size_t ncap = need * 2;
            struct pollfd *np = realloc(pfd, ncap * sizeof *np);
            if (np != NULL)
                pfd = np;
            fp_conn **nw = realloc(who, ncap * sizeof *nw);
            if (nw != NULL)
                who = nw;
            if (np == NULL || nw == NULL)
                break;
            cap = ncap;
        }
        int64_t now = now_ns();
        int64_t next = INT64_MAX;
        size_t n = 0;
        pfd[n].fd = p->pipe_fd[0];
        pfd[n].events = POLLIN;
        who[n++] = NULL;
        pfd[n].fd = p->lfd;
        pfd[n].events = p->lfd >= 0 ? POLLIN : 0;
        who[n++] = NULL;
        for (fp_conn *c = p->conns; c != NULL; c = c->next) {
            /* Stop reading a side whose queue is long, as TCP flow control would. */
            pfd[n].events = (short)((c->c_eof ? 0 : POLLIN) |
                                    (c->down.head && c->down.head->due_ns <= now ? POLLOUT : 0));
            pfd[n].fd = pfd[n].events ? c->cfd : -1;
            pfd[n].revents = 0;
            who[n++] = c;
            pfd[n].events = (short)((c->s_eof ? 0 : POLLIN) |
                                    (c->up.head && c->up.head->due_ns <= now ? POLLOUT : 0));
            pfd[n].fd = pfd[n].events ? c->sfd : -1;
            pfd[n].revents = 0;
            who[n++] = c;
            next = earliest_due(&c->up, next);
            next = earliest_due(&c->down, next);
        }
        int timeout = -1;
        if (next != INT64_MAX) {
            int64_t ms = (next - now + 999999) / 1000000;
            timeout = ms < 0 ? 0 : ms > 1000 ? 1000 : (int)ms;
        }
        pthread_mutex_unlock(&p->mu);
        int rc = poll(pfd, (nfds_t)n, timeout);
        pthread_mutex_lock(&p->mu);
        if (rc < 0 && errno != EINTR)
            break;
        if (pfd[0].revents & POLLIN) {
            char buf[64];
            while (read(p->pipe_fd[0], buf, sizeof buf) > 0) {
            }
        }
        if (p->stop)
            break;
        /* The settings may have changed while we polled: only trust what still holds. */
        if (p->lfd >= 0 && pfd[1].fd == p->lfd && (pfd[1].revents & POLLIN))
            do_accept(p);
        now = now_ns();
        for (size_t i = 2; i < n; i += 2) {
            fp_conn *c = who[i];
            if (c->dead)
                continue;
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
                read_client(p, c, now);
            if (!c->dead && (pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                read_server(p, c, now);
        }
        for (fp_conn *c = p->conns; c != NULL; c = c->next)
            pump(p, c, now);
    }
    drop_all_locked(p);
    reap(p);
    pthread_mutex_unlock(&p->mu);
    free(pfd);
    free(who);
    return NULL;
}

/* Stalled chunks may leave now (in order). Caller holds p->mu. */
static void release_stalled(crdt_proxy *p)
{
    int64_t now = now_ns();
    for (fp_conn *c = p->conns; c != NULL; c = c->next) {
        fp_queue *qs[2] = {&c->up, &c->down};
        for (int d = 0; d < 2; d++)
            if (!p->stall[d])
                for (fp_chunk *k = qs[d]->head; k != NULL; k = k->next)
                    if (k->due_ns == INT64_MAX)
                        k->due_ns = now;
    }
}

/* ---- control --------------------------------------------------------------------------- */

/* Closes a started proxy's listener (unless crdt_proxy_set_refuse closed it) and
 * wake-up pipe and frees it (its thread is gone). */
static void proxy_free(crdt_proxy *p)
{
    if (p->lfd >= 0)
        close(p->lfd);
    close(p->pipe_fd[0]);
    close(p->pipe_fd[1]);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* How a crdt_proxy_start that could not finish ends: reason in *why (when asked for), NULL. */
static crdt_proxy *start_failed(const char **why, const char *reason)
{
    if (why != NULL)
        *why = reason;
    return NULL;
}

crdt_proxy *crdt_proxy_start(int upstream_port, const char **why)
{
    crdt_proxy *p = calloc(1, sizeof *p);
    if (p == NULL)
        return start_failed(why, "out of memory");
    p->upstream = upstream_port;
    p->lfd = listen_on(0);
    if (p->lfd < 0 || pipe2(p->pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        const char *reason = strerror(errno);
        if (p->lfd >= 0)
            close(p->lfd);
        free(p);
        return start_failed(why, reason);
    }
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    getsockname(p->lfd, (struct sockaddr *)&a, &alen);
    p->port = ntohs(a.sin_port);
    pthread_mutex_init(&p->mu, NULL);
    if (pthread_create(&p->thread, NULL, proxy_main, p) != 0) {
        proxy_free(p);
        return start_failed(why, "cannot start the proxy thread");
    }
    return p;
}

void crdt_proxy_stop(crdt_proxy *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_mutex_unlock(&p->mu);
    poke(p);
    pthread_join(p->thread, NULL);
    proxy_free(p);
}

int crdt_proxy_port(const crdt_proxy *p) { return p->port; }

void crdt_proxy_set_upstream(crdt_proxy *p, int upstream_port)
{
    pthread_mutex_lock(&p->mu);
    p->upstream = upstream_port;
    pthread_mutex_unlock(&p->mu);
}

/* The per-direction settings ([0] up, [1] down) that crdt_proxy_set_delay, _blackhole and
 * _stall change. */
typedef enum fp_setting { FP_DELAY, FP_BLACKHOLE, FP_STALL } fp_setting;

/* Sets what to v on each direction dir names, under p->mu, and wakes the proxy thread to
 * act on it. Ending a stall lets its queued chunks leave. */
static void set_sides(crdt_proxy *p, crdt_proxy_dir dir, fp_setting what, int64_t v)
{
    static const crdt_proxy_dir side[2] = {CRDT_PROXY_UP, CRDT_PROXY_DOWN};
    pthread_mutex_lock(&p->mu);
    for (int d = 0; d < 2; d++) {
        if (!(dir & side[d]))
            continue;
        if (what == FP_DELAY)
            p->delay_ms[d] = v;
        else if (what == FP_BLACKHOLE)
            p->blackhole[d] = v != 0;
        else
            p->stall[d] = v != 0;
    }
    if (what == FP_STALL && v == 0)
        release_stalled(p);
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

void crdt_proxy_set_delay(crdt_proxy *p, crdt_proxy_dir dir, int64_t ms)
{
    set_sides(p, dir, FP_DELAY, ms);
}

void crdt_proxy_set_blackhole(crdt_proxy *p, crdt_proxy_dir dir, bool on)
{
    set_sides(p, dir, FP_BLACKHOLE, on);
}

void crdt_proxy_end_delays(crdt_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    int64_t now = now_ns();
    for (fp_conn *c = p->conns; c != NULL; c = c->next) {
        c->hold_up_until_ns = c->hold_down_until_ns = 0;
        fp_queue *qs[2] = {&c->up, &c->down};
        for (int d = 0; d < 2; d++)
            for (fp_chunk *k = qs[d]->head; k != NULL; k = k->next)
                if (k->due_ns != INT64_MAX && k->due_ns > now)
                    k->due_ns = now;
    }
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

bool crdt_proxy_set_blackhole_from(crdt_proxy *p, const char *ipv4, bool on)
{
    struct in_addr a;
    if (inet_pton(AF_INET, ipv4, &a) != 1)
        return false;
    uint32_t from = ntohl(a.s_addr);
    bool ok = true;
    pthread_mutex_lock(&p->mu);
    int at = -1;
    for (int i = 0; i < p->ncut_from; i++)
        if (p->cut_from[i] == from)
            at = i;
    if (on && at < 0) {
        ok = p->ncut_from < FP_CUT_FROM;
        if (ok)
            p->cut_from[p->ncut_from++] = from;
    } else if (!on && at >= 0) {
        p->cut_from[at] = p->cut_from[--p->ncut_from];
    }
    pthread_mutex_unlock(&p->mu);
    poke(p);
    return ok;
}

void crdt_proxy_set_stall(crdt_proxy *p, crdt_proxy_dir dir, bool on)
{
    set_sides(p, dir, FP_STALL, on);
}

int crdt_proxy_drop_all(crdt_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    int n = drop_all_locked(p);
    pthread_mutex_unlock(&p->mu);
    poke(p);
    return n;
}

bool crdt_proxy_set_refuse(crdt_proxy *p, bool refuse)
{
    bool ok = true;
    pthread_mutex_lock(&p->mu);
    if (refuse && !p->refuse) {
        if (p->lfd >= 0)
            close(p->lfd);
        p->lfd = -1;
        drop_all_locked(p);
    } else if (!refuse && p->refuse) {
        /* Another process may take the port meanwhile; retry briefly. */
        for (int i = 0; i < 50 && p->lfd < 0; i++) {
            p->lfd = listen_on(p->port);
            if (p->lfd < 0) {
                struct timespec ts = {0, 10000000};
                nanosleep(&ts, NULL);
            }
        }
        ok = p->lfd >= 0;
    }
    p->refuse = refuse || !ok;
    pthread_mutex_unlock(&p->mu);
    poke(p);
    return ok;
}

void crdt_proxy_reset(crdt_proxy *p)
{
    crdt_proxy_set_refuse(p, false);
    pthread_mutex_lock(&p->mu);
    p->delay_ms[0] = p->delay_ms[1] = 0;
    p->blackhole[0] = p->blackhole[1] = false;
    p->ncut_from = 0;
    for (int i = 0; i < FP_RULES; i++)
        p->rules[i].armed = false;
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

int crdt_proxy_arm(crdt_proxy *p, const char *match, const char *exclude,
                   crdt_proxy_action action, int64_t ms)
{
    size_t ml = match != NULL ? strlen(match) : 0;
    size_t el = exclude != NULL ? strlen(exclude) : 0;
    if (ml >= FP_PAT || el >= FP_PAT)
        return -1;
    int id = -1;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < FP_RULES; i++) {
        fp_rule *r = &p->rules[i];
        if (r->armed || r->fired)
            continue; /* a fired slot keeps its answer until disarm_all or reset */
        memset(r, 0, sizeof *r);
        memcpy(r->match, match != NULL ? match : "", ml);
        r->mlen = ml;
        if (el > 0)
            memcpy(r->exclude, exclude, el);
        r->elen = el;
        r->action = action;
        r->ms = ms;
        r->armed = true;
        id = i;
        break;
    }
    pthread_mutex_unlock(&p->mu);
    return id;
}

bool crdt_proxy_fired(crdt_proxy *p, int id)
{
    if (id < 0 || id >= FP_RULES)
        return false;
    pthread_mutex_lock(&p->mu);
    bool f = p->rules[id].fired;
    pthread_mutex_unlock(&p->mu);
    return f;
}

bool crdt_proxy_wait_fired(crdt_proxy *p, int id, int64_t timeout_ms)
{
    int64_t deadline = now_ns() + timeout_ms * 1000000;
    for (;;) {
        if (crdt_proxy_fired(p, id))
            return true;
        if (now_ns() >= deadline)
            return false;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

void crdt_proxy_disarm_all(crdt_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < FP_RULES; i++)
        p->rules[i].armed = p->rules[i].fired = false;
    pthread_mutex_unlock(&p->mu);
}

void crdt_proxy_get_stats(crdt_proxy *p, crdt_proxy_stats *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->st;
    pthread_mutex_unlock(&p->mu);
}
