/*
 * probe.h -- what `doctor` and `verify` share: the user's deployment as a URL names it,
 * reached with raw hiredis connections for the commands the public API does not send
 * (INFO, CONFIG GET, ROLE, SENTINEL, CLUSTER, ACL), plus a library client made from the
 * same global options. Only the public API (credisson.h) and hiredis: these commands
 * stand apart from the library's internals (probe.c parses the URL forms itself).
 *
 * With a rediss:// URL raw connections are TLS too: Debian 12's hiredis 0.14 has none, so
 * tlsdial.c relays a socketpair through an OpenSSL session (probe_tls_dial) and hiredis
 * reads the plaintext end. Main thread only, except probe_cmd on a connection owned by
 * one thread.
 */
#ifndef CRD_CLI_PROBE_H
#define CRD_CLI_PROBE_H

#include "cli.h"

#include <hiredis/hiredis.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#define PROBE_MAX_ADDRS 16

typedef enum probe_kind {
    PROBE_STANDALONE, /* redis://, rediss://, unix:// */
    PROBE_CLUSTER,    /* redis-cluster:// seeds */
    PROBE_SENTINEL    /* redis-sentinel:// sentinels and a master name */
} probe_kind;

typedef struct probe_addr {
    char host[256]; /* "" for a unix socket */
    int port;
    char path[256]; /* unix socket path, or "" */
} probe_addr;

typedef struct probe_target {
    probe_kind kind;
    bool tls;
    char user[128], pass[256];
    int db;
    probe_addr addrs[PROBE_MAX_ADDRS]; /* the server, the seeds, or the sentinels */
    int naddrs;
    char master[128];                  /* sentinel: the master name */
    const global_opts *tls_opts;       /* rediss://: --cacert, --sni, ... (NULL: defaults) */
} probe_target;

/* tlsdial.c: a connection to host:port over TLS (the library's checks: the CAs of
 * --cacert/--cacertdir or the system's, the name of --sni or host, --cert/--key,
 * --insecure), made and shaken hands within timeout_ms, as a plaintext fd for
 * redisConnectFd; the relay behind it ends when the fd is closed. -1 with err
 * (*timed_out when the deadline passed). */
int probe_tls_dial(const global_opts *g, const char *host, int port, int64_t timeout_ms,
                   char *err, size_t cap, bool *timed_out);

/* Parses the URL forms of credisson.h (redis://, rediss://, unix://, redis-cluster://,
 * redis-sentinel://; %XX escapes in user and password). 0, or -1 with err. */
int probe_parse_url(const char *url, probe_target *t, char *err, size_t cap);

/* A raw connection to a (with the target's credentials and, for a data node, its db),
 * every command bounded by timeout_ms. NULL with err (the connect's or AUTH's words;
 * *timed_out when the server did not answer in time). */
redisContext *probe_connect(const probe_target *t, const probe_addr *a, bool data_node,
                            int64_t timeout_ms, char *err, size_t cap, bool *timed_out);
/* One command (NUL-terminated words); NULL when the connection failed (c->errstr). */
redisReply *probe_cmd(redisContext *c, int argc, const char *const *argv);
/* The same with a printf-free word list: probe_cmdv(c, "INFO", "memory", NULL). */
redisReply *probe_cmdv(redisContext *c, const char *first, ...);
/* The words first, ... up to the NULL of a word list like probe_cmdv's into argv (at most
 * PROBE_MAX_WORDS); returns how many. For the callers that add their own handling around
 * probe_cmd. */
#define PROBE_MAX_WORDS 16
int probe_words(const char **argv, const char *first, va_list ap);
/* The next reply on c that nothing asked for (a subscriber's message); NULL when the
 * connection failed or its timeout passed (c->errstr). */
redisReply *probe_next_reply(redisContext *c);
/* Why r, the reply to a command on c, is no answer: the connection's failure, the
 * server's error, or otherwise (a reply of the wrong shape). */
const char *probe_reply_why(const redisContext *c, const redisReply *r, const char *otherwise);
/* Whether a connection's failure was a timeout (EAGAIN on the socket). */
bool probe_timed_out(const redisContext *c);

/* The value of "name:" in an INFO text into buf; false when absent. */
bool probe_info_field(const char *text, const char *name, char *buf, size_t cap);

/* Where the data lives, found from the target: standalone the one address; sentinel the
 * primary the first answering sentinel names (SENTINEL get-master-addr-by-name); cluster
 * the primaries of CLUSTER SLOTS from the first answering seed. 0, or -1 with err. */
int probe_primaries(const probe_target *t, int64_t timeout_ms, probe_addr *out, int cap,
                    int *n, char *err, size_t errcap);

/* The CRC16 slot of a key (Redis Cluster's hash tags). */
int probe_key_slot(const char *key, size_t len);

/* Library options from the global options (URL, TLS files, watchdog lease). */
void probe_options(const global_opts *g, crd_options *o);

/* Monotonic microseconds. */
int64_t probe_now_us(void);

/* Sorts v[0..n) and returns its q-quantile (q in [0, 1]; 0 when n is 0). */
double probe_quantile(double *v, int n, double q);

#endif /* CRD_CLI_PROBE_H */
