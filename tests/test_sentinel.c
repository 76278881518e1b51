/*
 * test_sentinel.c -- Sentinel mode and replica sync against a real topology: one
 * primary, two replicas and three redis-sentinel processes (tests/support/sentinel.h),
 * started by each test on free loopback ports and stopped at its end.
 * Runs its tests one at a time (CRDT_SERIAL_TEST): failovers load both cores.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sentinel.h"

static crdt_topo topo;

static void topo_up(void)
{
    cr_assert(crdt_topo_start(&topo, NULL), "topology: %s", topo.err);
}

static void topo_down(void) { crdt_topo_stop(&topo); }

Test(sentinel, the_test_topology_comes_up_and_fails_over, .init = topo_up, .fini = topo_down)
{
    int first = crdt_topo_primary_port(&topo);
    cr_assert_eq(first, topo.nodes[0].port);
    int second = crdt_topo_failover(&topo, 30000);
    cr_assert(second > 0 && second != first, "failover: %s", topo.err);
    cr_assert(crdt_topo_settle(&topo, 20000), "%s", topo.err);
    int third = crdt_topo_kill_primary(&topo, 30000);
    cr_assert(third > 0 && third != second, "kill: %s", topo.err);
    cr_assert(crdt_topo_restart(&topo, crdt_topo_node_index(&topo, second), 20000), "%s",
              topo.err);
}
