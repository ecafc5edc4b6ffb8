/*
 * nats_link.h: how this daemon talks to the NATS servers, in one place
 * for the cluster thread (cluster.c) and the JetStream store
 * (store_jetstream.c): the options a connection gets (servers,
 * credentials, reconnecting), the first connect and libnats's reason when
 * it fails, and the names of the cluster's JetStream buckets. Nothing
 * here logs; the callers say what failed.
 */
#ifndef ECHOROUTERD_NATS_LINK_H
#define ECHOROUTERD_NATS_LINK_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* A bucket's name, "<prefix>-<what>", with its NUL: what is short. */
#define NATS_LINK_BUCKET_MAX	(CLUSTER_PREFIX_MAX + 16)
/* A bucket's stream, "KV_<bucket>", with its NUL. */
#define NATS_LINK_STREAM_MAX	(NATS_LINK_BUCKET_MAX + 4)

/* Who a connection is for: they reconnect alike, and differ in the rest. */
enum nats_link_role {
	NATS_LINK_CLUSTER,	/* the cluster thread's: messages, claims */
	NATS_LINK_STORE,	/* the JetStream store's */
};

/*
 * What a connection is set to (nats_link_settings), before libnats has
 * it (nats_link_options). The strings are borrowed: from the
 * cluster_conf and the name given, which must outlive the options.
 */
struct nats_link_settings {
	const char *servers[CLUSTER_SERVERS_MAX];
	unsigned nservers;
	const char *name;		/* as the servers show the client */
	const char *credentials;	/* a .creds file; NULL none */
	int	max_reconnect;		/* attempts in a row; -1 forever */
	int64_t	reconnect_wait_ms;	/* between attempts at one server */
	int64_t	timeout_ms;		/* for one connect */
	int64_t	ping_ms;		/* 0: libnats's own interval */
	bool	global_delivery;	/* libnats's shared delivery threads */
	/* Disconnected, reconnected or closed; NULL: not told. */
	natsConnectionHandler on_link;
	natsErrHandler on_error;	/* asynchronous errors; NULL none */
};

/*
 * Fills ls for a connection of role to cl's servers, named name (NULL:
 * the role's own name). The caller may set on_link and on_error after.
 * Any thread.
 */
void	nats_link_settings(struct nats_link_settings *ls,
	    const struct cluster_conf *cl, enum nats_link_role role,
	    const char *name);

/*
 * libnats's options made from ls into *opts. NATS_OK, or libnats's status
 * (nats_GetLastError says more) with *opts left for the caller to
 * destroy (natsOptions_Destroy; NULL is fine). Any thread.
 */
natsStatus nats_link_options(natsOptions **opts,
	    const struct nats_link_settings *ls);

/*
 * Connects with opts, once: the servers are each tried in turn, and none
 * retried. When none takes us, why (n bytes) gets libnats's reason in its
 * own words ("Authorization Violation", "No server available for
 * connection"), else "". Waits up to the options' timeout per server.
 * Any thread.
 */
natsStatus nats_link_connect_once(natsConnection **nc, natsOptions *opts,
	    char *why, size_t n);

/*
 * After nats_link_connect_once failed: connects again, retrying in the
 * background (on_connected runs when it gets through; it must not be
 * NULL). NATS_NOT_YET_CONNECTED while it retries. Any thread.
 */
natsStatus nats_link_connect_retry(natsConnection **nc, natsOptions *opts,
	    natsConnectionHandler on_connected);

/*
 * Whether cl's servers are told who this node is: a credentials file, or
 * a user and password (or a token) in any server's URL. Any thread.
 */
bool	nats_link_has_credentials(const struct cluster_conf *cl);

/*
 * The JetStream bucket what of the cluster whose subject prefix is
 * prefix: "<prefix>-<what>" with the prefix's dots as underscores (a
 * bucket's name has none), into out (n bytes). Any thread.
 */
void	nats_link_bucket(char *out, size_t n, const char *prefix,
	    const char *what);

/*
 * The stream of that bucket, "KV_<bucket>", into stream (sn bytes), and
 * the subject of key in it, "$KV.<bucket>.<key>", into subj (n bytes);
 * key "" gives the prefix of every key's subject. Any thread.
 */
void	nats_link_kv_names(const char *prefix, const char *what,
	    const char *key, char *stream, size_t sn, char *subj, size_t n);

#endif
