/* helpers.h: what several unit suites share: temporary configs and clocks. */
#ifndef ECHOROUTERD_TESTS_HELPERS_H
#define ECHOROUTERD_TESTS_HELPERS_H

#include <stddef.h>
#include <stdint.h>

struct config;

/*
 * Writes text to a file in a fresh mkdtemp(3) directory, loads it with
 * config_load and removes the file and the directory again. The file's
 * path is copied to path (when not NULL) so that error texts can be
 * checked against it. Returns what config_load returned; *errors as there.
 */
struct config *unit_config_load(const char *text, char *path, size_t pathlen,
	    char **errors);

/* Like unit_config_load, but fails the test unless text is valid. */
struct config *unit_config(const char *text);

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t unit_now_ms(void);

/* Sleeps ms milliseconds. */
void	unit_sleep_ms(unsigned ms);

/*
 * A copy of n bytes ending exactly where a PROT_NONE page begins, so that
 * any read past them faults (picohttpparser's trick). unit_guard_free
 * unmaps it.
 */
struct unit_guard {
	void	*map;
	size_t	len;
};

uint8_t	*unit_guarded(const void *p, size_t n, struct unit_guard *g);
void	unit_guard_free(struct unit_guard *g);

/* Number of lines (LF-terminated) in s; 0 for NULL. */
size_t	unit_count_lines(const char *s);

/*
 * Loads text, expects it rejected with exactly one error on line line
 * whose text contains what.
 */
void	unit_expect_one_error(const char *text, int line, const char *what);

#endif
