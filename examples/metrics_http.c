/* metrics_http.c -- a service that locks, and serves its credisson metrics to Prometheus.
 * Usage: example_metrics_http [redis://host:port] [PORT] [MAX_REQUESTS] [BIND_ADDR]
 *   defaults: redis://127.0.0.1:6379, port 9464 (0: any free port), 100 requests,
 *   127.0.0.1 (loopback only: put 0.0.0.0 to let a Prometheus elsewhere scrape it).
 * A worker thread takes and releases the lock "metrics-demo" every 200 ms; GET /metrics
 * answers with crd_client_metrics_openmetrics()'s text. The program prints the URL it
 * serves, and exits after MAX_REQUESTS requests or at SIGINT/SIGTERM, releasing
 * everything. Scrape it with:  curl -s http://127.0.0.1:9464/metrics
 * or in prometheus.yml:  scrape_configs: [{job_name: my-service,
 *                         static_configs: [{targets: ["127.0.0.1:9464"]}]}] */
#define _POSIX_C_SOURCE 200809L /* sigaction, nanosleep, struct timeval under -std=c11 */
#include <credisson.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "example.h" /* connect_client, report_failure */

static atomic_bool stop;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop, true);
}

/* The service's own work: a lock taken and given back, so the metrics move. */
static void *work(void *arg)
{
    crd_lock *lock = arg;
    while (!atomic_load(&stop)) {
        if (crd_lock_acquire(lock, 1000, CRD_LEASE_WATCHDOG) == CRD_OK)
            crd_lock_release(lock);
        struct timespec pause = {0, 200 * 1000000};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the scraper went away */
        p += w;
        n -= (size_t)w;
    }
}

static void reply(int fd, const char *status, const char *type, const char *body, size_t len)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n", status, type, len);
    send_all(fd, head, (size_t)n);
    send_all(fd, body, len);
}

/* One request per connection: GET /metrics, anything else is refused. A client that
 * sends nothing for 2 s is dropped (SO_RCVTIMEO), so it cannot hold the server. */
static void serve(int fd, crd_client *client)
{
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[2048] = "";
    size_t got = 0;
    while (got < sizeof req - 1 && strstr(req, "\r\n\r\n") == NULL) {
        ssize_t n = recv(fd, req + got, sizeof req - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        req[got] = '\0';
    }
    req[got] = '\0';
    if (strncmp(req, "GET ", 4) != 0) {
        reply(fd, "405 Method Not Allowed", "text/plain", "GET only\n", 9);
        return;
    }
    const char *path = req + 4;
    if (strncmp(path, "/metrics ", 9) != 0 && strncmp(path, "/metrics?", 9) != 0) {
        reply(fd, "404 Not Found", "text/plain", "try /metrics\n", 13);
        return;
    }
    /* Measure, then write; the counters may grow in between, so allow for it. */
    size_t need = crd_client_metrics_openmetrics(client, NULL, 0);
    char *body = NULL;
    for (size_t cap = need + 1024; need > 0; cap = need + 1024) {
        char *b = realloc(body, cap);
        if (b == NULL)
            break;
        body = b;
        need = crd_client_metrics_openmetrics(client, body, cap);
        if (need < cap)
            break;
    }
    if (body == NULL || need == 0)
        reply(fd, "500 Internal Server Error", "text/plain", "no metrics\n", 11);
    else
        reply(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, need);
    free(body);
}

int main(int argc, char **argv)
{
    int port = argc > 2 ? atoi(argv[2]) : 9464;
    long max_requests = argc > 3 ? atol(argv[3]) : 100;
    const char *bind_addr = argc > 4 ? argv[4] : "127.0.0.1";

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns at once with EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    crd_lock *lock = NULL;
    crd_status st = crd_lock_new(client, "metrics-demo", &lock);
    if (st != CRD_OK) {
        report_failure("lock", st, client);
        crd_client_free(client);
        return 1;
    }

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    socklen_t alen = sizeof a;
    if (lfd < 0 || inet_pton(AF_INET, bind_addr, &a.sin_addr) != 1 ||
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 16) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) != 0) {
        fprintf(stderr, "listen on %s:%d: %s\n", bind_addr, port, strerror(errno));
        if (lfd >= 0)
            close(lfd);
        crd_lock_free(lock);
        crd_client_free(client);
        return 1;
    }
    printf("serving http://%s:%d/metrics\n", bind_addr, ntohs(a.sin_port));
    fflush(stdout);

    pthread_t worker;
    bool working = pthread_create(&worker, NULL, work, lock) == 0;
    long served = 0;
    while (!atomic_load(&stop) && served < max_requests) {
        struct pollfd p = {lfd, POLLIN, 0};
        if (poll(&p, 1, 1000) <= 0)
            continue; /* a timeout or a signal: look at stop again */
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            continue;
        serve(fd, client);
        close(fd);
        served++;
    }
    atomic_store(&stop, true);
    if (working)
        pthread_join(worker, NULL);
    close(lfd);
    printf("served %ld requests\n", served);
    crd_lock_free(lock);
    crd_client_free(client);
    return 0;
}
