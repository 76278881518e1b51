/*
 * test_client.c -- the client: option defaults, the URL forms, AUTH with a password
 * and with an ACL user, unix sockets, SELECT, connection failures, failed clients,
 * client UUIDs, owner ids, shutdown of blocked waiters and of held locks.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "waiters.h"

/* A loopback port nobody listens on. */
static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* crd_client_new with a URL (other fields from crdt_options). */
static crd_status client_from_url(const char *url, crd_client **out)
{
    crd_options o;
    crdt_options(&o);
    o.url = url;
    return crd_client_new(&o, out);
}

/* Take and release a lock on c; returns the acquire's status. */
static crd_status lock_roundtrip(crd_client *c, const char *key)
{
    crd_lock *l = NULL;
    crd_status st = crd_lock_new(c, key, &l);
    if (st != CRD_OK)
        return st;
    st = crd_lock_acquire(l, 0, 10000);
    if (st == CRD_OK)
        cr_assert_eq(crd_lock_release(l), CRD_OK);
    crd_lock_free(l);
    return st;
}

/* A client made from o (the caller's options) takes and releases key; freed. */
static void opts_lock(const crd_options *o, const char *key)
{
    crd_client *c = NULL;
    cr_assert_eq(crd_client_new(o, &c), CRD_OK, "%s", crd_client_errmsg(c));
    cr_assert_eq(lock_roundtrip(c, key), CRD_OK);
    crd_client_free(c);
}

/* The same for a client made from url. */
static void url_locks(const char *url, const char *key)
{
    crd_client *c = NULL;
    cr_assert_eq(client_from_url(url, &c), CRD_OK, "%s: %s", url, crd_client_errmsg(c));
    cr_assert_eq(lock_roundtrip(c, key), CRD_OK);
    crd_client_free(c);
}

/* A client made from url fails with want (what says why it should); freed. */
static void url_refused(const char *url, crd_status want, const char *what)
{
    crd_client *c = NULL;
    cr_assert_eq(client_from_url(url, &c), want, "%s", what);
    crd_client_free(c);
}

static bool is_v4_uuid(const char *s)
{
    if (s == NULL || strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        char ch = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (ch != '-')
                return false;
        } else if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) {
            return false;
        }
    }
    return s[14] == '4' && strchr("89ab", s[19]) != NULL;
}

Test(client, options_init_fills_the_documented_defaults)
{
    crd_options o;
    memset(&o, 0xa5, sizeof o);
    cr_assert_eq(crd_options_init(&o), CRD_OK);
    cr_assert_null(o.url);
    cr_assert_str_eq(o.host, "127.0.0.1");
    cr_assert_eq(o.port, 6379);
    cr_assert_null(o.unix_path);
    cr_assert_null(o.username);
    cr_assert_null(o.password);
    cr_assert_eq(o.db, 0);
    cr_assert_eq(o.connect_timeout_ms, 2000);
    cr_assert_eq(o.command_timeout_ms, 3000);
    cr_assert_eq(o.pool_size, 2);
    cr_assert_eq(o.watchdog_timeout_ms, 30000);
    cr_assert_eq(o.subscription_timeout_ms, 7500);
    cr_assert_eq(o.poll_interval_ms, 1000);
    cr_assert_eq(o.max_wait_slice_ms, 0);
    cr_assert_not(o.allow_unsafe_names);
    cr_assert_not(o.release_on_close);
    cr_assert_not(o.release_on_thread_exit);
    cr_assert_null(o.on_event);
    cr_assert_null(o.event_user_data);
    cr_assert_null(o.on_trace);
    cr_assert_null(o.trace_user_data);
}

Test(client, two_clients_have_different_lowercase_v4_uuids)
{
    crdt_fixture f;
    crdt_fixture_open(&f, 2, "L", crdt_lock);
    const char *ia = crd_client_id(f.a);
    const char *ib = crd_client_id(f.b);
    cr_assert(is_v4_uuid(ia), "'%s' is not a lowercase v4 UUID", ia);
    cr_assert(is_v4_uuid(ib), "'%s' is not a lowercase v4 UUID", ib);
    cr_assert_str_neq(ia, ib);
    /* The same thread is a different owner through each client. */
    cr_assert_eq(crd_lock_acquire(f.la, 0, 10000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(f.lb, 0, 10000), CRD_BUSY);
    cr_assert_eq(crd_lock_release(f.la), CRD_OK);
    crdt_fixture_close(&f);
}

Test(client, a_url_with_a_database_puts_the_lock_in_that_database)
{
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", crdt_port());
    crd_client *c = NULL;
    cr_assert_eq(client_from_url(url, &c), CRD_OK, "%s: %s", url, crd_client_errmsg(c));
    const char *key = crdt_key("L");
    crd_lock *l = crdt_lock(c, key);
    cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_OK);

    redisContext *r = crdt_redis();
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", key), 0, "not in db 0");
    freeReplyObject(crdt_cmd(r, "SELECT 3"));
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", key), 1, "in db 3");
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", key), 0);
    crd_lock_free(l);
    crd_client_free(c);

    /* The db field without a URL does the same. */
    crd_options o;
    crdt_options(&o);
    o.db = 5;
    c = crdt_client_opts(&o);
    l = crdt_lock(c, key);
    cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_OK);
    freeReplyObject(crdt_cmd(r, "SELECT 5"));
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", key), 1, "in db 5");
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    crd_lock_free(l);
    crd_client_free(c);
    redisFree(r);
}

Test(client, a_url_overrides_host_and_port)
{
    crd_options o;
    crdt_options(&o);
    o.host = "203.0.113.1"; /* TEST-NET-3: would never answer */
    o.port = dead_port();
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", crdt_port());
    o.url = url;
    crd_client *c = NULL;
    opts_lock(&o, crdt_key("L"));

    snprintf(url, sizeof url, "redis://localhost:%d/0", crdt_port());
    c = NULL;
    cr_assert_eq(client_from_url(url, &c), CRD_OK, "%s: %s", url, crd_client_errmsg(c));
    crd_client_free(c);
}

Test(client, malformed_urls_are_invalid_arguments_and_leave_a_failed_client)
{
    char bad_port[64], bad_db[64], bad_db2[64], extra[64], bad_escape[96], v[64];
    int p = crdt_port();
    snprintf(bad_port, sizeof bad_port, "redis://127.0.0.1:%dx", p);
    snprintf(bad_db, sizeof bad_db, "redis://127.0.0.1:%d/abc", p);
    snprintf(bad_db2, sizeof bad_db2, "redis://127.0.0.1:%d/-1", p);
    snprintf(extra, sizeof extra, "redis://127.0.0.1:%d/1/2", p);
    snprintf(bad_escape, sizeof bad_escape, "redis://:pa%%zzss@127.0.0.1:%d", p);
    snprintf(v, sizeof v, "rediss//127.0.0.1:%d", p);
    const char *urls[] = {"",
                          "http://127.0.0.1:6379",
                          "redis:/127.0.0.1:6379",
                          v,
                          "redis://127.0.0.1:99999",
                          "redis://127.0.0.1:-1",
                          bad_port,
                          bad_db,
                          bad_db2,
                          extra,
                          bad_escape,
                          "unix://",
                          "unix://relative/path.sock",
                          "unix:///tmp/x.sock?db=zz",
                          "unix:///tmp/x.sock?db=-3"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        crd_client *c = NULL;
        int64_t t0 = crdt_now_ms();
        crd_status st = client_from_url(urls[i], &c);
        cr_assert_eq(st, CRD_INVALID_ARGUMENT, "url '%s' gave %s", urls[i], crd_strerror(st));
        cr_assert(crdt_now_ms() - t0 < 500, "url '%s' was not rejected up front", urls[i]);
        cr_assert_not_null(c, "a failed client is still returned");
        cr_assert_str_neq(crd_client_errmsg(c), "", "url '%s': no detail", urls[i]);
        crd_lock *l = NULL;
        cr_assert_eq(crd_lock_new(c, "x", &l), CRD_CLOSED);
        crd_client_free(c);
    }
}

Test(client, invalid_numeric_options_are_rejected)
{
    crd_options o;
    crd_client *c;
#define BAD_OPTION(stmt)                                                                   \
    do {                                                                                   \
        crdt_options(&o);                                                                  \
        stmt;                                                                              \
        c = NULL;                                                                          \
        crd_status st_ = crd_client_new(&o, &c);                                           \
        cr_assert_eq(st_, CRD_INVALID_ARGUMENT, "%s gave %s", #stmt, crd_strerror(st_));   \
        crd_client_free(c);                                                                \
    } while (0)
    BAD_OPTION(o.port = -1);
    BAD_OPTION(o.port = 70000);
    BAD_OPTION(o.db = -1);
    BAD_OPTION(o.pool_size = -1);
    BAD_OPTION(o.connect_timeout_ms = -1);
    BAD_OPTION(o.command_timeout_ms = -1);
    BAD_OPTION(o.watchdog_timeout_ms = -1);
    BAD_OPTION(o.poll_interval_ms = -1);
    BAD_OPTION(o.subscription_timeout_ms = -1);
    BAD_OPTION(o.connect_timeout_ms = CRD_DURATION_MAX_MS + 1);
#undef BAD_OPTION
}

Test(client, an_unreachable_port_fails_with_io_within_the_connect_timeout)
{
    crd_options o;
    crdt_options(&o);
    o.port = dead_port();
    o.connect_timeout_ms = 500;
    crd_client *c = NULL;
    int64_t t0 = crdt_now_ms();
    crd_status st = crd_client_new(&o, &c);
    int64_t took = crdt_now_ms() - t0;
    cr_assert_eq(st, CRD_IO, "got %s", crd_strerror(st));
    cr_assert(took < 1500, "took %" PRId64 " ms", took);
    cr_assert_not_null(c);
    cr_assert_str_neq(crd_client_errmsg(c), "");
    crd_lock *l = NULL;
    cr_assert_eq(crd_lock_new(c, "x", &l), CRD_CLOSED, "every call on a failed client");
    crd_client_free(c);

    /* An address that never answers: bounded by the connect timeout. */
    crdt_options(&o);
    o.host = "203.0.113.1";
    o.connect_timeout_ms = 300;
    c = NULL;
    t0 = crdt_now_ms();
    st = crd_client_new(&o, &c);
    took = crdt_now_ms() - t0;
    cr_assert_eq(st, CRD_IO, "got %s", crd_strerror(st));
    cr_assert(took < 1500, "took %" PRId64 " ms with a 300 ms connect timeout", took);
    crd_client_free(c);
}

Test(client, a_password_server_accepts_the_right_password_and_refuses_a_wrong_one)
{
    crdt_server s;
    const char *args[] = {"--requirepass", "p@ss w", NULL};
    crdt_server_start(&s, false, args, NULL, "p@ss w");
    char url[160];
    crd_client *c = NULL;

    snprintf(url, sizeof url, "redis://:p%%40ss%%20w@127.0.0.1:%d", s.port);
    url_locks(url, crdt_key("L"));

    crd_options o;
    crdt_options(&o);
    o.port = s.port;
    o.password = "p@ss w";
    opts_lock(&o, crdt_key("L2"));

    snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d", s.port);
    c = NULL;
    cr_assert_eq(client_from_url(url, &c), CRD_AUTH, "wrong password");
    cr_assert_str_neq(crd_client_errmsg(c), "");
    crd_client_free(c);

    /* No password at all: the client must not report success for lock operations. */
    o.password = NULL;
    c = NULL;
    crd_status st = crd_client_new(&o, &c);
    if (st == CRD_OK) {
        crd_status ls = lock_roundtrip(c, crdt_key("L3"));
        cr_assert_neq(ls, CRD_OK, "NOAUTH must not look like an acquired lock");
    } else {
        cr_assert_eq(st, CRD_AUTH, "no password gave %s", crd_strerror(st));
    }
    crd_client_free(c);
    crdt_server_stop(&s);
}

Test(client, an_acl_user_logs_in_with_its_password_only)
{
    crdt_server s;
    const char *args[] = {"--user", "alice", "on", ">wonder%land", "~*", "&*", "+@all", NULL};
    crdt_server_start(&s, false, args, "alice", "wonder%land");
    char url[160];
    crd_client *c = NULL;

    snprintf(url, sizeof url, "redis://alice:wonder%%25land@127.0.0.1:%d/2", s.port);
    cr_assert_eq(client_from_url(url, &c), CRD_OK, "%s: %s", url, crd_client_errmsg(c));
    const char *key = crdt_key("L");
    cr_assert_eq(lock_roundtrip(c, key), CRD_OK);
    crd_client_free(c);

    crd_options o;
    crdt_options(&o);
    o.port = s.port;
    o.username = "alice";
    o.password = "wonder%land";
    opts_lock(&o, key);

    snprintf(url, sizeof url, "redis://alice:wrong@127.0.0.1:%d", s.port);
    url_refused(url, CRD_AUTH, "wrong password");
    snprintf(url, sizeof url, "redis://bob:wonder%%25land@127.0.0.1:%d", s.port);
    url_refused(url, CRD_AUTH, "unknown user");
    crdt_server_stop(&s);
}

Test(client, a_unix_socket_url_connects_and_selects_the_database)
{
    crdt_server s;
    crdt_server_start(&s, true, NULL, NULL, NULL);
    char url[400];
    snprintf(url, sizeof url, "unix://%s?db=4", s.unix_path);
    crd_client *c = NULL;
    cr_assert_eq(client_from_url(url, &c), CRD_OK, "%s: %s", url, crd_client_errmsg(c));
    const char *key = crdt_key("L");
    crd_lock *l = crdt_lock(c, key);
    cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_OK);
    redisContext *r = crdt_redis_port(s.port);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", key), 0);
    freeReplyObject(crdt_cmd(r, "SELECT 4"));
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", key), 1, "the lock is in db 4");
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    crd_lock_free(l);
    crd_client_free(c);

    /* The unix_path field without a URL; host and port are ignored. */
    crd_options o;
    crdt_options(&o);
    o.unix_path = s.unix_path;
    o.port = dead_port();
    opts_lock(&o, key);

    snprintf(url, sizeof url, "unix://%s/missing.sock", s.dir);
    url_refused(url, CRD_IO, "a socket that does not exist");
    redisFree(r);
    crdt_server_stop(&s);
}

Test(client, a_unix_socket_url_carries_a_password_or_an_acl_user)
{
    crdt_server s;
    const char *extra[] = {"--requirepass", "p@ss w", "--user", "alice", "on", ">wonder@land",
                           "~*", "&*", "+@all", NULL};
    crdt_server_start(&s, true, extra, NULL, "p@ss w");
    char url[400];
    crd_client *c = NULL;
    /* The password alone (the default user), with its '@' and ' ' escaped. */
    snprintf(url, sizeof url, "unix://:p%%40ss%%20w@%s?db=2", s.unix_path);
    cr_assert_eq(client_from_url(url, &c), CRD_OK, "%s: %s", url, crd_client_errmsg(c));
    const char *key = crdt_key("U");
    cr_assert_eq(lock_roundtrip(c, key), CRD_OK, "%s", crd_client_errmsg(c));
    crd_client_free(c);
    /* user:password; the path itself may hold an '@' after the first "@/". */
    snprintf(url, sizeof url, "unix://alice:wonder%%40land@%s", s.unix_path);
    c = NULL;
    cr_assert_eq(client_from_url(url, &c), CRD_OK, "%s: %s", url, crd_client_errmsg(c));
    cr_assert_eq(lock_roundtrip(c, key), CRD_OK, "%s", crd_client_errmsg(c));
    crd_client_free(c);
    /* A wrong password is CRD_AUTH, as over TCP; none at all is refused by the PING. */
    snprintf(url, sizeof url, "unix://alice:nope@%s", s.unix_path);
    c = NULL;
    cr_assert_eq(client_from_url(url, &c), CRD_AUTH, "wrong password: %s", crd_client_errmsg(c));
    crd_client_free(c);
    snprintf(url, sizeof url, "unix://%s", s.unix_path);
    c = NULL;
    cr_assert_eq(client_from_url(url, &c), CRD_AUTH, "no password: %s", crd_client_errmsg(c));
    crd_client_free(c);
    crdt_server_stop(&s);
}

struct id_slot {
    uint64_t id;
    uint64_t again;
};

static void *record_owner(void *arg)
{
    struct id_slot *s = arg;
    s->id = crd_owner_current();
    s->again = crd_owner_current();
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

Test(client, owner_ids_are_unique_across_a_thousand_threads_created_and_exited)
{
    enum { N = 1000, BATCH = 8, NEW = 100 };
    static struct id_slot slots[N];
    crdt_threads_run(N, BATCH, record_owner, slots, sizeof slots[0]);
    static uint64_t all[N + NEW + 1];
    size_t n = 0;
    for (int i = 0; i < N; i++) {
        cr_assert_neq(slots[i].id, 0);
        cr_assert_eq(slots[i].id, slots[i].again, "a thread keeps its id");
        all[n++] = slots[i].id;
    }
    for (int i = 0; i < NEW; i++) {
        all[n] = crd_owner_new();
        cr_assert_neq(all[n], 0);
        n++;
    }
    all[n++] = crd_owner_current();
    qsort(all, n, sizeof all[0], cmp_u64);
    for (size_t i = 1; i < n; i++)
        cr_assert_neq(all[i], all[i - 1], "owner id %" PRIu64 " was handed out twice", all[i]);
}

struct blocked_pair {
    crdt_tracelog *log;
    crd_client *c;
};

/* The head of the local queue sent its attempt and its re-check after subscribing; the
 * other thread queued behind it (local_fifo). */
static bool both_blocked(void *arg)
{
    struct blocked_pair *p = arg;
    crd_metrics m;
    crd_client_metrics(p->c, &m, sizeof m);
    return crdt_tracelog_count_scripts(p->log, 0) >= 2 && m.local_queued >= 1;
}

Test(client, freeing_a_client_wakes_its_blocked_waiters_with_closed)
{
    crd_client *holder = crdt_client();
    crd_options o;
    crdt_tracelog *log = crdt_traced_options(&o);
    crd_client *c = crdt_client_opts(&o);
    const char *key = crdt_key("L");
    crd_lock *lh = crdt_lock(holder, key);
    crd_lock *l = crdt_lock(c, key);
    cr_assert_eq(crd_lock_acquire(lh, 0, 20000), CRD_OK);

    crdt_waiter b1 = {.lock = l, .wait_ms = CRD_WAIT_FOREVER, .lease_ms = 10000, .hold = true};
    crdt_waiter b2 = b1;
    crdt_waiter_start(&b1);
    crdt_waiter_start(&b2);
    redisContext *r = crdt_redis();
    char channel[300];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", key);
    cr_assert(crdt_await_subscribed(r, channel, 5000), "the waiters never subscribed");
    /* Both threads are inside the wait once the first has sent its attempt and its
     * re-check after the subscription and the second has queued behind it. Freeing the
     * client before a thread has even entered crd_lock_acquire would be a use after free
     * by the test itself. */
    struct blocked_pair bp = {log, c};
    cr_assert(crdt_wait_until(both_blocked, &bp, 5000), "the waiters never both blocked");
    /* And asleep: a thread still handling its re-check's reply is inside a call. */
    cr_assert(crdt_await_waiting(c, 2, 5000), "the waiters never both slept");

    int64_t t0 = crdt_now_ms();
    crd_client_free(c);
    crdt_waiter_join(&b1, 30000, NULL);
    crdt_waiter_join(&b2, 30000, NULL);
    cr_assert_eq(b1.acquire_st, CRD_CLOSED);
    cr_assert_eq(b2.acquire_st, CRD_CLOSED);
    cr_assert(b1.t_acq_ms - t0 < 2000 && b2.t_acq_ms - t0 < 2000, "waiters woke late");
    crd_lock_free(l);

    cr_assert_eq(crd_lock_release(lh), CRD_OK);
    crd_lock_free(lh);
    crd_client_free(holder);
    redisFree(r);
    crdt_tracelog_free(log);
    cr_assert(crdt_pubsub_channels_empty(channel));
}

Test(client, closing_a_client_stops_renewal_and_lets_held_locks_expire)
{
    /* acquire .. free .. EXISTS must fit inside the lease: stretched under valgrind. */
    const int64_t lease = crdt_scaled_ms(600);
    crd_options o;
    crdt_options(&o);
    o.watchdog_timeout_ms = lease;
    crd_client *c = crdt_client_opts(&o);
    redisContext *r = crdt_redis();
    const char *key = crdt_key("L");
    crd_lock *l = crdt_lock(c, key);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crd_lock_free(l);
    crd_client_free(c);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", key), 1, "no blind unlock on close by default");
    int64_t t0 = crdt_now_ms();
    cr_assert(crdt_await_exists(r, key, false, 5 * lease), "the lock was still renewed");
    cr_assert(crdt_now_ms() - t0 <= lease + 400, "expired later than its %lld ms lease",
              (long long)lease);
    redisFree(r);
}

Test(client, release_on_close_releases_held_locks_with_owner_checked_unlocks)
{
    crd_options o;
    crdt_options(&o);
    o.release_on_close = true;
    crdt_tracelog *tl = crdt_tracelog_new();
    crdt_tracelog_attach(tl, &o);
    crd_client *c = crdt_client_opts(&o);
    redisContext *r = crdt_redis();
    const char *key = crdt_key("L");
    crd_lock *l = crdt_lock(c, key);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crd_lock_free(l);
    crd_client_free(c);
    cr_assert_eq(crdt_cmd_int(r, "EXISTS %s", key), 0, "released on close");
    /* never a blind DEL of the lock key */
    cr_assert_not(crdt_tracelog_has(tl, 0, "DEL", key));
    crdt_tracelog_free(tl);
    redisFree(r);
}

struct errmsg_job {
    crd_client *c;
    char msg[256];
};

static void *failing_call(void *arg)
{
    struct errmsg_job *j = arg;
    crd_lock *l = NULL;
    crd_lock_new(j->c, "", &l);
    snprintf(j->msg, sizeof j->msg, "%s", crd_client_errmsg(j->c));
    return NULL;
}

Test(client, error_details_are_kept_per_thread)
{
    crd_client *c = crdt_client();
    crd_lock *l = crdt_lock(c, crdt_key("L"));
    bool b;
    cr_assert_eq(crd_lock_is_locked(l, &b), CRD_OK);
    struct errmsg_job j = {c, ""};
    pthread_t th;
    pthread_create(&th, NULL, failing_call, &j);
    pthread_join(th, NULL);
    cr_assert_str_neq(j.msg, "", "the failing thread sees its detail");
    cr_assert_str_eq(crd_client_errmsg(c), "", "this thread's last call succeeded");
    crd_lock_free(l);
    crd_client_free(c);
}

Test(client, a_server_that_goes_away_gives_io_errors_within_the_timeouts)
{
    crdt_server s;
    crdt_server_start(&s, false, NULL, NULL, NULL);
    crd_options o;
    crdt_options(&o);
    o.port = s.port;
    o.connect_timeout_ms = 300;
    o.command_timeout_ms = 500;
    crd_client *c = crdt_client_opts(&o);
    crd_lock *l = crdt_lock(c, crdt_key("L"));
    cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_OK);
    crdt_server_stop(&s);

    int64_t t0 = crdt_now_ms();
    crd_status st = crd_lock_release(l);
    int64_t took = crdt_now_ms() - t0;
    cr_assert_eq(st, CRD_IO, "release with the server gone: %s", crd_strerror(st));
    cr_assert_str_neq(crd_client_errmsg(c), "");
    cr_assert(took < 3000, "release took %" PRId64 " ms", took);
    t0 = crdt_now_ms();
    st = crd_lock_acquire(l, 0, 10000);
    cr_assert_eq(st, CRD_IO, "acquire with the server gone: %s", crd_strerror(st));
    bool b;
    cr_assert_eq(crd_lock_is_locked(l, &b), CRD_IO);
    cr_assert(crdt_now_ms() - t0 < 3000, "calls took %" PRId64 " ms", crdt_now_ms() - t0);
    crd_lock_free(l);
    crd_client_free(c);
}
