/* rate_limit.c -- at most 5 calls a second to a partner API, for the whole fleet: every
 * process (C, or Java's getRateLimiter("partner-api")) takes a permit of the same limiter
 * before it calls. Makes 12 calls and prints when each was allowed: 5 at once, then the
 * next ones as the interval gives permits back.
 * Usage: example_rate_limit [redis://host:port]   (default redis://127.0.0.1:6379) */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <credisson.h>
#include <stdio.h>
#include <time.h>

#include "example.h" /* connect_client, report_failure */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    crd_client *client = connect_client(argc, argv, NULL);
    if (client == NULL)
        return 1;
    crd_rate_limiter *rl = NULL;
    crd_status st = crd_rate_limiter_new(client, "partner-api", &rl);
    /* 5 permits per 1000 ms shared by every client; the first process sets it, the others
     * find it set (set == false) and keep it. */
    const crd_rate_config rate = {.mode = CRD_RATE_OVERALL, .rate = 5, .interval_ms = 1000};
    if (st == CRD_OK)
        st = crd_rate_limiter_try_set_rate(rl, &rate, NULL);
    double t0 = now_s();
    for (int call = 1; call <= 12 && st == CRD_OK; call++) {
        /* Waits as long as the server says a permit takes to come back (no polling), at
         * most 5 s: CRD_TIMEOUT then. */
        st = crd_rate_limiter_acquire(rl, 1, 5000);
        if (st == CRD_OK)
            printf("call %2d allowed at +%.2f s\n", call, now_s() - t0);
        /* ... the call to the partner's API ... */
    }
    report_failure("rate limiter", st, client);
    crd_rate_limiter_free(rl);
    crd_client_free(client);
    return st == CRD_OK ? 0 : 1;
}
