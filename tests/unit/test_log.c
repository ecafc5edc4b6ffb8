/* test_log.c: log lines, and syslog priorities only when stderr is the journal. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "suites.h"

/* Points stderr at a fresh file; returns its fd for reading back. */
static int
stderr_to_file(char *path, size_t len)
{
	int fd;

	snprintf(path, len, "/tmp/erd-log-XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
	return fd;
}

static void
read_back(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
}

START_TEST(test_journal_stream_matches_stderr)
{
	char path[64], env[64], buf[256];
	int fd = stderr_to_file(path, sizeof(path));
	struct stat st;

	ck_assert_int_eq(fstat(fd, &st), 0);
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
	    (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", env, 1);
	log_init(LOG_LEVEL_INFO);
	log_warnx("disk %d", 7);
	log_info("hello");
	log_debug("not shown");
	read_back(fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "<4>disk 7\n<6>hello\n");
}
END_TEST

START_TEST(test_journal_stream_inherited_elsewhere)
{
	char path[64], buf[256];
	int fd = stderr_to_file(path, sizeof(path));

	/* Set for some other stream (inherited): plain lines. */
	setenv("JOURNAL_STREAM", "1:2", 1);
	log_init(LOG_LEVEL_INFO);
	log_warnx("disk %d", 7);
	errno = ENOENT;
	log_warn("open %s", "x");
	log_info("hello");
	read_back(fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "warning: disk 7\nwarning: open x: "
	    "No such file or directory\nhello\n");
}
END_TEST

START_TEST(test_levels)
{
	ck_assert_int_eq(log_level_parse("DEBUG"), LOG_LEVEL_DEBUG);
	ck_assert_int_eq(log_level_parse("warning"), LOG_LEVEL_WARNING);
	ck_assert_int_eq(log_level_parse("loud"), -1);
	ck_assert_str_eq(log_level_name(LOG_LEVEL_NOTICE), "notice");
	log_set_level(LOG_LEVEL_DEBUG);
	ck_assert(log_is_debug());
	log_set_level(LOG_LEVEL_ERROR);
	ck_assert(!log_is_debug());
}
END_TEST

START_TEST(test_limit_counts_and_reports)
{
	struct log_limit l = { 0 };
	char path[64], buf[256];
	int fd = stderr_to_file(path, sizeof(path)), ok = 0;

	unsetenv("JOURNAL_STREAM");
	log_init(LOG_LEVEL_INFO);
	for (int i = 0; i < LOG_LIMIT_PER_SECOND + 5; i++)
		ok += log_limit_take(&l, 100, "reactor", 3);
	ck_assert_int_eq(ok, LOG_LIMIT_PER_SECOND);
	/* Not over yet: nothing reported. */
	log_limit_report(&l, 100, "reactor", 3);
	read_back(fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	/* Over: the count, once. */
	log_limit_report(&l, 101, "reactor", 3);
	log_limit_report(&l, 102, "reactor", 3);
	read_back(fd, buf, sizeof(buf));
	ck_assert_str_eq(buf, "reactor=3: client records not logged: 5 "
	    "(over 20 a second)\n");
	/* A new second has a full budget; a take in it reports the last. */
	for (int i = 0; i < LOG_LIMIT_PER_SECOND + 1; i++)
		log_limit_take(&l, 103, "reactor", 3);
	ck_assert(log_limit_take(&l, 104, "reactor", 3));
	read_back(fd, buf, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, "not logged: 1 "));
}
END_TEST

Suite *
log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("lines");

	tcase_add_test(tc, test_journal_stream_matches_stderr);
	tcase_add_test(tc, test_journal_stream_inherited_elsewhere);
	tcase_add_test(tc, test_levels);
	tcase_add_test(tc, test_limit_counts_and_reports);
	suite_add_tcase(s, tc);
	return s;
}
