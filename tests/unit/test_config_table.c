/* test_config_table.c: the config tables' walker: types, units, ranges, unknown keys, reload classes, docs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "helpers.h"
#include "suites.h"
#include "util.h"

/* One valid listener, on line 1. */
#define LISTENER							\
	"listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0; "\
	"protocol = \"echo\"; } );\n"

/*
 * Loads text, expects it rejected with exactly one error, "FILE:LINE: "
 * followed by want.
 */
static void
expect_error(const char *text, int line, const char *want)
{
	char path[600], expected[1200], *errors = NULL;
	struct config *cf = unit_config_load(text, path, sizeof(path), &errors);

	ck_assert_msg(cf == NULL, "accepted a bad config:\n%s", text);
	ck_assert_ptr_nonnull(errors);
	snprintf(expected, sizeof(expected), "%s:%d: %s\n", path, line, want);
	ck_assert_str_eq(errors, expected);
	free(errors);
}

/* Each type of row refuses a value of another type, naming the key. */
START_TEST(table_types)
{
	expect_error(LISTENER "cpu_affinity = 1;\n", 2,
	    "cpu_affinity: expected true or false");
	expect_error(LISTENER "idle_timeout = \"600\";\n", 2,
	    "idle_timeout: expected an integer");
	expect_error(LISTENER "limits = { max_line = true; };\n", 2,
	    "max_line: expected an integer or a size such as \"4G\"");
	expect_error(LISTENER "smpp = { system_id = 7; };\n", 2,
	    "system_id: expected a string");
	expect_error(LISTENER "limits = 5;\n", 2,
	    "limits: expected a group");
	expect_error(LISTENER "accounts = { id = \"a\"; };\n", 2,
	    "accounts: expected a list ( { ... }, ... )");
	expect_error(LISTENER "routes = ( 5 );\n", 2,
	    "routes: each entry must be a group");
}
END_TEST

/* Sizes: bytes, or digits and one unit of K, M, G, T, either case. */
START_TEST(table_units)
{
	struct config *cf = unit_config(LISTENER "limits = { max_line = "
	    "\"512k\"; output_high_watermark = \"1M\"; output_limit = "
	    "\"4G\"; max_pdu_size = 2048; };\n");

	ck_assert_uint_eq(cf->limits.max_line, 512 * 1024);
	ck_assert_uint_eq(cf->limits.output_high_watermark, 1 << 20);
	ck_assert_uint_eq(cf->limits.output_limit, 4ULL << 30);
	ck_assert_uint_eq(cf->limits.max_pdu_size, 2048);
	config_unref(cf);
	expect_error(LISTENER "limits = { max_line = \"4X\"; };\n", 2,
	    "max_line: \"4X\" is not a size: digits and an optional K, M, G "
	    "or T, as \"512M\"");
	expect_error(LISTENER "limits = { max_line = \"4KB\"; };\n", 2,
	    "max_line: \"4KB\" is not a size: digits and an optional K, M, "
	    "G or T, as \"512M\"");
	expect_error(LISTENER "limits = { max_line = \"2M\"; };\n", 2,
	    "max_line: \"2M\" is out of range 64..1048576 bytes");
	/* Beyond 64 bits, and beyond them once the unit shifts it. */
	expect_error(LISTENER "limits = { output_limit = "
	    "\"99999999999999999999999\"; };\n", 2, "output_limit: "
	    "\"99999999999999999999999\" is out of range 4096..4294967296 "
	    "bytes");
	expect_error(LISTENER "limits = { output_limit = \"17179869184T\"; "
	    "};\n", 2, "output_limit: \"17179869184T\" is out of range "
	    "4096..4294967296 bytes");
	/* libconfig keeps the low 32 bits of 4294967296: 0. */
	expect_error(LISTENER "limits = { output_limit = 4294967296; };\n", 2,
	    "output_limit: 4294967296 is beyond a plain libconfig integer "
	    "(-2147483648..2147483647); write 4294967296L or a size such as "
	    "\"4G\"");
	cf = unit_config(LISTENER "limits = { output_limit = 4294967296L; };\n");
	ck_assert_uint_eq(cf->limits.output_limit, 4ULL << 30);
	config_unref(cf);
}
END_TEST

/* A row's range holds at both ends and refuses one beyond either. */
START_TEST(table_ranges)
{
	struct config *cf = unit_config(LISTENER "smpp = { window = 1; "
	    "response_timeout = 3600; };\nidle_timeout = 0;\n");

	ck_assert_uint_eq(cf->smpp.window, 1);
	ck_assert_uint_eq(cf->smpp.response_timeout, 3600);
	ck_assert_uint_eq(cf->idle_timeout, 0);
	config_unref(cf);
	expect_error(LISTENER "smpp = { window = 0; };\n", 2,
	    "window: 0 is out of range 1..1024");
	expect_error(LISTENER "smpp = { window = 1025; };\n", 2,
	    "window: 1025 is out of range 1..1024");
	expect_error(LISTENER "idle_timeout = -1;\n", 2,
	    "idle_timeout: -1 is out of range 0..31536000");
	expect_error("listeners = ( { name = \"e\"; address = \"127.0.0.1\"; "
	    "port = 65536; protocol = \"echo\"; } );\n", 1,
	    "port: 65536 is out of range 0..65535");
	expect_error(LISTENER "limits = { max_pdu_size = 1023; };\n", 2,
	    "max_pdu_size: 1023 is out of range 1024..1048576");
}
END_TEST

/* A key no row names is an error with its file, line and full name. */
START_TEST(table_unknown_keys)
{
	expect_error(LISTENER "\n\nbogus = 1;\n", 4, "bogus: unknown setting");
	expect_error(LISTENER "limits = {\n  max_lines = 1;\n};\n", 3,
	    "limits.max_lines: unknown setting");
	expect_error(LISTENER "smpp = { windows = 1; };\n", 2,
	    "smpp.windows: unknown setting");
	expect_error("listeners = ( { name = \"e\"; address = \"127.0.0.1\"; "
	    "port = 0; protocol = \"echo\"; colour = \"red\"; } );\n", 1,
	    "listeners.colour: unknown setting");
	expect_error(LISTENER "accounts = ( { id = \"a\"; password = \"p\"; "
	    "max_bind = 2; } );\n", 2, "accounts.max_bind: unknown setting");
	/* A key of another group is unknown where it is not a row. */
	expect_error(LISTENER "window = 16;\n", 2, "window: unknown setting");
}
END_TEST

/* The defaults are the table's, where the file says nothing. */
START_TEST(table_defaults)
{
	struct config *cf = unit_config(LISTENER "accounts = ( { id = \"a\"; "
	    "password = \"p\"; } );\n");

	ck_assert(cf->dispatchers_auto);
	ck_assert(cf->io_uring);
	ck_assert_uint_eq(cf->max_connections, 100000);
	ck_assert_int_eq(cf->log_level, LOG_LEVEL_INFO);
	ck_assert_uint_eq(cf->limits.output_limit, 8 << 20);
	ck_assert_uint_eq(cf->accounts[0].max_binds, 4);
	ck_assert_str_eq(cf->smpp.system_id, "echorouterd");
	ck_assert_str_eq(cf->cluster.subject_prefix, "erd");
	ck_assert(cf->store.sync_full);
	ck_assert_uint_eq(cf->store.max_bytes, 1 << 30);
	ck_assert(!cf->listeners[0].tls.enabled);
	ck_assert_uint_eq(cf->listeners[0].tls.min_version, 0);
	config_unref(cf);
}
END_TEST

/*
 * Restart rows: a change is reported and the new value stands in the new
 * snapshot (nothing reads it before a restart).
 */
START_TEST(table_reload_restart)
{
	struct config *old = unit_config(LISTENER "dispatchers = 2;\n"
	    "idle_timeout = 600;\n");
	struct config *same = unit_config(LISTENER "dispatchers = 2;\n"
	    "idle_timeout = 5;\nmax_connections = 7;\n");
	struct config *cf = unit_config(LISTENER "dispatchers = 3;\n"
	    "io_uring = false;\n");
	struct config *port = unit_config("listeners = ( { name = \"e\"; "
	    "address = \"127.0.0.1\"; port = 1; protocol = \"echo\"; } );\n"
	    "dispatchers = 2;\n");

	ck_assert_uint_eq(config_restart_changes(same, old), 0);
	ck_assert_uint_eq(config_keep_start_only(same, old), 0);
	/* A reloadable key applies: the new snapshot has the new value. */
	ck_assert_uint_eq(same->idle_timeout, 5);
	ck_assert_uint_eq(same->max_connections, 7);
	ck_assert_uint_eq(config_restart_changes(cf, old),
	    CONFIG_RESTART_DISPATCHERS | CONFIG_RESTART_IO_URING);
	ck_assert_uint_eq(cf->dispatchers, 3);
	ck_assert_uint_eq(config_restart_changes(port, old),
	    CONFIG_RESTART_LISTENERS);
	config_unref(port);
	config_unref(cf);
	config_unref(same);
	config_unref(old);
}
END_TEST

#if ER_WITH_SQLITE
/*
 * Keep rows: a change is reported and the running value is kept in the
 * new snapshot; the group's reloadable rows apply.
 */
START_TEST(table_reload_keep)
{
	struct config *old = unit_config(LISTENER "store = { path = \"/a.db\"; "
	    "max_messages = 10; };\n");
	struct config *cf = unit_config(LISTENER "store = { path = \"/b.db\"; "
	    "max_messages = 20; sync = \"normal\"; };\n");
	struct config *none = unit_config(LISTENER);

	ck_assert_uint_eq(config_restart_changes(cf, old), 0);
	ck_assert_uint_eq(config_keep_start_only(cf, old),
	    CONFIG_KEPT_STORE_PATH | CONFIG_KEPT_STORE_SYNC);
	ck_assert_str_eq(cf->store.path, "/a.db");
	ck_assert(cf->store.sync_full);
	ck_assert_uint_eq(cf->store.max_messages, 20);
	ck_assert_uint_eq(config_keep_start_only(none, old),
	    CONFIG_KEPT_STORE_REMOVED);
	ck_assert(none->store.enabled);
	ck_assert_str_eq(none->store.path, "/a.db");
	config_unref(none);
	config_unref(cf);
	config_unref(old);
}
END_TEST
#endif

struct keys {
	struct config_key_doc *k;
	size_t	n;
};

static char *
dup_or_null(const char *s)
{
	return s != NULL ? xstrdup(s) : NULL;
}

static void
collect_key(const struct config_key_doc *key, void *arg)
{
	struct keys *keys = arg;
	struct config_key_doc *k;

	keys->k = xrealloc(keys->k, (keys->n + 1) * sizeof(*keys->k));
	k = &keys->k[keys->n++];
	*k = *key;
	k->group = xstrdup(key->group);
	k->name = xstrdup(key->name);
	k->section = dup_or_null(key->section);
	k->def = dup_or_null(key->def);
}

static void
keys_free(struct keys *keys)
{
	for (size_t i = 0; i < keys->n; i++) {
		free((char *)keys->k[i].group);
		free((char *)keys->k[i].name);
		free((char *)keys->k[i].section);
		free((char *)keys->k[i].def);
	}
	free(keys->k);
}

/* Every key once per group, each with a man page section. */
START_TEST(table_keys_listed)
{
	struct keys keys = { 0 };
	bool tls = false;

	config_keys_each(collect_key, &keys);
	ck_assert_uint_ge(keys.n, 60);
	for (size_t i = 0; i < keys.n; i++) {
		const struct config_key_doc *k = &keys.k[i];

		ck_assert_msg(k->section != NULL && k->section[0] != '\0',
		    "%s.%s: no section", k->group, k->name);
		for (size_t j = 0; j < i; j++)
			ck_assert_msg(strcmp(k->group, keys.k[j].group) != 0 ||
			    strcmp(k->name, keys.k[j].name) != 0,
			    "%s.%s twice", k->group, k->name);
		tls |= strcmp(k->group, "listeners.tls") == 0 &&
		    strcmp(k->name, "ciphers") == 0;
	}
	ck_assert(tls);
	keys_free(&keys);
}
END_TEST

static char *
read_source(const char *rel)
{
	const char *dir = getenv("ECHOROUTERD_SRCDIR");
	char path[1024], *text;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), "%s/%s", dir != NULL ? dir : ".", rel);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = xcalloc(1, (size_t)n + 1);
	ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return text;
}

/* The man page's text of subsection section (".Ss NAME"), cut off. */
static char *
man_section(char *man, const char *section)
{
	char head[128], *p, *end;

	snprintf(head, sizeof(head), "\n.Ss %s\n", section);
	p = strstr(man, head);
	ck_assert_msg(p != NULL, "no \".Ss %s\" in the man page", section);
	p += strlen(head) - 1;
	for (end = p; (end = strstr(end + 1, "\n.S")) != NULL;)
		if (end[3] == 'h' || end[3] == 's')
			break;
	p = strndup(p, end != NULL ? (size_t)(end - p) + 1 : strlen(p));
	ck_assert_ptr_nonnull(p);
	return p;
}

static bool
is_key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_';
}

/* Whether text sets name somewhere, "name =", commented out or not. */
static bool
sample_sets(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; (p = strstr(p, name)) != NULL; p += n) {
		const char *q = p + n;

		if (p > text && is_key_char(p[-1]))
			continue;
		while (*q == ' ' || *q == '\t')
			q++;
		if (*q == '=')
			return true;
	}
	return false;
}

/*
 * The default the man page's item line gives: "default 30", "default
 * false", "default Qq info" ("Qq \\&" is ""), "default Qo auto Qc"; NULL
 * where it gives none or "none".
 */
static char *
item_default(const char *item)
{
	const char *p = strstr(item, "; default ");
	size_t n;

	if (p == NULL && (p = strstr(item, "( default ")) == NULL)
		return NULL;
	p = strstr(p, "default ") + 8;
	if (strncmp(p, "Qq ", 3) == 0 || strncmp(p, "Qo ", 3) == 0)
		p += 3;
	if (strncmp(p, "\\&", 2) == 0)
		return xstrdup("");
	n = strcspn(p, " ;)");
	if (n == 4 && strncmp(p, "none", 4) == 0)
		return NULL;
	p = strndup(p, n);
	ck_assert_ptr_nonnull(p);
	return (char *)p;
}

/*
 * The man page's item line for k: where it says what a reload does,
 * "( ... ; reload )" or "( ... ; restart )", and where it gives a
 * default, it says what the row does.
 */
static void
check_item(const char *line, const struct config_key_doc *k)
{
	char *item = strndup(line, strcspn(line, "\n")), *def;

	ck_assert_ptr_nonnull(item);
	if (strstr(item, "; restart )") != NULL)
		ck_assert_msg(k->restart, "%s %s: the man page says restart, "
		    "the table reload", k->group, k->name);
	if (strstr(item, "; reload )") != NULL)
		ck_assert_msg(!k->restart, "%s %s: the man page says reload, "
		    "the table restart", k->group, k->name);
	if ((def = item_default(item)) != NULL) {
		ck_assert_msg(k->def != NULL && strcmp(def, k->def) == 0,
		    "%s %s: the man page's default is \"%s\", the table's "
		    "\"%s\"", k->group, k->name, def, k->def ? k->def : "");
		free(def);
	}
	free(item);
}

/*
 * Every key is an ".It Va" item of its section of echorouterd.conf(5) and
 * set in the sample conf/echorouterd.conf (as a comment where it is
 * optional); every ".It Va" item of the man page is a key.
 */
START_TEST(table_keys_documented)
{
	char *man = read_source("man/echorouterd.conf.5");
	char *sample = read_source("conf/echorouterd.conf");
	struct keys keys = { 0 };
	char item[160], *p;

	config_keys_each(collect_key, &keys);
	for (size_t i = 0; i < keys.n; i++) {
		const struct config_key_doc *k = &keys.k[i];
		char *sec = man_section(man, k->section);

		/*
		 * Looked for after the group's own item: accounts and smpp
		 * both have an alphabet, each with its own default.
		 */
		snprintf(item, sizeof(item), "\n.It Va %s ", k->group);
		if (k->group[0] == '\0' || (p = strstr(sec, item)) == NULL)
			p = sec;
		snprintf(item, sizeof(item), "\n.It Va %s ", k->name);
		ck_assert_msg((p = strstr(p, item)) != NULL, "%s %s: no "
		    "\".It Va %s\" in section \"%s\" of echorouterd.conf.5",
		    k->group, k->name, k->name, k->section);
		check_item(p + 1, k);
		ck_assert_msg(sample_sets(sample, k->name), "%s %s: not in "
		    "conf/echorouterd.conf", k->group, k->name);
		free(sec);
	}
	for (p = man; (p = strstr(p, "\n.It Va ")) != NULL; p++) {
		size_t n = strcspn(p + 8, " \n");
		bool known = false;

		for (size_t i = 0; i < keys.n && !known; i++)
			known = strlen(keys.k[i].name) == n &&
			    strncmp(keys.k[i].name, p + 8, n) == 0;
		ck_assert_msg(known, "echorouterd.conf.5 describes \"%.*s\", "
		    "which no table has", (int)n, p + 8);
	}
	keys_free(&keys);
	free(man);
	free(sample);
}
END_TEST

Suite *
config_table_suite(void)
{
	Suite *s = suite_create("config_table");
	TCase *walk = tcase_create("walker");
	TCase *reload = tcase_create("reload");
	TCase *docs = tcase_create("docs");

	tcase_add_test(walk, table_types);
	tcase_add_test(walk, table_units);
	tcase_add_test(walk, table_ranges);
	tcase_add_test(walk, table_unknown_keys);
	tcase_add_test(walk, table_defaults);
	tcase_add_test(reload, table_reload_restart);
#if ER_WITH_SQLITE
	tcase_add_test(reload, table_reload_keep);
#endif
	tcase_add_test(docs, table_keys_listed);
	tcase_add_test(docs, table_keys_documented);
	suite_add_tcase(s, walk);
	suite_add_tcase(s, reload);
	suite_add_tcase(s, docs);
	return s;
}
