/* test_config.c: config_load: the sample, defaults, and every kind of error. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "helpers.h"
#include "proto.h"
#include "suites.h"
#include "util.h"
#include "version.h"

/* One valid listener, on line 1 when it comes first. */
#define LISTENER							\
	"listeners = ( { name = \"e\"; address = \"127.0.0.1\"; port = 0; "\
	"protocol = \"echo\"; } );\n"

static unsigned
online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > CONFIG_DISPATCHERS_MAX ?
	    CONFIG_DISPATCHERS_MAX : (unsigned)n;
}

static const char *
sample_path(void)
{
	static char path[1024];
	const char *dir = getenv("ECHOROUTERD_SRCDIR");

	snprintf(path, sizeof(path), "%s/conf/echorouterd.conf",
	    dir != NULL ? dir : ".");
	return path;
}

static bool
ends_with(const char *s, const char *end)
{
	size_t n = strlen(s), m = strlen(end);

	return n >= m && strcmp(s + n - m, end) == 0;
}

/*
 * The sample enables the store (make run uses it): a build without SQLite
 * refuses it, naming the build option, and nothing else.
 */
START_TEST(config_sample_loads)
{
	char *errors = NULL;
	struct config *cf = config_load(sample_path(), &errors);
	const struct listener_conf *l;

	if (!ER_WITH_SQLITE) {
		ck_assert_ptr_null(cf);
		ck_assert_ptr_nonnull(errors);
		ck_assert_msg(strstr(errors, "\"store\" needs echorouterd "
		    "built with WITH_SQLITE") != NULL &&
		    unit_count_lines(errors) == 1, "%s", errors);
		free(errors);
		return;
	}
	ck_assert_msg(cf != NULL, "%s: %s", sample_path(),
	    errors ? errors : "?");
	ck_assert_ptr_null(errors);
	ck_assert_str_eq(cf->path, sample_path());
	ck_assert(cf->dispatchers_auto);
	ck_assert_uint_eq(cf->dispatchers, online_cpus());
	ck_assert(!cf->cpu_affinity);
	ck_assert(cf->io_uring);
	ck_assert(cf->sched_batch);
	ck_assert_uint_eq(cf->max_connections, 100000);
	ck_assert_uint_eq(cf->idle_timeout, 600);
	ck_assert_uint_eq(cf->shutdown_timeout, 10);
	ck_assert_int_eq(cf->log_level, LOG_LEVEL_INFO);
	ck_assert_uint_eq(cf->limits.max_line, 4096);
	ck_assert_uint_eq(cf->limits.output_high_watermark, 1048576);
	ck_assert_uint_eq(cf->limits.output_limit, 8388608);
	ck_assert_uint_ge(cf->nlisteners, 1);
	l = config_find_listener(cf, "echo");
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(l->address, "127.0.0.1");
	ck_assert_uint_eq(l->port, 7007);
	ck_assert_ptr_eq(l->proto, &proto_echo);
	ck_assert_int_gt(l->line, 0);
	ck_assert_ptr_null(config_find_listener(cf, "no-such-listener"));
	/* The sample's store stays inside the checkout, next to the file. */
	ck_assert(cf->store.enabled);
	ck_assert_msg(cf->store.path[0] == '/' && ends_with(cf->store.path,
	    "/conf/store.db"), "store.path %s", cf->store.path);
	ck_assert(cf->store.sync_full);
	config_unref(cf);
}
END_TEST

START_TEST(config_defaults)
{
	struct config *cf = unit_config("# only a listener\n" LISTENER);

	ck_assert(cf->dispatchers_auto);
	ck_assert_uint_eq(cf->dispatchers, online_cpus());
	ck_assert(!cf->cpu_affinity);
	ck_assert(cf->io_uring);
	ck_assert(cf->sched_batch);
	ck_assert_uint_eq(cf->max_connections, 100000);
	ck_assert_uint_eq(cf->idle_timeout, 600);
	ck_assert_uint_eq(cf->shutdown_timeout, 10);
	ck_assert_int_eq(cf->log_level, LOG_LEVEL_INFO);
	ck_assert_uint_eq(cf->limits.max_line, 4096);
	ck_assert_uint_eq(cf->limits.output_high_watermark, 1 << 20);
	ck_assert_uint_eq(cf->limits.output_limit, 8 << 20);
	ck_assert_uint_eq(cf->nlisteners, 1);
	ck_assert_str_eq(cf->listeners[0].name, "e");
	ck_assert_uint_eq(cf->listeners[0].port, 0);
	ck_assert_int_eq(cf->listeners[0].line, 2);
	ck_assert_uint_eq(atomic_load(&cf->refs), 1);
	config_unref(cf);
}
END_TEST

START_TEST(config_dispatchers_auto)
{
	struct config *cf = unit_config("dispatchers = \"auto\";\n" LISTENER);

	ck_assert(cf->dispatchers_auto);
	ck_assert_uint_eq(cf->dispatchers, online_cpus());
	ck_assert_uint_ge(cf->dispatchers, 1);
	config_unref(cf);
}
END_TEST

START_TEST(config_dispatchers_numeric)
{
	static const unsigned values[] = { 1, 3, 7, 1024 };
	char text[512];

	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		struct config *cf;

		snprintf(text, sizeof(text), "dispatchers = %u;\n" LISTENER,
		    values[i]);
		cf = unit_config(text);
		ck_assert(!cf->dispatchers_auto);
		ck_assert_uint_eq(cf->dispatchers, values[i]);
		config_unref(cf);
	}
}
END_TEST

START_TEST(config_every_value)
{
	struct config *cf = unit_config(
	    "dispatchers = 5;\n"
	    "cpu_affinity = true; io_uring = false; sched_batch = false;\n"
	    "max_connections = 12;\n"
	    "idle_timeout = 0;\n"
	    "shutdown_timeout = 3600;\n"
	    "log = { level = \"debug\"; };\n"
	    "limits = { max_line = 64; output_high_watermark = 4096;\n"
	    "  output_limit = 4294967296L; };\n"
	    "listeners = (\n"
	    "  { name = \"a\"; address = \"127.0.0.1\"; port = 7007;"
	    " protocol = \"echo\"; },\n"
	    "  { name = \"b-2.x_y\"; address = \"::1\"; port = 7007;"
	    " protocol = \"echo\"; },\n"
	    "  { name = \"c\"; address = \"127.0.0.1\"; port = 65535;"
	    " protocol = \"echo\"; }\n"
	    ");\n");
	const struct listener_conf *l;

	ck_assert_uint_eq(cf->dispatchers, 5);
	ck_assert(cf->cpu_affinity);
	ck_assert(!cf->io_uring);
	ck_assert(!cf->sched_batch);
	ck_assert_uint_eq(cf->max_connections, 12);
	ck_assert_uint_eq(cf->idle_timeout, 0);
	ck_assert_uint_eq(cf->shutdown_timeout, 3600);
	ck_assert_int_eq(cf->log_level, LOG_LEVEL_DEBUG);
	ck_assert_uint_eq(cf->limits.max_line, 64);
	ck_assert_uint_eq(cf->limits.output_high_watermark, 4096);
	ck_assert_uint_eq(cf->limits.output_limit, 4294967296ULL);
	ck_assert_uint_eq(cf->nlisteners, 3);
	l = config_find_listener(cf, "b-2.x_y");
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(l->address, "::1");
	ck_assert_uint_eq(l->port, 7007);
	ck_assert_int_eq(l->line, 11);
	l = config_find_listener(cf, "c");
	ck_assert_ptr_nonnull(l);
	ck_assert_uint_eq(l->port, 65535);
	ck_assert_int_eq(l->line, 12);
	config_unref(cf);
}
END_TEST

/* Port 0 means "any free port": two listeners may both ask for it. */
START_TEST(config_port_zero_twice)
{
	struct config *cf = unit_config("listeners = (\n"
	    "  { name = \"a\"; address = \"127.0.0.1\"; port = 0;"
	    " protocol = \"echo\"; },\n"
	    "  { name = \"b\"; address = \"127.0.0.1\"; port = 0;"
	    " protocol = \"echo\"; }\n"
	    ");\n");

	ck_assert_uint_eq(cf->nlisteners, 2);
	config_unref(cf);
}
END_TEST

struct bad_case {
	const char *text;
	int	line;
	const char *what;
};

static const struct bad_case bad_cases[] = {
	/* Unknown keys, at every level. */
	{ "# comment\n\nbogus = 1;\n" LISTENER, 3, "bogus: unknown setting" },
	{ LISTENER "log = {\n  level = \"info\";\n  colour = true;\n};\n", 4,
	    "log.colour: unknown setting" },
	{ LISTENER "limits = {\n  max_lines = 100;\n};\n", 3,
	    "limits.max_lines: unknown setting" },
	{ "listeners = (\n  {\n    name = \"e\";\n"
	    "    address = \"127.0.0.1\";\n    port = 0;\n"
	    "    protocol = \"echo\";\n    backlog = 5;\n  }\n);\n", 7,
	    "listeners.backlog: unknown setting" },
	/* Wrong types. */
	{ LISTENER "dispatchers = true;\n", 2, "dispatchers: expected" },
	{ LISTENER "dispatchers = \"many\";\n", 2, "dispatchers: expected" },
	{ LISTENER "dispatchers = 2.0;\n", 2, "dispatchers: expected" },
	{ LISTENER "cpu_affinity = 1;\n", 2,
	    "cpu_affinity: expected true or false" },
	{ LISTENER "io_uring = \"yes\";\n", 2,
	    "io_uring: expected true or false" },
	{ LISTENER "sched_batch = 0;\n", 2,
	    "sched_batch: expected true or false" },
	{ LISTENER "max_connections = \"lots\";\n", 2,
	    "max_connections: expected an integer" },
	{ LISTENER "idle_timeout = 1.5;\n", 2,
	    "idle_timeout: expected an integer" },
	{ LISTENER "shutdown_timeout = false;\n", 2,
	    "shutdown_timeout: expected an integer" },
	{ LISTENER "log = \"info\";\n", 2, "log: expected a group" },
	{ LISTENER "log = { level = 6; };\n", 2, "level: expected a string" },
	{ LISTENER "limits = 5;\n", 2, "limits: expected a group" },
	{ LISTENER "limits = { max_line = true; };\n", 2,
	    "max_line: expected an integer or a size such as \"4G\"" },
	{ LISTENER "limits = { max_line = \"4kB\"; };\n", 2,
	    "max_line: \"4kB\" is not a size: digits and an optional K, M, "
	    "G or T" },
	{ LISTENER "limits = { max_line = \"4 K\"; };\n", 2,
	    "max_line: \"4 K\" is not a size" },
	{ LISTENER "limits = { max_line = \"K\"; };\n", 2,
	    "max_line: \"K\" is not a size" },
	{ LISTENER "limits = { max_line = \"-4K\"; };\n", 2,
	    "max_line: \"-4K\" is not a size" },
	{ LISTENER "limits = { max_line = \"2M\"; };\n", 2,
	    "max_line: \"2M\" is out of range 64..1048576 bytes" },
	{ LISTENER "limits = { max_pdu_size = \"1023\"; };\n", 2,
	    "max_pdu_size: \"1023\" is out of range 1024..1048576 bytes" },
	{ LISTENER "limits = { output_limit = \"99999999999999999999T\"; };\n",
	    2, "output_limit: \"99999999999999999999T\" is out of range" },
	{ LISTENER "limits = { output_limit = \"16777216T\"; };\n", 2,
	    "output_limit: \"16777216T\" is out of range" },
	/*
	 * libconfig 1.5 keeps the low 32 bits of a plain integer literal
	 * (4294967296 is 0, 4294967297 is 1): say so and what to write.
	 */
	{ LISTENER "limits = {\n  output_limit = 4294967296;\n};\n", 3,
	    "output_limit: 4294967296 is beyond a plain libconfig integer "
	    "(-2147483648..2147483647); write 4294967296L or a size such as "
	    "\"4G\"" },
	{ LISTENER "limits = { output_limit =\n  0x100001000; };\n", 2,
	    "output_limit: 0x100001000 is beyond a plain libconfig integer" },
	/* The second of two keys of one name on one line is the one cut. */
	{ "listeners = ( { name = \"a\"; address = \"127.0.0.1\"; port = 0; "
	    "protocol = \"echo\"; }, { name = \"b\"; address = \"127.0.0.1\"; "
	    "port = 4294967296; protocol = \"echo\"; } );\n", 1,
	    "port: 4294967296 is beyond a plain libconfig integer" },
	{ "listeners = ( { name = \"a\"; address = \"127.0.0.1\"; port = 1L; "
	    "protocol = \"echo\"; }, { name = \"b\"; address = \"127.0.0.1\"; "
	    "port = 4294967297; protocol = \"echo\"; } );\n", 1,
	    "port: 4294967297 is beyond a plain libconfig integer" },
	{ LISTENER "max_connections = 4294967297;\n", 2,
	    "max_connections: 4294967297 is beyond a plain libconfig integer "
	    "(-2147483648..2147483647); write 4294967297L" },
	{ LISTENER "idle_timeout: -4294967296;\n", 2,
	    "idle_timeout: -4294967296 is beyond a plain libconfig integer" },
	{ LISTENER "shutdown_timeout = 99999999999999999999;\n", 2,
	    "shutdown_timeout: 99999999999999999999 is beyond" },
	{ "listeners = (\n  { name = \"e\"; address = \"127.0.0.1\";\n"
	    "    port = \"7007\"; protocol = \"echo\"; }\n);\n", 3,
	    "port: expected an integer" },
	{ "listeners = (\n  { name = \"e\"; address = 127;\n"
	    "    port = 1; protocol = \"echo\"; }\n);\n", 2,
	    "address: expected a string" },
	{ "\nlisteners = { name = \"e\"; };\n", 2,
	    "listeners: expected a list" },
	{ "listeners = (\n  5\n);\n", 2, "each entry must be a group" },
	/* Out of range. */
	{ LISTENER "dispatchers = 0;\n", 2,
	    "dispatchers: 0 is out of range 1..1024" },
	{ LISTENER "dispatchers = 1025;\n", 2,
	    "dispatchers: 1025 is out of range 1..1024" },
	{ "listeners = (\n  { name = \"e\"; address = \"127.0.0.1\";\n"
	    "    port = 70000; protocol = \"echo\"; }\n);\n", 3,
	    "port: 70000 is out of range 0..65535" },
	{ "listeners = (\n  { name = \"e\"; address = \"127.0.0.1\";\n"
	    "    port = -1; protocol = \"echo\"; }\n);\n", 3,
	    "port: -1 is out of range" },
	{ LISTENER "max_connections = 0;\n", 2,
	    "max_connections: 0 is out of range" },
	{ LISTENER "idle_timeout = 31536001;\n", 2,
	    "idle_timeout: 31536001 is out of range" },
	{ LISTENER "shutdown_timeout = 3601;\n", 2,
	    "shutdown_timeout: 3601 is out of range" },
	{ LISTENER "limits = {\n  max_line = 63;\n};\n", 3,
	    "max_line: 63 is out of range" },
	{ LISTENER "limits = {\n  max_line = 1048577;\n};\n", 3,
	    "max_line: 1048577 is out of range" },
	{ LISTENER "limits = {\n  output_high_watermark = 4095;\n};\n", 3,
	    "output_high_watermark: 4095 is out of range" },
	{ LISTENER "limits = {\n  output_limit = 4294967297L;\n};\n", 3,
	    "output_limit: 4294967297 is out of range" },
	{ LISTENER "log = {\n  level = \"verbose\";\n};\n", 3,
	    "log.level: \"verbose\" is not one of" },
	/* Listener problems. */
	{ "listeners = (\n"
	    "  { name = \"a\"; address = \"127.0.0.1\"; port = 1;"
	    " protocol = \"echo\"; },\n"
	    "  { name = \"a\"; address = \"127.0.0.1\"; port = 2;"
	    " protocol = \"echo\"; }\n);\n", 3,
	    "listener name \"a\" is already used on line 2" },
	{ "listeners = (\n"
	    "  { name = \"a\"; address = \"127.0.0.1\"; port = 7007;"
	    " protocol = \"echo\"; },\n\n"
	    "  { name = \"b\"; address = \"127.0.0.1\"; port = 7007;"
	    " protocol = \"echo\"; }\n);\n", 4,
	    "127.0.0.1 port 7007 is already used by \"a\"" },
	{ "listeners = (\n  { name = \"e\"; address = \"127.0.0.1\";\n"
	    "    protocol = \"echo\"; }\n);\n", 2, "\"port\" is missing" },
	{ "listeners = (\n  { address = \"127.0.0.1\"; port = 1;\n"
	    "    protocol = \"echo\"; }\n);\n", 2, "\"name\" is missing" },
	{ "listeners = (\n  { name = \"e\"; port = 1;\n"
	    "    protocol = \"echo\"; }\n);\n", 2, "\"address\" is missing" },
	{ "listeners = (\n  { name = \"e\"; address = \"::1\"; port = 1; }\n"
	    ");\n", 2, "\"protocol\" is missing" },
	{ "listeners = (\n  { name = \"e\";\n    address = \"localhost\";\n"
	    "    port = 1; protocol = \"echo\"; }\n);\n", 3,
	    "address \"localhost\" is not an IPv4 or IPv6 literal" },
	{ "listeners = (\n  { name = \"e\"; address = \"127.0.0.256\";\n"
	    "    port = 1; protocol = \"echo\"; }\n);\n", 2,
	    "address \"127.0.0.256\" is not" },
	{ "listeners = (\n  { name = \"e\"; address = \"\"; port = 1;\n"
	    "    protocol = \"echo\"; }\n);\n", 2, "address \"\" is not" },
	{ "listeners = (\n  { name = \"e\"; address = \"127.0.0.1\";\n"
	    "    port = 1;\n    protocol = \"gopher\"; }\n);\n", 4,
	    "protocol \"gopher\" is unknown (known: " },
	{ "listeners = (\n  { name = \"has space\"; address = \"::1\";\n"
	    "    port = 1; protocol = \"echo\"; }\n);\n", 2,
	    "listener name \"has space\": use 1-64 of" },
	{ "listeners = (\n  { name = \"\"; address = \"::1\";\n"
	    "    port = 1; protocol = \"echo\"; }\n);\n", 2,
	    "listener name \"\": use" },
	{ "listeners = (\n  { name = \"a123456789b123456789c123456789"
	    "d123456789e123456789f123456789g1234\";\n    address = \"::1\";"
	    " port = 1; protocol = \"echo\"; }\n);\n", 2, "use 1-64 of" },
	{ "# nothing yet\nlisteners = ();\n", 2,
	    "listeners: at least one listener is needed" },
	/* Limits that contradict each other, reported on the group. */
	{ LISTENER "\nlimits = {\n  output_high_watermark = 65536;\n"
	    "  output_limit = 8192;\n};\n", 3,
	    "output_limit (8192) is below output_high_watermark (65536)" },
	{ LISTENER "limits = { output_high_watermark = 16777216; };\n", 2,
	    "output_limit (8388608) is below output_high_watermark" },
	/* Accounts and routes. */
	{ LISTENER "accounts = (\n  { id = \"a\"; password = \"p\";"
	    " role = 1; }\n);\n", 3, "accounts.role: unknown setting" },
	{ LISTENER "accounts = (\n  { id = \"a\"; }\n);\n", 3,
	    "\"password\" is missing" },
	{ LISTENER "accounts = (\n  { id = \"a\"; password = \"p\"; },\n"
	    "  { id = \"a\"; password = \"q\"; }\n);\n", 4,
	    "account \"a\" is already defined on line 3" },
	{ LISTENER "accounts = (\n  { id = \"a b\"; password = \"p\"; }\n"
	    ");\n", 3, "account id \"a b\": use 1-64 of" },
	{ LISTENER "accounts = { id = \"a\"; };\n", 2,
	    "accounts: expected a list" },
	{ LISTENER "routes = (\n  { prefix = \"+1\"; to = \"a\"; },\n"
	    "  { prefix = \"+1\"; to = \"b\"; }\n);\n", 4,
	    "route prefix \"+1\" is already used on line 3" },
	{ LISTENER "routes = (\n  { prefix = \"+1\"; }\n);\n", 3,
	    "\"to\" is missing" },
	{ LISTENER "routes = (\n  { prefix = \"+1\"; to = \"a\";\n"
	    "    via = \"x\"; }\n);\n", 4, "routes.via: unknown setting" },
	{ LISTENER "limits = {\n  output_stall_timeout = 86401;\n};\n", 3,
	    "output_stall_timeout: 86401 is out of range" },
	/* source_addrs: 1-32 address prefixes. */
	{ LISTENER "accounts = (\n  { id = \"a\"; password = \"p\";\n"
	    "    source_addrs = [ ]; }\n);\n", 4,
	    "source_addrs: give 1 to 32 prefixes" },
	{ LISTENER "accounts = (\n  { id = \"a\"; password = \"p\";\n"
	    "    source_addrs = ( ); }\n);\n", 4,
	    "source_addrs: give 1 to 32 prefixes" },
	{ LISTENER "accounts = (\n  { id = \"a\"; password = \"p\";\n"
	    "    source_addrs = [ \"+1555\", \"a b\" ]; }\n);\n", 4,
	    "source_addrs prefix \"a b\": use 1-64 of" },
	{ LISTENER "accounts = (\n  { id = \"a\"; password = \"p\";\n"
	    "    source_addrs = [ \"\" ]; }\n);\n", 4,
	    "source_addrs prefix \"\": use 1-64 of" },
	{ LISTENER "accounts = (\n  { id = \"a\"; password = \"p\";\n"
	    "    source_addrs = \"+1555\"; }\n);\n", 4,
	    "source_addrs: expected a list of address prefixes" },
	{ LISTENER "accounts = (\n  { id = \"a\"; password = \"p\";\n"
	    "    source_addrs = { p = \"+1555\"; }; }\n);\n", 4,
	    "source_addrs: expected a list of address prefixes" },
	{ LISTENER "accounts = (\n  { id = \"a\"; password = \"p\";\n"
	    "    source_addrs = [ 1555 ]; }\n);\n", 4,
	    "source_addrs: expected a string" },
	{ LISTENER "accounts = (\n  { id = \"a\"; password = \"p\";\n"
	    "    coding = \"utf8\"; }\n);\n", 4,
	    "accounts.coding: \"utf8\" is not one of auto, ucs2, latin1" },
	{ LISTENER "smpp = { alphabet = \"ucs2\"; };\n", 2,
	    "smpp.alphabet: \"ucs2\" is not one of gsm, latin1, ascii" },
	{ LISTENER "smpp = { long = \"split\"; };\n", 2,
	    "smpp.long: \"split\" is not one of udh, sar, payload" },
	{ LISTENER "smpp = { max_parts = 256; };\n", 2,
	    "max_parts: 256 is out of range 1..255" },
	{ LISTENER "accounts = (\n  { id = \"a\"; password = \"p\";\n"
	    "    max_parts = 0; }\n);\n", 4,
	    "max_parts: 0 is out of range 1..255" },
	/* Syntax errors: the line libconfig stopped on. */
	{ LISTENER "dispatchers = 2;\n\nidle_timeout = = 5;\n", 4,
	    "syntax error" },
	{ LISTENER "log = {\n  level = \"info\";\n", 4, "syntax error" },
};

START_TEST(config_bad_case)
{
	const struct bad_case *bc = &bad_cases[_i];

	unit_expect_one_error(bc->text, bc->line, bc->what);
}
END_TEST

/* A 64-character name is the longest allowed. */
START_TEST(config_name_max)
{
	struct config *cf = unit_config("listeners = ( { name = "
	    "\"a123456789b123456789c123456789d123456789e123456789f123456789"
	    "g123\"; address = \"::1\"; port = 1; protocol = \"echo\"; } );\n");

	ck_assert_uint_eq(strlen(cf->listeners[0].name), CONFIG_NAME_MAX);
	config_unref(cf);
}
END_TEST

START_TEST(config_no_listeners)
{
	char path[600], *errors = NULL;
	struct config *cf = unit_config_load("dispatchers = 2;\n", path,
	    sizeof(path), &errors);

	ck_assert_ptr_null(cf);
	ck_assert_ptr_nonnull(errors);
	ck_assert_msg(strncmp(errors, path, strlen(path)) == 0 &&
	    errors[strlen(path)] == ':', "no FILE: in \"%s\"", errors);
	ck_assert_ptr_nonnull(strstr(errors,
	    "listeners: at least one listener is needed"));
	ck_assert_uint_eq(unit_count_lines(errors), 1);
	free(errors);
}
END_TEST

START_TEST(config_missing_file)
{
	const char *path = "/nonexistent-dir-erd/echorouterd.conf";
	char *errors = NULL;
	struct config *cf = config_load(path, &errors);

	ck_assert_ptr_null(cf);
	ck_assert_ptr_nonnull(errors);
	ck_assert_msg(strncmp(errors, path, strlen(path)) == 0 &&
	    errors[strlen(path)] == ':', "no FILE: in \"%s\"", errors);
	ck_assert_ptr_nonnull(strstr(errors, "cannot read"));
	ck_assert_ptr_nonnull(strstr(errors, "No such file or directory"));
	ck_assert_uint_eq(unit_count_lines(errors), 1);
	free(errors);
}
END_TEST

/* Every problem in a file is reported, in order, each with its line. */
START_TEST(config_all_errors_reported)
{
	static const int lines[] = { 2, 3, 6, 9, 12, 14 };
	const char *text =
	    "# several mistakes\n"					/* 1 */
	    "dispatchers = 0;\n"					/* 2 */
	    "colour = \"blue\";\n"					/* 3 */
	    "log = {\n"							/* 4 */
	    "  level = \"info\";\n"					/* 5 */
	    "  level2 = 1;\n"						/* 6 */
	    "};\n"							/* 7 */
	    "listeners = (\n"						/* 8 */
	    "  { name = \"a\"; address = \"127.0.0.1\"; port = 99999;"	/* 9 */
	    " protocol = \"echo\"; },\n"
	    "  { name = \"b\";\n"					/* 10 */
	    "    address = \"127.0.0.1\"; port = 1;\n"		/* 11 */
	    "    protocol = \"smtp\"; }\n"				/* 12 */
	    ");\n"							/* 13 */
	    "cpu_affinity = \"yes\";\n";				/* 14 */
	char path[600], *errors = NULL, *p;
	struct config *cf = unit_config_load(text, path, sizeof(path), &errors);

	ck_assert_ptr_null(cf);
	ck_assert_ptr_nonnull(errors);
	ck_assert_msg(unit_count_lines(errors) == ARRAY_LEN(lines),
	    "expected %zu errors, got:\n%s", ARRAY_LEN(lines), errors);
	p = errors;
	for (size_t i = 0; i < ARRAY_LEN(lines); i++) {
		char prefix[700];

		snprintf(prefix, sizeof(prefix), "%s:%d: ", path, lines[i]);
		ck_assert_msg(strncmp(p, prefix, strlen(prefix)) == 0,
		    "error %zu: expected \"%s...\" in:\n%s", i, prefix,
		    errors);
		p = strchr(p, '\n') + 1;
	}
	free(errors);
}
END_TEST

/* A listener with only a name: three fields missing, three errors. */
START_TEST(config_missing_fields_each_reported)
{
	char path[600], *errors = NULL;
	struct config *cf = unit_config_load("listeners = (\n"
	    "  { name = \"only\"; }\n);\n", path, sizeof(path), &errors);

	ck_assert_ptr_null(cf);
	ck_assert_ptr_nonnull(errors);
	ck_assert_uint_eq(unit_count_lines(errors), 3);
	ck_assert_ptr_nonnull(strstr(errors, "\"address\" is missing"));
	ck_assert_ptr_nonnull(strstr(errors, "\"port\" is missing"));
	ck_assert_ptr_nonnull(strstr(errors, "\"protocol\" is missing"));
	free(errors);
}
END_TEST

/*
 * Regression: a listener field of the wrong type was reported twice, as
 * "expected a string" and again as "missing".
 */
START_TEST(config_wrong_type_is_not_also_missing)
{
	static const char *const texts[] = {
		"listeners = (\n  { name = 5; address = \"::1\";"
		" port = 1; protocol = \"echo\"; }\n);\n",
		"listeners = (\n  { name = \"a\"; address = true;"
		" port = 1; protocol = \"echo\"; }\n);\n",
		"listeners = (\n  { name = \"a\"; address = \"::1\";"
		" port = 1; protocol = [ \"echo\" ]; }\n);\n",
		"listeners = (\n  { name = \"a\"; address = \"::1\";"
		" port = 1.0; protocol = \"echo\"; }\n);\n",
	};
	static const char *const what[] = {
		"name: expected a string", "address: expected a string",
		"protocol: expected a string", "port: expected an integer",
	};

	for (size_t i = 0; i < ARRAY_LEN(texts); i++)
		unit_expect_one_error(texts[i], 2, what[i]);
}
END_TEST

START_TEST(config_accounts_routes)
{
	struct config *cf = unit_config(LISTENER
	    "accounts = (\n"
	    "  { id = \"esme1\"; password = \"secret\"; },\n"
	    "  { id = \"+351-b@x\"; password = \"\"; }\n"
	    ");\n"
	    "routes = ( { prefix = \"+351\"; to = \"esme1\"; } );\n"
	    "limits = { output_stall_timeout = 0; };\n");
	const struct account_conf *a;

	ck_assert_uint_eq(cf->naccounts, 2);
	a = config_find_account(cf, "esme1");
	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(a->password, "secret");
	ck_assert_int_eq(a->line, 3);
	ck_assert_ptr_nonnull(config_find_account(cf, "+351-b@x"));
	ck_assert_ptr_null(config_find_account(cf, "esme2"));
	ck_assert_uint_eq(cf->nroutes, 1);
	ck_assert_str_eq(cf->routes[0].prefix, "+351");
	ck_assert_str_eq(cf->routes[0].to, "esme1");
	ck_assert_uint_eq(cf->limits.output_stall_timeout, 0);
	config_unref(cf);
	cf = unit_config(LISTENER);
	ck_assert_uint_eq(cf->naccounts, 0);
	ck_assert_uint_eq(cf->nroutes, 0);
	ck_assert_uint_eq(cf->limits.output_stall_timeout, 30);
	config_unref(cf);
}
END_TEST

/*
 * alphabet and coding: the smpp group's defaults, and an account's own
 * where it sets one (0, "as the smpp group", where it does not).
 */
START_TEST(config_text_codings)
{
	struct config *cf = unit_config(LISTENER
	    "accounts = (\n"
	    "  { id = \"eu\"; password = \"p\"; alphabet = \"latin1\";\n"
	    "    coding = \"ucs2\"; },\n"
	    "  { id = \"us\"; password = \"p\"; alphabet = \"ascii\"; },\n"
	    "  { id = \"any\"; password = \"p\"; }\n"
	    ");\n");
	const struct account_conf *a;

	ck_assert_uint_eq(cf->smpp.alphabet, CONFIG_ALPHABET_GSM);
	ck_assert_uint_eq(cf->smpp.coding, CONFIG_CODING_AUTO);
	a = config_find_account(cf, "eu");
	ck_assert_uint_eq(a->alphabet, CONFIG_ALPHABET_LATIN1);
	ck_assert_uint_eq(a->coding, CONFIG_CODING_UCS2);
	a = config_find_account(cf, "us");
	ck_assert_uint_eq(a->alphabet, CONFIG_ALPHABET_ASCII);
	ck_assert_uint_eq(a->coding, CONFIG_CODING_SMPP);
	a = config_find_account(cf, "any");
	ck_assert_uint_eq(a->alphabet, CONFIG_ALPHABET_SMPP);
	config_unref(cf);
	cf = unit_config(LISTENER "smpp = { alphabet = \"latin1\";"
	    " coding = \"latin1\"; };\n");
	ck_assert_uint_eq(cf->smpp.alphabet, CONFIG_ALPHABET_LATIN1);
	ck_assert_uint_eq(cf->smpp.coding, CONFIG_CODING_LATIN1);
	config_unref(cf);
}
END_TEST

/* long and max_parts: the smpp group's defaults, an account's own. */
START_TEST(config_long_text)
{
	struct config *cf = unit_config(LISTENER
	    "smpp = { max_parts = 8; };\n"
	    "accounts = (\n"
	    "  { id = \"s\"; password = \"p\"; long = \"sar\";"
	    " max_parts = 255; },\n"
	    "  { id = \"any\"; password = \"p\"; }\n"
	    ");\n");
	const struct account_conf *a;

	ck_assert_uint_eq(cf->smpp.long_how, CONFIG_LONG_UDH);
	ck_assert_uint_eq(cf->smpp.max_parts, 8);
	a = config_find_account(cf, "s");
	ck_assert_uint_eq(a->long_how, CONFIG_LONG_SAR);
	ck_assert_uint_eq(a->max_parts, 255);
	a = config_find_account(cf, "any");
	ck_assert_uint_eq(a->long_how, CONFIG_LONG_SMPP);
	ck_assert_uint_eq(a->max_parts, 0);
	config_unref(cf);
	cf = unit_config(LISTENER "smpp = { long = \"payload\"; };\n");
	ck_assert_uint_eq(cf->smpp.long_how, CONFIG_LONG_PAYLOAD);
	ck_assert_uint_eq(cf->smpp.max_parts, 16);
	config_unref(cf);
}
END_TEST

/* source_addrs: a list or an array of prefixes, up to 32. */
START_TEST(config_source_addrs)
{
	char text[4096];
	size_t n;
	struct config *cf = unit_config(LISTENER
	    "accounts = (\n"
	    "  { id = \"shop\"; password = \"p\";\n"
	    "    source_addrs = [ \"+1555\", \"MyShop\" ]; },\n"
	    "  { id = \"gw\"; password = \"p\";\n"
	    "    source_addrs = ( \"+44\" ); },\n"
	    "  { id = \"free\"; password = \"p\"; }\n"
	    ");\n");
	const struct account_conf *a;

	a = config_find_account(cf, "shop");
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->nsource_addrs, 2);
	ck_assert_str_eq(a->source_addrs[0], "+1555");
	ck_assert_str_eq(a->source_addrs[1], "MyShop");
	a = config_find_account(cf, "gw");
	ck_assert_uint_eq(a->nsource_addrs, 1);
	ck_assert_str_eq(a->source_addrs[0], "+44");
	a = config_find_account(cf, "free");
	ck_assert_uint_eq(a->nsource_addrs, 0);
	config_unref(cf);

	/* 32 is the most; 33 is an error on the source_addrs line. */
	for (int max = 32; max <= 33; max++) {
		n = (size_t)snprintf(text, sizeof(text), LISTENER
		    "accounts = (\n  { id = \"a\"; password = \"p\";\n"
		    "    source_addrs = [ ");
		for (int i = 0; i < max; i++)
			n += (size_t)snprintf(text + n, sizeof(text) - n,
			    "%s\"+1%02d\"", i > 0 ? ", " : "", i);
		snprintf(text + n, sizeof(text) - n, " ]; }\n);\n");
		if (max == 32) {
			cf = unit_config(text);
			a = config_find_account(cf, "a");
			ck_assert_uint_eq(a->nsource_addrs, 32);
			ck_assert_str_eq(a->source_addrs[31], "+131");
			config_unref(cf);
		} else {
			unit_expect_one_error(text, 4,
			    "source_addrs: give 1 to 32 prefixes");
		}
	}
}
END_TEST

START_TEST(config_errors_optional)
{
	struct config *cf = unit_config_load("bogus = 1;\n", NULL, 0, NULL);

	ck_assert_ptr_null(cf);
}
END_TEST

/*
 * A setting of an optional feature names the build option when the feature
 * is built out, and goes on to its group's normal handling when it is in
 * (until the feature parses it: an unknown setting). Check-build tests
 * the built-out side on a binary made with every option off.
 */
START_TEST(config_feature_groups)
{
	static const struct {
		const char *text;
		int	line;
		bool	built;
		const char *out, *in;
	} cases[] = {
		{ LISTENER "\nstore = { path = \"/tmp/x.db\"; x = 1; };\n", 3,
		    ER_WITH_SQLITE, "\"store\" needs echorouterd built with "
		    "WITH_SQLITE (this build has it off)",
		    "store.x: unknown setting" },
		{ LISTENER "cluster = { node = \"a\"; servers = ( "
		    "\"nats://127.0.0.1\" ); x = 1; };\n", 2,
		    ER_WITH_NATS, "\"cluster\" needs echorouterd built with "
		    "WITH_NATS (this build has it off)",
		    "cluster.x: unknown setting" },
		{ "listeners = (\n  { name = \"e\"; address = \"::1\";\n"
		    "    port = 0; protocol = \"echo\";\n"
		    "    tls = { certificate = \"c.pem\"; key = \"k.pem\"; "
		    "x = 1; }; }\n);\n", 4,
		    ER_WITH_TLS, "\"tls\" needs echorouterd built with WITH_TLS "
		    "(this build has it off)", "tls.x: unknown setting" },
		{ LISTENER "http = { x = 1; };\n", 2,
		    ER_WITH_CURL, "\"http\" needs echorouterd built with "
		    "WITH_CURL (this build has it off)",
		    "http.x: unknown setting" },
	};

	for (size_t i = 0; i < ARRAY_LEN(cases); i++)
		unit_expect_one_error(cases[i].text, cases[i].line,
		    cases[i].built ? cases[i].in : cases[i].out);
}
END_TEST

#if ER_WITH_CURL
/* http.callback_allow: any address by default, else the blocks given. */
START_TEST(config_http_callbacks)
{
	struct config *cf = unit_config(LISTENER);
	const struct http_conf *h = &cf->http;

	ck_assert_uint_eq(h->ncallback_allow, 2);
	ck_assert_int_eq(h->callback_allow[0].family, AF_INET);
	ck_assert_uint_eq(h->callback_allow[0].bits, 0);
	ck_assert_int_eq(h->callback_allow[1].family, AF_INET6);
	ck_assert_uint_eq(h->callback_timeout, 10);
	ck_assert_uint_eq(h->callback_retries, 8);
	ck_assert_uint_eq(h->callback_concurrency, 4);
	ck_assert_uint_eq(h->callback_queue, 100000);
	config_unref(cf);
	cf = unit_config(LISTENER "http = { callback_allow = [ "
	    "\"10.0.0.0/8\", \"2001:db8::1\" ]; callback_retries = 0; };\n");
	h = &cf->http;
	ck_assert_uint_eq(h->ncallback_allow, 2);
	ck_assert_uint_eq(h->callback_allow[0].bits, 8);
	ck_assert_uint_eq(h->callback_allow[1].bits, 128);
	ck_assert_uint_eq(h->callback_retries, 0);
	config_unref(cf);
	/* An empty list allows nothing. */
	cf = unit_config(LISTENER "http = { callback_allow = []; };\n");
	ck_assert_uint_eq(cf->http.ncallback_allow, 0);
	config_unref(cf);
	unit_expect_one_error(LISTENER "http = { callback_allow = [ "
	    "\"10.0.0.0/33\" ]; };\n", 2, "http.callback_allow "
	    "\"10.0.0.0/33\": expected an address block");
	unit_expect_one_error(LISTENER "http = { callback_allow = "
	    "\"10.0.0.0/8\"; };\n", 2, "http.callback_allow: expected a "
	    "list");
	unit_expect_one_error(LISTENER "http = { callback_concurrency = 0; "
	    "};\n", 2, "callback_concurrency");
}
END_TEST
#endif

#if ER_WITH_TLS
/* Each bad tls group: one error, naming what is wrong. */
START_TEST(config_tls_errors)
{
	static const struct {
		const char *group;
		const char *what;
	} cases[] = {
		{ "key = \"/k.pem\";", "tls: \"certificate\" is missing" },
		{ "certificate = \"/c.pem\";", "tls: \"key\" is missing" },
		{ "certificate = \"/c.pem\"; key = \"/k.pem\"; "
		    "min_version = \"TLSv1.1\";", "tls.min_version \"TLSv1.1\"" },
		{ "certificate = \"/c.pem\"; key = \"/k.pem\"; "
		    "verify_client = true;", "verify_client = true needs \"ca\"" },
		{ "certificate = \"/c.pem\"; key = \"/k.pem\"; "
		    "verify_client = 1;", "verify_client" },
		{ "certificate = \"/c.pem\"; key = \"/k.pem\"; sni = 1;",
		    "tls.sni: unknown setting" },
		/* Well formed: the files are read, and are not there. */
		{ "certificate = \"/nonexistent/c.pem\"; key = \"/k.pem\";",
		    "listener \"e\": tls.certificate /nonexistent/c.pem: " },
	};
	char text[1024];

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		snprintf(text, sizeof(text), "listeners = ( { name = \"e\"; "
		    "address = \"::1\"; port = 0; protocol = \"echo\";\n"
		    "  tls = { %s }; } );\n", cases[i].group);
		unit_expect_one_error(text, 1 + (strstr(cases[i].what, "listener") ==
		    NULL), cases[i].what);
	}
}
END_TEST

/* handshake_timeout: 10 by default, 1 to 3600. */
START_TEST(config_tls_handshake_timeout)
{
	struct config *cf = unit_config(LISTENER);

	ck_assert_uint_eq(cf->limits.handshake_timeout, 10);
	config_unref(cf);
	cf = unit_config(LISTENER "limits = { handshake_timeout = 3; };\n");
	ck_assert_uint_eq(cf->limits.handshake_timeout, 3);
	config_unref(cf);
	unit_expect_one_error(LISTENER "limits = { handshake_timeout = 0; };\n",
	    2, "handshake_timeout");
}
END_TEST

/* Handshakes under way: 10000 in all, 1000 per address by default; 0 none. */
START_TEST(config_tls_max_handshakes)
{
	struct config *cf = unit_config(LISTENER);

	ck_assert_uint_eq(cf->limits.max_handshakes, 10000);
	ck_assert_uint_eq(cf->limits.max_handshakes_per_ip, 1000);
	config_unref(cf);
	cf = unit_config(LISTENER "limits = { max_handshakes = 0; "
	    "max_handshakes_per_ip = 7; };\n");
	ck_assert_uint_eq(cf->limits.max_handshakes, 0);
	ck_assert_uint_eq(cf->limits.max_handshakes_per_ip, 7);
	config_unref(cf);
	unit_expect_one_error(LISTENER "limits = { max_handshakes = -1; };\n",
	    2, "max_handshakes");
	unit_expect_one_error(LISTENER "limits = { max_handshakes_per_ip = "
	    "\"many\"; };\n", 2, "max_handshakes_per_ip");
}
END_TEST
#endif

/* Socket buffers: 0 (the kernel's) by default, else 4096 to 64 MiB. */
START_TEST(config_socket_buffers)
{
	struct config *cf = unit_config(LISTENER);

	ck_assert_uint_eq(cf->limits.socket_send_buffer, 0);
	ck_assert_uint_eq(cf->limits.socket_receive_buffer, 0);
	config_unref(cf);
	cf = unit_config(LISTENER "limits = { socket_send_buffer = 16384; "
	    "socket_receive_buffer = 65536; };\n");
	ck_assert_uint_eq(cf->limits.socket_send_buffer, 16384);
	ck_assert_uint_eq(cf->limits.socket_receive_buffer, 65536);
	config_unref(cf);
	unit_expect_one_error(LISTENER "limits = { socket_send_buffer = 100; };\n",
	    2, "limits.socket_send_buffer: 100; use 0");
	unit_expect_one_error(LISTENER "limits = { socket_receive_buffer = "
	    "100000000; };\n", 2, "socket_receive_buffer");
}
END_TEST

/*
 * Byte sizes take a unit (powers of 1024, either case) or an integer; the
 * largest plain integer and an L-suffixed one still load.
 */
START_TEST(config_byte_sizes_with_units)
{
	struct config *cf = unit_config(LISTENER "limits = {\n"
	    "  max_line = \"4K\"; output_high_watermark = \"1g\";\n"
	    "  output_limit = \"4G\"; max_pdu_size = \"1M\";\n"
	    "  socket_send_buffer = \"64k\"; socket_receive_buffer = \"0\";\n"
	    "};\n");

	ck_assert_uint_eq(cf->limits.max_line, 4096);
	ck_assert_uint_eq(cf->limits.output_high_watermark, 1 << 30);
	ck_assert_uint_eq(cf->limits.output_limit, 4294967296ULL);
	ck_assert_uint_eq(cf->limits.max_pdu_size, 1 << 20);
	ck_assert_uint_eq(cf->limits.socket_send_buffer, 65536);
	ck_assert_uint_eq(cf->limits.socket_receive_buffer, 0);
	config_unref(cf);
	cf = unit_config(LISTENER "limits = { output_limit = 4294967296L;\n"
	    "  output_high_watermark = 0x40000000; };\n"
	    "max_connections = 10000000; idle_timeout = 0x0;\n");
	ck_assert_uint_eq(cf->limits.output_limit, 4294967296ULL);
	ck_assert_uint_eq(cf->limits.output_high_watermark, 1 << 30);
	config_unref(cf);
	unit_expect_one_error(LISTENER "max_connections = 2147483648;\n", 2,
	    "max_connections: 2147483648 is beyond");
#if ER_WITH_SQLITE
	cf = unit_config(LISTENER "store = { path = \"/s.db\";\n"
	    "  max_bytes = \"4G\"; };\n");
	ck_assert_uint_eq(cf->store.max_bytes, 4294967296ULL);
	config_unref(cf);
	cf = unit_config(LISTENER "store = { path = \"/s.db\";\n"
	    "  max_bytes = \"512M\"; };\n");
	ck_assert_uint_eq(cf->store.max_bytes, 512ULL << 20);
	config_unref(cf);
	cf = unit_config(LISTENER "store = { path = \"/s.db\";\n"
	    "  max_bytes = \"8388607T\"; };\n");
	ck_assert_uint_eq(cf->store.max_bytes, 8388607ULL << 40);
	config_unref(cf);
#endif
}
END_TEST

#if ER_WITH_NATS
/* Every cluster setting, and the defaults of those left out. */
START_TEST(config_cluster_every_value)
{
	char creds[] = "/tmp/erd-unit-creds-XXXXXX", text[1024];
	int fd = mkstemp(creds);
	struct config *cf;
	const struct cluster_conf *cl;

	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(text, sizeof(text), LISTENER
	    "cluster = {\n"
	    "  node = \"node_1-B\";\n"
	    "  servers = ( \"nats://127.0.0.1:4222\", \"tls://h:4223\" );\n"
	    "  subject_prefix = \"erd.prod\";\n"
	    "  request_timeout = 5;\n"
	    "  claim_ttl = 30;\n"
	    "  credentials = \"%s\";\n"
	    "};\n", creds);
	cf = unit_config(text);
	unlink(creds);
	cl = &cf->cluster;

	ck_assert(cl->enabled);
	ck_assert_str_eq(cl->node, "node_1-B");
	ck_assert_uint_eq(cl->nservers, 2);
	ck_assert_str_eq(cl->servers[1], "tls://h:4223");
	ck_assert_str_eq(cl->subject_prefix, "erd.prod");
	ck_assert_uint_eq(cl->request_timeout, 5);
	ck_assert_uint_eq(cl->claim_ttl, 30);
	ck_assert_str_eq(cl->credentials, creds);
	config_unref(cf);

	cf = unit_config(LISTENER "cluster = { node = \"a\"; servers = ( "
	    "\"nats://x\" ); };\n");
	ck_assert_str_eq(cf->cluster.subject_prefix, "erd");
	ck_assert_uint_eq(cf->cluster.request_timeout, 2);
	ck_assert_uint_eq(cf->cluster.claim_ttl, 10);
	ck_assert_str_eq(cf->cluster.credentials, "");
	config_unref(cf);
	cf = unit_config(LISTENER);
	ck_assert(!cf->cluster.enabled);
	config_unref(cf);
}
END_TEST

/*
 * A credentials file that is missing or cannot be read is the config's
 * error (-t and start fail), not a NATS server that never answers.
 */
START_TEST(config_cluster_credentials_unreadable)
{
	char dir[] = "/tmp/erd-unit-creds-XXXXXX", text[1024];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(text, sizeof(text), LISTENER "cluster = { node = \"a\"; "
	    "servers = ( \"nats://x\" );\n  credentials = \"%s/none.creds\"; "
	    "};\n", dir);
	unit_expect_one_error(text, 3, "cluster.credentials: cannot read");
	/* A directory opens, but reads nothing. */
	snprintf(text, sizeof(text), LISTENER "cluster = { node = \"a\"; "
	    "servers = ( \"nats://x\" );\n  credentials = \"%s\"; };\n",
	    dir);
	unit_expect_one_error(text, 3, "cluster.credentials: cannot read");
	rmdir(dir);
}
END_TEST

/* Each bad cluster value: one error, naming the setting. */
START_TEST(config_cluster_errors)
{
	static const struct {
		const char *group;
		const char *what;
	} cases[] = {
		{ "node = \"a.b\"; servers = ( \"nats://x\" );",
		    "cluster.node: \"a.b\"" },
		{ "node = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"; "
		    "servers = ( \"nats://x\" );", "cluster.node" },
		{ "servers = ( \"nats://x\" );", "\"node\" is missing" },
		{ "node = \"a\";", "\"servers\" is missing" },
		{ "node = \"a\"; servers = ( );", "give 1 to 16 servers" },
		{ "node = \"a\"; servers = ( \"http://x\" );",
		    "not a nats:// or tls:// URL" },
		{ "node = \"a\"; servers = ( \"nats://x\" ); "
		    "subject_prefix = \"a..b\";", "cluster.subject_prefix" },
		{ "node = \"a\"; servers = ( \"nats://x\" ); "
		    "subject_prefix = \"a.*\";", "cluster.subject_prefix" },
		{ "node = \"a\"; servers = ( \"nats://x\" ); "
		    "request_timeout = 0;", "request_timeout" },
		{ "node = \"a\"; servers = ( \"nats://x\" ); "
		    "claim_ttl = 1;", "claim_ttl" },
	};
	char text[1024];

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		snprintf(text, sizeof(text), LISTENER "cluster = { %s };\n",
		    cases[i].group);
		unit_expect_one_error(text, 2, cases[i].what);
	}
}
END_TEST
#endif

#if ER_WITH_NATS && ER_WITH_SQLITE
#define CLUSTER_A "cluster = { node = \"a\"; servers = ( \"nats://x\" ); };\n"

/*
 * store.backend: "jetstream" takes no path and needs a cluster; both it
 * and replicas take effect at start only.
 */
START_TEST(config_store_jetstream)
{
	struct config *old, *cf = unit_config(LISTENER CLUSTER_A
	    "store = { backend = \"jetstream\"; replicas = 3; };\n");

	ck_assert(cf->store.enabled);
	ck_assert(cf->store.jetstream);
	ck_assert_uint_eq(cf->store.replicas, 3);
	old = cf;
	cf = unit_config(LISTENER CLUSTER_A "store = { path = \"/a.db\"; "
	    "backend = \"sqlite\"; };\n");
	ck_assert(!cf->store.jetstream);
	ck_assert_uint_eq(config_keep_start_only(cf, old),
	    CONFIG_KEPT_STORE_PATH | CONFIG_KEPT_STORE_BACKEND);
	ck_assert(cf->store.jetstream);
	ck_assert_uint_eq(cf->store.replicas, 3);
	config_unref(cf);
	config_unref(old);
	unit_expect_one_error(LISTENER "store = { backend = \"jetstream\"; };\n",
	    2, "\"jetstream\" needs a cluster group");
	unit_expect_one_error(LISTENER CLUSTER_A "store = { backend = \"x\"; "
	    "path = \"/a.db\"; };\n", 3, "\"x\" is not one of sqlite, "
	    "jetstream");
	unit_expect_one_error(LISTENER CLUSTER_A "store = { backend = "
	    "\"sqlite\"; };\n", 3, "\"path\" is missing");
	unit_expect_one_error(LISTENER CLUSTER_A "store = { backend = "
	    "\"jetstream\"; replicas = 6; };\n", 3, "replicas");
	unit_expect_one_error(LISTENER CLUSTER_A "store = { backend = "
	    "\"jetstream\"; shards = 2; };\n", 3, "the JetStream backend "
	    "has one shard");
}
END_TEST
#endif

#if ER_WITH_SQLITE
/* store.shards: "auto" (0), 1..32, restart only. */
START_TEST(config_store_shards_values)
{
	struct config *old, *cf = unit_config(LISTENER
	    "store = { path = \"/a.db\"; };\n");

	ck_assert_uint_eq(cf->store.shards, 0);
	old = cf;
	cf = unit_config(LISTENER "store = { path = \"/a.db\"; shards = 32; };\n");
	ck_assert_uint_eq(cf->store.shards, 32);
	ck_assert_uint_eq(config_keep_start_only(cf, old),
	    CONFIG_KEPT_STORE_SHARDS);
	ck_assert_uint_eq(cf->store.shards, 0);
	config_unref(cf);
	config_unref(old);
	cf = unit_config(LISTENER "store = { path = \"/a.db\"; "
	    "shards = \"auto\"; };\n");
	ck_assert_uint_eq(cf->store.shards, 0);
	/* "auto": one per reactor, at most 8. */
	cf->dispatchers = 2;
	ck_assert_uint_eq(config_store_shards(cf), 2);
	cf->dispatchers = 16;
	ck_assert_uint_eq(config_store_shards(cf), 8);
	cf->store.shards = 12;
	ck_assert_uint_eq(config_store_shards(cf), 12);
	config_unref(cf);
	unit_expect_one_error(LISTENER "store = { path = \"/a.db\"; "
	    "shards = 33; };\n", 2, "shards");
	unit_expect_one_error(LISTENER "store = { path = \"/a.db\"; "
	    "shards = \"many\"; };\n", 2, "store.shards: expected \"auto\" "
	    "or a number 1..32");
	unit_expect_one_error(LISTENER "store = { path = \"/a.db\"; "
	    "shards = 1.5; };\n", 2, "store.shards: expected");
}
END_TEST
#endif

#if ER_WITH_SQLITE
/* Every store setting, the large ones as int64 (an L suffix). */
START_TEST(config_store_every_value)
{
	struct config *cf = unit_config(LISTENER
	    "store = {\n"
	    "  path = \"/var/lib/echorouterd/store.db\";\n"
	    "  sync = \"normal\";\n"
	    "  default_validity = 31536000;\n"
	    "  max_messages = 9223372036854775807L;\n"
	    "  max_bytes = 10737418240L;\n"
	    "  account_max_messages = 1;\n"
	    "};\n");
	const struct store_conf *st = &cf->store;

	ck_assert(st->enabled);
	ck_assert_str_eq(st->path, "/var/lib/echorouterd/store.db");
	ck_assert(!st->sync_full);
	ck_assert_uint_eq(st->default_validity, 31536000);
	ck_assert_uint_eq(st->max_messages, 9223372036854775807ULL);
	ck_assert_uint_eq(st->max_bytes, 10737418240ULL);
	ck_assert_uint_eq(st->account_max_messages, 1);
	ck_assert_int_eq(st->line, 2);
	config_unref(cf);

	/* The sample's numbers, plain ints; "full" said out loud. */
	cf = unit_config(LISTENER "store = { path = \"/x.db\"; sync = \"full\";"
	    " default_validity = 1; max_messages = 1000000;"
	    " max_bytes = 1073741824; account_max_messages = 100000; };\n");
	ck_assert(cf->store.sync_full);
	ck_assert_uint_eq(cf->store.default_validity, 1);
	ck_assert_uint_eq(cf->store.max_bytes, 1073741824);
	config_unref(cf);
}
END_TEST

/* Only path given: the rest is the documented defaults. */
START_TEST(config_store_defaults)
{
	struct config *cf = unit_config(LISTENER
	    "store = { path = \"/tmp/s.db\"; };\n");
	const struct store_conf *st = &cf->store;

	ck_assert(st->enabled);
	ck_assert_str_eq(st->path, "/tmp/s.db");
	ck_assert(st->sync_full);
	ck_assert_uint_eq(st->default_validity, 86400);
	ck_assert_uint_eq(st->max_messages, 1000000);
	ck_assert_uint_eq(st->max_bytes, 1073741824);
	ck_assert_uint_eq(st->account_max_messages, 100000);
	config_unref(cf);
}
END_TEST

/* The directory of the config file at path, into dir. */
static void
dir_of(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');

	ck_assert_ptr_nonnull(slash);
	snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

/* A relative store path is relative to the config file's directory. */
START_TEST(config_store_relative_path)
{
	static const char *const rel[] = {
		"store.db", "sub/s.db", "../build/store.db", "./s.db",
	};
	char text[512], path[600], dir[600], want[1300], *errors = NULL;
	struct config *cf;

	for (size_t i = 0; i < ARRAY_LEN(rel); i++) {
		snprintf(text, sizeof(text), LISTENER
		    "store = { path = \"%s\"; };\n", rel[i]);
		cf = unit_config_load(text, path, sizeof(path), &errors);
		ck_assert_msg(cf != NULL, "%s", errors ? errors : "?");
		dir_of(path, dir, sizeof(dir));
		snprintf(want, sizeof(want), "%s/%s", dir, rel[i]);
		ck_assert_str_eq(cf->store.path, want);
		config_unref(cf);
	}
}
END_TEST

/* A config named by a relative path: the store path is made absolute. */
START_TEST(config_store_relative_config)
{
	const char *tmp = getenv("TMPDIR");
	char dir[512], cwd[4096], want[5000], *errors = NULL;
	struct config *cf;
	FILE *f;

	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	snprintf(dir, sizeof(dir), "%s/erd-unit-XXXXXX",
	    tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chdir(dir), 0);
	ck_assert_int_eq(mkdir("etc", 0700), 0);
	ck_assert_ptr_nonnull(f = fopen("etc/a.conf", "w"));
	fputs(LISTENER "store = { path = \"q/store.db\"; };\n", f);
	fclose(f);
	ck_assert_ptr_nonnull(f = fopen("b.conf", "w"));
	fputs(LISTENER "store = { path = \"store.db\"; };\n", f);
	fclose(f);
	ck_assert_ptr_nonnull(getcwd(dir, sizeof(dir)));

	cf = config_load("etc/a.conf", &errors);
	ck_assert_msg(cf != NULL, "%s", errors ? errors : "?");
	snprintf(want, sizeof(want), "%s/etc/q/store.db", dir);
	ck_assert_str_eq(cf->store.path, want);
	config_unref(cf);
	cf = config_load("b.conf", &errors);
	ck_assert_msg(cf != NULL, "%s", errors ? errors : "?");
	snprintf(want, sizeof(want), "%s/store.db", dir);
	ck_assert_str_eq(cf->store.path, want);
	config_unref(cf);

	unlink("etc/a.conf");
	unlink("b.conf");
	rmdir("etc");
	ck_assert_int_eq(chdir(cwd), 0);
	rmdir(dir);
}
END_TEST

static const struct bad_case store_bad_cases[] = {
	{ LISTENER "store = {\n  path = \"/s.db\";\n  sync = \"fast\";\n};\n",
	    4, "store.sync: \"fast\" is not one of full, normal" },
	{ LISTENER "store = { path = \"/s.db\";\n sync = true; };\n", 3,
	    "sync: expected a string" },
	{ LISTENER "store = {\n  path = \"/s.db\";\n  colour = 1;\n};\n", 4,
	    "store.colour: unknown setting" },
	{ LISTENER "store = {\n  sync = \"full\";\n};\n", 2,
	    "store: \"path\" is missing" },
	{ LISTENER "store = { path = \"\"; };\n", 2, "store.path: empty" },
	{ LISTENER "store = { path = 5; };\n", 2, "path: expected a string" },
	{ LISTENER "store = \"/s.db\";\n", 2, "store: expected a group" },
	{ LISTENER "store = { path = \"/s.db\";\n default_validity = 0; };\n",
	    3, "default_validity: 0 is out of range 1..31536000" },
	{ LISTENER "store = { path = \"/s.db\";\n"
	    " default_validity = 31536001; };\n", 3,
	    "default_validity: 31536001 is out of range" },
	{ LISTENER "store = { path = \"/s.db\";\n max_messages = 0; };\n", 3,
	    "max_messages: 0 is out of range 1.." },
	{ LISTENER "store = { path = \"/s.db\";\n max_messages = -5; };\n", 3,
	    "max_messages: -5 is out of range" },
	{ LISTENER "store = { path = \"/s.db\";\n max_bytes = \"1 G\"; };\n",
	    3, "max_bytes: \"1 G\" is not a size" },
	{ LISTENER "store = { path = \"/s.db\";\n max_bytes = \"0M\"; };\n",
	    3, "max_bytes: \"0M\" is out of range 1..9223372036854775807 "
	    "bytes" },
	{ LISTENER "store = { path = \"/s.db\";\n max_bytes = 4294967296; };\n",
	    3, "max_bytes: 4294967296 is beyond a plain libconfig integer "
	    "(-2147483648..2147483647); write 4294967296L or a size such as "
	    "\"4G\"" },
	{ LISTENER "store = { path = \"/s.db\";\n max_bytes = 4294967297; };\n",
	    3, "max_bytes: 4294967297 is beyond" },
	{ LISTENER "store = { path = \"/s.db\"; max_messages = 1;\n"
	    " account_max_messages = 1; max_bytes\n =\n 8589934592; };\n",
	    3, "max_bytes: 8589934592 is beyond" },
	{ LISTENER "store = { path = \"/s.db\";\n max_bytes = 1.5; };\n", 3,
	    "max_bytes: expected an integer" },
	{ LISTENER "store = { path = \"/s.db\";\n"
	    " account_max_messages = 0; };\n", 3,
	    "account_max_messages: 0 is out of range" },
};

START_TEST(config_store_bad_case)
{
	const struct bad_case *bc = &store_bad_cases[_i];

	unit_expect_one_error(bc->text, bc->line, bc->what);
}
END_TEST

/* A path that does not fit in struct store_conf is an error, not cut. */
START_TEST(config_store_path_too_long)
{
	char *text = malloc(8192), *p;
	size_t n;

	ck_assert_ptr_nonnull(text);
	n = (size_t)snprintf(text, 8192, LISTENER "store = { path = \"/");
	p = text + n;
	memset(p, 'a', 4200);
	snprintf(p + 4200, 8192 - n - 4200, "\"; };\n");
	unit_expect_one_error(text, 2, "store.path: longer than 4095 characters");
	free(text);
}
END_TEST
#endif

/*
 * A reload keeps what only a restart changes: the store group itself,
 * store.path and store.sync; limits and validity come from the new file.
 */
START_TEST(config_store_reload_keeps)
{
	struct config *none = unit_config(LISTENER), *old, *cf;

	if (!ER_WITH_SQLITE) {
		ck_assert_uint_eq(config_keep_start_only(none, none), 0);
		config_unref(none);
		return;
	}
	old = unit_config(LISTENER "store = { path = \"/a.db\"; "
	    "max_messages = 10; };\n");
	/* Same file: nothing kept. */
	cf = unit_config(LISTENER "store = { path = \"/a.db\"; "
	    "max_messages = 10; };\n");
	ck_assert_uint_eq(config_keep_start_only(cf, old), 0);
	config_unref(cf);
	/* Path and sync changed: the old ones stay, the limits change. */
	cf = unit_config(LISTENER "store = { path = \"/b.db\"; "
	    "sync = \"normal\"; max_messages = 20; default_validity = 60; "
	    "};\n");
	ck_assert_uint_eq(config_keep_start_only(cf, old),
	    CONFIG_KEPT_STORE_PATH | CONFIG_KEPT_STORE_SYNC);
	ck_assert_str_eq(cf->store.path, "/a.db");
	ck_assert(cf->store.sync_full);
	ck_assert_uint_eq(cf->store.max_messages, 20);
	ck_assert_uint_eq(cf->store.default_validity, 60);
	config_unref(cf);
	/* The group removed: the running store and its settings stay. */
	cf = unit_config(LISTENER);
	ck_assert_uint_eq(config_keep_start_only(cf, old),
	    CONFIG_KEPT_STORE_REMOVED);
	ck_assert(cf->store.enabled);
	ck_assert_str_eq(cf->store.path, "/a.db");
	ck_assert_uint_eq(cf->store.max_messages, 10);
	config_unref(cf);
	/* A group added: no store until a restart. */
	cf = unit_config(LISTENER "store = { path = \"/b.db\"; };\n");
	ck_assert_uint_eq(config_keep_start_only(cf, none),
	    CONFIG_KEPT_STORE_ADDED);
	ck_assert(!cf->store.enabled);
	ck_assert_str_eq(cf->store.path, "");
	config_unref(cf);
	/* No store before or after: nothing to keep. */
	cf = unit_config(LISTENER);
	ck_assert_uint_eq(config_keep_start_only(cf, none), 0);
	config_unref(cf);
	config_unref(old);
	config_unref(none);
}
END_TEST

START_TEST(config_ref_unref)
{
	struct config *cf = unit_config(LISTENER);

	ck_assert_uint_eq(atomic_load(&cf->refs), 1);
	ck_assert_ptr_eq(config_ref(cf), cf);
	ck_assert_uint_eq(atomic_load(&cf->refs), 2);
	config_unref(cf);
	ck_assert_uint_eq(atomic_load(&cf->refs), 1);
	ck_assert_str_eq(cf->listeners[0].name, "e");
	config_unref(cf);
	config_unref(NULL);
}
END_TEST

#define REF_THREADS	4
#define REF_ROUNDS	50000

static void *
ref_worker(void *arg)
{
	struct config *cf = arg;

	for (int i = 0; i < REF_ROUNDS; i++) {
		config_ref(cf);
		config_unref(cf);
	}
	config_unref(cf);
	return NULL;
}

/* References taken and dropped from several threads at once. */
START_TEST(config_ref_threads)
{
	struct config *cf = unit_config(LISTENER);
	pthread_t th[REF_THREADS];

	for (int i = 0; i < REF_THREADS; i++) {
		config_ref(cf);
		ck_assert_int_eq(pthread_create(&th[i], NULL, ref_worker, cf),
		    0);
	}
	for (int i = 0; i < REF_THREADS; i++)
		pthread_join(th[i], NULL);
	ck_assert_uint_eq(atomic_load(&cf->refs), 1);
	config_unref(cf);
}
END_TEST

Suite *
config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *ok = tcase_create("valid");
	TCase *bad = tcase_create("errors");
	TCase *ref = tcase_create("refs");

	tcase_add_test(ok, config_sample_loads);
	tcase_add_test(ok, config_defaults);
	tcase_add_test(ok, config_dispatchers_auto);
	tcase_add_test(ok, config_dispatchers_numeric);
	tcase_add_test(ok, config_every_value);
	tcase_add_test(ok, config_port_zero_twice);
	tcase_add_test(ok, config_name_max);
	tcase_add_test(ok, config_accounts_routes);
	tcase_add_test(ok, config_source_addrs);
	tcase_add_test(ok, config_text_codings);
	tcase_add_test(ok, config_long_text);
#if ER_WITH_SQLITE
	tcase_add_test(ok, config_store_every_value);
	tcase_add_test(ok, config_store_defaults);
	tcase_add_test(ok, config_store_relative_path);
	tcase_add_test(ok, config_store_relative_config);
#endif
	tcase_add_test(ok, config_store_reload_keeps);
#if ER_WITH_NATS
	tcase_add_test(ok, config_cluster_every_value);
	tcase_add_test(ok, config_cluster_errors);
	tcase_add_test(ok, config_cluster_credentials_unreadable);
#endif
#if ER_WITH_NATS && ER_WITH_SQLITE
	tcase_add_test(ok, config_store_jetstream);
#endif
#if ER_WITH_SQLITE
	tcase_add_test(ok, config_store_shards_values);
#endif
#if ER_WITH_TLS
	tcase_add_test(ok, config_tls_errors);
	tcase_add_test(ok, config_tls_handshake_timeout);
	tcase_add_test(ok, config_tls_max_handshakes);
#endif
	tcase_add_test(ok, config_socket_buffers);
	tcase_add_test(ok, config_byte_sizes_with_units);
	tcase_set_timeout(ok, 30);
	suite_add_tcase(s, ok);
	tcase_add_loop_test(bad, config_bad_case, 0, (int)ARRAY_LEN(bad_cases));
	tcase_add_test(bad, config_no_listeners);
	tcase_add_test(bad, config_missing_file);
	tcase_add_test(bad, config_all_errors_reported);
	tcase_add_test(bad, config_missing_fields_each_reported);
	tcase_add_test(bad, config_wrong_type_is_not_also_missing);
	tcase_add_test(bad, config_errors_optional);
	tcase_add_test(bad, config_feature_groups);
#if ER_WITH_CURL
	tcase_add_test(bad, config_http_callbacks);
#endif
#if ER_WITH_SQLITE
	tcase_add_loop_test(bad, config_store_bad_case, 0,
	    (int)ARRAY_LEN(store_bad_cases));
	tcase_add_test(bad, config_store_path_too_long);
#endif
	tcase_set_timeout(bad, 30);
	suite_add_tcase(s, bad);
	tcase_add_test(ref, config_ref_unref);
	tcase_add_test(ref, config_ref_threads);
	tcase_set_timeout(ref, 30);
	suite_add_tcase(s, ref);
	return s;
}
