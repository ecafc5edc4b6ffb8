/* cferr.h: a config load's error list and the typed reads that add to it. */
#ifndef ECHOROUTERD_CFERR_H
#define ECHOROUTERD_CFERR_H

#include <libconfig.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * A config file read again, once, to see how its integers were written
 * (an integer libconfig cut to 32 bits), with where each line starts; and
 * the last integer setting looked at, to tell apart settings of one name
 * on one line.
 */
struct cferr_source {
	char	*file;
	char	*text;
	size_t	*lines;			/* where line i + 1 starts */
	size_t	nlines;
	const char *name;		/* the last setting looked at */
	int	line;
	unsigned nth;			/* of that name on that line, from 0 */
};

/* Every problem found, as text: "FILE:LINE: message\n" each. */
struct cferr {
	const char *path;		/* the file, where a setting names none */
	char	*text;
	size_t	len;
	size_t	cap;
	unsigned count;
	struct cferr_source src;
};

/* Adds a problem at s's file and line (e->path, line 0, when s is NULL). */
void	cferr_add(struct cferr *e, const config_setting_t *s,
	    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Adds a problem at file:line. */
void	cferr_at(struct cferr *e, const char *file, int line,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Frees what e holds but its text (the caller's). */
void	cferr_fini(struct cferr *e);

/*
 * The typed reads. Each either stores the value and returns true, or adds
 * the problem (naming the setting) and returns false.
 *
 * cferr_int: an integer within [min, max]; unit names what else the key
 * takes (as " or a size such as \"4G\""), for the error on a literal
 * libconfig cut to 32 bits. cferr_bytes: an integer, or a string of digits
 * with an optional unit K, M, G or T (powers of 1024), within [min, max]
 * bytes.
 */
bool	cferr_int(struct cferr *e, const config_setting_t *s, long long min,
	    long long max, const char *unit, unsigned long long *out);
bool	cferr_bytes(struct cferr *e, const config_setting_t *s,
	    long long min, long long max, unsigned long long *out);
bool	cferr_bool(struct cferr *e, const config_setting_t *s, bool *out);

/* The string value of s, or NULL after reporting a type error. */
const char *cferr_string(struct cferr *e, const config_setting_t *s);

/*
 * A path setting made absolute against the directory of config_path (the
 * configuration file) into out (size n); "" for an empty one. A problem is
 * added naming the setting as what.
 */
void	cferr_path(struct cferr *e, const config_setting_t *k,
	    const char *config_path, const char *what, char *out, size_t n);

#endif
