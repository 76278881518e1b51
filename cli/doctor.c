/*
 * doctor.c -- `credisson [--url URL] doctor [--json] [--samples N] [--timeout MS]
 * [--prefix P]`: checks one deployment for what it means to locks, in the manner of
 * `flutter doctor` and `redis-cli --latency`. Each finding says what it is, why it
 * matters to a lock, how to fix it and a severity; the exit code is the worst severity
 * (0 nothing threatens a lock, 1 warnings, 2 findings that break locks; 64 usage). Then
 * it measures this deployment's floor (round trip, the lock script, pub/sub delivery,
 * and the library's own acquire+release and hand-off).
 *
 * What it touches: reads (INFO, CONFIG GET, ROLE, CLUSTER INFO/SLOTS, SENTINEL MASTER,
 * TIME, ACL WHOAMI) and its own keys under PREFIX:<pid>: (deleted at the end), plus the
 * unlock latches of its own locks, which expire by themselves within seconds. Every
 * command has the --timeout deadline; a server that stops answering (CLIENT PAUSE, a
 * stall) is a finding of its own and ends the checks at once.
 *
 * Raw probes use hiredis (probe.c; over TLS through tlsdial.c's relay), the measured pair and
 * hand-off the public API. This file has the command and the report; the checks are in
 * doctor_checks.c, the measurements in doctor_measure.c, and what every check goes through
 * (findings, own keys, raw commands) in doctor_findings.c (doctor.h says what they share).
 * Main thread only.
 */
#include "doctor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- report ------------------------------------------------------------------------------ */

static const char *sev_name(int s) { return s == SEV_FAIL ? "fail" : s == SEV_WARN ? "warn" : "ok"; }

static void json_str(const char *s) { cli_json_string(s, strlen(s)); }

static void report(doctor *d, int worst)
{
    char shown[512];
    cli_redact_url(d->g->url, shown, sizeof shown);
    const measured *m = &d->m;
    double pair_floor = m->have_raw ? 2 * m->script_p50 : 0;
    double handoff_floor = m->have_raw && m->have_pubsub ? m->pubsub_p50 + m->script_p50 : 0;
    int warns = 0, fails = 0;
    for (int i = 0; i < d->n; i++) {
        warns += d->f[i].sev == SEV_WARN;
        fails += d->f[i].sev == SEV_FAIL;
    }
    if (d->json) {
        printf("{\"url\": ");
        json_str(shown);
        printf(", \"findings\": [");
        for (int i = 0; i < d->n; i++) {
            printf("%s{\"check\": ", i ? ", " : "");
            json_str(d->f[i].check);
            printf(", \"severity\": \"%s\", \"summary\": ", sev_name(d->f[i].sev));
            json_str(d->f[i].summary);
            printf(", \"why\": ");
            json_str(d->f[i].why);
            printf(", \"fix\": ");
            json_str(d->f[i].fix);
            printf("}");
        }
        printf("], \"measured\": {\"samples\": %d", m->n);
        if (m->n > 0)
            printf(", \"ping_us_p50\": %.1f, \"ping_us_p99\": %.1f", m->ping_p50, m->ping_p99);
        if (m->have_raw)
            printf(", \"lock_script_us_p50\": %.1f, \"lock_script_us_p99\": %.1f", m->script_p50,
                   m->script_p99);
        if (m->have_pubsub)
            printf(", \"pubsub_delivery_us_p50\": %.1f, \"pubsub_delivery_us_p99\": %.1f",
                   m->pubsub_p50, m->pubsub_p99);
        if (m->have_pair)
            printf(", \"credisson_pair_us_p50\": %.1f, \"credisson_pair_us_p99\": %.1f",
                   m->pair_p50, m->pair_p99);
        if (m->have_handoff)
            printf(", \"credisson_handoff_us_p50\": %.1f, \"credisson_handoff_us_p99\": %.1f, "
                   "\"handoffs\": %d", m->handoff_p50, m->handoff_p99, m->handoffs);
        printf("}, \"floor\": {");
        if (pair_floor > 0)
            printf("\"acquire_release_us\": %.0f", pair_floor);
        if (handoff_floor > 0)
            printf("%s\"handoff_us\": %.0f", pair_floor > 0 ? ", " : "", handoff_floor);
        printf("}, \"warnings\": %d, \"failures\": %d, \"exit\": %d}\n", warns, fails, worst);
        return;
    }
    printf("credisson doctor: %s\n", shown);
    for (int i = 0; i < d->n; i++) {
        const finding *f = &d->f[i];
        printf("[%s] %s: %s\n", f->sev == SEV_FAIL ? "FAIL" : f->sev == SEV_WARN ? "WARN" : " ok ",
               f->check, f->summary);
        if (f->sev != SEV_OK) {
            if (f->why[0])
                printf("       why: %s\n", f->why);
            if (f->fix[0])
                printf("       fix: %s\n", f->fix);
        }
    }
    if (m->n > 0) {
        printf("measured (%d samples, p50/p99): round trip %.0f/%.0f us", m->n, m->ping_p50,
               m->ping_p99);
        if (m->have_raw)
            printf(", lock script %.0f/%.0f us", m->script_p50, m->script_p99);
        if (m->have_pubsub)
            printf(", pub/sub delivery %.0f/%.0f us", m->pubsub_p50, m->pubsub_p99);
        printf("\n");
        if (d->t.tls) /* tlsdial.c: two more hand-overs between threads per round trip */
            printf("(raw probes over TLS go through a relay thread: these and the floor read "
                   "higher than the server costs; credisson's own figures do not)\n");
    }
    if (pair_floor > 0)
        printf("floor: an uncontended acquire+release costs at least %.0f us here (two lock "
               "scripts)%s", pair_floor, handoff_floor > 0 ? "" : "\n");
    if (handoff_floor > 0)
        printf(", a hand-off at least %.0f us (the unlock message, then the waiter's script)\n",
               handoff_floor);
    if (m->have_pair)
        printf("credisson here: acquire+release %.0f/%.0f us (p50/p99)", m->pair_p50,
               m->pair_p99);
    if (m->have_handoff)
        printf("%shand-off %.0f/%.0f us (%d)", m->have_pair ? ", " : "credisson here: ",
               m->handoff_p50, m->handoff_p99, m->handoffs);
    if (m->have_pair || m->have_handoff)
        printf("\n");
    printf("doctor: %d failure(s), %d warning(s): exit %d (%s)\n", fails, warns, worst,
           worst == 2 ? "findings that break locks" : worst == 1 ? "warnings"
                                                               : "nothing threatens a lock");
}

/* ---- the command ---------------------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: credisson [--url URL] doctor [--json] [--samples N] [--timeout MS]\n"
            "                 [--prefix P]\n"
            "\n"
            "Checks the deployment URL names for what it means to locks: server and version,\n"
            "topology (standalone, replicas, Sentinel, Cluster, a slot-checking proxy),\n"
            "maxmemory-policy, scripts (EVAL, EVALSHA, SCRIPT LOAD), WAIT and the replicas that\n"
            "acknowledge, the ACL rights credisson needs, pub/sub delivery, cluster-node-timeout\n"
            "against the watchdog lease, this host's clock against the server's TIME and the\n"
            "keyspace events watch uses. Each finding says why it matters and how to fix it.\n"
            "Then it measures the round trip, the lock script and pub/sub delivery, prints this\n"
            "deployment's floor, and times credisson's own acquire+release and hand-off.\n"
            "\n"
            "  --json         one JSON object (findings, measured, floor, exit)\n"
            "  --samples N    samples per measurement (default 300; 0: no measurements)\n"
            "  --timeout MS   deadline of every command (default 2000): a server that stops\n"
            "                 answering is reported as a timeout and ends the checks\n"
            "  --prefix P     doctor's own keys are P:<pid>:... (default credisson:doctor),\n"
            "                 deleted at the end; use a prefix your ACL user may write\n"
            "\n"
            "Exit: 0 nothing threatens a lock, 1 warnings, 2 findings that break locks,\n"
            "64 usage error.\n");
}

int cmd_doctor(const global_opts *g, int argc, char **argv)
{
    doctor *d = calloc(1, sizeof *d);
    if (d == NULL) {
        cli_error("doctor", "out of memory");
        return EXIT_OSERR;
    }
    d->g = g;
    d->samples = 300;
    d->timeout_ms = 2000;
    d->prefix = "credisson:doctor";
    d->lease_ms = g->watchdog_ms > 0 ? g->watchdog_ms : 30000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t num;
        if (cli_is_help(a)) {
            usage(stdout);
            free(d);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            d->json = true;
        } else if (cli_take_opt(argc, argv, &i, "--samples", &v)) {
            if (v == NULL || !cli_parse_ms(v, &num) || num > 100000) {
                free(d);
                return cli_usage_error("doctor", "--samples needs a number from 0 to 100000");
            }
            d->samples = (int)num;
        } else if (cli_take_opt(argc, argv, &i, "--timeout", &v)) {
            if (v == NULL || !cli_parse_ms(v, &num) || num < 1 || num > 600000) {
                free(d);
                return cli_usage_error("doctor", "--timeout needs milliseconds from 1 to 600000");
            }
            d->timeout_ms = num;
        } else if (cli_take_opt(argc, argv, &i, "--prefix", &v)) {
            if (v == NULL || *v == '\0' || strlen(v) > 120 || strchr(v, '{') || strchr(v, '}')) {
                free(d);
                return cli_usage_error("doctor", "--prefix needs a key prefix (no braces, at "
                                       "most 120 bytes)");
            }
            d->prefix = v;
        } else {
            free(d);
            return cli_usage_error("doctor", "unknown argument '%s'", a);
        }
    }
    char err[300];
    if (probe_parse_url(g->url, &d->t, err, sizeof err) != 0) {
        free(d);
        return cli_usage_error("doctor", "--url: %s", err);
    }
    snprintf(d->keybase, sizeof d->keybase, "%s:%ld", d->prefix, (long)getpid());
    slot_range ranges[128];
    int nranges = 0;
    bool located = true;
    d->t.tls_opts = g;
    if (d->t.kind == PROBE_SENTINEL) {
        located = doctor_find_sentinel_primary(d);
    } else if (d->t.kind == PROBE_CLUSTER) {
        located = doctor_find_cluster_primary(d, ranges, &nranges);
    } else {
        d->node = d->t.addrs[0];
        d->sync_default = false;
        /* One hash tag for doctor's keys: a slot-checking server runs its multi-key
         * scripts too. */
        snprintf(d->tag, sizeof d->tag, ":{%ld}", (long)getpid());
    }
    if (located) {
        bool to = false;
        d->c = probe_connect(&d->t, &d->node, true, d->timeout_ms, err, sizeof err, &to);
        if (d->c == NULL) {
            d->stopped = true;
            if (to)
                doctor_add(d, "timeout", SEV_FAIL,
                    "the server did not answer in time: it is paused (CLIENT PAUSE), stalled or "
                    "unreachable through a black hole; every lock call waits its whole deadline",
                    "find what stalls it (redis-cli --latency, the slow log)",
                    "%s (timed out after %lld ms)", err, (long long)d->timeout_ms);
            else
                doctor_add(d, "connection", SEV_FAIL,
                    "no lock can be taken where the client cannot connect",
                    "check the URL, the credentials and the network", "%s", err);
        }
        redisReply *r = d->c != NULL ? doctor_askv(d, "PING", "PING", NULL) : NULL;
        if (r != NULL)
            freeReplyObject(r);
        redisReply *info = r != NULL ? doctor_askv(d, "INFO", "INFO", NULL) : NULL;
        if (info != NULL && info->type == REDIS_REPLY_STRING) {
            doctor_check_info(d, info->str);
        } else if (info != NULL) {
            doctor_add(d, "info", SEV_WARN, "without INFO the version, role, replicas and eviction "
                "policy cannot be read (the library's start-up check needs it too)",
                "grant +info, or check maxmemory-policy by hand", "INFO refused: %s",
                info->type == REDIS_REPLY_ERROR ? info->str : "?");
        }
        if (info != NULL)
            freeReplyObject(info);
        if (!d->stopped && d->t.kind == PROBE_CLUSTER) {
            /* The other primaries: reachable, their eviction policy, their replicas. */
            for (int i = 1; i < nranges; i++) {
                bool dup = false;
                for (int j = 0; j < i; j++)
                    dup = dup || (ranges[j].primary.port == ranges[i].primary.port &&
                                  strcmp(ranges[j].primary.host, ranges[i].primary.host) == 0);
                if (dup)
                    continue;
                bool t2;
                char e2[300];
                redisContext *c2 = probe_connect(&d->t, &ranges[i].primary, true,
                                                 d->timeout_ms, e2, sizeof e2, &t2);
                if (c2 == NULL) {
                    doctor_add(d, "node", SEV_FAIL,
                        "the locks of that node's slots cannot be taken", "check that node",
                        "%s%s", e2, t2 ? " (timed out)" : "");
                    continue;
                }
                redisReply *pi = probe_cmdv(c2, "INFO", NULL);
                char pol[48] = "", reps[16] = "";
                if (pi != NULL && pi->type == REDIS_REPLY_STRING) {
                    probe_info_field(pi->str, "maxmemory_policy", pol, sizeof pol);
                    probe_info_field(pi->str, "connected_slaves", reps, sizeof reps);
                    if (reps[0] && atoi(reps) < d->cl_min_rep)
                        d->cl_min_rep = atoi(reps);
                }
                if (pi != NULL)
                    freeReplyObject(pi);
                if (strncmp(pol, "volatile-", 9) == 0 || strncmp(pol, "allkeys-", 8) == 0)
                    doctor_add(d, "maxmemory-policy", SEV_FAIL,
                        "an evicted lock is free for anyone while its holder still believes it "
                        "holds it",
                        "CONFIG SET maxmemory-policy noeviction on every node",
                        "node %s:%d: maxmemory-policy %s", ranges[i].primary.host,
                        ranges[i].primary.port, pol);
                redisFree(c2);
            }
        }
        if (d->t.kind == PROBE_CLUSTER) {
            if (d->replicas >= 0 && d->replicas < d->cl_min_rep)
                d->cl_min_rep = d->replicas;
            bool full = d->cl_covered == 16384;
            doctor_add(d, "topology", full ? SEV_OK : SEV_FAIL,
                full ? NULL : "a lock whose slot no primary serves cannot be taken (CLUSTERDOWN)",
                full ? NULL : "assign every slot (redis-cli --cluster fix)",
                "Cluster: %d primaries serving %d of 16384 slots, at least %d replica(s) each",
                d->cl_primaries, d->cl_covered, d->cl_min_rep == 1 << 30 ? 0 : d->cl_min_rep);
            if (d->cl_min_rep == 0)
                doctor_add(d, "replicas", SEV_WARN,
                    "a primary without a replica loses its slots' locks when it dies, and the "
                    "cluster refuses every lock (CLUSTERDOWN) until it is back",
                    "give every primary a replica", "a primary has no replica");
        }
        if (!d->stopped && d->c != NULL) {
            doctor_check_node(d);
            doctor_measure_node(d);
        }
    }
    if (!d->stopped && d->samples > 0)
        doctor_measure_library(d);
    /* Clean-up: doctor's own keys (the locks' hashes are gone with their releases). */
    if (d->c != NULL && !d->stopped) {
        for (int i = 0; i < d->nkeys; i++) {
            redisReply *r = probe_cmdv(d->c, "DEL", d->keys[i], NULL);
            if (r != NULL)
                freeReplyObject(r);
        }
    }
    if (d->c != NULL)
        redisFree(d->c);
    int worst = 0;
    for (int i = 0; i < d->n; i++)
        worst = d->f[i].sev > worst ? d->f[i].sev : worst;
    report(d, worst);
    free(d);
    return worst;
}
