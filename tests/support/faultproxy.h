/*
 * faultproxy.h -- a TCP proxy on loopback that puts faults between the library and a
 * real redis-server.
 *
 * What it provides
 *   A proxy listens on a free 127.0.0.1 port and forwards every connection to an
 *   upstream redis-server port. One thread of the calling process runs it (poll(), no
 *   external service). A test points the library at crdt_proxy_port() and then tells
 *   the proxy what to break:
 *     - latency: every byte in one direction is held for a fixed time;
 *     - black hole: bytes in one direction are read and thrown away, the connections
 *       stay open (the peer sees silence, then its own timeout);
 *     - stall: bytes in one direction are kept and delivered late, when the stall ends
 *       (a partition that heals, TCP having retransmitted);
 *     - drop: every open connection is closed now;
 *     - refuse: the listening socket is closed (connects get ECONNREFUSED) and every
 *       connection is dropped, until refusing is turned off (same port again);
 *     - one-shot rules that fire on the next command whose bytes contain a pattern:
 *       hold it or its reply for a while, swallow its reply (and everything after it on
 *       that connection), let Redis execute it and then swallow the reply and close the
 *       connection, or close the connection without forwarding it;
 *     - a new upstream port (a restarted redis-server) for connections made from now on.
 *
 * Direction names: UP is client to server (commands), DOWN is server to client
 * (replies, pub/sub messages). Data that was sent before a peer closed is still
 * delivered (half-close is forwarded), as on a real network.
 *
 * No Criterion here: the chaos checker links this file too. Functions return false or
 * NULL on failure instead of asserting. Every function is thread-safe. All sockets are
 * close-on-exec; a process that forks while a proxy runs should exec (or never touch
 * the inherited descriptors): a forked copy of a socket keeps a "dropped" connection
 * open.
 */
#ifndef CRDT_FAULTPROXY_H
#define CRDT_FAULTPROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct crdt_proxy crdt_proxy;

typedef enum crdt_proxy_dir {
    CRDT_PROXY_UP = 1,   /* client -> server */
    CRDT_PROXY_DOWN = 2, /* server -> client */
    CRDT_PROXY_BOTH = 3
} crdt_proxy_dir;

typedef enum crdt_proxy_action {
    /* Hold every byte the server sends on that connection for ms, counted from when
     * the matching command passed the proxy (a held SUBSCRIBE confirmation). */
    CRDT_PROXY_DELAY_REPLY = 1,
    /* Forward the command; throw away everything the server sends on that connection
     * from now on. The connection stays open: the client runs into its timeout. */
    CRDT_PROXY_SWALLOW_REPLY = 2,
    /* Forward the command, wait until the server has answered (so it has executed it),
     * throw the answer away and close the connection both ways. */
    CRDT_PROXY_EXECUTE_THEN_CLOSE = 3,
    /* Close the connection instead of forwarding the command (it never runs). */
    CRDT_PROXY_CLOSE_BEFORE = 4,
    /* Hold the command itself (and every later client byte on that connection) for ms
     * before it reaches the server: a SUBSCRIBE that arrives late, an acquire that
     * runs after its sender gave up on it. */
    CRDT_PROXY_DELAY_COMMAND = 5
} crdt_proxy_action;

/* Start a proxy on a free 127.0.0.1 port forwarding to 127.0.0.1:upstream_port, with
 * its thread running. NULL on failure (errno-style reason in *why if why != NULL). */
crdt_proxy *crdt_proxy_start(int upstream_port, const char **why);
/* Stop the thread, close every socket, free. Accepts NULL. */
void crdt_proxy_stop(crdt_proxy *p);

/* The port clients connect to. */
int crdt_proxy_port(const crdt_proxy *p);
/* Connections made from now on go to this upstream port. */
void crdt_proxy_set_upstream(crdt_proxy *p, int upstream_port);

/* Added latency in ms (0 = none) for data in dir, from now on. */
void crdt_proxy_set_delay(crdt_proxy *p, crdt_proxy_dir dir, int64_t ms);
/* Black-hole data in dir (on) or forward it again (off). */
void crdt_proxy_set_blackhole(crdt_proxy *p, crdt_proxy_dir dir, bool on);
/* Black-hole both directions of every connection (open or to come) whose client has
 * the IPv4 address ipv4 (on), or forward them again (off). Redis servers started with
 * distinct bind-source-addr values (127.0.0.x) are told apart so: one proxy in front of
 * a cluster node's bus cuts one peer off it and keeps the others. Returns false for a
 * bad address or when 8 are cut off already. */
bool crdt_proxy_set_blackhole_from(crdt_proxy *p, const char *ipv4, bool on);
/* Stall data in dir (on): it is kept, in order, and delivered when the stall ends
 * (off), as TCP retransmission delivers it after a partition heals. A command sent
 * during a stall may run long after its sender gave up on it. */
void crdt_proxy_set_stall(crdt_proxy *p, crdt_proxy_dir dir, bool on);
/* Deliver now what a delay (crdt_proxy_set_delay, CRDT_PROXY_DELAY_REPLY/_COMMAND) still
 * holds back, in order; the rules and settings stay. A test so chooses the moment a
 * delayed reply arrives (after a failover, say) instead of guessing a delay. */
void crdt_proxy_end_delays(crdt_proxy *p);
/* Close every open connection now. Returns how many were closed. */
int crdt_proxy_drop_all(crdt_proxy *p);
/* Refuse connections (close the listener, drop everything) or listen again on the same
 * port. Returns false when the port could not be bound again. */
bool crdt_proxy_set_refuse(crdt_proxy *p, bool refuse);
/* Back to a clean proxy: no delay, black hole, stall or rules; listening. */
void crdt_proxy_reset(crdt_proxy *p);

/* Arm a one-shot rule: the next command (client data) that contains the bytes of
 * match, and does not contain exclude (NULL: no exclusion), triggers action (ms is
 * used by CRDT_PROXY_DELAY_REPLY). Returns a rule id >= 0, or -1 when all 16 slots
 * are armed. Patterns are NUL-terminated and at most 255 bytes. */
int crdt_proxy_arm(crdt_proxy *p, const char *match, const char *exclude,
                   crdt_proxy_action action, int64_t ms);
/* Whether rule id has fired. */
bool crdt_proxy_fired(crdt_proxy *p, int id);
/* Waits (polling every 2 ms) up to timeout_ms for rule id to fire. */
bool crdt_proxy_wait_fired(crdt_proxy *p, int id, int64_t timeout_ms);
/* Disarm every rule and forget which fired (the slots become free). */
void crdt_proxy_disarm_all(crdt_proxy *p);

/* Counters since start. */
typedef struct crdt_proxy_stats {
    uint64_t accepted;       /* client connections accepted */
    uint64_t upstream_fails; /* accepted connections whose upstream connect failed */
    uint64_t open;           /* connection pairs open now */
    uint64_t bytes_up, bytes_down;           /* forwarded */
    uint64_t dropped_up, dropped_down;       /* black-holed or swallowed */
} crdt_proxy_stats;
void crdt_proxy_get_stats(crdt_proxy *p, crdt_proxy_stats *out);

#endif /* CRDT_FAULTPROXY_H */
