/*
 * worker.c -- crdt_worker, the C side of the bindings' cross-language tests: a plain C
 * program on the C API that takes a lock or a semaphore in turn with the C++ test's and
 * the Python tests' own workers (tests/bindings/test_cpp.cpp --worker,
 * bindings/python/tests/worker.py), which run the same rounds on the same keys.
 *
 * usage: crdt_worker PORT KIND NAME ROUNDS [HOLD_US]
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

int main(int argc, char **argv)
{
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
