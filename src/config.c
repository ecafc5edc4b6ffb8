/* config.c: libconfig file -> validated struct config, every error with FILE:LINE. */
#include "config.h"
#include "counter.h"
#include "transport.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_wire.h"
#include "proto.h"
#include "util.h"
#include "version.h"

/* The most of a config file read again to see an integer's literal. */
#define SOURCE_MAX	(16 << 20)

/*
 * A config file read again, once, to see how its integers were written
 * (int_truncated), with where each line starts; and the last integer
 * setting looked at, to tell apart settings of one name on one line.
 */
struct source {
	char	*file;
	char	*text;
	size_t	*lines;			/* where line i + 1 starts */
	size_t	nlines;
	const char *name;		/* the last setting looked at */
	int	line;
	unsigned nth;			/* of that name on that line, from 0 */
};

/* Every problem found, as text. */
struct cferr {
	const char *path;
	char	*text;
	size_t	len;
	size_t	cap;
	unsigned count;
	struct source src;
};

static void cferr_add(struct cferr *e, const config_setting_t *s,
	    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
cferr_vadd(struct cferr *e, const char *file, int line, const char *fmt,
    va_list ap)
{
	char msg[512];
	int n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	for (;;) {
		n = snprintf(e->text ? e->text + e->len : NULL,
		    e->text ? e->cap - e->len : 0, "%s:%d: %s\n", file, line,
		    msg);
		if (e->text != NULL && (size_t)n < e->cap - e->len)
			break;
		e->cap = e->cap * 2 + (size_t)n + 1;
		e->text = xrealloc(e->text, e->cap);
		e->text[e->len] = '\0';
	}
	e->len += (size_t)n;
	e->count++;
}

static void cferr_at(struct cferr *e, const char *file, int line,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
cferr_at(struct cferr *e, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cferr_vadd(e, file, line, fmt, ap);
	va_end(ap);
}

static void
cferr_add(struct cferr *e, const config_setting_t *s, const char *fmt, ...)
{
	const char *file = s ? config_setting_source_file(s) : NULL;
	int line = s ? config_setting_source_line(s) : 0;
	va_list ap;

	va_start(ap, fmt);
	cferr_vadd(e, file ? file : e->path, line, fmt, ap);
	va_end(ap);
}

static bool
is_int(const config_setting_t *s)
{
	int t = config_setting_type(s);

	return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}

static void
source_free(struct source *src)
{
	free(src->file);
	free(src->text);
	free(src->lines);
	memset(src, 0, sizeof(*src));
}

/*
 * Reads file into src unless it holds it already; false if it cannot be
 * read. Config files are small; SOURCE_MAX bounds what is read.
 */
static bool
source_load(struct source *src, const char *file)
{
	FILE *f;
	size_t cap = 0, len = 0, n;

	if (src->file != NULL && strcmp(src->file, file) == 0)
		return src->text != NULL;
	source_free(src);
	src->file = xstrdup(file);
	if ((f = fopen(file, "re")) == NULL)
		return false;
	do {
		if (len + 4096 > cap)
			src->text = xrealloc(src->text,
			    cap = cap * 2 + 4096 + 1);
		n = fread(src->text + len, 1, cap - len - 1, f);
		len += n;
	} while (n > 0 && len < SOURCE_MAX);
	fclose(f);
	src->text[len] = '\0';
	for (size_t i = 0, ncap = 0; i <= len; i++)
		if (i == 0 || src->text[i - 1] == '\n') {
			if (src->nlines == ncap)
				src->lines = xrealloc(src->lines,
				    (ncap = ncap * 2 + 64) * sizeof(size_t));
			src->lines[src->nlines++] = i;
		}
	return true;
}

static bool
is_name_char(char ch)
{
	return isalnum((unsigned char)ch) || (ch != '\0' &&
	    strchr("_*-", ch) != NULL);
}

/*
 * Just past the first place in p where the key name stands alone (text is
 * where p's buffer starts), or NULL.
 */
static char *
find_key(char *p, const char *text, const char *name)
{
	size_t nl = strlen(name);

	for (; (p = strstr(p, name)) != NULL; p += nl)
		if ((p == text || !is_name_char(p[-1])) &&
		    !is_name_char(p[nl]))
			return p + nl;
	return NULL;
}

/*
 * The integer literal after "= " or ": " at p: whether it is beyond 32
 * bits (without the L that makes it 64), its value as libconfig 1.5 keeps
 * it (the low 32 bits), and a copy in lit.
 */
static bool
literal_cut(const char *p, int32_t *kept, char *lit, size_t litlen)
{
	char *end;
	long long v;

	for (; isspace((unsigned char)*p); p++)
		;
	for (p += *p == '=' || *p == ':'; isspace((unsigned char)*p); p++)
		;
	errno = 0;
	v = strtoll(p, &end, p[0] == '0' && (p[1] == 'x' || p[1] == 'X') ?
	    16 : 10);
	if (end == p || *end == 'L' || (errno != ERANGE && v <= INT32_MAX &&
	    v >= INT32_MIN))
		return false;
	*kept = (int32_t)(uint32_t)(unsigned long long)v;
	snprintf(lit, litlen, "%.*s", (int)(end - p), p);
	return true;
}

/*
 * libconfig 1.5 reads an integer beyond 32 bits written without its L
 * suffix as its low 32 bits (4294967296 is 0, 4294967297 is 1), with no
 * error. The file shows what was written: true, with the literal in lit,
 * if the setting's was cut. Settings come in file order, so the nth of
 * one name on one line is the nth such key there.
 */
static bool
int_truncated(struct cferr *e, const config_setting_t *s, char *lit,
    size_t litlen)
{
	struct source *src = &e->src;
	const char *file = config_setting_source_file(s);
	const char *name = config_setting_name(s);
	int line = config_setting_source_line(s);
	char *p, *eol;
	unsigned k = 0;
	int32_t kept;

	if (file == NULL || name == NULL || line < 1 ||
	    !source_load(src, file) || (size_t)line > src->nlines)
		return false;
	if (src->name != NULL && strcmp(src->name, name) == 0 &&
	    src->line == line)
		src->nth++;
	else
		src->nth = 0;
	src->name = name;
	src->line = line;
	/* Counted above whatever its type; only a plain one can be cut. */
	if (config_setting_type(s) != CONFIG_TYPE_INT)
		return false;
	p = src->text + src->lines[line - 1];
	eol = strchr(p, '\n');
	while ((p = find_key(p, src->text, name)) != NULL &&
	    (eol == NULL || p - strlen(name) < eol))
		if (k++ == src->nth)
			return literal_cut(p, &kept, lit, litlen) &&
			    kept == config_setting_get_int(s);
	return false;
}

/*
 * Reads an integer setting within [min, max] into *out. unit names what
 * else the key takes (a size such as "4G"), for the error on a literal
 * libconfig cut to 32 bits.
 */
static void
get_int_within(struct cferr *e, const config_setting_t *s, long long min,
    long long max, const char *unit, unsigned long long *out)
{
	long long v;
	char lit[32];

	if (!is_int(s)) {
		cferr_add(e, s, "%s: expected an integer%s",
		    config_setting_name(s), unit);
		return;
	}
	if (int_truncated(e, s, lit, sizeof(lit))) {
		cferr_add(e, s, "%s: %s is beyond a plain libconfig integer "
		    "(-2147483648..2147483647); write %sL%s",
		    config_setting_name(s), lit, lit, unit);
		return;
	}
	v = config_setting_get_int64(s);
	if (v < min || v > max) {
		cferr_add(e, s, "%s: %lld is out of range %lld..%lld",
		    config_setting_name(s), v, min, max);
		return;
	}
	*out = (unsigned long long)v;
}

/* Reads an integer setting within [min, max] into *out. */
static void
get_uint(struct cferr *e, const config_setting_t *s, long long min,
    long long max, unsigned long long *out)
{
	get_int_within(e, s, min, max, "", out);
}

/*
 * A byte count: an integer, or a string of digits with an optional unit
 * K, M, G or T (powers of 1024), as "512M"; within [min, max].
 */
static void
get_bytes(struct cferr *e, const config_setting_t *s, long long min,
    long long max, unsigned long long *out)
{
	static const char units[] = "KMGT";
	const char *v, *u;
	char *end;
	unsigned long long n;
	unsigned shift = 0;

	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		get_int_within(e, s, min, max, " or a size such as \"4G\"",
		    out);
		return;
	}
	v = config_setting_get_string(s);
	errno = 0;
	n = isdigit((unsigned char)v[0]) ? strtoull(v, &end, 10) : 0;
	if (isdigit((unsigned char)v[0]) && *end != '\0' && end[1] == '\0' &&
	    (u = strchr(units, toupper((unsigned char)*end))) != NULL) {
		shift = 10 * (unsigned)(u - units + 1);
		end++;
	}
	if (!isdigit((unsigned char)v[0]) || *end != '\0') {
		cferr_add(e, s, "%s: \"%s\" is not a size: digits and an "
		    "optional K, M, G or T, as \"512M\"",
		    config_setting_name(s), v);
		return;
	}
	if (errno == ERANGE || n > (unsigned long long)max >> shift ||
	    n << shift < (unsigned long long)min) {
		cferr_add(e, s, "%s: \"%s\" is out of range %lld..%lld bytes",
		    config_setting_name(s), v, min, max);
		return;
	}
	*out = n << shift;
}

static void
get_unsigned(struct cferr *e, const config_setting_t *s, long long min,
    long long max, unsigned *out)
{
	unsigned long long v = *out;

	get_uint(e, s, min, max, &v);
	*out = (unsigned)v;
}

/* get_bytes into a size_t. */
static void
get_size_bytes(struct cferr *e, const config_setting_t *s, long long min,
    long long max, size_t *out)
{
	unsigned long long v = *out;

	get_bytes(e, s, min, max, &v);
	*out = (size_t)v;
}

static void
get_u64(struct cferr *e, const config_setting_t *s, long long min,
    long long max, uint64_t *out)
{
	unsigned long long v = *out;

	get_uint(e, s, min, max, &v);
	*out = (uint64_t)v;
}

static void
get_u64_bytes(struct cferr *e, const config_setting_t *s, long long min,
    long long max, uint64_t *out)
{
	unsigned long long v = *out;

	get_bytes(e, s, min, max, &v);
	*out = (uint64_t)v;
}

static void
get_bool(struct cferr *e, const config_setting_t *s, bool *out)
{
	if (config_setting_type(s) != CONFIG_TYPE_BOOL) {
		cferr_add(e, s, "%s: expected true or false",
		    config_setting_name(s));
		return;
	}
	*out = config_setting_get_bool(s);
}

/* The string value of s, or NULL after reporting a type error. */
static const char *
get_string(struct cferr *e, const config_setting_t *s)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		/* An element of a list has no name: its list's. */
		const char *name = config_setting_name(s);

		if (name == NULL && config_setting_parent(s) != NULL)
			name = config_setting_name(config_setting_parent(s));
		cferr_add(e, s, "%s: expected a string",
		    name != NULL ? name : "value");
		return NULL;
	}
	return config_setting_get_string(s);
}

static void
parse_dispatchers(struct cferr *e, const config_setting_t *s,
    struct config *cf)
{
	unsigned long long v = 1;
	long ncpu;

	if (config_setting_type(s) == CONFIG_TYPE_STRING) {
		if (strcmp(config_setting_get_string(s), "auto") != 0) {
			cferr_add(e, s, "dispatchers: expected \"auto\" or "
			    "a number 1..%d", CONFIG_DISPATCHERS_MAX);
			return;
		}
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		cf->dispatchers_auto = true;
		cf->dispatchers = ncpu < 1 ? 1 : ncpu > CONFIG_DISPATCHERS_MAX ?
		    CONFIG_DISPATCHERS_MAX : (unsigned)ncpu;
		return;
	}
	if (!is_int(s)) {
		cferr_add(e, s, "dispatchers: expected \"auto\" or a number "
		    "1..%d", CONFIG_DISPATCHERS_MAX);
		return;
	}
	get_uint(e, s, 1, CONFIG_DISPATCHERS_MAX, &v);
	cf->dispatchers_auto = false;
	cf->dispatchers = (unsigned)v;
}

static void
parse_log(struct cferr *e, const config_setting_t *s, struct config *cf)
{
	const char *v;
	int level;

	if (!config_setting_is_group(s)) {
		cferr_add(e, s, "log: expected a group { level = ...; }");
		return;
	}
	for (int i = 0; i < config_setting_length(s); i++) {
		config_setting_t *k = config_setting_get_elem(s, i);
		const char *name = config_setting_name(k);

		if (strcmp(name, "level") != 0) {
			cferr_add(e, k, "log.%s: unknown setting", name);
			continue;
		}
		if ((v = get_string(e, k)) == NULL)
			continue;
		if ((level = log_level_parse(v)) < 0)
			cferr_add(e, k, "log.level: \"%s\" is not one of error, "
			    "warning, notice, info, debug", v);
		else
			cf->log_level = level;
	}
}

/* 0 (the kernel's default), or 4096 bytes to 64 MiB. */
static void
get_socket_buffer(struct cferr *e, const config_setting_t *k, size_t *out)
{
	unsigned count = e->count;
	size_t v = 0;

	get_size_bytes(e, k, 0, 64 << 20, &v);
	if (e->count != count)
		return;
	if (v != 0 && v < 4096) {
		cferr_add(e, k, "limits.%s: %zu; use 0 (the kernel's default) "
		    "or 4096 to 67108864", config_setting_name(k), v);
		return;
	}
	*out = v;
}

static void
parse_limits(struct cferr *e, const config_setting_t *s, struct config *cf)
{
	struct limits *l = &cf->limits;

	if (!config_setting_is_group(s)) {
		cferr_add(e, s, "limits: expected a group");
		return;
	}
	for (int i = 0; i < config_setting_length(s); i++) {
		config_setting_t *k = config_setting_get_elem(s, i);
		const char *name = config_setting_name(k);

		if (strcmp(name, "max_line") == 0)
			get_size_bytes(e, k, 64, 1 << 20, &l->max_line);
		else if (strcmp(name, "output_high_watermark") == 0)
			get_size_bytes(e, k, 4096, 1LL << 30,
			    &l->output_high_watermark);
		else if (strcmp(name, "output_limit") == 0)
			get_size_bytes(e, k, 4096, 1LL << 32,
			    &l->output_limit);
		else if (strcmp(name, "output_stall_timeout") == 0)
			get_unsigned(e, k, 0, 86400, &l->output_stall_timeout);
		else if (strcmp(name, "max_pdu_size") == 0)
			get_size_bytes(e, k, 1024, 1 << 20, &l->max_pdu_size);
		else if (strcmp(name, "max_connections_per_ip") == 0)
			get_unsigned(e, k, 0, 10000000,
			    &l->max_connections_per_ip);
		else if (strcmp(name, "connection_rate_per_ip") == 0)
			get_unsigned(e, k, 0, 10000000,
			    &l->connection_rate_per_ip);
		else if (strcmp(name, "handshake_timeout") == 0)
			get_unsigned(e, k, 1, 3600, &l->handshake_timeout);
		else if (strcmp(name, "max_handshakes") == 0)
			get_unsigned(e, k, 0, 10000000, &l->max_handshakes);
		else if (strcmp(name, "max_handshakes_per_ip") == 0)
			get_unsigned(e, k, 0, 10000000,
			    &l->max_handshakes_per_ip);
		else if (strcmp(name, "socket_send_buffer") == 0)
			get_socket_buffer(e, k, &l->socket_send_buffer);
		else if (strcmp(name, "socket_receive_buffer") == 0)
			get_socket_buffer(e, k, &l->socket_receive_buffer);
		else
			cferr_add(e, k, "limits.%s: unknown setting", name);
	}
	if (l->output_limit < l->output_high_watermark)
		cferr_add(e, s, "limits: output_limit (%zu) is below "
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

/*
 * Settings that belong to optional features, with the build option each
 * needs. Built out, such a setting is an error that names the option;
 * built in, it goes on to the normal handling of its group.
 */
struct feature_key {
	const char *group;		/* "": top level */
	const char *name;
	const char *option;		/* the make variable */
	bool	built;
};

static const struct feature_key feature_keys[] = {
	{ "", "store", "WITH_SQLITE", ER_WITH_SQLITE },
	{ "", "cluster", "WITH_NATS", ER_WITH_NATS },
	{ "listeners", "tls", "WITH_TLS", ER_WITH_TLS },
};

/* Whether k, in group, needs a feature this build lacks (then reported). */
static bool
built_out(struct cferr *e, const config_setting_t *k, const char *group)
{
	const char *name = config_setting_name(k);

	for (size_t i = 0; i < ARRAY_LEN(feature_keys); i++) {
		const struct feature_key *f = &feature_keys[i];

		if (f->built || strcmp(f->group, group) != 0 ||
		    strcmp(f->name, name) != 0)
			continue;
		cferr_add(e, k, "\"%s\" needs echorouterd built with %s "
		    "(this build has it off)", name, f->option);
		return true;
	}
	return false;
}

static void get_conf_path(struct cferr *e, const config_setting_t *k,
	    const struct config *cf, const char *what, char *out, size_t n);

/* A listener's tls group. */
static void
parse_tls(struct cferr *e, config_setting_t *s, const struct config *cf,
    struct tls_conf *t)
{
	bool cert = false, key = false;

	t->enabled = true;
	t->min_version = 12;
	if (!config_setting_is_group(s)) {
		cferr_add(e, s, "tls: expected a group { certificate = ...; "
		    "key = ...; }");
		return;
	}
	for (int i = 0; i < config_setting_length(s); i++) {
		config_setting_t *k = config_setting_get_elem(s, i);
		const char *name = config_setting_name(k), *v;

		if (strcmp(name, "certificate") == 0) {
			get_conf_path(e, k, cf, "tls.certificate",
			    t->certificate, sizeof(t->certificate));
			cert = true;
		} else if (strcmp(name, "key") == 0) {
			get_conf_path(e, k, cf, "tls.key", t->key,
			    sizeof(t->key));
			key = true;
		} else if (strcmp(name, "ca") == 0) {
			get_conf_path(e, k, cf, "tls.ca", t->ca, sizeof(t->ca));
		} else if (strcmp(name, "verify_client") == 0) {
			get_bool(e, k, &t->verify_client);
		} else if (strcmp(name, "min_version") == 0) {
			if ((v = get_string(e, k)) == NULL)
				continue;
			if (strcmp(v, "TLSv1.2") == 0)
				t->min_version = 12;
			else if (strcmp(v, "TLSv1.3") == 0)
				t->min_version = 13;
			else
				cferr_add(e, k, "tls.min_version \"%s\": use "
				    "\"TLSv1.2\" or \"TLSv1.3\"", v);
		} else if (strcmp(name, "ciphers") == 0) {
			if ((v = get_string(e, k)) == NULL)
				continue;
			if (strlen(v) >= sizeof(t->ciphers))
				cferr_add(e, k, "tls.ciphers: longer than %zu "
				    "characters", sizeof(t->ciphers) - 1);
			else
				snprintf(t->ciphers, sizeof(t->ciphers), "%s",
				    v);
		} else {
			cferr_add(e, k, "tls.%s: unknown setting", name);
		}
	}
	if (!cert || t->certificate[0] == '\0')
		cferr_add(e, s, "tls: \"certificate\" is missing (a PEM file "
		    "with the certificate chain)");
	if (!key || t->key[0] == '\0')
		cferr_add(e, s, "tls: \"key\" is missing (a PEM file with "
		    "the private key)");
	if (t->verify_client && t->ca[0] == '\0')
		cferr_add(e, s, "tls: verify_client = true needs \"ca\", the "
		    "CAs a client certificate must be signed by");
}

static void
parse_listener_key(struct cferr *e, config_setting_t *k,
    const struct config *cf, struct listener_conf *l, unsigned *seen)
{
	const char *name = config_setting_name(k), *v = NULL;
	unsigned port = 0;

	if (built_out(e, k, "listeners"))
		return;
	if (strcmp(name, "tls") == 0) {
		parse_tls(e, k, cf, &l->tls);
		return;
	}
	if (strcmp(name, "port") == 0) {
		get_unsigned(e, k, 0, 65535, &port);
		l->port = (uint16_t)port;
		*seen |= 4;
		return;
	}
	if (strcmp(name, "name") != 0 && strcmp(name, "address") != 0 &&
	    strcmp(name, "protocol") != 0) {
		cferr_add(e, k, "listeners.%s: unknown setting", name);
		return;
	}
	/* Present even when of the wrong type: not also "missing". */
	*seen |= strcmp(name, "name") == 0 ? 1 :
	    strcmp(name, "address") == 0 ? 2 : 8;
	if ((v = get_string(e, k)) == NULL)
		return;
	if (strcmp(name, "name") == 0) {
		if (!valid_name(v))
			cferr_add(e, k, "listener name \"%s\": use 1-%d of "
			    "A-Z a-z 0-9 _ . -", v, CONFIG_NAME_MAX);
		else
			snprintf(l->name, sizeof(l->name), "%s", v);
	} else if (strcmp(name, "address") == 0) {
		if (!valid_address(v))
			cferr_add(e, k, "address \"%s\" is not an IPv4 or IPv6 "
			    "literal", v);
		else
			snprintf(l->address, sizeof(l->address), "%s", v);
	} else {
		if ((l->proto = proto_find(v)) == NULL)
			cferr_add(e, k, "protocol \"%s\" is unknown (known: %s)",
			    v, proto_names());
	}
}

static void
parse_listener(struct cferr *e, config_setting_t *s, const struct config *cf,
    struct listener_conf *l)
{
	static const char *const required[] = {
		"name", "address", "port", "protocol"
	};
	unsigned seen = 0;

	l->line = config_setting_source_line(s);
	if (!config_setting_is_group(s)) {
		cferr_add(e, s, "listeners: each entry must be a group "
		    "{ name = ...; address = ...; port = ...; protocol = ...; }");
		return;
	}
	for (int i = 0; i < config_setting_length(s); i++)
		parse_listener_key(e, config_setting_get_elem(s, i), cf, l,
		    &seen);
	for (unsigned i = 0; i < ARRAY_LEN(required); i++)
		if (!(seen & (1u << i)))
			cferr_add(e, s, "listener: \"%s\" is missing",
			    required[i]);
}

static void
check_listener_dups(struct cferr *e, const config_setting_t *s,
    const struct config *cf)
{
	for (size_t i = 0; i < cf->nlisteners; i++) {
		const struct listener_conf *a = &cf->listeners[i];
		config_setting_t *si = config_setting_get_elem(s, (unsigned)i);

		for (size_t j = 0; j < i; j++) {
			const struct listener_conf *b = &cf->listeners[j];

			if (a->name[0] && strcmp(a->name, b->name) == 0)
				cferr_add(e, si, "listener name \"%s\" is "
				    "already used on line %d", a->name, b->line);
			else if (a->port != 0 && a->port == b->port &&
			    a->address[0] && strcmp(a->address, b->address) == 0)
				cferr_add(e, si, "listener \"%s\": %s port %u "
				    "is already used by \"%s\"", a->name,
				    a->address, a->port, b->name);
		}
	}
}

static void
parse_listeners(struct cferr *e, config_setting_t *s, struct config *cf)
{
	int n;

	if (!config_setting_is_list(s) && !config_setting_is_array(s)) {
		cferr_add(e, s, "listeners: expected a list ( { ... }, ... )");
		return;
	}
	n = config_setting_length(s);
	if (n == 0) {
		cferr_add(e, s, "listeners: at least one listener is needed");
		return;
	}
	if (n > COUNTER_LISTENERS_MAX) {
		cferr_add(e, s, "listeners: %d of them, at most %d", n,
		    COUNTER_LISTENERS_MAX);
		return;
	}
	cf->listeners = xcalloc((size_t)n, sizeof(*cf->listeners));
	cf->nlisteners = (size_t)n;
	for (int i = 0; i < n; i++) {
		config_setting_t *ls = config_setting_get_elem(s, i);
		struct listener_conf *l = &cf->listeners[i];
		unsigned before = e->count;
		char err[1024];

		parse_listener(e, ls, cf, l);
		/* A TLS pair is read now: a bad one fails the load. */
		if (e->count == before && (l->xp_ctx = transport_prepare(l,
		    err, sizeof(err))) == NULL)
			cferr_add(e, ls, "listener \"%s\": %s", l->name, err);
	}
	check_listener_dups(e, s, cf);
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
	const char *v = get_string(e, s);

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

/*
 * Walks a list of groups, calling fn for each member setting of each group.
 * Checks that every name in required[] appears in each group.
 */
typedef void group_key_fn(struct cferr *, config_setting_t *, void *,
    unsigned *);

static bool
parse_group_list(struct cferr *e, config_setting_t *s, const char *what,
    const char *const *required, size_t nreq, group_key_fn *fn, void *elems,
    size_t elem_size)
{
	if (!config_setting_is_list(s) && !config_setting_is_array(s)) {
		cferr_add(e, s, "%s: expected a list ( { ... }, ... )", what);
		return false;
	}
	for (int i = 0; i < config_setting_length(s); i++) {
		config_setting_t *g = config_setting_get_elem(s, i);
		void *elem = (char *)elems + (size_t)i * elem_size;
		unsigned seen = 0;

		if (!config_setting_is_group(g)) {
			cferr_add(e, g, "%s: each entry must be a group", what);
			continue;
		}
		for (int k = 0; k < config_setting_length(g); k++)
			fn(e, config_setting_get_elem(g, k), elem, &seen);
		for (size_t k = 0; k < nreq; k++)
			if (!(seen & (1u << k)))
				cferr_add(e, g, "%s: \"%s\" is missing", what,
				    required[k]);
	}
	return true;
}

/* source_addrs: a list or array of address prefixes. */
static void
get_source_addrs(struct cferr *e, const config_setting_t *k,
    struct account_conf *a)
{
	int t = config_setting_type(k), n = config_setting_length(k);

	if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST) {
		cferr_add(e, k, "source_addrs: expected a list of address "
		    "prefixes, like [ \"+1555\", \"shop\" ]");
		return;
	}
	if (n < 1 || n > CONFIG_SOURCE_ADDRS_MAX) {
		cferr_add(e, k, "source_addrs: give 1 to %d prefixes",
		    CONFIG_SOURCE_ADDRS_MAX);
		return;
	}
	for (int i = 0; i < n; i++)
		if (get_addr(e, config_setting_get_elem(k, (unsigned)i),
		    "source_addrs prefix", a->source_addrs[a->nsource_addrs],
		    sizeof(a->source_addrs[0])))
			a->nsource_addrs++;
}

static void
account_key(struct cferr *e, config_setting_t *k, void *elem, unsigned *seen)
{
	struct account_conf *a = elem;
	const char *name = config_setting_name(k), *v;

	a->line = config_setting_source_line(config_setting_parent(k));
	if (strcmp(name, "id") == 0) {
		*seen |= 1;
		get_addr(e, k, "account id", a->id, sizeof(a->id));
	} else if (strcmp(name, "max_binds") == 0) {
		get_unsigned(e, k, 1, 1024, &a->max_binds);
	} else if (strcmp(name, "max_tps") == 0) {
		get_unsigned(e, k, 0, 10000000, &a->max_tps);
	} else if (strcmp(name, "source_addrs") == 0) {
		get_source_addrs(e, k, a);
	} else if (strcmp(name, "password") == 0) {
		*seen |= 2;
		if ((v = get_string(e, k)) == NULL)
			return;
		if (strlen(v) > CONFIG_PASSWORD_MAX)
			cferr_add(e, k, "password: longer than %d characters",
			    CONFIG_PASSWORD_MAX);
		else
			snprintf(a->password, sizeof(a->password), "%s", v);
	} else {
		cferr_add(e, k, "accounts.%s: unknown setting", name);
	}
}

static uint32_t
id_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s != '\0')
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

/*
 * An open-addressing index of the account ids: a message to an address
 * asks whether it is an account, and with a thousand accounts a walk
 * along the list was most of a stored message's cost on its reactor.
 */
static void
index_accounts(struct config *cf)
{
	size_t n = 16;

	while (n < cf->naccounts * 2)
		n *= 2;
	cf->account_slots = xcalloc(n, sizeof(*cf->account_slots));
	cf->account_nslots = n;
	for (size_t i = 0; i < cf->naccounts; i++) {
		size_t j = id_hash(cf->accounts[i].id) & (n - 1);

		while (cf->account_slots[j] != 0)
			j = (j + 1) & (n - 1);
		cf->account_slots[j] = (uint32_t)i + 1;
	}
}

static void
parse_accounts(struct cferr *e, config_setting_t *s, struct config *cf)
{
	static const char *const required[] = { "id", "password" };
	int n = config_setting_length(s);

	cf->accounts = xcalloc((size_t)n, sizeof(*cf->accounts));
	for (int i = 0; i < n; i++)
		cf->accounts[i].max_binds = 4;
	if (!parse_group_list(e, s, "accounts", required, ARRAY_LEN(required),
	    account_key, cf->accounts, sizeof(*cf->accounts)))
		return;
	cf->naccounts = (size_t)n;
	for (size_t i = 0; i < cf->naccounts; i++)
		for (size_t j = 0; j < i; j++)
			if (cf->accounts[i].id[0] &&
			    strcmp(cf->accounts[i].id, cf->accounts[j].id) == 0)
				cferr_add(e, config_setting_get_elem(s,
				    (unsigned)i), "account \"%s\" is already "
				    "defined on line %d", cf->accounts[i].id,
				    cf->accounts[j].line);
	index_accounts(cf);
}

static void
route_key(struct cferr *e, config_setting_t *k, void *elem, unsigned *seen)
{
	struct route_conf *r = elem;
	const char *name = config_setting_name(k);

	r->line = config_setting_source_line(config_setting_parent(k));
	if (strcmp(name, "prefix") == 0) {
		*seen |= 1;
		get_addr(e, k, "route prefix", r->prefix, sizeof(r->prefix));
	} else if (strcmp(name, "to") == 0) {
		*seen |= 2;
		get_addr(e, k, "route to", r->to, sizeof(r->to));
	} else {
		cferr_add(e, k, "routes.%s: unknown setting", name);
	}
}

static void
parse_routes(struct cferr *e, config_setting_t *s, struct config *cf)
{
	static const char *const required[] = { "prefix", "to" };
	int n = config_setting_length(s);

	cf->routes = xcalloc((size_t)n, sizeof(*cf->routes));
	if (!parse_group_list(e, s, "routes", required, ARRAY_LEN(required),
	    route_key, cf->routes, sizeof(*cf->routes)))
		return;
	cf->nroutes = (size_t)n;
	for (size_t i = 0; i < cf->nroutes; i++)
		for (size_t j = 0; j < i; j++)
			if (cf->routes[i].prefix[0] && strcmp(
			    cf->routes[i].prefix, cf->routes[j].prefix) == 0)
				cferr_add(e, config_setting_get_elem(s,
				    (unsigned)i), "route prefix \"%s\" is "
				    "already used on line %d",
				    cf->routes[i].prefix, cf->routes[j].line);
}

static void
parse_smpp(struct cferr *e, const config_setting_t *s, struct config *cf)
{
	struct smpp_conf *sc = &cf->smpp;
	const char *v;

	if (!config_setting_is_group(s)) {
		cferr_add(e, s, "smpp: expected a group");
		return;
	}
	for (int i = 0; i < config_setting_length(s); i++) {
		config_setting_t *k = config_setting_get_elem(s, i);
		const char *name = config_setting_name(k);

		if (strcmp(name, "window") == 0)
			get_unsigned(e, k, 1, 1024, &sc->window);
		else if (strcmp(name, "queue_limit") == 0)
			get_unsigned(e, k, 0, 1000000, &sc->queue_limit);
		else if (strcmp(name, "enquire_link_interval") == 0)
			get_unsigned(e, k, 0, 86400,
			    &sc->enquire_link_interval);
		else if (strcmp(name, "response_timeout") == 0)
			get_unsigned(e, k, 1, 3600, &sc->response_timeout);
		else if (strcmp(name, "system_id") == 0) {
			if ((v = get_string(e, k)) == NULL)
				continue;
			if (strlen(v) == 0 || strlen(v) > 15)
				cferr_add(e, k, "smpp.system_id: 1-15 "
				    "characters");
			else
				snprintf(sc->system_id, sizeof(sc->system_id),
				    "%s", v);
		} else
			cferr_add(e, k, "smpp.%s: unknown setting", name);
	}
}

/*
 * The directory of the configuration file, absolute, into dir (size n):
 * what a relative store path is relative to. 0, or -1 with errno.
 */
static int
config_dir(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');
	char cwd[4096];
	int len = slash == NULL ? 0 : slash == path ? 1 : (int)(slash - path);
	int w;

	if (path[0] == '/') {
		w = snprintf(dir, n, "%.*s", len, path);
	} else {
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return -1;
		w = snprintf(dir, n, "%s%s%.*s", cwd, len > 0 ? "/" : "", len,
		    path);
	}
	if (w < 0 || (size_t)w >= n) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* A path made absolute against the configuration file's directory. */
static void
get_conf_path(struct cferr *e, const config_setting_t *k,
    const struct config *cf, const char *what, char *out, size_t n)
{
	const char *v = get_string(e, k);
	char dir[4096];
	int w;

	if (v == NULL || v[0] == '\0') {
		out[0] = '\0';
		return;
	}
	if (v[0] == '/') {
		w = snprintf(out, n, "%s", v);
	} else {
		if (config_dir(cf->path, dir, sizeof(dir)) < 0) {
			cferr_add(e, k, "%s: cannot make \"%s\" absolute: %s",
			    what, v, strerror(errno));
			return;
		}
		w = snprintf(out, n, "%s%s%s", dir,
		    strcmp(dir, "/") == 0 ? "" : "/", v);
	}
	if (w < 0 || (size_t)w >= n) {
		out[0] = '\0';
		cferr_add(e, k, "%s: longer than %zu characters", what, n - 1);
	}
}

/* store.path, made absolute against the configuration file's directory. */
static void
get_store_path(struct cferr *e, const config_setting_t *k,
    struct config *cf)
{
	const char *v = get_string(e, k);

	if (v != NULL && v[0] == '\0')
		cferr_add(e, k, "store.path: empty; name the store file");
	else if (v != NULL)
		get_conf_path(e, k, cf, "store.path", cf->store.path,
		    sizeof(cf->store.path));
}

static void
get_store_backend(struct cferr *e, const config_setting_t *k,
    struct store_conf *st)
{
	const char *v = get_string(e, k);

	if (v == NULL)
		return;
	if (strcmp(v, "sqlite") == 0)
		st->jetstream = false;
	else if (strcmp(v, "jetstream") == 0)
#if ER_WITH_NATS
		st->jetstream = true;
#else
		cferr_add(e, k, "store.backend: \"jetstream\": built without "
		    "the NATS client (WITH_NATS=no)");
#endif
	else
		cferr_add(e, k, "store.backend: \"%s\" is not one of sqlite, "
		    "jetstream", v);
}

static void
get_store_sync(struct cferr *e, const config_setting_t *k,
    struct store_conf *st)
{
	const char *v = get_string(e, k);

	if (v == NULL)
		return;
	if (strcmp(v, "full") == 0)
		st->sync_full = true;
	else if (strcmp(v, "normal") == 0)
		st->sync_full = false;
	else
		cferr_add(e, k, "store.sync: \"%s\" is not one of full, normal",
		    v);
}

static void
parse_store(struct cferr *e, const config_setting_t *s, struct config *cf)
{
	struct store_conf *st = &cf->store;
	bool has_path = false;

	if (!config_setting_is_group(s)) {
		cferr_add(e, s, "store: expected a group { path = ...; }");
		return;
	}
	st->enabled = true;
	st->line = config_setting_source_line(s);
	for (int i = 0; i < config_setting_length(s); i++) {
		config_setting_t *k = config_setting_get_elem(s, i);
		const char *name = config_setting_name(k);

		if (strcmp(name, "path") == 0) {
			has_path = true;
			get_store_path(e, k, cf);
		} else if (strcmp(name, "sync") == 0)
			get_store_sync(e, k, st);
		else if (strcmp(name, "default_validity") == 0)
			get_unsigned(e, k, 1, CONFIG_VALIDITY_MAX,
			    &st->default_validity);
		else if (strcmp(name, "max_messages") == 0)
			get_u64(e, k, 1, INT64_MAX, &st->max_messages);
		else if (strcmp(name, "max_bytes") == 0)
			get_u64_bytes(e, k, 1, INT64_MAX, &st->max_bytes);
		else if (strcmp(name, "account_max_messages") == 0)
			get_u64(e, k, 1, INT64_MAX, &st->account_max_messages);
		else if (strcmp(name, "replicas") == 0)
			get_unsigned(e, k, 1, 5, &st->replicas);
		else if (strcmp(name, "backend") == 0)
			get_store_backend(e, k, st);
		else
			cferr_add(e, k, "store.%s: unknown setting", name);
	}
	/* JetStream keeps the messages on the NATS servers: no file. */
	if (!has_path && !st->jetstream)
		cferr_add(e, s, "store: \"path\" is missing");
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
get_cluster_servers(struct cferr *e, const config_setting_t *k,
    struct cluster_conf *cl)
{
	int n = config_setting_length(k);

	if (!config_setting_is_list(k) && !config_setting_is_array(k)) {
		cferr_add(e, k, "cluster.servers: expected a list ( \"nats://"
		    "host:port\", ... )");
		return;
	}
	if (n == 0 || n > CLUSTER_SERVERS_MAX) {
		cferr_add(e, k, "cluster.servers: give 1 to %d servers",
		    CLUSTER_SERVERS_MAX);
		return;
	}
	for (int i = 0; i < n; i++) {
		config_setting_t *el = config_setting_get_elem(k, i);
		const char *v = get_string(e, el);
		char shown[sizeof(cl->servers[0])];

		if (v == NULL)
			continue;
		/* Errors reach the log on reload: no password in them. */
		cluster_url_shown(v, shown, sizeof(shown));
		if (strncmp(v, "nats://", 7) != 0 &&
		    strncmp(v, "tls://", 6) != 0) {
			cferr_add(e, el, "cluster.servers: \"%s\" is not a "
			    "nats:// or tls:// URL", shown);
			continue;
		}
		if (strlen(v) >= sizeof(cl->servers[0]) ||
		    strchr(v, ',') != NULL || strchr(v, ' ') != NULL) {
			cferr_add(e, el, "cluster.servers: \"%s\": one URL of "
			    "at most %zu characters", shown,
			    sizeof(cl->servers[0]) - 1);
			continue;
		}
		snprintf(cl->servers[cl->nservers++], sizeof(cl->servers[0]),
		    "%s", v);
	}
}

/*
 * cluster.credentials, made absolute, and readable now: libnats reads it
 * only when it connects, and a file it cannot read would look like a
 * NATS server that does not answer.
 */
static void
get_credentials(struct cferr *e, const config_setting_t *k,
    struct config *cf)
{
	char *path = cf->cluster.credentials, c;
	int fd;

	get_conf_path(e, k, cf, "cluster.credentials", path,
	    sizeof(cf->cluster.credentials));
	if (path[0] == '\0')
		return;
	/* A read, not access(2): a directory opens but does not read. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0 ||
	    read(fd, &c, 1) < 0)
		cferr_add(e, k, "cluster.credentials: cannot read %s: %s", path,
		    strerror(errno));
	if (fd >= 0)
		close(fd);
}

static void
parse_cluster(struct cferr *e, const config_setting_t *s, struct config *cf)
{
	struct cluster_conf *cl = &cf->cluster;
	bool has_node = false, has_servers = false;

	if (!config_setting_is_group(s)) {
		cferr_add(e, s, "cluster: expected a group { node = ...; }");
		return;
	}
	cl->enabled = true;
	cl->line = config_setting_source_line(s);
	for (int i = 0; i < config_setting_length(s); i++) {
		config_setting_t *k = config_setting_get_elem(s, i);
		const char *name = config_setting_name(k), *v;

		if (strcmp(name, "node") == 0) {
			has_node = true;
			if ((v = get_string(e, k)) == NULL)
				continue;
			if (!valid_node(v))
				cferr_add(e, k, "cluster.node: \"%s\": use 1-32 "
				    "of A-Z a-z 0-9 _ -", v);
			else
				snprintf(cl->node, sizeof(cl->node), "%s", v);
		} else if (strcmp(name, "servers") == 0) {
			has_servers = true;
			get_cluster_servers(e, k, cl);
		} else if (strcmp(name, "subject_prefix") == 0) {
			if ((v = get_string(e, k)) == NULL)
				continue;
			if (!valid_prefix(v))
				cferr_add(e, k, "cluster.subject_prefix: \"%s\": "
				    "use NATS tokens of A-Z a-z 0-9 _ - joined "
				    "by dots, at most %d characters", v,
				    CLUSTER_PREFIX_MAX);
			else
				snprintf(cl->subject_prefix,
				    sizeof(cl->subject_prefix), "%s", v);
		} else if (strcmp(name, "request_timeout") == 0)
			get_unsigned(e, k, 1, 300, &cl->request_timeout);
		else if (strcmp(name, "claim_ttl") == 0)
			get_unsigned(e, k, 2, 86400, &cl->claim_ttl);
		else if (strcmp(name, "credentials") == 0)
			get_credentials(e, k, cf);
		else
			cferr_add(e, k, "cluster.%s: unknown setting", name);
	}
	if (!has_node)
		cferr_add(e, s, "cluster: \"node\" is missing (a name unique "
		    "to this node)");
	if (!has_servers)
		cferr_add(e, s, "cluster: \"servers\" is missing");
}

static void
parse_root_key(struct cferr *e, config_setting_t *k, struct config *cf)
{
	const char *name = config_setting_name(k);

	if (built_out(e, k, ""))
		return;
	if (strcmp(name, "dispatchers") == 0)
		parse_dispatchers(e, k, cf);
	else if (strcmp(name, "cpu_affinity") == 0)
		get_bool(e, k, &cf->cpu_affinity);
	else if (strcmp(name, "io_uring") == 0)
		get_bool(e, k, &cf->io_uring);
	else if (strcmp(name, "sched_batch") == 0)
		get_bool(e, k, &cf->sched_batch);
	else if (strcmp(name, "max_connections") == 0)
		get_unsigned(e, k, 1, 10000000, &cf->max_connections);
	else if (strcmp(name, "idle_timeout") == 0)
		get_unsigned(e, k, 0, 31536000, &cf->idle_timeout);
	else if (strcmp(name, "shutdown_timeout") == 0)
		get_unsigned(e, k, 0, 3600, &cf->shutdown_timeout);
	else if (strcmp(name, "log") == 0)
		parse_log(e, k, cf);
	else if (strcmp(name, "limits") == 0)
		parse_limits(e, k, cf);
	else if (strcmp(name, "listeners") == 0)
		parse_listeners(e, k, cf);
	else if (strcmp(name, "accounts") == 0)
		parse_accounts(e, k, cf);
	else if (strcmp(name, "routes") == 0)
		parse_routes(e, k, cf);
	else if (strcmp(name, "smpp") == 0)
		parse_smpp(e, k, cf);
	else if (strcmp(name, "store") == 0)
		parse_store(e, k, cf);
	else if (strcmp(name, "cluster") == 0)
		parse_cluster(e, k, cf);
	else
		cferr_add(e, k, "%s: unknown setting", name);
}

static void
config_defaults(struct config *cf)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	atomic_init(&cf->refs, 1);
	cf->dispatchers_auto = true;
	cf->dispatchers = ncpu < 1 ? 1 : ncpu > CONFIG_DISPATCHERS_MAX ?
	    CONFIG_DISPATCHERS_MAX : (unsigned)ncpu;
	cf->cpu_affinity = false;
	cf->io_uring = true;
	cf->sched_batch = true;
	cf->max_connections = 100000;
	cf->idle_timeout = 600;
	cf->shutdown_timeout = 10;
	cf->log_level = LOG_LEVEL_INFO;
	cf->limits.max_line = 4096;
	cf->limits.output_high_watermark = 1 << 20;
	cf->limits.output_limit = 8 << 20;
	cf->limits.output_stall_timeout = 30;
	cf->limits.max_pdu_size = 65536;
	cf->limits.handshake_timeout = 10;
	cf->limits.max_handshakes = 10000;
	cf->limits.max_handshakes_per_ip = 1000;
	cf->smpp.window = 16;
	cf->smpp.queue_limit = 1000;
	cf->smpp.enquire_link_interval = 30;
	cf->smpp.response_timeout = 10;
	snprintf(cf->smpp.system_id, sizeof(cf->smpp.system_id), "echorouterd");
	cf->store.sync_full = true;
	cf->store.default_validity = 86400;
	cf->store.max_messages = 1000000;
	cf->store.max_bytes = 1 << 30;
	cf->store.account_max_messages = 100000;
	cf->store.replicas = 1;
	snprintf(cf->cluster.subject_prefix, sizeof(cf->cluster.subject_prefix),
	    "erd");
	cf->cluster.request_timeout = 2;
	cf->cluster.claim_ttl = 10;
}

static void
load_file(struct cferr *e, config_t *lc, struct config *cf)
{
	config_setting_t *root;

	if (config_read_file(lc, cf->path) != CONFIG_TRUE) {
		if (config_error_type(lc) == CONFIG_ERR_FILE_IO)
			cferr_at(e, cf->path, 0, "cannot read the file: %s",
			    strerror(errno));
		else
			cferr_at(e, config_error_file(lc) ?
			    config_error_file(lc) : cf->path,
			    config_error_line(lc), "%s", config_error_text(lc));
		return;
	}
	root = config_root_setting(lc);
	for (int i = 0; i < config_setting_length(root); i++)
		parse_root_key(e, config_setting_get_elem(root, i), cf);
	if (config_lookup(lc, "listeners") == NULL)
		cferr_add(e, NULL, "listeners: at least one listener is needed");
	if (cf->store.jetstream && !cf->cluster.enabled)
		cferr_at(e, cf->path, cf->store.line, "store.backend: "
		    "\"jetstream\" needs a cluster group (its NATS servers)");
}

struct config *
config_load(const char *path, char **errors)
{
	struct cferr e = { .path = path };
	struct config *cf = xcalloc(1, sizeof(*cf));
	config_t lc;

	config_defaults(cf);
	cf->path = xstrdup(path);
	config_init(&lc);
	load_file(&e, &lc, cf);
	config_destroy(&lc);
	source_free(&e.src);
	if (errors != NULL)
		*errors = e.text;
	else
		free(e.text);
	if (e.count > 0) {
		config_unref(cf);
		return NULL;
	}
	return cf;
}

struct config *
config_ref(struct config *cf)
{
	atomic_fetch_add_explicit(&cf->refs, 1, memory_order_relaxed);
	return cf;
}

void
config_unref(struct config *cf)
{
	if (cf == NULL ||
	    atomic_fetch_sub_explicit(&cf->refs, 1, memory_order_acq_rel) != 1)
		return;
	for (size_t i = 0; i < cf->nlisteners; i++)
		transport_ctx_unref(cf->listeners[i].xp_ctx);
	free(cf->listeners);
	free(cf->accounts);
	free(cf->account_slots);
	free(cf->routes);
	free(cf->path);
	free(cf);
}

/* The cluster's part of config_keep_start_only. */
static unsigned
keep_cluster(struct cluster_conf *cl, const struct cluster_conf *o)
{
	unsigned kept = 0;

	if (cl->enabled != o->enabled) {
		kept = cl->enabled ? CONFIG_KEPT_CLUSTER_ADDED :
		    CONFIG_KEPT_CLUSTER_REMOVED;
		*cl = *o;
		return kept;
	}
	if (!cl->enabled)
		return 0;
	if (strcmp(cl->node, o->node) != 0 || cl->nservers != o->nservers ||
	    memcmp(cl->servers, o->servers, sizeof(cl->servers)) != 0 ||
	    strcmp(cl->credentials, o->credentials) != 0) {
		kept = CONFIG_KEPT_CLUSTER_NODE;
		memcpy(cl->node, o->node, sizeof(cl->node));
		memcpy(cl->servers, o->servers, sizeof(cl->servers));
		cl->nservers = o->nservers;
		memcpy(cl->credentials, o->credentials,
		    sizeof(cl->credentials));
	}
	return kept;
}

unsigned
config_keep_start_only(struct config *cf, const struct config *old)
{
	struct store_conf *st = &cf->store;
	const struct store_conf *o = &old->store;
	unsigned kept = keep_cluster(&cf->cluster, &old->cluster);

	if (st->enabled != o->enabled) {
		kept |= st->enabled ? CONFIG_KEPT_STORE_ADDED :
		    CONFIG_KEPT_STORE_REMOVED;
		*st = *o;
		return kept;
	}
	if (!st->enabled)
		return kept;
	if (strcmp(st->path, o->path) != 0) {
		kept |= CONFIG_KEPT_STORE_PATH;
		memcpy(st->path, o->path, sizeof(st->path));
	}
	if (st->sync_full != o->sync_full) {
		kept |= CONFIG_KEPT_STORE_SYNC;
		st->sync_full = o->sync_full;
	}
	if (st->jetstream != o->jetstream || st->replicas != o->replicas) {
		kept |= CONFIG_KEPT_STORE_BACKEND;
		st->jetstream = o->jetstream;
		st->replicas = o->replicas;
	}
	return kept;
}

const struct listener_conf *
config_find_listener(const struct config *cf, const char *name)
{
	for (size_t i = 0; i < cf->nlisteners; i++)
		if (strcmp(cf->listeners[i].name, name) == 0)
			return &cf->listeners[i];
	return NULL;
}

const struct account_conf *
config_find_account(const struct config *cf, const char *id)
{
	size_t n = cf->account_nslots, j;

	if (n == 0)
		return NULL;
	for (j = id_hash(id) & (n - 1); cf->account_slots[j] != 0;
	    j = (j + 1) & (n - 1)) {
		const struct account_conf *a =
		    &cf->accounts[cf->account_slots[j] - 1];

		if (strcmp(a->id, id) == 0)
			return a;
	}
	return NULL;
}
