/*
 * client.h -- the client layer (src/client/; base.h lists the layers): the client's start
 * and end (client.c) and the process around the clients: the registry, fork and
 * thread-exit hooks (lifecycle.c); the public state API over every layer below (inspect.c,
 * scan.c, whois.c, watch.c; their shared parts in inspect.h). Sees every layer below.
 */
#ifndef CRD_CLIENT_H
#define CRD_CLIENT_H

#include "sync.h"

/* ---- lifecycle.c: the process around the clients ------------------------------------------ */

/* Installs the fork and thread-exit hooks once, and adds c to the registry they walk. */
void crd__lifecycle_register(crd_client *c);
void crd__lifecycle_unregister(crd_client *c);
/* Releases every hold of the client (release_on_close) or stops tracking it. */
void crd__lifecycle_release_all(crd_client *c);

#endif /* CRD_CLIENT_H */
