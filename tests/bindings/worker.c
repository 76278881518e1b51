/*
 * worker.c -- crdt_worker, the C side of the bindings' cross-language tests: a plain C
 * program on the C API that takes a lock or a semaphore in turn with the C++ test's and
 * the Python tests' own workers (tests/bindings/test_cpp.cpp --worker,
 * bindings/python/tests/worker.py), which run the same rounds on the same keys.
 *
 * usage: crdt_worker PORT KIND NAME ROUNDS [HOLD_US]
 *        crdt_worker PORT pairs NAME N   N uncontended crd_lock_acquire + crd_lock_release
 *                               pairs after 200 unmeasured ones; prints "us_per_pair X
 *                               cpu_us_per_pair Y" (wall time, and the process's CPU time)
 *                               (bindings/python/bench.py sets it beside the Python pair)
 *        crdt_worker layout     prints "field offset size" for every field of crd_options,
 *                               crd_event and crd_metrics, for the Python package's test
 *                               that its ctypes mirror of the structs matches the header
 *   KIND lock       ROUNDS times: crd_lock_acquire(NAME), the section, crd_lock_release
 *        semaphore  ROUNDS times: crd_semaphore_acquire(NAME, 1), the section,
 *                   crd_semaphore_release (the test sets the permits first)
 * The section (every worker's, in every language, is this one):
 *   v = EVAL <inside script> NAME:inside NAME:max   (INCR NAME:inside, and NAME:max keeps
 *                                                    the largest value it ever had)
 *   c = GET NAME:counter; sleep HOLD_US; SET NAME:counter c + 1   (a read-modify-write:
 *                                                    an overlap loses an update)
 *   DECR NAME:inside
 * so that the test reads, afterwards, how many holders were ever inside at once
 * (NAME:max: 1 for a lock, at most the permits for a semaphore) and whether an update
 * was lost (NAME:counter against the rounds of every worker).
 * Every worker first waits on BLPOP NAME:go (up to 30 s), so that the test starts them
 * all at once by pushing one element per worker.
 * CRDT_SABOTAGE=nolock in the environment skips the acquire and the release: the
 * exclusion tests must then fail (that is how they were shown able to fail).
 * Exit status: 0, or the step that failed (2 usage, 3 connect, 4 handle, 5 start signal,
 * 6 acquire, 7 the section's commands, 8 release), with a line on stderr.
 */
#include <credisson.h>
#include <hiredis/hiredis.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* INCR KEYS[1]; KEYS[2] := max(KEYS[2], the new value); returns the new value. */
static const char inside_script[] =
    "local v = redis.call('INCR', KEYS[1]) "
    "if v > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], v) end "
    "return v";

static void sleep_us(long us)
{
    if (us <= 0)
        return;
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int fail(int code, const char *what, const char *detail)
{
    fprintf(stderr, "crdt_worker: %s: %s\n", what, detail);
    return code;
}

/* One run of the section; 0, or 7 when a command failed. */
static int section(redisContext *r, const char *name, long hold_us)
{
    char inside[512], max[512], counter[512];
    snprintf(inside, sizeof inside, "%s:inside", name);
    snprintf(max, sizeof max, "%s:max", name);
    snprintf(counter, sizeof counter, "%s:counter", name);
    redisReply *rep = redisCommand(r, "EVAL %s 2 %s %s", inside_script, inside, max);
    if (rep == NULL || rep->type != REDIS_REPLY_INTEGER)
        return fail(7, "EVAL inside", rep && rep->type == REDIS_REPLY_ERROR ? rep->str : "no reply");
    freeReplyObject(rep);
    rep = redisCommand(r, "GET %s", counter);
    if (rep == NULL || (rep->type != REDIS_REPLY_STRING && rep->type != REDIS_REPLY_NIL))
        return fail(7, "GET counter", "no reply");
    long long c = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    sleep_us(hold_us);
    rep = redisCommand(r, "SET %s %lld", counter, c + 1);
    if (rep == NULL || rep->type != REDIS_REPLY_STATUS)
        return fail(7, "SET counter", "no reply");
    freeReplyObject(rep);
    rep = redisCommand(r, "DECR %s", inside);
    if (rep == NULL || rep->type != REDIS_REPLY_INTEGER)
        return fail(7, "DECR inside", "no reply");
    freeReplyObject(rep);
    return 0;
}

#define FIELD(type, f) printf(#type " " #f " %zu %zu\n", offsetof(type, f), sizeof(((type *)0)->f))

static int layout(void)
{
    printf("crd_options sizeof %zu 0\n", sizeof(crd_options));
    FIELD(crd_options, url);
    FIELD(crd_options, host);
    FIELD(crd_options, port);
    FIELD(crd_options, unix_path);
    FIELD(crd_options, username);
    FIELD(crd_options, password);
    FIELD(crd_options, db);
    FIELD(crd_options, connect_timeout_ms);
    FIELD(crd_options, command_timeout_ms);
    FIELD(crd_options, pool_size);
    FIELD(crd_options, watchdog_timeout_ms);
    FIELD(crd_options, subscription_timeout_ms);
    FIELD(crd_options, poll_interval_ms);
    FIELD(crd_options, max_wait_slice_ms);
    FIELD(crd_options, allow_unsafe_names);
    FIELD(crd_options, release_on_close);
    FIELD(crd_options, release_on_thread_exit);
    FIELD(crd_options, on_event);
    FIELD(crd_options, event_user_data);
    FIELD(crd_options, on_trace);
    FIELD(crd_options, trace_user_data);
    FIELD(crd_options, fair_wait_timeout_ms);
    FIELD(crd_options, on_log);
    FIELD(crd_options, log_user_data);
    FIELD(crd_options, tls);
    FIELD(crd_options, tls_ca_file);
    FIELD(crd_options, tls_ca_dir);
    FIELD(crd_options, tls_cert_file);
    FIELD(crd_options, tls_key_file);
    FIELD(crd_options, tls_server_name);
    FIELD(crd_options, tls_insecure_skip_verify);
    FIELD(crd_options, events_on_loop);
    FIELD(crd_options, deployment);
    FIELD(crd_options, seeds);
    FIELD(crd_options, sharded_pubsub);
    FIELD(crd_options, sentinel_addrs);
    FIELD(crd_options, sentinel_master);
    FIELD(crd_options, sentinel_username);
    FIELD(crd_options, sentinel_password);
    FIELD(crd_options, replica_sync);
    FIELD(crd_options, replica_sync_timeout_ms);
    FIELD(crd_options, release_defer_ms);
    FIELD(crd_options, local_fifo);
    FIELD(crd_options, prompt_loss_detection);
    FIELD(crd_options, sentinel_scan_interval_ms);
    FIELD(crd_options, identity);
    FIELD(crd_options, identity_cmdline);
    FIELD(crd_options, identity_label);
    printf("crd_event sizeof %zu 0\n", sizeof(crd_event));
    FIELD(crd_event, kind);
    FIELD(crd_event, name);
    FIELD(crd_event, name_len);
    FIELD(crd_event, owner);
    FIELD(crd_event, validity_ms);
    FIELD(crd_event, status);
    FIELD(crd_event, detail);
    printf("crd_metrics sizeof %zu 0\n", sizeof(crd_metrics));
    FIELD(crd_metrics, acquisitions);
    FIELD(crd_metrics, holds_now);
    FIELD(crd_metrics, wait_ms_p50);
    FIELD(crd_metrics, hold_ms_max);
    FIELD(crd_metrics, watchdog_round_trips);
    FIELD(crd_metrics, outcomes_unknown);
    FIELD(crd_metrics, latch_await_timeouts);
    FIELD(crd_metrics, waiting_now);
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CPU time of the whole process (every thread: the library's I/O thread too). */
static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int pairs(int port, const char *name, int n)
{
    crd_options o;
    crd_options_init(&o);
    o.port = port;
    crd_client *c = NULL;
    crd_lock *l = NULL;
    if (crd_client_new(&o, &c) != CRD_OK || crd_lock_new(c, name, &l) != CRD_OK)
        return fail(3, "client", crd_client_errmsg(c));
    int64_t t0 = 0, cpu0 = 0;
    for (int i = -200; i < n; i++) {
        if (i == 0) {
            t0 = now_ns();
            cpu0 = cpu_ns();
        }
        if (crd_lock_acquire(l, CRD_WAIT_FOREVER, CRD_LEASE_WATCHDOG) != CRD_OK || crd_lock_release(l) != CRD_OK)
            return fail(6, "pair", crd_client_errmsg(c));
    }
    printf("us_per_pair %.2f cpu_us_per_pair %.2f\n", (double)(now_ns() - t0) / 1000.0 / n,
           (double)(cpu_ns() - cpu0) / 1000.0 / n);
    crd_lock_free(l);
    crd_client_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "layout") == 0)
        return layout();
    if (argc == 5 && strcmp(argv[2], "pairs") == 0)
        return pairs(atoi(argv[1]), argv[3], atoi(argv[4]));
    if (argc < 5 || (strcmp(argv[2], "lock") != 0 && strcmp(argv[2], "semaphore") != 0)) {
        fprintf(stderr, "usage: crdt_worker PORT lock|semaphore NAME ROUNDS [HOLD_US]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    bool is_lock = strcmp(argv[2], "lock") == 0;
    const char *name = argv[3];
    int rounds = atoi(argv[4]);
    long hold_us = argc > 5 ? atol(argv[5]) : 0;
    const char *sabotage = getenv("CRDT_SABOTAGE");
    bool nolock = sabotage != NULL && strcmp(sabotage, "nolock") == 0;

    struct timeval tv = {30, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (r == NULL || r->err)
        return fail(3, "connect", r ? r->errstr : "out of memory");
    redisSetTimeout(r, tv);

    crd_options o;
    crd_options_init(&o);
    o.port = port;
    crd_client *c = NULL;
    crd_status st = crd_client_new(&o, &c);
    if (st != CRD_OK)
        return fail(3, "crd_client_new", crd_client_errmsg(c));
    crd_lock *l = NULL;
    crd_semaphore *s = NULL;
    st = is_lock ? crd_lock_new(c, name, &l) : crd_semaphore_new(c, name, &s);
    if (st != CRD_OK)
        return fail(4, "handle", crd_client_errmsg(c));

    char go[512];
    snprintf(go, sizeof go, "%s:go", name);
    redisReply *rep = redisCommand(r, "BLPOP %s 30", go);
    bool started = rep != NULL && rep->type == REDIS_REPLY_ARRAY;
    if (rep)
        freeReplyObject(rep);
    if (!started)
        return fail(5, "BLPOP go", "no start signal within 30 s");

    int rc = 0;
    for (int i = 0; i < rounds && rc == 0; i++) {
        if (!nolock) {
            st = is_lock ? crd_lock_acquire(l, CRD_WAIT_FOREVER, CRD_LEASE_WATCHDOG)
                         : crd_semaphore_acquire(s, 1, CRD_WAIT_FOREVER);
            if (st != CRD_OK) {
                rc = fail(6, crd_strerror(st), crd_client_errmsg(c));
                break;
            }
        }
        rc = section(r, name, hold_us);
        if (!nolock) {
            st = is_lock ? crd_lock_release(l) : crd_semaphore_release(s, 1);
            if (st != CRD_OK && rc == 0)
                rc = fail(8, crd_strerror(st), crd_client_errmsg(c));
        }
    }
    crd_lock_free(l);
    crd_semaphore_free(s);
    crd_client_free(c);
    redisFree(r);
    return rc;
}
