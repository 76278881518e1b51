/*
 * test_tls.c -- rediss://: a verified TLS connection takes, wakes and renews locks;
 * mutual TLS; and every way a TLS connection can fail (unknown CA, wrong name, expired
 * certificate, missing client certificate, plaintext against a TLS port, TLS against a
 * plaintext port, a server that never answers the handshake, unreadable files) gives
 * the right status and a message that names the problem.
 *
 * Each test starts its own redis-server with --tls-port and certificates that
 * support/tls_certs.sh makes with the openssl CLI for this process (nothing secret is
 * committed). The lock, exclusion, pubsub and watchdog suites run over TLS with
 * `make test-tls` (CRDT_TLS=1, see harness.h); this file covers what only TLS has.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "waiters.h"

/* Options for the TLS port of srv, trusting this run's CA. */
static void tls_options(crd_options *o, const crdt_server *srv, char *url, size_t cap)
{
    crd_options_init(o);
    snprintf(url, cap, "rediss://127.0.0.1:%d", srv->tls_port);
    o->url = url;
    o->tls_ca_file = crdt_tls_file("ca.crt");
    /* Stretched under memcheck: a TLS handshake there can outlast 2 s on a busy machine,
     * and the tests below assert what a refusal is called, not how fast it comes. */
    o->connect_timeout_ms = crdt_scaled_ms(2000);
    o->command_timeout_ms = crdt_scaled_ms(3000);
    /* No identity record, as crdt_options: the fork test reads the parent's TLS traffic,
     * and a record write in flight at fork is the parent's (memcheck counted it as the
     * child's leak). */
    o->identity = false;
}

/* crd_client_new must fail with want; returns its message (copied into msg). */
static void expect_failure(const crd_options *o, crd_status want, char *msg, size_t cap)
{
    crd_client *c = NULL;
    crd_status st = crd_client_new(o, &c);
    snprintf(msg, cap, "%s", c != NULL ? crd_client_errmsg(c) : "(no client)");
    crd_client_free(c);
    cr_log_info("%s: %s", crd_strerror(st), msg);
    cr_assert_eq(st, want, "crd_client_new: %s, want %s; message: %s", crd_strerror(st),
                 crd_strerror(want), msg);
}

#define EXPECT_WORDS(msg, words) \
    cr_assert(strstr((msg), (words)) != NULL, "message \"%s\" does not say \"%s\"", (msg), (words))

static void start_tls(crdt_server *srv, const char *const *extra)
{
    crdt_server_start_tls(srv, crdt_tls_certs(), extra, NULL, NULL);
}

/* One test's TLS server (extra: its redis-server arguments), options for its TLS port
 * trusting this run's CA, and the client and lock tls_open makes; tls_close frees them
 * and stops the server. */
typedef struct {
    crdt_server srv;
    char url[128], msg[512];
    crd_options o;
    crd_client *c;
    crd_lock *l;
} tls_fixture;

static void tls_setup(tls_fixture *f, const char *const *extra)
{
    start_tls(&f->srv, extra);
    tls_options(&f->o, &f->srv, f->url, sizeof f->url);
    f->c = NULL;
    f->l = NULL;
}

/* A client with f's options and a lock on crdt_key(name). */
static void tls_open(tls_fixture *f, const char *name)
{
    f->c = crdt_client_opts(&f->o);
    f->l = crdt_lock(f->c, crdt_key(name));
}

static void tls_teardown(tls_fixture *f)
{
    crd_lock_free(f->l);
    crd_client_free(f->c);
    crdt_server_stop(&f->srv);
}

/* crd_client_new with f's options must fail with want; its message lands in f->msg. */
static void tls_refused(tls_fixture *f, crd_status want)
{
    expect_failure(&f->o, want, f->msg, sizeof f->msg);
}

/* ---------------------------------------------------------------------------------- */
/* Working connections                                                                */
/* ---------------------------------------------------------------------------------- */

Test(tls, a_verified_connection_takes_and_gives_back_a_lock)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    tls_open(&f, "l");
    cr_assert_eq(crd_lock_acquire(f.l, 0, 10000), CRD_OK, "%s", crd_client_errmsg(f.c));
    redisContext *r = crdt_redis_port(f.srv.port);
    cr_assert_eq(crdt_exists(r, crdt_key("l")), 1);
    cr_assert_eq(crd_lock_release(f.l), CRD_OK, "%s", crd_client_errmsg(f.c));
    cr_assert_eq(crdt_exists(r, crdt_key("l")), 0);
    redisFree(r);
    tls_teardown(&f);
}

Test(tls, the_host_name_of_the_url_is_checked_against_the_certificates_dns_name)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    snprintf(f.url, sizeof f.url, "rediss://localhost:%d", f.srv.tls_port);
    crd_client_free(crdt_client_opts(&f.o));
    /* The same through host/port and the tls switch. */
    crdt_options_plain(&f.o, f.srv.tls_port);
    f.o.tls = true;
    f.o.tls_ca_file = crdt_tls_file("ca.crt");
    f.o.tls_server_name = "localhost";
    crd_client_free(crdt_client_opts(&f.o));
    tls_teardown(&f);
}

Test(tls, mutual_tls_connects_with_the_client_certificate)
{
    tls_fixture f;
    const char *extra[] = {"--tls-auth-clients", "yes", NULL};
    tls_setup(&f, extra);
    f.o.tls_cert_file = crdt_tls_file("client.crt");
    f.o.tls_key_file = crdt_tls_file("client.key");
    tls_open(&f, "m");
    cr_assert_eq(crd_lock_acquire(f.l, 0, 10000), CRD_OK, "%s", crd_client_errmsg(f.c));
    cr_assert_eq(crd_lock_release(f.l), CRD_OK, "%s", crd_client_errmsg(f.c));
    tls_teardown(&f);
}

Test(tls, the_insecure_switch_accepts_a_certificate_nobody_vouches_for)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    f.o.tls_ca_file = crdt_tls_file("other-ca.crt");
    f.o.tls_server_name = "wrong.example";
    f.o.tls_insecure_skip_verify = true;
    crd_client_free(crdt_client_opts(&f.o));
    tls_teardown(&f);
}

/* ---------------------------------------------------------------------------------- */
/* Failures, each in words                                                            */
/* ---------------------------------------------------------------------------------- */

Test(tls, a_server_certificate_from_an_unknown_ca_is_refused)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    f.o.tls_ca_file = crdt_tls_file("other-ca.crt");
    tls_refused(&f, CRD_AUTH);
    EXPECT_WORDS(f.msg, "certificate verify failed");
    /* The server sends its CA along (Redis builds the chain from --tls-ca-cert-file). */
    cr_assert(strstr(f.msg, "self-signed certificate in certificate chain") != NULL ||
                  strstr(f.msg, "unable to get local issuer certificate") != NULL,
              "message \"%s\" does not name the unknown issuer", f.msg);
    tls_teardown(&f);
}

Test(tls, a_certificate_for_another_name_is_refused)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    f.o.tls_server_name = "redis.example.com";
    tls_refused(&f, CRD_AUTH);
    EXPECT_WORDS(f.msg, "hostname mismatch");
    EXPECT_WORDS(f.msg, "redis.example.com");
    /* An address the certificate does not list. */
    f.o.tls_server_name = "127.0.0.2";
    tls_refused(&f, CRD_AUTH);
    EXPECT_WORDS(f.msg, "IP address mismatch");
    tls_teardown(&f);
}

Test(tls, an_expired_server_certificate_is_refused)
{
    tls_fixture f;
    const char *extra[] = {"--tls-cert-file", crdt_tls_file("expired.crt"), NULL};
    tls_setup(&f, extra);
    tls_refused(&f, CRD_AUTH);
    EXPECT_WORDS(f.msg, "certificate has expired");
    tls_teardown(&f);
}

Test(tls, a_server_that_requires_a_client_certificate_refuses_a_client_without_one)
{
    tls_fixture f;
    const char *extra[] = {"--tls-auth-clients", "yes", NULL};
    tls_setup(&f, extra);
    tls_refused(&f, CRD_AUTH);
    EXPECT_WORDS(f.msg, "client certificate");
    EXPECT_WORDS(f.msg, "tls_cert_file");
    tls_teardown(&f);
}

Test(tls, a_plaintext_client_on_the_tls_port_is_told_to_use_rediss)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    crd_options_init(&f.o);
    snprintf(f.url, sizeof f.url, "redis://127.0.0.1:%d", f.srv.tls_port);
    f.o.url = f.url;
    tls_refused(&f, CRD_IO);
    EXPECT_WORDS(f.msg, "use rediss://");
    tls_teardown(&f);
}

Test(tls, a_tls_client_on_a_plaintext_port_is_told_the_server_does_not_speak_tls)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    snprintf(f.url, sizeof f.url, "rediss://127.0.0.1:%d", f.srv.port);
    /* Redis reads the ClientHello as the start of an inline command and waits for its
     * end: the handshake runs out of time. */
    f.o.connect_timeout_ms = 400;
    tls_refused(&f, CRD_IO);
    EXPECT_WORDS(f.msg, "does the server speak TLS on this port?");
    tls_teardown(&f);
}

Test(tls, a_handshake_that_never_completes_ends_at_the_connect_timeout)
{
    /* A listener that never accepts: the kernel completes the TCP handshake from its
     * backlog, and nobody ever answers the ClientHello. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 4) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    char url[128], msg[512];
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d", ntohs(a.sin_port));
    crd_options o;
    crd_options_init(&o);
    o.url = url;
    o.tls_ca_file = crdt_tls_file("ca.crt");
    o.connect_timeout_ms = 300;
    int64_t t0 = crdt_now_ms();
    expect_failure(&o, CRD_IO, msg, sizeof msg);
    int64_t took = crdt_now_ms() - t0;
    EXPECT_WORDS(msg, "TLS handshake timed out");
    cr_assert(took >= 290 && took < 2500, "the failed start took %lld ms", (long long)took);
    close(fd);
}

Test(tls, unreadable_files_and_a_key_of_another_certificate_are_invalid_arguments)
{
    char msg[512];
    crd_options o;
    crd_options_init(&o);
    o.url = "rediss://127.0.0.1:1";
    o.tls_ca_file = "/nonexistent/ca.crt";
    expect_failure(&o, CRD_INVALID_ARGUMENT, msg, sizeof msg);
    EXPECT_WORDS(msg, "/nonexistent/ca.crt");
    o.tls_ca_file = crdt_tls_file("ca.crt");
    o.tls_cert_file = crdt_tls_file("client.crt");
    o.tls_key_file = crdt_tls_file("server.key");
    expect_failure(&o, CRD_INVALID_ARGUMENT, msg, sizeof msg);
    EXPECT_WORDS(msg, "does not match");
    cr_assert(strstr(msg, "PRIVATE KEY") == NULL, "the message shows key material: %s", msg);
    o.tls_key_file = NULL;
    expect_failure(&o, CRD_INVALID_ARGUMENT, msg, sizeof msg);
    EXPECT_WORDS(msg, "tls_key_file");
    /* TLS over a unix socket: Redis has none. */
    crd_options_init(&o);
    o.unix_path = "/tmp/nonexistent.sock";
    o.tls = true;
    expect_failure(&o, CRD_INVALID_ARGUMENT, msg, sizeof msg);
    EXPECT_WORDS(msg, "unix socket");
}

/* ---------------------------------------------------------------------------------- */
/* Waking and renewing over TLS                                                       */
/* ---------------------------------------------------------------------------------- */

Test(tls, a_blocked_waiter_is_woken_through_the_tls_subscriber_connection)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    tls_open(&f, "wake");
    crd_client *b = crdt_client_opts(&f.o);
    const char *key = crdt_key("wake");
    crd_lock *lb = crdt_lock(b, key);
    cr_assert_eq(crd_lock_acquire(f.l, 0, CRD_LEASE_WATCHDOG), CRD_OK);

    crdt_waiter w = {.lock = lb, .wait_ms = 20000, .lease_ms = 20000, .client = b};
    crdt_waiter_start(&w);
    /* Blocked once its subscription is live on the server. */
    redisContext *r = crdt_redis_port(f.srv.port);
    char channel[300];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", key);
    cr_assert(crdt_await_subscribed(r, channel, 5000), "the waiter never subscribed");
    cr_assert(!crdt_waiter_returned(&w));
    int64_t t0 = crdt_now_ms();
    cr_assert_eq(crd_lock_release(f.l), CRD_OK);
    /* The lease left is 30 s (watchdog): only the unlock message can wake it this soon. */
    cr_assert(crdt_waiter_wait(&w, CRDT_WAITER_RETURNED, 3000), "the waiter was not woken");
    cr_assert_eq(w.acquire_st, CRD_OK);
    cr_log_info("woken %lld ms after the release", (long long)(w.t_acq_ms - t0));
    crdt_waiter_join(&w, 5000, "tls waiter");
    redisFree(r);
    crd_lock_free(lb);
    crd_client_free(b);
    tls_teardown(&f);
}

Test(tls, the_watchdog_renews_a_hold_over_tls)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    const int64_t timeout = crdt_scaled_ms(900);
    f.o.watchdog_timeout_ms = timeout;
    tls_open(&f, "renew");
    cr_assert_eq(crd_lock_acquire(f.l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    /* Three renewals take about one lease: the key outlives its first TTL. */
    cr_assert(crdt_await_metric(f.c, CRDT_METRIC(renewals), 3, UINT64_MAX, timeout * 4),
              "fewer than 3 renewals");
    redisContext *r = crdt_redis_port(f.srv.port);
    long long ttl = crdt_pttl(r, crdt_key("renew"));
    redisFree(r);
    cr_assert(ttl > 0 && ttl <= timeout, "PTTL %lld after the renewals", ttl);
    crd_metrics m;
    crd_client_metrics(f.c, &m, sizeof m);
    cr_assert_eq(m.renewal_failures, 0);
    cr_assert_eq(crd_lock_release(f.l), CRD_OK);
    tls_teardown(&f);
}

/* ---------------------------------------------------------------------------------- */
/* fork()                                                                             */
/* ---------------------------------------------------------------------------------- */

/* The child's options (made by the parent: the child only connects) and lock name. */
struct child_arg {
    crd_options o;
    const char *key;
};

static int child_main(void *arg)
{
    struct child_arg *a = arg;
    if (CRDT_FORK_CHILD_LIMITED)
        return 0; /* a new client starts threads (harness.h; seen in CI inside OpenSSL's
                   * handshake); the parent's half (its sessions untouched) runs here */
    crd_client *c;
    crd_lock *l;
    int open = crdt_plain_open(&a->o, a->key, crd_lock_new, &c, &l);
    if (open != 0)
        return 1 + open; /* 2: the client, 3: the lock */
    int rc = crd_lock_acquire(l, 5000, 5000) == CRD_OK && crd_lock_release(l) == CRD_OK ? 0 : 4;
    crd_lock_free(l);
    crd_client_free(c);
    return rc;
}

Test(tls, a_forked_child_never_writes_on_the_parents_tls_sessions)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    f.o.pool_size = 2;
    tls_open(&f, "parent");
    /* Every connection of the parent is open and has talked: pool, subscriber, watchdog. */
    cr_assert_eq(crd_lock_acquire(f.l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    struct child_arg a = {.key = crdt_key("child")};
    crd_options_init(&a.o);
    a.o.url = f.url;
    a.o.tls_ca_file = crdt_tls_file("ca.crt");
    pid_t pid = crdt_fork(child_main, &a);
    cr_assert_eq(crdt_wait_child(pid, crdt_scaled_ms(20000)), 0, "the child failed");
    /* A close_notify or any byte from the child would have broken these sessions. */
    for (int i = 0; i < 4; i++) {
        bool held = false;
        cr_assert_eq(crd_lock_is_held(f.l, &held), CRD_OK, "%s", crd_client_errmsg(f.c));
        cr_assert(held);
    }
    cr_assert_eq(crd_lock_release(f.l), CRD_OK, "%s", crd_client_errmsg(f.c));
    crd_metrics m;
    crd_client_metrics(f.c, &m, sizeof m);
    cr_assert_eq(m.connection_failures, 0, "the parent lost a connection");
    tls_teardown(&f);
}

/* ---------------------------------------------------------------------------------- */
/* The CLI                                                                            */
/* ---------------------------------------------------------------------------------- */

/* Runs the CLI with sh -c; returns its exit status, its stderr in err. */
static int cli_sh(const char *args, char *err, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s", CRD_CLI_PATH, args);
    return crdt_run_stderr(cmd, err, cap);
}

Test(tls, the_cli_runs_every_command_over_verified_tls_with_redis_cli_flags)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    char args[1024], err[1024];
    const char *name = crdt_key("cli");
    const char *cmds[4][2] = {{"run", "-- true"}, {"status", ""}, {"list", ""},
                              {"watch --timeout 300", ""}};
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "--url rediss://127.0.0.1:%d --cacert %s %s '%s' %s",
                 f.srv.tls_port, crdt_tls_file("ca.crt"), cmds[i][0], name, cmds[i][1]);
        cr_expect_eq(cli_sh(args, err, sizeof err), 0, "%s: %s", args, err);
    }
    /* mutual TLS and an explicit server name */
    crdt_server mtls;
    const char *req[] = {"--tls-auth-clients", "yes", NULL};
    start_tls(&mtls, req);
    snprintf(args, sizeof args,
             "--url rediss://127.0.0.1:%d --cacert %s --cert %s --key %s run '%s' -- true",
             mtls.tls_port, crdt_tls_file("ca.crt"), crdt_tls_file("client.crt"),
             crdt_tls_file("client.key"), name);
    cr_expect_eq(cli_sh(args, err, sizeof err), 0, "%s", err);
    crdt_server_stop(&mtls);
    tls_teardown(&f);
}

Test(tls, a_tls_failure_in_the_cli_exits_69_and_names_the_problem)
{
    tls_fixture f;
    tls_setup(&f, NULL);
    char args[1024], err[1024];
    const char *name = crdt_key("clifail");
    /* the system's CAs do not vouch for this run's CA */
    snprintf(args, sizeof args, "--url rediss://127.0.0.1:%d run '%s' -- true", f.srv.tls_port,
             name);
    cr_expect_eq(cli_sh(args, err, sizeof err), 69, "%s", err);
    EXPECT_WORDS(err, "certificate verify failed");
    /* a name the certificate does not carry */
    snprintf(args, sizeof args, "--url rediss://127.0.0.1:%d --cacert %s --sni nowhere.invalid "
             "status '%s'", f.srv.tls_port, crdt_tls_file("ca.crt"), name);
    cr_expect_eq(cli_sh(args, err, sizeof err), 69, "%s", err);
    EXPECT_WORDS(err, "mismatch");
    /* --insecure accepts it (tests only) */
    snprintf(args, sizeof args, "--url rediss://127.0.0.1:%d --insecure run '%s' -- true",
             f.srv.tls_port, name);
    cr_expect_eq(cli_sh(args, err, sizeof err), 0, "%s", err);
    /* TLS flags without rediss:// are a usage error */
    snprintf(args, sizeof args, "--url redis://127.0.0.1:%d --cacert %s status '%s'",
             f.srv.tls_port, crdt_tls_file("ca.crt"), name);
    cr_expect_eq(cli_sh(args, err, sizeof err), 64, "%s", err);
    tls_teardown(&f);
}
