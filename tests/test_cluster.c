/*
 * test_cluster.c -- credisson on a real Redis Cluster (3 primaries + 3 replicas on
 * loopback, started by tests/support/cluster.c for each test): the topology itself,
 * routing by slot, sharded pub/sub wake-ups, resharding and failover while locked, bad
 * input, and golden parity with Redisson's cluster recordings.
 *
 * CRDT_SERIAL_TEST: each test starts six servers and moves slots around; one at a time.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "harness.h"

Test(cluster, the_harness_starts_three_primaries_with_a_replica_each, .timeout = 60)
{
    crdt_cluster cl;
    int64_t t0 = crdt_now_ms();
    crdt_cluster_start(&cl, 3, 1);
    int64_t took = crdt_now_ms() - t0;
    int served[CRDT_CLUSTER_MAX] = {0};
    for (int s = 0; s < 16384; s += 97)
        served[crdt_cluster_owner(&cl, s)]++;
    for (int i = 0; i < 3; i++)
        cr_expect_gt(served[i], 0, "primary %d serves no slot", i);
    for (int i = 3; i < 6; i++)
        cr_expect_eq(served[i], 0, "replica %d serves slots", i);
    cr_expect_eq(crdt_cluster_keyslot(&cl, "foo"), 12182);
    cr_log_info("cluster of 6 nodes ready in %lld ms", (long long)took);
    crdt_cluster_stop(&cl);
}
