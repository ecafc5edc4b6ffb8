/* helpers.c: temporary configuration files and clocks for the unit suites. */
#include "helpers.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
