/*
 * test_doctor.c -- `credisson doctor` and `credisson verify` (issue #46) against real
 * deployments on loopback: the built CLI (CRD_CLI_PATH) is run as a user would run it,
 * and its exit code, text and --json output are checked.
 *
 * doctor: a default redis-server exits 0 with its floor; volatile-lru exits 2 naming the
 * policy; EVAL denied by an ACL exits 2 naming EVAL; a one-node cluster reached with
 * redis:// names the slot-checking behaviour; Sentinel and Cluster set-ups name their
 * topology and the replicas that acknowledge WAIT; a server under CLIENT PAUSE is a
 * timeout, said as such, within doctor's own deadline.
 * verify: 0 overlaps on a standalone server, on Sentinel across SENTINEL FAILOVER and on a
 * Cluster across CLUSTER FAILOVER; and it reports overlaps when they happen: a lock
 * force-unlocked under its holders, and a Sentinel split brain with replica sync off (the
 * partition suite's machinery: a fault proxy in front of the first primary, black-holed).
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cluster.h"
#include "faultproxy.h"
#include "failover.h"
#include "harness.h"
#include "sentinel.h"

#ifndef CRD_CLI_PATH
#error "CRD_CLI_PATH must name the built credisson binary"
#endif

/* ---------------------------------------------------------------------------------- */
/* Running the CLI                                                                    */
/* ---------------------------------------------------------------------------------- */

typedef struct cli_run {
    FILE *pipe;
    char out[65536];
    int rc;
    int64_t ms;
    int64_t t0;
} cli_run;

/* Starts `credisson ARGS` (a shell word list, each argument single-quoted by the caller
 * where needed) with stdout to a pipe; stderr goes to the test's. */
static void cli_start(cli_run *r, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "exec '%s' %s", CRD_CLI_PATH, args);
    r->t0 = crdt_now_ms();
    r->pipe = popen(cmd, "r");
    cr_assert_not_null(r->pipe, "popen %s", cmd);
}

/* Reads everything, waits for the exit. */
static void cli_finish(cli_run *r)
{
    size_t n = 0, got;
    while ((got = fread(r->out + n, 1, sizeof r->out - 1 - n, r->pipe)) > 0)
        n += got;
    r->out[n] = '\0';
    int st = pclose(r->pipe);
    r->rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r->ms = crdt_now_ms() - r->t0;
}

static void cli(cli_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cli(cli_run *r, const char *fmt, ...)
{
    char args[3000];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    /* Cut short, the shell would run another command than the test means. */
    cr_assert(n >= 0 && (size_t)n < sizeof args, "CLI arguments longer than %zu bytes",
              sizeof args);
    cli_start(r, args);
    cli_finish(r);
}

static void expect_has(const cli_run *r, const char *text)
{
    cr_assert(strstr(r->out, text) != NULL, "no \"%s\" in:\n%s", text, r->out);
}

/* The line of a finding ("[FAIL] check: ...") in text output, or NULL. */
static const char *finding(const cli_run *r, const char *tag, const char *check)
{
    char want[64];
    snprintf(want, sizeof want, "[%s] %s:", tag, check);
    return strstr(r->out, want);
}

static void expect_finding(const cli_run *r, const char *tag, const char *check, const char *text)
{
    const char *at = finding(r, tag, check);
    cr_assert_not_null(at, "no [%s] %s finding in:\n%s", tag, check, r->out);
    const char *eol = strchr(at, '\n');
    size_t len = eol ? (size_t)(eol - at) : strlen(at);
    char line[1200];
    snprintf(line, sizeof line, "%.*s", (int)len, at);
    cr_assert(text == NULL || strstr(line, text) != NULL, "\"%s\" not in the line: %s", text,
              line);
}

static const char *prefix(const char *suffix)
{
    return crdt_key(suffix);
}

/* ---------------------------------------------------------------------------------- */
/* doctor                                                                             */
/* ---------------------------------------------------------------------------------- */

Test(doctor, a_default_server_exits_0_with_its_floor_and_leaves_no_key)
{
    const char *p = prefix("plain");
    cli_run r;
    cli(&r, "--url redis://127.0.0.1:%d doctor --samples 200 --prefix '%s'", crdt_port(), p);
    fprintf(stderr, "%s", r.out);
    cr_assert_eq(r.rc, 0, "exit %d:\n%s", r.rc, r.out);
    expect_has(&r, "floor: an uncontended acquire+release costs at least ");
    expect_has(&r, "a hand-off at least ");
    expect_finding(&r, " ok ", "maxmemory-policy", "noeviction");
    expect_finding(&r, " ok ", "scripts", "EVAL, EVALSHA and SCRIPT LOAD work");
    expect_finding(&r, " ok ", "replicas", "persistence");
    cr_assert_null(finding(&r, "WARN", ""), "a warning on a default server:\n%s", r.out);
    /* Its own keys are gone (the unlock latches of its lock expire by themselves). */
    redisContext *c = crdt_redis();
    char pattern[400];
    snprintf(pattern, sizeof pattern, "%s*", p);
    cr_assert_eq(crdt_count_keys(c, pattern), 0);
    redisFree(c);

    cli(&r, "--url redis://127.0.0.1:%d doctor --json --samples 50 --prefix '%s'", crdt_port(), p);
    cr_assert_eq(r.rc, 0);
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    cr_assert_not_null(j, "not JSON (%s): %s", e.text, r.out);
    json_t *m = json_object_get(j, "measured");
    cr_assert(json_is_number(json_object_get(m, "ping_us_p50")));
    cr_assert(json_is_number(json_object_get(m, "lock_script_us_p50")));
    cr_assert(json_is_number(json_object_get(m, "pubsub_delivery_us_p99")));
    cr_assert(json_is_number(json_object_get(m, "credisson_pair_us_p50")));
    cr_assert(json_is_number(json_object_get(json_object_get(j, "floor"), "handoff_us")));
    cr_assert_eq(json_integer_value(json_object_get(j, "exit")), 0);
    cr_assert(json_array_size(json_object_get(j, "findings")) >= 8);
    json_decref(j);
}

Test(doctor, volatile_lru_exits_2_naming_the_policy)
{
    crdt_server s;
    const char *args[] = {"--maxmemory-policy", "volatile-lru", NULL};
    crdt_server_start(&s, false, args, NULL, NULL);
    cli_run r;
    cli(&r, "--url redis://127.0.0.1:%d doctor --samples 0", s.port);
    cr_assert_eq(r.rc, 2, "exit %d:\n%s", r.rc, r.out);
    expect_finding(&r, "FAIL", "maxmemory-policy", "volatile-lru");
    expect_has(&r, "every held lock has one");
    expect_has(&r, "fix: CONFIG SET maxmemory-policy noeviction");
    crdt_server_stop(&s);
}

/* Over rediss:// the raw checks go through cli/tlsdial.c's relay: the policy is read over
 * TLS (exit 2 naming it, as in plaintext), the certificate is checked (another CA: the
 * connection finding says why), and verify runs its processes there with 0 overlaps. */
Test(doctor, over_tls_the_server_checks_run_and_the_certificate_is_verified)
{
    crdt_server s;
    const char *args[] = {"--maxmemory-policy", "volatile-lru", NULL};
    crdt_server_start_tls(&s, crdt_tls_certs(), args, NULL, NULL);
    cli_run r;
    cli(&r, "--url rediss://127.0.0.1:%d --cacert '%s' doctor --samples 20", s.tls_port,
        crdt_tls_file("ca.crt"));
    cr_assert_eq(r.rc, 2, "exit %d:\n%s", r.rc, r.out);
    expect_finding(&r, "FAIL", "maxmemory-policy", "volatile-lru");
    expect_finding(&r, " ok ", "scripts", "EVAL");
    expect_has(&r, "relay thread");
    cr_assert(strstr(r.out, "raw-probes") == NULL, "%s", r.out);
    cli(&r, "--url rediss://localhost:%d --cacert '%s' doctor --samples 0", s.tls_port,
        crdt_tls_file("other-ca.crt"));
    cr_assert_eq(r.rc, 2, "exit %d:\n%s", r.rc, r.out);
    expect_finding(&r, "FAIL", "connection", "certificate verify failed");
    cli(&r, "--url rediss://127.0.0.1:%d --cacert '%s' verify --procs 2 --seconds 1",
        s.tls_port, crdt_tls_file("ca.crt"));
    cr_assert_eq(r.rc, 0, "exit %d:\n%s", r.rc, r.out);
    expect_has(&r, " 0 overlaps");
    crdt_server_stop(&s);
}

Test(doctor, eval_denied_by_an_acl_exits_2_naming_eval)
{
    crdt_server s;
    const char *args[] = {"--user", "noeval", "on", ">pw", "~*", "&*", "+@all", "-eval", NULL};
    crdt_server_start(&s, false, args, NULL, NULL);
    cli_run r;
    cli(&r, "--url redis://noeval:pw@127.0.0.1:%d doctor --samples 20", s.port);
    cr_assert_eq(r.rc, 2, "exit %d:\n%s", r.rc, r.out);
    expect_finding(&r, "FAIL", "scripts", "EVAL refused");
    expect_finding(&r, "FAIL", "scripts", "NOPERM");
    crdt_server_stop(&s);
}

Test(doctor, a_one_node_cluster_reached_with_redis_url_names_the_slot_checking_behaviour)
{
    crdt_cluster cl;
    crdt_cluster_start(&cl, 1, 0);
    cli_run r;
    cli(&r, "--url redis://127.0.0.1:%d doctor --samples 20", cl.node[0].port);
    cr_assert_eq(r.rc, 1, "exit %d:\n%s", r.rc, r.out);
    expect_finding(&r, "WARN", "slot-checking", "cluster node");
    expect_finding(&r, "WARN", "slot-checking", "CROSSSLOT");
    expect_has(&r, "as a proxy in front of a sharded database does");
    crdt_cluster_stop(&cl);
}

/* A thread that keeps the server paused: CLIENT PAUSE for pause_ms. */
Test(doctor, a_paused_server_is_a_timeout_said_as_such_within_doctors_deadline)
{
    crdt_server s;
    crdt_server_start(&s, false, NULL, NULL, NULL);
    redisContext *c = crdt_redis_port(s.port);
    freeReplyObject(crdt_cmd(c, "CLIENT PAUSE 8000 ALL"));
    cli_run r;
    cli(&r, "--url redis://127.0.0.1:%d doctor --timeout 500", s.port);
    freeReplyObject(crdt_cmd(c, "CLIENT UNPAUSE"));
    redisFree(c);
    fprintf(stderr, "[doctor] paused server: exit %d after %lld ms\n%s", r.rc, (long long)r.ms,
            r.out);
    cr_assert_eq(r.rc, 2, "exit %d:\n%s", r.rc, r.out);
    expect_finding(&r, "FAIL", "timeout", "timed out");
    expect_has(&r, "CLIENT PAUSE");
    cr_assert_lt(r.ms, 2500, "doctor took %lld ms for a 500 ms deadline", (long long)r.ms);
    crdt_server_stop(&s);
}

/* ---------------------------------------------------------------------------------- */
/* verify                                                                             */
/* ---------------------------------------------------------------------------------- */

static json_t *verify_json(const cli_run *r)
{
    json_error_t e;
    json_t *j = json_loads(r->out, 0, &e);
    cr_assert_not_null(j, "not JSON (%s): %s", e.text, r->out);
    return j;
}

static long long jpath(json_t *j, const char *obj, const char *field)
{
    return json_integer_value(json_object_get(json_object_get(j, obj), field));
}

/* `verify --failover` on url (4 processes, 8 s, a 3 s watchdog) with a failover in the
 * middle: the failover was done, nobody overlapped, the lock was taken more than 20
 * times, and the exit code is 0, or 1 for the warnings a failover may leave (a hold lost
 * and reported, a token drawn again: README, a probability, not a guarantee). Returns
 * the report (json_decref it). */
static json_t *verify_across_a_failover(const char *url, const char *what)
{
    cli_run r;
    cli(&r, "--url '%s' --watchdog-ms 3000 verify --procs 4 --seconds 8 --failover --json",
        url);
    fprintf(stderr, "[verify] %s with a failover: %s", what, r.out);
    json_t *j = verify_json(&r);
    cr_assert(json_is_true(json_object_get(json_object_get(j, "failover"), "done")), "%s",
              r.out);
    cr_assert_eq(jpath(j, "lock", "overlaps"), 0, "%s", r.out);
    cr_assert_eq(jpath(j, "semaphore", "overlaps"), 0, "%s", r.out);
    cr_assert_gt(jpath(j, "lock", "acquisitions"), 20);
    cr_assert(r.rc == 0 || (r.rc == 1 && jpath(j, "lock", "lost_holds") +
                                             jpath(j, "lock", "stale_tokens") > 0),
              "exit %d: %s", r.rc, r.out);
    return j;
}

Test(doctor, verify_finds_no_overlap_on_a_standalone_server)
{
    cli_run r;
    cli(&r, "--url redis://127.0.0.1:%d verify --procs 3 --seconds 2 --json --prefix '%s'",
        crdt_port(), prefix("verify"));
    fprintf(stderr, "[verify] standalone: %s", r.out);
    cr_assert_eq(r.rc, 0, "exit %d: %s", r.rc, r.out);
    json_t *j = verify_json(&r);
    cr_assert_gt(jpath(j, "lock", "acquisitions"), 50);
    cr_assert_gt(jpath(j, "semaphore", "acquisitions"), 50);
    cr_assert_eq(jpath(j, "lock", "overlaps"), 0);
    cr_assert_eq(jpath(j, "lock", "stale_tokens"), 0);
    cr_assert_eq(jpath(j, "semaphore", "overlaps"), 0);
    cr_assert(json_is_true(json_object_get(j, "cleaned")));
    json_decref(j);
    /* Its lock, token counter and semaphore are gone (the unlock latches of its releases
     * expire by themselves). */
    redisContext *c = crdt_redis();
    char pattern[400];
    snprintf(pattern, sizeof pattern, "%s*", prefix("verify"));
    cr_assert_eq(crdt_count_keys(c, pattern), 0, "verify left keys behind");
    snprintf(pattern, sizeof pattern, "redisson_lock_token:{%s*", prefix("verify"));
    cr_assert_eq(crdt_count_keys(c, pattern), 0, "verify left its token counter behind");
    redisFree(c);
}

/* Force-unlocks verify's lock as fast as it can, until told to stop. */
typedef struct breaker {
    const char *name;
    atomic_bool stop;
    atomic_long deleted;
} breaker;

static void *break_lock(void *arg)
{
    breaker *b = arg;
    redisContext *c = crdt_raw_connect(crdt_port(), 2000);
    while (c != NULL && !atomic_load(&b->stop)) {
        redisReply *r = redisCommand(c, "DEL %s", b->name);
        if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer > 0)
            atomic_fetch_add(&b->deleted, 1);
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    return NULL;
}

Test(doctor, verify_reports_overlaps_when_the_lock_is_deleted_under_its_holders)
{
    /* verify names its lock PREFIX:<its pid>:lock; the breaker deletes every such key. */
    const char *p = prefix("broken");
    cli_run r;
    char args[600];
    snprintf(args, sizeof args, "--url redis://127.0.0.1:%d verify --procs 3 --seconds 2 --json "
             "--prefix '%s'", crdt_port(), p);
    cli_start(&r, args);
    /* The lock's name holds the CLI's pid: found by scanning for it. */
    redisContext *c = crdt_redis();
    char pattern[400], name[400] = "";
    snprintf(pattern, sizeof pattern, "%s:*:lock", p);
    for (int64_t until = crdt_now_ms() + 5000; name[0] == '\0' && crdt_now_ms() < until;) {
        redisReply *k = crdt_cmd(c, "KEYS %s", pattern);
        if (k->type == REDIS_REPLY_ARRAY && k->elements > 0)
            snprintf(name, sizeof name, "%s", k->element[0]->str);
        freeReplyObject(k);
    }
    redisFree(c);
    cr_assert(name[0] != '\0', "verify's lock never appeared");
    breaker b = {.name = name};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, break_lock, &b), 0);
    cli_finish(&r);
    atomic_store(&b.stop, true);
    pthread_join(th, NULL);
    fprintf(stderr, "[verify] lock deleted %ld times under its holders: %s",
            atomic_load(&b.deleted), r.out);
    cr_assert_eq(r.rc, 2, "exit %d: %s", r.rc, r.out);
    json_t *j = verify_json(&r);
    cr_assert_gt(jpath(j, "lock", "overlaps"), 0);
    cr_assert(strlen(json_string_value(json_object_get(j, "first_overlap"))) > 0);
    json_decref(j);
}

/* ---------------------------------------------------------------------------------- */
/* Sentinel and Cluster: doctor's topology, verify across a failover                   */
/* ---------------------------------------------------------------------------------- */

Test(doctor, sentinel_topology_and_acks_are_named_and_verify_survives_a_failover, .timeout = 120)
{
    crdt_topo topo;
    cr_assert(crdt_topo_start(&topo, NULL), "topology: %s", topo.err);
    char url[300];
    crdt_topo_url(&topo, url, sizeof url);
    cli_run r;
    cli(&r, "--url '%s' doctor --samples 20", url);
    fprintf(stderr, "%s", r.out);
    cr_assert(r.rc == 0 || r.rc == 1, "exit %d:\n%s", r.rc, r.out);
    expect_finding(&r, " ok ", "topology", "Sentinel: master 'crdtmaster'");
    expect_finding(&r, " ok ", "topology", "2 replicas, 3 sentinels (quorum 2)");
    expect_finding(&r, " ok ", "wait", "2 of 2 replica(s) acknowledged");

    json_decref(verify_across_a_failover(url, "sentinel"));
    crdt_topo_stop(&topo);
}

Test(doctor, cluster_topology_and_acks_are_named_and_verify_survives_a_failover, .timeout = 120)
{
    crdt_cluster cl;
    crdt_cluster_start(&cl, 3, 1);
    cli_run r;
    cli(&r, "--url '%s' doctor --samples 20", cl.url);
    fprintf(stderr, "%s", r.out);
    cr_assert(r.rc == 0 || r.rc == 1, "exit %d:\n%s", r.rc, r.out);
    expect_finding(&r, " ok ", "topology", "Cluster: 3 primaries serving 16384 of 16384 slots, "
                   "at least 1 replica(s) each");
    expect_finding(&r, " ok ", "wait", "1 of 1 replica(s) acknowledged");
    expect_has(&r, "node-timeout: ");

    json_t *j = verify_across_a_failover(cl.url, "cluster");
    /* The demoted primary's "WAIT cannot be used with replica instances" is no refusal of
     * WAIT: nothing may be refused CRD_SYNC_UNAVAILABLE after a failover. */
    cr_assert_null(json_object_get(json_object_get(j, "failures_by_status"),
                                   crd_strerror(CRD_SYNC_UNAVAILABLE)),
                   "refused CRD_SYNC_UNAVAILABLE after the failover (the report is above)");
    json_decref(j);
    crdt_cluster_stop(&cl);
}

/* ---------------------------------------------------------------------------------- */
/* A split brain without replica sync: verify sees the overlaps                       */
/* ---------------------------------------------------------------------------------- */

/* verify says on stderr when every process is running. */
static bool all_running(void *arg)
{
    FILE *f = fopen(arg, "r");
    if (f == NULL)
        return false;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, "processes running") != NULL;
}

Test(doctor, verify_reports_the_overlaps_of_a_sentinel_split_brain_without_replica_sync,
     .timeout = 120)
{
    crdt_proxy *front;
    crdt_topo topo;
    crdt_topo_start_fronted(&topo, &front);
    char url[300];
    crdt_topo_url(&topo, url, sizeof url);
    /* Half the processes straight on the first primary (they stay with it), half through
     * the sentinels (which reach it through the proxy). */
    const char *p = prefix("split");
    char args[1600], errfile[300];
    snprintf(errfile, sizeof errfile, "%s/verify.err", topo.nodes[0].dir);
    /* A short lease: a hold the cut leaves on the isolated primary, its holder now on
     * the other side, ends soon, and the isolated side locks again there. The window: the
     * overlaps begin once the sentinel side has left the cut primary (its command timeout,
     * 3 s) and found the promoted replica (3.2 s after the cut, alone; then thousands of
     * overlaps follow). A 14 s window once saw none on a machine shared by six test runs,
     * so 20 s; the failure message says when the cut and the promotion came. */
    enum { WINDOW_S = 20 };
    snprintf(args, sizeof args, "--url redis://127.0.0.1:%d --watchdog-ms 2000 verify "
             "--second-url '%s' "
             "--replica-sync off --procs 4 --seconds %d --json --prefix '%s' 2>'%s'",
             topo.nodes[0].port, url, WINDOW_S, p, errfile);
    cli_run r;
    int64_t t0 = crdt_now_ms();
    cli_start(&r, args);
    /* Both sides lock before the cut. */
    bool running = crdt_wait_until(all_running, errfile, 10000);
    /* The cut: the first primary keeps its direct clients, hears nothing from its replicas
     * and sentinels, and they nothing from it. */
    crdt_proxy_set_blackhole(front, CRDT_PROXY_BOTH, true);
    int64_t t_cut = crdt_now_ms() - t0;
    int promoted = running ? crdt_topo_await_switch(&topo, topo.front_port, 30000) : -1;
    int64_t t_promoted = crdt_now_ms() - t0;
    cli_finish(&r);
    fprintf(stderr, "[verify] split brain, replica sync off (cut at %lld ms, new primary %d at "
            "%lld ms): %s", (long long)t_cut, promoted, (long long)t_promoted, r.out);
    crdt_topo_stop(&topo);
    crdt_proxy_stop(front);
    cr_assert(running, "verify never drew a token");
    cr_assert_gt(promoted, 0, "the sentinels did not fail over");
    cr_assert_eq(r.rc, 2, "exit %d: %s", r.rc, r.out);
    json_t *j = verify_json(&r);
    cr_assert_gt(jpath(j, "lock", "overlaps") + jpath(j, "semaphore", "overlaps"), 0,
                 "no overlap in %d s (cut at %lld ms, promoted at %lld ms): %s", WINDOW_S,
                 (long long)t_cut, (long long)t_promoted, r.out);
    json_decref(j);
}
