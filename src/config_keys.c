/* config_keys.c: every setting's row, and the checks no row can say. */
#include "config_table.h"
#include "counter.h"
#include "transport.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_wire.h"
#include "http.h"
#include "http_cb.h"
#include "proto.h"
#include "text.h"
#include "util.h"
#include "version.h"

#define FIELD(T, f)	.off = offsetof(T, f), .size = sizeof(((T *)0)->f)
#define GROUP(T, f, g)	FIELD(T, f), .sub = &(g)
#define TOP		"Top-level settings"
#define BUILT(opt)	.option = #opt, .built = ER_##opt

/* Whether row name of the group being read was present. */
bool
config_walk_seen(const struct walk *w, const char *name)
{
	for (size_t i = 0; i < w->g->nkeys; i++)
		if (strcmp(w->g->keys[i].name, name) == 0)
			return (w->seen & (1u << i)) != 0;
	return false;
}

static unsigned
ncpu_dispatchers(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	return ncpu < 1 ? 1 : ncpu > CONFIG_DISPATCHERS_MAX ?
	    CONFIG_DISPATCHERS_MAX : (unsigned)ncpu;
}

/* dispatchers = "auto", the default: one per online CPU. */
static void
init_dispatchers(struct walk *w, const config_setting_t *s, void *base)
{
	struct config *cf = base;

	(void)w;
	(void)s;
	cf->dispatchers_auto = true;
	cf->dispatchers = ncpu_dispatchers();
}

static void
get_dispatchers(struct walk *w, const config_setting_t *s, void *base)
{
	struct config *cf = base;
	unsigned long long v = 1;

	if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		if (strcmp(config_setting_get_string(s), "auto") != 0) {
			cferr_add(w->e, s, "dispatchers: expected \"auto\" or "
			    "a number 1..%d", CONFIG_DISPATCHERS_MAX);
			return;
		}
		init_dispatchers(w, s, cf);
		return;
	}
	if (config_setting_type(s) != CONFIG_TYPE_INT &&
	    config_setting_type(s) != CONFIG_TYPE_INT64) {
		cferr_add(w->e, s, "dispatchers: expected \"auto\" or a number "
		    "1..%d", CONFIG_DISPATCHERS_MAX);
		return;
	}
	cferr_int(w->e, s, 1, CONFIG_DISPATCHERS_MAX, "", &v);
	cf->dispatchers_auto = false;
	cf->dispatchers = (unsigned)v;
}

static void
get_log_level(struct walk *w, const config_setting_t *k, void *base)
{
	struct config *cf = base;
	const char *v;
	int level;

	if ((v = cferr_string(w->e, k)) == NULL)
		return;
	if ((level = log_level_parse(v)) < 0)
		cferr_add(w->e, k, "log.level: \"%s\" is not one of error, "
		    "warning, notice, info, debug", v);
	else
		cf->log_level = level;
}

/* 0 (the kernel's default), or 4096 bytes to 64 MiB. */
static void
get_socket_buffer(struct walk *w, const config_setting_t *k, size_t *out)
{
	unsigned long long v = 0;

	if (!cferr_bytes(w->e, k, 0, 64 << 20, &v))
		return;
	if (v != 0 && v < 4096) {
		cferr_add(w->e, k, "limits.%s: %llu; use 0 (the kernel's "
		    "default) or 4096 to 67108864", config_setting_name(k), v);
		return;
	}
	*out = (size_t)v;
}

static void
get_sndbuf(struct walk *w, const config_setting_t *k, void *base)
{
	get_socket_buffer(w, k, &((struct limits *)base)->socket_send_buffer);
}

static void
get_rcvbuf(struct walk *w, const config_setting_t *k, void *base)
{
	get_socket_buffer(w, k,
	    &((struct limits *)base)->socket_receive_buffer);
}

static void
limits_finish(struct walk *w, const config_setting_t *s, void *base)
{
	struct limits *l = base;

	if (l->output_limit < l->output_high_watermark)
		cferr_add(w->e, s, "limits: output_limit (%zu) is below "
		    "output_high_watermark (%zu)", l->output_limit,
		    l->output_high_watermark);
}

static bool
valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > CONFIG_NAME_MAX)
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789_.-") == n;
}

static bool
valid_address(const char *s)
{
	struct in6_addr a6;
	struct in_addr a4;

	return inet_pton(AF_INET, s, &a4) == 1 ||
	    inet_pton(AF_INET6, s, &a6) == 1;
}

static void
get_listener_name(struct walk *w, const config_setting_t *k, void *base)
{
	struct listener_conf *l = base;
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if (!valid_name(v))
		cferr_add(w->e, k, "listener name \"%s\": use 1-%d of "
		    "A-Z a-z 0-9 _ . -", v, CONFIG_NAME_MAX);
	else
		snprintf(l->name, sizeof(l->name), "%s", v);
}

static void
get_listener_address(struct walk *w, const config_setting_t *k, void *base)
{
	struct listener_conf *l = base;
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if (!valid_address(v))
		cferr_add(w->e, k, "address \"%s\" is not an IPv4 or IPv6 "
		    "literal", v);
	else
		snprintf(l->address, sizeof(l->address), "%s", v);
}

static void
get_listener_proto(struct walk *w, const config_setting_t *k, void *base)
{
	struct listener_conf *l = base;
	const char *v = cferr_string(w->e, k);

	if (v != NULL && (l->proto = proto_find(v)) == NULL)
		cferr_add(w->e, k, "protocol \"%s\" is unknown (known: %s)", v,
		    proto_names());
}

static void
get_tls_min_version(struct walk *w, const config_setting_t *k, void *base)
{
	struct tls_conf *t = base;
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if (strcmp(v, "TLSv1.2") == 0)
		t->min_version = 12;
	else if (strcmp(v, "TLSv1.3") == 0)
		t->min_version = 13;
	else
		cferr_add(w->e, k, "tls.min_version \"%s\": use \"TLSv1.2\" or "
		    "\"TLSv1.3\"", v);
}

static void
get_tls_ciphers(struct walk *w, const config_setting_t *k, void *base)
{
	struct tls_conf *t = base;
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if (strlen(v) >= sizeof(t->ciphers))
		cferr_add(w->e, k, "tls.ciphers: longer than %zu characters",
		    sizeof(t->ciphers) - 1);
	else
		snprintf(t->ciphers, sizeof(t->ciphers), "%s", v);
}

static void
tls_finish(struct walk *w, const config_setting_t *s, void *base)
{
	const struct tls_conf *t = base;

	if (t->certificate[0] == '\0')
		cferr_add(w->e, s, "tls: \"certificate\" is missing (a PEM file "
		    "with the certificate chain)");
	if (t->key[0] == '\0')
		cferr_add(w->e, s, "tls: \"key\" is missing (a PEM file with "
		    "the private key)");
	if (t->verify_client && t->ca[0] == '\0')
		cferr_add(w->e, s, "tls: verify_client = true needs \"ca\", the "
		    "CAs a client certificate must be signed by");
}

/*
 * A listener's transport context (transport.h): a TLS pair is read now,
 * so a bad one fails the load.
 */
static void
listener_finish(struct walk *w, const config_setting_t *ls, void *base)
{
	struct listener_conf *l = base;
	char err[1024];

	if (w->e->count == w->before &&
	    (l->xp_ctx = transport_prepare(l, err, sizeof(err))) == NULL)
		cferr_add(w->e, ls, "listener \"%s\": %s", l->name, err);
}

static void
listeners_finish(struct walk *w, const config_setting_t *s, void *base)
{
	const struct config *cf = base;

	for (size_t i = 0; i < cf->nlisteners; i++) {
		const struct listener_conf *a = &cf->listeners[i];
		config_setting_t *si = config_setting_get_elem(s, (unsigned)i);

		for (size_t j = 0; j < i; j++) {
			const struct listener_conf *b = &cf->listeners[j];

			if (a->name[0] && strcmp(a->name, b->name) == 0)
				cferr_add(w->e, si, "listener name \"%s\" is "
				    "already used on line %d", a->name, b->line);
			else if (a->port != 0 && a->port == b->port &&
			    a->address[0] && strcmp(a->address, b->address) == 0)
				cferr_add(w->e, si, "listener \"%s\": %s port %u "
				    "is already used by \"%s\"", a->name,
				    a->address, a->port, b->name);
		}
	}
}

/* Same characters as router addresses; see route_addr_valid. */
static bool
valid_addr(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= CONFIG_ADDR_MAX &&
	    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789+._:@-") == n;
}

/* Reads the string s into dst (size n) if it is a valid address. */
static bool
get_addr(struct cferr *e, const config_setting_t *s, const char *what,
    char *dst, size_t n)
{
	const char *v = cferr_string(e, s);

	if (v == NULL)
		return false;
	if (!valid_addr(v)) {
		cferr_add(e, s, "%s \"%s\": use 1-%d of A-Z a-z 0-9 + . _ : @ -",
		    what, v, CONFIG_ADDR_MAX);
		return false;
	}
	snprintf(dst, n, "%s", v);
	return true;
}

static void
get_account_id(struct walk *w, const config_setting_t *k, void *base)
{
	struct account_conf *a = base;

	get_addr(w->e, k, "account id", a->id, sizeof(a->id));
}

static void
get_password(struct walk *w, const config_setting_t *k, void *base)
{
	struct account_conf *a = base;
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if (strlen(v) > CONFIG_PASSWORD_MAX)
		cferr_add(w->e, k, "password: longer than %d characters",
		    CONFIG_PASSWORD_MAX);
	else
		snprintf(a->password, sizeof(a->password), "%s", v);
}

/* mo_url: where http-out posts messages for an HTTP-only account. */
static void
get_mo_url(struct walk *w, const config_setting_t *k, void *base)
{
	struct account_conf *a = base;
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if (strlen(v) > CONFIG_URL_MAX || !http_url_valid(v, strlen(v)))
		cferr_add(w->e, k, "mo_url \"%.80s\": expected an http:// or "
		    "https:// URL with a host, at most %d characters", v,
		    CONFIG_URL_MAX);
	else
		snprintf(a->mo_url, sizeof(a->mo_url), "%s", v);
}

/* source_addrs: a list or array of address prefixes. */
static void
get_source_addrs(struct walk *w, const config_setting_t *k, void *base)
{
	struct account_conf *a = base;
	int t = config_setting_type(k), n = config_setting_length(k);

	if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST) {
		cferr_add(w->e, k, "source_addrs: expected a list of address "
		    "prefixes, like [ \"+1555\", \"shop\" ]");
		return;
	}
	if (n < 1 || n > CONFIG_SOURCE_ADDRS_MAX) {
		cferr_add(w->e, k, "source_addrs: give 1 to %d prefixes",
		    CONFIG_SOURCE_ADDRS_MAX);
		return;
	}
	for (int i = 0; i < n; i++)
		if (get_addr(w->e, config_setting_get_elem(k, (unsigned)i),
		    "source_addrs prefix", a->source_addrs[a->nsource_addrs],
		    sizeof(a->source_addrs[0])))
			a->nsource_addrs++;
}

/*
 * An open-addressing index of the account ids: a message to an address
 * asks whether it is an account, and with a thousand accounts a walk
 * along the list was most of a stored message's cost on its reactor.
 * The ids it compares are packed apart from the accounts (2 KiB each,
 * with their URLs): a lookup then costs no cache miss on the account.
 */
static void
index_accounts(struct config *cf)
{
	size_t n = 16;

	while (n < cf->naccounts * 2)
		n *= 2;
	cf->account_slots = xcalloc(n, sizeof(*cf->account_slots));
	cf->account_nslots = n;
	cf->account_ids = xcalloc(cf->naccounts ? cf->naccounts : 1,
	    sizeof(*cf->account_ids));
	cf->naccounts_mo_url = 0;
	for (size_t i = 0; i < cf->naccounts; i++) {
		size_t j = fnv1a_str(cf->accounts[i].id) & (n - 1);

		memcpy(cf->account_ids[i], cf->accounts[i].id,
		    sizeof(cf->account_ids[i]));
		if (cf->accounts[i].mo_url[0] != '\0')
			cf->naccounts_mo_url++;

		while (cf->account_slots[j] != 0)
			j = (j + 1) & (n - 1);
		cf->account_slots[j] = (uint32_t)i + 1;
	}
}

static void
accounts_finish(struct walk *w, const config_setting_t *s, void *base)
{
	struct config *cf = base;

	for (size_t i = 0; i < cf->naccounts; i++)
		for (size_t j = 0; j < i; j++)
			if (cf->accounts[i].id[0] &&
			    strcmp(cf->accounts[i].id, cf->accounts[j].id) == 0)
				cferr_add(w->e, config_setting_get_elem(s,
				    (unsigned)i), "account \"%s\" is already "
				    "defined on line %d", cf->accounts[i].id,
				    cf->accounts[j].line);
	index_accounts(cf);
}

static void
get_route_prefix(struct walk *w, const config_setting_t *k, void *base)
{
	struct route_conf *r = base;

	get_addr(w->e, k, "route prefix", r->prefix, sizeof(r->prefix));
}

/* One target of a route: an address, or "upstream:NAME" (upstreams). */
static bool
get_route_target(struct walk *w, const config_setting_t *k,
    struct route_conf *r, bool first)
{
	const char *v = cferr_string(w->e, k);
	size_t n = strlen(CONFIG_UPSTREAM_PREFIX);

	if (v == NULL)
		return false;
	if (strncmp(v, CONFIG_UPSTREAM_PREFIX, n) != 0) {
		if (!first || r->nupstreams > 0) {
			cferr_add(w->e, k, "route to: a list names upstreams "
			    "only (\"upstream:NAME\"), not \"%s\"", v);
			return false;
		}
		return get_addr(w->e, k, "route to", r->to, sizeof(r->to));
	}
	if (!valid_name(v + n)) {
		cferr_add(w->e, k, "route to \"%s\": an upstream name is 1-%d "
		    "of A-Z a-z 0-9 _ . -", v, CONFIG_NAME_MAX);
		return false;
	}
	if (r->nupstreams == 0)
		snprintf(r->to, sizeof(r->to), "%.*s", CONFIG_ADDR_MAX, v);
	snprintf(r->upstreams[r->nupstreams++], sizeof(r->upstreams[0]), "%s",
	    v + n);
	return true;
}

/* to: an address, "upstream:NAME", or a list of "upstream:NAME". */
static void
get_route_to(struct walk *w, const config_setting_t *k, void *base)
{
	struct route_conf *r = base;
	int n;

	if (!config_setting_is_array(k) && !config_setting_is_list(k)) {
		get_route_target(w, k, r, true);
		return;
	}
	n = config_setting_length(k);
	if (n == 0 || n > CONFIG_ROUTE_UPSTREAMS_MAX) {
		cferr_add(w->e, k, "route to: a list of 1 to %d upstreams",
		    CONFIG_ROUTE_UPSTREAMS_MAX);
		return;
	}
	for (int i = 0; i < n; i++)
		if (!get_route_target(w, config_setting_get_elem(k,
		    (unsigned)i), r, false))
			return;
}

/* A mode picks among upstreams: a route to an address has none. */
static void
route_finish(struct walk *w, const config_setting_t *s, void *base)
{
	const struct route_conf *r = base;

	if (r->nupstreams == 0 && r->to[0] != '\0' &&
	    config_walk_seen(w, "mode"))
		cferr_add(w->e, s, "route \"%s\": mode picks among upstreams; "
		    "this route goes to \"%s\"", r->prefix, r->to);
}

_Static_assert(CONFIG_ADDR_MAX <= 64, "a route's length is a bit of 64");

/*
 * An open-addressing index of the routes' prefixes, and the lengths they
 * come in, a bit each (route_conf_by_prefix reads them): with hundreds of
 * routes, a walk along the list for every message cost more than the
 * rest of its routing. A prefix given twice is an error.
 */

static void
routes_finish(struct walk *w, const config_setting_t *s, void *base)
{
	struct config *cf = base;
	size_t n = 16;

	while (n < cf->nroutes * 2)
		n *= 2;
	cf->route_slots = xcalloc(n, sizeof(*cf->route_slots));
	cf->route_nslots = n;
	for (size_t i = 0; i < cf->nroutes; i++) {
		const char *p = cf->routes[i].prefix;
		size_t j = fnv1a_str(p) & (n - 1), len = strlen(p);

		if (len == 0)	/* (its error is said already) */
			continue;
		for (; cf->route_slots[j] != 0; j = (j + 1) & (n - 1))
			if (strcmp(cf->routes[cf->route_slots[j] - 1].prefix,
			    p) == 0)
				break;
		if (cf->route_slots[j] != 0) {
			cferr_add(w->e, config_setting_get_elem(s,
			    (unsigned)i), "route prefix \"%s\" is already "
			    "used on line %d", p,
			    cf->routes[cf->route_slots[j] - 1].line);
			continue;
		}
		cf->route_slots[j] = (uint32_t)i + 1;
		cf->route_lens |= (uint64_t)1 << (len - 1);
	}
}

/* ---- upstreams: SMS centres we bind to ---------------------------------- */

/* Reads string k into dst (size n) if it fits, empty or not as allowed. */
static void
get_bounded(struct walk *w, const config_setting_t *k, char *dst, size_t n,
    bool empty)
{
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if ((!empty && v[0] == '\0') || strlen(v) >= n)
		cferr_add(w->e, k, "upstreams.%s: %s%zu characters",
		    config_setting_name(k), empty ? "at most " : "1 to ",
		    n - 1);
	else
		snprintf(dst, n, "%s", v);
}

#define UPSTREAM_STRING_FN(f, empty)					\
static void								\
get_upstream_##f(struct walk *w, const config_setting_t *k, void *base) \
{									\
	struct upstream_conf *u = base;					\
									\
	get_bounded(w, k, u->f, sizeof(u->f), empty);			\
}

UPSTREAM_STRING_FN(system_id, false)
UPSTREAM_STRING_FN(password, true)
UPSTREAM_STRING_FN(system_type, true)
UPSTREAM_STRING_FN(address_range, true)
UPSTREAM_STRING_FN(host, false)

static void
get_upstream_name(struct walk *w, const config_setting_t *k, void *base)
{
	struct upstream_conf *u = base;
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if (!valid_name(v))
		cferr_add(w->e, k, "upstream name \"%s\": use 1-%d of "
		    "A-Z a-z 0-9 _ . -", v, CONFIG_NAME_MAX);
	else
		snprintf(u->name, sizeof(u->name), "%s", v);
}

static void
get_server_name(struct walk *w, const config_setting_t *k, void *base)
{
	struct tls_conf *t = base;

	get_bounded(w, k, t->server_name, sizeof(t->server_name), true);
}

/* verify = true, the default, leaves no_verify false. */
static void
get_upstream_verify(struct walk *w, const config_setting_t *k, void *base)
{
	struct tls_conf *t = base;
	bool v = true;

	if (cferr_bool(w->e, k, &v))
		t->no_verify = !v;
}

/*
 * An upstream's TLS: the server is verified against ca unless verify is
 * false; a client certificate needs its key.
 */
static void
upstream_tls_finish(struct walk *w, const config_setting_t *s, void *base)
{
	const struct tls_conf *t = base;

	if (!t->no_verify && t->ca[0] == '\0')
		cferr_add(w->e, s, "upstreams.tls: \"ca\" is missing (the CAs "
		    "the SMS centre's certificate must be signed by; or "
		    "verify = false)");
	if ((t->certificate[0] == '\0') != (t->key[0] == '\0'))
		cferr_add(w->e, s, "upstreams.tls: \"certificate\" and \"key\" "
		    "go together");
}

/*
 * host to an address now, in the thread that loads the configuration:
 * a reactor never waits for DNS.
 */
static void
resolve_upstream(struct walk *w, const config_setting_t *s,
    struct upstream_conf *u)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	int rc;

	/* A literal is at most INET6_ADDRSTRLEN, well within address. */
	if (valid_address(u->host)) {
		memcpy(u->address, u->host, strlen(u->host) + 1);
		return;
	}
	if ((rc = getaddrinfo(u->host, NULL, &hints, &res)) != 0) {
		cferr_add(w->e, s, "upstream \"%s\": host \"%s\": %s", u->name,
		    u->host, gai_strerror(rc));
		return;
	}
	if (getnameinfo(res->ai_addr, res->ai_addrlen, u->address,
	    sizeof(u->address), NULL, 0, NI_NUMERICHOST) != 0)
		cferr_add(w->e, s, "upstream \"%s\": host \"%s\": no usable "
		    "address", u->name, u->host);
	freeaddrinfo(res);
}

/* Checks across one upstream's keys; its transport context, made now. */
static void
upstream_finish(struct walk *w, const config_setting_t *s, void *base)
{
	struct upstream_conf *u = base;
	const struct transport_type *t;
	char err[1024];

	if (u->reconnect_min > u->reconnect_max)
		cferr_add(w->e, s, "upstream \"%s\": reconnect_min (%u) is "
		    "above reconnect_max (%u)", u->name, u->reconnect_min,
		    u->reconnect_max);
	if (w->e->count != w->before)
		return;
	resolve_upstream(w, s, u);
	t = transport_find(u->tls.enabled ? "tls" : "plain");
	if (t == NULL || t->prepare_client == NULL)
		cferr_add(w->e, s, "upstream \"%s\": no %s client in this "
		    "build", u->name, u->tls.enabled ? "TLS" : "plain");
	else if ((u->xp_ctx = t->prepare_client(&u->tls, err,
	    sizeof(err))) == NULL)
		cferr_add(w->e, s, "upstream \"%s\": %s", u->name, err);
}

static void
upstreams_finish(struct walk *w, const config_setting_t *s, void *base)
{
	const struct config *cf = base;

	for (size_t i = 0; i < cf->nupstreams; i++)
		for (size_t j = 0; j < i; j++)
			if (cf->upstreams[i].name[0] && strcmp(
			    cf->upstreams[i].name, cf->upstreams[j].name) == 0)
				cferr_add(w->e, config_setting_get_elem(s,
				    (unsigned)i), "upstream name \"%s\" is "
				    "already used on line %d",
				    cf->upstreams[i].name,
				    cf->upstreams[j].line);
}

static void
get_system_id(struct walk *w, const config_setting_t *k, void *base)
{
	struct smpp_conf *sc = base;
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if (strlen(v) == 0 || strlen(v) > 15)
		cferr_add(w->e, k, "smpp.system_id: 1-15 characters");
	else
		snprintf(sc->system_id, sizeof(sc->system_id), "%s", v);
}

/* store.path, made absolute against the configuration file's directory. */
static void
get_store_path(struct walk *w, const config_setting_t *k, void *base)
{
	struct store_conf *st = base;
	const char *v = cferr_string(w->e, k);

	if (v != NULL && v[0] == '\0')
		cferr_add(w->e, k, "store.path: empty; name the store file");
	else if (v != NULL)
		cferr_path(w->e, k, w->cf->path, "store.path", st->path,
		    sizeof(st->path));
}

static void
get_store_backend(struct walk *w, const config_setting_t *k, void *base)
{
	struct store_conf *st = base;
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if (strcmp(v, "sqlite") == 0)
		st->jetstream = false;
	else if (strcmp(v, "jetstream") == 0)
#if ER_WITH_NATS
		st->jetstream = true;
#else
		cferr_add(w->e, k, "store.backend: \"jetstream\": built "
		    "without the NATS client (WITH_NATS=no)");
#endif
	else
		cferr_add(w->e, k, "store.backend: \"%s\" is not one of sqlite, "
		    "jetstream", v);
}

/* store.shards: "auto" (0, resolved at start: store_shards) or 1..max. */
static void
get_store_shards(struct walk *w, const config_setting_t *k, void *base)
{
	struct store_conf *st = base;
	unsigned long long v = 1;

	if (config_setting_type(k) == CONFIG_TYPE_STRING &&
	    strcmp(config_setting_get_string(k), "auto") == 0) {
		st->shards = 0;
		return;
	}
	if (config_setting_type(k) != CONFIG_TYPE_INT &&
	    config_setting_type(k) != CONFIG_TYPE_INT64) {
		cferr_add(w->e, k, "store.shards: expected \"auto\" or a "
		    "number 1..%d", CONFIG_SHARDS_MAX);
		return;
	}
	if (cferr_int(w->e, k, 1, CONFIG_SHARDS_MAX, " or \"auto\"", &v))
		st->shards = (unsigned)v;
}

static void
store_finish(struct walk *w, const config_setting_t *s, void *base)
{
	const struct store_conf *st = base;

	/* JetStream keeps the messages on the NATS servers: no file. */
	if (!config_walk_seen(w, "path") && !st->jetstream)
		cferr_add(w->e, s, "store: \"path\" is missing");
	/* Its messages are spread over the NATS servers already. */
	if (st->jetstream && st->shards > 1)
		cferr_add(w->e, s, "store.shards: the JetStream backend has "
		    "one shard; set 1 or \"auto\"");
}

/* 1-32 of A-Z a-z 0-9 _ - (it names subjects and keys in NATS). */
static bool
valid_node(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > CLUSTER_NODE_MAX)
		return false;
	for (; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
			return false;
	return true;
}

/* NATS subject tokens of A-Z a-z 0-9 _ -, separated by dots. */
static bool
valid_prefix(const char *s)
{
	size_t n = strlen(s);
	bool tok = false;

	if (n == 0 || n > CLUSTER_PREFIX_MAX)
		return false;
	for (; *s != '\0'; s++) {
		if (*s == '.') {
			if (!tok)
				return false;
			tok = false;
		} else if (isalnum((unsigned char)*s) || *s == '_' ||
		    *s == '-') {
			tok = true;
		} else {
			return false;
		}
	}
	return tok;
}

static void
get_node(struct walk *w, const config_setting_t *k, void *base)
{
	struct cluster_conf *cl = base;
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if (!valid_node(v))
		cferr_add(w->e, k, "cluster.node: \"%s\": use 1-32 of A-Z a-z "
		    "0-9 _ -", v);
	else
		snprintf(cl->node, sizeof(cl->node), "%s", v);
}

static void
get_subject_prefix(struct walk *w, const config_setting_t *k, void *base)
{
	struct cluster_conf *cl = base;
	const char *v = cferr_string(w->e, k);

	if (v == NULL)
		return;
	if (!valid_prefix(v))
		cferr_add(w->e, k, "cluster.subject_prefix: \"%s\": use NATS "
		    "tokens of A-Z a-z 0-9 _ - joined by dots, at most %d "
		    "characters", v, CLUSTER_PREFIX_MAX);
	else
		snprintf(cl->subject_prefix, sizeof(cl->subject_prefix), "%s",
		    v);
}

/* One of cluster.servers, unless it is not a URL of ours. */
static void
get_server(struct cferr *e, const config_setting_t *el,
    struct cluster_conf *cl)
{
	const char *v = cferr_string(e, el);
	char shown[sizeof(cl->servers[0])];

	if (v == NULL)
		return;
	/* Errors reach the log on reload: no password in them. */
	cluster_url_shown(v, shown, sizeof(shown));
	if (strncmp(v, "nats://", 7) != 0 && strncmp(v, "tls://", 6) != 0) {
		cferr_add(e, el, "cluster.servers: \"%s\" is not a nats:// or "
		    "tls:// URL", shown);
		return;
	}
	if (strlen(v) >= sizeof(cl->servers[0]) ||
	    strchr(v, ',') != NULL || strchr(v, ' ') != NULL) {
		cferr_add(e, el, "cluster.servers: \"%s\": one URL of at most "
		    "%zu characters", shown, sizeof(cl->servers[0]) - 1);
		return;
	}
	snprintf(cl->servers[cl->nservers++], sizeof(cl->servers[0]), "%s",
	    v);
}

static void
get_servers(struct walk *w, const config_setting_t *k, void *base)
{
	struct cluster_conf *cl = base;
	int n = config_setting_length(k);

	if (!config_setting_is_list(k) && !config_setting_is_array(k)) {
		cferr_add(w->e, k, "cluster.servers: expected a list ( \"nats://"
		    "host:port\", ... )");
		return;
	}
	if (n == 0 || n > CLUSTER_SERVERS_MAX) {
		cferr_add(w->e, k, "cluster.servers: give 1 to %d servers",
		    CLUSTER_SERVERS_MAX);
		return;
	}
	for (int i = 0; i < n; i++)
		get_server(w->e, config_setting_get_elem(k, i), cl);
}

/*
 * cluster.credentials, made absolute, and readable now: libnats reads it
 * only when it connects, and a file it cannot read would look like a
 * NATS server that does not answer.
 */
static void
get_credentials(struct walk *w, const config_setting_t *k, void *base)
{
	struct cluster_conf *cl = base;
	char *path = cl->credentials, c;
	int fd;

	cferr_path(w->e, k, w->cf->path, "cluster.credentials", path,
	    sizeof(cl->credentials));
	if (path[0] == '\0')
		return;
	/* A read, not access(2): a directory opens but does not read. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0 ||
	    read(fd, &c, 1) < 0)
		cferr_add(w->e, k, "cluster.credentials: cannot read %s: %s",
		    path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* The tables: one row per key, groups before the groups that hold them. */

static const struct cfkey log_keys[] = {
	{ .name = "level", .type = CFK_FN, FIELD(struct config, log_level),
	  .def = LOG_LEVEL_INFO, .shown = "info", .fn = get_log_level,
	  .doc = TOP },
};

static const struct cfgroup log_group = {
	.name = "log", .shape = " { level = ...; }", .keys = log_keys,
	.nkeys = ARRAY_LEN(log_keys), .enabled = CFK_NONE, .line = CFK_NONE,
};

#define LIMIT(n, lo, hi, d) { .name = #n, .type = CFK_UINT,		\
	FIELD(struct limits, n), .min = lo, .max = hi, .def = d, .doc = TOP }
#define LIMIT_BYTES(n, lo, hi, d) { .name = #n, .type = CFK_BYTES,	\
	FIELD(struct limits, n), .min = lo, .max = hi, .def = d, .doc = TOP }

static const struct cfkey limits_keys[] = {
	LIMIT_BYTES(max_line, 64, 1 << 20, 4096),
	LIMIT_BYTES(output_high_watermark, 4096, 1LL << 30, 1 << 20),
	LIMIT_BYTES(output_limit, 4096, 1LL << 32, 8 << 20),
	LIMIT(output_stall_timeout, 0, 86400, 30),
	LIMIT_BYTES(max_pdu_size, 1024, 1 << 20, 65536),
	LIMIT(max_connections_per_ip, 0, 10000000, 0),
	LIMIT(connection_rate_per_ip, 0, 10000000, 0),
	LIMIT(handshake_timeout, 1, 3600, 10),
	LIMIT(max_handshakes, 0, 10000000, 10000),
	LIMIT(max_handshakes_per_ip, 0, 10000000, 1000),
	{ .name = "socket_send_buffer", .type = CFK_FN,
	  FIELD(struct limits, socket_send_buffer), .fn = get_sndbuf,
	  .doc = TOP },
	{ .name = "socket_receive_buffer", .type = CFK_FN,
	  FIELD(struct limits, socket_receive_buffer), .fn = get_rcvbuf,
	  .doc = TOP },
};

static const struct cfgroup limits_group = {
	.name = "limits", .shape = "", .keys = limits_keys,
	.nkeys = ARRAY_LEN(limits_keys), .enabled = CFK_NONE,
	.line = CFK_NONE, .finish = limits_finish,
};

#define TLS_PATH(n) { .name = #n, .type = CFK_PATH,			\
	FIELD(struct tls_conf, n), .doc = "TLS" }

/* A TLS listener's certificate, key and settings reload; see transport_tls.c. */
static const struct cfkey tls_keys[] = {
	TLS_PATH(certificate),
	TLS_PATH(key),
	TLS_PATH(ca),
	{ .name = "verify_client", .type = CFK_BOOL,
	  FIELD(struct tls_conf, verify_client), .doc = "TLS" },
	{ .name = "min_version", .type = CFK_FN,
	  FIELD(struct tls_conf, min_version), .def = 12,
	  .shown = "TLSv1.2", .fn = get_tls_min_version, .doc = "TLS" },
	{ .name = "ciphers", .type = CFK_STRING,
	  FIELD(struct tls_conf, ciphers), .fn = get_tls_ciphers,
	  .doc = "TLS" },
};

static const struct cfgroup tls_group = {
	.name = "tls", .what = "tls",
	.shape = " { certificate = ...; key = ...; }", .keys = tls_keys,
	.nkeys = ARRAY_LEN(tls_keys), .size = sizeof(struct tls_conf),
	.enabled = offsetof(struct tls_conf, enabled), .line = CFK_NONE,
	.lazy = true, .finish = tls_finish,
};

/* What the listeners bind: a change needs a restart. */
#define LISTENER_KEY(n, t, f, ...) { .name = n, .type = t,		\
	FIELD(struct listener_conf, f), .missing = "",			\
	.reload = CFK_RESTART, .change = CONFIG_RESTART_LISTENERS,	\
	.doc = TOP, __VA_ARGS__ }

static const struct cfkey listener_keys[] = {
	LISTENER_KEY("name", CFK_STRING, name, .fn = get_listener_name),
	LISTENER_KEY("address", CFK_STRING, address,
	    .fn = get_listener_address),
	LISTENER_KEY("port", CFK_UINT, port, .max = 65535),
	LISTENER_KEY("protocol", CFK_FN, proto, .fn = get_listener_proto),
	{ .name = "tls", .type = CFK_GROUP,
	  GROUP(struct listener_conf, tls, tls_group), BUILT(WITH_TLS),
	  .reload = CFK_RESTART, .change = CONFIG_RESTART_LISTENERS,
	  .gone = CONFIG_RESTART_LISTENERS, .doc = TOP },
};

static const struct cfgroup listener_group = {
	.name = "listeners", .what = "listener",
	.shape = " { name = ...; address = ...; port = ...; protocol = ...; }",
	.keys = listener_keys, .nkeys = ARRAY_LEN(listener_keys),
	.size = sizeof(struct listener_conf), .enabled = CFK_NONE,
	.line = offsetof(struct listener_conf, line),
	.count = offsetof(struct config, nlisteners),
	.max_elems = COUNTER_LISTENERS_MAX,
	.empty = "at least one listener is needed",
	.finish = listener_finish, .finish_list = listeners_finish,
};

/* alphabet and coding: an account's default is the smpp group's. */
static const struct cfenum alphabets[] = {
	{ "gsm", CONFIG_ALPHABET_GSM }, { "latin1", CONFIG_ALPHABET_LATIN1 },
	{ "ascii", CONFIG_ALPHABET_ASCII }, { NULL, 0 }
};

static const struct cfenum codings[] = {
	{ "auto", CONFIG_CODING_AUTO }, { "ucs2", CONFIG_CODING_UCS2 },
	{ "latin1", CONFIG_CODING_LATIN1 }, { NULL, 0 }
};

static const struct cfenum longs[] = {
	{ "udh", CONFIG_LONG_UDH }, { "sar", CONFIG_LONG_SAR },
	{ "payload", CONFIG_LONG_PAYLOAD }, { NULL, 0 }
};

static const struct cfkey account_keys[] = {
	{ .name = "id", .type = CFK_STRING, FIELD(struct account_conf, id),
	  .fn = get_account_id, .missing = "", .doc = TOP },
	{ .name = "password", .type = CFK_STRING,
	  FIELD(struct account_conf, password), .fn = get_password,
	  .missing = "", .doc = TOP },
	{ .name = "max_binds", .type = CFK_UINT,
	  FIELD(struct account_conf, max_binds), .min = 1, .max = 1024,
	  .def = 4, .doc = TOP },
	{ .name = "max_tps", .type = CFK_UINT,
	  FIELD(struct account_conf, max_tps), .max = 10000000, .doc = TOP },
	{ .name = "source_addrs", .type = CFK_FN,
	  FIELD(struct account_conf, source_addrs), .fn = get_source_addrs,
	  .doc = TOP },
	{ .name = "alphabet", .type = CFK_ENUM,
	  FIELD(struct account_conf, alphabet), .names = alphabets,
	  .shown = "smpp.alphabet", .doc = TOP },
	{ .name = "coding", .type = CFK_ENUM,
	  FIELD(struct account_conf, coding), .names = codings,
	  .shown = "smpp.coding", .doc = TOP },
	{ .name = "reassembly_timeout", .type = CFK_UINT,
	  FIELD(struct account_conf, reassembly_timeout), .min = 1,
	  .max = 3600, .shown = "smpp.reassembly_timeout", .doc = TOP },
	{ .name = "reassembly_limit", .type = CFK_UINT,
	  FIELD(struct account_conf, reassembly_limit), .min = 1,
	  .max = 100000, .shown = "smpp.reassembly_limit", .doc = TOP },
	{ .name = "reassembly_bytes", .type = CFK_BYTES,
	  FIELD(struct account_conf, reassembly_bytes), .min = 1,
	  .max = 1 << 30, .shown = "smpp.reassembly_bytes", .doc = TOP },
	{ .name = "long", .type = CFK_ENUM,
	  FIELD(struct account_conf, long_how), .names = longs,
	  .shown = "smpp.long", .doc = TOP },
	{ .name = "max_parts", .type = CFK_UINT,
	  FIELD(struct account_conf, max_parts), .min = 1,
	  .max = TEXT_PARTS_MAX, .shown = "smpp.max_parts", .doc = TOP },
	{ .name = "http", .type = CFK_BOOL, FIELD(struct account_conf, http),
	  .doc = TOP },
	{ .name = "mo_url", .type = CFK_STRING,
	  FIELD(struct account_conf, mo_url), .fn = get_mo_url, .doc = TOP },
};

static const struct cfgroup account_group = {
	.name = "accounts", .what = "accounts", .shape = "",
	.keys = account_keys, .nkeys = ARRAY_LEN(account_keys),
	.size = sizeof(struct account_conf), .enabled = CFK_NONE,
	.line = offsetof(struct account_conf, line),
	.count = offsetof(struct config, naccounts),
	.finish_list = accounts_finish,
};

static const struct cfenum route_modes[] = {
	{ "failover", ROUTE_MODE_FAILOVER },
	{ "round_robin", ROUTE_MODE_ROUND_ROBIN }, { NULL, 0 }
};

static const struct cfkey route_keys[] = {
	{ .name = "prefix", .type = CFK_STRING,
	  FIELD(struct route_conf, prefix), .fn = get_route_prefix,
	  .missing = "", .doc = TOP },
	{ .name = "to", .type = CFK_FN, FIELD(struct route_conf, to),
	  .fn = get_route_to, .shown = "", .missing = "", .doc = TOP },
	{ .name = "mode", .type = CFK_ENUM, FIELD(struct route_conf, mode),
	  .names = route_modes, .def = ROUTE_MODE_FAILOVER, .doc = TOP },
};

static const struct cfgroup route_group = {
	.name = "routes", .what = "routes", .shape = "", .keys = route_keys,
	.nkeys = ARRAY_LEN(route_keys), .size = sizeof(struct route_conf),
	.enabled = CFK_NONE, .line = offsetof(struct route_conf, line),
	.count = offsetof(struct config, nroutes),
	.finish = route_finish, .finish_list = routes_finish,
};

#define UP_DOC		"Upstream SMS centres"
#define UP_TLS_PATH(n) { .name = #n, .type = CFK_PATH,			\
	FIELD(struct tls_conf, n), .doc = UP_DOC }

/* An upstream's TLS; new sessions take a changed one. */
static const struct cfkey upstream_tls_keys[] = {
	UP_TLS_PATH(ca),
	{ .name = "verify", .type = CFK_FN,
	  FIELD(struct tls_conf, no_verify), .shown = "true",
	  .fn = get_upstream_verify, .doc = UP_DOC },
	{ .name = "server_name", .type = CFK_STRING,
	  FIELD(struct tls_conf, server_name), .fn = get_server_name,
	  .doc = UP_DOC },
	UP_TLS_PATH(certificate),
	UP_TLS_PATH(key),
};

static const struct cfgroup upstream_tls_group = {
	.name = "tls", .what = "tls", .shape = " { ca = ...; }",
	.keys = upstream_tls_keys, .nkeys = ARRAY_LEN(upstream_tls_keys),
	.size = sizeof(struct tls_conf),
	.enabled = offsetof(struct tls_conf, enabled), .line = CFK_NONE,
	.lazy = true, .finish = upstream_tls_finish,
};

static const struct cfenum upstream_binds[] = {
	{ "transceiver", UPSTREAM_BIND_TRANSCEIVER },
	{ "transmitter", UPSTREAM_BIND_TRANSMITTER },
	{ "receiver", UPSTREAM_BIND_RECEIVER },
	{ "pair", UPSTREAM_BIND_PAIR }, { NULL, 0 }
};

static const struct cfenum upstream_alphabets[] = {
	{ "gsm7", CONFIG_ALPHABET_GSM }, { "latin1", CONFIG_ALPHABET_LATIN1 },
	{ "ascii", CONFIG_ALPHABET_ASCII }, { NULL, 0 }
};

static const struct cfenum upstream_longs[] = {
	{ "udh", UPSTREAM_LONG_UDH }, { "sar", UPSTREAM_LONG_SAR },
	{ "payload", UPSTREAM_LONG_PAYLOAD }, { NULL, 0 }
};

static const struct cfenum upstream_receipt_ids[] = {
	{ "auto", UPSTREAM_RECEIPT_AUTO }, { "same", UPSTREAM_RECEIPT_SAME },
	{ "hex", UPSTREAM_RECEIPT_HEX }, { "dec", UPSTREAM_RECEIPT_DEC },
	{ NULL, 0 }
};

#define UP_STRING(n, ...) { .name = #n, .type = CFK_STRING,		\
	FIELD(struct upstream_conf, n), .fn = get_upstream_##n,		\
	.doc = UP_DOC, __VA_ARGS__ }
#define UP_UINT(n, lo, hi, d) { .name = #n, .type = CFK_UINT,		\
	FIELD(struct upstream_conf, n), .min = lo, .max = hi, .def = d,	\
	.doc = UP_DOC }
#define UP_ENUM(n, f, names_, d) { .name = n, .type = CFK_ENUM,	\
	FIELD(struct upstream_conf, f), .names = names_, .def = d,	\
	.doc = UP_DOC }

static const struct cfkey upstream_keys[] = {
	UP_STRING(name, .missing = ""),
	UP_STRING(host, .missing = ""),
	UP_UINT(port, 1, 65535, 2775),
	UP_ENUM("bind", bind, upstream_binds, UPSTREAM_BIND_TRANSCEIVER),
	UP_STRING(system_id, .missing = ""),
	UP_STRING(password),
	UP_STRING(system_type),
	UP_STRING(address_range),
	UP_UINT(sessions, 1, 64, 1),
	UP_UINT(window, 1, 1024, 10),
	UP_UINT(queue_limit, 1, 1000000, 1000),
	UP_UINT(max_tps, 0, 1000000, 0),
	UP_UINT(enquire_link_interval, 0, 86400, 30),
	UP_UINT(response_timeout, 1, 3600, 10),
	UP_UINT(reconnect_min, 1, 3600, 1),
	UP_UINT(reconnect_max, 1, 86400, 60),
	UP_UINT(source_ton, 0, 255, 1),
	UP_UINT(source_npi, 0, 255, 1),
	UP_UINT(dest_ton, 0, 255, 1),
	UP_UINT(dest_npi, 0, 255, 1),
	UP_ENUM("alphabet", alphabet, upstream_alphabets,
	    CONFIG_ALPHABET_GSM),
	UP_ENUM("long", long_mode, upstream_longs, UPSTREAM_LONG_UDH),
	UP_ENUM("receipt_id", receipt_id, upstream_receipt_ids,
	    UPSTREAM_RECEIPT_AUTO),
	{ .name = "tls", .type = CFK_GROUP,
	  GROUP(struct upstream_conf, tls, upstream_tls_group),
	  BUILT(WITH_TLS), .doc = UP_DOC },
};

static const struct cfgroup upstream_group = {
	.name = "upstreams", .what = "upstream",
	.shape = " { name = ...; host = ...; system_id = ...; }",
	.keys = upstream_keys, .nkeys = ARRAY_LEN(upstream_keys),
	.size = sizeof(struct upstream_conf), .enabled = CFK_NONE,
	.line = offsetof(struct upstream_conf, line),
	.count = offsetof(struct config, nupstreams),
	.max_elems = CONFIG_UPSTREAMS_MAX,
	.finish = upstream_finish, .finish_list = upstreams_finish,
};

/* The receipt id map's bounds; a reload applies them on its next use. */
static const struct cfkey upstream_receipts_keys[] = {
	{ .name = "limit", .type = CFK_UINT,
	  FIELD(struct upstream_receipts_conf, limit), .min = 1,
	  .max = 100000000, .def = 200000, .doc = UP_DOC },
	{ .name = "expiry", .type = CFK_UINT,
	  FIELD(struct upstream_receipts_conf, expiry), .min = 0,
	  .max = 31536000, .def = 172800, .doc = UP_DOC },
	{ .name = "wait", .type = CFK_UINT,
	  FIELD(struct upstream_receipts_conf, wait), .min = 0,
	  .max = 60, .def = 2, .doc = UP_DOC },
};

static const struct cfgroup upstream_receipts_group = {
	.name = "upstream_receipts", .shape = "", .keys = upstream_receipts_keys,
	.nkeys = ARRAY_LEN(upstream_receipts_keys), .enabled = CFK_NONE,
	.line = CFK_NONE,
};

#define SMPP(n, lo, hi, d) { .name = #n, .type = CFK_UINT,		\
	FIELD(struct smpp_conf, n), .min = lo, .max = hi, .def = d,	\
	.doc = TOP }

static const struct cfkey smpp_keys[] = {
	SMPP(window, 1, 1024, 16),
	SMPP(queue_limit, 0, 1000000, 1000),
	SMPP(enquire_link_interval, 0, 86400, 30),
	SMPP(response_timeout, 1, 3600, 10),
	{ .name = "system_id", .type = CFK_STRING,
	  FIELD(struct smpp_conf, system_id), .sdef = "echorouterd",
	  .fn = get_system_id, .doc = TOP },
	{ .name = "alphabet", .type = CFK_ENUM,
	  FIELD(struct smpp_conf, alphabet), .def = CONFIG_ALPHABET_GSM,
	  .names = alphabets, .doc = TOP },
	{ .name = "coding", .type = CFK_ENUM, FIELD(struct smpp_conf, coding),
	  .def = CONFIG_CODING_AUTO, .names = codings, .doc = TOP },
	SMPP(reassembly_timeout, 1, 3600, 60),
	SMPP(reassembly_limit, 1, 100000, 100),
	{ .name = "reassembly_bytes", .type = CFK_BYTES,
	  FIELD(struct smpp_conf, reassembly_bytes), .min = 1, .max = 1 << 30,
	  .def = 1 << 20, .doc = TOP },
	{ .name = "long", .type = CFK_ENUM, FIELD(struct smpp_conf, long_how),
	  .def = CONFIG_LONG_UDH, .names = longs, .doc = TOP },
	SMPP(max_parts, 1, TEXT_PARTS_MAX, 16),
	SMPP(max_binds, 1, 1024, 4),
};

static const struct cfgroup smpp_group = {
	.name = "smpp", .shape = "", .keys = smpp_keys,
	.nkeys = ARRAY_LEN(smpp_keys), .enabled = CFK_NONE,
	.line = CFK_NONE,
};

static const struct cfenum store_syncs[] = {
	{ "full", 1 }, { "normal", 0 }, { NULL, 0 }
};

/* path, sync, backend, replicas and shards take effect at start only. */
static const struct cfkey store_keys[] = {
	{ .name = "path", .type = CFK_STRING, FIELD(struct store_conf, path),
	  .fn = get_store_path, .reload = CFK_KEEP,
	  .change = CONFIG_KEPT_STORE_PATH, .doc = TOP },
	{ .name = "sync", .type = CFK_ENUM,
	  FIELD(struct store_conf, sync_full), .def = 1, .names = store_syncs,
	  .reload = CFK_KEEP, .change = CONFIG_KEPT_STORE_SYNC, .doc = TOP },
	{ .name = "default_validity", .type = CFK_UINT,
	  FIELD(struct store_conf, default_validity), .min = 1,
	  .max = CONFIG_VALIDITY_MAX, .def = 86400, .doc = TOP },
	{ .name = "max_messages", .type = CFK_UINT,
	  FIELD(struct store_conf, max_messages), .min = 1, .max = INT64_MAX,
	  .def = 1000000, .doc = TOP },
	{ .name = "max_bytes", .type = CFK_BYTES,
	  FIELD(struct store_conf, max_bytes), .min = 1, .max = INT64_MAX,
	  .def = 1 << 30, .doc = TOP },
	{ .name = "account_max_messages", .type = CFK_UINT,
	  FIELD(struct store_conf, account_max_messages), .min = 1,
	  .max = INT64_MAX, .def = 100000, .doc = TOP },
	{ .name = "backend", .type = CFK_FN,
	  FIELD(struct store_conf, jetstream), .shown = "sqlite",
	  .fn = get_store_backend,
	  .reload = CFK_KEEP, .change = CONFIG_KEPT_STORE_BACKEND,
	  .doc = TOP },
	{ .name = "replicas", .type = CFK_UINT,
	  FIELD(struct store_conf, replicas), .min = 1, .max = 5, .def = 1,
	  .reload = CFK_KEEP, .change = CONFIG_KEPT_STORE_BACKEND,
	  .doc = TOP },
	{ .name = "shards", .type = CFK_FN,
	  FIELD(struct store_conf, shards), .shown = "auto",
	  .fn = get_store_shards,
	  .reload = CFK_KEEP, .change = CONFIG_KEPT_STORE_SHARDS,
	  .doc = TOP },
};

static const struct cfgroup store_group = {
	.name = "store", .what = "store", .shape = " { path = ...; }",
	.keys = store_keys, .nkeys = ARRAY_LEN(store_keys),
	.size = sizeof(struct store_conf),
	.enabled = offsetof(struct store_conf, enabled),
	.line = offsetof(struct store_conf, line), .finish = store_finish,
};

/* servers and nservers, compared and kept as one. */
#define SERVERS_SIZE	(offsetof(struct cluster_conf, nservers) +	\
	sizeof(unsigned) - offsetof(struct cluster_conf, servers))

/* node, servers and credentials take effect at start only. */
static const struct cfkey cluster_keys[] = {
	{ .name = "node", .type = CFK_STRING, FIELD(struct cluster_conf, node),
	  .fn = get_node, .missing = " (a name unique to this node)",
	  .reload = CFK_KEEP, .change = CONFIG_KEPT_CLUSTER_NODE, .doc = TOP },
	{ .name = "servers", .type = CFK_FN,
	  .off = offsetof(struct cluster_conf, servers), .size = SERVERS_SIZE,
	  .fn = get_servers, .missing = "", .reload = CFK_KEEP,
	  .change = CONFIG_KEPT_CLUSTER_NODE, .doc = TOP },
	{ .name = "subject_prefix", .type = CFK_STRING,
	  FIELD(struct cluster_conf, subject_prefix), .sdef = "erd",
	  .fn = get_subject_prefix, .doc = TOP },
	{ .name = "request_timeout", .type = CFK_UINT,
	  FIELD(struct cluster_conf, request_timeout), .min = 1, .max = 300,
	  .def = 2, .doc = TOP },
	{ .name = "claim_ttl", .type = CFK_UINT,
	  FIELD(struct cluster_conf, claim_ttl), .min = 2, .max = 86400,
	  .def = 10, .doc = TOP },
	{ .name = "credentials", .type = CFK_STRING,
	  FIELD(struct cluster_conf, credentials), .fn = get_credentials,
	  .reload = CFK_KEEP, .change = CONFIG_KEPT_CLUSTER_NODE, .doc = TOP },
};

static const struct cfgroup cluster_group = {
	.name = "cluster", .what = "cluster", .shape = " { node = ...; }",
	.keys = cluster_keys, .nkeys = ARRAY_LEN(cluster_keys),
	.size = sizeof(struct cluster_conf),
	.enabled = offsetof(struct cluster_conf, enabled),
	.line = offsetof(struct cluster_conf, line),
};

/* http.callback_allow by default: any address (but our own listeners). */
static void
init_callback_allow(struct walk *w, const config_setting_t *s, void *base)
{
	struct http_conf *h = base;

	(void)w;
	(void)s;
	http_cidr_parse("0.0.0.0/0", &h->callback_allow[0]);
	http_cidr_parse("::/0", &h->callback_allow[1]);
	h->ncallback_allow = 2;
}

/* http.callback_allow: a list of CIDR blocks; empty: no callbacks. */
static void
get_callback_allow(struct walk *w, const config_setting_t *k, void *base)
{
	struct http_conf *h = base;
	int n = config_setting_length(k);
	const char *v;

	h->ncallback_allow = 0;
	if (!config_setting_is_list(k) && !config_setting_is_array(k)) {
		cferr_add(w->e, k, "http.callback_allow: expected a list "
		    "( \"127.0.0.0/8\", ... )");
		return;
	}
	if (n > CONFIG_CIDRS_MAX) {
		cferr_add(w->e, k, "http.callback_allow: at most %d blocks",
		    CONFIG_CIDRS_MAX);
		return;
	}
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = config_setting_get_elem(k, i);

		if ((v = cferr_string(w->e, e)) == NULL)
			continue;
		if (http_cidr_parse(v, &h->callback_allow[h->ncallback_allow])
		    < 0)
			cferr_add(w->e, e, "http.callback_allow \"%.60s\": "
			    "expected an address block such as 10.0.0.0/8 or "
			    "2001:db8::/32", v);
		else
			h->ncallback_allow++;
	}
}

#define HTTP_DOC	"HTTP"
#define HTTP_UINT(n, lo, hi, d) { .name = #n, .type = CFK_UINT,		\
	FIELD(struct http_conf, n), .min = lo, .max = hi, .def = d,	\
	.doc = HTTP_DOC }

static const struct cfkey http_keys[] = {
	{ .name = "callback_allow", .type = CFK_FN,
	  .off = offsetof(struct http_conf, callback_allow),
	  .size = offsetof(struct http_conf, ncallback_allow) +
	  sizeof(unsigned) - offsetof(struct http_conf, callback_allow),
	  .shown = "any", .fn = get_callback_allow,
	  .init = init_callback_allow, .doc = HTTP_DOC },
	HTTP_UINT(callback_timeout, 1, 300, 10),
	HTTP_UINT(callback_retries, 0, 100, 8),
	HTTP_UINT(callback_concurrency, 1, 256, 4),
	HTTP_UINT(callback_queue, 1, 10000000, 100000),
};

static const struct cfgroup http_group = {
	.name = "http", .shape = " { callback_allow = [ ... ]; }",
	.keys = http_keys, .nkeys = ARRAY_LEN(http_keys),
	.enabled = CFK_NONE, .line = CFK_NONE,
};

/* Settings of the reactors' threads: a change needs a restart. */
#define RESTART_BOOL(n, d, bit) { .name = #n, .type = CFK_BOOL,	\
	FIELD(struct config, n), .def = d, .reload = CFK_RESTART,	\
	.change = bit, .doc = TOP }
#define TOP_UINT(n, lo, hi, d) { .name = #n, .type = CFK_UINT,		\
	FIELD(struct config, n), .min = lo, .max = hi, .def = d,	\
	.doc = TOP }
#define TOP_GROUP(n, t, g, ...) { .name = #n, .type = t,		\
	GROUP(struct config, n, g), .doc = TOP, __VA_ARGS__ }

static const struct cfkey root_keys[] = {
	{ .name = "dispatchers", .type = CFK_FN,
	  FIELD(struct config, dispatchers), .shown = "auto",
	  .fn = get_dispatchers,
	  .init = init_dispatchers, .reload = CFK_RESTART,
	  .change = CONFIG_RESTART_DISPATCHERS, .doc = TOP },
	RESTART_BOOL(cpu_affinity, 0, CONFIG_RESTART_CPU_AFFINITY),
	RESTART_BOOL(io_uring, 1, CONFIG_RESTART_IO_URING),
	RESTART_BOOL(sched_batch, 1, CONFIG_RESTART_SCHED_BATCH),
	TOP_UINT(max_connections, 1, 10000000, 100000),
	TOP_UINT(idle_timeout, 0, 31536000, 600),
	TOP_UINT(shutdown_timeout, 0, 3600, 10),
	/* log.level lives in the config itself. */
	{ .name = "log", .type = CFK_GROUP, .off = 0, .sub = &log_group,
	  .doc = TOP },
	TOP_GROUP(limits, CFK_GROUP, limits_group),
	TOP_GROUP(listeners, CFK_LIST, listener_group, .reload = CFK_RESTART,
	    .change = CONFIG_RESTART_LISTENERS),
	TOP_GROUP(accounts, CFK_LIST, account_group),
	TOP_GROUP(routes, CFK_LIST, route_group),
	TOP_GROUP(upstreams, CFK_LIST, upstream_group),
	{ .name = "upstream_receipts", .type = CFK_GROUP,
	  GROUP(struct config, upstream_receipts, upstream_receipts_group),
	  .doc = UP_DOC },
	TOP_GROUP(smpp, CFK_GROUP, smpp_group),
	TOP_GROUP(store, CFK_GROUP, store_group, BUILT(WITH_SQLITE),
	    .reload = CFK_KEEP, .change = CONFIG_KEPT_STORE_ADDED,
	    .gone = CONFIG_KEPT_STORE_REMOVED),
	TOP_GROUP(cluster, CFK_GROUP, cluster_group, BUILT(WITH_NATS),
	    .reload = CFK_KEEP, .change = CONFIG_KEPT_CLUSTER_ADDED,
	    .gone = CONFIG_KEPT_CLUSTER_REMOVED),
	{ .name = "http", .type = CFK_GROUP,
	  GROUP(struct config, http, http_group), BUILT(WITH_CURL),
	  .doc = HTTP_DOC },
};

/*
 * Checks across groups: a route's upstreams must be defined, wherever in
 * the file the upstreams list is.
 */
static void
root_finish(struct walk *w, const config_setting_t *s, void *base)
{
	const struct config *cf = base;

	(void)s;
	for (size_t i = 0; i < cf->nroutes; i++) {
		const struct route_conf *r = &cf->routes[i];

		for (unsigned j = 0; j < r->nupstreams; j++)
			if (config_find_upstream(cf, r->upstreams[j]) == NULL)
				cferr_at(w->e, cf->path, r->line, "route \"%s\": "
				    "no upstream named \"%s\" (define it in "
				    "upstreams)", r->prefix, r->upstreams[j]);
	}
}

const struct cfgroup config_root_group = {
	.name = "", .shape = "", .keys = root_keys,
	.nkeys = ARRAY_LEN(root_keys), .size = sizeof(struct config),
	.enabled = CFK_NONE, .line = CFK_NONE, .finish = root_finish,
};
