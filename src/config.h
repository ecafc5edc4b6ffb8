/* config.h: the validated configuration, loaded from a libconfig file. */
#ifndef ECHOROUTERD_CONFIG_H
#define ECHOROUTERD_CONFIG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

#define CONFIG_DEFAULT_PATH	"/etc/echorouterd/echorouterd.conf"
#define CONFIG_NAME_MAX		64
#define CONFIG_DISPATCHERS_MAX	1024
/* The longest store.default_validity, s: a year. */
#define CONFIG_VALIDITY_MAX	31536000

struct proto;

struct limits {
	size_t	max_line;		/* router: longest line, LF included */
	size_t	output_high_watermark;	/* stop reading the client above it */
	size_t	output_limit;		/* close the client above it */
	unsigned output_stall_timeout;	/* s paused with no output sent: close */
	size_t	max_pdu_size;		/* SMPP: longest command_length */
	unsigned max_connections_per_ip; /* 0: no limit */
	unsigned connection_rate_per_ip; /* new per second; 0: no limit */
	unsigned handshake_timeout;	/* s for a TLS handshake */
	unsigned max_handshakes;	/* TLS ones half-open; 0: no limit */
	unsigned max_handshakes_per_ip;	/* the same from one address */
	size_t	socket_send_buffer;	/* SO_SNDBUF of clients; 0 the kernel's */
	size_t	socket_receive_buffer;	/* SO_RCVBUF of clients; 0 the kernel's */
};

/* The SMPP front end's settings. */
/*
 * How an SMPP account's text is read and written (smpp and accounts
 * alphabet, coding). An account's 0 takes the smpp group's value.
 */
enum config_alphabet {		/* data_coding 0 from the account is */
	CONFIG_ALPHABET_SMPP = 0,	/* (an account) as the smpp group */
	CONFIG_ALPHABET_GSM,		/* GSM 03.38 */
	CONFIG_ALPHABET_LATIN1,		/* ISO 8859-1 */
	CONFIG_ALPHABET_ASCII,		/* IA5 */
};

enum config_coding {		/* line text to the account goes as */
	CONFIG_CODING_SMPP = 0,		/* (an account) as the smpp group */
	CONFIG_CODING_AUTO,		/* GSM 03.38 if it fits, else UCS-2 */
	CONFIG_CODING_UCS2,		/* UCS-2 always */
	CONFIG_CODING_LATIN1,		/* Latin-1 if it fits, else UCS-2 */
};

enum config_long {		/* line text over one SMS goes as */
	CONFIG_LONG_SMPP = 0,		/* (an account) as the smpp group */
	CONFIG_LONG_UDH,		/* parts with UDH 05 00 03 */
	CONFIG_LONG_SAR,		/* parts with the sar_* TLVs */
	CONFIG_LONG_PAYLOAD,		/* one message_payload */
};

struct smpp_conf {
	unsigned window;		/* unacknowledged deliver_sm per bind */
	unsigned queue_limit;		/* deliver_sm waiting per bind */
	unsigned enquire_link_interval;	/* s of silence before we ask; 0 off */
	unsigned response_timeout;	/* s to answer before we give up */
	char	system_id[16];		/* ours, in bind responses */
	unsigned alphabet;		/* enum config_alphabet, never _SMPP */
	unsigned coding;		/* enum config_coding, never _SMPP */
	/*
	 * Parts from an account waiting to be joined for a router client:
	 * seconds from the first part, messages and octets at once.
	 */
	unsigned reassembly_timeout;
	unsigned reassembly_limit;
	size_t	reassembly_bytes;
	unsigned long_how;		/* enum config_long (key "long") */
	unsigned max_parts;		/* parts of one line text, 1..255 */
	unsigned max_binds;		/* per system_id without accounts */
};

/* A listener's tls group: files resolved against the config's dir. */
struct tls_conf {
	bool	enabled;		/* the listener has a tls group */
	char	certificate[4096];	/* PEM chain */
	char	key[4096];		/* PEM private key */
	char	ca[4096];		/* PEM bundle for client certs; "" none */
	bool	verify_client;		/* a client certificate is required */
	unsigned min_version;		/* 12: TLSv1.2, 13: TLSv1.3 */
	char	ciphers[512];		/* TLS 1.2 cipher list; "" default */
	/* An upstream's: the name its certificate must have; "" its host. */
	char	server_name[256];
	bool	no_verify;		/* an upstream's verify = false */
};

struct transport_ctx;

struct listener_conf {
	char	name[CONFIG_NAME_MAX + 1];
	char	address[64];		/* IPv4 or IPv6 literal */
	uint16_t port;			/* 0: the kernel picks one */
	const struct proto *proto;
	struct tls_conf tls;
	/*
	 * Its transport type's context (transport.h: "tls" with a tls
	 * group, else "plain"), prepared when the config is loaded.
	 */
	struct transport_ctx *xp_ctx;
	int	line;			/* where it was defined */
};

#define CONFIG_ADDR_MAX		64	/* router and SMPP addresses */
#define CONFIG_PASSWORD_MAX	64
#define CONFIG_URL_MAX		2048	/* an account's mo_url */
#define CONFIG_SOURCE_ADDRS_MAX	32	/* source_addrs prefixes per account */

/* A login for router and SMPP clients. */
struct account_conf {
	char	id[CONFIG_ADDR_MAX + 1];
	char	password[CONFIG_PASSWORD_MAX + 1];
	unsigned max_binds;		/* SMPP binds at once */
	unsigned max_tps;		/* SMPP submits per second; 0 = no limit */
	/*
	 * Prefixes an SMPP source_addr of this account must start with,
	 * besides its own id; none: any that no one else owns.
	 */
	char	source_addrs[CONFIG_SOURCE_ADDRS_MAX][CONFIG_ADDR_MAX + 1];
	unsigned nsource_addrs;
	unsigned alphabet;		/* enum config_alphabet */
	unsigned coding;		/* enum config_coding */
	/* The smpp group's reassembly_* where 0. */
	unsigned reassembly_timeout;
	unsigned reassembly_limit;
	size_t	reassembly_bytes;
	unsigned long_how;		/* enum config_long (key "long") */
	unsigned max_parts;		/* 0: the smpp group's */
	bool	http;			/* may send over the http listeners */
	char	mo_url[CONFIG_URL_MAX + 1];	/* "": none */
	int	line;
};

/* Upstreams one route may name, and how it picks among them. */
#define CONFIG_ROUTE_UPSTREAMS_MAX	8
#define CONFIG_UPSTREAM_PREFIX		"upstream:"

enum route_mode {
	ROUTE_MODE_FAILOVER,		/* the first upstream that is up */
	ROUTE_MODE_ROUND_ROBIN,		/* each upstream that is up in turn */
};

/*
 * Messages to addresses starting with prefix go to the owner of to, or,
 * when the route names upstreams ("upstream:NAME", to is then the first
 * of them as written), to an upstream SMS centre of upstreams.
 */
struct route_conf {
	char	prefix[CONFIG_ADDR_MAX + 1];
	char	to[CONFIG_ADDR_MAX + 1];
	char	upstreams[CONFIG_ROUTE_UPSTREAMS_MAX][CONFIG_NAME_MAX + 1];
	unsigned nupstreams;		/* 0: an address or account route */
	unsigned mode;			/* enum route_mode */
	int	line;
};

/* An upstream's bind (upstreams.bind). */
enum upstream_bind {
	UPSTREAM_BIND_TRANSCEIVER,
	UPSTREAM_BIND_TRANSMITTER,
	UPSTREAM_BIND_RECEIVER,
	UPSTREAM_BIND_PAIR,		/* a transmitter and a receiver */
};

/* How an upstream's long text goes (upstreams.long). */
enum upstream_long {
	UPSTREAM_LONG_UDH,		/* concatenation IE in the UDH */
	UPSTREAM_LONG_SAR,		/* sar_* TLVs */
	UPSTREAM_LONG_PAYLOAD,		/* one message_payload TLV */
};

/* In which form an upstream's receipts name its message ids. */
enum upstream_receipt_id {
	UPSTREAM_RECEIPT_AUTO,		/* any of those below */
	UPSTREAM_RECEIPT_SAME,		/* as in submit_sm_resp */
	UPSTREAM_RECEIPT_HEX,		/* hex of a decimal one */
	UPSTREAM_RECEIPT_DEC,		/* decimal of a hex one */
};

#define CONFIG_HOST_MAX		253	/* a DNS name's bytes */
#define CONFIG_UPSTREAMS_MAX	64

/*
 * An SMS centre this daemon binds to as an ESME. host is resolved when
 * the configuration is loaded (start, -t, SIGHUP), into address.
 */
struct upstream_conf {
	char	name[CONFIG_NAME_MAX + 1];
	char	host[CONFIG_HOST_MAX + 1];
	char	address[64];		/* host's first address, a literal */
	uint16_t port;
	unsigned bind;			/* enum upstream_bind */
	char	system_id[16];
	char	password[9];
	char	system_type[13];
	char	address_range[41];
	unsigned sessions;		/* binds kept open (pairs for "pair") */
	unsigned window;		/* submit_sm unanswered per session */
	unsigned queue_limit;		/* waiting for its window, per session */
	unsigned max_tps;		/* parts per second, all sessions */
	unsigned enquire_link_interval;	/* s between enquire_links; 0 off */
	unsigned response_timeout;	/* s for any answer */
	unsigned reconnect_min;		/* s, the first retry's wait */
	unsigned reconnect_max;		/* s, the longest */
	unsigned source_ton, source_npi, dest_ton, dest_npi;
	unsigned alphabet;		/* enum config_alphabet */
	unsigned long_mode;		/* enum upstream_long */
	unsigned receipt_id;		/* enum upstream_receipt_id */
	struct tls_conf tls;
	struct transport_ctx *xp_ctx;	/* plain or TLS, client side */
	int	line;
};

/*
 * The map from upstreams' message ids to ours, for their receipts
 * (upstream_receipts): at most limit entries, none older than expiry s;
 * a receipt that comes before the submit_sm_resp that files its id is
 * looked for again for up to wait s.
 */
struct upstream_receipts_conf {
	uint64_t limit;
	unsigned expiry;
	unsigned wait;
};

/*
 * The store (store-and-forward): messages for an account with no session
 * wait here. path and sync_full take effect at start only; the rest
 * reloads.
 */
struct store_conf {
	bool	enabled;		/* the config has a store group */
	char	path[4096];		/* resolved against the config's dir */
	bool	sync_full;		/* "full": acknowledged = fsync'd */
	unsigned default_validity;	/* s a message waits by default */
	uint64_t max_messages;		/* the whole store */
	uint64_t max_bytes;		/* the whole store: texts and fields */
	uint64_t account_max_messages;	/* per recipient account */
	bool	jetstream;		/* backend "jetstream", else "sqlite" */
	unsigned replicas;		/* JetStream copies (and the claims') */
	unsigned shards;		/* store threads and files; 0: "auto" */
	int	line;
};

/* store.shards: at most; "auto" is one per reactor, at most the first. */
#define CONFIG_SHARDS_AUTO_MAX	8
#define CONFIG_SHARDS_MAX	32

#define CONFIG_CIDRS_MAX	32	/* http.callback_allow's entries */

/* An address block: family AF_INET or AF_INET6, the first bits of addr. */
struct config_cidr {
	int	family;
	uint8_t	addr[16];
	unsigned bits;
};

/* Callbacks the http listeners ask for (dlr-url, receipt_url, mo_url). */
struct http_conf {
	struct config_cidr callback_allow[CONFIG_CIDRS_MAX];
	unsigned ncallback_allow;
	unsigned callback_timeout;	/* s for one attempt */
	unsigned callback_retries;	/* attempts after the first */
	unsigned callback_concurrency;	/* requests at once per host */
	unsigned callback_queue;	/* receipts awaited and posts pending */
};

#define CLUSTER_NODE_MAX	32	/* cluster.node's bytes */
#define CLUSTER_SERVERS_MAX	16
#define CLUSTER_PREFIX_MAX	64	/* cluster.subject_prefix's bytes */

/*
 * Nodes sharing one address space through NATS. node, servers and
 * credentials take effect at start only; the rest reloads.
 */
struct cluster_conf {
	bool	enabled;		/* the config has a cluster group */
	char	node[CLUSTER_NODE_MAX + 1];
	char	servers[CLUSTER_SERVERS_MAX][256];
	unsigned nservers;
	char	subject_prefix[CLUSTER_PREFIX_MAX + 1];
	unsigned request_timeout;	/* s to wait for another node */
	unsigned claim_ttl;		/* s until a dead node's claims go */
	char	credentials[4096];	/* a .creds file, resolved; "" none */
	int	line;
};

/*
 * An immutable snapshot. Threads that keep one hold a reference; a reload
 * makes a new snapshot and hands it out, it never edits one in place.
 */
struct config {
	atomic_uint refs;
	char	*path;
	unsigned dispatchers;		/* resolved: "auto" is online CPUs */
	bool	dispatchers_auto;
	bool	cpu_affinity;
	bool	io_uring;		/* batch each turn's socket I/O */
	bool	sched_batch;		/* reactor threads under SCHED_BATCH */
	unsigned max_connections;
	unsigned idle_timeout;		/* seconds, 0 = never */
	unsigned shutdown_timeout;	/* seconds */
	enum log_level log_level;
	struct limits limits;
	struct listener_conf *listeners;
	size_t	nlisteners;
	struct account_conf *accounts;	/* none: any address may log in */
	size_t	naccounts;
	uint32_t *account_slots;	/* hash of ids: index + 1, 0 empty */
	size_t	account_nslots;		/* a power of two */
	/* The ids again, packed: the lookups compare here (in cache). */
	char	(*account_ids)[CONFIG_ADDR_MAX + 1];
	size_t	naccounts_mo_url;	/* accounts with a mo_url */
	struct route_conf *routes;
	size_t	nroutes;
	/*
	 * The routes by prefix (route_conf_by_prefix): a hash of the prefixes
	 * (index + 1, 0 empty), and the lengths they come in (bit l - 1 for
	 * length l).
	 */
	uint32_t *route_slots;
	size_t	route_nslots;		/* a power of two */
	uint64_t route_lens;
	struct upstream_conf *upstreams;
	size_t	nupstreams;
	struct upstream_receipts_conf upstream_receipts;
	struct smpp_conf smpp;
	struct store_conf store;
	struct cluster_conf cluster;
	struct http_conf http;
};

/*
 * Reads and validates path. Returns a snapshot holding one reference, or
 * NULL; then *errors (when errors is not NULL) is a malloc'd text of every
 * problem found, one "FILE:LINE: reason" per line, which the caller frees.
 * Nothing is logged. Any thread.
 */
struct config *config_load(const char *path, char **errors);

/* Takes another reference. Any thread. */
struct config *config_ref(struct config *cf);

/* Drops a reference; the last one frees. config_unref(NULL) is a no-op. */
void	config_unref(struct config *cf);

/* What config_keep_start_only kept of the running configuration. */
#define CONFIG_KEPT_STORE_ADDED	0x1	/* a store group appeared */
#define CONFIG_KEPT_STORE_REMOVED 0x2	/* the store group went */
#define CONFIG_KEPT_STORE_PATH	0x4	/* store.path changed */
#define CONFIG_KEPT_STORE_SYNC	0x8	/* store.sync changed */
#define CONFIG_KEPT_CLUSTER_ADDED 0x10	/* a cluster group appeared */
#define CONFIG_KEPT_CLUSTER_REMOVED 0x20	/* the cluster group went */
#define CONFIG_KEPT_CLUSTER_NODE 0x40	/* node, servers or credentials */
#define CONFIG_KEPT_STORE_BACKEND 0x80	/* store.backend or replicas */
#define CONFIG_KEPT_STORE_SHARDS 0x100	/* store.shards */

/*
 * For a reload: cf is the new snapshot, not yet handed out, old the one in
 * force. Gives cf old's settings that take effect only at start (the store
 * group itself, store.path, store.sync, store.backend, store.replicas;
 * the cluster group itself,
 * cluster.node, servers, credentials), so that cf describes what keeps
 * running, and returns which of them differed as CONFIG_KEPT_* bits (0:
 * none). Nothing is logged. Main thread.
 */
unsigned config_keep_start_only(struct config *cf, const struct config *old);

/* What config_restart_changes found changed. */
#define CONFIG_RESTART_DISPATCHERS	0x1
#define CONFIG_RESTART_CPU_AFFINITY	0x2
#define CONFIG_RESTART_IO_URING		0x4
#define CONFIG_RESTART_SCHED_BATCH	0x8
#define CONFIG_RESTART_LISTENERS	0x10	/* what one binds, or how many */

/*
 * For a reload: which settings that only a restart applies (the threads'
 * settings; a listener's name, address, port, protocol and whether it has
 * a tls group; the number of listeners) differ between cf, the new
 * snapshot, and old, as CONFIG_RESTART_* bits (0: none). Neither changes.
 * Any thread.
 */
unsigned config_restart_changes(const struct config *cf,
	    const struct config *old);

/* What the tables say of a key, for its documentation. */
struct config_key_doc {
	const char *group;	/* "" the top level, "listeners.tls" ... */
	const char *name;
	const char *section;	/* the man page's .Ss that describes it */
	const char *def;	/* its default as the man page writes it;
				   NULL: none to check (a group, a list) */
	bool	restart;	/* a change (a group's coming or going)
				   waits for a restart */
};

typedef void config_key_fn(const struct config_key_doc *key, void *arg);

/* Calls fn for every key, a group's own key before those in it. */
void	config_keys_each(config_key_fn *fn, void *arg);

/* The listener named name, or NULL. */
const struct listener_conf *config_find_listener(const struct config *cf,
	    const char *name);

/* The account with this id, or NULL. */
const struct account_conf *config_find_account(const struct config *cf,
	    const char *id);

/* The upstream named name, or NULL. */
const struct upstream_conf *config_find_upstream(const struct config *cf,
	    const char *name);

/*
 * How many shards cf's store has: store.shards, "auto" resolved to one
 * per reactor (at most CONFIG_SHARDS_AUTO_MAX); JetStream's, one.
 */
unsigned config_store_shards(const struct config *cf);

#endif
