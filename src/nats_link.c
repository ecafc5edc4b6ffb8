/* nats_link.c: NATS connections' options, first connect and bucket names. */
#include "nats_link.h"

#include <stdio.h>
#include <string.h>

#include "cluster_wire.h"

/* Runs call while s is still NATS_OK. */
#define IFOK_NATS(s, call)	do { if ((s) == NATS_OK) (s) = (call); } while (0)

/*
 * Both roles keep trying for as long as the daemon runs, every half
 * second: a cluster outlives the restart of any NATS server.
 */
#define LINK_MAX_RECONNECT	(-1)
#define LINK_RECONNECT_WAIT_MS	500
#define LINK_TIMEOUT_MS		2000
/*
 * The cluster thread pings often, to see a lost server within seconds:
 * its senders hear a temporary error meanwhile. The store keeps libnats's
 * interval, as it always has.
 */
#define LINK_CLUSTER_PING_MS	2000

void
nats_link_settings(struct nats_link_settings *ls,
    const struct cluster_conf *cl, enum nats_link_role role,
    const char *name)
{
	*ls = (struct nats_link_settings){
		.max_reconnect = LINK_MAX_RECONNECT,
		.reconnect_wait_ms = LINK_RECONNECT_WAIT_MS,
		.timeout_ms = LINK_TIMEOUT_MS,
	};
	for (unsigned i = 0; i < cl->nservers && i < CLUSTER_SERVERS_MAX; i++)
		ls->servers[ls->nservers++] = cl->servers[i];
	if (cl->credentials[0] != '\0')
		ls->credentials = cl->credentials;
	if (role == NATS_LINK_CLUSTER) {
		ls->name = name != NULL ? name : "echorouterd";
		ls->ping_ms = LINK_CLUSTER_PING_MS;
		/* Its subscriptions share a few threads, not one each. */
		ls->global_delivery = true;
	} else {
		ls->name = name != NULL ? name : "echorouterd store";
	}
}

/* The callbacks ls asks for, set on opts. */
static natsStatus
set_callbacks(natsOptions *opts, const struct nats_link_settings *ls)
{
	natsStatus s = NATS_OK;

	if (ls->on_link != NULL) {
		s = natsOptions_SetDisconnectedCB(opts, ls->on_link, NULL);
		IFOK_NATS(s, natsOptions_SetReconnectedCB(opts, ls->on_link,
		    NULL));
		IFOK_NATS(s, natsOptions_SetClosedCB(opts, ls->on_link, NULL));
	}
	if (ls->on_error != NULL)
		IFOK_NATS(s, natsOptions_SetErrorHandler(opts, ls->on_error,
		    NULL));
	return s;
}

natsStatus
nats_link_options(natsOptions **opts, const struct nats_link_settings *ls)
{
	const char *servers[CLUSTER_SERVERS_MAX];
	natsStatus s;

	/* (libnats takes them as not const; it copies them.) */
	for (unsigned i = 0; i < ls->nservers; i++)
		servers[i] = ls->servers[i];
	*opts = NULL;
	s = natsOptions_Create(opts);
	IFOK_NATS(s, natsOptions_SetServers(*opts, servers,
	    (int)ls->nservers));
	IFOK_NATS(s, natsOptions_SetName(*opts, ls->name));
	IFOK_NATS(s, natsOptions_SetMaxReconnect(*opts, ls->max_reconnect));
	IFOK_NATS(s, natsOptions_SetReconnectWait(*opts,
	    ls->reconnect_wait_ms));
	IFOK_NATS(s, natsOptions_SetTimeout(*opts, ls->timeout_ms));
	if (ls->ping_ms > 0)
		IFOK_NATS(s, natsOptions_SetPingInterval(*opts, ls->ping_ms));
	IFOK_NATS(s, set_callbacks(*opts, ls));
	if (ls->global_delivery)
		IFOK_NATS(s, natsOptions_UseGlobalMessageDelivery(*opts, true));
	if (ls->credentials != NULL)
		IFOK_NATS(s, natsOptions_SetUserCredentialsFromFiles(*opts,
		    ls->credentials, NULL));
	return s;
}

/*
 * Why libnats's last call on this thread failed with s, in its own words
 * ("Authorization Violation"), without the "(conn.c:1905): " before them.
 */
static void
last_why(natsStatus s, char *out, size_t n)
{
	const char *t = nats_GetLastError(NULL), *p;

	if (t == NULL || t[0] == '\0')
		t = natsStatus_GetText(s);
	else if (t[0] == '(' && (p = strstr(t, "): ")) != NULL)
		t = p + 3;
	snprintf(out, n, "%s", t);
}

natsStatus
nats_link_connect_once(natsConnection **nc, natsOptions *opts, char *why,
    size_t n)
{
	natsStatus s = natsConnection_Connect(nc, opts);

	if (n > 0)
		why[0] = '\0';
	if (s != NATS_OK && n > 0)
		last_why(s, why, n);
	return s;
}

natsStatus
nats_link_connect_retry(natsConnection **nc, natsOptions *opts,
    natsConnectionHandler on_connected)
{
	natsStatus s;

	s = natsOptions_SetRetryOnFailedConnect(opts, true, on_connected,
	    NULL);
	IFOK_NATS(s, natsConnection_Connect(nc, opts));
	return s;
}

bool
nats_link_has_credentials(const struct cluster_conf *cl)
{
	char shown[sizeof(cl->servers[0])];

	if (cl->credentials[0] != '\0')
		return true;
	for (unsigned i = 0; i < cl->nservers; i++) {
		cluster_url_shown(cl->servers[i], shown, sizeof(shown));
		if (strcmp(shown, cl->servers[i]) != 0)
			return true;		/* user:password@ */
	}
	return false;
}

void
nats_link_bucket(char *out, size_t n, const char *prefix, const char *what)
{
	snprintf(out, n, "%s-%s", prefix, what);
	for (char *p = out; *p != '\0'; p++)
		if (*p == '.')
			*p = '_';
}

void
nats_link_kv_names(const char *prefix, const char *what, const char *key,
    char *stream, size_t sn, char *subj, size_t n)
{
	char b[NATS_LINK_BUCKET_MAX];

	nats_link_bucket(b, sizeof(b), prefix, what);
	snprintf(stream, sn, "KV_%s", b);
	snprintf(subj, n, "$KV.%s.%s", b, key);
}
