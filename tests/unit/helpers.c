/* helpers.c: temporary configuration files and clocks, guard pages, for the unit suites. */
#include "helpers.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "config.h"

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_msg(f != NULL, "cannot create %s", path);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

struct config *
unit_config_load(const char *text, char *path, size_t pathlen, char **errors)
{
	const char *tmp = getenv("TMPDIR");
	char dir[512], file[600];
	struct config *cf;

	snprintf(dir, sizeof(dir), "%s/erd-unit-XXXXXX",
	    tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
	ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
	snprintf(file, sizeof(file), "%s/test.conf", dir);
	write_file(file, text);
	cf = config_load(file, errors);
	unlink(file);
	rmdir(dir);
	if (path != NULL)
		snprintf(path, pathlen, "%s", file);
	return cf;
}

struct config *
unit_config(const char *text)
{
	char *errors = NULL;
	struct config *cf = unit_config_load(text, NULL, 0, &errors);

	ck_assert_msg(cf != NULL, "config rejected: %s",
	    errors ? errors : "(no text)");
	ck_assert_ptr_null(errors);
	return cf;
}

uint64_t
unit_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
unit_sleep_ms(unsigned ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000,
	};

	while (nanosleep(&ts, &ts) < 0)
		;
}

size_t
unit_count_lines(const char *s)
{
	size_t n = 0;

	for (; s != NULL && *s != '\0'; s++)
		if (*s == '\n')
			n++;
	return n;
}

uint8_t *
unit_guarded(const void *p, size_t n, struct unit_guard *g)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = ((n + pg - 1) / pg + 1) * pg;
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(m, MAP_FAILED);
	ck_assert_int_eq(mprotect(m + len - pg, pg, PROT_NONE), 0);
	g->map = m;
	g->len = len;
	if (n > 0)
		memcpy(m + len - pg - n, p, n);
	return m + len - pg - n;
}

void
unit_guard_free(struct unit_guard *g)
{
	munmap(g->map, g->len);
}

void
unit_expect_one_error(const char *text, int line, const char *what)
{
	char path[600], prefix[700], *errors = NULL;
	struct config *cf = unit_config_load(text, path, sizeof(path), &errors);

	ck_assert_msg(cf == NULL, "accepted a bad config:\n%s", text);
	ck_assert_ptr_nonnull(errors);
	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	ck_assert_msg(strncmp(errors, prefix, strlen(prefix)) == 0,
	    "expected \"%s...\", got \"%s\"", prefix, errors);
	ck_assert_msg(strstr(errors, what) != NULL,
	    "expected \"%s\" in \"%s\"", what, errors);
	ck_assert_msg(unit_count_lines(errors) == 1, "one error expected: %s",
	    errors);
	free(errors);
}
