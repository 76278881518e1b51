/*
 * test_exporter.c -- per-object metrics for Prometheus (issue #45, part 4): `credisson list
 * --openmetrics` and `credisson exporter`'s /metrics pass Prometheus's own parser (promtool
 * check metrics, Debian's prometheus package); a real Prometheus server started here on
 * loopback scrapes the exporter and its HTTP API returns the held lock's gauge with the
 * holder's labels; a scrape of 1 000 held locks takes under 2 s (the figure is logged);
 * the cap on names per scrape says when it was reached.
 */
#include <criterion/criterion.h>

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "probes.h"
#include "procs.h"

static const char *test_url(void)
{
    static char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", crdt_port());
    return url;
}

static void need(const char *program)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", program);
    cr_assert_eq(system(cmd), 0, "%s is missing: apt-get install prometheus (scripts/deps.sh)",
                 program);
}

/* promtool check metrics on text; asserts it passes (its words in the message). */
static void promtool_accepts(const char *text, const char *what)
{
    need("promtool");
    char in[256], out[300], cmd[700];
    snprintf(in, sizeof in, "%s/promtool.%d.in", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    snprintf(out, sizeof out, "%s.out", in);
    FILE *f = fopen(in, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "promtool check metrics < '%s' > '%s' 2>&1", in, out);
    int rc = system(cmd);
    char *said = crdt_file_text(out);
    cr_assert_eq(rc, 0, "promtool check metrics refused %s: %s", what, said);
    /* It also warns about conventions (a non-zero exit); nothing may be printed. */
    cr_assert_str_empty(said, "promtool on %s: %s", what, said);
    free(said);
    unlink(in);
    unlink(out);
}

/* The exporter on a free port; its port from the line it prints at start. */
static int exporter_start(crdt_proc *p, const char *const *extra)
{
    const char *args[24] = {"--url", test_url(), "exporter", "--listen", "127.0.0.1:0"};
    int n = 5;
    for (int i = 0; extra != NULL && extra[i] != NULL; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    crdt_cli_start(p, args);
    int64_t until = crdt_now_ms() + 10000;
    for (;;) {
        char *err = crdt_file_text(p->err);
        const char *at = strstr(err, "serving http://127.0.0.1:");
        int port = at != NULL ? atoi(at + strlen("serving http://127.0.0.1:")) : 0;
        free(err);
        if (port > 0)
            return port;
        cr_assert_lt(crdt_now_ms(), until, "the exporter never said where it listens");
        crdt_sleep_ms(10);
    }
}

/* The value of the sample line starting with prefix ("name " or "name{...} "). */
static double sample(const char *text, const char *prefix)
{
    char line[300];
    snprintf(line, sizeof line, "\n%s", prefix);
    const char *at = strstr(text, line);
    cr_assert_not_null(at, "no %s in:\n%s", prefix, text);
    const char *sp = strchr(at + 1, ' ');
    return atof(sp + 1);
}

/* Objects of every kind under the test's prefix; returns the client holding them. */
static crd_client *hold_every_kind(crd_lock **lock, crd_rwlock **rw, crd_lock **fair)
{
    crd_options o;
    crdt_options(&o);
    o.identity = true;
    crd_client *c = crdt_client_opts(&o);
    *lock = crdt_lock(c, crdt_key("lock"));
    cr_assert_eq(crd_rwlock_new(c, crdt_key("rw"), rw), CRD_OK);
    cr_assert_eq(crd_fair_lock_new(c, crdt_key("fair"), fair), CRD_OK);
    cr_assert_eq(crd_lock_acquire(*lock, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(crd_rwlock_read(*rw), 0, CRD_LEASE_WATCHDOG), CRD_OK);
    cr_assert_eq(crd_lock_acquire(*fair, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crd_semaphore *s = NULL;
    cr_assert_eq(crd_semaphore_new(c, crdt_key("sem"), &s), CRD_OK);
    cr_assert_eq(crd_semaphore_try_set_permits(s, 4, 0, NULL), CRD_OK);
    crd_semaphore_free(s);
    crd_permit_semaphore *ps = NULL;
    char id[CRD_PERMIT_ID_SIZE];
    cr_assert_eq(crd_permit_semaphore_new(c, crdt_key("pes"), &ps), CRD_OK);
    cr_assert_eq(crd_permit_semaphore_try_set_permits(ps, 2, NULL), CRD_OK);
    cr_assert_eq(crd_permit_semaphore_acquire(ps, 0, 60000, id), CRD_OK);
    crd_permit_semaphore_free(ps);
    /* Redisson 4.7's: a grouped lock of 3 values (one hash, the group's name) and a rate
     * limiter (its {N}:value and {N}:permits are parts of it, not objects). */
    crd_lock *group = NULL;
    const char *const values[] = {"a", "b", "c"};
    cr_assert_eq(crd_group_lock_new(c, crdt_key("group"), values, 3, &group), CRD_OK);
    cr_assert_eq(crd_lock_acquire(group, 0, 60000), CRD_OK);
    crd_lock_free(group); /* the hold stays until its lease runs out */
    crd_rate_limiter *rl = NULL;
    cr_assert_eq(crd_rate_limiter_new(c, crdt_key("rate"), &rl), CRD_OK);
    crd_rate_config cfg = {.mode = CRD_RATE_OVERALL, .rate = 5, .interval_ms = 60000};
    cr_assert_eq(crd_rate_limiter_try_set_rate(rl, &cfg, NULL), CRD_OK);
    cr_assert_eq(crd_rate_limiter_acquire(rl, 1, 0), CRD_OK);
    crd_rate_limiter_free(rl);
    redisContext *r = crdt_redis();
    /* A name that needs escaping, and a foreign (Java-like) holder. */
    char odd[300];
    snprintf(odd, sizeof odd, "%s \"q\" \\ \xff", crdt_key("odd"));
    freeReplyObject(crdt_cmd(r, "HSET %b 11111111-2222-4333-8444-555555555555:7 1", odd,
                             strlen(odd)));
    freeReplyObject(crdt_cmd(r, "PEXPIRE %b 60000", odd, strlen(odd)));
    redisFree(r);
    return c;
}

Test(exporter, list_openmetrics_and_the_exporters_metrics_pass_promtool, .timeout = 60)
{
    crd_lock *lock, *fair;
    crd_rwlock *rw;
    crd_client *c = hold_every_kind(&lock, &rw, &fair);
    crdt_probe sa = {.c = c, .name = crdt_key("fair")}; /* the last lock taken */
    cr_assert(crdt_wait_until(crdt_holder_since_known, &sa, 5000), "the holds never reached the record");
    char pattern[300];
    snprintf(pattern, sizeof pattern, "%s*", crdt_key_prefix());
    char *out = NULL, *err = NULL;
    cr_assert_eq(crdt_cli_run((const char *[]){"--url", test_url(), "list", "--openmetrics",
                                               pattern, NULL},
                              10000, &out, &err),
                 0, "%s", err);
    promtool_accepts(out, "list --openmetrics");
    char want[600];
    snprintf(want, sizeof want, "credisson_lock_held{name=\"%s\",kind=\"rlock\"} 1",
             crdt_key("lock"));
    cr_assert(strstr(out, want) != NULL, "%s", out);
    cr_assert(sample(out, "credisson_scrape_objects ") == 8, "%s", out);
    snprintf(want, sizeof want, "credisson_lock_held{name=\"%s\",kind=\"group\"} 1",
             crdt_key("group"));
    cr_assert(strstr(out, want) != NULL, "%s", out);
    snprintf(want, sizeof want, "credisson_object_waiters{name=\"%s\",kind=\"rate_limiter\"} 0",
             crdt_key("rate"));
    cr_assert(strstr(out, want) != NULL, "%s", out);
    snprintf(want, sizeof want, "credisson_lock_held{name=\"%s\",kind=\"rlock\"} 1",
             crdt_key("lock"));
    cr_assert(strstr(out, "credisson_semaphore_permits_out{") != NULL);
    cr_assert(strstr(out, "credisson_lock_hold_age_seconds{") != NULL);
    free(out);
    free(err);

    crdt_proc x;
    int port = exporter_start(&x, (const char *[]){pattern, NULL});
    char *body = NULL;
    cr_assert_eq(crdt_http_get(port, "/metrics", 10000, &body), 200);
    promtool_accepts(body, "/metrics");
    cr_assert(strstr(body, want) != NULL, "%s", body);
    free(body);
    cr_assert_eq(crdt_http_get(port, "/nothing", 10000, &body), 404);
    free(body);
    kill(x.pid, SIGTERM);
    cr_assert_eq(crdt_proc_finish(&x, 10000, NULL, NULL), 0);

    crd_lock_release(lock);
    crd_lock_release(crd_rwlock_read(rw));
    crd_lock_release(fair);
    crd_lock_free(lock);
    crd_lock_free(fair);
    crd_rwlock_free(rw);
    crd_client_free(c);
}

/* "%XX" for everything but letters and digits. */
static void urlencode(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 4 < cap; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))
            out[o++] = (char)*p;
        else
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", *p);
    }
    out[o] = '\0';
}

Test(exporter, a_real_prometheus_scrapes_the_held_lock_with_its_holders_labels, .timeout = 90)
{
    need("prometheus");
    crd_options o;
    crdt_options(&o);
    o.identity = true;
    o.identity_label = "scraped";
    crd_client *c = crdt_client_opts(&o);
    const char *name = crdt_key("scraped");
    crd_lock *l = crdt_lock(c, name);
    cr_assert_eq(crd_lock_acquire(l, 0, CRD_LEASE_WATCHDOG), CRD_OK);
    crdt_proc x;
    int xport = exporter_start(&x, (const char *[]){name, NULL});

    char dir[256], conf[300];
    snprintf(dir, sizeof dir, "%s/crdt-prom.%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/data'", dir, dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(conf, sizeof conf, "%s/prometheus.yml", dir);
    FILE *f = fopen(conf, "w");
    cr_assert_not_null(f);
    fprintf(f, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
               "scrape_configs:\n  - job_name: credisson\n    static_configs:\n"
               "      - targets: ['127.0.0.1:%d']\n", xport);
    fclose(f);
    int pport = crdt_free_port();
    char listen[64], cfgarg[400], data[400];
    snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%d", pport);
    snprintf(cfgarg, sizeof cfgarg, "--config.file=%s", conf);
    snprintf(data, sizeof data, "--storage.tsdb.path=%s/data", dir);
    crdt_proc prom;
    crdt_proc_start(&prom, (const char *[]){"/usr/bin/prometheus", cfgarg, data, listen,
                                            "--log.level=warn", NULL});
    char q[700], enc[1400], path[1600];
    snprintf(q, sizeof q, "credisson_lock_holder_info{name=\"%s\"}", name);
    urlencode(q, enc, sizeof enc);
    snprintf(path, sizeof path, "/api/v1/query?query=%s", enc);
    int64_t t0 = crdt_now_ms(), until = t0 + 40000;
    json_t *result = NULL, *j = NULL;
    while (crdt_now_ms() < until) {
        char *body = NULL;
        if (crdt_http_get(pport, path, 2000, &body) == 200) {
            json_error_t e;
            j = json_loads(body, 0, &e);
            result = j != NULL ? json_object_get(json_object_get(j, "data"), "result") : NULL;
            if (json_array_size(result) > 0) {
                free(body);
                break;
            }
            json_decref(j);
            j = NULL;
        }
        free(body);
        crdt_sleep_ms(200);
    }
    char *perr = crdt_file_text(prom.err);
    cr_assert(j != NULL && json_array_size(result) == 1,
              "Prometheus never had the gauge (%lld ms); its log: %s", (long long)(crdt_now_ms() - t0),
              perr);
    free(perr);
    json_t *metric = json_object_get(json_array_get(result, 0), "metric");
    char host[256], pid[24], owner[128];
    gethostname(host, sizeof host);
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    snprintf(owner, sizeof owner, "%s:%llu", crd_client_id(c),
             (unsigned long long)crd_owner_current());
    cr_assert_str_eq(json_string_value(json_object_get(metric, "host")), host);
    cr_assert_str_eq(json_string_value(json_object_get(metric, "pid")), pid);
    cr_assert_str_eq(json_string_value(json_object_get(metric, "owner")), owner);
    cr_assert_str_eq(json_string_value(json_object_get(metric, "label")), "scraped");
    cr_assert_str_eq(json_string_value(json_object_get(metric, "kind")), "rlock");
    cr_assert_str_eq(json_string_value(json_object_get(metric, "job")), "credisson");
    cr_log_info("[exporter] Prometheus answered the held lock's gauge with the holder's labels "
                "%lld ms after it started", (long long)(crdt_now_ms() - t0));
    json_decref(j);
    crdt_proc_kill(&prom, SIGTERM);
    kill(x.pid, SIGTERM);
    crdt_proc_finish(&x, 10000, NULL, NULL);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(crd_lock_release(l), CRD_OK);
    crd_lock_free(l);
    crd_client_free(c);
}

Test(exporter, a_scrape_of_1000_held_locks_takes_under_2_s_and_the_cap_says_so, .timeout = 120)
{
    crd_options o;
    crdt_options(&o);
    o.identity = true;
    crd_client *c = crdt_client_opts(&o);
    enum { N = 1000 };
    crd_lock **locks = calloc(N, sizeof *locks);
    char base[300];
    snprintf(base, sizeof base, "%s", crdt_key("many"));
    for (int i = 0; i < N; i++) {
        char n[400];
        snprintf(n, sizeof n, "%s:%04d", base, i);
        locks[i] = crdt_lock(c, n);
        cr_assert_eq(crd_lock_acquire(locks[i], 0, 120000), CRD_OK);
    }
    char last[400];
    snprintf(last, sizeof last, "%s:%04d", base, N - 1);
    crdt_probe sa = {.c = c, .name = last}; /* every hold is in the record: the joins have work to do */
    cr_assert(crdt_wait_until(crdt_holder_since_known, &sa, 5000), "the holds never reached the record");
    char pattern[400];
    snprintf(pattern, sizeof pattern, "%s:*", base);
    crdt_proc x;
    int port = exporter_start(&x, (const char *[]){pattern, NULL});
    char *body = NULL;
    int64_t best = INT64_MAX, worst = 0;
    for (int k = 0; k < 3; k++) {
        free(body);
        int64_t t0 = crdt_now_ms();
        cr_assert_eq(crdt_http_get(port, "/metrics", 10000, &body), 200);
        int64_t took = crdt_now_ms() - t0;
        best = took < best ? took : best;
        worst = took > worst ? took : worst;
    }
    cr_log_info("[exporter] a scrape of %d held locks: %lld-%lld ms (3 scrapes; %zu bytes)", N,
                (long long)best, (long long)worst, strlen(body));
    fprintf(stderr, "[exporter] 1000 held locks: the slowest of the scrapes took %lld ms\n",
            (long long)worst);
    /* 2 s is the promise, gated in the plain build; a sanitized exporter runs several times
     * slower (883-2580 ms seen under TSan in CI): 8 s there. */
    cr_assert_lt(worst, CRDT_SANITIZED ? 8000 : 2000, "a scrape took %lld ms", (long long)worst);
    cr_assert(sample(body, "credisson_scrape_objects ") == N);
    cr_assert(sample(body, "credisson_scrape_truncated ") == 0);
    cr_assert(sample(body, "credisson_scrape_complete ") == 1);
    promtool_accepts(body, "a scrape of 1000 locks");
    free(body);
    kill(x.pid, SIGTERM);
    crdt_proc_finish(&x, 10000, NULL, NULL);
    /* The cap: at most --max-names objects, and the scrape says it stopped there. */
    char *out = NULL;
    cr_assert_eq(crdt_cli_run((const char *[]){"--url", test_url(), "list", "--openmetrics",
                                               "--max-names", "10", pattern, NULL},
                              20000, &out, NULL),
                 0);
    cr_assert(sample(out, "credisson_scrape_objects ") == 10, "%s", out);
    cr_assert(sample(out, "credisson_scrape_truncated ") == 1);
    cr_assert(strstr(out, "# credisson: stopped at --max-names 10 objects; more match\n") != NULL);
    promtool_accepts(out, "a capped scrape");
    free(out);
    for (int i = 0; i < N; i++) {
        crd_lock_release(locks[i]);
        crd_lock_free(locks[i]);
    }
    free(locks);
    crd_client_free(c);
}
